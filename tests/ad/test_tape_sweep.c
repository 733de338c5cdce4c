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
 * allocation failing (the arena's serves, no error is left); no allocation once it is kept,
 * also when the function makes inputs one at a time (the workspace shares its memory with
 * the forward and replay tapes' state).
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
        assert_non_null(t->kept.ws);
        assert_true(t->kept.cap >= seq[k].n);
        if (seq[k].general)
            assert_true(t->kept.dirty > 0);
        else
            assert_int_equal(t->kept.dirty, 0);
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
    assert_int_equal(t->kept.dirty, 0);
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
        assert_int_equal(t->kept.dirty, 0);
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
        assert_true(t->kept.dirty > 0);
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
    assert_null(t->kept.ws);
    c.fail_at = 0;
    assert_ok(t, cr_tape_gradient(t, out, xs, p.n, g));
    assert_memory_equal(g, g0, p.n * sizeof *g);
    assert_non_null(t->kept.ws);
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

/* Inputs made one at a time inside the function (cr_tape_input, which clears the replay
 * information of the next record on the tapes that keep one, whose memory a first-order
 * tape's kept workspace shares) leave the workspace as it is: the calls after the first
 * allocate nothing and keep its size. A forward tape recording such an input, a prepared
 * gradient's replay tape (made from a first-order tape) and a prepared H v give back all
 * they allocated. */
static void test_memory_inputs(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    const prog p = {300, false, true};
    double x[MAXN], y, g[MAXN], y2, g2[MAXN];
    point(x, p.n, 0.2);
    check_call(ctx, t, &p, x);
    check_call(ctx, t, &p, x);
    assert_non_null(t->kept.ws);
    size_t cap = t->kept.cap;
    assert_true(cap >= p.n);
    size_t allocs = c.allocs;
    for (int round = 0; round < 3; round++)
        assert_ok(t, cr_tape_value_and_gradient(t, prog_t, (void *)&p, x, p.n, &y, g));
    assert_int_equal(c.allocs, allocs);
    assert_int_equal(t->kept.cap, cap);
    cr_tape_free(t);

    cr_tape_params fp = {.struct_size = sizeof fp, .flags = CR_TAPE_FORWARD};
    assert_int_equal(cr_tape_new(ctx, &fp, &t), CR_OK);
    for (int round = 0; round < 2; round++) {
        assert_ok(t, cr_tape_value_and_gradient(t, prog_t, (void *)&p, x, p.n, &y2, g2));
        ASSERT_DBL(y2, y);
        assert_memory_equal(g2, g, p.n * sizeof *g);
    }
    cr_tape_free(t);

    /* The prepared replays refuse inputs made inside the function: their inputs, made one
     * record each by cr_tape_inputs through cr_tape_input, are the ones cleared. */
    const prog q = {300, false, false};
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    assert_ok(t, cr_tape_value_and_gradient(t, prog_t, (void *)&q, x, q.n, &y, g));
    cr_tape_free(t);
    cr_prepared *pr;
    assert_int_equal(cr_prepare_gradient(ctx, NULL, prog_t, (void *)&q, x, q.n, &pr), CR_OK);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(cr_prepared_value_and_gradient(pr, x, q.n, &y2, g2), CR_OK);
        assert_close(y2, y, 1e-12);
        for (size_t i = 0; i < q.n; i++)
            assert_close(g2[i], g[i], 1e-12);
    }
    cr_prepared_free(pr);
    double v[MAXN], hv[MAXN];
    for (size_t i = 0; i < q.n; i++)
        v[i] = 1.0;
    assert_int_equal(cr_prepare_hvp(ctx, NULL, prog_t, (void *)&q, x, q.n, &pr), CR_OK);
    assert_int_equal(cr_prepared_hvp(pr, x, q.n, v, hv, &y2, g2), CR_OK);
    assert_close(y2, y, 1e-12);
    /* H v against central differences of the gradient along v */
    double xp[MAXN], xm[MAXN], gp[MAXN], gm[MAXN], hd[MAXN];
    const double h = 1e-5;
    for (size_t i = 0; i < q.n; i++) {
        xp[i] = x[i] + h * v[i];
        xm[i] = x[i] - h * v[i];
    }
    assert_int_equal(cr_prepared_hvp(pr, xp, q.n, v, hd, NULL, gp), CR_OK);
    assert_int_equal(cr_prepared_hvp(pr, xm, q.n, v, hd, NULL, gm), CR_OK);
    for (size_t i = 0; i < q.n; i++)
        assert_close(hv[i], (gp[i] - gm[i]) / (2 * h), 1e-6);
    cr_prepared_free(pr);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

static int run_kept_workspace(void)
{
    const struct CMUnitTest kept_workspace[] = {
        cmocka_unit_test_setup_teardown(test_sequence, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_other_variables, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_vjp_seeded_input, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_failing_pullback, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_memory_inputs),
    };
    return cmocka_run_group_tests(kept_workspace, NULL, NULL);
}

/*
 * Tests of the sweeps' less travelled paths (src/ad/sweep.c): an rrule of more than eight
 * arguments (its cotangents outgrow the sweep's stack buffer) in the reverse and forward
 * sweeps, with a constant argument; a pullback failing in the forward sweep; a pullback
 * whose results' cotangents are zero, not called; and the entry
 * points' refusals and special cases: a failed tape, NULL buffers, variables of another
 * tape, non-finite tangents, constant outputs (rows of zeros), and a function whose output
 * is not of its recording. Derivatives are checked against central differences of plain-C
 * versions of the same functions; every error against its status and a message naming the
 * entry point, and the tape is then used again.
 */

#define FD_RTOL 1e-8

static const cr_argspec k_f64_1[1] = {{CR_M_F64, NULL}};

/* ---- wsum(x_0, ..., x_{n-1}) = sum_i (i + 1) x_i^2 + x_0 x_{n-1}: a variadic rrule ----- */

static double wsum_c(const double *x, size_t n)
{
    double s = x[0] * x[n - 1];
    for (size_t i = 0; i < n; i++)
        s += (double)(i + 1) * x[i] * x[i];
    return s;
}

static cr_status wsum_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    double x[16] = {0};
    if (nargs == 0 || nargs > 16)
        return CR_EINVAL;
    for (size_t i = 0; i < nargs; i++)
        x[i] = args[i].u.f64;
    *out = cr_value_f64(wsum_c(x, nargs));
    return CR_OK;
}
static const cr_function wsum_fn = {.name = "wsum", .arity = -1, .primal = wsum_primal};

typedef struct wsum_env {
    size_t n;
    double x[16];
} wsum_env;

static cr_status wsum_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)arena;
    const wsum_env *e = env;
    double g = dy->u.f64;
    size_t n = e->n;
    if (nx != n + 1)
        return CR_EINVAL;
    dx[0] = cr_tangent_none();
    for (size_t i = 0; i < n; i++) {
        double d = 2.0 * (double)(i + 1) * e->x[i];
        if (i == 0)
            d += e->x[n - 1];
        if (i == n - 1)
            d += e->x[0];
        dx[i + 1] = cr_tangent_f64(g * d);
    }
    return CR_OK;
}

