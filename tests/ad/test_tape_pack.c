/*
 * Tests of scalar and array code mixed on the tape (cr_av_pack, cr_av_getindex, cr_av_unpack,
 * cr_av_cat, cr_targ_ints, cr_av_reshape, cr_av_sum_dims): objectives that build arrays from
 * scalar loops, call array rules (logsumexp, broadcasts, sums over dims) and go on with
 * scalar arithmetic, checked against central finite differences of the same objectives in
 * plain C and against the same objectives written with scalar operations only; forward
 * sweeps, second-order tapes and prepared gradients over the same operations; and the
 * errors.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

#include "test_fault_hook.h"

enum { MAXN = 80 };

/* Central differences of a plain-C function, step scaled to each x. */
typedef double (*plain_fn)(const double *x, size_t n);

static void fd_grad(plain_fn f, double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], h = 1e-6 * fmax(1.0, fabs(xi));
        x[i] = xi + h;
        double fp = f(x, n);
        x[i] = xi - h;
        double fm = f(x, n);
        x[i] = xi;
        g[i] = (fp - fm) / (2 * h);
    }
}

static void fill_x(double *x, size_t n, double s)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.4 * sin(1.3 * (double)i + s) + 0.05 * (double)(i % 3);
}

/* ---- A scalar loop builds a vector, logsumexp of it, scalar arithmetic on the result ---- */

/* v_i = sin(x_i) * x_{i+1 mod n} + 0.1 i; L = logsumexp(v); y = L^2 + v_2 * x_0 / L. */
static double mix_c(const double *x, size_t n)
{
    double v[MAXN], m = -INFINITY, s = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = sin(x[i]) * x[(i + 1) % n] + 0.1 * (double)i;
        m = fmax(m, v[i]);
    }
    for (size_t i = 0; i < n; i++)
        s += exp(v[i] - m);
    double L = m + log(s);
    return L * L + v[2] * x[0] / L;
}

/* The objective on the tape, the vector packed from the scalar loop's variables and
 * logsumexp taken through its array rule. */
static cr_status mix_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var v[MAXN];
    for (size_t i = 0; i < n; i++)
        v[i] = cr_add(t, cr_mul(t, cr_sin(t, x[i]), x[(i + 1) % n]), cr_const(0.1 * (double)i));
    cr_avar V = cr_av_pack(t, v, n, NULL, 0);
    cr_targ a = cr_targ_arr(V);
    cr_var L = cr_tape_acall_s(t, &cr_fn_logsumexp, &a, 1);
    cr_var v2 = cr_av_getindex(t, V, 2); /* read back from the array */
    y[0] = cr_add(t, cr_mul(t, L, L), cr_div(t, cr_mul(t, v2, x[0]), L));
    return cr_tape_status(t);
}

/* The same objective with scalar operations only (logsumexp written out, shifted by the
 * maximum found by comparing values: a constant of the recording, as in the rule). */
static cr_status mix_s(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var v[MAXN];
    size_t im = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = cr_add(t, cr_mul(t, cr_sin(t, x[i]), x[(i + 1) % n]), cr_const(0.1 * (double)i));
        if (v[i].v > v[im].v)
            im = i;
    }
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i < n; i++)
        s = cr_add(t, s, cr_exp(t, cr_sub(t, v[i], cr_const(v[im].v))));
    cr_var L = cr_add(t, cr_const(v[im].v), cr_log(t, s));
    y[0] = cr_add(t, cr_mul(t, L, L), cr_div(t, cr_mul(t, v[2], x[0]), L));
    return cr_tape_status(t);
}

static void test_pack_logsumexp(void **state)
{
    fixture *f = *state;
    /* 3 (one cat), 8 (the rule's limit), 9 and 70 (trees of two and three levels). */
    const size_t ns[] = {3, 8, 9, 70};
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        size_t n = ns[c];
        double x[MAXN], g[MAXN], gs[MAXN], want[MAXN], y, ys;
        fill_x(x, n, (double)c);
        assert_ok(t, cr_tape_value_and_gradient(t, mix_t, NULL, x, n, &y, g));
        assert_ok(u, cr_tape_value_and_gradient(u, mix_s, NULL, x, n, &ys, gs));
        assert_close(y, mix_c(x, n), 1e-13);
        assert_close(y, ys, 1e-13);
        fd_grad(mix_c, x, n, want);
        for (size_t i = 0; i < n; i++) {
            assert_close(g[i], want[i], 1e-6);
            assert_close(g[i], gs[i], 1e-12);
        }
    }
    cr_tape_free(u);
    cr_tape_free(t);
}

