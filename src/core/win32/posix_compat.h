/* Windows builds only: `make windows` puts src/core/win32 first on the include path and
 * force-includes this header, so that code written against POSIX compiles with mingw-w64
 * unchanged. It covers the few calls mingw-w64 lacks that have a faithful Windows equivalent
 * (implemented in platform_win32.c); new code should call the plat_* functions of
 * core/platform.h instead. dlfcn.h and sys/wait.h beside it do the same for those headers. */
#ifndef BRASA_WIN32_POSIX_COMPAT_H
#define BRASA_WIN32_POSIX_COMPAT_H
#ifdef _WIN32
#include <direct.h>
#include <io.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/* getline(3): reads a line with its '\n' into a growing malloc'd buffer. */
ssize_t plat_getline(char **line, size_t *cap, FILE *f);
/* pread(2)/pwrite(2): positional, safe to call from several threads on one descriptor. */
ssize_t plat_pread(int fd, void *buf, size_t n, long long off);
ssize_t plat_pwrite(int fd, const void *buf, size_t n, long long off);
/* readlink(2): Windows has no /proc; "/proc/self/exe" gives the program's path, the rest
 * fails with ENOSYS. */
ssize_t plat_readlink(const char *path, char *buf, size_t cap);
/* mkdtemp(3): fills in the XXXXXX and creates the folder. */
char *plat_mkdtemp(char *tmpl);

#define getline plat_getline
#define pread plat_pread
#define pwrite plat_pwrite
#define readlink plat_readlink
#define mkdtemp plat_mkdtemp
/* Windows folders have no mode bits. */
#define mkdir(path, mode) _mkdir(path)
#endif
#endif
