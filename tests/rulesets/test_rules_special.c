/*
 * Tests of the special-function rule family (rules_special.h): the primals against
 * tabulated values (computed to 60 digits with an arbitrary-precision library, each with
 * the tolerance the function is documented to meet) and, when the build has MPFR
 * (CR_HAVE_MPFR), against 256-bit MPFR values over each function's range. Every rule's
 * frule and pullback against finite differences of the primal (chainrules/fd.h), never
 * against the derivative formulas the rules use. Also: integer orders get NoTangent, gamma_inc's
 * order gets a NotImplemented tangent (not an error), float arguments keep float.
 */
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

/* j0 ... yn are POSIX; declared here because this file is compiled as strict C11. */
double j0(double x);
double j1(double x);
double jn(int n, double x);
double y0(double x);
double y1(double x);
double yn(int n, double x);

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
    cr_ctx_set_debug(f->ctx, true); /* cotangents are checked against their projection */
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

/* ---- Primals against tabulated values --------------------------------------------------- */

typedef struct ref_value {
    const char *fn;
    double a, b; /* arguments (b unused by one-argument functions) */
    double want;
    double rtol;
} ref_value;

static const ref_value k_refs[] = {
    {"digamma", 1e-08, 0.0, -100000000.57721564, 4e-15},
    {"digamma", 0.25, 0.0, -4.2274535333762655, 4e-15},
    {"digamma", 1.0, 0.0, -0.5772156649015329, 4e-15},
    {"digamma", 1.4616321449683622, 0.0, -9.241265521729427e-17, 4e-15},
    {"digamma", 1.3, 0.0, -0.16919088886679962, 4e-15},
    {"digamma", 1.6, 0.0, 0.12604745277347632, 4e-15},
    {"digamma", 2.5, 0.0, 0.7031566406452432, 4e-15},
    {"digamma", 10.0, 0.0, 2.251752589066721, 4e-15},
    {"digamma", 100000.0, 0.0, 11.512920464961896, 4e-15},
    {"digamma", 1e+300, 0.0, 690.7755278982137, 4e-15},
    {"digamma", -0.5, 0.0, 0.03648997397857652, 4e-15},
    {"digamma", -2.7, 0.0, -1.1153471291406896, 4e-15},
    {"digamma", -1e-07, 0.0, 9999999.42278417, 4e-15},
    {"digamma", -100.3, 0.0, 6.895643124860435, 4e-15},
    {"trigamma", 1e-06, 0.0, 1000000000001.645, 4e-15},
    {"trigamma", 0.1, 0.0, 101.43329915079275, 4e-15},
    {"trigamma", 1.0, 0.0, 1.6449340668482264, 4e-15},
    {"trigamma", 3.5, 0.0, 0.3303577561002349, 4e-15},
    {"trigamma", 50.0, 0.0, 0.020201333226697125, 4e-15},
    {"trigamma", 100000000.0, 0.0, 1.000000005e-08, 4e-15},
    {"trigamma", -0.5, 0.0, 8.934802200544679, 4e-15},
    {"trigamma", -3.2, 0.0, 28.298186402194034, 4e-15},
    {"polygamma", 2.0, 0.3, -75.27253658872604, 1e-14},
    {"polygamma", 3.0, 2.5, 0.22390584881725206, 1e-14},
    {"polygamma", 5.0, 10.0, 0.0003059451621172682, 1e-14},
    {"polygamma", 10.0, 1.0, -3630593.311606629, 1e-14},
    {"polygamma", 30.0, 7.5, -202269.48205191913, 1e-14},
    {"polygamma", 2.0, -0.7, -69.44163279863854, 1e-14},
    {"polygamma", 4.0, -2.3, 9738.671736569251, 1e-14},
    {"polygamma", 3.0, -10.25, 1558.543853536406, 1e-14},
    {"erfinv", 1e-300, 0.0, 8.86226925452758e-301, 4e-16},
    {"erfinv", 1e-10, 0.0, 8.862269254527581e-11, 4e-16},
    {"erfinv", 0.3, 0.0, 0.2724627147267543, 4e-16},
    {"erfinv", 0.5, 0.0, 0.4769362762044699, 4e-16},
    {"erfinv", 0.5000001, 0.0, 0.47693638746295763, 4e-16},
    {"erfinv", 0.9, 0.0, 1.1630871536766743, 4e-16},
    {"erfinv", 0.999999, 0.0, 3.458910737275499, 4e-16},
    {"erfinv", 0.9999999999999991, 0.0, 5.686128441310391, 4e-16},
    {"erfinv", -0.7, 0.0, -0.7328690779592167, 4e-16},
    {"erfinv", -0.05, 0.0, -0.044340387910005497, 4e-16},
    {"erfcinv", 1e-300, 0.0, 26.209469960516124, 4e-16},
    {"erfcinv", 1e-100, 0.0, 15.065574702592645, 4e-16},
    {"erfcinv", 1e-10, 0.0, 4.572824967389486, 4e-16},
    {"erfcinv", 0.3, 0.0, 0.7328690779592169, 4e-16},
    {"erfcinv", 0.5, 0.0, 0.4769362762044699, 4e-16},
    {"erfcinv", 1.0, 0.0, 0.0, 4e-16},
    {"erfcinv", 1.2, 0.0, -0.17914345462129164, 4e-16},
    {"erfcinv", 1.9, 0.0, -1.1630871536766738, 4e-16},
    {"erfcinv", 1.9999999999990905, 0.0, -5.05125408524939, 4e-16},
    {"erfcx", -5.0, 0.0, 144009798674.66104, 4e-16},
    {"erfcx", -1.0, 0.0, 5.008980080762283, 4e-16},
    {"erfcx", 0.0, 0.0, 1.0, 4e-16},
    {"erfcx", 0.3, 0.0, 0.7345993345676551, 4e-16},
    {"erfcx", 1.99, 0.0, 0.2564678367195299, 4e-16},
    {"erfcx", 2.0, 0.0, 0.25539567631050575, 4e-16},
    {"erfcx", 2.01, 0.0, 0.2543318765608183, 4e-16},
    {"erfcx", 5.0, 0.0, 0.11070463773306863, 4e-16},
    {"erfcx", 26.0, 0.0, 0.021683584850562907, 4e-16},
    {"erfcx", 30.0, 0.0, 0.01879588886141675, 4e-16},
    {"erfcx", 100000.0, 0.0, 5.6418958351954685e-06, 4e-16},
    {"erfcx", 1e+20, 0.0, 5.6418958354775626e-21, 4e-16},
    {"logerfc", -5.0, 0.0, 0.6931471805591766, 4e-16},
    {"logerfc", -0.4, 0.0, 0.3565495846142485, 4e-16},
    {"logerfc", 0.001, 0.0, -0.0011290158896213548, 4e-16},
    {"logerfc", 0.49, 0.0, -0.7167603114368805, 4e-16},
    {"logerfc", 0.51, 0.0, -0.7534145583581111, 4e-16},
    {"logerfc", 3.0, 0.0, -10.720363041981113, 4e-16},
    {"logerfc", 30.0, 0.0, -903.9741171106439, 4e-16},
    {"logerfc", 10000.0, 0.0, -100000009.78270532, 4e-16},
    {"beta", 0.5, 0.5, 3.141592653589793, 1e-14},
    {"beta", 2.0, 3.0, 0.08333333333333333, 1e-14},
    {"beta", 1e-05, 3.0, 99998.5000174998, 1e-14},
    {"beta", 100.0, 0.5, 0.177467079428307, 1e-14},
    {"beta", 30.0, 40.0, 1.0539424603796545e-21, 1e-14},
    {"beta", 1000.0, 0.001, 992.5442834860535, 1e-14},
    {"beta", -0.5, 2.25, -4.3700959238202, 1e-14},
    {"logbeta", 0.5, 0.5, 1.1447298858494002, 1e-14},
    {"logbeta", 2.0, 3.0, -2.4849066497880004, 1e-14},
    {"logbeta", 1000000.0, 1.0, -13.815510557964274, 1e-14},
    {"logbeta", 1000000.0, 1000000.0, -1386300.003362921, 1e-14},
    {"logbeta", 20.0, 15.0, -24.049722172259504, 1e-14},
    {"logbeta", 1e-05, 100000.0, 11.512804563691175, 1e-14},
    {"logbeta", 12.0, 1e-08, 18.42068071375359, 1e-14},
    {"loggamma", 1e-05, 0.0, 11.512919692895826, 4e-16},
    {"loggamma", 0.5, 0.0, 0.5723649429247001, 4e-16},
    {"loggamma", 1.5, 0.0, -0.12078223763524522, 4e-16},
    {"loggamma", 2.5, 0.0, 0.2846828704729192, 4e-16},
    {"loggamma", 3.5, 0.0, 1.2009736023470743, 4e-16},
    {"loggamma", 100.0, 0.0, 359.1342053695754, 4e-16},
    {"loggamma", 10000000000.0, 0.0, 220258509288.81058, 4e-16},
    {"logabsgamma", -0.5, 0.0, 1.2655121234846454, 4e-16},
    {"logabsgamma", -1.5, 0.0, 0.860047015376481, 4e-16},
    {"logabsgamma", -2.5, 0.0, -0.056243716497674054, 4e-16},
    {"gamma_inc_p", 0.5, 0.1, 0.345279153981423, 4e-15},
    {"gamma_inc_q", 0.5, 0.1, 0.654720846018577, 4e-15},
    {"gamma_inc_p", 0.1, 1.5, 0.9886559833621947, 4e-15},
    {"gamma_inc_q", 0.1, 1.5, 0.01134401663780527, 4e-15},
    {"gamma_inc_p", 0.001, 0.001, 0.9936876467088603, 4e-15},
    {"gamma_inc_q", 0.001, 0.001, 0.00631235329113971, 4e-15},
    {"gamma_inc_p", 1.0, 1.0, 0.6321205588285577, 4e-15},
    {"gamma_inc_q", 1.0, 1.0, 0.36787944117144233, 4e-15},
    {"gamma_inc_p", 2.0, 1.5, 0.4421745996289254, 4e-15},
    {"gamma_inc_q", 2.0, 1.5, 0.5578254003710745, 4e-15},
    {"gamma_inc_p", 5.0, 1.0, 0.0036598468273437122, 4e-15},
    {"gamma_inc_q", 5.0, 1.0, 0.9963401531726563, 4e-15},
    {"gamma_inc_p", 5.0, 20.0, 0.9999830552560699, 4e-15},
    {"gamma_inc_q", 5.0, 20.0, 1.6944743930067385e-05, 4e-15},
    {"gamma_inc_p", 30.0, 28.0, 0.3773896943143976, 1e-14},
    {"gamma_inc_q", 30.0, 28.0, 0.6226103056856024, 1e-14},
    {"gamma_inc_p", 100.0, 100.0, 0.5132987982791487, 1e-14},
    {"gamma_inc_q", 100.0, 100.0, 0.48670120172085135, 1e-14},
    {"gamma_inc_p", 1000.0, 1100.0, 0.99894067674607, 1e-13},
    {"gamma_inc_q", 1000.0, 1100.0, 0.0010593232539299773, 1e-13},
    {"gamma_inc_p", 3.0, 200.0, 1.0, 1e-13},
    {"gamma_inc_q", 3.0, 200.0, 2.7956093736608836e-83, 1e-13},
    {"gamma_inc_p", 0.7, 1.9, 0.9147712607016225, 4e-15},
    {"gamma_inc_q", 0.7, 1.9, 0.0852287392983775, 4e-15},
    {"expint", 1e-10, 0.0, 22.448635265138925, 2e-15},
    {"expint", 0.1, 0.0, 1.8229239584193906, 2e-15},
    {"expint", 0.9, 0.0, 0.26018393932599965, 2e-15},
    {"expint", 1.0, 0.0, 0.21938393439552029, 2e-15},
    {"expint", 1.1, 0.0, 0.18599090453604014, 2e-15},
    {"expint", 2.0, 0.0, 0.04890051070806112, 2e-15},
    {"expint", 10.0, 0.0, 4.156968929685325e-06, 2e-15},
    {"expint", 100.0, 0.0, 3.683597761682032e-46, 2e-15},
    {"expint", 700.0, 0.0, 1.406518766234033e-307, 2e-15},
    {"j0", 0.5, 0.0, 0.9384698072408129, 1e-15},
    {"j1", 0.5, 0.0, 0.2422684576748739, 2e-15},
    {"j0", 3.0, 0.0, -0.26005195490193345, 1e-15},
    {"j1", 3.0, 0.0, 0.3390589585259365, 2e-15},
    {"j0", 20.0, 0.0, 0.16702466434058316, 1e-15},
    {"j1", 20.0, 0.0, 0.06683312417585005, 2e-15},
    {"j0", -7.5, 0.0, 0.2663396578803784, 1e-15},
    {"j1", -7.5, 0.0, -0.1352484275797055, 2e-15},
    {"y0", 0.5, 0.0, -0.44451873350670656, 1e-15},
    {"y1", 0.5, 0.0, -1.471472392670243, 1e-15},
    {"y0", 3.0, 0.0, 0.3768500100127904, 1e-15},
    {"y1", 3.0, 0.0, 0.3246744247918, 1e-15},
    {"y0", 20.0, 0.0, 0.06264059680938383, 1e-15},
    {"y1", 20.0, 0.0, -0.1655116143625213, 1e-15},
    {"jn", 2.0, 1.5, 0.23208767214421472, 2e-14},
    {"yn", 2.0, 1.5, -0.9321937597629739, 2e-14},
    {"jn", 5.0, 3.0, 0.043028434877047585, 2e-14},
    {"yn", 5.0, 3.0, -1.9059459538286738, 2e-14},
    {"jn", -3.0, 4.5, -0.4247039729774556, 2e-14},
    {"yn", -3.0, 4.5, 0.009013681593688273, 2e-14},
    {"jn", 10.0, 25.0, -0.07517984394852328, 2e-14},
    {"yn", 10.0, 25.0, -0.1487183904998065, 2e-14},
};

