/* Files embedded into the binary at build time (kernel templates, web assets). */
#ifndef BRASA_EMBED_H
#define BRASA_EMBED_H
#include <stddef.h>

struct embedded_file {
    const char *path; /* path relative to the repository root, e.g. "src/gpu/kernels/matvec.cu" */
    const char *data; /* NUL-terminated contents */
    size_t size;      /* bytes, without the terminating NUL */
};

/* Table ends with a { NULL, NULL, 0 } entry. */
extern const struct embedded_file embedded_files[];

/* Returns the file whose path ends with `suffix`, or NULL. */
const struct embedded_file *embedded_find(const char *suffix);

#endif
