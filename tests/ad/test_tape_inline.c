/*
 * Tests of the arithmetic operations recorded inline (tape.h: cr_add, cr_sub, cr_mul,
 * cr_div and cr_neg are macros over static inline functions that write the record in the
 * caller). The same function is recorded through the inline operations and through the
 * exported functions (`(cr_add)(t, a, b)` names the exported one): the values, the records
 * (their number and bytes) and the gradients must be identical, and the gradients agree
 * with central finite differences of the function written in plain C. Also: every case the
 * inline path hands to the exported function (the thread's current tape, a full chunk, a
 * failed tape, a variable of another tape or recording, two constants, forward,
 * second-order and replay tapes) and the reopening of the fast path after
 * cr_tape_clear_error() and cr_tape_reset().
 */
#include <math.h>
#include <stdio.h>

#include <chainrules/tape_inline.h>

#include "test_util.h"

#ifndef cr_add
#error "tape.h does not record cr_add inline"
#endif

#define FD_RTOL 1e-8

/*
 * The function under test, in plain C: every arithmetic operation with two variables,
 * a variable and a constant on either side, the same variable twice, and operands whose
 * partials are exactly 1 or -1 at run time (x * 1 through a variable holding 1).
 */
static double p_c(const double *x)
{
    double a = x[0] * x[1] + x[2] / x[0];
    double b = (x[1] - x[2]) * (x[1] - x[2]) - x[0] / x[0] + x[3] * x[3];
    double c = -(a - 2.5) / b + (3.0 * x[2] - x[1] * 0.5) + 7.0 / x[3];
    double d = ((c + x[4]) * x[4] - x[4] * x[4]) + (x[5] * x[2] + (-x[5]));
    return (d * 1.5 - (0.25 - a) + (b / 4.0) * x[6]) + (x[6] * x[5] + x[5] * 1.0);
}

static cr_status p_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = p_c(x);
    return CR_OK;
}

/* The inputs: x[5] is 1 and x[6] is -1, so that x[6] * x[5] has the partials 1 and -1 and
 * x[5] * 1 the partial 1 (still BINARY and UNARY records: the kinds of mul and div do not
 * depend on the values, test_kinds_by_operation). */
enum { NP = 7 };
static const double k_pts[][NP] = {
    {0.7, -1.3, 2.1, 0.4, 1.9, 1.0, -1.0},
    {-2.5, 0.3, -0.8, 3.3, -0.6, 1.0, -1.0},
    {1e-3, 40.0, -7.5, 0.02, 5.0, 1.0, -1.0},
};

#define P_BODY(ADD, SUB, MUL, DIV, NEG)                                                  \
    cr_var two5 = cr_const(2.5), three = cr_const(3.0), half = cr_const(0.5);            \
    cr_var seven = cr_const(7.0), quarter = cr_const(0.25), four = cr_const(4.0);        \
    cr_var a = ADD(t, MUL(t, x[0], x[1]), DIV(t, x[2], x[0]));                           \
    cr_var d12 = SUB(t, x[1], x[2]);                                                     \
    cr_var b = ADD(t, SUB(t, MUL(t, d12, d12), DIV(t, x[0], x[0])), MUL(t, x[3], x[3])); \
    cr_var c = ADD(t,                                                                    \
                   ADD(t, DIV(t, NEG(t, SUB(t, a, two5)), b),                            \
                       SUB(t, MUL(t, three, x[2]), MUL(t, x[1], half))),                 \
                   DIV(t, seven, x[3]));                                                 \
    cr_var d = ADD(t, SUB(t, MUL(t, ADD(t, c, x[4]), x[4]), MUL(t, x[4], x[4])),         \
                   ADD(t, MUL(t, x[5], x[2]), NEG(t, x[5])));                            \
    y[0] = ADD(t,                                                                        \
               ADD(t, SUB(t, MUL(t, d, cr_const(1.5)), SUB(t, quarter, a)),              \
                   MUL(t, DIV(t, b, four), x[6])),                                       \
               ADD(t, MUL(t, x[6], x[5]), MUL(t, x[5], cr_const(1.0))));

