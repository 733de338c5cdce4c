/*
 * Tests of the Julia Base scalars tanpi, sincosd, mod2pi, rem2pi, log_base (log(b, x)), the
 * complex fma, csign (sign of a complex number), chypot (hypot of complex numbers) and
 * evalpoly with a vector of coefficients.
 * Primals: against 512-bit MPFR values when the build has MPFR (tan(pi x), sin and cos of
 * x pi/180, x - 2 pi n with n rounded in MPFR, log x / log b), and exact values (zeros,
 * poles, quadrants) in every build. Derivatives: each argument's real and imaginary
 * directions by adaptive finite differences of the primal (the real Jacobian), against the
 * frule (J ż) and the pullback (Jᵀ ȳ, ChainRules' complex convention).
 */
#include <complex.h>
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

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define PI_D     3.14159265358979323846

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
    cr_ctx_set_debug(f->ctx, true);
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

/* The primal through the library (cr_function_call) as a complex number. */
static cr_complex call(fixture *fx, const cr_value *f, const cr_value *args, size_t n, size_t out)
{
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, f, args, n, &y), CR_OK);
    switch (y.kind) {
    case CR_KIND_F64:
        return y.u.f64;
    case CR_KIND_C128:
        return y.u.c128;
    case CR_KIND_STRUCT:
        return ((const double *)y.u.obj.ptr)[out];
    default:
        fail_msg("unexpected output kind %d", (int)y.kind);
        return 0;
    }
}

static double real_of(fixture *fx, const cr_value *f, double x)
{
    cr_value a = cr_value_f64(x);
    return creal(call(fx, f, &a, 1, 0));
}

/* ---- Values ------------------------------------------------------------------------------- */

static void test_values(void **state)
{
    fixture *fx = *state;
    /* tanpi: exact zeros at integers (sign of zero kept), ±inf at half-integers, 1 at 1/4 */
    assert_true(real_of(fx, &cr_fn_tanpi, 3.0) == 0);
    assert_true(signbit(real_of(fx, &cr_fn_tanpi, -0.0)));
    assert_true(isinf(real_of(fx, &cr_fn_tanpi, 0.5)));
    assert_true(real_of(fx, &cr_fn_tanpi, 0.25) == 1 && real_of(fx, &cr_fn_tanpi, -1.25) == -1);
    assert_true(real_of(fx, &cr_fn_tanpi, 1e300) == 0);
    /* sincosd: exact at multiples of 90 */
    cr_value a = cr_value_f64(90.0);
    assert_true(call(fx, &cr_fn_sincosd, &a, 1, 0) == 1 && call(fx, &cr_fn_sincosd, &a, 1, 1) == 0);
    a = cr_value_f64(-540.0);
    assert_true(call(fx, &cr_fn_sincosd, &a, 1, 0) == 0 &&
                call(fx, &cr_fn_sincosd, &a, 1, 1) == -1);
    /* mod2pi in [0, 2pi), rem2pi ranges by mode, NaN beyond 2^50 and for a bad mode */
    for (int i = 0; i < 200; i++) {
        double x = (i % 2 ? -1.0 : 1.0) * pow(1.13, i) * 0.37; /* both signs, 0.37 to 1e10 */
        double m = real_of(fx, &cr_fn_mod2pi, x);
        assert_true(m >= 0 && m < 2 * PI_D);
        cr_value r[2] = {cr_value_f64(x), cr_value_i64(CR_ROUND_NEAREST)};
        double v = creal(call(fx, &cr_fn_rem2pi, r, 2, 0));
        assert_true(fabs(v) <= PI_D);
        r[1] = cr_value_i64(CR_ROUND_TO_ZERO);
        v = creal(call(fx, &cr_fn_rem2pi, r, 2, 0));
        assert_true(fabs(v) < 2 * PI_D && (v == 0 || (v > 0) == (x > 0)));
        r[1] = cr_value_i64(CR_ROUND_UP);
        v = creal(call(fx, &cr_fn_rem2pi, r, 2, 0));
        assert_true(v <= 0 && v > -2 * PI_D);
    }
    assert_true(isnan(real_of(fx, &cr_fn_mod2pi, 0x1p51)));
    cr_value r[2] = {cr_value_f64(1.0), cr_value_i64(7)};
    assert_true(isnan(creal(call(fx, &cr_fn_rem2pi, r, 2, 0))));
    /* log_base: exact powers */
    cr_value lb[2] = {cr_value_f64(2.0), cr_value_f64(1024.0)};
    assert_true(creal(call(fx, &cr_fn_log_base, lb, 2, 0)) == 10);
    /* complex fma: x y + z with the real parts fused */
    cr_value fa[3] = {cr_value_c128(CMPLX(1.0 + 0x1p-30, 2.0)),
                      cr_value_c128(CMPLX(1.0 - 0x1p-30, -1.0)), cr_value_c128(CMPLX(-3.0, 0.5))};
    cr_complex v = call(fx, &cr_fn_fma, fa, 3, 0);
    /* re = (1 + e)(1 - e) + 2 - 3 = -e² exactly; im = -(1 + e) + 2(1 - e) + 0.5 */
    assert_true(creal(v) == -0x1p-60);
    assert_true(cimag(v) == 1.5 - 3 * 0x1p-30);
    /* csign and chypot */
    cr_value z = cr_value_c128(CMPLX(3.0, -4.0));
    v = call(fx, &cr_fn_csign, &z, 1, 0);
    assert_true(fabs(creal(v) - 0.6) < 1e-16 && fabs(cimag(v) + 0.8) < 1e-16);
    z = cr_value_c128(0.0);
    assert_true(call(fx, &cr_fn_csign, &z, 1, 0) == 0);
    cr_value zw[2] = {cr_value_c128(CMPLX(3.0, 4.0)), cr_value_c128(CMPLX(0.0, 12.0))};
    assert_true(creal(call(fx, &cr_fn_chypot, zw, 2, 0)) == 13);
    zw[0] = cr_value_c128(CMPLX(3e200, 4e200));
    zw[1] = cr_value_c128(0.0);
    assert_true(fabs(creal(call(fx, &cr_fn_chypot, zw, 2, 0)) - 5e200) < 1e186);
    cr_arena_reset(fx->arena);
}

