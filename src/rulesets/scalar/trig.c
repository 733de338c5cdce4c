/*
 * The trigonometric rows of the math family: sin, cos, tan and their inverses and
 * reciprocals, atan2, the hyperbolic functions, Julia's half-turn and degree variants
 * (sinpi, sind, ..., tanpi, sincosd), sinc, deg2rad, rad2deg and the reductions mod2pi and
 * rem2pi. Each rule's comment gives its derivative; where the textbook formula loses
 * accuracy the comment says how the row avoids it (docs/rules-scalar.md).
 */
#include "math_impl.h"

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

void cr__sincospi(double x, double *s, double *c)
{
    sincos_units(x, &k_halfturns, s, c);
}

/* NAME_d(x): EXPR of the sine s and cosine c of x in the units U (sincos_units). */
#define UNITS_FN(NAME, U, EXPR)      \
    static double NAME##_d(double x) \
    {                                \
        double s, c;                 \
        sincos_units(x, &U, &s, &c); \
        return EXPR;                 \
    }

UNITS_FN(sinpi, k_halfturns, s)

UNITS_FN(cospi, k_halfturns, c)

UNITS_FN(sind, k_degrees, s)

UNITS_FN(cosd, k_degrees, c)

UNITS_FN(tand, k_degrees, s / c)

UNITS_FN(cotd, k_degrees, c / s)

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

/* ---- Trigonometric ---- */

/* sin(x): cos(x). Huge arguments (sin(1e22)) rely on the C library's exact reduction. */
static const double sin_lo[] = {-3.5}, sin_hi[] = {3.5};
static const double sin_pts[] = {3.141592653589793,  -1e-300, 0x1p-1074,
                                 1.5707963267948966, 1e22,    1e300};
ROW1(sin, sin(x[0]), cos(x[0]), TESTREG(sin))

/* cos(x): -sin(x) */
static const double cos_lo[] = {-3.5}, cos_hi[] = {3.5};
static const double cos_pts[] = {3.141592653589793, 1.5707963267948966, 1e-300, 1e22, 1e300};
ROW1(cos, cos(x[0]), -sin(x[0]), TESTREG(cos))

/* sincos(x) = (sin x, cos x): partials (cos x, -sin x) */
static const double sincos_lo[] = {-3.5}, sincos_hi[] = {3.5};
static const double sincos_pts[] = {3.141592653589793, 1.5707963267948966, 1e22, 1e300};
CR_SCALAR_EVALS(sincos, 1, 2, Y[0] = sin(x[0]); Y[1] = cos(x[0]), D[0] = Y[1]; D[1] = -Y[0])
static const cr_scalar_rule sincos_row = CR_SCALAR_ROW_EX(sincos, TESTREG(sincos));
DEFINE_FN(sincos, "sincos", 1)

/* tan(x): 1 + Ω² */
static const double tan_lo[] = {-1.4}, tan_hi[] = {1.4};
static const double tan_pts[] = {1e-300, 1e22, 1.5707963267948966, -1.5707963267948966, 1e300};
ROW1(tan, tan(x[0]), 1 + Y[0] * Y[0], TESTREG(tan))

/* asin(x): 1/sqrt((1 - x)(1 + x)); the product form keeps accuracy near |x| = 1 where
 * 1 - x*x cancels. */
static const double asin_lo[] = {-0.99}, asin_hi[] = {0.99};
static const double asin_pts[] = {0.9999999999,          -0.9999999999, 0x1.fffffffffffffp-1,
                                  -0x1.fffffffffffffp-1, 1 - 0x1p-30,   1e-300};
ROW1(asin, asin(x[0]), 1 / sqrt((1 - x[0]) * (1 + x[0])), TESTREG(asin),
     .notes = "-1 < x < 1 for real x; ±inf at ±1")

/* acos(x): -1/sqrt((1 - x)(1 + x)) */
static const double acos_lo[] = {-0.99}, acos_hi[] = {0.99};
static const double acos_pts[] = {0.9999999999, -0.9999999999, 0x1.fffffffffffffp-1,
                                  -0x1.fffffffffffffp-1, 1e-300};
ROW1(acos, acos(x[0]), -1 / sqrt((1 - x[0]) * (1 + x[0])), TESTREG(acos),
     .notes = "-1 < x < 1 for real x; -inf at ±1")

/* atan(x): 1/(1 + x²), without overflow of x² for huge x */
static const double atan_lo[] = {-3}, atan_hi[] = {3};
static const double atan_pts[] = {1e200, -1e300, 1e154, 1e-200, 0x1p27, 1e8};
ROW1(atan, atan(x[0]), GEN(inv1px2, x[0])(x[0]), TESTREG(atan))

