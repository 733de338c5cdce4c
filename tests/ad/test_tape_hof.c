/*
 * The higher-order array rules (map, sum(f, A), foldl, accumulate, broadcast) with the
 * engine's RuleConfig: user functions known to the engine only through overlays are
 * differentiated per element by rrule_via_ad / frule_via_ad, and the rules are checked
 * against finite differences of their primals by the rule tester. A configuration that
 * counts the via_ad calls shows that scalar-table functions never go through them (and
 * the arena shows that nothing per element is kept for them); configurations without the
 * capabilities, failing user functions, functions the engine cannot differentiate and
 * functors give the documented statuses.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"
#include "test_wave.h"

#include <chainrules/testing_cmocka.h>

/* ---- User functions: primals for everyone, overlays for the engine ----------------------- */

/* mix(a, b) = a sin(b) + b: not symmetric, so a fold's order matters. */
static double num(const cr_value *v)
{
    switch (v->kind) {
    case CR_KIND_F32:
        return (double)v->u.f32;
    case CR_KIND_I64:
    case CR_KIND_I32:
        return (double)v->u.i64;
    default:
        return v->u.f64;
    }
}

static cr_status mix_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    double a = num(&args[0]), b = num(&args[1]);
    *out = cr_value_f64(a * sin(b) + b);
    return CR_OK;
}
static const cr_function mix_fn = {.name = "mix", .arity = 2, .primal = mix_primal};

static cr_status mix_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_add(t, cr_mul(t, x[0], cr_sin(t, x[1])), x[1]);
    return cr_tape_status(t);
}

/* fragile(a, b) = sqrt(b) + a, failing (CR_EDOMAIN) for b < 0, in its primal and overlay. */
static cr_status fragile_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                                size_t nargs, cr_value *out)
{
    (void)fv;
    double b = num(&args[nargs - 1]), a = nargs > 1 ? num(&args[0]) : 0;
    if (b < 0)
        return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "fragile: negative argument");
    *out = cr_value_f64(sqrt(b) + a);
    return CR_OK;
}
static const cr_function fragile_fn = {.name = "fragile", .arity = -1, .primal = fragile_primal};

static cr_status fragile_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    if (x[n - 1].v < 0)
        return CR_EDOMAIN;
    y[0] = cr_sqrt(t, x[n - 1]);
    if (n > 1)
        y[0] = cr_add(t, y[0], x[0]);
    return cr_tape_status(t);
}

/* A function with a primal and nothing the engine can record. */
static const cr_function opaque_fn = {.name = "opaque", .arity = 1, .primal = wave_primal};

/* shifted(x) = x² + c, a functor with the field c (the overlay reads c through its env). */
typedef struct shift_self {
    double c;
} shift_self;
static const cr_field shift_fields[1] = {{"c", offsetof(shift_self, c), CR_KIND_F64, NULL}};
static const cr_type shift_type = {"shifted", sizeof(shift_self), 1, shift_fields};

static cr_status shifted_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                                size_t nargs, cr_value *out)
{
    (void)arena;
    (void)nargs;
    const shift_self *s = fv->u.func.self;
    *out = cr_value_f64(args[0].u.f64 * args[0].u.f64 + s->c);
    return CR_OK;
}
static const cr_function shifted_fn = {
    .name = "shifted", .arity = 1, .primal = shifted_primal, .self_type = &shift_type};

static cr_status shifted_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const shift_self *s = env;
    y[0] = cr_add(t, cr_mul(t, x[0], x[0]), cr_const(s->c));
    return cr_tape_status(t);
}

/* ---- The fixture: an engine with the overlays, and a counting configuration ----------- */

typedef struct counting {
    const cr_config *engine; /* the engine's configuration */
    size_t rrules, frules;   /* via_ad calls seen */
} counting;

static cr_status count_rrule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                    const cr_value *args, size_t nargs, cr_value *y,
                                    cr_pullback *pb, void *ad_env)
{
    (void)cfg;
    counting *c = ad_env;
    c->rrules++;
    return c->engine->rrule_via_ad(c->engine, arena, f, args, nargs, y, pb, c->engine->ad_env);
}

