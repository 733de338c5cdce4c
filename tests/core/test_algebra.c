/*
 * Tests of the tangent algebra against ChainRulesCore's tangent_arithmetic.jl and
 * accumulation.jl: every strong-zero identity of +, -, * and dot, NotImplemented
 * propagation, no allocation with zero operands, scalar promotion, arrays (strided,
 * structured, mixed dtypes), structs with absent fields, and add!! in and out of place.
 *
 * Expected values are worked out by hand from the definitions, never by calling the
 * code under test.
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

/* ---- fixture: a context with a counting hook, and an arena ---------------------------- */

typedef struct fixture {
    size_t hook_allocs; /* allocations through the context's hook */
    cr_ctx *ctx;
    cr_arena *arena;
    size_t mark_used, mark_allocs;
} fixture;

static void *counting_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    fixture *f = env;
    (void)old_size;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    if (ptr == NULL)
        f->hook_allocs++;
    return realloc(ptr, new_size);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    cr_ctx_params p = {.realloc_fn = counting_realloc, .alloc_env = f};
    if (cr_ctx_new(&p, &f->ctx) != CR_OK || cr_arena_new(f->ctx, NULL, &f->arena) != CR_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cr_arena_free(f->arena);
    cr_ctx_free(f->ctx);
    free(f);
    return 0;
}

/* Remember the arena's use and the hook's count; no_alloc() checks neither moved. */
static void mark(fixture *f)
{
    f->mark_used = cr_arena_used(f->arena);
    f->mark_allocs = f->hook_allocs;
}

static void no_alloc(fixture *f)
{
    assert_int_equal(cr_arena_used(f->arena), f->mark_used);
    assert_int_equal(f->hook_allocs, f->mark_allocs);
}

/* ---- helpers --------------------------------------------------------------------------- */

/* A writable arena array of the given shape, filled with real values. */
static cr_array *mk(fixture *f, cr_dtype dt, size_t ndim, const size_t *shape, const double *v)
{
    cr_array *a;
    assert_int_equal(cr_array_new(f->arena, dt, ndim, shape, &a), CR_OK);
    size_t n = cr_array_numel(a);
    for (size_t k = 0; k < n; k++) {
        switch (dt) {
        case CR_DT_F64:
            ((double *)a->data)[k] = v[k];
            break;
        case CR_DT_F32:
            ((float *)a->data)[k] = (float)v[k];
            break;
        case CR_DT_C128:
            ((cr_complex *)a->data)[k] = v[k];
            break;
        default:
            fail();
        }
    }
    return a;
}

static void assert_values(const cr_array *a, const double *want, size_t n)
{
    assert_int_equal(cr_array_numel(a), n);
    for (size_t k = 0; k < n; k++) {
        cr_complex z = cr_array_get_linear(a, k);
        if (!(creal(z) == want[k] && cimag(z) == 0.0)) {
            print_error("element %zu = %g%+gi, expected %g\n", k, creal(z), cimag(z), want[k]);
            fail();
        }
    }
}

/* A described struct for structural tangents. */
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
static const cr_type other_type = {"other", sizeof(point), 3, point_fields};

static cr_tangent mkstruct(fixture *f, const char *n1, cr_tangent v1, const char *n2, cr_tangent v2)
{
    const char *names[2] = {n1, n2};
    cr_tangent vals[2] = {v1, v2};
    cr_tangent t;
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, names, vals, n2 != NULL ? 2 : 1, &t),
                     CR_OK);
    return t;
}

/* A thunk that counts its evaluations; its value is an f64. */
typedef struct thunk_env {
    int calls;
    int adds;
    double value;
} thunk_env;

static cr_status scalar_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    thunk_env *e = env;
    e->calls++;
    *out = cr_tangent_f64(e->value);
    return CR_OK;
}

static cr_tangent mkthunk(fixture *f, thunk_env *e)
{
    cr_tangent t;
    assert_int_equal(cr_tangent_thunk(f->arena, scalar_thunk_fn, e, "counted", &t), CR_OK);
    return t;
}

static const cr_notimpl k_ni_info = {"rules/bessel.c", 77, "d/dnu not implemented"};
static const cr_notimpl k_ni_info2 = {"rules/other.c", 5, "second"};

/* The kinds of operands of the identity tests. */
typedef struct operands {
    cr_tangent zero, none, f64, arr, st, ni;
    cr_tangent thunk;
    thunk_env tenv;
    cr_array *a;
} operands;

static void mkops(fixture *f, operands *o)
{
    static const double v[3] = {1.0, -2.0, 4.0};
    size_t n = 3;
    o->zero = cr_tangent_zero();
    o->none = cr_tangent_none();
    o->f64 = cr_tangent_f64(2.5);
    o->a = mk(f, CR_DT_F64, 1, &n, v);
    o->arr = cr_tangent_array(o->a);
    o->st = mkstruct(f, "x", cr_tangent_f64(1.0), NULL, cr_tangent_zero());
    o->ni = cr_tangent_notimpl(&k_ni_info);
    o->tenv = (thunk_env){.value = 8.0};
    o->thunk = mkthunk(f, &o->tenv);
}

/* Whether two tangents are the same object (same tag and same payload identity). */
static bool same(cr_tangent a, cr_tangent b)
{
    if (a.tag != b.tag)
        return false;
    switch ((cr_tag)a.tag) {
    case CR_TAN_ZERO:
    case CR_TAN_NONE:
        return true;
    case CR_TAN_F64:
        return a.u.f64 == b.u.f64;
    case CR_TAN_F32:
        return a.u.f32 == b.u.f32;
    case CR_TAN_C128:
        return a.u.c128 == b.u.c128;
    case CR_TAN_ARRAY:
        return a.u.arr == b.u.arr;
    case CR_TAN_STRUCT:
        return a.u.s.type == b.u.s.type && a.u.s.fields == b.u.s.fields;
    case CR_TAN_THUNK:
        return a.u.thunk == b.u.thunk;
    case CR_TAN_NOTIMPL:
        return a.u.ni == b.u.ni;
    default:
        return false;
    }
}

/* ---- + --------------------------------------------------------------------------------- */

