/*
 * The special-function rule family: digamma, trigamma, polygamma, erfinv, erfcinv, erfcx,
 * logerfc, beta, logbeta, loggamma, logabsgamma, gamma_inc, expint (E1) and the Bessel
 * functions j0 j1 jn y0 y1 yn. The primals are written here from the published
 * mathematics (DLMF chapters 5, 6, 7, 8, 25; the classical continued fractions and
 * asymptotic series cited at each function); the Bessel primals are the C library's
 * (POSIX). The rules follow SpecialFunctions.jl's ChainRules extension.
 */
#if !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1 /* lgamma_r (reentrant, unlike lgamma's global signgam) */
#endif
#if !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700 /* j0, j1, jn, y0, y1, yn */
#endif

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include <chainrules/rules_special.h>

#include "special_impl.h"

#define SQRT_PI_OVER_2 0.88622692545275801365
#define HALF_LOG_2PI   0.91893853320467274178

/* ---- Helpers ------------------------------------------------------------------------------ */

/* cot(pi x) and sin(pi x) with exact argument reduction: r = x - nearest integer is exact,
 * so the period is removed without error (pi·x rounded would lose |x|·eps absolutely). */
static double reduce_pi(double x, double *sign)
{
    double n = nearbyint(x);
    double r = x - n;
    /* sin(pi (n + r)) = (-1)^n sin(pi r) */
    *sign = fmod(n, 2.0) == 0 ? 1.0 : -1.0;
    return r;
}

/* cos(pi r) for |r| <= 1/2, as sin(pi (1/2 - |r|)) where that is exact (|r| >= 1/4), so
 * that it keeps its relative accuracy near the zero at 1/2. */
static double cos_pi_reduced(double r)
{
    double a = fabs(r);
    return a < 0.25 ? cos(PI * r) : sin(PI * (0.5 - a));
}

static double cot_pi(double x)
{
    double s;
    double r = reduce_pi(x, &s);
    return cos_pi_reduced(r) / sin(PI * r);
}

static double sin_pi(double x)
{
    double s;
    double r = reduce_pi(x, &s);
    return s * sin(PI * r);
}

static bool is_nonpositive_integer(double x)
{
    return x <= 0 && x == nearbyint(x);
}

/* ln|Gamma(x)| through the reentrant lgamma_r (lgamma writes the global signgam). */
static double lgam(double x)
{
    int s;
    return lgamma_r(x, &s);
}

/* A continued fraction b0 + a1/(b1 + a2/(b2 + ...)) with a_n = an(n, p), b_n = b0 + 2n
 * (the shape of the fractions of Gamma(a, x) and E1 below), evaluated backwards from depth
 * N, which is stable (no error accumulates along the convergents, unlike the forward
 * Lentz products: 1e-14 at E1(1.4)); N doubles from n0 until two depths agree to 1e-16. */
static double cf_backward_n(double b0, double (*an)(double n, double p), double p, int n)
{
    double t = b0 + 2.0 * n;
    for (int k = n; k >= 1; k--)
        t = b0 + 2.0 * (k - 1) + an((double)k, p) / t;
    return t;
}

static double cf_backward(double b0, double (*an)(double n, double p), double p, int n0)
{
    double f = cf_backward_n(b0, an, p, n0);
    for (int n = 2 * n0; n <= (1 << 20); n *= 2) {
        double g = cf_backward_n(b0, an, p, n);
        if (fabs(g - f) <= 1e-16 * fabs(g))
            return g;
        f = g;
    }
    return f;
}

/* ---- Digamma, trigamma, polygamma (DLMF 5.5, 5.11, 5.15, 25.11) --------------------- */

/* Asymptotic expansions (DLMF 5.11.2 and 5.15.8) are used from this argument on; below
 * it, the recurrences psi(x) = psi(x + 1) - 1/x and psi'(x) = psi'(x + 1) + 1/x² shift
 * the argument up. At 10 the first omitted terms are below 1e-17 relatively. */
#define PSI_ASYMPTOTIC 10.0

/* psi(x): one implementation, in the math family (asymptotic series, recurrences into a
 * Taylor series through the positive root, reflection below zero); here the signed-zero
 * pole takes its one-sided limit. */
double cr_sf_digamma(double x)
{
    if (x == 0)
        return copysign(INF, -x); /* psi ~ -1/x */
    return cr__digamma(x);
}

/* psi'(x) for x >= PSI_ASYMPTOTIC: 1/x + 1/(2x²) + sum B_2k / x^(2k+1) (DLMF 5.15.8). */
static double trigamma_asymptotic(double x)
{
    static const double c[] = {1.0 / 6,       -1.0 / 30, 1.0 / 42,      -1.0 / 30,    5.0 / 66,
                               -691.0 / 2730, 7.0 / 6,   -3617.0 / 510, 43867.0 / 798};
    double t = 1 / (x * x), s = 0;
    for (int k = (int)(sizeof c / sizeof c[0]) - 1; k >= 0; k--)
        s = s * t + c[k];
    return 1 / x + 0.5 * t + s * t / x;
}

double cr_sf_trigamma(double x)
{
    if (isnan(x))
        return x;
    if (x == INF)
        return 0;
    if (is_nonpositive_integer(x))
        return INF; /* double poles: +inf from both sides */
    if (x < 0) {
        /* Reflection: psi'(1 - x) + psi'(x) = pi² / sin²(pi x). No cancellation: the first
         * term is at least pi², the subtracted one at most pi²/6 (1 - x > 1). */
        double s = sin_pi(x);
        return (PI * PI) / (s * s) - cr_sf_trigamma(1 - x);
    }
    double acc = 0;
    while (x < PSI_ASYMPTOTIC) {
        acc += 1 / (x * x);
        x += 1;
    }
    return trigamma_asymptotic(x) + acc;
}

/* Bernoulli numbers B_2k / (2k)!, k = 1..13, for Euler-Maclaurin (DLMF 2.10.1, 24.2). */
static const double k_bern_fact[] = {
    1.0 / 12.0,
    -1.0 / 720.0,
    1.0 / 30240.0,
    -1.0 / 1209600.0,
    1.0 / 47900160.0,
    -1.0 / 1307674368000.0 * 691.0,
    1.0 / 74724249600.0,
    -3617.0 / 10670622842880000.0,
    43867.0 / 5109094217170944000.0,
    -174611.0 / 802857662698291200000.0,
    77683.0 / 14101100039391805440000.0,
    -236364091.0 / 1693824136731743669452800000.0,
    657931.0 / 186134520519971831808000000.0,
};

/* The Euler-Maclaurin correction of a Hurwitz zeta sum stopped at w (ws = w^-s, or the
 * same scaled): sum over j of B_2j/(2j)! s (s+1) ... (s+2j-2) w^(-s-2j+1), until a term is
 * below 1e-18 of `scale`. */
static double em_correction(double s, double w, double ws, double scale)
{
    double rising = s, wpow = ws / w, corr = 0;
    for (size_t j = 0; j < sizeof k_bern_fact / sizeof k_bern_fact[0]; j++) {
        double term = k_bern_fact[j] * rising * wpow;
        corr += term;
        if (fabs(term) <= 1e-18 * scale)
            break;
        rising *= (s + 2 * (double)j + 1) * (s + 2 * (double)j + 2);
        wpow /= w * w;
    }
    return corr;
}

/* The Hurwitz zeta function zeta(s, q) = sum_k (q + k)^-s for s > 1, q > 0, by
 * Euler-Maclaurin summation (DLMF 25.11.5 with the remainder expanded, as in 2.10.1): the
 * first n terms directly, then the integral, half the boundary term and the Bernoulli
 * corrections at w = q + n. With w >= s + 12 the corrections fall at least geometrically
 * (ratio about ((s + 2j)/(2 pi w))²) and 13 of them leave less than 1e-17. All terms are
 * positive: the relative error is a few ulps. */
