/*
 * Second-order forms of the nonlinear array functions (src/ad/tape_array2_forms.c) on
 * second-order tapes: logsumexp, softmax, logsoftmax (with and without dims), prod (with
 * zeros), norm (p = 2, other p, Inf) and nrm2, det (also singular) and logdet, sum(f, A)
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
    cr_var b = cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(l0), u));
    cr_var c = sum_sq(t, call_a(t, &cr_fn_logsumexp, A, i64(1), 2)); /* 2 x 1 */
    cr_var d = call_s(t, &cr_fn_logsumexp, cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, u, u)), u, 1);
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
    cr_var b = cr_adot(t, call_a(t, &cr_fn_softmax, u, u, 1), X[1]);
    cr_var c = sum_sq(t, call_a(t, &cr_fn_softmax, A, A, 1));
    cr_var d = sum_sin(t, call_a(t, &cr_fn_logsoftmax, A, i64(0), 2));
    cr_var e = cr_asum(
        t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(call_a(t, &cr_fn_logsoftmax, u, u, 1)), u));
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
    cr_var c2 = cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(p0), A));
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
    cr_avar G = call_a(t, &cr_fn_add_uniform, cr_targ_arr(cr_amatmul(t, X[0], Mt)),
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
    cr_var c = cr_mul(t, cr_tape_acall_s(t, &cr_fn_sum, c2, 2), cr_asum(t, X[0]));
    cr_targ d3[3] = {cr_targ_value(cr_fn_atan), B, i64(1)};
    cr_var d = cr_asum(
        t, cr_abroadcast1(t, &cr_fn_cos, cr_targ_arr(cr_tape_acall_a(t, &cr_fn_sum, d3, 3))));
    cr_targ e3[3] = {cr_targ_value(cr_fn_hypot), A, B};
    cr_var e = cr_asum(t, cr_tape_acall_a(t, &cr_fn_map, e3, 3));
    cr_targ g2[2] = {cr_targ_value(cr_fn_exp), A};
    cr_var g = sum_sin(t, cr_tape_acall_a(t, &cr_fn_map, g2, 2));
    cr_targ h3[3] = {cr_targ_value(cr_fn_mul), A, B};
    cr_var h = cr_asum(
        t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(cr_tape_acall_a(t, &cr_fn_map, h3, 3)), B));
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
        cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s[0]), cr_targ_arr(cr_aconst(&basis[0])));
    for (size_t i = 1; i < n; i++)
        acc = cr_abroadcast2(t, &cr_fn_add, cr_targ_arr(acc),
                             cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s[i]),
                                                        cr_targ_arr(cr_aconst(&basis[i])))));
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
    cr_targ Wx = cr_targ_arr(cr_amatmul(t, cr_aconst(&W), x));
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
     * (test_noform.h; logabsdet of a structured matrix has a form: test_tape_array2_struct3.c). */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_logsumexp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_softmax, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prod, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_norm, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_det, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sum_map, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessians, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
