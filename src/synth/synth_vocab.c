/* Synthetic tokenizers: a valid vocabulary of the family's layout and exact size.
 *
 * Byte-level BPE: the 256 byte symbols in GPT-2's order, then tokens grown one letter at a time
 * ("Ġt" = "Ġ" + "t", "Ġth" = "Ġt" + "h", ...), each with the merge that makes it, so every merge
 * joins two existing tokens; then the family's special tokens at their real ids, then padding.
 * SentencePiece: <unk>, <s>, </s>, the 256 byte tokens, single characters, then grown pieces
 * scored by rank. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth/synth.h"

enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_UNUSED = 5, T_BYTE = 6 };

/* English letters by frequency: the most useful tokens come first. */
static const char LETTERS[] = "etaoinsrhldcumfpgwybvkxjqz";

struct builder {
    struct synth_vocab *v;
    char *arena;
    size_t used, cap;
};

static char *b_str(struct builder *b, const char *a, const char *sep, const char *c)
{
    size_t la = strlen(a), ls = sep ? strlen(sep) : 0, lc = c ? strlen(c) : 0;
    if (b->used + la + ls + lc + 1 > b->cap)
        return NULL;
    char *p = b->arena + b->used;
    memcpy(p, a, la);
    if (ls)
        memcpy(p + la, sep, ls);
    if (lc)
        memcpy(p + la + ls, c, lc);
    p[la + ls + lc] = 0;
    b->used += la + ls + lc + 1;
    return p;
}

static int b_token(struct builder *b, const char *text, int type, float score)
{
    struct synth_vocab *v = b->v;
    char *s = b_str(b, text, NULL, NULL);
    if (!s)
        return -1;
    v->tokens[v->n] = s;
    v->types[v->n] = type;
    if (v->scores)
        v->scores[v->n] = score;
    return v->n++;
}

static void utf8(unsigned cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = 0;
    } else {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        out[3] = 0;
    }
}

/* GPT-2's byte-to-character map: printable bytes stand for themselves, the others take code
 * points from U+0100 on, in byte order. Token order: the printable ones first. */
static bool byte_printable(int c) { return (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255); }

static bool add_byte_symbols(struct builder *b, char sym[256][4])
{
    unsigned next = 256;
    for (int c = 0; c < 256; c++)
        utf8(byte_printable(c) ? (unsigned)c : next++, sym[c]);
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < 256; c++)
            if (byte_printable(c) == (pass == 0) && b_token(b, sym[c], T_NORMAL, 0) < 0)
                return false;
    return true;
}

