/*
 * The array rule family: its registration (cr__family_array, which calls the registrations
 * of the family's files: reduce.c, index.c, broadcast.c, gather.c, slices.c, unique.c,
 * norm.c, uniform_scaling.c and higher_order.c) and the shape functions: reshape, transpose,
 * adjoint, permutedims. They are linear, so their frules apply the function to the tangent, and
 * their pullbacks apply the adjoint map to the cotangent.
 */
#include "family.h"

/* Environment of the shape pullbacks: the projector of A and what the adjoint map needs. */
typedef struct shape_env {
    const cr_array *A;
    cr_project *pA;
    size_t ndim;
    size_t perm[CR_ARRAY_MAX_DIMS];
} shape_env;

/* The end of a shape rule's rrule once y is set: NULL in *out when only the primal is
 * asked; otherwise the environment of args[0] and *pb = {fn, env, name, nargs + 1}. */
static cr_status shape_rrule_end(cr_arena *arena, const void *udata, const cr_value *args,
                                 size_t nargs, cr_pullback_fn fn, const char *name, cr_pullback *pb,
                                 shape_env **out)
{
    *out = NULL;
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    cr_status st;
    shape_env *e = CR__PB_ENV(arena, shape_env, pA, &args[0], &st);
    if (e == NULL)
        return st;
    e->A = args[0].u.arr;
    *pb = (cr_pullback){fn, e, name, nargs + 1};
    *out = e;
    return CR_OK;
}

/* A new descriptor (flags 0) in the arena. */
static cr_status new_view(cr_arena *arena, const cr_array *like, cr_array **out)
{
    return cr__view_of(arena, like, out);
}

/* ---- reshape ---------------------------------------------------------------------------- */

static cr_status reshape_shape(cr_arena *arena, const cr_value *v, size_t *ndim, size_t *shape)
{
    int64_t one, *list = &one;
    size_t n = 1;
    cr_status st = v->kind == CR_KIND_ARRAY ? cr__int_list(arena, "reshape", v, &list, &n)
                                            : cr__int_arg(arena, "reshape", v, &one);
    if (st != CR_OK)
        return st;
    if (n > CR_ARRAY_MAX_DIMS)
        return CR__FAIL(arena, CR_EINVAL, "reshape: %zu dimension%s (at most %d)", n, CR__S(n),
                        CR_ARRAY_MAX_DIMS);
    for (size_t d = 0; d < n; d++)
        if ((st = cr__ck_extent(cr_arena_ctx(arena), "reshape", "extent", list[d], &shape[d])) !=
            CR_OK)
            return st;
    *ndim = n;
    return CR_OK;
}

static cr_status reshape_pullback(CR__PULLBACK_PARAMS)
{
    shape_env *e = env;
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "reshape_pullback", *dy, e->A->ndim, e->A->shape,
                                 cr__work((cr_dtype)e->A->dtype), &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[2] = cr_tangent_none();
    return cr__give_alias(arena, e->pA, (cr_array *)g, &dx[1]);
}

/* reshape(A, shape): y = A read in row-major order with the new extents; Ā = reshape(Ȳ). */
static cr_status reshape_rrule(CR__RRULE_PARAMS)
{
    const cr_array *A;
    cr_status st = cr__nargs_array(arena, "reshape", args, nargs, 2, 2, &A);
    size_t ndim = 0, shape[CR_ARRAY_MAX_DIMS];
    if (st == CR_OK)
        st = reshape_shape(arena, &args[1], &ndim, shape);
    if (st != CR_OK)
        return st;
    size_t n;
    if ((st = cr__ck_numel(cr_arena_ctx(arena), "reshape", ndim, shape, 0, &n)) != CR_OK)
        return st;
    if (n != cr_array_numel(A)) {
        char buf[96];
        return CR__FAIL(
            arena, CR_ESHAPE, "reshape: an array of shape %s has %zu element%s, not %zu",
            cr__shape_str(A, buf, sizeof buf), cr_array_numel(A), CR__S(cr_array_numel(A)), n);
    }
    cr_array *r = NULL;
    if (cr__is_contig_dense(A)) {
        st = new_view(arena, A, &r);
    } else {
        cr_array *c;
        st = cr__densify(arena, A, 0, &c);
        r = c;
    }
    if (st != CR_OK)
        return st;
    r->ndim = (uint8_t)ndim;
    for (size_t d = 0; d < CR_ARRAY_MAX_DIMS; d++)
        r->shape[d] = d < ndim ? shape[d] : 0;
    cr__row_major(ndim, shape, r->strides);
    r->structure = CR_MAT_DENSE;
    *y = cr_value_array(r);
    shape_env *e;
    return shape_rrule_end(arena, udata, args, nargs, reshape_pullback, "reshape_pullback", pb, &e);
}
CR__ARRAY_FN(reshape, "reshape", 2)