#ifdef CR_HAVE_MPFR
#include <mpfr.h>

#define MP_PREC 512

static double sweep_point(uint64_t *s, double lo, double hi)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return lo + (double)(*s >> 11) * 0x1.0p-53 * (hi - lo);
}

/* x - 2 pi n, n = x/(2 pi) rounded by `mode` (CR_ROUND_*), at MP_PREC bits. */
static double mp_rem2pi(double x, int mode)
{
    mpfr_t t, p, n;
    mpfr_inits2(MP_PREC, t, p, n, (mpfr_ptr)0);
    mpfr_const_pi(p, MPFR_RNDN);
    mpfr_mul_2ui(p, p, 1, MPFR_RNDN);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_div(n, t, p, MPFR_RNDN);
    if (mode == CR_ROUND_NEAREST)
        mpfr_roundeven(n, n);
    else if (mode == CR_ROUND_TO_ZERO)
        mpfr_trunc(n, n);
    else if (mode == CR_ROUND_DOWN)
        mpfr_floor(n, n);
    else
        mpfr_ceil(n, n);
    mpfr_mul(n, n, p, MPFR_RNDN);
    mpfr_sub(t, t, n, MPFR_RNDN);
    double r = mpfr_get_d(t, MPFR_RNDN);
    mpfr_clears(t, p, n, (mpfr_ptr)0);
    return r;
}

/* sin (which 0), cos (1) or tan (2) of x * scale, scale = pi / div, at MP_PREC bits. */
static double mp_trig(double x, unsigned long div, int which)
{
    mpfr_t t, p;
    mpfr_inits2(MP_PREC, t, p, (mpfr_ptr)0);
    mpfr_const_pi(p, MPFR_RNDN);
    mpfr_div_ui(p, p, div, MPFR_RNDN);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_mul(t, t, p, MPFR_RNDN);
    if (which == 0)
        mpfr_sin(t, t, MPFR_RNDN);
    else if (which == 1)
        mpfr_cos(t, t, MPFR_RNDN);
    else
        mpfr_tan(t, t, MPFR_RNDN);
    double r = mpfr_get_d(t, MPFR_RNDN);
    mpfr_clears(t, p, (mpfr_ptr)0);
    return r;
}

