/*
 * Tests of the reverse tape: gradients, vector-Jacobian products and Jacobians of functions
 * recorded through the rules, checked against central finite differences of the same
 * functions computed in plain C (or against the hand-derived gradient of the test function:
 * Rosenbrock's). Also: constants, repeated operands, multi-output rows, the thread's
 * current tape, sticky errors, variables of another tape or of an earlier recording,
 * non-finite seeds, reset and reuse without allocation, fixed buffers, and fault injection.
 */
#include <math.h>
#include <stdio.h>

#include <chainrules/tape_inline.h>

#include "test_rosen.h"
#include "test_util.h"
#include <stddef.h>

#define FD_RTOL 1e-8

/* ---- Functions under test, in plain C and against the tape ------------------------------ */

static double foo_c(double x)
{
    return asin(0.2 + sin(x));
}

static cr_status foo_fd(double x, double *y, void *env)
{
    (void)env;
    *y = foo_c(x);
    return CR_OK;
}

static cr_var foo_t(cr_tape *t, cr_var x)
{
    return cr_asin(t, cr_add(t, cr_const(0.2), cr_sin(t, x)));
}

/* g(x) = exp(x0) * log(x1) / sqrt(x0 + x1) - cos(x0 * x1) + x0 * x0 - (x1 - x1) */
static double g_c(const double *x)
{
    return exp(x[0]) * log(x[1]) / sqrt(x[0] + x[1]) - cos(x[0] * x[1]) + x[0] * x[0] -
           (x[1] - x[1]);
}

static cr_status g_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = g_c(x);
    return CR_OK;
}

static cr_status g_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a =
        cr_div(t, cr_mul(t, cr_exp(t, x[0]), cr_log(t, x[1])), cr_sqrt(t, cr_add(t, x[0], x[1])));
    cr_var b = cr_cos(t, cr_mul(t, x[0], x[1]));
    y[0] = cr_sub(t, cr_add(t, cr_sub(t, a, b), cr_mul(t, x[0], x[0])), cr_sub(t, x[1], x[1]));
    return cr_tape_status(t);
}

/* h: R^2 -> R^3, h = (x0 * x1, sin(x0) + x1, exp(x1) / x0) */
static cr_status h_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = x[0] * x[1];
    y[1] = sin(x[0]) + x[1];
    y[2] = exp(x[1]) / x[0];
    return CR_OK;
}

static void h_t(cr_tape *t, const cr_var *x, cr_var *y)
{
    y[0] = cr_mul(t, x[0], x[1]);
    y[1] = cr_add(t, cr_sin(t, x[0]), x[1]);
    y[2] = cr_div(t, cr_exp(t, x[1]), x[0]);
}

/* ---- Tests ------------------------------------------------------------------------------- */

static void test_foo_gradient(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    const double xs[] = {3.0, -0.7, 0.1, 2.6};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        cr_tape_reset(t);
        cr_var x = cr_tape_input(t, xs[i]);
        cr_var y = foo_t(t, x);
        assert_close(y.v, foo_c(xs[i]), 1e-15);
        double dx, fd;
        assert_int_equal(cr_tape_gradient(t, y, &x, 1, &dx), CR_OK);
        assert_int_equal(cr_fd_derivative(&m, NULL, foo_fd, NULL, xs[i], &fd, NULL), CR_OK);
        assert_close(dx, fd, FD_RTOL);
    }
    cr_tape_free(t);
}

static void test_gradient_fd(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    const double pts[][2] = {{0.5, 1.5}, {1.2, 0.3}, {-0.2, 2.5}};
    for (size_t i = 0; i < 3; i++) {
        double y, grad[2], fd[2];
        assert_int_equal(cr_tape_value_and_gradient(t, g_t, NULL, pts[i], 2, &y, grad), CR_OK);
        assert_close(y, g_c(pts[i]), 1e-14);
        assert_int_equal(cr_fd_jacobian(&m, NULL, g_fd, NULL, pts[i], 2, 1, f->arena, fd, NULL),
                         CR_OK);
        assert_close(grad[0], fd[0], FD_RTOL);
        assert_close(grad[1], fd[1], FD_RTOL);
    }
    cr_tape_free(t);
}

static void test_rosenbrock(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    enum { N = 50 };
    double x[N], g[N], want[N], y;
    for (size_t i = 0; i < N; i++)
        x[i] = 0.3 + 0.9 * sin(1.7 * (double)i);
    assert_int_equal(cr_tape_value_and_gradient(t, rosen_t, NULL, x, N, &y, g), CR_OK);
    rosen_grad(x, N, want);
    for (size_t i = 0; i < N; i++)
        assert_close(g[i], want[i], 1e-13);
    cr_tape_free(t);
}

static void test_jacobian_vjp(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    const double x0[2] = {0.7, -0.4};
    cr_var x[2], y[3];
    assert_int_equal(cr_tape_inputs(t, x0, 2, x), CR_OK);
    h_t(t, x, y);
    double J[6], fd[6];
    assert_int_equal(cr_tape_jacobian(t, y, 3, x, 2, J), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, h_fd, NULL, x0, 2, 3, f->arena, fd, NULL), CR_OK);
    for (size_t i = 0; i < 6; i++)
        assert_close(J[i], fd[i], FD_RTOL);
    /* vjp = ybar^T J */
    const double ybar[3] = {0.5, -2.0, 1.25};
    double xbar[2];
    assert_int_equal(cr_tape_vjp(t, y, ybar, 3, x, 2, xbar), CR_OK);
    for (size_t j = 0; j < 2; j++)
        assert_close(xbar[j], ybar[0] * J[j] + ybar[1] * J[2 + j] + ybar[2] * J[4 + j], 1e-14);
    /* The same output twice in a vjp adds the seeds. */
    cr_var yy[2] = {y[0], y[0]};
    const double s2[2] = {1.0, 2.0};
    assert_int_equal(cr_tape_vjp(t, yy, s2, 2, x, 2, xbar), CR_OK);
    assert_close(xbar[0], 3.0 * J[0], 1e-14);
    cr_tape_free(t);
}

static void test_constants_and_repeats(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var c = cr_mul(t, cr_const(3.0), cr_sin(t, cr_const(0.5)));
    assert_true(cr_var_is_const(c));
    assert_close(c.v, 3.0 * sin(0.5), 1e-15);
    cr_tape_stats st;
    assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
    assert_int_equal(st.nrecords, 0); /* constants record nothing */

    cr_var x = cr_tape_input(t, 1.5);
    cr_var sq = cr_mul(t, x, x); /* x * x: one operand used twice */
    cr_var z = cr_sub(t, x, x);  /* x - x = 0 */
    cr_var y = cr_add(t, cr_mul(t, sq, c), z);
    double g[2];
    cr_var xs[2] = {x, c};
    assert_int_equal(cr_tape_gradient(t, y, xs, 2, g), CR_OK);
    assert_close(g[0], 2.0 * 1.5 * 3.0 * sin(0.5), 1e-14);
    assert_true(g[1] == 0.0); /* a constant gets 0 */
    /* The gradient of a constant output is zero everywhere. */
    assert_int_equal(cr_tape_gradient(t, c, &x, 1, g), CR_OK);
    assert_true(g[0] == 0.0);
    /* Gradient with respect to an intermediate variable: d y / d sq = c. */
    assert_int_equal(cr_tape_gradient(t, y, &sq, 1, g), CR_OK);
    assert_close(g[0], c.v, 1e-15);
    /* A variable recorded after the output does not influence it. */
    cr_var late = cr_sin(t, x);
    assert_int_equal(cr_tape_gradient(t, y, &late, 1, g), CR_OK);
    assert_true(g[0] == 0.0);
    cr_tape_free(t);
}

