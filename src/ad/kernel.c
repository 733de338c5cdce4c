/*
 * Fused elementwise kernels on the reverse tape (kernel.h). A kernel call is one K_ARRAY
 * record whose node carries its own reverse step (cr__anode_ops.pull): the forward pass runs the
 * kernel's primal loop, and the reverse step runs its dual loop again block by block and adds
 * the partials, scaled by the result's cotangent, straight into the arguments' shadows and
 * into the adjoints of scalar arguments. No rule lookup, no tangent values, no closure.
 *
 * Forward sweeps (kernel_forward) push the arguments' tangents through the dual loop's
 * partials; second-order sweeps (kernel_pull2) run the hyper-dual loop once per
 * direction, which gives the partials g and their derivatives ġ along the tangents, and add
 * x̄ += ȳ g and x̄̇ += ẏ̄ g + ȳ ġ.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tape_impl.h"

#include <chainrules/kernel.h>
#include <chainrules/rules_math.h>
#include <chainrules/scalar_rule.h>

#include "../rules/array_rule_impl.h"

#if defined(__GNUC__)
/* The scaled stores of the reverse step, unrolled (after vectorising): a small call's
 * 30-element store takes 8 trips instead of 15. */
#define UNROLL4 _Pragma("GCC unroll 4")
#else
#define UNROLL4
#endif

/* ---- Elementary functions: their rows -------------------------------------------------- */

static const cr_value *const k_fn1[CR_K_NFN1] = {
    [CR_K_SIN] = &cr_fn_sin,     [CR_K_COS] = &cr_fn_cos,     [CR_K_TAN] = &cr_fn_tan,
    [CR_K_ASIN] = &cr_fn_asin,   [CR_K_ACOS] = &cr_fn_acos,   [CR_K_ATAN] = &cr_fn_atan,
    [CR_K_SINH] = &cr_fn_sinh,   [CR_K_COSH] = &cr_fn_cosh,   [CR_K_TANH] = &cr_fn_tanh,
    [CR_K_EXP] = &cr_fn_exp,     [CR_K_EXPM1] = &cr_fn_expm1, [CR_K_LOG] = &cr_fn_log,
    [CR_K_LOG1P] = &cr_fn_log1p, [CR_K_SQRT] = &cr_fn_sqrt,   [CR_K_CBRT] = &cr_fn_cbrt,
    [CR_K_ABS] = &cr_fn_fabs,
};

static const cr_value *const k_fn2[CR_K_NFN2] = {
    [CR_K_POW] = &cr_fn_pow,
    [CR_K_ATAN2] = &cr_fn_atan2,
    [CR_K_HYPOT] = &cr_fn_hypot,
};

static inline const cr_scalar_rule *row_of(const cr_value *f)
{
    return (const cr_scalar_rule *)f->u.func.fn->udata;
}

double cr_k_row1(unsigned fn, double x, double *dydx)
{
    if (fn >= CR_K_NFN1) {
        *dydx = (double)NAN;
        return (double)NAN;
    }
    double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    row_of(k_fn1[fn])->f64(&x, Y, D);
    *dydx = D[0];
    return Y[0];
}

double cr_k_row2(unsigned fn, double x, double y, double *d)
{
    if (fn >= CR_K_NFN2) {
        d[0] = d[1] = (double)NAN;
        return (double)NAN;
    }
    double a[2] = {x, y}, Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    row_of(k_fn2[fn])->f64(a, Y, D);
    d[0] = D[0];
    d[1] = D[1];
    return Y[0];
}

/* The second derivatives come from the row as the scalar second-order tape takes them
 * (cr__row_hessian: the complex step, or central differences of the partials). */
