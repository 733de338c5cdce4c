/*
 * Differentiating plain C: model/logreg.c is ordinary C (loops, a branch, a helper, <math.h>);
 * chainrules-ad writes its derivatives at build time (examples/CMakeLists.txt calls
 * chainrules_differentiate). Here the generated loss_rev drives gradient descent on a small
 * classification problem, after a check of the gradient against loss_fwd (forward mode)
 * and central differences.
 */
#include <math.h>
#include <stdio.h>

#include "model/logreg.h"

#define N 200
#define D 3

int main(void)
{
    static double X[N * D], y[N];
    const double truth[D + 1] = {1.5, -2.0, 0.5, 0.25};
    for (int i = 0; i < N; i++) {
        double z = truth[D];
        for (int j = 0; j < D; j++) {
            X[i * D + j] = sin(0.7 * i + 1.3 * j) + 0.3 * cos(2.1 * i * (j + 1));
            z += truth[j] * X[i * D + j];
        }
        y[i] = z + 0.3 * sin(5.0 * i) > 0 ? 1.0 : 0.0;
    }
    double w[D + 1] = {0}, g[D + 1] = {0};
    const double lambda = 1e-3;

    /* the gradient three ways at a first point */
    const double w0[D + 1] = {0.3, -0.2, 0.1, 0.05};
    loss_rev(w0, g, X, y, N, D, lambda, 1.0);
    double worst = 0.0;
    for (int j = 0; j <= D; j++) {
        double e[D + 1] = {0}, dj, wp[D + 1], wm[D + 1], h = 1e-6;
        e[j] = 1.0;
        loss_fwd(w0, e, X, y, N, D, lambda, &dj);
        for (int k = 0; k <= D; k++)
            wp[k] = wm[k] = w0[k];
        wp[j] += h;
        wm[j] -= h;
        double fd = (loss(wp, X, y, N, D, lambda) - loss(wm, X, y, N, D, lambda)) / (2 * h);
        worst = fmax(worst, fmax(fabs(g[j] - dj), fabs(g[j] - fd)));
    }
    printf("gradient: reverse, forward and central differences agree to %.1e\n", worst);
    if (!(worst < 1e-7))
        return 1;

    /* gradient descent */
    double f = 0.0;
    for (int it = 0; it <= 300; it++) {
        for (int j = 0; j <= D; j++)
            g[j] = 0.0; /* loss_rev adds into g */
        f = loss_rev(w, g, X, y, N, D, lambda, 1.0);
        if (it % 100 == 0)
            printf("iteration %3d: loss %.6f\n", it, f);
        for (int j = 0; j <= D; j++)
            w[j] -= 2.0 * g[j];
    }
    printf("weights %.3f %.3f %.3f, bias %.3f\n", w[0], w[1], w[2], w[3]);
    return f < 0.45 ? 0 : 1;
}
