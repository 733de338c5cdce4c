/*
 * MutableTangent (tangent.h) and the rules of struct fields, getfield, setfield! and
 * construct: the registrations pass the rule tester (finite differences at sampled
 * points); a MutableTangent is updated in place and every copy sees it; bad input gets a
 * status and a message naming the field; and a program that builds a struct, overwrites a
 * field in place and reads it back is differentiated in both modes, threading the
 * struct's MutableTangent through the in-place rules, against finite differences of the
 * whole program.
 */
#include "test_util.h"

typedef struct pt {
    double x, y;
    int64_t n;
} pt;
static const cr_field pt_fields[] = {{"x", offsetof(pt, x), CR_KIND_F64, NULL},
                                     {"y", offsetof(pt, y), CR_KIND_F64, NULL},
                                     {"n", offsetof(pt, n), CR_KIND_I64, NULL}};
static const cr_type pt_type = {"pt", sizeof(pt), 3, pt_fields};

typedef struct cpt {
    cr_complex z;
    float s;
    pt p;
} cpt;
static const cr_field cpt_fields[] = {{"z", offsetof(cpt, z), CR_KIND_C128, NULL},
                                      {"s", offsetof(cpt, s), CR_KIND_F32, NULL},
                                      {"p", offsetof(cpt, p), CR_KIND_STRUCT, &pt_type}};
static const cr_type cpt_type = {"cpt", sizeof(cpt), 3, cpt_fields};

static void expect_pass(fixture *fx, cr_status st, const cr_test_report *r, const char *what)
{
    char line[1024];
    cr_test_report_format(r, line, sizeof line);
    if (st != CR_OK || r->verdict != CR_VERDICT_PASS) {
        print_error("%s: status %s, %s (%s)\n", what, cr_status_str(st), line,
                    cr_ctx_errmsg(fx->ctx));
        fail();
    }
}

/* ---- The registrations ------------------------------------------------------------------------
 */

static void test_registrations(void **state)
{
    fixture *fx = *state;
    const char *names[3] = {"getfield", "setfield!", "construct"};
    const cr_registry *reg = cr_registry_builtin();
    bool seen[3] = {false};
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        for (size_t k = 0; k < 3; k++) {
            if (strcmp(info.fn->name, names[k]) != 0)
                continue;
            seen[k] = true;
            cr_test_opts opts = {0};
            opts.npoints = 40;
            cr_test_report r;
            cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
            expect_pass(fx, st, &r, names[k]);
            assert_int_equal(r.nskipped, 0);
            assert_true(r.npoints >= 40);
        }
    }
    for (size_t k = 0; k < 3; k++)
        assert_true(seen[k]);
    assert_ptr_equal(cr_registry_find(reg, "setfield!"), cr_fn_setfield_bang.u.func.fn);
}

/* ---- The rules at chosen points ----------------------------------------------------------------
 */

