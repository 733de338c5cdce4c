/*
 * Friendly tangents and closures' fields, the paths the other friendly tests leave out:
 * function fields (left alone in the friendly gradient, ZeroTangent in the raw one), a
 * missing descriptor two levels down, a customised conversion of a nested struct that
 * fails, a nested array field of grad without data, a failed tape, NULL array variables,
 * no current tape, an engine with many customised types, a closure's f32 field read on a
 * tape, and closure tangents that frule_via_ad cannot use. Derivatives are checked against
 * central differences of plain-C versions of the same functions.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#define FD_RTOL 1e-8

/* Central difference of fn along one coordinate of x (n values). */
static double fd_at(double (*fn)(const double *), const double *x, size_t n, size_t j)
{
    double p[8], m[8], h = 1e-5;
    memcpy(p, x, n * sizeof *x);
    memcpy(m, x, n * sizeof *x);
    p[j] += h;
    m[j] -= h;
    return (fn(p) - fn(m)) / (2 * h);
}

/* ---- A struct with a function field -------------------------------------------------------- */

typedef struct withfn {
    double a;
    const cr_function *fn;
    double b;
} withfn;
static const cr_field withfn_fields[3] = {{"a", offsetof(withfn, a), CR_KIND_F64, NULL},
                                          {"fn", offsetof(withfn, fn), CR_KIND_FUNC, NULL},
                                          {"b", offsetof(withfn, b), CR_KIND_F64, NULL}};
static const cr_type withfn_type = {"withfn", sizeof(withfn), 3, withfn_fields};

/* h(a, b) = a sin(b) + b^2 */
static double h_c(const double *x)
{
    return x[0] * sin(x[1]) + x[1] * x[1];
}

static cr_var h_t(cr_tape *t, const cr_var *v)
{
    cr_var a = cr_tape_struct_field(&withfn_type, v, "a");
    cr_var b = cr_tape_struct_field(&withfn_type, v, "b");
    return cr_add(t, cr_mul(t, a, cr_sin(t, b)), cr_mul(t, b, b));
}

static void test_function_field(void **state)
{
    fixture *f = *state;
    withfn m = {0.8, cr_fn_sin.u.func.fn, -0.6};
    const double x[2] = {m.a, m.b};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[2];
    assert_int_equal(cr_tape_struct_inputs(t, &withfn_type, &m, v, 2), CR_OK);
    cr_var y = h_t(t, v);
    assert_close(y.v, h_c(x), 1e-15);
    /* The friendly gradient: real fields written, the function field left as it was. */
    withfn g = {0, cr_fn_cos.u.func.fn, 0};
    assert_ok(t, cr_tape_gradient_struct(t, y, &withfn_type, v, &g));
    assert_close(g.a, fd_at(h_c, x, 2, 0), FD_RTOL);
    assert_close(g.b, fd_at(h_c, x, 2, 1), FD_RTOL);
    assert_ptr_equal(g.fn, cr_fn_cos.u.func.fn);
    /* The raw tangent: ZeroTangent for the function field. */
    cr_tangent tan;
    assert_ok(t, cr_tape_gradient_tangent(t, y, &withfn_type, v, f->arena, &tan));
    assert_int_equal(tan.tag, CR_TAN_STRUCT);
    assert_int_equal(cr_tangent_field(tan, 1).tag, CR_TAN_ZERO);
    assert_close(cr_tangent_field(tan, 0).u.f64, g.a, 0);
    assert_close(cr_tangent_field(tan, 2).u.f64, g.b, 0);
    cr_tape_free(t);
}

/* ---- Descriptor errors, no current tape, a failed tape ------------------------------------ */

typedef struct mid {
    double s[1];
} mid;
static const cr_field mid_fields[1] = {{"s", 0, CR_KIND_STRUCT, NULL}};
static const cr_type mid_type = {"mid", sizeof(mid), 1, mid_fields};
typedef struct outer {
    double x;
    mid m;
} outer;
static const cr_field outer_fields[2] = {{"x", offsetof(outer, x), CR_KIND_F64, NULL},
                                         {"m", offsetof(outer, m), CR_KIND_STRUCT, &mid_type}};
