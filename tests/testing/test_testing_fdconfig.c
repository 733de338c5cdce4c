/*
 * The testing utilities catching what they are for (testing.h): the finite-difference rule
 * configuration makes a higher-order rule that calls back into AD testable without an
 * engine, so a deliberately wrong one FAILs (and its correct twin PASSes); test_approx
 * names the field, element or complex part that differs, and by how much; grad of a
 * function of an array and of a struct matches the gradients worked out by hand.
 */
#include "test_util.h"

/* ---- A higher-order rule that calls back into AD: apply_twice(g, x) = g(g(x)) ------------- */

/* softplus(x) = log(1 + e^x): a function with a primal and no rule */
static cr_status softplus_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                                 cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    if (args[0].kind != CR_KIND_F64)
        return CR_EINVAL;
    *out = cr_value_f64(log1p(exp(args[0].u.f64)));
    return CR_OK;
}
static const cr_function softplus_fn = {"softplus", 1, softplus_primal, NULL, NULL, 0};

static cr_status twice_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)f;
    (void)nargs;
    cr_value gx;
    cr_status st = cr_function_call(arena, &args[0], &args[1], 1, &gx);
    return st == CR_OK ? cr_function_call(arena, &args[0], &gx, 1, out) : st;
}

/* udata of the rules: 0 the correct rule, 1 a wrong pullback (the outer derivative is
 * dropped), 2 a wrong frule (the inner tangent is used twice) */
static const int k_right = 0, k_wrong_pb = 1, k_wrong_fr = 2;
static const cr_function twice_fn = {"apply_twice", 2, twice_primal, NULL, NULL, 0};

typedef struct twice_env {
    cr_pullback inner, outer;
    int mode;
} twice_env;

static cr_status twice_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    const twice_env *e = env;
    cr_tangent d_outer[2], d_inner[2];
    cr_status st = cr_pullback_call(arena, &e->outer, dy, d_outer, 2);
    if (st == CR_OK) /* the wrong one skips the outer pullback's factor */
        st = cr_pullback_call(arena, &e->inner, e->mode == k_wrong_pb ? dy : &d_outer[1], d_inner,
                              2);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[2] = d_inner[1];
    return cr_tangent_add(arena, d_inner[0], d_outer[0], &dx[1]);
}

static cr_status twice_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)f;
    twice_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(twice_env));
    if (e == NULL)
        return cr_ctx_errcode(cr_arena_ctx(arena));
    e->mode = *(const int *)udata;
    cr_value gx;
    cr_status st = cr_rrule_via_ad(cfg, arena, &args[0], &args[1], 1, &gx, &e->inner);
    if (st == CR_OK)
        st = cr_rrule_via_ad(cfg, arena, &args[0], &gx, 1, y, &e->outer);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){twice_pullback, e, "twice_pullback", nargs + 1};
    return CR_OK;
}

static cr_status twice_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                             const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                             cr_tangent *dy, const void *udata)
{
    (void)f;
    (void)nargs;
    cr_value gx;
    cr_tangent d1[2] = {dargs[1], dargs[2]}, dgx;
    cr_status st = cr_frule_via_ad(cfg, arena, d1, &args[0], &args[1], 1, &gx, &dgx);
    if (st != CR_OK)
        return st;
    cr_tangent d2[2] = {dargs[1], *(const int *)udata == k_wrong_fr ? dargs[2] : dgx};
    return cr_frule_via_ad(cfg, arena, d2, &args[0], &gx, 1, y, dy);
}

/* A registry holding apply_twice with the given rules (udata selects right or wrong). */
static cr_registry *twice_registry(cr_ctx *ctx, const int *mode)
{
    cr_registry *reg;
    assert_int_equal(cr_registry_new(ctx, NULL, &reg), CR_OK);
    const cr_argspec sig[2] = {CR_ARG_FUNC, CR_ARG_ANY};
    cr_rule_def def = {0};
    def.fn = &twice_fn;
    def.nargs = 2;
    def.args = sig;
    def.caps = CR_CAP_REVERSE | CR_CAP_FORWARD;
    def.frule = twice_frule;
    def.rrule = twice_rrule;
    def.udata = mode;
    assert_int_equal(cr_registry_add(reg, &def), CR_OK);
    return reg;
}

