/*
 * Tests of array functions in forward sweeps (cr_tape_jvp, cr_tape_ajvp) and on second-order
 * tapes (cr_tape_hvp, cr_tape_hessian, cr_tape_ahvp). Hessian-vector products are checked
 * against central differences, along the direction, of the gradient the tape computes on a
 * first-order tape; Jacobian-vector products against central differences of the same
 * functions written in plain C. Also: the refusals (a function without a second-order form,
 * a function without an frule, bad directions), memory reuse across resets, f32 arrays.
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"
#include "test_noform.h"
#include "test_prob.h"

/* ---- Problems: scalar and array inputs packed in one flat vector -------------------------- */

/* Check H v against central differences of the gradient, for three directions. */
static void check_hvp(cr_ctx *ctx, const prob *p, double *z, double tol)
{
    check_hvp_dirs(ctx, p, z, tol, 3);
}

/* ---- Rosenbrock in array form ------------------------------------------------------------- */

/* sum(100 .* (x[1:] .- x[:-1].^2).^2 .+ (1 .- x[:-1]).^2): two views, broadcasts, sum */
static cr_var rosen_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    int64_t n = (int64_t)cr_array_numel(X[0].a);
    cr_avar lo = cr_av_slice(t, X[0], 0, n - 1), hi = cr_av_slice(t, X[0], 1, n);
    cr_avar a = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_arr(hi),
                                 cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(lo))));
    cr_avar b = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_var(cr_const(1.0)), cr_targ_arr(lo));
    cr_avar sm =
        cr_av_broadcast2(t, &cr_fn_add,
                         cr_targ_arr(cr_av_broadcast2(
                             t, &cr_fn_mul, cr_targ_var(cr_const(100.0)),
                             cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(a))))),
                         cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(b))));
    return cr_av_sum(t, sm);
}

static void test_rosen_hvp_and_hessian(void **state)
{
    fixture *f = *state;
    enum { N = 6 };
    prob p = {.f = rosen_p, .ns = 0, .na = 1, .ndim = {1}, .shape = {{N}}};
    double z[N] = {-1.2, 1.0, 0.3, -0.7, 2.1, 0.05};
    check_hvp(f->ctx, &p, z, 1e-6);

    /* The full Hessian, one H e_j per column, against central differences of the gradient;
     * it is symmetric and tridiagonal. */
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double H[N][N];
    for (size_t j = 0; j < N; j++) {
        double e[N] = {0}, col[N], want[N];
        e[j] = 1.0;
        tape_hvp(t, &p, z, e, col);
        fd_hvp(f->ctx, &p, z, e, want);
        for (size_t i = 0; i < N; i++) {
            ASSERT_CLOSE(col[i], want[i], 1e-6);
            H[i][j] = col[i];
        }
    }
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            ASSERT_CLOSE(H[i][j], H[j][i], 1e-12);
            if (i > j + 1 || j > i + 1)
                assert_true(H[i][j] == 0.0);
        }

    /* The first-order sweeps of a second-order tape give the first-order tape's gradient. */
    double g[N], g1[N];
    cr_array a[1], ga = cr_array_vector(g, N), *gp = &ga;
    cr_var s[1];
    cr_avar X[1];
    cr_var y = record(t, &p, z, a, s, X);
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, X, 1, &gp));
    grad_at(f->ctx, &p, z, g1);
    for (size_t i = 0; i < N; i++)
        assert_close(g[i], g1[i], 1e-14);
    cr_tape_free(t);
}

/* ---- Least squares with matmul: both factors variables ------------------------------------ */

static const double k_b[4] = {0.5, -1.0, 2.0, 0.25};

/* sum((A x - b).^2), A 4 x 3, x of 3 */
static cr_var lsq_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const cr_array *b = env;
    cr_avar r = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_arr(cr_av_matmul(t, X[0], X[1])),
                                 cr_targ_arr(cr_av_const(b)));
    return cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(r)));
}

static void test_least_squares(void **state)
{
    fixture *f = *state;
    cr_array b = cr_array_vector((double *)(uintptr_t)k_b, 4);
    prob p = {.f = lsq_p, .env = &b, .ns = 0, .na = 2, .ndim = {2, 1}, .shape = {{4, 3}, {3}}};
    double z[15];
    for (size_t i = 0; i < 15; i++)
        z[i] = 0.8 * sin(0.9 * (double)i + 0.3);
    check_hvp(f->ctx, &p, z, 1e-6);
}

/* ---- A scalar variable times an array; an array used twice ---------------------------------- */

/* sum(sin.(s0 .* X)) + s1 * dot(X, X) + sum(exp.(s1 .* X) .* X) + s0 * s1 */
static cr_var stimes_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_var a =
        cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin,
                                      cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[0]),
                                                                   cr_targ_arr(X[0])))));
    cr_var b = cr_mul(t, s[1], cr_av_dot(t, X[0], X[0]));
    cr_avar e = cr_av_broadcast1(
        t, &cr_fn_exp,
        cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[1]), cr_targ_arr(X[0]))));
    cr_var c = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(e), cr_targ_arr(X[0])));
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, cr_mul(t, s[0], s[1])));
}

