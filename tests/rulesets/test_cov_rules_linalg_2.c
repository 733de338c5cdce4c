/*
 * Rare paths of the linear-algebra rules, continued: seeds and input tangents of the wrong
 * shape or NotImplemented (a clear status from every rule, never a crash or a silent
 * result), nrm2 when the registry has no rule for norm, and products over an empty inner
 * dimension.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

#include "test_linalg_fns.h"

static bool is_linalg(const cr_function *fn)
{
    for (size_t k = 0; k < NFNS; k++)
        if (k_fns[k]->u.func.fn == fn)
            return true;
    return false;
}

static const cr_notimpl k_ni = {__FILE__, __LINE__, "a test's NotImplemented seed"};

/* A status that says the tangent was wrong. */
static bool tangent_status(cr_status st)
{
    return st == CR_ETANGENT || st == CR_EUNIMPL || st == CR_ESHAPE;
}

/* Every linear-algebra rule at a point of its sampler: a seed of the wrong shape (an array
 * of 7 elements, or a 2 x 1 matrix for a scalar output) and a NotImplemented seed make the
 * pullback (or the evaluation of its cotangents) fail with a tangent status and a message;
 * an input tangent of the wrong shape makes the frule fail likewise. */
static void test_bad_tangents(void **state)
{
    fixture *fx = *state;
    const cr_registry *reg = cr_registry_builtin();
    double junk[7] = {1, 2, 3, 4, 5, 6, 7};
    cr_array J7 = cr_array_vector(junk, 7), J21 = cr_array_matrix(junk, 2, 1);
    size_t nrules = 0;
    for (size_t r = 0; r < cr_registry_size(reg); r++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, r, &info), CR_OK);
        if (!is_linalg(info.fn) || info.test == NULL || info.test->sample == NULL)
            continue;
        nrules++;
        size_t n = info.nargs;
        uint64_t rng = 777u + r;
        cr_arena_mark mark = cr_arena_get_mark(fx->arena);
        cr_value args[8], y, fv = cr_value_function(info.fn, NULL);
        assert_int_equal(info.test->sample(fx->arena, &rng, args, n, info.test->env), CR_OK);
        if (info.has_rrule) {
            for (int kind = 0; kind < 2; kind++) {
                cr_pullback pb;
                assert_int_equal(cr_rrule(NULL, fx->arena, &fv, args, n, &y, &pb), CR_OK);
                bool scalar_out =
                    y.kind == CR_KIND_F64 || y.kind == CR_KIND_F32 || y.kind == CR_KIND_C128;
                cr_tangent seed = kind == 1    ? cr_tangent_notimpl(&k_ni)
                                  : scalar_out ? cr_tangent_array(&J21)
                                               : cr_tangent_array(&J7);
                cr_tangent dx[8];
                cr_ctx_clear_error(fx->ctx);
                cr_status st = cr_pullback_call(fx->arena, &pb, &seed, dx, n + 1);
                /* a thunked cotangent may meet the bad seed only when evaluated */
                for (size_t i = 0; st == CR_OK && i <= n; i++) {
                    cr_tangent v;
                    st = cr_tangent_unthunk(dx[i], &v);
                }
                if (!tangent_status(st)) {
                    print_error("%s (%d arguments), %s seed: %s (%s)\n", info.fn->name, (int)n,
                                kind ? "NotImplemented" : "misshapen", cr_status_name(st),
                                cr_ctx_errmsg(fx->ctx));
                    fail();
                }
                assert_true(strlen(cr_ctx_errmsg(fx->ctx)) > 0);
                cr_ctx_clear_error(fx->ctx);
            }
        }
        if (info.has_frule) {
            /* the first floating-point array argument gets a misshapen tangent */
            size_t i = 0;
            while (i < n && !(args[i].kind == CR_KIND_ARRAY &&
                              cr_dtype_is_float((cr_dtype)args[i].u.arr->dtype)))
                i++;
            assert_true(i < n);
            cr_tangent din[8], dy;
            din[0] = cr_tangent_none();
            for (size_t j = 0; j < n; j++)
                din[j + 1] = cr_tangent_zero();
            din[i + 1] = cr_tangent_array(cr_array_numel(args[i].u.arr) == 7 ? &J21 : &J7);
            cr_ctx_clear_error(fx->ctx);
            cr_status st = cr_frule(NULL, fx->arena, din, &fv, args, n, &y, &dy);
            if (!tangent_status(st)) {
                print_error("%s (%d arguments), frule with a misshapen tangent of argument %zu: "
                            "%s (%s)\n",
                            info.fn->name, (int)n, i + 1, cr_status_name(st),
                            cr_ctx_errmsg(fx->ctx));
                fail();
            }
            assert_true(strlen(cr_ctx_errmsg(fx->ctx)) > 0);
            cr_ctx_clear_error(fx->ctx);
        }
        cr_arena_rewind(fx->arena, mark);
    }
    assert_true(nrules >= 12);
}

