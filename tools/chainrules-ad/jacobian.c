/*
 * The Jacobian entry (--jacobian f): f_jacfwd, the dense Jacobian of f's outputs with
 * respect to its active inputs by one forward sweep that carries every input direction (a
 * lane), with static lane sparsity.
 *
 * The directions are the identity seeds of the inputs, so the lanes a variable can depend on
 * are known before the code runs. A dataflow pass computes them: for each variable (for a
 * local or output array indexed only by constants, for each element) the union of the lanes
 * of every value assigned to it, iterated to a fixed point (flow-insensitive: sound through
 * loops, branches and the bodies of inlined helpers, which are statements of f). The code
 * then keeps, for each variable, one tangent per lane of its set, named with the lane
 * (x_d3 is the derivative of x with respect to input column 3): an operation on a value that
 * depends on 3 of 15 inputs costs 3 lane updates, in locals the compiler keeps in registers.
 * A lane outside a variable's set is the constant zero, folded where it is read.
 */
#include <stdlib.h>
#include <string.h>

#include "ad.h"
#include "lin.h"
#include "requests.h"

enum { JAC_MAX_COLS = 1024, JAC_MAX_ELEMS = 256, JAC_MAX_ENTRIES = 65536, JAC_MAX_LEN = 1 << 20 };

typedef enum jrole {
    JR_LOCAL,  /* a local variable */
    JR_SCALAR, /* a scalar parameter (an input column when in the mask) */
    JR_IN,     /* a pointer parameter read as an input: columns col0 .. col0 + len - 1 */
    JR_OUT,    /* a pointer parameter the function writes: rows row0 .. row0 + len - 1 */
    JR_OTHER   /* a parameter without derivative (its reads carry no lane) */
} jrole;

typedef struct jv {
    ad_var *v;
    jrole role;
    bool runtime;    /* indexed by a non-constant, or used whole (pointer arithmetic, calls) */
    bool elem;       /* one lane set per element (a 1-D array indexed only by constants) */
    bool read;       /* JR_OUT: read in the function */
    bool inout;      /* JR_OUT: its values on entry are inputs too (columns from col0) */
    long long maxix; /* 1 + the largest constant index read or written */
    long long len;   /* JR_IN, JR_OUT: the number of elements (inferred or --dims) */
    int col0, row0;  /* JR_IN, JR_SCALAR input: first column; JR_OUT: first row */
    int nsets;
    uint64_t *bits; /* nsets sets of nw words */
} jv;

typedef struct jac {
    ad_unit *u;
    ad_func *f;
    const ad_jac_dims *dims;
    jv *vars;
    int nvars;
    int ncols, nrows, nw;
    bool changed;
    int nerr;
    lin l;
    ad_buf *out;
} jac;

static void jerr(jac *J, ad_loc loc, const char *msg, const char *name)
{
    ad_error(loc, "the Jacobian mode of '%s' (--jacobian): %s%s%s", J->f->name, msg,
             name ? " " : "", name ? name : "");
    J->nerr++;
}

static jv *find(jac *J, const ad_var *v)
{
    for (int i = 0; v && i < J->nvars; i++)
        if (J->vars[i].v == v)
            return &J->vars[i];
    return NULL;
}

static bool const_index(const ad_expr *e, long long *out)
{
    while (e && e->kind == EX_CAST)
        e = e->a;
    if (!e || e->kind != EX_NUM || !e->text)
        return false;
    char *end = NULL;
    long long v = strtoll(e->text, &end, 0);
    while (end && (*end == 'u' || *end == 'U' || *end == 'l' || *end == 'L'))
        end++;
    if (!end || *end || v < 0)
        return false;
    *out = v;
    return true;
}

/* ---- Shapes: constant indices, lengths -------------------------------------------------- */

static void scan_expr(jac *J, const ad_expr *e)
{
    if (!e)
        return;
    if (e->kind == EX_INDEX && e->a->kind == EX_VAR) {
        jv *v = find(J, e->a->var);
        long long c;
        if (v) {
            if (const_index(e->b, &c)) {
                if (c + 1 > v->maxix)
                    v->maxix = c + 1;
            } else {
                v->runtime = true;
            }
        }
        scan_expr(J, e->b);
        return;
    }
    if (e->kind == EX_DEREF && e->a->kind == EX_VAR) {
        jv *v = find(J, e->a->var);
        if (v && v->maxix < 1)
            v->maxix = 1;
        return;
    }
    if (e->kind == EX_VAR) {
        jv *v = find(J, e->var);
        if (v && (e->var->type->kind == TY_ARRAY || e->var->type->kind == TY_PTR ||
                  e->var->type->kind == TY_STRUCT))
            v->runtime = true;
        return;
    }
    scan_expr(J, e->a);
    scan_expr(J, e->b);
    scan_expr(J, e->c);
    for (int i = 0; i < e->nargs; i++)
        scan_expr(J, e->args[i]);
}

static void scan_stmt(jac *J, const ad_stmt *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        scan_stmt(J, s->body[i]);
    scan_expr(J, s->e);
    for (int i = 0; i < s->ninits; i++)
        scan_expr(J, s->inits[i]);
    if (s->kind == ST_DECL && s->ninits) {
        jv *v = find(J, s->var);
        if (v && s->ninits > v->maxix)
            v->maxix = s->ninits;
    }
    scan_stmt(J, s->init);
    scan_expr(J, s->inc);
    scan_stmt(J, s->then);
    scan_stmt(J, s->els);
}

/* Marks the output parameters an expression reads (lvalue: e is assigned, only its indices
 * are read). */
static void scan_reads(jac *J, const ad_expr *e, bool lvalue)
{
    if (!e)
        return;
    if (!lvalue && ad_is_place(e)) {
        jv *v = find(J, ad_root(e));
        if (v)
            v->read = true;
    }
    if (e->kind == EX_INDEX) {
        scan_reads(J, e->a, lvalue);
        scan_reads(J, e->b, false);
        return;
    }
    if (lvalue && (e->kind == EX_MEMBER || e->kind == EX_DEREF)) {
        scan_reads(J, e->a, e->kind == EX_MEMBER);
        return;
    }
    scan_reads(J, e->a, false);
    scan_reads(J, e->b, false);
    scan_reads(J, e->c, false);
    for (int i = 0; i < e->nargs; i++)
        scan_reads(J, e->args[i], false);
}

