/* brasa inspect FILE [--json] [--tensor NAME [--dump OUT.f32]]
 *       brasa inspect FILE --plan --gpus N [-c CTX]
 *
 * Prints what a GGUF file holds: metadata (long arrays summarised), the tensor table, totals per
 * tensor type and the architecture's hyper-parameters in plain words; --json prints the same as
 * one JSON object. --tensor NAME --dump OUT.f32 writes one tensor dequantized to little-endian
 * float32 in ggml's order (ne[0] fastest). --plan --gpus N shows how tensor parallelism would
 * share the model out over N GPUs (gpu/split.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf/gguf.h"
#include "gpu/split.h"
#include "quant/quant.h"

#define ARR_SHOW 5        /* array items shown in a summary */
#define TEXT_STR_MAX 96   /* bytes of a string value shown in text mode */

/* ---- value printing ---- */

/* Text mode: printable, one line, cut at max bytes. */
static void text_str(FILE *o, const char *s, uint64_t n, uint64_t max)
{
    fputc('"', o);
    for (uint64_t i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", o);
        else if (c == '\t')
            fputs("\\t", o);
        else if (c == '"' || c == '\\')
            fprintf(o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(o, "\\x%02x", c);
        else
            fputc(c, o);
    }
    fputc('"', o);
    if (n > max)
        fprintf(o, "... (%" PRIu64 " bytes)", n);
}

/* JSON string: escapes quotes, backslashes and controls; invalid UTF-8 becomes U+FFFD. */
static void json_str(FILE *o, const char *s, uint64_t n)
{
    fputc('"', o);
    uint64_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            fprintf(o, "\\%c", c);
            i++;
        } else if (c == '\n') {
            fputs("\\n", o);
            i++;
        } else if (c < 0x20) {
            fprintf(o, "\\u%04x", c);
            i++;
        } else if (c < 0x80) {
            fputc(c, o);
            i++;
        } else {
            uint64_t len = 0;
            for (uint64_t k = 1; k <= 4 && i + k <= n; k++)
                if (gguf_utf8_invalid_at(s + i, k) < 0) {
                    len = k;
                    break;
                }
            if (len) {
                fwrite(s + i, 1, (size_t)len, o);
                i += len;
            } else {
                fputs("\\ufffd", o);
                i++;
            }
        }
    }
    fputc('"', o);
}

static void cstr(FILE *o, const char *s, int json)
{
    if (json)
        json_str(o, s, strlen(s));
    else
        fputs(s, o);
}

static void put_double(FILE *o, double v, int json, int is_f32)
{
    if (json && !isfinite(v))
        fputs("null", o);
    else if (json)
        fprintf(o, is_f32 ? "%.9g" : "%.17g", v);
    else
        fprintf(o, "%g", v);
}

/* One array element i of kv. */
static void put_elem(FILE *o, const struct gguf_kv *kv, uint64_t i, int json)
{
    const uint8_t *p = kv->arr_data;
    size_t es = gguf_vtype_size(kv->arr_type);
    union {
        uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
        uint64_t u64; int64_t i64; float f32; double f64;
    } v;
    if (kv->arr_type == GGUF_T_STRING) {
        const struct gguf_str *s = &kv->arr_strs[i];
        if (json)
            json_str(o, s->ptr, s->len);
        else
            text_str(o, s->ptr, s->len, 32);
        return;
    }
    memcpy(&v, p + i * es, es);
    switch (kv->arr_type) {
    case GGUF_T_UINT8: fprintf(o, "%u", v.u8); break;
    case GGUF_T_INT8: fprintf(o, "%d", v.i8); break;
    case GGUF_T_UINT16: fprintf(o, "%u", v.u16); break;
    case GGUF_T_INT16: fprintf(o, "%d", v.i16); break;
    case GGUF_T_UINT32: fprintf(o, "%" PRIu32, v.u32); break;
    case GGUF_T_INT32: fprintf(o, "%" PRId32, v.i32); break;
    case GGUF_T_UINT64: fprintf(o, "%" PRIu64, v.u64); break;
    case GGUF_T_INT64: fprintf(o, "%" PRId64, v.i64); break;
    case GGUF_T_FLOAT32: put_double(o, v.f32, json, 1); break;
    case GGUF_T_FLOAT64: put_double(o, v.f64, json, 0); break;
    case GGUF_T_BOOL: fputs(v.u8 ? "true" : "false", o); break;
    default: fputs("null", o); break;
    }
}

