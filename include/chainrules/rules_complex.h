/**
 * @file rules_complex.h
 * @brief The `<complex.h>` functions as function values, with ChainRules' complex
 *        convention.
 *
 * Each `cr_fn_NAME` is a `const cr_value` of kind CR_KIND_FUNC naming the C99 function
 * NAME (`cr_fn_csin` is csin, ...). They follow C's semantics: every argument is converted
 * to `double complex` (a real argument x becomes x + 0i, so a real argument on a branch
 * cut is on the side of +0), and the holomorphic functions and conj/cproj return a
 * complex value even for real arguments. cabs, carg, creal, cimag and abs2 return a double.
 * The generic rows cr_fn_sin, cr_fn_exp, ... of rules_math.h are other functions: they
 * also accept complex arguments but keep real arguments real (sqrt(-1.0) is NaN there,
 * csqrt(-1.0) is i here).
 *
 * **Convention** (ChainRules'): a complex number is the pair (re, im) and a function of
 * complex numbers is a map R^2 -> R^2 with a 2x2 real Jacobian J. The frule returns
 * J·(re ż, im ż); the pullback returns Jᵀ·(re ȳ, im ȳ). For a holomorphic f, J is
 * multiplication by f'(z), so the frule gives f'(z)·ż and the pullback gives
 * conj(f'(z))·ȳ. Worked example, exp at z = 1 + 2i: frule with ż = 1 gives exp(z), with
 * ż = i gives i·exp(z); the pullback of ȳ = 1 gives conj(exp(z)) = (J00, J01), the first
 * row of J. A real output (cabs, carg, creal, cimag, abs2) has a 1x2 Jacobian: its frule
 * gives a double and its pullback uses re ȳ only.
 *
 * Cotangents are projected onto the arguments: a double argument gets the real part of
 * its cotangent (a double), a float argument a float, an integer or bool NoTangent.
 *
 * **Branch cuts** are C99's (Annex G); on a cut, the sign of the zero imaginary (or, for
 * catan and casinh, real) part chooses the side, and the derivative is the limit from that
 * side, the derivative of the function C computes there. At branch points (casin at ±1,
 * clog at 0, ...) the derivative is infinite or NaN. See docs/rules-complex-special.md.
 *
 * @code
 * cr_value z = cr_value_c128(CMPLX(1.0, 2.0)), y;
 * cr_pullback pb;
 * cr_rrule(NULL, arena, &cr_fn_cexp, &z, 1, &y, &pb);
 * cr_tangent dy = cr_tangent_c128(1.0), dx[2];
 * cr_pullback_call(arena, &pb, &dy, dx, 2);   // dx[1] = conj(cexp(1 + 2i))
 * @endcode
 *
 * @note The function values are immutable and may be shared between threads.
 */
#ifndef CR_RULES_COMPLEX_H
#define CR_RULES_COMPLEX_H

#include "common.h"
#include "value.h"

CR_BEGIN_DECLS

/* ---- Holomorphic functions (pullback conj(f'(z))·ȳ) ----------------------------------- */

