/*
 * Tests of recording cursors (tape.h, cr_rec): a function recorded through a cursor, with
 * the inline operations (cr_rec_add(&r, ...), macros over static inline functions) and with
 * the exported ones (`(cr_rec_add)(&r, ...)`), gives the values, records and gradients of
 * the same function recorded on the tape with the exported cr_add ...; the gradients agree
 * with central finite differences of the function in plain C. Also: chunk boundaries,
 * forward, second-order and replay tapes (every operation through the library), other
 * operations through cr_rec_call1/2, and the misuses the library refuses or survives: a
 * record on the tape while a cursor is open, a second cursor, a recorded function that
 * returns with a cursor open, a sweep while one is open, a reset or a failure under an open
 * cursor, a closed cursor used again, no tape.
 */
#include <math.h>
#include <stdio.h>

#include <chainrules/tape_inline.h>

#include "test_rosen.h"
#include "test_util.h"

#ifndef cr_rec_add
#error "tape.h does not record cr_rec_add inline"
#endif

#define FD_RTOL 1e-8

/* The function under test in plain C: every arithmetic operation with two variables, a
 * variable and a constant on either side, the same variable twice, partials of exactly
 * +-1 at run time (x[5] is 1, x[6] is -1), and a sine and an exponential. */
static double p_c(const double *x)
{
    double a = x[0] * x[1] + x[2] / x[0];
    double b = (x[1] - x[2]) * (x[1] - x[2]) - x[0] / x[0] + x[3] * x[3];
    double c = -(a - 2.5) / b + (3.0 * x[2] - x[1] * 0.5) + 7.0 / x[3];
    double d = ((c + x[4]) * x[4] - x[4] * x[4]) + (x[5] * x[2] + (-x[5]));
    double e = sin(d) * exp(0.1 * a);
    return (d * 1.5 - (0.25 - a) + (b / 4.0) * x[6]) + (x[6] * x[5] + x[5] * 1.0) + e;
}

static cr_status p_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = p_c(x);
    return CR_OK;
}

enum { NP = 7 };
static const double k_pts[][NP] = {
    {0.7, -1.3, 2.1, 0.4, 1.9, 1.0, -1.0},
    {-2.5, 0.3, -0.8, 3.3, -0.6, 1.0, -1.0},
    {1e-3, 40.0, -7.5, 0.02, 5.0, 1.0, -1.0},
};

/* The body, over the operations ADD ... NEG and two calls SIN(z), EXP(z). */
#define P_BODY(ADD, SUB, MUL, DIV, NEG, SIN, EXP)                                             \
    cr_var two5 = cr_const(2.5), three = cr_const(3.0), half = cr_const(0.5);                 \
    cr_var seven = cr_const(7.0), quarter = cr_const(0.25), four = cr_const(4.0);             \
    cr_var a = ADD(MUL(x[0], x[1]), DIV(x[2], x[0]));                                         \
    cr_var d12 = SUB(x[1], x[2]);                                                             \
    cr_var b = ADD(SUB(MUL(d12, d12), DIV(x[0], x[0])), MUL(x[3], x[3]));                     \
    cr_var c = ADD(ADD(DIV(NEG(SUB(a, two5)), b), SUB(MUL(three, x[2]), MUL(x[1], half))),    \
                   DIV(seven, x[3]));                                                         \
    cr_var d =                                                                                \
        ADD(SUB(MUL(ADD(c, x[4]), x[4]), MUL(x[4], x[4])), ADD(MUL(x[5], x[2]), NEG(x[5])));  \
    cr_var e = MUL(SIN(d), EXP(MUL(cr_const(0.1), a)));                                       \
    y[0] = ADD(ADD(ADD(SUB(MUL(d, cr_const(1.5)), SUB(quarter, a)), MUL(DIV(b, four), x[6])), \
                   ADD(MUL(x[6], x[5]), MUL(x[5], cr_const(1.0)))),                           \
               e);

/* On the tape with the exported functions: the reference recording. */
#define T_ADD(a, b) (cr_add)(t, a, b)
#define T_SUB(a, b) (cr_sub)(t, a, b)
#define T_MUL(a, b) (cr_mul)(t, a, b)
#define T_DIV(a, b) (cr_div)(t, a, b)
#define T_NEG(a)    (cr_neg)(t, a)
#define T_SIN(a)    cr_sin(t, a)
#define T_EXP(a)    cr_exp(t, a)
static cr_status p_tape(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    P_BODY(T_ADD, T_SUB, T_MUL, T_DIV, T_NEG, T_SIN, T_EXP)
    return cr_tape_status(t);
}

