/*
 * Tests of the small-call paths of array gradients (mse over 30 points as one fused kernel):
 * the boundaries of the gradient destinations (a shadow living in the caller's gradient array
 * when it is dense row-major f64 of the input's shape and overlaps nothing, and every case
 * just outside: strided, column-major, another shape, the input itself, a caller-writable
 * array, a generic pullback adding into it before or after a kernel, a scalar sweep before),
 * kernels whose arguments are not all read in place (a strided array, a scalar variable),
 * arguments sharing a slot around a constant, prepared replays whose input changes layout
 * between calls, cr_tape_value_and_gradient_arrays' inputs checked as a whole (f resetting
 * the tape is still refused; more array variables than the tape holds itself), scalar
 * operations recorded inline right after a kernel and a run of inputs, and a tape's reset of
 * its arena (inline, and with a cleanup or a second block to undo). Every gradient is checked
 * against central differences of the same function written in plain C.
 */
#include <chainrules/kernel.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

#define N 30

/* Central differences (five points) of a plain-C function of n variables. */
typedef double (*plain_fn)(const double *x, size_t n, const void *env);

static void fd_grad(plain_fn f, const void *env, const double *x0, size_t n, double *g)
{
    double x[4 * N];
    memcpy(x, x0, n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], h = 1e-4 * fmax(1.0, fabs(xi)), v[4];
        const double step[4] = {2 * h, h, -h, -2 * h};
        for (int k = 0; k < 4; k++) {
            x[i] = xi + step[k];
            v[k] = f(x, n, env);
        }
        x[i] = xi;
        g[i] = (8 * (v[1] - v[2]) - (v[0] - v[3])) / (12 * h);
    }
}

#define SQDIFF(x) cr_k_sq(cr_k_sub(x[0], x[1]))
CR_KERNEL(sqdiff, 2, SQDIFF);

/* (x0 - x1 x2)^2 */
#define RESID(x) cr_k_sq(cr_k_sub(x[0], cr_k_mul(x[1], x[2])))
CR_KERNEL(resid, 3, RESID);

static double target[N];

static void set_up(double *x)
{
    for (int i = 0; i < N; i++) {
        x[i] = 1.0 + 0.1 * i;
        target[i] = sin((double)i);
    }
}

/* mse(x) = sum((x - target)^2) / N, in plain C and on the tape */
static double mse_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (x[i] - target[i]) * (x[i] - target[i]);
    return s / (double)n;
}

static cr_var mse_tape(cr_tape *t, cr_avar X, cr_avar Y)
{
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(Y, 0)};
    return cr_div(t, cr_av_kernel_sum(t, &sqdiff, in, 2, N), cr_const((double)N));
}

/* Reset, record mse of the array xa and write its gradient into ga. */
static void mse_gradient(cr_tape *t, const cr_array *xa, cr_array *ga)
{
    static cr_array ya;
    ya = cr_array_vector(target, N);
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, xa);
    cr_var y = mse_tape(t, X, cr_av_const(&ya));
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &ga));
}

static void check_grad(const double *got, ptrdiff_t stride, const double *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ASSERT_CLOSE(got[(ptrdiff_t)i * stride], want[i], 1e-8);
}

/* ---- Destinations ------------------------------------------------------------------------ */

static void test_dest_vectors(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x[N], want[N], g[N], gs[2 * N];
    set_up(x);
    fd_grad(mse_c, NULL, x, N, want);
    cr_array xa = cr_array_vector(x, N);

    /* dense f64 vector: the shadow lives in it */
    cr_array ga = cr_array_vector(g, N);
    for (int round = 0; round < 3; round++) { /* again on the same tape: nothing left over */
        memset(g, 0x7f, sizeof g);
        mse_gradient(t, &xa, &ga);
        check_grad(g, 1, want, N);
    }
    /* flagged writable by the caller: used as it is */
    ga.flags |= CR_ARRAY_WRITABLE;
    memset(g, 0x7f, sizeof g);
    mse_gradient(t, &xa, &ga);
    check_grad(g, 1, want, N);

    /* stride 2 (not row-major): a buffer of the sweep, copied out; the gaps untouched */
    for (int i = 0; i < 2 * N; i++)
        gs[i] = -7.0;
    cr_array gv;
    size_t shape[1] = {N};
    ptrdiff_t st2[1] = {2};
    assert_int_equal(cr_array_view_init(&gv, gs, CR_DT_F64, 1, shape, st2), CR_OK);
    mse_gradient(t, &xa, &gv);
    check_grad(gs, 2, want, N);
    for (int i = 0; i < N; i++)
        ASSERT_DBL(gs[2 * i + 1], -7.0);

    /* the input array itself (overlaps an array of the tape): right, at the input's values */
    double xc[N];
    memcpy(xc, x, sizeof xc);
    cr_array xca = cr_array_vector(xc, N);
    mse_gradient(t, &xca, &xca);
    check_grad(xc, 1, want, N);

    /* an f32 destination: converted where it is written */
    float g32[N];
    cr_array g32a;
    assert_int_equal(cr_array_view_init(&g32a, g32, CR_DT_F32, 1, shape, NULL), CR_OK);
    mse_gradient(t, &xa, &g32a);
    for (int i = 0; i < N; i++)
        ASSERT_CLOSE((double)g32[i], want[i], 1e-6);
    cr_tape_free(t);
}

