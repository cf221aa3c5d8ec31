/* HTTP glue (libmicrohttpd, one thread per connection): routing, bodies, the static dashboard,
 * and the two kinds of server-sent event streams (generation chunks, telemetry). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "api.h"
#include "http.h"
#include "web_assets.h"

/* Per-request state: the body as it arrives. */
struct conn {
    char *body;
    size_t len, cap;
    size_t seen; /* bytes received, kept beyond max_body to answer 413 once the body is read */
};

/* True when the peer closed its end (EOF or error), without consuming pipelined bytes. */
static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP))
        return true;
    if (p.revents & POLLIN) {
        char c;
        ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return false;
}

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Waits on s->cv for at most ms milliseconds; caller holds s->mu. */
static void wait_ms(struct srv *s, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

static enum MHD_Result send_body(struct MHD_Connection *c, int status, const char *ctype, const char *body,
                                 size_t n)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, struct api_reply *r)
{
    if (!r->body) {
        r->status = 500;
        r->body = api_error_json("out of memory", "server_error", NULL);
    }
    enum MHD_Result ret = send_body(c, r->status ? r->status : 200, "application/json", r->body, strlen(r->body));
    free(r->body);
    r->body = NULL;
    return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *type, const char *param,
                                  const char *msg)
{
    struct api_reply r = {status, api_error_json(msg, type, param)};
    return send_reply(c, &r);
}

/* ---- static dashboard ---- */

static const char *content_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot)
        return "application/octet-stream";
    if (!strcmp(dot, ".html"))
        return "text/html; charset=utf-8";
    if (!strcmp(dot, ".js"))
        return "text/javascript; charset=utf-8";
    if (!strcmp(dot, ".css"))
        return "text/css; charset=utf-8";
    if (!strcmp(dot, ".svg"))
        return "image/svg+xml";
    return "application/octet-stream";
}