/* Through a cursor, inline. */
#define C_ADD(a, b) cr_rec_add(&r, a, b)
#define C_SUB(a, b) cr_rec_sub(&r, a, b)
#define C_MUL(a, b) cr_rec_mul(&r, a, b)
#define C_DIV(a, b) cr_rec_div(&r, a, b)
#define C_NEG(a)    cr_rec_neg(&r, a)
#define C_SIN(a)    cr_rec_call1(&r, cr_sin, a)
#define C_EXP(a)    cr_rec_call1(&r, cr_exp, a)
static cr_status p_cursor(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_rec r;
    cr_rec_open(&r, t);
    P_BODY(C_ADD, C_SUB, C_MUL, C_DIV, C_NEG, C_SIN, C_EXP)
    cr_rec_close(&r);
    return cr_tape_status(t);
}

/* Through a cursor, with the exported functions. */
#define X_ADD(a, b) (cr_rec_add)(&r, a, b)
#define X_SUB(a, b) (cr_rec_sub)(&r, a, b)
#define X_MUL(a, b) (cr_rec_mul)(&r, a, b)
#define X_DIV(a, b) (cr_rec_div)(&r, a, b)
#define X_NEG(a)    (cr_rec_neg)(&r, a)
#define X_SIN(a)    (cr_rec_call1)(&r, cr_sin, a)
#define X_EXP(a)    (cr_rec_call1)(&r, cr_exp, a)
static cr_status p_cursor_exported(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
                                   void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_rec r;
    (cr_rec_open)(&r, t);
    P_BODY(X_ADD, X_SUB, X_MUL, X_DIV, X_NEG, X_SIN, X_EXP)
    (cr_rec_close)(&r);
    return cr_tape_status(t);
}

static void same_stats(cr_tape *a, cr_tape *b)
{
    cr_tape_stats sa, sb;
    assert_int_equal(cr_tape_stats_get(a, &sa), CR_OK);
    assert_int_equal(cr_tape_stats_get(b, &sb), CR_OK);
    assert_int_equal(sa.nvars, sb.nvars);
    assert_int_equal(sa.nrecords, sb.nrecords);
    assert_int_equal(sa.record_bytes, sb.record_bytes);
}

/* The three recordings give the same value, records and gradient; the gradient agrees with
 * finite differences. */
static void check_all(fixture *f, uint32_t flags)
{
    cr_ad_fn fns[3] = {p_tape, p_cursor, p_cursor_exported};
    cr_tape *t[3];
    cr_tape_params p = {.struct_size = sizeof p, .flags = flags};
    for (int i = 0; i < 3; i++)
        assert_int_equal(cr_tape_new(f->ctx, &p, &t[i]), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    for (size_t k = 0; k < sizeof k_pts / sizeof k_pts[0]; k++) {
        double y[3], g[3][NP], fd[NP];
        for (int i = 0; i < 3; i++)
            assert_int_equal(
                cr_tape_value_and_gradient(t[i], fns[i], NULL, k_pts[k], NP, &y[i], g[i]), CR_OK);
        assert_int_equal(cr_fd_jacobian(&m, NULL, p_fd, NULL, k_pts[k], NP, 1, f->arena, fd, NULL),
                         CR_OK);
        assert_close(y[0], p_c(k_pts[k]), 1e-14);
        for (int i = 1; i < 3; i++) {
            assert_same_bits(y[i], y[0]);
            same_stats(t[i], t[0]);
            for (size_t j = 0; j < NP; j++)
                assert_same_bits(g[i][j], g[0][j]);
        }
        for (size_t j = 0; j < NP; j++)
            assert_close(g[1][j], fd[j], FD_RTOL);
    }
    for (int i = 0; i < 3; i++)
        cr_tape_free(t[i]);
}

static void test_same_as_tape(void **state)
{
    check_all(*state, 0);
}

/* Forward and second-order tapes keep the inline path closed: every operation of the cursor
 * goes through the library, with the same results; H v from a second-order tape recorded
 * through a cursor agrees with differences of the gradient. */
static void test_forward_and_second_order_tapes(void **state)
{
    fixture *f = *state;
    check_all(f, CR_TAPE_FORWARD);
    check_all(f, CR_TAPE_SECOND_ORDER);
    cr_tape *t, *u;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    const double *x0 = k_pts[0];
    const double v[NP] = {0.3, -1.0, 0.5, 2.0, -0.7, 1.1, 0.9};
    cr_var xs[NP], y;
    assert_int_equal(cr_tape_record(t, p_cursor, NULL, x0, NP, xs, &y, 1), CR_OK);
    double hv[NP];
    assert_int_equal(cr_tape_hvp(t, y, xs, NP, v, hv, NULL), CR_OK);
    assert_hvp_by_gradients(u, p_tape, x0, v, NP, hv);
    cr_tape_free(u);
    cr_tape_free(t);
}

/* A prepared gradient recorded through a cursor (a replay tape) replays at other inputs. */
static void test_prepared(void **state)
{
    fixture *f = *state;
    cr_prepared *pg;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, p_cursor, NULL, k_pts[0], NP, &pg), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    for (size_t k = 0; k < sizeof k_pts / sizeof k_pts[0]; k++) {
        double yp, gp[NP], fd[NP];
        assert_int_equal(cr_prepared_value_and_gradient(pg, k_pts[k], NP, &yp, gp), CR_OK);
        assert_int_equal(cr_fd_jacobian(&m, NULL, p_fd, NULL, k_pts[k], NP, 1, f->arena, fd, NULL),
                         CR_OK);
        assert_close(yp, p_c(k_pts[k]), 1e-14);
        for (size_t j = 0; j < NP; j++)
            assert_close(gp[j], fd[j], FD_RTOL);
    }
    cr_prepared_free(pg);
}

