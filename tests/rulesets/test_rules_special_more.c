/*
 * Tests of the second half of the special-function family (rules_special.h): Airy, Bessel of
 * real order, Hankel, dawson, erfi, logerfcx, invdigamma, expintx, expinti, sinint, cosint,
 * ellipk, ellipe, erf2, gamma_upper, loggamma_upper.
 *
 * Primals: against MPFR where MPFR has the function (mpfr_ai, mpfr_eint, mpfr_erf,
 * mpfr_erfc, mpfr_gamma_inc, mpfr_agm, mpfr_jn, mpfr_yn, mpfr_digamma) and otherwise against
 * series evaluated in MPFR at 512 bits here (power series of J, I, Airy, erfi, Si, Ci; the
 * Gauss AGM series of E), none of which is the algorithm of the C code. Derivatives: every
 * frule and pullback against adaptive finite differences of the primal (chainrules/fd.h),
 * never against the formulas of the rules. Also: the order gets NotImplemented (real) or
 * NoTangent (integer), the complex outputs of the Hankel functions follow the complex
 * convention (x̄ = real(conj(f') ȳ)), a float argument keeps float, bad input is refused.
 */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

typedef struct fixture {
    cr_ctx *ctx;
    cr_arena *arena;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || cr_ctx_new(NULL, &f->ctx) != CR_OK ||
        cr_arena_new(f->ctx, NULL, &f->arena) != CR_OK)
        return -1;
    cr_ctx_set_debug(f->ctx, true);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cr_arena_free(f->arena);
    cr_ctx_free(f->ctx);
    free(f);
    return 0;
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define PI_D     3.14159265358979323846

/* ---- Special values (exact or classical constants) --------------------------------------- */

static void test_special_values(void **state)
{
    (void)state;
    assert_true(fabs(cr_sf_airyai(0) - 0.35502805388781723926) < 1e-16);
    assert_true(fabs(cr_sf_airyaiprime(0) + 0.25881940379280679840) < 1e-16);
    assert_true(fabs(cr_sf_airybi(0) - 0.61492662744600073515) < 2e-16);
    assert_true(fabs(cr_sf_airybiprime(0) - 0.44828835735382635791) < 2e-16);
    assert_true(isnan(cr_sf_airyaix(-1.0)) && isnan(cr_sf_airyaiprimex(-1.0)));
    assert_true(cr_sf_dawson(0) == 0 && cr_sf_erfi(0) == 0 && cr_sf_sinint(0) == 0);
    assert_true(cr_sf_erfi(30.0) == HUGE_VAL && cr_sf_erfi(-30.0) == -HUGE_VAL);
    assert_true(cr_sf_cosint(0) == -HUGE_VAL && isnan(cr_sf_cosint(-1.0)));
    assert_true(cr_sf_expinti(0) == -HUGE_VAL && cr_sf_expintx(0) == HUGE_VAL);
    assert_true(isnan(cr_sf_expintx(-1.0)));
    /* K(0) = E(0) = pi/2, K(1) = inf, E(1) = 1, NaN beyond 1 */
    assert_true(fabs(cr_sf_ellipk(0) - PI_D / 2) < 4e-16 &&
                fabs(cr_sf_ellipe(0) - PI_D / 2) < 4e-16);
    assert_true(cr_sf_ellipk(1) == HUGE_VAL && cr_sf_ellipe(1) == 1);
    assert_true(isnan(cr_sf_ellipk(1.5)) && isnan(cr_sf_ellipe(1.5)));
    /* invdigamma(psi(1)) = 1; invdigamma is an inverse */
    assert_true(fabs(cr_sf_invdigamma(-0.5772156649015329) - 1) < 4e-16);
    for (double y = -20; y <= 20; y += 0.7)
        assert_true(fabs(cr_sf_digamma(cr_sf_invdigamma(y)) - y) <= 1e-14 * fmax(1, fabs(y)));
    /* J_1/2(x) = sqrt(2/(pi x)) sin x, Y_1/2 = -sqrt(2/(pi x)) cos x, K_1/2 = sqrt(pi/(2x)) e^-x */
    for (double x = 0.25; x < 60; x *= 1.7) {
        double w = sqrt(2 / (PI_D * x));
        assert_true(fabs(cr_sf_besselj(0.5, x) - w * sin(x)) < 2e-15 * w);
        assert_true(fabs(cr_sf_bessely(0.5, x) + w * cos(x)) < 2e-15 * w);
        assert_true(fabs(cr_sf_besselj(-0.5, x) - w * cos(x)) < 2e-15 * w);
        assert_true(fabs(cr_sf_besselkx(0.5, x) - sqrt(PI_D / (2 * x))) < 2e-15 * sqrt(PI_D / x));
    }
    /* Integer orders: J_n(-x) = (-1)^n J_n(x); non-integer orders are complex there */
    assert_true(cr_sf_besselj(3.0, -2.5) == -cr_sf_besselj(3.0, 2.5));
    assert_true(cr_sf_besseli(2.0, -2.5) == cr_sf_besseli(2.0, 2.5));
    assert_true(isnan(cr_sf_besselj(0.5, -1.0)) && isnan(cr_sf_bessely(1.0, -1.0)));
    assert_true(cr_sf_besselj(0, 0) == 1 && cr_sf_besselj(2.5, 0) == 0);
    assert_true(cr_sf_bessely(1.5, 0) == -HUGE_VAL && cr_sf_besselk(0.3, 0) == HUGE_VAL);
    /* Scaled forms stay finite where the unscaled overflow or underflow */
    assert_true(cr_sf_besseli(1.0, 800) == HUGE_VAL && isfinite(cr_sf_besselix(1.0, 800)));
    assert_true(cr_sf_besselk(1.0, 800) == 0 && cr_sf_besselkx(1.0, 800) > 0);
    /* Hankel functions: J ± iY */
    cr_complex h = cr_sf_hankelh1(1.3, 2.0);
    assert_true(creal(h) == cr_sf_besselj(1.3, 2.0) && cimag(h) == cr_sf_bessely(1.3, 2.0));
    h = cr_sf_hankelh2(1.3, 2.0);
    assert_true(creal(h) == cr_sf_besselj(1.3, 2.0) && cimag(h) == -cr_sf_bessely(1.3, 2.0));
    /* erf(x, y) = erf(y) - erf(x) */
    assert_true(cr_sf_erf2(0.3, 0.3) == 0 && cr_sf_erf2(-0.3, 0.3) == 2 * erf(0.3));
    /* Gamma(1, x) = e^-x */
    assert_true(fabs(cr_sf_gamma_upper(1.0, 2.0) - exp(-2.0)) < 4e-16 * exp(-2.0));
    assert_true(isnan(cr_sf_gamma_upper(-1.0, -2.0))); /* a <= 0: test_rules_special_partial.c */
}

/* ---- Primals against MPFR ----------------------------------------------------------------- */

#ifdef CR_HAVE_MPFR
#include <mpfr.h>

#define MP_PREC 512

typedef void (*mp_fn)(mpfr_t y, double a, double b);

/* sum_k sgn^k (x/2)^(2k+nu) / (k! Gamma(k+nu+1)) (DLMF 10.2.2, 10.25.2): J (sgn = -1) or
 * I (sgn = +1), at MP_PREC bits; nu not a negative integer. */
static void mp_bessel_series(mpfr_t y, double nu, double x, int sgn)
{
    mpfr_t h, t, g, k1;
    mpfr_inits2(MP_PREC, h, t, g, k1, (mpfr_ptr)0);
    mpfr_set_d(h, x / 2, MPFR_RNDN); /* x/2 exact */
    /* t = (x/2)^nu / Gamma(nu+1) */
    mpfr_set_d(t, nu, MPFR_RNDN);
    mpfr_pow(t, h, t, MPFR_RNDN);
    mpfr_set_d(g, nu, MPFR_RNDN);
    mpfr_add_ui(g, g, 1, MPFR_RNDN); /* nu + 1 exactly (not rounded to a double) */
    mpfr_gamma(g, g, MPFR_RNDN);
    mpfr_div(t, t, g, MPFR_RNDN);
    mpfr_set(y, t, MPFR_RNDN);
    mpfr_sqr(h, h, MPFR_RNDN);
    for (long k = 1; k < 2000; k++) {
        /* t *= sgn (x/2)² / (k (k + nu)) */
        mpfr_mul(t, t, h, MPFR_RNDN);
        mpfr_set_d(k1, nu, MPFR_RNDN);
        mpfr_add_si(k1, k1, k, MPFR_RNDN);
        mpfr_mul_si(k1, k1, k, MPFR_RNDN);
        mpfr_div(t, t, k1, MPFR_RNDN);
        if (sgn < 0)
            mpfr_neg(t, t, MPFR_RNDN);
        mpfr_add(y, y, t, MPFR_RNDN);
        if (k > x && !mpfr_zero_p(t) && !mpfr_zero_p(y) &&
            mpfr_get_exp(t) < mpfr_get_exp(y) - MP_PREC)
            break;
    }
    mpfr_clears(h, t, g, k1, (mpfr_ptr)0);
}

