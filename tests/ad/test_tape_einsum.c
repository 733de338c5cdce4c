/*
 * Tests of contractions on the tape (cr_av_einsum, cr_av_einsum1, cr_av_bmm): an objective
 * built from matrix and batched products, a product whose inner index runs over two
 * dimensions, a trace and batched diagonals, checked against central finite differences of
 * the same objective in plain C and against the same objective written with scalar
 * operations on the tape; gradients, J·v on forward tapes, H·v on second-order tapes,
 * prepared gradients and prepared H·v; and the errors.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

/* x holds A (2 x 3), B (3 x 2), X (2 x 2 x 3), Y (2 x 3 x 2), in row-major order. */
enum { NA = 6, NB = 6, NX = 12, NY = 12, N = NA + NB + NX + NY };
enum { OA = 0, OB = NA, OX = NA + NB, OY = NA + NB + NX };

/* C = A B; D[b] = X[b] Y[b]; E[b,i,j] = Σ_k D[b,i,k] C[k,j]; G[i,k] = Σ_bj X[b,i,j] sin X[b,k,j];
 * y = Σ sin E + tr(C)² + Σ G ⊙ C + Σ_b exp(Σ_i D[b,i,i]). */
static double ein_c(const double *x, size_t n)
{
    (void)n;
    const double *A = x + OA, *B = x + OB, *X = x + OX, *Y = x + OY;
    double C[4] = {0}, D[8] = {0}, y = 0;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 3; j++)
                C[i * 2 + k] += A[i * 3 + j] * B[j * 2 + k];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 2; k++)
                for (int j = 0; j < 3; j++)
                    D[b * 4 + i * 2 + k] += X[b * 6 + i * 3 + j] * Y[b * 6 + j * 2 + k];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                double e = 0;
                for (int k = 0; k < 2; k++)
                    e += D[b * 4 + i * 2 + k] * C[k * 2 + j];
                y += sin(e);
            }
    double tr = C[0] + C[3];
    y += tr * tr;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            double g = 0;
            for (int b = 0; b < 2; b++)
                for (int j = 0; j < 3; j++)
                    g += X[b * 6 + i * 3 + j] * sin(X[b * 6 + k * 3 + j]);
            y += g * C[i * 2 + k];
        }
    for (int b = 0; b < 2; b++)
        y += exp(D[b * 4] + D[b * 4 + 3]);
    return y;
}

static cr_avar part(cr_tape *t, cr_avar x, int64_t off, const int64_t *shape, size_t nd)
{
    int64_t len = 1;
    for (size_t d = 0; d < nd; d++)
        len *= shape[d];
    return cr_av_reshape(t, cr_av_slice(t, x, off, off + len), shape, nd);
}

/* The objective with contractions. */
static cr_var ein_t(cr_tape *t, cr_avar x)
{
    const int64_t sa[2] = {2, 3}, sb[2] = {3, 2}, sx[3] = {2, 2, 3}, sy[3] = {2, 3, 2};
    cr_avar A = part(t, x, OA, sa, 2), B = part(t, x, OB, sb, 2), X = part(t, x, OX, sx, 3),
            Y = part(t, x, OY, sy, 3);
    cr_avar C = cr_av_einsum(t, "ij,jk->ik", A, B);
    cr_avar D = cr_av_bmm(t, X, Y);
    cr_avar E = cr_av_einsum(t, "bik,kj->bij", D, C);
    cr_avar T = cr_av_einsum1(t, "ii->", C); /* 0-d */
    cr_avar G = cr_av_einsum(t, "bij,bkj->ik", X, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(X)));
    cr_avar S = cr_av_einsum1(t, "bii->b", D);
    cr_var tr = cr_av_getindex(t, T, 0);
    cr_var y = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(E)));
    y = cr_add(t, y, cr_mul(t, tr, tr));
    y = cr_add(t, y, cr_av_dot(t, G, C));
    return cr_add(t, y, cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_exp, cr_targ_arr(S))));
}

static cr_status ein_arr(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    *y = ein_t(t, xs[0]);
    return cr_tape_status(t);
}

