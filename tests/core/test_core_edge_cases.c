/*
 * Coverage of the core layer's less travelled paths: the tangent algebra (complex scaling
 * of a Hermitian tangent, f32 under conj and complex scaling, failing thunks in every
 * operation, structs whose fields cannot be combined, dot's errors, add!! into empty and
 * integer-valued arrays, materialised zeros, approximate comparison of every kind),
 * ProjectTo (NULL primals, one-element arrays and scalars, struct fields that are thunks,
 * NotImplemented or complex, absent tangents), value descriptors (every field kind, bad
 * descriptors) and array construction (bad dtypes and shapes, overflow, copies of integer,
 * bool and empty arrays).
 *
 * Expected values are worked out by hand from the definitions, never by calling the code
 * under test. Every error path checks its status and a message naming the operation, and
 * that the context takes the same work afterwards.
 */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

#include "test_util.h"

/* The context's last message contains sub; then clear it. */
static void expect_msg(fixture *f, const char *sub)
{
    assert_contains(cr_ctx_errmsg(f->ctx), sub);
    cr_ctx_clear_error(f->ctx);
}

/* A thunk that fails (CR_EDOMAIN, with a message). */
static cr_status failing_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)out;
    (void)env;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "cov_failing_thunk: no value here");
}

static cr_tangent failing_thunk(fixture *f)
{
    cr_tangent t;
    assert_int_equal(cr_tangent_thunk(f->arena, failing_thunk_fn, NULL, "cov_failing", &t), CR_OK);
    return t;
}

/* A thunk whose value is *(cr_tangent *)env. */
static cr_status value_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    *out = *(const cr_tangent *)env;
    return CR_OK;
}

static cr_tangent value_thunk(fixture *f, cr_tangent v)
{
    cr_tangent *env = cr_arena_alloc(f->arena, sizeof *env, _Alignof(cr_tangent));
    assert_non_null(env);
    *env = v;
    cr_tangent t;
    assert_int_equal(cr_tangent_thunk(f->arena, value_thunk_fn, env, "cov_value", &t), CR_OK);
    return t;
}

typedef struct pt2 {
    double x, y;
} pt2;

static const cr_field pt2_fields[] = {
    {"x", offsetof(pt2, x), CR_KIND_F64, NULL},
    {"y", offsetof(pt2, y), CR_KIND_F64, NULL},
};
static const cr_type pt2_type = {"pt2", sizeof(pt2), 2, pt2_fields};
static const cr_type pt2_other = {"pt2_other", sizeof(pt2), 2, pt2_fields};

static cr_tangent pt2_tangent(fixture *f, const cr_type *type, cr_tangent x, cr_tangent y)
{
    cr_tangent v[2] = {x, y}, out;
    assert_int_equal(cr_tangent_struct(f->arena, type, NULL, v, 2, &out), CR_OK);
    return out;
}

/* ---- The algebra ------------------------------------------------------------------------ */

/* i * H for a Hermitian H is not Hermitian: the result is the dense matrix i * H. */
static void test_scale_complex_hermitian(void **state)
{
    fixture *f = *state;
    /* storage: upper triangle read; the lower one holds garbage the result must not show */
    cr_complex h[4] = {CMPLX(1, 0), CMPLX(2, 1), CMPLX(99, 99), CMPLX(3, 0)};
    size_t shape[2] = {2, 2};
    cr_array H;
    assert_int_equal(cr_array_view_init(&H, h, CR_DT_C128, 2, shape, NULL), CR_OK);
    H.structure = CR_MAT_HERMITIAN;
    cr_tangent out;
    assert_int_equal(cr_tangent_scale_c(f->arena, CMPLX(0, 1), cr_tangent_array(&H), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_ARRAY);
    assert_int_equal(out.u.arr->structure, CR_MAT_DENSE);
    assert_int_equal(out.u.arr->dtype, CR_DT_C128);
    /* logical H = [1, 2+i; 2-i, 3]; i H = [i, -1+2i; 1+2i, 3i] */
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 0), 0.0, 1.0);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 1), -1.0, 2.0);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 2), 1.0, 2.0);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 3), 0.0, 3.0);
    /* a real multiple stays Hermitian */
    assert_int_equal(cr_tangent_scale(f->arena, 2.0, cr_tangent_array(&H), &out), CR_OK);
    assert_int_equal(out.u.arr->structure, CR_MAT_HERMITIAN);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 2), 4.0, -2.0);
}