/* Y_nu = (J_nu cos(nu pi) - J_-nu)/sin(nu pi) and K_nu = pi/2 (I_-nu - I_nu)/sin(nu pi)
 * (DLMF 10.2.3, 10.27.4) for non-integer nu; mpfr_yn for integer orders. */
static void mp_cross(mpfr_t y, double nu, double x, int sgn)
{
    mpfr_t a, b, s, c;
    mpfr_inits2(MP_PREC, a, b, s, c, (mpfr_ptr)0);
    mp_bessel_series(a, nu, x, sgn);
    mp_bessel_series(b, -nu, x, sgn);
    mpfr_const_pi(s, MPFR_RNDN);
    mpfr_mul_d(s, s, nu, MPFR_RNDN);
    mpfr_sin_cos(s, c, s, MPFR_RNDN);
    if (sgn < 0) {
        mpfr_mul(a, a, c, MPFR_RNDN);
        mpfr_sub(y, a, b, MPFR_RNDN);
        mpfr_div(y, y, s, MPFR_RNDN);
    } else {
        mpfr_sub(y, b, a, MPFR_RNDN);
        mpfr_div(y, y, s, MPFR_RNDN);
        mpfr_const_pi(s, MPFR_RNDN);
        mpfr_mul(y, y, s, MPFR_RNDN);
        mpfr_div_2ui(y, y, 1, MPFR_RNDN);
    }
    mpfr_clears(a, b, s, c, (mpfr_ptr)0);
}

static bool is_int(double v)
{
    return v == nearbyint(v);
}

static void mp_besselj(mpfr_t y, double nu, double x)
{
    if (is_int(nu)) {
        mpfr_set_d(y, x, MPFR_RNDN);
        mpfr_jn(y, (long)nu, y, MPFR_RNDN);
    } else
        mp_bessel_series(y, nu, x, -1);
}

static void mp_bessely(mpfr_t y, double nu, double x)
{
    if (is_int(nu)) {
        mpfr_set_d(y, x, MPFR_RNDN);
        mpfr_yn(y, (long)nu, y, MPFR_RNDN);
    } else
        mp_cross(y, nu, x, -1);
}

static void mp_besseli(mpfr_t y, double nu, double x)
{
    mp_bessel_series(y, is_int(nu) ? fabs(nu) : nu, x, 1);
}

static void mp_besselk(mpfr_t y, double nu, double x)
{
    mp_cross(y, nu, x, 1);
}

static void mp_scale_exp(mpfr_t y, double x)
{
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_exp(t, t, MPFR_RNDN);
    mpfr_mul(y, y, t, MPFR_RNDN);
    mpfr_clear(t);
}

static void mp_besselix(mpfr_t y, double nu, double x)
{
    mp_besseli(y, nu, x);
    mp_scale_exp(y, -x);
}

static void mp_besselkx(mpfr_t y, double nu, double x)
{
    mp_besselk(y, nu, x);
    mp_scale_exp(y, x);
}

/* The Maclaurin series of the Airy functions (DLMF 9.4.1-9.4.4): which = 0 Ai, 1 Ai',
 * 2 Bi, 3 Bi'. Ai(0) = 3^(-2/3)/Gamma(2/3), -Ai'(0) = 3^(-1/3)/Gamma(1/3). */
static void mp_airy(mpfr_t y, double xd, int which)
{
    mpfr_t x, x3, f, g, t, u, c1, c2, tmp;
    mpfr_inits2(MP_PREC, x, x3, f, g, t, u, c1, c2, tmp, (mpfr_ptr)0);
    mpfr_set_d(x, xd, MPFR_RNDN);
    mpfr_pow_ui(x3, x, 3, MPFR_RNDN);
    bool deriv = which == 1 || which == 3;
    /* f = sum t_k, t_k = 3^k (1/3)_k x^(3k)/(3k)!; g = sum u_k, u_k = 3^k (2/3)_k x^(3k+1)/(3k+1)!;
     * the derivatives term by term. */
    mpfr_set_ui(t, 1, MPFR_RNDN);
    mpfr_set(u, x, MPFR_RNDN);
    mpfr_set_ui(f, deriv ? 0 : 1, MPFR_RNDN);
    if (deriv)
        mpfr_set_ui(g, 1, MPFR_RNDN);
    else
        mpfr_set(g, x, MPFR_RNDN);
    for (long k = 0; k < 400; k++) {
        mpfr_mul(t, t, x3, MPFR_RNDN);
        mpfr_div_si(t, t, (3 * k + 2) * (3 * k + 3), MPFR_RNDN);
        mpfr_mul(u, u, x3, MPFR_RNDN);
        mpfr_div_si(u, u, (3 * k + 3) * (3 * k + 4), MPFR_RNDN);
        if (deriv) { /* d/dx x^(3k+3) = (3k+3) x^(3k+2), d/dx x^(3k+4) = (3k+4) x^(3k+3) */
            mpfr_mul_si(tmp, t, 3 * k + 3, MPFR_RNDN);
            mpfr_div(tmp, tmp, x, MPFR_RNDN);
            mpfr_add(f, f, tmp, MPFR_RNDN);
            mpfr_mul_si(tmp, u, 3 * k + 4, MPFR_RNDN);
            mpfr_div(tmp, tmp, x, MPFR_RNDN);
            mpfr_add(g, g, tmp, MPFR_RNDN);
        } else {
            mpfr_add(f, f, t, MPFR_RNDN);
            mpfr_add(g, g, u, MPFR_RNDN);
        }
        if (k > 10 && !mpfr_zero_p(t) && mpfr_get_exp(t) < -MP_PREC - 40 &&
            mpfr_get_exp(u) < -MP_PREC - 40)
            break;
    }
    /* c1 = 3^(-2/3)/Gamma(2/3), c2 = 3^(-1/3)/Gamma(1/3) */
    mpfr_set_ui(tmp, 2, MPFR_RNDN);
    mpfr_div_ui(tmp, tmp, 3, MPFR_RNDN);
    mpfr_gamma(c1, tmp, MPFR_RNDN);
    mpfr_set_ui(c2, 3, MPFR_RNDN);
    mpfr_neg(tmp, tmp, MPFR_RNDN);
    mpfr_pow(c2, c2, tmp, MPFR_RNDN);
    mpfr_div(c1, c2, c1, MPFR_RNDN);
    mpfr_set_ui(tmp, 1, MPFR_RNDN);
    mpfr_div_ui(tmp, tmp, 3, MPFR_RNDN);
    mpfr_gamma(c2, tmp, MPFR_RNDN);
    mpfr_neg(tmp, tmp, MPFR_RNDN);
    mpfr_set_ui(t, 3, MPFR_RNDN);
    mpfr_pow(t, t, tmp, MPFR_RNDN);
    mpfr_div(c2, t, c2, MPFR_RNDN);
    mpfr_mul(f, f, c1, MPFR_RNDN);
    mpfr_mul(g, g, c2, MPFR_RNDN);
    if (which < 2)
        mpfr_sub(y, f, g, MPFR_RNDN);
    else {
        mpfr_add(y, f, g, MPFR_RNDN);
        mpfr_sqrt_ui(tmp, 3, MPFR_RNDN);
        mpfr_mul(y, y, tmp, MPFR_RNDN);
    }
    mpfr_clears(x, x3, f, g, t, u, c1, c2, tmp, (mpfr_ptr)0);
}

/* e^zeta, zeta = 2/3 x^(3/2) */
static void mp_airy_scale(mpfr_t y, double xd)
{
    mpfr_t z;
    mpfr_init2(z, MP_PREC);
    mpfr_set_d(z, xd, MPFR_RNDN);
    mpfr_sqrt(z, z, MPFR_RNDN);
    mpfr_mul_d(z, z, xd, MPFR_RNDN);
    mpfr_mul_ui(z, z, 2, MPFR_RNDN);
    mpfr_div_ui(z, z, 3, MPFR_RNDN);
    mpfr_exp(z, z, MPFR_RNDN);
    mpfr_mul(y, y, z, MPFR_RNDN);
    mpfr_clear(z);
}

static void mp_airyai(mpfr_t y, double x, double b)
{
    (void)b;
    mpfr_set_d(y, x, MPFR_RNDN);
    mpfr_ai(y, y, MPFR_RNDN);
}

static void mp_airyaiprime(mpfr_t y, double x, double b)
{
    (void)b;
    mp_airy(y, x, 1);
}

static void mp_airybi(mpfr_t y, double x, double b)
{
    (void)b;
    mp_airy(y, x, 2);
}

