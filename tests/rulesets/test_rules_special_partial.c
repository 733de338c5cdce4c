/*
 * The parts of SpecialFunctions' two-argument functions that need a non-positive or
 * general real parameter (rules_special.h): gamma(a, x) and loggamma(a, x) for a <= 0
 * (gamma_upper, loggamma_upper), the generalised exponential integral expint(ν, x) = E_ν(x)
 * and expintx(ν, x) = e^x E_ν(x) of real order (expint2, expintx2), including x = 0 and,
 * for integer ν <= 0, x < 0.
 *
 * Primals: against MPFR's mpfr_gamma_inc (Γ(a, x) for any real a, and E_ν(x) =
 * x^(ν-1) Γ(1-ν, x), DLMF 8.19.1) at 512 bits, and, for integer ν <= 0 at x < 0 where
 * mpfr_gamma_inc does not apply, against the closed form n! x^(-n-1) e^(-x) Σ x^k/k!
 * (DLMF 8.19.7) summed in MPFR. Derivatives: the registrations pass the rule tester (finite
 * differences at random and hard points); frules and pullbacks at chosen points, and the
 * one-sided derivative at x = 0, against adaptive finite differences (chainrules/fd.h).
 * The order gets NotImplemented (NoTangent when it is an integer value).
 */
#include "test_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Special values ------------------------------------------------------------------------ */

static void test_values(void **state)
{
    (void)state;
    /* Γ(0, x) = E1(x); Γ(a, 0) diverges for a <= 0; complex for x < 0 */
    for (double x = 0.05; x < 50; x *= 1.9)
        ASSERT_CLOSE(cr_sf_gamma_upper(0.0, x), cr_sf_expint(x), 4e-16);
    assert_true(cr_sf_gamma_upper(-1.5, 0.0) == HUGE_VAL &&
                cr_sf_gamma_upper(0.0, 0.0) == HUGE_VAL);
    assert_true(isnan(cr_sf_gamma_upper(-0.5, -1.0)) && isnan(cr_sf_loggamma_upper(-0.5, -1.0)));
    /* Γ(-1, x) = E2(x)/x = (e^-x - x E1(x))/x (DLMF 8.19.1, 8.19.12) at x = 1/2 */
    double x = 0.5;
    ASSERT_CLOSE(cr_sf_gamma_upper(-1.0, x), (exp(-x) - x * cr_sf_expint(x)) / x, 1e-15);
    /* E_1 = E1, E_0 = e^-x/x, E_ν(0) = 1/(ν-1) for ν > 1 and +inf otherwise (DLMF 8.19.6) */
    for (x = 0.01; x < 300; x *= 2.3) {
        ASSERT_CLOSE(cr_sf_expint2(1.0, x), cr_sf_expint(x), 4e-16);
        ASSERT_CLOSE(cr_sf_expint2(0.0, x) * x * exp(x), 1.0, 4e-16);
        ASSERT_CLOSE(cr_sf_expintx2(1.0, x), cr_sf_expintx(x), 4e-16);
    }
    ASSERT_DBL(cr_sf_expint2(3.0, 0.0), 0.5);
    ASSERT_DBL(cr_sf_expint2(1.25, 0.0), 4.0);
    assert_true(cr_sf_expint2(1.0, 0.0) == HUGE_VAL && cr_sf_expint2(0.5, 0.0) == HUGE_VAL);
    /* real for integers ν <= 0 at x < 0: E_(-1)(x) = e^-x (1 + x)/x² */
    x = -0.75;
    ASSERT_CLOSE(cr_sf_expint2(-1.0, x), exp(-x) * (1 + x) / (x * x), 1e-15);
    assert_true(isnan(cr_sf_expint2(0.5, -1.0)) && isnan(cr_sf_expint2(2.0, -1.0)));
    /* the scaled form does not underflow */
    assert_true(cr_sf_expint2(2.5, 800.0) == 0 && cr_sf_expintx2(2.5, 800.0) > 0);
    /* bounded work: beyond |ν| = 100000, NaN */
    assert_true(isnan(cr_sf_expint2(2e5, 0.5)) && isnan(cr_sf_gamma_upper(-2e5, 0.5)));
    assert_true(isnan(cr_sf_expint2(NAN, 1.0)));
}

