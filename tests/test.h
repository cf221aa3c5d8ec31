/* A tiny test runner. Each tests/test_*.c defines TEST(name) functions and one
 * TEST_MAIN() listing them; the binary prints "N passed, N failed" last.
 *
 *   TEST(gguf_roundtrip) { CHECK(x == 1); CHECKF(a < b, "a=%d b=%d", a, b); }
 *   TEST_MAIN(gguf_roundtrip, other_test)
 *
 * A test may call SKIP("why") when an optional input (e.g. ../shared) is absent. */
#ifndef BRASA_TEST_H
#define BRASA_TEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct test_state {
    int failed_checks;
    int skipped;
};
extern struct test_state test_cur;

#define TEST(name) static void test_##name(void)

#define CHECKF(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            test_cur.failed_checks++;                                              \
            if (test_cur.failed_checks <= 20) {                                    \
                fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, \
                        #cond);                                                    \
                fprintf(stderr, __VA_ARGS__);                                      \
                fputc('\n', stderr);                                               \
            }                                                                      \
        }                                                                          \
    } while (0)
#define CHECK(cond) CHECKF(cond, "%s", "")
/* Stops the current test after a failed check (for preconditions). */
#define REQUIRE(cond)                 \
    do {                              \
        int f0_ = test_cur.failed_checks; \
        CHECK(cond);                  \
        if (test_cur.failed_checks != f0_) \
            return;                   \
    } while (0)
#define SKIP(why)                                        \
    do {                                                 \
        fprintf(stderr, "  skipped: %s\n", (why));        \
        test_cur.skipped = 1;                            \
        return;                                          \
    } while (0)

struct test_entry {
    const char *name;
    void (*fn)(void);
};
int test_run_all(const char *file, const struct test_entry *tests, int n, int argc, char **argv);

#define TEST_ENTRY_(n) {#n, test_##n},
#define TEST_MAIN(...) TEST_MAIN_IMPL_(__VA_ARGS__)
/* Usage: TEST_MAIN(TESTS(a) TESTS(b) ...) is clumsy in C11; list entries explicitly: */
#define T(n) {#n, test_##n}
#define TEST_MAIN_IMPL_(...)                                                     \
    int main(int argc, char **argv)                                              \
    {                                                                            \
        static const struct test_entry tests_[] = {__VA_ARGS__};                 \
        return test_run_all(__FILE__, tests_, (int)(sizeof tests_ / sizeof tests_[0]), \
                            argc, argv);                                         \
    }

/* Helpers shared by the tests (tests/testutil.c). */
/* Directory of the shared fixtures: $BRASA_SHARED, else "../shared" (tests run from the repo root). */
const char *test_shared_dir(void);
/* The brasa binary under test: $BRASA_BIN (tests/run.sh sets it), else build/brasa. */
const char *test_brasa_bin(void);
/* Joins test_shared_dir() and a relative path into a static buffer (valid until the next call). */
const char *test_shared_path(const char *rel);
int test_file_exists(const char *path);
/* Index of the largest of x[0..n) (the first one on a tie). */
int test_argmax(const float *x, int n);
/* Reads a whole file; returns malloc'd bytes (NUL-terminated) or NULL. */
char *test_read_file(const char *path, size_t *size);
/* A fresh random seed per run (printed so a failure can be replayed with BRASA_TEST_SEED). */
unsigned long long test_seed(void);
/* xorshift random numbers. */
unsigned long long test_rand_u64(unsigned long long *s);
float test_rand_uniform(unsigned long long *s);  /* [-1, 1) */
float test_rand_normal(unsigned long long *s);
/* A model's F32 KV caches and DeltaNet states (zero) in host memory, for mdl_build: *mem holds
 * them all (free it and the cache's arrays with test_cache_free). 0 on success. */
struct mdl;
struct mdl_cache;
int test_cache_new(const struct mdl *m, int n_ctx, struct mdl_cache *c, float **mem);
void test_cache_free(struct mdl_cache *c, float *mem);
#endif