static void mp_airybiprime(mpfr_t y, double x, double b)
{
    (void)b;
    mp_airy(y, x, 3);
}

static void mp_airyaix(mpfr_t y, double x, double b)
{
    mp_airyai(y, x, b);
    mp_airy_scale(y, x);
}

/* e^-zeta for x > 0 */
static void mp_airy_unscale(mpfr_t y, double xd)
{
    mpfr_t z;
    mpfr_init2(z, MP_PREC);
    mpfr_set_d(z, xd, MPFR_RNDN);
    mpfr_sqrt(z, z, MPFR_RNDN);
    mpfr_mul_d(z, z, xd, MPFR_RNDN);
    mpfr_mul_ui(z, z, 2, MPFR_RNDN);
    mpfr_div_ui(z, z, 3, MPFR_RNDN);
    mpfr_neg(z, z, MPFR_RNDN);
    mpfr_exp(z, z, MPFR_RNDN);
    mpfr_mul(y, y, z, MPFR_RNDN);
    mpfr_clear(z);
}

static void mp_airybix(mpfr_t y, double x, double b)
{
    (void)b;
    mp_airy(y, x, 2);
    if (x > 0)
        mp_airy_unscale(y, x);
}

static void mp_airybiprimex(mpfr_t y, double x, double b)
{
    (void)b;
    mp_airy(y, x, 3);
    if (x > 0)
        mp_airy_unscale(y, x);
}

static void mp_airyaiprimex(mpfr_t y, double x, double b)
{
    (void)b;
    mp_airy(y, x, 1);
    mp_airy_scale(y, x);
}

/* erfi(x) = 2/sqrt(pi) sum x^(2k+1)/(k! (2k+1)) (DLMF 7.6.7 at ix) */
static void mp_erfi(mpfr_t y, double xd, double b)
{
    (void)b;
    mpfr_t x2, t, u;
    mpfr_inits2(MP_PREC, x2, t, u, (mpfr_ptr)0);
    mpfr_set_d(t, xd, MPFR_RNDN);
    mpfr_sqr(x2, t, MPFR_RNDN);
    mpfr_set(y, t, MPFR_RNDN);
    for (long k = 1; k < 5000; k++) {
        mpfr_mul(t, t, x2, MPFR_RNDN);
        mpfr_div_si(t, t, k, MPFR_RNDN);
        mpfr_div_si(u, t, 2 * k + 1, MPFR_RNDN);
        mpfr_add(y, y, u, MPFR_RNDN);
        if (k > xd * xd && mpfr_get_exp(u) < mpfr_get_exp(y) - MP_PREC)
            break;
    }
    mpfr_const_pi(t, MPFR_RNDN);
    mpfr_sqrt(t, t, MPFR_RNDN);
    mpfr_div(y, y, t, MPFR_RNDN);
    mpfr_mul_ui(y, y, 2, MPFR_RNDN);
    mpfr_clears(x2, t, u, (mpfr_ptr)0);
}

/* dawson(x) = sqrt(pi)/2 e^(-x²) erfi(x) */
static void mp_dawson(mpfr_t y, double xd, double b)
{
    mp_erfi(y, xd, b);
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_const_pi(t, MPFR_RNDN);
    mpfr_sqrt(t, t, MPFR_RNDN);
    mpfr_mul(y, y, t, MPFR_RNDN);
    mpfr_div_2ui(y, y, 1, MPFR_RNDN);
    mpfr_set_d(t, xd, MPFR_RNDN);
    mpfr_sqr(t, t, MPFR_RNDN);
    mpfr_neg(t, t, MPFR_RNDN);
    mpfr_exp(t, t, MPFR_RNDN);
    mpfr_mul(y, y, t, MPFR_RNDN);
    mpfr_clear(t);
}

static void mp_logerfcx(mpfr_t y, double xd, double b)
{
    (void)b;
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_set_d(t, xd, MPFR_RNDN);
    mpfr_erfc(y, t, MPFR_RNDN);
    mpfr_log(y, y, MPFR_RNDN);
    mpfr_sqr(t, t, MPFR_RNDN);
    mpfr_add(y, y, t, MPFR_RNDN);
    mpfr_clear(t);
}

/* E1(x) e^x = -Ei(-x) e^x */
static void mp_expintx(mpfr_t y, double xd, double b)
{
    (void)b;
    mpfr_set_d(y, -xd, MPFR_RNDN);
    mpfr_eint(y, y, MPFR_RNDN);
    mpfr_neg(y, y, MPFR_RNDN);
    mp_scale_exp(y, xd);
}

static void mp_expinti(mpfr_t y, double xd, double b)
{
    (void)b;
    mpfr_set_d(y, xd, MPFR_RNDN);
    mpfr_eint(y, y, MPFR_RNDN);
}

/* Si (cos_part = false): sum (-1)^k x^(2k+1)/((2k+1)(2k+1)!); Ci: gamma + log x +
 * sum_(k>=1) (-1)^k x^(2k)/(2k (2k)!) (DLMF 6.6.5, 6.6.6). */
static void mp_sici(mpfr_t y, double xd, bool cos_part)
{
    mpfr_t x2, t, u;
    mpfr_inits2(MP_PREC, x2, t, u, (mpfr_ptr)0);
    mpfr_set_d(t, xd, MPFR_RNDN);
    mpfr_sqr(x2, t, MPFR_RNDN);
    if (cos_part) {
        mpfr_set_ui(t, 1, MPFR_RNDN);
        mpfr_set_ui(y, 0, MPFR_RNDN);
    } else
        mpfr_set(y, t, MPFR_RNDN);
    for (long k = 1; k < 5000; k++) {
        long m = cos_part ? 2 * k : 2 * k + 1; /* the power of this term */
        mpfr_mul(t, t, x2, MPFR_RNDN);
        mpfr_div_si(t, t, -(m - 1) * m, MPFR_RNDN);
        mpfr_div_si(u, t, m, MPFR_RNDN);
        mpfr_add(y, y, u, MPFR_RNDN);
        if (k > fabs(xd) && mpfr_get_exp(u) < mpfr_get_exp(y) - MP_PREC)
            break;
    }
    if (cos_part) {
        mpfr_const_euler(t, MPFR_RNDN);
        mpfr_add(y, y, t, MPFR_RNDN);
        mpfr_set_d(t, xd, MPFR_RNDN);
        mpfr_log(t, t, MPFR_RNDN);
        mpfr_add(y, y, t, MPFR_RNDN);
    }
    mpfr_clears(x2, t, u, (mpfr_ptr)0);
}

static void mp_sinint(mpfr_t y, double x, double b)
{
    (void)b;
    mp_sici(y, x, false);
}

static void mp_cosint(mpfr_t y, double x, double b)
{
    (void)b;
    mp_sici(y, x, true);
}

/* K(m) = pi / (2 AGM(1, sqrt(1-m))) (DLMF 19.8.5); with `e`, E(m) = K(m) (1 - sum_n 2^(n-1)
 * c_n²), c_0² = m, c_(n+1) = (a_n - b_n)/2 (DLMF 19.8.6), both with MPFR's arithmetic. */
static void mp_ellip(mpfr_t y, double md, bool e)
{
    mpfr_t a, b, c, s, t, p;
    mpfr_inits2(MP_PREC, a, b, c, s, t, p, (mpfr_ptr)0);
    mpfr_set_ui(a, 1, MPFR_RNDN);
    mpfr_set_d(b, md, MPFR_RNDN);
    mpfr_ui_sub(b, 1, b, MPFR_RNDN);
    mpfr_sqrt(b, b, MPFR_RNDN);
    mpfr_set_d(s, md, MPFR_RNDN); /* 2^-1 c_0² accumulated as sum 2^(n-1) c_n² */
    mpfr_div_2ui(s, s, 1, MPFR_RNDN);
    mpfr_set_ui(p, 1, MPFR_RNDN); /* 2^(n-1) at n = 1 */
    for (int n = 1; n < 200; n++) {
        mpfr_sub(c, a, b, MPFR_RNDN);
        mpfr_div_2ui(c, c, 1, MPFR_RNDN);
        mpfr_mul(t, a, b, MPFR_RNDN);
        mpfr_add(a, a, b, MPFR_RNDN);
        mpfr_div_2ui(a, a, 1, MPFR_RNDN);
        mpfr_sqrt(b, t, MPFR_RNDN);
        mpfr_sqr(t, c, MPFR_RNDN);
        mpfr_mul(t, t, p, MPFR_RNDN);
        mpfr_add(s, s, t, MPFR_RNDN);
        mpfr_mul_2ui(p, p, 1, MPFR_RNDN);
        if (mpfr_zero_p(c) || mpfr_get_exp(c) < -MP_PREC)
            break;
    }
    mpfr_const_pi(y, MPFR_RNDN);
    mpfr_div(y, y, a, MPFR_RNDN);
    mpfr_div_2ui(y, y, 1, MPFR_RNDN);
    if (e) {
        mpfr_ui_sub(s, 1, s, MPFR_RNDN);
        mpfr_mul(y, y, s, MPFR_RNDN);
    }
    mpfr_clears(a, b, c, s, t, p, (mpfr_ptr)0);
}

