/*
 * reduce(op, A[, dims[, init]]) and accumulate_ex(op, A, dim[, init]), Julia's reduce and
 * accumulate with dims: values against folds computed here in the stated order (row-major
 * over each slice), frules and rrules against finite differences (the rule testers) for
 * rows, a complex array, an f32 array, every kind of init and an op without a rule (through
 * the finite-difference configuration), and the refusals.
 */
#include "test_rule_points.h"

static const cr_value k_nothing = {.kind = CR_KIND_NOTHING};

/* a - b / 2: not associative, so the order of the fold shows */
static cr_status skew_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    double a = args[0].kind == CR_KIND_I64 ? (double)args[0].u.i64 : args[0].u.f64;
    *out = cr_value_f64(a * a / 4 - args[1].u.f64 / 2);
    return CR_OK;
}
static const cr_function skew_fn = {"skew", 2, skew_primal, NULL, NULL, 0};
static double skew(double a, double b)
{
    return a * a / 4 - b / 2;
}

static cr_value fn_named(const char *name)
{
    const cr_function *f = cr_registry_find(cr_registry_builtin(), name);
    assert_non_null(f);
    return cr_value_function(f, NULL);
}

static void test_values(void **state)
{
    fixture *fx = *state;
    /* a 2 x 3 x 2 array */
    double a[12];
    for (size_t i = 0; i < 12; i++)
        a[i] = 0.5 + 0.1 * (double)i;
    size_t sh[3] = {2, 3, 2};
    cr_array A;
    assert_int_equal(cr_array_view_init(&A, a, CR_DT_F64, 3, sh, NULL), CR_OK);
    cr_value skewv = cr_value_function(&skew_fn, NULL), y;
    /* reduce over dims (0, 2): one value per j, the fold over (i, k) in row-major order */
    int64_t d02[2] = {0, 2};
    size_t n2 = 2;
    cr_array D;
    assert_int_equal(cr_array_view_init(&D, d02, CR_DT_I64, 1, &n2, NULL), CR_OK);
    cr_value args[4] = {skewv, cr_value_array(&A), cr_value_array(&D), cr_value_f64(0.3)};
    for (size_t withinit = 0; withinit < 2; withinit++) {
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3 + withinit, &y), CR_OK);
        assert_int_equal(y.kind, CR_KIND_ARRAY);
        assert_int_equal(y.u.arr->ndim, 3);
        assert_int_equal(y.u.arr->shape[0], 1);
        assert_int_equal(y.u.arr->shape[1], 3);
        assert_int_equal(y.u.arr->shape[2], 1);
        for (size_t j = 0; j < 3; j++) {
            double v[4] = {a[2 * j], a[2 * j + 1], a[6 + 2 * j], a[6 + 2 * j + 1]};
            double r = withinit ? skew(0.3, v[0]) : v[0];
            for (size_t k = 1; k < 4; k++)
                r = skew(r, v[k]);
            assert_close(creal(cr_array_get_linear(y.u.arr, j)), r, 1e-15);
        }
    }
    /* without dims (and with dims nothing): the fold of every element, a number */
    double all = a[0];
    for (size_t k = 1; k < 12; k++)
        all = skew(all, a[k]);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 2, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_F64);
    assert_close(y.u.f64, all, 1e-15);
    args[2] = k_nothing;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3, &y), CR_OK);
    assert_close(y.u.f64, all, 1e-15);
    /* reduce(+, A, 1) is sum(A, 1) */
    args[0] = cr_fn_add;
    args[2] = cr_value_i64(1);
    cr_value sargs[2] = {args[1], args[2]}, ys;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3, &y), CR_OK);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_sum, sargs, 2, &ys), CR_OK);
    for (size_t i = 0; i < 4; i++)
        assert_close(creal(cr_array_get_linear(y.u.arr, i)),
                     creal(cr_array_get_linear(ys.u.arr, i)), 1e-15);
    /* accumulate_ex along dim 1: every line (i, :, k) accumulated, A's shape */
    args[0] = skewv;
    for (size_t withinit = 0; withinit < 2; withinit++) {
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_accumulate_ex, args, 3 + withinit, &y),
                         CR_OK);
        assert_int_equal(y.u.arr->ndim, 3);
        for (size_t i = 0; i < 2; i++)
            for (size_t k = 0; k < 2; k++) {
                double r = 0;
                for (size_t j = 0; j < 3; j++) {
                    double v = a[6 * i + 2 * j + k];
                    r = j == 0 ? (withinit ? skew(0.3, v) : v) : skew(r, v);
                    assert_close(creal(cr_array_get_linear(y.u.arr, 6 * i + 2 * j + k)), r, 1e-15);
                }
            }
    }
}

