/*
 * Finite-difference checks of the <complex.h> rule family (rules_complex.h) and of the
 * complex arithmetic rows (+ - * / neg of rules_math.h with complex arguments).
 *
 * A complex function is checked as the map R^2 -> R^2 it is: its 2x2 real Jacobian J is
 * estimated by finite differences of the C library's function (chainrules/fd.h), never
 * from the derivative formulas of the rules. Then the frule with ż = 1 and ż = i must give
 * the columns of J, and the pullback of ȳ = 1 and ȳ = i its rows (Jᵀ·ȳ), which is
 * ChainRules' convention. On a branch cut the difference across the cut is one-sided,
 * from the side that the sign of zero selects.
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

/* ---- Fixture ------------------------------------------------------------------------------ */

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
    /* Debug mode: every cotangent is checked against its argument's projection. */
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

static cr_complex mkc(double re, double im)
{
    double p[2] = {re, im};
    cr_complex z;
    memcpy(&z, p, sizeof z);
    return z;
}

static void check_close_(cr_complex got, cr_complex want, double tol, const char *what,
                         const char *file, int line)
{
    if (!(cabs(got - want) <= tol)) {
        print_error("%s: got %.17g%+.17gi, want %.17g%+.17gi (|diff| %.3g > tol %.3g)\n", what,
                    creal(got), cimag(got), creal(want), cimag(want), cabs(got - want), tol);
        _fail(file, line);
    }
}
#define check_close(got, want, tol, what) check_close_(got, want, tol, what, __FILE__, __LINE__)

/* The number a scalar tangent carries (fails the test for other tags). */
static cr_complex tangent_value(cr_tangent t, const char *what)
{
    switch ((cr_tag)t.tag) {
    case CR_TAN_ZERO:
        return 0.0;
    case CR_TAN_F64:
        return t.u.f64;
    case CR_TAN_F32:
        return (double)t.u.f32;
    case CR_TAN_C128:
        return t.u.c128;
    default:
        print_error("%s: unexpected tangent %s\n", what, cr_tag_name((cr_tag)t.tag));
        fail();
    }
    return 0.0;
}

/* ---- The functions under test, as reference maps ---------------------------------------- */

typedef enum { OUT_COMPLEX, OUT_REAL } out_kind;

typedef struct cfun {
    const char *name;
    const cr_value *fn;
    int nin;
    out_kind out;
    cr_complex (*z1)(cr_complex);             /* nin == 1, complex output */
    cr_complex (*z2)(cr_complex, cr_complex); /* nin == 2 */
    double (*r1)(cr_complex);                 /* nin == 1, real output */
} cfun;

static cr_complex ref_inv(cr_complex z)
{
    return 1.0 / z;
}
static cr_complex ref_conj(cr_complex z)
{
    return conj(z);
}
static cr_complex ref_cproj(cr_complex z)
{
    return cproj(z);
}
static double ref_cabs(cr_complex z)
{
    return cabs(z);
}
static double ref_carg(cr_complex z)
{
    return carg(z);
}
static double ref_creal(cr_complex z)
{
    return creal(z);
}
static double ref_cimag(cr_complex z)
{
    return cimag(z);
}
static double ref_abs2(cr_complex z)
{
    return creal(z) * creal(z) + cimag(z) * cimag(z);
}
static cr_complex ref_add(cr_complex a, cr_complex b)
{
    return a + b;
}
static cr_complex ref_sub(cr_complex a, cr_complex b)
{
    return a - b;
}
static cr_complex ref_mul(cr_complex a, cr_complex b)
{
    return a * b;
}
static cr_complex ref_div(cr_complex a, cr_complex b)
{
    return a / b;
}
static cr_complex ref_neg(cr_complex a)
{
    return -a;
}

#define Z1(NAME)                                               \
    {                                                          \
#NAME, &cr_fn_##NAME, 1, OUT_COMPLEX, NAME, NULL, NULL \
    }
