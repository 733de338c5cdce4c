/*
 * Closures under the engine's RuleConfig: an overlay registered with
 * cr_engine_overlay_closure() reads the closure's real fields as variables, so
 * rrule_via_ad gives the closure's cotangent as a structural tangent, frule_via_ad pushes a
 * tangent of the closure forward, and the higher-order rules (map, sum(f, x)) accumulate
 * the closure's cotangent over the elements. Every derivative is compared with central
 * differences of the closure's primal, perturbing the C struct's fields.
 */
#include <math.h>
#include <stddef.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

/* poly(x) = c x² + in.d sin(k x): c and in.d are differentiable fields, k an integer. */
typedef struct poly_inner {
    double d;
} poly_inner;
typedef struct poly_self {
    double c;
    int k;
    poly_inner in;
} poly_self;
static const cr_field inner_fields[1] = {{"d", offsetof(poly_inner, d), CR_KIND_F64, NULL}};
static const cr_type inner_type = {"poly_inner", sizeof(poly_inner), 1, inner_fields};
static const cr_field poly_fields[3] = {
    {"c", offsetof(poly_self, c), CR_KIND_F64, NULL},
    {"k", offsetof(poly_self, k), CR_KIND_I32, NULL},
    {"in", offsetof(poly_self, in), CR_KIND_STRUCT, &inner_type},
};
static const cr_type poly_type = {"poly", sizeof(poly_self), 3, poly_fields};

static double poly_eval(const poly_self *s, double x)
{
    return s->c * x * x + s->in.d * sin(s->k * x);
}

static cr_status poly_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)arena;
    (void)nargs;
    *out = cr_value_f64(poly_eval(fv->u.func.self, args[0].u.f64));
    return CR_OK;
}
static const cr_function poly_fn = {
    .name = "poly", .arity = 1, .primal = poly_primal, .self_type = &poly_type};

/* The overlay: x[0] = c, x[1] = in.d (the real fields, depth-first), x[2] = the argument.
 * The integer field k is read from the closure itself, through env. */
static cr_status poly_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    const int *k = env;
    if (n != 3 || m != 1)
        return CR_EINVAL;
    cr_var kx = cr_mul(t, cr_const((double)*k), x[2]);
    y[0] = cr_add(t, cr_mul(t, x[0], cr_mul(t, x[2], x[2])), cr_mul(t, x[1], cr_sin(t, kx)));
    return cr_tape_status(t);
}

/* A closure the engine has a plain overlay for (no fields read): its cotangent stays
 * NotImplemented. */
static const cr_function plain_fn = {
    .name = "poly_plain", .arity = 1, .primal = poly_primal, .self_type = &poly_type};
static cr_status plain_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const poly_self *s = env;
    y[0] = cr_mul(t, cr_const(s->c), cr_mul(t, x[0], x[0]));
    return cr_tape_status(t);
}

typedef struct cfix {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_engine *eng;
    const cr_config *cfg;
    poly_self self;
} cfix;

static int cfix_setup(void **state)
{
    cfix *h = calloc(1, sizeof *h);
    if (h == NULL || cr_ctx_new(NULL, &h->ctx) != CR_OK ||
        cr_arena_new(h->ctx, NULL, &h->arena) != CR_OK ||
        cr_engine_new(h->ctx, NULL, &h->eng) != CR_OK)
        return -1;
    h->self = (poly_self){.c = 0.7, .k = 3, .in = {.d = -1.3}};
    if (cr_engine_overlay_closure(h->eng, &poly_fn, poly_ad, 1, &h->self.k) != CR_OK ||
        cr_engine_overlay(h->eng, &plain_fn, plain_ad, 1, &h->self) != CR_OK)
        return -1;
    h->cfg = cr_engine_config(h->eng);
    *state = h;
    return 0;
}

static int cfix_teardown(void **state)
{
    cfix *h = *state;
    cr_engine_free(h->eng);
    cr_arena_free(h->arena);
    cr_ctx_free(h->ctx);
    free(h);
    return 0;
}

/* Central differences of poly along a direction of (c, in.d, x). */
static double poly_fd(const poly_self *s, double x, double dc, double dd, double dx)
{
    const double h = 1e-6;
    poly_self p = *s, m = *s;
    p.c += h * dc;
    m.c -= h * dc;
    p.in.d += h * dd;
    m.in.d -= h * dd;
    return (poly_eval(&p, x + h * dx) - poly_eval(&m, x - h * dx)) / (2 * h);
}

static double real_of(cr_tangent t)
{
    double v = 0.0;
    cr_tangent u;
    assert_int_equal(cr_tangent_unthunk(t, &u), CR_OK);
    assert_int_equal(u.tag, CR_TAN_F64);
    v = u.u.f64;
    return v;
}

