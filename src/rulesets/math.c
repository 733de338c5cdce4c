/*
 * The math rule family: every function of C's <math.h> (rows for the differentiable ones,
 * hand-written rules for frexp and remquo, non-differentiable declarations for rounding and
 * classification), Julia's trigonometric extras (sec ... acoth, the degree and pi
 * variants, sinc), the remainders mod and rem, and the ML scalars of LogExpFunctions.
 *
 * Each rule's comment gives its derivative. Where the textbook formula loses accuracy
 * (cancellation near a domain edge, overflow of an intermediate such as x*x, rounding of
 * a product with pi) the comment says how the row avoids it; docs/rules-scalar.md lists
 * the conventions at kinks and jumps and the measured accuracy.
 */
/* lgamma_r, the reentrant lgamma, is a POSIX/BSD extension of the C library. */
#define _DEFAULT_SOURCE 1

#include <float.h>
#include <limits.h>
#include <string.h>

#include <chainrules/rules_math.h>

#include "../rules/rules_impl.h"

/* Declares the cr_function of a row and its exported function value cr_fn_NAME. */
#define DEFINE_FN(NAME, STR, NIN)                                                        \
    static const cr_function NAME##_function = CR_SCALAR_FUNCTION(STR, NAME##_row, NIN); \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

/* Number of points of a hard-point array of NIN coordinates each. */
#define NPTS(PTS, NIN) (sizeof(PTS) / sizeof(PTS)[0] / (NIN))

/* The test registration of row NAME from the arrays NAME_lo, NAME_hi (sampling box, one
 * bound per argument) and NAME_pts (hard points, nin coordinates each). */
