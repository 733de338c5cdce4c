/*
 * Tests of scal, trmv, trsv, trmm, trsm and lacpy (rules_linalg.h,
 * src/rulesets/linalg/blas_tri.c): every registered rule through the rule tester at its
 * sampler's points (both sides, both triangles, the three ops, unit diagonals, real,
 * f32 and complex, empty and 1 x 1); values against products and substitutions written
 * out in the test; the unit diagonal not read; zero pivots; errors.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

static void expect_pass(fixture *fx, cr_status st, const cr_test_report *r, const char *what)
{
    if (st != CR_OK || r->verdict == CR_VERDICT_FAIL) {
        char buf[1200];
        cr_test_report_format(r, buf, sizeof buf);
        print_error("%s: %s (%s; %s)\n", what, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
        fail();
    }
}

static void check_point(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                        const char *what)
{
    cr_test_report r;
    expect_pass(fx, cr_test_frule(fx->arena, NULL, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_rrule(fx->arena, NULL, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_consistency(fx->arena, NULL, f, args, nargs, &r), &r, what);
}

static double at(const cr_value *v, size_t i)
{
    assert_int_equal(v->kind, CR_KIND_ARRAY);
    return creal(cr_array_get_linear(v->u.arr, i));
}

static const char *const k_fns[] = {"scal", "trmv", "trsv", "trmm", "trsm", "lacpy"};
#define NFNS (sizeof k_fns / sizeof k_fns[0])

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    bool seen[NFNS] = {false};
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        size_t k = 0;
        while (k < NFNS && strcmp(info.fn->name, k_fns[k]) != 0)
            k++;
        if (k == NFNS)
            continue;
        seen[k] = true;
        cr_test_opts opts = {0};
        opts.npoints = 60;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        expect_pass(fx, st, &r, info.fn->name);
        assert_int_equal(r.nskipped, 0);
        assert_true(r.npoints >= 40);
    }
    for (size_t k = 0; k < NFNS; k++)
        if (!seen[k]) {
            print_error("no rule registered for %s\n", k_fns[k]);
            fail();
        }
}

/* L = [2 0 0; 1 3 0; -1 2 4] stored in A's lower triangle, junk above and, for the unit
 * case, on the diagonal. */