static const cr_type outer_type = {"outer", sizeof(outer), 2, outer_fields};

static void test_input_errors(void **state)
{
    fixture *f = *state;
    outer o = {1.0, {{2.0}}};
    withfn m = {0.8, NULL, -0.6};
    cr_var v[4];
    cr_avar av[1];
    /* No tape given and none current. */
    assert_null(cr_tape_current());
    assert_int_equal(cr_tape_struct_inputs(NULL, &withfn_type, &m, v, 2), CR_EMISUSE);
    assert_int_equal(cr_tape_struct_array_inputs(NULL, &withfn_type, &m, av, 1), CR_EMISUSE);

    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    /* A struct field without descriptor two levels down is found, naming its type. */
    assert_int_equal(cr_tape_struct_inputs(t, &outer_type, &o, v, 4), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "mid: field 0 is a struct without a descriptor");
    assert_int_equal(cr_tape_status(t), CR_EINVAL);

    /* A failed tape: the struct gradients give its status and leave grad alone. */
    cr_var y = cr_const(1.0);
    withfn g = {5.0, NULL, 6.0};
    assert_int_equal(cr_tape_gradient_struct(t, y, &withfn_type, v, &g), CR_EINVAL);
    assert_true(g.a == 5.0 && g.b == 6.0);
    cr_tangent tan;
    assert_int_equal(cr_tape_gradient_tangent(t, y, &withfn_type, v, f->arena, &tan), CR_EINVAL);
    assert_int_equal(cr_tape_gradient_tangent(NULL, y, &withfn_type, v, f->arena, &tan), CR_EINVAL);

    /* After a reset the same work succeeds. */
    cr_tape_reset(t);
    const double x[2] = {m.a, m.b};
    assert_ok(t, cr_tape_struct_inputs(t, &withfn_type, &m, v, 2));
    y = h_t(t, v);
    assert_ok(t, cr_tape_gradient_struct(t, y, &withfn_type, v, &g));
    assert_close(g.b, fd_at(h_c, x, 2, 1), FD_RTOL);
    cr_tape_free(t);
}

/* ---- Nested structs: customised conversions and array fields ------------------------------ */

typedef struct pair2 {
    double p, q;
} pair2;
static const cr_field pair2_fields[2] = {{"p", offsetof(pair2, p), CR_KIND_F64, NULL},
                                         {"q", offsetof(pair2, q), CR_KIND_F64, NULL}};
static const cr_type pair2_type = {"pair2", sizeof(pair2), 2, pair2_fields};
typedef struct holder {
    double s;
    pair2 P;
} holder;
static const cr_field holder_fields[2] = {{"s", offsetof(holder, s), CR_KIND_F64, NULL},
                                          {"P", offsetof(holder, P), CR_KIND_STRUCT, &pair2_type}};
static const cr_type holder_type = {"holder", sizeof(holder), 2, holder_fields};

/* k(s, p, q) = s p q + sin(p) */
static double k_c(const double *x)
{
    return x[0] * x[1] * x[2] + sin(x[1]);
}

static cr_status pair2_refuse(const cr_type *type, cr_tangent raw, void *dest, void *udata)
{
    (void)type;
    (void)raw;
    (void)dest;
    (void)udata;
    return CR_EDOMAIN;
}

/* The friendly gradient of a pair2 is its raw gradient scaled by *udata. */
static cr_status pair2_scaled(const cr_type *type, cr_tangent raw, void *dest, void *udata)
{
    (void)type;
    const double *c = udata;
    pair2 *d = dest;
    d->p = *c * cr_tangent_field(raw, 0).u.f64;
    d->q = *c * cr_tangent_field(raw, 1).u.f64;
    return CR_OK;
}