#define TESTREG(NAME)                                                          \
    .test = {.lo = NAME##_lo,                                                  \
             .hi = NAME##_hi,                                                  \
             .npoints = sizeof NAME##_pts / sizeof NAME##_pts[0] / NAME##_nin, \
             .points = NAME##_pts}

/* ---- Constants ------------------------------------------------------------------------ */

/* Pairs HI + LO are the constant to about 107 bits (HI is the nearest double, LO the
 * nearest double to the remainder); they were computed with MPFR at 512 bits. */
#define PI_HI      0x1.921fb54442d18p+1 /* pi */
#define PI_LO      0x1.1a62633145c07p-53
#define D2R_HI     0x1.1df46a2529d39p-6 /* pi/180 */
#define D2R_LO     0x1.5c1d8becdd291p-62
#define R2D_HI     0x1.ca5dc1a63c1f8p+5 /* 180/pi */
#define R2D_LO     -0x1.1e7ab456405f9p-49
#define LN2        0x1.62e42fefa39efp-1 /* log(2), rounded */
#define LN10       0x1.26bb1bbb55516p+1 /* log(10), rounded */
#define TWO_SQRTPI 0x1.20dd750429b6dp+0 /* 2/sqrt(pi), rounded */

/* NaN, infinity and the imaginary unit as double (the <math.h> macros are float). */
#define DNAN ((double)NAN)
#define DINF ((double)INFINITY)
#define DI   ((cr_complex)I)

/* Dispatch a private helper on the type of its first argument: NAME_f for float, NAME_c
 * for double complex, NAME_d otherwise (double). The rows' bodies are instantiated for
 * each type, so a helper gets the type of the instantiation. */
#define GEN(NAME, X) _Generic((X), float : NAME##_f, cr_complex : NAME##_c, default : NAME##_d)
/* The same for real-only helpers. */
#define GENR(NAME, X) _Generic((X), float : NAME##_f, default : NAME##_d)

/* A float helper that evaluates the double helper and rounds once: the float rows are then
 * as accurate as the double ones allow. */
#define FLOAT_VIA_DOUBLE(NAME)             \
    static float NAME##_f(float x)         \
    {                                      \
        return (float)NAME##_d((double)x); \
    }
#define FLOAT_VIA_DOUBLE2(NAME)                       \
    static float NAME##_f(float x, float y)           \
    {                                                 \
        return (float)NAME##_d((double)x, (double)y); \
    }

/* re + i im, keeping the signs of zeros (C11's CMPLX is missing from some compilers). */
static cr_complex cplx(double re, double im)
{
    double parts[2] = {re, im};
    cr_complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}

/* x * (HI + LO) with one rounding of the sum: fma(x, HI, x*LO). */
static double mul_dd(double x, double hi, double lo)
{
    return fma(x, hi, x * lo);
}

/* ---- Exponentials and logarithms of complex arguments (not in C99) --------------------- */

/* exp2, exp10, log2, log10 of a complex z through exp and log. */
static cr_complex exp2_c(cr_complex z)
{
    return exp(z * LN2);
}

static cr_complex exp10_c(cr_complex z)
{
    return exp(z * LN10);
}

static cr_complex log2_c(cr_complex z)
{
    return log(z) / LN2;
}

static cr_complex log10_c(cr_complex z)
{
    return log(z) / LN10;
}

static double exp2_d(double x)
{
    return exp2(x);
}

static float exp2_f(float x)
{
    return exp2(x);
}

static double log2_d(double x)
{
    return log2(x);
}

static float log2_f(float x)
{
    return log2(x);
}

static double log10_d(double x)
{
    return log10(x);
}

static float log10_f(float x)
{
    return log10(x);
}

/* exp10(x) = 10^x. pow(10, x) is the function itself (10 is exact) and C libraries
 * compute pow to within an ulp; exp(x*log(10)) would not be: rounding x*log(10) costs
 * |x*log(10)| ulps. */
static double exp10_d(double x)
{
    return pow(10.0, x);
}

FLOAT_VIA_DOUBLE(exp10)

/* expm1(z) = e^x cos y - 1 + i e^x sin y, with the real part as expm1(x) cos y - 2 sin²(y/2)
 * so that it keeps its relative accuracy near z = 0. */
static cr_complex expm1_c(cr_complex z)
{
    double x = creal(z), y = cimag(z);
    double s = sin(y / 2);
    return cplx(expm1(x) * cos(y) - 2 * s * s, exp(x) * sin(y));
}

static double expm1_d(double x)
{
    return expm1(x);
}

static float expm1_f(float x)
{
    return expm1(x);
}

/* log1p(z): the imaginary part is arg(1 + z); near z = 0 the real part log|1 + z| is
 * log1p(x(2 + x) + y²)/2, which keeps its relative accuracy. */
static cr_complex log1p_c(cr_complex z)
{
    double x = creal(z), y = cimag(z), re;
    if (fabs(x) < 0.5 && fabs(y) < 0.5)
        re = 0.5 * log1p(x * (2 + x) + y * y);
    else
        re = log(hypot(1 + x, y));
    return cplx(re, atan2(y, 1 + x));
}

static double log1p_d(double x)
{
    return log1p(x);
}

static float log1p_f(float x)
{
    return log1p(x);
}

/* ---- Helpers of the trigonometric and hyperbolic rows -------------------------------- */

/* 1/(1 + x²), the derivative of atan. For |x| >= 2^27, 1 + x² rounds to x², which
 * overflows beyond 1.3e154 although 1/x² does not underflow until 1.3e154 only to a
 * subnormal: (1/x)/x keeps the result. Below, fma forms 1 + x² with one rounding. */
static double inv1px2_d(double x)
{
    if (fabs(x) >= 0x1p27)
        return (1 / x) / x;
    return 1 / fma(x, x, 1.0);
}

FLOAT_VIA_DOUBLE(inv1px2)

static cr_complex inv1px2_c(cr_complex z)
{
    return 1 / (1 + z * z);
}

/* 1/sqrt(1 + x²), the derivative of asinh: hypot(1, x) neither overflows nor loses the 1. */
static double invsqrt1px2_d(double x)
{
    return 1 / hypot(1.0, x);
}

FLOAT_VIA_DOUBLE(invsqrt1px2)

static cr_complex invsqrt1px2_c(cr_complex z)
{
    /* 1 + z² = (1 + iz)(1 - iz): the product keeps accuracy near the branch points ±i. */
    return 1 / sqrt((1 + DI * z) * (1 - DI * z));
}

/* asec(x) = acos(1/x) for real |x| >= 1. Rounding 1/x near |x| = 1 would cost the result
 * its accuracy (acos is infinitely sensitive at 1), so use
 * asec(x) = atan2(sqrt(x² - 1), sign(x)) with x² - 1 = (|x| - 1)(|x| + 1) exact near 1;
 * the product of square roots does not overflow for huge x. */
static double asec_d(double x)
{
    double a = fabs(x);
    return atan2(sqrt(a - 1) * sqrt(a + 1), copysign(1.0, x));
}

FLOAT_VIA_DOUBLE(asec)

static cr_complex asec_c(cr_complex z)
{
    return acos(1 / z);
}

/* acsc(x) = asin(1/x) = atan2(sign(x), sqrt(x² - 1)) for real |x| >= 1 (see asec). */
static double acsc_d(double x)
{
    double a = fabs(x);
    return atan2(copysign(1.0, x), sqrt(a - 1) * sqrt(a + 1));
}

FLOAT_VIA_DOUBLE(acsc)

static cr_complex acsc_c(cr_complex z)
{
    return asin(1 / z);
}

/* d/dx asec(x) = 1/(|x| sqrt(x² - 1)) for real x, written so that nothing overflows and
 * x² - 1 is exact near |x| = 1. For complex z it is the chain rule through w = 1/z:
 * 1/(z² sqrt((1 - w)(1 + w))), consistent with acos's branch cut. */
static double dasec_d(double x)
{
    double a = fabs(x);
    return (1 / a) / (sqrt(a - 1) * sqrt(a + 1));
}

FLOAT_VIA_DOUBLE(dasec)

static cr_complex dasec_c(cr_complex z)
{
    cr_complex w = 1 / z;
    return 1 / (z * z * sqrt((1 - w) * (1 + w)));
}

/* asech(x) = acosh(1/x) for real 0 < x <= 1. With d = 1/x - 1 = (1 - x)/x (1 - x is exact
 * near 1), acosh(1 + d) = log1p(d + sqrt(d(2 + d))) keeps the accuracy that acosh(1/x)
 * loses near x = 1. For tiny x, acosh(1/x) ~ log(2/x) = log(2) - log(x) (also when 1/x
 * overflows). */
static double asech_d(double x)
{
    if (x < 0x1p-500 && x > 0)
        return LN2 - log(x);
    double d = (1 - x) / x;
    return log1p(d + sqrt(d * (2 + d)));
}

FLOAT_VIA_DOUBLE(asech)

static cr_complex asech_c(cr_complex z)
{
    return acosh(1 / z);
}

/* d/dx asech(x) = -1/(x sqrt(1 - x²)); complex: -1/(z² sqrt(w - 1) sqrt(w + 1)), w = 1/z,
 * the chain rule through acosh and its branch cut. */
static double dasech_d(double x)
{
    return -1 / (x * sqrt((1 - x) * (1 + x)));
}

FLOAT_VIA_DOUBLE(dasech)

static cr_complex dasech_c(cr_complex z)
{
    cr_complex w = 1 / z;
    return -1 / (z * z * sqrt(w - 1) * sqrt(w + 1));
}

/* acsch(x) = asinh(1/x); for |x| < 2^-500, where 1/x may overflow, asinh(1/x) is
 * log(2/|x|) to double precision. */
static double acsch_d(double x)
{
    if (fabs(x) < 0x1p-500 && x != 0)
        return copysign(LN2 - log(fabs(x)), x);
    return asinh(1 / x);
}

FLOAT_VIA_DOUBLE(acsch)

static cr_complex acsch_c(cr_complex z)
{
    return asinh(1 / z);
}

/* d/dx acsch(x) = -1/(|x| sqrt(1 + x²)) (real); complex: -1/(z² sqrt(1 + w²)), w = 1/z. */
static double dacsch_d(double x)
{
    return -(1 / fabs(x)) / hypot(1.0, x);
}

FLOAT_VIA_DOUBLE(dacsch)

static cr_complex dacsch_c(cr_complex z)
{
    cr_complex w = 1 / z;
    return -1 / (z * z * sqrt((1 + DI * w) * (1 - DI * w)));
}

/* acoth(x) = atanh(1/x) = sign(x) log1p(2/(|x| - 1))/2 for real |x| > 1: |x| - 1 is exact
 * near 1, where atanh(1/x) would suffer from the rounding of 1/x. */
static double acoth_d(double x)
{
    return copysign(0.5 * log1p(2 / (fabs(x) - 1)), x);
}

FLOAT_VIA_DOUBLE(acoth)

static cr_complex acoth_c(cr_complex z)
{
    return atanh(1 / z);
}

/* ---- sin and cos in half-turns and in degrees ---------------------------------------- */

/* Angles measured in units where a quarter turn is `quarter` (1/2 for sinpi, 90 for sind);
 * one unit is k_hi + k_lo radians. */
typedef struct turn_units {
    double period, quarter, k_hi, k_lo;
} turn_units;

static const turn_units k_halfturns = {2.0, 0.5, PI_HI, PI_LO};
static const turn_units k_degrees = {360.0, 90.0, D2R_HI, D2R_LO};

/* sin and cos of b units, |b| <= quarter/2: b*k is formed in double-double (hi + lo) and
 * sin(hi + lo) = sin(hi) + cos(hi) lo to double precision. */
static void sincos_kernel(double b, const turn_units *u, double *s, double *c)
{
    double hi = b * u->k_hi;
    double lo = fma(b, u->k_hi, -hi) + b * u->k_lo;
    double sh = sin(hi), ch = cos(hi);
    *s = sh + ch * lo;
    *c = ch - sh * lo;
}

/*
 * sin and cos of x units, exactly reduced: r = fmod(x, period) is exact, and so is each
 * b = k*quarter - |r| below (both are multiples of ulp(|r|) and |b| is small), so the
 * only roundings are the kernel's. Exact zeros: sinpi at integers, cospi at half-integers,
 * sind at multiples of 180, cosd at odd multiples of 90.
 */
static void sincos_units(double x, const turn_units *u, double *s, double *c)
{
    if (!isfinite(x)) {
        *s = *c = x - x; /* NaN, also for infinite x */
        return;
    }
    double r = fmod(x, u->period), a = fabs(r), q = u->quarter, h = q / 2;
    double sb, cb, st, ct;
    if (a <= h) {
        sincos_kernel(a, u, &st, &ct);
    } else if (a <= 3 * h) { /* a = q - b */
        sincos_kernel(q - a, u, &sb, &cb);
        st = cb;
        ct = sb;
    } else if (a <= 5 * h) { /* a = 2q - b */
        sincos_kernel(2 * q - a, u, &sb, &cb);
        st = sb;
        ct = -cb;
    } else if (a <= 7 * h) { /* a = 3q - b */
        sincos_kernel(3 * q - a, u, &sb, &cb);
        st = -cb;
        ct = -sb;
    } else { /* a = 4q - b */
        sincos_kernel(4 * q - a, u, &sb, &cb);
        st = -sb;
        ct = cb;
    }
    *s = r < 0 ? -st : st;
    *c = ct;
}

static double sinpi_d(double x)
{
    double s, c;
    sincos_units(x, &k_halfturns, &s, &c);
    return s;
}

static double cospi_d(double x)
{
    double s, c;
    sincos_units(x, &k_halfturns, &s, &c);
    return c;
}

static double sind_d(double x)
{
    double s, c;
    sincos_units(x, &k_degrees, &s, &c);
    return s;
}

static double cosd_d(double x)
{
    double s, c;
    sincos_units(x, &k_degrees, &s, &c);
    return c;
}

static double tand_d(double x)
{
    double s, c;
    sincos_units(x, &k_degrees, &s, &c);
    return s / c;
}

static double cotd_d(double x)
{
    double s, c;
    sincos_units(x, &k_degrees, &s, &c);
    return c / s;
}

FLOAT_VIA_DOUBLE(sinpi)
FLOAT_VIA_DOUBLE(cospi)
FLOAT_VIA_DOUBLE(sind)
FLOAT_VIA_DOUBLE(cosd)
FLOAT_VIA_DOUBLE(tand)
FLOAT_VIA_DOUBLE(cotd)

/* x*pi, x*pi/180 and x*180/pi with one rounding (the constants in double-double). */
static double pimul_d(double x)
{
    return mul_dd(x, PI_HI, PI_LO);
}

static double deg2rad_d(double x)
{
    return mul_dd(x, D2R_HI, D2R_LO);
}

static double rad2deg_d(double x)
{
    return mul_dd(x, R2D_HI, R2D_LO);
}

FLOAT_VIA_DOUBLE(pimul)
FLOAT_VIA_DOUBLE(deg2rad)
FLOAT_VIA_DOUBLE(rad2deg)

static cr_complex deg2rad_c(cr_complex z)
{
    return z * D2R_HI;
}

static cr_complex rad2deg_c(cr_complex z)
{
    return z * R2D_HI;
}

/* sinc(x) = sin(pi x)/(pi x), sinc(0) = 1, sinc(±inf) = 0 (Julia). The division by
 * pi x = hi + lo (double-double) is s/hi (1 - lo/hi). */
static double sinc_d(double x)
{
    if (x == 0)
        return 1;
    if (isinf(x))
        return 0;
    double hi = PI_HI * x, lo = fma(PI_HI, x, -hi) + PI_LO * x;
    double q = sinpi_d(x) / hi;
    return q - q * (lo / hi);
}

/*
 * cosc(x) = d/dx sinc(x) = (cos(pi x) - sinc(x))/x. The difference cancels for small x,
 * so for |x| < 1/2 use the series cosc(x) = pi sum_{k>=1} (-1)^k 2k/(2k+1)! (pi x)^(2k-1)
 * (16 terms leave < 1e-22 relative). Near the zeros of cosc (the extrema of sinc,
 * x ~ ±1.43, ±2.46, ...) the difference keeps only its absolute accuracy.
 */
static double cosc_d(double x)
{
    if (isinf(x))
        return 0;
    if (fabs(x) < 0.5) {
        double z = pimul_d(x), z2 = z * z, term = z, fact = 6, sum = 0;
        for (int k = 1; k <= 16; k++) {
            double t = 2 * k * term / fact;
            sum += (k & 1) ? -t : t;
            term *= z2;
            fact *= (double)((2 * k + 2) * (2 * k + 3));
        }
        return mul_dd(sum, PI_HI, PI_LO);
    }
    return (cospi_d(x) - sinc_d(x)) / x;
}

FLOAT_VIA_DOUBLE(sinc)
FLOAT_VIA_DOUBLE(cosc)

/* ---- atan2, hypot, pow --------------------------------------------------------------- */

/*
 * Partials of atan2(y, x): x/(x² + y²) and -y/(x² + y²). x² + y² overflows or underflows
 * long before the partials do (atan2(1e200, 1e200), atan2(1e-200, 1e-200)), so both
 * arguments are first scaled by the power of two 2^-e that brings the larger into [1, 2);
 * the scaling is exact, u = xs² + ys² lies in [1, 8), and the partials are
 * 2^-e xs/u, -2^-e ys/u. At the origin the partials are NaN (atan2 is discontinuous
 * there, not just kinked); with an infinite argument they are 0.
 */
static void atan2_partials_d(double y, double x, double *dy, double *dx)
{
    double m = fmax(fabs(x), fabs(y));
    if (isnan(x) || isnan(y) || m == 0) {
        *dy = *dx = DNAN;
        return;
    }
    if (isinf(m)) {
        *dy = *dx = 0;
        return;
    }
    int e = ilogb(m);
    double xs = scalbn(x, -e), ys = scalbn(y, -e);
    double u = fma(xs, xs, ys * ys);
    *dy = scalbn(xs / u, -e);
    *dx = scalbn(-ys / u, -e);
}

static double atan2_dy_d(double y, double x)
{
    double a, b;
    atan2_partials_d(y, x, &a, &b);
    return a;
}

static double atan2_dx_d(double y, double x)
{
    double a, b;
    atan2_partials_d(y, x, &a, &b);
    return b;
}

FLOAT_VIA_DOUBLE2(atan2_dy)
FLOAT_VIA_DOUBLE2(atan2_dx)

/* ∂/∂x hypot(x, y) = x/h (h = hypot(x, y)), 0 at the origin (ChainRules). When h
 * overflows although x/h does not (hypot(1.7e308, 1.7e308)), the arguments are first
 * scaled by a power of two. */
static double hypot_dx_d(double x, double y, double h)
{
    if (h == 0)
        return 0;
    if (isinf(h) && isfinite(x) && isfinite(y)) {
        int e = ilogb(fmax(fabs(x), fabs(y)));
        double xs = scalbn(x, -e), ys = scalbn(y, -e);
        return xs / sqrt(fma(xs, xs, ys * ys));
    }
    return x / h;
}

static float hypot_dx_f(float x, float y, float h)
{
    (void)h; /* recomputed in double, where it does not overflow */
    return (float)hypot_dx_d((double)x, (double)y, hypot((double)x, (double)y));
}

/*
 * ∂/∂x x^y = y x^(y-1), given z = x^y. Away from over- and underflow, y (z/x) costs three
 * roundings; computing x^(y-1) instead would cost |log x| ulps from rounding y - 1. When z
 * or z/x over- or underflows, y x^(y-1) is the fallback (then |y| > 1/2 and y - 1 is exact
 * or the result is not finite anyway).
 * At x = 0, ChainRules' conventions: y < 0: ±inf (y z/x); y == 1: 1; y == 0 or y > 1: 0;
 * 0 < y < 1: +inf.
 */
static double pow_dx_d(double x, double y, double z)
{
    if (x == 0) {
        if (isnan(y))
            return y;
        if (y < 0)
            return y * z / x;
        if (y == 1)
            return 1;
        if (y == 0 || y > 1)
            return 0;
        return DINF;
    }
    if (isfinite(z) && fabs(z) >= DBL_MIN) {
        double q = z / x;
        if (isfinite(q) && fabs(q) >= DBL_MIN)
            return y * q;
    }
    return y * pow(x, y - 1);
}

/*
 * ∂/∂y x^y = x^y log(x) for x > 0. For x < 0 (x^y real only at integers y) we return
 * x^y log|x|, the real part of the derivative of the complex power, as ChainRules does
 * (NaN when y is not an integer, since x^y is). At x = 0: 0 when y > 0, NaN otherwise.
 */
static double pow_dy_d(double x, double y, double z)
{
    if (x == 0)
        return y > 0 ? 0.0 : DNAN;
    return z * log(fabs(x));
}

static float pow_dx_f(float x, float y, float z)
{
    return (float)pow_dx_d((double)x, (double)y, (double)z);
}

static float pow_dy_f(float x, float y, float z)
{
    return (float)pow_dy_d((double)x, (double)y, (double)z);
}

/* Complex x and y: y z/x and z log(x); at x = 0 the real conventions apply for real y. */
static cr_complex pow_dx_c(cr_complex x, cr_complex y, cr_complex z)
{
    if (x == 0)
        return cimag(y) == 0 ? pow_dx_d(0.0, creal(y), creal(z)) : DNAN;
    return y * (z / x);
}

static cr_complex pow_dy_c(cr_complex x, cr_complex y, cr_complex z)
{
    if (x == 0)
        return cimag(y) == 0 ? pow_dy_d(0.0, creal(y), creal(z)) : DNAN;
    return z * log(x);
}

/* ---- erf, gamma ----------------------------------------------------------------------- */

/*
 * (2/sqrt(pi)) exp(-x²), the derivative of erf. Rounding x² would cost x² ulps in the
 * exponential (676 ulps at x = 26, where erfc is still normal), so x² = h + l exactly
 * (fma) and exp(-h - l) = exp(-h)(1 - l).
 */
static double derf_d(double x)
{
    double h = x * x, l = fma(x, x, -h);
    double e = exp(-h);
    return TWO_SQRTPI * (e - e * l);
}

FLOAT_VIA_DOUBLE(derf)

/*
 * digamma (psi), for the derivatives of tgamma and lgamma, and behind cr_sf_digamma of the
 * special-function family (one implementation).
 *   - x >= 10: asymptotic series psi(x) = log x - 1/(2x) - sum B_2k/(2k x^2k), 8 terms.
 *   - |x - x0| < 1/2 around the positive root x0 = 1.46163...: the Taylor series
 *     psi(x0 + t) = sum_k c_k t^k, c_k = (-1)^(k+1) zeta(k+1, x0), with t = x - x0 formed
 *     from x0 in double-double, so psi keeps its relative accuracy through its root.
 *     The coefficients were computed with MPFR (Hurwitz zeta by Euler-Maclaurin, 512
 *     bits); 40 terms leave < 1e-19 relative at |t| = 1/2.
 *   - other x > 0: the recurrence psi(x) = psi(x - n) + sum 1/(x - k) down into that
 *     interval (x - k is exact there), or psi(x) = psi(x + 1) - 1/x below it.
 *   - x <= 0: reflection psi(x) = psi(1 - x) - pi cot(pi x), with cot(pi x) from the
 *     exactly reduced sinpi and cospi; NaN at the poles 0, -1, -2, ...
 * Near the negative roots of psi (x ~ -0.504, -1.573, ...) the reflection keeps only its
 * absolute accuracy.
 */
#define PSI_ROOT_HI 0x1.762d86356be3fp+0
#define PSI_ROOT_LO 0x1.b86a722197829p-54

static const double k_psi_taylor[40] = {
    0x1.ef72bc8ee38acp-1,  -0x1.c563b54aa1a35p-2,  0x1.08b4294d50381p-2,  -0x1.4fc1317257da8p-3,
    0x1.b9a5b6370f3abp-4,  -0x1.27baba261cc2cp-4,  0x1.8fce02b239ca7p-5,  -0x1.0fa7ec36a7d8fp-5,
    0x1.723d6807edccp-6,   -0x1.f970508e1b6a2p-7,  0x1.5955caaa962f3p-7,  -0x1.d828079282eb8p-8,
    0x1.42e1acf81d8dcp-8,  -0x1.b9afc7cee8a14p-9,  0x1.2e23345f79aafp-9,  -0x1.9d626f71d1f7ap-10,
    0x1.1acebbd761089p-10, -0x1.82f6345c65b35p-11, 0x1.08bdae1a261d4p-11, -0x1.6a3fddea11304p-12,
    0x1.efacab6fb8985p-13, -0x1.531f5dc5eb563p-13, 0x1.d0080f810fab5p-14, -0x1.3d7972688af67p-14,
    0x1.b2691182c5c34p-15, -0x1.29357f7d6cb86p-15, 0x1.96ae4a8e32b49p-16, -0x1.163cc7373be8bp-16,
    0x1.7cb8b3916fd29p-17, -0x1.047a1894e0fdep-17, 0x1.646b54f410bdfp-18, -0x1.e7b34a5b78a3cp-19,
    0x1.4dab173747443p-19, -0x1.c891c9fca61dep-20, 0x1.385e9fcb1c6a8p-20, -0x1.ab6cff79188aap-21,
    0x1.246e3329dab55p-21, -0x1.902471b2c8ebdp-22, 0x1.11c399dbd8e73p-22, -0x1.7699ba6292b3ep-23,
};

static double digamma_pos(double x)
{
    if (x >= 10) {
        double r = 1 / x, r2 = r * r;
        /* -sum B_2k/(2k) r^2k, k = 1..8, in Horner form */
        double s =
            r2 *
            (1.0 / 12 -
             r2 * (1.0 / 120 -
                   r2 * (1.0 / 252 -
                         r2 * (1.0 / 240 -
                               r2 * (1.0 / 132 - r2 * (691.0 / 32760 -
                                                       r2 * (1.0 / 12 - r2 * (3617.0 / 8160))))))));
        return log(x) - 0.5 * r - s;
    }
    double lo = PSI_ROOT_HI - 0.5, hi = PSI_ROOT_HI + 0.5;
    if (x < lo)
        return digamma_pos(x + 1) - 1 / x;
    if (x >= hi) {
        int n = (int)floor(x - lo);
        double sum = 0;
        for (int k = 1; k <= n; k++)
            sum += 1 / (x - k);
        return digamma_pos(x - n) + sum;
    }
    double t = (x - PSI_ROOT_HI) - PSI_ROOT_LO, p = 0;
    for (int k = 39; k >= 0; k--)
        p = p * t + k_psi_taylor[k];
    return p * t;
}

double cr__digamma(double x)
{
    if (isnan(x) || x == DINF)
        return x;
    if (x > 0)
        return digamma_pos(x);
    if (x == floor(x))
        return DNAN; /* poles at 0, -1, -2, ...; also -inf */
    double s, c;
    sincos_units(x, &k_halfturns, &s, &c);
    return digamma_pos(1 - x) - PI_HI * (c / s);
}

/* lgamma without the global signgam where the C library offers a reentrant variant
 * (rules must be reentrant: STYLE.md §8). */
#if defined(__GLIBC__) && defined(_DEFAULT_SOURCE)
static double lgamma_d(double x)
{
    int sign;
    return lgamma_r(x, &sign);
}
#else
static double lgamma_d(double x)
{
    return lgamma(x);
}
#endif

static double digamma_d(double x)
{
    return cr__digamma(x);
}

FLOAT_VIA_DOUBLE(lgamma)
FLOAT_VIA_DOUBLE(digamma)

static double tgamma_d(double x)
{
    return tgamma(x);
}

static float tgamma_f(float x)
{
    return tgamma(x);
}

/* ---- Remainders ----------------------------------------------------------------------- */

/* The integer quotient n of a remainder: x = n y + r exactly, n integral. (x - r)/y is
 * within an ulp of n, so rounding recovers it while |n| < 2^51. */
static double quotient(double x, double y, double r)
{
    if (isinf(y))
        return 0;
    return round((x - r) / y);
}

/*
 * Partials of the remainders fmod (rem), remainder and mod: ∂/∂x = 1, ∂/∂y = -n with n the
 * integer quotient. At a jump of the function both are NaN (ChainRules' rem and mod):
 *   fmod:      x/y a nonzero integer (r == 0, x != 0); at x = 0, where fmod(x, y) = x
 *              near 0, the partials are (1, 0);
 *   remainder: x/y a half-integer (|r| == |y|/2);
 *   mod:       x/y an integer, x = 0 included (r == 0).
 */
typedef enum { REM_FMOD, REM_REMAINDER, REM_MOD } rem_kind;

static double rem_partial_d(rem_kind kind, int wrt, double x, double y, double r)
{
    bool jump = false;
    switch (kind) {
    case REM_FMOD:
        jump = r == 0 && x != 0;
        break;
    case REM_REMAINDER:
        jump = fabs(r) == fabs(y) / 2;
        break;
    case REM_MOD:
        jump = r == 0;
        break;
    }
    if (jump || isnan(r))
        return DNAN;
    if (wrt == 0)
        return 1;
    return x == 0 ? 0.0 : -quotient(x, y, r);
}

static float rem_partial_f(rem_kind kind, int wrt, float x, float y, float r)
{
    return (float)rem_partial_d(kind, wrt, (double)x, (double)y, (double)r);
}

#define REM_PARTIAL(KIND, WRT, X, Y, R) \
    _Generic((X), float : rem_partial_f, default : rem_partial_d)(KIND, WRT, X, Y, R)

/* Julia's mod(x, y) = x - floor(x/y) y: the remainder with the sign of y. */
static double mod_d(double x, double y)
{
    double r = fmod(x, y);
    if (r != 0 && (r < 0) != (y < 0))
        r += y;
    else if (r == 0)
        r = copysign(0.0, y);
    return r;
}

FLOAT_VIA_DOUBLE2(mod)

/* modf, which <tgmath.h> leaves out. */
static double modf_d(double x, double *ip)
{
    return modf(x, ip);
}

static float modf_f(float x, float *ip)
{
    return modff(x, ip);
}

/* An int (long) exponent argument of ldexp, scalbn (scalbln) given as a real number. */
static int to_int(double n)
{
    if (isnan(n))
        return 0;
    return n >= (double)INT_MAX ? INT_MAX : n <= (double)INT_MIN ? INT_MIN : (int)n;
}

static long to_long(double n)
{
    if (isnan(n))
        return 0;
    return n >= (double)LONG_MAX ? LONG_MAX : n <= (double)LONG_MIN ? LONG_MIN : (long)n;
}

/* ---- LogExpFunctions ------------------------------------------------------------------ */

/* logistic(x) = 1/(1 + e^-x): accurate for every x (for x << 0 it is e^x/(1 + e^x)). */
static double logistic_d(double x)
{
    return 1 / (1 + exp(-x));
}

/* logistic'(x) = logistic(x) logistic(-x): unlike Ω(1 - Ω), it does not round to 0 when
 * Ω rounds to 1 (x > 37). */
static double dlogistic_d(double x)
{
    return logistic_d(x) * logistic_d(-x);
}

/* log1pexp(x) = log(1 + e^x) = x + log1p(e^-x) for x > 0, no cancellation either side. */
static double log1pexp_d(double x)
{
    return x <= 0 ? log1p(exp(x)) : x + log1p(exp(-x));
}

FLOAT_VIA_DOUBLE(logistic)
FLOAT_VIA_DOUBLE(dlogistic)
FLOAT_VIA_DOUBLE(log1pexp)

/* logaddexp(x, y) = log(e^x + e^y) = max + log1p(e^-|x - y|); equal arguments (also equal
 * infinities) give x + log 2. */
static double logaddexp_d(double x, double y)
{
    if (isnan(x) || isnan(y))
        return x + y;
    if (x == y)
        return x + LN2;
    return fmax(x, y) + log1p(exp(-fabs(x - y)));
}

FLOAT_VIA_DOUBLE2(logaddexp)

/*
 * ∂/∂x logaddexp(x, y) = e^(x - Ω) = logistic(x - y). The rounding error of t = x - y
 * (recovered exactly by TwoSum) would cost |t| ulps, so it is added back to first order:
 * logistic(t + e) = logistic(t) + logistic(t) logistic(-t) e. Equal arguments give 1/2.
 */
static double dlogaddexp_d(double x, double y)
{
    if (isnan(x) || isnan(y))
        return x + y;
    if (x == y)
        return 0.5;
    double t = x - y;
    double e = 0;
    if (isfinite(t)) {
        double b = t - x;
        e = (x - (t - b)) + (-y - b);
    }
    double p = logistic_d(t);
    return p + p * logistic_d(-t) * e;
}

FLOAT_VIA_DOUBLE2(dlogaddexp)

/* ========================================================================================
 * Rows
 * ======================================================================================== */

/* ---- Trigonometric ---- */

/* sin(x): cos(x). Huge arguments (sin(1e22)) rely on the C library's exact reduction. */
static const double sin_lo[] = {-3.5}, sin_hi[] = {3.5};
static const double sin_pts[] = {3.141592653589793,  -1e-300, 0x1p-1074,
                                 1.5707963267948966, 1e22,    1e300};
CR_SCALAR_EVALS(sin, 1, 1, Y[0] = sin(x[0]), D[0] = cos(x[0]))
static const cr_scalar_rule sin_row = CR_SCALAR_ROW_EX(sin, TESTREG(sin));
DEFINE_FN(sin, "sin", 1)

/* cos(x): -sin(x) */
static const double cos_lo[] = {-3.5}, cos_hi[] = {3.5};
static const double cos_pts[] = {3.141592653589793, 1.5707963267948966, 1e-300, 1e22, 1e300};
CR_SCALAR_EVALS(cos, 1, 1, Y[0] = cos(x[0]), D[0] = -sin(x[0]))
static const cr_scalar_rule cos_row = CR_SCALAR_ROW_EX(cos, TESTREG(cos));
DEFINE_FN(cos, "cos", 1)

/* sincos(x) = (sin x, cos x): partials (cos x, -sin x) */
static const double sincos_lo[] = {-3.5}, sincos_hi[] = {3.5};
static const double sincos_pts[] = {3.141592653589793, 1.5707963267948966, 1e22, 1e300};
CR_SCALAR_EVALS(sincos, 1, 2, Y[0] = sin(x[0]); Y[1] = cos(x[0]), D[0] = Y[1]; D[1] = -Y[0])
static const cr_scalar_rule sincos_row = CR_SCALAR_ROW_EX(sincos, TESTREG(sincos));
DEFINE_FN(sincos, "sincos", 1)

/* tan(x): 1 + Ω² */
static const double tan_lo[] = {-1.4}, tan_hi[] = {1.4};
static const double tan_pts[] = {1e-300, 1e22, 1.5707963267948966, -1.5707963267948966, 1e300};
CR_SCALAR_EVALS(tan, 1, 1, Y[0] = tan(x[0]), D[0] = 1 + Y[0] * Y[0])
static const cr_scalar_rule tan_row = CR_SCALAR_ROW_EX(tan, TESTREG(tan));
DEFINE_FN(tan, "tan", 1)

/* asin(x): 1/sqrt((1 - x)(1 + x)); the product form keeps accuracy near |x| = 1 where
 * 1 - x*x cancels. */
static const double asin_lo[] = {-0.99}, asin_hi[] = {0.99};
static const double asin_pts[] = {0.9999999999,          -0.9999999999, 0x1.fffffffffffffp-1,
                                  -0x1.fffffffffffffp-1, 1 - 0x1p-30,   1e-300};
CR_SCALAR_EVALS(asin, 1, 1, Y[0] = asin(x[0]), D[0] = 1 / sqrt((1 - x[0]) * (1 + x[0])))
static const cr_scalar_rule asin_row =
    CR_SCALAR_ROW_EX(asin, TESTREG(asin), .notes = "-1 < x < 1 for real x; ±inf at ±1");
DEFINE_FN(asin, "asin", 1)

/* acos(x): -1/sqrt((1 - x)(1 + x)) */
static const double acos_lo[] = {-0.99}, acos_hi[] = {0.99};
static const double acos_pts[] = {0.9999999999, -0.9999999999, 0x1.fffffffffffffp-1,
                                  -0x1.fffffffffffffp-1, 1e-300};
CR_SCALAR_EVALS(acos, 1, 1, Y[0] = acos(x[0]), D[0] = -1 / sqrt((1 - x[0]) * (1 + x[0])))
static const cr_scalar_rule acos_row =
    CR_SCALAR_ROW_EX(acos, TESTREG(acos), .notes = "-1 < x < 1 for real x; -inf at ±1");
DEFINE_FN(acos, "acos", 1)

/* atan(x): 1/(1 + x²), without overflow of x² for huge x */
static const double atan_lo[] = {-3}, atan_hi[] = {3};
static const double atan_pts[] = {1e200, -1e300, 1e154, 1e-200, 0x1p27, 1e8};
CR_SCALAR_EVALS(atan, 1, 1, Y[0] = atan(x[0]), D[0] = GEN(inv1px2, x[0])(x[0]))
static const cr_scalar_rule atan_row = CR_SCALAR_ROW_EX(atan, TESTREG(atan));
DEFINE_FN(atan, "atan", 1)

/* atan2(y, x): (x, -y)/(x² + y²), scaled (see atan2_partials_d) */
static const double atan2_lo[] = {0.2, 0.2}, atan2_hi[] = {3, 3};
static const double atan2_pts[] = {1e200,   1e200, 1e300, 1.0,    1.0,    1e300,   1.0,
                                   -1e-300, 3.0,   -4.0,  1e-200, 1e-200, -1e-310, 5e-324};
CR_SCALAR_EVALS_REAL(atan2, 2, 1, Y[0] = atan2(x[0], x[1]), D[0] = GENR(atan2_dy, x[0])(x[0], x[1]);
                     D[1] = GENR(atan2_dx, x[0])(x[0], x[1]))
static const cr_scalar_rule atan2_row = CR_SCALAR_ROW_REAL_EX(
    atan2, TESTREG(atan2),
    .notes = "partials computed after exact power-of-two scaling (no overflow of x²+y²); "
             "NaN at (0, 0), where atan2 is discontinuous; 0 when an argument is infinite");
DEFINE_FN(atan2, "atan2", 2)

/* sec(x) = 1/cos(x): Ω tan(x) */
static const double sec_lo[] = {-1.4}, sec_hi[] = {1.4};
static const double sec_pts[] = {3.0, 1e22, 1.5707963267948966};
CR_SCALAR_EVALS(sec, 1, 1, Y[0] = 1 / cos(x[0]), D[0] = Y[0] * tan(x[0]))
static const cr_scalar_rule sec_row = CR_SCALAR_ROW_EX(sec, TESTREG(sec));
DEFINE_FN(sec, "sec", 1)

/* csc(x) = 1/sin(x): -Ω cot(x) */
static const double csc_lo[] = {0.2}, csc_hi[] = {3};
static const double csc_pts[] = {-2.0, 1e22, 3.141592653589793, 1e-150};
CR_SCALAR_EVALS(csc, 1, 1, Y[0] = 1 / sin(x[0]), D[0] = -Y[0] / tan(x[0]))
static const cr_scalar_rule csc_row = CR_SCALAR_ROW_EX(csc, TESTREG(csc));
DEFINE_FN(csc, "csc", 1)

/* cot(x) = 1/tan(x): -(1 + Ω²) */
static const double cot_lo[] = {0.2}, cot_hi[] = {3};
static const double cot_pts[] = {-2.0, 1.5707963267948966, 1e22, 3.141592653589793, 1e-150};
CR_SCALAR_EVALS(cot, 1, 1, Y[0] = 1 / tan(x[0]), D[0] = -(1 + Y[0] * Y[0]))
static const cr_scalar_rule cot_row = CR_SCALAR_ROW_EX(cot, TESTREG(cot));
DEFINE_FN(cot, "cot", 1)

/* asec(x): 1/(|x| sqrt(x² - 1)) (see asec_d, dasec_d) */
static const double asec_lo[] = {1.05}, asec_hi[] = {4};
static const double asec_pts[] = {1 + 0x1p-40, -1 - 0x1p-40, 1e300, -1e200, 1.0000000001};
CR_SCALAR_EVALS(asec, 1, 1, Y[0] = GEN(asec, x[0])(x[0]), D[0] = GEN(dasec, x[0])(x[0]))
static const cr_scalar_rule asec_row =
    CR_SCALAR_ROW_EX(asec, TESTREG(asec), .notes = "|x| > 1 for real x; +inf at ±1");
DEFINE_FN(asec, "asec", 1)

/* acsc(x): -1/(|x| sqrt(x² - 1)) */
static const double acsc_lo[] = {1.05}, acsc_hi[] = {4};
static const double acsc_pts[] = {1 + 0x1p-40, -1 - 0x1p-40, 1e300, -1e200, 1.0000000001};
CR_SCALAR_EVALS(acsc, 1, 1, Y[0] = GEN(acsc, x[0])(x[0]), D[0] = -GEN(dasec, x[0])(x[0]))
static const cr_scalar_rule acsc_row =
    CR_SCALAR_ROW_EX(acsc, TESTREG(acsc), .notes = "|x| > 1 for real x; -inf at ±1");
DEFINE_FN(acsc, "acsc", 1)

/* acot(x) = atan(1/x): -1/(1 + x²) */
static const double acot_lo[] = {0.2}, acot_hi[] = {3};
static const double acot_pts[] = {1e200, -1e300, -0.5, 1e-200};
CR_SCALAR_EVALS(acot, 1, 1, Y[0] = atan(1 / x[0]), D[0] = -GEN(inv1px2, x[0])(x[0]))
static const cr_scalar_rule acot_row =
    CR_SCALAR_ROW_EX(acot, TESTREG(acot), .notes = "acot(±0) = ±pi/2 (jump at 0)");
DEFINE_FN(acot, "acot", 1)

/* ---- Hyperbolic ---- */

/* sinh(x): cosh(x) */
static const double sinh_lo[] = {-3}, sinh_hi[] = {3};
static const double sinh_pts[] = {700, -700, 1e-300, 0.5};
CR_SCALAR_EVALS(sinh, 1, 1, Y[0] = sinh(x[0]), D[0] = cosh(x[0]))
static const cr_scalar_rule sinh_row = CR_SCALAR_ROW_EX(sinh, TESTREG(sinh));
DEFINE_FN(sinh, "sinh", 1)

/* cosh(x): sinh(x) */
static const double cosh_lo[] = {-3}, cosh_hi[] = {3};
static const double cosh_pts[] = {700, -700, 1e-300, 0.5};
CR_SCALAR_EVALS(cosh, 1, 1, Y[0] = cosh(x[0]), D[0] = sinh(x[0]))
static const cr_scalar_rule cosh_row = CR_SCALAR_ROW_EX(cosh, TESTREG(cosh));
DEFINE_FN(cosh, "cosh", 1)

/* tanh(x): sech²(x) = (1 - Ω)(1 + Ω) while |Ω| < 1/2 (no cancellation there: within two
 * ulps, and no second call), else (1/cosh x)²: 1 - Ω² would round to 0 once Ω rounds to ±1
 * (|x| > 19) although the derivative is 4e^-2|x|; 1/cosh neither cancels nor overflows
 * early. */
static const double tanh_lo[] = {-3}, tanh_hi[] = {3};
static const double tanh_pts[] = {20, -40, 300, -354, 1e-300, 0.3, 0.549, 0.5493, 0.55, -0.5493};
CR_SCALAR_EVALS(tanh, 1, 1, Y[0] = tanh(x[0]), T y_ = Y[0]; T n_ = 2 * fabs(y_) < 1;
                T s_ = n_ != 0 ? 1 : 1 / cosh(x[0]); D[0] = n_ != 0 ? (1 - y_) * (1 + y_) : s_ * s_)
static const cr_scalar_rule tanh_row = CR_SCALAR_ROW_EX(tanh, TESTREG(tanh));
DEFINE_FN(tanh, "tanh", 1)

/* asinh(x): 1/sqrt(1 + x²) = 1/hypot(1, x) (no overflow of x² for huge x) */
static const double asinh_lo[] = {-3}, asinh_hi[] = {3};
static const double asinh_pts[] = {1e200, -1e300, 1e-300, 0x1p27};
CR_SCALAR_EVALS(asinh, 1, 1, Y[0] = asinh(x[0]), D[0] = GEN(invsqrt1px2, x[0])(x[0]))
static const cr_scalar_rule asinh_row = CR_SCALAR_ROW_EX(asinh, TESTREG(asinh));
DEFINE_FN(asinh, "asinh", 1)

/* acosh(x): 1/(sqrt(x - 1) sqrt(x + 1)): x - 1 is exact near 1 and the product of square
 * roots does not overflow for huge x (x*x does); also the complex branch. */
static const double acosh_lo[] = {1.05}, acosh_hi[] = {4};
static const double acosh_pts[] = {1 + 0x1p-40, 1.0000000001, 1e300, 1.7e308, 1e154};
CR_SCALAR_EVALS(acosh, 1, 1, Y[0] = acosh(x[0]), D[0] = 1 / (sqrt(x[0] - 1) * sqrt(x[0] + 1)))
static const cr_scalar_rule acosh_row =
    CR_SCALAR_ROW_EX(acosh, TESTREG(acosh), .notes = "x > 1 for real x; +inf at 1");
DEFINE_FN(acosh, "acosh", 1)

/* atanh(x): 1/((1 - x)(1 + x)), exact factors near ±1 */
static const double atanh_lo[] = {-0.95}, atanh_hi[] = {0.95};
static const double atanh_pts[] = {1 - 0x1p-40, -0.9999999999, 0x1.fffffffffffffp-1, 1e-300};
CR_SCALAR_EVALS(atanh, 1, 1, Y[0] = atanh(x[0]), D[0] = 1 / (1 - x[0]) / (1 + x[0]))
static const cr_scalar_rule atanh_row =
    CR_SCALAR_ROW_EX(atanh, TESTREG(atanh), .notes = "-1 < x < 1 for real x; +inf at ±1");
DEFINE_FN(atanh, "atanh", 1)

/* sech(x) = 1/cosh(x): -tanh(x) Ω */
static const double sech_lo[] = {-3}, sech_hi[] = {3};
static const double sech_pts[] = {40, -300, 700, 1e-300};
CR_SCALAR_EVALS(sech, 1, 1, Y[0] = 1 / cosh(x[0]), D[0] = -tanh(x[0]) * Y[0])
static const cr_scalar_rule sech_row = CR_SCALAR_ROW_EX(sech, TESTREG(sech));
DEFINE_FN(sech, "sech", 1)

/* csch(x) = 1/sinh(x): -Ω/tanh(x) */
static const double csch_lo[] = {0.2}, csch_hi[] = {3};
static const double csch_pts[] = {40, -300, 700, 1e-150};
CR_SCALAR_EVALS(csch, 1, 1, Y[0] = 1 / sinh(x[0]), D[0] = -Y[0] / tanh(x[0]))
static const cr_scalar_rule csch_row = CR_SCALAR_ROW_EX(csch, TESTREG(csch));
DEFINE_FN(csch, "csch", 1)

/* coth(x) = 1/tanh(x): -csch²(x) = -(1/sinh x)²; 1 - Ω² would cancel for large |x| */
static const double coth_lo[] = {0.2}, coth_hi[] = {3};
static const double coth_pts[] = {40, -300, 700, 1e-150};
CR_SCALAR_EVALS(coth, 1, 1, Y[0] = 1 / tanh(x[0]), T s_ = 1 / sinh(x[0]); D[0] = -(s_ * s_))
static const cr_scalar_rule coth_row = CR_SCALAR_ROW_EX(coth, TESTREG(coth));
DEFINE_FN(coth, "coth", 1)

/* asech(x): -1/(x sqrt(1 - x²)) (see asech_d, dasech_d) */
static const double asech_lo[] = {0.05}, asech_hi[] = {0.95};
static const double asech_pts[] = {1 - 0x1p-40, 0.9999999999, 1e-300, 1e-150};
CR_SCALAR_EVALS(asech, 1, 1, Y[0] = GEN(asech, x[0])(x[0]), D[0] = GEN(dasech, x[0])(x[0]))
static const cr_scalar_rule asech_row =
    CR_SCALAR_ROW_EX(asech, TESTREG(asech), .notes = "0 < x < 1 for real x; -inf at 1");
DEFINE_FN(asech, "asech", 1)

/* acsch(x): -1/(|x| sqrt(1 + x²)) */
static const double acsch_lo[] = {0.2}, acsch_hi[] = {3};
static const double acsch_pts[] = {1e200, -1e300, -0.5, 1e-300};
CR_SCALAR_EVALS(acsch, 1, 1, Y[0] = GEN(acsch, x[0])(x[0]), D[0] = GEN(dacsch, x[0])(x[0]))
static const cr_scalar_rule acsch_row = CR_SCALAR_ROW_EX(acsch, TESTREG(acsch));
DEFINE_FN(acsch, "acsch", 1)

/* acoth(x): 1/((1 - x)(1 + x)), divided in turn so that nothing overflows */
static const double acoth_lo[] = {1.05}, acoth_hi[] = {4};
static const double acoth_pts[] = {1 + 0x1p-40, -1.0000000001, 1e200, -1e300};
CR_SCALAR_EVALS(acoth, 1, 1, Y[0] = GEN(acoth, x[0])(x[0]), D[0] = 1 / (1 - x[0]) / (1 + x[0]))
static const cr_scalar_rule acoth_row =
    CR_SCALAR_ROW_EX(acoth, TESTREG(acoth), .notes = "|x| > 1 for real x; -inf at ±1");
DEFINE_FN(acoth, "acoth", 1)

/* ---- Pi and degree variants (real arguments) ---- */

/* sinpi(x) = sin(pi x), exactly reduced: pi cospi(x) */
static const double sinpi_lo[] = {-3}, sinpi_hi[] = {3};
static const double sinpi_pts[] = {1e15 + 0.5, 0.5, 1.0, -2.25, 1e-300, 123456.75, 1e300};
CR_SCALAR_EVALS_REAL(sinpi, 1, 1, Y[0] = GENR(sinpi, x[0])(x[0]),
                     D[0] = GENR(pimul, x[0])(GENR(cospi, x[0])(x[0])))
static const cr_scalar_rule sinpi_row = CR_SCALAR_ROW_REAL_EX(
    sinpi, TESTREG(sinpi), .notes = "exact zeros at integers; the argument is reduced exactly");
DEFINE_FN(sinpi, "sinpi", 1)

/* cospi(x) = cos(pi x): -pi sinpi(x) */
static const double cospi_lo[] = {-3}, cospi_hi[] = {3};
static const double cospi_pts[] = {0.5, 1.0, -2.25, 1e-300, 123456.75, 1e300, 1e15 + 0.5};
CR_SCALAR_EVALS_REAL(cospi, 1, 1, Y[0] = GENR(cospi, x[0])(x[0]),
                     D[0] = -GENR(pimul, x[0])(GENR(sinpi, x[0])(x[0])))
static const cr_scalar_rule cospi_row =
    CR_SCALAR_ROW_REAL_EX(cospi, TESTREG(cospi), .notes = "exact zeros at half-integers");
DEFINE_FN(cospi, "cospi", 1)

/* sincospi(x) = (sinpi(x), cospi(x)): (pi cospi(x), -pi sinpi(x)) */
static const double sincospi_lo[] = {-3}, sincospi_hi[] = {3};
static const double sincospi_pts[] = {0.5, 1.0, -2.25, 1e-300, 1e15 + 0.5};
CR_SCALAR_EVALS_REAL(sincospi, 1, 2, Y[0] = GENR(sinpi, x[0])(x[0]);
                     Y[1] = GENR(cospi, x[0])(x[0]), D[0] = GENR(pimul, x[0])(Y[1]);
                     D[1] = -GENR(pimul, x[0])(Y[0]))
static const cr_scalar_rule sincospi_row = CR_SCALAR_ROW_REAL_EX(sincospi, TESTREG(sincospi));
DEFINE_FN(sincospi, "sincospi", 1)

/* sinc(x) = sinpi(x)/(pi x): cosc(x) (see cosc_d) */
static const double sinc_lo[] = {-3}, sinc_hi[] = {3};
static const double sinc_pts[] = {1e-8, 1e-300, 0.49, 0.51, 100.5, -3.0, 1e10 + 0.25};
CR_SCALAR_EVALS_REAL(sinc, 1, 1, Y[0] = GENR(sinc, x[0])(x[0]), D[0] = GENR(cosc, x[0])(x[0]))
static const cr_scalar_rule sinc_row = CR_SCALAR_ROW_REAL_EX(
    sinc, TESTREG(sinc),
    .notes = "sinc(0) = 1, derivative 0 there; near the zeros of cosc (±1.43, ±2.46, ...) the "
             "derivative has absolute, not relative, accuracy");
DEFINE_FN(sinc, "sinc", 1)

/* sind(x) = sin(x°), exactly reduced: (pi/180) cosd(x) */
static const double deg_lo[] = {-400}, deg_hi[] = {400};
static const double sind_pts[] = {180, 90, 3.6e10 + 30, 1e-300, -45, 1e22};
CR_SCALAR_EVALS_REAL(sind, 1, 1, Y[0] = GENR(sind, x[0])(x[0]),
                     D[0] = GENR(deg2rad, x[0])(GENR(cosd, x[0])(x[0])))
static const cr_scalar_rule sind_row = CR_SCALAR_ROW_REAL_EX(
    sind, .test = {.lo = deg_lo, .hi = deg_hi, .npoints = NPTS(sind_pts, 1), .points = sind_pts},
    .notes = "exact zeros at multiples of 180");
DEFINE_FN(sind, "sind", 1)

/* cosd(x): -(pi/180) sind(x) */
static const double cosd_pts[] = {180, 90, 3.6e10 + 30, 1e-300, -45, 1e22};
CR_SCALAR_EVALS_REAL(cosd, 1, 1, Y[0] = GENR(cosd, x[0])(x[0]),
                     D[0] = -GENR(deg2rad, x[0])(GENR(sind, x[0])(x[0])))
static const cr_scalar_rule cosd_row = CR_SCALAR_ROW_REAL_EX(
    cosd, .test = {.lo = deg_lo, .hi = deg_hi, .npoints = NPTS(cosd_pts, 1), .points = cosd_pts},
    .notes = "exact zeros at odd multiples of 90");
DEFINE_FN(cosd, "cosd", 1)

/* tand(x): (pi/180)(1 + Ω²) */
static const double tand_lo[] = {-80}, tand_hi[] = {80};
static const double tand_pts[] = {180, 45, 1e-300, -135, 1e22, 89.99999};
CR_SCALAR_EVALS_REAL(tand, 1, 1, Y[0] = GENR(tand, x[0])(x[0]),
                     D[0] = GENR(deg2rad, x[0])(1 + Y[0] * Y[0]))
static const cr_scalar_rule tand_row = CR_SCALAR_ROW_REAL_EX(
    tand, TESTREG(tand), .notes = "tand(±90) = ±inf (exact reduction), derivative +inf");
DEFINE_FN(tand, "tand", 1)

/* secd(x) = 1/cosd(x): (pi/180) Ω tand(x) */
static const double secd_lo[] = {-80}, secd_hi[] = {80};
static const double secd_pts[] = {180, 45, 1e-300, 1e22, 89.99999};
CR_SCALAR_EVALS_REAL(secd, 1, 1, Y[0] = 1 / GENR(cosd, x[0])(x[0]),
                     D[0] = GENR(deg2rad, x[0])(Y[0] * GENR(tand, x[0])(x[0])))
static const cr_scalar_rule secd_row = CR_SCALAR_ROW_REAL_EX(secd, TESTREG(secd));
DEFINE_FN(secd, "secd", 1)

/* cscd(x) = 1/sind(x): -(pi/180) Ω cotd(x) */
static const double cscd_lo[] = {10}, cscd_hi[] = {170};
static const double cscd_pts[] = {90, 45, -135, 1e22, 0.00001};
CR_SCALAR_EVALS_REAL(cscd, 1, 1, Y[0] = 1 / GENR(sind, x[0])(x[0]),
                     D[0] = -GENR(deg2rad, x[0])(Y[0] * GENR(cotd, x[0])(x[0])))
static const cr_scalar_rule cscd_row = CR_SCALAR_ROW_REAL_EX(cscd, TESTREG(cscd));
DEFINE_FN(cscd, "cscd", 1)

/* cotd(x) = cosd(x)/sind(x): -(pi/180)(1 + Ω²) */
static const double cotd_lo[] = {10}, cotd_hi[] = {170};
static const double cotd_pts[] = {90, 45, -135, 1e22, 0.00001};
CR_SCALAR_EVALS_REAL(cotd, 1, 1, Y[0] = GENR(cotd, x[0])(x[0]),
                     D[0] = -GENR(deg2rad, x[0])(1 + Y[0] * Y[0]))
static const cr_scalar_rule cotd_row = CR_SCALAR_ROW_REAL_EX(cotd, TESTREG(cotd));
DEFINE_FN(cotd, "cotd", 1)

/* asind(x) = asin(x) 180/pi: (180/pi)/sqrt((1 - x)(1 + x)) */
static const double unit_lo[] = {-0.99}, unit_hi[] = {0.99};
static const double asind_pts[] = {0.9999999999, -0x1.fffffffffffffp-1, 1e-300, 0.5};
CR_SCALAR_EVALS_REAL(asind, 1, 1, Y[0] = GENR(rad2deg, x[0])(asin(x[0])),
                     D[0] = GENR(rad2deg, x[0])(1 / sqrt((1 - x[0]) * (1 + x[0]))))
static const cr_scalar_rule asind_row = CR_SCALAR_ROW_REAL_EX(
    asind,
    .test = {.lo = unit_lo, .hi = unit_hi, .npoints = NPTS(asind_pts, 1), .points = asind_pts},
    .notes = "-1 < x < 1");
DEFINE_FN(asind, "asind", 1)

/* acosd(x): -(180/pi)/sqrt((1 - x)(1 + x)) */
static const double acosd_pts[] = {0.9999999999, -0x1.fffffffffffffp-1, 1e-300, 0.5};
CR_SCALAR_EVALS_REAL(acosd, 1, 1, Y[0] = GENR(rad2deg, x[0])(acos(x[0])),
                     D[0] = -GENR(rad2deg, x[0])(1 / sqrt((1 - x[0]) * (1 + x[0]))))
static const cr_scalar_rule acosd_row = CR_SCALAR_ROW_REAL_EX(
    acosd,
    .test = {.lo = unit_lo, .hi = unit_hi, .npoints = NPTS(acosd_pts, 1), .points = acosd_pts},
    .notes = "-1 < x < 1");
DEFINE_FN(acosd, "acosd", 1)

/* atand(x): (180/pi)/(1 + x²) */
static const double atand_lo[] = {-3}, atand_hi[] = {3};
static const double atand_pts[] = {1e200, -1e300, 1e-200, 1e8};
CR_SCALAR_EVALS_REAL(atand, 1, 1, Y[0] = GENR(rad2deg, x[0])(atan(x[0])),
                     D[0] = GENR(rad2deg, x[0])(GENR(inv1px2, x[0])(x[0])))
static const cr_scalar_rule atand_row = CR_SCALAR_ROW_REAL_EX(atand, TESTREG(atand));
DEFINE_FN(atand, "atand", 1)

/* asecd(x): (180/pi)/(|x| sqrt(x² - 1)) */
static const double asecd_lo[] = {1.05}, asecd_hi[] = {4};
static const double asecd_pts[] = {1 + 0x1p-40, -1.0000000001, 1e300};
CR_SCALAR_EVALS_REAL(asecd, 1, 1, Y[0] = GENR(rad2deg, x[0])(GENR(asec, x[0])(x[0])),
                     D[0] = GENR(rad2deg, x[0])(GENR(dasec, x[0])(x[0])))
static const cr_scalar_rule asecd_row =
    CR_SCALAR_ROW_REAL_EX(asecd, TESTREG(asecd), .notes = "|x| > 1");
DEFINE_FN(asecd, "asecd", 1)

/* acscd(x): -(180/pi)/(|x| sqrt(x² - 1)) */
static const double acscd_lo[] = {1.05}, acscd_hi[] = {4};
static const double acscd_pts[] = {1 + 0x1p-40, -1.0000000001, 1e300};
CR_SCALAR_EVALS_REAL(acscd, 1, 1, Y[0] = GENR(rad2deg, x[0])(GENR(acsc, x[0])(x[0])),
                     D[0] = -GENR(rad2deg, x[0])(GENR(dasec, x[0])(x[0])))
static const cr_scalar_rule acscd_row =
    CR_SCALAR_ROW_REAL_EX(acscd, TESTREG(acscd), .notes = "|x| > 1");
DEFINE_FN(acscd, "acscd", 1)

/* acotd(x): -(180/pi)/(1 + x²) */
static const double acotd_lo[] = {0.2}, acotd_hi[] = {3};
static const double acotd_pts[] = {1e200, -1e300, 1e-200};
CR_SCALAR_EVALS_REAL(acotd, 1, 1, Y[0] = GENR(rad2deg, x[0])(atan(1 / x[0])),
                     D[0] = -GENR(rad2deg, x[0])(GENR(inv1px2, x[0])(x[0])))
static const cr_scalar_rule acotd_row =
    CR_SCALAR_ROW_REAL_EX(acotd, TESTREG(acotd), .notes = "acotd(±0) = ±90 (jump at 0)");
DEFINE_FN(acotd, "acotd", 1)

/* deg2rad(x) = x pi/180: pi/180 */
static const double d2r_lo[] = {-400}, d2r_hi[] = {400};
static const double deg2rad_pts[] = {1e300, 1e-300};
CR_SCALAR_EVALS(deg2rad, 1, 1, Y[0] = GEN(deg2rad, x[0])(x[0]), D[0] = D2R_HI)
static const cr_scalar_rule deg2rad_row = CR_SCALAR_ROW_EX(
    deg2rad,
    .test = {.lo = d2r_lo, .hi = d2r_hi, .npoints = NPTS(deg2rad_pts, 1), .points = deg2rad_pts});
DEFINE_FN(deg2rad, "deg2rad", 1)

/* rad2deg(x) = x 180/pi: 180/pi */
static const double rad2deg_lo[] = {-7}, rad2deg_hi[] = {7};
static const double rad2deg_pts[] = {1e300, 1e-300};
CR_SCALAR_EVALS(rad2deg, 1, 1, Y[0] = GEN(rad2deg, x[0])(x[0]), D[0] = R2D_HI)
static const cr_scalar_rule rad2deg_row = CR_SCALAR_ROW_EX(rad2deg, TESTREG(rad2deg));
DEFINE_FN(rad2deg, "rad2deg", 1)

/* ---- Exponentials and logarithms ---- */

/* exp(x): Ω */
static const double exp_lo[] = {-3}, exp_hi[] = {3};
static const double exp_pts[] = {-745, -708.5, 1e-300, 0.5, 709.7};
CR_SCALAR_EVALS(exp, 1, 1, Y[0] = exp(x[0]), D[0] = Y[0])
static const cr_scalar_rule exp_row = CR_SCALAR_ROW_EX(exp, TESTREG(exp));
DEFINE_FN(exp, "exp", 1)

/* log(x): 1/x */
static const double pos_lo[] = {0.05}, pos_hi[] = {4.0};
static const double log_pts[] = {1e-310, 1 + 0x1p-52, 1e300, 0.999999, 0x1p-1074};
CR_SCALAR_EVALS(log, 1, 1, Y[0] = log(x[0]), D[0] = 1 / x[0])
static const cr_scalar_rule log_row = CR_SCALAR_ROW_EX(
    log, .test = {.lo = pos_lo, .hi = pos_hi, .npoints = NPTS(log_pts, 1), .points = log_pts},
    .notes = "x > 0 for real x");
DEFINE_FN(log, "log", 1)

/* sqrt(x): 1/(2Ω). Adding 0 turns Ω = -0 (sqrt(-0)) into +0, so the derivative is +inf at
 * both signed zeros. */
static const double sqrt_pts[] = {1e-310, 1e300, 0x1p-1074, 2.0, 1.7e308};
CR_SCALAR_EVALS(sqrt, 1, 1, Y[0] = sqrt(x[0]), D[0] = 1 / (2 * Y[0] + 0))
static const cr_scalar_rule sqrt_row = CR_SCALAR_ROW_EX(
    sqrt, .test = {.lo = pos_lo, .hi = pos_hi, .npoints = NPTS(sqrt_pts, 1), .points = sqrt_pts},
    .notes = "x >= 0 for real x; the derivative at ±0 is +inf");
DEFINE_FN(sqrt, "sqrt", 1)

/* exp2(x): log(2) Ω */
static const double exp2_lo[] = {-3}, exp2_hi[] = {3};
static const double exp2_pts[] = {-1074, -1022.5, 1e-300, 0.5, 1023.9};
CR_SCALAR_EVALS(exp2, 1, 1, Y[0] = GEN(exp2, x[0])(x[0]), D[0] = LN2 * Y[0])
static const cr_scalar_rule exp2_row = CR_SCALAR_ROW_EX(exp2, TESTREG(exp2));
DEFINE_FN(exp2, "exp2", 1)

/* exp10(x) = 10^x (pow(10, x), not in C99): log(10) Ω */
static const double exp10_lo[] = {-3}, exp10_hi[] = {3};
static const double exp10_pts[] = {-307.5, 22, -323, 1e-300, 307.5};
CR_SCALAR_EVALS(exp10, 1, 1, Y[0] = GEN(exp10, x[0])(x[0]), D[0] = LN10 * Y[0])
static const cr_scalar_rule exp10_row = CR_SCALAR_ROW_EX(exp10, TESTREG(exp10));
DEFINE_FN(exp10, "exp10", 1)

/* expm1(x): exp(x); Ω + 1 would round to 0 for x < -37 */
static const double expm1_lo[] = {-3}, expm1_hi[] = {3};
static const double expm1_pts[] = {-40, -700, 1e-300, -1e-10, 709};
CR_SCALAR_EVALS(expm1, 1, 1, Y[0] = GEN(expm1, x[0])(x[0]), D[0] = exp(x[0]))
static const cr_scalar_rule expm1_row = CR_SCALAR_ROW_EX(expm1, TESTREG(expm1));
DEFINE_FN(expm1, "expm1", 1)

/* log2(x): 1/(x log 2) */
static const double log2_pts[] = {1e-310, 1e300, 1 + 0x1p-52, 0.75};
CR_SCALAR_EVALS(log2, 1, 1, Y[0] = GEN(log2, x[0])(x[0]), D[0] = (1 / LN2) / x[0])
static const cr_scalar_rule log2_row = CR_SCALAR_ROW_EX(
    log2, .test = {.lo = pos_lo, .hi = pos_hi, .npoints = NPTS(log2_pts, 1), .points = log2_pts},
    .notes = "x > 0 for real x");
DEFINE_FN(log2, "log2", 1)

/* log10(x): 1/(x log 10) */
static const double log10_pts[] = {1e-310, 1e300, 1 + 0x1p-52, 0.75};
CR_SCALAR_EVALS(log10, 1, 1, Y[0] = GEN(log10, x[0])(x[0]), D[0] = (1 / LN10) / x[0])
static const cr_scalar_rule log10_row = CR_SCALAR_ROW_EX(
    log10, .test = {.lo = pos_lo, .hi = pos_hi, .npoints = NPTS(log10_pts, 1), .points = log10_pts},
    .notes = "x > 0 for real x");
DEFINE_FN(log10, "log10", 1)

/* log1p(x): 1/(1 + x); 1 + x is exact near -1 */
static const double log1p_lo[] = {-0.9}, log1p_hi[] = {3};
static const double log1p_pts[] = {-0.999999999, -0x1.fffffffffffffp-1, 1e-300, 1e300};
CR_SCALAR_EVALS(log1p, 1, 1, Y[0] = GEN(log1p, x[0])(x[0]), D[0] = 1 / (1 + x[0]))
static const cr_scalar_rule log1p_row =
    CR_SCALAR_ROW_EX(log1p, TESTREG(log1p), .notes = "x > -1 for real x");
DEFINE_FN(log1p, "log1p", 1)

/* pow(x, y) = x^y: (y x^(y-1), x^y log x), see pow_dx_d and pow_dy_d */
static const double pow_lo[] = {0.1, -3}, pow_hi[] = {4, 3};
static const double pow_pts[] = {1e-300,      1.5,  2,      1023.5, 10,    -300,   0.5,   1e-10,
                                 1 + 0x1p-40, 1e12, 1e-310, 0.3,    0.999, -700.5, 1e300, 1.02};
CR_SCALAR_EVALS(pow, 2, 1, Y[0] = pow(x[0], x[1]), D[0] = GEN(pow_dx, x[0])(x[0], x[1], Y[0]);
                D[1] = GEN(pow_dy, x[0])(x[0], x[1], Y[0]))
static const cr_scalar_rule pow_row = CR_SCALAR_ROW_EX(
    pow, TESTREG(pow),
    .notes = "x > 0 (any real y), or x < 0 with integer y: then ∂/∂y = Ω log|x|, the real "
             "part of the complex derivative (ChainRules); an int y gets NoTangent. "
             "At x = 0 (ChainRules): ∂/∂x = 1 if y == 1, 0 if y == 0 or y > 1, +inf if "
             "0 < y < 1, ±inf if y < 0; ∂/∂y = 0 if y > 0, else NaN");
DEFINE_FN(pow, "pow", 2)

/* cbrt(x): 1/(3Ω²); +inf at x = ±0 */
static const double cbrt_lo[] = {-3}, cbrt_hi[] = {3};
static const double cbrt_pts[] = {-1e300, 27, -1.7e308, 1e-300, 0x1p-1074};
CR_SCALAR_EVALS_REAL(cbrt, 1, 1, Y[0] = cbrt(x[0]), D[0] = 1 / (3 * Y[0] * Y[0]))
static const cr_scalar_rule cbrt_row =
    CR_SCALAR_ROW_REAL_EX(cbrt, TESTREG(cbrt), .notes = "derivative +inf at x = ±0");
DEFINE_FN(cbrt, "cbrt", 1)

/* erf(x): (2/sqrt(pi)) exp(-x²), with x² split exactly (see derf_d) */
static const double erf_lo[] = {-3}, erf_hi[] = {3};
static const double erf_pts[] = {5, 26, -26.5, 1e-300, 0.5};
CR_SCALAR_EVALS_REAL(erf, 1, 1, Y[0] = erf(x[0]), D[0] = GENR(derf, x[0])(x[0]))
static const cr_scalar_rule erf_row = CR_SCALAR_ROW_REAL_EX(erf, TESTREG(erf));
DEFINE_FN(erf, "erf", 1)

/* erfc(x): -(2/sqrt(pi)) exp(-x²) */
static const double erfc_lo[] = {-3}, erfc_hi[] = {3};
static const double erfc_pts[] = {5, 26, -26.5, 1e-300, 27.2};
CR_SCALAR_EVALS_REAL(erfc, 1, 1, Y[0] = erfc(x[0]), D[0] = -GENR(derf, x[0])(x[0]))
static const cr_scalar_rule erfc_row = CR_SCALAR_ROW_REAL_EX(erfc, TESTREG(erfc));
DEFINE_FN(erfc, "erfc", 1)

/* tgamma(x): Ω digamma(x); the sign of Ω carries over at negative non-integers */
static const double tgamma_lo[] = {0.2}, tgamma_hi[] = {4};
static const double tgamma_pts[] = {-0.5, -1.5, -2.5,   -3.7,  0x1.762d86356be3fp+0,
                                    0.7,  2.2,  -170.3, 171.5, 1e-5};
CR_SCALAR_EVALS_REAL(tgamma, 1, 1, Y[0] = GENR(tgamma, x[0])(x[0]),
                     D[0] = Y[0] * GENR(digamma, x[0])(x[0]))
static const cr_scalar_rule tgamma_row = CR_SCALAR_ROW_REAL_EX(
    tgamma, TESTREG(tgamma), .notes = "poles at 0, -1, -2, ... (NaN derivative there)");
DEFINE_FN(tgamma, "tgamma", 1)

/* lgamma(x) = log|Γ(x)|: digamma(x), also at negative non-integers */
static const double lgamma_lo[] = {0.2}, lgamma_hi[] = {4};
static const double lgamma_pts[] = {-0.5,  -1.5, -2.5, -3.7,  0x1.762d86356be3fp+0, 1e5, 2.0, 1.0,
                                    1e300, 9.99, 10.0, 1e-300};
CR_SCALAR_EVALS_REAL(lgamma, 1, 1, Y[0] = GENR(lgamma, x[0])(x[0]),
                     D[0] = GENR(digamma, x[0])(x[0]))
static const cr_scalar_rule lgamma_row = CR_SCALAR_ROW_REAL_EX(
    lgamma, TESTREG(lgamma), .notes = "log|Γ(x)|; poles at 0, -1, -2, ... (NaN derivative there)");
DEFINE_FN(lgamma, "lgamma", 1)

/* hypot(x, y): (x, y)/Ω, and 0 at (0, 0) (ChainRules); see hypot_dx_d */
static const double hypot_lo[] = {-3, -3}, hypot_hi[] = {3, 3};
static const double hypot_pts[] = {3,     -4,     1e300,  1,     1.7e308, -1.5e308, 1e200,
                                   1e200, 1e-200, 3e-200, 1e308, 1e308,   5e-324,   1e-310};
CR_SCALAR_EVALS_REAL(hypot, 2, 1, Y[0] = hypot(x[0], x[1]),
                     D[0] = GENR(hypot_dx, x[0])(x[0], x[1], Y[0]);
                     D[1] = GENR(hypot_dx, x[0])(x[1], x[0], Y[0]))
static const cr_scalar_rule hypot_row =
    CR_SCALAR_ROW_REAL_EX(hypot, TESTREG(hypot),
                          .notes = "(0, 0) at x = y = 0 (ChainRules); also hypot(x...) of 3+ "
                                   "arguments (hand-written rule)");

/* ---- Arithmetic of <math.h> ---- */

/* fma of each instantiation: C's fma and fmaf; for complex numbers xy + z with each part
 * formed by nested fmas (re = xr yr - xi yi + zr, im = xr yi + xi yr + zi), so that a real
 * product part and z are added before rounding (Julia's fma of complex numbers is xy + z). */
static double fma_d(double x, double y, double z)
{
    return fma(x, y, z);
}

static float fma_f(float x, float y, float z)
{
    return fmaf(x, y, z);
}

static cr_complex fma_c(cr_complex x, cr_complex y, cr_complex z)
{
    double xr = creal(x), xi = cimag(x), yr = creal(y), yi = cimag(y);
    return cplx(fma(xr, yr, fma(-xi, yi, creal(z))), fma(xr, yi, fma(xi, yr, cimag(z))));
}

#define FMA_G(X, Y, Z) _Generic((X), float : fma_f, double : fma_d, default : fma_c)(X, Y, Z)

/* fma(x, y, z) = xy + z, one rounding for real arguments: (y, x, 1); holomorphic, so the
 * row has a complex instantiation. */
static const double fma_lo[] = {-3, -3, -3}, fma_hi[] = {3, 3, 3};
static const double fma_pts[] = {1e-300, 1e-300, 1e-310, 1e200, 1e100, -1e300};
CR_SCALAR_EVALS(fma, 3, 1, Y[0] = FMA_G(x[0], x[1], x[2]), D[0] = x[1]; D[1] = x[0]; D[2] = 1)
static const cr_scalar_rule fma_row = CR_SCALAR_ROW_EX(fma, TESTREG(fma));
DEFINE_FN(fma, "fma", 3)

/* fmod(x, y) = x - trunc(x/y) y: (1, -trunc(x/y)); jumps where x/y is a nonzero integer */
static const double fmod_lo[] = {3.1, 1.2}, fmod_hi[] = {3.4, 1.4};
static const double fmod_pts[] = {5.3, 1.7, -7.1, 2, 1e-300, 1, 1e17, 3, 12345.678, 0.001};
CR_SCALAR_EVALS_REAL(fmod, 2, 1, Y[0] = fmod(x[0], x[1]),
                     D[0] = REM_PARTIAL(REM_FMOD, 0, x[0], x[1], Y[0]);
                     D[1] = REM_PARTIAL(REM_FMOD, 1, x[0], x[1], Y[0]))
static const cr_scalar_rule fmod_row = CR_SCALAR_ROW_REAL_EX(
    fmod, TESTREG(fmod),
    .notes = "jumps where x/y is a nonzero integer: NaN partials there (ChainRules' rem); at "
             "x = 0, where fmod is smooth, (1, 0)");
DEFINE_FN(fmod, "fmod", 2)

/* rem(x, y): Julia's name for fmod; the same row under another name. */
static const cr_scalar_rule rem_row = {
    .name = "rem",
    .nin = 2,
    .nout = 1,
    .f64 = fmod_f64,
    .f32 = fmod_f32,
    .c128 = NULL,
    .primal_src = fmod_primal_src,
    .partials_src = fmod_partials_src,
    .pullback_name = "rem_pullback",
    .notes = "Julia's rem: the fmod row (same partials and conventions)",
    TESTREG(fmod)};
DEFINE_FN(rem, "rem", 2)

/* remainder(x, y) = x - n y, n = x/y rounded to nearest even: (1, -n); jumps where x/y is
 * a half-integer */
static const double remainder_lo[] = {3.1, 1.45}, remainder_hi[] = {3.4, 1.6};
static const double remainder_pts[] = {5.3, 1.7, -7.1, 2, 1e-300, 1, 2, 3, 1e17, 3};
CR_SCALAR_EVALS_REAL(remainder, 2, 1, Y[0] = remainder(x[0], x[1]),
                     D[0] = REM_PARTIAL(REM_REMAINDER, 0, x[0], x[1], Y[0]);
                     D[1] = REM_PARTIAL(REM_REMAINDER, 1, x[0], x[1], Y[0]))
static const cr_scalar_rule remainder_row = CR_SCALAR_ROW_REAL_EX(
    remainder, TESTREG(remainder),
    .notes = "jumps where x/y is a half-integer (|Ω| = |y|/2): NaN partials there");
DEFINE_FN(remainder, "remainder", 2)

/* mod(x, y) = x - floor(x/y) y (Julia): (1, -floor(x/y)); jumps where x/y is an integer */
static const double mod_lo[] = {-3.4, 1.2}, mod_hi[] = {-3.1, 1.4};
static const double mod_pts[] = {5.3, -1.7, -7.1, 2, 1e17, 3, 1e-300, 1};
CR_SCALAR_EVALS_REAL(mod, 2, 1, Y[0] = GENR(mod, x[0])(x[0], x[1]),
                     D[0] = REM_PARTIAL(REM_MOD, 0, x[0], x[1], Y[0]);
                     D[1] = REM_PARTIAL(REM_MOD, 1, x[0], x[1], Y[0]))
static const cr_scalar_rule mod_row = CR_SCALAR_ROW_REAL_EX(
    mod, TESTREG(mod),
    .notes = "the remainder with the sign of y; jumps where x/y is an integer, x = 0 "
             "included: NaN partials there (ChainRules)");
DEFINE_FN(mod, "mod", 2)

/* fdim(x, y) = max(x - y, 0): (1, -1) if x > y, else (0, 0) (also at the tie x == y) */
static const double fdim_lo[] = {0.5, -2}, fdim_hi[] = {2, 0};
static const double fdim_pts[] = {-1, 2, 1e300, -1e300, 1e-300, -1e-300};
CR_SCALAR_EVALS_REAL(fdim, 2, 1, Y[0] = fdim(x[0], x[1]),
                     D[0] = isnan(Y[0])   ? Y[0]
                            : x[0] > x[1] ? 1
                                          : 0;
                     D[1] = -D[0])
static const cr_scalar_rule fdim_row = CR_SCALAR_ROW_REAL_EX(
    fdim, TESTREG(fdim),
    .notes = "tie x == y: (0, 0) (the zero branch, as ChainRules' max(x - y, 0)); NaN "
             "arguments: NaN partials");
DEFINE_FN(fdim, "fdim", 2)

/* fmax(x, y): (1, 0) when x is returned, (0, 1) when y is; a NaN argument is ignored. */
static const double fmax_lo[] = {0.5, -2}, fmax_hi[] = {2, 0};
static const double fmax_pts[] = {1, 2, 3, -1, -1e300, 1e300};
CR_SCALAR_EVALS_REAL(fmax, 2, 1, Y[0] = fmax(x[0], x[1]), D[0] = isnan(x[1]) || x[0] > x[1] ? 1 : 0;
                     D[1] = 1 - D[0])
static const cr_scalar_rule fmax_row = CR_SCALAR_ROW_REAL_EX(
    fmax, TESTREG(fmax),
    .notes = "tie x == y: (0, 1), as ChainRules' max; a NaN argument is ignored, as fmax "
             "ignores it: fmax(NaN, y) gives (0, 1), fmax(x, NaN) (1, 0)");
DEFINE_FN(fmax, "fmax", 2)

/* fmin(x, y): (1, 0) when x is returned, (0, 1) when y is. */
static const double fmin_lo[] = {-2, 0.5}, fmin_hi[] = {0, 2};
static const double fmin_pts[] = {1, 2, 3, -1, -1e300, 1e300};
CR_SCALAR_EVALS_REAL(fmin, 2, 1, Y[0] = fmin(x[0], x[1]),
                     D[0] = isnan(x[1]) || (!isnan(x[0]) && !(x[0] > x[1])) ? 1 : 0;
                     D[1] = 1 - D[0])
static const cr_scalar_rule fmin_row = CR_SCALAR_ROW_REAL_EX(
    fmin, TESTREG(fmin),
    .notes = "tie x == y: (1, 0), as ChainRules' min; a NaN argument is ignored: "
             "fmin(NaN, y) gives (0, 1), fmin(x, NaN) (1, 0)");
DEFINE_FN(fmin, "fmin", 2)

/* copysign(x, y) = |x| sign(y): (±1, 0), -1 when the sign bits differ (ChainRules) */
static const double copysign_lo[] = {0.5, -3}, copysign_hi[] = {3, -0.5};
static const double copysign_pts[] = {2, 3, -2, -1, 1e300, -1e-300};
CR_SCALAR_EVALS_REAL(copysign, 2, 1, Y[0] = copysign(x[0], x[1]),
                     D[0] = !signbit(x[0]) != !signbit(x[1]) ? -1 : 1;
                     D[1] = 0)
static const cr_scalar_rule copysign_row = CR_SCALAR_ROW_REAL_EX(
    copysign, TESTREG(copysign),
    .notes = "∂/∂x = -1 when the sign bits of x and y differ, else 1 (so ±1 at x = ±0); "
             "∂/∂y = 0 (y's sign is not differentiable; ChainRules' NoTangent)");
DEFINE_FN(copysign, "copysign", 2)

/* fabs(x): sign(x), 0 at x = 0 (ChainRules' abs) */
static const double fabs_lo[] = {0.2}, fabs_hi[] = {3};
static const double fabs_pts[] = {-1.5, 1e300, -1e-300, 0x1p-1074};
CR_SCALAR_EVALS_REAL(fabs, 1, 1, Y[0] = fabs(x[0]),
                     D[0] = x[0] > 0    ? 1
                            : x[0] < 0  ? -1
                            : x[0] == 0 ? 0
                                        : x[0])
static const cr_scalar_rule fabs_row = CR_SCALAR_ROW_REAL_EX(
    fabs, TESTREG(fabs), .notes = "derivative sign(x): 0 at x = ±0 (ChainRules' abs)");
DEFINE_FN(fabs, "fabs", 1)

/* ldexp(x, n) = x 2^n: (2^n, 0); n is an integer (NoTangent when passed as one) */
static const double ldexp_lo[] = {-3, -4.5}, ldexp_hi[] = {3, 4.5};
static const double ldexp_pts[] = {1e-300, 1100.5, 1e300, -1100.5, 3, 1};
CR_SCALAR_EVALS_REAL(ldexp, 2, 1, Y[0] = ldexp(x[0], to_int(x[1])),
                     D[0] = ldexp((T)1, to_int(x[1]));
                     D[1] = 0)
static const cr_scalar_rule ldexp_row = CR_SCALAR_ROW_REAL_EX(
    ldexp, TESTREG(ldexp),
    .notes = "n is an integer: NoTangent for an int n, 0 for a real one (truncated to int)");
DEFINE_FN(ldexp, "ldexp", 2)

/* scalbn(x, n) = x 2^n (FLT_RADIX is 2): (2^n, 0) */
static const double scalbn_lo[] = {-3, -4.5}, scalbn_hi[] = {3, 4.5};
static const double scalbn_pts[] = {1e-300, 1100.5, 1e300, -1100.5, 3, 1};
CR_SCALAR_EVALS_REAL(scalbn, 2, 1, Y[0] = scalbn(x[0], to_int(x[1])),
                     D[0] = scalbn((T)1, to_int(x[1]));
                     D[1] = 0)
static const cr_scalar_rule scalbn_row =
    CR_SCALAR_ROW_REAL_EX(scalbn, TESTREG(scalbn), .notes = "n is an integer (see ldexp)");
DEFINE_FN(scalbn, "scalbn", 2)

/* scalbln(x, n) = x 2^n with a long n: (2^n, 0) */
static const double scalbln_lo[] = {-3, -4.5}, scalbln_hi[] = {3, 4.5};
static const double scalbln_pts[] = {1e-300, 1100.5, 1e300, -1100.5, 3, 1};
CR_SCALAR_EVALS_REAL(scalbln, 2, 1, Y[0] = scalbln(x[0], to_long(x[1])),
                     D[0] = scalbln((T)1, to_long(x[1]));
                     D[1] = 0)
static const cr_scalar_rule scalbln_row =
    CR_SCALAR_ROW_REAL_EX(scalbln, TESTREG(scalbln), .notes = "n is an integer (see ldexp)");
DEFINE_FN(scalbln, "scalbln", 2)

/* modf(x) = (fractional part, integral part), both real: (1, 0) */
static const double modf_lo[] = {0.1}, modf_hi[] = {0.9};
static const double modf_pts[] = {2.5, -3.25, 1e-300, 1e15 + 0.5};
CR_SCALAR_EVALS_REAL(modf, 1, 2, T ip_; Y[0] = GENR(modf, x[0])(x[0], &ip_); Y[1] = ip_, D[0] = 1;
                     D[1] = 0)
static const cr_scalar_rule modf_row = CR_SCALAR_ROW_REAL_EX(
    modf, TESTREG(modf),
    .notes = "a tuple (frac, int): partials (1, 0) everywhere, at the jumps (integers) too");
DEFINE_FN(modf, "modf", 1)

/* ---- LogExpFunctions ---- */

/* logistic(x) = 1/(1 + e^-x): logistic(x) logistic(-x) (not Ω(1 - Ω), which rounds to 0) */
static const double ml_lo[] = {-3}, ml_hi[] = {3};
static const double logistic_pts[] = {40, -40, 700, -745, 1e-300, 0.5};
CR_SCALAR_EVALS_REAL(logistic, 1, 1, Y[0] = GENR(logistic, x[0])(x[0]),
                     D[0] = GENR(dlogistic, x[0])(x[0]))
static const cr_scalar_rule logistic_row = CR_SCALAR_ROW_REAL_EX(
    logistic,
    .test = {.lo = ml_lo, .hi = ml_hi, .npoints = NPTS(logistic_pts, 1), .points = logistic_pts});
DEFINE_FN(logistic, "logistic", 1)

/* sigmoid: another name of logistic */
static const cr_scalar_rule sigmoid_row = {
    .name = "sigmoid",
    .nin = 1,
    .nout = 1,
    .f64 = logistic_f64,
    .f32 = logistic_f32,
    .primal_src = logistic_primal_src,
    .partials_src = logistic_partials_src,
    .pullback_name = "sigmoid_pullback",
    .notes = "another name of logistic",
    .test = {.lo = ml_lo, .hi = ml_hi, .npoints = NPTS(logistic_pts, 1), .points = logistic_pts}};
DEFINE_FN(sigmoid, "sigmoid", 1)

/* log1pexp(x) = log(1 + e^x): logistic(x) */
static const double log1pexp_pts[] = {40, -40, 800, -745, 1e-300, 18.5};
CR_SCALAR_EVALS_REAL(log1pexp, 1, 1, Y[0] = GENR(log1pexp, x[0])(x[0]),
                     D[0] = GENR(logistic, x[0])(x[0]))
static const cr_scalar_rule log1pexp_row = CR_SCALAR_ROW_REAL_EX(
    log1pexp,
    .test = {.lo = ml_lo, .hi = ml_hi, .npoints = NPTS(log1pexp_pts, 1), .points = log1pexp_pts});
DEFINE_FN(log1pexp, "log1pexp", 1)

/* softplus: another name of log1pexp */
static const cr_scalar_rule softplus_row = {
    .name = "softplus",
    .nin = 1,
    .nout = 1,
    .f64 = log1pexp_f64,
    .f32 = log1pexp_f32,
    .primal_src = log1pexp_primal_src,
    .partials_src = log1pexp_partials_src,
    .pullback_name = "softplus_pullback",
    .notes = "another name of log1pexp",
    .test = {.lo = ml_lo, .hi = ml_hi, .npoints = NPTS(log1pexp_pts, 1), .points = log1pexp_pts}};
DEFINE_FN(softplus, "softplus", 1)

/* logaddexp(x, y) = log(e^x + e^y): (logistic(x - y), logistic(y - x)) */
static const double logaddexp_lo[] = {-3, -3}, logaddexp_hi[] = {3, 3};
static const double logaddexp_pts[] = {-1000, 0, 0.1,   700.3, -700, -745,
                                       3,     3, -30.7, 5.2,   1e10, 1e10 + 1};
CR_SCALAR_EVALS_REAL(logaddexp, 2, 1, Y[0] = GENR(logaddexp, x[0])(x[0], x[1]),
                     D[0] = GENR(dlogaddexp, x[0])(x[0], x[1]);
                     D[1] = GENR(dlogaddexp, x[0])(x[1], x[0]))
static const cr_scalar_rule logaddexp_row = CR_SCALAR_ROW_REAL_EX(
    logaddexp, TESTREG(logaddexp), .notes = "(1/2, 1/2) at x == y, also for equal infinities");
DEFINE_FN(logaddexp, "logaddexp", 2)

/* xlogy(x, y) = x log(y), 0 when x == 0: (log y, x/y), with ∂/∂y = 0 at x == 0 */
static const double xlogy_lo[] = {-3, 0.1}, xlogy_hi[] = {3, 4};
static const double xlogy_pts[] = {2, 1e-300, 1e-300, 1e300, -3, 1 + 0x1p-52};
CR_SCALAR_EVALS_REAL(xlogy, 2, 1, Y[0] = x[0] == 0 && !isnan(x[1]) ? 0 : x[0] * log(x[1]),
                     D[0] = log(x[1]);
                     D[1] = x[0] == 0 ? 0 : x[0] / x[1])
static const cr_scalar_rule xlogy_row = CR_SCALAR_ROW_REAL_EX(
    xlogy, TESTREG(xlogy),
    .notes = "y > 0; at x == 0: Ω = 0 and ∂/∂y = 0 (a strong zero: xlogy(0, y) is 0 for "
             "every y), ∂/∂x = log y (-inf at y = 0)");
DEFINE_FN(xlogy, "xlogy", 2)

/* xlog1py(x, y) = x log1p(y), 0 when x == 0: (log1p y, x/(1 + y)) */
static const double xlog1py_lo[] = {-3, -0.9}, xlog1py_hi[] = {3, 3};
static const double xlog1py_pts[] = {2, 1e-300, 1e-300, 1e300, -3, -0.999999999};
CR_SCALAR_EVALS_REAL(xlog1py, 2, 1,
                     Y[0] = x[0] == 0 && !isnan(x[1]) ? 0 : x[0] * GENR(log1p, x[1])(x[1]),
                     D[0] = GENR(log1p, x[1])(x[1]);
                     D[1] = x[0] == 0 ? 0 : x[0] / (1 + x[1]))
static const cr_scalar_rule xlog1py_row = CR_SCALAR_ROW_REAL_EX(
    xlog1py, TESTREG(xlog1py), .notes = "y > -1; at x == 0: Ω = 0 and ∂/∂y = 0 (as xlogy)");
DEFINE_FN(xlog1py, "xlog1py", 2)

/* relu(x) = max(x, 0): 1 if x > 0, else 0 (also at 0) */
static const double relu_lo[] = {0.1}, relu_hi[] = {3};
static const double relu_pts[] = {-1, 1e300, -1e-300, 0x1p-1074};
CR_SCALAR_EVALS_REAL(relu, 1, 1,
                     Y[0] = x[0] > 0       ? x[0]
                            : x[0] == x[0] ? 0
                                           : x[0],
                     D[0] = x[0] > 0 ? 1 : 0)
static const cr_scalar_rule relu_row = CR_SCALAR_ROW_REAL_EX(
    relu, TESTREG(relu), .notes = "derivative 0 at the kink x = 0; relu(NaN) = NaN");
DEFINE_FN(relu, "relu", 1)

/* ========================================================================================
 * Hand-written rules
 * ======================================================================================== */

/* The element type of a computation over real arguments: f32 when every floating argument
 * is f32 (integers join it), f64 otherwise. False for a non-real argument. */
static bool real_args(const cr_value *args, size_t nargs, bool *f32)
{
    bool any32 = false, any64 = false;
    for (size_t i = 0; i < nargs; i++) {
        switch (args[i].kind) {
        case CR_KIND_F32:
            any32 = true;
            break;
        case CR_KIND_F64:
            any64 = true;
            break;
        case CR_KIND_I64:
        case CR_KIND_I32:
        case CR_KIND_BOOL:
            break;
        default:
            return false;
        }
    }
    *f32 = any32 && !any64;
    return true;
}

static double real_of(const cr_value *v)
{
    switch (v->kind) {
    case CR_KIND_F64:
        return v->u.f64;
    case CR_KIND_F32:
        return (double)v->u.f32;
    case CR_KIND_I64:
    case CR_KIND_I32:
        return (double)v->u.i64;
    case CR_KIND_BOOL:
        return v->u.b ? 1.0 : 0.0;
    default:
        return DNAN;
    }
}

static bool is_integer_kind(cr_kind k)
{
    return k == CR_KIND_I64 || k == CR_KIND_I32 || k == CR_KIND_BOOL;
}

/* A real primal's tangent as a double: the real part of the scalar the tangent carries
 * (ZeroTangent/NoTangent as 0), or an error. */
static cr_status real_tangent(cr_arena *arena, const char *who, cr_tangent t, double *v)
{
    cr_complex c;
    cr_status st = cr__tangent_scalar(arena, who, t, &c, NULL);
    *v = creal(c);
    return st;
}

/* The cotangent of a real argument of kind k with value v: NoTangent for integers. */
static cr_tangent real_cotangent(cr_kind k, double v)
{
    if (is_integer_kind(k))
        return cr_tangent_none();
    if (k == CR_KIND_F32)
        return cr_tangent_f32((float)v);
    return cr_tangent_f64(v);
}

static cr_tangent real_result_tangent(bool f32, double v)
{
    return f32 ? cr_tangent_f32((float)v) : cr_tangent_f64(v);
}

/* ---- frexp and remquo: a real and an int output ---- */

typedef struct frexp_f64 {
    double v;
    int e;
} frexp_f64;

typedef struct frexp_f32 {
    float v;
    int e;
} frexp_f32;

static const cr_field k_real_int_f64_fields[2] = {
    {NULL, offsetof(frexp_f64, v), CR_KIND_F64, NULL},
    {NULL, offsetof(frexp_f64, e), CR_KIND_I32, NULL},
};
static const cr_field k_real_int_f32_fields[2] = {
    {NULL, offsetof(frexp_f32, v), CR_KIND_F32, NULL},
    {NULL, offsetof(frexp_f32, e), CR_KIND_I32, NULL},
};
static const cr_type k_real_int_f64 = {"tuple(f64,int)", sizeof(frexp_f64), 2,
                                       k_real_int_f64_fields};
static const cr_type k_real_int_f32 = {"tuple(f32,int)", sizeof(frexp_f32), 2,
                                       k_real_int_f32_fields};

/* Allocate a (real, int) tuple value. */
static cr_status real_int_value(cr_arena *arena, bool f32, double v, int e, cr_value *out)
{
    if (f32) {
        frexp_f32 *p = cr_arena_alloc(arena, sizeof *p, _Alignof(frexp_f32));
        if (p == NULL)
            return CR__ALLOC_STATUS(arena);
        p->v = (float)v;
        p->e = e;
        *out = cr_value_struct(&k_real_int_f32, p);
    } else {
        frexp_f64 *p = cr_arena_alloc(arena, sizeof *p, _Alignof(frexp_f64));
        if (p == NULL)
            return CR__ALLOC_STATUS(arena);
        p->v = v;
        p->e = e;
        *out = cr_value_struct(&k_real_int_f64, p);
    }
    return CR_OK;
}

/* The tangent of a (real, int) tuple: (dv, NoTangent). */
static cr_status real_int_tangent(cr_arena *arena, bool f32, double dv, cr_tangent *out)
{
    cr_tangent f[2] = {real_result_tangent(f32, dv), cr_tangent_none()};
    return cr_tangent_struct(arena, f32 ? &k_real_int_f32 : &k_real_int_f64, NULL, f, 2, out);
}

/* The real field of a (real, int) tuple cotangent. */
static cr_status real_int_cotangent(cr_arena *arena, const char *who, const cr_tangent *dy,
                                    double *v)
{
    cr_tangent d;
    cr_status st = cr_tangent_unthunk(*dy, &d);
    if (st != CR_OK)
        return st;
    if (d.tag != CR_TAN_STRUCT && !cr_tangent_is_zero(d))
        return CR__FAIL(arena, CR_ETANGENT,
                        "%s: the output is a (real, int) tuple, its cotangent must be a "
                        "structural tangent (got %s)",
                        who, cr_tag_name((cr_tag)d.tag));
    return real_tangent(arena, who, cr_tangent_field(d, 0), v);
}

/* frexp(x) = (m, e), x = m 2^e, 1/2 <= |m| < 1. ∂m/∂x = 2^-e, the slope of the piece
 * containing x; at the jumps (powers of two) that is the slope to their right (for x > 0).
 * At x = 0, m = 0 and the slope is 1; NaN for non-finite x. */
static void frexp_eval(double x, bool f32, double *m, int *e, double *dm)
{
    if (f32) {
        *m = (double)frexpf((float)x, e);
    } else {
        *m = frexp(x, e);
    }
    *dm = isfinite(x) ? ldexp(1.0, -*e) : DNAN;
}

static cr_status frexp_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)f;
    bool f32 = false;
    if (nargs != 1 || !real_args(args, 1, &f32))
        return CR__FAIL(arena, CR_EINVAL, "frexp takes one real argument");
    double m, dm;
    int e;
    frexp_eval(real_of(&args[0]), f32, &m, &e, &dm);
    return real_int_value(arena, f32, m, e, out);
}