/** csin(z); f'(z) = ccos(z). */
CR_API extern const cr_value cr_fn_csin;
/** ccos(z); f'(z) = -csin(z). */
CR_API extern const cr_value cr_fn_ccos;
/** ctan(z); f'(z) = 1/ccos(z)² (= 1 + Ω², written without its cancellation). */
CR_API extern const cr_value cr_fn_ctan;
/** casin(z); f'(z) = 1/csqrt((1 - z)(1 + z)). Cuts: real axis, |re z| > 1. */
CR_API extern const cr_value cr_fn_casin;
/** cacos(z); f'(z) = -1/csqrt((1 - z)(1 + z)). Cuts: real axis, |re z| > 1. */
CR_API extern const cr_value cr_fn_cacos;
/** catan(z); f'(z) = 1/((z - i)(z + i)). Cuts: imaginary axis, |im z| > 1. */
CR_API extern const cr_value cr_fn_catan;
/** csinh(z); f'(z) = ccosh(z). */
CR_API extern const cr_value cr_fn_csinh;
/** ccosh(z); f'(z) = csinh(z). */
CR_API extern const cr_value cr_fn_ccosh;
/** ctanh(z); f'(z) = 1/ccosh(z)² (= 1 - Ω²). */
CR_API extern const cr_value cr_fn_ctanh;
/** casinh(z); f'(z) = 1/csqrt((1 - iz)(1 + iz)). Cuts: imaginary axis, |im z| > 1. */
CR_API extern const cr_value cr_fn_casinh;
/** cacosh(z); f'(z) = 1/(csqrt(z - 1)·csqrt(z + 1)). Cut: real axis, re z < 1. */
CR_API extern const cr_value cr_fn_cacosh;
/** catanh(z); f'(z) = 1/((1 - z)(1 + z)). Cuts: real axis, |re z| > 1. */
CR_API extern const cr_value cr_fn_catanh;
/** cexp(z); f'(z) = Ω. */
CR_API extern const cr_value cr_fn_cexp;
/** clog(z); f'(z) = 1/z. Cut: negative real axis. */
CR_API extern const cr_value cr_fn_clog;
/** csqrt(z); f'(z) = 1/(2Ω) (infinite at 0). Cut: negative real axis. */
CR_API extern const cr_value cr_fn_csqrt;
/**
 * cpow(z, w) = cexp(w·clog(z)); ∂/∂z = w·Ω/z, ∂/∂w = Ω·clog(z). Cut in z: negative real
 * axis. At z = 0: ∂/∂z is 1 for w = 1, 0 for re w > 1 (NaN otherwise), ∂/∂w is 0 for
 * re w > 0 (NaN otherwise).
 */
CR_API extern const cr_value cr_fn_cpow;
/** 1/z (Julia's inv); f'(z) = -Ω². */
CR_API extern const cr_value cr_fn_cinv;

/* ---- Non-holomorphic functions (written from their Jacobian) ------------------------- */

/**
 * cabs(z) = |z| (a double). J = [re z, im z]/|z|: frule re(conj(z)·ż)/|z|, pullback
 * z·re(ȳ)/|z|. At z = 0 both are zero (ChainRules' convention).
 */
CR_API extern const cr_value cr_fn_cabs;
/**
 * carg(z) = atan2(im z, re z) (a double). J = [-im z, re z]/|z|²: frule
 * im(conj(z)·ż)/|z|², pullback i·z·re(ȳ)/|z|². Zero at z = 0. The jump of the value
 * across the negative real axis does not affect the derivative.
 */
CR_API extern const cr_value cr_fn_carg;
/** conj(z). J = diag(1, -1): frule conj(ż), pullback conj(ȳ). */
CR_API extern const cr_value cr_fn_conj;
/** creal(z) (a double). J = [1, 0]: frule re ż, pullback re ȳ (as a complex number). */
CR_API extern const cr_value cr_fn_creal;
/** cimag(z) (a double). J = [0, 1]: frule im ż, pullback i·re ȳ. */
CR_API extern const cr_value cr_fn_cimag;
/**
 * cproj(z), the projection onto the Riemann sphere. J is the identity for finite z and
 * zero when a part of z is infinite (the value is then the constant ∞ + i·(±0)).
 */
CR_API extern const cr_value cr_fn_cproj;
/** abs2(z) = re² + im² (a double, Julia's abs2). J = 2[re z, im z]: frule
 *  2 re(conj(z)·ż), pullback 2·z·re(ȳ). */
CR_API extern const cr_value cr_fn_abs2;
/** `csign(z) = z/|z|` (Julia's sign of a complex number; 0 at 0): not holomorphic; frule
 *  (ż - Ω re(conj(Ω)ż))/|z|, and the same map for the pullback; zero at z = 0. */
CR_API extern const cr_value cr_fn_csign;
/** `chypot(z, w) = sqrt(|z|² + |w|²)` (Julia's hypot of complex numbers), real; frule
 *  re(conj(z)ż + conj(w)ẇ)/Ω, pullback (z, w) re(ȳ)/Ω; zero at z = w = 0. */
CR_API extern const cr_value cr_fn_chypot;

CR_END_DECLS

#endif /* CR_RULES_COMPLEX_H */
