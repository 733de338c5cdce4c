/*
 * Tests of the mutating array functions (copyto!, setindex!, fill!, sum!, cumsum!,
 * permutedims!, reverse!, circshift!; rules_array.h, src/rulesets/array/mutate.c): every
 * registered rule through the rule tester at its sampler's points; values written out by
 * hand (Julia's semantics); the destination's cotangent (zero where overwritten), the last
 * write winning in setindex!; cr_mutate_frule and cr_mutate_rrule writing over the caller's
 * buffers; errors.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

static void expect_pass(fixture *fx, cr_status st, const cr_test_report *r, const char *what)
{
    if (st != CR_OK || r->verdict == CR_VERDICT_FAIL) {
        char buf[1200];
        cr_test_report_format(r, buf, sizeof buf);
        print_error("%s: %s (%s; %s)\n", what, buf, cr_status_name(st), cr_ctx_errmsg(fx->ctx));
        fail();
    }
}

static void check_point(fixture *fx, const cr_value *f, const cr_value *args, size_t nargs,
                        const char *what)
{
    cr_test_report r;
    expect_pass(fx, cr_test_frule(fx->arena, NULL, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_rrule(fx->arena, NULL, f, args, nargs, &r), &r, what);
    expect_pass(fx, cr_test_consistency(fx->arena, NULL, f, args, nargs, &r), &r, what);
}

static double at(const cr_value *v, size_t i)
{
    assert_int_equal(v->kind, CR_KIND_ARRAY);
    return creal(cr_array_get_linear(v->u.arr, i));
}

static double tan_at(cr_tangent t, size_t i)
{
    assert_int_equal(cr_tangent_unthunk(t, &t), CR_OK);
    if (t.tag == CR_TAN_ZERO)
        return 0;
    assert_int_equal(t.tag, CR_TAN_ARRAY);
    return creal(cr_array_get_linear(t.u.arr, i));
}

static cr_array i64v(int64_t *p, size_t n)
{
    cr_array a;
    assert_int_equal(cr_array_view_init(&a, p, CR_DT_I64, 1, &n, NULL), CR_OK);
    return a;
}

static const char *const k_fns[] = {
    "copyto!", "setindex!", "fill!", "sum!", "cumsum!", "permutedims!", "reverse!", "circshift!",
#if defined(CR_HAVE_LAPACKE)
    "inv!",    "exp!",
#endif
};
#define NFNS (sizeof k_fns / sizeof k_fns[0])

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    bool seen[NFNS] = {false};
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        size_t k = 0;
        while (k < NFNS && strcmp(info.fn->name, k_fns[k]) != 0)
            k++;
        if (k == NFNS)
            continue;
        seen[k] = true;
        assert_non_null(info.test);
        cr_test_opts opts = {0};
        opts.npoints = 30;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        char sig[160];
        cr_signature_str(info.fn->name, info.args, info.nargs, info.variadic, sig, sizeof sig);
        expect_pass(fx, st, &r, sig);
        assert_int_equal(r.nskipped, 0);
        assert_true(r.npoints >= 15);
    }
    for (size_t k = 0; k < NFNS; k++)
        if (!seen[k]) {
            print_error("no rule registered for %s\n", k_fns[k]);
            fail();
        }
}

/* ---- copyto! and setindex!: part of the destination kept ------------------------------------ */

static void test_copyto(void **state)
{
    fixture *fx = *state;
    double d[6] = {1, 2, 3, 4, 5, 6}, s[4] = {-1, -2, -3, -4};
    cr_array D = cr_array_matrix(d, 2, 3), S = cr_array_vector(s, 4);
    cr_value args[2] = {cr_value_array(&D), cr_value_array(&S)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_copyto_bang, args, 2, &y), CR_OK);
    const double want[6] = {-1, -2, -3, -4, 5, 6};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), want[i]);
    ASSERT_DBL(d[0], 1); /* the rule itself writes nothing */
    check_point(fx, &cr_fn_copyto_bang, args, 2, "copyto!");
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_copyto_bang, args, 2, &y, &pb), CR_OK);
    double g[6] = {10, 20, 30, 40, 50, 60};
    cr_array G = cr_array_matrix(g, 2, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    const double dd[6] = {0, 0, 0, 0, 50, 60}, ds[4] = {10, 20, 30, 40};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(tan_at(dx[1], i), dd[i]);
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(tan_at(dx[2], i), ds[i]);
}