static const cr_function frexp_function = {.name = "frexp", .arity = 1, .primal = frexp_primal};
const cr_value cr_fn_frexp = {.kind = CR_KIND_FUNC, .u.func = {&frexp_function, NULL}};

static cr_status frexp_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                             const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                             cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = frexp_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    bool f32 = false;
    real_args(args, 1, &f32);
    double m, dm, dx;
    int e;
    frexp_eval(real_of(&args[0]), f32, &m, &e, &dm);
    st = real_tangent(arena, "frexp", dargs[1], &dx);
    if (st != CR_OK)
        return st;
    if (is_integer_kind(args[0].kind))
        dx = 0;
    return real_int_tangent(arena, f32, dm * dx, dy);
}

typedef struct frexp_env {
    double dm;
    cr_kind kind;
} frexp_env;

static cr_status frexp_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    const frexp_env *e = env;
    double g = 0.0;
    cr_status st = real_int_cotangent(arena, "frexp_pullback", dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = real_cotangent(e->kind, e->dm * g);
    return CR_OK;
}

static cr_status frexp_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = frexp_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    frexp_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(frexp_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    bool f32 = false;
    real_args(args, 1, &f32);
    double m;
    int ex;
    frexp_eval(real_of(&args[0]), f32, &m, &ex, &e->dm);
    e->kind = args[0].kind;
    *pb = (cr_pullback){frexp_pullback, e, "frexp_pullback", nargs + 1};
    return CR_OK;
}