/* Recorded through the inline operations. */
static cr_status p_inline(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    P_BODY(cr_add, cr_sub, cr_mul, cr_div, cr_neg)
    return cr_tape_status(t);
}

/* Recorded through the exported functions. */
#define X_ADD(t, a, b) (cr_add)(t, a, b)
#define X_SUB(t, a, b) (cr_sub)(t, a, b)
#define X_MUL(t, a, b) (cr_mul)(t, a, b)
#define X_DIV(t, a, b) (cr_div)(t, a, b)
#define X_NEG(t, a)    (cr_neg)(t, a)
static cr_status p_exported(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    P_BODY(X_ADD, X_SUB, X_MUL, X_DIV, X_NEG)
    return cr_tape_status(t);
}

/* Both recordings give the same value, records and gradient; the gradient agrees with
 * finite differences. */
static void check_both(fixture *f, uint32_t flags)
{
    cr_tape *ti, *te;
    cr_tape_params p = {.struct_size = sizeof p, .flags = flags};
    assert_int_equal(cr_tape_new(f->ctx, &p, &ti), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, &p, &te), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    for (size_t k = 0; k < sizeof k_pts / sizeof k_pts[0]; k++) {
        double yi, ye, gi[NP], ge[NP], fd[NP];
        assert_int_equal(cr_tape_value_and_gradient(ti, p_inline, NULL, k_pts[k], NP, &yi, gi),
                         CR_OK);
        assert_int_equal(cr_tape_value_and_gradient(te, p_exported, NULL, k_pts[k], NP, &ye, ge),
                         CR_OK);
        assert_same_bits(yi, ye);
        assert_same_bits(yi, p_c(k_pts[k]));
        cr_tape_stats si, se;
        assert_int_equal(cr_tape_stats_get(ti, &si), CR_OK);
        assert_int_equal(cr_tape_stats_get(te, &se), CR_OK);
        assert_int_equal(si.nvars, se.nvars);
        assert_int_equal(si.nrecords, se.nrecords);
        assert_int_equal(si.record_bytes, se.record_bytes);
        assert_int_equal(cr_fd_jacobian(&m, NULL, p_fd, NULL, k_pts[k], NP, 1, f->arena, fd, NULL),
                         CR_OK);
        for (size_t j = 0; j < NP; j++) {
            assert_same_bits(gi[j], ge[j]);
            assert_close(gi[j], fd[j], FD_RTOL);
        }
    }
    cr_tape_free(ti);
    cr_tape_free(te);
}

static void test_same_as_exported(void **state)
{
    check_both(*state, 0);
}

/* Forward and second-order tapes take the exported functions: same results. */
static void test_forward_and_second_order_tapes(void **state)
{
    fixture *f = *state;
    check_both(f, CR_TAPE_FORWARD);
    check_both(f, CR_TAPE_SECOND_ORDER);
    /* H v on a second-order tape recorded with the inline operations, against finite
     * differences of the gradient. */
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    const double *x0 = k_pts[0];
    const double v[NP] = {0.3, -1.0, 0.5, 2.0, -0.7, 1.1, 0.9};
    cr_var xs[NP], y;
    assert_int_equal(cr_tape_record(t, p_inline, NULL, x0, NP, xs, &y, 1), CR_OK);
    double hv[NP];
    assert_int_equal(cr_tape_hvp(t, y, xs, NP, v, hv, NULL), CR_OK);
    /* (grad(x + h v) - grad(x - h v)) / 2h with the exported functions on a plain tape */
    cr_tape *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    assert_hvp_by_gradients(u, p_exported, x0, v, NP, hv);
    cr_tape_free(u);
    cr_tape_free(t);
}

/* A prepared gradient (replay tape) recorded with the inline operations replays exactly. */
static void test_prepared(void **state)
{
    fixture *f = *state;
    cr_prepared *pg;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, p_inline, NULL, k_pts[0], NP, &pg), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    for (size_t k = 0; k < sizeof k_pts / sizeof k_pts[0]; k++) {
        double yp, ye, gp[NP], ge[NP];
        assert_int_equal(cr_prepared_value_and_gradient(pg, k_pts[k], NP, &yp, gp), CR_OK);
        assert_int_equal(cr_tape_value_and_gradient(t, p_exported, NULL, k_pts[k], NP, &ye, ge),
                         CR_OK);
        assert_close(yp, ye, 1e-15);
        for (size_t j = 0; j < NP; j++)
            assert_close(gp[j], ge[j], 1e-13);
    }
    cr_tape_free(t);
    cr_prepared_free(pg);
}

