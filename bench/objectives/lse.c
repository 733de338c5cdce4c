/*
 * GradBench's lse eval (cpp/gradbench/evals/lse.hpp): log(sum_i exp(x_i)), computed as
 * log(sum_i exp(x_i - a)) + a with a = floor(max_i x_i), so that no term overflows (every
 * term is below e, the largest at least 1).
 *
 * The identity holds for every a, so a needs no derivative: floor's is zero, and the
 * generated gradient is that of the sum alone, exp(x_i - a) / s, storing one value per
 * term (the partial of `e`, the exponential itself): in lse_objective_rev_set
 * (--reverse-set), whose x_b[i] has this one contribution, in x_b[i] itself, so that no
 * value stack is used and the gradient needs no clearing. With a = max x (GradBench's form)
 * the derivative would also carry a's path, whose contributions cancel: three values
 * stored per term and an adjoint for a.
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
    double a = floor(x[imax]);
    double s = 0.0;
    for (long i = 0; i < n; i++) {
        double e = exp(x[i] - a);
        s += e;
    }
    return log(s) + a;
}
