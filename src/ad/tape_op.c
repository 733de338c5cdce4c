/*
 * Operations whose steps are the caller's (tape.h, cr_tape_op_record): a K_ARRAY record whose
 * own reverse step (cr__anode_ops.pull) gathers the outputs' cotangents into one dense buffer,
 * calls the operation's reverse step, and adds what it gives to the inputs' adjoints and
 * shadows. Unlike a pullback it runs whatever the cotangents: the operations it is made for
 * (the adjoint of a message-passing call) have effects other processes wait for.
 */
#include <string.h>

#include "../rules/array_rule_impl.h"
#include "tape_impl.h"

/* The record: the node the sweeps see first, then the operation's layout. */
typedef struct cnode {
    cr__anode base;
    const cr_tape_op *op;
    void *env;
    uint32_t nin, nout;
    uint32_t *in;    /* per input: a scalar variable, an array slot | CR__ASLOT_BIT, or
                        CR_VAR_CONST */
    uint32_t *out;   /* per output: its position among the record's scalar variables, or
                        its array slot | CR__ASLOT_BIT */
    size_t *in_len;  /* elements per input */
    size_t *out_len; /* elements per output */
    size_t nin_el;   /* their sums */
    size_t nout_el;
} cnode;

static cr_status step_failed(cr_tape *t, const cnode *nd, const char *what, cr_status st)
{
    if (t->status != CR_OK)
        return t->status;
    const char *msg = cr_ctx_errmsg(t->ctx);
    return cr__tape_fail(t, st, "%s: %s failed: %s", nd->op->name, what,
                         msg[0] != '\0' ? msg : cr_status_str(st));
}

/* A cotangent or tangent tangent `tg` of an array variable of value v, added into the n
 * doubles at dst (row-major). */
static cr_status tangent_into(cr_tape *t, const char *who, cr_tangent tg, const cr_array *v,
                              double *dst, size_t n)
{
    if (cr__tis_zero(tg))
        return CR_OK;
    const cr_array *ta = NULL;
    cr_status st = cr__tan_array(t->arena, who, tg, v->ndim, v->shape, CR_DT_F64, &ta);
    if (st != CR_OK || ta == NULL)
        return st;
    const double *s = ta->data;
    for (size_t e = 0; e < n; e++)
        dst[e] += s[e];
    return CR_OK;
}

/* A dense row-major f64 descriptor of v's shape over data (the arena's). */
static cr_status dense_over(cr_tape *t, const cr_array *v, double *data, cr_array **out)
{
    cr_array *a = cr_arena_alloc(t->arena, sizeof *a, _Alignof(cr_array));
    if (a == NULL)
        return CR__ALLOC_STATUS(t->arena);
    memset(a, 0, sizeof *a);
    a->ndim = v->ndim;
    for (size_t d = 0; d < v->ndim; d++)
        a->shape[d] = v->shape[d];
    cr__row_major(v->ndim, v->shape, a->strides);
    a->data = data;
    a->dtype = CR_DT_F64;
    a->structure = CR_MAT_DENSE;
    a->flags = CR_ARRAY_WRITABLE;
    *out = a;
    return CR_OK;
}

static double *zeroed(cr_tape *t, size_t n)
{
    double *b = cr_arena_alloc(t->arena, (n ? n : 1) * sizeof *b, _Alignof(double));
    if (b != NULL)
        memset(b, 0, (n ? n : 1) * sizeof *b);
    return b;
}

