/* platform_win32.c: the Windows half of platform.h (platform.c holds the POSIX half).
 * Paths arrive as UTF-8 and go to the wide-character (UTF-16) Win32 calls, so file names
 * outside the ANSI code page work. Errors carry the system's own message text. */
#ifdef _WIN32
#include "core/platform.h"
#include "core/win32/posix_compat.h"

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

/* This file implements the shims: here the names mean the C runtime's own functions. */
#undef system
#undef popen

/* UTF-8 -> freshly malloc'd UTF-16, NULL on a bad string or no memory. */
static wchar_t *widen(const char *s)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    if (n <= 0)
        return NULL;
    wchar_t *w = malloc((size_t)n * sizeof *w);
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        free(w);
        return NULL;
    }
    return w;
}

/* The text of a GetLastError() code, without the trailing line break. */
static const char *sys_msg(DWORD code, char *buf, size_t cap)
{
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, code,
                             0, buf, (DWORD)cap, NULL);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
                     buf[n - 1] == '.'))
        buf[--n] = 0;
    if (n == 0)
        snprintf(buf, cap, "system error %lu", (unsigned long)code);
    return buf;
}

FILE *plat_fopen(const char *path, const char *mode)
{
    wchar_t *wp = widen(path), *wm = widen(mode);
    FILE *f = NULL;
    if (wp && wm)
        f = _wfopen(wp, wm);
    else
        errno = EINVAL;
    free(wp);
    free(wm);
    return f;
}

brasa_status plat_map_file(struct plat_map *m, const char *path, struct brasa_err *err)
{
    memset(m, 0, sizeof *m);
    char msg[256];
    wchar_t *wp = widen(path);
    if (!wp)
        return brasa_fail(err, BRASA_EINVAL, "'%s' is not a valid UTF-8 path", path);
    HANDLE fh = CreateFileW(wp, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING,
                            FILE_ATTRIBUTE_NORMAL, NULL);
    free(wp);
    if (fh == INVALID_HANDLE_VALUE)
        return brasa_fail(err, BRASA_EIO, "cannot open '%s': %s", path,
                          sys_msg(GetLastError(), msg, sizeof msg));
    BY_HANDLE_FILE_INFORMATION info;
    if (!GetFileInformationByHandle(fh, &info) || GetFileType(fh) != FILE_TYPE_DISK ||
        (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)) {
        CloseHandle(fh);
        return brasa_fail(err, BRASA_EIO, "'%s' is not a regular file", path);
    }
    unsigned long long size = ((unsigned long long)info.nFileSizeHigh << 32) | info.nFileSizeLow;
    if (size > (size_t)-1) {
        CloseHandle(fh);
        return brasa_fail(err, BRASA_EIO, "'%s' is too large to map", path);
    }
    m->size = (size_t)size;
    if (m->size == 0) {
        CloseHandle(fh);
        m->data = "";
        return BRASA_OK;
    }
    /* The view keeps the mapping object alive: both handles can close at once. */
    HANDLE mh = CreateFileMappingW(fh, NULL, PAGE_READONLY, 0, 0, NULL);
    DWORD e = GetLastError();
    CloseHandle(fh);
    if (!mh)
        return brasa_fail(err, BRASA_EIO, "cannot map '%s': %s", path, sys_msg(e, msg, sizeof msg));
    void *p = MapViewOfFile(mh, FILE_MAP_READ, 0, 0, 0);
    e = GetLastError();
    CloseHandle(mh);
    if (!p)
        return brasa_fail(err, BRASA_EIO, "cannot map '%s': %s", path, sys_msg(e, msg, sizeof msg));
    m->data = p;
    m->handle_ = p;
    return BRASA_OK;
}

brasa_status plat_map_to_memory(struct plat_map *m, struct brasa_err *err)
{
    (void)m;
    return brasa_fail(err, BRASA_EUNSUPPORTED, "weights in memory: Linux only");
}

void plat_unmap(struct plat_map *m)
{
    if (m->handle_)
        UnmapViewOfFile(m->handle_);
    memset(m, 0, sizeof *m);
}