/* ---- transpose and adjoint --------------------------------------------------------------- */

/* transpose (conj = false) or adjoint (conj = true) of a 1-d or 2-d array, as a view when
 * the layout allows it. */
/* A conjugated copy of the complex array A in *out. */
static cr_status conj_copy(cr_arena *arena, const cr_array *A, const cr_array **out)
{
    cr_array *c;
    cr_status st = cr_array_copy(arena, A, &c);
    if (st != CR_OK)
        return st;
    cr_complex *z = c->data;
    size_t m = cr_array_nstored(c);
    for (size_t i = 0; i < m; i++)
        z[i] = conj(z[i]);
    *out = c;
    return CR_OK;
}

static cr_status transpose_of(cr_arena *arena, const char *who, const cr_array *A, bool conj_,
                              cr_array **out)
{
    if (A->ndim != 1 && A->ndim != 2)
        return CR__FAIL(arena, CR_ESHAPE, "%s: expected a vector or a matrix, got %u dimension%s",
                        who, (unsigned)A->ndim, CR__S((unsigned)A->ndim));
    bool cplx = A->dtype == CR_DT_C128;
    bool needs_conj = conj_ && cplx;
    cr_array *r = NULL;
    cr_status st;
    if (A->ndim == 1) {
        size_t n = A->shape[0];
        const cr_array *src = A;
        if (needs_conj && (st = conj_copy(arena, A, &src)) != CR_OK)
            return st;
        st = new_view(arena, src, &r);
        if (st != CR_OK)
            return st;
        r->ndim = 2;
        r->shape[0] = 1;
        r->shape[1] = n;
        r->strides[1] = src->strides[0];
        r->strides[0] = src->strides[0] * (ptrdiff_t)(n ? n : 1);
        r->flags = (uint8_t)(src == A ? 0u : CR_ARRAY_WRITABLE);
        *out = r;
        return CR_OK;
    }
    cr_matstruct s = (cr_matstruct)A->structure;
    /* Diagonal, Symmetric and Hermitian matrices are their own transpose up to conj: the
     * transpose of a complex Hermitian matrix is its conjugate, the adjoint of a complex
     * Diagonal or Symmetric one too. */
    bool self = s == CR_MAT_DIAGONAL || s == CR_MAT_SYMMETRIC || s == CR_MAT_HERMITIAN ||
                s == CR_MAT_SYMTRIDIAGONAL;
    bool conj_stored = cplx && (s == CR_MAT_HERMITIAN ? !conj_ : conj_);
    const cr_array *src = A;
    if (conj_stored && (st = conj_copy(arena, A, &src)) != CR_OK)
        return st;
    if (self) {
        if (src != A) {
            *out = (cr_array *)src;
            return CR_OK;
        }
        st = new_view(arena, A, &r);
        if (st == CR_OK)
            *out = r;
        return st;
    }
    st = new_view(arena, src, &r);
    if (st != CR_OK)
        return st;
    r->shape[0] = src->shape[1];
    r->shape[1] = src->shape[0];
    r->strides[0] = src->strides[1];
    r->strides[1] = src->strides[0];
    /* The storage transposed: a triangle or bidiagonal changes sides, a lower-triangle
     * Symmetric/Hermitian is read as an upper one (a Tridiagonal stays one). */
    static const uint8_t swapped[][2] = {{CR_MAT_UPPER, CR_MAT_LOWER},
                                         {CR_MAT_LOWER, CR_MAT_UPPER},
                                         {CR_MAT_BIDIAG_UPPER, CR_MAT_BIDIAG_LOWER},
                                         {CR_MAT_BIDIAG_LOWER, CR_MAT_BIDIAG_UPPER},
                                         {CR_MAT_UNIT_UPPER, CR_MAT_UNIT_LOWER},
                                         {CR_MAT_UNIT_LOWER, CR_MAT_UNIT_UPPER},
                                         {CR_MAT_SYMMETRIC_LOWER, CR_MAT_SYMMETRIC},
                                         {CR_MAT_HERMITIAN_LOWER, CR_MAT_HERMITIAN}};
    for (size_t k = 0; k < sizeof swapped / sizeof swapped[0]; k++)
        if (s == swapped[k][0])
            r->structure = swapped[k][1];
    r->flags = (uint8_t)(src == A ? 0u : CR_ARRAY_WRITABLE);
    *out = r;
    return CR_OK;
}

