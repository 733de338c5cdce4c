/*
 * Primitives: functions of the input differentiated by a rule of the library's rule API,
 * not transformed.
 *
 *   #pragma chainrules primitive(g) rule(cr_fn_logsumexp) shape(x[n])
 *
 * declares that calls of g (declared in the file, with or without a body) take their
 * derivatives from the rule: a library function value `cr_fn_NAME` (dispatched on the
 * built-in registry) or a user's `const cr_rule_def` (called directly). The rule's
 * arguments are g's floating-point parameters in order (doubles, and pointers to double
 * with the extents `shape` gives; integer parameters only size the arrays); its output is
 * g's return value or its one non-const pointer parameter. Calls of g are then treated as
 * calls of a transformed function: the generated wrappers below have the signatures of
 * the split pair and of the tangent functions (reverse.c, forward.c), and their bodies call
 * cr_adcall_reverse() / cr_adcall_forward() (<chainrules/adcall.h>).
 */
#include <string.h>

#include <chainrules/rule.h>

#include "ad.h"

static const char *skip_ws(const char *q)
{
    while (*q == ' ' || *q == '\t')
        q++;
    return q;
}

static const char *ident(const char **q)
{
    const char *b = *q, *p = b;
    while (*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
           (p > b && *p >= '0' && *p <= '9'))
        p++;
    *q = p;
    return p == b ? NULL : ad_fmt("%.*s", (int)(p - b), b);
}

/* `key(ident)`; NULL if q does not start with it. */
static const char *keyed(const char **q, const char *key)
{
    const char *p = skip_ws(*q);
    size_t n = strlen(key);
    if (strncmp(p, key, n) != 0)
        return NULL;
    p = skip_ws(p + n);
    if (*p != '(')
        return NULL;
    p = skip_ws(p + 1);
    const char *id = ident(&p);
    p = skip_ws(p);
    if (!id || *p != ')')
        return NULL;
    *q = p + 1;
    return id;
}

/* One bracketed extent `[expr]` (brackets and parentheses balanced inside). */
static const char *extent(const char **q)
{
    const char *p = skip_ws(*q);
    if (*p != '[')
        return NULL;
    const char *b = ++p;
    int depth = 0;
    while (*p && *p != '\n' && !(depth == 0 && *p == ']')) {
        depth += (*p == '[' || *p == '(') - (*p == ']' || *p == ')');
        p++;
    }
    if (*p != ']' || p == b)
        return NULL;
    *q = p + 1;
    return ad_fmt("%.*s", (int)(p - b), b);
}

static int shape_pragma(ad_unit *u, const char *q, unsigned line, bool prim)
{
    struct ad_prim_pragma pp = {.line = line};
    if (prim && (!(pp.name = keyed(&q, "primitive")) || !(pp.rule = keyed(&q, "rule"))))
        return 1;
    if (!prim && !(pp.name = keyed(&q, "arrays")))
        return 1;
    q = skip_ws(q);
    if (strncmp(q, "shape", 5) == 0) {
        q = skip_ws(q + 5);
        if (*q != '(')
            return 1;
        q++;
        for (;;) {
            q = skip_ws(q);
            if (pp.nshapes == AD_PRIM_MAX_PARAMS)
                return 1;
            struct ad_prim_shape *sh = &pp.shapes[pp.nshapes++];
            if (!(sh->name = ident(&q)))
                return 1;
            while (sh->ndim < 2 && skip_ws(q)[0] == '[')
                if (!(sh->ext[sh->ndim++] = extent(&q)))
                    return 1;
            q = skip_ws(q);
            if (sh->ndim == 0 || (*q != ',' && *q != ')'))
                return 1;
            if (*q++ == ')')
                break;
        }
    }
    q = skip_ws(q);
    if (*q != '\n' && *q != '\r' && *q != 0)
        return 1;
    if (prim) {
        u->prims = ad_grow(u->prims, u->nprims, &u->capprims, sizeof *u->prims);
        u->prims[u->nprims++] = pp;
    } else {
        u->arrays = ad_grow(u->arrays, u->narrays, &u->caparrays, sizeof *u->arrays);
        u->arrays[u->narrays++] = pp;
    }
    return 0;
}

