/**
 * @file rules_special.h
 * @brief Special functions (SpecialFunctions.jl's, with its ChainRules rules): the
 *        function values for cr_frule() / cr_rrule(), and the plain C functions behind them.
 *
 * Each `cr_fn_NAME` is a `const cr_value` of kind CR_KIND_FUNC. The one-argument functions
 * and beta/logbeta are rows of the scalar-rule table (real arguments; a float argument
 * gives a float result computed in double). polygamma, jn and yn take an integer order
 * first, which gets NoTangent (C's jn/yn take an `int`; SpecialFunctions' besselj(ν, x)
 * has a real order whose derivative is NotImplemented: this library has only the integer
 * orders). gamma_inc's derivative with respect to the order `a` is NotImplemented (a
 * NotImplemented tangent, not an error), as in SpecialFunctions.jl.
 *
 * The primals are written from the published mathematics (DLMF; Temme's and DiDonato and
 * Morris's forms of the incomplete gamma function; Laplace's continued fraction of erfc);
 * j0, j1, jn, y0, y1 and yn are the C library's (POSIX). Measured accuracy (maximum
 * relative error against 50-digit references over each function's range) is in
 * docs/rules-complex-special.md; it is about 1e-15 or better except where noted there.
 *
 * @code
 * cr_value x = cr_value_f64(0.3), y;
 * cr_pullback pb;
 * cr_rrule(NULL, arena, &cr_fn_erfinv, &x, 1, &y, &pb);   // y = erfinv(0.3)
 * cr_tangent g = cr_tangent_f64(1.0), dx[2];
 * cr_pullback_call(arena, &pb, &g, dx, 2);                // dx[1] = sqrt(pi)/2 exp(y²)
 * double p, q;
 * cr_sf_gamma_inc(2.0, 1.5, &p, &q);                      // the C function, directly
 * @endcode
 *
 * @note Everything here is reentrant and thread-safe (no global state; lgamma_r, not
 *       lgamma, is used).
 */
#ifndef CR_RULES_SPECIAL_H
#define CR_RULES_SPECIAL_H

#include "common.h"
#include "value.h"

CR_BEGIN_DECLS

/* ---- Function values ---------------------------------------------------------------- */

/** digamma(x) = Γ'(x)/Γ(x); derivative trigamma(x). Poles at 0, -1, -2, ... */
CR_API extern const cr_value cr_fn_digamma;
/** trigamma(x) = ψ'(x); derivative polygamma(2, x). */
CR_API extern const cr_value cr_fn_trigamma;
/** polygamma(m, x) = ψ^(m)(x), m an integer >= 0 (NoTangent); ∂/∂x = polygamma(m+1, x). */
CR_API extern const cr_value cr_fn_polygamma;
/** erfinv(x), -1 <= x <= 1; derivative (√π/2) exp(Ω²). */
CR_API extern const cr_value cr_fn_erfinv;
/** erfcinv(x), 0 <= x <= 2; derivative -(√π/2) exp(Ω²). */
CR_API extern const cr_value cr_fn_erfcinv;
/** erfcx(x) = exp(x²) erfc(x); derivative 2xΩ - 2/√π (computed without cancellation). */
CR_API extern const cr_value cr_fn_erfcx;
/** logerfc(x) = log(erfc(x)); derivative -2/(√π erfcx(x)) (= -2 exp(-x² - Ω)/√π). */
CR_API extern const cr_value cr_fn_logerfc;
/** beta(a, b) = Γ(a)Γ(b)/Γ(a+b); ∂/∂a = Ω(ψ(a) - ψ(a+b)), ∂/∂b = Ω(ψ(b) - ψ(a+b)). */
CR_API extern const cr_value cr_fn_beta;
/** logbeta(a, b) = log|B(a, b)|; ∂/∂a = ψ(a) - ψ(a+b), ∂/∂b = ψ(b) - ψ(a+b). */
CR_API extern const cr_value cr_fn_logbeta;
/** loggamma(x) = log Γ(x) (NaN where Γ(x) < 0); derivative digamma(x). */
CR_API extern const cr_value cr_fn_loggamma;
/**
 * logabsgamma(x) = (log|Γ(x)|, sign Γ(x)), a tuple of two reals (the sign as a double);
 * derivatives (digamma(x), 0).
 */
CR_API extern const cr_value cr_fn_logabsgamma;
/**
 * gamma_inc(a, x) = (P(a, x), Q(a, x)), the regularised incomplete gamma functions, a
 * tuple of two doubles. ∂P/∂x = x^(a-1) e^-x / Γ(a) = -∂Q/∂x; the derivatives with
 * respect to `a` are NotImplemented (SpecialFunctions.jl issue 317). a > 0, x >= 0.
 */
