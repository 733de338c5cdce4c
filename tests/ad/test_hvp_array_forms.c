/*
 * Second-order forms of the nonlinear array functions (src/rulesets/array/reduce_forms.c,
 * linalg_forms.c) on second-order tapes: logsumexp, softmax, logsoftmax (with and without dims),
 * prod (with zeros), norm (p = 2, other p, Inf) and nrm2, det (also singular) and logdet, sum(f, A)
 * (with dims), map(f, A...). Each H v (cr_tape_ahvp) is checked against central differences,
 * along the direction, of the gradient the tape computes on a first-order tape, at several
 * directions, with each function composed with others so that its cotangent is not 1; full
 * Hessians (cr_tape_hessian) of small composites of scalar inputs likewise. Also the
 * refusals: functions and arguments without a form (CR_EUNIMPL when recording) and points
 * without a second derivative (CR_EDOMAIN from the sweep).
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"
#include "test_noform.h"

/* Check H v against central differences of the gradient, for four directions. */
static void check_hvp(cr_ctx *ctx, const prob *p, double *z, double tol)
{
    check_hvp_dirs(ctx, p, z, tol, 4);
}

/* ---- logsumexp ---------------------------------------------------------------------------- */

/* A 2 x 3, u of 3, s scalar:
 *   sin(s logsumexp(A)) + sum(logsumexp(A, 0) .* u) + sum(square.(logsumexp(A, 1)))
 *   + logsumexp(u .* u) */
static cr_var lse_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]);
    cr_var a = cr_sin(t, cr_mul(t, s[0], call_s(t, &cr_fn_logsumexp, A, A, 1)));
    cr_avar l0 = call_a(t, &cr_fn_logsumexp, A, i64(0), 2); /* 1 x 3 */
    cr_var b = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(l0), u));
    cr_var c = sum_sq(t, call_a(t, &cr_fn_logsumexp, A, i64(1), 2)); /* 2 x 1 */
    cr_var d =
        call_s(t, &cr_fn_logsumexp, cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, u, u)), u, 1);
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
}

static void test_logsumexp(void **state)
{
    fixture *f = *state;
    prob p = {.f = lse_p, .ns = 1, .na = 2, .ndim = {2, 1}, .shape = {{2, 3}, {3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[10];
        point(10, seed, 1.2, z);
        check_hvp(f->ctx, &p, z, 1e-6);
    }
}

/* ---- softmax, logsoftmax ------------------------------------------------------------------ */

/* A 2 x 3, u of 3:
 *   sum(sin.(softmax(A, 1))) + dot(softmax(u), u) + sum(square.(softmax(A)))
 *   + sum(sin.(logsoftmax(A, 0))) + sum(logsoftmax(u) .* u) + sum(square.(logsoftmax(A))) */
static cr_var sm_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]);
    cr_var a = sum_sin(t, call_a(t, &cr_fn_softmax, A, i64(1), 2));
    cr_var b = cr_av_dot(t, call_a(t, &cr_fn_softmax, u, u, 1), X[1]);
    cr_var c = sum_sq(t, call_a(t, &cr_fn_softmax, A, A, 1));
    cr_var d = sum_sin(t, call_a(t, &cr_fn_logsoftmax, A, i64(0), 2));
    cr_var e = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(call_a(t, &cr_fn_logsoftmax, u, u, 1)), u));
    cr_var g = sum_sq(t, call_a(t, &cr_fn_logsoftmax, A, A, 1));
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, e, g));
}

static void test_softmax(void **state)
{
    fixture *f = *state;
    prob p = {.f = sm_p, .ns = 0, .na = 2, .ndim = {2, 1}, .shape = {{2, 3}, {3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[9];
        point(9, seed, 1.5, z);
        check_hvp(f->ctx, &p, z, 1e-6);
    }
}

/* ---- prod ----------------------------------------------------------------------------------- */

/* A 3 x 3, u of 4: sin(prod(u)) + sum(square.(prod(A, 1))) + sum(prod(A, 0) .* A) */
static cr_var prod_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]);
    cr_var a = cr_sin(t, call_s(t, &cr_fn_prod, u, u, 1));
    cr_var b = sum_sq(t, call_a(t, &cr_fn_prod, A, i64(1), 2));
    cr_avar p0 = call_a(t, &cr_fn_prod, A, i64(0), 2); /* 1 x 3 */
    cr_var c2 = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(p0), A));
    return cr_add(t, cr_add(t, a, b), c2);
}

static void test_prod(void **state)
{
    fixture *f = *state;
    prob p = {.f = prod_p, .ns = 0, .na = 2, .ndim = {2, 1}, .shape = {{3, 3}, {4}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[13];
        point(13, seed, 1.1, z);
        check_hvp(f->ctx, &p, z, 1e-6);
    }
    /* Zeros: u with one zero; A's rows (prod over dim 1) with 0, 1, 2 and 3 zeros, its
     * columns (dim 0) with 1 and 2 zeros. */
    double z[13] = {0.0, 1.3,  0.0, 0.0, /* A */
                    0.7, 0.0,  0.0,      /* */
                    1.2, -0.8, 0.5,      /* */
                    0.9, 0.0,  -1.4};    /* u */
    check_hvp(f->ctx, &p, z, 1e-6);
    double z2[13] = {0.5, 1.3, -0.6, 0.0, 0.0, 2.0, 1.2, -0.8, 0.5, 0.0, 0.0, 1.1, -1.4};
    check_hvp(f->ctx, &p, z2, 1e-6);
}

/* ---- norm ------------------------------------------------------------------------------------ */

/* A 2 x 3, u of 4: sin(norm(A)) + norm(u, 3) * norm(u, 1.5) + norm(A, 4)^2 + s norm(u, Inf)
 *   + cos(nrm2(u)) + s norm(u, -1.5) + sin(norm(A, -Inf)) + s norm(u, 0) */
static cr_var norm_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]);
    cr_var a = cr_sin(t, call_s(t, &cr_fn_norm, A, A, 1));
    cr_var b = cr_mul(t, call_s(t, &cr_fn_norm, u, i64(3), 2),
                      call_s(t, &cr_fn_norm, u, cr_targ_value(cr_value_f64(1.5)), 2));
    cr_var c = call_s(t, &cr_fn_norm, A, cr_targ_value(cr_value_f64(4.0)), 2);
    cr_var d = cr_mul(t, s[0], call_s(t, &cr_fn_norm, u, cr_targ_value(cr_value_f64(INFINITY)), 2));
    cr_var e = cr_cos(t, call_s(t, &cr_fn_nrm2, u, u, 1));
    /* the exponents of Julia's norm at or below zero: -1.5, -Inf (the smallest |u|), 0 (the
     * count of nonzeros, locally constant) */
    cr_var g = cr_mul(t, s[0], call_s(t, &cr_fn_norm, u, cr_targ_value(cr_value_f64(-1.5)), 2));
    cr_var h = cr_sin(t, call_s(t, &cr_fn_norm, A, cr_targ_value(cr_value_f64(-INFINITY)), 2));
    cr_var k = cr_mul(t, s[0], call_s(t, &cr_fn_norm, u, cr_targ_value(cr_value_f64(0.0)), 2));
    return cr_add(t, cr_add(t, cr_add(t, cr_add(t, a, b), cr_mul(t, c, c)), cr_add(t, d, e)),
                  cr_add(t, cr_add(t, g, h), k));
}