/* ---- Primals against MPFR -------------------------------------------------------------------- */

#ifdef CR_HAVE_MPFR
#include <mpfr.h>

#define MP_PREC 512

static double mp_gamma_upper(double a, double x)
{
    mpfr_t t, y;
    mpfr_inits2(MP_PREC, t, y, (mpfr_ptr)0);
    mpfr_set_d(t, a, MPFR_RNDN);
    mpfr_set_d(y, x, MPFR_RNDN);
    mpfr_gamma_inc(y, t, y, MPFR_RNDN);
    double r = mpfr_get_d(y, MPFR_RNDN);
    mpfr_clears(t, y, (mpfr_ptr)0);
    return r;
}

/* log Γ(a, x), the logarithm taken in MPFR (finite where the double underflows) */
static double mp_loggamma_upper(double a, double x)
{
    mpfr_t t, y;
    mpfr_inits2(MP_PREC, t, y, (mpfr_ptr)0);
    mpfr_set_d(t, a, MPFR_RNDN);
    mpfr_set_d(y, x, MPFR_RNDN);
    mpfr_gamma_inc(y, t, y, MPFR_RNDN);
    mpfr_log(y, y, MPFR_RNDN);
    double r = mpfr_get_d(y, MPFR_RNDN);
    mpfr_clears(t, y, (mpfr_ptr)0);
    return r;
}

/* E_ν(x) = x^(ν-1) Γ(1-ν, x), times e^x when scaled; 1 - ν and ν - 1 formed in MPFR */
static double mp_expint2(double nu, double x, bool scaled)
{
    mpfr_t a, y, p;
    mpfr_inits2(MP_PREC, a, y, p, (mpfr_ptr)0);
    mpfr_set_d(a, nu, MPFR_RNDN);
    mpfr_ui_sub(a, 1, a, MPFR_RNDN);
    mpfr_set_d(y, x, MPFR_RNDN);
    mpfr_gamma_inc(p, a, y, MPFR_RNDN);
    mpfr_neg(a, a, MPFR_RNDN); /* ν - 1 */
    mpfr_pow(y, y, a, MPFR_RNDN);
    mpfr_mul(p, p, y, MPFR_RNDN);
    if (scaled) {
        mpfr_set_d(y, x, MPFR_RNDN);
        mpfr_exp(y, y, MPFR_RNDN);
        mpfr_mul(p, p, y, MPFR_RNDN);
    }
    double r = mpfr_get_d(p, MPFR_RNDN);
    mpfr_clears(a, y, p, (mpfr_ptr)0);
    return r;
}

/* E_(-n)(x) = n! x^(-n-1) e^(-x) Σ_(k<=n) x^k/k! (DLMF 8.19.7), in MPFR */
static double mp_expint_negint(long n, double x)
{
    mpfr_t s, t, xx, f;
    mpfr_inits2(MP_PREC, s, t, xx, f, (mpfr_ptr)0);
    mpfr_set_d(xx, x, MPFR_RNDN);
    mpfr_set_ui(s, 1, MPFR_RNDN);
    mpfr_set_ui(t, 1, MPFR_RNDN);
    for (long k = 1; k <= n; k++) {
        mpfr_mul(t, t, xx, MPFR_RNDN);
        mpfr_div_si(t, t, k, MPFR_RNDN);
        mpfr_add(s, s, t, MPFR_RNDN);
    }
    mpfr_fac_ui(f, (unsigned long)n, MPFR_RNDN);
    mpfr_mul(s, s, f, MPFR_RNDN);
    mpfr_pow_si(t, xx, -n - 1, MPFR_RNDN);
    mpfr_mul(s, s, t, MPFR_RNDN);
    mpfr_neg(t, xx, MPFR_RNDN);
    mpfr_exp(t, t, MPFR_RNDN);
    mpfr_mul(s, s, t, MPFR_RNDN);
    double r = mpfr_get_d(s, MPFR_RNDN);
    mpfr_clears(s, t, xx, f, (mpfr_ptr)0);
    return r;
}