/* The same mse over a 3 x 10 input read in row-major order. */
static void test_dest_matrices(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x[N], want[N], g[N];
    set_up(x);
    fd_grad(mse_c, NULL, x, N, want);
    cr_array xa = cr_array_matrix(x, 3, 10);

    /* row-major 3 x 10: the shadow lives in it */
    cr_array ga = cr_array_matrix(g, 3, 10);
    memset(g, 0x7f, sizeof g);
    mse_gradient(t, &xa, &ga);
    check_grad(g, 1, want, N);

    /* column-major 3 x 10 (same shape, other strides): element (i, j) at g[i + 3 j] */
    size_t shape[2] = {3, 10};
    ptrdiff_t cm[2] = {1, 3};
    cr_array gc;
    assert_int_equal(cr_array_view_init(&gc, g, CR_DT_F64, 2, shape, cm), CR_OK);
    memset(g, 0x7f, sizeof g);
    mse_gradient(t, &xa, &gc);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 10; j++)
            ASSERT_CLOSE(g[i + 3 * j], want[i * 10 + j], 1e-8);

    /* another shape of as many elements (10 x 3): written in row-major order */
    cr_array go = cr_array_matrix(g, 10, 3);
    memset(g, 0x7f, sizeof g);
    mse_gradient(t, &xa, &go);
    check_grad(g, 1, want, N);

    /* a vector of 30 for a 3 x 10 input: another ndim, written in order too */
    cr_array gv = cr_array_vector(g, N);
    memset(g, 0x7f, sizeof g);
    mse_gradient(t, &xa, &gv);
    check_grad(g, 1, want, N);
    cr_tape_free(t);
}

/* f(x) = sum((x - target)^2) + sum(x.^2): a kernel and a generic pullback (broadcast and sum)
 * both adding into x's shadow, recorded in either order. */
static double two_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (x[i] - target[i]) * (x[i] - target[i]) + x[i] * x[i];
    return s;
}

static void two_gradient(cr_tape *t, const cr_array *xa, cr_array *ga, bool kernel_first)
{
    static cr_array ya;
    ya = cr_array_vector(target, N);
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(cr_av_const(&ya), 0)};
    cr_var a, b;
    if (kernel_first) {
        a = cr_av_kernel_sum(t, &sqdiff, in, 2, N);
        b = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(X)));
    } else {
        b = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(X)));
        a = cr_av_kernel_sum(t, &sqdiff, in, 2, N);
    }
    cr_var y = cr_add(t, a, b);
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &ga));
}

static void test_dest_with_generic_pullback(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x[N], want[N], g[N];
    set_up(x);
    fd_grad(two_c, NULL, x, N, want);
    cr_array xa = cr_array_vector(x, N);
    for (int writable = 0; writable < 2; writable++)
        for (int order = 0; order < 2; order++) {
            cr_array ga = cr_array_vector(g, N);
            if (writable)
                ga.flags |= CR_ARRAY_WRITABLE;
            memset(g, 0x7f, sizeof g);
            two_gradient(t, &xa, &ga, order == 0);
            check_grad(g, 1, want, N);
            assert_int_equal(ga.flags & CR_ARRAY_WRITABLE, writable ? CR_ARRAY_WRITABLE : 0);
        }
    /* the input array itself as the destination (it overlaps an array of the tape, which a
     * later step reads): right, at the input's values */
    for (int order = 0; order < 2; order++) {
        double xc[N];
        memcpy(xc, x, sizeof xc);
        cr_array xca = cr_array_vector(xc, N);
        two_gradient(t, &xca, &xca, order == 0);
        check_grad(xc, 1, want, N);
    }
    cr_tape_free(t);
}

/* y = mse(x) * s: a scalar sweep first (it leaves the array accumulators as they were), then
 * the gradient of the arrays. */
