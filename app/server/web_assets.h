/* The dashboard's files (app/server/web/), embedded at build time by tools/embed.sh into their
 * own table so the engine library keeps only its own embedded files. */
#ifndef BRASA_SERVER_WEB_ASSETS_H
#define BRASA_SERVER_WEB_ASSETS_H
#include "core/embed.h"

extern const struct embedded_file web_files[];

/* The file whose path ends with url ("/index.html"), or NULL. */
const struct embedded_file *web_find(const char *url);

#endif
