/*
 * Tests of tangent construction: the constructors, structural tangents (absent fields,
 * getfield, canonicalize, tuples), memoised thunks and NotImplemented.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

#include "test_util.h"

/* A described struct and a described tuple. */
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

typedef struct pair {
    double a;
    cr_complex b;
} pair;

static const cr_field pair_fields[] = {
    {NULL, offsetof(pair, a), CR_KIND_F64, NULL},
    {NULL, offsetof(pair, b), CR_KIND_C128, NULL},
};
static const cr_type pair_type = {"Tuple{f64,c128}", sizeof(pair), 2, pair_fields};

/* ---- constructors ---------------------------------------------------------------------- */

static void test_constructors(void **state)
{
    (void)state;
    cr_tangent z = cr_tangent_zero();
    assert_int_equal(z.tag, CR_TAN_ZERO);
    cr_tangent zi = {0};
    assert_int_equal(zi.tag, CR_TAN_ZERO); /* zero-initialised is ZeroTangent */
    assert_int_equal(cr_tangent_none().tag, CR_TAN_NONE);

    cr_tangent d = cr_tangent_f64(1.25);
    assert_int_equal(d.tag, CR_TAN_F64);
    assert_true(d.u.f64 == 1.25);
    cr_tangent s = cr_tangent_f32(0.5f);
    assert_int_equal(s.tag, CR_TAN_F32);
    assert_true(s.u.f32 == 0.5f);
    cr_tangent c = cr_tangent_c128(CMPLX(1.0, -2.0));
    assert_int_equal(c.tag, CR_TAN_C128);
    assert_true(creal(c.u.c128) == 1.0 && cimag(c.u.c128) == -2.0);

    double buf[3] = {1, 2, 3};
    cr_array arr = cr_array_vector(buf, 3);
    cr_tangent a = cr_tangent_array(&arr);
    assert_int_equal(a.tag, CR_TAN_ARRAY);
    assert_ptr_equal(a.u.arr, &arr);

    static const cr_notimpl info = {"file.c", 12, "missing"};
    cr_tangent ni = cr_tangent_notimpl(&info);
    assert_int_equal(ni.tag, CR_TAN_NOTIMPL);
    assert_ptr_equal(ni.u.ni, &info);

    assert_true(cr_tangent_is_zero(z));
    assert_true(cr_tangent_is_zero(cr_tangent_none()));
    assert_false(cr_tangent_is_zero(d));
    assert_false(cr_tangent_is_zero(ni));
    assert_false(cr_tangent_is_zero(cr_tangent_f64(0.0))); /* a natural zero is not a Zero */
    assert_false(cr_tangent_is_thunk(d));
    assert_false(cr_tangent_is_inplaceable_thunk(a));
}

static void test_tag_names(void **state)
{
    (void)state;
    assert_string_equal(cr_tag_name(CR_TAN_ZERO), "ZeroTangent");
    assert_string_equal(cr_tag_name(CR_TAN_NONE), "NoTangent");
    assert_string_equal(cr_tag_name(CR_TAN_F64), "f64");
    assert_string_equal(cr_tag_name(CR_TAN_F32), "f32");
    assert_string_equal(cr_tag_name(CR_TAN_C128), "c128");
    assert_string_equal(cr_tag_name(CR_TAN_ARRAY), "array");
    assert_string_equal(cr_tag_name(CR_TAN_STRUCT), "Tangent");
    assert_string_equal(cr_tag_name(CR_TAN_THUNK), "Thunk");
    assert_string_equal(cr_tag_name(CR_TAN_NOTIMPL), "NotImplemented");
    assert_string_equal(cr_tag_name((cr_tag)200), "?");
}

/* ---- structural tangents --------------------------------------------------------------- */