/* atan2(y, x): (x, -y)/(x² + y²), scaled (see atan2_partials_d) */
static const double atan2_lo[] = {0.2, 0.2}, atan2_hi[] = {3, 3};
static const double atan2_pts[] = {1e200,   1e200, 1e300, 1.0,    1.0,    1e300,   1.0,
                                   -1e-300, 3.0,   -4.0,  1e-200, 1e-200, -1e-310, 5e-324};
REAL_ROW(atan2, 2, Y[0] = atan2(x[0], x[1]), D[0] = GENR(atan2_dy, x[0])(x[0], x[1]);
         D[1] = GENR(atan2_dx, x[0])(x[0], x[1]), TESTREG(atan2),
         .notes = "partials computed after exact power-of-two scaling (no overflow of x²+y²); "
                  "NaN at (0, 0), where atan2 is discontinuous; 0 when an argument is infinite")

/* sec(x) = 1/cos(x): Ω tan(x) */
static const double sec_lo[] = {-1.4}, sec_hi[] = {1.4};
static const double sec_pts[] = {3.0, 1e22, 1.5707963267948966};
ROW1(sec, 1 / cos(x[0]), Y[0] * tan(x[0]), TESTREG(sec))

/* csc(x) = 1/sin(x): -Ω cot(x) */
static const double csc_lo[] = {0.2}, csc_hi[] = {3};
static const double csc_pts[] = {-2.0, 1e22, 3.141592653589793, 1e-150};
ROW1(csc, 1 / sin(x[0]), -Y[0] / tan(x[0]), TESTREG(csc))

/* cot(x) = 1/tan(x): -(1 + Ω²) */
static const double cot_lo[] = {0.2}, cot_hi[] = {3};
static const double cot_pts[] = {-2.0, 1.5707963267948966, 1e22, 3.141592653589793, 1e-150};
ROW1(cot, 1 / tan(x[0]), -(1 + Y[0] * Y[0]), TESTREG(cot))

/* asec(x): 1/(|x| sqrt(x² - 1)) (see asec_d, dasec_d) */
static const double asec_lo[] = {1.05}, asec_hi[] = {4};
static const double asec_pts[] = {1 + 0x1p-40, -1 - 0x1p-40, 1e300, -1e200, 1.0000000001};
ROW1(asec, GEN(asec, x[0])(x[0]), GEN(dasec, x[0])(x[0]), TESTREG(asec),
     .notes = "|x| > 1 for real x; +inf at ±1")

/* acsc(x): -1/(|x| sqrt(x² - 1)) */
static const double acsc_lo[] = {1.05}, acsc_hi[] = {4};
static const double acsc_pts[] = {1 + 0x1p-40, -1 - 0x1p-40, 1e300, -1e200, 1.0000000001};
ROW1(acsc, GEN(acsc, x[0])(x[0]), -GEN(dasec, x[0])(x[0]), TESTREG(acsc),
     .notes = "|x| > 1 for real x; -inf at ±1")

/* acot(x) = atan(1/x): -1/(1 + x²) */
static const double acot_lo[] = {0.2}, acot_hi[] = {3};
static const double acot_pts[] = {1e200, -1e300, -0.5, 1e-200};
ROW1(acot, atan(1 / x[0]), -GEN(inv1px2, x[0])(x[0]), TESTREG(acot),
     .notes = "acot(±0) = ±pi/2 (jump at 0)")

/* ---- Hyperbolic ---- */

/* sinh(x): cosh(x) */
static const double sinh_lo[] = {-3}, sinh_hi[] = {3};
static const double sinh_pts[] = {700, -700, 1e-300, 0.5};
ROW1(sinh, sinh(x[0]), cosh(x[0]), TESTREG(sinh))

/* cosh(x): sinh(x) */
static const double cosh_lo[] = {-3}, cosh_hi[] = {3};
static const double cosh_pts[] = {700, -700, 1e-300, 0.5};
ROW1(cosh, cosh(x[0]), sinh(x[0]), TESTREG(cosh))

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
ROW1(asinh, asinh(x[0]), GEN(invsqrt1px2, x[0])(x[0]), TESTREG(asinh))

/* acosh(x): 1/(sqrt(x - 1) sqrt(x + 1)): x - 1 is exact near 1 and the product of square
 * roots does not overflow for huge x (x*x does); also the complex branch. */