static void test_fd_config_catches_wrong_rules(void **state)
{
    fixture *fx = *state;
    const int *modes[3] = {&k_right, &k_wrong_pb, &k_wrong_fr};
    cr_value f = cr_value_function(&twice_fn, NULL);
    cr_value args[2] = {cr_value_function(&softplus_fn, NULL), cr_value_f64(0.7)};
    for (int m = 0; m < 3; m++) {
        cr_registry *reg = twice_registry(fx->ctx, modes[m]);
        cr_test_fd_env env;
        cr_config cfg;
        assert_int_equal(cr_test_fd_config(NULL, NULL, reg, &env, &cfg), CR_OK);
        cr_test_opts opts = {.cfg = &cfg};
        cr_test_report rr, fr;
        assert_int_equal(cr_test_rrule(fx->arena, &opts, &f, args, 2, &rr), CR_OK);
        assert_int_equal(cr_test_frule(fx->arena, &opts, &f, args, 2, &fr), CR_OK);
        char line[1024];
        cr_test_report_format(&rr, line, sizeof line);
        if (m == 0) {
            if (rr.verdict != CR_VERDICT_PASS)
                print_error("right rrule: %s\n", line);
            assert_int_equal(rr.verdict, CR_VERDICT_PASS);
            assert_int_equal(fr.verdict, CR_VERDICT_PASS);
            /* the derivative it passes: softplus'(softplus(x)) softplus'(x) */
            cr_value y;
            cr_pullback pb;
            assert_int_equal(cr_rrule(&cfg, fx->arena, &f, args, 2, &y, &pb), CR_OK);
            cr_tangent one = cr_tangent_f64(1.0), dx[3];
            assert_int_equal(cr_pullback_call(fx->arena, &pb, &one, dx, 3), CR_OK);
            double x = 0.7, s = log1p(exp(x));
            double want = 1 / (1 + exp(-s)) * (1 / (1 + exp(-x)));
            assert_int_equal(dx[2].tag, CR_TAN_F64);
            ASSERT_CLOSE(dx[2].u.f64, want, 1e-9);
        } else if (m == 1) {
            /* the wrong pullback fails, on argument 2 (x); its frule is right */
            assert_int_equal(rr.verdict, CR_VERDICT_FAIL);
            assert_contains(rr.where, "argument 2");
            assert_int_equal(fr.verdict, CR_VERDICT_PASS);
        } else {
            assert_int_equal(fr.verdict, CR_VERDICT_FAIL);
            assert_int_equal(rr.verdict, CR_VERDICT_PASS);
        }
        /* the consistency test tells them apart without finite differences of f */
        cr_test_report cr;
        assert_int_equal(cr_test_consistency(fx->arena, &opts, &f, args, 2, &cr), CR_OK);
        assert_int_equal(cr.verdict, m == 0 ? CR_VERDICT_PASS : CR_VERDICT_FAIL);
        cr_registry_free(reg);
    }
    /* without the configuration the rule is not found for a rules-only caller */
    cr_registry *reg = twice_registry(fx->ctx, &k_right);
    cr_config plain = {.struct_size = sizeof plain, .registry = reg};
    cr_value y;
    cr_pullback pb;
    assert_int_not_equal(cr_rrule(&plain, fx->arena, &f, args, 2, &y, &pb), CR_OK);
    cr_ctx_clear_error(fx->ctx);
    cr_registry_free(reg);
}

/* ---- test_approx names what differs --------------------------------------------------------- */

typedef struct inner {
    double u;
    cr_complex w;
} inner;
static const cr_field inner_fields[] = {{"u", offsetof(inner, u), CR_KIND_F64, NULL},
                                        {"w", offsetof(inner, w), CR_KIND_C128, NULL}};
static const cr_type inner_type = {"inner", sizeof(inner), 2, inner_fields};

