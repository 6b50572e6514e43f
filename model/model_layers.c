/* model/model_layers.c — each layer's tensors by family: the attention
 * block (llama, qwen2/3, phi3's fused matrices, gemma's extra norms,
 * gpt-oss's biases and sinks, qwen35's gated q), a hybrid's Gated DeltaNet
 * layer, the dense or sparse MLP (experts stacked, fused or one per file
 * tensor). model_load.c checks and prepares each tensor; Gemma 4's layers
 * are model_gemma4.c's.
 *
 * Tensor names and shapes (GGUF dims, innermost first: [cols, rows]):
 *   token_embd.weight          [dim, n_vocab]
 *   output_norm.weight         [dim]                 F32
 *   output.weight              [dim, n_vocab]        absent: tied to token_embd
 *   rope_freqs.weight          [rot_dim / 2]         F32, optional (model_hparams.c)
 *   blk.N.attn_norm.weight     [dim]                 F32
 *   blk.N.attn_q.weight        [dim, q_dim]
 *   blk.N.attn_k.weight        [dim, kv_dim]
 *   blk.N.attn_v.weight        [dim, kv_dim]
 *   blk.N.attn_{q,k,v}.bias    [q_dim], [kv_dim]     F32; qwen2 (llama: all or none)
 *   blk.N.attn_{q,k}_norm.weight [head_dim]         F32; qwen3
 *   blk.N.attn_output.weight   [q_dim, dim]
 *   blk.N.ffn_norm.weight      [dim]                 F32
 *   blk.N.ffn_gate.weight      [dim, ff_dim]
 *   blk.N.ffn_up.weight        [dim, ff_dim]
 *   blk.N.ffn_down.weight      [ff_dim, dim]
 *   blk.N.post_attention_norm.weight, blk.N.post_ffw_norm.weight [dim]  F32; gemma
 *   blk.N.attn_qkv.weight      [dim, q_dim + 2 kv_dim]  phi3: for attn_{q,k,v}
 *   blk.N.ffn_up.weight        [dim, 2 ff_dim]          phi3: gate rows, then up rows
 *   rope_factors_{long,short}.weight [rot_dim / 2] F32  phi3 LongRoPE (model_hparams.c)
 *   qwen35 (model_gdn.c): attn_q.weight [dim, 2 q_dim] ([q, gate] per head) and
 *   post_attention_norm.weight (the MLP's input norm) on the attention layers;
 *   on the Gated DeltaNet layers instead of attn_{q,k,v,output}:
 *   blk.N.attn_qkv.weight      [dim, ssm_conv_dim]
 *   blk.N.attn_gate.weight     [dim, n_v_heads head_v]
 *   blk.N.ssm_alpha.weight, blk.N.ssm_beta.weight [dim, n_v_heads]
 *   blk.N.ssm_ba.weight        [dim, 2 n_v_heads]   qwen3next, for the two above
 *   blk.N.ssm_conv1d.weight    [conv_kernel, ssm_conv_dim]   F32
 *   blk.N.ssm_a, blk.N.ssm_dt.bias [n_v_heads]               F32
 *   blk.N.ssm_norm.weight      [head_v]                      F32
 *   blk.N.ssm_out.weight       [n_v_heads head_v, dim]
 *   blk.N.ffn_gate_inp.weight  [dim, n_expert]       a sparse layer's router (model_moe.h), then
 *   blk.N.ffn_{gate,up}_exps.weight [dim, expert_ff, n_expert], ffn_down_exps [expert_ff, dim, n_expert]
 *                                                    instead of ffn_{gate,up,down}; or per expert E
 *                                                    blk.N.ffn_{gate,up}.E.weight [dim, expert_ff], ffn_down.E
 *   blk.N.ffn_{gate,up}_shexp.weight [dim, shexp_ff], ffn_down_shexp [shexp_ff, dim],
 *   blk.N.ffn_gate_inp_shexp.weight [dim]            the shared expert (qwen2moe, qwen35moe, qwen3next);
 *   a hybrid's Gated DeltaNet layers carry the MLP (dense or sparse) too
 *   gpt-oss: blk.N.attn_{q,k,v,output}.bias, blk.N.attn_sinks.weight [n_heads] F32,
 *   blk.N.post_attention_norm.weight (the MLP's input norm, for ffn_norm), blk.N.ffn_gate_inp.bias
 *   [n_expert], blk.N.ffn_{gate,up}_exps.bias [expert_ff, n_expert], ffn_down_exps.bias [dim, n_expert]
 * Any other tensor is an error (model_load.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "model/model_internal.h"

static int load_moe(loader_t *ld, int l, model_layer_t *L);
int model__load_moe(loader_t *ld, int l) { return load_moe(ld, l, &ld->m->layers[l]); }

static int load_mlp(loader_t *ld, int l, model_layer_t *L);

/* A hybrid's Gated DeltaNet layer (model_gdn.c): its token mixer, then the
 * MLP with post_attention_norm as its input norm (qwen35's naming). */
