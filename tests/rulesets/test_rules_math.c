/*
 * Tests of the math rule family (rules_math.h: src/rulesets/scalar/: arith.c, math.c and the files
 * it registers).
 *
 * For every rule, at its registered sampling box (random points) and hard points:
 *   - frule and the pullback against finite differences of the primal (chainrules/fd.h),
 *     never against the derivative formulas of the rules;
 *   - frule and rrule agree (both come from the same partials: exactly);
 *   - an all-float call keeps float values and tangents;
 *   - at the hard points, an independent check with MPFR: the derivative as a central
 *     difference of MPFR's own functions at 256+ bits with a step of ~2^-100, rounded to
 *     double (and to float), must be within a few ulps of the rule's.
 * Holomorphic rows are checked at complex points as maps R^2 -> R^2 (ChainRules'
 * convention). The conventions at kinks and jumps, integer arguments, variadic rules and
 * the non-differentiable declarations have their own tests. The largest ulp errors are
 * printed as a table at the end.
 */
#include <float.h>
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

#ifdef CR_HAVE_MPFR
#include <mpfr.h>
#define MPFR_ON 1
#else
#define MPFR_ON 0
#endif

/* ---- Fixture and small helpers ------------------------------------------------------------- */

typedef struct fixture {
    cr_ctx *ctx;
    cr_arena *arena;
} fixture;

static fixture g_fx;

static int group_setup(void **state)
{
    (void)state;
    if (cr_ctx_new(NULL, &g_fx.ctx) != CR_OK || cr_arena_new(g_fx.ctx, NULL, &g_fx.arena) != CR_OK)
        return -1;
    /* Debug mode: every cotangent is checked against its argument's projection. */
    cr_ctx_set_debug(g_fx.ctx, true);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    cr_arena_free(g_fx.arena);
    cr_ctx_free(g_fx.ctx);
    return 0;
}

static cr_complex mkc(double re, double im)
{
    double p[2] = {re, im};
    cr_complex z;
    memcpy(&z, p, sizeof z);
    return z;
}

#define NAN64 ((double)NAN)
#define K_PI  3.141592653589793238462643383279502884
#define INF64 ((double)INFINITY)

