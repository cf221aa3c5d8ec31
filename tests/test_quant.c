/* Block formats: the type table, dequantization bit-exact with llama.cpp's goldens (library and
 * `brasa inspect --dump`), SIMD kernels against the scalar reference on fresh random blocks,
 * dot products and the threaded matmul against float64, ggml's activation rounding, quantizer
 * quality against llama.cpp-made files, and `brasa quantize` end to end. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/pool.h"
#include "gguf/gguf.h"
#include "json_mini.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "quant/quant_impl.h"
#include "test.h"

static const uint32_t all_types[] = {
    GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1,
    GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q2_K,
    GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_K,
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

static const char *tmp_dir(void)
{
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

TEST(type_table)
{
    static const struct {
        uint32_t t;
        const char *name;
        int block;
        size_t bytes;
        uint32_t vdt;
    } want[] = {
        {GGML_TYPE_F32, "F32", 1, 4, GGML_TYPE_F32},
        {GGML_TYPE_F16, "F16", 1, 2, GGML_TYPE_F16},
        {GGML_TYPE_BF16, "BF16", 1, 2, GGML_TYPE_BF16},
        {GGML_TYPE_Q4_0, "Q4_0", 32, 18, GGML_TYPE_Q8_0},
        {GGML_TYPE_Q4_1, "Q4_1", 32, 20, GGML_TYPE_Q8_1},
        {GGML_TYPE_Q5_0, "Q5_0", 32, 22, GGML_TYPE_Q8_0},
        {GGML_TYPE_Q5_1, "Q5_1", 32, 24, GGML_TYPE_Q8_1},
        {GGML_TYPE_Q8_0, "Q8_0", 32, 34, GGML_TYPE_Q8_0},
        {GGML_TYPE_Q8_1, "Q8_1", 32, 36, GGML_TYPE_Q8_1},
        {GGML_TYPE_Q2_K, "Q2_K", 256, 84, GGML_TYPE_Q8_K},
        {GGML_TYPE_Q3_K, "Q3_K", 256, 110, GGML_TYPE_Q8_K},
        {GGML_TYPE_Q4_K, "Q4_K", 256, 144, GGML_TYPE_Q8_K},
        {GGML_TYPE_Q5_K, "Q5_K", 256, 176, GGML_TYPE_Q8_K},
        {GGML_TYPE_Q6_K, "Q6_K", 256, 210, GGML_TYPE_Q8_K},
        {GGML_TYPE_Q8_K, "Q8_K", 256, 292, GGML_TYPE_Q8_K},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct qtype_info *q = qtype_get(want[i].t);
        REQUIRE(q);
        CHECKF(!strcmp(q->name, want[i].name), "%s", q->name);
        CHECK(q->block == want[i].block && q->block_bytes == want[i].bytes);
        CHECKF(q->vec_dot_type == want[i].vdt, "%s", q->name);
        CHECK(q->can_dequant);
        CHECK(qtype_by_name(want[i].name) == (int)want[i].t);
        CHECK(qtype_row_bytes(want[i].t, 4096) == 4096 / want[i].block * want[i].bytes);
    }
    CHECK(qtype_by_name("q4_k") == GGML_TYPE_Q4_K && qtype_by_name("bf16") == GGML_TYPE_BF16);
    CHECK(qtype_by_name("Q4_K_M") == -1 && qtype_by_name("") == -1 && qtype_by_name(NULL) == -1);
    CHECK(!qtype_get(4) && !qtype_get(5) && !qtype_get(16) && !qtype_get(GGML_TYPE_COUNT) &&
          !qtype_get(0xffffffffu));
    CHECK(qtype_row_bytes(GGML_TYPE_Q4_K, 255) == 0 && qtype_row_bytes(GGML_TYPE_Q8_0, 48) == 0);
    CHECK(qtype_row_bytes(GGML_TYPE_Q8_0, -32) == 0 && qtype_row_bytes(99, 32) == 0);
    struct brasa_err err = {{0}};
    float y[32];
    uint8_t blk[34] = {0};
    CHECK(dequant_row(GGML_TYPE_Q8_0, blk, y, 31, &err) == BRASA_EINVAL && err.msg[0]);
    CHECK(dequant_row(77, blk, y, 32, &err) == BRASA_EUNSUPPORTED);
    CHECK(quant_row(GGML_TYPE_Q2_K, y, blk, 0, &err) == BRASA_EUNSUPPORTED);
}

/* ------------------------------------------------------------------ golden dequantization */

static int cmp_floats(const float *a, const float *b, size_t n, size_t *first)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4)) {
            *first = i;
            return 1;
        }
    return 0;
}