static int load_recurrent(loader_t *ld, int l) {
  const model_hparams_t *hp = &ld->m->hp;
  model_layer_t *L = &ld->m->layers[l];
  const int64_t vd = (int64_t)hp->ssm_n_v_heads * hp->ssm_head_v, hv = hp->ssm_n_v_heads;
  char name[64];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, l), name)
  if (gguf_find_tensor(ld->m->gguf, NAME("ssm_in.weight")) &&
      !gguf_find_tensor(ld->m->gguf, NAME("attn_qkv.weight"))) { /* llama.cpp's first qwen3next files */
    snprintf(ld->err, ld->err_len,
             "tensor 'blk.%d.ssm_in.weight': a fused in_proj_qkvz of llama.cpp's first qwen3next GGUFs; tram reads "
             "the split attn_qkv/attn_gate form current llama.cpp writes: convert the model again",
             l);
    return -EINVAL;
  }
  int rc = model__load_vector(ld, NAME("attn_norm.weight"), hp->dim, &L->attn_norm, 1);
  if (rc == 0) rc = model__load_matrix(ld, NAME("attn_qkv.weight"), hp->ssm_conv_dim, hp->dim, &L->w_qkv);
  if (rc == 0) rc = model__load_matrix(ld, NAME("attn_gate.weight"), vd, hp->dim, &L->w_z);
  if (rc == 0 && hp->ssm_ba_fused) { /* qwen3next: [β, α] per key head in one matrix */
    rc = model__load_matrix(ld, NAME("ssm_ba.weight"), 2 * hv, hp->dim, &L->w_ba);
  } else {
    if (rc == 0) rc = model__load_matrix(ld, NAME("ssm_beta.weight"), hv, hp->dim, &L->w_beta);
    if (rc == 0) rc = model__load_matrix(ld, NAME("ssm_alpha.weight"), hv, hp->dim, &L->w_alpha);
  }
  if (rc == 0)
    rc = model__load_f32(ld, NAME("ssm_conv1d.weight"), hp->ssm_conv_kernel, hp->ssm_conv_dim, &L->conv_w, 1);
  if (rc == 0) rc = model__load_vector(ld, NAME("ssm_a"), hv, &L->a_neg, 1);
  if (rc == 0) rc = model__load_vector(ld, NAME("ssm_dt.bias"), hv, &L->dt_bias, 1);
  if (rc == 0) rc = model__load_vector(ld, NAME("ssm_norm.weight"), hp->ssm_head_v, &L->ssm_norm, 1);
  if (rc == 0) rc = model__load_matrix(ld, NAME("ssm_out.weight"), hp->dim, vd, &L->w_ssm_out);
  if (rc == 0) rc = model__load_vector(ld, NAME("post_attention_norm.weight"), hp->dim, &L->ffn_norm, 1);
  if (rc == 0) rc = load_mlp(ld, l, L);
#undef NAME
  return rc;
}

