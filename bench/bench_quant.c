/* CPU kernel benchmark: the machine's read bandwidth, then per weight format the GB/s of weight
 * bytes that quant_matmul streams for a matrix-vector product (n_cols = 1), single-threaded and
 * with all threads, beside that bandwidth (the roofline of a memory-bound product).
 *
 *   build/bench/bench_quant [--quick] [--threads N] [--seconds S]
 *
 * Weights are random blocks with sane scales. Several copies of each matrix are cycled so that
 * together they exceed the last-level cache: the figures are DRAM streaming, not cache hits.
 * Every figure is the best of repeated runs, as the machine may be shared.
 * --hot instead multiplies one small matrix that stays in L2: the kernels' compute speed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "core/pool.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"

#define STREAM_BYTES (512ull << 20) /* total of the cycled copies: well above any L3 */

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float rndf(void) { return (float)((rnd() >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1; }

/* ------------------------------------------------------------------ read bandwidth */

struct sum_job {
    const uint64_t *p;
    size_t n;
    uint64_t out[256];
};

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_add_epi64(a2, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_add_epi64(a3, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)t, a0);
    return t[0] + t[1] + t[2] + t[3];
}
#endif

static uint64_t sum_plain(const uint64_t *p, size_t n)
{
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
    }
    return a0 + a1 + a2 + a3;
}

static void sum_part(void *arg, int ith, int nth)
{
    struct sum_job *j = arg;
    long b, e;
    pool_range((long)(j->n / 64), ith, nth, &b, &e); /* 512-byte chunks */
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2")) {
        j->out[ith & 255] += sum_avx2(j->p + b * 64, (size_t)(e - b) * 64);
        return;
    }
#endif
    j->out[ith & 255] += sum_plain(j->p + b * 64, (size_t)(e - b) * 64);
}

/* Best GB/s of summing one 16 MiB slice (cycling through the whole buffer, so every slice
 * comes from DRAM): slices as long as one product, so both are timed alike. */
#define SLICE_BYTES (16ull << 20)
static double read_bandwidth(struct pool *pool, const uint64_t *buf, size_t bytes, double secs)
{
    struct sum_job j = {buf, SLICE_BYTES / 8, {0}};
    const size_t n_slices = bytes / SLICE_BYTES;
    double best = 0, t_end = plat_now() + secs;
    size_t i = 0;
    do {
        j.p = buf + (i++ % n_slices) * (SLICE_BYTES / 8);
        double t0 = plat_now();
        pool_run(pool, sum_part, &j);
        best = fmax(best, (double)SLICE_BYTES / (plat_now() - t0));
    } while (plat_now() < t_end || i < 3);
    if (j.out[0] == 42)
        fprintf(stderr, " "); /* keep the sums alive */
    return best / 1e9;
}

/* ------------------------------------------------------------------ matmul */

static void fill_random(uint8_t *w, size_t bytes)
{
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t r = rnd();
        memcpy(w + i, &r, 8);
    }
}

/* Sets every block's fp16/float fields of random bytes to sane values. */
static void fix_scales(uint32_t type, uint8_t *w, size_t bytes)
{
    const struct qtype_info *q = qtype_get(type);
    size_t bb = q->block_bytes, nb = bytes / bb;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * bb;
        uint16_t h[2] = {f32_to_fp16(0.01f * (1 + rndf())), f32_to_fp16(0.01f * (1 + rndf()))};
        float f = rndf();
        switch (type) {
        case GGML_TYPE_F32: memcpy(p, &f, 4); break;
        case GGML_TYPE_F16: h[0] = f32_to_fp16(f); memcpy(p, h, 2); break;
        case GGML_TYPE_BF16: h[0] = f32_to_bf16(f); memcpy(p, h, 2); break;
        case GGML_TYPE_Q2_K: memcpy(p + 80, h, 4); break;
        case GGML_TYPE_Q3_K: memcpy(p + 108, h, 2); break;
        case GGML_TYPE_Q6_K: memcpy(p + 208, h, 2); break;
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: memcpy(p, h, 2); break;
        default: memcpy(p, h, 4); break;
        }
    }
}

static void fill_weights(uint32_t type, uint8_t *w, size_t bytes)
{
    fill_random(w, bytes);
    fix_scales(type, w, bytes);
}