/* Forward sweeps (J v) and H v of the packed objective: against central differences of
 * the value along v and of the gradient along v. */
static void test_pack_forward_second_order(void **state)
{
    fixture *f = *state;
    enum { N = 11 };
    double x[N], v[N], xp[N], xm[N];
    fill_x(x, N, 0.7);
    for (size_t i = 0; i < N; i++)
        v[i] = cos(0.9 * (double)i) + 0.2;
    cr_tape_params pf = {.flags = CR_TAPE_FORWARD}, p2 = {.flags = CR_TAPE_SECOND_ORDER};
    cr_tape *t, *s, *u;
    assert_int_equal(cr_tape_new(f->ctx, &pf, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, &p2, &s), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);

    cr_var xs[N], y;
    assert_ok(t, cr_tape_inputs(t, x, N, xs));
    assert_ok(t, mix_t(t, xs, N, &y, 1, NULL));
    double yd, h = 1e-6;
    assert_ok(t, cr_tape_jvp(t, xs, v, N, &y, 1, &yd));
    for (size_t i = 0; i < N; i++) {
        xp[i] = x[i] + h * v[i];
        xm[i] = x[i] - h * v[i];
    }
    assert_close(yd, (mix_c(xp, N) - mix_c(xm, N)) / (2 * h), 1e-6);

    double hv[N];
    assert_ok(s, cr_tape_inputs(s, x, N, xs));
    assert_ok(s, mix_t(s, xs, N, &y, 1, NULL));
    assert_ok(s, cr_tape_hvp(s, y, xs, N, v, hv, NULL));
    assert_hvp_by_gradients(u, mix_t, x, v, N, hv); /* N at most 16 */
    cr_tape_free(u);
    cr_tape_free(s);
    cr_tape_free(t);
}

/* A prepared gradient of the packed objective, replayed at new points. */
static void test_pack_prepared(void **state)
{
    fixture *f = *state;
    enum { N = 13 };
    double x[N], g[N], want[N], y;
    fill_x(x, N, 0.1);
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, mix_t, NULL, x, N, &p), CR_OK);
    for (int round = 0; round < 3; round++) {
        fill_x(x, N, 1.0 + round);
        assert_int_equal(cr_prepared_value_and_gradient(p, x, N, &y, g), CR_OK);
        assert_close(y, mix_c(x, N), 1e-13);
        fd_grad(mix_c, x, N, want);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], want[i], 1e-6);
    }
    cr_prepared_free(p);
}

/* ---- An array input read element by element in a scalar loop, packed again as a matrix -- */

enum { R = 3, C = 4 };

/* z_i = x_i^2 - x_{i+1}; Z = reshape(z, 3, 4); y = sum(exp(sum(Z, dims = 1))) + z_5 * x_0. */
static double unpack_c(const double *x, size_t n)
{
    (void)n;
    double z[R * C], y = 0;
    for (size_t i = 0; i < R * C; i++)
        z[i] = x[i] * x[i] - x[(i + 1) % (R * C)];
    for (size_t r = 0; r < R; r++) {
        double s = 0;
        for (size_t c = 0; c < C; c++)
            s += z[r * C + c];
        y += exp(s);
    }
    return y + z[5] * x[0];
}

static cr_var unpack_t(cr_tape *t, cr_avar X)
{
    cr_var x[R * C], z[R * C];
    if (cr_av_unpack(t, X, x, R * C) != CR_OK)
        return cr_const(NAN); /* the tape holds the failure */
    for (size_t i = 0; i < R * C; i++)
        z[i] = cr_sub(t, cr_mul(t, x[i], x[i]), x[(i + 1) % (R * C)]);
    int64_t shape[2] = {R, C}, dims[1] = {1};
    cr_avar Z = cr_av_pack(t, z, R * C, shape, 2);
    shape[0] = shape[1] = -1; /* the shape was copied */
    cr_avar S = cr_av_sum_dims(t, Z, dims, 1);
    dims[0] = 99; /* so were the dims */
    cr_var y = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_exp, cr_targ_arr(S)));
    return cr_add(t, y, cr_mul(t, cr_av_getindex(t, Z, 5), x[0]));
}

