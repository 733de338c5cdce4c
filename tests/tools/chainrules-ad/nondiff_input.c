/*
 * Functions whose result is not differentiable (an integer), for test_ad_nondiff.c: their
 * reverse mode has no seed of the result, and a parameter's shadow that no real output
 * reaches stays in the signature, receiving nothing. Const-qualified scalar parameters (of
 * the function and of a static inline helper the adjoint restores). The derivative file is
 * compiled with -Werror -Wunused-parameter (CMakeLists.txt).
 */
#include <math.h>

#include "nondiff_input.h"

/* y[i] = x[i] sin x[i] written through an output; the count of positive elements returned */
int n_count(const double *x, double *y, int n)
{
    int c = 0;
    for (int i = 0; i < n; i++) {
        y[i] = x[i] * sin(x[i]);
        if (x[i] > 0)
            c++;
    }
    return c;
}

/* no real output at all: the shadows of a and b receive nothing */
int n_sign(double a, double b)
{
    return a * b > 0;
}

/* b reaches the result only through a comparison: its derivative is zero */
double n_partial(double a, double b, const double *z)
{
    return 2 * a * z[0] + (b > 0);
}

/* const scalars: the shadows are `double *`, the helpers' adjoints restore their copies */
static inline double n_sq(const double v)
{
    return v * v;
}

static double n_damp(const double *const x, const int i, const double c)
{
    double r = x[i] * c;
    for (int k = 0; k < 2; k++)
        r = r * 0.5 + sin(r);
    return r;
}

double n_const(const double a, const double *const x, const int n)
{
    double s = a;
    for (int i = 0; i < n; i++) {
        const double t = x[i] * a;
        s = s * 0.9 + n_sq(t) + n_damp(x, i, a);
    }
    return s;
}
