/*
 * broadcast and map with more arguments than a scalar row has (any number, element by element
 * through the function's own rules) and with functions of several outputs (a tuple of
 * arrays): values against the function computed here element by element, frules and rrules
 * against finite differences (the rule testers, and central differences of the primal for
 * more arguments than the testers take), structural cotangents with absent fields, and the
 * refusals.
 */
#include "test_polar.h"
#include "test_util.h"

/* f(x_1, ..., x_n) = Σ_k k x_k² + Π_k x_k, a function of any number of reals without a rule. */
static double many_value(const cr_value *args, size_t n)
{
    double s = 0, p = 1;
    for (size_t k = 0; k < n; k++) {
        double x = args[k].kind == CR_KIND_F32 ? (double)args[k].u.f32 : args[k].u.f64;
        s += (double)(k + 1) * x * x;
        p *= x;
    }
    return s + p;
}
static cr_status many_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    *out = cr_value_f64(many_value(args, n));
    return CR_OK;
}
static const cr_function many_fn = {"many", -1, many_primal, NULL, NULL, 0};

/* A function returning a tuple of an f64 and a c128, to check the types of the outputs. */
static const cr_field mixed_fields[2] = {{NULL, 0, CR_KIND_F64, NULL},
                                         {NULL, sizeof(cr_complex), CR_KIND_C128, NULL}};
static const cr_type mixed_type = {"tuple(f64,c128)", 2 * sizeof(cr_complex), 2, mixed_fields};
static cr_status mixed_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)f;
    (void)n;
    cr_complex *m = cr_arena_alloc(arena, 2 * sizeof *m, _Alignof(cr_complex));
    if (m == NULL)
        return CR_ENOMEM;
    double x = args[0].u.f64;
    *(double *)&m[0] = x * x;
    m[1] = x * (1.0 + 2.0 * (cr_complex)I);
    *out = cr_value_struct(&mixed_type, m);
    return CR_OK;
}
static const cr_function mixed_fn = {"mixed", 1, mixed_primal, NULL, NULL, 0};

/* A function returning a number or a tuple depending on its argument (refused). */
static cr_status fickle_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                               cr_value *out)
{
    if (args[0].u.f64 > 0)
        return polar_primal(arena, f, args, n, out);
    *out = cr_value_f64(1.0);
    return CR_OK;
}
static const cr_function fickle_fn = {"fickle", 2, fickle_primal, NULL, NULL, 0};

static cr_array *rand_array(cr_arena *arena, uint64_t *s, size_t ndim, const size_t *shape,
                            double lo, double hi)
{
    cr_array *a = NULL;
    assert_int_equal(cr_array_new(arena, CR_DT_F64, ndim, shape, &a), CR_OK);
    for (size_t i = 0; i < cr_array_numel(a); i++) {
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        ((double *)a->data)[i] = lo + (hi - lo) * (double)(*s >> 11) / 0x1p53;
    }
    return a;
}

static cr_config fd_cfg(cr_test_fd_env *env)
{
    cr_config cfg;
    assert_int_equal(cr_test_fd_config(NULL, NULL, NULL, env, &cfg), CR_OK);
    return cfg;
}

/* Six arguments through the rule testers: hypot's variadic rule, and a function without a
 * rule differentiated by the finite-difference configuration; map and broadcast. */
