/*
 * GradBench's lse eval (cpp/gradbench/evals/lse.hpp): log(sum_i exp(x_i)), computed as
 * log(sum_i exp(x_i - A)) + A with A = max_i x_i, so that no term overflows.
 */
#include <math.h>

#include "objectives.h"

double lse_objective(const double *x, long n)
{
    /* the index of the maximum, an integer: the search is not differentiated */
    long imax = 0;
    for (long i = 1; i < n; i++) {
        if (x[i] > x[imax])
            imax = i;
    }
    double a = x[imax];
    double s = 0.0;
    for (long i = 0; i < n; i++)
        s += exp(x[i] - a);
    return log(s) + a;
}
