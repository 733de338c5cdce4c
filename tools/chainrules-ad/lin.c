/*
 * Linearisation of one expression, shared by the tangent and adjoint generators: the values
 * of its active subexpressions and their partials from the rule rows (pass 1), then the
 * adjoint propagated down to the variables it reads (pass 2) or the tangent pushed up
 * (forward).
 */
#include <string.h>

#include "ad.h"
#include "lin.h"

static const char *real_of(const ad_expr *e)
{
    return ad_type_real_name(e->type);
}

/* The operands of a row node. */
static int operands(ad_expr *e, ad_expr **ops)
{
    if (e->kind == EX_CALL) {
        for (int i = 0; i < e->nargs && i < 4; i++)
            ops[i] = e->args[i];
        return e->nargs;
    }
    ops[0] = e->a;
    ops[1] = e->b;
    return e->kind == EX_UN ? 1 : 2;
}

const char *lin_value(lin *l, ad_expr *e)
{
    if (!e->active || ad_is_place(e))
        return ad_expr_text(e);
    if (e->kind == EX_CAST)
        return ad_fmt("((%s)%s)", e->type->spelling, lin_value(l, e->a));
    int n = ++l->tmp;
    e->tmp = n;
    const char *T = real_of(e);
    if (e->kind == EX_COND) {
        ad_buf_printf(l->out, "%sint c%d_ = (%s) != 0;\n%s%s t%d_;\n", l->ind, n,
                      ad_expr_text(e->a), l->ind, T, n);
        ad_buf_printf(l->out, "%sif (c%d_) {\n", l->ind, n);
        const char *ind = l->ind;
        l->ind = ad_fmt("%s    ", ind);
        const char *vb = lin_value(l, e->b);
        ad_buf_printf(l->out, "%st%d_ = %s;\n", l->ind, n, vb);
        l->ind = ind;
        ad_buf_printf(l->out, "%s} else {\n", l->ind);
        l->ind = ad_fmt("%s    ", ind);
        const char *vc = lin_value(l, e->c);
        ad_buf_printf(l->out, "%st%d_ = %s;\n", l->ind, n, vc);
        l->ind = ind;
        ad_buf_printf(l->out, "%s}\n%s(void)t%d_;\n", l->ind, l->ind, n);
        return ad_fmt("t%d_", n);
    }
    if (!e->row) {
        /* an active node without a row cannot be differentiated: refused by the analysis */
        return ad_expr_text(e);
    }
    ad_expr *ops[4];
    int k = operands(e, ops);
    const char *vals[4];
    for (int j = 0; j < k; j++)
        vals[j] = lin_value(l, ops[j]);
    bool fl = e->type->kind == TY_FLOAT;
    const char *helper = ad_row_helper(e->row, fl);
    ad_buf_printf(l->out, "%s%s t%d_, t%d_D[%d];\n%s{\n%s    const %s x_[%d] = {", l->ind, T, n, n,
                  k, l->ind, l->ind, T, k);
    for (int j = 0; j < k; j++)
        ad_buf_printf(l->out, "%s(%s)%s", j ? ", " : "", T, vals[j]);
    ad_buf_printf(l->out, "};\n%s    %s(x_, &t%d_, t%d_D);\n%s}\n%s(void)t%d_;\n", l->ind, helper,
                  n, n, l->ind, l->ind, n);
    return ad_fmt("t%d_", n);
}

void lin_flush_zero(lin *l)
{
    if (l->zero)
        ad_buf_printf(l->out, "%s%s = 0;\n", l->ind, l->zero);
    l->zero = NULL;
}

void lin_add_place(lin *l, const ad_expr *e, const char *A)
{
    ad_buf b = {0};
    ad_emit_shadow(&b, e, "_b");
    const ad_var *v = ad_root(e);
    if (l->zero && !strcmp(l->zero, b.p)) {
        ad_buf_printf(l->out, "%s%s = %s;\n", l->ind, b.p, A);
        l->zero = NULL;
    } else if (v && v->set_once && e->kind == EX_INDEX) {
        /* f_rev_set: the element's one contribution (reverse.c) */
        lin_flush_zero(l);
        ad_buf_printf(l->out, "%s%s = %s;\n", l->ind, b.p, A);
    } else {
        lin_flush_zero(l);
        ad_buf_printf(l->out, "%s%s += %s;\n", l->ind, b.p, A);
    }
    ad_buf_free(&b);
}

