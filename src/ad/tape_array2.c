/*
 * Array records (K_ARRAY, tape_array.c) in forward sweeps and in second-order sweeps.
 * Forward: each record's result tangent comes from the function's frule, called on the
 * recorded arguments with their tangents. Second order (forward-over-reverse): each record's
 * arguments get x̄ += pullback(ȳ) and x̄̇ += pullback(ȳ̇) + S, where S, the derivative of the
 * pullback along the tangents ẋ applied to ȳ, is found by the function's class (a table
 * below, keyed by the function's identity): zero for linear functions, calls of the same
 * rrule at tangents for multilinear ones, and the row's second derivatives (as the scalar
 * second-order tape takes them) for broadcasts of a scalar-table function (and maps); the
 * other nonlinear functions (logsumexp, softmax, prod, norm, det, sum(f, A), ...) have forms
 * of their own in tape_array2_forms.c.
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <chainrules/rules_array.h>
#include <chainrules/rules_complex.h>
#include <chainrules/rules_linalg.h>
#include <chainrules/rules_math.h>

#include "../rulesets/array_impl.h"
#include "tape_array2_forms.h"
#include "tape_impl.h"

#define MAX_ARGS 16 /* as tape_array.c */
#define MAX_DIRS 8  /* directions per second-order sweep (cr_tape_hessian's chunk) */

/* ---- Second-order classes --------------------------------------------------------------- */

enum {
    SO_NONE = 0, /* no second-order form: refused on a second-order tape */
    SO_LINEAR,   /* linear in its differentiable arguments: S = 0 */
    SO_MULTI,    /* multilinear: S from the rrule called with one argument replaced by its
                    tangent */
    SO_ROW,      /* broadcast of a scalar-table function: S from the row's second derivatives */
    SO_FORM      /* a nonlinear function with its own second-order form (tape_array2_forms.c) */
};

/*
 * Functions linear in all their differentiable arguments (integers, ranges, dims and
 * index arrays are not differentiable): their pullbacks do not depend on the point, so the
 * pullback's derivative along any tangent is zero. `sum(f, A)` and `mean(f, A)` take a
 * function first and are not linear: they have their own form (tape_array2_forms.c).
 */
static const cr_value *const k_linear[] = {
    &cr_fn_sum,       &cr_fn_mean,      &cr_fn_view,        &cr_fn_getindex,    &cr_fn_reshape,
    &cr_fn_transpose, &cr_fn_adjoint,   &cr_fn_permutedims, &cr_fn_reverse,     &cr_fn_circshift,
    &cr_fn_repeat,    &cr_fn_cat,       &cr_fn_vcat,        &cr_fn_hcat,        &cr_fn_stack,
    &cr_fn_fill,      &cr_fn_dropdims,  &cr_fn_diag,        &cr_fn_diagm,       &cr_fn_triu,
    &cr_fn_tril,      &cr_fn_cumsum,    &cr_fn_tr,          &cr_fn_add_uniform, &cr_fn_sub_uniform,
    &cr_fn_symmetric, &cr_fn_hermitian, &cr_fn_diagonal,
};

/*
 * Functions linear in each differentiable argument separately (matmul, dot(x, y) and
 * dot(x, A, y), kron, cross, λI * A). For such f the pullback's component for argument j is
 * linear in every other argument l, so its derivative along the tangents is the sum over
 * l != j of the same pullback at the point with argument l replaced by ẋ_l.
 */
static const cr_value *const k_multi[] = {
    &cr_fn_matmul, &cr_fn_dot, &cr_fn_kron, &cr_fn_cross, &cr_fn_mul_uniform,
};

/*
 * Piecewise linear functions: their pullback does not depend on the point where it is
 * taken, as long as the choice the rule made there stands. maximum and minimum put ȳ on the
 * first extremal element of each slice, and findmax, findmin and extrema likewise (with or
 * without dims; tuple results); sort sends the cotangent back through the permutation,
 * partialsort to the k-th element, unique to the first occurrence of each value; asum
 * (Σ |x_i|) multiplies it by the signs. So S = 0. At a tie (or a zero of asum) the pullback
 * jumps as the tie breaks: no second derivative exists there either way, and S = 0 gives the
 * Hessian of the branch the rule took.
 */
static const cr_value *const k_piecewise[] = {&cr_fn_maximum,     &cr_fn_minimum, &cr_fn_findmax,
                                              &cr_fn_findmin,     &cr_fn_extrema, &cr_fn_sort,
                                              &cr_fn_partialsort, &cr_fn_unique,  &cr_fn_asum};

/* Scalar rows whose broadcasts are linear, and the bilinear one. */
static const cr_value *const k_linear_rows[] = {&cr_fn_add, &cr_fn_sub, &cr_fn_neg,
                                                &cr_fn_identity};

/* The real-linear maps of a complex number (not scalar-table rows): their broadcasts take a
 * complex array (eigvals_general's, eigen_general's results) to real ones, with S = 0. */
static const cr_value *const k_linear_cplx[] = {&cr_fn_creal, &cr_fn_cimag, &cr_fn_conj};

static bool in_table(const cr_function *fn, const cr_value *const *tab, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (tab[i]->u.func.fn == fn)
            return true;
    return false;
}

#define IN_TABLE(fn, tab) in_table((fn), (tab), sizeof(tab) / sizeof((tab)[0]))

/* The class of f(vals...); *row is the broadcast's row for SO_ROW, *form the form for SO_FORM,
 * *why a reason for SO_NONE (or NULL). map(f, A...) is a broadcast over arrays of one shape. */