static void test_f32_conj_and_complex_scale(void **state)
{
    fixture *f = *state;
    cr_tangent out;
    assert_int_equal(cr_tangent_conj(f->arena, cr_tangent_f32(1.5f), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_F32);
    ASSERT_DBL(out.u.f32, 1.5);
    assert_int_equal(cr_tangent_scale_c(f->arena, CMPLX(0, 2), cr_tangent_f32(1.5f), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_C128);
    ASSERT_CPLX(out.u.c128, 0.0, 3.0);
}

/* A tangent with a tag outside cr_tag: refused, not read. */
static void test_invalid_tag(void **state)
{
    fixture *f = *state;
    cr_tangent bad = {.tag = 42}, out;
    assert_int_equal(cr_tangent_scale(f->arena, 2.0, bad, &out), CR_ETANGENT);
    expect_msg(f, "invalid tangent tag 42");
    assert_int_equal(cr_tangent_zeros_like(f->arena, bad, &out), CR_ETANGENT);
    expect_msg(f, "invalid tangent tag 42");
    /* inside a struct: the field's failure is the struct's */
    cr_tangent s = pt2_tangent(f, &pt2_type, cr_tangent_f64(1.0), cr_tangent_f64(2.0));
    s.u.s.fields[1] = bad;
    assert_int_equal(cr_tangent_scale(f->arena, 2.0, s, &out), CR_ETANGENT);
    expect_msg(f, "invalid tangent tag 42");
    /* and the context works on */
    s.u.s.fields[1] = cr_tangent_f64(2.0);
    assert_int_equal(cr_tangent_scale(f->arena, 2.0, s, &out), CR_OK);
    ASSERT_DBL(cr_tangent_field(out, 1).u.f64, 4.0);
}

/* Every operation that unthunks returns a failing thunk's status. */
static void test_failing_thunk_everywhere(void **state)
{
    fixture *f = *state;
    /* a failed thunk memoises its status, not its message: a fresh one per operation */
    cr_tangent one = cr_tangent_f64(1.0), out;
    assert_int_equal(cr_tangent_sub(f->arena, one, failing_thunk(f), &out), CR_EDOMAIN);
    expect_msg(f, "cov_failing_thunk");
    assert_int_equal(cr_tangent_mul(f->arena, failing_thunk(f), one, &out), CR_EDOMAIN);
    expect_msg(f, "cov_failing_thunk");
    assert_int_equal(cr_tangent_dot(f->arena, one, failing_thunk(f), &out), CR_EDOMAIN);
    expect_msg(f, "cov_failing_thunk");
    assert_int_equal(cr_tangent_copy(f->arena, failing_thunk(f), &out), CR_EDOMAIN);
    expect_msg(f, "cov_failing_thunk");
    assert_int_equal(cr_tangent_zeros_like(f->arena, failing_thunk(f), &out), CR_EDOMAIN);
    expect_msg(f, "cov_failing_thunk");
    cr_tangent bad = failing_thunk(f);
    assert_false(cr_tangent_isapprox(bad, bad, 0.0, 0.0));
    assert_false(cr_tangent_isapprox(one, failing_thunk(f), 1.0, 1.0));
    cr_ctx_clear_error(f->ctx);
    /* a thunk that works gives the operations their values */
    assert_int_equal(cr_tangent_sub(f->arena, one, value_thunk(f, cr_tangent_f64(3.0)), &out),
                     CR_OK);
    ASSERT_DBL(out.u.f64, -2.0);
    assert_int_equal(cr_tangent_mul(f->arena, value_thunk(f, cr_tangent_f64(3.0)), one, &out),
                     CR_OK);
    ASSERT_DBL(out.u.f64, 3.0);
}

static void test_struct_field_errors(void **state)
{
    fixture *f = *state;
    double d[2] = {1, 2};
    cr_array a = cr_array_vector(d, 2);
    cr_tangent s1 = pt2_tangent(f, &pt2_type, cr_tangent_f64(1.0), cr_tangent_f64(2.0));
    cr_tangent s2 = pt2_tangent(f, &pt2_type, cr_tangent_array(&a), cr_tangent_f64(2.0));
    cr_tangent out;
    /* + and - of structs: a field that cannot be combined */
    assert_int_equal(cr_tangent_add(f->arena, s1, s2, &out), CR_ETANGENT);
    expect_msg(f, "tangent +: cannot combine f64 with array");
    assert_int_equal(cr_tangent_sub(f->arena, s1, s2, &out), CR_ETANGENT);
    expect_msg(f, "tangent -: cannot combine f64 with array");
    /* dot: different types, a field that cannot be combined, a NotImplemented field */
    cr_tangent so = pt2_tangent(f, &pt2_other, cr_tangent_f64(1.0), cr_tangent_f64(2.0));
    assert_int_equal(cr_tangent_dot(f->arena, s1, so, &out), CR_ETANGENT);
    expect_msg(f, "Tangent{pt2} and Tangent{pt2_other} differ");
    assert_int_equal(cr_tangent_dot(f->arena, s1, s2, &out), CR_ETANGENT);
    expect_msg(f, "tangent dot: cannot combine f64 with array");
    static const cr_notimpl ni = {"cov.c", 7, "cov: missing"};
    cr_tangent sni = pt2_tangent(f, &pt2_type, cr_tangent_notimpl(&ni), cr_tangent_f64(2.0));
    assert_int_equal(cr_tangent_dot(f->arena, s1, sni, &out), CR_EUNIMPL);
    expect_msg(f, "dot: a NotImplemented tangent inside a structure");
    /* a field shape mismatch inside dot */
    double e[3] = {1, 2, 3};
    cr_array b = cr_array_vector(e, 3);
    cr_tangent s3 = pt2_tangent(f, &pt2_type, cr_tangent_array(&b), cr_tangent_f64(2.0));
    assert_int_equal(cr_tangent_dot(f->arena, s2, s3, &out), CR_ESHAPE);
    expect_msg(f, "tangent dot: shapes (2) and (3) differ");
    /* add!! of structs of different types */
    assert_int_equal(cr_tangent_accum(f->arena, s1, so, &out), CR_ETANGENT);
    expect_msg(f, "tangent add!!: Tangent{pt2} and Tangent{pt2_other} differ");
    /* the same operations on good operands: dot(s1, s1) = 1 + 4 */
    assert_int_equal(cr_tangent_dot(f->arena, s1, s1, &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_F64);
    ASSERT_DBL(out.u.f64, 5.0);
    /* dot(f64, array) */
    assert_int_equal(cr_tangent_dot(f->arena, cr_tangent_f64(1.0), cr_tangent_array(&a), &out),
                     CR_ETANGENT);
    expect_msg(f, "tangent dot: cannot combine f64 with array");
}

/* Scaling a struct tangent with every field absent allocates nothing and stays itself. */
static void test_scale_empty_struct(void **state)
{
    fixture *f = *state;
    cr_tangent s = cr_tangent_struct_empty(&pt2_type), out;
    size_t used = cr_arena_used(f->arena);
    assert_int_equal(cr_tangent_scale(f->arena, 3.0, s, &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_STRUCT);
    assert_ptr_equal(out.u.s.type, &pt2_type);
    assert_null(out.u.s.fields);
    assert_int_equal(cr_arena_used(f->arena), used);
}

/* dot of two empty dense arrays is the f64 zero (no element is read). */
static void test_dot_empty_arrays(void **state)
{
    fixture *f = *state;
    size_t n0 = 0;
    cr_array a, b;
    assert_int_equal(cr_array_view_init(&a, NULL, CR_DT_F64, 1, &n0, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&b, NULL, CR_DT_F32, 1, &n0, NULL), CR_OK);
    cr_tangent out;
    assert_int_equal(cr_tangent_dot(f->arena, cr_tangent_array(&a), cr_tangent_array(&b), &out),
                     CR_OK);
    assert_int_equal(out.tag, CR_TAN_F64);
    ASSERT_DBL(out.u.f64, 0.0);
}

/* add!! into an empty destination: nothing is read or written, the destination is kept. */
static void test_accum_empty(void **state)
{
    fixture *f = *state;
    size_t n0 = 0;
    cr_array *dest;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 1, &n0, &dest), CR_OK);
    cr_array y;
    assert_int_equal(cr_array_view_init(&y, NULL, CR_DT_F32, 1, &n0, NULL), CR_OK);
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(dest), cr_tangent_array(&y), &out),
                     CR_OK);
    assert_ptr_equal(out.u.arr, dest);
    /* a 0 x 0 dense destination and a 0 x 0 Diagonal y */
    size_t s00[2] = {0, 0};
    cr_array *d2;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 2, s00, &d2), CR_OK);
    cr_array yd;
    assert_int_equal(cr_array_view_init(&yd, NULL, CR_DT_F64, 2, s00, NULL), CR_OK);
    yd.structure = CR_MAT_DIAGONAL;
    yd.strides[0] = 1;
    yd.strides[1] = 0;
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(d2), cr_tangent_array(&yd), &out),
                     CR_OK);
    assert_ptr_equal(out.u.arr, d2);
}