/* sincos through the generic call: a row with two results. */
static void test_call_row_tuple(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 0.8), sc[2];
    assert_int_equal(cr_tape_call(t, &cr_fn_sincos, &x, 1, sc, 2), CR_OK);
    assert_close(sc[0].v, sin(0.8), 1e-15);
    assert_close(sc[1].v, cos(0.8), 1e-15);
    cr_var y = cr_mul(t, sc[0], sc[1]); /* sin x cos x = sin(2x) / 2 */
    double g;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    assert_close(g, cos(1.6), 1e-14);
    /* Wrong number of results. */
    cr_var one;
    assert_int_equal(cr_tape_call(t, &cr_fn_sincos, &x, 1, &one, 1), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "2 results");
    cr_tape_free(t);
}

static void test_current_tape(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_null(cr_tape_current());
    /* Without a current tape, NULL gives NaN and nothing happens. */
    assert_true(isnan(cr_sin(NULL, cr_const(1.0)).v));
    assert_null(cr_tape_set_current(t));
    assert_ptr_equal(cr_tape_current(), t);
    cr_var x = cr_tape_input(NULL, 3.0);
    cr_var y = foo_t(NULL, x);
    double dx;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &dx), CR_OK);
    double s = 0.2 + sin(3.0);
    assert_close(dx, cos(3.0) / sqrt(1 - s * s), 1e-14); /* the chain rule by hand */
    assert_ptr_equal(cr_tape_set_current(NULL), t);
    cr_tape_set_current(t);
    cr_tape_free(t); /* freeing the current tape unsets it */
    assert_null(cr_tape_current());
}

static void test_foreign_and_sticky(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    cr_var x = cr_tape_input(t, 1.0);
    cr_var w = cr_tape_input(u, 2.0);
    cr_var y = cr_sin(t, x);
    /* A sweep given a foreign variable fails without failing the tape. */
    double g;
    assert_int_equal(cr_tape_gradient(t, y, &w, 1, &g), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "another tape");
    assert_int_equal(cr_tape_status(t), CR_OK);
    /* An operation on a foreign variable fails the tape: sticky. */
    cr_var bad = cr_mul(t, x, w);
    assert_true(isnan(bad.v));
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "*: variable");
    assert_contains(cr_tape_errmsg(t), "another tape");
    /* Every later operation gives NaN and records nothing; the sweep reports the failure. */
    cr_tape_stats before, after;
    cr_tape_stats_get(t, &before);
    cr_var z = cr_exp(t, cr_add(t, x, cr_const(1.0)));
    assert_true(isnan(z.v));
    assert_true(isnan(cr_tape_input(t, 1.0).v));
    cr_tape_stats_get(t, &after);
    assert_int_equal(before.nrecords, after.nrecords);
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_ETAPE);
    /* Clearing the error keeps what was recorded before the failure. */
    cr_tape_clear_error(t);
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    assert_close(g, cos(1.0), 1e-15);
    /* After a reset, variables of the old recording are foreign. */
    cr_tape_reset(t);
    assert_int_equal(cr_tape_status(t), CR_OK);
    cr_var x2 = cr_tape_input(t, 1.0);
    cr_var stale = cr_add(t, x2, x);
    assert_true(isnan(stale.v));
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "before its last reset");
    cr_tape_free(t);
    cr_tape_free(u);
}

static void test_nonfinite_seed(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 0.5), y = cr_exp(t, x);
    double seeds[] = {(double)NAN, (double)INFINITY, -(double)INFINITY}, g = 42.0;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(cr_tape_vjp(t, &y, &seeds[i], 1, &x, 1, &g), CR_EDOMAIN);
        assert_contains(cr_ctx_errmsg(f->ctx), "seed 0");
        assert_contains(cr_ctx_errmsg(f->ctx), "not a finite number");
    }
    assert_true(g == 42.0); /* nothing written */
    assert_int_equal(cr_tape_status(t), CR_OK);
    /* NULL arguments */
    assert_int_equal(cr_tape_vjp(t, &y, NULL, 1, &x, 1, &g), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_vjp: ybar is NULL");
    assert_int_equal(cr_tape_vjp(t, NULL, &g, 1, &x, 1, &g), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_vjp: ys is NULL");
    assert_int_equal(cr_tape_vjp(t, &y, &g, 1, NULL, 1, &g), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_vjp: xs is NULL");
    assert_int_equal(cr_tape_vjp(t, &y, &g, 1, &x, 1, NULL), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_vjp: xbar is NULL");
    /* cr_tape_gradient names itself, not the vjp it is made of */
    assert_int_equal(cr_tape_gradient(t, y, NULL, 1, &g), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_gradient: xs is NULL");
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, NULL), CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_gradient: grad is NULL");
    assert_true(g == 42.0);
    assert_int_equal(cr_tape_gradient(NULL, y, &x, 1, &g), CR_EINVAL);
    cr_tape_free(t);
}

/* A function with neither a rule nor an implementation the engine can record. */
static cr_status opaque_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(args[0].u.f64 * args[1].u.f64);
    return CR_OK;
}
static const cr_function opaque_fn = {.name = "opaque", .arity = 2, .primal = opaque_primal};

static void test_no_rule(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_value fv = cr_value_function(&opaque_fn, NULL);
    cr_var args[2] = {cr_tape_input(t, 2.0), cr_const(3.0)};
    cr_var y = cr_tape_call1(t, &fv, args, 2);
    assert_true(isnan(y.v));
    assert_int_equal(cr_tape_status(t), CR_ENORULE);
    assert_contains(cr_tape_errmsg(t), "opaque(f64, f64)");
    assert_contains(cr_tape_errmsg(t), "no rrule");
    assert_contains(cr_ctx_errmsg(f->ctx), "opaque(f64, f64)");
    /* With constant arguments only, the primal is called: no derivative is needed. */
    cr_tape_reset(t);
    cr_var c2[2] = {cr_const(2.0), cr_const(3.0)};
    y = cr_tape_call1(t, &fv, c2, 2);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_true(cr_var_is_const(y));
    assert_close(y.v, 6.0, 0);
    /* A value that is not a function */
    cr_value notf = cr_value_f64(1.0);
    assert_int_equal(cr_tape_call(t, &notf, c2, 2, &y, 1), CR_EINVAL);
    cr_tape_free(t);
}

/* ---- Allocation counting and fault injection --------------------------------------------- */

typedef struct counter {
    size_t allocs, frees, live, fail_at;
    size_t live_bytes;
} counter;

static void *counting_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    counter *c = env;
    if (new_size == 0) {
        if (ptr != NULL) {
            c->frees++;
            c->live--;
            c->live_bytes -= old_size;
        }
        free(ptr);
        return NULL;
    }
    c->allocs++;
    if (c->fail_at != 0 && c->allocs == c->fail_at)
        return NULL;
    void *p = realloc(ptr, new_size);
    if (p != NULL && ptr == NULL) {
        c->live++;
        c->live_bytes += new_size;
    } else if (p != NULL) {
        c->live_bytes += new_size - old_size;
    }
    return p;
}

static void test_reset_reuse_no_growth(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params p = {.struct_size = sizeof p, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&p, &ctx), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    enum { N = 20000 }; /* several chunks and arena blocks */
    double *x = malloc(N * sizeof *x), *g = malloc(N * sizeof *g), *want = malloc(N * sizeof *want);
    assert_non_null(x);
    assert_non_null(g);
    assert_non_null(want);
    for (size_t i = 0; i < N; i++)
        x[i] = cos((double)i);
    double y;
    assert_int_equal(cr_tape_value_and_gradient(t, rosen_t, NULL, x, N, &y, g), CR_OK);
    size_t allocs = c.allocs;
    size_t cap = cr_arena_capacity(cr_tape_arena(t));
    for (int round = 0; round < 3; round++) {
        x[round] += 0.1;
        assert_int_equal(cr_tape_value_and_gradient(t, rosen_t, NULL, x, N, &y, g), CR_OK);
        rosen_grad(x, N, want);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], want[i], 1e-13);
    }
    assert_int_equal(c.allocs, allocs); /* the memory of the first recording is reused */
    assert_int_equal(cr_arena_capacity(cr_tape_arena(t)), cap);
    cr_tape_stats st;
    assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
    assert_int_equal(st.ninputs, N);
    /* Rosenbrock's loop: 8 operations per term; 20 bytes per operation is the budget. */
    assert_true((double)st.record_bytes / (double)st.nrecords <= 20.0);
    cr_tape_free(t);
    assert_int_equal(c.live, 1); /* the context itself */
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
    free(x);
    free(g);
    free(want);
}

