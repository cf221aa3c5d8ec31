/* Sampler: each step against a plain reference, the order of the chain, seeds, penalties. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "brasa.h"
#include "sample/sample.h"
#include "test.h"

#define NV 1000

static void random_logits(float *x, int n, unsigned long long *rs)
{
    for (int i = 0; i < n; i++)
        x[i] = 3.0f * test_rand_normal(rs);
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y ? 1 : 0;
}

TEST(rng_reproducible)
{
    struct sample_rng a, b, c;
    sample_rng_seed(&a, 42);
    sample_rng_seed(&b, 42);
    sample_rng_seed(&c, 43);
    int same_c = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = sample_rng_u64(&a), y = sample_rng_u64(&b), z = sample_rng_u64(&c);
        CHECK(x == y);
        same_c += x == z;
    }
    CHECK(same_c == 0);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = sample_rng_uniform(&a);
        CHECK(u >= 0.0 && u < 1.0);
        sum += u;
    }
    CHECKF(fabs(sum / 100000 - 0.5) < 0.01, "mean %g", sum / 100000);
}

TEST(greedy_ties_and_nan)
{
    float x[6] = {1, 5, NAN, 5, -2, 4};
    struct sample_cand st[6];
    struct sample_list l;
    sample_list_init(&l, st, x, 6);
    CHECK(sample_greedy(&l) == 1);
    float y[3] = {-INFINITY, -INFINITY, -INFINITY};
    sample_list_init(&l, st, y, 3);
    CHECK(sample_greedy(&l) == 0);
}

TEST(penalties)
{
    float x[5] = {2, -2, 2, -2, 1};
    int32_t counts[5] = {1, 1, 0, 3, 0};
    struct sample_cand st[5];
    struct sample_list l;
    sample_list_init(&l, st, x, 5);
    sample_penalties(&l, counts, 2.0f, 0.0f, 0.0f);
    CHECK(st[0].logit == 1.0f);  /* positive: divided */
    CHECK(st[1].logit == -4.0f); /* negative: multiplied */
    CHECK(st[2].logit == 2.0f);  /* not seen: untouched */
    CHECK(st[3].logit == -4.0f); /* counted once for repetition */
    sample_list_init(&l, st, x, 5);
    sample_penalties(&l, counts, 1.0f, 0.5f, 0.25f);
    CHECK(st[0].logit == 2.0f - 0.5f - 0.25f);
    CHECK(st[3].logit == -2.0f - 0.5f - 0.75f);
    CHECK(st[4].logit == 1.0f);
}

TEST(top_k_matches_sort)
{
    unsigned long long rs = test_seed();
    static float x[NV], sorted[NV];
    static struct sample_cand st[NV];
    for (int rep = 0; rep < 20; rep++) {
        random_logits(x, NV, &rs);
        if (rep == 0)
            x[10] = x[20] = 100; /* a tie at the top: the lower id comes first */
        memcpy(sorted, x, sizeof x);
        qsort(sorted, NV, sizeof *sorted, cmp_desc);
        int k = 1 + (int)(test_rand_u64(&rs) % 60);
        struct sample_list l;
        sample_list_init(&l, st, x, NV);
        sample_top_k(&l, k);
        REQUIRE(l.n == (size_t)k && l.sorted);
        for (int i = 0; i < k; i++)
            CHECKF(l.c[i].logit == sorted[i] && x[l.c[i].id] == sorted[i], "rank %d", i);
        if (rep == 0 && k >= 2)
            CHECK(l.c[0].id == 10 && l.c[1].id == 20);
    }
    float y[3] = {1, 2, 3};
    struct sample_list l;
    sample_list_init(&l, st, y, 3);
    sample_top_k(&l, 0); /* off */
    CHECK(l.n == 3);
    sample_top_k(&l, 5); /* more than there are */
    CHECK(l.n == 3);
}

TEST(temperature_softmax)
{
    unsigned long long rs = test_seed();
    static float x[NV];
    static struct sample_cand st[NV];
    random_logits(x, NV, &rs);
    struct sample_list l;
    sample_list_init(&l, st, x, NV);
    sample_temperature(&l, 0.5f);
    sample_softmax(&l);
    double mx = -1e30, sum = 0, total = 0, maxerr = 0;
    for (int i = 0; i < NV; i++)
        mx = fmax(mx, x[i] / 0.5);
    for (int i = 0; i < NV; i++)
        sum += exp(x[i] / 0.5 - mx);
    for (int i = 0; i < NV; i++) {
        double ref = exp(x[i] / 0.5 - mx) / sum;
        maxerr = fmax(maxerr, fabs(st[i].p - ref));
        total += st[i].p;
    }
    CHECKF(maxerr < 1e-6, "max error %g", maxerr);
    CHECKF(fabs(total - 1) < 1e-5, "sum %g", total);
}