static const double acosh_lo[] = {1.05}, acosh_hi[] = {4};
static const double acosh_pts[] = {1 + 0x1p-40, 1.0000000001, 1e300, 1.7e308, 1e154};
ROW1(acosh, acosh(x[0]), 1 / (sqrt(x[0] - 1) * sqrt(x[0] + 1)), TESTREG(acosh),
     .notes = "x > 1 for real x; +inf at 1")

/* atanh(x): 1/((1 - x)(1 + x)), exact factors near ±1 */
static const double atanh_lo[] = {-0.95}, atanh_hi[] = {0.95};
static const double atanh_pts[] = {1 - 0x1p-40, -0.9999999999, 0x1.fffffffffffffp-1, 1e-300};
ROW1(atanh, atanh(x[0]), 1 / (1 - x[0]) / (1 + x[0]), TESTREG(atanh),
     .notes = "-1 < x < 1 for real x; +inf at ±1")

/* sech(x) = 1/cosh(x): -tanh(x) Ω */
static const double sech_lo[] = {-3}, sech_hi[] = {3};
static const double sech_pts[] = {40, -300, 700, 1e-300};
ROW1(sech, 1 / cosh(x[0]), -tanh(x[0]) * Y[0], TESTREG(sech))

/* csch(x) = 1/sinh(x): -Ω/tanh(x) */
static const double csch_lo[] = {0.2}, csch_hi[] = {3};
static const double csch_pts[] = {40, -300, 700, 1e-150};
ROW1(csch, 1 / sinh(x[0]), -Y[0] / tanh(x[0]), TESTREG(csch))

/* coth(x) = 1/tanh(x): -csch²(x) = -(1/sinh x)²; 1 - Ω² would cancel for large |x| */
static const double coth_lo[] = {0.2}, coth_hi[] = {3};
static const double coth_pts[] = {40, -300, 700, 1e-150};
CR_SCALAR_EVALS(coth, 1, 1, Y[0] = 1 / tanh(x[0]), T s_ = 1 / sinh(x[0]); D[0] = -(s_ * s_))
static const cr_scalar_rule coth_row = CR_SCALAR_ROW_EX(coth, TESTREG(coth));
DEFINE_FN(coth, "coth", 1)

/* asech(x): -1/(x sqrt(1 - x²)) (see asech_d, dasech_d) */
static const double asech_lo[] = {0.05}, asech_hi[] = {0.95};
static const double asech_pts[] = {1 - 0x1p-40, 0.9999999999, 1e-300, 1e-150};
ROW1(asech, GEN(asech, x[0])(x[0]), GEN(dasech, x[0])(x[0]), TESTREG(asech),
     .notes = "0 < x < 1 for real x; -inf at 1")

/* acsch(x): -1/(|x| sqrt(1 + x²)) */
static const double acsch_lo[] = {0.2}, acsch_hi[] = {3};
static const double acsch_pts[] = {1e200, -1e300, -0.5, 1e-300};
ROW1(acsch, GEN(acsch, x[0])(x[0]), GEN(dacsch, x[0])(x[0]), TESTREG(acsch))

/* acoth(x): 1/((1 - x)(1 + x)), divided in turn so that nothing overflows */
static const double acoth_lo[] = {1.05}, acoth_hi[] = {4};
static const double acoth_pts[] = {1 + 0x1p-40, -1.0000000001, 1e200, -1e300};
ROW1(acoth, GEN(acoth, x[0])(x[0]), 1 / (1 - x[0]) / (1 + x[0]), TESTREG(acoth),
     .notes = "|x| > 1 for real x; -inf at ±1")

/* ---- Pi and degree variants (real arguments) ---- */

/* sinpi(x) = sin(pi x), exactly reduced: pi cospi(x) */
static const double sinpi_lo[] = {-3}, sinpi_hi[] = {3};
static const double sinpi_pts[] = {1e15 + 0.5, 0.5, 1.0, -2.25, 1e-300, 123456.75, 1e300};
REAL_ROW1(sinpi, GENR(sinpi, x[0])(x[0]), GENR(pimul, x[0])(GENR(cospi, x[0])(x[0])),
          TESTREG(sinpi), .notes = "exact zeros at integers; the argument is reduced exactly")

