/* Built-in chat templates for the families brasa runs, written out as code (no Jinja):
 * ChatML (Qwen2.5), Qwen3 and Qwen3.5 (ChatML with <think> handling), Granite 3.x,
 * Llama 2 (with <<SYS>>), Llama 3. Formats follow the published templates as the reference
 * implementation renders them (no BOS text: the tokenizer adds BOS itself). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tok/tok.h"

static const char *const tmpl_names[] = {"none", "chatml", "qwen3", "granite", "llama2", "llama3", "qwen35"};

const char *chat_template_name(enum chat_template_id id)
{
    return (unsigned)id < sizeof tmpl_names / sizeof tmpl_names[0] ? tmpl_names[id] : "?";
}

enum chat_template_id chat_template_from_name(const char *name)
{
    for (unsigned i = 1; name && i < sizeof tmpl_names / sizeof tmpl_names[0]; i++)
        if (strcmp(name, tmpl_names[i]) == 0)
            return (enum chat_template_id)i;
    return CHAT_TMPL_NONE;
}

static enum chat_template_id from_arch(const char *arch)
{
    if (!arch)
        return CHAT_TMPL_NONE;
    if (strcmp(arch, "qwen2") == 0)
        return CHAT_TMPL_CHATML;
    if (strcmp(arch, "qwen3") == 0 || strcmp(arch, "qwen3moe") == 0)
        return CHAT_TMPL_QWEN3;
    if (strcmp(arch, "qwen35") == 0 || strcmp(arch, "qwen35moe") == 0)
        return CHAT_TMPL_QWEN35;
    if (strcmp(arch, "granite") == 0 || strcmp(arch, "granitemoe") == 0)
        return CHAT_TMPL_GRANITE;
    if (strcmp(arch, "llama") == 0)
        return CHAT_TMPL_LLAMA2;
    return CHAT_TMPL_NONE;
}

static enum chat_template_id from_content(const char *t, const char *arch)
{
    if (strstr(t, "<|im_start|>")) {
        if (strstr(t, "<think>") || strstr(t, "enable_thinking"))
            return (arch && strncmp(arch, "qwen35", 6) == 0) ? CHAT_TMPL_QWEN35 : CHAT_TMPL_QWEN3;
        return CHAT_TMPL_CHATML;
    }
    if (strstr(t, "<|start_header_id|>") && strstr(t, "<|end_header_id|>"))
        return CHAT_TMPL_LLAMA3;
    if (strstr(t, "<|start_of_role|>"))
        return CHAT_TMPL_GRANITE;
    if (strstr(t, "[INST]"))
        return CHAT_TMPL_LLAMA2;
    return CHAT_TMPL_NONE;
}

/* Llama 3 files without a template still carry its header tokens */
static bool has_token(const struct gguf_file *f, const char *text)
{
    const void *data;
    uint64_t n;
    if (!gguf_find_kv(f, "tokenizer.ggml.tokens") ||
        gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_T_STRING, &data, &n, NULL) != BRASA_OK)
        return false;
    const struct gguf_str *s = data;
    size_t l = strlen(text);
    for (uint64_t i = 0; i < n; i++)
        if (s[i].len == l && memcmp(s[i].ptr, text, l) == 0)
            return true;
    return false;
}

brasa_status chat_template_pick(const struct gguf_file *f, const char *override_name, enum chat_template_id *out,
                                const char **note, struct brasa_err *err)
{
    *note = NULL;
    if (override_name) {
        *out = chat_template_from_name(override_name);
        if (*out == CHAT_TMPL_NONE)
            return brasa_fail(err, BRASA_EINVAL,
                              "unknown chat template '%.64s' (built in: chatml, qwen3, qwen35, granite, llama2, llama3)",
                              override_name);
        return BRASA_OK;
    }
    char *arch = NULL, *tmpl = NULL;
    if (gguf_find_kv(f, "general.architecture"))
        gguf_get_str(f, "general.architecture", &arch, NULL);
    if (gguf_find_kv(f, "tokenizer.chat_template"))
        gguf_get_str(f, "tokenizer.chat_template", &tmpl, NULL);
    enum chat_template_id id = tmpl ? from_content(tmpl, arch) : CHAT_TMPL_NONE;
    if (id == CHAT_TMPL_NONE) {
        id = from_arch(arch);
        if (id == CHAT_TMPL_LLAMA2 && has_token(f, "<|start_header_id|>"))
            id = CHAT_TMPL_LLAMA3;
        if (id == CHAT_TMPL_NONE) {
            id = CHAT_TMPL_CHATML;
            *note = tmpl ? "tokenizer.chat_template not recognised and no template known for this architecture: "
                           "falling back to chatml (--chat-template NAME overrides)"
                         : "no tokenizer.chat_template and no template known for this architecture: "
                           "falling back to chatml (--chat-template NAME overrides)";
        } else if (tmpl) {
            static const char *const notes[] = {
                NULL,
                "tokenizer.chat_template not recognised: falling back to chatml (from the architecture)",
                "tokenizer.chat_template not recognised: falling back to qwen3 (from the architecture)",
                "tokenizer.chat_template not recognised: falling back to granite (from the architecture)",
                "tokenizer.chat_template not recognised: falling back to llama2 (from the architecture)",
                "tokenizer.chat_template not recognised: falling back to llama3 (from the architecture)",
                "tokenizer.chat_template not recognised: falling back to qwen35 (from the architecture)",
            };
            *note = notes[id];
        }
    }
    free(arch);
    free(tmpl);
    *out = id;
    return BRASA_OK;
}

/* ---- rendering ---- */

struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(struct sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* content with surrounding whitespace removed (Llama 3 trims each message) */
static void sb_trimmed(struct sbuf *b, const char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    sb_put(b, s, n);
}

/* Qwen3 splits an assistant message at its last </think>: the answer is what follows (leading
 * newlines dropped), the reasoning what precedes (after its last <think>, newlines trimmed). */
static void split_think(const char *s, const char **ans, const char **rs, size_t *rn)
{
    const char *e = NULL;
    for (const char *q = strstr(s, "</think>"); q; q = strstr(q + 1, "</think>"))
        e = q;
    *ans = s;
    *rs = "";
    *rn = 0;
    if (!e)
        return;
    *ans = e + strlen("</think>");
    while (**ans == '\n')
        (*ans)++;
    const char *b = s;
    for (const char *q = strstr(s, "<think>"); q && q < e; q = strstr(q + 1, "<think>"))
        b = q + strlen("<think>");
    while (b < e && *b == '\n')
        b++;
    const char *z = e;
    while (z > b && z[-1] == '\n')
        z--;
    *rs = b;
    *rn = (size_t)(z - b);
}

static void render_chatml(struct sbuf *b, enum chat_template_id id, const struct chat_msg *m, size_t n,
                          const struct chat_opts *o)
{
    size_t last_user = n; /* the last user query; n if none */
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].role, "user") == 0)
            last_user = i;
    for (size_t i = 0; i < n; i++) {
        sb_str(b, "<|im_start|>");
        sb_str(b, m[i].role);
        sb_str(b, "\n");
        if (id != CHAT_TMPL_CHATML && strcmp(m[i].role, "assistant") == 0) {
            const char *ans, *rs;
            size_t rn;
            split_think(m[i].content, &ans, &rs, &rn);
            /* turns after the last query keep a reasoning block (an empty one on the last turn) */
            bool after = last_user < n && i > last_user;
            if (after && (i + 1 == n || rn)) {
                sb_str(b, "<think>\n");
                sb_put(b, rs, rn);
                sb_str(b, "\n</think>\n\n");
            }
            sb_str(b, ans);
        } else {
            sb_str(b, m[i].content);
        }
        sb_str(b, "<|im_end|>\n");
    }
    if (!o->add_assistant)
        return;
    sb_str(b, "<|im_start|>assistant\n");
    if (id == CHAT_TMPL_QWEN3 && !o->thinking)
        sb_str(b, "<think>\n\n</think>\n\n");
    if (id == CHAT_TMPL_QWEN35)
        sb_str(b, o->thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
}

static void render_llama2(struct sbuf *b, const struct chat_msg *m, size_t n)
{
    bool inside = true; /* the first [INST] opens before the loop */
    sb_str(b, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        if (!inside) {
            sb_str(b, "[INST] ");
            inside = true;
        }
        if (strcmp(m[i].role, "system") == 0) {
            sb_str(b, "<<SYS>>\n");
            sb_str(b, m[i].content);
            sb_str(b, "\n<</SYS>>\n\n");
        } else if (strcmp(m[i].role, "user") == 0) {
            sb_str(b, m[i].content);
            sb_str(b, " [/INST]");
        } else {
            sb_str(b, m[i].content);
            sb_str(b, "</s>");
            inside = false;
        }
    }
}

static void render_llama3(struct sbuf *b, const struct chat_msg *m, size_t n, const struct chat_opts *o)
{
    for (size_t i = 0; i < n; i++) {
        sb_str(b, "<|start_header_id|>");
        sb_str(b, m[i].role);
        sb_str(b, "<|end_header_id|>\n\n");
        sb_trimmed(b, m[i].content);
        sb_str(b, "<|eot_id|>");
    }
    if (o->add_assistant)
        sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_granite(struct sbuf *b, const struct chat_msg *m, size_t n, const struct chat_opts *o)
{
    const char *end = o->end_text ? o->end_text : "<|end_of_text|>";
    for (size_t i = 0; i < n; i++) {
        sb_str(b, "<|start_of_role|>");
        sb_str(b, m[i].role);
        sb_str(b, "<|end_of_role|>");
        sb_str(b, m[i].content);
        sb_str(b, end);
        sb_str(b, "\n");
    }
    if (o->add_assistant)
        sb_str(b, "<|start_of_role|>assistant<|end_of_role|>");
}

brasa_status chat_render(enum chat_template_id id, const struct chat_msg *msgs, size_t n,
                         const struct chat_opts *opts, char **out, struct brasa_err *err)
{
    static const struct chat_opts defaults = {true, true, NULL};
    const struct chat_opts *o = opts ? opts : &defaults;
    struct sbuf b = {0};
    *out = NULL;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return brasa_fail(err, BRASA_EINVAL, "chat message %zu has no role or content", i);
    sb_put(&b, "", 0);
    switch (id) {
    case CHAT_TMPL_CHATML:
    case CHAT_TMPL_QWEN3:
    case CHAT_TMPL_QWEN35:
        render_chatml(&b, id, msgs, n, o);
        break;
    case CHAT_TMPL_LLAMA2:
        render_llama2(&b, msgs, n);
        break;
    case CHAT_TMPL_LLAMA3:
        render_llama3(&b, msgs, n, o);
        break;
    case CHAT_TMPL_GRANITE:
        render_granite(&b, msgs, n, o);
        break;
    default:
        free(b.p);
        return brasa_fail(err, BRASA_EINVAL, "no chat template selected");
    }
    if (b.oom) {
        free(b.p);
        return brasa_fail(err, BRASA_ENOMEM, "out of memory rendering the chat");
    }
    *out = b.p;
    return BRASA_OK;
}