static void test_rules_at_points(void **state)
{
    fixture *fx = *state;
    cpt c = {CMPLX(0.5, -1.25), 0.75f, {1.5, -2.0, 4}};
    cr_value obj = cr_value_struct(&cpt_type, &c);
    cr_test_report r;
    /* getfield of each field, setfield! of each with a value of its kind */
    for (int64_t i = 0; i < 3; i++) {
        cr_value a2[2] = {obj, cr_value_i64(i)};
        assert_int_equal(cr_test_rrule(fx->arena, NULL, &cr_fn_getfield, a2, 2, &r), CR_OK);
        expect_pass(fx, CR_OK, &r, "getfield rrule");
        assert_int_equal(cr_test_frule(fx->arena, NULL, &cr_fn_getfield, a2, 2, &r), CR_OK);
        expect_pass(fx, CR_OK, &r, "getfield frule");
    }
    pt q = {-0.5, 3.0, 1};
    cr_value xs[4] = {cr_value_c128(CMPLX(2.0, 0.25)), cr_value_f64(-0.625), cr_value_f64(0.125),
                      cr_value_struct(&pt_type, &q)};
    int64_t idx[4] = {0, 0, 1, 2};
    for (int k = 0; k < 4; k++) {
        cr_value a3[3] = {obj, cr_value_i64(idx[k]), xs[k]};
        assert_int_equal(cr_test_rrule(fx->arena, NULL, &cr_fn_setfield_bang, a3, 3, &r), CR_OK);
        expect_pass(fx, CR_OK, &r, "setfield! rrule");
        assert_int_equal(cr_test_frule(fx->arena, NULL, &cr_fn_setfield_bang, a3, 3, &r), CR_OK);
        expect_pass(fx, CR_OK, &r, "setfield! frule");
    }
    /* the primal: a copy with the field replaced, the argument untouched */
    cr_value a3[3] = {obj, cr_value_i64(1), cr_value_f64(-0.625)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setfield_bang, a3, 3, &y), CR_OK);
    const cpt *cy = y.u.obj.ptr;
    ASSERT_DBL(cy->s, -0.625f);
    ASSERT_DBL(c.s, 0.75f);
    ASSERT_DBL(cy->p.y, -2.0);
    /* a real value into the complex field: its cotangent is real (the real part) */
    cr_value ar[3] = {obj, cr_value_i64(0), cr_value_f64(1.5)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_setfield_bang, ar, 3, &y, &pb), CR_OK);
    static const char *const zname[] = {"z"};
    cr_tangent zt = cr_tangent_c128(CMPLX(3.0, -7.0)), dy, dx[4];
    assert_int_equal(cr_tangent_struct(fx->arena, &cpt_type, zname, &zt, 1, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(dx[3].tag, CR_TAN_F64);
    ASSERT_DBL(dx[3].u.f64, 3.0);
    /* the old value of the field gets a zero cotangent */
    cr_tangent oz = cr_tangent_field(dx[1], 0);
    assert_true(cr_tangent_is_zero(oz) || (oz.tag == CR_TAN_C128 && creal(oz.u.c128) == 0));
    /* construct: T given by a value; an integer field's value gets NoTangent */
    pt w = {0, 0, 0};
    cr_value ca[4] = {cr_value_struct(&pt_type, &w), cr_value_f64(1.25), cr_value_f64(-3.5),
                      cr_value_i64(9)};
    assert_int_equal(cr_test_rrule(fx->arena, NULL, &cr_fn_construct, ca, 4, &r), CR_OK);
    expect_pass(fx, CR_OK, &r, "construct rrule");
    assert_int_equal(cr_test_frule(fx->arena, NULL, &cr_fn_construct, ca, 4, &r), CR_OK);
    expect_pass(fx, CR_OK, &r, "construct frule");
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_construct, ca, 4, &y), CR_OK);
    const pt *py = y.u.obj.ptr;
    ASSERT_DBL(py->x, 1.25);
    ASSERT_DBL(py->y, -3.5);
    assert_int_equal(py->n, 9);
}

static void test_bad_input(void **state)
{
    fixture *fx = *state;
    pt p = {1, 2, 3};
    cr_value obj = cr_value_struct(&pt_type, &p), y;
    cr_value a[3] = {obj, cr_value_i64(3), cr_value_f64(1)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getfield, a, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "field 3 of pt");
    a[1] = cr_value_i64(-1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setfield_bang, a, 3, &y), CR_EINVAL);
    /* a complex value for a real field, a real one for an integer field */
    a[1] = cr_value_i64(0);
    a[2] = cr_value_c128(CMPLX(1, 1));
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setfield_bang, a, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "field 'x' of pt");
    a[1] = cr_value_i64(2);
    a[2] = cr_value_f64(1.5);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setfield_bang, a, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "field 'n' of pt");
    /* a struct of another type for a struct field */
    cpt c = {0};
    cr_value b[3] = {cr_value_struct(&cpt_type, &c), cr_value_i64(2), obj};
    b[2] = cr_value_struct(&cpt_type, &c);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setfield_bang, b, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "struct cpt");
    /* construct with the wrong number of fields, without a type */
    cr_value ca[3] = {obj, cr_value_f64(1), cr_value_f64(2)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_construct, ca, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "2 field values for pt, which has 3");
    ca[0] = cr_value_f64(0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_construct, ca, 3, &y), CR_EINVAL);
    cr_ctx_clear_error(fx->ctx);
}

/* A struct with a field of every other kind: int, bool, array and function. */
typedef struct wide {
    int k;
    bool on;
    double w;
    cr_array v;
    const cr_function *fn;
} wide;
static const cr_field wide_fields[] = {{"k", offsetof(wide, k), CR_KIND_I32, NULL},
                                       {"on", offsetof(wide, on), CR_KIND_BOOL, NULL},
                                       {"w", offsetof(wide, w), CR_KIND_F64, NULL},
                                       {"v", offsetof(wide, v), CR_KIND_ARRAY, NULL},
                                       {"fn", offsetof(wide, fn), CR_KIND_FUNC, NULL}};