/* A scalar, or an array's first items (all of them when full != 0). */
static void put_value(FILE *o, const struct gguf_kv *kv, int json, int full)
{
    switch (kv->type) {
    case GGUF_T_UINT8: case GGUF_T_UINT16: case GGUF_T_UINT32: case GGUF_T_UINT64:
        fprintf(o, "%" PRIu64, kv->v.u64);
        return;
    case GGUF_T_INT8: case GGUF_T_INT16: case GGUF_T_INT32: case GGUF_T_INT64:
        fprintf(o, "%" PRId64, kv->v.i64);
        return;
    case GGUF_T_FLOAT32: put_double(o, kv->v.f64, json, 1); return;
    case GGUF_T_FLOAT64: put_double(o, kv->v.f64, json, 0); return;
    case GGUF_T_BOOL: fputs(kv->v.b ? "true" : "false", o); return;
    case GGUF_T_STRING:
        if (json)
            json_str(o, kv->v.str.ptr, kv->v.str.len);
        else
            text_str(o, kv->v.str.ptr, kv->v.str.len, TEXT_STR_MAX);
        return;
    default: break;
    }
    uint64_t n = full ? kv->arr_len : (kv->arr_len < ARR_SHOW ? kv->arr_len : ARR_SHOW);
    fputc('[', o);
    for (uint64_t i = 0; i < n; i++) {
        if (i)
            fputs(", ", o);
        put_elem(o, kv, i, json);
    }
    if (!json && n < kv->arr_len)
        fputs(", ...", o);
    fputc(']', o);
}

/* ---- sections ---- */

static void print_metadata(FILE *o, const struct gguf_file *f, int json)
{
    if (!json)
        fprintf(o, "metadata (%" PRIu64 " keys):\n", f->n_kv);
    else
        fputs("  \"metadata\": [\n", o);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const struct gguf_kv *kv = &f->kv[i];
        int arr = kv->type == GGUF_T_ARRAY;
        if (!json) {
            char type[48];
            if (arr)
                snprintf(type, sizeof type, "%s[%" PRIu64 "]", gguf_vtype_name(kv->arr_type),
                         kv->arr_len);
            else
                snprintf(type, sizeof type, "%s", gguf_vtype_name(kv->type));
            fprintf(o, "  %-44s %-16s ", kv->key, type);
            put_value(o, kv, 0, 0);
            fputc('\n', o);
            continue;
        }
        fputs("    {\"key\": ", o);
        json_str(o, kv->key, strlen(kv->key));
        fprintf(o, ", \"type\": \"%s\"", gguf_vtype_name(kv->type));
        if (arr) {
            fprintf(o, ", \"elem_type\": \"%s\", \"length\": %" PRIu64 ", \"first\": ",
                    gguf_vtype_name(kv->arr_type), kv->arr_len);
            put_value(o, kv, 1, 0);
        } else {
            fputs(", \"value\": ", o);
            put_value(o, kv, 1, 0);
        }
        fprintf(o, "}%s\n", i + 1 < f->n_kv ? "," : "");
    }
    if (json)
        fputs("  ],\n", o);
}

static const char *type_name(uint32_t type)
{
    const struct qtype_info *q = qtype_get(type);
    return q ? q->name : "?";
}

static void shape_str(char *buf, size_t n, const struct gguf_tensor *t)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int d = 0; d < t->n_dims && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

