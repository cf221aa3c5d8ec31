/* Request validation and JSON bodies (jansson). Every type error names its field; fields the
 * server does not know are ignored, as OpenAI clients send many. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "gpumem.h"

char *api_error_json(const char *msg, const char *type, const char *param)
{
    json_t *e = json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", msg, "type", type, "param",
                          param ? json_string(param) : json_null(), "code",
                          type ? json_string(type) : json_null());
    char *t = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return t ? t : strdup("{\"error\":{\"message\":\"out of memory\"}}");
}

void api_error(struct api_reply *r, int status, const char *type, const char *param, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    free(r->body);
    r->status = status;
    r->body = api_error_json(msg, type, param);
}

static void reply_json(struct api_reply *r, int status, json_t *o)
{
    r->status = status;
    r->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!r->body)
        api_error(r, 500, "server_error", NULL, "out of memory");
}

/* A JSON string from bytes that may not be valid UTF-8 (invalid bytes become '?'). */
static json_t *str_n(const char *p, size_t n)
{
    json_t *v = json_stringn(p, n);
    if (v)
        return v;
    char *c = malloc(n + 1);
    if (!c)
        return json_string("");
    for (size_t i = 0; i < n; i++)
        c[i] = (unsigned char)p[i] < 0x80 && p[i] ? p[i] : '?';
    c[n] = 0;
    v = json_stringn(c, n);
    free(c);
    return v ? v : json_string("");
}

/* ---- field readers: absent or null keeps the default; a wrong type is a 400 naming the field ---- */

static json_t *parse_body(const char *body, size_t len, struct api_reply *r)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        api_error(r, 400, "invalid_request_error", NULL, "malformed JSON body: line %d, column %d: %s", je.line,
                  je.column, je.text);
        return NULL;
    }
    if (!json_is_object(o)) {
        json_decref(o);
        api_error(r, 400, "invalid_request_error", NULL, "the body must be a JSON object");
        return NULL;
    }
    return o;
}

static json_t *field(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

static bool get_num(json_t *o, const char *k, double lo, double hi, float *out, struct api_reply *r)
{
    json_t *v = field(o, k);
    if (!v)
        return true;
    if (!json_is_number(v)) {
        api_error(r, 400, "invalid_request_error", k, "'%s' must be a number", k);
        return false;
    }
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) {
        api_error(r, 400, "invalid_request_error", k, "'%s' must be between %g and %g", k, lo, hi);
        return false;
    }
    *out = (float)x;
    return true;
}