static const double frexp_lo[] = {0.55}, frexp_hi[] = {0.95};
static const double frexp_pts[] = {3.0, -5.5, 1e300, 1e-310};
static const cr_rule_test frexp_test = {
    .npoints = NPTS(frexp_pts, 1), .points = frexp_pts, .lo = frexp_lo, .hi = frexp_hi};

/* remquo(x, y) = (r, quo): r = remainder(x, y) and the low bits of the quotient. The
 * partials of r are those of the remainder row (jumps at half-integer x/y: NaN). */
static void remquo_eval(double x, double y, bool f32, double *r, int *q, double D[2])
{
    if (f32) {
        float xf = (float)x, yf = (float)y, Y[1], Df[2], xs[2] = {xf, yf};
        *r = (double)remquof(xf, yf, q);
        remainder_row.f32(xs, Y, Df);
        D[0] = (double)Df[0];
        D[1] = (double)Df[1];
    } else {
        double xs[2] = {x, y}, Y[1];
        *r = remquo(x, y, q);
        cr_scalar_partials_f64(&remainder_row, xs, Y, D);
    }
}

static cr_status remquo_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)f;
    bool f32 = false;
    if (nargs != 2 || !real_args(args, 2, &f32))
        return CR__FAIL(arena, CR_EINVAL, "remquo takes two real arguments");
    double r, D[2];
    int q;
    remquo_eval(real_of(&args[0]), real_of(&args[1]), f32, &r, &q, D);
    return real_int_value(arena, f32, r, q, out);
}

