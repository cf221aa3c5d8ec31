/* core/platform.h on the system at hand (the Windows build runs these under wine): file
 * mapping, whole-file reads with a size limit, folders, the cache folder, aligned memory,
 * dynamic loading errors, the clock, CPU count, and the shared pool's threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "core/pool.h"
#include "test.h"

static const char *tmp_dir(void)
{
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

/* n random bytes, written to path too (NULL if either fails). */
static unsigned char *random_file(const char *path, size_t n, unsigned long long *seed)
{
    unsigned char *buf = malloc(n);
    if (!buf)
        return NULL;
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)test_rand_u64(seed);
    FILE *f = plat_fopen(path, "wb");
    size_t w = f ? fwrite(buf, 1, n, f) : 0;
    if (f)
        fclose(f);
    if (w != n) {
        free(buf);
        return NULL;
    }
    return buf;
}

TEST(map_file_matches_contents)
{
    char path[512];
    snprintf(path, sizeof path, "%s/brasa-test-plat-%d.bin", tmp_dir(), plat_pid());
    unsigned long long seed = test_seed();
    size_t n = 100000 + (size_t)(test_rand_u64(&seed) % 5000);
    unsigned char *buf = random_file(path, n, &seed);
    REQUIRE(buf);
    struct plat_map m;
    struct brasa_err err = {{0}};
    REQUIRE(plat_map_file(&m, path, &err) == BRASA_OK);
    CHECK(m.size == n && memcmp(m.data, buf, n) == 0);
    plat_unmap(&m);
    CHECK(m.data == NULL && m.size == 0);
    char *data = NULL;
    size_t size = 0;
    CHECK(plat_read_file(path, n, &data, &size, &err) == BRASA_OK && size == n &&
          memcmp(data, buf, n) == 0 && data[n] == 0);
    free(data);
    CHECK(plat_read_file(path, n / 2, &data, &size, &err) == BRASA_ENOMEM && !data);
    CHECKF(strstr(err.msg, "limit"), "%s", err.msg);
    CHECK(plat_read_file(path, 1000, &data, &size, &err) == BRASA_ENOMEM && !data);
    remove(path);
    free(buf);
}

/* The bytes moved into memory at the same address: the same contents, still readable. */
TEST(map_to_memory_keeps_address_and_bytes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/brasa-test-plat-mem-%d.bin", tmp_dir(), plat_pid());
    unsigned long long seed = test_seed();
    size_t n = (3u << 20) + 12345; /* over a huge page, not a whole number of pages */
    unsigned char *buf = random_file(path, n, &seed);
    REQUIRE(buf);
    struct plat_map m;
    struct brasa_err err = {{0}};
    REQUIRE(plat_map_file(&m, path, &err) == BRASA_OK);
    const void *at = m.data;
    brasa_status st = plat_map_to_memory(&m, &err);
#if defined(__linux__)
    CHECKF(st == BRASA_OK || st == BRASA_ENOMEM, "%s", err.msg);
#else
    CHECK(st == BRASA_EUNSUPPORTED);
#endif
    /* moved or not, the same bytes at the same address */
    CHECK(m.data == at && m.size == n && memcmp(m.data, buf, n) == 0);
    plat_unmap(&m);
    remove(path);
    free(buf);
}

TEST(map_errors_name_the_file)
{
    struct plat_map m;
    struct brasa_err err = {{0}};
    CHECK(plat_map_file(&m, "no/such/dir/x.gguf", &err) == BRASA_EIO);
    CHECKF(strstr(err.msg, "no/such/dir/x.gguf"), "%s", err.msg);
    /* a folder is not a file */
    CHECK(plat_map_file(&m, tmp_dir(), &err) == BRASA_EIO);
    CHECKF(strstr(err.msg, tmp_dir()), "%s", err.msg);
}

TEST(empty_file_maps_to_empty)
{
    char path[512];
    snprintf(path, sizeof path, "%s/brasa-test-plat-empty-%d", tmp_dir(), plat_pid());
    FILE *f = plat_fopen(path, "wb");
    REQUIRE(f);
    fclose(f);
    struct plat_map m;
    struct brasa_err err = {{0}};
    CHECK(plat_map_file(&m, path, &err) == BRASA_OK && m.size == 0 && m.data);
    plat_unmap(&m);
    remove(path);
}

TEST(mkdirs_and_cache_dir)
{
    char base[512], deep[600], file[700];
    snprintf(base, sizeof base, "%s/brasa-test-plat-dir-%d", tmp_dir(), plat_pid());
    snprintf(deep, sizeof deep, "%s/a/b/c", base);
    struct brasa_err err = {{0}};
    CHECKF(plat_mkdirs(deep, &err) == BRASA_OK, "%s", err.msg);
    CHECKF(plat_mkdirs(deep, &err) == BRASA_OK, "again: %s", err.msg);
    snprintf(file, sizeof file, "%s/f", deep);
    FILE *f = plat_fopen(file, "wb");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    CHECK(plat_mkdirs(file, &err) != BRASA_OK); /* a file is in the way */
    remove(file);
    char cache[1024];
    CHECK(plat_cache_dir(cache, sizeof cache, &err) == BRASA_OK && cache[0]);
    CHECK(plat_cache_dir(cache, 4, &err) == BRASA_EINVAL);
}

TEST(aligned_memory)
{
    for (size_t align = 16; align <= 4096; align *= 4) {
        void *p = plat_aligned_alloc(align, 1000);
        CHECKF(p && ((size_t)p & (align - 1)) == 0, "align %zu", align);
        if (p)
            memset(p, 1, 1000);
        plat_aligned_free(p);
    }
    plat_aligned_free(NULL);
}

TEST(dlopen_missing_library)
{
    void *h = plat_dlopen("libbrasa-no-such-library" PLAT_DLL_SUFFIX);
    CHECK(h == NULL);
    CHECK(plat_dlerror() && *plat_dlerror());
}

static void count_fn(void *arg, int ith, int nth)
{
    (void)nth;
    int *hits = arg;
    hits[ith]++;
}

TEST(clock_cpus_threads)
{
    double t0 = plat_now(), t1 = plat_now();
    CHECK(t1 >= t0 && t0 > 0);
    CHECK(plat_ncpu() >= 1);
    CHECK(plat_pid() > 0);
    struct pool *p;
    struct brasa_err err = {{0}};
    REQUIRE(pool_new(&p, 4, &err) == BRASA_OK);
    int hits[4] = {0};
    for (int r = 0; r < 100; r++)
        pool_run(p, count_fn, hits);
    for (int i = 0; i < 4; i++)
        CHECKF(hits[i] == 100, "thread %d ran %d times", i, hits[i]);
    pool_free(p);
}

TEST_MAIN(T(map_file_matches_contents), T(map_to_memory_keeps_address_and_bytes),
          T(map_errors_name_the_file), T(empty_file_maps_to_empty), T(mkdirs_and_cache_dir), T(aligned_memory), T(dlopen_missing_library),
          T(clock_cpus_threads))
