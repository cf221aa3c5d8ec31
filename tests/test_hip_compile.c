/* Every kernel variant brasa can choose (gpu_all_variants) compiles for AMD GPUs with hipcc:
 * for gfx1030 (RDNA2) to a linked code object, as hiprtc would produce at run time; for
 * gfx1100 (RDNA3) to a linked code object when the installed ROCm device library has gfx11
 * bitcode, else to ISA assembly only (every function compiled by the gfx1100 back end, calls
 * into the device library left unresolved), and the output says so. A compile error fails.
 * Needs hipcc (Debian: hipcc, libamdhip64-dev, rocm-device-libs); SKIPs loudly without it, on
 * Windows, and under sanitizers (the plain build runs it). BRASA_HIPCC picks the compiler.
 * It takes a few minutes of two cores, so it runs when BRASA_HIP_CHECK=1 (.ci/run sets it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/embed.h"
#include "core/platform.h"
#include "gpu/drv_hip.h"
#include "gpu/jit.h"
#include "gpu/variants.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

/* What hiprtc provides implicitly, hipcc gets from hip_runtime.h; device code only. */
#define HIPCC_FLAGS "--cuda-device-only -O3 -std=c++17 -include hip/hip_runtime.h -Wno-macro-redefined"

static const char *hipcc(void)
{
    const char *e = getenv("BRASA_HIPCC");
    return e && *e ? e : "hipcc";
}

/* Runs cmd through sh; returns its exit status and its output (first cap-1 bytes). */
static int run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = 0;
    int c;
    while ((c = fgetc(p)) != EOF)
        if (n + 1 < cap)
            out[n++] = (char)c;
    out[n] = 0;
    int st = pclose(p);
    return st == -1 ? -1 : (st >> 8) & 0xff;
}

static void write_file(const char *dir, const char *name, const char *data, size_t n, int *bad)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n)
        (*bad)++;
    if (f)
        fclose(f);
}

/* The compiler command hipcc runs for v000.hip (mode, extra flags, arch), as a shell script
 * dir/cc-<arch>.sh taking the variant's name as $1 (output "$1.<arch>.out"): hipcc, a Perl
 * wrapper, costs about as much CPU as the compile of a small variant each time it starts, so
 * it runs once (HIPCC_VERBOSE=1 prints the command) and the compiler for the others. False
 * (and hipcc for every variant) where the command printed is not one to reuse. v000 compiles
 * on the way. */
static bool hipcc_command(const char *dir, const char *arch, const char *mode, const char *extra)
{
    char cmd[2048], out[8192], obj[64];
    snprintf(obj, sizeof obj, "v000.hip.%s.out", arch);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && HIPCC_VERBOSE=1 %s %s %s --offload-arch=%s %s v000.hip -o %s "
             "2>/dev/null | sed -n 's/^hipcc-cmd: *//p'",
             dir, hipcc(), HIPCC_FLAGS, extra, arch, mode, obj);
    if (run(cmd, out, sizeof out) != 0)
        return false;
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = 0;
    /* the input once (" v000.hip"), the output once (obj, maybe quoted), no single quote */
    char *in = strstr(out, " v000.hip"), *o = strstr(out, obj);
    if (!out[0] || strchr(out, '\'') || !in || strstr(in + 1, " v000.hip ") || !o ||
        strstr(o + 1, obj) || in[9] != ' ')
        return false;
    char script[8192];
    int n = snprintf(script, sizeof script, "#!/bin/sh\nexec ");
    for (const char *p = out; *p && n < (int)sizeof script - 64;) {
        if (p == in) { /* (the output keeps hipcc's quotes, if it had them) */
            n += snprintf(script + n, sizeof script - (size_t)n, " \"$1\"");
            p += 9;
        } else if (p == o) {
            n += snprintf(script + n, sizeof script - (size_t)n, "$1.%s.out", arch);
            p += strlen(obj);
        } else {
            script[n++] = *p++;
        }
    }
    script[n++] = '\n';
    char name[64];
    int bad = 0;
    snprintf(name, sizeof name, "cc-%s.sh", arch);
    write_file(dir, name, script, (size_t)n, &bad);
    return bad == 0;
}

/* Compiles every v*.hip in dir for arch, two at a time; returns the number that failed and
 * prints the first failures' logs. mode "-c" links the code object, "-S" stops at ISA. */
