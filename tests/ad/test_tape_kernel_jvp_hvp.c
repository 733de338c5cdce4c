/*
 * Tests of fused kernels (kernel.h) in forward sweeps (cr_tape_jvp, cr_tape_ajvp) and on
 * second-order tapes (cr_tape_hvp, cr_tape_hessian, cr_tape_ahvp). Hessian-vector products
 * and Hessians are checked against central differences, along the direction, of the
 * gradient a first-order tape computes; Jacobian-vector products against central
 * differences of the same functions written in plain C. Covered: Rosenbrock over offsets 0
 * and 1 of one array, elementary functions, division and the two-argument functions with
 * constant operands, scalar-variable and constant arguments, array results followed by
 * array functions and by other kernels, programs whose result depends nonlinearly on the
 * kernel's (so that the derivative of its adjoint is not zero), strided and n-d arrays, the
 * full Hessian over several chunks of directions, memory reuse across resets and caller
 * buffers of every size, and the output's own record (a kernel, whose forward step the
 * second-order sweeps leave out, std, whose form reads its result's tangent, and a kernel
 * followed by other records).
 */
#include <chainrules/kernel.h>
#include <math.h>
#include <stdio.h>

#include "test_prob.h"

/* ---- Kernels and their plain-C element functions --------------------------------------- */

#define ROSEN(x) \
    cr_k_add(cr_k_mul(100.0, cr_k_sq(cr_k_sub(x[1], cr_k_sq(x[0])))), cr_k_sq(cr_k_sub(1.0, x[0])))
CR_KERNEL(rosen_term, 2, ROSEN);

static double rosen_term_c(double a, double b)
{
    double u = b - a * a, w = 1 - a;
    return 100 * u * u + w * w;
}

/* sin(a) exp(s b) + log(a + c) / (b^2 + s): x[0] = a, x[1] = s, x[2] = b, x[3] = c */
#define MIX(x)                                                         \
    cr_k_add(cr_k_mul(cr_k_sin(x[0]), cr_k_exp(cr_k_mul(x[1], x[2]))), \
             cr_k_div(cr_k_log(cr_k_add(x[0], x[3])), cr_k_add(cr_k_sq(x[2]), x[1])))
CR_KERNEL(mix, 4, MIX);

static double mix_c(double a, double s, double b, double c)
{
    return sin(a) * exp(s * b) + log(a + c) / (b * b + s);
}

/* The two-argument functions, / and the arithmetic with every mix of operands. */
#define BIN0(x)                                                                         \
    cr_k_add(cr_k_add(cr_k_pow(x[0], x[1]), cr_k_atan2(x[0], x[1])),                    \
             cr_k_add(cr_k_add(cr_k_hypot(x[0], x[1]), cr_k_div(x[0], x[1])),           \
                      cr_k_add(cr_k_add(cr_k_pow(x[0], 2.5), cr_k_pow(2, x[1])),        \
                               cr_k_add(cr_k_add(cr_k_div(3, x[0]), cr_k_div(x[1], 4)), \
                                        cr_k_mul(cr_k_sub(2.0, cr_k_mul(x[0], 3.0)),    \
                                                 cr_k_neg(cr_k_add(cr_k_sub(x[1], 0.5), \
                                                                   cr_k_add(1.0, x[0]))))))))
#define BIN(x) cr_k_add(BIN0(x), cr_k_mul(cr_k_div(cr_k_add(x[0], 0.25), 4.0), x[1]))
CR_KERNEL(binfns, 2, BIN);

static double bin_c(double a, double b)
{
    return (pow(a, b) + atan2(a, b)) +
           ((hypot(a, b) + a / b) +
            ((pow(a, 2.5) + pow(2, b)) +
             ((3 / a + b / 4) + (2.0 - a * 3.0) * -((b - 0.5) + (1.0 + a))))) +
           (a + 0.25) / 4.0 * b;
}

/* Every one-argument function, for x in (0.1, 0.9) */
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

/* x^2 - 1 (an array result read again by another kernel) */
#define SQM1(x) cr_k_sub(cr_k_sq(x[0]), 1.0)
CR_KERNEL(sqm1, 1, SQM1);

/* ---- Problems: scalar and array inputs packed in one flat vector ------------------------- */

/* H v against central differences of the gradient, along three directions and along each
 * unit vector (the full Hessian, column by column); the Hessian is symmetric. */
