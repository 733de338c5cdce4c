/*
 * Fault injection (Lua's Memcontrol.failnext, SQLite's OOM tests): representative
 * scenarios of the core layer are rerun with an allocation hook that fails the N-th
 * allocation, for N = 1, 2, ... until the scenario succeeds. Every failing run must report
 * CR_ENOMEM, leave the context and arena usable (the same work succeeds once memory is
 * back), and, once everything is freed, leave no live allocation behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

#define CR_TEST_OWN_FIXTURE
#include "test_util.h"

#include "test_fault_hook.h"

/* ---- running a scenario ---------------------------------------------------------------- */

/* The work of a scenario, on a fresh arena; must return CR_OK or the failing status. */
typedef cr_status (*work_fn)(cr_arena *arena);

typedef struct scenario {
    const char *name;
    const char *fixed_name; /* name of the fixed-buffer variant */
    work_fn work;
    size_t block_size; /* arena block size: small, so the work needs many blocks */
} scenario;

/* One run with the N-th allocation failing; returns the status of the first attempt. */
static cr_status run_once(fault *fl, const scenario *sc, size_t n)
{
    arm(fl, n);
    cr_ctx_params p = {.realloc_fn = fault_realloc, .alloc_env = fl};
    cr_ctx *ctx = NULL;
    cr_status st = cr_ctx_new(&p, &ctx);
    if (st != CR_OK) {
        assert_null(ctx);
        return st;
    }
    cr_arena_params ap = {.block_size = sc->block_size};
    cr_arena *arena = NULL;
    st = cr_arena_new(ctx, &ap, &arena);
    if (st == CR_OK) {
        st = sc->work(arena);
        if (st != CR_OK) {
            /* The failure is recorded on the context ... */
            assert_int_equal(cr_ctx_errcode(ctx), CR_ENOMEM);
            /* ... and the handles stay usable: with memory back, the work succeeds. */
            fl->fail_at = 0; /* (failures keeps the count of the first attempt) */
            cr_ctx_clear_error(ctx);
            cr_arena_reset(arena);
            assert_int_equal(sc->work(arena), CR_OK);
        }
    } else {
        assert_null(arena);
        assert_int_equal(cr_ctx_errcode(ctx), CR_ENOMEM);
    }
    cr_arena_free(arena);
    cr_ctx_free(ctx);
    return st;
}

static void run_scenario(const scenario *sc)
{
    fault *fl = new_tracker();
    size_t n;
    size_t failed_runs = 0;
    for (n = 1; n < 10000; n++) {
        cr_status st = run_once(fl, sc, n);
        if (fl->live_blocks != 0 || fl->live_bytes != 0 || fl->bad_frees != 0) {
            print_error("%s, allocation %zu failing: %zu blocks (%zu bytes) leaked, "
                        "%zu bad frees\n",
                        sc->name, n, fl->live_blocks, fl->live_bytes, fl->bad_frees);
            fail();
        }
        if (st == CR_OK) {
            /* Success: the N-th allocation was never reached. */
            assert_int_equal(fl->failures, 0);
            break;
        }
        if (st != CR_ENOMEM) {
            print_error("%s, allocation %zu failing: %s instead of CR_ENOMEM\n", sc->name, n,
                        cr_status_name(st));
            fail();
        }
        assert_int_equal(fl->failures, 1);
        failed_runs++;
    }
    assert_true(n < 10000);
    print_message("%s: failing each of its %zu allocations in turn\n", sc->name, n - 1);
    /* The scenario allocates (context, arena, blocks): some runs must have failed. */
    assert_true(failed_runs >= 3);
    assert_int_equal(failed_runs, n - 1);
}

/* The hook fails only where a block is needed; a fixed caller buffer fails at every
 * arena allocation instead. Rerun the work in buffers of growing size: every failure must
 * report CR_EARENA (the allocation status), and nothing may leak. */
