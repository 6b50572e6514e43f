/* config/cfg.h — tram's settings: one table, four sources, one resolved value.
 *
 * Every setting is a row of one table (config/cfg_table.c): its name (the
 * JSON config file key), type, default, range or choices and help line. The
 * environment variable (TRAM_ + the name in capitals) and the flag (-- + the
 * name with '-' for '_') derive from the name. The parser, `tram --help`,
 * `tram --help-markdown` (docs/configuration.md) and the JSON of
 * `tram serve --check-config` all read the same table.
 *
 * Sources, in rising precedence: built-in defaults < the JSON config file
 * (--config FILE or TRAM_CONFIG) < environment variables TRAM_* < flags. A
 * later source replaces a value (lists too) as a whole; within the flags, a
 * list flag given several times appends, any other flag's last use wins.
 *
 * Value syntax (flags, environment, and strings in the file):
 *   int       decimal integer
 *   size      bytes: an integer with an optional suffix K, M, G or T (powers
 *             of 1024; "KB", "KiB" and lower case mean the same), e.g. 512M
 *   duration  an integer with an optional unit ms, s, m or h; no unit means
 *             seconds, e.g. 30s, 500ms, 10m
 *   bool      true/false, yes/no, on/off, 1/0; a bare flag --x means true
 *             and --no-x false; a flag value only as --x=VALUE
 *   enum      one of the listed choices
 *   list      comma-separated (flags may also repeat)
 * In the config file, ints are JSON integers, sizes JSON integers or strings,
 * durations JSON integers (seconds) or strings, bools true/false, lists
 * arrays of strings, the rest strings.
 *
 * Validation happens once, in cfg_load(), before anything starts: an unknown
 * file key or flag, a wrong type, a value out of range, a bad suffix, two
 * exclusive settings, an unreadable model or API key file each give one
 * message naming the key and its source, e.g.
 *   config file /etc/tram/tram.json: key "port": expected an integer 0..65535, got "abc"
 *   environment TRAM_PORT: expected an integer 0..65535, got "abc"
 *   flag --port: expected an integer 0..65535, got "abc"
 * An unknown TRAM_* environment variable is only warned about: the
 * environment is shared with other programs (test harnesses, wrappers). */
