/*
 * Tests of the rule interface: function objects (cr_function_call), frule / rrule through
 * the registry for the built-in rows, CR_NOTHING, named pullbacks with one cotangent per
 * argument plus self, multi-output rows (tuples, structural and thunked cotangents),
 * integer and f32 arguments, the complex convention, a user functor with a structural
 * ∂self, and a user scalar row.
 *
 * Every derivative is checked against central finite differences of the primal computed
 * with the C library (never against the partials the rules use).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <tgmath.h> /* before scalar_rule.h: the row bodies below are type-generic */

#include <chainrules.h>

#include "test_util.h"

/* ---- Fixture and helpers ---------------------------------------------------------------- */

#define FD_H    1e-6
#define FD_RTOL 1e-7

/* |a - b| <= rtol * max(1, |b|) */
static void assert_cclose_(cr_complex a, cr_complex b, double rtol, const char *what,
                           const char *file, int line)
{
    if (!(cabs(a - b) <= rtol * fmax(1.0, cabs(b)))) {
        print_error("%s: %.17g%+.17gi != %.17g%+.17gi (rtol %g)\n", what, creal(a), cimag(a),
                    creal(b), cimag(b), rtol);
        _fail(file, line);
    }
}
#define assert_cclose(a, b, rtol) assert_cclose_((a), (b), (rtol), #a " ~ " #b, __FILE__, __LINE__)

/* Central difference of a real function. */
static double fd1(double (*f)(double), double x)
{
    return (f(x + FD_H) - f(x - FD_H)) / (2 * FD_H);
}

/* The real 2x2 Jacobian of a complex function viewed as R^2 -> R^2:
 * J[i][0] = ∂(re, im)_i / ∂re z, J[i][1] = ∂(re, im)_i / ∂im z. */
static void fd_jacobian(cr_complex (*f)(cr_complex), cr_complex z, double J[2][2])
{
    cr_complex da = (f(z + FD_H) - f(z - FD_H)) / (2 * FD_H);
    cr_complex db = (f(z + CMPLX(0.0, FD_H)) - f(z - CMPLX(0.0, FD_H))) / (2 * FD_H);
    J[0][0] = creal(da);
    J[1][0] = cimag(da);
    J[0][1] = creal(db);
    J[1][1] = cimag(db);
}

/* J · [re v, im v] as a complex number. */
static cr_complex jvp(double J[2][2], cr_complex v)
{
    return CMPLX(J[0][0] * creal(v) + J[0][1] * cimag(v), J[1][0] * creal(v) + J[1][1] * cimag(v));
}

/* Jᵀ · [re v, im v] as a complex number. */
static cr_complex vjp(double J[2][2], cr_complex v)
{
    return CMPLX(J[0][0] * creal(v) + J[1][0] * cimag(v), J[0][1] * creal(v) + J[1][1] * cimag(v));
}

/* The real number in a scalar tangent (fails the test on anything else). */
static double tan_f64(cr_tangent t)
{
    assert_int_equal(t.tag, CR_TAN_F64);
    return t.u.f64;
}

/* Primals for finite differences (the C library, not the rule layer). */
static double p_neg(double x)
{
    return -x;
}
static cr_complex p_cexp(cr_complex z)
{
    return cexp(z);
}
static cr_complex p_csin(cr_complex z)
{
    return csin(z);
}
static cr_complex p_clog(cr_complex z)
{
    return clog(z);
}

static void clear(fixture *fx)
{
    cr_ctx_clear_error(fx->ctx);
}

/* ---- Function objects ------------------------------------------------------------------- */

static cr_status count_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)f;
    (void)args;
    *out = cr_value_i64((int64_t)nargs);
    return CR_OK;
}

static const cr_function variadic_fn = {.name = "count", .arity = -1, .primal = count_primal};
static const cr_function noprimal_fn = {.name = "noprimal", .arity = 1, .primal = NULL};

