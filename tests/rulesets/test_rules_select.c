/*
 * Tests of filter, sortslices, unique_ex, sort_ex, partialsort_ex, repeat_ex and hvcat
 * (rules_array.h, src/rulesets/array/select.c): every registered rule through the rule
 * tester at its sampler's points; values written out by hand from Julia's semantics (stable
 * orders, reversed ties, NaN placement, first occurrences, inner before outer repeats,
 * blocks by rows); cotangents scattered to the chosen elements; errors.
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

static void expect_values(const cr_value *y, const double *want, size_t n)
{
    assert_int_equal(y->kind, CR_KIND_ARRAY);
    assert_int_equal(cr_array_numel(y->u.arr), n);
    for (size_t i = 0; i < n; i++) {
        double g = creal(cr_array_get_linear(y->u.arr, i));
        if (isnan(want[i]))
            assert_true(isnan(g));
        else
            ASSERT_DBL(g, want[i]);
    }
}

static cr_status positive_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                                 cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_bool(args[0].u.f64 > 0);
    return CR_OK;
}
static const cr_function positive_fn = {"positive", 1, positive_primal, NULL, NULL, 0};

static cr_status twice_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_f64(2 * args[0].u.f64);
    return CR_OK;
}
static const cr_function twice_fn = {"twice", 1, twice_primal, NULL, NULL, 0};

/* fn(args) fails with the status want; the message names who once and contains text. */
static void expect_error(fixture *fx, const cr_value *fn, cr_value *args, size_t nargs,
                         cr_status want, const char *who, const char *text)
{
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, fn, args, nargs, &y), want);
    assert_error_once(cr_ctx_errmsg(fx->ctx), who, text);
}

static cr_status key_i64_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                                cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_i64(-(int64_t)args[0].u.f64);
    return CR_OK;
}
static const cr_function key_i64_fn = {"key_i64", 1, key_i64_primal, NULL, NULL, 0};

static cr_status key_array_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                  size_t n, cr_value *out)
{
    (void)arena;
    (void)args;
    (void)n;
    *out = *f; /* a function, not a number */
    return CR_OK;
}
static const cr_function key_fn_fn = {"key_fn", 1, key_array_primal, NULL, NULL, 0};

static const char *const k_fns[] = {"filter",         "sortslices", "unique_ex", "sort_ex",
                                    "partialsort_ex", "repeat_ex",  "hvcat"};
#define NFNS (sizeof k_fns / sizeof k_fns[0])

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
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

static void test_filter(void **state)
{
    fixture *fx = *state;
    double a[5] = {1, -2, 3, -4, 0.5};
    cr_array A = cr_array_vector(a, 5);
    cr_value args[2] = {cr_value_function(&positive_fn, NULL), cr_value_array(&A)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_filter, args, 2, &y), CR_OK);
    const double want[3] = {1, 3, 0.5};
    expect_values(&y, want, 3);
    check_point(fx, &cr_fn_filter, args, 2, "filter");
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_filter, args, 2, &y, &pb), CR_OK);
    double g[3] = {10, 20, 30};
    cr_array G = cr_array_vector(g, 3);
    cr_tangent dy = cr_tangent_array(&G), dx[3], v;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    assert_int_equal(cr_tangent_unthunk(dx[2], &v), CR_OK);
    const double ga[5] = {10, 0, 20, 0, 30};
    for (size_t i = 0; i < 5; i++)
        ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, i)), ga[i]);
    /* a predicate that does not return a bool */
    args[0] = cr_value_function(&twice_fn, NULL);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_filter, args, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "returned a f64, not a bool");
}