static void check_hvp(cr_ctx *ctx, const prob *p, double *z, double tol)
{
    check_hvp_dirs(ctx, p, z, tol, 3);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    size_t L = flat_len(p);
    double H[MAXZ][MAXZ];
    for (size_t j = 0; j < L; j++) {
        double e[MAXZ] = {0}, want[MAXZ];
        e[j] = 1.0;
        tape_hvp(t, p, z, e, H[j]);
        fd_hvp(ctx, p, z, e, want);
        for (size_t i = 0; i < L; i++)
            ASSERT_CLOSE(H[j][i], want[i], tol);
    }
    for (size_t i = 0; i < L; i++)
        for (size_t j = 0; j < i; j++)
            ASSERT_CLOSE(H[i][j], H[j][i], 1e-10);
    /* The first-order sweep of the second-order tape gives the first-order tape's gradient. */
    double g[MAXZ], g1[MAXZ];
    cr_array a[MAXA], ga[MAXA], *gp[MAXA];
    cr_var s[MAXS];
    cr_avar X[MAXA];
    cr_var y = record(t, p, z, a, s, X);
    views(p, g, ga);
    for (size_t j = 0; j < p->na; j++)
        gp[j] = &ga[j];
    assert_ok(t, cr_tape_gradient_arrays(t, y, s, p->ns, g, X, p->na, gp));
    grad_at(ctx, p, z, g1);
    for (size_t i = 0; i < L; i++)
        assert_close(g[i], g1[i], 1e-14);
    cr_tape_free(t);
}

/* ---- Rosenbrock: x[0:end-1] and x[1:end] of one array ----------------------------------- */

static cr_var rosen_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    size_t n = cr_array_numel(X[0].a);
    cr_kin in[2] = {cr_kin_arr(X[0], 0), cr_kin_arr(X[0], 1)};
    return cr_av_kernel_sum(t, &rosen_term, in, 2, n - 1);
}

static void test_rosen(void **state)
{
    fixture *f = *state;
    enum { N = 6 };
    prob p = {.f = rosen_p, .ns = 0, .na = 1, .ndim = {1}, .shape = {{N}}};
    double z[N] = {-1.2, 1.0, 0.3, -0.7, 2.1, 0.05};
    check_hvp(f->ctx, &p, z, 1e-6);

    /* Its Hessian is tridiagonal: the kernel adds nothing outside its elements' pairs. */
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    for (size_t j = 0; j < N; j++) {
        double e[N] = {0}, col[N];
        e[j] = 1.0;
        tape_hvp(t, &p, z, e, col);
        for (size_t i = 0; i < N; i++)
            if (i > j + 1 || j > i + 1)
                assert_true(col[i] == 0.0);
    }
    cr_tape_free(t);
}

/* Rosenbrock over ten scalar inputs, one kernel call per pair, and cr_tape_hessian (two
 * sweeps: eight directions, then two). */
static cr_var rosen_scalars_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    cr_var y = cr_const(0.0);
    for (size_t i = 0; i + 1 < MAXS; i++) {
        cr_kin in[2] = {cr_kin_var(s[i]), cr_kin_var(s[i + 1])};
        y = cr_add(t, y, cr_av_kernel_sum(t, &rosen_term, in, 2, 1));
    }
    return y;
}

/* Nine scalar inputs, each scaling a constant array that a kernel reads at two offsets,
 * with the sine of the next input as its scalar argument; the kernel's array result goes
 * through sin. */
static const double k_c[4] = {0.3, -0.8, 1.1, 0.5};

static cr_var chain_scalars_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    const cr_array *c = env;
    cr_var y = cr_const(0.0);
    for (size_t i = 0; i < 9; i++) {
        cr_avar A = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[i]), cr_targ_arr(cr_av_const(c)));
        cr_kin in[4] = {cr_kin_arr(A, 0), cr_kin_var(cr_sin(t, s[(i + 1) % 9])), cr_kin_arr(A, 1),
                        cr_kin_const(1.5)};
        cr_avar W = cr_av_kernel(t, &mix, in, 4, 3);
        y = cr_add(t, y, cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(W))));
    }
    return y;
}