/* add!! of an integer array into a writable f64 destination: out of place, the integers
 * read as numbers, the destination untouched. */
static void test_accum_integer_array(void **state)
{
    fixture *f = *state;
    size_t n = 2;
    cr_array *dest;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 1, &n, &dest), CR_OK);
    ((double *)dest->data)[0] = 1.0;
    ((double *)dest->data)[1] = 2.0;
    int64_t iv[2] = {3, 4};
    cr_array y;
    assert_int_equal(cr_array_view_init(&y, iv, CR_DT_I64, 1, &n, NULL), CR_OK);
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(dest), cr_tangent_array(&y), &out),
                     CR_OK);
    assert_true(out.u.arr != dest);
    assert_int_equal(out.u.arr->dtype, CR_DT_F64);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 0), 4.0, 0.0);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 1), 6.0, 0.0);
    ASSERT_DBL(((double *)dest->data)[0], 1.0);
    ASSERT_DBL(((double *)dest->data)[1], 2.0);
}

/* An InplaceableThunk whose add! fails: add!! returns its status. */
static cr_status failing_add(cr_arena *arena, cr_array *dest, void *env)
{
    (void)dest;
    (void)env;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "cov_failing_add: refused");
}

static cr_status seven_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    (void)env;
    *out = cr_tangent_f64(7.0);
    return CR_OK;
}

static void test_accum_failing_add(void **state)
{
    fixture *f = *state;
    size_t n = 2;
    cr_array *dest;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 1, &n, &dest), CR_OK);
    cr_tangent th, out;
    assert_int_equal(
        cr_tangent_inplaceable_thunk(f->arena, seven_fn, failing_add, NULL, "cov_ithunk", &th),
        CR_OK);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(dest), th, &out), CR_EDOMAIN);
    expect_msg(f, "cov_failing_add: refused");
}