static double scaled_c(const double *x, size_t n, const void *env)
{
    return mse_c(x, n, env) * *(const double *)env;
}

static void test_after_scalar_sweep(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x[N], want[N], g[N], s = 1.5, gs = 0.0;
    set_up(x);
    fd_grad(scaled_c, &s, x, N, want);
    cr_array xa = cr_array_vector(x, N), ya = cr_array_vector(target, N), ga;
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var S = cr_tape_input(t, s);
    cr_var y = cr_mul(t, mse_tape(t, X, cr_av_const(&ya)), S);
    assert_ok(t, cr_tape_gradient(t, y, &S, 1, &gs));
    ASSERT_CLOSE(gs, mse_c(x, N, NULL), 1e-12);
    ga = cr_array_vector(g, N);
    cr_array *gp = &ga;
    memset(g, 0x7f, sizeof g);
    assert_ok(t, cr_tape_gradient_arrays(t, y, &S, 1, &gs, &X, 1, &gp));
    check_grad(g, 1, want, N);
    ASSERT_CLOSE(gs, mse_c(x, N, NULL), 1e-12);
    cr_tape_free(t);
}

/* ---- Kernels not read in place ---------------------------------------------------------- */

/* sum((x - s)^2) over x read with stride 2 from a buffer, s a scalar variable */
static double around_c(const double *v, size_t n, const void *env)
{
    (void)env;
    double s = 0.0;
    for (size_t i = 0; i + 1 < n; i++)
        s += (v[i] - v[n - 1]) * (v[i] - v[n - 1]);
    return s;
}

static void test_kernel_not_in_place(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double buf[2 * N], v[N + 1], want[N + 1], g[N];
    for (int i = 0; i < 2 * N; i++)
        buf[i] = 0.3 + 0.05 * i;
    for (int i = 0; i < N; i++)
        v[i] = buf[2 * i];
    v[N] = 1.7;
    fd_grad(around_c, NULL, v, N + 1, want);
    size_t shape[1] = {N};
    ptrdiff_t st2[1] = {2};
    cr_array xa, xv = cr_array_vector(v, N), ga = cr_array_vector(g, N);
    assert_int_equal(cr_array_view_init(&xa, buf, CR_DT_F64, 1, shape, st2), CR_OK);
    cr_array *gp = &ga;
    /* the same elements strided, then contiguous: the scalar argument alone keeps the
     * kernel from reading its arguments in place */
    for (int strided = 0; strided < 2; strided++) {
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, strided ? &xa : &xv);
        cr_var S = cr_tape_input(t, v[N]);
        cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_var(S)};
        cr_var y = cr_av_kernel_sum(t, &sqdiff, in, 2, N);
        double gS = 0.0;
        memset(g, 0x7f, sizeof g);
        assert_ok(t, cr_tape_gradient_arrays(t, y, &S, 1, &gS, &X, 1, &gp));
        check_grad(g, 1, want, N);
        ASSERT_CLOSE(gS, want[N], 1e-8);
    }
    cr_tape_free(t);
}

/* sum((x[i+1] - c[i] x[i])^2), i < N - 1: one slot read at offsets 1 and 0 around a constant */
static double resid_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        double r = x[i + 1] - target[i] * x[i];
        s += r * r;
    }
    return s;
}

static void test_kernel_shared_slot(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x[N], want[N], g[N];
    set_up(x);
    fd_grad(resid_c, NULL, x, N, want);
    cr_array xa = cr_array_vector(x, N), ca = cr_array_vector(target, N),
             ga = cr_array_vector(g, N);
    cr_array *gp = &ga;
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in[3] = {cr_kin_arr(X, 1), cr_kin_arr(cr_av_const(&ca), 0), cr_kin_arr(X, 0)};
    cr_var y = cr_av_kernel_sum(t, &resid, in, 3, N - 1);
    memset(g, 0x7f, sizeof g);
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    check_grad(g, 1, want, N);
    cr_tape_free(t);
}

/* ---- Prepared replays ------------------------------------------------------------------- */

static cr_status mse_fn(cr_tape *t, const cr_avar *x, size_t n, cr_var *y, void *env)
{
    (void)n;
    *y = mse_tape(t, x[0], cr_av_const(env));
    return cr_tape_status(t);
}

/* Prepared at a contiguous input, replayed at a strided one, at a matrix that is not
 * contiguous (refused), and at a contiguous one again; gradients into a dense and a strided
 * array. */
