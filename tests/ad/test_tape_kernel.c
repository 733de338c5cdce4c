/*
 * Tests of fused elementwise kernels (kernel.h): gradients of kernel sums and kernel arrays
 * checked against central finite differences of the same functions written in plain C
 * (Rosenbrock over offsets 0 and 1 of one array, mse against a constant and against a second
 * array variable, elementary functions, scalar variables broadcast, kernels mixed with array
 * functions, strided and n-d arrays, f32 arrays), the primal bit for bit against the plain double
 * instantiation, every error, and reuse of the tape's memory across resets.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"
#include <chainrules/kernel.h>
#include <stdint.h>

/* Central differences (five points, fourth order) of a plain-C function of n variables. */
typedef double (*plain_fn)(const double *x, size_t n, const void *env);

static double at(plain_fn f, const void *env, double *x, size_t n, size_t i, double v)
{
    double xi = x[i];
    x[i] = v;
    double y = f(x, n, env);
    x[i] = xi;
    return y;
}

static void fd_grad(plain_fn f, const void *env, double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], h = 1e-4 * fmax(1.0, fabs(xi));
        double f2 = at(f, env, x, n, i, xi + 2 * h), f1 = at(f, env, x, n, i, xi + h);
        double m1 = at(f, env, x, n, i, xi - h), m2 = at(f, env, x, n, i, xi - 2 * h);
        g[i] = (8 * (f1 - m1) - (f2 - m2)) / (12 * h);
    }
}

static void assert_grad(const double *got, const double *want, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        ASSERT_CLOSE(got[i], want[i], tol);
}

/* ---- Kernels ------------------------------------------------------------------------------ */

#define ROSEN(x) \
    cr_k_add(cr_k_mul(100.0, cr_k_sq(cr_k_sub(x[1], cr_k_sq(x[0])))), cr_k_sq(cr_k_sub(1.0, x[0])))
CR_KERNEL(rosen_term, 2, ROSEN);

#define SQDIFF(x) cr_k_sq(cr_k_sub(x[0], x[1]))
CR_KERNEL(sqdiff, 2, SQDIFF);

/* sin, exp, tanh, log, sqrt and the other one-argument functions, for x in (0.1, 0.9) */
#define ELEM(x)                                                                            \
    cr_k_add(cr_k_add(cr_k_add(cr_k_mul(cr_k_sin(x[0]), cr_k_exp(x[0])), cr_k_tanh(x[0])), \
                      cr_k_add(cr_k_log(x[0]), cr_k_sqrt(x[0]))),                          \
             cr_k_add(cr_k_add(cr_k_add(cr_k_cos(x[0]), cr_k_tan(x[0])),                   \
                               cr_k_add(cr_k_asin(x[0]), cr_k_acos(cr_k_mul(0.5, x[0])))), \
                      cr_k_add(cr_k_add(cr_k_atan(x[0]), cr_k_sinh(x[0])),                 \
                               cr_k_add(cr_k_add(cr_k_cosh(x[0]), cr_k_expm1(x[0])),       \
                                        cr_k_add(cr_k_log1p(x[0]),                         \
                                                 cr_k_add(cr_k_cbrt(x[0]),                 \
                                                          cr_k_abs(cr_k_neg(x[0]))))))))
CR_KERNEL(elem, 1, ELEM);

static double elem_c(double x)
{
    return ((sin(x) * exp(x) + tanh(x)) + (log(x) + sqrt(x))) +
           (((cos(x) + tan(x)) + (asin(x) + acos(0.5 * x))) +
            ((atan(x) + sinh(x)) + ((cosh(x) + expm1(x)) + (log1p(x) + (cbrt(x) + fabs(-x))))));
}

/* the two-argument functions and / with every mix of dual and constant operands */
#define BIN(x)                                                                   \
    cr_k_add(cr_k_add(cr_k_pow(x[0], x[1]), cr_k_atan2(x[0], x[1])),             \
             cr_k_add(cr_k_add(cr_k_hypot(x[0], x[1]), cr_k_div(x[0], x[1])),    \
                      cr_k_add(cr_k_add(cr_k_pow(x[0], 2.5), cr_k_pow(2, x[1])), \
                               cr_k_add(cr_k_div(3, x[0]), cr_k_div(x[1], 4)))))
CR_KERNEL(binfns, 2, BIN);

static double bin_c(double a, double b)
{
    return (pow(a, b) + atan2(a, b)) +
           ((hypot(a, b) + a / b) + ((pow(a, 2.5) + pow(2, b)) + (3 / a + b / 4)));
}

/* exp(-s x) y with s a scalar */
#define DECAY(x) cr_k_mul(cr_k_exp(cr_k_neg(cr_k_mul(x[0], x[1]))), x[2])
CR_KERNEL(decay, 3, DECAY);

/* (x0 - x1) x2 + x3 / 2: four arguments */
#define FOUR(x) cr_k_add(cr_k_mul(cr_k_sub(x[0], x[1]), x[2]), cr_k_div(x[3], 2.0))
CR_KERNEL(four, 4, FOUR);

/* a body that does not depend on its argument */
#define CONSTK(x) ((void)(x), 2.5)
CR_KERNEL(constk, 1, CONSTK);

#define ID(x) x[0]
CR_KERNEL(idk, 1, ID);

/* ---- Rosenbrock: one array, offsets 0 and 1 ------------------------------------------------- */

static double rosen_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1 - x[i];
        s += 100 * a * a + b * b;
    }
    return s;
}

static void rosen_check(fixture *f, size_t n)
{
    double *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g), *want = malloc(n * sizeof *want);
    assert_non_null(x);
    assert_non_null(g);
    assert_non_null(want);
    for (size_t i = 0; i < n; i++)
        x[i] = 0.9 * sin(0.7 * (double)i + 0.3) + 0.1 * (double)(i % 3);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_vector(x, n), ga = cr_array_vector(g, n);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
    cr_var y = cr_av_kernel_sum(t, &rosen_term, in, 2, n - 1);
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, rosen_c(x, n, NULL), 1e-13);
    cr_tape_stats st;
    assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
    assert_int_equal(st.nrecords, 1); /* the kernel: one record (the array input has none) */
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(rosen_c, NULL, x, n, want);
    assert_grad(g, want, n, 1e-6);
    cr_tape_free(t);
    free(x);
    free(g);
    free(want);
}

static void test_rosen(void **state)
{
    rosen_check(*state, 7);
    rosen_check(*state, 1000);
}

/* ---- mse: y constant, and y an array variable -------------------------------------------------
 */

enum { MSE_N = 30 };

static double mse_c(const double *xy, size_t n, const void *env)
{
    const double *yc = env; /* NULL: y is xy[n/2 ..] */
    size_t m = yc ? n : n / 2;
    double s = 0;
    for (size_t i = 0; i < m; i++) {
        double d = xy[i] - (yc ? yc[i] : xy[m + i]);
        s += d * d;
    }
    return s / (double)m;
}

static void test_mse(void **state)
{
    fixture *f = *state;
    double xy[2 * MSE_N], g[2 * MSE_N], want[2 * MSE_N];
    for (size_t i = 0; i < 2 * MSE_N; i++)
        xy[i] = 1.0 + 0.1 * (double)i + (i >= MSE_N ? sin((double)i) : 0.0);
    double *x = xy, *yv = xy + MSE_N;
    cr_array xa = cr_array_vector(x, MSE_N), ya = cr_array_vector(yv, MSE_N);
    cr_array gx = cr_array_vector(g, MSE_N), gy = cr_array_vector(g + MSE_N, MSE_N);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);

    /* y a constant array */
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(cr_av_const(&ya), 0)};
    cr_var y = cr_div(t, cr_av_kernel_sum(t, &sqdiff, in, 2, MSE_N), cr_const((double)MSE_N));
    assert_close(y.v, mse_c(x, MSE_N, yv), 1e-14);
    cr_array *gp = &gx;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(mse_c, yv, x, MSE_N, want);
    assert_grad(g, want, MSE_N, 1e-8);

    /* y a second array variable: gradients with respect to both */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_avar Y = cr_tape_array_input(t, &ya);
    in[0] = cr_kin_arr(X, 0);
    in[1] = cr_kin_arr(Y, 0);
    y = cr_div(t, cr_av_kernel_sum(t, &sqdiff, in, 2, MSE_N), cr_const((double)MSE_N));
    cr_avar as[2] = {X, Y};
    cr_array *gps[2] = {&gx, &gy};
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, as, 2, gps));
    fd_grad(mse_c, NULL, xy, 2 * MSE_N, want);
    assert_grad(g, want, 2 * MSE_N, 1e-8);
    cr_tape_free(t);
}