static cr_status unpack_arr(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    *y = unpack_t(t, xs[0]);
    return cr_tape_status(t);
}

static void test_unpack_reshape_sum_dims(void **state)
{
    fixture *f = *state;
    double x[R * C], g[R * C], want[R * C];
    fill_x(x, R * C, 0.3);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_vector(x, R * C), ga = cr_array_vector(g, R * C);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = unpack_t(t, X);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_close(y.v, unpack_c(x, R * C), 1e-13);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(unpack_c, x, R * C, want);
    for (size_t i = 0; i < R * C; i++)
        assert_close(g[i], want[i], 1e-6);

    /* The same through a prepared gradient of arrays, at new points. */
    cr_prepared *p;
    const cr_array *xs[1] = {&xa};
    cr_array *gs[1] = {&ga};
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, unpack_arr, NULL, xs, 1, &p), CR_OK);
    for (int round = 0; round < 2; round++) {
        fill_x(x, R * C, 2.0 + round);
        double yv;
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &yv, gs), CR_OK);
        assert_close(yv, unpack_c(x, R * C), 1e-13);
        fd_grad(unpack_c, x, R * C, want);
        for (size_t i = 0; i < R * C; i++)
            assert_close(g[i], want[i], 1e-6);
    }
    cr_prepared_free(p);
    cr_tape_free(t);
}

/* ---- cat of more arrays than the rule takes --------------------------------------------- */

enum { NSEG = 20, SEGLEN = 3 };

/* Twenty vectors x[3k .. 3k+3) scaled by k + 1, concatenated (vcat), then
 * y = sum(sin.(V) .* w) with w_i = 1 + i / 10; and twenty 3 x 1 columns hcat into a
 * 3 x 20 matrix M, y += sum(M .^ 2 along dims 0)[7]. */
static double cat_c(const double *x, size_t n)
{
    (void)n;
    double y = 0;
    for (size_t i = 0; i < NSEG * SEGLEN; i++)
        y += sin(x[i] * (double)(i / SEGLEN + 1)) * (1 + 0.1 * (double)i);
    double col7 = 0;
    for (size_t r = 0; r < SEGLEN; r++)
        col7 += x[7 * SEGLEN + r] * x[7 * SEGLEN + r];
    return y + col7;
}

static cr_var cat_t(cr_tape *t, cr_avar X, const cr_array *wa)
{
    cr_avar seg[NSEG], col[NSEG];
    int64_t cshape[2] = {SEGLEN, 1};
    for (int64_t k = 0; k < NSEG; k++) {
        cr_avar s = cr_av_slice(t, X, k * SEGLEN, (k + 1) * SEGLEN);
        seg[k] =
            cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(cr_const((double)(k + 1))), cr_targ_arr(s));
        col[k] = cr_av_reshape(t, s, cshape, 2);
    }
    cr_avar V = cr_av_cat(t, 0, seg, NSEG);
    cr_var y = cr_av_dot(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(V)), cr_av_const(wa));
    cr_avar M = cr_av_cat(t, 1, col, NSEG); /* 3 x 20 */
    int64_t d0 = 0;
    cr_avar S = cr_av_sum_dims(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(M)), &d0, 1);
    return cr_add(t, y, cr_av_getindex(t, S, 7));
}

static cr_status cat_arr(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    *y = cat_t(t, xs[0], env);
    return cr_tape_status(t);
}