static const cr_type wide_type = {"wide", sizeof(wide), 5, wide_fields};

/* construct and setfield! on int, bool, array and function fields: the values are stored,
 * the derivatives pass the rule tester, and values of the wrong kind or out of an int's
 * range are refused with a message naming the field. */
static void test_field_kinds(void **state)
{
    fixture *fx = *state;
    double v[3] = {0.5, -1.5, 2};
    cr_array V = cr_array_vector(v, 3);
    wide w0;
    memset(&w0, 0, sizeof w0);
    cr_value ca[6] = {cr_value_struct(&wide_type, &w0),
                      cr_value_i64(-7),
                      cr_value_bool(true),
                      cr_value_f64(0.25),
                      cr_value_array(&V),
                      cr_fn_sin},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_construct, ca, 6, &y), CR_OK);
    const wide *wy = y.u.obj.ptr;
    assert_int_equal(wy->k, -7);
    assert_true(wy->on);
    ASSERT_DBL(wy->w, 0.25);
    assert_ptr_equal(wy->v.data, v);
    assert_ptr_equal(wy->fn, cr_fn_sin.u.func.fn);
    /* a bool into the int field is 0 or 1 */
    ca[1] = cr_value_bool(true);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_construct, ca, 6, &y), CR_OK);
    assert_int_equal(((const wide *)y.u.obj.ptr)->k, 1);
    cr_test_report r;
    assert_int_equal(cr_test_rrule(fx->arena, NULL, &cr_fn_construct, ca, 6, &r), CR_OK);
    expect_pass(fx, CR_OK, &r, "construct rrule (wide)");
    assert_int_equal(cr_test_frule(fx->arena, NULL, &cr_fn_construct, ca, 6, &r), CR_OK);
    expect_pass(fx, CR_OK, &r, "construct frule (wide)");
    /* getfield of the float field from a struct of every kind, against differences */
    cr_value ga[2] = {y, cr_value_i64(2)};
    assert_int_equal(cr_test_rrule(fx->arena, NULL, &cr_fn_getfield, ga, 2, &r), CR_OK);
    expect_pass(fx, CR_OK, &r, "getfield rrule (wide)");
    /* refusals */
    cr_value sa[3] = {y, cr_value_i64(0), cr_value_i64((int64_t)1 << 40)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setfield_bang, sa, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "1099511627776 does not fit the int field 'k' of wide");
    sa[1] = cr_value_i64(1);
    sa[2] = cr_value_f64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setfield_bang, sa, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "field 'on' of wide");
    sa[1] = cr_value_i64(3);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setfield_bang, sa, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "field 'v' of wide");
    sa[1] = cr_value_i64(4);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_setfield_bang, sa, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "field 'fn' of wide");
    /* a field index that is not an integer, a value that is not a struct */
    ga[1] = cr_value_f64(1);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getfield, ga, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "getfield: the field index is a");
    ga[0] = cr_value_f64(1);
    ga[1] = cr_value_i64(0);
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_getfield, ga, 2, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "is not a described struct");
    cr_ctx_clear_error(fx->ctx);
}

/* ---- MutableTangent -----------------------------------------------------------------------------
 */

