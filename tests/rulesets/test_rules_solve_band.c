/*
 * solve(A, B) and rdiv(B, A) = B / A with a Diagonal or band A (Tridiagonal, SymTridiagonal,
 * Bidiagonal upper and lower), whose cotangent is formed on what A reads only and whose
 * frule reads a band tangent of A on its band: the rrule, the pullback and Ā, and the frule
 * with a tangent of A's structure, take arena bytes linear in n (n = 100 against n = 400);
 * the frule, the rrule and their consistency against finite differences (the rule tester,
 * whose tangents of A have A's structure) for f64 and c128 A, a real A with a complex B, B a
 * vector or a matrix, orders 1, 2, 3 and 6, with huge values stored off the band that must
 * not be read; the frule with the same tangent untagged (dense, read whole) agrees; a
 * singular Bidiagonal gives CR_EDOMAIN.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

static const cr_matstruct k_structs[] = {CR_MAT_TRIDIAGONAL, CR_MAT_SYMTRIDIAGONAL,
                                         CR_MAT_BIDIAG_UPPER, CR_MAT_BIDIAG_LOWER, CR_MAT_DIAGONAL};
#define NSTRUCTS (sizeof k_structs / sizeof k_structs[0])

static void expect_pass(fixture *fx, cr_status st, const cr_test_report *r, const char *what)
{
    if (st != CR_OK || r->verdict != CR_VERDICT_PASS) {
        char buf[1200];
        cr_test_report_format(r, buf, sizeof buf);
        print_error("%s: %s (%s; %s)\n", what, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
        fail();
    }
}

/* An n x n A of structure st and dtype dt: diagonal 3 + small values, the band's other
 * entries of order one, 1e30 stored off the band (a Diagonal stores its n entries only). */
static cr_array *band_matrix(fixture *fx, cr_matstruct st, cr_dtype dt, size_t n, unsigned seed)
{
    cr_array *a;
    if (st == CR_MAT_DIAGONAL) {
        assert_int_equal(cr_array_new(fx->arena, dt, 1, &n, &a), CR_OK);
    } else {
        size_t shape[2] = {n, n};
        assert_int_equal(cr_array_new(fx->arena, dt, 2, shape, &a), CR_OK);
    }
    size_t m = st == CR_MAT_DIAGONAL ? n : n * n;
    for (size_t k = 0; k < m; k++) {
        size_t i = st == CR_MAT_DIAGONAL ? k : k / n, j = st == CR_MAT_DIAGONAL ? k : k % n;
        double re = sin(1.3 * (double)k + 0.7 * (double)seed + 0.2);
        double im = cos(0.9 * (double)k + 1.1 * (double)seed);
        if (i == j)
            re += 3;
        else if (i > j + 1 || j > i + 1)
            re = im = 1e30;
        if (dt == CR_DT_C128)
            ((cr_complex *)a->data)[k] = CMPLX(re, im);
        else
            ((double *)a->data)[k] = re;
    }
    if (st == CR_MAT_DIAGONAL) {
        a->ndim = 2;
        a->shape[1] = n;
        a->strides[0] = 1;
        a->strides[1] = 0;
    }
    a->structure = (uint8_t)st;
    return a;
}

static cr_array *dense(fixture *fx, cr_dtype dt, size_t ndim, size_t rows, size_t cols,
                       unsigned seed)
{
    size_t shape[2] = {rows, cols};
    cr_array *a;
    assert_int_equal(cr_array_new(fx->arena, dt, ndim, shape, &a), CR_OK);
    for (size_t k = 0; k < cr_array_numel(a); k++) {
        double re = sin(0.8 * (double)k + (double)seed), im = cos(1.7 * (double)k + (double)seed);
        if (dt == CR_DT_C128)
            ((cr_complex *)a->data)[k] = CMPLX(re, im);
        else
            ((double *)a->data)[k] = re;
    }
    return a;
}

