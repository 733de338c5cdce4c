/*
 * Tests of the linear-algebra rule family (rules_linalg.h): every registered rule through
 * the rule tester at the points its sampler draws (random, transposed, structured and,
 * for the LAPACK rules, ill-conditioned and degenerate inputs), then the conventions:
 * InplaceableThunks accumulating with gemm, projections (Diagonal, real, f32), and the
 * factorizations' special cases.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

static cr_tangent unthunked(cr_tangent t)
{
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(t, &v), CR_OK);
    return v;
}

static void assert_close_(double got, double want, double tol, const char *what, const char *file,
                          int line)
{
    if (!(fabs(got - want) <= tol * (1 + fabs(want)))) {
        print_error("%s: got %.17g, want %.17g\n", what, got, want);
        _fail(file, line);
    }
}
#define ASSERT_CLOSE(got, want, tol) assert_close_((got), (want), (tol), #got, __FILE__, __LINE__)

static const char *const k_linalg_fns[] = {"matmul", "gemm", "dot", "tr"};

static bool in_family(const char *name)
{
    for (size_t i = 0; i < sizeof k_linalg_fns / sizeof k_linalg_fns[0]; i++)
        if (strcmp(name, k_linalg_fns[i]) == 0)
            return true;
    return false;
}

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    bool seen[sizeof k_linalg_fns / sizeof k_linalg_fns[0]] = {false};
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        if (!in_family(info.fn->name))
            continue;
        for (size_t k = 0; k < sizeof k_linalg_fns / sizeof k_linalg_fns[0]; k++)
            if (strcmp(info.fn->name, k_linalg_fns[k]) == 0)
                seen[k] = true;
        assert_true(cr_test_registration_usable(&info));
        cr_test_opts opts = {0};
        opts.npoints = 16;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        if (st != CR_OK || r.verdict == CR_VERDICT_FAIL) {
            char buf[1200], sig[160];
            cr_signature_str(info.fn->name, info.args, info.nargs, info.variadic, sig, sizeof sig);
            cr_test_report_format(&r, buf, sizeof buf);
            print_error("%s: %s (%s; %s)\n", sig, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
            fail();
        }
    }
    for (size_t k = 0; k < sizeof k_linalg_fns / sizeof k_linalg_fns[0]; k++)
        if (!seen[k]) {
            print_error("no rule registered for %s\n", k_linalg_fns[k]);
            fail();
        }
}

/* matmul's cotangents are InplaceableThunks: add!! runs gemm with beta = 1 into the
 * accumulator, leaves the thunk unevaluated, and equals the evaluated value. */
static void test_matmul_inplace(void **state)
{
    fixture *fx = *state;
    double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0.5, -1, 2, 0.25, 1, 3}, g[4] = {1, -2, 0.5, 3};
    cr_array A = cr_array_matrix(a, 2, 3), B = cr_array_matrix(b, 3, 2),
             G = cr_array_matrix(g, 2, 2);
    cr_value args[2] = {cr_value_array(&A), cr_value_array(&B)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, args, 2, &y, &pb), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 0.5 + 2 * 2 + 3 * 1);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_true(cr_tangent_is_inplaceable_thunk(dx[1]));
    assert_true(cr_tangent_is_inplaceable_thunk(dx[2]));
    cr_array *acc;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, 2, A.shape, &acc), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ((double *)acc->data)[i] = (double)i;
    cr_tangent out;
    assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(acc), dx[1], &out), CR_OK);
    assert_ptr_equal(out.u.arr, acc);
    assert_int_equal(dx[1].u.thunk->state, 0);
    cr_tangent v = unthunked(dx[1]);
    /* Ā = Ȳ Bᵀ */
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++) {
            double want = g[i * 2] * b[j * 2] + g[i * 2 + 1] * b[j * 2 + 1];
            ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, i * 3 + j)), want);
            ASSERT_DBL(((double *)acc->data)[i * 3 + j], want + (double)(i * 3 + j));
        }
}

