/*
 * Tests of prepared gradients of functions of arrays (cr_prepare_gradient_arrays): gradients
 * at several new points against central differences of the same functions in plain C (or of
 * the library's primals, for the factorizations) and against recording again; scalar and
 * array operations mixed, tuple results (svd) inside, f32 inputs, array functions in a
 * function of scalars; no allocation after the first call; and every refusal: another
 * number of inputs, another shape or dtype, a comparison that flips, a rule that fails or
 * whose result changes shape at the new inputs, an integer tuple element that changes, the
 * wrong entry point, inputs made inside the function; each followed by a good replay.
 */
#include <chainrules/kernel.h>
#include <math.h>
#include <stdio.h>

#include "test_alloc.h"
#include "test_fault_hook.h"
#include "test_util.h"

#define FD_RTOL 1e-7

/* Central differences (the library's 5-point method) of a plain function of n variables. */
static void fd_grad(cr_arena *arena, cr_fd_vec_fn f, void *env, const double *x, size_t n,
                    double *g)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, f, env, x, n, 1, arena, g, NULL), CR_OK);
}

/* Record f on an ordinary tape at the arrays xs and sweep: the gradient without replay. */
static void rerecord(cr_ctx *ctx, cr_ad_array_fn f, void *env, const cr_array *const *xs, size_t n,
                     double *y, cr_array *const *grads)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    cr_avar av[4];
    for (size_t j = 0; j < n; j++)
        av[j] = cr_tape_array_input(t, xs[j]);
    cr_var yv;
    assert_int_equal(f(t, av, n, &yv, env), CR_OK);
    assert_int_equal(cr_tape_gradient_arrays(t, yv, NULL, 0, NULL, av, n, grads), CR_OK);
    *y = yv.v;
    cr_tape_free(t);
}

/* ---- Rosenbrock as array operations ------------------------------------------------------ */

static double rosen_c(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1 - x[i];
        s += 100 * a * a + b * b;
    }
    return s;
}

static cr_status rosen_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    y[0] = rosen_c(x, n);
    return CR_OK;
}

/* sum(100 .* (x[1:] .- x[:-1].^2).^2 .+ (1 .- x[:-1]).^2) */
static cr_status rosen_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_avar X = xs[0];
    int64_t len = (int64_t)X.a->shape[0];
    cr_avar lo = cr_av_slice(t, X, 0, len - 1), hi = cr_av_slice(t, X, 1, len);
    cr_avar a = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_arr(hi),
                                 cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(lo))));
    cr_avar b = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_var(cr_const(1.0)), cr_targ_arr(lo));
    cr_avar s =
        cr_av_broadcast2(t, &cr_fn_add,
                         cr_targ_arr(cr_av_broadcast2(
                             t, &cr_fn_mul, cr_targ_var(cr_const(100.0)),
                             cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(a))))),
                         cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(b))));
    *y = cr_av_sum(t, s);
    return cr_tape_status(t);
}

static void test_rosen_replay(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    cr_arena *arena;
    assert_int_equal(cr_arena_new(ctx, NULL, &arena), CR_OK);
    enum { N = 9 };
    double x[N], g[N], g2[N], fd[N], y, y2;
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5 + 0.1 * (double)i;
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N), g2a = cr_array_vector(g2, N);
    const cr_array *xs[1] = {&xa};
    cr_array *gs[1] = {&ga}, *g2s[1] = {&g2a};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient_arrays(ctx, NULL, rosen_t, NULL, xs, 1, &p), CR_OK);
    for (int round = 0; round < 5; round++) {
        for (size_t i = 0; i < N; i++)
            x[i] = 0.3 + 0.6 * sin(0.7 * (double)i + round);
        size_t before = c.allocs;
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
        if (round > 0) /* after the first call, a replay allocates nothing */
            assert_int_equal(c.allocs, before);
        assert_close(y, rosen_c(x, N), 1e-13);
        fd_grad(arena, rosen_fd, NULL, x, N, fd);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], fd[i], FD_RTOL);
        /* The same as recording again at this point. */
        rerecord(ctx, rosen_t, NULL, xs, 1, &y2, g2s);
        assert_true(y2 == y);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], g2[i], 1e-14);
        cr_arena_reset(arena);
    }
    cr_prepared_free(p);
    cr_arena_free(arena);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* ---- Fused kernels replayed ------------------------------------------------------------ */