/* dlerror() keeps its message per thread; so does this. */
static _Thread_local char dl_msg[320];

void *plat_dlopen(const char *name)
{
    wchar_t *w = widen(name);
    if (!w) {
        snprintf(dl_msg, sizeof dl_msg, "'%s' is not a valid UTF-8 name", name);
        return NULL;
    }
    /* No error dialog box when a DLL or one of its dependencies is missing. */
    UINT old = SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOOPENFILEERRORBOX);
    HMODULE h = LoadLibraryExW(w, NULL, 0);
    DWORD e = GetLastError();
    SetErrorMode(old);
    free(w);
    if (!h) {
        char msg[256];
        snprintf(dl_msg, sizeof dl_msg, "%s: %s", name, sys_msg(e, msg, sizeof msg));
    }
    return (void *)h;
}

void *plat_dlsym(void *lib, const char *sym)
{
    FARPROC f = GetProcAddress((HMODULE)lib, sym);
    if (!f) {
        snprintf(dl_msg, sizeof dl_msg, "symbol %s not found", sym);
        return NULL;
    }
    /* Function pointer to object pointer, as dlsym does: same size on Windows. */
    void *p;
    memcpy(&p, &f, sizeof p);
    return p;
}

void plat_dlclose(void *lib)
{
    if (lib)
        FreeLibrary((HMODULE)lib);
}

const char *plat_dlerror(void) { return dl_msg[0] ? dl_msg : "unknown error"; }

double plat_now(void)
{
    static LARGE_INTEGER freq; /* constant since boot; a racy first store writes the same value */
    if (freq.QuadPart == 0)
        QueryPerformanceFrequency(&freq);
    LARGE_INTEGER t;
    QueryPerformanceCounter(&t);
    return (double)t.QuadPart / (double)freq.QuadPart;
}

int plat_ncpu(void)
{
    /* All processor groups: machines with more than 64 logical CPUs have several. */
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n < 1 ? 1 : (int)n;
}

bool plat_isatty(int fd)
{
    /* A console, not merely a character device (NUL is one too, and _isatty says yes). */
    intptr_t h = _get_osfhandle(fd);
    DWORD mode;
    return h != -1 && GetConsoleMode((HANDLE)h, &mode) != 0;
}

/* PROCESS_MEMORY_COUNTERS, declared here so that no psapi import library is needed:
 * K32GetProcessMemoryInfo lives in kernel32 since Windows 7. */
struct proc_mem {
    DWORD cb, page_faults;
    SIZE_T peak_ws, ws, quota_peak_paged, quota_paged, quota_peak_nonpaged, quota_nonpaged,
        pagefile, peak_pagefile;
};
WINBOOL WINAPI K32GetProcessMemoryInfo(HANDLE, struct proc_mem *, DWORD);

size_t plat_rss_bytes(void)
{
    struct proc_mem pm = {.cb = sizeof pm};
    if (!K32GetProcessMemoryInfo(GetCurrentProcess(), &pm, sizeof pm))
        return 0;
    return pm.ws;
}

int plat_pid(void) { return (int)GetCurrentProcessId(); }

void *plat_aligned_alloc(size_t align, size_t size) { return _aligned_malloc(size ? size : 1, align); }

void plat_aligned_free(void *p) { _aligned_free(p); }

void plat_main_init(int *argc, char ***argv)
{
    SetConsoleOutputCP(CP_UTF8);
    SetConsoleCP(CP_UTF8);
    _setmode(_fileno(stdout), _O_BINARY);
    _setmode(_fileno(stderr), _O_BINARY);
    /* The C runtime's argv is in the ANSI code page; rebuild it from the UTF-16 command line.
     * The copies live as long as the process. On any failure the old argv stays. */
    int n = 0;
    wchar_t **w = CommandLineToArgvW(GetCommandLineW(), &n);
    if (!w)
        return;
    char **a = calloc((size_t)n + 1, sizeof *a);
    for (int i = 0; a && i < n; i++) {
        int len = WideCharToMultiByte(CP_UTF8, 0, w[i], -1, NULL, 0, NULL, NULL);
        if (len <= 0 || !(a[i] = malloc((size_t)len)) ||
            WideCharToMultiByte(CP_UTF8, 0, w[i], -1, a[i], len, NULL, NULL) != len) {
            for (int k = 0; k <= i; k++)
                free(a[k]);
            free(a);
            a = NULL;
        }
    }
    LocalFree(w);
    if (a) {
        *argc = n;
        *argv = a;
    }
}