static void test_scalar_times_array(void **state)
{
    fixture *f = *state;
    prob p = {.f = stimes_p, .ns = 2, .na = 1, .ndim = {1}, .shape = {{5}}};
    double z[7] = {0.7, -0.4, 0.3, -1.1, 0.9, 0.4, -0.25};
    check_hvp(f->ctx, &p, z, 1e-6);
}

/* ---- Broadcasts of rows: sin, exp, tanh, division, hypot (real-only), broadcast shapes ---- */

/* sum(tanh.(X ./ r)) + sum(exp.(sin.(X))) + sum(hypot.(X, r)), X 2 x 3, r of 3 */
static cr_var rows_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ x = cr_targ_arr(X[0]), r = cr_targ_arr(X[1]);
    cr_var a = cr_av_sum(
        t, cr_av_broadcast1(t, &cr_fn_tanh, cr_targ_arr(cr_av_broadcast2(t, &cr_fn_div, x, r))));
    cr_var b = cr_av_sum(
        t, cr_av_broadcast1(t, &cr_fn_exp, cr_targ_arr(cr_av_broadcast1(t, &cr_fn_sin, x))));
    cr_var c = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_hypot, x, r));
    return cr_add(t, cr_add(t, a, b), c);
}

static void test_broadcast_rows(void **state)
{
    fixture *f = *state;
    prob p = {.f = rows_p, .ns = 0, .na = 2, .ndim = {2, 1}, .shape = {{2, 3}, {3}}};
    double z[9] = {0.4, -1.2, 0.8, 1.5, -0.3, 0.6, 1.3, 0.7, 2.0};
    check_hvp(f->ctx, &p, z, 1e-6);
}

/* ---- More of the class table: linear and multilinear functions ------------------------------ */

/* s scalar, M 3 x 3, u of 3:
 *   dot(u, M, cross(u, M * u)) + tr(R * R) with R = s M' + s I
 *   + sum(sin.(kron(u, cumsum(u)))) + mean(exp.(vcat(u, fill(s, 2)))) + reshape(M, 9)[4]^2 */
static cr_var table_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ M = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]);
    cr_avar c = call_a(t, &cr_fn_cross, u, cr_targ_arr(cr_av_matmul(t, X[0], X[1])), 2);
    cr_targ d3[3] = {u, M, cr_targ_arr(c)};
    cr_var y1 = cr_tape_acall_s(t, &cr_fn_dot, d3, 3);
    cr_avar T = call_a(t, &cr_fn_transpose, M, M, 1);
    cr_avar R =
        call_a(t, &cr_fn_add_uniform,
               cr_targ_arr(call_a(t, &cr_fn_mul_uniform, cr_targ_var(s[0]), cr_targ_arr(T), 2)),
               cr_targ_var(s[0]), 2);
    cr_targ RR = cr_targ_arr(cr_av_matmul(t, R, R));
    cr_var y2 = cr_tape_acall_s(t, &cr_fn_tr, &RR, 1);
    cr_avar K = call_a(t, &cr_fn_kron, u, cr_targ_arr(call_a(t, &cr_fn_cumsum, u, u, 1)), 2);
    cr_var y3 = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(K)));
    cr_avar F = call_a(t, &cr_fn_fill, cr_targ_var(s[0]), cr_targ_value(cr_value_i64(2)), 2);
    cr_targ E = cr_targ_arr(
        cr_av_broadcast1(t, &cr_fn_exp, cr_targ_arr(call_a(t, &cr_fn_vcat, u, cr_targ_arr(F), 2))));
    cr_var y4 = cr_tape_acall_s(t, &cr_fn_mean, &E, 1);
    cr_avar V = call_a(t, &cr_fn_reshape, M, cr_targ_value(cr_value_i64(9)), 2);
    cr_targ gi[2] = {cr_targ_arr(V), cr_targ_value(cr_value_i64(4))};
    cr_var y5 = cr_tape_acall_s(t, &cr_fn_getindex, gi, 2);
    return cr_add(t, cr_add(t, cr_add(t, y1, y2), cr_add(t, y3, y4)), cr_mul(t, y5, y5));
}

static void test_class_table(void **state)
{
    fixture *f = *state;
    prob p = {.f = table_p, .ns = 1, .na = 2, .ndim = {2, 1}, .shape = {{3, 3}, {3}}};
    double z[13];
    for (size_t i = 0; i < 13; i++)
        z[i] = 0.6 * cos(1.7 * (double)i + 0.4);
    check_hvp(f->ctx, &p, z, 1e-6);
}

/* ---- cr_tape_hessian on an array program with scalar inputs (several chunks) ------------ */

static const double k_c[4] = {0.3, -0.8, 1.1, 0.5};

/* Σ_i sum(sin.(s_i .* c)) * s_{i+1 mod 10} */
static cr_var ring_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    const cr_array *c = env;
    cr_var acc = cr_const(0.0);
    for (size_t i = 0; i < 10; i++) {
        cr_avar sc =
            cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[i]), cr_targ_arr(cr_av_const(c)));
        cr_var u = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(sc)));
        acc = cr_add(t, acc, cr_mul(t, u, s[(i + 1) % 10]));
    }
    return acc;
}