/* Long recordings cross many chunk boundaries (the first chunk holds 1024 words): each
 * full chunk sends one operation to the exported function, which starts the next. */
static cr_status chain_inline(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_sub(t, x[i + 1], cr_mul(t, x[i], x[i]));
        cr_var b = cr_sub(t, cr_const(1.0), x[i]);
        s = cr_add(t, s, cr_add(t, cr_mul(t, cr_const(100.0), cr_mul(t, a, a)), cr_mul(t, b, b)));
        s = cr_div(t, cr_neg(t, s), cr_const(-1.0));
    }
    y[0] = s;
    return cr_tape_status(t);
}

static cr_status chain_exported(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
                                void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = (cr_sub)(t, x[i + 1], (cr_mul)(t, x[i], x[i]));
        cr_var b = (cr_sub)(t, cr_const(1.0), x[i]);
        s = (cr_add)(t, s,
                     (cr_add)(t, (cr_mul)(t, cr_const(100.0), (cr_mul)(t, a, a)),
                              (cr_mul)(t, b, b)));
        s = (cr_div)(t, (cr_neg)(t, s), cr_const(-1.0));
    }
    y[0] = s;
    return cr_tape_status(t);
}

static void test_chunk_boundaries(void **state)
{
    fixture *f = *state;
    enum { N = 20000 };
    double *x = malloc(N * sizeof *x), *gi = malloc(N * sizeof *gi), *ge = malloc(N * sizeof *ge);
    assert_non_null(x);
    assert_non_null(gi);
    assert_non_null(ge);
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5 + 0.4 * sin(0.37 * (double)i);
    cr_tape *ti, *te;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &ti), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &te), CR_OK);
    double yi, ye;
    for (int round = 0; round < 2; round++) { /* the second round reuses the chunks */
        assert_int_equal(cr_tape_value_and_gradient(ti, chain_inline, NULL, x, N, &yi, gi), CR_OK);
        assert_int_equal(cr_tape_value_and_gradient(te, chain_exported, NULL, x, N, &ye, ge),
                         CR_OK);
        assert_same_bits(yi, ye);
        for (size_t i = 0; i < N; i++)
            assert_same_bits(gi[i], ge[i]);
        cr_tape_stats si, se;
        cr_tape_stats_get(ti, &si);
        cr_tape_stats_get(te, &se);
        assert_int_equal(si.nrecords, se.nrecords);
        assert_int_equal(si.record_bytes, se.record_bytes);
        assert_true(si.record_bytes > 64 * 8192); /* several chunks */
    }
    /* Rosenbrock's gradient, derived by hand, for the sum part (the negations cancel). */
    for (size_t i = 0; i < N; i++) {
        double g = 0.0;
        if (i + 1 < N)
            g += -400.0 * (x[i + 1] - x[i] * x[i]) * x[i] - 2.0 * (1.0 - x[i]);
        if (i > 0)
            g += 200.0 * (x[i] - x[i - 1] * x[i - 1]);
        assert_close(gi[i], g, 1e-12);
    }
    cr_tape_free(ti);
    cr_tape_free(te);
    free(x);
    free(gi);
    free(ge);
}

/* Records of other kinds (n-ary rows: fma, clamp) between the inline ones: the reverse
 * sweep's loop over the scalar kinds hands them to the general loop and takes over again. */
static double mix_c(const double *x)
{
    double a = x[0] * x[1] - x[2];
    double f = fma(a, x[2], x[0] / x[1]);
    double c = fmin(fmax(f * f, -1.0), 4.0 + x[0]);
    return -(c * a) + fma(x[1], x[1], c) / x[2];
}

static cr_status mix_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = mix_c(x);
    return CR_OK;
}