/* ---- Elementary functions ----------------------------------------------------------------------
 */

static double elem_sum_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += elem_c(x[i]);
    return s;
}

static double bin_sum_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0;
    for (size_t i = 0; i < n / 2; i++)
        s += bin_c(x[i], x[n / 2 + i]);
    return s;
}

static void test_functions(void **state)
{
    fixture *f = *state;
    enum { N = 9 };
    double x[2 * N], g[2 * N], want[2 * N];
    for (size_t i = 0; i < N; i++) {
        x[i] = 0.15 + 0.08 * (double)i;
        x[N + i] = 0.3 + 0.2 * (double)i;
    }
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in = cr_kin_arr(X, 0);
    cr_var y = cr_av_kernel_sum(t, &elem, &in, 1, N);
    assert_close(y.v, elem_sum_c(x, N, NULL), 1e-14);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(elem_sum_c, NULL, x, N, want);
    assert_grad(g, want, N, 1e-7);

    cr_tape_reset(t);
    cr_array aa = cr_array_vector(x, N), ba = cr_array_vector(x + N, N);
    cr_array g1 = cr_array_vector(g, N), g2 = cr_array_vector(g + N, N);
    cr_avar A = cr_tape_array_input(t, &aa), B = cr_tape_array_input(t, &ba);
    cr_kin in2[2] = {cr_kin_arr(A, 0), cr_kin_arr(B, 0)};
    y = cr_av_kernel_sum(t, &binfns, in2, 2, N);
    assert_close(y.v, bin_sum_c(x, 2 * N, NULL), 1e-14);
    cr_avar as[2] = {A, B};
    cr_array *gps[2] = {&g1, &g2};
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, as, 2, gps));
    fd_grad(bin_sum_c, NULL, x, 2 * N, want);
    assert_grad(g, want, 2 * N, 1e-7);

    /* The rows of the elementary functions: an unknown function gives NaN. */
    double d, d2[2];
    assert_true(isnan(cr_k_row1(CR_K_NFN1, 1.0, &d)) && isnan(d));
    assert_true(isnan(cr_k_row2(CR_K_NFN2, 1.0, 2.0, d2)) && isnan(d2[0]) && isnan(d2[1]));
    cr_tape_free(t);
}

/* ---- Scalar variables broadcast, four arguments, constant bodies -------------------------------
 */

/* sum(exp(-s x_i) y_i): variables s, x[0..n), y[0..n) */
static double decay_c(const double *v, size_t n, const void *env)
{
    (void)env;
    size_t m = (n - 1) / 2;
    double s = 0;
    for (size_t i = 0; i < m; i++)
        s += exp(-(v[0] * v[1 + i])) * v[1 + m + i];
    return s;
}

static void test_scalar_args(void **state)
{
    fixture *f = *state;
    enum { N = 300 }; /* more than one block */
    double v[1 + 2 * N], g[1 + 2 * N], want[1 + 2 * N];
    v[0] = 0.7;
    for (size_t i = 0; i < 2 * N; i++)
        v[1 + i] = cos(0.01 * (double)i) + 0.2;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_vector(v + 1, N), ya = cr_array_vector(v + 1 + N, N);
    cr_array gx = cr_array_vector(g + 1, N), gy = cr_array_vector(g + 1 + N, N);
    cr_var s = cr_tape_input(t, v[0]);
    cr_avar X = cr_tape_array_input(t, &xa), Y = cr_tape_array_input(t, &ya);
    cr_kin in[3] = {cr_kin_var(s), cr_kin_arr(X, 0), cr_kin_arr(Y, 0)};
    cr_var y = cr_av_kernel_sum(t, &decay, in, 3, N);
    assert_close(y.v, decay_c(v, 1 + 2 * N, NULL), 1e-13);
    cr_avar as[2] = {X, Y};
    cr_array *gps[2] = {&gx, &gy};
    assert_ok(t, cr_tape_gradient_arrays(t, y, &s, 1, &g[0], as, 2, gps));
    fd_grad(decay_c, NULL, v, 1 + 2 * N, want);
    assert_grad(g, want, 1 + 2 * N, 1e-7);

    /* Only scalar variables (arrays constant): the scalar sweeps run over the record. */
    cr_tape_reset(t);
    s = cr_tape_input(t, v[0]);
    in[0] = cr_kin_var(s);
    in[1] = cr_kin_arr(cr_av_const(&xa), 0);
    in[2] = cr_kin_arr(cr_av_const(&ya), 0);
    y = cr_av_kernel_sum(t, &decay, in, 3, N);
    double gs;
    assert_ok(t, cr_tape_gradient(t, y, &s, 1, &gs));
    ASSERT_CLOSE(gs, want[0], 1e-7);

    /* Four arguments, one a scalar variable, one a constant, one an array read twice; the
     * array result's pullback (cr_tape_avjp) against the transposed Jacobian. */
    cr_tape_reset(t);
    enum { M = 5 };
    double a[M + 1] = {0.5, -1, 2, 0.25, 3, -2}, ab[M + 1], yb[M] = {1, -2, 0.5, 3, 1.5}, sb;
    cr_array aa = cr_array_vector(a, M + 1), ba = cr_array_vector(ab, M + 1);
    cr_array ybar = cr_array_vector(yb, M);
    cr_var c = cr_tape_input(t, 1.5);
    cr_avar A = cr_tape_array_input(t, &aa);
    cr_kin in4[4] = {cr_kin_arr(A, 1), cr_kin_var(c), cr_kin_arr(A, 0), cr_kin_const(4.0)};
    cr_avar Z = cr_av_kernel(t, &four, in4, 4, M);
    assert_ok(t, cr_tape_status(t));
    for (size_t i = 0; i < M; i++)
        ASSERT_DBL(((const double *)Z.a->data)[i], (a[i + 1] - 1.5) * a[i] + 4.0 / 2.0);
    cr_array *bp = &ba;
    assert_ok(t, cr_tape_avjp(t, Z, &ybar, &c, 1, &sb, &A, 1, &bp));
    /* z_i = (a_{i+1} - c) a_i + 2: dz_i/da_{i+1} = a_i, dz_i/da_i = a_{i+1} - c, dz_i/dc = -a_i */
    double wa[M + 1] = {0}, wc = 0;
    for (size_t i = 0; i < M; i++) {
        wa[i + 1] += yb[i] * a[i];
        wa[i] += yb[i] * (a[i + 1] - 1.5);
        wc -= yb[i] * a[i];
    }
    /* the Jacobian above is the one of the plain-C function: check it by differences */
    for (size_t i = 0; i < M; i++) {
        double h = 1e-6, zp = (a[i + 1] - 1.5) * (a[i] + h), zm = (a[i + 1] - 1.5) * (a[i] - h);
        ASSERT_CLOSE((zp - zm) / (2 * h), a[i + 1] - 1.5, 1e-8);
    }
    assert_grad(ab, wa, M + 1, 1e-14);
    ASSERT_CLOSE(sb, wc, 1e-14);

    /* A body that does not depend on its argument: value 2.5, zero gradient. */
    cr_tape_reset(t);
    A = cr_tape_array_input(t, &aa);
    cr_kin ik = cr_kin_arr(A, 0);
    y = cr_av_kernel_sum(t, &constk, &ik, 1, M + 1);
    ASSERT_DBL(y.v, 2.5 * (M + 1));
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &A, 1, &bp));
    for (size_t i = 0; i <= M; i++)
        ASSERT_DBL(ab[i], 0.0);
    cr_tape_free(t);
}

/* ---- Kernels and array functions mixed ---------------------------------------------------------
 */

