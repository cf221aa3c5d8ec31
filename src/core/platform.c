/* platform.c: what is portable, and the POSIX half of platform.h (platform_win32.c holds
 * the Windows half). */
#include "core/platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

brasa_status plat_read_file(const char *path, size_t max_size, char **data, size_t *size,
                            struct brasa_err *err)
{
    *data = NULL;
    *size = 0;
    FILE *f = plat_fopen(path, "rb");
    if (!f)
        return brasa_fail(err, BRASA_EIO, "cannot open '%s': %s", path, strerror(errno));
    size_t cap = max_size < ((size_t)1 << 16) ? max_size : (size_t)1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return brasa_fail(err, BRASA_ENOMEM, "out of memory reading '%s'", path);
    }
    for (;;) {
        if (n == cap) {
            /* full at the limit: fine if the file ends exactly here */
            if (cap >= max_size && fgetc(f) == EOF)
                break;
            if (cap >= max_size) {
                free(buf);
                fclose(f);
                return brasa_fail(err, BRASA_ENOMEM, "'%s' is larger than the %zu-byte limit",
                                  path, max_size);
            }
            cap = cap * 2 > max_size ? max_size : cap * 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return brasa_fail(err, BRASA_ENOMEM, "out of memory reading '%s'", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return brasa_fail(err, BRASA_EIO, "error reading '%s'", path);
    }
    buf[n] = 0;
    *data = buf;
    *size = n;
    return BRASA_OK;
}

#ifndef _WIN32
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HUGE_PAGE ((size_t)2 << 20)
/* A mapping's length: whole pages. */
static size_t map_len(size_t size)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (size + pg - 1) / pg * pg;
}

