/* Plain C functions and hand-written derivatives for the comparison programs
 * (compare_ref.h). Each is a copy of the corresponding code of bench/chainrules_bench.c. */
#define _POSIX_C_SOURCE 199309L
#include "compare_ref.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

void cmp_chain_inputs(double *x)
{
    for (long i = 0; i < CMP_CHAIN_N; i++)
        x[i] = 1e-3 * (1.0 + sin((double)i));
}

double cmp_chain_primal(const double *x, long steps)
{
    double t = 0.0;
    for (long k = 0; k < steps; k++)
        t = t + x[k % CMP_CHAIN_N] * exp(sin(t));
    return t;
}

int cmp_chain_grad(const double *x, long steps, double *g)
{
    double *ts = malloc((size_t)steps * sizeof *ts);
    if (ts == NULL)
        return -1;
    double t = 0.0, tbar = 1.0;
    for (long k = 0; k < steps; k++) {
        ts[k] = t;
        t = t + x[k % CMP_CHAIN_N] * exp(sin(t));
    }
    for (long i = 0; i < CMP_CHAIN_N; i++)
        g[i] = 0.0;
    for (long k = steps - 1; k >= 0; k--) {
        double e = exp(sin(ts[k]));
        g[k % CMP_CHAIN_N] += tbar * e;
        tbar *= 1.0 + x[k % CMP_CHAIN_N] * e * cos(ts[k]);
    }
    free(ts);
    return 0;
}

void cmp_rosen_inputs(double *x, double *v, long n)
{
    for (long i = 0; i < n; i++) {
        x[i] = 0.5 + 0.4 * sin(0.37 * (double)i);
        if (v != NULL)
            v[i] = cos(0.11 * (double)i);
    }
}

double cmp_rosen_primal(const double *x, long n)
{
    double s = 0.0;
    for (long i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1.0 - x[i];
        s += 100.0 * a * a + b * b;
    }
    return s;
}

void cmp_rosen_grad(const double *x, long n, double *g)
{
    for (long i = 0; i < n; i++)
        g[i] = 0.0;
    for (long i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i];
        g[i] += -400.0 * a * x[i] - 2.0 * (1.0 - x[i]);
        g[i + 1] += 200.0 * a;
    }
}

void cmp_rosen_hvp(const double *x, const double *v, long n, double *hv)
{
    for (long i = 0; i < n; i++)
        hv[i] = 0.0;
    for (long i = 0; i + 1 < n; i++) {
        double hii = 1200.0 * x[i] * x[i] - 400.0 * x[i + 1] + 2.0, hij = -400.0 * x[i];
        hv[i] += hii * v[i] + hij * v[i + 1];
        hv[i + 1] += hij * v[i] + 200.0 * v[i + 1];
    }
}

void cmp_small_inputs(double *x, double *target)
{
    for (long i = 0; i < CMP_SMALL_N; i++) {
        x[i] = 1.0 + 0.1 * (double)i;
        target[i] = sin((double)i);
    }
}

double cmp_mse_primal(const double *x, const double *target, long n)
{
    double s = 0.0;
    for (long i = 0; i < n; i++)
        s += (x[i] - target[i]) * (x[i] - target[i]);
    return s / (double)n;
}

void cmp_mse_grad(const double *x, const double *target, long n, double *g)
{
    for (long i = 0; i < n; i++)
        g[i] = 2.0 * (x[i] - target[i]) / (double)n;
}

long cmp_mismatch(const double *got, const double *want, long n, double rtol)
{
    for (long i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= rtol * fmax(1.0, fabs(want[i]))))
            return i;
    return -1;
}

double cmp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