static void test_add_zero_identities(void **state)
{
    fixture *f = *state;
    operands o;
    mkops(f, &o);
    cr_tangent xs[] = {o.f64, o.arr, o.st, o.thunk};
    cr_tangent r;
    mark(f);
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        /* NoTangent + x = x, x + NoTangent = x */
        assert_int_equal(cr_tangent_add(f->arena, o.none, xs[i], &r), CR_OK);
        assert_true(same(r, xs[i]));
        assert_int_equal(cr_tangent_add(f->arena, xs[i], o.none, &r), CR_OK);
        assert_true(same(r, xs[i]));
        /* ZeroTangent + x = x, x + ZeroTangent = x */
        assert_int_equal(cr_tangent_add(f->arena, o.zero, xs[i], &r), CR_OK);
        assert_true(same(r, xs[i]));
        assert_int_equal(cr_tangent_add(f->arena, xs[i], o.zero, &r), CR_OK);
        assert_true(same(r, xs[i]));
    }
    /* NoTangent wins + over ZeroTangent, both orders */
    assert_int_equal(cr_tangent_add(f->arena, o.none, o.zero, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_NONE);
    assert_int_equal(cr_tangent_add(f->arena, o.zero, o.none, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_NONE);
    assert_int_equal(cr_tangent_add(f->arena, o.zero, o.zero, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_ZERO);
    assert_int_equal(cr_tangent_add(f->arena, o.none, o.none, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_NONE);
    no_alloc(f);
    /* The thunk was passed along, never evaluated. */
    assert_int_equal(o.tenv.calls, 0);
}

static void test_add_notimplemented_wins(void **state)
{
    fixture *f = *state;
    operands o;
    mkops(f, &o);
    cr_tangent xs[] = {o.zero,
                       o.none,
                       o.f64,
                       o.arr,
                       o.st,
                       o.thunk,
                       cr_tangent_c128(CMPLX(1, 1)),
                       cr_tangent_f32(1.0f)};
    cr_tangent r;
    mark(f);
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        assert_int_equal(cr_tangent_add(f->arena, o.ni, xs[i], &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NOTIMPL);
        assert_ptr_equal(r.u.ni, &k_ni_info);
        assert_int_equal(cr_tangent_add(f->arena, xs[i], o.ni, &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NOTIMPL);
        assert_ptr_equal(r.u.ni, &k_ni_info);
    }
    /* NI + NI = the first */
    cr_tangent ni2 = cr_tangent_notimpl(&k_ni_info2);
    assert_int_equal(cr_tangent_add(f->arena, o.ni, ni2, &r), CR_OK);
    assert_ptr_equal(r.u.ni, &k_ni_info);
    no_alloc(f);
    assert_int_equal(o.tenv.calls, 0); /* NI + thunk does not evaluate the thunk */
}

/* ---- - --------------------------------------------------------------------------------- */

static void test_sub_zero_identities(void **state)
{
    fixture *f = *state;
    operands o;
    mkops(f, &o);
    cr_tangent xs[] = {o.f64, o.arr, o.st, o.thunk};
    cr_tangent r;
    mark(f);
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        /* x - ZeroTangent = x, x - NoTangent = x */
        assert_int_equal(cr_tangent_sub(f->arena, xs[i], o.zero, &r), CR_OK);
        assert_true(same(r, xs[i]));
        assert_int_equal(cr_tangent_sub(f->arena, xs[i], o.none, &r), CR_OK);
        assert_true(same(r, xs[i]));
    }
    assert_int_equal(cr_tangent_sub(f->arena, o.zero, o.zero, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_ZERO);
    assert_int_equal(cr_tangent_sub(f->arena, o.none, o.none, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_NONE);
    assert_int_equal(cr_tangent_sub(f->arena, o.none, o.zero, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_NONE);
    assert_int_equal(cr_tangent_sub(f->arena, o.zero, o.none, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_NONE);
    assert_int_equal(cr_tangent_neg(f->arena, o.zero, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_ZERO);
    assert_int_equal(cr_tangent_neg(f->arena, o.none, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_NONE);
    no_alloc(f);
    assert_int_equal(o.tenv.calls, 0);

    /* ZeroTangent - x = -x, NoTangent - x = -x */
    assert_int_equal(cr_tangent_sub(f->arena, o.zero, o.f64, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, -2.5);
    assert_int_equal(cr_tangent_sub(f->arena, o.none, o.f64, &r), CR_OK);
    ASSERT_DBL(r.u.f64, -2.5);
    assert_int_equal(cr_tangent_sub(f->arena, o.zero, o.arr, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_ARRAY);
    assert_ptr_not_equal(r.u.arr, o.a);
    static const double neg[3] = {-1.0, 2.0, -4.0};
    assert_values(r.u.arr, neg, 3);
    static const double orig[3] = {1.0, -2.0, 4.0};
    assert_values(o.a, orig, 3); /* the operand is untouched */
    assert_int_equal(cr_tangent_sub(f->arena, o.none, o.st, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_STRUCT);
    ASSERT_DBL(cr_tangent_field(r, 0).u.f64, -1.0);
    assert_false(cr_tangent_field_present(r, 1));
    /* Zero - thunk evaluates it (once) and negates */
    assert_int_equal(cr_tangent_sub(f->arena, o.zero, o.thunk, &r), CR_OK);
    ASSERT_DBL(r.u.f64, -8.0);
    assert_int_equal(o.tenv.calls, 1);
}

static void test_sub_notimplemented_is_error(void **state)
{
    fixture *f = *state;
    operands o;
    mkops(f, &o);
    cr_tangent xs[] = {o.zero, o.none, o.f64, o.arr, o.st, o.thunk, o.ni};
    cr_tangent r;
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        cr_ctx_clear_error(f->ctx);
        assert_int_equal(cr_tangent_sub(f->arena, o.ni, xs[i], &r), CR_EUNIMPL);
        assert_int_equal(cr_ctx_errcode(f->ctx), CR_EUNIMPL);
        assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "rules/bessel.c:77"));
        assert_int_equal(cr_tangent_sub(f->arena, xs[i], o.ni, &r), CR_EUNIMPL);
    }
    assert_int_equal(o.tenv.calls, 0);
    /* -NI = NI (unary minus is multiplication by -1) */
    assert_int_equal(cr_tangent_neg(f->arena, o.ni, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_NOTIMPL);
    assert_ptr_equal(r.u.ni, &k_ni_info);
}

/* ---- * --------------------------------------------------------------------------------- */

static void test_mul_zero_identities(void **state)
{
    fixture *f = *state;
    operands o;
    mkops(f, &o);
    cr_tangent xs[] = {o.none, o.f64, o.arr, o.st, o.thunk, o.ni, o.zero};
    cr_tangent r;
    mark(f);
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        /* ZeroTangent wins *, over everything (NoTangent * ZeroTangent = ZeroTangent) */
        assert_int_equal(cr_tangent_mul(f->arena, o.zero, xs[i], &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_ZERO);
        assert_int_equal(cr_tangent_mul(f->arena, xs[i], o.zero, &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_ZERO);
    }
    cr_tangent ys[] = {o.none, o.f64, o.arr, o.st, o.thunk, o.ni};
    for (size_t i = 0; i < sizeof ys / sizeof ys[0]; i++) {
        /* NoTangent * x = NoTangent for any x but ZeroTangent */
        assert_int_equal(cr_tangent_mul(f->arena, o.none, ys[i], &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NONE);
        assert_int_equal(cr_tangent_mul(f->arena, ys[i], o.none, &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NONE);
    }
    /* NotImplemented loses * to the zeros, wins otherwise */
    cr_tangent zs[] = {o.f64, cr_tangent_f32(2.0f), cr_tangent_c128(CMPLX(0, 1)), o.thunk, o.ni};
    for (size_t i = 0; i < sizeof zs / sizeof zs[0]; i++) {
        assert_int_equal(cr_tangent_mul(f->arena, o.ni, zs[i], &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NOTIMPL);
        assert_ptr_equal(r.u.ni, &k_ni_info);
        assert_int_equal(cr_tangent_mul(f->arena, zs[i], o.ni, &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NOTIMPL);
    }
    no_alloc(f);
    assert_int_equal(o.tenv.calls, 0);
}

static void test_mul_values(void **state)
{
    fixture *f = *state;
    cr_tangent r;
    assert_int_equal(cr_tangent_mul(f->arena, cr_tangent_f64(3.0), cr_tangent_f64(-0.5), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, -1.5);
    assert_int_equal(cr_tangent_mul(f->arena, cr_tangent_f32(3.0f), cr_tangent_f32(0.5f), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_F32);
    ASSERT_DBL((double)r.u.f32, 1.5);
    assert_int_equal(cr_tangent_mul(f->arena, cr_tangent_f32(3.0f), cr_tangent_f64(0.25), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 0.75);
    /* (2) * (1 + 3i) = 2 + 6i; (1 + i) * (1 - i) = 2 */
    assert_int_equal(
        cr_tangent_mul(f->arena, cr_tangent_f64(2.0), cr_tangent_c128(CMPLX(1, 3)), &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_C128);
    ASSERT_CPLX(r.u.c128, 2.0, 6.0);
    assert_int_equal(
        cr_tangent_mul(f->arena, cr_tangent_c128(CMPLX(1, 1)), cr_tangent_c128(CMPLX(1, -1)), &r),
        CR_OK);
    ASSERT_CPLX(r.u.c128, 2.0, 0.0);

    /* scalar * array scales; array * array is not a tangent operation */
    double v[2] = {1.0, -3.0};
    cr_array a = cr_array_vector(v, 2);
    assert_int_equal(cr_tangent_mul(f->arena, cr_tangent_array(&a), cr_tangent_f64(2.0), &r),
                     CR_OK);
    static const double want[2] = {2.0, -6.0};
    assert_values(r.u.arr, want, 2);
    assert_int_equal(cr_tangent_mul(f->arena, cr_tangent_array(&a), cr_tangent_array(&a), &r),
                     CR_ETANGENT);
}

/* ---- dot ------------------------------------------------------------------------------- */

static void test_dot_zero_identities(void **state)
{
    fixture *f = *state;
    operands o;
    mkops(f, &o);
    cr_tangent r;
    mark(f);
    cr_tangent xs[] = {o.zero, o.none, o.f64, o.arr, o.st, o.thunk, o.ni};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        /* dot(ZeroTangent, x) = ZeroTangent (NoTangent too) */
        assert_int_equal(cr_tangent_dot(f->arena, o.zero, xs[i], &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_ZERO);
        assert_int_equal(cr_tangent_dot(f->arena, xs[i], o.zero, &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_ZERO);
    }
    cr_tangent ys[] = {o.none, o.f64, o.arr, o.st, o.thunk, o.ni};
    for (size_t i = 0; i < sizeof ys / sizeof ys[0]; i++) {
        assert_int_equal(cr_tangent_dot(f->arena, o.none, ys[i], &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NONE);
        assert_int_equal(cr_tangent_dot(f->arena, ys[i], o.none, &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NONE);
    }
    cr_tangent zs[] = {o.f64, o.arr, o.st, o.thunk, o.ni};
    for (size_t i = 0; i < sizeof zs / sizeof zs[0]; i++) {
        assert_int_equal(cr_tangent_dot(f->arena, o.ni, zs[i], &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NOTIMPL);
        assert_int_equal(cr_tangent_dot(f->arena, zs[i], o.ni, &r), CR_OK);
        assert_int_equal(r.tag, CR_TAN_NOTIMPL);
    }
    no_alloc(f);
    assert_int_equal(o.tenv.calls, 0);
}

static void test_dot_values(void **state)
{
    fixture *f = *state;
    cr_tangent r;
    assert_int_equal(cr_tangent_dot(f->arena, cr_tangent_f64(3.0), cr_tangent_f32(2.0f), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 6.0);
    /* conj(1 + 2i) (3 - i) = (1 - 2i)(3 - i) = 3 - i - 6i + 2i^2 = 1 - 7i */
    assert_int_equal(
        cr_tangent_dot(f->arena, cr_tangent_c128(CMPLX(1, 2)), cr_tangent_c128(CMPLX(3, -1)), &r),
        CR_OK);
    assert_int_equal(r.tag, CR_TAN_C128);
    ASSERT_CPLX(r.u.c128, 1.0, -7.0);

    /* arrays: [1, 2, 3] . [4, -5, 6] = 4 - 10 + 18 = 12 */
    double a[3] = {1, 2, 3}, b[3] = {4, -5, 6};
    cr_array A = cr_array_vector(a, 3), B = cr_array_vector(b, 3);
    assert_int_equal(cr_tangent_dot(f->arena, cr_tangent_array(&A), cr_tangent_array(&B), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 12.0);

    /* complex arrays: conj([i, 1]) . [1, i] = -i + i = 0... use [i, 2] . [1, i]:
     * conj(i)*1 + conj(2)*i = -i + 2i = i */
    cr_complex ca[2] = {CMPLX(0, 1), CMPLX(2, 0)}, cb[2] = {CMPLX(1, 0), CMPLX(0, 1)};
    cr_array CA, CB;
    size_t n = 2;
    assert_int_equal(cr_array_view_init(&CA, ca, CR_DT_C128, 1, &n, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&CB, cb, CR_DT_C128, 1, &n, NULL), CR_OK);
    assert_int_equal(cr_tangent_dot(f->arena, cr_tangent_array(&CA), cr_tangent_array(&CB), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_C128);
    ASSERT_CPLX(r.u.c128, 0.0, 1.0);

    /* structs: absent fields count as zero: {x=2} . {x=3, y=5} = 6 */
    cr_tangent s1 = mkstruct(f, "x", cr_tangent_f64(2.0), NULL, cr_tangent_zero());
    cr_tangent s2 = mkstruct(f, "x", cr_tangent_f64(3.0), "y", cr_tangent_f64(5.0));
    assert_int_equal(cr_tangent_dot(f->arena, s1, s2, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 6.0);

    /* shapes must agree */
    cr_array A2 = cr_array_vector(a, 2);
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tangent_dot(f->arena, cr_tangent_array(&A), cr_tangent_array(&A2), &r),
                     CR_ESHAPE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "(3)"));
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "(2)"));
}

/* ---- no allocation with zero operands, counted through the hook ----------------------- */

static void test_zero_operands_never_allocate(void **state)
{
    fixture *f = *state;
    /* A fresh arena owns no block yet: any allocation would call the hook. */
    cr_arena *fresh;
    assert_int_equal(cr_arena_new(f->ctx, NULL, &fresh), CR_OK);
    double v[4] = {1, 2, 3, 4};
    cr_array a = cr_array_vector(v, 4);
    cr_array w = cr_array_vector(v, 4);
    w.flags = CR_ARRAY_WRITABLE;
    cr_tangent x = cr_tangent_array(&a), xw = cr_tangent_array(&w), r;
    cr_tangent zeros[2] = {cr_tangent_zero(), cr_tangent_none()};
    size_t before = f->hook_allocs;
    for (int i = 0; i < 2; i++) {
        cr_tangent z = zeros[i];
        assert_int_equal(cr_tangent_add(fresh, z, x, &r), CR_OK);
        assert_ptr_equal(r.u.arr, &a);
        assert_int_equal(cr_tangent_add(fresh, x, z, &r), CR_OK);
        assert_ptr_equal(r.u.arr, &a);
        assert_int_equal(cr_tangent_sub(fresh, x, z, &r), CR_OK);
        assert_ptr_equal(r.u.arr, &a);
        assert_int_equal(cr_tangent_mul(fresh, z, x, &r), CR_OK);
        assert_int_equal(cr_tangent_mul(fresh, x, z, &r), CR_OK);
        assert_int_equal(cr_tangent_dot(fresh, z, x, &r), CR_OK);
        assert_int_equal(cr_tangent_dot(fresh, x, z, &r), CR_OK);
        assert_int_equal(cr_tangent_scale(fresh, 3.0, z, &r), CR_OK);
        assert_int_equal(r.tag, z.tag);
        assert_int_equal(cr_tangent_scale_c(fresh, CMPLX(0, 1), z, &r), CR_OK);
        assert_int_equal(r.tag, z.tag);
        assert_int_equal(cr_tangent_neg(fresh, z, &r), CR_OK);
        assert_int_equal(cr_tangent_conj(fresh, z, &r), CR_OK);
        assert_int_equal(cr_tangent_accum(fresh, xw, z, &r), CR_OK);
        assert_ptr_equal(r.u.arr, &w);
        assert_int_equal(cr_tangent_accum(fresh, x, z, &r), CR_OK);
        assert_ptr_equal(r.u.arr, &a);
        assert_int_equal(cr_tangent_accum(fresh, z, x, &r), CR_OK);
        assert_ptr_equal(r.u.arr, &a);
        assert_int_equal(cr_tangent_zeros_like(fresh, z, &r), CR_OK);
        assert_int_equal(r.tag, z.tag);
    }
    /* Identity with a writable array in place: nothing allocated, the values unchanged */
    assert_int_equal(f->hook_allocs, before);
    assert_int_equal(cr_arena_used(fresh), 0);
    assert_int_equal(cr_arena_capacity(fresh), 0);
    ASSERT_DBL(v[3], 4.0);
    cr_arena_free(fresh);
}

/* ---- scalars --------------------------------------------------------------------------- */

static void test_scalar_promotion(void **state)
{
    fixture *f = *state;
    cr_tangent r;
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_f32(1.5f), cr_tangent_f32(0.25f), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_F32);
    ASSERT_DBL((double)r.u.f32, 1.75);
    assert_int_equal(cr_tangent_sub(f->arena, cr_tangent_f32(1.5f), cr_tangent_f32(0.25f), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_F32);
    ASSERT_DBL((double)r.u.f32, 1.25);
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_f32(1.5f), cr_tangent_f64(0.25), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 1.75);
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_f64(1.0), cr_tangent_f64(2.0), &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 3.0);
    assert_int_equal(
        cr_tangent_add(f->arena, cr_tangent_f64(1.0), cr_tangent_c128(CMPLX(2, -3)), &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_C128);
    ASSERT_CPLX(r.u.c128, 3.0, -3.0);
    assert_int_equal(
        cr_tangent_sub(f->arena, cr_tangent_c128(CMPLX(2, -3)), cr_tangent_f32(0.5f), &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_C128);
    ASSERT_CPLX(r.u.c128, 1.5, -3.0);
    assert_int_equal(cr_tangent_sub(f->arena, cr_tangent_f64(1.0), cr_tangent_f64(4.0), &r), CR_OK);
    ASSERT_DBL(r.u.f64, -3.0);

    /* scaling keeps the precision; a complex factor makes a real tangent complex */
    assert_int_equal(cr_tangent_scale(f->arena, 2.0, cr_tangent_f32(0.75f), &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_F32);
    ASSERT_DBL((double)r.u.f32, 1.5);
    assert_int_equal(cr_tangent_scale_c(f->arena, CMPLX(0, 2), cr_tangent_f64(3.0), &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_C128);
    ASSERT_CPLX(r.u.c128, 0.0, 6.0);
    assert_int_equal(cr_tangent_neg(f->arena, cr_tangent_f32(2.0f), &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_F32);
    ASSERT_DBL((double)r.u.f32, -2.0);
    assert_int_equal(cr_tangent_conj(f->arena, cr_tangent_c128(CMPLX(1, 2)), &r), CR_OK);
    ASSERT_CPLX(r.u.c128, 1.0, -2.0);
    assert_int_equal(cr_tangent_conj(f->arena, cr_tangent_f64(5.0), &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    ASSERT_DBL(r.u.f64, 5.0);

    /* scalars and arrays do not mix */
    double v[1] = {1.0};
    cr_array a = cr_array_vector(v, 1);
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_f64(1.0), cr_tangent_array(&a), &r),
                     CR_ETANGENT);
}

/* ---- arrays ---------------------------------------------------------------------------- */

static void test_array_same_shape(void **state)
{
    fixture *f = *state;
    double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0.5, -1, 10, 0, 2, -6};
    cr_array A = cr_array_matrix(a, 2, 3), B = cr_array_matrix(b, 2, 3);
    cr_tangent r;
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&A), cr_tangent_array(&B), &r),
                     CR_OK);
    assert_int_equal(r.tag, CR_TAN_ARRAY);
    assert_int_equal(r.u.arr->ndim, 2);
    assert_int_equal(r.u.arr->shape[0], 2);
    assert_int_equal(r.u.arr->shape[1], 3);
    assert_int_equal(r.u.arr->dtype, CR_DT_F64);
    assert_ptr_not_equal(r.u.arr->data, a);
    static const double sum[6] = {1.5, 1, 13, 4, 7, 0};
    assert_values(r.u.arr, sum, 6);

    assert_int_equal(cr_tangent_sub(f->arena, cr_tangent_array(&A), cr_tangent_array(&B), &r),
                     CR_OK);
    static const double diff[6] = {0.5, 3, -7, 4, 3, 12};
    assert_values(r.u.arr, diff, 6);

    assert_int_equal(cr_tangent_scale(f->arena, -2.0, cr_tangent_array(&A), &r), CR_OK);
    static const double sc[6] = {-2, -4, -6, -8, -10, -12};
    assert_values(r.u.arr, sc, 6);
    /* the operands are never modified by out-of-place operations */
    static const double a0[6] = {1, 2, 3, 4, 5, 6};
    assert_values(&A, a0, 6);
}

static void test_array_complex_ops(void **state)
{
    fixture *f = *state;
    cr_complex z[2] = {CMPLX(1, 2), CMPLX(-3, 0.5)};
    size_t n = 2;
    cr_array Z;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 1, &n, NULL), CR_OK);
    cr_tangent r;
    assert_int_equal(cr_tangent_conj(f->arena, cr_tangent_array(&Z), &r), CR_OK);
    assert_int_equal(r.u.arr->dtype, CR_DT_C128);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 0), 1.0, -2.0);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 1), -3.0, -0.5);
    /* i * (1 + 2i) = -2 + i; i * (-3 + 0.5i) = -0.5 - 3i */
    assert_int_equal(cr_tangent_scale_c(f->arena, CMPLX(0, 1), cr_tangent_array(&Z), &r), CR_OK);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 0), -2.0, 1.0);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 1), -0.5, -3.0);
    /* a real array scaled by a complex number becomes complex: 2i * [1, 3] */
    double v[2] = {1, 3};
    cr_array V = cr_array_vector(v, 2);
    assert_int_equal(cr_tangent_scale_c(f->arena, CMPLX(0, 2), cr_tangent_array(&V), &r), CR_OK);
    assert_int_equal(r.u.arr->dtype, CR_DT_C128);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 1), 0.0, 6.0);
    /* conj of a real array is the array itself */
    assert_int_equal(cr_tangent_conj(f->arena, cr_tangent_array(&V), &r), CR_OK);
    assert_ptr_equal(r.u.arr, &V);
}

static void test_array_strided_views(void **state)
{
    fixture *f = *state;
    /* A is 2x3 row-major; At is its transpose as a 3x2 view with strides {1, 3}. */
    double a[6] = {1, 2, 3, 4, 5, 6};
    size_t tshape[2] = {3, 2};
    ptrdiff_t tstrides[2] = {1, 3};
    cr_array At;
    assert_int_equal(cr_array_view_init(&At, a, CR_DT_F64, 2, tshape, tstrides), CR_OK);
    double b[6] = {10, 20, 30, 40, 50, 60};
    cr_array B = cr_array_matrix(b, 3, 2);
    cr_tangent r;
    /* At = [1 4; 2 5; 3 6] */
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&At), cr_tangent_array(&B), &r),
                     CR_OK);
    static const double want[6] = {11, 24, 32, 45, 53, 66};
    assert_values(r.u.arr, want, 6);
    assert_true(cr_array_is_contiguous(r.u.arr));
    assert_int_equal(cr_tangent_sub(f->arena, cr_tangent_array(&B), cr_tangent_array(&At), &r),
                     CR_OK);
    static const double want2[6] = {9, 16, 28, 35, 47, 54};
    assert_values(r.u.arr, want2, 6);
    /* dot(At, B) = 10 + 80 + 60 + 200 + 150 + 360 = 860 */
    assert_int_equal(cr_tangent_dot(f->arena, cr_tangent_array(&At), cr_tangent_array(&B), &r),
                     CR_OK);
    ASSERT_DBL(r.u.f64, 860.0);

    /* A reversed vector (negative stride) and a stride-2 view. */
    double c[4] = {1, 2, 3, 4};
    size_t n4 = 4, n2 = 2;
    ptrdiff_t rev = -1, two = 2;
    cr_array R, S;
    assert_int_equal(cr_array_view_init(&R, &c[3], CR_DT_F64, 1, &n4, &rev), CR_OK);
    cr_array C = cr_array_vector(c, 4);
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&R), cr_tangent_array(&C), &r),
                     CR_OK);
    static const double w3[4] = {5, 5, 5, 5};
    assert_values(r.u.arr, w3, 4);
    assert_int_equal(cr_array_view_init(&S, c, CR_DT_F64, 1, &n2, &two), CR_OK);
    assert_int_equal(cr_tangent_scale(f->arena, 10.0, cr_tangent_array(&S), &r), CR_OK);
    static const double w4[2] = {10, 30};
    assert_values(r.u.arr, w4, 2);
}

static void test_array_shape_mismatch(void **state)
{
    fixture *f = *state;
    double a[6] = {0};
    cr_array A = cr_array_matrix(a, 2, 3), B = cr_array_matrix(a, 3, 2);
    cr_tangent r;
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&A), cr_tangent_array(&B), &r),
                     CR_ESHAPE);
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_ESHAPE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "(2,3)"));
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "(3,2)"));
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tangent_sub(f->arena, cr_tangent_array(&B), cr_tangent_array(&A), &r),
                     CR_ESHAPE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "(3,2)"));
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "(2,3)"));
    /* same element count, different rank */
    cr_array V = cr_array_vector(a, 6);
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&A), cr_tangent_array(&V), &r),
                     CR_ESHAPE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "(6)"));
}

