/*
 * The tangent (forward-mode) generator: each statement computes its value and partials
 * with the rule rows, then its tangent, in the primal's own control flow. The vector form
 * carries up to CR_AD_VMAX directions per evaluation of the primal (a tangent is an array
 * of the directions); f_fwdv runs it once per CR_AD_VMAX directions.
 */
#include <string.h>

#include "ad.h"
#include "lin.h"
#include "requests.h"

typedef struct fw {
    ad_unit *u;
    ad_func *f;
    lin l;
    ad_buf *out;
    bool vector;
} fw;

static bool active_place(const ad_expr *l)
{
    const ad_var *v = ad_root(l);
    return v && v->active && ad_type_is_real(l->type);
}

/* ---- Lane ranges (--lane-ranges) ---------------------------------------------------------- */

/* A field of a local struct (or of an element of a local array of structs): its tangent has
 * no lane range of its own, every lane [0, w_) is written and read. */
static bool struct_place(const ad_expr *e)
{
    const ad_var *v = ad_root(e);
    return v && v->kind == VAR_LOCAL && ad_type_scalar_of(v->type)->kind == TY_STRUCT;
}

/* A local whose tangent carries a lane range: a real scalar or an array of reals (any rank):
 * its ranges are `v_dlo_` and `v_dhi_`, of its shape. */
static bool ranged_var(const ad_var *v)
{
    if (!v || v->kind != VAR_LOCAL || !v->active)
        return false;
    const ad_type *t = v->type;
    while (t->kind == TY_ARRAY)
        t = t->elem;
    return ad_type_is_real(t);
}

/* A place with a lane range: such a local, or one of its elements (indexed to a scalar). */
static bool ranged_place(const ad_expr *e)
{
    const ad_expr *x = e;
    while (x->kind == EX_INDEX)
        x = x->a;
    return x->kind == EX_VAR && ranged_var(x->var) && ad_type_is_real(e->type);
}

static bool has_cond(const ad_expr *e)
{
    if (!e || !e->active)
        return false;
    if (e->kind == EX_COND)
        return true;
    if (has_cond(e->a) || has_cond(e->b) || has_cond(e->c))
        return true;
    for (int i = 0; i < e->nargs; i++)
        if (has_cond(e->args[i]))
            return true;
    return false;
}

static bool ranges_on(const fw *w)
{
    return w->vector && w->u->lane_ranges;
}

static const char *place_sfx(const ad_expr *e, const char *sfx)
{
    ad_buf b = {0};
    ad_emit_shadow(&b, e, sfx);
    char *r = ad_strdup(b.p);
    ad_buf_free(&b);
    return r;
}

/* The active places e reads, each once (by text). */
static void range_leaves(const ad_expr *e, const ad_expr **out, const char **text, int *n, int max)
{
    if (!e || !e->active || *n < 0)
        return;
    if (ad_is_place(e)) {
        const char *t = ad_expr_text(e);
        for (int i = 0; i < *n; i++)
            if (!strcmp(text[i], t))
                return;
        if (*n == max) {
            *n = -1;
            return;
        }
        text[*n] = t;
        out[(*n)++] = e;
        return;
    }
    range_leaves(e->a, out, text, n, max);
    range_leaves(e->b, out, text, n, max);
    range_leaves(e->c, out, text, n, max);
    for (int i = 0; i < e->nargs; i++)
        range_leaves(e->args[i], out, text, n, max);
}

/* Writes `lo = w_, hi = 0` grown by the lane ranges of the places e reads: a ranged local's
 * range, the nonzero lanes of a parameter's tangent (scanned), else every lane. */
static void range_of(fw *w, const ad_expr *e, const char *lo, const char *hi, const char *ind)
{
    enum { MAXL = 64 };
    const ad_expr *lv[MAXL];
    const char *tx[MAXL];
    int n = 0;
    range_leaves(e, lv, tx, &n, MAXL);
    ad_buf_printf(w->out, "%sint %s = w_, %s = 0;\n", ind, lo, hi);
    if (n < 0) {
        ad_buf_printf(w->out, "%s%s = 0;\n%s%s = w_;\n", ind, lo, ind, hi);
        return;
    }
    for (int i = 0; i < n; i++) {
        const ad_expr *x = lv[i];
        const ad_var *v = ad_root(x);
        if (ranged_place(x)) {
            ad_buf_printf(w->out, "%scr_ad_lr_grow_(&%s, &%s, %s, %s);\n", ind, lo, hi,
                          place_sfx(x, "_dlo_"), place_sfx(x, "_dhi_"));
        } else if (v && v->kind == VAR_PARAM && ad_type_is_real(v->type)) {
            ad_buf_printf(w->out, "%scr_ad_lr_grow_(&%s, &%s, %s_dlo_, %s_dhi_);\n", ind, lo, hi,
                          v->cname, v->cname);
        } else if (v && v->kind == VAR_PARAM && v->type->kind == TY_PTR && x->kind == EX_INDEX &&
                   x->a->kind == EX_VAR) {
            ad_buf b = {0};
            ad_emit_expr(&b, x->b);
            ad_buf_printf(w->out, "%scr_ad_lr_scan_(&%s, &%s, %s_d + (size_t)(%s) * %s_ds_, w_);\n",
                          ind, lo, hi, v->cname, b.p, v->cname);
            ad_buf_free(&b);
        } else if (v && v->kind == VAR_PARAM && v->type->kind == TY_PTR && x->kind == EX_DEREF &&
                   x->a->kind == EX_VAR) {
            ad_buf_printf(w->out, "%scr_ad_lr_scan_(&%s, &%s, %s_d, w_);\n", ind, lo, hi, v->cname);
        } else {
            ad_buf_printf(w->out, "%scr_ad_lr_grow_(&%s, &%s, 0, w_);\n", ind, lo, hi);
        }
    }
}