static void test_function_call(void **state)
{
    fixture *fx = *state;
    cr_value x = cr_value_f64(0.7), y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sin, &x, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    assert_true(y.u.f64 == sin(0.7));

    cr_value xy[2] = {cr_value_f64(3.0), cr_value_f64(-4.5)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_mul, xy, 2, &y), CR_OK);
    assert_true(y.u.f64 == -13.5);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_div, xy, 2, &y), CR_OK);
    assert_true(y.u.f64 == 3.0 / -4.5);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sub, xy, 2, &y), CR_OK);
    assert_true(y.u.f64 == 7.5);

    /* f32 stays f32; complex calls the complex function. */
    cr_value xs = cr_value_f32(0.25f);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_exp, &xs, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    assert_true(y.u.f32 == expf(0.25f));
    cr_value z = cr_value_c128(CMPLX(0.5, -1.5));
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sin, &z, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_C128);
    assert_cclose(y.u.c128, csin(CMPLX(0.5, -1.5)), 1e-15);

    /* A multi-output row gives a tuple value. */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sincos, &x, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    assert_int_equal(y.u.obj.type->nfields, 2);
    const double *sc = y.u.obj.ptr;
    assert_true(sc[0] == sin(0.7));
    assert_true(sc[1] == cos(0.7));

    /* Arity errors name the function. */
    clear(fx);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sin, xy, 2, &y), CR_EINVAL);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "sin");
    assert_contains(cr_ctx_errmsg(fx->ctx), "takes 1");
    clear(fx);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_add, &x, 1, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "+");

    /* Not a function value. */
    assert_int_equal(cr_function_call(fx->arena, &x, &x, 1, &y), CR_EINVAL);
    /* A row rejects arguments that are not numbers. */
    double buf[2] = {1, 2};
    cr_array arr = cr_array_vector(buf, 2);
    cr_value av = cr_value_array(&arr);
    clear(fx);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sin, &av, 1, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "sin");

    /* A variadic function takes any number of arguments. */
    cr_value vf = cr_value_function(&variadic_fn, NULL);
    assert_int_equal(cr_function_call(fx->arena, &vf, NULL, 0, &y), CR_OK);
    assert_int_equal(y.u.i64, 0);
    assert_int_equal(cr_function_call(fx->arena, &vf, xy, 2, &y), CR_OK);
    assert_int_equal(y.u.i64, 2);

    /* A function without a primal. */
    cr_value nf = cr_value_function(&noprimal_fn, NULL);
    clear(fx);
    assert_int_equal(cr_function_call(fx->arena, &nf, &x, 1, &y), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "noprimal");
}

/* ---- Built-in rules through the registry ------------------------------------------------ */

typedef struct unary_case {
    const cr_value *f;
    double (*primal)(double);
    const char *pullback;
    double x;
} unary_case;

static void test_builtin_unary(void **state)
{
    fixture *fx = *state;
    const unary_case cases[] = {
        {&cr_fn_sin, sin, "sin_pullback", 0.3},    {&cr_fn_sin, sin, "sin_pullback", -2.1},
        {&cr_fn_cos, cos, "cos_pullback", 1.2},    {&cr_fn_exp, exp, "exp_pullback", -0.4},
        {&cr_fn_exp, exp, "exp_pullback", 2.0},    {&cr_fn_log, log, "log_pullback", 0.35},
        {&cr_fn_log, log, "log_pullback", 3.0},    {&cr_fn_sqrt, sqrt, "sqrt_pullback", 0.8},
        {&cr_fn_asin, asin, "asin_pullback", 0.6}, {&cr_fn_asin, asin, "asin_pullback", -0.9},
        {&cr_fn_neg, p_neg, "neg_pullback", 1.5},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const unary_case *c = &cases[k];
        double want = fd1(c->primal, c->x);
        cr_value x = cr_value_f64(c->x), y;
        /* frule: Ω and ΔΩ = f'(x) ẋ */
        cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(0.75)}, dy;
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, c->f, &x, 1, &y, &dy), CR_OK);
        assert_int_equal(y.kind, CR_KIND_F64);
        assert_close(y.u.f64, c->primal(c->x), 1e-15);
        assert_close(tan_f64(dy), 0.75 * want, FD_RTOL);

        /* rrule: Ω and a named pullback writing (∂self, ∂x) */
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, c->f, &x, 1, &y, &pb), CR_OK);
        assert_close(y.u.f64, c->primal(c->x), 1e-15);
        assert_non_null(pb.name);
        assert_string_equal(pb.name, c->pullback);
        assert_int_equal(pb.nx, 2);
        cr_tangent ybar = cr_tangent_f64(-1.25), dx[2];
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
        assert_int_equal(dx[0].tag, CR_TAN_NONE);
        assert_close(tan_f64(dx[1]), -1.25 * want, FD_RTOL);
    }
}

typedef struct binary_case {
    const cr_value *f;
    const char *pullback;
    double x, y;
} binary_case;

static double binary_primal(const cr_value *f, double x, double y)
{
    if (f == &cr_fn_add)
        return x + y;
    if (f == &cr_fn_sub)
        return x - y;
    if (f == &cr_fn_mul)
        return x * y;
    return x / y;
}

static void test_builtin_binary(void **state)
{
    fixture *fx = *state;
    const binary_case cases[] = {
        {&cr_fn_add, "add_pullback", 0.5, -1.5}, {&cr_fn_sub, "sub_pullback", 2.0, 0.25},
        {&cr_fn_mul, "mul_pullback", -1.5, 3.0}, {&cr_fn_div, "div_pullback", 1.2, -0.7},
        {&cr_fn_div, "div_pullback", -3.0, 2.5},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const binary_case *c = &cases[k];
        double gx =
            (binary_primal(c->f, c->x + FD_H, c->y) - binary_primal(c->f, c->x - FD_H, c->y)) /
            (2 * FD_H);
        double gy =
            (binary_primal(c->f, c->x, c->y + FD_H) - binary_primal(c->f, c->x, c->y - FD_H)) /
            (2 * FD_H);
        cr_value args[2] = {cr_value_f64(c->x), cr_value_f64(c->y)}, y;

        cr_tangent dargs[3] = {cr_tangent_zero(), cr_tangent_f64(0.3), cr_tangent_f64(-0.7)};
        cr_tangent dy;
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, c->f, args, 2, &y, &dy), CR_OK);
        assert_close(y.u.f64, binary_primal(c->f, c->x, c->y), 1e-15);
        assert_close(tan_f64(dy), 0.3 * gx - 0.7 * gy, FD_RTOL);

        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, c->f, args, 2, &y, &pb), CR_OK);
        assert_string_equal(pb.name, c->pullback);
        assert_int_equal(pb.nx, 3); /* one per argument plus self */
        cr_tangent ybar = cr_tangent_f64(2.0), dx[3];
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 3), CR_OK);
        assert_int_equal(dx[0].tag, CR_TAN_NONE);
        assert_close(tan_f64(dx[1]), 2.0 * gx, FD_RTOL);
        assert_close(tan_f64(dx[2]), 2.0 * gy, FD_RTOL);

        /* A wrong number of cotangents is refused, naming the pullback. */
        clear(fx);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_EINVAL);
        assert_contains(cr_ctx_errmsg(fx->ctx), c->pullback);
    }
}