static void test_mutable_tangent(void **state)
{
    fixture *fx = *state;
    static const char *const xn[] = {"x"};
    cr_tangent v = cr_tangent_f64(1.5), mt;
    assert_int_equal(cr_mutable_tangent(fx->arena, &pt_type, xn, &v, 1, &mt), CR_OK);
    /* every field present: the ones not given are ZeroTangent */
    for (size_t i = 0; i < 3; i++)
        assert_true(cr_tangent_field_present(mt, i));
    cr_tangent copy = mt; /* a copy shares the fields, as a reference does */
    assert_int_equal(cr_mutable_tangent_setproperty(fx->arena, mt, "x", cr_tangent_f64(10.0)),
                     CR_OK);
    assert_int_equal(cr_tangent_field(copy, 0).tag, CR_TAN_F64);
    ASSERT_DBL(cr_tangent_field(copy, 0).u.f64, 10.0);
    assert_int_equal(cr_mutable_tangent_setfield(fx->arena, copy, 1, cr_tangent_f64(20.0)), CR_OK);
    cr_tangent got;
    assert_int_equal(cr_tangent_getfield(mt, "y", &got), CR_OK);
    ASSERT_DBL(got.u.f64, 20.0);
    /* accumulation in place */
    assert_int_equal(cr_mutable_tangent_accumfield(fx->arena, mt, 1, cr_tangent_f64(0.5)), CR_OK);
    ASSERT_DBL(cr_tangent_field(copy, 1).u.f64, 20.5);
    /* the algebra reads it as a structural tangent; its results are new */
    cr_tangent sum;
    assert_int_equal(cr_tangent_add(fx->arena, mt, mt, &sum), CR_OK);
    ASSERT_DBL(cr_tangent_field(sum, 0).u.f64, 20.0);
    assert_int_equal(cr_mutable_tangent_setfield(fx->arena, mt, 0, cr_tangent_f64(1.0)), CR_OK);
    ASSERT_DBL(cr_tangent_field(sum, 0).u.f64, 20.0);
    /* assignment from a Tangent (absent fields become zeros) and from a zero */
    static const char *const yn[] = {"y"};
    cr_tangent yv = cr_tangent_f64(-4.0), t;
    assert_int_equal(cr_tangent_struct(fx->arena, &pt_type, yn, &yv, 1, &t), CR_OK);
    assert_int_equal(cr_mutable_tangent_assign(fx->arena, mt, t), CR_OK);
    assert_true(cr_tangent_is_zero(cr_tangent_field(copy, 0)));
    ASSERT_DBL(cr_tangent_field(copy, 1).u.f64, -4.0);
    assert_int_equal(cr_mutable_tangent_assign(fx->arena, mt, cr_tangent_zero()), CR_OK);
    assert_true(cr_tangent_is_zero(cr_tangent_field(copy, 1)));
    /* the zero MutableTangent of a value */
    cpt c = {0};
    cr_value cv = cr_value_struct(&cpt_type, &c);
    cr_tangent zc;
    assert_int_equal(cr_mutable_tangent_zero_of(fx->arena, &cv, &zc), CR_OK);
    assert_int_equal(
        cr_mutable_tangent_setproperty(fx->arena, zc, "z", cr_tangent_c128(CMPLX(1, 2))), CR_OK);
    /* errors: nothing to write into, a wrong kind, a wrong field */
    assert_int_equal(cr_mutable_tangent_setfield(fx->arena, cr_tangent_zero(), 0, v), CR_ETANGENT);
    assert_int_equal(
        cr_mutable_tangent_setfield(fx->arena, cr_tangent_struct_empty(&pt_type), 0, v),
        CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "not a MutableTangent");
    assert_int_equal(cr_mutable_tangent_setfield(fx->arena, mt, 0, cr_tangent_c128(CMPLX(0, 1))),
                     CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "field 'x' of pt");
    assert_int_equal(cr_mutable_tangent_setfield(fx->arena, mt, 2, v), CR_ETANGENT);
    assert_int_equal(cr_mutable_tangent_setfield(fx->arena, mt, 3, v), CR_EINVAL);
    assert_int_equal(cr_mutable_tangent_setproperty(fx->arena, mt, "w", v), CR_EINVAL);
    assert_int_equal(cr_mutable_tangent_setfield(fx->arena, zc, 2, t), CR_OK); /* Tangent{pt} */
    assert_int_equal(cr_mutable_tangent_setfield(fx->arena, zc, 2, zc), CR_ETANGENT);
    assert_int_equal(cr_mutable_tangent_assign(fx->arena, mt, zc), CR_ETANGENT);
    cr_value notstruct = cr_value_f64(1);
    assert_int_equal(cr_mutable_tangent_zero_of(fx->arena, &notstruct, &zc), CR_EINVAL);
    cr_tangent bad = cr_tangent_c128(CMPLX(0, 1));
    assert_int_equal(cr_mutable_tangent(fx->arena, &pt_type, xn, &bad, 1, &t), CR_ETANGENT);
    cr_ctx_clear_error(fx->ctx);
}

/* ---- A program with a mutation, against finite differences --------------------------------- */

/*
 * prog(a, b, x):
 *     s = construct(pt, a, b, 3)
 *     setfield!(s, x, x * s.y)         -- in place
 *     return s.x * s.y + sin(s.x)
 */