static void mp_ellipk(mpfr_t y, double m, double b)
{
    (void)b;
    mp_ellip(y, m, false);
}

static void mp_ellipe(mpfr_t y, double m, double b)
{
    (void)b;
    mp_ellip(y, m, true);
}

static void mp_erf2(mpfr_t y, double a, double b)
{
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_set_d(t, a, MPFR_RNDN);
    mpfr_erf(t, t, MPFR_RNDN);
    mpfr_set_d(y, b, MPFR_RNDN);
    mpfr_erf(y, y, MPFR_RNDN);
    mpfr_sub(y, y, t, MPFR_RNDN);
    mpfr_clear(t);
}

static void mp_gamma_upper(mpfr_t y, double a, double x)
{
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_set_d(t, a, MPFR_RNDN);
    mpfr_set_d(y, x, MPFR_RNDN);
    mpfr_gamma_inc(y, t, y, MPFR_RNDN);
    mpfr_clear(t);
}

static void mp_loggamma_upper(mpfr_t y, double a, double x)
{
    mp_gamma_upper(y, a, x);
    mpfr_log(y, y, MPFR_RNDN);
}

/* The x with digamma(x) = y: the double result v refined by Newton's method at MP_PREC
 * bits with mpfr_digamma, the derivative by a difference of step 2^-200 v. */
static void mp_invdigamma(mpfr_t r, double yd, double b)
{
    (void)b;
    mpfr_t x, f, g, h;
    mpfr_inits2(MP_PREC, x, f, g, h, (mpfr_ptr)0);
    mpfr_set_d(x, cr_sf_invdigamma(yd), MPFR_RNDN);
    for (int it = 0; it < 4; it++) {
        mpfr_digamma(f, x, MPFR_RNDN);
        mpfr_sub_d(f, f, yd, MPFR_RNDN);
        mpfr_div_2ui(h, x, 200, MPFR_RNDN);
        mpfr_add(g, x, h, MPFR_RNDN);
        mpfr_digamma(g, g, MPFR_RNDN);
        mpfr_sub_d(g, g, yd, MPFR_RNDN);
        mpfr_sub(g, g, f, MPFR_RNDN);
        mpfr_div(g, g, h, MPFR_RNDN);
        mpfr_div(f, f, g, MPFR_RNDN);
        mpfr_sub(x, x, f, MPFR_RNDN);
    }
    mpfr_set(r, x, MPFR_RNDN);
    mpfr_clears(x, f, g, h, (mpfr_ptr)0);
}

static void mp_besselj2(mpfr_t y, double a, double b)
{
    mp_besselj(y, a, b);
}
static void mp_bessely2(mpfr_t y, double a, double b)
{
    mp_bessely(y, a, b);
}
static void mp_besseli2(mpfr_t y, double a, double b)
{
    mp_besseli(y, a, b);
}
static void mp_besselk2(mpfr_t y, double a, double b)
{
    mp_besselk(y, a, b);
}

typedef struct named {
    const char *name;
    double (*f1)(double);
    double (*f2)(double, double);
} named;

static const named k_named[] = {
    {"airyai", cr_sf_airyai, NULL},
    {"airyaiprime", cr_sf_airyaiprime, NULL},
    {"airybi", cr_sf_airybi, NULL},
    {"airybiprime", cr_sf_airybiprime, NULL},
    {"airyaix", cr_sf_airyaix, NULL},
    {"airyaiprimex", cr_sf_airyaiprimex, NULL},
    {"airybix", cr_sf_airybix, NULL},
    {"airybiprimex", cr_sf_airybiprimex, NULL},
    {"dawson", cr_sf_dawson, NULL},
    {"erfi", cr_sf_erfi, NULL},
    {"logerfcx", cr_sf_logerfcx, NULL},
    {"invdigamma", cr_sf_invdigamma, NULL},
    {"expintx", cr_sf_expintx, NULL},
    {"expinti", cr_sf_expinti, NULL},
    {"sinint", cr_sf_sinint, NULL},
    {"cosint", cr_sf_cosint, NULL},
    {"ellipk", cr_sf_ellipk, NULL},
    {"ellipe", cr_sf_ellipe, NULL},
    {"erf2", NULL, cr_sf_erf2},
    {"besselj", NULL, cr_sf_besselj},
    {"bessely", NULL, cr_sf_bessely},
    {"besseli", NULL, cr_sf_besseli},
    {"besselk", NULL, cr_sf_besselk},
    {"besselix", NULL, cr_sf_besselix},
    {"besselkx", NULL, cr_sf_besselkx},
    {"gamma_upper", NULL, cr_sf_gamma_upper},
    {"loggamma_upper", NULL, cr_sf_loggamma_upper},
};

static double eval_named(const char *fn, double a, double b)
{
    for (size_t i = 0; i < NELEM(k_named); i++)
        if (!strcmp(k_named[i].name, fn))
            return k_named[i].f1 != NULL ? k_named[i].f1(a) : k_named[i].f2(a, b);
    fail_msg("unknown function %s", fn);
    return 0;
}

static double sweep_point(uint64_t *s, double lo, double hi, bool log_scale)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    double u = (double)(*s >> 11) * 0x1.0p-53;
    return log_scale ? exp(log(lo) + u * (log(hi) - log(lo))) : lo + u * (hi - lo);
}

typedef struct sweep {
    const char *fn;
    mp_fn ref;
    double lo[2], hi[2];
    bool log_scale[2];
    int order;    /* 1: the first argument is an order kept 0.02 away from the integers; 2:
                     an integer order */
    double rtol;  /* bound on |v - r| / max(|r|, floor · amp) */
    double floor; /* where absolute error takes over (zeros of the function) */
    bool amp;     /* the floor is relative to sqrt(2/(pi x)) (oscillating Bessel functions) */
} sweep;