int ad_prim_pragma(ad_unit *u, const char *q, unsigned line)
{
    return shape_pragma(u, q, line, true);
}

int ad_arrays_pragma(ad_unit *u, const char *q, unsigned line)
{
    return shape_pragma(u, q, line, false);
}

/* The rule's arguments and output from g's parameters; nonzero on error (reported). */
static int bind(const ad_unit *u, const struct ad_prim_pragma *pp, ad_func *g)
{
    ad_loc l = {u->file, pp->line, 1};
    ad_prim *p = ad_alloc(sizeof *p);
    p->rule = pp->rule;
    p->is_def = strncmp(pp->rule, "cr_fn_", 6) != 0;
    p->outp = -1;
    if (!p->is_def && !cr_registry_find(cr_registry_builtin(), pp->rule + 6)) {
        ad_error(l,
                 "primitive '%s': the library has no function '%s' (rule(cr_fn_NAME) names a "
                 "library function; a user's rule is named by its cr_rule_def)",
                 g->name, pp->rule);
        return 1;
    }
    if (g->nparams > AD_PRIM_MAX_PARAMS) {
        ad_error(l, "primitive '%s' has more than %d parameters", g->name, AD_PRIM_MAX_PARAMS);
        return 1;
    }
    for (int s = 0; s < pp->nshapes; s++) {
        int i = 0;
        while (i < g->nparams && strcmp(g->params[i]->name, pp->shapes[s].name) != 0)
            i++;
        if (i == g->nparams || g->params[i]->type->kind != TY_PTR) {
            ad_error(l, "primitive '%s': shape(%s...) names no pointer parameter of '%s'", g->name,
                     pp->shapes[s].name, g->name);
            return 1;
        }
        p->ndim[i] = pp->shapes[s].ndim;
        p->ext[i][0] = pp->shapes[s].ext[0];
        p->ext[i][1] = pp->shapes[s].ext[1];
    }
    for (int i = 0; i < g->nparams; i++) {
        ad_var *v = g->params[i];
        ad_type *t = v->type;
        if (t->kind == TY_INT)
            continue;
        bool ptr = t->kind == TY_PTR && t->elem->kind == TY_DOUBLE;
        if (!(t->kind == TY_DOUBLE || ptr)) {
            ad_error(l,
                     "primitive '%s': parameter '%s' is a %s; a primitive's parameters are "
                     "double, pointers to double and integers",
                     g->name, v->name, t->spelling);
            return 1;
        }
        if (ptr && !p->ndim[i]) {
            ad_error(
                l, "primitive '%s': give the extents of '%s' with shape(%s[n]) or shape(%s[m][n])",
                g->name, v->name, v->name, v->name);
            return 1;
        }
        if (ptr && !t->is_const) {
            if (p->outp >= 0 || g->ret->kind != TY_VOID) {
                ad_error(l,
                         "primitive '%s': a primitive has one output, its double return value "
                         "or its one non-const pointer parameter ('%s' is a second)",
                         g->name, v->name);
                return 1;
            }
            p->outp = i;
            continue;
        }
        if (p->nargs == CR_SIG_MAX_ARGS) {
            ad_error(l, "primitive '%s': a rule takes at most %d arguments", g->name,
                     CR_SIG_MAX_ARGS);
            return 1;
        }
        p->argp[p->nargs++] = i;
    }
    if (p->outp < 0 && g->ret->kind != TY_DOUBLE) {
        ad_error(l,
                 "primitive '%s' must return a double or write one non-const double pointer "
                 "parameter",
                 g->name);
        return 1;
    }
    g->prim = p;
    return 0;
}