static void test_six_arguments(void **state)
{
    fixture *fx = *state;
    uint64_t s = 7;
    static const size_t s34[2] = {3, 4}, s4[1] = {4}, s31[2] = {3, 1};
    cr_value args[7], y;
    args[0] = cr_value_function(cr_registry_find(cr_registry_builtin(), "hypot"), NULL);
    for (size_t j = 1; j < 7; j++)
        args[j] = cr_value_array(rand_array(fx->arena, &s, 2, s34, 0.5, 1.5));
    /* values: hypot of the six, element by element */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_map, args, 7, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_ARRAY);
    for (size_t i = 0; i < 12; i++) {
        double q = 0;
        for (size_t j = 1; j < 7; j++) {
            double v = ((double *)args[j].u.arr->data)[i];
            q += v * v;
        }
        assert_close(creal(cr_array_get_linear(y.u.arr, i)), sqrt(q), 1e-14);
    }
    cr_test_report rep;
    for (int bc = 0; bc < 2; bc++) {
        const cr_value *fn = bc ? &cr_fn_broadcast : &cr_fn_map;
        assert_int_equal(cr_test_rrule(fx->arena, NULL, fn, args, 7, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
        assert_int_equal(cr_test_frule(fx->arena, NULL, fn, args, 7, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    }
    /* broadcast with stretched shapes and a number, a function without a rule */
    args[0] = cr_value_function(&many_fn, NULL);
    args[2] = cr_value_array(rand_array(fx->arena, &s, 1, s4, 0.5, 1.5));
    args[4] = cr_value_array(rand_array(fx->arena, &s, 2, s31, 0.5, 1.5));
    args[6] = cr_value_f64(0.75);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, args, 7, &y), CR_OK);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 4; j++) {
            cr_value e[6] = {
                cr_value_f64(((double *)args[1].u.arr->data)[4 * i + j]),
                cr_value_f64(((double *)args[2].u.arr->data)[j]),
                cr_value_f64(((double *)args[3].u.arr->data)[4 * i + j]),
                cr_value_f64(((double *)args[4].u.arr->data)[i]),
                cr_value_f64(((double *)args[5].u.arr->data)[4 * i + j]),
                args[6],
            };
            assert_close(creal(cr_array_get_linear(y.u.arr, 4 * i + j)), many_value(e, 6), 1e-14);
        }
    cr_test_fd_env env;
    cr_config cfg = fd_cfg(&env);
    cr_test_opts opts = {.cfg = &cfg};
    assert_int_equal(cr_test_rrule(fx->arena, &opts, &cr_fn_broadcast, args, 7, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    assert_int_equal(cr_test_frule(fx->arena, &opts, &cr_fn_broadcast, args, 7, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    /* map refuses stretched shapes */
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_map, args, 7, &y), CR_ESHAPE);
}

/* Eleven arrays (more than the testers take): the pullback and the frule against central
 * differences of the primal, coordinate by coordinate. */
static void test_eleven_arguments(void **state)
{
    fixture *fx = *state;
    enum { N = 11 };
    uint64_t s = 11;
    static const size_t s23[2] = {2, 3};
    cr_value args[N + 1], y, yp, ym;
    args[0] = cr_value_function(cr_registry_find(cr_registry_builtin(), "hypot"), NULL);
    for (size_t j = 1; j <= N; j++)
        args[j] = cr_value_array(rand_array(fx->arena, &s, 2, s23, 0.5, 1.5));
    for (int bc = 0; bc < 2; bc++) {
        const cr_value *fn = bc ? &cr_fn_broadcast : &cr_fn_map;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, fn, args, N + 1, &y, &pb), CR_OK);
        /* the loss Σ_i w_i y_i with w_i = i + 1 */
        cr_array *w = rand_array(fx->arena, &s, 2, s23, 0, 0);
        for (size_t i = 0; i < 6; i++)
            ((double *)w->data)[i] = (double)i + 1;
        cr_tangent dy = cr_tangent_array(w), dx[N + 2];
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, N + 2), CR_OK);
        /* the frule along the direction e_(j, i) of every coordinate */
        cr_tangent dargs[N + 2];
        for (size_t j = 1; j <= N; j++) {
            cr_tangent g;
            assert_int_equal(cr_tangent_unthunk(dx[j + 1], &g), CR_OK);
            assert_int_equal(g.tag, CR_TAN_ARRAY);
            for (size_t i = 0; i < 6; i++) {
                double *x = &((double *)args[j].u.arr->data)[i], x0 = *x, h = 1e-6;
                *x = x0 + h;
                assert_int_equal(cr_function_call(fx->arena, fn, args, N + 1, &yp), CR_OK);
                *x = x0 - h;
                assert_int_equal(cr_function_call(fx->arena, fn, args, N + 1, &ym), CR_OK);
                *x = x0;
                double fd = 0;
                for (size_t k = 0; k < 6; k++)
                    fd +=
                        (double)(k + 1) *
                        creal(cr_array_get_linear(yp.u.arr, k) - cr_array_get_linear(ym.u.arr, k)) /
                        (2 * h);
                ASSERT_CLOSE(creal(cr_array_get_linear(g.u.arr, i)), fd, 1e-7);
                cr_array *e = rand_array(fx->arena, &s, 2, s23, 0, 0);
                ((double *)e->data)[i] = 1;
                for (size_t q = 0; q <= N + 1; q++)
                    dargs[q] = q == j + 1 ? cr_tangent_array(e) : cr_tangent_zero();
                cr_tangent t;
                assert_int_equal(cr_frule(NULL, fx->arena, dargs, fn, args, N + 1, &y, &t), CR_OK);
                assert_int_equal(t.tag, CR_TAN_ARRAY);
                double jv = 0;
                for (size_t k = 0; k < 6; k++)
                    jv += (double)(k + 1) * creal(cr_array_get_linear(t.u.arr, k));
                ASSERT_CLOSE(jv, fd, 1e-7);
            }
        }
    }
}

/* sincos.(A): a tuple of two arrays (sin, cos), checked by the rule testers; a cotangent
 * with one field zero or absent. */