static const cfun F_csin = Z1(csin), F_ccos = Z1(ccos), F_ctan = Z1(ctan), F_casin = Z1(casin),
                  F_cacos = Z1(cacos), F_catan = Z1(catan), F_csinh = Z1(csinh),
                  F_ccosh = Z1(ccosh), F_ctanh = Z1(ctanh), F_casinh = Z1(casinh),
                  F_cacosh = Z1(cacosh), F_catanh = Z1(catanh), F_cexp = Z1(cexp),
                  F_clog = Z1(clog), F_csqrt = Z1(csqrt);
static const cfun F_cpow = {"cpow", &cr_fn_cpow, 2, OUT_COMPLEX, NULL, cpow, NULL};
static const cfun F_cinv = {"cinv", &cr_fn_cinv, 1, OUT_COMPLEX, ref_inv, NULL, NULL};
static const cfun F_conj = {"conj", &cr_fn_conj, 1, OUT_COMPLEX, ref_conj, NULL, NULL};
static const cfun F_cproj = {"cproj", &cr_fn_cproj, 1, OUT_COMPLEX, ref_cproj, NULL, NULL};
static const cfun F_cabs = {"cabs", &cr_fn_cabs, 1, OUT_REAL, NULL, NULL, ref_cabs};
static const cfun F_carg = {"carg", &cr_fn_carg, 1, OUT_REAL, NULL, NULL, ref_carg};
static const cfun F_creal = {"creal", &cr_fn_creal, 1, OUT_REAL, NULL, NULL, ref_creal};
static const cfun F_cimag = {"cimag", &cr_fn_cimag, 1, OUT_REAL, NULL, NULL, ref_cimag};
static const cfun F_abs2 = {"abs2", &cr_fn_abs2, 1, OUT_REAL, NULL, NULL, ref_abs2};
static const cfun F_add = {"+", &cr_fn_add, 2, OUT_COMPLEX, NULL, ref_add, NULL};
static const cfun F_sub = {"-", &cr_fn_sub, 2, OUT_COMPLEX, NULL, ref_sub, NULL};
static const cfun F_mul = {"*", &cr_fn_mul, 2, OUT_COMPLEX, NULL, ref_mul, NULL};
static const cfun F_div = {"/", &cr_fn_div, 2, OUT_COMPLEX, NULL, ref_div, NULL};
static const cfun F_neg = {"neg", &cr_fn_neg, 1, OUT_COMPLEX, ref_neg, NULL, NULL};

static cr_complex eval_ref(const cfun *F, const cr_complex *z)
{
    if (F->out == OUT_REAL)
        return F->r1(z[0]);
    return F->nin == 1 ? F->z1(z[0]) : F->z2(z[0], z[1]);
}

/* ---- The check ---------------------------------------------------------------------------- */

/* A test point: the arguments as (re, im) pairs (static initialisers keep signed zeros),
 * the side of each real coordinate the finite difference may use (0 both, +1 above only,
 * -1 below only: on a branch cut) and the largest distance it may go (keeps it on one side
 * of a nearby cut or away from a singularity; 0 means 0.25). */
typedef struct point {
    double x[4];
    signed char side[4];
    double range;
} point;

static cr_complex point_arg(const point *p, size_t j)
{
    return mkc(p->x[2 * j], p->x[2 * j + 1]);
}

/* One output component of the reference as a function of one real coordinate, the others
 * fixed. Coordinate k is x[k] + t, and exactly x[k] at t = 0: -0 + 0 would be +0 and put
 * the centre of a one-sided difference on the other side of the cut. (For the same reason
 * the difference is not taken along a direction vector: -0 + t·0 is +0 for t > 0.) */
typedef struct slice {
    const cfun *F;
    const point *p;
    size_t k, out;
} slice;

static cr_status slice_fn(double t, double *y, void *env)
{
    const slice *s = env;
    double x[4];
    memcpy(x, s->p->x, sizeof x);
    if (t != 0)
        x[s->k] += t;
    cr_complex z[2] = {mkc(x[0], x[1]), mkc(x[2], x[3])};
    cr_complex v = eval_ref(s->F, z);
    *y = s->out == 0 ? creal(v) : cimag(v);
    return CR_OK;
}