static void test_triangular(void **state)
{
    fixture *fx = *state;
    double a[9] = {2, 99, 99, 1, 3, 99, -1, 2, 4}, x[3] = {1, -2, 0.5};
    const double L[3][3] = {{2, 0, 0}, {1, 3, 0}, {-1, 2, 4}};
    cr_array A = cr_array_matrix(a, 3, 3), X = cr_array_vector(x, 3);
    cr_value args[5] = {cr_value_i64('L'), cr_value_i64('N'), cr_value_i64('N'), cr_value_array(&A),
                        cr_value_array(&X)},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trmv, args, 5, &y), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(at(&y, i), L[i][0] * x[0] + L[i][1] * x[1] + L[i][2] * x[2]);
    check_point(fx, &cr_fn_trmv, args, 5, "trmv L N N");
    /* trsv: forward substitution by hand */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsv, args, 5, &y), CR_OK);
    double z0 = x[0] / 2, z1 = (x[1] - z0) / 3, z2 = (x[2] + z0 - 2 * z1) / 4;
    ASSERT_CLOSE(at(&y, 0), z0, 1e-15);
    ASSERT_CLOSE(at(&y, 1), z1, 1e-15);
    ASSERT_CLOSE(at(&y, 2), z2, 1e-15);
    check_point(fx, &cr_fn_trsv, args, 5, "trsv L N N");
    /* transposed: Lᵀ x */
    args[1] = cr_value_i64('T');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trmv, args, 5, &y), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(at(&y, i), L[0][i] * x[0] + L[1][i] * x[1] + L[2][i] * x[2]);
    check_point(fx, &cr_fn_trsv, args, 5, "trsv L T N");
    /* unit diagonal: the diagonal is not read (set to junk) */
    double u[9] = {99, 99, 99, 1, 99, 99, -1, 2, 99};
    cr_array U = cr_array_matrix(u, 3, 3);
    args[1] = cr_value_i64('N');
    args[2] = cr_value_i64('U');
    args[3] = cr_value_array(&U);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trmv, args, 5, &y), CR_OK);
    ASSERT_DBL(at(&y, 0), x[0]);
    ASSERT_DBL(at(&y, 1), x[0] + x[1]);
    ASSERT_DBL(at(&y, 2), -x[0] + 2 * x[1] + x[2]);
    check_point(fx, &cr_fn_trsv, args, 5, "trsv unit diagonal");
    /* a zero pivot */
    a[4] = 0;
    args[2] = cr_value_i64('N');
    args[3] = cr_value_array(&A);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsv, args, 5, &y), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(fx->ctx), "zero on its diagonal");
    a[4] = 3;

    /* trmm and trsm from the right with a complex α: Y = α B Lᴴ, then α B L⁻ᴴ */
    double b[6] = {1, 2, 3, -1, 0.5, 2};
    cr_array B = cr_array_matrix(b, 2, 3);
    cr_complex al = CMPLX(0.5, -1);
    cr_value m[7] = {cr_value_i64('R'), cr_value_i64('L'),  cr_value_i64('C'), cr_value_i64('N'),
                     cr_value_c128(al), cr_value_array(&A), cr_value_array(&B)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trmm, m, 7, &y), CR_OK);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++) {
            cr_complex w = 0;
            for (size_t k = 0; k < 3; k++)
                w += b[i * 3 + k] * L[j][k]; /* (B Lᴴ)_ij = Σ_k B_ik conj(L_jk) */
            cr_complex g = cr_array_get_linear(y.u.arr, i * 3 + j);
            ASSERT_CPLX(g, creal(al * w), cimag(al * w));
        }
    check_point(fx, &cr_fn_trmm, m, 7, "trmm R L C N");
    check_point(fx, &cr_fn_trsm, m, 7, "trsm R L C N");
    /* trsm undoes trmm */
    cr_value t;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trmm, m, 7, &t), CR_OK);
    m[4] = cr_value_c128(1.0 / al);
    m[6] = t;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsm, m, 7, &y), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_CLOSE(at(&y, i), b[i], 1e-14);
    /* shape errors */
    m[6] = cr_value_array(&X);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsm, m, 7, &y), CR_EINVAL);
    m[0] = cr_value_i64('X');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsm, m, 7, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "side must be one of 'LR'");
}

static void test_scal_lacpy(void **state)
{
    fixture *fx = *state;
    double x[4] = {1, -2, 3, 0.5};
    cr_array X = cr_array_matrix(x, 2, 2);
    cr_value args[2] = {cr_value_f64(-1.5), cr_value_array(&X)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_scal, args, 2, &y), CR_OK);
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(at(&y, i), -1.5 * x[i]);
    check_point(fx, &cr_fn_scal, args, 2, "scal");
    args[0] = cr_value_c128(CMPLX(0, 2));
    check_point(fx, &cr_fn_scal, args, 2, "scal complex α, real x");

    double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {-1, -2, -3, -4, -5, -6};
    cr_array A = cr_array_matrix(a, 2, 3), B = cr_array_matrix(b, 2, 3);
    cr_value l[3] = {cr_value_array(&B), cr_value_array(&A), cr_value_i64('U')};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lacpy, l, 3, &y), CR_OK);
    const double up[6] = {1, 2, 3, -4, 5, 6};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), up[i]);
    check_point(fx, &cr_fn_lacpy, l, 3, "lacpy U");
    l[2] = cr_value_i64('L');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lacpy, l, 3, &y), CR_OK);
    const double lo[6] = {1, -2, -3, 4, 5, -6};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), lo[i]);
    l[2] = cr_value_i64('A');
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lacpy, l, 3, &y), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), a[i]);
    cr_array C = cr_array_matrix(a, 3, 2);
    l[1] = cr_value_array(&C);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lacpy, l, 3, &y), CR_ESHAPE);
}