/* The documentation's example: foo(x) = asin(0.2 + sin(x)), chained by hand. */
static double foo(double x)
{
    return asin(0.2 + sin(x));
}

static void test_chained_rrules(void **state)
{
    fixture *fx = *state;
    cr_value x = cr_value_f64(3.0), a, b, c, args2[2];
    cr_pullback pa, pb, pc;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sin, &x, 1, &a, &pa), CR_OK);
    args2[0] = cr_value_f64(0.2);
    args2[1] = a;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_add, args2, 2, &b, &pb), CR_OK);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_asin, &b, 1, &c, &pc), CR_OK);
    assert_close(c.u.f64, foo(3.0), 1e-15);
    cr_tangent dc = cr_tangent_f64(1.0), d1[2], d2[3], d3[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pc, &dc, d1, 2), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &d1[1], d2, 3), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pa, &d2[2], d3, 2), CR_OK);
    assert_close(tan_f64(d3[1]), fd1(foo, 3.0), FD_RTOL);
}

/* ---- No rule: CR_NOTHING --------------------------------------------------------------- */

static cr_status square_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)arena;
    (void)f;
    (void)nargs;
    *out = cr_value_f64(args[0].u.f64 * args[0].u.f64);
    return CR_OK;
}
static const cr_function norule_fn = {.name = "norule", .arity = 1, .primal = square_primal};

static void test_nothing(void **state)
{
    fixture *fx = *state;
    cr_value f = cr_value_function(&norule_fn, NULL), x = cr_value_f64(2.0), y;
    y = cr_value_f64(-99.0);
    cr_pullback pb = {0};
    clear(fx);
    cr_status st = cr_rrule(NULL, fx->arena, &f, &x, 1, &y, &pb);
    assert_int_equal(st, CR_NOTHING);
    assert_true(st != CR_OK && st < 0); /* not an error */
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_OK);
    assert_string_equal(cr_ctx_errmsg(fx->ctx), "");
    assert_true(y.u.f64 == -99.0); /* nothing written */
    assert_null(pb.fn);

    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(1.0)}, dy = cr_tangent_none();
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &f, &x, 1, &y, &dy), CR_NOTHING);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_OK);
    assert_string_equal(cr_ctx_errmsg(fx->ctx), "");
    assert_int_equal(dy.tag, CR_TAN_NONE);

    /* A built-in with arguments no signature matches (an array for sin). */
    double buf[3] = {1, 2, 3};
    cr_array arr = cr_array_vector(buf, 3);
    cr_value av = cr_value_array(&arr);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sin, &av, 1, &y, &pb), CR_NOTHING);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_OK);
    /* The wrong number of arguments matches nothing either. */
    cr_value two[2] = {x, x};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sin, two, 2, &y, &pb), CR_NOTHING);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_OK);

    /* Errors are different: a non-function is CR_EINVAL with a message. */
    assert_int_equal(cr_rrule(NULL, fx->arena, &x, &x, 1, &y, &pb), CR_EINVAL);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_EINVAL);
    assert_true(strlen(cr_ctx_errmsg(fx->ctx)) > 0);
}

/* ---- Multi-output: sincos ---------------------------------------------------------------- */

typedef struct tuple_thunk_env {
    const cr_type *type;
    double a, b;
    int calls;
} tuple_thunk_env;

static cr_status tuple_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    tuple_thunk_env *e = env;
    e->calls++;
    cr_tangent v[2] = {cr_tangent_f64(e->a), cr_tangent_f64(e->b)};
    return cr_tangent_struct(arena, e->type, NULL, v, 2, out);
}