#define RTOL 2e-7

/* J (m x 2nin, row-major) by finite differences of the reference. */
static void fd_jacobian(const cfun *F, const point *p, double *J, double *err)
{
    size_t n = 2 * (size_t)F->nin, m = F->out == OUT_REAL ? 1 : 2;
    cr_fd_opts opts = {0};
    opts.max_range = p->range > 0 ? p->range : 0.25;
    *err = 0;
    for (size_t k = 0; k < n; k++) {
        cr_fdm method;
        if (p->side[k] > 0)
            assert_int_equal(cr_fdm_forward(6, 1, &method), CR_OK);
        else if (p->side[k] < 0)
            assert_int_equal(cr_fdm_backward(6, 1, &method), CR_OK);
        else
            assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
        for (size_t i = 0; i < m; i++) {
            slice s = {F, p, k, i};
            double e = 0;
            cr_status st = cr_fd_derivative(&method, &opts, slice_fn, &s, 0.0, &J[i * n + k], &e);
            if (st != CR_OK) {
                print_error("%s: finite differences failed (%s)\n", F->name, cr_status_name(st));
                fail();
            }
            *err = fmax(*err, e);
        }
    }
}

/* Check primal, frule and pullback of F at p with arguments of the given kinds (C128, or
 * F64 for a real argument: then only its real coordinate is perturbed). */
static void check_point_kinds(fixture *fx, const cfun *F, const point *p, const cr_kind *kinds)
{
    cr_arena *arena = fx->arena;
    size_t nin = (size_t)F->nin, n = 2 * nin, m = F->out == OUT_REAL ? 1 : 2;
    double J[8], err;
    fd_jacobian(F, p, J, &err);
    double scale = 0;
    for (size_t i = 0; i < m * n; i++)
        scale = fmax(scale, fabs(J[i]));
    double tol = RTOL * fmax(1.0, scale) + 20 * err;
    char what[160];

    cr_value args[2];
    cr_complex z[2] = {point_arg(p, 0), point_arg(p, 1)};
    for (size_t j = 0; j < nin; j++)
        args[j] = kinds[j] == CR_KIND_F64 ? cr_value_f64(p->x[2 * j]) : cr_value_c128(z[j]);
    cr_complex want_y = eval_ref(F, z);

    /* frule: ż_j = 1 and ż_j = i give columns 2j and 2j+1 of J. */
    for (size_t k = 0; k < n; k++) {
        size_t j = k / 2;
        if (kinds[j] == CR_KIND_F64 && k % 2 == 1)
            continue;
        cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_zero()};
        dargs[j + 1] = kinds[j] == CR_KIND_F64 ? cr_tangent_f64(1.0)
                                               : cr_tangent_c128(k % 2 ? mkc(0, 1) : mkc(1, 0));
        cr_value y;
        cr_tangent dy;
        cr_status st = cr_frule(NULL, arena, dargs, F->fn, args, nin, &y, &dy);
        if (st != CR_OK) {
            print_error("%s: frule failed: %s\n", F->name, cr_ctx_errmsg(fx->ctx));
            fail();
        }
        cr_complex yv = y.kind == CR_KIND_F64 ? y.u.f64 : y.u.c128;
        assert_int_equal(y.kind, F->out == OUT_REAL ? CR_KIND_F64 : CR_KIND_C128);
        snprintf(what, sizeof what, "%s(%g%+gi, ...) primal", F->name, p->x[0], p->x[1]);
        check_close(yv, want_y, 4e-16 * cabs(want_y), what);
        assert_int_equal(dy.tag, F->out == OUT_REAL ? CR_TAN_F64 : CR_TAN_C128);
        cr_complex want = m == 1 ? J[k] : mkc(J[k], J[n + k]);
        snprintf(what, sizeof what, "%s(%g%+gi, ...) frule dz[%zu] = %s", F->name, p->x[0], p->x[1],
                 j, k % 2 ? "i" : "1");
        check_close(tangent_value(dy, what), want, tol, what);
    }

    /* pullback: ȳ = 1 gives row 0 of J (as re + i·im per argument), ȳ = i row 1. */
    for (size_t i = 0; i < m; i++) {
        cr_value y;
        cr_pullback pb;
        cr_status st = cr_rrule(NULL, arena, F->fn, args, nin, &y, &pb);
        if (st != CR_OK) {
            print_error("%s: rrule failed: %s\n", F->name, cr_ctx_errmsg(fx->ctx));
            fail();
        }
        cr_tangent dy = m == 1 ? cr_tangent_f64(1.0) : cr_tangent_c128(i ? mkc(0, 1) : mkc(1, 0));
        cr_tangent dx[3];
        st = cr_pullback_call(arena, &pb, &dy, dx, nin + 1);
        if (st != CR_OK) {
            print_error("%s: pullback failed: %s\n", F->name, cr_ctx_errmsg(fx->ctx));
            fail();
        }
        assert_int_equal(dx[0].tag, CR_TAN_NONE);
        for (size_t j = 0; j < nin; j++) {
            snprintf(what, sizeof what, "%s(%g%+gi, ...) pullback of %s, argument %zu", F->name,
                     p->x[0], p->x[1], i ? "i" : "1", j + 1);
            if (kinds[j] == CR_KIND_F64) {
                assert_int_equal(dx[j + 1].tag, CR_TAN_F64);
                check_close(dx[j + 1].u.f64, J[i * n + 2 * j], tol, what);
            } else {
                assert_int_equal(dx[j + 1].tag, CR_TAN_C128);
                check_close(dx[j + 1].u.c128, mkc(J[i * n + 2 * j], J[i * n + 2 * j + 1]), tol,
                            what);
            }
        }
    }
    cr_arena_reset(arena);
}

