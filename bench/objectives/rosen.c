/* Rosenbrock's function as a scalar loop (the rosen_loop workload of chainrules-bench). */
#include "objectives.h"

double rosen(const double *x, long n)
{
    double s = 0.0;
    for (long i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i];
        double b = 1.0 - x[i];
        s += 100.0 * a * a + b * b;
    }
    return s;
}