brasa_status plat_mkdirs(const char *path, struct brasa_err *err)
{
    char buf[4096], msg[256];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return brasa_fail(err, BRASA_EINVAL, "bad folder path '%s'", path);
    memcpy(buf, path, n + 1);
    /* Skip a drive ("C:\") or the server and share of a UNC path ("\\srv\share\"). */
    size_t i = 1;
    if (n >= 2 && buf[1] == ':')
        i = 3;
    else if (n >= 2 && (buf[0] == '\\' || buf[0] == '/') && (buf[1] == '\\' || buf[1] == '/')) {
        int seps = 0;
        for (i = 2; i < n && seps < 2; i++)
            seps += buf[i] == '\\' || buf[i] == '/';
    }
    for (; i <= n; i++) {
        if (buf[i] != '\\' && buf[i] != '/' && buf[i] != 0)
            continue;
        char c = buf[i];
        buf[i] = 0;
        wchar_t *w = widen(buf);
        if (!w)
            return brasa_fail(err, BRASA_EINVAL, "'%s' is not a valid UTF-8 path", path);
        BOOL ok = CreateDirectoryW(w, NULL);
        DWORD e = GetLastError();
        free(w);
        if (!ok && e != ERROR_ALREADY_EXISTS && e != ERROR_ACCESS_DENIED)
            return brasa_fail(err, BRASA_EIO, "cannot create folder '%s': %s", buf,
                              sys_msg(e, msg, sizeof msg));
        buf[i] = c;
    }
    wchar_t *w = widen(path);
    DWORD a = w ? GetFileAttributesW(w) : INVALID_FILE_ATTRIBUTES;
    free(w);
    if (a == INVALID_FILE_ATTRIBUTES || !(a & FILE_ATTRIBUTE_DIRECTORY))
        return brasa_fail(err, BRASA_EIO, "cannot create folder '%s'", path);
    return BRASA_OK;
}

brasa_status plat_cache_dir(char *buf, size_t cap, struct brasa_err *err)
{
    const char *e = getenv("BRASA_CACHE"), *sub = "";
    if (!e || !*e) {
        e = getenv("LOCALAPPDATA");
        sub = "\\brasa";
    }
    if (!e || !*e)
        return brasa_fail(err, BRASA_EINVAL, "no cache folder: set BRASA_CACHE (or LOCALAPPDATA)");
    int n = snprintf(buf, cap, "%s%s", e, sub);
    if (n < 0 || (size_t)n >= cap)
        return brasa_fail(err, BRASA_EINVAL, "the cache folder path '%s%s' is too long", e, sub);
    return BRASA_OK;
}

/* The POSIX calls of win32/posix_compat.h (see there). */

ssize_t plat_getline(char **line, size_t *cap, FILE *f)
{
    size_t n = 0;
    for (;;) {
        int c = getc(f);
        if (c == EOF) {
            if (n == 0)
                return -1;
            break;
        }
        if (!*line || n + 2 > *cap) {
            size_t nc = *cap < 128 ? 128 : *cap * 2;
            char *nl = realloc(*line, nc);
            if (!nl) {
                errno = ENOMEM;
                return -1;
            }
            *line = nl;
            *cap = nc;
        }
        (*line)[n++] = (char)c;
        if (c == '\n')
            break;
    }
    (*line)[n] = 0;
    return (ssize_t)n;
}

/* One positional transfer through an OVERLAPPED offset: the file position is not shared
 * state, so threads writing different ranges of one file do not race. */
