/*
 * Tests of array variables on the reverse tape: gradients through array functions (their
 * rrules and pullbacks) checked against central finite differences of the same functions
 * written in plain C; scalar and array variables mixed on one tape; an array used several
 * times (accumulation in place must not corrupt another cotangent); f32 inputs; pullbacks of
 * array outputs; the errors (another tape's array, no rule, shapes, a function without a
 * second-order form, sticky failures); and reuse of the tape's memory across recordings.
 */
#include <math.h>
#include <stdio.h>

#include "test_noform.h"
#include "test_util.h"

/* Central differences of a plain-C function of n variables, step scaled to each x. */
typedef double (*plain_fn)(const double *x, size_t n, const void *env);

static void fd_grad(plain_fn f, const void *env, double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], h = 1e-6 * fmax(1.0, fabs(xi));
        x[i] = xi + h;
        double fp = f(x, n, env);
        x[i] = xi - h;
        double fm = f(x, n, env);
        x[i] = xi;
        g[i] = (fp - fm) / (2 * h);
    }
}

/* ---- Rosenbrock as array operations --------------------------------------------------- */

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

/* sum(100 .* (x[1:] .- x[:-1].^2).^2 .+ (1 .- x[:-1]).^2) */
static cr_var rosen_t(cr_tape *t, cr_avar X, size_t n)
{
    cr_avar lo = cr_aslice(t, X, 0, (int64_t)n - 1), hi = cr_aslice(t, X, 1, (int64_t)n);
    cr_avar a = cr_abroadcast2(t, &cr_fn_sub, cr_targ_arr(hi),
                               cr_targ_arr(cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(lo))));
    cr_avar b = cr_abroadcast2(t, &cr_fn_sub, cr_targ_var(cr_const(1.0)), cr_targ_arr(lo));
    cr_avar s = cr_abroadcast2(
        t, &cr_fn_add,
        cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(cr_const(100.0)),
                                   cr_targ_arr(cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(a))))),
        cr_targ_arr(cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(b))));
    return cr_asum(t, s);
}

static void test_rosen_array(void **state)
{
    fixture *f = *state;
    enum { N = 7 };
    double x[N] = {-1.2, 1.0, 0.3, -0.7, 2.1, 0.05, -1.9}, g[N], want[N];
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = rosen_t(t, X, N);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_close(y.v, rosen_c(x, N, NULL), 1e-14);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(rosen_c, NULL, x, N, want);
    for (size_t i = 0; i < N; i++)
        assert_close(g[i], want[i], 1e-6);
    /* A second sweep over the same recording gives the same gradient (accumulators are
     * cleared between sweeps). */
    double g2[N];
    cr_array g2a = cr_array_vector(g2, N);
    gp = &g2a;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    for (size_t i = 0; i < N; i++)
        assert_true(g2[i] == g[i]);
    cr_tape_free(t);
}

/* ---- Scalars and arrays mixed; an array used several times ------------------------------ */

/* f(s, x) = sum(tanh.(s .* x) .* x) + s * sum(x)^2 / n, x used four times */
static double mixed_c(const double *v, size_t n, const void *env)
{
    (void)env;
    double s = v[0], sum = 0, acc = 0;
    for (size_t i = 1; i < n; i++) {
        acc += tanh(s * v[i]) * v[i];
        sum += v[i];
    }
    return acc + s * sum * sum / (double)(n - 1);
}

static void test_mixed_scalar_array(void **state)
{
    fixture *f = *state;
    enum { M = 5 };
    double v[M + 1] = {0.7, 0.3, -1.1, 2.0, 0.4, -0.25};
    double x[M], gx[M], want[M + 1], gs;
    memcpy(x, v + 1, sizeof x);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_vector(x, M), gxa = cr_array_vector(gx, M);
    cr_var s = cr_tape_input(t, v[0]);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_avar sx = cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(X));
    cr_avar th = cr_abroadcast1(t, &cr_fn_tanh, cr_targ_arr(sx));
    cr_var a = cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(th), cr_targ_arr(X)));
    cr_var sm = cr_asum(t, X);
    cr_var y = cr_add(t, a, cr_div(t, cr_mul(t, s, cr_mul(t, sm, sm)), cr_const((double)M)));
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_close(y.v, mixed_c(v, M + 1, NULL), 1e-14);
    cr_array *gp = &gxa;
    assert_ok(t, cr_tape_gradient_arrays(t, y, &s, 1, &gs, &X, 1, &gp));
    fd_grad(mixed_c, NULL, v, M + 1, want);
    assert_close(gs, want[0], 1e-6);
    for (size_t i = 0; i < M; i++)
        assert_close(gx[i], want[i + 1], 1e-6);
    /* The plain scalar gradient sees the same derivative in s. */
    double gs2;
    assert_ok(t, cr_tape_gradient(t, y, &s, 1, &gs2));
    assert_true(gs2 == gs);
    cr_tape_free(t);
}

/* x + x, x .* x: the fused pullbacks hand the same cotangent to both arguments; adding into
 * one of them in place must not change the other. */
