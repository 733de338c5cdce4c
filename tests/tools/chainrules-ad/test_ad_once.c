/*
 * f_rev_set (chainrules-ad --reverse-set): the gradient assigned into the shadows of the
 * inputs, whatever they held, for the programs of once_input.c. Checked against central
 * differences (cr_fd_jacobian, five points) and against f_rev, the accumulating form, run
 * from zeroed shadows; the shadows are filled with NaN first, so that an element that is
 * read instead of written, or added to, shows.
 */
#include <math.h>
#include <string.h>

#include "once_input.h"
#include "test_util.h"

enum { N = 7, NBIG = 300 };

typedef double (*scalar_map)(const double *z, int n, void *env);

typedef struct fd_env {
    scalar_map f;
    int n;
    void *env;
} fd_env;

static cr_status call_map(const double *z, size_t nz, double *y, size_t m, void *env)
{
    (void)nz;
    (void)m;
    const fd_env *e = env;
    y[0] = e->f(z, e->n, e->env);
    return CR_OK;
}

/* g = the gradient of f at z (nz values) by central differences */
static void fd_gradient(fixture *fx, scalar_map f, int n, void *env, const double *z, size_t nz,
                        double *g)
{
    cr_fdm method;
    assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
    fd_env e = {f, n, env};
    assert_int_equal(cr_fd_jacobian(&method, NULL, call_map, &e, z, nz, 1, fx->arena, g, NULL),
                     CR_OK);
}

static void fill_nan(double *a, int n)
{
    for (int i = 0; i < n; i++)
        a[i] = NAN;
}

/* ---- lse: the partial kept in the gradient's element ----------------------------------- */

static double lse_map(const double *z, int n, void *env)
{
    (void)env;
    return o_lse(z, n);
}

static void check_lse(fixture *fx, int n)
{
    double x[NBIG], g[NBIG], g0[NBIG] = {0}, fd[NBIG];
    for (int i = 0; i < n; i++)
        x[i] = 3.0 * sin(1.7 * i + 0.3) + 0.01 * i;
    fd_gradient(fx, lse_map, n, NULL, x, (size_t)n, fd);
    fill_nan(g, n);
    double y = o_lse_rev_set(x, g, n, 1.0);
    assert_close(y, o_lse(x, n), 1e-14);
    double y0 = o_lse_rev(x, g0, n, 1.0);
    assert_close(y0, y, 1e-15);
    for (int i = 0; i < n; i++) {
        assert_near_(g[i], fd[i], 1e-8, "o_lse_rev_set", __FILE__, __LINE__);
        assert_close(g[i], g0[i], 1e-14);
    }
    /* called again with another seed: the shadow is overwritten, not added to */
    o_lse_rev_set(x, g, n, 0.5);
    for (int i = 0; i < n; i++)
        assert_close(g[i], 0.5 * g0[i], 1e-14);
}

static void test_lse(void **state)
{
    check_lse(*state, N);
    check_lse(*state, 1);
    check_lse(*state, NBIG);
}

/* ---- terms: arithmetic terms, a scalar input, two arrays --------------------------------- */

/* z = (x[0..n), y[0..n), w) */
static double terms_map(const double *z, int n, void *env)
{
    (void)env;
    return o_terms(z, z + n, z[2 * n], n);
}

static void test_terms(void **state)
{
    double z[2 * N + 1], fd[2 * N + 1];
    for (int i = 0; i < 2 * N + 1; i++)
        z[i] = 0.4 + 0.3 * cos(2.1 * i);
    fd_gradient(*state, terms_map, N, NULL, z, 2 * N + 1, fd);
    double xb[N], yb[N], wb = NAN;
    fill_nan(xb, N);
    fill_nan(yb, N);
    double y = o_terms_rev_set(z, xb, z + N, yb, z[2 * N], &wb, N, 1.0);
    assert_close(y, o_terms(z, z + N, z[2 * N], N), 1e-14);
    double xb0[N] = {0}, yb0[N] = {0}, wb0 = 0;
    o_terms_rev(z, xb0, z + N, yb0, z[2 * N], &wb0, N, 1.0);
    for (int i = 0; i < N; i++) {
        assert_near_(xb[i], fd[i], 1e-8, "o_terms_rev_set x", __FILE__, __LINE__);
        assert_near_(yb[i], fd[N + i], 1e-8, "o_terms_rev_set y", __FILE__, __LINE__);
        assert_close(xb[i], xb0[i], 1e-14);
        assert_close(yb[i], yb0[i], 1e-14);
    }
    /* the scalar input's shadow: cleared on entry, then the contributions added */
    assert_near_(wb, fd[2 * N], 1e-8, "o_terms_rev_set w", __FILE__, __LINE__);
    assert_close(wb, wb0, 1e-14);
}

/* ---- straight: one element outside loops, a loop by -2 ----------------------------------- */

static double straight_map(const double *z, int n, void *env)
{
    (void)env;
    return o_straight(z, z + n, n);
}

static void test_straight(void **state)
{
    double z[2 * N], fd[2 * N];
    for (int i = 0; i < 2 * N; i++)
        z[i] = 0.2 + 0.5 * sin(1.3 * i);
    fd_gradient(*state, straight_map, N, NULL, z, 2 * N, fd);
    /* elements the function never reads (x[k], k != 2, and z[n-2], z[n-4], ...) are not
     * written: they keep what they held */
    double xb[N], zb[N];
    for (int i = 0; i < N; i++)
        xb[i] = zb[i] = 42.0;
    o_straight_rev_set(z, xb, z + N, zb, N, 1.0);
    for (int i = 0; i < N; i++) {
        if (i == 2)
            assert_near_(xb[i], fd[i], 1e-8, "o_straight_rev_set x", __FILE__, __LINE__);
        else
            assert_true(xb[i] == 42.0 && fabs(fd[i]) < 1e-10);
        if ((N - 1 - i) % 2 == 0)
            assert_near_(zb[i], fd[N + i], 1e-8, "o_straight_rev_set z", __FILE__, __LINE__);
        else
            assert_true(zb[i] == 42.0 && fabs(fd[N + i]) < 1e-10);
    }
}

/* ---- an output beside an assign-once input ------------------------------------------------ */

static double output_map(const double *z, int n, void *env)
{
    const double *w = env; /* the cotangent of out */
    double out[2];
    o_output(z, out, n);
    return w[0] * out[0] + w[1] * out[1];
}

static void test_output(void **state)
{
    double x[N], fd[N];
    const double w[2] = {0.7, -1.3};
    for (int i = 0; i < N; i++)
        x[i] = 0.1 * i - 0.25;
    fd_gradient(*state, output_map, N, (void *)w, x, N, fd);
    double xb[N], out[2], outb[2] = {w[0], w[1]};
    fill_nan(xb, N);
    o_output_rev_set(x, xb, out, outb, N);
    double ref[2];
    o_output(x, ref, N);
    assert_close(out[0], ref[0], 1e-14);
    assert_close(out[1], ref[1], 1e-14);
    for (int i = 0; i < N; i++)
        assert_near_(xb[i], fd[i], 1e-8, "o_output_rev_set", __FILE__, __LINE__);
    /* the output's shadow as in f_rev: its cotangent consumed, zero on return */
    assert_true(outb[0] == 0.0 && outb[1] == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lse, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_terms, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_straight, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_output, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