/* rrule_via_ad: the closure's cotangent is structural, field by field. */
static void test_rrule_via_ad(void **state)
{
    cfix *h = *state;
    cr_value fv = cr_value_function(&poly_fn, &h->self), x = cr_value_f64(0.4), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &fv, &x, 1, &y, &pb), CR_OK);
    ASSERT_CLOSE(y.u.f64, poly_eval(&h->self, 0.4), 1e-15);
    cr_tangent dy = cr_tangent_f64(1.7), dx[2];
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_STRUCT);
    ASSERT_CLOSE(real_of(cr_tangent_field(dx[0], 0)), 1.7 * poly_fd(&h->self, 0.4, 1, 0, 0), 1e-8);
    assert_int_equal(cr_tangent_field(dx[0], 1).tag, CR_TAN_NONE); /* the integer k */
    cr_tangent in = cr_tangent_field(dx[0], 2);
    assert_int_equal(in.tag, CR_TAN_STRUCT);
    ASSERT_CLOSE(real_of(cr_tangent_field(in, 0)), 1.7 * poly_fd(&h->self, 0.4, 0, 1, 0), 1e-8);
    ASSERT_CLOSE(real_of(dx[1]), 1.7 * poly_fd(&h->self, 0.4, 0, 0, 1), 1e-8);
}

/* frule_via_ad: a structural tangent of the closure is pushed forward with the argument's. */
static void test_frule_via_ad(void **state)
{
    cfix *h = *state;
    cr_value fv = cr_value_function(&poly_fn, &h->self), x = cr_value_f64(-0.9), y;
    cr_tangent inner_t = cr_tangent_f64(-0.25), fields[3], dargs[2], dy;
    assert_int_equal(cr_tangent_struct(h->arena, &inner_type, NULL, &inner_t, 1, &fields[2]),
                     CR_OK);
    fields[0] = cr_tangent_f64(0.5);
    fields[1] = cr_tangent_none();
    assert_int_equal(cr_tangent_struct(h->arena, &poly_type, NULL, fields, 3, &dargs[0]), CR_OK);
    dargs[1] = cr_tangent_f64(0.3);
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, dargs, &fv, &x, 1, &y, &dy), CR_OK);
    ASSERT_CLOSE(y.u.f64, poly_eval(&h->self, -0.9), 1e-15);
    ASSERT_CLOSE(real_of(dy), poly_fd(&h->self, -0.9, 0.5, -0.25, 0.3), 1e-8);
    /* A zero tangent of the closure: only the argument moves. */
    dargs[0] = cr_tangent_zero();
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, dargs, &fv, &x, 1, &y, &dy), CR_OK);
    ASSERT_CLOSE(real_of(dy), poly_fd(&h->self, -0.9, 0, 0, 0.3), 1e-8);
    /* A tangent that is not structural is refused. */
    dargs[0] = cr_tangent_f64(1.0);
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, dargs, &fv, &x, 1, &y, &dy), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(h->ctx), "closure poly must be structural");
}

/* map and sum(f, x) with a closure: ∂f is the sum of the elements' field cotangents, and
 * the rule tester (which perturbs the closure's fields too) passes every check. */
static void test_map_closure(void **state)
{
    cfix *h = *state;
    double a[5] = {0.5, -1.25, 2, 1.5, 0.1}, w[5] = {0.3, -0.7, 1.1, 0.2, -0.4};
    cr_array A = cr_array_vector(a, 5), W = cr_array_vector(w, 5);
    cr_value fv = cr_value_function(&poly_fn, &h->self), y;
    cr_value args[2] = {fv, cr_value_array(&A)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(h->cfg, h->arena, &cr_fn_map, args, 2, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_array(&W), dx[3];
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 3), CR_OK);
    double fc = 0.0, fd = 0.0;
    for (size_t i = 0; i < 5; i++) {
        fc += w[i] * poly_fd(&h->self, a[i], 1, 0, 0);
        fd += w[i] * poly_fd(&h->self, a[i], 0, 1, 0);
    }
    assert_int_equal(dx[1].tag, CR_TAN_STRUCT);
    ASSERT_CLOSE(real_of(cr_tangent_field(dx[1], 0)), fc, 1e-7);
    ASSERT_CLOSE(real_of(cr_tangent_field(cr_tangent_field(dx[1], 2), 0)), fd, 1e-7);
    cr_test_opts opts = {0};
    opts.cfg = h->cfg;
    const cr_value *fns[2] = {&cr_fn_map, &cr_fn_sum};
    for (size_t i = 0; i < 2; i++) {
        cr_test_report r;
        assert_int_equal(cr_test_rrule(h->arena, &opts, fns[i], args, 2, &r), CR_OK);
        assert_int_equal(r.verdict, CR_VERDICT_PASS);
        assert_int_equal(r.nbroken, 0);
        assert_true(r.npassed > 0);
    }
}

