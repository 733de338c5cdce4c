/*
 * Coverage tests of the scalar rule sets' rare paths (src/rulesets/scalar/arith.c, math.c,
 * special_gamma_erf.c, complex.c): derivatives in regions the registration samplers do not reach
 * (polygamma of an order above 170, whose m! overflows; complex powers at z = 0), against
 * finite differences with the rule testers; the values at the edges of the special
 * functions' domains (NaN, ±Inf, poles, 1/Gamma(a + b) = 0); tangents of other kinds than
 * the argument's (a complex tangent for a real argument, NotImplemented, a struct); integer
 * and bool arguments (NoTangent cotangents); and the errors for bad input (status, a message
 * naming the function, the context usable afterwards).
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

static cr_tangent unthunked(cr_tangent t)
{
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(t, &v), CR_OK);
    return v;
}

/* rrule and frule against finite differences and the dot-product test, in debug mode. */
static void check_rules(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs)
{
    cr_ctx_set_debug(fx->ctx, true);
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, NULL, f, args, nargs, &r), r);
    assert_true(r.nchecks > 0);
    CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, NULL, f, args, nargs, &r), r);
    assert_true(r.nchecks > 0);
    CR_ASSERT_RULE_TEST(cr_test_consistency(fx->arena, NULL, f, args, nargs, &r), r);
}

/* f(args) fails with status `want` and a message containing `msg`; the context is usable
 * afterwards. */
static void expect_err_(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                        cr_status want, const char *msg, const char *file, int line)
{
    cr_value y;
    cr_status st = cr_function_call(fx->arena, f, args, nargs, &y);
    if (st != want || strstr(cr_ctx_errmsg(fx->ctx), msg) == NULL) {
        print_error("%s:%d: got %s \"%s\", want %s \"...%s...\"\n", file, line, cr_status_name(st),
                    cr_ctx_errmsg(fx->ctx), cr_status_name(want), msg);
        fail();
    }
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_OK);
    cr_value x = cr_value_f64(0.5);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sin, &x, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, sin(0.5));
}
#define expect_err(fx, f, args, nargs, want, msg) \
    expect_err_((fx), (f), (args), (nargs), (want), (msg), __FILE__, __LINE__)

static double call1(fixture *fx, const cr_value *f, cr_value a)
{
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, f, &a, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    return y.u.f64;
}

/* The frule's output tangent for one argument and one input tangent. */
static cr_tangent frule1(fixture *fx, const cr_value *f, cr_value a, cr_tangent da)
{
    cr_tangent d[2] = {cr_tangent_none(), da}, dy;
    cr_value y;
    assert_int_equal(cr_frule(NULL, fx->arena, d, f, &a, 1, &y, &dy), CR_OK);
    return unthunked(dy);
}

/* ---- Special functions: regions and edges --------------------------------------------------- */

static void test_polygamma_large_order(void **state)
{
    fixture *fx = *state;
    /* The derivative of polygamma(170, x) is polygamma(171, x), computed through
     * exp(log m! + log zeta) because 171! overflows: checked against finite differences. */
    cr_value args[2] = {cr_value_i64(170), cr_value_f64(1.5)};
    cr_test_opts opts = {0};
    opts.rtol = 1e-7; /* values near 1e279: lgamma and log lose a few ulps of m! */
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, &opts, &cr_fn_polygamma, args, 2, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, &opts, &cr_fn_polygamma, args, 2, &r), r);
    /* Its value is finite and positive ((-1)^(m+1) with m = 171 odd... even: sign +). */
    double v = cr_sf_polygamma(171, 1.5);
    assert_true(isfinite(v) && v > 0);
    /* Reflection is limited to m <= 170; beyond, NaN for x < 0. */
    assert_true(isnan(cr_sf_polygamma(171, -0.5)));
    assert_true(isfinite(cr_sf_polygamma(10, -0.5)));
    /* Edges: +Inf gives a signed zero, poles +Inf (odd m) or NaN (even m), m < 0 NaN. */
    ASSERT_DBL(cr_sf_polygamma(2, INFINITY), 0);
    assert_true(signbit(cr_sf_polygamma(2, INFINITY)));
    assert_false(signbit(cr_sf_polygamma(3, INFINITY)));
    assert_true(isinf(cr_sf_polygamma(3, -2.0)) && cr_sf_polygamma(3, -2.0) > 0);
    assert_true(isnan(cr_sf_polygamma(2, -2.0)));
    assert_true(isnan(cr_sf_polygamma(-1, 2.0)));
    assert_true(isnan(cr_sf_polygamma(2, NAN)));
    /* trigamma: NaN, +Inf (0). */
    assert_true(isnan(cr_sf_trigamma(NAN)));
    ASSERT_DBL(cr_sf_trigamma(INFINITY), 0);
    assert_true(isnan(cr_sf_erfcx(NAN)));
    assert_true(isnan(cr_sf_logerfc(NAN)));
}