CR_API extern const cr_value cr_fn_gamma_inc;
/** expint(x) = E1(x) = ∫_1^∞ e^(-xt)/t dt for x > 0; derivative -e^(-x)/x. */
CR_API extern const cr_value cr_fn_expint;
/** Bessel J0(x) (C's j0); derivative -J1(x). */
CR_API extern const cr_value cr_fn_j0;
/** Bessel J1(x) (C's j1); derivative (J0(x) - J2(x))/2. */
CR_API extern const cr_value cr_fn_j1;
/** Bessel Jn(n, x) (C's jn), integer order n (NoTangent), |n| <= 100000 (CR_EDOMAIN
 *  beyond: C's jn takes time proportional to n); ∂/∂x = (J(n-1) - J(n+1))/2. */
CR_API extern const cr_value cr_fn_jn;
/** Bessel Y0(x) (C's y0), x > 0; derivative -Y1(x). */
CR_API extern const cr_value cr_fn_y0;
/** Bessel Y1(x) (C's y1), x > 0; derivative (Y0(x) - Y2(x))/2. */
CR_API extern const cr_value cr_fn_y1;
/** Bessel Yn(n, x) (C's yn), integer order n (NoTangent), |n| <= 100000 (CR_EDOMAIN
 *  beyond), x > 0; ∂/∂x = (Y(n-1) - Y(n+1))/2. */
CR_API extern const cr_value cr_fn_yn;

/* ---- The C functions ------------------------------------------------------------------ */

/**
 * The digamma function ψ(x). ±inf at ±0 (as -1/x), NaN at the negative integers.
 * Relative error about 1e-15 on x > 0 (near the positive zero too); near the zeros on the
 * negative axis the error is absolute (about 1e-16 · |ψ|'s scale).
 */
CR_API double cr_sf_digamma(double x);

/** The trigamma function ψ'(x); +inf at 0, -1, -2, ... */
CR_API double cr_sf_trigamma(double x);

/**
 * The polygamma function ψ^(m)(x) for m >= 0 (NaN for m < 0; cr_fn_polygamma refuses it
 * with CR_EDOMAIN). For x < 0 it uses the reflection formula, up to m = 170 (NaN above: the
 * values overflow there). Its time does not grow with m.
 */
CR_API double cr_sf_polygamma(int m, double x);

/** The inverse error function: erf(erfinv(x)) = x; ±inf at ±1, NaN outside [-1, 1]. */
CR_API double cr_sf_erfinv(double x);

/** The inverse complementary error function: erfc(erfcinv(x)) = x, 0 <= x <= 2. */
CR_API double cr_sf_erfcinv(double x);

/** The scaled complementary error function exp(x²) erfc(x) (+inf below about -26.6). */
CR_API double cr_sf_erfcx(double x);

/** log(erfc(x)), accurate where erfc underflows (large x) and where it is near 1. */
CR_API double cr_sf_logerfc(double x);

/** The beta function B(a, b) = Γ(a)Γ(b)/Γ(a+b). */
CR_API double cr_sf_beta(double a, double b);

/** log|B(a, b)|, without the cancellation of lgamma(a) + lgamma(b) - lgamma(a+b). */
CR_API double cr_sf_logbeta(double a, double b);

/** log Γ(x) for Γ(x) > 0; NaN where Γ(x) < 0 (the logarithm is not real there). */
CR_API double cr_sf_loggamma(double x);

/**
 * log|Γ(x)|, and the sign of Γ(x) in *sign (may be NULL). Reentrant (lgamma_r).
 */
CR_API double cr_sf_logabsgamma(double x, int *sign);

/**
 * The regularised incomplete gamma functions P(a, x) = γ(a, x)/Γ(a) and
 * Q(a, x) = Γ(a, x)/Γ(a) = 1 - P, each computed with its own relative accuracy (the
 * smaller is never formed as 1 minus the larger). NaN for a <= 0, x < 0 or NaN.
 * @param[in]  a the order, a > 0.
 * @param[in]  x the argument, x >= 0.
 * @param[out] p P(a, x); may be NULL.
 * @param[out] q Q(a, x); may be NULL.
 */
CR_API void cr_sf_gamma_inc(double a, double x, double *p, double *q);

/** The exponential integral E1(x) for x > 0 (+inf at 0, NaN for x < 0: complex there). */
CR_API double cr_sf_expint(double x);

CR_END_DECLS

#endif /* CR_RULES_SPECIAL_H */
