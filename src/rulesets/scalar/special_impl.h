/*
 * Internal pieces shared by the two files of the special-function family
 * (special_gamma_erf.c, which registers the family, and special_bessel_integrals.c).
 */
#ifndef CR_SPECIAL_IMPL_H
#define CR_SPECIAL_IMPL_H

#include <math.h>

#include "rows_impl.h"

#define PI               3.14159265358979323846
#define SQRT_PI          1.77245385090551602730
#define TWO_OVER_SQRT_PI 1.12837916709551257390
#define EULER_GAMMA      0.57721566490153286061
/* <math.h> defines INFINITY and NAN as floats. */
#define INF   ((double)INFINITY)
#define NAN_D ((double)NAN)

/* exp(x²) without the error of rounding x² (which is |x²|·eps and grows to 1e-13 relative
 * at x = 26): x² = hi + lo exactly (fma), exp(hi)·exp(lo) with exp(lo) = 1 + lo. */
static inline double exp_sq(double x)
{
    double hi = x * x;
    double lo = fma(x, x, -hi);
    return exp(hi) * (1 + lo);
}

/* erfcx'(x) = 2x erfcx(x) - 2/sqrt(pi) given y = erfcx(x), without the cancellation of that
 * form for x >= 2. */
CR_INTERNAL double cr__sf_erfcx_deriv(double x, double y);

/* dP(a, x)/dx = x^(a-1) e^-x / Gamma(a), with its limits at x = 0. */
CR_INTERNAL double cr__sf_gamma_inc_dx(double a, double x);

/* Gamma(a, x) and log Gamma(a, x) for a <= 0, x >= 0 (+inf at x = 0; NaN for a > 0, x < 0
 * or a < -100000 with x <= 1, where the recurrence would take too long). */
CR_INTERNAL double cr__sf_gamma_upper_nonpos(double a, double x);
CR_INTERNAL double cr__sf_loggamma_upper_nonpos(double a, double x);

/* A real argument (f64, f32, integer, bool) as a double; CR_EINVAL naming `name` and the
 * argument's position j for other kinds. */
CR_INTERNAL cr_status cr__sf_arg_real(cr_arena *arena, const char *name, const cr_value *v,
                                      size_t j, double *x);

/* The function value cr_fn_NAME of a function of an order and an argument (primal PRIMAL, udata
 * UDATA). */
#define SF_ORDER_FUNCTION(NAME, PRIMAL, UDATA)                            \
    static const cr_function NAME##_function = {                          \
        .name = #NAME, .arity = 2, .primal = (PRIMAL), .udata = (UDATA)}; \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

/* A function of the family and its scalar rule row. */
typedef struct cr__sf_row {
    const cr_function *fn;
    const cr_scalar_rule *row;
} cr__sf_row;

/* cr_scalar_rule_register of the rows k[0..n), in order; the first failure is returned. */
CR_INTERNAL cr_status cr__sf_register_rows(cr_registry *reg, const cr__sf_row *k, size_t n);

/* Registers the rules of special_bessel_integrals.c. */
CR_INTERNAL cr_status cr__special_register_bessel_integrals(cr_registry *reg);

#endif