static void test_struct_absent_fields(void **state)
{
    fixture *f = *state;
    const char *names[] = {"y"};
    cr_tangent vals[] = {cr_tangent_f64(2.0)};
    cr_tangent t;
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, names, vals, 1, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_STRUCT);
    assert_ptr_equal(t.u.s.type, &point_type);

    assert_false(cr_tangent_field_present(t, 0));
    assert_true(cr_tangent_field_present(t, 1));
    assert_false(cr_tangent_field_present(t, 2));
    assert_false(cr_tangent_field_present(t, 3)); /* out of range */
    assert_int_equal(cr_tangent_field(t, 0).tag, CR_TAN_ZERO);
    assert_int_equal(cr_tangent_field(t, 1).tag, CR_TAN_F64);
    assert_true(cr_tangent_field(t, 1).u.f64 == 2.0);
    assert_int_equal(cr_tangent_field(t, 2).tag, CR_TAN_ZERO);
    assert_int_equal(cr_tangent_field(t, 7).tag, CR_TAN_ZERO);

    cr_tangent g;
    assert_int_equal(cr_tangent_getfield(t, "y", &g), CR_OK);
    assert_int_equal(g.tag, CR_TAN_F64);
    assert_true(g.u.f64 == 2.0);
    assert_int_equal(cr_tangent_getfield(t, "x", &g), CR_OK);
    assert_int_equal(g.tag, CR_TAN_ZERO);
    assert_int_equal(cr_tangent_getfield(t, "nope", &g), CR_EINVAL);
    assert_int_equal(cr_tangent_getfield(cr_tangent_f64(1.0), "x", &g), CR_EINVAL);

    /* Zeros have zero fields: getfield/field of a zero is that zero. */
    assert_int_equal(cr_tangent_getfield(cr_tangent_none(), "x", &g), CR_OK);
    assert_int_equal(g.tag, CR_TAN_NONE);
    assert_int_equal(cr_tangent_getfield(cr_tangent_zero(), "x", &g), CR_OK);
    assert_int_equal(g.tag, CR_TAN_ZERO);
    assert_int_equal(cr_tangent_field(cr_tangent_none(), 0).tag, CR_TAN_NONE);
    assert_false(cr_tangent_field_present(cr_tangent_zero(), 0));
}

static void test_struct_explicit_zero_is_present(void **state)
{
    fixture *f = *state;
    const char *names[] = {"id", "x"};
    cr_tangent vals[] = {cr_tangent_none(), cr_tangent_zero()};
    cr_tangent t;
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, names, vals, 2, &t), CR_OK);
    assert_true(cr_tangent_field_present(t, 0));
    assert_false(cr_tangent_field_present(t, 1));
    assert_true(cr_tangent_field_present(t, 2));
    assert_int_equal(cr_tangent_field(t, 0).tag, CR_TAN_ZERO);
    assert_int_equal(cr_tangent_field(t, 2).tag, CR_TAN_NONE);
}

static void test_struct_errors(void **state)
{
    fixture *f = *state;
    cr_tangent t,
        v[4] = {cr_tangent_f64(1), cr_tangent_f64(2), cr_tangent_f64(3), cr_tangent_f64(4)};
    const char *bad[] = {"z"};
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, bad, v, 1, &t), CR_EINVAL);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "'z'"));
    const char *twice[] = {"x", "x"};
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, twice, v, 2, &t), CR_EINVAL);
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, NULL, v, 4, &t), CR_EINVAL);
    assert_int_equal(cr_tangent_struct(f->arena, NULL, NULL, v, 1, &t), CR_EINVAL);
}

static void test_struct_empty_no_alloc(void **state)
{
    fixture *f = *state;
    size_t used = cr_arena_used(f->arena);
    cr_tangent t = cr_tangent_struct_empty(&point_type);
    assert_int_equal(cr_arena_used(f->arena), used);
    assert_int_equal(t.tag, CR_TAN_STRUCT);
    assert_null(t.u.s.fields);
    for (size_t i = 0; i < 3; i++) {
        assert_false(cr_tangent_field_present(t, i));
        assert_int_equal(cr_tangent_field(t, i).tag, CR_TAN_ZERO);
    }
}

