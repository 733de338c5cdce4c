/* A plain-C model that the install check differentiates with the installed chainrules-ad. */
#include <math.h>

double energy(const double *x, int n)
{
    double e = 0.0;
    for (int i = 0; i + 1 < n; i++)
        e += sin(x[i]) * x[i + 1] + 0.5 * x[i] * x[i];
    return e;
}