/* Both NaN, or equal (infinities included). */
static bool same(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

#define ASSERT_SAME(got, want)                                         \
    do {                                                               \
        double g_ = (got), w_ = (want);                                \
        if (!same(g_, w_)) {                                           \
            print_error("%s = %.17g, expected %.17g\n", #got, g_, w_); \
            fail();                                                    \
        }                                                              \
    } while (0)

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static double uniform(double lo, double hi)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * ((double)(g_rng >> 11) * 0x1p-53);
}

/* ---- The cases: every function of the family, its MPFR twin and tolerances ------------------ */

#ifdef CR_HAVE_MPFR
#define R MPFR_RNDN
/* y = f(x) (output k of a tuple), at the precision of y. */
typedef void (*mp_fn)(mpfr_ptr y, mpfr_ptr *x, int k);
#define MP(name) mp_##name
#define MP1(name, ...)                                    \
    static void mp_##name(mpfr_ptr y, mpfr_ptr *x, int k) \
    {                                                     \
        (void)k;                                          \
        __VA_ARGS__;                                      \
    }
/* With a temporary t at the precision of y. */
#define MPT(name, ...)                                    \
    static void mp_##name(mpfr_ptr y, mpfr_ptr *x, int k) \
    {                                                     \
        (void)k;                                          \
        mpfr_t t;                                         \
        mpfr_init2(t, mpfr_get_prec(y));                  \
        __VA_ARGS__;                                      \
        mpfr_clear(t);                                    \
    }

MP1(add, mpfr_add(y, x[0], x[1], R))
MP1(sub, mpfr_sub(y, x[0], x[1], R))
MP1(mul, mpfr_mul(y, x[0], x[1], R))
MP1(div, mpfr_div(y, x[0], x[1], R))
MP1(neg, mpfr_neg(y, x[0], R))
MP1(identity, mpfr_set(y, x[0], R))
MP1(inv, mpfr_ui_div(y, 1, x[0], R))
MP1(square, mpfr_sqr(y, x[0], R))
MPT(cube, mpfr_sqr(t, x[0], R); mpfr_mul(y, t, x[0], R))
MP1(sign, mpfr_set_si(y, mpfr_sgn(x[0]), R))
MPT(muladd, mpfr_mul(t, x[0], x[1], R); mpfr_add(y, t, x[2], R))
MP1(fma, mpfr_fma(y, x[0], x[1], x[2], R))
MP1(clamp, mpfr_set(y, mpfr_cmp(x[0], x[2]) > 0 ? x[2] : mpfr_cmp(x[0], x[1]) < 0 ? x[1] : x[0], R))
MP1(max, mpfr_max(y, x[0], x[1], R))
MP1(min, mpfr_min(y, x[0], x[1], R))
MP1(sin, mpfr_sin(y, x[0], R))
MP1(cos, mpfr_cos(y, x[0], R))
MP1(tan, mpfr_tan(y, x[0], R))
MP1(sincos, k == 0 ? mpfr_sin(y, x[0], R) : mpfr_cos(y, x[0], R))
MP1(asin, mpfr_asin(y, x[0], R))
MP1(acos, mpfr_acos(y, x[0], R))
MP1(atan, mpfr_atan(y, x[0], R))
MP1(atan2, mpfr_atan2(y, x[0], x[1], R))
MP1(sec, mpfr_sec(y, x[0], R))
MP1(csc, mpfr_csc(y, x[0], R))
MP1(cot, mpfr_cot(y, x[0], R))
MPT(asec, mpfr_ui_div(t, 1, x[0], R); mpfr_acos(y, t, R))
MPT(acsc, mpfr_ui_div(t, 1, x[0], R); mpfr_asin(y, t, R))
MPT(acot, mpfr_ui_div(t, 1, x[0], R); mpfr_atan(y, t, R))
MP1(sinh, mpfr_sinh(y, x[0], R))
MP1(cosh, mpfr_cosh(y, x[0], R))
MP1(tanh, mpfr_tanh(y, x[0], R))
MP1(asinh, mpfr_asinh(y, x[0], R))
MP1(acosh, mpfr_acosh(y, x[0], R))
MP1(atanh, mpfr_atanh(y, x[0], R))
MP1(sech, mpfr_sech(y, x[0], R))
MP1(csch, mpfr_csch(y, x[0], R))
MP1(coth, mpfr_coth(y, x[0], R))
MPT(asech, mpfr_ui_div(t, 1, x[0], R); mpfr_acosh(y, t, R))
MPT(acsch, mpfr_ui_div(t, 1, x[0], R); mpfr_asinh(y, t, R))
MPT(acoth, mpfr_ui_div(t, 1, x[0], R); mpfr_atanh(y, t, R))
MP1(sinpi, mpfr_sinpi(y, x[0], R))
MP1(cospi, mpfr_cospi(y, x[0], R))
MP1(sincospi, k == 0 ? mpfr_sinpi(y, x[0], R) : mpfr_cospi(y, x[0], R))
MPT(
    sinc, if (mpfr_zero_p(x[0])) mpfr_set_ui(y, 1, R); else {
        mpfr_sinpi(y, x[0], R);
        mpfr_const_pi(t, R);
        mpfr_mul(t, t, x[0], R);
        mpfr_div(y, y, t, R);
    })
MP1(sind, mpfr_sinu(y, x[0], 360, R))
MP1(cosd, mpfr_cosu(y, x[0], 360, R))
MP1(tand, mpfr_tanu(y, x[0], 360, R))
MPT(secd, mpfr_cosu(t, x[0], 360, R); mpfr_ui_div(y, 1, t, R))
MPT(cscd, mpfr_sinu(t, x[0], 360, R); mpfr_ui_div(y, 1, t, R))
MPT(cotd, mpfr_tanu(t, x[0], 360, R); mpfr_ui_div(y, 1, t, R))
MP1(asind, mpfr_asinu(y, x[0], 360, R))
MP1(acosd, mpfr_acosu(y, x[0], 360, R))
MP1(atand, mpfr_atanu(y, x[0], 360, R))
MPT(asecd, mpfr_ui_div(t, 1, x[0], R); mpfr_acosu(y, t, 360, R))
MPT(acscd, mpfr_ui_div(t, 1, x[0], R); mpfr_asinu(y, t, 360, R))
MPT(acotd, mpfr_ui_div(t, 1, x[0], R); mpfr_atanu(y, t, 360, R))
MPT(deg2rad, mpfr_const_pi(t, R); mpfr_mul(y, x[0], t, R); mpfr_div_ui(y, y, 180, R))
MPT(rad2deg, mpfr_const_pi(t, R); mpfr_mul_ui(y, x[0], 180, R); mpfr_div(y, y, t, R))
MP1(exp, mpfr_exp(y, x[0], R))
MP1(exp2, mpfr_exp2(y, x[0], R))
MP1(exp10, mpfr_exp10(y, x[0], R))
MP1(expm1, mpfr_expm1(y, x[0], R))
MP1(log, mpfr_log(y, x[0], R))
MP1(log2, mpfr_log2(y, x[0], R))
MP1(log10, mpfr_log10(y, x[0], R))
MP1(log1p, mpfr_log1p(y, x[0], R))
MP1(pow, mpfr_pow(y, x[0], x[1], R))
MP1(sqrt, mpfr_sqrt(y, x[0], R))
MP1(cbrt, mpfr_cbrt(y, x[0], R))
MP1(hypot, mpfr_hypot(y, x[0], x[1], R))
MPT(
    hypot4, mpfr_sqr(y, x[0], R); for (int i = 1; i < 4; i++) {
        mpfr_sqr(t, x[i], R);
        mpfr_add(y, y, t, R);
    } mpfr_sqrt(y, y, R))
MP1(erf, mpfr_erf(y, x[0], R))
MP1(erfc, mpfr_erfc(y, x[0], R))
MP1(tgamma, mpfr_gamma(y, x[0], R))
MPT(lgamma, int s; mpfr_lgamma(y, &s, x[0], R))
MP1(fmod, mpfr_fmod(y, x[0], x[1], R))
MP1(remainder, mpfr_remainder(y, x[0], x[1], R))
MP1(remquo, mpfr_remainder(y, x[0], x[1], R))
MP1(mod, mpfr_fmod(y, x[0], x[1], R);
    if (!mpfr_zero_p(y) && mpfr_sgn(y) * mpfr_sgn(x[1]) < 0) mpfr_add(y, y, x[1], R))
MPT(fdim, mpfr_sub(t, x[0], x[1], R); if (mpfr_sgn(t) > 0) mpfr_set(y, t, R);
    else mpfr_set_ui(y, 0, R))
MP1(fmax, mpfr_max(y, x[0], x[1], R))
MP1(fmin, mpfr_min(y, x[0], x[1], R))
MP1(copysign, mpfr_copysign(y, x[0], x[1], R))
MP1(fabs, mpfr_abs(y, x[0], R))
MP1(ldexp, mpfr_mul_2si(y, x[0], mpfr_get_si(x[1], R), R))
MPT(modf, if (k == 0) mpfr_modf(t, y, x[0], R); else mpfr_modf(y, t, x[0], R))
MP1(frexp, mpfr_set(y, x[0], R); if (!mpfr_zero_p(y)) mpfr_set_exp(y, 0))
MPT(logistic, mpfr_neg(t, x[0], R); mpfr_exp(t, t, R); mpfr_add_ui(t, t, 1, R);
    mpfr_ui_div(y, 1, t, R))
MP1(log1pexp, mpfr_exp(y, x[0], R); mpfr_log1p(y, y, R))
/* max + log1p(exp(min - max)): every step keeps its relative accuracy. */
MPT(logaddexp, mpfr_ptr hi = mpfr_cmp(x[0], x[1]) >= 0 ? x[0] : x[1];
    mpfr_ptr lo = hi == x[0] ? x[1] : x[0]; mpfr_sub(t, lo, hi, R); mpfr_exp(t, t, R);
    mpfr_log1p(t, t, R); mpfr_add(y, hi, t, R))
MP1(xlogy, mpfr_log(y, x[1], R); mpfr_mul(y, y, x[0], R))
MP1(xlog1py, mpfr_log1p(y, x[1], R); mpfr_mul(y, y, x[0], R))
MP1(relu, if (mpfr_sgn(x[0]) > 0) mpfr_set(y, x[0], R); else mpfr_set_ui(y, 0, R))
MP1(evalpoly3, mpfr_fma(y, x[2], x[0], x[1], R))
#else
#define MP(name) NULL
typedef void *mp_fn;
#endif

typedef struct mcase {
    const char *name;    /* registry name */
    const cr_value *fn;  /* the function value of rules_math.h */
    mp_fn mp;            /* MPFR twin of the primal (NULL: none) */
    mp_fn mp_var;        /* MPFR twin of the variadic rule's registration arity */
    unsigned intargs;    /* bit j: argument j is an integer parameter */
    double ulp64, ulp32; /* ulp tolerances at the hard points (0: the defaults) */
} mcase;

#define DEFAULT_ULP64 4.0
#define DEFAULT_ULP32 4.0

static const mcase k_cases[] = {
    {"+", &cr_fn_add, MP(add), NULL, 0, 0, 0},
    {"-", &cr_fn_sub, MP(sub), NULL, 0, 0, 0},
    {"*", &cr_fn_mul, MP(mul), NULL, 0, 0, 0},
    {"/", &cr_fn_div, MP(div), NULL, 0, 0, 0},
    {"neg", &cr_fn_neg, MP(neg), NULL, 0, 0, 0},
    {"identity", &cr_fn_identity, MP(identity), NULL, 0, 0, 0},
    {"inv", &cr_fn_inv, MP(inv), NULL, 0, 0, 0},
    {"square", &cr_fn_square, MP(square), NULL, 0, 0, 0},
    {"cube", &cr_fn_cube, MP(cube), NULL, 0, 0, 0},
    {"sign", &cr_fn_sign, MP(sign), NULL, 0, 0, 0},
    {"muladd", &cr_fn_muladd, MP(muladd), NULL, 0, 0, 0},
    {"clamp", &cr_fn_clamp, MP(clamp), NULL, 0, 0, 0},
    {"max", &cr_fn_max, MP(max), NULL, 0, 0, 0},
    {"min", &cr_fn_min, MP(min), NULL, 0, 0, 0},
    {"evalpoly", &cr_fn_evalpoly, NULL, MP(evalpoly3), 0, 0, 0},
    {"sin", &cr_fn_sin, MP(sin), NULL, 0, 0, 0},
    {"cos", &cr_fn_cos, MP(cos), NULL, 0, 0, 0},
    {"tan", &cr_fn_tan, MP(tan), NULL, 0, 0, 0},
    {"sincos", &cr_fn_sincos, MP(sincos), NULL, 0, 0, 0},
    {"asin", &cr_fn_asin, MP(asin), NULL, 0, 0, 0},
    {"acos", &cr_fn_acos, MP(acos), NULL, 0, 0, 0},
    {"atan", &cr_fn_atan, MP(atan), NULL, 0, 0, 0},
    {"atan2", &cr_fn_atan2, MP(atan2), NULL, 0, 0, 0},
    {"sec", &cr_fn_sec, MP(sec), NULL, 0, 0, 0},
    {"csc", &cr_fn_csc, MP(csc), NULL, 0, 0, 0},
    {"cot", &cr_fn_cot, MP(cot), NULL, 0, 0, 0},
    {"asec", &cr_fn_asec, MP(asec), NULL, 0, 0, 0},
    {"acsc", &cr_fn_acsc, MP(acsc), NULL, 0, 0, 0},
    {"acot", &cr_fn_acot, MP(acot), NULL, 0, 0, 0},
    {"sinh", &cr_fn_sinh, MP(sinh), NULL, 0, 0, 0},
    {"cosh", &cr_fn_cosh, MP(cosh), NULL, 0, 0, 0},
    {"tanh", &cr_fn_tanh, MP(tanh), NULL, 0, 0, 0},
    {"asinh", &cr_fn_asinh, MP(asinh), NULL, 0, 0, 0},
    {"acosh", &cr_fn_acosh, MP(acosh), NULL, 0, 0, 0},
    {"atanh", &cr_fn_atanh, MP(atanh), NULL, 0, 0, 0},
    {"sech", &cr_fn_sech, MP(sech), NULL, 0, 0, 0},
    {"csch", &cr_fn_csch, MP(csch), NULL, 0, 0, 0},
    {"coth", &cr_fn_coth, MP(coth), NULL, 0, 0, 0},
    {"asech", &cr_fn_asech, MP(asech), NULL, 0, 0, 0},
    {"acsch", &cr_fn_acsch, MP(acsch), NULL, 0, 0, 0},
    {"acoth", &cr_fn_acoth, MP(acoth), NULL, 0, 0, 0},
    {"sinpi", &cr_fn_sinpi, MP(sinpi), NULL, 0, 0, 0},
    {"cospi", &cr_fn_cospi, MP(cospi), NULL, 0, 0, 0},
    {"sincospi", &cr_fn_sincospi, MP(sincospi), NULL, 0, 0, 0},
    {"sinc", &cr_fn_sinc, MP(sinc), NULL, 0, 0, 0},
    {"sind", &cr_fn_sind, MP(sind), NULL, 0, 0, 0},
    {"cosd", &cr_fn_cosd, MP(cosd), NULL, 0, 0, 0},
    {"tand", &cr_fn_tand, MP(tand), NULL, 0, 0, 0},
    {"secd", &cr_fn_secd, MP(secd), NULL, 0, 0, 0},
    {"cscd", &cr_fn_cscd, MP(cscd), NULL, 0, 0, 0},
    {"cotd", &cr_fn_cotd, MP(cotd), NULL, 0, 0, 0},
    {"asind", &cr_fn_asind, MP(asind), NULL, 0, 0, 0},
    {"acosd", &cr_fn_acosd, MP(acosd), NULL, 0, 0, 0},
    {"atand", &cr_fn_atand, MP(atand), NULL, 0, 0, 0},
    {"asecd", &cr_fn_asecd, MP(asecd), NULL, 0, 0, 0},
    {"acscd", &cr_fn_acscd, MP(acscd), NULL, 0, 0, 0},
    {"acotd", &cr_fn_acotd, MP(acotd), NULL, 0, 0, 0},
    {"deg2rad", &cr_fn_deg2rad, MP(deg2rad), NULL, 0, 0, 0},
    {"rad2deg", &cr_fn_rad2deg, MP(rad2deg), NULL, 0, 0, 0},
    {"exp", &cr_fn_exp, MP(exp), NULL, 0, 0, 0},
    {"exp2", &cr_fn_exp2, MP(exp2), NULL, 0, 0, 0},
    {"exp10", &cr_fn_exp10, MP(exp10), NULL, 0, 0, 0},
    {"expm1", &cr_fn_expm1, MP(expm1), NULL, 0, 0, 0},
    {"log", &cr_fn_log, MP(log), NULL, 0, 0, 0},
    {"log2", &cr_fn_log2, MP(log2), NULL, 0, 0, 0},
    {"log10", &cr_fn_log10, MP(log10), NULL, 0, 0, 0},
    {"log1p", &cr_fn_log1p, MP(log1p), NULL, 0, 0, 0},
    {"pow", &cr_fn_pow, MP(pow), NULL, 0, 0, 0},
    {"sqrt", &cr_fn_sqrt, MP(sqrt), NULL, 0, 0, 0},
    {"cbrt", &cr_fn_cbrt, MP(cbrt), NULL, 0, 0, 0},
    {"hypot", &cr_fn_hypot, MP(hypot), MP(hypot4), 0, 0, 0},
    {"erf", &cr_fn_erf, MP(erf), NULL, 0, 0, 0},
    {"erfc", &cr_fn_erfc, MP(erfc), NULL, 0, 0, 0},
    {"tgamma", &cr_fn_tgamma, MP(tgamma), NULL, 0, 0, 0},
    {"lgamma", &cr_fn_lgamma, MP(lgamma), NULL, 0, 0, 0},
    {"fma", &cr_fn_fma, MP(fma), NULL, 0, 0, 0},
    {"fmod", &cr_fn_fmod, MP(fmod), NULL, 0, 0, 0},
    {"rem", &cr_fn_rem, MP(fmod), NULL, 0, 0, 0},
    {"remainder", &cr_fn_remainder, MP(remainder), NULL, 0, 0, 0},
    {"remquo", &cr_fn_remquo, MP(remquo), NULL, 0, 0, 0},
    {"mod", &cr_fn_mod, MP(mod), NULL, 0, 0, 0},
    {"fdim", &cr_fn_fdim, MP(fdim), NULL, 0, 0, 0},
    {"fmax", &cr_fn_fmax, MP(fmax), NULL, 0, 0, 0},
    {"fmin", &cr_fn_fmin, MP(fmin), NULL, 0, 0, 0},
    {"copysign", &cr_fn_copysign, MP(copysign), NULL, 0, 0, 0},
    {"fabs", &cr_fn_fabs, MP(fabs), NULL, 0, 0, 0},
    {"ldexp", &cr_fn_ldexp, MP(ldexp), NULL, 2, 0, 0},
    {"scalbn", &cr_fn_scalbn, MP(ldexp), NULL, 2, 0, 0},
    {"scalbln", &cr_fn_scalbln, MP(ldexp), NULL, 2, 0, 0},
    {"frexp", &cr_fn_frexp, MP(frexp), NULL, 0, 0, 0},
    {"modf", &cr_fn_modf, MP(modf), NULL, 0, 0, 0},
    {"logistic", &cr_fn_logistic, MP(logistic), NULL, 0, 0, 0},
    {"sigmoid", &cr_fn_sigmoid, MP(logistic), NULL, 0, 0, 0},
    {"log1pexp", &cr_fn_log1pexp, MP(log1pexp), NULL, 0, 0, 0},
    {"softplus", &cr_fn_softplus, MP(log1pexp), NULL, 0, 0, 0},
    {"logaddexp", &cr_fn_logaddexp, MP(logaddexp), NULL, 0, 0, 0},
    {"xlogy", &cr_fn_xlogy, MP(xlogy), NULL, 0, 0, 0},
    {"xlog1py", &cr_fn_xlog1py, MP(xlog1py), NULL, 0, 0, 0},
    {"relu", &cr_fn_relu, MP(relu), NULL, 0, 0, 0},
};

#define NCASES (sizeof k_cases / sizeof k_cases[0])

/* Largest ulp errors seen at hard points, per case (for the summary table). */
typedef struct worst {
    double u64, u32;
    double x64[4], x32[4];
    size_t n;
    int checked64, checked32;
    int fd_skipped; /* hard-point partials finite differences could not resolve */
} worst;

static worst g_worst[NCASES];

/* ---- Evaluating the primal and the rules at real points ------------------------------------ */

#define MAXA 8
#define MAXO 4

/* The argument values for coordinates x: f64 (or f32), integer parameters as ints. */
static void make_args(const double *x, size_t n, unsigned intargs, bool f32, cr_value *args)
{
    for (size_t j = 0; j < n; j++) {
        if (intargs & (1u << j))
            args[j] = cr_value_i64((int64_t)x[j]);
        else if (f32)
            args[j] = cr_value_f32((float)x[j]);
        else
            args[j] = cr_value_f64(x[j]);
    }
}

/* The real outputs of a value (a scalar, or the fields of a tuple); int fields are
 * marked not real. */
static size_t outputs_of(const cr_value *y, double *out, bool *real)
{
    if (y->kind != CR_KIND_STRUCT) {
        out[0] = y->kind == CR_KIND_F32 ? (double)y->u.f32 : y->u.f64;
        real[0] = y->kind == CR_KIND_F64 || y->kind == CR_KIND_F32;
        return 1;
    }
    size_t n = y->u.obj.type->nfields;
    for (size_t i = 0; i < n && i < MAXO; i++) {
        cr_value f;
        assert_int_equal(cr_type_field_value(y->u.obj.type, y->u.obj.ptr, i, &f), CR_OK);
        real[i] = f.kind == CR_KIND_F64 || f.kind == CR_KIND_F32;
        out[i] = f.kind == CR_KIND_F32 ? (double)f.u.f32 : real[i] ? f.u.f64 : 0;
    }
    return n;
}

static double tangent_real(cr_tangent t)
{
    switch ((cr_tag)t.tag) {
    case CR_TAN_ZERO:
        return 0;
    case CR_TAN_F64:
        return t.u.f64;
    case CR_TAN_F32:
        return (double)t.u.f32;
    default:
        print_error("expected a real tangent, got %s\n", cr_tag_name((cr_tag)t.tag));
        fail();
        return 0;
    }
}

/* x_j = x0 + s t: finite differences run in the scaled variable t, s the power of two at
 * the scale of the point, so that their absolute steps suit any magnitude. */
typedef struct fd_env {
    const cr_value *fn;
    double x[MAXA];
    size_t n, j, k;
    unsigned intargs;
    double x0, s;
} fd_env;

static cr_status fd_fn(double t, double *y, void *envp)
{
    fd_env *e = envp;
    double x[MAXA], out[MAXO];
    bool real[MAXO];
    cr_value args[MAXA], v;
    memcpy(x, e->x, sizeof x);
    x[e->j] = e->x0 + e->s * t;
    make_args(x, e->n, e->intargs, false, args);
    cr_arena_mark m = cr_arena_get_mark(g_fx.arena);
    cr_status st = cr_function_call(g_fx.arena, e->fn, args, e->n, &v);
    if (st == CR_OK) {
        outputs_of(&v, out, real);
        *y = out[e->k];
    }
    cr_arena_rewind(g_fx.arena, m);
    return st;
}

/* One finite-difference estimate (in t) with evaluations within `range` of t = 0 (0: no
 * limit); the range is narrowed while the function is not finite (a domain edge). */
static cr_status fd_once(fd_env *e, double range, double *d, double *err)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    for (int attempt = 0; attempt<8; attempt++, range = range> 0 ? range * 1e-2 : 1e-2) {
        cr_fd_opts o = {0};
        o.max_range = range;
        double h;
        cr_status st = cr_fd_estimate_step(&m, &o, fd_fn, e, 0.0, &h, NULL);
        if (st == CR_EDOMAIN)
            continue;
        if (st != CR_OK)
            return st;
        /* A step below the spacing of the doubles at x0 cannot resolve the derivative
         * (sin(1e22)). */
        double u = nextafter(fabs(e->x0), INF64) - fabs(e->x0);
        if (h * e->s < 64 * u)
            return CR_EDOMAIN;
        st = cr_fd_derivative(&m, &o, fd_fn, e, 0.0, d, err);
        if (st != CR_EDOMAIN)
            return st;
    }
    return CR_EDOMAIN;
}