static void check_point(fixture *fx, const cfun *F, const point *p)
{
    static const cr_kind c2[2] = {CR_KIND_C128, CR_KIND_C128};
    check_point_kinds(fx, F, p, c2);
}

static void check_points(fixture *fx, const cfun *F, const point *pts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        check_point(fx, F, &pts[i]);
}

#define NPTS(a) (sizeof(a) / sizeof((a)[0]))

/* Points away from every cut (and from the poles of tan and tanh). */
static const point k_generic[] = {
    {{0.5, 0.3}, {0}, 0},   {{-1.2, 0.7}, {0}, 0}, {{0.3, -1.1}, {0}, 0},
    {{-0.8, -0.4}, {0}, 0}, {{1.7, 1.9}, {0}, 0},
};

/* Cuts on the real axis (|re z| > 1): on the cut with +0 (one-sided from above) and -0
 * (from below), next to it, near the branch points ±1. */
static point real_cut_point(double x, double im)
{
    /* Stay clear of the branch points ±1 (and 0, of clog and csqrt). */
    double d = fmin(fmin(fabs(x - 1), fabs(x + 1)), fabs(x));
    point p = {{x, im}, {0, signbit(im) ? -1 : 1, 0, 0}, fmin(0.25, 0.4 * d)};
    return p;
}

static void check_real_cuts(fixture *fx, const cfun *F, const double *xs, size_t nx)
{
    for (size_t i = 0; i < nx; i++) {
        point p = real_cut_point(xs[i], 0.0);
        check_point(fx, F, &p);
        p = real_cut_point(xs[i], -0.0);
        check_point(fx, F, &p);
        point near = {{xs[i], 1e-3}, {0}, 4e-4};
        check_point(fx, F, &near);
        near.x[1] = -1e-3;
        check_point(fx, F, &near);
    }
}

