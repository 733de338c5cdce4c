/*
 * The hostile-input catalogue of the C API (docs/reliability.md): overflowing shapes and
 * counts, INT64 extremes, caller-built descriptors that claim too much, NaN and infinity,
 * empty arrays, forged and stale variables, wrong struct sizes and flags, and the misuses
 * the docs name, each with the exact status expected and a message that names the function
 * once. The misuse checks of cr_ctx_params.checks (a tape used after cr_tape_free, after
 * cr_ctx_free, or from another thread) are here too. tools/test_hostile_tools.c is the tools'
 * part. Every case also runs under AddressSanitizer and UBSan (make sanitize).
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>

#include "test_util.h"

/* Occurrences of s in text. */
static size_t count_of(const char *text, const char *s)
{
    size_t n = 0, len = strlen(s);
    for (const char *p = strstr(text, s); p != NULL; p = strstr(p + len, s))
        n++;
    return n;
}

static size_t g_cases; /* catalogue entries checked, reported at the end */

/* The message names `who` once, at its start ("who: ..." or "who takes ..."); it contains
 * `part` when given. */
static void assert_named_once(const char *msg, const char *who, const char *part)
{
    char head[96];
    size_t n = strlen(who);
    snprintf(head, sizeof head, "%s:", who);
    if (strncmp(msg, who, n) != 0 || (msg[n] != ':' && msg[n] != ' ') || count_of(msg, head) > 1) {
        print_error("message \"%s\" should start with \"%s\" and name it once\n", msg, head);
        fail();
    }
    if (part != NULL)
        assert_contains(msg, part);
}

/* A call's status and its context's message. */
static void expect(fixture *f, cr_status got, cr_status want, const char *who, const char *part)
{
    if (got != want) {
        print_error("status %s, expected %s (%s)\n", cr_status_name(got), cr_status_name(want),
                    cr_ctx_errmsg(f->ctx));
        fail();
    }
    if (want != CR_OK)
        assert_named_once(cr_ctx_errmsg(f->ctx), who, part);
    cr_ctx_clear_error(f->ctx);
    g_cases++;
}

static cr_array *vec(fixture *f, size_t n, const double *v)
{
    cr_array *a;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 1, &n, &a), CR_OK);
    for (size_t i = 0; i < n; i++)
        ((double *)a->data)[i] = v[i];
    return a;
}

static cr_array *mat22(fixture *f)
{
    size_t shape[2] = {2, 2};
    cr_array *a;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 2, shape, &a), CR_OK);
    for (size_t i = 0; i < 4; i++)
        ((double *)a->data)[i] = (double)(i + 1);
    return a;
}

static cr_value ilist(fixture *f, size_t n, const int64_t *v)
{
    cr_array *a;
    assert_int_equal(cr_array_new(f->arena, CR_DT_I64, 1, &n, &a), CR_OK);
    for (size_t i = 0; i < n; i++)
        ((int64_t *)a->data)[i] = v[i];
    return cr_value_array(a);
}

static cr_status call(fixture *f, const cr_value *fn, const cr_value *args, size_t nargs,
                      cr_value *y)
{
    cr_value dummy;
    return cr_function_call(f->arena, fn, args, nargs, y != NULL ? y : &dummy);
}

static void expect_vector(const cr_value *y, size_t n, const double *want)
{
    assert_int_equal(y->kind, CR_KIND_ARRAY);
    assert_int_equal(y->u.arr->ndim, 1);
    assert_int_equal(cr_array_numel(y->u.arr), n);
    for (size_t i = 0; i < n; i++)
        ASSERT_DBL(creal(cr_array_get_linear(y->u.arr, i)), want[i]);
}

/* ---- Overflowing shapes and counts (issue: fill, repeat, reshape wrapped) ---------------- */