/* nrm2 is norm through dispatch: with a registry that opts norm out, nrm2 says so. */
static void test_nrm2_without_norm(void **state)
{
    fixture *fx = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &reg), CR_OK);
    const cr_argspec a1[1] = {CR_ARG_ARRAY_F64};
    assert_int_equal(cr_registry_opt_out(reg, CR_MODE_RRULE, cr_fn_norm.u.func.fn, a1, 1, false, 0),
                     CR_OK);
    assert_int_equal(cr_registry_opt_out(reg, CR_MODE_FRULE, cr_fn_norm.u.func.fn, a1, 1, false, 0),
                     CR_OK);
    cr_config cfg = {.registry = reg};
    double x[3] = {3, 0, 4};
    cr_array X = cr_array_vector(x, 3);
    cr_value a = cr_value_array(&X), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_nrm2, &a, 1, &y, &pb), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "nrm2: no rrule for norm");
    cr_ctx_clear_error(fx->ctx);
    cr_tangent din[2] = {cr_tangent_none(), cr_tangent_array(&X)}, dy;
    assert_int_equal(cr_frule(&cfg, fx->arena, din, &cr_fn_nrm2, &a, 1, &y, &dy), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "nrm2: no frule for norm");
    cr_ctx_clear_error(fx->ctx);
    /* the built-in registry still differentiates it */
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_nrm2, &a, 1, &y, &pb), CR_OK);
    ASSERT_DBL(y.u.f64, 5.0);
    cr_registry_free(reg);
}

#if defined(CR_HAVE_LAPACKE)

/* pinv of a 2 x 0 matrix: a 0 x 2 result; A Y is the 2 x 2 zero matrix (a product over an
 * empty inner dimension), and the pullback and frule give empty tangents. */
static void test_empty_inner(void **state)
{
    fixture *fx = *state;
    double dummy[1] = {0};
    cr_array E = cr_array_matrix(dummy, 2, 0), G = cr_array_matrix(dummy, 0, 2);
    cr_value a = cr_value_array(&E), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_pinv, &a, 1, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 0);
    assert_int_equal(y.u.arr->shape[1], 2);
    cr_tangent seed = cr_tangent_array(&G), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &seed, dx, 2), CR_OK);
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(dx[1], &v), CR_OK);
    assert_true(cr_tangent_is_zero(v) || cr_array_numel(v.u.arr) == 0);
    cr_tangent din[2] = {cr_tangent_none(), cr_tangent_array(&E)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, din, &cr_fn_pinv, &a, 1, &y, &dy), CR_OK);
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_tangents, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nrm2_without_norm, fixture_setup, fixture_teardown),
#if defined(CR_HAVE_LAPACKE)
        cmocka_unit_test_setup_teardown(test_empty_inner, fixture_setup, fixture_teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