static void test_canonicalize(void **state)
{
    fixture *f = *state;
    const char *names[] = {"y"};
    cr_tangent vals[] = {cr_tangent_f64(-4.0)};
    cr_tangent t, c;
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, names, vals, 1, &t), CR_OK);
    assert_int_equal(cr_tangent_canonicalize(f->arena, t, &c), CR_OK);
    assert_int_equal(c.tag, CR_TAN_STRUCT);
    assert_ptr_equal(c.u.s.type, &point_type);
    for (size_t i = 0; i < 3; i++)
        assert_true(cr_tangent_field_present(c, i));
    assert_int_equal(c.u.s.fields[0].tag, CR_TAN_ZERO);
    assert_int_equal(c.u.s.fields[1].tag, CR_TAN_F64);
    assert_true(c.u.s.fields[1].u.f64 == -4.0);
    assert_int_equal(c.u.s.fields[2].tag, CR_TAN_ZERO);
    /* The input is not modified. */
    assert_false(cr_tangent_field_present(t, 0));
    assert_ptr_not_equal(c.u.s.fields, t.u.s.fields);

    /* An all-absent struct becomes all ZeroTangent fields. */
    assert_int_equal(cr_tangent_canonicalize(f->arena, cr_tangent_struct_empty(&point_type), &c),
                     CR_OK);
    assert_non_null(c.u.s.fields);
    for (size_t i = 0; i < 3; i++) {
        assert_true(cr_tangent_field_present(c, i));
        assert_int_equal(c.u.s.fields[i].tag, CR_TAN_ZERO);
    }

    /* Other tangents are returned unchanged, without allocating. */
    size_t used = cr_arena_used(f->arena);
    assert_int_equal(cr_tangent_canonicalize(f->arena, cr_tangent_f64(3.0), &c), CR_OK);
    assert_int_equal(c.tag, CR_TAN_F64);
    assert_true(c.u.f64 == 3.0);
    assert_int_equal(cr_tangent_canonicalize(f->arena, cr_tangent_none(), &c), CR_OK);
    assert_int_equal(c.tag, CR_TAN_NONE);
    assert_int_equal(cr_arena_used(f->arena), used);
}

static void test_tuple(void **state)
{
    fixture *f = *state;
    cr_tangent vals[] = {cr_tangent_f64(1.5), cr_tangent_c128(CMPLX(0.0, 2.0))};
    cr_tangent t, g;
    assert_int_equal(cr_tangent_struct(f->arena, &pair_type, NULL, vals, 2, &t), CR_OK);
    assert_int_equal(cr_tangent_field(t, 0).tag, CR_TAN_F64);
    assert_true(cr_tangent_field(t, 0).u.f64 == 1.5);
    assert_int_equal(cr_tangent_field(t, 1).tag, CR_TAN_C128);
    assert_true(cimag(cr_tangent_field(t, 1).u.c128) == 2.0);
    /* Tuple elements have no names. */
    assert_int_equal(cr_tangent_getfield(t, "a", &g), CR_EINVAL);
    assert_int_equal(cr_type_field_index(&pair_type, "a"), -1);

    /* Fewer values than elements: the rest are absent. */
    assert_int_equal(cr_tangent_struct(f->arena, &pair_type, NULL, vals, 1, &t), CR_OK);
    assert_true(cr_tangent_field_present(t, 0));
    assert_false(cr_tangent_field_present(t, 1));
    assert_int_equal(cr_tangent_field(t, 1).tag, CR_TAN_ZERO);
}

/* ---- thunks ---------------------------------------------------------------------------- */

typedef struct thunk_env {
    int calls;
    double value;
    cr_status fail;   /* CR_OK: succeed */
    cr_tangent *self; /* unthunked from inside fn when non-NULL */
} thunk_env;

static cr_status counted_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    thunk_env *e = env;
    e->calls++;
    if (e->fail != CR_OK)
        return e->fail;
    if (e->self != NULL) {
        cr_tangent v;
        cr_status st = cr_tangent_unthunk(*e->self, &v);
        if (st != CR_OK)
            return st;
    }
    *out = cr_tangent_f64(e->value);
    return CR_OK;
}

/* A thunk whose value is a 2-vector allocated in the thunk's arena. */
static cr_status array_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    thunk_env *e = env;
    e->calls++;
    size_t n = 2;
    cr_array *a;
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, &n, &a);
    if (st != CR_OK)
        return st;
    ((double *)a->data)[0] = e->value;
    ((double *)a->data)[1] = 2 * e->value;
    *out = cr_tangent_array(a);
    return CR_OK;
}

static void test_thunk_evaluated_once(void **state)
{
    fixture *f = *state;
    thunk_env e = {.value = 7.5};
    cr_tangent th;
    assert_int_equal(cr_tangent_thunk(f->arena, counted_fn, &e, "seven", &th), CR_OK);
    assert_true(cr_tangent_is_thunk(th));
    assert_false(cr_tangent_is_inplaceable_thunk(th));
    assert_int_equal(e.calls, 0); /* creating a thunk does not evaluate it */
    for (int k = 0; k < 10; k++) {
        cr_tangent v;
        assert_int_equal(cr_tangent_unthunk(th, &v), CR_OK);
        assert_int_equal(v.tag, CR_TAN_F64);
        assert_true(v.u.f64 == 7.5);
    }
    assert_int_equal(e.calls, 1);

    /* Unthunking a non-thunk is the identity. */
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(cr_tangent_f32(2.0f), &v), CR_OK);
    assert_int_equal(v.tag, CR_TAN_F32);
    assert_true(v.u.f32 == 2.0f);
}