static double twice_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (x[i] + x[i]) * (1.0 + 0.5 * (double)i) + x[i] * x[i] * x[i];
    return s;
}

static void test_same_array_twice(void **state)
{
    fixture *f = *state;
    enum { N = 4 };
    double x[N] = {0.5, -1.5, 2.0, 0.25}, w[N] = {1.0, 1.5, 2.0, 2.5}, g[N], want[N];
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_vector(x, N), wa = cr_array_vector(w, N), ga = cr_array_vector(g, N);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_avar xx = cr_abroadcast2(t, &cr_fn_add, cr_targ_arr(X), cr_targ_arr(X));
    cr_var a = cr_adot(t, xx, cr_aconst(&wa));
    cr_avar x2 = cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_arr(X));
    cr_var b = cr_adot(t, x2, X);
    cr_var y = cr_add(t, a, b);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(twice_c, NULL, x, N, want);
    for (size_t i = 0; i < N; i++)
        assert_close(g[i], want[i], 1e-6);
    cr_tape_free(t);
}

/* ---- Matrices: a small network, and the pullback of an array output ---------------------- */

typedef struct net_env {
    size_t m, n;
    const double *x;
} net_env;

/* sum(tanh.(W * x)) + logsumexp(W * x), W m x n */
static double net_c(const double *W, size_t len, const void *env)
{
    const net_env *e = env;
    (void)len;
    double z[8], mx = -INFINITY, s = 0, y = 0;
    for (size_t i = 0; i < e->m; i++) {
        z[i] = 0;
        for (size_t j = 0; j < e->n; j++)
            z[i] += W[i * e->n + j] * e->x[j];
        y += tanh(z[i]);
        mx = fmax(mx, z[i]);
    }
    for (size_t i = 0; i < e->m; i++)
        s += exp(z[i] - mx);
    return y + mx + log(s);
}

static void test_network(void **state)
{
    fixture *f = *state;
    enum { M = 3, N = 4 };
    double W[M * N], x[N] = {0.5, -0.25, 1.0, 2.0}, gW[M * N], want[M * N], gx[N];
    for (size_t i = 0; i < M * N; i++)
        W[i] = 0.3 * sin(1.0 + (double)i);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array Wa = cr_array_matrix(W, M, N), xa = cr_array_vector(x, N);
    cr_array gWa = cr_array_matrix(gW, M, N), gxa = cr_array_vector(gx, N);
    cr_avar Wv = cr_tape_array_input(t, &Wa), xv = cr_tape_array_input(t, &xa);
    cr_avar z = cr_amatmul(t, Wv, xv);
    cr_var y1 = cr_asum(t, cr_abroadcast1(t, &cr_fn_tanh, cr_targ_arr(z)));
    cr_targ zarg = cr_targ_arr(z);
    cr_var y2 = cr_tape_acall_s(t, &cr_fn_logsumexp, &zarg, 1);
    cr_var y = cr_add(t, y1, y2);
    net_env e = {M, N, x};
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_close(y.v, net_c(W, M * N, &e), 1e-14);
    cr_avar as[2] = {Wv, xv};
    cr_array *gs[2] = {&gWa, &gxa};
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, as, 2, gs));
    fd_grad(net_c, &e, W, M * N, want);
    for (size_t i = 0; i < M * N; i++)
        assert_close(gW[i], want[i], 1e-6);

    /* The pullback of z = W x seeded with zbar: xbar = W' zbar, Wbar = zbar x'. */
    double zbar[M] = {1.0, -2.0, 0.5}, xbar[N], Wbar[M * N];
    cr_array zb = cr_array_vector(zbar, M), xba = cr_array_vector(xbar, N);
    cr_array Wba = cr_array_matrix(Wbar, M, N);
    cr_array *bs[2] = {&Wba, &xba};
    assert_ok(t, cr_tape_avjp(t, z, &zb, NULL, 0, NULL, as, 2, bs));
    for (size_t j = 0; j < N; j++) {
        double s = 0;
        for (size_t i = 0; i < M; i++)
            s += W[i * N + j] * zbar[i];
        assert_close(xbar[j], s, 1e-14);
    }
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++)
            assert_close(Wbar[i * N + j], zbar[i] * x[j], 1e-14);
    cr_tape_free(t);
}

/* ---- f32 inputs and strided gradient arrays ------------------------------------------------- */

static void test_f32_and_strided(void **state)
{
    fixture *f = *state;
    float x[3] = {0.5f, -1.0f, 2.0f}, g[3];
    cr_array xa, ga;
    size_t shape[1] = {3};
    assert_int_equal(cr_array_view_init(&xa, x, CR_DT_F32, 1, shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&ga, g, CR_DT_F32, 1, shape, NULL), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = cr_asum(t, cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(X)));
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    for (size_t i = 0; i < 3; i++) {
        double h = 1e-4, xi = (double)x[i];
        double fd = (sin(xi + h) - sin(xi - h)) / (2 * h);
        assert_close((double)g[i], fd, 1e-5);
    }
    /* A gradient written into every other element of a longer buffer. */
    double buf[6] = {9, 9, 9, 9, 9, 9};
    ptrdiff_t st[1] = {2};
    cr_array sa;
    assert_int_equal(cr_array_view_init(&sa, buf, CR_DT_F64, 1, shape, st), CR_OK);
    gp = &sa;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    for (size_t i = 0; i < 3; i++) {
        assert_close(buf[2 * i], (double)g[i], 1e-6);
        assert_true(buf[2 * i + 1] == 9);
    }
    cr_tape_free(t);
}