static void test_array_dtype_promotion(void **state)
{
    fixture *f = *state;
    size_t n = 2;
    double re[2] = {1, 2};
    cr_complex im[2] = {CMPLX(0, 1), CMPLX(2, 1)};
    cr_array R = cr_array_vector(re, 2), C;
    assert_int_equal(cr_array_view_init(&C, im, CR_DT_C128, 1, &n, NULL), CR_OK);
    cr_tangent r;
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&R), cr_tangent_array(&C), &r),
                     CR_OK);
    assert_int_equal(r.u.arr->dtype, CR_DT_C128);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 0), 1.0, 1.0);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 1), 4.0, 1.0);
    assert_int_equal(cr_tangent_sub(f->arena, cr_tangent_array(&C), cr_tangent_array(&R), &r),
                     CR_OK);
    assert_int_equal(r.u.arr->dtype, CR_DT_C128);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 0), -1.0, 1.0);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 1), 0.0, 1.0);

    /* f32 + f32 stays f32; f32 + f64 is f64 */
    static const double fv[2] = {0.5, 1.5};
    cr_array *F1 = mk(f, CR_DT_F32, 1, &n, fv), *F2 = mk(f, CR_DT_F32, 1, &n, fv);
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(F1), cr_tangent_array(F2), &r),
                     CR_OK);
    assert_int_equal(r.u.arr->dtype, CR_DT_F32);
    ASSERT_DBL((double)((float *)r.u.arr->data)[1], 3.0);
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(F1), cr_tangent_array(&R), &r),
                     CR_OK);
    assert_int_equal(r.u.arr->dtype, CR_DT_F64);
    ASSERT_DBL(((double *)r.u.arr->data)[1], 3.5);
    assert_int_equal(cr_tangent_scale(f->arena, 4.0, cr_tangent_array(F1), &r), CR_OK);
    assert_int_equal(r.u.arr->dtype, CR_DT_F32);
    ASSERT_DBL((double)((float *)r.u.arr->data)[0], 2.0);
}