static double mp_log_base(double b, double x)
{
    mpfr_t t, u;
    mpfr_inits2(MP_PREC, t, u, (mpfr_ptr)0);
    mpfr_set_d(t, x, MPFR_RNDN);
    mpfr_log(t, t, MPFR_RNDN);
    mpfr_set_d(u, b, MPFR_RNDN);
    mpfr_log(u, u, MPFR_RNDN);
    mpfr_div(t, t, u, MPFR_RNDN);
    double r = mpfr_get_d(t, MPFR_RNDN);
    mpfr_clears(t, u, (mpfr_ptr)0);
    return r;
}

static double rel(double v, double want, double floor)
{
    return v == want ? 0 : fabs(v - want) / fmax(fabs(want), floor);
}

static void test_values_mpfr(void **state)
{
    fixture *fx = *state;
    uint64_t seed = 99;
    double w_tan = 0, w_sc = 0, w_rem = 0, w_log = 0;
    for (int k = 0; k < 400; k++) {
        double x = sweep_point(&seed, -20, 20), big = sweep_point(&seed, -1e12, 1e12);
        /* floor 1e-100: at an integer x the 512-bit pi x is not an exact multiple of pi, so
         * the reference is about 1e-150 where tanpi is an exact 0 */
        w_tan = fmax(w_tan, rel(real_of(fx, &cr_fn_tanpi, x), mp_trig(x, 1, 2), 1e-100));
        w_tan = fmax(w_tan, rel(real_of(fx, &cr_fn_tanpi, big), mp_trig(big, 1, 2), 1e-100));
        double d = 50 * x;
        cr_value a = cr_value_f64(d);
        w_sc =
            fmax(w_sc, rel(creal(call(fx, &cr_fn_sincosd, &a, 1, 0)), mp_trig(d, 180, 0), 1e-100));
        w_sc =
            fmax(w_sc, rel(creal(call(fx, &cr_fn_sincosd, &a, 1, 1)), mp_trig(d, 180, 1), 1e-100));
        /* remainders: absolute against 2 pi (a remainder near 0 has no relative accuracy) */
        for (int mode = CR_ROUND_NEAREST; mode <= CR_ROUND_UP; mode++) {
            double xs[2] = {x * 1e3, big};
            for (int j = 0; j < 2; j++) {
                cr_value r[2] = {cr_value_f64(xs[j]), cr_value_i64(mode)};
                double v = creal(call(fx, &cr_fn_rem2pi, r, 2, 0));
                w_rem = fmax(w_rem, rel(v, mp_rem2pi(xs[j], mode), 2 * PI_D));
            }
        }
        double b = sweep_point(&seed, 1.1, 20), y = exp(sweep_point(&seed, -50, 50));
        cr_value lb[2] = {cr_value_f64(b), cr_value_f64(y)};
        w_log = fmax(w_log, rel(creal(call(fx, &cr_fn_log_base, lb, 2, 0)), mp_log_base(b, y), 0));
        cr_arena_reset(fx->arena);
    }
    print_message("MPFR tanpi %.3g, sincosd %.3g, rem2pi %.3g (of 2 pi), log_base %.3g\n", w_tan,
                  w_sc, w_rem, w_log);
    assert_true(w_tan < 4e-16 && w_sc < 4e-16 && w_rem < 4e-16 && w_log < 6e-16);
    mpfr_free_cache();
}
#endif

/* ---- Derivatives --------------------------------------------------------------------------- */

typedef struct fd_env {
    fixture *fx;
    const cr_value *f;
    cr_value args[3];
    size_t nargs, k, out;
    cr_complex dir; /* the direction of argument k */
    cr_complex c;   /* the functional: real(conj(c) f) */
} fd_env;

