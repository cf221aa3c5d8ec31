/* Tokenizer loading (tokenizer.ggml.* keys), special-token partitioning, encode dispatch,
 * token pieces, whole-sequence and streaming detokenization.
 *
 * Behaviour follows the reference implementation (llama.cpp's llama-vocab.cpp): default
 * special ids per tokenizer type, tokens recognised by their text as end-of-generation or
 * fill-in-the-middle markers get the CONTROL attribute, the special-token cache is ordered
 * longest text first, and parse_special=false still splits out user-defined tokens. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tok/tok.h"
#include "tok/tok_impl.h"
#include "tok/unicode.h"

#define TOK_MAX_VOCAB (1 << 24)

/* ---- loading ---- */

static void build_byte_map(struct tokenizer *t)
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t cp = self ? (uint32_t)b : (uint32_t)(256 + n++);
        t->byte_enc_len[b] = (uint8_t)uni_encode(cp, t->byte_enc[b]);
    }
}

/* byte-level BPE: stand-in code point -> byte, or -1. Printable bytes stand for
 * themselves; the other 68 (0x00-0x20, 0x7F-0xA0, 0xAD) map to U+0100.. in byte order. */
static int byte_dec(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp >= 0x100 + 68)
        return -1;
    uint32_t n = cp - 0x100;
    return n < 33 ? (int)n : n < 67 ? (int)(0x7F + n - 33) : 0xAD;
}

static brasa_status get_id(const struct gguf_file *f, const char *key, int32_t n_vocab, int32_t *id,
                           struct brasa_err *err)
{
    if (!gguf_find_kv(f, key))
        return BRASA_OK;
    uint32_t v;
    brasa_status st = gguf_get_u32(f, key, &v, err);
    if (st)
        return st;
    if ((int64_t)v < n_vocab) /* an out-of-range id keeps the default, as the reference does */
        *id = (int32_t)v;
    return BRASA_OK;
}

static brasa_status get_flag(const struct gguf_file *f, const char *key, bool *v, struct brasa_err *err)
{
    if (!gguf_find_kv(f, key))
        return BRASA_OK;
    return gguf_get_bool(f, key, v, err);
}

struct pre_entry {
    const char *name;
    enum pretok_id id;
    bool no_clean, ignore_merges, add_bos;
};
static const struct pre_entry pre_table[] = {
    {"default", PRE_DEFAULT, 0, 0, 0},
    {"llama3", PRE_LLAMA3, 0, 1, 1}, {"llama-v3", PRE_LLAMA3, 0, 1, 1},
    {"llama-bpe", PRE_LLAMA3, 0, 1, 1}, {"falcon3", PRE_LLAMA3, 0, 1, 1},
    {"falcon-h1", PRE_LLAMA3, 0, 1, 1}, {"pixtral", PRE_LLAMA3, 0, 1, 1},
    {"dbrx", PRE_LLAMA3, 0, 0, 0}, {"smaug-bpe", PRE_LLAMA3, 0, 0, 0},
    {"deepseek-llm", PRE_DEEPSEEK_LLM, 1, 0, 0},
    {"deepseek-coder", PRE_DEEPSEEK_CODER, 1, 0, 0},
    {"falcon", PRE_FALCON, 0, 0, 0},
    {"mpt", PRE_GPT2, 0, 0, 0}, {"gpt-2", PRE_GPT2, 0, 0, 0}, {"gpt2", PRE_GPT2, 0, 0, 0},
    {"phi-2", PRE_GPT2, 0, 0, 0}, {"olmo", PRE_GPT2, 0, 0, 0}, {"jais", PRE_GPT2, 0, 0, 0},
    {"gpt-neox", PRE_DEFAULT, 0, 0, 0},
    {"starcoder", PRE_STARCODER, 0, 0, 0}, {"refact", PRE_STARCODER, 0, 0, 0},
    {"codeshell", PRE_STARCODER, 0, 0, 0}, {"smollm", PRE_STARCODER, 1, 0, 0},
    {"command-r", PRE_STARCODER, 1, 0, 0},
    {"qwen2", PRE_QWEN2, 1, 0, 0}, {"deepseek-r1-qwen", PRE_QWEN2, 1, 0, 0},
    {"stablelm2", PRE_QWEN2, 0, 0, 0}, {"megrez", PRE_QWEN2, 0, 0, 0},
    {"qwen35", PRE_QWEN35, 1, 0, 0},
};

