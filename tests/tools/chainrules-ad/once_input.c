/*
 * Programs whose gradient chainrules-ad writes with --reverse-set (f_rev_set: the shadows of
 * the inputs assigned, not added) as well as with --reverse; test_ad_once.c checks both
 * against central differences. Each input array's shadow has one contribution per element
 * it reads: the refused forms are in errors/once_*.c.
 */
#include <math.h>

#include "once_input.h"

/* GradBench's lse: the exponential's partial stored in the gradient's element */
double o_lse(const double *x, long n)
{
    long imax = 0;
    for (long i = 1; i < n; i++) {
        if (x[i] > x[imax])
            imax = i;
    }
    double a = floor(x[imax]);
    double s = 0.0;
    for (long i = 0; i < n; i++) {
        double e = exp(x[i] - a);
        s += e;
    }
    return log(s) + a;
}

/* arithmetic terms (recomputed, not stored), a scalar weight read by every term, and a
 * second array read once per element in the same loop */
double o_terms(const double *x, const double *y, double w, int n)
{
    double s = 0, q = 1;
    for (int i = 0; i < n; i++) {
        double d = x[i] * w - 0.25 * i;
        s = s + d * d;
        q = q * (1 + 0.1 * sin(y[i]));
    }
    return s * q + w;
}

/* one element read outside every loop, and a loop counted downwards by 2 */
double o_straight(const double *x, const double *z, int n)
{
    double t = sqrt(1 + exp(x[2]));
    for (int i = n - 1; i >= 0; i -= 2)
        t = t * cos(z[i]) + 0.5;
    return t;
}

/* an output beside an assign-once input: the output's shadow keeps f_rev's meaning */
void o_output(const double *x, double *out, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s = s + tanh(x[i]) * (i + 1);
    out[0] = s * s;
    out[1] = 3 * s;
}
