/*
 * The testing utilities of ChainRulesTestUtils and FiniteDifferences (testing.h):
 * test_approx names the component that differs; the finite-difference rule configuration
 * differentiates map over a function that has no rule, against the function's known
 * derivative; grad against known gradients; random matrices have the condition number
 * asked for (checked through their Gram matrices' eigenvalues by Jacobi rotations).
 */
#include "test_util.h"

/* ---- test_approx ---------------------------------------------------------------------------- */

typedef struct pt {
    double x, y;
    int64_t id;
} pt;
static const cr_field pt_fields[] = {{"x", offsetof(pt, x), CR_KIND_F64, NULL},
                                     {"y", offsetof(pt, y), CR_KIND_F64, NULL},
                                     {"id", offsetof(pt, id), CR_KIND_I64, NULL}};
static const cr_type pt_type = {"pt", sizeof(pt), 3, pt_fields};

static void test_approx_scalars_arrays(void **state)
{
    (void)state;
    char where[256];
    cr_value v = cr_value_f64(2.0);
    assert_true(cr_test_approx(&v, cr_tangent_f64(1.0), cr_tangent_f64(1.0 + 1e-12), 1e-9, 0, where,
                               sizeof where));
    assert_string_equal(where, "");
    assert_false(cr_test_approx(&v, cr_tangent_f64(1.0), cr_tangent_f64(1.5), 1e-9, 1e-9, where,
                                sizeof where));
    assert_non_null(strstr(where, "1 against 1.5"));
    assert_non_null(strstr(where, "absolute error 0.5"));
    /* zeros read as zeros */
    assert_true(cr_test_approx(&v, cr_tangent_zero(), cr_tangent_f64(0.0), 0, 0, NULL, 0));
    double a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3.5, 4}, p[4] = {0};
    cr_array A = cr_array_vector(a, 4), B = cr_array_vector(b, 4), P = cr_array_vector(p, 4);
    cr_value pv = cr_value_array(&P);
    assert_false(cr_test_approx(&pv, cr_tangent_array(&A), cr_tangent_array(&B), 1e-9, 1e-9, where,
                                sizeof where));
    assert_non_null(strstr(where, "[2]"));
    assert_non_null(strstr(where, "3 against 3.5"));
    /* within a loose tolerance */
    assert_true(cr_test_approx(&pv, cr_tangent_array(&A), cr_tangent_array(&B), 0.2, 0, NULL, 0));
    /* a tangent that does not fit */
    cr_value sv = cr_value_f64(1.0);
    assert_false(
        cr_test_approx(&sv, cr_tangent_array(&A), cr_tangent_f64(1), 1e-9, 0, where, sizeof where));
    assert_non_null(strstr(where, "does not fit"));
    /* bad tolerances */
    assert_false(
        cr_test_approx(&v, cr_tangent_f64(1), cr_tangent_f64(1), -1, 0, where, sizeof where));
}

static void test_approx_struct(void **state)
{
    fixture *fx = *state;
    pt p0 = {1, 2, 7};
    cr_value v = cr_value_struct(&pt_type, &p0);
    static const char *const names[] = {"x", "y"};
    cr_tangent fa[2] = {cr_tangent_f64(0.5), cr_tangent_f64(1.0)};
    cr_tangent fb[2] = {cr_tangent_f64(0.5), cr_tangent_f64(1.25)};
    cr_tangent ta, tb;
    assert_int_equal(cr_tangent_struct(fx->arena, &pt_type, names, fa, 2, &ta), CR_OK);
    assert_int_equal(cr_tangent_struct(fx->arena, &pt_type, names, fb, 2, &tb), CR_OK);
    char where[256];
    assert_false(cr_test_approx(&v, ta, tb, 1e-9, 1e-9, where, sizeof where));
    assert_non_null(strstr(where, "y"));
    assert_null(strstr(where, "component .x"));
    assert_true(cr_test_approx(&v, ta, ta, 0, 0, where, sizeof where));
}

/* ---- The finite-difference configuration ----------------------------------------------------- */

/* softplus(x) = log(1 + e^x), a function with a primal and no rule */
static cr_status softplus_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                                 cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    if (args[0].kind != CR_KIND_F64)
        return CR_EINVAL;
    *out = cr_value_f64(log1p(exp(args[0].u.f64)));
    return CR_OK;
}
static const cr_function softplus_fn = {"softplus", 1, softplus_primal, NULL, NULL, 0};