/* r_i = 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2, then y = sum_i r_i x[i] + sin(s) x[i] with
 * s = sum(sin.(r)): an array kernel, a rule (broadcast, sum) reading its result, and a kernel
 * sum reading the array result, the input at an offset and the scalar s. */
#define KROSEN(x) \
    cr_k_add(cr_k_mul(100.0, cr_k_sq(cr_k_sub(x[1], cr_k_sq(x[0])))), cr_k_sq(cr_k_sub(1.0, x[0])))
CR_KERNEL(k_rosen, 2, KROSEN);
#define KMIX(x) cr_k_add(cr_k_mul(x[0], x[1]), cr_k_mul(cr_k_sin(x[2]), x[1]))
CR_KERNEL(k_mix, 3, KMIX);

static double kern_c(const double *x, size_t n)
{
    static double r[4096];
    double s = 0, y = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1 - x[i];
        r[i] = 100 * a * a + b * b;
        s += sin(r[i]);
    }
    for (size_t i = 0; i + 1 < n; i++)
        y += r[i] * x[i] + sin(s) * x[i];
    return y;
}

static cr_status kern_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    y[0] = kern_c(x, n);
    return CR_OK;
}

static cr_status kern_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_avar X = xs[0];
    size_t m = cr_array_numel(X.a) - 1;
    cr_kin a[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
    cr_avar R = cr_av_kernel(t, &k_rosen, a, 2, m);
    cr_var s = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(R)));
    cr_kin b[3] = {cr_kin_arr(R, 0), cr_kin_arr(X, 0), cr_kin_var(s)};
    *y = cr_av_kernel_sum(t, &k_mix, b, 3, m);
    return cr_tape_status(t);
}

/* The kernels' loops run again at each call, reading the new arrays (any stride, however
 * the recording's were laid out); the same numbers as recording again, no allocation after
 * the first call. An input the kernel cannot read (a 2-d view that is not contiguous) is
 * refused, and a good call follows. */
static void test_kernel_replay(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    cr_arena *arena;
    assert_int_equal(cr_arena_new(ctx, NULL, &arena), CR_OK);
    enum { N = 8 };
    double x[N], xs2[2 * N], g[N], g2[N], fd[N], y, y2;
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5 + 0.05 * (double)i;
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N), g2a = cr_array_vector(g2, N);
    const cr_array *xs[1] = {&xa};
    cr_array *gs[1] = {&ga}, *g2s[1] = {&g2a};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient_arrays(ctx, NULL, kern_t, NULL, xs, 1, &p), CR_OK);
    size_t shape = N;
    ptrdiff_t stride = 2;
    cr_array xstr;
    cr_array_view_init(&xstr, xs2, CR_DT_F64, 1, &shape, &stride);
    for (int round = 0; round < 6; round++) {
        for (size_t i = 0; i < N; i++)
            x[i] = 0.3 + 0.5 * sin(0.7 * (double)i + round);
        size_t before = c.allocs;
        for (size_t i = 0; i < N; i++) /* the gradient array's old contents do not matter */
            g[i] = (double)NAN;
        const cr_array *in[1] = {&xa};
        if (round & 1) { /* the same point through a strided view */
            for (size_t i = 0; i < N; i++)
                xs2[2 * i] = x[i];
            in[0] = &xstr;
        }
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, in, 1, &y, gs), CR_OK);
        if (round > 0)
            assert_int_equal(c.allocs, before);
        assert_close(y, kern_c(x, N), 1e-13);
        fd_grad(arena, kern_fd, NULL, x, N, fd);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], fd[i], FD_RTOL);
        rerecord(ctx, kern_t, NULL, xs, 1, &y2, g2s);
        assert_true(y2 == y);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], g2[i], 1e-14);
        cr_arena_reset(arena);
    }
    /* The gradient written over the input itself: the replay still reads the old x. */
    double xc[N];
    memcpy(xc, x, sizeof xc);
    cr_array xca = cr_array_vector(xc, N);
    const cr_array *cin[1] = {&xca};
    cr_array *cout[1] = {&xca};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, cin, 1, &y, cout), CR_OK);
    for (size_t i = 0; i < N; i++)
        assert_close(xc[i], g[i], 1e-14);
    cr_prepared_free(p);

    /* Prepared at a contiguous 2 x 4 matrix; called with a 2 x 4 view that is not. */
    double m[8], big[16], gm[8];
    for (size_t i = 0; i < 8; i++)
        m[i] = big[2 * i] = 0.4 + 0.1 * (double)i;
    cr_array ma = cr_array_matrix(m, 2, 4), gma = cr_array_matrix(gm, 2, 4), strided;
    size_t sh2[2] = {2, 4};
    ptrdiff_t st2[2] = {8, 2};
    cr_array_view_init(&strided, big, CR_DT_F64, 2, sh2, st2);
    const cr_array *mxs[1] = {&ma}, *sxs[1] = {&strided};
    cr_array *gms[1] = {&gma};
    assert_int_equal(cr_prepare_gradient_arrays(ctx, NULL, kern_t, NULL, mxs, 1, &p), CR_OK);
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, sxs, 1, &y, gms), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(ctx), "kernel k_rosen");
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, mxs, 1, &y, gms), CR_OK);
    assert_close(y, kern_c(m, 8), 1e-13);
    fd_grad(arena, kern_fd, NULL, m, 8, fd);
    for (size_t i = 0; i < 8; i++)
        assert_close(gm[i], fd[i], FD_RTOL);
    cr_prepared_free(p);
    cr_arena_free(arena);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* ---- A small network: a matrix and a vector, scalar operations between array ones ------ */

