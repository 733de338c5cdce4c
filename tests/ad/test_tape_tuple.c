/*
 * Tests of array functions with tuple results on the reverse tape (cr_tape_acall_n): the sum
 * of the singular values (svd), the largest eigenvalue of a symmetric matrix (eigen), the
 * reconstruction Q R of a QR factorization and R alone, the value of findmax, the factors
 * of lu, log|det| from logabsdet; each gradient against central differences of the same
 * function computed with the library's primals (or in plain C). Unused tuple elements give
 * zero cotangents; integer elements are constants. Errors: a tuple through cr_tape_acall,
 * the wrong number of results, a factorization on a second-order tape. Forward sweeps and
 * second order through tuple results: the group tuple_jvp_hvp below.
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"
#include "test_noform.h"
#include "test_polar.h"
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
    return cr_av_sum(t, usv[1].u.a);
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
    cr_var su = cr_av_sum(t, usv[0].u.a), ss = cr_av_sum(t, usv[1].u.a);
    cr_var sv = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, usv[2]));
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
    cr_targ c = cr_targ_arr(cr_av_matmul(t, B, Bt)), vv[2];
    if (cr_tape_acall_n(t, &cr_fn_eigen, &c, 1, vv, 2) != CR_OK)
        return cr_const((double)NAN);
    /* The last (largest) eigenvalue: a dot product with a unit vector (a constant). */
    static double e[3] = {0, 0, 1};
    static cr_array ea;
    ea = cr_array_vector(e, 3);
    return cr_av_dot(t, vv[0].u.a, cr_av_const(&ea));
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
    cr_avar QR = cr_av_matmul(t, qr[0].u.a, qr[1].u.a);
    return cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(QR)));
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
    return cr_av_sum(t, qr[1].u.a);
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
    cr_var l2 = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, lup[0]));
    return cr_add(t, l2, cr_av_sum(t, lup[1].u.a));
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
    return cr_add(t, cr_mul(t, mi[0].u.s, mi[0].u.s), cr_av_sum(t, X));
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
    cr_targ c = cr_targ_arr(cr_av_const(&A));
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_qr, &c, 1, out, 2), CR_OK);
    assert_true(out[0].kind == CR_TARG_ARR && out[0].u.a.idx == CR_VAR_CONST);
    assert_true(out[1].kind == CR_TARG_ARR && out[1].u.a.idx == CR_VAR_CONST);
    /* The scalar sweeps run over tuple records: d/ds of findmax(s .* A)'s value. */
    cr_var s = cr_tape_input(t, 0.5);
    cr_targ sa = cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), c)), mi[2];
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
    sa = cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), c));
    assert_ok(t, cr_tape_acall_n(t, &cr_fn_findmax, &sa, 1, mi, 2));
    assert_ok(t, cr_tape_gradient(t, mi[0].u.s, &s, 1, &gs));
    assert_true(gs == 7.0);
    double one = 1.0, yd;
    assert_ok(t, cr_tape_jvp(t, &s, &one, 1, &mi[0].u.s, 1, &yd));
    assert_true(yd == 7.0);
    cr_tape_free(t);
}

static int run_tuple_reverse(void)
{
    const struct CMUnitTest tuple_reverse[] = {
        cmocka_unit_test_setup_teardown(test_svd, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigen, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_qr, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lu_logabsdet, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_findmax, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tuple_reverse, NULL, NULL);
}

/*
 * Tuple results (cr_tape_acall_n) in forward sweeps and on second-order tapes.
 *
 * Forward: on a CR_TAPE_FORWARD tape, cr_tape_ajvp through svd, eigen, qr, lu, findmax,
 * findmin, extrema (with and without dims) and logabsdet, each composed with other
 * functions so that every kind of tuple element (scalar, array, integer) is used, against
 * central differences of the value the same program computes on a first-order tape.
 *
 * Second order: H v (cr_tape_ahvp) through findmax, findmin and extrema (piecewise linear,
 * their scalar and array elements feeding nonlinear functions) and logabsdet (positive and
 * negative determinants, its sign used too) and eigen (of a Symmetric view and of a dense
 * matrix, values and vectors used), and the full Hessian (cr_tape_hessian) of a
 * function of two scalars through logabsdet and extrema, against central differences of
 * the gradient of a first-order tape. The other factorizations stay refused on second-order
 * tapes (test_hvp_array_forms*.c).
 *
 * Sweeps seeded at the first result of a record of several (a tuple rule's pullback, extrema's
 * scalar results): cr_tape_jacobian, cr_tape_gradient, cr_tape_vjp, cr_tape_jvp and
 * cr_tape_hvp take that record whole, against central differences.
 */

static cr_var sum_mul(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(b)));
}