static double eval_named(const char *fn, double a, double b)
{
    double p, q;
    int s;
    if (!strcmp(fn, "digamma"))
        return cr_sf_digamma(a);
    if (!strcmp(fn, "trigamma"))
        return cr_sf_trigamma(a);
    if (!strcmp(fn, "polygamma"))
        return cr_sf_polygamma((int)a, b);
    if (!strcmp(fn, "erfinv"))
        return cr_sf_erfinv(a);
    if (!strcmp(fn, "erfcinv"))
        return cr_sf_erfcinv(a);
    if (!strcmp(fn, "erfcx"))
        return cr_sf_erfcx(a);
    if (!strcmp(fn, "logerfc"))
        return cr_sf_logerfc(a);
    if (!strcmp(fn, "beta"))
        return cr_sf_beta(a, b);
    if (!strcmp(fn, "logbeta"))
        return cr_sf_logbeta(a, b);
    if (!strcmp(fn, "loggamma"))
        return cr_sf_loggamma(a);
    if (!strcmp(fn, "logabsgamma"))
        return cr_sf_logabsgamma(a, &s);
    if (!strcmp(fn, "gamma_inc_p") || !strcmp(fn, "gamma_inc_q")) {
        cr_sf_gamma_inc(a, b, &p, &q);
        return fn[10] == 'p' ? p : q;
    }
    if (!strcmp(fn, "expint"))
        return cr_sf_expint(a);
    if (!strcmp(fn, "j0"))
        return j0(a);
    if (!strcmp(fn, "j1"))
        return j1(a);
    if (!strcmp(fn, "y0"))
        return y0(a);
    if (!strcmp(fn, "y1"))
        return y1(a);
    if (!strcmp(fn, "jn"))
        return jn((int)a, b);
    if (!strcmp(fn, "yn"))
        return yn((int)a, b);
    fail_msg("unknown function %s", fn);
    return 0;
}