static const cr_function remquo_function = {.name = "remquo", .arity = 2, .primal = remquo_primal};
const cr_value cr_fn_remquo = {.kind = CR_KIND_FUNC, .u.func = {&remquo_function, NULL}};

static cr_status remquo_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = remquo_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    bool f32 = false;
    real_args(args, 2, &f32);
    double r, D[2], acc = 0;
    int q;
    remquo_eval(real_of(&args[0]), real_of(&args[1]), f32, &r, &q, D);
    for (size_t j = 0; j < 2; j++) {
        double t;
        st = real_tangent(arena, "remquo", dargs[j + 1], &t);
        if (st != CR_OK)
            return st;
        if (!is_integer_kind(args[j].kind) && t != 0)
            acc += D[j] * t;
    }
    return real_int_tangent(arena, f32, acc, dy);
}

typedef struct remquo_env {
    double D[2];
    cr_kind kinds[2];
} remquo_env;

static cr_status remquo_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)nx;
    const remquo_env *e = env;
    double g = 0.0;
    cr_status st = real_int_cotangent(arena, "remquo_pullback", dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    for (size_t j = 0; j < 2; j++)
        dx[j + 1] = real_cotangent(e->kinds[j], e->D[j] * g);
    return CR_OK;
}

static cr_status remquo_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = remquo_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    remquo_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(remquo_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    bool f32 = false;
    real_args(args, 2, &f32);
    double r;
    int q;
    remquo_eval(real_of(&args[0]), real_of(&args[1]), f32, &r, &q, e->D);
    e->kinds[0] = args[0].kind;
    e->kinds[1] = args[1].kind;
    *pb = (cr_pullback){remquo_pullback, e, "remquo_pullback", nargs + 1};
    return CR_OK;
}