static void test_norm(void **state)
{
    fixture *f = *state;
    prob p = {.f = norm_p, .ns = 1, .na = 2, .ndim = {2, 1}, .shape = {{2, 3}, {4}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[11];
        point(11, seed, 1.3, z);
        check_hvp(f->ctx, &p, z, 1e-6);
    }
}

/* ---- det, logdet ------------------------------------------------------------------------------
 */

/* M 3 x 3, s: sin(s det(M)) + logdet(M M' + I) + det(M)^2 */
static cr_var det_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ M = cr_targ_arr(X[0]);
    cr_var d = call_s(t, &cr_fn_det, M, M, 1);
    cr_avar Mt = call_a(t, &cr_fn_transpose, M, M, 1);
    cr_avar G = call_a(t, &cr_fn_add_uniform, cr_targ_arr(cr_av_matmul(t, X[0], Mt)),
                       cr_targ_value(cr_value_f64(1.0)), 2);
    cr_var l = call_s(t, &cr_fn_logdet, cr_targ_arr(G), M, 1);
    return cr_add(t, cr_add(t, cr_sin(t, cr_mul(t, s[0], d)), l), cr_mul(t, d, d));
}

static void test_det(void **state)
{
    fixture *f = *state;
    prob p = {.f = det_p, .ns = 1, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[10];
        point(10, seed, 0.7, z);
        z[1] += 1.5; /* a well-conditioned M */
        z[5] += 1.5;
        z[9] -= 1.5;
        check_hvp(f->ctx, &p, z, 1e-6);
    }
    /* A singular M (rank 2), and one of rank 1: det's rule takes the adjugate from the SVD,
     * the form calls it at matrices with one row replaced. */
    double z1[10] = {0.8, 1, 2, 3, 2, 4, 6, 0.5, -1, 2};
    check_hvp(f->ctx, &p, z1, 1e-6);
    double z2[10] = {-0.3, 1, 2, 3, 2, 4, 6, -0.5, -1, -1.5};
    check_hvp(f->ctx, &p, z2, 1e-6);
}

/* ---- sum(f, A), map(f, A...)
 * ---------------------------------------------------------- */

/* A 2 x 3, B 2 x 3, s:
 *   s sum(sin, A) + sum(square.(sum(tanh, A, 0))) + sum(exp, B) * sum(A)
 *   + sum(cos.(sum(atan, B, 1)))
 *   + sum(map(hypot, A, B)) + sum(sin.(map(exp, A))) + sum(map(*, A, B) .* B) */
static cr_var hof_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), B = cr_targ_arr(X[1]);
    cr_targ a2[2] = {cr_targ_value(cr_fn_sin), A};
    cr_var a = cr_mul(t, s[0], cr_tape_acall_s(t, &cr_fn_sum, a2, 2));
    cr_targ b3[3] = {cr_targ_value(cr_fn_tanh), A, i64(0)};
    cr_var b = sum_sq(t, cr_tape_acall_a(t, &cr_fn_sum, b3, 3));
    cr_targ c2[2] = {cr_targ_value(cr_fn_exp), B};
    cr_var c = cr_mul(t, cr_tape_acall_s(t, &cr_fn_sum, c2, 2), cr_av_sum(t, X[0]));
    cr_targ d3[3] = {cr_targ_value(cr_fn_atan), B, i64(1)};
    cr_var d = cr_av_sum(
        t, cr_av_broadcast1(t, &cr_fn_cos, cr_targ_arr(cr_tape_acall_a(t, &cr_fn_sum, d3, 3))));
    cr_targ e3[3] = {cr_targ_value(cr_fn_hypot), A, B};
    cr_var e = cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_map, e3, 3));
    cr_targ g2[2] = {cr_targ_value(cr_fn_exp), A};
    cr_var g = sum_sin(t, cr_tape_acall_a(t, &cr_fn_map, g2, 2));
    cr_targ h3[3] = {cr_targ_value(cr_fn_mul), A, B};
    cr_var h = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(cr_tape_acall_a(t, &cr_fn_map, h3, 3)), B));
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, cr_add(t, e, g), h));
}

static void test_sum_map(void **state)
{
    fixture *f = *state;
    prob p = {.f = hof_p, .ns = 1, .na = 2, .ndim = {2, 2}, .shape = {{2, 3}, {2, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[13];
        point(13, seed, 0.9, z);
        check_hvp(f->ctx, &p, z, 1e-6);
    }
}

/* ---- Full Hessians of scalar inputs ------------------------------------------------------------
 */

static const double k_W[12] = {0.5, -0.2, 0.1, 0.9, -0.7, 0.3, 0.8, -0.4, 0.2, 0.6, -0.1, 0.4};

/* The array Σ_i s_i e_i (unit vectors or matrices e_i of n elements, shape of `like`). */
static cr_avar assemble(cr_tape *t, const cr_var *s, size_t n, const cr_array *basis)
{
    cr_avar acc =
        cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[0]), cr_targ_arr(cr_av_const(&basis[0])));
    for (size_t i = 1; i < n; i++)
        acc = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(acc),
                               cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[i]),
                                                            cr_targ_arr(cr_av_const(&basis[i])))));
    return acc;
}