static void test_primals_mpfr(void **state)
{
    (void)state;
    static const sweep sweeps[] = {
        {"airyai", mp_airyai, {-12, 0}, {0, 0}, {false, false}, 0, 3e-14, 0.1, false},
        {"airyai", mp_airyai, {1e-3, 0}, {12, 0}, {true, false}, 0, 3e-15, 0, false},
        {"airyaiprime", mp_airyaiprime, {-12, 0}, {6, 0}, {false, false}, 0, 6e-14, 0.1, false},
        {"airybi", mp_airybi, {-12, 0}, {12, 0}, {false, false}, 0, 3e-14, 0.1, false},
        {"airybiprime", mp_airybiprime, {-12, 0}, {12, 0}, {false, false}, 0, 6e-14, 0.1, false},
        {"airyaix", mp_airyaix, {1e-3, 0}, {40, 0}, {true, false}, 0, 2e-15, 0, false},
        {"airyaiprimex", mp_airyaiprimex, {1e-3, 0}, {10, 0}, {true, false}, 0, 2e-15, 0, false},
        {"airybix", mp_airybix, {1e-3, 0}, {14, 0}, {true, false}, 0, 3e-15, 0, false},
        {"airybiprimex", mp_airybiprimex, {1e-3, 0}, {14, 0}, {true, false}, 0, 3e-15, 0, false},
        {"airybix", mp_airybix, {-12, 0}, {0, 0}, {false, false}, 0, 3e-14, 0.1, false},
        {"dawson", mp_dawson, {-12, 0}, {12, 0}, {false, false}, 0, 6e-15, 0, false},
        {"dawson", mp_dawson, {1e-4, 0}, {60, 0}, {true, false}, 0, 6e-15, 0, false},
        {"erfi", mp_erfi, {-26, 0}, {26, 0}, {false, false}, 0, 6e-15, 0, false},
        {"logerfcx", mp_logerfcx, {-30, 0}, {30, 0}, {false, false}, 0, 2e-15, 0, false},
        {"logerfcx", mp_logerfcx, {1e-6, 0}, {1e4, 0}, {true, false}, 0, 2e-15, 0, false},
        {"invdigamma", mp_invdigamma, {-30, 0}, {30, 0}, {false, false}, 0, 6e-15, 0, false},
        {"expintx", mp_expintx, {1e-6, 0}, {700, 0}, {true, false}, 0, 3e-15, 0, false},
        {"expinti", mp_expinti, {-50, 0}, {50, 0}, {false, false}, 0, 3e-15, 0, false},
        {"expinti", mp_expinti, {0.1, 0}, {1, 0}, {false, false}, 0, 3e-15, 0, false},
        {"expinti", mp_expinti, {1e-6, 0}, {700, 0}, {true, false}, 0, 3e-15, 0, false},
        {"sinint", mp_sinint, {-40, 0}, {40, 0}, {false, false}, 0, 2e-15, 0, false},
        {"cosint", mp_cosint, {1e-6, 0}, {40, 0}, {true, false}, 0, 1e-14, 0.2, false},
        {"ellipk", mp_ellipk, {-100, 0}, {0.999999, 0}, {false, false}, 0, 2e-15, 0, false},
        {"ellipe", mp_ellipe, {-100, 0}, {1, 0}, {false, false}, 0, 2e-15, 0, false},
        {"erf2", mp_erf2, {-6, -6}, {6, 6}, {false, false}, 0, 4e-15, 0, false},
        {"besselj", mp_besselj2, {-4.5, 0.01}, {4.5, 24}, {false, false}, 1, 1.5e-14, 1, true},
        {"besselj", mp_besselj2, {0, 25}, {4.5, 100}, {false, false}, 1, 1.5e-14, 1, true},
        {"besselj", mp_besselj2, {-6, 0.01}, {12, 60}, {false, false}, 2, 1.5e-14, 1, true},
        {"bessely", mp_bessely2, {-4.5, 0.01}, {4.5, 24}, {false, false}, 1, 1.5e-14, 1, true},
        {"bessely", mp_bessely2, {0, 25}, {4.5, 100}, {false, false}, 1, 1.5e-14, 1, true},
        {"bessely", mp_bessely2, {0, 0.5}, {12, 60}, {false, false}, 2, 1.5e-14, 1, true},
        {"besseli", mp_besseli2, {-4.5, 0.01}, {30, 40}, {false, false}, 1, 2e-14, 0, false},
        {"besselk", mp_besselk2, {-4.5, 0.01}, {30, 40}, {false, false}, 1, 2e-14, 0, false},
        {"besselix", mp_besselix, {0, 0.01}, {30, 200}, {false, false}, 1, 2e-14, 0, false},
        {"besselkx", mp_besselkx, {0, 0.01}, {30, 40}, {false, false}, 1, 2e-14, 0, false},
        {"gamma_upper", mp_gamma_upper, {0.05, 0.01}, {30, 60}, {true, true}, 0, 3e-14, 0, false},
        {"loggamma_upper",
         mp_loggamma_upper,
         {0.05, 0.01},
         {30, 60},
         {true, true},
         0,
         3e-14,
         1,
         false},
    };
    mpfr_t r;
    mpfr_init2(r, MP_PREC);
    int bad = 0;
    for (size_t i = 0; i < NELEM(sweeps); i++) {
        const sweep *sw = &sweeps[i];
        uint64_t seed = 4242 + i;
        double worst = 0, wa = 0, wb = 0;
        for (int k = 0; k < 100; k++) {
            double a = sweep_point(&seed, sw->lo[0], sw->hi[0], sw->log_scale[0]);
            double b = sweep_point(&seed, sw->lo[1], sw->hi[1], sw->log_scale[1]);
            if (sw->order == 2)
                a = nearbyint(a);
            else if (sw->order == 1 && fabs(a - nearbyint(a)) < 0.02)
                a += 0.05;
            sw->ref(r, a, b);
            double want = mpfr_get_d(r, MPFR_RNDN);
            double v = eval_named(sw->fn, a, b);
            double floor = sw->amp ? sw->floor * sqrt(2 / (PI_D * b)) : sw->floor;
            double e = v == want ? 0 : fabs(v - want) / fmax(fabs(want), floor);
            if (!(e <= worst)) {
                worst = e;
                wa = a;
                wb = b;
            }
        }
        print_message("MPFR %-14s max error %.3g at (%.17g, %.17g) [bound %.3g]\n", sw->fn, worst,
                      wa, wb, sw->rtol);
        if (!(worst <= sw->rtol))
            bad++;
    }
    mpfr_clear(r);
    mpfr_free_cache();
    assert_int_equal(bad, 0);
}

/* E1(z) = -gamma - log z - sum_(k>=1) (-z)^k/(k k!) (DLMF 6.6.2) in MPFR's arithmetic on the
 * real and imaginary parts, for the complex expint; *re, *im the rounded parts. */
static void mp_expint_complex(double x, double y, double *re, double *im)
{
    mpfr_t tr, ti, sr, si, zr, zi, a, b, u;
    mpfr_inits2(MP_PREC, tr, ti, sr, si, zr, zi, a, b, u, (mpfr_ptr)0);
    mpfr_set_d(zr, -x, MPFR_RNDN); /* w = -z */
    mpfr_set_d(zi, -y, MPFR_RNDN);
    mpfr_set_ui(tr, 1, MPFR_RNDN); /* t = w^k / k! */
    mpfr_set_ui(ti, 0, MPFR_RNDN);
    mpfr_set_ui(sr, 0, MPFR_RNDN);
    mpfr_set_ui(si, 0, MPFR_RNDN);
    for (long k = 1; k < 3000; k++) {
        /* t = t w / k */
        mpfr_mul(a, tr, zr, MPFR_RNDN);
        mpfr_mul(b, ti, zi, MPFR_RNDN);
        mpfr_sub(u, a, b, MPFR_RNDN);
        mpfr_mul(a, tr, zi, MPFR_RNDN);
        mpfr_mul(b, ti, zr, MPFR_RNDN);
        mpfr_add(ti, a, b, MPFR_RNDN);
        mpfr_set(tr, u, MPFR_RNDN);
        mpfr_div_si(tr, tr, k, MPFR_RNDN);
        mpfr_div_si(ti, ti, k, MPFR_RNDN);
        mpfr_div_si(a, tr, k, MPFR_RNDN);
        mpfr_div_si(b, ti, k, MPFR_RNDN);
        mpfr_add(sr, sr, a, MPFR_RNDN);
        mpfr_add(si, si, b, MPFR_RNDN);
        if (k > 3 * hypot(x, y) + 10 && mpfr_get_exp(a) < -MP_PREC && mpfr_get_exp(b) < -MP_PREC)
            break;
    }
    /* - gamma - log|z| - s_r ; - arg z - s_i */
    mpfr_set_d(a, x, MPFR_RNDN);
    mpfr_set_d(b, y, MPFR_RNDN);
    mpfr_hypot(u, a, b, MPFR_RNDN);
    mpfr_log(u, u, MPFR_RNDN);
    mpfr_const_euler(tr, MPFR_RNDN);
    mpfr_add(u, u, tr, MPFR_RNDN);
    mpfr_add(u, u, sr, MPFR_RNDN);
    *re = -mpfr_get_d(u, MPFR_RNDN);
    mpfr_atan2(u, b, a, MPFR_RNDN);
    mpfr_add(u, u, si, MPFR_RNDN);
    *im = -mpfr_get_d(u, MPFR_RNDN);
    mpfr_clears(tr, ti, sr, si, zr, zi, a, b, u, (mpfr_ptr)0);
}

static void test_expint_complex_mpfr(void **state)
{
    (void)state;
    uint64_t seed = 777;
    double worst = 0, wx = 0, wy = 0;
    for (int k = 0; k < 300; k++) {
        double x = sweep_point(&seed, -20, 20, false), y = sweep_point(&seed, -20, 20, false);
        if (k % 4 == 0)
            y *= 1e-4; /* near the cut and the positive axis */
        double re, im;
        mp_expint_complex(x, y, &re, &im);
        cr_complex v = cr_sf_expint_complex(CMPLX(x, y));
        double e = cabs(v - CMPLX(re, im)) / cabs(CMPLX(re, im));
        if (!(e <= worst)) {
            worst = e;
            wx = x;
            wy = y;
        }
    }
    print_message("MPFR expint(complex) max error %.3g at (%.17g, %.17g)\n", worst, wx, wy);
    assert_true(worst < 6e-15);
    /* On the cut: E1(-x ± 0i) = -Ei(x) ∓ i pi, from mpfr_eint. */
    mpfr_t r;
    mpfr_init2(r, MP_PREC);
    for (double x = 0.5; x < 40; x *= 1.9) {
        mpfr_set_d(r, x, MPFR_RNDN);
        mpfr_eint(r, r, MPFR_RNDN);
        double want = -mpfr_get_d(r, MPFR_RNDN);
        cr_complex up = cr_sf_expint_complex(CMPLX(-x, 0.0)),
                   down = cr_sf_expint_complex(CMPLX(-x, -0.0));
        assert_true(fabs(creal(up) - want) <= 4e-15 * fabs(want));
        assert_true(creal(down) == creal(up) && cimag(up) == -PI_D && cimag(down) == PI_D);
    }
    mpfr_clear(r);
    mpfr_free_cache();
}
#endif /* CR_HAVE_MPFR */

/* ---- Derivatives against finite differences ---------------------------------------------- */

/* A real function of t for the FD engine: f1(x + t), f2 with argument k moved by t, or the
 * real part of conj(c) h(nu, x + t) for the complex-valued h. */