/* Plain reference for top-p: sort every probability, keep the prefix reaching p. */
static size_t ref_top_p_keep(const struct sample_cand *c, size_t n, float p, float *sorted)
{
    for (size_t i = 0; i < n; i++)
        sorted[i] = c[i].p;
    qsort(sorted, n, sizeof *sorted, cmp_desc);
    double cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += sorted[i];
        if (cum >= p)
            return i + 1;
    }
    return n;
}

TEST(top_p_matches_reference)
{
    unsigned long long rs = test_seed();
    static float x[NV], sorted[NV];
    static struct sample_cand st[NV];
    for (int rep = 0; rep < 20; rep++) {
        random_logits(x, NV, &rs);
        float temp = rep % 2 ? 3.0f : 0.7f; /* flat and peaked: both paths of the pre-filter */
        float p = 0.5f + 0.49f * (float)test_rand_uniform(&rs) * (float)test_rand_uniform(&rs);
        struct sample_list l;
        sample_list_init(&l, st, x, NV);
        sample_temperature(&l, temp);
        sample_softmax(&l);
        size_t want = ref_top_p_keep(st, NV, p, sorted);
        sample_top_p(&l, p);
        CHECKF(l.n == want, "kept %zu, reference %zu (p %g)", l.n, want, (double)p);
        double sum = 0;
        for (size_t i = 0; i < l.n; i++)
            sum += l.c[i].p;
        CHECK(fabs(sum - 1) < 1e-5);
        for (size_t i = 1; l.sorted && i < l.n; i++)
            CHECK(l.c[i - 1].p >= l.c[i].p);
    }
}

/* A flat distribution over a large vocabulary: the kept set is large and left unsorted; it must
 * still be exactly the most likely tokens, as many as the sorted prefix. */
TEST(top_p_flat_large)
{
    enum { N = 50000 };
    unsigned long long rs = test_seed();
    float *x = malloc(N * sizeof *x), *sorted = malloc(N * sizeof *sorted);
    struct sample_cand *st = malloc(N * sizeof *st), *copy = malloc(N * sizeof *copy);
    REQUIRE(x && sorted && st && copy);
    for (int i = 0; i < N; i++)
        x[i] = test_rand_uniform(&rs);
    struct sample_list l;
    sample_list_init(&l, st, x, N);
    sample_softmax(&l);
    memcpy(copy, st, N * sizeof *st);
    size_t want = ref_top_p_keep(copy, N, 0.9f, sorted);
    sample_top_p(&l, 0.9f);
    CHECKF(l.n == want, "kept %zu, reference %zu", l.n, want);
    float min_kept = 1, max_dropped = 0;
    char *kept = calloc(N, 1);
    REQUIRE(kept);
    for (size_t i = 0; i < l.n; i++) {
        kept[l.c[i].id] = 1;
        min_kept = fminf(min_kept, copy[l.c[i].id].p);
    }
    for (int i = 0; i < N; i++)
        if (!kept[i])
            max_dropped = fmaxf(max_dropped, copy[i].p);
    CHECKF(min_kept >= max_dropped, "kept down to %g but dropped %g", (double)min_kept, (double)max_dropped);
    free(kept);
    free(x);
    free(sorted);
    free(st);
    free(copy);
}

TEST(min_p)
{
    float x[4] = {0, -1, -3, log(0.5f)};
    struct sample_cand st[4];
    struct sample_list l;
    sample_list_init(&l, st, x, 4);
    sample_softmax(&l);
    sample_min_p(&l, 0.4f); /* keeps p >= 0.4 * p(id 0): ids 0 (1), 3 (0.5); drops 1 (0.37), 2 */
    REQUIRE(l.n == 2);
    CHECK(l.c[0].id == 0 && l.c[1].id == 3);
    CHECK(fabs(l.c[0].p - 2.0 / 3.0) < 1e-6);
}