static void test_projections(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    /* Diagonal A: a Diagonal cotangent. */
    double d[3] = {1, 2, 3}, b[6] = {1, 2, 3, 4, 5, 6};
    cr_array D = cr_array_matrix(d, 3, 3), B = cr_array_matrix(b, 3, 2);
    D.structure = CR_MAT_DIAGONAL;
    D.strides[0] = 1;
    D.strides[1] = 0;
    cr_value args[2] = {cr_value_array(&D), cr_value_array(&B)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, args, 2, &y, &pb), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 5)), 18);
    double g[6] = {1, 1, 1, 1, 1, 1};
    cr_array G = cr_array_matrix(g, 3, 2);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    cr_tangent v = unthunked(dx[1]);
    assert_int_equal(v.u.arr->structure, CR_MAT_DIAGONAL);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 4)), 7);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 1)), 0);
    /* A Diagonal accumulator takes the projected value (add! writes dense storage). */
    cr_tangent acc;
    assert_int_equal(cr_tangent_copy(fx->arena, v, &acc), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(cr_tangent_accum(fx->arena, acc, dx[1], &acc), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(acc.u.arr, 4)), 14);
    /* f32 operands: f32 output, f32 cotangents. */
    float af[4] = {1, 2, 3, 4};
    size_t s22[2] = {2, 2};
    cr_array AF;
    cr_array_view_init(&AF, af, CR_DT_F32, 2, s22, NULL);
    cr_value fargs[2] = {cr_value_array(&AF), cr_value_array(&AF)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, fargs, 2, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 0)), 7);
    cr_tangent dyf = cr_tangent_array(y.u.arr);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dyf, dx, 3), CR_OK);
    assert_int_equal(unthunked(dx[1]).u.arr->dtype, CR_DT_F32);
    assert_int_equal(unthunked(dx[2]).u.arr->dtype, CR_DT_F32);
    /* gemm with a complex alpha and real A: A's cotangent stays real, alpha's is complex. */
    double a2[4] = {1, 2, 3, 4}, c2[4] = {0};
    cr_array A2 = cr_array_matrix(a2, 2, 2), C2 = cr_array_matrix(c2, 2, 2);
    cr_value gargs[5] = {cr_value_c128(CMPLX(0.5, 1)), cr_value_array(&A2), cr_value_array(&A2),
                         cr_value_f64(2), cr_value_array(&C2)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gemm, gargs, 5, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_C128);
    cr_tangent dyc = cr_tangent_array(y.u.arr), d5[6];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dyc, d5, 6), CR_OK);
    assert_int_equal(d5[1].tag, CR_TAN_C128);
    assert_int_equal(unthunked(d5[2]).u.arr->dtype, CR_DT_F64);
    assert_int_equal(d5[4].tag, CR_TAN_F64);
    assert_int_equal(unthunked(d5[5]).u.arr->dtype, CR_DT_F64);
}

static void test_dot_tr_values(void **state)
{
    fixture *fx = *state;
    cr_complex x[2] = {CMPLX(1, 2), CMPLX(0, 1)}, yv[2] = {CMPLX(3, 0), CMPLX(1, 1)};
    size_t n2 = 2;
    cr_array X, Y;
    cr_array_view_init(&X, x, CR_DT_C128, 1, &n2, NULL);
    cr_array_view_init(&Y, yv, CR_DT_C128, 1, &n2, NULL);
    cr_value args[2] = {cr_value_array(&X), cr_value_array(&Y)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_dot, args, 2, &y), CR_OK);
    /* conj(1+2i)*3 + conj(i)*(1+i) = 3 - 6i + 1 - i */
    ASSERT_CPLX(y.u.c128, 4, -7);
    double a[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array A = cr_array_matrix(a, 3, 3);
    A.structure = CR_MAT_UPPER;
    cr_value av = cr_value_array(&A);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_tr, &av, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 15);
    cr_tangent dy = cr_tangent_f64(2), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 2), CR_OK);
    cr_tangent v = unthunked(dx[1]);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 4)), 2);
    ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, 1)), 0);
    ASSERT_CLOSE(creal(cr_array_get_linear(v.u.arr, 8)), 2, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matmul_inplace, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_projections, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dot_tr_values, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