static cr_status wsum_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    if (nargs == 0 || nargs > 16)
        return CR_EINVAL;
    wsum_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(wsum_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->n = nargs;
    for (size_t i = 0; i < nargs; i++)
        e->x[i] = args[i].u.f64;
    *pb = (cr_pullback){wsum_pullback, e, "wsum_pullback", nargs + 1};
    return wsum_primal(arena, fv, args, nargs, y);
}

/* y = sin(wsum(x_0, ..., x_3, 0.25, x_4, ..., x_7)) / 10 of 8 inputs: nine arguments. */
#define NW 8
static double nine_c(const double *x)
{
    double a[NW + 1];
    for (size_t i = 0, j = 0; i < NW + 1; i++)
        a[i] = i == 4 ? 0.25 : x[j++];
    return sin(wsum_c(a, NW + 1) / 10.0);
}

static cr_status nine_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = nine_c(x);
    return CR_OK;
}

static cr_var nine_t(cr_tape *t, const cr_var *x)
{
    cr_value wsum = cr_value_function(&wsum_fn, NULL);
    cr_var a[NW + 1];
    for (size_t i = 0, j = 0; i < NW + 1; i++)
        a[i] = i == 4 ? cr_const(0.25) : x[j++];
    return cr_sin(t, cr_div(t, cr_tape_call1(t, &wsum, a, NW + 1), cr_const(10.0)));
}

