/*
 * Functions of scalars that chainrules-ad writes as rules (--emit-rules): the library
 * then treats them as primitives (tests/ad/test_ad_rules.c).
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