#ifndef TRAM_CFG_H
#define TRAM_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Settings, in table order (the index of a row in cfg_settings). */
typedef enum cfg_key {
  CFG_CONFIG,
  CFG_MODEL,
  CFG_SERVED_MODEL_NAME,
  CFG_DEVICE,
  CFG_THREADS,
  CFG_PRECISION,
  CFG_QUANTIZE,
  CFG_CUDA_GRAPHS,
  CFG_MAX_MODEL_LEN,
  CFG_POOLING,
  CFG_POOLING_NORMALIZE,
  CFG_SPECIAL_TOKENS_IN_INPUT,
  CFG_DEFAULT_MAX_TOKENS,
  CFG_GENERATION_CONFIG,
  CFG_CHAT_TEMPLATE,
  CFG_TOOL_CALL_PARSER,
  CFG_REASONING_PARSER,
  CFG_REASONING_BUDGET,
  CFG_HOST,
  CFG_PORT,
  CFG_UNIX_SOCKET,
  CFG_MAX_CONNECTIONS,
  CFG_MAX_CONNECTIONS_PER_CLIENT,
  CFG_KV_CACHE_BYTES,
  CFG_KV_CACHE_BLOCKS,
  CFG_STATE_SNAPSHOT_BYTES,
  CFG_BLOCK_SIZE,
  CFG_MAX_BATCH_TOKENS,
  CFG_MAX_SEQS,
  CFG_STEP_TARGET_MS,
  CFG_MAX_WAITING,
  CFG_SPECULATIVE,
  CFG_NUM_SPECULATIVE_TOKENS,
  CFG_PROMPT_LOOKUP_MIN,
  CFG_PROMPT_LOOKUP_MAX,
  CFG_SPECULATIVE_MAX_BATCH,
  CFG_DRAFT_MODEL,
  CFG_DRAFT_KV_CACHE_BYTES,
  CFG_MAX_BODY_SIZE,
  CFG_MAX_HEADER_SIZE,
  CFG_REQUEST_TIMEOUT,
  CFG_IDLE_TIMEOUT,
  CFG_SLOW_CLIENT_TIMEOUT,
  CFG_DRAIN_TIMEOUT,
  CFG_DRAIN_GRACE,
  CFG_API_KEYS,
  CFG_API_KEY_FILE,
  CFG_ALLOWED_ORIGINS,
  CFG_EXPOSE_MODEL_PATH,
  CFG_LOG_LEVEL,
  CFG_LOG_FORMAT,
  CFG_LOG_FILE,
  CFG_METRICS,
  CFG_KV_EVENTS,
  CFG_KV_EVENTS_TOPIC,
  CFG_DASHBOARD,
  CFG_GRAMMAR_MAX_SIZE,
  CFG_GRAMMAR_MAX_REPEAT,
  CFG_GRAMMAR_MAX_DEPTH,
  CFG_GRAMMAR_MAX_LITERAL,
  CFG_GRAMMAR_MAX_STACKS,
  CFG_GRAMMAR_MASK_FUEL,
  CFG_GRAMMAR_CACHE_BYTES,
  CFG_GRAMMAR_CACHE_BYTES_PER_GRAMMAR,
  CFG_GRAMMAR_COMPILE_TIMEOUT,
  CFG_GRAMMAR_COMPILE_THREADS,
  CFG_GRAMMAR_COMPILE_QUEUE,
  CFG_N_SETTINGS
} cfg_key_t;

typedef enum cfg_source {
  CFG_SRC_DEFAULT = 0,
  CFG_SRC_FILE,
  CFG_SRC_ENV,
  CFG_SRC_FLAG,
} cfg_source_t;

typedef enum cfg_tool_parser {
  CFG_TOOL_PARSER_AUTO = 0, /* from the chat template's text */
  CFG_TOOL_PARSER_HERMES,   /* <tool_call>{json}</tool_call> (Hermes, Qwen2.5) */
  CFG_TOOL_PARSER_LLAMA3,   /* {"name", "parameters"} JSON, maybe after <|python_tag|> (Llama 3.x) */
  CFG_TOOL_PARSER_MISTRAL,  /* [TOOL_CALLS][{"name", "arguments"}, ...] */
  CFG_TOOL_PARSER_NONE,     /* tools refused */
  CFG_TOOL_PARSER_OPENAI,   /* gpt-oss's harmony: <|channel|>commentary to=functions.NAME<|message|>{json}<|call|> */
} cfg_tool_parser_t;

typedef enum cfg_reasoning_parser {
  CFG_REASONING_AUTO = 0,    /* from the chat template's text (text/reasoning.h); none when it does not think */
  CFG_REASONING_DEEPSEEK_R1, /* <think>...</think>, reasoning until </think> */
  CFG_REASONING_QWEN3,       /* <think>...</think> when the output (or the prompt) opens it */
  CFG_REASONING_GPT_OSS,     /* harmony channels: analysis, final */
  CFG_REASONING_NONE,        /* off: the output is all content */
} cfg_reasoning_parser_t;
typedef enum cfg_pooling {
  CFG_POOLING_AUTO = 0, /* the model file's <arch>.pooling_type, else last */
  CFG_POOLING_LAST,     /* the last token's hidden state (decoder embedding models) */
  CFG_POOLING_MEAN,     /* the mean over the input's tokens */
  CFG_POOLING_CLS,      /* the first token's */
} cfg_pooling_t;

typedef enum cfg_pooling_normalize {
  CFG_POOLING_NORMALIZE_AUTO = 0, /* the model's (a sentence-transformers Normalize module), else true */
  CFG_POOLING_NORMALIZE_TRUE,     /* vectors divided by their L2 norm */
  CFG_POOLING_NORMALIZE_FALSE,    /* as pooled */
} cfg_pooling_normalize_t;

