/*
 * Functions whose result is not differentiable (an integer), for test_ad_nondiff.c: their
 * reverse mode has no seed of the result, and a parameter's shadow that no real output
 * reaches stays in the signature, receiving nothing. Const-qualified scalar parameters (of
 * the function and of a static inline helper the adjoint restores), also through a helper
 * of a helper (n_nest, whose Jacobian entry calls n_norm2's tangent kernel, which calls
 * n_sq's). The derivative file is compiled with -Werror -Wall -Wextra (CMakeLists.txt):
 * the forward modes of a function returning an integer keep a tangent for each real
 * parameter, unread where no real output depends on it (n_sign, n_above).
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

/* the count of elements above t: no real output, the tangents of x and t unread */
int n_above(const double *x, int n, double t)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > t)
            c++;
    return c;
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

/* a helper calling a helper with a const scalar parameter */
static double n_norm2(const double *const x, const int n, const double c)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s = s + n_sq(x[i] * c);
    return s;
}

double n_nest(const double a, const double *const x, const int n)
{
    return a * n_norm2(x, n, a);
}