TEST(dequant_goldens)
{
    char *idx_text = test_read_file(test_shared_path("fixtures/dequant/index.json"), NULL);
    if (!idx_text)
        SKIP("fixtures/dequant/index.json not found");
    struct jm *idx = jm_parse(idx_text, strlen(idx_text));
    REQUIRE(idx && idx->type == JM_ARR && idx->n > 0);
    int n_checked = 0, have_cli = access(test_brasa_bin(), X_OK) == 0, cli_dump = -1;
    for (size_t e = 0; e < idx->n; e++) {
        const struct jm *it = jm_at(idx, e);
        const char *file = jm_get(it, "file")->str, *src = jm_get(it, "source_model")->str;
        const char *tname = jm_get(it, "tensor")->str;
        char rel[512];
        snprintf(rel, sizeof rel, "fixtures/dequant/%s", file);
        size_t gsize = 0;
        float *gold = (float *)test_read_file(test_shared_path(rel), &gsize);
        snprintf(rel, sizeof rel, "fixtures/%s", src);
        char gpath[1024];
        snprintf(gpath, sizeof gpath, "%s", test_shared_path(rel));
        struct gguf_file *f = NULL;
        struct brasa_err err = {{0}};
        if (!gold || gguf_open(&f, gpath, &err)) {
            CHECKF(0, "%s: %s", file, err.msg);
            free(gold);
            continue;
        }
        const struct gguf_tensor *t = gguf_find_tensor(f, tname);
        REQUIRE(t);
        const struct qtype_info *q = qtype_get(t->type);
        CHECKF(q && !strcmp(q->name, jm_get(it, "ggml_type")->str), "%s type", file);
        size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        CHECKF(gsize == n * 4, "%s size %zu vs %zu", file, gsize, n * 4);
        float *y = malloc(n * 4), *yr = malloc(n * 4);
        size_t rb = qtype_row_bytes(t->type, t->ne[0]), nrows = n / (size_t)t->ne[0];
        for (size_t r = 0; r < nrows; r++) {
            const uint8_t *row = (const uint8_t *)t->data + r * rb;
            CHECK(dequant_row(t->type, row, y + r * t->ne[0], t->ne[0], &err) == BRASA_OK);
            CHECK(dequant_row_ref(t->type, row, yr + r * t->ne[0], t->ne[0], &err) == BRASA_OK);
        }
        size_t at = 0;
        CHECKF(!cmp_floats(y, gold, n, &at), "%s: dequant_row differs at %zu: %.9g vs %.9g", file,
               at, y[at], gold[at]);
        CHECKF(!cmp_floats(yr, gold, n, &at), "%s: dequant_row_ref differs at %zu: %.9g vs %.9g",
               file, at, yr[at], gold[at]);
        /* The same through the command line. */
        if (have_cli && cli_dump != 0) {
            char out[512], cmd[2048];
            snprintf(out, sizeof out, "%s/brasa_test_quant_%d.f32", tmp_dir(), (int)getpid());
            snprintf(cmd, sizeof cmd, "'%s' inspect '%s' --tensor '%s' --dump '%s' >/dev/null 2>&1",
                     test_brasa_bin(), gpath, tname, out);
            int st = system(cmd);
            size_t dsize = 0;
            float *d = st == 0 ? (float *)test_read_file(out, &dsize) : NULL;
            if (cli_dump < 0 && !d) {
                cli_dump = 0; /* option not there (yet): the library path above still counts */
            } else {
                cli_dump = 1;
                CHECKF(d && dsize == n * 4 && !cmp_floats(d, gold, n, &at),
                       "%s: brasa inspect --dump differs (status %d, %zu bytes)", file, st, dsize);
            }
            free(d);
            unlink(out);
        }
        n_checked++;
        free(y);
        free(yr);
        free(gold);
        gguf_close(f);
    }
    if (cli_dump != 1)
        fprintf(stderr, "  note: brasa inspect --dump not checked (binary or option missing)\n");
    CHECK(n_checked == (int)idx->n);
    jm_free(idx);
    free(idx_text);
}

/* ------------------------------------------------------------------ random blocks */

static uint16_t rand_half(unsigned long long *s, float scale)
{
    return f32_to_fp16(scale * (0.25f + fabsf(test_rand_normal(s))) * (test_rand_u64(s) & 1 ? 1 : -1));
}

/* Random bytes with every fp16/float field set to a finite, non-zero value. */
static void rand_row(uint32_t type, void *dst, int64_t n, unsigned long long *s)
{
    const struct qtype_info *q = qtype_get(type);
    size_t nb = (size_t)(n / q->block), bb = q->block_bytes;
    uint8_t *p = dst;
    for (size_t i = 0; i < nb * bb; i++)
        p[i] = (uint8_t)test_rand_u64(s);
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = p + b * bb;
        uint16_t h[2] = {rand_half(s, 0.01f), rand_half(s, 0.01f)};
        float f = 1e-3f * (0.5f + fabsf(test_rand_normal(s)));
        switch (type) {
        case GGML_TYPE_F32: f = test_rand_normal(s); memcpy(blk, &f, 4); break;
        case GGML_TYPE_F16: h[0] = f32_to_fp16(test_rand_normal(s)); memcpy(blk, h, 2); break;
        case GGML_TYPE_BF16: h[0] = f32_to_bf16(test_rand_normal(s)); memcpy(blk, h, 2); break;
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: memcpy(blk, h, 2); break;
        case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_1:
        case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: memcpy(blk, h, 4); break;
        case GGML_TYPE_Q2_K: memcpy(blk + 80, h, 4); break;
        case GGML_TYPE_Q3_K: memcpy(blk + 108, h, 2); break;
        case GGML_TYPE_Q6_K: memcpy(blk + 208, h, 2); break;
        case GGML_TYPE_Q8_K: memcpy(blk, &f, 4); break;
        }
    }
}

static void rand_floats(float *x, int64_t n, unsigned long long *s)
{
    float scale = 0.1f + fabsf(test_rand_normal(s));
    for (int64_t i = 0; i < n; i++)
        x[i] = scale * test_rand_normal(s);
}