static void test_hessian_scalar_inputs(void **state)
{
    fixture *f = *state;
    enum { N = 10 };
    cr_array c = cr_array_vector((double *)(uintptr_t)k_c, 4);
    prob p = {.f = ring_p, .env = &c, .ns = N, .na = 0};
    double z[N];
    for (size_t i = 0; i < N; i++)
        z[i] = 0.9 * cos(0.7 * (double)i);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_array a[1];
    cr_var s[N];
    cr_avar X[1];
    cr_var y = record(t, &p, z, a, s, X);
    double H[N * N];
    assert_ok(t, cr_tape_hessian(t, y, s, N, H)); /* two sweeps: 8 directions, then 2 */
    for (size_t j = 0; j < N; j++) {
        double e[N] = {0}, want[N];
        e[j] = 1.0;
        fd_hvp(f->ctx, &p, z, e, want);
        for (size_t i = 0; i < N; i++)
            ASSERT_CLOSE(H[i * N + j], want[i], 1e-6);
    }
    /* cr_tape_hvp on the same recording agrees with the Hessian's product. */
    double v[N], hv[N], grad[N], g1[N];
    direction(N, 1, v);
    assert_ok(t, cr_tape_hvp(t, y, s, N, v, hv, grad));
    for (size_t i = 0; i < N; i++) {
        double want = 0;
        for (size_t j = 0; j < N; j++)
            want += H[i * N + j] * v[j];
        ASSERT_CLOSE(hv[i], want, 1e-12);
    }
    grad_at(f->ctx, &p, z, g1);
    for (size_t i = 0; i < N; i++)
        ASSERT_CLOSE(grad[i], g1[i], 1e-13);
    cr_tape_free(t);
}

/* ---- Forward sweeps ------------------------------------------------------------------------ */

static const double k_M[12] = {0.5, -0.2, 0.1, 0.9, -0.7, 0.3, 0.8, -0.4, 0.2, 0.6, -0.1, 0.4};

/* W = M * tanh.(s .* X) (M 3 x 4), y = sum(W .* W) + s * sum(X): plain C. */
static void fwd_c(const double *z, double *W, double *y)
{
    double s = z[0], sx = 0;
    const double *x = z + 1;
    for (size_t j = 0; j < 4; j++)
        sx += x[j];
    *y = s * sx;
    for (size_t i = 0; i < 3; i++) {
        W[i] = 0;
        for (size_t j = 0; j < 4; j++)
            W[i] += k_M[i * 4 + j] * tanh(s * x[j]);
        *y += W[i] * W[i];
    }
}

static void test_forward(void **state)
{
    fixture *f = *state;
    double z[5] = {0.8, 0.5, -1.2, 0.3, 2.0}, zd[5] = {0.3, -0.7, 0.2, 1.1, -0.4};
    cr_array Ma = cr_array_matrix((double *)(uintptr_t)k_M, 3, 4);
    for (int flags = CR_TAPE_FORWARD; flags <= CR_TAPE_SECOND_ORDER; flags++) {
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp, .flags = (uint32_t)flags};
        assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
        cr_array xa = cr_array_vector(z + 1, 4);
        cr_var s = cr_tape_input(t, z[0]);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_avar Wv = cr_av_matmul(
            t, cr_av_const(&Ma),
            cr_av_broadcast1(
                t, &cr_fn_tanh,
                cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(X)))));
        cr_var y = cr_add(
            t, cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(Wv), cr_targ_arr(Wv))),
            cr_mul(t, s, cr_av_sum(t, X)));
        assert_ok(t, cr_tape_status(t));

        /* Central differences of the plain-C function along zd. */
        double zp[5], zm[5], Wp[3], Wm[3], yp, ym, h = 1e-6;
        for (size_t i = 0; i < 5; i++) {
            zp[i] = z[i] + h * zd[i];
            zm[i] = z[i] - h * zd[i];
        }
        fwd_c(zp, Wp, &yp);
        fwd_c(zm, Wm, &ym);

        /* Array tangents in, scalar and array tangents out. W's record comes before y's
         * records; the sweep of an array output goes over every record. */
        double wd[3], yd;
        cr_array xda = cr_array_vector(zd + 1, 4), wda = cr_array_vector(wd, 3);
        const cr_array *xdp = &xda;
        cr_array *wdp = &wda;
        assert_ok(t, cr_tape_ajvp(t, &s, &zd[0], 1, &X, &xdp, 1, &y, 1, &yd, &Wv, 1, &wdp));
        ASSERT_CLOSE(yd, (yp - ym) / (2 * h), 1e-7);
        for (size_t i = 0; i < 3; i++)
            ASSERT_CLOSE(wd[i], (Wp[i] - Wm[i]) / (2 * h), 1e-7);

        /* cr_tape_jvp: scalar inputs only (X held still). */
        double one = 1.0, ys;
        assert_ok(t, cr_tape_jvp(t, &s, &one, 1, &y, 1, &ys));
        double zs[5], Wt[3], y1, y2;
        memcpy(zs, z, sizeof zs);
        zs[0] = z[0] + h;
        fwd_c(zs, Wt, &y1);
        zs[0] = z[0] - h;
        fwd_c(zs, Wt, &y2);
        ASSERT_CLOSE(ys, (y1 - y2) / (2 * h), 1e-7);

        /* The gradient still agrees with the directional derivative: <grad, zd> = yd. */
        double gs, gx[4];
        cr_array gxa = cr_array_vector(gx, 4), *gxp = &gxa;
        assert_ok(t, cr_tape_gradient_arrays(t, y, &s, 1, &gs, &X, 1, &gxp));
        double dot = gs * zd[0];
        for (size_t j = 0; j < 4; j++)
            dot += gx[j] * zd[j + 1];
        ASSERT_CLOSE(dot, yd, 1e-12);
        cr_tape_free(t);
    }
}

