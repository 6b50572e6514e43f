/* kernels/cpu/repack.c — the 8-row panel layouts of repack.h: repacking
 * GGUF rows into panels and back, portable C.
 *
 * Both directions walk the same description: for each block of a panel, a
 * list of fields (scales copied row by row, scale planes, nibble chunks, bit
 * words, Q8_0 pair chunks, Q6_K high-bit chunks), each naming where its
 * bytes or bits come from in the 8 GGUF rows. pack() moves bits from the
 * rows into the panel, unpack() the other way, with the same moves. */
#include "kernels/cpu/repack.h"

#include <string.h>

#include "kernels/quant_blocks.h"

int kern_cpu_rp_supported(kern_type_t type, int64_t cols) {
  if (cols <= 0) return 0;
  switch (type) {
  case KERN_Q4_0: case KERN_Q4_1: case KERN_Q5_0: case KERN_Q5_1: case KERN_Q8_0: case KERN_MXFP4:
    return cols % 32 == 0;
  case KERN_Q4_K: case KERN_Q5_K: case KERN_Q6_K:
    return cols % 256 == 0;
  default:
    return 0;
  }
}

int64_t kern_cpu_rp_panel_bytes(kern_type_t type, int64_t cols) {
  return KERN_CPU_RP_ROWS * kern_type_row_bytes(type, cols);
}

size_t kern_cpu_rp_bytes(kern_type_t type, int64_t rows, int64_t cols) {
  const int64_t panels = (rows + KERN_CPU_RP_ROWS - 1) / KERN_CPU_RP_ROWS;
  return (size_t)(panels * kern_cpu_rp_panel_bytes(type, cols));
}

/* One move: bit `sbit` of byte `soff` of GGUF row r (within the block) to
 * bit `dbit` of byte `doff` of the panel block, or back. */
typedef struct {
  uint8_t *panel;       /* the panel block */
  uint8_t *rows[KERN_CPU_RP_ROWS]; /* the rows' blocks (NULL: a zero row) */
  int unpack;
} mover_t;

static void move_bits(mover_t *m, int r, int64_t soff, int sbit, int64_t doff, int dbit, int nbits) {
  for (int i = 0; i < nbits; i++) {
    uint8_t *s = m->rows[r] ? m->rows[r] + soff : NULL, *d = m->panel + doff;
    const int sb = sbit + i, db = dbit + i;
    if (!m->unpack) {
      const int v = s ? (*s >> sb) & 1 : 0;
      *d = (uint8_t)((*d & ~(1 << db)) | v << db);
    } else if (s) {
      const int v = (*d >> db) & 1;
      *s = (uint8_t)((*s & ~(1 << sb)) | v << sb);
    }
  }
}

static void move_byte(mover_t *m, int r, int64_t soff, int64_t doff) { move_bits(m, r, soff, 0, doff, 0, 8); }

/* Fields of the layouts; each returns the panel offset after it. */

/* A 2-byte field at soff of each row, row by row (d, m, dmin). */
static int64_t f_scales(mover_t *m, int64_t off, int64_t soff) {
  for (int r = 0; r < KERN_CPU_RP_ROWS; r++) {
    move_byte(m, r, soff, off + 2 * r);
    move_byte(m, r, soff + 1, off + 2 * r + 1);
  }
  return off + 16;
}

/* n bytes at soff of each row as n planes of 8 (plane k, byte r). */
static int64_t f_planes(mover_t *m, int64_t off, int64_t soff, int n) {
  for (int k = 0; k < n; k++)
    for (int r = 0; r < KERN_CPU_RP_ROWS; r++) move_byte(m, r, soff + k, off + 8 * k + r);
  return off + 8 * n;
}

/* A nibble chunk whose byte 4r + j is byte qs + 4c + j of row r, whole. */
static int64_t f_chunk(mover_t *m, int64_t off, int64_t qs, int c) {
  for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
    for (int j = 0; j < 4; j++) move_byte(m, r, qs + 4 * c + j, off + 4 * r + j);
  return off + 32;
}