static const cr_rule_test remquo_test = {.npoints = NPTS(remainder_pts, 2),
                                         .points = remainder_pts,
                                         .lo = remainder_lo,
                                         .hi = remainder_hi};

/* ---- hypot(x, y, z, ...) ---- */

/*
 * hypot of n >= 3 real arguments: 2^e s with s = sqrt(sum (x_i 2^-e)²) and 2^e the power of
 * two at the largest |x_i| (exact scaling: no overflow or underflow of the squares). An
 * infinite argument gives +inf even with a NaN among the others (as C's hypot). The
 * partials are x_i 2^-e / s, which do not overflow with h; 0 when h = 0 (ChainRules).
 * Returns h; *e and *s are the scaling (s = 0 for h = 0, NaN for a non-finite h).
 */
static double hypot_n(const cr_value *args, size_t n, int *e, double *s)
{
    double m = 0;
    bool nan = false, inf = false;
    *e = 0;
    *s = DNAN;
    for (size_t i = 0; i < n; i++) {
        double a = fabs(real_of(&args[i]));
        if (isinf(a))
            inf = true;
        else if (isnan(a))
            nan = true;
        else if (a > m)
            m = a;
    }
    if (inf)
        return DINF;
    if (nan)
        return DNAN;
    if (m == 0) {
        *s = 0;
        return 0;
    }
    *e = ilogb(m);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double v = scalbn(real_of(&args[i]), -*e);
        sum = fma(v, v, sum);
    }
    *s = sqrt(sum);
    return scalbn(*s, *e);
}