static void test_overflowing_shapes(void **state)
{
    fixture *f = *state;
    const double one[4] = {1, 2, 3, 4};
    int64_t big = 2305843009213693953; /* 2^61 + 1: 8 bytes each wrap to 8 */
    int64_t sq[2] = {4294967296, 4294967296};
    int64_t huge2[2] = {INT64_MAX, 2};
    cr_value a[3];

    a[0] = cr_value_f64(1.0);
    a[1] = cr_value_i64(big);
    expect(f, call(f, &cr_fn_fill, a, 2, NULL), CR_EOVERFLOW, "fill", "2305843009213693953");
    a[1] = ilist(f, 2, sq);
    expect(f, call(f, &cr_fn_fill, a, 2, NULL), CR_EOVERFLOW, "fill", "4294967296 x 4294967296");
    a[1] = cr_value_i64(INT64_MAX);
    expect(f, call(f, &cr_fn_fill, a, 2, NULL), CR_EOVERFLOW, "fill", NULL);
    a[1] = cr_value_i64(INT64_MIN);
    expect(f, call(f, &cr_fn_fill, a, 2, NULL), CR_EINVAL, "fill", "negative extent");
    cr_value y;
    cr_pullback pb;
    a[1] = cr_value_i64(big);
    expect(f, cr_rrule(NULL, f->arena, &cr_fn_fill, a, 2, &y, &pb), CR_EOVERFLOW, "fill", NULL);

    a[0] = cr_value_array(vec(f, 1, one));
    a[1] = cr_value_i64(big);
    expect(f, call(f, &cr_fn_repeat, a, 2, NULL), CR_EOVERFLOW, "repeat", NULL);
    a[0] = cr_value_array(vec(f, 2, one));
    a[1] = cr_value_i64(INT64_MAX);
    expect(f, call(f, &cr_fn_repeat, a, 2, NULL), CR_EOVERFLOW, "repeat",
           "2 * 9223372036854775807");
    a[1] = cr_value_i64(-1);
    expect(f, call(f, &cr_fn_repeat, a, 2, NULL), CR_EINVAL, "repeat", "negative count");

    size_t zero = 0;
    cr_array *empty;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 1, &zero, &empty), CR_OK);
    a[0] = cr_value_array(empty);
    a[1] = ilist(f, 2, sq); /* 2^64 elements: wrapped to 0, the empty input's count */
    expect(f, call(f, &cr_fn_reshape, a, 2, NULL), CR_EOVERFLOW, "reshape", "4294967296");
    a[0] = cr_value_array(vec(f, 4, one));
    a[1] = ilist(f, 2, huge2);
    expect(f, call(f, &cr_fn_reshape, a, 2, NULL), CR_EOVERFLOW, "reshape", NULL);
    a[1] = cr_value_i64(3);
    expect(f, call(f, &cr_fn_reshape, a, 2, NULL), CR_ESHAPE, "reshape", "4 elements, not 3");

    /* cr_array_new and caller-built descriptors. */
    cr_array *out;
    size_t shape[2] = {(size_t)1 << 32, (size_t)1 << 32};
    expect(f, cr_array_new(f->arena, CR_DT_F64, 2, shape, &out), CR_EOVERFLOW, "cr_array_new",
           NULL);
    size_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    expect(f, cr_array_new(f->arena, CR_DT_F64, 9, nine, &out), CR_EINVAL, "cr_array_new", NULL);
    double cell = 1.0;
    cr_array view;
    assert_int_equal(cr_array_view_init(&view, &cell, CR_DT_F64, 2, shape, NULL), CR_EOVERFLOW);
    g_cases++;
    /* A descriptor filled by hand with extents whose product wraps, stride 0. */
    cr_array forged;
    size_t one_elem = 1;
    assert_int_equal(cr_array_view_init(&forged, &cell, CR_DT_F64, 1, &one_elem, NULL), CR_OK);
    forged.ndim = 2;
    forged.shape[0] = forged.shape[1] = (size_t)1 << 32;
    forged.strides[0] = forged.strides[1] = 0;
    a[0] = cr_value_array(&forged);
    expect(f, call(f, &cr_fn_sum, a, 1, NULL), CR_EOVERFLOW, "sum", "(4294967296,4294967296)");
    expect(f, call(f, &cr_fn_reverse, a, 1, NULL), CR_EOVERFLOW, "reverse", NULL);
    a[1] = cr_value_i64(1);
    expect(f, call(f, &cr_fn_circshift, a, 2, NULL), CR_EOVERFLOW, "circshift", NULL);
    /* The same forgery as an index list (an i64 array). */
    int64_t zero_index = 0;
    cr_array ilist_forged;
    assert_int_equal(cr_array_view_init(&ilist_forged, &zero_index, CR_DT_I64, 1, &one_elem, NULL),
                     CR_OK);
    ilist_forged.ndim = 2;
    ilist_forged.shape[0] = ilist_forged.shape[1] = (size_t)1 << 32;
    ilist_forged.strides[0] = ilist_forged.strides[1] = 0;
    a[0] = cr_value_array(vec(f, 4, one));
    a[1] = cr_value_array(&ilist_forged);
    expect(f, call(f, &cr_fn_getindex, a, 2, NULL), CR_EOVERFLOW, "getindex", "4294967296");
    a[0] = cr_value_f64(1.0);
    expect(f, call(f, &cr_fn_fill, a, 2, NULL), CR_EOVERFLOW, "fill", NULL);
    /* A destination whose strides overlap (dimensions 2 and 3 both step 2 elements) behind an
     * extent whose span wraps: 2 * 2^63 is 0 in size_t. Not disjoint, so not in place. */
    double cells[8] = {0};
    size_t shape3[3] = {2, 2, 2};
    cr_array overlap;
    assert_int_equal(cr_array_view_init(&overlap, cells, CR_DT_F64, 3, shape3, NULL), CR_OK);
    overlap.shape[1] = ((size_t)1 << 63) + 1;
    overlap.strides[0] = 1;
    overlap.strides[1] = 2;
    overlap.strides[2] = 2;
    overlap.flags |= CR_ARRAY_WRITABLE;
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_array(&overlap)));
    overlap.shape[1] = 2; /* the same strides with honest extents: overlapping too */
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_array(&overlap)));
    overlap.strides[2] = 4; /* disjoint: 1, 2 and 4 elements */
    assert_true(cr_tangent_is_inplaceable_destination(cr_tangent_array(&overlap)));
    g_cases += 3;
    /* A struct type claiming 2^62 fields: its tangent's field array would wrap size_t. */
    static const cr_field one_field[1] = {{"x", 0, CR_KIND_F64, NULL}};
    const cr_type huge_type = {"Huge", sizeof(double), (size_t)1 << 62, one_field};
    cr_tangent tan;
    expect(f, cr_tangent_struct(f->arena, &huge_type, NULL, NULL, 0, &tan), CR_EOVERFLOW,
           "cr_tangent_struct", "4611686018427387904");
}

