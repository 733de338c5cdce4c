/*
 * Tests of matmul with a band operand (Tridiagonal, SymTridiagonal, Bidiagonal upper and
 * lower), which reads the band only: for each structure, on either side, with a matrix or a
 * vector as the other operand, f64 and c128 entries, orders 1, 2, 3 and 6, and the band or
 * the other operand given as a transposed (column-major) view,
 * - the rule tester (frule and rrule against finite differences, and their consistency);
 * - the primal, both cotangents and the tangent against matmul of the dense equivalent
 *   written out here from the storage convention (the band operand's cotangent against the
 *   dense one projected onto its structure), with a tangent of the band operand that carries
 *   its tag and with an untagged dense one;
 * - an f32 band operand against its dense equivalent; two band operands; order 0.
 * The storage off the band holds values that must not be read.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

static const cr_matstruct k_bands[] = {CR_MAT_TRIDIAGONAL, CR_MAT_SYMTRIDIAGONAL,
                                       CR_MAT_BIDIAG_UPPER, CR_MAT_BIDIAG_LOWER};
#define NBANDS (sizeof k_bands / sizeof k_bands[0])

static void expect_pass(fixture *fx, cr_status st, const cr_test_report *r, const char *what)
{
    if (st != CR_OK || r->verdict == CR_VERDICT_FAIL) {
        char buf[1200];
        cr_test_report_format(r, buf, sizeof buf);
        print_error("%s: %s (%s; %s)\n", what, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
        fail();
    }
}

static void check_point(fixture *fx, const cr_value *args, const char *what)
{
    cr_test_report r;
    expect_pass(fx, cr_test_frule(fx->arena, NULL, &cr_fn_matmul, args, 2, &r), &r, what);
    expect_pass(fx, cr_test_rrule(fx->arena, NULL, &cr_fn_matmul, args, 2, &r), &r, what);
    expect_pass(fx, cr_test_consistency(fx->arena, NULL, &cr_fn_matmul, args, 2, &r), &r, what);
}

/* A rows x cols array of dtype dt filled from a seed, stored row-major or (colmajor) as the
 * transposed view of column-major memory. */
static cr_array *filled(fixture *fx, cr_dtype dt, size_t ndim, size_t rows, size_t cols,
                        unsigned seed, bool colmajor)
{
    size_t shape[2] = {rows, cols}, n = rows * cols;
    cr_array *a;
    assert_int_equal(cr_array_new(fx->arena, dt, ndim, shape, &a), CR_OK);
    for (size_t k = 0; k < n; k++) {
        double re = sin(1.3 * (double)k + 0.7 * (double)seed + 0.2);
        double im = cos(0.9 * (double)k + 1.1 * (double)seed);
        if (dt == CR_DT_C128)
            ((cr_complex *)a->data)[k] = CMPLX(re, im);
        else if (dt == CR_DT_F32)
            ((float *)a->data)[k] = (float)re;
        else
            ((double *)a->data)[k] = re;
    }
    if (colmajor && ndim == 2) {
        a->strides[0] = 1;
        a->strides[1] = (ptrdiff_t)rows;
    }
    return a;
}

/* The logical value of a as a new dense row-major array of dtype dt. */
static cr_array *dense_of(fixture *fx, const cr_array *a, cr_dtype dt)
{
    cr_array *d;
    assert_int_equal(cr_array_new(fx->arena, dt, a->ndim, a->shape, &d), CR_OK);
    for (size_t k = 0; k < cr_array_numel(a); k++) {
        cr_complex v = cr_array_get_linear(a, k);
        if (dt == CR_DT_C128)
            ((cr_complex *)d->data)[k] = v;
        else if (dt == CR_DT_F32)
            ((float *)d->data)[k] = (float)creal(v);
        else
            ((double *)d->data)[k] = creal(v);
    }
    return d;
}