TEST(draw_follows_distribution)
{
    float x[4] = {0, logf(2), logf(3), logf(4)}; /* p = 0.1, 0.2, 0.3, 0.4 */
    struct sample_cand st[4];
    struct sample_list l;
    sample_list_init(&l, st, x, 4);
    sample_softmax(&l);
    struct sample_rng r;
    sample_rng_seed(&r, test_seed());
    int hist[4] = {0};
    const int n = 40000;
    for (int i = 0; i < n; i++) {
        int32_t id = sample_draw(&l, &r);
        REQUIRE(id >= 0 && id < 4);
        hist[id]++;
    }
    for (int i = 0; i < 4; i++) {
        double want = 0.1 * (i + 1) * n, sd = sqrt(n * 0.1 * (i + 1) * (1 - 0.1 * (i + 1)));
        CHECKF(fabs(hist[i] - want) < 5 * sd, "id %d drawn %d times, expected %g", i, hist[i], want);
    }
}

static struct brasa_sampler *make(const struct brasa_sampler_params *p, int nv)
{
    struct brasa_sampler *s = NULL;
    struct brasa_err err;
    if (brasa_sampler_new(p, nv, &s, &err) != BRASA_OK)
        fprintf(stderr, "  %s\n", err.msg);
    return s;
}

TEST(chain_greedy_and_penalty_order)
{
    struct brasa_sampler_params p;
    brasa_sampler_defaults(&p);
    p.temperature = 0;
    p.repeat_penalty = 4.0f;
    p.penalty_last_n = 2;
    float x[4] = {1, 3, 2, 0};
    struct brasa_sampler *s = make(&p, 4);
    REQUIRE(s);
    CHECK(brasa_sampler_sample(s, x) == 1);
    brasa_sampler_accept(s, 1); /* 3 / 4 < 2: penalties come before greedy */
    CHECK(brasa_sampler_sample(s, x) == 2);
    brasa_sampler_accept(s, 2);
    brasa_sampler_accept(s, 0);
    CHECK(brasa_sampler_sample(s, x) == 1); /* id 1 left the window of 2 */
    brasa_sampler_reset(s);
    CHECK(brasa_sampler_sample(s, x) == 1);
    brasa_sampler_free(s);
}

TEST(chain_plain_greedy)
{
    struct brasa_sampler_params p;
    brasa_sampler_defaults(&p);
    p.temperature = 0;
    float x[5] = {NAN, 2, 5, -INFINITY, 5};
    struct brasa_sampler *s = make(&p, 5);
    REQUIRE(s);
    CHECK(brasa_sampler_sample(s, x) == 2); /* NaN skipped, tie to the lower id */
    float y[5] = {NAN, NAN, NAN, NAN, NAN};
    CHECK(brasa_sampler_sample(s, y) == 0);
    brasa_sampler_free(s);
}

TEST(chain_top_k_before_softmax)
{
    /* Over all four, p(0) = 0.64 < 0.7 so top-p keeps two; over the top-k = 2 survivors
     * p(0) = 0.73 >= 0.7 so only id 0 can come out. */
    float x[4] = {3, 2, 1, 0};
    struct brasa_sampler_params p;
    brasa_sampler_defaults(&p);
    p.temperature = 1;
    p.top_k = 2;
    p.top_p = 0.7f;
    p.min_p = 0;
    struct brasa_sampler *s = make(&p, 4);
    REQUIRE(s);
    for (int i = 0; i < 200; i++)
        CHECK(brasa_sampler_sample(s, x) == 0);
    brasa_sampler_free(s);
    p.top_k = 0;
    s = make(&p, 4);
    REQUIRE(s);
    int seen1 = 0;
    for (int i = 0; i < 200; i++) {
        int32_t id = brasa_sampler_sample(s, x);
        CHECK(id == 0 || id == 1);
        seen1 += id == 1;
    }
    CHECK(seen1 > 0);
    brasa_sampler_free(s);
}

TEST(chain_seed_reproducible)
{
    unsigned long long rs = test_seed();
    static float x[NV];
    random_logits(x, NV, &rs);
    struct brasa_sampler_params p;
    brasa_sampler_defaults(&p);
    p.temperature = 1.5f;
    p.top_k = 0;
    p.top_p = 0.98f;
    p.min_p = 0;
    p.seed = 1234;
    int32_t a[64], b[64], c[64];
    for (int run = 0; run < 3; run++) {
        if (run == 2)
            p.seed = 1235;
        struct brasa_sampler *s = make(&p, NV);
        REQUIRE(s);
        int32_t *o = run == 0 ? a : run == 1 ? b : c;
        for (int i = 0; i < 64; i++)
            o[i] = brasa_sampler_sample(s, x);
        brasa_sampler_free(s);
    }
    int diff = 0;
    for (int i = 0; i < 64; i++) {
        CHECK(a[i] == b[i]);
        diff += a[i] != c[i];
    }
    CHECK(diff > 0);
}