/*
 * ∂y_k/∂x_j by finite differences of the primal: central 5-point method with an adaptive
 * step, in the variable t of x_j = x_j + s t (s the power of two at the scale of the point:
 * |x_j|, or the smallest nonzero |x_i| when x_j = 0), evaluated no farther than 1e-3 s from
 * x_j, so that a pole or kink at 0 is not crossed at tiny x_j. A second estimate with a
 * 1000 times narrower range must agree with the first: where they disagree (a pole nearer
 * than the range, jumps denser than the doubles: fmod(1e17, y)), finite differences cannot
 * resolve the derivative and the function returns false; the hard points are then covered
 * by the MPFR check.
 */
static bool fd_partial(const cr_value *fn, const double *x, size_t n, unsigned intargs, size_t j,
                       size_t k, double *d, double *err)
{
    fd_env e = {.fn = fn, .n = n, .j = j, .k = k, .intargs = intargs, .x0 = x[j], .s = 1};
    memcpy(e.x, x, n * sizeof *x);
    double scale = fabs(x[j]);
    for (size_t i = 0; i < n && x[j] == 0; i++)
        if (x[i] != 0 && !(intargs & (1u << i)) && (scale == 0 || fabs(x[i]) < scale))
            scale = fabs(x[i]);
    if (scale > 0 && isfinite(scale))
        e.s = ldexp(1.0, ilogb(scale));
    double r = scale > 0 ? 1e-3 : 0, d2, err2;
    bool ok = fd_once(&e, r, d, err) == CR_OK;
    if (ok && fd_once(&e, r > 0 ? r * 1e-3 : 1e-6, &d2, &err2) == CR_OK) {
        double tol = 1e-6 * fmax(fabs(*d), fabs(d2)) + 8 * (*err + err2);
        ok = same(*d, d2) || fabs(*d - d2) <= tol;
        *err = fmax(*err, err2);
    }
    *d /= e.s;
    *err /= e.s;
    return ok;
}

/* frule along e_j (f32 arguments if f32): outputs' tangents into dy[k]. */
static size_t frule_unit(const cr_value *fn, const double *x, size_t n, unsigned intargs, bool f32,
                         size_t j, double *y, double *dy, bool *real)
{
    cr_value args[MAXA], v;
    cr_tangent dargs[MAXA + 1], t;
    make_args(x, n, intargs, f32, args);
    dargs[0] = cr_tangent_none();
    for (size_t i = 0; i < n; i++)
        dargs[i + 1] = i != j ? cr_tangent_zero()
                       : f32  ? cr_tangent_f32(1.0f)
                              : cr_tangent_f64(1.0);
    cr_status st = cr_frule(NULL, g_fx.arena, dargs, fn, args, n, &v, &t);
    if (st != CR_OK)
        print_error("frule %s: %s\n", fn->u.func.fn->name, cr_ctx_errmsg(g_fx.ctx));
    assert_int_equal(st, CR_OK);
    size_t nout = outputs_of(&v, y, real);
    cr_kind want = f32 ? CR_KIND_F32 : CR_KIND_F64;
    if (v.kind == CR_KIND_STRUCT) {
        assert_int_equal(t.tag, CR_TAN_STRUCT);
        for (size_t k = 0; k < nout; k++) {
            cr_tangent tk = cr_tangent_field(t, k);
            if (!real[k]) {
                assert_true(tk.tag == CR_TAN_NONE || tk.tag == CR_TAN_ZERO);
                continue;
            }
            assert_int_equal(v.u.obj.type->fields[k].kind, want);
            assert_int_equal(tk.tag, f32 ? CR_TAN_F32 : CR_TAN_F64);
            dy[k] = tangent_real(tk);
        }
    } else {
        assert_int_equal(v.kind, want);
        assert_int_equal(t.tag, f32 ? CR_TAN_F32 : CR_TAN_F64);
        dy[0] = tangent_real(t);
    }
    return nout;
}

