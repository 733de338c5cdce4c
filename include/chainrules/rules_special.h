/**
 * @file rules_special.h
 * @brief Special functions (SpecialFunctions.jl's, with its ChainRules rules): the
 *        function values for cr_frule() / cr_rrule(), and the plain C functions behind them.
 *
 * Each `cr_fn_NAME` is a `const cr_value` of kind CR_KIND_FUNC. The one-argument functions
 * and beta/logbeta are rows of the scalar-rule table (real arguments; a float argument
 * gives a float result computed in double). polygamma, jn and yn take an integer order
 * first, which gets NoTangent (C's jn/yn take an `int`). The Bessel and Hankel functions of
 * real order (besselj, bessely, besseli, besselk, their scaled forms, hankelh1, hankelh2,
 * hankelh1x, hankelh2x) take the order first as a real number: its derivative is
 * NotImplemented (a NotImplemented tangent, not an error), as in SpecialFunctions.jl, and
 * NoTangent when the order is passed as an integer. The same holds for the parameter `a` of
 * gamma_inc, gamma_upper and loggamma_upper and the order ν of expint2 and expintx2
 * (SpecialFunctions' expint(ν, z) and expintx(ν, z)). The Hankel functions return a complex number
 * for a real argument; their pullback follows the complex convention (x̄ = real(conj(∂f/∂x)
 * ȳ)).
 *
 * The primals are written from the published mathematics (DLMF; Temme's and DiDonato and
 * Morris's forms of the incomplete gamma function; Laplace's continued fraction of erfc;
 * Temme's series, Steed's continued fractions and Hankel's expansion for the Bessel
 * functions of real order; Carlson's duplication algorithm for the elliptic integrals);
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
 * respect to `a` are NotImplemented (SpecialFunctions.jl issue 317). a > 0, x >= 0. Also
 * gamma_inc(a, x, IND) with an integer IND in 0..2 (SpecialFunctions' requested accuracy:
 * the full accuracy is computed for every IND; IND gets NoTangent).
 */
CR_API extern const cr_value cr_fn_gamma_inc;
/** expint(x) = E1(x) = ∫_1^∞ e^(-xt)/t dt: a real x > 0, or a complex z (principal branch,
 *  so E1 of a negative x is expint(x ± 0i) = -Ei(-x) ∓ iπ); derivative -e^(-z)/z. */
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

/* ---- Function values: Airy, Bessel of real order, Hankel, error-function relatives,
 *      exponential, sine, cosine and elliptic integrals ---------------------------------- */

/** airyai(x) = Ai(x); derivative airyaiprime(x). */
CR_API extern const cr_value cr_fn_airyai;
/** airyaiprime(x) = Ai'(x); derivative x Ai(x). */
CR_API extern const cr_value cr_fn_airyaiprime;
/** airybi(x) = Bi(x); derivative airybiprime(x). */
CR_API extern const cr_value cr_fn_airybi;
/** airybiprime(x) = Bi'(x); derivative x Bi(x). */
CR_API extern const cr_value cr_fn_airybiprime;
/** airyaix(x) = Ai(x) e^ζ, ζ = (2/3) x^(3/2), x >= 0 (NaN below: complex scale); derivative
 *  airyaiprimex(x) + √x Ω. */
CR_API extern const cr_value cr_fn_airyaix;
/** airyaiprimex(x) = Ai'(x) e^ζ, x >= 0; derivative x airyaix(x) + √x Ω. */
CR_API extern const cr_value cr_fn_airyaiprimex;
/** airybix(x) = Bi(x) e^(-|Re ζ|): Bi(x) e^(-ζ) for x >= 0, Bi(x) for x < 0; derivative
 *  airybiprimex(x) - √x Ω for x > 0. */
