/* brasa quantize IN.gguf OUT.gguf TYPE [--threads N]
 *
 * Writes a copy of a float model (F32/F16/BF16 tensors) with its weights converted to a single
 * type or one of llama.cpp's mixes (quant/mix.h says which tensor gets which type). Metadata is
 * copied; general.file_type and general.quantization_version are set as llama-quantize sets
 * them. Tensors already of their target type are copied unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/platform.h"
#include "core/pool.h"
#include "gguf/gguf.h"
#include "opts.h"
#include "quant/mix.h"
#include "quant/quant.h"

#define QUANT_VERSION 2 /* ggml's GGML_QNT_VERSION */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: brasa quantize IN.gguf OUT.gguf TYPE [--threads N]\n"
            "  TYPE: %s\n"
            "  IN must hold its weights as F32, F16 or BF16.\n",
            quant_ftype_list());
}

/* One tensor's conversion, rows split over the pool's threads. */
struct conv_job {
    const struct gguf_tensor *t;
    uint32_t dst_type;
    uint8_t *dst;
    int64_t n_rows;
    float *tmp; /* per thread: one row of floats */
    int failed;
};

static void conv_rows(void *arg, int ith, int nth)
{
    struct conv_job *j = arg;
    const int64_t k = j->t->ne[0];
    const size_t src_rb = qtype_row_bytes(j->t->type, k), dst_rb = qtype_row_bytes(j->dst_type, k);
    float *row = j->tmp + (size_t)ith * (size_t)k;
    long r0, r1;
    pool_range((long)j->n_rows, ith, nth, &r0, &r1);
    struct brasa_err err;
    for (long r = r0; r < r1; r++) {
        const uint8_t *src = (const uint8_t *)j->t->data + (size_t)r * src_rb;
        if (dequant_row(j->t->type, src, row, k, &err) ||
            quant_row(j->dst_type, row, j->dst + (size_t)r * dst_rb, k, &err))
            j->failed = 1;
    }
}

static bool is_float_type(uint32_t t)
{
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}

/* Picks every tensor's type and checks the input can be converted, before any work. */
static int plan(const struct gguf_file *f, int ftype, uint32_t *types, const char *in)
{
    const char **names = malloc(sizeof *names * (f->n_tensors + 1));
    if (!names)
        return 1;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        names[i] = f->tensors[i].name;
    struct quant_mix mix;
    quant_mix_begin(&mix, ftype, names, (size_t)f->n_tensors);
    free(names);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        types[i] = quant_mix_type(&mix, t->name, t->n_dims, t->ne);
        if (types[i] == t->type)
            continue;
        if (!is_float_type(t->type)) {
            fprintf(stderr,
                    "brasa quantize: %s: tensor '%s' is already quantized (%s); quantize needs a "
                    "model whose weights are F32, F16 or BF16\n",
                    in, t->name, qtype_get(t->type)->name);
            return 1;
        }
        const struct qtype_info *q = qtype_get(types[i]);
        if (!q || !q->can_quant || t->ne[0] % q->block) {
            fprintf(stderr, "brasa quantize: cannot write tensor '%s' (row of %lld) as %s\n",
                    t->name, (long long)t->ne[0], q ? q->name : "?");
            return 1;
        }
    }
    return 0;
}

static int convert_all(const struct gguf_file *f, const uint32_t *types, uint8_t **bufs,
                       struct gguf_writer *w, int n_threads)
{
    struct brasa_err err = {{0}};
    struct pool *pool = NULL;
    if (pool_new(&pool, n_threads, &err)) {
        fprintf(stderr, "brasa quantize: %s\n", err.msg);
        return 1;
    }
    int64_t max_row = 1;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        max_row = f->tensors[i].ne[0] > max_row ? f->tensors[i].ne[0] : max_row;
    float *tmp = malloc((size_t)max_row * sizeof(float) * (size_t)n_threads);
    struct progress pr;
    progress_begin(&pr, "quantizing");
    uint64_t total = 0, done = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        total += f->tensors[i].nbytes;
    int rc = tmp ? 0 : 1;
    for (uint64_t i = 0; i < f->n_tensors && !rc; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        int64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3];
        uint64_t nbytes = qtype_row_bytes(types[i], t->ne[0]) * (uint64_t)n_rows;
        const void *data = t->data;
        if (types[i] != t->type) {
            bufs[i] = malloc(nbytes ? nbytes : 1);
            if (!bufs[i]) {
                fprintf(stderr, "brasa quantize: out of memory for tensor '%s'\n", t->name);
                rc = 1;
                break;
            }
            struct conv_job j = {t, types[i], bufs[i], n_rows, tmp, 0};
            pool_run(pool, conv_rows, &j);
            if (j.failed) {
                fprintf(stderr, "brasa quantize: converting tensor '%s' failed\n", t->name);
                rc = 1;
                break;
            }
            data = bufs[i];
        }
        if (gguf_writer_add_tensor(w, t->name, types[i], t->n_dims, t->ne, data, nbytes, &err)) {
            fprintf(stderr, "brasa quantize: %s\n", err.msg);
            rc = 1;
        }
        done += t->nbytes;
        progress_update(&pr, total ? (float)done / (float)total : 1.0f);
    }
    progress_end(&pr);
    free(tmp);
    pool_free(pool);
    return rc;
}