/* After a call: the ranged locals the callee may write through its pointer arguments get
 * every lane (the callee's tangent kernel writes all of them). */
static void range_after_call(fw *w, const ad_expr *c, const char *ind)
{
    const ad_func *g = c->callee;
    for (int i = 0; i < c->nargs; i++) {
        const ad_expr *a = c->args[i];
        if (a->type->kind != TY_PTR && a->type->kind != TY_ARRAY)
            continue;
        if (g && i < g->nparams && g->params[i]->type->kind == TY_PTR &&
            g->params[i]->type->is_const)
            continue;
        ad_var *v = ad_root(a);
        if (!ranged_var(v))
            continue;
        ad_expr *ve = ad_expr_var(v);
        const char *lo = place_sfx(ve, "_dlo_"), *hi = place_sfx(ve, "_dhi_");
        if (v->type->kind == TY_ARRAY)
            ad_buf_printf(w->out,
                          "%scr_ad_lr_fill_((int *)%s, (int *)%s, sizeof %s / sizeof(int), w_);\n",
                          ind, lo, hi, lo);
        else
            ad_buf_printf(w->out, "%scr_ad_lr_fill_(&%s, &%s, 1, w_);\n", ind, lo, hi);
    }
}

/* The tangent storage of a place, for assignment (vector mode: without the [k_]). */
static const char *tangent_dst(fw *w, const ad_expr *place)
{
    if (!w->vector) {
        ad_buf b = {0};
        ad_emit_shadow(&b, place, "_d");
        char *r = ad_strdup(b.p);
        ad_buf_free(&b);
        return r;
    }
    const char *t = lin_place_tangent(&w->l, place);
    /* strip the trailing "[k_]" or "+ k_]" form: lin_tangent_assign adds [k_] itself, so the
     * vector destination is written as an lvalue expression through a pointer instead */
    return ad_fmt("(&%s)", t);
}