static double hurwitz_zeta(double s, double q)
{
    double wmin = s + 12;
    double sum = 0, w = q;
    while (w < wmin) {
        sum += pow(w, -s);
        w += 1;
    }
    double ws = pow(w, -s);
    double tail = w * ws / (s - 1) + 0.5 * ws;
    return sum + tail + em_correction(s, w, ws, sum + tail);
}

/* zeta(s, q) q^s, the Hurwitz zeta function scaled by its first term, for large s (used
 * from s = 172 on, where zeta itself leaves the range of a double while m! zeta does not):
 * the terms ((q + k)/q)^-s are summed until one is below 1e-18 of the sum, with the
 * Euler-Maclaurin tail of hurwitz_zeta once w >= s + 12. The terms fall at least as
 * exp(-s log(1 + k/q)) and the loop runs only while w < s + 12, so about 60 terms at most
 * whatever s: the time does not grow with the order. When the loop stops early, the rest
 * is below w^(1-s)/(s-1) <= 8 times the last term. */
static double hurwitz_zeta_scaled(double s, double q)
{
    double wmin = s + 12, sum = 0, w = q;
    while (w < wmin) {
        double term = exp(-s * log1p((w - q) / q));
        sum += term;
        if (term <= 1e-18 * sum)
            return sum;
        w += 1;
    }
    double ws = exp(-s * log(w / q));
    double tail = w * ws / (s - 1) + 0.5 * ws;
    return sum + tail + em_correction(s, w, ws, sum + tail);
}

/* The largest order of the reflection formula (the value overflows long before: for
 * x < 0, |psi^(m)(x)| >= m! 2^(m+1) / ... exceeds DBL_MAX for m > 170). */
#define POLYGAMMA_MAX_REFLECT 170

double cr_sf_polygamma(int m, double x)
{
    if (m < 0 || isnan(x))
        return NAN_D;
    if (m == 0)
        return cr_sf_digamma(x);
    if (m == 1)
        return cr_sf_trigamma(x);
    double sign = (m % 2 == 1) ? 1.0 : -1.0; /* (-1)^(m+1) */
    if (x == INF)
        return sign * 0.0;
    if (is_nonpositive_integer(x))
        return m % 2 == 1 ? INF : NAN_D; /* odd m: +inf both sides; even: sign change */
    if (x > 0) {
        /* DLMF 25.11.12: psi^(m)(x) = (-1)^(m+1) m! zeta(m + 1, x). */
        if (m <= 170)
            return sign * tgamma((double)m + 1) * hurwitz_zeta((double)m + 1, x);
        /* m! alone overflows, and zeta(m + 1, x) ~ x^-(m+1) soon leaves the range too: the
         * logarithms of the three factors, with zeta scaled by x^(m+1). */
        double s = (double)m + 1;
        return sign * exp(lgam(s) - s * log(x) + log(hurwitz_zeta_scaled(s, x)));
    }
    if (m > POLYGAMMA_MAX_REFLECT)
        return NAN_D;
    /* Reflection, differentiating psi(1 - x) - psi(x) = pi cot(pi x) m times:
     * psi^(m)(x) = (-1)^m psi^(m)(1 - x) - pi^(m+1) P_m(cot pi x), where the m-th
     * derivative of cot t is P_m(cot t), P_0(c) = c, P_(k+1)(c) = -(1 + c²) P_k'(c). */
    double a[POLYGAMMA_MAX_REFLECT + 2] = {0}, b[POLYGAMMA_MAX_REFLECT + 2];
    a[1] = 1; /* P_0 = c */
    for (int k = 0; k < m; k++) {
        /* coefficient i of P_(k+1): -(i+1) a_(i+1) - (i-1) a_(i-1) */
        for (int i = 0; i <= k + 2; i++) {
            double up = i + 1 <= k + 1 ? (double)(i + 1) * a[i + 1] : 0;
            double down = i >= 1 ? (double)(i - 1) * a[i - 1] : 0;
            b[i] = -up - down;
        }
        for (int i = 0; i <= k + 2; i++)
            a[i] = b[i];
    }
    double c = cot_pi(x), p = 0;
    for (int i = m + 1; i >= 0; i--)
        p = p * c + a[i];
    double reflected = (m % 2 == 0 ? 1.0 : -1.0) * cr_sf_polygamma(m, 1 - x);
    return reflected - pow(PI, (double)m + 1) * p;
}

/* ---- Error functions (DLMF 7) --------------------------------------------------------- */

/* erfcx(x) = exp(x²) erfc(x) for x >= 2 from Laplace's continued fraction (DLMF 7.9.2):
 * erfcx(x) = 1/(sqrt(pi) t), t = x + (1/2)/(x + 1/(x + (3/2)/(x + ...))), evaluated
 * backwards from a depth found sufficient (against 40-digit values) for 1e-17 relative
 * error: 83 terms at x = 2, 9 at x = 20. *s1 gets the tail after the first quotient,
 * which gives the derivative without cancellation. */
static double erfcx_cf(double x, double *s1)
{
    int n = x < 1e4 ? 8 + (int)(300 / (x * x)) : 8;
    double t = x;
    for (int k = n; k >= 2; k--)
        t = x + 0.5 * k / t;
    *s1 = t;
    return 1 / (SQRT_PI * (x + 0.5 / t));
}

double cr_sf_erfcx(double x)
{
    if (isnan(x))
        return x;
    if (x >= 2) {
        double s1;
        return erfcx_cf(x, &s1);
    }
    if (x >= 0)
        return exp_sq(x) * erfc(x);
    /* erfc(x) = 2 - erfc(-x) (DLMF 7.4.2); overflows below about -26.6. */
    if (x < -26.7)
        return INF;
    return 2 * exp_sq(x) - cr_sf_erfcx(-x);
}

/* d/dx erfcx(x) = 2x erfcx(x) - 2/sqrt(pi). For x >= 2 the difference cancels (to
 * -1/(sqrt(pi) x²)); from the continued fraction it is -1/(sqrt(pi) s1 t) exactly. */
static double erfcx_deriv(double x, double y)
{
    if (x >= 2) {
        double s1;
        (void)erfcx_cf(x, &s1);
        double t = x + 0.5 / s1;
        return -1 / (SQRT_PI * s1 * t);
    }
    return 2 * (x * y) - TWO_OVER_SQRT_PI;
}

double cr_sf_logerfc(double x)
{
    if (isnan(x))
        return x;
    if (x > 0.5) {
        /* log erfc x = log erfcx x - x², with x² = hi + lo exactly. */
        double hi = x * x, lo = fma(x, x, -hi);
        return (log(cr_sf_erfcx(x)) - hi) - lo;
    }
    if (x >= -0.5)
        return log1p(-erf(x)); /* erfc near 1: keep the relative accuracy of erf */
    return log(erfc(x));
}

/* Initial value for the inverse error function (Winitzki's approximation, relative error
 * below 2e-3): w = log(1 - x²) <= 0, the result is |erfinv(x)|. */
static double erfinv_guess(double w)
{
    const double a = 0.147;
    double t = 2 / (PI * a) + 0.5 * w;
    return sqrt(sqrt(t * t - w / a) - t);
}

/* y with erfc(y) = q for 0 < q <= 0.5, by Newton's method on g(y) = log erfc(y) - log q,
 * which is nearly linear in y² (so that tiny q converge as fast as moderate ones) and is
 * evaluated without under- or overflow: g'(y) = -2/(sqrt(pi) erfcx(y)). */
static double erfcinv_tail(double q)
{
    double lq = log(q);
    double y = erfinv_guess(lq + log(2 - q));
    for (int it = 0; it < 10; it++) {
        double g = cr_sf_logerfc(y) - lq;
        double step = g * SQRT_PI_OVER_2 * cr_sf_erfcx(y);
        y += step;
        if (fabs(step) <= 2e-16 * y)
            break;
    }
    return y;
}