static void test_sincos(void **state)
{
    fixture *fx = *state;
    const double x0 = 0.9;
    const double dsin = fd1(sin, x0), dcos = fd1(cos, x0);
    cr_value x = cr_value_f64(x0), y;

    /* frule: the output is a tuple value, its tangent a structural tangent. */
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(0.7)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_sincos, &x, 1, &y, &dy), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    const cr_type *tt = y.u.obj.type;
    assert_int_equal(tt->nfields, 2);
    assert_true(((const double *)y.u.obj.ptr)[0] == sin(x0));
    assert_true(((const double *)y.u.obj.ptr)[1] == cos(x0));
    assert_int_equal(dy.tag, CR_TAN_STRUCT);
    assert_ptr_equal(dy.u.s.type, tt);
    assert_close(tan_f64(cr_tangent_field(dy, 0)), 0.7 * dsin, FD_RTOL);
    assert_close(tan_f64(cr_tangent_field(dy, 1)), 0.7 * dcos, FD_RTOL);

    /* rrule with a structural cotangent (both fields). */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sincos, &x, 1, &y, &pb), CR_OK);
    assert_string_equal(pb.name, "sincos_pullback");
    assert_int_equal(pb.nx, 2);
    cr_tangent v[2] = {cr_tangent_f64(1.5), cr_tangent_f64(-0.5)}, ybar, dx[2];
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, v, 2, &ybar), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NONE);
    assert_close(tan_f64(dx[1]), 1.5 * dsin - 0.5 * dcos, FD_RTOL);

    /* A structural cotangent with an absent field (the cos output unused). */
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, v, 1, &ybar), CR_OK);
    assert_false(cr_tangent_field_present(ybar, 1));
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_close(tan_f64(dx[1]), 1.5 * dsin, FD_RTOL);
    /* ... and the sin output unused: an ABSENT entry among positional values. */
    cr_tangent v2[2] = {{.tag = CR_TAN_ABSENT}, cr_tangent_f64(2.0)};
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, v2, 2, &ybar), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_close(tan_f64(dx[1]), 2.0 * dcos, FD_RTOL);

    /* A thunked cotangent: evaluated once. */
    tuple_thunk_env te = {y.u.obj.type, -1.0, 3.0, 0};
    cr_tangent th;
    assert_int_equal(CR_THUNK(fx->arena, tuple_thunk, &te, &th), CR_OK);
    assert_int_equal(te.calls, 0);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &th, dx, 2), CR_OK);
    assert_int_equal(te.calls, 1);
    assert_close(tan_f64(dx[1]), -1.0 * dsin + 3.0 * dcos, FD_RTOL);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &th, dx, 2), CR_OK);
    assert_int_equal(te.calls, 1);

    /* ZeroTangent and NoTangent: every cotangent is ZeroTangent. */
    cr_tangent zeros[2] = {cr_tangent_zero(), cr_tangent_none()};
    for (size_t k = 0; k < 2; k++) {
        dx[0] = cr_tangent_f64(7.0);
        dx[1] = cr_tangent_f64(7.0);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &zeros[k], dx, 2), CR_OK);
        assert_int_equal(dx[0].tag, CR_TAN_ZERO);
        assert_int_equal(dx[1].tag, CR_TAN_ZERO);
    }

    /* A plain scalar is not a cotangent of a tuple. */
    cr_tangent wrong = cr_tangent_f64(1.0);
    clear(fx);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &wrong, dx, 2), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "sincos_pullback");
}

/* A thunked scalar cotangent for a single-output rule. */
typedef struct scalar_thunk_env {
    double v;
    int calls;
} scalar_thunk_env;

static cr_status scalar_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    scalar_thunk_env *e = env;
    e->calls++;
    *out = cr_tangent_f64(e->v);
    return CR_OK;
}

static void test_thunk_cotangent_scalar(void **state)
{
    fixture *fx = *state;
    cr_value x = cr_value_f64(1.1), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_exp, &x, 1, &y, &pb), CR_OK);
    scalar_thunk_env e = {0.5, 0};
    cr_tangent th, dx[2];
    assert_int_equal(CR_THUNK(fx->arena, scalar_thunk, &e, &th), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &th, dx, 2), CR_OK);
    assert_int_equal(e.calls, 1);
    assert_close(tan_f64(dx[1]), 0.5 * fd1(exp, 1.1), FD_RTOL);

    /* Thunked tangents in an frule too. */
    scalar_thunk_env e2 = {-2.0, 0};
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_zero()}, dy;
    assert_int_equal(CR_THUNK(fx->arena, scalar_thunk, &e2, &dargs[1]), CR_OK);
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_exp, &x, 1, &y, &dy), CR_OK);
    assert_int_equal(e2.calls, 1);
    assert_close(tan_f64(dy), -2.0 * fd1(exp, 1.1), FD_RTOL);
}

/* ---- Integer, bool and f32 arguments ----------------------------------------------------- */

static void test_int_args(void **state)
{
    fixture *fx = *state;
    cr_value args[2] = {cr_value_f64(2.5), cr_value_i64(3)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_add, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    assert_true(y.u.f64 == 5.5);
    cr_tangent ybar = cr_tangent_f64(1.5), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 3), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NONE);
    assert_close(tan_f64(dx[1]), 1.5, 1e-15); /* ∂(x + 3)/∂x = 1, by hand */
    assert_int_equal(dx[2].tag, CR_TAN_NONE);

    /* int * f64: the integer gets NoTangent, the real argument its FD partial (= 4). */
    cr_value m[2] = {cr_value_i64(4), cr_value_f64(-1.25)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_mul, m, 2, &y, &pb), CR_OK);
    assert_true(y.u.f64 == -5.0);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    double g = ((4.0 * (-1.25 + FD_H)) - (4.0 * (-1.25 - FD_H))) / (2 * FD_H);
    assert_close(tan_f64(dx[2]), 1.5 * g, FD_RTOL);

    /* bool arguments too. */
    cr_value bm[2] = {cr_value_bool(true), cr_value_f64(2.0)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_mul, bm, 2, &y, &pb), CR_OK);
    assert_true(y.u.f64 == 2.0);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);

    /* frule: an integer's (NoTangent) tangent does not contribute. */
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_f64(0.5), cr_tangent_none()}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_add, args, 2, &y, &dy), CR_OK);
    assert_close(tan_f64(dy), 0.5, 1e-15);

    /* A unary rule of an integer: the cotangent of the argument is NoTangent. */
    cr_value ix = cr_value_i64(2);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_exp, &ix, 1, &y, &pb), CR_OK);
    assert_close(y.u.f64, exp(2.0), 1e-15);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
}