/* Cuts on the imaginary axis (|im z| > 1): the sign of the zero real part picks the side. */
static void check_imag_cuts(fixture *fx, const cfun *F, const double *ys, size_t ny)
{
    for (size_t i = 0; i < ny; i++) {
        point p = {{0.0, ys[i]}, {1, 0, 0, 0}, 0.25};
        check_point(fx, F, &p);
        p.x[0] = -0.0;
        p.side[0] = -1;
        check_point(fx, F, &p);
        point near = {{1e-3, ys[i]}, {0}, 4e-4};
        check_point(fx, F, &near);
    }
}

/* ---- Holomorphic functions ---------------------------------------------------------------- */

static void test_entire(void **state)
{
    static const point extra[] = {
        {{0.3, 6.0}, {0}, 0}, {{-4.0, -2.5}, {0}, 0}, {{0.0, 0.0}, {0}, 0}};
    const cfun *fs[] = {&F_csin, &F_ccos, &F_csinh, &F_ccosh, &F_cexp};
    for (size_t i = 0; i < NPTS(fs); i++) {
        check_points(*state, fs[i], k_generic, NPTS(k_generic));
        check_points(*state, fs[i], extra, NPTS(extra));
    }
}

static void test_tan_tanh(void **state)
{
    /* Near a pole, and with a large imaginary (real for tanh) part, where 1 + tan² would
     * have cancelled. */
    static const point tan_pts[] = {
        {{1.5, 0.01}, {0}, 0.01}, {{0.4, 4.0}, {0}, 0}, {{-2.0, -3.0}, {0}, 0}};
    static const point tanh_pts[] = {
        {{0.01, 1.5}, {0}, 0.01}, {{4.0, 0.4}, {0}, 0}, {{-3.0, -2.0}, {0}, 0}};
    check_points(*state, &F_ctan, k_generic, NPTS(k_generic));
    check_points(*state, &F_ctan, tan_pts, NPTS(tan_pts));
    check_points(*state, &F_ctanh, k_generic, NPTS(k_generic));
    check_points(*state, &F_ctanh, tanh_pts, NPTS(tanh_pts));
}

static void test_casin_cacos_catanh(void **state)
{
    static const double cut[] = {1.5, 3.0, -1.2, -2.5};
    static const point branch[] = {
        /* Near the branch points ±1, where 1 - z² would cancel. */
        {{1.001, 0.001}, {0}, 4e-4}, {{0.999, -0.001}, {0}, 4e-4}, {{-1.0, 0.002}, {0}, 1e-3},
        {{0.9, 0.0}, {0}, 0.05},     {{-0.99, 0.0}, {0}, 0.005},
    };
    const cfun *fs[] = {&F_casin, &F_cacos, &F_catanh};
    for (size_t i = 0; i < NPTS(fs); i++) {
        check_points(*state, fs[i], k_generic, NPTS(k_generic));
        check_points(*state, fs[i], branch, NPTS(branch));
        check_real_cuts(*state, fs[i], cut, NPTS(cut));
    }
}

static void test_catan_casinh(void **state)
{
    static const double cut[] = {1.5, 3.0, -1.2, -2.5};
    static const point branch[] = {
        {{0.001, 1.001}, {0}, 4e-4},
        {{-0.001, -0.999}, {0}, 4e-4},
        {{0.0, 0.9}, {0}, 0.05},
    };
    const cfun *fs[] = {&F_catan, &F_casinh};
    for (size_t i = 0; i < NPTS(fs); i++) {
        check_points(*state, fs[i], k_generic, NPTS(k_generic));
        check_points(*state, fs[i], branch, NPTS(branch));
        check_imag_cuts(*state, fs[i], cut, NPTS(cut));
    }
}

static void test_cacosh(void **state)
{
    static const double cut[] = {0.5, -0.5, -2.0, -1.0 + 1e-3};
    static const point branch[] = {{{1.001, 0.001}, {0}, 4e-4}, {{1.5, 0.0}, {0}, 0.1}};
    check_points(*state, &F_cacosh, k_generic, NPTS(k_generic));
    check_points(*state, &F_cacosh, branch, NPTS(branch));
    check_real_cuts(*state, &F_cacosh, cut, NPTS(cut));
}