/* |erfinv(x)| for 0 <= x <= 0.5 by Halley's method on erf(y) - x (f'' = -2y f'). */
static double erfinv_central(double x)
{
    double y = x < 0.1 ? SQRT_PI_OVER_2 * x * (1 + PI / 12 * x * x) : erfinv_guess(log1p(-x * x));
    for (int it = 0; it < 8; it++) {
        double f = erf(y) - x;
        double r = f / (TWO_OVER_SQRT_PI * exp(-y * y)); /* f / f' */
        double step = r / (1 + y * r);
        y -= step;
        if (fabs(step) <= 1e-16 * y)
            break;
    }
    return y;
}

double cr_sf_erfinv(double x)
{
    if (isnan(x) || fabs(x) > 1)
        return NAN_D;
    if (fabs(x) == 1)
        return copysign(INF, x);
    if (x == 0)
        return x;
    double ax = fabs(x);
    /* Above 0.5 solve erfc(y) = 1 - |x|, which is exact there (Sterbenz). */
    double y = ax <= 0.5 ? erfinv_central(ax) : erfcinv_tail(1 - ax);
    return copysign(y, x);
}

double cr_sf_erfcinv(double q)
{
    if (isnan(q) || q < 0 || q > 2)
        return NAN_D;
    if (q == 0)
        return INF;
    if (q == 2)
        return -INF;
    if (q <= 0.5)
        return erfcinv_tail(q);
    if (q >= 1.5)
        return -erfcinv_tail(2 - q); /* 2 - q exact */
    return cr_sf_erfinv(1 - q);      /* 1 - q exact */
}

/* ---- Gamma-related: loggamma, logabsgamma, beta, logbeta (DLMF 5.11, 5.12) ------------- */

double cr_sf_logabsgamma(double x, int *sign)
{
    int s = 1;
    double v = lgamma_r(x, &s);
    if (sign != NULL)
        *sign = s;
    return v;
}

double cr_sf_loggamma(double x)
{
    int s;
    double v = cr_sf_logabsgamma(x, &s);
    return s < 0 ? NAN_D : v; /* log of a negative Gamma is not real */
}

/* Stirling's remainder lnGamma(x) - ((x - 1/2) ln x - x + ln(2 pi)/2) for x >= 10
 * (DLMF 5.11.1): sum B_2k / (2k (2k-1) x^(2k-1)). */
static double stirling_rest(double x)
{
    static const double c[] = {1.0 / 12,   -1.0 / 360,      1.0 / 1260, -1.0 / 1680,
                               1.0 / 1188, -691.0 / 360360, 1.0 / 156,  -3617.0 / 122400};
    double t = 1 / (x * x), s = 0;
    for (int k = (int)(sizeof c / sizeof c[0]) - 1; k >= 0; k--)
        s = s * t + c[k];
    return s / x;
}

/* log B(a, b) for a, b > 0 (the approach of DiDonato and Morris, ACM TOMS 708: Stirling's
 * series with the large parts combined analytically so that no two large logarithms are
 * subtracted). */
static double logbeta_pos(double a, double b)
{
    double p = fmin(a, b), q = fmax(a, b);
    if (q < 10) /* small: Gamma is finite and accurate, the ratio has a few ulps error */
        return log(tgamma(p) * tgamma(q) / tgamma(p + q));
    if (p < 10) {
        /* lnGamma(q) - lnGamma(p + q) = -(q - 1/2) log1p(p/q) - p ln(p + q) + p
         *                                + rest(q) - rest(p + q) */
        double c = p + q;
        double d = -(q - 0.5) * log1p(p / q) - p * log(c) + p + stirling_rest(q) - stirling_rest(c);
        return lgam(p) + d;
    }
    /* ln B = ln(2pi)/2 - ln(c)/2 + (p - 1/2) ln(p/c) + (q - 1/2) ln(q/c)
     *        + rest(p) + rest(q) - rest(c), with ln(q/c) = -log1p(p/q). */
    double c = p + q;
    return HALF_LOG_2PI - 0.5 * log(c) + (p - 0.5) * log(p / c) - (q - 0.5) * log1p(p / q) +
           stirling_rest(p) + stirling_rest(q) - stirling_rest(c);
}

/* log|B(a, b)| and the sign of B. */
static double logabsbeta(double a, double b, int *sign)
{
    *sign = 1;
    if (a > 0 && b > 0)
        return logbeta_pos(a, b);
    int sa, sb, sc;
    double la = cr_sf_logabsgamma(a, &sa), lb = cr_sf_logabsgamma(b, &sb);
    double lc = cr_sf_logabsgamma(a + b, &sc);
    *sign = sa * sb * sc;
    if (isinf(lc) && isfinite(la) && isfinite(lb))
        return -INF; /* 1/Gamma(a + b) = 0 */
    return la + lb - lc;
}

double cr_sf_logbeta(double a, double b)
{
    int s;
    return logabsbeta(a, b, &s);
}

double cr_sf_beta(double a, double b)
{
    if (isnan(a) || isnan(b))
        return NAN_D;
    /* Small arguments: the Gamma ratio (a few ulps). Otherwise exp(log B): tgamma loses
     * up to 1e-14 at arguments of tens, while the error of exp(log B) is |log B| ulps, of
     * the order of B's own condition number. */
    if (a > 0 && b > 0 && a < 10 && b < 10)
        return tgamma(fmin(a, b)) * (tgamma(fmax(a, b)) / tgamma(a + b));
    int s;
    double l = logabsbeta(a, b, &s);
    return s * exp(l);
}

/* psi(a) - psi(a + b), the derivative of log B: for a, a + b >= 10 from the asymptotic
 * series term by term (ln(a/c) = -log1p(b/a), 1/(2c) - 1/(2a) = -b/(2ac), and
 * a^-2k - c^-2k = a^-2k (-expm1(-2k log1p(b/a)))), so that the difference of two large
 * digammas does not cancel when b is small against a. */
static double digamma_diff(double a, double b)
{
    double c = a + b;
    if (!(a >= PSI_ASYMPTOTIC && c >= PSI_ASYMPTOTIC) || !isfinite(c))
        return cr_sf_digamma(a) - cr_sf_digamma(c);
    static const double k[] = {1.0 / 12,  -1.0 / 120,     1.0 / 252, -1.0 / 240,
                               1.0 / 132, -691.0 / 32760, 1.0 / 12,  -3617.0 / 8160};
    double l = log1p(b / a), ia2 = 1 / (a * a), apow = 1, s = 0;
    for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
        apow *= ia2;
        s += k[j] * apow * -expm1(-2.0 * (double)(j + 1) * l);
    }
    return -l - b / (2 * a * c) - s;
}

/* ---- The regularised incomplete gamma functions P(a, x), Q(a, x) (DLMF 8.2.4) ---------- */

/* log Gamma(1 + a) for |a| < 0.2 from its Taylor series (DLMF 5.7.3):
 * -gamma a + sum_(k>=2) (-1)^k zeta(k) a^k / k, accurate where lgamma(1 + a) is not
 * (1 + a rounds away the low bits of a small a). */
static double lgamma1p_small(double a)
{
    /* zeta(2), ..., zeta(24) */
    static const double zeta[] = {
        1.6449340668482264, 1.2020569031595942, 1.0823232337111381, 1.03692775514337,
        1.0173430619844492, 1.008349277381923,  1.0040773561979444, 1.0020083928260821,
        1.000994575127818,  1.0004941886041194, 1.000246086553308,  1.0001227133475785,
        1.0000612481350588, 1.000030588236307,  1.0000152822594086, 1.0000076371976379,
        1.000003817293265,  1.0000019082127165, 1.0000009539620338, 1.0000004769329869,
        1.0000002384505027, 1.000000119219926,  1.000000059608189};
    /* p = (-a)^j, j = 2, 3, ...: the terms are zeta(j) p / j. */
    double s = 0, p = -a;
    for (size_t k = 0; k < sizeof zeta / sizeof zeta[0]; k++) {
        p *= -a;
        s += zeta[k] * p / (double)(k + 2);
    }
    return -EULER_GAMMA * a + s;
}