int ad_prim_attach(ad_unit *u)
{
    int bad = 0;
    for (int k = 0; k < u->nprims; k++) {
        ad_func *g = ad_unit_find(u, u->prims[k].name);
        if (!g) {
            ad_loc l = {u->file, u->prims[k].line, 1};
            ad_error(
                l, "'#pragma chainrules primitive(%s)': no function '%s' is declared in this file",
                u->prims[k].name, u->prims[k].name);
            bad = 1;
        } else if (g->prim) {
            ad_loc l = {u->file, u->prims[k].line, 1};
            ad_error(l, "primitive '%s' is declared twice", g->name);
            bad = 1;
        } else {
            bad |= bind(u, &u->prims[k], g);
        }
    }
    for (int i = 0; i < u->nfuncs; i++) {
        ad_func *g = u->funcs[i];
        if (!g->prim)
            continue;
        for (int j = 0; j < g->nparams && j < 64; j++)
            g->writes_param[j] = j == g->prim->outp;
    }
    return bad;
}

/* ---- The wrappers --------------------------------------------------------------------------- */

/* The rule object's address and the definition's, as the two first arguments. */
static const char *rule_args(const ad_prim *p)
{
    return p->is_def ? ad_fmt("NULL, &%s", p->rule) : ad_fmt("&%s, NULL", p->rule);
}

/* The descriptor of parameter i: {x, dx, ndim, {extents}, dinc}. */
static const char *desc(const ad_func *g, int i, const char *x, const char *dx, const char *inc)
{
    const ad_prim *p = g->prim;
    const char *e0 = p->ndim[i] ? ad_fmt("(size_t)(%s)", p->ext[i][0]) : "0";
    const char *e1 = p->ndim[i] == 2 ? ad_fmt("(size_t)(%s)", p->ext[i][1]) : "0";
    return ad_fmt("{(double *)%s, %s, %d, {%s, %s}, %s}", x, dx ? dx : "NULL", p->ndim[i], e0, e1,
                  inc ? inc : "0");
}

static const char *count(const ad_func *g, int i)
{
    const ad_prim *p = g->prim;
    return p->ndim[i] == 2 ? ad_fmt("(size_t)(%s) * (size_t)(%s)", p->ext[i][0], p->ext[i][1])
                           : ad_fmt("(size_t)(%s)", p->ext[i][0]);
}

static void params(ad_buf *out, const ad_func *g)
{
    for (int i = 0; i < g->nparams; i++) {
        if (i)
            ad_buf_put(out, ", ");
        ad_emit_decl(out, g->params[i]->type, g->params[i]->cname);
    }
}

static void call_primal(ad_buf *out, const ad_func *g)
{
    ad_buf_printf(out, "%s(", g->name);
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(out, "%s%s", i ? ", " : "", g->params[i]->cname);
    ad_buf_put(out, ")");
}

static bool masked(uint64_t mask, int i)
{
    return i < 64 && (mask >> i & 1);
}