/* ---- Refusals and bad arguments ---------------------------------------------------------- */

/* sumsq(A) = Σ a², a user function with an rrule and no frule. */
static cr_status sumsq_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *y)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    const cr_array *a = args[0].u.arr;
    double s = 0;
    for (size_t i = 0; i < cr_array_numel(a); i++)
        s += creal(cr_array_get_linear(a, i)) * creal(cr_array_get_linear(a, i));
    *y = cr_value_f64(s);
    return CR_OK;
}

static const cr_function sumsq_fn = {.name = "sumsq", .arity = 1, .primal = sumsq_primal};

static cr_status sumsq_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    const cr_array *a = env;
    cr_array *g;
    size_t n = cr_array_numel(a);
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, &n, &g);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        ((double *)g->data)[i] = 2 * creal(cr_array_get_linear(a, i)) * dy->u.f64;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_array(g);
    return CR_OK;
}

static cr_status sumsq_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)udata;
    sumsq_primal(arena, fv, args, nargs, y);
    *pb = (cr_pullback){sumsq_pullback, (void *)(uintptr_t)args[0].u.arr, "sumsq_pullback", 2};
    return CR_OK;
}

static const cr_argspec k_af64[1] = {{CR_M_A_F64, NULL}};

static void test_refusals(void **state)
{
    fixture *f = *state;
    double x[3] = {0.5, -1.0, 2.0}, d[3] = {1, 1, 1}, o[3];
    cr_array xa = cr_array_vector(x, 3), da = cr_array_vector(d, 3), oa = cr_array_vector(o, 3);
    cr_tape *t;
    cr_engine *neng = noform_engine(f->ctx); /* halve: a user rule (test_noform.h) */
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER, .engine = neng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);

    /* No second-order form: refused when recording, naming the function (sticky). */
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_targ xarg = cr_targ_arr(X);
    cr_value halve = cr_value_function(&halve_fn, NULL);
    cr_avar yp = cr_tape_acall_a(t, &halve, &xarg, 1);
    assert_true(yp.idx == CR_VAR_CONST && yp.a == NULL);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "halve: no second-order form");
    assert_int_equal(cr_av_sum(t, X).idx, CR_VAR_CONST);

    /* mean(f, A) is not linear (and has no rule): refused. */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_targ sf[2] = {cr_targ_value(cr_fn_sin), cr_targ_arr(X)};
    cr_tape_acall_s(t, &cr_fn_mean, sf, 2);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "mean: no second-order form");

    /* A complex array. */
    cr_tape_reset(t);
    cr_complex zc[2] = {CMPLX(1, 2), CMPLX(-0.5, 0.25)};
    cr_array za;
    size_t two = 2;
    assert_int_equal(cr_array_view_init(&za, zc, CR_DT_C128, 1, &two, NULL), CR_OK);
    cr_avar Z = cr_tape_array_input(t, &za);
    cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(Z));
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "complex");

    /* Bad directions and results: reported on the context, the tape stays usable. */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_var y = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(X)));
    const cr_array *dp = &da;
    cr_array *op = &oa;
    double two_d[2] = {1, 1};
    cr_array short_a = cr_array_vector(two_d, 2);
    const cr_array *sp = &short_a;
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &sp, &op), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_ahvp: direction array 0 is (2)");
    d[1] = NAN;
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &dp, &op), CR_EDOMAIN);
    d[1] = 1;
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, NULL, &op), CR_EINVAL);
    cr_avar old = X;
    old.tape = 0;
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &old, 1, &dp, &op), CR_ETAPE);
    cr_array *short_o = &short_a;
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &dp, &short_o), CR_ESHAPE);
    assert_int_equal(cr_tape_status(t), CR_OK);
    /* H v of sum(sin.(x)) is -sin.(x) .* v */
    assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &dp, &op));
    for (size_t i = 0; i < 3; i++) {
        double h = 1e-5, fd = (cos(x[i] + h) - cos(x[i] - h)) / (2 * h);
        ASSERT_CLOSE(o[i], fd, 1e-8);
    }
    cr_tape_free(t);
    cr_engine_free(neng);

    /* A first-order tape: no H v, no forward sweep. */
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    X = cr_tape_array_input(t, &xa);
    y = cr_av_sum(t, X);
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &dp, &op), CR_EMISUSE);
    double yd;
    assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, &dp, 1, &y, 1, &yd, NULL, 0, NULL),
                     CR_EMISUSE);
    cr_tape_free(t);

    /* A function with an rrule and no frule: recorded on a forward tape, refused by the
     * forward sweep, naming it; refused when recording on a second-order tape. */
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &sumsq_fn,
                       .nargs = 1,
                       .args = k_af64,
                       .rrule = sumsq_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_value sumsq = cr_value_function(&sumsq_fn, NULL);
    for (int flags = CR_TAPE_FORWARD; flags <= CR_TAPE_SECOND_ORDER; flags++) {
        cr_tape_params ep = {.struct_size = sizeof ep, .flags = (uint32_t)flags, .engine = eng};
        assert_int_equal(cr_tape_new(f->ctx, &ep, &t), CR_OK);
        X = cr_tape_array_input(t, &xa);
        xarg = cr_targ_arr(X);
        y = cr_tape_acall_s(t, &sumsq, &xarg, 1);
        if (flags == CR_TAPE_SECOND_ORDER) {
            assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
            assert_contains(cr_tape_errmsg(t), "sumsq: no second-order form");
        } else {
            assert_close(y.v, 5.25, 1e-15);
            double g[3];
            cr_array ga = cr_array_vector(g, 3), *gp = &ga;
            assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
            assert_close(g[2], 4.0, 1e-15);
            assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, &dp, 1, &y, 1, &yd, NULL, 0, NULL),
                             CR_EUNIMPL);
            assert_contains(cr_tape_errmsg(t), "sumsq has no frule");
        }
        cr_tape_free(t);
    }
    cr_engine_free(eng);
}