enum { NR = 3, NC = 4 };

/* y = s * s + dot(x, x) / (1 + exp(s)), s = sum(tanh.(W x)); a comparison on s */
static double net_c(const double *v)
{
    const double *W = v, *x = v + NR * NC;
    double s = 0, xx = 0;
    for (size_t i = 0; i < NR; i++) {
        double h = 0;
        for (size_t j = 0; j < NC; j++)
            h += W[i * NC + j] * x[j];
        s += tanh(h);
    }
    for (size_t j = 0; j < NC; j++)
        xx += x[j] * x[j];
    return s * s + xx / (1 + exp(s));
}

static cr_status net_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = net_c(x);
    return CR_OK;
}

static cr_status net_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_avar H = cr_av_broadcast1(t, &cr_fn_tanh, cr_targ_arr(cr_av_matmul(t, xs[0], xs[1])));
    cr_var s = cr_av_sum(t, H);
    if (!cr_tape_cmp(t, s, CR_CMP_LT, cr_const(100.0)))
        return CR_EINVAL;
    cr_var q = cr_div(t, cr_av_dot(t, xs[1], xs[1]), cr_add(t, cr_const(1.0), cr_exp(t, s)));
    *y = cr_add(t, cr_mul(t, s, s), q);
    return cr_tape_status(t);
}

static void test_network_replay(void **state)
{
    fixture *f = *state;
    double v[NR * NC + NC], g[NR * NC + NC], g2[NR * NC + NC], fd[NR * NC + NC], y, y2;
    for (size_t i = 0; i < NR * NC + NC; i++)
        v[i] = 0.3 * cos(1.3 * (double)i);
    cr_array W = cr_array_matrix(v, NR, NC), x = cr_array_vector(v + NR * NC, NC);
    cr_array gW = cr_array_matrix(g, NR, NC), gx = cr_array_vector(g + NR * NC, NC);
    cr_array g2W = cr_array_matrix(g2, NR, NC), g2x = cr_array_vector(g2 + NR * NC, NC);
    const cr_array *xs[2] = {&W, &x};
    cr_array *gs[2] = {&gW, &gx}, *g2s[2] = {&g2W, &g2x};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, net_t, NULL, xs, 2, &p), CR_OK);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < NR * NC + NC; i++)
            v[i] = 0.5 * sin(0.9 * (double)i + 2.0 * round);
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 2, &y, gs), CR_OK);
        assert_close(y, net_c(v), 1e-13);
        fd_grad(f->arena, net_fd, NULL, v, NR * NC + NC, fd);
        for (size_t i = 0; i < NR * NC + NC; i++)
            assert_close(g[i], fd[i], FD_RTOL);
        rerecord(f->ctx, net_t, NULL, xs, 2, &y2, g2s);
        for (size_t i = 0; i < NR * NC + NC; i++)
            assert_close(g[i], g2[i], 1e-14);
    }
    cr_prepared_free(p);
}