static void print_tensors(FILE *o, const struct gguf_file *f, int json)
{
    if (!json)
        fprintf(o, "\ntensors (%" PRIu64 "; offsets from the data section at byte %" PRIu64 "):\n"
                   "  %-40s %-6s %-24s %12s %12s\n",
                f->n_tensors, f->data_offset, "name", "type", "shape", "bytes", "offset");
    else
        fputs("  \"tensors\": [\n", o);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        char shape[128];
        shape_str(shape, sizeof shape, t);
        if (!json) {
            fprintf(o, "  %-40s %-6s %-24s %12" PRIu64 " %12" PRIu64 "\n", t->name,
                    type_name(t->type), shape, t->nbytes, t->offset);
            continue;
        }
        fputs("    {\"name\": ", o);
        json_str(o, t->name, strlen(t->name));
        fprintf(o, ", \"type\": \"%s\", \"shape\": %s, \"bytes\": %" PRIu64 ", \"offset\": %" PRIu64
                   "}%s\n",
                type_name(t->type), shape, t->nbytes, t->offset, i + 1 < f->n_tensors ? "," : "");
    }
    if (json)
        fputs("  ],\n", o);
}

static void print_totals(FILE *o, const struct gguf_file *f, int json)
{
    uint64_t count[GGML_TYPE_COUNT] = {0}, bytes[GGML_TYPE_COUNT] = {0}, elems[GGML_TYPE_COUNT] = {0};
    uint64_t all_bytes = 0, all_elems = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        uint32_t ty = t->type < GGML_TYPE_COUNT ? t->type : 0;
        uint64_t ne = (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        count[ty]++;
        bytes[ty] += t->nbytes;
        elems[ty] += ne;
        all_bytes += t->nbytes;
        all_elems += ne;
    }
    if (!json)
        fprintf(o, "\ntotals per tensor type:\n");
    else
        fputs("  \"totals\": [\n", o);
    int first = 1;
    for (uint32_t ty = 0; ty < GGML_TYPE_COUNT; ty++) {
        if (!count[ty])
            continue;
        if (!json)
            fprintf(o, "  %-6s %5" PRIu64 " tensors %14" PRIu64 " elements %14" PRIu64 " bytes\n",
                    type_name(ty), count[ty], elems[ty], bytes[ty]);
        else
            fprintf(o, "%s    {\"type\": \"%s\", \"tensors\": %" PRIu64 ", \"elements\": %" PRIu64
                       ", \"bytes\": %" PRIu64 "}",
                    first ? "" : ",\n", type_name(ty), count[ty], elems[ty], bytes[ty]);
        first = 0;
    }
    if (!json)
        fprintf(o, "  %-6s %5" PRIu64 " tensors %14" PRIu64 " elements %14" PRIu64 " bytes\n",
                "all", f->n_tensors, all_elems, all_bytes);
    else
        fprintf(o, "%s  ],\n  \"total\": {\"tensors\": %" PRIu64 ", \"elements\": %" PRIu64
                   ", \"bytes\": %" PRIu64 "},\n",
                first ? "" : "\n", f->n_tensors, all_elems, all_bytes);
}

/* ---- hyper-parameters in plain words ---- */

struct hparam {
    const char *suffix; /* key after "ARCH." */
    const char *json;
    const char *words;
};

static const struct hparam hparams[] = {
    {"block_count", "layers", "layers"},
    {"embedding_length", "embedding_width", "embedding width"},
    {"attention.head_count", "heads", "attention heads"},
    {"attention.head_count_kv", "kv_heads", "KV heads"},
    {"attention.key_length", "head_dim", "head dim (keys)"},
    {"attention.value_length", "head_dim_v", "head dim (values)"},
    {"feed_forward_length", "ffn_width", "FFN width"},
    {"context_length", "context_length", "context length (trained)"},
    {"rope.freq_base", "rope_base", "rope base (theta)"},
    {"rope.dimension_count", "rope_dims", "rope dims (rotated per head)"},
    {"rope.dimension_sections", "rope_sections", "rope sections"},
    {"attention.layer_norm_rms_epsilon", "rms_eps", "RMS norm epsilon"},
    {"vocab_size", "vocab_size", "vocab size"},
    {"embedding_scale", "embedding_scale", "embedding multiplier"},
    {"residual_scale", "residual_scale", "residual multiplier"},
    {"attention.scale", "attention_scale", "attention scale (replaces 1/sqrt(head dim))"},
    {"logit_scale", "logit_scale", "logit divisor"},
    {"full_attention_interval", "full_attention_interval", "full attention every N layers"},
    {"ssm.conv_kernel", "ssm_conv_kernel", "SSM conv kernel"},
    {"ssm.state_size", "ssm_state_size", "SSM state size (head K/V dim)"},
    {"ssm.group_count", "ssm_group_count", "SSM groups (K heads)"},
    {"ssm.time_step_rank", "ssm_time_step_rank", "SSM time-step rank (V heads)"},
    {"ssm.inner_size", "ssm_inner_size", "SSM inner size"},
    {"expert_count", "experts", "experts"},
    {"expert_used_count", "experts_used", "experts used per token"},
};

