/* kcache: compiled-kernel cache on disk. */
#include "gpu/kcache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t kcache_hash(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    if (h == 0)
        h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int kcache_dir(char *dir, size_t cap)
{
    const char *e = getenv("BRASA_CACHE");
    if (e && *e)
        return snprintf(dir, cap, "%s", e) < (int)cap;
    const char *home = getenv("HOME");
    if (!home || !*home)
        return 0;
    return snprintf(dir, cap, "%s/.cache/brasa", home) < (int)cap;
}

static void mkdirs(const char *dir)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    mkdir(tmp, 0755);
}

void *kcache_get(const char *dir, uint64_t key, size_t *size)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%016llx.cubin", dir, (unsigned long long)key);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    void *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n < (1L << 30) &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) != NULL &&
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        *size = (size_t)n;
    return buf;
}

/* Writes data to path atomically (a temporary file, then rename); errors are ignored. */
static void put_file(const char *path, const void *data, size_t size)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return;
    int ok = fwrite(data, 1, size, f) == size;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

void kcache_put(const char *dir, uint64_t key, const void *data, size_t size)
{
    mkdirs(dir);
    char path[1200];
    snprintf(path, sizeof path, "%s/%016llx.cubin", dir, (unsigned long long)key);
    put_file(path, data, size);
}

void kcache_keep(const char *dir, const char *tmpl, uint64_t key, const char *src, const void *img,
                 size_t size)
{
    mkdirs(dir);
    char path[1200];
    int n = (int)strlen(tmpl); /* "mvd.cu" -> mvd-<key>.cu */
    n -= n > 3 && !strcmp(tmpl + n - 3, ".cu") ? 3 : 0;
    snprintf(path, sizeof path, "%s/%.*s-%016llx.cu", dir, n, tmpl, (unsigned long long)key);
    put_file(path, src, strlen(src));
    snprintf(path, sizeof path, "%s/%.*s-%016llx.cubin", dir, n, tmpl, (unsigned long long)key);
    put_file(path, img, size);
}