static int copy_metadata(const struct gguf_file *f, struct gguf_writer *w, int ftype)
{
    struct brasa_err err = {{0}};
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const char *key = f->kv[i].key;
        if (!strcmp(key, "general.file_type") || !strcmp(key, "general.quantization_version"))
            continue;
        if (gguf_writer_copy_kv(w, &f->kv[i], &err))
            goto fail;
    }
    if (gguf_writer_set_u32(w, "general.quantization_version", QUANT_VERSION, &err) ||
        gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype, &err) ||
        gguf_writer_set_alignment(w, (uint32_t)f->alignment, &err))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "brasa quantize: %s\n", err.msg);
    return 1;
}

int cmd_quantize(int argc, char **argv)
{
    const char *pos[3] = {0};
    int npos = 0, n_threads = plat_ncpu();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(argv[i], "--threads") || !strcmp(argv[i], "-t")) && i + 1 < argc) {
            n_threads = atoi(argv[++i]);
            if (n_threads < 1 || n_threads > 1024) {
                fprintf(stderr, "brasa quantize: --threads wants a number from 1 to 1024\n");
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "brasa quantize: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (npos < 3) {
            pos[npos++] = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (npos != 3) {
        usage(stderr);
        return 2;
    }
    int ftype = quant_ftype_by_name(pos[2]);
    if (ftype < 0) {
        fprintf(stderr, "brasa quantize: unknown type '%s' (one of: %s)\n", pos[2],
                quant_ftype_list());
        return 2;
    }
    struct brasa_err err = {{0}};
    struct gguf_file *f = NULL;
    if (gguf_open(&f, pos[0], &err)) {
        fprintf(stderr, "brasa quantize: %s\n", err.msg);
        return 1;
    }
    uint32_t *types = calloc(f->n_tensors + 1, sizeof *types);
    uint8_t **bufs = calloc(f->n_tensors + 1, sizeof *bufs);
    struct gguf_writer *w = NULL;
    int rc = !types || !bufs;
    if (!rc)
        rc = plan(f, ftype, types, pos[0]);
    if (!rc && gguf_writer_new(&w, &err)) {
        fprintf(stderr, "brasa quantize: %s\n", err.msg);
        rc = 1;
    }
    if (!rc)
        rc = copy_metadata(f, w, ftype);
    if (!rc)
        rc = convert_all(f, types, bufs, w, n_threads);
    if (!rc && gguf_writer_write(w, pos[1], &err)) {
        fprintf(stderr, "brasa quantize: %s\n", err.msg);
        rc = 1;
    }
    if (!rc) {
        uint64_t in_bytes = 0, out_bytes = 0;
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            in_bytes += f->tensors[i].nbytes;
            out_bytes += qtype_row_bytes(types[i], f->tensors[i].ne[0]) *
                         (uint64_t)(f->tensors[i].ne[1] * f->tensors[i].ne[2] * f->tensors[i].ne[3]);
        }
        char a[32], b[32];
        fprintf(stderr, "brasa quantize: wrote %s (%s, %llu tensors, %s -> %s)\n", pos[1],
                quant_ftype_name(ftype), (unsigned long long)f->n_tensors, cli_bytes(in_bytes, a, sizeof a),
                cli_bytes(out_bytes, b, sizeof b));
    }
    gguf_writer_free(w);
    if (bufs)
        for (uint64_t i = 0; i < f->n_tensors; i++)
            free(bufs[i]);
    free(bufs);
    free(types);
    gguf_close(f);
    return rc;
}
