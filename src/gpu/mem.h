/* mem: every device allocation goes through one tracker (name, size, owner), under a budget,
 * with a report and a leak check at shutdown; kernel pointers are range-checked against the
 * live allocations when a graph is built (not per launch). */
#ifndef BRASA_GPU_MEM_H
#define BRASA_GPU_MEM_H
#include <stdbool.h>
#include <stdio.h>
#include "gpu/drv.h"

struct gmem_block {
    CUdeviceptr ptr;
    size_t size;
    char name[48];
    char owner[16];
};

struct gmem {
    const struct drv *d;
    struct gmem_block *b;
    int n, cap;
    size_t used, peak, budget; /* budget 0: no limit beyond the device */
};

void gmem_init(struct gmem *m, const struct drv *d, size_t budget);
/* Allocates size bytes (rounded up to 256); the message names the buffer on failure. */
brasa_status gmem_alloc(struct gmem *m, CUdeviceptr *out, size_t size, const char *name,
                        const char *owner, struct brasa_err *err);
void gmem_free(struct gmem *m, CUdeviceptr p);
/* BRASA_OK when [p, p+bytes) lies inside one live allocation; else names `what`. */
brasa_status gmem_check_range(const struct gmem *m, CUdeviceptr p, size_t bytes, const char *what,
                              struct brasa_err *err);
void gmem_report(const struct gmem *m, FILE *f);
/* Frees everything left; returns the number of allocations still live (leaks) and lists them
 * on f when f is non-NULL. */
int gmem_shutdown(struct gmem *m, FILE *f);

#endif
