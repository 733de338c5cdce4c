/*
 * reduce(op, A, dims, init) for op +, *, max and min, which run the rules of sum, prod,
 * maximum and minimum and combine init with their values: values against foldl(op, slice,
 * init) of every slice gathered here (the generic fold: equal up to rounding for + and *,
 * exactly for max and min, in the fold's element type), frules and rrules against finite
 * differences (the rule testers) for f64, f32 and c128 arrays and every kind of init, the
 * conventions at ties, and the arena bytes of one reduction instead of a fold per slice.
 */
#include "test_rule_points.h"

#include <chainrules/rules_math.h>

static const cr_value k_nothing = {.kind = CR_KIND_NOTHING};

enum { R = 4, C = 5 };

/* reduce(op, A, dims, init) against foldl(op, slice, init) of each slice of the R x C
 * array A (dims: 0, 1, both, or all elements). */
static void check_against_fold(fixture *fx, const cr_value *op, cr_array *A, int dims,
                               cr_value init, bool exact)
{
    int64_t both[2] = {0, 1};
    size_t two = 2;
    cr_array D;
    assert_int_equal(cr_array_view_init(&D, both, CR_DT_I64, 1, &two, NULL), CR_OK);
    cr_value dv = dims == 0   ? cr_value_i64(0)
                  : dims == 1 ? cr_value_i64(1)
                  : dims == 2 ? cr_value_array(&D)
                              : k_nothing;
    cr_value args[4] = {*op, cr_value_array(A), dv, init}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 4, &y), CR_OK);
    size_t nout = dims == 0 ? C : dims == 1 ? R : 1, len = dims == 0 ? R : dims == 1 ? C : R * C;
    double tol = A->dtype == CR_DT_F32 ? 1e-6 : 1e-14;
    for (size_t q = 0; q < nout; q++) {
        cr_array *v;
        assert_int_equal(cr_array_new(fx->arena, (cr_dtype)A->dtype, 1, &len, &v), CR_OK);
        for (size_t i = 0; i < len; i++) {
            size_t r = dims == 0   ? i
                       : dims == 1 ? q
                                   : i / C,
                   c = dims == 0   ? q
                       : dims == 1 ? i
                                   : i % C;
            cr_complex x = cr_array_get_linear(A, r * C + c);
            if (A->dtype == CR_DT_C128)
                ((cr_complex *)v->data)[i] = x;
            else if (A->dtype == CR_DT_F32)
                ((float *)v->data)[i] = (float)creal(x);
            else
                ((double *)v->data)[i] = creal(x);
        }
        cr_value fa[3] = {*op, cr_value_array(v), init}, f;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_foldl, fa, 3, &f), CR_OK);
        cr_complex want = f.kind == CR_KIND_F64   ? f.u.f64
                          : f.kind == CR_KIND_F32 ? (double)f.u.f32
                                                  : f.u.c128;
        cr_complex got;
        if (dims == 3) {
            assert_int_equal(y.kind, f.kind);
            got = y.kind == CR_KIND_F64   ? y.u.f64
                  : y.kind == CR_KIND_F32 ? (double)y.u.f32
                                          : y.u.c128;
        } else {
            assert_int_equal(y.kind, CR_KIND_ARRAY);
            assert_int_equal(y.u.arr->dtype, f.kind == CR_KIND_F64   ? CR_DT_F64
                                             : f.kind == CR_KIND_F32 ? CR_DT_F32
                                                                     : CR_DT_C128);
            got = cr_array_get_linear(y.u.arr, q);
        }
        if (exact) {
            assert_true(got == want);
        } else {
            ASSERT_CLOSE(creal(got), creal(want), tol);
            ASSERT_CLOSE(cimag(got), cimag(want), tol);
        }
    }
}

static void test_against_fold_and_fd(void **state)
{
    fixture *fx = *state;
    double a[R * C];
    float af[R * C];
    cr_complex az[R * C];
    for (size_t k = 0; k < R * C; k++) { /* distinct values: no ties for max and min */
        a[k] = (k % 4 == 3 ? -1.0 : 1.0) * (0.55 + 0.0625 * (double)((k * 7) % (R * C)));
        af[k] = (float)a[k];
        az[k] = a[k] + 0.1 * (double)(k % 3) * (cr_complex)I;
    }
    size_t sh[2] = {R, C};
    cr_array A = cr_array_matrix(a, R, C), Af, Az;
    assert_int_equal(cr_array_view_init(&Af, af, CR_DT_F32, 2, sh, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&Az, az, CR_DT_C128, 2, sh, NULL), CR_OK);
    const cr_value *ops[4] = {&cr_fn_add, &cr_fn_mul, &cr_fn_max, &cr_fn_min};
    /* init between the elements (max and min: it wins some slices and not others), an
     * integer, an f32, a complex number */
    cr_value inits[4] = {cr_value_f64(0.9), cr_value_i64(1), cr_value_f32(0.75f),
                         cr_value_c128(0.7 - 0.2 * (cr_complex)I)};
    cr_array *xs[3] = {&A, &Af, &Az};
    for (int o = 0; o < 4; o++)
        for (int k = 0; k < 3; k++)
            for (int in = 0; in < 4; in++) {
                if (o >= 2 && (k == 2 || in == 3))
                    continue; /* max and min of complex numbers: refused */
                for (int d = 0; d < 4; d++) {
                    check_against_fold(fx, ops[o], xs[k], d, inits[in], o >= 2);
                    int64_t both[2] = {0, 1};
                    size_t two = 2;
                    cr_array D;
                    assert_int_equal(cr_array_view_init(&D, both, CR_DT_I64, 1, &two, NULL), CR_OK);
                    cr_value dv = d == 0   ? cr_value_i64(0)
                                  : d == 1 ? cr_value_i64(1)
                                  : d == 2 ? cr_value_array(&D)
                                           : k_nothing;
                    cr_value args[4] = {*ops[o], cr_value_array(xs[k]), dv, inits[in]};
                    check_point_strict(fx, NULL, &cr_fn_reduce, args, 4, true, "reduce with init");
                }
            }
}

