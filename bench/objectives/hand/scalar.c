/* Hand-written reverse-mode gradients of rosen(), chain() and mse(). */
#include <math.h>
#include <stdlib.h>

#include "objectives.h"

double rosen_grad(const double *x, double *x_b, long n, double rosen_b)
{
    double s = 0.0;
    for (long i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i];
        double b = 1.0 - x[i];
        s += 100.0 * a * a + b * b;
        double ga = 200.0 * rosen_b * a;
        x_b[i] += -2.0 * x[i] * ga - 2.0 * rosen_b * b;
        x_b[i + 1] += ga;
    }
    return s;
}

/* Forward: keep every t_s (the adjoint needs sin and exp at each of them). Backward:
 * t_{s+1} = t_s + x_j e_s with e_s = exp(sin(t_s)) gives x_j_b += t_b e_s and
 * t_b *= 1 + x_j e_s cos(t_s). */
double chain_grad(const double *x, double *x_b, int n, long steps, double chain_b)
{
    double *ts = malloc((size_t)(steps > 0 ? steps : 1) * sizeof *ts);
    if (ts == NULL)
        return (double)NAN;
    double t = 0.0;
    for (long k = 0; k < steps; k++) {
        ts[k] = t;
        t = t + x[k % n] * exp(sin(t));
    }
    double tb = chain_b;
    long j = steps > 0 ? (steps - 1) % n : 0;
    for (long k = steps - 1; k >= 0; k--) {
        double sn = sin(ts[k]);
        double e = exp(sn);
        x_b[j] += tb * e;
        tb += tb * x[j] * e * cos(ts[k]);
        j = j == 0 ? n - 1 : j - 1;
    }
    free(ts);
    return t;
}

double mse_grad(const double *x, double *x_b, const double *y, int n, double mse_b)
{
    double s = 0.0, g = 2.0 * mse_b / (double)n;
    for (int i = 0; i < n; i++) {
        double d = x[i] - y[i];
        s += d * d;
        x_b[i] += g * d;
    }
    return s / (double)n;
}
