/* tests/tools/forward.c — tram's real forward path driven by a JSON plan, for
 * the reference tests (tests/reference/test_forward.py) and by hand.
 *
 *   forward PLAN.json        (or - for stdin)
 *
 * The plan:
 *   {"model": "models/x.gguf",
 *    "seqs": [[ids...], ...],          token ids of each sequence
 *    "steps": [[n0, n1, ...], ...],    tokens each sequence adds at each step
 *                                      (0: not in the step); default: one
 *                                      step with every sequence whole
 *    "block_size": 32, "num_blocks": 64,   cache geometry (defaults 32 and
 *                                      enough blocks for every sequence)
 *    "shuffle_seed": 0,                != 0: the free list is shuffled first,
 *                                      so sequences get scattered blocks
 *    "gather": false,                  the attention's reference varlen path
 *    "threads": 0,                     CPU threads (0: one per CPU)
 *    "device": "cpu",                  the backend ("cpu" or "cuda")
 *    "precision": "exact",             the matmul arithmetic ("exact" or "fast")
 *    "gdn_chunked": 1,                 the delta rule's chunked form for whole 64-row chunks (cpu)
 *    "quantize": "Q8_0",               F32/F16/BF16 weights quantized at load to
 *                                      this type (model_load_opts); default none
 *    "matmul_nmse": false,             true (CPU, exact): every matmul also runs
 *                                      the fast kernel on the same input and
 *                                      stdout gets its normalized MSE against
 *                                      the exact output (worst and mean)
 *    "prefix": [[d, s, P], ...],       sequence d takes its first P tokens (a
 *                                      multiple of block_size, equal to s's)
 *                                      from the prefix cache: when s has
 *                                      committed exactly P tokens its blocks are
 *                                      published and its recurrent state kept as
 *                                      a snapshot (cache/kv_state.h), which d's
 *                                      first step matches and restores; d's
 *                                      steps then consume only its tokens after
 *                                      P, whose rows are all d gets (the first
 *                                      P rows stay 0)
 *    "out": "logits.f32"}              where the logits go
 *
 * Each step reserves the sequences' new tokens (kv_seq_reserve), builds the
 * attention metadata (attn_meta_build), runs model_forward asking logits for
 * every row, and commits the tokens: the scheduler's path. The steps must
 * consume every sequence exactly. `out` receives raw little-endian f32
 * logits [total tokens, n_vocab], sequence by sequence, position by
 * position. stdout gets one JSON line: {"n_vocab": V, "rows": R, "paths":
 * ["varlen", "decode", ...], "experts": [n, ...]} (the attention path of
 * each step, and the expert MLPs it ran: model_runner_experts_run), plus
 * "matmul_nmse": {"max", "mean", "calls"} when asked. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/matmul_q8.h"
#include "model/model.h"

static char *read_all(const char *path) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0, k;
  char *buf = malloc(cap + 1);
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
  }
  if (f != stdin) fclose(f);
  if (!buf) abort();
  buf[n] = 0;
  return buf;
}

static int die(const char *msg) {
  fprintf(stderr, "forward: %s\n", msg);
  return 2;
}

static int get_int(const cJSON *plan, const char *key, int def) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(plan, key);
  if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
  return cJSON_IsNumber(v) ? v->valueint : def;
}

/* Puts the cache's blocks on the free list in a shuffled order. */
static void shuffle_free_list(kv_alloc_t *a, uint64_t seed) {
  const int32_t n = kv_alloc_num_blocks(a);
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  if (!ids) abort();
  for (int32_t i = 0; i < n; i++) ids[i] = kv_block_alloc(a);
  for (int32_t i = n - 1; i > 0; i--) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    int32_t j = (int32_t)((seed >> 33) % (uint64_t)(i + 1)), t = ids[i];
    ids[i] = ids[j];
    ids[j] = t;
  }
  for (int32_t i = 0; i < n; i++) kv_block_unref(a, ids[i]);
  free(ids);
}

/* The matmul tap of "matmul_nmse": the backend's own (exact) matmul, then
 * the fast kernel on the same input into a side buffer. */
