#include "core/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sched.h>

/* Workers spin briefly on a generation counter (decode steps come in quick bursts),
 * then sleep on a condition variable. */
struct pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;     /* bumped for every job */
    atomic_int pending;  /* workers still running the current job */
    atomic_int stop;
    pool_fn fn;
    void *arg;
};

struct worker_arg {
    struct pool *p;
    int ith;
};

static void *worker(void *v)
{
    struct worker_arg *wa = v;
    struct pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < 20000) {
                sched_yield();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = g;
        p->fn(p->arg, ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

brasa_status pool_new(struct pool **out, int n_threads, struct brasa_err *err)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return brasa_fail(err, BRASA_EINVAL, "thread count %d is outside 1..1024", n_threads);
    struct pool *p = calloc(1, sizeof *p);
    if (!p)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for thread pool");
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for thread pool");
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa) { /* filled before the thread starts: it reads wa at once */
            wa->p = p;
            wa->ith = i;
        }
        if (!wa || pthread_create(&p->threads[i], NULL, worker, wa) != 0) {
            free(wa);
            p->n = i;
            pool_free(p);
            return brasa_fail(err, BRASA_ENOMEM, "cannot start thread %d", i);
        }
    }
    *out = p;
    return BRASA_OK;
}

void pool_free(struct pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}

int pool_size(const struct pool *p) { return p ? p->n : 1; }

void pool_run(struct pool *p, pool_fn fn, void *arg)
{
    if (!p || p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
        sched_yield();
}
