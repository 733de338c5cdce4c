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
#include <complex.h>

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
    cr_avar lo = cr_av_slice(t, X, 0, (int64_t)n - 1), hi = cr_av_slice(t, X, 1, (int64_t)n);
    cr_avar a = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_arr(hi),
                                 cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(lo))));
    cr_avar b = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_var(cr_const(1.0)), cr_targ_arr(lo));
    cr_avar s =
        cr_av_broadcast2(t, &cr_fn_add,
                         cr_targ_arr(cr_av_broadcast2(
                             t, &cr_fn_mul, cr_targ_var(cr_const(100.0)),
                             cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(a))))),
                         cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(b))));
    return cr_av_sum(t, s);
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
    cr_avar sx = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(X));
    cr_avar th = cr_av_broadcast1(t, &cr_fn_tanh, cr_targ_arr(sx));
    cr_var a = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(th), cr_targ_arr(X)));
    cr_var sm = cr_av_sum(t, X);
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
    cr_avar xx = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(X), cr_targ_arr(X));
    cr_var a = cr_av_dot(t, xx, cr_av_const(&wa));
    cr_avar x2 = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_arr(X));
    cr_var b = cr_av_dot(t, x2, X);
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
    cr_avar z = cr_av_matmul(t, Wv, xv);
    cr_var y1 = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_tanh, cr_targ_arr(z)));
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
    cr_var y = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(X)));
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
    cr_var y = cr_av_sum(t, X);
    assert_true(isnan(y.v));
    double gs;
    assert_int_equal(cr_tape_gradient(t, y, NULL, 0, &gs), CR_ETAPE);

    /* Mismatched shapes: the rule's error, with its message. */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_avar bad = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(X), cr_targ_arr(cr_av_const(&za)));
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
    y = cr_av_sum(t, X);
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
    cr_avar S = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(X));
    double nanseed[3] = {0, NAN, 0};
    cr_array ns = cr_array_vector(nanseed, 3);
    gp = &ga;
    assert_int_equal(cr_tape_avjp(t, S, &ns, NULL, 0, NULL, &X, 1, &gp), CR_EDOMAIN);
    cr_tape_free(u);
    cr_tape_free(t);

    /* A second-order tape refuses an array function without a second-order form
     * (test_tape_array_jvp_hvp.c tests the others); a forward sweep goes through the frules. */
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
    y = cr_av_sum(t,
                  cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(cr_av_const(&xa))));
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

static int run_tape_array(void)
{
    const struct CMUnitTest tape_array[] = {
        cmocka_unit_test_setup_teardown(test_rosen_array, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mixed_scalar_array, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_same_array_twice, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_network, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_f32_and_strided, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reuse, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tape_array, NULL, NULL);
}

/*
 * Tests of the less travelled paths of array variables on the first-order tape
 * (tape_array.c): the refusals of cr_tape_acall() and friends (an argument of another tape,
 * a NULL array, an unknown argument kind, too many arguments or results, a result the tape
 * cannot hold, no tape at all), the checks of cr_tape_gradient_arrays() and cr_tape_avjp(),
 * each followed by the same work succeeding; and gradients through the rarer sweep paths,
 * checked against central differences of the same function written in plain C: a rule
 * handing one writable buffer to two arguments, a tuple record nobody reads, caller gradient
 * arrays flagged writable, strided complex gradient arrays, a gradient array overlapping a
 * negative-stride input, constant arrays among the inputs, and more scalar variables than
 * the sweep keeps on the stack.
 */

/* Central differences of a plain-C function of n variables, step scaled to each x. */
typedef double (*plain_fn)(const double *x, size_t n, const void *env);

static cr_tape *new_tape(cr_ctx *ctx, const cr_engine *eng)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    return t;
}

/* Fail with the status and a message containing sub, then clear the error. */
static void expect_fail(cr_tape *t, cr_status got, cr_status want, const char *sub)
{
    if (got != want)
        print_error("status %s, expected %s (%s)\n", cr_status_name(got), cr_status_name(want),
                    cr_tape_errmsg(t));
    assert_int_equal(got, want);
    assert_int_equal(cr_tape_status(t), want);
    assert_contains(cr_tape_errmsg(t), sub);
    cr_tape_clear_error(t);
    assert_int_equal(cr_tape_status(t), CR_OK);
}

/* ---- Functions of constants, whose results the tape cannot hold --------------------------- */

