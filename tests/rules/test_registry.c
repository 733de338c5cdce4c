/*
 * Tests of the rule registry: dispatch specificity, ambiguity and duplicates at
 * registration, registries over registries, opt-outs (no_frule / no_rrule),
 * non-differentiable declarations, RuleConfig capabilities and via_ad, freezing,
 * lookup by name, signature text, error messages, debug mode and ignore_derivatives.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

/* ---- Fixture and helpers ---------------------------------------------------------------- */

typedef struct fixture {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_registry *reg; /* a user registry over the built-ins */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || cr_ctx_new(NULL, &f->ctx) != CR_OK ||
        cr_arena_new(f->ctx, NULL, &f->arena) != CR_OK ||
        cr_registry_new(f->ctx, NULL, &f->reg) != CR_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cr_registry_free(f->reg);
    cr_arena_free(f->arena);
    cr_ctx_free(f->ctx);
    free(f);
    return 0;
}

static void assert_contains_(const char *s, const char *sub, const char *file, int line)
{
    if (s == NULL || strstr(s, sub) == NULL) {
        print_error("\"%s\" does not contain \"%s\"\n", s ? s : "(null)", sub);
        _fail(file, line);
    }
}
#define assert_contains(s, sub) assert_contains_((s), (sub), __FILE__, __LINE__)

static size_t count_of(const char *s, const char *sub)
{
    size_t n = 0;
    for (const char *p = strstr(s, sub); p != NULL; p = strstr(p + 1, sub))
        n++;
    return n;
}

/* A primal that returns its first argument (or 0 for none). */
static cr_status first_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)f;
    *out = nargs > 0 ? args[0] : cr_value_f64(0.0);
    return CR_OK;
}

/*
 * Identification rules: the rrule and frule answer Ω = the integer in udata, so a test
 * sees which registered rule a call reached. The pullback gives NoTangent everywhere.
 */
static cr_status id_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    (void)dy;
    (void)arena;
    (void)env;
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    return CR_OK;
}

static cr_status id_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                          const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)f;
    (void)args;
    *y = cr_value_i64(*(const int *)udata);
    *pb = (cr_pullback){id_pullback, NULL, "id_pullback", nargs + 1};
    return CR_OK;
}

static cr_status id_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                          const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                          cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)dargs;
    (void)f;
    (void)args;
    (void)nargs;
    *y = cr_value_i64(*(const int *)udata);
    *dy = cr_tangent_none();
    return CR_OK;
}

static const int ID[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* Register rrule+frule id for fn with the given matchers. */
static cr_status add_id(cr_registry *reg, const cr_function *fn, const cr_argspec *args,
                        size_t nargs, bool variadic, uint32_t caps, int id)
{
    cr_rule_def d = {0};
    d.struct_size = sizeof d;
    d.fn = fn;
    d.nargs = nargs;
    d.args = args;
    d.variadic = variadic;
    d.caps = caps;
    d.frule = id_frule;
    d.rrule = id_rrule;
    d.udata = &ID[id];
    return cr_registry_add(reg, &d);
}

/* Which rule an rrule call reaches: its id, or -1 for CR_NOTHING, -2 for errors. */
static int rrule_hit(fixture *fx, const cr_config *cfg, const cr_value *f, const cr_value *args,
                     size_t nargs)
{
    cr_value y;
    cr_pullback pb;
    cr_status st = cr_rrule(cfg, fx->arena, f, args, nargs, &y, &pb);
    if (st == CR_NOTHING)
        return -1;
    if (st != CR_OK)
        return -2;
    assert_int_equal(y.kind, CR_KIND_I64);
    return (int)y.u.i64;
}

static int frule_hit(fixture *fx, const cr_config *cfg, const cr_value *f, const cr_value *args,
                     size_t nargs)
{
    cr_value y;
    cr_tangent dargs[8], dy;
    for (size_t i = 0; i < 8; i++)
        dargs[i] = cr_tangent_zero();
    cr_status st = cr_frule(cfg, fx->arena, dargs, f, args, nargs, &y, &dy);
    if (st == CR_NOTHING)
        return -1;
    if (st != CR_OK)
        return -2;
    return (int)y.u.i64;
}

/* A described struct, and another. */
typedef struct point {
    double x, y;
} point;
static const cr_field point_fields[] = {
    {"x", offsetof(point, x), CR_KIND_F64, NULL},
    {"y", offsetof(point, y), CR_KIND_F64, NULL},
};
static const cr_type point_type = {"point", sizeof(point), 2, point_fields};
typedef struct other {
    double v;
} other;
static const cr_field other_fields[] = {{"v", offsetof(other, v), CR_KIND_F64, NULL}};
static const cr_type other_type = {"other", sizeof(other), 1, other_fields};

/* ---- Dispatch specificity ---------------------------------------------------------------- */

static const cr_function g_fn = {.name = "g", .arity = 1, .primal = first_primal};

static void test_specificity(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_f64[1] = {CR_ARG_F64}, s_real[1] = {CR_ARG_REAL}, s_num[1] = {CR_ARG_NUMBER},
                     s_any[1] = {CR_ARG_ANY};
    /* Registered from the most general to the most specific: order does not matter. */
    assert_int_equal(add_id(fx->reg, &g_fn, s_any, 1, false, 0, 4), CR_OK);
    assert_int_equal(add_id(fx->reg, &g_fn, s_num, 1, false, 0, 3), CR_OK);
    assert_int_equal(add_id(fx->reg, &g_fn, s_f64, 1, false, 0, 1), CR_OK);
    assert_int_equal(add_id(fx->reg, &g_fn, s_real, 1, false, 0, 2), CR_OK);
    const cr_config cfg = {.registry = fx->reg};
    cr_value f = cr_value_function(&g_fn, NULL);

    cr_value v = cr_value_f64(1.0);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), 1);
    assert_int_equal(frule_hit(fx, &cfg, &f, &v, 1), 1);
    v = cr_value_f32(1.0f);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), 2);
    v = cr_value_i64(3);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), 2);
    v = cr_value_bool(true);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), 2);
    v = cr_value_c128(1.0);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), 3);
    assert_int_equal(frule_hit(fx, &cfg, &f, &v, 1), 3);
    double buf[2] = {1, 2};
    cr_array arr = cr_array_vector(buf, 2);
    v = cr_value_array(&arr);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), 4);
    point p = {1, 2};
    v = cr_value_struct(&point_type, &p);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), 4);
    /* Arity is part of the signature. */
    cr_value two[2] = {cr_value_f64(1), cr_value_f64(2)};
    assert_int_equal(rrule_hit(fx, &cfg, &f, two, 2), -1);

    /* cr_registry_lookup reports the same choice without running the rule. */
    cr_rule_match m;
    v = cr_value_f32(2.0f);
    assert_int_equal(cr_registry_lookup(fx->reg, NULL, CR_MODE_RRULE, &f, &v, 1, &m), CR_OK);
    assert_false(m.opted_out);
    assert_non_null(m.def);
    assert_ptr_equal(m.def->udata, &ID[2]);
    assert_int_equal(m.def->args[0].mask, s_real[0].mask);
}

static const cr_function h_fn = {.name = "h", .arity = 1, .primal = first_primal};