/* The records of a small recording go to the tape's own first chunk: they take nothing
 * from the arena, also after a recording that needed more chunks and a reset. */
static void test_first_chunk_reused(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    enum { N = 3000 }; /* 8 operations per term: several chunks */
    static double x[N], g[N], want[N];
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5 + 0.01 * (double)i;
    for (int round = 0; round < 3; round++) {
        size_t n = round == 1 ? N : 20;
        cr_tape_reset(t);
        cr_var xs[20], y;
        if (n == N) {
            double yv;
            assert_int_equal(cr_tape_value_and_gradient(t, rosen_t, NULL, x, N, &yv, g), CR_OK);
            assert_true(cr_arena_used(cr_tape_arena(t)) > 0); /* later chunks */
        } else {
            cr_tape_inputs(t, x, n, xs);
            assert_int_equal(rosen_t(t, xs, n, &y, 1, NULL), CR_OK);
            assert_int_equal(cr_arena_used(cr_tape_arena(t)), 0);
            assert_int_equal(cr_tape_gradient(t, y, xs, n, g), CR_OK);
        }
        rosen_grad(x, n, want);
        for (size_t i = 0; i < n; i++)
            assert_close(g[i], want[i], 1e-13);
    }
    cr_tape_free(t);
    cr_ctx_free(ctx);
}

static void test_fixed_buffer(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params p = {.struct_size = sizeof p, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&p, &ctx), CR_OK);
    static unsigned char buf[64 * 1024];
    cr_tape_params tp = {.struct_size = sizeof tp, .buffer = buf, .buffer_size = sizeof buf};
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    size_t allocs = c.allocs;
    enum { N = 200 };
    double x[N], g[N], want[N], y;
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5 + 0.01 * (double)i;
    assert_int_equal(cr_tape_value_and_gradient(t, rosen_t, NULL, x, N, &y, g), CR_OK);
    rosen_grad(x, N, want);
    for (size_t i = 0; i < N; i++)
        assert_close(g[i], want[i], 1e-13);
    assert_int_equal(c.allocs, allocs); /* nothing beyond the caller's buffer */
    cr_tape_free(t);

    /* A buffer too small: CR_EARENA, sticky, with a message. */
    static unsigned char small[2048];
    tp.buffer = small;
    tp.buffer_size = sizeof small;
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    assert_int_equal(cr_tape_value_and_gradient(t, rosen_t, NULL, x, N, &y, g), CR_EARENA);
    assert_int_equal(cr_tape_status(t), CR_EARENA);
    assert_contains(cr_tape_errmsg(t), "is full");
    /* The tape stays usable for a smaller function. */
    assert_int_equal(cr_tape_value_and_gradient(t, rosen_t, NULL, x, 3, &y, g), CR_OK);
    rosen_grad(x, 3, want);
    for (size_t i = 0; i < 3; i++)
        assert_close(g[i], want[i], 1e-13);
    cr_tape_free(t);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* Run the scenario with the N-th allocation failing, for N = 1, 2, ... until it passes:
 * every failure is CR_ENOMEM and nothing leaks. */
static void test_fault_injection(void **state)
{
    (void)state;
    bool passed = false;
    for (size_t n = 1; n < 200 && !passed; n++) {
        counter c = {.fail_at = n};
        cr_ctx *ctx;
        cr_ctx_params p = {
            .struct_size = sizeof p, .realloc_fn = counting_realloc, .alloc_env = &c};
        if (cr_ctx_new(&p, &ctx) != CR_OK) {
            assert_int_equal(c.live, 0);
            continue;
        }
        cr_tape *t = NULL;
        cr_status st = cr_tape_new(ctx, NULL, &t);
        if (st == CR_OK) {
            enum { N = 3000 };
            static double x[N], g[N];
            for (size_t i = 0; i < N; i++)
                x[i] = sin((double)i);
            double y;
            st = cr_tape_value_and_gradient(t, rosen_t, NULL, x, N, &y, g);
            if (st == CR_OK) {
                double want[N];
                rosen_grad(x, N, want);
                for (size_t i = 0; i < N; i++)
                    assert_close(g[i], want[i], 1e-13);
                passed = true;
            } else {
                assert_int_equal(st, CR_ENOMEM);
                assert_int_equal(cr_tape_status(t), CR_ENOMEM);
                /* Once memory is back, the same tape works. */
                c.fail_at = 0;
                assert_int_equal(cr_tape_value_and_gradient(t, rosen_t, NULL, x, 4, &y, g), CR_OK);
            }
        } else {
            assert_int_equal(st, CR_ENOMEM);
            assert_null(t);
        }
        cr_tape_free(t);
        cr_ctx_free(ctx);
        assert_int_equal(c.live, 0);
        assert_int_equal(c.live_bytes, 0);
    }
    assert_true(passed);
}

static int run_tape(void)
{
    const struct CMUnitTest tape[] = {
        cmocka_unit_test_setup_teardown(test_foo_gradient, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gradient_fd, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rosenbrock, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_jacobian_vjp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_constants_and_repeats, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_call_row_tuple, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_current_tape, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_foreign_and_sticky, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nonfinite_seed, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_no_rule, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_reset_reuse_no_growth),
        cmocka_unit_test(test_first_chunk_reused),
        cmocka_unit_test(test_fixed_buffer),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tape, NULL, NULL);
}

/*
 * Tests of the scalar tape's less travelled paths (src/ad/tape.c): cr_tape_new's refusals,
 * the accessors on NULL, the first failure winning, every comparison of cr_tape_cmp() (and
 * its records on the replay tape of a prepared gradient), cr_tape_inputs' errors, results
 * of rrules of every kind the scalar tape holds or refuses (f32, bool, structs with f32 or
 * integer fields, complex), cotangents of every kind a pullback may give (complex,
 * NotImplemented, structural), the zero-adjoint paths (a row with a registry, a primal that
 * fails, an overlay on constants, no primal at all), a row reached through a user
 * registry or opted out, rows called on constants, an ambiguous rrule, two-argument
 * operations with a foreign operand, and the argument checks of cr_tape_call() and
 * cr_tape_record(). Derivatives are checked against central differences of plain-C
 * versions of the same functions; every error against its status and a message naming the
 * function, and the tape is then reset and used again.
 */

#define FD_RTOL 1e-8

