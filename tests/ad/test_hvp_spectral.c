/*
 * The spectral second-order forms (src/ad/tape_array2_forms.c, form_spectral): svdvals,
 * opnorm (p = 2 through the SVD; p = 1 and Inf piecewise linear) and eigvals of a
 * symmetric matrix, on second-order tapes. Each H v (cr_tape_ahvp) is checked against
 * central differences, along the direction, of the gradient a first-order tape computes, at
 * several points (tall, wide and square matrices) and directions, each function composed
 * with others so that its cotangent varies from one singular value (eigenvalue) to the
 * next; a full Hessian (cr_tape_hessian) of a function of scalars through them; and eigvals
 * of a Diagonal matrix, accepted when recorded (H v of svdvals and opnorm of structured
 * matrices: test_tape_array2_struct3.c; of eigvals: test_tape_array2_struct4.c).
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"

static double k_w4[4] = {1.0, -0.7, 2.0, 0.4};

/* Σ w_i sin(v_i) + (Σ v_i²)² over a vector v of n <= 4 values */
static cr_var mix(cr_tape *t, cr_avar v, size_t n)
{
    static cr_array w;
    w = cr_array_vector(k_w4, n);
    cr_avar sv = cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(v));
    cr_var a =
        cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(sv), cr_targ_arr(cr_aconst(&w))));
    cr_var q = sum_sq(t, v);
    return cr_add(t, a, cr_mul(t, q, q));
}

/* ---- svdvals -------------------------------------------------------------------------------- */

/* A (rows x cols), given by env: mix(svdvals(A)) */
static cr_var svdvals_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const size_t *r = env;
    return mix(t, call_a(t, &cr_fn_svdvals, cr_targ_arr(X[0]), i64(0), 1), r[0]);
}

static void test_svdvals(void **state)
{
    fixture *f = *state;
    static const size_t shapes[3][3] = {{4, 3, 3}, {2, 4, 2}, {3, 3, 3}}; /* rows, cols, k */
    for (int q = 0; q < 3; q++) {
        prob p = {.f = svdvals_p,
                  .env = &shapes[q][2],
                  .na = 1,
                  .ndim = {2},
                  .shape = {{shapes[q][0], shapes[q][1]}}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[12];
            point(12, seed + 3 * (unsigned)q, 1.2, z);
            z[0] += 1.5; /* singular values well apart */
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        }
    }
}

/* ---- opnorm -----------------------------------------------------------------------------------
 */

/* A 3 x 4: sin(opnorm(A)) opnorm(A) + opnorm(A, 1)² + opnorm(A, Inf) opnorm(A, 2) */
static cr_var opnorm_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ A = cr_targ_arr(X[0]);
    cr_var n2 = call_s(t, &cr_fn_opnorm, A, A, 1);
    cr_var n1 = call_s(t, &cr_fn_opnorm, A, f64(1.0), 2);
    cr_var ni = call_s(t, &cr_fn_opnorm, A, f64(INFINITY), 2);
    cr_var n22 = call_s(t, &cr_fn_opnorm, A, i64(2), 2);
    cr_var a = cr_mul(t, cr_sin(t, n2), n2);
    return cr_add(t, cr_add(t, a, cr_mul(t, n1, n1)), cr_mul(t, ni, n22));
}

static void test_opnorm(void **state)
{
    fixture *f = *state;
    prob p = {.f = opnorm_p, .na = 1, .ndim = {2}, .shape = {{3, 4}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[12];
        point(12, seed, 1.1, z);
        z[5] += 2.0; /* one column and one row clearly the largest */
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
}

/* ---- eigvals --------------------------------------------------------------------------------- */

/* B 3 x 3: mix(eigvals(Symmetric(B))) (B's upper triangle read) */
static cr_var eigvals_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar S = call_a(t, &cr_fn_symmetric, cr_targ_arr(X[0]), i64(0), 1);
    return mix(t, call_a(t, &cr_fn_eigvals, cr_targ_arr(S), i64(0), 1), 3);
}

/* B 3 x 3, dense: mix(eigvals(B)), B's upper triangle read (its cotangent lives there) */
static cr_var eigvals_dense_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    return mix(t, call_a(t, &cr_fn_eigvals, cr_targ_arr(X[0]), i64(0), 1), 3);
}