/* Two tangents (arrays, possibly thunks) have the same logical elements. */
static void expect_same(cr_tangent a, cr_tangent b, double tol, const char *what, const char *part)
{
    assert_int_equal(cr_tangent_unthunk(a, &a), CR_OK);
    assert_int_equal(cr_tangent_unthunk(b, &b), CR_OK);
    assert_int_equal(a.tag, CR_TAN_ARRAY);
    assert_int_equal(b.tag, CR_TAN_ARRAY);
    size_t n = cr_array_numel(a.u.arr);
    assert_int_equal(n, cr_array_numel(b.u.arr));
    assert_int_equal(a.u.arr->structure, b.u.arr->structure);
    for (size_t k = 0; k < n; k++) {
        cr_complex x = cr_array_get_linear(a.u.arr, k), y = cr_array_get_linear(b.u.arr, k);
        if (!(cabs(x - y) <= tol * (1 + cabs(y)))) {
            print_error("%s: %s element %zu: %g%+gi, dense %g%+gi\n", what, part, k, creal(x),
                        cimag(x), creal(y), cimag(y));
            fail();
        }
    }
}

/* matmul(args) with args[ib] a band matrix against matmul with its dense equivalent D
 * there: the primal; the cotangents for a cotangent dY (the band operand's against the dense
 * one projected onto its structure); the tangent for a tangent of the band operand tagged
 * with its structure, and for an untagged dense one. */
static void same_as_dense(fixture *fx, cr_value *args, size_t ib, cr_array *D, double tol,
                          const char *what)
{
    cr_value dargs[2] = {args[0], args[1]};
    dargs[ib] = cr_value_array(D);
    cr_value ys, yd;
    cr_pullback ps, pd;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, args, 2, &ys, &ps), CR_OK);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, dargs, 2, &yd, &pd), CR_OK);
    expect_same(cr_tangent_array(ys.u.arr), cr_tangent_array(yd.u.arr), tol, what, "primal");
    if (ys.u.arr->dtype == CR_DT_F32)
        return;
    const cr_array *Y = ys.u.arr;
    cr_array *G = filled(fx, (cr_dtype)Y->dtype, Y->ndim, Y->shape[0],
                         Y->ndim == 2 ? Y->shape[1] : 1, 11, false);
    cr_tangent dy = cr_tangent_array(G), xs[3], xd[3];
    assert_int_equal(cr_pullback_call(fx->arena, &ps, &dy, xs, 3), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pd, &dy, xd, 3), CR_OK);
    cr_project *p;
    assert_int_equal(cr_project_new(fx->arena, &args[ib], &p), CR_OK);
    cr_tangent proj;
    assert_int_equal(cr_project_apply(fx->arena, p, xd[1 + ib], &proj), CR_OK);
    expect_same(xs[1 + ib], proj, tol, what, "band cotangent");
    expect_same(xs[2 - ib], xd[2 - ib], tol, what, "other cotangent");

    /* Tangents: the band operand's tagged with its structure (storage off the band filled),
     * then untagged and dense; the other operand's dense. */
    const cr_array *A = args[ib].u.arr, *O = args[1 - ib].u.arr;
    for (int tagged = 0; tagged < 2; tagged++) {
        cr_array *tb = filled(fx, (cr_dtype)A->dtype, 2, A->shape[0], A->shape[1], 5, false);
        if (tagged)
            tb->structure = A->structure;
        cr_array *to = filled(fx, (cr_dtype)O->dtype, O->ndim, O->shape[0],
                              O->ndim == 2 ? O->shape[1] : 1, 7, false);
        cr_tangent ts[3] = {cr_tangent_none()}, td[3] = {cr_tangent_none()};
        ts[1 + ib] = cr_tangent_array(tb);
        ts[2 - ib] = cr_tangent_array(to);
        td[1 + ib] = cr_tangent_array(tagged ? dense_of(fx, tb, (cr_dtype)tb->dtype) : tb);
        td[2 - ib] = ts[2 - ib];
        cr_value y1, y2;
        cr_tangent e1, e2;
        assert_int_equal(cr_frule(NULL, fx->arena, ts, &cr_fn_matmul, args, 2, &y1, &e1), CR_OK);
        assert_int_equal(cr_frule(NULL, fx->arena, td, &cr_fn_matmul, dargs, 2, &y2, &e2), CR_OK);
        expect_same(e1, e2, tol, what, tagged ? "tangent (band-tagged)" : "tangent (dense)");
        /* Only the band operand perturbed. */
        ts[2 - ib] = cr_tangent_zero();
        td[2 - ib] = cr_tangent_zero();
        assert_int_equal(cr_frule(NULL, fx->arena, ts, &cr_fn_matmul, args, 2, &y1, &e1), CR_OK);
        assert_int_equal(cr_frule(NULL, fx->arena, td, &cr_fn_matmul, dargs, 2, &y2, &e2), CR_OK);
        expect_same(e1, e2, tol, what, "tangent of the band operand alone");
    }
}