static double k_e3[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
static double k_e9[9][9];

/* logsumexp(W x) + norm(x)^2 + prod(x) with x = (s0, s1, s2), W 4 x 3 */
static cr_var lse_norm_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array basis[3], W;
    for (size_t i = 0; i < 3; i++)
        basis[i] = cr_array_vector(k_e3[i], 3);
    W = cr_array_matrix((double *)(uintptr_t)k_W, 4, 3);
    cr_avar x = assemble(t, s, 3, basis);
    cr_targ Wx = cr_targ_arr(cr_av_matmul(t, cr_av_const(&W), x));
    cr_var n = call_s(t, &cr_fn_norm, cr_targ_arr(x), Wx, 1);
    return cr_add(t, cr_add(t, call_s(t, &cr_fn_logsumexp, Wx, Wx, 1), cr_mul(t, n, n)),
                  call_s(t, &cr_fn_prod, cr_targ_arr(x), Wx, 1));
}

/* det(M) + logsumexp(softmax(M, 0)) of M (3 x 3) = Σ s_i E_i */
static cr_var det9_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array basis[9];
    for (size_t i = 0; i < 9; i++)
        basis[i] = cr_array_matrix(k_e9[i], 3, 3);
    cr_targ M = cr_targ_arr(assemble(t, s, 9, basis));
    cr_targ S = cr_targ_arr(call_a(t, &cr_fn_softmax, M, i64(0), 2));
    return cr_add(t, call_s(t, &cr_fn_det, M, M, 1), call_s(t, &cr_fn_logsumexp, S, S, 1));
}

static void test_hessians(void **state)
{
    fixture *f = *state;
    prob p3 = {.f = lse_norm_p, .ns = 3, .na = 0};
    double z3[3] = {0.7, -1.1, 0.4};
    check_hessian(f->ctx, &p3, z3, 1e-6);
    for (size_t i = 0; i < 9; i++)
        k_e9[i][i] = 1.0;
    prob p9 = {.f = det9_p, .ns = 9, .na = 0};
    double z9[9];
    point(9, 5, 0.7, z9);
    z9[0] += 1.5;
    z9[4] -= 1.5;
    z9[8] += 1.5;
    check_hessian(f->ctx, &p9, z9, 1e-6); /* two sweeps: 8 directions, then 1 */
}

/* ---- Refusals -------------------------------------------------------------------------------- */

/* twice(x) = 2x: a function with a primal only (not a scalar-table row). */
static cr_status twice_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *y)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *y = cr_value_f64(2.0 * args[0].u.f64);
    return CR_OK;
}

static const cr_function twice_fn = {.name = "twice", .arity = 1, .primal = twice_primal};

/* Record y = sin(f(X, arg)) on t at xa and run H v: the status of the H v. */
static cr_status hvp_of(cr_tape *t, const cr_value *f, cr_array *xa, cr_targ arg, size_t n)
{
    double d[9] = {1, -1, 0.5, 2, 0.25, -0.75, 1, 1, 1}, o[9];
    size_t m = cr_array_numel(xa);
    cr_array da, oa;
    assert_int_equal(cr_array_view_init(&da, d, CR_DT_F64, xa->ndim, xa->shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&oa, o, CR_DT_F64, xa->ndim, xa->shape, NULL), CR_OK);
    assert_true(m <= 9);
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, xa);
    cr_var y = cr_sin(t, call_s(t, f, cr_targ_arr(X), arg, n));
    assert_ok(t, cr_tape_status(t));
    const cr_array *dp = &da;
    cr_array *op = &oa;
    return cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &dp, &op);
}

static void test_refusals(void **state)
{
    fixture *f = *state;
    double x[4] = {0.5, -1.0, 2.0, 0.25};
    cr_array xa = cr_array_vector(x, 4);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);

    /* Refused when recording (CR_EUNIMPL, sticky, naming the function and the reason). */
    cr_var s = cr_tape_input(t, 3.0);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = call_s(t, &cr_fn_norm, cr_targ_arr(X), cr_targ_var(s), 2);
    assert_true(isnan(y.v));
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t),
                    "norm: no second-order form on the tape: the exponent p is a variable");

    cr_value twice = cr_value_function(&twice_fn, NULL);
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_targ sf[2] = {cr_targ_value(twice), cr_targ_arr(X)};
    cr_tape_acall_s(t, &cr_fn_sum, sf, 2);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "sum: no second-order form on the tape: the function "
                                       "summed is not a scalar-table function");

    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    sf[1] = cr_targ_arr(X);
    cr_tape_acall_a(t, &cr_fn_map, sf, 2);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "map: no second-order form on the tape");

    /* sum(f, A) of a row of two arguments */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_targ mf[2] = {cr_targ_value(cr_fn_hypot), cr_targ_arr(X)};
    cr_tape_acall_s(t, &cr_fn_sum, mf, 2);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "sum: no second-order form on the tape: the function");

    /* A tuple result without a form: a user rule kept as its pullback, halves
     * (test_noform.h; logabsdet of a structured matrix has a form: test_hvp_structured.c). */
    double m4[4] = {2, 1, 1, 3};
    cr_array ma = cr_array_matrix(m4, 2, 2);
    cr_engine *eng = noform_engine(f->ctx);
    cr_tape *u;
    cr_tape_params up = {.struct_size = sizeof up, .flags = CR_TAPE_SECOND_ORDER, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &up, &u), CR_OK);
    X = cr_tape_array_input(u, &ma);
    cr_targ margs[1] = {cr_targ_arr(X)}, outs[3];
    cr_value halves = cr_value_function(&halves_fn, NULL);
    assert_int_equal(cr_tape_acall_n(u, &halves, margs, 1, outs, 2), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(u), "halves: no second-order form on the tape");
    cr_tape_free(u);
    cr_engine_free(eng);

    /* Points without a second derivative: recorded, refused by the sweep (CR_EDOMAIN, sticky,
     * naming the function). */
    double zero[3] = {0, 0, 0};
    cr_array za = cr_array_vector(zero, 3);
    assert_int_equal(hvp_of(t, &cr_fn_norm, &za, i64(2), 1), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "norm: no second derivative at a zero array");
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    assert_int_equal(hvp_of(t, &cr_fn_nrm2, &za, i64(2), 1), CR_EDOMAIN);
    double one0[3] = {1.0, 0.0, -2.0};
    cr_array oa = cr_array_vector(one0, 3);
    assert_int_equal(hvp_of(t, &cr_fn_norm, &oa, cr_targ_value(cr_value_f64(1.5)), 2), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "norm: no second derivative at a zero element (element 1)");
    assert_int_equal(hvp_of(t, &cr_fn_norm, &oa, i64(1), 2), CR_EDOMAIN);
    /* ... but p = 3 and p = Inf are fine there */
    assert_int_equal(hvp_of(t, &cr_fn_norm, &oa, i64(3), 2), CR_OK);
    assert_int_equal(hvp_of(t, &cr_fn_norm, &oa, cr_targ_value(cr_value_f64(INFINITY)), 2), CR_OK);
    /* logdet (inverse matrix) at a matrix singular at the second order only is out of reach:
     * logdet itself refuses singular matrices when recording. */
    cr_tape_free(t);
}

