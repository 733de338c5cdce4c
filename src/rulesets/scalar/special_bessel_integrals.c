/*
 * Part of the special-function family (special_gamma_erf.c registers it): Airy functions, Bessel
 * functions of real order (J, Y, I, K, their scaled forms and the Hankel functions), Dawson's
 * integral, erfi, logerfcx, invdigamma, the exponential integrals expintx and expinti, the sine and
 * cosine integrals and the complete elliptic integrals. The primals are written here from the
 * published mathematics: Temme's series and Steed's continued fractions for the Bessel
 * functions (N. M. Temme, J. Comput. Phys. 19 (1975) 324 and 21 (1976) 343; Barnett, Feng,
 * Steed and Goldfarb, Comput. Phys. Commun. 8 (1974) 377), the Hankel asymptotic expansion
 * for large arguments (DLMF 10.17), the Airy functions through Bessel functions of order
 * 1/3 and 2/3 (DLMF 9.6) and their Maclaurin series (DLMF 9.4), Carlson's duplication
 * algorithm for the elliptic integrals (B. C. Carlson, Numer. Algorithms 10 (1995) 13), the
 * continued fraction of E1 for complex arguments (DLMF 6.9.1) for Si and Ci. The rules follow
 * SpecialFunctions.jl's ChainRules extension: derivatives in the argument in closed form, the
 * derivative in a real order NotImplemented (an integer order gets NoTangent).
 */
#if !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1 /* lgamma_r */
#endif

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <chainrules/rules_special.h>

#include "special_impl.h"

#define SQRT3 1.73205080756887729353

/* ---- Helpers ------------------------------------------------------------------------------ */

/* sin(pi v) and cos(pi v) with the period removed exactly (exact zeros at the integers and
 * half-integers). */
static void sincos_pi(double v, double *s, double *c)
{
    double n = nearbyint(2 * v); /* v = n/2 + r, |r| <= 1/4 */
    double r = v - n / 2;
    double sr = sin(PI * r), cr = cos(PI * r);
    switch ((int)fmod(fmod(n, 4.0) + 4.0, 4.0)) {
    case 0:
        *s = sr;
        *c = cr;
        break;
    case 1:
        *s = cr;
        *c = -sr;
        break;
    case 2:
        *s = -sr;
        *c = -cr;
        break;
    default:
        *s = -cr;
        *c = sr;
        break;
    }
}

static bool is_integer(double v)
{
    return isfinite(v) && v == nearbyint(v);
}

/* (-1)^n for an integer-valued double. */
static double parity(double n)
{
    return fmod(n, 2.0) == 0 ? 1.0 : -1.0;
}

/* ---- Dawson's integral and erfi (DLMF 7.5, 7.6, 7.12) ---------------------------------- */

/* sqrt(pi)/2 erfi(x) e^(-x²)·e^(x²) = sum x^(2k+1)/(k!(2k+1)) for x >= 0 (DLMF 7.6.7): positive
 * terms, no cancellation. Used up to 7, where the sum is e^49/14. */
static double erfi_sum(double x)
{
    double t = x, s = 0, x2 = x * x;
    for (int k = 0; k < 1000; k++) {
        double term = t / (2 * k + 1);
        s += term;
        if (term <= 1e-17 * s && (double)k > x2)
            break;
        t *= x2 / (k + 1);
    }
    return s;
}

/* F(x) ~ 1/(2x) sum (2k-1)!!/(2x²)^k (DLMF 7.12.1 through 7.5.1), x >= 7: the smallest
 * term is about e^(-x²) < 1e-21 of the sum. */
static double dawson_asymptotic(double x)
{
    if (x > 1e150)
        return 0.5 / x;
    double t = 1, s = 1, u = 1 / (2 * x * x);
    for (int k = 1; k < 60; k++) {
        t *= (2 * k - 1) * u;
        s += t;
        if (t <= 1e-17 * s)
            break;
    }
    return s / (2 * x);
}

#define DAWSON_SWITCH 7.0

double cr_sf_dawson(double x)
{
    if (isnan(x))
        return x;
    double a = fabs(x);
    double f = a < DAWSON_SWITCH ? erfi_sum(a) / exp_sq(a) : dawson_asymptotic(a);
    return copysign(f, x);
}

double cr_sf_erfi(double x)
{
    if (isnan(x))
        return x;
    double a = fabs(x);
    double f = a < DAWSON_SWITCH ? TWO_OVER_SQRT_PI * erfi_sum(a)
               : a > 27.3        ? INF
                                 : TWO_OVER_SQRT_PI * exp_sq(a) * dawson_asymptotic(a);
    return copysign(f, x);
}

/* ---- logerfcx --------------------------------------------------------------------------- */

double cr_sf_logerfcx(double x)
{
    if (isnan(x))
        return x;
    if (x < -6) /* erfc(x) = 2 - erfc(-x), erfc(6) < 2.2e-17: 2 to double precision */
        return x * x + 0.69314718055994530942;
    if (fabs(x) < 0.5) /* erfcx near 1: x² + log(1 - erf(x)) keeps the relative accuracy */
        return x * x + log1p(-erf(x));
    return log(cr_sf_erfcx(x));
}

/* d/dx log erfcx(x) = erfcx'(x)/erfcx(x) = 2x - 2/(sqrt(pi) erfcx(x)) */
static double logerfcx_dx(double x)
{
    if (x < -6)
        return 2 * x - exp(-x * x) / SQRT_PI;
    double e = cr_sf_erfcx(x);
    return cr__sf_erfcx_deriv(x, e) / e;
}

/* ---- invdigamma ------------------------------------------------------------------------- */

/* The x > 0 with psi(x) = y, by Newton's method (psi is increasing and concave on x > 0, so
 * from below the root the iterates increase to it; a step past 0 is halved instead). */
double cr_sf_invdigamma(double y)
{
    if (isnan(y))
        return y;
    if (y == INF)
        return INF;
    if (y == -INF)
        return 0;
    /* psi(x) ~ log(x - 1/2) for large x, psi(x) ~ -1/x - gamma for small x. */
    double x = y >= -2.22 ? exp(y) + 0.5 : -1 / (y + EULER_GAMMA);
    if (isinf(x))
        return x;
    for (int it = 0; it < 100; it++) {
        double step = (cr_sf_digamma(x) - y) / cr_sf_trigamma(x);
        double xn = x - step;
        if (!(xn > 0))
            xn = x / 2;
        if (fabs(xn - x) <= 4 * DBL_EPSILON * xn) {
            x = xn;
            break;
        }
        x = xn;
    }
    return x;
}

/* ---- Exponential integrals: expintx, expinti (DLMF 6.2, 6.6, 6.12) ---------------------- */

double cr_sf_expintx(double x)
{
    if (isnan(x) || x < 0)
        return NAN_D;
    if (x == 0)
        return INF;
    if (x <= 700)
        return exp(x) * cr_sf_expint(x);
    /* e^x E1(x) ~ (1/x) sum (-1)^k k!/x^k (DLMF 6.12.1): at x > 700, 7 terms give 1e-19. */
    double t = 1, s = 1;
    for (int k = 1; k < 20; k++) {
        t *= -k / x;
        s += t;
        if (fabs(t) <= 1e-17)
            break;
    }
    return s / x;
}

/* The positive zero of Ei (the logarithm of Soldner's constant), as hi + lo. */
#define EI_ROOT_HI 0.3725074107813666
#define EI_ROOT_LO 1.3140183414386028e-17

/* Ei(x) for x near its zero x0: Ei(x) = log(x/x0) + sum (x^k - x0^k)/(k k!) (DLMF 6.6.1 at x
 * and at x0), with x^k - x0^k = (x - x0) s_k, s_k = sum_j x^j x0^(k-1-j): both terms have
 * the sign of x - x0, so nothing cancels. */
static double expinti_near_root(double x)
{
    double d = (x - EI_ROOT_HI) - EI_ROOT_LO;
    double x0 = EI_ROOT_HI;
    double s = 1, p = x0, fact = 1, sum = 0; /* s = s_k, p = x0^k */
    for (int k = 1; k < 40; k++) {
        fact *= k;
        double term = s / (k * fact);
        sum += term;
        if (term <= 1e-17 * sum)
            break;
        s = x * s + p;
        p *= x0;
    }
    return log1p(d / x0) + d * sum;
}

double cr_sf_expinti(double x)
{
    if (isnan(x))
        return x;
    if (x == 0)
        return -INF;
    if (x < 0)
        return -cr_sf_expint(-x);
    if (x > 709.8)
        return INF;
    if (x >= 0.2 && x <= 0.6)
        return expinti_near_root(x);
    if (x < 50) {
        /* gamma + log x + sum x^k/(k k!) (DLMF 6.6.1): positive terms. */
        double t = 1, s = 0;
        for (int k = 1; k < 500; k++) {
            t *= x / k;
            double term = t / k;
            s += term;
            if (term <= 1e-17 * s)
                break;
        }
        return EULER_GAMMA + log(x) + s;
    }
    /* e^x/x sum k!/x^k (DLMF 6.12.2): at x >= 50 the smallest term is below 1e-21. */
    double t = 1, s = 1;
    for (int k = 1; k < 60; k++) {
        double tn = t * k / x;
        if (tn > t)
            break;
        t = tn;
        s += t;
        if (t <= 1e-17 * s)
            break;
    }
    return exp(x) / x * s;
}

