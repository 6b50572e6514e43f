/* kernels/kern_types.c — type names and block geometry (see kern_types.h). */
#include "kernels/kern_types.h"

#include "kernels/quant_blocks.h"

typedef struct {
  const char *name;
  int64_t block_elems;
  int64_t block_bytes;
  int is_weight;
} type_info_t;

static const type_info_t types[KERN_TYPE_COUNT] = {
    [KERN_F32] = {"F32", 1, 4, 1},
    [KERN_F16] = {"F16", 1, 2, 1},
    [KERN_BF16] = {"BF16", 1, 2, 1},
    [KERN_Q4_0] = {"Q4_0", QK4_0, sizeof(block_q4_0), 1},
    [KERN_Q4_1] = {"Q4_1", QK4_1, sizeof(block_q4_1), 1},
    [KERN_Q5_0] = {"Q5_0", QK5_0, sizeof(block_q5_0), 1},
    [KERN_Q5_1] = {"Q5_1", QK5_1, sizeof(block_q5_1), 1},
    [KERN_Q8_0] = {"Q8_0", QK8_0, sizeof(block_q8_0), 1},
    [KERN_Q8_1] = {"Q8_1", QK8_1, sizeof(block_q8_1), 0},
    [KERN_Q4_K] = {"Q4_K", QK_K, sizeof(block_q4_K), 1},
    [KERN_Q5_K] = {"Q5_K", QK_K, sizeof(block_q5_K), 1},
    [KERN_Q6_K] = {"Q6_K", QK_K, sizeof(block_q6_K), 1},
    [KERN_Q8_K] = {"Q8_K", QK_K, sizeof(block_q8_K), 0},
    [KERN_MXFP4] = {"MXFP4", QK_MXFP4, sizeof(block_mxfp4), 1},
};

static const type_info_t *info(uint32_t type) {
  if (type >= KERN_TYPE_COUNT || types[type].name == NULL) return NULL;
  return &types[type];
}

const char *kern_type_name(uint32_t type) {
  const type_info_t *t = info(type);
  return t ? t->name : NULL;
}

int kern_type_is_weight(uint32_t type) {
  const type_info_t *t = info(type);
  return t ? t->is_weight : 0;
}

int64_t kern_type_block_elems(uint32_t type) {
  const type_info_t *t = info(type);
  return t ? t->block_elems : 0;
}

int64_t kern_type_block_bytes(uint32_t type) {
  const type_info_t *t = info(type);
  return t ? t->block_bytes : 0;
}

int64_t kern_type_row_bytes(uint32_t type, int64_t cols) {
  const type_info_t *t = info(type);
  if (!t || cols < 0 || cols % t->block_elems != 0) return -1;
  int64_t blocks = cols / t->block_elems;
  if (blocks > INT64_MAX / t->block_bytes) return -1;
  return blocks * t->block_bytes;
}
