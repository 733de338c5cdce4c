/**
 * @file rules_math.h
 * @brief The built-in scalar functions (<math.h>, Julia Base's scalar extras, the ML
 *        scalars), as function values to pass to cr_frule(), cr_rrule() and the engines.
 *
 * Each `cr_fn_NAME` is a `const cr_value` of kind CR_KIND_FUNC; its `cr_function` is
 * `cr_fn_NAME.u.func.fn` (for registering more rules for it). The same functions are found
 * by name with cr_registry_find(cr_registry_builtin(), "atan2"): C names for <math.h>,
 * Julia names for the extras ("sind", "logistic"), "+", "-", "*", "/" and "neg" for the
 * operators.
 *
 * Most are rows of the scalar-rule table (scalar_rule.h): real arguments (double, float,
 * integers, bool) and, where the row is holomorphic, complex ones, with ChainRules'
 * complex convention (the pullback multiplies by conj(f'(z))). A float computation keeps
 * float tangents; an integer argument gets NoTangent. frexp, remquo, evalpoly and
 * hypot of three or more arguments have hand-written rules; the rounding and
 * classification functions are declared non-differentiable (NoTangent derivatives).
 * docs/rules-scalar.md lists every rule with its partials, domain and the conventions at
 * kinks and jumps.
 *
 * @code
 * cr_value x = cr_value_f64(0.5), y;
 * cr_pullback pb;
 * cr_rrule(NULL, arena, &cr_fn_sin, &x, 1, &y, &pb);
 * cr_tangent dy = cr_tangent_f64(1.0), dx[2];
 * cr_pullback_call(arena, &pb, &dy, dx, 2);       // dx[1] = cos(0.5)
 * @endcode
 *
 * @note The values are immutable and may be used from any thread.
 */
#ifndef CR_RULES_MATH_H
#define CR_RULES_MATH_H

#include "common.h"
#include "value.h"

CR_BEGIN_DECLS

/* ---- Arithmetic operators and Julia Base arithmetic (src/rulesets/scalar/arith.c) ---- */

/** `x + y` (registry name "+"). */
CR_API extern const cr_value cr_fn_add;
/** `x - y` (registry name "-"). */
CR_API extern const cr_value cr_fn_sub;
/** `x * y` (registry name "*"). */
CR_API extern const cr_value cr_fn_mul;
/** `x / y` (registry name "/"). */
CR_API extern const cr_value cr_fn_div;
/** `-x`, unary minus (registry name "neg"). */
CR_API extern const cr_value cr_fn_neg;
/** `identity(x) = x`. */
CR_API extern const cr_value cr_fn_identity;
/** `inv(x) = 1/x`. */
CR_API extern const cr_value cr_fn_inv;
/** `x^2` (Julia's literal power; registry name "square"). */
CR_API extern const cr_value cr_fn_square;
/** `x^3` (Julia's literal power; registry name "cube"). */
CR_API extern const cr_value cr_fn_cube;
/** `sign(x)`: -1, 0 or 1 (±0 and NaN returned as they are); derivative 0. */
CR_API extern const cr_value cr_fn_sign;
/** `muladd(x, y, z) = x*y + z`. */
CR_API extern const cr_value cr_fn_muladd;
/** `clamp(x, lo, hi)` (Julia). */
CR_API extern const cr_value cr_fn_clamp;
/** `max(x, y)` (Julia: NaN if either argument is NaN; max(-0.0, 0.0) = 0.0). */
CR_API extern const cr_value cr_fn_max;
/** `min(x, y)` (Julia: NaN if either argument is NaN; min(-0.0, 0.0) = -0.0). */
CR_API extern const cr_value cr_fn_min;
/** `evalpoly(x, c0, c1, ...) = c0 + c1 x + ...`: variadic, at least one coefficient; or
 *  `evalpoly(x, c)` with the coefficients in a non-empty vector c (an array of f64, f32 or
 *  c128; its cotangent is an array of c's element type, x̄ = conj(p'(x)) ȳ,
 *  c̄_i = conj(x)^i ȳ). */
CR_API extern const cr_value cr_fn_evalpoly;
/** `ignore_derivatives(x) = x`, with NoTangent derivatives. */
CR_API extern const cr_value cr_fn_ignore_derivatives;

/* ---- Trigonometric functions (src/rulesets/scalar/trig.c) ---- */