/* An n x n Diagonal view of the n values at d (stride 1). */
static cr_array diagonal(double *d, size_t n)
{
    cr_array D = cr_array_vector(d, n);
    D.ndim = 2;
    D.shape[0] = D.shape[1] = n;
    D.strides[0] = 1;
    D.strides[1] = 0;
    D.structure = CR_MAT_DIAGONAL;
    return D;
}

static void test_array_structured(void **state)
{
    fixture *f = *state;
    double d1[3] = {1, 2, 3}, d2[3] = {10, 20, 30};
    cr_array D1 = diagonal(d1, 3), D2 = diagonal(d2, 3);
    cr_tangent r;
    /* Diagonal + Diagonal stays Diagonal, n stored entries */
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&D1), cr_tangent_array(&D2), &r),
                     CR_OK);
    assert_int_equal(r.u.arr->structure, CR_MAT_DIAGONAL);
    assert_int_equal(r.u.arr->ndim, 2);
    assert_int_equal(r.u.arr->shape[0], 3);
    assert_int_equal(r.u.arr->shape[1], 3);
    assert_int_equal(cr_array_nstored(r.u.arr), 3);
    static const double dd[9] = {11, 0, 0, 0, 22, 0, 0, 0, 33};
    assert_values(r.u.arr, dd, 9);
    ASSERT_DBL(((double *)r.u.arr->data)[2], 33.0);
    /* Diagonal scaled stays Diagonal */
    assert_int_equal(cr_tangent_scale(f->arena, 2.0, cr_tangent_array(&D1), &r), CR_OK);
    assert_int_equal(r.u.arr->structure, CR_MAT_DIAGONAL);
    static const double ds[9] = {2, 0, 0, 0, 4, 0, 0, 0, 6};
    assert_values(r.u.arr, ds, 9);

    /* Diagonal + dense is dense: diag(1, 2) + [10 20; 30 40] = [11 20; 30 42] */
    double m[4] = {10, 20, 30, 40};
    cr_array M = cr_array_matrix(m, 2, 2), D = diagonal(d1, 2);
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&D), cr_tangent_array(&M), &r),
                     CR_OK);
    assert_int_equal(r.u.arr->structure, CR_MAT_DENSE);
    static const double dm[4] = {11, 20, 30, 42};
    assert_values(r.u.arr, dm, 4);
    ASSERT_DBL(((double *)r.u.arr->data)[1], 20.0);
    assert_int_equal(cr_tangent_sub(f->arena, cr_tangent_array(&M), cr_tangent_array(&D), &r),
                     CR_OK);
    assert_int_equal(r.u.arr->structure, CR_MAT_DENSE);
    static const double md[4] = {9, 20, 30, 38};
    assert_values(r.u.arr, md, 4);
    /* dot(Diagonal, dense) = 1*10 + 2*40 = 90 */
    assert_int_equal(cr_tangent_dot(f->arena, cr_tangent_array(&D), cr_tangent_array(&M), &r),
                     CR_OK);
    ASSERT_DBL(r.u.f64, 90.0);

    /* Symmetric + Symmetric stays Symmetric (upper triangles are read) */
    double s1[4] = {1, 2, -99, 3}, s2[4] = {10, 20, -99, 30};
    cr_array S1 = cr_array_matrix(s1, 2, 2), S2 = cr_array_matrix(s2, 2, 2);
    S1.structure = S2.structure = CR_MAT_SYMMETRIC;
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&S1), cr_tangent_array(&S2), &r),
                     CR_OK);
    assert_int_equal(r.u.arr->structure, CR_MAT_SYMMETRIC);
    static const double ss[4] = {11, 22, 22, 33};
    assert_values(r.u.arr, ss, 4);
    /* Symmetric + dense reads the mirrored lower triangle, not the memory */
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&S1), cr_tangent_array(&M), &r),
                     CR_OK);
    assert_int_equal(r.u.arr->structure, CR_MAT_DENSE);
    static const double sm[4] = {11, 22, 32, 43};
    assert_values(r.u.arr, sm, 4);
    /* UpperTriangular + dense ignores the lower memory */
    cr_array U = cr_array_matrix(s1, 2, 2);
    U.structure = CR_MAT_UPPER;
    assert_int_equal(cr_tangent_add(f->arena, cr_tangent_array(&U), cr_tangent_array(&M), &r),
                     CR_OK);
    static const double um[4] = {11, 22, 30, 43};
    assert_values(r.u.arr, um, 4);
}

