/*
 * chainrules-check: check every built-in rule (or, with --plugin, the rules of a user's
 * registry loaded from a shared object) against finite differences; see
 * docs/testing-rules.md and cr_check_main() in chainrules/testing.h.
 */
#if !defined(_POSIX_C_SOURCE) && (defined(__unix__) || defined(__APPLE__))
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdio.h>
#include <string.h>

#include <chainrules.h>

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#define HAVE_DLOPEN 1
#endif

/* What a plugin exports: build a registry (usually over the built-ins) in ctx. */
typedef cr_status (*plugin_init_fn)(cr_ctx *ctx, cr_registry **out);

int main(int argc, char **argv)
{
    const char *plugin = NULL;
    char *rest[256];
    int nrest = 0;
    for (int i = 0; i < argc && nrest < 255; i++) {
        if (i > 0 && strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) {
            plugin = argv[++i];
            continue;
        }
        rest[nrest++] = argv[i];
    }
    rest[nrest] = NULL;
    if (plugin == NULL)
        return cr_check_main(nrest, rest, NULL);

#ifdef HAVE_DLOPEN
    void *lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "%s: cannot load %s: %s\n", argv[0], plugin, dlerror());
        return 2;
    }
    plugin_init_fn init;
    void *sym = dlsym(lib, "cr_check_plugin_init");
    memcpy(&init, &sym, sizeof init); /* object pointer to function pointer, as POSIX allows */
    if (sym == NULL) {
        fprintf(stderr, "%s: %s does not export cr_check_plugin_init\n", argv[0], plugin);
        dlclose(lib);
        return 2;
    }
    cr_ctx *ctx;
    cr_registry *reg = NULL;
    if (cr_ctx_new(NULL, &ctx) != CR_OK) {
        dlclose(lib);
        return 1;
    }
    cr_status st = init(ctx, &reg);
    if (st != CR_OK || reg == NULL) {
        fprintf(stderr, "%s: cr_check_plugin_init of %s failed: %s: %s\n", argv[0], plugin,
                cr_status_name(st), cr_ctx_errmsg(ctx));
        cr_ctx_free(ctx);
        dlclose(lib);
        return 1;
    }
    int rc = cr_check_main(nrest, rest, reg);
    cr_registry_free(reg);
    cr_ctx_free(ctx);
    dlclose(lib);
    return rc;
#else
    fprintf(stderr, "%s: --plugin needs dlopen, which this platform lacks\n", argv[0]);
    return 2;
#endif
}