static void test_setindex(void **state)
{
    fixture *fx = *state;
    double a[4] = {1, 2, 3, 4}, x[3] = {7, 8, 9};
    int64_t idx[3] = {2, 0, 2}; /* position 2 written twice: 9 wins */
    cr_array A = cr_array_vector(a, 4), X = cr_array_vector(x, 3), Ix = i64v(idx, 3);
    cr_value args[3] = {cr_value_array(&A), cr_value_array(&X), cr_value_array(&Ix)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setindex_bang, args, 3, &y), CR_OK);
    const double want[4] = {8, 2, 9, 4};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(at(&y, i), want[i]);
    check_point(fx, &cr_fn_setindex_bang, args, 3, "setindex! with a repeated index");
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_setindex_bang, args, 3, &y, &pb), CR_OK);
    double g[4] = {10, 20, 30, 40};
    cr_array G = cr_array_vector(g, 4);
    cr_tangent dy = cr_tangent_array(&G), dx[4];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    const double dA[4] = {0, 20, 0, 40}, dX[3] = {0, 10, 30};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(tan_at(dx[1], i), dA[i]);
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(tan_at(dx[2], i), dX[i]);
    /* a number at (1, 2) of a 2 x 3 matrix */
    double m[6] = {0, 0, 0, 0, 0, 0};
    cr_array M = cr_array_matrix(m, 2, 3);
    cr_value margs[4] = {cr_value_array(&M), cr_value_f64(5), cr_value_i64(1), cr_value_i64(2)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setindex_bang, margs, 4, &y), CR_OK);
    ASSERT_DBL(at(&y, 5), 5);
    ASSERT_DBL(at(&y, 2), 0);
    check_point(fx, &cr_fn_setindex_bang, margs, 4, "setindex! of a number");
    /* out of bounds: getindex's check */
    margs[3] = cr_value_i64(3);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setindex_bang, margs, 4, &y), CR_EINVAL);
}

/* ---- The wrappers ---------------------------------------------------------------------------- */

static void test_wrappers(void **state)
{
    fixture *fx = *state;
    double d[6] = {9, 9, 9, 9, 9, 9}, a[6] = {1, 2, 3, 4, 5, 6};
    cr_array D = cr_array_matrix(d, 2, 3), A = cr_array_matrix(a, 2, 3);
    cr_value y;
    /* fill! with an integer: converted to the destination's type */
    cr_value fargs[2] = {cr_value_array(&D), cr_value_i64(3)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_fill_bang, fargs, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F64);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), 3);
    fargs[1] = cr_value_f64(0.5);
    check_point(fx, &cr_fn_fill_bang, fargs, 2, "fill!");
    /* sum! into a 2 x 1 destination: row sums */
    double r[2] = {100, 100};
    cr_array R = cr_array_matrix(r, 2, 1);
    cr_value sargs[2] = {cr_value_array(&R), cr_value_array(&A)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum_bang, sargs, 2, &y), CR_OK);
    ASSERT_DBL(at(&y, 0), 6);
    ASSERT_DBL(at(&y, 1), 15);
    check_point(fx, &cr_fn_sum_bang, sargs, 2, "sum!");
    /* sum! into a destination of A's shape: a copy */
    sargs[0] = cr_value_array(&D);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum_bang, sargs, 2, &y), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), a[i]);
    /* cumsum! along dimension 1 (columns of each row) */
    cr_value cargs[3] = {cr_value_array(&D), cr_value_array(&A), cr_value_i64(1)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_cumsum_bang, cargs, 3, &y), CR_OK);
    const double cs[6] = {1, 3, 6, 4, 9, 15};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), cs[i]);
    check_point(fx, &cr_fn_cumsum_bang, cargs, 3, "cumsum!");
    /* permutedims! into 3 x 2 */
    double t[6] = {0, 0, 0, 0, 0, 0};
    cr_array T = cr_array_matrix(t, 3, 2);
    int64_t perm[2] = {1, 0};
    cr_array P = {0};
    size_t two = 2;
    assert_int_equal(cr_array_view_init(&P, perm, CR_DT_I64, 1, &two, NULL), CR_OK);
    cr_value pargs[3] = {cr_value_array(&T), cr_value_array(&A), cr_value_array(&P)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_permutedims_bang, pargs, 3, &y), CR_OK);
    const double pt[6] = {1, 4, 2, 5, 3, 6};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), pt[i]);
    check_point(fx, &cr_fn_permutedims_bang, pargs, 3, "permutedims!");
    /* reverse!: the input is the destination, so its cotangent is reversed, not zero */
    cr_value rargs[1] = {cr_value_array(&A)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reverse_bang, rargs, 1, &y), CR_OK);
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), a[5 - i]);
    check_point(fx, &cr_fn_reverse_bang, rargs, 1, "reverse!");
    /* circshift! by one column */
    int64_t sh[2] = {0, 1};
    cr_array Sh;
    assert_int_equal(cr_array_view_init(&Sh, sh, CR_DT_I64, 1, &two, NULL), CR_OK);
    cr_value hargs[3] = {cr_value_array(&D), cr_value_array(&A), cr_value_array(&Sh)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_circshift_bang, hargs, 3, &y), CR_OK);
    const double ch[6] = {3, 1, 2, 6, 4, 5};
    for (size_t i = 0; i < 6; i++)
        ASSERT_DBL(at(&y, i), ch[i]);
    check_point(fx, &cr_fn_circshift_bang, hargs, 3, "circshift!");
    /* the destination's cotangent is zero: it was overwritten */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_circshift_bang, hargs, 3, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_array(&A), dx[4];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_true(cr_tangent_is_zero(dx[1]));
    ASSERT_DBL(tan_at(dx[2], 0), 2); /* A[0] moved to position 1 */
}