TEST(simd_dequant_bit_identical)
{
    unsigned long long s = test_seed();
    const int64_t n = 4096;
    uint8_t *w = malloc(qtype_row_bytes(GGML_TYPE_F32, n));
    float *a = malloc(n * 4), *b = malloc(n * 4), *x = malloc(n * 4);
    struct brasa_err err = {{0}};
    for (int rep = 0; rep < 4; rep++)
        for (size_t k = 0; k < N_TYPES; k++) {
            uint32_t t = all_types[k];
            if (rep & 1 && qtype_get(t)->can_quant) { /* blocks as a quantizer writes them */
                rand_floats(x, n, &s);
                REQUIRE(quant_row(t, x, w, n, &err) == BRASA_OK);
            } else {
                rand_row(t, w, n, &s);
            }
            CHECK(dequant_row(t, w, a, n, &err) == BRASA_OK);
            CHECK(dequant_row_ref(t, w, b, n, &err) == BRASA_OK);
            size_t at = 0;
            CHECKF(!cmp_floats(a, b, (size_t)n, &at), "%s at %zu: %.9g vs %.9g",
                   qtype_get(t)->name, at, a[at], b[at]);
        }
    free(w);
    free(a);
    free(b);
    free(x);
}

/* ------------------------------------------------------------------ dot products */

/* float64 dot of the dequantized rows; Q8_1's min term uses its stored s, as the kernels do. */
static double ref_dot(uint32_t wt, const void *w, const void *act, int64_t n, double *abs_sum)
{
    uint32_t at = qtype_get(wt)->vec_dot_type;
    float *dw = malloc((size_t)n * 4), *da = malloc((size_t)n * 4);
    struct brasa_err err;
    dequant_row_ref(wt, w, dw, n, &err);
    dequant_row_ref(at, act, da, n, &err);
    double s = 0, as = 0;
    for (int64_t i = 0; i < n; i++) {
        s += (double)dw[i] * da[i];
        as += fabs((double)dw[i] * da[i]);
    }
    if (at == GGML_TYPE_Q8_1) {
        const block_q8_1 *y = act;
        size_t wb = qtype_get(wt)->block_bytes;
        for (int64_t b = 0; b < n / 32; b++) {
            const uint16_t *m = (const uint16_t *)((const uint8_t *)w + b * wb) + 1;
            double sum_a = 0;
            for (int l = 0; l < 32; l++)
                sum_a += da[b * 32 + l];
            s += fp16_to_f32(*m) * ((double)fp16_to_f32(y[b].s) - sum_a);
        }
    }
    free(dw);
    free(da);
    *abs_sum = as;
    return s;
}

static const uint32_t weight_types[] = {
    GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
    GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
    GGML_TYPE_Q6_K,
};
#define N_WTYPES (sizeof weight_types / sizeof weight_types[0])

TEST(vec_dot_vs_float64)
{
    unsigned long long s = test_seed();
    const int64_t n = 4096;
    uint8_t *w = malloc(n * 4), *act = malloc(n * 4);
    float *x = malloc(n * 4);
    struct brasa_err err = {{0}};
    double worst = 0;
    for (int rep = 0; rep < 3; rep++)
        for (size_t k = 0; k < N_WTYPES; k++) {
            uint32_t t = weight_types[k], at = qtype_get(t)->vec_dot_type;
            rand_row(t, w, n, &s);
            rand_floats(x, n, &s);
            REQUIRE(quant_act_row(at, x, act, n, &err) == BRASA_OK);
            double as, ref = ref_dot(t, w, act, n, &as);
            double den = fmax(fabs(ref), 1e-3 * as);
            double e1 = fabs(quant_vec_dot(t, n, w, act) - ref) / den;
            double e2 = fabs(quant_vec_dot_ref(t, n, w, act) - ref) / den;
            CHECKF(e1 <= 1e-3 && e2 <= 1e-3, "%s: rel err %.3g (fast) %.3g (ref)", qtype_get(t)->name,
                   e1, e2);
            worst = fmax(worst, fmax(e1, e2));
        }
    /* odd block counts (tails of the paired-block kernels) */
    for (size_t k = 0; k < N_WTYPES; k++) {
        uint32_t t = weight_types[k], at = qtype_get(t)->vec_dot_type;
        if (qtype_get(t)->block != 32)
            continue;
        const int64_t m = 96;
        rand_row(t, w, m, &s);
        rand_floats(x, m, &s);
        REQUIRE(quant_act_row(at, x, act, m, &err) == BRASA_OK);
        double as, ref = ref_dot(t, w, act, m, &as);
        double e = fabs(quant_vec_dot(t, m, w, act) - ref) / fmax(fabs(ref), 1e-3 * as);
        CHECKF(e <= 1e-3, "%s, 3 blocks: rel err %.3g", qtype_get(t)->name, e);
        worst = fmax(worst, e);
    }
    fprintf(stderr, "  worst vec_dot relative error %.3g\n", worst);
    free(w);
    free(act);
    free(x);
}

/* The VNNI dot products of Q5_0 and Q4_0 keep the levels unsigned and subtract 16 (8) times
 * the activation's sum: the same integers, scaled the same way, so every level above gives the
 * result of the level they replace bit for bit (Q5_0: AVX2's; Q4_0: AVX-512's, dot product and
 * tile), on rows of odd and even block counts, Q5_0 with every fifth-bit pattern. */