static void scan_reads_stmt(jac *J, const ad_stmt *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        scan_reads_stmt(J, s->body[i]);
    if (s->kind == ST_EXPR && s->e->kind == EX_ASSIGN) {
        scan_reads(J, s->e->a, true);
        scan_reads(J, s->e->b, false);
    } else {
        scan_reads(J, s->e, false);
    }
    for (int i = 0; i < s->ninits; i++)
        scan_reads(J, s->inits[i], false);
    scan_reads_stmt(J, s->init);
    scan_reads(J, s->inc, false);
    scan_reads_stmt(J, s->then);
    scan_reads_stmt(J, s->els);
}

/* The length --dims gives: "f.name=N" for this function, else "name=N"; or -1. */
static long long dims_of(const jac *J, const char *name)
{
    const char *q = ad_fmt("%s.%s", J->f->name, name);
    for (int i = 0; J->dims && i < J->dims->n; i++)
        if (!strcmp(J->dims->names[i], q))
            return J->dims->lens[i];
    for (int i = 0; J->dims && i < J->dims->n; i++)
        if (!strcmp(J->dims->names[i], name))
            return J->dims->lens[i];
    return -1;
}

static bool named_wrt(const jac *J, const char *name)
{
    for (int i = 0; J->dims && i < J->dims->nwrt; i++)
        if (!strcmp(J->dims->wrt[i], name))
            return true;
    return false;
}

/* ---- Lane sets --------------------------------------------------------------------------- */

static uint64_t *set_of(jac *J, jv *v, long long idx)
{
    if (!v->bits)
        return NULL;
    if (v->elem) {
        if (idx < 0 || idx >= v->nsets)
            return NULL;
        return v->bits + (size_t)idx * (size_t)J->nw;
    }
    return v->bits;
}

static bool has_lane(const uint64_t *s, int j)
{
    return s && (s[j / 64] >> (j % 64) & 1);
}

/* The variable and set a place writes or reads (NULL: none). */
static uint64_t *place_set(jac *J, const ad_expr *e, jv **out_v, long long *out_idx)
{
    ad_var *root = ad_root(e);
    jv *v = find(J, root);
    *out_v = v;
    *out_idx = -1;
    if (!v)
        return NULL;
    long long c = -1;
    bool whole = e->kind == EX_VAR || (e->kind == EX_DEREF && e->a->kind == EX_VAR);
    if (whole)
        c = 0;
    else if (!(e->kind == EX_INDEX && e->a->kind == EX_VAR && const_index(e->b, &c)))
        c = -1;
    out_idx[0] = c;
    return set_of(J, v, v->elem ? c : 0);
}

/* ORs into acc the lanes the value of e depends on. */
static void lanes_expr(jac *J, const ad_expr *e, uint64_t *acc)
{
    if (!e || !e->active)
        return;
    if (ad_is_place(e)) {
        jv *v;
        long long idx;
        uint64_t *s = place_set(J, e, &v, &idx);
        if (v && v->role == JR_IN) {
            if (idx >= 0) {
                if (idx < v->len)
                    acc[(v->col0 + idx) / 64] |= (uint64_t)1 << ((v->col0 + idx) % 64);
            } else {
                for (long long i = 0; i < v->len; i++)
                    acc[(v->col0 + i) / 64] |= (uint64_t)1 << ((v->col0 + i) % 64);
            }
            return;
        }
        if (s)
            for (int w = 0; w < J->nw; w++)
                acc[w] |= s[w];
        return;
    }
    if (e->kind == EX_COND) {
        lanes_expr(J, e->b, acc);
        lanes_expr(J, e->c, acc);
        return;
    }
    lanes_expr(J, e->a, acc);
    lanes_expr(J, e->b, acc);
    for (int i = 0; i < e->nargs; i++)
        lanes_expr(J, e->args[i], acc);
}

/* A call of a function of the file that is not inlined, with active arguments: its
 * tangent kernel (the vector forward mode's) runs on the union of the arguments' lanes,
 * packed into dense directions (jac_call). The arguments it accepts: real scalars, and
 * pointers p, p + k or &p[k] to a 1-D array whose length is known; the union of the lanes
 * goes to the result and to every array the callee writes. */
typedef struct jcall {
    const ad_expr *c;
    uint64_t mask;
    jv *root[64];        /* pointer arguments: the array */
    const char *off[64]; /* its offset (text), or NULL */
    long long len[64];
    bool written[64];
} jcall;

static bool call_args(jac *J, const ad_expr *c, jcall *k)
{
    memset(k, 0, sizeof *k);
    k->c = c;
    k->mask = ad_call_mask(c);
    ad_func *g = c->callee;
    if (!k->mask)
        return true;
    if (g->prim) {
        jerr(J, c->loc, "a primitive with active arguments (use --vector):", g->name);
        return false;
    }
    for (int i = 0; i < c->nargs && i < 64; i++) {
        if (!(k->mask >> i & 1) || ad_type_is_real(g->params[i]->type))
            continue;
        const ad_type *pt = g->params[i]->type;
        const ad_expr *a = c->args[i];
        while (a->kind == EX_CAST)
            a = a->a;
        const ad_expr *base = a;
        if (a->kind == EX_BIN && a->a->kind == EX_VAR) {
            base = a->a;
            k->off[i] = ad_fmt("%s(%s)", !strcmp(a->op, "-") ? "-" : "", ad_expr_text(a->b));
        } else if (a->kind == EX_ADDR && a->a->kind == EX_INDEX && a->a->a->kind == EX_VAR) {
            base = a->a->a;
            k->off[i] = ad_fmt("(%s)", ad_expr_text(a->a->b));
        }
        jv *v = base->kind == EX_VAR ? find(J, base->var) : NULL;
        long long len = -1;
        if (v && (v->role == JR_IN || v->role == JR_OUT))
            len = v->len;
        else if (v && v->role == JR_LOCAL && v->v->type->kind == TY_ARRAY &&
                 ad_type_is_real(v->v->type->elem))
            len = v->v->type->len;
        if (pt->kind != TY_PTR || !ad_type_is_real(pt->elem) || len < 0) {
            jerr(J, c->loc,
                 "an argument that is not a real scalar or p, p + k, &p[k] of a 1-D real array "
                 "of known length, in the call of",
                 g->name);
            return false;
        }
        k->root[i] = v;
        k->len[i] = len;
        k->written[i] = i < 64 && g->writes_param[i] && v->role != JR_IN;
    }
    return true;
}

