/*
 * Tests of array functions with tuple results on the reverse tape (cr_tape_acall_n): the sum
 * of the singular values (svd), the largest eigenvalue of a symmetric matrix (eigen), the
 * reconstruction Q R of a QR factorization and R alone, the value of findmax, the factors
 * of lu, log|det| from logabsdet; each gradient against central differences of the same
 * function computed with the library's primals (or in plain C). Unused tuple elements give
 * zero cotangents; integer elements are constants. Errors: a tuple through cr_tape_acall,
 * the wrong number of results, a factorization on a second-order tape. Forward sweeps and
 * second order through tuple results: test_tape_tuple2.c.
 */
#include <math.h>
#include <stdio.h>

#include "test_noform.h"
#include "test_util.h"

#define FD_RTOL 1e-6

/* A function of a row-major matrix (rows x cols) computed with the library's primals. */
typedef struct plain {
    cr_arena *arena;
    size_t rows, cols;
    double (*fn)(cr_arena *arena, cr_array *A);
} plain;

static cr_status plain_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    plain *p = env;
    cr_array A = cr_array_matrix((double *)(uintptr_t)x, p->rows, p->cols);
    y[0] = p->fn(p->arena, &A);
    return isnan(y[0]) ? CR_EDOMAIN : CR_OK;
}

/* Element k of the tuple f(A), by the library's primal. */
static cr_value primal_elem(cr_arena *arena, const cr_value *f, cr_array *A, size_t k)
{
    cr_value a = cr_value_array(A), y, e;
    e.kind = CR_KIND_NOTHING;
    if (cr_function_call(arena, f, &a, 1, &y) != CR_OK || y.kind != CR_KIND_STRUCT ||
        cr_type_field_value(y.u.obj.type, y.u.obj.ptr, k, &e) != CR_OK)
        e.kind = CR_KIND_NOTHING;
    return e;
}

static double arr_sum(const cr_array *a, int power)
{
    double s = 0;
    for (size_t i = 0; i < cr_array_numel(a); i++) {
        double v = creal(cr_array_get_linear(a, i));
        s += power == 2 ? v * v : v;
    }
    return s;
}

/* Record f on a fresh tape at the matrix a (rows x cols); compare its gradient with central
 * differences of the plain version. */
typedef cr_var (*taped_fn)(cr_tape *t, cr_avar A);

static void check(fixture *f, taped_fn tf, plain *pf, double *a, size_t rows, size_t cols)
{
    size_t n = rows * cols;
    double g[64], fd[64];
    assert_true(n <= 64);
    cr_array A = cr_array_matrix(a, rows, cols), gA = cr_array_matrix(g, rows, cols);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &A);
    cr_var y = tf(t, X);
    assert_ok(t, cr_tape_status(t));
    pf->arena = f->arena;
    pf->rows = rows;
    pf->cols = cols;
    double want;
    assert_int_equal(plain_fd(a, n, &want, 1, pf), CR_OK);
    assert_close(y.v, want, 1e-12);
    cr_array *gp = &gA;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, plain_fd, pf, a, n, 1, f->arena, fd, NULL), CR_OK);
    for (size_t i = 0; i < n; i++)
        assert_close(g[i], fd[i], FD_RTOL);
    cr_tape_free(t);
    cr_arena_reset(f->arena);
}

/* ---- svd: the sum of the singular values; U and V unused ---------------------------------- */

static cr_var nuclear_t(cr_tape *t, cr_avar A)
{
    cr_targ a = cr_targ_arr(A), usv[3];
    if (cr_tape_acall_n(t, &cr_fn_svd, &a, 1, usv, 3) != CR_OK)
        return cr_const((double)NAN);
    assert_int_equal(usv[0].kind, CR_TARG_ARR);
    assert_int_equal(usv[1].kind, CR_TARG_ARR);
    return cr_asum(t, usv[1].u.a);
}

static double nuclear_c(cr_arena *arena, cr_array *A)
{
    cr_value s = primal_elem(arena, &cr_fn_svd, A, 1);
    return s.kind == CR_KIND_ARRAY ? arr_sum(s.u.arr, 1) : (double)NAN;
}

