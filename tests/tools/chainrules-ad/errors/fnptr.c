/* expect: fnptr.c:5:27: error: unsupported construct: a function used as a value */
#include <math.h>
double f(const double *x, int n)
{
    double (*g)(double) = sin;
    double s = g(x[0]);
    return s * n;
}