static void test_band_products(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    static const size_t k_orders[] = {1, 2, 3, 6};
    for (size_t t = 0; t < NBANDS; t++)
        for (int c = 0; c < 2; c++)
            for (size_t o = 0; o < sizeof k_orders / sizeof k_orders[0]; o++)
                for (int view = 0; view < 4; view++) {
                    cr_dtype dt = c ? CR_DT_C128 : CR_DT_F64;
                    size_t n = k_orders[o], p = 2;
                    bool tb = view & 1, to = view & 2;
                    cr_array *A = filled(fx, dt, 2, n, n, (unsigned)(t + 3 * o), tb);
                    A->structure = (uint8_t)k_bands[t];
                    cr_array *D = dense_of(fx, A, dt);
                    cr_array *M = filled(fx, dt, 2, n, p, 2, to),
                             *L = filled(fx, dt, 2, p, n, 4, to);
                    cr_array *v = filled(fx, dt, 1, n, 1, 6, false);
                    cr_value a = cr_value_array(A);
                    cr_value cases[4][2] = {{a, cr_value_array(M)},
                                            {a, cr_value_array(v)},
                                            {cr_value_array(L), a},
                                            {cr_value_array(v), a}};
                    for (size_t k = 0; k < 4; k++) {
                        char what[128];
                        snprintf(what, sizeof what, "%s %s n=%zu %s%s%s",
                                 cr_matstruct_name(k_bands[t]), cr_dtype_name(dt), n,
                                 k == 0   ? "T X"
                                 : k == 1 ? "T v"
                                 : k == 2 ? "X T"
                                          : "v' T",
                                 tb ? ", band transposed view" : "",
                                 to && (k == 0 || k == 2) ? ", other transposed view" : "");
                        size_t ib = k < 2 ? 0 : 1;
                        same_as_dense(fx, cases[k], ib, D, 1e-12, what);
                        if (n != 3 || view == 3 || view == 0)
                            check_point(fx, cases[k], what);
                    }
                    cr_arena_reset(fx->arena);
                }
}

/* An f32 band operand: the primal of f32 against the dense f32 equivalent. */
static void test_band_f32(void **state)
{
    fixture *fx = *state;
    for (size_t t = 0; t < NBANDS; t++) {
        cr_array *A = filled(fx, CR_DT_F32, 2, 5, 5, (unsigned)t, t % 2 == 1);
        A->structure = (uint8_t)k_bands[t];
        cr_array *D = dense_of(fx, A, CR_DT_F32);
        cr_array *M = filled(fx, CR_DT_F32, 2, 5, 3, 2, false),
                 *L = filled(fx, CR_DT_F32, 2, 3, 5, 4, false);
        cr_value m1[2] = {cr_value_array(A), cr_value_array(M)};
        cr_value m2[2] = {cr_value_array(L), cr_value_array(A)};
        same_as_dense(fx, m1, 0, D, 1e-6, cr_matstruct_name(k_bands[t]));
        same_as_dense(fx, m2, 1, D, 1e-6, cr_matstruct_name(k_bands[t]));
        cr_value y;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_matmul, m1, 2, &y), CR_OK);
        assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    }
}

