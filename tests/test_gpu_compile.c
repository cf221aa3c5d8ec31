/* Every kernel variant brasa can choose compiles with NVRTC for sm_80, sm_86, sm_89 and sm_90
 * (sm_90a): for sm_90 as brasa compiles it, for the others as a check (JIT_CHECK: the machine
 * code for the architecture without ptxas's optimization, the same errors in a fraction of the
 * time). Needs only the run-time compiler (no GPU); SKIPs loudly when libnvrtc cannot be found.
 * Variants compile in parallel threads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/drv.h"
#include "gpu/gpu.h"
#include "gpu/jit.h"
#include "gpu/kcache.h"
#include "gpu/variants.h"
#include "test.h"

static const int archs[] = {80, 86, 89, 90};

/* NVRTC keeps an internal allocation for the life of the process; under LeakSanitizer
 * (make test-asan) it would be reported, so it is suppressed by library name (the library
 * stays loaded until exit for the name to resolve). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc\n"; }
/* Under AddressSanitizer (make test-asan) each variant compiles for sm_90 only: the host code
 * that renders, compiles and frees is the same for every architecture, and the four-way check
 * runs in the plain build (make test); NVRTC under ASan took most of CI's time. */
#if defined(__SANITIZE_ADDRESS__)
#define N_ARCH 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define N_ARCH 1
#endif
#endif
#ifndef N_ARCH
#define N_ARCH 4
#endif

struct job {
    struct drv *d;
    struct gpu_variant *v;
    int n, next, failed;
    pthread_mutex_t mu;
    size_t bytes;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int i = j->next++;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->n * N_ARCH)
            return NULL;
        struct gpu_variant *v = &j->v[i / N_ARCH];
        int arch = archs[4 - N_ARCH + i % N_ARCH];
        struct brasa_err err = {{0}};
        char *src = NULL;
        void *img = NULL;
        size_t size = 0;
        brasa_status st = jit_render(v->tmpl, v->defs, v->n_defs, &src, &err);
        if (st == BRASA_OK)
            st = jit_compile(j->d, src, v->tmpl, arch, arch == 90 ? 0 : JIT_CHECK, &img, &size,
                             &err);
        pthread_mutex_lock(&j->mu);
        if (st != BRASA_OK && ++j->failed <= 3) {
            fprintf(stderr, "  %s", v->tmpl);
            for (int k = 0; k < v->n_defs; k++)
                fprintf(stderr, " %s=%lld", v->defs[k].name, v->defs[k].value);
            fprintf(stderr, " sm_%d: %s\n", arch, err.msg);
        }
        j->bytes += size;
        pthread_mutex_unlock(&j->mu);
        free(src);
        free(img);
    }
}

TEST(compile_every_variant)
{
    static struct drv d;
    struct brasa_err err = {{0}};
    if (drv_load_nvrtc(&d, &err) != BRASA_OK) {
        fprintf(stderr, "\n  ********************************************************\n"
                        "  ** GPU KERNEL COMPILE CHECK NOT RUN: %s\n"
                        "  ********************************************************\n",
                err.msg);
        SKIP("no NVRTC");
    }
    int maj = 0, min = 0;
    d.nvrtcVersion(&maj, &min);
    struct gpu_variant v[GV_ALL_MAX];
    struct job j = {.d = &d, .v = v, .n = gpu_all_variants(v, GV_ALL_MAX)};
    pthread_mutex_init(&j.mu, NULL);
    REQUIRE(j.n > 10 && j.n < GV_ALL_MAX);
    const char *only = getenv("BRASA_TEST_TMPL"); /* e.g. "mvd.cu": that template only */
    if (only && *only) {
        int k = 0;
        for (int i = 0; i < j.n; i++)
            if (!strcmp(v[i].tmpl, only))
                v[k++] = v[i];
        j.n = k;
        REQUIRE(j.n > 0); /* (a name no variant has is a mistake, not a pass) */
    }
    int nth = 2;
    const char *e = getenv("BRASA_TEST_THREADS");
    if (e && atoi(e) > 0)
        nth = atoi(e);
    pthread_t th[16];
    if (nth > 16)
        nth = 16;
    for (int i = 0; i < nth; i++)
        pthread_create(&th[i], NULL, worker, &j);
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    printf("  NVRTC %d.%d (%s): %d variants x %d archs compiled, %zu KiB of CUBIN, %d failed\n",
           maj, min, d.nvrtc_path, j.n, N_ARCH, j.bytes >> 10, j.failed);
    CHECKF(j.failed == 0, "%d compiles failed", j.failed);
}

/* The first variant of each template, into v (GV_ALL_MAX entries); returns their count. */
static int first_of_each_template(struct gpu_variant *v)
{
    int n = gpu_all_variants(v, GV_ALL_MAX), m = 0;
    for (int i = 0; i < n; i++) {
        int first = 1;
        for (int k = 0; k < m; k++)
            first &= strcmp(v[k].tmpl, v[i].tmpl) != 0;
        if (first)
            v[m++] = v[i];
    }
    return m;
}

