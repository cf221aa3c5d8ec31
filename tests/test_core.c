/* Core utilities: errors, the thread pool, platform helpers. */
#include "test.h"

#include <stdatomic.h>

#include "core/platform.h"
#include "core/pool.h"
#include "core/status.h"

TEST(status_messages)
{
    struct brasa_err e;
    CHECK(brasa_fail(&e, BRASA_EFORMAT, "bad %s at %d", "magic", 4) == BRASA_EFORMAT);
    CHECK(strcmp(e.msg, "bad magic at 4") == 0);
    brasa_wrap(&e, BRASA_EFORMAT, "file '%s'", "x.gguf");
    CHECKF(strcmp(e.msg, "file 'x.gguf': bad magic at 4") == 0, "got '%s'", e.msg);
    CHECK(brasa_fail(NULL, BRASA_EIO, "no sink") == BRASA_EIO);
}

struct sum_job {
    atomic_long total;
    long n;
};

static void sum_fn(void *arg, int ith, int nth)
{
    struct sum_job *j = arg;
    long b, e, s = 0;
    pool_range(j->n, ith, nth, &b, &e);
    for (long i = b; i < e; i++)
        s += i;
    atomic_fetch_add(&j->total, s);
}

TEST(pool_covers_range_exactly)
{
    for (int nt = 1; nt <= 5; nt++) {
        struct pool *p;
        struct brasa_err e;
        REQUIRE(pool_new(&p, nt, &e) == BRASA_OK);
        for (int rep = 0; rep < 200; rep++) {
            struct sum_job j = {.n = 1000 + rep};
            atomic_init(&j.total, 0);
            pool_run(p, sum_fn, &j);
            CHECK(atomic_load(&j.total) == j.n * (j.n - 1) / 2);
        }
        pool_free(p);
    }
    struct brasa_err e;
    struct pool *p;
    CHECK(pool_new(&p, 0, &e) == BRASA_EINVAL);
}

TEST(map_missing_file_is_an_error)
{
    struct plat_map m;
    struct brasa_err e;
    CHECK(plat_map_file(&m, "/nonexistent/brasa.gguf", &e) == BRASA_EIO);
    CHECK(strstr(e.msg, "/nonexistent/brasa.gguf") != NULL);
}

TEST_MAIN(T(status_messages), T(pool_covers_range_exactly), T(map_missing_file_is_an_error))