/* sum(K) + dot(K, x) with K = sqdiff(sin.(x), c) ... written in plain C */
static double mixed_c(const double *x, size_t n, const void *env)
{
    const double *c = env;
    double s = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        double k = (sin(x[i]) - c[i]) * (sin(x[i]) - c[i]);
        s += k;
        d += k * x[i];
    }
    return s + d + 0.5 * (x[0] - x[1]) * (x[0] - x[1]);
}

static void test_mixed(void **state)
{
    fixture *f = *state;
    enum { N = 11 };
    double x[N], c[N], g[N], want[N];
    for (size_t i = 0; i < N; i++) {
        x[i] = 0.3 * (double)i - 1.0;
        c[i] = cos((double)i);
    }
    cr_array xa = cr_array_vector(x, N), ca = cr_array_vector(c, N), ga = cr_array_vector(g, N);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    for (int order = 0; order < 2; order++) {
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_var extra = cr_const(0.0);
        /* A kernel over x itself, recorded before (order 0) or after (order 1) the array
         * functions: its shadow is fresh, or already holds another cotangent. */
        cr_kin e2[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
        if (order == 0)
            extra = cr_mul(t, cr_const(0.5), cr_av_kernel_sum(t, &sqdiff, e2, 2, 1));
        /* an array function's result fed into a kernel, the kernel's result into cr_av_sum and
         * cr_av_dot */
        cr_avar S = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(X));
        cr_kin in[2] = {cr_kin_arr(S, 0), cr_kin_arr(cr_av_const(&ca), 0)};
        cr_avar K = cr_av_kernel(t, &sqdiff, in, 2, N);
        cr_var y = cr_add(t, cr_av_sum(t, K), cr_av_dot(t, K, X));
        if (order == 1)
            extra = cr_mul(t, cr_const(0.5), cr_av_kernel_sum(t, &sqdiff, e2, 2, 1));
        y = cr_add(t, y, extra);
        assert_ok(t, cr_tape_status(t));
        assert_close(y.v, mixed_c(x, N, c), 1e-13);
        cr_array *gp = &ga;
        assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
        fd_grad(mixed_c, c, x, N, want);
        assert_grad(g, want, N, 1e-7);
    }
    cr_tape_free(t);
}

/* ---- Strided, n-d, f32
 * ---------------------------------------------------------------------------- */

static double strided_c(const double *x, size_t n, const void *env)
{
    (void)env; /* x: the 4 strided elements; rosen over them */
    return rosen_c(x, n, NULL);
}

static void test_layouts(void **state)
{
    fixture *f = *state;
    /* every other element of a buffer, a view taken with cr_av_slice, and a 2x3 matrix */
    double buf[8] = {0.3, 9, -0.8, 9, 1.2, 9, 0.4, 9}, g[4], want[4], gb[8];
    size_t shape[1] = {4};
    ptrdiff_t st2[1] = {2};
    cr_array xa, ga = cr_array_vector(g, 4);
    assert_int_equal(cr_array_view_init(&xa, buf, CR_DT_F64, 1, shape, st2), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
    cr_var y = cr_av_kernel_sum(t, &rosen_term, in, 2, 3);
    double xs[4] = {buf[0], buf[2], buf[4], buf[6]};
    assert_close(y.v, rosen_c(xs, 4, NULL), 1e-14);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(strided_c, NULL, xs, 4, want);
    assert_grad(g, want, 4, 1e-7);

    /* A slice of a dense array (a view record) fed into a kernel. */
    cr_tape_reset(t);
    cr_array ba = cr_array_vector(buf, 8), gba = cr_array_vector(gb, 8);
    cr_avar B = cr_tape_array_input(t, &ba);
    cr_avar V = cr_av_slice(t, B, 2, 6);
    cr_kin vi = cr_kin_arr(V, 1);
    y = cr_av_kernel_sum(t, &idk, &vi, 1, 3);
    ASSERT_DBL(y.v, ((buf[3] + buf[4]) + buf[5]) + 0.0);
    gp = &gba;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &B, 1, &gp));
    for (size_t i = 0; i < 8; i++)
        ASSERT_DBL(gb[i], i >= 3 && i < 6 ? 1.0 : 0.0);

    /* A contiguous 2x3 matrix, read in row-major order from offset 2. */
    cr_tape_reset(t);
    double m[6] = {1, 2, 3, 4, 5, 6}, gm[6];
    size_t ms[2] = {2, 3};
    cr_array ma, gma;
    assert_int_equal(cr_array_view_init(&ma, m, CR_DT_F64, 2, ms, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&gma, gm, CR_DT_F64, 2, ms, NULL), CR_OK);
    cr_avar M = cr_tape_array_input(t, &ma);
    cr_kin mi[2] = {cr_kin_arr(M, 2), cr_kin_arr(M, 0)};
    y = cr_av_kernel_sum(t, &sqdiff, mi, 2, 4); /* sum (m[i+2] - m[i])^2 = 4 * 4 */
    ASSERT_DBL(y.v, 16.0);
    gp = &gma;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &M, 1, &gp));
    /* d/dm_k: 2 (m_k - m_{k-2}) [k >= 2] - 2 (m_{k+2} - m_k) [k + 2 < 6] */
    for (size_t k = 0; k < 6; k++) {
        double w = (k >= 2 ? 2 * (m[k] - m[k - 2]) : 0) - (k + 2 < 6 ? 2 * (m[k + 2] - m[k]) : 0);
        ASSERT_DBL(gm[k], w);
    }

    /* Complex arrays and non-contiguous matrices are refused, naming the kernel. */
    cr_tape_reset(t);
    cr_complex xc[3] = {1.0, 2.0, 3.0};
    size_t s3[1] = {3};
    cr_array fa;
    assert_int_equal(cr_array_view_init(&fa, xc, CR_DT_C128, 1, s3, NULL), CR_OK);
    cr_avar F = cr_tape_array_input(t, &fa);
    cr_kin fi = cr_kin_arr(F, 0);
    y = cr_av_kernel_sum(t, &idk, &fi, 1, 3);
    assert_true(isnan(y.v));
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "kernel idk: argument 0 is an array of c128: kernels read "
                                       "f64 and f32 arrays");
    cr_tape_reset(t);
    size_t s22[2] = {2, 2};
    ptrdiff_t st22[2] = {3, 1}; /* the left 2x2 block of m */
    cr_array nc;
    assert_int_equal(cr_array_view_init(&nc, m, CR_DT_F64, 2, s22, st22), CR_OK);
    F = cr_tape_array_input(t, &nc);
    fi = cr_kin_arr(F, 0);
    cr_avar r = cr_av_kernel(t, &idk, &fi, 1, 4);
    assert_null(r.a);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "not contiguous");
    cr_tape_free(t);
}

/* ---- f32 arrays ------------------------------------------------------------------------------ */

/* mse of x against env's y (n elements): sum (x_i - y_i)^2 */
static double mse32_c(const double *x, size_t n, const void *env)
{
    const double *y = env;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (x[i] - y[i]) * (x[i] - y[i]);
    return s;
}

enum { N32 = 5 };

static cr_status mse32_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    cr_kin in[2] = {cr_kin_arr(xs[0], 0), cr_kin_arr(cr_av_const(env), 0)};
    *y = cr_av_kernel_sum(t, &sqdiff, in, 2, N32);
    return cr_tape_status(t);
}

/* The gradient of mse32 at x (f64) from a first-order tape, for differences along v. */
static void mse32_grad(fixture *f, const cr_array *ya, const double *x, double *g)
{
    double xc[N32];
    memcpy(xc, x, sizeof xc);
    cr_array xa = cr_array_vector(xc, N32), ga = cr_array_vector(g, N32);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y;
    assert_int_equal(mse32_t(t, &X, 1, &y, (void *)ya), CR_OK);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    cr_tape_free(t);
}

/*
 * Kernels read f32 arrays as doubles: an f32 input of stride 2 against an f64 constant, as a
 * sum (gradients into f32 and f64 arrays), as an array result (f64) summed by a rule, in a
 * forward sweep, on a second-order tape and in a prepared gradient; each against central
 * differences of the same function in plain C at the f32 values.
 */