static void test_primals_tabulated(void **state)
{
    (void)state;
    int bad = 0;
    double worst = 0;
    for (size_t i = 0; i < NELEM(k_refs); i++) {
        const ref_value *r = &k_refs[i];
        double v = eval_named(r->fn, r->a, r->b);
        double e = v == r->want ? 0 : fabs(v - r->want) / fabs(r->want);
        if (!(e <= r->rtol)) {
            print_error("%s(%.17g, %.17g) = %.17g, want %.17g (relative error %.3g > %.3g)\n",
                        r->fn, r->a, r->b, v, r->want, e, r->rtol);
            bad++;
        }
        worst = fmax(worst, e);
    }
    print_message("%zu tabulated values, largest relative error %.3g\n", NELEM(k_refs), worst);
    assert_int_equal(bad, 0);
}

/* Values the definitions fix exactly, and the domains. */
static void test_primal_special_values(void **state)
{
    (void)state;
    assert_true(cr_sf_erfinv(0.0) == 0.0 && !signbit(cr_sf_erfinv(0.0)));
    assert_true(signbit(cr_sf_erfinv(-0.0)));
    assert_true(cr_sf_erfinv(1.0) == HUGE_VAL && cr_sf_erfinv(-1.0) == -HUGE_VAL);
    assert_true(isnan(cr_sf_erfinv(1.5)) && isnan(cr_sf_erfcinv(-0.1)));
    assert_true(cr_sf_erfcinv(0.0) == HUGE_VAL && cr_sf_erfcinv(2.0) == -HUGE_VAL);
    assert_true(cr_sf_erfcinv(1.0) == 0.0);
    assert_true(cr_sf_digamma(0.0) == -HUGE_VAL && cr_sf_digamma(-0.0) == HUGE_VAL);
    assert_true(isnan(cr_sf_digamma(-3.0)));
    assert_true(cr_sf_trigamma(-2.0) == HUGE_VAL);
    assert_true(isnan(cr_sf_polygamma(-1, 2.0)));
    assert_true(cr_sf_expint(0.0) == HUGE_VAL && isnan(cr_sf_expint(-1.0)));
    assert_true(cr_sf_erfcx(-30.0) == HUGE_VAL);
    assert_true(isnan(cr_sf_loggamma(-0.5))); /* Gamma(-0.5) < 0 */
    int s = 0;
    /* |Gamma(-1/2)| = 2 sqrt(pi) */
    assert_true(fabs(cr_sf_logabsgamma(-0.5, &s) - 1.2655121234846454) < 4e-16);
    assert_int_equal(s, -1);
    double p, q;
    cr_sf_gamma_inc(2.0, 0.0, &p, &q);
    assert_true(p == 0 && q == 1);
    cr_sf_gamma_inc(-1.0, 1.0, &p, &q);
    assert_true(isnan(p) && isnan(q));
    /* P + Q = 1 where both are computed directly. */
    cr_sf_gamma_inc(0.3, 1.2, &p, &q);
    assert_true(fabs(p + q - 1) < 1e-15);
}