static void hessian_check(cr_ctx *ctx, const prob *p, double *z)
{
    size_t N = p->ns;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    cr_array a[MAXA];
    cr_var s[MAXS];
    cr_avar X[MAXA];
    cr_var y = record(t, p, z, a, s, X);
    double H[MAXS * MAXS];
    assert_ok(t, cr_tape_hessian(t, y, s, N, H));
    for (size_t j = 0; j < N; j++) {
        double e[MAXS] = {0}, want[MAXS];
        e[j] = 1.0;
        fd_hvp(ctx, p, z, e, want);
        for (size_t i = 0; i < N; i++)
            ASSERT_CLOSE(H[i * N + j], want[i], 1e-6);
    }
    /* cr_tape_hvp on the same recording agrees with the Hessian's product, and its gradient
     * with the first-order tape's. */
    double v[MAXS], hv[MAXS], g[MAXS], g1[MAXS];
    direction(N, 2, v);
    assert_ok(t, cr_tape_hvp(t, y, s, N, v, hv, g));
    grad_at(ctx, p, z, g1);
    for (size_t i = 0; i < N; i++)
        assert_close(g[i], g1[i], 1e-14);
    for (size_t i = 0; i < N; i++) {
        double want = 0;
        for (size_t j = 0; j < N; j++)
            want += H[i * N + j] * v[j];
        ASSERT_CLOSE(hv[i], want, 1e-12);
    }
    cr_tape_free(t);
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = rosen_scalars_p, .ns = MAXS, .na = 0};
    double z[MAXS];
    for (size_t i = 0; i < MAXS; i++)
        z[i] = 0.9 * cos(0.7 * (double)i) + 0.1;
    hessian_check(f->ctx, &p, z);

    cr_array c = cr_array_vector((double *)(uintptr_t)k_c, 4);
    prob q = {.f = chain_scalars_p, .env = &c, .ns = 9, .na = 0};
    for (size_t i = 0; i < 9; i++)
        z[i] = 0.6 + 0.3 * cos((double)i);
    hessian_check(f->ctx, &q, z);
}

/* ---- Elementary functions, scalar and constant arguments, nonlinear use of the sum ----------
 */

/* s sin(Σ_e mix(x_e, s, x_{e+1}, 1.5)) + Σ_e elem(x_e)^2 / 10 + Σ_e binfns(x_e, y_e) */
static cr_var funcs_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    size_t n = cr_array_numel(X[0].a);
    cr_kin in[4] = {cr_kin_arr(X[0], 0), cr_kin_var(s[0]), cr_kin_arr(X[0], 1), cr_kin_const(1.5)};
    cr_var a = cr_mul(t, s[0], cr_sin(t, cr_av_kernel_sum(t, &mix, in, 4, n - 1)));
    cr_kin e1[1] = {cr_kin_arr(X[0], 0)};
    cr_var b = cr_av_kernel_sum(t, &elem, e1, 1, n);
    cr_kin b2[2] = {cr_kin_arr(X[0], 0), cr_kin_arr(X[1], 0)};
    cr_var c = cr_av_kernel_sum(t, &binfns, b2, 2, n);
    return cr_add(t, cr_add(t, a, cr_div(t, cr_mul(t, b, b), cr_const(10.0))), c);
}

static void test_functions(void **state)
{
    fixture *f = *state;
    enum { N = 4 };
    prob p = {.f = funcs_p, .ns = 1, .na = 2, .ndim = {1, 1}, .shape = {{N}, {N}}};
    double z[1 + 2 * N] = {0.7, 0.2, 0.45, 0.8, 0.35, 1.3, 0.6, 2.1, 0.9};
    check_hvp(f->ctx, &p, z, 1e-6);

    /* On a second-order tape the kernels' values are those of the plain C functions. */
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_array xa = cr_array_vector(z + 1, N), ya = cr_array_vector(z + 1 + N, N);
    cr_kin b2[2] = {cr_kin_arr(cr_tape_array_input(t, &xa), 0),
                    cr_kin_arr(cr_tape_array_input(t, &ya), 0)};
    cr_var c = cr_av_kernel_sum(t, &binfns, b2, 2, N);
    double want = 0;
    for (size_t e = 0; e < N; e++)
        want += bin_c(z[1 + e], z[1 + N + e]);
    assert_close(c.v, want, 1e-14);
    cr_tape_free(t);
}

/* ---- Array results followed by array functions and by another kernel ------------------- */

/* W = mix.(x, s, y, 1.5) (an array variable); V = sqm1.(W) (a kernel reading it);
 * sum(sin.(W)) + dot(W, y) + sum(s .* W) + Σ_e rosen(V_e, V_{e+1}) / 100 */