typedef enum cfg_generation_config {
  CFG_GENERATION_CONFIG_AUTO = 0, /* the model file's recommended sampling is the requests' default */
  CFG_GENERATION_CONFIG_NONE,     /* OpenAI's defaults */
} cfg_generation_config_t;

typedef enum cfg_device {
  CFG_DEVICE_CPU = 0,
  CFG_DEVICE_CUDA = 1,
} cfg_device_t;

typedef enum cfg_dashboard {
  CFG_DASHBOARD_AUTO = 0, /* on when listening on loopback or a unix socket only */
  CFG_DASHBOARD_ON = 1,
  CFG_DASHBOARD_OFF = 2,
} cfg_dashboard_t;
/* served_model_name's names after the first, at most. */
#define CFG_MAX_ALIASES 16

/* A list of strings; items and the array are owned by the cfg_t. */
typedef struct cfg_list {
  char **items;
  int n;
} cfg_list_t;

/* The resolved configuration. All fields are read-only after cfg_load();
 * strings are owned by the cfg_t and freed by cfg_free(). An optional string
 * that is not set is NULL (never ""). */
typedef struct cfg {
  /* model and compute */
  char *config;            /* the config file read, or NULL */
  char *model;             /* path of the model file (checked readable) */
  char *served_model_name; /* model name in the API; never NULL: defaults to the
                            * model file's name without ".gguf"; the setting's first
                            * comma-separated name */
  cfg_list_t served_model_aliases; /* the setting's other names (not a setting of its own) */
  int device;              /* cfg_device_t; CUDA only in a CUDA build */
  int threads;             /* CPU compute threads; 0 = one per online core */
  int precision;           /* kern_precision_t: 0 exact, 1 fast (the matmul arithmetic) */
  int quantize;            /* cfg_quantize_choices[quantize]: "off", or the type F32/F16/BF16
                            * weights are quantized to at load ("q8_0", "q4_0", "q4_1") */
  bool cuda_graphs;        /* decode steps replay captured CUDA graphs (model/model_graph.h) */
  int max_model_len;       /* longest sequence (prompt + output); 0 = the model's context */
  int pooling;             /* /v1/embeddings: cfg_pooling_t */
  int pooling_normalize;   /* /v1/embeddings: cfg_pooling_normalize_t (a request's normalize wins) */
  bool special_tokens_in_input; /* control-token texts in request text are those tokens */
  int default_max_tokens;  /* max_tokens of a chat request that gives none; 0 = the model's, else to the end
                            * of the context */
  int generation_config;   /* cfg_generation_config_t */
  char *chat_template;     /* a Jinja chat template file replacing the model's, or NULL */
  int tool_call_parser;    /* cfg_tool_parser_t */
  int reasoning_parser;    /* cfg_reasoning_parser_t */
  int reasoning_budget;    /* thinking tokens before the server closes the reasoning; -1: no limit */
  /* listening */
  char *host;              /* address to bind (IPv4/IPv6 literal or host name) */
  int port;                /* TCP port; 0 = any free port */
  char *unix_socket;       /* Unix socket path, NULL = TCP; when set, replaces host:port */
  int max_connections;     /* open client connections at most */
  int max_connections_per_client; /* of one client address; 0: no limit */
  /* engine: exactly one of kv_cache_bytes and kv_cache_blocks is non-zero */
  int64_t kv_cache_bytes;  /* KV cache budget in bytes (0 when given in blocks) */
  int kv_cache_blocks;     /* KV cache size in blocks (0 when given in bytes) */
  int64_t state_snapshot_bytes; /* hybrid models: memory for recurrent-state snapshots (prefix caching);
                                 * 0: none */
  int block_size;          /* tokens per KV cache block: a power of two, 8..256 */
  int max_batch_tokens;    /* tokens one engine step processes at most (>= max_seqs) */
  int max_seqs;            /* sequences running at once at most */
  int step_target_ms;      /* step time prompt chunks are sized for while decodes run (0: auto) */
  int max_waiting;         /* requests waiting for admission at most; more -> 429 */
  int speculative;         /* 0 off, 1 ngram, 2 draft (sched_spec_method_t) */
  int num_speculative_tokens; /* draft tokens per step */
  int prompt_lookup_min, prompt_lookup_max; /* n-gram sizes of the prompt lookup */
  int speculative_max_batch;  /* speculate only while at most this many sequences run */
  char *draft_model;          /* speculative draft: the draft model file (checked readable), or NULL */
  int64_t draft_kv_cache_bytes; /* the draft model's KV cache; 0: sized from the main one */
  /* HTTP limits and timeouts (milliseconds; 0 = no limit where documented) */
  int64_t max_body_size;   /* bytes of a request body at most; more -> 413 */
  int64_t max_header_size; /* bytes of request line + headers at most; more -> 431 */
  int64_t request_timeout_ms;     /* whole request, arrival to last byte; 0 = none */
  int64_t idle_timeout_ms;        /* keep-alive connection with no request */
  int64_t slow_client_timeout_ms; /* receiving a request, or a client not reading */
  int64_t drain_timeout_ms;       /* on SIGTERM, in-flight requests get this long */
  int64_t drain_grace_ms;         /* on SIGTERM, the listener stays open this long first */
  /* auth */
  cfg_list_t api_keys;     /* accepted bearer keys: the api_keys setting followed by
                            * the lines of api_key_file; n == 0: no auth */
  char *api_key_file;      /* file the extra keys came from, or NULL */
  cfg_list_t allowed_origins; /* CORS: origins answered with Access-Control-Allow-Origin ("*": any) */
  bool expose_model_path;  /* clients see the model setting's path, not the file name alone */
  /* logging and metrics */
  int log_level;           /* log_level_t */
  int log_format;          /* log_format_t */
  char *log_file;          /* log file path, NULL = stderr */
  bool metrics;            /* serve GET /metrics */
  char *kv_events;         /* ZeroMQ endpoint for vLLM's KV-cache events; NULL or "": off */
  char *kv_events_topic;   /* their topic frame */
  int dashboard;           /* cfg_dashboard_t: serve GET /dashboard */
  /* structured output: the bounds of a request's grammar (grammar/gram.h, gram_limits_t) */
  int grammar_max_size;    /* expression nodes, elements and rules of one grammar */
  int grammar_max_repeat;  /* one repetition count, and the copies nested ones multiply to */
  int grammar_max_depth;   /* nesting */
  int64_t grammar_max_literal; /* bytes of one literal, choice or property name */
  int grammar_max_stacks;  /* live parser stacks; alternatives of one rule */
  int grammar_mask_fuel;   /* work of one token mask */
  int64_t grammar_cache_bytes;             /* the token caches of all grammars */
  int64_t grammar_cache_bytes_per_grammar; /* the token cache of one */
  int64_t grammar_compile_timeout_ms;      /* one compile */
  int grammar_compile_threads;             /* threads that compile grammars */
  int grammar_compile_queue;               /* compiles waiting for a thread at most; more -> 429 */
  /* where each setting's value came from */
  cfg_source_t source[CFG_N_SETTINGS];
} cfg_t;