/* ---- Errors ------------------------------------------------------------------------------- */

static void test_errors(void **state)
{
    fixture *f = *state;
    double x[3] = {1, 2, 3}, z[2] = {1, 2}, g[3];
    cr_array xa = cr_array_vector(x, 3), za = cr_array_vector(z, 2), ga = cr_array_vector(g, 3);
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);

    /* An array variable of another tape. */
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_avar Xu = cr_tape_array_input(u, &xa);
    cr_targ a = cr_targ_arr(Xu);
    cr_targ out;
    assert_int_equal(cr_tape_acall(t, &cr_fn_sum, &a, 1, &out), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "another tape");
    assert_true(out.kind == CR_TARG_VAR && isnan(out.u.s.v));
    /* Sticky: the next operation fails too, and the sweep reports the failure. */
    cr_var y = cr_asum(t, X);
    assert_true(isnan(y.v));
    double gs;
    assert_int_equal(cr_tape_gradient(t, y, NULL, 0, &gs), CR_ETAPE);

    /* Mismatched shapes: the rule's error, with its message. */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_avar bad = cr_abroadcast2(t, &cr_fn_add, cr_targ_arr(X), cr_targ_arr(cr_aconst(&za)));
    assert_null(bad.a);
    assert_int_equal(cr_tape_status(t), CR_ESHAPE);

    /* No rule for these argument kinds. */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_targ b[2] = {cr_targ_arr(X), cr_targ_arr(X)};
    assert_int_equal(cr_tape_acall(t, &cr_fn_sin, b, 2, &out), CR_ENORULE);
    assert_contains(cr_tape_errmsg(t), "sin");

    /* A gradient array of the wrong shape; a scalar result asked for as an array. */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    y = cr_asum(t, X);
    cr_array *gp = &za;
    assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp), CR_ESHAPE);
    gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    for (size_t i = 0; i < 3; i++)
        assert_true(g[i] == 1.0);
    cr_targ c = cr_targ_arr(X);
    cr_avar notarr = cr_tape_acall_a(t, &cr_fn_sum, &c, 1);
    assert_null(notarr.a);
    assert_int_equal(cr_tape_status(t), CR_EINVAL);

    /* A variable from before the reset. */
    cr_tape_reset(t);
    cr_array *gp2 = &ga;
    assert_int_equal(cr_tape_gradient_arrays(t, cr_const(0), NULL, 0, NULL, &X, 1, &gp2), CR_ETAPE);

    /* Non-finite seed. */
    X = cr_tape_array_input(t, &xa);
    cr_avar S = cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(X));
    double nanseed[3] = {0, NAN, 0};
    cr_array ns = cr_array_vector(nanseed, 3);
    gp = &ga;
    assert_int_equal(cr_tape_avjp(t, S, &ns, NULL, 0, NULL, &X, 1, &gp), CR_EDOMAIN);
    cr_tape_free(u);
    cr_tape_free(t);

    /* A second-order tape refuses an array function without a second-order form
     * (test_tape_array2.c tests the others); a forward sweep goes through the frules. */
    cr_engine *eng = noform_engine(f->ctx); /* halve: a user rule (test_noform.h) */
    cr_tape_params p = {0};
    p.flags = CR_TAPE_SECOND_ORDER;
    p.engine = eng;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    X = cr_tape_array_input(t, &xa);
    cr_targ la = cr_targ_arr(X);
    cr_value halve = cr_value_function(&halve_fn, NULL);
    cr_tape_acall_a(t, &halve, &la, 1);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "halve");
    cr_tape_free(t);
    cr_engine_free(eng);
    p.engine = NULL;
    p.flags = CR_TAPE_FORWARD;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    cr_var s = cr_tape_input(t, 2.0);
    y = cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(cr_aconst(&xa))));
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_ok(t, cr_tape_gradient(t, y, &s, 1, &gs));
    assert_true(gs == 6.0);
    double one = 1.0, yd;
    assert_ok(t, cr_tape_jvp(t, &s, &one, 1, &y, 1, &yd));
    assert_true(yd == 6.0);
    cr_tape_free(t);
}

/* ---- Memory: recording again after a reset allocates nothing new ------------------------- */

static void test_reuse(void **state)
{
    fixture *f = *state;
    enum { N = 200 };
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
        cr_var y = rosen_t(t, X, N);
        cr_array *gp = &ga;
        assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
        cr_tape_stats st;
        assert_int_equal(cr_tape_stats_get(t, &st), CR_OK);
        if (rep > 0)
            assert_true(st.arena_bytes == bytes);
        bytes = st.arena_bytes;
    }
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rosen_array, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mixed_scalar_array, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_same_array_twice, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_network, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_f32_and_strided, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reuse, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