/* ---- Primals against MPFR (when the build has it) ------------------------------------------ */

#ifdef CR_HAVE_MPFR
#include <mpfr.h>

/* 256 bits: far more than needed for the correctly rounded double of any value here. */
#define MP_PREC 256

/* A reference: y = f(a, b) to MP_PREC bits. */
typedef void (*mp_fn)(mpfr_t y, double a, double b);

static void mp_digamma(mpfr_t y, double a, double b)
{
    (void)b;
    mpfr_set_d(y, a, MPFR_RNDN);
    mpfr_digamma(y, y, MPFR_RNDN);
}

/* erf(y) = a, solved by Newton's method at 256 bits from the double result (quadratic
 * convergence from 1e-16: three steps reach 1e-64 and beyond). */
static void mp_erfinv_like(mpfr_t y, double a, bool complement, double start)
{
    mpfr_t f, d, t;
    mpfr_inits2(MP_PREC, f, d, t, (mpfr_ptr)0);
    mpfr_set_d(y, start, MPFR_RNDN);
    for (int it = 0; it < 3; it++) {
        if (complement)
            mpfr_erfc(f, y, MPFR_RNDN);
        else
            mpfr_erf(f, y, MPFR_RNDN);
        mpfr_sub_d(f, f, a, MPFR_RNDN);
        /* f' = ±2/sqrt(pi) exp(-y²) */
        mpfr_sqr(t, y, MPFR_RNDN);
        mpfr_neg(t, t, MPFR_RNDN);
        mpfr_exp(d, t, MPFR_RNDN);
        mpfr_const_pi(t, MPFR_RNDN);
        mpfr_sqrt(t, t, MPFR_RNDN);
        mpfr_div(d, d, t, MPFR_RNDN);
        mpfr_mul_ui(d, d, 2, MPFR_RNDN);
        if (complement)
            mpfr_neg(d, d, MPFR_RNDN);
        mpfr_div(f, f, d, MPFR_RNDN);
        mpfr_sub(y, y, f, MPFR_RNDN);
    }
    mpfr_clears(f, d, t, (mpfr_ptr)0);
}

static void mp_erfinv(mpfr_t y, double a, double b)
{
    (void)b;
    mp_erfinv_like(y, a, false, cr_sf_erfinv(a));
}

static void mp_erfcinv(mpfr_t y, double a, double b)
{
    (void)b;
    mp_erfinv_like(y, a, true, cr_sf_erfcinv(a));
}

static void mp_erfcx(mpfr_t y, double a, double b)
{
    (void)b;
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_set_d(t, a, MPFR_RNDN);
    mpfr_erfc(y, t, MPFR_RNDN);
    mpfr_sqr(t, t, MPFR_RNDN);
    mpfr_exp(t, t, MPFR_RNDN);
    mpfr_mul(y, y, t, MPFR_RNDN);
    mpfr_clear(t);
}

static void mp_logerfc(mpfr_t y, double a, double b)
{
    (void)b;
    mpfr_set_d(y, a, MPFR_RNDN);
    mpfr_erfc(y, y, MPFR_RNDN);
    mpfr_log(y, y, MPFR_RNDN);
}

static void mp_beta(mpfr_t y, double a, double b)
{
    mpfr_t t;
    mpfr_init2(t, MP_PREC);
    mpfr_set_d(y, a, MPFR_RNDN);
    mpfr_set_d(t, b, MPFR_RNDN);
    mpfr_beta(y, y, t, MPFR_RNDN);
    mpfr_clear(t);
}

static void mp_logbeta(mpfr_t y, double a, double b)
{
    mp_beta(y, a, b);
    mpfr_abs(y, y, MPFR_RNDN);
    mpfr_log(y, y, MPFR_RNDN);
}

static void mp_loggamma(mpfr_t y, double a, double b)
{
    (void)b;
    mpfr_set_d(y, a, MPFR_RNDN);
    mpfr_lngamma(y, y, MPFR_RNDN);
}

/* Q(a, x) = Gamma(a, x) / Gamma(a); P = 1 - Q (at 256 bits, exact enough for P > 1e-60). */
static void mp_gamma_q(mpfr_t y, double a, double x)
{
    mpfr_t t, u;
    mpfr_inits2(MP_PREC, t, u, (mpfr_ptr)0);
    mpfr_set_d(t, a, MPFR_RNDN);
    mpfr_set_d(u, x, MPFR_RNDN);
    mpfr_gamma_inc(y, t, u, MPFR_RNDN);
    mpfr_gamma(t, t, MPFR_RNDN);
    mpfr_div(y, y, t, MPFR_RNDN);
    mpfr_clears(t, u, (mpfr_ptr)0);
}

static void mp_gamma_p(mpfr_t y, double a, double x)
{
    mp_gamma_q(y, a, x);
    mpfr_ui_sub(y, 1, y, MPFR_RNDN);
}