/* The pullback of the unit seed on output k: cotangents dx[j]. */
static void rrule_unit(const cr_value *fn, const double *x, size_t n, unsigned intargs, bool f32,
                       size_t k, double *dx)
{
    cr_value args[MAXA], v;
    cr_pullback pb;
    cr_tangent seed, out[MAXA + 1];
    make_args(x, n, intargs, f32, args);
    cr_status st = cr_rrule(NULL, g_fx.arena, fn, args, n, &v, &pb);
    if (st != CR_OK)
        print_error("rrule %s: %s\n", fn->u.func.fn->name, cr_ctx_errmsg(g_fx.ctx));
    assert_int_equal(st, CR_OK);
    if (v.kind == CR_KIND_STRUCT) {
        size_t nout = v.u.obj.type->nfields;
        cr_tangent f[MAXO];
        for (size_t i = 0; i < nout; i++)
            f[i] = i != k ? cr_tangent_zero() : f32 ? cr_tangent_f32(1.0f) : cr_tangent_f64(1.0);
        assert_int_equal(cr_tangent_struct(g_fx.arena, v.u.obj.type, NULL, f, nout, &seed), CR_OK);
    } else {
        seed = f32 ? cr_tangent_f32(1.0f) : cr_tangent_f64(1.0);
    }
    st = cr_pullback_call(g_fx.arena, &pb, &seed, out, n + 1);
    if (st != CR_OK)
        print_error("pullback %s: %s\n", pb.name, cr_ctx_errmsg(g_fx.ctx));
    assert_int_equal(st, CR_OK);
    assert_int_equal(out[0].tag, CR_TAN_NONE);
    for (size_t j = 0; j < n; j++) {
        if (intargs & (1u << j)) {
            assert_int_equal(out[j + 1].tag, CR_TAN_NONE);
            dx[j] = 0;
            continue;
        }
        assert_int_equal(out[j + 1].tag, f32 ? CR_TAN_F32 : CR_TAN_F64);
        dx[j] = tangent_real(out[j + 1]);
    }
}

/* ---- MPFR derivatives ------------------------------------------------------------------------ */

#ifdef CR_HAVE_MPFR
static double ulps(double got, double want, bool f32)
{
    if (isnan(want))
        return isnan(got) ? 0 : INF64;
    if (got == want)
        return 0;
    if (isinf(want) || isinf(got) || isnan(got))
        return INF64;
    double u;
    if (f32)
        u = fabs(want) >= (double)FLT_MIN ? ldexp(1.0, ilogb(want) - 23) : 0x1p-149;
    else
        u = fabs(want) >= DBL_MIN ? ldexp(1.0, ilogb(want) - 52) : 0x1p-1074;
    return fabs(got - want) / u;
}

/* (f(x + h) - f(x - h))/2h for h = 2^eh in MPFR, the precision raised until at least 200
 * bits survive the cancellation (up to 40000 bits). */
static void mp_diff(mpfr_ptr out, mp_fn mp, const double *x, size_t n, size_t j, int k, long eh)
{
    int ex = x[j] == 0 ? (int)eh : ilogb(x[j]);
    mpfr_prec_t prec = 256 + (mpfr_prec_t)(ex - eh > 0 ? ex - eh : 0);
    for (;;) {
        mpfr_t X[MAXA], yp, ym, h;
        mpfr_ptr px[MAXA];
        for (size_t i = 0; i < n; i++) {
            mpfr_init2(X[i], prec);
            mpfr_set_d(X[i], x[i], R);
            px[i] = X[i];
        }
        mpfr_inits2(prec, yp, ym, h, (mpfr_ptr)0);
        mpfr_set_ui_2exp(h, 1, eh, R);
        mpfr_add(X[j], X[j], h, R);
        mp(yp, px, k);
        mpfr_set_d(X[j], x[j], R);
        mpfr_sub(X[j], X[j], h, R);
        mp(ym, px, k);
        long lost = 0, e0 = 0;
        bool regular = mpfr_regular_p(yp) && mpfr_regular_p(ym), finite = mpfr_number_p(yp);
        if (regular)
            e0 = mpfr_get_exp(yp) > mpfr_get_exp(ym) ? mpfr_get_exp(yp) : mpfr_get_exp(ym);
        mpfr_sub(yp, yp, ym, R);
        /* A zero difference may be a zero derivative or too little precision. */
        bool zero = finite && mpfr_zero_p(yp);
        if (regular && !zero)
            lost = e0 - mpfr_get_exp(yp);
        bool again = zero ? prec < 16384 : lost > (long)prec - 200 && prec < 40000;
        if (!again) {
            mpfr_set_prec(out, prec);
            mpfr_div(out, yp, h, R);
            mpfr_div_2ui(out, out, 1, R);
        }
        for (size_t i = 0; i < n; i++)
            mpfr_clear(X[i]);
        mpfr_clears(yp, ym, h, (mpfr_ptr)0);
        if (!again)
            return;
        prec = zero ? 4 * prec : prec + lost + 200;
        if (prec > 40000)
            prec = 40000;
    }
}

/*
 * ∂f_k/∂x_j at x by central differences in MPFR with h = 2^-100 min(|x_j|, 1)
 * (2^-1100 at 0): the truncation error is O(h²). A second difference with a step 2^30
 * times smaller must agree to 2^-60; otherwise f is not smooth at x (a jump or kink) and
 * the result is NaN with *smooth false. Rounded to double or float.
 */
static double mp_partial(mp_fn mp, const double *x, size_t n, size_t j, int k, bool f32,
                         bool *smooth)
{
    int ex = x[j] == 0 ? -1100 : ilogb(x[j]);
    long eh = (x[j] == 0 ? -1100 : (ex < 0 ? ex : 0)) - 100;
    mpfr_t d1, d2, t;
    mpfr_inits2(64, d1, d2, t, (mpfr_ptr)0);
    mp_diff(d1, mp, x, n, j, k, eh);
    mp_diff(d2, mp, x, n, j, k, eh - 30);
    *smooth = true;
    if (mpfr_nan_p(d1) || mpfr_nan_p(d2)) {
        *smooth = mpfr_nan_p(d1) && mpfr_nan_p(d2);
    } else if (!mpfr_equal_p(d1, d2)) {
        mpfr_set_prec(t, mpfr_get_prec(d1) > mpfr_get_prec(d2) ? mpfr_get_prec(d1)
                                                               : mpfr_get_prec(d2));
        mpfr_sub(t, d1, d2, R);
        if (!mpfr_zero_p(t) && !mpfr_zero_p(d1) && mpfr_get_exp(t) > mpfr_get_exp(d1) - 60)
            *smooth = false;
        if (mpfr_zero_p(d1) && !mpfr_zero_p(t))
            *smooth = false;
    }
    double d = f32 ? (double)mpfr_get_flt(d1, R) : mpfr_get_d(d1, R);
    mpfr_clears(d1, d2, t, (mpfr_ptr)0);
    return *smooth ? d : NAN64;
}
#endif

/* ---- The per-function test ------------------------------------------------------------------- */

/* Points of a registration: `nrand` random ones in the box, then the hard points. */
static size_t points_of(const cr_rule_test *t, size_t n, size_t nrand, double *pts, size_t cap,
                        size_t *nhard)
{
    size_t np = 0;
    for (size_t p = 0; p < nrand && np < cap; p++, np++)
        for (size_t j = 0; j < n; j++)
            pts[np * n + j] = uniform(t && t->lo ? t->lo[j] : -3, t && t->hi ? t->hi[j] : 3);
    *nhard = 0;
    if (t != NULL && t->points != NULL)
        for (size_t p = 0; p < t->npoints && np < cap; p++, np++, (*nhard)++)
            memcpy(&pts[np * n], &t->points[p * n], n * sizeof(double));
    return np;
}

