/* The chain workload of chainrules-bench: t = t + x[k % n] * exp(sin(t)). */
#include <math.h>

#include "objectives.h"

double chain(const double *x, int n, long steps)
{
    double t = 0.0;
    for (long k = 0; k < steps; k++)
        t = t + x[k % n] * exp(sin(t));
    return t;
}