/* Merge ranks by "left right" text, so that a new token's merge can be the one BPE reaches. */
struct rank_map {
    const char **keys;
    int32_t *ranks;
    size_t cap; /* a power of two, at least twice the merges */
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static int32_t rank_get(const struct rank_map *m, const char *key, size_t n)
{
    for (size_t i = hash_bytes(key, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (!strncmp(m->keys[i], key, n) && m->keys[i][n] == 0)
            return m->ranks[i];
    }
}

static void rank_put(struct rank_map *m, const char *key, int32_t rank)
{
    size_t i = hash_bytes(key, strlen(key)) & (m->cap - 1);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = key;
    m->ranks[i] = rank;
}

static int utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4; }

/* Byte-level BPE on one word with the merges so far. Returns the byte offset between the two
 * pieces when it ends in exactly two (their merge makes the word a token), else -1. */
static int bpe_split(const struct rank_map *m, const char *w)
{
    int start[32], len[32], n = 0;
    for (const char *p = w; *p && n < 32; n++) {
        start[n] = (int)(p - w);
        len[n] = utf8_len((unsigned char)*p);
        p += len[n];
    }
    char key[96];
    while (n > 2) {
        int best = -1;
        int32_t best_rank = INT32_MAX;
        for (int i = 0; i + 1 < n; i++) {
            int k = snprintf(key, sizeof key, "%.*s %.*s", len[i], w + start[i], len[i + 1], w + start[i + 1]);
            int32_t r = k > 0 && k < (int)sizeof key ? rank_get(m, key, (size_t)k) : -1;
            if (r >= 0 && r < best_rank) {
                best_rank = r;
                best = i;
            }
        }
        if (best < 0)
            return -1;
        len[best] += len[best + 1];
        for (int i = best + 1; i + 1 < n; i++) {
            start[i] = start[i + 1];
            len[i] = len[i + 1];
        }
        n--;
    }
    return n == 2 ? start[1] : -1;
}

/* Grows tokens prefix + letter, level by level, until the vocabulary holds `until` tokens.
 * level: ids of the previous level (capacity `until`). BPE (ranks non-NULL) gives each new
 * token the merge that BPE itself arrives at (so "Ġthe" is "Ġt he" when "h e" ranks before
 * "Ġt h"), and leaves out words it would not reach in one more merge. */
static bool grow(struct builder *b, int32_t *level, int n_level, int32_t *next, int until,
                 struct rank_map *ranks, int score_base)
{
    struct synth_vocab *v = b->v;
    char cand[64];
    while (v->n < until && n_level > 0) {
        int n_next = 0;
        for (int i = 0; i < n_level && v->n < until; i++) {
            for (const char *c = LETTERS; *c && v->n < until; c++) {
                const char *parent = v->tokens[level[i]];
                if (snprintf(cand, sizeof cand, "%s%c", parent, *c) >= (int)sizeof cand)
                    continue;
                int split = ranks ? bpe_split(ranks, cand) : 0;
                if (split < 0)
                    continue;
                char *tok = b_str(b, cand, NULL, NULL);
                if (!tok)
                    return false;
                v->tokens[v->n] = tok;
                v->types[v->n] = T_NORMAL;
                if (v->scores)
                    v->scores[v->n] = (float)-(v->n - score_base);
                if (ranks) {
                    char left[64];
                    snprintf(left, sizeof left, "%.*s", split, cand);
                    char *m = b_str(b, left, " ", cand + split);
                    if (!m)
                        return false;
                    rank_put(ranks, m, (int32_t)v->n_merges);
                    v->merges[v->n_merges++] = m;
                }
                next[n_next++] = v->n++;
            }
        }
        memcpy(level, next, (size_t)n_next * sizeof *level);
        n_level = n_next;
    }
    return v->n >= until;
}

static bool bpe_body(struct builder *b, int n_bpe, int32_t *l0, int32_t *l1)
{
    char sym[256][4];
    int first = b->v->n;
    if (!add_byte_symbols(b, sym))
        return false;
    /* Level 1: the space symbol and the letters (all byte tokens already). */
    int n = 0;
    l0[n++] = first + 188 + ' ';  /* ' ' is the 33rd non-printable byte: id first + 188 + 32 */
    for (const char *c = LETTERS; *c; c++)
        l0[n++] = first + (*c - 33); /* printable ASCII '!'.. sits at first + (c - 33) */
    struct rank_map ranks = {.cap = 1024};
    while (ranks.cap < 2 * (size_t)n_bpe)
        ranks.cap *= 2;
    ranks.keys = calloc(ranks.cap, sizeof *ranks.keys);
    ranks.ranks = malloc(ranks.cap * sizeof *ranks.ranks);
    bool ok = ranks.keys && ranks.ranks && grow(b, l0, n, l1, first + n_bpe, &ranks, 0);
    free(ranks.keys);
    free(ranks.ranks);
    return ok;
}

static const char *const QWEN_SPECIALS[] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
};
/* Texts that are plain added words in the real tokenizer (not control tokens). */
static bool qwen_user_defined(const char *s)
{
    return s[0] == '<' && (s[1] != '|' || !strncmp(s, "<|fim_", 6) || !strcmp(s, "<|repo_name|>") ||
                           !strcmp(s, "<|file_sep|>"));
}

static const char *const GRANITE_SPECIALS[] = {
    "<|end_of_text|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<filename>",
    "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>", "<jupyter_start>",
    "<jupyter_text>", "<jupyter_code>", "<jupyter_output>", "<empty_output>", "<commit_before>",
    "<commit_msg>", "<commit_after>", "<reponame>",
};