static void tan_call(fw *w, ad_expr *place, ad_expr *c, const char *ind)
{
    uint64_t mask = ad_call_mask(c);
    if (!mask) {
        if (place)
            ad_buf_printf(w->out, "%s%s = %s;\n", ind, ad_expr_text(place), ad_expr_text(c));
        else
            ad_buf_printf(w->out, "%s%s;\n", ind, ad_expr_text(c));
        if (place && active_place(place)) {
            if (w->vector)
                ad_buf_printf(w->out, "%sfor (int k_ = 0; k_ < w_; k_++)\n%s    %s = 0;\n", ind,
                              ind, lin_place_tangent(&w->l, place));
            if (ranges_on(w) && ranged_place(place))
                ad_buf_printf(w->out, "%s%s = 0;\n%s%s = 0;\n", ind, place_sfx(place, "_dlo_"), ind,
                              place_sfx(place, "_dhi_"));
            if (!w->vector)
                ad_buf_printf(w->out, "%s%s = 0;\n", ind, tangent_dst(w, place));
        }
        return;
    }
    ad_func *g = c->callee;
    const char *mn = ad_request(w->u, g, mask, w->vector ? REQ_TANV : REQ_TAN);
    ad_buf_printf(w->out, "%s{\n", ind);
    const char *ind2 = ad_fmt("%s    ", ind);
    const char *targ[64] = {0};
    w->l.out = w->out;
    w->l.ind = ind2;
    for (int i = 0; i < c->nargs && i < 64; i++)
        if ((mask >> i & 1) && ad_type_is_real(g->params[i]->type)) {
            lin_value(&w->l, c->args[i]);
            targ[i] = ad_fmt("s%d_", ++w->l.tmp);
            /* the real type without its qualifiers: the temporary is written (a callee's
             * `const double v` takes a `double` tangent) */
            ad_buf_printf(w->out, "%s%s %s%s;\n", ind2, ad_type_real_name(g->params[i]->type),
                          targ[i], w->vector ? "[CR_AD_VMAX]" : "");
            lin_tangent_assign(&w->l, c->args[i], targ[i]);
        }
    const char *rt = NULL;
    if (ad_type_is_real(g->ret)) {
        rt = ad_fmt("r%d_", ++w->l.tmp);
        ad_buf_printf(w->out, "%s%s %s%s;\n", ind2, ad_type_real_name(g->ret), rt,
                      w->vector ? "[CR_AD_VMAX]" : "");
    }
    ad_buf b = {0};
    if (place)
        ad_buf_printf(&b, "%s = ", ad_expr_text(place));
    ad_buf_printf(&b, "cr_ad_%s_%s%s(", g->name, w->vector ? "tanv" : "tan", mn);
    for (int i = 0; i < c->nargs; i++) {
        if (i)
            ad_buf_put(&b, ", ");
        ad_buf_put(&b, ad_expr_text(c->args[i]));
        if (i >= 64 || !(mask >> i & 1))
            continue;
        if (targ[i]) {
            ad_buf_printf(&b, ", %s", targ[i]);
        } else if (!w->vector) {
            ad_buf_put(&b, ", ");
            ad_emit_shadow(&b, c->args[i], "_d");
        } else {
            /* a pointer argument: its tangent block and its stride */
            const ad_var *v = ad_root(c->args[i]);
            const ad_expr *a = c->args[i];
            if (v->kind == VAR_PARAM) {
                ad_buf_printf(&b, ", %s_d", v->cname);
                if (a->kind == EX_BIN) {
                    ad_buf_printf(&b, " %s (", a->op);
                    ad_emit_expr(&b, a->b);
                    ad_buf_printf(&b, ") * %s_ds_", v->cname);
                } else if (a->kind == EX_ADDR && a->a->kind == EX_INDEX) {
                    ad_buf_put(&b, " + (");
                    ad_emit_expr(&b, a->a->b);
                    ad_buf_printf(&b, ") * %s_ds_", v->cname);
                } else if (a->kind != EX_VAR) {
                    w->l.unsupported = true;
                }
                ad_buf_printf(&b, ", %s_ds_", v->cname);
            } else if (a->kind == EX_ADDR && a->a->kind == EX_VAR && v->type->kind == TY_STRUCT) {
                /* &q of a local struct: its CR_AD_VMAX structs of tangents, element 0 */
                ad_buf_printf(&b, ", %s_d, CR_AD_VMAX", v->cname);
            } else {
                ad_buf_printf(&b, ", &%s_d", v->cname);
                if (a->kind == EX_ADDR && a->a->kind == EX_INDEX) {
                    ad_buf_put(&b, "[");
                    ad_emit_expr(&b, a->a->b);
                    ad_buf_put(&b, "][0]");
                } else if (a->kind == EX_VAR) {
                    ad_buf_put(&b, "[0][0]");
                } else {
                    w->l.unsupported = true;
                }
                ad_buf_put(&b, ", CR_AD_VMAX");
            }
        }
    }
    if (rt)
        ad_buf_printf(&b, "%s%s", c->nargs ? ", " : "", w->vector ? rt : ad_fmt("&%s", rt));
    if (w->vector)
        ad_buf_printf(&b, "%sw_", (c->nargs || rt) ? ", " : "");
    ad_buf_put(&b, ")");
    ad_buf_printf(w->out, "%s%s;\n", ind2, b.p);
    ad_buf_free(&b);
    if (place && active_place(place) && rt) {
        if (w->vector)
            ad_buf_printf(w->out, "%sfor (int k_ = 0; k_ < w_; k_++)\n%s    %s = %s[k_];\n", ind2,
                          ind2, lin_place_tangent(&w->l, place), rt);
        else
            ad_buf_printf(w->out, "%s%s = %s;\n", ind2, tangent_dst(w, place), rt);
        if (ranges_on(w) && ranged_place(place))
            ad_buf_printf(w->out, "%s%s = 0;\n%s%s = w_;\n", ind2, place_sfx(place, "_dlo_"), ind2,
                          place_sfx(place, "_dhi_"));
    }
    if (ranges_on(w))
        range_after_call(w, c, ind2);
    ad_buf_printf(w->out, "%s}\n", ind);
}

/* A ranged local assigned (after lin_value): the tangent over the union of the ranges the
 * value reads; `x = x + e` and `x = x - e` update only e's lanes. */