static bool get_int(json_t *o, const char *k, long long lo, long long hi, long long *out, struct api_reply *r)
{
    json_t *v = field(o, k);
    if (!v)
        return true;
    if (!json_is_integer(v)) {
        api_error(r, 400, "invalid_request_error", k, "'%s' must be an integer", k);
        return false;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        api_error(r, 400, "invalid_request_error", k, "'%s' must be between %lld and %lld", k, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

static bool get_bool(json_t *o, const char *k, bool *out, struct api_reply *r)
{
    json_t *v = field(o, k);
    if (!v)
        return true;
    if (!json_is_boolean(v)) {
        api_error(r, 400, "invalid_request_error", k, "'%s' must be true or false", k);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

static bool get_str(json_t *o, const char *k, const char **out, struct api_reply *r)
{
    json_t *v = field(o, k);
    if (!v)
        return true;
    if (!json_is_string(v)) {
        api_error(r, 400, "invalid_request_error", k, "'%s' must be a string", k);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

/* "model": must name a known model; "" or absent means the loaded one. */
static bool get_model(struct srv *s, json_t *o, struct job *j, struct api_reply *r)
{
    const char *m = NULL;
    if (!get_str(o, "model", &m, r))
        return false;
    if (!m || !m[0])
        return true;
    const struct srv_model_entry *e = srv_find_model(s, m);
    if (!e) {
        api_error(r, 404, "model_not_found", "model", "unknown model '%.200s': GET /v1/models lists the models", m);
        return false;
    }
    snprintf(j->model, sizeof j->model, "%s", e->id);
    return true;
}

static bool get_stop(json_t *o, struct job *j, struct api_reply *r)
{
    json_t *v = field(o, "stop");
    if (!v)
        return true;
    if (json_is_string(v)) {
        if (json_string_length(v) > 0 && !(j->stop[j->n_stop++] = strdup(json_string_value(v))))
            return false;
        return true;
    }
    if (!json_is_array(v) || json_array_size(v) > 8) {
        api_error(r, 400, "invalid_request_error", "stop", "'stop' must be a string or an array of at most 8 strings");
        return false;
    }
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e) || json_string_length(e) > 256) {
            api_error(r, 400, "invalid_request_error", "stop", "'stop' must hold strings of at most 256 bytes");
            return false;
        }
        if (json_string_length(e) > 0)
            j->stop[j->n_stop++] = strdup(json_string_value(e));
    }
    return true;
}

static bool get_sampling(struct srv *s, json_t *o, struct job *j, struct api_reply *r)
{
    struct brasa_sampler_params *p = &j->sp;
    long long top_k = p->top_k, max_tok = -1, seed = -1, n = 1, last_n = p->penalty_last_n;
    if (!get_num(o, "temperature", 0, 10, &p->temperature, r) || !get_num(o, "top_p", 0, 1, &p->top_p, r) ||
        !get_num(o, "min_p", 0, 1, &p->min_p, r) || !get_int(o, "top_k", 0, 1 << 30, &top_k, r) ||
        !get_num(o, "presence_penalty", -2, 2, &p->presence_penalty, r) ||
        !get_num(o, "frequency_penalty", -2, 2, &p->frequency_penalty, r) ||
        !get_num(o, "repeat_penalty", 0, 10, &p->repeat_penalty, r) ||
        !get_int(o, "repeat_last_n", 0, 1 << 20, &last_n, r) ||
        !get_int(o, "max_completion_tokens", 1, s->cfg.max_tokens, &max_tok, r) ||
        !get_int(o, "max_tokens", 1, s->cfg.max_tokens, &max_tok, r) ||
        !get_int(o, "seed", -(1LL << 62), 1LL << 62, &seed, r) || !get_int(o, "n", 1, 1, &n, r) || !get_bool(o, "ignore_eos", &j->ignore_eos, r) ||
        !get_stop(o, j, r))
        return false;
    p->top_k = (int)top_k;
    p->penalty_last_n = (int)last_n;
    if (p->top_p >= 1)
        p->top_p = 1;
    static unsigned long long counter;
    p->seed = seed >= 0 ? (uint64_t)seed
                        : (uint64_t)time(NULL) * 6364136223846793005ULL + __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    j->max_tokens = max_tok > 0 ? (int)max_tok : s->cfg.max_tokens;
    return true;
}

static const char *chat_role(const char *r)
{
    if (!strcmp(r, "system") || !strcmp(r, "developer"))
        return "system";
    if (!strcmp(r, "user") || !strcmp(r, "tool"))
        return "user";
    if (!strcmp(r, "assistant"))
        return "assistant";
    return NULL;
}

/* content: a string, null, or an array of {"type": "text", "text": ...} parts. */
static char *chat_content(json_t *c, size_t idx, struct api_reply *r)
{
    if (!c || json_is_null(c))
        return strdup("");
    if (json_is_string(c))
        return strdup(json_string_value(c));
    if (json_is_array(c)) {
        size_t total = 1, i;
        json_t *p;
        json_array_foreach(c, i, p)
        {
            json_t *t = json_object_get(p, "text");
            if (!json_is_object(p) || !json_is_string(t)) {
                api_error(r, 400, "invalid_request_error", "messages", "messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": STRING}", idx, i);
                return NULL;
            }
            total += json_string_length(t);
        }
        char *out = malloc(total), *w = out;
        if (!out)
            return NULL;
        json_array_foreach(c, i, p)
        {
            json_t *t = json_object_get(p, "text");
            memcpy(w, json_string_value(t), json_string_length(t));
            w += json_string_length(t);
        }
        *w = 0;
        return out;
    }
    api_error(r, 400, "invalid_request_error", "messages", "messages[%zu].content must be a string or an array of text parts", idx);
    return NULL;
}

static bool get_messages(json_t *o, struct job *j, struct api_reply *r)
{
    json_t *m = json_object_get(o, "messages");
    if (!json_is_array(m) || json_array_size(m) == 0 || json_array_size(m) > 4096) {
        api_error(r, 400, "invalid_request_error", "messages", "'messages' must be a non-empty array of {role, content}");
        return false;
    }
    j->msgs = calloc(json_array_size(m), sizeof *j->msgs);
    if (!j->msgs)
        return false;
    size_t i;
    json_t *e;
    json_array_foreach(m, i, e)
    {
        json_t *role = json_object_get(e, "role");
        const char *rl = json_is_string(role) ? chat_role(json_string_value(role)) : NULL;
        if (!json_is_object(e) || !rl) {
            api_error(r, 400, "invalid_request_error", "messages",
                      "messages[%zu].role must be one of \"system\", \"user\", \"assistant\"", i);
            return false;
        }
        char *c = chat_content(json_object_get(e, "content"), i, r);
        if (!c)
            return false;
        j->msgs[j->n_msgs++] = (struct chat_msg){rl, c};
    }
    return true;
}

static bool get_prompt(json_t *o, struct job *j, struct api_reply *r)
{
    json_t *p = json_object_get(o, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1)
        p = json_array_get(p, 0);
    if (!json_is_string(p)) {
        api_error(r, 400, "invalid_request_error", "prompt", "'prompt' must be a string");
        return false;
    }
    j->prompt = strdup(json_string_value(p));
    return j->prompt != NULL;
}

struct job *api_parse_gen(struct srv *s, const char *body, size_t len, bool chat, bool *stream,
                          bool *include_usage, struct api_reply *r)
{
    json_t *o = parse_body(body, len, r);
    if (!o)
        return NULL;
    struct job *j = job_new(JOB_GEN);
    *stream = false;
    *include_usage = false;
    json_t *so = field(o, "stream_options");
    bool ok = j && get_model(s, o, j, r) && get_bool(o, "stream", stream, r) && get_sampling(s, o, j, r) &&
              (chat ? get_messages(o, j, r) : get_prompt(o, j, r)) &&
              (!so || !json_is_object(so) || get_bool(so, "include_usage", include_usage, r));
    json_decref(o);
    if (!ok) {
        if (!r->body)
            api_error(r, 500, "server_error", NULL, "out of memory");
        if (j)
            job_release(s, j);
        return NULL;
    }
    j->chat = chat;
    return j;
}

static json_t *usage_json(const struct job *j)
{
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", j->n_prompt, "completion_tokens", j->n_gen, "total_tokens",
                     j->n_prompt + j->n_gen);
}

static json_t *timings_json(const struct job *j)
{
    return json_pack("{s:i, s:i, s:f, s:f, s:f}", "prompt_n", j->n_prompt, "predicted_n", j->n_gen, "ttft_ms",
                     j->ttft_ms, "prompt_per_second", j->prompt_tps, "predicted_per_second", j->gen_tps);
}

char *api_gen_response(const struct job *j, bool chat, const char *id, long created)
{
    json_t *text = str_n(j->out ? j->out : "", j->out_len);
    json_t *choice = chat ? json_pack("{s:i, s:{s:s, s:o}, s:s, s:n}", "index", 0, "message", "role", "assistant",
                                      "content", text, "finish_reason", j->finish ? j->finish : "stop", "logprobs")
                          : json_pack("{s:i, s:o, s:s, s:n}", "index", 0, "text", text, "finish_reason",
                                      j->finish ? j->finish : "stop", "logprobs");
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o, s:o}", "id", id, "object",
                          chat ? "chat.completion" : "text_completion", "created", (json_int_t)created, "model",
                          j->model_used, "choices", choice, "usage", usage_json(j), "timings", timings_json(j));
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return t;
}

char *api_gen_chunk(bool chat, const char *id, long created, const char *model, const char *text, size_t n,
                    bool role, const char *finish, const struct job *usage)
{
    json_t *choice;
    if (chat) {
        json_t *delta = json_object();
        if (role)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (n || !finish)
            json_object_set_new(delta, "content", str_n(text, n));
        choice = json_pack("{s:i, s:o, s:o, s:n}", "index", 0, "delta", delta, "finish_reason",
                           finish ? json_string(finish) : json_null(), "logprobs");
    } else {
        choice = json_pack("{s:i, s:o, s:o, s:n}", "index", 0, "text", str_n(text, n), "finish_reason",
                           finish ? json_string(finish) : json_null(), "logprobs");
    }
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", id, "object",
                          chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)created,
                          "model", model, "choices", choice);
    if (o && usage) {
        json_object_set_new(o, "usage", usage_json(usage));
        json_object_set_new(o, "timings", timings_json(usage));
    }
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return t;
}