static double lcg(uint64_t *s, double lo, double hi, bool log_scale)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    double u = (double)(*s >> 11) * 0x1.0p-53;
    return log_scale ? exp(log(lo) + u * (log(hi) - log(lo))) : lo + u * (hi - lo);
}

typedef struct sweep {
    const char *what;
    int fn; /* 0 gamma_upper, 1 loggamma_upper, 2 expint2, 3 expintx2 */
    double lo[2], hi[2];
    bool log_x;
    int order; /* 0 real, 1 near an integer (within 1e-6), 2 an integer */
    double rtol;
} sweep;

static double eval(int fn, double a, double x)
{
    switch (fn) {
    case 0:
        return cr_sf_gamma_upper(a, x);
    case 1:
        return cr_sf_loggamma_upper(a, x);
    case 2:
        return cr_sf_expint2(a, x);
    default:
        return cr_sf_expintx2(a, x);
    }
}

static double reference(int fn, double a, double x)
{
    switch (fn) {
    case 0:
        return mp_gamma_upper(a, x);
    case 1:
        return mp_loggamma_upper(a, x);
    case 2:
        return mp_expint2(a, x, false);
    default:
        return mp_expint2(a, x, true);
    }
}

static void test_primals_mpfr(void **state)
{
    (void)state;
    static const sweep sweeps[] = {
        {"gamma_upper a <= 0", 0, {-25, 1e-4}, {0, 60}, true, 0, 4e-15},
        {"gamma_upper a <= 0 integer", 0, {-25, 1e-4}, {0, 60}, true, 2, 4e-15},
        {"gamma_upper a near -n", 0, {-12, 1e-3}, {0, 4}, true, 1, 4e-15},
        {"gamma_upper a <= 0 large x", 0, {-300, 1}, {0, 600}, false, 0, 4e-15},
        {"loggamma_upper a <= 0", 1, {-25, 1e-4}, {0, 700}, true, 0, 4e-15},
        /* below ν = 1/2 and x = 2 - ν: Γ(1-ν) of the C library at 1 - ν in [1/2, 3/2] */
        {"expint2", 2, {-8, 1e-4}, {12, 60}, true, 0, 6e-15},
        {"expint2 integer", 2, {-8, 1e-4}, {12, 60}, true, 2, 4e-15},
        {"expint2 near integer", 2, {-8, 1e-4}, {12, 4}, true, 1, 6e-15},
        {"expint2 order >= 1/2", 2, {0.5, 1e-4}, {12, 60}, true, 0, 4e-15},
        {"expint2 large order", 2, {12, 1e-3}, {200, 100}, true, 0, 4e-15},
        {"expintx2", 3, {-8, 1e-3}, {12, 700}, true, 0, 6e-15},
        {"expint2 order in [-700, -8]", 2, {-700, 1e-3}, {-8, 600}, true, 0, 6e-15},
        {"expintx2 order in [-700, -8]", 3, {-700, 1e-3}, {-8, 650}, true, 0, 6e-15},
        {"expintx2 order >= 1/2", 3, {0.5, 1e-3}, {12, 700}, true, 0, 4e-15},
    };
    int bad = 0;
    for (size_t i = 0; i < NELEM(sweeps); i++) {
        const sweep *sw = &sweeps[i];
        uint64_t seed = 3737 + i;
        double worst = 0, wa = 0, wx = 0;
        for (int k = 0; k < 150; k++) {
            double a = lcg(&seed, sw->lo[0], sw->hi[0], false);
            double x = lcg(&seed, sw->lo[1], sw->hi[1], sw->log_x);
            if (sw->order == 2)
                a = nearbyint(a);
            else if (sw->order == 1)
                a = nearbyint(a) + lcg(&seed, -1e-6, 1e-6, false);
            double want = reference(sw->fn, a, x), v = eval(sw->fn, a, x);
            double e =
                v == want ? 0 : fabs(v - want) / (sw->fn == 1 ? fmax(1, fabs(want)) : fabs(want));
            if (!(e <= worst)) {
                worst = e;
                wa = a;
                wx = x;
            }
        }
        print_message("MPFR %-28s max error %.3g at (%.17g, %.17g) [bound %.3g]\n", sw->what, worst,
                      wa, wx, sw->rtol);
        if (!(worst <= sw->rtol))
            bad++;
    }
    /* integer orders <= 0 at x < 0 (and x > 0): the closed form */
    double worst = 0;
    for (long n = 0; n <= 12; n++)
        for (double x = -30; x <= 30; x += 0.37) {
            if (fabs(x) < 1e-9)
                continue;
            double want = mp_expint_negint(n, x), v = cr_sf_expint2((double)-n, x);
            /* near the zeros of e_n(x) (x < 0) the absolute error is what can be asked */
            double scale = fmax(fabs(want), fabs(exp(-x) / x) * 1e-3);
            worst = fmax(worst, fabs(v - want) / scale);
        }
    print_message("MPFR expint2 integer order <= 0, x in [-30, 30]: max error %.3g\n", worst);
    if (!(worst <= 2e-13))
        bad++;
    mpfr_free_cache();
    assert_int_equal(bad, 0);
}
#else
static void test_primals_mpfr(void **state)
{
    (void)state;
    skip();
}
#endif