static void run_scenario_fixed(const scenario *sc)
{
    fault *fl = new_tracker();
    size_t failed_runs = 0, size;
    for (size = 16; size < (size_t)1 << 20; size += 16) {
        arm(fl, 0);
        cr_ctx_params p = {.realloc_fn = fault_realloc, .alloc_env = fl};
        cr_ctx *ctx;
        assert_int_equal(cr_ctx_new(&p, &ctx), CR_OK);
        void *buf = malloc(size);
        assert_non_null(buf);
        cr_arena_params ap = {.buffer = buf, .buffer_size = size};
        cr_arena *arena;
        assert_int_equal(cr_arena_new(ctx, &ap, &arena), CR_OK);
        cr_status st = sc->work(arena);
        if (st != CR_OK) {
            if (st != CR_EARENA) {
                print_error("%s in %zu bytes: %s instead of CR_EARENA\n", sc->name, size,
                            cr_status_name(st));
                fail();
            }
            assert_int_equal(cr_ctx_errcode(ctx), CR_EARENA);
            failed_runs++;
        }
        cr_arena_free(arena);
        cr_ctx_free(ctx);
        free(buf);
        if (fl->live_blocks != 0 || fl->bad_frees != 0) {
            print_error("%s in %zu bytes: %zu blocks (%zu bytes) leaked, %zu bad frees\n", sc->name,
                        size, fl->live_blocks, fl->live_bytes, fl->bad_frees);
            fail();
        }
        if (st == CR_OK)
            break;
    }
    assert_true(size < (size_t)1 << 20);
    assert_true(failed_runs >= 1);
    print_message("%s: failed in %zu buffer sizes\n", sc->name, failed_runs);
}

/* ---- scenarios ------------------------------------------------------------------------- */

#define TRY(expr)                   \
    do {                            \
        cr_status try_st_ = (expr); \
        if (try_st_ != CR_OK)       \
            return try_st_;         \
    } while (0)

#define CHECK_ALLOC(p, arena)                           \
    do {                                                \
        if ((p) == NULL)                                \
            return cr_ctx_errcode(cr_arena_ctx(arena)); \
    } while (0)

static cr_status work_small(cr_arena *arena)
{
    void *p = cr_arena_alloc(arena, 24, 8);
    CHECK_ALLOC(p, arena);
    char *s = cr_arena_strdup(arena, "hello");
    CHECK_ALLOC(s, arena);
    assert_string_equal(s, "hello");
    return CR_OK;
}

static cr_status work_arrays(cr_arena *arena)
{
    enum { N = 12 };
    cr_array *a[N];
    size_t sh[2] = {10, 10};
    for (int k = 0; k < N; k++) {
        TRY(cr_array_new(arena, CR_DT_F64, 2, sh, &a[k]));
        double *d = a[k]->data;
        for (int i = 0; i < 100; i++)
            d[i] = k * 100 + i;
    }
    for (int k = 0; k < N; k++)
        assert_true(((double *)a[k]->data)[99] == k * 100 + 99);
    cr_array *c;
    TRY(cr_array_copy(arena, a[3], &c));
    assert_true(((double *)c->data)[5] == 305.0);
    return CR_OK;
}

typedef struct point {
    double x;
    double y;
    int64_t id;
} point;

static const cr_field point_fields[] = {
    {"x", offsetof(point, x), CR_KIND_F64, NULL},
    {"y", offsetof(point, y), CR_KIND_F64, NULL},
    {"id", offsetof(point, id), CR_KIND_I64, NULL},
};
static const cr_type point_type = {"point", sizeof(point), 3, point_fields};

typedef struct holder {
    point p;
    cr_array v;
} holder;

static const cr_field holder_fields[] = {
    {"p", offsetof(holder, p), CR_KIND_STRUCT, &point_type},
    {"v", offsetof(holder, v), CR_KIND_ARRAY, NULL},
};
static const cr_type holder_type = {"holder", sizeof(holder), 2, holder_fields};