/* E1(x) = -Ei(-x) (mpfr_eint of a negative argument is -E1 of its opposite). */
static void mp_expint(mpfr_t y, double a, double b)
{
    (void)b;
    mpfr_set_d(y, -a, MPFR_RNDN);
    mpfr_eint(y, y, MPFR_RNDN);
    mpfr_neg(y, y, MPFR_RNDN);
}

static void mp_j0(mpfr_t y, double a, double b)
{
    (void)b;
    mpfr_set_d(y, a, MPFR_RNDN);
    mpfr_j0(y, y, MPFR_RNDN);
}

static void mp_y1(mpfr_t y, double a, double b)
{
    (void)b;
    mpfr_set_d(y, a, MPFR_RNDN);
    mpfr_y1(y, y, MPFR_RNDN);
}

static void mp_jn(mpfr_t y, double a, double b)
{
    mpfr_set_d(y, b, MPFR_RNDN);
    mpfr_jn(y, (long)a, y, MPFR_RNDN);
}

static void mp_yn(mpfr_t y, double a, double b)
{
    mpfr_set_d(y, b, MPFR_RNDN);
    mpfr_yn(y, (long)a, y, MPFR_RNDN);
}

/* Deterministic points: uniform in [lo, hi], or log-uniform when log_scale. */
static double sweep_point(uint64_t *s, double lo, double hi, bool log_scale)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    double u = (double)(*s >> 11) * 0x1.0p-53;
    return log_scale ? exp(log(lo) + u * (log(hi) - log(lo))) : lo + u * (hi - lo);
}

typedef struct sweep {
    const char *fn; /* name for eval_named */
    mp_fn ref;
    double lo[2], hi[2];
    bool log_scale[2];
    int int_first; /* the first argument is an integer order */
    double rtol;   /* bound on |v - r| / max(|r|, floor) */
    double floor;  /* where absolute error takes over (zeros of the function) */
    int npoints;   /* 0: 100 */
} sweep;

static void test_primals_mpfr(void **state)
{
    (void)state;
    static const sweep sweeps[] = {
        {"digamma", mp_digamma, {1e-6, 0}, {1e6, 0}, {true, false}, 0, 6e-15, 0, 0},
        {"digamma", mp_digamma, {1.2, 0}, {1.7, 0}, {false, false}, 0, 6e-15, 0, 0},
        {"digamma", mp_digamma, {-20, 0}, {0, 0}, {false, false}, 0, 4e-15, 1, 0},
        {"erfinv", mp_erfinv, {-1, 0}, {1, 0}, {false, false}, 0, 6e-16, 0, 0},
        {"erfcinv", mp_erfcinv, {1e-300, 0}, {2, 0}, {true, false}, 0, 6e-16, 0, 0},
        {"erfcx", mp_erfcx, {-26, 0}, {40, 0}, {false, false}, 0, 6e-16, 0, 0},
        {"erfcx", mp_erfcx, {1e-3, 0}, {1e8, 0}, {true, false}, 0, 6e-16, 0, 0},
        {"logerfc", mp_logerfc, {-10, 0}, {40, 0}, {false, false}, 0, 6e-16, 0, 0},
        {"beta", mp_beta, {0.01, 0.01}, {60, 60}, {true, true}, 0, 2e-14, 0, 0},
        {"logbeta", mp_logbeta, {1e-3, 1e-3}, {1e5, 1e5}, {true, true}, 0, 4e-15, 1, 0},
        {"loggamma", mp_loggamma, {1e-6, 0}, {1e6, 0}, {true, false}, 0, 6e-16, 1, 0},
        {"gamma_inc_q", mp_gamma_q, {0.05, 0.01}, {60, 80}, {true, true}, 0, 3e-14, 0, 50},
        {"gamma_inc_p", mp_gamma_p, {0.05, 0.01}, {60, 80}, {true, true}, 0, 3e-14, 1e-60, 50},
        {"expint", mp_expint, {1e-8, 0}, {700, 0}, {true, false}, 0, 3e-15, 0, 0},
        {"j0", mp_j0, {-60, 0}, {60, 0}, {false, false}, 0, 2e-15, 0.05, 0},
        {"y1", mp_y1, {0.01, 0}, {60, 0}, {true, false}, 0, 2e-15, 0.05, 0},
        {"jn", mp_jn, {-4, 0.01}, {12, 40}, {false, false}, 1, 4e-14, 0.05, 0},
        {"yn", mp_yn, {0, 0.5}, {12, 40}, {false, false}, 1, 4e-14, 0.05, 0},
    };
    mpfr_t r;
    mpfr_init2(r, MP_PREC);
    int bad = 0;
    for (size_t i = 0; i < NELEM(sweeps); i++) {
        const sweep *sw = &sweeps[i];
        uint64_t seed = 12345 + i;
        double worst = 0, wa = 0, wb = 0;
        for (int k = 0; k < (sw->npoints ? sw->npoints : 100); k++) {
            double a = sweep_point(&seed, sw->lo[0], sw->hi[0], sw->log_scale[0]);
            double b = sweep_point(&seed, sw->lo[1], sw->hi[1], sw->log_scale[1]);
            if (sw->int_first)
                a = nearbyint(a);
            sw->ref(r, a, b);
            double want = mpfr_get_d(r, MPFR_RNDN);
            if (!strcmp(sw->fn, "gamma_inc_p") && fabs(want) < sw->floor)
                continue; /* 1 - Q at 256 bits is not a reference below that */
            double v = eval_named(sw->fn, a, b);
            double floor = strcmp(sw->fn, "gamma_inc_p") ? sw->floor : 0;
            double e = v == want ? 0 : fabs(v - want) / fmax(fabs(want), floor);
            if (!(e <= worst)) {
                worst = e;
                wa = a;
                wb = b;
            }
        }
        print_message("MPFR %-12s max error %.3g at (%.17g, %.17g) [bound %.3g]\n", sw->fn, worst,
                      wa, wb, sw->rtol);
        if (!(worst <= sw->rtol))
            bad++;
    }
    mpfr_clear(r);
    mpfr_free_cache();
    assert_int_equal(bad, 0);
}
#endif /* CR_HAVE_MPFR */

