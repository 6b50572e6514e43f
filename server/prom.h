/* server/prom.h — Prometheus metrics: a small registry and the text
 * exposition format (version 0.0.4) that /metrics serves.
 *
 * A registry holds metric families (counter, gauge, histogram), each with a
 * fixed list of label names; a series is one combination of label values.
 * Constant labels (e.g. model_name) are added to every series. Histograms
 * keep per-bucket counts and are written the Prometheus way: cumulative
 * `_bucket{le="..."}` lines ending with le="+Inf", then `_sum` and `_count`.
 *
 * The registry is not thread-safe: fill it and render it on one thread (the
 * loop thread copies the engine's stats snapshot into it when /metrics is
 * asked, or the engine observes into it under the integration's lock).
 * Names and label names are code constants: an invalid one is a programmer
 * error and aborts. Everything is freed by prom_registry_destroy(). */
#ifndef TRAM_PROM_H
#define TRAM_PROM_H

#include <stddef.h>
#include <stdint.h>

typedef struct prom_registry prom_registry_t;
typedef struct prom_family prom_family_t;
typedef struct prom_series prom_series_t;

typedef enum { PROM_COUNTER, PROM_GAUGE, PROM_HISTOGRAM } prom_type_t;

prom_registry_t *prom_registry_create(void);
void prom_registry_destroy(prom_registry_t *reg); /* NULL: no-op */

/* Adds name="value" to every series (both copied; at most 8). */
void prom_registry_const_label(prom_registry_t *reg, const char *name, const char *value);

/* Registers a family. name matches [a-zA-Z_:][a-zA-Z0-9_:]* (counters
 * conventionally end in _total); label_names[n_labels] match
 * [a-zA-Z_][a-zA-Z0-9_]* and are not "le". For histograms, bounds[n_bounds]
 * are finite and strictly increasing (the +Inf bucket is implicit). The
 * registry owns the family; families are written in registration order. */
prom_family_t *prom_counter(prom_registry_t *reg, const char *name, const char *help,
                            int n_labels, const char *const *label_names);
prom_family_t *prom_gauge(prom_registry_t *reg, const char *name, const char *help,
                          int n_labels, const char *const *label_names);
prom_family_t *prom_histogram(prom_registry_t *reg, const char *name, const char *help,
                              int n_labels, const char *const *label_names,
                              const double *bounds, int n_bounds);

/* The series for label_values[n_labels] (copied), created at zero on first
 * use; NULL values for a family without labels. */
prom_series_t *prom_series(prom_family_t *fam, const char *const *label_values);

/* Counter or gauge: value += v (a counter ignores v < 0). */
void prom_add(prom_series_t *s, double v);
/* Gauge, or a counter copied from a snapshot: value = v. */
void prom_set(prom_series_t *s, double v);
/* Histogram: counts v in the first bucket with v <= bound (or +Inf). */
void prom_observe(prom_series_t *s, double v);
/* Histogram copied from a snapshot: counts[n_bounds + 1] per bucket (not
 * cumulative; the last is the +Inf bucket) and their sum. */
void prom_hist_set(prom_series_t *s, const uint64_t *counts, double sum);
/* The current value (counter/gauge) or count (histogram). */
double prom_value(const prom_series_t *s);

/* Bounds 1, 2, 5, 10, 20, 50, ... up to max (vLLM's token-count buckets):
 * writes at most cap values into out, returns how many. */
int prom_buckets_125(double max, double *out, int cap);

/* The registry in the text format; malloc'd, NUL-terminated, *len its length
 * (len may be NULL). Content-Type: text/plain; version=0.0.4. */
char *prom_render(const prom_registry_t *reg, size_t *len);

#endif