static void test_slices(void **state)
{
    fixture *fx = *state;
    double a[6] = {2, 1, 1, 5, 1, 3};
    cr_array A = cr_array_matrix(a, 3, 2);
    cr_value args[2] = {cr_value_array(&A), cr_value_i64(0)}, y;
    /* rows [2 1], [1 5], [1 3] sorted: [1 3], [1 5], [2 1] */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sortslices, args, 2, &y), CR_OK);
    const double rows[6] = {1, 3, 1, 5, 2, 1};
    expect_values(&y, rows, 6);
    /* rows tied on their first element are a kink: check the rules away from one */
    double t[6] = {2, 1, 1.5, 5, 1, 3};
    cr_array T = cr_array_matrix(t, 3, 2);
    cr_value targs[2] = {cr_value_array(&T), cr_value_i64(0)};
    check_point(fx, &cr_fn_sortslices, targs, 2, "sortslices rows");
    /* columns [2 1 1] and [1 5 3]: the second first */
    args[1] = cr_value_i64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sortslices, args, 2, &y), CR_OK);
    const double cols[6] = {1, 2, 5, 1, 3, 1};
    expect_values(&y, cols, 6);
    targs[1] = cr_value_i64(1);
    check_point(fx, &cr_fn_sortslices, targs, 2, "sortslices columns");

    /* unique rows, first occurrences kept; -0.0 differs from 0.0 */
    double u[10] = {1, 2, 3, 4, 1, 2, 0.0, 0.0, 0.0, -0.0};
    cr_array U = cr_array_matrix(u, 5, 2);
    cr_value uargs[2] = {cr_value_array(&U), cr_value_i64(0)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_unique_ex, uargs, 2, &y), CR_OK);
    const double uw[8] = {1, 2, 3, 4, 0, 0, 0, 0};
    expect_values(&y, uw, 8);
    assert_true(signbit(creal(cr_array_get_linear(y.u.arr, 7))));
    /* equal slices are a jump (a perturbation separates them): the rules away from one */
    targs[1] = cr_value_i64(0);
    check_point(fx, &cr_fn_unique_ex, targs, 2, "unique_ex rows");
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_unique_ex, uargs, 2, &y, &pb), CR_OK);
    double g[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cr_array G = cr_array_matrix(g, 4, 2);
    cr_tangent dy = cr_tangent_array(&G), dx[3], v;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[1], &v), CR_OK);
    const double gu[10] = {1, 2, 3, 4, 0, 0, 5, 6, 7, 8};
    for (size_t i = 0; i < 10; i++)
        ASSERT_DBL(creal(cr_array_get_linear(v.u.arr, i)), gu[i]);
    /* NaN rows are equal to each other */
    double n[4] = {NAN, 1, NAN, 1};
    cr_array N = cr_array_matrix(n, 2, 2);
    uargs[0] = cr_value_array(&N);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_unique_ex, uargs, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 1);
    /* complex sortslices and an out-of-range dimension */
    cr_complex z[2] = {CMPLX(1, 1), CMPLX(0, 1)};
    cr_array Z;
    size_t two = 2;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 1, &two, NULL), CR_OK);
    cr_value zargs[2] = {cr_value_array(&Z), cr_value_i64(0)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sortslices, zargs, 2, &y), CR_EINVAL);
    args[1] = cr_value_i64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sortslices, args, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "dimension 2 of an array of 2");
}

static void test_sort(void **state)
{
    fixture *fx = *state;
    double a[4] = {1, -1, 2, NAN};
    cr_array A = cr_array_vector(a, 4);
    cr_value args[3] = {cr_value_array(&A), cr_value_bool(false), cr_fn_fabs}, y;
    /* by |x|: keys 1, 1, 2, NaN: stable, NaN last */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sort_ex, args, 3, &y), CR_OK);
    const double by[4] = {1, -1, 2, NAN};
    expect_values(&y, by, 4);
    /* reversed: NaN first, the tie still in input order */
    args[1] = cr_value_bool(true);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sort_ex, args, 3, &y), CR_OK);
    const double rev[4] = {NAN, 2, 1, -1};
    expect_values(&y, rev, 4);
    /* by the values, reversed */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sort_ex, args, 2, &y), CR_OK);
    const double rv[4] = {NAN, 2, 1, -1};
    expect_values(&y, rv, 4);
    double b[4] = {5, 1, 4, 2};
    cr_array B = cr_array_vector(b, 4);
    cr_value bargs[3] = {cr_value_array(&B), cr_value_bool(true), cr_fn_fabs};
    check_point(fx, &cr_fn_sort_ex, bargs, 3, "sort_ex rev by");
    check_point(fx, &cr_fn_sort_ex, bargs, 2, "sort_ex rev");

    /* partialsort: element 1 of the ascending order, then the range 1:3 */
    cr_value pargs[4] = {cr_value_array(&B), cr_value_i64(1), cr_value_bool(false), cr_fn_fabs};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_partialsort_ex, pargs, 3, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    ASSERT_DBL(y.u.f64, 2);
    check_point(fx, &cr_fn_partialsort_ex, pargs, 3, "partialsort_ex k");
    cr_range r = {1, 3, 1};
    pargs[1] = cr_value_struct(&cr_range_type, &r);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_partialsort_ex, pargs, 4, &y), CR_OK);
    const double pr[2] = {2, 4};
    expect_values(&y, pr, 2);
    check_point(fx, &cr_fn_partialsort_ex, pargs, 4, "partialsort_ex range");
    /* a range with a huge step: one element, no step past it */
    cr_range big = {1, 2, INT64_MAX};
    pargs[1] = cr_value_struct(&cr_range_type, &big);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_partialsort_ex, pargs, 3, &y), CR_OK);
    expect_values(&y, pr, 1);
    pargs[1] = cr_value_i64(4);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_partialsort_ex, pargs, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "k = 4 outside");
}

