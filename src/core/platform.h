/* Everything that differs between operating systems lives behind this header:
 * file mapping, dynamic loading, clocks, CPU count, terminal checks. */
#ifndef BRASA_PLATFORM_H
#define BRASA_PLATFORM_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "core/status.h"

/* A read-only mapping of a whole file. */
struct plat_map {
    const void *data;
    size_t size;
    void *handle_; /* platform-specific */
};
brasa_status plat_map_file(struct plat_map *m, const char *path, struct brasa_err *err);
void plat_unmap(struct plat_map *m);

/* Reads a whole file into malloc'd memory (NUL-terminated for convenience). */
brasa_status plat_read_file(const char *path, size_t max_size, char **data, size_t *size,
                            struct brasa_err *err);

void *plat_dlopen(const char *name);          /* NULL if absent */
void *plat_dlsym(void *lib, const char *sym); /* NULL if absent */
void plat_dlclose(void *lib);
const char *plat_dlerror(void);

double plat_now(void);       /* monotonic seconds */
int plat_ncpu(void);         /* online CPUs, >= 1 */
bool plat_isatty(int fd);
size_t plat_rss_bytes(void); /* resident memory of this process, 0 if unknown */

#endif