static int so_class(const cr_value *f, const cr_value *vals, const uint32_t *codes, size_t nargs,
                    const cr_scalar_rule **row, cr__so_form_fn *form, const char **why)
{
    const cr_function *fn = f->u.func.fn;
    *row = NULL;
    *why = NULL;
    if (fn == cr_fn_broadcast.u.func.fn || fn == cr_fn_map.u.func.fn) {
        if (nargs < 2 || vals[0].kind != CR_KIND_FUNC || vals[0].u.func.fn == NULL)
            return SO_NONE;
        const cr_function *g = vals[0].u.func.fn;
        if (nargs == 2 && IN_TABLE(g, k_linear_cplx))
            return SO_LINEAR;
        const cr_scalar_rule *r = cr_scalar_rule_of(g);
        if (r == NULL || r->nout != 1 || r->nin != nargs - 1)
            return SO_NONE;
        if (IN_TABLE(g, k_linear_rows))
            return SO_LINEAR;
        if (g == cr_fn_mul.u.func.fn)
            return SO_MULTI;
        *row = r;
        return SO_ROW;
    }
    if ((*form = cr__so_form_of(f, vals, codes, nargs, why)) != NULL)
        return SO_FORM;
    if (*why != NULL)
        return SO_NONE;
    if (IN_TABLE(fn, k_linear))
        return nargs > 0 && vals[0].kind == CR_KIND_FUNC ? SO_NONE : SO_LINEAR;
    if (IN_TABLE(fn, k_piecewise))
        return nargs > 0 && vals[0].kind == CR_KIND_FUNC ? SO_NONE : SO_LINEAR;
    if (IN_TABLE(fn, k_multi))
        return SO_MULTI;
    return SO_NONE;
}

struct cr__aext {
    cr_value f;                /* the function called (a copy) */
    const cr_value *vals;      /* its arguments' values (the tape's copy, in the arena) */
    const cr_scalar_rule *row; /* SO_ROW: the broadcast's row */
    cr__so_form_fn form;       /* SO_FORM: the function's second-order form */
    int cls;                   /* SO_*; SO_NONE on forward tapes for unknown functions */
};

struct cr__asweep {
    size_t k;
    cr_tangent *tan;  /* tan[slot * k + d]: array variable slot's tangent along direction d */
    cr_tangent *accd; /* second order: the derivative of slot's shadow along d, else NULL */
};

static bool is_complex(const cr_value *v)
{
    return v->kind == CR_KIND_C128 ||
           (v->kind == CR_KIND_ARRAY && v->u.arr != NULL && v->u.arr->dtype == CR_DT_C128);
}

cr_status cr__array_ext(cr_tape *t, const cr_value *f, const cr_value *vals, const uint32_t *codes,
                        size_t nargs, const cr__aext **out)
{
    const char *fname = f->u.func.fn->name;
    const cr_scalar_rule *row;
    cr__so_form_fn form = NULL;
    const char *why;
    int cls = so_class(f, vals, codes, nargs, &row, &form, &why);
    if (t->flags & (CR_TAPE_SECOND_ORDER | CR__TAPE_SO_CHECK)) {
        if (cls == SO_NONE && why != NULL)
            return cr__tape_fail(t, CR_EUNIMPL, "%s: no second-order form on the tape: %s", fname,
                                 why);
        if (cls == SO_NONE)
            return cr__tape_fail(t, CR_EUNIMPL,
                                 "%s: no second-order form on the tape (second-order tapes record "
                                 "linear and multilinear array functions, broadcasts of "
                                 "scalar-table functions and the functions of docs/engine.md's "
                                 "table)",
                                 fname);
        for (size_t j = 0; j < nargs && cls != SO_LINEAR; j++) /* S = 0 whatever the dtype */
            if (codes[j] != CR_VAR_CONST && is_complex(&vals[j]))
                return cr__tape_fail(t, CR_EUNIMPL,
                                     "%s: argument %zu is complex: second-order tapes record "
                                     "real array functions only",
                                     fname, j);
    }
    cr__aext *e = cr_arena_alloc(t->arena, sizeof *e, _Alignof(cr__aext));
    if (e == NULL)
        return cr__tape_fail(t, CR__ALLOC_STATUS(t->arena), "%s: no room for the record", fname);
    e->f = *f;
    e->vals = vals;
    e->row = row;
    e->form = form;
    e->cls = cls;
    *out = e;
    return CR_OK;
}

/* ---- Sweep state --------------------------------------------------------------------------- */

cr_status cr__array_sweep_begin(cr_tape *t, size_t k, bool second)
{
    size_t n = (size_t)t->naslots * k;
    cr__asweep *w = cr_arena_alloc(t->arena, sizeof *w, _Alignof(cr__asweep));
    cr_tangent *tan =
        w == NULL ? NULL : cr_arena_calloc(t->arena, n ? n : 1, sizeof *tan, _Alignof(cr_tangent));
    cr_tangent *accd = tan == NULL || !second ? NULL
                                              : cr_arena_calloc(t->arena, n ? n : 1, sizeof *accd,
                                                                _Alignof(cr_tangent));
    if (tan == NULL || (second && accd == NULL))
        return cr__tape_fail(t, CR__ALLOC_STATUS(t->arena),
                             "tape: no room for the tangents of %u array variables",
                             (unsigned)t->naslots);
    /* calloc'd tangents are ZeroTangent (tag 0) */
    w->k = k;
    w->tan = tan;
    w->accd = accd;
    t->asw = w;
    if (second)
        cr__array_clear(t);
    return CR_OK;
}

void cr__array_sweep_end(cr_tape *t)
{
    if (t->asw != NULL && t->asw->accd != NULL)
        cr__array_clear(t);
    t->asw = NULL;
}