bool pretok_from_name(const char *name, enum pretok_id *out)
{
    if (!name || !*name) {
        *out = PRE_DEFAULT;
        return true;
    }
    for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0]; i++)
        if (strcmp(pre_table[i].name, name) == 0) {
            *out = pre_table[i].id;
            return true;
        }
    return false;
}

const char *pretok_name(enum pretok_id id)
{
    static const char *names[] = {"default", "gpt2", "llama3", "qwen2", "qwen35", "starcoder",
                                  "falcon", "deepseek-llm", "deepseek-coder"};
    return (unsigned)id < sizeof names / sizeof names[0] ? names[id] : "?";
}

struct tok_warn {
    char msg[256];
};
static _Thread_local struct tok_warn last_warning;

const char *tok_load_warning(void)
{
    return last_warning.msg[0] ? last_warning.msg : NULL;
}

static brasa_status load_type(struct tokenizer *t, const struct gguf_file *f, int flags,
                              struct brasa_err *err)
{
    char *model = NULL, *pre = NULL;
    brasa_status st = gguf_get_str(f, "tokenizer.ggml.model", &model, err);
    if (st)
        return brasa_wrap(err, st, "tokenizer");
    if (gguf_find_kv(f, "tokenizer.ggml.pre") && (st = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err))) {
        free(model);
        return brasa_wrap(err, st, "tokenizer");
    }
    t->bos = t->eos = t->eot = t->unk = t->sep = t->pad = -1;
    if (strcmp(model, "llama") == 0) {
        t->type = TOKT_SPM;
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_space_prefix = true, t->add_bos = true;
    } else if (strcmp(model, "gpt2") == 0) {
        t->type = TOKT_BPE;
        t->bos = 11, t->eos = 11;
        t->clean_spaces = true;
        const struct pre_entry *pe = NULL;
        for (size_t i = 0; pre && i < sizeof pre_table / sizeof pre_table[0]; i++)
            if (strcmp(pre_table[i].name, pre) == 0)
                pe = &pre_table[i];
        if (pe) {
            t->pre = pe->id;
            t->clean_spaces = !pe->no_clean;
            t->ignore_merges = pe->ignore_merges;
            t->add_bos = pe->add_bos;
        } else if (!pre || !*pre) {
            t->pre = PRE_DEFAULT;
            snprintf(last_warning.msg, sizeof last_warning.msg,
                     "tokenizer.ggml.pre is missing: using the 'default' pre-tokenizer");
        } else if (flags & TOK_LOAD_FALLBACK_PRE) {
            t->pre = PRE_DEFAULT;
            snprintf(last_warning.msg, sizeof last_warning.msg,
                     "unknown pre-tokenizer '%.64s': falling back to 'default' (tokens may differ from the reference)",
                     pre);
        } else {
            st = brasa_fail(err, BRASA_EUNSUPPORTED,
                            "unknown pre-tokenizer tokenizer.ggml.pre = '%.64s' (known: default, gpt2/gpt-2, "
                            "llama3/llama-bpe, qwen2, qwen35, starcoder, refact, deepseek-llm, deepseek-coder, "
                            "falcon, mpt, ...); --fallback-pre uses 'default'", pre);
        }
    } else if (strcmp(model, "bert") == 0) {
        t->type = TOKT_WPM;
        t->bos = 101, t->unk = 100, t->sep = 102, t->pad = 0;
        t->add_bos = true, t->add_sep = true, t->clean_spaces = true;
        t->wpm_lowercase = true, t->wpm_strip_accents = true;
    } else {
        st = brasa_fail(err, BRASA_EUNSUPPORTED,
                        "unsupported tokenizer.ggml.model '%.64s' (supported: llama, gpt2, bert)", model);
    }
    free(model);
    free(pre);
    if (!st)
        st = get_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err);
    return st;
}

