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

/* Whether f takes arrays: then its rule is a cr_rule_def over arrays (array_rule). */
static bool takes_arrays(const ad_func *f)
{
    for (int i = 0; i < f->nparams; i++)
        if (f->params[i]->type->kind != TY_DOUBLE)
            return true;
    return false;
}

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

/* The shapes of f's arrays (`#pragma chainrules arrays(f) shape(...)`), or NULL. */
static const struct ad_prim_pragma *arrays_of(const ad_unit *u, const ad_func *f)
{
    for (int i = 0; i < u->narrays; i++)
        if (!strcmp(u->arrays[i].name, f->name))
            return &u->arrays[i];
    return NULL;
}

/* The rule of a function of arrays, doubles and integers returning a double: a
 * cr_rule_def whose rrule's pullback runs f_rev and whose frule runs f_fwd. Its arguments
 * are f's parameters in order: an f64 array for each `const double *` (of the extents the
 * pragma gives, checked), f64 for each double, an integer for each integer parameter. */
static int array_rule(ad_buf *out, ad_buf *decls, const ad_unit *u, ad_func *f)
{
    const struct ad_prim_pragma *pp = arrays_of(u, f);
    const char *ext[64][2] = {{0}};
    int ndim[64] = {0};
    if (f->ret->kind != TY_DOUBLE || f->nparams > 8) {
        ad_error(f->loc, "--emit-rules: '%s' must return a double and take at most 8 parameters",
                 f->name);
        return 1;
    }
    for (int s = 0; pp && s < pp->nshapes; s++)
        for (int i = 0; i < f->nparams; i++)
            if (!strcmp(f->params[i]->name, pp->shapes[s].name)) {
                ndim[i] = pp->shapes[s].ndim;
                ext[i][0] = pp->shapes[s].ext[0];
                ext[i][1] = pp->shapes[s].ext[1];
            }
    for (int i = 0; i < f->nparams; i++) {
        const ad_var *p = f->params[i];
        bool arr = p->type->kind == TY_PTR && p->type->elem->kind == TY_DOUBLE && p->type->is_const;
        if (arr && !ndim[i]) {
            ad_error(p->loc,
                     "--emit-rules: give the extents of '%s' with '#pragma chainrules arrays(%s) "
                     "shape(%s[n])'",
                     p->name, f->name, p->name);
            return 1;
        }
        if (!arr && p->type->kind != TY_DOUBLE && p->type->kind != TY_INT) {
            ad_error(p->loc,
                     "--emit-rules: parameter '%s' of '%s' is a %s; a rule's parameters are "
                     "double, const double * and integers",
                     p->name, f->name, p->type->spelling);
            return 1;
        }
        if ((arr || p->type->kind == TY_DOUBLE) && !p->shadowed) {
            ad_error(p->loc, "--emit-rules: parameter '%s' of '%s' must be active", p->name,
                     f->name);
            return 1;
        }
    }
    const char *F = f->name;
    int np = f->nparams;
    /* the arguments, unpacked and checked */
    ad_buf_printf(out, "/* The rule of %s: frule by %s_fwd, rrule and pullback by %s_rev. */\n", F,
                  F, F);
    ad_buf_printf(out, "typedef struct cr_ad_rule_%s_args {\n", F);
    for (int i = 0; i < np; i++) {
        const ad_var *p = f->params[i];
        if (ndim[i])
            ad_buf_printf(out,
                          "    const double *%s;\n    size_t %s_n_;\n    const cr_array *%s_a_;\n",
                          p->cname, p->cname, p->cname);
        else
            ad_buf_printf(out, "    %s %s;\n", p->type->unq, p->cname);
    }
    ad_buf_printf(out, "} cr_ad_rule_%s_args;\n\n", F);
    ad_buf_printf(out,
                  "static cr_status cr_ad_rule_%s_unpack(cr_arena *arena, const cr_value *a_, "
                  "size_t na_,\n    cr_ad_rule_%s_args *o_)\n{\n    cr_status st_ = CR_OK;\n"
                  "    if (na_ != %d)\n        return CR_EINVAL;\n",
                  F, F, np);
    for (int i = 0; i < np; i++) {
        const ad_var *p = f->params[i];
        if (p->type->kind == TY_INT)
            ad_buf_printf(
                out,
                "    if (a_[%d].kind != CR_KIND_I64 || (int64_t)(%s)a_[%d].u.i64 != "
                "a_[%d].u.i64)\n        return CR_EINVAL;\n    o_->%s = (%s)a_[%d].u.i64;\n",
                i, p->type->unq, i, i, p->cname, p->type->unq, i);
        else if (!ndim[i])
            ad_buf_printf(out,
                          "    if (a_[%d].kind != CR_KIND_F64)\n        return CR_EINVAL;\n"
                          "    o_->%s = a_[%d].u.f64;\n",
                          i, p->cname, i);
    }
    /* the integers are known: the extents of the arrays */
    ad_buf put_names = {0};
    for (int i = 0; i < np; i++)
        if (f->params[i]->type->kind == TY_INT)
            ad_buf_printf(&put_names, "    const %s %s = o_->%s;\n    (void)%s;\n",
                          f->params[i]->type->unq, f->params[i]->cname, f->params[i]->cname,
                          f->params[i]->cname);
    ad_buf_put(out, put_names.p ? put_names.p : "");
    for (int i = 0; i < np; i++)
        if (ndim[i]) {
            const char *cnt = ndim[i] == 2
                                  ? ad_fmt("(size_t)(%s) * (size_t)(%s)", ext[i][0], ext[i][1])
                                  : ad_fmt("(size_t)(%s)", ext[i][0]);
            ad_buf_printf(out,
                          "    o_->%s_n_ = %s;\n    o_->%s_a_ = a_[%d].u.arr;\n    if (st_ == "
                          "CR_OK)\n        st_ = "
                          "cr_adcall_dense(arena, &a_[%d], o_->%s_n_, &o_->%s);\n",
                          f->params[i]->cname, cnt, f->params[i]->cname, i, i, f->params[i]->cname,
                          f->params[i]->cname);
        }
    ad_buf_put(out, "    return st_;\n}\n\n");
    ad_buf_free(&put_names);
    /* the call of a generated function with the unpacked arguments; `sh` the shadows */
#define ARGS(b, sh, scalar_sh)                          \
    for (int i = 0; i < np; i++) {                      \
        const char *c = f->params[i]->cname;            \
        ad_buf_printf(b, "%se_->%s", i ? ", " : "", c); \
        if (ndim[i])                                    \
            ad_buf_printf(b, ", " sh, c);               \
        else if (f->params[i]->type->kind == TY_DOUBLE) \
            ad_buf_printf(b, ", " scalar_sh, c);        \
    }
    /* primal */
    ad_buf_printf(out,
                  "static cr_status cr_ad_rule_%s_primal(cr_arena *arena, const cr_value *f_, "
                  "const cr_value *a_,\n    size_t na_, cr_value *y_)\n{\n    (void)f_;\n"
                  "    cr_ad_rule_%s_args e_[1];\n    cr_status st_ = cr_ad_rule_%s_unpack(arena, "
                  "a_, na_, e_);\n    if (st_ != CR_OK)\n        return st_;\n    *y_ = "
                  "cr_value_f64(%s(",
                  F, F, F, F);
    for (int i = 0; i < np; i++)
        ad_buf_printf(out, "%se_->%s", i ? ", " : "", f->params[i]->cname);
    ad_buf_put(out, "));\n    return CR_OK;\n}\n\n");
    /* pullback */
    ad_buf_printf(out,
                  "static cr_status cr_ad_rule_%s_pullback(const cr_tangent *dy_, cr_tangent *dx_, "
                  "size_t nx_,\n    cr_arena *arena, void *env_)\n{\n"
                  "    const cr_ad_rule_%s_args *e_ = env_;\n    cr_status st_ = CR_OK;\n"
                  "    double s_ = 0;\n    (void)nx_;\n"
                  "    if (cr_adcall_seed(dy_, &s_) != CR_OK)\n        return CR_ETANGENT;\n",
                  F, F);
    for (int i = 0; i < np; i++) {
        const char *c = f->params[i]->cname;
        if (ndim[i])
            ad_buf_printf(out,
                          "    cr_array *%s_g_ = NULL;\n    if (st_ == CR_OK)\n        st_ = "
                          "cr_array_new(arena, CR_DT_F64, e_->%s_a_->ndim, e_->%s_a_->shape, "
                          "&%s_g_);\n",
                          c, c, c, c);
        else if (f->params[i]->type->kind == TY_DOUBLE)
            ad_buf_printf(out, "    double %s_g_ = 0;\n", c);
    }
    ad_buf_put(out, "    if (st_ != CR_OK)\n        return st_;\n    (void)");
    ad_buf_printf(out, "%s_rev(", F);
    ARGS(out, "(double *)%s_g_->data", "&%s_g_")
    ad_buf_put(out, ", s_);\n    dx_[0] = cr_tangent_none();\n");
    for (int i = 0; i < np; i++) {
        const char *c = f->params[i]->cname;
        if (ndim[i])
            ad_buf_printf(out, "    dx_[%d] = cr_tangent_array(%s_g_);\n", i + 1, c);
        else if (f->params[i]->type->kind == TY_DOUBLE)
            ad_buf_printf(out, "    dx_[%d] = cr_tangent_f64(%s_g_);\n", i + 1, c);
        else
            ad_buf_printf(out, "    dx_[%d] = cr_tangent_none();\n", i + 1);
    }
    ad_buf_put(out, "    return CR_OK;\n}\n\n");
    /* rrule */
    ad_buf_printf(out,
                  "static cr_status cr_ad_rule_%s_rrule(const cr_config *cfg_, cr_arena *arena, "
                  "const cr_value *f_,\n    const cr_value *a_, size_t na_, cr_value *y_, "
                  "cr_pullback *pb_, const void *u_)\n{\n    (void)cfg_;\n    (void)u_;\n"
                  "    cr_ad_rule_%s_args *e_ = cr_arena_alloc(arena, sizeof *e_, 0);\n"
                  "    if (!e_)\n        return CR_ENOMEM;\n"
                  "    cr_status st_ = cr_ad_rule_%s_unpack(arena, a_, na_, e_);\n"
                  "    if (st_ != CR_OK)\n        return st_;\n    (void)f_;\n"
                  "    *y_ = cr_value_f64(%s(",
                  F, F, F, F);
    for (int i = 0; i < np; i++)
        ad_buf_printf(out, "%se_->%s", i ? ", " : "", f->params[i]->cname);
    ad_buf_printf(out,
                  "));\n    *pb_ = (cr_pullback){cr_ad_rule_%s_pullback, e_, \"%s_pullback\", "
                  "na_ + 1};\n    return CR_OK;\n}\n\n",
                  F, F);
    /* frule */
    ad_buf_printf(out,
                  "static cr_status cr_ad_rule_%s_frule(const cr_config *cfg_, cr_arena *arena, "
                  "const cr_tangent *da_,\n    const cr_value *f_, const cr_value *a_, size_t na_, "
                  "cr_value *y_, cr_tangent *dy_,\n    const void *u_)\n{\n    (void)cfg_;\n"
                  "    (void)u_;\n    (void)f_;\n    cr_ad_rule_%s_args e_[1];\n"
                  "    cr_status st_ = cr_ad_rule_%s_unpack(arena, a_, na_, e_);\n",
                  F, F, F);
    for (int i = 0; i < np; i++) {
        const char *c = f->params[i]->cname;
        if (ndim[i])
            ad_buf_printf(out,
                          "    const double *%s_t_ = NULL;\n    if (st_ == CR_OK)\n        st_ = "
                          "cr_adcall_dense_tangent(arena, &da_[%d], e_->%s_n_, &%s_t_);\n",
                          c, i + 1, c, c);
        else if (f->params[i]->type->kind == TY_DOUBLE)
            ad_buf_printf(out,
                          "    double %s_t_ = 0;\n    if (st_ == CR_OK)\n        st_ = "
                          "cr_adcall_seed(&da_[%d], &%s_t_);\n",
                          c, i + 1, c);
    }
    ad_buf_put(out, "    if (st_ != CR_OK)\n        return st_;\n    double d_ = 0;\n");
    ad_buf_printf(out, "    *y_ = cr_value_f64(%s_fwd(", F);
    ARGS(out, "%s_t_", "%s_t_")
    ad_buf_put(out, ", &d_));\n    *dy_ = cr_tangent_f64(d_);\n    return CR_OK;\n}\n\n");
#undef ARGS
    /* the function, the matchers, the definition */
    ad_buf_printf(out,
                  "static const cr_function cr_ad_rule_%s_function = {\"%s\", %d, "
                  "cr_ad_rule_%s_primal, NULL, NULL, 0};\n",
                  F, F, np, F);
    ad_buf_printf(out, "static const cr_argspec cr_ad_rule_%s_argspecs[%d] = {", F, np);
    for (int i = 0; i < np; i++)
        ad_buf_printf(out, "%s%s", i ? ", " : "",
                      ndim[i]                                 ? "CR_ARG_ARRAY_F64"
                      : f->params[i]->type->kind == TY_DOUBLE ? "CR_ARG_F64"
                                                              : "CR_ARG_INT");
    ad_buf_put(out, "};\n");
    ad_buf_printf(out,
                  "static const cr_rule_def cr_ad_rule_%s_def = {.struct_size = "
                  "sizeof(cr_rule_def),\n    .fn = &cr_ad_rule_%s_function, .nargs = %d, .args = "
                  "cr_ad_rule_%s_argspecs,\n    .frule = cr_ad_rule_%s_frule, .rrule = "
                  "cr_ad_rule_%s_rrule};\n",
                  F, F, np, F, F, F);
    ad_buf_printf(out,
                  "const cr_value %s_fn = {.kind = CR_KIND_FUNC,\n"
                  "                        .u.func = {&cr_ad_rule_%s_function, NULL}};\n\n",
                  F, F);
    ad_buf_printf(decls, "extern const cr_value %s_fn;\n", F);
    return 0;
}

int ad_emit_rules(ad_buf *out, ad_buf *decls, const ad_unit *u, ad_func **fs, int n,
                  const char *regfn)
{
    int bad = 0;
    for (int k = 0; k < n; k++) {
        ad_func *f = fs[k];
        if (f && takes_arrays(f)) {
            bad |= array_rule(out, decls, u, f);
            continue;
        }
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
                      takes_arrays(fs[k])
                          ? "    if (st == CR_OK)\n        st = cr_registry_add(reg, "
                            "&cr_ad_rule_%s_def);\n%.0s"
                          : "    if (st == CR_OK)\n        st = cr_scalar_rule_register(reg, "
                            "&cr_ad_rule_%s_function, &cr_ad_rule_%s_row);\n",
                      fs[k]->name, fs[k]->name);
    ad_buf_put(out, "    return st;\n}\n");
    return 0;
}