static cr_status fd_fn(double t, double *y, void *env)
{
    fd_env *e = env;
    cr_value a[3];
    memcpy(a, e->args, sizeof a);
    if (a[e->k].kind == CR_KIND_C128)
        a[e->k].u.c128 += t * e->dir;
    else
        a[e->k].u.f64 += t;
    cr_complex v = call(e->fx, e->f, a, e->nargs, e->out);
    *y = creal(conj(e->c) * v);
    return isfinite(*y) ? CR_OK : CR_EDOMAIN;
}

static double fd(fd_env *e, double *tol)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    cr_fd_opts opts = {0};
    opts.max_range = 0.05;
    double d = 0, err = 0;
    assert_int_equal(cr_fd_derivative(&m, &opts, fd_fn, e, 0.0, &d, &err), CR_OK);
    *tol = 1e-8 * fmax(1.0, fabs(d)) + 20 * err;
    return d;
}

/* The output's real number from a tangent (f64) or a complex one. */
static cr_complex tan_value(cr_tangent t, size_t out)
{
    if (t.tag == CR_TAN_STRUCT)
        t = cr_tangent_field(t, out);
    if (t.tag == CR_TAN_F64)
        return t.u.f64;
    if (t.tag == CR_TAN_C128)
        return t.u.c128;
    if (cr_tangent_is_zero(t))
        return 0;
    fail_msg("unexpected tangent tag %d", (int)t.tag);
    return 0;
}

/* For each argument k and each of its directions (1, and i for a complex argument): the
 * frule's tangent against the difference of the output (both parts), and the pullback of
 * ȳ = c against the differences of real(conj(c) f). */
static void check_rule(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                       size_t nout, const char *name)
{
    static const cr_complex cs[2] = {1.0, CMPLX(0.3, -0.7)};
    for (size_t out = 0; out < nout; out++)
        for (size_t k = 0; k < nargs; k++) {
            bool cplx = args[k].kind == CR_KIND_C128;
            for (int di = 0; di < (cplx ? 2 : 1); di++) {
                cr_complex dir = di == 0 ? 1.0 : CMPLX(0.0, 1.0);
                fd_env e = {.fx = fx, .f = f, .nargs = nargs, .k = k, .out = out, .dir = dir};
                memcpy(e.args, args, nargs * sizeof *args);
                double tr, ti;
                e.c = 1.0;
                double dr = fd(&e, &tr);
                e.c = CMPLX(0.0, 1.0);
                double dim = fd(&e, &ti);
                cr_tangent dargs[4] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_zero(),
                                       cr_tangent_zero()};
                dargs[k + 1] = cplx ? cr_tangent_c128(dir) : cr_tangent_f64(1.0);
                cr_value y;
                cr_tangent dy;
                assert_int_equal(cr_frule(NULL, fx->arena, dargs, f, args, nargs, &y, &dy), CR_OK);
                cr_complex got = tan_value(dy, out);
                if (!(fabs(creal(got) - dr) <= tr && fabs(cimag(got) - dim) <= ti))
                    fail_msg("%s frule, argument %zu, direction %d, output %zu: got %.17g%+.17gi, "
                             "differences %.17g%+.17gi",
                             name, k + 1, di, out, creal(got), cimag(got), dr, dim);
                for (size_t ci = 0; ci < 2; ci++) {
                    cr_pullback pb;
                    assert_int_equal(cr_rrule(NULL, fx->arena, f, args, nargs, &y, &pb), CR_OK);
                    /* ȳ = c for a complex output; re(c) for a real one (or a tuple's field) */
                    bool cout = y.kind == CR_KIND_C128;
                    e.c = cout ? cs[ci] : creal(cs[ci]);
                    double tp, dp = fd(&e, &tp);
                    cr_tangent g, dx[4];
                    if (nout > 1) {
                        cr_tangent seeds[2] = {cr_tangent_zero(), cr_tangent_zero()};
                        seeds[out] = cr_tangent_f64(creal(cs[ci]));
                        assert_int_equal(
                            cr_tangent_struct(fx->arena, y.u.obj.type, NULL, seeds, 2, &g), CR_OK);
                    } else
                        g = cout ? cr_tangent_c128(cs[ci]) : cr_tangent_f64(creal(cs[ci]));
                    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, nargs + 1), CR_OK);
                    cr_complex gx = tan_value(dx[k + 1], 0);
                    double comp = di == 0 ? creal(gx) : cimag(gx);
                    if (!(fabs(comp - dp) <= tp))
                        fail_msg("%s pullback, argument %zu, direction %d, cotangent %zu: got "
                                 "%.17g, differences %.17g",
                                 name, k + 1, di, ci, comp, dp);
                }
                cr_arena_reset(fx->arena);
            }
        }
}