double cr_k_row1_h(unsigned fn, double x, double *dydx, double *d2)
{
    if (fn >= CR_K_NFN1) {
        *dydx = *d2 = (double)NAN;
        return (double)NAN;
    }
    const cr_scalar_rule *row = row_of(k_fn1[fn]);
    double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    double H[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
    row->f64(&x, Y, D);
    cr__row_hessian(row, &x, D, H, 1u);
    *dydx = D[0];
    *d2 = H[0];
    return Y[0];
}

double cr_k_row2_h(unsigned fn, double x, double y, unsigned vary, double *d, double *h)
{
    if (fn >= CR_K_NFN2) {
        d[0] = d[1] = h[0] = h[1] = h[2] = (double)NAN;
        return (double)NAN;
    }
    const cr_scalar_rule *row = row_of(k_fn2[fn]);
    double a[2] = {x, y}, Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    double H[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
    vary &= 3u;
    row->f64(a, Y, D);
    if (vary != 0)
        cr__row_hessian(row, a, D, H, vary); /* H[j * 2 + l] = ∂D_j/∂x_l for l in vary */
    d[0] = D[0];
    d[1] = D[1];
    h[0] = (vary & 1u) ? H[0] : 0.0;
    h[1] = (vary & 2u) ? H[1] : (vary & 1u) ? H[2] : 0.0;
    h[2] = (vary & 2u) ? H[3] : 0.0;
    return Y[0];
}

/* ---- The record ------------------------------------------------------------------------- */

/* An argument as the loops read it. */
typedef struct karg {
    const double *p; /* an f64 array's element 0 of the call (offset applied), or NULL */
    const float *pf; /* an f32 array's element 0 of the call (read as doubles), or NULL */
    ptrdiff_t s;     /* its stride in elements */
    double c;        /* a scalar's value */
    size_t off;      /* an array's offset: element i of the call is shadow element off + i */
    size_t numel;    /* an array's elements */
    uint32_t code;   /* CR_VAR_CONST, a scalar variable, or an array slot | CR__ASLOT_BIT */
} karg;

/* A kernel call on the tape: a K_ARRAY node (first, so that the record's pointer is both)
 * with its own reverse step. */
typedef struct knode {
    cr__anode base;
    const cr_kernel *k;
    /* A broadcast of a scalar-table function (cr__kernel_broadcast): its row, whose f64
     * instantiation the loops call element by element (row_loop, ...); NULL for a kernel of
     * CR_KERNEL, whose own loops run. */
    const cr_scalar_rule *row;
    size_t n; /* elements (an array result's shape is its recording's, base.y: n in one
                 dimension for cr_av_kernel, the arguments' for a broadcast) */
    karg arg[CR_K_MAX_ARGS];
    uint32_t codes[CR_K_MAX_ARGS];
    /* Every argument an f64 array of unit stride: the loops read them in place (set with
     * the arguments' binding, and again at each replay). */
    bool direct;
    /* Per argument, fixed when recorded: the first argument reading the same array slot
     * (itself for the first reader, scalars and constants), and for a first reader the
     * arguments reading its slot and the largest offset among them. */
    uint8_t own[CR_K_MAX_ARGS];
    uint8_t readers[CR_K_MAX_ARGS];
    size_t need[CR_K_MAX_ARGS];
} knode;

/* Scratch of one block: the arguments' unit-stride copies (strided arrays gathered, scalars
 * broadcast) and the partials. */
typedef struct kblock {
    double buf[CR_K_MAX_ARGS][CR_K_BLOCK];
    double P[CR_K_MAX_ARGS * CR_K_BLOCK];
} kblock;

/* NULL too for a call that a checked tape refuses (cr__tape_misused). */
static inline cr_tape *tape_or_current(cr_tape *t)
{
    t = t != NULL ? t : cr_tape_current();
    return t != NULL && cr__tape_misused(t) ? NULL : t;
}

/* ---- The loops of a row (a broadcast of a scalar-table function) ------------------------ *
 * The kernel loops' contracts (kernel.h), with the row's f64 instantiation called once per
 * element for the value and the partials, and cr__row_hessian for the second derivatives
 * (as the scalar second-order tape takes them). */

/* The row at each element i < n of the m arguments q: its values into y (when not NULL),
 * its partials into P (when not NULL; P[j * CR_K_BLOCK + i]). */
static void row_loop(const cr_scalar_rule *row, unsigned m, size_t n, const double *const *q,
                     double *y, double *P)
{
    double x[CR_K_MAX_ARGS], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    for (size_t i = 0; i < n; i++) {
        for (unsigned j = 0; j < m; j++)
            x[j] = q[j][i];
        row->f64(x, Y, D);
        if (y != NULL)
            y[i] = Y[0];
        for (unsigned j = 0; j < m && P != NULL; j++)
            P[(size_t)j * CR_K_BLOCK + i] = D[j];
    }
}

static void row_second(const cr_scalar_rule *row, unsigned m, size_t n, const double *const *q,
                       const double *const *qd, double *P, double *PD)
{
    double x[CR_K_MAX_ARGS], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    double H[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
    for (size_t i = 0; i < n; i++) {
        for (unsigned j = 0; j < m; j++)
            x[j] = q[j][i];
        row->f64(x, Y, D);
        cr__row_hessian(row, x, D, H, (1u << m) - 1u); /* H[j * m + l] = ∂D_j/∂x_l */
        for (unsigned j = 0; j < m; j++) {
            double s = 0.0;
            for (unsigned l = 0; l < m; l++)
                s += H[j * m + l] * qd[l][i];
            P[(size_t)j * CR_K_BLOCK + i] = D[j];
            PD[(size_t)j * CR_K_BLOCK + i] = s;
        }
    }
}

/* A node's loops: its kernel's, or its row's where the kernel has none (a row's call has an
 * array result: no sum). A broadcast of * or / has both: the kernel's primal and partials
 * (inline, from the row's definition), the row's second derivatives. */
static inline void k_map(const knode *nd, size_t n, const double *const *q, double *y)
{
    if (nd->k->map == NULL)
        row_loop(nd->row, nd->k->nargs, n, q, y, NULL);
    else
        nd->k->map(n, q, y);
}

static inline void k_partials(const knode *nd, size_t n, const double *const *q, double *P)
{
    if (nd->k->partials == NULL)
        row_loop(nd->row, nd->k->nargs, n, q, NULL, P);
    else
        nd->k->partials(n, q, P);
}

static inline void k_second(const knode *nd, size_t n, const double *const *q,
                            const double *const *qd, double *P, double *PD)
{
    if (nd->k->second == NULL)
        row_second(nd->row, nd->k->nargs, n, q, qd, P, PD);
    else
        nd->k->second(n, q, qd, P, PD);
}

/* Whether a node has a second-order form. */
static inline bool has_second(const knode *nd)
{
    return nd->row != NULL || nd->k->second != NULL;
}

/* A failure reported by the arena: its message is on the context already. */
static cr_status fail_alloc(cr_tape *t, const char *who)
{
    cr_status st = CR__ALLOC_STATUS(t->arena);
    if (st == CR_OK)
        st = CR_ENOMEM;
    const char *msg = cr_ctx_errmsg(t->ctx);
    if (cr_ctx_errcode(t->ctx) == st && msg[0] != '\0')
        return cr__tape_fail(t, st, "kernel %s: %s", who, cr__after_name(msg, who));
    return cr__tape_fail(t, st, "kernel %s: %s", who, cr_status_str(st));
}

/* Pointers to elements [base, base + nb) of every argument, unit stride. Scalars are
 * broadcast into their buffer once (fill), strided f64 arrays gathered and f32 arrays
 * converted at each block. */
static void block_args(const knode *nd, size_t base, size_t nb, kblock *b, bool fill,
                       const double **q)
{
    for (unsigned j = 0; j < nd->k->nargs; j++) {
        const karg *a = &nd->arg[j];
        if (a->pf != NULL) {
            for (size_t i = 0; i < nb; i++)
                b->buf[j][i] = (double)a->pf[(ptrdiff_t)(base + i) * a->s];
            q[j] = b->buf[j];
        } else if (a->p == NULL) {
            if (fill) {
                size_t m = nd->n < CR_K_BLOCK ? nd->n : CR_K_BLOCK;
                for (size_t i = 0; i < m; i++)
                    b->buf[j][i] = a->c;
            }
            q[j] = b->buf[j];
        } else if (a->s == 1) {
            q[j] = a->p + base;
        } else {
            for (size_t i = 0; i < nb; i++)
                b->buf[j][i] = a->p[(ptrdiff_t)(base + i) * a->s];
            q[j] = b->buf[j];
        }
    }
}

enum { BIND_OK, BIND_DTYPE, BIND_LAYOUT, BIND_RANGE };

/* Point argument a at elements [off, off + n) of array v: BIND_OK, or why it cannot be
 * read (a->numel is set from BIND_RANGE on). */
static ALWAYS_INLINE int bind_array(karg *a, const cr_array *v, size_t off, size_t n)
{
    /* The usual argument, a dense f64 vector, with its tests in one: what follows, for it */
    if (v->dtype == CR_DT_F64 && v->structure == CR_MAT_DENSE && v->ndim == 1) {
        a->numel = v->shape[0];
        if (off > a->numel || n > a->numel - off)
            return BIND_RANGE;
        a->s = v->strides[0];
        a->p = (const double *)v->data + (ptrdiff_t)off * a->s;
        a->pf = NULL;
        a->off = off;
        return BIND_OK;
    }
    if (v->dtype != CR_DT_F64 && v->dtype != CR_DT_F32)
        return BIND_DTYPE;
    if (v->structure != CR_MAT_DENSE || (v->ndim > 1 && !cr_array_is_contiguous(v)))
        return BIND_LAYOUT;
    a->numel = v->ndim == 1 ? v->shape[0] : cr_array_numel(v);
    if (off > a->numel || n > a->numel - off)
        return BIND_RANGE;
    a->s = v->ndim == 1 ? v->strides[0] : 1;
    if (v->dtype == CR_DT_F32) {
        a->pf = (const float *)v->data + (ptrdiff_t)off * a->s;
        a->p = NULL;
    } else {
        a->p = (const double *)v->data + (ptrdiff_t)off * a->s;
        a->pf = NULL;
    }
    a->off = off;
    return BIND_OK;
}

/* Whether the loops read an argument in place: an f64 array of unit stride (a node all of
 * whose arguments are is `direct`: no block is gathered). */
static inline bool in_place(const karg *a)
{
    return a->p != NULL && a->s == 1;
}

/* Check a kernel call and read its arguments into nd; *any says whether one is a variable. */
static ALWAYS_INLINE cr_status read_args(cr_tape *t, const char *kn, const cr_kernel *k,
                                         const cr_scalar_rule *row, const cr_kin *args,
                                         size_t nargs, size_t n, knode *nd, bool *any)
{
    if (k->nargs == 0 || k->nargs > CR_K_MAX_ARGS ||
        (row == NULL && (k->map == NULL || k->sum == NULL || k->partials == NULL)))
        return cr__tape_fail(t, CR_EINVAL,
                             "kernel %s: %u argument%s and loops %s (1 to %d argument%s and three "
                             "loops expected: make kernels with CR_KERNEL)",
                             kn, k->nargs, CR__S(k->nargs),
                             k->map && k->sum && k->partials ? "given" : "missing", CR_K_MAX_ARGS,
                             CR__S(CR_K_MAX_ARGS));
    if (nargs != k->nargs)
        return cr__tape_fail(t, CR_EINVAL, "kernel %s takes %u argument%s, %zu given", kn, k->nargs,
                             CR__S(k->nargs), nargs);
    if (args == NULL)
        return cr__tape_fail(t, CR_EINVAL, "kernel %s: NULL arguments", kn);
    nd->k = k;
    nd->row = row;
    nd->n = n;
    *any = false;
    bool direct = true;
    for (size_t j = 0; j < nargs; j++) {
        const cr_kin *in = &args[j];
        karg *a = &nd->arg[j];
        if (in->kind == CR_KIN_VAR) {
            a->p = NULL;
            a->pf = NULL;
            a->c = in->s.v;
            a->code = in->s.idx;
            if (in->s.idx != CR_VAR_CONST && (in->s.tape != t->id || in->s.idx >= t->nvars))
                return cr__tape_fail(t, CR_ETAPE,
                                     "kernel %s: argument %zu (variable %u) belongs to another "
                                     "tape, or to this tape before its last reset",
                                     kn, j, (unsigned)in->s.idx);
        } else if (in->kind == CR_KIN_ARR) {
            const cr_array *v = in->a.a;
            if (v == NULL)
                return cr__tape_fail(t, CR_EINVAL, "kernel %s: argument %zu is a NULL array", kn,
                                     j);
            if (in->a.idx != CR_VAR_CONST && (in->a.tape != t->id || in->a.idx >= t->avars.n))
                return cr__tape_fail(t, CR_ETAPE,
                                     "kernel %s: argument %zu (array variable %u) belongs to "
                                     "another tape, or to this tape before its last reset",
                                     kn, j, (unsigned)in->a.idx);
            switch (bind_array(a, v, in->off, n)) {
            case BIND_DTYPE:
                return cr__tape_fail(t, CR_EUNIMPL,
                                     "kernel %s: argument %zu is an array of %s: kernels read "
                                     "f64 and f32 arrays",
                                     kn, j, cr_dtype_name((cr_dtype)v->dtype));
            case BIND_LAYOUT:
                if (v->structure != CR_MAT_DENSE)
                    return cr__tape_fail(t, CR_EUNIMPL,
                                         "kernel %s: argument %zu is a %s array: kernels read "
                                         "dense arrays",
                                         kn, j, cr_matstruct_name((cr_matstruct)v->structure));
                return cr__tape_fail(t, CR_EUNIMPL,
                                     "kernel %s: argument %zu is an array of %u dimension%s that "
                                     "is not contiguous: kernels read 1-d arrays of any stride "
                                     "and contiguous arrays",
                                     kn, j, (unsigned)v->ndim, CR__S((unsigned)v->ndim));
            case BIND_RANGE: {
                /* the numbers as given: off + n may wrap, numel - off when off > numel */
                char buf[64];
                const char *sh = cr__shape_str(v, buf, sizeof buf);
                if (in->off > a->numel)
                    return cr__tape_fail(t, CR_ESHAPE,
                                         "kernel %s: argument %zu reads n = %zu element%s from "
                                         "offset %zu of a %s array of %zu element%s: the offset "
                                         "is past its end",
                                         kn, j, n, CR__S(n), in->off, sh, a->numel,
                                         CR__S(a->numel));
                return cr__tape_fail(t, CR_ESHAPE,
                                     "kernel %s: argument %zu reads n = %zu element%s from offset "
                                     "%zu of a %s array of %zu element%s: only %zu are left from "
                                     "that offset",
                                     kn, j, n, CR__S(n), in->off, sh, a->numel, CR__S(a->numel),
                                     a->numel - in->off);
            }
            default:
                break;
            }
            a->code = in->a.idx == CR_VAR_CONST ? CR_VAR_CONST : (in->a.idx | CR__ASLOT_BIT);
        } else {
            return cr__tape_fail(t, CR_EINVAL, "kernel %s: argument %zu has an unknown kind %d", kn,
                                 j, (int)in->kind);
        }
        nd->codes[j] = a->code;
        *any |= a->code != CR_VAR_CONST;
        direct &= in_place(a);
    }
    /* After the arguments, whose ranges name an n too large for them: here an n that no
     * array of doubles can have (a call of scalars, or f32 arrays that long). */
    if (n > (size_t)PTRDIFF_MAX / sizeof(double))
        return cr__tape_fail(t, CR_EOVERFLOW,
                             "kernel %s: n = %zu element%s, more than an array of doubles can "
                             "hold (%zu)",
                             kn, n, CR__S(n), (size_t)PTRDIFF_MAX / sizeof(double));
    nd->direct = direct;
    return CR_OK;
}

/* The arguments sharing array slots (knode.own, readers, need), for the reverse step. */
static ALWAYS_INLINE void set_readers(knode *nd)
{
    for (unsigned j = 0; j < nd->k->nargs; j++) {
        uint32_t c = nd->arg[j].code;
        size_t off = nd->arg[j].off;
        unsigned o = j;
        nd->own[j] = (uint8_t)j;
        if (c == CR_VAR_CONST || !(c & CR__ASLOT_BIT))
            continue; /* (readers and need are read for array slots only) */
        for (unsigned l = 0; l < j; l++)
            if (nd->arg[l].code == c) {
                o = l;
                break;
            }
        if (o == j) {
            nd->readers[j] = 1;
            nd->need[j] = off;
            continue;
        }
        nd->own[j] = (uint8_t)o;
        nd->readers[o]++;
        if (off > nd->need[o])
            nd->need[o] = off;
    }
}

/* Refusals of tapes that cannot hold a kernel record. */
static cr_status check_tape(cr_tape *t, const char *kn, const knode *nd)
{
    if ((t->flags & (CR_TAPE_SECOND_ORDER | CR__TAPE_SO_CHECK)) && !has_second(nd))
        return cr__tape_fail(t, CR_EUNIMPL,
                             "kernel %s: no hyper-dual loop (second == NULL), so it has no "
                             "second-order form: make it with CR_KERNEL",
                             kn);
    if (t->nvars + 2 >= CR_TAPE_MAX_VARS)
        return cr__tape_fail(t, CR_EOVERFLOW, "tape: more than %zu variable%s in one recording",
                             CR_TAPE_MAX_VARS - 1, CR__S(CR_TAPE_MAX_VARS - 1));
    return CR_OK;
}

/* The primal over blocks (strided arrays gathered, scalars broadcast). */
static void primal_blocks(const knode *nd, double *y, double *acc)
{
    kblock b;
    const double *q[CR_K_MAX_ARGS];
    for (size_t base = 0; base < nd->n; base += CR_K_BLOCK) {
        size_t nb = nd->n - base < CR_K_BLOCK ? nd->n - base : CR_K_BLOCK;
        block_args(nd, base, nb, &b, base == 0, q);
        if (y != NULL)
            k_map(nd, nb, q, y + base);
        else
            nd->k->sum(nb, q, acc); /* (a row's call is never a sum) */
    }
}

/* The primal: y (n elements) or the sum. Unit-stride arrays only: one loop over the call. */
static ALWAYS_INLINE void run_primal(const knode *nd, double *y, double *sum)
{
    const double *q[CR_K_MAX_ARGS];
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    for (unsigned j = 0; j < nd->k->nargs; j++)
        q[j] = nd->arg[j].p;
    if (!nd->direct)
        primal_blocks(nd, y, acc);
    else if (y != NULL)
        k_map(nd, nd->n, q, y);
    else
        nd->k->sum(nd->n, q, acc);
    if (sum != NULL)
        *sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

static cr_status kernel_pull(cr_tape *t, const cr__anode *an, const double *g, double *adj);
static cr_status kernel_forward(cr_tape *t, const cr__anode *an, double *tan, size_t k, size_t i);
static cr_status kernel_pull2(cr_tape *t, const cr__anode *an, size_t i, double *adj, double *adjd,
                              const double *tan, size_t k);
static cr_status kernel_rerun(cr_tape *t, cr__anode *an, const cr__rule_ref *rule, double *v,
                              uint32_t res, cr_value *ynew);

/* The steps of a fused kernel's record (cr__anode_ops): its forward step may be left out
 * when nothing reads its results' tangents (its second-order step reads its arguments'). */
static const cr__anode_ops k_kernel_ops = {kernel_pull, kernel_forward, kernel_pull2, kernel_rerun,
                                           .tail_free = true};

/* Record a kernel call: the result is the array *ya (of like's shape, or of n elements in
 * one dimension when like is NULL), or the sum *ys when ya is NULL; *idx is its slot or
 * variable (CR_VAR_CONST for a call of constants). row is NULL for a kernel's own loops, or
 * a scalar-table row whose loops (row_loop, ...) take the call; name, when not NULL, names the
 * call. The callers build the cr_var / cr_avar: written here field by field, the 16-byte struct
 * would be read back as one load that waits for the separate stores. */
static ALWAYS_INLINE cr_status record(cr_tape *t, const char *who, const cr_kernel *k,
                                      const cr_scalar_rule *row, const char *name,
                                      const cr_kin *args, size_t nargs, size_t n,
                                      const cr_array *like, cr_array **ya, double *ys,
                                      uint32_t *idx)
{
    bool sum = ya == NULL;
    *idx = CR_VAR_CONST;
    if (k == NULL)
        return cr__tape_fail(t, CR_EINVAL, "%s: NULL kernel", who);
    const char *kn = name != NULL ? name : k->name != NULL ? k->name : "(unnamed)";
    /* The node is read into its place in the arena (a call of constants leaves it unused). */
    knode *nd = cr_arena_alloc(t->arena, sizeof *nd, _Alignof(knode));
    if (nd == NULL)
        return fail_alloc(t, kn);
    bool any = false;
    if (read_args(t, kn, k, row, args, nargs, n, nd, &any) != CR_OK)
        return t->status;
    if (any && check_tape(t, kn, nd) != CR_OK)
        return t->status;
    cr_array *y = NULL;
    if (!sum && cr__new(t->arena, CR_DT_F64, like != NULL ? like->ndim : 1,
                        like != NULL ? like->shape : &n, false, &y) != CR_OK)
        return fail_alloc(t, kn);
    size_t need = 2 + t->pre;
    if (any && (size_t)(t->lim - t->cur) < need && cr__tape_grow(t, need) != CR_OK)
        return t->status;
    double s = 0.0;
    run_primal(nd, y != NULL ? (double *)y->data : NULL, sum ? &s : NULL);
    if (sum)
        *ys = s;
    else
        *ya = y;
    if (!any)
        return CR_OK;
    uint32_t slot = CR_VAR_CONST;
    if (!sum && cr__array_slot(t, y, &slot) != CR_OK)
        return t->status;
    /* Fields of the node that kernels do not use are zero (NULL pullback, no tuple). They
     * are set one by one: a memset of the node compiles to a string instruction whose
     * start-up costs more than the stores. */
    cr__anode *b = &nd->base;
    b->pb.fn = NULL;
    b->pb.env = NULL;
    b->pb.name = kn;
    b->pb.nx = 0;
    b->fname = kn;
    b->nargs = k->nargs;
    b->out = slot;
    b->args = nd->codes;
    b->nout = 0;
    b->outs = NULL;
    static const cr_value zero_value;
    b->fv = zero_value;
    b->y = sum ? zero_value : cr_value_array(y); /* the recording's result: its shape */
    b->vals = NULL;
    b->ops = &k_kernel_ops;
    b->ext = NULL;
    set_readers(nd);
    unsigned nv = sum ? 1u : 0u;
    uint64_t h = hdr_make(K_ARRAY, nv, 0);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    if (t->pre > 1)
        (w++)->cp = NULL; /* a replay tape's information: the node itself (kernel_rerun) */
    (w++)->cp = &nd->base;
    (w++)->u = h;
    t->cur = w;
    *idx = sum ? t->nvars : slot;
    /* nvars moves as the key word (nvars, fast_id): the inline operations read the key as
     * one word, which a 4-byte store of nvars would make wait for that store to reach the
     * cache (cr_div after cr_av_kernel_sum, as in mse). */
    t->hot.vt.key += nv * CR__TAPE_KEY_ONE;
    return CR_OK;
}

cr_avar cr_av_kernel(cr_tape *t, const cr_kernel *k, const cr_kin *args, size_t nargs, size_t n)
{
    cr_array *y = NULL;
    uint32_t idx;
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK ||
        record(t, "cr_av_kernel", k, NULL, NULL, args, nargs, n, NULL, &y, NULL, &idx) != CR_OK)
        return cr_av_const(NULL);
    cr_avar r;
    r.a = y;
    r.idx = idx;
    r.tape = idx == CR_VAR_CONST ? 0 : t->id;
    return r;
}

cr_var cr_av_kernel_sum(cr_tape *t, const cr_kernel *k, const cr_kin *args, size_t nargs, size_t n)
{
    double s = 0.0;
    uint32_t idx;
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK ||
        record(t, "cr_av_kernel_sum", k, NULL, NULL, args, nargs, n, NULL, NULL, &s, &idx) != CR_OK)
        return cr_const((double)NAN);
    cr_var r;
    r.v = s;
    r.idx = idx;
    r.tape = idx == CR_VAR_CONST ? 0 : t->id;
    return r;
}

/* ---- Broadcasts and sums of array variables as kernels ------------------------------------ */

/* The arithmetic rows as kernels of their own (their loops inline and vectorise, where a
 * row's loops call its function once per element), through kernel.h's operations on the
 * rows of arith_rows.h. Broadcasts take their primal loops (and the second-order loops of
 * + - and negation); their partials are below. */
#define BK_ADD(x) cr_k_add(x[0], x[1])
#define BK_SUB(x) cr_k_sub(x[0], x[1])
#define BK_MUL(x) cr_k_mul(x[0], x[1])
#define BK_DIV(x) cr_k_div(x[0], x[1])
#define BK_NEG(x) cr_k_neg(x[0])
#define BK_SQ(x)  cr_k_sq(x[0])
#define BK_ID(x)  (x[0])
CR_KERNEL(bk_add, 2, BK_ADD);
CR_KERNEL(bk_sub, 2, BK_SUB);
CR_KERNEL(bk_mul, 2, BK_MUL);
CR_KERNEL(bk_div, 2, BK_DIV);
CR_KERNEL(bk_neg, 1, BK_NEG);
CR_KERNEL(bk_square, 1, BK_SQ);
CR_KERNEL(bk_sum, 1, BK_ID);

/* The dual loops of the arithmetic broadcasts: each argument's own entry of the row
 * (arith_rows.h), as the rule takes the partials. The kernels' dual numbers would carry the
 * other argument's zero partial through a product (∂(xy)/∂x as y·1 + x·0), which is NaN
 * where x is NaN or infinite, where the rule (and the scalar tape) gives y. The primal loops
 * are the kernels'; so are the second-order loops of + - and negation, which have no such
 * product; those of * and / are below. */
#define BK_ROW_FN(NAME, NIN, NOUT, PRIMAL, ...)                                 \
    static void bk_partials_##NAME(size_t n, const double *const *q, double *P) \
    {                                                                           \
        for (size_t i = 0; i < n; i++) {                                        \
            double x[NIN], Y[NOUT], D[NIN];                                     \
            for (unsigned j = 0; j < (NIN); j++)                                \
                x[j] = q[j][i];                                                 \
            cr__k_row_##NAME(x, Y, D); /* kernel.h's expansion of the row */    \
            for (unsigned j = 0; j < (NIN); j++)                                \
                P[(size_t)j * CR_K_BLOCK + i] = D[j];                           \
        }                                                                       \
    }
CR__ARITH_ROWS(BK_ROW_FN)
#define BK_ROW_KERNEL(NAME, NIN, SECOND)                                                \
    static const cr_kernel bk_##NAME##_row = {                                          \
        "broadcast", NIN, bk_##NAME##_cr_kmap, bk_##NAME##_cr_ksum, bk_partials_##NAME, \
        SECOND,      NULL}
BK_ROW_KERNEL(add, 2, bk_add_cr_ksecond);
BK_ROW_KERNEL(sub, 2, bk_sub_cr_ksecond);
BK_ROW_KERNEL(neg, 1, bk_neg_cr_ksecond);
/* The second-order loops of * and /: the derivatives of the partials along the direction
 * from the kernels' hyper-dual loops (constant or finite there: no product of a zero partial
 * with the primal), the partials themselves from the row, as above. */
#define BK_SECOND(NAME)                                                                     \
    static void bk_second_##NAME(size_t n, const double *const *q, const double *const *qd, \
                                 double *P, double *PD)                                     \
    {                                                                                       \
        bk_##NAME##_cr_ksecond(n, q, qd, P, PD);                                            \
        bk_partials_##NAME(n, q, P);                                                        \
    }