static void test_eigvals(void **state)
{
    fixture *f = *state;
    prob p = {.f = eigvals_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    prob q = {.f = eigvals_dense_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[9];
        point(9, seed, 1.0, z);
        z[0] += 2.0; /* eigenvalues apart */
        z[8] -= 2.0;
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        check_hvp_dirs(f->ctx, &q, z, 1e-6, 4);
    }
}

/* ---- A full Hessian of scalars ------------------------------------------------------------ */

/* x, y: opnorm(M)² + sum(sin.(svdvals(M))) + eigvals(Symmetric(M))[2], M = x E + y F + C */
static double k_E[6] = {1, 0, 0, 0, 1, 0}, k_F[6] = {0, 1, 0, 1, 0, 1},
              k_C[6] = {0.3, 0, 2, 0, 0.5, 0}, k_D[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};

static cr_var two_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, C, D;
    E = cr_array_matrix(k_E, 2, 3);
    F = cr_array_matrix(k_F, 2, 3);
    C = cr_array_matrix(k_C, 2, 3);
    D = cr_array_matrix(k_D, 3, 3);
    cr_avar M = cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s[0]), cr_targ_arr(cr_aconst(&E)));
    M = cr_abroadcast2(
        t, &cr_fn_add, cr_targ_arr(M),
        cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s[1]), cr_targ_arr(cr_aconst(&F)))));
    M = cr_abroadcast2(t, &cr_fn_add, cr_targ_arr(M), cr_targ_arr(cr_aconst(&C)));
    cr_var o = call_s(t, &cr_fn_opnorm, cr_targ_arr(M), i64(0), 1);
    cr_var a = cr_add(t, cr_mul(t, o, o),
                      sum_sin(t, call_a(t, &cr_fn_svdvals, cr_targ_arr(M), i64(0), 1)));
    /* Mᵀ M + D, symmetric 3 x 3 */
    cr_avar Mt = call_a(t, &cr_fn_transpose, cr_targ_arr(M), i64(0), 1);
    cr_avar G = cr_abroadcast2(t, &cr_fn_add, cr_targ_arr(cr_amatmul(t, Mt, M)),
                               cr_targ_arr(cr_aconst(&D)));
    cr_avar ev =
        call_a(t, &cr_fn_eigvals,
               cr_targ_arr(call_a(t, &cr_fn_symmetric, cr_targ_arr(G), i64(0), 1)), i64(0), 1);
    cr_var e = cr_tape_acall_s(t, &cr_fn_getindex, (cr_targ[]){cr_targ_arr(ev), i64(1)}, 2);
    return cr_add(t, a, cr_mul(t, e, e));
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = two_p, .ns = 2, .na = 0};
    double pts[3][2] = {{1.3, 0.4}, {-0.7, 1.9}, {2.6, -0.8}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* Structured matrices: eigvals of a Diagonal one is accepted when recorded, as svdvals and
 * opnorm of any (H v: test_tape_array2_struct3.c and test_tape_array2_struct4.c). */
static void test_refusals(void **state)
{
    fixture *f = *state;
    double v[3] = {1.0, -2.0, 0.5};
    cr_array va = cr_array_vector(v, 3);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_targ V = cr_targ_arr(cr_tape_array_input(t, &va));
    cr_targ D = cr_targ_arr(call_a(t, &cr_fn_diagonal, V, V, 1));
    assert_ok(t, cr_tape_status(t));
    cr_targ out;
    assert_ok(t, cr_tape_acall(t, &cr_fn_eigvals, &D, 1, &out));
    cr_tape_free(t);
}

/* A form that needs another function's frule, which the tape's engine does not have (svd's
 * frule opted out in a child registry): H v stops with CR_EUNIMPL naming both functions,
 * and the first-order gradient on the same engine is unaffected. */
static void test_frule_missing(void **state)
{
    fixture *f = *state;
    cr_registry *reg;
    cr_engine *eng;
    cr_argspec arr = CR_ARG_ARRAY_F64;
    assert_int_equal(cr_registry_new(f->ctx, cr_registry_builtin(), &reg), CR_OK);
    assert_int_equal(
        cr_registry_opt_out(reg, CR_MODE_FRULE, cr_fn_svd.u.func.fn, &arr, 1, false, 0), CR_OK);
    assert_int_equal(cr_registry_freeze(reg), CR_OK);
    assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
    double a[9] = {2.0, 0.3, -0.5, 0.1, 1.4, 0.2, -0.7, 0.6, 0.9}, dir[9], hv[9], g[9];
    for (int e = 0; e < 9; e++)
        dir[e] = 0.1 * (e + 1);
    cr_array A = cr_array_matrix(a, 3, 3), D = cr_array_matrix(dir, 3, 3);
    cr_array H = cr_array_matrix(hv, 3, 3), G = cr_array_matrix(g, 3, 3);
    const cr_array *dv[1] = {&D};
    cr_array *hp[1] = {&H}, *gp[1] = {&G};
    for (uint32_t flags = 0; flags <= CR_TAPE_SECOND_ORDER; flags += CR_TAPE_SECOND_ORDER) {
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags, .engine = eng};
        assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
        cr_avar X = cr_tape_array_input(t, &A);
        cr_var y = sum_sq(t, call_a(t, &cr_fn_svdvals, cr_targ_arr(X), i64(0), 1));
        assert_ok(t, cr_tape_status(t));
        if (flags == 0) {
            assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, gp), CR_OK);
        } else {
            assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, dv, hp), CR_EUNIMPL);
            assert_contains(cr_tape_errmsg(t), "svdvals: the second-order form needs svd's frule");
        }
        cr_tape_free(t);
    }
    cr_engine_free(eng);
    cr_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_svdvals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_opnorm, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigvals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_frule_missing, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