static void (*tap_matmul)(kern_backend_t *, float *, const float *, const kern_weight_t *, int);
static double tap_max, tap_sum;
static int64_t tap_calls;

static void tapped_matmul(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n) {
  tap_matmul(be, y, x, w, n);
  if (!kern_cpu_q8_supported(w->type, w->cols)) return;
  float *f = malloc((size_t)n * (size_t)w->rows * sizeof *f);
  if (!f) abort();
  kern_cpu_matmul_q8(be, f, x, w, n);
  double num = 0, den = 0;
  for (int64_t i = 0; i < (int64_t)n * w->rows; i++) {
    num += ((double)f[i] - y[i]) * ((double)f[i] - y[i]);
    den += (double)y[i] * y[i];
  }
  double e = den > 0 ? num / den : 0;
  tap_max = e > tap_max ? e : tap_max;
  tap_sum += e;
  tap_calls++;
  free(f);
}

typedef struct run {
  int n_seqs;
  int32_t **toks;   /* [n_seqs][lens[s]] */
  int *lens;        /* [n_seqs] */
  int64_t *offset;  /* [n_seqs] first output row of each sequence */
  int64_t rows;     /* total tokens */
} run_t;

static int parse_seqs(const cJSON *plan, run_t *r) {
  const cJSON *seqs = cJSON_GetObjectItemCaseSensitive(plan, "seqs");
  if (!cJSON_IsArray(seqs) || cJSON_GetArraySize(seqs) < 1) return -1;
  r->n_seqs = cJSON_GetArraySize(seqs);
  r->toks = calloc((size_t)r->n_seqs, sizeof *r->toks);
  r->lens = calloc((size_t)r->n_seqs, sizeof *r->lens);
  r->offset = calloc((size_t)r->n_seqs, sizeof *r->offset);
  if (!r->toks || !r->lens || !r->offset) abort();
  for (int s = 0; s < r->n_seqs; s++) {
    const cJSON *seq = cJSON_GetArrayItem(seqs, s);
    if (!cJSON_IsArray(seq) || cJSON_GetArraySize(seq) < 1) return -1;
    r->lens[s] = cJSON_GetArraySize(seq);
    r->toks[s] = malloc((size_t)r->lens[s] * sizeof(int32_t));
    if (!r->toks[s]) abort();
    for (int i = 0; i < r->lens[s]; i++) {
      const cJSON *id = cJSON_GetArrayItem(seq, i);
      if (!cJSON_IsNumber(id)) return -1;
      r->toks[s][i] = id->valueint;
    }
    r->offset[s] = r->rows;
    r->rows += r->lens[s];
  }
  return 0;
}

