/* libFuzzer harness for everything that reads a model file after the GGUF parser (`make fuzz`):
 * the family loaders, the tokenizer and chat template from the metadata, a session and a few
 * CPU forward steps with greedy generation. Random bytes seldom get past the parser
 * (fuzz_gguf.c covers it), so each input here is a list of edits to one of a few valid models
 * (the fixtures' Q4_K_M file of each family, the F32 stories260K): keys replaced by values of
 * another type, deleted, arrays cut short or given odd elements; tensors reshaped, retyped,
 * renamed, deleted or filled with a byte pattern (NaN and infinities included). The edited model
 * is written with the GGUF writer and loaded as a user's file would be. The sanitizers report
 * any bad access; a load that fails must return a status with a message; one that succeeds
 * must generate without a crash, whatever the weights hold.
 *
 * Seeds are read from $BRASA_SHARED (or ../shared); the edited file goes to $TMPDIR. With
 * BRASA_FUZZ_SAY=1 each edit is printed (to read what a crashing input does). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brasa.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "tok/tok.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SEEDS 8
#define MAX_EDITS 12
#define MAX_TENSOR_BYTES (8u << 20) /* an edited tensor larger than this is left as it was */

static struct gguf_file *seeds[MAX_SEEDS];
static int n_seeds;
static char tmp_path[1024];
static uint8_t *zeros;          /* MAX_TENSOR_BYTES of zeros: the data of grown tensors */
static bool say;                /* BRASA_FUZZ_SAY: print each edit */

/* The input as a stream of edit bytes (zeros once it runs out). */
struct rd {
    const uint8_t *p;
    size_t n;
};
static uint32_t rd_u8(struct rd *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}
static uint32_t rd_u16(struct rd *r)
{
    return rd_u8(r) | rd_u8(r) << 8;
}
static uint32_t rd_u32(struct rd *r)
{
    return rd_u16(r) | rd_u16(r) << 16;
}
/* A string of up to cap - 1 bytes, none of them NUL, into s. */
static void rd_str(struct rd *r, char *s, size_t cap)
{
    size_t n = rd_u8(r) % cap;
    for (size_t k = 0; k < n; k++)
        s[k] = (char)(rd_u8(r) | 1);
    s[n] = 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    static const char *const files[] = {
        "fixtures/llama.Q4_K_M.gguf", "fixtures/qwen2.Q4_K_M.gguf", "fixtures/granite.Q4_K_M.gguf",
        "fixtures/qwen3.Q4_K_M.gguf", "fixtures/qwen35.Q4_K_M.gguf", "models/stories260K.gguf"};
    const char *dir = getenv("BRASA_SHARED");
    if (!dir || !*dir)
        dir = "../shared";
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        struct brasa_err err;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (gguf_open(&seeds[n_seeds], path, &err) == BRASA_OK)
            n_seeds++;
        else
            fprintf(stderr, "fuzz_model: %s\n", err.msg);
    }
    if (!n_seeds) {
        fprintf(stderr, "fuzz_model: no seed model under %s (set BRASA_SHARED)\n", dir);
        exit(1);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_path, sizeof tmp_path, "%s/brasa_fuzz_model_%d.gguf", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    say = getenv("BRASA_FUZZ_SAY") && strcmp(getenv("BRASA_FUZZ_SAY"), "0") != 0;
    zeros = calloc(1, MAX_TENSOR_BYTES);
    if (!zeros)
        exit(1);
    return 0;
}

/* One key as the edits leave it. */
struct kv_ed {
    bool drop;
    int kind;                /* 0 as read; 1 u32; 2 f32; 3 string; 4 array cut to len; 5 an
                              * element of the array replaced */
    uint32_t u;              /* kinds 1, 2: the bits; 5: the element's bits */
    uint64_t len;            /* kind 4: the new length; kind 5: the element */
    char str[24];            /* kind 3, and kind 5 of a string array */
};

struct t_ed {
    bool drop;
    const char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    bool fill;               /* the data: the 4-byte pattern pat, repeated */
    uint32_t pat;
};

static const uint32_t types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q4_0,
                                 GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
                                 GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q2_K, GGML_TYPE_Q8_K};
/* patterns that matter to the arithmetic: NaN, infinities, huge and tiny values (as F32 and as
 * two F16 / BF16); the last slot stands for four bytes of the input (zero among them) */
