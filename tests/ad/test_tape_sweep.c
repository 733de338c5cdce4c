/*
 * The first-order reverse sweep's kept workspace (src/ad/sweep.c, kept_ws): a tape with its
 * own arena keeps the adjoints' workspace between calls, and the sweep leaves zero every
 * adjoint it reads, so that no clearing pass is needed before the next sweep. Each case
 * runs a sequence of calls on one tape and checks every gradient bit for bit against the
 * same call on a fresh tape over a caller buffer (which never keeps a workspace: the same
 * sweep arithmetic over a cleared one), and against central differences of the function
 * written in plain C: programs of growing and shrinking size; programs with a record of the
 * general loop (a rule kept as a pullback), after which the workspace is cleared again;
 * gradients with respect to an intermediate variable and to an input made inside the
 * function (not the first record's inputs: the cleared workspace serves); a pullback failing
 * in the middle of a sweep; vector-Jacobian products seeded at an input; the workspace's
 * allocation failing (the arena's serves, no error is left); no allocation once it is kept.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../src/ad/tape_impl.h"
#include "test_alloc.h"
#include "test_util.h"

#define MAXN 400

/* ---- The programs: a scalar loop, and the same with hypot of three arguments ------------- */

typedef struct prog {
    size_t n;
    bool general; /* adds hypot(x0, x1, x2), a rule kept as a pullback (a GENERIC record) */
    bool late;    /* adds an input made inside the function, after the loop */
} prog;

#define LATE_X 0.7

static double prog_c(const double *x, size_t n, const prog *p)
{
    double s = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1.0 - x[i];
        s += 100.0 * a * a + b * b + sin(x[i]) / (2.0 + x[i + 1] * x[i + 1]);
    }
    if (p->general)
        s += sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    if (p->late)
        s *= LATE_X;
    return s;
}

static cr_status prog_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    const prog *p = env;
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_sub(t, x[i + 1], cr_mul(t, x[i], x[i]));
        cr_var b = cr_sub(t, cr_const(1.0), x[i]);
        cr_var c =
            cr_div(t, cr_sin(t, x[i]), cr_add(t, cr_const(2.0), cr_mul(t, x[i + 1], x[i + 1])));
        s = cr_add(t, s, cr_add(t, cr_mul(t, cr_const(100.0), cr_mul(t, a, a)), cr_mul(t, b, b)));
        s = cr_add(t, s, c);
    }
    if (p->general)
        s = cr_add(t, s, cr_tape_call1(t, &cr_fn_hypot, x, 3));
    if (p->late)
        s = cr_mul(t, s, cr_tape_input(t, LATE_X));
    y[0] = s;
    return cr_tape_status(t);
}

static void point(double *x, size_t n, double shift)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.4 * sin(0.37 * (double)i + shift) + 0.3;
}

/* Central differences (five points) of prog_c. */
static void fd_grad(const prog *p, const double *x0, double *g)
{
    double x[MAXN];
    memcpy(x, x0, p->n * sizeof *x);
    for (size_t i = 0; i < p->n; i++) {
        double xi = x[i], h = 1e-4, v[4];
        const double step[4] = {2 * h, h, -h, -2 * h};
        for (int k = 0; k < 4; k++) {
            x[i] = xi + step[k];
            v[k] = prog_c(x, p->n, p);
        }
        x[i] = xi;
        g[i] = (8 * (v[1] - v[2]) - (v[0] - v[3])) / (12 * h);
    }
}

/* A tape over a caller buffer: its sweeps take a cleared workspace from the arena. */
static unsigned char g_buf[1 << 22];

static cr_tape *buffer_tape(cr_ctx *ctx, const cr_engine *eng)
{
    cr_tape *t;
    cr_tape_params p = {
        .struct_size = sizeof p, .buffer = g_buf, .buffer_size = sizeof g_buf, .engine = eng};
    assert_int_equal(cr_tape_new(ctx, &p, &t), CR_OK);
    return t;
}

/* value_and_gradient of p at x on t, bit for bit as on a fresh buffer tape, and close to
 * central differences; returns nothing, fails the test otherwise. */
static void check_call(cr_ctx *ctx, cr_tape *t, const prog *p, const double *x)
{
    double y, g[MAXN], yr, gr[MAXN], fd[MAXN];
    assert_ok(t, cr_tape_value_and_gradient(t, prog_t, (void *)p, x, p->n, &y, g));
    cr_tape *r = buffer_tape(ctx, NULL);
    assert_ok(r, cr_tape_value_and_gradient(r, prog_t, (void *)p, x, p->n, &yr, gr));
    cr_tape_free(r);
    ASSERT_DBL(y, yr);
    assert_memory_equal(g, gr, p->n * sizeof *g);
    fd_grad(p, x, fd);
    for (size_t i = 0; i < p->n; i++)
        assert_close(g[i], fd[i], 1e-7);
}