static double fd1(cr_fd_fn f, void *env, double x)
{
    cr_fdm m;
    double d = (double)NAN;
    if (cr_fdm_central(5, 1, &m) != CR_OK ||
        cr_fd_derivative(&m, NULL, f, env, x, &d, NULL) != CR_OK)
        return (double)NAN;
    return d;
}

static const cr_argspec k_f64_1[1] = {{CR_M_F64, NULL}};

static size_t nrecords(const cr_tape *t)
{
    cr_tape_stats s;
    assert_int_equal(cr_tape_stats_get(t, &s), CR_OK);
    return s.nrecords;
}

/* ---- A probe function: its rrule's result and its pullback's cotangent chosen by test ---- */

enum { R_F64, R_F32, R_BOOL, R_MIXED, R_INTFIELD, R_C128, R_ERR, R_SILENT };
enum { T_F64, T_C128, T_NOTIMPL, T_STRUCT };
static int g_res, g_tan;

typedef struct mixed {
    double a;
    float b;
} mixed;
static const cr_field mixed_fields[2] = {{"a", offsetof(mixed, a), CR_KIND_F64, NULL},
                                         {"b", offsetof(mixed, b), CR_KIND_F32, NULL}};
static const cr_type mixed_type = {"mixed", sizeof(mixed), 2, mixed_fields};

typedef struct counted {
    double a;
    int64_t n;
} counted;
static const cr_field counted_fields[2] = {{"a", offsetof(counted, a), CR_KIND_F64, NULL},
                                           {"n", offsetof(counted, n), CR_KIND_I64, NULL}};
static const cr_type counted_type = {"counted", sizeof(counted), 2, counted_fields};

static const cr_notimpl k_ni = {"probe.c", 7, "probe's derivative is not written"};

/* probe(x): x^2 as f64, f32 or the first field of a struct (whose second field is 3x);
 * x > 0 as a bool; x + i as a complex; or a failure. */
static cr_status probe_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)fv;
    (void)nargs;
    double x = args[0].u.f64;
    switch (g_res) {
    case R_F32:
        *out = cr_value_f32((float)(x * x));
        return CR_OK;
    case R_BOOL:
        *out = cr_value_bool(x > 0);
        return CR_OK;
    case R_MIXED: {
        mixed *m = cr_arena_alloc(arena, sizeof *m, _Alignof(mixed));
        if (m == NULL)
            return CR_ENOMEM;
        m->a = x * x;
        m->b = (float)(3 * x);
        *out = cr_value_struct(&mixed_type, m);
        return CR_OK;
    }
    case R_INTFIELD: {
        counted *c = cr_arena_alloc(arena, sizeof *c, _Alignof(counted));
        if (c == NULL)
            return CR_ENOMEM;
        c->a = x * x;
        c->n = 3;
        *out = cr_value_struct(&counted_type, c);
        return CR_OK;
    }
    case R_C128:
        *out = cr_value_c128(CMPLX(x, 1.0));
        return CR_OK;
    case R_ERR:
        return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "probe: %g is out of its domain", x);
    case R_SILENT:
        return CR_EDOMAIN; /* no message */
    default:
        *out = cr_value_f64(x * x);
        return CR_OK;
    }
}
static const cr_function probe_fn = {.name = "probe", .arity = 1, .primal = probe_primal};

static cr_status probe_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    (void)arena;
    double x = *(const double *)env, d;
    if (dy->tag == CR_TAN_STRUCT) { /* (x^2, 3x) */
        cr_tangent ta = cr_tangent_field(*dy, 0), tb = cr_tangent_field(*dy, 1);
        double ga = ta.tag == CR_TAN_F64 ? ta.u.f64 : 0.0,
               gb = tb.tag == CR_TAN_F64 ? tb.u.f64 : 0.0;
        d = ga * 2 * x + gb * 3;
    } else {
        d = dy->u.f64 * 2 * x;
    }
    dx[0] = cr_tangent_none();
    switch (g_tan) {
    case T_C128: /* a real argument takes the real part */
        dx[1] = cr_tangent_c128(CMPLX(d, 5.0));
        break;
    case T_NOTIMPL:
        dx[1] = cr_tangent_notimpl(&k_ni);
        break;
    case T_STRUCT:
        dx[1] = cr_tangent_struct_empty(&mixed_type);
        break;
    default:
        dx[1] = cr_tangent_f64(d);
        break;
    }
    return CR_OK;
}

static cr_status probe_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)udata;
    double *e = cr_arena_alloc(arena, sizeof *e, _Alignof(double));
    if (e == NULL)
        return CR_ENOMEM;
    *e = args[0].u.f64;
    *pb = (cr_pullback){probe_pullback, e, "probe_pullback", 2};
    return probe_primal(arena, fv, args, nargs, y);
}

static cr_engine *probe_engine(cr_ctx *ctx)
{
    cr_engine *eng;
    assert_int_equal(cr_engine_new(ctx, NULL, &eng), CR_OK);
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &probe_fn,
                       .nargs = 1,
                       .args = k_f64_1,
                       .rrule = probe_rrule};
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

/* Plain-C functions for the differences. */
static cr_status sin_sq(double x, double *y, void *env)
{
    (void)env;
    *y = sin(x * x);
    return CR_OK;
}

static cr_status sq(double x, double *y, void *env)
{
    (void)env;
    *y = x * x;
    return CR_OK;
}

static cr_status sq_times_3x(double x, double *y, void *env)
{
    (void)env;
    *y = (x * x) * (3 * x) + x * x;
    return CR_OK;
}

static cr_status sin_c(double x, double *y, void *env)
{
    (void)env;
    *y = sin(x) * x;
    return CR_OK;
}

static cr_status lin_sin(double x, double *y, void *env)
{
    (void)env;
    *y = 3.25 * x + sin(x);
    return CR_OK;
}

static cr_status scaled_sin(double x, double *y, void *env)
{
    (void)env;
    *y = (sin(0.6) * -3.0) * sin(x);
    return CR_OK;
}

/* ---- Creation and accessors --------------------------------------------------------------- */

static void test_new_refusals(void **state)
{
    fixture *f = *state;
    cr_tape *t = (cr_tape *)1;
    assert_int_equal(cr_tape_new(f->ctx, NULL, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_new: out is NULL");
    assert_int_equal(cr_tape_new(NULL, NULL, &t), CR_EINVAL);
    assert_null(t);
    cr_tape_params p = {.struct_size = sizeof p + 8};
    t = (cr_tape *)1;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_EINVAL);
    assert_null(t);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_new: unknown struct_size");
    /* A size that cuts the struct (here inside flags) is refused too, not read in part:
     * the second-order flag would be dropped silently. */
    const uint32_t cuts[3] = {1, 6, (uint32_t)sizeof p - 1};
    for (size_t i = 0; i < 3; i++) {
        cr_tape_params q = {.struct_size = cuts[i], .flags = CR_TAPE_SECOND_ORDER};
        t = (cr_tape *)1;
        assert_int_equal(cr_tape_new(f->ctx, &q, &t), CR_EINVAL);
        assert_null(t);
        assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_new: unknown struct_size");
    }
    p.struct_size = sizeof p;
    p.flags = 8u;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_new: unknown flags 0x8");
    /* The same parameters with known flags make a tape. */
    p.flags = CR_TAPE_FORWARD;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    cr_var x = cr_tape_input(t, 0.4), y = cr_mul(t, cr_sin(t, x), x);
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(sin_c, NULL, 0.4), FD_RTOL);
    cr_tape_free(t);
}