/* ∂h/∂x_i from hypot_n's scaling. */
static double hypot_n_partial(double x, int e, double s)
{
    if (s == 0)
        return 0;
    return scalbn(x, -e) / s;
}

static cr_status hypot_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    if (nargs == 2)
        return cr_scalar_primal(arena, f, args, nargs, out);
    bool f32 = false;
    if (nargs < 2 || !real_args(args, nargs, &f32))
        return CR__FAIL(arena, CR_EINVAL, "hypot takes two or more real arguments");
    int e;
    double sc, h = hypot_n(args, nargs, &e, &sc);
    *out = f32 ? cr_value_f32((float)h) : cr_value_f64(h);
    return CR_OK;
}

/* hypot is one function: the 2-argument row and the n-argument hand-written rule. */
static const cr_function hypot_function = {.name = "hypot",
                                           .arity = -1,
                                           .primal = hypot_primal,
                                           .self_type = NULL,
                                           .udata = &hypot_row,
                                           .flags = CR_FN_SCALAR_ROW};
const cr_value cr_fn_hypot = {.kind = CR_KIND_FUNC, .u.func = {&hypot_function, NULL}};

static cr_status hypot_n_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                               const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                               cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = hypot_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    bool f32 = false;
    real_args(args, nargs, &f32);
    int e;
    double sc, acc = 0;
    hypot_n(args, nargs, &e, &sc);
    for (size_t i = 0; i < nargs; i++) {
        double t = 0;
        st = real_tangent(arena, "hypot", dargs[i + 1], &t);
        if (st != CR_OK)
            return st;
        if (!is_integer_kind(args[i].kind) && t != 0)
            acc += hypot_n_partial(real_of(&args[i]), e, sc) * t;
    }
    *dy = real_result_tangent(f32, acc);
    return CR_OK;
}

typedef struct hypot_env {
    size_t n;
    int e; /* scaling of hypot_n */
    double s;
    /* n (value, kind) pairs follow */
} hypot_env;

typedef struct hypot_arg {
    double v;
    cr_kind kind;
} hypot_arg;

static cr_status hypot_n_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                  void *env)
{
    (void)nx;
    const hypot_env *e = env;
    const hypot_arg *a = (const hypot_arg *)(const void *)(e + 1);
    double g;
    cr_tangent d;
    cr_status st = cr_tangent_unthunk(*dy, &d);
    if (st != CR_OK)
        return st;
    st = real_tangent(arena, "hypot_pullback", d, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    for (size_t i = 0; i < e->n; i++)
        dx[i + 1] = real_cotangent(a[i].kind, hypot_n_partial(a[i].v, e->e, e->s) * g);
    return CR_OK;
}

static cr_status hypot_n_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                               const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                               const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = hypot_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    size_t bytes;
    if ((st = cr__ck_mul(cr_arena_ctx(arena), "hypot", nargs, sizeof(hypot_arg), &bytes)) !=
            CR_OK ||
        (st = cr__ck_add(cr_arena_ctx(arena), "hypot", sizeof(hypot_env), bytes, &bytes)) != CR_OK)
        return st;
    hypot_env *e = cr_arena_alloc(arena, bytes, _Alignof(double));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    hypot_arg *a = (hypot_arg *)(void *)(e + 1);
    e->n = nargs;
    hypot_n(args, nargs, &e->e, &e->s);
    for (size_t i = 0; i < nargs; i++)
        a[i] = (hypot_arg){real_of(&args[i]), args[i].kind};
    *pb = (cr_pullback){hypot_n_pullback, e, "hypot_pullback", nargs + 1};
    return CR_OK;
}

/* Test registration of the variadic rule: as many coordinates as matchers (four). */
static const double hypot4_lo[] = {-3, -3, -3, -3}, hypot4_hi[] = {3, 3, 3, 3};
static const double hypot4_pts[] = {1e308, 1e308, 1e308, 1e308, 1,      2,      2,      4,
                                    1e200, 1e200, 1e200, 1e200, 1e-200, 3e-200, 2e-200, 0};
static const cr_rule_test hypot4_test = {
    .npoints = NPTS(hypot4_pts, 4), .points = hypot4_pts, .lo = hypot4_lo, .hi = hypot4_hi};

/* ========================================================================================
 * Non-differentiable functions: rounding, classification, neighbours
 * ======================================================================================== */

typedef enum nd_op {
    ND_FLOOR,
    ND_CEIL,
    ND_TRUNC,
    ND_ROUND,
    ND_NEARBYINT,
    ND_RINT,
    ND_LOGB,
    ND_LROUND,
    ND_LLROUND,
    ND_LRINT,
    ND_LLRINT,
    ND_ILOGB,
    ND_FPCLASSIFY,
    ND_SIGNBIT,
    ND_ISNAN,
    ND_ISINF,
    ND_ISFINITE,
    ND_ISNORMAL,
    ND_NEXTAFTER,
    ND_NEXTTOWARD,
    ND_COUNT
} nd_op;

typedef struct nd_info {
    nd_op op;
} nd_info;

static const nd_info k_nd_info[ND_COUNT] = {
    {ND_FLOOR},  {ND_CEIL},     {ND_TRUNC},      {ND_ROUND},     {ND_NEARBYINT},
    {ND_RINT},   {ND_LOGB},     {ND_LROUND},     {ND_LLROUND},   {ND_LRINT},
    {ND_LLRINT}, {ND_ILOGB},    {ND_FPCLASSIFY}, {ND_SIGNBIT},   {ND_ISNAN},
    {ND_ISINF},  {ND_ISFINITE}, {ND_ISNORMAL},   {ND_NEXTAFTER}, {ND_NEXTTOWARD},
};

/* The primal of the non-differentiable functions: real arguments, computed in float when
 * every floating argument is a float; real results keep that type, integer results are
 * int64 values, predicates bool. */
static cr_status nd_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                           cr_value *out)
{
    const cr_function *fn = f->u.func.fn;
    const nd_info *info = fn->udata;
    bool f32 = false;
    if (!real_args(args, nargs, &f32))
        return CR__FAIL(arena, CR_EINVAL, "%s takes real arguments", fn->name);
    double x = real_of(&args[0]);
    float xf = (float)x;
    double r = 0;
    switch (info->op) {
    case ND_FLOOR:
        r = f32 ? (double)floor(xf) : floor(x);
        break;
    case ND_CEIL:
        r = f32 ? (double)ceil(xf) : ceil(x);
        break;
    case ND_TRUNC:
        r = f32 ? (double)trunc(xf) : trunc(x);
        break;
    case ND_ROUND:
        r = f32 ? (double)round(xf) : round(x);
        break;
    case ND_NEARBYINT:
        r = f32 ? (double)nearbyint(xf) : nearbyint(x);
        break;
    case ND_RINT:
        r = f32 ? (double)rint(xf) : rint(x);
        break;
    case ND_LOGB:
        r = f32 ? (double)logb(xf) : logb(x);
        break;
    case ND_NEXTAFTER:
        r = f32 ? (double)nextafter(xf, (float)real_of(&args[1])) : nextafter(x, real_of(&args[1]));
        break;
    case ND_NEXTTOWARD:
        r = f32 ? (double)nexttowardf(xf, (long double)real_of(&args[1]))
                : nexttoward(x, (long double)real_of(&args[1]));
        break;
    case ND_LROUND:
        *out = cr_value_i64(f32 ? lround(xf) : lround(x));
        return CR_OK;
    case ND_LLROUND:
        *out = cr_value_i64(f32 ? llround(xf) : llround(x));
        return CR_OK;
    case ND_LRINT:
        *out = cr_value_i64(f32 ? lrint(xf) : lrint(x));
        return CR_OK;
    case ND_LLRINT:
        *out = cr_value_i64(f32 ? llrint(xf) : llrint(x));
        return CR_OK;
    case ND_ILOGB:
        *out = cr_value_i64(f32 ? ilogb(xf) : ilogb(x));
        return CR_OK;
    case ND_FPCLASSIFY:
        *out = cr_value_i64(f32 ? fpclassify(xf) : fpclassify(x));
        return CR_OK;
    case ND_SIGNBIT:
        *out = cr_value_bool(f32 ? signbit(xf) != 0 : signbit(x) != 0);
        return CR_OK;
    case ND_ISNAN:
        *out = cr_value_bool(isnan(x));
        return CR_OK;
    case ND_ISINF:
        *out = cr_value_bool(isinf(x));
        return CR_OK;
    case ND_ISFINITE:
        *out = cr_value_bool(isfinite(x));
        return CR_OK;
    case ND_ISNORMAL:
        *out = cr_value_bool(f32 ? isnormal(xf) : isnormal(x));
        return CR_OK;
    case ND_COUNT:
        break;
    }
    *out = f32 ? cr_value_f32((float)r) : cr_value_f64(r);
    return CR_OK;
}

