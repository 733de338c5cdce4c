/*
 * Second-order forms of solve(A, B), inv(A) (matinv) and rdiv(B, A) = B / A with a
 * structured A (Diagonal, Upper, Lower, Symmetric, Hermitian, and dense), on second-order
 * tapes (src/ad/tape_array2_forms.c, put_projected and form_rdiv). The rules project A's
 * cotangent onto A's structure; so must each S be. Each H v (cr_tape_ahvp) is checked
 * against central differences, along the direction, of the gradient a first-order tape
 * computes, at several points and directions:
 *   - A recorded as a structured array input (the gradient of such an input is the projected
 *     cotangent itself, so an S left unprojected shows in H v), the direction tagged like A;
 *   - A made by the view functions Symmetric(X), Hermitian(X), Diagonal(v) from dense
 *     variables, composed with other operations;
 * a full Hessian (cr_tape_hessian) of a composite of scalars through them; and the refusals
 * (a complex B or A: CR_EUNIMPL when recording; a structured B: test_tape_array2_struct3.c).
 */
#include <math.h>
#include <stdio.h>

#include "test_sprob.h"

/* A point of L components whose n x n block at off has a dominant diagonal. */
static void spoint(size_t L, unsigned seed, size_t off, size_t n, double *z)
{
    point(L, seed, 0.8, z);
    for (size_t i = 0; i < n; i++)
        z[off + i * n + i] += i % 2 ? -2.5 : 2.5;
}

static double k_m9[9] = {0.5, -1.0, 0.3, 1.2, 0.4, -0.6, -0.2, 0.9, 1.1};

/* ---- inv ------------------------------------------------------------------------------------ */

/* A 3 x 3: sum(sin.(inv(A) M)) + sum(inv(A).^2)² */
static cr_var inv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array M;
    M = cr_array_matrix(k_m9, 3, 3);
    cr_avar Y = call_a(t, &cr_fn_matinv, cr_targ_arr(X[0]), i64(0), 1);
    cr_var q = sum_sq(t, Y);
    return cr_add(t, sum_sin(t, cr_amatmul(t, Y, cr_aconst(&M))), cr_mul(t, q, q));
}

static void test_inv(void **state)
{
    fixture *f = *state;
    for (int q = 0; q < 6; q++) {
        sprob p = {.p = {.f = inv_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}},
                   .st = {k_structs[q]}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[9];
            spoint(9, seed + 2 * (unsigned)q, 0, 3, z);
            scheck(f->ctx, &p, z, 1e-6, 3);
        }
    }
}

/* ---- solve ---------------------------------------------------------------------------------- */

/* A 3 x 3, B 3 x 2 (or a vector of 3, env != NULL): sum(sin.(A \ B)) + sum((A \ B).^2)
 * sum(B .* B) */
static cr_var solve_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar Y = call_a(t, &cr_fn_solve, cr_targ_arr(X[0]), cr_targ_arr(X[1]), 2);
    return cr_add(t, sum_sin(t, Y), cr_mul(t, sum_sq(t, Y), sum_sq(t, X[1])));
}

static void test_solve(void **state)
{
    fixture *f = *state;
    for (int q = 0; q < 6; q++)
        for (int vec = 0; vec < 2; vec++) {
            sprob p = {.p = {.f = solve_p,
                             .na = 2,
                             .ndim = {2, vec ? 1 : 2},
                             .shape = {{3, 3}, {3, vec ? 1 : 2}}},
                       .st = {k_structs[q], CR_MAT_DENSE}};
            for (unsigned seed = 0; seed < 2; seed++) {
                double z[15];
                spoint(15, seed + 3 * (unsigned)q, 0, 3, z);
                scheck(f->ctx, &p, z, 1e-6, 3);
            }
        }
}

/* ---- rdiv ----------------------------------------------------------------------------------- */

/* B 2 x 3 (or a vector of 3), A 3 x 3: sum(sin.(B / A)) + sum((B / A).^2) sum(B .* B) */
static cr_var rdiv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar Y = call_a(t, &cr_fn_rdiv, cr_targ_arr(X[1]), cr_targ_arr(X[0]), 2);
    return cr_add(t, sum_sin(t, Y), cr_mul(t, sum_sq(t, Y), sum_sq(t, X[1])));
}

/* B / A with A a constant (linear in B), and with B a constant */
static double k_a9[9] = {2.0, 0.3, -0.4, 0.1, -1.8, 0.5, 0.7, 0.2, 2.2};