/* log Gamma(1 + a) for a > -1. */
static double lgamma1p(double a)
{
    if (fabs(a) < 0.2)
        return lgamma1p_small(a);
    return lgam(1 + a);
}

/* x^a e^-x / Gamma(a), the common factor of P and Q, without overflow or the cancellation
 * of a ln x - x - lnGamma(a) at large a: with lambda = x/a and Stirling's
 * Gamma(a) = sqrt(2 pi / a) a^a e^-a e^rest(a), it is
 * sqrt(a / (2 pi)) exp(-a (lambda - 1 - ln lambda) - rest(a)) (Temme's form, DLMF 8.12). */
static double gamma_prefix(double a, double x)
{
    if (a < 10)
        return exp(a * log(x) - x) / tgamma(a);
    double t = (x - a) / a; /* lambda - 1 */
    /* d = lambda - 1 - ln lambda: from the series of t - log1p(t) when t is small (no
     * cancellation), otherwise directly with ln lambda = log(x/a) (log1p(t) would turn the
     * rounding of t into a large relative error of lambda near t = -1). */
    double d;
    if (fabs(t) < 0.25) {
        double s = 0, tp = t;
        for (int k = 2; k < 40; k++) {
            tp *= -t;
            s += tp / k; /* (-1)^(k+1) t^k / k, negated: t - log1p(t) = sum (-1)^k t^k/k */
            if (fabs(tp) < 1e-18 * fabs(s))
                break;
        }
        d = -s;
    } else {
        d = t - log(x / a);
    }
    return sqrt(a / (2 * PI)) * exp(-a * d - stirling_rest(a));
}

/* P(a, x) by the series gamma*(a, x) (DLMF 8.11.4 / 8.7.1): x^a e^-x / Gamma(a + 1) ·
 * sum x^n / ((a+1)...(a+n)); positive terms, converges for all x, used for x < a + 1. */
static double gamma_p_series(double a, double x)
{
    double term = 1, sum = 1;
    for (int n = 1; n < 100000; n++) {
        term *= x / (a + n);
        sum += term;
        if (term < 1e-17 * sum)
            break;
    }
    return gamma_prefix(a, x) / a * sum;
}

/* Q(a, x) by Legendre's continued fraction of Gamma(a, x) (DLMF 8.9.2, in its even
 * form): Gamma(a, x) = x^a e^-x / (x + 1 - a + a_1/(x + 3 - a + a_2/(...))),
 * a_n = -n (n - a). Converges fast for x > a + 1. */
static double gamma_cf_an(double n, double a)
{
    return -n * (n - a);
}

static double gamma_q_cf(double a, double x)
{
    return gamma_prefix(a, x) / cf_backward(x + 1 - a, gamma_cf_an, a, 32);
}

/* sum_(n>=1) (-x)^n / (n! (a + n)) for |x| <= 1 (a > -1), to full precision: the series of
 * gamma(a, x) (DLMF 8.7.1) without its n = 0 term, and with a = 0 that of E1 (DLMF 6.6.2). */
static double power_series(double a, double x)
{
    double s = 0, t = 1;
    for (int n = 1; n < 200; n++) {
        t *= -x / n;
        double term = t / (a + n);
        s += term;
        if (fabs(term) < 1e-17 * fabs(s))
            break;
    }
    return s;
}

/* Q(a, x) for a < 1 and x <= 1 without forming 1 - P (DiDonato and Morris 1986, sec. 3):
 * Q = -expm1(a ln x - lnGamma(1 + a)) - x^a/Gamma(1 + a) · a · sum_(n>=1) (-x)^n/(n!(a+n)),
 * two terms of the same sign for x <= 1 (they cancel beyond). */
static double gamma_q_small_a(double a, double x)
{
    double lg = lgamma1p(a);
    double u = -expm1(a * log(x) - lg);
    double v = exp(a * log(x) - lg) * a * power_series(a, x);
    return u - v;
}

void cr_sf_gamma_inc(double a, double x, double *p, double *q)
{
    double P, Q;
    if (isnan(a) || isnan(x) || a <= 0 || x < 0) {
        P = Q = NAN_D;
    } else if (x == 0) {
        P = 0;
        Q = 1;
    } else if (x == INF) {
        P = 1;
        Q = 0;
    } else if (a < 1 && x <= 1) {
        /* both directly: P small where Q is not and the converse */
        P = gamma_p_series(a, x);
        Q = gamma_q_small_a(a, x);
    } else if (a < 1) {
        /* x > 1: Q <= e^-1 by the continued fraction, P = 1 - Q >= 0.63 */
        Q = gamma_q_cf(a, x);
        P = 1 - Q;
    } else if (x < a + 1) {
        P = gamma_p_series(a, x);
        Q = 1 - P;
    } else {
        Q = gamma_q_cf(a, x);
        P = 1 - Q;
    }
    if (p != NULL)
        *p = P;
    if (q != NULL)
        *q = Q;
}

/* ---- The exponential integral E1 (DLMF 6.2.1) ------------------------------------------ */

static double expint_cf_an(double n, double unused)
{
    (void)unused;
    return -n * n;
}

double cr_sf_expint(double x)
{
    if (isnan(x) || x < 0)
        return NAN_D;
    if (x == 0)
        return INF;
    if (x <= 1) {
        /* DLMF 6.6.2: E1(x) = -gamma - ln x - sum_(k>=1) (-x)^k / (k k!). */
        return -EULER_GAMMA - log(x) - power_series(0, x);
    }
    /* DLMF 6.9.1 (even form): E1(x) = e^-x / (x + 1 + a_1/(x + 3 + a_2/(...))),
     * a_n = -n². */
    return exp(-x) / cf_backward(x + 1, expint_cf_an, 0, 40 + (int)(120 / x));
}

/* ---- Gamma(a, x) for a <= 0 and E_nu(x) of real order (DLMF 8.2, 8.4, 8.19) ------------ */

/* The largest |a| (|nu|) of the recurrences below, which take time proportional to it. */
#define UPPER_ORDER_MAX 100000.0

/* Gamma(a, x) = x^a e^-x / cf: Legendre's continued fraction (DLMF 8.9.2), any real a,
 * x > 1 (where it converges fast for every a <= 1). */
static double upper_cf(double a, double x)
{
    return cf_backward(x + 1 - a, gamma_cf_an, a, 32);
}

/* Gamma(a, x) for 0 < |a| <= 1/2 and 0 < x <= 1, from gamma(a, x) = x^a sum_(n>=0)
 * (-x)^n/(n!(a+n)) (DLMF 8.7.1) written without the 1/a of its n = 0 term:
 * Gamma(a, x) = Gamma(1+a) (1 - x^a/Gamma(1+a))/a - x^a sum_(n>=1) (-x)^n/(n!(a+n)),
 * 1 - x^a/Gamma(1+a) = -expm1(a ln x - lnGamma(1+a)) with lnGamma(1+a) from its Taylor
 * series: nothing cancels as a -> 0, where the first term tends to -gamma - ln x (E1). */
static double upper_small(double a, double x)
{
    double lg = lgamma1p(a), l = a * log(x);
    double u = -expm1(l - lg);
    return exp(lg) * (u / a) - exp(l) * power_series(a, x);
}