/* ---- A tuple result inside: the sum of the singular values ------------------------------- */

typedef struct lib_env {
    cr_arena *arena;
    size_t rows, cols;
} lib_env;

/* sum(svdvals(A)) through the library's primal (the factorization is LAPACK's). */
static cr_status nuclear_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    lib_env *e = env;
    cr_array A = cr_array_matrix((double *)(uintptr_t)x, e->rows, e->cols);
    cr_value a = cr_value_array(&A), s;
    cr_status st = cr_function_call(e->arena, &cr_fn_svdvals, &a, 1, &s);
    if (st != CR_OK)
        return st;
    y[0] = 0;
    for (size_t i = 0; i < cr_array_numel(s.u.arr); i++)
        y[0] += creal(cr_array_get_linear(s.u.arr, i));
    return CR_OK;
}

static cr_status nuclear_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_targ a = cr_targ_arr(xs[0]), usv[3];
    if (cr_tape_acall_n(t, &cr_fn_svd, &a, 1, usv, 3) != CR_OK)
        return cr_tape_status(t);
    *y = cr_av_sum(t, usv[1].u.a);
    return cr_tape_status(t);
}

static void test_svd_replay(void **state)
{
    fixture *f = *state;
    enum { R = 4, C = 3 };
    double a[R * C], g[R * C], fd[R * C], y;
    for (size_t i = 0; i < R * C; i++)
        a[i] = cos(0.8 * (double)i) + (i % 4 == 0 ? 1.0 : 0.0);
    cr_array A = cr_array_matrix(a, R, C), gA = cr_array_matrix(g, R, C);
    const cr_array *xs[1] = {&A};
    cr_array *gs[1] = {&gA};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, nuclear_t, NULL, xs, 1, &p), CR_OK);
    lib_env e = {f->arena, R, C};
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < R * C; i++)
            a[i] = sin(1.1 * (double)i + round) + (i % 4 == 0 ? 1.5 : 0.0);
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
        double want;
        assert_int_equal(nuclear_fd(a, R * C, &want, 1, &e), CR_OK);
        assert_close(y, want, 1e-13);
        fd_grad(f->arena, nuclear_fd, &e, a, R * C, fd);
        for (size_t i = 0; i < R * C; i++)
            assert_close(g[i], fd[i], 1e-6);
    }
    cr_prepared_free(p);
}

/* ---- f32 inputs ------------------------------------------------------------------------------ */

static void test_f32_replay(void **state)
{
    fixture *f = *state;
    enum { N = 6 };
    float x[N], g[N];
    double xd[N], fd[N], gd[N], y;
    for (size_t i = 0; i < N; i++)
        x[i] = (float)(0.2 * (double)i - 0.4);
    cr_array xa, ga, gda = cr_array_vector(gd, N);
    size_t shape[1] = {N};
    assert_int_equal(cr_array_view_init(&xa, x, CR_DT_F32, 1, shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&ga, g, CR_DT_F32, 1, shape, NULL), CR_OK);
    const cr_array *xs[1] = {&xa};
    cr_array *gs[1] = {&ga}, *gds[1] = {&gda};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, rosen_t, NULL, xs, 1, &p), CR_OK);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < N; i++) {
            x[i] = (float)(0.8 * cos(0.6 * (double)i + round));
            xd[i] = (double)x[i];
        }
        fd_grad(f->arena, rosen_fd, NULL, xd, N, fd);
        /* An f32 gradient, and an f64 one of the same f32 input. */
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
        assert_close(y, rosen_c(xd, N), 1e-5);
        for (size_t i = 0; i < N; i++)
            assert_close((double)g[i], fd[i], 1e-4);
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gds), CR_OK);
        for (size_t i = 0; i < N; i++)
            assert_close(gd[i], fd[i], 1e-4);
    }
    /* An f64 input where f32 was prepared: another dtype. */
    cr_array xda = cr_array_vector(xd, N);
    const cr_array *xds[1] = {&xda};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xds, 1, &y, gds), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "input 0 is f64");
    assert_contains(cr_ctx_errmsg(f->ctx), "prepared for f32");
    cr_prepared_free(p);
}