static void test_f32(void **state)
{
    fixture *f = *state;
    float buf[2 * N32];
    double xd[N32], yv[N32] = {0.3, -0.2, 1.1, 0.5, -0.7}, want[N32];
    for (size_t i = 0; i < N32; i++) {
        buf[2 * i] = (float)(0.25 * (double)i - 0.4);
        buf[2 * i + 1] = 99.0f;
        xd[i] = (double)buf[2 * i];
    }
    size_t shape[1] = {N32};
    ptrdiff_t st2[1] = {2};
    cr_array xa, ya = cr_array_vector(yv, N32);
    assert_int_equal(cr_array_view_init(&xa, buf, CR_DT_F32, 1, shape, st2), CR_OK);
    fd_grad(mse32_c, yv, xd, N32, want);

    /* The sum, gradients into an f32 and an f64 array. */
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y;
    assert_ok(t, mse32_t(t, &X, 1, &y, &ya));
    assert_close(y.v, mse32_c(xd, N32, yv), 1e-14);
    float g32[N32];
    double g64[N32];
    cr_array g32a, g64a = cr_array_vector(g64, N32);
    assert_int_equal(cr_array_view_init(&g32a, g32, CR_DT_F32, 1, shape, NULL), CR_OK);
    cr_array *gp = &g32a;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    for (size_t i = 0; i < N32; i++)
        ASSERT_CLOSE((double)g32[i], want[i], 1e-6);
    gp = &g64a;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    assert_grad(g64, want, N32, 1e-7);

    /* The array form: an f64 result, summed by the sum rule. */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(cr_av_const(&ya), 0)};
    cr_avar r = cr_av_kernel(t, &sqdiff, in, 2, N32);
    assert_non_null(r.a);
    assert_int_equal(r.a->dtype, CR_DT_F64);
    y = cr_av_sum(t, r);
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    assert_grad(g64, want, N32, 1e-7);
    cr_tape_free(t);

    /* A forward sweep along an f32 direction: ẏ = Σ ∂y/∂x_i ẋ_i. */
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_FORWARD};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    X = cr_tape_array_input(t, &xa);
    assert_ok(t, mse32_t(t, &X, 1, &y, &ya));
    float dir[N32] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f};
    cr_array da;
    assert_int_equal(cr_array_view_init(&da, dir, CR_DT_F32, 1, shape, NULL), CR_OK);
    const cr_array *dp = &da;
    double ydot, ydot_want = 0.0;
    for (size_t i = 0; i < N32; i++)
        ydot_want += want[i] * (double)dir[i];
    assert_ok(t, cr_tape_ajvp(t, NULL, NULL, 0, &X, &dp, 1, &y, 1, &ydot, NULL, 0, NULL));
    ASSERT_CLOSE(ydot, ydot_want, 1e-7);
    cr_tape_free(t);

    /* H v on a second-order tape, against central differences of the gradient along v. */
    tp.flags = CR_TAPE_SECOND_ORDER;
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    X = cr_tape_array_input(t, &xa);
    assert_ok(t, mse32_t(t, &X, 1, &y, &ya));
    double hv[N32], hv_want[N32], xp[N32], xm[N32], gp_[N32], gm_[N32], h = 1e-4;
    for (size_t i = 0; i < N32; i++) {
        xp[i] = xd[i] + h * (double)dir[i];
        xm[i] = xd[i] - h * (double)dir[i];
    }
    mse32_grad(f, &ya, xp, gp_);
    mse32_grad(f, &ya, xm, gm_);
    for (size_t i = 0; i < N32; i++)
        hv_want[i] = (gp_[i] - gm_[i]) / (2 * h);
    cr_array hva = cr_array_vector(hv, N32);
    cr_array *hp = &hva;
    assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &dp, &hp));
    assert_grad(hv, hv_want, N32, 1e-7);
    cr_tape_free(t);

    /* Prepared once, replayed at new f32 values. */
    const cr_array *xs[1] = {&xa};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, mse32_t, &ya, xs, 1, &p), CR_OK);
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < N32; i++) {
            buf[2 * i] += 0.125f * (float)(round + 1);
            xd[i] = (double)buf[2 * i];
        }
        fd_grad(mse32_c, yv, xd, N32, want);
        double yp;
        gp = &g64a;
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &yp, &gp), CR_OK);
        assert_close(yp, mse32_c(xd, N32, yv), 1e-14);
        assert_grad(g64, want, N32, 1e-7);
    }
    cr_prepared_free(p);
}

/* ---- The primal, bit for bit --------------------------------------------------------------------
 */

static void test_primal_bits(void **state)
{
    fixture *f = *state;
    enum { N = 601 }; /* three blocks, not a multiple of 4 */
    double x[N + 1];
    for (size_t i = 0; i <= N; i++)
        x[i] = sin(1.3 * (double)i) * 1.7;
    cr_array xa = cr_array_vector(x, N + 1);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
    cr_avar Y = cr_av_kernel(t, &rosen_term, in, 2, N);
    cr_var s = cr_av_kernel_sum(t, &rosen_term, in, 2, N);
    assert_ok(t, cr_tape_status(t));
    /* the plain double instantiation, element by element, and the documented sum order */
    double lane[4] = {0, 0, 0, 0}, *ym = malloc(N * sizeof *ym);
    const double *xp[2] = {x, x + 1};
    assert_non_null(ym);
    rosen_term.map(N, xp, ym);
    for (size_t i = 0; i < N; i++) {
        double e = ym[i];
        double plain = 100.0 * ((x[i + 1] - x[i] * x[i]) * (x[i + 1] - x[i] * x[i])) +
                       (1.0 - x[i]) * (1.0 - x[i]);
        assert_memory_equal(&((const double *)Y.a->data)[i], &e, sizeof e);
        assert_memory_equal(&e, &plain, sizeof e);
        lane[i % 4] += e;
    }
    free(ym);
    double want = (lane[0] + lane[1]) + (lane[2] + lane[3]);
    assert_memory_equal(&s.v, &want, sizeof want);
    /* Constant arguments only: a constant result, nothing recorded. */
    cr_tape_stats st0, st1;
    assert_int_equal(cr_tape_stats_get(t, &st0), CR_OK);
    cr_kin cin[2] = {cr_kin_arr(cr_av_const(&xa), 0), cr_kin_const(0.5)};
    cr_var c = cr_av_kernel_sum(t, &sqdiff, cin, 2, 3);
    cr_avar ca = cr_av_kernel(t, &sqdiff, cin, 2, 3);
    assert_true(cr_var_is_const(c) && ca.idx == CR_VAR_CONST && ca.a != NULL);
    ASSERT_DBL(c.v, (((x[0] - 0.5) * (x[0] - 0.5) + (x[1] - 0.5) * (x[1] - 0.5)) +
                     ((x[2] - 0.5) * (x[2] - 0.5) + 0.0)));
    ASSERT_DBL(((const double *)ca.a->data)[2], (x[2] - 0.5) * (x[2] - 0.5));
    assert_int_equal(cr_tape_stats_get(t, &st1), CR_OK);
    assert_int_equal(st0.nrecords, st1.nrecords);
    /* No elements: a zero sum and an empty array, recorded; gradients zero. */
    cr_var z = cr_av_kernel_sum(t, &rosen_term, in, 2, 0);
    cr_avar za = cr_av_kernel(t, &rosen_term, in, 2, 0);
    assert_ok(t, cr_tape_status(t));
    ASSERT_DBL(z.v, 0.0);
    assert_int_equal(cr_array_numel(za.a), 0);
    double g[N + 1];
    cr_array ga = cr_array_vector(g, N + 1), *gp = &ga;
    assert_ok(
        t, cr_tape_gradient_arrays(t, cr_add(t, z, cr_av_sum(t, za)), NULL, 0, NULL, &X, 1, &gp));
    for (size_t i = 0; i <= N; i++)
        ASSERT_DBL(g[i], 0.0);
    cr_tape_free(t);
}

/* ---- Errors
 * --------------------------------------------------------------------------------------- */

static void nop_map(size_t n, const double *const *x, double *y)
{
    (void)n;
    (void)x;
    (void)y;
}
static void nop_sum(size_t n, const double *const *x, double *acc)
{
    (void)n;
    (void)x;
    (void)acc;
}
static void nop_partials(size_t n, const double *const *x, double *P)
{
    (void)n;
    (void)x;
    (void)P;
}