/* ---- Derivatives against finite differences ---------------------------------------------- */

/* A real function of one variable for the FD engine: the primal in argument k, the other
 * argument fixed. */
typedef struct fd_env {
    int kind; /* 0: f1(x), 1: f2(x, y), 2: fo(n, x), 3: gamma_inc's P or Q */
    double (*f1)(double);
    double (*f2)(double, double);
    double (*fo)(int, double);
    double args[2];
    int n;
    size_t k;
    int out; /* gamma_inc: 0 for P, 1 for Q */
} fd_env;

static cr_status fd_fn(double t, double *y, void *env)
{
    const fd_env *e = env;
    double a[2] = {e->args[0], e->args[1]};
    a[e->k] += t;
    switch (e->kind) {
    case 0:
        *y = e->f1(a[0]);
        break;
    case 1:
        *y = e->f2(a[0], a[1]);
        break;
    case 2:
        *y = e->fo(e->n, a[1]);
        break;
    default: {
        double p, q;
        cr_sf_gamma_inc(a[0], a[1], &p, &q);
        *y = e->out == 0 ? p : q;
    }
    }
    return isfinite(*y) ? CR_OK : CR_EDOMAIN;
}

/* The partial derivative in argument k by an adaptive 5-point central difference within
 * `range` of the point; *tol gets the tolerance for comparing a rule with it. */
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

/* frule with a unit tangent on each argument in turn and the pullback of 1, against the
 * finite-difference partials d[j] (NaN: an integer order, which must get NoTangent). */
static void check_scalar_rule(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                              const double *d, const double *tol, const char *name)
{
    char what[200];
    for (size_t j = 0; j < nargs; j++) {
        if (isnan(d[j]))
            continue;
        cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_zero()};
        dargs[j + 1] = cr_tangent_f64(1.0);
        cr_value y;
        cr_tangent dy;
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, f, args, nargs, &y, &dy), CR_OK);
        assert_int_equal(dy.tag, CR_TAN_F64);
        snprintf(what, sizeof what, "%s frule, argument %zu", name, j + 1);
        check_close(dy.u.f64, d[j], tol[j], what);
    }
    cr_value y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, f, args, nargs, &y, &pb), CR_OK);
    cr_tangent g = cr_tangent_f64(1.0), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, nargs + 1), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NONE);
    for (size_t j = 0; j < nargs; j++) {
        if (isnan(d[j])) {
            assert_int_equal(dx[j + 1].tag, CR_TAN_NONE);
            continue;
        }
        assert_int_equal(dx[j + 1].tag, CR_TAN_F64);
        snprintf(what, sizeof what, "%s pullback, argument %zu", name, j + 1);
        check_close(dx[j + 1].u.f64, d[j], tol[j], what);
    }
    cr_arena_reset(fx->arena);
}

typedef struct point1 {
    double x, range;
} point1;

static void check_unary(fixture *fx, const cr_value *f, double (*prim)(double), const char *name,
                        const point1 *pts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fd_env e = {.kind = 0, .f1 = prim, .args = {pts[i].x, 0}};
        double tol = 0, d = fd_partial(&e, 0, pts[i].range, &tol);
        cr_value x = cr_value_f64(pts[i].x);
        char what[100];
        snprintf(what, sizeof what, "%s(%.17g)", name, pts[i].x);
        check_scalar_rule(fx, f, &x, 1, &d, &tol, what);
    }
}

static void test_digamma_family(void **state)
{
    /* Including the positive zero of digamma and negative arguments. */
    static const point1 dg[] = {{0.3, 0.05},  {1.4616321449683622, 0.1},
                                {1.47, 0.1},  {3.5, 0.25},
                                {12.0, 0.25}, {150.0, 1.0},
                                {-0.4, 0.05}, {-2.7, 0.05},
                                {-11.2, 0.05}};
    check_unary(*state, &cr_fn_digamma, cr_sf_digamma, "digamma", dg, NELEM(dg));
    check_unary(*state, &cr_fn_trigamma, cr_sf_trigamma, "trigamma", dg, NELEM(dg));
    check_unary(*state, &cr_fn_loggamma, cr_sf_loggamma, "loggamma", dg, 6);
}

static void test_error_functions(void **state)
{
    static const point1 inv[] = {{0.0, 0.1},   {1e-5, 1e-6}, {0.3, 0.1},
                                 {-0.7, 0.05}, {0.99, 1e-3}, {1 - 1e-9, 1e-10}};
    check_unary(*state, &cr_fn_erfinv, cr_sf_erfinv, "erfinv", inv, NELEM(inv));
    static const point1 cinv[] = {{1e-12, 1e-13}, {1e-3, 1e-4}, {0.4, 0.1},
                                  {1.0, 0.1},     {1.7, 0.05},  {2 - 1e-6, 1e-7}};
    check_unary(*state, &cr_fn_erfcinv, cr_sf_erfcinv, "erfcinv", cinv, NELEM(cinv));
    /* Both sides of 2, where erfcx changes method. */
    static const point1 ex[] = {{-4.0, 0.1},   {-0.5, 0.1}, {0.0, 0.1},  {1.0, 0.1}, {1.99, 0.005},
                                {2.01, 0.005}, {6.0, 0.25}, {40.0, 1.0}, {3e3, 10.0}};
    check_unary(*state, &cr_fn_erfcx, cr_sf_erfcx, "erfcx", ex, NELEM(ex));
    check_unary(*state, &cr_fn_logerfc, cr_sf_logerfc, "logerfc", ex, NELEM(ex));
}

static void test_expint(void **state)
{
    /* Both sides of 1, where E1 changes method. */
    static const point1 pts[] = {{1e-4, 1e-5},  {0.2, 0.05}, {0.99, 0.005},
                                 {1.01, 0.005}, {3.0, 0.25}, {40.0, 1.0}};
    check_unary(*state, &cr_fn_expint, cr_sf_expint, "expint", pts, NELEM(pts));
}