/* GB/s of weight bytes for y = W x, cycling over copies of W: the best single product (the
 * machine is shared; the read bandwidth above is a best figure too). */
static double bench_matmul(struct pool *pool, uint32_t type, int64_t rows, int64_t k,
                           uint8_t *const *copies, int n_copies, const float *x, float *y,
                           void *scratch, double secs)
{
    size_t wbytes = qtype_row_bytes(type, k) * (size_t)rows;
    quant_matmul(pool, type, copies[0], rows, k, x, 1, y, scratch); /* warm-up */
    double t_end = plat_now() + secs, best = 1e30;
    long iters = 0;
    do {
        double t0 = plat_now();
        quant_matmul(pool, type, copies[iters % n_copies], rows, k, x, 1, y, scratch);
        best = fmin(best, plat_now() - t0);
        iters++;
    } while (plat_now() < t_end || iters < 3);
    return (double)wbytes / best / 1e9;
}

/* The formats measured, those with SIMD kernels for prompt batches first (N_BATCHED). */
static const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0, GGML_TYPE_Q5_K,
                                 GGML_TYPE_Q4_0, GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_F32,
                                 GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q3_K,
                                 GGML_TYPE_Q2_K};
enum { N_ALL = sizeof types / sizeof types[0], N_BATCHED = 7 };

/* Prompt batches: nc activation columns per pass over the weights, all threads. */
static void bench_batched(struct pool *pn, int n_types, int64_t nc, double secs)
{
    const int64_t rows = 4096, k = 4096;
    printf("\nbatched product (prompt processing): %lldx%lld weights, n_cols = %lld, all threads\n",
           (long long)rows, (long long)k, (long long)nc);
    printf("%-6s %10s %10s\n", "type", "ms", "GFLOP/s");
    float *X = malloc((size_t)(k * nc) * 4), *Y = malloc((size_t)(rows * nc) * 4);
    for (int64_t i = 0; i < k * nc; i++)
        X[i] = rndf();
    for (int ti = 0; ti < n_types; ti++) {
        uint32_t t = types[ti];
        size_t wbytes = qtype_row_bytes(t, k) * (size_t)rows;
        uint8_t *W = malloc(wbytes);
        fill_weights(t, W, wbytes);
        void *scratch = malloc(quant_matmul_scratch_bytes(t, k, nc) + 64);
        quant_matmul(pn, t, W, rows, k, X, nc, Y, scratch);
        double t0 = plat_now(), dt;
        long iters = 0;
        do {
            quant_matmul(pn, t, W, rows, k, X, nc, Y, scratch);
            iters++;
            dt = plat_now() - t0;
        } while (dt < secs || iters < 2);
        printf("%-6s %10.2f %10.1f\n", qtype_get(t)->name, dt / iters * 1e3,
               2.0 * rows * k * nc * iters / dt / 1e9);
        fflush(stdout);
        free(W);
        free(scratch);
    }
    free(X);
    free(Y);
}

