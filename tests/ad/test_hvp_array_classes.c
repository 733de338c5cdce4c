/*
 * Array functions recorded on second-order tapes by their class (src/ad/tape_array2.c):
 * the piecewise linear sort, partialsort, unique and asum, and the structure views
 * Symmetric, Hermitian and Diagonal (linear; also under det and logdet, whose forms then
 * read the structured matrix). Each H v (cr_tape_ahvp) is checked against
 * central differences, along the direction, of the gradient of a first-order tape, with
 * each function composed with nonlinear ones so that its cotangent varies, at several
 * points and directions; and the forward sweep (cr_tape_ajvp on a CR_TAPE_FORWARD tape)
 * against central differences of the value.
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"

/* ---- sort, partialsort, unique, asum ------------------------------------------------------ */

static double k_w6[6] = {1.0, -2.0, 0.5, 3.0, -1.5, 2.5};

/* u of 6, s:
 *   sum(sin.(sort(u) .* w)) + s partialsort(u, 2)² + sum(square.(unique(u))) asum(u)
 *   + s asum(u)² */
static cr_var piece_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    static cr_array w6;
    w6 = cr_array_vector(k_w6, 6);
    cr_targ u = cr_targ_arr(X[0]);
    cr_avar sw = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(call_a(t, &cr_fn_sort, u, u, 1)),
                                  cr_targ_arr(cr_av_const(&w6)));
    cr_var a = sum_sin(t, sw);
    cr_var k = call_s(t, &cr_fn_partialsort, u, i64(2), 2);
    cr_var b = cr_mul(t, s[0], cr_mul(t, k, k));
    cr_var n1 = call_s(t, &cr_fn_asum, u, u, 1);
    cr_var c = cr_mul(t, sum_sq(t, call_a(t, &cr_fn_unique, u, u, 1)), n1);
    cr_var d = cr_mul(t, s[0], cr_mul(t, n1, n1));
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
}

static void test_piecewise(void **state)
{
    fixture *f = *state;
    prob p = {.f = piece_p, .ns = 1, .na = 1, .ndim = {1}, .shape = {{6}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[7];
        point(7, seed, 1.3, z); /* distinct, nonzero elements */
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        check_jvp(f->ctx, &p, z, 1e-6, 2);
    }
}

/* ---- Symmetric, Hermitian, Diagonal -----------------------------------------------------------
 */

/* A 3 x 3, v of 3: sum(square.(Symmetric(A) * A)) + sum(sin.(Hermitian(A) * v))
 *   + sum(square.(Diagonal(v) * A)) + sum(Diagonal(A) * v .* v) */
static cr_var views_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), v = cr_targ_arr(X[1]);
    cr_avar S = call_a(t, &cr_fn_symmetric, A, A, 1), H = call_a(t, &cr_fn_hermitian, A, A, 1);
    cr_avar Dv = call_a(t, &cr_fn_diagonal, v, v, 1), DA = call_a(t, &cr_fn_diagonal, A, A, 1);
    cr_var a = sum_sq(t, cr_av_matmul(t, S, X[0]));
    cr_var b = sum_sin(t, cr_av_matmul(t, H, X[1]));
    cr_var c = sum_sq(t, cr_av_matmul(t, Dv, X[0]));
    cr_avar w = cr_av_matmul(t, DA, X[1]);
    cr_var d = cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(w), v));
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
}

static void test_views(void **state)
{
    fixture *f = *state;
    prob p = {.f = views_p, .ns = 0, .na = 2, .ndim = {2, 1}, .shape = {{3, 3}, {3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[12];
        point(12, seed, 1.1, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        check_jvp(f->ctx, &p, z, 1e-6, 2);
    }
}

/* A 3 x 3 (made well conditioned): logdet(Symmetric(B)), det(Symmetric(B)) with B = A Aᵀ + 3 I */
static cr_var symdet_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar B = cr_av_matmul(t, X[0], call_a(t, &cr_fn_transpose, cr_targ_arr(X[0]), i64(0), 1));
    cr_avar S = call_a(t, &cr_fn_symmetric, cr_targ_arr(B), i64(0), 1);
    cr_var l = call_s(t, &cr_fn_logdet, cr_targ_arr(S), i64(0), 1);
    cr_var d = call_s(t, &cr_fn_det, cr_targ_arr(S), i64(0), 1);
    return cr_add(t, cr_mul(t, l, l), cr_sin(t, d));
}

static void test_symdet(void **state)
{
    fixture *f = *state;
    prob p = {.f = symdet_p, .ns = 0, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 2; seed++) {
        double z[9];
        point(9, seed, 0.5, z);
        z[0] += 1.0;
        z[4] += 1.0;
        z[8] += 1.0;
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_piecewise, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_views, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_symdet, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