/* The type of a setting. */
typedef enum cfg_type {
  CFG_T_STRING,
  CFG_T_PATH,
  CFG_T_INT,
  CFG_T_SIZE,
  CFG_T_DURATION,
  CFG_T_BOOL,
  CFG_T_ENUM,
  CFG_T_LIST,
} cfg_type_t;

/* Row flags. */
enum {
  CFG_F_NOFILE = 1 << 0, /* not a config file key (only flag and environment) */
  CFG_F_SECRET = 1 << 1, /* value not printed by --check-config */
  CFG_F_POW2 = 1 << 2,   /* int must be a power of two */
};

/* One row of the settings table. */
typedef struct cfg_setting {
  const char *name;           /* file key, snake_case */
  cfg_type_t type;
  const char *group;          /* section in --help and the docs */
  const char *def;            /* default in flag syntax ("" = unset) */
  char short_flag;            /* e.g. 'p' for -p; 0 = none */
  int64_t min, max;           /* int, size, duration (ms): inclusive range */
  const char *const *choices; /* enum: NULL-terminated */
  const char *meta;           /* value placeholder in --help, e.g. "N" */
  unsigned flags;             /* CFG_F_* */
  const char *help;           /* one or two sentences */
  size_t offset;              /* of the field in cfg_t */
} cfg_setting_t;

