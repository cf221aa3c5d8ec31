/* GGUF: reading (validated, memory-mapped) and writing.
 *
 * The file is untrusted. gguf_open() validates everything before any of it is used:
 * magic, version (2 or 3), counts against the file size, every string length, array
 * lengths and element types, duplicate keys and tensor names, dims (1..4, each >= 1,
 * products checked for overflow), known tensor types whose rows divide into whole blocks,
 * and tensor data aligned, inside the data section and not overlapping. A violation is an
 * error naming what is wrong and where (byte offset, key or tensor name). */
#ifndef BRASA_GGUF_H
#define BRASA_GGUF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

enum gguf_vtype {
    GGUF_T_UINT8 = 0,
    GGUF_T_INT8 = 1,
    GGUF_T_UINT16 = 2,
    GGUF_T_INT16 = 3,
    GGUF_T_UINT32 = 4,
    GGUF_T_INT32 = 5,
    GGUF_T_FLOAT32 = 6,
    GGUF_T_BOOL = 7,
    GGUF_T_STRING = 8,
    GGUF_T_ARRAY = 9,
    GGUF_T_UINT64 = 10,
    GGUF_T_INT64 = 11,
    GGUF_T_FLOAT64 = 12,
    GGUF_T_COUNT
};
const char *gguf_vtype_name(enum gguf_vtype t);
/* Bytes of one element of a fixed-size type; 0 for STRING and ARRAY. */
size_t gguf_vtype_size(enum gguf_vtype t);
/* Offset of the first byte that breaks UTF-8 (bad, overlong or surrogate sequence, or a NUL
 * byte) in s[0..n), or -1 if all of it is valid. Key and tensor names must pass this. */
long long gguf_utf8_invalid_at(const void *s, uint64_t n);

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

/* A string inside the mapped file: not NUL-terminated. */
struct gguf_str {
    uint64_t len;
    const char *ptr;
};

struct gguf_kv {
    char *key;               /* NUL-terminated copy */
    enum gguf_vtype type;
    /* scalars (type != ARRAY): the value widened to the field of its kind */
    union {
        uint64_t u64;        /* UINT8/16/32/64 */
        int64_t i64;         /* INT8/16/32/64 */
        double f64;          /* FLOAT32/64 */
        bool b;              /* BOOL */
        struct gguf_str str; /* STRING */
    } v;
    /* arrays (type == ARRAY) */
    enum gguf_vtype arr_type;
    uint64_t arr_len;
    const void *arr_data;        /* non-string arrays: little-endian elements inside the mapping;
                                    string arrays: arr_strs */
    struct gguf_str *arr_strs;   /* string arrays: arr_len entries (allocated) */
    uint64_t file_offset;        /* byte offset of the key in the file (for messages) */
};

struct gguf_tensor {
    char *name;              /* NUL-terminated copy */
    uint32_t type;           /* ggml type id (see quant/quant.h) */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the fastest (row length); unused dims are 1 */
    uint64_t offset;         /* relative to the data section */
    uint64_t nbytes;
    const void *data;        /* inside the mapping */
};

struct gguf_file {
    uint32_t version;
    uint64_t alignment;
    uint64_t n_kv;
    struct gguf_kv *kv;
    uint64_t n_tensors;
    struct gguf_tensor *tensors;
    uint64_t data_offset;    /* start of the data section in the file */
    const uint8_t *base;     /* the whole file */
    size_t size;
    /* private */
    void *map_;
    void *index_;
};

/* Opens and validates a file (memory-mapped; gguf_to_memory may move it into memory). */
brasa_status gguf_open(struct gguf_file **out, const char *path, struct brasa_err *err);
/* A file gguf_open mapped: its bytes moved into memory in huge pages, at the same addresses
 * (plat_map_to_memory; an error leaves the mapping as it was). */
brasa_status gguf_to_memory(struct gguf_file *f, struct brasa_err *err);
/* Validates a buffer the caller keeps alive until gguf_close() (fuzzing, tests). */
brasa_status gguf_open_mem(struct gguf_file **out, const void *data, size_t size,
                           struct brasa_err *err);
void gguf_close(struct gguf_file *f);

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name);

/* Typed getters: BRASA_ENOTFOUND if missing, BRASA_EFORMAT if of another type or out of
 * range (integers of any width/sign are accepted when the value fits). */
brasa_status gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out, struct brasa_err *err);
brasa_status gguf_get_i64(const struct gguf_file *f, const char *key, int64_t *out, struct brasa_err *err);
brasa_status gguf_get_f32(const struct gguf_file *f, const char *key, float *out, struct brasa_err *err);
brasa_status gguf_get_bool(const struct gguf_file *f, const char *key, bool *out, struct brasa_err *err);
/* Returns a malloc'd NUL-terminated copy (the caller frees it). */
brasa_status gguf_get_str(const struct gguf_file *f, const char *key, char **out, struct brasa_err *err);
/* Array of the given element type; *data points into the mapping (or arr_strs for strings). */
brasa_status gguf_get_arr(const struct gguf_file *f, const char *key, enum gguf_vtype elem,
                          const void **data, uint64_t *len, struct brasa_err *err);
/* Convenience: value or default when the key is absent (an error if present with a bad type). */
brasa_status gguf_get_u32_or(const struct gguf_file *f, const char *key, uint32_t def, uint32_t *out, struct brasa_err *err);
brasa_status gguf_get_f32_or(const struct gguf_file *f, const char *key, float def, float *out, struct brasa_err *err);
brasa_status gguf_get_bool_or(const struct gguf_file *f, const char *key, bool def, bool *out, struct brasa_err *err);

/* ---- writer ---- */
struct gguf_writer;
brasa_status gguf_writer_new(struct gguf_writer **out, struct brasa_err *err);
void gguf_writer_free(struct gguf_writer *w);
brasa_status gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment, struct brasa_err *err);
/* Each setter copies its data. Setting an existing key replaces it. */
brasa_status gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v, struct brasa_err *err);
brasa_status gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v, struct brasa_err *err);
brasa_status gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v, struct brasa_err *err);
brasa_status gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v, struct brasa_err *err);
brasa_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v, struct brasa_err *err);
brasa_status gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype elem,
                                 const void *data, uint64_t n, struct brasa_err *err);
brasa_status gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *strs,
                                     uint64_t n, struct brasa_err *err);
/* Copies a key/value as read from another file (any type, arrays included). */
brasa_status gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv, struct brasa_err *err);
/* Adds a tensor; data (nbytes, must match type and shape) is referenced, not copied, and must
 * stay valid until gguf_writer_write() returns. */
brasa_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, int n_dims,
                                    const int64_t *ne, const void *data, uint64_t nbytes,
                                    struct brasa_err *err);
brasa_status gguf_writer_write(struct gguf_writer *w, const char *path, struct brasa_err *err);

#endif