/* Rosenbrock over N inputs, through a cursor and on the tape (test_rosen.h's rosen_t): the
 * records cross many chunk boundaries (each a call into the library from the cursor). */
enum { NR = 20000 };
static cr_status rosen_cursor(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0), hundred = cr_const(100.0), one = cr_const(1.0);
    cr_rec r;
    cr_rec_open(&r, t);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_rec_sub(&r, x[i + 1], cr_rec_mul(&r, x[i], x[i]));
        cr_var b = cr_rec_sub(&r, one, x[i]);
        s = cr_rec_add(
            &r, s,
            cr_rec_add(&r, cr_rec_mul(&r, hundred, cr_rec_mul(&r, a, a)), cr_rec_mul(&r, b, b)));
    }
    cr_rec_close(&r);
    y[0] = s;
    return cr_tape_status(t);
}

static void test_chunk_boundaries(void **state)
{
    fixture *f = *state;
    double *x = malloc(NR * sizeof *x), *gc = malloc(NR * sizeof *gc),
           *gt = malloc(NR * sizeof *gt);
    assert_non_null(x);
    assert_non_null(gc);
    assert_non_null(gt);
    for (size_t i = 0; i < NR; i++)
        x[i] = 0.5 + 0.4 * sin(0.37 * (double)i);
    /* Both tapes on a small first block, so that the chunks grow many times. */
    cr_tape_params p = {.struct_size = sizeof p, .block_size = 4096};
    cr_tape *tc, *tt;
    assert_int_equal(cr_tape_new(f->ctx, &p, &tc), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, &p, &tt), CR_OK);
    double yc, yt;
    for (int round = 0; round < 2; round++) { /* the second reuses the chunks */
        assert_int_equal(cr_tape_value_and_gradient(tc, rosen_cursor, NULL, x, NR, &yc, gc), CR_OK);
        assert_int_equal(cr_tape_value_and_gradient(tt, rosen_t, NULL, x, NR, &yt, gt), CR_OK);
        assert_same_bits(yc, yt);
        assert_close(yc, rosen_value(x, NR), 1e-13);
        for (size_t i = 0; i < NR; i++)
            assert_same_bits(gc[i], gt[i]);
        same_stats(tc, tt);
    }
    cr_tape_stats st;
    assert_int_equal(cr_tape_stats_get(tc, &st), CR_OK);
    assert_true(st.record_bytes > 64 * 8192); /* several chunks */
    /* A few coordinates against central differences of the plain C function. */
    static const size_t js[] = {0, 1, 4095, 12345, NR - 1};
    for (size_t q = 0; q < sizeof js / sizeof js[0]; q++) {
        size_t j = js[q];
        double xj = x[j], h = 1e-6;
        x[j] = xj + h;
        double fp = rosen_value(x, NR);
        x[j] = xj - h;
        double fm = rosen_value(x, NR);
        x[j] = xj;
        assert_close(gc[j], (fp - fm) / (2 * h), 1e-5);
    }
    cr_tape_free(tc);
    cr_tape_free(tt);
    free(x);
    free(gc);
    free(gt);
}

