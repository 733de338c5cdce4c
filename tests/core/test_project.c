/*
 * Tests of ProjectTo (projection.jl): precision and realness of scalars, NoTangent for
 * integers and bools, array reshape / dtype conversion / matrix structure, structs and
 * tuples field by field, pass-through of zeros and NotImplemented, lazy projection of
 * thunks, no copy when the tangent already fits.
 *
 * Expected values are worked out by hand from the definitions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

#include "test_util.h"

/* Project dx onto primal v, expecting success. */
static cr_tangent proj(fixture *f, cr_value v, cr_tangent dx)
{
    cr_tangent out;
    assert_int_equal(cr_project_tangent(f->arena, &v, dx, &out), CR_OK);
    return out;
}

static cr_project *projector(fixture *f, cr_value v)
{
    cr_project *p = NULL;
    assert_int_equal(cr_project_new(f->arena, &v, &p), CR_OK);
    assert_non_null(p);
    return p;
}

static void assert_values(const cr_array *a, const double *want, size_t n)
{
    assert_int_equal(cr_array_numel(a), n);
    for (size_t k = 0; k < n; k++) {
        cr_complex z = cr_array_get_linear(a, k);
        if (!(creal(z) == want[k] && cimag(z) == 0.0)) {
            print_error("element %zu = %g%+gi, expected %g\n", k, creal(z), cimag(z), want[k]);
            fail();
        }
    }
}

static const cr_notimpl k_ni = {"x.c", 1, "not yet"};

/* A thunk that counts its evaluations and returns the tangent in env->value. */
typedef struct thunk_env {
    int calls;
    cr_tangent value;
} thunk_env;

static cr_status value_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    thunk_env *e = env;
    e->calls++;
    *out = e->value;
    return CR_OK;
}

/* ---- scalars --------------------------------------------------------------------------- */

static void test_f64_primal(void **state)
{
    fixture *f = *state;
    cr_value x = cr_value_f64(1.0);
    cr_tangent r = proj(f, x, cr_tangent_f32(0.5f));
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 0.5);
    r = proj(f, x, cr_tangent_c128(CMPLX(3.0, 4.0)));
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 3.0); /* the real part */
    r = proj(f, x, cr_tangent_f64(-2.25));
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, -2.25);
}

static void test_f32_primal(void **state)
{
    fixture *f = *state;
    cr_value x = cr_value_f32(1.5f);
    cr_tangent r = proj(f, x, cr_tangent_f64(0.1));
    assert_int_equal(r.tag, CR_TAN_F32);
    /* 0.1 rounded to the nearest float is 13421773 * 2^-27 */
    ASSERT_DBL((double)r.u.f32, 13421773.0 / 134217728.0);
    r = proj(f, x, cr_tangent_c128(CMPLX(3.0, 4.0)));
    assert_int_equal(r.tag, CR_TAN_F32);
    ASSERT_DBL((double)r.u.f32, 3.0);
    r = proj(f, x, cr_tangent_f32(0.25f));
    assert_int_equal(r.tag, CR_TAN_F32);
    ASSERT_DBL((double)r.u.f32, 0.25);
}

static void test_c128_primal(void **state)
{
    fixture *f = *state;
    cr_value z = cr_value_c128(CMPLX(1, 1));
    cr_tangent r = proj(f, z, cr_tangent_f64(3.0));
    assert_int_equal(r.tag, CR_TAN_C128);
    ASSERT_CPLX(r.u.c128, 3.0, 0.0);
    r = proj(f, z, cr_tangent_f32(-0.5f));
    assert_int_equal(r.tag, CR_TAN_C128);
    ASSERT_CPLX(r.u.c128, -0.5, 0.0);
    r = proj(f, z, cr_tangent_c128(CMPLX(2, -7)));
    assert_int_equal(r.tag, CR_TAN_C128);
    ASSERT_CPLX(r.u.c128, 2.0, -7.0);
}

