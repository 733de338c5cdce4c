/* Mean squared error, the mse workload of chainrules-bench. */
#include "objectives.h"

double mse(const double *x, const double *y, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        double d = x[i] - y[i];
        s += d * d;
    }
    return s / (double)n;
}