static void test_beta_gamma_inc_edges(void **state)
{
    fixture *fx = *state;
    (void)fx;
    /* B(-1/2, -1/2) = Gamma(-1/2)² / Gamma(-1) = 0: log|B| = -Inf. */
    double lb = cr_sf_logbeta(-0.5, -0.5);
    assert_true(isinf(lb) && lb < 0);
    ASSERT_DBL(cr_sf_beta(-0.5, -0.5), 0);
    assert_true(isnan(cr_sf_beta(NAN, 1)));
    assert_true(isnan(cr_sf_beta(1, NAN)));
    /* Near there, log|B| is finite and its derivative matches finite differences. */
    cr_value ab[2] = {cr_value_f64(-0.5), cr_value_f64(-0.75)};
    check_rules(fx, &cr_fn_logbeta, ab, 2);
    /* gamma_inc at x = Inf: (P, Q) = (1, 0), and its x-derivative 0. */
    double p, q;
    cr_sf_gamma_inc(2.5, INFINITY, &p, &q);
    ASSERT_DBL(p, 1);
    ASSERT_DBL(q, 0);
    cr_value gi[2] = {cr_value_f64(2.5), cr_value_f64(INFINITY)}, y;
    cr_tangent d[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_f64(1)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_gamma_inc, gi, 2, &y, &dy), CR_OK);
    ASSERT_DBL(unthunked(cr_tangent_field(dy, 0)).u.f64, 0);
    /* a <= 0 is outside the domain: NaN values and derivative. */
    gi[0] = cr_value_f64(-1);
    gi[1] = cr_value_f64(1);
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_gamma_inc, gi, 2, &y, &dy), CR_OK);
    assert_true(isnan(unthunked(cr_tangent_field(dy, 0)).u.f64));
}

