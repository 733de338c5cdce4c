/*
 * A called function's local array: the reverse sweep of the callee starts from a fresh
 * (zeroed) copy of its locals, so partials that read a local array element are taken at 0.
 * Here g's adjoint needs w[0] = sin(x0) for the partial of cos(w[0]); it read 0, and the
 * gradient came out 0.
 *
 * f = cos(g), g = cos(sin(x0)):
 * d f / d x0 = -sin(g) * -sin(sin(x0)) * cos(x0); f_rev gave 0. (A scalar local is carried
 * over; f_rev of g itself is right: only g called from another function is wrong.) Found as
 * random program seed 1003, f39, calling f0 (tests/st/gen_random_c of commit e4d15f8).
 */
#include <math.h>

// st: f ns=0 m=0 ret=1

double g(const double *x, int n)
{
    (void)n;
    double w[2];
    w[0] = sin(x[0]);
    w[1] = cos(w[0]);
    return w[1];
}

double f(const double *x, int n)
{
    return cos(g(x, n));
}