/* The same objective with scalar operations only. */
static cr_status ein_s(cr_tape *t, const cr_var *x, size_t n, cr_var *out, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    const cr_var *A = x + OA, *B = x + OB, *X = x + OX, *Y = x + OY;
    cr_var C[4], D[8], y = cr_const(0.0);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            C[i * 2 + k] = cr_const(0.0);
            for (int j = 0; j < 3; j++)
                C[i * 2 + k] = cr_add(t, C[i * 2 + k], cr_mul(t, A[i * 3 + j], B[j * 2 + k]));
        }
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 2; k++) {
                cr_var s = cr_const(0.0);
                for (int j = 0; j < 3; j++)
                    s = cr_add(t, s, cr_mul(t, X[b * 6 + i * 3 + j], Y[b * 6 + j * 2 + k]));
                D[b * 4 + i * 2 + k] = s;
            }
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                cr_var e = cr_const(0.0);
                for (int k = 0; k < 2; k++)
                    e = cr_add(t, e, cr_mul(t, D[b * 4 + i * 2 + k], C[k * 2 + j]));
                y = cr_add(t, y, cr_sin(t, e));
            }
    cr_var tr = cr_add(t, C[0], C[3]);
    y = cr_add(t, y, cr_mul(t, tr, tr));
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            cr_var g = cr_const(0.0);
            for (int b = 0; b < 2; b++)
                for (int j = 0; j < 3; j++)
                    g = cr_add(t, g,
                               cr_mul(t, X[b * 6 + i * 3 + j], cr_sin(t, X[b * 6 + k * 3 + j])));
            y = cr_add(t, y, cr_mul(t, g, C[i * 2 + k]));
        }
    for (int b = 0; b < 2; b++)
        y = cr_add(t, y, cr_exp(t, cr_add(t, D[b * 4], D[b * 4 + 3])));
    out[0] = y;
    return cr_tape_status(t);
}

static void fill_x(double *x, size_t n, double s)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.6 * sin(1.7 * (double)i + s) + 0.1 * (double)(i % 4) - 0.1;
}

static void fd_grad(double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], h = 1e-6 * fmax(1.0, fabs(xi));
        x[i] = xi + h;
        double fp = ein_c(x, n);
        x[i] = xi - h;
        double fm = ein_c(x, n);
        x[i] = xi;
        g[i] = (fp - fm) / (2 * h);
    }
}

/* The gradient of the objective on tape t at x (reset first). */
static void tape_grad(cr_tape *t, const double *x, double *g, double *y)
{
    cr_tape_reset(t);
    cr_array xa = cr_array_vector((double *)x, N), ga = cr_array_vector(g, N);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var v = ein_t(t, X);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, v, NULL, 0, NULL, &X, 1, &gp));
    if (y != NULL)
        *y = v.v;
}

static void test_gradient(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    for (int round = 0; round < 3; round++) {
        double x[N], g[N], gs[N], want[N], y, ys;
        fill_x(x, N, 0.5 * round);
        tape_grad(t, x, g, &y);
        assert_close(y, ein_c(x, N), 1e-13);
        assert_ok(u, cr_tape_value_and_gradient(u, ein_s, NULL, x, N, &ys, gs));
        assert_close(y, ys, 1e-13);
        fd_grad(x, N, want);
        for (size_t i = 0; i < N; i++) {
            assert_close(g[i], want[i], 1e-6);
            assert_close(g[i], gs[i], 1e-12);
        }
    }
    cr_tape_free(u);
    cr_tape_free(t);
}

static void direction(double *v)
{
    for (size_t i = 0; i < N; i++)
        v[i] = cos(0.83 * (double)i) + 0.15;
}

static void test_jvp(void **state)
{
    fixture *f = *state;
    double x[N], v[N], xp[N], xm[N], yd, h = 1e-6;
    fill_x(x, N, 0.3);
    direction(v);
    cr_tape_params pf = {.flags = CR_TAPE_FORWARD};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &pf, &t), CR_OK);
    cr_array xa = cr_array_vector(x, N), va = cr_array_vector(v, N);
    const cr_array *vp = &va;
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = ein_t(t, X);
    assert_ok(t, cr_tape_ajvp(t, NULL, NULL, 0, &X, &vp, 1, &y, 1, &yd, NULL, 0, NULL));
    for (size_t i = 0; i < N; i++) {
        xp[i] = x[i] + h * v[i];
        xm[i] = x[i] - h * v[i];
    }
    assert_close(yd, (ein_c(xp, N) - ein_c(xm, N)) / (2 * h), 1e-6);
    cr_tape_free(t);
}