static cr_var arrays_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    size_t n = cr_array_numel(X[0].a);
    cr_kin in[4] = {cr_kin_arr(X[0], 0), cr_kin_var(s[0]), cr_kin_arr(X[1], 0), cr_kin_const(1.5)};
    cr_avar W = cr_av_kernel(t, &mix, in, 4, n);
    cr_var a = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(W)));
    cr_var b = cr_av_dot(t, W, X[1]);
    cr_var c = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[0]), cr_targ_arr(W)));
    cr_kin w1[1] = {cr_kin_arr(W, 0)};
    cr_avar V = cr_av_kernel(t, &sqm1, w1, 1, n);
    cr_kin v2[2] = {cr_kin_arr(V, 0), cr_kin_arr(V, 1)};
    cr_var d = cr_div(t, cr_av_kernel_sum(t, &rosen_term, v2, 2, n - 1), cr_const(100.0));
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
}

static void test_array_results(void **state)
{
    fixture *f = *state;
    enum { N = 5 };
    prob p = {.f = arrays_p, .ns = 1, .na = 2, .ndim = {1, 1}, .shape = {{N}, {N}}};
    double z[1 + 2 * N] = {0.6, 0.3, -0.4, 0.9, 0.1, 0.5, 0.8, -0.6, 0.35, 1.1, -0.2};
    check_hvp(f->ctx, &p, z, 1e-6);
}

/* ---- The output's own record ---------------------------------------------------------- */

/* The second-order sweeps leave out the forward step of the output's record when it is a
 * fused kernel: its second-order step reads its arguments' tangents only, and nothing else
 * reads its result's. An array function's form may read it (std's does), so its record
 * keeps the step; so does a kernel that is not the last record. A forward sweep (jvp)
 * returns that tangent and keeps the step. */
static cr_var std_out_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ u[1] = {cr_targ_arr(X[0])};
    return cr_tape_acall_s(t, &cr_fn_std, u, 1);
}

static cr_var ksum_out_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_kin e1[1] = {cr_kin_arr(X[0], 0)};
    return cr_av_kernel_sum(t, &elem, e1, 1, cr_array_numel(X[0].a));
}

static cr_var ksum_then_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    cr_var k = ksum_out_p(t, s, X, env);
    return cr_mul(t, k, cr_sin(t, k));
}

/* Rosenbrock's term of two scalar variables, the output (cr_tape_hessian's sweeps) */
static cr_var rosen2_out_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    cr_kin in[2] = {cr_kin_var(s[0]), cr_kin_var(s[1])};
    return cr_av_kernel_sum(t, &rosen_term, in, 2, 1);
}

static void test_output_records(void **state)
{
    fixture *f = *state;
    enum { N = 5 };
    double z[N] = {0.42, 0.17, 0.81, 0.66, 0.29};
    prob ps = {.f = std_out_p, .ns = 0, .na = 1, .ndim = {1}, .shape = {{N}}};
    check_hvp(f->ctx, &ps, z, 1e-6);
    prob pk = {.f = ksum_out_p, .ns = 0, .na = 1, .ndim = {1}, .shape = {{N}}};
    check_hvp(f->ctx, &pk, z, 1e-6);
    check_jvp(f->ctx, &pk, z, 1e-7, 3);
    prob pt = {.f = ksum_then_p, .ns = 0, .na = 1, .ndim = {1}, .shape = {{N}}};
    check_hvp(f->ctx, &pt, z, 1e-6);
    check_jvp(f->ctx, &pt, z, 1e-7, 3);
    prob pr = {.f = rosen2_out_p, .ns = 2, .na = 0};
    hessian_check(f->ctx, &pr, (double[2]){-0.7, 1.3});
}

/* ---- Strided and n-d arguments on a second-order tape ----------------------------------- */

