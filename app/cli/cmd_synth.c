/* brasa synth: write a random-weight model of a real family's shapes. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/platform.h"
#include "opts.h"
#include "quant/mix.h"
#include "synth/synth.h"

static void list_shapes(FILE *f)
{
    size_t n;
    const struct synth_shape *s = synth_shapes(&n);
    fprintf(f, "\nshapes (--arch --shape: the model whose shapes it copies):\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %-8s %-5s %-28s %2d layers, hidden %4d, %2d/%d heads, ffn %5d, vocab %d%s\n", s[i].arch,
                s[i].shape, s[i].name, s[i].n_layer, s[i].n_embd, s[i].n_head, s[i].n_head_kv, s[i].n_ff,
                s[i].n_vocab, s[i].tied ? ", tied" : "");
    fprintf(f, "\ntypes: %s\n", quant_ftype_list());
}

int cmd_synth(int argc, char **argv)
{
    const char *arch = NULL, *shape = NULL, *type = "q4_k_m", *out = NULL;
    uint64_t seed = 1;
    int threads = 0;
    bool list = false;
    const struct opt tbl[] = {
        {NULL, "--arch", OPT_STR, &arch, "ARCH", "llama, qwen2, granite, qwen3, qwen35"},
        {NULL, "--shape", OPT_STR, &shape, "SHAPE", "tiny, 0.5b, 1.5b, 7b, 8b, ... (see --list)"},
        {NULL, "--type", OPT_STR, &type, "TYPE", "tensor-type mix: q4_k_m (default), q8_0, f16, ..."},
        {"-o", "--output", OPT_STR, &out, "FILE", "GGUF file to write"},
        {NULL, "--seed", OPT_U64, &seed, "S", "random seed (1)"},
        {"-t", "--threads", OPT_INT, &threads, "N", "threads (default: all cores)"},
        {NULL, "--list", OPT_FLAG, &list, NULL, "list the shapes and types"},
        {0},
    };
    const char *usage = "brasa synth --arch ARCH --shape SHAPE [--type q4_k_m] -o FILE [--seed S]";
    int rc = opts_parse(usage, tbl, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (list) {
        list_shapes(stdout);
        return 0;
    }
    if (!arch || !shape || !out) {
        fprintf(stderr, "brasa synth: --arch, --shape and -o are required\n");
        opts_help(usage, tbl, stderr);
        list_shapes(stderr);
        return 2;
    }
    int ftype = quant_ftype_by_name(type);
    if (ftype < 0) {
        fprintf(stderr, "brasa synth: unknown --type '%s' (known: %s)\n", type, quant_ftype_list());
        return 2;
    }
    struct progress pr;
    progress_begin(&pr, "writing");
    struct synth_opts o = {.arch = arch, .shape = shape, .ftype = ftype, .seed = seed, .n_threads = threads,
                           .progress = progress_cb, .progress_ud = &pr};
    struct synth_stats st;
    struct brasa_err err = {{0}};
    double t0 = plat_now();
    brasa_status s = synth_write(out, &o, &st, &err);
    progress_end(&pr);
    if (s != BRASA_OK) {
        fprintf(stderr, "brasa synth: %s\n", err.msg);
        return 1;
    }
    char size[32];
    fprintf(stderr, "wrote %s: %s %s %s, %.2f M parameters, %d tensors, %s in %.1f s\n", out, arch, shape,
            quant_ftype_name(ftype), (double)st.n_params / 1e6, st.n_tensors, cli_bytes(st.file_bytes, size, sizeof size),
            plat_now() - t0);
    return 0;
}
