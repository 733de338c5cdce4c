/*
 * A call whose scalar argument is read from an array the callee writes: h(x, n, y[1], y, 2)
 * with h doing w[1] *= sin(u). The adjoint of the call needs u at its value on entry (the old
 * y[1]); the reverse sweep passed y[1] as it is after the call, so sin and cos were taken at
 * the new value.
 *
 * f = y1 sin(y1) with y1 = a + x1: d f / d a = d f / d x1 = sin(y1) + y1 cos(y1). Found as
 * random program seed 3, f0 of the CTest run (tests/st/gen_random_c of commit f9c27f8), with
 * main at bc56bf6, after the fix of callee_overwrites_value_caller_needs.c.
 */
#include <math.h>

// st: f ns=1 m=2 ret=1

static void h(const double *x, int n, double u, double *w, int m)
{
    (void)x;
    (void)n;
    w[m - 1] *= sin(u);
}

double f(const double *x, int n, double a, double *y)
{
    y[0] = x[0];
    y[1] = a + x[1 % n];
    h(x, n, y[1], y, 2);
    return y[1];
}