static void test_zeros_like_kinds(void **state)
{
    fixture *f = *state;
    cr_tangent absent = {.tag = CR_TAN_ABSENT}, out;
    assert_int_equal(cr_tangent_zeros_like(f->arena, absent, &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_ZERO);
    assert_int_equal(cr_tangent_zeros_like(f->arena, cr_tangent_f64(3.0), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_F64);
    ASSERT_DBL(out.u.f64, 0.0);
    assert_int_equal(cr_tangent_zeros_like(f->arena, cr_tangent_c128(CMPLX(1, 2)), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_C128);
    ASSERT_CPLX(out.u.c128, 0.0, 0.0);
    /* a thunk: the zero of its value */
    assert_int_equal(cr_tangent_zeros_like(f->arena, value_thunk(f, cr_tangent_f32(2.0f)), &out),
                     CR_OK);
    assert_int_equal(out.tag, CR_TAN_F32);
    ASSERT_DBL(out.u.f32, 0.0);
    /* a struct: every field materialised, absent ones as ZeroTangent, arrays zero-filled */
    double d[2] = {1, 2};
    cr_array a = cr_array_vector(d, 2);
    cr_tangent v[2] = {cr_tangent_array(&a)};
    const char *names[1] = {"x"};
    cr_tangent s;
    assert_int_equal(cr_tangent_struct(f->arena, &pt2_type, names, v, 1, &s), CR_OK);
    assert_int_equal(cr_tangent_zeros_like(f->arena, s, &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_STRUCT);
    assert_ptr_equal(out.u.s.type, &pt2_type);
    assert_true(out.u.s.fields != s.u.s.fields);
    assert_true(cr_tangent_field_present(out, 0));
    assert_true(cr_tangent_field_present(out, 1));
    cr_tangent x0 = cr_tangent_field(out, 0);
    assert_int_equal(x0.tag, CR_TAN_ARRAY);
    assert_true(x0.u.arr != &a);
    assert_int_equal(cr_array_numel(x0.u.arr), 2);
    ASSERT_CPLX(cr_array_get_linear(x0.u.arr, 0), 0.0, 0.0);
    ASSERT_CPLX(cr_array_get_linear(x0.u.arr, 1), 0.0, 0.0);
    assert_int_equal(cr_tangent_field(out, 1).tag, CR_TAN_ZERO);
    ASSERT_DBL(d[0], 1.0); /* the input is not touched */
    /* a field whose zero cannot be made: the struct's failure */
    cr_tangent sf = pt2_tangent(f, &pt2_type, cr_tangent_f64(1.0), failing_thunk(f));
    assert_int_equal(cr_tangent_zeros_like(f->arena, sf, &out), CR_EDOMAIN);
    expect_msg(f, "cov_failing_thunk");
}

static void test_zero_of_arrays(void **state)
{
    fixture *f = *state;
    cr_value v = cr_value_array(NULL);
    cr_tangent out;
    assert_int_equal(cr_tangent_zero_of(f->arena, &v, &out), CR_EINVAL);
    expect_msg(f, "zero tangent of a NULL array");
    int64_t iv[2] = {1, 2};
    size_t n = 2;
    cr_array ia;
    assert_int_equal(cr_array_view_init(&ia, iv, CR_DT_I64, 1, &n, NULL), CR_OK);
    v = cr_value_array(&ia);
    assert_int_equal(cr_tangent_zero_of(f->arena, &v, &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_NONE);
}

static void test_isapprox_kinds(void **state)
{
    fixture *f = *state;
    cr_tangent zero = cr_tangent_zero();
    static const cr_notimpl ni = {"cov.c", 9, "cov"};
    cr_tangent nit = cr_tangent_notimpl(&ni);
    /* NotImplemented only matches NotImplemented */
    assert_true(cr_tangent_isapprox(nit, nit, 0.0, 0.0));
    assert_false(cr_tangent_isapprox(nit, cr_tangent_f64(0.0), 1.0, 1.0));
    assert_false(cr_tangent_isapprox(cr_tangent_f64(0.0), nit, 1.0, 1.0));
    /* scalars of mixed precision and realness */
    assert_true(cr_tangent_isapprox(cr_tangent_f64(1.5), cr_tangent_f32(1.5f), 0.0, 0.0));
    assert_true(cr_tangent_isapprox(cr_tangent_c128(CMPLX(2, 0)), cr_tangent_f64(2.0), 0.0, 0.0));
    assert_false(cr_tangent_isapprox(cr_tangent_f64(1.0), cr_tangent_f64(1.1), 1e-3, 0.0));
    assert_true(cr_tangent_isapprox(cr_tangent_f64(1.0), cr_tangent_f64(1.1), 0.1, 0.0));
    /* arrays near zero, and against a zero */
    double small[2] = {0.0, 1e-12}, big[2] = {0.0, 1.0};
    cr_array as = cr_array_vector(small, 2), ab = cr_array_vector(big, 2);
    assert_true(cr_tangent_isapprox(zero, cr_tangent_array(&as), 0.0, 1e-9));
    assert_false(cr_tangent_isapprox(cr_tangent_array(&ab), zero, 0.0, 1e-9));
    /* arrays of other shapes */
    double three[3] = {0, 0, 0};
    cr_array a3 = cr_array_vector(three, 3);
    assert_false(cr_tangent_isapprox(cr_tangent_array(&as), cr_tangent_array(&a3), 1.0, 1.0));
    /* different kinds */
    assert_false(cr_tangent_isapprox(cr_tangent_f64(0.5), cr_tangent_array(&ab), 1.0, 1.0));
    /* structs near zero, of other types, with a differing field */
    cr_tangent s0 = pt2_tangent(f, &pt2_type, cr_tangent_f64(0.0), cr_tangent_f64(1e-12));
    cr_tangent s1 = pt2_tangent(f, &pt2_type, cr_tangent_f64(0.0), cr_tangent_f64(1.0));
    cr_tangent so = pt2_tangent(f, &pt2_other, cr_tangent_f64(0.0), cr_tangent_f64(1.0));
    assert_true(cr_tangent_isapprox(zero, s0, 0.0, 1e-9));
    assert_false(cr_tangent_isapprox(s1, zero, 0.0, 1e-9));
    assert_false(cr_tangent_isapprox(s1, so, 1.0, 1.0));
    assert_false(cr_tangent_isapprox(s0, s1, 1e-6, 1e-9));
    assert_true(cr_tangent_isapprox(s1, s1, 0.0, 0.0));
    /* a struct with a NotImplemented field is not near zero */
    cr_tangent sni = pt2_tangent(f, &pt2_type, nit, cr_tangent_f64(0.0));
    assert_false(cr_tangent_isapprox(zero, sni, 1.0, 1.0));
}

/* A struct field that is a thunk is compared by its value, against a zero as against a
 * struct (isapprox unthunks, nested thunks included). */
static void test_isapprox_thunk_field(void **state)
{
    fixture *f = *state;
    cr_tangent s0 =
        pt2_tangent(f, &pt2_type, value_thunk(f, cr_tangent_f64(0.0)), cr_tangent_f64(0.0));
    assert_true(cr_tangent_isapprox(cr_tangent_zero(), s0, 0.0, 1e-12));
    assert_true(cr_tangent_isapprox(s0, cr_tangent_zero(), 0.0, 1e-12));
    cr_tangent s1 =
        pt2_tangent(f, &pt2_type, value_thunk(f, cr_tangent_f64(1.0)), cr_tangent_f64(0.0));
    assert_false(cr_tangent_isapprox(cr_tangent_zero(), s1, 0.0, 1e-12));
    cr_tangent s1b = pt2_tangent(f, &pt2_type, cr_tangent_f64(1.0), cr_tangent_f64(0.0));
    assert_true(cr_tangent_isapprox(s1, s1b, 0.0, 0.0));
    /* a failing thunk field is not near zero */
    cr_tangent sf = pt2_tangent(f, &pt2_type, failing_thunk(f), cr_tangent_f64(0.0));
    assert_false(cr_tangent_isapprox(cr_tangent_zero(), sf, 1.0, 1.0));
    cr_ctx_clear_error(f->ctx);
}

/* ---- ProjectTo -------------------------------------------------------------------------- */

static void test_project_null_primals(void **state)
{
    fixture *f = *state;
    cr_project *p = NULL;
    cr_value v = cr_value_array(NULL);
    assert_int_equal(cr_project_new(f->arena, &v, &p), CR_EINVAL);
    expect_msg(f, "ProjectTo: NULL array");
    assert_null(p);
    v = cr_value_struct(&pt2_type, NULL);
    assert_int_equal(cr_project_new(f->arena, &v, &p), CR_EINVAL);
    expect_msg(f, "ProjectTo: NULL struct or type");
    assert_int_equal(cr_project_new(f->arena, NULL, &p), CR_EINVAL);
    expect_msg(f, "cr_project_new: NULL argument");
    cr_tangent out;
    assert_int_equal(cr_project_apply(f->arena, NULL, cr_tangent_f64(1.0), &out), CR_EINVAL);
    expect_msg(f, "cr_project_apply: NULL argument");
    /* a good primal afterwards */
    v = cr_value_f64(1.0);
    assert_int_equal(cr_project_new(f->arena, &v, &p), CR_OK);
    assert_int_equal(cr_project_apply(f->arena, p, cr_tangent_c128(CMPLX(2, 3)), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_F64);
    ASSERT_DBL(out.u.f64, 2.0);
}

/* The mismatch messages name the projector (f32, c128). */
static void test_project_mismatch_names(void **state)
{
    fixture *f = *state;
    double d[2] = {1, 2};
    cr_array a = cr_array_vector(d, 2);
    cr_value v = cr_value_f32(1.0f);
    cr_tangent out;
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_array(&a), &out), CR_ETANGENT);
    expect_msg(f, "ProjectTo(f32): cannot project a array tangent");
    v = cr_value_c128(CMPLX(1, 1));
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_array(&a), &out), CR_ETANGENT);
    expect_msg(f, "ProjectTo(c128): cannot project a array tangent");
}

static void test_project_fits_notangent(void **state)
{
    fixture *f = *state;
    double d[2] = {1, 2};
    cr_array a = cr_array_vector(d, 2);
    cr_value va = cr_value_array(&a);
    pt2 p = {1, 2};
    cr_value vs = cr_value_struct(&pt2_type, &p);
    cr_project *pa, *ps;
    assert_int_equal(cr_project_new(f->arena, &va, &pa), CR_OK);
    assert_int_equal(cr_project_new(f->arena, &vs, &ps), CR_OK);
    assert_true(cr_project_fits(pa, cr_tangent_none()));
    assert_true(cr_project_fits(ps, cr_tangent_none()));
    assert_false(cr_project_fits(pa, cr_tangent_f64(1.0)));
    assert_false(cr_project_fits(ps, cr_tangent_f64(1.0)));
}

/* A one-element array tangent of a scalar primal, and a scalar tangent of a one-element
 * array primal. */
static void test_project_one_element(void **state)
{
    fixture *f = *state;
    double one[1] = {2.5};
    cr_array a1 = cr_array_vector(one, 1);
    cr_value v = cr_value_f64(0.0);
    cr_tangent out;
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_array(&a1), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_F64);
    ASSERT_DBL(out.u.f64, 2.5);
    v = cr_value_f32(0.0f);
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_array(&a1), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_F32);
    ASSERT_DBL(out.u.f32, 2.5);

    /* scalars onto a one-element f64 array: f64, f32, and c128 (real part kept) */
    double pd[1] = {0.0};
    cr_array p1 = cr_array_vector(pd, 1);
    v = cr_value_array(&p1);
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_f64(1.25), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_ARRAY);
    assert_int_equal(out.u.arr->dtype, CR_DT_F64);
    assert_int_equal(out.u.arr->ndim, 1);
    assert_int_equal(out.u.arr->shape[0], 1);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 0), 1.25, 0.0);
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_f32(0.5f), &out), CR_OK);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 0), 0.5, 0.0);
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_c128(CMPLX(3, 4)), &out), CR_OK);
    assert_int_equal(out.u.arr->dtype, CR_DT_F64);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 0), 3.0, 0.0);
    /* onto a complex 1 x 1 matrix: complex kept, the primal's shape */
    cr_complex pz[1] = {0};
    size_t s11[2] = {1, 1};
    cr_array z1;
    assert_int_equal(cr_array_view_init(&z1, pz, CR_DT_C128, 2, s11, NULL), CR_OK);
    v = cr_value_array(&z1);
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_c128(CMPLX(3, 4)), &out), CR_OK);
    assert_int_equal(out.u.arr->dtype, CR_DT_C128);
    assert_int_equal(out.u.arr->ndim, 2);
    ASSERT_CPLX(cr_array_get_linear(out.u.arr, 0), 3.0, 4.0);
    /* a scalar onto an array of two elements is refused */
    double p2d[2] = {0, 0};
    cr_array p2 = cr_array_vector(p2d, 2);
    v = cr_value_array(&p2);
    assert_int_equal(cr_project_tangent(f->arena, &v, cr_tangent_f64(1.0), &out), CR_ETANGENT);
    expect_msg(f, "ProjectTo(array): cannot project a f64 tangent");
}

