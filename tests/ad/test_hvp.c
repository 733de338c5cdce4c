/*
 * Tests of second order on the tape: Hessian-vector products and full Hessians
 * (forward-over-reverse on a CR_TAPE_SECOND_ORDER recording), checked against the
 * hand-derived Hessian of Rosenbrock and against central second differences of the test
 * functions computed in plain C. Covers every record kind: linear and nonlinear one- and
 * two-operand records, products, rows of three operands, rows with a complex
 * instantiation (complex step) and real-only rows (differences of the partials, kinks).
 */
#include <math.h>
#include <stdio.h>

#include "test_fdhess.h"
#include "test_rosen.h"
#include "test_util.h"

static cr_var call2(cr_tape *t, const cr_value *f, cr_var a, cr_var b)
{
    cr_var args[2] = {a, b};
    return cr_tape_call1(t, f, args, 2);
}

static cr_var call3(cr_tape *t, const cr_value *f, cr_var a, cr_var b, cr_var c)
{
    cr_var args[3] = {a, b, c};
    return cr_tape_call1(t, f, args, 3);
}

/* ---- Rosenbrock --------------------------------------------------------------------------- */

/* The Hessian of Rosenbrock, derived by hand (tridiagonal). */
static void rosen_hessian(const double *x, size_t n, double *H)
{
    for (size_t i = 0; i < n * n; i++)
        H[i] = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        H[i * n + i] += 1200.0 * x[i] * x[i] - 400.0 * x[i + 1] + 2.0;
        H[i * n + i + 1] += -400.0 * x[i];
        H[(i + 1) * n + i] += -400.0 * x[i];
        H[(i + 1) * n + i + 1] += 200.0;
    }
}

static void test_rosenbrock_hvp(void **state)
{
    fixture *f = *state;
    enum { N = 12 };
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    double x[N], v[N], hv[N], g[N], H[N * N], Ht[N * N];
    for (size_t i = 0; i < N; i++)
        x[i] = 0.2 + 0.7 * cos(0.9 * (double)i);
    cr_var xs[N], y;
    assert_int_equal(cr_tape_record(t, rosen_t, NULL, x, N, xs, &y, 1), CR_OK);
    rosen_hessian(x, N, H);
    /* Several directions on one recording. */
    for (int dir = 0; dir < 3; dir++) {
        for (size_t i = 0; i < N; i++)
            v[i] = sin((double)(i + 1) * (dir + 1.5));
        assert_int_equal(cr_tape_hvp(t, y, xs, N, v, hv, g), CR_OK);
        for (size_t i = 0; i < N; i++) {
            double want = 0;
            for (size_t j = 0; j < N; j++)
                want += H[i * N + j] * v[j];
            assert_close(hv[i], want, 1e-13);
        }
    }
    /* The gradient comes out too. */
    double want_g0 = -400.0 * (x[1] - x[0] * x[0]) * x[0] - 2.0 * (1.0 - x[0]);
    assert_close(g[0], want_g0, 1e-13);
    /* The full Hessian: N = 12 directions in two chunks. */
    assert_int_equal(cr_tape_hessian(t, y, xs, N, Ht), CR_OK);
    for (size_t i = 0; i < N * N; i++)
        assert_close(Ht[i], H[i], 1e-13);
    cr_tape_free(t);
}

/* ---- A function over every record kind ---------------------------------------------------- */

/* k(x) = sin(x0) exp(x1) / x2 + log(x0 x1) + sqrt(x2) asin(x0 / 3) - cos(x0 - x1)
 *        + muladd(x0, x1, x2) x0 + tanh(x2) pow(x1, x0) + x0 x0 x2 + 7 x1 */
static double k_c(const double *x)
{
    return sin(x[0]) * exp(x[1]) / x[2] + log(x[0] * x[1]) + sqrt(x[2]) * asin(x[0] / 3) -
           cos(x[0] - x[1]) + (x[0] * x[1] + x[2]) * x[0] + tanh(x[2]) * pow(x[1], x[0]) +
           x[0] * x[0] * x[2] + 7 * x[1];
}