static void ranged_assign(fw *w, ad_expr *place, ad_expr *value, int n, const char *T,
                          const char *ind)
{
    const char *pt = ad_expr_text(place);
    const ad_expr *acc = NULL;
    if (value->kind == EX_BIN && value->op &&
        (!strcmp(value->op, "+") || !strcmp(value->op, "-")) && ad_is_place(value->a) &&
        !strcmp(ad_expr_text(value->a), pt)) {
        enum { MAXL = 64 };
        const ad_expr *lv[MAXL];
        const char *tx[MAXL];
        int k = 0;
        range_leaves(value->b, lv, tx, &k, MAXL);
        bool reads_place = k < 0;
        for (int i = 0; i < k; i++)
            reads_place = reads_place || !strcmp(tx[i], pt);
        if (!reads_place)
            acc = value->b;
    }
    const char *lo = ad_fmt("lo%d_", n), *hi = ad_fmt("hi%d_", n);
    const char *plo = place_sfx(place, "_dlo_"), *phi = place_sfx(place, "_dhi_");
    const char *pd = place_sfx(place, "_d");
    /* a sum of the places read times their partials: each over its own range */
    enum { MAXP = 16 };
    ad_expr *leaves[MAXP];
    const char *J[MAXP];
    ad_expr *src = acc ? (ad_expr *)acc : value;
    int np = lin_partials(&w->l, src, leaves, J, MAXP);
    if (np >= 0) {
        /* the place itself among the leaves, or an element of its array (the same element
         * at run time, perhaps): the sum goes to a temporary first */
        bool dst_leaf = false;
        const ad_var *proot = ad_root(place);
        for (int j = 0; j < np && !acc; j++)
            dst_leaf = dst_leaf || !strcmp(ad_expr_text(leaves[j]), pt) ||
                       (place->kind == EX_INDEX && ad_root(leaves[j]) == proot);
        if (!acc)
            ad_buf_printf(w->out, "%sint %s = w_, %s = 0;\n", ind, lo, hi);
        const char *tgt = pd;
        if (dst_leaf) {
            tgt = ad_fmt("e%d_", n);
            ad_buf_printf(w->out, "%s%s %s[CR_AD_VMAX];\n", ind, T, tgt);
        } else if (!acc) {
            ad_buf_printf(w->out, "%scr_ad_lr_clear_(%s, %s, %s, w_, 0);\n", ind, pd, plo, phi);
        }
        const char *sign = acc && !strcmp(value->op, "-") ? "-" : "+";
        const char *lj[MAXP], *hj[MAXP];
        for (int j = 0; j < np; j++) {
            const ad_expr *x = leaves[j];
            const ad_var *v = ad_root(x);
            if (ranged_place(x)) {
                lj[j] = place_sfx(x, "_dlo_");
                hj[j] = place_sfx(x, "_dhi_");
            } else if (v && v->kind == VAR_PARAM && ad_type_is_real(v->type)) {
                lj[j] = ad_fmt("%s_dlo_", v->cname);
                hj[j] = ad_fmt("%s_dhi_", v->cname);
            } else {
                lj[j] = ad_fmt("lo%d_%d", n, j);
                hj[j] = ad_fmt("hi%d_%d", n, j);
                range_of(w, x, lj[j], hj[j], ind);
            }
        }
        const char *ind2 = ind;
        if (np > 1 && !dst_leaf) {
            /* the same range for every place read (a transform's row, say): one loop */
            ad_buf_printf(w->out, "%sif (", ind);
            for (int j = 1; j < np; j++)
                ad_buf_printf(w->out, "%s%s == %s && %s == %s", j > 1 ? " && " : "", lj[j], lj[0],
                              hj[j], hj[0]);
            ad_buf_printf(w->out,
                          ") {\n%s    for (int k_ = %s; k_ < %s; k_++)\n%s        %s[k_] %s= ", ind,
                          lj[0], hj[0], ind, tgt, acc ? sign : "");
            for (int j = 0; j < np; j++)
                ad_buf_printf(w->out, "%s%s * %s", j ? " + " : "", J[j],
                              lin_place_tangent(&w->l, leaves[j]));
            ad_buf_printf(w->out, ";\n%s    cr_ad_lr_grow_(&%s, &%s, %s, %s);\n%s} else {\n", ind,
                          acc ? plo : lo, acc ? phi : hi, lj[0], hj[0], ind);
            ind2 = ad_fmt("%s    ", ind);
        }
        for (int j = 0; j < np; j++) {
            if (dst_leaf)
                /* the temporary's lanes that the union gains: zeroed */
                ad_buf_printf(w->out, "%scr_ad_lr_widen_(%s, %s, %s, %s, %s);\n", ind2, tgt, lo, hi,
                              lj[j], hj[j]);
            ad_buf_printf(w->out, "%sfor (int k_ = %s; k_ < %s; k_++)\n%s    %s[k_] %s= %s * %s;\n",
                          ind2, lj[j], hj[j], ind2, tgt, sign, J[j],
                          lin_place_tangent(&w->l, leaves[j]));
            ad_buf_printf(w->out, "%scr_ad_lr_grow_(&%s, &%s, %s, %s);\n", ind2, acc ? plo : lo,
                          acc ? phi : hi, lj[j], hj[j]);
        }
        if (ind2 != ind)
            ad_buf_printf(w->out, "%s}\n", ind);
        if (!acc) {
            if (dst_leaf)
                ad_buf_printf(w->out,
                              "%scr_ad_lr_clear_(%s, %s, %s, w_, 0);\n"
                              "%sfor (int k_ = %s; k_ < %s; k_++)\n%s    %s[k_] = %s[k_];\n",
                              ind, pd, plo, phi, ind, lo, hi, ind, pd, tgt);
            ad_buf_printf(w->out, "%s%s = %s;\n%s%s = %s;\n", ind, plo, lo, ind, phi, hi);
        }
        return;
    }
    range_of(w, acc ? acc : value, lo, hi, ind);
    if (!acc)
        ad_buf_printf(w->out, "%scr_ad_lr_clear_(%s, %s, %s, %s, %s);\n", ind,
                      place_sfx(place, "_d"), plo, phi, lo, hi);
    w->l.klo = lo;
    w->l.khi = hi;
    bool lanes = lin_tangent_lanes(&w->l, value, lin_place_tangent(&w->l, place), true);
    w->l.klo = w->l.khi = NULL;
    if (!lanes) {
        /* an active conditional expression: every lane */
        ad_buf_printf(w->out, "%s%s e%d_[CR_AD_VMAX];\n", ind, T, n);
        lin_tangent_assign(&w->l, value, ad_fmt("e%d_", n));
        ad_buf_printf(w->out, "%sfor (int k_ = 0; k_ < w_; k_++)\n%s    %s = e%d_[k_];\n", ind, ind,
                      lin_place_tangent(&w->l, place), n);
        ad_buf_printf(w->out, "%s%s = 0;\n%s%s = w_;\n", ind, plo, ind, phi);
    } else if (acc) {
        ad_buf_printf(w->out, "%scr_ad_lr_grow_(&%s, &%s, %s, %s);\n", ind, plo, phi, lo, hi);
    } else {
        ad_buf_printf(w->out, "%s%s = %s;\n%s%s = %s;\n", ind, plo, lo, ind, phi, hi);
    }
}

