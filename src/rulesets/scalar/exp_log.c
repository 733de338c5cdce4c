/*
 * The exponential rows of the math family: exp, log, sqrt, exp2, exp10, expm1, log2, log10,
 * log1p, log(b, x), pow, cbrt, and the error and gamma functions of <math.h> (erf, erfc,
 * tgamma, lgamma; digamma is shared with the special functions). Each rule's comment gives
 * its derivative and how the row keeps its accuracy (docs/rules-scalar.md). Last, the ML
 * scalars of Julia's LogExpFunctions: logistic (sigmoid), log1pexp (softplus), logaddexp,
 * xlogy, xlog1py and relu, each written to stay accurate where the textbook formula
 * overflows or cancels.
 */
/* lgamma_r, the reentrant lgamma, is a POSIX/BSD extension of the C library. */
#define _DEFAULT_SOURCE 1

#include "math_impl.h"

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

LIBM_DF(exp2)

LIBM_DF(log2)

LIBM_DF(log10)

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
    return cr__c(expm1(x) * cos(y) - 2 * s * s, exp(x) * sin(y));
}

LIBM_DF(expm1)

/* log1p(z): the imaginary part is arg(1 + z); near z = 0 the real part log|1 + z| is
 * log1p(x(2 + x) + y²)/2, which keeps its relative accuracy. */
static cr_complex log1p_c(cr_complex z)
{
    double x = creal(z), y = cimag(z), re;
    if (fabs(x) < 0.5 && fabs(y) < 0.5)
        re = 0.5 * log1p(x * (2 + x) + y * y);
    else
        re = log(hypot(1 + x, y));
    return cr__c(re, atan2(y, 1 + x));
}

LIBM_DF(log1p)

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
    cr__sincospi(x, &s, &c);
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

LIBM_DF(tgamma)

/* ---- Exponentials and logarithms ---- */

/* exp(x): Ω */
static const double exp_lo[] = {-3}, exp_hi[] = {3};
static const double exp_pts[] = {-745, -708.5, 1e-300, 0.5, 709.7};
ROW1(exp, exp(x[0]), Y[0], TESTREG(exp))

/* log(x): 1/x */
static const double pos_lo[] = {0.05}, pos_hi[] = {4.0};
static const double log_pts[] = {1e-310, 1 + 0x1p-52, 1e300, 0.999999, 0x1p-1074};
ROW1(log, log(x[0]), 1 / x[0],
     .test = {.lo = pos_lo, .hi = pos_hi, .npoints = NPTS(log_pts, 1), .points = log_pts},
     .notes = "x > 0 for real x")

/* sqrt(x): 1/(2Ω). Adding 0 turns Ω = -0 (sqrt(-0)) into +0, so the derivative is +inf at
 * both signed zeros. */
static const double sqrt_pts[] = {1e-310, 1e300, 0x1p-1074, 2.0, 1.7e308};
ROW1(sqrt, sqrt(x[0]), 1 / (2 * Y[0] + 0),
     .test = {.lo = pos_lo, .hi = pos_hi, .npoints = NPTS(sqrt_pts, 1), .points = sqrt_pts},
     .notes = "x >= 0 for real x; the derivative at ±0 is +inf")

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
ROW1(expm1, GEN(expm1, x[0])(x[0]), exp(x[0]), TESTREG(expm1))

/* log2(x): 1/(x log 2) */
static const double log2_pts[] = {1e-310, 1e300, 1 + 0x1p-52, 0.75};
ROW1(log2, GEN(log2, x[0])(x[0]), (1 / LN2) / x[0],
     .test = {.lo = pos_lo, .hi = pos_hi, .npoints = NPTS(log2_pts, 1), .points = log2_pts},
     .notes = "x > 0 for real x")

/* log10(x): 1/(x log 10) */
static const double log10_pts[] = {1e-310, 1e300, 1 + 0x1p-52, 0.75};
ROW1(log10, GEN(log10, x[0])(x[0]), (1 / LN10) / x[0],
     .test = {.lo = pos_lo, .hi = pos_hi, .npoints = NPTS(log10_pts, 1), .points = log10_pts},
     .notes = "x > 0 for real x")