void lin_adjoint(lin *l, ad_expr *e, const char *A)
{
    if (!e->active)
        return;
    if (ad_is_place(e)) {
        lin_add_place(l, e, A);
        return;
    }
    if (e->kind == EX_CAST) {
        lin_adjoint(l, e->a, A);
        return;
    }
    int n = e->tmp;
    if (e->kind == EX_COND) {
        lin_flush_zero(l); /* both branches add to zeroed shadows */
        const char *ind = l->ind;
        ad_buf_printf(l->out, "%sif (c%d_) {\n", ind, n);
        l->ind = ad_fmt("%s    ", ind);
        lin_value(l, e->b);
        lin_adjoint(l, e->b, A);
        l->ind = ind;
        ad_buf_printf(l->out, "%s} else {\n", ind);
        l->ind = ad_fmt("%s    ", ind);
        lin_value(l, e->c);
        lin_adjoint(l, e->c, A);
        l->ind = ind;
        ad_buf_printf(l->out, "%s}\n", ind);
        return;
    }
    if (!e->row)
        return;
    ad_expr *ops[4];
    int k = operands(e, ops);
    for (int j = 0; j < k; j++) {
        if (!ops[j]->active)
            continue;
        int a = ++l->tmp;
        ad_buf_printf(l->out, "%sconst %s a%d_ = %s * t%d_D[%d];\n", l->ind, real_of(e), a, A, n,
                      j);
        lin_adjoint(l, ops[j], ad_fmt("a%d_", a));
    }
}

/* ---- Stored partials ------------------------------------------------------------------------ */

typedef struct partials {
    lin *l;
    ad_expr **leaves;
    const char **J;
    const char *text[16];
    int n, max;
} partials;

/* Adds A (NULL: 1) times the derivative of e to the partials of the places e reads. */
static void partials_walk(partials *p, ad_expr *e, const char *A)
{
    if (p->n < 0 || !e->active)
        return;
    if (ad_is_place(e)) {
        const char *t = ad_expr_text(e);
        const char *a = A ? A : "1.0";
        for (int i = 0; i < p->n; i++)
            if (!strcmp(p->text[i], t)) {
                if (p->J) {
                    int s = ++p->l->tmp;
                    ad_buf_printf(p->l->out, "%sconst double a%d_ = %s + %s;\n", p->l->ind, s,
                                  p->J[i], a);
                    p->J[i] = ad_fmt("a%d_", s);
                }
                return;
            }
        if (p->n == p->max || p->n == 16) {
            p->n = -1;
            return;
        }
        p->text[p->n] = t;
        p->leaves[p->n] = e;
        if (p->J)
            p->J[p->n] = a;
        p->n++;
        return;
    }
    if (e->kind == EX_CAST) {
        partials_walk(p, e->a, A);
        return;
    }
    if (!e->row) {
        p->n = -1;
        return;
    }
    ad_expr *ops[4];
    int k = operands(e, ops);
    for (int j = 0; j < k && j < 4; j++) {
        if (!ops[j]->active)
            continue;
        const char *a = NULL;
        if (p->J) {
            if (A) {
                int s = ++p->l->tmp;
                ad_buf_printf(p->l->out, "%sconst double a%d_ = %s * t%d_D[%d];\n", p->l->ind, s, A,
                              e->tmp, j);
                a = ad_fmt("a%d_", s);
            } else {
                a = ad_fmt("t%d_D[%d]", e->tmp, j);
            }
        }
        partials_walk(p, ops[j], p->J ? a : "");
    }
}

int lin_partials(lin *l, ad_expr *e, ad_expr **leaves, const char **J, int max)
{
    partials p = {.l = l, .leaves = leaves, .J = J, .max = max};
    partials_walk(&p, e, NULL);
    return p.n;
}

/* ---- Tangents ------------------------------------------------------------------------------- */

/* The shadow of a local's place with the direction index k_ where its tangent has it: after
 * the array dimensions of a local of numbers (`a_d[i][k_]`); at the struct, before its first
 * field, for a local struct or array of structs, whose tangent is an array of CR_AD_VMAX
 * structs (`q_d[k_].w[j]`, `qs_d[i][k_].x`). True when the index was written. */