static cr_var rdiv_const_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    static cr_array A, B;
    A = cr_array_matrix(k_a9, 3, 3);
    B = cr_array_matrix(k_m9, 3, 3);
    bool a_const = env != NULL;
    cr_avar Y = call_a(t, &cr_fn_rdiv, cr_targ_arr(a_const ? X[1] : cr_aconst(&B)),
                       cr_targ_arr(a_const ? cr_aconst(&A) : X[0]), 2);
    return cr_add(t, sum_sin(t, Y), cr_mul(t, sum_sq(t, Y), sum_sq(t, X[1])));
}

static void test_rdiv(void **state)
{
    fixture *f = *state;
    for (int q = 0; q < 6; q++)
        for (int vec = 0; vec < 2; vec++) {
            sprob p = {.p = {.f = rdiv_p,
                             .na = 2,
                             .ndim = {2, vec ? 1 : 2},
                             .shape = {{3, 3}, {vec ? 3 : 2, 3}}},
                       .st = {k_structs[q], CR_MAT_DENSE}};
            for (unsigned seed = 0; seed < 2; seed++) {
                double z[15];
                spoint(15, seed + 5 * (unsigned)q, 0, 3, z);
                scheck(f->ctx, &p, z, 1e-6, 3);
            }
        }
    static const int one = 1;
    for (int c = 0; c < 2; c++) {
        prob p = {.f = rdiv_const_p,
                  .env = c ? &one : NULL,
                  .na = 2,
                  .ndim = {2, 2},
                  .shape = {{3, 3}, {3, 3}}};
        double z[18];
        spoint(18, 7 + (unsigned)c, 0, 3, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* ---- The view functions, composed ------------------------------------------------------------
 */

/* X 3 x 3, u of 3, B 3 x 2:
 *   sum(sin.(inv(Symmetric(X)) B)) + sum((Hermitian(X) \ B).^2)
 *   + sum(cos.(Bᵀ / Diagonal(u))) sum(u .^ 2) + sum(sin.(solve(Diagonal(u), B)))
 *   + sum((uᵀ / Symmetric(X)).^2) */
static cr_var views_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ x = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]), B = cr_targ_arr(X[2]);
    cr_avar Sy = call_a(t, &cr_fn_symmetric, x, x, 1);
    cr_avar He = call_a(t, &cr_fn_hermitian, x, x, 1);
    cr_avar Dg = call_a(t, &cr_fn_diagonal, u, u, 1);
    cr_avar Bt = call_a(t, &cr_fn_transpose, B, B, 1);
    cr_var a = sum_sin(t, cr_amatmul(t, call_a(t, &cr_fn_matinv, cr_targ_arr(Sy), x, 1), X[2]));
    cr_var b = sum_sq(t, call_a(t, &cr_fn_solve, cr_targ_arr(He), B, 2));
    cr_avar c0 = call_a(t, &cr_fn_rdiv, cr_targ_arr(Bt), cr_targ_arr(Dg), 2);
    cr_var c =
        cr_mul(t, cr_asum(t, cr_abroadcast1(t, &cr_fn_cos, cr_targ_arr(c0))), sum_sq(t, X[1]));
    cr_var d = sum_sin(t, call_a(t, &cr_fn_solve, cr_targ_arr(Dg), B, 2));
    cr_var e = sum_sq(t, call_a(t, &cr_fn_rdiv, u, cr_targ_arr(Sy), 2));
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), e);
}

static void test_views(void **state)
{
    fixture *f = *state;
    prob p = {.f = views_p, .na = 3, .ndim = {2, 1, 2}, .shape = {{3, 3}, {3, 1}, {3, 2}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[18];
        spoint(18, seed, 0, 3, z);
        for (int i = 0; i < 3; i++)
            z[9 + i] += i == 1 ? -2.0 : 2.0; /* u away from zero */
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* ---- A full Hessian of scalars ------------------------------------------------------------ */

/* x, y, w: M = x E + y F + C (3 x 3), d = (x, w, 2 + y):
 *   sum(sin.(inv(Symmetric(M)))) + sum((c / Symmetric(M)).^2) + sum(sin.(Diagonal(d) \ c))
 *   + sum((c / Diagonal(d)) .* c) */
static double k_E9[9] = {1, 0, 0, 0, 0, 1, 0, 0, 1}, k_F9[9] = {0, 1, 0, 0, 1, 0, 1, 0, 0},
              k_C9[9] = {3, 0.2, 0.1, 0, -2.5, 0.3, 0, 0, 2}, k_c3[3] = {1.0, -0.5, 0.8},
              k_e1[3] = {1, 0, 0}, k_e3[3] = {0, 0, 1}, k_e2[3] = {0, 1, 0}, k_d0[3] = {0, 0, 2};

static cr_avar lin3(cr_tape *t, cr_var a, cr_array *A, cr_var b, cr_array *B, cr_array *C)
{
    cr_avar M = cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(a), cr_targ_arr(cr_aconst(A)));
    M = cr_abroadcast2(
        t, &cr_fn_add, cr_targ_arr(M),
        cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(b), cr_targ_arr(cr_aconst(B)))));
    return cr_abroadcast2(t, &cr_fn_add, cr_targ_arr(M), cr_targ_arr(cr_aconst(C)));
}