static cr_status kernel_in_fn(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const cr_array *c = env;
    cr_kin in[2] = {cr_kin_arr(cr_av_const(c), 0), cr_kin_var(x[0])};
    y[0] = cr_av_kernel_sum(t, &sqdiff, in, 2, 3);
    return cr_tape_status(t);
}

/* Fails on t with st and a message containing sub; then the tape is reset. */
static void expect_fail(cr_tape *t, cr_status st, const char *sub)
{
    assert_int_equal(cr_tape_status(t), st);
    assert_contains(cr_tape_errmsg(t), sub);
    cr_tape_reset(t);
}

static void test_errors(void **state)
{
    fixture *f = *state;
    double x[4] = {1, 2, 3, 4};
    cr_array xa = cr_array_vector(x, 4);
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};

    /* An offset + length past the end, and an offset past the end. */
    cr_var y = cr_av_kernel_sum(t, &rosen_term, in, 2, 4);
    assert_true(isnan(y.v));
    /* Sticky: the next call fails too and records nothing. */
    cr_var y2 = cr_av_kernel_sum(t, &sqdiff, in, 2, 1);
    assert_true(isnan(y2.v) && cr_var_is_const(y2));
    expect_fail(t, CR_ESHAPE,
                "kernel rosen_term: argument 1 reads n = 4 elements from offset 1 of a (4) array "
                "of 4 elements: only 3 are left from that offset");
    X = cr_tape_array_input(t, &xa);
    in[0] = cr_kin_arr(X, 5);
    in[1] = cr_kin_arr(X, 0);
    cr_avar r = cr_av_kernel(t, &sqdiff, in, 2, 0);
    assert_null(r.a);
    expect_fail(t, CR_ESHAPE,
                "kernel sqdiff: argument 0 reads n = 0 elements from offset 5 of a (4) array of 4 "
                "elements: the offset is past its end");

    /* Wrong number of arguments; a kernel with too many; NULL kernel, arguments, array. */
    X = cr_tape_array_input(t, &xa);
    in[0] = cr_kin_arr(X, 0);
    in[1] = cr_kin_arr(X, 1);
    y = cr_av_kernel_sum(t, &rosen_term, in, 1, 3);
    expect_fail(t, CR_EINVAL, "kernel rosen_term takes 2 arguments, 1 given");
    static const cr_kernel wide = {"wide", 5, nop_map, nop_sum, nop_partials, NULL, NULL};
    cr_kin five[5];
    for (int j = 0; j < 5; j++)
        five[j] = cr_kin_const(1.0);
    y = cr_av_kernel_sum(t, &wide, five, 5, 3);
    expect_fail(t, CR_EINVAL, "kernel wide: 5 arguments");
    static const cr_kernel noloops = {"noloops", 1, NULL, NULL, NULL, NULL, NULL};
    y = cr_av_kernel_sum(t, &noloops, five, 1, 3);
    expect_fail(t, CR_EINVAL, "loops missing");
    y = cr_av_kernel_sum(t, NULL, in, 2, 3);
    expect_fail(t, CR_EINVAL, "cr_av_kernel_sum: NULL kernel");
    r = cr_av_kernel(t, NULL, in, 2, 3);
    expect_fail(t, CR_EINVAL, "cr_av_kernel: NULL kernel");
    y = cr_av_kernel_sum(t, &sqdiff, NULL, 2, 3);
    expect_fail(t, CR_EINVAL, "kernel sqdiff: NULL arguments");
    cr_kin bad[2] = {cr_kin_arr(cr_av_const(NULL), 0), cr_kin_const(1)};
    y = cr_av_kernel_sum(t, &sqdiff, bad, 2, 3);
    expect_fail(t, CR_EINVAL, "kernel sqdiff: argument 0 is a NULL array");
    bad[0] = cr_kin_const(1);
    bad[1].kind = (cr_kin_kind)7;
    y = cr_av_kernel_sum(t, &sqdiff, bad, 2, 3);
    expect_fail(t, CR_EINVAL, "kernel sqdiff: argument 1 has an unknown kind 7");

    /* Variables of another tape, and of this tape before its reset. */
    cr_avar Xu = cr_tape_array_input(u, &xa);
    cr_var su = cr_tape_input(u, 1.0);
    in[0] = cr_kin_arr(Xu, 0);
    in[1] = cr_kin_const(0.0);
    y = cr_av_kernel_sum(t, &sqdiff, in, 2, 3);
    expect_fail(t, CR_ETAPE, "kernel sqdiff: argument 0 (array variable 0) belongs to another");
    in[0] = cr_kin_arr(cr_av_const(&xa), 0);
    in[1] = cr_kin_var(su);
    y = cr_av_kernel_sum(t, &sqdiff, in, 2, 3);
    expect_fail(t, CR_ETAPE, "kernel sqdiff: argument 1 (variable 0) belongs to another");
    cr_var old = cr_tape_input(t, 2.0);
    cr_tape_reset(t);
    in[1] = cr_kin_var(old);
    y = cr_av_kernel_sum(t, &sqdiff, in, 2, 3);
    expect_fail(t, CR_ETAPE, "before its last reset");
    cr_tape_free(u);
    cr_tape_free(t);

    /* A second-order tape refuses a kernel without hyper-dual loop (made by hand); a forward
     * tape records kernels (its sweeps: below and in test_tape_kernel_jvp_hvp.c). */
    static const cr_kernel firstonly = {"firstonly", 2, nop_map, nop_sum, nop_partials, NULL, NULL};
    cr_tape_params p = {0};
    p.flags = CR_TAPE_SECOND_ORDER;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    cr_var s = cr_tape_input(t, 2.0);
    in[0] = cr_kin_arr(cr_av_const(&xa), 0);
    in[1] = cr_kin_var(s);
    y = cr_av_kernel_sum(t, &firstonly, in, 2, 3);
    expect_fail(t, CR_EUNIMPL, "kernel firstonly: no hyper-dual loop (second == NULL)");
    cr_tape_free(t);
    /* A prepared gradient of a function of scalars replays the kernel with the scalar's new
     * value: the same numbers as recording again at each point. */
    cr_prepared *pg = NULL;
    double x0 = 1.0;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, kernel_in_fn, &xa, &x0, 1, &pg), CR_OK);
    for (int k = 0; k < 3; k++) {
        double xk = 0.5 + 0.75 * k, yp, gp, yr, gr;
        assert_int_equal(cr_prepared_value_and_gradient(pg, &xk, 1, &yp, &gp), CR_OK);
        assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
        assert_ok(t, cr_tape_value_and_gradient(t, kernel_in_fn, &xa, &xk, 1, &yr, &gr));
        cr_tape_free(t);
        assert_true(yp == yr && gp == gr);
    }
    cr_prepared_free(pg);
    p.flags = CR_TAPE_FORWARD;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    s = cr_tape_input(t, 2.0);
    in[1] = cr_kin_var(s);
    y = cr_av_kernel_sum(t, &sqdiff, in, 2, 3);
    double gs, one = 1.0, yd;
    assert_ok(t, cr_tape_gradient(t, y, &s, 1, &gs));
    ASSERT_DBL(gs, -2.0 * ((1 - 2.0) + (2 - 2.0) + (3 - 2.0)));
    assert_ok(t, cr_tape_jvp(t, &s, &one, 1, &y, 1, &yd));
    ASSERT_DBL(yd, gs); /* a jvp along 1 of a function of one variable is its derivative */
    cr_tape_free(t);

    /* Through the current tape (t NULL), and with no current tape. */
    cr_tape_set_current(NULL);
    y = cr_av_kernel_sum(NULL, &sqdiff, in, 2, 3);
    assert_true(isnan(y.v));
    r = cr_av_kernel(NULL, &sqdiff, in, 2, 3);
    assert_null(r.a);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_tape_set_current(t);
    s = cr_tape_input(t, 2.0);
    in[1] = cr_kin_var(s);
    y = cr_av_kernel_sum(NULL, &sqdiff, in, 2, 3);
    ASSERT_DBL(y.v, 2.0);
    cr_tape_set_current(NULL);
    cr_tape_free(t);
}

