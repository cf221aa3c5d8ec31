/* Sampling steps and the brasa_sampler chain (order documented in sample.h and brasa.h). */
#include "sample/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brasa.h"

/* ---- random numbers ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sample_rng_seed(struct sample_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sample_rng_u64(struct sample_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double sample_rng_uniform(struct sample_rng *r)
{
    return (double)(sample_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- candidate list ---- */

/* A candidate: NaN reads as -inf */
static struct sample_cand cand_of(int32_t id, float x)
{
    return (struct sample_cand){id, isnan(x) ? -INFINITY : x, 0.0f};
}

void sample_list_init(struct sample_list *l, struct sample_cand *storage, const float *logits, size_t n)
{
    for (size_t i = 0; i < n; i++)
        storage[i] = cand_of((int32_t)i, logits[i]);
    l->c = storage;
    l->n = n;
    l->sorted = false;
}

/* a ranks before b: larger logit, then lower id (a total order, so results are deterministic). */
static bool ranks_before(const struct sample_cand *a, const struct sample_cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_rank(const void *pa, const void *pb)
{
    const struct sample_cand *a = pa, *b = pb;
    return ranks_before(a, b) ? -1 : ranks_before(b, a) ? 1 : 0;
}

static void sort_list(struct sample_list *l)
{
    if (!l->sorted)
        qsort(l->c, l->n, sizeof *l->c, cmp_rank);
    l->sorted = true;
}

void sample_penalties(struct sample_list *l, const int32_t *counts, float repeat, float presence,
                      float frequency)
{
    if (!counts || (repeat == 1.0f && presence == 0.0f && frequency == 0.0f))
        return;
    for (size_t i = 0; i < l->n; i++) {
        int32_t n = counts[l->c[i].id];
        if (n <= 0)
            continue;
        float x = l->c[i].logit;
        if (repeat != 1.0f && repeat > 0.0f)
            x = x > 0.0f ? x / repeat : x * repeat;
        x -= (float)n * frequency + presence;
        l->c[i].logit = x;
    }
    l->sorted = false;
}

int32_t sample_greedy(const struct sample_list *l)
{
    if (l->n == 0)
        return -1;
    size_t best = 0;
    for (size_t i = 1; i < l->n; i++)
        if (ranks_before(&l->c[i], &l->c[best]))
            best = i;
    return l->c[best].id;
}

/* Min-heap on rank (the root is the worst of the kept k). */
static void heap_down(struct sample_cand *h, size_t n, size_t i)
{
    for (;;) {
        size_t w = i, a = 2 * i + 1, b = a + 1;
        if (a < n && ranks_before(&h[w], &h[a]))
            w = a;
        if (b < n && ranks_before(&h[w], &h[b]))
            w = b;
        if (w == i)
            return;
        struct sample_cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

void sample_top_k(struct sample_list *l, int k)
{
    if (k <= 0 || (size_t)k >= l->n) {
        return;
    }
    /* The first k entries become a heap of the best seen so far: O(n log k). */
    struct sample_cand *h = l->c;
    size_t kk = (size_t)k;
    for (size_t i = kk / 2; i-- > 0;)
        heap_down(h, kk, i);
    for (size_t i = kk; i < l->n; i++) {
        if (ranks_before(&l->c[i], &h[0])) {
            h[0] = l->c[i];
            heap_down(h, kk, 0);
        }
    }
    l->n = kk;
    l->sorted = false;
    sort_list(l);
}

void sample_temperature(struct sample_list *l, float t)
{
    if (t <= 0.0f || t == 1.0f)
        return;
    for (size_t i = 0; i < l->n; i++)
        l->c[i].logit /= t;
}

void sample_softmax(struct sample_list *l)
{
    if (l->n == 0)
        return;
    float mx = -INFINITY;
    for (size_t i = 0; i < l->n; i++)
        mx = fmaxf(mx, l->c[i].logit);
    if (mx == -INFINITY) { /* every logit is -inf: fall back to uniform */
        for (size_t i = 0; i < l->n; i++)
            l->c[i].p = 1.0f / (float)l->n;
        return;
    }
    double sum = 0;
    for (size_t i = 0; i < l->n; i++) {
        float e = expf(l->c[i].logit - mx);
        l->c[i].p = e;
        sum += e;
    }
    for (size_t i = 0; i < l->n; i++)
        l->c[i].p = (float)(l->c[i].p / sum);
}

static void renormalise(struct sample_list *l)
{
    double sum = 0;
    for (size_t i = 0; i < l->n; i++)
        sum += l->c[i].p;
    if (sum > 0)
        for (size_t i = 0; i < l->n; i++)
            l->c[i].p = (float)(l->c[i].p / sum);
}

static void swap_cand(struct sample_cand *a, struct sample_cand *b)
{
    struct sample_cand t = *a;
    *a = *b;
    *b = t;
}

/* Moves the smallest prefix by rank whose mass reaches p to the front, in expected linear time
 * (a quickselect that carries the mass along); returns its length. Sorting a whole 150k
 * vocabulary instead would cost tens of milliseconds per token when the distribution is flat. */
static size_t top_p_select(struct sample_cand *c, size_t n, double p)
{
    size_t lo = 0, hi = n; /* c[0, lo) is kept; the boundary lies in [lo, hi) */
    double need = p;
    while (lo < hi) {
        struct sample_cand piv = c[lo + (hi - lo) / 2];
        size_t i = lo;
        double mass = 0;
        for (size_t j = lo; j < hi; j++) {
            if (ranks_before(&c[j], &piv)) {
                swap_cand(&c[i], &c[j]);
                mass += c[i].p;
                i++;
            }
        }
        if (mass >= need) { /* the boundary is among those ranking before the pivot */
            hi = i;
            continue;
        }
        /* Keep them all, then the pivot, which ranks first among the rest. */
        need -= mass;
        size_t k = i;
        while (k < hi && c[k].id != piv.id)
            k++;
        swap_cand(&c[i], &c[k]);
        need -= c[i].p;
        lo = i + 1;
        if (need <= 0)
            break;
    }
    return lo > 0 ? lo : 1;
}

void sample_top_p(struct sample_list *l, float p)
{
    if (p >= 1.0f || l->n <= 1)
        return;
    if (!l->sorted) {
        l->n = top_p_select(l->c, l->n, p);
        if (l->n <= 1024) /* the usual case: cheap, and a sorted list draws in rank order */
            sort_list(l);
        renormalise(l);
        return;
    }
    double cum = 0;
    size_t keep = l->n;
    for (size_t i = 0; i < l->n; i++) {
        cum += l->c[i].p;
        if (cum >= p) {
            keep = i + 1;
            break;
        }
    }
    l->n = keep;
    renormalise(l);
}

void sample_min_p(struct sample_list *l, float p)
{
    if (p <= 0.0f || l->n <= 1)
        return;
    float mx = 0;
    for (size_t i = 0; i < l->n; i++)
        mx = fmaxf(mx, l->c[i].p);
    float thr = p * mx;
    size_t j = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->c[i].p >= thr)
            l->c[j++] = l->c[i]; /* a stable filter keeps a sorted list sorted */
    l->n = j;
    renormalise(l);
}

int32_t sample_draw(const struct sample_list *l, struct sample_rng *r)
{
    if (l->n == 0)
        return -1;
    double sum = 0;
    for (size_t i = 0; i < l->n; i++)
        sum += l->c[i].p;
    double u = sample_rng_uniform(r) * sum, cum = 0;
    for (size_t i = 0; i < l->n; i++) {
        cum += l->c[i].p;
        if (u < cum)
            return l->c[i].id;
    }
    /* Rounding left u at the very top: the last candidate with any mass. */
    for (size_t i = l->n; i-- > 0;)
        if (l->c[i].p > 0)
            return l->c[i].id;
    return l->c[0].id;
}

/* ---- the chain (include/brasa.h) ---- */

struct brasa_sampler {
    struct brasa_sampler_params p;
    int n_vocab;
    struct sample_cand *cand; /* [n_vocab] */
    int32_t *counts;          /* [n_vocab]: occurrences in the penalty window */
    int32_t *ring;            /* [penalty_last_n]: the window, oldest at ring_head */
    int ring_len, ring_head;
    int n_distinct;           /* ids with counts > 0 */
    struct sample_rng rng;
};

void brasa_sampler_defaults(struct brasa_sampler_params *p)
{
    *p = (struct brasa_sampler_params){
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .penalty_last_n = 64,
        .seed = 0x5eed,
    };
}

static bool penalties_on(const struct brasa_sampler_params *p)
{
    return p->penalty_last_n > 0 &&
           (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
}

brasa_status brasa_sampler_new(const struct brasa_sampler_params *p, int n_vocab,
                               struct brasa_sampler **out, struct brasa_err *err)
{
    *out = NULL;
    if (n_vocab <= 0 || n_vocab > (1 << 24))
        return brasa_fail(err, BRASA_EINVAL, "sampler: vocabulary size %d out of range", n_vocab);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return brasa_fail(err, BRASA_EINVAL, "sampler: repeat penalty must be > 0 (got %g; 1 is off)",
                          (double)p->repeat_penalty);
    if (!isfinite(p->temperature) || !isfinite(p->top_p) || !isfinite(p->min_p) ||
        !isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return brasa_fail(err, BRASA_EINVAL, "sampler: parameters must be finite numbers");
    if (p->penalty_last_n > (1 << 24))
        return brasa_fail(err, BRASA_EINVAL, "sampler: penalty window %d too large", p->penalty_last_n);
    struct brasa_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return brasa_fail(err, BRASA_ENOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    if (penalties_on(p)) {
        s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
        s->ring = malloc((size_t)p->penalty_last_n * sizeof *s->ring);
    }
    if (!s->cand || (penalties_on(p) && (!s->counts || !s->ring))) {
        brasa_sampler_free(s);
        return brasa_fail(err, BRASA_ENOMEM, "sampler: out of memory for %d candidates", n_vocab);
    }
    sample_rng_seed(&s->rng, p->seed);
    *out = s;
    return BRASA_OK;
}

void brasa_sampler_free(struct brasa_sampler *s)
{
    if (!s)
        return;
    free(s->cand);
    free(s->counts);
    free(s->ring);
    free(s);
}

void brasa_sampler_reset(struct brasa_sampler *s)
{
    if (s->counts)
        memset(s->counts, 0, (size_t)s->n_vocab * sizeof *s->counts);
    s->ring_len = s->ring_head = s->n_distinct = 0;
    sample_rng_seed(&s->rng, s->p.seed);
}

void brasa_sampler_accept(struct brasa_sampler *s, int32_t id)
{
    if (!s->counts || id < 0 || id >= s->n_vocab)
        return;
    int cap = s->p.penalty_last_n;
    if (s->ring_len == cap) { /* the window is full: the oldest token leaves it */
        s->n_distinct -= --s->counts[s->ring[s->ring_head]] == 0;
        s->ring[s->ring_head] = id;
        s->ring_head = (s->ring_head + 1) % cap;
    } else {
        s->ring[(s->ring_head + s->ring_len) % cap] = id;
        s->ring_len++;
    }
    s->n_distinct += s->counts[id]++ == 0;
}

int sampler_candidates(const struct brasa_sampler *s)
{
    const struct brasa_sampler_params *p = &s->p;
    int pen = 0; /* distinct tokens in the window: those the penalties move */
    if (s->counts) {
        if (p->repeat_penalty < 1.0f || p->presence_penalty < 0.0f || p->frequency_penalty < 0.0f)
            return 0; /* a penalty that raises a logit can lift any token into the top */
        pen = s->n_distinct;
    }
    long k = p->temperature <= 0.0f ? 1 : p->top_k > 0 ? p->top_k : 0;
    if (k == 0 || k + pen > SAMPLE_MAX_CAND || k + pen > s->n_vocab)
        return 0;
    return (int)(k + pen);
}

bool sampler_is_greedy(const struct brasa_sampler *s)
{
    return s->p.temperature <= 0.0f && !s->counts;
}

/* The chain from the penalties on, over the candidate list l */
static int32_t run_chain(struct brasa_sampler *s, struct sample_list *l)
{
    const struct brasa_sampler_params *p = &s->p;
    sample_penalties(l, s->counts, p->repeat_penalty, p->presence_penalty, p->frequency_penalty);
    if (p->temperature <= 0.0f)
        return sample_greedy(l);
    sample_top_k(l, p->top_k);
    sample_temperature(l, p->temperature);
    sample_softmax(l);
    sample_top_p(l, p->top_p);
    sample_min_p(l, p->min_p);
    return sample_draw(l, &s->rng);
}

int32_t sampler_sample_top(struct brasa_sampler *s, const int32_t *ids, const float *logits,
                           int n)
{
    struct sample_list l = {.c = s->cand, .n = (size_t)n, .sorted = false};
    for (int i = 0; i < n; i++)
        s->cand[i] = cand_of(ids[i], logits[i]);
    return run_chain(s, &l);
}

int32_t brasa_sampler_sample(struct brasa_sampler *s, const float *logits)
{
    const struct brasa_sampler_params *p = &s->p;
    if (p->temperature <= 0.0f && !s->counts) { /* plain greedy: no candidate list needed */
        int32_t best = 0;
        float bx = isnan(logits[0]) ? -INFINITY : logits[0];
        for (int32_t i = 1; i < s->n_vocab; i++)
            if (logits[i] > bx) { /* NaN compares false; ties keep the lower id */
                bx = logits[i];
                best = i;
            }
        return best;
    }
    struct sample_list l;
    sample_list_init(&l, s->cand, logits, (size_t)s->n_vocab);
    return run_chain(s, &l);
}