double cr__sf_gamma_upper_nonpos(double a, double x)
{
    if (isnan(a) || isnan(x) || a > 0 || x < 0)
        return NAN_D;
    if (x == 0)
        return INF; /* the integral diverges at 0 for a <= 0 */
    if (x == INF)
        return 0;
    if (x > 1) {
        /* x^a e^-x: pow and exp are each correctly rounded to within an ulp, where
         * exp(a ln x - x) would turn the rounding of its argument into |a ln x| ulps */
        double p = pow(x, a) * exp(-x);
        if (!(p > 0 && isfinite(p)))
            p = exp(a * log(x) - x);
        return p / upper_cf(a, x);
    }
    if (a == 0)
        return cr_sf_expint(x);
    if (a < -UPPER_ORDER_MAX)
        return NAN_D;
    /* from a0 = a + m in (-1/2, 1/2] down to a: Gamma(b-1, x) = (Gamma(b, x) -
     * x^(b-1) e^-x)/(b-1) (DLMF 8.8.2), whose relative errors shrink at each step for
     * x <= 1 (the new value is at least x^(b-1)e^-x/(x-b+2), the term subtracted less) */
    double m = ceil(-a - 0.5), a0 = a + m; /* exact: Sterbenz */
    double g = a0 == 0 ? cr_sf_expint(x) : upper_small(a0, x), emx = exp(-x);
    for (double b = a0; b > a + 0.5; b -= 1)
        g = (g - pow(x, b - 1) * emx) / (b - 1); /* an overflow of pow is Gamma(a, x)'s */
    return g;
}

double cr__sf_loggamma_upper_nonpos(double a, double x)
{
    if (!(a <= 0) || !(x > 1) || x == INF)
        return log(cr__sf_gamma_upper_nonpos(a, x));
    return a * log(x) - x - log(upper_cf(a, x)); /* finite where Gamma(a, x) underflows */
}

/* a_n = -n (n - 1 + nu): the fraction of E_nu(x) = e^-x / (x + nu + a_1/(x + nu + 2 +
 * ...)), Legendre's fraction of Gamma(1 - nu, x) times x^(nu-1) (DLMF 8.19.17). */
static double expint_nu_an(double n, double nu)
{
    return -n * (n - 1 + nu);
}

/* E_nu(x) = x^(nu-1) Gamma(1-nu, x) (DLMF 8.19.1), times e^x when scaled. */
static double expint_nu(double nu, double x, bool scaled)
{
    if (isnan(nu) || isnan(x))
        return NAN_D;
    bool negint = nu <= 0 && nu == floor(nu);
    if (x == 0) /* DLMF 8.19.6; divergent for nu <= 1 */
        return nu > 1 ? 1 / (nu - 1) : INF;
    if (x < 0 && !negint) /* complex there */
        return NAN_D;
    if (!(fabs(nu) <= UPPER_ORDER_MAX))
        return NAN_D;
    if (x == INF)
        return 0;
    double ex = scaled ? 1 : exp(-x); /* the factor e^-x, 1 when scaled */
    if (negint) {
        /* E_0 = e^-x/x, E_(-k) = (e^-x + k E_(-k+1))/x (DLMF 8.19.12): for x > 0 positive
         * terms; for x < 0 the closed form n! x^(-n-1) e^-x e_n(x) (DLMF 8.19.7) summed in
         * this order */
        double e = ex / x;
        for (double k = 1; k <= -nu; k += 1)
            e = (ex + k * e) / x;
        return e;
    }
    /* x > a + 1 (b0 = x + nu > 2), or nu >= 12 at any x > 0 (at most 512 levels; the
     * recurrence below would take nu steps): the fraction converges fast */
    if ((x > 1 && x > 2 - nu) || nu >= 12)
        return ex / cf_backward(x + nu, expint_nu_an, nu, 32);
    if (nu == 1)
        return scaled ? cr_sf_expintx(x) : cr_sf_expint(x);
    if (nu < -0.5 && (scaled || x < 700)) {
        /* down from nu0 = nu + m in (-1/2, 1/2]: E_(k-1) = (e^-x + (1-k) E_k)/x (DLMF
         * 8.19.12), a sum of positive terms at every step (where Gamma(1-nu) from the C
         * library's tgamma would cost a few ulps) */
        double m = ceil(-nu - 0.5), nu0 = nu + m; /* exact: Sterbenz */
        double e = expint_nu(nu0, x, scaled);
        for (double k = nu0; k > nu + 0.5; k -= 1)
            e = (ex + (1 - k) * e) / x;
        return e;
    }
    double sc = scaled ? exp(x) : 1; /* x <= 2 - nu: no overflow below nu = -700 */
    if (nu < 0.5) {
        /* a = 1 - nu > 1/2: Gamma(a) Q(a, x), in logarithms where Gamma(a) overflows (the
         * fraction above loses digits to its negative b0 = x + nu here) */
        double a = 1 - nu, g = cr_sf_gamma_upper(a, x), p = pow(x, nu - 1);
        if (isfinite(g) && isfinite(p) && isfinite(sc) && g > 0 && p > 0)
            return sc * p * g;
        /* Q(a, x) >= about 1/2 for x <= a + 1: its logarithm is finite */
        return exp((scaled ? x : 0) + (nu - 1) * log(x) + cr_sf_loggamma_upper(a, x));
    }
    /* x <= 1; nu0 = nu - m in [1/2, 3/2], then upward: E_(k+1) = (e^-x - x E_k)/k (DLMF 8.19.12);
     * for x <= 1 the subtraction loses at most a factor (x + k + 1)/k and the relative
     * error of E_k shrinks at each step */
    double m = nu > 1.5 ? ceil(nu - 1.5) : 0, nu0 = nu - m;
    double e = nu0 == 1 ? cr_sf_expint(x) : pow(x, nu0 - 1) * upper_small(1 - nu0, x);
    double emx = exp(-x);
    for (double k = nu0; k < nu - 0.5; k += 1)
        e = (emx - x * e) / k;
    return sc * e;
}

double cr_sf_expint2(double nu, double x)
{
    return expint_nu(nu, x, false);
}

double cr_sf_expintx2(double nu, double x)
{
    return expint_nu(nu, x, true);
}

/* ==== Rules ================================================================================ */

/* Sampling boxes of the rule tester: inside each function's domain, away from poles. */
static const double k_pos_lo[] = {0.1, 0.1}, k_pos_hi[] = {6.0, 6.0};
static const double k_unit_lo[] = {-0.95}, k_unit_hi[] = {0.95};
static const double k_two_lo[] = {0.05}, k_two_hi[] = {1.95};
static const double k_erfcx_lo[] = {-3.0}, k_erfcx_hi[] = {6.0};
static const double k_bessel_y_lo[] = {0.2}, k_bessel_y_hi[] = {10.0};

/* digamma(x): trigamma(x) */
REAL_ROW1(digamma, cr_sf_digamma(x[0]), cr_sf_trigamma(x[0]),
          .test = {.lo = k_pos_lo, .hi = k_pos_hi}, .notes = "poles at 0, -1, -2, ...")

/* trigamma(x): polygamma(2, x) */
REAL_ROW1(trigamma, cr_sf_trigamma(x[0]), cr_sf_polygamma(2, x[0]),
          .test = {.lo = k_pos_lo, .hi = k_pos_hi}, .notes = "poles at 0, -1, -2, ...")

/* erfinv(x): sqrt(pi)/2 exp(Ω²), with Ω² split exactly (exp_sq) because exp amplifies the
 * rounding of Ω² (up to 7e-14 relative in the tails). */
CR_SCALAR_EVALS_REAL(erfinv, 1, 1, Y[0] = cr_sf_erfinv(x[0]), D[0] = SQRT_PI_OVER_2 * exp_sq(Y[0]))
static const cr_scalar_rule erfinv_row = CR_SCALAR_ROW_REAL_EX(
    erfinv, .test = {.lo = k_unit_lo, .hi = k_unit_hi}, .notes = "-1 < x < 1");
DEFINE_FN(erfinv, "erfinv", 1)

/* erfcinv(x): -sqrt(pi)/2 exp(Ω²) */
CR_SCALAR_EVALS_REAL(erfcinv, 1, 1, Y[0] = cr_sf_erfcinv(x[0]),
                     D[0] = -SQRT_PI_OVER_2 * exp_sq(Y[0]))
static const cr_scalar_rule erfcinv_row =
    CR_SCALAR_ROW_REAL_EX(erfcinv, .test = {.lo = k_two_lo, .hi = k_two_hi}, .notes = "0 < x < 2");
DEFINE_FN(erfcinv, "erfcinv", 1)

