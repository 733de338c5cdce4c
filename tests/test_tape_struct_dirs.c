/*
 * Directions of structured matrix inputs in forward and second-order sweeps: a direction V
 * of a Symmetric, Upper, Lower or Diagonal input is read through the input's structure, as
 * a change of the input's data by V is (the lower triangle of V does not move a Symmetric
 * input). cr_tape_ajvp against central differences of the same function in plain C along
 * the data, and cr_tape_ahvp against central differences of the tape's own gradient along
 * the data, with directions that are not in the structure's tangent space.
 */
#include "test_util.h"

#define N 3

static double k_a[N * N] = {1, 2, 0.5, -1, 0.3, 2, 0.7, -0.4, 1.1};

/* The matrix an input of structure s reads from data b (row-major N x N; a Diagonal's
 * N entries). */
static void logical(int s, const double *b, double *L)
{
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double v = 0.0;
            if (s == CR_MAT_SYMMETRIC)
                v = i <= j ? b[i * N + j] : b[j * N + i];
            else if (s == CR_MAT_UPPER)
                v = j >= i ? b[i * N + j] : 0.0;
            else if (s == CR_MAT_LOWER)
                v = j <= i ? b[i * N + j] : 0.0;
            else if (s == CR_MAT_DIAGONAL)
                v = i == j ? b[i] : 0.0;
            L[i * N + j] = v;
        }
}

/* y = sum((A L).^2) + sum(sin.(L)) in plain C */
static double f_c(int s, const double *b)
{
    double L[N * N], y = 0.0;
    logical(s, b, L);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double c = 0.0;
            for (size_t k = 0; k < N; k++)
                c += k_a[i * N + k] * L[k * N + j];
            y += c * c + sin(L[i * N + j]);
        }
    return y;
}

static cr_array input(int s, double *b)
{
    cr_array B = cr_array_matrix(b, N, N);
    B.structure = (uint8_t)s;
    if (s == CR_MAT_DIAGONAL)
        B.strides[0] = 1;
    return B;
}

static cr_var record(cr_tape *t, cr_avar X)
{
    static cr_array A;
    A = cr_array_matrix(k_a, N, N);
    cr_avar P = cr_amatmul(t, cr_aconst(&A), X);
    cr_var q = cr_asum(t, cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(P)));
    return cr_add(t, q, cr_asum(t, cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(X))));
}

/* The gradient (N x N) of the recorded function at data b. */
static void gradient(cr_tape *t, int s, double *b, double *g)
{
    cr_tape_reset(t);
    cr_array B = input(s, b), G = cr_array_matrix(g, N, N);
    cr_array *gp = &G;
    cr_avar X = cr_tape_array_input(t, &B);
    cr_var y = record(t, X);
    assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp), CR_OK);
}

static void test_directions(void **state)
{
    fixture *f = *state;
    const int structs[4] = {CR_MAT_SYMMETRIC, CR_MAT_UPPER, CR_MAT_LOWER, CR_MAT_DIAGONAL};
    const double h = 1e-5;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    for (size_t q = 0; q < 4; q++) {
        int s = structs[q];
        double b[N * N] = {1, 0.2, 0.3, 0.9, 2, 0.4, -0.8, 0.6, 3};
        double v[N * N] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}, hv[N * N];
        /* the data change along v: a Diagonal's entries move by v's diagonal */
        double dv[N * N], bp[N * N], bm[N * N];
        for (size_t e = 0; e < N * N; e++)
            dv[e] = s == CR_MAT_DIAGONAL ? (e < N ? v[e * (N + 1)] : 0.0) : v[e];
        for (size_t e = 0; e < N * N; e++) {
            bp[e] = b[e] + h * dv[e];
            bm[e] = b[e] - h * dv[e];
        }
        /* J v */
        cr_tape_reset(t);
        cr_array B = input(s, b), V = cr_array_matrix(v, N, N), HV = cr_array_matrix(hv, N, N);
        cr_avar X = cr_tape_array_input(t, &B);
        cr_var y = record(t, X);
        const cr_array *vp = &V;
        cr_array *hp = &HV;
        double jv;
        assert_int_equal(cr_tape_ajvp(t, NULL, NULL, 0, &X, &vp, 1, &y, 1, &jv, NULL, 0, NULL),
                         CR_OK);
        ASSERT_CLOSE(jv, (f_c(s, bp) - f_c(s, bm)) / (2 * h), 1e-7);
        if (s == CR_MAT_DIAGONAL)
            continue; /* (its gradient array is not N x N data) */
        /* H v against central differences of the gradient along the data */
        assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp), CR_OK);
        double gp[N * N], gm[N * N];
        gradient(t, s, bp, gp);
        gradient(t, s, bm, gm);
        for (size_t e = 0; e < N * N; e++)
            ASSERT_CLOSE(hv[e], (gp[e] - gm[e]) / (2 * h), 1e-6);
    }
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_directions, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