static void test_prepared_layouts(void **state)
{
    fixture *f = *state;
    double x[N], buf[2 * N], want[N], g[N], gs[2 * N], y = 0.0;
    set_up(x);
    cr_array ya = cr_array_vector(target, N), xa = cr_array_vector(x, N);
    cr_array ga = cr_array_vector(g, N), gv;
    const cr_array *xs[1] = {&xa};
    cr_array *gp[1] = {&ga};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, mse_fn, &ya, xs, 1, &p), CR_OK);
    size_t shape[1] = {N};
    ptrdiff_t st2[1] = {2};
    assert_int_equal(cr_array_view_init(&gv, gs, CR_DT_F64, 1, shape, st2), CR_OK);
    for (int round = 0; round < 2; round++) {
        /* strided input: the kernel gathers it */
        double v[N];
        for (int i = 0; i < N; i++)
            buf[2 * i] = v[i] = 0.5 - 0.03 * i + round;
        cr_array xs2;
        assert_int_equal(cr_array_view_init(&xs2, buf, CR_DT_F64, 1, shape, st2), CR_OK);
        const cr_array *in2[1] = {&xs2};
        fd_grad(mse_c, NULL, v, N, want);
        memset(g, 0x7f, sizeof g);
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, in2, 1, &y, gp), CR_OK);
        ASSERT_CLOSE(y, mse_c(v, N, NULL), 1e-12);
        check_grad(g, 1, want, N);
        /* strided gradient array */
        cr_array *gp2[1] = {&gv};
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, in2, 1, &y, gp2), CR_OK);
        check_grad(gs, 2, want, N);
        /* contiguous input again */
        for (int i = 0; i < N; i++)
            x[i] = 1.0 + 0.1 * i - 0.2 * round;
        fd_grad(mse_c, NULL, x, N, want);
        memset(g, 0x7f, sizeof g);
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gp), CR_OK);
        ASSERT_CLOSE(y, mse_c(x, N, NULL), 1e-12);
        check_grad(g, 1, want, N);
    }
    cr_prepared_free(p);

    /* a 3 x 10 input, then the same shape not contiguous: refused, and the next call right */
    cr_array xm = cr_array_matrix(x, 3, 10), gm = cr_array_matrix(g, 3, 10);
    const cr_array *xms[1] = {&xm};
    cr_array *gms[1] = {&gm};
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, mse_fn, &ya, xms, 1, &p), CR_OK);
    size_t mshape[2] = {3, 10};
    ptrdiff_t cm[2] = {1, 3};
    cr_array xnc;
    assert_int_equal(cr_array_view_init(&xnc, buf, CR_DT_F64, 2, mshape, cm), CR_OK);
    const cr_array *ncs[1] = {&xnc};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, ncs, 1, &y, gms), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "sqdiff");
    fd_grad(mse_c, NULL, x, N, want);
    memset(g, 0x7f, sizeof g);
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xms, 1, &y, gms), CR_OK);
    check_grad(g, 1, want, N);
    cr_prepared_free(p);
}

/* ---- cr_tape_value_and_gradient_arrays: its inputs checked as a whole ------------------- */

/* mse of the input, after recording other array inputs (more slots than inputs: five
 * extra ones go past the tape's own few into a table in the arena) */
static cr_status mse_more_slots_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    for (int k = 0; k < 5; k++)
        (void)cr_tape_array_input(t, env);
    *y = mse_tape(t, xs[0], cr_av_const(env));
    return cr_tape_status(t);
}

/* resets the tape and records mse of a new input: the given inputs are then of the
 * recording before the reset */
static cr_status mse_after_reset_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    const cr_array *x = xs[0].a;
    cr_tape_reset(t);
    *y = mse_tape(t, cr_tape_array_input(t, x), cr_av_const(env));
    return cr_tape_status(t);
}