/* ---- Sine and cosine integrals (DLMF 6.2, 6.6, 6.9) ------------------------------------- */

/* E1(iy) for y >= 4 from its continued fraction, evaluated backwards from depth n
 * (DLMF 6.9.1 even form: E1(z) = e^-z / (z + 1 - 1²/(z + 3 - 2²/(z + 5 - ...)))). */
static cr_complex e1_imag_cf(double y, int n)
{
    cr_complex z = cr__c(0.0, y);
    cr_complex t = z + (2.0 * n + 1);
    for (int k = n; k >= 1; k--)
        t = z + (2.0 * (k - 1) + 1) - (double)k * (double)k / t;
    return 1 / t;
}

static cr_complex e1_imag(double y)
{
    cr_complex f = e1_imag_cf(y, 32);
    for (int n = 64; n <= (1 << 16); n *= 2) {
        cr_complex g = e1_imag_cf(y, n);
        if (cabs(g - f) <= 1e-17 * cabs(g))
            return g * cr__c(cos(y), -sin(y));
        f = g;
    }
    return f * cr__c(cos(y), -sin(y));
}

#define SICI_SWITCH 4.0

double cr_sf_sinint(double x)
{
    if (isnan(x))
        return x;
    double a = fabs(x), si;
    if (isinf(a))
        si = PI / 2;
    else if (a <= SICI_SWITCH) {
        /* sum (-1)^k x^(2k+1)/((2k+1)(2k+1)!) (DLMF 6.6.5) */
        double t = a, s = 0, a2 = a * a;
        for (int k = 0; k < 60; k++) {
            double term = t / (2 * k + 1);
            s += term;
            if (fabs(term) <= 1e-17 * fabs(s))
                break;
            t *= -a2 / ((2 * k + 2) * (2 * k + 3));
        }
        si = s;
    } else /* E1(ix) = -Ci(x) + i(Si(x) - pi/2) (DLMF 6.5.5, 6.2.15) */
        si = PI / 2 + cimag(e1_imag(a));
    return copysign(si, x);
}

double cr_sf_cosint(double x)
{
    if (isnan(x) || x < 0)
        return NAN_D;
    if (x == 0)
        return -INF;
    if (isinf(x))
        return 0;
    if (x <= SICI_SWITCH) {
        /* gamma + log x + sum (-1)^k x^(2k)/(2k (2k)!) (DLMF 6.6.6) */
        double t = 1, s = 0, x2 = x * x;
        for (int k = 1; k < 60; k++) {
            t *= -x2 / ((2 * k - 1) * (2 * k));
            double term = t / (2 * k);
            s += term;
            if (fabs(term) <= 1e-17 * fabs(s))
                break;
        }
        return EULER_GAMMA + log(x) + s;
    }
    return -creal(e1_imag(x));
}

/* ---- Complete elliptic integrals (DLMF 19.2, 19.25.1; Carlson's RF and RD) ------------- */

static double max3(double a, double b, double c)
{
    return fmax(a, fmax(b, c));
}

/* R_F(x, y, z), at most one argument zero (Carlson 1995, algorithm 1). */
static double carlson_rf(double x, double y, double z)
{
    double a0 = (x + y + z) / 3, a = a0;
    double q = 345.0 * max3(fabs(a0 - x), fabs(a0 - y), fabs(a0 - z)); /* (3 eps)^(-1/6) */
    double f = 1, x0 = x, y0 = y;
    for (int n = 0; n < 200 && f * q >= fabs(a); n++) {
        double sx = sqrt(x), sy = sqrt(y), sz = sqrt(z);
        double lam = sx * sy + sx * sz + sy * sz;
        x = (x + lam) / 4;
        y = (y + lam) / 4;
        z = (z + lam) / 4;
        a = (a + lam) / 4;
        f /= 4;
    }
    double X = (a0 - x0) * f / a, Y = (a0 - y0) * f / a, Z = -(X + Y);
    double e2 = X * Y - Z * Z, e3 = X * Y * Z;
    return (1 - e2 / 10 + e3 / 14 + e2 * e2 / 24 - 3 * e2 * e3 / 44) / sqrt(a);
}

/* R_D(x, y, z) (Carlson 1995, algorithm 4). */
static double carlson_rd(double x, double y, double z)
{
    double a0 = (x + y + 3 * z) / 5, a = a0;
    double q = 510.0 * max3(fabs(a0 - x), fabs(a0 - y), fabs(a0 - z)); /* (eps/4)^(-1/6) */
    double f = 1, sum = 0, x0 = x, y0 = y;
    for (int n = 0; n < 200 && f * q >= fabs(a); n++) {
        double sx = sqrt(x), sy = sqrt(y), sz = sqrt(z);
        double lam = sx * sy + sx * sz + sy * sz;
        sum += f / (sz * (z + lam));
        x = (x + lam) / 4;
        y = (y + lam) / 4;
        z = (z + lam) / 4;
        a = (a + lam) / 4;
        f /= 4;
    }
    double X = (a0 - x0) * f / a, Y = (a0 - y0) * f / a, Z = -(X + Y) / 3;
    double e2 = X * Y - 6 * Z * Z, e3 = (3 * X * Y - 8 * Z * Z) * Z;
    double e4 = 3 * (X * Y - Z * Z) * Z * Z, e5 = X * Y * Z * Z * Z;
    double s =
        1 - 3 * e2 / 14 + e3 / 6 + 9 * e2 * e2 / 88 - 3 * e4 / 22 - 9 * e2 * e3 / 52 + 3 * e5 / 26;
    return f * s / (a * sqrt(a)) + 3 * sum;
}

double cr_sf_ellipk(double m)
{
    if (isnan(m) || m > 1)
        return NAN_D;
    if (m == 1)
        return INF;
    if (m == -INF)
        return 0;
    return carlson_rf(0, 1 - m, 1);
}

double cr_sf_ellipe(double m)
{
    if (isnan(m) || m > 1)
        return NAN_D;
    if (m == 1)
        return 1;
    if (m == -INF)
        return INF;
    double y = 1 - m;
    return carlson_rf(0, y, 1) - m / 3 * carlson_rd(0, y, 1);
}

/* ((2n)!/(2^2n n!²))², n = 0..20: K = pi/2 sum c_n m^n, E = pi/2 sum c_n m^n/(1-2n)
 * (DLMF 19.5.1, 19.5.2), for the derivatives near m = 0 where the closed forms cancel. */
static double ellip_series_d(double m, bool e)
{
    double c = 1, s = 0, mp = 1;
    for (int n = 1; n <= 60; n++) {
        double r = (2.0 * n - 1) / (2.0 * n);
        c *= r * r;
        double term = n * c * mp / (e ? (1 - 2.0 * n) : 1.0);
        s += term;
        if (fabs(term) <= 1e-17 * fabs(s))
            break;
        mp *= m;
    }
    return PI / 2 * s;
}

/* dK/dm = (E - (1-m) K)/(2m(1-m)) (DLMF 19.4.1); the series below |m| = 0.1. */
static double ellipk_dm(double m, double k)
{
    if (fabs(m) < 0.1)
        return ellip_series_d(m, false);
    return (cr_sf_ellipe(m) - (1 - m) * k) / (2 * m * (1 - m));
}

/* dE/dm = (E - K)/(2m) (DLMF 19.4.2); the series below |m| = 0.1. */
static double ellipe_dm(double m, double e)
{
    if (fabs(m) < 0.1)
        return ellip_series_d(m, true);
    return (e - cr_sf_ellipk(m)) / (2 * m);
}

/* ---- Bessel functions of real order (Temme; Steed; Hankel) ------------------------------ */

/* 1/Gamma(1+mu) and 1/Gamma(1-mu) and Temme's gamma1 = (1/Gamma(1-mu) - 1/Gamma(1+mu))/(2mu),
 * gamma2 = (1/Gamma(1-mu) + 1/Gamma(1+mu))/2 for |mu| <= 1/2; gamma1 from the Taylor series of
 * 1/Gamma (DLMF 5.7.1, coefficients of Wrench, as tabulated in Abramowitz and Stegun 6.1.34)
 * below |mu| = 0.2, where the difference would cancel. */
static void temme_gammas(double mu, double *g1, double *g2, double *gp, double *gm)
{
    *gp = 1 / tgamma(1 + mu);
    *gm = 1 / tgamma(1 - mu);
    *g2 = (*gm + *gp) / 2;
    if (fabs(mu) < 0.2) {
        /* 1/Gamma(1+z) = sum c_(k+1) z^k; the odd part's coefficients c2, c4, ..., c16 */
        static const double c[] = {0.5772156649015329, -0.0420026350340952, -0.0421977345555443,
                                   0.0072189432466630, -0.0002152416741149, -0.0000201348547807,
                                   0.0000011330272320, 0.0000000061160950};
        double t = mu * mu, s = 0;
        for (int k = 7; k >= 0; k--)
            s = s * t + c[k];
        *g1 = -s;
    } else
        *g1 = (*gm - *gp) / (2 * mu);
}