/* ---- In place ---------------------------------------------------------------------------------
 */

static void test_in_place(void **state)
{
    fixture *fx = *state;
    double d[4] = {1, 2, 3, 4}, dd[4] = {0.1, 0.2, 0.3, 0.4}, s[2] = {-1, -2}, ds[2] = {5, 6};
    cr_array D = cr_array_vector(d, 4), DD = cr_array_vector(dd, 4), S = cr_array_vector(s, 2),
             DS = cr_array_vector(ds, 2);
    cr_value args[2] = {cr_value_array(&D), cr_value_array(&S)};
    cr_tangent dargs[3] = {cr_tangent_zero(), cr_tangent_array(&DD), cr_tangent_array(&DS)};
    assert_int_equal(cr_mutate_frule(NULL, fx->arena, &cr_fn_copyto_bang, args, dargs, 2), CR_OK);
    const double wd[4] = {-1, -2, 3, 4}, wdd[4] = {5, 6, 0.3, 0.4};
    for (size_t i = 0; i < 4; i++) {
        ASSERT_DBL(d[i], wd[i]);
        ASSERT_DBL(dd[i], wdd[i]);
    }
    /* reverse! in place: the result is a view of the input, written safely */
    double v[5] = {1, 2, 3, 4, 5}, dv[5] = {10, 20, 30, 40, 50};
    cr_array V = cr_array_vector(v, 5), DV = cr_array_vector(dv, 5);
    cr_value rargs[1] = {cr_value_array(&V)};
    cr_tangent rd[2] = {cr_tangent_zero(), cr_tangent_array(&DV)};
    assert_int_equal(cr_mutate_frule(NULL, fx->arena, &cr_fn_reverse_bang, rargs, rd, 1), CR_OK);
    for (size_t i = 0; i < 5; i++) {
        ASSERT_DBL(v[i], (double)(5 - i));
        ASSERT_DBL(dv[i], 10.0 * (double)(5 - i));
    }
    /* the rrule in place: the pullback gives the old destination's cotangent */
    double f[3] = {1, 2, 3};
    cr_array F = cr_array_vector(f, 3);
    cr_value fargs[2] = {cr_value_array(&F), cr_value_f64(7)};
    cr_pullback pb;
    assert_int_equal(cr_mutate_rrule(NULL, fx->arena, &cr_fn_fill_bang, fargs, 2, &pb), CR_OK);
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(f[i], 7);
    double g[3] = {1, 2, 4};
    cr_array G = cr_array_vector(g, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_true(cr_tangent_is_zero(dx[1]));
    cr_tangent xb;
    assert_int_equal(cr_tangent_unthunk(dx[2], &xb), CR_OK);
    ASSERT_DBL(xb.u.f64, 7);
    /* not a mutating function, and a tangent that is no buffer */
    cr_value sargs[1] = {cr_value_array(&F)};
    assert_int_equal(cr_mutate_rrule(NULL, fx->arena, &cr_fn_sum, sargs, 1, &pb), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "not a mutating function");
    dargs[1] = cr_tangent_zero();
    assert_int_equal(cr_mutate_frule(NULL, fx->arena, &cr_fn_copyto_bang, args, dargs, 2),
                     CR_ETANGENT);
    /* a structured destination is no plain buffer: refused, nothing written */
    double q[4] = {1, 2, 3, 4};
    cr_array Q = cr_array_matrix(q, 2, 2);
    Q.structure = CR_MAT_UPPER;
    cr_value qargs[2] = {cr_value_array(&Q), cr_value_f64(0)};
    assert_int_equal(cr_mutate_rrule(NULL, fx->arena, &cr_fn_fill_bang, qargs, 2, &pb), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "must be a dense array");
    ASSERT_DBL(q[0], 1);
}

/* inv! in place: A becomes A⁻¹ (checked by the product), and the pullback is inv's */
static void test_inv_exp(void **state)
{
    fixture *fx = *state;
#if !defined(CR_HAVE_LAPACKE)
    (void)fx;
    skip();
#else
    double a[4] = {2, 1, 1, 3}, a0[4] = {2, 1, 1, 3};
    cr_array A = cr_array_matrix(a, 2, 2);
    cr_value args[1] = {cr_value_array(&A)};
    check_point(fx, &cr_fn_inv_bang, args, 1, "inv!");
    check_point(fx, &cr_fn_exp_bang, args, 1, "exp!");
    cr_pullback pb;
    assert_int_equal(cr_mutate_rrule(NULL, fx->arena, &cr_fn_inv_bang, args, 1, &pb), CR_OK);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++)
            ASSERT_CLOSE(a0[2 * i] * a[j] + a0[2 * i + 1] * a[2 + j], i == j ? 1.0 : 0.0, 1e-15);
    /* exp! of a diagonal matrix: the exponentials of its entries */
    double d[4] = {0.5, 0, 0, -1}, dd[4] = {1, 0, 0, 1};
    cr_array D = cr_array_matrix(d, 2, 2), DD = cr_array_matrix(dd, 2, 2);
    cr_value dargs[1] = {cr_value_array(&D)};
    cr_tangent t[2] = {cr_tangent_zero(), cr_tangent_array(&DD)};
    assert_int_equal(cr_mutate_frule(NULL, fx->arena, &cr_fn_exp_bang, dargs, t, 1), CR_OK);
    ASSERT_CLOSE(d[0], exp(0.5), 1e-14);
    ASSERT_CLOSE(d[3], exp(-1.0), 1e-14);
    ASSERT_CLOSE(d[1], 0, 1e-15);
    /* the tangent along I: d/dε exp(D + ε I) = exp(D) */
    ASSERT_CLOSE(dd[0], exp(0.5), 1e-12);
    ASSERT_CLOSE(dd[3], exp(-1.0), 1e-12);
#endif
}