/* nelem(A): the element count, an integer */
static cr_status nelem_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_i64((int64_t)cr_array_numel(args[0].u.arr));
    return CR_OK;
}
static const cr_function nelem_fn = {.name = "nelem", .arity = 1, .primal = nelem_primal};

/* idxs(A): [0, 1, ..., n-1], an integer array */
static cr_status idxs_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)fv;
    (void)nargs;
    size_t n = cr_array_numel(args[0].u.arr);
    cr_array *a;
    cr_status st = cr_array_new(arena, CR_DT_I64, 1, &n, &a);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        ((int64_t *)a->data)[i] = (int64_t)i;
    *out = cr_value_array(a);
    return CR_OK;
}
static const cr_function idxs_fn = {.name = "idxs", .arity = 1, .primal = idxs_primal};

/* sumz(A): the tuple (sum(A), sum(A) + 1i), whose second element is a complex scalar */
typedef struct fz {
    double s;
    cr_complex_field z;
} fz;
static const cr_field k_fz_fields[2] = {{NULL, offsetof(fz, s), CR_KIND_F64, NULL},
                                        {NULL, offsetof(fz, z), CR_KIND_C128, NULL}};
static const cr_type k_fz_type = {"tuple(f64, c128)", sizeof(fz), 2, k_fz_fields};

static cr_status sumz_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)fv;
    (void)nargs;
    fz *r = cr_arena_alloc(arena, sizeof *r, _Alignof(fz));
    if (r == NULL)
        return CR_ENOMEM;
    double s = 0;
    for (size_t i = 0; i < cr_array_numel(args[0].u.arr); i++)
        s += creal(cr_array_get_linear(args[0].u.arr, i));
    r->s = s;
    cr_complex z = CMPLX(s, 1.0);
    memcpy(&r->z, &z, sizeof z);
    *out = cr_value_struct(&k_fz_type, r);
    return CR_OK;
}
static const cr_function sumz_fn = {.name = "sumz", .arity = 1, .primal = sumz_primal};

/* The refusals of cr_tape_acall(): each fails the tape with a message naming the function or
 * the argument; after clearing the error the same tape records again. */