TEST(b32_dot_levels_agree)
{
    unsigned long long s = test_seed();
    qk_ref_init();
    static struct qkernels base[GGML_TYPE_COUNT], tab[GGML_TYPE_COUNT];
    static const struct {
        uint32_t t;
        int base;
    } cases[] = {{GGML_TYPE_Q5_0, QK_X86_AVX2}, {GGML_TYPE_Q4_0, QK_X86_AVX512}};
    const int64_t ns[] = {1024, 1120}; /* 32 and 35 blocks */
    uint8_t *w = malloc(qtype_row_bytes(GGML_TYPE_Q5_0, 1120));
    uint8_t *a = malloc(4 * qtype_row_bytes(GGML_TYPE_Q8_0, 1120));
    float *x = malloc(sizeof(float) * 1120);
    struct brasa_err err = {{0}};
    int checked = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const uint32_t t = cases[ci].t;
        memcpy(base, qk_ref, sizeof base);
        if (qk_x86_init_level(base, cases[ci].base) != cases[ci].base)
            continue;
        for (int level = cases[ci].base + 1; level <= QK_X86_AMX; level++) {
            memcpy(tab, qk_ref, sizeof tab);
            if (qk_x86_init_level(tab, level) != level)
                continue;
            checked++;
            for (int rep = 0; rep < 16; rep++) {
                const int64_t n = ns[rep & 1];
                const size_t ab = qtype_row_bytes(GGML_TYPE_Q8_0, n);
                rand_row(t, w, n, &s);
                if (t == GGML_TYPE_Q5_0 && rep < 4) /* every fifth bit clear, then set */
                    for (int64_t b = 0; b < n / 32; b++)
                        memset(w + b * 22 + 2, rep < 2 ? 0 : 0xff, 4);
                for (int c = 0; c < 4; c++) {
                    rand_floats(x, n, &s);
                    REQUIRE(quant_act_row(GGML_TYPE_Q8_0, x, a + c * ab, n, &err) == BRASA_OK);
                }
                float r0 = base[t].dot(n, w, a), r1 = tab[t].dot(n, w, a);
                CHECKF(memcmp(&r0, &r1, sizeof r0) == 0, "%s level %d rep %d: %.9g against %.9g",
                       qtype_get(t)->name, level, rep, r1, r0);
                { /* one row against 1-4 columns, through the tile each count takes */
                    for (int nc = 1; nc <= 4; nc++) {
                        float y0[4], y1[4];
                        qk_tile(&base[t], n, w, 0, 1, a, ab, nc, y0, 1);
                        qk_tile(&tab[t], n, w, 0, 1, a, ab, nc, y1, 1);
                        CHECKF(memcmp(y0, y1, sizeof(float) * (size_t)nc) == 0,
                               "%s level %d tile of %d columns differs", qtype_get(t)->name,
                               level, nc);
                    }
                }
            }
        }
    }
    fprintf(stderr, "  %d (type, level) pairs checked\n", checked);
    free(w);
    free(a);
    free(x);
}

TEST(matmul_tiles_and_threads)
{
    unsigned long long s = test_seed();
    struct pool *pool = NULL;
    struct brasa_err err = {{0}};
    REQUIRE(pool_new(&pool, 2, &err) == BRASA_OK);
    const int64_t k = 512, rows = 37;
    const int64_t cols_list[] = {1, 3, 19};
    for (size_t ti = 0; ti < N_WTYPES; ti++) {
        uint32_t t = weight_types[ti], at = qtype_get(t)->vec_dot_type;
        size_t rb = qtype_row_bytes(t, k), ab = qtype_row_bytes(at, k);
        uint8_t *W = malloc(rb * rows), *A = malloc(ab);
        for (int64_t r = 0; r < rows; r++)
            rand_row(t, W + r * rb, k, &s);
        for (size_t ci = 0; ci < 3; ci++) {
            int64_t nc = cols_list[ci];
            float *X = malloc((size_t)(nc * k) * 4), *Y = malloc((size_t)(nc * rows) * 4);
            rand_floats(X, nc * k, &s);
            void *scratch = malloc(quant_matmul_scratch_bytes(t, k, nc) + 1);
            quant_matmul(ci == 0 ? NULL : pool, t, W, rows, k, X, nc, Y, scratch);
            int bad = 0, differs = 0;
            for (int64_t c = 0; c < nc; c++) {
                quant_act_row(at, X + c * k, A, k, &err);
                for (int64_t r = 0; r < rows; r++) {
                    double as, ref = ref_dot(t, W + r * rb, A, k, &as);
                    double e = fabs(Y[c * rows + r] - ref) / fmax(fabs(ref), 1e-3 * as);
                    bad += e > 1e-3;
                    /* a batch gives exactly what one column at a time gives (or, where the
                     * CPU's prompt kernels add in another order, within rounding) */
                    float single = quant_vec_dot(t, k, W + r * rb, A);
                    if (quant_matmul_exact(t, nc))
                        differs += memcmp(&single, &Y[c * rows + r], 4) != 0;
                    else
                        differs += fabs(single - Y[c * rows + r]) > 1e-5 * fmax(fabs(ref), 0.1 * as);
                }
            }
            CHECKF(!bad, "%s n_cols=%lld: %d entries off", qtype_get(t)->name, (long long)nc, bad);
            CHECKF(!differs, "%s n_cols=%lld: %d entries differ from quant_vec_dot",
                   qtype_get(t)->name, (long long)nc, differs);
            free(X);
            free(Y);
            free(scratch);
        }
        free(W);
        free(A);
    }
    pool_free(pool);
}