static brasa_status load_tokens(struct tokenizer *t, const struct gguf_file *f, struct brasa_err *err)
{
    const void *data;
    uint64_t n;
    brasa_status st = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_T_STRING, &data, &n, err);
    if (st)
        return brasa_wrap(err, st, "tokenizer");
    if (n == 0 || n > TOK_MAX_VOCAB)
        return brasa_fail(err, BRASA_EFORMAT, "tokenizer.ggml.tokens has %llu entries (1..%d expected)",
                          (unsigned long long)n, TOK_MAX_VOCAB);
    const struct gguf_str *strs = data;
    t->n_vocab = (int32_t)n;
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += (strs[i].len ? strs[i].len : 24) + 1;
    t->arena = malloc(total);
    t->text = calloc(n, sizeof *t->text);
    t->len = calloc(n, sizeof *t->len);
    t->score = calloc(n, sizeof *t->score);
    t->attr = calloc(n, sizeof *t->attr);
    t->eog = calloc(n, 1);
    if (!t->arena || !t->text || !t->len || !t->score || !t->attr || !t->eog)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for %llu tokens", (unsigned long long)n);
    if ((st = strmap_init(&t->vocab, (uint32_t)n, err)))
        return st;
    char *p = t->arena;
    for (uint64_t i = 0; i < n; i++) {
        size_t l = (size_t)strs[i].len;
        if (l == 0) /* the reference names empty tokens this way */
            l = (size_t)snprintf(p, 24, "[EMPTY_%llu]", (unsigned long long)i);
        else
            memcpy(p, strs[i].ptr, l);
        p[l] = 0;
        if (l > 0xFFFFFFF)
            return brasa_fail(err, BRASA_EFORMAT, "token %llu is too long", (unsigned long long)i);
        t->text[i] = p;
        t->len[i] = (uint32_t)l;
        if ((int)l > t->max_token_len)
            t->max_token_len = (int)l;
        int32_t dup = strmap_put(&t->vocab, p, (uint32_t)l, (int32_t)i);
        if (dup >= 0)
            return brasa_fail(err, BRASA_EFORMAT, "duplicate token in vocabulary: '%.40s' has ids %d and %llu",
                              p, t->vocab.val[dup], (unsigned long long)i);
        p += l + 1;
        t->attr[i] = TA_NORMAL;
    }
    if (gguf_find_kv(f, "tokenizer.ggml.scores")) {
        const struct gguf_kv *kv = gguf_find_kv(f, "tokenizer.ggml.scores");
        if (kv->type != GGUF_T_ARRAY || (kv->arr_type != GGUF_T_FLOAT32 && kv->arr_type != GGUF_T_INT32) ||
            kv->arr_len < n)
            return brasa_fail(err, BRASA_EFORMAT,
                              "tokenizer.ggml.scores must be an f32 or i32 array of at least %llu entries",
                              (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t raw;
            memcpy(&raw, (const char *)kv->arr_data + 4 * i, 4);
            if (kv->arr_type == GGUF_T_FLOAT32)
                memcpy(&t->score[i], &raw, 4);
            else
                t->score[i] = (float)(int32_t)raw;
        }
    }
    if (gguf_find_kv(f, "tokenizer.ggml.token_type")) {
        if ((st = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_T_INT32, &data, &n, err)))
            return brasa_wrap(err, st, "tokenizer");
        if (n < (uint64_t)t->n_vocab)
            return brasa_fail(err, BRASA_EFORMAT, "tokenizer.ggml.token_type has %llu entries for %d tokens",
                              (unsigned long long)n, t->n_vocab);
        static const uint16_t type_attr[7] = {0, TA_NORMAL, TA_UNKNOWN, TA_CONTROL, TA_USER_DEFINED,
                                              TA_UNUSED, TA_BYTE};
        for (int32_t i = 0; i < t->n_vocab; i++) {
            int32_t ty;
            memcpy(&ty, (const char *)data + 4 * (size_t)i, 4);
            t->attr[i] = (ty >= 0 && ty < 7) ? type_attr[ty] : 0;
        }
    }
    return BRASA_OK;
}

static brasa_status load_merges(struct tokenizer *t, const struct gguf_file *f, struct brasa_err *err)
{
    const void *data;
    uint64_t n;
    brasa_status st = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_T_STRING, &data, &n, err);
    if (st)
        return brasa_wrap(err, st, "byte-level BPE needs its merges");
    if (n > TOK_MAX_VOCAB * 4ull)
        return brasa_fail(err, BRASA_EFORMAT, "tokenizer.ggml.merges has too many entries (%llu)",
                          (unsigned long long)n);
    const struct gguf_str *strs = data;
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += strs[i].len + 1;
    if (!(t->merge_arena = malloc(total ? total : 1)))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for %llu merges", (unsigned long long)n);
    if ((st = strmap_init(&t->merges, (uint32_t)n, err)))
        return st;
    char *p = t->merge_arena;
    for (uint64_t i = 0; i < n; i++) {
        size_t l = strs[i].len;
        memcpy(p, strs[i].ptr, l);
        p[l] = 0;
        /* the pair splits at the first space after the first byte; no space gives ("", "") */
        const char *sp = l > 1 ? memchr(p + 1, ' ', l - 1) : NULL;
        if (sp)
            strmap_put(&t->merges, p, (uint32_t)l, (int32_t)i); /* the first rank of a pair wins */
        else
            strmap_put(&t->merges, " ", 1, (int32_t)i);
        p += l + 1;
    }
    return BRASA_OK;
}