static int run_forms_reductions(void)
{
    const struct CMUnitTest forms_reductions[] = {
        cmocka_unit_test_setup_teardown(test_logsumexp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_softmax, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prod, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_norm, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_det, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sum_map, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessians, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(forms_reductions, NULL, NULL);
}

/*
 * More second-order forms of nonlinear array functions (src/rulesets/array/reduce_forms.c,
 * linalg_forms.c) on second-order tapes: var and std (with and without dims), cumprod (with zeros),
 * maximum and minimum (with dims; a tie), inv (matinv), solve (vector and matrix B, either argument
 * a constant), normalize (p = 2, 3, 1.5, Inf). Each H v (cr_tape_ahvp) is checked against central
 * differences, along the direction, of the gradient the tape computes on a first-order tape, at
 * several points and directions, with each function composed with others so that its cotangent is
 * not 1; full Hessians (cr_tape_hessian) of composites of scalar inputs likewise. Also the
 * refusals: structured matrices and a variable exponent (CR_EUNIMPL when recording), zero spread
 * for std and a zero element for normalize with p < 2 (CR_EDOMAIN from the sweep), and the
 * factorizations' tuple results (CR_EUNIMPL).
 */

static cr_var sum_mul(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(b)));
}

/* ---- var, std ---------------------------------------------------------------------------------
 */

/* A 2 x 3, u of 4, s:
 *   sin(s var(u)) + sum(square.(var(A, 0))) + sum(var(A, 1) .* [1; 2]) + std(u) std(A)
 *   + sum(sin.(std(A, 1))) + sum(cos.(std(A, 0))) + var(A) */
static double k_c2[2] = {1.0, 2.0};

static cr_var var_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    static cr_array c2;
    c2 = cr_array_matrix(k_c2, 2, 1);
    cr_targ A = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]);
    cr_var a = cr_sin(t, cr_mul(t, s[0], call_s(t, &cr_fn_var, u, u, 1)));
    cr_var b = sum_sq(t, call_a(t, &cr_fn_var, A, i64(0), 2));
    cr_var c = sum_mul(t, call_a(t, &cr_fn_var, A, i64(1), 2), cr_av_const(&c2));
    cr_var d = cr_mul(t, call_s(t, &cr_fn_std, u, u, 1), call_s(t, &cr_fn_std, A, A, 1));
    cr_var e = sum_sin(t, call_a(t, &cr_fn_std, A, i64(1), 2));
    cr_var g = cr_av_sum(
        t, cr_av_broadcast1(t, &cr_fn_cos, cr_targ_arr(call_a(t, &cr_fn_std, A, i64(0), 2))));
    cr_var h = call_s(t, &cr_fn_var, A, A, 1);
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_add(t, cr_add(t, e, g), h));
}

static void test_var_std(void **state)
{
    fixture *f = *state;
    prob p = {.f = var_p, .ns = 1, .na = 2, .ndim = {2, 1}, .shape = {{2, 3}, {4}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[11];
        point(11, seed, 1.3, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
}

/* ---- cumprod ----------------------------------------------------------------------------------
 */

/* A 3 x 3, u of 5: sum(sin.(cumprod(u))) + sum(square.(cumprod(A, 0))) + sum(cumprod(A, 1) .* A)
 */
static cr_var cumprod_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]);
    cr_var a = sum_sin(t, call_a(t, &cr_fn_cumprod, u, u, 1));
    cr_var b = sum_sq(t, call_a(t, &cr_fn_cumprod, A, i64(0), 2));
    cr_var c = sum_mul(t, call_a(t, &cr_fn_cumprod, A, i64(1), 2), X[0]);
    return cr_add(t, cr_add(t, a, b), c);
}

static void test_cumprod(void **state)
{
    fixture *f = *state;
    prob p = {.f = cumprod_p, .ns = 0, .na = 2, .ndim = {2, 1}, .shape = {{3, 3}, {5}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[14];
        point(14, seed, 1.2, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
    /* Zeros: in u (one, then two), first and last of a row and of a column of A. */
    double z[14] = {0.0, 1.3,  -0.6, /* A */
                    0.7, 0.0,  0.0,  /* */
                    1.2, -0.8, 0.5,  /* */
                    0.9, 0.0,  -1.4, 0.0, 1.1};
    check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
}

/* ---- maximum, minimum -------------------------------------------------------------------------
 */

/* A 2 x 3, u of 4, s: s maximum(u)^2 + sum(square.(minimum(A, 0))) + maximum(A) minimum(u)
 *   + sum(sin.(maximum(A, 1))) */
static cr_var ext_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]);
    cr_var m = call_s(t, &cr_fn_maximum, u, u, 1);
    cr_var a = cr_mul(t, s[0], cr_mul(t, m, m));
    cr_var b = sum_sq(t, call_a(t, &cr_fn_minimum, A, i64(0), 2));
    cr_var c = cr_mul(t, call_s(t, &cr_fn_maximum, A, A, 1), call_s(t, &cr_fn_minimum, u, u, 1));
    cr_var d = sum_sin(t, call_a(t, &cr_fn_maximum, A, i64(1), 2));
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
}