static void test_layouts_second(void **state)
{
    fixture *f = *state;
    enum { N = 6 };
    double z[N] = {-1.2, 1.0, 0.3, -0.7, 2.1, 0.05}, v[N], want[N];
    direction(N, 1, v);
    prob p = {.f = rosen_p, .ns = 0, .na = 1, .ndim = {1}, .shape = {{N}}};
    fd_hvp(f->ctx, &p, z, v, want);
    /* x and v every other element of their buffers, H v into every third */
    double xs[2 * N], vs[2 * N], hs[3 * N];
    for (size_t i = 0; i < N; i++) {
        xs[2 * i] = z[i];
        xs[2 * i + 1] = NAN;
        vs[2 * i] = v[i];
        vs[2 * i + 1] = NAN;
    }
    size_t shape[1] = {N};
    ptrdiff_t s2[1] = {2}, s3[1] = {3};
    cr_array xa, va, ha;
    assert_int_equal(cr_array_view_init(&xa, xs, CR_DT_F64, 1, shape, s2), CR_OK);
    assert_int_equal(cr_array_view_init(&va, vs, CR_DT_F64, 1, shape, s2), CR_OK);
    assert_int_equal(cr_array_view_init(&ha, hs, CR_DT_F64, 1, shape, s3), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = rosen_p(t, NULL, &X, NULL);
    const cr_array *vp = &va;
    cr_array *hp = &ha;
    assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp));
    for (size_t i = 0; i < N; i++)
        ASSERT_CLOSE(hs[3 * i], want[i], 1e-6);

    /* A 2 x 3 matrix read as six elements in row-major order: sum(elem.(M))^2 through the
     * kernel equals the same over the flat vector. */
    double m[N] = {0.2, 0.7, 0.45, 0.3, 0.85, 0.6}, hm[N], hflat[N];
    cr_array ma = cr_array_matrix(m, 2, 3), mv = cr_array_matrix(v, 2, 3),
             mh = cr_array_matrix(hm, 2, 3);
    cr_array fa = cr_array_vector(m, N), fv = cr_array_vector(v, N), fh = cr_array_vector(hflat, N);
    cr_array *arr[2][3] = {{&ma, &mv, &mh}, {&fa, &fv, &fh}};
    for (int k = 0; k < 2; k++) {
        cr_tape_reset(t);
        X = cr_tape_array_input(t, arr[k][0]);
        cr_kin in[1] = {cr_kin_arr(X, 0)};
        cr_var e = cr_av_kernel_sum(t, &elem, in, 1, N);
        y = cr_mul(t, e, e);
        vp = arr[k][1];
        hp = arr[k][2];
        assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp));
    }
    for (size_t i = 0; i < N; i++)
        assert_close(hm[i], hflat[i], 1e-14);
    cr_tape_free(t);
}

/* ---- Forward sweeps ------------------------------------------------------------------------ */

/* x of n, s: W_e = mix(x_{e+1}, s, x_e, 1.5) for e < n-1 (x[1:end] and x[0:end-1]) and
 * y = Σ_e rosen(x_e, x_{e+1}) + Σ_e sin(W_e), in plain C. z = (s, x). */
static void fwd_c(const double *z, size_t n, double *W, double *y)
{
    double s = z[0];
    const double *x = z + 1;
    double acc = 0;
    for (size_t e = 0; e + 1 < n; e++) {
        W[e] = mix_c(x[e + 1], s, x[e], 1.5);
        acc += rosen_term_c(x[e], x[e + 1]) + sin(W[e]);
    }
    *y = acc;
}

static void fwd_tape(cr_tape *t, cr_var s, cr_avar X, size_t n, cr_avar *W, cr_var *y)
{
    cr_kin in[4] = {cr_kin_arr(X, 1), cr_kin_var(s), cr_kin_arr(X, 0), cr_kin_const(1.5)};
    *W = cr_av_kernel(t, &mix, in, 4, n - 1);
    cr_kin r[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
    *y = cr_add(t, cr_av_kernel_sum(t, &rosen_term, r, 2, n - 1),
                cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(*W))));
}