static cr_status mix_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a = cr_sub(t, cr_mul(t, x[0], x[1]), x[2]);
    cr_var fa[3] = {a, x[2], cr_div(t, x[0], x[1])};
    cr_var f = cr_tape_call1(t, &cr_fn_fma, fa, 3);
    cr_var ca[3] = {cr_mul(t, f, f), cr_const(-1.0), cr_add(t, cr_const(4.0), x[0])};
    cr_var c = cr_tape_call1(t, &cr_fn_clamp, ca, 3);
    cr_var fb[3] = {x[1], x[1], c};
    y[0] =
        cr_add(t, cr_neg(t, cr_mul(t, c, a)), cr_div(t, cr_tape_call1(t, &cr_fn_fma, fb, 3), x[2]));
    return cr_tape_status(t);
}

static void test_other_kinds_between(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    /* f * f inside the clamp's range, and above it (clamped: its partials are zero) */
    const double pts[][3] = {{0.9, 1.3, 0.7}, {1.6, -0.4, 2.2}, {3.0, 2.0, 1.5}};
    for (size_t k = 0; k < 3; k++) {
        double y, g[3], fd[3];
        assert_int_equal(cr_tape_value_and_gradient(t, mix_t, NULL, pts[k], 3, &y, g), CR_OK);
        assert_close(y, mix_c(pts[k]), 1e-15);
        assert_int_equal(cr_fd_jacobian(&m, NULL, mix_fd, NULL, pts[k], 3, 1, f->arena, fd, NULL),
                         CR_OK);
        for (size_t j = 0; j < 3; j++)
            assert_close(g[j], fd[j], FD_RTOL);
    }
    cr_tape_free(t);
}

/* Cases the inline path hands to the exported functions. */
static void test_slow_cases(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    cr_var x = cr_tape_input(t, 2.0), w = cr_tape_input(u, 3.0);

    /* Two constants: a constant, nothing recorded. */
    cr_tape_stats s0, s1;
    cr_tape_stats_get(t, &s0);
    cr_var c = cr_mul(t, cr_const(2.0), cr_const(4.0));
    assert_true(cr_var_is_const(c));
    ASSERT_DBL(c.v, 8.0);
    assert_true(cr_var_is_const(cr_neg(t, cr_const(1.0))));
    cr_tape_stats_get(t, &s1);
    assert_int_equal(s0.nrecords, s1.nrecords);

    /* The thread's current tape. */
    cr_tape *old = cr_tape_set_current(t);
    cr_var y = cr_mul(NULL, x, cr_add(NULL, x, cr_const(1.0))); /* x (x + 1) */
    assert_false(cr_var_is_const(y));
    ASSERT_DBL(y.v, 6.0);
    cr_tape_set_current(old);
    double g;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    ASSERT_DBL(g, 5.0); /* 2x + 1, exact in binary */

    /* A variable of another tape: CR_ETAPE naming the operation, sticky. */
    cr_var bad = cr_sub(t, x, w);
    assert_true(isnan(bad.v));
    assert_true(cr_var_is_const(bad));
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_non_null(strstr(cr_tape_errmsg(t), "another tape"));
    cr_tape_stats_get(t, &s0);
    assert_true(isnan(cr_add(t, x, x).v));
    assert_true(isnan(cr_neg(t, x).v));
    assert_true(isnan(cr_mul(t, cr_const(2.0), cr_const(4.0)).v)); /* as the exported one */
    cr_tape_stats_get(t, &s1);
    assert_int_equal(s0.nrecords, s1.nrecords);
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_ETAPE);

    /* Clearing the error reopens the fast path. */
    cr_tape_clear_error(t);
    cr_var z = cr_div(t, y, x); /* x + 1 */
    assert_int_equal(cr_tape_status(t), CR_OK);
    cr_tape_stats_get(t, &s1);
    assert_int_equal(s1.nvars, s0.nvars + 1);
    assert_int_equal(cr_tape_gradient(t, z, &x, 1, &g), CR_OK);
    assert_close(g, 1.0, 1e-15);

    /* After a reset, variables of the old recording are foreign, through the inline path
     * too; a new input records again. */
    cr_tape_reset(t);
    cr_var x2 = cr_tape_input(t, 1.0);
    cr_var stale = cr_neg(t, x);
    assert_true(isnan(stale.v));
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_non_null(strstr(cr_tape_errmsg(t), "before its last reset"));
    cr_tape_reset(t);
    x2 = cr_tape_input(t, 1.5);
    cr_var r = cr_mul(t, cr_neg(t, x2), x2); /* -x^2 */
    assert_int_equal(cr_tape_gradient(t, r, &x2, 1, &g), CR_OK);
    ASSERT_DBL(g, -3.0);
    cr_tape_free(t);
    cr_tape_free(u);
}

