/* kernels/cpu/simd.h — which SIMD path the CPU kernels are built with.
 *
 * KERN_CPU_AVX2 is defined when the compiler targets AVX2 + FMA + F16C (the
 * build uses -march=native). Every kernel with an AVX2 path also has a
 * portable one, always compiled, giving the same bits: the tests compare
 * them, and a build without AVX2 runs the portable ones. */
#ifndef TRAM_KERN_CPU_SIMD_H
#define TRAM_KERN_CPU_SIMD_H

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KERN_CPU_AVX2 1
#endif

/* KERN_CPU_AVX512: the AVX2 path plus AVX-512 F/BW/VL, for the kernels
 * that have 512-bit tiles (the fast matmul, matmul_q8_avx512.c; with
 * AVX-512 VNNI it uses vpdpwssd). The AVX2 and portable versions stay
 * compiled beside them and give the same bits. */
#if defined(KERN_CPU_AVX2) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define KERN_CPU_AVX512 1
#endif

/* 1 when the kernels run their AVX2 paths, 0 when the portable ones. */
int kern_cpu_simd(void);

#endif