CR_API extern const cr_value cr_fn_airybix;
/** airybiprimex(x) = Bi'(x) e^(-|Re ζ|); derivative x airybix(x) - √x Ω for x > 0. */
CR_API extern const cr_value cr_fn_airybiprimex;
/** dawson(x) = e^(-x²) ∫_0^x e^(t²) dt; derivative 1 - 2xΩ. */
CR_API extern const cr_value cr_fn_dawson;
/** erfi(x) = -i erf(ix); derivative (2/√π) e^(x²). */
CR_API extern const cr_value cr_fn_erfi;
/** logerfcx(x) = log(erfcx(x)); derivative 2x - 2/(√π erfcx(x)). */
CR_API extern const cr_value cr_fn_logerfcx;
/** invdigamma(y): the x > 0 with digamma(x) = y; derivative 1/trigamma(Ω). */
CR_API extern const cr_value cr_fn_invdigamma;
/** expintx(x) = e^x E1(x), x > 0; derivative Ω - 1/x. */
CR_API extern const cr_value cr_fn_expintx;
/** expinti(x) = Ei(x) (principal value), x != 0; derivative e^x/x. */
CR_API extern const cr_value cr_fn_expinti;
/** sinint(x) = Si(x) = ∫_0^x sin(t)/t dt; derivative sin(x)/x (1 at 0). */
CR_API extern const cr_value cr_fn_sinint;
/** cosint(x) = Ci(x) = γ + log x + ∫_0^x (cos t - 1)/t dt, x > 0; derivative cos(x)/x. */
CR_API extern const cr_value cr_fn_cosint;
/** ellipk(m) = K(m), m < 1 (parameter m = k²); derivative (E - (1-m)K)/(2m(1-m)). */
CR_API extern const cr_value cr_fn_ellipk;
/** ellipe(m) = E(m), m <= 1; derivative (E - K)/(2m). */
CR_API extern const cr_value cr_fn_ellipe;
/** erf2(x, y) = erf(y) - erf(x) (SpecialFunctions' erf(x, y)); ∂/∂x = -(2/√π)e^(-x²),
 *  ∂/∂y = (2/√π)e^(-y²). */
CR_API extern const cr_value cr_fn_erf2;

/**
 * besselj(ν, x) = J_ν(x) for a real order ν (|ν| <= 100000, CR_EDOMAIN beyond); x >= 0, or
 * any x for an integer ν. ∂/∂x = (J_(ν-1) - J_(ν+1))/2; ∂/∂ν is NotImplemented (a
 * NotImplemented tangent) for a real order and NoTangent for an integer-kind order.
 * The same order conventions hold for all the Bessel and Hankel functions below.
 */
CR_API extern const cr_value cr_fn_besselj;
/** bessely(ν, x) = Y_ν(x), x > 0; ∂/∂x = (Y_(ν-1) - Y_(ν+1))/2. */
CR_API extern const cr_value cr_fn_bessely;
/** besseli(ν, x) = I_ν(x); ∂/∂x = (I_(ν-1) + I_(ν+1))/2. */
CR_API extern const cr_value cr_fn_besseli;
/** besselk(ν, x) = K_ν(x), x > 0; ∂/∂x = -(K_(ν-1) + K_(ν+1))/2. */
CR_API extern const cr_value cr_fn_besselk;
/** besselix(ν, x) = I_ν(x) e^-|x|; ∂/∂x = (Ix_(ν-1) + Ix_(ν+1))/2 - sign(x) Ω. */
CR_API extern const cr_value cr_fn_besselix;
/** besselkx(ν, x) = K_ν(x) e^x, x > 0; ∂/∂x = -(Kx_(ν-1) + Kx_(ν+1))/2 + Ω. */
CR_API extern const cr_value cr_fn_besselkx;
/** besseljx(ν, x) = J_ν(x) e^-|Im x| = J_ν(x) for real x. */
CR_API extern const cr_value cr_fn_besseljx;
/** besselyx(ν, x) = Y_ν(x) e^-|Im x| = Y_ν(x) for real x. */
CR_API extern const cr_value cr_fn_besselyx;
/** hankelh1(ν, x) = J_ν(x) + i Y_ν(x), a complex result, x > 0; ∂/∂x = (H1_(ν-1) -
 *  H1_(ν+1))/2; the pullback of a real x is real(conj(∂/∂x) ȳ). */
CR_API extern const cr_value cr_fn_hankelh1;
/** hankelh2(ν, x) = J_ν(x) - i Y_ν(x), x > 0; ∂/∂x = (H2_(ν-1) - H2_(ν+1))/2. */
CR_API extern const cr_value cr_fn_hankelh2;
/** hankelh1x(ν, x) = H1_ν(x) e^(-ix), x > 0; ∂/∂x = (H1x_(ν-1) - H1x_(ν+1))/2 - iΩ. */
CR_API extern const cr_value cr_fn_hankelh1x;
/** hankelh2x(ν, x) = H2_ν(x) e^(ix), x > 0; ∂/∂x = (H2x_(ν-1) - H2x_(ν+1))/2 + iΩ. */
CR_API extern const cr_value cr_fn_hankelh2x;
/** gamma_upper(a, x) = Γ(a, x) (SpecialFunctions' gamma(a, x)) for any real a, x >= 0
 *  (x > 0 for a <= 0: +inf at 0); ∂/∂x = -x^(a-1) e^-x; ∂/∂a NotImplemented (NoTangent
 *  for an integer a). */