/* f(a) with a tuple of n results (out), or of f(a, dims). */
static void tuple_of(cr_tape *t, const cr_value *f, cr_targ a, cr_targ dims, size_t nargs,
                     cr_targ *out, size_t n)
{
    cr_targ args[2] = {a, dims};
    if (cr_tape_acall_n(t, f, args, nargs, out, n) != CR_OK)
        for (size_t k = 0; k < n; k++)
            out[k] = cr_targ_var(cr_const((double)NAN));
}

/* ---- Forward sweeps (check_jvp: test_prob.h) ---------------------------------------------- */

/* A 3 x 2: sum(U) sum(S) + sum(V .^ 2) + sum(sin.(S)), all of svd's elements used */
static cr_var svd_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ usv[3];
    tuple_of(t, &cr_fn_svd, cr_targ_arr(X[0]), i64(0), 1, usv, 3);
    cr_var a = cr_mul(t, cr_av_sum(t, usv[0].u.a), cr_av_sum(t, usv[1].u.a));
    return cr_add(t, cr_add(t, a, sum_sq(t, usv[2].u.a)), sum_sin(t, usv[1].u.a));
}

/* B 3 x 4, C = B Bᵀ: sum(vals .* w) + sum(vecs .^ 4) (a sign-free use of the vectors) */
static double k_w3[3] = {1.0, -0.5, 2.0};

static cr_var eigen_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static cr_array w3;
    w3 = cr_array_vector(k_w3, 3);
    cr_avar Bt = call_a(t, &cr_fn_transpose, cr_targ_arr(X[0]), i64(0), 1);
    cr_avar C = cr_av_matmul(t, X[0], Bt);
    cr_targ ev[2];
    tuple_of(t, &cr_fn_eigen, cr_targ_arr(C), i64(0), 1, ev, 2);
    cr_avar sq = cr_av_broadcast1(t, &cr_fn_square, ev[1]);
    return cr_add(t, sum_mul(t, ev[0].u.a, cr_av_const(&w3)), sum_sq(t, sq));
}

/* A 4 x 3: sum(R) sum(Q .* Q .* Q) + sum(sin.(R)) */
static cr_var qr_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ qr[2];
    tuple_of(t, &cr_fn_qr, cr_targ_arr(X[0]), i64(0), 1, qr, 2);
    cr_avar q2 = cr_av_broadcast1(t, &cr_fn_square, qr[0]);
    cr_var q3 = sum_mul(t, q2, qr[0].u.a);
    return cr_add(t, cr_mul(t, cr_av_sum(t, qr[1].u.a), q3), sum_sin(t, qr[1].u.a));
}

/* A 3 x 3: sum(L .^ 2) sum(U); the pivots are a constant */
static cr_var lu_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ lup[3];
    tuple_of(t, &cr_fn_lu, cr_targ_arr(X[0]), i64(0), 1, lup, 3);
    assert_int_equal(lup[2].kind, CR_TARG_VALUE);
    return cr_mul(t, sum_sq(t, lup[0].u.a), cr_av_sum(t, lup[1].u.a));
}

