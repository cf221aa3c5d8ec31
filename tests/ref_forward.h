/* ref_forward: a plain float64 reference forward pass, for tests only.
 *
 * Independent of src/model, src/graph and src/cpu: it reads the hyper-parameters from the GGUF
 * keys itself, dequantizes every weight to double with the scalar reference dequantizer, and
 * runs one token at a time with an explicit per-layer loop (llama, qwen2, granite, qwen3,
 * qwen35). It does not mimic ggml's activation conversion, so on quantized files it differs
 * from the goldens by the quantization noise of the activations (fixtures README). */
#ifndef BRASA_TEST_REF_FORWARD_H
#define BRASA_TEST_REF_FORWARD_H
#include <stdint.h>
#include "core/status.h"

struct ref_model;

brasa_status ref_load(struct ref_model **out, const char *path, struct brasa_err *err);
void ref_free(struct ref_model *m);
int ref_n_vocab(const struct ref_model *m);
/* Forgets every token fed so far (empty KV cache, zero recurrent state). */
void ref_reset(struct ref_model *m);
/* Feeds one token at the next position; logits receives n_vocab values. */
brasa_status ref_step(struct ref_model *m, int32_t id, double *logits, struct brasa_err *err);

#endif