static void test_integer_primals_give_notangent(void **state)
{
    fixture *f = *state;
    double d[2] = {1, 2};
    cr_array a = cr_array_vector(d, 2);
    thunk_env e = {.value = cr_tangent_f64(1.0)};
    cr_tangent th;
    assert_int_equal(cr_tangent_thunk(f->arena, value_fn, &e, "t", &th), CR_OK);
    cr_tangent dxs[] = {cr_tangent_f64(1.0),
                        cr_tangent_f32(1.0f),
                        cr_tangent_c128(CMPLX(1, 1)),
                        cr_tangent_array(&a),
                        th,
                        cr_tangent_none(),
                        cr_tangent_zero(),
                        cr_tangent_notimpl(&k_ni)};
    int64_t ints[2] = {1, 2};
    bool bools[2] = {true, false};
    size_t n = 2;
    cr_array ia, ba;
    assert_int_equal(cr_array_view_init(&ia, ints, CR_DT_I64, 1, &n, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&ba, bools, CR_DT_BOOL, 1, &n, NULL), CR_OK);
    cr_value prims[] = {cr_value_i64(3), cr_value_bool(true), cr_value_array(&ia),
                        cr_value_array(&ba)};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
        for (size_t j = 0; j < sizeof dxs / sizeof dxs[0]; j++) {
            cr_tangent r = proj(f, prims[i], dxs[j]);
            assert_int_equal(r.tag, CR_TAN_NONE);
        }
    assert_int_equal(e.calls, 0); /* the thunk was dropped unevaluated */
}

static void test_scalar_errors(void **state)
{
    fixture *f = *state;
    double d[2] = {1, 2};
    cr_array a = cr_array_vector(d, 2);
    cr_value x = cr_value_f64(1.0);
    cr_tangent out;
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_project_tangent(f->arena, &x, cr_tangent_array(&a), &out), CR_ETANGENT);
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_ETANGENT);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "ProjectTo(f64)"));
    assert_int_equal(cr_project_tangent(f->arena, NULL, cr_tangent_f64(1), &out), CR_EINVAL);
    assert_int_equal(cr_project_new(f->arena, &x, NULL), CR_EINVAL);
}

/* ---- zeros, NotImplemented, thunks ----------------------------------------------------- */

typedef struct point {
    double x;
    float y;
    int64_t id;
} point;

static const cr_field point_fields[] = {
    {"x", offsetof(point, x), CR_KIND_F64, NULL},
    {"y", offsetof(point, y), CR_KIND_F32, NULL},
    {"id", offsetof(point, id), CR_KIND_I64, NULL},
};
static const cr_type point_type = {"point", sizeof(point), 3, point_fields};
static const cr_type other_type = {"other", sizeof(point), 3, point_fields};

