/*
 * An example plugin for `chainrules-check --plugin`: a shared object that exports
 * cr_check_plugin_init, which builds a registry of the user's rules over the built-ins.
 * Here, one scalar row: cube(x) = x^3. See docs/testing-rules.md.
 */
#include <tgmath.h> /* the row body below is type-generic */

#include <chainrules.h>

#if defined(__GNUC__)
#define PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define PLUGIN_EXPORT
#endif

/* cube(x) = x^3: ∂/∂x = 3x^2 */
CR_SCALAR_EVALS(plugin_cube, 1, 1, Y[0] = x[0] * x[0] * x[0], D[0] = 3 * x[0] * x[0])
static const cr_scalar_rule plugin_cube_row = CR_SCALAR_ROW(plugin_cube);
static const cr_function plugin_cube_fn = CR_SCALAR_FUNCTION("plugin_cube", plugin_cube_row, 1);

PLUGIN_EXPORT cr_status cr_check_plugin_init(cr_ctx *ctx, cr_registry **out);

cr_status cr_check_plugin_init(cr_ctx *ctx, cr_registry **out)
{
    cr_status st = cr_registry_new(ctx, NULL, out);
    if (st != CR_OK)
        return st;
    st = cr_scalar_rule_register(*out, &plugin_cube_fn, &plugin_cube_row);
    if (st != CR_OK) {
        cr_registry_free(*out);
        *out = NULL;
    }
    return st;
}