static bool lane_shadow(ad_buf *b, const ad_expr *e)
{
    switch (e->kind) {
    case EX_VAR:
        ad_emit_shadow(b, e, "_d");
        return false;
    case EX_INDEX: {
        bool in = lane_shadow(b, e->a);
        ad_buf_put(b, "[");
        ad_emit_expr(b, e->b);
        ad_buf_put(b, "]");
        return in;
    }
    case EX_MEMBER: {
        bool in = lane_shadow(b, e->a);
        if (!in && !e->arrow)
            ad_buf_put(b, "[k_]");
        ad_buf_printf(b, "%s%s", e->arrow ? "->" : ".", e->text);
        return in || !e->arrow;
    }
    default:
        ad_emit_shadow(b, e, "_d");
        return false;
    }
}

/* The tangent of a field of a struct parameter's element (vector mode): element i of `p`
 * in direction k_ is the struct p_d[i * p_ds_ + k_]; `p->f`, `(*p).f` and `p[i].f`, then
 * fields and indices below. False when e has another form. */
static bool param_field(ad_buf *b, const ad_var *v, const ad_expr *e)
{
    if (e->kind == EX_INDEX) {
        if (!param_field(b, v, e->a))
            return false;
        ad_buf_put(b, "[");
        ad_emit_expr(b, e->b);
        ad_buf_put(b, "]");
        return true;
    }
    if (e->kind != EX_MEMBER)
        return false;
    const ad_expr *a = e->a;
    if (e->arrow && a->kind == EX_VAR && a->var == v) {
        ad_buf_printf(b, "%s_d[k_]", v->cname);
    } else if (!e->arrow && a->kind == EX_DEREF && a->a->kind == EX_VAR && a->a->var == v) {
        ad_buf_printf(b, "%s_d[k_]", v->cname);
    } else if (!e->arrow && a->kind == EX_INDEX && a->a->kind == EX_VAR && a->a->var == v) {
        ad_buf_printf(b, "%s_d[(size_t)(", v->cname);
        ad_emit_expr(b, a->b);
        ad_buf_printf(b, ") * %s_ds_ + (size_t)k_]", v->cname);
    } else if (e->arrow || !param_field(b, v, a)) {
        return false;
    }
    ad_buf_printf(b, ".%s", e->text);
    return true;
}

/* The tangent of a place: its shadow (vector mode: element k_ of its direction block). */
static const char *place_tangent(lin *l, const ad_expr *e)
{
    ad_buf b = {0};
    if (l->vector) {
        const ad_var *v = ad_root(e);
        if (v && v->kind == VAR_PARAM && v->type->kind == TY_PTR) {
            l->param_lane = true;
            /* element (index) of a parameter array: a_d[(i)*nd + k0_ + k_] */
            if (e->kind == EX_INDEX && e->a->kind == EX_VAR) {
                ad_buf_printf(&b, "%s_d[(size_t)(", v->cname);
                ad_emit_expr(&b, e->b);
                ad_buf_printf(&b, ") * %s_ds_ + (size_t)k_]", v->cname);
            } else if (e->kind == EX_DEREF && e->a->kind == EX_VAR) {
                ad_buf_printf(&b, "%s_d[k_]", v->cname);
            } else if (param_field(&b, v, e)) {
                /* a field of a struct parameter's element */
            } else {
                if (b.p) { /* what param_field wrote before it failed */
                    b.len = 0;
                    b.p[0] = '\0';
                }
                ad_buf_put(&b, "0 /* unsupported */");
                l->unsupported = true;
            }
        } else if (v && v->kind == VAR_PARAM) {
            ad_buf_printf(&b, "%s_dv[k_]", v->cname);
        } else {
            /* a local: its tangent has a trailing direction dimension (a struct's: before
             * its fields) */
            if (!lane_shadow(&b, e))
                ad_buf_put(&b, "[k_]");
        }
    } else {
        ad_emit_shadow(&b, e, "_d");
    }
    char *r = ad_strdup(b.p);
    ad_buf_free(&b);
    return r;
}

const char *lin_place_tangent(lin *l, const ad_expr *e)
{
    return place_tangent(l, e);
}

/* Pass 1 and the tangent together; the tangent is a scalar expression (in vector mode, of
 * direction k_ inside the loop the caller writes: every node's tangent is then an array). */
