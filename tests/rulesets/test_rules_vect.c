/*
 * Tests of vect (cr_fn_vect, Julia's Base.vect): its registration through the rule tester,
 * then frule and rrule against finite differences at every count from 1 to 20 with f64, f32,
 * c128, integer and bool arguments mixed; the element type of the result; the cotangents'
 * kinds; and the error for no arguments.
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

static void test_registration(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    size_t tested = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        if (strcmp(info.fn->name, "vect") != 0)
            continue;
        assert_int_equal(info.def->linearity, CR_LINEAR);
        cr_test_opts opts = {0};
        opts.npoints = 40;
        cr_test_report r;
        CR_ASSERT_RULE_TEST(cr_test_rule_registration(fx->arena, &opts, &info, &r), r);
        tested++;
    }
    assert_int_equal(tested, 1);
}

/* Argument k of a mixed list. */
static cr_value arg_at(size_t k)
{
    double x = sin(1.7 * (double)k + 0.3);
    switch (k % 6) {
    case 1:
        return cr_value_f32((float)x);
    case 3:
        return cr_value_i64((int64_t)k);
    case 5:
        return cr_value_bool(k % 4 == 1);
    default:
        return cr_value_f64(x);
    }
}

static void test_counts(void **state)
{
    fixture *fx = *state;
    cr_value args[20];
    for (size_t n = 1; n <= 20; n++) {
        for (size_t k = 0; k < n; k++)
            args[k] = arg_at(k);
        if (n % 5 == 4)
            args[n - 1] = cr_value_c128(CMPLX(0.5, -0.25 * (double)n));
        cr_test_report r;
        CR_ASSERT_RULE_TEST(cr_test_rrule(fx->arena, NULL, &cr_fn_vect, args, n, &r), r);
        CR_ASSERT_RULE_TEST(cr_test_frule(fx->arena, NULL, &cr_fn_vect, args, n, &r), r);
        cr_value y;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_vect, args, n, &y, &pb), CR_OK);
        assert_int_equal(y.u.arr->ndim, 1);
        assert_int_equal(y.u.arr->shape[0], n);
        /* f32 alone stays f32; any f64 makes f64; a complex argument c128 */
        cr_dtype want = n % 5 == 4 ? CR_DT_C128 : CR_DT_F64;
        assert_int_equal(y.u.arr->dtype, want);
        for (size_t k = 0; k < n; k++) {
            cr_complex v = cr_array_get_linear(y.u.arr, k), w;
            switch (args[k].kind) {
            case CR_KIND_F32:
                w = (double)args[k].u.f32;
                break;
            case CR_KIND_I64:
                w = (double)args[k].u.i64;
                break;
            case CR_KIND_BOOL:
                w = args[k].u.b ? 1.0 : 0.0;
                break;
            case CR_KIND_C128:
                w = CMPLX(0.5, -0.25 * (double)n);
                break;
            default:
                w = args[k].u.f64;
            }
            assert_true(v == w);
        }
        /* cotangents: NoTangent for integers and bools, the argument's kind otherwise */
        double g[20];
        for (size_t k = 0; k < n; k++)
            g[k] = 1.0 + (double)k;
        cr_array G = cr_array_vector(g, n);
        cr_tangent dy = cr_tangent_array(&G), dx[21];
        assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, n + 1), CR_OK);
        for (size_t k = 0; k < n; k++) {
            int tag = dx[k + 1].tag;
            if (args[k].kind == CR_KIND_I64 || args[k].kind == CR_KIND_BOOL)
                assert_int_equal(tag, CR_TAN_NONE);
            else if (args[k].kind == CR_KIND_F32)
                assert_int_equal(tag, CR_TAN_F32);
            else if (args[k].kind == CR_KIND_F64)
                assert_true(tag == CR_TAN_F64 && dx[k + 1].u.f64 == g[k]);
        }
    }
    cr_value f[2] = {cr_value_f32(1.5f), cr_value_f32(-2.0f)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_vect, f, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    cr_value ints[2] = {cr_value_i64(3), cr_value_bool(true)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_vect, ints, 2, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F64);
    assert_true(cr_array_get_linear(y.u.arr, 0) == 3.0);
}

static void test_no_arguments(void **state)
{
    fixture *fx = *state;
    cr_value y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_vect, NULL, 0, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "vect: no arguments");
}

/* Every allocation short of room: CR_EARENA, then the result of a growable arena. */
static void test_arena_full(void **state)
{
    fixture *fx = *state;
    cr_value a[5] = {cr_value_f64(1.5), cr_value_f32(2.5f), cr_value_i64(3),
                     cr_value_c128(CMPLX(1, 2)), cr_value_bool(true)};
    assert_arena_sweep(fx, &cr_fn_vect, a, 5);
    assert_arena_sweep_rules(fx, &cr_fn_vect, a, 5);
    assert_arena_sweep(fx, &cr_fn_vect, a, 1);
    assert_arena_sweep_rules(fx, &cr_fn_vect, a, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registration, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_counts, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_no_arguments, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_full, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