/* A caller operation through cr_rec_call2, and cr_rec_call2 with an operation of the
 * header: the records of the same calls on the tape. */
static cr_var hypot_op(cr_tape *t, cr_var a, cr_var b)
{
    return cr_sqrt(t, cr_add(t, cr_mul(t, a, a), cr_mul(t, b, b)));
}

static cr_status calls_cursor(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_rec r;
    cr_rec_open(&r, t);
    cr_var h = cr_rec_call2(&r, hypot_op, x[0], x[1]);
    cr_var q = cr_rec_call2(&r, cr_div, h, cr_rec_call1(&r, cr_cos, x[2]));
    y[0] = cr_rec_mul(&r, q, cr_rec_call1(&r, cr_log, x[1]));
    cr_rec_close(&r);
    return cr_tape_status(t);
}

static cr_status calls_tape(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var h = hypot_op(t, x[0], x[1]);
    cr_var q = (cr_div)(t, h, cr_cos(t, x[2]));
    y[0] = (cr_mul)(t, q, cr_log(t, x[1]));
    return cr_tape_status(t);
}

static cr_status calls_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = sqrt(x[0] * x[0] + x[1] * x[1]) / cos(x[2]) * log(x[1]);
    return CR_OK;
}

static void test_calls(void **state)
{
    fixture *f = *state;
    cr_tape *tc, *tt;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &tc), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &tt), CR_OK);
    const double x[3] = {0.8, 2.5, 0.3};
    double yc, yt, gc[3], gt[3], fd[3];
    assert_int_equal(cr_tape_value_and_gradient(tc, calls_cursor, NULL, x, 3, &yc, gc), CR_OK);
    assert_int_equal(cr_tape_value_and_gradient(tt, calls_tape, NULL, x, 3, &yt, gt), CR_OK);
    same_stats(tc, tt);
    assert_same_bits(yc, yt);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, calls_fd, NULL, x, 3, 1, f->arena, fd, NULL), CR_OK);
    for (size_t j = 0; j < 3; j++) {
        assert_same_bits(gc[j], gt[j]);
        assert_close(gc[j], fd[j], FD_RTOL);
    }
    cr_tape_free(tc);
    cr_tape_free(tt);
}

/* ---- Misuse ------------------------------------------------------------------------------ */

static void assert_msg_has(cr_tape *t, const char *part)
{
    if (strstr(cr_tape_errmsg(t), part) == NULL) {
        print_error("message \"%s\" lacks \"%s\"\n", cr_tape_errmsg(t), part);
        fail();
    }
}

/* Recording on the tape itself while a cursor is open: cr_mul(t, ...) inline, an exported
 * function, an input, a call; each fails the tape with CR_EMISUSE. */
typedef enum { ON_INLINE, ON_EXPORTED, ON_INPUT, ON_CALL } on_what;

static cr_status record_on_tape(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
                                void *env)
{
    (void)n;
    (void)m;
    cr_rec r;
    cr_rec_open(&r, t);
    cr_var a = cr_rec_mul(&r, x[0], x[1]), b = cr_const(0.0);
    switch (*(const on_what *)env) {
    case ON_INLINE:
        b = cr_mul(t, a, x[0]);
        break;
    case ON_EXPORTED:
        b = cr_sin(t, a);
        break;
    case ON_INPUT:
        b = cr_tape_input(t, 2.0);
        break;
    case ON_CALL:
        b = cr_tape_call1(t, &cr_fn_exp, &a, 1);
        break;
    }
    assert_true(isnan(b.v));
    /* The cursor goes on, through the library, on the failed tape: NaN constants. */
    cr_var c = cr_rec_add(&r, a, x[0]);
    assert_true(isnan(c.v));
    cr_rec_close(&r);
    y[0] = c;
    return cr_tape_status(t);
}

