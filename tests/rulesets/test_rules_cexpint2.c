/*
 * cexpint2(ν, z) = E_ν(z) of a complex argument: values against the power series evaluated
 * in MPFR at 512 bits (the reference of every region, the cut's neighbourhood and the
 * continued fraction's included), against E1 and the real E_ν where they meet, the
 * derivative identity ∂E_ν/∂z = -E_(ν-1) against central differences, the rules through the
 * testers, and the order's NotImplemented cotangent.
 */
#include <chainrules/rules_special.h>

#include "test_util.h"

static cr_complex cplx(double re, double im)
{
    double p[2] = {re, im};
    cr_complex z;
    memcpy(&z, p, sizeof z);
    return z;
}

#ifdef CR_HAVE_MPFR
#include <mpfr.h>

#define MP_PREC 512

/* (ar, ai) *= (br, bi) */
static void mp_cmul(mpfr_t ar, mpfr_t ai, mpfr_t br, mpfr_t bi, mpfr_t t1, mpfr_t t2)
{
    mpfr_mul(t1, ar, br, MPFR_RNDN);
    mpfr_mul(t2, ai, bi, MPFR_RNDN);
    mpfr_mul(ai, ai, br, MPFR_RNDN);
    mpfr_fma(ai, ar, bi, ai, MPFR_RNDN);
    mpfr_sub(ar, t1, t2, MPFR_RNDN);
}

/*
 * E_ν(z) = Γ(1-ν) z^(ν-1) - Σ_k (-z)^k / (k! (1-ν+k)) (DLMF 8.19.10) for ν not a positive
 * integer, and for ν = n >= 1 the term k = n-1 replaced by (-z)^(n-1)/(n-1)! (ψ(n) - log z)
 * (DLMF 8.19.8), at MP_PREC bits: enough for the cancellation of the terms (about e^|z|)
 * against the result (about e^-Re z) for |z| <= 40.
 */
static cr_complex mp_expint(double nu, double x, double y)
{
    mpfr_t zr, zi, tr, ti, sr, si, d, t1, t2, lr, th, g, hr, hi;
    mpfr_inits2(MP_PREC, zr, zi, tr, ti, sr, si, d, t1, t2, lr, th, g, hr, hi, (mpfr_ptr)0);
    mpfr_set_d(zr, -x, MPFR_RNDN); /* -z */
    mpfr_set_d(zi, -y, MPFR_RNDN);
    mpfr_set_ui(tr, 1, MPFR_RNDN); /* t = (-z)^k / k! */
    mpfr_set_ui(ti, 0, MPFR_RNDN);
    mpfr_set_ui(sr, 0, MPFR_RNDN);
    mpfr_set_ui(si, 0, MPFR_RNDN);
    /* log z = log|z| + i arg z (the principal branch; y = +0 on the cut gives +π) */
    mpfr_set_d(t1, x, MPFR_RNDN);
    mpfr_set_d(t2, y, MPFR_RNDN);
    mpfr_hypot(lr, t1, t2, MPFR_RNDN);
    mpfr_log(lr, lr, MPFR_RNDN);
    mpfr_atan2(th, t2, t1, MPFR_RNDN);
    bool posint = nu >= 1 && nu == floor(nu);
    long kn = posint ? (long)nu - 1 : -1;
    double az = hypot(x, y);
    for (long k = 0; k < 4000; k++) {
        if (k > 0) {
            mp_cmul(tr, ti, zr, zi, t1, t2);
            mpfr_div_si(tr, tr, k, MPFR_RNDN);
            mpfr_div_si(ti, ti, k, MPFR_RNDN);
        }
        if (k == kn) {
            /* h = t (ψ(n) - log z) */
            mpfr_set_si(g, kn + 1, MPFR_RNDN);
            mpfr_digamma(g, g, MPFR_RNDN);
            mpfr_sub(g, g, lr, MPFR_RNDN); /* real part of ψ(n) - log z; imaginary -θ */
            mpfr_mul(hr, tr, g, MPFR_RNDN);
            mpfr_fma(hr, ti, th, hr, MPFR_RNDN); /* re: tr g + ti θ */
            mpfr_mul(hi, ti, g, MPFR_RNDN);
            mpfr_mul(t1, tr, th, MPFR_RNDN);
            mpfr_sub(hi, hi, t1, MPFR_RNDN); /* im: ti g - tr θ */
            continue;
        }
        mpfr_set_d(d, nu, MPFR_RNDN);
        mpfr_si_sub(d, 1 + k, d, MPFR_RNDN); /* 1 - ν + k */
        mpfr_div(t1, tr, d, MPFR_RNDN);
        mpfr_add(sr, sr, t1, MPFR_RNDN);
        mpfr_div(t1, ti, d, MPFR_RNDN);
        mpfr_add(si, si, t1, MPFR_RNDN);
        if (k > 3 * az + 60 && mpfr_get_exp(tr) < mpfr_get_exp(sr) - 600 &&
            mpfr_get_exp(ti) < mpfr_get_exp(sr) - 600)
            break;
    }
    if (!posint) {
        /* h = Γ(1-ν) e^((ν-1) log z) */
        mpfr_set_d(d, nu, MPFR_RNDN);
        mpfr_ui_sub(g, 1, d, MPFR_RNDN);
        mpfr_gamma(g, g, MPFR_RNDN);
        mpfr_sub_ui(d, d, 1, MPFR_RNDN); /* ν - 1 */
        mpfr_mul(t1, d, lr, MPFR_RNDN);
        mpfr_exp(t1, t1, MPFR_RNDN);
        mpfr_mul(g, g, t1, MPFR_RNDN);
        mpfr_mul(t2, d, th, MPFR_RNDN);
        mpfr_cos(hr, t2, MPFR_RNDN);
        mpfr_sin(hi, t2, MPFR_RNDN);
        mpfr_mul(hr, hr, g, MPFR_RNDN);
        mpfr_mul(hi, hi, g, MPFR_RNDN);
    }
    mpfr_sub(hr, hr, sr, MPFR_RNDN);
    mpfr_sub(hi, hi, si, MPFR_RNDN);
    cr_complex r = cplx(mpfr_get_d(hr, MPFR_RNDN), mpfr_get_d(hi, MPFR_RNDN));
    mpfr_clears(zr, zi, tr, ti, sr, si, d, t1, t2, lr, th, g, hr, hi, (mpfr_ptr)0);
    return r;
}