static double sinf_as_double(double x)
{
    return (double)sinf((float)x);
}

static void test_f32_args(void **state)
{
    fixture *fx = *state;
    const float x0 = 0.6f;
    const double want = fd1(sin, (double)x0); /* FD in double of the same function */
    cr_value x = cr_value_f32(x0), y;
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f32(2.0f)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_sin, &x, 1, &y, &dy), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    assert_close((double)y.u.f32, sinf_as_double((double)x0), 1e-7);
    assert_int_equal(dy.tag, CR_TAN_F32);
    assert_close((double)dy.u.f32, 2.0 * want, 1e-6);

    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sin, &x, 1, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    cr_tangent dx[2], ybar = cr_tangent_f32(-0.5f);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F32);
    assert_close((double)dx[1].u.f32, -0.5 * want, 1e-6);
    /* An f64 cotangent for an f32 argument is projected to f32. */
    ybar = cr_tangent_f64(-0.5);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F32);
    assert_close((double)dx[1].u.f32, -0.5 * want, 1e-6);

    /* f32 * f64 computes in f64; each cotangent keeps its argument's precision. */
    cr_value mixed[2] = {cr_value_f32(1.5f), cr_value_f64(-2.0)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_mul, mixed, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    ybar = cr_tangent_f64(1.0);
    cr_tangent dx3[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx3, 3), CR_OK);
    assert_int_equal(dx3[1].tag, CR_TAN_F32);
    assert_int_equal(dx3[2].tag, CR_TAN_F64);
    assert_close((double)dx3[1].u.f32, -2.0, 1e-7); /* ∂(x y)/∂x = y, by hand */
    assert_close(dx3[2].u.f64, 1.5, 1e-15);

    /* f32 with an integer stays f32 (Julia: Float32 * Int is Float32). */
    cr_value fi[2] = {cr_value_f32(1.5f), cr_value_i64(3)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_mul, fi, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    assert_true(y.u.f32 == 4.5f);
    ybar = cr_tangent_f32(1.0f);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx3, 3), CR_OK);
    assert_int_equal(dx3[1].tag, CR_TAN_F32);
    assert_true(dx3[1].u.f32 == 3.0f);
    assert_int_equal(dx3[2].tag, CR_TAN_NONE);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_mul, fi, 2, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    /* Integers alone compute in f64. */
    cr_value ii[2] = {cr_value_i64(2), cr_value_i64(3)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_mul, ii, 2, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    assert_true(y.u.f64 == 6.0);
}

/* ---- The complex convention ------------------------------------------------------------ */

typedef struct complex_case {
    const cr_value *f;
    cr_complex (*primal)(cr_complex);
    cr_complex z;
} complex_case;

static void test_complex_convention(void **state)
{
    fixture *fx = *state;
    const complex_case cases[] = {
        {&cr_fn_exp, p_cexp, CMPLX(0.3, 0.8)},
        {&cr_fn_exp, p_cexp, CMPLX(-1.1, -2.0)},
        {&cr_fn_sin, p_csin, CMPLX(0.7, -0.4)},
        {&cr_fn_log, p_clog, CMPLX(-0.5, 1.5)},
    };
    const cr_complex zdot = CMPLX(0.6, -0.4), ybar = CMPLX(-0.2, 0.9);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const complex_case *c = &cases[k];
        double J[2][2];
        fd_jacobian(c->primal, c->z, J);
        /* The Jacobian is not symmetric here, so conj(f') and f' differ. */
        assert_true(fabs(J[0][1] - J[1][0]) > 0.1);

        cr_value z = cr_value_c128(c->z), y;
        cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_c128(zdot)}, dy;
        assert_int_equal(cr_frule(NULL, fx->arena, dargs, c->f, &z, 1, &y, &dy), CR_OK);
        assert_int_equal(y.kind, CR_KIND_C128);
        assert_cclose(y.u.c128, c->primal(c->z), 1e-15);
        assert_int_equal(dy.tag, CR_TAN_C128);
        assert_cclose(dy.u.c128, jvp(J, zdot), FD_RTOL);

        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, c->f, &z, 1, &y, &pb), CR_OK);
        cr_tangent yb = cr_tangent_c128(ybar), dx[2];
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &yb, dx, 2), CR_OK);
        assert_int_equal(dx[1].tag, CR_TAN_C128);
        assert_cclose(dx[1].u.c128, vjp(J, ybar), FD_RTOL);
        /* A real cotangent of a complex output. */
        yb = cr_tangent_f64(1.0);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &yb, dx, 2), CR_OK);
        assert_cclose(dx[1].u.c128, vjp(J, 1.0), FD_RTOL);
    }

    /* A real argument viewed as R -> R^2 (re, im of the output): the cotangent of the
     * real input is the real Jᵀ ȳ, i.e. a complex ȳ is projected onto the reals. */
    cr_value x = cr_value_f64(0.4), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sin, &x, 1, &y, &pb), CR_OK);
    cr_tangent yb = cr_tangent_c128(ybar), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &yb, dx, 2), CR_OK);
    assert_close(tan_f64(dx[1]), fd1(sin, 0.4) * creal(ybar), FD_RTOL);
}