typedef struct zrec {
    cr_complex z;
    double r;
} zrec;

static const cr_field zrec_fields[] = {
    {"z", offsetof(zrec, z), CR_KIND_C128, NULL},
    {"r", offsetof(zrec, r), CR_KIND_F64, NULL},
};
static const cr_type zrec_type = {"zrec", sizeof(zrec), 2, zrec_fields};

/* Struct fields that already fit (complex, NotImplemented) give the tangent itself; a thunk
 * field becomes a projecting thunk. */
static void test_project_struct_fields(void **state)
{
    fixture *f = *state;
    zrec zr = {CMPLX(1, 1), 2.0};
    cr_value v = cr_value_struct(&zrec_type, &zr);
    static const cr_notimpl ni = {"cov.c", 11, "cov"};
    cr_tangent fields[2] = {cr_tangent_c128(CMPLX(1, 2)), cr_tangent_notimpl(&ni)};
    cr_tangent dx, out;
    assert_int_equal(cr_tangent_struct(f->arena, &zrec_type, NULL, fields, 2, &dx), CR_OK);
    assert_int_equal(cr_project_tangent(f->arena, &v, dx, &out), CR_OK);
    assert_ptr_equal(out.u.s.fields, dx.u.s.fields);
    /* a thunk field of value 3+4i onto the f64 field: a thunk giving 3 */
    fields[1] = value_thunk(f, cr_tangent_c128(CMPLX(3, 4)));
    assert_int_equal(cr_tangent_struct(f->arena, &zrec_type, NULL, fields, 2, &dx), CR_OK);
    assert_int_equal(cr_project_tangent(f->arena, &v, dx, &out), CR_OK);
    assert_true(out.u.s.fields != dx.u.s.fields);
    cr_tangent r = cr_tangent_field(out, 1);
    assert_int_equal(r.tag, CR_TAN_THUNK);
    assert_int_equal(cr_tangent_unthunk(r, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 3.0);
    ASSERT_CPLX(cr_tangent_field(out, 0).u.c128, 1.0, 2.0);
}

/* Projecting a failing thunk gives a thunk that fails with its status when unthunked. */
static void test_project_failing_thunk(void **state)
{
    fixture *f = *state;
    cr_value v = cr_value_f64(1.0);
    cr_tangent out, val;
    assert_int_equal(cr_project_tangent(f->arena, &v, failing_thunk(f), &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_THUNK);
    assert_int_equal(cr_tangent_unthunk(out, &val), CR_EDOMAIN);
    expect_msg(f, "cov_failing_thunk");
}

/* An absent tangent given directly reads as ZeroTangent. */
static void test_project_absent(void **state)
{
    fixture *f = *state;
    cr_value v = cr_value_f64(1.0);
    cr_tangent absent = {.tag = CR_TAN_ABSENT}, out = cr_tangent_f64(9.0);
    assert_int_equal(cr_project_tangent(f->arena, &v, absent, &out), CR_OK);
    assert_int_equal(out.tag, CR_TAN_ZERO);
}

/* ---- Values and descriptors ------------------------------------------------------------- */

static cr_status noop_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)args;
    (void)nargs;
    *out = cr_value_f64(0.0);
    return CR_OK;
}