/* A bit plane: bit g of byte 4r + j from bit sbit(g, j) of byte soff(g, j)
 * of row r, for Q5_0/Q5_1 (qh a u32 at `qh`, element 4g + j) or Q5_K
 * (bit `kbit` of qh[4g + j]). */
static int64_t f_plane_q5(mover_t *m, int64_t off, int64_t qh) {
  for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
    for (int j = 0; j < 4; j++)
      for (int g = 0; g < 8; g++) {
        const int e = 4 * g + j;
        move_bits(m, r, qh + e / 8, e % 8, off + 4 * r + j, g, 1);
      }
  return off + 32;
}

static int64_t f_plane_q5k(mover_t *m, int64_t off, int64_t qh, int kbit) {
  for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
    for (int j = 0; j < 4; j++)
      for (int c = 0; c < 8; c++) move_bits(m, r, qh + 4 * c + j, kbit, off + 4 * r + j, c, 1);
  return off + 32;
}

/* Where the 6-bit Q6_K value of element e lives in a block_q6_K: its low
 * nibble at bit *lbit of byte *lo, its top 2 bits at bit *hbit of *hi. */
static void q6_pos(int e, int64_t *lo, int *lbit, int64_t *hi, int *hbit) {
  const int half = e >> 7, i = e & 127;
  *lo = 64 * half + (i & 63);
  *lbit = 4 * (i >> 6);
  *hi = 128 + 32 * half + (i & 31);
  *hbit = 2 * (i >> 5);
}

/* One block (or super-block) of a panel. */
static void block(kern_type_t type, mover_t *m) {
  int64_t off = 0;
  switch (type) {
  case KERN_Q4_0: case KERN_Q4_1: case KERN_Q5_0: case KERN_Q5_1: {
    const int has_m = type == KERN_Q4_1 || type == KERN_Q5_1, five = type == KERN_Q5_0 || type == KERN_Q5_1;
    off = f_scales(m, off, 0);
    if (has_m) off = f_scales(m, off, 2);
    const int64_t qh = has_m ? 4 : 2, qs = (has_m ? 4 : 2) + (five ? 4 : 0);
    if (five) off = f_plane_q5(m, off, qh);
    for (int c = 0; c < 4; c++) off = f_chunk(m, off, qs, c);
    break;
  }
  case KERN_MXFP4:
    off = f_planes(m, off, 0, 1);
    for (int c = 0; c < 4; c++) off = f_chunk(m, off, 1, c);
    break;
  case KERN_Q8_0:
    off = f_scales(m, off, 0);
    for (int k = 0; k < 16; k++)
      for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
        for (int j = 0; j < 2; j++) move_byte(m, r, 2 + 2 * k + j, off + 16 * k + 2 * r + j);
    break;
  case KERN_Q4_K: case KERN_Q5_K: {
    const int five = type == KERN_Q5_K;
    off = f_scales(m, off, 0);
    off = f_scales(m, off, 2);
    off = f_planes(m, off, 4, 12);
    for (int q = 0; q < 4; q++) {
      if (five) {
        off = f_plane_q5k(m, off, 16, 2 * q);
        off = f_plane_q5k(m, off, 16, 2 * q + 1);
      }
      for (int c = 0; c < 8; c++) off = f_chunk(m, off, (five ? 48 : 16) + 32 * q, c);
    }
    break;
  }
  case KERN_Q6_K:
    off = f_scales(m, off, 208);
    off = f_planes(m, off, 192, 16);
    for (int q = 0; q < 4; q++) {
      for (int c = 0; c < 8; c++)
        for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
          for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++) { /* lo run: sub-block 2q, hi: 2q + 1 */
              int64_t lo, hi;
              int lbit, hbit;
              q6_pos(32 * (2 * q + h) + 4 * c + j, &lo, &lbit, &hi, &hbit);
              move_bits(m, r, lo, lbit, off + 32 * c + 4 * r + j, 4 * h, 4);
            }
      off += 256;
      for (int t = 0; t < 4; t++) {
        for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
          for (int j = 0; j < 4; j++)
            for (int i = 0; i < 4; i++) { /* registers: chunk 2t lo, 2t hi, 2t + 1 lo, 2t + 1 hi */
              const int c = 2 * t + i / 2, h = i % 2;
              int64_t lo, hi;
              int lbit, hbit;
              q6_pos(32 * (2 * q + h) + 4 * c + j, &lo, &lbit, &hi, &hbit);
              move_bits(m, r, hi, hbit, off + 4 * r + j, 2 * i, 2);
            }
        off += 32;
      }
    }
    break;
  default:
    break;
  }
}

