/*
 * The math rule family: every function of C's <math.h> (rows for the differentiable ones,
 * hand-written rules for frexp and remquo, non-differentiable declarations for rounding and
 * classification), Julia's trigonometric extras (sec ... acoth, the degree and pi
 * variants, sinc), the remainders mod and rem, and the ML scalars of LogExpFunctions.
 *
 * This file registers the family; the rules are in
 *   trig.c         sin, cos, tan, their inverses and reciprocals, hyperbolic, pi and degree
 *                  variants, sinc, mod2pi, rem2pi;
 *   exp_log.c      exp, log, sqrt and their relatives, pow, cbrt, erf, erfc, tgamma, lgamma,
 *                  and LogExpFunctions: logistic, log1pexp, logaddexp, xlogy, xlog1py, relu;
 *   float_arith.c  fma, remainders, fdim, fmax, fmin, copysign, fabs, scalings, hypot,
 *                  frexp, remquo;
 *   nondiff.c      rounding, classification and neighbours (non-differentiable).
 * Each rule's comment gives its derivative. Where the textbook formula loses accuracy the
 * comment says how the row avoids it; docs/rules-scalar.md lists the conventions at kinks
 * and jumps and the measured accuracy.
 */
#include "math_impl.h"

/* The rows in registration order: the order of the tape operations (tape_ops.h) and of
 * docs/rules-scalar.md. Each function's udata is its row (CR_SCALAR_FUNCTION). */
static const cr_value *const k_rows[] = {
    &cr_fn_sin,     &cr_fn_cos,      &cr_fn_sincos,   &cr_fn_exp,       &cr_fn_log,
    &cr_fn_sqrt,    &cr_fn_tan,      &cr_fn_asin,     &cr_fn_acos,      &cr_fn_atan,
    &cr_fn_atan2,   &cr_fn_sec,      &cr_fn_csc,      &cr_fn_cot,       &cr_fn_asec,
    &cr_fn_acsc,    &cr_fn_acot,     &cr_fn_sinh,     &cr_fn_cosh,      &cr_fn_tanh,
    &cr_fn_asinh,   &cr_fn_acosh,    &cr_fn_atanh,    &cr_fn_sech,      &cr_fn_csch,
    &cr_fn_coth,    &cr_fn_asech,    &cr_fn_acsch,    &cr_fn_acoth,     &cr_fn_sinpi,
    &cr_fn_cospi,   &cr_fn_sincospi, &cr_fn_sinc,     &cr_fn_sind,      &cr_fn_cosd,
    &cr_fn_tand,    &cr_fn_secd,     &cr_fn_cscd,     &cr_fn_cotd,      &cr_fn_asind,
    &cr_fn_acosd,   &cr_fn_atand,    &cr_fn_asecd,    &cr_fn_acscd,     &cr_fn_acotd,
    &cr_fn_deg2rad, &cr_fn_rad2deg,  &cr_fn_exp2,     &cr_fn_exp10,     &cr_fn_expm1,
    &cr_fn_log2,    &cr_fn_log10,    &cr_fn_log1p,    &cr_fn_pow,       &cr_fn_cbrt,
    &cr_fn_erf,     &cr_fn_erfc,     &cr_fn_tgamma,   &cr_fn_lgamma,    &cr_fn_hypot,
    &cr_fn_fma,     &cr_fn_fmod,     &cr_fn_rem,      &cr_fn_remainder, &cr_fn_mod,
    &cr_fn_fdim,    &cr_fn_fmax,     &cr_fn_fmin,     &cr_fn_copysign,  &cr_fn_fabs,
    &cr_fn_ldexp,   &cr_fn_scalbn,   &cr_fn_scalbln,  &cr_fn_modf,      &cr_fn_logistic,
    &cr_fn_sigmoid, &cr_fn_log1pexp, &cr_fn_softplus, &cr_fn_logaddexp, &cr_fn_xlogy,
    &cr_fn_xlog1py, &cr_fn_relu,     &cr_fn_tanpi,    &cr_fn_sincosd,   &cr_fn_mod2pi,
    &cr_fn_rem2pi,  &cr_fn_log_base,
};

cr_status cr__family_math(cr_registry *reg)
{
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; i++) {
        const cr_function *fn = k_rows[i]->u.func.fn;
        cr_status st = cr_scalar_rule_register(reg, fn, fn->udata);
        if (st != CR_OK)
            return st;
    }
    cr_status st = cr__math_register_hand(reg);
    return st == CR_OK ? cr__math_register_nondiff(reg) : st;
}