/* H v against central differences, along v, of the first-order gradient. */
static void check_hv(cr_tape *u, const double *x, const double *v, const double *hv)
{
    double xp[N], xm[N], gp[N], gm[N], h = 1e-5;
    for (size_t i = 0; i < N; i++) {
        xp[i] = x[i] + h * v[i];
        xm[i] = x[i] - h * v[i];
    }
    tape_grad(u, xp, gp, NULL);
    tape_grad(u, xm, gm, NULL);
    for (size_t i = 0; i < N; i++)
        assert_close(hv[i], (gp[i] - gm[i]) / (2 * h), 1e-5);
}

static void test_hvp(void **state)
{
    fixture *f = *state;
    double x[N], v[N], hv[N];
    fill_x(x, N, 0.9);
    direction(v);
    cr_tape_params p2 = {.flags = CR_TAPE_SECOND_ORDER};
    cr_tape *s, *u;
    assert_int_equal(cr_tape_new(f->ctx, &p2, &s), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    cr_array xa = cr_array_vector(x, N), va = cr_array_vector(v, N), ha = cr_array_vector(hv, N);
    const cr_array *vp = &va;
    cr_array *hp = &ha;
    cr_avar X = cr_tape_array_input(s, &xa);
    cr_var y = ein_t(s, X);
    assert_ok(s, cr_tape_ahvp(s, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp));
    check_hv(u, x, v, hv);
    cr_tape_free(u);
    cr_tape_free(s);
}

static void test_prepared(void **state)
{
    fixture *f = *state;
    double x[N], g[N], want[N], v[N], hv[N], y;
    fill_x(x, N, 0.2);
    direction(v);
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N), va = cr_array_vector(v, N),
             ha = cr_array_vector(hv, N);
    const cr_array *xs[1] = {&xa}, *vs[1] = {&va};
    cr_array *gs[1] = {&ga}, *hs[1] = {&ha};
    cr_prepared *p, *q;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, ein_arr, NULL, xs, 1, &p), CR_OK);
    assert_int_equal(cr_prepare_hvp_arrays(f->ctx, NULL, ein_arr, NULL, xs, 1, &q), CR_OK);
    cr_tape *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    for (int round = 0; round < 3; round++) {
        fill_x(x, N, 1.0 + round);
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
        assert_close(y, ein_c(x, N), 1e-13);
        fd_grad(x, N, want);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], want[i], 1e-6);
        assert_int_equal(cr_prepared_hvp_arrays(q, xs, 1, vs, hs, &y, gs), CR_OK);
        assert_close(y, ein_c(x, N), 1e-13);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], want[i], 1e-6);
        check_hv(u, x, v, hv);
    }
    cr_tape_free(u);
    cr_prepared_free(q);
    cr_prepared_free(p);
}

/* ---- One variable as both operands: A Aᵀ, from packed scalars ---------------------------- */

/* y = Σ sin(A Aᵀ) with A the 3 x 3 matrix of x (row-major). */
static double gram_c(const double *x, size_t n)
{
    (void)n;
    double y = 0;
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            double g = 0;
            for (int j = 0; j < 3; j++)
                g += x[i * 3 + j] * x[k * 3 + j];
            y += sin(g);
        }
    return y;
}

static cr_status gram_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    const int64_t shape[2] = {3, 3};
    cr_avar A = cr_av_pack(t, x, n, shape, 2);
    cr_avar G = cr_av_einsum(t, "ij,kj->ik", A, A);
    y[0] = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(G)));
    return cr_tape_status(t);
}

/* The multilinear class with the same variable in both places: gradient and H v (a
 * second-order tape) against finite differences. */