/* sum(U) * sum(S) + sum(V .^ 2): every element of the tuple used */
static cr_var svd_all_t(cr_tape *t, cr_avar A)
{
    cr_targ a = cr_targ_arr(A), usv[3];
    if (cr_tape_acall_n(t, &cr_fn_svd, &a, 1, usv, 3) != CR_OK)
        return cr_const((double)NAN);
    cr_var su = cr_asum(t, usv[0].u.a), ss = cr_asum(t, usv[1].u.a);
    cr_var sv = cr_asum(t, cr_abroadcast1(t, &cr_fn_square, usv[2]));
    return cr_add(t, cr_mul(t, su, ss), sv);
}

static double svd_all_c(cr_arena *arena, cr_array *A)
{
    cr_value u = primal_elem(arena, &cr_fn_svd, A, 0), s = primal_elem(arena, &cr_fn_svd, A, 1),
             v = primal_elem(arena, &cr_fn_svd, A, 2);
    if (u.kind != CR_KIND_ARRAY || s.kind != CR_KIND_ARRAY || v.kind != CR_KIND_ARRAY)
        return NAN;
    return arr_sum(u.u.arr, 1) * arr_sum(s.u.arr, 1) + arr_sum(v.u.arr, 2);
}

static void test_svd(void **state)
{
    fixture *f = *state;
    double a[12];
    for (size_t i = 0; i < 12; i++)
        a[i] = sin(1.7 * (double)i + 0.3) + (i % 4 == 0 ? 2.0 : 0.0);
    plain p = {.fn = nuclear_c};
    check(f, nuclear_t, &p, a, 4, 3);
    check(f, nuclear_t, &p, a, 3, 4);
    plain q = {.fn = svd_all_c};
    check(f, svd_all_t, &q, a, 4, 3);
}

/* ---- eigen of a symmetric matrix: the largest eigenvalue of B Bᵀ ---------------------------- */

static cr_var lmax_t(cr_tape *t, cr_avar B)
{
    cr_targ bt = cr_targ_arr(B);
    cr_avar Bt = cr_tape_acall_a(t, &cr_fn_transpose, &bt, 1);
    cr_targ c = cr_targ_arr(cr_amatmul(t, B, Bt)), vv[2];
    if (cr_tape_acall_n(t, &cr_fn_eigen, &c, 1, vv, 2) != CR_OK)
        return cr_const((double)NAN);
    /* The last (largest) eigenvalue: a dot product with a unit vector (a constant). */
    static double e[3] = {0, 0, 1};
    static cr_array ea;
    ea = cr_array_vector(e, 3);
    return cr_adot(t, vv[0].u.a, cr_aconst(&ea));
}

static double lmax_c(cr_arena *arena, cr_array *B)
{
    double c[9];
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            c[i * 3 + j] = 0;
            for (size_t k = 0; k < B->shape[1]; k++)
                c[i * 3 + j] += creal(cr_array_get_linear(B, i * B->shape[1] + k)) *
                                creal(cr_array_get_linear(B, j * B->shape[1] + k));
        }
    cr_array C = cr_array_matrix(c, 3, 3);
    cr_value w = primal_elem(arena, &cr_fn_eigen, &C, 0);
    return w.kind == CR_KIND_ARRAY ? creal(cr_array_get_linear(w.u.arr, 2)) : (double)NAN;
}

static void test_eigen(void **state)
{
    fixture *f = *state;
    double b[12];
    for (size_t i = 0; i < 12; i++)
        b[i] = cos(0.9 * (double)i) + 0.1 * (double)i;
    plain p = {.fn = lmax_c};
    check(f, lmax_t, &p, b, 3, 4);
}

/* ---- qr: sum((Q R) .^ 2) = |A|², and sum(R) alone (Q unused) --------------------------------- */

static cr_var qr_rec_t(cr_tape *t, cr_avar A)
{
    cr_targ a = cr_targ_arr(A), qr[2];
    if (cr_tape_acall_n(t, &cr_fn_qr, &a, 1, qr, 2) != CR_OK)
        return cr_const((double)NAN);
    cr_avar QR = cr_amatmul(t, qr[0].u.a, qr[1].u.a);
    return cr_asum(t, cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(QR)));
}

static double sumsq_c(cr_arena *arena, cr_array *A)
{
    (void)arena;
    return arr_sum(A, 2);
}