static void test_struct_matchers(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_point[1] = {CR_ARG_STRUCT(&point_type)};
    const cr_argspec s_struct[1] = {CR_ARG_STRUCT(NULL)};
    assert_int_equal(add_id(fx->reg, &h_fn, s_struct, 1, false, 0, 1), CR_OK);
    assert_int_equal(add_id(fx->reg, &h_fn, s_point, 1, false, 0, 2), CR_OK);
    const cr_config cfg = {.registry = fx->reg};
    cr_value f = cr_value_function(&h_fn, NULL);
    point p = {1, 2};
    other o = {3};
    cr_value v = cr_value_struct(&point_type, &p);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), 2);
    v = cr_value_struct(&other_type, &o);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), 1);
    v = cr_value_f64(1.0);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &v, 1), -1);
    /* A matcher for one struct type does not accept another. */
    const cr_argspec s_other[1] = {CR_ARG_STRUCT(&other_type)};
    static const cr_function h2_fn = {.name = "h2", .arity = 1, .primal = first_primal};
    cr_value f2 = cr_value_function(&h2_fn, NULL);
    assert_int_equal(add_id(fx->reg, &h2_fn, s_other, 1, false, 0, 5), CR_OK);
    v = cr_value_struct(&point_type, &p);
    assert_int_equal(rrule_hit(fx, &cfg, &f2, &v, 1), -1);
    /* cr_argspec_of gives the exact matcher of a value. */
    cr_argspec a = cr_argspec_of(&v);
    assert_int_equal(a.mask, CR_M_STRUCT);
    assert_ptr_equal(a.type, &point_type);
    cr_value c = cr_value_c128(1.0);
    assert_int_equal(cr_argspec_of(&c).mask, CR_M_C128);
}

static const cr_function v_fn = {.name = "v", .arity = -1, .primal = first_primal};

static void test_variadic(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_f64[1] = {CR_ARG_F64}, s_ff[2] = {CR_ARG_F64, CR_ARG_F64},
                     s_rf[2] = {CR_ARG_REAL, CR_ARG_F64};
    assert_int_equal(add_id(fx->reg, &v_fn, s_f64, 1, true, 0, 1), CR_OK); /* v(f64...) */
    assert_int_equal(add_id(fx->reg, &v_fn, s_ff, 2, false, 0, 2), CR_OK); /* v(f64, f64) */
    const cr_config cfg = {.registry = fx->reg};
    cr_value f = cr_value_function(&v_fn, NULL);
    cr_value a[4] = {cr_value_f64(1), cr_value_f64(2), cr_value_f64(3), cr_value_f64(4)};
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 2), 2); /* fixed arity beats variadic */
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 3), 1);
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 1), 1);
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 0), 1); /* zero repetitions */
    a[2] = cr_value_f32(3.0f);
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 3), -1); /* every repetition must match */

    /* A variadic signature with a fixed head: v(real, f64...) over v(f64...). */
    static const cr_function w_fn = {.name = "w", .arity = -1, .primal = first_primal};
    cr_value fw = cr_value_function(&w_fn, NULL);
    assert_int_equal(add_id(fx->reg, &w_fn, s_rf, 2, true, 0, 3), CR_OK);
    cr_value b[3] = {cr_value_i64(1), cr_value_f64(2), cr_value_f64(3)};
    assert_int_equal(rrule_hit(fx, &cfg, &fw, b, 3), 3);
    assert_int_equal(rrule_hit(fx, &cfg, &fw, b, 1), 3);
    assert_int_equal(rrule_hit(fx, &cfg, &fw, b, 0), -1); /* the head is required */

    char sig[64];
    cr_rule_info info;
    assert_int_equal(cr_registry_get(fx->reg, cr_registry_size(fx->reg) - 1, &info), CR_OK);
    cr_signature_str(info.fn->name, info.args, info.nargs, info.variadic, sig, sizeof sig);
    assert_string_equal(sig, "w(real, f64...)");

    /* Two variadic signatures that agree where both apply but differ in their minimum
     * arity are distinct rules: u(f64, f64...) is more specific than u(f64...). */
    static const cr_function u_fn = {.name = "u", .arity = -1, .primal = first_primal};
    cr_value fu = cr_value_function(&u_fn, NULL);
    assert_int_equal(add_id(fx->reg, &u_fn, s_f64, 1, true, 0, 6), CR_OK);
    assert_int_equal(add_id(fx->reg, &u_fn, s_ff, 2, true, 0, 7), CR_OK);
    assert_int_equal(rrule_hit(fx, &cfg, &fu, a, 0), 6);
    assert_int_equal(rrule_hit(fx, &cfg, &fu, a, 1), 7);
    assert_int_equal(rrule_hit(fx, &cfg, &fu, a, 2), 7);
    /* ... but registering one of them twice is still a duplicate. */
    assert_int_equal(add_id(fx->reg, &u_fn, s_ff, 2, true, 0, 8), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "u(f64, f64...)");
}

/* ---- Ambiguity and duplicates ------------------------------------------------------------ */

static const cr_function amb_fn = {.name = "amb", .arity = 2, .primal = first_primal};
static const cr_function amb2_fn = {.name = "amb2", .arity = 2, .primal = first_primal};
static const cr_function dup_fn = {.name = "dup", .arity = 1, .primal = first_primal};

static void test_ambiguity(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_fr[2] = {CR_ARG_F64, CR_ARG_REAL}, s_rf[2] = {CR_ARG_REAL, CR_ARG_F64},
                     s_ff[2] = {CR_ARG_F64, CR_ARG_F64};
    assert_int_equal(add_id(fx->reg, &amb_fn, s_fr, 2, false, 0, 1), CR_OK);
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(add_id(fx->reg, &amb_fn, s_rf, 2, false, 0, 2), CR_EINVAL);
    const char *msg = cr_ctx_errmsg(fx->ctx);
    assert_contains(msg, "amb(real, f64)");
    assert_contains(msg, "amb(f64, real)");
    assert_contains(msg, "ambiguous");
    size_t n = cr_registry_size(fx->reg);
    assert_int_equal(n, 1); /* nothing was added */

    /* With the intersection registered first, both are accepted. */
    assert_int_equal(add_id(fx->reg, &amb2_fn, s_ff, 2, false, 0, 3), CR_OK);
    assert_int_equal(add_id(fx->reg, &amb2_fn, s_fr, 2, false, 0, 4), CR_OK);
    assert_int_equal(add_id(fx->reg, &amb2_fn, s_rf, 2, false, 0, 5), CR_OK);
    const cr_config cfg = {.registry = fx->reg};
    cr_value f = cr_value_function(&amb2_fn, NULL);
    cr_value a[2] = {cr_value_f64(1), cr_value_f64(2)};
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 2), 3);
    a[1] = cr_value_f32(2.0f);
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 2), 4);
    a[0] = cr_value_i64(1);
    a[1] = cr_value_f64(2);
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 2), 5);
    a[1] = cr_value_i64(2);
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 2), -1);

    /* Duplicates in one registry are rejected, naming the signature. */
    const cr_argspec s_f64[1] = {CR_ARG_F64};
    assert_int_equal(add_id(fx->reg, &dup_fn, s_f64, 1, false, 0, 1), CR_OK);
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(add_id(fx->reg, &dup_fn, s_f64, 1, false, 0, 2), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "dup(f64)");
    assert_contains(cr_ctx_errmsg(fx->ctx), "already registered");
    /* The same signature with other capabilities is a different rule. */
    assert_int_equal(add_id(fx->reg, &dup_fn, s_f64, 1, false, CR_CAP_REVERSE, 3), CR_OK);
}