static void test_same_operand(void **state)
{
    fixture *f = *state;
    enum { M = 9 };
    double x[M], g[M], v[M], hv[M], y;
    for (size_t i = 0; i < M; i++) {
        x[i] = 0.5 * sin(2.1 * (double)i + 0.4);
        v[i] = cos(1.3 * (double)i) + 0.2;
    }
    cr_tape_params p2 = {.flags = CR_TAPE_SECOND_ORDER};
    cr_tape *s, *u;
    assert_int_equal(cr_tape_new(f->ctx, &p2, &s), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    assert_ok(u, cr_tape_value_and_gradient(u, gram_t, NULL, x, M, &y, g));
    assert_close(y, gram_c(x, M), 1e-14);
    for (size_t i = 0; i < M; i++) {
        double xi = x[i], h = 1e-6;
        x[i] = xi + h;
        double fp = gram_c(x, M);
        x[i] = xi - h;
        double fm = gram_c(x, M);
        x[i] = xi;
        assert_close(g[i], (fp - fm) / (2 * h), 1e-6);
    }
    cr_var xs[M], yv;
    assert_ok(s, cr_tape_inputs(s, x, M, xs));
    assert_ok(s, gram_t(s, xs, M, &yv, 1, NULL));
    assert_ok(s, cr_tape_hvp(s, yv, xs, M, v, hv, NULL));
    assert_hvp_by_gradients(u, gram_t, x, v, M, hv);
    cr_tape_free(u);
    cr_tape_free(s);
}

/* ---- Errors ------------------------------------------------------------------------------ */

static void expect_fail(fixture *f, cr_tape *t, cr_status st, const char *msg)
{
    assert_int_equal(cr_tape_status(t), st);
    assert_contains(cr_tape_errmsg(t), msg);
    assert_contains(cr_ctx_errmsg(f->ctx), msg);
    cr_tape_reset(t);
}

static void test_errors(void **state)
{
    fixture *f = *state;
    double x[18];
    fill_x(x, 18, 0.0);
    size_t s23[2] = {2, 3}, s32[2] = {3, 2}, s322[3] = {3, 2, 2}, s332[3] = {3, 3, 2};
    cr_array a, b, c3, e3;
    assert_int_equal(cr_array_view_init(&a, x, CR_DT_F64, 2, s23, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&b, x, CR_DT_F64, 2, s32, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&c3, x, CR_DT_F64, 3, s322, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&e3, x, CR_DT_F64, 3, s332, NULL), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    /* A is 2 x 3, B 3 x 2: each spec fails with its status, naming the spec and the place. */
    struct {
        const char *spec;
        cr_status st;
        const char *msg;
    } bad[] = {
        {"ij,jk-ik", CR_EINVAL,
         "einsum: spec \"ij,jk-ik\": '-' at position 5 is not an index letter (a-z, A-Z), ',' "
         "or \"->\""},
        {"ij,jk->i k", CR_EINVAL, "' ' at position 8 is not an index letter"},
        {"ij,jk->i\tk", CR_EINVAL, "byte 0x09 at position 8 is not an index letter"},
        {"ij,jk,kl->il", CR_EINVAL, "',' at position 5 starts a third operand (at most 2)"},
        {"ij,jk->ik->i", CR_EINVAL, "a second \"->\" at position 9"},
        {"ij,jk->i,k", CR_EINVAL, "',' at position 8 is in the output"},
        {"ij,jk->iz", CR_EINVAL, "output index 'z' at position 8 is in no operand"},
        {"ij->ji", CR_EINVAL, "einsum: spec \"ij->ji\" has 1 operand, 2 given"},
        {"ijk,jk->i", CR_ESHAPE, "operand 0 has 2 dimensions but 3 indices"},
        {"ij,ij->", CR_ESHAPE,
         "index 'i' has extent 2 in operand 0 (dimension 0) and 3 in operand 1 (dimension 0)"},
        {"abcdefghi,ab->", CR_EINVAL, "'i' at position 8 gives operand 0 more than 8 indices"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cr_avar A = cr_tape_array_input(t, &a), B = cr_tape_array_input(t, &b);
        assert_null(cr_av_einsum(t, bad[k].spec, A, B).a);
        expect_fail(f, t, bad[k].st, bad[k].msg);
    }
    cr_avar A = cr_tape_array_input(t, &a);
    assert_null(cr_av_einsum(t, NULL, A, A).a);
    expect_fail(f, t, CR_EINVAL, "cr_av_einsum: spec is NULL");
    A = cr_tape_array_input(t, &a);
    assert_null(cr_av_einsum1(t, "ij,jk->ik", A).a);
    expect_fail(f, t, CR_EINVAL, "has 2 operands, 1 given");
    A = cr_tape_array_input(t, &a);
    assert_null(cr_av_bmm(t, A, cr_tape_array_input(t, &c3)).a);
    expect_fail(f, t, CR_ESHAPE,
                "cr_av_bmm: expected two 3-d arrays (batch x rows x cols), got "
                "2-d and 3-d");
    assert_null(cr_av_bmm(t, cr_tape_array_input(t, &c3), cr_tape_array_input(t, &e3)).a);
    expect_fail(f, t, CR_ESHAPE,
                "index 'j' has extent 2 in operand 0 (dimension 2) and 3 in "
                "operand 1 (dimension 1)");
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gradient, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_jvp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hvp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prepared, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_same_operand, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