/* The most continued-fraction terms before giving up (CF1 needs about x of them). */
#define BESSEL_CF_MAX 2000000

/* The start of Temme's series (the order mu in [-1/2, 1/2], x below the series' limit):
 * returns g1 cosh(sigma) + g2 sinh(sigma)/sigma ln(2/x), sigma = mu ln(2/x), with *fct =
 * pi mu / sin(pi mu), *es = e^sigma and the Gamma factors *gp, *gm (temme_gammas). */
static double temme_start(double mu, double x, double *fct, double *es, double *gp, double *gm)
{
    double x2 = 0.5 * x, pimu = PI * mu;
    *fct = fabs(pimu) < 1e-16 ? 1 : pimu / sin(pimu);
    double d = -log(x2);
    double e = mu * d;
    double fct2 = fabs(e) < 1e-16 ? 1 : sinh(e) / e;
    double g1, g2;
    temme_gammas(mu, &g1, &g2, gp, gm);
    *es = exp(e);
    return g1 * cosh(e) + g2 * fct2 * d;
}

/* Hankel's expansion (DLMF 10.17.3, 10.17.4): J and Y of order nu >= 0 for large x. */
static void bessel_jy_asymptotic(double nu, double x, double *j, double *y)
{
    double mu = 4 * nu * nu, p = 0, q = 0, t = 1;
    for (int k = 0; k < 200; k++) {
        /* t = a_k(nu)/x^k */
        int r = k % 4;
        if (r == 0)
            p += t;
        else if (r == 1)
            q += t;
        else if (r == 2)
            p -= t;
        else
            q -= t;
        double tn = t * (mu - (2.0 * k + 1) * (2.0 * k + 1)) / ((k + 1) * 8.0 * x);
        if (fabs(tn) <= 1e-17 * fabs(p) || (k > 4 && fabs(tn) >= fabs(t)))
            break;
        t = tn;
    }
    /* chi = x - (nu/2 + 1/4) pi: cos(chi) = cos x cos c + sin x sin c, c = (nu/2 + 1/4) pi */
    double sc, cc;
    sincos_pi(nu / 2 + 0.25, &sc, &cc);
    double sx = sin(x), cx = cos(x);
    double cchi = cx * cc + sx * sc, schi = sx * cc - cx * sc;
    double w = sqrt(2 / (PI * x));
    *j = w * (p * cchi - q * schi);
    *y = w * (p * schi + q * cchi);
}

#ifndef JY_SERIES_MAX
#define JY_SERIES_MAX 2.0
#endif

/* J_nu(x) and Y_nu(x) for nu >= 0, x > 0 (Temme's series for x < 2, Steed's CF2 otherwise,
 * CF1 and the recurrences between nu and mu = nu - nl in [-1/2, 1/2]). False when the
 * continued fraction did not converge. */
static bool bessel_jy(double nu, double x, double *jv, double *yv)
{
    if (x >= 25 && nu < x) {
        /* Hankel's expansion at mu = nu - floor(nu) and mu + 1 (x >= 25 > mu²), then the
         * recurrence C(k+1) = 2k/x C(k) - C(k-1) up to nu: in the oscillating region (nu < x)
         * it does not amplify errors for J or Y. CF1 would need about x terms here and lose
         * about sqrt(x nu) ulps. */
        int n = (int)nu;
        double mu = nu - n, j0, y0, j1, y1;
        bessel_jy_asymptotic(mu, x, &j0, &y0);
        if (n == 0) {
            *jv = j0;
            *yv = y0;
            return true;
        }
        bessel_jy_asymptotic(mu + 1, x, &j1, &y1);
        for (int k = 1; k < n; k++) {
            double c = 2 * (mu + k) / x;
            double jt = c * j1 - j0, yt = c * y1 - y0;
            j0 = j1;
            j1 = jt;
            y0 = y1;
            y1 = yt;
        }
        *jv = j1;
        *yv = y1;
        return true;
    }
    int nl = (int)(nu + 0.5);
    double mu = nu - nl, mu2 = mu * mu;
    double xi = 1 / x, xi2 = 2 * xi, w = xi2 / PI;
    /* CF1: f = J'_nu/J_nu (modified Lentz) */
    const double tiny = 1e-300;
    int isign = 1;
    double h = nu * xi;
    if (h < tiny)
        h = tiny;
    double b = xi2 * nu, d = 0, c = h;
    int i;
    for (i = 1; i <= BESSEL_CF_MAX; i++) {
        b += xi2;
        d = b - d;
        if (fabs(d) < tiny)
            d = tiny;
        c = b - 1 / c;
        if (fabs(c) < tiny)
            c = tiny;
        d = 1 / d;
        double del = c * d;
        h *= del;
        if (d < 0)
            isign = -isign;
        if (fabs(del - 1) < 1e-16)
            break;
    }
    if (i > BESSEL_CF_MAX)
        return false;
    /* Downward recurrence of J and J' from nu to mu, rescaled against overflow. */
    double jl = isign, jpl = h * jl, jl1 = jl;
    int scale = 0;
    for (int l = nl; l >= 1; l--) {
        /* (mu + l)/x computed afresh: decrementing nu/x by 1/x would accumulate rounding */
        double jt = (mu + l) * xi * jl + jpl;
        jpl = (mu + l - 1) * xi * jt - jl;
        jl = jt;
        if (fabs(jl) > 0x1p600) {
            jl = ldexp(jl, -600);
            jpl = ldexp(jpl, -600);
            scale++;
        }
    }
    if (jl == 0)
        jl = DBL_EPSILON;
    double f = jpl / jl, jmu, ymu, ymup, y1;
    if (x < JY_SERIES_MAX) {
        double x2 = 0.5 * x, pimu = PI * mu, fct, e, gp, gm;
        double br = temme_start(mu, x, &fct, &e, &gp, &gm);
        double ff = 2 / PI * fct * br;
        double p = e / (gp * PI), q = 1 / (e * PI * gm);
        double pimu2 = 0.5 * pimu;
        double fct3 = fabs(pimu2) < 1e-16 ? 1 : sin(pimu2) / pimu2;
        double r = PI * pimu2 * fct3 * fct3;
        c = 1;
        d = -x2 * x2;
        double sum = ff + r * q, sum1 = p;
        for (i = 1; i < 500; i++) {
            ff = (i * ff + p + q) / (i * (double)i - mu2);
            c *= d / i;
            p /= i - mu;
            q /= i + mu;
            double del = c * (ff + r * q);
            sum += del;
            double del1 = c * p - i * del;
            sum1 += del1;
            if (fabs(del) < (1 + fabs(sum)) * 1e-17)
                break;
        }
        ymu = -sum;
        y1 = -sum1 * xi2;
        ymup = mu * xi * ymu - y1;
        jmu = w / (ymup - f * ymu);
    } else {
        /* CF2: p + iq = J'/J-like ratio of H1 (Steed), by modified Lentz in complex form */
        cr_complex t = cr__c(tiny, 0), cc2 = t, dd = 0;
        for (i = 1; i <= 100000; i++) {
            double ai = (i - 0.5) * (i - 0.5) - mu2;
            cr_complex bi = cr__c(2 * x, 2.0 * i);
            dd = bi + ai * dd;
            if (cabs(dd) < tiny)
                dd = tiny;
            cc2 = bi + ai / cc2;
            if (cabs(cc2) < tiny)
                cc2 = tiny;
            dd = 1 / dd;
            cr_complex del = cc2 * dd;
            t *= del;
            if (cabs(del - 1) < 1e-16)
                break;
        }
        cr_complex pq = cr__c(-0.5 * xi, 1.0) + cr__c(0.0, xi) * t;
        double p = creal(pq), q = cimag(pq);
        double gam = (p - f) / q;
        jmu = sqrt(w / ((p - f) * gam + q));
        jmu = copysign(jmu, jl);
        ymu = jmu * gam;
        ymup = ymu * (p + q / gam);
        y1 = mu * xi * ymu - ymup;
    }
    /* J_nu = J_mu (jl1/jl) with the rescaling undone. */
    *jv = ldexp(jl1 * (jmu / jl), -600 * scale);
    for (i = 1; i <= nl; i++) {
        double yt = (mu + i) * xi2 * y1 - ymu;
        ymu = y1;
        y1 = yt;
    }
    *yv = ymu;
    return true;
}

#ifndef IK_SERIES_MAX
#define IK_SERIES_MAX 1.0
#endif

/* I_nu(x) e^-x and K_nu(x) e^x for nu >= 0, x > 0 (Temme's series for x < 2, Steed's CF2
 * (Temme's form) otherwise, CF1 and the recurrences). */