/* ---- structs --------------------------------------------------------------------------- */

static void test_struct_fieldwise(void **state)
{
    fixture *f = *state;
    cr_tangent a = mkstruct(f, "x", cr_tangent_f64(1.0), NULL, cr_tangent_zero());
    cr_tangent b = mkstruct(f, "y", cr_tangent_f64(2.0), "id", cr_tangent_none());
    cr_tangent r;
    assert_int_equal(cr_tangent_add(f->arena, a, b, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_STRUCT);
    assert_ptr_equal(r.u.s.type, &point_type);
    ASSERT_DBL(cr_tangent_field(r, 0).u.f64, 1.0);
    ASSERT_DBL(cr_tangent_field(r, 1).u.f64, 2.0);
    assert_true(cr_tangent_field_present(r, 2));
    assert_int_equal(cr_tangent_field(r, 2).tag, CR_TAN_NONE);

    /* a + a: x doubles, the absent fields stay absent */
    assert_int_equal(cr_tangent_add(f->arena, a, a, &r), CR_OK);
    ASSERT_DBL(cr_tangent_field(r, 0).u.f64, 2.0);
    assert_false(cr_tangent_field_present(r, 1));
    assert_false(cr_tangent_field_present(r, 2));

    /* a - b: x = 1 - 0, y = 0 - 2, id = Zero - No = No */
    assert_int_equal(cr_tangent_sub(f->arena, a, b, &r), CR_OK);
    ASSERT_DBL(cr_tangent_field(r, 0).u.f64, 1.0);
    ASSERT_DBL(cr_tangent_field(r, 1).u.f64, -2.0);
    assert_int_equal(cr_tangent_field(r, 2).tag, CR_TAN_NONE);

    /* scaling maps over the present fields */
    assert_int_equal(cr_tangent_scale(f->arena, 3.0, b, &r), CR_OK);
    ASSERT_DBL(cr_tangent_field(r, 1).u.f64, 6.0);
    assert_false(cr_tangent_field_present(r, 0));
    assert_int_equal(cr_tangent_field(r, 2).tag, CR_TAN_NONE);

    /* an all-absent struct is an identity */
    cr_tangent e = cr_tangent_struct_empty(&point_type);
    assert_int_equal(cr_tangent_add(f->arena, e, b, &r), CR_OK);
    ASSERT_DBL(cr_tangent_field(r, 1).u.f64, 2.0);
    assert_int_equal(cr_tangent_add(f->arena, b, e, &r), CR_OK);
    ASSERT_DBL(cr_tangent_field(r, 1).u.f64, 2.0);

    /* Tangent{point} + Tangent{other} is an error */
    cr_tangent o = cr_tangent_struct_empty(&other_type);
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tangent_add(f->arena, a, o, &r), CR_ETANGENT);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "other"));
    /* as is a struct + a number */
    assert_int_equal(cr_tangent_add(f->arena, a, cr_tangent_f64(1.0), &r), CR_ETANGENT);
}