static void test_cat_many(void **state)
{
    fixture *f = *state;
    enum { N = NSEG * SEGLEN };
    double x[N], g[N], want[N], w[N];
    fill_x(x, N, 0.9);
    for (size_t i = 0; i < N; i++)
        w[i] = 1 + 0.1 * (double)i;
    cr_array wa = cr_array_vector(w, N);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = cat_t(t, X, &wa);
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, cat_c(x, N), 1e-13);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(cat_c, x, N, want);
    for (size_t i = 0; i < N; i++)
        assert_close(g[i], want[i], 1e-6);

    /* H v on a second-order tape against central differences of the gradient. */
    cr_tape_params p2 = {.flags = CR_TAPE_SECOND_ORDER};
    cr_tape *s;
    assert_int_equal(cr_tape_new(f->ctx, &p2, &s), CR_OK);
    X = cr_tape_array_input(s, &xa);
    y = cat_t(s, X, &wa);
    double v[N], hv[N], xp[N], xm[N], gpl[N], gmi[N], hh = 1e-5;
    for (size_t i = 0; i < N; i++)
        v[i] = sin(0.37 * (double)i + 0.2);
    cr_array va = cr_array_vector(v, N), hva = cr_array_vector(hv, N);
    const cr_array *vp = &va;
    cr_array *hvp = &hva;
    assert_ok(s, cr_tape_ahvp(s, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hvp));
    for (size_t i = 0; i < N; i++) {
        xp[i] = x[i] + hh * v[i];
        xm[i] = x[i] - hh * v[i];
    }
    double *pts[2] = {xp, xm}, *grads[2] = {gpl, gmi};
    for (int k = 0; k < 2; k++) {
        cr_tape_reset(t);
        cr_array pa = cr_array_vector(pts[k], N), gka = cr_array_vector(grads[k], N);
        cr_avar P = cr_tape_array_input(t, &pa);
        cr_var yk = cat_t(t, P, &wa);
        cr_array *gkp = &gka;
        assert_ok(t, cr_tape_gradient_arrays(t, yk, NULL, 0, NULL, &P, 1, &gkp));
    }
    for (size_t i = 0; i < N; i++)
        assert_close(hv[i], (gpl[i] - gmi[i]) / (2 * hh), 1e-5);

    /* J v on a forward tape (the rules' frules) against central differences of the value. */
    cr_tape_params pf = {.flags = CR_TAPE_FORWARD};
    cr_tape *fw;
    assert_int_equal(cr_tape_new(f->ctx, &pf, &fw), CR_OK);
    X = cr_tape_array_input(fw, &xa);
    y = cat_t(fw, X, &wa);
    double yd, hf = 1e-6;
    assert_ok(fw, cr_tape_ajvp(fw, NULL, NULL, 0, &X, &vp, 1, &y, 1, &yd, NULL, 0, NULL));
    for (size_t i = 0; i < N; i++) {
        xp[i] = x[i] + hf * v[i];
        xm[i] = x[i] - hf * v[i];
    }
    assert_close(yd, (cat_c(xp, N) - cat_c(xm, N)) / (2 * hf), 1e-6);
    cr_tape_free(fw);

    /* A prepared gradient replays the tree of cats at new points. */
    cr_prepared *p;
    const cr_array *xs[1] = {&xa};
    cr_array *gs[1] = {&ga};
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, cat_arr, &wa, xs, 1, &p), CR_OK);
    for (int round = 0; round < 2; round++) {
        fill_x(x, N, 3.0 + round);
        double yv;
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &yv, gs), CR_OK);
        assert_close(yv, cat_c(x, N), 1e-13);
        fd_grad(cat_c, x, N, want);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], want[i], 1e-6);
    }
    cr_prepared_free(p);
    cr_tape_free(s);
    cr_tape_free(t);
}

/* cr_targ_ints as any dims argument: permutedims of a 2 x 3 matrix with a permutation given
 * as C integers, gradient of a weighted sum against finite differences. */
static double perm_c(const double *x, size_t n)
{
    (void)n;
    double y = 0; /* P = x', 3 x 2; y = sum_k P[k] (k + 1)^2 in row-major order */
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++) {
            double k = (double)(i * 2 + j + 1);
            y += x[j * 3 + i] * x[j * 3 + i] * k;
        }
    return y;
}