static void test_accessors(void **state)
{
    fixture *f = *state;
    /* NULL tapes: no effect, no crash. */
    cr_tape_clear_error(NULL);
    cr_tape_reset(NULL);
    cr_tape_free(NULL);
    assert_null(cr_tape_ctx(NULL));
    assert_null(cr_tape_arena(NULL));
    assert_ptr_equal(cr_tape_config(NULL), cr_engine_config(NULL));
    assert_int_equal(cr_tape_status(NULL), CR_EINVAL);
    assert_string_equal(cr_tape_errmsg(NULL), "");
    cr_tape_stats s;
    assert_int_equal(cr_tape_stats_get(NULL, &s), CR_EINVAL);

    cr_engine *eng = probe_engine(f->ctx);
    cr_tape *t = tape_with(f->ctx, eng, 0);
    assert_ptr_equal(cr_tape_ctx(t), f->ctx);
    assert_ptr_equal(cr_tape_config(t), cr_engine_config(eng));
    assert_ptr_not_equal(cr_tape_config(t), cr_engine_config(NULL));
    assert_int_equal(cr_tape_stats_get(t, NULL), CR_EINVAL);

    /* cr_tape_node_overhead: the bytes of a two-operand operation on a first-order tape. */
    cr_var a = cr_tape_input(t, 1.5), b = cr_tape_input(t, 2.5);
    cr_tape_stats before, after;
    assert_int_equal(cr_tape_stats_get(t, &before), CR_OK);
    cr_var c = (cr_mul)(t, a, b);
    assert_int_equal(cr_tape_stats_get(t, &after), CR_OK);
    assert_int_equal(after.record_bytes - before.record_bytes, cr_tape_node_overhead());
    assert_int_equal(after.nrecords, before.nrecords + 1);
    assert_close(c.v, 3.75, 0);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- Errors ------------------------------------------------------------------------------- */

static void test_first_failure_wins(void **state)
{
    fixture *f = *state;
    cr_tape *t, *other;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &other), CR_OK);
    cr_var z = cr_tape_input(other, 0.5);
    cr_var x = cr_tape_input(t, 0.5);
    /* A variable of another tape in a one-argument operation (the slow path). */
    cr_var s = cr_sin(t, z);
    assert_true(cr_var_is_const(s) && isnan(s.v));
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "sin: variable 0 belongs to another tape");
    /* A later failure does not replace the first. */
    cr_var in[2];
    assert_int_equal(cr_tape_inputs(t, NULL, 2, in), CR_ETAPE);
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "sin: variable 0");
    /* After a reset, the same NULL is the failure. */
    cr_tape_reset(t);
    assert_int_equal(cr_tape_inputs(t, NULL, 2, in), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "cr_tape_inputs: NULL x or out");
    const double xs[2] = {0.3, 0.9};
    assert_int_equal(cr_tape_inputs(t, xs, 2, NULL), CR_EINVAL);
    /* No tape and no current tape. */
    assert_null(cr_tape_current());
    assert_int_equal(cr_tape_inputs(NULL, xs, 2, in), CR_EMISUSE);
    /* Cleared, the tape records again; and the current tape is used when given NULL. */
    cr_tape_clear_error(t);
    cr_tape *old = cr_tape_set_current(t);
    assert_int_equal(cr_tape_inputs(NULL, xs, 2, in), CR_OK);
    cr_tape_set_current(old);
    x = in[0];
    cr_var y = cr_mul(t, cr_sin(t, x), x);
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(sin_c, NULL, 0.3), FD_RTOL);
    cr_tape_free(other);
    cr_tape_free(t);
}

/* ---- Comparisons ---------------------------------------------------------------------------- */

static void test_cmp_all(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var a = cr_tape_input(t, 1.0), b = cr_tape_input(t, 2.0), c = cr_const(1.0);
    static const struct {
        cr_cmp op;
        bool ab, ba, ac;
    } k[] = {{CR_CMP_LT, true, false, false}, {CR_CMP_LE, true, false, true},
             {CR_CMP_GT, false, true, false}, {CR_CMP_GE, false, true, true},
             {CR_CMP_EQ, false, false, true}, {CR_CMP_NE, true, true, false}};
    size_t n0 = nrecords(t);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        assert_int_equal(cr_tape_cmp(t, a, k[i].op, b), k[i].ab);
        assert_int_equal(cr_tape_cmp(t, b, k[i].op, a), k[i].ba);
        assert_int_equal(cr_tape_cmp(t, a, k[i].op, c), k[i].ac);
        assert_int_equal(cr_tape_cmp(NULL, a, k[i].op, c), k[i].ac); /* no tape at all */
    }
    assert_int_equal(nrecords(t), n0); /* an ordinary tape keeps no comparison */
    assert_int_equal(cr_tape_status(t), CR_OK);
    cr_tape_free(t);
}

/* f(x) = x0 >= x1 ? u x0 : u + x1 with u = sin(x0) x1, with a comparison of constants too. */
typedef struct branch_env {
    cr_tape *other; /* when set: compare with a variable of this tape */
    int side;       /* which operand is the other tape's */
    double inner[2];
    bool inner_ok;
} branch_env;

static cr_status branch_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    branch_env *e = env;
    if (e != NULL && e->other != NULL) {
        cr_var z = cr_tape_input(e->other, 1.0);
        (void)(e->side == 0 ? cr_tape_cmp(t, z, CR_CMP_LT, x[0])
                            : cr_tape_cmp(t, x[0], CR_CMP_LT, z));
        y[0] = x[0];
        return cr_tape_status(t);
    }
    bool c = cr_tape_cmp(t, cr_const(1.0), CR_CMP_EQ, cr_const(1.0));
    cr_var u = cr_mul(t, cr_sin(t, x[0]), x[1]); /* recorded before the comparison */
    if (cr_tape_cmp(t, x[0], CR_CMP_GE, x[1]))
        y[0] = cr_mul(t, u, x[0]);
    else
        y[0] = cr_add(t, u, x[1]);
    if (!c)
        y[0] = cr_neg(t, y[0]);
    if (e != NULL) /* the gradient of the recording so far, taken while recording */
        e->inner_ok = cr_tape_gradient(t, y[0], x, 2, e->inner) == CR_OK;
    return cr_tape_status(t);
}

static cr_status branch_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    double u = sin(x[0]) * x[1];
    y[0] = x[0] >= x[1] ? u * x[0] : u + x[1];
    return CR_OK;
}

static void test_cmp_on_replay_tape(void **state)
{
    fixture *f = *state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    const double x0[2] = {2.0, 0.5}, x1[2] = {1.5, 0.7};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, branch_t, NULL, x0, 2, &p), CR_OK);
    double y, g[2], fd[2];
    assert_int_equal(cr_prepared_value_and_gradient(p, x1, 2, &y, g), CR_OK);
    assert_close(y, sin(1.5) * 0.7 * 1.5, 1e-15);
    assert_int_equal(cr_fd_jacobian(&m, NULL, branch_fd, NULL, x1, 2, 1, f->arena, fd, NULL),
                     CR_OK);
    assert_close(g[0], fd[0], FD_RTOL);
    assert_close(g[1], fd[1], FD_RTOL);
    /* A gradient taken inside the recording, on the replay tape (a comparison recorded). */
    branch_env in = {0};
    cr_prepared *q;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, branch_t, &in, x1, 2, &q), CR_OK);
    assert_true(in.inner_ok);
    assert_close(in.inner[0], fd[0], FD_RTOL);
    assert_close(in.inner[1], fd[1], FD_RTOL);
    cr_prepared_free(q);
    /* The other branch: the replay refuses. */
    const double x2[2] = {0.2, 0.7};
    assert_int_equal(cr_prepared_value_and_gradient(p, x2, 2, &y, g), CR_EDOMAIN);
    cr_prepared_free(p);

    /* A variable of another tape in a comparison, on either side. */
    cr_tape *other;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &other), CR_OK);
    for (int side = 0; side < 2; side++) {
        branch_env e = {.other = other, .side = side};
        cr_tape_reset(other);
        cr_ctx_clear_error(f->ctx);
        assert_int_equal(cr_prepare_gradient(f->ctx, NULL, branch_t, &e, x0, 2, &p), CR_ETAPE);
        assert_null(p);
        assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_cmp: variable 0 belongs to another tape");
    }
    cr_tape_free(other);
}