/* len bytes of anonymous memory (prot) at a 2 MiB boundary, or MAP_FAILED. */
static char *map_aligned(size_t len, int prot)
{
    char *r = mmap(NULL, len + HUGE_PAGE, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return r;
    char *at = (char *)(((uintptr_t)r + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (at > r)
        munmap(r, (size_t)(at - r));
    munmap(at + len, (size_t)(r + HUGE_PAGE - at));
    return at;
}

/* buf = base + sub, or an error when it does not fit. */
static brasa_status cache_from(char *buf, size_t cap, const char *base, const char *sub,
                               struct brasa_err *err)
{
    int n = snprintf(buf, cap, "%s%s", base, sub);
    if (n < 0 || (size_t)n >= cap)
        return brasa_fail(err, BRASA_EINVAL, "the cache folder path '%s%s' is too long", base, sub);
    return BRASA_OK;
}

brasa_status plat_map_file(struct plat_map *m, const char *path, struct brasa_err *err)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return brasa_fail(err, BRASA_EIO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return brasa_fail(err, BRASA_EIO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return brasa_fail(err, BRASA_EIO, "'%s' is not a regular file", path);
    }
    m->size = (size_t)st.st_size;
    if (m->size == 0) {
        close(fd);
        m->data = "";
        return BRASA_OK;
    }
    /* at a 2 MiB boundary, so that plat_map_to_memory's huge pages can take its place */
    void *p = MAP_FAILED;
    size_t len = map_len(m->size);
    char *at = map_aligned(len, PROT_NONE);
    if (at != MAP_FAILED && (p = mmap(at, m->size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0)) == MAP_FAILED)
        munmap(at, len);
    if (p == MAP_FAILED)
        p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return brasa_fail(err, BRASA_EIO, "cannot map '%s': %s", path, strerror(e));
    m->data = p;
    m->handle_ = p;
    return BRASA_OK;
}

#if defined(__linux__)
/* MemAvailable of /proc/meminfo in bytes, 0 where unknown. */
static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* A number from a cgroup file: UINT64_MAX for "max", absent or unreadable. */
static uint64_t cg_read(const char *dir, const char *name)
{
    char path[4200], buf[64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return UINT64_MAX;
    unsigned long long v = 0;
    bool ok = fgets(buf, sizeof buf, f) && sscanf(buf, "%llu", &v) == 1;
    fclose(f);
    return ok ? (uint64_t)v : UINT64_MAX;
}

/* One field of a cgroup's memory.stat ("file" in v2, "total_cache" in v1); 0 when absent. */
static uint64_t cg_stat(const char *dir, const char *field)
{
    char path[4200], line[256], key[64];
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long long v = 0, found = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63s %llu", key, &v) == 2 && !strcmp(key, field)) {
            found = v;
            break;
        }
    fclose(f);
    return (uint64_t)found;
}

/* What the process's memory cgroup (v2 or v1) still allows, its file cache counted as free;
 * UINT64_MAX where there is no limit. A container's limit is not in MemAvailable. */
static uint64_t cgroup_available(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return UINT64_MAX;
    char line[4096], dir[4200];
    uint64_t avail = UINT64_MAX;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = 0;
        const char *ctrl = c1 + 1, *path = c2 + 1;
        uint64_t limit, used, cache;
        if (!*ctrl && !strcmp(line, "0")) { /* v2 */
            snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", path);
            limit = cg_read(dir, "memory.max");
            used = cg_read(dir, "memory.current");
            cache = cg_stat(dir, "file");
        } else if (strstr(ctrl, "memory")) { /* v1 */
            snprintf(dir, sizeof dir, "/sys/fs/cgroup/memory%s", path);
            limit = cg_read(dir, "memory.limit_in_bytes");
            used = cg_read(dir, "memory.usage_in_bytes");
            cache = cg_stat(dir, "total_cache");
        } else {
            continue;
        }
        if (limit >= ((uint64_t)1 << 62) || used == UINT64_MAX)
            continue;
        uint64_t held = used > cache ? used - cache : 0, left = limit > held ? limit - held : 0;
        avail = left < avail ? left : avail;
    }
    fclose(f);
    return avail;
}
#endif

brasa_status plat_map_to_memory(struct plat_map *m, struct brasa_err *err)
{
#if defined(__linux__)
    if (!m->handle_ || !m->size)
        return BRASA_OK;
    size_t len = map_len(m->size);
    uint64_t avail = mem_available(), cg = cgroup_available();
    avail = cg < avail ? cg : avail;
    uint64_t margin = (uint64_t)m->size / 8 + ((uint64_t)1 << 30);
    if (avail < (uint64_t)m->size + margin)
        return brasa_fail(err, BRASA_ENOMEM, "%.1f GiB available, %.1f GiB asked for the weights "
                          "and a margin", (double)avail / (1 << 30), (double)(m->size + margin) / (1 << 30));
    if ((uintptr_t)m->handle_ % HUGE_PAGE)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "the mapping is not at a 2 MiB boundary");
    char *at = map_aligned(len, PROT_READ | PROT_WRITE);
    if (at == MAP_FAILED)
        return brasa_fail(err, BRASA_ENOMEM, "cannot allocate %zu bytes: %s", len, strerror(errno));
    madvise(at, len, MADV_HUGEPAGE); /* advice: where the system refuses, plain pages */
    madvise(m->handle_, len, 22 /* MADV_POPULATE_READ (5.14): the file's pages in one call */);
    memcpy(at, m->handle_, m->size);
    if (mprotect(at, len, PROT_READ) != 0 ||
        mremap(at, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, m->handle_) == MAP_FAILED) {
        int e = errno;
        munmap(at, len);
        return brasa_fail(err, BRASA_EIO, "cannot move the weights into memory: %s", strerror(e));
    }
    return BRASA_OK;
#else
    (void)m;
    return brasa_fail(err, BRASA_EUNSUPPORTED, "weights in memory: Linux only");
#endif
}

void plat_unmap(struct plat_map *m)
{
    if (m->handle_)
        munmap(m->handle_, m->size);
    memset(m, 0, sizeof *m);
}

void *plat_dlopen(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
void *plat_dlsym(void *lib, const char *sym) { return dlsym(lib, sym); }
void plat_dlclose(void *lib)
{
    if (lib)
        dlclose(lib);
}
const char *plat_dlerror(void)
{
    const char *e = dlerror();
    return e ? e : "unknown error";
}

double plat_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int plat_ncpu(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

bool plat_isatty(int fd) { return isatty(fd) == 1; }

size_t plat_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long pages = 0, rss = 0;
    int ok = fscanf(f, "%lu %lu", &pages, &rss);
    fclose(f);
    if (ok != 2)
        return 0;
    return (size_t)rss * (size_t)sysconf(_SC_PAGESIZE);
}

int plat_pid(void) { return (int)getpid(); }

void *plat_aligned_alloc(size_t align, size_t size)
{
    void *p = NULL;
    return posix_memalign(&p, align, size ? size : 1) == 0 ? p : NULL;
}

void plat_aligned_free(void *p) { free(p); }

FILE *plat_fopen(const char *path, const char *mode) { return fopen(path, mode); }

void plat_main_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
}

brasa_status plat_mkdirs(const char *path, struct brasa_err *err)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return brasa_fail(err, BRASA_EINVAL, "bad folder path '%s'", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return brasa_fail(err, BRASA_EIO, "cannot create folder '%s': %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return brasa_fail(err, BRASA_EIO, "'%s' exists and is not a folder", path);
    return BRASA_OK;
}

brasa_status plat_cache_dir(char *buf, size_t cap, struct brasa_err *err)
{
    const char *e = getenv("BRASA_CACHE");
    if (e && *e)
        return cache_from(buf, cap, e, "", err);
    if ((e = getenv("XDG_CACHE_HOME")) && *e)
        return cache_from(buf, cap, e, "/brasa", err);
    if ((e = getenv("HOME")) && *e)
        return cache_from(buf, cap, e, "/.cache/brasa", err);
    return brasa_fail(err, BRASA_EINVAL, "no cache folder: set BRASA_CACHE (or HOME)");
}

#endif /* !_WIN32 */