/* ---- Memory: no growth across resets; a caller buffer that is too small -------------------------
 */

static void test_reuse(void **state)
{
    fixture *f = *state;
    enum { N = 700 };
    double x[N], g[N];
    for (size_t i = 0; i < N; i++)
        x[i] = cos((double)i);
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    size_t bytes = 0;
    for (int rep = 0; rep < 4; rep++) {
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
        cr_var y = cr_av_kernel_sum(t, &rosen_term, in, 2, N - 1);
        cr_avar K = cr_av_kernel(t, &rosen_term, in, 2, N - 1);
        y = cr_add(t, y, cr_av_sum(t, K));
        cr_array *gp = &ga;
        assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
        cr_tape_stats st;
        assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
        if (rep > 0)
            assert_true(st.arena_bytes == bytes);
        bytes = st.arena_bytes;
    }
    cr_tape_free(t);

    /* A caller buffer with no room for the result array: CR_EARENA, named. */
    static unsigned char small[8192];
    cr_tape_params p = {0};
    p.buffer = small;
    p.buffer_size = sizeof small;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
    cr_avar K = cr_av_const(NULL);
    for (int k = 0; k < 4 && cr_tape_status(t) == CR_OK; k++)
        K = cr_av_kernel(t, &rosen_term, in, 2, N - 1);
    assert_null(K.a);
    assert_int_equal(cr_tape_status(t), CR_EARENA);
    assert_contains(cr_tape_errmsg(t), "kernel rosen_term");
    cr_tape_free(t);
}

/* ---- Gradients written where the caller wants them ---------------------------------------- */

/* f(x) = sum over i < n-1 of rosen_term(x[i], x[i+1]) + sum(sin.(x) .* x) / 2 through the
 * rules: the kernel and a broadcast both add into x's shadow. */
static double twice_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = rosen_c(x, n, NULL);
    for (size_t i = 0; i < n; i++)
        s += sin(x[i]) * x[i] / 2;
    return s;
}

/* Record f on x (kernel only when `rules` is false), gradient into the arrays gs[0..ng),
 * all for the one input. */
static void grad_into(fixture *f, double *x, size_t n, bool rules, cr_array *const *gs, size_t ng)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_vector(x, n);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin in[1] = {cr_kin_arr(X, 1)}; /* x[2:end] only: x[1] gets nothing from it */
    cr_var y = cr_av_kernel_sum(t, &idk, in, 1, n - 1);
    if (rules) {
        cr_kin r[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
        cr_avar S = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(X));
        cr_var b = cr_av_dot(t, S, X);
        y = cr_add(t, cr_sub(t, cr_av_kernel_sum(t, &rosen_term, r, 2, n - 1), y),
                   cr_add(t, y, cr_div(t, b, cr_const(2.0))));
    }
    cr_avar Xs[2] = {X, X};
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, Xs, ng, gs));
    cr_tape_free(t);
}

/* ---- The fused reverse loop of a sum (cr_kernel.pull) ------------------------------------------
 */

enum { FZ_L = 23, FZ_OFF = 2, FZ_N = 18 }; /* x[2 .. 19] read: 2 elements before, 3 after */

static double fz_c[FZ_L];

/* mode 1: Σ (x[off+i] - c[i])² / 7; mode 2: Σ (x[i] - y[i+1]) c[i] + z[i]/2 over v = [x y z];
 * mode 3: the first plus three times the second (x read by two sums). */
static double fused_c(const double *v, size_t nv, const void *env)
{
    (void)nv;
    int mode = *(const int *)env;
    const double *x = v, *y = v + FZ_L, *z = v + 2 * FZ_L;
    double s1 = 0, s2 = 0;
    for (size_t i = 0; i < FZ_N; i++) {
        double d = x[FZ_OFF + i] - fz_c[i];
        s1 += d * d;
        s2 += (x[i] - y[i + 1]) * fz_c[i] + z[i] / 2.0;
    }
    s1 /= 7.0;
    return mode == 1 ? s1 : mode == 2 ? s2 : s1 + 3.0 * s2;
}

/* The gradient of fused_c (mode) with respect to x, y and z, through kernels sq and fr,
 * written into g (3 FZ_L, filled with NaN first), into dense destinations or, when strided,
 * into strided ones (then the shadows are the tape's own buffers). Recorded twice on one
 * tape, so that the second recording's buffers reuse memory the first one wrote. */
static void fused_grad(fixture *f, const cr_kernel *sq, const cr_kernel *fr, int mode, bool strided,
                       double *v, double *g)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double gs[2 * 3 * FZ_L];
    for (int round = 0; round < 2; round++) {
        cr_tape_reset(t);
        cr_array xa = cr_array_vector(v, FZ_L), ya = cr_array_vector(v + FZ_L, FZ_L);
        cr_array za = cr_array_vector(v + 2 * FZ_L, FZ_L), ca = cr_array_vector(fz_c, FZ_L);
        cr_avar X = cr_tape_array_input(t, &xa), Y = cr_tape_array_input(t, &ya);
        cr_avar Z = cr_tape_array_input(t, &za);
        cr_var y = cr_const(0.0);
        if (mode != 2) {
            cr_kin in[2] = {cr_kin_arr(X, FZ_OFF), cr_kin_arr(cr_av_const(&ca), 0)};
            y = cr_div(t, cr_av_kernel_sum(t, sq, in, 2, FZ_N), cr_const(7.0));
        }
        if (mode != 1) {
            cr_kin in[4] = {cr_kin_arr(X, 0), cr_kin_arr(Y, 1), cr_kin_arr(cr_av_const(&ca), 0),
                            cr_kin_arr(Z, 0)};
            cr_var s2 = cr_av_kernel_sum(t, fr, in, 4, FZ_N);
            y = mode == 2 ? s2 : cr_add(t, y, cr_mul(t, cr_const(3.0), s2));
        }
        for (size_t i = 0; i < 3 * FZ_L; i++)
            g[i] = (double)NAN;
        for (size_t i = 0; i < 2 * 3 * FZ_L; i++)
            gs[i] = (double)NAN;
        cr_array ga[3];
        cr_array *gp[3] = {&ga[0], &ga[1], &ga[2]};
        size_t shape = FZ_L;
        ptrdiff_t stride = 2;
        for (int j = 0; j < 3; j++) {
            if (strided)
                cr_array_view_init(&ga[j], gs + 2 * FZ_L * j, CR_DT_F64, 1, &shape, &stride);
            else
                ga[j] = cr_array_vector(g + FZ_L * j, FZ_L);
        }
        cr_avar as[3] = {X, Y, Z};
        assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, as, 3, gp));
        if (strided)
            for (size_t i = 0; i < 3 * FZ_L; i++)
                g[i] = gs[2 * i];
    }
    cr_tape_free(t);
}

/* A sum with a scalar adjoint whose array arguments are read in place, each variable read by
 * one argument and its shadow still empty, is pulled back by the kernel's fused loop
 * (pull): the same bits as the dual loop (the kernel without pull), elements outside the
 * range read get zero, and a shadow another sum wrote first is added to, not overwritten. */
static void test_fused_pull(void **state)
{
    fixture *f = *state;
    double v[3 * FZ_L], want[3 * FZ_L], g1[3 * FZ_L], g2[3 * FZ_L];
    for (size_t i = 0; i < FZ_L; i++)
        fz_c[i] = cos(0.4 * (double)i);
    for (size_t i = 0; i < 3 * FZ_L; i++)
        v[i] = 0.7 * sin(0.9 * (double)i + 0.2) + 0.01 * (double)i;
    cr_kernel sq_dual = sqdiff, four_dual = four;
    sq_dual.pull = NULL;
    four_dual.pull = NULL;
    assert_non_null(sqdiff.pull);
    for (int mode = 1; mode <= 3; mode++) {
        fd_grad(fused_c, &mode, v, 3 * FZ_L, want);
        for (int strided = 0; strided < 2; strided++) {
            fused_grad(f, &sqdiff, &four, mode, strided, v, g1);
            assert_grad(g1, want, 3 * FZ_L, 1e-8);
            fused_grad(f, &sq_dual, &four_dual, mode, strided, v, g2);
            assert_memory_equal(g1, g2, sizeof g1);
        }
        /* elements no sum reads: exactly zero */
        if (mode == 1)
            for (size_t i = 0; i < 3 * FZ_L; i++)
                if (i < FZ_OFF || i >= FZ_OFF + FZ_N)
                    assert_true(g1[i] == 0.0);
    }
}