/* A caller buffer that fills up: the operation that finds no room calls the exported
 * function, which reports CR_EARENA; the tape works again after a reset. */
static void test_fixed_buffer_full(void **state)
{
    fixture *f = *state;
    static double buf[2048];
    cr_tape_params p = {.struct_size = sizeof p, .buffer = buf, .buffer_size = sizeof buf};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    cr_var x = cr_tape_input(t, 1.0001), s = x;
    size_t k = 0;
    while (cr_tape_status(t) == CR_OK && k < 100000) {
        s = cr_mul(t, s, x);
        k++;
    }
    assert_int_equal(cr_tape_status(t), CR_EARENA);
    assert_true(k > 100 && k < 100000);
    assert_true(isnan(s.v));
    cr_tape_reset(t);
    x = cr_tape_input(t, 3.0);
    s = cr_mul(t, x, x);
    double g;
    assert_int_equal(cr_tape_gradient(t, s, &x, 1, &g), CR_OK);
    ASSERT_DBL(g, 6.0);
    cr_tape_free(t);
}

/* cr_tape_inputs() makes one input record on first-order tapes (one record per input on
 * forward tapes), and into a caller buffer with no room for a record the inputs are NaN
 * constants. */
static void test_inputs(void **state)
{
    fixture *f = *state;
    enum { N = 5000 };
    static double x[N];
    static cr_var xs[N];
    for (size_t i = 0; i < N; i++)
        x[i] = (double)i - 0.5;
    for (uint32_t flags = 0; flags <= CR_TAPE_FORWARD; flags += CR_TAPE_FORWARD) {
        cr_tape_params p = {.struct_size = sizeof p, .flags = flags};
        cr_tape *t;
        assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
        cr_var first = cr_tape_input(t, 7.0);
        assert_int_equal(cr_tape_inputs(t, x, N, xs), CR_OK);
        cr_tape_stats st;
        cr_tape_stats_get(t, &st);
        assert_int_equal(st.nrecords, N + 1); /* one operation per input */
        assert_int_equal(st.record_bytes, flags == 0 ? 8 : (N + 1) * 16);
        cr_var s = cr_mul(t, first, first);
        for (size_t i = 0; i < N; i++) {
            ASSERT_DBL(xs[i].v, x[i]);
            assert_int_equal(xs[i].idx, i + 1);
            s = cr_add(t, s, cr_mul(t, xs[i], cr_const((double)(i % 7))));
        }
        cr_tape_stats_get(t, &st);
        assert_int_equal(st.ninputs, N + 1);
        static double g[N];
        assert_int_equal(cr_tape_gradient(t, s, xs, N, g), CR_OK);
        for (size_t i = 0; i < N; i++)
            ASSERT_DBL(g[i], (double)(i % 7));
        assert_int_equal(cr_tape_gradient(t, s, &first, 1, g), CR_OK);
        ASSERT_DBL(g[0], 14.0);
        cr_tape_free(t);
    }
    static double buf[32];
    cr_tape_params p = {.struct_size = sizeof p, .buffer = buf, .buffer_size = sizeof buf};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    assert_int_equal(cr_tape_inputs(t, x, N, xs), CR_EARENA);
    for (size_t i = 0; i < N; i++) {
        assert_true(cr_var_is_const(xs[i]));
        assert_true(isnan(xs[i].v));
    }
    cr_tape_free(t);
}

/* cr_tape_value_and_gradient takes the gradient with respect to the recording's first
 * variables (its inputs): an output that is an input, a constant output, and a function
 * that resets the tape (its inputs become foreign: CR_ETAPE). */