static cr_status count_frule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                    const cr_value *f, const cr_value *args, size_t nargs,
                                    cr_value *y, cr_tangent *dy, void *ad_env)
{
    (void)cfg;
    counting *c = ad_env;
    c->frules++;
    return c->engine->frule_via_ad(c->engine, arena, dargs, f, args, nargs, y, dy,
                                   c->engine->ad_env);
}

typedef struct hfix {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_engine *eng;
    const cr_config *cfg; /* the engine's */
    counting count;
    cr_config counted; /* the engine's, through the counters */
    shift_self shift;
} hfix;

static int hfix_setup(void **state)
{
    hfix *h = calloc(1, sizeof *h);
    if (h == NULL || cr_ctx_new(NULL, &h->ctx) != CR_OK ||
        cr_arena_new(h->ctx, NULL, &h->arena) != CR_OK ||
        cr_engine_new(h->ctx, NULL, &h->eng) != CR_OK)
        return -1;
    h->shift.c = 0.75;
    if (cr_engine_overlay(h->eng, &wave_fn, wave_ad, 1, NULL) != CR_OK ||
        cr_engine_overlay(h->eng, &mix_fn, mix_ad, 1, NULL) != CR_OK ||
        cr_engine_overlay(h->eng, &fragile_fn, fragile_ad, 1, NULL) != CR_OK ||
        cr_engine_overlay(h->eng, &shifted_fn, shifted_ad, 1, &h->shift) != CR_OK)
        return -1;
    h->cfg = cr_engine_config(h->eng);
    h->count.engine = h->cfg;
    h->counted = *h->cfg;
    h->counted.rrule_via_ad = count_rrule_via_ad;
    h->counted.frule_via_ad = count_frule_via_ad;
    h->counted.ad_env = &h->count;
    cr_ctx_set_debug(h->ctx, true);
    *state = h;
    return 0;
}

static int hfix_teardown(void **state)
{
    hfix *h = *state;
    cr_engine_free(h->eng);
    cr_arena_free(h->arena);
    cr_ctx_free(h->ctx);
    free(h);
    return 0;
}

/* rrule, frule and their dot-product test under cfg, against finite differences. */
static void check_rules(hfix *h, const cr_config *cfg, const cr_value *f, const cr_value *args,
                        size_t nargs)
{
    cr_test_opts opts = {0};
    opts.cfg = cfg;
    cr_test_report r;
    CR_ASSERT_RULE_TEST(cr_test_rrule(h->arena, &opts, f, args, nargs, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_frule(h->arena, &opts, f, args, nargs, &r), r);
    CR_ASSERT_RULE_TEST(cr_test_consistency(h->arena, &opts, f, args, nargs, &r), r);
}

/* ---- Gradients of user functions through the rules ----------------------------------------- */

static void test_map_user_function(void **state)
{
    hfix *h = *state;
    double a[6] = {0.5, -1.25, 2, 1.5, 0.25, -0.75}, b[6] = {1, -0.5, 0.75, 2.5, -2, 0.1};
    cr_array A = cr_array_matrix(a, 2, 3), B = cr_array_matrix(b, 2, 3);
    cr_value wave = cr_value_function(&wave_fn, NULL), mix = cr_value_function(&mix_fn, NULL);
    cr_value args[3] = {wave, cr_value_array(&A), cr_value_array(&B)};
    check_rules(h, &h->counted, &cr_fn_map, args, 2);
    args[0] = mix;
    check_rules(h, &h->counted, &cr_fn_map, args, 3);
    /* One rrule_via_ad per element, whose pullbacks the map pullback runs. */
    h->count.rrules = 0;
    cr_value y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&h->counted, h->arena, &cr_fn_map, args, 3, &y, &pb), CR_OK);
    assert_int_equal(h->count.rrules, 6);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 4)), 0.25 * sin(-2.0) - 2);
    cr_tangent dy = cr_tangent_array(y.u.arr), dx[4];
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE); /* a plain function */
    /* f32 arrays: an f32 result and f32 cotangents (the engine computes in double). */
    float af[6] = {0.5f, -1.25f, 2, 1.5f, 0.25f, -0.75f};
    size_t sh[2] = {2, 3};
    cr_array Af;
    cr_array_view_init(&Af, af, CR_DT_F32, 2, sh, NULL);
    cr_value fargs[2] = {wave, cr_value_array(&Af)};
    assert_int_equal(cr_rrule(h->cfg, h->arena, &cr_fn_map, fargs, 2, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    dy = cr_tangent_array(y.u.arr);
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 3), CR_OK);
    cr_tangent d2;
    assert_int_equal(cr_tangent_unthunk(dx[2], &d2), CR_OK);
    assert_int_equal(d2.u.arr->dtype, CR_DT_F32);
    check_rules(h, h->cfg, &cr_fn_map, fargs, 2);
}