/* The union of the lanes of a call's active arguments. */
static void call_lanes(jac *J, const jcall *k, uint64_t *acc)
{
    const ad_expr *c = k->c;
    for (int i = 0; i < c->nargs && i < 64; i++) {
        if (!(k->mask >> i & 1))
            continue;
        jv *v = k->root[i];
        if (!v) {
            lanes_expr(J, c->args[i], acc);
        } else if (v->role == JR_IN) {
            for (long long e = 0; e < v->len; e++)
                acc[(v->col0 + e) / 64] |= (uint64_t)1 << ((v->col0 + e) % 64);
        } else if (v->bits) {
            for (int s = 0; s < v->nsets; s++)
                for (int w = 0; w < J->nw; w++)
                    acc[w] |= v->bits[(size_t)s * (size_t)J->nw + (size_t)w];
        }
    }
}

static void add_lanes(jac *J, uint64_t *dst, const uint64_t *acc)
{
    for (int w = 0; dst && w < J->nw; w++)
        if ((dst[w] | acc[w]) != dst[w]) {
            dst[w] |= acc[w];
            J->changed = true;
        }
}

static void flow_call(jac *J, const ad_expr *place, const ad_expr *c)
{
    jcall k;
    if (!call_args(J, c, &k) || !k.mask)
        return;
    uint64_t acc[JAC_MAX_COLS / 64] = {0};
    call_lanes(J, &k, acc);
    if (place && ad_type_is_real(place->type)) {
        jv *v;
        long long idx;
        add_lanes(J, place_set(J, place, &v, &idx), acc);
    }
    for (int i = 0; i < c->nargs && i < 64; i++)
        if (k.written[i] && k.root[i]->bits)
            for (int s = 0; s < k.root[i]->nsets; s++)
                add_lanes(J, k.root[i]->bits + (size_t)s * (size_t)J->nw, acc);
}

static void flow_assign(jac *J, const ad_expr *place, const ad_expr *value)
{
    if (value->kind == EX_CALL && value->callee) {
        flow_call(J, place, value);
        return;
    }
    jv *v;
    long long idx;
    uint64_t *dst = place_set(J, place, &v, &idx);
    if (!v || !dst || !ad_type_is_real(place->type))
        return;
    uint64_t acc[JAC_MAX_COLS / 64] = {0};
    lanes_expr(J, value, acc);
    for (int w = 0; w < J->nw; w++)
        if ((dst[w] | acc[w]) != dst[w]) {
            dst[w] |= acc[w];
            J->changed = true;
        }
}

static void flow_stmt(jac *J, ad_stmt *s)
{
    if (!s)
        return;
    switch (s->kind) {
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            flow_stmt(J, s->body[i]);
        return;
    case ST_DECL:
        if (s->e)
            flow_assign(J, ad_expr_var(s->var), s->e);
        for (int i = 0; i < s->ninits; i++)
            flow_assign(J, ad_expr_elem(s->var, i), s->inits[i]);
        return;
    case ST_EXPR:
        if (s->e->kind == EX_ASSIGN)
            flow_assign(J, s->e->a, s->e->b);
        else if (s->e->kind == EX_CALL && s->e->callee)
            flow_call(J, NULL, s->e);
        return;
    case ST_FOR:
        flow_stmt(J, s->init);
        if (s->inc && s->inc->kind == EX_ASSIGN)
            flow_assign(J, s->inc->a, s->inc->b);
        flow_stmt(J, s->then);
        return;
    case ST_IF:
        flow_stmt(J, s->then);
        flow_stmt(J, s->els);
        return;
    case ST_WHILE:
    case ST_DO:
        flow_stmt(J, s->then);
        return;
    default:
        return;
    }
}

/* ---- Tangent texts ----------------------------------------------------------------------- */

static const char *lane_sfx(int j)
{
    return ad_fmt("_d%d", j);
}

/* The tangent of e on lane j as an expression, or NULL when it is zero. */
static const char *tan_text(jac *J, const ad_expr *e, int j)
{
    if (!e->active)
        return NULL;
    if (ad_is_place(e)) {
        jv *v;
        long long idx;
        uint64_t *s = place_set(J, e, &v, &idx);
        if (!v)
            return NULL;
        if (v->role == JR_IN) {
            long long c = j - v->col0;
            if (c < 0 || c >= v->len)
                return NULL;
            if (idx >= 0)
                return idx == c ? "1" : NULL;
            ad_buf b = {0};
            ad_buf_put(&b, "(double)((");
            ad_emit_expr(&b, e->b);
            ad_buf_printf(&b, ") == %lld)", c);
            char *r = ad_strdup(b.p);
            ad_buf_free(&b);
            return r;
        }
        if (!has_lane(s, j))
            return NULL;
        return ad_shadow_text(e, lane_sfx(j));
    }
    if (e->kind == EX_CAST) {
        const char *t = tan_text(J, e->a, j);
        return t ? ad_fmt("((%s)%s)", e->type->spelling, t) : NULL;
    }
    if (e->kind == EX_COND) {
        uint64_t acc[JAC_MAX_COLS / 64] = {0};
        lanes_expr(J, e, acc);
        return has_lane(acc, j) ? ad_fmt("d%d_%d", e->tmp, j) : NULL;
    }
    if (!e->row)
        return NULL;
    const ad_expr *ops[4] = {e->a, e->b, NULL, NULL};
    int k = e->kind == EX_UN ? 1 : 2;
    if (e->kind == EX_CALL) {
        k = e->nargs < 4 ? e->nargs : 4;
        for (int i = 0; i < k; i++)
            ops[i] = e->args[i];
    }
    ad_buf b = {0};
    for (int i = 0; i < k; i++) {
        if (!ops[i]->active)
            continue;
        const char *t = tan_text(J, ops[i], j);
        if (!t)
            continue;
        if (b.len)
            ad_buf_put(&b, " + ");
        if (!strcmp(t, "1"))
            ad_buf_printf(&b, "t%d_D[%d]", e->tmp, i);
        else
            ad_buf_printf(&b, "t%d_D[%d] * %s", e->tmp, i, t);
    }
    if (!b.len)
        return NULL;
    char *r = ad_fmt("(%s)", b.p);
    ad_buf_free(&b);
    return r;
}

