/* tests/gpu/bench.cu — timings of the issue's goals with CUDA events: the
 * median of many runs, inputs rotated over several sets larger than L2 so
 * caches do not flatter, against two ceilings measured in the same run: a
 * large device-to-device copy (bytes read + written per second) and a large
 * cuBLAS bf16 GEMM (TFLOP/s).
 *
 * Goals (issue 9, one H200): decode attention (64 x 4096 cached, 32/8 heads,
 * head_dim 128, page 16) >= 75% of the copy rate; causal varlen prefill
 * (8 x 2048, head_dim 128) >= 300 TFLOP/s; RMSNorm, RoPE, cache write and
 * SwiGLU at 16k tokens >= 80% of the copy rate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
extern "C" {
#include "kernels/kern_sample.h"
}
#include "tests/gpu/gpu_test.cuh"

#define REPS 30
#define WARMUP 3

/* Pseudo-random non-zero fill on the device (host generation of gigabytes
 * would take longer than the timings). */
static __global__ void fill_f32(float *p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    /* odd numerator: never exactly zero */
    p[i] = scale * ((float)(int32_t)((uint32_t)(z >> 32) | 1u) * 0x1.0p-31f);
  }
}

static __global__ void f32_to_bf16(__nv_bfloat16 *out, const float *in, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}

typedef struct bench_ctx {
  gt_t *t;
  kern_cuda_t *cu;
  uint64_t seed;
  double copy_gbs, gemm_tflops;
  FILE *table;
} bench_ctx_t;

static void fill(bench_ctx_t *b, float *p, size_t n, float scale) {
  fill_f32<<<4096, 256, 0, b->cu->stream>>>(p, n, b->seed++, scale);
  CUDA_CHECK_LAUNCH();
}

static void fill_bf16(bench_ctx_t *b, void *p, size_t n, float *scratch, size_t scratch_n) {
  for (size_t o = 0; o < n; o += scratch_n) {
    const size_t m = std::min(scratch_n, n - o);
    fill(b, scratch, m, 1.0f);
    f32_to_bf16<<<4096, 256, 0, b->cu->stream>>>((__nv_bfloat16 *)p + o, scratch, m);
    CUDA_CHECK_LAUNCH();
  }
}