extern const cfg_setting_t cfg_settings[CFG_N_SETTINGS];

/* The choices of the quantize setting, NULL-terminated: "off", then GGML
 * type names in lower case (cfg_t.quantize indexes it). */
extern const char *const cfg_quantize_choices[];

/* "TRAM_MAX_SEQS" for max_seqs; "--max-seqs" for the flag. Write into buf
 * (at least 64 bytes) and return it. */
char *cfg_env_name(cfg_key_t key, char *buf, size_t len);
char *cfg_flag_name(cfg_key_t key, char *buf, size_t len);

/* Resolves the configuration from the defaults, the config file, the
 * environment `envp` (NULL-terminated "NAME=value" strings, e.g. environ)
 * and the flags argv[0..argc) (the arguments after the command: argv[0] is
 * a flag, not the program name). On success fills *cfg and returns 0; the
 * caller frees it with cfg_free(). On a configuration error writes one
 * message (no trailing newline) into err[errlen], leaves *cfg empty and
 * returns -EINVAL. Warnings (unknown TRAM_* variables) are logged. */
int cfg_load(cfg_t *cfg, int argc, char *const argv[], char *const envp[], char *err,
             size_t errlen);

/* Frees what *cfg owns and zeroes it. Safe on a zeroed cfg_t. */
void cfg_free(cfg_t *cfg);

/* Describes where a value came from: "default", "config file PATH",
 * "environment TRAM_X" or "flag --x". Writes into buf and returns it. */
char *cfg_source_describe(const cfg_t *cfg, cfg_key_t key, char *buf, size_t len);

/* The resolved configuration as a JSON object, for --check-config:
 *   {"config": {"value": null, "source": "default"}, "port": {"value": 8080,
 *    "source": "flag --port"}, ...}
 * sizes in bytes, durations in seconds (a number, may be fractional), secret
 * values replaced by "***" per item. Returns a malloc'ed string the caller
 * frees, or NULL on allocation failure. */
char *cfg_to_json(const cfg_t *cfg);

/* Writes the --help text (usage and every setting with its flag, default,
 * environment variable and file key) or the Markdown reference of
 * docs/configuration.md to `out`. */
void cfg_print_help(FILE *out, const char *prog);
void cfg_print_markdown(FILE *out);

/* Value parsers (flag and environment syntax, see above). Each returns 0 and
 * sets *out, or -EINVAL for a malformed value, or -ERANGE on overflow. */
int cfg_parse_int(const char *s, int64_t *out);
int cfg_parse_size(const char *s, int64_t *out);
int cfg_parse_duration_ms(const char *s, int64_t *out);
int cfg_parse_bool(const char *s, bool *out);
/* Index of s in the NULL-terminated choices, or -1. */
int cfg_parse_enum(const char *s, const char *const *choices);

/* Formats a size as the largest exact unit ("512M", "1G", "1000") or a
 * duration in ms as the largest exact unit ("30s", "500ms", "10m", "0").
 * Write into buf and return it. */
char *cfg_format_size(int64_t bytes, char *buf, size_t len);
char *cfg_format_duration(int64_t ms, char *buf, size_t len);

#endif