/* An element of a caller's array assigned, with lane ranges: every lane of the block is
 * written, the first place read's partial times its tangent over that place's range and zero
 * on the other lanes, then each other place read adds its partial times its tangent over its
 * own lanes (the output is often the largest stream of memory: zeroing the element first and
 * adding over it took GradBench's ht Jacobian 9-27% longer). False (nothing written) when
 * the value has no such sum or reads the same array. */
static bool param_assign(fw *w, ad_expr *place, ad_expr *value, int n, const char *ind)
{
    enum { MAXP = 16 };
    ad_expr *leaves[MAXP];
    const char *J[MAXP];
    const ad_var *root = ad_root(place);
    if (has_cond(value) || !root)
        return false;
    int np = lin_partials(&w->l, value, leaves, J, MAXP);
    if (np < 0)
        return false;
    for (int j = 0; j < np; j++)
        if (ad_root(leaves[j]) == root)
            return false;
    const char *lo = ad_fmt("lo%d_", n), *hi = ad_fmt("hi%d_", n);
    const char *lj[MAXP], *hj[MAXP];
    for (int j = 0; j < np; j++) {
        const ad_expr *x = leaves[j];
        const ad_var *v = ad_root(x);
        if (ranged_place(x)) {
            lj[j] = place_sfx(x, "_dlo_");
            hj[j] = place_sfx(x, "_dhi_");
        } else if (v && v->kind == VAR_PARAM && ad_type_is_real(v->type)) {
            lj[j] = ad_fmt("%s_dlo_", v->cname);
            hj[j] = ad_fmt("%s_dhi_", v->cname);
        } else {
            lj[j] = ad_fmt("lo%d_%d", n, j);
            hj[j] = ad_fmt("hi%d_%d", n, j);
            range_of(w, x, lj[j], hj[j], ind);
        }
    }
    const char *dst = lin_place_tangent(&w->l, place);
    if (np == 0) {
        ad_buf_printf(w->out, "%sfor (int k_ = 0; k_ < w_; k_++)\n%s    %s = 0;\n", ind, ind, dst);
        return true;
    }
    /* an empty range (hi <= lo, perhaps lo = w_) made [0, 0): every lane zero */
    ad_buf_printf(w->out,
                  "%sint %s = %s, %s = %s;\n%sif (%s <= %s)\n%s    %s = %s = 0;\n"
                  "%sfor (int k_ = 0; k_ < %s; k_++)\n%s    %s = 0;\n"
                  "%sfor (int k_ = %s; k_ < %s; k_++)\n%s    %s = %s * %s;\n"
                  "%sfor (int k_ = %s; k_ < w_; k_++)\n%s    %s = 0;\n",
                  ind, lo, lj[0], hi, hj[0], ind, hi, lo, ind, lo, hi, ind, lo, ind, dst, ind, lo,
                  hi, ind, dst, J[0], lin_place_tangent(&w->l, leaves[0]), ind, hi, ind, dst);
    for (int j = 1; j < np; j++)
        ad_buf_printf(w->out, "%sfor (int k_ = %s; k_ < %s; k_++)\n%s    %s += %s * %s;\n", ind,
                      lj[j], hj[j], ind, dst, J[j], lin_place_tangent(&w->l, leaves[j]));
    return true;
}

static void tan_assign(fw *w, ad_expr *place, ad_expr *value, const char *ind)
{
    if (value->kind == EX_CALL && value->callee) {
        tan_call(w, place, value, ind);
        return;
    }
    if (!active_place(place)) {
        ad_buf_printf(w->out, "%s%s = %s;\n", ind, ad_expr_text(place), ad_expr_text(value));
        return;
    }
    ad_buf_printf(w->out, "%s{\n", ind);
    const char *ind2 = ad_fmt("%s    ", ind);
    w->l.out = w->out;
    w->l.ind = ind2;
    const char *v = lin_value(&w->l, value);
    int n = ++w->l.tmp;
    const char *T = ad_type_real_name(place->type);
    ad_buf_printf(w->out, "%sconst %s v%d_ = %s;\n", ind2, T, n, v);
    const ad_var *root = ad_root(place);
    bool local = root && !(root->kind == VAR_PARAM && root->type->kind == TY_PTR);
    if (ranges_on(w) && ranged_place(place)) {
        ranged_assign(w, place, value, n, T, ind2);
    } else if (ranges_on(w) && !local && param_assign(w, place, value, n, ind2)) {
        /* every lane written: zeros, then each place read over its own lanes */
    } else if (w->vector && lin_tangent_lanes(&w->l, value, lin_place_tangent(&w->l, place),
                                              local && !(ranges_on(w) && struct_place(place)))) {
        /* each direction reads only its own lane: the place's tangent is written in place
         * (with lane ranges, a struct's field on the lanes [0, w_) only: past w_, a ranged
         * array declared with no initialiser holds what the stack held) */
    } else if (w->vector) {
        ad_buf_printf(w->out, "%s%s e%d_[CR_AD_VMAX];\n", ind2, T, n);
        lin_tangent_assign(&w->l, value, ad_fmt("e%d_", n));
        ad_buf_printf(w->out, "%sfor (int k_ = 0; k_ < w_; k_++)\n%s    %s = e%d_[k_];\n", ind2,
                      ind2, lin_place_tangent(&w->l, place), n);
    } else {
        const char *d = lin_tangent(&w->l, value);
        ad_buf_printf(w->out, "%sconst %s e%d_ = %s;\n", ind2, T, n, d);
        ad_buf_printf(w->out, "%s%s = e%d_;\n", ind2, tangent_dst(w, place), n);
    }
    ad_buf_printf(w->out, "%s%s = v%d_;\n", ind2, ad_expr_text(place), n);
    ad_buf_printf(w->out, "%s}\n", ind);
}