typedef struct outer {
    double a;
    int64_t n;
    inner in;
} outer;
static const cr_field outer_fields[] = {{"a", offsetof(outer, a), CR_KIND_F64, NULL},
                                        {"n", offsetof(outer, n), CR_KIND_I64, NULL},
                                        {"in", offsetof(outer, in), CR_KIND_STRUCT, &inner_type}};
static const cr_type outer_type = {"outer", sizeof(outer), 3, outer_fields};

/* A structural tangent of outer: (a, in.u, in.w) */
static cr_tangent outer_tangent(cr_arena *arena, double a, double u, cr_complex w)
{
    static const char *const in_names[] = {"u", "w"};
    static const char *const out_names[] = {"a", "in"};
    cr_tangent iv[2] = {cr_tangent_f64(u), cr_tangent_c128(w)}, it, ot;
    assert_int_equal(cr_tangent_struct(arena, &inner_type, in_names, iv, 2, &it), CR_OK);
    cr_tangent ov[2] = {cr_tangent_f64(a), it};
    assert_int_equal(cr_tangent_struct(arena, &outer_type, out_names, ov, 2, &ot), CR_OK);
    return ot;
}

static void test_approx_names_the_component(void **state)
{
    fixture *fx = *state;
    outer o = {1.0, 3, {2.0, CMPLX(0.5, -1.0)}};
    cr_value v = cr_value_struct(&outer_type, &o);
    char where[256];
    cr_tangent t = outer_tangent(fx->arena, 1, 2, CMPLX(3, 4));
    /* the imaginary part of the nested complex field */
    cr_tangent s = outer_tangent(fx->arena, 1, 2, CMPLX(3, 4.25));
    assert_false(cr_test_approx(&v, t, s, 1e-9, 1e-9, where, sizeof where));
    assert_contains(where, ".in.w.im");
    assert_contains(where, "4 against 4.25");
    assert_contains(where, "absolute error 0.25");
    /* the real field of the nested struct */
    s = outer_tangent(fx->arena, 1, 2.5, CMPLX(3, 4));
    assert_false(cr_test_approx(&v, t, s, 1e-9, 1e-9, where, sizeof where));
    assert_contains(where, ".in.u");
    assert_contains(where, "relative 0.2");
    /* the worst of several: .a is off by 1e-3 relative, .in.w.re by 1e-1 */
    s = outer_tangent(fx->arena, 1.001, 2, CMPLX(3.3, 4));
    assert_false(cr_test_approx(&v, t, s, 1e-9, 1e-9, where, sizeof where));
    assert_contains(where, ".in.w.re");
    /* an absent field reads as zero, so it matches an explicit zero */
    cr_tangent z = outer_tangent(fx->arena, 0, 0, CMPLX(0, 0));
    assert_true(
        cr_test_approx(&v, z, cr_tangent_struct_empty(&outer_type), 0, 0, where, sizeof where));
    assert_string_equal(where, "");
    /* a complex matrix: the element and part */
    cr_complex pa[4] = {CMPLX(1, 1), CMPLX(2, 2), CMPLX(3, 3), CMPLX(4, 4)};
    cr_complex pb[4] = {CMPLX(1, 1), CMPLX(2, 2), CMPLX(3, 3.5), CMPLX(4, 4)};
    cr_complex pp[4] = {0};
    size_t shape[2] = {2, 2};
    cr_array A, B, P;
    assert_int_equal(cr_array_view_init(&A, pa, CR_DT_C128, 2, shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&B, pb, CR_DT_C128, 2, shape, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&P, pp, CR_DT_C128, 2, shape, NULL), CR_OK);
    cr_value pv = cr_value_array(&P);
    assert_false(cr_test_approx(&pv, cr_tangent_array(&A), cr_tangent_array(&B), 1e-9, 1e-9, where,
                                sizeof where));
    assert_contains(where, "[1,0].im");
    assert_contains(where, "3 against 3.5");
    /* a complex tangent of a real value is refused with its imaginary part */
    cr_value r = cr_value_f64(1.0);
    assert_false(cr_test_approx(&r, cr_tangent_c128(CMPLX(1, 0.5)), cr_tangent_f64(1), 1e-9, 1e-9,
                                where, sizeof where));
    assert_contains(where, "imaginary part of 0.5");
}