/* ---- models ---- */

void api_models(struct srv *s, struct api_reply *r)
{
    json_t *data = json_array();
    for (int i = 0; i < s->n_models; i++)
        json_array_append_new(data, json_pack("{s:s, s:s, s:I, s:s}", "id", s->models[i].id, "object", "model",
                                              "created", (json_int_t)s->models[i].mtime, "owned_by", "brasa"));
    reply_json(r, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

/* Caller holds mu. */
static json_t *model_state_json(struct srv *s)
{
    json_t *o = json_pack("{s:s, s:s, s:f}", "id", s->model_id, "state", model_state_name(s->state), "since",
                          s->state_since);
    if (s->state == MS_ERROR)
        json_object_set_new(o, "error", json_string(s->model_err));
    if (s->state == MS_READY) {
        json_object_set_new(o, "arch", json_string(s->info.arch ? s->info.arch : ""));
        json_object_set_new(o, "backend", json_string(s->info.backend ? s->info.backend : ""));
        json_object_set_new(o, "n_params", json_integer((json_int_t)s->info.n_params));
        json_object_set_new(o, "file_bytes", json_integer((json_int_t)s->info.file_bytes));
        json_object_set_new(o, "n_ctx", json_integer(s->session ? brasa_session_n_ctx(s->session) : 0));
        json_object_set_new(o, "chat_template", json_string(chat_template_name(s->tmpl)));
    }
    return o;
}

/* Caller holds mu. */
static json_t *timeline_json(struct srv *s)
{
    json_t *a = json_array();
    int n = s->n_timeline < SRV_TIMELINE ? s->n_timeline : SRV_TIMELINE;
    for (int i = s->n_timeline - n; i < s->n_timeline; i++) {
        const struct srv_event *e = &s->timeline[i % SRV_TIMELINE];
        json_array_append_new(a, json_pack("{s:f, s:s, s:s, s:s}", "t", e->t, "state", model_state_name(e->state),
                                           "model", e->model, "message", e->msg));
    }
    return a;
}

void api_models_state(struct srv *s, struct api_reply *r)
{
    json_t *list = json_array();
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_models; i++)
        json_array_append_new(list, json_pack("{s:s, s:I, s:b}", "id", s->models[i].id, "bytes",
                                              (json_int_t)s->models[i].bytes, "loaded",
                                              s->state == MS_READY && !strcmp(s->model_id, s->models[i].id)));
    json_t *o = json_pack("{s:o, s:o, s:o}", "models", list, "current", model_state_json(s), "timeline",
                          timeline_json(s));
    pthread_mutex_unlock(&s->mu);
    reply_json(r, 200, o);
}

void api_health(struct srv *s, struct api_reply *r)
{
    pthread_mutex_lock(&s->mu);
    json_t *o = json_pack("{s:s, s:s, s:s, s:i}", "status", "ok", "model", s->model_id, "model_state",
                          model_state_name(s->state), "queue", s->q_len);
    pthread_mutex_unlock(&s->mu);
    reply_json(r, 200, o);
}

/* ---- tokenizer ---- */

static bool tok_ready(struct srv *s, struct api_reply *r)
{
    if (s->tok)
        return true;
    api_error(r, 503, "model_not_loaded", NULL, "no model is loaded: POST /api/models/load {\"model\": NAME}");
    return false;
}

void api_tokenize(struct srv *s, const char *body, size_t len, struct api_reply *r)
{
    json_t *o = parse_body(body, len, r);
    if (!o)
        return;
    const char *content = NULL;
    bool add_special = false, parse_special = false, with_pieces = false;
    if (!get_str(o, "content", &content, r) || !get_bool(o, "add_special", &add_special, r) ||
        !get_bool(o, "parse_special", &parse_special, r) || !get_bool(o, "with_pieces", &with_pieces, r)) {
        json_decref(o);
        return;
    }
    if (!content) {
        json_decref(o);
        api_error(r, 400, "invalid_request_error", "content", "'content' must be a string");
        return;
    }
    pthread_rwlock_rdlock(&s->rw);
    if (tok_ready(s, r)) {
        int32_t *ids = NULL;
        size_t n = 0;
        struct brasa_err err = {{0}};
        int flags = (add_special ? TOK_ADD_SPECIAL : 0) | (parse_special ? TOK_PARSE_SPECIAL : 0);
        if (tok_encode(s->tok, content, strlen(content), flags, &ids, &n, &err) != BRASA_OK) {
            api_error(r, 400, "invalid_request_error", "content", "%s", err.msg);
        } else {
            json_t *a = json_array();
            for (size_t i = 0; i < n; i++) {
                if (with_pieces) {
                    char buf[256];
                    size_t pl = tok_piece(s->tok, ids[i], true, buf, sizeof buf);
                    json_array_append_new(a, json_pack("{s:i, s:o}", "id", ids[i], "piece",
                                                       str_n(buf, pl < sizeof buf ? pl : sizeof buf)));
                } else {
                    json_array_append_new(a, json_integer(ids[i]));
                }
            }
            reply_json(r, 200, json_pack("{s:o}", "tokens", a));
        }
        free(ids);
    }
    pthread_rwlock_unlock(&s->rw);
    json_decref(o);
}

void api_detokenize(struct srv *s, const char *body, size_t len, struct api_reply *r)
{
    json_t *o = parse_body(body, len, r);
    if (!o)
        return;
    json_t *a = json_object_get(o, "tokens");
    if (!json_is_array(a)) {
        json_decref(o);
        api_error(r, 400, "invalid_request_error", "tokens", "'tokens' must be an array of token ids");
        return;
    }
    pthread_rwlock_rdlock(&s->rw);
    if (tok_ready(s, r)) {
        size_t n = json_array_size(a), i;
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        int32_t nv = tok_n_vocab(s->tok);
        json_t *e;
        bool ok = ids != NULL;
        json_array_foreach(a, i, e)
        {
            if (!ok)
                break;
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= nv) {
                api_error(r, 400, "invalid_request_error", "tokens", "tokens[%zu] must be an integer in [0, %d)", i,
                          (int)nv);
                ok = false;
                break;
            }
            ids[i] = (int32_t)json_integer_value(e);
        }
        char *text = NULL;
        struct brasa_err err = {{0}};
        if (ok && tok_decode(s->tok, ids, n, &text, &err) != BRASA_OK)
            api_error(r, 400, "invalid_request_error", "tokens", "%s", err.msg);
        else if (ok)
            reply_json(r, 200, json_pack("{s:o}", "content", str_n(text, strlen(text))));
        else if (!r->body)
            api_error(r, 500, "server_error", NULL, "out of memory");
        free(text);
        free(ids);
    }
    pthread_rwlock_unlock(&s->rw);
    json_decref(o);
}