static void test_targ_ints(void **state)
{
    fixture *f = *state;
    double x[6], g[6], want[6];
    fill_x(x, 6, 0.5);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_matrix(x, 2, 3), ga = cr_array_matrix(g, 2, 3);
    cr_avar X = cr_tape_array_input(t, &xa);
    int64_t perm[2] = {1, 0};
    cr_targ a[2] = {cr_targ_arr(X), cr_targ_ints(t, perm, 2)};
    perm[0] = perm[1] = 7; /* copied */
    cr_avar P = cr_tape_acall_a(t, &cr_fn_permutedims, a, 2);
    cr_var pv[6];
    assert_ok(t, cr_av_unpack(t, P, pv, 6));
    cr_var y = cr_const(0.0);
    for (size_t k = 0; k < 6; k++)
        y = cr_add(t, y, cr_mul(t, cr_mul(t, pv[k], pv[k]), cr_const((double)(k + 1))));
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, perm_c(x, 6), 1e-14);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(perm_c, x, 6, want);
    for (size_t i = 0; i < 6; i++)
        assert_close(g[i], want[i], 1e-6);
    cr_tape_free(t);
}

/* ---- Errors: each fails the tape with a status and a message naming the call ----------- */

static void expect_fail(fixture *f, cr_tape *t, cr_status st, const char *msg)
{
    assert_int_equal(cr_tape_status(t), st);
    assert_contains(cr_tape_errmsg(t), msg);
    assert_contains(cr_ctx_errmsg(f->ctx), msg);
    cr_tape_reset(t);
}

/* ---- Every allocation failure: a clean status, no leak ------------------------------------ */

/* One recording of the packed objective and, on a second-order tape, H v (the rule-based
 * form of the pack); the same with the array calls of unpack_t. */
static cr_status fault_run(cr_ctx *ctx, uint32_t flags)
{
    enum { N = 12 };
    double x[N], v[N], hv[N], g[N];
    fill_x(x, N, 0.2);
    for (size_t i = 0; i < N; i++)
        v[i] = 1.0;
    cr_tape_params tp = {.flags = flags, .block_size = 1024};
    cr_tape *t;
    cr_status st = cr_tape_new(ctx, &tp, &t);
    if (st != CR_OK)
        return st;
    cr_var xs[N], y;
    if ((st = cr_tape_inputs(t, x, N, xs)) == CR_OK && (st = mix_t(t, xs, N, &y, 1, NULL)) == CR_OK)
        st = (flags & CR_TAPE_SECOND_ORDER) ? cr_tape_hvp(t, y, xs, N, v, hv, NULL)
                                            : cr_tape_gradient(t, y, xs, N, g);
    if (st == CR_OK) {
        cr_tape_reset(t);
        cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_var z = unpack_t(t, X);
        cr_array *gp = &ga;
        st = cr_tape_status(t);
        if (st == CR_OK && !(flags & CR_TAPE_SECOND_ORDER))
            st = cr_tape_gradient_arrays(t, z, NULL, 0, NULL, &X, 1, &gp);
    }
    cr_tape_free(t);
    return st;
}

static void test_each_failure(void **state)
{
    (void)state;
    fault *fl = new_tracker();
    const uint32_t flags[2] = {0, CR_TAPE_SECOND_ORDER};
    for (int k = 0; k < 2; k++) {
        size_t n, failed = 0;
        for (n = 1; n < 2000; n++) {
            arm(fl, n);
            cr_ctx_params p = {
                .struct_size = sizeof p, .realloc_fn = fault_realloc, .alloc_env = fl};
            cr_ctx *ctx;
            if (cr_ctx_new(&p, &ctx) != CR_OK)
                continue;
            cr_status st = fault_run(ctx, flags[k]);
            cr_ctx_free(ctx);
            if (fl->live_blocks != 0 || fl->bad_frees != 0) {
                print_error("allocation %zu failing: %zu blocks live, %zu bad frees\n", n,
                            fl->live_blocks, fl->bad_frees);
                fail();
            }
            if (st == CR_OK && fl->failures == 0)
                break;
            assert_int_equal(st, CR_ENOMEM);
            failed++;
        }
        assert_true(n < 2000);
        assert_true(failed >= 3);
    }
}