static void test_acall_refusals(void **state)
{
    fixture *f = *state;
    double x[3] = {0.5, -1.0, 2.0}, m[6] = {1, 2, 3, 4, 5, 6};
    cr_array xa = cr_array_vector(x, 3), ma = cr_array_matrix(m, 2, 3);
    cr_tape *t = new_tape(f->ctx, NULL), *u = new_tape(f->ctx, NULL);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var s = cr_tape_input(t, 2.0), other = cr_tape_input(u, 3.0);
    cr_targ out[2];

    /* A scalar variable of another tape. */
    cr_targ a3[3] = {cr_targ_value(cr_fn_mul), cr_targ_var(other), cr_targ_arr(X)};
    expect_fail(t, cr_tape_acall(t, &cr_fn_broadcast, a3, 3, out), CR_ETAPE,
                "broadcast: argument 1 (variable 0) belongs to another tape");
    assert_true(out[0].kind == CR_TARG_VAR && isnan(out[0].u.s.v));
    /* A NULL array. */
    a3[1] = cr_targ_arr(cr_av_const(NULL));
    expect_fail(t, cr_tape_acall(t, &cr_fn_broadcast, a3, 3, out), CR_EINVAL,
                "broadcast: argument 1 is a NULL array");
    /* An argument kind that does not exist. */
    a3[1].kind = (cr_targ_kind)7;
    expect_fail(t, cr_tape_acall(t, &cr_fn_broadcast, a3, 3, out), CR_EINVAL,
                "broadcast: argument 1 has an unknown kind 7");
    /* More than 16 arguments. */
    cr_targ many[17];
    for (size_t j = 0; j < 17; j++)
        many[j] = cr_targ_arr(X);
    expect_fail(t, cr_tape_acall(t, &cr_fn_broadcast, many, 17, out), CR_EINVAL,
                "broadcast: more than 16 arguments");
    /* More results than a tuple may have. */
    cr_targ nine[CR_TAPE_MAX_TUPLE + 1];
    a3[1] = cr_targ_var(s);
    expect_fail(t, cr_tape_acall_n(t, &cr_fn_broadcast, a3, 3, nine, CR_TAPE_MAX_TUPLE + 1),
                CR_EINVAL, "broadcast: more than 8 results");
    /* A scalar asked of a function giving an array. */
    cr_var bad = cr_tape_acall_s(t, &cr_fn_broadcast, a3, 3);
    assert_true(isnan(bad.v) && bad.idx == CR_VAR_CONST);
    expect_fail(t, cr_tape_status(t), CR_EINVAL, "broadcast gives an array, a scalar was expected");

    /* Functions of constants only: evaluated, not recorded. A failing primal fails the tape
     * with its status, naming the function. */
    cr_targ mm[2] = {cr_targ_arr(cr_av_const(&ma)), cr_targ_arr(cr_av_const(&ma))};
    expect_fail(t, cr_tape_acall(t, &cr_fn_matmul, mm, 2, out), CR_ESHAPE, "matmul");
    /* Two results asked of a function giving one. */
    cr_targ c1 = cr_targ_arr(cr_av_const(&xa));
    expect_fail(t, cr_tape_acall_n(t, &cr_fn_sum, &c1, 1, out, 2), CR_EINVAL,
                "sum returns one value, 2 results expected");
    /* Integer results, and a tuple with a complex element: the tape holds float scalars and
     * arrays (and integers only inside tuples). */
    cr_value nelem = cr_value_function(&nelem_fn, NULL), idxs = cr_value_function(&idxs_fn, NULL),
             sumz = cr_value_function(&sumz_fn, NULL);
    expect_fail(t, cr_tape_acall(t, &nelem, &c1, 1, out), CR_EUNIMPL, "nelem returns a i64");
    expect_fail(t, cr_tape_acall(t, &idxs, &c1, 1, out), CR_EUNIMPL, "idxs returns a i64");
    expect_fail(t, cr_tape_acall_n(t, &sumz, &c1, 1, out, 2), CR_EUNIMPL,
                "sumz returns a tuple whose element 1 is a c128");

    /* Still usable: the same tape records and differentiates. */
    cr_targ ok3[3] = {cr_targ_value(cr_fn_mul), cr_targ_var(s), cr_targ_arr(X)};
    assert_ok(t, cr_tape_acall(t, &cr_fn_broadcast, ok3, 3, out));
    cr_var y = cr_av_sum(t, out[0].u.a);
    assert_ok(t, cr_tape_status(t));
    double gx[3], gs;
    cr_array gxa = cr_array_vector(gx, 3);
    cr_array *gp = &gxa;
    assert_ok(t, cr_tape_gradient_arrays(t, y, &s, 1, &gs, &X, 1, &gp));
    assert_close(gs, x[0] + x[1] + x[2], 1e-15);
    for (size_t i = 0; i < 3; i++)
        assert_close(gx[i], 2.0, 1e-15);
    cr_tape_free(u);
    cr_tape_free(t);
}

/* Without a tape and without a current tape: CR_EMISUSE, constants with a NULL array. */
static void test_no_tape(void **state)
{
    (void)state;
    assert_null(cr_tape_current());
    double x[2] = {1, 2};
    cr_array xa = cr_array_vector(x, 2);
    cr_targ a = cr_targ_arr(cr_av_const(&xa)), out;
    assert_int_equal(cr_tape_acall(NULL, &cr_fn_sum, &a, 1, &out), CR_EMISUSE);
    assert_true(out.kind == CR_TARG_VAR && isnan(out.u.s.v));
    cr_avar s = cr_av_slice(NULL, cr_av_const(&xa), 0, 1);
    assert_null(s.a);
    assert_int_equal(s.idx, CR_VAR_CONST);
}

/* ---- A rule handing one writable buffer to two arguments ---------------------------------- */

/* plus(A, B) = A + B elementwise; its pullback gives both arguments the same new writable
 * buffer (a rule may: the engine must not let two shadows adopt it). */
static cr_status plus_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)fv;
    (void)nargs;
    const cr_array *a = args[0].u.arr, *b = args[1].u.arr;
    cr_array *y;
    cr_status st = cr_array_copy(arena, a, &y);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < cr_array_numel(y); i++)
        ((double *)y->data)[i] += creal(cr_array_get_linear(b, i));
    *out = cr_value_array(y);
    return CR_OK;
}
static const cr_function plus_fn = {.name = "plus", .arity = 2, .primal = plus_primal};