/* ---- grad of functions of arrays and structs --------------------------------------------------
 */

/* sumsq(A) = Σ a_ij^2 + a_00 a_11 (a 2 x 2 matrix) */
static cr_status sumsq_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    const cr_array *a = args[0].u.arr;
    double s = 0;
    for (size_t i = 0; i < 4; i++) {
        double x = creal(cr_array_get_linear(a, i));
        s += x * x;
    }
    *out = cr_value_f64(s + creal(cr_array_get_linear(a, 0)) * creal(cr_array_get_linear(a, 3)));
    return CR_OK;
}
static const cr_function sumsq_fn = {"sumsq", 1, sumsq_primal, NULL, NULL, 0};

/* energy(o) = a^2 in.u + |in.w|^2 + n (n an integer field: not perturbed) */
static cr_status energy_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                               cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    const outer *o = args[0].u.obj.ptr;
    double w2 = creal(o->in.w) * creal(o->in.w) + cimag(o->in.w) * cimag(o->in.w);
    *out = cr_value_f64(o->a * o->a * o->in.u + w2 + (double)o->n);
    return CR_OK;
}
static const cr_function energy_fn = {"energy", 1, energy_primal, NULL, NULL, 0};

static void test_grad_arrays_structs(void **state)
{
    fixture *fx = *state;
    double a[4] = {0.5, -1.25, 2.0, 0.75};
    cr_array A = cr_array_matrix(a, 2, 2);
    cr_value f = cr_value_function(&sumsq_fn, NULL), arg = cr_value_array(&A);
    cr_tangent g;
    assert_int_equal(cr_fd_grad(fx->arena, NULL, NULL, &f, &arg, 1, &g), CR_OK);
    assert_int_equal(g.tag, CR_TAN_ARRAY);
    assert_int_equal(g.u.arr->ndim, 2);
    double want[4] = {2 * a[0] + a[3], 2 * a[1], 2 * a[2], 2 * a[3] + a[0]};
    for (size_t i = 0; i < 4; i++)
        ASSERT_CLOSE(creal(cr_array_get_linear(g.u.arr, i)), want[i], 1e-9);

    outer o = {1.5, 4, {-0.5, CMPLX(0.25, 2.0)}};
    cr_value fe = cr_value_function(&energy_fn, NULL), oe = cr_value_struct(&outer_type, &o);
    assert_int_equal(cr_fd_grad(fx->arena, NULL, NULL, &fe, &oe, 1, &g), CR_OK);
    cr_tangent ga, gin, gu, gw, gn;
    assert_int_equal(cr_tangent_getfield(g, "a", &ga), CR_OK);
    assert_int_equal(cr_tangent_getfield(g, "n", &gn), CR_OK);
    assert_int_equal(cr_tangent_getfield(g, "in", &gin), CR_OK);
    assert_int_equal(cr_tangent_getfield(gin, "u", &gu), CR_OK);
    assert_int_equal(cr_tangent_getfield(gin, "w", &gw), CR_OK);
    assert_int_equal(ga.tag, CR_TAN_F64);
    ASSERT_CLOSE(ga.u.f64, 2 * o.a * o.in.u, 1e-9);
    ASSERT_CLOSE(gu.u.f64, o.a * o.a, 1e-9);
    assert_int_equal(gw.tag, CR_TAN_C128);
    ASSERT_CLOSE(creal(gw.u.c128), 2 * creal(o.in.w), 1e-9);
    ASSERT_CLOSE(cimag(gw.u.c128), 2 * cimag(o.in.w), 1e-9);
    assert_true(gn.tag == CR_TAN_NONE || gn.tag == CR_TAN_ZERO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fd_config_catches_wrong_rules, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_approx_names_the_component, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_grad_arrays_structs, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