static cr_status prog_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    double a = args[0].u.f64, b = args[1].u.f64, x = args[2].u.f64;
    pt s = {a, b, 3};
    (void)s.x;
    s.x = x * s.y;
    *out = cr_value_f64(s.x * s.y + sin(s.x));
    return CR_OK;
}
static const cr_function prog_fn = {"prog", 3, prog_primal, NULL, NULL, 0};

static double num(cr_tangent t)
{
    assert_int_equal(cr_tangent_unthunk(t, &t), CR_OK);
    if (cr_tangent_is_zero(t))
        return 0;
    assert_int_equal(t.tag, CR_TAN_F64);
    return t.u.f64;
}

static void test_program_forward(void **state)
{
    fixture *fx = *state;
    double a = 0.7, b = -1.3, x = 0.4;
    double da = 0.25, db = -0.5, dxv = 1.5; /* direction */
    /* s = construct(pt, a, b, 3): its tangent becomes s's MutableTangent */
    pt w = {0};
    cr_value ca[4] = {cr_value_struct(&pt_type, &w), cr_value_f64(a), cr_value_f64(b),
                      cr_value_i64(3)};
    cr_tangent cd[5] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_f64(da),
                        cr_tangent_f64(db), cr_tangent_none()};
    cr_value s;
    cr_tangent ds;
    assert_int_equal(cr_frule(NULL, fx->arena, cd, &cr_fn_construct, ca, 4, &s, &ds), CR_OK);
    cr_tangent ms;
    assert_int_equal(cr_mutable_tangent(fx->arena, &pt_type, NULL, ds.u.s.fields, 3, &ms), CR_OK);
    /* v = s.y; t = x * v */
    cr_value ga[2] = {s, cr_value_i64(1)}, v;
    cr_tangent gd[3] = {cr_tangent_none(), ms, cr_tangent_none()}, dv;
    assert_int_equal(cr_frule(NULL, fx->arena, gd, &cr_fn_getfield, ga, 2, &v, &dv), CR_OK);
    double t = x * v.u.f64, dt = dxv * v.u.f64 + x * num(dv);
    /* setfield!(s, 0, t) in place: s's memory and its MutableTangent */
    cr_value sa[3] = {s, cr_value_i64(0), cr_value_f64(t)};
    cr_tangent sd[4] = {cr_tangent_none(), ms, cr_tangent_none(), cr_tangent_f64(dt)};
    assert_int_equal(cr_setfield_frule(NULL, fx->arena, sa, sd, 3), CR_OK);
    ASSERT_DBL(((const pt *)s.u.obj.ptr)->x, t);
    ASSERT_DBL(num(cr_tangent_field(ms, 0)), dt); /* setproperty!(ṡ, :x, ṫ) */
    /* out = s.x * s.y + sin(s.x) */
    cr_value g0[2] = {s, cr_value_i64(0)}, g1[2] = {s, cr_value_i64(1)}, sx, sy;
    cr_tangent dsx, dsy;
    assert_int_equal(cr_frule(NULL, fx->arena, gd, &cr_fn_getfield, g0, 2, &sx, &dsx), CR_OK);
    assert_int_equal(cr_frule(NULL, fx->arena, gd, &cr_fn_getfield, g1, 2, &sy, &dsy), CR_OK);
    double dout = num(dsx) * sy.u.f64 + sx.u.f64 * num(dsy) + cos(sx.u.f64) * num(dsx);
    /* finite differences of the whole program along the direction */
    cr_value f = cr_value_function(&prog_fn, NULL);
    cr_value pa[3] = {cr_value_f64(a), cr_value_f64(b), cr_value_f64(x)};
    cr_tangent g[3];
    assert_int_equal(cr_fd_grad(fx->arena, NULL, NULL, &f, pa, 3, g), CR_OK);
    double want = num(g[0]) * da + num(g[1]) * db + num(g[2]) * dxv;
    ASSERT_CLOSE(dout, want, 1e-8);
    /* the tangent was not a MutableTangent: refused, nothing written */
    pt before = *(const pt *)s.u.obj.ptr;
    sd[1] = cr_tangent_struct_empty(&pt_type);
    assert_int_equal(cr_setfield_frule(NULL, fx->arena, sa, sd, 3), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(fx->ctx), "MutableTangent of pt");
    assert_memory_equal(&before, s.u.obj.ptr, sizeof before);
    cr_ctx_clear_error(fx->ctx);
}