/* Ties: max gives a tie between init and the slice's maximum to the element (the scalar
 * row's max(x, y) gives it to y), min gives it to init; among the elements the first tied
 * one gets it (maximum's). The values are the fold's. */
static void test_ties(void **state)
{
    fixture *fx = *state;
    double a[4] = {1, 3, 3, 2};
    cr_array A = cr_array_vector(a, 4);
    cr_value args[4] = {cr_fn_max, cr_value_array(&A), k_nothing, cr_value_f64(3)}, y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_f64(1), dx[5], t;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_reduce, args, 4, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 3);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 5), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[2], &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_ARRAY);
    static const double want_max[4] = {0, 1, 0, 0};
    for (size_t i = 0; i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(t.u.arr, i)), want_max[i]);
    assert_int_equal(dx[4].tag, CR_TAN_F64);
    ASSERT_DBL(dx[4].u.f64, 0);
    /* init above every element: all of it to init */
    args[3] = cr_value_f64(5);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_reduce, args, 4, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 5);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 5), CR_OK);
    ASSERT_DBL(dx[4].u.f64, 1);
    assert_int_equal(cr_tangent_unthunk(dx[2], &t), CR_OK);
    for (size_t i = 0; t.tag == CR_TAN_ARRAY && i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(t.u.arr, i)), 0);
    /* min: a tie between init and the minimum goes to init */
    args[0] = cr_fn_min;
    args[3] = cr_value_f64(1);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_reduce, args, 4, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 1);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 5), CR_OK);
    ASSERT_DBL(dx[4].u.f64, 1);
    assert_int_equal(cr_tangent_unthunk(dx[2], &t), CR_OK);
    for (size_t i = 0; t.tag == CR_TAN_ARRAY && i < 4; i++)
        ASSERT_DBL(creal(cr_array_get_linear(t.u.arr, i)), 0);
    /* max with a complex init is refused, as the fold refuses it */
    args[0] = cr_fn_max;
    args[3] = cr_value_c128(1);
    assert_int_not_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 4, &y), CR_OK);
    /* an integer init gets no cotangent */
    args[3] = cr_value_i64(0);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_reduce, args, 4, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 5), CR_OK);
    assert_int_equal(dx[4].tag, CR_TAN_NONE);
    /* a bad dims is reduce's refusal */
    args[2] = cr_value_i64(3);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 4, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "reduce");
}

/* reduce(op, A, 0, init) costs what the reduction costs and the output's size again, not a
 * gathered vector, a fold and its partials per slice. */
static void test_bytes(void **state)
{
    fixture *fx = *state;
    enum { N = 64 };
    static double a[N * N], g[N];
    for (size_t k = 0; k < N * N; k++)
        a[k] = 0.5 + 1e-3 * (double)k;
    for (size_t k = 0; k < N; k++)
        g[k] = 1.0 - 0.01 * (double)k;
    cr_array A = cr_array_matrix(a, N, N), G = cr_array_matrix(g, 1, N);
    const cr_value *ops[4] = {&cr_fn_add, &cr_fn_mul, &cr_fn_max, &cr_fn_min};
    const char *reds[4] = {"sum", "prod", "maximum", "minimum"};
    for (int o = 0; o < 4; o++) {
        cr_value r[4] = {*ops[o], cr_value_array(&A), cr_value_i64(0), cr_value_f64(0.75)};
        size_t with_init = rule_bytes(fx, &cr_fn_reduce, r, 4, &G, 2);
        const cr_function *fn = cr_registry_find(cr_registry_builtin(), reds[o]);
        assert_non_null(fn);
        cr_value red = cr_value_function(fn, NULL);
        size_t by_red = rule_bytes(fx, &red, r + 1, 2, &G, 1);
        /* the values m, the output and m̄: 3 N numbers of 16 bytes, and some headers */
        if (with_init > by_red + 3 * N * 16 + 1024)
            print_error("reduce(%s, A, 0, init): %zu bytes, %s(A, 0): %zu\n", reds[o], with_init,
                        reds[o], by_red);
        assert_true(with_init <= by_red + 3 * N * 16 + 1024);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_against_fold_and_fd, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_ties, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_bytes, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