static void check_point(const mcase *c, mp_fn mp, size_t idx, const double *x, size_t n, bool hard)
{
    const cr_value *fn = c->fn;
    double y[MAXO], dyf[MAXA][MAXO], dxr[MAXO][MAXA];
    bool real[MAXO];
    size_t nout = 0;
    cr_arena_mark mark = cr_arena_get_mark(g_fx.arena);

    /* f64: frule along each e_j, pullback of each e_k; they must agree exactly. */
    for (size_t j = 0; j < n; j++)
        if (!(c->intargs & (1u << j)))
            nout = frule_unit(fn, x, n, c->intargs, false, j, y, dyf[j], real);
    for (size_t k = 0; k < nout; k++)
        if (real[k])
            rrule_unit(fn, x, n, c->intargs, false, k, dxr[k]);
    for (size_t j = 0; j < n; j++) {
        if (c->intargs & (1u << j))
            continue;
        for (size_t k = 0; k < nout; k++) {
            if (!real[k])
                continue;
            if (!same(dyf[j][k], dxr[k][j])) {
                print_error("%s at point %zu: frule ∂y%zu/∂x%zu = %.17g, pullback %.17g\n", c->name,
                            idx, k + 1, j + 1, dyf[j][k], dxr[k][j]);
                fail();
            }
            /* Finite differences of the primal. At a sampling point they must resolve the
             * derivative and agree. At a hard point they may not resolve it (a pole nearer
             * than any usable step, sinpi(1e15 + 0.5) whose period is a few doubles): a
             * disagreement there is a failure unless MPFR confirms the rule below. */
            double d, err;
            if (fd_partial(fn, x, n, c->intargs, j, k, &d, &err)) {
                double ad = dyf[j][k];
                double tol = 1e-7 * fmax(fabs(ad), fabs(d)) + 8 * err + 1e-300;
                if (!same(ad, d) && !(fabs(ad - d) <= tol)) {
                    print_error("%s%s at (%.17g, ...) [point %zu]: ∂y%zu/∂x%zu = %.17g, finite "
                                "differences %.17g ± %.3g\n",
                                hard ? "note: " : "", c->name, x[0], idx, k + 1, j + 1, ad, d, err);
                    /* At a hard point the MPFR check below decides; without MPFR the
                     * disagreement is only noted. */
                    if (!hard || (MPFR_ON && mp == NULL))
                        fail();
                    g_worst[c - k_cases].fd_skipped++;
                }
            } else if (!hard) {
                print_error("%s: finite differences failed at a sampling point (%.17g, ...)\n",
                            c->name, x[0]);
                fail();
            } else {
                g_worst[c - k_cases].fd_skipped++;
            }
        }
    }

#ifdef CR_HAVE_MPFR
    worst *w = &g_worst[c - k_cases];
    if (hard && mp != NULL) {
        for (size_t j = 0; j < n; j++) {
            if (c->intargs & (1u << j))
                continue;
            for (size_t k = 0; k < nout; k++) {
                if (!real[k])
                    continue;
                bool smooth;
                double ref = mp_partial(mp, x, n, j, (int)k, false, &smooth);
                if (!smooth) {
                    print_error("%s: hard point (%a, %a) is not a smooth point\n", c->name, x[0],
                                n > 1 ? x[1] : 0.0);
                    fail();
                }
                double u = ulps(dyf[j][k], ref, false);
                w->checked64++;
                if (u > w->u64 || (u == w->u64 && w->n == 0)) {
                    w->u64 = u;
                    memcpy(w->x64, x, n * sizeof *x);
                    w->n = n;
                }
                double tol = c->ulp64 > 0 ? c->ulp64 : DEFAULT_ULP64;
                if (!(u <= tol)) {
                    print_error("%s at (%a, %a): ∂y%zu/∂x%zu = %.17g (%a), MPFR %.17g (%a): "
                                "%.3g ulp\n",
                                c->name, x[0], n > 1 ? x[1] : 0.0, k + 1, j + 1, dyf[j][k],
                                dyf[j][k], ref, ref, u);
                    fail();
                }
            }
        }
    }
#else
    (void)mp;
#endif

    /* f32: all-float arguments keep float values and tangents. */
    double xf[MAXA];
    for (size_t j = 0; j < n; j++) {
        xf[j] = (c->intargs & (1u << j)) ? x[j] : (double)(float)x[j];
        if (!isfinite(xf[j]) || (xf[j] == 0) != (x[j] == 0))
            goto done;
    }
    double yf[MAXO], dyf32[MAXA][MAXO], dxr32[MAXO][MAXA];
    for (size_t j = 0; j < n; j++)
        if (!(c->intargs & (1u << j)))
            frule_unit(fn, xf, n, c->intargs, true, j, yf, dyf32[j], real);
    for (size_t k = 0; k < nout; k++)
        if (real[k])
            rrule_unit(fn, xf, n, c->intargs, true, k, dxr32[k]);
    for (size_t j = 0; j < n; j++) {
        if (c->intargs & (1u << j))
            continue;
        for (size_t k = 0; k < nout; k++) {
            if (!real[k])
                continue;
            if (!same(dyf32[j][k], dxr32[k][j])) {
                print_error("%s (f32) at point %zu: frule %.9g, pullback %.9g\n", c->name, idx,
                            dyf32[j][k], dxr32[k][j]);
                fail();
            }
#ifdef CR_HAVE_MPFR
            if (hard && mp != NULL) {
                /* The float point may fall on a singularity or jump (1 - 1e-10 rounds
                 * to 1): then there is nothing to check. */
                bool smooth;
                double ref = mp_partial(mp, xf, n, j, (int)k, true, &smooth);
                if (!smooth || isnan(ref))
                    continue;
                double u = ulps(dyf32[j][k], ref, true);
                w->checked32++;
                if (u > w->u32) {
                    w->u32 = u;
                    memcpy(w->x32, xf, n * sizeof *xf);
                }
                double tol = c->ulp32 > 0 ? c->ulp32 : DEFAULT_ULP32;
                if (!(u <= tol)) {
                    print_error("%s (f32) at (%a, %a): ∂y%zu/∂x%zu = %.9g (%a), MPFR %.9g: "
                                "%.3g float ulp\n",
                                c->name, xf[0], n > 1 ? xf[1] : 0.0, k + 1, j + 1, dyf32[j][k],
                                dyf32[j][k], ref, u);
                    fail();
                }
                continue;
            }
#endif
            /* Sampling points: against finite differences of the f64 primal at the float
             * point, to float accuracy. */
            double d, err;
            if (!hard && fd_partial(fn, xf, n, c->intargs, j, k, &d, &err)) {
                double g = dyf32[j][k];
                double tol = 2e-5 * fmax(fabs(g), fabs(d)) + 8 * err + 1e-30;
                if (!(fabs(g - d) <= tol)) {
                    print_error("%s (f32) at %.9g: ∂y%zu/∂x%zu = %.9g, finite differences %.9g\n",
                                c->name, xf[0], k + 1, j + 1, g, d);
                    fail();
                }
            }
        }
    }
done:
    cr_arena_rewind(g_fx.arena, mark);
}

static void test_function(void **state)
{
    const mcase *c = *state;
    const cr_function *fn = c->fn->u.func.fn;
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    assert_ptr_equal(cr_registry_find(reg, c->name), fn);
    size_t nrules = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        if (info.fn != fn || info.non_differentiable)
            continue;
        nrules++;
        assert_true(info.has_frule && info.has_rrule);
        assert_non_null(info.test);
        size_t n = info.nargs;
        assert_true(n >= 1 && n <= MAXA);
        if (!info.variadic && fn->arity >= 0)
            assert_int_equal((size_t)fn->arity, n);
        double pts[64 * MAXA];
        size_t nhard, np = points_of(info.test, n, 10, pts, 64, &nhard);
        mp_fn mp = info.variadic ? c->mp_var : c->mp;
        for (size_t p = 0; p < np; p++)
            check_point(c, mp, p, &pts[p * n], n, p >= np - nhard);
    }
    assert_true(nrules >= 1);
}

/* ---- Complex arguments of the holomorphic rows --------------------------------------------- */

typedef struct cfd_env {
    const cr_value *fn;
    cr_complex z[MAXA];
    size_t n, j, k;
    cr_complex dir;
    bool imag; /* which part of the output */
} cfd_env;

static size_t complex_outputs(const cr_value *v, cr_complex *out)
{
    if (v->kind != CR_KIND_STRUCT) {
        out[0] = v->kind == CR_KIND_C128 ? v->u.c128 : v->u.f64;
        return 1;
    }
    size_t n = v->u.obj.type->nfields;
    for (size_t i = 0; i < n; i++) {
        cr_value f;
        assert_int_equal(cr_type_field_value(v->u.obj.type, v->u.obj.ptr, i, &f), CR_OK);
        out[i] = f.u.c128;
    }
    return n;
}

static cr_status cfd_fn(double t, double *y, void *envp)
{
    cfd_env *e = envp;
    cr_value args[MAXA], v;
    cr_complex out[MAXO];
    for (size_t i = 0; i < e->n; i++)
        args[i] = cr_value_c128(i == e->j ? e->z[i] + t * e->dir : e->z[i]);
    cr_arena_mark m = cr_arena_get_mark(g_fx.arena);
    cr_status st = cr_function_call(g_fx.arena, e->fn, args, e->n, &v);
    if (st == CR_OK) {
        complex_outputs(&v, out);
        *y = e->imag ? cimag(out[e->k]) : creal(out[e->k]);
    }
    cr_arena_rewind(g_fx.arena, m);
    return st;
}

/* The column of the real Jacobian for the direction dir of argument j, output k. */
static cr_complex cfd_column(const cr_value *fn, const cr_complex *z, size_t n, size_t j, size_t k,
                             cr_complex dir, double *err)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    cfd_env e = {.fn = fn, .n = n, .j = j, .k = k, .dir = dir};
    memcpy(e.z, z, n * sizeof *z);
    double re, im, e1, e2;
    e.imag = false;
    assert_int_equal(cr_fd_derivative(&m, NULL, cfd_fn, &e, 0.0, &re, &e1), CR_OK);
    e.imag = true;
    assert_int_equal(cr_fd_derivative(&m, NULL, cfd_fn, &e, 0.0, &im, &e2), CR_OK);
    *err = e1 + e2;
    return mkc(re, im);
}

static cr_complex tangent_complex(cr_tangent t)
{
    switch ((cr_tag)t.tag) {
    case CR_TAN_ZERO:
        return 0;
    case CR_TAN_C128:
        return t.u.c128;
    case CR_TAN_F64:
        return t.u.f64;
    default:
        print_error("expected a complex tangent, got %s\n", cr_tag_name((cr_tag)t.tag));
        fail();
        return 0;
    }
}

static void check_close(cr_complex got, cr_complex want, double err, const char *what,
                        const char *name)
{
    double tol = 1e-7 * fmax(cabs(got), cabs(want)) + 8 * err + 1e-12;
    if (!(cabs(got - want) <= tol)) {
        print_error("%s %s: got %.17g%+.17gi, finite differences %.17g%+.17gi\n", name, what,
                    creal(got), cimag(got), creal(want), cimag(want));
        fail();
    }
}

/*
 * At complex points away from every branch cut (|re| and |im| >= 0.3), the frule with
 * ż = 1 and ż = i must give the columns of the real Jacobian J (finite differences of the
 * primal along re and im), and the pullback of ȳ = 1 and ȳ = i the rows: Jᵀ ȳ read as a
 * complex number, re⟨ȳ, J·1⟩ + i re⟨ȳ, J·i⟩ (ChainRules' convention).
 */