static void test_rules(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.6, 1.2, 0.8, 1.4, 0.5, 1.1};
    float af[6] = {0.6f, 1.2f, 0.8f, 1.4f, 0.5f, 1.1f};
    cr_complex az[6] = {0.6 + 0.1 * (cr_complex)I, 1.2, 0.8 - 0.3 * (cr_complex)I, 1.4,
                        0.5 + 0.2 * (cr_complex)I, 1.1};
    size_t s23[2] = {2, 3};
    cr_array A = cr_array_matrix(a, 2, 3), Af, Az;
    assert_int_equal(cr_array_view_init(&Af, af, CR_DT_F32, 2, s23, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&Az, az, CR_DT_C128, 2, s23, NULL), CR_OK);
    const cr_array *xs[3] = {&A, &Af, &Az};
    cr_value ops[3] = {cr_fn_mul, cr_fn_add, fn_named("hypot")};
    cr_value inits[4] = {k_nothing, cr_value_f64(0.7), cr_value_i64(2),
                         cr_value_c128(0.7 - 0.2 * (cr_complex)I)};
    for (size_t k = 0; k < 3; k++)
        for (size_t o = 0; o < 3; o++) {
            if (o == 2 && k == 2)
                continue; /* hypot is real */
            for (size_t in = 0; in < 4; in++) {
                if (o == 2 && in == 3)
                    continue; /* a complex init makes the fold complex */
                cr_value args[4] = {ops[o], cr_value_array((cr_array *)xs[k]), cr_value_i64(1),
                                    inits[in]};
                size_t n = in == 0 ? 3 : 4;
                check_point_strict(fx, NULL, &cr_fn_reduce, args, n, false, "reduce dims 1");
                check_point_strict(fx, NULL, &cr_fn_accumulate_ex, args, n, false,
                                   "accumulate_ex dim 1");
                args[2] = cr_value_i64(0);
                check_point_strict(fx, NULL, &cr_fn_accumulate_ex, args, n, false,
                                   "accumulate_ex dim 0");
                args[2] = k_nothing;
                check_point_strict(fx, NULL, &cr_fn_reduce, args, n, false, "reduce all");
            }
        }
    /* an op without a rule, through the finite-difference configuration */
    cr_test_fd_env env;
    cr_config cfg;
    assert_int_equal(cr_test_fd_config(NULL, NULL, NULL, &env, &cfg), CR_OK);
    cr_test_opts opts = {.cfg = &cfg};
    cr_value args[4] = {cr_value_function(&skew_fn, NULL), cr_value_array(&A), cr_value_i64(0),
                        cr_value_f64(0.4)};
    check_point_strict(fx, &opts, &cr_fn_reduce, args, 4, false, "reduce skew");
    check_point_strict(fx, &opts, &cr_fn_accumulate_ex, args, 4, false, "accumulate_ex skew");
    check_point_strict(fx, &opts, &cr_fn_reduce, args, 2, false, "reduce skew all");
}