static bool bessel_ik_scaled(double nu, double x, double *iv, double *kv)
{
    int nl = (int)(nu + 0.5);
    double mu = nu - nl, mu2 = mu * mu;
    double xi = 1 / x, xi2 = 2 * xi;
    const double tiny = 1e-300;
    double h = nu * xi;
    if (h < tiny)
        h = tiny;
    double b = xi2 * nu, d = 0, c = h;
    int i;
    for (i = 1; i <= BESSEL_CF_MAX; i++) {
        b += xi2;
        d = 1 / (b + d);
        c = b + 1 / c;
        double del = c * d;
        h *= del;
        if (fabs(del - 1) < 1e-16)
            break;
    }
    if (i > BESSEL_CF_MAX)
        return false;
    double il = 1, ipl = h, il1 = il;
    int scale = 0;
    for (int l = nl; l >= 1; l--) {
        double it = (mu + l) * xi * il + ipl;
        ipl = (mu + l - 1) * xi * it + il;
        il = it;
        if (fabs(il) > 0x1p600) {
            il = ldexp(il, -600);
            ipl = ldexp(ipl, -600);
            scale++;
        }
    }
    double f = ipl / il, kmu, k1;
    if (x < IK_SERIES_MAX) {
        double x2 = 0.5 * x, fct, e, gp, gm;
        double br = temme_start(mu, x, &fct, &e, &gp, &gm);
        double ff = fct * br;
        double sum = ff;
        double p = 0.5 * e / gp, q = 0.5 / (e * gm), sum1 = p;
        c = 1;
        d = x2 * x2;
        for (i = 1; i < 500; i++) {
            ff = (i * ff + p + q) / (i * (double)i - mu2);
            c *= d / i;
            p /= i - mu;
            q /= i + mu;
            double del = c * ff;
            sum += del;
            sum1 += c * (p - i * ff);
            if (fabs(del) < fabs(sum) * 1e-17)
                break;
        }
        double ex = exp(x);
        kmu = sum * ex;
        k1 = sum1 * xi2 * ex;
    } else {
        b = 2 * (1 + x);
        d = 1 / b;
        double hh = d, delh = d, q1 = 0, q2 = 1, a1 = 0.25 - mu2;
        double q = a1, cc = a1, a = -a1, s = 1 + q * delh;
        for (i = 2; i < 100000; i++) {
            a -= 2 * (i - 1);
            cc = -a * cc / i;
            double qnew = (q1 - b * q2) / a;
            q1 = q2;
            q2 = qnew;
            q += cc * qnew;
            b += 2;
            d = 1 / (b + a * d);
            delh = (b * d - 1) * delh;
            hh += delh;
            double dels = q * delh;
            s += dels;
            if (fabs(dels / s) < 1e-17)
                break;
        }
        hh = a1 * hh;
        kmu = sqrt(PI / (2 * x)) / s;
        k1 = kmu * (mu + x + 0.5 - hh) * xi;
    }
    double kmup = mu * xi * kmu - k1;
    double imu = xi / (f * kmu - kmup);
    *iv = ldexp(imu / il, -600 * scale) * il1;
    for (i = 1; i <= nl; i++) {
        double kt = (mu + i) * xi2 * k1 + kmu;
        kmu = k1;
        k1 = kt;
    }
    *kv = kmu;
    return true;
}

/* J and Y of any real order at x > 0 (DLMF 10.2.3, 10.4.7 for negative orders). */
static void bessel_jy_any(double nu, double x, double *j, double *y)
{
    double a = fabs(nu), ja, ya;
    if (!bessel_jy(a, x, &ja, &ya)) {
        *j = *y = NAN_D;
        return;
    }
    if (nu >= 0) {
        *j = ja;
        *y = ya;
        return;
    }
    double s, c;
    sincos_pi(a, &s, &c);
    /* J_-a = cos(a pi) J_a - sin(a pi) Y_a;  Y_-a = sin(a pi) J_a + cos(a pi) Y_a */
    *j = (s == 0 ? c * ja : c * ja - s * ya);
    *y = (c == 0 ? s * ja : s * ja + c * ya);
}

/* A Bessel function of real order at real x from one of the pair routines (bessel_jy_any:
 * J and Y; bessel_ik_any: I e^-|x| and K e^x), both taken at x > 0: the first kind (second
 * false; at x < 0, (-1)^nu C(nu, -x) for an integer order, complex otherwise) or the second
 * (x >= 0 only, at0 at x = 0). */
static double bessel_of_pair(void (*pair)(double, double, double *, double *), bool second,
                             double at0, double nu, double x)
{
    if (isnan(nu) || isnan(x) || isinf(nu) || (second && x < 0))
        return NAN_D;
    if (x < 0) /* complex for a non-integer order */
        return is_integer(nu) ? parity(nu) * bessel_of_pair(pair, false, 0, nu, -x) : NAN_D;
    if (x == 0)
        return second ? at0 : nu == 0 ? 1 : nu > 0 || is_integer(nu) ? 0 : NAN_D;
    if (isinf(x))
        return 0;
    double c1, c2;
    pair(nu, x, &c1, &c2);
    return second ? c2 : c1;
}

double cr_sf_besselj(double nu, double x)
{
    return bessel_of_pair(bessel_jy_any, false, 0, nu, x);
}

double cr_sf_bessely(double nu, double x)
{
    return bessel_of_pair(bessel_jy_any, true, -INF, nu, x);
}

/* I_nu(x) e^-|x| and K_nu(x) e^x of any real order, x > 0 (DLMF 10.27.2, 10.27.3). */
static void bessel_ik_any(double nu, double x, double *ix, double *kx)
{
    double a = fabs(nu), ia, ka;
    if (!bessel_ik_scaled(a, x, &ia, &ka)) {
        *ix = *kx = NAN_D;
        return;
    }
    *kx = ka;
    if (nu >= 0 || is_integer(nu)) {
        *ix = ia;
        return;
    }
    /* I_-a = I_a + (2/pi) sin(a pi) K_a; scaled by e^-x: K e^x e^-2x */
    double s, c;
    sincos_pi(a, &s, &c);
    *ix = ia + 2 / PI * s * ka * exp(-2 * x);
}

double cr_sf_besselix(double nu, double x)
{
    return bessel_of_pair(bessel_ik_any, false, 0, nu, x);
}

double cr_sf_besseli(double nu, double x)
{
    double v = cr_sf_besselix(nu, x);
    if (isnan(v) || v == 0 || fabs(x) <= 700)
        return v * exp(fabs(x));
    /* e^|x| overflows before the product does: split it. */
    double h = exp(fabs(x) / 2);
    return v * h * h;
}

double cr_sf_besselkx(double nu, double x)
{
    return bessel_of_pair(bessel_ik_any, true, INF, nu, x);
}

double cr_sf_besselk(double nu, double x)
{
    double v = cr_sf_besselkx(nu, x);
    if (isnan(v) || isinf(v) || x <= 700)
        return v * exp(-x);
    double h = exp(-x / 2);
    return v * h * h;
}

cr_complex cr_sf_hankelh1(double nu, double x)
{
    return cr__c(cr_sf_besselj(nu, x), cr_sf_bessely(nu, x));
}

cr_complex cr_sf_hankelh2(double nu, double x)
{
    return cr__c(cr_sf_besselj(nu, x), -cr_sf_bessely(nu, x));
}

cr_complex cr_sf_hankelh1x(double nu, double x)
{
    return cr_sf_hankelh1(nu, x) * cr__c(cos(x), -sin(x));
}

cr_complex cr_sf_hankelh2x(double nu, double x)
{
    return cr_sf_hankelh2(nu, x) * cr__c(cos(x), sin(x));
}

/* ---- Airy functions (DLMF 9.4, 9.6) ----------------------------------------------------- */

#define AIRY_C1 0.35502805388781723926 /* Ai(0) */
#define AIRY_C2 0.25881940379280679840 /* -Ai'(0) */

/* Ai, Ai', Bi, Bi' (out[0..3]) for |x| <= 1 from the Maclaurin series f, g (DLMF 9.4.1-4). */
static void airy_series(double x, double out[4])
{
    double x3 = x * x * x;
    double f = 1, t = 1, fp = 0, s = x * x / 2, g = x, u = x, gp = 1, v = 1;
    for (int k = 0; k < 40; k++) {
        t *= x3 / ((3 * k + 2) * (3 * k + 3));
        u *= x3 / ((3 * k + 3) * (3 * k + 4));
        f += t;
        g += u;
        fp += s;
        gp += v * x3 / ((3 * k + 1) * (3 * k + 3));
        v *= x3 / ((3 * k + 1) * (3 * k + 3));
        s *= x3 / ((3 * k + 3) * (3 * k + 5));
        if (fabs(t) + fabs(u) + fabs(s) + fabs(v) <= 1e-18)
            break;
    }
    out[0] = AIRY_C1 * f - AIRY_C2 * g;
    out[1] = AIRY_C1 * fp - AIRY_C2 * gp;
    out[2] = SQRT3 * (AIRY_C1 * f + AIRY_C2 * g);
    out[3] = SQRT3 * (AIRY_C1 * fp + AIRY_C2 * gp);
}