static cr_status work_structs(cr_arena *arena)
{
    const char *n1[] = {"x"}, *n2[] = {"y", "id"};
    cr_tangent v1[] = {cr_tangent_f64(1.0)}, v2[] = {cr_tangent_f64(2.0), cr_tangent_none()};
    cr_tangent a, b, s, c;
    TRY(cr_tangent_struct(arena, &point_type, n1, v1, 1, &a));
    TRY(cr_tangent_struct(arena, &point_type, n2, v2, 2, &b));
    TRY(cr_tangent_add(arena, a, b, &s));
    TRY(cr_tangent_scale(arena, 2.0, s, &s));
    TRY(cr_tangent_sub(arena, s, a, &s));
    assert_true(cr_tangent_field(s, 0).u.f64 == 1.0 && cr_tangent_field(s, 1).u.f64 == 4.0);
    TRY(cr_tangent_canonicalize(arena, a, &c));
    assert_true(cr_tangent_field_present(c, 2));

    /* nested, with an array field, materialised from a primal and copied */
    double buf[3] = {1, 2, 3};
    holder h = {{1, 2, 3}, cr_array_vector(buf, 3)};
    cr_value hv = cr_value_struct(&holder_type, &h);
    cr_tangent z, cp;
    TRY(cr_tangent_zero_of(arena, &hv, &z));
    TRY(cr_tangent_copy(arena, z, &cp));
    TRY(cr_tangent_accum(arena, cp, z, &cp));
    cr_tangent ni;
    TRY(CR_NOT_IMPLEMENTED(arena, "a message that is copied into the arena", &ni));
    assert_int_equal(ni.tag, CR_TAN_NOTIMPL);
    return CR_OK;
}

static cr_status vec_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    const double *scale = env;
    size_t n = 50;
    cr_array *a;
    TRY(cr_array_new(arena, CR_DT_F64, 1, &n, &a));
    for (size_t i = 0; i < n; i++)
        ((double *)a->data)[i] = *scale * (double)i;
    *out = cr_tangent_array(a);
    return CR_OK;
}

/* A thunk of a thunk: the outer allocates too. */
static cr_status outer_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    cr_tangent inner = *(const cr_tangent *)env, v;
    TRY(cr_tangent_unthunk(inner, &v));
    return cr_tangent_scale(arena, 2.0, v, out);
}

static cr_status work_thunks(cr_arena *arena)
{
    static const double three = 3.0;
    cr_tangent th, outer, v;
    TRY(cr_tangent_thunk(arena, vec_fn, (void *)(uintptr_t)&three, "vec", &th));
    cr_tangent *env = cr_arena_alloc(arena, sizeof *env, _Alignof(cr_tangent));
    CHECK_ALLOC(env, arena);
    *env = th;
    TRY(cr_tangent_thunk(arena, outer_fn, env, "outer", &outer));
    TRY(cr_tangent_unthunk(outer, &v));
    assert_true(((double *)v.u.arr->data)[10] == 60.0);
    TRY(cr_tangent_unthunk(outer, &v)); /* memoised */
    cr_tangent s;
    TRY(cr_tangent_add(arena, th, outer, &s));
    assert_true(((double *)s.u.arr->data)[10] == 90.0);
    return CR_OK;
}

static cr_status add_half(cr_arena *arena, cr_array *dest, void *env)
{
    (void)arena;
    (void)env;
    double *d = dest->data;
    for (size_t i = 0; i < cr_array_numel(dest); i++)
        d[i] += 0.5;
    return CR_OK;
}