/* Two band operands (the left read as a band, the right densified), and order 0. */
static void test_band_pairs(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    for (size_t t = 0; t < NBANDS; t++)
        for (int c = 0; c < 2; c++) {
            cr_dtype dt = c ? CR_DT_C128 : CR_DT_F64;
            cr_array *A = filled(fx, dt, 2, 4, 4, (unsigned)t, false);
            cr_array *B = filled(fx, dt, 2, 4, 4, (unsigned)t + 9, c == 1);
            A->structure = (uint8_t)k_bands[t];
            B->structure = (uint8_t)k_bands[(t + 1) % NBANDS];
            cr_value ab[2] = {cr_value_array(A), cr_value_array(B)};
            char what[96];
            snprintf(what, sizeof what, "%s times %s %s", cr_matstruct_name(k_bands[t]),
                     cr_matstruct_name(k_bands[(t + 1) % NBANDS]), cr_dtype_name(dt));
            check_point(fx, ab, what);
            same_as_dense(fx, ab, 0, dense_of(fx, A, dt), 1e-12, what);
            same_as_dense(fx, ab, 1, dense_of(fx, B, dt), 1e-12, what);

            size_t s0[2] = {0, 0}, s1[2] = {0, 3};
            cr_array *Z, *X;
            assert_int_equal(cr_array_new(fx->arena, dt, 2, s0, &Z), CR_OK);
            assert_int_equal(cr_array_new(fx->arena, dt, 2, s1, &X), CR_OK);
            Z->structure = (uint8_t)k_bands[t];
            cr_value zx[2] = {cr_value_array(Z), cr_value_array(X)}, y;
            assert_int_equal(cr_function_call(fx->arena, &cr_fn_matmul, zx, 2, &y), CR_OK);
            assert_int_equal(y.u.arr->shape[0], 0);
            assert_int_equal(y.u.arr->shape[1], 3);
            cr_pullback pb;
            assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, zx, 2, &y, &pb), CR_OK);
        }
}

/* A large band product against the product written out here (O(n) per column). */
static void test_band_large(void **state)
{
    fixture *fx = *state;
    enum { N = 500 };
    cr_array *A = filled(fx, CR_DT_F64, 2, N, N, 1, false);
    A->structure = CR_MAT_TRIDIAGONAL;
    cr_array *x = filled(fx, CR_DT_F64, 1, N, 1, 2, false);
    cr_value args[2] = {cr_value_array(A), cr_value_array(x)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_matmul, args, 2, &y), CR_OK);
    const double *a = A->data, *xv = x->data;
    for (size_t i = 0; i < N; i++) {
        double want = a[i * N + i] * xv[i];
        if (i > 0)
            want += a[i * N + i - 1] * xv[i - 1];
        if (i + 1 < N)
            want += a[i * N + i + 1] * xv[i + 1];
        assert_true(fabs(creal(cr_array_get_linear(y.u.arr, i)) - want) < 1e-13);
    }
}

/* Bytes of arena that matmul(T, X)'s rrule, its pullback and T's cotangent unthunked take,
 * T an n x n band of structure st, X n x 2; *cot the cotangent. */
static size_t band_cot_bytes(fixture *fx, cr_matstruct st, size_t n, cr_tangent *cot)
{
    cr_arena_reset(fx->arena);
    cr_array *A = filled(fx, CR_DT_F64, 2, n, n, 3, false);
    A->structure = (uint8_t)st;
    cr_array *X = filled(fx, CR_DT_F64, 2, n, 2, 5, false);
    cr_array *G = filled(fx, CR_DT_F64, 2, n, 2, 7, false);
    cr_value args[2] = {cr_value_array(A), cr_value_array(X)}, y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_array(G), dx[3];
    size_t before = cr_arena_used(fx->arena);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, args, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[1], cot), CR_OK);
    return cr_arena_used(fx->arena) - before;
}

/* The band operand's cotangent takes O(n) memory: from n = 100 to 400 its rule's arena bytes
 * grow about 4 times, not 16 (the n x n cotangent and its projection took 2 n² doubles:
 * 2.6 MB at n = 400). */
static void test_band_cotangent_linear(void **state)
{
    fixture *fx = *state;
    for (size_t t = 0; t < NBANDS; t++) {
        cr_tangent c;
        size_t b100 = band_cot_bytes(fx, k_bands[t], 100, &c);
        size_t b400 = band_cot_bytes(fx, k_bands[t], 400, &c);
        if (b400 > 5 * b100 || b400 > 400 * 400 * sizeof(double))
            print_error("%s: %zu bytes at n = 100, %zu at n = 400\n", cr_matstruct_name(k_bands[t]),
                        b100, b400);
        assert_true(b400 <= 5 * b100);
        assert_true(b400 < 400 * 400 * sizeof(double));
        assert_int_equal(c.tag, CR_TAN_ARRAY);
        assert_int_equal(c.u.arr->structure, k_bands[t]);
    }
}