static void test_repeat_hvcat(void **state)
{
    fixture *fx = *state;
    double a[2] = {1, 2};
    cr_array A = cr_array_vector(a, 2);
    cr_value args[3] = {cr_value_array(&A), cr_value_i64(2), cr_value_i64(2)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_repeat_ex, args, 3, &y), CR_OK);
    const double r1[8] = {1, 1, 2, 2, 1, 1, 2, 2};
    expect_values(&y, r1, 8);
    check_point(fx, &cr_fn_repeat_ex, args, 3, "repeat_ex inner outer");
    /* a matrix: inner (1, 2), outer (2, 1) */
    double m[4] = {1, 2, 3, 4};
    cr_array M = cr_array_matrix(m, 2, 2);
    int64_t in[2] = {1, 2}, out[2] = {2, 1};
    cr_array In, Out;
    size_t two = 2;
    assert_int_equal(cr_array_view_init(&In, in, CR_DT_I64, 1, &two, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&Out, out, CR_DT_I64, 1, &two, NULL), CR_OK);
    cr_value margs[3] = {cr_value_array(&M), cr_value_array(&In), cr_value_array(&Out)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_repeat_ex, margs, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 4);
    assert_int_equal(y.u.arr->shape[1], 4);
    const double r2[16] = {1, 1, 2, 2, 3, 3, 4, 4, 1, 1, 2, 2, 3, 3, 4, 4};
    expect_values(&y, r2, 16);
    check_point(fx, &cr_fn_repeat_ex, margs, 3, "repeat_ex matrix");
    margs[1] = cr_value_i64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_repeat_ex, margs, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "1 inner counts for 2 dimensions");

    /* [A B; C D] with A 1x1, B 1x2, C 2x1, D 2x2 */
    double pa[1] = {1}, pb[2] = {2, 3}, pc[2] = {4, 7}, pd[4] = {5, 6, 8, 9};
    cr_array PA = cr_array_matrix(pa, 1, 1), PB = cr_array_matrix(pb, 1, 2),
             PC = cr_array_matrix(pc, 2, 1), PD = cr_array_matrix(pd, 2, 2);
    cr_value h[5] = {cr_value_i64(2), cr_value_array(&PA), cr_value_array(&PB), cr_value_array(&PC),
                     cr_value_array(&PD)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_hvcat, h, 5, &y), CR_OK);
    const double hw[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    expect_values(&y, hw, 9);
    check_point(fx, &cr_fn_hvcat, h, 5, "hvcat 2 x 2 blocks");
    /* rows as an array: [A B] over [C D] again, then a mismatch */
    int64_t rows[2] = {2, 2};
    cr_array R;
    assert_int_equal(cr_array_view_init(&R, rows, CR_DT_I64, 1, &two, NULL), CR_OK);
    h[0] = cr_value_array(&R);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_hvcat, h, 5, &y), CR_OK);
    expect_values(&y, hw, 9);
    rows[1] = 3;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_hvcat, h, 5, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "row sizes do not add up to 4 blocks");
}