/* ---- INT64 extremes (issue: circshift, diag, diagm, slices) ------------------------------- */

static void test_int64_extremes(void **state)
{
    fixture *f = *state;
    const double v[3] = {1, 2, 3}, shifted[3] = {3, 1, 2};
    cr_value a[3], y;

    /* circshift([1,2,3], s) moves elements s places up, modulo 3: INT64_MIN = 1 (mod 3)
     * and INT64_MAX = 1 (mod 3) both give [3,1,2] (Julia: circshift([1,2,3], typemin(Int))). */
    a[0] = cr_value_array(vec(f, 3, v));
    a[1] = cr_value_i64(INT64_MIN);
    expect(f, call(f, &cr_fn_circshift, a, 2, &y), CR_OK, "circshift", NULL);
    expect_vector(&y, 3, shifted);
    a[1] = cr_value_i64(INT64_MAX);
    expect(f, call(f, &cr_fn_circshift, a, 2, &y), CR_OK, "circshift", NULL);
    expect_vector(&y, 3, shifted);
    a[1] = cr_value_i64(-2);
    expect(f, call(f, &cr_fn_circshift, a, 2, &y), CR_OK, "circshift", NULL);
    expect_vector(&y, 3, shifted);

    /* diag of a 2x2 matrix far off the matrix: empty; diagm that far: too large. */
    a[0] = cr_value_array(mat22(f));
    a[1] = cr_value_i64(INT64_MIN);
    expect(f, call(f, &cr_fn_diag, a, 2, &y), CR_OK, "diag", NULL);
    assert_int_equal(cr_array_numel(y.u.arr), 0);
    a[1] = cr_value_i64(INT64_MAX);
    expect(f, call(f, &cr_fn_diag, a, 2, &y), CR_OK, "diag", NULL);
    assert_int_equal(cr_array_numel(y.u.arr), 0);
    a[1] = cr_value_i64(-1);
    expect(f, call(f, &cr_fn_diag, a, 2, &y), CR_OK, "diag", NULL);
    expect_vector(&y, 1, (const double[]){3});
    a[0] = cr_value_array(vec(f, 2, v));
    a[1] = cr_value_i64(INT64_MIN);
    expect(f, call(f, &cr_fn_diagm, a, 2, NULL), CR_EOVERFLOW, "diagm", "-9223372036854775808");
    a[1] = cr_value_i64(INT64_MAX);
    expect(f, call(f, &cr_fn_diagm, a, 2, NULL), CR_EOVERFLOW, "diagm", NULL);
    a[0] = cr_value_array(mat22(f));
    a[1] = cr_value_i64(INT64_MIN);
    expect(f, call(f, &cr_fn_triu, a, 2, &y), CR_OK, "triu", NULL);
    assert_true(creal(cr_array_get_linear(y.u.arr, 2)) == 3);

    /* Ranges: (-5, INT64_MAX) is as out of bounds as (-5, 2); a step of INT64_MIN. */
    cr_range r = {-5, INT64_MAX, 1};
    a[0] = cr_value_array(vec(f, 3, v));
    a[1] = cr_value_struct(&cr_range_type, &r);
    expect(f, call(f, &cr_fn_view, a, 2, NULL), CR_EINVAL, "view", "index -5 out of bounds");
    r = (cr_range){-5, 2, 1};
    expect(f, call(f, &cr_fn_view, a, 2, NULL), CR_EINVAL, "view", "index -5 out of bounds");
    r = (cr_range){0, INT64_MAX, 1};
    expect(f, call(f, &cr_fn_getindex, a, 2, NULL), CR_EINVAL, "getindex", "out of bounds");
    r = (cr_range){2, INT64_MIN, INT64_MIN};
    expect(f, call(f, &cr_fn_view, a, 2, NULL), CR_EINVAL, "view", "out of bounds");
    r = (cr_range){0, INT64_MAX, INT64_MAX};
    expect(f, call(f, &cr_fn_getindex, a, 2, &y), CR_OK, "getindex", NULL);
    expect_vector(&y, 1, v);
    r = (cr_range){0, 3, INT64_MIN};
    expect(f, call(f, &cr_fn_getindex, a, 2, &y), CR_OK, "getindex", NULL);
    assert_int_equal(cr_array_numel(y.u.arr), 0);
    a[1] = cr_value_i64(INT64_MIN);
    expect(f, call(f, &cr_fn_getindex, a, 2, NULL), CR_EINVAL, "getindex", "out of bounds");
    /* A strided view along a one-element range of step -(2^63 - 1): the view's stride is the
     * array's (step times stride overflowed; fuzz_rules/view-one-element-huge-step). */
    cr_range r1 = {1, 0, -INT64_MAX}, r2 = {0, 2, 1};
    cr_value b[3] = {cr_value_array(mat22(f)), cr_value_struct(&cr_range_type, &r1),
                     cr_value_struct(&cr_range_type, &r2)};
    expect(f, call(f, &cr_fn_view, b, 3, &y), CR_OK, "view", NULL);
    assert_int_equal(y.u.arr->ndim, 2);
    assert_int_equal(y.u.arr->shape[0], 1);
    assert_int_equal(y.u.arr->shape[1], 2);
    cr_value g;
    expect(f, call(f, &cr_fn_getindex, b, 3, &g), CR_OK, "getindex", NULL);
    for (size_t k = 0; k < 2; k++)
        assert_true(creal(cr_array_get_linear(y.u.arr, k)) ==
                    creal(cr_array_get_linear(g.u.arr, k)));
    assert_true(creal(cr_array_get_linear(g.u.arr, 0)) != creal(cr_array_get_linear(g.u.arr, 1)));
}