static const uint32_t pats[] = {0x7FC00000u, 0x7F800000u, 0xFF800000u, 0x7F7FFFFFu, 0x00000001u,
                                0x7C007C00u, 0x7E007E00u, 0xFC00FC00u, 0x7BFF7BFFu, 0};

static uint64_t tensor_bytes(uint32_t type, int n_dims, const int64_t *ne)
{
    uint64_t rb = qtype_row_bytes(type, ne[0]), rows = 1;
    if (!rb || ne[0] <= 0)
        return 0;
    for (int d = 1; d < n_dims; d++) {
        if (ne[d] <= 0 || rows > MAX_TENSOR_BYTES)
            return 0;
        rows *= (uint64_t)ne[d];
    }
    return rows > MAX_TENSOR_BYTES / rb ? 0 : rb * rows;
}

/* Writes the edited model; 0 when the writer took it. */
static int write_model(const struct gguf_file *f, struct kv_ed *ke, struct t_ed *te,
                       uint8_t **bufs)
{
    struct gguf_writer *w;
    struct brasa_err err;
    if (gguf_writer_new(&w, &err))
        return -1;
    brasa_status st = BRASA_OK;
    for (uint64_t i = 0; i < f->n_kv && !st; i++) {
        const struct gguf_kv *kv = &f->kv[i];
        struct kv_ed *e = &ke[i];
        if (e->drop)
            continue;
        switch (e->kind) {
        case 1: st = gguf_writer_set_u32(w, kv->key, e->u, &err); break;
        case 2: {
            float x;
            memcpy(&x, &e->u, 4);
            st = gguf_writer_set_f32(w, kv->key, x, &err);
            break;
        }
        case 3: st = gguf_writer_set_str(w, kv->key, e->str, &err); break;
        case 4:
        case 5: {
            struct gguf_kv c = *kv;
            struct gguf_str *strs = NULL;
            uint8_t *arr = NULL;
            if (e->kind == 4) {
                c.arr_len = e->len;
            } else if (kv->arr_type == GGUF_T_STRING) {
                if (!(strs = malloc(kv->arr_len * sizeof *strs))) {
                    st = BRASA_ENOMEM;
                    break;
                }
                memcpy(strs, kv->arr_strs, kv->arr_len * sizeof *strs);
                strs[e->len] = (struct gguf_str){strlen(e->str), e->str};
                c.arr_strs = strs;
            } else {
                size_t es = gguf_vtype_size(kv->arr_type);
                if (!(arr = malloc(kv->arr_len * es))) {
                    st = BRASA_ENOMEM;
                    break;
                }
                memcpy(arr, kv->arr_data, kv->arr_len * es);
                memcpy(arr + e->len * es, &e->u, es < 4 ? es : 4);
                c.arr_data = arr;
            }
            st = gguf_writer_copy_kv(w, &c, &err);
            free(strs);
            free(arr);
            break;
        }
        default: st = gguf_writer_copy_kv(w, kv, &err); break;
        }
    }
    for (uint64_t i = 0; i < f->n_tensors && !st; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        struct t_ed *e = &te[i];
        if (e->drop)
            continue;
        uint64_t nb = tensor_bytes(e->type, e->n_dims, e->ne);
        const void *data = t->data;
        if (e->fill) {
            if (!(bufs[i] = malloc(nb))) {
                st = BRASA_ENOMEM;
                break;
            }
            for (uint64_t o = 0; o < nb; o += 4)
                memcpy(bufs[i] + o, &e->pat, nb - o < 4 ? nb - o : 4);
            data = bufs[i];
        } else if (nb > t->nbytes) {
            data = zeros;
        }
        st = gguf_writer_add_tensor(w, e->name, e->type, e->n_dims, e->ne, data, nb, &err);
    }
    if (!st)
        st = gguf_writer_write(w, tmp_path, &err);
    gguf_writer_free(w);
    return st ? -1 : 0;
}