/* Every SIMD level this CPU has (AVX2, AVX-512, AVX-512 VNNI), not only the best one that
 * quant_matmul takes (AVX2 with and without AVX-VNNI too): each level's tiles, and its prompt tiles over their own activation
 * layout, give exactly its dot product (AMX's: within 1e-5), for every row and column count a tile splits into and
 * for odd block counts (the padded last pair of the Q8_0 layout). */
TEST(simd_levels_tiles)
{
    unsigned long long s = test_seed();
    qk_ref_init();
    static struct qkernels tab[GGML_TYPE_COUNT];
    const int64_t ks[] = {96, 160, 200, 512, 2304}, rows = 37, max_nc = 40;
    const int ncs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 16, 17, 33, 40};
    int levels = 0;
    for (int level = QK_X86_AVX2; level <= QK_X86_AMX; level++) {
        memcpy(tab, qk_ref, sizeof tab);
        if (qk_x86_init_level(tab, level) != level)
            continue; /* this CPU lacks it */
        levels++;
        /* activation conversions: the reference's bytes, ties and zero blocks included */
        for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
            if (!tab[t].act || tab[t].act == qk_ref[t].act)
                continue;
            const int64_t n = 2048;
            float *x = malloc(sizeof(float) * n);
            size_t rb = qtype_row_bytes(t, n);
            uint8_t *o1 = malloc(rb), *o2 = malloc(rb);
            for (int rep = 0; rep < 8; rep++) {
                rand_floats(x, n, &s);
                for (int64_t i = 0; i < n; i++)
                    if (rep & 1)
                        x[i] = (float)((int)(x[i] * 8)) * 0.5f; /* halves: rounding ties */
                if (rep == 2)
                    memset(x, 0, sizeof(float) * 256); /* a zero block */
                if (rep == 4 || rep == 6) { /* two of the largest magnitude: the first one counts */
                    x[9] = rep == 4 ? -4.0f : 4.0f;
                    x[10] = -x[9];
                }
                tab[t].act(x, o1, n);
                qk_ref[t].act(x, o2, n);
                CHECKF(!memcmp(o1, o2, rb), "level %d %s activations differ from the reference",
                       level, qtype_get(t)->name);
            }
            free(x);
            free(o1);
            free(o2);
        }
        for (size_t ti = 0; ti < N_WTYPES; ti++) {
            uint32_t t = weight_types[ti], at = qtype_get(t)->vec_dot_type;
            const struct qkernels *kw = &tab[t];
            if (!kw->tile && !kw->ptile && !kw->tile1)
                continue;
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                int64_t k = ks[ki];
                if (k % qtype_get(t)->block)
                    continue;
                size_t rb = qtype_row_bytes(t, k), ab = qtype_row_bytes(at, k);
                size_t pb = kw->ptile ? kw->pact_bytes(k) : 0;
                const int g = kw->pgroup;
                int64_t pcols = g ? (max_nc + g - 1) / g * g : max_nc;
                uint8_t *W = malloc(rb * rows), *A = malloc(ab * max_nc), *P = calloc(1, pb * pcols + 1);
                float *X = malloc(sizeof(float) * (size_t)(k * max_nc));
                float *Y = malloc(sizeof(float) * (size_t)(rows * max_nc));
                for (int64_t r = 0; r < rows; r++)
                    rand_row(t, W + r * rb, k, &s);
                rand_floats(X, k * max_nc, &s);
                for (int64_t c = 0; c < max_nc; c++) {
                    tab[at].act(X + c * k, A + c * ab, k);
                    if (kw->ptile)
                        kw->pact(X + c * k, P + (g ? (size_t)(c / g * g) * pb + (size_t)(c % g) * 4 : c * pb), k);
                }
                int differs = 0, off = 0;
                for (int nr = 1; nr <= rows; nr += 4)
                    for (size_t ni = 0; ni < sizeof ncs / sizeof ncs[0]; ni++)
                        for (int pass = 0; pass < 3; pass++) { /* tile, ptile, tile1 */
                            const int nc = ncs[ni];
                            qk_dot_tile_fn f = pass == 0 ? kw->tile : pass == 1 ? kw->ptile : kw->tile1;
                            if (!f || nc > (pass == 1 && kw->pcols ? kw->pcols : 8) || (pass == 2 && nc != 1))
                                continue;
                            f(k, W, rb, nr, pass == 1 ? P : A, pass == 1 ? pb : ab, nc, Y, (size_t)rows);
                            for (int c = 0; c < nc; c++)
                                for (int r = 0; r < nr; r++) {
                                    float d = kw->dot(k, W + r * rb, A + c * ab);
                                    if (pass == 1 && kw->pinexact) {
                                        double as, ref = ref_dot(t, W + r * rb, A + c * ab, k, &as);
                                        /* another order of the same sums: rounding, at most ~1e-6 of the sum of |terms| */
                                        off += fabs(Y[c * rows + r] - d) > 1e-5 * fmax(fabs(ref), 0.1 * as);
                                    } else {
                                        differs += memcmp(&d, &Y[c * rows + r], 4) != 0;
                                    }
                                }
                        }
                CHECKF(!differs, "level %d %s k=%lld: %d tile entries differ from the dot product",
                       level, qtype_get(t)->name, (long long)k, differs);
                CHECKF(!off, "level %d %s k=%lld: %d tile entries off the dot product by over 1e-5",
                       level, qtype_get(t)->name, (long long)k, off);
                free(W);
                free(A);
                free(P);
                free(X);
                free(Y);
            }
        }
    }
    fprintf(stderr, "  %d SIMD level(s) on this CPU\n", levels);
}