static void test_zeros_and_notimplemented_pass_through(void **state)
{
    fixture *f = *state;
    double d[4] = {1, 2, 3, 4};
    cr_array m = cr_array_matrix(d, 2, 2);
    point pt = {1, 2, 3};
    cr_value prims[] = {cr_value_f64(1), cr_value_f32(1), cr_value_c128(1), cr_value_array(&m),
                        cr_value_struct(&point_type, &pt)};
    for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++) {
        cr_project *p = projector(f, prims[i]);
        size_t used = cr_arena_used(f->arena);
        cr_tangent r;
        assert_int_equal(cr_project_apply(f->arena, p, cr_tangent_zero(), &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_ZERO);
        assert_int_equal(cr_project_apply(f->arena, p, cr_tangent_none(), &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NONE);
        assert_int_equal(cr_project_apply(f->arena, p, cr_tangent_notimpl(&k_ni), &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NOTIMPL);
        assert_ptr_equal(r.u.ni, &k_ni);
        assert_int_equal(cr_arena_used(f->arena), used); /* no allocation */
    }
}

static void test_thunk_projected_lazily(void **state)
{
    fixture *f = *state;
    thunk_env e = {.value = cr_tangent_c128(CMPLX(1.5, 2.0))};
    cr_tangent th, r, v;
    assert_int_equal(cr_tangent_thunk(f->arena, value_fn, &e, "lazy", &th), CR_OK);
    cr_value x = cr_value_f32(1.0f);
    r = proj(f, x, th);
    assert_true(cr_tangent_is_thunk(r));
    assert_ptr_not_equal(r.u.thunk, th.u.thunk);
    assert_int_equal(e.calls, 0);
    assert_int_equal(cr_tangent_unthunk(r, &v), CR_OK);
    assert_int_equal(e.calls, 1);
    assert_int_equal(v.tag, CR_TAN_F32); /* projected: real part, f32 */
    ASSERT_DBL((double)v.u.f32, 1.5);
    assert_int_equal(cr_tangent_unthunk(r, &v), CR_OK);
    assert_int_equal(e.calls, 1);

    /* The same for a matrix structure: a dense thunk value becomes Symmetric. */
    double d[4] = {1, 2, 4, 3};
    cr_array dense = cr_array_matrix(d, 2, 2);
    thunk_env e2 = {.value = cr_tangent_array(&dense)};
    assert_int_equal(cr_tangent_thunk(f->arena, value_fn, &e2, "lazy2", &th), CR_OK);
    double s[4] = {0};
    cr_array S = cr_array_matrix(s, 2, 2);
    S.structure = CR_MAT_SYMMETRIC;
    r = proj(f, cr_value_array(&S), th);
    assert_true(cr_tangent_is_thunk(r));
    assert_int_equal(e2.calls, 0);
    assert_int_equal(cr_tangent_unthunk(r, &v), CR_OK);
    assert_int_equal(e2.calls, 1);
    assert_int_equal(v.u.arr->structure, CR_MAT_SYMMETRIC);
    static const double want[4] = {1, 3, 3, 3};
    assert_values(v.u.arr, want, 4);
}

/* ---- arrays ---------------------------------------------------------------------------- */

static void test_array_fits_no_copy(void **state)
{
    fixture *f = *state;
    double p[6] = {0}, d[6] = {1, 2, 3, 4, 5, 6};
    cr_array P = cr_array_matrix(p, 2, 3), D = cr_array_matrix(d, 2, 3);
    cr_project *pr = projector(f, cr_value_array(&P));
    size_t used = cr_arena_used(f->arena);
    cr_tangent r;
    assert_int_equal(cr_project_apply(f->arena, pr, cr_tangent_array(&D), &r), CR_OK);
    assert_ptr_equal(r.u.arr, &D);
    assert_int_equal(cr_arena_used(f->arena), used);
    assert_true(cr_project_fits(pr, cr_tangent_array(&D)));
    /* A transposed view of the right shape and dtype fits too (storage is a detail). */
    size_t sh[2] = {2, 3};
    ptrdiff_t st[2] = {1, 2};
    cr_array T;
    assert_int_equal(cr_array_view_init(&T, d, CR_DT_F64, 2, sh, st), CR_OK);
    assert_int_equal(cr_project_apply(f->arena, pr, cr_tangent_array(&T), &r), CR_OK);
    assert_ptr_equal(r.u.arr, &T);
}

static void test_array_reshape(void **state)
{
    fixture *f = *state;
    double p[6] = {0}, d[6] = {1, 2, 3, 4, 5, 6};
    cr_array P = cr_array_matrix(p, 2, 3);
    cr_array V = cr_array_vector(d, 6);
    cr_tangent r = proj(f, cr_value_array(&P), cr_tangent_array(&V));
    assert_int_equal(r.u.arr->ndim, 2);
    assert_int_equal(r.u.arr->shape[0], 2);
    assert_int_equal(r.u.arr->shape[1], 3);
    static const double want[6] = {1, 2, 3, 4, 5, 6};
    assert_values(r.u.arr, want, 6);
    /* 3x2 onto 2x3: same element count, read in row-major order */
    cr_array M32 = cr_array_matrix(d, 3, 2);
    r = proj(f, cr_value_array(&P), cr_tangent_array(&M32));
    assert_int_equal(r.u.arr->shape[0], 2);
    assert_values(r.u.arr, want, 6);
    assert_ptr_not_equal(r.u.arr->data, d);

    /* element counts differ: an error naming both */
    cr_array V5 = cr_array_vector(d, 5);
    cr_tangent out;
    cr_value pv = cr_value_array(&P);
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_project_tangent(f->arena, &pv, cr_tangent_array(&V5), &out), CR_ESHAPE);
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_ESHAPE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "5"));
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "6"));
    /* a scalar onto a many-element array is no tangent of it */
    assert_int_equal(cr_project_tangent(f->arena, &pv, cr_tangent_f64(1.0), &out), CR_ETANGENT);
}