/* hyp(x, y) = x^2 y + sin(y), two arguments */
static cr_status hyp_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                            cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    double x = args[0].u.f64, y = args[1].u.f64;
    *out = cr_value_f64(x * x * y + sin(y));
    return CR_OK;
}
static const cr_function hyp_fn = {"hyp", 2, hyp_primal, NULL, NULL, 0};

static void test_fd_config_map(void **state)
{
    fixture *fx = *state;
    cr_test_fd_env env;
    cr_config cfg;
    assert_int_equal(cr_test_fd_config(NULL, NULL, NULL, &env, &cfg), CR_OK);
    double x[3] = {-1.5, 0.2, 2.0};
    cr_array X = cr_array_vector(x, 3);
    cr_value args[2] = {cr_value_function(&softplus_fn, NULL), cr_value_array(&X)};
    /* without a capable configuration map cannot differentiate softplus */
    cr_value y;
    cr_pullback pb;
    assert_int_not_equal(cr_rrule(NULL, fx->arena, &cr_fn_map, args, 2, &y, &pb), CR_OK);
    cr_ctx_clear_error(fx->ctx);
    /* with it: the pullback of map is the logistic function, elementwise */
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_map, args, 2, &y, &pb), CR_OK);
    double ones[3] = {1, 1, 1};
    cr_array O = cr_array_vector(ones, 3);
    cr_tangent dy = cr_tangent_array(&O), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    cr_tangent g;
    assert_int_equal(cr_tangent_unthunk(dx[2], &g), CR_OK);
    assert_int_equal(g.tag, CR_TAN_ARRAY);
    for (int i = 0; i < 3; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(g.u.arr, (size_t)i)), 1 / (1 + exp(-x[i])), 1e-9);
    /* and map's frule through frule_via_ad */
    double d[3] = {0.5, -1, 2};
    cr_array D = cr_array_vector(d, 3);
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_array(&D)}, dyf;
    assert_int_equal(cr_frule(&cfg, fx->arena, dargs, &cr_fn_map, args, 2, &y, &dyf), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dyf, &dyf), CR_OK);
    for (int i = 0; i < 3; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(dyf.u.arr, (size_t)i)), d[i] / (1 + exp(-x[i])),
                     1e-9);
    /* the testers, given the configuration, pass map over it */
    cr_test_opts opts = {.cfg = &cfg};
    cr_test_report rep;
    assert_int_equal(cr_test_rrule(fx->arena, &opts, &cr_fn_map, args, 2, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    assert_int_equal(cr_test_frule(fx->arena, &opts, &cr_fn_map, args, 2, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    /* a second-derivative method is refused */
    cr_fdm m2;
    assert_int_equal(cr_fdm_central(5, 2, &m2), CR_OK);
    assert_int_equal(cr_test_fd_config(&m2, NULL, NULL, &env, &cfg), CR_EINVAL);
}

static void test_fd_grad(void **state)
{
    fixture *fx = *state;
    cr_value f = cr_value_function(&hyp_fn, NULL);
    cr_value args[2] = {cr_value_f64(1.3), cr_value_f64(-0.4)};
    cr_tangent g[2];
    assert_int_equal(cr_fd_grad(fx->arena, NULL, NULL, &f, args, 2, g), CR_OK);
    double x = 1.3, y = -0.4;
    assert_int_equal(g[0].tag, CR_TAN_F64);
    ASSERT_CLOSE(g[0].u.f64, 2 * x * y, 1e-10);
    ASSERT_CLOSE(g[1].u.f64, x * x + cos(y), 1e-10);
    /* over an array: the gradient of sum(softplus) through map is not real-valued */
    double v[2] = {0.1, 0.2};
    cr_array V = cr_array_vector(v, 2);
    cr_value margs[2] = {cr_value_function(&softplus_fn, NULL), cr_value_array(&V)};
    cr_tangent mg[2];
    assert_int_equal(cr_fd_grad(fx->arena, NULL, NULL, &cr_fn_map, margs, 2, mg), CR_ESHAPE);
    assert_int_equal(cr_fd_grad(NULL, NULL, NULL, &f, args, 2, g), CR_EINVAL);
}

/* ---- Random matrices ------------------------------------------------------------------------ */

/* The eigenvalues of the symmetric n x n matrix s (overwritten) by cyclic Jacobi
 * rotations, into ev: an independent reference for small n. */
static void jacobi_eigs(double *s, size_t n, double *ev)
{
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0;
        for (size_t p = 0; p < n; p++)
            for (size_t q = p + 1; q < n; q++)
                off += s[p * n + q] * s[p * n + q];
        if (off < 1e-30)
            break;
        for (size_t p = 0; p < n; p++)
            for (size_t q = p + 1; q < n; q++) {
                double apq = s[p * n + q];
                if (apq == 0)
                    continue;
                double theta = (s[q * n + q] - s[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), sn = t * c;
                for (size_t k = 0; k < n; k++) { /* columns p, q */
                    double skp = s[k * n + p], skq = s[k * n + q];
                    s[k * n + p] = c * skp - sn * skq;
                    s[k * n + q] = sn * skp + c * skq;
                }
                for (size_t k = 0; k < n; k++) { /* rows p, q */
                    double spk = s[p * n + k], sqk = s[q * n + k];
                    s[p * n + k] = c * spk - sn * sqk;
                    s[q * n + k] = sn * spk + c * sqk;
                }
            }
    }
    for (size_t i = 0; i < n; i++)
        ev[i] = s[i * n + i];
}

/* The extreme singular values of A: square roots of the extreme eigenvalues of A^T A. */
static void extreme_singular(const double *a, size_t n, double *smax, double *smin)
{
    double s[64], ev[8];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            s[i * n + j] = 0;
            for (size_t k = 0; k < n; k++)
                s[i * n + j] += a[k * n + i] * a[k * n + j];
        }
    jacobi_eigs(s, n, ev);
    double hi = ev[0], lo = ev[0];
    for (size_t i = 1; i < n; i++) {
        hi = fmax(hi, ev[i]);
        lo = fmin(lo, ev[i]);
    }
    *smax = sqrt(hi);
    *smin = sqrt(lo);
}

static void test_rand_matrix(void **state)
{
    fixture *fx = *state;
    uint64_t rng = 42;
    cr_array *a;
    for (size_t n = 1; n <= 6; n++) {
        assert_int_equal(cr_test_rand_matrix(fx->arena, &rng, n, 50.0, CR_TEST_MATRIX_GENERAL, &a),
                         CR_OK);
        double smax, smin;
        extreme_singular(a->data, n, &smax, &smin);
        if (n > 1) {
            ASSERT_CLOSE(smax, 50.0, 1e-6);
            ASSERT_CLOSE(smin, 1.0, 1e-6);
        } else {
            ASSERT_CLOSE(fabs(((double *)a->data)[0]), 1.0, 1e-12);
        }
        assert_int_equal(cr_test_rand_matrix(fx->arena, &rng, n, 10.0, CR_TEST_MATRIX_SPD, &a),
                         CR_OK);
        const double *m = a->data;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                ASSERT_DBL(m[i * n + j], m[j * n + i]);
        extreme_singular(m, n, &smax, &smin);
        ASSERT_CLOSE(smax, n > 1 ? 10.0 : 1.0, 1e-6);
        /* positive definite: a Cholesky factorisation succeeds */
        double l[36];
        memcpy(l, m, n * n * sizeof *l);
        for (size_t j = 0; j < n; j++) {
            double d = l[j * n + j];
            for (size_t k = 0; k < j; k++)
                d -= l[j * n + k] * l[j * n + k];
            assert_true(d > 0);
            l[j * n + j] = sqrt(d);
            for (size_t i = j + 1; i < n; i++) {
                double s = l[i * n + j];
                for (size_t k = 0; k < j; k++)
                    s -= l[i * n + k] * l[j * n + k];
                l[i * n + j] = s / l[j * n + j];
            }
        }
        assert_int_equal(
            cr_test_rand_matrix(fx->arena, &rng, n, 1.0, CR_TEST_MATRIX_ORTHOGONAL, &a), CR_OK);
        const double *q = a->data;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double s = 0;
                for (size_t k = 0; k < n; k++)
                    s += q[k * n + i] * q[k * n + j];
                ASSERT_CLOSE(s, i == j ? 1.0 : 0.0, 1e-13);
            }
    }
    assert_int_equal(cr_test_rand_matrix(fx->arena, &rng, 0, 2.0, CR_TEST_MATRIX_GENERAL, &a),
                     CR_EINVAL);
    assert_int_equal(cr_test_rand_matrix(fx->arena, &rng, 3, 0.5, CR_TEST_MATRIX_GENERAL, &a),
                     CR_EINVAL);
    assert_int_equal(cr_test_rand_matrix(fx->arena, &rng, 3, 2.0, (cr_test_matrix_kind)7, &a),
                     CR_EINVAL);
    assert_int_equal(
        cr_test_rand_matrix(fx->arena, &rng, SIZE_MAX / 2, 2.0, CR_TEST_MATRIX_GENERAL, &a),
        CR_EOVERFLOW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_approx_scalars_arrays),
        cmocka_unit_test_setup_teardown(test_approx_struct, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_fd_config_map, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_fd_grad, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rand_matrix, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