static void test_record_on_tape_while_open(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    const double x[2] = {1.5, -0.5};
    for (on_what w = ON_INLINE; w <= ON_CALL; w++) {
        double y, g[NP];
        assert_int_equal(cr_tape_value_and_gradient(t, record_on_tape, &w, x, 2, &y, g),
                         CR_EMISUSE);
        assert_msg_has(t, "recording cursor is open");
        /* The tape records again after the failure (the next recording resets it). */
        assert_int_equal(cr_tape_value_and_gradient(t, p_cursor, NULL, k_pts[0], NP, &y, g), CR_OK);
        assert_close(y, p_c(k_pts[0]), 1e-14);
    }
    cr_tape_free(t);
}

/* A second cursor on a tape with one open: CR_EMISUSE; the second records nothing. */
static cr_status two_cursors(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_rec r, r2;
    cr_rec_open(&r, t);
    cr_rec_open(&r2, t);
    assert_int_equal(cr_tape_status(t), CR_EMISUSE);
    cr_var a = cr_rec_mul(&r2, x[0], x[1]);
    assert_true(isnan(a.v));
    cr_rec_close(&r2);
    y[0] = cr_rec_add(&r, x[0], x[1]);
    cr_rec_close(&r);
    return cr_tape_status(t);
}

static void test_second_cursor(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    const double x[2] = {1.5, -0.5};
    double y, g[2];
    assert_int_equal(cr_tape_value_and_gradient(t, two_cursors, NULL, x, 2, &y, g), CR_EMISUSE);
    assert_msg_has(t, "already open");
    cr_tape_free(t);
}

/* A recorded function that returns with its cursor open fails the recording; the tape
 * records normally after it. */
static cr_status left_open(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_rec r;
    cr_rec_open(&r, t);
    y[0] = cr_rec_mul(&r, x[0], x[1]);
    return cr_tape_status(t);
}

static void test_left_open(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    const double x[2] = {1.5, -0.5};
    double y, g[NP];
    assert_int_equal(cr_tape_value_and_gradient(t, left_open, NULL, x, 2, &y, g), CR_EMISUSE);
    assert_msg_has(t, "returned with a recording cursor open");
    cr_var xs[2], yv;
    assert_int_equal(cr_tape_record(t, left_open, NULL, x, 2, xs, &yv, 1), CR_EMISUSE);
    assert_int_equal(cr_tape_value_and_gradient(t, p_cursor, NULL, k_pts[1], NP, &y, g), CR_OK);
    assert_close(y, p_c(k_pts[1]), 1e-14);
    cr_tape_free(t);
}

/* Sweeping, or reading the stats, while a cursor is open: CR_EMISUSE, whether the output was
 * made by the cursor or before it; after cr_rec_close the same sweep gives the gradient. */
static void test_sweep_while_open(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 0.5), w = cr_mul(t, x, x);
    cr_rec r;
    cr_rec_open(&r, t);
    cr_var y = cr_rec_mul(&r, w, x); /* x^3 */
    cr_tape_stats st = {.nrecords = 99};
    assert_int_equal(cr_tape_stats_get(t, &st), CR_EMISUSE); /* its counts would miss y's */
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "cr_tape_stats_get: a recording cursor"));
    assert_int_equal(st.nrecords, 99);
    double g = 0.0;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_EMISUSE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "recording cursor is open"));
    assert_int_equal(cr_tape_gradient(t, w, &x, 1, &g), CR_EMISUSE);
    double J = 0.0;
    assert_int_equal(cr_tape_jacobian(t, &y, 1, &x, 1, &J), CR_EMISUSE);
    /* The sweeps of array variables refuse too, without touching their results. */
    double xa[2] = {0.5, 2.0}, seed[2] = {1.0, 1.0}, ga[2] = {7.0, 7.0};
    cr_array av = cr_array_vector(xa, 2), sv = cr_array_vector(seed, 2),
             gv = cr_array_vector(ga, 2), *gp = &gv;
    cr_avar A = cr_tape_array_input(t, &av);
    g = 5.0;
    assert_int_equal(cr_tape_avjp(t, A, &sv, &x, 1, &g, &A, 1, &gp), CR_EMISUSE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "cr_tape_avjp: a recording cursor is open"));
    assert_true(g == 5.0 && ga[0] == 7.0 && ga[1] == 7.0);
    assert_int_equal(cr_tape_gradient_arrays(t, y, &x, 1, &g, &A, 1, &gp), CR_EMISUSE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "recording cursor is open"));
    assert_true(g == 5.0 && ga[0] == 7.0);
    assert_int_equal(cr_tape_status(t), CR_OK); /* a sweep's refusal does not fail the tape */
    cr_rec_close(&r);
    assert_int_equal(cr_tape_gradient_arrays(t, y, &x, 1, &g, &A, 1, &gp), CR_OK);
    assert_close(g, 3.0 * 0.5 * 0.5, 1e-15);
    assert_true(ga[0] == 0.0 && ga[1] == 0.0); /* y does not depend on A */
    assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
    assert_int_equal(st.nrecords, 3); /* the input, w and y */
    assert_int_equal(st.nvars, 3);
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    assert_close(g, 3.0 * 0.5 * 0.5, 1e-15); /* d/dx x^3 */
    cr_tape_free(t);
}