/* Layer l's experts of `kind` (gate, up, down), rows × cols each, into
 * ws[e]: slices of the stacked blk.l.ffn_<kind>_exps.weight ([cols, rows,
 * n_expert]); the gate and up halves of a fused blk.l.ffn_gate_up_exps
 * ([cols, 2 rows, n_expert], gate first: Gemma 4's); or one tensor per
 * expert blk.l.ffn_<kind>.E.weight (older llama.cpp files, and hf/'s view
 * of a checkpoint folder, whose experts stay apart in the mapping). A
 * token reads n_expert_used (step_bytes). */
static int load_experts(loader_t *ld, int l, const char *kind, int64_t rows, int64_t cols, kern_weight_t *ws) {
  const model_hparams_t *hp = &ld->m->hp;
  char name[64], one[64];
  snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", l, kind);
  snprintf(one, sizeof one, "blk.%d.ffn_%s.0.weight", l, kind);
  const int apart = !gguf_find_tensor(ld->m->gguf, name) && gguf_find_tensor(ld->m->gguf, one);
  int64_t slice = rows, row0 = 0; /* rows per expert in the stack, and this kind's first */
  if (!apart && strcmp(kind, "down") != 0 && !gguf_find_tensor(ld->m->gguf, name)) {
    char fused[64];
    snprintf(fused, sizeof fused, "blk.%d.ffn_gate_up_exps.weight", l);
    if (gguf_find_tensor(ld->m->gguf, fused)) {
      memcpy(name, fused, sizeof name);
      slice = 2 * rows, row0 = strcmp(kind, "up") == 0 ? rows : 0;
    }
  }
  int bad = 0;
  const gguf_tensor_t *t = apart ? NULL : model__find3(ld, name, cols, slice, hp->n_expert, 1, &bad);
  if (!apart && !t) return -EINVAL;
  for (int e = 0; e < hp->n_expert; e++) {
    if (apart) {
      snprintf(one, sizeof one, "blk.%d.ffn_%s.%d.weight", l, kind, e);
      if (!(t = model__find3(ld, one, cols, rows, 0, 1, &bad))) return -EINVAL;
    }
    const kern_type_t type = (kern_type_t)t->type;
    const int64_t row_bytes = kern_type_row_bytes(type, cols);
    const void *data =
        row_bytes <= 0 ? NULL : (const char *)t->data + (apart ? 0 : ((int64_t)e * slice + row0) * row_bytes);
    ws[e].lazy = 1; /* its backend copy waits for the first token that chooses it (model__moe_forward) */
    const int rc = model__prepare(ld, apart ? one : name, type, data, rows, cols, &ws[e]);
    if (rc != 0) return rc;
  }
  ld->m->step_bytes += hp->n_expert_used * rows * kern_type_row_bytes(ws[0].type, cols);
  return 0;
}

/* Gemma 4's router input norm (ffn_gate_inp.scale, times dim^-½) and its
 * experts' scales (ffn_down_exps.scale), both required there. */
static int load_gemma4_router(loader_t *ld, int l, model_moe_layer_t *M) {
  const model_hparams_t *hp = &ld->m->hp;
  kern_backend_t *be = ld->m->be;
  char name[64];
  float *scale = xmalloc((size_t)hp->dim * sizeof *scale);
  M->expert_scale = xmalloc((size_t)hp->n_expert * sizeof *M->expert_scale);
  snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.scale", l);
  int rc = model__load_host(ld, name, hp->dim, scale, 1);
  snprintf(name, sizeof name, "blk.%d.ffn_down_exps.scale", l);
  if (rc == 0) rc = model__load_host(ld, name, hp->n_expert, M->expert_scale, 1);
  for (int i = 0; rc == 0 && i < hp->dim; i++) scale[i] = (float)(scale[i] / sqrt((double)hp->dim));
  if (rc == 0 && !(M->router_norm = be->alloc(be, (size_t)hp->dim * sizeof *scale))) {
    snprintf(ld->err, ld->err_len, "the %s backend is out of memory", be->name);
    rc = -ENOMEM;
  }
  if (rc == 0) be->upload(be, M->router_norm, scale, (size_t)hp->dim * sizeof *scale);
  free(scale);
  return rc;
}