static void test_forward(void **state)
{
    fixture *f = *state;
    enum { N = 7 };
    double z[1 + N], dz[1 + N];
    z[0] = 0.4;
    for (size_t i = 0; i < N; i++)
        z[1 + i] = 0.5 + 0.4 * sin(1.1 * (double)i);
    direction(1 + N, 3, dz);
    /* central differences (five points) of the plain-C function along dz */
    double Wd_want[N - 1], yd_want, h = 1e-4;
    {
        double zz[1 + N], W[4][N - 1], y[4];
        const double c[4] = {2, 1, -1, -2};
        for (int k = 0; k < 4; k++) {
            for (size_t i = 0; i < 1 + N; i++)
                zz[i] = z[i] + c[k] * h * dz[i];
            fwd_c(zz, N, W[k], &y[k]);
        }
        yd_want = (8 * (y[1] - y[2]) - (y[0] - y[3])) / (12 * h);
        for (size_t e = 0; e + 1 < N; e++)
            Wd_want[e] = (8 * (W[1][e] - W[2][e]) - (W[0][e] - W[3][e])) / (12 * h);
    }
    /* x strided (every other element), its tangent contiguous, W's tangent into every third */
    double xs[2 * N], Wd[3 * (N - 1)], yd;
    for (size_t i = 0; i < N; i++) {
        xs[2 * i] = z[1 + i];
        xs[2 * i + 1] = NAN;
    }
    size_t shape[1] = {N}, wshape[1] = {N - 1};
    ptrdiff_t s2[1] = {2}, s3[1] = {3};
    cr_array xa, xda = cr_array_vector(dz + 1, N), wda;
    assert_int_equal(cr_array_view_init(&xa, xs, CR_DT_F64, 1, shape, s2), CR_OK);
    assert_int_equal(cr_array_view_init(&wda, Wd, CR_DT_F64, 1, wshape, s3), CR_OK);
    for (int order = 0; order < 2; order++) {
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp,
                             .flags = order ? CR_TAPE_SECOND_ORDER : CR_TAPE_FORWARD};
        assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
        cr_var s = cr_tape_input(t, z[0]);
        cr_avar X = cr_tape_array_input(t, &xa), W;
        cr_var y;
        fwd_tape(t, s, X, N, &W, &y);
        assert_ok(t, cr_tape_status(t));
        const cr_array *adot = &xda;
        cr_array *bdot = &wda;
        assert_ok(t, cr_tape_ajvp(t, &s, dz, 1, &X, &adot, 1, &y, 1, &yd, &W, 1, &bdot));
        ASSERT_CLOSE(yd, yd_want, 1e-8);
        for (size_t e = 0; e + 1 < N; e++)
            ASSERT_CLOSE(Wd[3 * e], Wd_want[e], 1e-8);
        cr_tape_free(t);
    }
}

/* cr_tape_jvp over scalar inputs: kernels reading constant arrays with scalar-variable
 * arguments (no array variable on the tape), and a kernel sum along several directions
 * (cr_tape_hessian's forward sweep is checked in test_hessian). */
static double scalars_c(const double *z)
{
    double acc = 0;
    for (size_t e = 0; e + 1 < 4; e++)
        acc += mix_c(k_c[e], z[0], k_c[e + 1], z[1]);
    return acc * z[2];
}

static void test_jvp_scalars(void **state)
{
    fixture *f = *state;
    double z[3] = {0.7, 1.9, -0.6}, dz[3] = {0.3, -1.1, 0.8}, want, h = 1e-4;
    {
        double zz[3], y[4];
        const double c[4] = {2, 1, -1, -2};
        for (int k = 0; k < 4; k++) {
            for (size_t i = 0; i < 3; i++)
                zz[i] = z[i] + c[k] * h * dz[i];
            y[k] = scalars_c(zz);
        }
        want = (8 * (y[1] - y[2]) - (y[0] - y[3])) / (12 * h);
    }
    cr_array c = cr_array_vector((double *)(uintptr_t)k_c, 4);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_FORWARD};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_var s[3];
    assert_int_equal(cr_tape_inputs(t, z, 3, s), CR_OK);
    cr_kin in[4] = {cr_kin_arr(cr_av_const(&c), 0), cr_kin_var(s[0]),
                    cr_kin_arr(cr_av_const(&c), 1), cr_kin_var(s[1])};
    cr_var y = cr_mul(t, cr_av_kernel_sum(t, &mix, in, 4, 3), s[2]);
    double yd;
    assert_ok(t, cr_tape_jvp(t, s, dz, 3, &y, 1, &yd));
    ASSERT_CLOSE(yd, want, 1e-8);
    /* a zero tangent gives zero */
    double zero[3] = {0, 0, 0};
    assert_ok(t, cr_tape_jvp(t, s, zero, 3, &y, 1, &yd));
    ASSERT_DBL(yd, 0.0);
    cr_tape_free(t);
}

/* ---- Memory: nothing grows across resets; caller buffers of every size ------------------- */