static enum MHD_Result serve_static(struct MHD_Connection *c, const char *url)
{
    const struct embedded_file *f = web_find(!strcmp(url, "/") ? "/index.html" : url);
    if (!f)
        return send_error(c, 404, "not_found", NULL, "no such page");
    struct MHD_Response *r = MHD_create_response_from_buffer(f->size, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", content_type(f->path));
    /* The page talks to this server only. */
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; connect-src 'self'; img-src 'self' data:; "
                            "style-src 'self'; script-src 'self'; base-uri 'none'; form-action 'none'");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- generation streams ---- */

struct pending {
    char *buf;
    size_t len, off;
};

static ssize_t pending_copy(struct pending *p, char *out, size_t max)
{
    size_t n = p->len - p->off;
    if (n > max)
        n = max;
    memcpy(out, p->buf + p->off, n);
    p->off += n;
    return (ssize_t)n;
}

/* Replaces the pending bytes with "data: JSON\n\n" (+ "data: [DONE]\n\n" when done). */
static void pending_event(struct pending *p, char *json, bool done)
{
    free(p->buf);
    size_t jl = json ? strlen(json) : 0;
    p->buf = malloc(jl + 32);
    p->off = 0;
    p->len = 0;
    if (p->buf) {
        if (json)
            p->len += (size_t)sprintf(p->buf, "data: %s\n\n", json);
        if (done)
            p->len += (size_t)sprintf(p->buf + p->len, "data: [DONE]\n\n");
    }
    free(json);
}

struct gen_stream {
    struct srv *s;
    struct job *j;
    bool chat, include_usage;
    char id[48];
    long created;
    size_t sent;
    int phase; /* 0: role chunk, 1: deltas, 2: finished */
    struct pending p;
};

static ssize_t gen_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct gen_stream *g = cls;
    struct srv *s = g->s;
    struct job *j = g->j;
    if (g->p.off < g->p.len)
        return pending_copy(&g->p, buf, max);
    if (g->phase == 2)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (g->phase == 0) {
        g->phase = 1;
        if (g->chat) {
            pending_event(&g->p, api_gen_chunk(true, g->id, g->created, j->model_used, "", 0, true, NULL, NULL), false);
            if (g->p.len)
                return pending_copy(&g->p, buf, max);
        }
    }
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (j->out_len > g->sent) {
            size_t n = j->out_len - g->sent;
            char *text = malloc(n);
            if (text)
                memcpy(text, j->out + g->sent, n);
            g->sent = j->out_len;
            pthread_mutex_unlock(&s->mu);
            pending_event(&g->p, text ? api_gen_chunk(g->chat, g->id, g->created, j->model_used, text, n, false, NULL, NULL) : NULL, false);
            free(text);
            break;
        }
        if (j->done || s->stopping) {
            char *ev;
            if (j->http_status || !j->done)
                ev = api_error_json(j->done ? j->err : "the server is shutting down", j->done ? j->err_type : "server_shutting_down", NULL);
            else
                ev = api_gen_chunk(g->chat, g->id, g->created, j->model_used, "", 0, false, j->finish ? j->finish : "stop", j);
            pthread_mutex_unlock(&s->mu);
            pending_event(&g->p, ev, true);
            g->phase = 2;
            break;
        }
        wait_ms(s, 100);
        if (client_gone(j->fd)) {
            pthread_mutex_unlock(&s->mu);
            srv_cancel(s, j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    if (!g->p.len)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    return pending_copy(&g->p, buf, max);
}

static void gen_stream_free(void *cls)
{
    struct gen_stream *g = cls;
    srv_cancel(g->s, g->j); /* no-op when finished; frees the slot of a client that left */
    job_release(g->s, g->j);
    free(g->p.buf);
    free(g);
}

static enum MHD_Result sse_response(struct MHD_Connection *c, MHD_ContentReaderCallback rd, void *cls,
                                    MHD_ContentReaderFreeCallback fr)
{
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, rd, cls, fr);
    if (!r) {
        fr(cls);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle_gen(struct srv *s, struct MHD_Connection *c, struct conn *cn, bool chat)
{
    struct api_reply r = {0};
    bool stream = false, include_usage = false;
    struct job *j = api_parse_gen(s, cn->body ? cn->body : "", cn->len, chat, &stream, &include_usage, &r);
    if (!j)
        return send_reply(c, &r);
    j->fd = conn_fd(c);
    if (!srv_submit(s, j)) {
        job_release(s, j);
        return send_error(c, 503, "queue_full", NULL, "the queue is full; retry later");
    }
    /* Wait in the queue (and, unless streaming, for the whole generation), watching the client. */
    pthread_mutex_lock(&s->mu);
    while (!j->done && !(stream && j->started) && !s->stopping) {
        wait_ms(s, 100);
        if (client_gone(j->fd)) {
            pthread_mutex_unlock(&s->mu);
            srv_cancel(s, j);
            job_release(s, j);
            return MHD_NO;
        }
    }
    bool done = j->done;
    pthread_mutex_unlock(&s->mu);
    if (!done && s->stopping) {
        srv_cancel(s, j);
        job_release(s, j);
        return send_error(c, 503, "server_shutting_down", NULL, "the server is shutting down");
    }
    static unsigned long long next_id;
    char id[48];
    snprintf(id, sizeof id, "%s-%llu", chat ? "chatcmpl" : "cmpl", __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED));
    long created = (long)time(NULL);
    if (done && j->http_status) {
        r.status = j->http_status;
        r.body = api_error_json(j->err, j->err_type, j->err_param);
        job_release(s, j);
        return send_reply(c, &r);
    }
    if (!stream) {
        r.status = 200;
        r.body = api_gen_response(j, chat, id, created);
        job_release(s, j);
        return send_reply(c, &r);
    }
    struct gen_stream *g = calloc(1, sizeof *g);
    if (!g) {
        srv_cancel(s, j);
        job_release(s, j);
        return MHD_NO;
    }
    *g = (struct gen_stream){.s = s, .j = j, .chat = chat, .include_usage = include_usage, .created = created};
    snprintf(g->id, sizeof g->id, "%s", id);
    return sse_response(c, gen_stream_read, g, gen_stream_free);
}

/* ---- telemetry stream: one event about every second ---- */

struct tele_stream {
    struct srv *s;
    int fd;
    double next;
    struct pending p;
};

static ssize_t tele_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct tele_stream *t = cls;
    if (t->p.off < t->p.len)
        return pending_copy(&t->p, buf, max);
    while (srv_mono() < t->next) {
        if (t->s->stopping)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (client_gone(t->fd))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (t->s->stopping)
        return MHD_CONTENT_READER_END_OF_STREAM;
    t->next = srv_mono() + 1.0;
    pending_event(&t->p, api_telemetry(t->s), false);
    if (!t->p.len)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    return pending_copy(&t->p, buf, max);
}

static void tele_free(void *cls)
{
    struct tele_stream *t = cls;
    free(t->p.buf);
    free(t);
}

/* ---- routing ---- */

static bool authorized(struct srv *s, struct MHD_Connection *c)
{
    if (!s->cfg.api_key)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, s->cfg.api_key))
        return true;
    h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    return h && !strcmp(h, s->cfg.api_key);
}