/* erfcx(x): 2xΩ - 2/sqrt(pi), from the continued fraction for x >= 2 (no cancellation) */
REAL_ROW1(erfcx, cr_sf_erfcx(x[0]), erfcx_deriv(x[0], Y[0]),
          .test = {.lo = k_erfcx_lo, .hi = k_erfcx_hi})

/* logerfc(x): -2 exp(-x² - Ω)/sqrt(pi) = -2/(sqrt(pi) erfcx(x)); the second form has no
 * cancellation in the exponent for large x. */
REAL_ROW1(logerfc, cr_sf_logerfc(x[0]), -TWO_OVER_SQRT_PI / cr_sf_erfcx(x[0]),
          .test = {.lo = k_erfcx_lo, .hi = k_erfcx_hi})

/* beta(a, b): Ω(psi(a) - psi(a+b)), Ω(psi(b) - psi(a+b)) */
REAL_ROW(beta, 2, Y[0] = cr_sf_beta(x[0], x[1]), D[0] = Y[0] * digamma_diff(x[0], x[1]);
         D[1] = Y[0] * digamma_diff(x[1], x[0]), .test = {.lo = k_pos_lo, .hi = k_pos_hi})

/* logbeta(a, b): psi(a) - psi(a+b), psi(b) - psi(a+b) */
REAL_ROW(logbeta, 2, Y[0] = cr_sf_logbeta(x[0], x[1]), D[0] = digamma_diff(x[0], x[1]);
         D[1] = digamma_diff(x[1], x[0]), .test = {.lo = k_pos_lo, .hi = k_pos_hi})

/* loggamma(x): digamma(x) */
REAL_ROW1(loggamma, cr_sf_loggamma(x[0]), cr_sf_digamma(x[0]),
          .test = {.lo = k_pos_lo, .hi = k_pos_hi}, .notes = "NaN where Gamma(x) < 0")

/* logabsgamma(x) = (log|Gamma(x)|, sign): (digamma(x), 0) */
CR_SCALAR_EVALS_REAL(logabsgamma, 1, 2, int sg = 1; Y[0] = cr_sf_logabsgamma(x[0], &sg);
                     Y[1] = (T)sg, D[0] = cr_sf_digamma(x[0]); D[1] = 0)
static const cr_scalar_rule logabsgamma_row =
    CR_SCALAR_ROW_REAL_EX(logabsgamma, .test = {.lo = k_pos_lo, .hi = k_pos_hi},
                          .notes = "the sign is a real output with a zero derivative");
DEFINE_FN(logabsgamma, "logabsgamma", 1)

/* expint(x) = E1(x): -exp(-x)/x, holomorphic off the negative real axis: the row has a
 * complex instantiation (cr_sf_expint_complex), which also gives E1 at x < 0 as
 * expint(x ± 0i) = -Ei(-x) ∓ iπ. */
#define EXPINT_G(X) _Generic((X), cr_complex : cr_sf_expint_complex, default : cr_sf_expint)(X)
ROW1(expint, EXPINT_G(x[0]), -exp(-x[0]) / x[0], .test = {.lo = k_pos_lo, .hi = k_pos_hi},
     .notes = "x > 0 for a real x; complex z: principal branch, cut on the negative real axis")

/* Bessel functions of orders 0 and 1 (DLMF 10.6.2, 10.6.3): J0' = -J1,
 * J1' = (J0 - J2)/2 (finite at 0, unlike J0 - J1/x), and the same for Y. */
CR_SCALAR_EVALS_REAL(j0, 1, 1, Y[0] = j0(x[0]), D[0] = -j1(x[0]))
static const cr_scalar_rule j0_row = CR_SCALAR_ROW_REAL(j0);
DEFINE_FN(j0, "j0", 1)

CR_SCALAR_EVALS_REAL(j1, 1, 1, Y[0] = j1(x[0]), D[0] = (j0(x[0]) - jn(2, x[0])) / 2)
static const cr_scalar_rule j1_row = CR_SCALAR_ROW_REAL(j1);
DEFINE_FN(j1, "j1", 1)

REAL_ROW1(y0, y0(x[0]), -y1(x[0]), .test = {.lo = k_bessel_y_lo, .hi = k_bessel_y_hi},
          .notes = "x > 0")

REAL_ROW1(y1, y1(x[0]), (y0(x[0]) - yn(2, x[0])) / 2,
          .test = {.lo = k_bessel_y_lo, .hi = k_bessel_y_hi}, .notes = "x > 0")

static const cr__sf_row k_rows[] = {
    FN_ROW(digamma), FN_ROW(trigamma), FN_ROW(erfinv),  FN_ROW(erfcinv),  FN_ROW(erfcx),
    FN_ROW(logerfc), FN_ROW(beta),     FN_ROW(logbeta), FN_ROW(loggamma), FN_ROW(logabsgamma),
    FN_ROW(expint),  FN_ROW(j0),       FN_ROW(j1),      FN_ROW(y0),       FN_ROW(y1),
};

/* ---- Shared pieces of the hand-written rules ---------------------------------------------- */

/* A real argument as a double (CR_EINVAL for other kinds). */
cr_status cr__sf_arg_real(cr_arena *arena, const char *name, const cr_value *v, size_t j, double *x)
{
    cr_complex z;
    *x = 0; /* set on every path: callers read it only on success */
    if (v->kind == CR_KIND_C128 || !cr__value_number(v, &z))
        return CR__FAIL(arena, CR_EINVAL, "%s: argument %zu is a %s, not a real number", name,
                        j + 1, cr_kind_name(v->kind));
    *x = creal(z);
    return CR_OK;
}

/* The real number a tangent carries (unthunked); *nonzero is false for the zeros. A
 * NotImplemented tangent is reported as *ni (it propagates; it is not an error here). */
static cr_status tangent_real(cr_arena *arena, const char *who, cr_tangent t, double *v,
                              bool *nonzero, const cr_notimpl **ni)
{
    *v = 0;
    if (ni != NULL)
        *ni = NULL;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    cr_complex z;
    cr__tan_number k = cr__tangent_number(t, &z);
    *nonzero = k == CR__TN_NUMBER || k == CR__TN_NOTIMPL;
    *v = creal(z); /* a real primal's tangent: the real part of a complex one */
    if (k == CR__TN_NOTIMPL && ni != NULL) {
        *ni = t.u.ni;
        return CR_OK;
    }
    if (k == CR__TN_NOTIMPL)
        return cr__notimpl_error(arena, who, t);
    if (k == CR__TN_OTHER)
        return CR__FAIL(arena, CR_ETANGENT, "%s: expected a real tangent, got %s", who,
                        cr_tag_name((cr_tag)t.tag));
    return CR_OK;
}

/* ---- Functions of an integer order and a real argument: polygamma, jn, yn ----------------- */

/* The order is an integer (C's int): NoTangent. The derivative in x is df(n, x). */
typedef struct order_fn {
    const char *name;
    double (*f)(int n, double x);
    double (*df)(int n, double x);
    const char *pullback_name;
} order_fn;

/* polygamma(m, x): d/dx = polygamma(m + 1, x) */
static double polygamma_dx(int m, double x)
{
    return cr_sf_polygamma(m + 1, x);
}

/* jn(n, x), yn(n, x): d/dx = (C(n-1) - C(n+1))/2 (DLMF 10.6.1), any integer n. */
static double jn_dx(int n, double x)
{
    return (jn(n - 1, x) - jn(n + 1, x)) / 2;
}

/* Where Y(n-1) and Y(n+1) both overflow to the same infinity (an order large against x),
 * their difference is that of the larger order's, whose magnitude dominates: Y(n+1) for
 * n > 0, Y(n-1) for n < 0 (Y(-n) = (-1)^n Y(n)); not inf - inf = NaN. */
static double yn_dx(int n, double x)
{
    double a = yn(n - 1, x), b = yn(n + 1, x);
    if (isinf(a) && isinf(b) && a == b)
        return n > 0 ? -b : a;
    return (a - b) / 2;
}