/* A cursor used after cr_rec_close records through the tape's exported functions: the same
 * records as the tape's own operations. */
static void test_closed_cursor(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    cr_var x = cr_tape_input(t, 0.7), xu = cr_tape_input(u, 0.7);
    cr_rec r;
    cr_rec_open(&r, t);
    cr_var a = cr_rec_mul(&r, x, x);
    cr_rec_close(&r);
    cr_var b = cr_mul(t, a, x); /* the tape records again */
    cr_var c = cr_rec_add(&r, b, a);
    cr_var d = cr_rec_call1(&r, cr_sin, c);
    cr_rec_close(&r); /* closing again does nothing */
    cr_var e = cr_add(t, d, x);
    assert_int_equal(cr_tape_status(t), CR_OK);
    cr_var au = cr_mul(u, xu, xu), bu = cr_mul(u, au, xu);
    cr_var eu = cr_add(u, cr_sin(u, cr_add(u, bu, au)), xu);
    assert_same_bits(e.v, eu.v);
    same_stats(t, u);
    double g, gu;
    assert_int_equal(cr_tape_gradient(t, e, &x, 1, &g), CR_OK);
    assert_int_equal(cr_tape_gradient(u, eu, &xu, 1, &gu), CR_OK);
    assert_same_bits(g, gu);
    const double h = 1e-6, x0 = 0.7;
#define E_C(z) (sin((z) * (z) * (z) + (z) * (z)) + (z))
    assert_close(g, (E_C(x0 + h) - E_C(x0 - h)) / (2 * h), 1e-8);
#undef E_C
    cr_tape_free(t);
    cr_tape_free(u);
}

/* cr_tape_reset under an open cursor: the cursor is closed by it. Its old variables, which
 * its key still names, are refused by the exported function (CR_ETAPE) instead of being
 * written inline at the cursor's old position; then it records through the exported
 * functions. */
static void test_reset_under_cursor(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 2.0);
    cr_rec r;
    cr_rec_open(&r, t);
    cr_var a = cr_rec_mul(&r, x, x);
    for (int i = 0; i < 100; i++)
        a = cr_rec_add(&r, a, x);
    cr_tape_reset(t);
    cr_var c = cr_rec_mul(&r, a, x);
    assert_true(isnan(c.v));
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    cr_tape_clear_error(t);
    cr_var z = cr_tape_input(t, 3.0);
    cr_var w = cr_mul(t, z, z); /* the tape records as usual */
    cr_var b = cr_rec_mul(&r, w, z);
    assert_int_equal(cr_tape_status(t), CR_OK);
    double g;
    assert_int_equal(cr_tape_gradient(t, b, &z, 1, &g), CR_OK);
    assert_close(g, 27.0, 1e-15); /* d/dz z^3 at 3 */
    cr_rec_close(&r);
    cr_tape_free(t);
}

/* A closed cursor called into the library while another cursor is open: it does not take
 * the write position (the openings are told apart); its record is refused as one made on
 * the tape (CR_EMISUSE). */
static void test_stale_cursor(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 0.25);
    cr_rec r1, r2;
    cr_rec_open(&r1, t);
    cr_var a = cr_rec_mul(&r1, x, x);
    cr_rec_close(&r1);
    cr_rec_open(&r2, t);
    cr_var b = cr_rec_mul(&r2, a, x);
    assert_int_equal(cr_tape_status(t), CR_OK);
    cr_var c = cr_rec_call1(&r1, cr_sin, b);
    assert_true(isnan(c.v));
    assert_int_equal(cr_tape_status(t), CR_EMISUSE);
    cr_rec_close(&r2);
    cr_tape_free(t);
}