/* ---- Memory: recording and H v again after a reset allocate nothing new ----------------- */

static void test_reuse(void **state)
{
    fixture *f = *state;
    enum { N = 200 };
    double x[N], v[N], hv[N];
    for (size_t i = 0; i < N; i++) {
        x[i] = cos((double)i);
        v[i] = sin(0.3 * (double)i);
    }
    cr_array xa = cr_array_vector(x, N), va = cr_array_vector(v, N), ha = cr_array_vector(hv, N);
    const cr_array *vp = &va;
    cr_array *hp = &ha;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    size_t bytes = 0;
    double first = 0;
    for (int rep = 0; rep < 4; rep++) {
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_var y = rosen_p(t, NULL, &X, NULL);
        assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp));
        assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp));
        double ajd;
        assert_ok(t, cr_tape_ajvp(t, NULL, NULL, 0, &X, &vp, 1, &y, 1, &ajd, NULL, 0, NULL));
        if (rep == 0)
            first = hv[7];
        assert_true(hv[7] == first);
        cr_tape_stats st;
        assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
        if (rep > 0)
            assert_true(st.arena_bytes == bytes);
        bytes = st.arena_bytes;
    }
    cr_tape_free(t);
}

/* A caller buffer of every size from too small to enough: each failing allocation of the
 * recording, the forward sweep or the second-order sweep gives CR_EARENA (sticky, with a
 * message) and nothing else; the first size that suffices gives the right H v. */
static void test_buffer_full(void **state)
{
    fixture *f = *state;
    enum { N = 6 };
    static unsigned char buf[1 << 17];
    double x[N] = {-1.2, 1.0, 0.3, -0.7, 2.1, 0.05}, v[N] = {1, -1, 0.5, 2, -0.25, 0.75};
    double hv[N], want[N];
    prob p = {.f = rosen_p, .ns = 0, .na = 1, .ndim = {1}, .shape = {{N}}};
    fd_hvp(f->ctx, &p, x, v, want);
    cr_array xa = cr_array_vector(x, N), va = cr_array_vector(v, N), ha = cr_array_vector(hv, N);
    const cr_array *vp = &va;
    cr_array *hp = &ha;
    size_t failures = 0, sweep_failures = 0;
    bool done = false;
    for (size_t size = 1024; size <= sizeof buf && !done; size += 256) {
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp,
                             .flags = CR_TAPE_SECOND_ORDER,
                             .buffer = buf,
                             .buffer_size = size};
        if (cr_tape_new(f->ctx, &tp, &t) != CR_OK)
            continue;
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_var y = rosen_p(t, NULL, &X, NULL);
        cr_status st = cr_tape_status(t);
        if (st == CR_OK) {
            st = cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp);
            sweep_failures += st != CR_OK;
        }
        if (st == CR_OK) {
            for (size_t i = 0; i < N; i++)
                ASSERT_CLOSE(hv[i], want[i], 1e-6);
            done = true;
        } else {
            assert_int_equal(st, CR_EARENA);
            assert_int_equal(cr_tape_status(t), CR_EARENA);
            assert_true(cr_tape_errmsg(t)[0] != '\0');
            failures++;
        }
        cr_tape_free(t);
    }
    assert_true(done);
    assert_true(failures > 10);
    assert_true(sweep_failures > 3); /* recorded, then out of room in the sweeps */
}

/* ---- f32 arrays ------------------------------------------------------------------------------ */