static cr_status k_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a = cr_div(t, cr_mul(t, cr_sin(t, x[0]), cr_exp(t, x[1])), x[2]);
    cr_var b = cr_log(t, cr_mul(t, x[0], x[1]));
    cr_var c = cr_mul(t, cr_sqrt(t, x[2]), cr_asin(t, cr_div(t, x[0], cr_const(3.0))));
    cr_var d = cr_cos(t, cr_sub(t, x[0], x[1]));
    cr_var e = cr_mul(t, call3(t, &cr_fn_muladd, x[0], x[1], x[2]), x[0]);
    cr_var g = cr_mul(t, cr_tape_call1(t, &cr_fn_tanh, &x[2], 1), call2(t, &cr_fn_pow, x[1], x[0]));
    cr_var h = cr_mul(t, cr_mul(t, x[0], x[0]), x[2]);
    cr_var s = cr_add(t, cr_sub(t, cr_add(t, cr_add(t, a, b), c), d), cr_add(t, e, g));
    y[0] = cr_add(t, cr_add(t, s, h), cr_mul(t, cr_const(7.0), x[1]));
    return cr_tape_status(t);
}

static void check_hessian(fixture *f, cr_ad_fn ft, double (*fc)(const double *), const double *x,
                          size_t n, double rtol)
{
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    check_tape_hessian(t, ft, fc, x, n, 1e-14, rtol);
    cr_tape_free(t);
}

static void test_hessian_all_kinds(void **state)
{
    const double pts[][3] = {{0.7, 1.3, 0.9}, {1.1, 0.6, 2.0}, {-0.4, 1.8, 0.5}};
    for (size_t i = 0; i < 3; i++) {
        double x[3] = {pts[i][0], pts[i][1], pts[i][2]};
        if (x[0] * x[1] <= 0) /* log's domain */
            x[0] = -x[0];
        check_hessian(*state, k_t, k_c, x, 3, 2e-6);
    }
}

/* Every way an arithmetic operation takes its operands on a second-order tape: two
 * variables, a variable and a constant on either side, the same variable twice, and neg:
 * a(x) = x0 x1 (x1 / x2) + (2.5 / x0)(x2 / 3) + (x0 x0) x2 + (x0 - x1)(x2 + 1)
 *        + (-x1)(0.5 - x2) + (x1 x1) / (x0 + x2) + (x2 - x2) x0 + 4 x0 x1 - (x0 / x0) x1. */
static double a_c(const double *x)
{
    return x[0] * x[1] * (x[1] / x[2]) + (2.5 / x[0]) * (x[2] / 3) + (x[0] * x[0]) * x[2] +
           (x[0] - x[1]) * (x[2] + 1) + (-x[1]) * (0.5 - x[2]) + (x[1] * x[1]) / (x[0] + x[2]) +
           4 * x[0] * x[1] - x[1];
}

static cr_var a_body(cr_tape *t, const cr_var *x)
{
    cr_var r = cr_mul(t, cr_mul(t, x[0], x[1]), cr_div(t, x[1], x[2]));
    r = cr_add(t, r, cr_mul(t, cr_div(t, cr_const(2.5), x[0]), cr_div(t, x[2], cr_const(3.0))));
    r = cr_add(t, r, cr_mul(t, cr_mul(t, x[0], x[0]), x[2]));
    r = cr_add(t, r, cr_mul(t, cr_sub(t, x[0], x[1]), cr_add(t, x[2], cr_const(1.0))));
    r = cr_add(t, r, cr_mul(t, cr_neg(t, x[1]), cr_sub(t, cr_const(0.5), x[2])));
    r = cr_add(t, r, cr_div(t, cr_mul(t, x[1], x[1]), cr_add(t, x[0], x[2])));
    r = cr_add(t, r, cr_mul(t, cr_sub(t, x[2], x[2]), x[0]));
    r = cr_add(t, r, cr_mul(t, cr_const(4.0), cr_mul(t, x[0], x[1])));
    return cr_sub(t, r, cr_mul(t, cr_div(t, x[0], x[0]), x[1]));
}

static cr_status a_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = a_body(t, x);
    return cr_tape_status(t);
}

/* The same program through the thread's current tape (t NULL: the general path). */
static cr_status a_cur(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = a_body(NULL, x);
    return cr_tape_status(t);
}

/* Against second differences, and against the general path of each operation (the rows
 * through their pointers, cr__row_hessian's complex step), which a tape given explicitly
 * skips for the arithmetic rows. */