/* The cotangent of init: the sum over the slices, here against central differences. */
static void test_init_cotangent(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.6, 1.2, 0.8, 1.4, 0.5, 1.1}, h = 1e-6, i0 = 0.9;
    cr_array A = cr_array_matrix(a, 2, 3);
    cr_value args[4] = {cr_fn_mul, cr_value_array(&A), cr_value_i64(1), cr_value_f64(i0)}, y, yp,
             ym;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_reduce, args, 4, &y, &pb), CR_OK);
    double w[2] = {1.0, -2.0};
    cr_array W = cr_array_matrix(w, 2, 1);
    cr_tangent dy = cr_tangent_array(&W), dx[5];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 5), CR_OK);
    args[3] = cr_value_f64(i0 + h);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 4, &yp), CR_OK);
    args[3] = cr_value_f64(i0 - h);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 4, &ym), CR_OK);
    double fd = 0;
    for (size_t i = 0; i < 2; i++)
        fd += w[i] * creal(cr_array_get_linear(yp.u.arr, i) - cr_array_get_linear(ym.u.arr, i)) /
              (2 * h);
    assert_int_equal(dx[4].tag, CR_TAN_F64);
    ASSERT_CLOSE(dx[4].u.f64, fd, 1e-8);
    assert_int_equal(dx[3].tag, CR_TAN_NONE); /* dims */
    /* a zero cotangent */
    dy = cr_tangent_zero();
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 5), CR_OK);
    assert_true(cr_tangent_is_zero(dx[2]));
    assert_true(cr_tangent_is_zero(dx[4]));
}

static void test_refusals(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.6, 1.2, 0.8, 1.4, 0.5, 1.1};
    cr_array A = cr_array_matrix(a, 2, 3), E;
    size_t e0[2] = {2, 0};
    assert_int_equal(cr_array_view_init(&E, a, CR_DT_F64, 2, e0, NULL), CR_OK);
    cr_value y, args[4] = {cr_fn_mul, cr_value_array(&A), cr_value_i64(2), cr_value_f64(1)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3, &y), CR_EINVAL);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_accumulate_ex, args, 3, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "accumulate_ex: dimension 2 out of range"));
    args[2] = cr_value_i64(1);
    args[3] = cr_value_array(&A);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 4, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "init is a array, not a number"));
    args[0] = cr_value_f64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3, &y), CR_EINVAL);
    /* empty slices: foldl's init is needed */
    args[0] = cr_fn_mul;
    args[1] = cr_value_array(&E);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3, &y), CR_EINVAL);
    args[3] = cr_value_f64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 4, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 2);
    assert_close(creal(cr_array_get_linear(y.u.arr, 1)), 2.0, 0);
    /* an integer array, and too few arguments */
    int64_t ia[6] = {1, 2, 3, 4, 5, 6};
    size_t s23[2] = {2, 3};
    cr_array Ia;
    assert_int_equal(cr_array_view_init(&Ia, ia, CR_DT_I64, 2, s23, NULL), CR_OK);
    args[1] = cr_value_array(&Ia);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "takes an f64, f32 or c128 array, not");
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_accumulate_ex, args, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "accumulate_ex");
}

/* reduce and accumulate_ex along dims, with and without init, real and complex, in arenas
 * too small for them: CR_EARENA at every size short of room, the results once it fits. */
static void test_arena_sweep(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.6, 1.2, 0.8, 1.4, 0.5, 1.1}, ca[12];
    for (int i = 0; i < 6; i++) {
        ca[2 * i] = a[i];
        ca[2 * i + 1] = 0.1 * (i - 2);
    }
    cr_array A = cr_array_matrix(a, 2, 3), CA = cr_array_matrix(ca, 2, 3);
    CA.dtype = CR_DT_C128;
    for (int c = 0; c < 2; c++) {
        cr_value args[4] = {cr_fn_mul, cr_value_array(c ? &CA : &A), cr_value_i64(1),
                            cr_value_f64(0.75)};
        assert_arena_sweep_rules(fx, &cr_fn_reduce, args, 3);
        assert_arena_sweep_rules(fx, &cr_fn_reduce, args, 4);
        assert_arena_sweep_rules(fx, &cr_fn_accumulate_ex, args, 3);
        assert_arena_sweep_rules(fx, &cr_fn_accumulate_ex, args, 4);
        args[0] = cr_fn_add;
        args[2] = cr_value_i64(0);
        assert_arena_sweep_rules(fx, &cr_fn_reduce, args, 3);
        assert_arena_sweep_rules(fx, &cr_fn_accumulate_ex, args, 4);
    }
}