/* Ai, Ai', Bi, Bi' (out[0..3]); with `scaled` (x > 0 only), Ai and Ai' times e^zeta and Bi,
 * Bi' times e^-zeta, zeta = 2/3 x^(3/2). */
static void airy_all(double x, bool scaled, double out[4])
{
    if (isnan(x)) {
        out[0] = out[1] = out[2] = out[3] = x;
        return;
    }
    if (scaled && x < 0) {
        /* Ai's scale e^zeta is complex for x < 0 (NaN); Bi's, e^-|Re zeta|, is 1 there */
        airy_all(x, false, out);
        out[0] = out[1] = NAN_D;
        return;
    }
    double a = fabs(x), r = sqrt(a), z = 2.0 / 3.0 * a * r;
    if (a <= 1) {
        airy_series(x, out);
        if (scaled) {
            double e = exp(z);
            out[0] *= e;
            out[1] *= e;
            out[2] /= e;
            out[3] /= e;
        }
        return;
    }
    if (x > 0) {
        double i1, k1, i2, k2;
        bessel_ik_any(1.0 / 3.0, z, &i1, &k1); /* scaled: I e^-z, K e^z */
        bessel_ik_any(2.0 / 3.0, z, &i2, &k2);
        double ai = r / SQRT3 * k1 / PI, aip = -x / SQRT3 * k2 / PI;
        /* Bi = sqrt(x) (2/sqrt3 I + K/pi), with K e^z e^-2z */
        double e2 = scaled ? exp(-2 * z) : 0;
        double bi = r * (2 / SQRT3 * i1 + (scaled ? k1 * e2 : 0) / PI);
        double bip = x * (2 / SQRT3 * i2 + (scaled ? k2 * e2 : 0) / PI);
        if (scaled) {
            out[0] = ai;
            out[1] = aip;
            out[2] = bi;
            out[3] = bip;
        } else {
            double e = z > 700 ? INF : exp(z), emz = exp(-z);
            out[0] = ai * emz;
            out[1] = aip * emz;
            out[2] = isinf(e) ? copysign(INF, bi) : r * (2 / SQRT3 * i1 * e + k1 * emz / PI);
            out[3] = isinf(e) ? copysign(INF, bip) : x * (2 / SQRT3 * i2 * e + k2 * emz / PI);
        }
        return;
    }
    double j1, y1, j2, y2;
    bessel_jy_any(1.0 / 3.0, z, &j1, &y1);
    bessel_jy_any(2.0 / 3.0, z, &j2, &y2);
    out[0] = 0.5 * r * (j1 - y1 / SQRT3);
    out[2] = -0.5 * r * (y1 + j1 / SQRT3);
    out[1] = 0.5 * a * (y2 / SQRT3 + j2);
    out[3] = 0.5 * a * (j2 / SQRT3 - y2);
}

/* One of airy_all's four values. */
static double airy_one(double x, bool scaled, int k)
{
    double o[4];
    airy_all(x, scaled, o);
    return o[k];
}

/* cr_sf_NAME(x): Airy function K (Ai, Ai', Bi, Bi'), scaled or not (airy_one). */
#define AIRY_FN(NAME, SCALED, K)           \
    double cr_sf_##NAME(double x)          \
    {                                      \
        return airy_one(x, (SCALED), (K)); \
    }
AIRY_FN(airyai, false, 0)
AIRY_FN(airyaiprime, false, 1)
AIRY_FN(airybi, false, 2)
AIRY_FN(airybiprime, false, 3)
AIRY_FN(airyaix, true, 0)
AIRY_FN(airyaiprimex, true, 1)
AIRY_FN(airybix, true, 2)
AIRY_FN(airybiprimex, true, 3)

/* ---- expint of a complex argument (DLMF 6.6.2, 6.9.1) ----------------------------------- */

/* E1(z) = -gamma - log z - sum_(k>=1) (-z)^k/(k k!), principal branch (cut on the negative
 * real axis; the sign of a zero imaginary part selects its side). */
static cr_complex e1_series(cr_complex z)
{
    cr_complex s = 0, t = 1;
    double az = cabs(z);
    for (int k = 1; k < 4000; k++) {
        t *= -z / k;
        cr_complex term = t / k;
        s += term;
        if (cabs(term) <= 1e-17 * cabs(s) && k > az)
            break;
    }
    return -EULER_GAMMA - clog(z) - s;
}

/* E1(z) = e^-z / (z + 1 - 1²/(z + 3 - 2²/(z + 5 - ...))), evaluated backwards, the depth
 * doubled until two agree. */
static cr_complex e1_cf_n(cr_complex z, int n)
{
    cr_complex t = z + (2.0 * n + 1);
    for (int k = n; k >= 1; k--)
        t = z + (2.0 * (k - 1) + 1) - (double)k * (double)k / t;
    return t;
}

static cr_complex e1_cf(cr_complex z)
{
    cr_complex f = e1_cf_n(z, 40);
    for (int n = 80; n <= (1 << 18); n *= 2) {
        cr_complex g = e1_cf_n(z, n);
        if (cabs(g - f) <= 1e-16 * cabs(g)) {
            f = g;
            break;
        }
        f = g;
    }
    return cexp(-z) / f;
}

cr_complex cr_sf_expint_complex(cr_complex z)
{
    double x = creal(z), y = cimag(z), r = cabs(z);
    if (isnan(x) || isnan(y))
        return cr__c(NAN_D, NAN_D);
    if (r == 0)
        return cr__c(INF, 0.0);
    if (y == 0 && x > 0)
        return cr__c(cr_sf_expint(x), y); /* keeps the sign of the zero */
    /* The series where its terms (about e^|z|) do not cancel much against the result
     * (about e^-Re z/|z|): |z| <= 1, or left of 0 near the negative axis (y² <= 6|x|: at
     * most a factor e^3 cancels); the continued fraction elsewhere (away from the cut). */
    if (r <= 1 || (x < 0 && y * y <= 6 * -x))
        return r > 740 ? cr__c(-INF, -copysign(PI, y)) : e1_series(z);
    return e1_cf(z);
}

/* ==== Rules ================================================================================ */

/* The row's test registration: a sampling box and hard points (switches between methods,
 * zeros, the ends of the domain). */
#define ROW_TEST(LO, HI, PTS) \
    .test = {.lo = (LO),      \
             .hi = (HI),      \
             .points = (PTS), \
             .npoints = sizeof(PTS) / sizeof((PTS)[0]) / (sizeof(LO) / sizeof((LO)[0]))}

/* Airy functions: Ai' = Ai', (Ai')' = x Ai, and the same for Bi (DLMF 9.2.1). */
static const double k_airy_lo[] = {-6.0}, k_airy_hi[] = {4.0};
static const double k_airy_pts[] = {0.0, 1.0, -1.0, 1.0001, -2.338107410459767, 3.5, -5.5};
REAL_ROW1(airyai, cr_sf_airyai(x[0]), cr_sf_airyaiprime(x[0]),
          ROW_TEST(k_airy_lo, k_airy_hi, k_airy_pts))

REAL_ROW1(airyaiprime, cr_sf_airyaiprime(x[0]), x[0] * cr_sf_airyai(x[0]),
          ROW_TEST(k_airy_lo, k_airy_hi, k_airy_pts))

REAL_ROW1(airybi, cr_sf_airybi(x[0]), cr_sf_airybiprime(x[0]),
          ROW_TEST(k_airy_lo, k_airy_hi, k_airy_pts))

REAL_ROW1(airybiprime, cr_sf_airybiprime(x[0]), x[0] * cr_sf_airybi(x[0]),
          ROW_TEST(k_airy_lo, k_airy_hi, k_airy_pts))

/* Scaled by e^zeta, zeta = 2/3 x^(3/2), x >= 0: d e^zeta/dx = sqrt(x) e^zeta. */
static const double k_airyx_lo[] = {0.05}, k_airyx_hi[] = {30.0};
static const double k_airyx_pts[] = {0.5, 1.0, 1.0001, 50.0};
REAL_ROW1(airyaix, cr_sf_airyaix(x[0]), cr_sf_airyaiprimex(x[0]) + sqrt(x[0]) * Y[0],
          ROW_TEST(k_airyx_lo, k_airyx_hi, k_airyx_pts), .notes = "x >= 0")

REAL_ROW1(airyaiprimex, cr_sf_airyaiprimex(x[0]), x[0] * cr_sf_airyaix(x[0]) + sqrt(x[0]) * Y[0],
          ROW_TEST(k_airyx_lo, k_airyx_hi, k_airyx_pts), .notes = "x >= 0")

/* dawson(x) = F(x): 1 - 2xΩ (DLMF 7.10.1 through 7.5.1) */
static const double k_daw_lo[] = {-10.0}, k_daw_hi[] = {10.0};
static const double k_daw_pts[] = {0.0, 0.9241388730, 6.999, 7.001, -3.0, 40.0};
REAL_ROW1(dawson, cr_sf_dawson(x[0]), 1 - 2 * x[0] * Y[0], ROW_TEST(k_daw_lo, k_daw_hi, k_daw_pts))