static void test_runtime_ambiguity(void **state)
{
    /* A parent that gains a rule after its child registered an incomparable one: the
     * registration could not see the conflict, so the lookup refuses to choose. */
    fixture *fx = *state;
    static const cr_function late_fn = {.name = "late", .arity = 2, .primal = first_primal};
    const cr_argspec s_fr[2] = {CR_ARG_F64, CR_ARG_REAL}, s_rf[2] = {CR_ARG_REAL, CR_ARG_F64};
    cr_registry *child;
    assert_int_equal(cr_registry_new(fx->ctx, fx->reg, &child), CR_OK);
    assert_int_equal(add_id(child, &late_fn, s_rf, 2, false, 0, 1), CR_OK);
    assert_int_equal(add_id(fx->reg, &late_fn, s_fr, 2, false, 0, 2), CR_OK);
    const cr_config cfg = {.registry = child};
    cr_value f = cr_value_function(&late_fn, NULL);
    cr_value a[2] = {cr_value_f64(1), cr_value_f64(2)};
    cr_value y;
    cr_pullback pb;
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, a, 2, &y, &pb), CR_EMISUSE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "late(f64, f64)");
    assert_contains(cr_ctx_errmsg(fx->ctx), "ambiguous");
    /* Calls only one of them matches are fine. */
    a[1] = cr_value_i64(2);
    assert_int_equal(rrule_hit(fx, &cfg, &f, a, 2), 2);
    cr_registry_free(child);
}

/* ---- Registries over registries ---------------------------------------------------------- */

static const cr_function k_fn = {.name = "k", .arity = 1, .primal = first_primal};

static void test_child_overrides_parent(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_f64[1] = {CR_ARG_F64}, s_real[1] = {CR_ARG_REAL};
    assert_int_equal(add_id(fx->reg, &k_fn, s_f64, 1, false, 0, 1), CR_OK);
    assert_int_equal(add_id(fx->reg, &k_fn, s_real, 1, false, 0, 2), CR_OK);
    cr_registry *child;
    assert_int_equal(cr_registry_new(fx->ctx, fx->reg, &child), CR_OK);
    assert_ptr_equal(cr_registry_parent(child), fx->reg);
    assert_ptr_equal(cr_registry_parent(fx->reg), cr_registry_builtin());
    assert_null(cr_registry_parent(cr_registry_builtin()));
    assert_int_equal(add_id(child, &k_fn, s_f64, 1, false, 0, 7), CR_OK); /* override */
    assert_int_equal(cr_registry_size(child), 1);

    cr_value f = cr_value_function(&k_fn, NULL), x = cr_value_f64(1.0), s = cr_value_f32(1.0f);
    const cr_config pc = {.registry = fx->reg}, cc = {.registry = child};
    assert_int_equal(rrule_hit(fx, &pc, &f, &x, 1), 1);
    assert_int_equal(rrule_hit(fx, &cc, &f, &x, 1), 7);
    assert_int_equal(frule_hit(fx, &cc, &f, &x, 1), 7);
    assert_int_equal(rrule_hit(fx, &cc, &f, &s, 1), 2); /* the parent's more general rule */
    /* The lookup can also be given the registry directly. */
    cr_rule_match m;
    assert_int_equal(cr_registry_lookup(child, NULL, CR_MODE_FRULE, &f, &x, 1, &m), CR_OK);
    assert_ptr_equal(m.def->udata, &ID[7]);
    cr_registry_free(child);
}

static cr_status neg_sin_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                               const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                               const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)f;
    (void)nargs;
    (void)udata;
    *y = cr_value_f64(-sin(args[0].u.f64)); /* a deliberately different result */
    *pb = (cr_pullback){id_pullback, NULL, "neg_sin_pullback", 2};
    return CR_OK;
}

static void test_user_over_builtins(void **state)
{
    fixture *fx = *state;
    const cr_config cfg = {.registry = fx->reg};
    cr_value x = cr_value_f64(0.5), y;
    cr_pullback pb;
    /* The user registry sees the built-in rules. */
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_sin, &x, 1, &y, &pb), CR_OK);
    assert_true(y.u.f64 == sin(0.5));
    assert_string_equal(pb.name, "sin_pullback");
    /* A user rule for sin(number) overrides the built-in's signature, for this registry
     * only. */
    const cr_argspec s_num[1] = {CR_ARG_NUMBER};
    cr_rule_def d = {0};
    d.fn = cr_fn_sin.u.func.fn;
    d.nargs = 1;
    d.args = s_num;
    d.rrule = neg_sin_rrule;
    assert_int_equal(cr_registry_add(fx->reg, &d), CR_OK);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_sin, &x, 1, &y, &pb), CR_OK);
    assert_true(y.u.f64 == -sin(0.5));
    assert_string_equal(pb.name, "neg_sin_pullback");
    /* frules were not overridden. */
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(1.0)}, dy;
    assert_int_equal(cr_frule(&cfg, fx->arena, dargs, &cr_fn_sin, &x, 1, &y, &dy), CR_OK);
    assert_true(y.u.f64 == sin(0.5));
    /* Without the configuration, the built-ins. */
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sin, &x, 1, &y, &pb), CR_OK);
    assert_true(y.u.f64 == sin(0.5));
    /* A user function is unknown to the built-in registry. */
    const cr_argspec s_f64[1] = {CR_ARG_F64};
    assert_int_equal(add_id(fx->reg, &k_fn, s_f64, 1, false, 0, 1), CR_OK);
    cr_value f = cr_value_function(&k_fn, NULL);
    assert_int_equal(rrule_hit(fx, NULL, &f, &x, 1), -1);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &x, 1), 1);
}

/* ---- opt_out ----------------------------------------------------------------------------- */

static const cr_function o_fn = {.name = "o", .arity = 1, .primal = first_primal};

static void test_opt_out(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_real[1] = {CR_ARG_REAL}, s_f32[1] = {CR_ARG_F32}, s_int[1] = {CR_ARG_INT};
    assert_int_equal(add_id(fx->reg, &o_fn, s_real, 1, false, 0, 1), CR_OK);
    assert_int_equal(cr_registry_opt_out(fx->reg, CR_MODE_RRULE, &o_fn, s_f32, 1, false, 0), CR_OK);
    assert_int_equal(cr_registry_opt_out(fx->reg, CR_MODE_FRULE, &o_fn, s_int, 1, false, 0), CR_OK);
    const cr_config cfg = {.registry = fx->reg};
    cr_value f = cr_value_function(&o_fn, NULL);
    cr_value x64 = cr_value_f64(1), x32 = cr_value_f32(1), xi = cr_value_i64(1);

    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &x32, 1), -1); /* opted out: CR_NOTHING */
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_OK);
    assert_int_equal(frule_hit(fx, &cfg, &f, &x32, 1), 1); /* the frule still serves */
    assert_int_equal(rrule_hit(fx, &cfg, &f, &x64, 1), 1); /* other kinds too */
    assert_int_equal(frule_hit(fx, &cfg, &f, &xi, 1), -1);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &xi, 1), 1);

    cr_rule_match m;
    assert_int_equal(cr_registry_lookup(fx->reg, NULL, CR_MODE_RRULE, &f, &x32, 1, &m), CR_OK);
    assert_true(m.opted_out);
    assert_null(m.def);

    /* no_rrule lists the f32 opt-out, no_frule the integer one. */
    cr_rule_info info;
    assert_int_equal(cr_registry_no_rule(fx->reg, CR_MODE_RRULE, 0, &info), CR_OK);
    assert_ptr_equal(info.fn, &o_fn);
    assert_int_equal(info.nargs, 1);
    assert_int_equal(info.args[0].mask, CR_M_F32);
    assert_true(info.no_rrule);
    assert_false(info.no_frule);
    assert_false(info.has_rrule);
    assert_int_equal(cr_registry_no_rule(fx->reg, CR_MODE_RRULE, 1, &info), CR_EINVAL);
    assert_int_equal(cr_registry_no_rule(fx->reg, CR_MODE_FRULE, 0, &info), CR_OK);
    assert_int_equal(info.args[0].mask, CR_M_INT);
    assert_true(info.no_frule);
    assert_false(info.no_rrule);
    assert_int_equal(cr_registry_no_rule(fx->reg, CR_MODE_FRULE, 1, &info), CR_EINVAL);
    /* The rule itself is listed by cr_registry_get, not as an opt-out. */
    assert_int_equal(cr_registry_get(fx->reg, 0, &info), CR_OK);
    assert_true(info.has_frule && info.has_rrule);
    assert_false(info.no_frule || info.no_rrule || info.non_differentiable);
    assert_int_equal(cr_registry_get(fx->reg, 3, &info), CR_EINVAL);

    /* Opting out of a built-in rule for one kind, in a user registry. */
    assert_int_equal(
        cr_registry_opt_out(fx->reg, CR_MODE_BOTH, cr_fn_exp.u.func.fn, s_f32, 1, false, 0), CR_OK);
    cr_value y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_exp, &x32, 1, &y, &pb), CR_NOTHING);
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f32(1)}, dy;
    assert_int_equal(cr_frule(&cfg, fx->arena, dargs, &cr_fn_exp, &x32, 1, &y, &dy), CR_NOTHING);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &cr_fn_exp, &x64, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_exp, &x32, 1, &y, &pb), CR_OK);
    /* An opt-out without a mode is refused. */
    assert_int_equal(cr_registry_opt_out(fx->reg, (cr_rule_mode)0, &o_fn, s_f32, 1, false, 0),
                     CR_EINVAL);
}