/* ---- add!! ----------------------------------------------------------------------------- */

static void test_is_inplaceable_destination(void **state)
{
    fixture *f = *state;
    size_t n = 2;
    static const double v[2] = {1, 2};
    cr_array *w64 = mk(f, CR_DT_F64, 1, &n, v), *w32 = mk(f, CR_DT_F32, 1, &n, v),
             *wc = mk(f, CR_DT_C128, 1, &n, v);
    cr_array *wi, *wb;
    assert_int_equal(cr_array_new(f->arena, CR_DT_I64, 1, &n, &wi), CR_OK);
    assert_int_equal(cr_array_new(f->arena, CR_DT_BOOL, 1, &n, &wb), CR_OK);
    double buf[2] = {1, 2};
    cr_array ro = cr_array_vector(buf, 2);
    thunk_env e = {.value = 1};

    assert_true(cr_tangent_is_inplaceable_destination(cr_tangent_array(w64)));
    assert_true(cr_tangent_is_inplaceable_destination(cr_tangent_array(w32)));
    assert_true(cr_tangent_is_inplaceable_destination(cr_tangent_array(wc)));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_array(wi)));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_array(wb)));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_array(&ro)));
    ro.flags = CR_ARRAY_WRITABLE;
    assert_true(cr_tangent_is_inplaceable_destination(cr_tangent_array(&ro)));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_zero()));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_none()));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_f64(1.0)));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_c128(1.0)));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_struct_empty(&point_type)));
    assert_false(cr_tangent_is_inplaceable_destination(mkthunk(f, &e)));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_notimpl(&k_ni_info)));
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_array(NULL)));

    /* A writable view whose elements alias each other (a zero stride, as a broadcast)
     * cannot take `x .+= y` (accumulation.jl: "mat .+= x is unsafe"). */
    size_t n3 = 3;
    ptrdiff_t zero = 0;
    cr_array bc;
    assert_int_equal(cr_array_view_init(&bc, buf, CR_DT_F64, 1, &n3, &zero), CR_OK);
    bc.flags = CR_ARRAY_WRITABLE;
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_array(&bc)));
    size_t sh[2] = {2, 2};
    ptrdiff_t overlap[2] = {1, 1}; /* x[0][1] and x[1][0] are one element */
    double b4[4] = {0};
    cr_array ov;
    assert_int_equal(cr_array_view_init(&ov, b4, CR_DT_F64, 2, sh, overlap), CR_OK);
    ov.flags = CR_ARRAY_WRITABLE;
    assert_false(cr_tangent_is_inplaceable_destination(cr_tangent_array(&ov)));
    /* a transposed or reversed writable view is fine */
    ptrdiff_t tr[2] = {1, 2};
    assert_int_equal(cr_array_view_init(&ov, b4, CR_DT_F64, 2, sh, tr), CR_OK);
    ov.flags = CR_ARRAY_WRITABLE;
    assert_true(cr_tangent_is_inplaceable_destination(cr_tangent_array(&ov)));
    ptrdiff_t rv = -1;
    assert_int_equal(cr_array_view_init(&bc, &b4[3], CR_DT_F64, 1, &n3, &rv), CR_OK);
    bc.flags = CR_ARRAY_WRITABLE;
    assert_true(cr_tangent_is_inplaceable_destination(cr_tangent_array(&bc)));
}