static void test_extrema(void **state)
{
    fixture *f = *state;
    prob p = {.f = ext_p, .ns = 1, .na = 2, .ndim = {2, 1}, .shape = {{2, 3}, {4}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[11];
        point(11, seed, 1.4, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
    /* A tie in u (elements 1 and 3): the rule takes the first. Along a direction that keeps
     * the tie (equal components there) both sides of the difference take the same branch,
     * and the tape's H v is that branch's. */
    double z[11] = {0.8, 0.3, -1.1, 0.6, 1.5, 0.2, -0.4, -0.5, 2.0, 0.1, 2.0};
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double v[11], got[11], want[11];
    direction(11, 2, v);
    v[10] = v[8];
    tape_hvp(t, &p, z, v, got);
    fd_hvp(f->ctx, &p, z, v, want);
    for (size_t i = 0; i < 11; i++)
        ASSERT_CLOSE(got[i], want[i], 1e-6);
    cr_tape_free(t);
}

/* ---- inv, solve -------------------------------------------------------------------------------
 */

/* A 3 x 3, s: sum(sin.(inv(A))) + s sum(square.(inv(A))) + sum(inv(A) .* A') */
static cr_var inv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ A = cr_targ_arr(X[0]);
    cr_avar Y = call_a(t, &cr_fn_matinv, A, A, 1);
    cr_var a = sum_sin(t, Y);
    cr_var b = cr_mul(t, s[0], sum_sq(t, Y));
    cr_var c = sum_mul(t, Y, call_a(t, &cr_fn_transpose, A, A, 1));
    return cr_add(t, cr_add(t, a, b), c);
}

/* Make the 3 x 3 matrix at z[off..off+8] well conditioned. */
static void condition(double *z, size_t off)
{
    z[off + 0] += 1.8;
    z[off + 4] -= 1.6;
    z[off + 8] += 1.7;
}

static void test_matinv(void **state)
{
    fixture *f = *state;
    prob p = {.f = inv_p, .ns = 1, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[10];
        point(10, seed, 0.6, z);
        condition(z, 1);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
}

static double k_bc[3] = {0.4, -1.2, 0.9};
static double k_Bc[6] = {1.0, -0.3, 0.5, 0.8, -0.7, 0.2};
static double k_Ac[9] = {2.1, 0.3, -0.5, 0.2, -1.7, 0.4, 0.6, 0.1, 1.9};

/* A 3 x 3, b of 3, B 3 x 2, s:
 *   sum(sin.(A \ b)) + sum(square.(A \ B)) + s dot(A \ b, b) + sum(sin.(Ac \ B))
 *   + sum(square.(A \ bc)) + sum(sin.(A \ Bc)) */
static cr_var solve_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    static cr_array bc, Bc, Ac;
    bc = cr_array_vector(k_bc, 3);
    Bc = cr_array_matrix(k_Bc, 3, 2);
    Ac = cr_array_matrix(k_Ac, 3, 3);
    cr_targ A = cr_targ_arr(X[0]), b = cr_targ_arr(X[1]), B = cr_targ_arr(X[2]);
    cr_avar yb = call_a(t, &cr_fn_solve, A, b, 2);
    cr_var a = sum_sin(t, yb);
    cr_var c = sum_sq(t, call_a(t, &cr_fn_solve, A, B, 2));
    cr_var d = cr_mul(t, s[0], cr_av_dot(t, yb, X[1]));
    cr_var e = sum_sin(t, call_a(t, &cr_fn_solve, cr_targ_arr(cr_av_const(&Ac)), B, 2));
    cr_var g = sum_sq(t, call_a(t, &cr_fn_solve, A, cr_targ_arr(cr_av_const(&bc)), 2));
    cr_var h = sum_sin(t, call_a(t, &cr_fn_solve, A, cr_targ_arr(cr_av_const(&Bc)), 2));
    return cr_add(t, cr_add(t, cr_add(t, a, c), cr_add(t, d, e)), cr_add(t, g, h));
}

static void test_solve(void **state)
{
    fixture *f = *state;
    prob p = {.f = solve_p, .ns = 1, .na = 3, .ndim = {2, 1, 2}, .shape = {{3, 3}, {3}, {3, 2}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[19];
        point(19, seed, 0.7, z);
        condition(z, 1);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
}

/* ---- normalize --------------------------------------------------------------------------------
 */

/* A 2 x 3, u of 4, s:
 *   sum(sin.(normalize(u))) + s dot(normalize(A), A) + sum(square.(normalize(u, 3)) .* u)
 *   + sum(sin.(normalize(A, 1.5))) + sum(cos.(normalize(u, Inf))) */
static cr_var nz_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]);
    cr_var a = sum_sin(t, call_a(t, &cr_fn_normalize, u, u, 1));
    cr_var b = cr_mul(t, s[0], cr_av_dot(t, call_a(t, &cr_fn_normalize, A, A, 1), X[0]));
    cr_avar n3 = call_a(t, &cr_fn_normalize, u, i64(3), 2);
    cr_var c = sum_mul(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(n3)), X[1]);
    cr_var d = sum_sin(t, call_a(t, &cr_fn_normalize, A, f64(1.5), 2));
    cr_var e = cr_av_sum(
        t, cr_av_broadcast1(t, &cr_fn_cos,
                            cr_targ_arr(call_a(t, &cr_fn_normalize, u, f64(INFINITY), 2))));
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), e);
}