/* The timeline's stamps (BRASA_GPU_TIMELINE: BRASA_TL defined in every module, port.cuh) in
 * the first variant of each template, for sm_90 */
TEST(compile_with_timeline)
{
    static struct drv d;
    struct brasa_err err = {{0}};
    if (drv_load_nvrtc(&d, &err) != BRASA_OK)
        SKIP("no NVRTC");
    struct gpu_variant v[GV_ALL_MAX];
    int n = first_of_each_template(v), done = 0;
    for (int i = 0; i < n; i++) {
        struct jit_def defs[GV_MAX_DEFS + 1];
        memcpy(defs, v[i].defs, (size_t)v[i].n_defs * sizeof *defs);
        defs[v[i].n_defs] = (struct jit_def){"BRASA_TL", 1LL << 40};
        char *src = NULL;
        void *img = NULL;
        size_t size = 0;
        REQUIRE(jit_render(v[i].tmpl, defs, v[i].n_defs + 1, &src, &err) == BRASA_OK);
        brasa_status st = jit_compile(&d, src, v[i].tmpl, 90, 0, &img, &size, &err);
        CHECKF(st == BRASA_OK, "%s with BRASA_TL: %s", v[i].tmpl, err.msg);
        free(src);
        free(img);
        done++;
    }
    CHECK(done >= 5);
}

/* Every kernel of every template takes at most GPU_MAX_ARGS arguments (the host's launch holds
 * that many): counted in the rendered source, the top-level commas of the parameter list before
 * each extern "C" kernel's body. Needs no NVRTC. */
TEST(kernel_args_fit_a_launch)
{
    struct gpu_variant v[GV_ALL_MAX];
    int n = first_of_each_template(v), kernels = 0, most = 0;
    struct brasa_err err = {{0}};
    for (int i = 0; i < n; i++) {
        char *src = NULL;
        REQUIRE(jit_render(v[i].tmpl, v[i].defs, v[i].n_defs, &src, &err) == BRASA_OK);
        for (const char *p = src; (p = strstr(p, "extern \"C\" __global__")) != NULL; p++) {
            const char *body = strchr(p, '{');
            REQUIRE(body);
            const char *open = NULL; /* the last top-level group before the body */
            int depth = 0;
            for (const char *q = p; q < body; q++) {
                if (*q == '(' && depth++ == 0)
                    open = q;
                else if (*q == ')')
                    depth--;
            }
            REQUIRE(open && depth == 0);
            int args = 1, d = 0;
            for (const char *q = open + 1; q < body; q++) {
                if (*q == '(')
                    d++;
                else if (*q == ')' && d-- == 0)
                    break;
                else if (*q == ',' && d == 0)
                    args++;
            }
            CHECKF(args <= GPU_MAX_ARGS, "%s: a kernel of %d arguments at \"%.60s\"", v[i].tmpl,
                   args, p);
            most = args > most ? args : most;
            kernels++;
        }
        free(src);
    }
    printf("  %d kernels, at most %d arguments (a launch holds %d)\n", kernels, most,
           GPU_MAX_ARGS);
    CHECK(kernels >= 10 && most >= 30);
}

TEST(render_defines_first)
{
    struct jit_def defs[] = {{"QT", 12}, {"NW", 4}};
    char *src = NULL;
    struct brasa_err err = {{0}};
    REQUIRE(jit_render("matvec.cu", defs, 2, &src, &err) == BRASA_OK);
    CHECK(strncmp(src, "#define QT 12\n#define NW 4\n", 27) == 0);
    free(src);
    CHECK(jit_render("nope.cu", defs, 0, &src, &err) == BRASA_ENOTFOUND);
}

/* The decode product's piece size: pieces of 64 values (KP 64) only for Q4_K and Q6_K, with half
 * as many in flight as pieces of 32 (U halved); the defines the runtime and this compile test
 * render come from gpu_mvd_variants alone. */
static long def_of(const struct gpu_variant *v, const char *name)
{
    for (int d = 0; d < v->n_defs; d++)
        if (!strcmp(v->defs[d].name, name))
            return v->defs[d].value;
    return -1;
}

TEST(mvd_piece_defines)
{
    struct gpu_variant v[6];
    static const unsigned kt[2] = {12, 14}; /* Q4_K, Q6_K */
    for (int t = 0; t < 2; t++)
        for (int nr = 1; nr <= 4; nr *= 2) {
            int n32 = gpu_mvd_variants(kt[t], 0, nr, 1, 0, 0, 32, v, 6);
            REQUIRE(n32 > 0);
            long u32 = def_of(&v[0], "U");
            CHECK(def_of(&v[0], "KP") == -1);
            int n64 = gpu_mvd_variants(kt[t], 0, nr, 1, 0, 0, 64, v, 6);
            CHECKF(n64 == n32, "type %u nr %d: %d variants with pieces of 64, %d with 32", kt[t],
                   nr, n64, n32);
            for (int i = 0; i < n64; i++) {
                CHECK(def_of(&v[i], "KP") == 64);
                CHECKF(def_of(&v[i], "U") == (u32 > 1 ? u32 / 2 : 1), "type %u nr %d: U %ld", kt[t],
                       nr, def_of(&v[i], "U"));
                CHECK(def_of(&v[i], "QT") == (long)kt[t] && def_of(&v[i], "NR") == nr);
            }
        }
    /* the other types have no pieces of 64 */
    CHECK(gpu_mvd_variants(8, 0, 2, 1, 0, 0, 64, v, 6) == 0);  /* Q8_0 */
    CHECK(gpu_mvd_variants(13, 0, 2, 1, 0, 0, 64, v, 6) == 0); /* Q5_K */
    CHECK(gpu_mvd_variants(8, 0, 2, 1, 0, 0, 32, v, 6) > 0);
}