/* The tangent of argument `code` of a record along direction d. */
static cr_tangent arg_tangent(const cr_tape *t, uint32_t code, const double *tan, size_t k,
                              size_t d)
{
    if (code == CR_VAR_CONST)
        return cr_tangent_zero();
    if (code & CR__ASLOT_BIT) {
        const cr__asweep *w = t->asw;
        return w == NULL ? cr_tangent_zero() : w->tan[(size_t)(code & ~CR__ASLOT_BIT) * k + d];
    }
    double v = tan[(size_t)code * k + d];
    return v == 0.0 ? cr_tangent_zero() : cr_tangent_f64(v);
}

/* A failure of a rule called by a sweep: its message is on the context. */
static cr_status rule_failed(cr_tape *t, const cr__anode *nd, const char *what, cr_status st)
{
    const char *msg = cr_ctx_errmsg(t->ctx);
    return cr__tape_fail(t, st, "%s of %s failed: %s", what, nd->fname,
                         msg[0] != '\0' ? cr__after_name(msg, nd->fname) : cr_status_str(st));
}

cr_tangent *cr__asweep_slot(cr_tape *t, uint32_t slot, size_t d, bool deriv)
{
    cr__asweep *w = t->asw;
    if (w == NULL || (deriv && w->accd == NULL))
        return NULL;
    return &(deriv ? w->accd : w->tan)[(size_t)slot * w->k + d];
}

/* A record without forward or second-order information: one made on a first-order tape. */
static cr_status no_form(cr_tape *t, const cr__anode *nd, const char *what)
{
    return cr__tape_fail(t, CR_EUNIMPL, "%s: recorded without CR_TAPE_FORWARD (%s sweeps need it)",
                         nd->fname, what);
}

/* ---- Forward ------------------------------------------------------------------------------- */

/* Add the tangent dy of a tuple result along direction d to its elements' variables: a
 * scalar element c of the record making scalar variables from i is variable i + c, an array
 * element has its slot; integer elements (constants) have no tangent. */
static cr_status tuple_tangents(cr_tape *t, const cr__anode *nd, cr_tangent dy, double *tan,
                                size_t k, size_t i, size_t d)
{
    if (cr_tangent_is_zero(dy))
        return CR_OK;
    if (dy.tag != CR_TAN_STRUCT)
        return cr__tape_fail(t, CR_EINVAL, "%s: its frule gave a %s tangent for a tuple result",
                             nd->fname, cr_tag_name((cr_tag)dy.tag));
    cr__asweep *w = t->asw;
    for (size_t o = 0; o < nd->nout; o++) {
        uint32_t c = nd->outs[o];
        cr_tangent e = cr_tangent_field(dy, o);
        cr_status st = CR_OK;
        if (c == CR_VAR_CONST || cr_tangent_is_zero(e))
            continue;
        if (cr_tangent_is_thunk(e) && (st = cr_tangent_unthunk(e, &e)) != CR_OK)
            return rule_failed(t, nd, "the frule", st);
        if (!(c & CR__ASLOT_BIT)) {
            st = cr__accum_real(t->arena, nd->fname, e, &tan[(i + c) * k + d]);
        } else if (w == NULL) {
            return cr__tape_fail(t, CR_EINVAL, "tape: %s: forward sweep without array tangents",
                                 nd->fname);
        } else {
            cr_tangent *slot = &w->tan[(size_t)(c & ~CR__ASLOT_BIT) * k + d];
            st = cr_tangent_is_zero(*slot) ? (*slot = e, CR_OK)
                                           : cr_tangent_add(t->arena, *slot, e, slot);
        }
        if (st != CR_OK)
            return rule_failed(t, nd, "the frule", st);
    }
    return CR_OK;
}

cr_status cr__array_forward(cr_tape *t, const cr__anode *nd, double *tan, size_t k, size_t i)
{
    if (nd->custom) /* an operation with its own steps */
        return cr__custom_forward(t, nd, tan, k, i);
    if (nd->pull != NULL) /* a fused kernel */
        return cr__kernel_forward(t, nd, tan, k, i);
    const cr__aext *e = nd->ext;
    if (e == NULL)
        return no_form(t, nd, "forward");
    cr__asweep *w = t->asw;
    size_t nargs = nd->nargs;
    bool scalar = nd->out == CR_VAR_CONST;
    if (!scalar && nd->nout == 0 && w == NULL)
        return cr__tape_fail(t, CR_EINVAL, "tape: %s: forward sweep without array tangents",
                             nd->fname);
    cr_tangent dargs[MAX_ARGS + 1];
    for (size_t d = 0; d < k; d++) {
        bool any = false;
        dargs[0] = cr_tangent_none(); /* the function called has no fields */
        for (size_t j = 0; j < nargs; j++) {
            dargs[j + 1] = arg_tangent(t, nd->args[j], tan, k, d);
            any = any || !cr_tangent_is_zero(dargs[j + 1]);
        }
        if (!any)
            continue; /* a zero tangent */
        cr_value y;
        cr_tangent dy;
        cr_status st = cr_frule(t->config, t->arena, dargs, &e->f, e->vals, nargs, &y, &dy);
        if (st == CR_NOTHING)
            return cr__tape_fail(
                t, CR_EUNIMPL, "%s has no frule: a forward sweep cannot go through it", nd->fname);
        if (st == CR_OK && cr_tangent_is_thunk(dy))
            st = cr_tangent_unthunk(dy, &dy);
        if (st != CR_OK)
            return rule_failed(t, nd, "the frule", st);
        if (nd->nout > 0) {
            if ((st = tuple_tangents(t, nd, dy, tan, k, i, d)) != CR_OK)
                return st;
            continue;
        }
        if (scalar) {
            st = cr__accum_real(t->arena, nd->fname, dy, &tan[i * k + d]);
        } else {
            cr_tangent *slot = &w->tan[(size_t)nd->out * k + d];
            st = cr_tangent_is_zero(*slot) ? (*slot = dy, CR_OK)
                                           : cr_tangent_add(t->arena, *slot, dy, slot);
        }
        if (st != CR_OK)
            return rule_failed(t, nd, "the frule", st);
    }
    return CR_OK;
}