static void split(ad_buf *out, const ad_func *g, uint64_t mask, const char *mn)
{
    const ad_prim *p = g->prim;
    const char *o = p->outp >= 0 ? g->params[p->outp]->cname : NULL;
    /* forward sweep: the old contents of the output array, then the primal */
    ad_buf_printf(out, "static %s cr_ad_%s_fw%s(", g->ret->spelling, g->name, mn);
    params(out, g);
    ad_buf_printf(out, "%scr_adstack *stp_)\n{\n", g->nparams ? ", " : "");
    if (o)
        ad_buf_printf(out,
                      "    for (size_t i_ = 0; i_ < %s; i_++)\n"
                      "        cr_adstack_push_f64(stp_, %s[i_]);\n",
                      count(g, p->outp), o);
    else
        ad_buf_put(out, "    (void)stp_;\n");
    ad_buf_printf(out, "    %s", g->ret->kind != TY_VOID ? "return " : "");
    call_primal(out, g);
    ad_buf_put(out, ";\n}\n\n");
    /* adjoint: the rule's pullback, then the output's old contents back */
    ad_buf_printf(out, "static void cr_ad_%s_bw%s(", g->name, mn);
    for (int i = 0; i < g->nparams; i++) {
        ad_var *v = g->params[i];
        ad_emit_decl(out, v->type, v->cname);
        ad_buf_put(out, ", ");
        if (masked(mask, i) && ad_type_has_real(v->type))
            ad_buf_printf(out, "double *%s_b, ", v->cname);
    }
    ad_buf_put(out, "cr_adstack *stp_");
    if (g->ret->kind == TY_DOUBLE)
        ad_buf_printf(out, ", double %s_b", g->name);
    ad_buf_put(out, ")\n{\n");
    bool has_out = o ? masked(mask, p->outp) : true;
    if (has_out) {
        if (!o)
            ad_buf_printf(out, "    double r_b_ = %s_b;\n", g->name);
        ad_buf_printf(out, "    const cr_adcall_arg a_[%d] = {", p->nargs ? p->nargs : 1);
        for (int k = 0; k < p->nargs; k++) {
            int i = p->argp[k];
            const char *v = g->params[i]->cname;
            ad_buf_printf(out, "%s\n        %s", k ? "," : "",
                          desc(g, i, p->ndim[i] ? v : ad_fmt("&%s", v),
                               masked(mask, i) ? ad_fmt("%s_b", v) : NULL, NULL));
        }
        ad_buf_printf(out, "%s};\n", p->nargs ? "" : "{0}");
        if (o)
            ad_buf_printf(out, "    const cr_adcall_arg o_ = %s;\n",
                          desc(g, p->outp, o, ad_fmt("%s_b", o), NULL));
        else
            ad_buf_put(out, "    const cr_adcall_arg o_ = {NULL, &r_b_, 0, {0, 0}, 0};\n");
        ad_buf_printf(out,
                      "    if (cr_adcall_reverse(%s, a_, %d, &o_) != CR_OK)\n"
                      "        cr_adstack_set_failed(stp_);\n",
                      rule_args(p), p->nargs);
    } else {
        ad_buf_put(out, "    (void)stp_;\n");
    }
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(out, "    (void)%s;\n", g->params[i]->cname);
    if (o)
        ad_buf_printf(out,
                      "    for (size_t i_ = %s; i_-- > 0;)\n"
                      "        %s[i_] = cr_adstack_pop_f64(stp_);\n",
                      count(g, p->outp), o);
    ad_buf_put(out, "}\n\n");
}