static void test_reuse(void **state)
{
    fixture *f = *state;
    enum { N = 600 }; /* more than two blocks of the loops */
    static double x[N], v[N], hv[N], hv0[N];
    for (size_t i = 0; i < N; i++) {
        x[i] = 0.5 + 0.4 * sin(0.37 * (double)i);
        v[i] = cos(0.11 * (double)i);
    }
    cr_array xa = cr_array_vector(x, N), va = cr_array_vector(v, N), ha = cr_array_vector(hv, N);
    const cr_array *vp = &va;
    cr_array *hp = &ha;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    size_t bytes = 0;
    for (int rep = 0; rep < 4; rep++) {
        cr_tape_reset(t);
        cr_var s = cr_tape_input(t, 0.3);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_kin in[4] = {cr_kin_arr(X, 0), cr_kin_var(s), cr_kin_arr(X, 1), cr_kin_const(1.5)};
        cr_avar W = cr_av_kernel(t, &mix, in, 4, N - 1);
        cr_kin r[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
        cr_var y = cr_add(t, cr_av_kernel_sum(t, &rosen_term, r, 2, N - 1),
                          cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(W))));
        double sv = 0.5, shv;
        assert_ok(t, cr_tape_ahvp(t, y, &s, 1, &sv, &shv, &X, 1, &vp, &hp));
        if (rep == 0)
            memcpy(hv0, hv, sizeof hv);
        for (size_t i = 0; i < N; i++)
            ASSERT_DBL(hv[i], hv0[i]);
        cr_tape_stats st;
        assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
        if (rep > 0)
            assert_true(st.arena_bytes == bytes);
        bytes = st.arena_bytes;
    }
    cr_tape_free(t);
}

static void test_buffer_full(void **state)
{
    fixture *f = *state;
    enum { N = 5 };
    static unsigned char buf[1 << 17];
    prob p = {.f = arrays_p, .ns = 1, .na = 2, .ndim = {1, 1}, .shape = {{N}, {N}}};
    double z[1 + 2 * N] = {0.6, 0.3, -0.4, 0.9, 0.1, 0.5, 0.8, -0.6, 0.35, 1.1, -0.2};
    double v[1 + 2 * N], want[1 + 2 * N], got[1 + 2 * N];
    direction(1 + 2 * N, 0, v);
    fd_hvp(f->ctx, &p, z, v, want);
    size_t failures = 0, kernel_failures = 0;
    bool done = false;
    for (size_t size = 1024; size <= sizeof buf && !done; size += 256) {
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp,
                             .flags = CR_TAPE_SECOND_ORDER,
                             .buffer = buf,
                             .buffer_size = size};
        if (cr_tape_new(f->ctx, &tp, &t) != CR_OK)
            continue;
        cr_array a[MAXA], va[MAXA], oa[MAXA];
        const cr_array *vp[MAXA];
        cr_array *op[MAXA];
        cr_var s[1];
        cr_avar X[MAXA];
        cr_var y = record(t, &p, z, a, s, X);
        views(&p, v, va);
        views(&p, got, oa);
        for (size_t j = 0; j < 2; j++) {
            vp[j] = &va[j];
            op[j] = &oa[j];
        }
        cr_status st = cr_tape_status(t);
        if (st == CR_OK)
            st = cr_tape_ahvp(t, y, s, 1, v, got, X, 2, vp, op);
        if (st == CR_OK) {
            for (size_t i = 0; i < 1 + 2 * N; i++)
                ASSERT_CLOSE(got[i], want[i], 1e-6);
            done = true;
        } else {
            assert_int_equal(st, CR_EARENA);
            assert_int_equal(cr_tape_status(t), CR_EARENA);
            assert_true(cr_tape_errmsg(t)[0] != '\0');
            failures++;
            kernel_failures += strstr(cr_tape_errmsg(t), "second-order step failed") != NULL;
        }
        cr_tape_free(t);
    }
    assert_true(done);
    assert_true(failures > 10);
    assert_true(kernel_failures > 0); /* the kernels' own scratch did not fit */
}

/* cr_k_row1_h and cr_k_row2_h: second derivatives against central differences of the rows'
 * values (five points, second order of the value) and of their partials; unknown functions
 * give NaN; second partials of a fixed argument are zero. */
static double fd2_1(unsigned fn, double x, double h)
{
    double d, f2 = cr_k_row1(fn, x + 2 * h, &d), f1 = cr_k_row1(fn, x + h, &d),
              f0 = cr_k_row1(fn, x, &d), m1 = cr_k_row1(fn, x - h, &d),
              m2 = cr_k_row1(fn, x - 2 * h, &d);
    return (-f2 + 16 * f1 - 30 * f0 + 16 * m1 - m2) / (12 * h * h);
}