static void test_normalize(void **state)
{
    fixture *f = *state;
    prob p = {.f = nz_p, .ns = 1, .na = 2, .ndim = {2, 1}, .shape = {{2, 3}, {4}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[11];
        point(11, seed, 1.2, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
}

/* ---- Full Hessians of scalar inputs --------------------------------------------------------- */

/* M (3 x 3) = Σ s_i E_i:
 *   sum(inv(M)) + var(M) + sum(sin.(M \ bc)) + sum(cumprod(M, 1)) + std(M, 0) · (1, 2, 3)
 *   + sum(sin.(normalize(M))) + maximum(M)^2 */
static double k_w3[3] = {1.0, 2.0, 3.0};

static cr_var hess_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array basis[9], bc, w3;
    for (size_t i = 0; i < 9; i++)
        basis[i] = cr_array_matrix(k_e9[i], 3, 3);
    bc = cr_array_vector(k_bc, 3);
    w3 = cr_array_matrix(k_w3, 1, 3);
    cr_avar acc =
        cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[0]), cr_targ_arr(cr_av_const(&basis[0])));
    for (size_t i = 1; i < 9; i++)
        acc = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(acc),
                               cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[i]),
                                                            cr_targ_arr(cr_av_const(&basis[i])))));
    cr_targ M = cr_targ_arr(acc);
    cr_var a = cr_av_sum(t, call_a(t, &cr_fn_matinv, M, M, 1));
    cr_var b = call_s(t, &cr_fn_var, M, M, 1);
    cr_var c = sum_sin(t, call_a(t, &cr_fn_solve, M, cr_targ_arr(cr_av_const(&bc)), 2));
    cr_var d = cr_av_sum(t, call_a(t, &cr_fn_cumprod, M, i64(1), 2));
    cr_var e = sum_mul(t, call_a(t, &cr_fn_std, M, i64(0), 2), cr_av_const(&w3));
    cr_var g = sum_sin(t, call_a(t, &cr_fn_normalize, M, M, 1));
    cr_var m = call_s(t, &cr_fn_maximum, M, M, 1);
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)),
                  cr_add(t, cr_add(t, e, g), cr_mul(t, m, m)));
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < 9; i++)
        k_e9[i][i] = 1.0;
    prob p = {.f = hess_p, .ns = 9, .na = 0};
    for (unsigned seed = 0; seed < 2; seed++) {
        double z[9];
        point(9, seed + 3, 0.6, z);
        condition(z, 0);
        check_hessian(f->ctx, &p, z, 1e-6); /* two sweeps: 8 directions, then 1 */
    }
}

/* ---- Refusals ---------------------------------------------------------------------------------
 */

/* Record y = sin(sum(f(X, arg))) (or sin(f(X, arg)) for a scalar result) on t at xa and run
 * H v: the status of the H v. */
static cr_status hvp_of_forms_statistics(cr_tape *t, const cr_value *f, cr_array *xa, cr_targ arg,
                                         size_t n, bool array_result)
{
    double d[9] = {1, -1, 0.5, 2, 0.25, -0.75, 1, 1, 1}, o[9];
    size_t m = cr_array_numel(xa);
    cr_array da, oa;
    assert_int_equal(cr_array_view_init(&da, d, CR_DT_F64, xa->ndim, xa->shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&oa, o, CR_DT_F64, xa->ndim, xa->shape, NULL), CR_OK);
    assert_true(m <= 9);
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, xa);
    cr_var r = array_result ? sum_sq(t, call_a(t, f, cr_targ_arr(X), arg, n))
                            : call_s(t, f, cr_targ_arr(X), arg, n);
    cr_var y = cr_sin(t, r);
    assert_ok(t, cr_tape_status(t));
    const cr_array *dp = &da;
    cr_array *op = &oa;
    return cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &dp, &op);
}

static void test_refusals_forms_statistics(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);

    /* Refused when recording (CR_EUNIMPL, sticky, naming the function and the reason).
     * (Structured A and B of solve: test_hvp_structured.c.) */
    double b3[3] = {1, 2, 3};
    cr_array ba = cr_array_vector(b3, 3);
    cr_var s = cr_tape_input(t, 2.0);
    cr_avar bv = cr_tape_array_input(t, &ba);
    call_a(t, &cr_fn_normalize, cr_targ_arr(bv), cr_targ_var(s), 2);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t),
                    "normalize: no second-order form on the tape: the exponent p is a variable");

    /* tuple results without a form: refused (findmax, extrema and logabsdet have forms:
     * test_tape_tuple.c; svd: test_hvp_spectral.c; qr and lu:
     * test_hvp_factorizations.c) */
    cr_engine *eng = noform_engine(f->ctx); /* halves: a user rule (test_noform.h) */
    cr_tape *u;
    cr_tape_params up = {.struct_size = sizeof up, .flags = CR_TAPE_SECOND_ORDER, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &up, &u), CR_OK);
    bv = cr_tape_array_input(u, &ba);
    cr_targ args[1] = {cr_targ_arr(bv)}, outs[3];
    cr_value halves = cr_value_function(&halves_fn, NULL);
    assert_int_equal(cr_tape_acall_n(u, &halves, args, 1, outs, 2), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(u), "halves: no second-order form on the tape");
    cr_tape_free(u);
    cr_engine_free(eng);

    /* Points without a second derivative: recorded, refused by the sweep (CR_EDOMAIN, sticky,
     * naming the function). */
    double eq[6] = {1.5, 1.5, 1.5, 0.5, -0.5, 2.0};
    cr_array ea = cr_array_vector(eq, 3), e2 = cr_array_matrix(eq, 2, 3);
    assert_int_equal(hvp_of_forms_statistics(t, &cr_fn_std, &ea, i64(0), 1, false), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "std: no second derivative where the standard deviation "
                                       "is zero (slice 0: all its elements are equal)");
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    /* by rows: the first row is constant, the second is not */
    assert_int_equal(hvp_of_forms_statistics(t, &cr_fn_std, &e2, i64(1), 2, true), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "std: no second derivative where the standard deviation "
                                       "is zero (slice 0");
    /* by columns no slice is constant */
    assert_int_equal(hvp_of_forms_statistics(t, &cr_fn_std, &e2, i64(0), 2, true), CR_OK);
    /* var has its second derivative everywhere */
    assert_int_equal(hvp_of_forms_statistics(t, &cr_fn_var, &ea, i64(0), 1, false), CR_OK);

    double z1[3] = {1.0, 0.0, -2.0};
    cr_array za = cr_array_vector(z1, 3);
    assert_int_equal(hvp_of_forms_statistics(t, &cr_fn_normalize, &za, f64(1.5), 2, true),
                     CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t),
                    "normalize: no second derivative at a zero element (element 1) when p = 1.5");
    /* ... but p = 2 and p = 3 are fine there */
    assert_int_equal(hvp_of_forms_statistics(t, &cr_fn_normalize, &za, i64(2), 2, true), CR_OK);
    assert_int_equal(hvp_of_forms_statistics(t, &cr_fn_normalize, &za, i64(3), 2, true), CR_OK);
    cr_tape_free(t);
}