static int compile_all(const char *dir, const char *arch, const char *mode, const char *extra,
                       int n_variants)
{
    char cmd[2048], out[8192];
    const bool direct = hipcc_command(dir, arch, mode, extra);
    printf("  %s: %s\n", arch, direct ? "the compiler hipcc runs, called for each variant"
                                       : "hipcc for each variant");
    if (direct)
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && ls v*.hip | grep -v '^v000.hip$' | xargs -r -P 2 -n 1 sh -c "
                 "'sh cc-%s.sh \"$0\" >\"$0.%s.log\" 2>&1 || echo \"$0\"'",
                 dir, arch, arch);
    else
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && ls v*.hip | xargs -r -P 2 -n 1 sh -c '%s %s %s --offload-arch=%s %s "
                 "\"$0\" -o \"$0.%s.out\" >\"$0.%s.log\" 2>&1 || echo \"$0\"'",
                 dir, hipcc(), HIPCC_FLAGS, extra, arch, mode, arch, arch);
    run(cmd, out, sizeof out);
    int failed = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (++failed > 3)
            continue;
        char log[1024], show[2048];
        snprintf(show, sizeof show, "head -c 1500 '%s/%s.%s.log'", dir, line, arch);
        run(show, log, sizeof log);
        fprintf(stderr, "  %s %s failed:\n%s\n", line, arch, log);
    }
    /* every variant must have produced its output */
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.%s\\.out$'", dir, arch);
    run(cmd, out, sizeof out);
    int made = atoi(out);
    if (made + failed != n_variants && failed == 0)
        failed = n_variants - made;
    return failed;
}

TEST(hipcc_compiles_every_variant)
{
#ifdef _WIN32
    SKIP("the HIP compile check runs on Linux");
#endif
#ifdef UNDER_SANITIZER
    SKIP("the HIP compile check runs in the plain build");
#endif
    const char *on = getenv("BRASA_HIP_CHECK");
    if (!on || strcmp(on, "1") != 0) {
        fprintf(stderr, "\n  ** HIP compile check of every variant not run: set BRASA_HIP_CHECK=1 "
                        "(CI does)\n");
        SKIP("BRASA_HIP_CHECK unset");
    }
    char out[4096], cmd[1024];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1 && %s --version 2>/dev/null | grep -i "
                              "-E 'HIP version|clang version'", hipcc(), hipcc());
    if (run(cmd, out, sizeof out) != 0) {
        fprintf(stderr, "\n  ********************************************************\n"
                        "  ** HIP KERNEL COMPILE CHECK NOT RUN: %s not found\n"
                        "  ** (apt-get install hipcc libamdhip64-dev rocm-device-libs)\n"
                        "  ********************************************************\n",
                hipcc());
        SKIP("no hipcc");
    }
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = *(p + 1) ? ';' : 0;
    char dir[] = "/tmp/brasa-test-hip-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    int bad = 0;
    /* the headers the templates include, as hiprtc would be given them */
    for (const struct embedded_file *f = embedded_files; f->path; f++) {
        size_t l = strlen(f->path);
        if (l > 4 && strcmp(f->path + l - 4, ".cuh") == 0)
            write_file(dir, strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path, f->data,
                       f->size, &bad);
    }
    struct gpu_variant v[GV_ALL_MAX];
    int n = gpu_all_variants(v, GV_ALL_MAX), m = 0;
    /* not the CUDA-only templates' variants (on AMD each is one kernel that traps; the
     * driver-table test below compiles one of each template) */
    const char *only = getenv("BRASA_TEST_TMPL"); /* e.g. "mvd.cu": that template only */
    for (int i = 0; i < n; i++)
        if (!gpu_variant_cuda_only(&v[i]) && (!only || !*only || !strcmp(v[i].tmpl, only)))
            v[m++] = v[i];
    n = m;
    REQUIRE(n > 0);
    for (int i = 0; i < n; i++) {
        struct brasa_err err = {{0}};
        char *src = NULL, name[32];
        REQUIRE(jit_render(v[i].tmpl, v[i].defs, v[i].n_defs, &src, &err) == BRASA_OK);
        snprintf(name, sizeof name, "v%03d.hip", i);
        write_file(dir, name, src, strlen(src), &bad);
        free(src);
    }
    REQUIRE(bad == 0);
    double t0 = plat_now();
    int f1030 = compile_all(dir, "gfx1030", "-c", "", n);
    double t1 = plat_now();
    /* gfx1100: does this ROCm have its device library? (Debian's 5.2 does not) */
    char probe[1200];
    snprintf(probe, sizeof probe,
             "cd '%s' && %s %s --offload-arch=gfx1100 -c v000.hip -o probe.out 2>&1 | "
             "grep -c 'cannot find ROCm device library'",
             dir, hipcc(), HIPCC_FLAGS);
    run(probe, out + 2048, 64);
    int no_lib = atoi(out + 2048) > 0;
    int f1100 = no_lib ? compile_all(dir, "gfx1100", "-S", "-nogpulib", n)
                       : compile_all(dir, "gfx1100", "-c", "", n);
    double t2 = plat_now();
    printf("  %s\n", out);
    printf("  gfx1030: %d of %d variants compiled and linked (%.0f s)\n", n - f1030, n, t1 - t0);
    printf("  gfx1100: %d of %d variants compiled %s (%.0f s)\n", n - f1100, n,
           no_lib ? "to ISA only: this ROCm's device library has no gfx11 bitcode, so calls "
                    "into it stay unresolved"
                  : "and linked",
           t2 - t1);
    CHECKF(f1030 == 0, "%d variants failed for gfx1030", f1030);
    CHECKF(f1100 == 0, "%d variants failed for gfx1100", f1100);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (f1030 == 0 && f1100 == 0)
        run(cmd, out, sizeof out);
    else
        fprintf(stderr, "  sources and logs kept in %s\n", dir);
}