static void test_forward_factorizations(void **state)
{
    fixture *f = *state;
    prob svd = {.f = svd_p, .na = 1, .ndim = {2}, .shape = {{3, 2}}};
    prob eig = {.f = eigen_p, .na = 1, .ndim = {2}, .shape = {{3, 4}}};
    prob qr = {.f = qr_p, .na = 1, .ndim = {2}, .shape = {{4, 3}}};
    prob lu = {.f = lu_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 2; seed++) {
        double z[12];
        point(12, seed, 1.0, z);
        z[0] += 1.5; /* away from repeated singular values and pivots */
        z[4] -= 1.0;
        check_jvp(f->ctx, &svd, z, 1e-6, 3);
        check_jvp(f->ctx, &eig, z, 1e-6, 3);
        check_jvp(f->ctx, &qr, z, 1e-6, 3);
        check_jvp(f->ctx, &lu, z, 1e-6, 3);
    }
}

/* ---- findmax, findmin, extrema ------------------------------------------------------------ */

/* A 2 x 3, u of 5, s:
 *   s m² (m, i = findmax(u)) + sum(sin.(findmin(A, 0)[1])) + s lo hi (lo, hi = extrema(u))
 *   + sum(lo2 .* hi2) (lo2, hi2 = extrema(A, 1)) + sum(square.(findmax(A, 1)[1])) */
static cr_var ext_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ A = cr_targ_arr(X[0]), u = cr_targ_arr(X[1]), r[2];
    tuple_of(t, &cr_fn_findmax, u, i64(0), 1, r, 2);
    assert_int_equal(r[0].kind, CR_TARG_VAR);
    assert_int_equal(r[1].kind, CR_TARG_VALUE);
    cr_var a = cr_mul(t, s[0], cr_mul(t, r[0].u.s, r[0].u.s));
    tuple_of(t, &cr_fn_findmin, A, i64(0), 2, r, 2);
    assert_int_equal(r[0].kind, CR_TARG_ARR);
    cr_var b = sum_sin(t, r[0].u.a);
    tuple_of(t, &cr_fn_extrema, u, i64(0), 1, r, 2);
    cr_var c = cr_mul(t, s[0], cr_mul(t, r[0].u.s, r[1].u.s));
    tuple_of(t, &cr_fn_extrema, A, i64(1), 2, r, 2);
    assert_int_equal(r[1].kind, CR_TARG_ARR);
    cr_var d = sum_mul(t, r[0].u.a, r[1].u.a);
    tuple_of(t, &cr_fn_findmax, A, i64(1), 2, r, 2);
    cr_var e = sum_sq(t, r[0].u.a);
    return cr_add(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), e);
}