static cr_var hess_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, C, c, e1, e2, e3, d0;
    E = cr_array_matrix(k_E9, 3, 3);
    F = cr_array_matrix(k_F9, 3, 3);
    C = cr_array_matrix(k_C9, 3, 3);
    c = cr_array_vector(k_c3, 3);
    e1 = cr_array_vector(k_e1, 3);
    e2 = cr_array_vector(k_e2, 3);
    e3 = cr_array_vector(k_e3, 3);
    d0 = cr_array_vector(k_d0, 3);
    cr_avar M = lin3(t, s[0], &E, s[1], &F, &C);
    cr_avar dv = lin3(t, s[0], &e1, s[2], &e2, &d0);
    dv = cr_abroadcast2(
        t, &cr_fn_add, cr_targ_arr(dv),
        cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s[1]), cr_targ_arr(cr_aconst(&e3)))));
    cr_targ Sy = cr_targ_arr(call_a(t, &cr_fn_symmetric, cr_targ_arr(M), i64(0), 1));
    cr_targ Dg = cr_targ_arr(call_a(t, &cr_fn_diagonal, cr_targ_arr(dv), i64(0), 1));
    cr_targ cc = cr_targ_arr(cr_aconst(&c));
    cr_var a = sum_sin(t, call_a(t, &cr_fn_matinv, Sy, Sy, 1));
    cr_var b = sum_sq(t, call_a(t, &cr_fn_rdiv, cc, Sy, 2));
    cr_var d = sum_sin(t, call_a(t, &cr_fn_solve, Dg, cc, 2));
    cr_avar r = call_a(t, &cr_fn_rdiv, cc, Dg, 2);
    cr_var e = cr_asum(t, cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(r), cc));
    return cr_add(t, cr_add(t, a, b), cr_add(t, d, e));
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = hess_p, .ns = 3, .na = 0};
    double pts[3][3] = {{1.3, 0.4, -1.1}, {-0.7, 0.9, 1.5}, {0.6, -0.8, 2.1}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* ---- Refusals ------------------------------------------------------------------------------- */

/* Complex constants: refused when recording (CR_EUNIMPL, naming the function and the reason).
 * (A structured B has a form: test_tape_array2_struct3.c.) */
static void test_refusals(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double b9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_array ba = cr_array_matrix(b9, 3, 3);

    /* a complex constant A with a real variable B */
    cr_complex c9[9] = {2, 1, 0, 1, 3, 1, 0, 1, 4};
    cr_array ca;
    size_t sh[2] = {3, 3};
    assert_int_equal(cr_array_view_init(&ca, c9, CR_DT_C128, 2, sh, NULL), CR_OK);
    static const char *const cmsgs[3] = {
        "solve: no second-order form on the tape: A is complex; the form covers real matrices",
        "rdiv: no second-order form on the tape: A is complex; the form covers real matrices",
        "rdiv: no second-order form on the tape: B is complex; the form covers real B"};
    for (int q = 0; q < 3; q++) {
        cr_tape_reset(t);
        cr_avar B = cr_tape_array_input(t, &ba);
        cr_targ args[2];
        if (q == 0) {
            args[0] = cr_targ_arr(cr_aconst(&ca));
            args[1] = cr_targ_arr(B);
        } else if (q == 1) {
            args[0] = cr_targ_arr(B);
            args[1] = cr_targ_arr(cr_aconst(&ca));
        } else {
            args[0] = cr_targ_arr(cr_aconst(&ca));
            args[1] = cr_targ_arr(B);
        }
        cr_tape_acall_a(t, q == 0 ? &cr_fn_solve : &cr_fn_rdiv, args, 2);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t), cmsgs[q]);
    }

    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_inv, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_solve, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rdiv, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_views, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