/* The step table [n_steps][n_seqs]; default one step of everything. */
static int *parse_steps(const cJSON *plan, const run_t *r, const int *start, int *n_steps, int *max_step) {
  const cJSON *steps = cJSON_GetObjectItemCaseSensitive(plan, "steps");
  *n_steps = cJSON_IsArray(steps) ? cJSON_GetArraySize(steps) : 1;
  int *t = calloc((size_t)*n_steps * r->n_seqs, sizeof *t);
  if (!t) abort();
  int *done = calloc((size_t)r->n_seqs, sizeof *done);
  if (!done) abort();
  memcpy(done, start, (size_t)r->n_seqs * sizeof *done);
  *max_step = 1;
  for (int k = 0; k < *n_steps; k++) {
    const cJSON *row = cJSON_IsArray(steps) ? cJSON_GetArrayItem(steps, k) : NULL;
    if (row && (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != r->n_seqs)) goto bad;
    int sum = 0;
    for (int s = 0; s < r->n_seqs; s++) {
      const cJSON *v = row ? cJSON_GetArrayItem(row, s) : NULL;
      int n = row ? (cJSON_IsNumber(v) ? v->valueint : -1) : r->lens[s] - start[s];
      if (n < 0 || done[s] + n > r->lens[s]) goto bad;
      t[k * r->n_seqs + s] = n;
      done[s] += n;
      sum += n;
    }
    if (sum < 1) goto bad;
    if (sum > *max_step) *max_step = sum;
  }
  for (int s = 0; s < r->n_seqs; s++)
    if (done[s] != r->lens[s]) goto bad;
  free(done);
  return t;
bad:
  free(done);
  free(t);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) return die("usage: forward PLAN.json|-");
  char *text = read_all(argv[1]);
  if (!text) return die("cannot read the plan");
  cJSON *plan = cJSON_Parse(text);
  free(text);
  const cJSON *model_path = cJSON_GetObjectItemCaseSensitive(plan, "model");
  const cJSON *out_path = cJSON_GetObjectItemCaseSensitive(plan, "out");
  run_t r = {0};
  if (!cJSON_IsString(model_path) || !cJSON_IsString(out_path) || parse_seqs(plan, &r) != 0)
    return die("the plan needs \"model\", \"out\" and \"seqs\" (non-empty arrays of token ids)");
  /* "prefix": pre_from[d] = s and pre_len[d] = P (-1 and 0: none) */
  int *pre_from = malloc((size_t)r.n_seqs * sizeof(int)), *pre_len = calloc((size_t)r.n_seqs, sizeof(int));
  if (!pre_from || !pre_len) abort();
  for (int d = 0; d < r.n_seqs; d++) pre_from[d] = -1;
  const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(plan, "prefix"), *pe;
  int n_prefix = 0;
  cJSON_ArrayForEach(pe, prefix) {
    const int d = cJSON_GetArrayItem(pe, 0) ? cJSON_GetArrayItem(pe, 0)->valueint : -1;
    const int src = cJSON_GetArrayItem(pe, 1) ? cJSON_GetArrayItem(pe, 1)->valueint : -1;
    const int len = cJSON_GetArrayItem(pe, 2) ? cJSON_GetArrayItem(pe, 2)->valueint : 0;
    if (d < 0 || d >= r.n_seqs || src < 0 || src >= r.n_seqs || d == src || len < 1 || len >= r.lens[d] ||
        len > r.lens[src] || pre_from[d] >= 0)
      return die("\"prefix\" entries are [d, s, P]: distinct sequences, 0 < P < d's length, P <= s's");
    pre_from[d] = src;
    pre_len[d] = len;
    n_prefix++;
  }
  int n_steps, max_step;
  int *steps = parse_steps(plan, &r, pre_len, &n_steps, &max_step);
  if (!steps) return die("\"steps\" must be arrays of n_seqs counts that consume every sequence exactly");

  const cJSON *device = cJSON_GetObjectItemCaseSensitive(plan, "device");
  const cJSON *precision = cJSON_GetObjectItemCaseSensitive(plan, "precision");
  const int fast = cJSON_IsString(precision) && strcmp(precision->valuestring, "fast") == 0;
  if (precision && !fast && !(cJSON_IsString(precision) && strcmp(precision->valuestring, "exact") == 0))
    return die("\"precision\" must be \"exact\" or \"fast\"");
  const kern_backend_opts_t bo = {.n_threads = get_int(plan, "threads", 0),
                                  .precision = fast ? KERN_PRECISION_FAST : KERN_PRECISION_EXACT};
  kern_backend_t *be = kern_backend_create_opts(cJSON_IsString(device) ? device->valuestring : "cpu", &bo);
  if (be && get_int(plan, "gdn_chunked", 0)) {
    if (strcmp(be->name, "cpu") != 0) return die("\"gdn_chunked\" needs the cpu device");
    kern_cpu(be)->gdn_chunked = 1;
  }
  const int tap = get_int(plan, "matmul_nmse", 0);
  if (be && tap) {
    if (strcmp(be->name, "cpu") != 0 || fast) return die("\"matmul_nmse\" needs the cpu device and exact precision");
    tap_matmul = be->matmul;
    be->matmul = tapped_matmul;
  }
  char err[512];
  model_load_opts_t mo = {.quantize = KERN_F32};
  const cJSON *quantize = cJSON_GetObjectItemCaseSensitive(plan, "quantize");
  for (int t = 0; cJSON_IsString(quantize) && t < KERN_TYPE_COUNT; t++)
    if (kern_type_name((uint32_t)t) && strcmp(kern_type_name((uint32_t)t), quantize->valuestring) == 0)
      mo.quantize = (kern_type_t)t;
  if (quantize && mo.quantize == KERN_F32) return die("\"quantize\" must be a GGML type name (\"Q8_0\")");
  model_t *m = be ? model_load_opts(model_path->valuestring, be, &mo, err, sizeof err) : NULL;
  if (!m) return die(be ? err : "no backend");
  const model_hparams_t *hp = model_hparams(m);

  kv_cache_config_t kc = {.block_size = get_int(plan, "block_size", KV_DEFAULT_BLOCK_SIZE)};
  int64_t need = 0;
  for (int s = 0; s < r.n_seqs; s++) need += (r.lens[s] + kc.block_size - 1) / kc.block_size;
  kc.num_blocks = get_int(plan, "num_blocks", (int)need);
  model_kv_config(m, &kc);
  kv_cache_t *cache = kv_cache_create(be, &kc);
  /* a hybrid model: a recurrent-state pool, one slot per sequence (slot s
   * is sequence s's: kv_state_alloc hands out 0, 1, ... in order) */
  kv_state_config_t sc = {.n_slots = r.n_seqs, .n_snaps = n_prefix, .n_blocks = cache ? cache->num_blocks : 0};
  kv_state_t *state = model_state_config(m, &sc) == 0 && cache ? kv_state_create(be, &sc) : NULL;
  if (n_prefix && !state) return die("\"prefix\" needs a hybrid model (a recurrent-state pool)");
  int32_t *slots = calloc((size_t)r.n_seqs, sizeof *slots), *step_slots = calloc((size_t)r.n_seqs, sizeof *slots);
  if (!slots || !step_slots) abort();
  for (int s = 0; state && s < r.n_seqs; s++) slots[s] = kv_state_alloc(state);
  const model_runner_config_t rc = {.max_tokens = max_step,
                                    .max_seqs = r.n_seqs,
                                    .max_logits = max_step,
                                    .gather = get_int(plan, "gather", 0),
                                    .state = state};
  model_runner_t *run = cache ? model_runner_create(m, cache, &rc) : NULL;
  if (!run) return die("cannot create the cache or the runner (see the log)");
  if (get_int(plan, "shuffle_seed", 0)) shuffle_free_list(cache->alloc, (uint64_t)get_int(plan, "shuffle_seed", 0));

  attn_meta_t meta;
  attn_meta_init(&meta, r.n_seqs, max_step, model_runner_max_blocks_per_seq(run));
  kv_seq_t *seqs = calloc((size_t)r.n_seqs, sizeof *seqs);
  const kv_seq_t **step_seqs = calloc((size_t)r.n_seqs, sizeof *step_seqs);
  int32_t *q_lens = calloc((size_t)r.n_seqs, sizeof *q_lens), *step_seq_ids = calloc((size_t)r.n_seqs, sizeof(int32_t));
  int32_t *ids = malloc((size_t)max_step * sizeof *ids), *pos = malloc((size_t)max_step * sizeof *pos);
  int32_t *rows = malloc((size_t)max_step * sizeof *rows);
  float *logits = malloc((size_t)max_step * hp->n_vocab * sizeof(float));
  float *all = calloc((size_t)r.rows * hp->n_vocab, sizeof(float));
  if (!seqs || !step_seqs || !q_lens || !step_seq_ids || !ids || !pos || !rows || !logits || !all) abort();
  for (int s = 0; s < r.n_seqs; s++) kv_seq_init(&seqs[s]);

  uint64_t *experts = calloc((size_t)n_steps, sizeof *experts), experts_before = 0;
  if (!experts) abort();
  printf("{\"n_vocab\": %d, \"rows\": %lld, \"paths\": [", hp->n_vocab, (long long)r.rows);
  int status = 0;
  for (int k = 0; k < n_steps && status == 0; k++) {
    int n = 0, t = 0;
    for (int s = 0; s < r.n_seqs; s++) {
      const int q = steps[k * r.n_seqs + s];
      if (q == 0) continue;
      if (pre_len[s] > 0 && seqs[s].n_tokens == 0) { /* the prefix-cache hit and the state it restores */
        const int32_t hit = kv_seq_match_prefix(cache->alloc, &seqs[s], r.toks[s], pre_len[s]);
        const int32_t last = hit > 0 ? seqs[s].blocks[hit - 1] : -1;
        if ((int64_t)hit * cache->block_size != pre_len[s] || !kv_snap_has(state, last)) {
          status = die("a \"prefix\" sequence found no cached blocks or snapshot for its P tokens");
          break;
        }
        kv_snap_load(state, slots[s], last, pre_len[s]);
      }
      if (kv_seq_reserve(cache->alloc, &seqs[s], q) != 0) {
        status = die("the cache is too small for the plan");
        break;
      }
      for (int i = 0; i < q; i++) {
        pos[t] = (int32_t)seqs[s].n_tokens + i;
        ids[t] = r.toks[s][pos[t]];
        rows[t] = t;
        t++;
      }
      step_seqs[n] = &seqs[s];
      step_seq_ids[n] = s;
      step_slots[n] = slots[s];
      q_lens[n++] = q;
    }
    if (status != 0) break;
    if (attn_meta_build(&meta, cache->alloc, step_seqs, q_lens, n) != 0) {
      status = die("attn_meta_build failed");
      break;
    }
    const model_batch_t b = {
        .n_tokens = t, .tokens = ids, .positions = pos, .attn = &meta.batch, .n_logits = t, .logit_rows = rows,
        .state_slots = state ? step_slots : NULL};
    if (model_forward(run, &b, logits) != 0) {
      status = die("model_forward failed (see the log)");
      break;
    }
    printf("%s\"%s\"", k ? ", " : "", attn_step_path(model_runner_attn(run)) == ATTN_PATH_DECODE ? "decode" : "varlen");
    experts[k] = model_runner_experts_run(run) - experts_before;
    experts_before = model_runner_experts_run(run);
    /* row j of the step is token pos[j] of sequence step_seq_ids[...]: in order */
    int j = 0;
    for (int i = 0; i < n; i++) {
      const int s = step_seq_ids[i];
      for (int c = 0; c < q_lens[i]; c++, j++)
        memcpy(all + (size_t)(r.offset[s] + pos[j]) * hp->n_vocab, logits + (size_t)j * hp->n_vocab,
               (size_t)hp->n_vocab * sizeof(float));
      kv_seq_commit(cache->alloc, &seqs[s], q_lens[i]);
      for (int d = 0; d < r.n_seqs; d++) /* s's state at d's prefix end: published and kept */
        if (pre_from[d] == s && seqs[s].n_tokens == pre_len[d]) {
          kv_seq_publish(cache->alloc, &seqs[s], r.toks[s]);
          const int32_t blk = kv_seq_tail_block(cache->alloc, &seqs[s]);
          if (blk >= 0) kv_snap_save(state, blk, slots[s]);
        }
    }
  }
  printf("], \"experts\": [");
  for (int k = 0; k < n_steps; k++) printf("%s%llu", k ? ", " : "", (unsigned long long)experts[k]);
  printf("]");
  free(experts);
  if (tap) printf(", \"matmul_nmse\": {\"max\": %.6g, \"mean\": %.6g, \"calls\": %lld}", tap_max,
                  tap_calls ? tap_sum / (double)tap_calls : 0.0, (long long)tap_calls);
  printf("}\n");
  if (status == 0) {
    FILE *f = fopen(out_path->valuestring, "wb");
    if (!f || fwrite(all, sizeof(float), (size_t)r.rows * hp->n_vocab, f) != (size_t)r.rows * hp->n_vocab ||
        fclose(f) != 0)
      status = die("cannot write the logits");
  }

  for (int s = 0; s < r.n_seqs; s++) {
    kv_seq_free(cache->alloc, &seqs[s]);
    free(r.toks[s]);
  }
  free(seqs), free(step_seqs), free(q_lens), free(step_seq_ids), free(ids), free(pos), free(rows);
  free(slots), free(step_slots), free(pre_from), free(pre_len);
  free(logits), free(all), free(steps), free(r.toks), free(r.lens), free(r.offset);
  attn_meta_free(&meta);
  model_runner_destroy(run);
  kv_state_destroy(state);
  kv_cache_destroy(cache);
  model_destroy(m);
  kern_backend_destroy(be);
  cJSON_Delete(plan);
  return status;
}