static void test_rows(void **state)
{
    (void)state;
    for (unsigned fn = 0; fn < CR_K_NFN1; fn++) {
        double x = 0.45, d1, d2, dref;
        double y = cr_k_row1_h(fn, x, &d1, &d2);
        ASSERT_DBL(y, cr_k_row1(fn, x, &dref));
        ASSERT_DBL(d1, dref);
        ASSERT_CLOSE(d2, fd2_1(fn, x, 1e-3), 1e-6);
    }
    for (unsigned fn = 0; fn < CR_K_NFN2; fn++) {
        double x = 0.7, y = 1.3, h = 1e-5, d[2], H[3], dref[2], dp[2], dm[2];
        double v = cr_k_row2_h(fn, x, y, 3u, d, H);
        ASSERT_DBL(v, cr_k_row2(fn, x, y, dref));
        ASSERT_DBL(d[0], dref[0]);
        ASSERT_DBL(d[1], dref[1]);
        cr_k_row2(fn, x + h, y, dp);
        cr_k_row2(fn, x - h, y, dm);
        ASSERT_CLOSE(H[0], (dp[0] - dm[0]) / (2 * h), 1e-6);
        ASSERT_CLOSE(H[1], (dp[1] - dm[1]) / (2 * h), 1e-6);
        cr_k_row2(fn, x, y + h, dp);
        cr_k_row2(fn, x, y - h, dm);
        ASSERT_CLOSE(H[1], (dp[0] - dm[0]) / (2 * h), 1e-6);
        ASSERT_CLOSE(H[2], (dp[1] - dm[1]) / (2 * h), 1e-6);
        double Hx[3], Hy[3], H0[3];
        cr_k_row2_h(fn, x, y, 1u, d, Hx);
        ASSERT_CLOSE(Hx[0], H[0], 1e-9);
        ASSERT_CLOSE(Hx[1], H[1], 1e-6);
        ASSERT_DBL(Hx[2], 0.0);
        cr_k_row2_h(fn, x, y, 2u, d, Hy);
        ASSERT_DBL(Hy[0], 0.0);
        ASSERT_CLOSE(Hy[1], H[1], 1e-6);
        ASSERT_CLOSE(Hy[2], H[2], 1e-9);
        cr_k_row2_h(fn, x, y, 0u, d, H0);
        assert_true(H0[0] == 0.0 && H0[1] == 0.0 && H0[2] == 0.0);
    }
    /* pow(x, c) at x < 0 with an integer c: real there, while its complex instantiation sits
     * on the branch cut of log (the complex step alone gave -55107 for d2/dx2 x^3 at -0.5). */
    const double cs[4] = {2, 3, 4, -1}, xs[3] = {-0.5, -0.3, -1.7};
    for (size_t i = 0; i < 4; i++)
        for (size_t q = 0; q < 3; q++) {
            double x = xs[q], h = 1e-5, d[2], H[3], dp[2], dm[2];
            cr_k_row2_h(CR_K_POW, x, cs[i], 1u, d, H);
            cr_k_row2(CR_K_POW, x + h, cs[i], dp);
            cr_k_row2(CR_K_POW, x - h, cs[i], dm);
            ASSERT_CLOSE(H[0], (dp[0] - dm[0]) / (2 * h), 1e-6 * (1 + fabs(H[0])));
        }
    double d1, d2, d[2], H[3];
    assert_true(isnan(cr_k_row1_h(CR_K_NFN1, 1.0, &d1, &d2)) && isnan(d1) && isnan(d2));
    assert_true(isnan(cr_k_row2_h(CR_K_NFN2, 1.0, 2.0, 3u, d, H)) && isnan(d[0]) && isnan(d[1]) &&
                isnan(H[0]) && isnan(H[1]) && isnan(H[2]));
}

/* A non-finite direction element anywhere (the check runs in four chains, then a tail) is
 * refused on the context; the tape stays usable. */
static void test_bad_directions(void **state)
{
    fixture *f = *state;
    enum { N = 11 };
    double x[N], v[N], hv[N];
    for (size_t i = 0; i < N; i++) {
        x[i] = 0.5 + 0.1 * (double)i;
        v[i] = 1.0;
    }
    cr_array xa = cr_array_vector(x, N), va = cr_array_vector(v, N), ha = cr_array_vector(hv, N);
    const cr_array *vp = &va;
    cr_array *hp = &ha;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = rosen_p(t, NULL, &X, NULL);
    const size_t at[3] = {0, 6, 9};
    const double bad[3] = {NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < 3; k++) {
        v[at[k]] = bad[k];
        assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp), CR_EDOMAIN);
        char msg[64];
        snprintf(msg, sizeof msg, "element %zu of direction array 0 is not finite", at[k]);
        assert_contains(cr_ctx_errmsg(f->ctx), msg);
        v[at[k]] = 1.0;
    }
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp));
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rosen, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_functions, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_array_results, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_output_records, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_layouts_second, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_forward, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_jvp_scalars, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reuse, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_buffer_full, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_bad_directions, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
