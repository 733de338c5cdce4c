/*
 * The reverse mode of functions whose result is not differentiable (nondiff_input.c): no
 * seed parameter for an integer result, the gradient of the real outputs against central
 * differences (cr_fd_jacobian, five points), and the shadows of parameters that reach no
 * real output left as they were (f_rev) or set to zero (f_rev_set, whose shadows are filled
 * with NaN first); const-qualified scalar parameters. Their forward modes (f_fwd, f_fwdv)
 * and Jacobian entries (f_jacfwd) too: an output array's tangents and the gradients of
 * functions calling helpers with const scalar parameters against central differences,
 * integer results whose tangent parameters nothing reads. The generated file compiles with
 * -Werror -Wall -Wextra.
 */
#include <math.h>
#include <string.h>

#include "nondiff_input.h"
#include "test_util.h"

enum { N = 5 };

static const double k_seed[N] = {0.7, -1.3, 0.4, 2.0, -0.6};

/* y_b . y(x), the scalar whose gradient n_count_rev computes from the seed y_b */
static cr_status count_map(const double *x, size_t n, double *out, size_t m, void *env)
{
    (void)m;
    (void)env;
    double y[N];
    n_count(x, y, (int)n);
    out[0] = 0;
    for (size_t i = 0; i < n; i++)
        out[0] += k_seed[i] * y[i];
    return CR_OK;
}

static cr_status partial_map(const double *v, size_t n, double *out, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    out[0] = n_partial(v[0], v[1], v + 2);
    return CR_OK;
}

static void fd_gradient(fixture *fx,
                        cr_status (*f)(const double *, size_t, double *, size_t, void *),
                        const double *x, size_t n, double *g)
{
    cr_fdm method;
    assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
    assert_int_equal(cr_fd_jacobian(&method, NULL, f, NULL, x, n, 1, fx->arena, g, NULL), CR_OK);
}

/* An integer result and an output array: the gradient of y_b . y, the count returned. */
static void test_count(void **state)
{
    fixture *fx = *state;
    const double x[N] = {0.3, -0.8, 1.1, 0.05, -2.0};
    double y[N], y_b[N], x_b[N] = {0}, fd[N];
    memcpy(y_b, k_seed, sizeof y_b);
    fd_gradient(fx, count_map, x, N, fd);
    assert_int_equal(n_count_rev(x, x_b, y, y_b, N), n_count(x, y, N));
    assert_int_equal(n_count(x, y, N), 3);
    for (int i = 0; i < N; i++) {
        assert_near_(x_b[i], fd[i], 1e-8, "n_count", __FILE__, __LINE__);
        assert_true(y_b[i] == 0); /* the output's cotangent, consumed */
    }
}

/* No real output: the shadows receive nothing; f_rev_set writes the zero derivative. */
static void test_sign(void **state)
{
    (void)state;
    double a_b = 0.25, b_b = -4.0;
    assert_int_equal(n_sign_rev(0.5, &a_b, -2.0, &b_b), n_sign(0.5, -2.0));
    assert_int_equal(n_sign_rev(0.5, &a_b, 2.0, &b_b), 1);
    assert_true(a_b == 0.25 && b_b == -4.0);
    a_b = b_b = NAN;
    assert_int_equal(n_sign_rev_set(1.5, &a_b, 3.0, &b_b), 1);
    assert_true(a_b == 0 && b_b == 0);
}

/* A parameter that reaches a real result only through a comparison. */
static void test_partial(void **state)
{
    fixture *fx = *state;
    const double v[3] = {0.9, 0.4, -1.7};
    double fd[3], g[3] = {0}, s[3];
    fd_gradient(fx, partial_map, v, 3, fd);
    assert_close(n_partial_rev(v[0], &g[0], v[1], &g[1], v + 2, &g[2], 1.0),
                 n_partial(v[0], v[1], v + 2), 1e-15);
    for (int i = 0; i < 3; i++)
        s[i] = NAN;
    n_partial_rev_set(v[0], &s[0], v[1], &s[1], v + 2, &s[2], 1.0);
    for (int i = 0; i < 3; i++) {
        assert_near_(g[i], fd[i], 1e-8, "n_partial_rev", __FILE__, __LINE__);
        assert_near_(s[i], fd[i], 1e-8, "n_partial_rev_set", __FILE__, __LINE__);
    }
}

static cr_status const_map(const double *v, size_t n, double *out, size_t m, void *env)
{
    (void)m;
    (void)env;
    out[0] = n_const(v[0], v + 1, (int)n - 1);
    return CR_OK;
}

/* const double a, const double *const x, const int n, and helpers taking const scalars */
static void test_const(void **state)
{
    fixture *fx = *state;
    const double v[N + 1] = {0.8, 0.3, -0.6, 1.1, 0.2, -1.4};
    double fd[N + 1], g[N + 1] = {0};
    fd_gradient(fx, const_map, v, N + 1, fd);
    assert_close(n_const_rev(v[0], &g[0], v + 1, g + 1, N, 1.0), n_const(v[0], v + 1, N), 1e-15);
    for (int i = 0; i <= N; i++)
        assert_near_(g[i], fd[i], 1e-8 * (1 + fabs(fd[i])), "n_const", __FILE__, __LINE__);
}

/* y(x) of n_count, whose Jacobian the tangents of the output array are checked against */
static cr_status count_y_map(const double *x, size_t n, double *out, size_t m, void *env)
{
    (void)m;
    (void)env;
    n_count(x, out, (int)n);
    return CR_OK;
}

