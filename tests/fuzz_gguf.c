/* libFuzzer harness for the GGUF reader (`make fuzz`): parse any bytes, then walk whatever
 * parsed the way the engine and `brasa inspect` do (lookups, typed getters, every array element,
 * every tensor's first and last byte). The sanitizers report any out-of-bounds read.
 *
 * With BRASA_FUZZ_SHRINK_TO=DIR set, every input that parses is also written to DIR with each
 * tensor cut to its first row: small valid seeds (a few KB to tens of KB) made from the fixtures,
 * so the fuzzer starts from files that get past every check. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void walk_kv(const struct gguf_file *f, const struct gguf_kv *kv)
{
    struct brasa_err err;
    uint32_t u;
    int64_t i;
    float x;
    bool b;
    char *s = NULL;
    const void *arr;
    uint64_t n;
    if (gguf_find_kv(f, kv->key) != kv)
        abort();
    if (!gguf_get_u32(f, kv->key, &u, &err))
        sink += u;
    if (!gguf_get_i64(f, kv->key, &i, &err))
        sink += (uint64_t)i;
    if (!gguf_get_f32(f, kv->key, &x, &err))
        sink += (uint64_t)(x == x);
    if (!gguf_get_bool(f, kv->key, &b, &err))
        sink += b;
    if (!gguf_get_str(f, kv->key, &s, &err))
        sink += strlen(s);
    free(s);
    if (kv->type != GGUF_T_ARRAY)
        return;
    if (gguf_get_arr(f, kv->key, kv->arr_type, &arr, &n, &err) || n != kv->arr_len)
        abort();
    if (kv->arr_type == GGUF_T_STRING) {
        const struct gguf_str *strs = arr;
        for (uint64_t k = 0; k < n; k++)
            if (strs[k].len)
                sink += (uint8_t)strs[k].ptr[0] + (uint8_t)strs[k].ptr[strs[k].len - 1];
    } else {
        const uint8_t *p = arr;
        for (uint64_t k = 0; k < n * gguf_vtype_size(kv->arr_type); k++)
            sink += p[k];
    }
}

/* What inspect and the model loaders read: the architecture's hyper-parameters. */
static void walk_hparams(const struct gguf_file *f)
{
    static const char *const suffix[] = {"block_count", "embedding_length", "attention.head_count",
                                         "attention.head_count_kv", "rope.freq_base",
                                         "attention.layer_norm_rms_epsilon"};
    struct brasa_err err;
    char *arch = NULL, key[300];
    if (gguf_get_str(f, "general.architecture", &arch, &err))
        return;
    for (size_t k = 0; k < sizeof suffix / sizeof suffix[0]; k++) {
        uint32_t u;
        float x;
        snprintf(key, sizeof key, "%.200s.%s", arch, suffix[k]);
        if (!gguf_get_u32_or(f, key, 0, &u, &err))
            sink += u;
        if (!gguf_get_f32_or(f, key, 0, &x, &err))
            sink += (uint64_t)(x == x);
    }
    free(arch);
}

static void walk_tensors(const struct gguf_file *f)
{
    for (uint64_t k = 0; k < f->n_tensors; k++) {
        const struct gguf_tensor *t = &f->tensors[k];
        if (gguf_find_tensor(f, t->name) != t || !qtype_get(t->type) || !t->nbytes ||
            qtype_row_bytes(t->type, t->ne[0]) == 0)
            abort();
        const uint8_t *d = t->data;
        sink += d[0] + d[t->nbytes - 1];
    }
}

/* Writes f with every tensor cut to its first row into dir. */
static void write_shrunk(const struct gguf_file *f, const char *dir)
{
    static int count;
    struct gguf_writer *w;
    struct brasa_err err;
    if (gguf_writer_new(&w, &err))
        return;
    brasa_status st = BRASA_OK;
    for (uint64_t k = 0; k < f->n_kv && !st; k++)
        st = gguf_writer_copy_kv(w, &f->kv[k], &err);
    for (uint64_t k = 0; k < f->n_tensors && !st; k++) {
        const struct gguf_tensor *t = &f->tensors[k];
        int64_t ne[GGUF_MAX_DIMS] = {t->ne[0], 1, 1, 1};
        st = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data,
                                    qtype_row_bytes(t->type, t->ne[0]), &err);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/shrunk-%d.gguf", dir, count++);
    if (!st && gguf_writer_write(w, path, &err))
        fprintf(stderr, "fuzz_gguf: %s\n", err.msg);
    gguf_writer_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf_file *f;
    struct brasa_err err;
    brasa_status st = gguf_open_mem(&f, data, size, &err);
    if (st) {
        /* a failure is a format error (or out of memory) with a terminated message */
        if ((st != BRASA_EFORMAT && st != BRASA_ENOMEM) || !memchr(err.msg, 0, sizeof err.msg))
            abort();
        return 0;
    }
    for (uint64_t k = 0; k < f->n_kv; k++)
        walk_kv(f, &f->kv[k]);
    walk_hparams(f);
    walk_tensors(f);
    const char *dir = getenv("BRASA_FUZZ_SHRINK_TO");
    if (dir && *dir)
        write_shrunk(f, dir);
    gguf_close(f);
    return 0;
}
