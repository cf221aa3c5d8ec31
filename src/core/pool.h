/* A persistent thread pool with fork-join dispatch: pool_run() calls fn(arg, ith, nth)
 * on every thread (the caller is thread 0) and returns when all are done. */
#ifndef BRASA_POOL_H
#define BRASA_POOL_H
#include "core/status.h"

struct pool;
typedef void (*pool_fn)(void *arg, int ith, int nth);

brasa_status pool_new(struct pool **out, int n_threads, struct brasa_err *err);
void pool_free(struct pool *p);
int pool_size(const struct pool *p);
/* Runs fn on all threads. A NULL pool runs fn(arg, 0, 1) on the caller. Not reentrant. */
void pool_run(struct pool *p, pool_fn fn, void *arg);

/* Splits [0, n) into nth nearly equal ranges; returns thread ith's range. */
static inline void pool_range(long n, int ith, int nth, long *begin, long *end)
{
    long per = n / nth, rem = n % nth;
    *begin = ith * per + (ith < rem ? ith : rem);
    *end = *begin + per + (ith < rem ? 1 : 0);
}

#endif