static cr_var qr_r_t(cr_tape *t, cr_avar A)
{
    cr_targ a = cr_targ_arr(A), qr[2];
    if (cr_tape_acall_n(t, &cr_fn_qr, &a, 1, qr, 2) != CR_OK)
        return cr_const((double)NAN);
    return cr_asum(t, qr[1].u.a);
}

static double qr_r_c(cr_arena *arena, cr_array *A)
{
    cr_value r = primal_elem(arena, &cr_fn_qr, A, 1);
    return r.kind == CR_KIND_ARRAY ? arr_sum(r.u.arr, 1) : (double)NAN;
}

static void test_qr(void **state)
{
    fixture *f = *state;
    double a[12];
    for (size_t i = 0; i < 12; i++)
        a[i] = sin(0.6 * (double)i + 1.0) + (i % 4 == 0 ? 1.5 : 0.0);
    plain p = {.fn = sumsq_c}, q = {.fn = qr_r_c};
    check(f, qr_rec_t, &p, a, 4, 3);
    check(f, qr_r_t, &q, a, 4, 3);
}

/* ---- lu: sum(L .^ 2) + sum(U); the pivots are a constant ----------------------------------- */

static cr_var lu_t(cr_tape *t, cr_avar A)
{
    cr_targ a = cr_targ_arr(A), lup[3];
    if (cr_tape_acall_n(t, &cr_fn_lu, &a, 1, lup, 3) != CR_OK)
        return cr_const((double)NAN);
    assert_int_equal(lup[2].kind, CR_TARG_VALUE);
    assert_int_equal(lup[2].u.v.kind, CR_KIND_ARRAY);
    cr_var l2 = cr_asum(t, cr_abroadcast1(t, &cr_fn_square, lup[0]));
    return cr_add(t, l2, cr_asum(t, lup[1].u.a));
}

static double lu_c(cr_arena *arena, cr_array *A)
{
    cr_value l = primal_elem(arena, &cr_fn_lu, A, 0), u = primal_elem(arena, &cr_fn_lu, A, 1);
    if (l.kind != CR_KIND_ARRAY || u.kind != CR_KIND_ARRAY)
        return NAN;
    return arr_sum(l.u.arr, 2) + arr_sum(u.u.arr, 1);
}

/* log|det A| from logabsdet (the sign unused) */
static cr_var lad_t(cr_tape *t, cr_avar A)
{
    cr_targ a = cr_targ_arr(A), ls[2];
    if (cr_tape_acall_n(t, &cr_fn_logabsdet, &a, 1, ls, 2) != CR_OK)
        return cr_const((double)NAN);
    assert_int_equal(ls[1].kind, CR_TARG_VAR);
    return ls[0].u.s;
}

static double lad_c(cr_arena *arena, cr_array *A)
{
    (void)arena;
    const double *m = A->data;
    return log(fabs(m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                    m[2] * (m[3] * m[7] - m[4] * m[6])));
}

static void test_lu_logabsdet(void **state)
{
    fixture *f = *state;
    double a[9] = {0.5, 2.0, -1.0, 3.0, 0.2, 0.7, -0.4, 1.1, 2.5};
    plain p = {.fn = lu_c}, q = {.fn = lad_c};
    check(f, lu_t, &p, a, 3, 3);
    check(f, lad_t, &q, a, 3, 3);
}

/* ---- findmax: the value (a scalar element), the index an integer constant ------------------ */

static cr_var fmax_t(cr_tape *t, cr_avar X)
{
    cr_targ a = cr_targ_arr(X), mi[2];
    if (cr_tape_acall_n(t, &cr_fn_findmax, &a, 1, mi, 2) != CR_OK)
        return cr_const((double)NAN);
    assert_int_equal(mi[0].kind, CR_TARG_VAR);
    assert_int_equal(mi[1].kind, CR_TARG_VALUE);
    assert_int_equal(mi[1].u.v.kind, CR_KIND_I64);
    assert_int_equal(mi[1].u.v.u.i64, 4);
    return cr_add(t, cr_mul(t, mi[0].u.s, mi[0].u.s), cr_asum(t, X));
}

static double fmax_c(cr_arena *arena, cr_array *A)
{
    (void)arena;
    double m = -INFINITY, s = 0;
    for (size_t i = 0; i < cr_array_numel(A); i++) {
        double v = creal(cr_array_get_linear(A, i));
        m = v > m ? v : m;
        s += v;
    }
    return m * m + s;
}