static void hp_line(FILE *o, int json, int *first, const char *jname, const char *words)
{
    if (json) {
        fprintf(o, "%s    ", *first ? "" : ",\n");
        json_str(o, jname, strlen(jname));
        fputs(": ", o);
    } else {
        fprintf(o, "  %-46s ", words);
    }
    *first = 0;
}

static void print_hparams(FILE *o, const struct gguf_file *f, int json)
{
    char *arch = NULL;
    gguf_get_str(f, "general.architecture", &arch, NULL);
    if (!json)
        fprintf(o, "\nhyper-parameters (%s):\n", arch ? arch : "no general.architecture");
    else
        fputs("  \"hparams\": {\n", o);
    int first = 1;
    hp_line(o, json, &first, "architecture", "architecture");
    if (arch)
        cstr(o, arch, json);
    else
        fputs(json ? "null" : "(none)", o);
    if (!json)
        fputc('\n', o);
    for (size_t i = 0; arch && i < sizeof hparams / sizeof hparams[0]; i++) {
        char key[256];
        snprintf(key, sizeof key, "%s.%s", arch, hparams[i].suffix);
        const struct gguf_kv *kv = gguf_find_kv(f, key);
        if (!kv && !json && !strcmp(hparams[i].suffix, "rope.freq_base"))
            fprintf(o, "  %-46s (absent: the usual default is 10000)\n", hparams[i].words);
        if (!kv)
            continue;
        hp_line(o, json, &first, hparams[i].json, hparams[i].words);
        put_value(o, kv, json, 1);
        if (!json)
            fputc('\n', o);
    }
    /* derived: head dim without key_length, vocab size from the token list */
    char key[256];
    uint32_t embd, heads;
    snprintf(key, sizeof key, "%s.attention.key_length", arch ? arch : "");
    if (arch && !gguf_find_kv(f, key)) {
        snprintf(key, sizeof key, "%s.embedding_length", arch);
        int ok = gguf_get_u32(f, key, &embd, NULL) == BRASA_OK;
        snprintf(key, sizeof key, "%s.attention.head_count", arch);
        if (ok && gguf_get_u32(f, key, &heads, NULL) == BRASA_OK && heads) {
            hp_line(o, json, &first, "head_dim", "head dim (embedding width / heads)");
            fprintf(o, "%" PRIu32 "%s", embd / heads, json ? "" : "\n");
        }
    }
    snprintf(key, sizeof key, "%s.vocab_size", arch ? arch : "");
    const struct gguf_kv *tok = gguf_find_kv(f, "tokenizer.ggml.tokens");
    if (!gguf_find_kv(f, key) && tok && tok->type == GGUF_T_ARRAY) {
        hp_line(o, json, &first, "vocab_size", "vocab size (tokenizer.ggml.tokens)");
        fprintf(o, "%" PRIu64 "%s", tok->arr_len, json ? "" : "\n");
    }
    if (json)
        fputs("\n  }\n", o);
    free(arch);
}