/* Types that only fill the engine's table of customised conversions. */
typedef struct one {
    double v;
} one;
static const cr_field one_fields[1] = {{"v", 0, CR_KIND_F64, NULL}};
static const cr_type one_types[5] = {{"one0", sizeof(one), 1, one_fields},
                                     {"one1", sizeof(one), 1, one_fields},
                                     {"one2", sizeof(one), 1, one_fields},
                                     {"one3", sizeof(one), 1, one_fields},
                                     {"one4", sizeof(one), 1, one_fields}};

static void test_nested_customised(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_friendly(eng, &pair2_type, pair2_refuse, NULL), CR_OK);
    cr_tape *t;
    cr_tape_params prm = {.struct_size = sizeof prm, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    holder h = {1.5, {0.4, -0.9}};
    const double x[3] = {h.s, h.P.p, h.P.q};
    cr_var v[3];
    assert_ok(t, cr_tape_struct_inputs(t, &holder_type, &h, v, 3));
    cr_var y = cr_add(t, cr_mul(t, v[0], cr_mul(t, v[1], v[2])), cr_sin(t, v[1]));
    assert_close(y.v, k_c(x), 1e-15);
    /* The nested struct's conversion fails: the whole gradient fails, grad as it was. */
    holder g = {7.0, {8.0, 9.0}};
    assert_int_equal(cr_tape_gradient_struct(t, y, &holder_type, v, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "the friendly gradient of pair2 failed");
    assert_true(g.s == 7.0 && g.P.p == 8.0 && g.P.q == 9.0);

    /* Registered again, after more types than the first table holds: the conversion
     * replaces the refusal and is still found. */
    double c = 2.0;
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(cr_engine_friendly(eng, &one_types[i], pair2_refuse, NULL), CR_OK);
    assert_int_equal(cr_engine_friendly(eng, &pair2_type, pair2_scaled, &c), CR_OK);
    assert_ok(t, cr_tape_gradient_struct(t, y, &holder_type, v, &g));
    assert_close(g.s, fd_at(k_c, x, 3, 0), FD_RTOL);
    assert_close(g.P.p, 2.0 * fd_at(k_c, x, 3, 1), FD_RTOL);
    assert_close(g.P.q, 2.0 * fd_at(k_c, x, 3, 2), FD_RTOL);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* A struct with many customised types registered before it: the first survives the growth
 * of the table. */
static void test_many_customised(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    double c = -3.0;
    assert_int_equal(cr_engine_friendly(eng, &pair2_type, pair2_scaled, &c), CR_OK);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(cr_engine_friendly(eng, &one_types[i], pair2_refuse, NULL), CR_OK);
    cr_tape *t;
    cr_tape_params prm = {.struct_size = sizeof prm, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    holder h = {0.3, {1.1, 0.2}};
    const double x[3] = {h.s, h.P.p, h.P.q};
    cr_var v[3];
    assert_ok(t, cr_tape_struct_inputs(t, &holder_type, &h, v, 3));
    cr_var y = cr_add(t, cr_mul(t, v[0], cr_mul(t, v[1], v[2])), cr_sin(t, v[1]));
    holder g;
    assert_ok(t, cr_tape_gradient_struct(t, y, &holder_type, v, &g));
    assert_close(g.P.q, -3.0 * fd_at(k_c, x, 3, 2), FD_RTOL);
    cr_tape_free(t);
    cr_engine_free(eng);
}

static const cr_function norule_fn = {.name = "norule", .arity = 1};

/* A nested array field: grad's lacks data; an array variable that is NULL; a failed tape. */
typedef struct lay {
    cr_array b;
    double gain;
} lay;
static const cr_field lay_fields[2] = {{"b", offsetof(lay, b), CR_KIND_ARRAY, NULL},
                                       {"gain", offsetof(lay, gain), CR_KIND_F64, NULL}};
static const cr_type lay_type = {"lay", sizeof(lay), 2, lay_fields};
typedef struct top {
    double s;
    lay L;
} top;
static const cr_field top_fields[2] = {{"s", offsetof(top, s), CR_KIND_F64, NULL},
                                       {"L", offsetof(top, L), CR_KIND_STRUCT, &lay_type}};
static const cr_type top_type = {"top", sizeof(top), 2, top_fields};

/* q(s, gain, b) = s gain + s sum(b) (b of 3 elements) */
static double q_c(const double *x)
{
    return x[0] * x[1] + x[0] * (x[2] + x[3] + x[4]);
}

/* r(s, gain, b) = s sum(b) (b of 3 elements) */
static double r_c(const double *x)
{
    return x[0] * (x[2] + x[3] + x[4]);
}

static void test_nested_arrays(void **state)
{
    fixture *f = *state;
    double b[3] = {0.5, -1.5, 2.25};
    top m = {1.2, {cr_array_vector(b, 3), 0.7}};
    const double x[5] = {m.s, m.L.gain, b[0], b[1], b[2]};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[2];
    cr_avar av[1];
    assert_ok(t, cr_tape_struct_inputs(t, &top_type, &m, v, 2));
    assert_ok(t, cr_tape_struct_array_inputs(t, &top_type, &m, av, 1));
    cr_var y = cr_add(t, cr_mul(t, v[0], v[1]), cr_mul(t, v[0], cr_asum(t, av[0])));
    assert_close(y.v, q_c(x), 1e-14);
    /* grad's nested array field describes no memory. */
    top g;
    memset(&g, 0, sizeof g);
    assert_int_equal(cr_tape_gradient_struct_arrays(t, y, &top_type, v, av, &g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "the array field b of lay in grad has no data");
    /* An array variable without array. */
    cr_avar none[1] = {cr_aconst(NULL)};
    cr_tangent tan;
    size_t used = cr_arena_used(f->arena);
    assert_int_equal(cr_tape_gradient_tangent_arrays(t, y, &top_type, v, none, f->arena, &tan),
                     CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_tape_gradient_tangent_arrays: array variable 0 is NULL");
    assert_int_equal(cr_arena_used(f->arena), used);
    double gb[3];
    /* On a failed tape, its (sticky) status comes first, before grad's arrays are looked at. */
    cr_tape *bad;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &bad), CR_OK);
    cr_var vb[2];
    cr_avar avb[1];
    assert_ok(bad, cr_tape_struct_inputs(bad, &top_type, &m, vb, 2));
    assert_ok(bad, cr_tape_struct_array_inputs(bad, &top_type, &m, avb, 1));
    cr_value nr = cr_value_function(&norule_fn, NULL);
    cr_var yb = cr_tape_call1(bad, &nr, vb, 1);
    assert_int_equal(cr_tape_status(bad), CR_ENORULE);
    assert_int_equal(cr_tape_gradient_struct_arrays(bad, yb, &top_type, vb, avb, &g), CR_ENORULE);
    assert_int_equal(cr_tape_gradient_tangent_arrays(bad, yb, &top_type, vb, none, f->arena, &tan),
                     CR_ENORULE);
    assert_int_equal(cr_arena_used(f->arena), used);
    cr_tape_free(bad);
    /* With both fixed, the gradients. */
    g.L.b = cr_array_vector(gb, 3);
    assert_ok(t, cr_tape_gradient_struct_arrays(t, y, &top_type, v, av, &g));
    assert_close(g.s, fd_at(q_c, x, 5, 0), FD_RTOL);
    assert_close(g.L.gain, fd_at(q_c, x, 5, 1), FD_RTOL);
    for (size_t i = 0; i < 3; i++)
        assert_close(gb[i], fd_at(q_c, x, 5, 2 + i), FD_RTOL);
    cr_tape_free(t);
}

/* The raw tangent with array variables of an earlier recording: refused with CR_ETAPE before
 * their arrays are read, since the struct and its arrays are borrowed only until the reset
 * and may be gone (here: the struct is released and its memory reused with another
 * shape). Found by test_tape_random_struct: the arrays were read first, to allocate the
 * tangent's, and a released struct gave "element count overflows" or a read of freed
 * memory. */
static void test_old_array_variables(void **state)
{
    fixture *f = *state;
    double b[3] = {0.5, -1.5, 2.25};
    top *m = malloc(sizeof *m);
    assert_non_null(m);
    *m = (top){1.2, {cr_array_vector(b, 3), 0.7}};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_var v[2];
    cr_avar old[1];
    assert_ok(t, cr_tape_struct_inputs(t, &top_type, m, v, 2));
    assert_ok(t, cr_tape_struct_array_inputs(t, &top_type, m, old, 1));
    cr_tape_reset(t);
    /* the caller reuses the struct's memory: the old variable's array now reads as garbage */
    m->L.b.shape[0] = SIZE_MAX / 2;
    m->L.b.ndim = 2;
    m->L.b.shape[1] = 4;
    top m2 = {0.3, {cr_array_vector(b, 3), -0.4}};
    cr_avar av[1];
    assert_ok(t, cr_tape_struct_inputs(t, &top_type, &m2, v, 2));
    assert_ok(t, cr_tape_struct_array_inputs(t, &top_type, &m2, av, 1));
    cr_var y = cr_mul(t, v[0], cr_asum(t, av[0]));
    cr_tangent tan;
    size_t used = cr_arena_used(f->arena);
    assert_int_equal(cr_tape_gradient_tangent_arrays(t, y, &top_type, v, old, f->arena, &tan),
                     CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_gradient_tangent_arrays: array input 0 "
                                           "belongs to another tape, or to this tape before "
                                           "its last reset");
    assert_int_equal(cr_arena_used(f->arena), used);
    free(m);
    /* not the tape's failure: the same call with this recording's variables succeeds */
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_ok(t, cr_tape_gradient_tangent_arrays(t, y, &top_type, v, av, f->arena, &tan));
    cr_tangent tl, ts, tb;
    assert_int_equal(cr_tangent_getfield(tan, "s", &ts), CR_OK);
    assert_int_equal(cr_tangent_getfield(tan, "L", &tl), CR_OK);
    assert_int_equal(cr_tangent_getfield(tl, "b", &tb), CR_OK);
    const double x[5] = {m2.s, m2.L.gain, b[0], b[1], b[2]};
    assert_close(ts.u.f64, fd_at(r_c, x, 5, 0), FD_RTOL);
    for (size_t i = 0; i < 3; i++)
        assert_close(((const double *)tb.u.arr->data)[i], fd_at(r_c, x, 5, 2 + i), FD_RTOL);
    cr_tape_free(t);
}

/* ---- Closures' fields ------------------------------------------------------------------- */

/* fc(x) = c x + in.d x^2 with c an f32 field and in.d a nested f64 field. */
typedef struct fin {
    double d;
} fin;
typedef struct fcl {
    float c;
    fin in;
} fcl;
static const cr_field fin_fields[1] = {{"d", offsetof(fin, d), CR_KIND_F64, NULL}};
static const cr_type fin_type = {"fin", sizeof(fin), 1, fin_fields};
static const cr_field fcl_fields[2] = {{"c", offsetof(fcl, c), CR_KIND_F32, NULL},
                                       {"in", offsetof(fcl, in), CR_KIND_STRUCT, &fin_type}};
static const cr_type fcl_type = {"fcl", sizeof(fcl), 2, fcl_fields};
static const cr_function fcl_fn = {.name = "fcl", .arity = 1, .self_type = &fcl_type};

/* x = (c, d, x) */
static double fcl_c(const double *x)
{
    return x[0] * x[2] + x[1] * x[2] * x[2];
}

static cr_status fcl_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_add(t, cr_mul(t, x[0], x[2]), cr_mul(t, x[1], cr_mul(t, x[2], x[2])));
    return cr_tape_status(t);
}

static cr_status refusing_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)out;
    (void)env;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "refusing_thunk: no value");
}