typedef struct fd_env {
    double (*f1)(double);
    double (*f2)(double, double);
    cr_complex (*h)(double, double);
    cr_complex c;
    double args[2];
    size_t k;
} fd_env;

static cr_status fd_fn(double t, double *y, void *env)
{
    const fd_env *e = env;
    double a[2] = {e->args[0], e->args[1]};
    a[e->k] += t;
    if (e->f1 != NULL)
        *y = e->f1(a[0]);
    else if (e->f2 != NULL)
        *y = e->f2(a[0], a[1]);
    else
        *y = creal(conj(e->c) * e->h(a[0], a[1]));
    return isfinite(*y) ? CR_OK : CR_EDOMAIN;
}

/* ∂/∂(argument k) by an adaptive 5-point central difference within `range`; *tol is the
 * tolerance of the comparison. */
static double fd_partial(fd_env *e, size_t k, double range, double *tol)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    cr_fd_opts opts = {0};
    opts.max_range = range;
    e->k = k;
    double d = 0, err = 0;
    cr_status st = cr_fd_derivative(&m, &opts, fd_fn, e, 0.0, &d, &err);
    if (st != CR_OK)
        fail_msg("finite differences failed: %s", cr_status_name(st));
    *tol = 1e-8 * fmax(1.0, fabs(d)) + 20 * err;
    return d;
}

static void check_close(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s: got %.17g, finite differences %.17g (|diff| %.3g > %.3g)", what, got, want,
                 fabs(got - want), tol);
}

typedef struct point1 {
    double x, range;
} point1;

/* frule (unit tangent) and pullback (of 1) of a one-argument row against differences. */
static void check_unary(fixture *fx, const cr_value *f, double (*prim)(double), const char *name,
                        const point1 *pts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fd_env e = {.f1 = prim, .args = {pts[i].x, 0}};
        double tol = 0, d = fd_partial(&e, 0, pts[i].range, &tol);
        cr_value x = cr_value_f64(pts[i].x), y;
        cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(1.0)}, dy, dx[2];
        char what[120];
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, f, &x, 1, &y, &dy), CR_OK);
        assert_int_equal(dy.tag, CR_TAN_F64);
        assert_true(y.u.f64 == prim(pts[i].x));
        snprintf(what, sizeof what, "%s frule at %.17g", name, pts[i].x);
        check_close(dy.u.f64, d, tol, what);
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, f, &x, 1, &y, &pb), CR_OK);
        cr_tangent g = cr_tangent_f64(1.0);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 2), CR_OK);
        assert_int_equal(dx[1].tag, CR_TAN_F64);
        snprintf(what, sizeof what, "%s pullback at %.17g", name, pts[i].x);
        check_close(dx[1].u.f64, d, tol, what);
        cr_arena_reset(fx->arena);
    }
}

static void test_airy(void **state)
{
    /* Both sides of |x| = 1 (series / Bessel functions), 0, a zero of Ai, large |x|. */
    static const point1 pts[] = {{0.0, 0.1},
                                 {0.5, 0.1},
                                 {-0.999, 1e-3},
                                 {-1.001, 1e-3},
                                 {0.999, 1e-3},
                                 {1.001, 1e-3},
                                 {-2.338107410459767, 0.05},
                                 {3.5, 0.1},
                                 {-7.25, 0.1},
                                 {12.0, 0.25}};
    check_unary(*state, &cr_fn_airyai, cr_sf_airyai, "airyai", pts, NELEM(pts));
    check_unary(*state, &cr_fn_airyaiprime, cr_sf_airyaiprime, "airyaiprime", pts, NELEM(pts));
    check_unary(*state, &cr_fn_airybi, cr_sf_airybi, "airybi", pts, NELEM(pts));
    check_unary(*state, &cr_fn_airybiprime, cr_sf_airybiprime, "airybiprime", pts, NELEM(pts));
    static const point1 pos[] = {{0.05, 0.01}, {0.999, 1e-3}, {1.001, 1e-3},
                                 {4.0, 0.25},  {60.0, 1.0},   {2e3, 10.0}};
    check_unary(*state, &cr_fn_airyaix, cr_sf_airyaix, "airyaix", pos, NELEM(pos));
    check_unary(*state, &cr_fn_airyaiprimex, cr_sf_airyaiprimex, "airyaiprimex", pos, NELEM(pos));
    check_unary(*state, &cr_fn_airybix, cr_sf_airybix, "airybix", pos, NELEM(pos));
    check_unary(*state, &cr_fn_airybiprimex, cr_sf_airybiprimex, "airybiprimex", pos, NELEM(pos));
    /* For x < 0 the scale of Bi is 1: airybix is Bi there. */
    static const point1 neg[] = {{-0.5, 0.1}, {-3.0, 0.1}, {-9.0, 0.1}};
    check_unary(*state, &cr_fn_airybix, cr_sf_airybix, "airybix", neg, NELEM(neg));
    check_unary(*state, &cr_fn_airybiprimex, cr_sf_airybiprimex, "airybiprimex", neg, NELEM(neg));
    assert_true(cr_sf_airybix(-2.5) == cr_sf_airybi(-2.5));
}

static void test_error_function_relatives(void **state)
{
    /* Both sides of 7 (series / asymptotic expansion). */
    static const point1 dw[] = {{0.0, 0.1},    {0.9241388730, 0.1}, {-2.5, 0.1},
                                {6.999, 1e-3}, {7.001, 1e-3},       {30.0, 1.0}};
    check_unary(*state, &cr_fn_dawson, cr_sf_dawson, "dawson", dw, NELEM(dw));
    static const point1 ei[] = {{0.0, 0.1},    {1.5, 0.1},    {-3.0, 0.1},
                                {6.999, 1e-3}, {7.001, 1e-3}, {20.0, 0.1}};
    check_unary(*state, &cr_fn_erfi, cr_sf_erfi, "erfi", ei, NELEM(ei));
    /* The switches at -6, +-0.5 and 2 (inside erfcx), large |x|. */
    static const point1 lx[] = {{-30.0, 0.5},   {-6.001, 1e-3}, {-5.999, 1e-3}, {-0.501, 1e-3},
                                {-0.499, 1e-3}, {0.0, 0.1},     {0.501, 1e-3},  {1.99, 5e-3},
                                {2.01, 5e-3},   {300.0, 1.0}};
    check_unary(*state, &cr_fn_logerfcx, cr_sf_logerfcx, "logerfcx", lx, NELEM(lx));
    static const point1 inv[] = {{-40.0, 0.5}, {-2.22, 0.05}, {-0.5772156649015329, 0.1},
                                 {0.0, 0.1},   {3.0, 0.1},    {25.0, 0.5}};
    check_unary(*state, &cr_fn_invdigamma, cr_sf_invdigamma, "invdigamma", inv, NELEM(inv));
}

static void test_integrals(void **state)
{
    static const point1 ex[] = {{1e-3, 1e-4}, {0.999, 1e-3}, {1.001, 1e-3},
                                {40.0, 0.5},  {699.0, 1.0},  {701.0, 1.0}};
    check_unary(*state, &cr_fn_expintx, cr_sf_expintx, "expintx", ex, NELEM(ex));
    /* The zero of Ei and the switches at 0.2, 0.6 and 50; negative x. */
    static const point1 ei[] = {{0.3725074107813666, 0.05},
                                {0.199, 1e-3},
                                {0.201, 1e-3},
                                {0.599, 1e-3},
                                {0.601, 1e-3},
                                {49.99, 5e-3},
                                {50.01, 5e-3},
                                {-2.0, 0.1},
                                {-40.0, 0.5}};
    check_unary(*state, &cr_fn_expinti, cr_sf_expinti, "expinti", ei, NELEM(ei));
    static const point1 si[] = {{0.0, 0.1},     {1.0, 0.1},    {3.999, 1e-3}, {4.001, 1e-3},
                                {-4.001, 1e-3}, {-20.0, 0.25}, {500.0, 0.5}};
    check_unary(*state, &cr_fn_sinint, cr_sf_sinint, "sinint", si, NELEM(si));
    static const point1 ci[] = {{1e-3, 1e-4},  {0.6165054856207162, 0.05},
                                {3.999, 1e-3}, {4.001, 1e-3},
                                {20.0, 0.25},  {500.0, 0.5}};
    check_unary(*state, &cr_fn_cosint, cr_sf_cosint, "cosint", ci, NELEM(ci));
    /* m = 0 (the series of the derivatives), both sides of +-0.1, near 1, negative m. */
    static const point1 el[] = {{0.0, 0.01},     {0.0999, 1e-4}, {0.1001, 1e-4}, {-0.0999, 1e-4},
                                {-0.1001, 1e-4}, {0.5, 0.05},    {0.999, 1e-4},  {-30.0, 0.5}};
    check_unary(*state, &cr_fn_ellipk, cr_sf_ellipk, "ellipk", el, NELEM(el));
    check_unary(*state, &cr_fn_ellipe, cr_sf_ellipe, "ellipe", el, NELEM(el));
}