static void test_value_and_gradient_inputs(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x[N], want[N], g[N], y = 0.0;
    set_up(x);
    fd_grad(mse_c, NULL, x, N, want);
    cr_array xa = cr_array_vector(x, N), ya = cr_array_vector(target, N),
             ga = cr_array_vector(g, N);
    const cr_array *xs[1] = {&xa};
    cr_array *gp = &ga;
    /* the inputs made by the call (twice: the same tape again, its slots reused), then
     * with more array variables than the tape holds itself, then again with few */
    cr_ad_array_fn fns[4] = {mse_fn, mse_fn, mse_more_slots_fn, mse_fn};
    for (int k = 0; k < 4; k++) {
        memset(g, 0x7f, sizeof g);
        assert_ok(t, cr_tape_value_and_gradient_arrays(t, fns[k], &ya, xs, 1, &y, &gp));
        ASSERT_CLOSE(y, mse_c(x, N, NULL), 1e-14);
        check_grad(g, 1, want, N);
    }
    /* f reset the tape: its inputs are of the recording before, refused as before */
    assert_int_equal(cr_tape_value_and_gradient_arrays(t, mse_after_reset_fn, &ya, xs, 1, &y, &gp),
                     CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_gradient_arrays: array input 0");
    assert_contains(cr_ctx_errmsg(f->ctx), "before its last reset");
    /* and the tape works on */
    memset(g, 0x7f, sizeof g);
    assert_ok(t, cr_tape_value_and_gradient_arrays(t, mse_fn, &ya, xs, 1, &y, &gp));
    check_grad(g, 1, want, N);
    cr_tape_free(t);
}

/* ---- Scalar operations after a kernel and after a run of inputs -------------------------- */

/* (mse(x) * s0 - s1) * s1 + s0: inline operations right after the kernel's variable and after
 * the scalar inputs */
static double mixed_c(const double *v, size_t n, const void *env)
{
    (void)env;
    double m = mse_c(v, n - 2, NULL), s0 = v[n - 2], s1 = v[n - 1];
    return (m * s0 - s1) * s1 + s0;
}

static void test_scalars_after_kernel(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double v[N + 2], want[N + 2], g[N], gs[2];
    set_up(v);
    v[N] = 0.7;
    v[N + 1] = -1.3;
    fd_grad(mixed_c, NULL, v, N + 2, want);
    cr_array xa = cr_array_vector(v, N), ya = cr_array_vector(target, N),
             ga = cr_array_vector(g, N);
    cr_array *gp = &ga;
    for (int round = 0; round < 2; round++) {
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_var m = mse_tape(t, X, cr_av_const(&ya));
        cr_var s[2];
        assert_ok(t, cr_tape_inputs(t, v + N, 2, s));
        cr_var y = cr_add(t, cr_mul(t, cr_sub(t, cr_mul(t, m, s[0]), s[1]), s[1]), s[0]);
        ASSERT_CLOSE(y.v, mixed_c(v, N + 2, NULL), 1e-14);
        memset(g, 0x7f, sizeof g);
        assert_ok(t, cr_tape_gradient_arrays(t, y, s, 2, gs, &X, 1, &gp));
        check_grad(g, 1, want, N);
        ASSERT_CLOSE(gs[0], want[N], 1e-8);
        ASSERT_CLOSE(gs[1], want[N + 1], 1e-8);
    }
    cr_tape_free(t);
}

/* ---- A tape's reset of its arena -------------------------------------------------------- */

static void count_cleanup(void *env)
{
    ++*(int *)env;
}

/* The reset keeps the arena's first block and sets its offsets back inline when there is
 * nothing else to undo; a cleanup registered on it, or a block past the first, takes the
 * arena's own reset (the cleanup runs once, the memory is kept, the next recordings work). */
static void test_reset_arena(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x[N], want[N], g[N];
    set_up(x);
    fd_grad(mse_c, NULL, x, N, want);
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N);
    cr_arena *arena = cr_tape_arena(t);
    mse_gradient(t, &xa, &ga);
    size_t cap = cr_arena_capacity(arena);
    for (int round = 0; round < 3; round++) { /* nothing to undo but the offsets */
        memset(g, 0x7f, sizeof g);
        mse_gradient(t, &xa, &ga);
        check_grad(g, 1, want, N);
        assert_int_equal(cr_arena_capacity(arena), cap);
    }
    /* a cleanup: run at the next reset, once */
    int runs = 0;
    assert_int_equal(cr_arena_defer(arena, count_cleanup, &runs), CR_OK);
    memset(g, 0x7f, sizeof g);
    mse_gradient(t, &xa, &ga);
    assert_int_equal(runs, 1);
    check_grad(g, 1, want, N);
    mse_gradient(t, &xa, &ga);
    assert_int_equal(runs, 1);
    /* a block past the first: the next recording goes back to the first block, and the
     * arena keeps what it holds */
    assert_non_null(cr_arena_alloc(arena, 8 * cap, 8));
    size_t grown = cr_arena_capacity(arena);
    assert_true(grown > cap);
    for (int round = 0; round < 3; round++) {
        memset(g, 0x7f, sizeof g);
        mse_gradient(t, &xa, &ga);
        check_grad(g, 1, want, N);
        assert_int_equal(cr_arena_capacity(arena), grown);
    }
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dest_vectors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dest_matrices, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dest_with_generic_pullback, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_after_scalar_sweep, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_kernel_not_in_place, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_kernel_shared_slot, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prepared_layouts, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_value_and_gradient_inputs, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scalars_after_kernel, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reset_arena, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