static void test_array_dtype_conversion(void **state)
{
    fixture *f = *state;
    double p[2] = {0};
    cr_array P = cr_array_vector(p, 2);
    cr_complex z[2] = {CMPLX(1, 5), CMPLX(-2, 7)};
    size_t n = 2;
    cr_array Z;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 1, &n, NULL), CR_OK);
    /* complex onto real drops the imaginary part */
    cr_tangent r = proj(f, cr_value_array(&P), cr_tangent_array(&Z));
    assert_int_equal(r.u.arr->dtype, CR_DT_F64);
    ASSERT_DBL(((double *)r.u.arr->data)[0], 1.0);
    ASSERT_DBL(((double *)r.u.arr->data)[1], -2.0);

    /* f64 onto f32 rounds */
    float q[2] = {0};
    cr_array Q;
    assert_int_equal(cr_array_view_init(&Q, q, CR_DT_F32, 1, &n, NULL), CR_OK);
    double d[2] = {0.1, 3.0};
    cr_array D = cr_array_vector(d, 2);
    r = proj(f, cr_value_array(&Q), cr_tangent_array(&D));
    assert_int_equal(r.u.arr->dtype, CR_DT_F32);
    ASSERT_DBL((double)((float *)r.u.arr->data)[0], 13421773.0 / 134217728.0);
    ASSERT_DBL((double)((float *)r.u.arr->data)[1], 3.0);

    /* real onto complex */
    r = proj(f, cr_value_array(&Z), cr_tangent_array(&D));
    assert_int_equal(r.u.arr->dtype, CR_DT_C128);
    ASSERT_CPLX(((cr_complex *)r.u.arr->data)[1], 3.0, 0.0);
}

static cr_array diagonal_view(double *d, size_t n)
{
    cr_array D = cr_array_vector(d, n);
    D.ndim = 2;
    D.shape[0] = D.shape[1] = n;
    D.strides[0] = 1;
    D.strides[1] = 0;
    D.structure = CR_MAT_DIAGONAL;
    return D;
}

