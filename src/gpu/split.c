/* Tensor-parallel split plan (see split.h). Only the file's metadata and tensor table are read. */
#include "gpu/split.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

enum split_kind { SPLIT_REP, SPLIT_ROW, SPLIT_VOCAB, SPLIT_COL, SPLIT_BIAS };

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* name is `s` itself or ends in ".s" */
static bool name_is(const char *name, const char *s)
{
    size_t n = strlen(name), k = strlen(s);
    return ends_with(name, s) && (n == k || name[n - k - 1] == '.');
}

static enum split_kind kind_of(const struct gguf_tensor *t)
{
    static const char *const rows[] = {
        "attn_q.weight",  "attn_k.weight",   "attn_v.weight",     "attn_qkv.weight",
        "attn_gate.weight", "ffn_gate.weight", "ffn_up.weight",   "ssm_in.weight",
        "ssm_beta.weight", "ssm_alpha.weight", "ssm_conv1d.weight"};
    static const char *const cols[] = {"attn_output.weight", "ffn_down.weight", "ssm_out.weight"};
    static const char *const biases[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias", "ssm_dt.bias",
                                         "ssm_a"};
    if (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "output.weight"))
        return SPLIT_VOCAB;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (name_is(t->name, rows[i]))
            return SPLIT_ROW;
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        if (name_is(t->name, cols[i]))
            return SPLIT_COL;
    for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++)
        if (name_is(t->name, biases[i]) && t->n_dims == 1)
            return SPLIT_BIAS;
    return SPLIT_REP;
}

/* Records the first failed rule. */
static void not_ok(struct split_plan *p, const char *fmt, ...) __attribute__((format(BRASA_PRINTF, 2, 3)));
static void not_ok(struct split_plan *p, const char *fmt, ...)
{
    if (!p->ok)
        return;
    p->ok = false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
}

/* A hyper-parameter that must divide by the GPU count (skipped when absent or 0). */
static void check_div(struct split_plan *p, const char *what, const char *arch, const char *suffix,
                      uint32_t v)
{
    if (v && v % (uint32_t)p->n_gpus)
        not_ok(p, "%s (%s.%s = %" PRIu32 ") do not divide by %d GPUs", what, arch, suffix, v,
               p->n_gpus);
}

static brasa_status get_hp(const struct gguf_file *f, const char *arch, const char *suffix,
                           uint32_t def, uint32_t *out, struct brasa_err *err)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_get_u32_or(f, key, def, out, err);
}

/* Shares x out over n GPUs as evenly as possible: GPU g gets x/n, one more while g < x % n. */
static uint64_t share(uint64_t x, int n, int g)
{
    return x / (uint64_t)n + ((uint64_t)g < x % (uint64_t)n);
}