/* The elements an initialiser list leaves out are zero each time the declaration runs: in a
 * loop's body, where the local (declared once, zeroed on entry) may hold the last
 * iteration's values, they are zeroed again, with their tangents. */
static void tan_zero_rest(fw *w, const ad_stmt *s, const char *ind)
{
    const ad_var *v = s->var;
    const char *n = v->cname;
    if (v->type->kind != TY_ARRAY || s->ninits >= v->type->len)
        return;
    ad_buf_printf(w->out, "%sfor (int z_ = %d; z_ < %lld; z_++) {\n%s    %s[z_] = 0;\n", ind,
                  s->ninits, v->type->len, ind, n);
    if (v->active && !w->vector)
        ad_buf_printf(w->out, "%s    %s_d[z_] = 0;\n", ind, n);
    else if (v->active && ranges_on(w) && ranged_var(v))
        ad_buf_printf(w->out,
                      "%s    cr_ad_lr_clear_(%s_d[z_], %s_dlo_[z_], %s_dhi_[z_], w_, 0);\n"
                      "%s    %s_dlo_[z_] = 0;\n%s    %s_dhi_[z_] = 0;\n",
                      ind, n, n, n, ind, n, ind, n);
    else if (v->active)
        ad_buf_printf(w->out,
                      "%s    for (int k_ = 0; k_ < w_; k_++)\n%s        %s_d[z_][k_] = 0;\n", ind,
                      ind, n);
    ad_buf_printf(w->out, "%s}\n", ind);
}

static void tan_stmt(fw *w, ad_stmt *s, const char *ind)
{
    const char *ind2 = ad_fmt("%s    ", ind);
    switch (s->kind) {
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            tan_stmt(w, s->body[i], ind);
        return;
    case ST_DECL:
        if (s->e)
            tan_assign(w, ad_expr_var(s->var), s->e, ind);
        for (int i = 0; i < s->ninits; i++)
            tan_assign(w, ad_expr_elem(s->var, i), s->inits[i], ind);
        if (s->inits && s->var->loop_depth > 0)
            tan_zero_rest(w, s, ind);
        return;
    case ST_EXPR:
        if (s->e->kind == EX_ASSIGN)
            tan_assign(w, s->e->a, s->e->b, ind);
        else if (s->e->kind == EX_CALL && s->e->callee)
            tan_call(w, NULL, s->e, ind);
        else
            ad_buf_printf(w->out, "%s%s;\n", ind, ad_expr_text(s->e));
        return;
    case ST_RETURN:
        if (s->e && ad_type_is_real(w->f->ret)) {
            ad_buf_printf(w->out, "%s{\n", ind);
            w->l.out = w->out;
            w->l.ind = ind2;
            const char *v = lin_value(&w->l, s->e);
            int n = ++w->l.tmp;
            ad_buf_printf(w->out, "%sconst %s v%d_ = %s;\n", ind2, w->f->ret->spelling, n, v);
            if (w->vector) {
                if (!lin_tangent_lanes(&w->l, s->e, ad_fmt("%s_d[k_]", w->f->name), false))
                    lin_tangent_assign(&w->l, s->e, ad_fmt("%s_d", w->f->name));
            } else {
                const char *d = lin_tangent(&w->l, s->e);
                ad_buf_printf(w->out, "%sif (%s_d)\n%s    *%s_d = %s;\n", ind2, w->f->name, ind2,
                              w->f->name, d);
            }
            ad_buf_printf(w->out, "%sreturn v%d_;\n%s}\n", ind2, n, ind);
        } else if (s->e) {
            ad_buf_printf(w->out, "%sreturn %s;\n", ind, ad_expr_text(s->e));
        } else {
            ad_buf_printf(w->out, "%sreturn;\n", ind);
        }
        return;
    case ST_BREAK:
        ad_buf_printf(w->out, "%sbreak;\n", ind);
        return;
    case ST_CONTINUE:
        ad_buf_printf(w->out, "%scontinue;\n", ind);
        return;
    case ST_IF:
        ad_buf_printf(w->out, "%sif (%s) {\n", ind, ad_expr_text(s->e));
        tan_stmt(w, s->then, ind2);
        if (s->els) {
            ad_buf_printf(w->out, "%s} else {\n", ind);
            tan_stmt(w, s->els, ind2);
        }
        ad_buf_printf(w->out, "%s}\n", ind);
        return;
    case ST_FOR:
        if (s->init)
            tan_stmt(w, s->init, ind);
        if (s->inc && active_place(s->inc->a)) {
            ad_error(s->loc, "unsupported construct: a floating-point loop increment (count with "
                             "an integer)");
            w->f->nerrors++;
        }
        ad_buf_printf(w->out, "%sfor (; %s; %s) {\n", ind, s->e ? ad_expr_text(s->e) : "",
                      s->inc ? ad_expr_text(s->inc) : "");
        tan_stmt(w, s->then, ind2);
        ad_buf_printf(w->out, "%s}\n", ind);
        return;
    case ST_WHILE:
        ad_buf_printf(w->out, "%swhile (%s) {\n", ind, ad_expr_text(s->e));
        tan_stmt(w, s->then, ind2);
        ad_buf_printf(w->out, "%s}\n", ind);
        return;
    case ST_DO:
        ad_buf_printf(w->out, "%sdo {\n", ind);
        tan_stmt(w, s->then, ind2);
        ad_buf_printf(w->out, "%s} while (%s);\n", ind, ad_expr_text(s->e));
        return;
    case ST_NULL:
        return;
    }
}