/* The prompt products' candidates (gpu_mmt_variants): with dq 2 on sm_90 (wg 3) the exact
 * K-format warpgroup tiles (KX) first for Q4_K / Q5_K, then dq 0's list (the F16 mma.sync
 * tiles, KF, then the int8 ones); no KX for other types or dq, and nothing dequantized. */
TEST(mmt_exact_k_candidates)
{
    struct gpu_variant v[8], w[8];
    static const unsigned kt[2] = {12, 13}; /* Q4_K, Q5_K */
    for (int t = 0; t < 2; t++)
        for (int glu = 0; glu < 2; glu++) {
            int n = gpu_mmt_variants(kt[t], glu, 2, 3, v, 8);
            int n0 = gpu_mmt_variants(kt[t], glu, 0, 3, w, 8);
            REQUIRE(n > 0 && n == n0 + 1);
            CHECK(def_of(&v[0], "KX") == 1 && def_of(&v[0], "DQ") == 1 &&
                  def_of(&v[0], "WG") == 2 && def_of(&v[0], "GLU") == glu);
            CHECK(def_of(&v[1], "KF") == 1 && def_of(&w[0], "KF") == 1);
            for (int i = 1; i < n; i++)
                CHECK(def_of(&v[i], "KX") == -1 && def_of(&v[i], "DQ") == -1);
            /* and dq 1 (dequantized) lists have no KX */
            n = gpu_mmt_variants(kt[t], glu, 1, 3, v, 8);
            for (int i = 0; i < n; i++)
                CHECK(def_of(&v[i], "KX") == -1);
        }
    static const unsigned ot[3] = {14, 8, 2}; /* Q6_K, Q8_0, Q4_0: the lists of dq 0 */
    for (int t = 0; t < 3; t++) {
        int n = gpu_mmt_variants(ot[t], 0, 2, 3, v, 8);
        CHECK(n > 0 && n == gpu_mmt_variants(ot[t], 0, 0, 3, w, 8));
        for (int i = 0; i < n; i++)
            CHECK(def_of(&v[i], "KX") == -1 && def_of(&v[i], "DQ") == -1);
    }
}

/* The disk cache gives back what it stored, and BRASA_GPU_KEEP's files hold a module's
 * rendered source and its image under the template's name (no GPU needed). */
static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(4096);
    *n = buf ? fread(buf, 1, 4095, f) : 0;
    fclose(f);
    if (buf)
        buf[*n] = 0;
    return buf;
}

TEST(kcache_put_get_and_keep)
{
    const char *t = getenv("TMPDIR");
    char dir[512], sub[600], path[700];
    snprintf(dir, sizeof dir, "%s/brasa-test-kc-XXXXXX", t && *t ? t : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(sub, sizeof sub, "%s/a/b", dir); /* folders are made as needed */
    const unsigned char img[5] = {0x7f, 'E', 'L', 'F', 0};
    const uint64_t key = kcache_hash(0, "src", 3);
    size_t n = 0;
    CHECK(kcache_get(sub, key, &n) == NULL);
    kcache_put(sub, key, img, sizeof img);
    void *got = kcache_get(sub, key, &n);
    REQUIRE(got != NULL);
    CHECK(n == sizeof img && memcmp(got, img, n) == 0);
    free(got);
    kcache_keep(sub, "mvd.cu", key, "#define QT 12\n", img, sizeof img);
    snprintf(path, sizeof path, "%s/mvd-%016llx.cu", sub, (unsigned long long)key);
    char *src = read_all(path, &n);
    CHECKF(src && strcmp(src, "#define QT 12\n") == 0, "%s: %s", path, src ? src : "(missing)");
    remove(path);
    free(src);
    snprintf(path, sizeof path, "%s/mvd-%016llx.cubin", sub, (unsigned long long)key);
    char *cub = read_all(path, &n);
    CHECKF(cub && n == sizeof img && memcmp(cub, img, n) == 0, "%s", path);
    remove(path);
    free(cub);
    snprintf(path, sizeof path, "%s/%016llx.cubin", sub, (unsigned long long)key);
    remove(path);
    remove(sub);
    snprintf(path, sizeof path, "%s/a", dir);
    remove(path);
    remove(dir);
}

TEST_MAIN(T(compile_every_variant), T(compile_with_timeline), T(kernel_args_fit_a_launch),
          T(render_defines_first),
          T(mvd_piece_defines), T(mmt_exact_k_candidates), T(kcache_put_get_and_keep))