/* ---- non_differentiable ------------------------------------------------------------------ */

static cr_status isbig_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)f;
    (void)nargs;
    *out = cr_value_bool(args[0].u.f64 > args[1].u.f64);
    return CR_OK;
}

static const cr_function isbig_fn = {.name = "isbig", .arity = 2, .primal = isbig_primal};
static const cr_function ruleonly_fn = {.name = "ruleonly", .arity = 1, .primal = NULL};

static void test_non_differentiable(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_rr[2] = {CR_ARG_REAL, CR_ARG_REAL};
    assert_int_equal(cr_registry_non_differentiable(fx->reg, &isbig_fn, s_rr, 2, false), CR_OK);
    const cr_config cfg = {.registry = fx->reg};
    cr_value f = cr_value_function(&isbig_fn, NULL);
    cr_value a[2] = {cr_value_f64(3.0), cr_value_f64(2.0)}, y;

    cr_tangent dargs[3] = {cr_tangent_zero(), cr_tangent_f64(1.0), cr_tangent_f64(1.0)}, dy;
    assert_int_equal(cr_frule(&cfg, fx->arena, dargs, &f, a, 2, &y, &dy), CR_OK);
    assert_int_equal(y.kind, CR_KIND_BOOL);
    assert_true(y.u.b);
    assert_int_equal(dy.tag, CR_TAN_NONE);

    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, a, 2, &y, &pb), CR_OK);
    assert_int_equal(pb.nx, 3);
    assert_non_null(pb.name);
    cr_tangent ybar = cr_tangent_f64(1.0), dx[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 3), CR_OK);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(dx[i].tag, CR_TAN_NONE); /* self included */

    cr_rule_info info;
    assert_int_equal(cr_registry_get(fx->reg, 0, &info), CR_OK);
    assert_true(info.non_differentiable);

    /* A function without a primal cannot be declared non-differentiable. */
    const cr_argspec s_any[1] = {CR_ARG_ANY};
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_registry_non_differentiable(fx->reg, &ruleonly_fn, s_any, 1, false),
                     CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "ruleonly");
    assert_int_equal(cr_registry_size(fx->reg), 1);
}

/* ---- RuleConfig: capabilities and via_ad ------------------------------------------------- */

/* ---- Answers kept between lookups ------------------------------------------------------- */

static const cr_function m_fn = {.name = "m", .arity = 2, .primal = first_primal};

/* The rule a lookup reports: its id, -1 for CR_NOTHING, -3 for an opt-out, -2 otherwise. */
static int lookup_id(const cr_registry *reg, const cr_config *cfg, cr_rule_mode mode,
                     const cr_value *f, const cr_value *x, size_t n)
{
    cr_rule_match m;
    cr_status st = cr_registry_lookup(reg, cfg, mode, f, x, n, &m);
    if (st == CR_NOTHING)
        return -1;
    if (st != CR_OK)
        return -2;
    if (m.opted_out)
        return -3;
    return *(const int *)m.def->udata;
}

/* Lookups remember their answers (per thread, in a small table indexed by a hash of the
 * call); a remembered answer follows every change: a rule added to the registry or to its
 * parent after a lookup, a registry freed and another made (perhaps at its address). */
static void test_lookup_memo(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_real[2] = {CR_ARG_REAL, CR_ARG_ANY}, s_f64[2] = {CR_ARG_F64, CR_ARG_ANY},
                     s_num[2] = {CR_ARG_NUMBER, CR_ARG_ANY}, s_f32[2] = {CR_ARG_F32, CR_ARG_ANY};
    cr_value f = cr_value_function(&m_fn, NULL);
    cr_value x[2] = {cr_value_f64(1.0), cr_value_f64(2.0)};
    cr_value s[2] = {cr_value_f32(1.0f), cr_value_f64(2.0)};
    cr_value z[2] = {cr_value_c128(1.0), cr_value_f64(2.0)};
    const cr_registry *r = fx->reg;
    assert_int_equal(lookup_id(r, NULL, CR_MODE_RRULE, &f, x, 2), -1);
    assert_int_equal(add_id(fx->reg, &m_fn, s_real, 2, false, 0, 1), CR_OK);
    assert_int_equal(lookup_id(r, NULL, CR_MODE_RRULE, &f, x, 2), 1);
    assert_int_equal(add_id(fx->reg, &m_fn, s_f64, 2, false, 0, 2), CR_OK);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(lookup_id(r, NULL, CR_MODE_RRULE, &f, x, 2), 2);
        assert_int_equal(lookup_id(r, NULL, CR_MODE_RRULE, &f, s, 2), 1);
        assert_int_equal(lookup_id(r, NULL, CR_MODE_RRULE, &f, z, 2), -1);
    }
    /* A child's answers follow rules added to its parent. */
    cr_registry *child = NULL;
    assert_int_equal(cr_registry_new(fx->ctx, fx->reg, &child), CR_OK);
    assert_int_equal(lookup_id(child, NULL, CR_MODE_RRULE, &f, z, 2), -1);
    assert_int_equal(add_id(fx->reg, &m_fn, s_num, 2, false, 0, 3), CR_OK);
    assert_int_equal(lookup_id(child, NULL, CR_MODE_RRULE, &f, z, 2), 3);
    /* A registry freed and another made: the new one's rules, not the old one's. */
    cr_registry_free(child);
    cr_registry *fresh = NULL;
    assert_int_equal(cr_registry_new(fx->ctx, NULL, &fresh), CR_OK);
    assert_int_equal(lookup_id(fresh, NULL, CR_MODE_RRULE, &f, z, 2), -1);
    assert_int_equal(add_id(fresh, &m_fn, s_f32, 2, false, 0, 5), CR_OK);
    assert_int_equal(lookup_id(fresh, NULL, CR_MODE_RRULE, &f, s, 2), 5);
    cr_registry_free(fresh);
}

/* Functions with a rule each, for test_lookup_memo_keys: more than the table's 64 slots. */
#define MEMO_NFN 80
static cr_function k_memo_fns[MEMO_NFN];
static const cr_function m3_fn = {.name = "m3", .arity = 3, .primal = first_primal};

/* Calls that differ in one part only, asked one after the other, each get their own
 * answer: the same call through two registries and under two configurations (which take
 * the same slot of the table), in both modes; calls of more functions and with more
 * argument kinds than the table has slots (so that some share a slot); and calls that
 * differ only in a trailing argument of no kind. */