static void test_clog_csqrt_cinv(void **state)
{
    static const double cut[] = {-2.0, -0.5, -1e-3};
    static const point small[] = {
        {{1e-3, 1e-3}, {0}, 2e-4}, {{-3e-3, -1e-3}, {0}, 2e-4}, {{1e5, -3e5}, {0}, 1e3}};
    const cfun *fs[] = {&F_clog, &F_csqrt};
    for (size_t i = 0; i < NPTS(fs); i++) {
        check_points(*state, fs[i], k_generic, NPTS(k_generic));
        check_points(*state, fs[i], small, NPTS(small));
        check_real_cuts(*state, fs[i], cut, NPTS(cut));
    }
    check_points(*state, &F_cinv, k_generic, NPTS(k_generic));
    check_points(*state, &F_cinv, small, NPTS(small));
}

static void test_cpow(void **state)
{
    static const point pts[] = {
        {{0.5, 0.3, 1.5, -0.5}, {0}, 0},
        {{-1.2, 0.7, 0.25, 2.0}, {0}, 0},
        {{2.0, -1.0, 3.0, 0.0}, {0}, 0},
        {{1.5, 0.0, -0.5, 0.0}, {0}, 0},
        /* On the cut of z, from both sides (w is free). */
        {{-2.0, 0.0, 0.5, 0.2}, {0, 1, 0, 0}, 0.25},
        {{-2.0, 0.0, 0.5, 0.2}, {0, 1, 0, 0}, 0.25}, /* replaced by -0 below */
    };
    for (size_t i = 0; i + 1 < NPTS(pts); i++)
        check_point(*state, &F_cpow, &pts[i]);
    point below = pts[NPTS(pts) - 1];
    below.x[1] = -0.0;
    below.side[1] = -1;
    check_point(*state, &F_cpow, &below);
}

/* C semantics for real arguments: csqrt(-4.0) = 2i, and the cotangent is projected. */
static void test_real_arguments(void **state)
{
    static const cr_kind r1[2] = {CR_KIND_F64, CR_KIND_F64};
    static const cr_kind rc[2] = {CR_KIND_F64, CR_KIND_C128};
    point p = {{-4.0, 0.0}, {0, 1, 0, 0}, 0.25};
    check_point_kinds(*state, &F_csqrt, &p, r1);
    check_point_kinds(*state, &F_clog, &p, r1);
    check_point_kinds(*state, &F_casin, &p, r1);
    check_point_kinds(*state, &F_cacosh, &p, r1);
    point q = {{0.7, 0.0}, {0}, 0.1};
    check_point_kinds(*state, &F_casin, &q, r1);
    check_point_kinds(*state, &F_csin, &q, r1);
    check_point_kinds(*state, &F_cabs, &q, r1);
    check_point_kinds(*state, &F_carg, &q, r1);
    check_point_kinds(*state, &F_conj, &q, r1);
    check_point_kinds(*state, &F_cimag, &q, r1);
    point w = {{1.5, 0.0, 0.5, 0.25}, {0}, 0.25};
    check_point_kinds(*state, &F_cpow, &w, rc);
    point m = {{1.5, 0.0, 0.5, 0.25}, {0}, 0.25};
    check_point_kinds(*state, &F_mul, &m, rc);
    check_point_kinds(*state, &F_div, &m, rc);
    check_point_kinds(*state, &F_add, &m, rc);

    /* The value itself: csqrt(-4.0) is 2i, not NaN. */
    fixture *fx = *state;
    cr_value x = cr_value_f64(-4.0), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_csqrt, &x, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_C128);
    check_close(y.u.c128, mkc(0.0, 2.0), 0.0, "csqrt(-4.0)");

    /* float and integer arguments: f32 and NoTangent cotangents. */
    cr_value args[2] = {cr_value_f32(0.5f), cr_value_i64(2)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cpow, args, 2, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_c128(1.0), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F32);
    assert_true(fabs((double)dx[1].u.f32 - 1.0) < 1e-6); /* d/dz z² at 0.5 */
    assert_int_equal(dx[2].tag, CR_TAN_NONE);
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_f32(1.0f), cr_tangent_f64(1.0)};
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_cpow, args, 2, &y, &dy), CR_OK);
    assert_int_equal(dy.tag, CR_TAN_C128);
    check_close(dy.u.c128, 1.0, 1e-15, "frule cpow(0.5f, 2) with an integer tangent ignored");
    cr_arena_reset(fx->arena);
}