/* ggml's x86 activation conversion: d = amax/127 in fp16, q = round-half-even(x * 127/amax);
 * Q8_K: iscale = -127/max (signed), q = min(127, round-half-even), d = 1/iscale. */
TEST(activation_rounding)
{
    struct brasa_err err = {{0}};
    float x[256] = {0};
    x[0] = 127.0f; /* id = 1 exactly */
    x[1] = 2.5f;   /* ties to even: 2 (roundf would give 3) */
    x[2] = -3.5f;  /* -4 */
    x[3] = 0.5f;   /* 0 */
    block_q8_0 b0;
    REQUIRE(quant_act_row(GGML_TYPE_Q8_0, x, &b0, 32, &err) == BRASA_OK);
    CHECK(b0.qs[0] == 127 && b0.qs[1] == 2 && b0.qs[2] == -4 && b0.qs[3] == 0);
    CHECK(fp16_to_f32(b0.d) == 1.0f);
    block_q8_1 b1;
    REQUIRE(quant_act_row(GGML_TYPE_Q8_1, x, &b1, 32, &err) == BRASA_OK);
    CHECK(fp16_to_f32(b1.s) == 125.0f);
    float z[32] = {0};
    REQUIRE(quant_act_row(GGML_TYPE_Q8_0, z, &b0, 32, &err) == BRASA_OK);
    CHECK(b0.d == 0 && b0.qs[5] == 0);

    block_q8_K bk;
    float y[256];
    for (int i = 0; i < 256; i++)
        y[i] = (float)(i % 7) - 3.0f;
    y[10] = -127.0f; /* max = -127: iscale = 1 */
    y[11] = 127.0f;  /* same magnitude later: not chosen */
    y[12] = 4.5f;
    y[13] = 5.5f;
    REQUIRE(quant_act_row(GGML_TYPE_Q8_K, y, &bk, 256, &err) == BRASA_OK);
    CHECK(bk.d == 1.0f && bk.qs[10] == -127 && bk.qs[11] == 127 && bk.qs[12] == 4 && bk.qs[13] == 6);
    int sum = 0;
    for (int i = 0; i < 16; i++)
        sum += bk.qs[16 + i];
    CHECK(bk.bsums[1] == sum);
    y[10] = 100.0f; /* now max = +127 at 11: iscale = -1, d = -1 */
    REQUIRE(quant_act_row(GGML_TYPE_Q8_K, y, &bk, 256, &err) == BRASA_OK);
    CHECK(bk.d == -1.0f && bk.qs[11] == -127 && bk.qs[10] == -100);

    uint16_t h;
    float f = 1.0f + 1.0f / 2048; /* halfway between two halves: even */
    REQUIRE(quant_act_row(GGML_TYPE_F16, &f, &h, 1, &err) == BRASA_OK);
    CHECK(h == 0x3c00);
    f = 1.0f + 3.0f / 2048;
    quant_act_row(GGML_TYPE_F16, &f, &h, 1, &err);
    CHECK(h == 0x3c02);
    f = 1.0f + 1.0f / 256; /* bf16 halfway: even */
    quant_act_row(GGML_TYPE_BF16, &f, &h, 1, &err);
    CHECK(h == 0x3f80);
    CHECK(quant_act_row(GGML_TYPE_Q4_K, y, &bk, 256, &err) == BRASA_EUNSUPPORTED);
}


/* ------------------------------------------------------------------ quantizer quality */

static double rmse(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / (double)n);
}

/* Dequantizes a whole tensor (malloc'd floats). */
static float *dequant_tensor(const struct gguf_tensor *t, size_t *n_out)
{
    size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    float *y = malloc(n * 4);
    size_t rb = qtype_row_bytes(t->type, t->ne[0]);
    struct brasa_err err;
    for (size_t r = 0; r < n / (size_t)t->ne[0]; r++)
        dequant_row(t->type, (const uint8_t *)t->data + r * rb, y + r * t->ne[0], t->ne[0], &err);
    *n_out = n;
    return y;
}

/* Every type brasa writes: quantize -> dequantize of Gaussian data stays within its precision
 * (relative RMSE against the data's RMS). */
TEST(quant_row_roundtrip_all)
{
    static const struct {
        uint32_t t;
        double max_rel;
    } lim[] = {{GGML_TYPE_F32, 0},       {GGML_TYPE_F16, 1e-3},   {GGML_TYPE_BF16, 8e-3},
               {GGML_TYPE_Q8_0, 1e-2},   {GGML_TYPE_Q8_1, 1e-2},  {GGML_TYPE_Q8_K, 1e-2},
               {GGML_TYPE_Q6_K, 2.5e-2}, {GGML_TYPE_Q5_K, 5e-2},  {GGML_TYPE_Q5_0, 6e-2},
               {GGML_TYPE_Q5_1, 6e-2},   {GGML_TYPE_Q4_K, 1.1e-1}, {GGML_TYPE_Q4_0, 1.3e-1},
               {GGML_TYPE_Q4_1, 1.3e-1}};
    unsigned long long s = test_seed();
    const int64_t n = 4096;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    uint8_t *q = malloc(n * 4);
    struct brasa_err err = {{0}};
    rand_floats(x, n, &s);
    double rms = 0;
    for (int64_t i = 0; i < n; i++)
        rms += (double)x[i] * x[i];
    rms = sqrt(rms / n);
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        REQUIRE(qtype_get(lim[i].t)->can_quant);
        REQUIRE(quant_row(lim[i].t, x, q, n, &err) == BRASA_OK);
        REQUIRE(dequant_row(lim[i].t, q, y, n, &err) == BRASA_OK);
        double e = rmse(x, y, (size_t)n) / rms;
        CHECKF(e <= lim[i].max_rel, "%s: relative rmse %.4g", qtype_get(lim[i].t)->name, e);
        fprintf(stderr, "%s %s %.3g", i ? "," : "  relative rmse:", qtype_get(lim[i].t)->name, e);
    }
    fputc('\n', stderr);
    CHECK(quant_row(GGML_TYPE_Q4_K, x, q, 100, &err) == BRASA_EINVAL && strstr(err.msg, "blocks"));
    free(x);
    free(y);
    free(q);
}