static cr_engine *wsum_engine(cr_ctx *ctx)
{
    cr_engine *eng;
    assert_int_equal(cr_engine_new(ctx, NULL, &eng), CR_OK);
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &wsum_fn,
                       .nargs = 1,
                       .args = k_f64_1,
                       .variadic = true,
                       .rrule = wsum_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    return eng;
}

static cr_tape *tape_with(cr_ctx *ctx, const cr_engine *eng, uint32_t flags)
{
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .flags = flags, .engine = eng};
    assert_int_equal(cr_tape_new(ctx, &p, &t), CR_OK);
    return t;
}

static void test_rrule_nine_arguments(void **state)
{
    fixture *f = *state;
    cr_engine *eng = wsum_engine(f->ctx);
    cr_tape *t = tape_with(f->ctx, eng, CR_TAPE_FORWARD);
    const double x0[NW] = {0.3, -0.5, 0.7, 0.1, -0.2, 0.4, -0.6, 0.8};
    cr_var x[NW];
    assert_ok(t, cr_tape_inputs(t, x0, NW, x));
    cr_var y = nine_t(t, x);
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, nine_c(x0), 1e-15);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    double fd[NW], g[NW];
    assert_int_equal(cr_fd_jacobian(&m, NULL, nine_fd, NULL, x0, NW, 1, f->arena, fd, NULL), CR_OK);
    /* Reverse: one pullback call with nine cotangents. */
    assert_ok(t, cr_tape_gradient(t, y, x, NW, g));
    for (size_t i = 0; i < NW; i++)
        assert_close(g[i], fd[i], FD_RTOL);
    /* Forward: the rule's Jacobian, its constant argument skipped. */
    const double v[NW] = {1.0, -2.0, 0.5, 0.25, 3.0, -1.0, 0.75, 2.0};
    double jv, want = 0.0;
    for (size_t i = 0; i < NW; i++)
        want += fd[i] * v[i];
    assert_ok(t, cr_tape_jvp(t, x, v, NW, &y, 1, &jv));
    assert_close(jv, want, FD_RTOL);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- A pullback failing in the forward sweep ------------------------------------------------ */

static cr_status bad_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(2.0 * args[0].u.f64);
    return CR_OK;
}
static const cr_function bad_fn = {.name = "bad", .arity = 1, .primal = bad_primal};

static cr_status bad_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)dy;
    (void)dx;
    (void)nx;
    (void)env;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "bad: no derivative here");
}

static cr_status bad_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){bad_pullback, NULL, "bad_pullback", 2};
    return bad_primal(arena, fv, args, nargs, y);
}

static cr_status sin_c(double x, double *y, void *env)
{
    (void)env;
    *y = sin(x) * x;
    return CR_OK;
}

static double fd1(cr_fd_fn fn, double x)
{
    cr_fdm m;
    double d = (double)NAN;
    if (cr_fdm_central(5, 1, &m) != CR_OK ||
        cr_fd_derivative(&m, NULL, fn, NULL, x, &d, NULL) != CR_OK)
        return (double)NAN;
    return d;
}

static void test_forward_pullback_failure(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &bad_fn, .nargs = 1, .args = k_f64_1, .rrule = bad_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_tape *t = tape_with(f->ctx, eng, CR_TAPE_FORWARD);
    cr_value bad = cr_value_function(&bad_fn, NULL);
    cr_var x = cr_tape_input(t, 0.5);
    cr_var y = cr_sin(t, cr_tape_call1(t, &bad, &x, 1));
    assert_ok(t, cr_tape_status(t));
    double one = 1.0, jv = -7.0;
    assert_int_equal(cr_tape_jvp(t, &x, &one, 1, &y, 1, &jv), CR_EDOMAIN);
    assert_close(jv, -7.0, 0); /* nothing written */
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "pullback bad_pullback (of bad) failed: no derivative");
    assert_int_equal(cr_tape_jvp(t, &x, &one, 1, &y, 1, &jv), CR_EDOMAIN); /* sticky */
    /* Reset, the same tape differentiates a function without the failing rule. */
    cr_tape_reset(t);
    x = cr_tape_input(t, 0.5);
    y = cr_mul(t, cr_sin(t, x), x);
    assert_ok(t, cr_tape_jvp(t, &x, &one, 1, &y, 1, &jv));
    assert_close(jv, fd1(sin_c, 0.5), FD_RTOL);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* A pullback whose results' cotangents are all zero is not called: a failing one recorded
 * before the output, but not on its path, does not stop the sweep. */