/* cospi(x) = cos(pi x): -pi sinpi(x) */
static const double cospi_lo[] = {-3}, cospi_hi[] = {3};
static const double cospi_pts[] = {0.5, 1.0, -2.25, 1e-300, 123456.75, 1e300, 1e15 + 0.5};
REAL_ROW1(cospi, GENR(cospi, x[0])(x[0]), -GENR(pimul, x[0])(GENR(sinpi, x[0])(x[0])),
          TESTREG(cospi), .notes = "exact zeros at half-integers")

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
REAL_ROW1(sinc, GENR(sinc, x[0])(x[0]), GENR(cosc, x[0])(x[0]), TESTREG(sinc),
          .notes =
              "sinc(0) = 1, derivative 0 there; near the zeros of cosc (±1.43, ±2.46, ...) the "
              "derivative has absolute, not relative, accuracy")

/* sind(x) = sin(x°), exactly reduced: (pi/180) cosd(x) */
static const double deg_lo[] = {-400}, deg_hi[] = {400};
static const double sind_pts[] = {180, 90, 3.6e10 + 30, 1e-300, -45, 1e22};
REAL_ROW1(sind, GENR(sind, x[0])(x[0]), GENR(deg2rad, x[0])(GENR(cosd, x[0])(x[0])),
          .test = {.lo = deg_lo, .hi = deg_hi, .npoints = NPTS(sind_pts, 1), .points = sind_pts},
          .notes = "exact zeros at multiples of 180")

/* cosd(x): -(pi/180) sind(x) */
static const double cosd_pts[] = {180, 90, 3.6e10 + 30, 1e-300, -45, 1e22};
REAL_ROW1(cosd, GENR(cosd, x[0])(x[0]), -GENR(deg2rad, x[0])(GENR(sind, x[0])(x[0])),
          .test = {.lo = deg_lo, .hi = deg_hi, .npoints = NPTS(cosd_pts, 1), .points = cosd_pts},
          .notes = "exact zeros at odd multiples of 90")

/* tand(x): (pi/180)(1 + Ω²) */
static const double tand_lo[] = {-80}, tand_hi[] = {80};
static const double tand_pts[] = {180, 45, 1e-300, -135, 1e22, 89.99999};
REAL_ROW1(tand, GENR(tand, x[0])(x[0]), GENR(deg2rad, x[0])(1 + Y[0] * Y[0]), TESTREG(tand),
          .notes = "tand(±90) = ±inf (exact reduction), derivative +inf")

/* secd(x) = 1/cosd(x): (pi/180) Ω tand(x) */
static const double secd_lo[] = {-80}, secd_hi[] = {80};
static const double secd_pts[] = {180, 45, 1e-300, 1e22, 89.99999};
REAL_ROW1(secd, 1 / GENR(cosd, x[0])(x[0]), GENR(deg2rad, x[0])(Y[0] * GENR(tand, x[0])(x[0])),
          TESTREG(secd))

/* cscd(x) = 1/sind(x): -(pi/180) Ω cotd(x) */
static const double cscd_lo[] = {10}, cscd_hi[] = {170};
static const double cscd_pts[] = {90, 45, -135, 1e22, 0.00001};
REAL_ROW1(cscd, 1 / GENR(sind, x[0])(x[0]), -GENR(deg2rad, x[0])(Y[0] * GENR(cotd, x[0])(x[0])),
          TESTREG(cscd))

/* cotd(x) = cosd(x)/sind(x): -(pi/180)(1 + Ω²) */
static const double cotd_lo[] = {10}, cotd_hi[] = {170};
static const double cotd_pts[] = {90, 45, -135, 1e22, 0.00001};
REAL_ROW1(cotd, GENR(cotd, x[0])(x[0]), -GENR(deg2rad, x[0])(1 + Y[0] * Y[0]), TESTREG(cotd))

/* asind(x) = asin(x) 180/pi: (180/pi)/sqrt((1 - x)(1 + x)) */
static const double unit_lo[] = {-0.99}, unit_hi[] = {0.99};
static const double asind_pts[] = {0.9999999999, -0x1.fffffffffffffp-1, 1e-300, 0.5};
REAL_ROW1(
    asind, GENR(rad2deg, x[0])(asin(x[0])), GENR(rad2deg, x[0])(1 / sqrt((1 - x[0]) * (1 + x[0]))),
    .test = {.lo = unit_lo, .hi = unit_hi, .npoints = NPTS(asind_pts, 1), .points = asind_pts},
    .notes = "-1 < x < 1")

/* acosd(x): -(180/pi)/sqrt((1 - x)(1 + x)) */
static const double acosd_pts[] = {0.9999999999, -0x1.fffffffffffffp-1, 1e-300, 0.5};
REAL_ROW1(
    acosd, GENR(rad2deg, x[0])(acos(x[0])), -GENR(rad2deg, x[0])(1 / sqrt((1 - x[0]) * (1 + x[0]))),
    .test = {.lo = unit_lo, .hi = unit_hi, .npoints = NPTS(acosd_pts, 1), .points = acosd_pts},
    .notes = "-1 < x < 1")

