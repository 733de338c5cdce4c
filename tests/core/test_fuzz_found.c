/*
 * Defects the fuzz harnesses found (docs/fuzzing.md, fuzz/regressions/), each with the
 * behaviour it must have. The fuzz inputs only show that a crash is gone; these state the
 * answer.
 *
 * matmul of an empty matrix stored with a zero stride (fuzz_tape,
 * fuzz/regressions/fuzz_tape/matmul-empty-matrix-recursion): a 2 x 0 matrix with strides
 * (0, 1) is contiguous by the library's own test, so making it dense gave it back unchanged
 * and the BLAS operand conversion called itself without end (a stack overflow). A product
 * with an empty inner dimension is a zero array (the empty sum), and its derivatives are
 * empty or zero.
 *
 * broadcast and map of a function without a scalar row over an integer array (fuzz_rules,
 * fuzz/regressions/fuzz_rules/map-i64-element-through-double): each element was read as
 * a double and converted back to int64_t, which is undefined for INT64_MAX (2^63 after
 * rounding) and changes integers beyond 2^53. Each element must reach the function as it
 * is: the result is the function of the scalar, called alone.
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

static double g_buf[8];

/* A 2 x 0 f64 matrix with strides (0, 1) over g_buf. */
static cr_array empty_cols(void)
{
    size_t shape[2] = {2, 0};
    ptrdiff_t strides[2] = {0, 1};
    cr_array a;
    assert_int_equal(cr_array_view_init(&a, g_buf, CR_DT_F64, 2, shape, strides), CR_OK);
    return a;
}

static void assert_zeros(const cr_array *a, size_t ndim, size_t s0, size_t s1)
{
    assert_int_equal(a->ndim, ndim);
    assert_int_equal(a->shape[0], s0);
    if (ndim == 2)
        assert_int_equal(a->shape[1], s1);
    size_t n = cr_array_numel(a);
    for (size_t k = 0; k < n; k++) {
        cr_complex z = cr_array_get_linear(a, k);
        assert_true(creal(z) == 0.0 && cimag(z) == 0.0);
    }
}

static void test_matmul_empty_inner_dimension_vector(void **state)
{
    fixture *f = *state;
    cr_array A = empty_cols();
    size_t zero = 0;
    cr_array v;
    assert_int_equal(cr_array_view_init(&v, g_buf, CR_DT_F64, 1, &zero, NULL), CR_OK);
    cr_value args[2] = {cr_value_array(&A), cr_value_array(&v)}, y;
    assert_int_equal(cr_function_call(f->arena, &cr_fn_matmul, args, 2, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_ARRAY);
    assert_zeros(y.u.arr, 1, 2, 0);
}

static void test_matmul_empty_inner_dimension_matrix(void **state)
{
    fixture *f = *state;
    cr_array A = empty_cols();
    size_t shape[2] = {0, 3};
    cr_array B;
    assert_int_equal(cr_array_view_init(&B, g_buf, CR_DT_F64, 2, shape, NULL), CR_OK);
    cr_value args[2] = {cr_value_array(&A), cr_value_array(&B)}, y;
    assert_int_equal(cr_function_call(f->arena, &cr_fn_matmul, args, 2, &y), CR_OK);
    assert_zeros(y.u.arr, 2, 2, 3);

    /* The pullback of a nonzero cotangent: an empty dA and dB. */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, f->arena, &cr_fn_matmul, args, 2, &y, &pb), CR_OK);
    cr_array *dy;
    size_t yshape[2] = {2, 3};
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 2, yshape, &dy), CR_OK);
    for (size_t k = 0; k < 6; k++)
        ((double *)dy->data)[k] = (double)k + 1.0;
    cr_tangent seed = cr_tangent_array(dy), dx[3];
    assert_int_equal(cr_pullback_call(f->arena, &pb, &seed, dx, 3), CR_OK);
    for (size_t i = 1; i < 3; i++) {
        cr_tangent t;
        assert_int_equal(cr_tangent_unthunk(dx[i], &t), CR_OK);
        if (t.tag == CR_TAN_ARRAY)
            assert_int_equal(cr_array_numel(t.u.arr), 0);
        else
            assert_int_equal(t.tag, CR_TAN_ZERO);
    }
}

/* On the tape (how fuzz_tape found it): sum(A * v) of array inputs is 0, and the gradient
 * with respect to the empty inputs is empty. */
static void test_tape_amatmul_empty_inner_dimension(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array A = empty_cols();
    size_t zero = 0;
    cr_array v;
    assert_int_equal(cr_array_view_init(&v, g_buf, CR_DT_F64, 1, &zero, NULL), CR_OK);
    cr_avar X[2] = {cr_tape_array_input(t, &A), cr_tape_array_input(t, &v)};
    cr_var y = cr_av_sum(t, cr_av_matmul(t, X[0], X[1]));
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_true(y.v == 0.0);
    double gbuf[2] = {-1.0, -1.0};
    cr_array gA, gv;
    size_t shape[2] = {2, 0};
    assert_int_equal(cr_array_view_init(&gA, gbuf, CR_DT_F64, 2, shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&gv, gbuf, CR_DT_F64, 1, &zero, NULL), CR_OK);
    gA.flags = gv.flags = CR_ARRAY_WRITABLE;
    cr_array *grads[2] = {&gA, &gv};
    assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, X, 2, grads), CR_OK);
    assert_true(gbuf[0] == -1.0 && gbuf[1] == -1.0); /* no element to write */
    cr_tape_free(t);
}

static void test_broadcast_integer_elements_exact(void **state)
{
    fixture *f = *state;
    int64_t data[3] = {INT64_MAX, INT64_MIN, -3};
    size_t n = 3;
    cr_array A;
    assert_int_equal(cr_array_view_init(&A, data, CR_DT_I64, 1, &n, NULL), CR_OK);
    const cr_value *fns[2] = {&cr_fn_broadcast, &cr_fn_map};
    for (size_t m = 0; m < 2; m++) {
        cr_value args[2] = {cr_fn_floor, cr_value_array(&A)}, y;
        assert_int_equal(cr_function_call(f->arena, fns[m], args, 2, &y), CR_OK);
        assert_int_equal(y.kind, CR_KIND_ARRAY);
        assert_int_equal(cr_array_numel(y.u.arr), 3);
        for (size_t k = 0; k < 3; k++) {
            cr_value x = cr_value_i64(data[k]), want;
            assert_int_equal(cr_function_call(f->arena, &cr_fn_floor, &x, 1, &want), CR_OK);
            assert_int_equal(want.kind, CR_KIND_F64);
            assert_same_bits(creal(cr_array_get_linear(y.u.arr, k)), want.u.f64);
        }
    }
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_matmul_empty_inner_dimension_vector),
        T(test_matmul_empty_inner_dimension_matrix),
        T(test_tape_amatmul_empty_inner_dimension),
        T(test_broadcast_integer_elements_exact),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