/* SentencePiece: true when every U+2581 inside a token follows another U+2581 */
static bool spm_chunkable(const struct tokenizer *t)
{
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->text[id];
        size_t n = t->len[id];
        for (const char *p = s + 1; (p = memmem(p, n - (size_t)(p - s), "\xe2\x96\x81", 3)); p++)
            if (p - s < 3 || memcmp(p - 3, "\xe2\x96\x81", 3) != 0)
                return false;
    }
    return true;
}

static int32_t find_text(const struct tokenizer *t, const char *s)
{
    return tok_find(t, s, strlen(s));
}

/* Text-recognised special tokens, as the reference marks them. */
static void mark_specials(struct tokenizer *t, int32_t eom)
{
    static const char *eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                      "<|end_of_text|>", "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>",
                                      "<end_of_utterance>", NULL};
    static const char *fim_names[6][9] = {
        {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", NULL},
        {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", NULL},
        {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", NULL},
        {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL},
        {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL},
        {"<|file_sep|>", NULL},
    };
    static const char *eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                      "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                      "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                                      "<｜end▁of▁sentence｜>", NULL};
    /* the reference walks a hash map, so which candidate wins is unspecified: take the lowest id */
    if (t->eot < 0)
        for (int32_t id = 0; id < t->n_vocab && t->eot < 0; id++)
            for (int k = 0; eot_names[k]; k++)
                if (strcmp(t->text[id], eot_names[k]) == 0) {
                    t->eot = id;
                    t->attr[id] |= TA_CONTROL;
                }
    int32_t fim[6];
    for (int j = 0; j < 6; j++) {
        fim[j] = -1;
        for (int32_t id = 0; id < t->n_vocab && fim[j] < 0; id++)
            for (int k = 0; fim_names[j][k]; k++)
                if (strcmp(t->text[id], fim_names[j][k]) == 0) {
                    fim[j] = id;
                    t->attr[id] |= TA_CONTROL;
                }
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if ((t->attr[id] & TA_CONTROL) && strstr(t->text[id], "unused"))
            t->attr[id] |= TA_UNUSED;
    for (int j = 3; j < 6; j++)
        if (fim[j] >= 0)
            t->eog[fim[j]] = 1;
    for (int k = 0; eog_names[k]; k++) {
        int32_t id = find_text(t, eog_names[k]);
        if (id >= 0) {
            t->eog[id] = 1;
            t->attr[id] |= TA_CONTROL;
        }
    }
    static const char *shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (int k = 0; shown[k]; k++) {
        int32_t id = find_text(t, shown[k]);
        if (id >= 0)
            t->attr[id] = TA_USER_DEFINED;
    }
    if (t->eos >= 0)
        t->eog[t->eos] = 1;
    if (t->eot >= 0)
        t->eog[t->eot] = 1;
    if (eom >= 0)
        t->eog[eom] = 1;
    int32_t ret = find_text(t, "<|return|>"), call = find_text(t, "<|call|>"), end = find_text(t, "<|end|>");
    if (ret >= 0 && call >= 0 && end >= 0 && t->eog[ret] && t->eog[call] && t->eog[end]) {
        t->eog[end] = 0;
        t->attr[end] = TA_USER_DEFINED;
    }
}

struct len_id {
    uint32_t len;
    int32_t id;
};
/* longest text first; equal lengths by id, so the order is deterministic */
static int cmp_len_id(const void *a, const void *b)
{
    const struct len_id *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static brasa_status build_special_cache(struct tokenizer *t, const struct gguf_file *f, struct brasa_err *err)
{
    size_t n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->attr[id] & (TA_CONTROL | TA_USER_DEFINED | TA_UNKNOWN))
            n++;
    if (!(t->special = malloc((n ? n : 1) * sizeof *t->special)))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    struct len_id *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->attr[id] & (TA_CONTROL | TA_USER_DEFINED | TA_UNKNOWN))
            tmp[t->n_special++] = (struct len_id){t->len[id], id};
    qsort(tmp, t->n_special, sizeof *tmp, cmp_len_id);
    for (size_t i = 0; i < t->n_special; i++)
        t->special[i] = tmp[i].id;
    free(tmp);

    /* index by first byte, for the presence scan of partition() */
    if (!(t->by_first = malloc((t->n_special ? t->n_special : 1) * sizeof *t->by_first)))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    memset(t->first_start, 0, sizeof t->first_start);
    for (size_t i = 0; i < t->n_special; i++)
        t->first_start[(unsigned char)t->text[t->special[i]][0] + 1]++;
    for (int b = 0; b < 256; b++)
        t->first_start[b + 1] += t->first_start[b];
    uint32_t fill[256];
    memcpy(fill, t->first_start, sizeof fill);
    for (size_t i = 0; i < t->n_special; i++)
        t->by_first[fill[(unsigned char)t->text[t->special[i]][0]]++] = (uint32_t)i;

    /* per-model strip rules the reference applies by general.name */
    char *name = NULL;
    if (gguf_find_kv(f, "general.name") && gguf_get_str(f, "general.name", &name, NULL) == BRASA_OK) {
        for (char *c = name; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        if (strstr(name, "phi-3") || strstr(name, "phi3")) {
            for (size_t i = 0; i < t->n_special; i++)
                t->attr[t->special[i]] |= TA_RSTRIP;
            int32_t id = find_text(t, "</s>");
            if (id >= 0)
                t->attr[id] |= TA_RSTRIP;
            static const char *keep[] = {"<unk>", "<s>", "<|endoftext|>"};
            for (int k = 0; k < 3; k++)
                if ((id = find_text(t, keep[k])) >= 0)
                    t->attr[id] &= (uint16_t)~TA_RSTRIP;
        }
        free(name);
    }
    return BRASA_OK;
}

brasa_status tok_load(struct tokenizer **out, const struct gguf_file *f, int flags, struct brasa_err *err)
{
    *out = NULL;
    last_warning.msg[0] = 0;
    struct tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    build_byte_map(t);
    int32_t eom = -1, fim_ids[6] = {-1, -1, -1, -1, -1, -1};
    brasa_status st = load_type(t, f, flags, err);
    if (!st)
        st = load_tokens(t, f, err);
    if (!st && t->type == TOKT_BPE)
        st = load_merges(t, f, err);
    if (!st) {
        int32_t mask = -1;
        int32_t *ids[] = {&t->bos, &t->eos, &t->eot, &eom, &t->unk, &t->sep, &t->pad, &mask};
        static const char *keys[] = {"bos", "eos", "eot", "eom", "unknown", "seperator", "padding", "mask"};
        for (int i = 0; i < 8 && !st; i++) {
            if (*ids[i] >= t->n_vocab)
                *ids[i] = -1;
            char key[64];
            snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", keys[i]);
            st = get_id(f, key, t->n_vocab, ids[i], err);
        }
        (void)fim_ids;
    }
    if (!st)
        st = get_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err);
    if (!st)
        st = get_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err);
    if (!st)
        st = get_flag(f, "tokenizer.ggml.add_sep_token", &t->add_sep, err);
    if (!st && t->add_bos && t->bos < 0)
        st = brasa_fail(err, BRASA_EFORMAT, "tokenizer.ggml.add_bos_token is true, but there is no BOS token id");
    if (!st && t->add_eos && t->eos < 0)
        st = brasa_fail(err, BRASA_EFORMAT, "tokenizer.ggml.add_eos_token is true, but there is no EOS token id");
    if (!st && t->type == TOKT_SPM)
        t->spm_chunks = spm_chunkable(t);
    if (!st) {
        mark_specials(t, eom);
        st = build_special_cache(t, f, err);
    }
    if (st) {
        tok_free(t);
        return st;
    }
    *out = t;
    return BRASA_OK;
}