/** `sin(x)` (csin for complex x). */
CR_API extern const cr_value cr_fn_sin;
/** `cos(x)`. */
CR_API extern const cr_value cr_fn_cos;
/** `tan(x)`. */
CR_API extern const cr_value cr_fn_tan;
/** `sincos(x) = (sin x, cos x)`, a tuple. */
CR_API extern const cr_value cr_fn_sincos;
/** `asin(x)`. */
CR_API extern const cr_value cr_fn_asin;
/** `acos(x)`. */
CR_API extern const cr_value cr_fn_acos;
/** `atan(x)`. */
CR_API extern const cr_value cr_fn_atan;
/** `atan2(y, x)` (real arguments). */
CR_API extern const cr_value cr_fn_atan2;
/** `sec(x) = 1/cos(x)`. */
CR_API extern const cr_value cr_fn_sec;
/** `csc(x) = 1/sin(x)`. */
CR_API extern const cr_value cr_fn_csc;
/** `cot(x) = 1/tan(x)`. */
CR_API extern const cr_value cr_fn_cot;
/** `asec(x) = acos(1/x)`. */
CR_API extern const cr_value cr_fn_asec;
/** `acsc(x) = asin(1/x)`. */
CR_API extern const cr_value cr_fn_acsc;
/** `acot(x) = atan(1/x)`. */
CR_API extern const cr_value cr_fn_acot;
/** `sinpi(x) = sin(pi x)`, exactly reduced (real x). */
CR_API extern const cr_value cr_fn_sinpi;
/** `cospi(x) = cos(pi x)`, exactly reduced (real x). */
CR_API extern const cr_value cr_fn_cospi;
/** `sincospi(x) = (sinpi x, cospi x)`, a tuple (real x). */
CR_API extern const cr_value cr_fn_sincospi;
/** `sinc(x) = sin(pi x)/(pi x)`, sinc(0) = 1 (real x). */
CR_API extern const cr_value cr_fn_sinc;
/** `sind(x)`: sine of x degrees, exactly reduced (real x). */
CR_API extern const cr_value cr_fn_sind;
/** `cosd(x)`: cosine of x degrees (real x). */
CR_API extern const cr_value cr_fn_cosd;
/** `tand(x)`: tangent of x degrees (real x). */
CR_API extern const cr_value cr_fn_tand;
/** `secd(x) = 1/cosd(x)` (real x). */
CR_API extern const cr_value cr_fn_secd;
/** `cscd(x) = 1/sind(x)` (real x). */
CR_API extern const cr_value cr_fn_cscd;
/** `cotd(x) = cosd(x)/sind(x)` (real x). */
CR_API extern const cr_value cr_fn_cotd;
/** `asind(x)`: asin in degrees (real x). */
CR_API extern const cr_value cr_fn_asind;
/** `acosd(x)`: acos in degrees (real x). */
CR_API extern const cr_value cr_fn_acosd;
/** `atand(x)`: atan in degrees (real x). */
CR_API extern const cr_value cr_fn_atand;
/** `asecd(x)`: asec in degrees (real x). */
CR_API extern const cr_value cr_fn_asecd;
/** `acscd(x)`: acsc in degrees (real x). */
CR_API extern const cr_value cr_fn_acscd;
/** `acotd(x)`: acot in degrees (real x). */
CR_API extern const cr_value cr_fn_acotd;
/** `deg2rad(x) = x pi/180`. */
CR_API extern const cr_value cr_fn_deg2rad;
/** `rad2deg(x) = x 180/pi`. */
CR_API extern const cr_value cr_fn_rad2deg;

/* ---- Hyperbolic functions ---- */

/** `sinh(x)`. */
CR_API extern const cr_value cr_fn_sinh;
/** `cosh(x)`. */
CR_API extern const cr_value cr_fn_cosh;
/** `tanh(x)`. */
CR_API extern const cr_value cr_fn_tanh;
/** `asinh(x)`. */
CR_API extern const cr_value cr_fn_asinh;
/** `acosh(x)`. */
CR_API extern const cr_value cr_fn_acosh;
/** `atanh(x)`. */
CR_API extern const cr_value cr_fn_atanh;
/** `sech(x) = 1/cosh(x)`. */
CR_API extern const cr_value cr_fn_sech;
/** `csch(x) = 1/sinh(x)`. */
CR_API extern const cr_value cr_fn_csch;
/** `coth(x) = 1/tanh(x)`. */
CR_API extern const cr_value cr_fn_coth;
/** `asech(x) = acosh(1/x)`. */
CR_API extern const cr_value cr_fn_asech;
/** `acsch(x) = asinh(1/x)`. */
CR_API extern const cr_value cr_fn_acsch;
/** `acoth(x) = atanh(1/x)`. */
CR_API extern const cr_value cr_fn_acoth;