static void test_f32(void **state)
{
    fixture *f = *state;
    enum { N = 5 };
    float x[N] = {-1.2f, 1.0f, 0.3f, -0.7f, 0.9f}, v[N] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f};
    float hv[N], jd[N - 1];
    size_t shape[1] = {N};
    cr_array xa, va, ha;
    assert_int_equal(cr_array_view_init(&xa, x, CR_DT_F32, 1, shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&va, v, CR_DT_F32, 1, shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&ha, hv, CR_DT_F32, 1, shape, NULL), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = rosen_p(t, NULL, &X, NULL);
    assert_ok(t, cr_tape_status(t));
    const cr_array *vp = &va;
    cr_array *hp = &ha;
    assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp));
    /* The same in f64, by central differences of the f64 gradient. */
    prob p = {.f = rosen_p, .ns = 0, .na = 1, .ndim = {1}, .shape = {{N}}};
    double z[N], vd[N], want[N];
    for (size_t i = 0; i < N; i++) {
        z[i] = (double)x[i];
        vd[i] = (double)v[i];
    }
    fd_hvp(f->ctx, &p, z, vd, want);
    for (size_t i = 0; i < N; i++)
        ASSERT_CLOSE((double)hv[i], want[i], 1e-4);

    /* A forward sweep writes an f32 array output: the tangent of x[1:] - x[:-1].^2 */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_avar lo = cr_av_slice(t, X, 0, N - 1), hi = cr_av_slice(t, X, 1, N);
    cr_avar a = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_arr(hi),
                                 cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(lo))));
    size_t m = N - 1;
    cr_array ja;
    assert_int_equal(cr_array_view_init(&ja, jd, CR_DT_F32, 1, &m, NULL), CR_OK);
    cr_array *jp = &ja;
    assert_ok(t, cr_tape_ajvp(t, NULL, NULL, 0, &X, &vp, 1, NULL, 0, NULL, &a, 1, &jp));
    for (size_t i = 0; i < N - 1; i++) {
        double h = 1e-3, xp = (double)x[i] + h * vd[i], xm = (double)x[i] - h * vd[i];
        double fd = ((double)x[i + 1] + h * vd[i + 1] - xp * xp -
                     ((double)x[i + 1] - h * vd[i + 1] - xm * xm)) /
                    (2 * h);
        ASSERT_CLOSE((double)jd[i], fd, 1e-5);
    }
    cr_tape_free(t);
}

static int run_array_jvp_hvp(void)
{
    const struct CMUnitTest array_jvp_hvp[] = {
        cmocka_unit_test_setup_teardown(test_rosen_hvp_and_hessian, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_least_squares, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scalar_times_array, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_rows, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_class_table, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_scalar_inputs, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_forward, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reuse, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_buffer_full, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_f32, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(array_jvp_hvp, NULL, NULL);
}

/*
 * Paths of the second-order and forward sweeps over array records (src/ad/tape_array2.c)
 * that the other tests do not reach: broadcasts of a scalar row whose arguments include
 * scalars (variables and constants) or only scalars (a scalar result), cotangents with zero
 * elements, a tuple record none of whose elements is used, and the argument checks of
 * cr_tape_ajvp and cr_tape_ahvp (NULL tape, sticky status, NULL arrays, variables of another
 * tape, bad directions, a constant array among the inputs). Each H v is checked against
 * central differences of a first-order tape's gradient (test_prob.h); each error for its
 * status and a message naming the function, and the tape is used again afterwards.
 */

static double k_w5[5] = {0.0, 1.3, 0.0, -0.8, 2.1}; /* zeros: ȳ of those elements is 0 */

/* s0, s1, X (5 values): Σ w ⊙ hypot.(X, s0) ⊙ pow.(s1, X) + Σ hypot.(X, 0.7)²
 *   + hypot(s0, s1) · s1 (a broadcast over scalars only: a scalar result) */
static cr_var row_scalars_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    static cr_array w;
    w = cr_array_vector(k_w5, 5);
    cr_avar h = cr_av_broadcast2(t, &cr_fn_hypot, cr_targ_arr(X[0]), cr_targ_var(s[0]));
    cr_avar p = cr_av_broadcast2(t, &cr_fn_pow, cr_targ_var(s[1]), cr_targ_arr(X[0]));
    cr_avar hp = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(h), cr_targ_arr(p));
    cr_avar whp = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(hp), cr_targ_arr(cr_av_const(&w)));
    cr_avar hc = cr_av_broadcast2(t, &cr_fn_hypot, cr_targ_arr(X[0]), f64(0.7));
    cr_targ sargs[3] = {cr_targ_value(cr_fn_hypot), cr_targ_var(s[0]), cr_targ_var(s[1])};
    cr_var hs = cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_broadcast, sargs, 3));
    return cr_add(t, cr_add(t, cr_av_sum(t, whp), sum_sq(t, hc)), cr_mul(t, hs, s[1]));
}

/* second_row with scalar arguments (variable and constant), zeros in ȳ, and a broadcast
 * over scalars only: H v against central differences at several points and directions. */
static void test_row_scalar_args(void **state)
{
    fixture *f = *state;
    prob p = {.f = row_scalars_p, .ns = 2, .na = 1, .ndim = {1}, .shape = {{5}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[7];
        point(7, seed, 1.0, z);
        z[1] = 1.3 + 0.2 * seed; /* pow's base positive */
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* s0, s1, s2: h = hypot.(s0, s1) (a broadcast over scalars: a 0-dimensional array), summed;
 * h sin(s2) + pow.(s2, 3) h */
static cr_var row_only_scalars_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    cr_targ a[3] = {cr_targ_value(cr_fn_hypot), cr_targ_var(s[0]), cr_targ_var(s[1])};
    cr_var h = cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_broadcast, a, 3));
    cr_targ b[3] = {cr_targ_value(cr_fn_pow), cr_targ_var(s[2]), f64(3.0)};
    cr_var q = cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_broadcast, b, 3));
    return cr_add(t, cr_mul(t, h, cr_sin(t, s[2])), cr_mul(t, q, h));
}