/* For every NAME.F32.gguf fixture and each type, each tensor that the llama.cpp-made file of
 * that type stores in that type: brasa's quantize->dequantize RMSE <= 1.02x llama.cpp's. */
TEST(quantize_quality_vs_llama_cpp)
{
    static const struct {
        uint32_t type;
        const char *file;
    } kinds[] = {{GGML_TYPE_Q8_0, "Q8_0"}, {GGML_TYPE_Q4_0, "Q4_0"}, {GGML_TYPE_Q4_K, "Q4_K_M"},
                 {GGML_TYPE_Q5_K, "Q5_K_M"}, {GGML_TYPE_Q6_K, "Q6_K"}};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", test_shared_path("fixtures"));
    DIR *d = opendir(dir);
    if (!d)
        SKIP("fixtures not found");
    int n_tensors = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 10 || strcmp(de->d_name + len - 9, ".F32.gguf"))
            continue;
        char base[256], path[1536];
        snprintf(base, sizeof base, "%.*s", (int)(len - 9), de->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct gguf_file *f32 = NULL;
        struct brasa_err err = {{0}};
        if (gguf_open(&f32, path, &err)) {
            CHECKF(0, "%s", err.msg);
            continue;
        }
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            snprintf(path, sizeof path, "%s/%s.%s.gguf", dir, base, kinds[k].file);
            struct gguf_file *fq = NULL;
            if (gguf_open(&fq, path, &err))
                continue; /* that fixture is not kept */
            double worst = 0;
            int same_bytes = 0, count = 0;
            for (uint64_t ti = 0; ti < fq->n_tensors; ti++) {
                const struct gguf_tensor *tq = &fq->tensors[ti];
                const struct gguf_tensor *tf = gguf_find_tensor(f32, tq->name);
                if (tq->type != kinds[k].type || !tf || tf->type != GGML_TYPE_F32)
                    continue;
                size_t n, nq;
                const float *x = tf->data;
                float *yl = dequant_tensor(tq, &nq);
                n = nq;
                size_t rb = qtype_row_bytes(tq->type, tq->ne[0]);
                uint8_t *q = malloc(rb * (n / (size_t)tq->ne[0]));
                float *yb = malloc(n * 4);
                for (size_t r = 0; r < n / (size_t)tq->ne[0]; r++) {
                    CHECK(quant_row(tq->type, x + r * tq->ne[0], q + r * rb, tq->ne[0], &err) == 0);
                    dequant_row(tq->type, q + r * rb, yb + r * tq->ne[0], tq->ne[0], &err);
                }
                same_bytes += !memcmp(q, tq->data, rb * (n / (size_t)tq->ne[0]));
                double eb = rmse(yb, x, n), el = rmse(yl, x, n);
                CHECKF(eb <= 1.02 * el, "%s %s %s: rmse %.6g vs llama.cpp %.6g", base, kinds[k].file,
                       tq->name, eb, el);
                worst = fmax(worst, eb / el);
                count++;
                n_tensors++;
                free(q);
                free(yb);
                free(yl);
            }
            fprintf(stderr, "  %s %s: %d tensors, worst rmse ratio %.4f, %d byte-identical\n", base,
                    kinds[k].file, count, worst, same_bytes);
            gguf_close(fq);
        }
        gguf_close(f32);
    }
    closedir(d);
    if (!n_tensors)
        SKIP("no *.F32.gguf fixture with quantized siblings");
}

/* ------------------------------------------------------------------ brasa quantize */