#define DEFINE_ND(NAME, OP, NIN)                                                    \
    static const cr_function NAME##_function = {                                    \
        .name = #NAME, .arity = NIN, .primal = nd_primal, .udata = &k_nd_info[OP]}; \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

DEFINE_ND(floor, ND_FLOOR, 1)
DEFINE_ND(ceil, ND_CEIL, 1)
DEFINE_ND(trunc, ND_TRUNC, 1)
DEFINE_ND(round, ND_ROUND, 1)
DEFINE_ND(nearbyint, ND_NEARBYINT, 1)
DEFINE_ND(rint, ND_RINT, 1)
DEFINE_ND(logb, ND_LOGB, 1)
DEFINE_ND(lround, ND_LROUND, 1)
DEFINE_ND(llround, ND_LLROUND, 1)
DEFINE_ND(lrint, ND_LRINT, 1)
DEFINE_ND(llrint, ND_LLRINT, 1)
DEFINE_ND(ilogb, ND_ILOGB, 1)
DEFINE_ND(fpclassify, ND_FPCLASSIFY, 1)
DEFINE_ND(signbit, ND_SIGNBIT, 1)
DEFINE_ND(isnan, ND_ISNAN, 1)
DEFINE_ND(isinf, ND_ISINF, 1)
DEFINE_ND(isfinite, ND_ISFINITE, 1)
DEFINE_ND(isnormal, ND_ISNORMAL, 1)
DEFINE_ND(nextafter, ND_NEXTAFTER, 2)
DEFINE_ND(nexttoward, ND_NEXTTOWARD, 2)

/* ---- tanpi, sincosd, mod2pi, rem2pi, log(b, x) ------------------------------------------- */

/* tan(pi x) = sinpi(x)/cospi(x), both exactly reduced: exact zeros at the integers, ±inf at
 * the half-integers (cospi's exact zeros). */
static double tanpi_d(double x)
{
    if (x == 0)
        return x;                           /* ±0 */
    double f = fmod(x, 1.0);                /* exact */
    if (fabs(f) == 0.25 || fabs(f) == 0.75) /* exactly ±1 (the two roundings may not cancel) */
        return (fabs(f) == 0.25) == (f > 0) ? 1.0 : -1.0; /* tan(pi/4) = 1, tan(3pi/4) = -1 */
    double s, c;
    sincos_units(x, &k_halfturns, &s, &c);
    return s / c;
}

FLOAT_VIA_DOUBLE(tanpi)

/* tanpi(x): pi (1 + Ω²) */
static const double tanpi_lo[] = {-0.45}, tanpi_hi[] = {0.45};
static const double tanpi_pts[] = {0.0, 0.25, -0.75, 1e-300, 3.375, 1e15 + 0.25};
CR_SCALAR_EVALS_REAL(tanpi, 1, 1, Y[0] = GENR(tanpi, x[0])(x[0]),
                     D[0] = GENR(pimul, x[0])(1 + Y[0] * Y[0]))
static const cr_scalar_rule tanpi_row = CR_SCALAR_ROW_REAL_EX(
    tanpi, TESTREG(tanpi), .notes = "exact zeros at integers, ±inf at half-integers");
DEFINE_FN(tanpi, "tanpi", 1)

/* sincosd(x) = (sind(x), cosd(x)): ((pi/180) cosd(x), -(pi/180) sind(x)) */
static const double sincosd_lo[] = {-400}, sincosd_hi[] = {400};
static const double sincosd_pts[] = {90.0, 180.0, -45.0, 1e-300, 1e15 + 90};
CR_SCALAR_EVALS_REAL(sincosd, 1, 2, Y[0] = GENR(sind, x[0])(x[0]);
                     Y[1] = GENR(cosd, x[0])(x[0]), D[0] = GENR(deg2rad, x[0])(Y[1]);
                     D[1] = -GENR(deg2rad, x[0])(Y[0]))
static const cr_scalar_rule sincosd_row = CR_SCALAR_ROW_REAL_EX(sincosd, TESTREG(sincosd));
DEFINE_FN(sincosd, "sincosd", 1)

/* 2 pi as a sum of three doubles (to 1e-49 relative). */
#define TWOPI_HI  6.283185307179586
#define TWOPI_MID 2.4492935982947064e-16
#define TWOPI_LO  (-5.989539619436679e-33)
/* Largest |x| reduced: n = x/(2 pi) must be an exact integer, with margin. */
#define REM2PI_MAX 0x1p50

/* x - n 2pi for an integer n, |n| < 2^48: each product is fused with its subtraction, so
 * the error is a few ulps of the result's magnitude (2 pi), not of x. */
static double minus_2pi_n(double x, double n)
{
    double r = fma(-n, TWOPI_HI, x);
    r = fma(-n, TWOPI_MID, r);
    return r - n * TWOPI_LO;
}

/*
 * Julia's rem2pi(x, mode): x - 2 pi n with n rounded from x/(2 pi) by the mode (the
 * CR_ROUND_* values: nearest, toward zero, down, up), so the result lies in [-pi, pi], has
 * the sign of x with |r| < 2 pi, lies in [0, 2 pi) or in (-2 pi, 0]. The quotient is
 * corrected once or twice against the exactly reduced remainder. The mode is rounded to an
 * integer (the rule tester perturbs it as a real number). NaN for |x| >= 2^50, an unknown
 * mode or a non-finite x.
 */
static double rem2pi_d(double x, double mode)
{
    double m = nearbyint(mode);
    if (!(fabs(x) < REM2PI_MAX) || m < CR_ROUND_NEAREST || m > CR_ROUND_UP)
        return (double)NAN;
    double q = x / TWOPI_HI;
    double n = m == CR_ROUND_NEAREST   ? nearbyint(q)
               : m == CR_ROUND_TO_ZERO ? trunc(q)
               : m == CR_ROUND_DOWN    ? floor(q)
                                       : ceil(q);
    double r = minus_2pi_n(x, n);
    for (int it = 0; it < 2; it++) {
        double step = 0;
        if (m == CR_ROUND_NEAREST)
            step = r > PI_HI ? 1 : r < -PI_HI ? -1 : 0;
        else if (m == CR_ROUND_DOWN || (m == CR_ROUND_TO_ZERO && x >= 0))
            step = r < 0 ? -1 : r >= TWOPI_HI ? 1 : 0;
        else
            step = r > 0 ? 1 : r <= -TWOPI_HI ? -1 : 0;
        if (step == 0)
            break;
        n += step;
        r = minus_2pi_n(x, n);
    }
    return r;
}

static double mod2pi_d(double x)
{
    return rem2pi_d(x, CR_ROUND_DOWN);
}

FLOAT_VIA_DOUBLE(mod2pi)
FLOAT_VIA_DOUBLE2(rem2pi)

/* mod2pi(x) = rem2pi(x, RoundDown), in [0, 2 pi): 1 (ChainRules: the jumps included) */
static const double mod2pi_lo[] = {0.1}, mod2pi_hi[] = {6.1};
static const double mod2pi_pts[] = {-1.0, 100.3, -100.3, 1e6 + 0.5, 3.0};
CR_SCALAR_EVALS_REAL(mod2pi, 1, 1, Y[0] = GENR(mod2pi, x[0])(x[0]), D[0] = 1)
static const cr_scalar_rule mod2pi_row =
    CR_SCALAR_ROW_REAL_EX(mod2pi, TESTREG(mod2pi),
                          .notes = "in [0, 2 pi); derivative 1, also at the jumps (ChainRules); "
                                   "|x| < 2^50 (NaN beyond)");
DEFINE_FN(mod2pi, "mod2pi", 1)

/* rem2pi(x, mode): (1, 0); the mode is a CR_ROUND_* value (an integer gets NoTangent) */
static const double rem2pi_lo[] = {-3.0, 0.0}, rem2pi_hi[] = {3.0, 0.3};
static const double rem2pi_pts[] = {100.3, 1.0, -100.3, 1.0,  7.0, 2.0,       -7.0,
                                    2.0,   7.0, 3.0,    -7.0, 3.0, 1e6 + 0.5, 0.0};
CR_SCALAR_EVALS_REAL(rem2pi, 2, 1, Y[0] = GENR(rem2pi, x[0])(x[0], x[1]), D[0] = 1; D[1] = 0)
static const cr_scalar_rule rem2pi_row = CR_SCALAR_ROW_REAL_EX(
    rem2pi, TESTREG(rem2pi),
    .notes = "mode CR_ROUND_NEAREST (0, result in [-pi, pi]), _TO_ZERO (1), _DOWN (2), _UP (3); "
             "derivative 1 in x (ChainRules), 0 in the mode; |x| < 2^50");
DEFINE_FN(rem2pi, "rem2pi", 2)

/* log_base(b, x) = log(x)/log(b) (Julia's log(b, x)): -Ω/(b log b), 1/(x log b) */
static const double log_base_lo[] = {1.5, 0.2}, log_base_hi[] = {6.0, 6.0};
static const double log_base_pts[] = {2.0, 8.0, 10.0, 1e-300, 0.5, 3.0, 1e300, 7.0};
CR_SCALAR_EVALS(log_base, 2, 1, Y[0] = log(x[1]) / log(x[0]), D[0] = -Y[0] / (x[0] * log(x[0]));
                D[1] = 1 / (x[1] * log(x[0])))
static const cr_scalar_rule log_base_row =
    CR_SCALAR_ROW_EX(log_base, TESTREG(log_base),
                     .notes = "Julia's log(b, x); b, x > 0 and b != 1 for real arguments");
DEFINE_FN(log_base, "log_base", 2)

/* ========================================================================================
 * Registration
 * ======================================================================================== */

static const struct {
    const cr_function *fn;
    const cr_scalar_rule *row;
} k_rows[] = {
    {&sin_function, &sin_row},
    {&cos_function, &cos_row},
    {&sincos_function, &sincos_row},
    {&exp_function, &exp_row},
    {&log_function, &log_row},
    {&sqrt_function, &sqrt_row},
    {&tan_function, &tan_row},
    {&asin_function, &asin_row},
    {&acos_function, &acos_row},
    {&atan_function, &atan_row},
    {&atan2_function, &atan2_row},
    {&sec_function, &sec_row},
    {&csc_function, &csc_row},
    {&cot_function, &cot_row},
    {&asec_function, &asec_row},
    {&acsc_function, &acsc_row},
    {&acot_function, &acot_row},
    {&sinh_function, &sinh_row},
    {&cosh_function, &cosh_row},
    {&tanh_function, &tanh_row},
    {&asinh_function, &asinh_row},
    {&acosh_function, &acosh_row},
    {&atanh_function, &atanh_row},
    {&sech_function, &sech_row},
    {&csch_function, &csch_row},
    {&coth_function, &coth_row},
    {&asech_function, &asech_row},
    {&acsch_function, &acsch_row},
    {&acoth_function, &acoth_row},
    {&sinpi_function, &sinpi_row},
    {&cospi_function, &cospi_row},
    {&sincospi_function, &sincospi_row},
    {&sinc_function, &sinc_row},
    {&sind_function, &sind_row},
    {&cosd_function, &cosd_row},
    {&tand_function, &tand_row},
    {&secd_function, &secd_row},
    {&cscd_function, &cscd_row},
    {&cotd_function, &cotd_row},
    {&asind_function, &asind_row},
    {&acosd_function, &acosd_row},
    {&atand_function, &atand_row},
    {&asecd_function, &asecd_row},
    {&acscd_function, &acscd_row},
    {&acotd_function, &acotd_row},
    {&deg2rad_function, &deg2rad_row},
    {&rad2deg_function, &rad2deg_row},
    {&exp2_function, &exp2_row},
    {&exp10_function, &exp10_row},
    {&expm1_function, &expm1_row},
    {&log2_function, &log2_row},
    {&log10_function, &log10_row},
    {&log1p_function, &log1p_row},
    {&pow_function, &pow_row},
    {&cbrt_function, &cbrt_row},
    {&erf_function, &erf_row},
    {&erfc_function, &erfc_row},
    {&tgamma_function, &tgamma_row},
    {&lgamma_function, &lgamma_row},
    {&hypot_function, &hypot_row},
    {&fma_function, &fma_row},
    {&fmod_function, &fmod_row},
    {&rem_function, &rem_row},
    {&remainder_function, &remainder_row},
    {&mod_function, &mod_row},
    {&fdim_function, &fdim_row},
    {&fmax_function, &fmax_row},
    {&fmin_function, &fmin_row},
    {&copysign_function, &copysign_row},
    {&fabs_function, &fabs_row},
    {&ldexp_function, &ldexp_row},
    {&scalbn_function, &scalbn_row},
    {&scalbln_function, &scalbln_row},
    {&modf_function, &modf_row},
    {&logistic_function, &logistic_row},
    {&sigmoid_function, &sigmoid_row},
    {&log1pexp_function, &log1pexp_row},
    {&softplus_function, &softplus_row},
    {&logaddexp_function, &logaddexp_row},
    {&xlogy_function, &xlogy_row},
    {&xlog1py_function, &xlog1py_row},
    {&relu_function, &relu_row},
    {&tanpi_function, &tanpi_row},
    {&sincosd_function, &sincosd_row},
    {&mod2pi_function, &mod2pi_row},
    {&rem2pi_function, &rem2pi_row},
    {&log_base_function, &log_base_row},
};

static const cr_function *const k_nondiff1[] = {
    &floor_function,      &ceil_function,     &trunc_function,  &round_function,
    &nearbyint_function,  &rint_function,     &logb_function,   &lround_function,
    &llround_function,    &lrint_function,    &llrint_function, &ilogb_function,
    &fpclassify_function, &signbit_function,  &isnan_function,  &isinf_function,
    &isfinite_function,   &isnormal_function,
};

static const cr_function *const k_nondiff2[] = {&nextafter_function, &nexttoward_function};

cr_status cr__family_math(cr_registry *reg)
{
    cr_status st;
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; i++) {
        st = cr_scalar_rule_register(reg, k_rows[i].fn, k_rows[i].row);
        if (st != CR_OK)
            return st;
    }

    static const cr_argspec real1[1] = {{CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL}};
    static const cr_argspec real2[2] = {{CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL},
                                        {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL}};
    static const cr_argspec real4[4] = {{CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL},
                                        {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL},
                                        {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL},
                                        {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL}};

    cr_rule_def d = {0};
    d.fn = &frexp_function;
    d.nargs = 1;
    d.args = real1;
    d.frule = frexp_frule;
    d.rrule = frexp_rrule;
    d.test = &frexp_test;
    if ((st = cr_registry_add(reg, &d)) != CR_OK)
        return st;

    d = (cr_rule_def){0};
    d.fn = &remquo_function;
    d.nargs = 2;
    d.args = real2;
    d.frule = remquo_frule;
    d.rrule = remquo_rrule;
    d.test = &remquo_test;
    if ((st = cr_registry_add(reg, &d)) != CR_OK)
        return st;

    /* hypot(x, y, z, w...): three or more arguments (the last matcher repeats). */
    d = (cr_rule_def){0};
    d.fn = &hypot_function;
    d.nargs = 4;
    d.args = real4;
    d.variadic = true;
    d.frule = hypot_n_frule;
    d.rrule = hypot_n_rrule;
    d.test = &hypot4_test;
    if ((st = cr_registry_add(reg, &d)) != CR_OK)
        return st;

    for (size_t i = 0; i < sizeof k_nondiff1 / sizeof k_nondiff1[0]; i++)
        if ((st = cr_registry_non_differentiable(reg, k_nondiff1[i], real1, 1, false)) != CR_OK)
            return st;
    for (size_t i = 0; i < sizeof k_nondiff2 / sizeof k_nondiff2[0]; i++)
        if ((st = cr_registry_non_differentiable(reg, k_nondiff2[i], real2, 2, false)) != CR_OK)
            return st;
    return CR_OK;
}