/* erfi(x) = -i erf(ix): 2/sqrt(pi) exp(x²) */
static const double k_erfi_lo[] = {-5.0}, k_erfi_hi[] = {5.0};
static const double k_erfi_pts[] = {0.0, 1.0, 6.999, 7.001, -8.0};
CR_SCALAR_EVALS_REAL(erfi, 1, 1, Y[0] = cr_sf_erfi(x[0]), D[0] = TWO_OVER_SQRT_PI * exp_sq(x[0]))
static const cr_scalar_rule erfi_row =
    CR_SCALAR_ROW_REAL_EX(erfi, ROW_TEST(k_erfi_lo, k_erfi_hi, k_erfi_pts));
DEFINE_FN(erfi, "erfi", 1)

/* logerfcx(x) = log(erfcx(x)): erfcx'(x)/erfcx(x) = 2x - 2/(sqrt(pi) erfcx(x)) */
static const double k_lex_lo[] = {-8.0}, k_lex_hi[] = {20.0};
static const double k_lex_pts[] = {0.0, -6.001, -5.999, 1.99, 2.01, 100.0, -30.0};
REAL_ROW1(logerfcx, cr_sf_logerfcx(x[0]), logerfcx_dx(x[0]),
          ROW_TEST(k_lex_lo, k_lex_hi, k_lex_pts))

/* invdigamma(y), the inverse of digamma on x > 0: 1/trigamma(Ω) */
static const double k_invdg_lo[] = {-5.0}, k_invdg_hi[] = {5.0};
static const double k_invdg_pts[] = {-2.22, -2.21, 0.0, -0.5772156649015329, -30.0, 20.0};
REAL_ROW1(invdigamma, cr_sf_invdigamma(x[0]), 1 / cr_sf_trigamma(Y[0]),
          ROW_TEST(k_invdg_lo, k_invdg_hi, k_invdg_pts), .notes = "the branch x > 0")

/* expintx(x) = e^x E1(x): Ω - 1/x */
static const double k_pos_lo[] = {0.1}, k_pos_hi[] = {8.0};
static const double k_expintx_pts[] = {0.999, 1.001, 0.01, 50.0, 699.0, 701.0};
REAL_ROW1(expintx, cr_sf_expintx(x[0]), Y[0] - 1 / x[0],
          ROW_TEST(k_pos_lo, k_pos_hi, k_expintx_pts), .notes = "x > 0")

/* expinti(x) = Ei(x): e^x/x */
static const double k_ei_lo[] = {-8.0}, k_ei_hi[] = {8.0};
static const double k_ei_pts[] = {
    0.3725074107813666, 0.1999, 0.2001, 0.5999, 0.6001, 49.999, 50.001, -1.0, -40.0};
REAL_ROW1(expinti, cr_sf_expinti(x[0]), exp(x[0]) / x[0], ROW_TEST(k_ei_lo, k_ei_hi, k_ei_pts),
          .notes = "x != 0")

/* sinint(x) = Si(x): sin(x)/x (1 at 0) */
static const double k_sici_lo[] = {0.1}, k_sici_hi[] = {20.0};
static const double k_si_pts[] = {0.0, 3.999, 4.001, -4.001, 1e3, -25.0};
REAL_ROW1(sinint, cr_sf_sinint(x[0]), x[0] == 0 ? (T)1 : sin(x[0]) / x[0],
          ROW_TEST(k_sici_lo, k_sici_hi, k_si_pts))

/* cosint(x) = Ci(x), x > 0: cos(x)/x */
static const double k_ci_pts[] = {0.6165054856207162, 3.999, 4.001, 1e3, 0.01};
REAL_ROW1(cosint, cr_sf_cosint(x[0]), cos(x[0]) / x[0], ROW_TEST(k_sici_lo, k_sici_hi, k_ci_pts),
          .notes = "x > 0")

/* ellipk(m) = K(m): (E - (1-m)K)/(2m(1-m)); ellipe(m) = E(m): (E - K)/(2m) (DLMF 19.4.1,
 * 19.4.2), both from their power series below |m| = 0.1 (pi/8 and -pi/8 at 0). */
static const double k_ellip_lo[] = {-3.0}, k_ellip_hi[] = {0.95};
static const double k_ellip_pts[] = {0.0, 0.0999, 0.1001, -0.1001, 0.5, 0.999999, -50.0};
REAL_ROW1(ellipk, cr_sf_ellipk(x[0]), ellipk_dm(x[0], Y[0]),
          ROW_TEST(k_ellip_lo, k_ellip_hi, k_ellip_pts), .notes = "m < 1")

REAL_ROW1(ellipe, cr_sf_ellipe(x[0]), ellipe_dm(x[0], Y[0]),
          ROW_TEST(k_ellip_lo, k_ellip_hi, k_ellip_pts), .notes = "m < 1")

/* erf(x, y) = erf(y) - erf(x), as a difference of erfc where both are large and of one sign
 * (no cancellation): -2/sqrt(pi) exp(-x²), 2/sqrt(pi) exp(-y²). */
double cr_sf_erf2(double x, double y)
{
    if (x > 0.5 && y > 0.5)
        return erfc(x) - erfc(y);
    if (x < -0.5 && y < -0.5)
        return erfc(-y) - erfc(-x);
    return erf(y) - erf(x);
}

static const double k_erf2_lo[] = {-3.0, -3.0}, k_erf2_hi[] = {3.0, 3.0};
static const double k_erf2_pts[] = {0.0, 0.0, 1.0, 2.0, -2.0, -1.0, 4.0, 4.5, 0.4, 0.6};
REAL_ROW(erf2, 2, Y[0] = cr_sf_erf2(x[0], x[1]), D[0] = -TWO_OVER_SQRT_PI / exp_sq(x[0]);
         D[1] = TWO_OVER_SQRT_PI / exp_sq(x[1]), ROW_TEST(k_erf2_lo, k_erf2_hi, k_erf2_pts),
         .notes = "SpecialFunctions' erf(x, y) = erf(y) - erf(x)")

/* Bi scaled by e^-|Re zeta| (e^-zeta for x > 0, 1 for x < 0): the scale's derivative is
 * -sqrt(x) e^-zeta for x > 0 and 0 for x < 0. */
static const double k_airybx_lo[] = {-6.0}, k_airybx_hi[] = {30.0};
static const double k_airybx_pts[] = {0.0, 1.0, -1.0, 1.0001, 50.0, -5.5};
REAL_ROW1(airybix, cr_sf_airybix(x[0]),
          cr_sf_airybiprimex(x[0]) - (x[0] > 0 ? sqrt(x[0]) * Y[0] : 0),
          ROW_TEST(k_airybx_lo, k_airybx_hi, k_airybx_pts),
          .notes = "Bi(x) e^-|Re zeta|: Bi(x) itself for x < 0")

REAL_ROW1(airybiprimex, cr_sf_airybiprimex(x[0]),
          x[0] * cr_sf_airybix(x[0]) - (x[0] > 0 ? sqrt(x[0]) * Y[0] : 0),
          ROW_TEST(k_airybx_lo, k_airybx_hi, k_airybx_pts),
          .notes = "Bi'(x) e^-|Re zeta|: Bi'(x) itself for x < 0")

static const cr__sf_row k_rows[] = {
    FN_ROW(airybix), FN_ROW(airybiprimex), FN_ROW(airyai),   FN_ROW(airyaiprime),
    FN_ROW(airybi),  FN_ROW(airybiprime),  FN_ROW(airyaix),  FN_ROW(airyaiprimex),
    FN_ROW(dawson),  FN_ROW(erfi),         FN_ROW(logerfcx), FN_ROW(invdigamma),
    FN_ROW(expintx), FN_ROW(expinti),      FN_ROW(sinint),   FN_ROW(cosint),
    FN_ROW(ellipk),  FN_ROW(ellipe),       FN_ROW(erf2),
};

/* ---- Functions of an order (or a parameter) and an argument: f(nu, x) --------------------- */

/* The derivative in the first argument is NotImplemented for a real one (SpecialFunctions.jl
 * has no closed form either) and NoTangent for an integer one; the derivative in x is
 * written once, in dx (dxc for the complex-valued Hankel functions). */
typedef struct order2_fn {
    const char *name;
    double (*f)(double nu, double x);
    double (*dx)(double nu, double x, double y);
    cr_complex (*fc)(double nu, double x);
    cr_complex (*dxc)(double nu, double x, cr_complex y);
    const char *info; /* the NotImplemented message for the first argument */
    const char *pullback_name;
    bool bessel; /* an order, bounded by ORDER_MAX */
} order2_fn;

#define BESSEL_ORDER_INFO                                                               \
    "the derivative of a Bessel function with respect to its order is not implemented " \
    "(as in SpecialFunctions.jl)"
#define EXPINT_ORDER_INFO                                                                      \
    "the derivative of the exponential integral with respect to its order is not implemented " \
    "(SpecialFunctions.jl issue 321)"
#define GAMMA_UPPER_INFO                                                                    \
    "the derivative of the incomplete gamma function with respect to a is not implemented " \
    "(SpecialFunctions.jl issue 317)"

