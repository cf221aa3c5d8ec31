/* Format table, run-time kernel selection, row (de)quantization entry points, and the threaded
 * matrix product. */
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>

#include "core/pool.h"
#include "core/simd.h"
#include "quant/quant_impl.h"

/* vec_dot_type as ggml's CPU backend: 32-blocks pair with Q8_0/Q8_1, K-quants with Q8_K. */
static const struct qtype_info infos[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32] = {"F32", 1, 4, GGML_TYPE_F32, true, true},
    [GGML_TYPE_F16] = {"F16", 1, 2, GGML_TYPE_F16, true, true},
    [GGML_TYPE_BF16] = {"BF16", 1, 2, GGML_TYPE_BF16, true, true},
    [GGML_TYPE_Q4_0] = {"Q4_0", QK4_0, sizeof(block_q4_0), GGML_TYPE_Q8_0, true, true},
    [GGML_TYPE_Q4_1] = {"Q4_1", QK4_1, sizeof(block_q4_1), GGML_TYPE_Q8_1, true, true},
    [GGML_TYPE_Q5_0] = {"Q5_0", QK5_0, sizeof(block_q5_0), GGML_TYPE_Q8_0, true, true},
    [GGML_TYPE_Q5_1] = {"Q5_1", QK5_1, sizeof(block_q5_1), GGML_TYPE_Q8_1, true, true},
    [GGML_TYPE_Q8_0] = {"Q8_0", QK8_0, sizeof(block_q8_0), GGML_TYPE_Q8_0, true, true},
    [GGML_TYPE_Q8_1] = {"Q8_1", QK8_1, sizeof(block_q8_1), GGML_TYPE_Q8_1, true, true},
    [GGML_TYPE_Q2_K] = {"Q2_K", QK_K, sizeof(block_q2_K), GGML_TYPE_Q8_K, true, false},
    [GGML_TYPE_Q3_K] = {"Q3_K", QK_K, sizeof(block_q3_K), GGML_TYPE_Q8_K, true, false},
    [GGML_TYPE_Q4_K] = {"Q4_K", QK_K, sizeof(block_q4_K), GGML_TYPE_Q8_K, true, true},
    [GGML_TYPE_Q5_K] = {"Q5_K", QK_K, sizeof(block_q5_K), GGML_TYPE_Q8_K, true, true},
    [GGML_TYPE_Q6_K] = {"Q6_K", QK_K, sizeof(block_q6_K), GGML_TYPE_Q8_K, true, true},
    [GGML_TYPE_Q8_K] = {"Q8_K", QK_K, sizeof(block_q8_K), GGML_TYPE_Q8_K, true, true},
};

const struct qtype_info *qtype_get(uint32_t type)
{
    return type < GGML_TYPE_COUNT && infos[type].name ? &infos[type] : NULL;
}

int qtype_by_name(const char *name)
{
    if (!name)
        return -1;
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (infos[t].name && !strcasecmp(infos[t].name, name))
            return t;
    return -1;
}

size_t qtype_row_bytes(uint32_t type, int64_t n)
{
    const struct qtype_info *q = qtype_get(type);
    if (!q || n < 0 || n % q->block)
        return 0;
    return (size_t)(n / q->block) * q->block_bytes;
}

/* ------------------------------------------------------------------ kernel selection */

static struct qkernels qk_fast[GGML_TYPE_COUNT];
static pthread_once_t qk_once = PTHREAD_ONCE_INIT;

static void qk_init_once(void)
{
    qk_ref_init();
    memcpy(qk_fast, qk_ref, sizeof qk_fast);
    if (!getenv("BRASA_NO_SIMD"))
        qk_x86_init(qk_fast);
}

static const struct qkernels *kernels(bool ref)
{
    pthread_once(&qk_once, qk_init_once);
    return ref ? qk_ref : qk_fast;
}

const char *quant_cpu_kernels(void)
{
    pthread_once(&qk_once, qk_init_once);
    static const char *const names[] = {"scalar", "AVX2", "AVX2 + AVX-VNNI", "AVX-512",
                                        "AVX-512 VNNI", "AVX-512 VNNI + AMX-INT8 prompts"};
    return qk_x86_level >= 0 && qk_x86_level <= QK_X86_AMX ? names[qk_x86_level] : "?";
}