static void test_thunk_once_across_algebra(void **state)
{
    fixture *f = *state;
    thunk_env e = {.value = 3.0};
    cr_tangent th, r;
    assert_int_equal(cr_tangent_thunk(f->arena, array_fn, &e, "vec", &th), CR_OK);
    double ybuf[2] = {10.0, 20.0};
    cr_array y = cr_array_vector(ybuf, 2);

    /* th = [3, 6] */
    assert_int_equal(cr_tangent_add(f->arena, th, cr_tangent_array(&y), &r), CR_OK);
    assert_true(((double *)r.u.arr->data)[0] == 13.0 && ((double *)r.u.arr->data)[1] == 26.0);
    assert_int_equal(cr_tangent_sub(f->arena, cr_tangent_array(&y), th, &r), CR_OK);
    assert_true(((double *)r.u.arr->data)[0] == 7.0 && ((double *)r.u.arr->data)[1] == 14.0);
    assert_int_equal(cr_tangent_scale(f->arena, 0.5, th, &r), CR_OK);
    assert_true(((double *)r.u.arr->data)[0] == 1.5 && ((double *)r.u.arr->data)[1] == 3.0);
    assert_int_equal(cr_tangent_dot(f->arena, th, cr_tangent_array(&y), &r), CR_OK);
    assert_int_equal(r.tag, CR_TAN_F64);
    assert_true(r.u.f64 == 3.0 * 10.0 + 6.0 * 20.0);
    assert_int_equal(cr_tangent_mul(f->arena, cr_tangent_f64(2.0), th, &r), CR_OK);
    assert_true(((double *)r.u.arr->data)[1] == 12.0);
    assert_int_equal(cr_tangent_neg(f->arena, th, &r), CR_OK);
    assert_true(((double *)r.u.arr->data)[0] == -3.0);
    assert_int_equal(cr_tangent_add(f->arena, th, th, &r), CR_OK);
    assert_true(((double *)r.u.arr->data)[0] == 6.0 && ((double *)r.u.arr->data)[1] == 12.0);
    assert_int_equal(e.calls, 1);
}

static void test_thunk_failure_memoised(void **state)
{
    fixture *f = *state;
    thunk_env e = {.fail = CR_EDOMAIN};
    cr_tangent th, v, r;
    assert_int_equal(cr_tangent_thunk(f->arena, counted_fn, &e, "bad", &th), CR_OK);
    for (int k = 0; k < 4; k++) {
        v = cr_tangent_f64(99.0);
        assert_int_equal(cr_tangent_unthunk(th, &v), CR_EDOMAIN);
        assert_int_equal(v.tag, CR_TAN_ZERO);
        if (k > 0) /* later reads say which thunk failed, whatever the context held since */
            assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "thunk 'bad' failed when first"));
        cr_ctx_clear_error(f->ctx);
    }
    assert_int_equal(cr_tangent_add(f->arena, th, cr_tangent_f64(1.0), &r), CR_EDOMAIN);
    assert_int_equal(cr_tangent_scale(f->arena, 2.0, th, &r), CR_EDOMAIN);
    assert_int_equal(e.calls, 1);
}

static void test_thunk_self_dependent(void **state)
{
    fixture *f = *state;
    thunk_env e = {.value = 1.0};
    cr_tangent th, v;
    assert_int_equal(cr_tangent_thunk(f->arena, counted_fn, &e, "ouroboros", &th), CR_OK);
    e.self = &th;
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_tangent_unthunk(th, &v), CR_EMISUSE);
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EMISUSE);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "ouroboros"));
    /* The failure is memoised: no second evaluation. */
    assert_int_equal(cr_tangent_unthunk(th, &v), CR_EMISUSE);
    assert_int_equal(e.calls, 1);
}

/* A thunk whose value is the thunk in *env. */
static cr_status returns_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    *out = *(cr_tangent *)env;
    return CR_OK;
}