/* ---- Results and cotangents of rrules -------------------------------------------------------- */

static void test_rrule_result_kinds(void **state)
{
    fixture *f = *state;
    cr_engine *eng = probe_engine(f->ctx);
    cr_tape *t = tape_with(f->ctx, eng, 0);
    cr_value probe = cr_value_function(&probe_fn, NULL);
    g_tan = T_F64;

    /* f32: a variable holding the float's value. */
    g_res = R_F32;
    cr_var x = cr_tape_input(t, 1.5);
    cr_var p = cr_tape_call1(t, &probe, &x, 1);
    assert_false(cr_var_is_const(p));
    assert_close(p.v, 2.25, 0);
    cr_var y = cr_sin(t, p);
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(sin_sq, NULL, 1.5), FD_RTOL);

    /* bool: a constant. */
    g_res = R_BOOL;
    cr_var b = cr_tape_call1(t, &probe, &x, 1);
    assert_true(cr_var_is_const(b));
    assert_close(b.v, 1.0, 0);
    x.v = -1.0; /* the value is what the rule sees */
    b = cr_tape_call1(t, &probe, &x, 1);
    assert_true(cr_var_is_const(b));
    assert_close(b.v, 0.0, 0);
    assert_int_equal(cr_tape_status(t), CR_OK);

    /* A struct of an f64 and an f32: two variables. */
    cr_tape_reset(t);
    g_res = R_MIXED;
    x = cr_tape_input(t, 1.5);
    cr_var r[2];
    assert_ok(t, cr_tape_call(t, &probe, &x, 1, r, 2));
    assert_false(cr_var_is_const(r[1]));
    assert_close(r[0].v, 2.25, 0);
    assert_close(r[1].v, 4.5, 0);
    y = cr_add(t, cr_mul(t, r[0], r[1]), r[0]);
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(sq_times_3x, NULL, 1.5), FD_RTOL);

    /* Results the scalar tape cannot hold. */
    g_res = R_INTFIELD;
    assert_int_equal(cr_tape_call(t, &probe, &x, 1, r, 2), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "probe returns a counted whose field 1 is a");
    assert_true(isnan(r[0].v) && isnan(r[1].v));
    cr_tape_reset(t);
    x = cr_tape_input(t, 1.5);
    g_res = R_C128;
    assert_int_equal(cr_tape_call(t, &probe, &x, 1, r, 1), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "probe returns a");
    assert_contains(cr_tape_errmsg(t), "holds real results");
    /* One result where two are expected. */
    cr_tape_reset(t);
    x = cr_tape_input(t, 1.5);
    g_res = R_F64;
    assert_int_equal(cr_tape_call(t, &probe, &x, 1, r, 2), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "probe gives 1 result, 2 expected");
    /* The rule fails: its status and message. */
    cr_tape_reset(t);
    x = cr_tape_input(t, 1.5);
    g_res = R_ERR;
    assert_int_equal(cr_tape_call(t, &probe, &x, 1, r, 1), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "probe: 1.5 is out of its domain");
    assert_null(strstr(cr_tape_errmsg(t), "probe: probe:")); /* named once */

    /* A variable of another tape. */
    cr_tape *other;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &other), CR_OK);
    cr_tape_reset(t);
    g_res = R_F64;
    cr_var z = cr_tape_input(other, 1.5);
    assert_int_equal(cr_tape_call(t, &probe, &z, 1, r, 1), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "probe: variable 0 belongs to another tape");
    cr_tape_free(other);

    /* After a reset, the tape works again. */
    cr_tape_reset(t);
    x = cr_tape_input(t, 0.7);
    y = cr_sin(t, cr_tape_call1(t, &probe, &x, 1));
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(sin_sq, NULL, 0.7), FD_RTOL);
    cr_tape_free(t);
    cr_engine_free(eng);
}

static void test_pullback_cotangent_kinds(void **state)
{
    fixture *f = *state;
    cr_engine *eng = probe_engine(f->ctx);
    cr_tape *t = tape_with(f->ctx, eng, 0);
    cr_value probe = cr_value_function(&probe_fn, NULL);
    g_res = R_F64;

    /* A complex cotangent for a real argument: its real part. */
    g_tan = T_C128;
    cr_var x = cr_tape_input(t, 0.8);
    cr_var y = cr_tape_call1(t, &probe, &x, 1);
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(sq, NULL, 0.8), FD_RTOL);

    /* NotImplemented: CR_EUNIMPL naming the pullback, the function and the rule's note. */
    g_tan = T_NOTIMPL;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_EUNIMPL);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "pullback probe_pullback (of probe) failed");
    assert_contains(cr_tape_errmsg(t), "tangent is NotImplemented (probe.c:7: probe's derivative");

    /* A structural cotangent for a real argument. */
    cr_tape_reset(t);
    x = cr_tape_input(t, 0.8);
    y = cr_tape_call1(t, &probe, &x, 1);
    g_tan = T_STRUCT;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_ETANGENT);
    assert_contains(cr_tape_errmsg(t), "probe_pullback: expected a scalar tangent, got");

    /* The same recording after the error is cleared, with a plain cotangent. */
    cr_tape_clear_error(t);
    g_tan = T_F64;
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(sq, NULL, 0.8), FD_RTOL);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- Zero adjoint ------------------------------------------------------------------------- */

/* ovl(x...) = x0^2 + the other arguments, written against the tape; fails on demand. */
static cr_status ovl_impl(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    if (env != NULL && *(const int *)env != 0)
        return CR_EDOMAIN;
    cr_var s = cr_mul(t, x[0], x[0]);
    for (size_t j = 1; j < n; j++)
        s = cr_add(t, s, x[j]);
    y[0] = s;
    return cr_tape_status(t);
}
static const cr_function ovl_fn = {.name = "ovl", .arity = -1};
static const cr_function bare_fn = {.name = "bare", .arity = 1};