static void test_mpfr(void **state)
{
    (void)state;
    static const double nus[] = {1,      2,   3,    0,   -1,   -2.5, 0.5,  1.5,         1.0000001,
                                 0.9999, 2.2, 3.75, 4.5, -0.5, 1.25, 0.75, 2.0000000001};
    static const double zs[][2] = {
        {0.3, 0.2}, {1.5, -2},   {-0.5, 0.1},   {-3, 0.5},      {-3, -0.5},  {5, 5},
        {-5, 8},    {0.05, 0.9}, {-0.9, 0.001}, {10, -1},       {-20, 2},    {-20, 12},
        {0.8, 0.8}, {2, 0},      {-2, 0},       {0.1, -0.05},   {-8, -1e-4}, {25, 25},
        {-25, 30},  {1.1, -0.1}, {0.6, 0.8},    {0.6, 0.80001}, {-1, 2.5},   {-4, 4.9},
        {0, 3},     {0, -0.5},   {35, 1},       {1e-3, 1e-3}};
    double worst = 0;
    for (size_t i = 0; i < sizeof nus / sizeof nus[0]; i++)
        for (size_t j = 0; j < sizeof zs / sizeof zs[0]; j++) {
            cr_complex got = cr_sf_expint2_complex(nus[i], cplx(zs[j][0], zs[j][1]));
            cr_complex want = mp_expint(nus[i], zs[j][0], zs[j][1]);
            double err = cabs(got - want) / cabs(want);
            if (err > 2e-14)
                print_error("E_%g(%g%+gi) = %.17g%+.17gi, want %.17g%+.17gi (%.3g)\n", nus[i],
                            zs[j][0], zs[j][1], creal(got), cimag(got), creal(want), cimag(want),
                            err);
            worst = fmax(worst, err);
        }
    print_message("cexpint2 against MPFR: worst relative error %.3g\n", worst);
    assert_true(worst <= 2e-14);
}
#endif /* CR_HAVE_MPFR */

/* Where it meets the other exponential integrals: E_1 = E1 (cr_sf_expint_complex), and a
 * real positive z gives the real E_ν with a zero imaginary part. */
static void test_agreement(void **state)
{
    (void)state;
    static const double zs[][2] = {{0.3, 0.2}, {-3, 0.5}, {5, -5}, {-20, 2}, {0.7, 0}};
    for (size_t j = 0; j < sizeof zs / sizeof zs[0]; j++) {
        cr_complex z = cplx(zs[j][0], zs[j][1]);
        cr_complex a = cr_sf_expint2_complex(1, z), b = cr_sf_expint_complex(z);
        assert_true(cabs(a - b) <= 1e-14 * cabs(b));
    }
    static const double nus[] = {0.5, 1, 2.5, -1.5, 3};
    for (size_t i = 0; i < sizeof nus / sizeof nus[0]; i++)
        for (double x = 0.1; x < 6; x *= 1.7) {
            cr_complex a = cr_sf_expint2_complex(nus[i], cplx(x, 0));
            double b = cr_sf_expint2(nus[i], x);
            assert_true(fabs(creal(a) - b) <= 1e-13 * fabs(b));
            assert_true(fabs(cimag(a)) <= 1e-15 * fabs(b));
        }
    /* E_ν(0) = 1/(ν-1) for ν > 1, infinite otherwise; NaN in, NaN out */
    assert_close(creal(cr_sf_expint2_complex(3, cplx(0, 0))), 0.5, 1e-15);
    assert_true(isinf(creal(cr_sf_expint2_complex(0.5, cplx(0, 0)))));
    assert_true(isnan(creal(cr_sf_expint2_complex(NAN, cplx(1, 0)))));
    /* the two sides of the cut: conjugates */
    cr_complex up = cr_sf_expint2_complex(1.5, cplx(-2, 0.0)),
               down = cr_sf_expint2_complex(1.5, cplx(-2, -0.0));
    assert_true(cabs(up - conj(down)) <= 1e-15 * cabs(up));
    assert_true(cimag(up) != cimag(down));
}