/* The reverse step (cr__anode_ops.pull): g holds the record's scalar results' adjoints. */
static cr_status custom_pull(cr_tape *t, const cr__anode *an, const double *g, double *adj)
{
    const cnode *nd = (const cnode *)(const void *)an;
    double *ybar = zeroed(t, nd->nout_el), *xbar = zeroed(t, nd->nin_el);
    if (ybar == NULL || xbar == NULL)
        return step_failed(t, nd, "the reverse step", CR__ALLOC_STATUS(t->arena));
    size_t off = 0;
    cr_status st = CR_OK;
    for (uint32_t k = 0; k < nd->nout && st == CR_OK; k++) {
        uint32_t c = nd->out[k];
        if (c & CR__ASLOT_BIT) {
            cr__aslot *s = &t->avars.slots[c & ~CR__ASLOT_BIT];
            st = tangent_into(t, nd->op->name, s->acc, s->val, ybar + off, nd->out_len[k]);
            s->acc = cr__tzero(); /* consumed: its record made it */
        } else {
            ybar[off] = g[c];
        }
        off += nd->out_len[k];
    }
    if (st != CR_OK)
        return step_failed(t, nd, "the reverse step", st);
    if ((st = nd->op->reverse(t, nd->env, ybar, xbar)) != CR_OK)
        return step_failed(t, nd, "the reverse step", st);
    off = 0;
    for (uint32_t j = 0; j < nd->nin && st == CR_OK; j++) {
        uint32_t c = nd->in[j];
        if (c == CR_VAR_CONST) {
        } else if (c & CR__ASLOT_BIT) {
            cr__aslot *s = &t->avars.slots[c & ~CR__ASLOT_BIT];
            cr_array *a;
            st = dense_over(t, s->val, xbar + off, &a);
            if (st == CR_OK)
                st = cr__shadow_accum(t->arena, s, cr__tarray(a));
        } else {
            adj[c] += xbar[off];
        }
        off += nd->in_len[j];
    }
    return st == CR_OK ? CR_OK : step_failed(t, nd, "the reverse step", st);
}

static cr_status custom_forward(cr_tape *t, const cr__anode *an, double *tan, size_t k, size_t i)
{
    const cnode *nd = (const cnode *)(const void *)an;
    if (nd->op->forward == NULL)
        return cr__tape_fail(t, CR_EUNIMPL, "%s: no forward step (forward sweeps need one)",
                             nd->op->name);
    for (size_t d = 0; d < k; d++) {
        double *xdot = zeroed(t, nd->nin_el), *ydot = zeroed(t, nd->nout_el);
        if (xdot == NULL || ydot == NULL)
            return step_failed(t, nd, "the forward step", CR__ALLOC_STATUS(t->arena));
        size_t off = 0;
        cr_status st = CR_OK;
        for (uint32_t j = 0; j < nd->nin && st == CR_OK; j++) {
            uint32_t c = nd->in[j];
            if (c == CR_VAR_CONST) {
            } else if (c & CR__ASLOT_BIT) {
                uint32_t s = c & ~CR__ASLOT_BIT;
                cr_tangent *tp = cr__asweep_slot(t, s, d, false);
                if (tp != NULL)
                    st = tangent_into(t, nd->op->name, *tp, t->avars.slots[s].val, xdot + off,
                                      nd->in_len[j]);
            } else {
                xdot[off] = tan[(size_t)c * k + d];
            }
            off += nd->in_len[j];
        }
        if (st == CR_OK)
            st = nd->op->forward(t, nd->env, xdot, ydot);
        off = 0;
        for (uint32_t o = 0; o < nd->nout && st == CR_OK; o++) {
            uint32_t c = nd->out[o];
            if (c & CR__ASLOT_BIT) {
                uint32_t s = c & ~CR__ASLOT_BIT;
                cr_tangent *tp = cr__asweep_slot(t, s, d, false);
                cr_array *a;
                if (tp == NULL)
                    return cr__tape_fail(t, CR_EINVAL,
                                         "tape: %s: forward sweep without array tangents",
                                         nd->op->name);
                st = dense_over(t, t->avars.slots[s].val, ydot + off, &a);
                if (st == CR_OK)
                    st = cr__tis_zero(*tp) ? (*tp = cr__tarray(a), CR_OK)
                                           : cr_tangent_add(t->arena, *tp, cr__tarray(a), tp);
            } else {
                tan[(i + c) * k + d] += ydot[off];
            }
            off += nd->out_len[o];
        }
        if (st != CR_OK)
            return step_failed(t, nd, "the forward step", st);
    }
    return CR_OK;
}