BK_SECOND(mul)
BK_SECOND(div)
BK_ROW_KERNEL(mul, 2, bk_second_mul);
BK_ROW_KERNEL(div, 2, bk_second_div);

/* The kernels a row's loops stand in for: their number of arguments (and no loops). */
static const cr_kernel row_kernel[CR_K_MAX_ARGS] = {
    {"broadcast", 1, NULL, NULL, NULL, NULL, NULL},
    {"broadcast", 2, NULL, NULL, NULL, NULL, NULL},
    {"broadcast", 3, NULL, NULL, NULL, NULL, NULL},
    {"broadcast", 4, NULL, NULL, NULL, NULL, NULL},
};

/* The kernel of an arithmetic function of m arguments, or NULL. */
static const cr_kernel *arith_kernel(const cr_function *fn, size_t m)
{
    static const struct {
        const cr_value *f;
        size_t m;
        const cr_kernel *k;
    } tab[] = {
        {&cr_fn_sub, 2, &bk_sub_row},   {&cr_fn_mul, 2, &bk_mul_row}, {&cr_fn_add, 2, &bk_add_row},
        {&cr_fn_square, 1, &bk_square}, {&cr_fn_div, 2, &bk_div_row}, {&cr_fn_neg, 1, &bk_neg_row},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (tab[i].f->u.func.fn == fn && tab[i].m == m)
            return tab[i].k;
    return NULL;
}

/* An f64 array the kernel loops read in place or by stride: dense, contiguous or 1-d. */
static inline bool kernel_array(const cr_array *a)
{
    return a != NULL && a->dtype == CR_DT_F64 && a->structure == CR_MAT_DENSE &&
           (a->ndim <= 1 || cr_array_is_contiguous(a));
}

/* args[j] as a kernel argument, when it is one: a scalar variable of this recording or a
 * constant, an f64 constant, or an f64 array (variable of this recording, or constant) of
 * the shape *like (set by the first array). */
static bool kernel_arg(const cr_tape *t, const cr_targ *a, cr_kin *in, const cr_array **like)
{
    switch (a->kind) {
    case CR_TARG_VAR:
        if (a->u.s.idx != CR_VAR_CONST && (a->u.s.tape != t->id || a->u.s.idx >= t->nvars))
            return false;
        *in = cr_kin_var(a->u.s);
        return true;
    case CR_TARG_VALUE:
        if (a->u.v.kind != CR_KIND_F64)
            return false;
        *in = cr_kin_var(cr_const(a->u.v.u.f64));
        return true;
    case CR_TARG_ARR: {
        const cr_array *v = a->u.a.a;
        /* (a variable's descriptor is the one its slot holds: the shadow has its shape) */
        if (!kernel_array(v) ||
            (a->u.a.idx != CR_VAR_CONST && (a->u.a.tape != t->id || a->u.a.idx >= t->avars.n ||
                                            t->avars.slots[a->u.a.idx].val != v)))
            return false;
        if (*like != NULL && !cr_array_same_shape(v, *like))
            return false;
        *like = v;
        *in = cr_kin_arr(a->u.a, 0);
        return true;
    }
    }
    return false;
}

cr_status cr__kernel_broadcast(cr_tape *t, const char *who, const cr_function *fn,
                               const cr_targ *args, size_t nargs, cr_targ *out)
{
    if (fn == NULL || nargs == 0 || nargs > CR_K_MAX_ARGS)
        return CR_NOTHING;
    /* a row of this many arguments and one result (a variadic function's row covers its
     * own arity only); the arithmetic functions' kernels run their own loops where they
     * have them, the row's elsewhere */
    const cr_scalar_rule *row = cr_scalar_rule_of(fn);
    if (row == NULL || row->nin != nargs || row->nout != 1)
        return CR_NOTHING;
    const cr_kernel *k = arith_kernel(fn, nargs);
    if (k == NULL)
        k = &row_kernel[nargs - 1];
    cr_kin in[CR_K_MAX_ARGS];
    const cr_array *like = NULL;
    for (size_t j = 0; j < nargs; j++)
        if (!kernel_arg(t, &args[j], &in[j], &like))
            return CR_NOTHING;
    if (like == NULL)
        return CR_NOTHING; /* scalars only: the rule gives a 0-d array */
    cr_array *y = NULL;
    uint32_t idx;
    if (record(t, who, k, row, who, in, nargs, cr_array_numel(like), like, &y, NULL, &idx) != CR_OK)
        return t->status;
    out->kind = CR_TARG_ARR;
    out->u.a.a = y;
    out->u.a.idx = idx;
    out->u.a.tape = idx == CR_VAR_CONST ? 0 : t->id;
    return CR_OK;
}

cr_status cr__kernel_sum(cr_tape *t, const cr_targ *args, size_t nargs, cr_targ *out)
{
    /* sum(x): a kernel sum of x; dot(x, y) of two f64 arrays of one shape: of x .* y (the
     * partials of * from its row, as its broadcast takes them) */
    cr_kin in[2];
    const cr_array *like = NULL;
    if (nargs < 1 || nargs > 2)
        return CR_NOTHING;
    for (size_t j = 0; j < nargs; j++)
        if (args[j].kind != CR_TARG_ARR || !kernel_arg(t, &args[j], &in[j], &like))
            return CR_NOTHING;
    bool dot = nargs == 2;
    const cr_scalar_rule *row = dot ? cr_scalar_rule_of(cr_fn_mul.u.func.fn) : NULL;
    const char *name = dot ? "dot" : "sum";
    double s = 0.0;
    uint32_t idx;
    if (record(t, name, dot ? &bk_mul_row : &bk_sum, row, name, in, nargs, cr_array_numel(like),
               NULL, NULL, &s, &idx) != CR_OK)
        return t->status;
    out->kind = CR_TARG_VAR;
    out->u.s.v = s;
    out->u.s.idx = idx;
    out->u.s.tape = idx == CR_VAR_CONST ? 0 : t->id;
    return CR_OK;
}

/* ---- Replay (prepared gradients) -------------------------------------------------------- */

/* The rerun step (cr__anode_ops): the loops run again, no rule (rule and ynew unused: a
 * kernel gives no new result value). */
static cr_status kernel_rerun(cr_tape *t, cr__anode *an, const cr__rule_ref *rule, double *v,
                              uint32_t res, cr_value *ynew)
{
    (void)rule;
    (void)ynew;
    knode *nd = (knode *)(void *)an;
    bool direct = true;
    for (unsigned j = 0; j < nd->k->nargs; j++) {
        karg *a = &nd->arg[j];
        if (a->code == CR_VAR_CONST || !(a->code & CR__ASLOT_BIT)) {
            /* constants keep their values (a constant array: its current elements) */
            if (a->code != CR_VAR_CONST)
                a->c = v[a->code];
            direct &= in_place(a);
            continue;
        }
        const cr_array *x = t->avars.slots[a->code & ~CR__ASLOT_BIT].val;
        int b = bind_array(a, x, a->off, nd->n);
        /* A broadcast or sum reads a matrix (or more) that is no longer contiguous from a
         * dense copy, as the rules it stands in for would read it (kernels of CR_KERNEL
         * refuse it). The copy is in the arena above the replay's mark. */
        if (b == BIND_LAYOUT && (nd->row != NULL || nd->k == &bk_sum) && x->dtype == CR_DT_F64 &&
            x->structure == CR_MAT_DENSE) {
            const cr_array *c;
            cr_status st = cr__dense(t->arena, x, CR_DT_F64, &c);
            if (st != CR_OK)
                return st; /* the arena put the message on the context */
            b = bind_array(a, c, a->off, nd->n);
        }
        if (b != BIND_OK) {
            char buf[64];
            return cr_ctx_error(t->ctx, CR_ESHAPE,
                                "prepared gradient: kernel %s: argument %u is a %s %s array at "
                                "these inputs, which it cannot read from element %zu on for %zu "
                                "elements; prepare it again",
                                an->fname, j, cr_dtype_name((cr_dtype)x->dtype),
                                cr__shape_str(x, buf, sizeof buf), a->off, nd->n);
        }
        direct &= in_place(a);
    }
    nd->direct = direct;
    if (an->out == CR_VAR_CONST) {
        run_primal(nd, NULL, &v[res]);
        return CR_OK;
    }
    cr_array *y;
    const cr_array *was = an->y.u.arr; /* the recording's result: its shape */
    cr_status st = cr__new(t->arena, CR_DT_F64, was->ndim, was->shape, false, &y);
    if (st != CR_OK)
        return st; /* the arena put the message on the context */
    run_primal(nd, y->data, NULL);
    t->avars.slots[an->out].val = y;
    return CR_OK;
}

/* ---- The reverse step ------------------------------------------------------------------- */

/* The shadow of an array argument during one reverse step. */
typedef struct kshadow {
    double *d;   /* dense, row-major, the variable's element count */
    size_t z;    /* a fresh shadow is zero below z, unwritten above (SIZE_MAX: not fresh) */
    size_t need; /* the largest offset of the arguments reading this slot */
    size_t numel;
    unsigned readers; /* arguments reading this slot */
} kshadow;

/* A dense row-major f64 array of v's shape (whose element count, numel, fits) in one arena
 * block, not zeroed. */
static cr_status dense_buffer(cr_tape *t, const cr_array *v, size_t numel, cr_array **out)
{
    size_t head = (sizeof(cr_array) + CR_ARENA_ALIGN - 1) & ~(size_t)(CR_ARENA_ALIGN - 1);
    if (numel > (SIZE_MAX - head) / sizeof(double))
        return CR_EOVERFLOW;
    unsigned char *mem = cr_arena_alloc(t->arena, head + numel * sizeof(double), 0);
    if (mem == NULL)
        return CR__ALLOC_STATUS(t->arena);
    cr_array *buf = (cr_array *)(void *)mem;
    buf->ndim = v->ndim; /* v's shape, field by field (no string instruction for the copy) */
    for (size_t d = 0; d < v->ndim; d++)
        buf->shape[d] = v->shape[d];
    buf->data = mem + head;
    buf->dtype = CR_DT_F64;
    buf->structure = CR_MAT_DENSE;
    buf->flags = CR_ARRAY_WRITABLE;
    cr__row_major(v->ndim, v->shape, buf->strides);
    *out = buf;
    return CR_OK;
}

/* own[j]: the first argument reading the same array slot as argument j (j itself for the
 * first reader, for scalars and for constants). */
static void slot_owners(const knode *nd, unsigned *own)
{
    for (unsigned j = 0; j < nd->k->nargs; j++) {
        uint32_t c = nd->arg[j].code;
        own[j] = j;
        if (c == CR_VAR_CONST || !(c & CR__ASLOT_BIT))
            continue;
        for (unsigned l = 0; l < j; l++)
            if (nd->arg[l].code == c) {
                own[j] = l;
                break;
            }
    }
}

/* The shadow of slot s as a dense f64 buffer the step may add into: the accumulator itself
 * when it is one, a fresh buffer (zeroed lazily, block by block) when it is zero, else a
 * copy of the accumulator's value. */
static ALWAYS_INLINE cr_status shadow_of(cr_tape *t, uint32_t s, size_t numel, kshadow *sh)
{
    cr__aslot *slot = &t->avars.slots[s];
    const cr_array *v = slot->val;
    sh->numel = numel;
    /* The caller's gradient array (dense row-major f64 of v's shape, cr__gradient_dests) is
     * the shadow: fresh, or written by an earlier step. Tested on the accumulator's fields:
     * a copy of it would read its tag and pointer as one 16-byte load, which waits for the
     * separate stores that cleared them. */
    bool fresh = cr__tis_zero(slot->acc);
    if (slot->dest != NULL &&
        (fresh || (slot->acc.tag == CR_TAN_ARRAY && slot->acc.u.arr == slot->dest))) {
        sh->d = slot->dest->data;
        sh->z = fresh ? 0 : SIZE_MAX;
        slot->acc = cr__tarray(slot->dest);
        return CR_OK;
    }
    cr_tangent acc = slot->acc;
    if (acc.tag == CR_TAN_ARRAY && (acc.u.arr->flags & CR_ARRAY_WRITABLE) &&
        acc.u.arr->dtype == CR_DT_F64 && cr__is_contig_dense(acc.u.arr) &&
        cr_array_numel(acc.u.arr) == numel) {
        sh->d = acc.u.arr->data;
        sh->z = SIZE_MAX;
        return CR_OK;
    }
    cr_array *buf = NULL;
    cr_status st = dense_buffer(t, v, numel, &buf);
    if (st != CR_OK)
        return st;
    double *data = buf->data;
    if (!fresh) {
        memset(data, 0, numel * sizeof(double));
        if ((st = cr__add_into(t->arena, buf, acc)) != CR_OK)
            return st;
    }
    slot->acc = cr__tarray(buf);
    sh->d = buf->data;
    sh->z = fresh ? 0 : SIZE_MAX;
    return CR_OK;
}

/* The cotangent of an array result as n contiguous doubles. */
static cr_status result_cotangent(cr_tape *t, cr_tangent acc, size_t n, const double **gy)
{
    if (acc.tag == CR_TAN_ARRAY && acc.u.arr->dtype == CR_DT_F64 &&
        cr__is_contig_dense(acc.u.arr) && cr_array_numel(acc.u.arr) == n) {
        *gy = acc.u.arr->data;
        return CR_OK;
    }
    cr_array *buf;
    cr_status st = cr__new(t->arena, CR_DT_F64, 1, &n, true, &buf);
    if (st == CR_OK)
        st = cr__add_into(t->arena, buf, acc);
    *gy = st == CR_OK ? buf->data : NULL;
    return st;
}

/* d[i] = g p[i] and d[i] += g p[i], i < nb: p is the block's partials (the step's own
 * scratch), which no shadow shares. */
static inline void set_scaled(double *restrict d, const double *restrict p, double g, size_t nb)
{
    UNROLL4
    for (size_t i = 0; i < nb; i++)
        d[i] = g * p[i];
}

static inline void add_scaled(double *restrict d, const double *restrict p, double g, size_t nb)
{
    UNROLL4
    for (size_t i = 0; i < nb; i++)
        d[i] += g * p[i];
}

/*
 * One stretch [e0, e1) of the shadow d of a slot that two arguments read: element e takes
 * g a[e - ea] (or gb[e - ea] a[e - ea] with an array cotangent gb) and, when b is not NULL,
 * then g b[e - eb] (gb[e - eb] b[e - eb]), the same products in the same order as two
 * passes of add_scaled would add them, in one pass. Elements below *z hold what earlier
 * stretches wrote and are added to, those at or above it are set (the gap from *z to e0 is
 * zeroed first); *z then moves past e1 (SIZE_MAX, a shadow that was not fresh: every
 * element is added to).
 */
static void pair_stretch(double *restrict d, size_t *z, size_t e0, size_t e1,
                         const double *restrict a, size_t ea, const double *restrict b, size_t eb,
                         const double *restrict gb, double g)
{
    size_t zz = *z;
    if (zz < e0) {
        memset(d + zz, 0, (e0 - zz) * sizeof *d);
        zz = e0;
    }
    size_t mid = zz < e1 ? zz : e1; /* [e0, mid) is added to, [mid, e1) set */
    const double *A = a + (e0 - ea), *B = b != NULL ? b + (e0 - eb) : NULL;
    const double *GA = gb != NULL ? gb + (e0 - ea) : NULL,
                 *GB = gb != NULL && b != NULL ? gb + (e0 - eb) : NULL;
    double *D = d + e0;
    size_t nadd = mid - e0, n = e1 - e0;
    if (GA == NULL && B != NULL) {
        for (size_t k = 0; k < nadd; k++)
            D[k] = D[k] + g * A[k] + g * B[k];
        for (size_t k = nadd; k < n; k++)
            D[k] = g * A[k] + g * B[k];
    } else if (GA == NULL) {
        for (size_t k = 0; k < nadd; k++)
            D[k] += g * A[k];
        for (size_t k = nadd; k < n; k++)
            D[k] = g * A[k];
    } else if (B != NULL) {
        for (size_t k = 0; k < nadd; k++)
            D[k] = D[k] + GA[k] * A[k] + GB[k] * B[k];
        for (size_t k = nadd; k < n; k++)
            D[k] = GA[k] * A[k] + GB[k] * B[k];
    } else {
        for (size_t k = 0; k < nadd; k++)
            D[k] += GA[k] * A[k];
        for (size_t k = nadd; k < n; k++)
            D[k] = GA[k] * A[k];
    }
    *z = zz > e1 ? zz : e1;
}

/*
 * A block of nb elements from element base of the call, for an array slot read by two
 * arguments: the owner (partials pa, offset oa) and its mate (pb, ob). The shadow elements
 * the block reaches, [base + min, base + max + nb), fall into stretches read by one of the
 * two or by both; each is written in one pass (pair_stretch), in increasing order.
 */
static void pair_block(kshadow *w, size_t base, size_t nb, const double *pa, size_t oa,
                       const double *pb, size_t ob, const double *gb, double g)
{
    size_t lo = oa < ob ? oa : ob, hi = oa < ob ? ob : oa;
    size_t cut[4] = {base + lo, base + hi, base + lo + nb, base + hi + nb};
    if (cut[1] > cut[2]) { /* the offsets are nb or more apart: two stretches and a gap */
        size_t c = cut[1];
        cut[1] = cut[2];
        cut[2] = c;
    }
    size_t a0 = base + oa, b0 = base + ob;
    for (int s = 0; s < 3; s++) {
        size_t e0 = cut[s], e1 = cut[s + 1];
        if (e0 >= e1)
            continue;
        bool ina = e0 >= a0 && e0 < a0 + nb, inb = e0 >= b0 && e0 < b0 + nb;
        if (ina && inb)
            pair_stretch(w->d, &w->z, e0, e1, pa, a0, pb, b0, gb, g);
        else if (ina)
            pair_stretch(w->d, &w->z, e0, e1, pa, a0, NULL, 0, gb, g);
        else if (inb)
            pair_stretch(w->d, &w->z, e0, e1, pb, b0, NULL, 0, gb, g);
    }
}

static cr_status pull_failed(cr_tape *t, const knode *nd, cr_status st)
{
    const char *msg = cr_ctx_errmsg(t->ctx);
    return cr__tape_fail(t, st, "kernel %s: reverse step failed: %s", nd->base.fname,
                         msg[0] != '\0' ? cr__after_name(msg, nd->base.fname) : cr_status_str(st));
}

/*
 * The fused reverse step of a sum whose adjoint is gs, taken when every argument is an f64
 * array of unit stride read in place (so every variable argument is an array slot), every
 * shadow is fresh and read by one argument, and the kernel has its fused loop (pull). One
 * pass over the elements sets gs ∂f/∂x_j straight into the shadows, with no block of
 * partials in between; only what the loop does not reach is zeroed. The products are
 * those of the general step, so the results are the same to the bit. Returns false, having
 * done nothing, when the step does not qualify (a slot read twice, an accumulator already
 * holding something: the general step writes block by block, which the shared slot's
 * overlapping reads need to be fast); st is set when it failed.
 */
static bool fused_pull(cr_tape *t, const knode *nd, double gs, cr_status *st)
{
    const unsigned m = nd->k->nargs;
    const uint32_t *code = nd->codes;
    for (unsigned j = 0; j < m; j++)
        if (code[j] != CR_VAR_CONST &&
            (nd->readers[j] != 1 || !cr__tis_zero(t->avars.slots[code[j] & ~CR__ASLOT_BIT].acc)))
            return false;
    const double *q[CR_K_MAX_ARGS];
    double *out[CR_K_MAX_ARGS];
    for (unsigned j = 0; j < m; j++) {
        q[j] = nd->arg[j].p;
        out[j] = NULL;
        if (code[j] == CR_VAR_CONST)
            continue;
        kshadow sh;
        if ((*st = shadow_of(t, code[j] & ~CR__ASLOT_BIT, nd->arg[j].numel, &sh)) != CR_OK) {
            *st = pull_failed(t, nd, *st);
            return true;
        }
        size_t off = nd->arg[j].off;
        out[j] = sh.d + off;
        size_t tail = sh.numel - off - nd->n;
        if (off != 0) /* (no call for the usual whole-array argument) */
            memset(sh.d, 0, off * sizeof(double));
        if (tail != 0)
            memset(sh.d + off + nd->n, 0, tail * sizeof(double));
    }
    nd->k->pull(nd->n, q, gs, out);
    *st = CR_OK;
    return true;
}

/*
 * The reverse step by blocks: g is the sum's adjoint, or NULL for an array result (its
 * cotangent is its slot's accumulator). Block by block: the dual loop gives the partials of
 * every argument, which are scaled by the cotangent and added into the arguments' shadows
 * (element i of the call into shadow element off + i; a slot read by two arguments in one
 * pass for both, pair_block) or summed into scalar adjoints. Out of line: its block of
 * scratch (16 kB) and its registers are not set up for the fused step.
 */
static NOINLINE cr_status block_pull(cr_tape *t, const knode *nd, const double *g, double *adj)
{
    const cr__anode *an = &nd->base;
    const unsigned m = nd->k->nargs;
    const size_t n = nd->n;
    double gs = 0.0;
    const double *gy = NULL;
    cr_status st = CR_OK;
    if (g != NULL) {
        gs = *g;
    } else {
        cr_tangent acc = t->avars.slots[an->out].acc;
        if (cr__tis_zero(acc))
            return CR_OK;
        if ((st = result_cotangent(t, acc, n, &gy)) != CR_OK)
            return pull_failed(t, nd, st);
    }
    /* Shadows, one per distinct slot (nd->own[j]: the first argument reading j's slot). */
    const uint8_t *own = nd->own;
    kshadow sh[CR_K_MAX_ARGS];
    for (unsigned j = 0; j < m; j++) {
        uint32_t c = nd->arg[j].code;
        if (c == CR_VAR_CONST || !(c & CR__ASLOT_BIT) || own[j] != j)
            continue;
        if ((st = shadow_of(t, c & ~CR__ASLOT_BIT, nd->arg[j].numel, &sh[j])) != CR_OK)
            return pull_failed(t, nd, st);
        sh[j].need = nd->need[j];
        sh[j].readers = nd->readers[j];
    }
    /* A slot read by exactly two arguments (a stencil such as x[i], x[i + 1]) is written
     * in one pass per block for both (pair_block): mate[j] is the second reader of j's
     * slot when j is the first, m otherwise. */
    unsigned mate[CR_K_MAX_ARGS];
    for (unsigned j = 0; j < CR_K_MAX_ARGS; j++)
        mate[j] = m;
    for (unsigned j = 0; j < m; j++)
        if (own[j] != j && mate[own[j]] == m && sh[own[j]].readers == 2)
            mate[own[j]] = j;
    kblock b;
    double sacc[CR_K_MAX_ARGS] = {0.0, 0.0, 0.0, 0.0};
    const double *q[CR_K_MAX_ARGS];
    for (size_t base = 0; base < n; base += CR_K_BLOCK) {
        size_t nb = n - base < CR_K_BLOCK ? n - base : CR_K_BLOCK;
        if (nd->direct) /* f64 arrays of unit stride, read in place */
            for (unsigned j = 0; j < m; j++)
                q[j] = nd->arg[j].p + base;
        else
            block_args(nd, base, nb, &b, base == 0, q);
        k_partials(nd, nb, q, b.P);
        const double *gb = gy != NULL ? gy + base : NULL;
        for (unsigned j = 0; j < m; j++) {
            uint32_t c = nd->arg[j].code;
            if (c == CR_VAR_CONST)
                continue;
            const double *p = b.P + (size_t)j * CR_K_BLOCK;
            if (!(c & CR__ASLOT_BIT)) {
                double s = 0.0;
                if (gb != NULL)
                    for (size_t i = 0; i < nb; i++)
                        s += gb[i] * p[i];
                else
                    for (size_t i = 0; i < nb; i++)
                        s += gs * p[i];
                sacc[j] += s;
                continue;
            }
            kshadow *w = &sh[own[j]];
            if (w->readers == 2) {
                if (own[j] == j) {
                    unsigned l = mate[j];
                    pair_block(w, base, nb, p, nd->arg[j].off, b.P + (size_t)l * CR_K_BLOCK,
                               nd->arg[l].off, gb, gs);
                }
                continue;
            }
            double *d = w->d + nd->arg[j].off + base;
            if (w->z != SIZE_MAX && w->readers == 1) {
                /* A fresh shadow with one writer: set, zeroing only what is skipped. */
                size_t lo = nd->arg[j].off + base;
                if (w->z < lo)
                    memset(w->d + w->z, 0, (lo - w->z) * sizeof(double));
                w->z = lo + nb;
                if (gb != NULL)
                    for (size_t i = 0; i < nb; i++)
                        d[i] = gb[i] * p[i];
                else
                    set_scaled(d, p, gs, nb);
                continue;
            }
            size_t hi = w->need + base + nb; /* zero what this block may touch */
            if (w->z < hi) {
                memset(w->d + w->z, 0, (hi - w->z) * sizeof(double));
                w->z = hi;
            }
            if (gb != NULL)
                for (size_t i = 0; i < nb; i++)
                    d[i] += gb[i] * p[i];
            else
                add_scaled(d, p, gs, nb);
        }
    }
    for (unsigned j = 0; j < m; j++) {
        uint32_t c = nd->arg[j].code;
        if (c == CR_VAR_CONST)
            continue;
        if (!(c & CR__ASLOT_BIT))
            adj[c] += sacc[j];
        else if (own[j] == j && sh[j].z < sh[j].numel)
            memset(sh[j].d + sh[j].z, 0, (sh[j].numel - sh[j].z) * sizeof(double));
    }
    if (g == NULL)
        t->avars.slots[an->out].acc = cr__tzero(); /* consumed: its record made it */
    return CR_OK;
}

/* The reverse step of a kernel record: a sum's step is the fused loop when it qualifies
 * (fused_pull), else the step by blocks. */
static cr_status kernel_pull(cr_tape *t, const cr__anode *an, const double *g, double *adj)
{
    const knode *nd = (const knode *)(const void *)an;
    if (g != NULL) {
        cr_status st = CR_OK;
        if (*g == 0.0)
            return CR_OK;
        if (nd->direct && nd->k->pull != NULL && fused_pull(t, nd, *g, &st))
            return st;
    }
    return block_pull(t, nd, g, adj);
}

/* ---- Forward and second-order sweeps ------------------------------------------------------ */

/* Σ v[e] for e < n in four interleaved sums (not bound by the latency of one chain). */
static double sum4(const double *v, size_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t e = 0;
    for (; e + 4 <= n; e += 4) {
        s0 += v[e];
        s1 += v[e + 1];
        s2 += v[e + 2];
        s3 += v[e + 3];
    }
    for (; e < n; e++)
        s0 += v[e];
    return (s0 + s1) + (s2 + s3);
}

/* Directions per step (cr_tape_hessian's chunk; forward and second-order sweeps take at
 * most this many). */
#define K_MAX_DIRS 8

/* An argument's tangent along one direction as the loops read it: element i of the call is
 * p[i] (unit stride, offset applied), or c for every element when p is NULL; nz false when
 * it is zero. */
typedef struct ktan {
    const double *p;
    double c;
    bool nz;
} ktan;

static cr_status step_failed(cr_tape *t, const knode *nd, const char *what, cr_status st)
{
    if (t->status != CR_OK)
        return t->status;
    const char *msg = cr_ctx_errmsg(t->ctx);
    return cr__tape_fail(t, st, "kernel %s: %s failed: %s", nd->base.fname, what,
                         msg[0] != '\0' ? cr__after_name(msg, nd->base.fname) : cr_status_str(st));
}

/* The tangents of every argument along direction d; *any says whether one is nonzero. An
 * array's tangent (any layout, from the sweep's array tangents) is read as a dense
 * row-major f64 array. */
static cr_status arg_tangents(cr_tape *t, const knode *nd, const double *tan, size_t k, size_t d,
                              ktan *dx, bool *any)
{
    *any = false;
    for (unsigned j = 0; j < nd->k->nargs; j++) {
        const karg *a = &nd->arg[j];
        ktan *x = &dx[j];
        x->p = NULL;
        x->c = 0.0;
        x->nz = false;
        if (a->code == CR_VAR_CONST)
            continue;
        if (!(a->code & CR__ASLOT_BIT)) {
            x->c = tan[(size_t)a->code * k + d];
            x->nz = x->c != 0.0;
        } else {
            uint32_t s = a->code & ~CR__ASLOT_BIT;
            cr_tangent *tp = cr__asweep_slot(t, s, d, false);
            if (tp == NULL || cr_tangent_is_zero(*tp))
                continue;
            const cr_array *v = t->avars.slots[s].val, *ta;
            cr_status st =
                cr__tan_array(t->arena, nd->base.fname, *tp, v->ndim, v->shape, CR_DT_F64, &ta);
            if (st != CR_OK)
                return st;
            if (ta == NULL)
                continue;
            x->p = (const double *)ta->data + a->off;
            x->nz = true;
        }
        *any |= x->nz;
    }
    return CR_OK;
}

/*
 * The forward step: the result's tangent along each direction, element by element
 * ẏ_e = Σ_j ∂f/∂x_j(x_e) ẋ_j,e with the partials of the dual loop: an array of n elements
 * for cr_av_kernel, the sum over the elements for cr_av_kernel_sum (added to tan[i * k + d],
 * which holds a seed or zero).
 */
static cr_status kernel_forward(cr_tape *t, const cr__anode *an, double *tan, size_t k, size_t i)
{
    const knode *nd = (const knode *)(const void *)an;
    const unsigned m = nd->k->nargs;
    const size_t n = nd->n;
    const bool arr = an->out != CR_VAR_CONST;
    if (k > K_MAX_DIRS)
        return cr__tape_fail(t, CR_EINVAL, "kernel %s: %zu direction%s in one sweep (at most %d)",
                             an->fname, k, CR__S(k), K_MAX_DIRS);
    if (arr && cr__asweep_slot(t, an->out, 0, false) == NULL)
        return cr__tape_fail(t, CR_EINVAL, "tape: %s: forward sweep without array tangents",
                             an->fname);
    ktan dx[K_MAX_DIRS][CR_K_MAX_ARGS];
    bool nzd[K_MAX_DIRS], any = false;
    double *yd[K_MAX_DIRS], sum[K_MAX_DIRS];
    cr_status st = CR_OK;
    for (size_t d = 0; d < k && st == CR_OK; d++) {
        st = arg_tangents(t, nd, tan, k, d, dx[d], &nzd[d]);
        any |= nzd[d];
        yd[d] = NULL;
        sum[d] = 0.0;
    }
    if (st != CR_OK)
        return step_failed(t, nd, "the forward step", st);
    if (!any)
        return CR_OK; /* a zero tangent along every direction */
    cr_array *ya[K_MAX_DIRS];
    const cr_array *yv = arr ? an->y.u.arr : NULL; /* the recording's result: its shape */
    for (size_t d = 0; d < k && arr; d++) {
        if (nzd[d] &&
            (st = cr__new(t->arena, CR_DT_F64, yv->ndim, yv->shape, false, &ya[d])) != CR_OK)
            return step_failed(t, nd, "the forward step", st);
        yd[d] = nzd[d] ? ya[d]->data : NULL;
    }
    kblock b;
    double ybuf[CR_K_BLOCK];
    const double *q[CR_K_MAX_ARGS];
    for (size_t base = 0; base < n; base += CR_K_BLOCK) {
        size_t nb = n - base < CR_K_BLOCK ? n - base : CR_K_BLOCK;
        block_args(nd, base, nb, &b, base == 0, q);
        k_partials(nd, nb, q, b.P);
        for (size_t d = 0; d < k; d++) {
            if (!nzd[d])
                continue;
            double *y = arr ? yd[d] + base : ybuf;
            bool first = true;
            for (unsigned j = 0; j < m; j++) {
                const ktan *x = &dx[d][j];
                const double *p = b.P + (size_t)j * CR_K_BLOCK;
                if (!x->nz)
                    continue;
                if (first && x->p != NULL)
                    for (size_t e = 0; e < nb; e++)
                        y[e] = p[e] * x->p[base + e];
                else if (first)
                    for (size_t e = 0; e < nb; e++)
                        y[e] = p[e] * x->c;
                else if (x->p != NULL)
                    for (size_t e = 0; e < nb; e++)
                        y[e] += p[e] * x->p[base + e];
                else
                    for (size_t e = 0; e < nb; e++)
                        y[e] += p[e] * x->c;
                first = false;
            }
            if (!arr)
                sum[d] += sum4(y, nb);
        }
    }
    for (size_t d = 0; d < k; d++) {
        if (!arr) {
            tan[i * k + d] += sum[d];
        } else if (nzd[d]) {
            cr_tangent *slot = cr__asweep_slot(t, an->out, d, false);
            st = cr_tangent_is_zero(*slot)
                     ? (*slot = cr_tangent_array(ya[d]), CR_OK)
                     : cr_tangent_add(t->arena, *slot, cr_tangent_array(ya[d]), slot);
            if (st != CR_OK)
                return step_failed(t, nd, "the forward step", st);
        }
    }
    return CR_OK;
}

/* The derivative of slot s's shadow along direction d as a dense f64 buffer the step may add
 * into: the accumulator itself when it is one (a writable array nobody else holds), else a
 * buffer holding its value (zeros for a zero accumulator). */
static cr_status dshadow_of(cr_tape *t, uint32_t s, size_t d, size_t numel, double **out)
{
    cr_tangent *acc = cr__asweep_slot(t, s, d, true);
    if (acc == NULL)
        return CR_EINVAL;
    if (acc->tag == CR_TAN_ARRAY && (acc->u.arr->flags & CR_ARRAY_WRITABLE) &&
        acc->u.arr->dtype == CR_DT_F64 && cr__is_contig_dense(acc->u.arr) &&
        cr_array_numel(acc->u.arr) == numel) {
        *out = acc->u.arr->data;
        return CR_OK;
    }
    cr_array *buf = NULL;
    cr_status st = dense_buffer(t, t->avars.slots[s].val, numel, &buf);
    if (st != CR_OK)
        return st;
    memset(buf->data, 0, numel * sizeof(double));
    if (!cr_tangent_is_zero(*acc) && (st = cr__add_into(t->arena, buf, *acc)) != CR_OK)
        return st;
    *acc = cr_tangent_array(buf);
    *out = buf->data;
    return CR_OK;
}

/* Scratch of the second-order step: the tangents of scalar and zero arguments broadcast over
 * a block (fill[j] elements of value fc[j] written), and the partials' derivatives. */
typedef struct kblock2 {
    double tb[CR_K_MAX_ARGS][CR_K_BLOCK];
    double PD[CR_K_MAX_ARGS * CR_K_BLOCK];
    size_t fill[CR_K_MAX_ARGS];
    double fc[CR_K_MAX_ARGS];
} kblock2;

/* out[e] (+)= a[e] * P[e] + b[e] * PD[e] over a block, where a and b are arrays (step 1) or
 * one value (NULL array, value av / bv; a zero value drops its term). Returns the sum of the
 * terms when out is NULL. */
static double axpy2(double *out, size_t nb, const double *a, double av, const double *P,
                    const double *b, double bv, const double *PD)
{
    bool ta = a != NULL || av != 0.0, tb = PD != NULL && (b != NULL || bv != 0.0);
    if (out == NULL) {
        double w[CR_K_BLOCK];
        memset(w, 0, nb * sizeof *w);
        axpy2(w, nb, a, av, P, b, bv, PD);
        return sum4(w, nb);
    }
    if (ta && a != NULL)
        for (size_t e = 0; e < nb; e++)
            out[e] += a[e] * P[e];
    else if (ta)
        for (size_t e = 0; e < nb; e++)
            out[e] += av * P[e];
    if (tb && b != NULL)
        for (size_t e = 0; e < nb; e++)
            out[e] += b[e] * PD[e];
    else if (tb)
        for (size_t e = 0; e < nb; e++)
            out[e] += bv * PD[e];
    return 0.0;
}

/*
 * The second-order reverse step (forward-over-reverse). With g = ∂f/∂x at each element and
 * ġ_d its derivative along direction d (the hyper-dual loop), every argument gets
 *     x̄   += ȳ g
 *     x̄̇_d += ẏ̄_d g + ȳ ġ_d
 * element by element (summed over the elements for scalar arguments). ȳ and ẏ̄ are the
 * result's adjoint and its derivatives: adj[i] and adjd[i * k + d] for a sum, the slot's
 * shadow and its derivatives for an array result (consumed).
 */
static cr_status kernel_pull2(cr_tape *t, const cr__anode *an, size_t i, double *adj, double *adjd,
                              const double *tan, size_t k)
{
    const knode *nd = (const knode *)(const void *)an;
    const unsigned m = nd->k->nargs;
    const size_t n = nd->n;
    const bool arr = an->out != CR_VAR_CONST;
    if (!has_second(nd))
        return cr__tape_fail(t, CR_EUNIMPL, "kernel %s: no hyper-dual loop (second-order form)",
                             an->fname);
    /* (array arguments and results exist only with the sweep's array state) */
    if (k > K_MAX_DIRS || (arr && cr__asweep_slot(t, an->out, 0, true) == NULL))
        return cr__tape_fail(t, CR_EINVAL,
                             "tape: kernel %s: second-order step without its state (%zu "
                             "directions)",
                             an->fname, k);
    /* ȳ, and ẏ̄ along each direction */
    cr_status st = CR_OK;
    double gs = 0.0, gsd[K_MAX_DIRS];
    const double *gy = NULL, *gyd[K_MAX_DIRS];
    bool ybar, ybd[K_MAX_DIRS], anyd = false;
    if (!arr) {
        gs = adj[i];
        ybar = gs != 0.0;
    } else {
        cr_tangent acc = t->avars.slots[an->out].acc;
        ybar = !cr_tangent_is_zero(acc);
        if (ybar && (st = result_cotangent(t, acc, n, &gy)) != CR_OK)
            return step_failed(t, nd, "the second-order step", st);
    }
    for (size_t d = 0; d < k; d++) {
        gyd[d] = NULL;
        gsd[d] = 0.0;
        if (!arr) {
            gsd[d] = adjd[i * k + d];
            ybd[d] = gsd[d] != 0.0;
        } else {
            cr_tangent *ap = cr__asweep_slot(t, an->out, d, true);
            ybd[d] = !cr_tangent_is_zero(*ap);
            if (ybd[d] && (st = result_cotangent(t, *ap, n, &gyd[d])) != CR_OK)
                return step_failed(t, nd, "the second-order step", st);
            *ap = cr_tangent_zero(); /* consumed */
        }
        anyd |= ybd[d];
    }
    if (!ybar && !anyd)
        return CR_OK;
    /* The arguments' tangents (needed for ġ, when ȳ is nonzero) */
    ktan dx[K_MAX_DIRS][CR_K_MAX_ARGS];
    bool hyper[K_MAX_DIRS], touch[K_MAX_DIRS];
    for (size_t d = 0; d < k; d++) {
        bool nz = false;
        if (ybar && (st = arg_tangents(t, nd, tan, k, d, dx[d], &nz)) != CR_OK)
            return step_failed(t, nd, "the second-order step", st);
        hyper[d] = ybar && nz;
        touch[d] = hyper[d] || ybd[d];
    }
    /* Shadows and their derivatives, one per distinct slot (own[j]: the first argument
     * reading j's slot); fresh shadows are zeroed. */
    double *sh[CR_K_MAX_ARGS], *dsh[CR_K_MAX_ARGS][K_MAX_DIRS];
    unsigned own[CR_K_MAX_ARGS];
    slot_owners(nd, own);
    for (unsigned j = 0; j < m && st == CR_OK; j++) {
        uint32_t c = nd->arg[j].code;
        if (c == CR_VAR_CONST || !(c & CR__ASLOT_BIT))
            continue;
        if (own[j] != j)
            continue;
        uint32_t s = c & ~CR__ASLOT_BIT;
        size_t numel = nd->arg[j].numel;
        sh[j] = NULL;
        if (ybar) {
            kshadow w;
            if ((st = shadow_of(t, s, numel, &w)) != CR_OK)
                break;
            if (w.z != SIZE_MAX)
                memset(w.d, 0, numel * sizeof(double));
            sh[j] = w.d;
        }
        for (size_t d = 0; d < k && st == CR_OK; d++) {
            dsh[j][d] = NULL;
            if (touch[d])
                st = dshadow_of(t, s, d, numel, &dsh[j][d]);
        }
    }
    /* The block's scratch is given back when the step ends (the shadows above stay). */
    cr_arena_mark scratch = cr_arena_get_mark(t->arena);
    kblock2 *b2 = st == CR_OK ? cr_arena_alloc(t->arena, sizeof *b2, _Alignof(kblock2)) : NULL;
    if (st == CR_OK && b2 == NULL)
        st = CR__ALLOC_STATUS(t->arena);
    if (st != CR_OK)
        return step_failed(t, nd, "the second-order step", st);
    for (unsigned j = 0; j < m; j++)
        b2->fill[j] = 0;
    kblock b;
    double sacc[CR_K_MAX_ARGS] = {0.0, 0.0, 0.0, 0.0};
    const double *q[CR_K_MAX_ARGS], *qd[CR_K_MAX_ARGS];
    for (size_t base = 0; base < n; base += CR_K_BLOCK) {
        size_t nb = n - base < CR_K_BLOCK ? n - base : CR_K_BLOCK;
        bool haveP = false;
        block_args(nd, base, nb, &b, base == 0, q);
        for (size_t d = 0; d < k; d++) {
            if (!touch[d])
                continue;
            const double *PD = NULL;
            if (hyper[d]) {
                for (unsigned j = 0; j < m; j++) {
                    const ktan *x = &dx[d][j];
                    if (x->p != NULL) {
                        qd[j] = x->p + base;
                        continue;
                    }
                    if (b2->fill[j] < nb || b2->fc[j] != x->c) {
                        for (size_t e = 0; e < nb; e++)
                            b2->tb[j][e] = x->c;
                        b2->fill[j] = nb;
                        b2->fc[j] = x->c;
                    }
                    qd[j] = b2->tb[j];
                }
                k_second(nd, nb, q, qd, b.P, b2->PD);
                PD = b2->PD;
                haveP = true;
            } else if (!haveP) {
                k_partials(nd, nb, q, b.P);
                haveP = true;
            }
            const double *ga = gyd[d] != NULL ? gyd[d] + base : NULL;
            const double *gb = gy != NULL ? gy + base : NULL;
            for (unsigned j = 0; j < m; j++) {
                uint32_t c = nd->arg[j].code;
                if (c == CR_VAR_CONST)
                    continue;
                const double *P = b.P + (size_t)j * CR_K_BLOCK;
                const double *Pd = PD != NULL ? PD + (size_t)j * CR_K_BLOCK : NULL;
                if (!(c & CR__ASLOT_BIT))
                    adjd[(size_t)c * k + d] += axpy2(NULL, nb, ga, gsd[d], P, gb, gs, Pd);
                else
                    axpy2(dsh[own[j]][d] + nd->arg[j].off + base, nb, ga, gsd[d], P, gb, gs, Pd);
            }
        }
        if (!ybar)
            continue;
        if (!haveP)
            k_partials(nd, nb, q, b.P);
        const double *gb = gy != NULL ? gy + base : NULL;
        for (unsigned j = 0; j < m; j++) {
            uint32_t c = nd->arg[j].code;
            if (c == CR_VAR_CONST)
                continue;
            const double *P = b.P + (size_t)j * CR_K_BLOCK;
            if (!(c & CR__ASLOT_BIT))
                sacc[j] += axpy2(NULL, nb, gb, gs, P, NULL, 0.0, NULL);
            else
                axpy2(sh[own[j]] + nd->arg[j].off + base, nb, gb, gs, P, NULL, 0.0, NULL);
        }
    }
    for (unsigned j = 0; j < m; j++) {
        uint32_t c = nd->arg[j].code;
        if (c != CR_VAR_CONST && !(c & CR__ASLOT_BIT))
            adj[c] += sacc[j];
    }
    if (arr && ybar)
        t->avars.slots[an->out].acc = cr_tangent_zero(); /* consumed: its record made it */
    cr_arena_rewind(t->arena, scratch);
    return CR_OK;
}