static double jn_value(int n, double x)
{
    return jn(n, x);
}

static double yn_value(int n, double x)
{
    return yn(n, x);
}

static const order_fn k_polygamma = {"polygamma", cr_sf_polygamma, polygamma_dx,
                                     "polygamma_pullback"};
static const order_fn k_jn = {"jn", jn_value, jn_dx, "jn_pullback"};
static const order_fn k_yn = {"yn", yn_value, yn_dx, "yn_pullback"};

/* The largest |order| of jn and yn: the C library's jn and yn take time proportional to
 * the order (about 30 ns a unit here: 56 s at 2^31), so larger orders are refused with
 * CR_EDOMAIN rather than run for seconds (docs/rules-complex-special.md). */
#define BESSEL_MAX_ORDER 100000

/* ∂f/∂x, NaN where the value is NaN: a domain error gives NaN value and derivative alike. */
static double order_d(const order_fn *of, int n, double x, double y)
{
    return isnan(y) ? y : of->df(n, x);
}

/* The order and the argument; the order must be an integer with n ± 1 representable. */
static cr_status order_args(cr_arena *arena, const order_fn *of, const cr_value *args, size_t nargs,
                            int *n, double *x)
{
    *n = 0;
    *x = 0;
    if (nargs != 2)
        return CR__FAIL(arena, CR_EINVAL, "%s takes 2 arguments, %zu given", of->name, nargs);
    if (!cr__is_int_kind(args[0].kind))
        return CR__FAIL(arena, CR_EINVAL, "%s: the order must be an integer, not a %s", of->name,
                        cr_kind_name(args[0].kind));
    int64_t n64 = args[0].kind == CR_KIND_BOOL ? (int64_t)args[0].u.b : args[0].u.i64;
    if (n64 <= INT_MIN || n64 >= INT_MAX)
        return CR__FAIL(arena, CR_EDOMAIN, "%s: order %lld out of range", of->name, (long long)n64);
    if (of == &k_polygamma && n64 < 0)
        return CR__FAIL(arena, CR_EDOMAIN, "%s: order %lld is negative (m >= 0)", of->name,
                        (long long)n64);
    if (of != &k_polygamma && (n64 > BESSEL_MAX_ORDER || n64 < -BESSEL_MAX_ORDER))
        return CR__FAIL(arena, CR_EDOMAIN, "%s: order %lld beyond the supported +-%d", of->name,
                        (long long)n64, BESSEL_MAX_ORDER);
    *n = (int)n64;
    return cr__sf_arg_real(arena, of->name, &args[1], 1, x);
}

/* The output has the argument's precision: f32 for a float x, f64 otherwise. */
static cr_value order_value(const cr_value *xarg, double y)
{
    return xarg->kind == CR_KIND_F32 ? cr_value_f32((float)y) : cr_value_f64(y);
}

static cr_status order_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    const order_fn *of = f->u.func.fn->udata;
    int n = 0;
    double x = 0;
    cr_status st = order_args(arena, of, args, nargs, &n, &x);
    if (st != CR_OK)
        return st;
    *out = order_value(&args[1], of->f(n, x));
    return CR_OK;
}

static cr_status order_frule(CR__FRULE_PARAMS)
{
    const order_fn *of = udata;
    int n = 0;
    double x, xd;
    bool nz;
    cr_status st = order_args(arena, of, args, nargs, &n, &x);
    if (st != CR_OK)
        return st;
    st = tangent_real(arena, of->name, dargs[2], &xd, &nz, NULL);
    if (st != CR_OK)
        return st;
    double v = of->f(n, x);
    *y = order_value(&args[1], v);
    if (!nz || cr__is_int_kind(args[1].kind)) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    double t = order_d(of, n, x, v) * xd;
    *dy = args[1].kind == CR_KIND_F32 ? cr_tangent_f32((float)t) : cr_tangent_f64(t);
    return CR_OK;
}

typedef struct order_env {
    double d;      /* ∂f/∂x */
    uint8_t xkind; /* for the projection */
} order_env;

/* (NoTangent, NoTangent for the order, ∂f/∂x · ȳ) */
static cr_status order_pullback(CR__PULLBACK_PARAMS)
{
    const order_env *e = env;
    double g;
    bool nz;
    cr_status st = tangent_real(arena, "order_pullback", *dy, &g, &nz, NULL);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_none();
    dx[2] = cr__is_int_kind((cr_kind)e->xkind) ? cr_tangent_none()
            : nz                               ? cr__project_real((cr_kind)e->xkind, e->d * g)
                                               : cr_tangent_zero();
    return CR_OK;
}

static cr_status order_rrule(CR__RRULE_PARAMS)
{
    const order_fn *of = udata;
    int n = 0;
    double x = 0;
    cr_status st = order_args(arena, of, args, nargs, &n, &x);
    if (st != CR_OK)
        return st;
    CR__ARENA_NEW(arena, order_env, e);
    double v = of->f(n, x);
    e->d = order_d(of, n, x, v);
    e->xkind = (uint8_t)args[1].kind;
    *y = order_value(&args[1], v);
    *pb = (cr_pullback){order_pullback, e, of->pullback_name, 3};
    return CR_OK;
}

SF_ORDER_FUNCTION(polygamma, order_primal, &k_polygamma)
SF_ORDER_FUNCTION(jn, order_primal, &k_jn)
SF_ORDER_FUNCTION(yn, order_primal, &k_yn)

/* ---- gamma_inc(a, x) = (P, Q) ------------------------------------------------------------ */

#define GAMMA_INC_INFO                                                            \
    "the derivative of gamma_inc with respect to the order a is not implemented " \
    "(SpecialFunctions.jl issue 317)"

static const cr_field k_pq_fields[2] = {{NULL, 0, CR_KIND_F64, NULL},
                                        {NULL, sizeof(double), CR_KIND_F64, NULL}};
static const cr_type k_pq_type = {"tuple(f64,f64)", 2 * sizeof(double), 2, k_pq_fields};

/* ∂P/∂x = x^(a-1) e^-x / Gamma(a) (DLMF 8.8.13), with its limits at x = 0. */
static double gamma_inc_dx(double a, double x)
{
    if (!(a > 0) || !(x >= 0))
        return NAN_D;
    if (x == 0)
        return a > 1 ? 0.0 : a == 1 ? 1.0 : INF;
    if (x == INF)
        return 0;
    return gamma_prefix(a, x) / x;
}

static cr_status gamma_inc_args(cr_arena *arena, const cr_value *args, size_t nargs, double *a,
                                double *x)
{
    *a = 0;
    *x = 0;
    if (nargs != 2 && nargs != 3)
        return CR__FAIL(arena, CR_EINVAL, "gamma_inc takes 2 or 3 arguments, %zu given", nargs);
    /* SpecialFunctions' gamma_inc(a, x, IND): IND = 0, 1, 2 asks for 14, 6 or 3 digits; the
     * full accuracy is computed for every IND. */
    if (nargs == 3 &&
        (!cr__is_int_kind(args[2].kind) || (args[2].kind == CR_KIND_BOOL ? 0 : args[2].u.i64) < 0 ||
         (args[2].kind == CR_KIND_BOOL ? 0 : args[2].u.i64) > 2))
        return CR__FAIL(arena, CR_EINVAL, "gamma_inc: IND must be the integer 0, 1 or 2");
    cr_status st = cr__sf_arg_real(arena, "gamma_inc", &args[0], 0, a);
    if (st == CR_OK)
        st = cr__sf_arg_real(arena, "gamma_inc", &args[1], 1, x);
    return st;
}

static cr_status gamma_inc_output(cr_arena *arena, double a, double x, cr_value *y)
{
    double *pq = cr_arena_alloc(arena, 2 * sizeof(double), _Alignof(double));
    if (pq == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_sf_gamma_inc(a, x, &pq[0], &pq[1]);
    *y = cr_value_struct(&k_pq_type, pq);
    return CR_OK;
}

static cr_status gamma_inc_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                  size_t nargs, cr_value *out)
{
    (void)f;
    double a = 0, x = 0;
    cr_status st = gamma_inc_args(arena, args, nargs, &a, &x);
    if (st != CR_OK)
        return st;
    return gamma_inc_output(arena, a, x, out);
}