/* ---- Special functions of an integer order: bounded, consistent NaN ------------------------ */

static void test_integer_orders(void **state)
{
    fixture *f = *state;
    cr_value a[2], y;
    a[1] = cr_value_f64(1.5);
    a[0] = cr_value_i64(-1);
    expect(f, call(f, &cr_fn_polygamma, a, 2, NULL), CR_EDOMAIN, "polygamma", "negative");
    a[0] = cr_value_i64(INT64_MIN);
    expect(f, call(f, &cr_fn_polygamma, a, 2, NULL), CR_EDOMAIN, "polygamma", NULL);
    a[0] = cr_value_i64(2147483646);
    expect(f, call(f, &cr_fn_jn, a, 2, NULL), CR_EDOMAIN, "jn", "100000");
    a[0] = cr_value_i64(-2147483647);
    expect(f, call(f, &cr_fn_yn, a, 2, NULL), CR_EDOMAIN, "yn", NULL);

    /* polygamma of a huge order: immediate, -inf at 1.5 (m!/1.5^(m+1) overflows) and -0
     * far out, with a derivative of the sign that follows. */
    a[0] = cr_value_i64(2147483646);
    expect(f, call(f, &cr_fn_polygamma, a, 2, &y), CR_OK, "polygamma", NULL);
    assert_true(isinf(y.u.f64) && y.u.f64 < 0);

    /* NaN value, NaN derivative: polygamma of even order at a pole, yn at x < 0. */
    cr_tangent d[3] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_f64(1.0)}, dy;
    const cr_value *fns[2] = {&cr_fn_polygamma, &cr_fn_yn};
    const double xs[2] = {-2.0, -1.5};
    for (size_t k = 0; k < 2; k++) {
        a[0] = cr_value_i64(2);
        a[1] = cr_value_f64(xs[k]);
        expect(f, cr_frule(NULL, f->arena, d, fns[k], a, 2, &y, &dy), CR_OK, "frule", NULL);
        assert_true(isnan(y.u.f64));
        assert_true(dy.tag == CR_TAN_F64 && isnan(dy.u.f64));
    }
    /* yn of an order large against x: -inf, derivative +inf (not inf - inf = NaN). */
    a[0] = cr_value_i64(100000);
    a[1] = cr_value_f64(1.5);
    expect(f, cr_frule(NULL, f->arena, d, &cr_fn_yn, a, 2, &y, &dy), CR_OK, "frule", NULL);
    assert_true(isinf(y.u.f64) && y.u.f64 < 0);
    assert_true(isinf(dy.u.f64) && dy.u.f64 > 0);
}

