/* json_mini: a tiny JSON reader for tests (fixture metadata such as *.prompts.json).
 * Parses a whole document into a tree; strings are decoded to UTF-8 (\u escapes and
 * surrogate pairs included) and NUL-terminated (len holds the byte count). */
#ifndef BRASA_TEST_JSON_MINI_H
#define BRASA_TEST_JSON_MINI_H
#include <stdbool.h>
#include <stddef.h>

enum jm_type { JM_NULL, JM_BOOL, JM_NUM, JM_STR, JM_ARR, JM_OBJ };

struct jm {
    enum jm_type type;
    bool b;
    double num;
    char *str;          /* JM_STR */
    size_t len;
    struct jm *items;   /* JM_ARR, JM_OBJ: n values */
    char **keys;        /* JM_OBJ: n keys */
    size_t n;
};

/* NULL on a syntax error or out of memory. */
struct jm *jm_parse(const char *text, size_t len);
void jm_free(struct jm *v);
/* Member of an object (NULL if absent or not an object). */
const struct jm *jm_get(const struct jm *obj, const char *key);
/* Element of an array (NULL if out of range or not an array). */
const struct jm *jm_at(const struct jm *arr, size_t i);
/* Number as int/double with a default when v is NULL or not a number. */
long jm_int(const struct jm *v, long def);
double jm_num(const struct jm *v, double def);

#endif
