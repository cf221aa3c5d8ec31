/* mem: tracked device allocations. */
#include "gpu/mem.h"

#include <stdlib.h>
#include <string.h>

void gmem_init(struct gmem *m, const struct drv *d, size_t budget)
{
    memset(m, 0, sizeof *m);
    m->d = d;
    m->budget = budget;
}

brasa_status gmem_alloc(struct gmem *m, CUdeviceptr *out, size_t size, const char *name,
                        const char *owner, struct brasa_err *err)
{
    *out = 0;
    size_t sz = (size + 255) & ~(size_t)255;
    if (sz == 0)
        sz = 256;
    if (m->budget && m->used + sz > m->budget)
        return brasa_fail(err, BRASA_ENOMEM,
                          "GPU memory budget of %zu MiB exceeded by %s (%zu MiB, %zu MiB in use)",
                          m->budget >> 20, name, sz >> 20, m->used >> 20);
    if (m->n == m->cap) {
        int nc = m->cap ? 2 * m->cap : 64;
        struct gmem_block *nb = realloc(m->b, (size_t)nc * sizeof *nb);
        if (!nb)
            return brasa_fail(err, BRASA_ENOMEM, "out of host memory");
        m->b = nb;
        m->cap = nc;
    }
    CUdeviceptr p = 0;
    CUresult r = m->d->cuMemAlloc(&p, sz);
    if (r != 0) {
        size_t fr = 0, tot = 0;
        m->d->cuMemGetInfo(&fr, &tot);
        drv_check(m->d, r, "cuMemAlloc", err);
        return brasa_wrap(err, BRASA_ENOMEM, "%s: %zu MiB (free %zu of %zu MiB)", name, sz >> 20,
                          fr >> 20, tot >> 20);
    }
    struct gmem_block *b = &m->b[m->n++];
    b->ptr = p;
    b->size = sz;
    snprintf(b->name, sizeof b->name, "%s", name);
    snprintf(b->owner, sizeof b->owner, "%s", owner);
    m->used += sz;
    if (m->used > m->peak)
        m->peak = m->used;
    *out = p;
    return BRASA_OK;
}

void gmem_free(struct gmem *m, CUdeviceptr p)
{
    if (!p)
        return;
    for (int i = 0; i < m->n; i++) {
        if (m->b[i].ptr == p) {
            m->d->cuMemFree(p);
            m->used -= m->b[i].size;
            m->b[i] = m->b[--m->n];
            return;
        }
    }
}

brasa_status gmem_check_range(const struct gmem *m, CUdeviceptr p, size_t bytes, const char *what,
                              struct brasa_err *err)
{
    for (int i = 0; i < m->n; i++) {
        const struct gmem_block *b = &m->b[i];
        if (p >= b->ptr && p < b->ptr + b->size) {
            if (bytes <= b->size - (size_t)(p - b->ptr))
                return BRASA_OK;
            return brasa_fail(err, BRASA_EINVAL,
                              "internal: %s touches %zu bytes at offset %llu of %s (%zu bytes)",
                              what, bytes, (unsigned long long)(p - b->ptr), b->name, b->size);
        }
    }
    return brasa_fail(err, BRASA_EINVAL, "internal: %s points outside every GPU allocation", what);
}

void gmem_report(const struct gmem *m, FILE *f)
{
    size_t by_owner[8] = {0};
    const char *owners[8] = {0};
    int no = 0;
    for (int i = 0; i < m->n; i++) {
        int k = 0;
        while (k < no && strcmp(owners[k], m->b[i].owner) != 0)
            k++;
        if (k == no && no < 8)
            owners[no++] = m->b[i].owner;
        if (k < 8)
            by_owner[k] += m->b[i].size;
    }
    fprintf(f, "brasa: GPU memory: %zu MiB in %d allocations (peak %zu MiB)", m->used >> 20, m->n,
            m->peak >> 20);
    for (int k = 0; k < no; k++)
        fprintf(f, "%s %s %.1f MiB", k ? "," : ":", owners[k], (double)by_owner[k] / 1048576.0);
    fputc('\n', f);
}

int gmem_shutdown(struct gmem *m, FILE *f)
{
    int leaks = m->n;
    for (int i = 0; i < m->n; i++) {
        if (f)
            fprintf(f, "brasa: GPU leak: %s (%s, %zu bytes)\n", m->b[i].name, m->b[i].owner,
                    m->b[i].size);
        if (m->d && m->d->cuMemFree)
            m->d->cuMemFree(m->b[i].ptr);
    }
    free(m->b);
    memset(m, 0, sizeof *m);
    return leaks;
}