/* ---- Misc rules and calls ---------------------------------------------------------------- */

static void test_calls(void **state)
{
    fixture *f = *state;
    size_t zero = 0;
    cr_array *empty;
    assert_int_equal(cr_array_new(f->arena, CR_DT_F64, 1, &zero, &empty), CR_OK);
    cr_value a[2] = {cr_value_array(empty)};
    expect(f, call(f, &cr_fn_findmax, a, 1, NULL), CR_EINVAL, "findmax", "empty");
    expect(f, call(f, &cr_fn_findmin, a, 1, NULL), CR_EINVAL, "findmin", "empty");
    expect(f, call(f, &cr_fn_maximum, a, 1, NULL), CR_EINVAL, "maximum", "empty");
    cr_value y;
    expect(f, call(f, &cr_fn_sum, a, 1, &y), CR_OK, "sum", NULL);
    assert_true(y.u.f64 == 0);
    expect(f, cr_function_call(f->arena, NULL, a, 1, &y), CR_EINVAL, "cr_function_call", NULL);
    cr_value x[2] = {cr_value_f64(1), cr_value_f64(2)};
    expect(f, call(f, &cr_fn_sin, x, 2, NULL), CR_EINVAL, "sin", "2 given");
    x[0] = cr_value_f64(NAN);
    expect(f, call(f, &cr_fn_sin, x, 1, &y), CR_OK, "sin", NULL);
    assert_true(isnan(y.u.f64));
}