/* fn(args) fails with the status want; the message names who once and contains text. */
static void expect_error(fixture *fx, const cr_value *fn, cr_value *args, size_t nargs,
                         cr_status want, const char *who, const char *text)
{
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, fn, args, nargs, &y), want);
    assert_error_once(cr_ctx_errmsg(fx->ctx), who, text);
}

/* lower-case flags; arguments of the wrong kind, dtype or shape */
static void test_flags_errors(void **state)
{
    fixture *fx = *state;
    double a[4] = {2, 0, 1, 3}, x[2] = {1, -1}, r[6] = {1, 2, 3, 4, 5, 6};
    int64_t k[4] = {1, 2, 3, 4};
    size_t sh[2] = {2, 2};
    cr_array A = cr_array_matrix(a, 2, 2), X = cr_array_vector(x, 2), R = cr_array_matrix(r, 2, 3),
             R3 = cr_array_vector(r, 3), K;
    assert_int_equal(cr_array_view_init(&K, k, CR_DT_I64, 2, sh, NULL), CR_OK);
    /* flags 'l', 'n', 'n': L x with L = [2 0; 1 3] */
    cr_value args[5] = {cr_value_i64('l'), cr_value_i64('n'), cr_value_i64('n'), cr_value_array(&A),
                        cr_value_array(&X)},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trmv, args, 5, &y), CR_OK);
    ASSERT_DBL(at(&y, 0), 2);
    ASSERT_DBL(at(&y, 1), -2);
    /* a flag that is no integer */
    args[0] = cr_value_f64(76);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trmv, args, 5, &y), CR_EINVAL);
    args[0] = cr_value_i64('L');
    /* an integer A, a rectangular A, a vector of the wrong length, an A that is no array */
    args[3] = cr_value_array(&K);
    expect_error(fx, &cr_fn_trmv, args, 5, CR_EINVAL, "trmv",
                 "A and B must be f64, f32 or c128 arrays");
    args[3] = cr_value_array(&R);
    expect_error(fx, &cr_fn_trsv, args, 5, CR_ESHAPE, "trsv", "A must be a square matrix");
    args[3] = cr_value_array(&A);
    args[4] = cr_value_array(&R3);
    expect_error(fx, &cr_fn_trmv, args, 5, CR_ESHAPE, "trmv", "a 2 x 2 triangle for a x of 3 rows");
    args[3] = cr_value_f64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trmv, args, 5, &y), CR_EINVAL);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "trmv", "");
    /* trmm from the right: B's columns must match A */
    cr_value m[7] = {cr_value_i64('R'), cr_value_i64('U'),  cr_value_i64('N'), cr_value_i64('N'),
                     cr_value_f64(1),   cr_value_array(&A), cr_value_array(&R)};
    expect_error(fx, &cr_fn_trmm, m, 7, CR_ESHAPE, "trmm", "a 2 x 2 triangle for a B of 3 columns");

    /* scal: an integer x, a wrong count, an x that is no array */
    cr_value s[2] = {cr_value_f64(2), cr_value_array(&K)};
    expect_error(fx, &cr_fn_scal, s, 2, CR_EINVAL, "scal", "x must be an f64, f32 or c128 array");
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_scal, s, 1, &y), CR_EINVAL);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "scal", "");
    s[1] = cr_value_f64(3);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_scal, s, 2, &y), CR_EINVAL);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "scal", "");

    /* lacpy: 'u' as 'U'; an integer A; a complex A for a real B; a B that is no array */
    double b[4] = {0, 0, 0, 0};
    cr_array B = cr_array_matrix(b, 2, 2);
    cr_value l[3] = {cr_value_array(&B), cr_value_array(&A), cr_value_i64('u')};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lacpy, l, 3, &y), CR_OK);
    const double up[4] = {2, 0, 0, 3};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(at(&y, i), up[i]);
    l[1] = cr_value_array(&K);
    expect_error(fx, &cr_fn_lacpy, l, 3, CR_EINVAL, "lacpy",
                 "A and B must be f64, f32 or c128 matrices");
    cr_complex z[4] = {1, CMPLX(0, 1), 2, 3};
    cr_array Z;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 2, sh, NULL), CR_OK);
    l[1] = cr_value_array(&Z);
    expect_error(fx, &cr_fn_lacpy, l, 3, CR_EINVAL, "lacpy", "a complex A for a real B");
    l[0] = cr_value_f64(0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_lacpy, l, 3, &y), CR_EINVAL);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "lacpy", "");
}