static void test_zero_adjoint_paths(void **state)
{
    fixture *f = *state;
    cr_engine *eng = probe_engine(f->ctx);
    assert_int_equal(cr_engine_zero_adjoint(eng, &probe_fn), CR_OK);
    int fail = 0;
    assert_int_equal(cr_engine_overlay(eng, &ovl_fn, ovl_impl, 1, &fail), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(eng, &ovl_fn), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(eng, &bare_fn), CR_OK);
    cr_tape *t = tape_with(f->ctx, eng, 0);
    cr_value probe = cr_value_function(&probe_fn, NULL), ovl = cr_value_function(&ovl_fn, NULL),
             bare = cr_value_function(&bare_fn, NULL);

    /* The primal gives constants, a struct's f32 field among them; nothing is recorded. */
    g_res = R_MIXED;
    cr_var x = cr_tape_input(t, 1.5), r[2];
    size_t n0 = nrecords(t);
    assert_ok(t, cr_tape_call(t, &probe, &x, 1, r, 2));
    assert_true(cr_var_is_const(r[0]) && cr_var_is_const(r[1]));
    assert_close(r[0].v, 2.25, 0);
    assert_close(r[1].v, 4.5, 0);
    assert_int_equal(nrecords(t), n0);
    /* A result the tape cannot hold; a primal failing without a message. */
    g_res = R_C128;
    assert_int_equal(cr_tape_call(t, &probe, &x, 1, r, 1), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "probe returns a");
    cr_tape_reset(t);
    x = cr_tape_input(t, 1.5);
    g_res = R_SILENT;
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tape_call(t, &probe, &x, 1, r, 1), CR_EDOMAIN);
    char want[128];
    snprintf(want, sizeof want, "probe: %s", cr_status_str(CR_EDOMAIN));
    assert_string_equal(cr_tape_errmsg(t), want);

    /* A zero-adjoint overlay without primal: run on constants, recording nothing. */
    cr_tape_reset(t);
    x = cr_tape_input(t, 1.5);
    n0 = nrecords(t);
    cr_var args[17];
    for (size_t j = 0; j < 17; j++)
        args[j] = j == 0 ? x : cr_const((double)j);
    cr_var o = cr_tape_call1(t, &ovl, args, 2);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_true(cr_var_is_const(o));
    assert_close(o.v, 2.25 + 1.0, 0);
    assert_int_equal(nrecords(t), n0);
    cr_var y = cr_add(t, cr_mul(t, o, x), cr_sin(t, x)); /* o is a constant: 3.25 x + sin x */
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(lin_sin, NULL, 1.5), FD_RTOL);
    /* Its refusals: too many arguments, the wrong number of results, a failure. */
    assert_int_equal(cr_tape_call(t, &ovl, args, 17, r, 1), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "ovl: too many arguments");
    cr_tape_reset(t);
    args[0] = x = cr_tape_input(t, 1.5);
    assert_int_equal(cr_tape_call(t, &ovl, args, 2, r, 2), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "ovl gives 1 result, 2 expected");
    cr_tape_reset(t);
    args[0] = x = cr_tape_input(t, 1.5);
    fail = 1;
    assert_int_equal(cr_tape_call(t, &ovl, args, 2, r, 1), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "ovl (zero-adjoint overlay) failed");
    fail = 0;

    /* Zero-adjoint with nothing to call. */
    cr_tape_reset(t);
    x = cr_tape_input(t, 1.5);
    assert_int_equal(cr_tape_call(t, &bare, &x, 1, r, 1), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "bare is zero-adjoint but has no primal to call");

    /* The tape works again. */
    cr_tape_reset(t);
    args[0] = x = cr_tape_input(t, 2.0);
    o = cr_tape_call1(t, &ovl, args, 3);
    assert_close(o.v, 4.0 + 1.0 + 2.0, 0);
    assert_int_equal(cr_tape_status(t), CR_OK);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- Rows through a registry ------------------------------------------------------------------
 */

static void test_rows_with_registry(void **state)
{
    fixture *f = *state;
    /* A user registry (the probe's rule): rows are looked up through it. */
    cr_engine *eng = probe_engine(f->ctx);
    cr_tape *t = tape_with(f->ctx, eng, 0);
    cr_var x = cr_tape_input(t, 0.6);
    cr_var s = cr_tape_call1(t, &cr_fn_sin, &x, 1);
    assert_false(cr_var_is_const(s));
    double g;
    assert_ok(t, cr_tape_gradient(t, cr_mul(t, s, x), &x, 1, &g));
    assert_close(g, fd1(sin_c, NULL, 0.6), FD_RTOL);
    /* On constants: the row's value, a constant, nothing recorded. */
    size_t n0 = nrecords(t);
    cr_var c = cr_const(0.6), r[2];
    cr_var sc = cr_tape_call1(t, &cr_fn_sin, &c, 1);
    assert_true(cr_var_is_const(sc));
    assert_close(sc.v, sin(0.6), 0);
    assert_int_equal(nrecords(t), n0);
    assert_int_equal(cr_tape_call(t, &cr_fn_sin, &c, 1, r, 2), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "sin gives 1 result, 2 expected");
    cr_tape_free(t);

    /* The row itself, not its rrule's pullback: a second-order tape records it. */
    t = tape_with(f->ctx, eng, CR_TAPE_SECOND_ORDER);
    x = cr_tape_input(t, 0.6);
    cr_var y2 = cr_mul(t, cr_tape_call1(t, &cr_fn_sin, &x, 1), x);
    double one = 1.0, h, h_fd;
    assert_ok(t, cr_tape_hvp(t, y2, &x, 1, &one, &h, NULL));
    cr_fdm m2;
    assert_int_equal(cr_fdm_central(5, 2, &m2), CR_OK);
    assert_int_equal(cr_fd_derivative(&m2, NULL, sin_c, NULL, 0.6, &h_fd, NULL), CR_OK);
    assert_close(h, h_fd, 1e-6);
    cr_tape_free(t);
    cr_engine_free(eng);

    /* sin's rrule opted out: the row is still the function, and still differentiated. */
    cr_registry *reg;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    assert_int_equal(
        cr_registry_opt_out(reg, CR_MODE_RRULE, cr_fn_sin.u.func.fn, k_f64_1, 1, false, 0), CR_OK);
    assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
    t = tape_with(f->ctx, eng, 0);
    x = cr_tape_input(t, 0.6);
    s = cr_tape_call1(t, &cr_fn_sin, &x, 1);
    assert_false(cr_var_is_const(s));
    assert_ok(t, cr_tape_gradient(t, cr_mul(t, s, x), &x, 1, &g));
    assert_close(g, fd1(sin_c, NULL, 0.6), FD_RTOL);
    cr_tape_free(t);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/* amb(x, y): two rules, neither more specific at (f64, f64); their intersection is
 * registered only for a capability the tape's configuration lacks. */
static cr_status amb_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(args[0].u.f64 * args[1].u.f64);
    return CR_OK;
}
static const cr_function amb_fn = {.name = "amb", .arity = 2, .primal = amb_primal};

static cr_status amb_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)fv;
    (void)args;
    (void)nargs;
    (void)y;
    (void)pb;
    (void)udata;
    return CR_EUNIMPL; /* never called: the lookup is ambiguous */
}