static cr_status work_array_algebra(cr_arena *arena)
{
    size_t sh[2] = {8, 8};
    cr_array *x, *y, *cz;
    TRY(cr_array_new(arena, CR_DT_F64, 2, sh, &x));
    TRY(cr_array_new(arena, CR_DT_F64, 2, sh, &y));
    TRY(cr_array_new(arena, CR_DT_C128, 2, sh, &cz));
    for (int i = 0; i < 64; i++) {
        ((double *)x->data)[i] = i;
        ((double *)y->data)[i] = 1;
    }
    cr_tangent s, acc;
    TRY(cr_tangent_add(arena, cr_tangent_array(x), cr_tangent_array(y), &s));
    TRY(cr_tangent_sub(arena, s, cr_tangent_array(y), &s));
    TRY(cr_tangent_scale_c(arena, CMPLX(0, 1), s, &s));
    TRY(cr_tangent_conj(arena, s, &s));
    TRY(cr_tangent_dot(arena, s, cr_tangent_array(cz), &acc));
    /* in place, then out of place (complex into real) */
    TRY(cr_tangent_accum(arena, cr_tangent_array(x), cr_tangent_array(y), &acc));
    TRY(cr_tangent_accum(arena, acc, cr_tangent_array(cz), &acc));
    assert_int_equal(acc.u.arr->dtype, CR_DT_C128);
    /* a Diagonal + dense, and an InplaceableThunk into a read-only view (evaluated) */
    static const double seven = 7.0;
    double dg[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    cr_array D = cr_array_vector(dg, 8);
    D.ndim = 2;
    D.shape[1] = 8;
    D.strides[1] = 0;
    D.structure = CR_MAT_DIAGONAL;
    TRY(cr_tangent_add(arena, cr_tangent_array(&D), cr_tangent_array(y), &s));
    cr_tangent it;
    size_t n = 50;
    cr_array *v, *ro;
    TRY(cr_array_new(arena, CR_DT_F64, 1, &n, &v));
    TRY(cr_array_new(arena, CR_DT_F64, 1, &n, &ro));
    ro->flags = 0;
    TRY(cr_tangent_inplaceable_thunk(arena, vec_fn, add_half, (void *)(uintptr_t)&seven, "it",
                                     &it));
    TRY(cr_tangent_accum(arena, cr_tangent_array(ro), it, &s));
    assert_true(((double *)s.u.arr->data)[2] == 14.0);
    TRY(cr_tangent_accum(arena, cr_tangent_array(v), it, &s)); /* evaluated already: in place */
    TRY(cr_tangent_zeros_like(arena, s, &s));
    return CR_OK;
}

static cr_status work_project_symmetric(cr_arena *arena)
{
    double p[16] = {0};
    cr_array P = cr_array_matrix(p, 4, 4);
    P.structure = CR_MAT_SYMMETRIC;
    cr_value pv = cr_value_array(&P);
    cr_project *pr;
    TRY(cr_project_new(arena, &pv, &pr));
    double d[16];
    for (int i = 0; i < 16; i++)
        d[i] = i;
    cr_array D = cr_array_matrix(d, 4, 4);
    cr_tangent r;
    TRY(cr_project_apply(arena, pr, cr_tangent_array(&D), &r));
    /* (d[0][1] + d[1][0]) / 2 = (1 + 4) / 2 */
    assert_true(creal(cr_array_get_linear(r.u.arr, 1)) == 2.5);
    /* a projected thunk, unthunked */
    static const double one = 1.0;
    cr_tangent th, pt, v;
    size_t n = 50;
    float fbuf[50] = {0};
    double buf[50] = {0};
    cr_array V;
    TRY(cr_array_view_init(&V, fbuf, CR_DT_F32, 1, &n, NULL));
    cr_value vv = cr_value_array(&V);
    TRY(cr_tangent_thunk(arena, vec_fn, (void *)(uintptr_t)&one, "t", &th));
    TRY(cr_project_tangent(arena, &vv, th, &pt));
    TRY(cr_tangent_unthunk(pt, &v));
    assert_int_equal(v.u.arr->dtype, CR_DT_F32);
    /* structs: a projector per field */
    holder h = {{1, 2, 3}, cr_array_vector(buf, 50)};
    cr_value hv = cr_value_struct(&holder_type, &h);
    cr_tangent z;
    TRY(cr_tangent_zero_of(arena, &hv, &z));
    TRY(cr_project_tangent(arena, &hv, z, &r));
    return CR_OK;
}

static cr_status work_canonicalize(cr_arena *arena)
{
    for (int k = 0; k < 20; k++) {
        cr_tangent c;
        TRY(cr_tangent_canonicalize(arena, cr_tangent_struct_empty(&holder_type), &c));
        assert_int_equal(c.u.s.fields[1].tag, CR_TAN_ZERO);
    }
    return CR_OK;
}

/* A resource outside the arena, released by a deferred cleanup. */
typedef struct resource {
    cr_ctx *ctx;
    void *mem;
} resource;

static void release_resource(void *env)
{
    resource *r = env;
    cr_ctx_dealloc(r->ctx, r->mem, 1000);
    cr_ctx_dealloc(r->ctx, r, sizeof *r);
}

static cr_status work_defer(cr_arena *arena)
{
    cr_ctx *ctx = cr_arena_ctx(arena);
    for (int k = 0; k < 10; k++) {
        resource *r = cr_ctx_alloc(ctx, sizeof *r);
        CHECK_ALLOC(r, arena);
        r->ctx = ctx;
        r->mem = cr_ctx_alloc(ctx, 1000);
        if (r->mem == NULL) {
            cr_ctx_dealloc(ctx, r, sizeof *r);
            return cr_ctx_errcode(ctx);
        }
        /* Ownership passes even if defer fails: then the cleanup has already run. */
        TRY(cr_arena_defer(arena, release_resource, r));
        CHECK_ALLOC(cr_arena_alloc(arena, 100, 0), arena);
    }
    return CR_OK;
}

/* The higher-order array rules: rows (map, sum(f, A; dims), foldl, accumulate) and the
 * per-element fallback (map of cabs), forward, pullbacks and thunks. */
static cr_status work_hof(cr_arena *arena)
{
    static double x[12] = {0.5, -1, 2, 1.5, 0.25, -0.75, 1, 0.3, -0.4, 0.8, 1.1, -0.2};
    static cr_complex z[3] = {1, 2, 3};
    cr_array X = cr_array_matrix(x, 3, 4), V = cr_array_vector(x, 12), Z = cr_array_vector(x, 3);
    size_t n3 = 3;
    TRY(cr_array_view_init(&Z, z, CR_DT_C128, 1, &n3, NULL));
    const cr_function *sin_fn = cr_registry_find(cr_registry_builtin(), "sin");
    assert_non_null(sin_fn);
    cr_value sinv = cr_value_function(sin_fn, NULL);
    const struct {
        const cr_value *fn;
        cr_value args[3];
        size_t n;
    } calls[] = {
        {&cr_fn_map, {sinv, cr_value_array(&X)}, 2},
        {&cr_fn_sum, {sinv, cr_value_array(&X), cr_value_i64(1)}, 3},
        {&cr_fn_foldl, {cr_fn_mul, cr_value_array(&V), cr_value_f64(0.5)}, 3},
        {&cr_fn_accumulate, {cr_fn_add, cr_value_array(&V)}, 2},
        {&cr_fn_map, {cr_fn_cabs, cr_value_array(&Z)}, 2},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        cr_value y;
        cr_pullback pb;
        TRY(cr_rrule(NULL, arena, calls[i].fn, calls[i].args, calls[i].n, &y, &pb));
        cr_tangent dy = y.kind == CR_KIND_ARRAY ? cr_tangent_array(y.u.arr) : cr_tangent_f64(1);
        cr_tangent dx[4], v;
        TRY(cr_pullback_call(arena, &pb, &dy, dx, calls[i].n + 1));
        TRY(cr_tangent_unthunk(dx[2], &v));
    }
    return CR_OK;
}

static const scenario k_scenarios[] = {
    {"context and arena", "context and arena (fixed buffer)", work_small, 0},
    {"arrays over many blocks", "arrays (fixed buffer)", work_arrays, 256},
    {"struct tangents", "struct tangents (fixed buffer)", work_structs, 128},
    {"thunks", "thunks (fixed buffer)", work_thunks, 128},
    {"array algebra and add!!", "array algebra and add!! (fixed buffer)", work_array_algebra, 256},
    {"ProjectTo(Symmetric)", "ProjectTo(Symmetric) (fixed buffer)", work_project_symmetric, 128},
    {"canonicalize", "canonicalize (fixed buffer)", work_canonicalize, 128},
    {"deferred cleanups", "deferred cleanups (fixed buffer)", work_defer, 128},
    {"higher-order array rules", "higher-order array rules (fixed buffer)", work_hof, 256},
};
#define N_SCENARIOS (sizeof k_scenarios / sizeof k_scenarios[0])

static void test_scenario(void **state)
{
    run_scenario(*state);
}

static void test_scenario_fixed(void **state)
{
    run_scenario_fixed(*state);
}

/* ---- the checker itself must catch leaks ----------------------------------------------- */

static void test_leak_check_can_fail(void **state)
{
    (void)state;
    fault *fl = new_tracker();
    cr_ctx_params p = {.realloc_fn = fault_realloc, .alloc_env = fl};
    cr_ctx *ctx;
    arm(fl, 0);
    assert_int_equal(cr_ctx_new(&p, &ctx), CR_OK);
    void *leak = cr_ctx_alloc(ctx, 77);
    assert_non_null(leak);
    cr_ctx_free(ctx);
    /* The leaked block is seen, with its size. */
    assert_int_equal(fl->live_blocks, 1);
    assert_int_equal(fl->live_bytes, 77);
    assert_int_equal(fl->bad_frees, 0);
    /* A free with the wrong size is seen too. */
    assert_int_equal(cr_ctx_new(&p, &ctx), CR_OK);
    void *b = cr_ctx_alloc(ctx, 10);
    cr_ctx_dealloc(ctx, b, 11);
    assert_int_equal(fl->bad_frees, 1);
    cr_ctx_free(ctx);
    release_all(fl);
}

static void test_injection_fails_exactly_nth(void **state)
{
    (void)state;
    fault *fl = new_tracker();
    cr_ctx_params p = {.realloc_fn = fault_realloc, .alloc_env = fl};
    cr_ctx *ctx;
    arm(fl, 3);
    assert_int_equal(cr_ctx_new(&p, &ctx), CR_OK); /* 1 */
    void *a = cr_ctx_alloc(ctx, 8);                /* 2 */
    void *b = cr_ctx_alloc(ctx, 8);                /* 3: fails */
    void *c = cr_ctx_alloc(ctx, 8);                /* 4 */
    assert_non_null(a);
    assert_null(b);
    assert_non_null(c);
    assert_int_equal(cr_ctx_errcode(ctx), CR_ENOMEM);
    assert_int_equal(fl->failures, 1);
    cr_ctx_dealloc(ctx, a, 8);
    cr_ctx_dealloc(ctx, c, 8);
    cr_ctx_free(ctx);
    assert_int_equal(fl->live_blocks, 0);
}

int main(void)
{
    struct CMUnitTest tests[2 * N_SCENARIOS + 2];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_leak_check_can_fail);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_injection_fails_exactly_nth);
    for (size_t i = 0; i < N_SCENARIOS; i++) {
        void *sc = (void *)(uintptr_t)&k_scenarios[i];
        struct CMUnitTest t = cmocka_unit_test_prestate(test_scenario, sc);
        t.name = k_scenarios[i].name;
        tests[n++] = t;
        struct CMUnitTest tf = cmocka_unit_test_prestate(test_scenario_fixed, sc);
        tf.name = k_scenarios[i].fixed_name;
        tests[n++] = tf;
    }
    assert_int_equal(n, sizeof tests / sizeof tests[0]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
