/* The JSON side of the API: request validation into jobs, response and event bodies. */
#ifndef BRASA_SERVER_API_H
#define BRASA_SERVER_API_H
#include <stdbool.h>
#include <stddef.h>

#include "server.h"

/* A reply: HTTP status and a malloc'd JSON body. */
struct api_reply {
    int status;
    char *body;
};

/* {"error": {"message", "type", "param", "code"}} */
char *api_error_json(const char *msg, const char *type, const char *param);
void api_error(struct api_reply *r, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Parses a /v1/chat/completions (chat) or /v1/completions body into a job. On success returns a
 * job and sets *stream; on failure returns NULL and fills r with the error. */
struct job *api_parse_gen(struct srv *s, const char *body, size_t len, bool chat, bool *stream,
                          bool *include_usage, struct api_reply *r);
/* The whole (non-streamed) response of a finished job. */
char *api_gen_response(const struct job *j, bool chat, const char *id, long created);
/* One streamed chunk: delta text (may be empty), finish reason (NULL while running),
 * usage included when j is non-NULL. */
char *api_gen_chunk(bool chat, const char *id, long created, const char *model, const char *text, size_t n,
                    bool role, const char *finish, const struct job *usage);

void api_models(struct srv *s, struct api_reply *r);          /* GET /v1/models */
void api_models_state(struct srv *s, struct api_reply *r);    /* GET /api/models */
void api_tokenize(struct srv *s, const char *body, size_t len, struct api_reply *r);
void api_detokenize(struct srv *s, const char *body, size_t len, struct api_reply *r);
/* POST /api/models/load: validates, queues, waits when {"wait": true}. */
void api_load(struct srv *s, const char *body, size_t len, struct api_reply *r);
void api_unload(struct srv *s, const char *body, size_t len, struct api_reply *r);
void api_health(struct srv *s, struct api_reply *r);
char *api_telemetry(struct srv *s);

#endif