/* ---- Exponentials, logarithms, powers ---- */

/** `exp(x)`. */
CR_API extern const cr_value cr_fn_exp;
/** `exp2(x) = 2^x`. */
CR_API extern const cr_value cr_fn_exp2;
/** `exp10(x) = 10^x`. */
CR_API extern const cr_value cr_fn_exp10;
/** `expm1(x) = exp(x) - 1`. */
CR_API extern const cr_value cr_fn_expm1;
/** `log(x)`. */
CR_API extern const cr_value cr_fn_log;
/** `log2(x)`. */
CR_API extern const cr_value cr_fn_log2;
/** `log10(x)`. */
CR_API extern const cr_value cr_fn_log10;
/** `log1p(x) = log(1 + x)`. */
CR_API extern const cr_value cr_fn_log1p;
/** `pow(x, y) = x^y` (an int y gets NoTangent). */
CR_API extern const cr_value cr_fn_pow;
/** `sqrt(x)`. */
CR_API extern const cr_value cr_fn_sqrt;
/** `cbrt(x)` (real x). */
CR_API extern const cr_value cr_fn_cbrt;
/** `hypot(x, y, ...)`: two or more real arguments. */
CR_API extern const cr_value cr_fn_hypot;

/* ---- Special functions of <math.h> ---- */

/** `erf(x)` (real x). */
CR_API extern const cr_value cr_fn_erf;
/** `erfc(x)` (real x). */
CR_API extern const cr_value cr_fn_erfc;
/** `tgamma(x)`, the gamma function (real x). */
CR_API extern const cr_value cr_fn_tgamma;
/** `lgamma(x) = log|tgamma(x)|` (real x). */
CR_API extern const cr_value cr_fn_lgamma;

/* ---- Arithmetic of <math.h> (real arguments) ---- */

/** `fma(x, y, z) = x*y + z`, one rounding for real arguments; complex arguments too (each
 *  part formed with nested fmas), holomorphic: partials (y, x, 1). */
CR_API extern const cr_value cr_fn_fma;
/** `fmod(x, y)`: remainder with the sign of x. */
CR_API extern const cr_value cr_fn_fmod;
/** `rem(x, y)`: Julia's name for fmod. */
CR_API extern const cr_value cr_fn_rem;
/** `remainder(x, y)`: remainder of the nearest quotient. */
CR_API extern const cr_value cr_fn_remainder;
/** `remquo(x, y) = (remainder, low bits of the quotient)`, a (real, int) tuple. */
CR_API extern const cr_value cr_fn_remquo;
/** `mod(x, y)`: Julia's floored remainder, with the sign of y. */
CR_API extern const cr_value cr_fn_mod;
/** `fdim(x, y) = max(x - y, 0)`. */
CR_API extern const cr_value cr_fn_fdim;
/** `fmax(x, y)`: a NaN argument is ignored. */
CR_API extern const cr_value cr_fn_fmax;
/** `fmin(x, y)`: a NaN argument is ignored. */
CR_API extern const cr_value cr_fn_fmin;
/** `copysign(x, y)`. */
CR_API extern const cr_value cr_fn_copysign;
/** `fabs(x)`. */
CR_API extern const cr_value cr_fn_fabs;
/** `ldexp(x, n) = x 2^n` (n an integer). */
CR_API extern const cr_value cr_fn_ldexp;
/** `scalbn(x, n) = x 2^n` (n an integer). */
CR_API extern const cr_value cr_fn_scalbn;
/** `scalbln(x, n) = x 2^n` (n a long integer). */
CR_API extern const cr_value cr_fn_scalbln;
/** `frexp(x) = (m, e)`, a (real, int) tuple with x = m 2^e. */
CR_API extern const cr_value cr_fn_frexp;
/** `modf(x) = (fractional part, integral part)`, a tuple. */
CR_API extern const cr_value cr_fn_modf;

/* ---- ML scalars (LogExpFunctions) ---- */

/** `logistic(x) = 1/(1 + exp(-x))`. */
CR_API extern const cr_value cr_fn_logistic;
/** `sigmoid(x)`: another name of logistic. */
CR_API extern const cr_value cr_fn_sigmoid;
/** `log1pexp(x) = log(1 + exp(x))`. */
CR_API extern const cr_value cr_fn_log1pexp;
/** `softplus(x)`: another name of log1pexp. */
CR_API extern const cr_value cr_fn_softplus;
/** `logaddexp(x, y) = log(exp(x) + exp(y))`. */
CR_API extern const cr_value cr_fn_logaddexp;
/** `xlogy(x, y) = x log(y)`, 0 when x == 0. */
CR_API extern const cr_value cr_fn_xlogy;
/** `xlog1py(x, y) = x log1p(y)`, 0 when x == 0. */
CR_API extern const cr_value cr_fn_xlog1py;
/** `relu(x) = max(x, 0)`. */
CR_API extern const cr_value cr_fn_relu;

