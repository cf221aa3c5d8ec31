/* Sampling: turning a row of logits into one token id.
 *
 * brasa_sampler_* (include/brasa.h) chains the steps below in this fixed order:
 *
 *   1. penalties   over the last penalty_last_n accepted tokens (each distinct token once):
 *                  repetition: logit / r if logit > 0, else logit * r;
 *                  then logit -= count * frequency + (count > 0) * presence
 *   2. greedy      if temperature <= 0: argmax (ties: lowest id), done
 *   3. top-k       keep the k largest logits (ties: lowest id first)
 *   4. temperature logit / T
 *   5. softmax     p = exp(logit - max) / sum
 *   6. top-p       keep the smallest prefix (by descending p) whose mass reaches top_p
 *   7. min-p       keep tokens with p >= min_p * max p
 *   8. draw        renormalise, one uniform draw from the seeded generator
 *
 * The steps are exported so that each can be tested alone. They work on a candidate list
 * that starts as every token id with its logit. */
#ifndef BRASA_SAMPLE_H
#define BRASA_SAMPLE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sample_cand {
    int32_t id;
    float logit;
    float p; /* after sample_softmax */
};

struct sample_list {
    struct sample_cand *c; /* n entries (capacity is the vocabulary) */
    size_t n;
    bool sorted; /* descending by logit (ties: lower id first) */
};

/* Seeded generator (xoshiro256**, seeded through splitmix64): same seed, same stream. */
struct sample_rng {
    uint64_t s[4];
};
void sample_rng_seed(struct sample_rng *r, uint64_t seed);
uint64_t sample_rng_u64(struct sample_rng *r);
double sample_rng_uniform(struct sample_rng *r); /* [0, 1) */

/* Fills l with ids 0..n-1 and their logits (NaN becomes -inf). */
void sample_list_init(struct sample_list *l, struct sample_cand *storage, const float *logits, size_t n);

/* counts[id]: how often id occurs among the recent tokens (n_vocab entries). */
void sample_penalties(struct sample_list *l, const int32_t *counts, float repeat, float presence,
                      float frequency);
int32_t sample_greedy(const struct sample_list *l);
void sample_top_k(struct sample_list *l, int k);
void sample_temperature(struct sample_list *l, float t);
void sample_softmax(struct sample_list *l);
void sample_top_p(struct sample_list *l, float p);
void sample_min_p(struct sample_list *l, float p);
int32_t sample_draw(const struct sample_list *l, struct sample_rng *r);

/* Candidates from the device: the sampler above needs only the K best logits (ties: lowest id)
 * when its penalties can only lower a logit; sampler_candidates gives that K (the top-k, or 1
 * for greedy, plus the distinct tokens of the penalty window: a penalised token can fall out of
 * the top but none from below can rise past it), or 0 when it needs every logit (top-k off,
 * penalties that raise, or more than SAMPLE_MAX_CAND). sampler_sample_top runs the same chain
 * on those n candidates and draws the same token as brasa_sampler_sample on the full row. */
#define SAMPLE_MAX_CAND 256
struct brasa_sampler;
int sampler_candidates(const struct brasa_sampler *s);
/* Greedy with no penalties: the token is the first candidate, whatever came before it. */
bool sampler_is_greedy(const struct brasa_sampler *s);
int32_t sampler_sample_top(struct brasa_sampler *s, const int32_t *ids, const float *logits,
                           int n);

#endif