static void test_thunk_value_is_itself(void **state)
{
    fixture *f = *state;
    cr_tangent a, b, v;
    /* a's value is a: a cycle, reported as misuse rather than looping forever. */
    assert_int_equal(cr_tangent_thunk(f->arena, returns_thunk_fn, &a, "loop", &a), CR_OK);
    assert_int_equal(cr_tangent_unthunk(a, &v), CR_EMISUSE);
    /* Two thunks that are each other's value. */
    cr_tangent *cell = cr_arena_alloc(f->arena, 2 * sizeof *cell, _Alignof(cr_tangent));
    assert_int_equal(cr_tangent_thunk(f->arena, returns_thunk_fn, &cell[1], "p", &cell[0]), CR_OK);
    assert_int_equal(cr_tangent_thunk(f->arena, returns_thunk_fn, &cell[0], "q", &cell[1]), CR_OK);
    b = cell[0];
    assert_int_equal(cr_tangent_unthunk(b, &v), CR_EMISUSE);
}

static void test_thunk_of_thunk(void **state)
{
    fixture *f = *state;
    thunk_env e = {.value = -2.0};
    cr_tangent inner, outer, v;
    assert_int_equal(cr_tangent_thunk(f->arena, counted_fn, &e, "inner", &inner), CR_OK);
    assert_int_equal(cr_tangent_thunk(f->arena, returns_thunk_fn, &inner, "outer", &outer), CR_OK);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(cr_tangent_unthunk(outer, &v), CR_OK);
        assert_int_equal(v.tag, CR_TAN_F64);
        assert_true(v.u.f64 == -2.0);
    }
    assert_int_equal(cr_tangent_unthunk(inner, &v), CR_OK);
    assert_true(v.u.f64 == -2.0);
    assert_int_equal(e.calls, 1);
}

static cr_status noop_add(cr_arena *arena, cr_array *dest, void *env)
{
    (void)arena;
    (void)dest;
    (void)env;
    return CR_OK;
}

static void test_thunk_constructor_errors(void **state)
{
    fixture *f = *state;
    cr_tangent t;
    assert_int_equal(cr_tangent_thunk(f->arena, NULL, NULL, "x", &t), CR_EINVAL);
    assert_int_equal(cr_tangent_inplaceable_thunk(f->arena, counted_fn, NULL, NULL, "x", &t),
                     CR_EINVAL);
    thunk_env e = {.value = 1.0};
    assert_int_equal(cr_tangent_inplaceable_thunk(f->arena, counted_fn, noop_add, &e, NULL, &t),
                     CR_OK);
    assert_true(cr_tangent_is_thunk(t));
    assert_true(cr_tangent_is_inplaceable_thunk(t));
    assert_string_equal(t.u.thunk->name, "thunk"); /* default name */
    assert_int_equal(e.calls, 0);
}

/* ---- NotImplemented -------------------------------------------------------------------- */

static void test_not_implemented(void **state)
{
    fixture *f = *state;
    char msg[] = "d/dk besselj: see issue #42";
    cr_tangent ni;
    int line = __LINE__ + 1;
    assert_int_equal(CR_NOT_IMPLEMENTED(f->arena, msg, &ni), CR_OK);
    assert_int_equal(ni.tag, CR_TAN_NOTIMPL);
    assert_string_equal(ni.u.ni->file, __FILE__);
    assert_int_equal(ni.u.ni->line, line);
    assert_string_equal(ni.u.ni->msg, "d/dk besselj: see issue #42");
    /* The message was copied into the arena. */
    assert_ptr_not_equal(ni.u.ni->msg, msg);
    msg[0] = 'X';
    assert_string_equal(ni.u.ni->msg, "d/dk besselj: see issue #42");

    assert_int_equal(cr_tangent_not_implemented(f->arena, NULL, 0, NULL, &ni), CR_OK);
    assert_string_equal(ni.u.ni->file, "?");
    assert_string_equal(ni.u.ni->msg, "");
}

static void test_not_implemented_arena_full(void **state)
{
    fixture *f = *state;
    _Alignas(16) unsigned char buf[16];
    cr_arena_params p = {.buffer = buf, .buffer_size = sizeof buf};
    cr_arena *small;
    assert_int_equal(cr_arena_new(f->ctx, &p, &small), CR_OK);
    cr_tangent ni = cr_tangent_f64(1.0);
    assert_int_equal(cr_tangent_not_implemented(small, "a_rather_long_file_name.c", 3,
                                                "a message too long for the buffer", &ni),
                     CR_EARENA);
    assert_int_equal(ni.tag, CR_TAN_ZERO);
    cr_arena_free(small);
}