static void test_program_reverse(void **state)
{
    fixture *fx = *state;
    double a = 0.7, b = -1.3, x = 0.4;
    pt w = {0};
    cr_value ca[4] = {cr_value_struct(&pt_type, &w), cr_value_f64(a), cr_value_f64(b),
                      cr_value_i64(3)};
    cr_value s, v, sx, sy;
    cr_pullback p_con, p_v, p_set, p_sx, p_sy;
    /* the forward sweep, recording pullbacks */
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_construct, ca, 4, &s, &p_con), CR_OK);
    cr_value ga[2] = {s, cr_value_i64(1)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_getfield, ga, 2, &v, &p_v), CR_OK);
    double t = x * v.u.f64;
    cr_value sa[3] = {s, cr_value_i64(0), cr_value_f64(t)};
    assert_int_equal(cr_setfield_rrule(NULL, fx->arena, sa, 3, &p_set), CR_OK);
    cr_value g0[2] = {s, cr_value_i64(0)}, g1[2] = {s, cr_value_i64(1)};
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_getfield, g0, 2, &sx, &p_sx), CR_OK);
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_getfield, g1, 2, &sy, &p_sy), CR_OK);
    /* the reverse sweep: s's adjoint is a MutableTangent, accumulated and replaced in place */
    cr_tangent ms;
    assert_int_equal(cr_mutable_tangent_zero_of(fx->arena, &s, &ms), CR_OK);
    cr_tangent sxbar = cr_tangent_f64(sy.u.f64 + cos(sx.u.f64)), sybar = cr_tangent_f64(sx.u.f64);
    cr_tangent d[5];
    assert_int_equal(cr_pullback_call(fx->arena, &p_sy, &sybar, d, 3), CR_OK);
    assert_int_equal(cr_tangent_accum(fx->arena, ms, d[1], &d[1]), CR_OK);
    assert_int_equal(cr_mutable_tangent_assign(fx->arena, ms, d[1]), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &p_sx, &sxbar, d, 3), CR_OK);
    assert_int_equal(cr_mutable_tangent_accumfield(fx->arena, ms, 0, cr_tangent_field(d[1], 0)),
                     CR_OK);
    /* setfield!'s pullback takes the adjoint after the call and gives the one before */
    assert_int_equal(cr_pullback_call(fx->arena, &p_set, &ms, d, 4), CR_OK);
    double tbar = num(d[3]);
    assert_int_equal(cr_mutable_tangent_assign(fx->arena, ms, d[1]), CR_OK);
    assert_true(cr_tangent_is_zero(cr_tangent_field(ms, 0))); /* x was overwritten */
    /* t = x * v */
    double xbar = tbar * v.u.f64, vbar = tbar * x;
    cr_tangent vb = cr_tangent_f64(vbar);
    assert_int_equal(cr_pullback_call(fx->arena, &p_v, &vb, d, 3), CR_OK);
    assert_int_equal(cr_mutable_tangent_accumfield(fx->arena, ms, 1, cr_tangent_field(d[1], 1)),
                     CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &p_con, &ms, d, 5), CR_OK);
    double abar = num(d[2]), bbar = num(d[3]);
    assert_int_equal(d[4].tag, CR_TAN_NONE); /* the integer field's value */
    cr_value f = cr_value_function(&prog_fn, NULL);
    cr_value pa[3] = {cr_value_f64(a), cr_value_f64(b), cr_value_f64(x)};
    cr_tangent g[3];
    assert_int_equal(cr_fd_grad(fx->arena, NULL, NULL, &f, pa, 3, g), CR_OK);
    ASSERT_CLOSE(abar, num(g[0]), 1e-8);
    ASSERT_CLOSE(bbar, num(g[1]), 1e-8);
    ASSERT_CLOSE(xbar, num(g[2]), 1e-8);
    ASSERT_DBL(abar, 0.0); /* a never reaches the result: overwritten */
}

/* ---- Allocation failures ------------------------------------------------------------------- */

/* Each rule's rrule, pullback and frule, and the in-place setfield!, in fixed arenas of
 * growing size: every run short of room fails with CR_EARENA (nothing written in place),
 * and the first that fits gives the result of a growable arena. */