int main(int argc, char **argv)
{
    int n_threads = plat_ncpu();
    double secs = 0.25;
    int quick = 0, hot = 0, batch_only = 0;
    int64_t batch_cols = 64;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--hot"))
            hot = 1;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            batch_only = 1;
            batch_cols = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_quant [--quick] [--hot] [--batch N_COLS] [--threads N] "
                            "[--seconds S]\n");
            return 2;
        }
    }
    if (n_threads < 1)
        n_threads = 1;
    struct brasa_err err = {{0}};
    struct pool *p1 = NULL, *pn = NULL;
    if (pool_new(&p1, 1, &err) || pool_new(&pn, n_threads, &err)) {
        fprintf(stderr, "bench_quant: %s\n", err.msg);
        return 1;
    }
    if (batch_only) {
        bench_batched(pn, N_BATCHED, batch_cols, secs);
        pool_free(p1);
        pool_free(pn);
        return 0;
    }
    uint8_t *big = malloc(STREAM_BYTES);
    if (!big) {
        fprintf(stderr, "bench_quant: cannot allocate %llu MiB\n", STREAM_BYTES >> 20);
        return 1;
    }
    for (size_t i = 0; i < STREAM_BYTES; i += 4096)
        big[i] = (uint8_t)i;
    memset(big, 1, STREAM_BYTES);
    /* The read bandwidth is sampled again before every format, and the best sample kept: on a
     * shared machine the best figures of both kinds are the comparable ones. */
    double bw1 = read_bandwidth(p1, (const uint64_t *)big, STREAM_BYTES, 0.5);
    double bwn = read_bandwidth(pn, (const uint64_t *)big, STREAM_BYTES, 0.5);
    fill_random(big, STREAM_BYTES);
    uint8_t *pool_bytes = big;

    static const int64_t shapes[][2] = {{4096, 4096}, {14336, 4096}}; /* rows, k */
    static const int64_t hot_shape[1][2] = {{256, 4096}}; /* fits in L2: kernel speed */
    const int64_t(*sh)[2] = hot ? hot_shape : shapes;
    int n_types = quick ? 5 : N_ALL, n_shapes = quick || hot ? 1 : 2;
    double g1[2][N_ALL], gn[2][N_ALL];
    for (int s = 0; s < n_shapes; s++) {
        int64_t rows = sh[s][0], k = sh[s][1];
        float *x = malloc((size_t)k * 4), *y = malloc((size_t)rows * 4);
        for (int64_t i = 0; i < k; i++)
            x[i] = rndf();
        for (int ti = 0; ti < n_types; ti++) {
            uint32_t t = types[ti];
            size_t wbytes = qtype_row_bytes(t, k) * (size_t)rows;
            bw1 = fmax(bw1, read_bandwidth(p1, (const uint64_t *)big, STREAM_BYTES, 0.1));
            bwn = fmax(bwn, read_bandwidth(pn, (const uint64_t *)big, STREAM_BYTES, 0.1));
            /* consecutive slices of one random pool, rewritten only where the scales are */
            int n_copies = hot ? 1 : (int)(STREAM_BYTES / wbytes);
            uint8_t **copies = malloc(sizeof *copies * (size_t)n_copies);
            for (int c = 0; c < n_copies; c++) {
                copies[c] = pool_bytes + (size_t)c * wbytes;
                fix_scales(t, copies[c], wbytes);
            }
            void *scratch = malloc(quant_matmul_scratch_bytes(t, k, 1) + 64);
            g1[s][ti] = bench_matmul(p1, t, rows, k, copies, n_copies, x, y, scratch, secs);
            gn[s][ti] = bench_matmul(pn, t, rows, k, copies, n_copies, x, y, scratch, secs);
            free(copies);
            free(scratch);
        }
        free(x);
        free(y);
    }
    printf("read bandwidth (best sum of a %llu MiB slice of %llu MiB): 1 thread %.1f GB/s, %d threads "
           "%.1f GB/s\n\n", SLICE_BYTES >> 20, STREAM_BYTES >> 20, bw1, n_threads, bwn);
    printf("matrix-vector product y = W x (n_cols = 1), GB/s of weight bytes; %% = of the read "
           "bandwidth with the same threads;\nroof ms = weight bytes / read bandwidth (all threads)\n");
    printf("%-6s %-12s %9s %8s %7s %9s %7s %10s\n", "type", "rows x k", "MiB", "1 thr", "%",
           "all thr", "%", "roof ms");
    for (int s = 0; s < n_shapes; s++)
        for (int ti = 0; ti < n_types; ti++) {
            int64_t rows = sh[s][0], k = sh[s][1];
            size_t wbytes = qtype_row_bytes(types[ti], k) * (size_t)rows;
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)k);
            printf("%-6s %-12s %9.1f %8.1f %6.0f%% %9.1f %6.0f%% %10.3f\n", qtype_get(types[ti])->name,
                   shape, (double)wbytes / (1 << 20), g1[s][ti], 100 * g1[s][ti] / bw1, gn[s][ti],
                   100 * gn[s][ti] / bwn, (double)wbytes / (bwn * 1e9) * 1e3);
        }
    fflush(stdout);
    bench_batched(pn, n_types < N_BATCHED ? n_types : N_BATCHED, batch_cols, secs);
    free(big);
    pool_free(p1);
    pool_free(pn);
    return 0;
}