/* ---- lifecycle ---- */

static void submit_wait(struct srv *s, struct job *j, bool wait, struct api_reply *r)
{
    if (!srv_submit(s, j)) {
        api_error(r, 503, "queue_full", NULL, "the queue is full (%d waiting); retry later", s->cfg.max_queue);
        return;
    }
    pthread_mutex_lock(&s->mu);
    while (wait && !j->done && !s->stopping)
        pthread_cond_wait(&s->cv, &s->mu);
    if (j->http_status) {
        pthread_mutex_unlock(&s->mu);
        api_error(r, j->http_status, j->err_type, j->err_param, "%s", j->err);
        return;
    }
    json_t *o = json_pack("{s:s, s:s, s:o}", "model", j->model, "state", wait ? model_state_name(s->state) : "queued",
                          "current", model_state_json(s));
    pthread_mutex_unlock(&s->mu);
    reply_json(r, wait ? 200 : 202, o);
}

void api_load(struct srv *s, const char *body, size_t len, struct api_reply *r)
{
    json_t *o = parse_body(body, len, r);
    if (!o)
        return;
    const char *name = NULL;
    bool wait = false;
    if (get_str(o, "model", &name, r) && get_bool(o, "wait", &wait, r)) {
        const struct srv_model_entry *e = name ? srv_find_model(s, name) : NULL;
        if (!name)
            api_error(r, 400, "invalid_request_error", "model", "'model' must be a string naming a model");
        else if (!e)
            api_error(r, 404, "model_not_found", "model", "unknown model '%.200s': GET /v1/models lists the models",
                      name);
        else {
            struct job *j = job_new(JOB_LOAD);
            snprintf(j->model, sizeof j->model, "%s", e->id);
            submit_wait(s, j, wait, r);
            job_release(s, j);
        }
    }
    json_decref(o);
}