static enum MHD_Result dispatch(struct srv *s, struct MHD_Connection *c, const char *url, const char *method,
                                struct conn *cn)
{
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    bool api = !strncmp(url, "/v1/", 4) || !strncmp(url, "/api/", 5) || !strcmp(url, "/tokenize") ||
               !strcmp(url, "/detokenize");
    if (cn->seen > s->cfg.max_body) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is %zu bytes; the limit is %zu (--max-body)", cn->seen,
                 s->cfg.max_body);
        return send_error(c, 413, "request_too_large", NULL, msg);
    }
    if (!api) {
        if (!strcmp(url, "/health"))
            goto route;
        if (!get)
            return send_error(c, 405, "method_not_allowed", NULL, "use GET for pages");
        return serve_static(c, url);
    }
    if (!authorized(s, c))
        return send_error(c, 401, "invalid_api_key", NULL, "missing or wrong API key (Authorization: Bearer KEY)");
route:;
    struct api_reply r = {0};
    const char *body = cn->body ? cn->body : "";
    struct {
        const char *path;
        bool post;
    } routes[] = {{"/health", false},           {"/v1/models", false},        {"/api/models", false},
                  {"/api/telemetry", false},    {"/api/telemetry/stream", false}, {"/v1/chat/completions", true},
                  {"/v1/completions", true},    {"/tokenize", true},          {"/detokenize", true},
                  {"/api/models/load", true},   {"/api/models/unload", true}};
    int k = -1;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path))
            k = (int)i;
    if (k < 0)
        return send_error(c, 404, "not_found", NULL, "no such endpoint");
    if (routes[k].post ? !post : !get)
        return send_error(c, 405, "method_not_allowed", NULL, routes[k].post ? "use POST" : "use GET");
    switch (k) {
    case 0: api_health(s, &r); break;
    case 1: api_models(s, &r); break;
    case 2: api_models_state(s, &r); break;
    case 3:
        r.status = 200;
        r.body = api_telemetry(s);
        break;
    case 4: {
        struct tele_stream *t = calloc(1, sizeof *t);
        if (!t)
            return MHD_NO;
        t->s = s;
        t->fd = conn_fd(c);
        return sse_response(c, tele_read, t, tele_free);
    }
    case 5: return handle_gen(s, c, cn, true);
    case 6: return handle_gen(s, c, cn, false);
    case 7: api_tokenize(s, body, cn->len, &r); break;
    case 8: api_detokenize(s, body, cn->len, &r); break;
    case 9: api_load(s, body, cn->len, &r); break;
    default: api_unload(s, body, cn->len, &r); break;
    }
    return send_reply(c, &r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **pp)
{
    (void)version;
    struct srv *s = cls;
    struct conn *cn = *pp;
    if (!cn) {
        cn = calloc(1, sizeof *cn);
        if (!cn)
            return MHD_NO;
        *pp = cn;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        cn->seen += n;
        if (cn->seen <= s->cfg.max_body) {
            if (cn->len + n + 1 > cn->cap) {
                size_t cap = cn->cap ? cn->cap * 2 : 4096;
                while (cap < cn->len + n + 1)
                    cap *= 2;
                char *t = realloc(cn->body, cap);
                if (!t)
                    return MHD_NO;
                cn->body = t;
                cn->cap = cap;
            }
            memcpy(cn->body + cn->len, upload, n);
            cn->len += n;
            cn->body[cn->len] = 0;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return dispatch(s, c, url, method, cn);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **pp, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct conn *cn = *pp;
    if (cn) {
        free(cn->body);
        free(cn);
        *pp = NULL;
    }
}

struct MHD_Daemon *http_start(struct srv *s, int listen_fd, bool ipv6)
{
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    if (ipv6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, listen_fd,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)s->cfg.max_conn, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                            MHD_OPTION_END);
}