static cr_status plus_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    (void)env;
    cr_tangent d = *dy;
    cr_status st = cr_tangent_is_thunk(d) ? cr_tangent_unthunk(d, &d) : CR_OK;
    if (st == CR_OK && d.tag != CR_TAN_ARRAY)
        st = CR_ETANGENT;
    cr_array *g = NULL;
    if (st == CR_OK)
        st = cr_array_copy(arena, d.u.arr, &g);
    if (st != CR_OK)
        return st;
    assert_true(g->flags & CR_ARRAY_WRITABLE);
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_array(g);
    dx[2] = cr_tangent_array(g);
    return CR_OK;
}

static cr_status plus_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){plus_pullback, NULL, "plus_pullback", 3};
    return plus_primal(arena, fv, args, nargs, y);
}

static const cr_argspec k_two_arrays[2] = {{CR_M_A_F64, NULL}, {CR_M_A_F64, NULL}};

enum { NP = 4 };

/* y = sum(X .* V) + sum(plus(X, Z) .* W) + sum(Z .* Z); v = [X; Z] */
static const double k_V[NP] = {0.3, -1.2, 0.8, 2.0}, k_W[NP] = {1.5, 0.25, -0.7, 1.1};

static double shared_c(const double *v, size_t n, const void *env)
{
    (void)n;
    (void)env;
    double s = 0;
    for (size_t i = 0; i < NP; i++) {
        double x = v[i], z = v[NP + i];
        s += x * k_V[i] + (x + z) * k_W[i] + z * z;
    }
    return s;
}

static void test_shared_cotangent(void **state)
{
    fixture *f = *state;
    cr_registry *reg;
    cr_engine *eng;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &plus_fn,
                       .nargs = 2,
                       .args = k_two_arrays,
                       .rrule = plus_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    double v[2 * NP] = {0.4, -0.9, 1.3, 0.2, -0.5, 0.75, 1.8, -1.1}, x[NP], z[NP];
    double gx[2 * NP], gz[2 * NP], V[NP], W[NP];
    memcpy(x, v, sizeof x);
    memcpy(z, v + NP, sizeof z);
    memcpy(V, k_V, sizeof V);
    memcpy(W, k_W, sizeof W);
    cr_array xa = cr_array_vector(x, NP), za = cr_array_vector(z, NP), Va = cr_array_vector(V, NP),
             Wa = cr_array_vector(W, NP), gxa, gza;
    /* Strided gradient arrays, so that the shadows are the sweep's own (not the caller's
     * arrays) and take the first cotangent as it is given. */
    size_t shape[1] = {NP};
    ptrdiff_t stride[1] = {2};
    assert_int_equal(cr_array_view_init(&gxa, gx, CR_DT_F64, 1, shape, stride), CR_OK);
    assert_int_equal(cr_array_view_init(&gza, gz, CR_DT_F64, 1, shape, stride), CR_OK);
    cr_tape *t = new_tape(f->ctx, eng);
    cr_avar X = cr_tape_array_input(t, &xa), Z = cr_tape_array_input(t, &za);
    /* X . V and Z . Z are recorded first, so their pullbacks run last and add into the
     * shadows of X and Z after plus's pullback gave both their first cotangent. */
    cr_var a = cr_av_dot(t, X, cr_av_const(&Va));
    cr_var c = cr_av_dot(t, Z, Z);
    cr_value pf = cr_value_function(&plus_fn, NULL);
    cr_targ pa[2] = {cr_targ_arr(X), cr_targ_arr(Z)};
    cr_avar P = cr_tape_acall_a(t, &pf, pa, 2);
    cr_var b = cr_av_dot(t, P, cr_av_const(&Wa));
    cr_var y = cr_add(t, cr_add(t, a, b), c);
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, shared_c(v, 2 * NP, NULL), 1e-14);
    cr_avar as[2] = {X, Z};
    cr_array *gp[2] = {&gxa, &gza};
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, as, 2, gp));
    double want[2 * NP];
    fd_grad(shared_c, NULL, v, 2 * NP, want);
    for (size_t i = 0; i < NP; i++) {
        assert_close(gx[2 * i], want[i], 1e-7);
        assert_close(gz[2 * i], want[NP + i], 1e-7);
    }
    cr_tape_free(t);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/* ---- A tuple record none of whose results reaches y ----------------------------------------- */

static double sumsq_c(const double *x, size_t n, const void *env)
{
    (void)env;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i] * (1 + 0.1 * (double)i);
    return s;
}