/* One split tensor: adds its bytes on each GPU to p->weights. */
static void plan_tensor(struct split_plan *p, const struct gguf_tensor *t, enum split_kind kind)
{
    int n = p->n_gpus;
    const struct qtype_info *q = qtype_get(t->type);
    int block = q && q->block > 0 ? q->block : 1;
    uint64_t slices = (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
    uint64_t ne0 = (uint64_t)t->ne[0], ne1 = (uint64_t)t->ne[1];
    bool fits = true;
    if (kind == SPLIT_ROW && ne1 % (uint64_t)n) {
        not_ok(p, "%s: %" PRIu64 " rows do not divide by %d GPUs", t->name, ne1, n);
        fits = false;
    } else if (kind == SPLIT_COL || kind == SPLIT_BIAS) {
        if (ne0 % (uint64_t)n) {
            not_ok(p, "%s: %" PRIu64 " %s do not divide by %d GPUs", t->name, ne0,
                   kind == SPLIT_COL ? "columns" : "elements", n);
            fits = false;
        } else if ((ne0 / (uint64_t)n) % (uint64_t)block) {
            not_ok(p, "%s: %" PRIu64 " %s per GPU (%" PRIu64 " / %d) is not a whole number of "
                      "%s blocks of %d",
                   t->name, ne0 / (uint64_t)n, kind == SPLIT_COL ? "columns" : "elements", ne0, n,
                   q ? q->name : "?", block);
            fits = false;
        }
    }
    for (int g = 0; g < n; g++) {
        uint64_t b;
        if (!fits) /* an estimate only: the plan is not ok anyway */
            b = share(t->nbytes, n, g);
        else if (kind == SPLIT_ROW || kind == SPLIT_VOCAB)
            b = share(ne1, n, g) * slices * (t->nbytes / (ne1 * slices));
        else
            b = (uint64_t)qtype_row_bytes(t->type, (int64_t)(ne0 / (uint64_t)n)) * ne1 * slices;
        p->weights[g] += b;
    }
}

brasa_status split_plan_make(const struct gguf_file *f, int n_gpus, int n_ctx,
                             struct split_plan *p, struct brasa_err *err)
{
    if (n_gpus < 1 || n_gpus > SPLIT_MAX_GPUS)
        return brasa_fail(err, BRASA_EINVAL, "GPU count %d is outside 1..%d", n_gpus,
                          SPLIT_MAX_GPUS);
    if (n_ctx < 1)
        return brasa_fail(err, BRASA_EINVAL, "context %d is not a positive token count", n_ctx);
    memset(p, 0, sizeof *p);
    p->n_gpus = n_gpus;
    p->n_ctx = n_ctx;
    p->ok = true;

    char *arch = NULL;
    brasa_status st = gguf_get_str(f, "general.architecture", &arch, err);
    if (st != BRASA_OK)
        return st;
    uint32_t heads = 0, kv_heads = 0, embd = 0, k_len = 0, v_len = 0, n_ff = 0, groups = 0,
             dt_rank = 0;
    if ((st = get_hp(f, arch, "attention.head_count", 0, &heads, err)) != BRASA_OK ||
        (st = get_hp(f, arch, "attention.head_count_kv", heads, &kv_heads, err)) != BRASA_OK ||
        (st = get_hp(f, arch, "embedding_length", 0, &embd, err)) != BRASA_OK ||
        (st = get_hp(f, arch, "attention.key_length", heads ? embd / heads : 0, &k_len, err)) !=
            BRASA_OK ||
        (st = get_hp(f, arch, "attention.value_length", k_len, &v_len, err)) != BRASA_OK ||
        (st = get_hp(f, arch, "feed_forward_length", 0, &n_ff, err)) != BRASA_OK ||
        (st = get_hp(f, arch, "ssm.group_count", 0, &groups, err)) != BRASA_OK ||
        (st = get_hp(f, arch, "ssm.time_step_rank", 0, &dt_rank, err)) != BRASA_OK) {
        free(arch);
        return st;
    }
    check_div(p, "attention heads", arch, "attention.head_count", heads);
    check_div(p, "KV heads", arch, "attention.head_count_kv", kv_heads);
    check_div(p, "the FFN width", arch, "feed_forward_length", n_ff);
    check_div(p, "SSM groups", arch, "ssm.group_count", groups);
    check_div(p, "SSM time-step heads", arch, "ssm.time_step_rank", dt_rank);
    free(arch);

    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        enum split_kind kind = kind_of(t);
        p->total += t->nbytes;
        if (!strncmp(t->name, "blk.", 4) && ends_with(t->name, ".attn_k.weight"))
            p->n_attn_layers++;
        if (kind == SPLIT_REP) {
            p->replicated += t->nbytes;
            p->n_rep++;
            continue;
        }
        if (kind == SPLIT_COL)
            p->n_col++;
        else
            p->n_row++;
        plan_tensor(p, t, kind);
    }
    uint64_t kvh = ((uint64_t)kv_heads + (uint64_t)n_gpus - 1) / (uint64_t)n_gpus;
    uint64_t kv = (uint64_t)p->n_attn_layers * (uint64_t)n_ctx * kvh * ((uint64_t)k_len + v_len) *
                  2; /* F16: 2 bytes per element, K and V */
    for (int g = 0; g < n_gpus; g++) {
        p->weights[g] += p->replicated;
        p->kv[g] = kv;
    }
    return BRASA_OK;
}

brasa_status split_slice(uint32_t t, const void *w, int64_t k, int64_t r0, int64_t r1,
                         int64_t c0, int64_t c1, void *out, struct brasa_err *err)
{
    return split_slice_pitch(t, w, k, r0, r1, c0, c1, out, qtype_row_bytes(t, c1 - c0), err);
}

brasa_status split_slice_pitch(uint32_t t, const void *w, int64_t k, int64_t r0, int64_t r1,
                               int64_t c0, int64_t c1, void *out, size_t pitch,
                               struct brasa_err *err)
{
    const struct qtype_info *qi = qtype_get(t);
    if (!qi)
        return brasa_fail(err, BRASA_EINVAL, "type %u is not a weight type", t);
    int64_t blk = qi->block;
    if (r0 < 0 || r1 < r0 || c0 < 0 || c1 < c0 || c1 > k || c0 % blk || c1 % blk || k % blk)
        return brasa_fail(err, BRASA_EINVAL, "shard rows [%lld, %lld) columns [%lld, %lld) of a "
                          "%s matrix of %lld columns: columns must be whole blocks of %lld",
                          (long long)r0, (long long)r1, (long long)c0, (long long)c1, qi->name,
                          (long long)k, (long long)blk);
    size_t rb = qtype_row_bytes(t, k), ob = qtype_row_bytes(t, c1 - c0),
           off = (size_t)(c0 / blk) * qi->block_bytes;
    for (int64_t r = r0; r < r1; r++)
        memcpy((uint8_t *)out + (size_t)(r - r0) * pitch, (const uint8_t *)w + (size_t)r * rb + off,
               ob);
    return BRASA_OK;
}