static cr_status transpose_pullback_common(const cr_tangent *dy, cr_tangent *dx, cr_arena *arena,
                                           shape_env *e, bool conj_, const char *name)
{
    const cr_array *A = e->A;
    size_t yshape[2] = {A->ndim == 1 ? 1 : A->shape[1], A->ndim == 1 ? A->shape[0] : A->shape[0]};
    const cr_array *g;
    cr_status st = cr__tan_array(arena, name, *dy, 2, yshape, cr__work((cr_dtype)A->dtype), &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    if (g == NULL) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *t;
    if (A->ndim == 1) {
        st = new_view(arena, g, &t);
        if (st != CR_OK)
            return st;
        t->ndim = 1;
        t->shape[0] = A->shape[0];
        t->shape[1] = 0;
        t->strides[0] = 1;
        t->strides[1] = 0;
        if (conj_ && g->dtype == CR_DT_C128) {
            cr_array *c;
            st = cr_array_copy(arena, t, &c);
            if (st != CR_OK)
                return st;
            cr_complex *z = c->data;
            for (size_t i = 0; i < A->shape[0]; i++)
                z[i] = conj(z[i]);
            t = c;
        }
    } else {
        st = transpose_of(arena, name, g, conj_, &t);
        if (st != CR_OK)
            return st;
    }
    return cr__give_alias(arena, e->pA, t, &dx[1]);
}

static cr_status transpose_pullback(CR__PULLBACK_PARAMS)
{
    return transpose_pullback_common(dy, dx, arena, env, false, "transpose_pullback");
}

static cr_status adjoint_pullback(CR__PULLBACK_PARAMS)
{
    return transpose_pullback_common(dy, dx, arena, env, true, "adjoint_pullback");
}

static cr_status transpose_rrule_common(cr_arena *arena, const cr_value *args, size_t nargs,
                                        cr_value *y, cr_pullback *pb, const void *udata, bool conj_)
{
    const char *who = conj_ ? "adjoint" : "transpose";
    const cr_array *A;
    cr_status st = cr__nargs_array(arena, who, args, nargs, 1, 1, &A);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = transpose_of(arena, who, A, conj_, &r);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(r);
    shape_env *e;
    return shape_rrule_end(arena, udata, args, nargs, conj_ ? adjoint_pullback : transpose_pullback,
                           conj_ ? "adjoint_pullback" : "transpose_pullback", pb, &e);
}

/* transpose(A): Ā = transpose(Ȳ). */
static cr_status transpose_rrule(CR__RRULE_PARAMS)
{
    return transpose_rrule_common(arena, args, nargs, y, pb, udata, false);
}
CR__ARRAY_FN(transpose, "transpose", 1)

/* adjoint(A) = conj(transpose(A)): Ā = adjoint(Ȳ) (the map is R-linear, its adjoint under
 * the real inner product re<X, Y> is the conjugate transpose again). */
static cr_status adjoint_rrule(CR__RRULE_PARAMS)
{
    return transpose_rrule_common(arena, args, nargs, y, pb, udata, true);
}
CR__ARRAY_FN(adjoint, "adjoint", 1)

/* ---- permutedims ------------------------------------------------------------------------ */

static cr_status permutedims_pullback(CR__PULLBACK_PARAMS)
{
    shape_env *e = env;
    const cr_array *A = e->A;
    size_t yshape[CR_ARRAY_MAX_DIMS];
    for (size_t k = 0; k < e->ndim; k++)
        yshape[k] = A->shape[e->perm[k]];
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "permutedims_pullback", *dy, e->ndim, yshape,
                                 cr__work((cr_dtype)A->dtype), &g);
    dx[0] = cr_tangent_none();
    dx[2] = cr_tangent_none();
    if (st != CR_OK || g == NULL) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    cr_array *t;
    st = new_view(arena, g, &t);
    if (st != CR_OK)
        return st;
    /* Dimension perm[k] of Ā is dimension k of Ȳ. */
    for (size_t k = 0; k < e->ndim; k++) {
        t->shape[e->perm[k]] = g->shape[k];
        t->strides[e->perm[k]] = g->strides[k];
    }
    return cr__give_alias(arena, e->pA, t, &dx[1]);
}