static void test_diagonal(void **state)
{
    fixture *f = *state;
    double p[3] = {1, 2, 3};
    cr_array P = diagonal_view(p, 3);
    double d[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array D = cr_array_matrix(d, 3, 3);
    cr_tangent r = proj(f, cr_value_array(&P), cr_tangent_array(&D));
    assert_int_equal(r.u.arr->structure, CR_MAT_DIAGONAL);
    assert_int_equal(r.u.arr->shape[0], 3);
    assert_int_equal(r.u.arr->shape[1], 3);
    static const double want[9] = {1, 0, 0, 0, 5, 0, 0, 0, 9};
    assert_values(r.u.arr, want, 9);
    /* stored: the n diagonal entries */
    ptrdiff_t s0 = r.u.arr->strides[0];
    double *rd = r.u.arr->data;
    ASSERT_DBL(rd[0], 1.0);
    ASSERT_DBL(rd[s0], 5.0);
    ASSERT_DBL(rd[2 * s0], 9.0);

    /* a Diagonal tangent of a Diagonal primal fits as it is */
    double q[3] = {4, 5, 6};
    cr_array Q = diagonal_view(q, 3);
    r = proj(f, cr_value_array(&P), cr_tangent_array(&Q));
    assert_ptr_equal(r.u.arr, &Q);
    /* a Diagonal tangent of a dense primal stays Diagonal (a subspace) */
    double m[9] = {0};
    cr_array M = cr_array_matrix(m, 3, 3);
    r = proj(f, cr_value_array(&M), cr_tangent_array(&Q));
    assert_ptr_equal(r.u.arr, &Q);
}

static void test_symmetric(void **state)
{
    fixture *f = *state;
    double p[9] = {0};
    cr_array P = cr_array_matrix(p, 3, 3);
    P.structure = CR_MAT_SYMMETRIC;
    /* (dx + dx^T) / 2 of [1 2 3; 4 5 6; 7 8 9] = [1 3 5; 3 5 7; 5 7 9] */
    double d[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array D = cr_array_matrix(d, 3, 3);
    cr_tangent r = proj(f, cr_value_array(&P), cr_tangent_array(&D));
    assert_int_equal(r.u.arr->structure, CR_MAT_SYMMETRIC);
    static const double want[9] = {1, 3, 5, 3, 5, 7, 5, 7, 9};
    assert_values(r.u.arr, want, 9);
    /* the stored upper triangle holds the symmetrised values */
    const double *s = r.u.arr->data;
    ptrdiff_t r0 = r.u.arr->strides[0], c0 = r.u.arr->strides[1];
    ASSERT_DBL(s[0 * r0 + 1 * c0], 3.0);
    ASSERT_DBL(s[0 * r0 + 2 * c0], 5.0);
    ASSERT_DBL(s[1 * r0 + 2 * c0], 7.0);
    assert_false(cr_project_fits(projector(f, cr_value_array(&P)), cr_tangent_array(&D)));

    /* an f32 Symmetric primal converts too */
    float fp[4] = {0};
    size_t sh[2] = {2, 2};
    cr_array FP;
    assert_int_equal(cr_array_view_init(&FP, fp, CR_DT_F32, 2, sh, NULL), CR_OK);
    FP.structure = CR_MAT_SYMMETRIC;
    double d2[4] = {1, 2, 4, 3};
    cr_array D2 = cr_array_matrix(d2, 2, 2);
    r = proj(f, cr_value_array(&FP), cr_tangent_array(&D2));
    assert_int_equal(r.u.arr->dtype, CR_DT_F32);
    assert_int_equal(r.u.arr->structure, CR_MAT_SYMMETRIC);
    static const double w2[4] = {1, 3, 3, 3};
    assert_values(r.u.arr, w2, 4);
}

static void test_hermitian(void **state)
{
    fixture *f = *state;
    cr_complex p[4] = {0};
    size_t sh[2] = {2, 2};
    cr_array P;
    assert_int_equal(cr_array_view_init(&P, p, CR_DT_C128, 2, sh, NULL), CR_OK);
    P.structure = CR_MAT_HERMITIAN;
    /* dx = [1+i  2+3i; 4-i  5+2i]; (dx + dx^H)/2 =
     *   [(1+i + 1-i)/2      (2+3i + conj(4-i))/2] = [1       3+2i]
     *   [(4-i + conj(2+3i))/2  (5+2i + 5-2i)/2  ]   [3-2i    5   ] */
    cr_complex d[4] = {CMPLX(1, 1), CMPLX(2, 3), CMPLX(4, -1), CMPLX(5, 2)};
    cr_array D;
    assert_int_equal(cr_array_view_init(&D, d, CR_DT_C128, 2, sh, NULL), CR_OK);
    cr_tangent r = proj(f, cr_value_array(&P), cr_tangent_array(&D));
    assert_int_equal(r.u.arr->structure, CR_MAT_HERMITIAN);
    assert_int_equal(r.u.arr->dtype, CR_DT_C128);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 0), 1.0, 0.0);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 1), 3.0, 2.0);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 2), 3.0, -2.0);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 3), 5.0, 0.0);
    /* the stored diagonal is real and the stored upper entry is 3+2i */
    const cr_complex *s = r.u.arr->data;
    ptrdiff_t r0 = r.u.arr->strides[0], c0 = r.u.arr->strides[1];
    ASSERT_CPLX(s[0], 1.0, 0.0);
    ASSERT_CPLX(s[r0 + c0], 5.0, 0.0);
    ASSERT_CPLX(s[c0], 3.0, 2.0);
}