/* (ΔP, ΔQ) = (NotImplemented·Δa + z Δx, NotImplemented·Δa - z Δx), z = ∂P/∂x: with
 * ChainRules' algebra a zero Δa drops the NotImplemented term, and a nonzero one makes
 * both components NotImplemented. An integer a is not perturbed at all. */
static cr_status gamma_inc_frule(CR__FRULE_PARAMS)
{
    double a, x, ad, xd;
    bool anz, xnz;
    const cr_notimpl *ani;
    cr_status st = gamma_inc_args(arena, args, nargs, &a, &x);
    if (st == CR_OK)
        st = tangent_real(arena, "gamma_inc", dargs[1], &ad, &anz, &ani);
    if (st == CR_OK)
        st = tangent_real(arena, "gamma_inc", dargs[2], &xd, &xnz, NULL);
    if (st == CR_OK)
        st = gamma_inc_output(arena, a, x, y);
    if (st != CR_OK)
        return st;
    anz = (anz || ani != NULL) && !cr__is_int_kind(args[0].kind);
    xnz = xnz && !cr__is_int_kind(args[1].kind);
    if (!anz && !xnz) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_tangent fields[2];
    if (anz) {
        st = CR_NOT_IMPLEMENTED(arena, GAMMA_INC_INFO, &fields[0]);
        if (st != CR_OK)
            return st;
        fields[1] = fields[0];
    } else {
        double z = gamma_inc_dx(a, x) * xd;
        fields[0] = cr_tangent_f64(z);
        fields[1] = cr_tangent_f64(-z);
    }
    return cr_tangent_struct(arena, &k_pq_type, NULL, fields, 2, dy);
}

typedef struct gamma_inc_env {
    double z; /* ∂P/∂x */
    uint8_t akind, xkind;
} gamma_inc_env;

/* (NoTangent, NotImplemented, z (P̄ - Q̄)) */
static cr_status gamma_inc_pullback(CR__PULLBACK_PARAMS)
{
    const gamma_inc_env *e = env;
    cr_tangent d;
    cr_status st = cr__tuple_cotangent(arena, "gamma_inc_pullback", "a tuple (P, Q)", *dy, &d);
    if (st != CR_OK)
        return st;
    double gp, gq;
    bool pnz, qnz;
    st = tangent_real(arena, "gamma_inc_pullback", cr_tangent_field(d, 0), &gp, &pnz, NULL);
    if (st == CR_OK)
        st = tangent_real(arena, "gamma_inc_pullback", cr_tangent_field(d, 1), &gq, &qnz, NULL);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    if (cr__is_int_kind((cr_kind)e->akind))
        dx[1] = cr_tangent_none();
    else if (pnz || qnz) {
        st = CR_NOT_IMPLEMENTED(arena, GAMMA_INC_INFO, &dx[1]);
        if (st != CR_OK)
            return st;
    } else
        dx[1] = cr_tangent_zero();
    dx[2] = cr__is_int_kind((cr_kind)e->xkind) ? cr_tangent_none()
            : pnz || qnz ? cr__project_real((cr_kind)e->xkind, e->z * (gp - gq))
                         : cr_tangent_zero();
    if (nx > 3)
        dx[3] = cr_tangent_none(); /* IND */
    return CR_OK;
}

static cr_status gamma_inc_rrule(CR__RRULE_PARAMS)
{
    double a = 0, x = 0;
    cr_status st = gamma_inc_args(arena, args, nargs, &a, &x);
    if (st == CR_OK)
        st = gamma_inc_output(arena, a, x, y);
    if (st != CR_OK)
        return st;
    CR__ARENA_NEW(arena, gamma_inc_env, e);
    e->z = gamma_inc_dx(a, x);
    e->akind = (uint8_t)args[0].kind;
    e->xkind = (uint8_t)args[1].kind;
    *pb = (cr_pullback){gamma_inc_pullback, e, "gamma_inc_pullback", nargs + 1};
    return CR_OK;
}

static const cr_function gamma_inc_function = {
    .name = "gamma_inc", .arity = -1, .primal = gamma_inc_primal}; /* 2 or 3 arguments */
const cr_value cr_fn_gamma_inc = {.kind = CR_KIND_FUNC, .u.func = {&gamma_inc_function, NULL}};

/* ---- Registration ------------------------------------------------------------------------ */

/* Arguments of the order functions for the rule tester: an integer order 0..4 and
 * x in [0.5, 8] (positive: the domain of yn and where polygamma has no poles). */
static cr_status order_sample(CR__SAMPLE_PARAMS)
{
    if (nargs != 2)
        return CR_EINVAL;
    uint64_t s = cr__rng_next(rng);
    args[0] = cr_value_i64((int64_t)(s % 5));
    args[1] = cr_value_f64(0.5 + 7.5 * ((double)(s >> 11) * 0x1.0p-53));
    return CR_OK;
}

static const cr_rule_test k_order_test = {.sample = order_sample};
static const double k_gamma_inc_lo[] = {0.3, 0.1}, k_gamma_inc_hi[] = {6.0, 8.0};
static const cr_rule_test k_gamma_inc_test = {.lo = k_gamma_inc_lo, .hi = k_gamma_inc_hi};

/* gamma_inc(a, x, IND): a and x as above, IND = 0, 1 or 2. */
static cr_status gamma_inc3_sample(CR__SAMPLE_PARAMS)
{
    if (nargs != 3)
        return CR_EINVAL;
    for (int k = 0; k < 2; k++)
        args[k] = cr_value_f64(cr__rng_unif(rng, k_gamma_inc_lo[k], k_gamma_inc_hi[k]));
    args[2] = cr_value_i64((int64_t)cr__rng_unif(rng, 0, 3));
    return CR_OK;
}

static const cr_rule_test k_gamma_inc3_test = {.sample = gamma_inc3_sample};

double cr__sf_erfcx_deriv(double x, double y)
{
    return erfcx_deriv(x, y);
}

double cr__sf_gamma_inc_dx(double a, double x)
{
    return gamma_inc_dx(a, x);
}

cr_status cr__sf_register_rows(cr_registry *reg, const cr__sf_row *k, size_t n)
{
    cr_status st = CR_OK;
    for (size_t i = 0; i < n && st == CR_OK; i++)
        st = cr_scalar_rule_register(reg, k[i].fn, k[i].row);
    return st;
}

cr_status cr__family_special(cr_registry *reg)
{
    cr_status st = cr__sf_register_rows(reg, k_rows, sizeof k_rows / sizeof k_rows[0]);
    const cr_argspec int_real[2] = {CR_ARG_INT, CR_ARG_REAL};
    const cr_function *order_fns[] = {&polygamma_function, &jn_function, &yn_function};
    for (size_t i = 0; i < sizeof order_fns / sizeof order_fns[0] && st == CR_OK; i++)
        st = cr__register(reg, order_fns[i], int_real, 2, false, order_frule, order_rrule,
                          order_fns[i]->udata, &k_order_test);
    /* gamma_inc(a, x) and gamma_inc(a, x, IND) */
    const cr_argspec real2_int[3] = {CR_ARG_REAL, CR_ARG_REAL, CR_ARG_INT};
    if (st == CR_OK)
        st = cr__register(reg, &gamma_inc_function, real2_int, 2, false, gamma_inc_frule,
                          gamma_inc_rrule, NULL, &k_gamma_inc_test);
    if (st == CR_OK)
        st = cr__register(reg, &gamma_inc_function, real2_int, 3, false, gamma_inc_frule,
                          gamma_inc_rrule, NULL, &k_gamma_inc3_test);
    return st == CR_OK ? cr__special_register_bessel_integrals(reg) : st;
}