/* ---- Struct sizes and flags --------------------------------------------------------------- */

static void test_struct_sizes(void **state)
{
    fixture *f = *state;
    cr_ctx *c = NULL;
    cr_ctx_params cp = {.struct_size = 7};
    assert_int_equal(cr_ctx_new(&cp, &c), CR_EINVAL);
    assert_null(c);
    cp = (cr_ctx_params){.struct_size = sizeof cp, .checks = 8};
    assert_int_equal(cr_ctx_new(&cp, &c), CR_EINVAL);
    cp = (cr_ctx_params){.struct_size = (uint32_t)offsetof(cr_ctx_params, checks)};
    assert_int_equal(cr_ctx_new(&cp, &c), CR_OK); /* the version before checks */
    cr_ctx_free(c);
    g_cases += 3;
    cr_tape *t = NULL;
    cr_tape_params tp = {.struct_size = 3};
    expect(f, cr_tape_new(f->ctx, &tp, &t), CR_EINVAL, "cr_tape_new", "struct_size");
    tp = (cr_tape_params){.struct_size = sizeof tp, .flags = 1u << 20};
    expect(f, cr_tape_new(f->ctx, &tp, &t), CR_EINVAL, "cr_tape_new", "flags");
    assert_null(t);
}

/* ---- Forged, stale and foreign variables; bad tape calls --------------------------------- */

static cr_var (*volatile g_mul)(cr_tape *, cr_var, cr_var) = &cr_mul; /* the library's */

static void test_variables(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    double g;

    /* The right id, an index past the recording: every entry refuses it. */
    for (int k = 0; k < 4; k++) {
        cr_tape_reset(t);
        cr_var x = cr_tape_input(t, 2.0), forged = x;
        forged.idx = x.idx + 5;
        cr_var y = k == 0   ? cr_mul(t, x, forged)       /* inline */
                   : k == 1 ? g_mul(t, forged, x)        /* exported */
                   : k == 2 ? cr_sin(t, forged)          /* a row */
                            : cr_add(t, forged, forged); /* one operand twice */
        assert_true(isnan(y.v));
        assert_int_equal(cr_tape_status(t), CR_ETAPE);
        assert_contains(cr_tape_errmsg(t), "past this recording");
        g_cases++;
    }
    cr_tape_reset(t);
    cr_var x = cr_tape_input(t, 2.0), forged = x;
    forged.idx = 1000;
    expect(f, cr_tape_gradient(t, cr_mul(t, x, x), &forged, 1, &g), CR_ETAPE, "cr_tape_gradient",
           "past this recording");
    expect(f, cr_tape_gradient(t, forged, &x, 1, &g), CR_ETAPE, "cr_tape_gradient", NULL);

    /* Stale (before the last reset) and foreign (another tape). */
    cr_var old = cr_tape_input(t, 1.0);
    cr_tape_reset(t);
    cr_var z = cr_sin(t, old);
    assert_true(isnan(z.v));
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_contains(cr_tape_errmsg(t), "before its last reset");
    g_cases++;
    cr_tape_reset(t);
    cr_var w = cr_tape_input(u, 1.0);
    x = cr_tape_input(t, 1.0);
    expect(f, cr_tape_gradient(t, x, &w, 1, &g), CR_ETAPE, "cr_tape_gradient", "another tape");

    /* cr_tape_cmp with an op that is not a cr_cmp. */
    cr_tape_reset(t);
    x = cr_tape_input(t, 1.0);
    assert_false(cr_tape_cmp(t, x, (cr_cmp)99, x));
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    assert_named_once(cr_tape_errmsg(t), "cr_tape_cmp", "invalid comparison 99");
    g_cases++;

    /* cr_tape_inputs: too many, on a good tape and on a failed one (x not read: it has
     * one element). */
    double one = 1.0;
    cr_var out[1];
    cr_tape_reset(t);
    expect(f, cr_tape_inputs(t, &one, (size_t)CR_TAPE_MAX_VARS, out), CR_EOVERFLOW,
           "cr_tape_inputs", NULL);
    assert_int_equal(cr_tape_inputs(t, &one, SIZE_MAX, out), CR_EOVERFLOW); /* failed tape */
    g_cases++;
    cr_tape_reset(t);
    (void)cr_tape_cmp(t, x, (cr_cmp)-1, x); /* fails the tape: CR_EINVAL */
    assert_int_equal(cr_tape_inputs(t, &one, SIZE_MAX, out), CR_EINVAL);
    g_cases++;
    cr_ctx_clear_error(f->ctx);

    /* A slice of an array variable out of bounds: the message names view once. */
    for (int k = 0; k < 2; k++) {
        cr_tape_reset(t);
        double v[3] = {1, 2, 3};
        cr_array av = cr_array_vector(v, 3);
        cr_avar ax = cr_tape_array_input(t, &av);
        cr_avar s = cr_av_slice(t, ax, -5, k == 0 ? INT64_MAX : 2);
        assert_null(s.a);
        assert_int_equal(cr_tape_status(t), CR_EINVAL);
        assert_named_once(cr_tape_errmsg(t), "view", "index -5 out of bounds");
        g_cases++;
    }

    /* NaN through a recording: value and gradient NaN alike. */
    cr_tape_reset(t);
    x = cr_tape_input(t, -1.0);
    cr_var r = cr_sqrt(t, x);
    expect(f, cr_tape_gradient(t, r, &x, 1, &g), CR_OK, "cr_tape_gradient", NULL);
    assert_true(isnan(r.v) && isnan(g));

    /* NULL buffers. */
    expect(f, cr_tape_gradient(t, r, NULL, 1, &g), CR_EINVAL, "cr_tape_gradient", "NULL");
    cr_tape_free(u);
    cr_tape_free(t);
}