/* After lin_value(e): the tangents of e's active conditional expressions, computed in
 * their branches (d<n>_<lane>). */
static void prep_conds(jac *J, ad_expr *e)
{
    if (!e || !e->active || ad_is_place(e))
        return;
    if (e->kind != EX_COND) {
        prep_conds(J, e->a);
        prep_conds(J, e->b);
        for (int i = 0; i < e->nargs; i++)
            prep_conds(J, e->args[i]);
        return;
    }
    uint64_t acc[JAC_MAX_COLS / 64] = {0};
    lanes_expr(J, e, acc);
    const char *T = ad_type_real_name(e->type);
    const char *ind = J->l.ind;
    int n = e->tmp;
    for (int j = 0; j < J->ncols; j++)
        if (has_lane(acc, j))
            ad_buf_printf(J->out, "%s%s d%d_%d = 0;\n", ind, T, n, j);
    for (int br = 0; br < 2; br++) {
        ad_expr *x = br ? e->c : e->b;
        ad_buf_printf(J->out, br ? "%s} else {\n" : "%sif (c%d_) {\n", ind, n);
        J->l.ind = ad_fmt("%s    ", ind);
        lin_value(&J->l, x);
        prep_conds(J, x);
        for (int j = 0; j < J->ncols; j++) {
            if (!has_lane(acc, j))
                continue;
            const char *t = tan_text(J, x, j);
            if (t)
                ad_buf_printf(J->out, "%sd%d_%d = %s;\n", J->l.ind, n, j, t);
        }
        J->l.ind = ind;
    }
    ad_buf_printf(J->out, "%s}\n", ind);
}

/* ---- Statements ---------------------------------------------------------------------------- */

static void emit_flush(jac *J, const char *ind)
{
    for (int i = 0; i < J->nvars; i++) {
        jv *v = &J->vars[i];
        if (v->role != JR_OUT)
            continue;
        for (long long r = 0; r < v->len; r++)
            for (int j = 0; j < J->ncols; j++) {
                uint64_t *s = set_of(J, v, v->elem ? r : 0);
                long long at = (v->row0 + r) * (long long)J->ncols + j;
                if (has_lane(s, j))
                    ad_buf_printf(J->out, "%sJ[%lld] = %s%s[%lld];\n", ind, at, v->v->cname,
                                  lane_sfx(j), r);
                else
                    ad_buf_printf(J->out, "%sJ[%lld] = 0;\n", ind, at);
            }
    }
}

enum { JAC_BLOCK = 16, JAC_MAX_PACK = 1 << 16 };

/* A call with active arguments: for each block of at most JAC_BLOCK of the arguments'
 * lanes, the arguments' tangents packed into dense directions, the callee's tangent kernel,
 * and its results unpacked into the lanes of the place and of the arrays it writes (whose
 * values are restored between blocks). */