static void print_all(FILE *o, const char *path, const struct gguf_file *f, int json)
{
    if (json) {
        fputs("{\n  \"file\": ", o);
        json_str(o, path, strlen(path));
        fprintf(o, ",\n  \"version\": %" PRIu32 ",\n  \"alignment\": %" PRIu64
                   ",\n  \"size\": %zu,\n  \"data_offset\": %" PRIu64 ",\n",
                f->version, f->alignment, f->size, f->data_offset);
    } else {
        fprintf(o, "%s: GGUF v%" PRIu32 ", %zu bytes, alignment %" PRIu64 ", %" PRIu64
                   " keys, %" PRIu64 " tensors, data section at byte %" PRIu64 "\n\n",
                path, f->version, f->size, f->alignment, f->n_kv, f->n_tensors, f->data_offset);
    }
    print_metadata(o, f, json);
    print_tensors(o, f, json);
    print_totals(o, f, json);
    print_hparams(o, f, json);
    if (json)
        fputs("}\n", o);
}

/* ---- --tensor NAME [--dump OUT.f32] ---- */

static int dump_tensor(const struct gguf_tensor *t, const char *out)
{
    int64_t n = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    size_t row_bytes = qtype_row_bytes(t->type, n);
    float *buf = malloc((size_t)n * sizeof *buf);
    FILE *fp = buf ? fopen(out, "wb") : NULL;
    if (!fp) {
        fprintf(stderr, "brasa inspect: cannot create '%s'\n", out);
        free(buf);
        return 1;
    }
    struct brasa_err err;
    const uint8_t *src = t->data;
    for (int64_t r = 0; r < rows; r++) {
        /* floats are written as the host holds them: little-endian on every supported CPU */
        if (dequant_row(t->type, src + (size_t)r * row_bytes, buf, n, &err) != BRASA_OK ||
            fwrite(buf, sizeof *buf, (size_t)n, fp) != (size_t)n) {
            fprintf(stderr, "brasa inspect: tensor '%s': %s\n", t->name,
                    ferror(fp) ? "write failed" : err.msg);
            fclose(fp);
            remove(out);
            free(buf);
            return 1;
        }
    }
    free(buf);
    if (fclose(fp) != 0) {
        fprintf(stderr, "brasa inspect: cannot write '%s'\n", out);
        return 1;
    }
    return 0;
}

