/*
 * cr_av_pack on second-order tapes and in prepared gradients, where it is recorded as calls
 * of vect (a vector of up to 16 numbers) and a tree of cats: packs of 1 to 241 scalars, with
 * constants mixed in, read back by getindex and reduced by logsumexp; H·v against central
 * differences of the gradient of a first-order tape (where a pack is one operation with its
 * own steps, another path), gradients against finite differences of the plain-C objective.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

enum { MAXN = 241 };

/* v_i = sin(x_i) x_{i+1 mod n} (a constant 0.25 i at every seventh i); y = logsumexp(v) * v_0
 * + v_{n-1}^2. */
static double obj_c(const double *x, size_t n)
{
    double v[MAXN], m = -INFINITY, s = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = i % 7 == 3 ? 0.25 * (double)i : sin(x[i]) * x[(i + 1) % n];
        m = fmax(m, v[i]);
    }
    for (size_t i = 0; i < n; i++)
        s += exp(v[i] - m);
    return (m + log(s)) * v[0] + v[n - 1] * v[n - 1];
}

static cr_status obj_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var v[MAXN];
    for (size_t i = 0; i < n; i++)
        v[i] = i % 7 == 3 ? cr_const(0.25 * (double)i) : cr_mul(t, cr_sin(t, x[i]), x[(i + 1) % n]);
    cr_avar V = cr_av_pack(t, v, n, NULL, 0);
    cr_targ a = cr_targ_arr(V);
    cr_var L = cr_tape_acall_s(t, &cr_fn_logsumexp, &a, 1);
    cr_var last = cr_av_getindex(t, V, (int64_t)n - 1);
    y[0] = cr_add(t, cr_mul(t, L, cr_av_getindex(t, V, 0)), cr_mul(t, last, last));
    return cr_tape_status(t);
}

static void fill(double *x, size_t n, double s)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.7 * sin(1.9 * (double)i + s) + 0.1;
}

static void test_hvp_sizes(void **state)
{
    fixture *f = *state;
    const size_t ns[] = {1, 2, 16, 17, 40, 241};
    cr_tape_params p2 = {.flags = CR_TAPE_SECOND_ORDER};
    cr_tape *s, *u;
    assert_int_equal(cr_tape_new(f->ctx, &p2, &s), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        size_t n = ns[c];
        double x[MAXN], v[MAXN], hv[MAXN], g[MAXN], xp[MAXN], xm[MAXN], gp[MAXN], gm[MAXN], y,
            h = 1e-5;
        fill(x, n, (double)c);
        for (size_t i = 0; i < n; i++)
            v[i] = cos(0.61 * (double)i) - 0.2;
        cr_var xs[MAXN], yv;
        cr_tape_reset(s);
        assert_ok(s, cr_tape_inputs(s, x, n, xs));
        assert_ok(s, obj_t(s, xs, n, &yv, 1, NULL));
        assert_close(yv.v, obj_c(x, n), 1e-13);
        assert_ok(s, cr_tape_hvp(s, yv, xs, n, v, hv, g));
        for (size_t i = 0; i < n; i++) {
            xp[i] = x[i] + h * v[i];
            xm[i] = x[i] - h * v[i];
        }
        assert_ok(u, cr_tape_value_and_gradient(u, obj_t, NULL, xp, n, &y, gp));
        assert_ok(u, cr_tape_value_and_gradient(u, obj_t, NULL, xm, n, &y, gm));
        for (size_t i = 0; i < n; i++) {
            assert_close(hv[i], (gp[i] - gm[i]) / (2 * h), 1e-5);
            double xi = x[i], e = 1e-6;
            x[i] = xi + e;
            double fp = obj_c(x, n);
            x[i] = xi - e;
            double fm = obj_c(x, n);
            x[i] = xi;
            assert_close(g[i], (fp - fm) / (2 * e), 1e-6);
        }
    }
    cr_tape_free(u);
    cr_tape_free(s);
}

static void test_prepared(void **state)
{
    fixture *f = *state;
    const size_t ns[] = {3, 16, 241};
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        size_t n = ns[c];
        double x[MAXN], g[MAXN], y;
        fill(x, n, 0.5);
        cr_prepared *p;
        assert_int_equal(cr_prepare_gradient(f->ctx, NULL, obj_t, NULL, x, n, &p), CR_OK);
        for (int round = 0; round < 2; round++) {
            fill(x, n, 2.0 + round);
            assert_int_equal(cr_prepared_value_and_gradient(p, x, n, &y, g), CR_OK);
            assert_close(y, obj_c(x, n), 1e-13);
            for (size_t i = 0; i < n; i++) {
                double xi = x[i], e = 1e-6;
                x[i] = xi + e;
                double fp = obj_c(x, n);
                x[i] = xi - e;
                double fm = obj_c(x, n);
                x[i] = xi;
                assert_close(g[i], (fp - fm) / (2 * e), 1e-6);
            }
        }
        cr_prepared_free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hvp_sizes, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prepared, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