static void test_errors(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double x[4] = {1, 2, 3, 4};
    cr_var xs[4];

    assert_ok(t, cr_tape_inputs(t, x, 4, xs));
    int64_t bad[2] = {3, 2};
    cr_avar V = cr_av_pack(t, xs, 4, bad, 2);
    assert_null(V.a);
    expect_fail(f, t, CR_ESHAPE, "cr_av_pack: a shape of 6 elements for 4 variables");

    assert_ok(t, cr_tape_inputs(t, x, 4, xs));
    int64_t neg[2] = {-2, -2};
    assert_null(cr_av_pack(t, xs, 4, neg, 2).a);
    expect_fail(f, t, CR_EINVAL, "cr_av_pack: extent 0 is negative (-2)");

    assert_null(cr_av_pack(t, NULL, 4, NULL, 0).a);
    expect_fail(f, t, CR_EINVAL, "cr_av_pack: xs is NULL with 4 variables");

    assert_ok(t, cr_tape_inputs(t, x, 4, xs));
    assert_null(cr_av_pack(t, xs, 4, NULL, 2).a);
    expect_fail(f, t, CR_EINVAL, "cr_av_pack: shape is NULL with 2 dimensions");

    assert_ok(t, cr_tape_inputs(t, x, 4, xs));
    int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 1};
    assert_null(cr_av_pack(t, xs, 4, huge, 3).a);
    expect_fail(f, t, CR_EOVERFLOW, "cr_av_pack: the shape's element count overflows");

    assert_null(cr_av_cat(t, 0, NULL, 0).a);
    expect_fail(f, t, CR_EINVAL, "cr_av_cat: no arrays");

    /* dim out of range and shapes that differ come from the rule, named once. */
    cr_array xa = cr_array_vector(x, 4), ya = cr_array_vector(x, 3);
    cr_avar A[10];
    for (size_t k = 0; k < 10; k++)
        A[k] = cr_tape_array_input(t, k == 9 ? &ya : &xa);
    assert_null(cr_av_cat(t, 1, A, 10).a);
    expect_fail(f, t, CR_EINVAL, "cat: dimension 1 out of range");

    cr_array m1, m2;
    size_t s1[2] = {2, 2}, s2[2] = {1, 3};
    assert_int_equal(cr_array_view_init(&m1, x, CR_DT_F64, 2, s1, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&m2, x, CR_DT_F64, 2, s2, NULL), CR_OK);
    for (size_t k = 0; k < 10; k++)
        A[k] = cr_tape_array_input(t, k == 9 ? &m2 : &m1);
    assert_null(cr_av_cat(t, 0, A, 10).a);
    expect_fail(f, t, CR_ESHAPE, "cat: argument 3 differs in extent along dimension 1");

    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var out[5];
    assert_int_equal(cr_av_unpack(t, X, out, 5), CR_ESHAPE);
    assert_true(isnan(out[0].v));
    expect_fail(f, t, CR_ESHAPE, "cr_av_unpack: 5 variables for an array of 4 elements");

    X = cr_tape_array_input(t, &xa);
    cr_var e = cr_av_getindex(t, X, 4);
    assert_true(isnan(e.v));
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    cr_tape_reset(t);

    X = cr_tape_array_input(t, &xa);
    assert_null(cr_av_reshape(t, X, NULL, 2).a);
    expect_fail(f, t, CR_EINVAL, "cr_av_reshape: 2 integers given by a NULL pointer");

    X = cr_tape_array_input(t, &xa);
    int64_t sh[2] = {3, 3};
    assert_null(cr_av_reshape(t, X, sh, 2).a);
    assert_int_equal(cr_tape_status(t), CR_ESHAPE);
    cr_tape_reset(t);

    cr_targ ti = cr_targ_ints(t, NULL, 3);
    assert_int_equal(ti.kind, CR_TARG_VALUE);
    expect_fail(f, t, CR_EINVAL, "cr_targ_ints: 3 integers given by a NULL pointer");

    /* n = 0: an empty constant of the shape, no failure. */
    int64_t z[2] = {0, 5};
    cr_avar E = cr_av_pack(t, NULL, 0, z, 2);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_non_null(E.a);
    assert_int_equal(E.idx, CR_VAR_CONST);
    assert_int_equal(E.a->ndim, 2);
    assert_int_equal(E.a->shape[1], 5);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pack_logsumexp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_pack_forward_second_order, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_pack_prepared, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_unpack_reshape_sum_dims, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cat_many, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_targ_ints, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_each_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
