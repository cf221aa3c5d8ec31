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
#include <stdlib.h>
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
/* memmem(3), a GNU extension. */
void *plat_memmem(const void *hay, size_t hn, const void *needle, size_t nn);
/* popen(3) and system(3) run cmd.exe on Windows. Command lines written for sh (tests mostly)
 * are translated: 'single quotes' become "double quotes" and /dev/null becomes NUL. Pipes
 * into POSIX tools (printf, cmp) still need those tools. */
FILE *plat_popen(const char *cmd, const char *mode);
int plat_system(const char *cmd);
/* setenv(3)/unsetenv(3) through _putenv_s. */
int plat_setenv(const char *name, const char *value, int overwrite);
int plat_unsetenv(const char *name);
/* mkdtemp(3): fills in the XXXXXX and creates the folder. */
char *plat_mkdtemp(char *tmpl);

#define getline plat_getline
#define pread plat_pread
#define pwrite plat_pwrite
#define readlink plat_readlink
#define mkdtemp plat_mkdtemp
#define memmem plat_memmem
#define setenv plat_setenv
#undef popen
#define popen plat_popen
#define system plat_system
#define unsetenv plat_unsetenv
/* Windows folders have no mode bits. */
#define mkdir(path, mode) _mkdir(path)
#endif
#endif