static void test_unread_tuple(void **state)
{
    fixture *f = *state;
    enum { N = 4 };
    double a[N] = {2.0, 0.5, -0.3, 1.7}, w[N] = {1.0, 1.1, 1.2, 1.3}, g[N], want[N];
    cr_array A = cr_array_matrix(a, 2, 2), Wa = cr_array_matrix(w, 2, 2),
             G = cr_array_matrix(g, 2, 2);
    cr_tape *t = new_tape(f->ctx, NULL);
    cr_avar X = cr_tape_array_input(t, &A);
    cr_targ xa = cr_targ_arr(X), fp[2];
    assert_ok(t, cr_tape_acall_n(t, &cr_fn_getrf, &xa, 1, fp, 2)); /* (F, ipiv), never read */
    cr_var y = cr_av_dot(
        t, X, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_arr(cr_av_const(&Wa))));
    assert_ok(t, cr_tape_status(t));
    cr_array *gp = &G;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(sumsq_c, NULL, a, N, want);
    for (size_t i = 0; i < N; i++)
        assert_close(g[i], want[i], 1e-7);
    cr_tape_free(t);
}

/* ---- Gradient destinations --------------------------------------------------------------- */

/* A gradient array the caller flagged writable is the shadow itself; a constant array among
 * the inputs gets zeros. */
static void test_writable_destination(void **state)
{
    fixture *f = *state;
    enum { N = 6 };
    double x[N] = {-1.2, 1.0, 0.3, -0.7, 2.1, 0.05}, g[N], want[N], c[2] = {4, 5}, gc[2] = {7, 7};
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N), ca = cr_array_vector(c, 2),
             gca = cr_array_vector(gc, 2);
    ga.flags |= CR_ARRAY_WRITABLE;
    cr_tape *t = new_tape(f->ctx, NULL);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = cr_add(t, rosen_t(t, X, N), cr_av_sum(t, cr_av_const(&ca)));
    assert_ok(t, cr_tape_status(t));
    fd_grad(rosen_c, NULL, x, N, want);
    for (int rep = 0; rep < 2; rep++) { /* twice: the destinations are forgotten in between */
        for (size_t i = 0; i < N; i++)
            g[i] = 99.0;
        cr_avar as[2] = {X, cr_av_const(&ca)};
        cr_array *gp[2] = {&ga, &gca};
        assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, as, 2, gp));
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], want[i], 1e-6);
        assert_true(gc[0] == 0.0 && gc[1] == 0.0);
    }
    cr_tape_free(t);
}

/* y = sum(|z|^2 .* w) over complex z: the gradient (∂y/∂re + i ∂y/∂im) written into a strided
 * complex array, every other element of a buffer. */
enum { NZ = 3 };
static const double k_wz[NZ] = {1.0, 0.5, 2.0};

static double abs2_c(const double *v, size_t n, const void *env)
{
    (void)n;
    (void)env;
    double s = 0;
    for (size_t i = 0; i < NZ; i++)
        s += (v[2 * i] * v[2 * i] + v[2 * i + 1] * v[2 * i + 1]) * k_wz[i];
    return s;
}

static void test_strided_complex_gradient(void **state)
{
    fixture *f = *state;
    double v[2 * NZ] = {0.3, -1.1, 2.0, 0.4, -0.6, 0.9}, want[2 * NZ], w[NZ];
    cr_complex z[NZ], buf[2 * NZ];
    for (size_t i = 0; i < NZ; i++) {
        z[i] = CMPLX(v[2 * i], v[2 * i + 1]);
        w[i] = k_wz[i];
    }
    for (size_t i = 0; i < 2 * NZ; i++)
        buf[i] = CMPLX(-5.0, -5.0);
    size_t shape[1] = {NZ};
    ptrdiff_t stride[1] = {2};
    cr_array za, ga, wa = cr_array_vector(w, NZ);
    assert_int_equal(cr_array_view_init(&za, z, CR_DT_C128, 1, shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&ga, buf, CR_DT_C128, 1, shape, stride), CR_OK);
    cr_tape *t = new_tape(f->ctx, NULL);
    cr_avar Z = cr_tape_array_input(t, &za);
    cr_avar A = cr_av_broadcast1(t, &cr_fn_abs2, cr_targ_arr(Z));
    cr_var y = cr_av_dot(t, A, cr_av_const(&wa));
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, abs2_c(v, 2 * NZ, NULL), 1e-14);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &Z, 1, &gp));
    fd_grad(abs2_c, NULL, v, 2 * NZ, want);
    for (size_t i = 0; i < NZ; i++) {
        assert_close(creal(buf[2 * i]), want[2 * i], 1e-7);
        assert_close(cimag(buf[2 * i]), want[2 * i + 1], 1e-7);
        assert_true(creal(buf[2 * i + 1]) == -5.0 && cimag(buf[2 * i + 1]) == -5.0);
    }
    cr_tape_free(t);
}