static void test_errors(void **state)
{
    fixture *fx = *state;
    double d[2] = {1, 2}, s[3] = {1, 2, 3};
    cr_array D = cr_array_vector(d, 2), S = cr_array_vector(s, 3);
    cr_value args[2] = {cr_value_array(&D), cr_value_array(&S)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_copyto_bang, args, 2, &y), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "3 elements into a destination of 2");
    cr_value fargs[2] = {cr_value_array(&D), cr_value_c128(CMPLX(1, 1))};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_fill_bang, fargs, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "complex value for a f64 destination");
    /* sum!: a destination extent neither 1 nor A's */
    double a[6] = {1, 2, 3, 4, 5, 6};
    cr_array A = cr_array_matrix(a, 2, 3), R = cr_array_matrix(a, 2, 2);
    cr_value sargs[2] = {cr_value_array(&R), cr_value_array(&A)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum_bang, sargs, 2, &y), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "neither 1 nor the array's 3");
    /* circshift! into a destination of another shape */
    int64_t sh[2] = {0, 1};
    cr_array Sh;
    size_t two = 2;
    assert_int_equal(cr_array_view_init(&Sh, sh, CR_DT_I64, 1, &two, NULL), CR_OK);
    cr_value hargs[3] = {cr_value_array(&R), cr_value_array(&A), cr_value_array(&Sh)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_circshift_bang, hargs, 3, &y), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "a result of shape (2,3) for a destination of shape");
}

/* fn(args) fails with the status want; the message names who once and contains text. */
static void expect_error(fixture *fx, const cr_value *fn, cr_value *args, size_t nargs,
                         cr_status want, const char *who, const char *text)
{
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, fn, args, nargs, &y), want);
    assert_error_once(cr_ctx_errmsg(fx->ctx), who, text);
}

