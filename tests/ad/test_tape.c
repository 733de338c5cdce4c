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

#include "test_rosen.h"
#include "test_util.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
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
    return cmocka_run_group_tests(tests, NULL, NULL);
}