static cr_status second_input(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)t;
    (void)n;
    (void)m;
    (void)env;
    y[0] = x[1];
    return CR_OK;
}

static cr_status constant_out(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)t;
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_const(x[0].v);
    return CR_OK;
}

static cr_status resets(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)x;
    (void)n;
    (void)m;
    (void)env;
    cr_tape_reset(t);
    cr_var z = cr_tape_input(t, 2.0);
    y[0] = cr_mul(t, z, z);
    return CR_OK;
}

static void test_value_and_gradient_inputs(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    enum { N = 100 }; /* more than the sweep's stack workspace */
    double x[N], g[N], y;
    for (size_t i = 0; i < N; i++) {
        x[i] = 1.0 + (double)i;
        g[i] = -1.0;
    }
    assert_int_equal(cr_tape_value_and_gradient(t, second_input, NULL, x, N, &y, g), CR_OK);
    ASSERT_DBL(y, 2.0);
    for (size_t i = 0; i < N; i++)
        ASSERT_DBL(g[i], i == 1 ? 1.0 : 0.0);
    assert_int_equal(cr_tape_value_and_gradient(t, constant_out, NULL, x, N, &y, g), CR_OK);
    ASSERT_DBL(y, 1.0);
    for (size_t i = 0; i < N; i++)
        ASSERT_DBL(g[i], 0.0);
    assert_int_equal(cr_tape_value_and_gradient(t, resets, NULL, x, N, &y, g), CR_ETAPE);
    /* The same gradient as recording and gathering the inputs one by one. */
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5 + 0.4 * sin(0.37 * (double)i);
    assert_int_equal(cr_tape_value_and_gradient(t, chain_inline, NULL, x, N, &y, g), CR_OK);
    cr_var xs[N], out;
    double g2[N];
    assert_int_equal(cr_tape_record(t, chain_inline, NULL, x, N, xs, &out, 1), CR_OK);
    assert_int_equal(cr_tape_gradient(t, out, xs, N, g2), CR_OK);
    assert_same_bits(y, out.v);
    for (size_t i = 0; i < N; i++)
        assert_same_bits(g[i], g2[i]);
    cr_tape_free(t);
}

/* The tape's first fields as the inline path reads them: the key (tape.h) of the next
 * variable, whose tape half is the recording's id while the fast path is open (a
 * first-order tape that has not failed) and CR__TAPE_NO_ID otherwise. If the key's layout
 * check failed, or the tape half were the wrong one, every operation would take the
 * exported function: the results would be the same, so only this test sees it. */
static void test_hot_key(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    const cr__tape_hot *h = (const cr__tape_hot *)(const void *)t;
    cr_var x = cr_tape_input(t, 1.5);
    assert_int_equal(h->vt.f.nvars, 1);
    assert_int_equal(h->vt.f.fast_id, x.tape);
    assert_int_equal(CR__TAPE_KEY_ID(cr__tape_key(x)), x.tape);
    assert_int_equal(CR__TAPE_KEY_ID(cr__tape_key(cr_const(1.0))), 0);
    uint64_t k = h->vt.key;
    cr_var y = cr_mul(t, x, x);
    assert_true(cr__tape_key(y) == k);
    assert_int_equal(y.idx, 1);
    assert_int_equal(y.tape, x.tape);
    assert_true(h->vt.key == k + CR__TAPE_KEY_ONE);
    assert_int_equal(h->vt.f.nvars, 2);
    /* A failed tape closes the fast path, clearing the error opens it again. */
    cr_neg(t, cr_const((double)NAN)); /* two constants: nothing happens */
    cr_var bad = x;
    bad.tape ^= 1u;
    cr_add(t, x, bad);
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_int_equal(h->vt.f.fast_id, CR__TAPE_NO_ID);
    cr_tape_clear_error(t);
    assert_int_equal(h->vt.f.fast_id, x.tape);
    cr_tape_free(t);
    /* Forward and second-order tapes record through the exported functions. */
    for (uint32_t flags = CR_TAPE_FORWARD; flags <= CR_TAPE_SECOND_ORDER; flags++) {
        cr_tape_params p = {.struct_size = sizeof p, .flags = flags};
        assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
        h = (const cr__tape_hot *)(const void *)t;
        x = cr_tape_input(t, 1.5);
        assert_int_equal(h->vt.f.fast_id, CR__TAPE_NO_ID);
        assert_int_equal(h->vt.f.nvars, 1);
        cr_tape_free(t);
    }
}