/* ---- Sequences of calls on one tape ------------------------------------------------------- */

/* Sizes up and down, the general loop in between: the workspace grows, is kept clean by the
 * scalar loop, left dirty by a general record and cleared before the next sweep. */
static void test_sequence(void **state)
{
    cr_ctx *ctx = ((fixture *)*state)->ctx;
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    const prog seq[] = {{200, false, false}, {200, false, false}, {150, true, false},
                        {300, false, false}, {100, false, false}, {300, true, false},
                        {300, false, false}, {300, false, true},  {120, false, false},
                        {300, false, false}};
    double x[MAXN];
    for (size_t k = 0; k < sizeof seq / sizeof seq[0]; k++) {
        point(x, seq[k].n, 0.3 * (double)k);
        check_call(ctx, t, &seq[k], x);
        /* kept, and clean after a scalar program; dirty after a general record */
        assert_non_null(t->ws);
        assert_true(t->ws_cap >= seq[k].n);
        if (seq[k].general)
            assert_true(t->ws_dirty > 0);
        else
            assert_int_equal(t->ws_dirty, 0);
    }
    cr_tape_free(t);
}

/* The gradient with respect to an intermediate variable (its adjoint is consumed by the
 * sweep over a kept workspace, so the arena's serves) and to an input made inside the
 * function; then calls of the first inputs again. */
static double inter_c(double v, double w)
{
    double s = 0;
    for (int k = 0; k < 40; k++)
        s += sin(v + 0.01 * k * w) * w;
    return s;
}

static void test_other_variables(void **state)
{
    cr_ctx *ctx = ((fixture *)*state)->ctx;
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    const prog p = {200, false, false};
    double x[MAXN];
    point(x, p.n, 0.1);
    check_call(ctx, t, &p, x);
    /* y = sum_k sin(v + 0.01 k w) w with v = x0 x1, w an input made after v */
    cr_var xs[2], w, s = cr_const(0.0);
    const double x0[2] = {0.6, -0.8};
    cr_tape_reset(t);
    assert_ok(t, cr_tape_inputs(t, x0, 2, xs));
    cr_var v = cr_mul(t, xs[0], xs[1]);
    w = cr_tape_input(t, 0.9);
    for (int k = 0; k < 40; k++)
        s = cr_add(t, s, cr_mul(t, cr_sin(t, cr_add(t, v, cr_mul(t, cr_const(0.01 * k), w))), w));
    cr_var wrt[3] = {v, w, xs[0]};
    double g[3], h = 1e-5;
    assert_ok(t, cr_tape_gradient(t, s, wrt, 3, g));
    double vv = x0[0] * x0[1];
    assert_close(g[0], (inter_c(vv + h, 0.9) - inter_c(vv - h, 0.9)) / (2 * h), 1e-8);
    assert_close(g[1], (inter_c(vv, 0.9 + h) - inter_c(vv, 0.9 - h)) / (2 * h), 1e-8);
    assert_close(g[2], g[0] * x0[1], 1e-15); /* the chain rule through v = x0 x1 */
    /* the first inputs alone: the kept workspace */
    double g2[2];
    assert_ok(t, cr_tape_gradient(t, s, xs, 2, g2));
    ASSERT_DBL(g2[0], g[2]);
    assert_close(g2[1], g[0] * x0[0], 1e-15);
    assert_int_equal(t->ws_dirty, 0);
    /* and the same twice more: nothing left behind */
    assert_ok(t, cr_tape_gradient(t, s, xs, 2, g2));
    ASSERT_DBL(g2[0], g[2]);
    point(x, p.n, 0.2);
    check_call(ctx, t, &p, x);
    cr_tape_free(t);
}

/* vjp of two outputs, one of them an input: its seed lands in the inputs' adjoints */
static void test_vjp_seeded_input(void **state)
{
    cr_ctx *ctx = ((fixture *)*state)->ctx;
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    const prog p = {150, false, false};
    double x[MAXN], fd[MAXN], xbar[MAXN];
    point(x, p.n, 0.5);
    cr_var xs[MAXN], ys[2];
    for (int round = 0; round < 3; round++) {
        assert_ok(t, cr_tape_record(t, prog_t, (void *)&p, x, p.n, xs, &ys[1], 1));
        ys[0] = xs[3];
        const double ybar[2] = {2.5, -0.75};
        assert_ok(t, cr_tape_vjp(t, ys, ybar, 2, xs, p.n, xbar));
        assert_int_equal(t->ws_dirty, 0);
        fd_grad(&p, x, fd);
        for (size_t i = 0; i < p.n; i++)
            assert_close(xbar[i], -0.75 * fd[i] + (i == 3 ? 2.5 : 0.0), 1e-7);
    }
    cr_tape_free(t);
}

/* ---- A pullback failing in the middle of a sweep -------------------------------------- */