/* ---- reduce by a reduction: +, *, max, min -------------------------------------------------- */

/* The left fold of op over A's slice along dims (row-major over the reduced dimensions),
 * computed here for a 2-d f64 A (r x c) and dims 0, 1 or both (-1). */
static double fold_ref(int op, const double *A, size_t r, size_t c, int dims, size_t out)
{
    double acc = 0;
    bool first = true;
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++) {
            if ((dims == 0 && j != out) || (dims == 1 && i != out))
                continue;
            double v = A[i * c + j];
            acc = first     ? v
                  : op == 0 ? acc + v
                  : op == 1 ? acc * v
                  : op == 2 ? (v > acc ? v : acc)
                            : (v < acc ? v : acc);
            first = false;
        }
    return acc;
}

/* reduce(+ * max min, A, dims) without init: values bit for bit the left fold over each
 * slice (the reduction over the same order), and the frule and rrule against finite
 * differences, for f64, f32 and (+, *) c128 arrays, dims 0, 1, both and nothing. */
static void test_by_reduction(void **state)
{
    fixture *fx = *state;
    enum { R = 4, C = 5 };
    double a[R * C];
    float af[R * C];
    cr_complex az[R * C];
    for (size_t k = 0; k < R * C; k++) { /* distinct values: no ties for max and min */
        a[k] = 0.55 + 0.0625 * (double)((k * 7) % (R * C));
        af[k] = (float)a[k];
        az[k] = a[k] + 0.1 * (double)(k % 3) * (cr_complex)I;
    }
    size_t sh[2] = {R, C}, two = 2;
    int64_t both[2] = {0, 1};
    cr_array A = cr_array_matrix(a, R, C), Af, Az, D;
    assert_int_equal(cr_array_view_init(&Af, af, CR_DT_F32, 2, sh, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&Az, az, CR_DT_C128, 2, sh, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&D, both, CR_DT_I64, 1, &two, NULL), CR_OK);
    cr_value ops[4] = {cr_fn_add, cr_fn_mul, cr_fn_max, cr_fn_min};
    cr_value dimv[4] = {cr_value_i64(0), cr_value_i64(1), cr_value_array(&D), k_nothing};
    for (int o = 0; o < 4; o++)
        for (int d = 0; d < 4; d++) {
            cr_value args[3] = {ops[o], cr_value_array(&A), dimv[d]}, y;
            assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3, &y), CR_OK);
            int dims = d == 0 ? 0 : d == 1 ? 1 : -1;
            size_t nout = dims == 0 ? C : dims == 1 ? R : 1;
            for (size_t q = 0; q < nout; q++) {
                double want = fold_ref(o, a, R, C, dims, q);
                double got = d == 3 ? y.u.f64 : creal(cr_array_get_linear(y.u.arr, q));
                /* the same order, bit for bit: one reduced dimension, or prod, max, min */
                if (d < 2 || o > 0)
                    assert_memory_equal(&got, &want, sizeof got);
                else
                    ASSERT_CLOSE(got, want, 1e-14);
            }
            check_point_strict(fx, NULL, &cr_fn_reduce, args, 3, false,
                               "reduce by a reduction (f64)");
            args[1] = cr_value_array(&Af);
            check_point_strict(fx, NULL, &cr_fn_reduce, args, 3, false,
                               "reduce by a reduction (f32)");
            if (o < 2) {
                args[1] = cr_value_array(&Az);
                check_point_strict(fx, NULL, &cr_fn_reduce, args, 3, false,
                                   "reduce by a reduction (c128)");
            }
            /* without dims: reduce(op, A) */
            args[1] = cr_value_array(&A);
            check_point_strict(fx, NULL, &cr_fn_reduce, args, 2, false,
                               "reduce by a reduction (all)");
        }
}