/* ---- Derivatives
 * --------------------------------------------------------------------------------- */

static void test_registrations(void **state)
{
    fixture *fx = *state;
    const char *names[] = {"gamma_upper", "loggamma_upper", "expint2", "expintx2"};
    const cr_registry *reg = cr_registry_builtin();
    size_t seen = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        for (size_t k = 0; k < NELEM(names); k++) {
            if (strcmp(info.fn->name, names[k]) != 0)
                continue;
            seen++;
            cr_test_opts opts = {0};
            opts.npoints = 40;
            cr_test_report r;
            cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
            /* the order's NotImplemented tangent makes checks known-broken, none may fail */
            char line[1024];
            cr_test_report_format(&r, line, sizeof line);
            if (st != CR_OK || r.nfailed != 0 || r.nmarginal != 0 ||
                (r.verdict != CR_VERDICT_PASS && r.verdict != CR_VERDICT_BROKEN)) {
                print_error("%s: %s\n", names[k], line);
                fail();
            }
            assert_true(r.npoints >= 40 && r.npassed > r.nbroken);
            print_message("%-15s %s\n", names[k], line);
        }
    }
    assert_int_equal(seen, NELEM(names));
}

typedef struct fd1 {
    double (*f)(double, double);
    double a;
} fd1;

static cr_status fd1_fn(double x, double *y, void *env)
{
    const fd1 *e = env;
    *y = e->f(e->a, x);
    return CR_OK;
}

/* The frule's tangent and the pullback's cotangent of x against finite differences, the
 * order's NotImplemented and an integer order's NoTangent. */