TEST(chain_bad_params)
{
    struct brasa_sampler_params p;
    brasa_sampler_defaults(&p);
    struct brasa_sampler *s = NULL;
    struct brasa_err err;
    CHECK(brasa_sampler_new(&p, 0, &s, &err) == BRASA_EINVAL && !s);
    p.repeat_penalty = 0;
    CHECK(brasa_sampler_new(&p, 10, &s, &err) == BRASA_EINVAL && !s);
    p.repeat_penalty = 1;
    p.temperature = NAN;
    CHECK(brasa_sampler_new(&p, 10, &s, &err) == BRASA_EINVAL && !s);
}

/* The candidates a GPU sends (the K best, ties to the lower id, NaN as -inf) give the token the
 * whole row gives, step after step, with penalties that push the leading tokens down. */
static const float *rank_of; /* the row cmp_rank sorts ids by */
static int cmp_rank_ids(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    float x = isnan(rank_of[a]) ? -INFINITY : rank_of[a];
    float y = isnan(rank_of[b]) ? -INFINITY : rank_of[b];
    return x > y ? -1 : x < y ? 1 : a - b;
}

TEST(candidates_match_full_row)
{
    static const struct {
        float temp;
        int top_k;
        float rep, pres, freq;
        int whole; /* 1: the sampler needs the whole row */
    } cfg[] = {
        {0.0f, 40, 1.0f, 0.0f, 0.0f, 0},  {0.0f, 40, 1.3f, 0.2f, 0.1f, 0},
        {0.8f, 40, 1.0f, 0.0f, 0.0f, 0},  {0.8f, 40, 1.2f, 0.5f, 0.3f, 0},
        {1.5f, 5, 1.5f, 1.0f, 0.0f, 0},   {0.8f, 0, 1.0f, 0.0f, 0.0f, 1},
        {0.8f, 40, 0.8f, 0.0f, 0.0f, 1},  {0.8f, 40, 1.0f, -0.5f, 0.0f, 1},
        {0.8f, 300, 1.0f, 0.0f, 0.0f, 1},
    };
    unsigned long long rs = test_seed();
    static float base[NV], x[NV], vals[SAMPLE_MAX_CAND];
    static int order[NV];
    int32_t ids[SAMPLE_MAX_CAND];
    random_logits(base, NV, &rs);
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        struct brasa_sampler_params p;
        brasa_sampler_defaults(&p);
        p.temperature = cfg[c].temp;
        p.top_k = cfg[c].top_k;
        p.repeat_penalty = cfg[c].rep;
        p.presence_penalty = cfg[c].pres;
        p.frequency_penalty = cfg[c].freq;
        p.penalty_last_n = 16;
        struct brasa_sampler *a = make(&p, NV), *b = make(&p, NV);
        REQUIRE(a && b);
        int same = 1, ksum = 0;
        for (int step = 0; step < 60; step++) {
            for (int i = 0; i < NV; i++) /* the same leaders step after step */
                x[i] = base[i] + 0.3f * test_rand_normal(&rs);
            x[3] = x[4];     /* a tie */
            x[9] = NAN;      /* read as -inf */
            int k = sampler_candidates(a);
            CHECKF((k == 0) == (cfg[c].whole == 1), "config %zu: %d candidates", c, k);
            for (int i = 0; i < NV; i++)
                order[i] = i;
            rank_of = x;
            qsort(order, NV, sizeof *order, cmp_rank_ids);
            for (int i = 0; i < k; i++) {
                ids[i] = order[i];
                vals[i] = x[order[i]];
            }
            int32_t want = brasa_sampler_sample(b, x);
            int32_t got = k > 0 ? sampler_sample_top(a, ids, vals, k) : brasa_sampler_sample(a, x);
            same &= got == want;
            ksum += k;
            brasa_sampler_accept(a, want);
            brasa_sampler_accept(b, want);
        }
        CHECKF(same, "config %zu: the candidates drew another token than the whole row", c);
        printf("  config %zu: %.1f candidates a step\n", c, ksum / 60.0);
        brasa_sampler_free(a);
        brasa_sampler_free(b);
    }
}

TEST_MAIN(T(rng_reproducible), T(greedy_ties_and_nan), T(penalties), T(top_k_matches_sort),
          T(temperature_softmax), T(top_p_matches_reference), T(top_p_flat_large), T(min_p), T(draw_follows_distribution),
          T(chain_greedy_and_penalty_order), T(chain_plain_greedy), T(chain_top_k_before_softmax),
          T(chain_seed_reproducible), T(chain_bad_params), T(candidates_match_full_row))