/* atand(x): (180/pi)/(1 + x²) */
static const double atand_lo[] = {-3}, atand_hi[] = {3};
static const double atand_pts[] = {1e200, -1e300, 1e-200, 1e8};
REAL_ROW1(atand, GENR(rad2deg, x[0])(atan(x[0])), GENR(rad2deg, x[0])(GENR(inv1px2, x[0])(x[0])),
          TESTREG(atand))

/* asecd(x): (180/pi)/(|x| sqrt(x² - 1)) */
static const double asecd_lo[] = {1.05}, asecd_hi[] = {4};
static const double asecd_pts[] = {1 + 0x1p-40, -1.0000000001, 1e300};
REAL_ROW1(asecd, GENR(rad2deg, x[0])(GENR(asec, x[0])(x[0])),
          GENR(rad2deg, x[0])(GENR(dasec, x[0])(x[0])), TESTREG(asecd), .notes = "|x| > 1")

/* acscd(x): -(180/pi)/(|x| sqrt(x² - 1)) */
static const double acscd_lo[] = {1.05}, acscd_hi[] = {4};
static const double acscd_pts[] = {1 + 0x1p-40, -1.0000000001, 1e300};
REAL_ROW1(acscd, GENR(rad2deg, x[0])(GENR(acsc, x[0])(x[0])),
          -GENR(rad2deg, x[0])(GENR(dasec, x[0])(x[0])), TESTREG(acscd), .notes = "|x| > 1")

/* acotd(x): -(180/pi)/(1 + x²) */
static const double acotd_lo[] = {0.2}, acotd_hi[] = {3};
static const double acotd_pts[] = {1e200, -1e300, 1e-200};
REAL_ROW1(acotd, GENR(rad2deg, x[0])(atan(1 / x[0])),
          -GENR(rad2deg, x[0])(GENR(inv1px2, x[0])(x[0])), TESTREG(acotd),
          .notes = "acotd(±0) = ±90 (jump at 0)")

/* deg2rad(x) = x pi/180: pi/180 */
static const double d2r_lo[] = {-400}, d2r_hi[] = {400};
static const double deg2rad_pts[] = {1e300, 1e-300};
ROW1(deg2rad, GEN(deg2rad, x[0])(x[0]), D2R_HI,
     .test = {.lo = d2r_lo, .hi = d2r_hi, .npoints = NPTS(deg2rad_pts, 1), .points = deg2rad_pts})

/* rad2deg(x) = x 180/pi: 180/pi */
static const double rad2deg_lo[] = {-7}, rad2deg_hi[] = {7};
static const double rad2deg_pts[] = {1e300, 1e-300};
ROW1(rad2deg, GEN(rad2deg, x[0])(x[0]), R2D_HI, TESTREG(rad2deg))

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
REAL_ROW1(tanpi, GENR(tanpi, x[0])(x[0]), GENR(pimul, x[0])(1 + Y[0] * Y[0]), TESTREG(tanpi),
          .notes = "exact zeros at integers, ±inf at half-integers")

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
REAL_ROW1(mod2pi, GENR(mod2pi, x[0])(x[0]), 1, TESTREG(mod2pi),
          .notes = "in [0, 2 pi); derivative 1, also at the jumps (ChainRules); "
                   "|x| < 2^50 (NaN beyond)")

/* rem2pi(x, mode): (1, 0); the mode is a CR_ROUND_* value (an integer gets NoTangent) */
static const double rem2pi_lo[] = {-3.0, 0.0}, rem2pi_hi[] = {3.0, 0.3};
static const double rem2pi_pts[] = {100.3, 1.0, -100.3, 1.0,  7.0, 2.0,       -7.0,
                                    2.0,   7.0, 3.0,    -7.0, 3.0, 1e6 + 0.5, 0.0};
REAL_ROW(rem2pi, 2, Y[0] = GENR(rem2pi, x[0])(x[0], x[1]), D[0] = 1;
         D[1] = 0, TESTREG(rem2pi),
         .notes =
             "mode CR_ROUND_NEAREST (0, result in [-pi, pi]), _TO_ZERO (1), _DOWN (2), _UP (3); "
             "derivative 1 in x (ChainRules), 0 in the mode; |x| < 2^50")