/* An operation with its own steps has no second-order step: refused when recorded on a
 * second-order tape, so reaching this is a corrupt record. */
static cr_status custom_pull2(cr_tape *t, const cr__anode *an, size_t i, double *adj, double *adjd,
                              const double *tan, size_t k)
{
    (void)i;
    (void)adj;
    (void)adjd;
    (void)tan;
    (void)k;
    return cr__tape_fail(t, CR_EUNIMPL, "%s: no second-order step", an->fname);
}

/* The steps of an operation's record (cr__anode_ops). */
static const cr__anode_ops k_custom_ops = {custom_pull, custom_forward, custom_pull2,
                                           NULL,        false,          false};

static void set_nan(cr_targ *out, size_t n)
{
    for (size_t k = 0; out != NULL && k < n; k++)
        out[k] = cr__targ_var(cr_const((double)NAN));
}

/* The element count of an f64 array value a (argument j of `what`), or a failure. */
static cr_status f64_array(cr_tape *t, const char *name, const char *what, size_t j,
                           const cr_array *a, size_t *n)
{
    if (a == NULL || a->dtype != CR_DT_F64 || a->structure != CR_MAT_DENSE)
        return cr__tape_fail(t, CR_EINVAL, "%s: %s %zu is not a dense f64 array", name, what, j);
    *n = cr_array_numel(a);
    if (*n > 0 && a->data == NULL)
        return cr__tape_fail(t, CR_EINVAL, "%s: %s %zu has %zu elements and NULL data", name, what,
                             j, *n);
    return CR_OK;
}