static brasa_status check_row(uint32_t type, int64_t n, struct brasa_err *err)
{
    const struct qtype_info *q = qtype_get(type);
    if (!q)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "unknown tensor type %u", type);
    if (n < 0 || n % q->block)
        return brasa_fail(err, BRASA_EINVAL, "%lld elements is not a whole number of %s blocks (%d)",
                          (long long)n, q->name, q->block);
    return BRASA_OK;
}

static brasa_status dequant_with(const struct qkernels *k, uint32_t type, const void *src,
                                 float *dst, int64_t n, struct brasa_err *err)
{
    brasa_status st = check_row(type, n, err);
    if (st)
        return st;
    k[type].dequant(src, dst, n / qtype_get(type)->block);
    return BRASA_OK;
}

brasa_status dequant_row(uint32_t type, const void *src, float *dst, int64_t n, struct brasa_err *err)
{
    return dequant_with(kernels(false), type, src, dst, n, err);
}

brasa_status dequant_row_ref(uint32_t type, const void *src, float *dst, int64_t n,
                             struct brasa_err *err)
{
    return dequant_with(kernels(true), type, src, dst, n, err);
}

brasa_status quant_act_row(uint32_t type, const float *src, void *dst, int64_t n,
                           struct brasa_err *err)
{
    brasa_status st = check_row(type, n, err);
    if (st)
        return st;
    const struct qkernels *k = kernels(false);
    if (!k[type].act)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "%s is not an activation format",
                          qtype_get(type)->name);
    k[type].act(src, dst, n);
    return BRASA_OK;
}

float quant_vec_dot(uint32_t wtype, int64_t n, const void *w_row, const void *a_row)
{
    return kernels(false)[wtype].dot(n, w_row, a_row);
}

float quant_vec_dot_ref(uint32_t wtype, int64_t n, const void *w_row, const void *a_row)
{
    return kernels(true)[wtype].dot(n, w_row, a_row);
}

/* ------------------------------------------------------------------ matrix product */

/* A prompt batch goes through the weight type's ptile where it has one: its activations in the
 * tile's own layout. */
static bool use_ptile(const struct qkernels *kw, int64_t n_cols)
{
    return n_cols > 1 && kw->ptile && kw->pact && kw->pact_bytes;
}

/* Columns of the activations' layout, rounded up to whole interleaved groups. */
static int64_t act_cols(const struct qkernels *kw, bool prep, int64_t n_cols)
{
    return prep && kw->pgroup ? (n_cols + kw->pgroup - 1) / kw->pgroup * kw->pgroup : n_cols;
}

size_t quant_matmul_scratch_bytes(uint32_t wtype, int64_t k, int64_t n_cols)
{
    const struct qtype_info *q = qtype_get(wtype);
    if (!q || q->vec_dot_type == GGML_TYPE_F32)
        return 0;
    const struct qkernels *kw = &kernels(false)[wtype];
    const bool prep = use_ptile(kw, n_cols) && q->block && k % q->block == 0;
    size_t row = prep ? kw->pact_bytes(k) : qtype_row_bytes(q->vec_dot_type, k);
    return row * (size_t)act_cols(kw, prep, n_cols);
}

bool quant_matmul_exact(uint32_t wtype, int64_t n_cols)
{
    const struct qtype_info *q = qtype_get(wtype);
    if (!q)
        return true;
    const struct qkernels *kw = &kernels(false)[wtype];
    return !(use_ptile(kw, n_cols) && kw->pinexact);
}

struct mm_job {
    const struct qkernels *kw, *ka;
    bool prep; /* activations in kw->pact's layout, for kw->ptile */
    uint32_t wtype;
    const uint8_t *W;
    size_t w_stride, a_stride;
    int64_t n_rows, k, n_cols;
    const float *X;
    float *Y;
    uint8_t *A; /* activations in vec_dot_type: n_cols rows of a_stride bytes */
};