void tok_free(struct tokenizer *t)
{
    if (!t)
        return;
    strmap_free(&t->vocab);
    strmap_free(&t->merges);
    free(t->arena);
    free(t->merge_arena);
    free(t->text);
    free(t->len);
    free(t->score);
    free(t->attr);
    free(t->eog);
    free(t->special);
    free(t->by_first);
    free(t);
}

/* ---- accessors ---- */

int32_t tok_n_vocab(const struct tokenizer *t) { return t->n_vocab; }
int32_t tok_bos(const struct tokenizer *t) { return t->bos; }
int32_t tok_eos(const struct tokenizer *t) { return t->eos; }
bool tok_add_bos(const struct tokenizer *t) { return t->add_bos; }
const char *tok_pre_name(const struct tokenizer *t)
{
    return t->type == TOKT_SPM ? "spm" : t->type == TOKT_WPM ? "wpm" : pretok_name(t->pre);
}

bool tok_is_eog(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->eog[id];
}

bool tok_is_control(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->attr[id] & TA_CONTROL);
}

const char *tok_text(const struct tokenizer *t, int32_t id)
{
    return (id >= 0 && id < t->n_vocab) ? t->text[id] : NULL;
}

/* ---- encoding ---- */

struct frag {
    int32_t tok;     /* -1: raw text [off, off+len) */
    size_t off, len;
};
struct frags {
    struct frag *v;
    size_t n, cap;
};