/* The band cotangent, whose storage holds the band only, in the tangent algebra: x + x, x + a
 * band tangent stored n x n, a dense array plus x, 2x, add!! into it (out of place: it is
 * not an inplaceable destination) and add!! of it into a dense buffer (in place), its copy
 * and its projection: every logical element against the cotangent's own. */
static void test_band_cotangent_algebra(void **state)
{
    fixture *fx = *state;
    enum { N = 7 };
    for (size_t t = 0; t < NBANDS; t++) {
        cr_tangent c;
        cr_arena_reset(fx->arena);
        cr_array *A = filled(fx, CR_DT_F64, 2, N, N, 3, false);
        A->structure = (uint8_t)k_bands[t];
        cr_array *X = filled(fx, CR_DT_F64, 2, N, 2, 5, false);
        cr_array *G = filled(fx, CR_DT_F64, 2, N, 2, 7, false);
        cr_value args[2] = {cr_value_array(A), cr_value_array(X)}, y;
        cr_pullback pb;
        cr_tangent dy = cr_tangent_array(G), dx[3];
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_matmul, args, 2, &y, &pb), CR_OK);
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
        assert_int_equal(cr_tangent_unthunk(dx[1], &c), CR_OK);
        const cr_array *ca = c.u.arr;
        double v[N * N];
        for (size_t k = 0; k < N * N; k++)
            v[k] = creal(cr_array_get_linear(ca, k));
        /* the logical value: zero off the band, symmetric for SymTridiagonal */
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < N; j++) {
                if (i > j + 1 || j > i + 1)
                    assert_true(v[i * N + j] == 0);
                if (k_bands[t] == CR_MAT_SYMTRIDIAGONAL)
                    assert_true(v[i * N + j] == v[j * N + i]);
            }
        assert_false(cr_tangent_is_inplaceable_destination(c));
        cr_array *B = dense_of(fx, ca, CR_DT_F64); /* the same values stored n x n */
        B->structure = (uint8_t)k_bands[t];
        cr_array *Dn = filled(fx, CR_DT_F64, 2, N, N, 9, false); /* dense, untagged */
        cr_array *Dc;
        assert_int_equal(cr_array_copy(fx->arena, Dn, &Dc), CR_OK);
        cr_tangent r[7];
        assert_int_equal(cr_tangent_add(fx->arena, c, c, &r[0]), CR_OK);
        assert_int_equal(cr_tangent_add(fx->arena, c, cr_tangent_array(B), &r[1]), CR_OK);
        assert_int_equal(cr_tangent_add(fx->arena, cr_tangent_array(Dn), c, &r[2]), CR_OK);
        assert_int_equal(cr_tangent_scale(fx->arena, 2.0, c, &r[3]), CR_OK);
        assert_int_equal(cr_tangent_accum(fx->arena, c, cr_tangent_array(B), &r[4]), CR_OK);
        assert_true(r[4].u.arr != ca);
        assert_int_equal(cr_tangent_accum(fx->arena, cr_tangent_array(Dc), c, &r[5]), CR_OK);
        cr_array *cp;
        assert_int_equal(cr_array_copy(fx->arena, ca, &cp), CR_OK);
        r[6] = cr_tangent_array(cp);
        for (size_t k = 0; k < N * N; k++) {
            double d = ((const double *)Dn->data)[k];
            double want[7] = {2 * v[k], 2 * v[k], d + v[k], 2 * v[k], 2 * v[k], d + v[k], v[k]};
            for (int q = 0; q < 7; q++)
                assert_true(fabs(creal(cr_array_get_linear(r[q].u.arr, k)) - want[q]) <= 1e-14);
        }
        /* the cotangent itself unchanged by all of that */
        for (size_t k = 0; k < N * N; k++)
            assert_true(creal(cr_array_get_linear(ca, k)) == v[k]);
        /* projected onto T: itself */
        cr_project *p;
        cr_tangent pr;
        assert_int_equal(cr_project_new(fx->arena, &args[0], &p), CR_OK);
        assert_int_equal(cr_project_apply(fx->arena, p, c, &pr), CR_OK);
        for (size_t k = 0; k < N * N; k++)
            assert_true(creal(cr_array_get_linear(pr.u.arr, k)) == v[k]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_band_products, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_band_f32, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_band_pairs, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_band_large, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_band_cotangent_linear, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_band_cotangent_algebra, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