/* ---- materialised zeros and copies ----------------------------------------------------- */

static void test_zero_of_primals(void **state)
{
    fixture *f = *state;
    cr_tangent z;
    cr_value v = cr_value_f32(2.0f);
    assert_int_equal(cr_tangent_zero_of(f->arena, &v, &z), CR_OK);
    assert_int_equal(z.tag, CR_TAN_F32);
    assert_true(z.u.f32 == 0.0f);
    v = cr_value_c128(CMPLX(1, 1));
    assert_int_equal(cr_tangent_zero_of(f->arena, &v, &z), CR_OK);
    assert_int_equal(z.tag, CR_TAN_C128);
    v = cr_value_i64(3);
    assert_int_equal(cr_tangent_zero_of(f->arena, &v, &z), CR_OK);
    assert_int_equal(z.tag, CR_TAN_NONE);
    v = cr_value_bool(true);
    assert_int_equal(cr_tangent_zero_of(f->arena, &v, &z), CR_OK);
    assert_int_equal(z.tag, CR_TAN_NONE);

    point pt = {1, 2, 3};
    v = cr_value_struct(&point_type, &pt);
    assert_int_equal(cr_tangent_zero_of(f->arena, &v, &z), CR_OK);
    assert_int_equal(z.tag, CR_TAN_STRUCT);
    assert_int_equal(z.u.s.fields[0].tag, CR_TAN_F64);
    assert_true(z.u.s.fields[0].u.f64 == 0.0);
    assert_int_equal(z.u.s.fields[1].tag, CR_TAN_F64);
    assert_int_equal(z.u.s.fields[2].tag, CR_TAN_NONE);

    double data[6] = {1, 2, 3, 4, 5, 6};
    cr_array m = cr_array_matrix(data, 2, 3);
    v = cr_value_array(&m);
    assert_int_equal(cr_tangent_zero_of(f->arena, &v, &z), CR_OK);
    assert_int_equal(z.tag, CR_TAN_ARRAY);
    assert_int_equal(z.u.arr->ndim, 2);
    assert_int_equal(z.u.arr->shape[0], 2);
    assert_int_equal(z.u.arr->shape[1], 3);
    assert_true(cr_tangent_is_inplaceable_destination(z));
    for (int k = 0; k < 6; k++)
        assert_true(((double *)z.u.arr->data)[k] == 0.0);
}

static void test_copy_is_deep(void **state)
{
    fixture *f = *state;
    double data[3] = {1, 2, 3};
    cr_array v = cr_array_vector(data, 3);
    const char *names[] = {"x"};
    cr_tangent vals[] = {cr_tangent_array(&v)};
    cr_tangent t, c;
    assert_int_equal(cr_tangent_struct(f->arena, &point_type, names, vals, 1, &t), CR_OK);
    assert_int_equal(cr_tangent_copy(f->arena, t, &c), CR_OK);
    assert_ptr_not_equal(c.u.s.fields, t.u.s.fields);
    assert_false(cr_tangent_field_present(c, 1));
    cr_array *ca = c.u.s.fields[0].u.arr;
    assert_ptr_not_equal(ca, &v);
    assert_ptr_not_equal(ca->data, data);
    assert_true(ca->flags & CR_ARRAY_WRITABLE);
    data[0] = 100;
    assert_true(((double *)ca->data)[0] == 1.0);
    assert_true(((double *)ca->data)[2] == 3.0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_constructors),
        T(test_tag_names),
        T(test_struct_absent_fields),
        T(test_struct_explicit_zero_is_present),
        T(test_struct_errors),
        T(test_struct_empty_no_alloc),
        T(test_canonicalize),
        T(test_tuple),
        T(test_thunk_evaluated_once),
        T(test_thunk_once_across_algebra),
        T(test_thunk_failure_memoised),
        T(test_thunk_self_dependent),
        T(test_thunk_value_is_itself),
        T(test_thunk_of_thunk),
        T(test_thunk_constructor_errors),
        T(test_not_implemented),
        T(test_not_implemented_arena_full),
        T(test_zero_of_primals),
        T(test_copy_is_deep),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