static const cr_function k_noop_fn = {.name = "cov_noop", .arity = 0, .primal = noop_primal};

typedef struct kinds_rec {
    int i;
    const cr_function *fn;
    double pad;
} kinds_rec;

static const cr_field kinds_fields[] = {
    {"i", offsetof(kinds_rec, i), CR_KIND_I32, NULL},
    {"fn", offsetof(kinds_rec, fn), CR_KIND_FUNC, NULL},
    {"nothing", offsetof(kinds_rec, pad), CR_KIND_NOTHING, NULL},
    {"bad", offsetof(kinds_rec, pad), (cr_kind)77, NULL},
    {"nested", offsetof(kinds_rec, pad), CR_KIND_STRUCT, NULL},
};
static const cr_type kinds_type = {"kinds_rec", sizeof(kinds_rec), 5, kinds_fields};
/* the first field only: index 1 is past its end although the array goes on */
static const cr_type kinds_one = {"kinds_one", sizeof(kinds_rec), 1, kinds_fields};

static void test_value_fields(void **state)
{
    fixture *f = *state;
    kinds_rec r = {-3, &k_noop_fn, 0.0};
    cr_value v;
    assert_int_equal(cr_type_field_value(&kinds_type, &r, 0, &v), CR_OK);
    assert_int_equal(v.kind, CR_KIND_I32);
    assert_int_equal(v.u.i64, -3);
    assert_int_equal(cr_type_field_value(&kinds_type, &r, 1, &v), CR_OK);
    assert_int_equal(v.kind, CR_KIND_FUNC);
    assert_ptr_equal(v.u.func.fn, &k_noop_fn);
    assert_null(v.u.func.self);
    assert_int_equal(cr_type_field_value(&kinds_type, &r, 2, &v), CR_OK);
    assert_int_equal(v.kind, CR_KIND_NOTHING);
    /* a kind outside cr_kind, a struct field without descriptor, an index past the end */
    assert_int_equal(cr_type_field_value(&kinds_type, &r, 3, &v), CR_EINVAL);
    assert_int_equal(cr_type_field_value(&kinds_type, &r, 4, &v), CR_EINVAL);
    assert_int_equal(cr_type_field_value(&kinds_type, &r, 5, &v), CR_EINVAL);
    assert_int_equal(cr_type_field_value(&kinds_one, &r, 1, &v), CR_EINVAL);
    assert_int_equal(cr_type_field_value(NULL, &r, 0, &v), CR_EINVAL);
    assert_int_equal(cr_type_field_value(&kinds_type, NULL, 0, &v), CR_EINVAL);
    /* ProjectTo of such a struct names the type and the field */
    cr_value sv = cr_value_struct(&kinds_type, &r);
    cr_project *p;
    assert_int_equal(cr_project_new(f->arena, &sv, &p), CR_EINVAL);
    expect_msg(f, "ProjectTo: type kinds_rec has a bad field 3");
    /* names */
    assert_string_equal(cr_kind_name(CR_KIND_I32), "i32");
    assert_string_equal(cr_kind_name(CR_KIND_STRUCT), "struct");
    assert_string_equal(cr_kind_name((cr_kind)77), "?");
    assert_int_equal(cr_type_field_index(NULL, "x"), -1);
    assert_int_equal(cr_type_field_index(&kinds_type, NULL), -1);
    assert_int_equal(cr_type_field_index(&kinds_type, "fn"), 1);
}