/* The largest |order| (the recurrences between the order and [-1/2, 1/2] take time
 * proportional to it), as for jn and yn. */
#define ORDER_MAX 100000.0

/* (C(nu-1) - C(nu+1))/2 for J, Y (DLMF 10.6.1), (I(nu-1) + I(nu+1))/2 and
 * -(K(nu-1) + K(nu+1))/2 (DLMF 10.29.1); the scaled forms add the derivative of the scale. */
#define ORDER_DX(T, NAME, SIGN, OP, EXTRA)                                         \
    static T NAME##_dx(double nu, double x, T y)                                   \
    {                                                                              \
        (void)y;                                                                   \
        return SIGN(cr_sf_##NAME(nu - 1, x) OP cr_sf_##NAME(nu + 1, x)) / 2 EXTRA; \
    }
ORDER_DX(double, besselj, +, -, )
ORDER_DX(double, bessely, +, -, )
ORDER_DX(double, besseli, +, +, )
ORDER_DX(double, besselk, -, +, )
/* besselix = I e^-|x|: (Ix(nu-1) + Ix(nu+1))/2 - sign(x) Ω */
ORDER_DX(double, besselix, +, +, -(x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0) * y)
/* besselkx = K e^x: -(Kx(nu-1) + Kx(nu+1))/2 + Ω */
ORDER_DX(double, besselkx, -, +, +y)
ORDER_DX(cr_complex, hankelh1, +, -, )
ORDER_DX(cr_complex, hankelh2, +, -, )
/* hankelh1x = H1 e^-ix: (H1x(nu-1) - H1x(nu+1))/2 - iΩ; hankelh2x = H2 e^ix: ... + iΩ */
ORDER_DX(cr_complex, hankelh1x, +, -, -cr__c(0.0, 1.0) * y)
ORDER_DX(cr_complex, hankelh2x, +, -, +cr__c(0.0, 1.0) * y)

/* For real x, besseljx = besselj and besselyx = bessely (the scale e^-|Im x| is 1). */
static double besseljx_value(double nu, double x)
{
    return cr_sf_besselj(nu, x);
}

static double besselyx_value(double nu, double x)
{
    return cr_sf_bessely(nu, x);
}

/* gamma(a, x) = Gamma(a) Q(a, x), the upper incomplete gamma function, for a > 0 (a <= 0:
 * special_gamma_erf.c). */
/* Q(a, x) = Gamma(a, x)/Gamma(a), a > 0 (NaN where cr_sf_gamma_inc gives NaN). */
static double gamma_q(double a, double x)
{
    double q;
    cr_sf_gamma_inc(a, x, NULL, &q);
    return q;
}

double cr_sf_gamma_upper(double a, double x)
{
    if (a <= 0)
        return cr__sf_gamma_upper_nonpos(a, x);
    double q = gamma_q(a, x), g = tgamma(a);
    if (isnan(q))
        return q;
    if (isfinite(g))
        return g * q;
    int s;
    return q == 0 ? 0 : exp(lgamma_r(a, &s) + log(q));
}

/* log Gamma(a, x) = log Gamma(a) + log Q(a, x), a > 0 (finite where Gamma(a, x) overflows). */
double cr_sf_loggamma_upper(double a, double x)
{
    if (a <= 0)
        return cr__sf_loggamma_upper_nonpos(a, x);
    double q = gamma_q(a, x);
    int s;
    return isnan(q) ? q : lgamma_r(a, &s) + log(q);
}

/* d Gamma(a, x)/dx = -x^(a-1) e^-x (DLMF 8.8.13) */
static double gamma_upper_dx(double a, double x, double y)
{
    (void)y;
    if (a <= 0) /* no Gamma(a) to divide out (it is infinite at the non-positive integers) */
        return -exp((a - 1) * log(x) - x);
    return -tgamma(a) * cr__sf_gamma_inc_dx(a, x);
}

/* d log Gamma(a, x)/dx = -x^(a-1) e^-x / Gamma(a, x) = -(dP/dx)/Q */
static double loggamma_upper_dx(double a, double x, double y)
{
    if (a <= 0) /* y = log Gamma(a, x) */
        return -exp((a - 1) * log(x) - x - y);
    return -cr__sf_gamma_inc_dx(a, x) / gamma_q(a, x);
}

/* d E_nu(x)/dx = -E_(nu-1)(x) (DLMF 8.19.13) */
static double expint2_dx(double nu, double x, double y)
{
    (void)y;
    return -cr_sf_expint2(nu - 1, x);
}

/* d (e^x E_nu(x))/dx = Ω - e^x E_(nu-1)(x) */
static double expintx2_dx(double nu, double x, double y)
{
    return y - cr_sf_expintx2(nu - 1, x);
}

#define BESSEL_FN(NAME, F, DX)                                               \
    {                                                                        \
#NAME, F, DX, NULL, NULL, BESSEL_ORDER_INFO, #NAME "_pullback", true \
    }
#define HANKEL_FN(NAME, F, DX)                                               \
    {                                                                        \
#NAME, NULL, NULL, F, DX, BESSEL_ORDER_INFO, #NAME "_pullback", true \
    }

static const order2_fn k_order2[] = {
    BESSEL_FN(besselj, cr_sf_besselj, besselj_dx),
    BESSEL_FN(bessely, cr_sf_bessely, bessely_dx),
    BESSEL_FN(besseli, cr_sf_besseli, besseli_dx),
    BESSEL_FN(besselk, cr_sf_besselk, besselk_dx),
    BESSEL_FN(besselix, cr_sf_besselix, besselix_dx),
    BESSEL_FN(besselkx, cr_sf_besselkx, besselkx_dx),
    BESSEL_FN(besseljx, besseljx_value, besselj_dx),
    BESSEL_FN(besselyx, besselyx_value, bessely_dx),
    HANKEL_FN(hankelh1, cr_sf_hankelh1, hankelh1_dx),
    HANKEL_FN(hankelh2, cr_sf_hankelh2, hankelh2_dx),
    HANKEL_FN(hankelh1x, cr_sf_hankelh1x, hankelh1x_dx),
    HANKEL_FN(hankelh2x, cr_sf_hankelh2x, hankelh2x_dx),
    {"gamma_upper", cr_sf_gamma_upper, gamma_upper_dx, NULL, NULL, GAMMA_UPPER_INFO,
     "gamma_upper_pullback", false},
    {"loggamma_upper", cr_sf_loggamma_upper, loggamma_upper_dx, NULL, NULL, GAMMA_UPPER_INFO,
     "loggamma_upper_pullback", false},
    {"expint2", cr_sf_expint2, expint2_dx, NULL, NULL, EXPINT_ORDER_INFO, "expint2_pullback",
     false},
    {"expintx2", cr_sf_expintx2, expintx2_dx, NULL, NULL, EXPINT_ORDER_INFO, "expintx2_pullback",
     false},
};
#define N_ORDER2 (sizeof k_order2 / sizeof k_order2[0])

/* The (real or complex) number a tangent carries; *nonzero is false for the zeros; a
 * NotImplemented tangent sets *ni. */
static cr_status tangent_number(cr_arena *arena, const char *who, cr_tangent t, cr_complex *v,
                                bool *nonzero, bool *ni)
{
    *v = 0;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    cr__tan_number k = cr__tangent_number(t, v);
    *nonzero = k == CR__TN_NUMBER || k == CR__TN_NOTIMPL;
    *ni = k == CR__TN_NOTIMPL;
    if (k == CR__TN_OTHER)
        return CR__FAIL(arena, CR_ETANGENT, "%s: expected a number tangent, got %s", who,
                        cr_tag_name((cr_tag)t.tag));
    return CR_OK;
}

/* The order and the argument: two real numbers, |order| <= ORDER_MAX for the Bessel
 * functions. */
static cr_status order2_args(cr_arena *arena, const order2_fn *of, const cr_value *args,
                             size_t nargs, double *nu, double *x)
{
    *nu = 0;
    *x = 0;
    if (nargs != 2)
        return CR__FAIL(arena, CR_EINVAL, "%s takes 2 arguments, %zu given", of->name, nargs);
    cr_status st = cr__sf_arg_real(arena, of->name, &args[0], 0, nu);
    if (st == CR_OK)
        st = cr__sf_arg_real(arena, of->name, &args[1], 1, x);
    if (st == CR_OK && of->bessel && !(fabs(*nu) <= ORDER_MAX))
        return CR__FAIL(arena, CR_EDOMAIN, "%s: order %g beyond the supported +-%g", of->name, *nu,
                        ORDER_MAX);
    return st;
}

/* The value and its derivative in x, as complex numbers (real functions: zero imaginary
 * parts); the derivative is NaN where the value is. */
static void order2_eval(const order2_fn *of, double nu, double x, cr_complex *y, cr_complex *d)
{
    if (of->f != NULL) {
        double v = of->f(nu, x);
        *y = v;
        if (d != NULL)
            *d = isnan(v) ? v : of->dx(nu, x, v);
    } else {
        cr_complex v = of->fc(nu, x);
        *y = v;
        if (d != NULL)
            *d = isnan(creal(v)) ? v : of->dxc(nu, x, v);
    }
}

/* A real function's output has the argument's precision; the Hankel functions are complex. */
static cr_value order2_value(const order2_fn *of, const cr_value *xarg, cr_complex y)
{
    if (of->f == NULL)
        return cr_value_c128(y);
    return xarg->kind == CR_KIND_F32 ? cr_value_f32((float)creal(y)) : cr_value_f64(creal(y));
}

static cr_status order2_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    const order2_fn *of = f->u.func.fn->udata;
    double nu, x;
    cr_status st = order2_args(arena, of, args, nargs, &nu, &x);
    if (st != CR_OK)
        return st;
    cr_complex y;
    order2_eval(of, nu, x, &y, NULL);
    *out = order2_value(of, &args[1], y);
    return CR_OK;
}

