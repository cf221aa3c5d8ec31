#include "core/platform.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return brasa_fail(err, BRASA_EIO, "cannot map '%s': %s", path, strerror(e));
    m->data = p;
    m->handle_ = p;
    return BRASA_OK;
}

void plat_unmap(struct plat_map *m)
{
    if (m->handle_)
        munmap(m->handle_, m->size);
    memset(m, 0, sizeof *m);
}

brasa_status plat_read_file(const char *path, size_t max_size, char **data, size_t *size,
                            struct brasa_err *err)
{
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return brasa_fail(err, BRASA_EIO, "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return brasa_fail(err, BRASA_ENOMEM, "out of memory reading '%s'", path);
    }
    for (;;) {
        if (n == cap) {
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