/* log1p(x): 1/(1 + x); 1 + x is exact near -1 */
static const double log1p_lo[] = {-0.9}, log1p_hi[] = {3};
static const double log1p_pts[] = {-0.999999999, -0x1.fffffffffffffp-1, 1e-300, 1e300};
ROW1(log1p, GEN(log1p, x[0])(x[0]), 1 / (1 + x[0]), TESTREG(log1p), .notes = "x > -1 for real x")

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
REAL_ROW1(cbrt, cbrt(x[0]), 1 / (3 * Y[0] * Y[0]), TESTREG(cbrt),
          .notes = "derivative +inf at x = ±0")

/* erf(x): (2/sqrt(pi)) exp(-x²), with x² split exactly (see derf_d) */
static const double erf_lo[] = {-3}, erf_hi[] = {3};
static const double erf_pts[] = {5, 26, -26.5, 1e-300, 0.5};
REAL_ROW1(erf, erf(x[0]), GENR(derf, x[0])(x[0]), TESTREG(erf))

/* erfc(x): -(2/sqrt(pi)) exp(-x²) */
static const double erfc_lo[] = {-3}, erfc_hi[] = {3};
static const double erfc_pts[] = {5, 26, -26.5, 1e-300, 27.2};
REAL_ROW1(erfc, erfc(x[0]), -GENR(derf, x[0])(x[0]), TESTREG(erfc))

/* tgamma(x): Ω digamma(x); the sign of Ω carries over at negative non-integers */
static const double tgamma_lo[] = {0.2}, tgamma_hi[] = {4};
static const double tgamma_pts[] = {-0.5, -1.5, -2.5,   -3.7,  0x1.762d86356be3fp+0,
                                    0.7,  2.2,  -170.3, 171.5, 1e-5};
REAL_ROW1(tgamma, GENR(tgamma, x[0])(x[0]), Y[0] * GENR(digamma, x[0])(x[0]), TESTREG(tgamma),
          .notes = "poles at 0, -1, -2, ... (NaN derivative there)")

/* lgamma(x) = log|Γ(x)|: digamma(x), also at negative non-integers */
static const double lgamma_lo[] = {0.2}, lgamma_hi[] = {4};
static const double lgamma_pts[] = {-0.5,  -1.5, -2.5, -3.7,  0x1.762d86356be3fp+0, 1e5, 2.0, 1.0,
                                    1e300, 9.99, 10.0, 1e-300};
REAL_ROW1(lgamma, GENR(lgamma, x[0])(x[0]), GENR(digamma, x[0])(x[0]), TESTREG(lgamma),
          .notes = "log|Γ(x)|; poles at 0, -1, -2, ... (NaN derivative there)")

/* log_base(b, x) = log(x)/log(b) (Julia's log(b, x)): -Ω/(b log b), 1/(x log b) */
static const double log_base_lo[] = {1.5, 0.2}, log_base_hi[] = {6.0, 6.0};
static const double log_base_pts[] = {2.0, 8.0, 10.0, 1e-300, 0.5, 3.0, 1e300, 7.0};
CR_SCALAR_EVALS(log_base, 2, 1, Y[0] = log(x[1]) / log(x[0]), D[0] = -Y[0] / (x[0] * log(x[0]));
                D[1] = 1 / (x[1] * log(x[0])))
static const cr_scalar_rule log_base_row =
    CR_SCALAR_ROW_EX(log_base, TESTREG(log_base),
                     .notes = "Julia's log(b, x); b, x > 0 and b != 1 for real arguments");
DEFINE_FN(log_base, "log_base", 2)

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

/* ---- LogExpFunctions ---- */

/* logistic(x) = 1/(1 + e^-x): logistic(x) logistic(-x) (not Ω(1 - Ω), which rounds to 0) */
static const double ml_lo[] = {-3}, ml_hi[] = {3};
/* The test registration of logistic, log1pexp and their other names: [-3, 3] and the hard
 * points PTS. */