static void usage(FILE *o)
{
    fprintf(o, "usage: brasa inspect FILE.gguf... [--json]\n"
               "       brasa inspect FILE.gguf --tensor NAME [--dump OUT.f32]\n"
               "       brasa inspect FILE.gguf --plan --gpus N [-c CTX]\n"
               "  --json              print each file as one JSON object (several files: an array)\n"
               "  --tensor NAME       show one tensor\n"
               "  --dump OUT.f32      write it dequantized to little-endian float32 (ne[0] fastest)\n"
               "  --plan --gpus N     tensor-parallel split over N GPUs (1..%d): weight and F16 KV\n"
               "                      cache MiB per GPU, or why it does not split (exit status 1)\n"
               "  -c, --ctx CTX       context of the KV cache for --plan (default 4096)\n",
            SPLIT_MAX_GPUS);
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static int print_plan(const char *path, const struct gguf_file *f, int n_gpus, int n_ctx)
{
    struct split_plan p;
    struct brasa_err err;
    if (split_plan_make(f, n_gpus, n_ctx, &p, &err) != BRASA_OK) {
        fprintf(stderr, "brasa inspect: %s: %s\n", path, err.msg);
        return 1;
    }
    printf("%s: tensor-parallel split over %d GPU%s, context %d (F16 KV cache)\n", path, n_gpus,
           n_gpus > 1 ? "s" : "", n_ctx);
    printf("  tensors: %d row-split, %d column-split, %d replicated (%.2f MiB on every GPU); "
           "layers with attention: %d\n",
           p.n_row, p.n_col, p.n_rep, mib(p.replicated), p.n_attn_layers);
    if (!p.ok) {
        printf("  does not split over %d GPUs: %s\n", n_gpus, p.why);
        return 1;
    }
    uint64_t w = 0, kv = 0;
    for (int g = 0; g < n_gpus; g++) {
        printf("  gpu %d: weights %10.2f MiB  kv %10.2f MiB  total %10.2f MiB\n", g,
               mib(p.weights[g]), mib(p.kv[g]), mib(p.weights[g] + p.kv[g]));
        w += p.weights[g];
        kv += p.kv[g];
    }
    printf("  all:   weights %10.2f MiB  kv %10.2f MiB  total %10.2f MiB (one GPU: %.2f MiB of "
           "weights)\n",
           mib(w), mib(kv), mib(w + kv), mib(p.total));
    return 0;
}

/* A whole decimal number in lo..hi, or -1. */
static long parse_int(const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= lo && v <= hi ? v : -1;
}

static int one_tensor(const char *path, const struct gguf_file *f, const char *tname,
                      const char *dump)
{
    const struct gguf_tensor *t = gguf_find_tensor(f, tname);
    if (!t) {
        fprintf(stderr, "brasa inspect: no tensor '%s' in '%s'\n", tname, path);
        return 1;
    }
    if (dump)
        return dump_tensor(t, dump);
    char shape[128];
    shape_str(shape, sizeof shape, t);
    printf("%s %s %s %" PRIu64 " bytes at data offset %" PRIu64 "\n", t->name, type_name(t->type),
           shape, t->nbytes, t->offset);
    return 0;
}

int cmd_inspect(int argc, char **argv)
{
    const char *tname = NULL, *dump = NULL;
    int json = 0, n_paths = 0, plan = 0;
    long n_gpus = 0, n_ctx = 4096;
    char **paths = calloc((size_t)argc, sizeof *paths);
    if (!paths)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--tensor") && i + 1 < argc) {
            tname = argv[++i];
        } else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
            dump = argv[++i];
        } else if (!strcmp(argv[i], "--plan")) {
            plan = 1;
        } else if (!strcmp(argv[i], "--gpus") && i + 1 < argc) {
            if ((n_gpus = parse_int(argv[++i], 1, SPLIT_MAX_GPUS)) < 0) {
                fprintf(stderr, "brasa inspect: --gpus '%s': a GPU count from 1 to %d\n", argv[i],
                        SPLIT_MAX_GPUS);
                free(paths);
                return 2;
            }
        } else if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--ctx")) && i + 1 < argc) {
            if ((n_ctx = parse_int(argv[++i], 1, 1L << 30)) < 0) {
                fprintf(stderr, "brasa inspect: -c '%s': a context of 1 or more tokens\n",
                        argv[i]);
                free(paths);
                return 2;
            }
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            free(paths);
            return 0;
        } else if (argv[i][0] != '-') {
            paths[n_paths++] = argv[i];
        } else {
            fprintf(stderr, "brasa inspect: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            free(paths);
            return 2;
        }
    }
    if (plan && !n_gpus) {
        fprintf(stderr, "brasa inspect: --plan needs --gpus N (1..%d)\n", SPLIT_MAX_GPUS);
        free(paths);
        return 2;
    }
    if (!n_paths || (dump && !tname) || (tname && n_paths != 1) || (plan && (tname || json)) ||
        (!plan && n_gpus)) {
        usage(stderr);
        free(paths);
        return 2;
    }
    int rc = 0, many = n_paths > 1;
    if (json && many)
        fputs("[\n", stdout);
    for (int i = 0; i < n_paths && !rc; i++) {
        struct gguf_file *f;
        struct brasa_err err;
        if (gguf_open(&f, paths[i], &err) != BRASA_OK) {
            fprintf(stderr, "brasa inspect: %s\n", err.msg);
            rc = 1;
            break;
        }
        if (plan) {
            if (i)
                fputc('\n', stdout);
            rc = print_plan(paths[i], f, (int)n_gpus, (int)n_ctx);
        } else if (tname) {
            rc = one_tensor(paths[i], f, tname, dump);
        } else {
            if (i)
                fputs(json ? ",\n" : "\n", stdout);
            print_all(stdout, paths[i], f, json);
        }
        gguf_close(f);
    }
    if (json && many && !rc)
        fputs("]\n", stdout);
    free(paths);
    return rc;
}