static void test_complex_rows(void **state)
{
    (void)state;
    static const double zs[][2] = {
        {0.7, 0.4}, {-0.6, 0.5}, {1.3, -0.45}, {-1.8, -0.8}, {0.35, 1.6}};
    size_t nz = sizeof zs / sizeof zs[0], ntested = 0;
    for (size_t ci = 0; ci < NCASES; ci++) {
        const cr_value *fn = k_cases[ci].fn;
        const cr_scalar_rule *row = cr_scalar_rule_of(fn->u.func.fn);
        if (row == NULL || row->c128 == NULL)
            continue;
        ntested++;
        size_t n = row->nin;
        for (size_t p = 0; p < nz; p++) {
            cr_complex z[MAXA];
            cr_value args[MAXA], v;
            for (size_t j = 0; j < n; j++) {
                size_t q = (p + 2 * j) % nz;
                z[j] = mkc(zs[q][0], zs[q][1]);
                args[j] = cr_value_c128(z[j]);
            }
            cr_arena_mark mark = cr_arena_get_mark(g_fx.arena);
            cr_complex J[MAXA][2][MAXO];
            double E[MAXA][2][MAXO];
            for (size_t j = 0; j < n; j++)
                for (int d = 0; d < 2; d++) {
                    cr_tangent dargs[MAXA + 1], t;
                    dargs[0] = cr_tangent_none();
                    for (size_t i = 0; i < n; i++)
                        dargs[i + 1] =
                            i != j ? cr_tangent_zero() : cr_tangent_c128(d ? mkc(0, 1) : mkc(1, 0));
                    assert_int_equal(cr_frule(NULL, g_fx.arena, dargs, fn, args, n, &v, &t), CR_OK);
                    assert_int_equal(v.kind == CR_KIND_STRUCT ? CR_KIND_C128 : v.kind,
                                     CR_KIND_C128);
                    for (size_t k = 0; k < row->nout; k++) {
                        cr_complex got =
                            tangent_complex(row->nout > 1 ? cr_tangent_field(t, k) : t);
                        J[j][d][k] =
                            cfd_column(fn, z, n, j, k, d ? mkc(0, 1) : mkc(1, 0), &E[j][d][k]);
                        check_close(got, J[j][d][k], E[j][d][k], d ? "frule ż = i" : "frule ż = 1",
                                    row->name);
                    }
                }
            for (size_t k = 0; k < row->nout; k++)
                for (int s = 0; s < 2; s++) {
                    cr_complex ybar = s ? mkc(0, 1) : mkc(1, 0);
                    cr_pullback pb;
                    cr_tangent seed, dx[MAXA + 1];
                    assert_int_equal(cr_rrule(NULL, g_fx.arena, fn, args, n, &v, &pb), CR_OK);
                    if (row->nout > 1) {
                        cr_tangent f[MAXO];
                        for (size_t i = 0; i < row->nout; i++)
                            f[i] = i == k ? cr_tangent_c128(ybar) : cr_tangent_zero();
                        assert_int_equal(
                            cr_tangent_struct(g_fx.arena, v.u.obj.type, NULL, f, row->nout, &seed),
                            CR_OK);
                    } else {
                        seed = cr_tangent_c128(ybar);
                    }
                    assert_int_equal(cr_pullback_call(g_fx.arena, &pb, &seed, dx, n + 1), CR_OK);
                    for (size_t j = 0; j < n; j++) {
                        cr_complex a = J[j][0][k], b = J[j][1][k];
                        cr_complex want = mkc(creal(conj(ybar) * a), creal(conj(ybar) * b));
                        check_close(tangent_complex(dx[j + 1]), want, E[j][0][k] + E[j][1][k],
                                    s ? "pullback ȳ = i" : "pullback ȳ = 1", row->name);
                    }
                }
            cr_arena_rewind(g_fx.arena, mark);
        }
    }
    assert_true(ntested >= 40);
}

