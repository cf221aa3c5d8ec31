#include "opts.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/platform.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

/* ---- option parsing ---- */

static const struct opt *find_opt(const struct opt *tbl, const char *name, size_t len)
{
    for (const struct opt *o = tbl; o->shrt || o->lng; o++) {
        if (o->shrt && strlen(o->shrt) == len && !strncmp(o->shrt, name, len))
            return o;
        if (o->lng && strlen(o->lng) == len && !strncmp(o->lng, name, len))
            return o;
    }
    return NULL;
}

static const char *opt_name(const struct opt *o) { return o->lng ? o->lng : o->shrt; }

static int set_value(const struct opt *o, const char *v)
{
    char *end;
    errno = 0;
    switch (o->kind) {
    case OPT_STR:
        *(const char **)o->dst = v;
        return 0;
    case OPT_INT: {
        long x = strtol(v, &end, 0);
        if (end == v || *end || errno || x < -2147483647L || x > 2147483647L)
            break;
        *(int *)o->dst = (int)x;
        return 0;
    }
    case OPT_U64: {
        if (*v == '-')
            break;
        unsigned long long x = strtoull(v, &end, 0);
        if (end == v || *end || errno)
            break;
        *(uint64_t *)o->dst = x;
        return 0;
    }
    case OPT_FLOAT: {
        float x = strtof(v, &end);
        if (end == v || *end || errno || !isfinite(x))
            break;
        *(float *)o->dst = x;
        return 0;
    }
    case OPT_FLAG:
        break;
    }
    fprintf(stderr, "%s: bad value '%s' (expected %s)\n", opt_name(o), v,
            o->kind == OPT_FLOAT ? "a number" : o->kind == OPT_STR ? "text" : "an integer");
    return 2;
}

void opts_help(const char *usage, const struct opt *tbl, FILE *f)
{
    fprintf(f, "usage: %s\n\noptions:\n", usage);
    for (const struct opt *o = tbl; o->shrt || o->lng; o++) {
        char names[64];
        snprintf(names, sizeof names, "%s%s%s %s", o->shrt ? o->shrt : "", o->shrt && o->lng ? ", " : "",
                 o->lng ? o->lng : "", o->kind == OPT_FLAG ? "" : o->meta ? o->meta : "X");
        fprintf(f, "  %-28s %s\n", names, o->help ? o->help : "");
    }
}

int opts_parse(const char *usage, const struct opt *tbl, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            opts_help(usage, tbl, stdout);
            return -1;
        }
        const char *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const struct opt *o = a[0] == '-' ? find_opt(tbl, a, len) : NULL;
        if (!o) {
            fprintf(stderr, "%s: unknown option '%s'\n", argv[0], a);
            opts_help(usage, tbl, stderr);
            return 2;
        }
        if (o->kind == OPT_FLAG) {
            if (eq) {
                fprintf(stderr, "%s: %s takes no value\n", argv[0], opt_name(o));
                return 2;
            }
            *(bool *)o->dst = true;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value (%s)\n", argv[0], opt_name(o), o->meta ? o->meta : "X");
                return 2;
            }
            v = argv[++i];
        }
        int rc = set_value(o, v);
        if (rc)
            return rc;
    }
    return 0;
}

bool opts_parse_ids(const char *s, int32_t **ids, int *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v)
        return false;
    int k = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ')
            p++;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > 2147483647L) {
            free(v);
            return false;
        }
        v[k++] = (int32_t)x;
        p = end;
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        if (*p != ',') {
            free(v);
            return false;
        }
        p++;
    }
    *ids = v;
    *n = k;
    return true;
}

/* ---- progress bar ---- */

void progress_begin(struct progress *p, const char *label)
{
    p->on = plat_isatty(2);
    p->label = label;
    p->last = -1;
    p->t0 = plat_now();
}