static void mm_convert(void *arg, int ith, int nth)
{
    struct mm_job *j = arg;
    long c0, c1;
    pool_range((long)j->n_cols, ith, nth, &c0, &c1);
    const struct qkernels *kw = &j->kw[j->wtype];
    qk_act_fn act = j->prep ? kw->pact : j->ka->act;
    const long g = j->prep ? kw->pgroup : 0;
    for (long c = c0; c < c1; c++) {
        size_t at = g ? (size_t)(c / g * g) * j->a_stride + (size_t)(c % g) * 4 : (size_t)c * j->a_stride;
        act(j->X + c * j->k, j->A + at, j->k);
    }
    simd_clean_upper();
}

void qk_tile(const struct qkernels *kw, int64_t n, const uint8_t *w, size_t ws, int nr,
             const uint8_t *a, size_t as, int nc, float *y, size_t ldy)
{
    if (nc == 1 && kw->tile1)
        kw->tile1(n, w, ws, nr, a, as, nc, y, ldy);
    else if (kw->tile)
        kw->tile(n, w, ws, nr, a, as, nc, y, ldy);
    else /* every (row, column) pair through the row dot product */
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < nc; c++)
                y[(size_t)c * ldy + r] = kw->dot(n, w + r * ws, a + c * as);
}

/* Rows in tiles of MM_TR: a tile of weights stays in cache while every column passes over it,
 * so the weights stream from memory once whatever n_cols is. */
#define MM_TR 16
#define MM_TC 8

static void mm_rows(void *arg, int ith, int nth)
{
    struct mm_job *j = arg;
    long r0, r1;
    pool_range((long)j->n_rows, ith, nth, &r0, &r1);
    const struct qkernels *kw = &j->kw[j->wtype];
    const int64_t tc = j->prep && kw->pcols ? kw->pcols : MM_TC;
    for (long r = r0; r < r1; r += MM_TR) {
        int nr = (int)(r1 - r < MM_TR ? r1 - r : MM_TR);
        const uint8_t *w = j->W + (size_t)r * j->w_stride;
        for (int64_t c = 0; c < j->n_cols; c += tc) {
            int nc = (int)(j->n_cols - c < tc ? j->n_cols - c : tc);
            const uint8_t *a = j->A + (size_t)c * j->a_stride;
            float *y = j->Y + (size_t)c * (size_t)j->n_rows + r;
            if (j->prep)
                kw->ptile(j->k, w, j->w_stride, nr, a, j->a_stride, nc, y, (size_t)j->n_rows);
            else
                qk_tile(kw, j->k, w, j->w_stride, nr, a, j->a_stride, nc, y, (size_t)j->n_rows);
        }
    }
    simd_clean_upper();
}

void quant_matmul(struct pool *pool, uint32_t wtype, const void *W, int64_t n_rows, int64_t k,
                  const float *X, int64_t n_cols, float *Y, void *scratch)
{
    const struct qkernels *ks = kernels(false);
    const struct qtype_info *q = qtype_get(wtype);
    if (!q || !ks[wtype].dot || k % q->block)
        return; /* the loader only admits known types with whole-block rows */
    const bool prep = use_ptile(&ks[wtype], n_cols);
    struct mm_job j = {
        .kw = ks, .ka = &ks[q->vec_dot_type], .prep = prep, .wtype = wtype, .W = W,
        .w_stride = qtype_row_bytes(wtype, k),
        .a_stride = prep ? ks[wtype].pact_bytes(k) : qtype_row_bytes(q->vec_dot_type, k),
        .n_rows = n_rows, .k = k, .n_cols = n_cols, .X = X, .Y = Y, .A = scratch,
    };
    if (prep && ks[wtype].pgroup && n_cols % ks[wtype].pgroup) {
        /* the last group's unused columns: zeros, not stale bytes read as scales */
        const int64_t g = ks[wtype].pgroup, last = n_cols / g * g;
        memset(j.A + (size_t)last * j.a_stride, 0, (size_t)g * j.a_stride);
    }
    if (q->vec_dot_type == GGML_TYPE_F32) {
        j.A = (uint8_t *)(uintptr_t)X; /* read only */
    } else if (n_cols == 1 || !pool) {
        mm_convert(&j, 0, 1);
    } else {
        pool_run(pool, mm_convert, &j);
    }
    pool_run(pool, mm_rows, &j);
}