/* ∂E_ν/∂z = -E_(ν-1)(z) (the frule's and the pullback's partial) against central
 * differences of E_ν along the real and the imaginary axis (Cauchy-Riemann). */
static void test_derivative(void **state)
{
    (void)state;
    static const double nus[] = {1, 2.5, 0.3, -1.5, 1.0000001};
    static const double zs[][2] = {{0.3, 0.2}, {-3, 0.5}, {2, -2}, {-0.6, -0.6}, {4, 1}};
    for (size_t i = 0; i < sizeof nus / sizeof nus[0]; i++)
        for (size_t j = 0; j < sizeof zs / sizeof zs[0]; j++) {
            double h = 1e-5, x = zs[j][0], y = zs[j][1];
            cr_complex dx = (cr_sf_expint2_complex(nus[i], cplx(x + h, y)) -
                             cr_sf_expint2_complex(nus[i], cplx(x - h, y))) /
                            (2 * h);
            cr_complex dy = (cr_sf_expint2_complex(nus[i], cplx(x, y + h)) -
                             cr_sf_expint2_complex(nus[i], cplx(x, y - h))) /
                            (2 * h);
            cr_complex d = -cr_sf_expint2_complex(nus[i] - 1, cplx(x, y));
            assert_true(cabs(dx - d) <= 1e-8 * cabs(d));
            assert_true(cabs(dy - d * cplx(0, 1)) <= 1e-8 * cabs(d)); /* analytic */
        }
}

static void test_rules(void **state)
{
    fixture *fx = *state;
    cr_test_report rep;
    /* integer orders (NoTangent), complex, real and f32 z */
    cr_value zs[4] = {cr_value_c128(cplx(0.4, -0.7)), cr_value_c128(cplx(-2.5, 1.2)),
                      cr_value_f64(1.3), cr_value_f32(2.5f)};
    for (int64_t n = -1; n <= 3; n++)
        for (size_t j = 0; j < 4; j++) {
            cr_value args[2] = {cr_value_i64(n), zs[j]};
            assert_int_equal(cr_test_rrule(fx->arena, NULL, &cr_fn_cexpint2, args, 2, &rep), CR_OK);
            assert_int_equal(rep.verdict, CR_VERDICT_PASS);
            assert_int_equal(cr_test_frule(fx->arena, NULL, &cr_fn_cexpint2, args, 2, &rep), CR_OK);
            assert_int_equal(rep.verdict, CR_VERDICT_PASS);
        }
    /* a float order: its cotangent is NotImplemented, z's is conj(-E_(ν-1)) ȳ */
    cr_value args[2] = {cr_value_f64(1.5), cr_value_c128(cplx(0.4, -0.7))}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cexpint2, args, 2, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_c128(cplx(1, 2)), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NOTIMPL);
    assert_int_equal(dx[2].tag, CR_TAN_C128);
    cr_complex d = -cr_sf_expint2_complex(0.5, cplx(0.4, -0.7));
    assert_true(cabs(dx[2].u.c128 - conj(d) * cplx(1, 2)) <= 1e-15 * cabs(d));
    /* and an frule with ν̇ = 0 is exact, with ν̇ != 0 NotImplemented */
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_c128(1)}, t;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_cexpint2, args, 2, &y, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_C128);
    assert_true(cabs(t.u.c128 - d) <= 1e-15 * cabs(d));
    dargs[1] = cr_tangent_f64(1);
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_cexpint2, args, 2, &y, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_NOTIMPL);
    /* refusals */
    cr_value bad[2] = {cr_value_c128(cplx(1, 1)), cr_value_f64(1)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cexpint2, bad, 2, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "the order is a c128"));
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cexpint2, bad, 1, &y), CR_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifdef CR_HAVE_MPFR
        cmocka_unit_test(test_mpfr),
#endif
        cmocka_unit_test(test_agreement),
        cmocka_unit_test(test_derivative),
        cmocka_unit_test_setup_teardown(test_rules, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