static const cr_notimpl k_ni = {__FILE__, __LINE__, "a missing tangent"};

static void test_closure_fields(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_overlay_closure(eng, &fcl_fn, fcl_ad, 1, NULL), CR_OK);
    fcl self = {0.3f, {-1.25}};
    const double x[3] = {(double)self.c, self.in.d, 0.9};
    cr_value fv = cr_value_function(&fcl_fn, &self);

    /* On a tape the fields are constants read from self, the f32 one included. */
    cr_tape *t;
    cr_tape_params prm = {.struct_size = sizeof prm, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    cr_var xv = cr_tape_input(t, x[2]);
    cr_var y = cr_tape_call1(t, &fv, &xv, 1);
    double g;
    assert_ok(t, cr_tape_gradient(t, y, &xv, 1, &g));
    assert_close(y.v, fcl_c(x), 1e-15);
    assert_close(g, fd_at(fcl_c, x, 3, 2), FD_RTOL);
    cr_tape_free(t);

    /* frule_via_ad with closure tangents it cannot read. */
    const cr_config *cfg = cr_engine_config(eng);
    cr_value xa = cr_value_f64(x[2]), yv;
    cr_tangent dargs[2], dy, th;
    dargs[1] = cr_tangent_f64(1.0);
    assert_int_equal(cr_tangent_thunk(f->arena, refusing_thunk, NULL, "refusing", &th), CR_OK);
    dargs[0] = th;
    assert_int_equal(cr_frule_via_ad(cfg, f->arena, dargs, &fv, &xa, 1, &yv, &dy), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "refusing_thunk: no value");
    /* The nested struct's tangent is a number, not structural. */
    cr_tangent fields[2] = {cr_tangent_f32(1.0f), cr_tangent_f64(1.0)};
    assert_int_equal(cr_tangent_struct(f->arena, &fcl_type, NULL, fields, 2, &dargs[0]), CR_OK);
    assert_int_equal(cr_frule_via_ad(cfg, f->arena, dargs, &fv, &xa, 1, &yv, &dy), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(f->ctx), "the tangent of the closure fin must be structural");
    /* A real field's tangent is NotImplemented. */
    fields[0] = cr_tangent_notimpl(&k_ni);
    fields[1] = cr_tangent_zero();
    assert_int_equal(cr_tangent_struct(f->arena, &fcl_type, NULL, fields, 2, &dargs[0]), CR_OK);
    assert_int_equal(cr_frule_via_ad(cfg, f->arena, dargs, &fv, &xa, 1, &yv, &dy), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(f->ctx), "a missing tangent");

    /* A usable tangent: along (dc, dd, dx), against central differences. */
    const double dir[3] = {0.5, -2.0, 1.5};
    cr_tangent dd = cr_tangent_f64(dir[1]);
    cr_tangent inner;
    assert_int_equal(cr_tangent_struct(f->arena, &fin_type, NULL, &dd, 1, &inner), CR_OK);
    fields[0] = cr_tangent_f32((float)dir[0]);
    fields[1] = inner;
    assert_int_equal(cr_tangent_struct(f->arena, &fcl_type, NULL, fields, 2, &dargs[0]), CR_OK);
    dargs[1] = cr_tangent_f64(dir[2]);
    assert_int_equal(cr_frule_via_ad(cfg, f->arena, dargs, &fv, &xa, 1, &yv, &dy), CR_OK);
    double want = 0.0;
    for (size_t j = 0; j < 3; j++)
        want += dir[j] * fd_at(fcl_c, x, 3, j);
    assert_close(yv.u.f64, fcl_c(x), 1e-15);
    assert_int_equal(dy.tag, CR_TAN_F64);
    assert_close(dy.u.f64, want, FD_RTOL);
    cr_engine_free(eng);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_function_field, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_input_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nested_customised, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_many_customised, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_nested_arrays, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_old_array_variables, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_closure_fields, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