/* The run-time path: hiprtc, reached through the driver table that drv_hip fills, compiles
 * one variant of each template for gfx1030 (no GPU needed to compile). */
TEST(hiprtc_through_the_driver_table)
{
#ifdef UNDER_SANITIZER
    SKIP("run by the plain build");
#endif
    static struct drv d;
    struct brasa_err err = {{0}};
    if (drv_load_hiprtc(&d, &err) != BRASA_OK)
        SKIP("no hiprtc");
    CHECK(drv_is_hip(&d));
    const char *hn[16], *hs[16];
    int nh = 0;
    for (const struct embedded_file *f = embedded_files; f->path && nh < 16; f++) {
        size_t l = strlen(f->path);
        if (l > 4 && strcmp(f->path + l - 4, ".cuh") == 0) {
            hn[nh] = strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
            hs[nh++] = f->data;
        }
    }
    struct gpu_variant v[GV_ALL_MAX];
    int n = gpu_all_variants(v, GV_ALL_MAX), done = 0;
    const char *seen[16];
    int n_seen = 0;
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int k = 0; k < n_seen; k++)
            dup |= !strcmp(seen[k], v[i].tmpl);
        if (dup || n_seen == 16)
            continue;
        seen[n_seen++] = v[i].tmpl;
        char *src = NULL;
        REQUIRE(jit_render(v[i].tmpl, v[i].defs, v[i].n_defs, &src, &err) == BRASA_OK);
        nvrtcProgram p;
        REQUIRE(d.nvrtcCreateProgram(&p, src, v[i].tmpl, nh, hs, hn) == 0);
        const char *opts[8];
        char ab[32];
        int no = drv_rtc_options(&d, 0, 0, opts, ab, sizeof ab);
        opts[no++] = "--gpu-architecture=gfx1030";
        int r = d.nvrtcCompileProgram(p, no, opts);
        size_t ls = 0, cs = 0;
        d.nvrtcGetProgramLogSize(p, &ls);
        char *log = calloc(ls + 1, 1);
        if (log)
            d.nvrtcGetProgramLog(p, log);
        d.nvrtcGetCUBINSize(p, &cs);
        CHECKF(r == 0 && cs > 0, "%s: %s\n%.1500s", v[i].tmpl, d.nvrtcGetErrorString(r),
               log ? log : "");
        done += r == 0 && cs > 0;
        free(log);
        d.nvrtcDestroyProgram(&p);
        free(src);
    }
    printf("  hiprtc (%s): %d of %d templates compiled for gfx1030\n", d.nvrtc_path + 4, done,
           n_seen);
    drv_unload(&d);
}

TEST_MAIN(T(hiprtc_through_the_driver_table), T(hipcc_compiles_every_variant))