/* Bytes of the records the operation op makes on a fresh first-order tape from the
 * variables a, b of values va, vb (b a constant when cb). */
typedef cr_var (*op2_fn)(cr_tape *, cr_var, cr_var);
static size_t bytes_of(fixture *f, op2_fn op, double va, double vb, bool cb)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var a = cr_tape_input(t, va), b = cb ? cr_const(vb) : cr_tape_input(t, vb);
    cr_tape_stats s0, s1;
    assert_int_equal(cr_tape_stats_get(t, &s0), CR_OK);
    cr_var y = op(t, a, b);
    assert_int_equal(cr_tape_stats_get(t, &s1), CR_OK);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_int_equal(s1.nvars, s0.nvars + 1);
    double g[2];
    cr_var xs[2] = {a, b};
    assert_int_equal(cr_tape_gradient(t, y, xs, 2, g), CR_OK);
    cr_tape_free(t);
    return s1.record_bytes - s0.record_bytes;
}

static cr_var i_add(cr_tape *t, cr_var a, cr_var b)
{
    return cr_add(t, a, b);
}
static cr_var i_sub(cr_tape *t, cr_var a, cr_var b)
{
    return cr_sub(t, a, b);
}
static cr_var i_mul(cr_tape *t, cr_var a, cr_var b)
{
    return cr_mul(t, a, b);
}
static cr_var i_div(cr_tape *t, cr_var a, cr_var b)
{
    return cr_div(t, a, b);
}

/* The record kinds follow the operation, on both paths: add and sub make the one-word ADD,
 * SUB, COPY and NEG records; mul and div make UNARY and BINARY records (partials stored)
 * even where their partials are exactly 1 or -1. */
static void test_kinds_by_operation(void **state)
{
    fixture *f = *state;
    const size_t w = sizeof(double);
    struct {
        op2_fn inl, exp;
        double va, vb;
        bool cb;
        size_t bytes;
    } k_cases[] = {
        {i_add, (cr_add), 0.3, 0.7, false, w},      /* ADD */
        {i_sub, (cr_sub), 0.3, 0.7, false, w},      /* SUB */
        {i_add, (cr_add), 0.3, 0.7, true, w},       /* COPY */
        {i_sub, (cr_sub), 0.3, 0.7, true, w},       /* COPY */
        {i_mul, (cr_mul), 1.0, -1.0, false, 3 * w}, /* partials -1, 1: BINARY */
        {i_mul, (cr_mul), 0.3, 1.0, true, 2 * w},   /* partial 1: UNARY */
        {i_mul, (cr_mul), 0.3, -1.0, true, 2 * w},  /* partial -1: UNARY */
        {i_div, (cr_div), 0.3, 1.0, true, 2 * w},   /* partial 1: UNARY */
        {i_div, (cr_div), 1.0, 1.0, false, 3 * w},  /* partials 1, -1: BINARY */
        {i_mul, (cr_mul), 0.5, 0.5, false, 3 * w},  /* partials 0.5, 0.5: BINARY */
    };
    for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++) {
        size_t bi = bytes_of(f, k_cases[c].inl, k_cases[c].va, k_cases[c].vb, k_cases[c].cb);
        size_t be = bytes_of(f, k_cases[c].exp, k_cases[c].va, k_cases[c].vb, k_cases[c].cb);
        if (bi != k_cases[c].bytes || be != k_cases[c].bytes) {
            print_error("case %zu: %zu bytes inline, %zu exported, %zu expected\n", c, bi, be,
                        k_cases[c].bytes);
            fail();
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_same_as_exported, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_forward_and_second_order_tapes, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prepared, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_chunk_boundaries, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_other_kinds_between, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_slow_cases, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_fixed_buffer_full, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inputs, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hot_key, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_kinds_by_operation, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_value_and_gradient_inputs, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