static void jac_call(jac *J, ad_expr *place, ad_expr *c, const char *ind)
{
    jcall k;
    if (!call_args(J, c, &k))
        return;
    jv *pv = NULL;
    long long pidx = -1;
    uint64_t *ps = place ? place_set(J, place, &pv, &pidx) : NULL;
    bool pact = ps && ad_type_is_real(place->type) && pv && pv->role != JR_IN &&
                (pv->role == JR_OUT || pv->v->active);
    uint64_t acc[JAC_MAX_COLS / 64] = {0};
    call_lanes(J, &k, acc);
    int *lanes = ad_alloc((size_t)J->ncols * sizeof *lanes + 1);
    int nl = 0;
    for (int j = 0; j < J->ncols; j++)
        if (has_lane(acc, j))
            lanes[nl++] = j;
    const char *ctext = ad_expr_text(c);
    if (!k.mask || nl == 0) {
        /* no lane reaches the call: the primal, and zero tangents for its result */
        if (place)
            ad_buf_printf(J->out, "%s%s = %s;\n", ind, ad_expr_text(place), ctext);
        else
            ad_buf_printf(J->out, "%s%s;\n", ind, ctext);
        for (int j = 0; pact && j < J->ncols; j++)
            if (has_lane(ps, j))
                ad_buf_printf(J->out, "%s%s = 0;\n", ind, ad_shadow_text(place, lane_sfx(j)));
        return;
    }
    ad_func *g = c->callee;
    const char *mn = ad_request(J->u, g, k.mask, REQ_TANV);
    int nb = (nl + JAC_BLOCK - 1) / JAC_BLOCK;
    int n = ++J->l.tmp;
    const char *ind2 = ad_fmt("%s    ", ind);
    const char *ind3 = ad_fmt("%s        ", ind);
    ad_buf_printf(J->out, "%s{\n", ind);
    ad_buf_printf(J->out,
                  "%s_Static_assert(CR_AD_VMAX >= %d, \"the Jacobian entry passes %d directions "
                  "to a tangent kernel: CR_AD_VMAX must be at least that\");\n",
                  ind2, nl < JAC_BLOCK ? nl : JAC_BLOCK, nl < JAC_BLOCK ? nl : JAC_BLOCK);
    bool real_ret = ad_type_is_real(g->ret);
    if (real_ret)
        ad_buf_printf(J->out, "%s%s rv%d_ = 0;\n", ind2, g->ret->spelling, n);
    /* the arrays the callee writes (active or not), saved as bytes for the blocks after the
     * first: sizes[i] is the text of their size, or NULL */
    const char *sizes[64] = {0};
    for (int i = 0; nb > 1 && i < c->nargs && i < 64 && i < g->nparams; i++) {
        if (g->params[i]->type->kind != TY_PTR || !g->writes_param[i])
            continue;
        const ad_var *bv = ad_root(c->args[i]);
        jv *v = find(J, bv);
        if (bv && bv->type->kind == TY_ARRAY)
            sizes[i] = ad_fmt("sizeof %s", bv->cname);
        else if (v && v->role == JR_OUT)
            sizes[i] = ad_fmt("%lld * sizeof *%s", v->len, bv->cname);
        if (!sizes[i]) {
            jerr(J, c->loc,
                 "a call with more than 16 lanes (run once per 16) that writes through a pointer "
                 "whose array's length is not known, in the call of",
                 g->name);
            return;
        }
        ad_buf_printf(J->out,
                      "%sunsigned char sv%d_%d[%s];\n%sfor (size_t b_ = 0; b_ < %s; b_++)\n%s    "
                      "sv%d_%d[b_] = ((const unsigned char *)%s)[b_];\n",
                      ind2, n, i, sizes[i], ind2, sizes[i], ind2, n, i, bv->cname);
    }
    for (int b = 0; b < nb; b++) {
        const int *L = lanes + b * JAC_BLOCK;
        int wb = nl - b * JAC_BLOCK < JAC_BLOCK ? nl - b * JAC_BLOCK : JAC_BLOCK;
        ad_buf_printf(J->out, "%s{\n", ind2);
        for (int i = 0; b > 0 && i < c->nargs && i < 64; i++)
            if (sizes[i])
                ad_buf_printf(
                    J->out,
                    "%sfor (size_t b_ = 0; b_ < %s; b_++)\n%s    ((unsigned char *)%s)[b_] "
                    "= sv%d_%d[b_];\n",
                    ind3, sizes[i], ind3, ad_root(c->args[i])->cname, n, i);
        ad_buf call = {0};
        ad_buf_printf(&call, "cr_ad_%s_tanv%s(", g->name, mn);
        for (int i = 0; i < c->nargs; i++) {
            ad_buf_printf(&call, "%s%s", i ? ", " : "", ad_expr_text(c->args[i]));
            if (i >= 64 || !(k.mask >> i & 1))
                continue;
            jv *v = k.root[i];
            if (!v) {
                /* a scalar: its lanes, from the rule rows' partials */
                const char *T = ad_type_real_name(g->params[i]->type);
                J->l.out = J->out;
                J->l.ind = ind3;
                lin_value(&J->l, c->args[i]);
                prep_conds(J, c->args[i]);
                ad_buf_printf(J->out, "%s%s s%d_%d[%d] = {", ind3, T, n, i, wb);
                for (int q = 0; q < wb; q++) {
                    const char *t = tan_text(J, c->args[i], L[q]);
                    ad_buf_printf(J->out, "%s%s", q ? ", " : "", t ? t : "0");
                }
                ad_buf_put(J->out, "};\n");
                ad_buf_printf(&call, ", s%d_%d", n, i);
                continue;
            }
            /* an array: element e in direction q at pa[e * wb + q] */
            if (k.len[i] > JAC_MAX_PACK / wb) {
                jerr(J, c->loc, "an array too long to pass to a tangent kernel, in the call of",
                     g->name);
                return;
            }
            const char *T =
                ad_type_real_name(v->role == JR_LOCAL ? v->v->type->elem : v->v->type->elem);
            ad_buf_printf(J->out, "%s%s pa%d_%d[%lld] = {0};\n", ind3, T, n, i, k.len[i] * wb);
            for (int q = 0; q < wb; q++) {
                if (v->role == JR_IN) {
                    long long e = L[q] - v->col0;
                    if (e >= 0 && e < v->len)
                        ad_buf_printf(J->out, "%spa%d_%d[%lld] = 1;\n", ind3, n, i, e * wb + q);
                } else if (v->bits && has_lane(v->bits, L[q])) {
                    ad_buf_printf(J->out,
                                  "%sfor (int e_ = 0; e_ < %lld; e_++)\n%s    pa%d_%d[e_ * %d + "
                                  "%d] = %s%s[e_];\n",
                                  ind3, k.len[i], ind3, n, i, wb, q, v->v->cname, lane_sfx(L[q]));
                }
            }
            ad_buf_printf(&call, ", pa%d_%d", n, i);
            if (k.off[i])
                ad_buf_printf(&call, " + %s * %d", k.off[i], wb);
            ad_buf_printf(&call, ", (size_t)%d", wb);
        }
        if (real_ret)
            ad_buf_printf(J->out, "%s%s r%d_[%d];\n", ind3, g->ret->spelling, n, wb);
        if (real_ret)
            ad_buf_printf(&call, "%sr%d_", c->nargs ? ", " : "", n);
        ad_buf_printf(&call, "%s%d)", (c->nargs || real_ret) ? ", " : "", wb);
        if (real_ret)
            ad_buf_printf(J->out, "%srv%d_ = %s;\n", ind3, n, call.p);
        else if (g->ret->kind != TY_VOID && place)
            ad_buf_printf(J->out, "%s%s = %s;\n", ind3, ad_expr_text(place), call.p);
        else
            ad_buf_printf(J->out, "%s%s;\n", ind3, call.p);
        ad_buf_free(&call);
        /* the results: the place's lanes and the written arrays' */
        for (int q = 0; pact && real_ret && q < wb; q++)
            if (has_lane(ps, L[q]))
                ad_buf_printf(J->out, "%s%s = r%d_[%d];\n", ind3,
                              ad_shadow_text(place, lane_sfx(L[q])), n, q);
        for (int i = 0; i < c->nargs && i < 64; i++) {
            jv *v = k.root[i];
            if (!k.written[i] || !v->bits)
                continue;
            for (int q = 0; q < wb; q++)
                if (has_lane(v->bits, L[q]))
                    ad_buf_printf(J->out,
                                  "%sfor (int e_ = 0; e_ < %lld; e_++)\n%s    %s%s[e_] = "
                                  "pa%d_%d[e_ * %d + %d];\n",
                                  ind3, k.len[i], ind3, v->v->cname, lane_sfx(L[q]), n, i, wb, q);
        }
        ad_buf_printf(J->out, "%s}\n", ind2);
    }
    /* the place: its value, and zero on its lanes the call's arguments do not reach */
    if (place && real_ret) {
        for (int j = 0; pact && j < J->ncols; j++)
            if (has_lane(ps, j) && !has_lane(acc, j))
                ad_buf_printf(J->out, "%s%s = 0;\n", ind2, ad_shadow_text(place, lane_sfx(j)));
        ad_buf_printf(J->out, "%s%s = rv%d_;\n", ind2, ad_expr_text(place), n);
    }
    ad_buf_printf(J->out, "%s}\n", ind);
}