static int run_forms_statistics(void)
{
    const struct CMUnitTest forms_statistics[] = {
        cmocka_unit_test_setup_teardown(test_var_std, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cumprod, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_extrema, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matinv, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_solve, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_normalize, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals_forms_statistics, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(forms_statistics, NULL, NULL);
}

/*
 * Paths of the second-order forms (src/rulesets/array/reduce_forms.c, linalg_forms.c) that the
 * other tests do not reach:
 *   - a form's matrix argument without a tangent along the direction while the record's
 *     cotangent is not zero (the argument is s0 C, C a constant and the direction's s0
 *     component zero, so the forward sweep leaves its tangent zero): the single-argument
 *     forms skip that direction, and the solves (cholesky_solve, potrs, getrs, trtrs) then
 *     take S of the factor from the right-hand side's tangent alone, or skip it when B has
 *     none either;
 *   - sum(f, A) and matfun_herm(f, A) of a real-only scalar row (erf: no complex step, the
 *     second derivative by central differences of its partials);
 *   - reductions over dims that leave one slice (logsumexp, softmax, logsoftmax, prod,
 *     std of a 3 x 1 matrix over dims 1).
 * Each H v (cr_tape_ahvp) is checked against central differences of a first-order tape's
 * gradient (test_prob.h), along directions with and without the s0 component.
 */

static double k_w[9] = {1.0, -0.7, 2.0, 0.4, -1.3, 0.9, 0.25, -0.5, 1.7};

/* A symmetric positive definite 3 x 3 constant (also a valid upper factor, and packed LU
 * factors with nonzero pivots), and a second constant right-hand side. */
static double k_c[9] = {2.0, 0.3, 0.1, 0.3, 2.5, 0.2, 0.1, 0.2, 3.0};
static double k_d[9] = {0.5, -0.2, 0.7, 1.1, 0.3, -0.4, 0.2, 0.9, -0.6};
static const int64_t k_piv[3] = {1, 2, 3};

/* Σ w ⊙ sin(M) + (Σ M²)² / 8 over M (at most 9 elements): a cotangent varying by element. */
static cr_var mixl(cr_tape *t, cr_avar M)
{
    static cr_array w[8];
    static int next;
    if (M.a == NULL)
        return cr_const((double)NAN);
    cr_array *store = &w[next++ % 8];
    *store = M.a->ndim == 1 ? cr_array_vector(k_w, M.a->shape[0])
                            : cr_array_matrix(k_w, M.a->shape[0], M.a->shape[1]);
    cr_avar s = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(M));
    cr_var a = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(s), cr_targ_arr(cr_av_const(store))));
    cr_var q = sum_sq(t, M);
    return cr_add(t, a, cr_mul(t, cr_mul(t, q, q), cr_const(0.125)));
}

/* s (a scalar variable) times the constant 3 x 3 matrix c: an array variable whose tangent
 * is zero along a direction without an s component. */
static cr_avar scaled(cr_tape *t, cr_var s, double *c)
{
    static cr_array pool[8];
    static int next;
    cr_array *a = &pool[next++ % 8];
    *a = cr_array_matrix(c, 3, 3);
    return cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(cr_av_const(a)));
}

static cr_targ ipiv(void)
{
    static cr_array ip;
    size_t n = 3;
    ip = (cr_array){0};
    cr_array_view_init(&ip, (void *)(uintptr_t)k_piv, CR_DT_I64, 1, &n, NULL);
    return cr_targ_value(cr_value_array(&ip));
}

enum {
    C_PROD,
    C_NORM,
    C_EIGEN,
    C_SUM_ERF,
    C_CHOL_DET,
    C_POTRF,
    C_GETRF,
    C_GETRI,
    C_MATFUN_ERF,
    C_CSOLVE,
    C_CSOLVE_CONST_B,
    C_POTRS_U,
    C_POTRS_L,
    C_POTRS_CONST_B,
    C_GETRS,
    C_GETRS_CONST_B,
    C_TRTRS,
    C_TRTRS_CONST_B,
    C_COUNT
};

static const char *const k_names[C_COUNT] = {
    "prod",    "norm",        "eigen",  "sum(erf)",       "cholesky_det", "potrf",
    "getrf",   "getri",       "matfun", "cholesky_solve", "csolve const", "potrs U",
    "potrs L", "potrs const", "getrs",  "getrs const",    "trtrs",        "trtrs const"};