/* keys from by as integers and booleans; every rejected argument */
static void test_sort_keys_errors(void **state)
{
    fixture *fx = *state;
    double b[4] = {5, 1, 4, 2};
    cr_array B = cr_array_vector(b, 4);
    cr_value y;
    /* integer keys -x: descending values */
    cr_value args[3] = {cr_value_array(&B), cr_value_i64(0), cr_value_function(&key_i64_fn, NULL)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sort_ex, args, 3, &y), CR_OK);
    const double desc[4] = {5, 4, 2, 1};
    expect_values(&y, desc, 4);
    /* boolean keys x > 0 are all true: the input order kept (stable) */
    args[2] = cr_value_function(&positive_fn, NULL);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sort_ex, args, 3, &y), CR_OK);
    expect_values(&y, b, 4);
    /* rev as an integer 1: ascending reversed */
    args[1] = cr_value_i64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sort_ex, args, 2, &y), CR_OK);
    expect_values(&y, desc, 4);
    args[1] = cr_value_f64(0.5);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sort_ex, args, 2, &y), CR_EINVAL);
    args[1] = cr_value_bool(false);
    args[2] = cr_value_function(&key_fn_fn, NULL);
    expect_error(fx, &cr_fn_sort_ex, args, 3, CR_EINVAL, "sort_ex", "not a real number");
    args[2] = cr_value_f64(1);
    expect_error(fx, &cr_fn_sort_ex, args, 3, CR_EINVAL, "sort_ex", "by must be a function");
    double m[4] = {1, 2, 3, 4};
    cr_array M = cr_array_matrix(m, 2, 2);
    cr_value margs[2] = {cr_value_array(&M), cr_value_bool(false)};
    expect_error(fx, &cr_fn_sort_ex, margs, 2, CR_EINVAL, "sort_ex", "expected a vector");
    cr_complex z[2] = {1 + 2 * I, 3};
    cr_array Z;
    size_t two = 2;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 1, &two, NULL), CR_OK);
    cr_value zargs[2] = {cr_value_array(&Z), cr_value_bool(false)};
    expect_error(fx, &cr_fn_sort_ex, zargs, 2, CR_EINVAL, "sort_ex",
                 "complex values have no order");
    /* a 0-d array */
    double one = 1;
    cr_array S;
    assert_int_equal(cr_array_view_init(&S, &one, CR_DT_F64, 0, NULL, NULL), CR_OK);
    cr_value sargs[2] = {cr_value_array(&S), cr_value_bool(false)};
    expect_error(fx, &cr_fn_sort_ex, sargs, 2, CR_EINVAL, "sort_ex", "an array of 0 dimensions");
    /* sortslices with two equal rows among three: the equal rows keep their order (a tie:
     * no derivative there, so values only) */
    double q[6] = {2, 5, 1, 7, 2, 5};
    cr_array Q = cr_array_matrix(q, 3, 2);
    cr_value qargs[2] = {cr_value_array(&Q), cr_value_i64(0)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sortslices, qargs, 2, &y), CR_OK);
    const double qs[6] = {1, 7, 2, 5, 2, 5};
    expect_values(&y, qs, 6);
    /* filter with a predicate that is not a function */
    cr_value fargs[2] = {cr_value_f64(1), cr_value_array(&B)};
    expect_error(fx, &cr_fn_filter, fargs, 2, CR_EINVAL, "filter", "predicate must be a function");

    /* partialsort_ex: k neither an integer nor a range, ranges of step 0, too long, outside */
    cr_value pargs[3] = {cr_value_array(&B), cr_value_f64(1), cr_value_bool(false)};
    expect_error(fx, &cr_fn_partialsort_ex, pargs, 3, CR_EINVAL, "partialsort_ex",
                 "k must be an integer or a cr_range");
    cr_range r0 = {0, 2, 0}, rlong = {0, 5, 1}, rout = {-1, 1, 1};
    pargs[1] = cr_value_struct(&cr_range_type, &r0);
    expect_error(fx, &cr_fn_partialsort_ex, pargs, 3, CR_EINVAL, "partialsort_ex",
                 "a range of step 0");
    pargs[1] = cr_value_struct(&cr_range_type, &rlong);
    expect_error(fx, &cr_fn_partialsort_ex, pargs, 3, CR_EINVAL, "partialsort_ex",
                 "a range of 5 elements for 4");
    pargs[1] = cr_value_struct(&cr_range_type, &rout);
    expect_error(fx, &cr_fn_partialsort_ex, pargs, 3, CR_EINVAL, "partialsort_ex",
                 "range element -1 outside 0..4");

    /* repeat_ex: a negative count, a dimension that overflows */
    cr_value rargs[3] = {cr_value_array(&B), cr_value_i64(-1), cr_value_i64(1)};
    expect_error(fx, &cr_fn_repeat_ex, rargs, 3, CR_EINVAL, "repeat_ex", "a negative count");
    rargs[1] = cr_value_i64(INT64_MAX / 2);
    rargs[2] = cr_value_i64(INT64_MAX / 2);
    expect_error(fx, &cr_fn_repeat_ex, rargs, 3, CR_EOVERFLOW, "repeat_ex",
                 "dimension 0 overflows");

    /* hvcat: 4 blocks in rows of 3; rows (1, 1) for 4 blocks */
    double pa[1] = {1};
    cr_array PA = cr_array_matrix(pa, 1, 1);
    cr_value h[5] = {cr_value_i64(3), cr_value_array(&PA), cr_value_array(&PA), cr_value_array(&PA),
                     cr_value_array(&PA)};
    expect_error(fx, &cr_fn_hvcat, h, 5, CR_EINVAL, "hvcat", "4 blocks in rows of 3");
    int64_t rows[2] = {1, 1};
    cr_array R;
    assert_int_equal(cr_array_view_init(&R, rows, CR_DT_I64, 1, &two, NULL), CR_OK);
    h[0] = cr_value_array(&R);
    expect_error(fx, &cr_fn_hvcat, h, 5, CR_EINVAL, "hvcat", "row sizes do not add up to 4 blocks");
}