static void test_lookup_memo_keys(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_f64[2] = {CR_ARG_F64, CR_ARG_ANY}, s_f32[2] = {CR_ARG_F32, CR_ARG_ANY},
                     s_real[2] = {CR_ARG_REAL, CR_ARG_ANY};
    cr_value f = cr_value_function(&m_fn, NULL);
    cr_value x[2] = {cr_value_f64(1), cr_value_f64(2)}, s[2] = {cr_value_f32(1), cr_value_f64(2)};
    assert_int_equal(add_id(fx->reg, &m_fn, s_real, 2, false, 0, 1), CR_OK);
    assert_int_equal(add_id(fx->reg, &m_fn, s_f64, 2, false, CR_CAP_REVERSE, 2), CR_OK);
    assert_int_equal(cr_registry_opt_out(fx->reg, CR_MODE_FRULE, &m_fn, s_f32, 2, false, 0), CR_OK);
    cr_registry *child = NULL;
    assert_int_equal(cr_registry_new(fx->ctx, fx->reg, &child), CR_OK);
    assert_int_equal(add_id(child, &m_fn, s_real, 2, false, 0, 3), CR_OK);
    const cr_config none = {.registry = fx->reg},
                    rev = {.registry = fx->reg, .caps = CR_CAP_REVERSE};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(lookup_id(NULL, &rev, CR_MODE_RRULE, &f, x, 2), 2);
        assert_int_equal(lookup_id(NULL, &none, CR_MODE_RRULE, &f, x, 2), 1);
        assert_int_equal(lookup_id(child, NULL, CR_MODE_RRULE, &f, x, 2), 3);
        assert_int_equal(lookup_id(fx->reg, NULL, CR_MODE_RRULE, &f, s, 2), 1);
        assert_int_equal(lookup_id(fx->reg, NULL, CR_MODE_FRULE, &f, s, 2), -3);
    }
    cr_registry_free(child);
    /* A trailing argument of no kind (a NULL array): another arity, no rule. */
    cr_value xn[2] = {cr_value_f64(1), cr_value_array(NULL)};
    const cr_argspec s_one[1] = {CR_ARG_F64};
    assert_int_equal(add_id(fx->reg, &m3_fn, s_one, 1, false, 0, 4), CR_OK);
    cr_value f3 = cr_value_function(&m3_fn, NULL);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(lookup_id(fx->reg, NULL, CR_MODE_RRULE, &f3, xn, 1), 4);
        assert_int_equal(lookup_id(fx->reg, NULL, CR_MODE_RRULE, &f3, xn, 2), -1);
    }
    /* More functions than slots. */
    const cr_argspec s_any[1] = {CR_ARG_ANY};
    for (int i = 0; i < MEMO_NFN; i++) {
        k_memo_fns[i] = (cr_function){.name = "memo_fn", .arity = 1, .primal = first_primal};
        assert_int_equal(add_id(fx->reg, &k_memo_fns[i], s_any, 1, false, 0, 1 + i % 15), CR_OK);
    }
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < MEMO_NFN; i++) {
            cr_value g = cr_value_function(&k_memo_fns[i], NULL);
            assert_int_equal(lookup_id(fx->reg, NULL, CR_MODE_RRULE, &g, x, 1), 1 + i % 15);
        }
    /* More argument kinds than slots: m3(kind, kind, kind), its rule chosen by the first. */
    const cr_argspec s3_f64[3] = {CR_ARG_F64, CR_ARG_ANY, CR_ARG_ANY},
                     s3_c128[3] = {CR_ARG_C128, CR_ARG_ANY, CR_ARG_ANY},
                     s3_real[3] = {CR_ARG_REAL, CR_ARG_ANY, CR_ARG_ANY};
    assert_int_equal(add_id(fx->reg, &m3_fn, s3_f64, 3, false, 0, 5), CR_OK);
    assert_int_equal(add_id(fx->reg, &m3_fn, s3_c128, 3, false, 0, 6), CR_OK);
    assert_int_equal(add_id(fx->reg, &m3_fn, s3_real, 3, false, 0, 7), CR_OK);
    double buf[2] = {1, 2};
    cr_array a64 = cr_array_vector(buf, 2);
    const cr_value kinds[7] = {cr_value_f64(1),
                               cr_value_f32(1),
                               cr_value_c128(1),
                               cr_value_i64(1),
                               cr_value_bool(false),
                               cr_value_array(&a64),
                               cr_value_function(&m_fn, NULL)};
    const int want[7] = {5, 7, 6, 7, 7, -1, -1};
    for (int round = 0; round < 2; round++)
        for (size_t a = 0; a < 7; a++)
            for (size_t b = 0; b < 7; b++)
                for (size_t c = 0; c < 7; c++) {
                    cr_value args[3] = {kinds[a], kinds[b], kinds[c]};
                    assert_int_equal(lookup_id(fx->reg, NULL, CR_MODE_RRULE, &f3, args, 3),
                                     want[a]);
                }
}
static const cr_function c_fn = {.name = "c", .arity = 1, .primal = first_primal};
static const cr_function c2_fn = {.name = "c2", .arity = 1, .primal = first_primal};

static void test_capabilities(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_f64[1] = {CR_ARG_F64}, s_real[1] = {CR_ARG_REAL};
    assert_int_equal(add_id(fx->reg, &c_fn, s_f64, 1, false, CR_CAP_REVERSE, 2), CR_OK);
    const cr_config none = {.registry = fx->reg};
    const cr_config rev = {.registry = fx->reg, .caps = CR_CAP_REVERSE};
    const cr_config fwd = {.registry = fx->reg, .caps = CR_CAP_FORWARD};
    const cr_config both = {.registry = fx->reg, .caps = CR_CAP_REVERSE | CR_CAP_FORWARD};
    cr_value f = cr_value_function(&c_fn, NULL), x = cr_value_f64(1.0), s = cr_value_f32(1.0f);
    /* Found only with a configuration that has the capability. */
    assert_int_equal(rrule_hit(fx, &none, &f, &x, 1), -1);
    assert_int_equal(rrule_hit(fx, &fwd, &f, &x, 1), -1);
    assert_int_equal(rrule_hit(fx, &rev, &f, &x, 1), 2);
    assert_int_equal(rrule_hit(fx, &both, &f, &x, 1), 2);
    /* With a config-free rule as well: the config-specific one wins when it applies, even
     * though the config-free signature is the same... */
    assert_int_equal(add_id(fx->reg, &c_fn, s_f64, 1, false, 0, 1), CR_OK);
    assert_int_equal(rrule_hit(fx, &rev, &f, &x, 1), 2);
    assert_int_equal(rrule_hit(fx, &none, &f, &x, 1), 1); /* ...else the fallback */
    assert_int_equal(rrule_hit(fx, NULL, &f, &x, 1), -1); /* NULL: the built-ins only */
    /* A config-specific rule for f64 only: other kinds fall back to the config-free rule
     * even under that configuration. */
    assert_int_equal(add_id(fx->reg, &c2_fn, s_f64, 1, false, CR_CAP_REVERSE, 3), CR_OK);
    assert_int_equal(add_id(fx->reg, &c2_fn, s_real, 1, false, 0, 4), CR_OK);
    cr_value f2 = cr_value_function(&c2_fn, NULL);
    assert_int_equal(rrule_hit(fx, &rev, &f2, &x, 1), 3);
    assert_int_equal(rrule_hit(fx, &rev, &f2, &s, 1), 4);
    assert_int_equal(rrule_hit(fx, &none, &f2, &x, 1), 4);
    /* Among config-specific rules, the one needing more capabilities is more specific. */
    assert_int_equal(add_id(fx->reg, &c2_fn, s_f64, 1, false, CR_CAP_REVERSE | CR_CAP_MUTATION, 5),
                     CR_OK);
    const cr_config revmut = {.registry = fx->reg, .caps = CR_CAP_REVERSE | CR_CAP_MUTATION};
    assert_int_equal(rrule_hit(fx, &revmut, &f2, &x, 1), 5);
    assert_int_equal(rrule_hit(fx, &rev, &f2, &x, 1), 3);
}