static void tangent(ad_buf *out, const ad_func *g, uint64_t mask, const char *mn, bool vector)
{
    const ad_prim *p = g->prim;
    const char *o = p->outp >= 0 ? g->params[p->outp]->cname : NULL;
    ad_buf_printf(out, "static %s cr_ad_%s_%s%s(", g->ret->spelling, g->name,
                  vector ? "tanv" : "tan", mn);
    for (int i = 0; i < g->nparams; i++) {
        ad_var *v = g->params[i];
        if (i)
            ad_buf_put(out, ", ");
        ad_emit_decl(out, v->type, v->cname);
        if (!masked(mask, i) || !ad_type_has_real(v->type))
            continue;
        if (v->type->kind == TY_DOUBLE)
            ad_buf_printf(out, vector ? ", const double *%s_d" : ", double %s_d", v->cname);
        else
            ad_buf_printf(out, ", %sdouble *%s_d%s", v->type->is_const ? "const " : "", v->cname,
                          vector ? ad_fmt(", size_t %s_ds_", v->cname) : "");
    }
    bool first = g->nparams == 0;
    if (g->ret->kind == TY_DOUBLE) {
        ad_buf_printf(out, "%sdouble *%s_d", first ? "" : ", ", g->name);
        first = false;
    }
    if (vector)
        ad_buf_printf(out, "%sint w_", first ? "" : ", ");
    else if (first)
        ad_buf_put(out, "void");
    ad_buf_put(out, ")\n{\n");
    const char *ind = "    ";
    if (!o)
        ad_buf_put(out, "    double r_ = 0;\n");
    if (vector) {
        ad_buf_put(out, "    for (int k_ = 0; k_ < w_; k_++) {\n");
        ind = "        ";
    }
    for (int k = 0; k < p->nargs; k++) {
        int i = p->argp[k];
        if (!p->ndim[i] && masked(mask, i))
            ad_buf_printf(out, "%sdouble %s_t_ = %s_d%s;\n", ind, g->params[i]->cname,
                          g->params[i]->cname, vector ? "[k_]" : "");
    }
    ad_buf_printf(out, "%sconst cr_adcall_arg a_[%d] = {", ind, p->nargs ? p->nargs : 1);
    for (int k = 0; k < p->nargs; k++) {
        int i = p->argp[k];
        const char *v = g->params[i]->cname;
        const char *dx = NULL, *inc = NULL;
        if (masked(mask, i) && !p->ndim[i]) {
            dx = ad_fmt("&%s_t_", v);
        } else if (masked(mask, i)) {
            dx = ad_fmt("(double *)%s_d%s", v, vector ? " + k_" : "");
            inc = vector ? ad_fmt("(ptrdiff_t)%s_ds_", v) : NULL;
        }
        ad_buf_printf(out, "%s\n%s    %s", k ? "," : "", ind,
                      desc(g, i, p->ndim[i] ? v : ad_fmt("&%s", v), dx, inc));
    }
    ad_buf_printf(out, "%s};\n", p->nargs ? "" : "{0}");
    if (o) {
        bool od = masked(mask, p->outp);
        ad_buf_printf(out, "%sconst cr_adcall_arg o_ = %s;\n", ind,
                      desc(g, p->outp, o, od ? ad_fmt("%s_d%s", o, vector ? " + k_" : "") : NULL,
                           od && vector ? ad_fmt("(ptrdiff_t)%s_ds_", o) : NULL));
    } else {
        ad_buf_printf(out, "%sconst cr_adcall_arg o_ = {&r_, %s_d%s, 0, {0, 0}, 0};\n", ind,
                      g->name, vector ? " + k_" : "");
    }
    ad_buf_printf(out, "%s(void)cr_adcall_forward(%s, a_, %d, &o_);\n", ind, rule_args(p),
                  p->nargs);
    if (vector)
        ad_buf_put(out, "    }\n");
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(out, "    (void)%s;\n", g->params[i]->cname);
    if (!o)
        ad_buf_put(out, "    return r_;\n");
    ad_buf_put(out, "}\n\n");
}

void ad_emit_prim(ad_buf *out, ad_buf *decls, const ad_func *g, uint64_t mask, int kind,
                  const char *mn)
{
    static const char *declared[64];
    static int ndeclared;
    const ad_prim *p = g->prim;
    if (p->mpi) {
        if (kind == 2) {
            ad_error(g->loc,
                     "%s in the vector forward mode is not supported: use f_fwd for each "
                     "direction, or the reverse mode",
                     g->name);
            return;
        }
        ad_mpi_emit(out, decls, g, mask, kind, mn);
        return;
    }
    bool seen = false;
    for (int i = 0; i < ndeclared; i++)
        seen |= strcmp(declared[i], p->rule) == 0;
    if (p->is_def && !seen && ndeclared < 64) {
        declared[ndeclared++] = p->rule;
        ad_buf_printf(decls, "extern const cr_rule_def %s;\n", p->rule);
    }
    if (kind == 0)
        split(out, g, mask, mn);
    else
        tangent(out, g, mask, mn, kind == 2);
}