/* The shadow of an array input may live in the caller's gradient array (dense f64 of the
 * input's shape): whatever it held before is overwritten, elements no cotangent reaches are
 * zero, and a destination that is the input itself, or one requested twice, is still
 * right. Other layouts (strided) give the same numbers. */
static void test_gradient_in_place(void **state)
{
    fixture *f = *state;
    enum { N = 600 };
    double x[N], want[N], g1[N], g2[N], gs[2 * N];
    for (size_t i = 0; i < N; i++)
        x[i] = 0.8 * cos(0.3 * (double)i) + 0.05 * (double)(i % 5);
    fd_grad(twice_c, NULL, x, N, want);
    /* Destinations full of NaN: every element is written. */
    for (size_t i = 0; i < N; i++)
        g1[i] = g2[i] = (double)NAN;
    cr_array ga = cr_array_vector(g1, N), *gp = &ga;
    grad_into(f, x, N, false, &gp, 1);
    assert_true(g1[0] == 0.0); /* no cotangent reached x[1] */
    for (size_t i = 1; i < N; i++)
        assert_true(g1[i] == 1.0);
    grad_into(f, x, N, true, &gp, 1);
    assert_grad(g1, want, N, 1e-6);
    /* The same numbers through a strided destination (not the shadow). */
    size_t shape = N;
    ptrdiff_t stride = 2;
    cr_array gsa;
    cr_array_view_init(&gsa, gs, CR_DT_F64, 1, &shape, &stride);
    gp = &gsa;
    grad_into(f, x, N, true, &gp, 1);
    for (size_t i = 0; i < N; i++)
        assert_true(gs[2 * i] == g1[i]);
    /* A destination flagged writable is used as it is (not a copy of its descriptor):
     * the same numbers, and the caller's descriptor is left as it was. */
    for (size_t i = 0; i < N; i++)
        g2[i] = (double)NAN;
    cr_array gw = cr_array_vector(g2, N);
    gw.flags = CR_ARRAY_WRITABLE;
    gp = &gw;
    grad_into(f, x, N, true, &gp, 1);
    for (size_t i = 0; i < N; i++)
        assert_true(g2[i] == g1[i]);
    assert_true(gw.data == g2 && gw.flags == CR_ARRAY_WRITABLE && gw.ndim == 1 &&
                gw.shape[0] == N && gw.strides[0] == 1);
    /* One input requested twice: both destinations get it. */
    cr_array gb = cr_array_vector(g2, N);
    cr_array *two[2] = {&ga, &gb};
    for (size_t i = 0; i < N; i++)
        g1[i] = g2[i] = (double)NAN;
    grad_into(f, x, N, true, two, 2);
    assert_grad(g1, want, N, 1e-6);
    assert_grad(g2, want, N, 1e-6);
    /* The gradient written over the input itself: the sweep still reads the old x. */
    double xc[N];
    memcpy(xc, x, sizeof xc);
    cr_array xself = cr_array_vector(xc, N);
    gp = &xself;
    grad_into(f, xc, N, true, &gp, 1);
    assert_grad(xc, want, N, 1e-6);
}

/* ---- One array read by two arguments ------------------------------------------------------ */

/* sum_i w_i rosen(x[oa + i], x[ob + i]) (w_i = 1 for the sum form) + sum_k c_k x_k when
 * extra: a kernel whose two arguments read one array at offsets oa and ob. */
typedef struct pair_env {
    size_t oa, ob, n;
    const double *w; /* the array form's weights, or NULL for the sum */
    const double *c; /* the extra term's coefficients, or NULL */
} pair_env;

static double pair_c(const double *x, size_t len, const void *env)
{
    const pair_env *e = env;
    double s = 0.0;
    for (size_t i = 0; i < e->n; i++) {
        double a = x[e->oa + i], b = x[e->ob + i],
               r = 100 * (b - a * a) * (b - a * a) + (1 - a) * (1 - a);
        s += e->w != NULL ? e->w[i] * r : r;
    }
    if (e->c != NULL)
        for (size_t k = 0; k < len; k++)
            s += e->c[k] * x[k];
    return s;
}

/* The gradient of pair_c through the tape: x dense or every other element of a buffer,
 * the extra term (when e->c) recorded before the kernel (its shadow fresh when the kernel's
 * reverse step runs) or after it (already written), into g filled with NaN. */
static void pair_grad(fixture *f, const pair_env *e, const double *x, size_t len, bool strided,
                      bool extra_after, double *g)
{
    double *buf = malloc(2 * len * sizeof *buf);
    assert_non_null(buf);
    for (size_t k = 0; k < len; k++)
        buf[strided ? 2 * k : k] = x[k];
    size_t shape = len;
    ptrdiff_t stride = strided ? 2 : 1;
    cr_array xa, ga = cr_array_vector(g, len), wa, ca;
    assert_int_equal(cr_array_view_init(&xa, buf, CR_DT_F64, 1, &shape, &stride), CR_OK);
    for (size_t k = 0; k < len; k++)
        g[k] = (double)NAN;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = cr_const(0.0);
    if (e->c != NULL) {
        ca = cr_array_vector((double *)e->c, len);
        if (!extra_after)
            y = cr_av_dot(t, X, cr_av_const(&ca));
    }
    cr_kin in[2] = {cr_kin_arr(X, e->oa), cr_kin_arr(X, e->ob)};
    if (e->w != NULL) {
        wa = cr_array_vector((double *)e->w, e->n);
        y = cr_add(t, y, cr_av_dot(t, cr_av_kernel(t, &rosen_term, in, 2, e->n), cr_av_const(&wa)));
    } else {
        y = cr_add(t, y, cr_av_kernel_sum(t, &rosen_term, in, 2, e->n));
    }
    if (e->c != NULL && extra_after)
        y = cr_add(t, y, cr_av_dot(t, X, cr_av_const(&ca)));
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, pair_c(x, len, e), 1e-12);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    cr_tape_free(t);
    free(buf);
}

/*
 * A kernel whose two arguments read one array (a stencil such as x[i], x[i + 1]): its
 * reverse step writes both arguments' contributions in one pass per block. Offsets equal,
 * one apart either way, and a block or more apart (two stretches and an untouched gap);
 * calls of one element, of one block and one more, and of several blocks; the sum and an
 * array result (a cotangent per element); a shadow fresh or already written by another
 * step; dense and strided arrays. Against central differences, elements no argument reads
 * exactly zero, and the strided form the same to the bit.
 */
static void test_shared_slot(void **state)
{
    fixture *f = *state;
    static const size_t offs[][2] = {{0, 0},   {0, 1},   {1, 0},         {3, 0},
                                     {0, 300}, {300, 0}, {0, CR_K_BLOCK}};
    static const size_t ns[] = {1, 5, CR_K_BLOCK + 1, 600};
    enum { MAXL = 600 + 300 + 3 };
    double x[MAXL], want[MAXL], g[MAXL], g2[MAXL], w[600], c[MAXL];
    for (size_t k = 0; k < MAXL; k++) {
        x[k] = 0.8 * sin(0.61 * (double)k + 0.4) + 0.02 * (double)(k % 7);
        c[k] = cos(0.27 * (double)k);
    }
    for (size_t i = 0; i < 600; i++)
        w[i] = 1.0 + 0.5 * sin(0.13 * (double)i);
    for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
        for (size_t q = 0; q < sizeof ns / sizeof ns[0]; q++) {
            size_t oa = offs[o][0], ob = offs[o][1], n = ns[q];
            size_t len = n + (oa > ob ? oa : ob) + 3;
            for (int form = 0; form < 4; form++) {
                pair_env e = {oa, ob, n, (form & 1) ? w : NULL, (form & 2) ? c : NULL};
                fd_grad(pair_c, &e, x, len, want);
                for (int after = 0; after < ((form & 2) ? 2 : 1); after++) {
                    pair_grad(f, &e, x, len, false, after, g);
                    for (size_t k = 0; k < len; k++)
                        ASSERT_CLOSE(g[k], want[k], 1e-6 * fmax(1.0, fabs(want[k])));
                    if (!(form & 2))
                        for (size_t k = 0; k < len; k++)
                            if ((k < oa || k >= oa + n) && (k < ob || k >= ob + n))
                                assert_true(g[k] == 0.0);
                    pair_grad(f, &e, x, len, true, after, g2);
                    assert_memory_equal(g, g2, len * sizeof *g);
                }
            }
        }
}