/* Chat templates (Jinja, as files carry them), written for these files; chat_template_pick
 * recognises the family from the markers. */
static const char CHATML_TMPL[] =
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
static const char QWEN3_TMPL[] =
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}";
static const char LLAMA3_TMPL[] =
    "{{- bos_token }}{%- for m in messages %}{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n'"
    " + m['content'] | trim + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";
static const char GRANITE_TMPL[] =
    "{%- for m in messages %}{{- '<|start_of_role|>' + m['role'] + '<|end_of_role|>' + m['content'] +"
    " '<|end_of_text|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}";
static const char LLAMA2_TMPL[] =
    "{%- for m in messages %}{%- if m['role'] == 'user' %}{{- bos_token + '[INST] ' + m['content'] + ' [/INST]' }}"
    "{%- elif m['role'] == 'assistant' %}{{- ' ' + m['content'] + ' ' + eos_token }}{%- endif %}{%- endfor %}";

static bool make_qwen(struct builder *b, const struct synth_shape *s, int n_specials, int32_t *l0, int32_t *l1)
{
    struct synth_vocab *v = b->v;
    if (!bpe_body(b, s->n_bpe, l0, l1))
        return false;
    int base = v->n;
    for (int i = 0; i < n_specials; i++)
        if (b_token(b, QWEN_SPECIALS[i], qwen_user_defined(QWEN_SPECIALS[i]) ? T_USER : T_CONTROL, 0) < 0)
            return false;
    char pad[32];
    while (v->n < s->n_vocab) {
        snprintf(pad, sizeof pad, "[PAD%d]", v->n);
        if (b_token(b, pad, T_UNUSED, 0) < 0)
            return false;
    }
    v->model = "gpt2";
    v->pre = s->vocab == SYNTH_VOCAB_QWEN35 ? "qwen35" : "qwen2";
    v->bos = v->pad = base;
    v->eos = base + 2;
    v->eot = base + 2;
    v->add_bos = false;
    v->chat_template = s->vocab == SYNTH_VOCAB_QWEN2 ? CHATML_TMPL : QWEN3_TMPL;
    return true;
}

static bool make_llama3(struct builder *b, const struct synth_shape *s, int32_t *l0, int32_t *l1)
{
    struct synth_vocab *v = b->v;
    if (!bpe_body(b, s->n_bpe, l0, l1))
        return false;
    int base = v->n, reserved = 0;
    char name[48];
    for (int i = 0; v->n < s->n_vocab; i++) {
        const char *t = NULL;
        switch (i) {
        case 0: t = "<|begin_of_text|>"; break;
        case 1: t = "<|end_of_text|>"; break;
        case 6: t = "<|start_header_id|>"; break;
        case 7: t = "<|end_header_id|>"; break;
        case 9: t = "<|eot_id|>"; break;
        default:
            snprintf(name, sizeof name, "<|reserved_special_token_%d|>", reserved++);
            t = name;
        }
        if (b_token(b, t, T_CONTROL, 0) < 0)
            return false;
    }
    v->model = "gpt2";
    v->pre = "llama-bpe";
    v->bos = base;
    v->eos = base + 1;
    v->eot = base + 9;
    v->pad = -1;
    v->add_bos = true;
    v->chat_template = LLAMA3_TMPL;
    return true;
}

static bool make_granite(struct builder *b, const struct synth_shape *s, int32_t *l0, int32_t *l1)
{
    struct synth_vocab *v = b->v;
    int n_sp = (int)(sizeof GRANITE_SPECIALS / sizeof GRANITE_SPECIALS[0]);
    for (int i = 0; i < n_sp; i++)
        if (b_token(b, GRANITE_SPECIALS[i], T_CONTROL, 0) < 0)
            return false;
    if (!bpe_body(b, s->n_bpe - n_sp, l0, l1))
        return false;
    static const char *const tail[] = {"<|start_of_role|>", "<|end_of_role|>", "<|tool_call|>"};
    for (int i = 0; i < 3 && v->n < s->n_vocab; i++)
        if (b_token(b, tail[i], T_CONTROL, 0) < 0)
            return false;
    v->model = "gpt2";
    v->pre = "refact";
    v->bos = v->eos = v->pad = 0;
    v->eot = -1;
    v->add_bos = false;
    v->chat_template = GRANITE_TMPL;
    return v->n == s->n_vocab;
}