typedef struct ad_log {
    int rcalls, fcalls;
    const cr_value *f;
} ad_log;

static cr_status my_rrule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                 void *ad_env)
{
    (void)cfg;
    (void)arena;
    (void)args;
    ad_log *log = ad_env;
    log->rcalls++;
    log->f = f;
    *y = cr_value_i64(42);
    *pb = (cr_pullback){id_pullback, NULL, "via_ad_pullback", nargs + 1};
    return CR_OK;
}

static cr_status my_frule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                 const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                                 cr_tangent *dy, void *ad_env)
{
    (void)cfg;
    (void)arena;
    (void)dargs;
    (void)args;
    (void)nargs;
    ad_log *log = ad_env;
    log->fcalls++;
    log->f = f;
    *y = cr_value_i64(43);
    *dy = cr_tangent_f64(2.5);
    return CR_OK;
}

/* A rule that calls back into the AD (as ChainRules' map does): only for configurations
 * with reverse mode. */
static cr_status calls_back_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                  const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                  const void *udata)
{
    (void)f;
    (void)udata;
    return cr_rrule_via_ad(cfg, arena, &cr_fn_sin, args, nargs, y, pb);
}

static const cr_function mapper_fn = {.name = "mapper", .arity = 1, .primal = first_primal};

static void test_via_ad(void **state)
{
    fixture *fx = *state;
    cr_value x = cr_value_f64(0.5), y;
    cr_pullback pb;
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(1.0)}, dy;

    /* No capability: CR_ENOCAP, naming the function. */
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_rrule_via_ad(NULL, fx->arena, &cr_fn_sin, &x, 1, &y, &pb), CR_ENOCAP);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(fx->ctx), "rrule_via_ad(sin)");
    const cr_config fwd_only = {.caps = CR_CAP_FORWARD};
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_rrule_via_ad(&fwd_only, fx->arena, &cr_fn_exp, &x, 1, &y, &pb), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(fx->ctx), "exp");
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_frule_via_ad(NULL, fx->arena, dargs, &cr_fn_cos, &x, 1, &y, &dy),
                     CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(fx->ctx), "frule_via_ad(cos)");
    /* The capability without the callback is refused too. */
    const cr_config nocb = {.caps = CR_CAP_REVERSE | CR_CAP_FORWARD};
    assert_int_equal(cr_rrule_via_ad(&nocb, fx->arena, &cr_fn_sin, &x, 1, &y, &pb), CR_ENOCAP);
    assert_int_equal(cr_frule_via_ad(&nocb, fx->arena, dargs, &cr_fn_sin, &x, 1, &y, &dy),
                     CR_ENOCAP);

    /* With callbacks: they are called with the function and the environment. */
    ad_log log = {0, 0, NULL};
    const cr_config ad = {.caps = CR_CAP_REVERSE | CR_CAP_FORWARD,
                          .registry = fx->reg,
                          .rrule_via_ad = my_rrule_via_ad,
                          .frule_via_ad = my_frule_via_ad,
                          .ad_env = &log};
    assert_int_equal(cr_rrule_via_ad(&ad, fx->arena, &cr_fn_sin, &x, 1, &y, &pb), CR_OK);
    assert_int_equal(log.rcalls, 1);
    assert_ptr_equal(log.f, &cr_fn_sin);
    assert_int_equal(y.u.i64, 42);
    assert_string_equal(pb.name, "via_ad_pullback");
    assert_int_equal(cr_frule_via_ad(&ad, fx->arena, dargs, &cr_fn_cos, &x, 1, &y, &dy), CR_OK);
    assert_int_equal(log.fcalls, 1);
    assert_ptr_equal(log.f, &cr_fn_cos);
    assert_int_equal(y.u.i64, 43);
    assert_true(dy.u.f64 == 2.5);

    /* A rule requiring reverse mode calls back into the AD through its cfg. */
    const cr_argspec s_real[1] = {CR_ARG_REAL};
    cr_rule_def d = {0};
    d.fn = &mapper_fn;
    d.nargs = 1;
    d.args = s_real;
    d.caps = CR_CAP_REVERSE;
    d.rrule = calls_back_rrule;
    assert_int_equal(cr_registry_add(fx->reg, &d), CR_OK);
    cr_value mf = cr_value_function(&mapper_fn, NULL);
    assert_int_equal(cr_rrule(&ad, fx->arena, &mf, &x, 1, &y, &pb), CR_OK);
    assert_int_equal(log.rcalls, 2);
    assert_ptr_equal(log.f, &cr_fn_sin);
    const cr_config plain = {.registry = fx->reg};
    assert_int_equal(cr_rrule(&plain, fx->arena, &mf, &x, 1, &y, &pb), CR_NOTHING);
}

/* ---- Freezing, lookup by name, signatures, the built-ins ---------------------------------- */

static void test_frozen(void **state)
{
    fixture *fx = *state;
    const cr_argspec s_f64[1] = {CR_ARG_F64};
    assert_int_equal(add_id(fx->reg, &k_fn, s_f64, 1, false, 0, 1), CR_OK);
    assert_int_equal(cr_registry_freeze(fx->reg), CR_OK);
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(add_id(fx->reg, &g_fn, s_f64, 1, false, 0, 2), CR_EMISUSE);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_EMISUSE);
    assert_contains(cr_ctx_errmsg(fx->ctx), "frozen");
    assert_int_equal(cr_registry_opt_out(fx->reg, CR_MODE_RRULE, &k_fn, s_f64, 1, false, 0),
                     CR_EMISUSE);
    assert_int_equal(cr_registry_non_differentiable(fx->reg, &g_fn, s_f64, 1, false), CR_EMISUSE);
    assert_int_equal(cr_registry_size(fx->reg), 1);
    /* Lookups still work. */
    const cr_config cfg = {.registry = fx->reg};
    cr_value f = cr_value_function(&k_fn, NULL), x = cr_value_f64(1.0);
    assert_int_equal(rrule_hit(fx, &cfg, &f, &x, 1), 1);
    assert_int_equal(cr_registry_freeze(NULL), CR_EINVAL);
}

static void test_builtin_and_find(void **state)
{
    fixture *fx = *state;
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    const cr_registry *b = cr_registry_builtin();
    assert_non_null(b);
    assert_ptr_equal(b, cr_registry_builtin());
    assert_true(cr_registry_size(b) >= 13);
    assert_ptr_equal(cr_registry_find(b, "sin"), cr_fn_sin.u.func.fn);
    assert_ptr_equal(cr_registry_find(b, "+"), cr_fn_add.u.func.fn);
    assert_ptr_equal(cr_registry_find(b, "sincos"), cr_fn_sincos.u.func.fn);
    assert_ptr_equal(cr_registry_find(b, "ignore_derivatives"), &cr_function_ignore_derivatives);
    assert_null(cr_registry_find(b, "no_such_function"));
    assert_null(cr_registry_find(b, NULL));
    /* A user registry finds its own functions and its parents'. */
    const cr_argspec s_f64[1] = {CR_ARG_F64};
    assert_int_equal(add_id(fx->reg, &k_fn, s_f64, 1, false, 0, 1), CR_OK);
    assert_ptr_equal(cr_registry_find(fx->reg, "k"), &k_fn);
    assert_ptr_equal(cr_registry_find(fx->reg, "exp"), cr_fn_exp.u.func.fn);
    assert_null(cr_registry_find(b, "k"));
    /* Every built-in entry describes itself. */
    for (size_t i = 0; i < cr_registry_size(b); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(b, i, &info), CR_OK);
        assert_non_null(info.fn);
        assert_non_null(info.fn->name);
        assert_true(info.has_rrule || info.no_rrule);
    }
    /* The built-in registry is frozen. */
    assert_int_equal(add_id((cr_registry *)(uintptr_t)b, &k_fn, s_f64, 1, false, 0, 2), CR_EMISUSE);
}