/* ---- Non-holomorphic functions ------------------------------------------------------------ */

static void test_non_holomorphic(void **state)
{
    static const point extra[] = {{{3.0, 0.0}, {0}, 0},
                                  {{0.0, -0.5}, {0}, 0},
                                  {{1e3, -2e3}, {0}, 1},
                                  {{1e-3, 3e-3}, {0}, 1e-4}};
    const cfun *fs[] = {&F_cabs, &F_carg, &F_conj, &F_creal, &F_cimag, &F_cproj, &F_abs2};
    for (size_t i = 0; i < NPTS(fs); i++) {
        check_points(*state, fs[i], k_generic, NPTS(k_generic));
        check_points(*state, fs[i], extra, NPTS(extra));
    }
    /* carg jumps by 2π across the negative real axis; its derivative does not: one-sided
     * differences from either side agree with the rule. */
    point p = real_cut_point(-2.0, 0.0);
    check_point(*state, &F_carg, &p);
    p = real_cut_point(-2.0, -0.0);
    check_point(*state, &F_carg, &p);
}

/* cabs and carg at 0: zero derivatives (ChainRules' convention); cproj at infinity: zero. */
static void test_conventions_at_singular_points(void **state)
{
    fixture *fx = *state;
    const cr_value *fns[] = {&cr_fn_cabs, &cr_fn_carg};
    for (size_t i = 0; i < 2; i++) {
        cr_value z = cr_value_c128(0.0), y;
        cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_c128(mkc(1, 1))}, dy;
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, fns[i], &z, 1, &y, &dy), CR_OK);
        assert_int_equal(dy.tag, CR_TAN_F64);
        assert_true(dy.u.f64 == 0.0);
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, fns[i], &z, 1, &y, &pb), CR_OK);
        cr_tangent g = cr_tangent_f64(1.0), dx[2];
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 2), CR_OK);
        assert_int_equal(dx[1].tag, CR_TAN_C128);
        assert_true(dx[1].u.c128 == 0.0);
    }
    cr_value z = cr_value_c128(mkc(HUGE_VAL, -3.0)), y;
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_c128(1.0)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_cproj, &z, 1, &y, &dy), CR_OK);
    assert_true(isinf(creal(y.u.c128)) && cimag(y.u.c128) == 0 && signbit(cimag(y.u.c128)));
    assert_int_equal(dy.tag, CR_TAN_ZERO);
    /* Far from 1, where |z|² overflows or underflows: J of cabs at 1e200(1 + i) is
     * [1, 1]/sqrt(2); J of carg at 1e-200(1 - 3i) is [-y, x]/r² = [3e199, 1e199]. */
    z = cr_value_c128(mkc(1e200, 1e200));
    cr_pullback pb0;
    cr_tangent g0 = cr_tangent_f64(1.0), dx0[2];
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cabs, &z, 1, &y, &pb0), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb0, &g0, dx0, 2), CR_OK);
    check_close(dx0[1].u.c128, mkc(0.70710678118654752440, 0.70710678118654752440), 1e-15,
                "cabs pullback at 1e200(1+i)");
    z = cr_value_c128(mkc(1e-200, -3e-200));
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_carg, &z, 1, &y, &pb0), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb0, &g0, dx0, 2), CR_OK);
    check_close(dx0[1].u.c128, mkc(3e199, 1e199), 1e185, "carg pullback at 1e-200(1-3i)");
    dargs[1] = cr_tangent_c128(mkc(0.0, 1.0));
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_carg, &z, 1, &y, &dy), CR_OK);
    check_close(dy.u.f64, 1e199, 1e184, "carg frule at 1e-200(1-3i), dz = i");
    /* A complex cotangent of a real output contributes its real part only. */
    z = cr_value_c128(mkc(3.0, 4.0));
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cabs, &z, 1, &y, &pb), CR_OK);
    cr_tangent g = cr_tangent_c128(mkc(2.0, 7.0)), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 2), CR_OK);
    check_close(dx[1].u.c128, mkc(1.2, 1.6), 1e-15, "cabs pullback of 2+7i");
    cr_arena_reset(fx->arena);
}

