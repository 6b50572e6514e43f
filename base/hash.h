/* base/hash.h — the two hashes the tree shares, header-only:
 *
 *   hash_mix64   splitmix64's output function (Steele, Lea and Flood,
 *                "Fast splittable pseudorandom number generators", 2014):
 *                a bijective 64-bit mixer. With HASH_GAMMA it is the
 *                sampler's counter-based random stream (draw i of seed s is
 *                hash_mix64(s + i * HASH_GAMMA)), which the host sampler
 *                and the device's sampling kernel must compute bit for bit
 *                alike: so it also compiles as CUDA host and device code
 *                (nvcc includes this header from kernels/kern_sample.h).
 *   hash_fnv1a   64-bit FNV-1a over bytes, chainable.
 *
 * Neither is a defence against chosen keys: callers hash their own data
 * (token ids, file names, schemas a client sent in a bounded cache). */
#ifndef TRAM_BASE_HASH_H
#define TRAM_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define HASH_HD __host__ __device__
#else
#define HASH_HD
#endif

/* splitmix64's increment: 2^64 / the golden ratio, odd. */
#define HASH_GAMMA 0x9e3779b97f4a7c15ull

/* splitmix64's output function. */
static inline HASH_HD uint64_t hash_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* FNV-1a's offset basis: where a hash starts. */
#define HASH_FNV_OFFSET 0xcbf29ce484222325ull

/* The 64-bit FNV-1a hash of s[0..n), continuing from h (HASH_FNV_OFFSET to
 * start one), so that several pieces hash as their concatenation. */
static inline uint64_t hash_fnv1a(uint64_t h, const void *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

#endif