static brasa_status frags_push(struct frags *a, struct frag f)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        struct frag *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return BRASA_ENOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = f;
    return BRASA_OK;
}

static bool c_isspace(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Splits raw fragments around one special token's occurrences (into *dst). */
static brasa_status split_one(const struct tokenizer *t, const char *text, int32_t id, const struct frags *src,
                              struct frags *dst)
{
    const char *s = t->text[id];
    size_t sl = t->len[id];
    uint16_t attr = t->attr[id];
    dst->n = 0;
    for (size_t i = 0; i < src->n; i++) {
        struct frag fr = src->v[i];
        if (fr.tok >= 0) {
            if (frags_push(dst, fr))
                return BRASA_ENOMEM;
            continue;
        }
        size_t off = fr.off, len = fr.len;
        for (;;) {
            const char *m = len >= sl ? memmem(text + off, len, s, sl) : NULL;
            if (!m) {
                if (len && frags_push(dst, (struct frag){-1, off, len}))
                    return BRASA_ENOMEM;
                break;
            }
            size_t mo = (size_t)(m - text);
            size_t ll = mo - off;
            if (attr & TA_LSTRIP)
                while (ll && c_isspace(text[off + ll - 1]))
                    ll--;
            if (ll && frags_push(dst, (struct frag){-1, off, ll}))
                return BRASA_ENOMEM;
            if (frags_push(dst, (struct frag){id, 0, 0}))
                return BRASA_ENOMEM;
            size_t ro = mo + sl, rl = off + len - ro;
            if (attr & TA_RSTRIP)
                while (rl && c_isspace(text[ro]))
                    ro++, rl--;
            off = ro, len = rl;
        }
    }
    return BRASA_OK;
}

static brasa_status partition(const struct tokenizer *t, const char *text, size_t len, bool parse_special,
                              struct frags *out)
{
    struct frags tmp = {0};
    out->n = 0;
    if (len && frags_push(out, (struct frag){-1, 0, len}))
        return BRASA_ENOMEM;
    if (!len || !t->n_special)
        return BRASA_OK;
    /* one pass finds which special tokens occur at all; only those split the text */
    uint8_t *present = calloc(t->n_special, 1);
    if (!present)
        return BRASA_ENOMEM;
    const uint16_t skip = parse_special ? 0 : (TA_CONTROL | TA_UNKNOWN);
    for (size_t p = 0; p < len; p++) {
        unsigned char b = (unsigned char)text[p];
        for (uint32_t j = t->first_start[b]; j < t->first_start[b + 1]; j++) {
            uint32_t k = t->by_first[j];
            int32_t id = t->special[k];
            if (!present[k] && !(t->attr[id] & skip) && t->len[id] <= len - p &&
                memcmp(text + p, t->text[id], t->len[id]) == 0)
                present[k] = 1;
        }
    }
    brasa_status st = BRASA_OK;
    for (size_t k = 0; k < t->n_special && !st; k++) {
        if (!present[k])
            continue;
        if (split_one(t, text, t->special[k], out, &tmp)) {
            st = BRASA_ENOMEM;
            break;
        }
        struct frags sw = *out;
        *out = tmp;
        tmp = sw;
    }
    free(present);
    free(tmp.v);
    return st;
}

static brasa_status encode_spm_frag(const struct tokenizer *t, const char *s, size_t n, bool space_prefix,
                                    struct ivec *out, struct brasa_err *err)
{
    /* escape spaces as U+2581 (3 bytes) */
    size_t spaces = space_prefix;
    for (size_t i = 0; i < n; i++)
        spaces += s[i] == ' ';
    size_t cap = n + (space_prefix ? 1 : 0) + 2 * spaces;
    char *buf = malloc(cap ? cap : 1);
    if (!buf)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    size_t k = 0;
    if (space_prefix)
        memcpy(buf + k, "\xe2\x96\x81", 3), k += 3;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ')
            memcpy(buf + k, "\xe2\x96\x81", 3), k += 3;
        else
            buf[k++] = s[i];
    }
    brasa_status st = spm_encode(t, buf, k, out, err);
    free(buf);
    return st;
}

