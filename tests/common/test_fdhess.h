/*
 * References for Hessians in the tests: one entry by central second differences of a
 * plain-C function, and the check of a second-order tape's Hessian and H v against them.
 */
#ifndef TEST_FDHESS_H
#define TEST_FDHESS_H

#include <math.h>
#include <stddef.h>

#include "test_util.h"

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

/* Record ft at x (n <= 16 inputs) on the second-order tape t: its value against fc to ytol,
 * its Hessian against fd_hessian_entry of fc to rtol (relative to max(1, |H_jl|)) and
 * symmetric to rounding, and cr_tape_hvp against the Hessian times a vector. */
static inline void check_tape_hessian(cr_tape *t, cr_ad_fn ft, double (*fc)(const double *),
                                      const double *x, size_t n, double ytol, double rtol)
{
    cr_var xs[16], y;
    double H[256], v[16], hv[16];
    assert_int_equal(cr_tape_record(t, ft, NULL, x, n, xs, &y, 1), CR_OK);
    assert_close(y.v, fc(x), ytol);
    assert_int_equal(cr_tape_hessian(t, y, xs, n, H), CR_OK);
    for (size_t j = 0; j < n; j++)
        for (size_t l = 0; l < n; l++) {
            double want = fd_hessian_entry(fc, x, n, j, l);
            if (!(fabs(H[j * n + l] - want) <= rtol * fmax(1.0, fabs(want)))) {
                print_error("H[%zu][%zu] = %.17g, differences give %.17g\n", j, l, H[j * n + l],
                            want);
                fail();
            }
        }
    for (size_t j = 0; j < n; j++)
        for (size_t l = 0; l < j; l++)
            assert_close(H[j * n + l], H[l * n + j], 1e-12);
    for (size_t j = 0; j < n; j++)
        v[j] = 1.0 - 0.3 * (double)j;
    assert_int_equal(cr_tape_hvp(t, y, xs, n, v, hv, NULL), CR_OK);
    for (size_t j = 0; j < n; j++) {
        double want = 0;
        for (size_t l = 0; l < n; l++)
            want += H[j * n + l] * v[l];
        assert_close(hv[j], want, 1e-12);
    }
}

#endif /* TEST_FDHESS_H */