CR_API extern const cr_value cr_fn_gamma_upper;
/** loggamma_upper(a, x) = log Γ(a, x) (SpecialFunctions' loggamma(a, x)) for any real a,
 *  x >= 0; ∂/∂x = -x^(a-1) e^-x / Γ(a, x); ∂/∂a NotImplemented. */
CR_API extern const cr_value cr_fn_loggamma_upper;
/** expint2(ν, x) = E_ν(x) = ∫_1^∞ e^(-xt) t^(-ν) dt (SpecialFunctions' expint(ν, z)) for a
 *  real order ν (|ν| <= 100000) and x >= 0 (E_ν(0) = 1/(ν-1) for ν > 1, +inf otherwise), or
 *  any x != 0 for an integer ν <= 0 (real there; complex for x < 0 otherwise: NaN).
 *  ∂/∂x = -E_(ν-1)(x); ∂/∂ν NotImplemented (NoTangent for an integer-kind order). */
CR_API extern const cr_value cr_fn_expint2;
/** expintx2(ν, x) = e^x E_ν(x) (SpecialFunctions' expintx(ν, z)), finite where E_ν
 *  underflows; ∂/∂x = Ω - expintx2(ν-1, x); ∂/∂ν NotImplemented. */
CR_API extern const cr_value cr_fn_expintx2;
/** cexpint2(ν, z) = E_ν(z) for a real order ν (|ν| <= 100000) and a complex z
 *  (SpecialFunctions' expint(ν, z) of a complex z), the principal branch
 *  (cr_sf_expint2_complex); the result is c128 also for a real z. ∂/∂z = -E_(ν-1)(z)
 *  (complex-analytic: the pullback takes conj of it, a real z gets the real part);
 *  ∂/∂ν NotImplemented (NoTangent for an integer-kind order). */
CR_API extern const cr_value cr_fn_cexpint2;

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

/**
 * E1(z) for complex z, the principal branch: the cut is the negative real axis, whose side
 * the sign of a zero imaginary part selects (E1(-x ± 0i) = -Ei(x) ∓ iπ for x > 0); +inf at 0.
 * The power series where it does not cancel (|z| <= 1, or Re z < 0 with Im² <= 6|Re z|), the
 * continued fraction of DLMF 6.9.1 elsewhere.
 */
CR_API cr_complex cr_sf_expint_complex(cr_complex z);

/**
 * E_ν(z) for a real order ν and a complex z, the principal branch: the cut is the negative
 * real axis, its side chosen by the sign of a zero imaginary part. E_ν(0) = 1/(ν-1) for
 * ν > 1, +inf otherwise; NaN for |ν| > 100000. The power series of DLMF 8.19.10 where it
 * does not cancel (|z| <= 1, or Re z < 0 with Im² <= 6|Re z|), its two large terms combined
 * analytically for ν near a positive integer; the continued fraction of DLMF 8.19.17
 * elsewhere.
 */
CR_API cr_complex cr_sf_expint2_complex(double nu, cr_complex z);

