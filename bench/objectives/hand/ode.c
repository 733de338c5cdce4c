/*
 * Hand-written reverse mode of ode_primal(): x_b += J^T yf_b, J = d yf / d x.
 *
 * The forward pass keeps y at the start of every step (n s values). Each step is then
 * reversed from its stored y: a sweep over i recomputes the stages k1, k2, k3 of every
 * component, and a sweep over i downwards applies the adjoint of
 *   k1_i = x_i y_{i-1},  k2_i = x_i (y_{i-1} + h k1_{i-1} / 2),
 *   k3_i = x_i (y_{i-1} + h k2_{i-1} / 2),  k4_i = x_i (y_{i-1} + h k3_{i-1}),
 *   y_i += h (k1_i + 2 k2_i + 2 k3_i + k4_i) / 6   (all stages of component 0 are x_0),
 * carrying the stage adjoints of component i - 1 that component i's stages produce.
 */
#include <math.h>
#include <stdlib.h>

#include "objectives.h"

void ode_primal_grad(int n, const double *x, double *x_b, int s, double *yf, double *yf_b)
{
    double *ys = malloc(((size_t)n * (size_t)s + 3 * (size_t)n) * sizeof *ys);
    if (ys == NULL) {
        for (int i = 0; i < n; i++)
            yf[i] = (double)NAN;
        return;
    }
    double *k1 = ys + (size_t)n * (size_t)s, *k2 = k1 + n, *k3 = k2 + n;
    double h = 2.0 / (double)s;

    for (int i = 0; i < n; i++)
        yf[i] = 0.0;
    for (int step = 0; step < s; step++) {
        double *y0 = ys + (size_t)step * (size_t)n;
        for (int i = 0; i < n; i++)
            y0[i] = yf[i];
        yf[0] = yf[0] + h * (x[0] + 2.0 * x[0] + 2.0 * x[0] + x[0]) / 6.0;
        double k1p = x[0], k2p = x[0], k3p = x[0];
        for (int i = 1; i < n; i++) {
            double yp = y0[i - 1];
            double a1 = x[i] * yp;
            double a2 = x[i] * (yp + h * k1p / 2.0);
            double a3 = x[i] * (yp + h * k2p / 2.0);
            double a4 = x[i] * (yp + h * k3p);
            yf[i] = y0[i] + h * (a1 + 2.0 * a2 + 2.0 * a3 + a4) / 6.0;
            k1p = a1;
            k2p = a2;
            k3p = a3;
        }
    }

    /* yf_b is the adjoint of y at the end of the step being reversed. */
    double *yb = yf_b;
    for (int step = s - 1; step >= 0; step--) {
        const double *y0 = ys + (size_t)step * (size_t)n;
        k1[0] = k2[0] = k3[0] = x[0];
        for (int i = 1; i < n; i++) {
            double yp = y0[i - 1];
            k1[i] = x[i] * yp;
            k2[i] = x[i] * (yp + h * k1[i - 1] / 2.0);
            k3[i] = x[i] * (yp + h * k2[i - 1] / 2.0);
        }
        double c1 = 0.0, c2 = 0.0, c3 = 0.0, pend = 0.0;
        for (int i = n - 1; i >= 0; i--) {
            double a = yb[i] * h / 6.0;
            yb[i] += pend; /* y_i at the step's start: itself, and through component i + 1 */
            double b1 = a + c1, b2 = 2.0 * a + c2, b3 = 2.0 * a + c3, b4 = a;
            if (i == 0) {
                x_b[0] += b1 + b2 + b3 + b4;
                break;
            }
            double yp = y0[i - 1], xi = x[i];
            x_b[i] += b1 * yp + b2 * (yp + h * k1[i - 1] / 2.0) + b3 * (yp + h * k2[i - 1] / 2.0) +
                      b4 * (yp + h * k3[i - 1]);
            pend = (b1 + b2 + b3 + b4) * xi;
            c1 = b2 * xi * h / 2.0;
            c2 = b3 * xi * h / 2.0;
            c3 = b4 * xi * h;
        }
    }
    /* y(0) = 0 is a constant: its adjoint is consumed. */
    for (int i = 0; i < n; i++)
        yf_b[i] = 0.0;
    free(ys);
}