/* The reductions' conventions: max's cotangent goes to the first of tied elements
 * (maximum's), min's too; a max of complex numbers is still refused. */
static void test_by_reduction_ties(void **state)
{
    fixture *fx = *state;
    double a[4] = {1, 3, 3, 2};
    cr_array A = cr_array_matrix(a, 1, 4);
    cr_value args[3] = {cr_fn_max, cr_value_array(&A), cr_value_i64(1)}, y;
    cr_pullback pb;
    double g = 1;
    cr_array G = cr_array_matrix(&g, 1, 1);
    cr_tangent dy = cr_tangent_array(&G), dx[4], t;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_reduce, args, 3, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[2], &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_ARRAY);
    assert_true(creal(cr_array_get_linear(t.u.arr, 1)) == 1.0);
    assert_true(creal(cr_array_get_linear(t.u.arr, 2)) == 0.0);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    assert_int_equal(dx[3].tag, CR_TAN_NONE);
    a[0] = 2;
    a[3] = 2;
    args[0] = cr_fn_min;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_reduce, args, 3, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[2], &t), CR_OK);
    assert_true(creal(cr_array_get_linear(t.u.arr, 0)) == 1.0);
    assert_true(creal(cr_array_get_linear(t.u.arr, 3)) == 0.0);
    /* complex max: no row, refused as before */
    cr_complex z[2] = {1, 2};
    cr_array Z = cr_array_matrix((double *)z, 1, 2);
    Z.dtype = CR_DT_C128;
    args[0] = cr_fn_max;
    args[1] = cr_value_array(&Z);
    assert_int_not_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3, &y), CR_OK);
    /* a bad dims is reduce's refusal */
    args[1] = cr_value_array(&A);
    args[2] = cr_value_i64(2);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_reduce, args, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "reduce");
}

/* reduce(+, A, 0) costs what sum(A, 0) costs, not a vector, a fold and its partials per
 * slice: its arena bytes are sum's and a few hundred more (before the reductions took them,
 * a 64 x 64 matrix took 412 KB against sum's 34 KB: the gathered slices, their
 * partials and the index table). */
static void test_by_reduction_bytes(void **state)
{
    fixture *fx = *state;
    enum { N = 64 };
    static double a[N * N], g[N];
    for (size_t k = 0; k < N * N; k++)
        a[k] = 0.5 + 1e-3 * (double)k;
    for (size_t k = 0; k < N; k++)
        g[k] = 1.0 - 0.01 * (double)k;
    cr_array A = cr_array_matrix(a, N, N), G = cr_array_matrix(g, 1, N);
    cr_value r[3] = {cr_fn_add, cr_value_array(&A), cr_value_i64(0)};
    size_t by_reduce = rule_bytes(fx, &cr_fn_reduce, r, 3, &G, 2);
    size_t by_sum = rule_bytes(fx, &cr_fn_sum, r + 1, 2, &G, 1);
    if (by_reduce > by_sum + 512)
        print_error("reduce(+, A, 0): %zu bytes, sum(A, 0): %zu\n", by_reduce, by_sum);
    assert_true(by_reduce <= by_sum + 512);
    r[0] = cr_fn_max;
    size_t by_max = rule_bytes(fx, &cr_fn_reduce, r, 3, &G, 2);
    cr_value maximum = fn_named("maximum");
    size_t by_maximum = rule_bytes(fx, &maximum, r + 1, 2, &G, 1);
    assert_true(by_max <= by_maximum + 512);
    /* an op without a reduction: slice by slice, Ā accumulated in f64 for a real A (before,
     * in c128 with every slice's cotangent converted: 412 KB here, now 272 KB) */
    r[0] = fn_named("hypot");
    size_t by_slices = rule_bytes(fx, &cr_fn_reduce, r, 3, &G, 2);
    assert_true(by_slices < 400000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_values, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rules, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_init_cotangent, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_sweep, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_by_reduction, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_by_reduction_ties, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_by_reduction_bytes, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
