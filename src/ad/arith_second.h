/*
 * Second derivatives of the arithmetic rows (+, -, *, /, unary minus) by the complex step,
 * expanded inline from their one definition (CR__ARITH_ROWS of <chainrules/arith_rows.h>)
 * over complex numbers. Taken by second-order tapes when they record an arithmetic
 * operation (tape.c op_second) and by prepared Hessian-vector products (prepared_hvp.c).
 * The rows are rational: the complex step is exact wherever they are defined, with no branch
 * cut, so it needs none of cr__row_hessian's check against the partials.
 */
#ifndef CR_AD_ARITH_SECOND_H
#define CR_AD_ARITH_SECOND_H

#include <chainrules/arith_rows.h>

#include "tape_impl.h"

/* cr__hcol_NAME(xr, l, w, hd): column l of the row's Hessian at xr times w, added to hd:
 * hd[j] += ∂D_j/∂x_l w for each argument j. ∂D_j/∂x_l is the imaginary part of partial j of
 * the row's body evaluated at x + i h e_l over complex numbers (as the row's c128
 * instantiation, CR_SCALAR_EVALS, evaluates it) over h. A linear row's partials are
 * constants, whose imaginary parts the compiler folds to zero, and the terms with them. */
#define CR__HCOL(NAME, NIN, NOUT, PRIMAL, ...)                                           \
    static inline void cr__hcol_##NAME(const double *xr, size_t l, double w, double *hd) \
    {                                                                                    \
        cr_complex x_[2], Y[1], D[2];                                                    \
        double h = cr__cstep(xr[l]);                                                     \
        x_[0] = cr__c(xr[0], l == 0 ? h : 0.0);                                          \
        x_[1] = cr__c((NIN) > 1 ? xr[1] : 0.0, l == 1 ? h : 0.0);                        \
        {                                                                                \
            const cr_complex *x = x_;                                                    \
            PRIMAL;                                                                      \
            __VA_ARGS__;                                                                 \
        }                                                                                \
        (void)Y;                                                                         \
        double im0 = cimag(D[0]), im1 = (NIN) > 1 ? cimag(D[(NIN) > 1 ? 1 : 0]) : 0.0;   \
        if (im0 != 0.0)                                                                  \
            hd[0] += im0 / h * w;                                                        \
        if (im1 != 0.0)                                                                  \
            hd[1] += im1 / h * w;                                                        \
    }
CR__ARITH_ROWS(CR__HCOL)
#undef CR__HCOL

/* The type of cr__hcol_add and the others. */
typedef void (*cr__hcol_fn)(const double *xr, size_t l, double w, double *hd);

#endif /* CR_AD_ARITH_SECOND_H */