/* The block geometry of a type: GGUF block bytes and blocks per row. */
static void geometry(kern_type_t type, int64_t cols, int64_t *bb, int64_t *nb) {
  *bb = kern_type_block_bytes(type);
  *nb = cols / kern_type_block_elems(type);
}

void kern_cpu_rp_pack_ref(kern_type_t type, const uint8_t *src, int64_t rows, int64_t cols, uint8_t *dst, int64_t p0,
                          int64_t p1) {
  int64_t bb, nb;
  geometry(type, cols, &bb, &nb);
  const int64_t row_bytes = bb * nb, pb = kern_cpu_rp_panel_bytes(type, cols);
  for (int64_t p = p0; p < p1; p++) {
    uint8_t *panel = dst + p * pb;
    memset(panel, 0, (size_t)pb);
    for (int64_t b = 0; b < nb; b++) {
      mover_t m = {.panel = panel + b * KERN_CPU_RP_ROWS * bb, .unpack = 0};
      for (int r = 0; r < KERN_CPU_RP_ROWS; r++) {
        const int64_t row = p * KERN_CPU_RP_ROWS + r;
        m.rows[r] = row < rows ? (uint8_t *)(src + row * row_bytes + b * bb) : NULL;
      }
      block(type, &m);
    }
  }
}

void kern_cpu_rp_unpack_row(kern_type_t type, const uint8_t *packed, int64_t cols, int64_t row, uint8_t *out) {
  int64_t bb, nb;
  geometry(type, cols, &bb, &nb);
  const int64_t pb = kern_cpu_rp_panel_bytes(type, cols);
  const uint8_t *panel = packed + row / KERN_CPU_RP_ROWS * pb;
  for (int64_t b = 0; b < nb; b++) {
    mover_t m = {.panel = (uint8_t *)(panel + b * KERN_CPU_RP_ROWS * bb), .unpack = 1};
    m.rows[row % KERN_CPU_RP_ROWS] = out + b * bb;
    memset(out + b * bb, 0, (size_t)bb);
    block(type, &m);
  }
}

/* --- the fast packer (what weight_init runs; the same bytes as the
 * moves above, which the tests hold it to) ------------------------------- */

static void copy_scales(uint8_t *out, const uint8_t *const *rb, int64_t soff) {
  for (int r = 0; r < KERN_CPU_RP_ROWS; r++) memcpy(out + 2 * r, rb[r] + soff, 2);
}

static void copy_chunks(uint8_t *out, const uint8_t *const *rb, int64_t qs, int n) {
  for (int c = 0; c < n; c++)
    for (int r = 0; r < KERN_CPU_RP_ROWS; r++) memcpy(out + 32 * c + 4 * r, rb[r] + qs + 4 * c, 4);
}