static void test_special_tangent_kinds(void **state)
{
    fixture *fx = *state;
    /* polygamma(1, x): the order gets no tangent, x's tangent may be of another kind. */
    cr_value pg[2] = {cr_value_i64(1), cr_value_f64(2.25)}, y;
    cr_tangent d[3] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_f64(1.5)}, dy, dy2;
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_polygamma, pg, 2, &y, &dy), CR_OK);
    /* A complex tangent for a real argument: its real part is used. */
    d[2] = cr_tangent_c128(CMPLX(1.5, 4));
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_polygamma, pg, 2, &y, &dy2), CR_OK);
    assert_int_equal(dy2.tag, CR_TAN_F64);
    ASSERT_DBL(dy2.u.f64, dy.u.f64);
    /* NotImplemented and a struct tangent are refused, naming the function. */
    cr_tangent ni;
    assert_int_equal(cr_tangent_not_implemented(fx->arena, __FILE__, __LINE__, "test", &ni), CR_OK);
    d[2] = ni;
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_polygamma, pg, 2, &y, &dy), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "polygamma: tangent is NotImplemented");
    cr_ctx_clear_error(fx->ctx);
    d[2] = cr_tangent_struct_empty(&cr_range_type);
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_polygamma, pg, 2, &y, &dy), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "polygamma: expected a real tangent, got");
    cr_ctx_clear_error(fx->ctx);
    /* A bool x reads as 1 and gets NoTangent. */
    pg[1] = cr_value_bool(true);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_polygamma, pg, 2, &y), CR_OK);
    ASSERT_DBL(y.u.f64, cr_sf_polygamma(1, 1));
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_polygamma, pg, 2, &y, &pb), CR_OK);
    cr_tangent g1 = cr_tangent_f64(1), dxs[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g1, dxs, 3), CR_OK);
    assert_int_equal(dxs[2].tag, CR_TAN_NONE);
    /* A bool argument reads as 0/1 and gets NoTangent. */
    ASSERT_DBL(call1(fx, &cr_fn_digamma, cr_value_bool(true)), cr_sf_digamma(1));
    cr_value bargs[2] = {cr_value_bool(true), cr_value_f64(1.5)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_beta, bargs, 2, &y, &pb), CR_OK);
    ASSERT_CLOSE(y.u.f64, cr_sf_beta(1, 1.5), 1e-15);
    cr_tangent one = cr_tangent_f64(1), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    assert_int_equal(dx[2].tag, CR_TAN_F64);
    check_rules(fx, &cr_fn_beta, bargs, 2);
    /* gamma_inc: a zero seed gives zeros; a plain number seed for its tuple is refused. */
    cr_value gi[2] = {cr_value_f64(1.5), cr_value_f64(0.75)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gamma_inc, gi, 2, &y, &pb), CR_OK);
    cr_tangent zero = cr_tangent_zero();
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &zero, dx, 3), CR_OK);
    assert_true(cr_tangent_is_zero(dx[1]) && cr_tangent_is_zero(dx[2]));
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, dx, 3), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "gamma_inc_pullback: the output is a tuple (P, Q)");
    cr_ctx_clear_error(fx->ctx);
    cr_tangent dz[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_zero()};
    assert_int_equal(cr_frule(NULL, fx->arena, dz, &cr_fn_gamma_inc, gi, 2, &y, &dy), CR_OK);
    assert_true(cr_tangent_is_zero(unthunked(dy)) ||
                (cr_tangent_is_zero(unthunked(cr_tangent_field(dy, 0))) &&
                 cr_tangent_is_zero(unthunked(cr_tangent_field(dy, 1)))));
    /* polygamma's zero tangent. */
    pg[1] = cr_value_f64(2);
    cr_tangent dp[3] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_zero()};
    assert_int_equal(cr_frule(NULL, fx->arena, dp, &cr_fn_polygamma, pg, 2, &y, &dy), CR_OK);
    assert_true(cr_tangent_is_zero(unthunked(dy)));
}

static void test_special_errors(void **state)
{
    fixture *fx = *state;
    cr_range r = {0, 1, 1};
    cr_value s = cr_value_struct(&cr_range_type, &r);
    expect_err(fx, &cr_fn_polygamma, ((cr_value[]){cr_value_i64(1), s}), 2, CR_EINVAL,
               "polygamma: argument 2 is a struct, not a real number");
    expect_err(fx, &cr_fn_polygamma, ((cr_value[]){cr_value_f64(1), cr_value_f64(2)}), 2, CR_EINVAL,
               "polygamma: the order must be an integer, not a f64");
    expect_err(fx, &cr_fn_polygamma,
               ((cr_value[]){cr_value_i64(INT64_C(1) << 40), cr_value_f64(2)}), 2, CR_EDOMAIN,
               "polygamma: order 1099511627776 out of range");
    expect_err(fx, &cr_fn_jn, ((cr_value[]){cr_value_i64(1)}), 1, CR_EINVAL,
               "jn takes 2 arguments, 1 given");
    expect_err(fx, &cr_fn_gamma_inc, ((cr_value[]){cr_value_f64(1)}), 1, CR_EINVAL,
               "gamma_inc takes 2 or 3 arguments, 1 given");
}