/* On a tape the closure's fields are constants: the gradient is with respect to x only. */
static void test_on_tape(void **state)
{
    cfix *h = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(h->ctx, &(cr_tape_params){.engine = h->eng}, &t), CR_OK);
    cr_value fv = cr_value_function(&poly_fn, &h->self);
    cr_var x = cr_tape_input(t, 1.2);
    cr_var y = cr_tape_call1(t, &fv, &x, 1);
    ASSERT_CLOSE(y.v, poly_eval(&h->self, 1.2), 1e-15);
    double g;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    ASSERT_CLOSE(g, poly_fd(&h->self, 1.2, 0, 0, 1), 1e-8);
    /* A closure value without its fields. */
    cr_value bad = cr_value_function(&poly_fn, NULL);
    cr_tape_reset(t);
    x = cr_tape_input(t, 1.2);
    (void)cr_tape_call1(t, &bad, &x, 1);
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "poly: a closure value without fields");
    cr_tape_free(t);
}

/* Refusals, and the cases that keep their documented cotangents. */
static void test_errors(void **state)
{
    cfix *h = *state;
    static const cr_function no_self = {.name = "no_self", .arity = 1, .primal = poly_primal};
    assert_int_equal(cr_engine_overlay_closure(h->eng, &no_self, poly_ad, 1, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "no_self has no self_type");
    assert_int_equal(cr_engine_overlay_closure(h->eng, &poly_fn, NULL, 1, NULL), CR_EINVAL);
    static const cr_field bad_fields[1] = {{"s", 0, CR_KIND_STRUCT, NULL}};
    static const cr_type bad_type = {"bad", sizeof(double), 1, bad_fields};
    static const cr_function bad_fn = {
        .name = "bad", .arity = 1, .primal = poly_primal, .self_type = &bad_type};
    assert_int_equal(cr_engine_overlay_closure(h->eng, &bad_fn, poly_ad, 1, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "bad: field 0 is a struct without a descriptor");
    /* rrule_via_ad of a closure value without fields. */
    cr_value fv = cr_value_function(&poly_fn, NULL), x = cr_value_f64(0.4), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &fv, &x, 1, &y, &pb), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "via_ad(poly): a closure value without fields");
    /* A plain overlay of a closure: the fields' cotangent is NotImplemented, the argument's
     * is right, and frule_via_ad refuses a tangent of the fields. */
    fv = cr_value_function(&plain_fn, &h->self);
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &fv, &x, 1, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_f64(1.0), dx[2];
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NOTIMPL);
    ASSERT_CLOSE(real_of(dx[1]), 2 * h->self.c * 0.4, 1e-15);
    cr_tangent dargs[2] = {cr_tangent_zero(), cr_tangent_f64(1.0)};
    cr_tangent fields[1] = {cr_tangent_f64(1.0)};
    assert_int_equal(cr_tangent_struct(h->arena, &poly_type, NULL, fields, 1, &dargs[0]), CR_OK);
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, dargs, &fv, &x, 1, &y, &dy), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(h->ctx), "cr_engine_overlay_closure");
}

/* A zero-adjoint closure: no derivative flows through it, its fields' cotangent is zero. */
static void test_zero_adjoint(void **state)
{
    cfix *h = *state;
    assert_int_equal(cr_engine_zero_adjoint(h->eng, &poly_fn), CR_OK);
    cr_value fv = cr_value_function(&poly_fn, &h->self), x = cr_value_f64(0.4), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &fv, &x, 1, &y, &pb), CR_OK);
    ASSERT_CLOSE(y.u.f64, poly_eval(&h->self, 0.4), 1e-15);
    cr_tangent dy = cr_tangent_f64(1.0), dx[2];
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 2), CR_OK);
    assert_true(cr_tangent_is_zero(dx[0]));
    assert_true(cr_tangent_is_zero(dx[1]) || real_of(dx[1]) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rrule_via_ad, cfix_setup, cfix_teardown),
        cmocka_unit_test_setup_teardown(test_frule_via_ad, cfix_setup, cfix_teardown),
        cmocka_unit_test_setup_teardown(test_map_closure, cfix_setup, cfix_teardown),
        cmocka_unit_test_setup_teardown(test_on_tape, cfix_setup, cfix_teardown),
        cmocka_unit_test_setup_teardown(test_errors, cfix_setup, cfix_teardown),
        cmocka_unit_test_setup_teardown(test_zero_adjoint, cfix_setup, cfix_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