/** Ai(x), the Airy function of the first kind. */
CR_API double cr_sf_airyai(double x);
/** Ai'(x). */
CR_API double cr_sf_airyaiprime(double x);
/** Bi(x), the Airy function of the second kind. */
CR_API double cr_sf_airybi(double x);
/** Bi'(x). */
CR_API double cr_sf_airybiprime(double x);
/** Ai(x) e^ζ, ζ = (2/3) x^(3/2), for x >= 0 (NaN for x < 0, where the scale is complex). */
CR_API double cr_sf_airyaix(double x);
/** Ai'(x) e^ζ for x >= 0 (NaN for x < 0). */
CR_API double cr_sf_airyaiprimex(double x);
/** Bi(x) e^(-|Re ζ|), ζ = (2/3) x^(3/2): Bi(x) e^(-ζ) for x >= 0, Bi(x) for x < 0. */
CR_API double cr_sf_airybix(double x);
/** Bi'(x) e^(-|Re ζ|). */
CR_API double cr_sf_airybiprimex(double x);
/** Dawson's integral F(x) = e^(-x²) ∫_0^x e^(t²) dt. */
CR_API double cr_sf_dawson(double x);
/** The imaginary error function erfi(x) = (2/√π) ∫_0^x e^(t²) dt (±inf beyond about ±26.6). */
CR_API double cr_sf_erfi(double x);
/** log(erfcx(x)), finite where erfcx overflows (x < -26.6). */
CR_API double cr_sf_logerfcx(double x);
/** The inverse of the digamma function on x > 0: the x > 0 with ψ(x) = y. */
CR_API double cr_sf_invdigamma(double y);
/** e^x E1(x) for x > 0 (+inf at 0, NaN for x < 0). */
CR_API double cr_sf_expintx(double x);
/** The exponential integral Ei(x) (principal value; -inf at 0; -E1(-x) for x < 0). */
CR_API double cr_sf_expinti(double x);
/** The sine integral Si(x). */
CR_API double cr_sf_sinint(double x);
/** The cosine integral Ci(x) for x > 0 (-inf at 0, NaN for x < 0: complex there). */
CR_API double cr_sf_cosint(double x);
/** The complete elliptic integral of the first kind K(m), m < 1 (+inf at 1, NaN above). */
CR_API double cr_sf_ellipk(double m);
/** The complete elliptic integral of the second kind E(m), m <= 1 (NaN above). */
CR_API double cr_sf_ellipe(double m);
/** erf(y) - erf(x), without cancellation where both are near ±1. */
CR_API double cr_sf_erf2(double x, double y);
/**
 * The Bessel function J_ν(x) of real order ν: x >= 0, or any x for an integer ν (NaN for a
 * negative x and a non-integer ν: complex). NaN for |ν| > 100000 and where the continued
 * fraction (about x terms for x < ν²) does not converge within 2e6 terms.
 */
CR_API double cr_sf_besselj(double nu, double x);
/** Y_ν(x) of real order, x > 0 (-inf at 0, NaN for x < 0). */
CR_API double cr_sf_bessely(double nu, double x);
/** I_ν(x) of real order: x >= 0, or any x for an integer ν. */
CR_API double cr_sf_besseli(double nu, double x);
/** K_ν(x) of real order, x > 0 (+inf at 0). */
CR_API double cr_sf_besselk(double nu, double x);
/** I_ν(x) e^-|x| (finite where I_ν overflows). */
CR_API double cr_sf_besselix(double nu, double x);
/** K_ν(x) e^x, x > 0 (nonzero where K_ν underflows). */
CR_API double cr_sf_besselkx(double nu, double x);
/** H1_ν(x) = J_ν(x) + i Y_ν(x), x > 0. */
CR_API cr_complex cr_sf_hankelh1(double nu, double x);
/** H2_ν(x) = J_ν(x) - i Y_ν(x), x > 0. */
CR_API cr_complex cr_sf_hankelh2(double nu, double x);
/** H1_ν(x) e^(-ix), x > 0. */
CR_API cr_complex cr_sf_hankelh1x(double nu, double x);
/** H2_ν(x) e^(ix), x > 0. */
CR_API cr_complex cr_sf_hankelh2x(double nu, double x);
/** The upper incomplete gamma function Γ(a, x): Γ(a) Q(a, x) for a > 0, x >= 0; for a <= 0,
 *  x > 0 (+inf at 0) Legendre's continued fraction above x = 1 and below it the power series
 *  at a + m in (-1/2, 1/2] and the recurrence down to a (NaN for a < -100000 there). */
CR_API double cr_sf_gamma_upper(double a, double x);
/** log Γ(a, x) for real a, x >= 0 (finite where Γ(a, x) overflows or underflows). */
CR_API double cr_sf_loggamma_upper(double a, double x);
/** The generalised exponential integral E_ν(x) of real order (see cr_fn_expint2). */
CR_API double cr_sf_expint2(double nu, double x);
/** e^x E_ν(x) (see cr_fn_expintx2). */
CR_API double cr_sf_expintx2(double nu, double x);

CR_END_DECLS

#endif /* CR_RULES_SPECIAL_H */