static void test_signature_str(void **state)
{
    (void)state;
    char buf[128];
    const cr_argspec a1[1] = {CR_ARG_F64};
    assert_int_equal(cr_signature_str("sin", a1, 1, false, buf, sizeof buf), strlen("sin(f64)"));
    assert_string_equal(buf, "sin(f64)");
    const cr_argspec a2[2] = {CR_ARG_REAL, CR_ARG_REAL};
    cr_signature_str("hypot", a2, 2, true, buf, sizeof buf);
    assert_string_equal(buf, "hypot(real, real...)");
    const cr_argspec a3[4] = {CR_ARG_NUMBER, CR_ARG_STRUCT(&point_type), CR_ARG_STRUCT(NULL),
                              CR_ARG_ANY};
    cr_signature_str("f", a3, 4, false, buf, sizeof buf);
    assert_string_equal(buf, "f(number, point, struct, any)");
    const cr_argspec a4[4] = {CR_ARG_C128, CR_ARG_INT, CR_ARG_ARRAY_F64, CR_ARG_ARRAY};
    cr_signature_str("g", a4, 4, false, buf, sizeof buf);
    assert_string_equal(buf, "g(c128, int, array{f64}, array)");
    cr_signature_str("z", NULL, 0, false, buf, sizeof buf);
    assert_string_equal(buf, "z()");
    /* Truncation: like snprintf, the needed length and a terminated prefix. */
    char small[6];
    size_t need = cr_signature_str("hypot", a2, 2, true, small, sizeof small);
    assert_int_equal(need, strlen("hypot(real, real...)"));
    assert_string_equal(small, "hypot");
    assert_int_equal(cr_signature_str("hypot", a2, 2, true, NULL, 0), need);
}

/* ---- Error messages ---------------------------------------------------------------------- */

static cr_status failing_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                               const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                               const void *udata)
{
    (void)cfg;
    (void)args;
    (void)nargs;
    (void)y;
    (void)pb;
    (void)udata;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "%s: x outside the domain",
                        f->u.func.fn->name);
}

static const cr_function fails_fn = {.name = "fails", .arity = 1, .primal = first_primal};

static void test_error_messages(void **state)
{
    fixture *fx = *state;
    const cr_config cfg = {.registry = fx->reg};
    cr_value x = cr_value_f64(1.0), y;
    cr_pullback pb;

    /* A rule's own failure reaches the caller with its message. */
    const cr_argspec s_f64[1] = {CR_ARG_F64};
    cr_rule_def d = {0};
    d.fn = &fails_fn;
    d.nargs = 1;
    d.args = s_f64;
    d.rrule = failing_rrule;
    assert_int_equal(cr_registry_add(fx->reg, &d), CR_OK);
    cr_value f = cr_value_function(&fails_fn, NULL);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &x, 1, &y, &pb), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(fx->ctx), "fails: x outside the domain");

    /* Invalid definitions name the function. */
    d.rrule = NULL;
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_registry_add(fx->reg, &d), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "fails");
    d.rrule = failing_rrule;
    const cr_argspec empty[1] = {{0, NULL}};
    d.args = empty;
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_registry_add(fx->reg, &d), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "fails");
    d.args = NULL;
    assert_int_equal(cr_registry_add(fx->reg, &d), CR_EINVAL);
    d.fn = NULL;
    d.args = s_f64;
    assert_int_equal(cr_registry_add(fx->reg, &d), CR_EINVAL);
    assert_int_equal(cr_registry_add(fx->reg, NULL), CR_EINVAL);
    d.fn = &fails_fn;
    d.nargs = CR_SIG_MAX_ARGS + 1;
    assert_int_equal(cr_registry_add(fx->reg, &d), CR_EINVAL);

    /* Misuse of the entry points. */
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &x, 1, NULL, &pb), CR_EINVAL);
    assert_int_equal(cr_frule(&cfg, fx->arena, NULL, &f, &x, 1, &y, NULL), CR_EINVAL);
    assert_int_equal(cr_registry_new(fx->ctx, NULL, NULL), CR_EINVAL);
    cr_rule_match m;
    assert_int_equal(cr_registry_lookup(fx->reg, NULL, CR_MODE_BOTH, &f, &x, 1, &m), CR_EINVAL);
    assert_int_equal(cr_registry_lookup(fx->reg, NULL, CR_MODE_RRULE, &x, &x, 1, &m), CR_EINVAL);
}

/* ---- Debug mode -------------------------------------------------------------------------- */

/* A deliberately wrong rule: its pullback gives a complex cotangent for a real argument. */
static cr_status bad_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)dy;
    (void)nx;
    (void)arena;
    (void)env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_c128(CMPLX(1.0, 2.0));
    return CR_OK;
}

static cr_status bad_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)f;
    (void)udata;
    *y = args[0];
    *pb = (cr_pullback){bad_pullback, NULL, "bad_pullback", nargs + 1};
    return CR_OK;
}

/* Another: a plain function (no fields) whose pullback gives a real ∂self. */
static cr_status badself_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                  void *env)
{
    (void)dy;
    (void)nx;
    (void)arena;
    (void)env;
    dx[0] = cr_tangent_f64(1.0);
    dx[1] = cr_tangent_f64(1.0);
    return CR_OK;
}

static cr_status badself_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                               const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                               const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)f;
    (void)udata;
    *y = args[0];
    *pb = (cr_pullback){badself_pullback, NULL, "badself_pullback", nargs + 1};
    return CR_OK;
}

static const cr_function bad_fn = {.name = "bad", .arity = 1, .primal = first_primal};
static const cr_function badself_fn = {.name = "badself", .arity = 1, .primal = first_primal};

static void add_rrule(cr_registry *reg, const cr_function *fn, cr_rrule_fn rrule)
{
    const cr_argspec s_real[1] = {CR_ARG_REAL};
    cr_rule_def d = {0};
    d.fn = fn;
    d.nargs = 1;
    d.args = s_real;
    d.rrule = rrule;
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
}

static void test_debug_wrong_tangent(void **state)
{
    fixture *fx = *state;
    add_rrule(fx->reg, &bad_fn, bad_rrule);
    add_rrule(fx->reg, &badself_fn, badself_rrule);
    const cr_config cfg = {.registry = fx->reg};
    cr_value f = cr_value_function(&bad_fn, NULL), x = cr_value_f64(1.0), y;
    cr_pullback pb;
    cr_tangent ybar = cr_tangent_f64(1.0), dx[2];

    /* Without debug mode the wrong cotangent goes through unchecked. */
    assert_false(cr_ctx_debug(fx->ctx));
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &x, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_C128);

    cr_ctx_set_debug(fx->ctx, true);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &x, 1, &y, &pb), CR_OK);
    assert_string_equal(pb.name, "bad_pullback");
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_ETANGENT);
    const char *msg = cr_ctx_errmsg(fx->ctx);
    assert_contains(msg, "bad_pullback");
    assert_contains(msg, "argument 1");
    assert_contains(msg, "c128");

    /* An f32 argument given an f64 cotangent is outside its space too. */
    cr_value xs = cr_value_f32(1.0f);
    static const cr_function bad32_fn = {.name = "bad32", .arity = 1, .primal = first_primal};
    add_rrule(fx->reg, &bad32_fn, badself_rrule);
    cr_value f32v = cr_value_function(&bad32_fn, NULL);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f32v, &xs, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_ETANGENT);

    /* ∂self of a function without fields must be NoTangent (or zero). */
    cr_value fs = cr_value_function(&badself_fn, NULL);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &fs, &x, 1, &y, &pb), CR_OK);
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "badself_pullback");
    assert_contains(cr_ctx_errmsg(fx->ctx), "self");

    /* The built-in rules pass the checks, including integer and f32 arguments. */
    cr_value args[2] = {cr_value_f32(0.5f), cr_value_i64(2)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_mul, args, 2, &y, &pb), CR_OK);
    cr_tangent dx3[3];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx3, 3), CR_OK);
    cr_value z = cr_value_c128(CMPLX(0.5, 1.0));
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_exp, &z, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_sincos, &x, 1, &y, &pb), CR_OK);
    cr_tangent tv[2] = {cr_tangent_f64(1.0), cr_tangent_f64(2.0)}, tb;
    assert_int_equal(cr_tangent_struct(fx->arena, y.u.obj.type, NULL, tv, 2, &tb), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &tb, dx, 2), CR_OK);
    cr_ctx_set_debug(fx->ctx, false);
}