const char *lin_tangent(lin *l, ad_expr *e)
{
    if (!e->active)
        return "0";
    if (ad_is_place(e))
        return place_tangent(l, e);
    if (e->kind == EX_CAST)
        return ad_fmt("((%s)%s)", e->type->spelling, lin_tangent(l, e->a));
    int n = e->tmp;
    const char *T = real_of(e);
    const char *K = l->vector && !l->lane ? "[k_]" : "";
    if (e->kind == EX_COND) {
        ad_buf_printf(l->out, "%s%s d%d_%s;\n", l->ind, T, n, l->vector ? "[CR_AD_VMAX]" : "");
        ad_buf_printf(l->out, "%sif (c%d_) {\n", l->ind, n);
        const char *ind = l->ind;
        l->ind = ad_fmt("%s    ", ind);
        lin_value(l, e->b);
        lin_tangent_assign(l, e->b, ad_fmt("d%d_", n));
        l->ind = ind;
        ad_buf_printf(l->out, "%s} else {\n", ind);
        l->ind = ad_fmt("%s    ", ind);
        lin_value(l, e->c);
        lin_tangent_assign(l, e->c, ad_fmt("d%d_", n));
        l->ind = ind;
        ad_buf_printf(l->out, "%s}\n", ind);
        return ad_fmt("d%d_%s", n, K);
    }
    if (!e->row)
        return "0";
    ad_expr *ops[4];
    int k = operands(e, ops);
    const char *dots[4];
    for (int j = 0; j < k; j++)
        dots[j] = ops[j]->active ? lin_tangent(l, ops[j]) : NULL;
    if (l->lane) {
        ad_buf_printf(l->out, "%sconst %s d%d_ = ", l->ind, T, n);
    } else {
        ad_buf_printf(l->out, "%s%s d%d_%s;\n", l->ind, T, n, l->vector ? "[CR_AD_VMAX]" : "");
        if (l->vector)
            ad_buf_printf(l->out, "%sfor (int k_ = 0; k_ < w_; k_++)\n    ", l->ind);
        ad_buf_printf(l->out, "%sd%d_%s = ", l->ind, n, K);
    }
    bool first = true;
    for (int j = 0; j < k; j++) {
        if (!dots[j])
            continue;
        ad_buf_printf(l->out, "%st%d_D[%d] * %s", first ? "" : " + ", n, j, dots[j]);
        first = false;
    }
    if (first)
        ad_buf_put(l->out, "0");
    ad_buf_put(l->out, ";\n");
    return ad_fmt("d%d_%s", n, K);
}

void lin_tangent_assign(lin *l, ad_expr *e, const char *dst)
{
    const char *d = lin_tangent(l, e);
    if (l->vector)
        ad_buf_printf(l->out, "%sfor (int k_ = 0; k_ < w_; k_++)\n%s    %s[k_] = %s;\n", l->ind,
                      l->ind, dst, d);
    else
        ad_buf_printf(l->out, "%s%s = %s;\n", l->ind, dst, d);
}

static bool has_active_cond(const ad_expr *e)
{
    if (!e || !e->active)
        return false;
    if (e->kind == EX_COND)
        return true;
    if (has_active_cond(e->a) || has_active_cond(e->b) || has_active_cond(e->c))
        return true;
    for (int i = 0; i < e->nargs; i++)
        if (has_active_cond(e->args[i]))
            return true;
    return false;
}

bool lin_tangent_lanes(lin *l, ad_expr *e, const char *lane_dst, bool dst_local)
{
    if (has_active_cond(e))
        return false;
    const char *ind = l->ind;
    size_t head = l->out->len;
    if (l->klo)
        ad_buf_printf(l->out, "%sfor (int k_ = %s; k_ < %s; k_++) {\n", ind, l->klo, l->khi);
    else
        ad_buf_printf(l->out, "%sfor (int k_ = 0; k_ < w_; k_++) {\n", ind);
    l->ind = ad_fmt("%s    ", ind);
    l->lane = true;
    l->param_lane = false;
    const char *d = lin_tangent(l, e);
    l->lane = false;
    ad_buf_printf(l->out, "%s%s = %s;\n", l->ind, lane_dst, d);
    l->ind = ind;
    ad_buf_printf(l->out, "%s}\n", ind);
    if (dst_local && !l->param_lane && !l->klo) {
        /* every lane: the loop's text again, with the constant count */
        char *text = ad_strdup(l->out->p + head);
        char *w = strstr(text, "k_ < w_;");
        l->out->len = head;
        l->out->p[head] = '\0';
        if (w) {
            *w = '\0';
            ad_buf_printf(l->out, "%sk_ < CR_AD_VMAX;%s", text, w + strlen("k_ < w_;"));
        } else {
            ad_buf_put(l->out, text);
        }
    }
    return true;
}