/* The rule tester on f(A, B) (solve) or f(B, A) (rdiv), every structure, order and dtype pair,
 * B a vector or a 2-column (solve) / 2-row (rdiv) matrix. */
static void fd_all(fixture *fx, const cr_value *f, bool rdiv)
{
    static const size_t orders[4] = {1, 2, 3, 6};
    static const cr_dtype dts[3][2] = {
        {CR_DT_F64, CR_DT_F64}, {CR_DT_C128, CR_DT_C128}, {CR_DT_F64, CR_DT_C128}};
    for (size_t s = 0; s < NSTRUCTS; s++)
        for (size_t o = 0; o < 4; o++)
            for (size_t d = 0; d < 3; d++)
                for (size_t vec = 0; vec < 2; vec++) {
                    size_t n = orders[o];
                    cr_array *A = band_matrix(fx, k_structs[s], dts[d][0], n, 3);
                    cr_array *B = rdiv && !vec ? dense(fx, dts[d][1], 2, 2, n, 5)
                                               : dense(fx, dts[d][1], vec ? 1 : 2, n, 2, 5);
                    cr_value args[2] = {cr_value_array(rdiv ? B : A), cr_value_array(rdiv ? A : B)};
                    char what[120];
                    snprintf(what, sizeof what, "%s %s n = %zu %s/%s %s", rdiv ? "rdiv" : "solve",
                             cr_matstruct_name(k_structs[s]), n, cr_dtype_name(dts[d][0]),
                             cr_dtype_name(dts[d][1]), vec ? "vector" : "matrix");
                    cr_test_report r;
                    expect_pass(fx, cr_test_frule(fx->arena, NULL, f, args, 2, &r), &r, what);
                    expect_pass(fx, cr_test_rrule(fx->arena, NULL, f, args, 2, &r), &r, what);
                    expect_pass(fx, cr_test_consistency(fx->arena, NULL, f, args, 2, &r), &r, what);
                    cr_arena_reset(fx->arena);
                }
}

static void test_against_fd(void **state)
{
    fd_all(*state, &cr_fn_solve, false);
}

static void test_rdiv_against_fd(void **state)
{
    fd_all(*state, &cr_fn_rdiv, true);
}

/* Bytes of arena that the rrule of solve(A, B) (rdiv false) or rdiv(B, A), its pullback and
 * Ā unthunked take, A n x n of structure st, B n x 2 (solve) or 2 x n (rdiv), all made before
 * counting; *cot Ā. */
static size_t pullback_bytes(fixture *fx, bool rdiv, cr_matstruct st, size_t n, cr_tangent *cot)
{
    cr_arena_reset(fx->arena);
    cr_array *A = band_matrix(fx, st, CR_DT_F64, n, 3);
    cr_array *B = dense(fx, CR_DT_F64, 2, rdiv ? 2 : n, rdiv ? n : 2, 5);
    cr_array *G = dense(fx, CR_DT_F64, 2, rdiv ? 2 : n, rdiv ? n : 2, 7);
    cr_value args[2] = {cr_value_array(rdiv ? B : A), cr_value_array(rdiv ? A : B)}, y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_array(G), dx[3];
    size_t before = cr_arena_used(fx->arena);
    assert_int_equal(cr_rrule(NULL, fx->arena, rdiv ? &cr_fn_rdiv : &cr_fn_solve, args, 2, &y, &pb),
                     CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[rdiv ? 2 : 1], cot), CR_OK);
    return cr_arena_used(fx->arena) - before;
}

/* Ā takes O(n) memory, for solve and rdiv: from n = 100 to 400 the rule's arena bytes grow
 * about 4 times, not 16 (the n x n product -B̄ Yᴴ, or -Yᴴ B̄, and its projection took 2 n²
 * doubles: 2.6 MB at n = 400, and a Bidiagonal's triangular solve a dense copy of A). */
