#include "core/status.h"
#include "core/embed.h"

#include <stdio.h>
#include <string.h>

brasa_status brasa_fail(struct brasa_err *err, brasa_status st, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

brasa_status brasa_wrap(struct brasa_err *err, brasa_status st, const char *fmt, ...)
{
    if (err) {
        char old[BRASA_ERR_MAX];
        memcpy(old, err->msg, sizeof old);
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n + 2 < sizeof err->msg)
            snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %.*s",
                     (int)(sizeof err->msg - (size_t)n - 3), old);
    }
    return st;
}

const char *brasa_status_name(brasa_status st)
{
    switch (st) {
    case BRASA_OK: return "ok";
    case BRASA_EINVAL: return "invalid argument";
    case BRASA_EIO: return "i/o error";
    case BRASA_ENOMEM: return "out of memory";
    case BRASA_EFORMAT: return "malformed input";
    case BRASA_EUNSUPPORTED: return "unsupported";
    case BRASA_ENOTFOUND: return "not found";
    case BRASA_EDEVICE: return "device error";
    case BRASA_ETIMEOUT: return "timed out";
    case BRASA_ECANCELLED: return "cancelled";
    }
    return "unknown status";
}

const struct embedded_file *embedded_find(const char *suffix)
{
    size_t ls = strlen(suffix);
    for (const struct embedded_file *f = embedded_files; f->path; f++) {
        size_t lp = strlen(f->path);
        if (lp >= ls && strcmp(f->path + lp - ls, suffix) == 0)
            return f;
    }
    return NULL;
}