static void test_accum_in_place(void **state)
{
    fixture *f = *state;
    size_t sh[2] = {2, 2};
    static const double xv[4] = {1, 2, 3, 4};
    cr_array *X = mk(f, CR_DT_F64, 2, sh, xv);
    void *data = X->data;
    double y[4] = {10, 20, 30, 40};
    cr_array Y = cr_array_matrix(y, 2, 2);
    cr_tangent r;
    mark(f);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(X), cr_tangent_array(&Y), &r),
                     CR_OK);
    no_alloc(f); /* in place: nothing allocated */
    assert_int_equal(r.tag, CR_TAN_ARRAY);
    assert_ptr_equal(r.u.arr, X);
    assert_ptr_equal(r.u.arr->data, data);
    static const double want[4] = {11, 22, 33, 44};
    assert_values(X, want, 4);

    /* A writable transposed view of caller memory: x[i][j] = buf[j*2 + i]. */
    double buf[4] = {1, 2, 3, 4};
    ptrdiff_t tr[2] = {1, 2};
    cr_array T;
    assert_int_equal(cr_array_view_init(&T, buf, CR_DT_F64, 2, sh, tr), CR_OK);
    T.flags = CR_ARRAY_WRITABLE;
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(&T), cr_tangent_array(&Y), &r),
                     CR_OK);
    assert_ptr_equal(r.u.arr, &T);
    ASSERT_DBL(buf[0], 11.0); /* x[0][0] += 10 */
    ASSERT_DBL(buf[2], 23.0); /* x[0][1] += 20 */
    ASSERT_DBL(buf[1], 32.0); /* x[1][0] += 30 */
    ASSERT_DBL(buf[3], 44.0); /* x[1][1] += 40 */

    /* accumulationjl "RHS Diagonal": -ones(2,2) .+= Diagonal([1, 2]) */
    static const double mones[4] = {-1, -1, -1, -1};
    cr_array *A = mk(f, CR_DT_F64, 2, sh, mones);
    double dg[2] = {1, 2};
    cr_array D = diagonal(dg, 2);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(A), cr_tangent_array(&D), &r),
                     CR_OK);
    assert_ptr_equal(r.u.arr, A);
    static const double wd[4] = {0, -1, -1, 1};
    assert_values(A, wd, 4);

    /* Diagonal .+= Diagonal in place: [-2, -2] + [1, 2] = [-1, 0] */
    double acc[2] = {-2, -2};
    cr_array DA = diagonal(acc, 2);
    DA.flags = CR_ARRAY_WRITABLE;
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(&DA), cr_tangent_array(&D), &r),
                     CR_OK);
    assert_ptr_equal(r.u.arr, &DA);
    ASSERT_DBL(acc[0], -1.0);
    ASSERT_DBL(acc[1], 0.0);

    /* complex destination takes a real y in place */
    cr_array *C = mk(f, CR_DT_C128, 2, sh, xv);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(C), cr_tangent_array(&Y), &r),
                     CR_OK);
    assert_ptr_equal(r.u.arr, C);
    ASSERT_CPLX(((cr_complex *)C->data)[3], 44.0, 0.0);
}

static void test_accum_out_of_place(void **state)
{
    fixture *f = *state;
    double x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40};
    cr_array X = cr_array_matrix(x, 2, 2), Y = cr_array_matrix(y, 2, 2);
    cr_tangent r;
    /* Not writable: a new array, x untouched */
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(&X), cr_tangent_array(&Y), &r),
                     CR_OK);
    assert_ptr_not_equal(r.u.arr, &X);
    assert_ptr_not_equal(r.u.arr->data, x);
    static const double want[4] = {11, 22, 33, 44};
    assert_values(r.u.arr, want, 4);
    ASSERT_DBL(x[0], 1.0);
    ASSERT_DBL(x[3], 4.0);

    /* Writable real x, complex y: out of place, complex result, x untouched */
    size_t sh[2] = {2, 2};
    static const double xv[4] = {1, 2, 3, 4};
    cr_array *W = mk(f, CR_DT_F64, 2, sh, xv);
    cr_complex cz[4] = {CMPLX(0, 1), 0, 0, CMPLX(1, -1)};
    cr_array CZ;
    assert_int_equal(cr_array_view_init(&CZ, cz, CR_DT_C128, 2, sh, NULL), CR_OK);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(W), cr_tangent_array(&CZ), &r),
                     CR_OK);
    assert_ptr_not_equal(r.u.arr, W);
    assert_int_equal(r.u.arr->dtype, CR_DT_C128);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 0), 1.0, 1.0);
    ASSERT_CPLX(cr_array_get_linear(r.u.arr, 3), 5.0, -1.0);
    assert_values(W, xv, 4);

    /* Writable Diagonal x, dense y: the sum is not diagonal, so out of place and dense */
    double dg[2] = {1, 2};
    cr_array DX = diagonal(dg, 2);
    DX.flags = CR_ARRAY_WRITABLE;
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(&DX), cr_tangent_array(&Y), &r),
                     CR_OK);
    assert_ptr_not_equal(r.u.arr, &DX);
    assert_int_equal(r.u.arr->structure, CR_MAT_DENSE);
    static const double wd[4] = {11, 20, 30, 42};
    assert_values(r.u.arr, wd, 4);
    ASSERT_DBL(dg[0], 1.0);

    /* shape mismatch */
    cr_array Y3 = cr_array_vector(y, 3);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(W), cr_tangent_array(&Y3), &r),
                     CR_ESHAPE);
    assert_values(W, xv, 4);

    /* scalars: add!!(12, 4) = 16 */
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_f64(12), cr_tangent_f64(4), &r), CR_OK);
    ASSERT_DBL(r.u.f64, 16.0);
}

/* An InplaceableThunk of value [1, 1, ..., 1] (n = numel of dest), counting both paths. */
static cr_status ones_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    thunk_env *e = env;
    e->calls++;
    size_t sh[2] = {2, 2};
    cr_array *a;
    cr_status st = cr_array_new(arena, CR_DT_F64, 2, sh, &a);
    if (st != CR_OK)
        return st;
    for (int k = 0; k < 4; k++)
        ((double *)a->data)[k] = e->value;
    *out = cr_tangent_array(a);
    return CR_OK;
}

static cr_status ones_add(cr_arena *arena, cr_array *dest, void *env)
{
    (void)arena;
    thunk_env *e = env;
    e->adds++;
    double *d = dest->data;
    for (int k = 0; k < 4; k++)
        d[k] += e->value;
    return CR_OK;
}

/* An add! that breaks the contract: it points the destination at other memory. */
static double g_elsewhere[4];
static cr_status replacing_add(cr_arena *arena, cr_array *dest, void *env)
{
    (void)arena;
    thunk_env *e = env;
    e->adds++;
    dest->data = g_elsewhere;
    return CR_OK;
}

static void test_accum_inplaceable_thunk(void **state)
{
    fixture *f = *state;
    size_t sh[2] = {2, 2};
    static const double xv[4] = {1, 2, 3, 4};
    cr_array *X = mk(f, CR_DT_F64, 2, sh, xv);
    thunk_env e = {.value = 0.5};
    cr_tangent it, r;
    assert_int_equal(cr_tangent_inplaceable_thunk(f->arena, ones_fn, ones_add, &e, "ones", &it),
                     CR_OK);
    /* inplaceable x: add! runs, the thunk is never evaluated */
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(X), it, &r), CR_OK);
    assert_int_equal(e.adds, 1);
    assert_int_equal(e.calls, 0);
    assert_ptr_equal(r.u.arr, X);
    static const double w1[4] = {1.5, 2.5, 3.5, 4.5};
    assert_values(X, w1, 4);

    /* not inplaceable x: the thunk is evaluated, add! is not called */
    double y[4] = {1, 2, 3, 4};
    cr_array Y = cr_array_matrix(y, 2, 2);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(&Y), it, &r), CR_OK);
    assert_int_equal(e.adds, 1);
    assert_int_equal(e.calls, 1);
    assert_ptr_not_equal(r.u.arr, &Y);
    assert_values(r.u.arr, w1, 4);
    ASSERT_DBL(y[0], 1.0);

    /* ZeroTangent x: the sum is the thunk itself, still unevaluated */
    thunk_env e2 = {.value = 2.0};
    cr_tangent it2;
    assert_int_equal(cr_tangent_inplaceable_thunk(f->arena, ones_fn, ones_add, &e2, "t2", &it2),
                     CR_OK);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_zero(), it2, &r), CR_OK);
    assert_true(same(r, it2));
    assert_int_equal(e2.calls + e2.adds, 0);

    /* A writable Diagonal is not a dense destination: add! is not given it. */
    double dg[2] = {1, 2};
    cr_array DX = diagonal(dg, 2);
    DX.flags = CR_ARRAY_WRITABLE;
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(&DX), it2, &r), CR_OK);
    assert_int_equal(e2.adds, 0);
    assert_int_equal(e2.calls, 1);
    static const double w2[4] = {3, 2, 2, 4};
    assert_values(r.u.arr, w2, 4);
}

