/* kcache: the on-disk cache of compiled kernels. Key: a 64-bit hash of the rendered source,
 * the compile options, the device and the driver/compiler versions; value: the CUBIN.
 * Directory: $BRASA_CACHE, else ~/.cache/brasa (created on first store). */
#ifndef BRASA_GPU_KCACHE_H
#define BRASA_GPU_KCACHE_H
#include <stddef.h>
#include <stdint.h>

uint64_t kcache_hash(uint64_t h, const void *data, size_t n); /* FNV-1a; start with 0 */
/* Fills dir (cap bytes) with the cache directory; returns 0 if none can be named. */
int kcache_dir(char *dir, size_t cap);
/* Returns a malloc'd copy of the entry and its size, or NULL when absent or unreadable. */
void *kcache_get(const char *dir, uint64_t key, size_t *size);
/* Stores an entry atomically (write to a temporary file, then rename); errors are ignored:
 * a cache that cannot be written only costs compile time. */
void kcache_put(const char *dir, uint64_t key, const void *data, size_t size);
/* For inspection (BRASA_GPU_KEEP=dir): the rendered source and the CUBIN of a module as
 * dir/<template>-<key>.cu and .cubin (the template's name without its .cu), so that a
 * disassembler can be run on exactly what a run loaded, its defines at the top of the source;
 * errors are ignored as kcache_put's. */
void kcache_keep(const char *dir, const char *tmpl, uint64_t key, const char *src, const void *img,
                 size_t size);

#endif