/* Median time of f(rep) in microseconds (events around each call). */
template <typename F>
static double time_us(bench_ctx_t *b, F f) {
  cudaStream_t s = b->cu->stream;
  for (int i = 0; i < WARMUP; i++) f(i);
  std::vector<cudaEvent_t> e0(REPS), e1(REPS);
  for (int i = 0; i < REPS; i++) {
    CUDA_CHECK(cudaEventCreate(&e0[i]));
    CUDA_CHECK(cudaEventCreate(&e1[i]));
  }
  for (int i = 0; i < REPS; i++) {
    CUDA_CHECK(cudaEventRecord(e0[i], s));
    f(WARMUP + i);
    CUDA_CHECK(cudaEventRecord(e1[i], s));
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> ms(REPS);
  for (int i = 0; i < REPS; i++) {
    CUDA_CHECK(cudaEventElapsedTime(&ms[i], e0[i], e1[i]));
    CUDA_CHECK(cudaEventDestroy(e0[i]));
    CUDA_CHECK(cudaEventDestroy(e1[i]));
  }
  std::sort(ms.begin(), ms.end());
  return 1000.0 * (REPS % 2 ? ms[REPS / 2] : 0.5 * (ms[REPS / 2 - 1] + ms[REPS / 2]));
}

/* One table row. goal_pct > 0: bandwidth goal as % of the copy rate;
 * goal_tflops > 0: compute goal. */
static void bench_row(bench_ctx_t *b, const char *name, double us, double bytes, double flops,
                double goal_pct, double goal_tflops) {
  char rate[48] = "", of[32] = "", goal[32] = "-", status[16] = "-";
  if (bytes > 0) {
    const double gbs = bytes / us / 1e3;
    snprintf(rate, sizeof rate, "%.0f GB/s", gbs);
    if (b->copy_gbs > 0) snprintf(of, sizeof of, "%.0f%% of copy", 100.0 * gbs / b->copy_gbs);
    if (goal_pct > 0) {
      snprintf(goal, sizeof goal, ">= %.0f%% copy", goal_pct);
      snprintf(status, sizeof status, "%s", 100.0 * gbs / b->copy_gbs >= goal_pct ? "MET" : "MISSED");
    }
  } else {
    const double tf = flops / us / 1e6;
    snprintf(rate, sizeof rate, "%.1f TFLOP/s", tf);
    if (b->gemm_tflops > 0) snprintf(of, sizeof of, "%.0f%% of GEMM", 100.0 * tf / b->gemm_tflops);
    if (goal_tflops > 0) {
      snprintf(goal, sizeof goal, ">= %.0f TFLOP/s", goal_tflops);
      snprintf(status, sizeof status, "%s", tf >= goal_tflops ? "MET" : "MISSED");
    }
  }
  const char *fmt = "| %-44s | %9.1f us | %14s | %13s | %15s | %6s |\n";
  printf(fmt, name, us, rate, of, goal, status);
  fflush(stdout);
  if (b->table) fprintf(b->table, fmt, name, us, rate, of, goal, status);
}

static void ceilings(bench_ctx_t *b) {
  const size_t bytes = (size_t)2 << 30;
  void *src = gt_dev(b->t, bytes), *dst = gt_dev(b->t, bytes);
  fill(b, (float *)src, bytes / 4, 1.0f);
  const double us = time_us(b, [&](int) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, b->cu->stream));
  });
  b->copy_gbs = 2.0 * bytes / us / 1e3;
  bench_row(b, "ceiling: device-to-device copy 2 GiB", us, 2.0 * bytes, 0, 0, 0);
  printf("copy_gbs: %.1f\n", b->copy_gbs); /* read by run-on-device.sh (the roofline line) */
  gt_free(b->t, src), gt_free(b->t, dst);

  const int N = 8192;
  const size_t n = (size_t)N * N;
  float *scratch = (float *)gt_dev(b->t, n * 4);
  void *A = gt_dev(b->t, n * 2), *B = gt_dev(b->t, n * 2), *C = gt_dev(b->t, n * 2);
  fill_bf16(b, A, n, scratch, n);
  fill_bf16(b, B, n, scratch, n);
  const float one = 1.0f, zero = 0.0f;
  const double gus = time_us(b, [&](int) {
    CUBLAS_CHECK(cublasGemmEx(b->cu->cublas, CUBLAS_OP_T, CUBLAS_OP_N, N, N, N, &one, A, CUDA_R_16BF,
                              N, B, CUDA_R_16BF, N, &zero, C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  });
  b->gemm_tflops = 2.0 * N * N * (double)N / gus / 1e6;
  bench_row(b, "ceiling: cuBLAS bf16 GEMM 8192^3", gus, 0, 2.0 * N * N * (double)N, 0, 0);
  gt_free(b->t, scratch), gt_free(b->t, A), gt_free(b->t, B), gt_free(b->t, C);
}

/* Decode over cache_seqlens `seqlens` (+1 appended each), 32/8 heads of
 * 128, page 16; bytes: the K/V read and the Q read and out written. */
static void bench_decode(bench_ctx_t *b, const char *name, const std::vector<int32_t> &seqlens, double goal_pct) {
  gt_t *t = b->t;
  const int S = (int)seqlens.size(), H = 32, HKV = 8, D = 128, BS = 16, SETS = 3;
  int CTX = 0;
  double keys = 0;
  for (int32_t l : seqlens) CTX = l > CTX ? l : CTX, keys += l + 1;
  const int mbps = (CTX + 1 + BS - 1) / BS, nblocks = S * mbps;
  const size_t row = (size_t)HKV * D, cache_n = (size_t)nblocks * BS * row;
  std::vector<int32_t> perm(nblocks);
  for (int i = 0; i < nblocks; i++) perm[i] = i;
  float *scratch = (float *)gt_dev(t, ((size_t)64 << 20) * 4);
  std::vector<kern_attn_args_t> sets(SETS);
  std::vector<void *> bufs;
  for (int s = 0; s < SETS; s++) {
    tu_shuffle_i32(&t->rng, perm.data(), perm.size());
    void *kc = gt_dev(t, cache_n * 2), *vc = gt_dev(t, cache_n * 2);
    fill_bf16(b, kc, cache_n, scratch, (size_t)64 << 20);
    fill_bf16(b, vc, cache_n, scratch, (size_t)64 << 20);
    float *q = (float *)gt_dev(t, (size_t)S * H * D * 4), *out = (float *)gt_dev(t, (size_t)S * H * D * 4);
    float *kn = (float *)gt_dev(t, (size_t)S * row * 4), *vn = (float *)gt_dev(t, (size_t)S * row * 4);
    fill(b, q, (size_t)S * H * D, 1.0f), fill(b, kn, (size_t)S * row, 1.0f), fill(b, vn, (size_t)S * row, 1.0f);
    int32_t *bt = (int32_t *)gt_dev_from(t, perm.data(), perm.size() * 4);
    int32_t *sl = (int32_t *)gt_dev_from(t, seqlens.data(), (size_t)S * 4);
    kern_attn_args_t &a = sets[s];
    memset(&a, 0, sizeof a);
    a.n_seqs = S, a.n_heads = H, a.n_kv_heads = HKV, a.head_dim = D, a.scale = 1.0f / sqrtf((float)D);
    a.q = q, a.out = out, a.k_cache = kc, a.v_cache = vc, a.block_size = BS, a.block_table = bt;
    a.max_blocks_per_seq = mbps, a.cache_seqlens = sl, a.k_new = kn, a.v_new = vn;
    a.max_seqlen_k = CTX + 1, a.total_q = S;
    void *mine[] = {kc, vc, q, out, kn, vn, bt, sl};
    bufs.insert(bufs.end(), mine, mine + 8);
  }
  const double us = time_us(b, [&](int i) { t->be->attn_decode(t->be, &sets[i % SETS]); });
  const double bytes = keys * row * 2 * 2 + 2.0 * S * H * D * 4;
  bench_row(b, name, us, bytes, 0, goal_pct, 0);
  for (void *p : bufs) gt_free(t, p);
  gt_free(t, scratch);
}

/* Causal varlen prefill: 8 sequences x 2048 tokens, packed and paged. */
static void bench_prefill(bench_ctx_t *b) {
  gt_t *t = b->t;
  const int S = 8, N = 2048, H = 32, HKV = 8, D = 128, BS = 16;
  const int total = S * N, mbps = N / BS;
  const size_t row = (size_t)HKV * D;
  std::vector<int32_t> cu(S + 1), perm(S * mbps);
  for (int i = 0; i <= S; i++) cu[i] = i * N;
  for (int i = 0; i < S * mbps; i++) perm[i] = i;
  tu_shuffle_i32(&t->rng, perm.data(), perm.size());
  float *scratch = (float *)gt_dev(t, (size_t)total * row * 4);
  float *q = (float *)gt_dev(t, (size_t)total * H * D * 4), *out = (float *)gt_dev(t, (size_t)total * H * D * 4);
  void *k = gt_dev(t, (size_t)total * row * 2), *v = gt_dev(t, (size_t)total * row * 2);
  fill(b, q, (size_t)total * H * D, 1.0f);
  fill_bf16(b, k, (size_t)total * row, scratch, (size_t)total * row);
  fill_bf16(b, v, (size_t)total * row, scratch, (size_t)total * row);
  int32_t *dcu = (int32_t *)gt_dev_from(t, cu.data(), cu.size() * 4);
  int32_t *dbt = (int32_t *)gt_dev_from(t, perm.data(), perm.size() * 4);
  kern_attn_args_t a;
  memset(&a, 0, sizeof a);
  a.n_seqs = S, a.n_heads = H, a.n_kv_heads = HKV, a.head_dim = D, a.scale = 1.0f / sqrtf((float)D);
  a.q = q, a.out = out, a.cu_seq_lens_q = dcu, a.cu_seq_lens_k = dcu, a.max_seqlen_q = N, a.max_seqlen_k = N;
  a.total_q = total;
  a.k = k, a.v = v;
  /* The paged variant reads the same bytes as a cache of shuffled pages. */
  a.k_cache = k, a.v_cache = v, a.block_size = BS, a.block_table = dbt, a.max_blocks_per_seq = mbps;
  const double flops = 4.0 * D * H * S * ((double)N * (N + 1) / 2);
  double us = time_us(b, [&](int) { t->be->attn_varlen(t->be, &a); });
  bench_row(b, "prefill attn causal 8x2048, 32/8 heads, D128", us, 0, flops, 0, 300);
  us = time_us(b, [&](int) { t->be->attn_varlen_paged(t->be, &a); });
  bench_row(b, "prefill attn paged (page 16), same shape", us, 0, flops, 0, 300);
  gt_free(t, scratch), gt_free(t, q), gt_free(t, out), gt_free(t, k), gt_free(t, v);
  gt_free(t, dcu), gt_free(t, dbt);
}

/* Memory-bound operations at 16k tokens with Llama-3-8B widths. */
static void bench_memory_bound(bench_ctx_t *b) {
  gt_t *t = b->t;
  kern_backend_t *be = t->be;
  const int T = 16384, DIM = 4096, H = 32, D = 128, KV = 1024, FF = 14336, SETS = 3;
  std::vector<void *> bufs;
  auto dev = [&](size_t floats) {
    float *p = (float *)gt_dev(t, floats * 4);
    fill(b, p, floats, 1.0f);
    bufs.push_back(p);
    return p;
  };
  float *x[SETS], *y[SETS], *g[SETS], *u[SETS], *k[SETS], *v[SETS];
  for (int s = 0; s < SETS; s++) {
    x[s] = dev((size_t)T * DIM), y[s] = dev((size_t)T * DIM);
    g[s] = dev((size_t)T * FF), u[s] = dev((size_t)T * FF);
    k[s] = dev((size_t)T * KV), v[s] = dev((size_t)T * KV);
  }
  float *w = dev(DIM), *inv = (float *)gt_dev(t, (D / 2) * 4);
  bufs.push_back(inv);
  std::vector<float> invh(D / 2);
  for (int p = 0; p < D / 2; p++) invh[p] = (float)pow(500000.0, -2.0 * p / D);
  gt_put(t, inv, invh.data(), invh.size() * 4);
  std::vector<int32_t> pos(T), slots(T);
  for (int i = 0; i < T; i++) pos[i] = i, slots[i] = i;
  tu_shuffle_i32(&t->rng, slots.data(), slots.size());
  int32_t *dpos = (int32_t *)gt_dev_from(t, pos.data(), (size_t)T * 4);
  int32_t *dslots = (int32_t *)gt_dev_from(t, slots.data(), (size_t)T * 4);
  void *kc = gt_dev(t, (size_t)T * KV * 2), *vc = gt_dev(t, (size_t)T * KV * 2);
  bufs.push_back(dpos), bufs.push_back(dslots), bufs.push_back(kc), bufs.push_back(vc);

  double us = time_us(b, [&](int i) { be->rmsnorm(be, y[i % SETS], x[i % SETS], w, T, DIM, 1e-5f); });
  bench_row(b, "rmsnorm 16384 x 4096", us, 2.0 * T * DIM * 4, 0, 80, 0);
  us = time_us(b, [&](int i) { be->rope(be, x[i % SETS], dpos, T, H, D, D, inv, 0); });
  bench_row(b, "rope 16384 x 32 heads x 128 (pairs 2p, 2p+1)", us, 2.0 * T * H * D * 4, 0, 80, 0);
  us = time_us(b, [&](int i) { be->rope(be, x[i % SETS], dpos, T, H, D, D, inv, 1); });
  bench_row(b, "rope 16384 x 32 heads x 128 (neox pairs)", us, 2.0 * T * H * D * 4, 0, 80, 0);
  us = time_us(b, [&](int i) { be->kv_write(be, kc, vc, k[i % SETS], v[i % SETS], dslots, T, KV); });
  bench_row(b, "kv_write 16384 x 1024 (f32 -> bf16 slots)", us, 2.0 * T * KV * (4 + 2), 0, 80, 0);
  us = time_us(b, [&](int i) { be->swiglu(be, g[i % SETS], g[i % SETS], u[i % SETS], (int64_t)T * FF); });
  bench_row(b, "swiglu 16384 x 14336", us, 3.0 * T * FF * 4, 0, 80, 0);
  us = time_us(b, [&](int i) { be->add(be, y[i % SETS], y[i % SETS], x[i % SETS], (int64_t)T * DIM); });
  bench_row(b, "add 16384 x 4096", us, 3.0 * T * DIM * 4, 0, 0, 0);
  for (void *p : bufs) gt_free(t, p);
}

/* matmul through the backend (activation conversion + cuBLAS), for scale. */
static void bench_matmul(bench_ctx_t *b) {
  gt_t *t = b->t;
  kern_backend_t *be = t->be;
  const int64_t rows = 4096, cols = 4096;
  std::vector<uint16_t> wh((size_t)(rows * cols));
  for (size_t i = 0; i < wh.size(); i++) wh[i] = gt_bf16((float)tu_uniform(&t->rng, -0.05, 0.05));
  kern_weight_t w;
  if (be->weight_init(be, &w, KERN_BF16, rows, cols, wh.data()) != 0) return;
  const int n = 16384;
  float *x = (float *)gt_dev(t, (size_t)n * cols * 4), *y = (float *)gt_dev(t, (size_t)n * rows * 4);
  fill(b, x, (size_t)n * cols, 1.0f);
  double us = time_us(b, [&](int) { be->matmul(be, y, x, &w, n); });
  bench_row(b, "matmul 16384 x 4096 x 4096 (incl. x -> bf16)", us, 0, 2.0 * n * rows * cols, 0, 0);
  us = time_us(b, [&](int) { be->matmul(be, y, x, &w, 64); });
  bench_row(b, "matmul n=64, 4096 x 4096 weight (bytes: weight)", us, 2.0 * rows * cols, 0, 0, 0);
  be->weight_release(be, &w);
  gt_free(t, x), gt_free(t, y);
}

/* Sampling 256 rows of a 128,256-token vocabulary (Llama 3), top-p 0.9 at
 * temperature 0.8 (the threshold search over the whole vocabulary), with
 * no ops; bytes: the logits read once. */
static void bench_sample(bench_ctx_t *b) {
  gt_t *t = b->t;
  kern_backend_t *be = t->be;
  if (!be->sample) return;
  const int R = 256, V = 128256;
  float *x = (float *)gt_dev(t, (size_t)R * V * 4);
  std::vector<kern_sample_row_t> rows(R);
  for (int i = 0; i < R; i++) {
    memset(&rows[i], 0, sizeof rows[i]);
    rows[i].on_device = 1, rows[i].temperature = 0.8f, rows[i].top_p = 0.9f;
    rows[i].seed = 977ull * (uint64_t)(i + 1), rows[i].draw = 1;
  }
  kern_sample_row_t *dr = (kern_sample_row_t *)gt_dev_from(t, rows.data(), rows.size() * sizeof rows[0]);
  kern_sample_op_t *dop = (kern_sample_op_t *)gt_dev(t, sizeof(kern_sample_op_t));
  kern_sample_out_t *dout = (kern_sample_out_t *)gt_dev(t, (size_t)R * sizeof(kern_sample_out_t));
  /* the logits change between runs (the kernel may rewrite them): refill each time, timed apart */
  fill(b, x, (size_t)R * V, 3.0f);
  const double fill_us = time_us(b, [&](int) { fill(b, x, (size_t)R * V, 3.0f); });
  const double us = time_us(b, [&](int) {
    fill(b, x, (size_t)R * V, 3.0f);
    be->sample(be, dout, x, dr, dop, R, V);
  });
  bench_row(b, "sample 256 rows x 128256, top-p 0.9 (fill subtracted)", us - fill_us, (double)R * V * 4, 0, 0, 0);
  gt_free(t, x), gt_free(t, dr), gt_free(t, dop), gt_free(t, dout);
}

int gt_bench(gt_t *t, const char *table_path) {
  bench_ctx_t b;
  memset(&b, 0, sizeof b);
  b.t = t;
  b.cu = kern_cuda(t->be);
  b.seed = tu_next(&t->rng);
  b.table = table_path ? fopen(table_path, "w") : NULL;
  const char *head = "| %-44s | %12s | %14s | %13s | %15s | %6s |\n";
  printf(head, "benchmark", "median", "rate", "vs ceiling", "goal", "status");
  if (b.table) fprintf(b.table, head, "benchmark", "median", "rate", "vs ceiling", "goal", "status");
  ceilings(&b);
  bench_decode(&b, "decode attn 64x4096, 32/8 heads, D128, page 16", std::vector<int32_t>(64, 4096), 75);
  { /* skewed: one long context beside 64 short ones (issue 34: grid sized by the longest) */
    std::vector<int32_t> skew(64, 128);
    skew.push_back(16384);
    bench_decode(&b, "decode attn skewed 64x128 + 1x16384", skew, 0);
  }
  bench_prefill(&b);
  bench_memory_bound(&b);
  bench_matmul(&b);
  bench_sample(&b);
  if (b.table) fclose(b.table);
  return 0;
}