static void test_triangular(void **state)
{
    fixture *f = *state;
    double p[9] = {0};
    cr_array U = cr_array_matrix(p, 3, 3), L = cr_array_matrix(p, 3, 3);
    U.structure = CR_MAT_UPPER;
    L.structure = CR_MAT_LOWER;
    double d[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array D = cr_array_matrix(d, 3, 3);
    cr_tangent r = proj(f, cr_value_array(&U), cr_tangent_array(&D));
    assert_int_equal(r.u.arr->structure, CR_MAT_UPPER);
    static const double up[9] = {1, 2, 3, 0, 5, 6, 0, 0, 9};
    assert_values(r.u.arr, up, 9);
    /* the other triangle is zero in memory too */
    const double *s = r.u.arr->data;
    ASSERT_DBL(s[1 * r.u.arr->strides[0]], 0.0);
    ASSERT_DBL(s[2 * r.u.arr->strides[0] + r.u.arr->strides[1]], 0.0);
    r = proj(f, cr_value_array(&L), cr_tangent_array(&D));
    assert_int_equal(r.u.arr->structure, CR_MAT_LOWER);
    static const double lo[9] = {1, 0, 0, 4, 5, 0, 7, 8, 9};
    assert_values(r.u.arr, lo, 9);
    ASSERT_DBL(((const double *)r.u.arr->data)[r.u.arr->strides[1]], 0.0);
}

/* ---- structs and tuples ---------------------------------------------------------------- */

typedef struct pair {
    double a;
    cr_complex b;
} pair;

static const cr_field pair_fields[] = {
    {NULL, offsetof(pair, a), CR_KIND_F64, NULL},
    {NULL, offsetof(pair, b), CR_KIND_C128, NULL},
};
static const cr_type pair_type = {"Tuple{f64,c128}", sizeof(pair), 2, pair_fields};

typedef struct outer {
    point p;
    cr_array m;
} outer;

static const cr_field outer_fields[] = {
    {"p", offsetof(outer, p), CR_KIND_STRUCT, &point_type},
    {"m", offsetof(outer, m), CR_KIND_ARRAY, NULL},
};
static const cr_type outer_type = {"outer", sizeof(outer), 2, outer_fields};

static void test_struct_fieldwise(void **state)
{
    fixture *f = *state;
    point pt = {1, 2, 3};
    cr_value v = cr_value_struct(&point_type, &pt);
    const char *names[] = {"x", "id"};
    cr_tangent vals[] = {cr_tangent_c128(CMPLX(1, 2)), cr_tangent_f64(5.0)};
    cr_tangent dx;
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, names, vals, 2, &dx), CR_OK);
    cr_tangent r = proj(f, v, dx);
    assert_int_equal(r.tag, CR_TAN_STRUCT);
    assert_ptr_equal(r.u.s.type, &point_type);
    assert_int_equal(cr_tangent_field(r, 0).tag, CR_TAN_F64);
    ASSERT_DBL(cr_tangent_field(r, 0).u.f64, 1.0);
    assert_false(cr_tangent_field_present(r, 1)); /* absent stays absent */
    assert_int_equal(cr_tangent_field(r, 2).tag, CR_TAN_NONE);
    /* the input is not modified */
    assert_int_equal(dx.u.s.fields[0].tag, CR_TAN_C128);

    /* an f32 field rounds */
    const char *yn[] = {"y"};
    cr_tangent yv[] = {cr_tangent_f64(0.1)};
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, yn, yv, 1, &dx), CR_OK);
    r = proj(f, v, dx);
    assert_int_equal(cr_tangent_field(r, 1).tag, CR_TAN_F32);
    ASSERT_DBL((double)cr_tangent_field(r, 1).u.f32, 13421773.0 / 134217728.0);

    /* wrong type or kind */
    cr_tangent out;
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_struct_empty(&other_type), &out),
                     CR_ETANGENT);
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_f64(1), &out), CR_ETANGENT);
}