static void test_real_rules(void **state)
{
    fixture *fx = *state;
    static const double tp[] = {0.0, 0.2, -0.3, 0.45, 3.375, -7.1};
    for (size_t i = 0; i < NELEM(tp); i++) {
        cr_value a = cr_value_f64(tp[i]);
        check_rule(fx, &cr_fn_tanpi, &a, 1, 1, "tanpi");
        cr_value d = cr_value_f64(tp[i] * 100);
        check_rule(fx, &cr_fn_sincosd, &d, 1, 2, "sincosd");
        cr_value m = cr_value_f64(tp[i] * 40 + 0.5);
        check_rule(fx, &cr_fn_mod2pi, &m, 1, 1, "mod2pi");
        for (int mode = 0; mode < 4; mode++) {
            cr_value r[2] = {m, cr_value_f64(mode)};
            check_rule(fx, &cr_fn_rem2pi, r, 2, 1, "rem2pi");
        }
        cr_value lb[2] = {cr_value_f64(2.0 + tp[i] * tp[i]), cr_value_f64(fabs(tp[i]) + 0.1)};
        check_rule(fx, &cr_fn_log_base, lb, 2, 1, "log_base");
    }
    /* An integer mode gets NoTangent. */
    cr_value r[2] = {cr_value_f64(10.0), cr_value_i64(CR_ROUND_NEAREST)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_rem2pi, r, 2, &y, &pb), CR_OK);
    cr_tangent g = cr_tangent_f64(1.0), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    assert_true(dx[1].tag == CR_TAN_F64 && dx[1].u.f64 == 1);
    cr_arena_reset(fx->arena);
}

static void test_complex_rules(void **state)
{
    fixture *fx = *state;
    static const cr_complex zs[] = {CMPLX(1.5, -0.5), CMPLX(-0.7, 2.0), CMPLX(0.3, 0.0),
                                    CMPLX(-2.0, -1e-3)};
    for (size_t i = 0; i < NELEM(zs); i++) {
        cr_value z = cr_value_c128(zs[i]);
        check_rule(fx, &cr_fn_csign, &z, 1, 1, "csign");
        cr_value zw[2] = {z, cr_value_c128(zs[(i + 1) % NELEM(zs)])};
        check_rule(fx, &cr_fn_chypot, zw, 2, 1, "chypot");
        cr_value f3[3] = {z, zw[1], cr_value_c128(CMPLX(0.25, 1.0))};
        check_rule(fx, &cr_fn_fma, f3, 3, 1, "fma");
        /* log(b, x) with complex b and x, away from the cut */
        cr_value lb[2] = {cr_value_c128(CMPLX(2.0, 0.5)), cr_value_c128(zs[i] + 3.0)};
        check_rule(fx, &cr_fn_log_base, lb, 2, 1, "log_base");
    }
    /* Mixed real and complex arguments of chypot. */
    cr_value mixed[2] = {cr_value_f64(-2.0), cr_value_c128(CMPLX(1.0, 1.0))};
    check_rule(fx, &cr_fn_chypot, mixed, 2, 1, "chypot");
    /* At 0: zero tangents (the jump of sign; hypot's kink). */
    cr_value z0 = cr_value_c128(0.0), y;
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_c128(CMPLX(1.0, 1.0))}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_csign, &z0, 1, &y, &dy), CR_OK);
    assert_true(dy.tag == CR_TAN_C128 && dy.u.c128 == 0);
    cr_value zw0[2] = {z0, z0};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_chypot, zw0, 2, &y, &pb), CR_OK);
    cr_tangent g = cr_tangent_f64(1.0), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
    assert_true(dx[1].tag == CR_TAN_C128 && dx[1].u.c128 == 0);
    /* Bad input. */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_chypot, zw0, 1, &y), CR_EINVAL);
    cr_arena_reset(fx->arena);
}