static void test_zero_cotangent_skips_pullback(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &bad_fn, .nargs = 1, .args = k_f64_1, .rrule = bad_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_tape *t = tape_with(f->ctx, eng, 0);
    cr_value bad = cr_value_function(&bad_fn, NULL);
    cr_var x = cr_tape_input(t, 0.5);
    cr_var b = cr_tape_call1(t, &bad, &x, 1);
    assert_false(cr_var_is_const(b));
    cr_var y = cr_mul(t, cr_sin(t, x), x);
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(sin_c, 0.5), FD_RTOL);
    /* On its path, it is called and fails. */
    cr_var yb = cr_add(t, y, b);
    assert_int_equal(cr_tape_gradient(t, yb, &x, 1, &g), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "pullback bad_pullback (of bad) failed");
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- Entry points ---------------------------------------------------------------------------- */

/* h: R^2 -> R^3, h = (x0 * x1, 2 (a constant), sin(x0) + x1) */
static cr_status h_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = x[0] * x[1];
    y[1] = 2.0;
    y[2] = sin(x[0]) + x[1];
    return CR_OK;
}

static void h_t(cr_tape *t, const cr_var *x, cr_var *y)
{
    y[0] = cr_mul(t, x[0], x[1]);
    y[1] = cr_const(2.0);
    y[2] = cr_add(t, cr_sin(t, x[0]), x[1]);
}

/* Fail t (a variable of another tape). */
static void fail_tape(cr_tape *t, cr_tape *other)
{
    cr_var z = cr_tape_input(other, 1.0);
    (void)cr_sin(t, z);
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
}