/* ---- Non-differentiable functions: NoTangent derivatives (real arguments) ---- */

/** `floor(x)`. */
CR_API extern const cr_value cr_fn_floor;
/** `ceil(x)`. */
CR_API extern const cr_value cr_fn_ceil;
/** `trunc(x)`. */
CR_API extern const cr_value cr_fn_trunc;
/** `round(x)`. */
CR_API extern const cr_value cr_fn_round;
/** `nearbyint(x)`. */
CR_API extern const cr_value cr_fn_nearbyint;
/** `rint(x)`. */
CR_API extern const cr_value cr_fn_rint;
/** `lround(x)` (an int64 value). */
CR_API extern const cr_value cr_fn_lround;
/** `llround(x)` (an int64 value). */
CR_API extern const cr_value cr_fn_llround;
/** `lrint(x)` (an int64 value). */
CR_API extern const cr_value cr_fn_lrint;
/** `llrint(x)` (an int64 value). */
CR_API extern const cr_value cr_fn_llrint;
/** `ilogb(x)` (an int64 value). */
CR_API extern const cr_value cr_fn_ilogb;
/** `logb(x)`. */
CR_API extern const cr_value cr_fn_logb;
/** `signbit(x)` (a bool value). */
CR_API extern const cr_value cr_fn_signbit;
/** `isnan(x)` (a bool value). */
CR_API extern const cr_value cr_fn_isnan;
/** `isinf(x)` (a bool value). */
CR_API extern const cr_value cr_fn_isinf;
/** `isfinite(x)` (a bool value). */
CR_API extern const cr_value cr_fn_isfinite;
/** `isnormal(x)` (a bool value). */
CR_API extern const cr_value cr_fn_isnormal;
/** `fpclassify(x)` (an int64 value: FP_NAN, FP_ZERO, ...). */
CR_API extern const cr_value cr_fn_fpclassify;
/** `nextafter(x, y)`. */
CR_API extern const cr_value cr_fn_nextafter;
/** `nexttoward(x, y)`. */
CR_API extern const cr_value cr_fn_nexttoward;

/* ---- Julia Base scalars: tanpi, sincosd, mod2pi, rem2pi, log(b, x) ---------------------- */

/** Rounding modes of cr_fn_rem2pi (its second argument, an integer): Julia's RoundNearest. */
#define CR_ROUND_NEAREST 0
/** RoundToZero: the remainder has the sign of x. */
#define CR_ROUND_TO_ZERO 1
/** RoundDown: the remainder is in [0, 2π) (mod2pi). */
#define CR_ROUND_DOWN 2
/** RoundUp: the remainder is in (-2π, 0]. */
#define CR_ROUND_UP 3

/** `tanpi(x) = tan(pi x)`, exactly reduced (real x): exact zeros at the integers, ±inf at the
 *  half-integers; derivative π(1 + Ω²). */
CR_API extern const cr_value cr_fn_tanpi;
/** `sincosd(x) = (sind x, cosd x)`, a tuple (real x, degrees, exactly reduced). */
CR_API extern const cr_value cr_fn_sincosd;
/** `mod2pi(x)`: x modulo 2π in [0, 2π), reduced with 2π to 160 bits, for |x| < 2^50 (NaN
 *  beyond); derivative 1 (ChainRules, also at the jumps). */
CR_API extern const cr_value cr_fn_mod2pi;
/** `rem2pi(x, mode)`: x - 2πn with n = x/(2π) rounded by mode (CR_ROUND_NEAREST,
 *  CR_ROUND_TO_ZERO, CR_ROUND_DOWN, CR_ROUND_UP; NaN for another value); |x| < 2^50;
 *  derivatives (1, 0), NoTangent for an integer mode. */
CR_API extern const cr_value cr_fn_rem2pi;
/** `log_base(b, x) = log(x)/log(b)`: Julia's two-argument log(b, x), real or complex;
 *  ∂/∂b = -Ω/(b log b), ∂/∂x = 1/(x log b). */
CR_API extern const cr_value cr_fn_log_base;

CR_END_DECLS

#endif /* CR_RULES_MATH_H */