static cr_status touchy_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(2.0 * args[0].u.f64);
    return CR_OK;
}
static const cr_function touchy_fn = {.name = "touchy", .arity = 1, .primal = touchy_primal};

/* fails for a cotangent above 10 */
static cr_status touchy_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)nx;
    (void)arena;
    (void)env;
    if (dy->tag == CR_TAN_F64 && dy->u.f64 > 10.0)
        return CR_EDOMAIN;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(2.0 * (dy->tag == CR_TAN_F64 ? dy->u.f64 : 0.0));
    return CR_OK;
}

static cr_status touchy_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){touchy_pullback, NULL, "touchy_pullback", 2};
    return touchy_primal(arena, fv, args, nargs, y);
}

/* y = c touchy(x0 x1) + the scalar loop */
typedef struct touchy_env {
    prog p;
    double c;
} touchy_env;

static cr_status touchy_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    const touchy_env *e = env;
    cr_value f = cr_value_function(&touchy_fn, NULL);
    cr_var a = cr_mul(t, x[0], x[1]);
    cr_var u = cr_mul(t, cr_const(e->c), cr_tape_call1(t, &f, &a, 1));
    if (prog_t(t, x, n, y, m, (void *)&e->p) != CR_OK)
        return cr_tape_status(t);
    y[0] = cr_add(t, y[0], u);
    return cr_tape_status(t);
}

static void test_failing_pullback(void **state)
{
    cr_ctx *ctx = ((fixture *)*state)->ctx;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(ctx, NULL, &eng), CR_OK);
    static const cr_argspec f64s[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &touchy_fn,
                       .nargs = 1,
                       .args = f64s,
                       .rrule = touchy_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    double x[MAXN], y, g[MAXN], yr, gr[MAXN];
    point(x, 200, 0.4);
    const prog p = {200, false, false};
    for (int round = 0; round < 2; round++) {
        /* the scalar loop's records are swept (their adjoints consumed), then the pullback
         * fails: the workspace is left dirty */
        touchy_env bad = {p, 20.0};
        assert_int_equal(cr_tape_value_and_gradient(t, touchy_t, &bad, x, 200, &y, g), CR_EDOMAIN);
        assert_contains(cr_tape_errmsg(t), "touchy");
        assert_true(t->ws_dirty > 0);
        /* the next sweeps are right: a failing-free call of the same program, then the plain
         * loop, each against a buffer tape */
        touchy_env good = {p, 3.0};
        assert_ok(t, cr_tape_value_and_gradient(t, touchy_t, &good, x, 200, &y, g));
        cr_tape *r = buffer_tape(ctx, eng);
        assert_ok(r, cr_tape_value_and_gradient(r, touchy_t, &good, x, 200, &yr, gr));
        cr_tape_free(r);
        ASSERT_DBL(y, yr);
        assert_memory_equal(g, gr, 200 * sizeof *g);
        double fd[MAXN];
        fd_grad(&p, x, fd); /* plus 3 touchy(x0 x1) = 6 x0 x1 */
        assert_close(g[0], fd[0] + 6.0 * x[1], 1e-7);
        assert_close(g[1], fd[1] + 6.0 * x[0], 1e-7);
        for (size_t i = 2; i < 200; i++)
            assert_close(g[i], fd[i], 1e-7);
        check_call(ctx, t, &p, x);
    }
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- Memory ------------------------------------------------------------------------------ */

/* The workspace's allocation failing: the arena's workspace serves and no error is left on
 * the context; the next call keeps one; later calls allocate nothing; freed with the tape. */
static void test_memory(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    const prog p = {300, false, false};
    double x[MAXN], y, g[MAXN], g0[MAXN];
    cr_var xs[MAXN], out;
    point(x, p.n, 0.6);
    assert_ok(t, cr_tape_record(t, prog_t, (void *)&p, x, p.n, xs, &out, 1));
    c.fail_at = c.allocs + 1; /* the kept workspace */
    assert_ok(t, cr_tape_gradient(t, out, xs, p.n, g0));
    assert_int_equal(cr_ctx_errcode(ctx), CR_OK);
    assert_null(t->ws);
    c.fail_at = 0;
    assert_ok(t, cr_tape_gradient(t, out, xs, p.n, g));
    assert_memory_equal(g, g0, p.n * sizeof *g);
    assert_non_null(t->ws);
    assert_ok(t, cr_tape_value_and_gradient(t, prog_t, (void *)&p, x, p.n, &y, g));
    size_t allocs = c.allocs;
    for (int round = 0; round < 3; round++) {
        assert_ok(t, cr_tape_value_and_gradient(t, prog_t, (void *)&p, x, p.n, &y, g));
        assert_memory_equal(g, g0, p.n * sizeof *g);
    }
    assert_int_equal(c.allocs, allocs);
    cr_tape_free(t);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sequence, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_other_variables, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_vjp_seeded_input, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_failing_pullback, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