static void jac_assign(jac *J, ad_expr *place, ad_expr *value, const char *ind)
{
    jv *v;
    long long idx;
    uint64_t *dst = NULL;
    if (!(value->kind == EX_CALL && value->callee))
        dst = place_set(J, place, &v, &idx);
    else
        place_set(J, place, &v, &idx);
    bool active = ad_type_is_real(place->type) && v && (v->role != JR_IN) &&
                  (v->role == JR_OUT || v->v->active);
    if (value->kind == EX_CALL && value->callee) {
        jac_call(J, place, value, ind);
        return;
    }
    if (!active || !dst) {
        ad_buf_printf(J->out, "%s%s = %s;\n", ind, ad_expr_text(place), ad_expr_text(value));
        return;
    }
    ad_buf_printf(J->out, "%s{\n", ind);
    const char *ind2 = ad_fmt("%s    ", ind);
    J->l.out = J->out;
    J->l.ind = ind2;
    const char *val = lin_value(&J->l, value);
    int n = ++J->l.tmp;
    const char *T = ad_type_real_name(place->type);
    ad_buf_printf(J->out, "%sconst %s v%d_ = %s;\n", ind2, T, n, val);
    prep_conds(J, value);
    const char **t = ad_alloc((size_t)J->ncols * sizeof *t);
    for (int j = 0; j < J->ncols; j++) {
        if (!has_lane(dst, j))
            continue;
        t[j] = tan_text(J, value, j);
        if (t[j])
            ad_buf_printf(J->out, "%sconst %s e%d_%d = %s;\n", ind2, T, n, j, t[j]);
    }
    for (int j = 0; j < J->ncols; j++) {
        if (!has_lane(dst, j))
            continue;
        const char *d = ad_shadow_text(place, lane_sfx(j));
        if (t[j])
            ad_buf_printf(J->out, "%s%s = e%d_%d;\n", ind2, d, n, j);
        else
            ad_buf_printf(J->out, "%s%s = 0;\n", ind2, d);
    }
    ad_buf_printf(J->out, "%s%s = v%d_;\n%s}\n", ind2, ad_expr_text(place), n, ind);
}

static void jac_stmt(jac *J, ad_stmt *s, const char *ind)
{
    const char *ind2 = ad_fmt("%s    ", ind);
    switch (s->kind) {
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            jac_stmt(J, s->body[i], ind);
        return;
    case ST_DECL:
        if (s->e)
            jac_assign(J, ad_expr_var(s->var), s->e, ind);
        for (int i = 0; i < s->ninits; i++)
            jac_assign(J, ad_expr_elem(s->var, i), s->inits[i], ind);
        /* the elements the list leaves out are zero each time the declaration runs (in a
         * loop's body the local may hold the last iteration's values) */
        if (s->inits && s->var->loop_depth > 0 && s->var->type->kind == TY_ARRAY)
            for (long long i = s->ninits; i < s->var->type->len; i++)
                jac_assign(J, ad_expr_elem(s->var, i), ad_expr_zero(ad_expr_elem(s->var, 0)), ind);
        return;
    case ST_EXPR:
        if (s->e->kind == EX_ASSIGN)
            jac_assign(J, s->e->a, s->e->b, ind);
        else if (s->e->kind == EX_CALL && s->e->callee)
            jac_call(J, NULL, s->e, ind);
        else
            ad_buf_printf(J->out, "%s%s;\n", ind, ad_expr_text(s->e));
        return;
    case ST_RETURN:
        if (s->e && ad_type_is_real(J->f->ret)) {
            ad_buf_printf(J->out, "%s{\n", ind);
            J->l.out = J->out;
            J->l.ind = ind2;
            const char *v = lin_value(&J->l, s->e);
            int n = ++J->l.tmp;
            ad_buf_printf(J->out, "%sconst %s v%d_ = %s;\n", ind2, J->f->ret->spelling, n, v);
            prep_conds(J, s->e);
            long long row = (long long)(J->nrows - 1) * J->ncols;
            for (int j = 0; j < J->ncols; j++) {
                const char *t = tan_text(J, s->e, j);
                ad_buf_printf(J->out, "%sJ[%lld] = %s;\n", ind2, row + j, t ? t : "0");
            }
            emit_flush(J, ind2);
            ad_buf_printf(J->out, "%sreturn v%d_;\n%s}\n", ind2, n, ind);
        } else {
            ad_buf_printf(J->out, "%s{\n", ind);
            emit_flush(J, ind2);
            if (s->e)
                ad_buf_printf(J->out, "%sreturn %s;\n", ind2, ad_expr_text(s->e));
            else
                ad_buf_printf(J->out, "%sreturn;\n", ind2);
            ad_buf_printf(J->out, "%s}\n", ind);
        }
        return;
    case ST_BREAK:
        ad_buf_printf(J->out, "%sbreak;\n", ind);
        return;
    case ST_CONTINUE:
        ad_buf_printf(J->out, "%scontinue;\n", ind);
        return;
    case ST_IF:
        ad_buf_printf(J->out, "%sif (%s) {\n", ind, ad_expr_text(s->e));
        jac_stmt(J, s->then, ind2);
        if (s->els) {
            ad_buf_printf(J->out, "%s} else {\n", ind);
            jac_stmt(J, s->els, ind2);
        }
        ad_buf_printf(J->out, "%s}\n", ind);
        return;
    case ST_FOR:
        if (s->init)
            jac_stmt(J, s->init, ind);
        if (s->inc && s->inc->kind == EX_ASSIGN && s->inc->a->active) {
            jerr(J, s->loc, "a floating-point loop increment (count with an integer)", NULL);
            return;
        }
        ad_buf_printf(J->out, "%sfor (; %s; %s) {\n", ind, s->e ? ad_expr_text(s->e) : "",
                      s->inc ? ad_expr_text(s->inc) : "");
        jac_stmt(J, s->then, ind2);
        ad_buf_printf(J->out, "%s}\n", ind);
        return;
    case ST_WHILE:
        ad_buf_printf(J->out, "%swhile (%s) {\n", ind, ad_expr_text(s->e));
        jac_stmt(J, s->then, ind2);
        ad_buf_printf(J->out, "%s}\n", ind);
        return;
    case ST_DO:
        ad_buf_printf(J->out, "%sdo {\n", ind);
        jac_stmt(J, s->then, ind2);
        ad_buf_printf(J->out, "%s} while (%s);\n", ind, ad_expr_text(s->e));
        return;
    case ST_NULL:
        return;
    }
}