/* A sparse layer's router, experts and shared expert (model_moe.h). */
static int load_moe(loader_t *ld, int l, model_layer_t *L) {
  const model_hparams_t *hp = &ld->m->hp;
  const int E = hp->n_expert, eff = hp->expert_ff_dim, sff = hp->shexp_ff_dim;
  model_moe_layer_t *M = L->moe = xcalloc(1, sizeof *M);
  M->gate = xcalloc((size_t)E, sizeof *M->gate);
  M->up = xcalloc((size_t)E, sizeof *M->up);
  M->down = xcalloc((size_t)E, sizeof *M->down);
  char name[64];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, l), name)
  int rc = model__load_matrix(ld, NAME("ffn_gate_inp.weight"), E, hp->dim, &M->router);
  if (rc == 0 && hp->arch == MODEL_ARCH_GEMMA4) rc = load_gemma4_router(ld, l, M);
  if (rc == 0) rc = load_experts(ld, l, "gate", eff, hp->dim, M->gate);
  if (rc == 0) rc = load_experts(ld, l, "up", eff, hp->dim, M->up);
  if (rc == 0) rc = load_experts(ld, l, "down", hp->dim, eff, M->down);
  if (rc == 0 && hp->moe_bias) { /* gpt-oss */
    rc = model__load_vector(ld, NAME("ffn_gate_inp.bias"), E, &M->router_b, 1);
    if (rc == 0) rc = model__load_f32(ld, NAME("ffn_gate_exps.bias"), eff, E, &M->gate_b, 1);
    if (rc == 0) rc = model__load_f32(ld, NAME("ffn_up_exps.bias"), eff, E, &M->up_b, 1);
    if (rc == 0) rc = model__load_f32(ld, NAME("ffn_down_exps.bias"), hp->dim, E, &M->down_b, 1);
  }
  if (rc == 0 && sff > 0) {
    rc = model__load_matrix(ld, NAME("ffn_gate_shexp.weight"), sff, hp->dim, &M->sh_gate);
    if (rc == 0) rc = model__load_matrix(ld, NAME("ffn_up_shexp.weight"), sff, hp->dim, &M->sh_up);
    if (rc == 0) rc = model__load_matrix(ld, NAME("ffn_down_shexp.weight"), hp->dim, sff, &M->sh_down);
    if (rc == 0) rc = model__load_matrix(ld, NAME("ffn_gate_inp_shexp.weight"), 1, hp->dim, &M->sh_router);
  }
#undef NAME
  return rc;
}

