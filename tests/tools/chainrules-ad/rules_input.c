/*
 * Functions of scalars that chainrules-ad writes as rules (--emit-rules): the library
 * then treats them as primitives (tests/tools/chainrules-ad/test_ad_rules.c).
 */
#include <math.h>

double r_softclip(double x, double y);
double r_blend(double a, double b, double t);

/* A smooth clipped product, with a loop and a branch inside. */
double r_softclip(double x, double y)
{
    double s = x * y;
    for (int i = 0; i < 3; i++)
        s = s > 1 ? 1 + log(s) : s * (1 + 0.1 * s);
    return s + tanh(y);
}

/* Three arguments. */
double r_blend(double a, double b, double t)
{
    double w = 1 / (1 + exp(-t));
    return w * sin(a) + (1 - w) * b * b;
}

/* A function of arrays, a double and an integer: its rule is a cr_rule_def over arrays.
 * The weighted log-sum-exp of x (n elements) with weights from the 2 x n matrix W. */
#pragma chainrules arrays(r_wlse) shape(x[n], W[2][n])
double r_wlse(const double *x, const double *W, double t, int n);
double r_wlse(const double *x, const double *W, double t, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += exp(t * x[i] * W[i] + W[n + i]);
    return log(s);
}