void progress_update(struct progress *p, float fraction)
{
    if (!p->on)
        return;
    if (!(fraction >= 0))
        fraction = 0;
    if (fraction > 1)
        fraction = 1;
    int pm = (int)(fraction * 1000);
    if (pm == p->last)
        return;
    p->last = pm;
    enum { W = 30 };
    char bar[W + 1];
    int fill = (int)(fraction * W);
    for (int i = 0; i < W; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[W] = 0;
    fprintf(stderr, "\r%s [%s] %5.1f%% %.1fs", p->label, bar, pm / 10.0, plat_now() - p->t0);
    fflush(stderr);
}

void progress_end(struct progress *p)
{
    if (p->on && p->last >= 0) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
    p->last = -1;
}

void progress_cb(void *ud, float fraction) { progress_update(ud, fraction); }

/* ---- models ---- */

struct brasa_model *cli_load_model(const char *cmd, const char *path, const struct cli_model *cm)
{
    if (!path) {
        fprintf(stderr, "brasa %s: no model given (-m FILE.gguf)\n", cmd);
        return NULL;
    }
    struct brasa_err err = {{0}};
    int n_gpus = 0, ids[BRASA_MAX_GPUS];
    if (cm->gpus && brasa_gpus_parse(cm->gpus, &n_gpus, ids, &err) != BRASA_OK) {
        fprintf(stderr, "brasa %s: %s\n", cmd, err.msg);
        return NULL;
    }
    struct progress pr;
    progress_begin(&pr, "loading");
    struct brasa_model_opts mo = {.n_threads = cm->threads, .n_gpus = n_gpus,
                                  .gpu_ids = n_gpus && ids[0] >= 0 ? ids : NULL,
                                  .tp_world = cm->world, .tp_rank = cm->rank, .tp_id = cm->id,
                                  .keep_mapped = cm->keep_mapped,
                                  .progress = progress_cb, .progress_ud = &pr};
    struct brasa_model *m = NULL;
    brasa_status st = brasa_model_load(path, &mo, &m, &err);
    progress_end(&pr);
    if (st != BRASA_OK) {
        fprintf(stderr, "brasa %s: %s\n", cmd, err.msg[0] ? err.msg : brasa_status_name(st));
        return NULL;
    }
    return m;
}

bool cli_kv_type(const char *s, enum brasa_kv_type *out)
{
    if (!strcmp(s, "f16"))
        *out = BRASA_KV_F16;
    else if (!strcmp(s, "f32"))
        *out = BRASA_KV_F32;
    else
        return false;
    return true;
}

const char *cli_bytes(uint64_t n, char *buf, size_t cap)
{
    if (n >= (1ull << 30))
        snprintf(buf, cap, "%.2f GiB", (double)n / (1ull << 30));
    else if (n >= (1ull << 20))
        snprintf(buf, cap, "%.2f MiB", (double)n / (1ull << 20));
    else
        snprintf(buf, cap, "%.2f KiB", (double)n / 1024);
    return buf;
}

/* general.file_type values as llama.cpp numbers them (its llama_ftype). */
static const char *ftype_name(uint32_t t)
{
    switch (t) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K_S";
    case 12: return "Q3_K_M";
    case 13: return "Q3_K_L";
    case 14: return "Q4_K_S";
    case 15: return "Q4_K_M";
    case 16: return "Q5_K_S";
    case 17: return "Q5_K_M";
    case 18: return "Q6_K";
    case 32: return "BF16";
    default: return NULL;
    }
}

const char *cli_file_type_name(const char *path, char *buf, size_t cap)
{
    snprintf(buf, cap, "?");
    struct gguf_file *f = NULL;
    struct brasa_err err;
    if (gguf_open(&f, path, &err) != BRASA_OK)
        return buf;
    uint32_t t;
    if (gguf_get_u32(f, "general.file_type", &t, &err) == BRASA_OK) {
        const char *n = ftype_name(t);
        if (n)
            snprintf(buf, cap, "%s", n);
        else
            snprintf(buf, cap, "ftype %u", t);
    } else {
        /* No file type recorded: name the type that holds most of the matrix bytes. */
        uint64_t bytes[GGML_TYPE_COUNT] = {0};
        uint32_t best = 0;
        for (uint64_t i = 0; i < f->n_tensors; i++)
            if (f->tensors[i].n_dims >= 2 && f->tensors[i].type < GGML_TYPE_COUNT)
                bytes[f->tensors[i].type] += f->tensors[i].nbytes;
        for (uint32_t k = 0; k < GGML_TYPE_COUNT; k++)
            if (bytes[k] > bytes[best])
                best = k;
        const struct qtype_info *q = qtype_get(best);
        if (q && bytes[best])
            snprintf(buf, cap, "%s", q->name);
    }
    gguf_close(f);
    return buf;
}