static ssize_t rw_at(int fd, void *buf, size_t n, long long off, bool wr)
{
    intptr_t h = _get_osfhandle(fd);
    if (h == -1 || off < 0) {
        errno = EBADF;
        return -1;
    }
    size_t done = 0;
    while (done < n) {
        DWORD chunk = n - done > 0x40000000u ? 0x40000000u : (DWORD)(n - done), got = 0;
        unsigned long long at = (unsigned long long)off + done;
        OVERLAPPED ov = {0};
        ov.Offset = (DWORD)at;
        ov.OffsetHigh = (DWORD)(at >> 32);
        BOOL ok = wr ? WriteFile((HANDLE)h, (const char *)buf + done, chunk, &got, &ov)
                     : ReadFile((HANDLE)h, (char *)buf + done, chunk, &got, &ov);
        if (!ok) {
            if (!wr && GetLastError() == ERROR_HANDLE_EOF)
                break;
            errno = EIO;
            return done ? (ssize_t)done : -1;
        }
        if (got == 0)
            break;
        done += got;
    }
    return (ssize_t)done;
}

ssize_t plat_pread(int fd, void *buf, size_t n, long long off) { return rw_at(fd, buf, n, off, false); }

ssize_t plat_pwrite(int fd, const void *buf, size_t n, long long off)
{
    return rw_at(fd, (void *)buf, n, off, true);
}

ssize_t plat_readlink(const char *path, char *buf, size_t cap)
{
    if (strcmp(path, "/proc/self/exe") != 0 || cap == 0) {
        errno = ENOSYS;
        return -1;
    }
    wchar_t w[32768];
    DWORD n = GetModuleFileNameW(NULL, w, sizeof w / sizeof w[0]);
    if (n == 0 || n >= sizeof w / sizeof w[0]) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int len = WideCharToMultiByte(CP_UTF8, 0, w, (int)n, buf, (int)(cap > 0x7fffffff ? 0x7fffffff : cap),
                                  NULL, NULL);
    if (len <= 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* readlink does not terminate the string; callers use the length. */
    for (int i = 0; i < len; i++)
        if (buf[i] == '\\')
            buf[i] = '/';
    return len;
}

void *plat_memmem(const void *hay, size_t hn, const void *needle, size_t nn)
{
    if (nn == 0)
        return (void *)hay;
    const unsigned char *h = hay, *n = needle;
    for (size_t i = 0; nn <= hn && i <= hn - nn; i++)
        if (h[i] == n[0] && memcmp(h + i, n, nn) == 0)
            return (void *)(h + i);
    return NULL;
}

/* An sh command line for cmd.exe: 'x' -> "x", /dev/null -> NUL, and the whole line in one more
 * pair of quotes, which cmd /c strips (its rule for lines holding more than two quotes). */
static char *sh_to_cmd(const char *cmd)
{
    size_t n = strlen(cmd);
    char *c = malloc(2 * n + 3), *o = c;
    if (!c)
        return NULL;
    *o++ = '"';
    for (const char *p = cmd; *p; p++) {
        if (*p == '\'') {
            *o++ = '"';
        } else if (strncmp(p, "/dev/null", 9) == 0) {
            memcpy(o, "NUL", 3);
            o += 3;
            p += 8;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '"';
    *o = 0;
    return c;
}

FILE *plat_popen(const char *cmd, const char *mode)
{
    char *c = sh_to_cmd(cmd);
    FILE *f = c ? _popen(c, mode) : NULL;
    free(c);
    return f;
}

int plat_system(const char *cmd)
{
    if (!cmd)
        return system(NULL);
    char *c = sh_to_cmd(cmd);
    int r = c ? system(c) : -1;
    free(c);
    return r;
}

int plat_setenv(const char *name, const char *value, int overwrite)
{
    if (!overwrite && getenv(name))
        return 0;
    return _putenv_s(name, value) == 0 ? 0 : -1;
}

/* An empty value removes the variable. */
int plat_unsetenv(const char *name) { return _putenv_s(name, "") == 0 ? 0 : -1; }

char *plat_mkdtemp(char *tmpl)
{
    if (_mktemp_s(tmpl, strlen(tmpl) + 1) != 0 || _mkdir(tmpl) != 0)
        return NULL;
    return tmpl;
}

#endif /* _WIN32 */