/* ---- The function ------------------------------------------------------------------------ */

/* Roles, lengths, columns and rows; nonzero on error (reported). */
static int shape(jac *J, uint64_t mask)
{
    ad_func *f = J->f;
    J->vars = ad_alloc((size_t)(f->nparams + f->nlocals + 1) * sizeof *J->vars);
    for (int i = 0; i < f->nparams; i++) {
        ad_var *p = f->params[i];
        jv *v = &J->vars[J->nvars++];
        v->v = p;
        v->role = JR_OTHER;
        v->col0 = -1;
        if (!ad_type_has_real(p->type))
            continue;
        bool in_mask = i < 64 && (mask >> i & 1);
        if (ad_type_is_real(p->type)) {
            v->role = JR_SCALAR;
        } else if (p->type->kind == TY_PTR && ad_type_is_real(p->type->elem)) {
            /* every non-const pointer is an output (rows), written or not */
            if (p->output || !p->type->is_const)
                v->role = JR_OUT;
            else if (in_mask)
                v->role = JR_IN;
        } else if (in_mask || p->output) {
            jerr(J, p->loc, "only real scalars and pointers to real arrays are supported; not",
                 ad_fmt("'%s'", p->name));
        }
    }
    for (int i = 0; i < f->nlocals; i++) {
        jv *v = &J->vars[J->nvars++];
        v->v = f->locals[i];
        v->role = JR_LOCAL;
        v->col0 = -1;
    }
    scan_stmt(J, f->body);
    scan_reads_stmt(J, f->body);
    int col = 0, row = 0;
    for (int i = 0; i < f->nparams; i++) {
        jv *v = &J->vars[i];
        ad_var *p = v->v;
        bool in_mask = i < 64 && (mask >> i & 1);
        if (v->role == JR_SCALAR && in_mask) {
            v->col0 = col++;
        } else if (v->role == JR_IN || v->role == JR_OUT) {
            long long d = dims_of(J, p->name);
            if (d >= 0) {
                if (v->maxix > d) {
                    jerr(J, p->loc, "a constant index past the length --dims gives to",
                         ad_fmt("'%s'", p->name));
                    return 1;
                }
                v->len = d;
            } else if (v->runtime) {
                jerr(J, p->loc,
                     "the length of an array indexed by a variable is needed: give it with "
                     "--dims name=N for",
                     ad_fmt("'%s'", p->name));
                return 1;
            } else {
                v->len = v->maxix;
            }
            if (v->len > JAC_MAX_LEN) {
                jerr(J, p->loc, "an array longer than 1048576 elements:", ad_fmt("'%s'", p->name));
                return 1;
            }
            /* an output is an input too when --wrt names it, or (without --wrt) when the
             * function reads it */
            if (v->role == JR_OUT && in_mask &&
                (J->dims && J->dims->nwrt ? named_wrt(J, p->name) : v->read))
                v->inout = true;
            if (v->role == JR_IN || v->inout) {
                v->col0 = col;
                col += (int)v->len;
            }
            if (v->role == JR_OUT) {
                v->row0 = row;
                row += (int)v->len;
            }
        }
        if (col > JAC_MAX_COLS) {
            jerr(J, f->loc, "more than 1024 input columns", NULL);
            return 1;
        }
    }
    if (ad_type_is_real(f->ret))
        row++;
    J->ncols = col;
    J->nrows = row;
    J->nw = (col + 63) / 64;
    if (col == 0 || row == 0) {
        jerr(J, f->loc, "no active input or no output (nothing to differentiate)", NULL);
        return 1;
    }
    if ((long long)col * row > JAC_MAX_ENTRIES) {
        jerr(J, f->loc, "more than 65536 Jacobian entries", NULL);
        return 1;
    }
    for (int i = 0; i < J->nvars; i++) {
        jv *v = &J->vars[i];
        const ad_type *t = v->v->type;
        int nsets = 0;
        if (v->role == JR_OUT) {
            v->elem = !v->runtime && v->len <= JAC_MAX_ELEMS;
            nsets = v->elem ? (int)v->len : 1;
        } else if (v->role == JR_SCALAR) {
            nsets = 1;
        } else if (v->role == JR_LOCAL && ad_type_has_real(t)) {
            if (t->kind == TY_PTR) {
                if (v->v->active) {
                    jerr(J, v->v->loc, "a local pointer to active data:", v->v->name);
                    return 1;
                }
                continue;
            }
            v->elem = t->kind == TY_ARRAY && ad_type_is_real(t->elem) && !v->runtime &&
                      t->len <= JAC_MAX_ELEMS;
            nsets = v->elem ? (int)t->len : 1;
        }
        if (nsets < 1)
            nsets = 1;
        if (v->role == JR_IN || v->role == JR_OTHER)
            continue;
        v->nsets = nsets;
        v->bits = ad_alloc((size_t)nsets * (size_t)J->nw * sizeof *v->bits); /* zeroed */
        if (v->role == JR_SCALAR && v->col0 >= 0)
            v->bits[v->col0 / 64] |= (uint64_t)1 << (v->col0 % 64);
        for (long long e = 0; v->inout && e < v->len; e++) {
            uint64_t *s = set_of(J, v, v->elem ? e : 0);
            s[(v->col0 + e) / 64] |= (uint64_t)1 << ((v->col0 + e) % 64);
        }
    }
    return 0;
}