static void test_jacobian_entry(void **state)
{
    fixture *f = *state;
    cr_tape *t, *other;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &other), CR_OK);
    const double x0[2] = {0.7, -1.3};
    cr_var x[2], y[3];
    assert_ok(t, cr_tape_inputs(t, x0, 2, x));
    h_t(t, x, y);
    double J[6], fd[6];
    for (size_t i = 0; i < 6; i++)
        J[i] = (double)NAN;
    /* A constant output's row is zeros. */
    assert_ok(t, cr_tape_jacobian(t, y, 3, x, 2, J));
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, h_fd, NULL, x0, 2, 3, f->arena, fd, NULL), CR_OK);
    for (size_t i = 0; i < 6; i++)
        assert_close(J[i], fd[i], FD_RTOL);
    ASSERT_DBL(J[2], 0.0);
    ASSERT_DBL(J[3], 0.0);
    /* NULL buffers. */
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tape_jacobian(t, NULL, 3, x, 2, J), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_jacobian: NULL outputs, inputs or result");
    assert_int_equal(cr_tape_jacobian(t, y, 3, NULL, 2, J), CR_EINVAL);
    assert_int_equal(cr_tape_jacobian(t, y, 3, x, 2, NULL), CR_EINVAL);
    assert_int_equal(cr_tape_jacobian(NULL, y, 3, x, 2, J), CR_EINVAL);
    /* A variable of another tape among the outputs, then among the inputs. */
    cr_var yo[3] = {y[0], cr_tape_input(other, 1.0), y[2]};
    assert_int_equal(cr_tape_jacobian(t, yo, 3, x, 2, J), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_jacobian: output 1 (variable 0) belongs to");
    cr_var xo[2] = {x[0], yo[1]};
    assert_int_equal(cr_tape_jacobian(t, y, 3, xo, 2, J), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_jacobian: input 1");
    assert_int_equal(cr_tape_status(t), CR_OK); /* bad arguments do not fail the tape */
    /* A failed tape gives its failure. */
    fail_tape(t, other);
    assert_int_equal(cr_tape_jacobian(t, y, 3, x, 2, J), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "sin: variable");
    /* Cleared, the Jacobian again. */
    cr_tape_clear_error(t);
    assert_ok(t, cr_tape_jacobian(t, y, 3, x, 2, J));
    for (size_t i = 0; i < 6; i++)
        assert_close(J[i], fd[i], FD_RTOL);
    cr_tape_free(other);
    cr_tape_free(t);
}

static void test_jvp_entry(void **state)
{
    fixture *f = *state;
    cr_tape *t, *other;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_FORWARD};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &other), CR_OK);
    const double x0[2] = {0.7, -1.3}, v[2] = {0.5, 2.0};
    cr_var x[2], y[3];
    assert_ok(t, cr_tape_inputs(t, x0, 2, x));
    h_t(t, x, y);
    double yd[3], want[3], fd[6];
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, h_fd, NULL, x0, 2, 3, f->arena, fd, NULL), CR_OK);
    for (size_t i = 0; i < 3; i++)
        want[i] = fd[2 * i] * v[0] + fd[2 * i + 1] * v[1];
    /* NULL buffers. */
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tape_jvp(t, x, NULL, 2, y, 3, yd), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_jvp: NULL inputs, tangents or outputs");
    assert_int_equal(cr_tape_jvp(t, x, v, 2, y, 3, NULL), CR_EINVAL);
    assert_int_equal(cr_tape_jvp(NULL, x, v, 2, y, 3, yd), CR_EINVAL);
    /* Another tape's variable; a non-finite tangent. */
    cr_var xo[2] = {x[0], cr_tape_input(other, 1.0)};
    assert_int_equal(cr_tape_jvp(t, xo, v, 2, y, 3, yd), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_jvp: input 1 (variable 0) belongs to");
    cr_var yo[3] = {y[0], y[1], xo[1]};
    assert_int_equal(cr_tape_jvp(t, x, v, 2, yo, 3, yd), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_jvp: output 2");
    const double vinf[2] = {0.5, INFINITY};
    assert_int_equal(cr_tape_jvp(t, x, vinf, 2, y, 3, yd), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_jvp: tangent 1 is inf");
    /* A failed tape gives its failure. */
    fail_tape(t, other);
    assert_int_equal(cr_tape_jvp(t, x, v, 2, y, 3, yd), CR_ETAPE);
    cr_tape_clear_error(t);
    assert_ok(t, cr_tape_jvp(t, x, v, 2, y, 3, yd));
    for (size_t i = 0; i < 3; i++)
        assert_close(yd[i], want[i], FD_RTOL);
    cr_tape_free(other);
    cr_tape_free(t);
}

/* s(x) = x0^2 x1 + sin(x1) */
static cr_status s_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = x[0] * x[0] * x[1] + sin(x[1]);
    return CR_OK;
}

/* Its gradient by differences, for the Hessian's columns. */
typedef struct fd_env {
    cr_fdm m;
    cr_arena *arena;
} fd_env;

static cr_status s_grad_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    fd_env *e = env;
    return cr_fd_jacobian(&e->m, NULL, s_fd, NULL, x, n, 1, e->arena, y, NULL);
}