brasa_status tok_encode(const struct tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                        size_t *n_ids, struct brasa_err *err)
{
    *ids = NULL;
    *n_ids = 0;
    bool add_special = flags & TOK_ADD_SPECIAL;
    struct frags fr = {0};
    struct ivec out = {0};
    struct bpe_ctx *bc = NULL;
    brasa_status st = partition(t, text, len, flags & TOK_PARSE_SPECIAL, &fr);
    if (!st && t->type == TOKT_BPE && !(bc = bpe_ctx_new(len)))
        st = BRASA_ENOMEM;
    if (st) {
        st = brasa_fail(err, BRASA_ENOMEM, "out of memory while tokenizing");
        goto done;
    }
    if (add_special && t->add_bos && ivec_push(&out, t->bos))
        goto oom;
    bool prev_special = true; /* SentencePiece: a space before the first text and after each special */
    for (size_t i = 0; i < fr.n && !st; i++) {
        if (fr.v[i].tok >= 0) {
            if (ivec_push(&out, fr.v[i].tok))
                goto oom;
            prev_special = true;
            continue;
        }
        const char *s = text + fr.v[i].off;
        size_t n = fr.v[i].len;
        if (t->type == TOKT_SPM)
            st = encode_spm_frag(t, s, n, t->add_space_prefix && prev_special, &out, err);
        else if (t->type == TOKT_BPE)
            st = bpe_encode(t, bc, s, n, &out, err);
        else
            st = wpm_encode(t, s, n, &out, err);
        prev_special = false;
    }
    if (st)
        goto done;
    if (add_special && t->type == TOKT_WPM && t->add_sep && t->sep >= 0 && ivec_push(&out, t->sep))
        goto oom;
    if (add_special && t->add_eos && t->type != TOKT_WPM && ivec_push(&out, t->eos))
        goto oom;
    if (!out.v && !(out.v = malloc(sizeof *out.v))) /* never NULL, even for no ids */
        goto oom;
    *ids = out.v;
    *n_ids = out.n;
    out.v = NULL;
    goto done;
oom:
    st = brasa_fail(err, BRASA_ENOMEM, "out of memory while tokenizing");
done:
    bpe_ctx_free(bc);
    free(out.v);
    free(fr.v);
    return st;
}

/* ---- pieces and decoding ---- */

static size_t put(char *buf, size_t cap, size_t at, const char *s, size_t n)
{
    if (at < cap)
        memcpy(buf + at, s, at + n <= cap ? n : cap - at);
    return at + n;
}

static int hexval(char c)
{
    return (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                          : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

size_t tok_piece(const struct tokenizer *t, int32_t id, bool special, char *buf, size_t cap)
{
    if (id < 0 || id >= t->n_vocab)
        return 0;
    uint16_t a = t->attr[id];
    const char *s = t->text[id];
    size_t n = t->len[id], k = 0;
    if (!special && (a & (TA_UNKNOWN | TA_CONTROL)))
        return 0;
    if (a & (TA_UNKNOWN | TA_CONTROL | TA_USER_DEFINED))
        return put(buf, cap, 0, s, n);
    if (a & TA_NORMAL) {
        if (t->type == TOKT_BPE) { /* byte-level: each code point stands for one byte */
            size_t pos = 0;
            while (pos < n) {
                size_t p0 = pos;
                uint32_t cp = uni_decode((const unsigned char *)s, n, &pos);
                int b = byte_dec(cp);
                if (b >= 0) {
                    char c = (char)b;
                    k = put(buf, cap, k, &c, 1);
                } else { /* the reference marks unmappable code points this way */
                    char tmp[32];
                    k = put(buf, cap, k, "[UNK_BYTE_0x", 12);
                    for (size_t q = p0; q < pos; q++) {
                        snprintf(tmp, sizeof tmp, "%02x", (unsigned char)s[q]);
                        k = put(buf, cap, k, tmp, 2);
                    }
                    k = put(buf, cap, k, s, n);
                    k = put(buf, cap, k, "]", 1);
                }
            }
            return k;
        }
        for (size_t i = 0; i < n;) { /* SentencePiece / WordPiece: U+2581 is a space */
            if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                k = put(buf, cap, k, " ", 1);
                i += 3;
            } else {
                k = put(buf, cap, k, s + i, 1);
                i++;
            }
        }
        return k;
    }
    if ((a & TA_BYTE) && n >= 6 && hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
        char c = (char)(hexval(s[3]) * 16 + hexval(s[4]));
        return put(buf, cap, 0, &c, 1);
    }
    return 0;
}

/* Piece into a growable buffer; returns false on out of memory. */
static bool piece_append(const struct tokenizer *t, int32_t id, bool special, char **buf, size_t *len,
                         size_t *cap)
{
    for (;;) {
        size_t n = tok_piece(t, id, special, *buf + *len, *cap - *len);
        if (*len + n <= *cap) {
            *len += n;
            return true;
        }
        size_t nc = (*cap + n) * 2;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return false;
        *buf = nb;
        *cap = nc;
    }
}

/* The reference's clean_up_tokenization_spaces passes. */
static size_t clean_spaces(char *s, size_t n)
{
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--;
        s[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
            total--;
            s[++i] = 0;
        }
        s[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = s[i + 1];
            if (x1 == 's' || x1 == 'm')
                total--;
            else if (i + 2 < n && ((x1 == 'r' && s[i + 2] == 'e') || (x1 == 'v' && s[i + 2] == 'e')))
                total--;
        }
        s[total++] = x;
    }
    return total;
}