static int run_tape_kernel(void)
{
    const struct CMUnitTest tape_kernel[] = {
        cmocka_unit_test_setup_teardown(test_rosen, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mse, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_functions, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scalar_args, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mixed, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_layouts, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_f32, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_primal_bits, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reuse, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gradient_in_place, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_fused_pull, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_shared_slot, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tape_kernel, NULL, NULL);
}

/*
 * Tests of the rarer paths of fused kernels (kernel.h, kernel.c): a call of more elements than
 * an array may hold (refused, the tape usable again); a strided seed of cr_tape_avjp() at a
 * kernel's array result (its cotangent gathered before the reverse step); and, on
 * second-order tapes, a kernel whose result does not reach y and a kernel sum whose adjoint is
 * exactly zero where the derivative of its adjoint is not. Derivatives are checked against
 * central differences of the same functions written in plain C.
 */

/* sin(x) */
#define SIN1(x) cr_k_sin(x[0])
CR_KERNEL(ksin, 1, SIN1);

/* x^2 exp(x / 2) */
#define SQE(x) cr_k_mul(cr_k_sq(x[0]), cr_k_exp(cr_k_mul(0.5, x[0])))
CR_KERNEL(ksqe, 1, SQE);

static double sqe_c(double x)
{
    return x * x * exp(0.5 * x);
}

static cr_tape *new_tape(cr_ctx *ctx, uint32_t flags)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    return t;
}

/* More elements than an array of doubles may hold, over an array of 3: CR_ESHAPE naming the
 * kernel, n, the offset and the array's length; then the same tape records a good call. */
static void test_too_many_elements(void **state)
{
    fixture *f = *state;
    double x[3] = {0.1, 0.2, 0.3};
    cr_array xa = cr_array_vector(x, 3);
    cr_tape *t = new_tape(f->ctx, 0);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin a = cr_kin_arr(X, 0);
    cr_avar Y = cr_av_kernel(t, &ksin, &a, 1, SIZE_MAX / 2);
    assert_null(Y.a);
    assert_int_equal(cr_tape_status(t), CR_ESHAPE);
    char want[192];
    snprintf(want, sizeof want,
             "kernel ksin: argument 0 reads n = %zu elements from offset 0 of a (3) array of 3 "
             "elements: only 3 are left from that offset",
             SIZE_MAX / 2);
    assert_string_equal(cr_tape_errmsg(t), want);
    cr_var s = cr_av_kernel_sum(t, &ksin, &a, 1, SIZE_MAX / 2);
    assert_true(isnan(s.v));
    cr_tape_clear_error(t);
    s = cr_av_kernel_sum(t, &ksin, &a, 1, 3);
    assert_ok(t, cr_tape_status(t));
    assert_close(s.v, sin(0.1) + sin(0.2) + sin(0.3), 1e-15);
    cr_tape_free(t);
}

/* ---- A strided seed at a kernel's array result --------------------------------------------- */

enum { N = 5 };
static const double k_w[N] = {1.0, -0.5, 2.0, 0.25, -1.5};

/* w' f(x), f = x^2 exp(x/2) elementwise: the vector-Jacobian product's value */
static double wf_c(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += k_w[i] * sqe_c(x[i]);
    return s;
}

static void test_strided_seed(void **state)
{
    fixture *f = *state;
    double x[N] = {0.3, -1.2, 0.8, 2.0, -0.4}, g[N], seed[2 * N];
    for (size_t i = 0; i < N; i++) {
        seed[2 * i] = k_w[i];
        seed[2 * i + 1] = 1e6; /* not read */
    }
    size_t shape[1] = {N};
    ptrdiff_t stride[1] = {2};
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N), sa;
    assert_int_equal(cr_array_view_init(&sa, seed, CR_DT_F64, 1, shape, stride), CR_OK);
    cr_tape *t = new_tape(f->ctx, 0);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin a = cr_kin_arr(X, 0);
    cr_avar Y = cr_av_kernel(t, &ksqe, &a, 1, N);
    assert_ok(t, cr_tape_status(t));
    for (size_t i = 0; i < N; i++)
        assert_close(((const double *)Y.a->data)[i], sqe_c(x[i]), 1e-15);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_avjp(t, Y, &sa, NULL, 0, NULL, &X, 1, &gp));
    for (size_t i = 0; i < N; i++) {
        double xi = x[i], h = 1e-6 * fmax(1.0, fabs(xi));
        x[i] = xi + h;
        double fp = wf_c(x, N);
        x[i] = xi - h;
        double fm = wf_c(x, N);
        x[i] = xi;
        assert_close(g[i], (fp - fm) / (2 * h), 1e-7);
    }
    cr_tape_free(t);
}

/* ---- Second order ------------------------------------------------------------------------ */

/* y = (sum sin.(x))^2 + x'x / 2, at x = (a, -a, b, -b) where sum sin.(x) is exactly zero:
 * the kernel sum's adjoint 2 s is zero, the derivative of its adjoint 2 ṡ is not. A kernel
 * call whose result y does not use is recorded too. */
enum { M = 4 };

static double sq0_c(const double *x, size_t n)
{
    double s = 0, q = 0;
    for (size_t i = 0; i < n; i++) {
        s += sin(x[i]);
        q += x[i] * x[i];
    }
    return s * s + 0.5 * q;
}

/* H v by central differences of sq0_c: the mixed second difference along v and e_i. */
static void fd_hv(double *x, size_t n, const double *v, double *hv)
{
    const double h = 1e-4;
    double xp[M];
    for (size_t i = 0; i < n; i++) {
        double acc = 0;
        for (int sv = -1; sv <= 1; sv += 2)
            for (int si = -1; si <= 1; si += 2) {
                for (size_t j = 0; j < n; j++)
                    xp[j] = x[j] + sv * h * v[j];
                xp[i] += si * h;
                acc += sv * si * sq0_c(xp, n);
            }
        hv[i] = acc / (4 * h * h);
    }
}

static void test_second_order_zero_adjoint(void **state)
{
    fixture *f = *state;
    double x[M] = {0.7, -0.7, 1.3, -1.3}, v[M] = {1.0, 0.5, -0.25, 2.0}, hv[M], want[M];
    cr_array xa = cr_array_vector(x, M), va = cr_array_vector(v, M), hva = cr_array_vector(hv, M);
    cr_tape *t = new_tape(f->ctx, CR_TAPE_SECOND_ORDER);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin a = cr_kin_arr(X, 0);
    cr_var s = cr_av_kernel_sum(t, &ksin, &a, 1, M);
    assert_true(s.v == 0.0); /* exactly: sin is odd, the partial sums pair up */
    cr_var unused = cr_av_kernel_sum(t, &ksqe, &a, 1, M);
    cr_avar unused_a = cr_av_kernel(t, &ksqe, &a, 1, M);
    (void)unused;
    (void)unused_a;
    cr_var y = cr_add(t, cr_mul(t, s, s), cr_mul(t, cr_const(0.5), cr_av_dot(t, X, X)));
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, sq0_c(x, M), 1e-15);
    const cr_array *av[1] = {&va};
    cr_array *hp[1] = {&hva};
    assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, av, hp));
    fd_hv(x, M, v, want);
    for (size_t i = 0; i < M; i++)
        assert_close(hv[i], want[i], 1e-6);
    cr_tape_free(t);
}

static int run_kernel_edges(void)
{
    const struct CMUnitTest kernel_edges[] = {
        cmocka_unit_test_setup_teardown(test_too_many_elements, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_strided_seed, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_second_order_zero_adjoint, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(kernel_edges, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_tape_kernel();
    failed += run_kernel_edges();
    return failed;
}