/* The full Hessian (several directions per sweep) of a function of scalars through
 * broadcasts over scalars only. */
static void test_row_only_scalars_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = row_only_scalars_p, .ns = 3};
    double z[3] = {0.8, -1.1, 0.6};
    check_hessian(f->ctx, &p, z, 1e-6);
}

/* X 3 x 3: eigen(Symmetric(X)) recorded but not used (its tuple's cotangent is zero),
 * then Σ sin(X) + (Σ X²)² */
static cr_var unused_tuple_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar S = call_a(t, &cr_fn_symmetric, cr_targ_arr(X[0]), i64(0), 1);
    cr_targ a[1] = {cr_targ_arr(S)};
    cr_targ out[2];
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_eigen, a, 1, out, 2), CR_OK);
    cr_var q = sum_sq(t, X[0]);
    return cr_add(t, sum_sin(t, X[0]), cr_mul(t, q, q));
}

static void test_unused_tuple(void **state)
{
    fixture *f = *state;
    prob p = {.f = unused_tuple_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    double z[9];
    point(9, 1, 1.0, z);
    check_hvp_dirs(f->ctx, &p, z, 1e-6, 2);
}

/* A broadcast whose first argument is not a function, and a form's function whose first
 * argument is not an array, are refused on a second-order tape (CR_EUNIMPL, naming the
 * function); the tape records again after a reset. */
static void test_refused_records(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double a[3] = {0.5, -1.0, 2.0};
    cr_array A = cr_array_vector(a, 3);
    for (int round = 0; round < 2; round++) {
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &A);
        cr_targ b[2] = {cr_targ_arr(X), cr_targ_arr(X)};
        cr_targ out;
        assert_int_equal(cr_tape_acall(t, &cr_fn_broadcast, b, 2, &out), CR_EUNIMPL);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t), "broadcast: no second-order form on the tape");
        cr_tape_reset(t);
        cr_var s = cr_tape_input(t, 1.5);
        cr_targ c[1] = {cr_targ_var(s)};
        (void)cr_tape_acall_s(t, &cr_fn_prod, c, 1);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t),
                        "prod: no second-order form on the tape: the first argument is not an "
                        "array");
        /* usable again: the same tape records and sweeps a valid program */
        cr_tape_reset(t);
        X = cr_tape_array_input(t, &A);
        cr_var y = sum_sq(t, X);
        double d[3] = {1.0, 2.0, 3.0}, hv[3];
        cr_array D = cr_array_vector(d, 3), H = cr_array_vector(hv, 3);
        const cr_array *dp[1] = {&D};
        cr_array *hp[1] = {&H};
        assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, dp, hp));
        for (int e = 0; e < 3; e++)
            ASSERT_CLOSE(hv[e], 2.0 * d[e], 1e-12);
    }
    cr_tape_free(t);
}

/* ---- Argument checks of cr_tape_ajvp and cr_tape_ahvp -------------------------------------- */

typedef struct small {
    cr_tape *t;
    double a[3], d[3], out[3];
    cr_array A, D, O;
    cr_var s, y;
    cr_avar X;
} small;

/* On t: s (2.0) and X (3 values), y = s Σ X² (an array record and scalar records). */
static void small_record(small *q, cr_tape *t)
{
    q->t = t;
    double a[3] = {0.5, -1.0, 2.0}, d[3] = {1.0, 0.5, -2.0};
    memcpy(q->a, a, sizeof a);
    memcpy(q->d, d, sizeof d);
    q->A = cr_array_vector(q->a, 3);
    q->D = cr_array_vector(q->d, 3);
    q->O = cr_array_vector(q->out, 3);
    cr_tape_reset(t);
    q->s = cr_tape_input(t, 2.0);
    q->X = cr_tape_array_input(t, &q->A);
    q->y = cr_mul(t, q->s, sum_sq(t, q->X));
    assert_ok(t, cr_tape_status(t));
}

/* The forward sweep's ẏ along (ṡ, Ẋ) = (0.5, D): ṡ Σ X² + 2 s ⟨X, D⟩ (a valid call). */
static void small_jvp_ok(small *q)
{
    const cr_array *dp[1] = {&q->D};
    double sd = 0.5, yd = NAN;
    assert_ok(q->t, cr_tape_ajvp(q->t, &q->s, &sd, 1, &q->X, dp, 1, &q->y, 1, &yd, NULL, 0, NULL));
    double want = 0.5 * (0.25 + 1.0 + 4.0) + 2 * 2.0 * (0.5 - 0.5 - 4.0);
    ASSERT_CLOSE(yd, want, 1e-12);
}

