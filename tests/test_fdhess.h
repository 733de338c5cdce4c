/*
 * A reference for Hessians in the tests: one entry by central second differences of a
 * plain-C function.
 */
#ifndef TEST_FDHESS_H
#define TEST_FDHESS_H

#include <stddef.h>

/* H_jl of f at x (n <= 16 inputs) by central second differences with h = 1e-4: error about
 * h^2 f'''' + eps f / h^2, near 1e-8. */
static inline double fd_hessian_entry(double (*f)(const double *), const double *x, size_t n,
                                      size_t j, size_t l)
{
    double xp[16];
    const double h = 1e-4;
    double s = 0;
    for (int a = -1; a <= 1; a += 2)
        for (int b = -1; b <= 1; b += 2) {
            for (size_t i = 0; i < n; i++)
                xp[i] = x[i];
            xp[j] += a * h;
            xp[l] += b * h;
            s += a * b * f(xp);
        }
    return s / (4 * h * h);
}

#endif /* TEST_FDHESS_H */