static void check_point(fixture *fx, const cr_value *fn, double (*f)(double, double), double a,
                        double x, bool forward_only)
{
    fd1 e = {f, a};
    cr_fdm m;
    if (forward_only) /* at x = 0: the right-hand derivative */
        assert_int_equal(cr_fdm_forward(6, 1, &m), CR_OK);
    else
        assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    double d, err;
    assert_int_equal(cr_fd_derivative(&m, NULL, fd1_fn, &e, x, &d, &err), CR_OK);
    cr_value args[2] = {cr_value_f64(a), cr_value_f64(x)}, y;
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_f64(1.0)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, fn, args, 2, &y, &dy), CR_OK);
    assert_int_equal(dy.tag, CR_TAN_F64);
    double tol = fmax(10 * err, 1e-9 * fmax(1, fabs(d)));
    if (!(fabs(dy.u.f64 - d) <= tol)) {
        print_error("%s(%g, %g): frule %.17g, differences %.17g +- %.3g\n", fn->u.func.fn->name, a,
                    x, dy.u.f64, d, err);
        fail();
    }
    ASSERT_DBL(y.u.f64, f(a, x));
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, fn, args, 2, &y, &pb), CR_OK);
    cr_tangent seed = cr_tangent_f64(-2.0), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NOTIMPL);
    assert_int_equal(dx[2].tag, CR_TAN_F64);
    ASSERT_CLOSE(dx[2].u.f64, -2.0 * dy.u.f64, 1e-15);
    /* a nonzero tangent of the order: NotImplemented */
    dargs[1] = cr_tangent_f64(1.0);
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, fn, args, 2, &y, &dy), CR_OK);
    assert_int_equal(dy.tag, CR_TAN_NOTIMPL);
    /* an integer-kind order is not perturbed */
    if (a == nearbyint(a)) {
        cr_value iargs[2] = {cr_value_i64((int64_t)a), cr_value_f64(x)};
        assert_int_equal(cr_rrule(NULL, fx->arena, fn, iargs, 2, &y, &pb), CR_OK);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 3), CR_OK);
        assert_int_equal(dx[1].tag, CR_TAN_NONE);
    }
    cr_arena_reset(fx->arena);
}

static void test_derivatives(void **state)
{
    fixture *fx = *state;
    static const double gu[][2] = {{0.0, 0.5},  {-1.0, 0.999}, {-1.0, 1.001}, {-2.5, 0.3},
                                   {-0.5, 2.0}, {-7.25, 0.8},  {-3.0, 12.0},  {-1e-9, 0.4}};
    for (size_t k = 0; k < NELEM(gu); k++) {
        check_point(fx, &cr_fn_gamma_upper, cr_sf_gamma_upper, gu[k][0], gu[k][1], false);
        check_point(fx, &cr_fn_loggamma_upper, cr_sf_loggamma_upper, gu[k][0], gu[k][1], false);
    }
    static const double en[][2] = {{1.0, 0.5},  {2.0, 1.0},  {0.5, 0.999}, {1.5, 1.001},
                                   {3.7, 0.2},  {-2.0, 0.7}, {-2.0, -0.7}, {-0.5, 3.0},
                                   {25.5, 4.0}, {2.25, 9.0}, {0.0, -2.0},  {1.0 + 1e-9, 0.3}};
    for (size_t k = 0; k < NELEM(en); k++) {
        check_point(fx, &cr_fn_expint2, cr_sf_expint2, en[k][0], en[k][1], false);
        check_point(fx, &cr_fn_expintx2, cr_sf_expintx2, en[k][0], en[k][1], false);
    }
    /* at x = 0 for ν > 2: E_ν(0) = 1/(ν-1), E_ν'(0) = -1/(ν-2), from the right (at ν = 5.5
     * E_ν is smooth enough there, x^(ν-1) Γ(1-ν) its least regular term, for differences) */
    check_point(fx, &cr_fn_expint2, cr_sf_expint2, 5.5, 0.0, true);
    cr_value args[2] = {cr_value_f64(3.5), cr_value_f64(0.0)}, y;
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_f64(1.0)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_expint2, args, 2, &y, &dy), CR_OK);
    ASSERT_CLOSE(y.u.f64, 1 / 2.5, 1e-16);
    ASSERT_CLOSE(dy.u.f64, -1 / 1.5, 1e-15);
    /* the NotImplemented message names the missing derivative */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_expint2, args, 2, &y, &pb), CR_OK);
    cr_tangent seed = cr_tangent_f64(1.0), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NOTIMPL);
    assert_contains(dx[1].u.ni->msg, "exponential integral with respect to its order");
    /* a float x keeps float */
    cr_value fargs[2] = {cr_value_f64(2.5), cr_value_f32(1.5f)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_expint2, fargs, 2, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    /* beyond the supported order: the bessel-style refusal does not apply, NaN */
    cr_value big[2] = {cr_value_f64(3e5), cr_value_f64(0.5)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_expint2, big, 2, &y), CR_OK);
    assert_true(isnan(y.u.f64));
    cr_arena_reset(fx->arena);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_primals_mpfr),
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_derivatives, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