/* Complex multiplication w * z: a binary holomorphic function, one Jacobian per argument. */
static cr_complex g_other;
static cr_complex times_other(cr_complex z)
{
    return g_other * z;
}

static void test_complex_binary(void **state)
{
    fixture *fx = *state;
    const cr_complex w = CMPLX(1.5, -0.5), z = CMPLX(-0.3, 2.0);
    const cr_complex ybar = CMPLX(0.25, 1.0);
    double Jw[2][2], Jz[2][2];
    g_other = z;
    fd_jacobian(times_other, w, Jw); /* ∂(w z)/∂w */
    g_other = w;
    fd_jacobian(times_other, z, Jz); /* ∂(w z)/∂z */
    cr_value args[2] = {cr_value_c128(w), cr_value_c128(z)}, y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_mul, args, 2, &y, &pb), CR_OK);
    cr_tangent yb = cr_tangent_c128(ybar), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &yb, dx, 3), CR_OK);
    assert_cclose(dx[1].u.c128, vjp(Jw, ybar), FD_RTOL);
    assert_cclose(dx[2].u.c128, vjp(Jz, ybar), FD_RTOL);

    /* Mixed real and complex: a real argument gets the real part of its Jᵀ ȳ. */
    cr_value mixed[2] = {cr_value_f64(0.5), cr_value_c128(z)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_mul, mixed, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_C128);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &yb, dx, 3), CR_OK);
    g_other = z;
    fd_jacobian(times_other, 0.5, Jw);
    assert_int_equal(dx[1].tag, CR_TAN_F64);
    assert_close(dx[1].u.f64, creal(vjp(Jw, ybar)), FD_RTOL);
    g_other = 0.5;
    fd_jacobian(times_other, z, Jz);
    assert_cclose(dx[2].u.c128, vjp(Jz, ybar), FD_RTOL);
}

/* ---- A user functor: affine(x) = a x + b, with a structural ∂self ------------------------ */

typedef struct affine {
    double a, b;
} affine;

static const cr_field affine_fields[] = {
    {"a", offsetof(affine, a), CR_KIND_F64, NULL},
    {"b", offsetof(affine, b), CR_KIND_F64, NULL},
};
static const cr_type affine_type = {"affine", sizeof(affine), 2, affine_fields};

static cr_status affine_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)nargs;
    const affine *p = f->u.func.self;
    if (args[0].kind != CR_KIND_F64)
        return cr_ctx_error(cr_arena_ctx(arena), CR_EINVAL, "affine: x must be f64");
    *out = cr_value_f64(p->a * args[0].u.f64 + p->b);
    return CR_OK;
}

static const cr_function affine_fn = {
    .name = "affine", .arity = 1, .primal = affine_primal, .self_type = &affine_type};

/* A real number out of a scalar tangent (zeros give 0). */
static cr_status real_of(cr_arena *arena, cr_tangent t, double *out)
{
    *out = 0.0;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    if (cr_tangent_is_zero(t)) {
        *out = 0.0;
        return CR_OK;
    }
    if (t.tag != CR_TAN_F64)
        return cr_ctx_error(cr_arena_ctx(arena), CR_ETANGENT, "expected an f64 tangent, got %s",
                            cr_tag_name((cr_tag)t.tag));
    *out = t.u.f64;
    return CR_OK;
}

static int g_affine_pullback_calls;

typedef struct affine_env {
    double a, x;
} affine_env;

static cr_status affine_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)nx;
    const affine_env *e = env;
    g_affine_pullback_calls++;
    double ybar;
    cr_status st = real_of(arena, *dy, &ybar);
    if (st != CR_OK)
        return st;
    static const char *const names[2] = {"a", "b"};
    const cr_tangent vals[2] = {cr_tangent_f64(e->x * ybar), cr_tangent_f64(ybar)};
    st = cr_tangent_struct(arena, &affine_type, names, vals, 2, &dx[0]);
    if (st != CR_OK)
        return st;
    dx[1] = cr_tangent_f64(e->a * ybar);
    return CR_OK;
}

static cr_status affine_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    affine_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(affine_env));
    if (e == NULL)
        return cr_ctx_errcode(cr_arena_ctx(arena));
    e->a = ((const affine *)f->u.func.self)->a;
    e->x = args[0].u.f64;
    *pb = (cr_pullback){affine_pullback, e, "affine_pullback", nargs + 1};
    return CR_OK;
}