static void test_broadcast_user_function(void **state)
{
    hfix *h = *state;
    double a[6] = {0.5, -1.25, 2, 1.5, 0.25, -0.75}, b[3] = {1, -0.5, 0.75};
    cr_array A = cr_array_matrix(a, 2, 3), B = cr_array_vector(b, 3), C = cr_array_matrix(b, 3, 1);
    cr_value mix = cr_value_function(&mix_fn, NULL), wave = cr_value_function(&wave_fn, NULL);
    /* A row vector broadcast along the rows, a column against a row, a scalar. */
    cr_value args[3] = {mix, cr_value_array(&A), cr_value_array(&B)};
    check_rules(h, h->cfg, &cr_fn_broadcast, args, 3);
    args[1] = cr_value_array(&C);
    check_rules(h, h->cfg, &cr_fn_broadcast, args, 3);
    args[1] = cr_value_f64(0.3);
    args[2] = cr_value_array(&A);
    check_rules(h, h->cfg, &cr_fn_broadcast, args, 3);
    args[0] = wave;
    args[1] = cr_value_array(&A);
    check_rules(h, h->cfg, &cr_fn_broadcast, args, 2);
}

static void test_sum_user_function(void **state)
{
    hfix *h = *state;
    double a[6] = {0.5, -1.25, 2, 1.5, 0.25, -0.75};
    cr_array A = cr_array_matrix(a, 2, 3);
    cr_value wave = cr_value_function(&wave_fn, NULL);
    cr_value args[3] = {wave, cr_value_array(&A), cr_value_i64(0)};
    check_rules(h, &h->counted, &cr_fn_sum, args, 2);
    check_rules(h, &h->counted, &cr_fn_sum, args, 3);
    int64_t both[2] = {0, 1};
    size_t n2 = 2;
    cr_array Dm;
    cr_array_view_init(&Dm, both, CR_DT_I64, 1, &n2, NULL);
    args[2] = cr_value_array(&Dm);
    check_rules(h, &h->counted, &cr_fn_sum, args, 3);
    cr_value y;
    assert_int_equal(cr_function_call(h->arena, &cr_fn_sum, args, 2, &y), CR_OK);
    double s = 0;
    for (size_t i = 0; i < 6; i++)
        s += a[i] * sin(a[i]);
    assert_true(fabs(y.u.f64 - s) <= 1e-15 * fabs(s));
}

static void test_fold_user_function(void **state)
{
    hfix *h = *state;
    double v[5] = {0.5, -1.25, 2, 1.5, 0.25};
    cr_array V = cr_array_vector(v, 5);
    cr_value mix = cr_value_function(&mix_fn, NULL);
    cr_value args[3] = {mix, cr_value_array(&V), cr_value_f64(0.3)};
    check_rules(h, &h->counted, &cr_fn_foldl, args, 2);
    check_rules(h, &h->counted, &cr_fn_foldl, args, 3);
    check_rules(h, &h->counted, &cr_fn_accumulate, args, 2);
    check_rules(h, &h->counted, &cr_fn_accumulate, args, 3);
    args[2] = cr_value_i64(2); /* an integer init: a constant to the engine */
    check_rules(h, &h->counted, &cr_fn_foldl, args, 3);
    check_rules(h, &h->counted, &cr_fn_accumulate, args, 3);
    /* The order: mix(mix(2, v0), v1)... */
    cr_value y;
    assert_int_equal(cr_function_call(h->arena, &cr_fn_foldl, args, 3, &y), CR_OK);
    double r = 2;
    for (size_t k = 0; k < 5; k++)
        r = r * sin(v[k]) + v[k];
    ASSERT_DBL(y.u.f64, r);
    /* One step per element after the first without init, per element with it. */
    h->count.rrules = 0;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&h->counted, h->arena, &cr_fn_accumulate, args, 2, &y, &pb), CR_OK);
    assert_int_equal(h->count.rrules, 4);
    h->count.frules = 0;
    cr_tangent dargs[4] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_array(&V),
                           cr_tangent_f64(1)},
               dy;
    assert_int_equal(cr_frule(&h->counted, h->arena, dargs, &cr_fn_foldl, args, 3, &y, &dy), CR_OK);
    assert_int_equal(h->count.frules, 5);
}