/* y = sum(X .* R) + sum(X .* X), R a negative-stride view whose elements lie in the buffer
 * that also receives X's gradient: the gradient array must not become X's shadow (the sweep
 * would overwrite R before the pullback of X .* R reads it). */
enum { NR = 4 };

static double xr_c(const double *v, size_t n, const void *env)
{
    (void)n;
    (void)env;
    double s = 0;
    for (size_t i = 0; i < NR; i++)
        s += v[i] * v[NR + i] + v[i] * v[i];
    return s;
}

static void test_negative_stride_overlap(void **state)
{
    fixture *f = *state;
    double v[2 * NR] = {0.5, -1.5, 2.0, 0.25, 1.0, -2.0, 3.0, 0.5}, want[2 * NR];
    double x[NR], B[2 * NR];
    memcpy(x, v, sizeof x);
    /* R[i] = B[2 NR - 1 - 2 i]: B[7], B[5], B[3], B[1] */
    for (size_t i = 0; i < 2 * NR; i++)
        B[i] = 0.0;
    for (size_t i = 0; i < NR; i++)
        B[2 * NR - 1 - 2 * i] = v[NR + i];
    size_t shape[1] = {NR};
    ptrdiff_t stride[1] = {-2};
    cr_array xa = cr_array_vector(x, NR), ra, ga = cr_array_vector(B, NR); /* B[0..NR) */
    assert_int_equal(cr_array_view_init(&ra, &B[2 * NR - 1], CR_DT_F64, 1, shape, stride), CR_OK);
    cr_tape *t = new_tape(f->ctx, NULL);
    cr_avar X = cr_tape_array_input(t, &xa), R = cr_tape_array_input(t, &ra);
    cr_var a = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_arr(R)));
    cr_var b = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_arr(X)));
    cr_var y = cr_add(t, a, b);
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, xr_c(v, 2 * NR, NULL), 1e-14);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    fd_grad(xr_c, NULL, v, 2 * NR, want);
    for (size_t i = 0; i < NR; i++)
        assert_close(B[i], want[i], 1e-7);
    cr_tape_free(t);
}

/* ---- More scalar variables than the sweep keeps on the stack ------------------------------ */

enum { NS = 70, NA = 3 };

/* y = sum_i sin(s_i) * (1 + i / 10) * sum(A .* A); v = [s; A] */
static double many_c(const double *v, size_t n, const void *env)
{
    (void)n;
    (void)env;
    double a = 0, s = 0;
    for (size_t i = 0; i < NA; i++)
        a += v[NS + i] * v[NS + i];
    for (size_t i = 0; i < NS; i++)
        s += sin(v[i]) * (1 + (double)i / 10);
    return s * a;
}

static void test_many_scalars(void **state)
{
    fixture *f = *state;
    double v[NS + NA], want[NS + NA], gs[NS], ga[NA], a[NA];
    for (size_t i = 0; i < NS + NA; i++)
        v[i] = 0.1 + 0.37 * (double)((i * 7) % 11) - 1.5;
    memcpy(a, v + NS, sizeof a);
    cr_array aa = cr_array_vector(a, NA), gaa = cr_array_vector(ga, NA);
    cr_tape *t = new_tape(f->ctx, NULL);
    cr_var xs[NS];
    assert_ok(t, cr_tape_inputs(t, v, NS, xs));
    cr_avar A = cr_tape_array_input(t, &aa);
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i < NS; i++)
        s = cr_add(t, s, cr_mul(t, cr_sin(t, xs[i]), cr_const(1 + (double)i / 10)));
    cr_var y = cr_mul(t, s, cr_av_dot(t, A, A));
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, many_c(v, NS + NA, NULL), 1e-13);
    cr_array *gp = &gaa;
    assert_ok(t, cr_tape_gradient_arrays(t, y, xs, NS, gs, &A, 1, &gp));
    fd_grad(many_c, NULL, v, NS + NA, want);
    for (size_t i = 0; i < NS; i++)
        assert_close(gs[i], want[i], 1e-7);
    for (size_t i = 0; i < NA; i++)
        assert_close(ga[i], want[NS + i], 1e-7);
    cr_tape_free(t);
}

