/*
 * Internal pieces shared by the two files of the special-function family
 * (special_gamma_erf.c, which registers the family, and special_bessel_integrals.c).
 */
#ifndef CR_SPECIAL_IMPL_H
#define CR_SPECIAL_IMPL_H

#include "../../rules/rules_impl.h"

/* erfcx'(x) = 2x erfcx(x) - 2/sqrt(pi) given y = erfcx(x), without the cancellation of that
 * form for x >= 2. */
CR_INTERNAL double cr__sf_erfcx_deriv(double x, double y);

/* dP(a, x)/dx = x^(a-1) e^-x / Gamma(a), with its limits at x = 0. */
CR_INTERNAL double cr__sf_gamma_inc_dx(double a, double x);

/* Whether a value's kind is an integer (i64, i32) or a bool. */
CR_INTERNAL bool cr__sf_is_int_kind(cr_kind k);

/* A real argument (f64, f32, integer, bool) as a double; CR_EINVAL naming `name` and the
 * argument's position j for other kinds. */
CR_INTERNAL cr_status cr__sf_arg_real(cr_arena *arena, const char *name, const cr_value *v,
                                      size_t j, double *x);

/* Registers the rules of special_bessel_integrals.c. */
CR_INTERNAL cr_status cr__special_register_bessel_integrals(cr_registry *reg);

#endif