static void test_tuple_and_nested(void **state)
{
    fixture *f = *state;
    pair pr = {1, 2};
    cr_value v = cr_value_struct(&pair_type, &pr);
    cr_tangent vals[] = {cr_tangent_f32(2.0f), cr_tangent_f64(3.0)};
    cr_tangent dx;
    assert_int_equal(cr_tangent_struct(f->arena, &pair_type, NULL, vals, 2, &dx), CR_OK);
    cr_tangent r = proj(f, v, dx);
    assert_int_equal(cr_tangent_field(r, 0).tag, CR_TAN_F64);
    ASSERT_DBL(cr_tangent_field(r, 0).u.f64, 2.0);
    assert_int_equal(cr_tangent_field(r, 1).tag, CR_TAN_C128);
    ASSERT_CPLX(cr_tangent_field(r, 1).u.c128, 3.0, 0.0);

    /* nested: outer{p: point, m: Upper 2x2} */
    double mm[4] = {0};
    outer o = {{1, 2, 3}, cr_array_matrix(mm, 2, 2)};
    o.m.structure = CR_MAT_UPPER;
    cr_value ov = cr_value_struct(&outer_type, &o);
    const char *pn[] = {"id"};
    cr_tangent pv[] = {cr_tangent_f64(1)};
    cr_tangent dp;
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, pn, pv, 1, &dp), CR_OK);
    double dm[4] = {1, 2, 3, 4};
    cr_array DM = cr_array_matrix(dm, 2, 2);
    cr_tangent ovals[] = {dp, cr_tangent_array(&DM)};
    cr_tangent dox;
    assert_int_equal(cr_tangent_struct(f->arena, &outer_type, NULL, ovals, 2, &dox), CR_OK);
    r = proj(f, ov, dox);
    cr_tangent rp = cr_tangent_field(r, 0), rm = cr_tangent_field(r, 1);
    assert_int_equal(cr_tangent_field(rp, 2).tag, CR_TAN_NONE);
    assert_false(cr_tangent_field_present(rp, 0));
    assert_int_equal(rm.u.arr->structure, CR_MAT_UPPER);
    static const double up[4] = {1, 2, 0, 4};
    assert_values(rm.u.arr, up, 4);
}

static void test_struct_fits_no_copy(void **state)
{
    fixture *f = *state;
    point pt = {1, 2, 3};
    cr_value v = cr_value_struct(&point_type, &pt);
    cr_project *p = projector(f, v);
    const char *names[] = {"x", "y", "id"};
    cr_tangent vals[] = {cr_tangent_f64(1.0), cr_tangent_f32(2.0f), cr_tangent_none()};
    cr_tangent dx, r;
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, names, vals, 3, &dx), CR_OK);
    assert_true(cr_project_fits(p, dx));
    size_t used = cr_arena_used(f->arena);
    assert_int_equal(cr_project_apply(f->arena, p, dx, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_STRUCT);
    assert_ptr_equal(r.u.s.fields, dx.u.s.fields); /* dx itself, not a copy */
    assert_int_equal(cr_arena_used(f->arena), used);
    /* with an absent field it still fits */
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, names, vals, 1, &dx), CR_OK);
    assert_int_equal(cr_project_apply(f->arena, p, dx, &r), CR_OK);
    assert_ptr_equal(r.u.s.fields, dx.u.s.fields);
    /* an all-absent struct too */
    cr_tangent e = cr_tangent_struct_empty(&point_type);
    assert_int_equal(cr_project_apply(f->arena, p, e, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_STRUCT);
    assert_null(r.u.s.fields);
}