static void test_gamma_inc_tangents(void **state)
{
    fixture *fx = *state;
    /* Δa NotImplemented: both components NotImplemented (ChainRules' algebra); with an
     * integer a, a is not perturbed and the x part is left. */
    cr_tangent ni;
    assert_int_equal(cr_tangent_not_implemented(fx->arena, __FILE__, __LINE__, "test", &ni), CR_OK);
    cr_value gi[2] = {cr_value_f64(1.5), cr_value_f64(0.75)}, y;
    cr_tangent d[3] = {cr_tangent_none(), ni, cr_tangent_f64(1)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_gamma_inc, gi, 2, &y, &dy), CR_OK);
    assert_int_equal(unthunked(cr_tangent_field(dy, 0)).tag, CR_TAN_NOTIMPL);
    assert_int_equal(unthunked(cr_tangent_field(dy, 1)).tag, CR_TAN_NOTIMPL);
    gi[0] = cr_value_i64(2);
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_gamma_inc, gi, 2, &y, &dy), CR_OK);
    cr_tangent dp = unthunked(cr_tangent_field(dy, 0)), dq = unthunked(cr_tangent_field(dy, 1));
    assert_int_equal(dp.tag, CR_TAN_F64);
    ASSERT_CLOSE(dp.u.f64, -dq.u.f64, 1e-15);
    check_rules(fx, &cr_fn_gamma_inc, gi, 2);
    /* A structural seed with absent fields: zero cotangents (a's not NotImplemented). */
    gi[0] = cr_value_f64(1.5);
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_gamma_inc, gi, 2, &y, &pb), CR_OK);
    cr_tangent seed = cr_tangent_struct_empty(y.u.obj.type), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 3), CR_OK);
    assert_true(cr_tangent_is_zero(dx[1]));
    assert_true(cr_tangent_is_zero(dx[2]));
}

static void test_math_nan_exponents(void **state)
{
    fixture *fx = *state;
    /* ldexp / scalbln with a NaN exponent use 0: x itself, derivative 1 in x. */
    const char *names[2] = {"ldexp", "scalbln"};
    for (size_t k = 0; k < 2; k++) {
        const cr_function *fn = cr_registry_find(cr_registry_builtin(), names[k]);
        assert_non_null(fn);
        cr_value f = cr_value_function(fn, NULL), args[2] = {cr_value_f64(3), cr_value_f64(NAN)}, y;
        cr_tangent d[3] = {cr_tangent_none(), cr_tangent_f64(1), cr_tangent_zero()}, dy;
        assert_int_equal(cr_frule(NULL, fx->arena, d, &f, args, 2, &y, &dy), CR_OK);
        ASSERT_DBL(y.u.f64, 3);
        ASSERT_DBL(unthunked(dy).u.f64, 1);
    }
    /* pow(0, NaN): NaN, and a NaN derivative in x. */
    cr_value pa[2] = {cr_value_f64(0), cr_value_f64(NAN)}, y;
    cr_tangent d[3] = {cr_tangent_none(), cr_tangent_f64(1), cr_tangent_zero()}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_pow, pa, 2, &y, &dy), CR_OK);
    assert_true(isnan(y.u.f64) && isnan(unthunked(dy).u.f64));
}

/* ---- Complex rows -----------------------------------------------------------------------------
 */

static void test_complex_pow_at_zero(void **state)
{
    fixture *fx = *state;
    /* cpow(0, w) for real w > 1 and w = 1, and the real-typed pow with complex arguments:
     * the limits of the derivatives at z = 0, against finite differences. */
    const double ws[2] = {2, 1};
    for (size_t k = 0; k < 2; k++) {
        cr_value args[2] = {cr_value_c128(0), cr_value_c128(ws[k])};
        cr_test_report r;
        CR_ASSERT_RULE_TEST(cr_test_scalar(fx->arena, NULL, &cr_fn_cpow, args, 2, &r), r);
        CR_ASSERT_RULE_TEST(cr_test_scalar(fx->arena, NULL, &cr_fn_pow, args, 2, &r), r);
    }
    /* 0 < Re w < 1 at z = 0: no derivative in z (NaN); a complex w: NaN too. */
    cr_value args[2] = {cr_value_c128(0), cr_value_c128(0.5)}, y;
    cr_tangent d[3] = {cr_tangent_none(), cr_tangent_c128(1), cr_tangent_zero()}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_cpow, args, 2, &y, &dy), CR_OK);
    assert_true(isnan(creal(unthunked(dy).u.c128)));
    args[1] = cr_value_c128(CMPLX(2, 1));
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_pow, args, 2, &y, &dy), CR_OK);
    assert_true(isnan(creal(unthunked(dy).u.c128)));
    cr_tangent dw[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_c128(1)};
    assert_int_equal(cr_frule(NULL, fx->arena, dw, &cr_fn_pow, args, 2, &y, &dy), CR_OK);
    assert_true(isnan(creal(unthunked(dy).u.c128)));
    /* Re w <= 0 at z = 0: no derivative in w. */
    args[1] = cr_value_c128(-1);
    assert_int_equal(cr_frule(NULL, fx->arena, dw, &cr_fn_cpow, args, 2, &y, &dy), CR_OK);
    assert_true(isnan(creal(unthunked(dy).u.c128)));
}