/* ---- Scalar-table functions: partials, no per-element pullback ---------------------------- */

static void test_rows_keep_partials_only(void **state)
{
    hfix *h = *state;
    enum { N = 4096 };
    double *x = malloc(N * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5 + 0.25 * sin((double)i);
    cr_array X = cr_array_vector(x, N);
    cr_value sinv = cr_value_function(cr_registry_find(cr_registry_builtin(), "sin"), NULL);
    const struct {
        const cr_value *fn;
        cr_value f;
        size_t doubles; /* arrays of N doubles the rule may keep */
    } cases[] = {
        {&cr_fn_map, sinv, 2},             /* y and f'(x) */
        {&cr_fn_sum, sinv, 1},             /* f'(x) */
        {&cr_fn_foldl, cr_fn_mul, 2},      /* ∂op/∂a, ∂op/∂b */
        {&cr_fn_accumulate, cr_fn_add, 5}, /* the two partials, y (complex) and the result */
    };
    h->count.rrules = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cr_value args[2] = {cases[c].f, cr_value_array(&X)}, y;
        cr_pullback pb;
        size_t before = cr_arena_used(h->arena);
        assert_int_equal(cr_rrule(&h->counted, h->arena, cases[c].fn, args, 2, &y, &pb), CR_OK);
        size_t used = cr_arena_used(h->arena) - before;
        if (used > cases[c].doubles * N * sizeof(double) + 4096) {
            print_error("case %zu keeps %zu bytes for %d elements\n", c, used, (int)N);
            fail();
        }
        cr_tangent dy = y.kind == CR_KIND_ARRAY ? cr_tangent_array(y.u.arr) : cr_tangent_f64(1),
                   dx[3];
        assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 3), CR_OK);
        cr_tangent v;
        assert_int_equal(cr_tangent_unthunk(dx[2], &v), CR_OK);
    }
    assert_int_equal(h->count.rrules, 0);
    /* A user function keeps a pullback (and the engine a recording) per element. */
    cr_array X64 = cr_array_vector(x, 64);
    cr_value args[2] = {cr_value_function(&wave_fn, NULL), cr_value_array(&X64)}, y;
    cr_pullback pb;
    size_t before = cr_arena_used(h->arena);
    assert_int_equal(cr_rrule(&h->counted, h->arena, &cr_fn_map, args, 2, &y, &pb), CR_OK);
    assert_int_equal(h->count.rrules, 64);
    assert_true(cr_arena_used(h->arena) - before > 64 * sizeof(cr_pullback));
    free(x);
}

/* ---- Capabilities, failures, what the engine cannot differentiate ------------------------- */