/* 1 when s declares v with no initialiser, -1 when with one, 0 when s does not declare v. */
static int decl_uninit(const ad_stmt *s, const ad_var *v)
{
    if (!s)
        return 0;
    if (s->kind == ST_DECL && s->var == v)
        return s->e || s->inits ? -1 : 1; /* inits: an initialiser list, even `{}` */
    for (int i = 0; i < s->n; i++) {
        int r = decl_uninit(s->body[i], v);
        if (r)
            return r;
    }
    int r = decl_uninit(s->init, v);
    if (!r)
        r = decl_uninit(s->then, v);
    if (!r)
        r = decl_uninit(s->els, v);
    return r;
}

/* A ranged local array declared with no initialiser: its elements are written before they are
 * read, so neither its values nor its tangent are zeroed; every element's range starts as every
 * lane instead (the lanes are unknown), and the first assignment of an element zeroes the lanes
 * outside its new range (cr_ad_lr_clear_). A large local array then costs nothing for the elements
 * a call does not use. */
static bool lazy_tangent(const fw *w, const ad_var *v)
{
    return ranges_on(w) && ranged_var(v) && v->type->kind == TY_ARRAY && !v->inlined &&
           decl_uninit(w->f->body, v) == 1;
}

static void tan_locals(fw *w, ad_buf *b)
{
    ad_func *f = w->f;
    for (int i = 0; i < f->nlocals; i++) {
        ad_var *v = f->locals[i];
        bool agg = v->type->kind == TY_ARRAY || v->type->kind == TY_STRUCT;
        bool lazy = v->active && lazy_tangent(w, v);
        ad_buf_put(b, "    ");
        ad_emit_local(b, v->type, v->cname);
        ad_buf_put(b, lazy ? ";\n" : agg ? " = {0};\n" : " = 0;\n");
        ad_buf_printf(b, "    (void)%s;\n", v->cname);
        if (v->active) {
            ad_buf_put(b, "    ");
            ad_emit_local(b, v->type, ad_fmt("%s_d", v->cname));
            if (w->vector)
                ad_buf_put(b, "[CR_AD_VMAX]");
            ad_buf_put(b, lazy ? ";\n" : agg || w->vector ? " = {0};\n" : " = 0;\n");
            ad_buf_printf(b, "    (void)%s_d;\n", v->cname);
            if (ranges_on(w) && ranged_var(v)) {
                const char *dims = "";
                for (const ad_type *t = v->type; t->kind == TY_ARRAY; t = t->elem)
                    dims = ad_fmt("%s[%lld]", dims, t->len);
                const char *zero = lazy ? "" : " = {0}";
                ad_buf_printf(b, "    int %s_dlo_%s%s;\n    int %s_dhi_%s%s;\n", v->cname, dims,
                              zero, v->cname, dims, zero);
                ad_buf_printf(b, "    (void)%s_dlo_;\n    (void)%s_dhi_;\n", v->cname, v->cname);
                if (lazy)
                    ad_buf_printf(b,
                                  "    cr_ad_lr_fill_((int *)%s_dlo_, (int *)%s_dhi_, "
                                  "sizeof %s_dlo_ / sizeof(int), w_);\n",
                                  v->cname, v->cname, v->cname);
            }
        }
    }
    for (int i = 0; i < f->nparams; i++) {
        ad_var *p = f->params[i];
        if (w->vector && p->shadowed && ad_type_is_real(p->type)) {
            ad_buf_printf(b,
                          "    %s %s_dv[CR_AD_VMAX] = {0};\n    for (int k_ = 0; k_ < w_; k_++)\n"
                          "        %s_dv[k_] = %s_d[k_];\n",
                          ad_type_real_name(p->type), p->cname, p->cname, p->cname);
            if (ranges_on(w))
                ad_buf_printf(b,
                              "    int %s_dlo_ = w_, %s_dhi_ = 0;\n"
                              "    cr_ad_lr_scan_(&%s_dlo_, &%s_dhi_, %s_dv, w_);\n",
                              p->cname, p->cname, p->cname, p->cname, p->cname);
        }
    }
}

/* Parameter list of the vector kernel: pointers carry a stride. */
static void tanv_params(ad_buf *b, const ad_func *f)
{
    for (int i = 0; i < f->nparams; i++) {
        const ad_var *p = f->params[i];
        ad_emit_decl(b, p->type, p->cname);
        if (p->shadowed) {
            const ad_type *e = ad_type_scalar_of(p->type);
            /* a pointer to structs: one struct of tangents per element and direction */
            const char *T = e->kind == TY_STRUCT ? e->name : ad_type_real_name(e);
            if (ad_type_is_real(p->type))
                ad_buf_printf(b, ", const %s *%s_d", T, p->cname);
            else
                ad_buf_printf(b, ", %s%s *%s_d, size_t %s_ds_", p->type->is_const ? "const " : "",
                              T, p->cname, p->cname);
        }
        ad_buf_put(b, ", ");
    }
    if (ad_type_is_real(f->ret))
        ad_buf_printf(b, "%s *%s_d, ", f->ret->spelling, f->name);
    ad_buf_put(b, "int w_");
}