static void test_erf2(void **state)
{
    fixture *fx = *state;
    static const double pts[][2] = {{0.0, 0.0}, {-1.0, 2.0}, {3.0, 4.0}, {-4.0, -3.5}, {0.4, 0.6}};
    for (size_t i = 0; i < NELEM(pts); i++) {
        fd_env e = {.f2 = cr_sf_erf2, .args = {pts[i][0], pts[i][1]}};
        double tol[2], d[2];
        d[0] = fd_partial(&e, 0, 0.1, &tol[0]);
        d[1] = fd_partial(&e, 1, 0.1, &tol[1]);
        cr_value args[2] = {cr_value_f64(pts[i][0]), cr_value_f64(pts[i][1])}, y;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_erf2, args, 2, &y, &pb), CR_OK);
        cr_tangent g = cr_tangent_f64(1.0), dx[3];
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
        check_close(dx[1].u.f64, d[0], tol[0], "erf2 pullback x");
        check_close(dx[2].u.f64, d[1], tol[1], "erf2 pullback y");
        for (size_t j = 0; j < 2; j++) {
            cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_zero()}, dy;
            dargs[j + 1] = cr_tangent_f64(1.0);
            assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_erf2, args, 2, &y, &dy),
                             CR_OK);
            check_close(dy.u.f64, d[j], tol[j], "erf2 frule");
        }
        cr_arena_reset(fx->arena);
    }
}

/* ---- Functions of an order and an argument ----------------------------------------------- */

/* A real f(nu, x): ∂/∂x by frule and pullback against differences; the order's tangent is
 * NotImplemented (frule and pullback) for a real order and NoTangent for an integer one. */
static void check_order_real(fixture *fx, const cr_value *f, double (*prim)(double, double),
                             const char *name, double nu, double x, double range)
{
    char what[120];
    fd_env e = {.f2 = prim, .args = {nu, x}};
    double tol, d = fd_partial(&e, 1, range, &tol);
    cr_value args[2] = {cr_value_f64(nu), cr_value_f64(x)}, y;
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_f64(1.0)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, f, args, 2, &y, &dy), CR_OK);
    assert_true(y.kind == CR_KIND_F64 && y.u.f64 == prim(nu, x));
    assert_int_equal(dy.tag, CR_TAN_F64);
    snprintf(what, sizeof what, "%s(%g, %g) frule", name, nu, x);
    check_close(dy.u.f64, d, tol, what);
    dargs[1] = cr_tangent_f64(1.0);
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, f, args, 2, &y, &dy), CR_OK);
    assert_int_equal(dy.tag, CR_TAN_NOTIMPL);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, f, args, 2, &y, &pb), CR_OK);
    cr_tangent g = cr_tangent_f64(1.0), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NONE);
    assert_int_equal(dx[1].tag, CR_TAN_NOTIMPL);
    assert_int_equal(dx[2].tag, CR_TAN_F64);
    snprintf(what, sizeof what, "%s(%g, %g) pullback", name, nu, x);
    check_close(dx[2].u.f64, d, tol, what);
    /* An integer order: NoTangent, and the frule ignores its tangent. */
    if (nu == nearbyint(nu)) {
        args[0] = cr_value_i64((int64_t)nu);
        assert_int_equal(cr_rrule(NULL, fx->arena, f, args, 2, &y, &pb), CR_OK);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
        assert_int_equal(dx[1].tag, CR_TAN_NONE);
        check_close(dx[2].u.f64, d, tol, what);
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, f, args, 2, &y, &dy), CR_OK);
        assert_int_equal(dy.tag, CR_TAN_F64);
    }
    cr_arena_reset(fx->arena);
}

static void test_bessel_real_order(void **state)
{
    /* x on both sides of 2 (Temme's series / Steed's CF2) and of 25 (Hankel's expansion),
     * integer, half-integer, negative and large orders. */
    static const double pts[][3] = {{0.0, 1.5, 0.1},   {0.0, 1.999, 1e-3},    {0.3, 2.001, 1e-3},
                                    {1.0, 7.0, 0.1},   {2.5, 0.4, 0.05},      {-1.5, 3.0, 0.1},
                                    {-0.7, 5.5, 0.1},  {1.0 / 3, 24.9, 0.05}, {0.6, 25.1, 0.05},
                                    {4.0, 30.0, 0.25}, {12.3, 8.0, 0.1},      {-2.0, 1.2, 0.05}};
    static const struct {
        const cr_value *f;
        double (*prim)(double, double);
        const char *name;
    } fns[] = {{&cr_fn_besselj, cr_sf_besselj, "besselj"},
               {&cr_fn_bessely, cr_sf_bessely, "bessely"},
               {&cr_fn_besseli, cr_sf_besseli, "besseli"},
               {&cr_fn_besselk, cr_sf_besselk, "besselk"},
               {&cr_fn_besselix, cr_sf_besselix, "besselix"},
               {&cr_fn_besselkx, cr_sf_besselkx, "besselkx"},
               {&cr_fn_besseljx, cr_sf_besselj, "besseljx"},
               {&cr_fn_besselyx, cr_sf_bessely, "besselyx"}};
    for (size_t i = 0; i < NELEM(fns); i++)
        for (size_t k = 0; k < NELEM(pts); k++)
            check_order_real(*state, fns[i].f, fns[i].prim, fns[i].name, pts[k][0], pts[k][1],
                             pts[k][2]);
    /* besselix at x < 0 (integer order): the scale's derivative takes sign(x). */
    check_order_real(*state, &cr_fn_besselix, cr_sf_besselix, "besselix", 2.0, -3.0, 0.1);
    check_order_real(*state, &cr_fn_besselj, cr_sf_besselj, "besselj", 3.0, -3.0, 0.1);
}

static void test_gamma_upper(void **state)
{
    static const double pts[][3] = {{0.5, 0.3, 0.05}, {1.0, 1.0, 0.1},   {2.5, 4.0, 0.1},
                                    {3.0, 20.0, 0.5}, {10.0, 9.5, 0.25}, {0.2, 8.0, 0.1}};
    for (size_t k = 0; k < NELEM(pts); k++) {
        check_order_real(*state, &cr_fn_gamma_upper, cr_sf_gamma_upper, "gamma_upper", pts[k][0],
                         pts[k][1], pts[k][2]);
        check_order_real(*state, &cr_fn_loggamma_upper, cr_sf_loggamma_upper, "loggamma_upper",
                         pts[k][0], pts[k][1], pts[k][2]);
    }
}

/* gamma_inc(a, x, IND): the values and derivatives of gamma_inc(a, x) for every IND (the full
 * accuracy is computed), NoTangent for IND, CR_EINVAL for another IND. */
static void test_gamma_inc3(void **state)
{
    fixture *fx = *state;
    for (int64_t ind = 0; ind <= 2; ind++) {
        cr_value a3[3] = {cr_value_f64(2.5), cr_value_f64(1.75), cr_value_i64(ind)}, y3, y2;
        cr_pullback pb3, pb2;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gamma_inc, a3, 3, &y3, &pb3), CR_OK);
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gamma_inc, a3, 2, &y2, &pb2), CR_OK);
        const double *p3 = y3.u.obj.ptr, *p2 = y2.u.obj.ptr;
        assert_true(p3[0] == p2[0] && p3[1] == p2[1]);
        cr_tangent seeds[2] = {cr_tangent_f64(1.0), cr_tangent_f64(-0.5)}, g, dx3[4], dx2[3];
        assert_int_equal(cr_tangent_struct(fx->arena, y3.u.obj.type, NULL, seeds, 2, &g), CR_OK);
        assert_int_equal(cr_pullback_call(fx->arena, &pb3, &g, dx3, 4), CR_OK);
        assert_int_equal(cr_pullback_call(fx->arena, &pb2, &g, dx2, 3), CR_OK);
        assert_int_equal(dx3[1].tag, CR_TAN_NOTIMPL);
        assert_true(dx3[2].tag == CR_TAN_F64 && dx3[2].u.f64 == dx2[2].u.f64);
        assert_int_equal(dx3[3].tag, CR_TAN_NONE);
        /* ∂P/∂x against differences of P */
        fd_env e = {.f2 = cr_sf_gamma_upper, .args = {2.5, 1.75}};
        double tol, d = fd_partial(&e, 1, 0.1, &tol);
        /* P = 1 - Γ(a, x)/Γ(a): the pullback of (1, -1/2) is 1.5 ∂P/∂x */
        check_close(dx3[2].u.f64, -1.5 * d / tgamma(2.5), 1.5 * tol / tgamma(2.5),
                    "gamma_inc(a, x, IND) pullback");
        cr_arena_reset(fx->arena);
    }
    cr_value bad[3] = {cr_value_f64(2.5), cr_value_f64(1.75), cr_value_i64(3)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_gamma_inc, bad, 3, &y), CR_EINVAL);
    bad[2] = cr_value_f64(1.0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_gamma_inc, bad, 3, &y), CR_EINVAL);
    cr_arena_reset(fx->arena);
}

