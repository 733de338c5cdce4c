/*
 * An active variable overwritten by the result of a call whose arguments are all constants:
 * v0 = sin(x0); v0 = h(0.5); the second assignment makes v0 inactive, so its adjoint must be
 * zeroed there. f_rev did not: the adjoint of v0 flowed on into sin(x0), adding
 * -0.5 sin(a - 0.5 v0) cos(x0) to the partial in x0 (a constant assigned instead of the call
 * is handled). Found as random program seed 5008 (generator of commit 720e207, with
 * --no-inout-helpers --no-fcalls), f7, with a recursive helper; any helper shows it.
 *
 * f = cos(a - 0.5 h(0.5)) + x0: d f / d x0 = 1, d f / d a = -sin(a - 0.125).
 */
#include <math.h>

// st: f ns=1 m=0 ret=1

static double h(double u)
{
    return u * u;
}

double f(const double *x, int n, double a)
{
    (void)n;
    double v0 = sin(x[0]);
    v0 = h(0.5);
    return cos(a - 0.5 * v0) + x[0];
}
