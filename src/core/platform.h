/* Everything that differs between operating systems lives behind this header:
 * file mapping, dynamic loading, clocks, CPU count, terminal checks, paths, the console.
 * platform.c holds the POSIX half (and what is portable), platform_win32.c the Windows half.
 * Threads are POSIX threads everywhere: on Windows, mingw-w64's winpthreads (linked
 * statically) maps them onto Win32 threads, SRW locks and condition variables.
 * Paths are UTF-8 on every system; on Windows they are converted to UTF-16 here. */
#ifndef BRASA_PLATFORM_H
#define BRASA_PLATFORM_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include "core/status.h"

/* A read-only mapping of a whole file. */
struct plat_map {
    const void *data;
    size_t size;
    void *handle_; /* platform-specific */
};
brasa_status plat_map_file(struct plat_map *m, const char *path, struct brasa_err *err);
/* Moves a mapping's bytes into anonymous memory in 2 MiB pages at the same address (every
 * pointer into it stays valid; still read-only): a processor streams it with far fewer TLB
 * misses than 4 KiB pages of the file cache (CPU decode 1.5x as fast, BENCHMARKS.md). Only
 * where the system has the memory to spare: BRASA_ENOMEM when MemAvailable, or what the
 * process's memory cgroup (v1 or v2) still allows, is less than the size and a margin;
 * BRASA_EUNSUPPORTED off Linux; the mapping is as it was after any
 * error. */
brasa_status plat_map_to_memory(struct plat_map *m, struct brasa_err *err);
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
int plat_pid(void);

/* Memory aligned to `align` (a power of two, at least sizeof(void *)); NULL when out of memory.
 * Free it with plat_aligned_free: on Windows it cannot go to free(). */
void *plat_aligned_alloc(size_t align, size_t size);
void plat_aligned_free(void *p);

/* fopen with a UTF-8 path (plain fopen on POSIX). */
FILE *plat_fopen(const char *path, const char *mode);
/* Called first in main(). On Windows: argv becomes UTF-8 (from the wide command line), the
 * console reads and prints UTF-8 (code page 65001), and stdout/stderr write '\n' as is (no
 * text-mode "\r\n"), as on POSIX. Nothing to do on POSIX. */
void plat_main_init(int *argc, char ***argv);

#ifdef _WIN32
#define PLAT_DIR_SEP '\\'
#define PLAT_DLL_SUFFIX ".dll"
#else
#define PLAT_DIR_SEP '/'
#define PLAT_DLL_SUFFIX ".so"
#endif
/* Creates a directory and its parents (like mkdir -p); BRASA_OK if it exists already. */
brasa_status plat_mkdirs(const char *path, struct brasa_err *err);
/* The per-user cache folder for brasa: $BRASA_CACHE, else $XDG_CACHE_HOME/brasa or
 * $HOME/.cache/brasa (POSIX), %LOCALAPPDATA%\brasa (Windows). Not created here. */
brasa_status plat_cache_dir(char *buf, size_t cap, struct brasa_err *err);

#endif