static void pack_block(kern_type_t type, const uint8_t *const *rb, uint8_t *out) {
  switch (type) {
  case KERN_Q4_0: case KERN_Q4_1: case KERN_Q5_0: case KERN_Q5_1: {
    const int has_m = type == KERN_Q4_1 || type == KERN_Q5_1, five = type == KERN_Q5_0 || type == KERN_Q5_1;
    copy_scales(out, rb, 0);
    out += 16;
    if (has_m) copy_scales(out, rb, 2), out += 16;
    const int64_t qh = has_m ? 4 : 2, qs = qh + (five ? 4 : 0);
    if (five) {
      for (int r = 0; r < KERN_CPU_RP_ROWS; r++) {
        uint32_t bits;
        memcpy(&bits, rb[r] + qh, 4);
        for (int j = 0; j < 4; j++) {
          int byte = 0;
          for (int g = 0; g < 8; g++) byte |= (int)((bits >> (4 * g + j)) & 1) << g;
          out[4 * r + j] = (uint8_t)byte;
        }
      }
      out += 32;
    }
    copy_chunks(out, rb, qs, 4);
    break;
  }
  case KERN_MXFP4:
    for (int r = 0; r < KERN_CPU_RP_ROWS; r++) out[r] = rb[r][0];
    copy_chunks(out + 8, rb, 1, 4);
    break;
  case KERN_Q8_0:
    copy_scales(out, rb, 0);
    for (int k = 0; k < 16; k++)
      for (int r = 0; r < KERN_CPU_RP_ROWS; r++) memcpy(out + 16 + 16 * k + 2 * r, rb[r] + 2 + 2 * k, 2);
    break;
  case KERN_Q4_K: case KERN_Q5_K: {
    const int five = type == KERN_Q5_K;
    copy_scales(out, rb, 0);
    copy_scales(out + 16, rb, 2);
    for (int k = 0; k < 12; k++)
      for (int r = 0; r < KERN_CPU_RP_ROWS; r++) out[32 + 8 * k + r] = rb[r][4 + k];
    out += 128;
    for (int q = 0; q < 4; q++) {
      if (five) {
        for (int h = 0; h < 2; h++)
          for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
            for (int j = 0; j < 4; j++) {
              int byte = 0;
              for (int c = 0; c < 8; c++) byte |= ((rb[r][16 + 4 * c + j] >> (2 * q + h)) & 1) << c;
              out[32 * h + 4 * r + j] = (uint8_t)byte;
            }
        out += 64;
      }
      copy_chunks(out, rb, (five ? 48 : 16) + 32 * q, 8);
      out += 256;
    }
    break;
  }
  case KERN_Q6_K: {
    copy_scales(out, rb, 208);
    for (int u = 0; u < 16; u++)
      for (int r = 0; r < KERN_CPU_RP_ROWS; r++) out[16 + 8 * u + r] = rb[r][192 + u];
    out += 144;
    uint8_t v[KERN_CPU_RP_ROWS][256]; /* the 6-bit values */
    for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
      for (int e = 0; e < 256; e++) {
        int64_t lo, hi;
        int lbit, hbit;
        q6_pos(e, &lo, &lbit, &hi, &hbit);
        v[r][e] = (uint8_t)(((rb[r][lo] >> lbit) & 15) | ((rb[r][hi] >> hbit) & 3) << 4);
      }
    for (int q = 0; q < 4; q++) {
      for (int c = 0; c < 8; c++)
        for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
          for (int j = 0; j < 4; j++)
            out[32 * c + 4 * r + j] = (uint8_t)((v[r][64 * q + 4 * c + j] & 15) | (v[r][64 * q + 32 + 4 * c + j] & 15) << 4);
      out += 256;
      for (int t = 0; t < 4; t++) {
        for (int r = 0; r < KERN_CPU_RP_ROWS; r++)
          for (int j = 0; j < 4; j++) {
            int byte = 0;
            for (int i = 0; i < 4; i++) byte |= (v[r][64 * q + 32 * (i % 2) + 4 * (2 * t + i / 2) + j] >> 4) << (2 * i);
            out[4 * r + j] = (uint8_t)byte;
          }
        out += 32;
      }
    }
    break;
  }
  default:
    break;
  }
}

void kern_cpu_rp_pack(kern_type_t type, const uint8_t *src, int64_t rows, int64_t cols, uint8_t *dst, int64_t p0,
                      int64_t p1) {
  static const uint8_t zero[sizeof(block_q6_K)]; /* the largest block: a padding row's */
  int64_t bb, nb;
  geometry(type, cols, &bb, &nb);
  const int64_t row_bytes = bb * nb, pb = kern_cpu_rp_panel_bytes(type, cols);
  for (int64_t p = p0; p < p1; p++)
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t *rb[KERN_CPU_RP_ROWS];
      for (int r = 0; r < KERN_CPU_RP_ROWS; r++) {
        const int64_t row = p * KERN_CPU_RP_ROWS + r;
        rb[r] = row < rows ? src + row * row_bytes + b * bb : zero;
      }
      pack_block(type, rb, dst + p * pb + b * KERN_CPU_RP_ROWS * bb);
    }
}
