/* cpu: the CPU backend. Executes a planned graph (graph/graph.h) node by node; each op splits
 * its work over the persistent thread pool. All buffers are sized in cpu_prepare(), so running
 * a prepared graph allocates nothing.
 *
 * Debugging: BRASA_DUMP=name[,name...] (or "all") prints each named node's shape, first values
 * and sum to stderr after it runs; with BRASA_DUMP_DIR=dir the whole output is also written to
 * dir/<name>.pos<pos0>.f32 (raw float32). BRASA_PRINT_GRAPH=1 prints a session's decode graph. */
#ifndef BRASA_CPU_H
#define BRASA_CPU_H
#include <stdint.h>
#include "core/status.h"
#include "graph/graph.h"

struct pool;
struct cpu;

/* pool may be NULL (single-threaded); it is borrowed, not owned. */
brasa_status cpu_new(struct cpu **out, struct pool *pool, struct brasa_err *err);
void cpu_free(struct cpu *c);
/* Grows the arena and scratch buffers as g needs (n_ctx: longest attention span). */
brasa_status cpu_prepare(struct cpu *c, const struct graph *g, int n_ctx, struct brasa_err *err);
/* Runs a prepared graph. */
brasa_status cpu_run(struct cpu *c, const struct graph *g, const struct graph_run *r,
                     struct brasa_err *err);
/* Runs nodes [i0, i1) of a prepared graph (the shards of a tensor-parallel model run up to each
 * ALLREDUCE, which copies this shard's part, and go on once the parts are added up). */
brasa_status cpu_run_range(struct cpu *c, const struct graph *g, const struct graph_run *r,
                           int i0, int i1, struct brasa_err *err);
/* Output of node i after cpu_run (arena memory; valid until the next run). */
const float *cpu_node_data(const struct cpu *c, const struct graph *g, int i);
/* Bytes of the arena and scratch buffers. */
uint64_t cpu_bytes(const struct cpu *c);

#endif