brasa_status tok_decode(const struct tokenizer *t, const int32_t *ids, size_t n, char **out, struct brasa_err *err)
{
    size_t cap = 64 + n * 8, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            free(buf);
            return brasa_fail(err, BRASA_EINVAL, "token id %d is out of range (vocabulary of %d)", ids[i],
                              t->n_vocab);
        }
        size_t before = len;
        if (!piece_append(t, ids[i], false, &buf, &len, &cap)) {
            free(buf);
            return brasa_fail(err, BRASA_ENOMEM, "out of memory");
        }
        if (i == 0 && t->add_space_prefix && len > before && buf[before] == ' ') {
            memmove(buf + before, buf + before + 1, len - before - 1);
            len--;
        }
    }
    if (t->clean_spaces)
        len = clean_spaces(buf, len);
    buf[len < cap ? len : cap - 1] = 0;
    if (len >= cap) { /* cannot happen: cleaning only shrinks */
        free(buf);
        return brasa_fail(err, BRASA_ENOMEM, "decode buffer overflow");
    }
    *out = buf;
    return BRASA_OK;
}

/* ---- streaming ---- */

void tok_stream_init(struct tok_stream *s)
{
    memset(s, 0, sizeof *s);
    s->first = true;
}

struct sink {
    char *out;
    size_t cap, n;
};

static void emit(struct sink *k, const void *p, size_t n)
{
    size_t m = k->n + n <= k->cap ? n : (k->cap > k->n ? k->cap - k->n : 0);
    memcpy(k->out + k->n, p, m);
    k->n += m;
}

/* valid second-byte range for a lead byte (UTF-8 without overlongs or surrogates) */
static bool cont_ok(unsigned char lead, int pos, unsigned char b)
{
    if ((b & 0xC0) != 0x80)
        return false;
    if (pos != 1)
        return true;
    if (lead == 0xE0)
        return b >= 0xA0;
    if (lead == 0xED)
        return b <= 0x9F;
    if (lead == 0xF0)
        return b >= 0x90;
    if (lead == 0xF4)
        return b <= 0x8F;
    return true;
}

static void stream_byte(struct tok_stream *s, unsigned char b, struct sink *k)
{
    static const char repl[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    if (s->n_pending) {
        int need = uni_seq_len(s->pending[0]);
        if (cont_ok(s->pending[0], s->n_pending, b)) {
            s->pending[s->n_pending++] = b;
            if (s->n_pending == need) {
                emit(k, s->pending, (size_t)need);
                s->n_pending = 0;
            }
            return;
        }
        emit(k, repl, 3); /* the held bytes cannot complete: one replacement for them */
        s->n_pending = 0;
    }
    int need = uni_seq_len(b);
    if (need == 1)
        emit(k, &b, 1);
    else if (need == 0)
        emit(k, repl, 3);
    else
        s->pending[s->n_pending++] = b;
}

size_t tok_stream_push(const struct tokenizer *t, struct tok_stream *s, int32_t id, char *out, size_t cap)
{
    char small[256];
    char *p = small;
    size_t n = tok_piece(t, id, false, small, sizeof small);
    if (n > sizeof small) {
        if (!(p = malloc(n)))
            return 0;
        tok_piece(t, id, false, p, n);
    }
    size_t i = 0;
    if (s->first && t->add_space_prefix && n && p[0] == ' ')
        i = 1;
    s->first = false;
    struct sink k = {out, cap, 0};
    for (; i < n; i++)
        stream_byte(s, (unsigned char)p[i], &k);
    if (p != small)
        free(p);
    return k.n;
}

size_t tok_stream_flush(struct tok_stream *s, char *out, size_t cap)
{
    struct sink k = {out, cap, 0};
    if (s->n_pending)
        emit(&k, "\xef\xbf\xbd", 3);
    s->n_pending = 0;
    return k.n;
}
