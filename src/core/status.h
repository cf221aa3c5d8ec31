/* Errors are values: every fallible function returns a brasa_status and, on failure,
 * writes a message the user can act on into a struct brasa_err. Nothing aborts on bad input. */
#ifndef BRASA_STATUS_H
#define BRASA_STATUS_H
#include <stdarg.h>

typedef enum brasa_status {
    BRASA_OK = 0,
    BRASA_EINVAL,      /* bad argument or option */
    BRASA_EIO,         /* open/read/write/mmap failed */
    BRASA_ENOMEM,      /* allocation failed or over a budget */
    BRASA_EFORMAT,     /* malformed file (GGUF, JSON, ...) */
    BRASA_EUNSUPPORTED,/* valid but not supported (unknown arch, tensor type, ...) */
    BRASA_ENOTFOUND,   /* missing key, tensor, file */
    BRASA_EDEVICE,     /* GPU driver / compiler error */
    BRASA_ETIMEOUT,    /* watchdog expired */
    BRASA_ECANCELLED,  /* stopped by the caller */
} brasa_status;

#define BRASA_ERR_MAX 512
struct brasa_err {
    char msg[BRASA_ERR_MAX];
};

/* mingw-w64 checks plain "printf" formats against msvcrt's printf, which lacks %zu and %lld;
 * Windows builds use mingw's C99 printf (__USE_MINGW_ANSI_STDIO), so check against that. */
#ifdef __MINGW32__
#define BRASA_PRINTF gnu_printf
#else
#define BRASA_PRINTF printf
#endif

/* Formats the message into err (if non-NULL) and returns st. */
brasa_status brasa_fail(struct brasa_err *err, brasa_status st, const char *fmt, ...)
    __attribute__((format(BRASA_PRINTF, 3, 4)));
/* Prepends "prefix: " to an existing message (adds context while unwinding). */
brasa_status brasa_wrap(struct brasa_err *err, brasa_status st, const char *fmt, ...)
    __attribute__((format(BRASA_PRINTF, 3, 4)));
const char *brasa_status_name(brasa_status st);

#endif