static void test_extrema(void **state)
{
    fixture *f = *state;
    prob p = {.f = ext_p, .ns = 1, .na = 2, .ndim = {2, 1}, .shape = {{2, 3}, {5}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[12];
        point(12, seed, 1.4, z);
        check_jvp(f->ctx, &p, z, 1e-6, 3);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
}

/* ---- logabsdet ------------------------------------------------------------------------------ */

/* A 3 x 3, s: sin(l) + s l² + sign · l + l sum(A .^ 2), (l, sign) = logabsdet(A) */
static cr_var lad_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_targ r[2];
    tuple_of(t, &cr_fn_logabsdet, cr_targ_arr(X[0]), i64(0), 1, r, 2);
    assert_int_equal(r[0].kind, CR_TARG_VAR);
    assert_int_equal(r[1].kind, CR_TARG_VAR);
    cr_var l = r[0].u.s;
    cr_var a = cr_add(t, cr_sin(t, l), cr_mul(t, s[0], cr_mul(t, l, l)));
    cr_var b = cr_add(t, cr_mul(t, r[1].u.s, l), cr_mul(t, l, sum_sq(t, X[0])));
    return cr_add(t, a, b);
}

static void test_logabsdet(void **state)
{
    fixture *f = *state;
    prob p = {.f = lad_p, .ns = 1, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    /* det > 0 and det < 0 (rows 1 and 2 swapped) */
    double zp[10] = {0.7, 2.0, 0.3, -0.5, 0.4, 1.5, 0.6, -0.2, 0.8, 1.9};
    double zn[10] = {0.7, 0.4, 1.5, 0.6, 2.0, 0.3, -0.5, -0.2, 0.8, 1.9};
    check_jvp(f->ctx, &p, zp, 1e-6, 3);
    check_jvp(f->ctx, &p, zn, 1e-6, 3);
    check_hvp_dirs(f->ctx, &p, zp, 1e-6, 4);
    check_hvp_dirs(f->ctx, &p, zn, 1e-6, 4);
}

/* ---- eigen on second-order tapes ------------------------------------------------------------ */

/* B 3 x 3: sum(λ .* w) + sum(V .^ 4) + λ₃ sum(V[:, 1] ...) through eigen of Symmetric(B) (env
 * NULL) or of B itself (its upper triangle read); V enters sign-free. */
static cr_var eig2_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    static cr_array w3;
    w3 = cr_array_vector(k_w3, 3);
    cr_targ A = cr_targ_arr(X[0]);
    if (env == NULL)
        A = cr_targ_arr(call_a(t, &cr_fn_symmetric, A, A, 1));
    cr_targ ev[2];
    tuple_of(t, &cr_fn_eigen, A, i64(0), 1, ev, 2);
    cr_avar sq = cr_av_broadcast1(t, &cr_fn_square, ev[1]);
    cr_var a = sum_mul(t, ev[0].u.a, cr_av_const(&w3));
    cr_var b = sum_sq(t, sq);
    cr_var c = cr_mul(t, sum_sin(t, ev[0].u.a), sum_mul(t, sq, cr_av_const(&w3)));
    return cr_add(t, cr_add(t, a, b), c);
}

static void test_eigen2(void **state)
{
    fixture *f = *state;
    static const int dense = 1;
    prob p = {.f = eig2_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    prob q = {.f = eig2_p, .env = &dense, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[9];
        point(9, seed, 1.0, z);
        z[0] += 2.0; /* eigenvalues apart */
        z[8] -= 2.0;
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        check_hvp_dirs(f->ctx, &q, z, 1e-6, 4);
    }
}

/* ---- Full Hessian of two scalars ------------------------------------------------------------ */

/* A = [x 1 0; 2 y 1; 0 1 x y] (built as x E1 + y E2 + x y E3 + C), then
 *   l² + lo hi,  (l, _) = logabsdet(A),  (lo, hi) = extrema(A) */
static double k_E1[9] = {1, 0, 0, 0, 0, 0, 0, 0, 0}, k_E2[9] = {0, 0, 0, 0, 1, 0, 0, 0, 0},
              k_E3[9] = {0, 0, 0, 0, 0, 0, 0, 0, 1}, k_C[9] = {0, 1, 0, 2, 0, 1, 0, 1, 0};

static cr_var two_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array e1, e2, e3, c;
    e1 = cr_array_matrix(k_E1, 3, 3);
    e2 = cr_array_matrix(k_E2, 3, 3);
    e3 = cr_array_matrix(k_E3, 3, 3);
    c = cr_array_matrix(k_C, 3, 3);
    cr_targ x = cr_targ_var(s[0]), y = cr_targ_var(s[1]), xy = cr_targ_var(cr_mul(t, s[0], s[1]));
    cr_avar A = cr_av_broadcast2(t, &cr_fn_mul, x, cr_targ_arr(cr_av_const(&e1)));
    A = cr_av_broadcast2(
        t, &cr_fn_add, cr_targ_arr(A),
        cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, y, cr_targ_arr(cr_av_const(&e2)))));
    A = cr_av_broadcast2(
        t, &cr_fn_add, cr_targ_arr(A),
        cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, xy, cr_targ_arr(cr_av_const(&e3)))));
    A = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(A), cr_targ_arr(cr_av_const(&c)));
    cr_targ r[2];
    tuple_of(t, &cr_fn_logabsdet, cr_targ_arr(A), i64(0), 1, r, 2);
    cr_var l = r[0].u.s;
    tuple_of(t, &cr_fn_extrema, cr_targ_arr(A), i64(0), 1, r, 2);
    return cr_add(t, cr_mul(t, l, l), cr_mul(t, r[0].u.s, r[1].u.s));
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = two_p, .ns = 2, .na = 0};
    double pts[3][2] = {{1.3, 2.4}, {-0.7, 1.9}, {2.6, -0.4}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* ---- A sweep seeded at the first result of a record of several (tests/ad/test_tape_random.c) --
 */

static const double k_o4[4] = {-2, -1, 1, 2};
static const double k_c4[4] = {1.0 / 12, -8.0 / 12, 8.0 / 12, -1.0 / 12};

/* A sweep seeded at the first result of a record of several results (a tuple rule kept as a
 * pullback) covers that whole record: cr_tape_jacobian used to clear the workspace only up to
 * the seeded variable, so the record read the previous row's adjoint of its second result
 * (seed 0xb37952b853eedcd7: the row of r came out -1.0446 instead of -1.0569), and
 * cr_tape_gradient / cr_tape_vjp read an adjoint past the end of their workspace. */
static void test_tuple_first_result(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    static const cr_argspec f64_2[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &polar_fn,
                       .nargs = 2,
                       .args = f64_2,
                       .rrule = polar_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_FORWARD, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_value polar = cr_value_function(&polar_fn, NULL);
    cr_var x = cr_tape_input(t, 0.7), rt[2];
    cr_var args[2] = {x, cr_add(t, cr_const(0.5), cr_mul(t, x, x))};
    assert_int_equal(cr_tape_call(t, &polar, args, 2, rt, 2), CR_OK);
    cr_var z = cr_mul(t, rt[1], cr_const(3.0)); /* theta's adjoint is 3 in the first row */
    /* r = sqrt(x^2 + (0.5 + x^2)^2), theta = atan2(0.5 + x^2, x): central differences */
    double h = 1e-4, dr = 0, dth = 0;
    for (int k = 0; k < 4; k++) {
        double xv = 0.7 + k_o4[k] * h, q = 0.5 + xv * xv;
        dr += k_c4[k] * sqrt(xv * xv + q * q) / h;
        dth += k_c4[k] * atan2(q, xv) / h;
    }
    cr_var ys[3] = {z, rt[0], rt[1]};
    double J[3];
    assert_int_equal(cr_tape_jacobian(t, ys, 3, &x, 1, J), CR_OK);
    assert_close(J[0], 3 * dth, 1e-9);
    assert_close(J[1], dr, 1e-9);
    assert_close(J[2], dth, 1e-9);
    double g;
    assert_int_equal(cr_tape_gradient(t, z, &x, 1, &g), CR_OK);
    assert_int_equal(cr_tape_gradient(t, rt[0], &x, 1, &g), CR_OK);
    assert_close(g, dr, 1e-9);
    double seed = 2.0;
    assert_int_equal(cr_tape_vjp(t, &rt[0], &seed, 1, &x, 1, &g), CR_OK);
    assert_close(g, 2 * dr, 1e-9);
    double v = 1.0, jv;
    assert_int_equal(cr_tape_jvp(t, &x, &v, 1, &rt[0], 1, &jv), CR_OK);
    assert_close(jv, dr, 1e-9);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* A rule kept as a pullback whose cotangent for a constant argument is NotImplemented
 * (gamma_inc's order a): the forward sweep read that cotangent when it built the record's
 * Jacobian, so cr_tape_jvp on a forward tape (and frule_via_ad, which records on one) failed
 * with CR_EUNIMPL where the reverse sweep, which skips constants, succeeded. */
static void test_forward_constant_notimplemented(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_FORWARD};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    const double a = 1.7, x0 = 0.8;
    cr_var x = cr_tape_input(t, x0), pq[2];
    cr_var args[2] = {cr_const(a), cr_add(t, cr_const(0.5), cr_mul(t, x, x))};
    assert_int_equal(cr_tape_call(t, &cr_fn_gamma_inc, args, 2, pq, 2), CR_OK);
    /* P and Q of a and 0.5 + x^2: central differences */
    double h = 1e-4, dp = 0, dq = 0;
    for (int k = 0; k < 4; k++) {
        double xv = x0 + k_o4[k] * h, p, q;
        cr_sf_gamma_inc(a, 0.5 + xv * xv, &p, &q);
        dp += k_c4[k] * p / h;
        dq += k_c4[k] * q / h;
    }
    double v = 1.0, jv[2], J[2];
    assert_int_equal(cr_tape_jvp(t, &x, &v, 1, pq, 2, jv), CR_OK);
    assert_close(jv[0], dp, 1e-8);
    assert_close(jv[1], dq, 1e-8);
    assert_int_equal(cr_tape_jacobian(t, pq, 2, &x, 1, J), CR_OK);
    assert_close(J[0], jv[0], 1e-14);
    assert_close(J[1], jv[1], 1e-14);
    /* with a tangent on the order itself the derivative is still not implemented */
    cr_tape_reset(t);
    cr_var av = cr_tape_input(t, a);
    args[0] = av;
    args[1] = cr_const(0.5 + x0 * x0);
    assert_int_equal(cr_tape_call(t, &cr_fn_gamma_inc, args, 2, pq, 2), CR_OK);
    assert_int_equal(cr_tape_jvp(t, &av, &v, 1, pq, 2, jv), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(f->ctx), "gamma_inc");
    cr_tape_free(t);
}

/* The same on a second-order tape: H v of the first scalar result of an array function with a
 * tuple result (lo of extrema, whose record makes lo and hi) skipped that record, and gave 0. */
static void test_tuple_first_result_hvp(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double xv[2] = {0.3, -0.8};
    cr_var x[2];
    assert_int_equal(cr_tape_inputs(t, xv, 2, x), CR_OK);
    double cd[3] = {1.0, 2.0, -1.5};
    cr_array C = cr_array_vector(cd, 3);
    /* u = sin.(C .* x0) .* x1; (lo, hi) = extrema(u); y = lo^2 */
    cr_avar U = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(cr_av_const(&C)), cr_targ_var(x[0]));
    U = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(U));
    U = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(U), cr_targ_var(x[1]));
    cr_targ u = cr_targ_arr(U), r[2];
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_extrema, &u, 1, r, 2), CR_OK);
    assert_int_equal(r[0].kind, CR_TARG_VAR);
    cr_var lo = r[0].u.s;
    /* lo = min_i sin(c_i x0) x1: at this point the element c = 2 (sin 0.6 * -0.8 = -0.45) */
    double v[2] = {0.4, -1.1}, hv[2], gr[2];
    assert_int_equal(cr_tape_hvp(t, lo, x, 2, v, hv, gr), CR_OK);
    /* central differences of lo in plain C (smooth near the point: one element is the least) */
    double want_g[2], want_hv[2], hh = 1e-3;
    for (int j = 0; j < 2; j++) {
        want_g[j] = 0;
        want_hv[j] = 0;
        for (int k = 0; k < 4; k++) {
            double p[2] = {xv[0], xv[1]};
            p[j] += k_o4[k] * hh;
            double m = INFINITY;
            for (int i = 0; i < 3; i++)
                m = fmin(m, sin(cd[i] * p[0]) * p[1]);
            want_g[j] += k_c4[k] * m / hh;
            for (int l = 0; l < 4; l++) {
                double q[2] = {p[0] + k_o4[l] * hh * v[0], p[1] + k_o4[l] * hh * v[1]};
                double mq = INFINITY;
                for (int i = 0; i < 3; i++)
                    mq = fmin(mq, sin(cd[i] * q[0]) * q[1]);
                want_hv[j] += k_c4[k] * k_c4[l] * mq / (hh * hh);
            }
        }
    }
    assert_close(gr[0], want_g[0], 1e-8);
    assert_close(gr[1], want_g[1], 1e-8);
    assert_close(hv[0], want_hv[0], 1e-5);
    assert_close(hv[1], want_hv[1], 1e-5);
    cr_tape_free(t);
}

static int run_tuple_jvp_hvp(void)
{
    const struct CMUnitTest tuple_jvp_hvp[] = {
        cmocka_unit_test_setup_teardown(test_forward_factorizations, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_extrema, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_logabsdet, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigen2, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tuple_first_result, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_forward_constant_notimplemented, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tuple_first_result_hvp, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tuple_jvp_hvp, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_tuple_reverse();
    failed += run_tuple_jvp_hvp();
    return failed;
}
