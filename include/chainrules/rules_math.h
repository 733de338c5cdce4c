/**
 * @file rules_math.h
 * @brief The built-in scalar functions, as function values to pass to cr_frule(),
 *        cr_rrule() and the engines.
 *
 * Each `cr_fn_NAME` is a `const cr_value` of kind CR_KIND_FUNC; its `cr_function` is
 * `cr_fn_NAME.u.func.fn` (for registering more rules for it). Every one of them is a
 * row of the scalar-rule table: see docs/rules-scalar.md for partials, domains and
 * conventions.
 *
 * @code
 * cr_value x = cr_value_f64(0.5), y;
 * cr_pullback pb;
 * cr_rrule(NULL, arena, &cr_fn_sin, &x, 1, &y, &pb);
 * @endcode
 */
#ifndef CR_RULES_MATH_H
#define CR_RULES_MATH_H

#include "common.h"
#include "value.h"

CR_BEGIN_DECLS

/** x + y */
CR_API extern const cr_value cr_fn_add;
/** x - y */
CR_API extern const cr_value cr_fn_sub;
/** x * y */
CR_API extern const cr_value cr_fn_mul;
/** x / y */
CR_API extern const cr_value cr_fn_div;
/** -x */
CR_API extern const cr_value cr_fn_neg;
/** sin(x) (csin for complex x) */
CR_API extern const cr_value cr_fn_sin;
/** cos(x) */
CR_API extern const cr_value cr_fn_cos;
/** exp(x) */
CR_API extern const cr_value cr_fn_exp;
/** log(x) */
CR_API extern const cr_value cr_fn_log;
/** sqrt(x) */
CR_API extern const cr_value cr_fn_sqrt;
/** asin(x) */
CR_API extern const cr_value cr_fn_asin;
/** sincos(x) = (sin x, cos x), a tuple */
CR_API extern const cr_value cr_fn_sincos;
/** ignore_derivatives(x) = x, with NoTangent derivatives */
CR_API extern const cr_value cr_fn_ignore_derivatives;

CR_END_DECLS

#endif /* CR_RULES_MATH_H */