/* ---- Misuse checks (cr_ctx_params.checks) ------------------------------------------------ */

static cr_ctx *checked_ctx(void)
{
    cr_ctx_params p = {.struct_size = sizeof p, .checks = CR_CTX_CHECK_TAPES};
    cr_ctx *c;
    assert_int_equal(cr_ctx_new(&p, &c), CR_OK);
    return c;
}

static cr_status f_square(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    *y = cr_mul(t, x[0], x[0]);
    return cr_tape_status(t);
}

static void test_checked_tape_works(void **state)
{
    (void)state;
    /* With the checks on, a tape records and differentiates as usual (every operation
     * through the library). */
    cr_ctx *c = checked_ctx();
    cr_tape *t;
    assert_int_equal(cr_tape_new(c, NULL, &t), CR_OK);
    double x = 3.0, y, g;
    assert_int_equal(cr_tape_value_and_gradient(t, f_square, NULL, &x, 1, &y, &g), CR_OK);
    ASSERT_DBL(y, 9.0);
    ASSERT_DBL(g, 6.0);
    cr_tape_reset(t);
    cr_var v = cr_tape_input(t, 2.0), s = cr_sin(t, cr_mul(t, v, v));
    assert_int_equal(cr_tape_gradient(t, s, &v, 1, &g), CR_OK);
    assert_close(g, cos(4.0) * 4.0, 1e-15);
    cr_tape_free(t);
    cr_ctx_free(c);
    g_cases++;
}

