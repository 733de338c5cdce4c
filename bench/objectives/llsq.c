/*
 * GradBench's llsq eval (cpp/gradbench/evals/llsq.hpp): the linear least-squares fit of
 * the sign function by a polynomial of m coefficients x at n points t_i in [-1, 1],
 *
 *   (1/2) sum_i (sign(t_i) - sum_j x_j t_i^j)^2,   t_i = -1 + 2 i / (n - 1).
 */
#include "objectives.h"

double llsq_objective(const double *x, long m, long n)
{
    double sum = 0.0;
    for (long i = 0; i < n; i++) {
        double ti = -1.0 + (double)i * 2.0 / ((double)n - 1.0);
        double inner = 0.0;
        if (ti > 0.0)
            inner = 1.0;
        else if (ti < 0.0)
            inner = -1.0;
        double mul = 1.0;
        for (long j = 0; j < m; j++) {
            inner -= x[j] * mul;
            mul *= ti;
        }
        sum += inner * inner;
    }
    return sum / 2.0;
}