/* ---- Complex arithmetic (the rows of rules_math.h with complex arguments) ---------------- */

static void test_arithmetic(void **state)
{
    static const point pts[] = {
        {{0.5, 0.3, -1.2, 0.7}, {0}, 0},
        {{2.0, -3.0, 0.25, 0.5}, {0}, 0},
        {{-1.0, 1e-8, 3.0, -2.0}, {0}, 0},
    };
    const cfun *fs[] = {&F_add, &F_sub, &F_mul, &F_div};
    for (size_t i = 0; i < NPTS(fs); i++)
        check_points(*state, fs[i], pts, NPTS(pts));
    check_points(*state, &F_neg, k_generic, NPTS(k_generic));
}

/* ---- The worked example of docs/rules-complex-special.md ---------------------------------- */

static void test_worked_example(void **state)
{
    fixture *fx = *state;
    cr_complex z0 = mkc(1.0, 2.0), e = cexp(z0);
    cr_value z = cr_value_c128(z0), y;
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_c128(1.0)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_cexp, &z, 1, &y, &dy), CR_OK);
    check_close(dy.u.c128, e, 0.0, "frule exp, dz = 1");
    dargs[1] = cr_tangent_c128(mkc(0.0, 1.0));
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_cexp, &z, 1, &y, &dy), CR_OK);
    check_close(dy.u.c128, mkc(0, 1) * e, 1e-15 * cabs(e), "frule exp, dz = i");
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_cexp, &z, 1, &y, &pb), CR_OK);
    assert_string_equal(pb.name, "cexp_pullback");
    cr_tangent g = cr_tangent_c128(1.0), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &g, dx, 2), CR_OK);
    check_close(dx[1].u.c128, conj(e), 0.0, "pullback exp, dy = 1");
    /* A zero tangent stays a zero, without evaluation of the partials' products. */
    dargs[1] = cr_tangent_zero();
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_cexp, &z, 1, &y, &dy), CR_OK);
    assert_int_equal(dy.tag, CR_TAN_ZERO);
    cr_arena_reset(fx->arena);
}

/* ---- Registration ------------------------------------------------------------------------- */

static void test_registered(void **state)
{
    (void)state;
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    static const char *names[] = {"csin",  "ccos",  "ctan",  "casin",  "cacos",  "catan",
                                  "csinh", "ccosh", "ctanh", "casinh", "cacosh", "catanh",
                                  "cexp",  "clog",  "csqrt", "cpow",   "cinv",   "cabs",
                                  "carg",  "conj",  "creal", "cimag",  "cproj",  "abs2"};
    const cr_registry *reg = cr_registry_builtin();
    for (size_t i = 0; i < NPTS(names); i++) {
        const cr_function *fn = cr_registry_find(reg, names[i]);
        if (fn == NULL) {
            print_error("%s is not registered\n", names[i]);
            fail();
        }
    }
    /* Names of pullbacks. */
    fixture *fx = *state;
    cr_value z = cr_value_c128(mkc(0.5, 0.5)), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_carg, &z, 1, &y, &pb), CR_OK);
    (void)pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_casin, &z, 1, &y, &pb), CR_OK);
    cr_arena_reset(fx->arena);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_entire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tan_tanh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_casin_cacos_catanh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_catan_casinh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cacosh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clog_csqrt_cinv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_holomorphic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conventions_at_singular_points, setup, teardown),
        cmocka_unit_test_setup_teardown(test_arithmetic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_worked_example, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registered, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