static void test_findmax(void **state)
{
    fixture *f = *state;
    double x[6] = {0.3, -1.0, 0.8, 0.1, 1.7, -0.2};
    plain p = {.fn = fmax_c};
    check(f, fmax_t, &p, x, 2, 3);
}

/* ---- Errors, constants, the scalar sweeps ------------------------------------------------- */

static void test_errors(void **state)
{
    fixture *f = *state;
    double a[6] = {1, 2, 3, 4, 5, 7};
    cr_array A = cr_array_matrix(a, 3, 2);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &A);
    cr_targ x = cr_targ_arr(X), out[3];
    /* A tuple through cr_tape_acall: its one result cannot hold it. */
    assert_int_equal(cr_tape_acall(t, &cr_fn_svd, &x, 1, out), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "svd returns a tuple of 3 elements, 1 result expected");
    assert_contains(cr_tape_errmsg(t), "cr_tape_acall_n");
    assert_true(out[0].kind == CR_TARG_VAR && isnan(out[0].u.s.v));
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &A);
    x = cr_targ_arr(X);
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_qr, &x, 1, out, 3), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "qr returns a tuple of 2 elements, 3 results expected");
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &A);
    x = cr_targ_arr(X);
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_sum, &x, 1, out, 2), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "sum returns one value, 2 results expected");
    cr_tape_reset(t);
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_sum, &x, 1, out, 0), CR_EINVAL);
    cr_tape_reset(t);
    /* nout = 1 for a function with one result, as cr_tape_acall; all-constant arguments
     * give constants (nothing recorded). */
    X = cr_tape_array_input(t, &A);
    x = cr_targ_arr(X);
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_sum, &x, 1, out, 1), CR_OK);
    assert_true(out[0].kind == CR_TARG_VAR && out[0].u.s.v == 22.0);
    cr_targ c = cr_targ_arr(cr_aconst(&A));
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_qr, &c, 1, out, 2), CR_OK);
    assert_true(out[0].kind == CR_TARG_ARR && out[0].u.a.idx == CR_VAR_CONST);
    assert_true(out[1].kind == CR_TARG_ARR && out[1].u.a.idx == CR_VAR_CONST);
    /* The scalar sweeps run over tuple records: d/ds of findmax(s .* A)'s value. */
    cr_var s = cr_tape_input(t, 0.5);
    cr_targ sa = cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s), c)), mi[2];
    assert_ok(t, cr_tape_acall_n(t, &cr_fn_findmax, &sa, 1, mi, 2));
    double gs;
    assert_ok(t, cr_tape_gradient(t, mi[0].u.s, &s, 1, &gs));
    assert_true(gs == 7.0);
    cr_tape_free(t);
    /* A second-order tape refuses tuple results without a second-order form (a user rule
     * kept as its pullback: halves, test_noform.h). */
    cr_engine *eng = noform_engine(f->ctx);
    cr_tape_params tp = {.flags = CR_TAPE_SECOND_ORDER, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    X = cr_tape_array_input(t, &A);
    x = cr_targ_arr(X);
    cr_value halves = cr_value_function(&halves_fn, NULL);
    assert_int_equal(cr_tape_acall_n(t, &halves, &x, 1, out, 2), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "halves: no second-order form on the tape");
    cr_tape_free(t);
    cr_engine_free(eng);
    tp.engine = NULL;
    /* A forward tape records them: the reverse sweep and a forward sweep (the frule's tuple
     * tangent, given to the elements) both give d/ds = 7, the largest element of A. */
    tp.flags = CR_TAPE_FORWARD;
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    s = cr_tape_input(t, 0.5);
    sa = cr_targ_arr(cr_abroadcast2(t, &cr_fn_mul, cr_targ_var(s), c));
    assert_ok(t, cr_tape_acall_n(t, &cr_fn_findmax, &sa, 1, mi, 2));
    assert_ok(t, cr_tape_gradient(t, mi[0].u.s, &s, 1, &gs));
    assert_true(gs == 7.0);
    double one = 1.0, yd;
    assert_ok(t, cr_tape_jvp(t, &s, &one, 1, &mi[0].u.s, 1, &yd));
    assert_true(yd == 7.0);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_svd, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigen, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_qr, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lu_logabsdet, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_findmax, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
