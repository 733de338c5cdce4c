/*
 * Rosenbrock, sum over i of 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2, for the engine tests: the
 * taped function (a cr_ad_fn) and its gradient written by hand as the reference (the known
 * analytic gradient, not the code under test).
 */
#ifndef TEST_ROSEN_H
#define TEST_ROSEN_H

#include <chainrules.h>

static inline cr_status rosen_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
                                void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_sub(t, x[i + 1], cr_mul(t, x[i], x[i]));
        cr_var b = cr_sub(t, cr_const(1.0), x[i]);
        s = cr_add(t, s, cr_add(t, cr_mul(t, cr_const(100.0), cr_mul(t, a, a)), cr_mul(t, b, b)));
    }
    y[0] = s;
    return cr_tape_status(t);
}

/* The function in plain C (the finite-difference and value reference). */
static inline double rosen_value(const double *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1.0 - x[i];
        s += 100.0 * a * a + b * b;
    }
    return s;
}

static inline void rosen_grad(const double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++)
        g[i] = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i];
        g[i] += -400.0 * a * x[i] - 2.0 * (1.0 - x[i]);
        g[i + 1] += 200.0 * a;
    }
}

#endif