static void test_arena_full(void **state)
{
    fixture *fx = *state;
    cpt c; /* its padding zeroed: whole structs are compared */
    memset(&c, 0, sizeof c);
    c.z = CMPLX(0.5, -1.25);
    c.s = 0.75f;
    c.p = (pt){1.5, -2.0, 4};
    pt w = {0};
    cr_value g[2] = {cr_value_struct(&cpt_type, &c), cr_value_i64(2)};
    cr_value st3[3] = {cr_value_struct(&cpt_type, &c), cr_value_i64(0), cr_value_f64(2.0)};
    cr_value co[4] = {cr_value_struct(&pt_type, &w), cr_value_f64(1), cr_value_f64(2),
                      cr_value_i64(3)};
    const struct {
        const cr_value *f;
        const cr_value *args;
        size_t n;
    } calls[] = {
        {&cr_fn_getfield, g, 2}, {&cr_fn_setfield_bang, st3, 3}, {&cr_fn_construct, co, 4}};
    for (size_t k = 0; k < 3; k++) {
        cr_value want;
        cr_pullback pb;
        assert_int_equal(
            cr_rrule(NULL, fx->arena, calls[k].f, calls[k].args, calls[k].n, &want, &pb), CR_OK);
        cr_tangent seed, dx[5], dy, dargs[5];
        assert_int_equal(cr_tangent_zero_of(fx->arena, &want, &seed), CR_OK);
        assert_int_equal(cr_tangent_accum(fx->arena, seed, seed, &seed), CR_OK);
        for (size_t j = 0; j <= calls[k].n; j++)
            dargs[j] = cr_tangent_zero();
        size_t fits = 0;
        for (size_t size = 64; fits == 0; size += 32) {
            void *buf = malloc(size);
            cr_arena *a;
            cr_arena_params ap = {.struct_size = sizeof ap, .buffer = buf, .buffer_size = size};
            assert_non_null(buf);
            assert_int_equal(cr_arena_new(fx->ctx, &ap, &a), CR_OK);
            cr_value y;
            cr_status st = cr_rrule(NULL, a, calls[k].f, calls[k].args, calls[k].n, &y, &pb);
            if (st == CR_OK && seed.tag != CR_TAN_NONE)
                st = cr_pullback_call(a, &pb, &seed, dx, calls[k].n + 1);
            if (st == CR_OK)
                st = cr_frule(NULL, a, dargs, calls[k].f, calls[k].args, calls[k].n, &y, &dy);
            if (st == CR_OK) {
                fits = size;
                if (want.kind == CR_KIND_STRUCT)
                    assert_memory_equal(y.u.obj.ptr, want.u.obj.ptr, want.u.obj.type->size);
            } else if (st != CR_EARENA) {
                print_error("%s: %s with %zu bytes\n", calls[k].f->u.func.fn->name,
                            cr_status_name(st), size);
                fail();
            }
            cr_arena_free(a);
            free(buf);
        }
        assert_true(fits > 64); /* some runs were short of room */
        cr_ctx_clear_error(fx->ctx);
    }
    /* in place: a failed run leaves the struct and its MutableTangent as they were */
    cr_tangent mt;
    cr_value obj = st3[0];
    assert_int_equal(cr_mutable_tangent_zero_of(fx->arena, &obj, &mt), CR_OK);
    cr_tangent sd[4] = {cr_tangent_none(), mt, cr_tangent_none(), cr_tangent_f64(0.5)};
    cpt before = c;
    size_t failures = 0;
    for (size_t size = 64;; size += 32) {
        void *buf = malloc(size);
        cr_arena *a;
        cr_arena_params ap = {.struct_size = sizeof ap, .buffer = buf, .buffer_size = size};
        assert_non_null(buf);
        assert_int_equal(cr_arena_new(fx->ctx, &ap, &a), CR_OK);
        cr_status st = cr_setfield_frule(NULL, a, st3, sd, 3);
        cr_arena_free(a);
        free(buf);
        if (st == CR_OK)
            break;
        assert_int_equal(st, CR_EARENA);
        failures++;
        assert_memory_equal(&before, &c, sizeof c);
        assert_true(cr_tangent_is_zero(cr_tangent_field(mt, 0)) ||
                    (cr_tangent_field(mt, 0).tag == CR_TAN_C128 &&
                     creal(cr_tangent_field(mt, 0).u.c128) == 0));
    }
    assert_true(failures > 0);
    ASSERT_DBL(creal(c.z), 2.0);
    assert_int_equal(cr_tangent_field(mt, 0).tag, CR_TAN_F64);
    ASSERT_DBL(cr_tangent_field(mt, 0).u.f64, 0.5);
    cr_ctx_clear_error(fx->ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rules_at_points, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_field_kinds, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mutable_tangent, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_program_forward, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_program_reverse, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_full, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