static void test_sincos(void **state)
{
    fixture *fx = *state;
    double a[6] = {0.3, -1.2, 0.8, 2.0, -0.5, 1.1};
    cr_array A = cr_array_matrix(a, 2, 3);
    cr_value args[2] = {cr_fn_sincos, cr_value_array(&A)}, y;
    for (int bc = 0; bc < 2; bc++) {
        const cr_value *fn = bc ? &cr_fn_broadcast : &cr_fn_map;
        assert_int_equal(cr_function_call(fx->arena, fn, args, 2, &y), CR_OK);
        assert_int_equal(y.kind, CR_KIND_STRUCT);
        assert_int_equal(y.u.obj.type->nfields, 2);
        const cr_array *out = y.u.obj.ptr;
        for (size_t i = 0; i < 6; i++) {
            assert_close(creal(cr_array_get_linear(&out[0], i)), sin(a[i]), 1e-15);
            assert_close(creal(cr_array_get_linear(&out[1], i)), cos(a[i]), 1e-15);
        }
        assert_int_equal(out[0].ndim, 2);
        assert_int_equal(out[0].shape[1], 3);
        cr_test_report rep;
        assert_int_equal(cr_test_rrule(fx->arena, NULL, fn, args, 2, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
        assert_int_equal(cr_test_frule(fx->arena, NULL, fn, args, 2, &rep), CR_OK);
        assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    }
    /* the cotangent (ȳ_sin, absent): Ā = cos(A) ȳ_sin */
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_broadcast, args, 2, &y, &pb), CR_OK);
    double g[6] = {1, 2, 3, 4, 5, 6};
    cr_array G = cr_array_matrix(g, 2, 3);
    cr_tangent f0 = cr_tangent_array(&G), dy, dx[3], ga;
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, &f0, 1, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(cr_tangent_unthunk(dx[2], &ga), CR_OK);
    for (size_t i = 0; i < 6; i++)
        assert_close(creal(cr_array_get_linear(ga.u.arr, i)), cos(a[i]) * g[i], 1e-14);
    /* a zero cotangent: a zero cotangent for A */
    dy = cr_tangent_zero();
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_OK);
    assert_true(cr_tangent_is_zero(dx[2]));
    /* a cotangent that is not a tuple, or of another number of fields */
    dy = cr_tangent_array(&G);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 3), CR_ETANGENT);
}

/* A function without a rule returning a tuple: polar(x, y) = (r, θ) over a matrix and a
 * broadcast row, through the finite-difference configuration; a tuple of an f64 and a c128
 * keeps each output's type. */
static void test_user_tuple(void **state)
{
    fixture *fx = *state;
    uint64_t s = 3;
    static const size_t s34[2] = {3, 4}, s4[1] = {4};
    cr_value args[3] = {cr_value_function(&polar_fn, NULL),
                        cr_value_array(rand_array(fx->arena, &s, 2, s34, 0.5, 1.5)),
                        cr_value_array(rand_array(fx->arena, &s, 1, s4, -1.0, 1.0))},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, args, 3, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    const cr_array *out = y.u.obj.ptr;
    for (size_t i = 0; i < 12; i++) {
        double xv = ((double *)args[1].u.arr->data)[i], yv = ((double *)args[2].u.arr->data)[i % 4];
        assert_close(creal(cr_array_get_linear(&out[0], i)), hypot(xv, yv), 1e-15);
        assert_close(creal(cr_array_get_linear(&out[1], i)), atan2(yv, xv), 1e-15);
    }
    cr_test_fd_env env;
    cr_config cfg = fd_cfg(&env);
    cr_test_opts opts = {.cfg = &cfg};
    cr_test_report rep;
    assert_int_equal(cr_test_rrule(fx->arena, &opts, &cr_fn_broadcast, args, 3, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    assert_int_equal(cr_test_frule(fx->arena, &opts, &cr_fn_broadcast, args, 3, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    /* polar's own rrule, registered: the elements' pullbacks are polar's, which take the
     * structural cotangent of its tuple */
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, cr_registry_builtin(), &reg), CR_OK);
    static const cr_argspec f64s[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &polar_fn, .nargs = 2, .args = f64s, .rrule = polar_rrule};
    assert_int_equal(cr_registry_add(reg, &def), CR_OK);
    cr_config rcfg = {.struct_size = sizeof rcfg, .registry = reg};
    cr_test_opts ropts = {.cfg = &rcfg};
    assert_int_equal(cr_test_rrule(fx->arena, &ropts, &cr_fn_broadcast, args, 3, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
    cr_registry_free(reg);
    /* (x², (1 + 2i) x): an f64 array and a c128 array */
    cr_value margs[2] = {cr_value_function(&mixed_fn, NULL), args[1]};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_map, margs, 2, &y), CR_OK);
    out = y.u.obj.ptr;
    assert_int_equal(out[0].dtype, CR_DT_F64);
    assert_int_equal(out[1].dtype, CR_DT_C128);
    double x0 = ((double *)args[1].u.arr->data)[0];
    assert_close(creal(cr_array_get_linear(&out[0], 0)), x0 * x0, 1e-15);
    assert_close(cimag(cr_array_get_linear(&out[1], 0)), 2 * x0, 1e-15);
    assert_int_equal(cr_test_rrule(fx->arena, &opts, &cr_fn_map, margs, 2, &rep), CR_OK);
    assert_int_equal(rep.verdict, CR_VERDICT_PASS);
}

/* Elements returning a number and a tuple; a tuple of no values. */
static void test_refusals(void **state)
{
    fixture *fx = *state;
    double a[4] = {1, -1, 2, -2};
    cr_array A = cr_array_vector(a, 4);
    cr_value args[3] = {cr_value_function(&fickle_fn, NULL), cr_value_array(&A), cr_value_f64(1)},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_broadcast, args, 3, &y), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(fx->ctx), "every element must return the same type"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_six_arguments, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eleven_arguments, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sincos, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_user_tuple, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