static int run_status(const char *cmd)
{
    int st = system(cmd);
    return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Quantizes every *.F32.gguf fixture to each mix that has a llama.cpp-made sibling: same type
 * for every tensor as tensor_types.json lists, same general.file_type, and the file reads back. */
TEST(cli_quantize_mixes)
{
    if (access(test_brasa_bin(), X_OK))
        SKIP("brasa binary not built");
    char *tt_text = test_read_file(test_shared_path("fixtures/tensor_types.json"), NULL);
    if (!tt_text)
        SKIP("fixtures/tensor_types.json not found");
    struct jm *tt = jm_parse(tt_text, strlen(tt_text));
    REQUIRE(tt && tt->type == JM_OBJ);
    static const char *mixes[] = {"Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "Q4_0", "F16", "BF16"};
    int n_files = 0;
    for (size_t fi = 0; fi < tt->n; fi++) {
        const char *fname = tt->keys[fi];
        size_t len = strlen(fname);
        if (len < 10 || strcmp(fname + len - 9, ".F32.gguf"))
            continue;
        char in[1024];
        snprintf(in, sizeof in, "%s", test_shared_path("fixtures"));
        snprintf(in + strlen(in), sizeof in - strlen(in), "/%s", fname);
        if (!test_file_exists(in))
            continue;
        for (size_t mi = 0; mi < sizeof mixes / sizeof mixes[0]; mi++) {
            char ref_name[256];
            snprintf(ref_name, sizeof ref_name, "%.*s.%s.gguf", (int)(len - 9), fname, mixes[mi]);
            const struct jm *ref = jm_get(tt, ref_name);
            if (!ref)
                continue;
            char out[512], log[512], cmd[3072];
            snprintf(out, sizeof out, "%s/brasa_tq_%d.gguf", tmp_dir(), (int)getpid());
            snprintf(log, sizeof log, "%s/brasa_tq_%d.log", tmp_dir(), (int)getpid());
            snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' %s 2>'%s'", test_brasa_bin(), in, out,
                     mixes[mi], log);
            int rc = run_status(cmd);
            char *msg = test_read_file(log, NULL);
            CHECKF(rc == 0, "%s -> %s: exit %d: %s", fname, mixes[mi], rc, msg ? msg : "");
            CHECKF(msg && !strchr(msg, '\r'), "progress bar drawn on a non-terminal");
            free(msg);
            struct gguf_file *f = NULL;
            struct brasa_err err = {{0}};
            if (rc || gguf_open(&f, out, &err)) {
                CHECKF(0, "%s: %s", ref_name, err.msg);
                unlink(out);
                continue;
            }
            const struct jm *tensors = jm_get(ref, "tensors");
            CHECKF(tensors && f->n_tensors == tensors->n, "%s: %llu tensors", ref_name,
                   (unsigned long long)f->n_tensors);
            int mismatched = 0;
            for (size_t t = 0; tensors && t < tensors->n; t++) {
                const struct gguf_tensor *gt = gguf_find_tensor(f, tensors->keys[t]);
                const char *want = jm_get(&tensors->items[t], "type")->str;
                const struct qtype_info *q = gt ? qtype_get(gt->type) : NULL;
                if (!q || strcmp(q->name, want)) {
                    mismatched++;
                    CHECKF(0, "%s %s: type %s, llama.cpp has %s", ref_name, tensors->keys[t],
                           q ? q->name : "(missing)", want);
                }
            }
            uint32_t ft = 0;
            CHECK(gguf_get_u32(f, "general.file_type", &ft, &err) == BRASA_OK);
            CHECKF((long)ft == jm_int(jm_get(ref, "general_file_type"), -1), "%s: file_type %u",
                   ref_name, ft);
            /* every tensor decodes */
            for (uint64_t t = 0; t < f->n_tensors; t++) {
                size_t n;
                float *y = dequant_tensor(&f->tensors[t], &n);
                CHECK(y != NULL);
                free(y);
            }
            gguf_close(f);
            unlink(out);
            unlink(log);
            n_files++;
        }
    }
    jm_free(tt);
    free(tt_text);
    if (!n_files)
        SKIP("no F32 fixture with quantized siblings");
}

TEST(cli_quantize_errors)
{
    if (access(test_brasa_bin(), X_OK))
        SKIP("brasa binary not built");
    char in[1024], cmd[3072], log[512], out[512];
    snprintf(log, sizeof log, "%s/brasa_tqe_%d.log", tmp_dir(), (int)getpid());
    snprintf(out, sizeof out, "%s/brasa_tqe_%d.gguf", tmp_dir(), (int)getpid());
    /* already quantized input */
    snprintf(in, sizeof in, "%s", test_shared_path("fixtures/llama.Q4_K_M.gguf"));
    if (test_file_exists(in)) {
        snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' q8_0 2>'%s'", test_brasa_bin(), in, out, log);
        CHECK(run_status(cmd) == 1);
        char *msg = test_read_file(log, NULL);
        CHECKF(msg && strstr(msg, "already quantized"), "%s", msg ? msg : "");
        free(msg);
        CHECK(!test_file_exists(out));
    }
    /* not a GGUF file */
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' q4_k_m 2>'%s'", test_brasa_bin(), log, out, log);
    CHECK(run_status(cmd) == 1);
    /* missing file, unknown type, wrong arguments */
    snprintf(cmd, sizeof cmd, "'%s' quantize /nonexistent/x.gguf '%s' q4_0 2>'%s'", test_brasa_bin(), out, log);
    CHECK(run_status(cmd) == 1);
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' q3_xs 2>'%s'", test_brasa_bin(), in, out, log);
    CHECK(run_status(cmd) == 2);
    char *msg = test_read_file(log, NULL);
    CHECKF(msg && strstr(msg, "q4_k_m"), "the message lists the types: %s", msg ? msg : "");
    free(msg);
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' 2>'%s'", test_brasa_bin(), in, log);
    CHECK(run_status(cmd) == 2);
    unlink(log);
    unlink(out);
}

TEST_MAIN(T(type_table), T(dequant_goldens), T(simd_dequant_bit_identical), T(vec_dot_vs_float64), T(simd_levels_tiles),
          T(b32_dot_levels_agree),
          T(matmul_tiles_and_threads), T(activation_rounding),
          T(quant_row_roundtrip_all), T(quantize_quality_vs_llama_cpp), T(cli_quantize_mixes), T(cli_quantize_errors))