static void test_complex_args_and_errors(void **state)
{
    fixture *fx = *state;
    /* Integer and bool arguments of a complex row: read as numbers, NoTangent cotangents. */
    cr_value args[2] = {cr_value_c128(CMPLX(1.5, 0.5)), cr_value_i64(2)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cpow, args, 2, &y, &pb), CR_OK);
    cr_complex z = CMPLX(1.5, 0.5);
    ASSERT_CLOSE(cabs(y.u.c128 - z * z), 0, 1e-14);
    cr_tangent one = cr_tangent_c128(1), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, dx, 3), CR_OK);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    args[1] = cr_value_bool(true);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cpow, args, 2, &y), CR_OK);
    ASSERT_CLOSE(cabs(y.u.c128 - z), 0, 1e-15);
    cr_value cab = cr_value_bool(true);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cabs, &cab, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 1);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cabs, &cab, 1, &y, &pb), CR_OK);
    cr_tangent r1 = cr_tangent_f64(1);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &r1, dx, 2), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    /* Errors. */
    cr_range r = {0, 1, 1};
    cr_value s = cr_value_struct(&cr_range_type, &r);
    expect_err(fx, &cr_fn_csin, &s, 1, CR_EINVAL, "csin: argument 1 is a struct, not a number");
    expect_err(fx, &cr_fn_csin, args, 2, CR_EINVAL, "csin takes 1 argument, 2 given");
}

/* ---- evalpoly ---------------------------------------------------------------------------------
 */

static void test_evalpoly_kinds(void **state)
{
    fixture *fx = *state;
    /* Integer and bool coefficients: constants (NoTangent), read as numbers. */
    cr_value args[4] = {cr_value_f64(1.5), cr_value_i64(2), cr_value_bool(true),
                        cr_value_f64(-0.5)},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_evalpoly, args, 4, &y), CR_OK);
    ASSERT_CLOSE(y.u.f64, 2 + 1.5 - 0.5 * 1.5 * 1.5, 1e-15);
    check_rules(fx, &cr_fn_evalpoly, args, 4);
    /* An integer coefficient's tangent is ignored even when given. */
    cr_tangent d[5] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_f64(100), cr_tangent_zero(),
                       cr_tangent_zero()},
               dy;
    assert_int_equal(cr_frule(NULL, fx->arena, d, &cr_fn_evalpoly, args, 4, &y, &dy), CR_OK);
    ASSERT_DBL(unthunked(dy).u.f64, 0);
    cr_range r = {0, 1, 1};
    args[2] = cr_value_struct(&cr_range_type, &r);
    expect_err(fx, &cr_fn_evalpoly, args, 4, CR_EINVAL,
               "evalpoly takes a number x and one or more number coefficients");
}

/* ---- Hand-written math rules: edges and errors -------------------------------------------------
 */

