/* config/cfg_table.c — the table of every setting (see cfg.h).
 *
 * Adding a setting: a cfg_key_t value in cfg.h, a field in cfg_t, a row
 * here; --help, the docs table (`tram --help-markdown`), the file keys, the
 * environment variable and the flag follow. Cross-setting rules live in
 * cfg_load.c (validate). The defaults are written in flag syntax and go
 * through the same parser as user values (a unit test checks each one).
 *
 * CPU defaults, chosen for a small machine (2 cores, a few GB of memory,
 * the 135M-parameter default model); docs/configuration.md explains them. */
#include <stddef.h>

#include "config/cfg.h"

#define MS(s) ((int64_t)(s) * 1000)
#define KiB ((int64_t)1 << 10)
#define MiB ((int64_t)1 << 20)
#define GiB ((int64_t)1 << 30)
#define TiB ((int64_t)1 << 40)
#define OFF(field) offsetof(cfg_t, field)

static const char *const devices[] = {"cpu", "cuda", NULL};
static const char *const precisions[] = {"exact", "fast", NULL}; /* kern_precision_t */
const char *const cfg_quantize_choices[] = {"off", "q8_0", "q4_0", "q4_1", NULL}; /* GGML type names */
static const char *const levels[] = {"error", "warn", "info", "debug", NULL}; /* log_level_t */
static const char *const formats[] = {"text", "json", NULL};                 /* log_format_t */
static const char *const spec_methods[] = {"off", "ngram", "draft", NULL}; /* sched_spec_method_t */
static const char *const dashboards[] = {"auto", "on", "off", NULL};         /* cfg_dashboard_t */
static const char *const poolings[] = {"auto", "last", "mean", "cls", NULL}; /* cfg_pooling_t */
static const char *const pool_norms[] = {"auto", "true", "false", NULL};     /* cfg_pooling_normalize_t */
static const char *const gen_configs[] = {"auto", "none", NULL}; /* cfg_generation_config_t */
static const char *const reasoning_parsers[] = {"auto", "deepseek_r1", "qwen3", "gpt_oss", "none", NULL}; /* cfg_reasoning_parser_t */
static const char *const tool_parsers[] = {"auto", "hermes", "llama3_json", "mistral", "none", "openai",
                                            NULL}; /* cfg_tool_parser_t */