/* destinations and sources of the wrong dtype or shape, and the arguments of cr_mutate_* */
static void test_bad_arguments(void **state)
{
    fixture *fx = *state;
    double d[2] = {1, 2}, a[6] = {1, 2, 3, 4, 5, 6};
    int64_t k[2] = {1, 2};
    cr_array D = cr_array_vector(d, 2), A = cr_array_matrix(a, 2, 3), K = i64v(k, 2);
    /* sum! of a matrix into a vector */
    cr_value sargs[2] = {cr_value_array(&D), cr_value_array(&A)};
    expect_error(fx, &cr_fn_sum_bang, sargs, 2, CR_ESHAPE, "sum!",
                 "a destination of 1 dimension for an array of 2");
    /* an integer destination */
    cr_value fargs[2] = {cr_value_array(&K), cr_value_f64(1)};
    expect_error(fx, &cr_fn_fill_bang, fargs, 2, CR_EINVAL, "fill!",
                 "the destination must be an f64, f32 or c128 array");
    cr_value cargs[2] = {cr_value_array(&K), cr_value_array(&D)};
    expect_error(fx, &cr_fn_copyto_bang, cargs, 2, CR_EINVAL, "copyto!",
                 "the destination must be an f64, f32 or c128 array");
    /* an integer source, a complex source into a real destination */
    cargs[0] = cr_value_array(&D);
    cargs[1] = cr_value_array(&K);
    expect_error(fx, &cr_fn_copyto_bang, cargs, 2, CR_EINVAL, "copyto!",
                 "the source must be an f64, f32 or c128 array");
    cr_complex z[2] = {CMPLX(1, 1), CMPLX(2, 0)};
    cr_array Z;
    size_t two = 2;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 1, &two, NULL), CR_OK);
    cargs[1] = cr_value_array(&Z);
    expect_error(fx, &cr_fn_copyto_bang, cargs, 2, CR_EINVAL, "copyto!",
                 "complex values for a f64 destination");
    /* cumsum! of complex values into a real destination */
    cr_value uargs[3] = {cr_value_array(&D), cr_value_array(&Z), cr_value_i64(0)};
    expect_error(fx, &cr_fn_cumsum_bang, uargs, 3, CR_EINVAL, "cumsum!",
                 "complex values for a f64 destination");
    /* setindex!: integer values, a value that is no number, too few values */
    int64_t idx[2] = {0, 1};
    cr_array Ix = i64v(idx, 2);
    cr_value xargs[3] = {cr_value_array(&D), cr_value_array(&K), cr_value_array(&Ix)};
    expect_error(fx, &cr_fn_setindex_bang, xargs, 3, CR_EINVAL, "setindex!",
                 "the values must be f64, f32 or c128");
    xargs[1] = cr_fn_sum_bang;
    expect_error(fx, &cr_fn_setindex_bang, xargs, 3, CR_EINVAL, "setindex!",
                 "the value must be a number or an array");
    double one[1] = {5};
    cr_array One = cr_array_vector(one, 1);
    xargs[1] = cr_value_array(&One);
    expect_error(fx, &cr_fn_setindex_bang, xargs, 3, CR_ESHAPE, "setindex!",
                 "1 values for 2 positions");
    /* the checks of cr_mutate_frule and cr_mutate_rrule */
    cr_pullback pb;
    cr_value fill_args[2] = {cr_value_array(&D), cr_value_f64(3)};
    assert_int_equal(cr_mutate_rrule(NULL, NULL, &cr_fn_fill_bang, fill_args, 2, &pb), CR_EINVAL);
    assert_int_equal(cr_mutate_rrule(NULL, fx->arena, NULL, fill_args, 2, &pb), CR_EINVAL);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "cr_mutate", "not a function call");
    assert_int_equal(cr_mutate_rrule(NULL, fx->arena, &cr_fn_fill_bang, fill_args, 0, &pb),
                     CR_EINVAL);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "cr_mutate", "not a function call");
    assert_int_equal(cr_mutate_rrule(NULL, fx->arena, &cr_fn_fill_bang, fill_args, 2, NULL),
                     CR_EINVAL);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "fill!", "no pullback given");
    assert_int_equal(cr_mutate_frule(NULL, fx->arena, &cr_fn_fill_bang, fill_args, NULL, 2),
                     CR_EINVAL);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "fill!", "no tangents");
    /* nothing was written */
    ASSERT_DBL(d[0], 1);
    ASSERT_DBL(d[1], 2);
}