#define ML_TEST(PTS) .test = {.lo = ml_lo, .hi = ml_hi, .npoints = NPTS(PTS, 1), .points = PTS}
static const double logistic_pts[] = {40, -40, 700, -745, 1e-300, 0.5};
REAL_ROW1(logistic, GENR(logistic, x[0])(x[0]), GENR(dlogistic, x[0])(x[0]), ML_TEST(logistic_pts))

/* sigmoid: another name of logistic */
ALIAS_ROW(sigmoid, logistic, 1, "another name of logistic", ML_TEST(logistic_pts))
DEFINE_FN(sigmoid, "sigmoid", 1)

/* log1pexp(x) = log(1 + e^x): logistic(x) */
static const double log1pexp_pts[] = {40, -40, 800, -745, 1e-300, 18.5};
REAL_ROW1(log1pexp, GENR(log1pexp, x[0])(x[0]), GENR(logistic, x[0])(x[0]), ML_TEST(log1pexp_pts))

/* softplus: another name of log1pexp */
ALIAS_ROW(softplus, log1pexp, 1, "another name of log1pexp", ML_TEST(log1pexp_pts))
DEFINE_FN(softplus, "softplus", 1)

/* logaddexp(x, y) = log(e^x + e^y): (logistic(x - y), logistic(y - x)) */
static const double logaddexp_lo[] = {-3, -3}, logaddexp_hi[] = {3, 3};
static const double logaddexp_pts[] = {-1000, 0, 0.1,   700.3, -700, -745,
                                       3,     3, -30.7, 5.2,   1e10, 1e10 + 1};
REAL_ROW(logaddexp, 2, Y[0] = GENR(logaddexp, x[0])(x[0], x[1]),
         D[0] = GENR(dlogaddexp, x[0])(x[0], x[1]);
         D[1] = GENR(dlogaddexp, x[0])(x[1], x[0]), TESTREG(logaddexp),
         .notes = "(1/2, 1/2) at x == y, also for equal infinities")

/* xlogy(x, y) = x log(y), 0 when x == 0: (log y, x/y), with ∂/∂y = 0 at x == 0 */
static const double xlogy_lo[] = {-3, 0.1}, xlogy_hi[] = {3, 4};
static const double xlogy_pts[] = {2, 1e-300, 1e-300, 1e300, -3, 1 + 0x1p-52};
REAL_ROW(xlogy, 2, Y[0] = x[0] == 0 && !isnan(x[1]) ? 0 : x[0] * log(x[1]), D[0] = log(x[1]);
         D[1] = x[0] == 0 ? 0 : x[0] / x[1], TESTREG(xlogy),
         .notes = "y > 0; at x == 0: Ω = 0 and ∂/∂y = 0 (a strong zero: xlogy(0, y) is 0 for "
                  "every y), ∂/∂x = log y (-inf at y = 0)")

/* xlog1py(x, y) = x log1p(y), 0 when x == 0: (log1p y, x/(1 + y)) */
static const double xlog1py_lo[] = {-3, -0.9}, xlog1py_hi[] = {3, 3};
static const double xlog1py_pts[] = {2, 1e-300, 1e-300, 1e300, -3, -0.999999999};
REAL_ROW(xlog1py, 2, Y[0] = x[0] == 0 && !isnan(x[1]) ? 0 : x[0] * GENR(log1p, x[1])(x[1]),
         D[0] = GENR(log1p, x[1])(x[1]);
         D[1] = x[0] == 0 ? 0 : x[0] / (1 + x[1]), TESTREG(xlog1py),
         .notes = "y > -1; at x == 0: Ω = 0 and ∂/∂y = 0 (as xlogy)")

/* relu(x) = max(x, 0): 1 if x > 0, else 0 (also at 0) */
static const double relu_lo[] = {0.1}, relu_hi[] = {3};
static const double relu_pts[] = {-1, 1e300, -1e-300, 0x1p-1074};
REAL_ROW1(relu,
          x[0] > 0       ? x[0]
          : x[0] == x[0] ? 0
                         : x[0],
          x[0] > 0 ? 1 : 0, TESTREG(relu),
          .notes = "derivative 0 at the kink x = 0; relu(NaN) = NaN")