/* permutedims(A, perm): y[i_0..] = A[i_perm^-1 ...] (dimension k of y is perm[k] of A);
 * Ā = permutedims(Ȳ, invperm(perm)). */
static cr_status permutedims_rrule(CR__RRULE_PARAMS)
{
    const cr_array *A;
    cr_status st = cr__nargs_array(arena, "permutedims", args, nargs, 2, 2, &A);
    int64_t *perm = NULL;
    size_t np = 0;
    if (st == CR_OK)
        st = cr__int_list(arena, "permutedims", &args[1], &perm, &np);
    if (st != CR_OK)
        return st;
    bool seen[CR_ARRAY_MAX_DIMS] = {false};
    if (np != A->ndim)
        return CR__FAIL(arena, CR_EINVAL, "permutedims: %zu entries in perm for %u dimension%s", np,
                        (unsigned)A->ndim, CR__S((unsigned)A->ndim));
    for (size_t k = 0; k < np; k++) {
        if (perm[k] < 0 || (size_t)perm[k] >= np || seen[perm[k]])
            return CR__FAIL(arena, CR_EINVAL, "permutedims: perm is not a permutation of 0..%zu",
                            np - 1);
        seen[perm[k]] = true;
    }
    const cr_array *D;
    st = cr__strided(arena, A, (cr_dtype)A->dtype, &D);
    if (st != CR_OK)
        return st;
    cr_array *r = NULL;
    st = new_view(arena, D, &r);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < np; k++) {
        r->shape[k] = D->shape[perm[k]];
        r->strides[k] = D->strides[perm[k]];
    }
    r->flags = (uint8_t)(D == A ? 0u : CR_ARRAY_WRITABLE);
    *y = cr_value_array(r);
    shape_env *e;
    st = shape_rrule_end(arena, udata, args, nargs, permutedims_pullback, "permutedims_pullback",
                         pb, &e);
    for (size_t k = 0; e != NULL && k < np; k++)
        e->perm[k] = (size_t)perm[k];
    if (e != NULL)
        e->ndim = np;
    return st;
}
CR__ARRAY_FN(permutedims, "permutedims", 2)

/* ---- Test registrations ---------------------------------------------------------------- */

static cr_status sample_reshape(CR__SAMPLE_PARAMS)
{
    static const size_t in[3][3] = {{2, 3, 0}, {4, 0, 0}, {2, 3, 2}};
    static const size_t in_nd[3] = {2, 1, 3};
    static const int64_t out[3][2] = {{3, 2}, {2, 2}, {6, 2}};
    size_t k = cr__rng_below(rng, 3);
    cr_array *A, *s;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), in_nd[k], in[k], -2, 2, &A);
    if (st == CR_OK)
        st = cr__i64_array(arena, 2, out[k], &s);
    if (st != CR_OK)
        return st;
    args[0] = cr_value_array(A);
    args[1] = cr_value_array(s);
    return CR_OK;
}