/* The complex expint row: frule with ż = 1 and i against differences of both parts, the
 * pullback of ȳ = 0.3 - 0.7i against the gradient of real(conj(ȳ) E1). */
typedef struct cz_env {
    cr_complex z, dir, c;
} cz_env;

static cr_status cz_fn(double t, double *y, void *env)
{
    const cz_env *e = env;
    *y = creal(conj(e->c) * cr_sf_expint_complex(e->z + t * e->dir));
    return isfinite(*y) ? CR_OK : CR_EDOMAIN;
}

static double cz_fd(cz_env *e, double *tol)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    cr_fd_opts opts = {0};
    opts.max_range = 0.05;
    double d = 0, err = 0;
    assert_int_equal(cr_fd_derivative(&m, &opts, cz_fn, e, 0.0, &d, &err), CR_OK);
    *tol = 1e-8 * fmax(1.0, fabs(d)) + 20 * err;
    return d;
}

static void test_expint_complex(void **state)
{
    fixture *fx = *state;
    static const cr_complex zs[] = {CMPLX(0.5, 0.5),  CMPLX(-3.0, 2.0), CMPLX(-2.0, 0.3),
                                    CMPLX(4.0, -6.0), CMPLX(0.2, -0.9), CMPLX(-8.0, -1.0)};
    for (size_t i = 0; i < NELEM(zs); i++) {
        cr_value z = cr_value_c128(zs[i]), y;
        for (int di = 0; di < 2; di++) {
            cr_complex dir = di == 0 ? 1.0 : CMPLX(0.0, 1.0);
            cz_env e = {.z = zs[i], .dir = dir, .c = 1.0};
            double tr, ti, tp;
            double dr = cz_fd(&e, &tr);
            e.c = CMPLX(0.0, 1.0);
            double dim = cz_fd(&e, &ti);
            e.c = CMPLX(0.3, -0.7);
            double dp = cz_fd(&e, &tp);
            cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_c128(dir)}, dy, dx[2];
            assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_expint, &z, 1, &y, &dy),
                             CR_OK);
            assert_true(y.kind == CR_KIND_C128 && y.u.c128 == cr_sf_expint_complex(zs[i]));
            check_close(creal(dy.u.c128), dr, tr, "expint(z) frule, real part");
            check_close(cimag(dy.u.c128), dim, ti, "expint(z) frule, imaginary part");
            cr_pullback pb;
            assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_expint, &z, 1, &y, &pb), CR_OK);
            cr_tangent g = cr_tangent_c128(CMPLX(0.3, -0.7));
            assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 2), CR_OK);
            assert_int_equal(dx[1].tag, CR_TAN_C128);
            check_close(di == 0 ? creal(dx[1].u.c128) : cimag(dx[1].u.c128), dp, tp,
                        "expint(z) pullback");
            cr_arena_reset(fx->arena);
        }
    }
    /* A real argument keeps the real row: NaN below 0 (the value is complex there). */
    cr_value x = cr_value_f64(-1.0), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_expint, &x, 1, &y), CR_OK);
    assert_true(y.kind == CR_KIND_F64 && isnan(y.u.f64));
    cr_arena_reset(fx->arena);
}

/* The complex-valued Hankel functions of a real x: the frule's tangent is f'(x) ẋ (real and
 * imaginary parts against differences), the pullback of ȳ is real(conj(f'(x)) ȳ) = the
 * derivative of real(conj(ȳ) f(x)). */
static void test_hankel(void **state)
{
    fixture *fx = *state;
    static const struct {
        const cr_value *f;
        cr_complex (*prim)(double, double);
        const char *name;
    } fns[] = {{&cr_fn_hankelh1, cr_sf_hankelh1, "hankelh1"},
               {&cr_fn_hankelh2, cr_sf_hankelh2, "hankelh2"},
               {&cr_fn_hankelh1x, cr_sf_hankelh1x, "hankelh1x"},
               {&cr_fn_hankelh2x, cr_sf_hankelh2x, "hankelh2x"}};
    static const double pts[][2] = {{0.0, 1.5}, {1.3, 3.0}, {-0.6, 7.0}, {2.0, 30.0}};
    for (size_t i = 0; i < NELEM(fns); i++)
        for (size_t k = 0; k < NELEM(pts); k++) {
            double nu = pts[k][0], x = pts[k][1], tr, ti, tp;
            fd_env e = {.h = fns[i].prim, .c = 1.0, .args = {nu, x}};
            double dr = fd_partial(&e, 1, 0.1, &tr);
            e.c = CMPLX(0.0, 1.0); /* real(-i h) = imag(h) */
            double di = fd_partial(&e, 1, 0.1, &ti);
            cr_complex c = CMPLX(0.3, -0.7);
            e.c = c;
            double dp = fd_partial(&e, 1, 0.1, &tp);
            cr_value args[2] = {cr_value_f64(nu), cr_value_f64(x)}, y;
            cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_f64(1.0)}, dy;
            assert_int_equal(cr_frule(NULL, fx->arena, dargs, fns[i].f, args, 2, &y, &dy), CR_OK);
            assert_int_equal(y.kind, CR_KIND_C128);
            assert_true(y.u.c128 == fns[i].prim(nu, x));
            assert_int_equal(dy.tag, CR_TAN_C128);
            check_close(creal(dy.u.c128), dr, tr, fns[i].name);
            check_close(cimag(dy.u.c128), di, ti, fns[i].name);
            cr_pullback pb;
            assert_int_equal(cr_rrule(NULL, fx->arena, fns[i].f, args, 2, &y, &pb), CR_OK);
            cr_tangent g = cr_tangent_c128(c), dx[3];
            assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
            assert_int_equal(dx[1].tag, CR_TAN_NOTIMPL);
            assert_int_equal(dx[2].tag, CR_TAN_F64);
            check_close(dx[2].u.f64, dp, tp, fns[i].name);
            cr_arena_reset(fx->arena);
        }
}

/* ---- Precision, bad input, registration ---------------------------------------------------- */

static void test_float_input_registration(void **state)
{
    fixture *fx = *state;
    cr_value x = cr_value_f32(0.75f), y;
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_f32(1.0f), cr_tangent_zero()}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_airyai, &x, 1, &y, &dy), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    assert_int_equal(dy.tag, CR_TAN_F32);
    assert_true(fabs((double)y.u.f32 - cr_sf_airyai(0.75)) < 1e-7);
    cr_value args[2] = {cr_value_i64(2), cr_value_f32(2.5f)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_besselk, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    cr_tangent g = cr_tangent_f32(1.0f), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    assert_int_equal(dx[2].tag, CR_TAN_F32);
    /* An integer x gets NoTangent. */
    args[1] = cr_value_i64(3);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_besselj, args, 2, &y, &pb), CR_OK);
    g = cr_tangent_f64(1.0);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    /* Bad input: an order beyond the supported range, a non-number, a wrong count. */
    args[0] = cr_value_f64(2e5);
    args[1] = cr_value_f64(1.0);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_besselj, args, 2, &y, &pb), CR_EDOMAIN);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "order"));
    args[0] = cr_value_f64(1.0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_bessely, args, 1, &y), CR_EINVAL);
    args[1] = cr_fn_airyai; /* a function, not a number */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_bessely, args, 2, &y), CR_EINVAL);
    cr_arena_reset(fx->arena);

    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    static const char *names[] = {
        "airyai",    "airyaiprime",  "airybi",        "airybiprime", "airyaix",  "airyaiprimex",
        "airybix",   "airybiprimex", "dawson",        "erfi",        "logerfcx", "invdigamma",
        "expintx",   "expinti",      "sinint",        "cosint",      "ellipk",   "ellipe",
        "erf2",      "besselj",      "bessely",       "besseli",     "besselk",  "besselix",
        "besselkx",  "besseljx",     "besselyx",      "hankelh1",    "hankelh2", "hankelh1x",
        "hankelh2x", "gamma_upper",  "loggamma_upper"};
    for (size_t i = 0; i < NELEM(names); i++)
        if (cr_registry_find(cr_registry_builtin(), names[i]) == NULL)
            fail_msg("%s is not registered", names[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special_values),
#ifdef CR_HAVE_MPFR
        cmocka_unit_test(test_primals_mpfr),
        cmocka_unit_test(test_expint_complex_mpfr),
#endif
        cmocka_unit_test_setup_teardown(test_airy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_function_relatives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integrals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_erf2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bessel_real_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gamma_upper, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gamma_inc3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expint_complex, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hankel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_float_input_registration, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