/* ---- Second order ---------------------------------------------------------------------------- */

/* Add the cotangent-derivative dx of argument j along direction d. */
static cr_status add_d(cr_tape *t, const cr__anode *nd, size_t j, cr_tangent dx, double *adjd,
                       size_t k, size_t d)
{
    uint32_t c = nd->args[j];
    if (c == CR_VAR_CONST || cr_tangent_is_zero(dx))
        return CR_OK;
    if (!(c & CR__ASLOT_BIT))
        return cr__accum_real(t->arena, nd->pb.name, dx, &adjd[(size_t)c * k + d]);
    size_t s = c & ~CR__ASLOT_BIT;
    cr__aslot tmp = {t->aslots[s].val, t->asw->accd[s * k + d], NULL, false};
    cr_status st = cr__shadow_accum(t->arena, &tmp, dx);
    t->asw->accd[s * k + d] = tmp.acc;
    return st;
}

/* The value of a tangent, as an argument of a rule (a scalar or an array). */
static cr_status value_of(cr_tape *t, const cr__anode *nd, cr_tangent v, cr_value *out)
{
    cr_status st = cr_tangent_unthunk(v, &v);
    if (st != CR_OK)
        return st;
    switch ((cr_tag)v.tag) {
    case CR_TAN_F64:
        *out = cr_value_f64(v.u.f64);
        return CR_OK;
    case CR_TAN_F32:
        *out = cr_value_f32(v.u.f32);
        return CR_OK;
    case CR_TAN_ARRAY:
        *out = cr_value_array(v.u.arr);
        return CR_OK;
    default:
        return cr__tape_fail(t, CR_EUNIMPL, "%s: a tangent of kind %s cannot be used as a point",
                             nd->fname, cr_tag_name((cr_tag)v.tag));
    }
}

/*
 * S of a multilinear function: for each variable argument l and direction d, the rrule at
 * the point with argument l replaced by its tangent, pulled back with ȳ, gives the
 * derivative of every other argument's cotangent along ẋ_l.
 */
static cr_status second_multi(cr_tape *t, const cr__anode *nd, cr_tangent ybar, double *adjd,
                              const double *tan, size_t k)
{
    const cr__aext *e = nd->ext;
    size_t nargs = nd->nargs, nvar = 0;
    for (size_t j = 0; j < nargs; j++)
        nvar += nd->args[j] != CR_VAR_CONST;
    if (nvar < 2)
        return CR_OK; /* linear in its only variable argument */
    cr_value vals[MAX_ARGS];
    cr_tangent dx[MAX_ARGS + 1];
    size_t nx = nargs + 1;
    for (size_t l = 0; l < nargs; l++) {
        if (nd->args[l] == CR_VAR_CONST)
            continue;
        for (size_t d = 0; d < k; d++) {
            cr_tangent tl = arg_tangent(t, nd->args[l], tan, k, d);
            if (cr_tangent_is_zero(tl))
                continue;
            memcpy(vals, e->vals, nargs * sizeof *vals);
            cr_status st = value_of(t, nd, tl, &vals[l]);
            if (st != CR_OK)
                return t->status != CR_OK ? t->status : rule_failed(t, nd, "a tangent", st);
            cr_value y;
            cr_pullback pb;
            st = cr_rrule(t->config, t->arena, &e->f, vals, nargs, &y, &pb);
            if (st == CR_OK)
                st = cr_pullback_call(t->arena, &pb, &ybar, dx, nx);
            for (size_t j = 0; j < nargs && st == CR_OK; j++) {
                if (j == l || nd->args[j] == CR_VAR_CONST)
                    continue;
                st = cr__guard_alias(t->arena, &ybar, dx, nx, j + 1);
                if (st == CR_OK)
                    st = add_d(t, nd, j, dx[j + 1], adjd, k, d);
            }
            if (st != CR_OK)
                return rule_failed(t, nd, "the second-order term", st);
        }
    }
    return CR_OK;
}

/* An operand of the elementwise loop: p[e * step] for e < N (step 0: one value). */
typedef struct stream {
    const double *p;
    size_t step;
} stream;

/* The array a (any float dtype and strides, or a tangent already in f64) broadcast to the
 * result's shape (ndim, shape; N elements), in f64. */
static cr_status stream_of(cr_arena *arena, const cr_array *a, size_t ndim, const size_t *shape,
                           size_t N, stream *s)
{
    const cr_array *w;
    cr_status st = cr__strided(arena, a, CR_DT_F64, &w);
    if (st != CR_OK)
        return st;
    bool same = w->ndim == ndim && cr__is_contig_dense(w);
    for (size_t q = 0; q < ndim && same; q++)
        same = w->shape[q] == shape[q];
    if (same) {
        s->p = w->data;
        s->step = 1;
        return CR_OK;
    }
    cr_array *full;
    if ((st = cr__new(arena, CR_DT_F64, ndim, shape, false, &full)) != CR_OK)
        return st;
    cr__broadcast_into(full, w, 1.0);
    s->p = full->data;
    s->step = N > 0 ? 1 : 0;
    return CR_OK;
}

/* A scalar operand. */
static cr_status stream_scalar(cr_arena *arena, double v, stream *s)
{
    double *p = cr_arena_alloc(arena, sizeof *p, _Alignof(double));
    if (p == NULL)
        return CR__ALLOC_STATUS(arena);
    *p = v;
    s->p = p;
    s->step = 0;
    return CR_OK;
}