static void test_capabilities(void **state)
{
    hfix *h = *state;
    double a[4] = {0.5, -1.25, 2, 1.5};
    cr_array A = cr_array_vector(a, 4);
    cr_value wave = cr_value_function(&wave_fn, NULL), mix = cr_value_function(&mix_fn, NULL), y;
    cr_value args[2] = {wave, cr_value_array(&A)};
    cr_pullback pb;
    cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_array(&A)}, dy;
    /* No capabilities: the user function has no rule, so nothing can differentiate it. */
    cr_config none = *h->cfg;
    none.caps = 0;
    assert_int_equal(cr_rrule(&none, h->arena, &cr_fn_map, args, 2, &y, &pb), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(h->ctx), "map: no rrule for wave(f64)");
    assert_contains(cr_ctx_errmsg(h->ctx), "CR_CAP_REVERSE");
    assert_int_equal(cr_frule(&none, h->arena, dargs, &cr_fn_sum, args, 2, &y, &dy), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(h->ctx), "sum: no frule for wave(f64)");
    assert_int_equal(cr_rrule(NULL, h->arena, &cr_fn_broadcast, args, 2, &y, &pb), CR_ENOCAP);
    args[0] = mix;
    assert_int_equal(cr_rrule(NULL, h->arena, &cr_fn_accumulate, args, 2, &y, &pb), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(h->ctx), "accumulate: no rrule for mix(f64, f64)");
    /* The capability without its callback: rrule_via_ad's own status. */
    cr_config nocb = *h->cfg;
    nocb.rrule_via_ad = NULL;
    assert_int_equal(cr_rrule(&nocb, h->arena, &cr_fn_foldl, args, 2, &y, &pb), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(h->ctx), "foldl: mix failed at element 1");
    /* Reverse mode only: rrules work, frules do not. */
    cr_config rev = *h->cfg;
    rev.caps = CR_CAP_REVERSE;
    assert_int_equal(cr_rrule(&rev, h->arena, &cr_fn_foldl, args, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_frule(&rev, h->arena, dargs, &cr_fn_foldl, args, 2, &y, &dy), CR_ENOCAP);
    assert_contains(cr_ctx_errmsg(h->ctx), "CR_CAP_FORWARD");
    /* The primals need nothing. */
    assert_int_equal(cr_function_call(h->arena, &cr_fn_foldl, args, 2, &y), CR_OK);
}

static void test_failures(void **state)
{
    hfix *h = *state;
    double a[5] = {0.5, 1.25, 2, -1.5, 0.25};
    cr_array A = cr_array_vector(a, 5);
    cr_value fragile = cr_value_function(&fragile_fn, NULL), y;
    cr_value args[3] = {fragile, cr_value_array(&A), cr_value_f64(1)};
    cr_pullback pb;
    cr_tangent dargs[4] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_array(&A),
                           cr_tangent_f64(1)},
               dy;
    /* The overlay's failure, at element 3, in each rule, forward and reverse. */
    assert_int_equal(cr_rrule(h->cfg, h->arena, &cr_fn_map, args, 2, &y, &pb), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "map: fragile failed at element 3");
    assert_contains(cr_ctx_errmsg(h->ctx), "fragile (overlay) failed");
    assert_int_equal(cr_frule(h->cfg, h->arena, dargs, &cr_fn_map, args, 2, &y, &dy), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "map: fragile failed at element 3");
    assert_int_equal(cr_rrule(h->cfg, h->arena, &cr_fn_sum, args, 2, &y, &pb), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "sum: fragile failed at element 3");
    assert_int_equal(cr_rrule(h->cfg, h->arena, &cr_fn_foldl, args, 3, &y, &pb), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "foldl: fragile failed at element 3");
    assert_int_equal(cr_frule(h->cfg, h->arena, dargs, &cr_fn_accumulate, args, 3, &y, &dy),
                     CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "accumulate: fragile failed at element 3");
    /* The primal's failure, without an engine. */
    assert_int_equal(cr_function_call(h->arena, &cr_fn_foldl, args, 3, &y), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "foldl: fragile failed at element 3: negative");
    /* A function the engine has neither a rule nor an overlay for. */
    args[0] = cr_value_function(&opaque_fn, NULL);
    assert_int_equal(cr_rrule(h->cfg, h->arena, &cr_fn_map, args, 2, &y, &pb), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(h->ctx), "map: opaque failed at element 0");
    assert_contains(cr_ctx_errmsg(h->ctx), "no rrule for opaque(f64)");
    /* Complex arguments: the engine differentiates real scalars only. */
    cr_complex z[2] = {CMPLX(1, 1), CMPLX(2, -1)};
    size_t n2 = 2;
    cr_array Z;
    cr_array_view_init(&Z, z, CR_DT_C128, 1, &n2, NULL);
    cr_value zargs[2] = {cr_value_function(&wave_fn, NULL), cr_value_array(&Z)};
    assert_int_equal(cr_rrule(h->cfg, h->arena, &cr_fn_map, zargs, 2, &y, &pb), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(h->ctx), "map: wave failed at element 0");
}

/* A functor recorded through a plain overlay (which reads its field through env, not as a
 * variable): its fields' cotangent is NotImplemented, the arguments' cotangents are right
 * (tests/ad/test_tape_closure.c has the closure overlay that differentiates the fields). */