static void test_debug_function_value_not_kept(void **state)
{
    /* The debug wrapper must not keep a pointer to the caller's function value: here it
     * is overwritten between the rrule and the pullback call. */
    fixture *fx = *state;
    add_rrule(fx->reg, &bad_fn, bad_rrule);
    const cr_config cfg = {.registry = fx->reg};
    cr_ctx_set_debug(fx->ctx, true);
    cr_value *fv = malloc(sizeof *fv);
    assert_non_null(fv);
    *fv = cr_value_function(&bad_fn, NULL);
    cr_value x = cr_value_f64(1.0), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, fx->arena, fv, &x, 1, &y, &pb), CR_OK);
    memset(fv, 0xA5, sizeof *fv);
    free(fv);
    cr_tangent ybar = cr_tangent_f64(1.0), dx[2];
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "of bad");
    cr_ctx_set_debug(fx->ctx, false);
}

/* Nested pullbacks: outer's pullback calls inner's, which fails. */
static cr_status inner_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)dy;
    (void)dx;
    (void)nx;
    (void)env;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "inner: cotangent out of range");
}

static cr_status inner_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)f;
    (void)udata;
    *y = args[0];
    *pb = (cr_pullback){inner_pullback, NULL, "inner_pullback", nargs + 1};
    return CR_OK;
}

static const cr_function inner_fn = {.name = "inner", .arity = 1, .primal = first_primal};
static const cr_function outer_fn = {.name = "outer", .arity = 1, .primal = first_primal};

static cr_status outer_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    const cr_pullback *inner = env;
    cr_tangent d[2];
    cr_status st = cr_pullback_call(arena, inner, dy, d, 2);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = d[1];
    return CR_OK;
}

static cr_status outer_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)f;
    (void)udata;
    cr_pullback *inner = cr_arena_alloc(arena, sizeof *inner, _Alignof(cr_pullback));
    if (inner == NULL)
        return cr_ctx_errcode(cr_arena_ctx(arena));
    const cr_value fi = cr_value_function(&inner_fn, NULL);
    cr_status st = cr_rrule(cfg, arena, &fi, args, nargs, y, inner);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){outer_pullback, inner, "outer_pullback", nargs + 1};
    return CR_OK;
}

static void test_debug_pullback_chain(void **state)
{
    fixture *fx = *state;
    add_rrule(fx->reg, &inner_fn, inner_rrule);
    add_rrule(fx->reg, &outer_fn, outer_rrule);
    const cr_config cfg = {.registry = fx->reg};
    cr_value f = cr_value_function(&outer_fn, NULL), x = cr_value_f64(1.0), y;
    cr_pullback pb;
    cr_tangent ybar = cr_tangent_f64(1.0), dx[2];

    /* Without debug mode: the failure and its own message only. */
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &x, 1, &y, &pb), CR_OK);
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(fx->ctx), "inner: cotangent out of range");
    assert_null(strstr(cr_ctx_errmsg(fx->ctx), "in pullback"));

    /* In debug mode: the chain of pullback names, innermost first, each named once. */
    cr_ctx_set_debug(fx->ctx, true);
    assert_int_equal(cr_rrule(&cfg, fx->arena, &f, &x, 1, &y, &pb), CR_OK);
    cr_ctx_clear_error(fx->ctx);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_EDOMAIN);
    const char *msg = cr_ctx_errmsg(fx->ctx);
    assert_int_equal(cr_ctx_errcode(fx->ctx), CR_EDOMAIN);
    assert_contains(msg, "inner: cotangent out of range");
    const char *pi = strstr(msg, "in pullback inner_pullback");
    const char *po = strstr(msg, "in pullback outer_pullback");
    assert_non_null(pi);
    assert_non_null(po);
    assert_true(pi < po);
    assert_int_equal(count_of(msg, "in pullback inner_pullback"), 1);
    assert_int_equal(count_of(msg, "in pullback outer_pullback"), 1);
    cr_ctx_set_debug(fx->ctx, false);
}

/* ---- ignore_derivatives ------------------------------------------------------------------ */

typedef struct counter {
    int calls;
    cr_status ret;
} counter;

static cr_status count_cb(void *env)
{
    counter *c = env;
    c->calls++;
    return c->ret;
}

static void test_ignore_derivatives(void **state)
{
    fixture *fx = *state;
    cr_value x = cr_value_f64(2.5), y;
    assert_ptr_equal(cr_fn_ignore_derivatives.u.func.fn, &cr_function_ignore_derivatives);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_ignore_derivatives, &x, 1, &y), CR_OK);
    assert_true(y.u.f64 == 2.5);

    cr_tangent dargs[2] = {cr_tangent_zero(), cr_tangent_f64(1.0)}, dy;
    assert_int_equal(cr_frule(NULL, fx->arena, dargs, &cr_fn_ignore_derivatives, &x, 1, &y, &dy),
                     CR_OK);
    assert_true(y.u.f64 == 2.5);
    assert_int_equal(dy.tag, CR_TAN_NONE);

    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_ignore_derivatives, &x, 1, &y, &pb), CR_OK);
    cr_tangent ybar = cr_tangent_f64(3.0), dx[2];
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &ybar, dx, 2), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NONE);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    /* Any kind of value passes through. */
    point p = {1, 2};
    cr_value pv = cr_value_struct(&point_type, &p);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_ignore_derivatives, &pv, 1, &y, &pb), CR_OK);
    assert_ptr_equal(y.u.obj.ptr, &p);

    counter c = {0, CR_OK};
    assert_int_equal(cr_ignore_derivatives(count_cb, &c), CR_OK);
    assert_int_equal(c.calls, 1);
    c.ret = CR_EDOMAIN;
    assert_int_equal(cr_ignore_derivatives(count_cb, &c), CR_EDOMAIN);
    assert_int_equal(c.calls, 2);
    assert_int_equal(cr_ignore_derivatives(NULL, NULL), CR_EINVAL);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_specificity),
        T(test_struct_matchers),
        T(test_variadic),
        T(test_ambiguity),
        T(test_runtime_ambiguity),
        T(test_child_overrides_parent),
        T(test_user_over_builtins),
        T(test_opt_out),
        T(test_non_differentiable),
        T(test_capabilities),
        T(test_lookup_memo),
        T(test_lookup_memo_keys),
        T(test_via_ad),
        T(test_frozen),
        T(test_builtin_and_find),
        T(test_signature_str),
        T(test_error_messages),
        T(test_debug_wrong_tangent),
        T(test_debug_function_value_not_kept),
        T(test_debug_pullback_chain),
        T(test_ignore_derivatives),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