/* ---- cr_project_fits ------------------------------------------------------------------- */

static void test_fits(void **state)
{
    fixture *f = *state;
    thunk_env e = {.value = cr_tangent_f64(1)};
    cr_tangent th;
    assert_int_equal(cr_tangent_thunk(f->arena, value_fn, &e, "t", &th), CR_OK);

    cr_project *p64 = projector(f, cr_value_f64(1));
    assert_true(cr_project_fits(p64, cr_tangent_f64(1)));
    assert_false(cr_project_fits(p64, cr_tangent_f32(1)));
    assert_false(cr_project_fits(p64, cr_tangent_c128(1)));
    assert_true(cr_project_fits(p64, cr_tangent_zero()));
    assert_true(cr_project_fits(p64, cr_tangent_none()));
    assert_true(cr_project_fits(p64, th));
    assert_true(cr_project_fits(p64, cr_tangent_notimpl(&k_ni)));

    cr_project *p32 = projector(f, cr_value_f32(1));
    assert_true(cr_project_fits(p32, cr_tangent_f32(1)));
    assert_false(cr_project_fits(p32, cr_tangent_f64(1)));
    cr_project *pc = projector(f, cr_value_c128(1));
    assert_true(cr_project_fits(pc, cr_tangent_c128(1)));
    assert_false(cr_project_fits(pc, cr_tangent_f64(1)));
    cr_project *pi = projector(f, cr_value_i64(1));
    assert_true(cr_project_fits(pi, cr_tangent_none()));
    assert_false(cr_project_fits(pi, cr_tangent_f64(1)));

    double d[4] = {0};
    cr_array M = cr_array_matrix(d, 2, 2), V = cr_array_vector(d, 4);
    cr_project *pm = projector(f, cr_value_array(&M));
    assert_true(cr_project_fits(pm, cr_tangent_array(&M)));
    assert_false(cr_project_fits(pm, cr_tangent_array(&V)));
    cr_complex z[4] = {0};
    size_t sh[2] = {2, 2};
    cr_array Z;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 2, sh, NULL), CR_OK);
    assert_false(cr_project_fits(pm, cr_tangent_array(&Z)));
    assert_false(cr_project_fits(pm, cr_tangent_f64(1)));
    cr_array Dg = diagonal_view(d, 2);
    assert_true(cr_project_fits(pm, cr_tangent_array(&Dg)));
    cr_project *pd = projector(f, cr_value_array(&Dg));
    assert_true(cr_project_fits(pd, cr_tangent_array(&Dg)));
    assert_false(cr_project_fits(pd, cr_tangent_array(&M)));

    point pt = {1, 2, 3};
    cr_project *ps = projector(f, cr_value_struct(&point_type, &pt));
    const char *xn[] = {"x"};
    cr_tangent good[] = {cr_tangent_f64(1)}, bad[] = {cr_tangent_c128(1)};
    cr_tangent s1, s2;
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, xn, good, 1, &s1), CR_OK);
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, xn, bad, 1, &s2), CR_OK);
    assert_true(cr_project_fits(ps, s1));
    assert_false(cr_project_fits(ps, s2));
    assert_false(cr_project_fits(ps, cr_tangent_struct_empty(&other_type)));
    assert_int_equal(e.calls, 0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_f64_primal),
        T(test_f32_primal),
        T(test_c128_primal),
        T(test_integer_primals_give_notangent),
        T(test_scalar_errors),
        T(test_zeros_and_notimplemented_pass_through),
        T(test_thunk_projected_lazily),
        T(test_array_fits_no_copy),
        T(test_array_reshape),
        T(test_array_dtype_conversion),
        T(test_diagonal),
        T(test_symmetric),
        T(test_hermitian),
        T(test_triangular),
        T(test_struct_fieldwise),
        T(test_tuple_and_nested),
        T(test_struct_fits_no_copy),
        T(test_fits),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