static void test_bytes_linear(void **state)
{
    fixture *fx = *state;
    for (int rdiv = 0; rdiv < 2; rdiv++)
        for (size_t t = 0; t < NSTRUCTS; t++) {
            cr_tangent c;
            size_t b100 = pullback_bytes(fx, rdiv, k_structs[t], 100, &c);
            size_t b400 = pullback_bytes(fx, rdiv, k_structs[t], 400, &c);
            if (b400 > 5 * b100 || b400 > 400 * 400 * sizeof(double))
                print_error("%s %s: %zu bytes at n = 100, %zu at n = 400\n",
                            rdiv ? "rdiv" : "solve", cr_matstruct_name(k_structs[t]), b100, b400);
            assert_true(b400 <= 5 * b100);
            assert_true(b400 < 400 * 400 * sizeof(double));
            assert_int_equal(c.tag, CR_TAN_ARRAY);
            assert_int_equal(c.u.arr->structure, k_structs[t]);
        }
}

/* Bytes of arena that the frule of solve(A, B) (rdiv false) or rdiv(B, A) takes, A n x n of
 * structure st with a tangent of the same structure (huge values stored off the band), B n x 2
 * (solve) or 2 x n (rdiv) with a dense tangent; all made before counting. *dy the tangent. */
static size_t frule_bytes(fixture *fx, bool rdiv, cr_matstruct st, size_t n, cr_tangent *dy)
{
    cr_arena_reset(fx->arena);
    cr_array *A = band_matrix(fx, st, CR_DT_F64, n, 3), *dA = band_matrix(fx, st, CR_DT_F64, n, 8);
    cr_array *B = rdiv ? dense(fx, CR_DT_F64, 2, 2, n, 5) : dense(fx, CR_DT_F64, 2, n, 2, 5);
    cr_array *dB = rdiv ? dense(fx, CR_DT_F64, 2, 2, n, 7) : dense(fx, CR_DT_F64, 2, n, 2, 7);
    cr_value args[2] = {cr_value_array(rdiv ? B : A), cr_value_array(rdiv ? A : B)}, y;
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_array(rdiv ? dB : dA),
                           cr_tangent_array(rdiv ? dA : dB)};
    size_t before = cr_arena_used(fx->arena);
    assert_int_equal(
        cr_frule(NULL, fx->arena, dargs, rdiv ? &cr_fn_rdiv : &cr_fn_solve, args, 2, &y, dy),
        CR_OK);
    return cr_arena_used(fx->arena) - before;
}

/* The frules read a band tangent of A on its band: from n = 100 to 400 their arena bytes grow
 * about 4 times, not 16 (Ȧ densified for gemm took n² doubles: 1.28 MB at n = 400). */
static void test_frule_bytes_linear(void **state)
{
    fixture *fx = *state;
    for (int rdiv = 0; rdiv < 2; rdiv++)
        for (size_t t = 0; t < NSTRUCTS; t++) {
            cr_tangent dy;
            size_t b100 = frule_bytes(fx, rdiv, k_structs[t], 100, &dy);
            size_t b400 = frule_bytes(fx, rdiv, k_structs[t], 400, &dy);
            if (b400 > 5 * b100 || b400 > 400 * 400 * sizeof(double))
                print_error("%s frule %s: %zu bytes at n = 100, %zu at n = 400\n",
                            rdiv ? "rdiv" : "solve", cr_matstruct_name(k_structs[t]), b100, b400);
            assert_true(b400 <= 5 * b100);
            assert_true(b400 < 400 * 400 * sizeof(double));
            assert_int_equal(dy.tag, CR_TAN_ARRAY);
        }
}

/* The tangent ẏ of f along (Ȧ, Ḃ) as a dense c128 array (f64 widened). */
static cr_array *frule_dense(fixture *fx, bool rdiv, const cr_value *args, cr_array *dA,
                             cr_array *dB)
{
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_array(rdiv ? dB : dA),
                           cr_tangent_array(rdiv ? dA : dB)},
               dy;
    cr_value y;
    assert_int_equal(
        cr_frule(NULL, fx->arena, dargs, rdiv ? &cr_fn_rdiv : &cr_fn_solve, args, 2, &y, &dy),
        CR_OK);
    assert_int_equal(dy.tag, CR_TAN_ARRAY);
    cr_array *out;
    assert_int_equal(cr_array_copy(fx->arena, dy.u.arr, &out), CR_OK);
    return out;
}