int model__load_layer(loader_t *ld, int l) {
  const model_hparams_t *hp = &ld->m->hp;
  model_layer_t *L = &ld->m->layers[l];
  if (model_layer_recurrent(hp, l)) return load_recurrent(ld, l);
  if (hp->arch == MODEL_ARCH_GEMMA4) return model__gemma4_load_layer(ld, l);
  char name[64];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, l), name)
  int rc = model__load_vector(ld, NAME("attn_norm.weight"), hp->dim, &L->attn_norm, 1);
  if (rc == 0 && hp->fused) { /* phi3: attn_qkv = [Wq; Wk; Wv] */
    const int64_t all = (int64_t)hp->q_dim + 2 * hp->kv_dim;
    rc = model__load_rows(ld, NAME("attn_qkv.weight"), all, hp->dim, 0, hp->q_dim, &L->wq);
    if (rc == 0) rc = model__load_rows(ld, name, all, hp->dim, hp->q_dim, hp->kv_dim, &L->wk);
    if (rc == 0) rc = model__load_rows(ld, name, all, hp->dim, hp->q_dim + hp->kv_dim, hp->kv_dim, &L->wv);
  } else {
    /* qwen35: [q, gate] per head */
    if (rc == 0) rc = model__load_matrix(ld, NAME("attn_q.weight"), (hp->attn_out_gate ? 2 : 1) * (int64_t)hp->q_dim,
                                  hp->dim, &L->wq);
    if (rc == 0) rc = model__load_matrix(ld, NAME("attn_k.weight"), hp->kv_dim, hp->dim, &L->wk);
    if (rc == 0) rc = model__load_matrix(ld, NAME("attn_v.weight"), hp->kv_dim, hp->dim, &L->wv);
  }
  if (rc == 0 && hp->qkv_bias) {
    rc = model__load_vector(ld, NAME("attn_q.bias"), hp->q_dim, &L->bq, 1);
    if (rc == 0) rc = model__load_vector(ld, NAME("attn_k.bias"), hp->kv_dim, &L->bk, 1);
    if (rc == 0) rc = model__load_vector(ld, NAME("attn_v.bias"), hp->kv_dim, &L->bv, 1);
  }
  if (rc == 0 && hp->qk_norm) {
    rc = model__load_vector(ld, NAME("attn_q_norm.weight"), hp->head_dim, &L->q_norm, 1);
    if (rc == 0) rc = model__load_vector(ld, NAME("attn_k_norm.weight"), hp->head_dim, &L->k_norm, 1);
  }
  if (rc == 0) rc = model__load_matrix(ld, NAME("attn_output.weight"), hp->dim, hp->q_dim, &L->wo);
  if (rc == 0 && hp->o_bias) rc = model__load_vector(ld, NAME("attn_output.bias"), hp->dim, &L->bo, 1);
  if (rc == 0 && hp->attn_sinks) rc = model__load_vector(ld, NAME("attn_sinks.weight"), hp->n_heads, &L->sinks, 1);
  /* qwen35 and gpt-oss name the MLP's input norm post_attention_norm */
  const int post = hp->attn_out_gate || hp->arch == MODEL_ARCH_GPTOSS;
  if (rc == 0) rc = model__load_vector(ld, post ? NAME("post_attention_norm.weight") : NAME("ffn_norm.weight"), hp->dim,
                                &L->ffn_norm, 1);
  if (rc == 0) rc = load_mlp(ld, l, L);
  if (rc == 0 && hp->post_norms) {
    rc = model__load_vector(ld, NAME("post_attention_norm.weight"), hp->dim, &L->post_attn_norm, 1);
    if (rc == 0) rc = model__load_vector(ld, NAME("post_ffw_norm.weight"), hp->dim, &L->post_ffn_norm, 1);
  }
#undef NAME
  return rc;
}

/* Layer l's MLP: a sparse layer's experts (a router present), else the
 * dense MLP (mlp_only_layers); a model without a dense width (ff_dim 0:
 * qwen35moe) needs the router on every layer. */
static int load_mlp(loader_t *ld, int l, model_layer_t *L) {
  const model_hparams_t *hp = &ld->m->hp;
  char name[64];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, l), name)
  if (hp->n_expert > 0 && (hp->ff_dim == 0 || gguf_find_tensor(ld->m->gguf, NAME("ffn_gate_inp.weight"))))
    return load_moe(ld, l, L);
  int rc = 0;
  if (hp->fused) { /* phi3: ffn_up = [Wgate; Wup] */
    rc = model__load_rows(ld, NAME("ffn_up.weight"), 2 * (int64_t)hp->ff_dim, hp->dim, 0, hp->ff_dim, &L->w_gate);
    if (rc == 0) rc = model__load_rows(ld, name, 2 * (int64_t)hp->ff_dim, hp->dim, hp->ff_dim, hp->ff_dim, &L->w_up);
  } else {
    rc = model__load_matrix(ld, NAME("ffn_gate.weight"), hp->ff_dim, hp->dim, &L->w_gate);
    if (rc == 0) rc = model__load_matrix(ld, NAME("ffn_up.weight"), hp->ff_dim, hp->dim, &L->w_up);
  }
  if (rc == 0) rc = model__load_matrix(ld, NAME("ffn_down.weight"), hp->dim, hp->ff_dim, &L->w_down);
#undef NAME
  return rc;
}
