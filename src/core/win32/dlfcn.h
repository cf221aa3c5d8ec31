/* Windows builds only (src/core/win32 is on the include path of `make windows`): dlopen and
 * friends on top of core/platform.h, i.e. LoadLibrary/GetProcAddress. */
#ifndef BRASA_WIN32_DLFCN_H
#define BRASA_WIN32_DLFCN_H
#include "core/platform.h"

#define RTLD_LAZY 1
#define RTLD_NOW 2
#define RTLD_LOCAL 0
#define RTLD_GLOBAL 0x100

static inline void *dlopen(const char *name, int flags)
{
    (void)flags;
    return plat_dlopen(name);
}
static inline void *dlsym(void *lib, const char *sym) { return plat_dlsym(lib, sym); }
static inline int dlclose(void *lib)
{
    plat_dlclose(lib);
    return 0;
}
static inline const char *dlerror(void) { return plat_dlerror(); }
#endif