static void test_ambiguous_rrule(void **state)
{
    fixture *f = *state;
    static const cr_argspec fr[2] = {{CR_M_F64, NULL}, {CR_M_F64 | CR_M_INT, NULL}};
    static const cr_argspec rf[2] = {{CR_M_F64 | CR_M_INT, NULL}, {CR_M_F64, NULL}};
    static const cr_argspec ff[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_registry *reg;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    cr_rule_def d1 = {
        .struct_size = sizeof d1, .fn = &amb_fn, .nargs = 2, .args = fr, .rrule = amb_rrule};
    cr_rule_def d0 = d1, d2 = d1;
    d0.args = ff;
    d0.caps = CR_CAP_MUTATION;
    d2.args = rf;
    assert_int_equal(cr_registry_add(reg, &d1), CR_OK);
    assert_int_equal(cr_registry_add(reg, &d0), CR_OK);
    assert_int_equal(cr_registry_add(reg, &d2), CR_OK);
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
    cr_tape *t = tape_with(f->ctx, eng, 0);
    cr_value amb = cr_value_function(&amb_fn, NULL);
    cr_var x[2] = {cr_tape_input(t, 2.0), cr_tape_input(t, 3.0)}, r;
    assert_int_equal(cr_tape_call(t, &amb, x, 2, &r, 1), CR_EMISUSE);
    assert_contains(cr_tape_errmsg(t), "rrule for amb(");
    assert_contains(cr_tape_errmsg(t), "is ambiguous: several rules match");
    assert_true(isnan(r.v));
    cr_tape_free(t);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/* ---- Argument checks of cr_tape_call and cr_tape_record -------------------------------------- */

static void test_call_refusals(void **state)
{
    fixture *f = *state;
    cr_tape *t, *other;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &other), CR_OK);
    cr_var x = cr_tape_input(t, 0.6), r[2];
    cr_var args[65];
    for (size_t j = 0; j < 65; j++)
        args[j] = x;

    assert_null(cr_tape_current());
    assert_int_equal(cr_tape_call(NULL, &cr_fn_sin, &x, 1, r, 1), CR_EMISUSE);
    assert_int_equal(cr_tape_status(t), CR_OK);

    assert_int_equal(cr_tape_call(t, &cr_fn_sin, args, 2, r, 1), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "sin takes 1 argument, 2 given");
    cr_tape_reset(t);
    x = cr_tape_input(t, 0.6);
    assert_int_equal(cr_tape_call(t, &cr_fn_sin, NULL, 1, r, 1), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "cr_tape_call(sin): NULL arguments or no results");
    cr_tape_clear_error(t);
    assert_int_equal(cr_tape_call(t, &cr_fn_sin, &x, 1, NULL, 1), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "cr_tape_call(sin): NULL arguments or no results");
    cr_tape_clear_error(t);
    assert_int_equal(cr_tape_call(t, &cr_fn_sin, &x, 1, r, 0), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "cr_tape_call(sin): NULL arguments or no results");
    cr_tape_clear_error(t);
    for (size_t j = 0; j < 65; j++)
        args[j] = x;
    assert_int_equal(cr_tape_call(t, &cr_fn_add, args, 65, r, 1), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "cr_tape_call(+): more than 64 arguments");
    cr_tape_clear_error(t);
    /* A variable of another tape, after a constant. */
    cr_var two[2] = {cr_const(1.0), cr_tape_input(other, 2.0)};
    assert_int_equal(cr_tape_call(t, &cr_fn_mul, two, 2, r, 1), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "*: variable 0 belongs to another tape");
    assert_true(isnan(r[0].v));

    /* The same tape, cleared, records the call. */
    cr_tape_clear_error(t);
    cr_var s = cr_tape_call1(t, &cr_fn_sin, &x, 1);
    double g;
    assert_ok(t, cr_tape_gradient(t, cr_mul(t, s, x), &x, 1, &g));
    assert_close(g, fd1(sin_c, NULL, 0.6), FD_RTOL);
    cr_tape_free(other);
    cr_tape_free(t);
}

/* Calls of built-in rows on constants only: the row's values, constants, no record. */
static void test_call_on_constants(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 0.6);
    size_t n0 = nrecords(t);
    cr_var c = cr_const(0.6), cc[2] = {cr_const(1.5), cr_const(-2.0)};
    cr_var s = cr_tape_call1(t, &cr_fn_sin, &c, 1);
    cr_var p = cr_tape_call1(t, &cr_fn_mul, cc, 2);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_true(cr_var_is_const(s) && cr_var_is_const(p));
    ASSERT_DBL(s.v, sin(0.6));
    ASSERT_DBL(p.v, -3.0);
    assert_int_equal(nrecords(t), n0);
    /* Used with a variable, they are constant factors. */
    cr_var y = cr_mul(t, cr_mul(t, s, p), cr_sin(t, x));
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(scaled_sin, NULL, 0.6), FD_RTOL);
    cr_tape_free(t);
}

/* Two-argument operations with a variable of another tape (the exported functions). */
static void test_binary_foreign(void **state)
{
    fixture *f = *state;
    cr_tape *t, *other;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &other), CR_OK);
    cr_var x = cr_tape_input(t, 0.6), z = cr_tape_input(other, 2.0);
    cr_var r = (cr_mul)(t, z, x);
    assert_true(cr_var_is_const(r) && isnan(r.v));
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "*: variable 0 belongs to another tape");
    cr_tape_clear_error(t);
    r = (cr_sub)(t, x, z);
    assert_true(cr_var_is_const(r) && isnan(r.v));
    assert_contains(cr_tape_errmsg(t), "-: variable 0 belongs to another tape");
    cr_tape_clear_error(t);
    cr_var y = cr_mul(t, cr_sin(t, x), x);
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
    assert_close(g, fd1(sin_c, NULL, 0.6), FD_RTOL);
    cr_tape_free(other);
    cr_tape_free(t);
}

static cr_status fails_quietly(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
                               void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_sin(t, x[0]);
    return CR_EDOMAIN; /* the tape itself has not failed */
}

static cr_status sin_times_x(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, cr_sin(t, x[0]), x[0]);
    return cr_tape_status(t);
}

static void test_record_refusals(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x = 0.9;
    cr_var xs, y;
    assert_int_equal(cr_tape_record(NULL, sin_times_x, NULL, &x, 1, &xs, &y, 1), CR_EINVAL);
    assert_int_equal(cr_tape_record(t, NULL, NULL, &x, 1, &xs, &y, 1), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_record: NULL function or buffers");
    assert_int_equal(cr_tape_record(t, sin_times_x, NULL, NULL, 1, &xs, &y, 1), CR_EINVAL);
    assert_int_equal(cr_tape_record(t, sin_times_x, NULL, &x, 1, &xs, NULL, 1), CR_EINVAL);
    /* More inputs than a recording holds: refused before x is read or xs written (x here
     * has one element), and so is preparing a gradient of as many. */
    assert_int_equal(cr_tape_inputs(t, &x, (size_t)1 << 60, &xs), CR_EOVERFLOW);
    assert_contains(cr_tape_errmsg(t), "cr_tape_inputs: 1152921504606846976 inputs");
    cr_tape_reset(t);
    cr_prepared *pp = (cr_prepared *)1;
    assert_int_equal(
        cr_prepare_gradient(f->ctx, NULL, sin_times_x, NULL, &x, ((size_t)1 << 60) + 1, &pp),
        CR_EOVERFLOW);
    assert_null(pp);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_prepare_gradient: 1152921504606846977 inputs");
    /* A function that fails without failing the tape: the failure goes on the tape. */
    assert_int_equal(cr_tape_record(t, fails_quietly, NULL, &x, 1, &xs, &y, 1), CR_EDOMAIN);
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    char want[128];
    snprintf(want, sizeof want, "the recorded function failed: %s", cr_status_str(CR_EDOMAIN));
    assert_string_equal(cr_tape_errmsg(t), want);
    double g;
    assert_int_equal(cr_tape_gradient(t, y, &xs, 1, &g), CR_EDOMAIN); /* sticky */
    /* Recording again resets the tape. */
    assert_ok(t, cr_tape_record(t, sin_times_x, NULL, &x, 1, &xs, &y, 1));
    assert_ok(t, cr_tape_gradient(t, y, &xs, 1, &g));
    assert_close(g, fd1(sin_c, NULL, 0.9), FD_RTOL);
    cr_tape_free(t);
}

static int run_tape_edges(void)
{
    const struct CMUnitTest tape_edges[] = {
        cmocka_unit_test_setup_teardown(test_new_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_accessors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_first_failure_wins, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cmp_all, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cmp_on_replay_tape, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rrule_result_kinds, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_pullback_cotangent_kinds, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_zero_adjoint_paths, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rows_with_registry, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_ambiguous_rrule, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_call_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_call_on_constants, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_binary_foreign, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_record_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tape_edges, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_tape();
    failed += run_tape_edges();
    return failed;
}