/* ---- Array functions in a function of scalars (cr_prepare_gradient) --------------------- */

static double k_B[4] = {0.5, -1.0, 2.0, 0.25};

/* h(s, u) = sum(exp.(s .* B) .* u) with B a constant array */
static double scal_c(const double *x)
{
    double r = 0;
    for (size_t i = 0; i < 4; i++)
        r += exp(x[0] * k_B[i]) * x[1];
    return r;
}

static cr_status scal_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = scal_c(x);
    return CR_OK;
}

static cr_status scal_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const cr_array *B = env;
    cr_avar e = cr_av_broadcast1(t, &cr_fn_exp,
                                 cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(x[0]),
                                                              cr_targ_arr(cr_av_const(B)))));
    cr_avar w = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(e), cr_targ_var(x[1]));
    y[0] = cr_av_sum(t, w);
    return cr_tape_status(t);
}

static void test_scalar_inputs_array_ops(void **state)
{
    fixture *f = *state;
    cr_array B = cr_array_vector(k_B, 4);
    double x[2] = {0.3, 1.2}, y, g[2], fd[2];
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, scal_t, &B, x, 2, &p), CR_OK);
    const double pts[3][2] = {{0.3, 1.2}, {-0.7, 0.4}, {1.1, -2.0}};
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(cr_prepared_value_and_gradient(p, pts[k], 2, &y, g), CR_OK);
        assert_close(y, scal_c(pts[k]), 1e-13);
        fd_grad(f->arena, scal_fd, NULL, pts[k], 2, fd);
        for (size_t j = 0; j < 2; j++)
            assert_close(g[j], fd[j], FD_RTOL);
    }
    /* The two entry points do not mix. */
    cr_array xa = cr_array_vector(x, 2);
    const cr_array *xs[1] = {&xa};
    cr_array *gs[1] = {&xa};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "prepared for scalars");
    cr_prepared_free(p);
}

/* ---- Refusals ----------------------------------------------------------------------------- */

/* sum(x .^ 2) if sum(x) > 0, else sum(sin.(x)) */
static cr_status branchy(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    if (cr_tape_cmp(t, cr_av_sum(t, xs[0]), CR_CMP_GT, cr_const(0.0)))
        *y = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(xs[0])));
    else
        *y = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(xs[0])));
    return cr_tape_status(t);
}

/* sum(unique(x)): the result's length depends on the values */
static cr_status uniq(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_targ a = cr_targ_arr(xs[0]);
    *y = cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_unique, &a, 1));
    return cr_tape_status(t);
}

/* sum(cholesky(A)): fails where A is not positive definite */
static cr_status chol(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_targ a = cr_targ_arr(xs[0]);
    *y = cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_cholesky, &a, 1));
    return cr_tape_status(t);
}

/* 2 max(x) + sum(x) through findmax, whose index is an integer tuple element */
static cr_status fmax_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_targ a = cr_targ_arr(xs[0]), mi[2];
    if (cr_tape_acall_n(t, &cr_fn_findmax, &a, 1, mi, 2) != CR_OK)
        return cr_tape_status(t);
    *y = cr_add(t, cr_mul(t, cr_const(2.0), mi[0].u.s), cr_av_sum(t, xs[0]));
    return cr_tape_status(t);
}

/* sum(x) > 0 ? sum(x .* x) : 3: a branch that makes the output a constant */
static cr_status pos_or_const(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    if (cr_tape_cmp(t, cr_av_sum(t, xs[0]), CR_CMP_GT, cr_const(0.0)))
        *y = cr_av_dot(t, xs[0], xs[0]);
    else
        *y = cr_const(3.0);
    return cr_tape_status(t);
}

static cr_status own_input(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    const cr_array *b = env;
    *y = cr_av_dot(t, xs[0], cr_tape_array_input(t, b));
    return cr_tape_status(t);
}

static cr_status own_scalar(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    *y = cr_mul(t, cr_av_sum(t, xs[0]), cr_tape_input(t, 2.0));
    return cr_tape_status(t);
}

