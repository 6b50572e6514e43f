/* kernels/kern_join.c — the layout of a joined weight (see kern_join.h). */
#include "kernels/kern_join.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

int kern_join_plan(kern_join_plan_t *p, const kern_weight_t *const *parts, int n, char *err, size_t err_len) {
  if (n < 2 || n > KERN_JOIN_MAX_PARTS) {
    snprintf(err, err_len, "%d parts (a join takes 2 to %d)", n, KERN_JOIN_MAX_PARTS);
    return -EINVAL;
  }
  *p = (kern_join_plan_t){.n = n, .cols = parts[0]->cols, .type = parts[0]->type};
  for (int i = 0; i < n; i++) {
    const kern_weight_t *w = parts[i];
    if (w->rows <= 0 || w->cols <= 0) {
      snprintf(err, err_len, "part %d is %lld x %lld", i, (long long)w->rows, (long long)w->cols);
      return -EINVAL;
    }
    if (w->cols != p->cols) {
      snprintf(err, err_len, "part %d has %lld input features, part 0 %lld", i, (long long)w->cols,
               (long long)p->cols);
      return -EINVAL;
    }
    if (w->rows > INT_MAX - p->rows) {
      snprintf(err, err_len, "more than %d rows in all", INT_MAX);
      return -EINVAL;
    }
    if (w->type != p->type) p->type = KERN_BF16;
    p->row0[i] = p->rows;
    p->rows += w->rows;
  }
  if (p->rows > (int64_t)(SIZE_MAX / 4) / p->cols) {
    snprintf(err, err_len, "a joined matrix of %lld x %lld is too large", (long long)p->rows, (long long)p->cols);
    return -EINVAL;
  }
  return 0;
}