/* Ω̇ = NotImplemented·ν̇ + ∂f/∂x ẋ: NotImplemented when ν̇ is nonzero (ChainRules' algebra),
 * an integer order is not perturbed. */
static cr_status order2_frule(CR__FRULE_PARAMS)
{
    const order2_fn *of = udata;
    double nu, x;
    cr_complex nd, xd;
    bool nnz, xnz, nni, xni;
    cr_status st = order2_args(arena, of, args, nargs, &nu, &x);
    if (st == CR_OK)
        st = tangent_number(arena, of->name, dargs[1], &nd, &nnz, &nni);
    if (st == CR_OK)
        st = tangent_number(arena, of->name, dargs[2], &xd, &xnz, &xni);
    if (st != CR_OK)
        return st;
    cr_complex v, d;
    order2_eval(of, nu, x, &v, &d);
    *y = order2_value(of, &args[1], v);
    nnz = (nnz || nni) && !cr__is_int_kind(args[0].kind);
    xnz = (xnz || xni) && !cr__is_int_kind(args[1].kind);
    if (nnz || (xnz && xni))
        return CR_NOT_IMPLEMENTED(arena, nnz ? of->info : "NotImplemented tangent of x", dy);
    if (!xnz) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_complex t = d * creal(xd);
    if (of->f == NULL)
        *dy = cr_tangent_c128(t);
    else
        *dy = args[1].kind == CR_KIND_F32 ? cr_tangent_f32((float)creal(t))
                                          : cr_tangent_f64(creal(t));
    return CR_OK;
}

typedef struct order2_env {
    const order2_fn *of;
    cr_complex d;
    uint8_t nkind, xkind;
} order2_env;

/* (NoTangent, NotImplemented (NoTangent for an integer order), real(conj(∂f/∂x) ȳ)): the
 * complex convention of ChainRules for a real argument and a complex output. */
static cr_status order2_pullback(CR__PULLBACK_PARAMS)
{
    const order2_env *e = env;
    cr_complex g;
    bool nz, ni;
    cr_status st = tangent_number(arena, e->of->pullback_name, *dy, &g, &nz, &ni);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    if (cr__is_int_kind((cr_kind)e->nkind))
        dx[1] = cr_tangent_none();
    else if (nz || ni) {
        st = CR_NOT_IMPLEMENTED(arena, e->of->info, &dx[1]);
        if (st != CR_OK)
            return st;
    } else
        dx[1] = cr_tangent_zero();
    if (cr__is_int_kind((cr_kind)e->xkind))
        dx[2] = cr_tangent_none();
    else if (ni)
        return CR_NOT_IMPLEMENTED(arena, "NotImplemented cotangent", &dx[2]);
    else
        dx[2] = nz ? cr__project_real((cr_kind)e->xkind, creal(conj(e->d) * g)) : cr_tangent_zero();
    return CR_OK;
}

static cr_status order2_rrule(CR__RRULE_PARAMS)
{
    const order2_fn *of = udata;
    double nu, x;
    cr_status st = order2_args(arena, of, args, nargs, &nu, &x);
    if (st != CR_OK)
        return st;
    CR__ARENA_NEW(arena, order2_env, e);
    cr_complex v;
    order2_eval(of, nu, x, &v, &e->d);
    e->of = of;
    e->nkind = (uint8_t)args[0].kind;
    e->xkind = (uint8_t)args[1].kind;
    *y = order2_value(of, &args[1], v);
    *pb = (cr_pullback){order2_pullback, e, of->pullback_name, 3};
    return CR_OK;
}

#define ORDER2_FUNCTION(NAME, I) SF_ORDER_FUNCTION(NAME, order2_primal, &k_order2[I])

ORDER2_FUNCTION(besselj, 0)
ORDER2_FUNCTION(bessely, 1)
ORDER2_FUNCTION(besseli, 2)
ORDER2_FUNCTION(besselk, 3)
ORDER2_FUNCTION(besselix, 4)
ORDER2_FUNCTION(besselkx, 5)
ORDER2_FUNCTION(besseljx, 6)
ORDER2_FUNCTION(besselyx, 7)
ORDER2_FUNCTION(hankelh1, 8)
ORDER2_FUNCTION(hankelh2, 9)
ORDER2_FUNCTION(hankelh1x, 10)
ORDER2_FUNCTION(hankelh2x, 11)
ORDER2_FUNCTION(gamma_upper, 12)
ORDER2_FUNCTION(loggamma_upper, 13)
ORDER2_FUNCTION(expint2, 14)
ORDER2_FUNCTION(expintx2, 15)

static const cr_function *const k_order2_fns[N_ORDER2] = {
    &besselj_function,     &bessely_function,        &besseli_function,   &besselk_function,
    &besselix_function,    &besselkx_function,       &besseljx_function,  &besselyx_function,
    &hankelh1_function,    &hankelh2_function,       &hankelh1x_function, &hankelh2x_function,
    &gamma_upper_function, &loggamma_upper_function, &expint2_function,   &expintx2_function};

/* Test registrations: orders in [-2.5, 3.5] (real, negative ones included) and x in
 * [0.3, 12]; hard points at the method switches (x = 2, x = 25 = the Hankel expansion,
 * half-integer and integer orders, order 0). gamma(a, x): a in [-4.5, 6], x in [0.1, 8], hard
 * points at a = 0 and the negative integers and across x = 1 (where a <= 0 changes method).
 * E_nu(x): nu in [-2.5, 4.5], x in [0.05, 6], hard points across x = 1, at nu = 1, at the
 * ends of [1/2, 3/2] where the recurrence starts, and at integers nu <= 0. */
static const double k_bes_lo[] = {-2.5, 0.3}, k_bes_hi[] = {3.5, 12.0};
static const double k_bes_pts[] = {0.0, 1.0,       0.5, 1.999, 0.5,  2.001, 2.0,  25.0, -1.5,
                                   3.0, 1.0 / 3.0, 0.7, -0.25, 24.9, 4.0,   30.0, 0.0,  0.01};
static const cr_rule_test k_bes_test = {.lo = k_bes_lo,
                                        .hi = k_bes_hi,
                                        .points = k_bes_pts,
                                        .npoints = sizeof k_bes_pts / sizeof k_bes_pts[0] / 2};
static const double k_gu_lo[] = {-4.5, 0.1}, k_gu_hi[] = {6.0, 8.0};
static const double k_gu_pts[] = {1.0,  1.0,   0.5,  0.3,   3.0,  20.0,  10.0, 9.5,
                                  0.0,  0.5,   -1.0, 0.999, -1.0, 1.001, -2.5, 0.3,
                                  -0.5, 0.999, -3.0, 4.0,   -0.3, 0.05};
static const cr_rule_test k_gu_test = {.lo = k_gu_lo,
                                       .hi = k_gu_hi,
                                       .points = k_gu_pts,
                                       .npoints = sizeof k_gu_pts / sizeof k_gu_pts[0] / 2};

static const double k_en_lo[] = {-2.5, 0.05}, k_en_hi[] = {4.5, 6.0};
static const double k_en_pts[] = {1.0, 0.5, 1.0, 2.0,   0.5, 0.999, 1.5,  1.001, 1.5,  0.2,
                                  2.0, 0.7, 3.7, 0.999, 0.0, 0.3,   -2.0, 0.7,   -0.5, 3.0};
static const cr_rule_test k_en_test = {.lo = k_en_lo,
                                       .hi = k_en_hi,
                                       .points = k_en_pts,
                                       .npoints = sizeof k_en_pts / sizeof k_en_pts[0] / 2};

cr_status cr__special_register_bessel_integrals(cr_registry *reg)
{
    cr_status st = cr__sf_register_rows(reg, k_rows, sizeof k_rows / sizeof k_rows[0]);
    const cr_argspec real2[2] = {CR_ARG_REAL, CR_ARG_REAL};
    for (size_t i = 0; i < N_ORDER2 && st == CR_OK; i++)
        st = cr__register(reg, k_order2_fns[i], real2, 2, false, order2_frule, order2_rrule,
                          &k_order2[i],
                          k_order2[i].bessel                            ? &k_bes_test
                          : strncmp(k_order2[i].name, "expint", 6) == 0 ? &k_en_test
                                                                        : &k_gu_test);
    return st;
}