static bool make_spm(struct builder *b, const struct synth_shape *s, int32_t *l0, int32_t *l1)
{
    struct synth_vocab *v = b->v;
    if (b_token(b, "<unk>", T_UNKNOWN, 0) < 0 || b_token(b, "<s>", T_CONTROL, 0) < 0 ||
        b_token(b, "</s>", T_CONTROL, 0) < 0)
        return false;
    char name[16];
    for (int c = 0; c < 256; c++) {
        snprintf(name, sizeof name, "<0x%02X>", c);
        if (b_token(b, name, T_BYTE, 0) < 0)
            return false;
    }
    int first = v->n, n = 0;
    static const char *const singles = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'\"-:;()";
    l0[n++] = b_token(b, "\xe2\x96\x81", T_NORMAL, 0); /* U+2581, SentencePiece's space */
    for (const char *c = singles; *c; c++) {
        char one[2] = {*c, 0};
        int id = b_token(b, one, T_NORMAL, (float)-(v->n - first));
        if (id < 0)
            return false;
        if (strchr(LETTERS, *c))
            l0[n++] = id;
    }
    if (!grow(b, l0, n, l1, s->n_vocab, NULL, first))
        return false;
    v->model = "llama";
    v->pre = "default";
    v->unk = 0;
    v->bos = 1;
    v->eos = 2;
    v->eot = -1;
    v->pad = -1;
    v->add_bos = true;
    v->chat_template = LLAMA2_TMPL;
    return true;
}

brasa_status synth_vocab_make(const struct synth_shape *s, struct synth_vocab *v, struct brasa_err *err)
{
    memset(v, 0, sizeof *v);
    v->unk = -1;
    size_t n = (size_t)s->n_vocab;
    struct builder b = {.v = v, .cap = n * 48 + (1u << 16)};
    v->tokens = calloc(n, sizeof *v->tokens);
    v->types = calloc(n, sizeof *v->types);
    v->merges = calloc(n, sizeof *v->merges);
    v->scores = s->vocab == SYNTH_VOCAB_SPM ? calloc(n, sizeof *v->scores) : NULL;
    b.arena = v->arena_ = malloc(b.cap);
    int32_t *l0 = malloc(n * sizeof *l0), *l1 = malloc(n * sizeof *l1);
    bool ok = v->tokens && v->types && v->merges && b.arena && l0 && l1 &&
              (s->vocab != SYNTH_VOCAB_SPM || v->scores);
    if (ok) {
        switch (s->vocab) {
        case SYNTH_VOCAB_QWEN2: ok = make_qwen(&b, s, 22, l0, l1); break;
        case SYNTH_VOCAB_QWEN3:
        case SYNTH_VOCAB_QWEN35: ok = make_qwen(&b, s, 26, l0, l1); break;
        case SYNTH_VOCAB_LLAMA3: ok = make_llama3(&b, s, l0, l1); break;
        case SYNTH_VOCAB_GRANITE: ok = make_granite(&b, s, l0, l1); break;
        case SYNTH_VOCAB_SPM: ok = make_spm(&b, s, l0, l1); break;
        }
    }
    free(l0);
    free(l1);
    if (!ok || v->n != s->n_vocab) {
        synth_vocab_free(v);
        return brasa_fail(err, BRASA_ENOMEM, "synth: could not build a vocabulary of %d tokens for %s %s",
                          s->n_vocab, s->arch, s->shape);
    }
    return BRASA_OK;
}

void synth_vocab_free(struct synth_vocab *v)
{
    free(v->tokens);
    free(v->types);
    free(v->scores);
    free(v->merges);
    free(v->arena_);
    memset(v, 0, sizeof *v);
}