cr_status cr_tape_op_record(cr_tape *t, const cr_tape_op *op, void *env, const cr_targ *in,
                            size_t nin, const cr_targ *vals, cr_targ *out, size_t nout)
{
    set_nan(out, nout);
    if ((t = cr__tape_or_current(t)) == NULL)
        return CR_EMISUSE;
    if (t->status != CR_OK)
        return t->status;
    if (op == NULL || op->reverse == NULL || (nin > 0 && in == NULL) ||
        (nout > 0 && (vals == NULL || out == NULL)))
        return cr__tape_fail(t, CR_EINVAL,
                             "cr_tape_op_record: NULL operation, reverse step, inputs or outputs");
    const char *name = op->name != NULL ? op->name : "operation";
    if ((t->flags & (CR_TAPE_SECOND_ORDER | CR__TAPE_SO_CHECK)) || t->pre > 1)
        return cr__tape_fail(t, CR_EUNIMPL,
                             "%s: an operation with its own steps is not recorded on a "
                             "second-order tape or in a prepared gradient",
                             name);
    if (nin >= CR_TAPE_MAX_VARS || nout >= CR_TAPE_MAX_VARS ||
        t->nvars + nout + 1 >= CR_TAPE_MAX_VARS)
        return cr__tape_fail(t, CR_EOVERFLOW, "%s: more than %zu variables in one recording", name,
                             CR_TAPE_MAX_VARS - 1);
    cnode *nd = cr_arena_alloc(t->arena, sizeof *nd, _Alignof(cnode));
    uint32_t *codes =
        cr_arena_alloc(t->arena, (nin + nout + 1) * sizeof *codes, _Alignof(uint32_t));
    size_t *lens = cr_arena_alloc(t->arena, (nin + nout + 1) * sizeof *lens, _Alignof(size_t));
    if (nd == NULL || codes == NULL || lens == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), name);
    size_t nin_el = 0, nout_el = 0;
    for (size_t j = 0; j < nin; j++) {
        const cr_targ *a = &in[j];
        if (a->kind == CR_TARG_VAR) {
            cr_var v = a->u.s;
            if (v.idx != CR_VAR_CONST && !cr__var_ours(t, v))
                return cr__tape_fail(t, CR_ETAPE,
                                     "%s: input %zu (variable %u) belongs to another tape, or to "
                                     "this tape before its last reset",
                                     name, j, (unsigned)v.idx);
            codes[j] = v.idx;
            lens[j] = 1;
        } else if (a->kind == CR_TARG_ARR) {
            cr_avar v = a->u.a;
            if (f64_array(t, name, "input", j, v.a, &lens[j]) != CR_OK)
                return t->status;
            if (v.idx != CR_VAR_CONST && (v.tape != t->id || v.idx >= t->avars.n))
                return cr__tape_fail(t, CR_ETAPE,
                                     "%s: input %zu (array variable %u) belongs to another tape, "
                                     "or to this tape before its last reset",
                                     name, j, (unsigned)v.idx);
            codes[j] = v.idx == CR_VAR_CONST ? CR_VAR_CONST : (v.idx | CR__ASLOT_BIT);
        } else {
            return cr__tape_fail(t, CR_EINVAL, "%s: input %zu is neither a scalar nor an array",
                                 name, j);
        }
        if (lens[j] > SIZE_MAX / sizeof(double) - nin_el)
            return cr__tape_fail(t, CR_EOVERFLOW, "%s: inputs too large", name);
        nin_el += lens[j];
    }
    for (size_t k = 0; k < nout; k++) {
        if (vals[k].kind == CR_TARG_ARR) {
            if (f64_array(t, name, "output", k, vals[k].u.a.a, &lens[nin + k]) != CR_OK)
                return t->status;
        } else if (vals[k].kind == CR_TARG_VAR) {
            lens[nin + k] = 1;
        } else {
            return cr__tape_fail(t, CR_EINVAL, "%s: output %zu is neither a scalar nor an array",
                                 name, k);
        }
        if (lens[nin + k] > SIZE_MAX / sizeof(double) - nout_el)
            return cr__tape_fail(t, CR_EOVERFLOW, "%s: outputs too large", name);
        nout_el += lens[nin + k];
    }
    size_t need = 2 + t->pre;
    if ((size_t)(t->lim - t->cur) < need && cr__tape_grow(t, need) != CR_OK)
        return t->status;
    /* The outputs: scalar variables numbered from nvars, array variables in new slots. */
    uint32_t slot0 = t->avars.n, ns = 0;
    for (size_t k = 0; k < nout; k++) {
        if (vals[k].kind == CR_TARG_ARR) {
            uint32_t idx;
            if (cr__array_slot(t, vals[k].u.a.a, &idx) != CR_OK) {
                t->avars.n = slot0;
                set_nan(out, nout);
                return t->status;
            }
            cr_avar r = cr_av_const(vals[k].u.a.a);
            r.idx = idx;
            r.tape = t->id;
            out[k] = cr__targ_arr(r);
            codes[nin + k] = idx | CR__ASLOT_BIT;
        } else {
            cr_var r = cr_const(vals[k].u.s.v);
            r.idx = t->nvars + ns;
            r.tape = t->id;
            out[k] = cr__targ_var(r);
            codes[nin + k] = ns++;
        }
    }
    memset(&nd->base, 0, sizeof nd->base);
    nd->base.pb.name = name;
    nd->base.fname = name;
    nd->base.out = CR_VAR_CONST;
    nd->base.ops = &k_custom_ops;
    nd->base.ext = NULL;
    nd->op = op;
    nd->env = env;
    nd->nin = (uint32_t)nin;
    nd->nout = (uint32_t)nout;
    nd->in = codes;
    nd->out = codes + nin;
    nd->in_len = lens;
    nd->out_len = lens + nin;
    nd->nin_el = nin_el;
    nd->nout_el = nout_el;
    uint64_t h = hdr_make(K_ARRAY, ns, 0);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    (w++)->cp = &nd->base;
    (w++)->u = h;
    t->cur = w;
    t->nvars += ns;
    return CR_OK;
}

cr_status cr_tape_op_fail(cr_tape *t, cr_status st, const char *msg)
{
    if (t == NULL)
        return st;
    return cr__tape_fail(t, st, "%s", msg != NULL ? msg : cr_status_str(st));
}
