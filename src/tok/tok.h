/* Tokenizers and chat templates, built from the GGUF file's tokenizer.ggml.* keys alone.
 * SentencePiece-style (model "llama") and byte-level BPE (model "gpt2") with the
 * pre-tokenizer named by tokenizer.ggml.pre. */
#ifndef BRASA_TOK_H
#define BRASA_TOK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

struct gguf_file;
struct tokenizer;

enum tok_load_flags {
    TOK_LOAD_FALLBACK_PRE = 1 << 0, /* unknown tokenizer.ggml.pre: warn and use "default" */
};
enum tok_encode_flags {
    TOK_ADD_SPECIAL = 1 << 0,   /* add BOS/EOS as the file says (add_bos_token, add_eos_token) */
    TOK_PARSE_SPECIAL = 1 << 1, /* recognise control/user-defined token texts in the input */
};

brasa_status tok_load(struct tokenizer **out, const struct gguf_file *f, int flags,
                      struct brasa_err *err);
void tok_free(struct tokenizer *t);

/* Encodes len bytes of UTF-8 text. *ids is malloc'd (the caller frees it). */
brasa_status tok_encode(const struct tokenizer *t, const char *text, size_t len, int flags,
                        int32_t **ids, size_t *n_ids, struct brasa_err *err);

int32_t tok_n_vocab(const struct tokenizer *t);
int32_t tok_bos(const struct tokenizer *t); /* -1 if none */
int32_t tok_eos(const struct tokenizer *t); /* -1 if none */
bool tok_is_eog(const struct tokenizer *t, int32_t id); /* EOS, EOT, im_end, ... */
bool tok_is_control(const struct tokenizer *t, int32_t id);
/* Token text as stored in the vocabulary (for display); NULL for an invalid id. */
const char *tok_text(const struct tokenizer *t, int32_t id);
bool tok_add_bos(const struct tokenizer *t);  /* BOS is added with TOK_ADD_SPECIAL */
/* "spm", "wpm", or the byte-level BPE pre-tokenizer in use ("gpt2", "llama3", "qwen2", ...) */
const char *tok_pre_name(const struct tokenizer *t);
/* The warning of the last tok_load() on this thread (missing or unknown pre-tokenizer with
 * TOK_LOAD_FALLBACK_PRE), or NULL. */
const char *tok_load_warning(void);
/* Bytes the token stands for in output text (byte tokens and byte-level BPE decoded,
 * SentencePiece's U+2581 turned into a space); control tokens give "" unless `special`. */
size_t tok_piece(const struct tokenizer *t, int32_t id, bool special, char *buf, size_t cap);

/* Streaming detokenization: bytes of a UTF-8 sequence that is not complete yet are held
 * back until it completes; invalid bytes come out as U+FFFD. */
struct tok_stream {
    unsigned char pending[8];
    int n_pending;
    bool first;      /* SentencePiece: drop the leading space of the first piece */
};
void tok_stream_init(struct tok_stream *s);
/* Appends the printable text of token id to out (at most cap bytes; 64 always suffice for
 * one token plus held bytes, longer pieces need more). Returns bytes written. */
size_t tok_stream_push(const struct tokenizer *t, struct tok_stream *s, int32_t id, char *out, size_t cap);
/* Emits whatever is held (as U+FFFD for an unfinished sequence). */
size_t tok_stream_flush(struct tok_stream *s, char *out, size_t cap);
/* Whole-sequence decode into a malloc'd NUL-terminated string. */
brasa_status tok_decode(const struct tokenizer *t, const int32_t *ids, size_t n, char **out,
                        struct brasa_err *err);

/* ---- chat templates ---- */
struct chat_msg {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
};
enum chat_template_id {
    CHAT_TMPL_NONE = 0,
    CHAT_TMPL_CHATML,
    CHAT_TMPL_QWEN3,     /* ChatML with <think> handling */
    CHAT_TMPL_GRANITE,
    CHAT_TMPL_LLAMA2,
    CHAT_TMPL_LLAMA3,
    CHAT_TMPL_QWEN35,    /* ChatML; the assistant turn opens with <think> unless thinking is off */
};
struct chat_opts {
    bool add_assistant;  /* end with the opening of an assistant turn */
    bool thinking;       /* Qwen3: false renders an empty <think></think> block */
    const char *end_text;/* Granite: end-of-turn text (NULL: "<|end_of_text|>") */
};
/* Picks the template: override name if given ("chatml", "qwen3", "qwen35", "granite", "llama2", "llama3"),
 * else recognised from tokenizer.chat_template and general.architecture. *note receives a
 * human-readable line when a fallback was used (static string, or NULL). */
brasa_status chat_template_pick(const struct gguf_file *f, const char *override_name,
                                enum chat_template_id *out, const char **note, struct brasa_err *err);
const char *chat_template_name(enum chat_template_id id);
/* Template by name (as above); CHAT_TMPL_NONE if unknown. */
enum chat_template_id chat_template_from_name(const char *name);
brasa_status chat_render(enum chat_template_id id, const struct chat_msg *msgs, size_t n,
                         const struct chat_opts *opts, char **out, struct brasa_err *err);

#endif