/* ---- The checks of cr_tape_gradient_arrays and cr_tape_avjp ---------------------------------- */

static void test_gradient_checks(void **state)
{
    fixture *f = *state;
    double x[3] = {0.5, -1.0, 2.0}, g[3], gs = 42, ig[3] = {0};
    cr_array xa = cr_array_vector(x, 3), ga = cr_array_vector(g, 3), iga;
    size_t shape[1] = {3};
    assert_int_equal(cr_array_view_init(&iga, ig, CR_DT_I64, 1, shape, NULL), CR_OK);
    cr_tape *t = new_tape(f->ctx, NULL), *u = new_tape(f->ctx, NULL);
    cr_var s = cr_tape_input(t, 1.5), su = cr_tape_input(u, 2.0);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = cr_mul(t, s, cr_av_dot(t, X, X));
    cr_var yu = cr_mul(u, su, su);
    assert_ok(t, cr_tape_status(t));
    cr_array *gp = &ga, *none = NULL, *igp = &iga;
    const char *who = "cr_tape_gradient_arrays";

    assert_int_equal(cr_tape_gradient_arrays(NULL, y, &s, 1, &gs, &X, 1, &gp), CR_EINVAL);
    assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 1, &gs, &X, 1, &gp), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_gradient_arrays: NULL inputs or gradients");
    assert_int_equal(cr_tape_gradient_arrays(t, y, &su, 1, &gs, &X, 1, &gp), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "input 0 (variable 0) belongs to another tape");
    assert_int_equal(cr_tape_gradient_arrays(t, yu, &s, 1, &gs, &X, 1, &gp), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_gradient_arrays: output 0 (variable");
    assert_contains(cr_ctx_errmsg(f->ctx), "belongs to another tape");
    /* Gradient arrays that cannot receive: NULL, integer. */
    assert_int_equal(cr_tape_gradient_arrays(t, y, &s, 1, &gs, &X, 1, &none), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "gradient array 0 is NULL, structured or not a float");
    assert_int_equal(cr_tape_gradient_arrays(t, y, &s, 1, &gs, &X, 1, &igp), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), who);
    /* None of these fails the tape. */
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_ok(t, cr_tape_gradient_arrays(t, y, &s, 1, &gs, &X, 1, &gp));
    assert_close(gs, x[0] * x[0] + x[1] * x[1] + x[2] * x[2], 1e-15);
    for (size_t i = 0; i < 3; i++)
        assert_close(g[i], 2 * 1.5 * x[i], 1e-15);
    /* A failed tape gives its status, sticky until cleared. */
    cr_var bad = cr_tape_input(u, 1.0);
    (void)cr_add(t, s, bad); /* a variable of another tape */
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_int_equal(cr_tape_gradient_arrays(t, y, &s, 1, &gs, &X, 1, &gp), CR_ETAPE);
    cr_tape_clear_error(t);
    assert_ok(t, cr_tape_gradient_arrays(t, y, &s, 1, &gs, &X, 1, &gp));
    assert_close(g[2], 2 * 1.5 * x[2], 1e-15);
    cr_tape_free(u);
    cr_tape_free(t);
}

