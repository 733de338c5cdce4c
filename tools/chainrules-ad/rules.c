/*
 * --emit-rules: the transformed functions as rules of the library.
 *
 * A function of up to CR_SCALAR_MAX_IN double parameters returning a double becomes a
 * scalar rule row (scalar_rule.h) whose instantiation evaluates the function and all its
 * partial derivatives with one call of the generated f_rev: from that row the library
 * derives its frule, its rrule and pullback, its operation on the tape (cr_tape_call) and
 * its test registration, as for every built-in scalar rule. The output defines, per
 * function f, `const cr_value f_fn` (the function value to call through the rules or the
 * tape), and one `cr_status regfn(cr_registry *reg)` that registers them all.
 */
#include <string.h>

#include <chainrules/scalar_rule.h>

#include "ad.h"

static int rule_params(const ad_func *f)
{
    if (f->ret->kind != TY_DOUBLE) {
        ad_error(f->loc, "--emit-rules: '%s' must return a double to be a rule", f->name);
        return -1;
    }
    if (f->nparams < 1 || f->nparams > CR_SCALAR_MAX_IN) {
        ad_error(f->loc, "--emit-rules: '%s' must take 1 to %d double parameters to be a rule",
                 f->name, CR_SCALAR_MAX_IN);
        return -1;
    }
    for (int i = 0; i < f->nparams; i++)
        if (f->params[i]->type->kind != TY_DOUBLE || !f->params[i]->shadowed) {
            ad_error(f->params[i]->loc,
                     "--emit-rules: parameter '%s' of '%s' must be an active double (rules "
                     "over arrays are not generated yet: register one by hand, "
                     "docs/writing-rules.md)",
                     f->params[i]->name, f->name);
            return -1;
        }
    return f->nparams;
}

int ad_emit_rules(ad_buf *out, ad_buf *decls, ad_func **fs, int n, const char *regfn)
{
    int bad = 0;
    for (int k = 0; k < n; k++) {
        ad_func *f = fs[k];
        int nin = f ? rule_params(f) : -1;
        if (nin < 0) {
            bad = 1;
            continue;
        }
        ad_buf_printf(out, "/* The rule of %s: a scalar row evaluated by %s_rev. */\n", f->name,
                      f->name);
        ad_buf_printf(out,
                      "static void cr_ad_rule_%s_f64(const double *x, double *Y, double *D)\n{\n",
                      f->name);
        for (int i = 0; i < nin; i++)
            ad_buf_printf(out, "    D[%d] = 0;\n", i);
        ad_buf_printf(out, "    Y[0] = %s_rev(", f->name);
        for (int i = 0; i < nin; i++)
            ad_buf_printf(out, "%sx[%d], &D[%d]", i ? ", " : "", i, i);
        ad_buf_put(out, ", 1.0);\n}\n\n");
        ad_buf_printf(out,
                      "static const cr_scalar_rule cr_ad_rule_%s_row = {\n"
                      "    .name = \"%s\", .nin = %d, .nout = 1, .f64 = cr_ad_rule_%s_f64,\n"
                      "    .f32 = NULL, .c128 = NULL, .primal_src = \"Y[0] = %s(x...)\",\n"
                      "    .partials_src = \"D = the gradient of %s by %s_rev (chainrules-ad)\",\n"
                      "    .pullback_name = \"%s_pullback\"};\n",
                      f->name, f->name, nin, f->name, f->name, f->name, f->name, f->name);
        ad_buf_printf(out,
                      "static const cr_function cr_ad_rule_%s_function =\n"
                      "    CR_SCALAR_FUNCTION(\"%s\", cr_ad_rule_%s_row, %d);\n",
                      f->name, f->name, f->name, nin);
        ad_buf_printf(out,
                      "const cr_value %s_fn = {.kind = CR_KIND_FUNC,\n"
                      "                        .u.func = {&cr_ad_rule_%s_function, NULL}};\n\n",
                      f->name, f->name);
        ad_buf_printf(decls, "extern const cr_value %s_fn;\n", f->name);
    }
    if (bad)
        return 1;
    ad_buf_printf(decls, "cr_status %s(cr_registry *reg);\n", regfn);
    ad_buf_printf(out,
                  "/* Registers the rules of the functions above in reg. */\n"
                  "cr_status %s(cr_registry *reg)\n{\n    cr_status st = CR_OK;\n",
                  regfn);
    for (int k = 0; k < n; k++)
        ad_buf_printf(out,
                      "    if (st == CR_OK)\n        st = cr_scalar_rule_register(reg, "
                      "&cr_ad_rule_%s_function, &cr_ad_rule_%s_row);\n",
                      fs[k]->name, fs[k]->name);
    ad_buf_put(out, "    return st;\n}\n");
    return 0;
}