/* A real argument among complex ones gets the real part of its cotangent (ProjectTo). */
static void test_complex_mixed(void **state)
{
    (void)state;
    cr_value args[2] = {cr_value_f64(2.0), cr_value_c128(mkc(0.5, 1.0))}, y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_c128(mkc(1.0, 0.0)), dx[3];
    assert_int_equal(cr_rrule(NULL, g_fx.arena, &cr_fn_pow, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_C128);
    assert_int_equal(cr_pullback_call(g_fx.arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F64);
    assert_int_equal(dx[2].tag, CR_TAN_C128);
    /* ∂/∂x x^y = y x^(y-1): its conjugate's real part. */
    cr_complex d = mkc(0.5, 1.0) * cpow(2.0, mkc(-0.5, 1.0));
    assert_true(fabs(dx[1].u.f64 - creal(d)) <= 1e-14);
}

/* ---- Conventions at kinks, jumps and special points ----------------------------------------- */

/* The partials of f at real x (f64), from the frule; exact checks. */
static void partials(const cr_value *fn, const double *x, size_t n, double *y, double *d)
{
    double dy[MAXO];
    bool real[MAXO];
    for (size_t j = 0; j < n; j++) {
        frule_unit(fn, x, n, 0, false, j, y, dy, real);
        d[j] = dy[0];
        /* The pullback agrees. */
        double dx[MAXA];
        rrule_unit(fn, x, n, 0, false, 0, dx);
        ASSERT_SAME(dx[j], d[j]);
    }
}

#define CHECK1(FN, X, WANT_Y, WANT_D)        \
    do {                                     \
        double x_[1] = {X}, y_[MAXO], d_[1]; \
        partials(&(FN), x_, 1, y_, d_);      \
        ASSERT_SAME(y_[0], WANT_Y);          \
        ASSERT_SAME(d_[0], WANT_D);          \
    } while (0)

#define CHECK2(FN, X0, X1, WANT_D0, WANT_D1)      \
    do {                                          \
        double x_[2] = {X0, X1}, y_[MAXO], d_[2]; \
        partials(&(FN), x_, 2, y_, d_);           \
        ASSERT_SAME(d_[0], WANT_D0);              \
        ASSERT_SAME(d_[1], WANT_D1);              \
    } while (0)

static void test_kinks(void **state)
{
    (void)state;
    cr_arena_mark mark = cr_arena_get_mark(g_fx.arena);
    /* Absolute value, sign, relu: 0 at the kink. */
    CHECK1(cr_fn_fabs, 0.0, 0.0, 0.0);
    CHECK1(cr_fn_fabs, -0.0, 0.0, 0.0);
    CHECK1(cr_fn_fabs, -2.0, 2.0, -1.0);
    CHECK1(cr_fn_sign, 0.0, 0.0, 0.0);
    CHECK1(cr_fn_sign, -3.0, -1.0, 0.0);
    CHECK1(cr_fn_relu, 0.0, 0.0, 0.0);
    CHECK1(cr_fn_relu, -0.0, 0.0, 0.0);
    CHECK1(cr_fn_relu, 2.0, 2.0, 1.0);
    /* Infinite slopes at the zeros of sqrt and cbrt, both signs of zero. */
    CHECK1(cr_fn_sqrt, 0.0, 0.0, INF64);
    CHECK1(cr_fn_sqrt, -0.0, -0.0, INF64);
    CHECK1(cr_fn_cbrt, 0.0, 0.0, INF64);
    CHECK1(cr_fn_cbrt, -0.0, -0.0, INF64);
    /* fmax / fmin: ties as ChainRules' max / min; NaN ignored as C does. */
    CHECK2(cr_fn_fmax, 2.0, 2.0, 0.0, 1.0);
    CHECK2(cr_fn_fmax, NAN64, 1.0, 0.0, 1.0);
    CHECK2(cr_fn_fmax, 1.0, NAN64, 1.0, 0.0);
    CHECK2(cr_fn_fmax, -0.0, 0.0, 0.0, 1.0);
    CHECK2(cr_fn_fmin, 2.0, 2.0, 1.0, 0.0);
    CHECK2(cr_fn_fmin, NAN64, 1.0, 0.0, 1.0);
    CHECK2(cr_fn_fmin, 1.0, NAN64, 1.0, 0.0);
    CHECK2(cr_fn_max, 2.0, 2.0, 0.0, 1.0);
    CHECK2(cr_fn_min, 2.0, 2.0, 1.0, 0.0);
    {
        double x[2] = {-0.0, 0.0}, y[MAXO], d[2];
        partials(&cr_fn_max, x, 2, y, d);
        assert_true(y[0] == 0 && !signbit(y[0]));
        partials(&cr_fn_min, x, 2, y, d);
        assert_true(y[0] == 0 && signbit(y[0]));
        x[0] = NAN64;
        x[1] = 1.0;
        partials(&cr_fn_max, x, 2, y, d);
        assert_true(isnan(y[0]));
        ASSERT_SAME(d[0], 0.0);
        ASSERT_SAME(d[1], 1.0);
    }
    /* fdim: the tie takes the zero branch; NaN gives NaN. */
    CHECK2(cr_fn_fdim, 2.0, 2.0, 0.0, -0.0);
    CHECK2(cr_fn_fdim, 1.0, 3.0, 0.0, -0.0);
    CHECK2(cr_fn_fdim, 3.0, 1.0, 1.0, -1.0);
    CHECK2(cr_fn_fdim, NAN64, 1.0, NAN64, NAN64);
    /* clamp: at a bound the derivative goes to x. */
    {
        double x[3] = {-2.0, -2.0, 2.0}, y[MAXO], d[3];
        partials(&cr_fn_clamp, x, 3, y, d);
        ASSERT_SAME(d[0], 1.0);
        ASSERT_SAME(d[1], 0.0);
        ASSERT_SAME(d[2], 0.0);
        x[0] = 5.0;
        partials(&cr_fn_clamp, x, 3, y, d);
        ASSERT_SAME(y[0], 2.0);
        ASSERT_SAME(d[0], 0.0);
        ASSERT_SAME(d[2], 1.0);
    }
    /* hypot at the origin: 0 (ChainRules); atan2 at the origin: NaN (a discontinuity). */
    CHECK2(cr_fn_hypot, 0.0, 0.0, 0.0, 0.0);
    CHECK2(cr_fn_atan2, 0.0, 0.0, NAN64, NAN64);
    CHECK2(cr_fn_atan2, 1.0, INF64, 0.0, 0.0);
    /* Remainders: NaN at the jumps, (1, 0) where fmod is smooth at x = 0. */
    CHECK2(cr_fn_fmod, 4.0, 2.0, NAN64, NAN64);
    CHECK2(cr_fn_fmod, -6.0, 3.0, NAN64, NAN64);
    CHECK2(cr_fn_fmod, 0.0, 3.0, 1.0, 0.0);
    CHECK2(cr_fn_fmod, 7.5, 2.0, 1.0, -3.0);
    CHECK2(cr_fn_fmod, 1.0, INF64, 1.0, 0.0);
    CHECK2(cr_fn_rem, 4.0, 2.0, NAN64, NAN64);
    CHECK2(cr_fn_remainder, 5.0, 2.0, NAN64, NAN64);
    CHECK2(cr_fn_remainder, 4.0, 2.0, 1.0, -2.0);
    CHECK2(cr_fn_remainder, 7.5, 2.0, 1.0, -4.0);
    CHECK2(cr_fn_mod, 4.0, 2.0, NAN64, NAN64);
    CHECK2(cr_fn_mod, 0.0, 3.0, NAN64, NAN64);
    CHECK2(cr_fn_mod, -7.5, 2.0, 1.0, 4.0);
    /* pow at x = 0 (ChainRules) and for negative x with integer y. */
    CHECK2(cr_fn_pow, 0.0, 1.0, 1.0, 0.0);
    CHECK2(cr_fn_pow, 0.0, 2.0, 0.0, 0.0);
    CHECK2(cr_fn_pow, 0.0, 0.0, 0.0, NAN64);
    CHECK2(cr_fn_pow, 0.0, 0.5, INF64, 0.0);
    CHECK2(cr_fn_pow, 0.0, -1.0, -INF64, NAN64);
    CHECK2(cr_fn_pow, -2.0, 3.0, 12.0, -8.0 * log(2.0));
    CHECK2(cr_fn_pow, -2.0, 0.5, NAN64, NAN64);
    /* copysign: -1 when the sign bits differ, at zero too; ∂/∂y = 0. */
    CHECK2(cr_fn_copysign, 0.0, -1.0, -1.0, 0.0);
    CHECK2(cr_fn_copysign, -0.0, -1.0, 1.0, 0.0);
    CHECK2(cr_fn_copysign, -0.0, 1.0, -1.0, 0.0);
    /* logaddexp at equal arguments, infinities included. */
    CHECK2(cr_fn_logaddexp, 3.0, 3.0, 0.5, 0.5);
    CHECK2(cr_fn_logaddexp, INF64, INF64, 0.5, 0.5);
    CHECK2(cr_fn_logaddexp, -INF64, -INF64, 0.5, 0.5);
    CHECK2(cr_fn_logaddexp, INF64, 1.0, 1.0, 0.0);
    /* xlogy / xlog1py at x = 0: a strong zero for y. */
    {
        double x[2] = {0.0, 0.0}, y[MAXO], d[2];
        partials(&cr_fn_xlogy, x, 2, y, d);
        ASSERT_SAME(y[0], 0.0);
        ASSERT_SAME(d[0], -INF64);
        ASSERT_SAME(d[1], 0.0);
        x[1] = -1.0;
        partials(&cr_fn_xlog1py, x, 2, y, d);
        ASSERT_SAME(y[0], 0.0);
        ASSERT_SAME(d[0], -INF64);
        ASSERT_SAME(d[1], 0.0);
    }
    /* sinc at 0; tand at 90 degrees; acot's jump at 0; gamma at its poles. */
    CHECK1(cr_fn_sinc, 0.0, 1.0, 0.0);
    CHECK1(cr_fn_tand, 90.0, INF64, INF64);
    CHECK1(cr_fn_sinpi, 1.0, 0.0, -K_PI);
    CHECK1(cr_fn_cospi, 0.5, 0.0, -K_PI);
    CHECK1(cr_fn_sind, 180.0, 0.0, -K_PI / 180);
    CHECK1(cr_fn_acot, 0.0, K_PI / 2, -1.0);
    CHECK1(cr_fn_acot, -0.0, -K_PI / 2, -1.0);
    CHECK1(cr_fn_tgamma, -2.0, NAN64, NAN64);
    {
        double x[1] = {0.0}, y[MAXO], d[1];
        partials(&cr_fn_lgamma, x, 1, y, d);
        assert_true(isnan(d[0]));
    }
    /* Domain edges: infinite slopes. */
    CHECK1(cr_fn_asin, 1.0, K_PI / 2, INF64);
    CHECK1(cr_fn_acos, -1.0, K_PI, -INF64);
    CHECK1(cr_fn_atanh, 1.0, INF64, INF64);
    CHECK1(cr_fn_acosh, 1.0, 0.0, INF64);
    cr_arena_rewind(g_fx.arena, mark);
}

/* frexp and modf at their jumps, remquo's integer output, the (real, int) tuples. */
static void test_tuples(void **state)
{
    (void)state;
    double y[MAXO], dy[MAXO], dx[MAXA];
    bool real[MAXO];
    double x1[1] = {4.0};
    /* frexp(4) = (0.5, 3): the slope to the right of the power of two, 2^-3. */
    assert_int_equal(frule_unit(&cr_fn_frexp, x1, 1, 0, false, 0, y, dy, real), 2);
    ASSERT_SAME(y[0], 0.5);
    assert_false(real[1]);
    ASSERT_SAME(dy[0], 0.125);
    x1[0] = 0.0;
    frule_unit(&cr_fn_frexp, x1, 1, 0, false, 0, y, dy, real);
    ASSERT_SAME(dy[0], 1.0);
    x1[0] = 3.0;
    rrule_unit(&cr_fn_frexp, x1, 1, 0, true, 0, dx);
    ASSERT_SAME(dx[0], 0.25);
    /* modf(3) = (0, 3): partials (1, 0) at the jump too. */
    frule_unit(&cr_fn_modf, x1, 1, 0, false, 0, y, dy, real);
    ASSERT_SAME(y[0], 0.0);
    ASSERT_SAME(y[1], 3.0);
    ASSERT_SAME(dy[0], 1.0);
    ASSERT_SAME(dy[1], 0.0);
    /* remquo(7.5, 2) = (-0.5, 4): partials of remainder. */
    double x2[2] = {7.5, 2.0};
    assert_int_equal(frule_unit(&cr_fn_remquo, x2, 2, 0, false, 1, y, dy, real), 2);
    ASSERT_SAME(y[0], -0.5);
    ASSERT_SAME(dy[0], -4.0);
    /* The real field of a (real, int) cotangent; a non-structural cotangent is refused. */
    cr_value args[2] = {cr_value_f64(7.5), cr_value_f64(2.0)}, v;
    cr_pullback pb;
    cr_tangent bad = cr_tangent_f64(1.0), out[3];
    assert_int_equal(cr_rrule(NULL, g_fx.arena, &cr_fn_remquo, args, 2, &v, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(g_fx.arena, &pb, &bad, out, 3), CR_ETANGENT);
    cr_ctx_clear_error(g_fx.ctx);
}

/* An integer argument gets NoTangent; float and int keep float. */
static void test_int_args(void **state)
{
    (void)state;
    cr_value args[2] = {cr_value_f64(3.0), cr_value_i64(4)}, y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_f64(1.0), dx[3];
    assert_int_equal(cr_rrule(NULL, g_fx.arena, &cr_fn_pow, args, 2, &y, &pb), CR_OK);
    ASSERT_SAME(y.u.f64, 81.0);
    assert_int_equal(cr_pullback_call(g_fx.arena, &pb, &dy, dx, 3), CR_OK);
    ASSERT_SAME(dx[1].u.f64, 108.0);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    /* ldexp(float, int) stays float. */
    args[0] = cr_value_f32(3.0f);
    assert_int_equal(cr_rrule(NULL, g_fx.arena, &cr_fn_ldexp, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    assert_true(y.u.f32 == 48.0f);
    assert_int_equal(cr_pullback_call(g_fx.arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F32);
    assert_true(dx[1].u.f32 == 16.0f);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    /* frule: the integer's tangent is ignored. */
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_f32(1.0f), cr_tangent_f64(5.0)}, t;
    assert_int_equal(cr_frule(NULL, g_fx.arena, dargs, &cr_fn_ldexp, args, 2, &y, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_F32);
    assert_true(t.u.f32 == 16.0f);
}

/* hypot of 3 and 5 arguments, evalpoly of several degrees, real, float and complex. */
static void test_variadic(void **state)
{
    (void)state;
    double x5[5] = {1e300, -2e300, 3e300, 1e299, 0.0};
    for (size_t n = 3; n <= 5; n++) {
        double y[MAXO], dy[MAXO], d, err;
        bool real[MAXO];
        for (size_t j = 0; j < n; j++) {
            frule_unit(&cr_fn_hypot, x5, n, 0, false, j, y, dy, real);
            double dx[MAXA];
            rrule_unit(&cr_fn_hypot, x5, n, 0, false, 0, dx);
            ASSERT_SAME(dx[j], dy[0]);
            assert_true(fd_partial(&cr_fn_hypot, x5, n, 0, j, 0, &d, &err));
            assert_true(fabs(d - dy[0]) <= 1e-9 * fabs(d) + 8 * err + 1e-300);
        }
    }
    /* All zero: 0 and zero partials. */
    double z3[3] = {0, 0, 0}, y[MAXO], dy[MAXO];
    bool real[MAXO];
    frule_unit(&cr_fn_hypot, z3, 3, 0, false, 1, y, dy, real);
    ASSERT_SAME(y[0], 0.0);
    ASSERT_SAME(dy[0], 0.0);
    /* Infinity wins over NaN, as in C. */
    double inan[3] = {NAN64, INF64, 1};
    frule_unit(&cr_fn_hypot, inan, 3, 0, false, 2, y, dy, real);
    ASSERT_SAME(y[0], INF64);

    /* evalpoly: degrees 1..5, f64 and f32, against finite differences. */
    double p[7] = {0.75, 1.5, -2.0, 0.5, 3.0, -1.25, 0.125};
    for (size_t n = 2; n <= 7; n++)
        for (size_t j = 0; j < n; j++) {
            double dx[MAXA], d, err;
            frule_unit(&cr_fn_evalpoly, p, n, 0, false, j, y, dy, real);
            rrule_unit(&cr_fn_evalpoly, p, n, 0, false, 0, dx);
            ASSERT_SAME(dx[j], dy[0]);
            assert_true(fd_partial(&cr_fn_evalpoly, p, n, 0, j, 0, &d, &err));
            assert_true(fabs(d - dy[0]) <= 1e-9 * fmax(1, fabs(d)) + 8 * err);
            frule_unit(&cr_fn_evalpoly, p, n, 0, true, j, y, dy, real);
            assert_true(fabs(d - dy[0]) <= 1e-5 * fmax(1, fabs(d)));
        }
    /* Complex x and a real coefficient: conj(p'(x)) ȳ, and the real part for the real one. */
    cr_value args[4] = {cr_value_c128(mkc(0.5, 1.0)), cr_value_f64(1.0),
                        cr_value_c128(mkc(2.0, -1.0)), cr_value_i64(3)},
             v;
    cr_pullback pb;
    cr_tangent seed = cr_tangent_c128(mkc(1.0, 0.0)), dx[5];
    assert_int_equal(cr_rrule(NULL, g_fx.arena, &cr_fn_evalpoly, args, 4, &v, &pb), CR_OK);
    cr_complex x = mkc(0.5, 1.0), c1 = mkc(2.0, -1.0);
    cr_complex want = 1.0 + c1 * x + 3.0 * x * x, dp = c1 + 6.0 * x;
    assert_true(cabs(v.u.c128 - want) <= 1e-15);
    assert_int_equal(cr_pullback_call(g_fx.arena, &pb, &seed, dx, 5), CR_OK);
    assert_true(cabs(dx[1].u.c128 - conj(dp)) <= 1e-15);
    assert_int_equal(dx[2].tag, CR_TAN_F64);
    ASSERT_SAME(dx[2].u.f64, 1.0);
    assert_true(cabs(dx[3].u.c128 - conj(x)) <= 1e-15);
    assert_int_equal(dx[4].tag, CR_TAN_NONE);
}

/* ---- Non-differentiable functions ------------------------------------------------------------ */

static void test_nondiff(void **state)
{
    (void)state;
    static const struct {
        const cr_value *fn;
        size_t n;
        double x, x2;
        cr_kind kind; /* of the result for an f64 argument */
        double want;
    } k[] = {
        {&cr_fn_floor, 1, 2.5, 0, CR_KIND_F64, 2},
        {&cr_fn_ceil, 1, 2.5, 0, CR_KIND_F64, 3},
        {&cr_fn_trunc, 1, -2.5, 0, CR_KIND_F64, -2},
        {&cr_fn_round, 1, 2.5, 0, CR_KIND_F64, 3},
        {&cr_fn_nearbyint, 1, 2.5, 0, CR_KIND_F64, 2},
        {&cr_fn_rint, 1, 3.5, 0, CR_KIND_F64, 4},
        {&cr_fn_logb, 1, 10, 0, CR_KIND_F64, 3},
        {&cr_fn_lround, 1, -2.5, 0, CR_KIND_I64, -3},
        {&cr_fn_llround, 1, 2.5, 0, CR_KIND_I64, 3},
        {&cr_fn_lrint, 1, 2.5, 0, CR_KIND_I64, 2},
        {&cr_fn_llrint, 1, 3.5, 0, CR_KIND_I64, 4},
        {&cr_fn_ilogb, 1, 10, 0, CR_KIND_I64, 3},
        {&cr_fn_fpclassify, 1, 0, 0, CR_KIND_I64, FP_ZERO},
        {&cr_fn_signbit, 1, -0.0, 0, CR_KIND_BOOL, 1},
        {&cr_fn_isnan, 1, (double)NAN, 0, CR_KIND_BOOL, 1},
        {&cr_fn_isinf, 1, -(double)INFINITY, 0, CR_KIND_BOOL, 1},
        {&cr_fn_isfinite, 1, 1, 0, CR_KIND_BOOL, 1},
        {&cr_fn_isnormal, 1, 1e-310, 0, CR_KIND_BOOL, 0},
        {&cr_fn_nextafter, 2, 1, 2, CR_KIND_F64, 1 + DBL_EPSILON},
        {&cr_fn_nexttoward, 2, 1, 0, CR_KIND_F64, 1 - DBL_EPSILON / 2},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const char *name = k[i].fn->u.func.fn->name;
        assert_ptr_equal(cr_registry_find(cr_registry_builtin(), name), k[i].fn->u.func.fn);
        for (int f32 = 0; f32 < 2; f32++) {
            cr_value args[2], y;
            double xs[2] = {k[i].x, k[i].x2};
            make_args(xs, k[i].n, 0, f32 != 0, args);
            cr_tangent dargs[3] = {cr_tangent_none(),
                                   f32 ? cr_tangent_f32(1.0f) : cr_tangent_f64(1.0),
                                   cr_tangent_zero()},
                       t, dx[3];
            assert_int_equal(cr_frule(NULL, g_fx.arena, dargs, k[i].fn, args, k[i].n, &y, &t),
                             CR_OK);
            assert_int_equal(t.tag, CR_TAN_NONE);
            cr_kind want = k[i].kind == CR_KIND_F64 && f32 ? CR_KIND_F32 : k[i].kind;
            assert_int_equal(y.kind, want);
            double got = y.kind == CR_KIND_F64    ? y.u.f64
                         : y.kind == CR_KIND_F32  ? (double)y.u.f32
                         : y.kind == CR_KIND_BOOL ? (double)y.u.b
                                                  : (double)y.u.i64;
            if (!f32 || k[i].fn != &cr_fn_nextafter) {
                if (f32 && (k[i].fn == &cr_fn_nexttoward || k[i].fn == &cr_fn_isnormal))
                    continue;
                if (!same(got, k[i].want)) {
                    print_error("%s%s: got %.17g, want %.17g\n", name, f32 ? " (f32)" : "", got,
                                k[i].want);
                    fail();
                }
            }
            cr_pullback pb;
            cr_tangent seed = cr_tangent_f64(1.0);
            assert_int_equal(cr_rrule(NULL, g_fx.arena, k[i].fn, args, k[i].n, &y, &pb), CR_OK);
            assert_int_equal(cr_pullback_call(g_fx.arena, &pb, &seed, dx, k[i].n + 1), CR_OK);
            for (size_t j = 0; j <= k[i].n; j++)
                assert_int_equal(dx[j].tag, CR_TAN_NONE);
        }
    }
}

/* Every exported function value is found by its registry name; wrong argument kinds give
 * CR_NOTHING (no rule) rather than a crash. */
static void test_registry(void **state)
{
    (void)state;
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    for (size_t i = 0; i < NCASES; i++)
        assert_ptr_equal(cr_registry_find(reg, k_cases[i].name), k_cases[i].fn->u.func.fn);
    /* Real-only rows refuse complex arguments. */
    cr_value z = cr_value_c128(mkc(1, 1)), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, g_fx.arena, &cr_fn_cbrt, &z, 1, &y, &pb), CR_NOTHING);
    /* The docs of every row: name, partials, pullback name. */
    for (size_t i = 0; i < NCASES; i++) {
        const cr_scalar_rule *row = cr_scalar_rule_of(k_cases[i].fn->u.func.fn);
        if (row == NULL)
            continue;
        assert_non_null(row->partials_src);
        assert_non_null(row->pullback_name);
        assert_non_null(row->test.lo);
        assert_non_null(row->test.hi);
    }
}

/* ---- Summary -----------------------------------------------------------------------------------
 */

static void test_summary(void **state)
{
    (void)state;
#ifdef CR_HAVE_MPFR
    printf("\nLargest ulp errors of the derivatives at the hard points (MPFR reference):\n");
    printf("%-10s %5s %9s  %-28s %5s %9s %6s\n", "function", "n64", "ulp64", "at", "n32", "ulp32",
           "fd-skip");
    for (size_t i = 0; i < NCASES; i++) {
        const worst *w = &g_worst[i];
        char at[64] = "";
        if (w->n >= 1)
            snprintf(at, sizeof at, "%.6g%s%.6g", w->x64[0], w->n > 1 ? ", " : "",
                     w->n > 1 ? w->x64[1] : 0.0);
        if (w->n == 1)
            snprintf(at, sizeof at, "%.6g", w->x64[0]);
        printf("%-10s %5d %9.3g  %-28s %5d %9.3g %6d\n", k_cases[i].name, w->checked64, w->u64, at,
               w->checked32, w->u32, w->fd_skipped);
    }
#else
    printf("MPFR not available: the high-precision checks were skipped\n");
#endif
}

int main(void)
{
    struct CMUnitTest tests[NCASES + 10];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest){"registry", test_registry, NULL, NULL, NULL};
    for (size_t i = 0; i < NCASES; i++)
        tests[n++] = (struct CMUnitTest){k_cases[i].name, test_function, NULL, NULL,
                                         (void *)(uintptr_t)&k_cases[i]};
    tests[n++] = (struct CMUnitTest){"complex_rows", test_complex_rows, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"complex_mixed", test_complex_mixed, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"kinks", test_kinks, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"tuples", test_tuples, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"int_args", test_int_args, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"variadic", test_variadic, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"nondiff", test_nondiff, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"summary", test_summary, NULL, NULL, NULL};
    return _cmocka_run_group_tests("rules_math", tests, n, group_setup, group_teardown);
}