/* The union of a variable's sets. */
static void union_sets(const jac *J, const jv *v, uint64_t *acc)
{
    for (int s = 0; s < v->nsets; s++)
        for (int w = 0; w < J->nw; w++)
            acc[w] |= v->bits[(size_t)s * (size_t)J->nw + (size_t)w];
}

static void emit_layout(jac *J, ad_buf *b)
{
    ad_func *f = J->f;
    ad_buf_printf(b, "/* %s_jacfwd: J is the %d x %d Jacobian, row-major. Rows:", f->name, J->nrows,
                  J->ncols);
    bool first = true;
    for (int i = 0; i < f->nparams; i++) {
        jv *v = &J->vars[i];
        if (v->role == JR_OUT) {
            ad_buf_printf(b, "%s %s[0..%lld]", first ? "" : ",", v->v->name, v->len - 1);
            first = false;
        }
    }
    if (ad_type_is_real(f->ret))
        ad_buf_printf(b, "%s the return value", first ? "" : ",");
    ad_buf_put(b, ". Columns:");
    first = true;
    for (int i = 0; i < f->nparams; i++) {
        jv *v = &J->vars[i];
        if (v->role == JR_IN || v->inout)
            ad_buf_printf(b, "%s %s[0..%lld]%s", first ? "" : ",", v->v->name, v->len - 1,
                          v->inout ? " on entry" : "");
        else if (v->role == JR_SCALAR && v->col0 >= 0)
            ad_buf_printf(b, "%s %s", first ? "" : ",", v->v->name);
        else
            continue;
        first = false;
    }
    ad_buf_put(b, ". */\n");
}

void ad_emit_jacobian_signature(ad_buf *b, const ad_func *f)
{
    ad_buf_printf(b, "%s %s_jacfwd(", f->ret->spelling, f->name);
    for (int i = 0; i < f->nparams; i++) {
        ad_emit_param(b, f->params[i]->type, f->params[i]->cname);
        ad_buf_put(b, ", ");
    }
    ad_buf_put(b, "double *restrict J)");
}

int ad_emit_jacobian(ad_buf *out, ad_unit *u, ad_func *f, uint64_t mask, const ad_jac_dims *dims)
{
    jac J = {.u = u, .f = f, .dims = dims};
    if (f->prim) {
        jerr(&J, f->loc, "a primitive has no body to differentiate", NULL);
        return 1;
    }
    if (shape(&J, mask))
        return 1;
    /* the lane sets: a fixed point of the union over the assignments */
    do {
        J.changed = false;
        flow_stmt(&J, f->body);
    } while (J.changed && !J.nerr);
    if (J.nerr)
        return 1;
    ad_buf body = {0};
    J.out = &body;
    J.l.vector = false;
    jac_stmt(&J, f->body, "    ");
    if (J.nerr) {
        ad_buf_free(&body);
        return 1;
    }
    emit_layout(&J, out);
    ad_emit_jacobian_signature(out, f);
    ad_buf_put(out, "\n{\n");
    /* the locals and their lanes */
    for (int i = 0; i < f->nlocals; i++) {
        ad_var *v = f->locals[i];
        bool agg = v->type->kind == TY_ARRAY || v->type->kind == TY_STRUCT;
        ad_buf_put(out, "    ");
        ad_emit_local(out, v->type, v->cname);
        ad_buf_printf(out, "%s;\n    (void)%s;\n", agg ? " = {0}" : " = 0", v->cname);
    }
    for (int i = 0; i < J.nvars; i++) {
        jv *v = &J.vars[i];
        if (!v->bits)
            continue;
        uint64_t acc[JAC_MAX_COLS / 64] = {0};
        union_sets(&J, v, acc);
        for (int j = 0; j < J.ncols; j++) {
            if (!has_lane(acc, j))
                continue;
            const char *name = ad_fmt("%s%s", v->v->cname, lane_sfx(j));
            ad_buf_put(out, "    ");
            if (v->role == JR_OUT) {
                ad_buf_printf(out, "%s %s[%lld] = {0};\n", ad_type_real_name(v->v->type->elem),
                              name, v->len);
            } else if (v->role == JR_SCALAR) {
                ad_buf_printf(out, "%s %s = %s;\n", ad_type_real_name(v->v->type), name,
                              j == v->col0 ? "1" : "0");
            } else {
                bool agg = v->v->type->kind == TY_ARRAY || v->v->type->kind == TY_STRUCT;
                ad_emit_local(out, v->v->type, name);
                ad_buf_put(out, agg ? " = {0};\n" : " = 0;\n");
            }
            ad_buf_printf(out, "    (void)%s;\n", name);
        }
        /* the seeds of an output's values on entry */
        for (long long e = 0; v->inout && e < v->len; e++)
            ad_buf_printf(out, "    %s%s[%lld] = 1;\n", v->v->cname, lane_sfx(v->col0 + (int)e), e);
    }
    for (int i = 0; i < f->nparams; i++)
        ad_buf_printf(out, "    (void)%s;\n", f->params[i]->cname);
    ad_buf_put(out, body.p ? body.p : "");
    ad_buf_free(&body);
    J.out = out;
    emit_flush(&J, "    ");
    if (ad_type_is_real(f->ret)) {
        long long row = (long long)(J.nrows - 1) * J.ncols;
        for (int j = 0; j < J.ncols; j++)
            ad_buf_printf(out, "    J[%lld] = 0;\n", row + j);
    }
    if (f->ret->kind != TY_VOID)
        ad_buf_printf(out, "    return (%s)0;\n", f->ret->spelling);
    ad_buf_put(out, "}\n\n");
    return 0;
}