static void test_bessel(void **state)
{
    /* Including 0 (J1'(0) = 1/2) and the first zeros of J0, J1 and Y0. */
    static const point1 j[] = {
        {0.0, 0.1},  {0.7, 0.1}, {2.404825557695773, 0.1}, {3.8317059702075125, 0.1},
        {-6.5, 0.1}, {30.0, 0.5}};
    check_unary(*state, &cr_fn_j0, j0, "j0", j, NELEM(j));
    check_unary(*state, &cr_fn_j1, j1, "j1", j, NELEM(j));
    static const point1 y[] = {
        {0.05, 0.01}, {0.8, 0.1}, {0.8935769662791675, 0.1}, {5.0, 0.25}, {30.0, 0.5}};
    check_unary(*state, &cr_fn_y0, y0, "y0", y, NELEM(y));
    check_unary(*state, &cr_fn_y1, y1, "y1", y, NELEM(y));
}

/* ---- Two real arguments: beta, logbeta ---------------------------------------------------- */

static void check_binary(fixture *fx, const cr_value *f, double (*prim)(double, double),
                         const char *name, double a, double b, double range)
{
    fd_env e = {.kind = 1, .f2 = prim, .args = {a, b}};
    double tol[2] = {0, 0}, d[2];
    d[0] = fd_partial(&e, 0, range, &tol[0]);
    d[1] = fd_partial(&e, 1, range, &tol[1]);
    cr_value args[2] = {cr_value_f64(a), cr_value_f64(b)};
    char what[100];
    snprintf(what, sizeof what, "%s(%g, %g)", name, a, b);
    check_scalar_rule(fx, f, args, 2, d, tol, what);
}

static void test_beta(void **state)
{
    /* Small, large, very unequal and negative arguments. */
    static const double pts[][3] = {{0.5, 0.5, 0.1},   {2.0, 3.0, 0.25},  {0.05, 7.0, 0.01},
                                    {12.0, 1.5, 0.25}, {40.0, 25.0, 0.5}, {1e3, 2.0, 1.0},
                                    {-0.5, 2.25, 0.05}};
    for (size_t i = 0; i < NELEM(pts); i++) {
        check_binary(*state, &cr_fn_beta, cr_sf_beta, "beta", pts[i][0], pts[i][1], pts[i][2]);
        check_binary(*state, &cr_fn_logbeta, cr_sf_logbeta, "logbeta", pts[i][0], pts[i][1],
                     pts[i][2]);
    }
}

/* ---- Integer orders: polygamma, jn, yn ---------------------------------------------------- */

static void check_order(fixture *fx, const cr_value *f, double (*prim)(int, double),
                        const char *name, int n, double x, double range)
{
    fd_env e = {.kind = 2, .fo = prim, .n = n, .args = {0, x}};
    double tol[2] = {0, 0}, d[2] = {(double)NAN, 0};
    d[1] = fd_partial(&e, 1, range, &tol[1]);
    cr_value args[2] = {cr_value_i64(n), cr_value_f64(x)};
    char what[100];
    snprintf(what, sizeof what, "%s(%d, %g)", name, n, x);
    check_scalar_rule(fx, f, args, 2, d, tol, what);
}

static void test_orders(void **state)
{
    static const struct {
        int n;
        double x, range;
    } pg[] = {{0, 2.5, 0.25}, {1, 0.7, 0.1},   {2, 3.0, 0.25},
              {3, 0.4, 0.05}, {2, -1.3, 0.05}, {5, 12.0, 0.5}};
    for (size_t i = 0; i < NELEM(pg); i++)
        check_order(*state, &cr_fn_polygamma, cr_sf_polygamma, "polygamma", pg[i].n, pg[i].x,
                    pg[i].range);
    static const struct {
        int n;
        double x;
    } bj[] = {{0, 1.5}, {1, 0.0}, {2, 3.0}, {5, 7.5}, {-3, 4.0}, {12, 20.0}};
    for (size_t i = 0; i < NELEM(bj); i++) {
        check_order(*state, &cr_fn_jn, jn, "jn", bj[i].n, bj[i].x, 0.1);
        if (bj[i].x > 0)
            check_order(*state, &cr_fn_yn, yn, "yn", bj[i].n, bj[i].x, 0.1);
    }
    /* A real (not integer) order has no rule: C's jn takes an int. */
    fixture *fx = *state;
    cr_value args[2] = {cr_value_f64(2.0), cr_value_f64(1.0)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_jn, args, 2, &y, &pb), CR_NOTHING);
}

/* ---- logabsgamma: a tuple output ----------------------------------------------------------- */

/* log|Gamma(x)|, for finite differences where Gamma < 0. */
static double log_abs_gamma(double x)
{
    int s;
    return cr_sf_logabsgamma(x, &s);
}

static void test_logabsgamma(void **state)
{
    fixture *fx = *state;
    static const double xs[] = {0.3, 2.5, -0.5, -1.7};
    for (size_t i = 0; i < NELEM(xs); i++) {
        double x0 = xs[i];
        cr_value x = cr_value_f64(x0), y;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_logabsgamma, &x, 1, &y, &pb), CR_OK);
        assert_int_equal(y.kind, CR_KIND_STRUCT);
        const double *yv = y.u.obj.ptr;
        int s;
        assert_true(yv[0] == cr_sf_logabsgamma(x0, &s));
        assert_true(yv[1] == (double)s);
        fd_env e = {.kind = 0, .f1 = log_abs_gamma, .args = {x0, 0}};
        double tol = 0, d = fd_partial(&e, 0, 0.05, &tol);
        cr_tangent seeds[2] = {cr_tangent_f64(1.0), cr_tangent_zero()}, g, dx[2];
        assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, seeds, 2, &g), CR_OK);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 2), CR_OK);
        assert_int_equal(dx[1].tag, CR_TAN_F64);
        check_close(dx[1].u.f64, d, tol, "logabsgamma pullback");
        /* The sign output has a zero derivative. */
        seeds[0] = cr_tangent_zero();
        seeds[1] = cr_tangent_f64(1.0);
        assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, seeds, 2, &g), CR_OK);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 2), CR_OK);
        assert_true(cr_tangent_is_zero(dx[1]) || (dx[1].tag == CR_TAN_F64 && dx[1].u.f64 == 0));
        cr_arena_reset(fx->arena);
    }
}