static void test_second_order_entry(void **state)
{
    fixture *f = *state;
    cr_tape *t, *other;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &other), CR_OK);
    const double x0[2] = {0.6, 1.1}, v[2] = {1.0, -0.5};
    cr_var x[2];
    assert_ok(t, cr_tape_inputs(t, x0, 2, x));
    cr_var y = cr_add(t, cr_mul(t, cr_mul(t, x[0], x[0]), x[1]), cr_sin(t, x[1]));
    double hv[2], g[2], H[4];
    /* NULL buffers. */
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tape_hvp(t, y, NULL, 2, v, hv, g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_hvp: xs is NULL");
    assert_int_equal(cr_tape_hvp(t, y, x, 2, NULL, hv, g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_hvp: v is NULL");
    assert_int_equal(cr_tape_hvp(t, y, x, 2, v, NULL, g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_hvp: hv is NULL");
    /* cr_tape_hessian takes no direction: its messages name what it takes. */
    assert_int_equal(cr_tape_hessian(t, y, x, 2, NULL), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_hessian: H is NULL");
    assert_int_equal(cr_tape_hessian(t, y, NULL, 2, H), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_hessian: xs is NULL");
    assert_int_equal(cr_tape_hvp(NULL, y, x, 2, v, hv, g), CR_EINVAL);
    /* A constant output: zeros. */
    for (size_t j = 0; j < 2; j++)
        hv[j] = g[j] = H[j] = H[j + 2] = (double)NAN;
    assert_ok(t, cr_tape_hvp(t, cr_const(3.0), x, 2, v, hv, g));
    for (size_t j = 0; j < 2; j++) {
        ASSERT_DBL(hv[j], 0.0);
        ASSERT_DBL(g[j], 0.0);
    }
    hv[0] = (double)NAN;
    assert_ok(t, cr_tape_hvp(t, cr_const(3.0), x, 1, v, hv, NULL));
    ASSERT_DBL(hv[0], 0.0);
    assert_ok(t, cr_tape_hessian(t, cr_const(3.0), x, 2, H));
    for (size_t j = 0; j < 4; j++)
        ASSERT_DBL(H[j], 0.0);
    /* A failed tape gives its failure. */
    fail_tape(t, other);
    assert_int_equal(cr_tape_hvp(t, y, x, 2, v, hv, g), CR_ETAPE);
    assert_int_equal(cr_tape_hessian(t, y, x, 2, H), CR_ETAPE);
    /* Cleared: H v and the gradient against differences. */
    cr_tape_clear_error(t);
    assert_ok(t, cr_tape_hvp(t, y, x, 2, v, hv, g));
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    double fg[2], fH[4];
    assert_int_equal(cr_fd_jacobian(&m, NULL, s_fd, NULL, x0, 2, 1, f->arena, fg, NULL), CR_OK);
    fd_env e = {.arena = f->arena};
    assert_int_equal(cr_fdm_central(5, 1, &e.m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, s_grad_fd, &e, x0, 2, 2, f->arena, fH, NULL), CR_OK);
    for (size_t j = 0; j < 2; j++) {
        assert_close(g[j], fg[j], FD_RTOL);
        assert_close(hv[j], fH[2 * j] * v[0] + fH[2 * j + 1] * v[1], 1e-6);
    }
    cr_tape_free(other);
    cr_tape_free(t);
}

/* A function whose output belongs to another tape. */
static cr_status elsewhere(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    cr_tape *other = env;
    (void)cr_sin(t, x[0]);
    y[0] = cr_tape_input(other, 1.0);
    return cr_tape_status(t);
}

static cr_status sin_times_x(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, cr_sin(t, x[0]), x[0]);
    return cr_tape_status(t);
}

static void test_value_and_gradient_entry(void **state)
{
    fixture *f = *state;
    cr_tape *t, *other;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &other), CR_OK);
    double x = 0.9, y, g;
    assert_int_equal(cr_tape_value_and_gradient(NULL, sin_times_x, NULL, &x, 1, &y, &g), CR_EINVAL);
    assert_int_equal(cr_tape_value_and_gradient(t, sin_times_x, NULL, &x, 1, &y, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_value_and_gradient: grad is NULL");
    assert_int_equal(cr_tape_value_and_gradient(t, NULL, NULL, &x, 1, &y, &g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_value_and_gradient: f is NULL");
    assert_int_equal(cr_tape_value_and_gradient(t, sin_times_x, NULL, NULL, 1, &y, &g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_value_and_gradient: x is NULL");
    g = -7.0;
    assert_int_equal(cr_tape_value_and_gradient(t, elsewhere, other, &x, 1, &y, &g), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_value_and_gradient: output 0 (variable 0)");
    assert_close(g, -7.0, 0);
    assert_ok(t, cr_tape_value_and_gradient(t, sin_times_x, NULL, &x, 1, &y, &g));
    assert_close(y, sin(0.9) * 0.9, 1e-15);
    assert_close(g, fd1(sin_c, 0.9), FD_RTOL);
    cr_tape_free(other);
    cr_tape_free(t);
}

static int run_sweep_edges(void)
{
    const struct CMUnitTest sweep_edges[] = {
        cmocka_unit_test_setup_teardown(test_rrule_nine_arguments, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_forward_pullback_failure, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_zero_cotangent_skips_pullback, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_jacobian_entry, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_jvp_entry, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_second_order_entry, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_value_and_gradient_entry, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(sweep_edges, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_kept_workspace();
    failed += run_sweep_edges();
    return failed;
}