static cr_status affine_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    cr_tangent dself, da_t, db_t;
    st = cr_tangent_unthunk(dargs[0], &dself);
    if (st == CR_OK)
        st = cr_tangent_getfield(dself, "a", &da_t);
    if (st == CR_OK)
        st = cr_tangent_getfield(dself, "b", &db_t);
    double da = 0, db = 0, dxv = 0;
    if (st == CR_OK)
        st = real_of(arena, da_t, &da);
    if (st == CR_OK)
        st = real_of(arena, db_t, &db);
    if (st == CR_OK)
        st = real_of(arena, dargs[1], &dxv);
    if (st != CR_OK)
        return st;
    const affine *p = f->u.func.self;
    *dy = cr_tangent_f64(args[0].u.f64 * da + db + p->a * dxv);
    return CR_OK;
}

static cr_registry *make_user_registry(fixture *fx)
{
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &reg), CR_OK);
    const cr_argspec real1[1] = {CR_ARG_REAL};
    cr_rule_def d = {0};
    d.fn = &affine_fn;
    d.nargs = 1;
    d.args = real1;
    d.frule = affine_frule;
    d.rrule = affine_rrule;
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    return reg;
}

static double affine_eval(double a, double b, double x)
{
    return a * x + b;
}

static void test_functor(void **state)
{
    fixture *fx = *state;
    cr_registry *reg = make_user_registry(fx);
    const cr_config cfg = {.registry = reg};
    affine p = {1.75, -0.5};
    const double x0 = 0.8;
    cr_value f = cr_value_function(&affine_fn, &p), x = cr_value_f64(x0), y;

    /* Partials by central differences of the primal in a, b and x. */
    const double ga =
        (affine_eval(p.a + FD_H, p.b, x0) - affine_eval(p.a - FD_H, p.b, x0)) / (2 * FD_H);
    const double gb =
        (affine_eval(p.a, p.b + FD_H, x0) - affine_eval(p.a, p.b - FD_H, x0)) / (2 * FD_H);
    const double gx =
        (affine_eval(p.a, p.b, x0 + FD_H) - affine_eval(p.a, p.b, x0 - FD_H)) / (2 * FD_H);

    assert_int_equal(cr_function_call(fx->arena, &f, &x, 1, &y), CR_OK);
    assert_close(y.u.f64, 1.75 * 0.8 - 0.5, 1e-15);

    /* Without the user registry there is no rule. */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &f, &x, 1, &y, &pb), CR_NOTHING);

    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &x, 1, &y, &pb), CR_OK);
    assert_string_equal(pb.name, "affine_pullback");
    assert_int_equal(pb.nx, 2);
    cr_tangent ybar = cr_tangent_f64(2.0), dx[2];
    g_affine_pullback_calls = 0;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_int_equal(g_affine_pullback_calls, 1);
    assert_int_equal(dx[0].tag, CR_TAN_STRUCT);
    assert_ptr_equal(dx[0].u.s.type, &affine_type);
    cr_tangent t;
    assert_int_equal(cr_tangent_getfield(dx[0], "a", &t), CR_OK);
    assert_close(tan_f64(t), 2.0 * ga, FD_RTOL);
    assert_int_equal(cr_tangent_getfield(dx[0], "b", &t), CR_OK);
    assert_close(tan_f64(t), 2.0 * gb, FD_RTOL);
    assert_close(tan_f64(dx[1]), 2.0 * gx, FD_RTOL);

    /* ZeroTangent: the pullback is not called, every cotangent is zero. */
    cr_tangent z = cr_tangent_zero();
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &z, dx, 2), CR_OK);
    assert_int_equal(g_affine_pullback_calls, 1);
    assert_int_equal(dx[0].tag, CR_TAN_ZERO);
    assert_int_equal(dx[1].tag, CR_TAN_ZERO);

    /* A thunked cotangent is evaluated once. */
    scalar_thunk_env te = {-3.0, 0};
    cr_tangent th;
    assert_int_equal(CR_THUNK(fx->arena, scalar_thunk, &te, &th), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &th, dx, 2), CR_OK);
    assert_int_equal(te.calls, 1);
    assert_close(tan_f64(dx[1]), -3.0 * gx, FD_RTOL);

    /* frule with a structural Δself (both fields, then only b) and ẋ. */
    static const char *const names[2] = {"a", "b"};
    const cr_tangent dv[2] = {cr_tangent_f64(0.3), cr_tangent_f64(-0.2)};
    cr_tangent dargs[2], dy;
    assert_int_equal(cr_tangent_struct(fx->arena, &affine_type, names, dv, 2, &dargs[0]), CR_OK);
    dargs[1] = cr_tangent_f64(0.5);
    assert_int_equal(cr_frule(&cfg, fx->arena, dargs, &f, &x, 1, &y, &dy), CR_OK);
    assert_close(tan_f64(dy), 0.3 * ga - 0.2 * gb + 0.5 * gx, FD_RTOL);
    assert_int_equal(cr_tangent_struct(fx->arena, &affine_type, names + 1, dv + 1, 1, &dargs[0]),
                     CR_OK);
    assert_int_equal(cr_frule(&cfg, fx->arena, dargs, &f, &x, 1, &y, &dy), CR_OK);
    assert_close(tan_f64(dy), -0.2 * gb + 0.5 * gx, FD_RTOL);
    dargs[0] = cr_tangent_zero();
    assert_int_equal(cr_frule(&cfg, fx->arena, dargs, &f, &x, 1, &y, &dy), CR_OK);
    assert_close(tan_f64(dy), 0.5 * gx, FD_RTOL);

    /* Debug mode accepts a structural ∂self for a functor. */
    cr_ctx_set_debug(fx->ctx, true);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &x, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_STRUCT);
    cr_ctx_set_debug(fx->ctx, false);

    cr_registry_free(reg);
}