/* n_count_fwd and n_count_fwdv: y_d = (dy/dx) x_d, against central differences; the count. */
static void test_count_forward(void **state)
{
    fixture *fx = *state;
    enum { ND = 7 };
    const double x[N] = {0.3, -0.8, 1.1, 0.05, -2.0};
    double jac[N * N];
    cr_fdm method;
    assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
    assert_int_equal(
        cr_fd_jacobian(&method, NULL, count_y_map, NULL, x, N, N, fx->arena, jac, NULL), CR_OK);
    /* directions: the unit vectors, the seed and a second mix */
    double dirs[ND][N] = {{0}};
    for (int k = 0; k < N; k++)
        dirs[k][k] = 1;
    for (int i = 0; i < N; i++) {
        dirs[N][i] = k_seed[i];
        dirs[N + 1][i] = 0.5 - 0.25 * i;
    }
    double xd[N * ND], yd[N * ND], y[N], y1[N], y1d[N];
    for (int i = 0; i < N; i++)
        for (int k = 0; k < ND; k++)
            xd[i * ND + k] = dirs[k][i];
    assert_int_equal(n_count_fwdv(x, xd, y, yd, N, ND), 3);
    for (int k = 0; k < ND; k++) {
        assert_int_equal(n_count_fwd(x, dirs[k], y1, y1d, N), 3);
        for (int i = 0; i < N; i++) {
            double want = 0;
            for (int j = 0; j < N; j++)
                want += jac[i * N + j] * dirs[k][j];
            assert_near_(y1d[i], want, 1e-8 * (1 + fabs(want)), "n_count_fwd", __FILE__, __LINE__);
            assert_near_(yd[i * ND + k], want, 1e-8 * (1 + fabs(want)), "n_count_fwdv", __FILE__,
                         __LINE__);
            assert_true(y[i] == y1[i]);
        }
    }
}

/* No real output: the tangents are parameters nothing reads; the integer results. */
static void test_int_forward(void **state)
{
    (void)state;
    const double x[N] = {0.3, -0.8, 1.1, 0.05, -2.0};
    const double xd[2 * N] = {1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    const double ad[2] = {1, 0}, bd[2] = {0, 1};
    assert_int_equal(n_sign_fwd(0.5, 1, -2.0, 0), 0);
    assert_int_equal(n_sign_fwd(0.5, 0, 2.0, 1), 1);
    assert_int_equal(n_sign_fwdv(0.5, ad, -2.0, bd, 2), 0);
    assert_int_equal(n_sign_fwdv(-0.5, ad, -2.0, bd, 2), 1);
    /* 0.3 and 1.1 above 0.1; none above 2 */
    assert_int_equal(n_above(x, N, 0.1), 2);
    assert_int_equal(n_above_fwd(x, xd, N, 0.1, 1), 2);
    assert_int_equal(n_above_fwdv(x, xd, N, 0.1, ad, 2), 2);
    assert_int_equal(n_above_fwdv(x, xd, N, 2.0, ad, 2), 0);
}

static cr_status nest_map(const double *v, size_t n, double *out, size_t m, void *env)
{
    (void)m;
    (void)env;
    out[0] = n_nest(v[0], v + 1, (int)n - 1);
    return CR_OK;
}

typedef struct const_modes {
    const char *name;
    double (*f)(const double, const double *const, const int);
    double (*fwd)(const double, double, const double *const, const double *, const int, double *);
    double (*fwdv)(const double, const double *, const double *const, const double *, const int,
                   double *, int);
    double (*jac)(const double, const double *const, const int, double *);
    cr_status (*map)(const double *, size_t, double *, size_t, void *);
} const_modes;

/* The gradient of (a, x) by f_fwd (one direction per input), f_fwdv (every input at once)
 * and f_jacfwd, against central differences: helpers taking const scalars, called directly
 * (n_const) and from a helper's tangent kernel (n_nest). */
static void check_const_modes(fixture *fx, const const_modes *c)
{
    const double v[N + 1] = {0.8, 0.3, -0.6, 1.1, 0.2, -1.4};
    const double f = c->f(v[0], v + 1, N);
    double fd[N + 1];
    fd_gradient(fx, c->map, v, N + 1, fd);
    /* f_fwdv: direction k is input k; x_d[i * nd + k] */
    double ad[N + 1] = {1}, xd[N * (N + 1)] = {0}, gv[N + 1], gj[N + 1];
    for (int i = 0; i < N; i++)
        xd[i * (N + 1) + i + 1] = 1;
    assert_close(c->fwdv(v[0], ad, v + 1, xd, N, gv, N + 1), f, 1e-15);
    assert_close(c->jac(v[0], v + 1, N, gj), f, 1e-15);
    for (int k = 0; k <= N; k++) {
        double x1[N] = {0}, g = NAN;
        if (k)
            x1[k - 1] = 1;
        assert_close(c->fwd(v[0], k == 0, v + 1, x1, N, &g), f, 1e-15);
        const double tol = 1e-8 * (1 + fabs(fd[k]));
        assert_near_(g, fd[k], tol, c->name, __FILE__, __LINE__);
        assert_near_(gv[k], fd[k], tol, c->name, __FILE__, __LINE__);
        assert_near_(gj[k], fd[k], tol, c->name, __FILE__, __LINE__);
    }
}

static void test_const_forward(void **state)
{
    const const_modes modes[] = {
        {"n_const", n_const, n_const_fwd, n_const_fwdv, n_const_jacfwd, const_map},
        {"n_nest", n_nest, n_nest_fwd, n_nest_fwdv, n_nest_jacfwd, nest_map},
    };
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        check_const_modes(*state, &modes[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_count, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sign, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_partial, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_const, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_count_forward, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_int_forward, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_const_forward, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