static void test_refusals(void **state)
{
    fixture *f = *state;
    double x[3] = {0.5, 1.0, -0.2}, g[3] = {0}, y = 0;
    cr_array xa = cr_array_vector(x, 3), ga = cr_array_vector(g, 3);
    const cr_array *xs[1] = {&xa};
    cr_array *gs[1] = {&ga};
    cr_prepared *p;

    /* A comparison that flips: refused, nothing written; then usable again. */
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, branchy, NULL, xs, 1, &p), CR_OK);
    x[0] = -3.0;
    g[0] = y = 42.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "> 0");
    assert_contains(cr_ctx_errmsg(f->ctx), "prepare it again");
    assert_true(y == 42.0 && g[0] == 42.0);
    x[0] = 2.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
    assert_close(y, 4.0 + 1.0 + 0.04, 1e-15);
    for (size_t i = 0; i < 3; i++)
        assert_close(g[i], 2 * x[i], 1e-15);
    /* Another number of inputs, another shape, another dtype. */
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 2, &y, gs), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "prepared for 1 array, 2 given");
    cr_array x2 = cr_array_vector(x, 2), xm = cr_array_matrix(x, 1, 3);
    const cr_array *xs2[1] = {&x2}, *xsm[1] = {&xm};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs2, 1, &y, gs), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "input 0 is f64 (2)");
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xsm, 1, &y, gs), CR_ESHAPE);
    float xf[3] = {1, 2, 3};
    cr_array xfa;
    size_t shape[1] = {3};
    assert_int_equal(cr_array_view_init(&xfa, xf, CR_DT_F32, 1, shape, NULL), CR_OK);
    const cr_array *xsf[1] = {&xfa};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xsf, 1, &y, gs), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "input 0 is f32");
    /* A gradient array of another size; the scalar entry point. */
    cr_array *gs2[1] = {&x2};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs2), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_prepared_value_and_gradient_arrays: gradient array 0 is f64 (2)");
    /* An input of the right shape with NULL data: refused before it is read. */
    cr_array xnull = cr_array_vector(x, 3);
    xnull.data = NULL;
    const cr_array *xsn[1] = {&xnull};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xsn, 1, &y, gs), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_prepared_value_and_gradient_arrays: input 0 has NULL data");
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 3, &y, g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "prepared for arrays");
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, NULL, 1, &y, gs), CR_EINVAL);
    /* Still usable. */
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
    assert_close(g[1], 2 * x[1], 1e-15);
    cr_prepared_free(p);

    /* A rule whose result has another shape at the new inputs. */
    x[0] = 0.5, x[1] = 1.0, x[2] = -0.2;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, uniq, NULL, xs, 1, &p), CR_OK);
    x[1] = 0.5;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "unique gives a f64 (2) array at these inputs, a f64 (3)");
    x[1] = 3.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
    assert_close(y, 3.3, 1e-15);
    for (size_t i = 0; i < 3; i++)
        assert_close(g[i], 1.0, 1e-15);
    cr_prepared_free(p);

    /* A rule that fails at the new inputs. */
    double a[4] = {2.0, 0.5, 0.5, 1.0}, ag[4];
    cr_array A = cr_array_matrix(a, 2, 2), gA = cr_array_matrix(ag, 2, 2);
    const cr_array *as[1] = {&A};
    cr_array *ags[1] = {&gA};
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, chol, NULL, as, 1, &p), CR_OK);
    a[3] = -1.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, as, 1, &y, ags), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "prepared gradient: cholesky failed at these inputs");
    a[3] = 3.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, as, 1, &y, ags), CR_OK);
    assert_close(y, sqrt(2.0) + 0.5 / sqrt(2.0) + sqrt(3.0 - 0.125), 1e-14);
    cr_prepared_free(p);

    /* An integer tuple element that changes (findmax's index): refused. */
    x[0] = 0.5, x[1] = 1.0, x[2] = -0.2;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, fmax_t, NULL, xs, 1, &p), CR_OK);
    x[1] = 1.5;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
    assert_close(y, 3.0 + 1.8, 1e-15);
    assert_close(g[0], 1.0, 0);
    assert_close(g[1], 3.0, 0);
    x[2] = 4.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "findmax (tuple element 1) is 2 at these inputs and was 1");
    x[2] = 0.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
    assert_close(g[1], 3.0, 0);
    cr_prepared_free(p);

    /* A constant output still depends on the comparison that chose it (a replay used to
     * return the constant and zero gradients where the comparison changed). */
    x[0] = -1.0, x[1] = 0.5, x[2] = 0.2;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, pos_or_const, NULL, xs, 1, &p),
                     CR_OK);
    x[0] = -2.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
    assert_close(y, 3.0, 0);
    assert_close(g[1], 0.0, 0);
    x[0] = 1.0;
    y = g[0] = 42.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "the comparison 1.7 > 0");
    assert_true(y == 42.0 && g[0] == 42.0);
    x[0] = -1.0;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
    assert_close(y, 3.0, 0);
    cr_prepared_free(p);

    /* Inputs made inside the function; bad arguments. */
    p = (cr_prepared *)&x;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, own_input, &xa, xs, 1, &p),
                     CR_EINVAL);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(f->ctx), "made 1 array input of its own");
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, own_scalar, NULL, xs, 1, &p),
                     CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "made 1 scalar input of its own");
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, rosen_t, NULL, xs, 0, &p), CR_EINVAL);
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, NULL, NULL, xs, 1, &p), CR_EINVAL);
    cr_array ia;
    int64_t iv[3] = {1, 2, 3};
    assert_int_equal(cr_array_view_init(&ia, iv, CR_DT_I64, 1, shape, NULL), CR_OK);
    const cr_array *ias[1] = {&ia};
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, rosen_t, NULL, ias, 1, &p),
                     CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "not a float array");
    /* A function that fails while recording. */
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, chol, NULL, xs, 1, &p), CR_ESHAPE);
    assert_null(p);
}

