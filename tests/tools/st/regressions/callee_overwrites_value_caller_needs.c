/*
 * A helper overwrites an array element (w[1] += x[0]) whose old value the caller's adjoint
 * still needs: the caller read y[1] before the call (t[0] = sin(y[1])), so the partial of sin
 * must be taken at the old y[1]. The reverse sweep of the helper has to restore w[1] (or the
 * forward sweep has to save it).
 *
 * y[1] = x0 + sin(x0): d y[1] / d x0 = 1 + cos(x0). Found as random program seed 3, f2
 * (an early version of tests/st/gen_random_c). f_rev gave 1 + cos(x0 + sin(x0)): the helper's
 * forward sweep wrote w[1] without saving it, and the caller evaluated cos at the new value.
 */
#include <math.h>

// st: f ns=0 m=2 ret=0

static void h(const double *x, double *w)
{
    w[1] += x[0];
}

void f(const double *x, int n, double *y)
{
    (void)n;
    y[0] = 0.0;
    y[1] = x[0];
    double t[1];
    t[0] = sin(y[1]);
    h(t, y);
}
