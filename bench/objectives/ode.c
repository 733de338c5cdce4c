/*
 * GradBench's ode eval (cpp/gradbench/evals/ode.hpp, after cmpad's runge_kutta): s steps
 * of classical RK4 on [0, 2] for y_0' = x_0, y_i' = x_i y_{i-1}, y(0) = 0.
 *
 * GradBench computes each stage as a vector (k1, y + h k1 / 2, k2, ...). Stage j of y_i
 * depends only on stage j - 1 of y_{i-1}, so one sweep over i with the previous
 * component's stages in scalars computes the same values with the same operations, and
 * needs no working vectors.
 */
#include "objectives.h"

void ode_primal(int n, const double *x, int s, double *yf)
{
    double h = 2.0 / (double)s;
    for (int i = 0; i < n; i++)
        yf[i] = 0.0;
    for (int step = 0; step < s; step++) {
        /* Component 0: every stage is x[0]. */
        double yprev = yf[0];
        double k1p = x[0];
        double k2p = x[0];
        double k3p = x[0];
        yf[0] = yf[0] + h * (x[0] + 2.0 * x[0] + 2.0 * x[0] + x[0]) / 6.0;
        for (int i = 1; i < n; i++) {
            double yold = yf[i];
            double k1 = x[i] * yprev;
            double k2 = x[i] * (yprev + h * k1p / 2.0);
            double k3 = x[i] * (yprev + h * k2p / 2.0);
            double k4 = x[i] * (yprev + h * k3p);
            yf[i] = yold + h * (k1 + 2.0 * k2 + 2.0 * k3 + k4) / 6.0;
            yprev = yold;
            k1p = k1;
            k2p = k2;
            k3p = k3;
        }
    }
}