/* ---- evalpoly with a vector of coefficients ------------------------------------------------ */

typedef struct ep_env {
    fixture *fx;
    double x, c[4];
    int k; /* -1: x, else the coefficient perturbed */
} ep_env;

static cr_status ep_fn(double t, double *y, void *env)
{
    ep_env *e = env;
    double c[4];
    memcpy(c, e->c, sizeof c);
    double x = e->x;
    if (e->k < 0)
        x += t;
    else
        c[e->k] += t;
    cr_array a = cr_array_vector(c, 4);
    cr_value args[2] = {cr_value_f64(x), cr_value_array(&a)}, v;
    cr_status st = cr_function_call(e->fx->arena, &cr_fn_evalpoly, args, 2, &v);
    *y = v.u.f64;
    return st;
}

static void test_evalpoly_vector(void **state)
{
    fixture *fx = *state;
    ep_env e = {.fx = fx, .x = -1.3, .c = {1.5, -2.0, 0.25, 3.0}};
    double c[4] = {1.5, -2.0, 0.25, 3.0};
    cr_array a = cr_array_vector(c, 4);
    cr_value args[2] = {cr_value_f64(e.x), cr_value_array(&a)}, y;
    /* the value against the polynomial written out */
    double x = e.x, want = 1.5 - 2.0 * x + 0.25 * x * x + 3.0 * x * x * x;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_evalpoly, args, 2, &y), CR_OK);
    assert_true(fabs(y.u.f64 - want) < 1e-14);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    cr_fd_opts opts = {0};
    opts.max_range = 0.1;
    double d[5], err;
    for (int k = -1; k < 4; k++) {
        e.k = k;
        assert_int_equal(cr_fd_derivative(&m, &opts, ep_fn, &e, 0.0, &d[k + 1], &err), CR_OK);
    }
    /* frule: Δx = 1 with a zero Δc, then Δc = e_k */
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_f64(1.0), cr_tangent_zero()}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_evalpoly, args, 2, &y, &dy), CR_OK);
    assert_true(dy.tag == CR_TAN_F64 && fabs(dy.u.f64 - d[0]) < 1e-8);
    for (int k = 0; k < 4; k++) {
        double t[4] = {0, 0, 0, 0};
        t[k] = 1;
        cr_array ta = cr_array_vector(t, 4);
        dargs[1] = cr_tangent_zero();
        dargs[2] = cr_tangent_array(&ta);
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_evalpoly, args, 2, &y, &dy),
                         CR_OK);
        assert_true(fabs(dy.u.f64 - d[k + 1]) < 1e-8);
    }
    /* pullback of 2: (2 p'(x), [2 x^i]) */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_evalpoly, args, 2, &y, &pb), CR_OK);
    cr_tangent g = cr_tangent_f64(2.0), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 3), CR_OK);
    assert_true(dx[1].tag == CR_TAN_F64 && fabs(dx[1].u.f64 - 2 * d[0]) < 2e-8);
    assert_int_equal(dx[2].tag, CR_TAN_ARRAY);
    for (size_t k = 0; k < 4; k++)
        assert_true(fabs(creal(cr_array_get_linear(dx[2].u.arr, k)) - 2 * d[k + 1]) < 2e-8);
    /* bad input: an empty vector, a matrix */
    cr_array empty = cr_array_vector(c, 0);
    args[1] = cr_value_array(&empty);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_evalpoly, args, 2, &y), CR_EINVAL);
    cr_array mat = cr_array_matrix(c, 2, 2);
    args[1] = cr_value_array(&mat);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_evalpoly, args, 2, &y), CR_EINVAL);
    cr_arena_reset(fx->arena);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_values, setup, teardown),
#ifdef CR_HAVE_MPFR
        cmocka_unit_test_setup_teardown(test_values_mpfr, setup, teardown),
#endif
        cmocka_unit_test_setup_teardown(test_real_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complex_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evalpoly_vector, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
