#include "test.h"

#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"
#include "quant/quant.h"

struct test_state test_cur;

int test_run_all(const char *file, const struct test_entry *tests, int n, int argc, char **argv)
{
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        if (argc > 1) { /* run only the named tests */
            int want = 0;
            for (int a = 1; a < argc; a++)
                if (strcmp(argv[a], tests[i].name) == 0)
                    want = 1;
            if (!want)
                continue;
        }
        memset(&test_cur, 0, sizeof test_cur);
        fprintf(stderr, "%s: %s\n", file, tests[i].name);
        tests[i].fn();
        if (test_cur.failed_checks) {
            fprintf(stderr, "  FAIL %s (%d failed checks)\n", tests[i].name, test_cur.failed_checks);
            failed++;
        } else if (test_cur.skipped) {
            skipped++;
        } else {
            passed++;
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}

const char *test_shared_dir(void)
{
    const char *e = getenv("BRASA_SHARED");
    return e && *e ? e : "../shared";
}

const char *test_shared_path(const char *rel)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", test_shared_dir(), rel);
    return buf;
}

int test_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

char *test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0) {
        fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (size)
            *size = (size_t)n;
    }
    return buf;
}

unsigned long long test_seed(void)
{
    static unsigned long long seed;
    if (!seed) {
        const char *e = getenv("BRASA_TEST_SEED");
        seed = e ? strtoull(e, NULL, 0) : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
        if (!seed)
            seed = 1;
        fprintf(stderr, "  (random seed %llu; BRASA_TEST_SEED=%llu replays it)\n", seed, seed);
    }
    return seed;
}

unsigned long long test_rand_u64(unsigned long long *s)
{
    unsigned long long x = *s ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

float test_rand_uniform(unsigned long long *s)
{
    return (float)((double)(test_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

float test_rand_normal(unsigned long long *s)
{
    double u1 = ((double)(test_rand_u64(s) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(test_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

const char *test_brasa_bin(void)
{
    const char *b = getenv("BRASA_BIN");
    return b && *b ? b : "build/brasa";
}

int test_argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

int test_cache_new(const struct mdl *m, int n_ctx, struct mdl_cache *c, float **mem)
{
    const struct mdl_hparams *hp = &m->hp;
    int L = hp->n_layer;
    size_t layer = (size_t)hp->n_head_kv * (size_t)hp->head_dim * (size_t)n_ctx;
    memset(c, 0, sizeof *c);
    c->n_ctx = n_ctx;
    c->kv_type = GGML_TYPE_F32;
    c->k = calloc((size_t)L, sizeof(void *));
    c->v = calloc((size_t)L, sizeof(void *));
    c->conv = calloc((size_t)L, sizeof(float *));
    c->ssm = calloc((size_t)L, sizeof(float *));
    /* (DeltaNet layers: the convolution's and the recurrence's states) */
    size_t conv = (size_t)(hp->conv_k - 1) *
                  (size_t)(2 * hp->ssm_n_kh * hp->ssm_dk + hp->ssm_n_vh * hp->ssm_dv),
           ssm = (size_t)hp->ssm_n_vh * (size_t)hp->ssm_dv * (size_t)hp->ssm_dk,
           per = 2 * layer + (hp->ssm_n_vh ? conv + ssm : 0);
    *mem = calloc(per * (size_t)L, sizeof(float));
    if (!c->k || !c->v || !c->conv || !c->ssm || !*mem) {
        test_cache_free(c, *mem);
        *mem = NULL;
        return -1;
    }
    for (int il = 0; il < L; il++) {
        c->k[il] = *mem + per * (size_t)il;
        c->v[il] = *mem + per * (size_t)il + layer;
        c->conv[il] = *mem + per * (size_t)il + 2 * layer;
        c->ssm[il] = c->conv[il] + conv;
    }
    return 0;
}

void test_cache_free(struct mdl_cache *c, float *mem)
{
    free(c->k), free(c->v), free(c->conv), free(c->ssm), free(mem);
    c->k = c->v = NULL;
    c->conv = c->ssm = NULL;
}
