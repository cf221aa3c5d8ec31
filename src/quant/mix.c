#include "quant/mix.h"

#include <string.h>
#include <strings.h>

#include "quant/quant.h"

static const struct {
    const char *name;
    int ftype;
    uint32_t base; /* the type most tensors get */
} mixes[] = {
    {"F32", FTYPE_ALL_F32, GGML_TYPE_F32},  {"F16", FTYPE_F16, GGML_TYPE_F16},
    {"BF16", FTYPE_BF16, GGML_TYPE_BF16},   {"Q4_0", FTYPE_Q4_0, GGML_TYPE_Q4_0},
    {"Q4_1", FTYPE_Q4_1, GGML_TYPE_Q4_1},   {"Q5_0", FTYPE_Q5_0, GGML_TYPE_Q5_0},
    {"Q5_1", FTYPE_Q5_1, GGML_TYPE_Q5_1},   {"Q8_0", FTYPE_Q8_0, GGML_TYPE_Q8_0},
    {"Q4_K_S", FTYPE_Q4_K_S, GGML_TYPE_Q4_K}, {"Q4_K_M", FTYPE_Q4_K_M, GGML_TYPE_Q4_K},
    {"Q5_K_S", FTYPE_Q5_K_S, GGML_TYPE_Q5_K}, {"Q5_K_M", FTYPE_Q5_K_M, GGML_TYPE_Q5_K},
    {"Q6_K", FTYPE_Q6_K, GGML_TYPE_Q6_K},
};
#define N_MIXES (sizeof mixes / sizeof mixes[0])

int quant_ftype_by_name(const char *name)
{
    for (size_t i = 0; i < N_MIXES; i++)
        if (!strcasecmp(name, mixes[i].name))
            return mixes[i].ftype;
    return -1;
}

const char *quant_ftype_name(int ftype)
{
    for (size_t i = 0; i < N_MIXES; i++)
        if (mixes[i].ftype == ftype)
            return mixes[i].name;
    return NULL;
}

const char *quant_ftype_list(void)
{
    return "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k";
}

static uint32_t base_type(int ftype)
{
    for (size_t i = 0; i < N_MIXES; i++)
        if (mixes[i].ftype == ftype)
            return mixes[i].base;
    return GGML_TYPE_F32;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static bool is_attn_v(const char *name)
{
    return strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight");
}

void quant_mix_begin(struct quant_mix *m, int ftype, const char *const *names, size_t n)
{
    memset(m, 0, sizeof *m);
    m->ftype = ftype;
    m->tied = true;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(names[i], "output.weight"))
            m->tied = false;
        m->n_attn_v += is_attn_v(names[i]);
        m->n_ffn_down += strstr(names[i], "ffn_down") != NULL;
    }
}

/* Which tensors are quantized at all: 2-D+ weights except norms and the small conv kernels. */
static bool quantizable(const char *name, int n_dims)
{
    return n_dims >= 2 && ends_with(name, "weight") && !strstr(name, "_norm.weight") &&
           !strstr(name, "ssm_conv1d") && !strstr(name, "ffn_gate_inp.weight");
}

static bool use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* Rows that are not a whole number of the type's blocks take a type with 32-blocks. */
static uint32_t fallback(uint32_t t, int64_t ncols)
{
    const struct qtype_info *q = qtype_get(t);
    if (!q || ncols % q->block == 0)
        return t;
    switch (t) {
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K: t = GGML_TYPE_Q4_0; break;
    case GGML_TYPE_Q4_K: t = GGML_TYPE_Q5_0; break;
    case GGML_TYPE_Q5_K: t = GGML_TYPE_Q5_1; break;
    case GGML_TYPE_Q6_K: t = GGML_TYPE_Q8_0; break;
    default: break;
    }
    q = qtype_get(t);
    return q && ncols % q->block == 0 ? t : GGML_TYPE_F16;
}

uint32_t quant_mix_type(struct quant_mix *m, const char *name, int n_dims, const int64_t *ne)
{
    uint32_t base = base_type(m->ftype);
    if (!quantizable(name, n_dims))
        return GGML_TYPE_F32;
    if (base == GGML_TYPE_F32 || base == GGML_TYPE_F16 || base == GGML_TYPE_BF16)
        return base;
    uint32_t t = base;
    int f = m->ftype;
    bool output = !strcmp(name, "output.weight") || (m->tied && !strcmp(name, "token_embd.weight"));
    if (output) {
        const struct qtype_info *q = qtype_get(base);
        if (q && ne[0] % q->block != 0)
            t = GGML_TYPE_Q8_0;
        else if (base != GGML_TYPE_Q8_0)
            t = GGML_TYPE_Q6_K;
    } else if (!strcmp(name, "token_embd.weight")) {
        /* the base type */
    } else if (is_attn_v(name)) {
        if ((f == FTYPE_Q4_K_M || f == FTYPE_Q5_K_M) && use_more_bits(m->i_attn_v, m->n_attn_v))
            t = GGML_TYPE_Q6_K;
        else if (f == FTYPE_Q4_K_S && m->i_attn_v < 4)
            t = GGML_TYPE_Q5_K;
        m->i_attn_v++;
    } else if (strstr(name, "ffn_down")) {
        int i = m->i_ffn_down, n = m->n_ffn_down;
        if ((f == FTYPE_Q4_K_M || f == FTYPE_Q5_K_M) && use_more_bits(i, n))
            t = GGML_TYPE_Q6_K;
        else if (f == FTYPE_Q4_K_S && i < n / 8)
            t = GGML_TYPE_Q5_K;
        m->i_ffn_down++;
    }
    return fallback(t, ne[0]);
}