/* fill! with a constant in place: the tangent buffer becomes zero (a zero tangent of the
 * result); an empty destination; setindex! of an integer, which has no cotangent */
static void test_zero_and_empty(void **state)
{
    fixture *fx = *state;
    double d[3] = {1, 2, 3}, dd[3] = {4, 5, 6};
    cr_array D = cr_array_vector(d, 3), DD = cr_array_vector(dd, 3);
    cr_value args[2] = {cr_value_array(&D), cr_value_f64(7)};
    cr_tangent t[3] = {cr_tangent_zero(), cr_tangent_array(&DD), cr_tangent_zero()};
    assert_int_equal(cr_mutate_frule(NULL, fx->arena, &cr_fn_fill_bang, args, t, 2), CR_OK);
    for (size_t i = 0; i < 3; i++) {
        ASSERT_DBL(d[i], 7);
        ASSERT_DBL(dd[i], 0);
    }
    /* an empty destination: nothing to write */
    double e0 = 0, de0 = 0;
    cr_array E = cr_array_vector(&e0, 0), DE = cr_array_vector(&de0, 0);
    cr_value eargs[2] = {cr_value_array(&E), cr_value_f64(7)};
    cr_tangent et[3] = {cr_tangent_zero(), cr_tangent_array(&DE), cr_tangent_f64(1)};
    assert_int_equal(cr_mutate_frule(NULL, fx->arena, &cr_fn_fill_bang, eargs, et, 2), CR_OK);
    ASSERT_DBL(e0, 0);
    cr_pullback pb;
    assert_int_equal(cr_mutate_rrule(NULL, fx->arena, &cr_fn_fill_bang, eargs, 2, &pb), CR_OK);
    /* setindex!(A, 9 (an integer), 1): the destination's cotangent zero at position 1 */
    double a[3] = {1, 2, 3};
    cr_array A = cr_array_vector(a, 3);
    cr_value sargs[3] = {cr_value_array(&A), cr_value_i64(9), cr_value_i64(1)}, y;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_setindex_bang, sargs, 3, &y, &pb), CR_OK);
    ASSERT_DBL(at(&y, 1), 9);
    double g[3] = {10, 20, 30};
    cr_array G = cr_array_vector(g, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[4];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    const double want[3] = {10, 0, 30};
    for (size_t i = 0; i < 3; i++)
        ASSERT_DBL(tan_at(dx[1], i), want[i]);
    assert_true(cr_tangent_is_zero(dx[2]));
}

/* every allocation of the rules failing in turn: CR_EARENA, then the same output */
static void test_arena_full(void **state)
{
    fixture *fx = *state;
    double d[4] = {1, 2, 3, 4}, s[2] = {-1, -2}, a[4] = {1, 2, 3, 4};
    int64_t idx[2] = {2, 0};
    cr_array D = cr_array_vector(d, 4), S = cr_array_vector(s, 2), Ix = i64v(idx, 2),
             A = cr_array_matrix(a, 2, 2), R = cr_array_matrix(d, 1, 2);
    cr_value c[2] = {cr_value_array(&D), cr_value_array(&S)};
    assert_arena_sweep(fx, &cr_fn_copyto_bang, c, 2);
    assert_arena_sweep_rules(fx, &cr_fn_copyto_bang, c, 2);
    cr_value x[3] = {cr_value_array(&D), cr_value_array(&S), cr_value_array(&Ix)};
    assert_arena_sweep(fx, &cr_fn_setindex_bang, x, 3);
    assert_arena_sweep_rules(fx, &cr_fn_setindex_bang, x, 3);
    cr_value f[2] = {cr_value_array(&D), cr_value_f64(3)};
    assert_arena_sweep(fx, &cr_fn_fill_bang, f, 2);
    assert_arena_sweep_rules(fx, &cr_fn_fill_bang, f, 2);
    cr_value u[2] = {cr_value_array(&R), cr_value_array(&A)};
    assert_arena_sweep(fx, &cr_fn_sum_bang, u, 2);
    assert_arena_sweep_rules(fx, &cr_fn_sum_bang, u, 2);
    cr_value r[1] = {cr_value_array(&D)};
    assert_arena_sweep(fx, &cr_fn_reverse_bang, r, 1);
    assert_arena_sweep_rules(fx, &cr_fn_reverse_bang, r, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_copyto, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_setindex, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_wrappers, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_in_place, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inv_exp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_zero_and_empty, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_full, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