static void test_math_edges(void **state)
{
    fixture *fx = *state;
    /* sincospi(±Inf) and sinpi(NaN) are NaN; sinc(±Inf) = 0 with derivative 0. */
    cr_value inf = cr_value_f64(INFINITY), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sincospi, &inf, 1, &y), CR_OK);
    cr_value s0, c0;
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 0, &s0), CR_OK);
    assert_int_equal(cr_type_field_value(y.u.obj.type, y.u.obj.ptr, 1, &c0), CR_OK);
    assert_true(isnan(s0.u.f64) && isnan(c0.u.f64));
    ASSERT_DBL(call1(fx, &cr_fn_sinc, inf), 0);
    ASSERT_DBL(frule1(fx, &cr_fn_sinc, inf, cr_tangent_f64(1)).u.f64, 0);
    ASSERT_DBL(frule1(fx, &cr_fn_sinc, cr_value_f64(-INFINITY), cr_tangent_f64(1)).u.f64, 0);
    /* lgamma's derivative (digamma) at +Inf is +Inf, at NaN NaN. */
    double dl = frule1(fx, &cr_fn_lgamma, inf, cr_tangent_f64(1)).u.f64;
    assert_true(isinf(dl) && dl > 0);
    assert_true(isnan(frule1(fx, &cr_fn_lgamma, cr_value_f64(NAN), cr_tangent_f64(1)).u.f64));
    /* logaddexp with a NaN: NaN value and derivative. */
    cr_value la[2] = {cr_value_f64(NAN), cr_value_f64(1)};
    cr_tangent d2[3] = {cr_tangent_none(), cr_tangent_f64(1), cr_tangent_f64(1)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, d2, &cr_fn_logaddexp, la, 2, &y, &dy), CR_OK);
    assert_true(isnan(y.u.f64) && isnan(unthunked(dy).u.f64));
    /* hypot of three: a NaN gives NaN unless an infinity is present; a bool reads as 0/1. */
    cr_value h3[3] = {cr_value_f64(1), cr_value_f64(NAN), cr_value_f64(2)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_hypot, h3, 3, &y), CR_OK);
    assert_true(isnan(y.u.f64));
    h3[2] = cr_value_f64(-INFINITY);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_hypot, h3, 3, &y), CR_OK);
    assert_true(isinf(y.u.f64) && y.u.f64 > 0);
    cr_value hb[3] = {cr_value_bool(true), cr_value_f64(2), cr_value_i64(2)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_hypot, hb, 3, &y), CR_OK);
    ASSERT_CLOSE(y.u.f64, 3, 1e-15);
    check_rules(fx, &cr_fn_hypot, hb, 3);
    /* frexp of an integer: the mantissa's tangent is zero whatever the input tangent. */
    cr_value fi = cr_value_i64(12);
    cr_tangent d1[2] = {cr_tangent_none(), cr_tangent_f64(5)};
    assert_int_equal(cr_frule(NULL, fx->arena, d1, &cr_fn_frexp, &fi, 1, &y, &dy), CR_OK);
    cr_tangent dm = unthunked(cr_tangent_field(unthunked(dy), 0));
    assert_true(cr_tangent_is_zero(dm) || (dm.tag == CR_TAN_F64 && dm.u.f64 == 0));
    cr_value ff = cr_value_f64(12);
    check_rules(fx, &cr_fn_frexp, &ff, 1);
}

static void test_math_errors(void **state)
{
    fixture *fx = *state;
    cr_value z = cr_value_c128(CMPLX(1, 1));
    expect_err(fx, &cr_fn_frexp, &z, 1, CR_EINVAL, "frexp takes one real argument");
    expect_err(fx, &cr_fn_remquo, ((cr_value[]){z, cr_value_f64(1)}), 2, CR_EINVAL,
               "remquo takes two real arguments");
    expect_err(fx, &cr_fn_hypot, ((cr_value[]){cr_value_f64(1), z, cr_value_f64(2)}), 3, CR_EINVAL,
               "hypot takes two or more real arguments");
    expect_err(fx, &cr_fn_floor, &z, 1, CR_EINVAL, "floor takes real arguments");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_polygamma_large_order, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_beta_gamma_inc_edges, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_special_tangent_kinds, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_special_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gamma_inc_tangents, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_math_nan_exponents, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_complex_pow_at_zero, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_complex_args_and_errors, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_evalpoly_kinds, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_math_edges, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_math_errors, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