static void test_accum_plain_thunk_in_place(void **state)
{
    fixture *f = *state;
    size_t sh[2] = {2, 2};
    static const double xv[4] = {1, 2, 3, 4};
    cr_array *X = mk(f, CR_DT_F64, 2, sh, xv);
    thunk_env e = {.value = -1.0};
    cr_tangent th, r;
    assert_int_equal(cr_tangent_thunk(f->arena, ones_fn, &e, "mones", &th), CR_OK);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(X), th, &r), CR_OK);
    assert_int_equal(e.calls, 1);
    assert_ptr_equal(r.u.arr, X);
    static const double w[4] = {0, 1, 2, 3};
    assert_values(X, w, 4);
    /* again: the memoised value is reused */
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(X), th, &r), CR_OK);
    assert_int_equal(e.calls, 1);
    static const double w2[4] = {-1, 0, 1, 2};
    assert_values(X, w2, 4);
}

static void test_accum_struct_fieldwise(void **state)
{
    fixture *f = *state;
    size_t n = 2;
    static const double xv[2] = {1, 2};
    cr_array *X = mk(f, CR_DT_F64, 1, &n, xv);
    double y[2] = {10, 20};
    cr_array Y = cr_array_vector(y, 2);
    cr_tangent a = mkstruct(f, "x", cr_tangent_array(X), NULL, cr_tangent_zero());
    cr_tangent b = mkstruct(f, "x", cr_tangent_array(&Y), "y", cr_tangent_f64(3.0));
    cr_tangent r;
    assert_int_equal(cr_tangent_accum(f->arena, a, b, &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_STRUCT);
    assert_ptr_equal(cr_tangent_field(r, 0).u.arr, X); /* the field accumulated in place */
    static const double w[2] = {11, 22};
    assert_values(X, w, 2);
    ASSERT_DBL(cr_tangent_field(r, 1).u.f64, 3.0);
    assert_false(cr_tangent_field_present(r, 2));
}

static void test_accum_debug_checks_add(void **state)
{
    fixture *f = *state;
    size_t sh[2] = {2, 2};
    static const double xv[4] = {1, 2, 3, 4};
    thunk_env e = {.value = 1.0};
    cr_tangent it, r;
    assert_int_equal(
        cr_tangent_inplaceable_thunk(f->arena, ones_fn, replacing_add, &e, "replacer", &it), CR_OK);

    cr_ctx_set_debug(f->ctx, true);
    cr_array *X = mk(f, CR_DT_F64, 2, sh, xv);
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(X), it, &r), CR_EMISUSE);
    assert_int_equal(e.adds, 1);
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EMISUSE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "replacer"));

    /* A well-behaved add! passes the debug check. */
    thunk_env g = {.value = 1.0};
    cr_tangent good;
    assert_int_equal(cr_tangent_inplaceable_thunk(f->arena, ones_fn, ones_add, &g, "good", &good),
                     CR_OK);
    cr_array *X2 = mk(f, CR_DT_F64, 2, sh, xv);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(X2), good, &r), CR_OK);
    assert_ptr_equal(r.u.arr, X2);
    ASSERT_DBL(((double *)X2->data)[0], 2.0);

    /* A destination described field by field in memory nobody initialised (as the tape's
     * writable copies of gradient arrays are): the check reads the fields, not the padding
     * or the dimensions past ndim (valgrind, `make valgrind`, flagged a comparison of the
     * whole struct). */
    cr_array *D = malloc(sizeof *D);
    assert_non_null(D);
    double dv[4] = {1, 2, 3, 4};
    D->data = dv;
    D->shape[0] = D->shape[1] = 2;
    D->strides[0] = 2;
    D->strides[1] = 1;
    D->dtype = CR_DT_F64;
    D->ndim = 2;
    D->structure = CR_MAT_DENSE;
    D->flags = CR_ARRAY_WRITABLE;
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(D), good, &r), CR_OK);
    assert_ptr_equal(r.u.arr, D);
    ASSERT_DBL(dv[3], 5.0);
    /* Changing a field is still caught, whatever the descriptor's other bytes hold. */
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(D), it, &r), CR_EMISUSE);
    free(D);

    /* Outside debug mode the check is not made. */
    cr_ctx_set_debug(f->ctx, false);
    cr_array *X3 = mk(f, CR_DT_F64, 2, sh, xv);
    assert_int_equal(cr_tangent_accum(f->arena, cr_tangent_array(X3), it, &r), CR_OK);
    assert_int_equal(e.adds, 3);
    assert_int_equal(e.calls, 0);
}

/* ---- zeros_like and isapprox ----------------------------------------------------------- */

static void test_zeros_like_and_isapprox(void **state)
{
    fixture *f = *state;
    double v[3] = {1, 2, 3};
    cr_array V = cr_array_vector(v, 3);
    cr_tangent z;
    assert_int_equal(cr_tangent_zeros_like(f->arena, cr_tangent_array(&V), &z), CR_OK);
    assert_ptr_not_equal(z.u.arr, &V);
    assert_true(cr_tangent_is_inplaceable_destination(z));
    static const double zero3[3] = {0, 0, 0};
    assert_values(z.u.arr, zero3, 3);
    assert_int_equal(cr_tangent_zeros_like(f->arena, cr_tangent_f32(3.0f), &z), CR_OK);
    assert_int_equal(z.tag, CR_TAN_F32);
    ASSERT_DBL((double)z.u.f32, 0.0);

    double w[3] = {1, 2, 3.001};
    cr_array W = cr_array_vector(w, 3);
    assert_true(cr_tangent_isapprox(cr_tangent_array(&V), cr_tangent_array(&W), 1e-3, 0));
    assert_false(cr_tangent_isapprox(cr_tangent_array(&V), cr_tangent_array(&W), 1e-5, 0));
    assert_true(cr_tangent_isapprox(cr_tangent_zero(), cr_tangent_f64(1e-12), 0, 1e-10));
    assert_false(cr_tangent_isapprox(cr_tangent_zero(), cr_tangent_f64(1e-3), 0, 1e-10));
    cr_tangent s = mkstruct(f, "x", cr_tangent_f64(0.0), NULL, cr_tangent_zero());
    assert_true(cr_tangent_isapprox(s, cr_tangent_struct_empty(&point_type), 0, 0));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_add_zero_identities),
        T(test_add_notimplemented_wins),
        T(test_sub_zero_identities),
        T(test_sub_notimplemented_is_error),
        T(test_mul_zero_identities),
        T(test_mul_values),
        T(test_dot_zero_identities),
        T(test_dot_values),
        T(test_zero_operands_never_allocate),
        T(test_scalar_promotion),
        T(test_array_same_shape),
        T(test_array_complex_ops),
        T(test_array_strided_views),
        T(test_array_shape_mismatch),
        T(test_array_dtype_promotion),
        T(test_array_structured),
        T(test_struct_fieldwise),
        T(test_is_inplaceable_destination),
        T(test_accum_in_place),
        T(test_accum_out_of_place),
        T(test_accum_inplaceable_thunk),
        T(test_accum_plain_thunk_in_place),
        T(test_accum_struct_fieldwise),
        T(test_accum_debug_checks_add),
        T(test_zeros_like_and_isapprox),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