/* The record of case c whose array argument M = s0 C (and B = X or s0 D). */
static cr_var form_of(cr_tape *t, int c, cr_var s0, cr_avar X)
{
    cr_avar M = scaled(t, s0, k_c), D = scaled(t, s0, k_d);
    cr_targ m = cr_targ_arr(M);
    switch (c) {
    case C_PROD:
        return call_s(t, &cr_fn_prod, m, m, 1);
    case C_NORM:
        return call_s(t, &cr_fn_norm, m, m, 1);
    case C_EIGEN: {
        cr_targ a[1] = {cr_targ_arr(call_a(t, &cr_fn_symmetric, m, m, 1))}, r[2];
        if (cr_tape_acall_n(t, &cr_fn_eigen, a, 1, r, 2) != CR_OK)
            return cr_const((double)NAN);
        cr_avar v2 = cr_av_broadcast1(t, &cr_fn_square, r[1]); /* sign-free */
        return cr_add(t, mixl(t, r[0].u.a), mixl(t, v2));
    }
    case C_SUM_ERF:
        return call_s(t, &cr_fn_sum, cr_targ_value(cr_fn_erf), m, 2);
    case C_CHOL_DET:
        return call_s(t, &cr_fn_cholesky_det, m, m, 1);
    case C_POTRF:
        return mixl(t, call_a(t, &cr_fn_potrf, m, i64('U'), 2));
    case C_GETRF: {
        cr_targ r[2];
        if (cr_tape_acall_n(t, &cr_fn_getrf, &m, 1, r, 2) != CR_OK)
            return cr_const((double)NAN);
        return mixl(t, r[0].u.a);
    }
    case C_GETRI:
        return mixl(t, call_a(t, &cr_fn_getri, m, ipiv(), 2));
    case C_MATFUN_ERF:
        return mixl(t, call_a(t, &cr_fn_matfun_herm, cr_targ_value(cr_fn_erf), m, 2));
    case C_CSOLVE:
    case C_CSOLVE_CONST_B:
        return mixl(t, call_a(t, &cr_fn_cholesky_solve, m, cr_targ_arr(c == C_CSOLVE ? X : D), 2));
    case C_POTRS_U:
    case C_POTRS_L:
    case C_POTRS_CONST_B: {
        cr_targ a[3] = {m, i64(c == C_POTRS_L ? 'L' : 'U'),
                        cr_targ_arr(c == C_POTRS_CONST_B ? D : X)};
        return mixl(t, cr_tape_acall_a(t, &cr_fn_potrs, a, 3));
    }
    case C_GETRS:
    case C_GETRS_CONST_B: {
        cr_targ a[4] = {m, ipiv(), cr_targ_arr(c == C_GETRS ? X : D), i64('T')};
        return mixl(t, cr_tape_acall_a(t, &cr_fn_getrs, a, 4));
    }
    case C_TRTRS:
    case C_TRTRS_CONST_B: {
        cr_targ a[5] = {m, i64('U'), i64('N'), i64('N'), cr_targ_arr(c == C_TRTRS ? X : D)};
        return mixl(t, cr_tape_acall_a(t, &cr_fn_trtrs, a, 5));
    }
    default:
        return cr_const((double)NAN);
    }
}

/* s0, s1, X (3 x 3): g (1 + Σ sin(X)) + s1 Σ X², g the record of case *env: its cotangent is
 * 1 + Σ sin(X) (not constant), and its argument's tangent is zero along a direction with no
 * s0 component. */
static cr_var zdir_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    int c = *(const int *)env;
    cr_var g = form_of(t, c, s[0], X[0]);
    cr_var a = cr_mul(t, g, cr_add(t, cr_const(1.0), sum_sin(t, X[0])));
    return cr_add(t, a, cr_mul(t, s[1], sum_sq(t, X[0])));
}

/* H v along v against central differences of the gradient. */
static void check_v(cr_ctx *ctx, const prob *p, double *z, const double *v, double tol,
                    const char *what)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    size_t L = flat_len(p);
    double got[MAXZ], want[MAXZ];
    tape_hvp(t, p, z, v, got);
    fd_hvp(ctx, p, z, v, want);
    for (size_t i = 0; i < L; i++) {
        if (fabs(got[i] - want[i]) > tol * (1.0 + fabs(want[i])))
            printf("%s: component %zu: %.10g, differences %.10g\n", what, i, got[i], want[i]);
        ASSERT_CLOSE(got[i], want[i], tol);
    }
    cr_tape_free(t);
}

static void test_zero_tangent_argument(void **state)
{
    fixture *f = *state;
    for (int c = 0; c < C_COUNT; c++) {
        prob p = {.f = zdir_p, .env = &c, .ns = 2, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[11], v[11];
            point(11, seed, 0.8, z);
            z[0] = 0.6 + 0.15 * seed; /* s0: M = s0 C, well conditioned, erf not flat */
            direction(11, seed, v);
            check_v(f->ctx, &p, z, v, 1e-6, k_names[c]); /* every component nonzero */
            v[0] = 0.0;                                  /* M's tangent zero */
            check_v(f->ctx, &p, z, v, 1e-6, k_names[c]);
        }
    }
}

/* X (3 x 3), x = sum(X, dims 1) (3 x 1; dimensions count from 0): reductions of x over
 * dims 0, one slice: s0 logsumexp(x; 0) + mixl(softmax(x; 0)) + Σ sin(logsoftmax(x; 0)) s0
 *   + prod(x; 0) + std(x; 0) s0 */
static cr_var one_slice_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_avar x = call_a(t, &cr_fn_sum, cr_targ_arr(X[0]), i64(1), 2);
    cr_targ xa = cr_targ_arr(x);
    cr_var a = cr_mul(t, s[0], cr_av_sum(t, call_a(t, &cr_fn_logsumexp, xa, i64(0), 2)));
    cr_var b = mixl(t, call_a(t, &cr_fn_softmax, xa, i64(0), 2));
    cr_var c = cr_mul(t, sum_sin(t, call_a(t, &cr_fn_logsoftmax, xa, i64(0), 2)), s[0]);
    cr_var d = cr_av_sum(t, call_a(t, &cr_fn_prod, xa, i64(0), 2));
    cr_var e = cr_mul(t, cr_av_sum(t, call_a(t, &cr_fn_std, xa, i64(0), 2)), s[0]);
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), e);
}

static void test_one_slice(void **state)
{
    fixture *f = *state;
    prob p = {.f = one_slice_p, .ns = 1, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[10];
        point(10, seed, 0.9, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

static int run_forms_edges(void)
{
    const struct CMUnitTest forms_edges[] = {
        cmocka_unit_test_setup_teardown(test_zero_tangent_argument, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_one_slice, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(forms_edges, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_forms_reductions();
    failed += run_forms_statistics();
    failed += run_forms_edges();
    return failed;
}