/* A failure under an open cursor (a caller buffer that fills up): CR_EARENA, the cursor's
 * operations give NaN constants from then on and write nothing past the buffer; after a
 * reset the tape records through a new cursor. */
static void test_failure_under_cursor(void **state)
{
    fixture *f = *state;
    static double buf[2048];
    cr_tape_params p = {.struct_size = sizeof p, .buffer = buf, .buffer_size = sizeof buf};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    cr_var x = cr_tape_input(t, 1.0001), s = x;
    cr_rec r;
    cr_rec_open(&r, t);
    size_t k = 0;
    while (cr_tape_status(t) == CR_OK && k < 100000) {
        s = cr_rec_mul(&r, s, x);
        k++;
    }
    assert_int_equal(cr_tape_status(t), CR_EARENA);
    assert_true(k > 100 && k < 100000);
    assert_true(isnan(s.v));
    assert_true(isnan(cr_rec_mul(&r, x, x).v));
    cr_rec_close(&r);
    cr_tape_reset(t);
    x = cr_tape_input(t, 3.0);
    cr_rec_open(&r, t);
    s = cr_rec_mul(&r, x, x);
    cr_rec_close(&r);
    double g;
    assert_int_equal(cr_tape_gradient(t, s, &x, 1, &g), CR_OK);
    assert_close(g, 6.0, 1e-15);
    cr_tape_free(t);
}

/* cr_tape_clear_error under an open cursor: the cursor records inline again. */
static void test_clear_error_under_cursor(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    cr_var x = cr_tape_input(t, 0.5);
    cr_rec r;
    cr_rec_open(&r, t);
    cr_var a = cr_rec_mul(&r, x, x);
    cr_var bad = cr_rec_call2(&r, (cr_var(*)(cr_tape *, cr_var, cr_var))NULL, a, x);
    assert_true(isnan(bad.v));
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    assert_msg_has(t, "f is NULL");
    cr_tape_clear_error(t);
    cr_var b = cr_rec_mul(&r, a, x);
    cr_rec_close(&r);
    assert_int_equal(cr_tape_status(t), CR_OK);
    double g;
    assert_int_equal(cr_tape_gradient(t, b, &x, 1, &g), CR_OK);
    assert_close(g, 3.0 * 0.25, 1e-15);
    /* The records are those of the same operations on a tape. */
    cr_var xu = cr_tape_input(u, 0.5), bu = cr_mul(u, cr_mul(u, xu, xu), xu);
    assert_same_bits(b.v, bu.v);
    same_stats(t, u);
    cr_var bad1 = cr_rec_call1(&r, (cr_var(*)(cr_tape *, cr_var))NULL, x);
    assert_true(isnan(bad1.v));
    cr_tape_free(t);
    cr_tape_free(u);
}

/* A cursor on no tape records on the thread's current tape, and gives NaN constants when
 * there is none. */
static void test_current_tape(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 1.25);
    cr_tape *old = cr_tape_set_current(t);
    cr_rec r;
    cr_rec_open(&r, NULL);
    cr_var y = cr_rec_mul(&r, x, cr_rec_call1(&r, cr_exp, x));
    cr_rec_close(&r);
    double g;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    const double h = 1e-6;
    assert_close(g, ((1.25 + h) * exp(1.25 + h) - (1.25 - h) * exp(1.25 - h)) / (2 * h), 1e-8);
    cr_tape_set_current(NULL);
    cr_rec_open(&r, NULL);
    cr_var z = cr_rec_mul(&r, x, x);
    assert_true(isnan(z.v));
    cr_rec_close(&r);
    cr_tape_set_current(old);
    (cr_rec_open)(NULL, t); /* NULL cursors: nothing happens */
    (cr_rec_close)(NULL);
    assert_true(isnan((cr_rec_add)(NULL, x, x).v));
    assert_true(isnan((cr_rec_call1)(NULL, cr_sin, x).v));
    assert_int_equal(cr_tape_status(t), CR_OK);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_same_as_tape, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_forward_and_second_order_tapes, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prepared, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_chunk_boundaries, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_calls, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_record_on_tape_while_open, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_second_cursor, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_left_open, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sweep_while_open, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_closed_cursor, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reset_under_cursor, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_stale_cursor, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_failure_under_cursor, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_clear_error_under_cursor, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_current_tape, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