/* ---- A user scalar row ------------------------------------------------------------------- */

/* The row is defined with the scalar-rule tool (scalar_rule.h, included by chainrules.h);
 * the partial is the derivative of the holomorphic function: the tool conjugates in the
 * pullback. */
/* x·exp(x) */
CR_SCALAR_EVALS(xexp, 1, 1, Y[0] = x[0] * exp(x[0]), D[0] = (1 + x[0]) * exp(x[0]))
static const cr_scalar_rule xexp_row = CR_SCALAR_ROW(xexp);
static const cr_function xexp_fn = CR_SCALAR_FUNCTION("xexp", xexp_row, 1);

static double p_xexp(double x)
{
    return x * exp(x);
}
static cr_complex p_cxexp(cr_complex z)
{
    return z * cexp(z);
}

static void test_user_scalar_row(void **state)
{
    fixture *fx = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &reg), CR_OK);
    assert_int_equal(cr_scalar_rule_register(reg, &xexp_fn, &xexp_row), CR_OK);
    assert_ptr_equal(cr_scalar_rule_of(&xexp_fn), &xexp_row);
    assert_null(cr_scalar_rule_of(&affine_fn));
    const cr_config cfg = {.registry = reg};
    cr_value f = cr_value_function(&xexp_fn, NULL), y;

    /* cr_function_call of a row: f64, f32, complex. */
    cr_value x = cr_value_f64(0.4);
    assert_int_equal(cr_function_call(fx->arena, &f, &x, 1, &y), CR_OK);
    assert_close(y.u.f64, p_xexp(0.4), 1e-15);
    cr_value xs = cr_value_f32(0.4f);
    assert_int_equal(cr_function_call(fx->arena, &f, &xs, 1, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F32);
    cr_value z = cr_value_c128(CMPLX(0.2, -0.9));
    assert_int_equal(cr_function_call(fx->arena, &f, &z, 1, &y), CR_OK);
    assert_cclose(y.u.c128, p_cxexp(CMPLX(0.2, -0.9)), 1e-15);

    /* Real rules against FD. */
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &x, 1, &y, &pb), CR_OK);
    assert_string_equal(pb.name, "xexp_pullback");
    cr_tangent yb = cr_tangent_f64(1.0), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &yb, dx, 2), CR_OK);
    assert_close(tan_f64(dx[1]), fd1(p_xexp, 0.4), FD_RTOL);
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(-1.0)}, dy;
    assert_int_equal(cr_frule(&cfg, fx->arena, dargs, &f, &x, 1, &y, &dy), CR_OK);
    assert_close(tan_f64(dy), -fd1(p_xexp, 0.4), FD_RTOL);

    /* Complex rules: frule = J ż, pullback = Jᵀ ȳ. */
    double J[2][2];
    fd_jacobian(p_cxexp, CMPLX(0.2, -0.9), J);
    const cr_complex zd = CMPLX(1.0, 0.5), zb = CMPLX(-0.7, 0.1);
    dargs[1] = cr_tangent_c128(zd);
    assert_int_equal(cr_frule(&cfg, fx->arena, dargs, &f, &z, 1, &y, &dy), CR_OK);
    assert_cclose(dy.u.c128, jvp(J, zd), FD_RTOL);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &z, 1, &y, &pb), CR_OK);
    yb = cr_tangent_c128(zb);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &yb, dx, 2), CR_OK);
    assert_cclose(dx[1].u.c128, vjp(J, zb), FD_RTOL);

    /* derivatives_given_output of the row, against FD too. */
    double xv = 1.3, Y, D;
    cr_scalar_partials_f64(&xexp_row, &xv, &Y, &D);
    assert_close(Y, p_xexp(1.3), 1e-15);
    assert_close(D, fd1(p_xexp, 1.3), FD_RTOL);
    cr_complex zc = CMPLX(0.5, 0.5), Yc, Dc;
    assert_int_equal(cr_scalar_partials_c128(&xexp_row, &zc, &Yc, &Dc), CR_OK);
    fd_jacobian(p_cxexp, zc, J);
    assert_cclose(Dc, jvp(J, 1.0), FD_RTOL); /* f'(z) = J · [1, 0] */

    cr_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_function_call, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_builtin_unary, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_builtin_binary, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_chained_rrules, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nothing, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sincos, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_thunk_cotangent_scalar, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_int_args, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_f32_args, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_complex_convention, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_complex_binary, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_functor, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_user_scalar_row, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