/* Allocation failures at every point of preparing f and of its first call at N = 2000
 * points: CR_ENOMEM, nothing leaks, and a failed call is followed by a good one. The value
 * and gradient are the plain function's and recording's again (fc, in a context that does
 * not fail). */
enum { FAULT_N = 2000 }; /* the first call needs arena blocks of its own */

typedef struct fault_env {
    cr_ad_array_fn f;
    double (*fc)(const double *, size_t);
    double x[FAULT_N], g[FAULT_N], want[FAULT_N], y;
    cr_array xa, ga;
} fault_env;

static cr_status fault_prepare(cr_ctx *ctx, void *env, cr_prepared **p)
{
    fault_env *e = env;
    const cr_array *xs[1] = {&e->xa};
    return cr_prepare_gradient_arrays(ctx, NULL, e->f, NULL, xs, 1, p);
}

static cr_status fault_call(cr_prepared *p, void *env)
{
    fault_env *e = env;
    const cr_array *xs[1] = {&e->xa};
    cr_array *gs[1] = {&e->ga};
    return cr_prepared_value_and_gradient_arrays(p, xs, 1, &e->y, gs);
}

static void fault_check(void *env)
{
    fault_env *e = env;
    assert_close(e->y, e->fc(e->x, FAULT_N), 1e-12);
    for (size_t i = 0; i < FAULT_N; i++)
        assert_close(e->g[i], e->want[i], 1e-13);
}

static void fault_loop(cr_ad_array_fn f, double (*fc)(const double *, size_t))
{
    static fault_env e;
    e.f = f;
    e.fc = fc;
    for (size_t i = 0; i < FAULT_N; i++)
        e.x[i] = 0.6 * cos((double)i);
    e.xa = cr_array_vector(e.x, FAULT_N);
    e.ga = cr_array_vector(e.g, FAULT_N);
    cr_array wa = cr_array_vector(e.want, FAULT_N);
    const cr_array *xs[1] = {&e.xa};
    cr_array *ws[1] = {&wa};
    double yw;
    cr_ctx *clean;
    assert_int_equal(cr_ctx_new(NULL, &clean), CR_OK);
    rerecord(clean, f, NULL, xs, 1, &yw, ws);
    cr_ctx_free(clean);
    const fault_case fc_ = {
        .prepare = fault_prepare, .call = fault_call, .check = fault_check, .max_runs = 399};
    fault_tally n = fault_each_allocation(&fc_, &e);
    assert_true(n.failed_call > 0);
}

static void test_fault_injection(void **state)
{
    (void)state;
    fault_loop(rosen_t, rosen_c);
    fault_loop(kern_t, kern_c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rosen_replay),
        cmocka_unit_test(test_kernel_replay),
        cmocka_unit_test_setup_teardown(test_network_replay, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_svd_replay, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_f32_replay, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scalar_inputs_array_ops, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