static void apply_edit(const struct gguf_file *f, struct kv_ed *ke, struct t_ed *te,
                       struct rd *r)
{
    uint32_t op = rd_u8(r) % 12;
    if (op < 6 && f->n_kv) {
        uint64_t i = rd_u16(r) % f->n_kv;
        const struct gguf_kv *kv = &f->kv[i];
        struct kv_ed *e = &ke[i];
        switch (op) {
        case 0: e->kind = 1, e->u = rd_u32(r); break;
        case 1: e->kind = 1, e->u = rd_u8(r); break; /* small counts: 0, 1, odd sizes */
        case 2: e->kind = 2, e->u = rd_u32(r); break;
        case 3: e->kind = 3, rd_str(r, e->str, sizeof e->str); break;
        case 4: e->drop = true; break;
        default: /* arrays: cut short, or one element replaced */
            if (kv->type != GGUF_T_ARRAY || !kv->arr_len)
                break;
            if (rd_u8(r) & 1) {
                e->kind = 4, e->len = rd_u16(r) % kv->arr_len;
            } else {
                e->kind = 5, e->len = rd_u32(r) % kv->arr_len, e->u = rd_u32(r);
                rd_str(r, e->str, sizeof e->str);
            }
            break;
        }
        if (say)
            fprintf(stderr, "fuzz_model: key %s: op %u, kind %d, drop %d, u %u, len %llu, str \"%s\"\n",
                    kv->key, op, e->kind, e->drop, e->u, (unsigned long long)e->len, e->str);
        return;
    }
    if (!f->n_tensors)
        return;
    uint64_t i = rd_u16(r) % f->n_tensors;
    struct t_ed *e = &te[i];
    switch (op) {
    case 6: { /* a dimension */
        int d = (int)(rd_u8(r) % GGUF_MAX_DIMS);
        int64_t ne[GGUF_MAX_DIMS];
        memcpy(ne, e->ne, sizeof ne);
        ne[d] = rd_u16(r) % 2048;
        int nd = e->n_dims > d + 1 ? e->n_dims : d + 1;
        if (tensor_bytes(e->type, nd, ne))
            memcpy(e->ne, ne, sizeof ne), e->n_dims = nd;
        break;
    }
    case 7: { /* the type */
        uint32_t t = types[rd_u8(r) % (sizeof types / sizeof types[0])];
        if (tensor_bytes(t, e->n_dims, e->ne))
            e->type = t;
        break;
    }
    case 8: e->drop = true; break;
    case 9: { /* names swapped */
        struct t_ed *o = &te[rd_u16(r) % f->n_tensors];
        const char *n = e->name;
        e->name = o->name, o->name = n;
        break;
    }
    case 10: { /* two dims swapped (the bytes stay, the shape is wrong) */
        const int64_t sw[GGUF_MAX_DIMS] = {e->ne[1], e->ne[0], e->ne[2], e->ne[3]};
        if (e->n_dims >= 2 && tensor_bytes(e->type, e->n_dims, sw))
            memcpy(e->ne, sw, sizeof sw);
        break;
    }
    default: { /* the data filled with a pattern */
        uint32_t k = rd_u8(r) % (sizeof pats / sizeof pats[0]);
        e->fill = true;
        e->pat = k + 1 < sizeof pats / sizeof pats[0] ? pats[k] : rd_u32(r);
        break;
    }
    }
    if (say)
        fprintf(stderr, "fuzz_model: tensor %s (now %s): op %u, type %u, shape [%lld %lld %lld %lld] "
                "(%d dims), drop %d, fill %d (0x%08x)\n", f->tensors[i].name, e->name, op,
                e->type, (long long)e->ne[0], (long long)e->ne[1], (long long)e->ne[2],
                (long long)e->ne[3], e->n_dims, e->drop, e->fill, e->pat);
}

static int on_token(void *ud, int32_t id, const char *text, size_t len)
{
    (void)id;
    volatile size_t *sink = ud;
    *sink += len + (len ? (unsigned char)text[len - 1] : 0);
    return 0;
}

/* What a user's run does with a model that loaded: tokenize, generate (in a context of 32
 * positions, or with file_ctx of the length the file gives, capped as a user's run caps it). */