static void test_hessian_arith_operands(void **state)
{
    fixture *f = *state;
    const double pts[][3] = {{0.7, 1.3, 0.9}, {1.1, -0.6, 2.0}, {-0.4, 1.8, 1.5}};
    cr_tape *t, *u;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, &p, &u), CR_OK);
    for (size_t i = 0; i < 3; i++) {
        const double *x = pts[i];
        check_tape_hessian(t, a_t, a_c, x, 3, 1e-13, 2e-6);
        cr_var xs[3], xu[3], y, yu;
        double H[9], Hu[9];
        assert_int_equal(cr_tape_record(t, a_t, NULL, x, 3, xs, &y, 1), CR_OK);
        assert_int_equal(cr_tape_hessian(t, y, xs, 3, H), CR_OK);
        cr_tape *prev = cr_tape_set_current(u);
        assert_int_equal(cr_tape_record(u, a_cur, NULL, x, 3, xu, &yu, 1), CR_OK);
        cr_tape_set_current(prev);
        assert_true(yu.v == y.v);
        assert_int_equal(cr_tape_hessian(u, yu, xu, 3, Hu), CR_OK);
        for (size_t q = 0; q < 9; q++)
            assert_close(H[q], Hu[q], 1e-13);
    }
    cr_tape_free(t);
    cr_tape_free(u);
}

/* Real-only rows: atan2, hypot, erf, fma, and kinks (fabs, relu, max). */
static double r_c(const double *x)
{
    double relu = x[1] > 0 ? x[1] : 0.0;
    return atan2(x[0], x[1]) * hypot(x[0], x[2]) + erf(x[2]) * fma(x[0], x[1], x[2]) +
           x[0] * fabs(x[2]) + relu * relu * x[0] + fmax(x[0], x[1]) * x[2];
}

static cr_status r_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a = cr_mul(t, call2(t, &cr_fn_atan2, x[0], x[1]), call2(t, &cr_fn_hypot, x[0], x[2]));
    cr_var b =
        cr_mul(t, cr_tape_call1(t, &cr_fn_erf, &x[2], 1), call3(t, &cr_fn_fma, x[0], x[1], x[2]));
    cr_var c = cr_mul(t, x[0], cr_tape_call1(t, &cr_fn_fabs, &x[2], 1));
    cr_var r = cr_tape_call1(t, &cr_fn_relu, &x[1], 1);
    cr_var d = cr_mul(t, cr_mul(t, r, r), x[0]);
    cr_var e = cr_mul(t, call2(t, &cr_fn_fmax, x[0], x[1]), x[2]);
    y[0] = cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), e);
    return cr_tape_status(t);
}

static void test_hessian_real_only_rows(void **state)
{
    const double pts[][3] = {{0.7, 1.3, 0.9}, {1.2, 0.3, -0.8}, {-0.5, 0.4, 0.6}};
    for (size_t i = 0; i < 3; i++)
        check_hessian(*state, r_t, r_c, pts[i], 3, 2e-6);
}

/* pow(x, c) with x < 0 and an integer c is real, but its complex instantiation exp(c log x)
 * lies on the branch cut of log: the second derivatives there come from differences of the
 * partials, not from the complex step (which gave -55107 for d2/dx2 x^3 at x = -0.5). */
static double p_c(const double *x)
{
    return pow(x[0], 3) + pow(x[1], 2) * x[0] + pow(x[2], -1) * x[1] + pow(x[0], 4) * x[2];
}

static cr_var powc(cr_tape *t, cr_var x, double c)
{
    return call2(t, &cr_fn_pow, x, cr_const(c));
}

static cr_status p_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a = cr_add(t, powc(t, x[0], 3), cr_mul(t, powc(t, x[1], 2), x[0]));
    cr_var b = cr_add(t, cr_mul(t, powc(t, x[2], -1), x[1]), cr_mul(t, powc(t, x[0], 4), x[2]));
    y[0] = cr_add(t, a, b);
    return cr_tape_status(t);
}

static void test_hessian_branch_cut(void **state)
{
    const double pts[][3] = {{-0.5, -0.3, -1.7}, {-1.2, 0.8, -0.6}, {0.7, -1.1, 1.4}};
    for (size_t i = 0; i < 3; i++)
        check_hessian(*state, p_t, p_c, pts[i], 3, 2e-6);
}

/* Kinks: q(x) = x0 |x2| + relu(x1)^2 x0 + max(x0, x1) x2, within a difference step of the
 * kinks, where central differences (of the primal or of the partials) straddle them. The
 * reference is q's Hessian derived by hand. */