void ad_emit_forward_fn(ad_buf *out, ad_unit *u, ad_func *f, const char *mname, bool vector,
                        bool public_fn)
{
    fw w = {.u = u, .f = f, .vector = vector};
    w.l.vector = vector;
    ad_buf body = {0};
    w.out = &body;
    tan_stmt(&w, f->body, "    ");
    if (vector && public_fn) {
        /* f_fwdv: blocks of CR_AD_VMAX directions through the vector kernel */
        ad_buf sig = {0};
        ad_emit_signature(&sig, f, 'v');
        ad_buf_printf(out, "%s\n{\n", sig.p);
        if (f->ret->kind != TY_VOID)
            ad_buf_printf(out, "    %s r_ = 0;\n", f->ret->spelling);
        ad_buf_put(out, "    for (int k0_ = 0; k0_ < nd; k0_ += CR_AD_VMAX) {\n"
                        "        const int w_ = nd - k0_ < CR_AD_VMAX ? nd - k0_ : CR_AD_VMAX;\n");
        ad_buf_printf(out, "        %scr_ad_%s_tanv%s(", f->ret->kind != TY_VOID ? "r_ = " : "",
                      f->name, mname);
        for (int i = 0; i < f->nparams; i++) {
            const ad_var *p = f->params[i];
            ad_buf_put(out, p->cname);
            if (p->shadowed) {
                if (ad_type_is_real(p->type))
                    ad_buf_printf(out, ", %s_d + k0_", p->cname);
                else
                    ad_buf_printf(out, ", %s_d + k0_, (size_t)nd", p->cname);
            }
            ad_buf_put(out, ", ");
        }
        if (ad_type_is_real(f->ret))
            ad_buf_printf(out, "%s_d + k0_, ", f->name);
        ad_buf_put(out, "w_);\n    }\n");
        if (f->ret->kind != TY_VOID)
            ad_buf_put(out, "    return r_;\n");
        ad_buf_put(out, "}\n\n");
        ad_buf_free(&sig);
        ad_buf_free(&body);
        return;
    }
    if (public_fn) {
        ad_buf sig = {0};
        ad_emit_signature(&sig, f, 'f');
        ad_buf_printf(out, "%s\n{\n", sig.p);
        ad_buf_free(&sig);
    } else if (vector) {
        ad_buf_printf(out, "static %s cr_ad_%s_tanv%s(", f->ret->spelling, f->name, mname);
        tanv_params(out, f);
        ad_buf_put(out, ")\n{\n");
    } else {
        ad_buf_printf(out, "static %s cr_ad_%s_tan%s(", f->ret->spelling, f->name, mname);
        bool first = true;
        for (int i = 0; i < f->nparams; i++) {
            const ad_var *p = f->params[i];
            if (!first)
                ad_buf_put(out, ", ");
            first = false;
            ad_emit_decl(out, p->type, p->cname);
            if (p->shadowed) {
                const char *T = ad_type_real_name(ad_type_scalar_of(p->type));
                if (ad_type_is_real(p->type))
                    ad_buf_printf(out, ", %s %s_d", T, p->cname);
                else if (p->type->elem->kind == TY_STRUCT)
                    ad_buf_printf(out, ", %s%s *%s_d", p->type->is_const ? "const " : "",
                                  p->type->elem->name, p->cname);
                else
                    ad_buf_printf(out, ", %s%s *%s_d", p->type->is_const ? "const " : "", T,
                                  p->cname);
            }
        }
        if (ad_type_is_real(f->ret)) {
            ad_buf_printf(out, "%s%s *%s_d", first ? "" : ", ", f->ret->spelling, f->name);
            first = false;
        }
        ad_buf_printf(out, "%s)\n{\n", first ? "void" : "");
    }
    tan_locals(&w, out);
    for (int i = 0; i < f->nparams; i++) {
        const ad_var *p = f->params[i];
        ad_buf_printf(out, "    (void)%s;\n", p->cname);
        /* a tangent no statement reads (an input of a function that returns an integer and
         * writes no real output) stays in the signature, which follows the declaration */
        if (!p->shadowed)
            continue;
        if (!vector)
            ad_buf_printf(out, "    (void)%s_d;\n", p->cname);
        else if (ad_type_is_real(p->type))
            ad_buf_printf(out, "    (void)%s_dv;\n", p->cname);
        else
            ad_buf_printf(out, "    (void)%s_d;\n    (void)%s_ds_;\n", p->cname, p->cname);
    }
    ad_buf_put(out, body.p ? body.p : "");
    if (f->ret->kind != TY_VOID)
        ad_buf_printf(out, "    return (%s)0;\n", f->ret->spelling);
    ad_buf_put(out, "}\n\n");
    ad_buf_free(&body);
    if (w.l.unsupported) {
        ad_error(f->loc,
                 "unsupported construct in the vector forward mode of '%s' (a pointer "
                 "argument other than p, p + k or &p[k])",
                 f->name);
        f->nerrors++;
    }
}