void api_unload(struct srv *s, const char *body, size_t len, struct api_reply *r)
{
    bool wait = false;
    if (len) {
        json_t *o = parse_body(body, len, r);
        if (!o)
            return;
        bool ok = get_bool(o, "wait", &wait, r);
        json_decref(o);
        if (!ok)
            return;
    }
    struct job *j = job_new(JOB_UNLOAD);
    submit_wait(s, j, wait, r);
    job_release(s, j);
}

/* ---- telemetry ---- */

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t mem_total(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    return pages > 0 ? (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

static json_t *num_or_null(double v)
{
    return v >= 0 ? json_real(v) : json_null();
}

static json_t *record_json(const struct srv_gen_record *g)
{
    return json_pack("{s:f, s:s, s:i, s:i, s:f, s:o, s:f, s:o, s:s}", "t", g->t, "model", g->model, "n_prompt",
                     g->n_prompt, "n_gen", g->n_gen, "tok_s", g->tok_s, "ms_per_token", num_or_null(g->ms_per_token),
                     "prompt_tok_s", g->prompt_tok_s, "ttft_ms", num_or_null(g->ttft_ms), "finish",
                     g->finish ? g->finish : "");
}

char *api_telemetry(struct srv *s)
{
    pthread_mutex_lock(&s->mu);
    double now = srv_mono();
    json_t *cur;
    if (s->gen_active) {
        int n = s->cur_n_gen;
        double gs = s->cur_t_first ? s->cur_t_last - s->cur_t_first : 0;
        double pf = s->cur_t_first ? s->cur_t_first - s->cur_t0 : now - s->cur_t0;
        cur = json_pack("{s:b, s:s, s:i, s:i, s:f, s:o, s:o, s:o, s:f}", "active", 1, "model", s->cur_model,
                        "n_prompt", s->cur_n_prompt, "n_gen", n, "tok_s", n > 1 && gs > 0 ? (n - 1) / gs : 0.0,
                        "ms_per_token", num_or_null(n > 1 && gs > 0 ? gs * 1e3 / (n - 1) : -1), "prompt_tok_s",
                        num_or_null(s->cur_t_first && pf > 0 ? s->cur_n_prompt / pf : -1), "ttft_ms",
                        num_or_null(s->cur_t_first ? pf * 1e3 : -1), "elapsed_s", now - s->cur_t0);
    } else {
        cur = json_pack("{s:b}", "active", 0);
    }
    json_t *recent = json_array();
    int nr = s->n_recent < SRV_RECENT ? s->n_recent : SRV_RECENT;
    for (int i = s->n_recent - nr; i < s->n_recent; i++)
        json_array_append_new(recent, record_json(&s->recent[i % SRV_RECENT]));
    json_t *last = s->n_recent ? record_json(&s->recent[(s->n_recent - 1) % SRV_RECENT]) : json_null();
    json_t *series = json_array();
    int ns = s->n_series < SRV_SERIES ? s->n_series : SRV_SERIES;
    for (int i = s->n_series - ns; i < s->n_series; i++) {
        const struct srv_point *p = &s->series[i % SRV_SERIES];
        json_array_append_new(series, json_pack("{s:f, s:f, s:o}", "t", p->t, "tok_s", p->tok_s, "ms_per_token",
                                                num_or_null(p->ms_per_token)));
    }
    const char *backend = s->state == MS_READY && s->info.backend ? s->info.backend : "cpu";
    /* device memory when the model runs on the GPU, else this process's resident memory */
    uint64_t used = rss_bytes(), total = mem_total(), dused, dtotal;
    const char *kind = "cpu", *dev = NULL;
    if (strcmp(backend, "cpu") && gpumem_query(&dused, &dtotal, &dev)) {
        used = dused;
        total = dtotal;
        kind = "gpu";
    }
    json_t *mem = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "kind", kind, "used", (json_int_t)used, "total",
                            (json_int_t)total, "resident", (json_int_t)rss_bytes(), "model_bytes",
                            (json_int_t)(s->state == MS_READY ? s->info.file_bytes : 0), "session_bytes",
                            (json_int_t)s->session_bytes);
    if (dev && !strcmp(kind, "gpu"))
        json_object_set_new(mem, "device", json_string(dev));
    json_t *o = json_pack("{s:f, s:o, s:{s:i, s:b}, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:I}}", "time",
                          srv_now(), "model", model_state_json(s), "queue", "waiting", s->q_len, "active",
                          s->active != NULL, "current", cur, "last", last, "recent", recent, "series", series,
                          "memory", mem, "timeline", timeline_json(s), "requests", "total",
                          (json_int_t)s->n_requests, "errors", (json_int_t)s->n_errors, "cancelled",
                          (json_int_t)s->n_cancelled);
    pthread_mutex_unlock(&s->mu);
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return t;
}
