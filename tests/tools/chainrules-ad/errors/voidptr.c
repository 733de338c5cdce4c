/* expect: voidptr.c:8:5: error: call to .memcpy. with active arguments has no rule and no body */
#include <string.h>

double f(const double *x, int n)
{
    double y[4];
    (void)n;
    memcpy(y, x, sizeof y);
    return y[0] * y[1];
}