/* A random vector or matrix, sometimes transposed, sometimes structured. */
static cr_status sample_matrix_arg(CR__SAMPLE_PARAMS)
{
    size_t k = cr__rng_below(rng, 6);
    cr_dtype dt = cr__rng_dtype(rng);
    cr_array *A;
    size_t shape[2] = {3, 4};
    cr_status st;
    if (k == 0) {
        st = cr__rand_array(arena, rng, dt, 1, shape, -2, 2, &A);
    } else {
        if (k >= 3)
            shape[1] = 3;
        st = cr__rand_array(arena, rng, dt, 2, shape, -2, 2, &A);
        if (st == CR_OK && k == 3)
            A->structure = CR_MAT_UPPER;
        if (st == CR_OK && k == 4)
            A->structure = dt == CR_DT_C128 ? CR_MAT_HERMITIAN : CR_MAT_SYMMETRIC;
        if (st == CR_OK && k == 5) {
            A->structure = CR_MAT_DIAGONAL;
            A->strides[0] = 1;
            A->strides[1] = 0;
        }
        if (st == CR_OK && k == 2) {
            /* A transposed view: strides (1, 3) over a 4x3 buffer. */
            A->shape[0] = 3;
            A->shape[1] = 4;
            A->strides[0] = 1;
            A->strides[1] = 3;
        }
    }
    if (st != CR_OK)
        return st;
    args[0] = cr_value_array(A);
    return CR_OK;
}

static cr_status sample_permutedims(CR__SAMPLE_PARAMS)
{
    static const size_t shape[3] = {2, 3, 4};
    static const int64_t perms[3][3] = {{2, 0, 1}, {1, 0, 2}, {0, 2, 1}};
    cr_array *A, *p;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 3, shape, -2, 2, &A);
    if (st == CR_OK)
        st = cr__i64_array(arena, 3, perms[cr__rng_below(rng, 3)], &p);
    if (st != CR_OK)
        return st;
    args[0] = cr_value_array(A);
    args[1] = cr_value_array(p);
    return CR_OK;
}

static const cr_rule_test k_test_reshape = {.sample = sample_reshape};
static const cr_rule_test k_test_matrix = {.sample = sample_matrix_arg};
static const cr_rule_test k_test_permutedims = {.sample = sample_permutedims};

cr_status cr__array_register_shape(cr_registry *reg)
{
    static const cr_argspec a_dims[2] = {{CR__M_FARRAY, NULL}, {CR_M_INT | CR_M_A_INT, NULL}};
    static const cr_argspec a_one[1] = {{CR__M_FARRAY, NULL}};
    static const cr_argspec a_perm[2] = {{CR__M_FARRAY, NULL}, {CR_M_A_INT, NULL}};
    static const cr__array_rule k[] = {
        {&reshape_function, a_dims, 2, cr__linear_frule, reshape_rrule, &k_test_reshape, CR_LINEAR,
         NULL, false},
        {&transpose_function, a_one, 1, cr__linear_frule, transpose_rrule, &k_test_matrix,
         CR_LINEAR, NULL, false},
        {&adjoint_function, a_one, 1, cr__linear_frule, adjoint_rrule, &k_test_matrix, CR_LINEAR,
         NULL, false},
        {&permutedims_function, a_perm, 2, cr__linear_frule, permutedims_rrule, &k_test_permutedims,
         CR_LINEAR, NULL, false},
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}

cr_status cr__family_array(cr_registry *reg)
{
    static cr_status (*const k_files[])(cr_registry *) = {
        cr__array_register_shape,     cr__array_register_reduce, cr__array_register_index,
        cr__array_register_broadcast, cr__array_register_gather, cr__array_register_slices,
        cr__array_register_unique,    cr__array_register_opnorm, cr__array_register_uniform,
        cr__array_register_hof,       cr__array_register_mutate, cr__array_register_select,
    };
    for (size_t i = 0; i < sizeof k_files / sizeof k_files[0]; i++) {
        cr_status st = k_files[i](reg);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}