/* The frule with A's tangent of A's structure (read on its band) and with the same logical
 * matrix as an untagged dense array (read whole, through gemm) agree, for every structure,
 * f64 and c128, solve and rdiv. */
static void test_frule_band_equals_dense(void **state)
{
    fixture *fx = *state;
    static const cr_dtype dts[2] = {CR_DT_F64, CR_DT_C128};
    size_t n = 7;
    for (int rdiv = 0; rdiv < 2; rdiv++)
        for (size_t t = 0; t < NSTRUCTS; t++)
            for (size_t d = 0; d < 2; d++) {
                cr_array *A = band_matrix(fx, k_structs[t], dts[d], n, 3);
                cr_array *dA = band_matrix(fx, k_structs[t], dts[d], n, 8), *dAd;
                cr_array *B = rdiv ? dense(fx, dts[d], 2, 2, n, 5) : dense(fx, dts[d], 2, n, 2, 5);
                cr_array *dB = rdiv ? dense(fx, dts[d], 2, 2, n, 7) : dense(fx, dts[d], 2, n, 2, 7);
                size_t shape[2] = {n, n};
                assert_int_equal(cr_array_new(fx->arena, dts[d], 2, shape, &dAd), CR_OK);
                for (size_t k = 0; k < n * n; k++) {
                    cr_complex v = cr_array_get_linear(dA, k);
                    if (dts[d] == CR_DT_C128)
                        ((cr_complex *)dAd->data)[k] = v;
                    else
                        ((double *)dAd->data)[k] = creal(v);
                }
                cr_value args[2] = {cr_value_array(rdiv ? B : A), cr_value_array(rdiv ? A : B)};
                cr_array *yb = frule_dense(fx, rdiv, args, dA, dB);
                cr_array *yd = frule_dense(fx, rdiv, args, dAd, dB);
                assert_int_equal(cr_array_numel(yb), cr_array_numel(yd));
                for (size_t k = 0; k < cr_array_numel(yb); k++) {
                    cr_complex u = cr_array_get_linear(yb, k), v = cr_array_get_linear(yd, k);
                    if (!(cabs(u - v) <= 1e-12 * (1 + cabs(v)))) {
                        print_error("%s %s %s: element %zu %g%+gi against %g%+gi\n",
                                    rdiv ? "rdiv" : "solve", cr_matstruct_name(k_structs[t]),
                                    cr_dtype_name(dts[d]), k, creal(u), cimag(u), creal(v),
                                    cimag(v));
                        fail();
                    }
                }
                cr_arena_reset(fx->arena);
            }
}

/* A Bidiagonal with a zero on its diagonal is singular: CR_EDOMAIN, never a wrong answer. */
static void test_singular(void **state)
{
    fixture *fx = *state;
    for (size_t t = 2; t < NSTRUCTS; t++) {
        cr_array *A = band_matrix(fx, k_structs[t], CR_DT_F64, 4, 3);
        size_t z = k_structs[t] == CR_MAT_DIAGONAL ? 2 : 2 * 4 + 2;
        ((double *)A->data)[z] = 0;
        cr_array *B = dense(fx, CR_DT_F64, 1, 4, 1, 5);
        cr_value args[2] = {cr_value_array(A), cr_value_array(B)}, y;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_solve, args, 2, &y), CR_EDOMAIN);
        assert_contains(cr_ctx_errmsg(fx->ctx), "singular");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_against_fd, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_bytes_linear, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_singular, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rdiv_against_fd, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_frule_bytes_linear, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_frule_band_equals_dense, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