const cfg_setting_t cfg_settings[CFG_N_SETTINGS] = {
    [CFG_CONFIG] = {"config", CFG_T_PATH, "General", "", 'c', 0, 0, NULL, "FILE", CFG_F_NOFILE,
                    "JSON config file to read (an object of the keys below). Values from the "
                    "environment and flags override it.",
                    OFF(config)},

    [CFG_MODEL] = {"model", CFG_T_PATH, "Model", "", 'm', 0, 0, NULL, "PATH", 0,
                   "Model file to serve (GGUF). Required.", OFF(model)},
    [CFG_SERVED_MODEL_NAME] = {"served_model_name", CFG_T_STRING, "Model", "", 0, 0, 0, NULL,
                               "NAME[,ALIAS...]", 0,
                               "Model name in the API (/v1/models, the \"model\" field of "
                               "responses), then other names requests may use. Empty: the model "
                               "file's name without \".gguf\".",
                               OFF(served_model_name)},
    [CFG_DEVICE] = {"device", CFG_T_ENUM, "Model", "cpu", 0, 0, 0, devices, "DEVICE", 0,
                    "Compute backend. cuda needs a build with CUDA and a GPU.", OFF(device)},
    [CFG_THREADS] = {"threads", CFG_T_INT, "Model", "0", 't', 0, 1024, NULL, "N", 0,
                     "CPU compute threads. 0: one per online core.", OFF(threads)},
    [CFG_PRECISION] = {"precision", CFG_T_ENUM, "Model", "fast", 0, 0, 0, precisions, "MODE", 0,
                       "Matmul arithmetic. fast: activations quantized to int16 per 32 values and "
                       "integer dot products (CPU, quantized weights; F32/F16/BF16 weights and the "
                       "CUDA backend stay exact); the default, as it passes the accuracy gates "
                       "(perplexity, KL divergence, top-1 against exact) and is faster at every "
                       "batch size. exact: f32 activations on the exactly dequantized weights. "
                       "Accuracy and speed: docs/benchmarks/precision.md.",
                       OFF(precision)},
    [CFG_QUANTIZE] = {"quantize", CFG_T_ENUM, "Model", "off", 0, 0, 0, cfg_quantize_choices, "TYPE", 0,
                      "Quantize the model's F32, F16 and BF16 weight matrices (a Hugging Face "
                      "checkpoint, an unquantized GGUF file) to this GGML type at load, as "
                      "llama.cpp's quantizer would; matrices already quantized, norms and biases "
                      "stay as they are. off: every weight as stored. Accuracy and speed: "
                      "docs/models.md.",
                      OFF(quantize)},
    [CFG_CUDA_GRAPHS] = {"cuda_graphs", CFG_T_BOOL, "Model", "true", 0, 0, 0, NULL, "BOOL", 0,
                         "With --device cuda, decode-only steps replay a CUDA graph captured once per "
                         "bucket (sequences rounded up to a power of two, context to 256 keys times a "
                         "power of two; padding rows change no real row) instead of launching every "
                         "kernel. false: every step launches its kernels. No effect on the CPU.",
                         OFF(cuda_graphs)},
    [CFG_MAX_MODEL_LEN] = {"max_model_len", CFG_T_INT, "Model", "0", 0, 0, 1 << 24, NULL, "N", 0,
                           "Longest sequence, prompt plus output, in tokens. 0: the model's "
                           "context length.",
                           OFF(max_model_len)},
    [CFG_SPECIAL_TOKENS_IN_INPUT] = {"special_tokens_in_input", CFG_T_BOOL, "Model", "false", 0, 0, 0, NULL,
                                     "BOOL", 0,
                                     "Read the texts of control tokens (such as <|im_start|>) in a "
                                     "request's messages, tools and prompt strings as those tokens, "
                                     "as vLLM and llama.cpp do. Off: they are plain text, so no user can "
                                     "forge a turn; only the chat template's markup yields control "
                                     "tokens.",
                                     OFF(special_tokens_in_input)},

    [CFG_HOST] = {"host", CFG_T_STRING, "Network", "127.0.0.1", 0, 0, 0, NULL, "ADDR", 0,
                  "Address to listen on: an IPv4 or IPv6 address or a host name. 0.0.0.0 or :: "
                  "for every interface.",
                  OFF(host)},
    [CFG_PORT] = {"port", CFG_T_INT, "Network", "8080", 'p', 0, 65535, NULL, "N", 0,
                  "TCP port to listen on. 0: any free port (the log says which).", OFF(port)},
    [CFG_UNIX_SOCKET] = {"unix_socket", CFG_T_PATH, "Network", "", 0, 0, 0, NULL, "PATH", 0,
                         "Listen on this Unix socket instead of host:port (e.g. behind nginx "
                         "on the same machine).",
                         OFF(unix_socket)},
    [CFG_MAX_CONNECTIONS] = {"max_connections", CFG_T_INT, "Network", "0", 0, 0, 1000000,
                             NULL, "N", 0,
                             "Open client connections at most. 0: sized from the open-file "
                             "limit (raised to its hard limit at start; at most 65536). At the "
                             "cap a new connection closes the one idle longest; only when every "
                             "one has a request in flight is it refused (503), and /health and "
                             "/metrics still answer on a small reserve.",
                             OFF(max_connections)},
    [CFG_MAX_CONNECTIONS_PER_CLIENT] = {"max_connections_per_client", CFG_T_INT, "Network", "0", 0, 0, 1000000,
                                        NULL, "N", 0,
                                        "Open connections of one client address (TCP) at most; 0: no limit. "
                                        "Past it a new connection from that address answers only /health and "
                                        "/metrics (on the probe reserve) or is refused (503), so one client "
                                        "cannot take every slot. Behind a proxy every client has the proxy's "
                                        "address: leave it 0 there.",
                                        OFF(max_connections_per_client)},

    [CFG_KV_CACHE_BYTES] = {"kv_cache_bytes", CFG_T_SIZE, "Engine", "512M", 0, MiB, 64 * TiB,
                            NULL, "SIZE", 0,
                            "Memory for the paged KV cache. Set, it is the total for a hybrid model: its "
                            "recurrent states (one a sequence, and speculation's kept ones) come out of it "
                            "first; left at the default, they come on top. Exclusive with kv_cache_blocks.",
                            OFF(kv_cache_bytes)},
    [CFG_KV_CACHE_BLOCKS] = {"kv_cache_blocks", CFG_T_INT, "Engine", "0", 0, 0, 1 << 30, NULL,
                             "N", 0,
                             "KV cache size in blocks of block_size tokens, instead of "
                             "kv_cache_bytes. 0: use kv_cache_bytes.",
                             OFF(kv_cache_blocks)},
    [CFG_STATE_SNAPSHOT_BYTES] = {"state_snapshot_bytes", CFG_T_SIZE, "Engine", "512M", 0, 0, 64 * TiB, NULL,
                                  "SIZE", 0,
                                  "Hybrid models (Qwen3.5): memory for snapshots of the recurrent state kept "
                                  "with prefix-cache blocks (one is tens of MB at a 2B shape): a prompt sharing "
                                  "a cached prefix restores the state at its end. 0: none, and no prefix "
                                  "caching for hybrids.",
                                  OFF(state_snapshot_bytes)},
    [CFG_BLOCK_SIZE] = {"block_size", CFG_T_INT, "Engine", "32", 0, 8, 256, NULL, "N", CFG_F_POW2,
                        "Tokens per KV cache block: a power of two.", OFF(block_size)},
    [CFG_MAX_BATCH_TOKENS] = {"max_batch_tokens", CFG_T_INT, "Engine", "256", 0, 1, 1 << 20, NULL,
                              "N", 0,
                              "Tokens one engine step processes at most (decodes first, then "
                              "prompt chunks). At least max_seqs.",
                              OFF(max_batch_tokens)},
    [CFG_MAX_SEQS] = {"max_seqs", CFG_T_INT, "Engine", "16", 0, 1, 65536, NULL, "N", 0,
                      "Sequences running at once at most.", OFF(max_seqs)},
    [CFG_STEP_TARGET_MS] = {"step_target_ms", CFG_T_INT, "Engine", "0", 0, 0, 600000, NULL, "MS", 0,
                            "While sequences decode, a step computes only as many prompt tokens "
                            "as keep it under this time, learned from measured step costs (so "
                            "arriving prompts do not stall the streams). 0: auto, 2.5 times a "
                            "decode-only step. Shown as tram:step_target_seconds.",
                            OFF(step_target_ms)},
    [CFG_CHAT_TEMPLATE] = {"chat_template", CFG_T_PATH, "Model", "", 0, 0, 0, NULL, "FILE", 0,
                           "A Jinja chat template file to use instead of the model's (e.g. one "
                           "with tool support).",
                           OFF(chat_template)},
    [CFG_TOOL_CALL_PARSER] = {"tool_call_parser", CFG_T_ENUM, "Model", "auto", 0, 0, 0, tool_parsers, "PARSER", 0,
                              "How tool calls are read from the model's output: hermes "
                              "(<tool_call>{...}</tool_call>), llama3_json, mistral "
                              "([TOOL_CALLS]), openai (gpt-oss's harmony: commentary "
                              "to=functions.NAME, with the gpt_oss reasoning parser), none (requests with "
                              "tools are refused), or auto: from the chat template's text.",
                              OFF(tool_call_parser)},
    [CFG_REASONING_PARSER] = {"reasoning_parser", CFG_T_ENUM, "Model", "auto", 0, 0, 0, reasoning_parsers, "PARSER", 0,
                              "How a thinking model's reasoning is split from its answer (chat and "
                              "responses: message.reasoning_content): deepseek_r1 (<think>...</think>, "
                              "reasoning until </think>), qwen3 (<think>...</think> when opened), gpt_oss "
                              "(harmony channels), none, or auto: from the chat template's text (none "
                              "for a template that does not think).",
                              OFF(reasoning_parser)},
    [CFG_REASONING_BUDGET] = {"reasoning_budget", CFG_T_INT, "Model", "-1", 0, -1, 1 << 24, NULL, "N", 0,
                              "Thinking tokens a request may spend before the server closes its "
                              "reasoning (forces the end-of-thinking tag) and the model answers; -1: no "
                              "limit, 0: no thinking. A request's thinking_token_budget overrides it.",
                              OFF(reasoning_budget)},
    [CFG_DEFAULT_MAX_TOKENS] = {"default_max_tokens", CFG_T_INT, "Engine", "0", 0, 0, 1 << 24, NULL, "N", 0,
                                "max_tokens of a chat request that sets neither max_tokens nor "
                                "max_completion_tokens. 0: the model's max_new_tokens (generation_config "
                                "auto), else up to the end of the context.",
                                OFF(default_max_tokens)},
    [CFG_POOLING] = {"pooling", CFG_T_ENUM, "Model", "auto", 0, 0, 0, poolings, "TYPE", 0,
                     "How /v1/embeddings pools an input's final-normed hidden states into one "
                     "vector: last (the last token's: decoder embedding models such as "
                     "Qwen3-Embedding), mean, cls (the first token's), or auto: the model file's "
                     "<arch>.pooling_type (as llama.cpp's converters write it; a sentence-"
                     "transformers checkpoint's 1_Pooling/config.json), else last. As "
                     "llama.cpp's --pooling and vLLM's --override-pooler-config pooling_type.",
                     OFF(pooling)},
    [CFG_POOLING_NORMALIZE] = {"pooling_normalize", CFG_T_ENUM, "Model", "auto", 0, 0, 0, pool_norms, "MODE", 0,
                               "Whether /v1/embeddings divides each vector by its L2 norm: true, "
                               "false, or auto: as the model says (a sentence-transformers "
                               "checkpoint: whether it has a Normalize module), else true (vLLM's and "
                               "llama.cpp's default). A request's normalize field overrides it.",
                               OFF(pooling_normalize)},
    [CFG_GENERATION_CONFIG] = {"generation_config", CFG_T_ENUM, "Engine", "auto", 0, 0, 0, gen_configs, "MODE", 0,
                               "auto: the sampling the model file recommends (GGUF general.sampling.* "
                               "keys, a checkpoint's generation_config.json: temperature, top_k, top_p, "
                               "min_p, repetition_penalty, max_new_tokens) is the default of requests "
                               "that leave those fields out, as vLLM's --generation-config auto. none: "
                               "OpenAI's defaults.",
                               OFF(generation_config)},
    [CFG_MAX_WAITING] = {"max_waiting", CFG_T_INT, "Engine", "128", 0, 0, 1 << 24, NULL, "N", 0,
                         "Requests waiting for a running slot at most; beyond that, new "
                         "requests get 429 Too Many Requests.",
                         OFF(max_waiting)},
    [CFG_SPECULATIVE] = {"speculative", CFG_T_ENUM, "Engine", "off", 0, 0, 0, spec_methods, "METHOD", 0,
                         "Speculative decoding. ngram: prompt lookup, the tokens that followed the "
                         "last n-gram's earlier occurrence in the prompt or output are verified in one "
                         "step. draft: a smaller model with the same vocabulary (draft_model) proposes "
                         "them. Outputs are unchanged.",
                         OFF(speculative)},
    [CFG_NUM_SPECULATIVE_TOKENS] = {"num_speculative_tokens", CFG_T_INT, "Engine", "4", 0, 1, 16, NULL, "N",
                                    0, "Draft tokens a speculating sequence verifies per step at most.",
                                    OFF(num_speculative_tokens)},
    [CFG_PROMPT_LOOKUP_MIN] = {"prompt_lookup_min", CFG_T_INT, "Engine", "1", 0, 1, 64, NULL, "N", 0,
                               "Shortest n-gram the ngram proposer matches.", OFF(prompt_lookup_min)},
    [CFG_PROMPT_LOOKUP_MAX] = {"prompt_lookup_max", CFG_T_INT, "Engine", "4", 0, 1, 64, NULL, "N", 0,
                               "Longest n-gram the ngram proposer matches (tried first); at least "
                               "prompt_lookup_min.",
                               OFF(prompt_lookup_max)},
    [CFG_SPECULATIVE_MAX_BATCH] = {"speculative_max_batch", CFG_T_INT, "Engine", "4", 0, 1, 65536, NULL, "N",
                                   0,
                                   "Speculate only while at most this many sequences run (a larger "
                                   "batch already reads the weights once for many tokens).",
                                   OFF(speculative_max_batch)},
    [CFG_DRAFT_MODEL] = {"draft_model", CFG_T_PATH, "Engine", "", 0, 0, 0, NULL, "PATH", 0,
                         "The draft model of --speculative draft (GGUF): its vocabulary must be the "
                         "model's (checked at start).",
                         OFF(draft_model)},
    [CFG_DRAFT_KV_CACHE_BYTES] = {"draft_kv_cache_bytes", CFG_T_SIZE, "Engine", "0", 0, 0, 64 * TiB, NULL,
                                  "SIZE", 0,
                                  "Memory for the draft model's own KV cache. 0: room for "
                                  "speculative_max_batch sequences of max_model_len tokens, at most as "
                                  "many blocks as the main cache.",
                                  OFF(draft_kv_cache_bytes)},

    [CFG_MAX_BODY_SIZE] = {"max_body_size", CFG_T_SIZE, "Limits and timeouts", "2M", 0, KiB, GiB,
                           NULL, "SIZE", 0,
                           "Largest request body; larger requests get 413.", OFF(max_body_size)},
    [CFG_MAX_HEADER_SIZE] = {"max_header_size", CFG_T_SIZE, "Limits and timeouts", "16K", 0, KiB,
                             MiB, NULL, "SIZE", 0,
                             "Largest request line plus headers; larger requests get 431.",
                             OFF(max_header_size)},
    [CFG_REQUEST_TIMEOUT] = {"request_timeout", CFG_T_DURATION, "Limits and timeouts", "10m", 0,
                             0, MS(7 * 86400), NULL, "DURATION", 0,
                             "Longest a request may take, arrival to last byte; then it ends "
                             "with what it has. 0: no limit.",
                             OFF(request_timeout_ms)},
    [CFG_IDLE_TIMEOUT] = {"idle_timeout", CFG_T_DURATION, "Limits and timeouts", "60s", 0, MS(1),
                          MS(86400), NULL, "DURATION", 0,
                          "How long a keep-alive connection may wait for its next request.",
                          OFF(idle_timeout_ms)},
    [CFG_SLOW_CLIENT_TIMEOUT] = {"slow_client_timeout", CFG_T_DURATION, "Limits and timeouts",
                                 "30s", 0, MS(1), MS(86400), NULL, "DURATION", 0,
                                 "How long a client may take to send a whole request, or stall "
                                 "while reading a response, before it is disconnected.",
                                 OFF(slow_client_timeout_ms)},
    [CFG_DRAIN_TIMEOUT] = {"drain_timeout", CFG_T_DURATION, "Limits and timeouts", "30s", 0, 0,
                           MS(3600), NULL, "DURATION", 0,
                           "On SIGTERM, how long in-flight requests may run on before they are "
                           "ended. Keep it below systemd's TimeoutStopSec.",
                           OFF(drain_timeout_ms)},
    [CFG_DRAIN_GRACE] = {"drain_grace", CFG_T_DURATION, "Limits and timeouts", "5s", 0, 0, MS(3600), NULL,
                         "DURATION", 0,
                         "On SIGTERM, how long the listener stays open first: /health answers 503 "
                         "\"draining\" and new generation requests 503 with Retry-After, so a load "
                         "balancer sees the drain; then drain_timeout runs. SIGINT skips it.",
                         OFF(drain_grace_ms)},

    [CFG_API_KEYS] = {"api_keys", CFG_T_LIST, "Security", "", 0, 0, 0, NULL, "KEY,...",
                      CFG_F_SECRET,
                      "API keys accepted as \"Authorization: Bearer KEY\" or \"x-api-key: KEY\" (the Anthropic SDKs' header). None (and no "
                      "api_key_file): no authentication. Prefer api_key_file: flags and the "
                      "environment are visible to other local users.",
                      OFF(api_keys)},
    [CFG_API_KEY_FILE] = {"api_key_file", CFG_T_PATH, "Security", "", 0, 0, 0, NULL, "PATH", 0,
                          "File of further API keys, one per line; blank lines and lines "
                          "starting with # are skipped.",
                          OFF(api_key_file)},
    [CFG_ALLOWED_ORIGINS] = {"allowed_origins", CFG_T_LIST, "Security", "", 0, 0, 0, NULL, "ORIGIN,...", 0,
                             "Browser origins allowed to call the API (CORS), e.g. "
                             "https://app.example.com; * allows any. Their preflight OPTIONS "
                             "requests are answered without an API key. None: no CORS headers.",
                             OFF(allowed_origins)},
    [CFG_EXPOSE_MODEL_PATH] = {"expose_model_path", CFG_T_BOOL, "Security", "false", 0, 0, 0, NULL, "BOOL", 0,
                               "Report the model as the path given in the model setting (the root "
                               "of /v1/models, model_path of /server_info and /model_info, the "
                               "dashboard's model_file), as vLLM and SGLang do. Off: its file name "
                               "only, which tells a client nothing of the server's directories.",
                               OFF(expose_model_path)},

    [CFG_LOG_LEVEL] = {"log_level", CFG_T_ENUM, "Logging and metrics", "info", 0, 0, 0, levels,
                       "LEVEL", 0, "Most verbose log level written.", OFF(log_level)},
    [CFG_LOG_FORMAT] = {"log_format", CFG_T_ENUM, "Logging and metrics", "text", 0, 0, 0, formats,
                        "FORMAT", 0, "Log line format: text lines or JSON objects, one per line.",
                        OFF(log_format)},
    [CFG_LOG_FILE] = {"log_file", CFG_T_PATH, "Logging and metrics", "", 0, 0, 0, NULL, "PATH", 0,
                      "Append log lines to this file (reopened on SIGHUP) instead of stderr.",
                      OFF(log_file)},
    [CFG_METRICS] = {"metrics", CFG_T_BOOL, "Logging and metrics", "true", 0, 0, 0, NULL, "BOOL", 0,
                     "Serve Prometheus metrics at GET /metrics.", OFF(metrics)},
    [CFG_KV_EVENTS] = {"kv_events", CFG_T_STRING, "Logging and metrics", "", 0, 0, 0, NULL, "ENDPOINT", 0,
                       "Publish vLLM's KV-cache events (ZeroMQ PUB, msgpack) on this endpoint, e.g. "
                       "tcp://*:5557 (bound when it holds * or ::, or is ipc:// or inproc://; "
                       "connected otherwise). Empty: off.",
                       OFF(kv_events)},
    [CFG_KV_EVENTS_TOPIC] = {"kv_events_topic", CFG_T_STRING, "Logging and metrics", "", 0, 0, 0, NULL, "TOPIC",
                             0, "The topic frame of each KV-cache event message.", OFF(kv_events_topic)},
    [CFG_DASHBOARD] = {"dashboard", CFG_T_ENUM, "Logging and metrics", "auto", 0, 0, 0, dashboards,
                       "MODE", 0,
                       "Serve the live engine dashboard at GET /dashboard (its data stream needs "
                       "an API key when keys are set). auto: on when listening on a loopback "
                       "address or a unix socket, off otherwise (and under socket activation).",
                       OFF(dashboard)},

    [CFG_GRAMMAR_MAX_SIZE] = {"grammar_max_size", CFG_T_INT, "Structured output", "500000", 0, 1000, 50000000, NULL,
                              "N", 0,
                              "Expanded size one structured-output grammar may reach (JSON Schema, regex, "
                              "GBNF, choice): its expression nodes, lowered elements and rules, each; "
                              "checked while it is built. More: 400.",
                              OFF(grammar_max_size)},
    [CFG_GRAMMAR_MAX_REPEAT] = {"grammar_max_repeat", CFG_T_INT, "Structured output", "10000", 0, 1, 1000000, NULL,
                                "N", 0,
                                "Largest repetition count ({m,n}, minItems, maxLength, ...), and the most "
                                "copies nested repetitions may multiply to (x{0,100}{0,100} makes 10000). "
                                "More: 400.",
                                OFF(grammar_max_repeat)},
    [CFG_GRAMMAR_MAX_DEPTH] = {"grammar_max_depth", CFG_T_INT, "Structured output", "128", 0, 1, 512, NULL, "N", 0,
                               "Deepest nesting of groups, schemas and expressions in a grammar. More: 400.",
                               OFF(grammar_max_depth)},
    [CFG_GRAMMAR_MAX_LITERAL] = {"grammar_max_literal", CFG_T_SIZE, "Structured output", "16K", 0, 1, MiB, NULL,
                                 "SIZE", 0,
                                 "Longest literal in a grammar: a const or enum value, a choice, a property "
                                 "name. Longer: 400.",
                                 OFF(grammar_max_literal)},
    [CFG_GRAMMAR_MAX_STACKS] = {"grammar_max_stacks", CFG_T_INT, "Structured output", "4096", 0, 16, 1000000, NULL,
                                "N", 0,
                                "Parser stacks a grammar may keep alive at once, and alternatives one rule may "
                                "offer after those starting alike are merged: a grammar needing more at its "
                                "start gets 400, one that needs more later ends its request with an error.",
                                OFF(grammar_max_stacks)},
    [CFG_GRAMMAR_MASK_FUEL] = {"grammar_mask_fuel", CFG_T_INT, "Structured output", "20000000", 0, 100000,
                               2000000000, NULL, "N", 0,
                               "Work one token mask may take (vocabulary trie steps plus parser steps; "
                               "about 10-30 ns each): a bound on the engine's time per constrained "
                               "token. A grammar whose first mask needs more gets 400; a later mask that "
                               "does ends its request with an error.",
                               OFF(grammar_mask_fuel)},
    [CFG_GRAMMAR_CACHE_BYTES] = {"grammar_cache_bytes", CFG_T_SIZE, "Structured output", "256M", 0, MiB, TiB, NULL,
                                 "SIZE", 0,
                                 "Memory of the token caches of all compiled grammars together (kept by "
                                 "content for reuse); past it, grammars no request uses are dropped, and a "
                                 "request whose mask still does not fit ends with an error.",
                                 OFF(grammar_cache_bytes)},
    [CFG_GRAMMAR_CACHE_BYTES_PER_GRAMMAR] = {"grammar_cache_bytes_per_grammar", CFG_T_SIZE, "Structured output",
                                             "64M", 0, 64 * KiB, TiB, NULL, "SIZE", 0,
                                             "Memory of one grammar's token cache; a request whose grammar needs "
                                             "more ends with an error.",
                                             OFF(grammar_cache_bytes_per_grammar)},
    [CFG_GRAMMAR_COMPILE_TIMEOUT] = {"grammar_compile_timeout", CFG_T_DURATION, "Structured output", "5s", 0, 10,
                                     MS(3600), NULL, "DURATION", 0,
                                     "Longest one grammar compile may take (its first token mask included); "
                                     "longer: 400.",
                                     OFF(grammar_compile_timeout_ms)},
    [CFG_GRAMMAR_COMPILE_THREADS] = {"grammar_compile_threads", CFG_T_INT, "Structured output", "2", 0, 1, 256, NULL,
                                     "N", 0,
                                     "Threads that compile grammars, apart from the workers that parse and "
                                     "tokenize requests: compiles never hold those up.",
                                     OFF(grammar_compile_threads)},
    [CFG_GRAMMAR_COMPILE_QUEUE] = {"grammar_compile_queue", CFG_T_INT, "Structured output", "64", 0, 0, 1 << 20, NULL,
                                   "N", 0,
                                   "Grammar compiles waiting for a thread at most; beyond that, requests that "
                                   "need a new grammar get 429 Too Many Requests.",
                                   OFF(grammar_compile_queue)},
};

char *cfg_env_name(cfg_key_t key, char *buf, size_t len) {
  const char *n = cfg_settings[key].name;
  size_t i = 0;
  const char *pre = "TRAM_";
  for (; *pre && i + 1 < len; pre++) buf[i++] = *pre;
  for (; *n && i + 1 < len; n++) buf[i++] = (*n >= 'a' && *n <= 'z') ? (char)(*n - 32) : *n;
  buf[i] = '\0';
  return buf;
}

char *cfg_flag_name(cfg_key_t key, char *buf, size_t len) {
  const char *n = cfg_settings[key].name;
  size_t i = 0;
  for (int k = 0; k < 2 && i + 1 < len; k++) buf[i++] = '-';
  for (; *n && i + 1 < len; n++) buf[i++] = *n == '_' ? '-' : *n;
  buf[i] = '\0';
  return buf;
}