static void test_functor(void **state)
{
    hfix *h = *state;
    double a[4] = {0.5, -1.25, 2, 1.5};
    cr_array A = cr_array_vector(a, 4);
    cr_value sh = cr_value_function(&shifted_fn, &h->shift), y;
    cr_value args[2] = {sh, cr_value_array(&A)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(h->cfg, h->arena, &cr_fn_map, args, 2, &y, &pb), CR_OK);
    ASSERT_DBL(creal(cr_array_get_linear(y.u.arr, 1)), 1.25 * 1.25 + 0.75);
    cr_tangent dy = cr_tangent_array(y.u.arr), dx[4];
    cr_ctx_set_debug(h->ctx, false); /* ProjectTo of a function value is NoTangent */
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 3), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NOTIMPL);
    /* The tester: every check passes but the one on ∂f, which is known broken. */
    cr_test_opts opts = {0};
    opts.cfg = h->cfg;
    const cr_value *fns[2] = {&cr_fn_map, &cr_fn_sum};
    for (size_t i = 0; i < 2; i++) {
        cr_test_report r;
        assert_int_equal(cr_test_rrule(h->arena, &opts, fns[i], args, 2, &r), CR_OK);
        assert_int_equal(r.verdict, CR_VERDICT_BROKEN);
        assert_int_equal(r.nfailed, 0);
        assert_true(r.npassed > 0);
    }
}

/* The rrule of broadcast (and map) keeps what its pullback reads: the caller's array of
 * arguments may be gone (a rule of a user function holding it on its stack) before the
 * pullback runs, here once per row of a Jacobian. */
static cr_status bc_rrule_on_stack(const cr_config *cfg, cr_arena *arena, const cr_value *fn,
                                   cr_value f, cr_array *X, cr_value *y, cr_pullback *pb)
{
    cr_value args[2] = {f, cr_value_array(X)};
    cr_status st = cr_rrule(cfg, arena, fn, args, 2, y, pb);
    memset(args, 0, sizeof args); /* what a later call would leave there */
    return st;
}

static void test_broadcast_args_kept(void **state)
{
    hfix *h = *state;
    double a[3] = {0.5, -1.25, 2}, w[3] = {1, -2, 0.5};
    cr_array A = cr_array_vector(a, 3), W = cr_array_vector(w, 3);
    cr_value fs[2] = {cr_value_function(cr_registry_find(cr_registry_builtin(), "sin"), NULL),
                      cr_value_function(&wave_fn, NULL)};
    const cr_value *rules[2] = {&cr_fn_broadcast, &cr_fn_map};
    for (size_t k = 0; k < 2; k++)
        for (size_t r = 0; r < 2; r++) {
            cr_value y;
            cr_pullback pb;
            assert_int_equal(bc_rrule_on_stack(h->cfg, h->arena, rules[r], fs[k], &A, &y, &pb),
                             CR_OK);
            for (int call = 0; call < 2; call++) {
                cr_tangent dy = cr_tangent_array(&W), dx[3], d;
                assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 3), CR_OK);
                assert_int_equal(cr_tangent_unthunk(dx[2], &d), CR_OK);
                assert_int_equal(d.tag, CR_TAN_ARRAY);
                for (size_t i = 0; i < 3; i++) {
                    double want = k == 0 ? cos(a[i]) : sin(a[i]) + a[i] * cos(a[i]);
                    ASSERT_DBL(creal(cr_array_get_linear(d.u.arr, i)), w[i] * want);
                }
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_map_user_function, hfix_setup, hfix_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_user_function, hfix_setup, hfix_teardown),
        cmocka_unit_test_setup_teardown(test_sum_user_function, hfix_setup, hfix_teardown),
        cmocka_unit_test_setup_teardown(test_fold_user_function, hfix_setup, hfix_teardown),
        cmocka_unit_test_setup_teardown(test_rows_keep_partials_only, hfix_setup, hfix_teardown),
        cmocka_unit_test_setup_teardown(test_capabilities, hfix_setup, hfix_teardown),
        cmocka_unit_test_setup_teardown(test_failures, hfix_setup, hfix_teardown),
        cmocka_unit_test_setup_teardown(test_functor, hfix_setup, hfix_teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_args_kept, hfix_setup, hfix_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
