/*
 * A model in plain C: the mean logistic loss of a linear classifier with an L2 penalty.
 * examples/06_plain_c.c uses the derivatives chainrules-ad writes for it at build time
 * (examples/CMakeLists.txt: chainrules_differentiate):
 *
 *   double loss_rev(const double *w, double *w_b, const double *X, const double *y,
 *                   int n, int d, double lambda, double loss_b);
 *   double loss_fwd(const double *w, const double *w_d, const double *X, const double *y,
 *                   int n, int d, double lambda, double *loss_d);
 */
#include <math.h>

#include "logreg.h"

/* log(1 + exp(z)) without overflow. */
static double softplus(double z)
{
    return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
}

double loss(const double *w, const double *X, const double *y, int n, int d, double lambda)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        double z = w[d]; /* the bias */
        for (int j = 0; j < d; j++)
            z += X[i * d + j] * w[j];
        /* -log sigmoid(z) for y = 1, -log(1 - sigmoid(z)) for y = 0 */
        total += y[i] > 0.5 ? softplus(-z) : softplus(z);
    }
    double penalty = 0.0;
    for (int j = 0; j < d; j++)
        penalty += w[j] * w[j];
    return total / n + 0.5 * lambda * penalty;
}