static cr_status q_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var c = cr_mul(t, x[0], cr_tape_call1(t, &cr_fn_fabs, &x[2], 1));
    cr_var r = cr_tape_call1(t, &cr_fn_relu, &x[1], 1);
    cr_var d = cr_mul(t, cr_mul(t, r, r), x[0]);
    cr_var e = cr_mul(t, call2(t, &cr_fn_fmax, x[0], x[1]), x[2]);
    y[0] = cr_add(t, cr_add(t, c, d), e);
    return cr_tape_status(t);
}

static void test_hessian_kinks(void **state)
{
    fixture *f = *state;
    const double pts[][3] = {
        {1.2, 2e-7, -0.8}, {-0.5, 0.4, 1e-7}, {0.3, -1e-7, -3e-7}, {0.25, 0.25 + 1e-7, 0.5}};
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    for (size_t i = 0; i < 4; i++) {
        const double *x = pts[i];
        cr_var xs[3], y;
        double H[9];
        assert_int_equal(cr_tape_record(t, q_t, NULL, x, 3, xs, &y, 1), CR_OK);
        assert_int_equal(cr_tape_hessian(t, y, xs, 3, H), CR_OK);
        double relu = x[1] > 0 ? x[1] : 0.0;
        double want[9] = {0.0,
                          2 * relu,
                          (x[2] > 0 ? 1.0 : -1.0) + (x[0] > x[1] ? 1.0 : 0.0),
                          2 * relu,
                          x[1] > 0 ? 2 * x[0] : 0.0,
                          x[1] > x[0] ? 1.0 : 0.0,
                          (x[2] > 0 ? 1.0 : -1.0) + (x[0] > x[1] ? 1.0 : 0.0),
                          x[1] > x[0] ? 1.0 : 0.0,
                          0.0};
        for (size_t j = 0; j < 9; j++)
            assert_close(H[j], want[j], 1e-9);
    }
    cr_tape_free(t);
}

/* Eleven inputs: the Hessian takes two chunks of directions. */
static double c_c(const double *x)
{
    double s = 0, q = 0;
    for (size_t i = 0; i < 11; i++) {
        q += x[i];
        if (i + 1 < 11)
            s += x[i] * x[i + 1] * x[i + 1];
    }
    return s + exp(0.1 * q);
}

static cr_status c_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0), q = cr_const(0.0);
    for (size_t i = 0; i < n; i++) {
        q = cr_add(t, q, x[i]);
        if (i + 1 < n)
            s = cr_add(t, s, cr_mul(t, x[i], cr_mul(t, x[i + 1], x[i + 1])));
    }
    y[0] = cr_add(t, s, cr_exp(t, cr_mul(t, cr_const(0.1), q)));
    return cr_tape_status(t);
}

static void test_hessian_chunks(void **state)
{
    double x[11];
    for (size_t i = 0; i < 11; i++)
        x[i] = 0.5 + 0.1 * (double)i;
    check_hessian(*state, c_t, c_c, x, 11, 2e-6);
}

/* ---- Errors -------------------------------------------------------------------------------- */

static void test_errors(void **state)
{
    fixture *f = *state;
    cr_tape *t, *r;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &r), CR_OK);
    cr_var x = cr_tape_input(r, 1.0), y = cr_sin(r, x);
    double v = 1.0, hv, H;
    assert_int_equal(cr_tape_hvp(r, y, &x, 1, &v, &hv, NULL), CR_EMISUSE);
    assert_contains(cr_ctx_errmsg(f->ctx), "CR_TAPE_SECOND_ORDER");
    assert_int_equal(cr_tape_hessian(r, y, &x, 1, &H), CR_EMISUSE);

    x = cr_tape_input(t, 1.0);
    y = cr_sin(t, x);
    v = (double)INFINITY;
    assert_int_equal(cr_tape_hvp(t, y, &x, 1, &v, &hv, NULL), CR_EDOMAIN);
    /* A constant output has a zero Hessian. */
    assert_int_equal(cr_tape_hessian(t, cr_const(2.0), &x, 1, &H), CR_OK);
    assert_true(H == 0.0);
    assert_int_equal(cr_tape_hessian(t, y, &x, 1, &H), CR_OK);
    assert_close(H, -sin(1.0), 1e-15);

    cr_tape_free(t);
    cr_tape_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rosenbrock_hvp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_all_kinds, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_arith_operands, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_real_only_rows, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_kinks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_branch_cut, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_chunks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