/*
 * S of a broadcast f.(x_1, ..., x_n) of a scalar row: per element e of the result,
 *     S_j(e) = ȳ(e) Σ_l ∂²f/∂x_j∂x_l (x(e)) ẋ_l(e)
 * with the row's second derivatives taken as the scalar second-order tape takes them
 * (cr__row_hessian: complex step, or central differences for real-only rows); then summed
 * over the dimensions argument j was broadcast along (unbroadcast), all of them for a
 * scalar argument.
 */
static cr_status second_row(cr_tape *t, const cr__anode *nd, cr_tangent ybar, double *adjd,
                            const double *tan, size_t k)
{
    const cr__aext *e = nd->ext;
    const cr_scalar_rule *row = e->row;
    cr_arena *arena = t->arena;
    size_t n = row->nin;
    /* A broadcast over scalars only has a scalar result: one element of no dimension. */
    static const size_t k_no_shape[1] = {1};
    const cr_array *yv = nd->out == CR_VAR_CONST ? NULL : t->aslots[nd->out].val;
    size_t ndim = yv != NULL ? yv->ndim : 0, N = yv != NULL ? cr_array_numel(yv) : 1;
    const size_t *shape = yv != NULL ? yv->shape : k_no_shape;
    const char *who = nd->fname;
    stream X[CR_SCALAR_MAX_IN], XD[CR_SCALAR_MAX_IN][MAX_DIRS];
    double *S[CR_SCALAR_MAX_IN][MAX_DIRS], Ssc[CR_SCALAR_MAX_IN][MAX_DIRS];
    bool var[CR_SCALAR_MAX_IN], arr[CR_SCALAR_MAX_IN], nzd[CR_SCALAR_MAX_IN][MAX_DIRS];
    unsigned cols = 0;
    const cr_array *Yb;
    cr_status st = cr__tan_array(arena, who, ybar, ndim, shape, CR_DT_F64, &Yb);
    if (st != CR_OK || Yb == NULL)
        return st;
    for (size_t j = 0; j < n && st == CR_OK; j++) {
        const cr_value *v = &e->vals[j + 1];
        uint32_t c = nd->args[j + 1];
        var[j] = c != CR_VAR_CONST;
        arr[j] = v->kind == CR_KIND_ARRAY;
        cols |= var[j] ? 1u << j : 0u;
        st = arr[j] ? stream_of(arena, v->u.arr, ndim, shape, N, &X[j])
                    : stream_scalar(arena, creal(cr__scalar_of(v)), &X[j]);
        for (size_t d = 0; d < k && st == CR_OK && var[j]; d++) {
            cr_tangent td = arg_tangent(t, c, tan, k, d);
            nzd[j][d] = !cr_tangent_is_zero(td);
            Ssc[j][d] = 0.0;
            S[j][d] = NULL;
            if (arr[j]) {
                cr_array *buf;
                if ((st = cr__new(arena, CR_DT_F64, ndim, shape, true, &buf)) != CR_OK)
                    break;
                S[j][d] = buf->data;
            }
            if (!nzd[j][d])
                continue;
            if (arr[j]) {
                const cr_array *ta;
                st = cr__tan_array(arena, who, td, v->u.arr->ndim, v->u.arr->shape, CR_DT_F64, &ta);
                if (st == CR_OK && ta == NULL)
                    nzd[j][d] = false;
                else if (st == CR_OK)
                    st = stream_of(arena, ta, ndim, shape, N, &XD[j][d]);
            } else {
                st = stream_scalar(arena, tan[(size_t)c * k + d], &XD[j][d]);
            }
        }
    }
    if (st != CR_OK)
        return st;
    const double *yb = Yb->data;
    for (size_t el = 0; el < N; el++) {
        double g = yb[el];
        if (g == 0.0)
            continue;
        double x[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
        double H[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
        for (size_t j = 0; j < n; j++)
            x[j] = X[j].p[el * X[j].step];
        /* the partials at x (cr__row_hessian starts from them) */
        row->f64(x, Y, D);
        cr__row_hessian(row, x, D, H, cols);
        for (size_t d = 0; d < k; d++)
            for (size_t j = 0; j < n; j++) {
                if (!var[j])
                    continue;
                double s = 0.0;
                for (size_t l = 0; l < n; l++)
                    if (var[l] && nzd[l][d])
                        s += H[j * n + l] * XD[l][d].p[el * XD[l][d].step];
                if (arr[j])
                    S[j][d][el] += g * s;
                else
                    Ssc[j][d] += g * s;
            }
    }
    /* Each argument's S, reduced to its shape. */
    for (size_t j = 0; j < n && st == CR_OK; j++) {
        if (!var[j])
            continue;
        const cr_value *v = &e->vals[j + 1];
        for (size_t d = 0; d < k && st == CR_OK; d++) {
            cr_tangent s;
            if (!arr[j]) {
                s = cr_tangent_f64(Ssc[j][d]);
            } else {
                cr_array full, *red;
                size_t sh[CR_ARRAY_MAX_DIMS];
                memcpy(sh, shape, ndim * sizeof *sh);
                if ((st = cr_array_view_init(&full, S[j][d], CR_DT_F64, ndim, sh, NULL)) != CR_OK)
                    break;
                if ((st = cr__unbroadcast(arena, &full, v->u.arr->ndim, v->u.arr->shape, &red)) !=
                    CR_OK)
                    break;
                s = cr_tangent_array(red);
            }
            st = add_d(t, nd, j + 1, s, adjd, k, d);
        }
    }
    return st;
}

/* pullback(dy) added into the derivatives along direction d. */
static cr_status pull_d(cr_tape *t, const cr__anode *nd, cr_tangent dy, double *adjd, size_t k,
                        size_t d)
{
    size_t nx = (size_t)nd->nargs + 1;
    cr_tangent dx[MAX_ARGS + 1];
    cr_status st = cr_pullback_call(t->arena, &nd->pb, &dy, dx, nx);
    for (size_t j = 0; j < nd->nargs && st == CR_OK; j++) {
        if (nd->args[j] == CR_VAR_CONST)
            continue;
        st = cr__guard_alias(t->arena, &dy, dx, nx, j + 1);
        if (st == CR_OK)
            st = add_d(t, nd, j, dx[j + 1], adjd, k, d);
    }
    return st == CR_OK ? CR_OK : rule_failed(t, nd, "the pullback", st);
}

/* The cotangent ȳ of a record's result and its derivatives ȳ̇ along the k directions (those of
 * an array result and of a tuple's array elements are consumed); *anyd when one is not zero. */
static cr_status result_cots(cr_tape *t, const cr__anode *nd, size_t i, double *adj, double *adjd,
                             size_t k, cr_tangent *ybar, cr_tangent *ybd, bool *anyd)
{
    cr__asweep *w = t->asw;
    *anyd = false;
    if (nd->nout > 0) {
        bool zero;
        cr_status st = cr__tuple_cot(t, nd, &adj[i], 1, NULL, 0, 0, ybar, &zero);
        if (st == CR_OK && zero)
            *ybar = cr_tangent_zero();
        for (size_t d = 0; d < k && st == CR_OK; d++) {
            st = cr__tuple_cot(t, nd, &adjd[i * k + d], k, w != NULL ? w->accd : NULL, k, d,
                               &ybd[d], &zero);
            if (zero)
                ybd[d] = cr_tangent_zero();
            *anyd = *anyd || !zero;
        }
        return st == CR_OK ? CR_OK : rule_failed(t, nd, "the cotangent", st);
    }
    bool scalar = nd->out == CR_VAR_CONST;
    *ybar = scalar ? (adj[i] == 0.0 ? cr_tangent_zero() : cr_tangent_f64(adj[i]))
                   : t->aslots[nd->out].acc;
    for (size_t d = 0; d < k; d++) {
        if (scalar) {
            double g = adjd[i * k + d];
            ybd[d] = g == 0.0 ? cr_tangent_zero() : cr_tangent_f64(g);
        } else {
            ybd[d] = w->accd[(size_t)nd->out * k + d];
            w->accd[(size_t)nd->out * k + d] = cr_tangent_zero(); /* consumed */
        }
        *anyd = *anyd || !cr_tangent_is_zero(ybd[d]);
    }
    return CR_OK;
}

cr_status cr__array_pull2(cr_tape *t, const cr__anode *nd, size_t i, double *adj, double *adjd,
                          const double *tan, size_t k)
{
    if (nd->custom) /* refused when recorded; a corrupt record otherwise */
        return cr__tape_fail(t, CR_EUNIMPL, "%s: no second-order step", nd->fname);
    if (nd->pull != NULL) /* a fused kernel */
        return cr__kernel_pull2(t, nd, i, adj, adjd, tan, k);
    const cr__aext *e = nd->ext;
    cr__asweep *w = t->asw;
    bool scalar = nd->out == CR_VAR_CONST; /* one scalar, or a tuple's scalars from i on */
    bool arrays = !scalar;                 /* an array result or a tuple's array element */
    for (size_t o = 0; o < nd->nout; o++)
        arrays = arrays || (nd->outs[o] != CR_VAR_CONST && (nd->outs[o] & CR__ASLOT_BIT));
    if (e == NULL)
        return no_form(t, nd, "second-order");
    if ((arrays && (w == NULL || w->accd == NULL)) || k > MAX_DIRS)
        return cr__tape_fail(t, CR_EINVAL, "tape: %s: array record without second-order state",
                             nd->fname);
    cr_tangent ybar, ybd[MAX_DIRS];
    bool anyd;
    cr_status st = result_cots(t, nd, i, adj, adjd, k, &ybar, ybd, &anyd);
    if (st == CR_OK && !cr_tangent_is_zero(ybar)) {
        if (e->cls == SO_MULTI)
            st = second_multi(t, nd, ybar, adjd, tan, k);
        else if (e->cls == SO_ROW && (st = second_row(t, nd, ybar, adjd, tan, k)) != CR_OK)
            st = rule_failed(t, nd, "the second-order term", st);
        else if (e->cls == SO_FORM && (st = e->form(t, nd, i, ybar, adjd, tan, k)) != CR_OK)
            st = t->status != CR_OK ? t->status : rule_failed(t, nd, "the second-order term", st);
        /* the ordinary reverse step: x̄ += pullback(ȳ) */
        if (st == CR_OK)
            st = cr__array_pull(t, nd, scalar ? &adj[i] : NULL, adj);
    }
    for (size_t d = 0; d < k && anyd && st == CR_OK; d++)
        if (!cr_tangent_is_zero(ybd[d]))
            st = pull_d(t, nd, ybd[d], adjd, k, d);
    return st;
}

/* For the second-order forms (tape_array2_forms.c). */
cr_tangent cr__a2_arg_tangent(const cr_tape *t, uint32_t code, const double *tan, size_t k,
                              size_t d)
{
    return arg_tangent(t, code, tan, k, d);
}

cr_status cr__a2_add_d(cr_tape *t, const cr__anode *nd, size_t j, cr_tangent dx, double *adjd,
                       size_t k, size_t d)
{
    return add_d(t, nd, j, dx, adjd, k, d);
}

/* ---- Public sweeps --------------------------------------------------------------------------- */

/* Check a direction or tangent array (what, as the caller names it) against its variable
 * (shape, finite values). */
static cr_status check_dir(cr_tape *t, const char *who, const char *what, size_t j,
                           const cr_array *v, const cr_array *like)
{
    if (v == NULL || v->data == NULL || !cr_dtype_is_float((cr_dtype)v->dtype))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s %zu is NULL or not a float array", who, what,
                            j);
    bool same = like == NULL || v->ndim == like->ndim;
    for (size_t q = 0; same && like != NULL && q < v->ndim; q++)
        same = v->shape[q] == like->shape[q];
    if (!same) {
        char b1[64], b2[64];
        return cr_ctx_error(t->ctx, CR_ESHAPE, "%s: %s %zu is %s, its variable is %s", who, what, j,
                            cr__shape_str(v, b1, sizeof b1), cr__shape_str(like, b2, sizeof b2));
    }
    size_t m = cr_array_numel(v);
    if (v->dtype == CR_DT_F64 && cr__is_contig_dense(v)) { /* the common case, directly */
        const double *p = v->data;
        double acc[4] = {0.0, 0.0, 0.0, 0.0}; /* four chains: not bound by add latency */
        size_t e = 0;
        for (; e + 4 <= m; e += 4)
            for (size_t l = 0; l < 4; l++)
                acc[l] += p[e + l] * 0.0; /* NaN or infinite elements make it NaN */
        for (; e < m; e++)
            acc[0] += p[e] * 0.0;
        if ((acc[0] + acc[1]) + (acc[2] + acc[3]) == 0.0)
            return CR_OK;
    }
    for (size_t e = 0; e < m; e++) {
        cr_complex z = cr_array_get_linear(v, e);
        if (!isfinite(creal(z)) || !isfinite(cimag(z)))
            return cr_ctx_error(t->ctx, CR_EDOMAIN, "%s: element %zu of %s %zu is not finite", who,
                                e, what, j);
    }
    return CR_OK;
}

/* Seed the array inputs' tangents (direction 0) with v, converted to their dtypes. */
static cr_status seed_arrays(cr_tape *t, const cr_avar *as, size_t na, const cr_array *const *v)
{
    for (size_t j = 0; j < na; j++) {
        if (as[j].idx == CR_VAR_CONST)
            continue;
        const cr_array *like = t->aslots[as[j].idx].val;
        const cr_array *w;
        cr_array *c;
        cr_dtype dt = (cr_dtype)like->dtype;
        cr_status st = cr__dense(t->arena, v[j], cr__work(dt), &w);
        if (st == CR_OK && like->ndim == 2 && like->structure != CR_MAT_DENSE) {
            /* The direction as the input reads it: data changed by v read through the
             * input's structure (Symmetric: the upper triangle mirrored; Upper, Lower: one
             * triangle; Diagonal: the diagonal), which is what finite differences of the
             * input's data see. */
            cr_array s = *w;
            s.structure = like->structure;
            if (like->structure == CR_MAT_DIAGONAL)
                s.strides[0] = (ptrdiff_t)w->shape[1] + 1;
            st = cr__dense(t->arena, &s, cr__work(dt), &w);
        }
        if (st == CR_OK)
            st = cr__cast(t->arena, w, dt == CR_DT_F32 ? CR_DT_F32 : cr__work(dt), &c);
        cr_array *r;
        if (st == CR_OK)
            st = cr__view_of(t->arena, c, &r); /* never written through */
        if (st != CR_OK)
            return cr__tape_fail(t, st, "array tangents: %s", cr_ctx_errmsg(t->ctx));
        cr_tangent *slot = &t->asw->tan[as[j].idx];
        st = cr_tangent_is_zero(*slot) ? (*slot = cr_tangent_array(r), CR_OK)
                                       : cr_tangent_add(t->arena, *slot, cr_tangent_array(r), slot);
        if (st != CR_OK)
            return cr__tape_fail(t, st, "array tangents: %s", cr_ctx_errmsg(t->ctx));
    }
    return CR_OK;
}

static double *workspace(cr_tape *t, size_t n, cr_status *st)
{
    double *w = cr_arena_calloc(t->arena, n ? n : 1, sizeof(double), _Alignof(double));
    if (w == NULL)
        *st = cr__tape_fail(t, CR__ALLOC_STATUS(t->arena),
                            "tape: no room for a sweep workspace of %zu doubles", n);
    return w;
}

cr_status cr_tape_ajvp(cr_tape *t, const cr_var *xs, const double *xdot, size_t n,
                       const cr_avar *as, const cr_array *const *adot, size_t na, const cr_var *ys,
                       size_t m, double *ydot, const cr_avar *bs, size_t nb, cr_array *const *bdot)
{
    const char *who = "cr_tape_ajvp";
    if (t == NULL)
        return CR_EINVAL;
    if (cr__tape_misused(t))
        return CR_EMISUSE;
    if (t->status != CR_OK)
        return t->status;
    if (!(t->flags & CR_TAPE_FORWARD))
        return cr_ctx_error(t->ctx, CR_EMISUSE, "%s: the tape was not created with CR_TAPE_FORWARD",
                            who);
    if ((n > 0 && (xs == NULL || xdot == NULL)) || (na > 0 && (as == NULL || adot == NULL)) ||
        (m > 0 && (ys == NULL || ydot == NULL)) || (nb > 0 && (bs == NULL || bdot == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s is NULL", who,
                            n > 0 && xs == NULL      ? "xs"
                            : n > 0 && xdot == NULL  ? "xdot"
                            : na > 0 && as == NULL   ? "as"
                            : na > 0 && adot == NULL ? "adot"
                            : m > 0 && ys == NULL    ? "ys"
                            : m > 0 && ydot == NULL  ? "ydot"
                            : bs == NULL             ? "bs"
                                                     : "bdot");
    cr_status st;
    if ((st = cr__check_vars(t, who, xs, n, "input")) != CR_OK ||
        (st = cr__check_vars(t, who, ys, m, "output")) != CR_OK ||
        (st = cr__check_avars(t, who, as, na, "array input")) != CR_OK ||
        (st = cr__check_avars(t, who, bs, nb, "array output")) != CR_OK ||
        (st = cr__check_finite(t, who, xdot, n, "tangent")) != CR_OK)
        return st;
    for (size_t j = 0; j < na; j++)
        if ((st = check_dir(t, who, "tangent array", j, adot[j], as[j].a)) != CR_OK)
            return st;
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    size_t top = t->nvars;
    double *tan = workspace(t, top, &st);
    if (tan == NULL)
        return st;
    for (size_t j = 0; j < n; j++)
        if (xs[j].idx != CR_VAR_CONST)
            tan[xs[j].idx] += xdot[j];
    st = cr__array_sweep_begin(t, 1, false);
    if (st == CR_OK)
        st = seed_arrays(t, as, na, adot);
    /* every record: array records after the last scalar variable make array outputs */
    if (st == CR_OK)
        st = cr__sweep_forward(t, tan, 1, (size_t)-1, false);
    for (size_t j = 0; j < m && st == CR_OK; j++)
        ydot[j] = ys[j].idx == CR_VAR_CONST ? 0.0 : tan[ys[j].idx];
    for (size_t j = 0; j < nb && st == CR_OK; j++) {
        cr_tangent v = bs[j].idx == CR_VAR_CONST ? cr_tangent_zero() : t->asw->tan[bs[j].idx];
        st = cr__array_write_out(t, who, "output tangent array", j, v, bdot[j], bs[j].a);
    }
    cr__array_sweep_end(t);
    cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_ahvp(cr_tape *t, cr_var y, const cr_var *xs, size_t n, const double *v,
                       double *hv, const cr_avar *as, size_t na, const cr_array *const *av,
                       cr_array *const *ahv)
{
    const char *who = "cr_tape_ahvp";
    if (t == NULL)
        return CR_EINVAL;
    if (cr__tape_misused(t))
        return CR_EMISUSE;
    if (t->status != CR_OK)
        return t->status;
    if (!(t->flags & CR_TAPE_SECOND_ORDER))
        return cr_ctx_error(t->ctx, CR_EMISUSE,
                            "%s: the tape was not created with CR_TAPE_SECOND_ORDER", who);
    if ((n > 0 && (xs == NULL || v == NULL || hv == NULL)) ||
        (na > 0 && (as == NULL || av == NULL || ahv == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s is NULL", who,
                            n > 0 && xs == NULL    ? "xs"
                            : n > 0 && v == NULL   ? "v"
                            : n > 0 && hv == NULL  ? "hv"
                            : na > 0 && as == NULL ? "as"
                            : na > 0 && av == NULL ? "av"
                                                   : "ahv");
    cr_status st;
    if ((st = cr__check_vars(t, who, &y, 1, "output")) != CR_OK ||
        (st = cr__check_vars(t, who, xs, n, "input")) != CR_OK ||
        (st = cr__check_avars(t, who, as, na, "array input")) != CR_OK ||
        (st = cr__check_finite(t, who, v, n, "direction")) != CR_OK)
        return st;
    for (size_t j = 0; j < na; j++)
        if ((st = check_dir(t, who, "direction array", j, av[j], as[j].a)) != CR_OK)
            return st;
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    size_t top = y.idx == CR_VAR_CONST ? 0 : cr__sweep_top(t, (size_t)y.idx + 1);
    double *adj = workspace(t, top, &st), *tan = NULL, *adjd = NULL;
    if (adj != NULL)
        tan = workspace(t, top, &st);
    if (tan != NULL)
        adjd = workspace(t, top, &st);
    if (adjd == NULL) {
        cr_arena_rewind(t->arena, mk);
        return st;
    }
    st = cr__array_sweep_begin(t, 1, true);
    if (top > 0) {
        for (size_t j = 0; j < n; j++)
            if (xs[j].idx != CR_VAR_CONST && xs[j].idx < top)
                tan[xs[j].idx] += v[j];
        if (st == CR_OK)
            st = seed_arrays(t, as, na, av);
        if (st == CR_OK)
            st = cr__sweep_forward(t, tan, 1, top, true);
        adj[y.idx] = 1.0;
        if (st == CR_OK)
            st = cr__sweep_second(t, adj, adjd, tan, 1, top);
    }
    for (size_t j = 0; j < n && st == CR_OK; j++)
        hv[j] = xs[j].idx == CR_VAR_CONST || xs[j].idx >= top ? 0.0 : adjd[xs[j].idx];
    for (size_t j = 0; j < na && st == CR_OK; j++) {
        cr_tangent a = as[j].idx == CR_VAR_CONST ? cr_tangent_zero() : t->asw->accd[as[j].idx];
        st = cr__array_write_out(t, who, "result array", j, a, ahv[j], as[j].a);
    }
    cr__array_sweep_end(t);
    cr_arena_rewind(t->arena, mk);
    return st;
}

/* For the prepared Hessian-vector products of array inputs (prepared_hvp.c). */
cr_status cr__array_check_dir(cr_tape *t, const char *who, const char *what, size_t j,
                              const cr_array *v, const cr_array *like)
{
    return check_dir(t, who, what, j, v, like);
}

cr_status cr__array_seed(cr_tape *t, const cr_avar *as, size_t na, const cr_array *const *v)
{
    return seed_arrays(t, as, na, v);
}