static void test_ajvp_checks(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, &tp, &u), CR_OK);
    small q, r;
    small_record(&q, t);
    small_record(&r, u);
    const cr_array *dp[1] = {&q.D};
    double sd = 0.5, yd;
    /* NULL tape */
    assert_int_equal(cr_tape_ajvp(NULL, &q.s, &sd, 1, NULL, NULL, 0, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EINVAL);
    /* NULL arrays with nonzero counts */
    assert_int_equal(cr_tape_ajvp(t, &q.s, NULL, 1, NULL, NULL, 0, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: xdot is NULL");
    small_jvp_ok(&q);
    /* an output of another tape */
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, dp, 1, &r.y, 1, &yd, NULL, 0, NULL),
                     CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_tape_ajvp: output 0 (variable 2) belongs to another tape");
    small_jvp_ok(&q);
    /* an array input of another tape */
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &r.X, dp, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: array input 0 belongs to another tape");
    small_jvp_ok(&q);
    /* an array output of another tape */
    cr_array *op[1] = {&q.O};
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, dp, 1, &q.y, 1, &yd, &r.X, 1, op),
                     CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: array output 0 belongs to another tape");
    small_jvp_ok(&q);
    /* a tangent that is not finite */
    double bad = NAN;
    assert_int_equal(cr_tape_ajvp(t, &q.s, &bad, 1, &q.X, dp, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp");
    small_jvp_ok(&q);
    /* a tangent array that is not a float array */
    int64_t iv[3] = {1, 2, 3};
    cr_array Ia = cr_array_vector(q.d, 3);
    Ia.dtype = CR_DT_I64;
    Ia.data = iv;
    const cr_array *ip[1] = {&Ia};
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, ip, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx),
                        "cr_tape_ajvp: tangent array 0 is NULL or not a float array");
    const cr_array *np[1] = {NULL};
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, np, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EINVAL);
    small_jvp_ok(&q);
    /* a sticky error: returned as it is until the tape is reset */
    (void)cr_tape_array_input(t, NULL);
    cr_status sticky = cr_tape_status(t);
    assert_int_not_equal(sticky, CR_OK);
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, dp, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     sticky);
    small_record(&q, t);
    small_jvp_ok(&q);
    cr_tape_free(u);
    cr_tape_free(t);
}

/* H v of s Σ X² along (0.5, D), X's part: 2 s D + 2 ṡ X. */
static void small_hvp_ok(small *q)
{
    const cr_array *dp[1] = {&q->D};
    cr_array *op[1] = {&q->O};
    double sd = 0.5, hs = NAN;
    assert_ok(q->t, cr_tape_ahvp(q->t, q->y, &q->s, 1, &sd, &hs, &q->X, 1, dp, op));
    ASSERT_CLOSE(hs, 2 * (0.5 * 1.0 - 1.0 * 0.5 - 2.0 * 2.0), 1e-12);
    for (int e = 0; e < 3; e++)
        ASSERT_CLOSE(q->out[e], 2 * 2.0 * q->d[e] + 2 * 0.5 * q->a[e], 1e-12);
}

static void test_ahvp_checks(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, &tp, &u), CR_OK);
    small q, r;
    small_record(&q, t);
    small_record(&r, u);
    const cr_array *dp[1] = {&q.D};
    cr_array *op[1] = {&q.O};
    double sd = 0.5, hs;
    assert_int_equal(cr_tape_ahvp(NULL, q.y, &q.s, 1, &sd, &hs, &q.X, 1, dp, op), CR_EINVAL);
    /* an array input of another tape */
    assert_int_equal(cr_tape_ahvp(t, q.y, &q.s, 1, &sd, &hs, &r.X, 1, dp, op), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_ahvp: array input 0 belongs to another tape");
    small_hvp_ok(&q);
    /* a direction array that is NULL */
    const cr_array *np[1] = {NULL};
    assert_int_equal(cr_tape_ahvp(t, q.y, &q.s, 1, &sd, &hs, &q.X, 1, np, op), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_tape_ahvp: direction array 0 is NULL or not a float array");
    small_hvp_ok(&q);
    /* a constant array among the inputs: no direction seeded, its result 0 */
    double ca[3] = {1.0, 1.0, 1.0}, co[3] = {9.0, 9.0, 9.0};
    cr_array C = cr_array_vector(ca, 3), CO = cr_array_vector(co, 3);
    cr_avar X2[2] = {cr_av_const(&C), q.X};
    const cr_array *dp2[2] = {&q.D, &q.D};
    cr_array *op2[2] = {&CO, &q.O};
    assert_ok(t, cr_tape_ahvp(t, q.y, &q.s, 1, &sd, &hs, X2, 2, dp2, op2));
    for (int e = 0; e < 3; e++) {
        assert_true(co[e] == 0.0);
        ASSERT_CLOSE(q.out[e], 2 * 2.0 * q.d[e] + 2 * 0.5 * q.a[e], 1e-12);
    }
    /* a sticky error */
    (void)cr_tape_array_input(t, NULL);
    cr_status sticky = cr_tape_status(t);
    assert_int_not_equal(sticky, CR_OK);
    assert_int_equal(cr_tape_ahvp(t, q.y, &q.s, 1, &sd, &hs, &q.X, 1, dp, op), sticky);
    small_record(&q, t);
    small_hvp_ok(&q);
    cr_tape_free(u);
    cr_tape_free(t);
}

static int run_array_sweep_edges(void)
{
    const struct CMUnitTest array_sweep_edges[] = {
        cmocka_unit_test_setup_teardown(test_row_scalar_args, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_row_only_scalars_hessian, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_unused_tuple, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refused_records, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_ajvp_checks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_ahvp_checks, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(array_sweep_edges, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_array_jvp_hvp();
    failed += run_array_sweep_edges();
    return failed;
}