/* f32 data: the results stay f32 and match the f64 values to f32 precision */
static void test_f32(void **state)
{
    fixture *fx = *state;
    float a[4] = {2, 0, 1, 3}, x[2] = {1, -1};
    size_t two = 2, sh[2] = {2, 2};
    cr_array A, X;
    assert_int_equal(cr_array_view_init(&A, a, CR_DT_F32, 2, sh, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&X, x, CR_DT_F32, 1, &two, NULL), CR_OK);
    /* an f32 α keeps f32; an f64 α promotes to f64 */
    cr_value s[2] = {cr_value_f32(-1.5f), cr_value_array(&X)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_scal, s, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    ASSERT_DBL(at(&y, 0), -1.5);
    ASSERT_DBL(at(&y, 1), 1.5);
    check_point(fx, &cr_fn_scal, s, 2, "scal f32");
    s[0] = cr_value_f64(-1.5);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_scal, s, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F64);
    /* L⁻¹ x by forward substitution: (0.5, -0.5) */
    cr_value t[5] = {cr_value_i64('L'), cr_value_i64('N'), cr_value_i64('N'), cr_value_array(&A),
                     cr_value_array(&X)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_trsv, t, 5, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    ASSERT_CLOSE(at(&y, 0), 0.5, 1e-7);
    ASSERT_CLOSE(at(&y, 1), -0.5, 1e-7);
    check_point(fx, &cr_fn_trsv, t, 5, "trsv f32");
}

/* every allocation of the rules failing in turn: CR_EARENA, then the same output */
static void test_arena_full(void **state)
{
    fixture *fx = *state;
    double a[4] = {2, 0, 1, 3}, x[2] = {1, -1}, b[4] = {1, 2, -1, 0.5};
    cr_array A = cr_array_matrix(a, 2, 2), X = cr_array_vector(x, 2), B = cr_array_matrix(b, 2, 2);
    cr_value v[5] = {cr_value_i64('L'), cr_value_i64('T'), cr_value_i64('N'), cr_value_array(&A),
                     cr_value_array(&X)};
    assert_arena_sweep(fx, &cr_fn_trmv, v, 5);
    assert_arena_sweep_rules(fx, &cr_fn_trmv, v, 5);
    assert_arena_sweep(fx, &cr_fn_trsv, v, 5);
    assert_arena_sweep_rules(fx, &cr_fn_trsv, v, 5);
    cr_value m[7] = {cr_value_i64('R'), cr_value_i64('U'),  cr_value_i64('C'), cr_value_i64('N'),
                     cr_value_f64(2),   cr_value_array(&A), cr_value_array(&B)};
    assert_arena_sweep(fx, &cr_fn_trmm, m, 7);
    assert_arena_sweep_rules(fx, &cr_fn_trmm, m, 7);
    assert_arena_sweep(fx, &cr_fn_trsm, m, 7);
    assert_arena_sweep_rules(fx, &cr_fn_trsm, m, 7);
    cr_value s[2] = {cr_value_c128(CMPLX(1, 2)), cr_value_array(&B)};
    assert_arena_sweep(fx, &cr_fn_scal, s, 2);
    assert_arena_sweep_rules(fx, &cr_fn_scal, s, 2);
    double c[4] = {0, 0, 0, 0};
    cr_array C = cr_array_matrix(c, 2, 2);
    cr_value l[3] = {cr_value_array(&C), cr_value_array(&A), cr_value_i64('L')};
    assert_arena_sweep(fx, &cr_fn_lacpy, l, 3);
    assert_arena_sweep_rules(fx, &cr_fn_lacpy, l, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_triangular, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scal_lacpy, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_flags_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_f32, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_full, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