static void use_model(struct brasa_model *m, bool file_ctx)
{
    struct brasa_err err;
    struct brasa_model_info info;
    brasa_model_get_info(m, &info);
    const struct tokenizer *tok = brasa_model_tokenizer(m);
    static const char text[] = "Hello world! Olá, mundo. 123 <|im_start|> \xe2\x96\x81x \xf0\x9f\x94\xa5";
    int32_t *ids = NULL;
    size_t n = 0;
    if (tok_encode(tok, text, sizeof text - 1, TOK_ADD_SPECIAL | TOK_PARSE_SPECIAL, &ids, &n, &err) == BRASA_OK) {
        char *back = NULL;
        if (tok_decode(tok, ids, n, &back, &err) == BRASA_OK)
            free(back);
    }
    struct brasa_session *s = NULL;
    struct brasa_session_opts so = {.n_ctx = file_ctx ? 0 : 32};
    if (brasa_session_new(m, &so, &s, &err) == BRASA_OK) {
        int32_t prompt[4] = {1, 2, 3, 4};
        int np = 0;
        for (size_t k = 0; k < n && np < 4; k++)
            if (ids[k] >= 0 && ids[k] < info.n_vocab)
                prompt[np++] = ids[k];
        for (int k = 0; k < 4; k++)
            prompt[k] = prompt[k] % (info.n_vocab > 0 ? info.n_vocab : 1);
        struct brasa_sampler_params sp;
        brasa_sampler_defaults(&sp);
        sp.temperature = 0;
        struct brasa_sampler *smp = NULL;
        volatile size_t sink = 0;
        if (brasa_sampler_new(&sp, info.n_vocab, &smp, &err) == BRASA_OK) {
            brasa_generate(s, smp, prompt, 4, 3, BRASA_GEN_IGNORE_EOS, on_token, (void *)&sink,
                           NULL, &err);
            brasa_sampler_free(smp);
        }
        brasa_session_free(s);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rd r = {data, size};
    const struct gguf_file *f = seeds[rd_u8(&r) % n_seeds];
    if (say)
        fprintf(stderr, "fuzz_model: seed with %llu keys, %llu tensors\n",
                (unsigned long long)f->n_kv, (unsigned long long)f->n_tensors);
    struct kv_ed *ke = calloc(f->n_kv ? f->n_kv : 1, sizeof *ke);
    struct t_ed *te = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *te);
    uint8_t **bufs = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *bufs);
    if (!ke || !te || !bufs)
        goto done;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        te[i] = (struct t_ed){.name = t->name, .type = t->type, .n_dims = t->n_dims};
        memcpy(te[i].ne, t->ne, sizeof t->ne);
    }
    for (int k = 0; k < MAX_EDITS && r.n; k++)
        apply_edit(f, ke, te, &r);
    if (write_model(f, ke, te, bufs) == 0) {
        /* the chat template the metadata names, rendered */
        struct gguf_file *g = NULL;
        struct brasa_err terr;
        enum chat_template_id ct;
        const char *note = NULL;
        if (gguf_open(&g, tmp_path, &terr) == BRASA_OK &&
            chat_template_pick(g, NULL, &ct, &note, &terr) == BRASA_OK) {
            static const struct chat_msg msgs[] = {{"system", "Be brief."}, {"user", "Oi!"},
                                                   {"assistant", "Olá."}, {"user", "2+2?"}};
            struct chat_opts co = {.add_assistant = true};
            char *out = NULL;
            if (chat_render(ct, msgs, 4, &co, &out, &terr) == BRASA_OK)
                free(out);
        }
        if (g)
            gguf_close(g);
        struct brasa_model *m = NULL;
        struct brasa_err err;
        memset(err.msg, 0x55, sizeof err.msg);
        struct brasa_model_opts mo = {.n_threads = 1, .backend = BRASA_BACKEND_CPU,
                                      .keep_mapped = true};
        brasa_status st = brasa_model_load(tmp_path, &mo, &m, &err);
        if (say)
            fprintf(stderr, "fuzz_model: load: %s\n", st ? err.msg : "ok");
        if (st == BRASA_OK) {
            use_model(m, size % 4 == 0);
            brasa_model_free(m);
        } else if (m || !memchr(err.msg, 0, sizeof err.msg) || !err.msg[0] ||
                   st == BRASA_EDEVICE || st == BRASA_ETIMEOUT || st == BRASA_ECANCELLED) {
            fprintf(stderr, "fuzz_model: load failed with status %d and no proper message\n",
                    (int)st);
            abort();
        }
        remove(tmp_path);
    }
done:
    for (uint64_t i = 0; bufs && i < f->n_tensors; i++)
        free(bufs[i]);
    free(bufs);
    free(te);
    free(ke);
    return 0;
}