/* every allocation of the rules failing in turn: CR_EARENA, then the same output */
static void test_arena_full(void **state)
{
    fixture *fx = *state;
    double b[4] = {5, 1, 4, 2};
    cr_array B = cr_array_vector(b, 4), M = cr_array_matrix(b, 2, 2);
    cr_value f[2] = {cr_value_function(&positive_fn, NULL), cr_value_array(&B)};
    assert_arena_sweep(fx, &cr_fn_filter, f, 2);
    assert_arena_sweep_rules(fx, &cr_fn_filter, f, 2);
    cr_value s[3] = {cr_value_array(&B), cr_value_bool(true), cr_fn_fabs};
    assert_arena_sweep(fx, &cr_fn_sort_ex, s, 3);
    assert_arena_sweep_rules(fx, &cr_fn_sort_ex, s, 3);
    cr_range r = {1, 3, 1};
    cr_value p[3] = {cr_value_array(&B), cr_value_struct(&cr_range_type, &r), cr_value_bool(false)};
    assert_arena_sweep(fx, &cr_fn_partialsort_ex, p, 3);
    assert_arena_sweep_rules(fx, &cr_fn_partialsort_ex, p, 3);
    cr_value u[2] = {cr_value_array(&M), cr_value_i64(0)};
    assert_arena_sweep(fx, &cr_fn_sortslices, u, 2);
    assert_arena_sweep_rules(fx, &cr_fn_sortslices, u, 2);
    cr_value rp[3] = {cr_value_array(&B), cr_value_i64(2), cr_value_i64(2)};
    assert_arena_sweep(fx, &cr_fn_repeat_ex, rp, 3);
    assert_arena_sweep_rules(fx, &cr_fn_repeat_ex, rp, 3);
    cr_value h[5] = {cr_value_i64(2), cr_value_array(&M), cr_value_array(&M), cr_value_array(&M),
                     cr_value_array(&M)};
    assert_arena_sweep(fx, &cr_fn_hvcat, h, 5);
    assert_arena_sweep_rules(fx, &cr_fn_hvcat, h, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_filter, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_slices, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sort, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_repeat_hvcat, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sort_keys_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_full, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
