/*
 * More second-order forms of nonlinear array functions (src/ad/tape_array2_forms.c) on
 * second-order tapes: var and std (with and without dims), cumprod (with zeros), maximum and
 * minimum (with dims; a tie), inv (matinv), solve (vector and matrix B, either argument a
 * constant), normalize (p = 2, 3, 1.5, Inf). Each H v (cr_tape_ahvp) is checked against
 * central differences, along the direction, of the gradient the tape computes on a
 * first-order tape, at several points and directions, with each function composed with
 * others so that its cotangent is not 1; full Hessians (cr_tape_hessian) of composites of
 * scalar inputs likewise. Also the refusals: structured matrices and a variable exponent
 * (CR_EUNIMPL when recording), zero spread for std and a zero element for normalize with
 * p < 2 (CR_EDOMAIN from the sweep), and the factorizations' tuple results (CR_EUNIMPL).
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"
#include "test_noform.h"

static cr_var sum_mul(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(b)));
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
    cr_var c = sum_mul(t, call_a(t, &cr_fn_var, A, i64(1), 2), cr_aconst(&c2));
    cr_var d = cr_mul(t, call_s(t, &cr_fn_std, u, u, 1), call_s(t, &cr_fn_std, A, A, 1));
    cr_var e = sum_sin(t, call_a(t, &cr_fn_std, A, i64(1), 2));
    cr_var g =
        cr_asum(t, cr_abroadcast1(t, &cr_fn_cos, cr_targ_arr(call_a(t, &cr_fn_std, A, i64(0), 2))));
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
    cr_var d = cr_mul(t, s[0], cr_adot(t, yb, X[1]));
    cr_var e = sum_sin(t, call_a(t, &cr_fn_solve, cr_targ_arr(cr_aconst(&Ac)), B, 2));
    cr_var g = sum_sq(t, call_a(t, &cr_fn_solve, A, cr_targ_arr(cr_aconst(&bc)), 2));
    cr_var h = sum_sin(t, call_a(t, &cr_fn_solve, A, cr_targ_arr(cr_aconst(&Bc)), 2));
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
    cr_var b = cr_mul(t, s[0], cr_adot(t, call_a(t, &cr_fn_normalize, A, A, 1), X[0]));
    cr_avar n3 = call_a(t, &cr_fn_normalize, u, i64(3), 2);
    cr_var c = sum_mul(t, cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(n3)), X[1]);
    cr_var d = sum_sin(t, call_a(t, &cr_fn_normalize, A, f64(1.5), 2));
    cr_var e =
        cr_asum(t, cr_abroadcast1(t, &cr_fn_cos,
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

static double k_e9[9][9];

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
        cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s[0]), cr_targ_arr(cr_aconst(&basis[0])));
    for (size_t i = 1; i < 9; i++)
        acc = cr_abroadcast2(t, &cr_fn_add, cr_targ_arr(acc),
                             cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s[i]),
                                                        cr_targ_arr(cr_aconst(&basis[i])))));
    cr_targ M = cr_targ_arr(acc);
    cr_var a = cr_asum(t, call_a(t, &cr_fn_matinv, M, M, 1));
    cr_var b = call_s(t, &cr_fn_var, M, M, 1);
    cr_var c = sum_sin(t, call_a(t, &cr_fn_solve, M, cr_targ_arr(cr_aconst(&bc)), 2));
    cr_var d = cr_asum(t, call_a(t, &cr_fn_cumprod, M, i64(1), 2));
    cr_var e = sum_mul(t, call_a(t, &cr_fn_std, M, i64(0), 2), cr_aconst(&w3));
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
static cr_status hvp_of(cr_tape *t, const cr_value *f, cr_array *xa, cr_targ arg, size_t n,
                        bool array_result)
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

static void test_refusals(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);

    /* Refused when recording (CR_EUNIMPL, sticky, naming the function and the reason).
     * (Structured A and B of solve: test_tape_array2_struct2.c, test_tape_array2_struct3.c.) */
    double b3[3] = {1, 2, 3};
    cr_array ba = cr_array_vector(b3, 3);
    cr_var s = cr_tape_input(t, 2.0);
    cr_avar bv = cr_tape_array_input(t, &ba);
    call_a(t, &cr_fn_normalize, cr_targ_arr(bv), cr_targ_var(s), 2);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t),
                    "normalize: no second-order form on the tape: the exponent p is a variable");

    /* tuple results without a form: refused (findmax, extrema and logabsdet have forms:
     * test_tape_tuple2.c; svd: test_tape_array2_svd2.c; qr and lu:
     * test_tape_array2_fact2.c) */
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
    assert_int_equal(hvp_of(t, &cr_fn_std, &ea, i64(0), 1, false), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "std: no second derivative where the standard deviation "
                                       "is zero (slice 0: all its elements are equal)");
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    /* by rows: the first row is constant, the second is not */
    assert_int_equal(hvp_of(t, &cr_fn_std, &e2, i64(1), 2, true), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "std: no second derivative where the standard deviation "
                                       "is zero (slice 0");
    /* by columns no slice is constant */
    assert_int_equal(hvp_of(t, &cr_fn_std, &e2, i64(0), 2, true), CR_OK);
    /* var has its second derivative everywhere */
    assert_int_equal(hvp_of(t, &cr_fn_var, &ea, i64(0), 1, false), CR_OK);

    double z1[3] = {1.0, 0.0, -2.0};
    cr_array za = cr_array_vector(z1, 3);
    assert_int_equal(hvp_of(t, &cr_fn_normalize, &za, f64(1.5), 2, true), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t),
                    "normalize: no second derivative at a zero element (element 1) when p = 1.5");
    /* ... but p = 2 and p = 3 are fine there */
    assert_int_equal(hvp_of(t, &cr_fn_normalize, &za, i64(2), 2, true), CR_OK);
    assert_int_equal(hvp_of(t, &cr_fn_normalize, &za, i64(3), 2, true), CR_OK);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_var_std, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_cumprod, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_extrema, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matinv, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_solve, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_normalize, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