/* A struct holding a struct with a bad field: refused from inside. */
typedef struct outer_rec {
    kinds_rec inner;
} outer_rec;

static const cr_field outer_rec_fields[] = {
    {"inner", offsetof(outer_rec, inner), CR_KIND_STRUCT, &kinds_type},
};
static const cr_type outer_rec_type = {"outer_rec", sizeof(outer_rec), 1, outer_rec_fields};

static void test_project_nested_bad_field(void **state)
{
    fixture *f = *state;
    outer_rec o = {{1, NULL, 0.0}};
    cr_value v = cr_value_struct(&outer_rec_type, &o);
    cr_project *p = NULL;
    assert_int_equal(cr_project_new(f->arena, &v, &p), CR_EINVAL);
    expect_msg(f, "ProjectTo: type kinds_rec has a bad field 3");
    assert_null(p);
}

/* ---- Arrays ------------------------------------------------------------------------------ */

static void test_array_names_and_bad_views(void **state)
{
    (void)state;
    assert_string_equal(cr_dtype_name((cr_dtype)9), "?");
    assert_string_equal(cr_matstruct_name((cr_matstruct)99), "?");
    double d[2] = {1, 2};
    size_t n = 2;
    cr_array a;
    assert_int_equal(cr_array_view_init(NULL, d, CR_DT_F64, 1, &n, NULL), CR_EINVAL);
    assert_int_equal(cr_array_view_init(&a, d, CR_DT_F64, CR_ARRAY_MAX_DIMS + 1, &n, NULL),
                     CR_EINVAL);
    assert_int_equal(cr_array_view_init(&a, d, (cr_dtype)0, 1, &n, NULL), CR_EINVAL);
    assert_int_equal(cr_array_view_init(&a, d, CR_DT_F64, 1, NULL, NULL), CR_EINVAL);
    assert_int_equal(cr_array_view_init(&a, d, CR_DT_F64, 1, &n, NULL), CR_OK);
}