static void test_use_after_tape_free(void **state)
{
    (void)state;
    cr_ctx *c = checked_ctx();
    cr_tape *t;
    assert_int_equal(cr_tape_new(c, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 1.0);
    cr_tape_free(t);
    /* The struct is kept poisoned: every call fails instead of reading freed memory. */
    cr_var y = cr_tape_input(t, 2.0);
    assert_true(isnan(y.v));
    assert_true(isnan(cr_add(t, x, x).v));
    assert_int_equal(cr_tape_status(t), CR_EMISUSE);
    assert_contains(cr_tape_errmsg(t), "used after cr_tape_free");
    double g;
    assert_int_equal(cr_tape_gradient(t, x, &x, 1, &g), CR_EMISUSE);
    double in = 1.0;
    cr_var out;
    assert_int_equal(cr_tape_inputs(t, &in, 1, &out), CR_EMISUSE);
    assert_int_equal(cr_tape_value_and_gradient(t, f_square, NULL, &in, 1, &g, &g), CR_EMISUSE);
    cr_tape_reset(t);       /* ignored */
    cr_tape_clear_error(t); /* ignored */
    assert_int_equal(cr_tape_status(t), CR_EMISUSE);
    assert_int_equal(cr_tape_adopt(t), CR_EMISUSE);
    cr_tape_free(t); /* a second free does nothing */
    cr_ctx_free(c);  /* releases the quarantine */
    g_cases += 8;
}

static void test_use_after_ctx_free(void **state)
{
    (void)state;
    cr_ctx *c = checked_ctx();
    cr_tape *t;
    assert_int_equal(cr_tape_new(c, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 1.0);
    cr_ctx_free(c); /* a tape is alive: the context is kept, poisoned */
    cr_var y = cr_mul(t, x, x);
    assert_true(isnan(y.v));
    assert_int_equal(cr_tape_status(t), CR_EMISUSE);
    assert_contains(cr_tape_errmsg(t), "used after cr_ctx_free");
    double g;
    assert_int_equal(cr_tape_gradient(t, x, &x, 1, &g), CR_EMISUSE);
    cr_tape_free(t); /* the last tape: the context goes too (no leak under ASan) */
    g_cases += 2;
}

typedef struct other_thread {
    cr_tape *t;
    cr_var x;
    double y;
    cr_status st;
} other_thread;

static void *use_from_other_thread(void *arg)
{
    other_thread *o = arg;
    o->y = cr_mul(o->t, o->x, o->x).v;
    double g;
    o->st = cr_tape_gradient(o->t, o->x, &o->x, 1, &g);
    cr_tape_reset(o->t); /* refused: nothing of the tape is touched */
    cr_tape_free(o->t);  /* refused */
    return NULL;
}

static void *adopt_and_use(void *arg)
{
    other_thread *o = arg;
    o->st = cr_tape_adopt(o->t);
    cr_tape_reset(o->t);
    cr_var x = cr_tape_input(o->t, 3.0);
    double g = 0;
    if (o->st == CR_OK)
        o->st = cr_tape_gradient(o->t, cr_mul(o->t, x, x), &x, 1, &g);
    o->y = g;
    return NULL;
}

static void test_other_thread(void **state)
{
    (void)state;
    cr_ctx *c = checked_ctx();
    cr_tape *t;
    assert_int_equal(cr_tape_new(c, NULL, &t), CR_OK);
    other_thread o = {t, cr_tape_input(t, 2.0), 0, CR_OK};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, use_from_other_thread, &o), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(isnan(o.y));
    assert_int_equal(o.st, CR_EMISUSE);
    /* The owner's next call fails the tape, with the message. */
    cr_var z = cr_add(t, o.x, o.x);
    assert_true(isnan(z.v));
    assert_int_equal(cr_tape_status(t), CR_EMISUSE);
    assert_contains(cr_tape_errmsg(t), "thread other than its owner");

    /* Handed over properly (join orders it): adopted, then used there. */
    o.st = CR_EINVAL;
    assert_int_equal(pthread_create(&th, NULL, adopt_and_use, &o), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(o.st, CR_OK);
    ASSERT_DBL(o.y, 6.0);
    assert_int_equal(cr_tape_adopt(t), CR_OK); /* back to this thread */
    cr_tape_free(t);
    cr_ctx_free(c);
    g_cases += 3;
}

static void test_count(void **state)
{
    (void)state;
    printf("%zu C API cases\n", g_cases);
    assert_true(g_cases >= 70);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_overflowing_shapes, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_int64_extremes, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_integer_orders, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_calls, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_struct_sizes, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_variables, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_checked_tape_works),
        cmocka_unit_test(test_use_after_tape_free),
        cmocka_unit_test(test_use_after_ctx_free),
        cmocka_unit_test(test_other_thread),
        cmocka_unit_test(test_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