/* ---- gamma_inc: (P, Q), with a NotImplemented derivative in the order ---------------------- */

static void test_gamma_inc(void **state)
{
    fixture *fx = *state;
    static const double pts[][3] = {{0.5, 0.3, 0.05}, {0.2, 1.5, 0.1},   {2.0, 1.5, 0.25},
                                    {5.0, 20.0, 0.5}, {30.0, 28.0, 0.5}, {1.0, 0.0, 0.0}};
    for (size_t i = 0; i < NELEM(pts); i++) {
        double a = pts[i][0], x = pts[i][1];
        cr_value args[2] = {cr_value_f64(a), cr_value_f64(x)}, y;
        double dP, dQ, tolP = 0, tolQ = 0;
        if (x > 0) {
            fd_env e = {.kind = 3, .args = {a, x}, .out = 0};
            dP = fd_partial(&e, 1, pts[i][2], &tolP);
            e.out = 1;
            dQ = fd_partial(&e, 1, pts[i][2], &tolQ);
        } else {
            dP = 1; /* x^(a-1) e^-x / Gamma(a) at a = 1, x = 0 */
            dQ = -1;
        }
        /* frule in x: a structural tangent (dP, dQ). */
        cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_f64(1.0)}, dy;
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_gamma_inc, args, 2, &y, &dy),
                         CR_OK);
        assert_int_equal(y.kind, CR_KIND_STRUCT);
        const double *pq = y.u.obj.ptr;
        double p, q;
        cr_sf_gamma_inc(a, x, &p, &q);
        assert_true(pq[0] == p && pq[1] == q);
        assert_int_equal(dy.tag, CR_TAN_STRUCT);
        check_close(cr_tangent_field(dy, 0).u.f64, dP, tolP, "gamma_inc frule, P");
        check_close(cr_tangent_field(dy, 1).u.f64, dQ, tolQ, "gamma_inc frule, Q");
        /* frule in a: NotImplemented, a tangent and not an error. */
        dargs[1] = cr_tangent_f64(1.0);
        dargs[2] = cr_tangent_zero();
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_gamma_inc, args, 2, &y, &dy),
                         CR_OK);
        assert_int_equal(cr_tangent_field(dy, 0).tag, CR_TAN_NOTIMPL);
        assert_int_equal(cr_tangent_field(dy, 1).tag, CR_TAN_NOTIMPL);
        /* pullback of (1, 0) and (0, 1): NotImplemented for a, the partials for x. */
        for (int k = 0; k < 2; k++) {
            cr_pullback pb;
            assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gamma_inc, args, 2, &y, &pb), CR_OK);
            cr_tangent seeds[2] = {cr_tangent_f64(k == 0 ? 1.0 : 0.0),
                                   cr_tangent_f64(k == 1 ? 1.0 : 0.0)};
            cr_tangent g, dx[3];
            assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, seeds, 2, &g), CR_OK);
            assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
            assert_int_equal(dx[0].tag, CR_TAN_NONE);
            assert_int_equal(dx[1].tag, CR_TAN_NOTIMPL);
            assert_non_null(strstr(dx[1].u.ni->msg, "not implemented"));
            assert_int_equal(dx[2].tag, CR_TAN_F64);
            check_close(dx[2].u.f64, k == 0 ? dP : dQ, k == 0 ? tolP : tolQ,
                        "gamma_inc pullback, x");
        }
        cr_arena_reset(fx->arena);
    }
    /* An integer order gets NoTangent rather than NotImplemented. */
    cr_value args[2] = {cr_value_i64(3), cr_value_f64(2.0)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gamma_inc, args, 2, &y, &pb), CR_OK);
    cr_tangent seeds[2] = {cr_tangent_f64(1.0), cr_tangent_zero()}, g, dx[3];
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, seeds, 2, &g), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    cr_arena_reset(fx->arena);
}

/* ---- Float arguments, registration ------------------------------------------------------- */

static void test_float_and_registration(void **state)
{
    fixture *fx = *state;
    cr_value x = cr_value_f32(0.25f), y;
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f32(1.0f)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_erfinv, &x, 1, &y, &dy), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    assert_int_equal(dy.tag, CR_TAN_F32);
    assert_true(fabs((double)y.u.f32 - cr_sf_erfinv(0.25)) < 1e-7);
    cr_value args[2] = {cr_value_i64(3), cr_value_f32(2.5f)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_jn, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    cr_tangent g = cr_tangent_f32(1.0f), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    assert_int_equal(dx[2].tag, CR_TAN_F32);
    cr_arena_reset(fx->arena);

    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    static const char *names[] = {"digamma",     "trigamma",  "polygamma", "erfinv",  "erfcinv",
                                  "erfcx",       "logerfc",   "beta",      "logbeta", "loggamma",
                                  "logabsgamma", "gamma_inc", "expint",    "j0",      "j1",
                                  "jn",          "y0",        "y1",        "yn"};
    for (size_t i = 0; i < NELEM(names); i++)
        if (cr_registry_find(cr_registry_builtin(), names[i]) == NULL)
            fail_msg("%s is not registered", names[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_primals_tabulated),
        cmocka_unit_test(test_primal_special_values),
#ifdef CR_HAVE_MPFR
        cmocka_unit_test(test_primals_mpfr),
#endif
        cmocka_unit_test_setup_teardown(test_digamma_family, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_functions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bessel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_beta, setup, teardown),
        cmocka_unit_test_setup_teardown(test_orders, setup, teardown),
        cmocka_unit_test_setup_teardown(test_logabsgamma, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gamma_inc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_float_and_registration, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