static void test_array_new_errors(void **state)
{
    fixture *f = *state;
    size_t n = 2;
    cr_array *a = NULL;
    assert_int_equal(cr_array_new(f->arena, (cr_dtype)0, 1, &n, &a), CR_EINVAL);
    expect_msg(f, "cr_array_new: invalid dtype 0 or ndim 1");
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 9, &n, &a), CR_EINVAL);
    expect_msg(f, "cr_array_new: invalid dtype 1 or ndim 9");
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 1, &n, NULL), CR_EINVAL);
    expect_msg(f, "cr_array_new: out is NULL");
    size_t huge[2] = {SIZE_MAX / 2, 4};
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 2, huge, &a), CR_EOVERFLOW);
    expect_msg(f, "cr_array_new: shape 9223372036854775807 x 4 of 8-byte elements overflows");
    size_t big = SIZE_MAX / 4;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 1, &big, &a), CR_EOVERFLOW);
    expect_msg(f, "cr_array_new: shape 4611686018427387903 of 8-byte elements overflows");
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 1, &n, &a), CR_OK);
    assert_int_equal(cr_array_numel(a), 2);
}

static void test_array_copy_kinds(void **state)
{
    fixture *f = *state;
    size_t n = 3;
    /* integer and bool arrays, strided, copied element by element */
    int64_t iv[6] = {5, -1, -7, -1, 9, -1};
    ptrdiff_t st2 = 2;
    cr_array ia, *ic;
    assert_int_equal(cr_array_view_init(&ia, iv, CR_DT_I64, 1, &n, &st2), CR_OK);
    assert_int_equal(cr_array_copy(f->arena, &ia, &ic), CR_OK);
    assert_int_equal(ic->dtype, CR_DT_I64);
    assert_true(cr_array_is_contiguous(ic));
    assert_int_equal(((int64_t *)ic->data)[0], 5);
    assert_int_equal(((int64_t *)ic->data)[1], -7);
    assert_int_equal(((int64_t *)ic->data)[2], 9);
    bool bv[3] = {true, false, true};
    cr_array ba, *bc;
    assert_int_equal(cr_array_view_init(&ba, bv, CR_DT_BOOL, 1, &n, NULL), CR_OK);
    assert_int_equal(cr_array_copy(f->arena, &ba, &bc), CR_OK);
    assert_int_equal(bc->dtype, CR_DT_BOOL);
    assert_true(((bool *)bc->data)[0]);
    assert_false(((bool *)bc->data)[1]);
    assert_true(((bool *)bc->data)[2]);
    /* an empty array (no data at all) */
    size_t n0 = 0;
    ptrdiff_t neg = -1;
    cr_array ea, *ec;
    assert_int_equal(cr_array_view_init(&ea, NULL, CR_DT_F64, 1, &n0, &neg), CR_OK);
    assert_int_equal(cr_array_copy(f->arena, &ea, &ec), CR_OK);
    assert_int_equal(cr_array_numel(ec), 0);
    assert_int_equal(ec->ndim, 1);
    /* NULL arguments */
    assert_int_equal(cr_array_copy(f->arena, NULL, &ec), CR_EINVAL);
    expect_msg(f, "cr_array_copy: NULL argument");
    assert_int_equal(cr_array_copy(f->arena, &ea, NULL), CR_EINVAL);
    expect_msg(f, "cr_array_copy: NULL argument");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_scale_complex_hermitian),
        T(test_f32_conj_and_complex_scale),
        T(test_invalid_tag),
        T(test_failing_thunk_everywhere),
        T(test_struct_field_errors),
        T(test_scale_empty_struct),
        T(test_dot_empty_arrays),
        T(test_accum_empty),
        T(test_accum_integer_array),
        T(test_accum_failing_add),
        T(test_zeros_like_kinds),
        T(test_zero_of_arrays),
        T(test_isapprox_kinds),
        T(test_isapprox_thunk_field),
        T(test_project_null_primals),
        T(test_project_mismatch_names),
        T(test_project_fits_notangent),
        T(test_project_one_element),
        T(test_project_struct_fields),
        T(test_project_absent),
        T(test_project_nested_bad_field),
        T(test_project_failing_thunk),
        T(test_value_fields),
        T(test_array_names_and_bad_views),
        T(test_array_new_errors),
        T(test_array_copy_kinds),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