/* f(s, X) = s .* tanh.(X) (array result): the checks of cr_tape_avjp, and a constant output */
static void test_avjp_checks(void **state)
{
    fixture *f = *state;
    double x[3] = {0.5, -1.0, 2.0}, w[3] = {1.0, -2.0, 0.5}, g[3], xb = 42, w2[2] = {1, 1};
    cr_array xa = cr_array_vector(x, 3), wa = cr_array_vector(w, 3), ga = cr_array_vector(g, 3),
             w2a = cr_array_vector(w2, 2);
    cr_tape *t = new_tape(f->ctx, NULL), *u = new_tape(f->ctx, NULL);
    cr_var s = cr_tape_input(t, 1.5);
    cr_avar X = cr_tape_array_input(t, &xa), Xu = cr_tape_array_input(u, &xa);
    cr_avar Y = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s),
                                 cr_targ_arr(cr_av_broadcast1(t, &cr_fn_tanh, cr_targ_arr(X))));
    assert_ok(t, cr_tape_status(t));
    cr_array *gp = &ga;

    assert_int_equal(cr_tape_avjp(NULL, Y, &wa, &s, 1, &xb, &X, 1, &gp), CR_EINVAL);
    assert_int_equal(cr_tape_avjp(t, Y, NULL, &s, 1, &xb, &X, 1, &gp), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_avjp: NULL output or seed");
    assert_int_equal(cr_tape_avjp(t, Xu, &wa, &s, 1, &xb, &X, 1, &gp), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_avjp: array output 0 belongs to another tape");
    assert_int_equal(cr_tape_avjp(t, Y, &w2a, &s, 1, &xb, &X, 1, &gp), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_avjp: the seed is");
    assert_int_equal(cr_tape_status(t), CR_OK);
    /* A constant output: nothing flows, zeros. */
    for (size_t i = 0; i < 3; i++)
        g[i] = 7.0;
    assert_ok(t, cr_tape_avjp(t, cr_av_const(&xa), &wa, &s, 1, &xb, &X, 1, &gp));
    assert_true(xb == 0.0);
    for (size_t i = 0; i < 3; i++)
        assert_true(g[i] == 0.0);
    /* Sticky failure, then cleared. */
    (void)cr_tape_array_input(t, NULL);
    assert_int_equal(cr_tape_avjp(t, Y, &wa, &s, 1, &xb, &X, 1, &gp), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "cr_tape_array_input: NULL array");
    cr_tape_clear_error(t);
    /* An array with elements but NULL data is refused before anything reads it. */
    cr_array nodata = xa;
    nodata.data = NULL;
    (void)cr_tape_array_input(t, &nodata);
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "cr_tape_array_input: NULL data with elements");
    cr_tape_clear_error(t);
    /* A gradient with respect to an array that is not an input (here the output Y, the
     * result of an operation) is refused, not given as zeros; nothing is written. */
    for (size_t i = 0; i < 3; i++)
        g[i] = 7.0;
    assert_int_equal(cr_tape_avjp(t, Y, &wa, &s, 1, &xb, &Y, 1, &gp), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_avjp: array variable 0 is not an input");
    assert_true(g[0] == 7.0 && g[1] == 7.0 && g[2] == 7.0);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_ok(t, cr_tape_avjp(t, Y, &wa, &s, 1, &xb, &X, 1, &gp));
    double sb = 0;
    for (size_t i = 0; i < 3; i++) {
        double th = tanh(x[i]);
        sb += w[i] * th;
        /* checked against central differences of s tanh(x_i) */
        double h = 1e-6, d = (1.5 * tanh(x[i] + h) - 1.5 * tanh(x[i] - h)) / (2 * h);
        assert_close(g[i], w[i] * d, 1e-8);
    }
    assert_close(xb, sb, 1e-14);
    cr_tape_free(u);
    cr_tape_free(t);
}

/* The vector-Jacobian product of the identity (y = X, an input) written into a gradient
 * array that shares the seed's memory with other strides (column-major over the row-major
 * seed): the result is the seed's values in the gradient's layout. */
static void test_seed_aliasing_gradient(void **state)
{
    fixture *f = *state;
    double x[6] = {1, 2, 3, 4, 5, 6}, s[6] = {0.5, -1.0, 2.0, 0.25, 3.0, -0.75}, s0[6];
    memcpy(s0, s, sizeof s);
    cr_array xa = cr_array_matrix(x, 2, 3), sa = cr_array_matrix(s, 2, 3), ta;
    size_t shape[2] = {2, 3};
    ptrdiff_t cm[2] = {1, 2}; /* column-major */
    assert_int_equal(cr_array_view_init(&ta, s, CR_DT_F64, 2, shape, cm), CR_OK);
    cr_tape *t = new_tape(f->ctx, NULL);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_array *tp = &ta;
    assert_ok(t, cr_tape_avjp(t, X, &sa, NULL, 0, NULL, &X, 1, &tp));
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            assert_true(s[j * 2 + i] == s0[i * 3 + j]); /* ta[i, j] == seed[i, j] */
    cr_tape_free(t);
}

static int run_array_refusals(void)
{
    const struct CMUnitTest array_refusals[] = {
        cmocka_unit_test_setup_teardown(test_acall_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_no_tape),
        cmocka_unit_test_setup_teardown(test_shared_cotangent, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_unread_tuple, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_writable_destination, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_strided_complex_gradient, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_negative_stride_overlap, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_many_scalars, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gradient_checks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_avjp_checks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_seed_aliasing_gradient, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(array_refusals, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_tape_array();
    failed += run_array_refusals();
    return failed;
}
