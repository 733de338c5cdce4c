/*
 * Coverage of the rule interface's less travelled paths: scalar-table rows (primal and
 * partials errors, invalid rows, tangents and cotangents that are NotImplemented, arrays or
 * failing thunks, zero tuple cotangents), the registry (argument kinds of bool arrays and
 * of nothing, struct-or-number matchers of two types, more arguments than the lookup memo
 * keeps, duplicates with capabilities, intersections next to a variadic rule, NULL
 * registries, struct_size, more matching rules than dispatch ranks) and the frule/rrule
 * entry points (NULL arguments, pullbacks failing without a message, debug-mode
 * projectors of bad primals, rules leaving nx to the library, non-differentiable
 * functions whose primal fails).
 *
 * Then malformed user frules met by the forward sweep of a second-order tape (a non-tuple
 * tangent for a tuple result, thunks, failing thunks, tangents of the wrong kind, a failing
 * frule after a successful rrule): each gives a clear status and a message naming the
 * function, and the tape records and sweeps again after a reset.
 *
 * Derivatives are checked against central differences of plain C functions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <tgmath.h> /* before scalar_rule.h: the row bodies below are type-generic */

#include <chainrules.h>

#include "test_util.h"

static void expect_msg(fixture *f, const char *sub)
{
    assert_contains(cr_ctx_errmsg(f->ctx), sub);
    cr_ctx_clear_error(f->ctx);
}

static cr_registry *new_registry(fixture *f)
{
    cr_registry *reg = NULL;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    return reg;
}

static cr_status failing_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)out;
    (void)env;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "cov_failing_thunk: no value here");
}

static cr_tangent failing_thunk(cr_arena *arena)
{
    cr_tangent t = cr_tangent_zero();
    assert_int_equal(cr_tangent_thunk(arena, failing_thunk_fn, NULL, "cov_failing", &t), CR_OK);
    return t;
}

static cr_status value_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    *out = *(const cr_tangent *)env;
    return CR_OK;
}

static cr_tangent value_thunk(cr_arena *arena, cr_tangent v)
{
    cr_tangent *env = cr_arena_alloc(arena, sizeof *env, _Alignof(cr_tangent));
    assert_non_null(env);
    *env = v;
    cr_tangent t = cr_tangent_zero();
    assert_int_equal(cr_tangent_thunk(arena, value_thunk_fn, env, "cov_value", &t), CR_OK);
    return t;
}

static const cr_notimpl k_ni = {"cov_rules.c", 3, "cov: not written"};

/* ---- Scalar rows ------------------------------------------------------------------------- */

CR_SCALAR_EVALS(cov_cube, 1, 1, Y[0] = x[0] * x[0] * x[0], D[0] = 3 * x[0] * x[0])
static const cr_scalar_rule cov_cube_row = CR_SCALAR_ROW(cov_cube);
static const cr_function cov_cube_fn = CR_SCALAR_FUNCTION("cov_cube", cov_cube_row, 1);

CR_SCALAR_EVALS_REAL(cov_rsq, 1, 1, Y[0] = x[0] * x[0], D[0] = 2 * x[0])
static const cr_scalar_rule cov_rsq_row = CR_SCALAR_ROW_REAL(cov_rsq);
static const cr_function cov_rsq_fn = CR_SCALAR_FUNCTION("cov_rsq", cov_rsq_row, 1);

/* (x², x³): a tuple result */
CR_SCALAR_EVALS(cov_pw, 1, 2, (Y[0] = x[0] * x[0], Y[1] = x[0] * x[0] * x[0]), D[0] = 2 * x[0],
                D[1] = 3 * x[0] * x[0])
static const cr_scalar_rule cov_pw_row = CR_SCALAR_ROW(cov_pw);
static const cr_function cov_pw_fn = CR_SCALAR_FUNCTION("cov_pw", cov_pw_row, 1);

static double cube_c(double x)
{
    return x * x * x;
}

static double sq_c(double x)
{
    return x * x;
}

static double cd(double (*g)(double), double x)
{
    const double h = 1e-6;
    return (g(x + h) - g(x - h)) / (2 * h);
}

static cr_status plain_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)f;
    (void)nargs;
    *out = args[0];
    return CR_OK;
}

static const cr_function cov_plain_fn = {.name = "cov_plain", .arity = 1, .primal = plain_primal};

static void test_scalar_primal_errors(void **state)
{
    fixture *f = *state;
    cr_value fc = cr_value_function(&cov_cube_fn, NULL);
    cr_value two[2] = {cr_value_f64(1.0), cr_value_f64(2.0)}, out;
    assert_int_equal(cr_scalar_primal(f->arena, &fc, two, 2, &out), CR_EINVAL);
    expect_msg(f, "cov_cube takes 1 argument, 2 given");
    cr_value fr = cr_value_function(&cov_rsq_fn, NULL);
    cr_value z = cr_value_c128(CMPLX(1, 1));
    assert_int_equal(cr_scalar_primal(f->arena, &fr, &z, 1, &out), CR_EDOMAIN);
    expect_msg(f, "cov_rsq is defined for real arguments only");
    cr_value fp = cr_value_function(&cov_plain_fn, NULL);
    assert_int_equal(cr_scalar_primal(f->arena, &fp, two, 1, &out), CR_EINVAL);
    expect_msg(f, "cov_plain is not a scalar-table function");
    /* the same calls with good arguments */
    cr_value x = cr_value_f64(1.3);
    assert_int_equal(cr_scalar_primal(f->arena, &fc, &x, 1, &out), CR_OK);
    assert_int_equal(out.kind, CR_KIND_F64);
    assert_close(out.u.f64, cube_c(1.3), 1e-15);
    assert_int_equal(cr_scalar_primal(f->arena, &fr, &x, 1, &out), CR_OK);
    assert_close(out.u.f64, sq_c(1.3), 1e-15);
}

static void test_scalar_partials_c128(void **state)
{
    (void)state;
    cr_complex x = CMPLX(0.7, -0.4), Y, D;
    assert_int_equal(cr_scalar_partials_c128(&cov_rsq_row, &x, &Y, &D), CR_EDOMAIN);
    assert_int_equal(cr_scalar_partials_c128(&cov_cube_row, &x, &Y, &D), CR_OK);
    /* the holomorphic derivative: central differences along the real axis */
    const double h = 1e-6;
    cr_complex fd = ((x + h) * (x + h) * (x + h) - (x - h) * (x - h) * (x - h)) / (2 * h);
    assert_close(creal(D), creal(fd), 1e-8);
    assert_close(cimag(D), cimag(fd), 1e-8);
}

static void test_scalar_register_invalid(void **state)
{
    fixture *f = *state;
    cr_registry *reg = new_registry(f);
    assert_int_equal(cr_scalar_rule_register(NULL, &cov_cube_fn, &cov_cube_row), CR_EINVAL);
    cr_scalar_rule bad = cov_cube_row;
    bad.nin = 0;
    assert_int_equal(cr_scalar_rule_register(reg, &cov_cube_fn, &bad), CR_EINVAL);
    expect_msg(f, "invalid scalar rule row");
    bad = cov_cube_row;
    bad.nout = CR_SCALAR_MAX_OUT + 1;
    assert_int_equal(cr_scalar_rule_register(reg, &cov_cube_fn, &bad), CR_EINVAL);
    expect_msg(f, "invalid scalar rule row");
    bad = cov_cube_row;
    bad.f64 = NULL;
    assert_int_equal(cr_scalar_rule_register(reg, &cov_cube_fn, &bad), CR_EINVAL);
    expect_msg(f, "invalid scalar rule row");
    assert_int_equal(cr_registry_size(reg), 0);
    assert_int_equal(cr_scalar_rule_register(reg, &cov_cube_fn, &cov_cube_row), CR_OK);
    assert_int_equal(cr_registry_size(reg), 1);
    cr_registry_free(reg);
}

/* frule: tangents that are NotImplemented, arrays or failing thunks; then a thunk that
 * works, against central differences. */
static void test_scalar_frule_tangents(void **state)
{
    fixture *f = *state;
    cr_registry *reg = new_registry(f);
    assert_int_equal(cr_scalar_rule_register(reg, &cov_cube_fn, &cov_cube_row), CR_OK);
    cr_config cfg = {.registry = reg};
    cr_value fc = cr_value_function(&cov_cube_fn, NULL), x = cr_value_f64(1.3), y;
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_notimpl(&k_ni)}, dy;
    assert_int_equal(cr_frule(&cfg, f->arena, dargs, &fc, &x, 1, &y, &dy), CR_EUNIMPL);
    expect_msg(f, "cov_cube: tangent is NotImplemented (cov_rules.c:3: cov: not written)");
    double d[2] = {1, 2};
    cr_array a = cr_array_vector(d, 2);
    dargs[1] = cr_tangent_array(&a);
    assert_int_equal(cr_frule(&cfg, f->arena, dargs, &fc, &x, 1, &y, &dy), CR_ETANGENT);
    expect_msg(f, "cov_cube: expected a scalar tangent, got array");
    dargs[1] = failing_thunk(f->arena);
    assert_int_equal(cr_frule(&cfg, f->arena, dargs, &fc, &x, 1, &y, &dy), CR_EDOMAIN);
    expect_msg(f, "cov_failing_thunk");
    dargs[1] = value_thunk(f->arena, cr_tangent_f64(0.5));
    assert_int_equal(cr_frule(&cfg, f->arena, dargs, &fc, &x, 1, &y, &dy), CR_OK);
    assert_int_equal(dy.tag, CR_TAN_F64);
    assert_close(dy.u.f64, 0.5 * cd(cube_c, 1.3), 1e-8);
    cr_registry_free(reg);
}

/* The rule functions called directly (through the matched definition) with arguments the
 * row refuses: a complex argument of a real-only row, a wrong count. */
static void test_scalar_rule_fns_refuse(void **state)
{
    fixture *f = *state;
    cr_registry *reg = new_registry(f);
    assert_int_equal(cr_scalar_rule_register(reg, &cov_rsq_fn, &cov_rsq_row), CR_OK);
    cr_value fr = cr_value_function(&cov_rsq_fn, NULL), x = cr_value_f64(1.0);
    cr_rule_match m;
    assert_int_equal(cr_registry_lookup(reg, NULL, CR_MODE_FRULE, &fr, &x, 1, &m), CR_OK);
    const cr_rule_def *def = m.def;
    assert_non_null(def);
    cr_value z = cr_value_c128(CMPLX(1, 1)), y;
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(1.0)}, dy;
    assert_int_equal(def->frule(NULL, f->arena, dargs, &fr, &z, 1, &y, &dy, def->udata),
                     CR_EDOMAIN);
    expect_msg(f, "cov_rsq is defined for real arguments only");
    cr_pullback pb;
    assert_int_equal(def->rrule(NULL, f->arena, &fr, &z, 1, &y, &pb, def->udata), CR_EDOMAIN);
    expect_msg(f, "cov_rsq is defined for real arguments only");
    cr_value two[2] = {x, x};
    assert_int_equal(def->rrule(NULL, f->arena, &fr, two, 2, &y, &pb, def->udata), CR_EINVAL);
    expect_msg(f, "cov_rsq takes 1 argument, 2 given");
    cr_registry_free(reg);
}

/* Pullbacks: NotImplemented and failing-thunk cotangents; a zero tuple cotangent gives
 * zero; a tuple cotangent with one zero element, against central differences. */
static void test_scalar_pullback_cotangents(void **state)
{
    fixture *f = *state;
    cr_registry *reg = new_registry(f);
    assert_int_equal(cr_scalar_rule_register(reg, &cov_cube_fn, &cov_cube_row), CR_OK);
    assert_int_equal(cr_scalar_rule_register(reg, &cov_pw_fn, &cov_pw_row), CR_OK);
    cr_config cfg = {.registry = reg};
    cr_value fc = cr_value_function(&cov_cube_fn, NULL), x = cr_value_f64(1.3), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, f->arena, &fc, &x, 1, &y, &pb), CR_OK);
    cr_tangent dy = cr_tangent_notimpl(&k_ni), dx[2];
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_EUNIMPL);
    expect_msg(f, "cov_cube_pullback: tangent is NotImplemented");
    dy = failing_thunk(f->arena);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_EDOMAIN);
    expect_msg(f, "cov_failing_thunk");
    dy = value_thunk(f->arena, cr_tangent_f64(2.0));
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    assert_close(dx[1].u.f64, 2.0 * cd(cube_c, 1.3), 1e-8);

    cr_value fp = cr_value_function(&cov_pw_fn, NULL);
    assert_int_equal(cr_rrule(&cfg, f->arena, &fp, &x, 1, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    cr_tangent zz[2] = {cr_tangent_zero(), cr_tangent_zero()};
    assert_int_equal(cr_tangent_struct(f->arena, y.u.obj.type, NULL, zz, 2, &dy), CR_OK);
    dx[1] = cr_tangent_f64(9.0);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NONE);
    assert_int_equal(dx[1].tag, CR_TAN_ZERO);
    cr_tangent one0[2] = {cr_tangent_f64(1.0), cr_tangent_zero()};
    assert_int_equal(cr_tangent_struct(f->arena, y.u.obj.type, NULL, one0, 2, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F64);
    assert_close(dx[1].u.f64, cd(sq_c, 1.3), 1e-8);
    cr_registry_free(reg);
}

/* ---- The registry ------------------------------------------------------------------------ */

static cr_status id_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                          const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                          cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)f;
    (void)nargs;
    (void)udata;
    *y = args[0];
    *dy = dargs[1];
    return CR_OK;
}

static cr_status id_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    (void)arena;
    (void)env;
    dx[0] = cr_tangent_none();
    for (size_t i = 1; i < nx; i++)
        dx[i] = i == 1 ? *dy : cr_tangent_zero();
    return CR_OK;
}

/* rrule of the identity in its first argument; leaves nx to the library. */
static cr_status id_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                          const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)f;
    (void)nargs;
    (void)udata;
    *y = args[0];
    pb->fn = id_pullback;
    pb->env = NULL;
    pb->name = "cov_id_pullback";
    return CR_OK;
}

static const cr_function cov_f = {.name = "cov_f", .arity = -1, .primal = plain_primal};

static cr_rule_def def_of(const cr_function *fn, const cr_argspec *args, size_t nargs,
                          bool variadic, const void *udata)
{
    cr_rule_def d = {0};
    d.fn = fn;
    d.args = args;
    d.nargs = nargs;
    d.variadic = variadic;
    d.frule = id_frule;
    d.rrule = id_rrule;
    d.udata = udata;
    return d;
}

/* The udata of the rule lookup finds for args (NULL when none). */
static const void *found(const cr_registry *reg, const cr_value *args, size_t nargs)
{
    cr_value fv = cr_value_function(&cov_f, NULL);
    cr_rule_match m = {0};
    cr_status st = cr_registry_lookup(reg, NULL, CR_MODE_RRULE, &fv, args, nargs, &m);
    if (st != CR_OK)
        return NULL;
    return m.def->udata;
}

static void test_argspec_kinds(void **state)
{
    fixture *f = *state;
    bool bv[2] = {true, false};
    size_t n = 2;
    cr_array ba;
    assert_int_equal(cr_array_view_init(&ba, bv, CR_DT_BOOL, 1, &n, NULL), CR_OK);
    cr_value v = cr_value_array(&ba);
    assert_int_equal(cr_argspec_of(&v).mask, CR_M_A_BOOL);
    cr_value nothing = {.kind = CR_KIND_NOTHING};
    assert_int_equal(cr_argspec_of(&nothing).mask, CR_M_NOTHING);
    /* dispatch on them */
    cr_registry *reg = new_registry(f);
    static const int tag_b = 1, tag_n = 2;
    cr_argspec sb = {CR_M_A_BOOL, NULL}, sn = {CR_M_NOTHING, NULL};
    cr_rule_def d = def_of(&cov_f, &sb, 1, false, &tag_b);
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    d = def_of(&cov_f, &sn, 1, false, &tag_n);
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    assert_ptr_equal(found(reg, &v, 1), &tag_b);
    assert_ptr_equal(found(reg, &nothing, 1), &tag_n);
    int64_t iv[2] = {1, 2};
    cr_array ia;
    assert_int_equal(cr_array_view_init(&ia, iv, CR_DT_I64, 1, &n, NULL), CR_OK);
    cr_value vi = cr_value_array(&ia);
    assert_null(found(reg, &vi, 1));
    cr_registry_free(reg);
}

typedef struct pt {
    double x;
} pt;
static const cr_field pt_fields[] = {{"x", offsetof(pt, x), CR_KIND_F64, NULL}};
static const cr_type pt_a = {"pt_a", sizeof(pt), 1, pt_fields};
static const cr_type pt_b = {"pt_b", sizeof(pt), 1, pt_fields};

/* (f64 or pt_a) and (f64 or pt_b) overlap in f64 only: ambiguous until f(f64) is there. */
static void test_struct_union_overlap(void **state)
{
    fixture *f = *state;
    static const int ta = 1, tb = 2, tf = 3;
    cr_argspec sa = {CR_M_F64 | CR_M_STRUCT, &pt_a}, sb = {CR_M_F64 | CR_M_STRUCT, &pt_b};
    cr_argspec sf = CR_ARG_F64;
    cr_registry *reg = new_registry(f);
    cr_rule_def da = def_of(&cov_f, &sa, 1, false, &ta), db = def_of(&cov_f, &sb, 1, false, &tb);
    cr_rule_def df = def_of(&cov_f, &sf, 1, false, &tf);
    assert_int_equal(cr_registry_add(reg, &da), CR_OK);
    assert_int_equal(cr_registry_add(reg, &db), CR_EINVAL);
    expect_msg(f, "is ambiguous with");
    cr_registry_free(reg);

    reg = new_registry(f);
    assert_int_equal(cr_registry_add(reg, &df), CR_OK);
    assert_int_equal(cr_registry_add(reg, &da), CR_OK);
    assert_int_equal(cr_registry_add(reg, &db), CR_OK);
    pt p = {1.0};
    cr_value x = cr_value_f64(1.0), va = cr_value_struct(&pt_a, &p),
             vb = cr_value_struct(&pt_b, &p);
    assert_ptr_equal(found(reg, &x, 1), &tf);
    assert_ptr_equal(found(reg, &va, 1), &ta);
    assert_ptr_equal(found(reg, &vb, 1), &tb);
    cr_registry_free(reg);
}

/* A call of more arguments than the lookup memo keeps is looked up each time. */
static void test_lookup_many_args(void **state)
{
    fixture *f = *state;
    static const int tv = 1, tw = 2;
    cr_argspec sf = CR_ARG_F64, sany = CR_ARG_ANY;
    cr_registry *reg = new_registry(f);
    cr_rule_def d = def_of(&cov_f, &sf, 1, true, &tv);
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    d = def_of(&cov_f, &sany, 1, true, &tw);
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    cr_value args[17];
    for (size_t i = 0; i < 17; i++)
        args[i] = cr_value_f64((double)i);
    for (int rep = 0; rep < 2; rep++) {
        assert_ptr_equal(found(reg, args, 17), &tv);
        args[16] = cr_value_i64(3);
        assert_ptr_equal(found(reg, args, 17), &tw);
        args[16] = cr_value_f64(3.0);
    }
    /* and the rule runs with them */
    cr_config cfg = {.registry = reg};
    cr_value fv = cr_value_function(&cov_f, NULL), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, f->arena, &fv, args, 17, &y, &pb), CR_OK);
    assert_int_equal(pb.nx, 18);
    cr_registry_free(reg);
}

static void test_registry_null_and_missing(void **state)
{
    fixture *f = *state;
    cr_rule_info info;
    assert_int_equal(cr_registry_no_rule(NULL, CR_MODE_FRULE, 0, &info), CR_EINVAL);
    cr_registry *reg = new_registry(f);
    cr_argspec sf = CR_ARG_F64;
    cr_rule_def d = def_of(&cov_f, &sf, 1, false, NULL);
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    assert_null(cr_registry_find(reg, "cov_no_such_function"));
    assert_ptr_equal(cr_registry_find(reg, "cov_f"), &cov_f);
    /* opt-outs and non-differentiable declarations need a registry */
    assert_int_equal(cr_registry_opt_out(NULL, CR_MODE_FRULE, &cov_f, &sf, 1, false, 0), CR_EINVAL);
    assert_int_equal(cr_registry_non_differentiable(NULL, &cov_f, &sf, 1, false), CR_EINVAL);
    assert_int_equal(cr_registry_opt_out(reg, CR_MODE_FRULE, &cov_f, &sf, 1, false, 0), CR_EINVAL);
    expect_msg(f, "already registered");
    assert_int_equal(cr_registry_size(reg), 1);
    cr_registry_free(reg);
}

static void test_registry_duplicate_with_caps(void **state)
{
    fixture *f = *state;
    cr_registry *reg = new_registry(f);
    cr_argspec sf = CR_ARG_F64;
    cr_rule_def d = def_of(&cov_f, &sf, 1, false, NULL);
    d.caps = CR_CAP_REVERSE;
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    assert_int_equal(cr_registry_add(reg, &d), CR_EINVAL);
    expect_msg(f, "rule cov_f(f64) [config caps 0x1] is already registered in this registry");
    cr_registry_free(reg);
}

/* Two overlapping fixed-arity rules next to a variadic one whose matchers at that arity
 * are their intersection: a variadic rule is no intersection (it is less specific than
 * the fixed one), so they stay ambiguous until f(f64, f64) is registered. */
static void test_intersection_next_to_variadic(void **state)
{
    fixture *f = *state;
    static const int tv = 1, ta = 2, tb = 3, ti = 4;
    cr_argspec sv[2] = {CR_ARG_F64, CR_ARG_F64};
    cr_argspec sa[2] = {{CR_M_F64 | CR_M_INT, NULL}, CR_ARG_F64};
    cr_argspec sb[2] = {CR_ARG_F64, {CR_M_F64 | CR_M_INT, NULL}};
    cr_argspec si[2] = {CR_ARG_F64, CR_ARG_F64};
    cr_registry *reg = new_registry(f);
    cr_rule_def dv = def_of(&cov_f, sv, 2, true, &tv), da = def_of(&cov_f, sa, 2, false, &ta);
    cr_rule_def db = def_of(&cov_f, sb, 2, false, &tb), di = def_of(&cov_f, si, 2, false, &ti);
    assert_int_equal(cr_registry_add(reg, &dv), CR_OK);
    assert_int_equal(cr_registry_add(reg, &da), CR_OK);
    assert_int_equal(cr_registry_add(reg, &db), CR_EINVAL);
    expect_msg(f, "register their intersection first");
    assert_int_equal(cr_registry_add(reg, &di), CR_OK);
    assert_int_equal(cr_registry_add(reg, &db), CR_OK);
    cr_value ff[3] = {cr_value_f64(1), cr_value_f64(2), cr_value_f64(3)};
    cr_value if_[2] = {cr_value_i64(1), cr_value_f64(2)},
             fi[2] = {cr_value_f64(1), cr_value_i64(2)};
    assert_ptr_equal(found(reg, ff, 2), &ti);
    assert_ptr_equal(found(reg, if_, 2), &ta);
    assert_ptr_equal(found(reg, fi, 2), &tb);
    assert_ptr_equal(found(reg, ff, 3), &tv);
    cr_registry_free(reg);
}

static void test_registry_struct_size(void **state)
{
    fixture *f = *state;
    cr_registry *reg = new_registry(f);
    cr_argspec sf = CR_ARG_F64;
    cr_rule_def d = def_of(&cov_f, &sf, 1, false, NULL);
    d.struct_size = (uint32_t)sizeof d + 8;
    assert_int_equal(cr_registry_add(reg, &d), CR_EINVAL);
    expect_msg(f, "cr_rule_def: unknown struct_size");
    assert_int_equal(cr_registry_size(reg), 0);
    d.struct_size = (uint32_t)sizeof d - 8; /* cuts the struct: refused, not read in part */
    assert_int_equal(cr_registry_add(reg, &d), CR_EINVAL);
    expect_msg(f, "cr_rule_def: unknown struct_size");
    assert_int_equal(cr_registry_size(reg), 0);
    d.struct_size = (uint32_t)sizeof d;
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    cr_registry_free(reg);
}

/* 65 rules of one signature whose capabilities are pairwise incomparable or nested all
 * apply to a configuration with every capability: more than dispatch ranks. */
static void test_too_many_candidates(void **state)
{
    fixture *f = *state;
    cr_registry *reg = new_registry(f);
    cr_argspec sf = CR_ARG_F64;
    for (uint32_t c = 1; c <= 65; c++) {
        cr_rule_def d = def_of(&cov_f, &sf, 1, false, NULL);
        d.caps = c;
        assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    }
    cr_config cfg = {.registry = reg, .caps = 0x7F};
    cr_value fv = cr_value_function(&cov_f, NULL), x = cr_value_f64(1.0), y;
    cr_tangent dx = cr_tangent_f64(1.0), dargs[2] = {cr_tangent_none(), dx}, dy;
    assert_int_equal(cr_frule(&cfg, f->arena, dargs, &fv, &x, 1, &y, &dy), CR_EMISUSE);
    expect_msg(f, "frule for cov_f(f64) is ambiguous");
    /* a configuration with one capability sees one rule */
    cfg.caps = 64;
    assert_int_equal(cr_frule(&cfg, f->arena, dargs, &fv, &x, 1, &y, &dy), CR_OK);
    ASSERT_DBL(dy.u.f64, 1.0);
    cr_registry_free(reg);
}

/* 70 rules of nested signatures (f64 < f64|f32 < ... < number) and nested capabilities
 * (1 < 3 < 7 < ...) all apply to an f64 call under every capability, and one of them is
 * the most specific of all: the f64 rule needing the most capabilities. More candidates
 * than dispatch holds at once still give it (not an "ambiguous" failure). */
static void test_many_candidates_unique_best(void **state)
{
    fixture *f = *state;
    static const uint32_t masks[5] = {CR_M_F64, CR_M_F64 | CR_M_F32, CR_M_F64 | CR_M_F32 | CR_M_INT,
                                      CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL,
                                      CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL | CR_M_C128};
    static int tags[5][14];
    cr_registry *reg = new_registry(f);
    for (size_t i = 0; i < 5; i++)
        for (uint32_t c = 1; c <= 14; c++) {
            cr_argspec s = {masks[i], NULL};
            cr_rule_def d = def_of(&cov_f, &s, 1, false, &tags[i][c - 1]);
            d.caps = (1u << c) - 1;
            assert_int_equal(cr_registry_add(reg, &d), CR_OK);
        }
    cr_config cfg = {.registry = reg, .caps = 0xFFFFFFFFu};
    cr_value fv = cr_value_function(&cov_f, NULL), x = cr_value_f64(1.0), y;
    cr_rule_match m = {0};
    assert_int_equal(cr_registry_lookup(reg, &cfg, CR_MODE_FRULE, &fv, &x, 1, &m), CR_OK);
    assert_ptr_equal(m.def->udata, &tags[0][13]);
    /* a bool argument: the most specific rule taking bools */
    cr_value b = cr_value_bool(true);
    assert_int_equal(cr_registry_lookup(reg, &cfg, CR_MODE_RRULE, &fv, &b, 1, &m), CR_OK);
    assert_ptr_equal(m.def->udata, &tags[3][13]);
    /* and through cr_frule */
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(2.0)}, dy;
    assert_int_equal(cr_frule(&cfg, f->arena, dargs, &fv, &x, 1, &y, &dy), CR_OK);
    ASSERT_DBL(dy.u.f64, 2.0);
    /* fewer capabilities: 5 x 11 candidates, ranked as before */
    cfg.caps = (1u << 11) - 1;
    assert_int_equal(cr_registry_lookup(reg, &cfg, CR_MODE_FRULE, &fv, &x, 1, &m), CR_OK);
    assert_ptr_equal(m.def->udata, &tags[0][10]);
    cr_registry_free(reg);
}

/* ---- frule / rrule entry points ---------------------------------------------------------- */

static void test_entry_point_null_arguments(void **state)
{
    fixture *f = *state;
    cr_value fv = cr_value_function(&cov_f, NULL), x = cr_value_f64(1.0), y;
    cr_tangent dy, dargs[2] = {cr_tangent_none(), cr_tangent_f64(1.0)};
    cr_pullback pb;
    assert_int_equal(cr_frule(NULL, f->arena, NULL, &fv, &x, 1, &y, &dy), CR_EINVAL);
    expect_msg(f, "frule: NULL argument");
    assert_int_equal(cr_frule(NULL, f->arena, dargs, &fv, &x, 1, NULL, &dy), CR_EINVAL);
    expect_msg(f, "frule: NULL argument");
    assert_int_equal(cr_rrule(NULL, f->arena, &fv, &x, 1, NULL, &pb), CR_EINVAL);
    expect_msg(f, "rrule: NULL argument");
    assert_int_equal(cr_rrule(NULL, f->arena, &fv, &x, 1, &y, NULL), CR_EINVAL);
    expect_msg(f, "rrule: NULL argument");
    /* function calls and pullback calls */
    assert_int_equal(cr_function_call(f->arena, &x, &x, 1, &y), CR_EINVAL);
    expect_msg(f, "cr_function_call: not a function value");
    cr_tangent one = cr_tangent_f64(1.0), dx[2];
    assert_int_equal(cr_pullback_call(f->arena, NULL, &one, dx, 2), CR_EINVAL);
    expect_msg(f, "cr_pullback_call: NULL pullback or tangents");
    pb = (cr_pullback){id_pullback, NULL, "cov_id_pullback", 2};
    assert_int_equal(cr_pullback_call(f->arena, &pb, NULL, dx, 2), CR_EINVAL);
    expect_msg(f, "cr_pullback_call: NULL pullback or tangents");
    /* via_ad without a function value names it "?" */
    assert_int_equal(cr_rrule_via_ad(NULL, f->arena, NULL, &x, 1, &y, &pb), CR_ENOCAP);
    expect_msg(f, "rrule_via_ad(?)");
    assert_int_equal(cr_frule_via_ad(NULL, f->arena, dargs, &x, &x, 1, &y, &dy), CR_ENOCAP);
    expect_msg(f, "frule_via_ad(?)");
    assert_int_equal(cr_rrule_via_ad(NULL, f->arena, &fv, &x, 1, &y, &pb), CR_ENOCAP);
    expect_msg(f, "rrule_via_ad(cov_f)");
    /* ignore_derivatives' primal takes one argument */
    cr_value ig = cr_value_function(&cr_function_ignore_derivatives, NULL), two[2] = {x, x};
    assert_int_equal(cr_function_ignore_derivatives.primal(f->arena, &ig, two, 2, &y), CR_EINVAL);
    expect_msg(f, "ignore_derivatives takes one argument");
    assert_int_equal(cr_function_call(f->arena, &ig, &x, 1, &y), CR_OK);
    ASSERT_DBL(y.u.f64, 1.0);
}

static int g_pullback_calls;

static cr_status quiet_failing_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                        cr_arena *arena, void *env)
{
    (void)dy;
    (void)dx;
    (void)nx;
    (void)arena;
    (void)env;
    g_pullback_calls++;
    return CR_EDOMAIN; /* and records no message */
}

static void test_pullback_call_paths(void **state)
{
    fixture *f = *state;
    cr_pullback pb = {quiet_failing_pullback, NULL, "cov_quiet_pullback", 2};
    cr_tangent dx[2] = {cr_tangent_f64(5.0), cr_tangent_f64(5.0)};
    /* a zero cotangent: zero cotangents out, the pullback not called */
    g_pullback_calls = 0;
    cr_tangent dy = cr_tangent_zero();
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_ZERO);
    assert_int_equal(dx[1].tag, CR_TAN_ZERO);
    dy = cr_tangent_none();
    dx[1] = cr_tangent_f64(5.0);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_ZERO);
    assert_int_equal(g_pullback_calls, 0);
    /* a failure without a message gets the status's message */
    cr_ctx_clear_error(f->ctx);
    dy = cr_tangent_f64(1.0);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_EDOMAIN);
    assert_int_equal(g_pullback_calls, 1);
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EDOMAIN);
    expect_msg(f, cr_status_str(CR_EDOMAIN));
    /* in debug mode, named in the chain of pullbacks */
    cr_ctx_set_debug(f->ctx, true);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), cr_status_str(CR_EDOMAIN));
    expect_msg(f, "in pullback cov_quiet_pullback");
    cr_ctx_set_debug(f->ctx, false);
}

static const cr_function cov_g = {.name = "cov_g", .arity = 1, .primal = plain_primal};

/* A rule leaving nx to the library; in debug mode, its projectors are built from the
 * arguments, and a struct argument without memory is refused there. */
static void test_rrule_nx_and_debug_projectors(void **state)
{
    fixture *f = *state;
    cr_registry *reg = new_registry(f);
    cr_argspec sa = CR_ARG_STRUCT(&pt_a);
    cr_rule_def d = def_of(&cov_g, &sa, 1, false, NULL);
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    cr_config cfg = {.registry = reg};
    cr_value fv = cr_value_function(&cov_g, NULL), y;
    pt p = {2.0};
    cr_value v = cr_value_struct(&pt_a, &p);
    cr_pullback pb;
    assert_int_equal(cr_rrule(&cfg, f->arena, &fv, &v, 1, &y, &pb), CR_OK);
    assert_int_equal(pb.nx, 2);
    cr_ctx_set_debug(f->ctx, true);
    cr_value vnull = cr_value_struct(&pt_a, NULL);
    assert_int_equal(cr_rrule(&cfg, f->arena, &fv, &vnull, 1, &y, &pb), CR_EINVAL);
    expect_msg(f, "ProjectTo: NULL struct or type");
    /* the same call with the struct's memory, and its checked pullback */
    assert_int_equal(cr_rrule(&cfg, f->arena, &fv, &v, 1, &y, &pb), CR_OK);
    assert_int_equal(pb.nx, 2);
    cr_tangent one = cr_tangent_f64(3.0), dy, dx[2];
    const char *names[1] = {"x"};
    assert_int_equal(cr_tangent_struct(f->arena, &pt_a, names, &one, 1, &dy), CR_OK);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    ASSERT_DBL(cr_tangent_field(dx[1], 0).u.f64, 3.0);
    cr_ctx_set_debug(f->ctx, false);
    cr_registry_free(reg);
}

static cr_status refusing_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                 size_t nargs, cr_value *out)
{
    (void)f;
    (void)args;
    (void)nargs;
    (void)out;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "cov_refusing: outside the domain");
}

static const cr_function cov_refusing = {
    .name = "cov_refusing", .arity = 1, .primal = refusing_primal};

static void test_nondiff_primal_fails(void **state)
{
    fixture *f = *state;
    cr_registry *reg = new_registry(f);
    cr_argspec sf = CR_ARG_F64;
    assert_int_equal(cr_registry_non_differentiable(reg, &cov_refusing, &sf, 1, false), CR_OK);
    assert_int_equal(cr_registry_non_differentiable(reg, &cov_g, &sf, 1, false), CR_OK);
    cr_config cfg = {.registry = reg};
    cr_value fv = cr_value_function(&cov_refusing, NULL), x = cr_value_f64(1.0), y;
    cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(1.0)}, dy;
    cr_pullback pb;
    assert_int_equal(cr_frule(&cfg, f->arena, dargs, &fv, &x, 1, &y, &dy), CR_EDOMAIN);
    expect_msg(f, "cov_refusing: outside the domain");
    assert_int_equal(cr_rrule(&cfg, f->arena, &fv, &x, 1, &y, &pb), CR_EDOMAIN);
    expect_msg(f, "cov_refusing: outside the domain");
    /* a non-differentiable function whose primal works */
    cr_value gv = cr_value_function(&cov_g, NULL);
    assert_int_equal(cr_frule(&cfg, f->arena, dargs, &gv, &x, 1, &y, &dy), CR_OK);
    assert_int_equal(dy.tag, CR_TAN_NONE);
    ASSERT_DBL(y.u.f64, 1.0);
    assert_int_equal(cr_rrule(&cfg, f->arena, &gv, &x, 1, &y, &pb), CR_OK);
    cr_registry_free(reg);
}

/* ---- Malformed user frules in the forward sweep of a second-order tape -------------------- */

/*
 * A user registry overrides extrema (a tuple result) and sum (one scalar result) for f64
 * arrays: the rrules are the built-in ones (so the records keep their second-order classes,
 * found by the functions' identity), the frules call the built-in frule and then return
 * what g_mode says.
 */
enum {
    M_OK,          /* the built-in frule's result */
    M_ZERO,        /* ZeroTangent for the whole result */
    M_SCALAR,      /* an f64 tangent for a tuple result */
    M_THUNK,       /* the result as a thunk */
    M_THUNK_ELEMS, /* each tuple element as a thunk */
    M_FAIL_ELEM,   /* a tuple element that is a failing thunk */
    M_BAD_ELEM,    /* an array tangent for a scalar tuple element */
    M_FAIL_THUNK,  /* a failing thunk for the whole result */
    M_ARRAY,       /* an array tangent for a scalar result */
    M_ERR          /* the frule fails (after the rrule succeeded at recording) */
};
static int g_mode;

static cr_status user_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cr_frule(NULL, arena, dargs, f, args, nargs, y, dy);
    if (st != CR_OK)
        return st;
    switch (g_mode) {
    case M_ZERO:
        *dy = cr_tangent_zero();
        break;
    case M_SCALAR:
        *dy = cr_tangent_f64(1.0);
        break;
    case M_THUNK:
        *dy = value_thunk(arena, *dy);
        break;
    case M_THUNK_ELEMS:
    case M_FAIL_ELEM:
    case M_BAD_ELEM: {
        assert_int_equal(dy->tag, CR_TAN_STRUCT);
        size_t n = dy->u.s.type->nfields;
        cr_tangent *fl = cr_arena_calloc(arena, n, sizeof *fl, _Alignof(cr_tangent));
        assert_non_null(fl);
        for (size_t i = 0; i < n; i++)
            fl[i] = value_thunk(arena, cr_tangent_field(*dy, i));
        if (g_mode == M_FAIL_ELEM)
            fl[0] = failing_thunk(arena);
        else if (g_mode == M_BAD_ELEM)
            fl[0] = cr_tangent_array(args[0].u.arr);
        dy->u.s.fields = fl;
        break;
    }
    case M_FAIL_THUNK:
        *dy = failing_thunk(arena);
        break;
    case M_ARRAY:
        *dy = cr_tangent_array(args[0].u.arr);
        break;
    case M_ERR:
        return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "cov_user_frule: refused");
    default:
        break;
    }
    return CR_OK;
}

static cr_status user_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    return cr_rrule(NULL, arena, f, args, nargs, y, pb);
}

typedef struct so_env {
    cr_registry *reg;
    cr_engine *eng;
    cr_tape *t;
} so_env;

static void so_setup(fixture *f, so_env *e)
{
    e->reg = new_registry(f);
    cr_argspec sa = CR_ARG_ARRAY_F64; /* copied by the registry */
    cr_rule_def d = {0};
    d.fn = cr_fn_extrema.u.func.fn;
    d.args = &sa;
    d.nargs = 1;
    d.frule = user_frule;
    d.rrule = user_rrule;
    assert_int_equal(cr_registry_add(e->reg, &d), CR_OK);
    d.fn = cr_fn_sum.u.func.fn;
    assert_int_equal(cr_registry_add(e->reg, &d), CR_OK);
    assert_int_equal(cr_engine_new(f->ctx, e->reg, &e->eng), CR_OK);
    cr_tape_params tp = {.flags = CR_TAPE_SECOND_ORDER, .engine = e->eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &e->t), CR_OK);
}

static void so_teardown(so_env *e)
{
    cr_tape_free(e->t);
    cr_engine_free(e->eng);
    cr_registry_free(e->reg);
    g_mode = M_OK;
}

#define NX 4

/* The programs: min(x) max(x) through extrema, and sum(x .^ 2) through sum. */
static double ext_c(const double *x)
{
    double lo = x[0], hi = x[0];
    for (size_t i = 1; i < NX; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    return lo * hi;
}

static double sumsq_c(const double *x)
{
    double s = 0;
    for (size_t i = 0; i < NX; i++)
        s += x[i] * x[i];
    return s;
}

static cr_var rec_ext(cr_tape *t, cr_avar X)
{
    cr_targ a = cr_targ_arr(X), r[2];
    if (cr_tape_acall_n(t, &cr_fn_extrema, &a, 1, r, 2) != CR_OK)
        return cr_const((double)NAN);
    return cr_mul(t, r[0].u.s, r[1].u.s);
}

static cr_var rec_sum(cr_tape *t, cr_avar X)
{
    cr_avar S = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(X));
    cr_targ s = cr_targ_arr(S);
    return cr_tape_acall_s(t, &cr_fn_sum, &s, 1);
}

static double g_x[NX] = {0.7, -1.3, 2.1, 0.4}; /* distinct values: extrema's choice stands */
static double g_dir[NX] = {0.5, -0.25, 1.0, 2.0};

typedef cr_var (*rec_fn)(cr_tape *t, cr_avar X);

/* Record prog at g_x on a reset tape; the J v of the sweep (status returned). */
static cr_status sweep_jvp(so_env *e, rec_fn prog, double *ydot)
{
    cr_tape_reset(e->t);
    static cr_array xa, da;
    xa = cr_array_vector(g_x, NX);
    da = cr_array_vector(g_dir, NX);
    cr_avar X = cr_tape_array_input(e->t, &xa);
    cr_var y = prog(e->t, X);
    assert_int_equal(cr_tape_status(e->t), CR_OK);
    const cr_array *adot[1] = {&da};
    *ydot = NAN;
    return cr_tape_ajvp(e->t, NULL, NULL, 0, &X, adot, 1, &y, 1, ydot, NULL, 0, NULL);
}

static double fd_jvp(double (*g)(const double *))
{
    const double h = 1e-6;
    double xp[NX], xm[NX];
    for (size_t i = 0; i < NX; i++) {
        xp[i] = g_x[i] + h * g_dir[i];
        xm[i] = g_x[i] - h * g_dir[i];
    }
    return (g(xp) - g(xm)) / (2 * h);
}

/* H v against mixed central second differences of the plain C function. */
static void check_hvp(so_env *e, rec_fn prog, double (*g)(const double *))
{
    cr_tape_reset(e->t);
    static cr_array xa, va;
    xa = cr_array_vector(g_x, NX);
    va = cr_array_vector(g_dir, NX);
    cr_avar X = cr_tape_array_input(e->t, &xa);
    cr_var y = prog(e->t, X);
    double hv[NX];
    cr_array hva = cr_array_vector(hv, NX);
    const cr_array *av[1] = {&va};
    cr_array *ahv[1] = {&hva};
    cr_status st = cr_tape_ahvp(e->t, y, NULL, 0, NULL, NULL, &X, 1, av, ahv);
    if (st != CR_OK)
        print_error("ahvp: %s\n", cr_tape_errmsg(e->t));
    assert_int_equal(st, CR_OK);
    const double h = 1e-4;
    for (size_t i = 0; i < NX; i++) {
        double pp[NX], pm[NX], mp[NX], mm[NX];
        for (size_t k = 0; k < NX; k++) {
            double ei = k == i ? h : 0.0;
            pp[k] = g_x[k] + h * g_dir[k] + ei;
            pm[k] = g_x[k] + h * g_dir[k] - ei;
            mp[k] = g_x[k] - h * g_dir[k] + ei;
            mm[k] = g_x[k] - h * g_dir[k] - ei;
        }
        double want = (g(pp) - g(pm) - g(mp) + g(mm)) / (4 * h * h);
        ASSERT_CLOSE(hv[i], want, 1e-6);
    }
}

/* A failure of the forward sweep: its status, sticky on the tape, a message naming the
 * function; then the well-formed rule works on the reset tape. */
static void expect_sweep_failure(so_env *e, rec_fn prog, double (*g)(const double *), int mode,
                                 cr_status want, const char *msg1, const char *msg2)
{
    double ydot;
    g_mode = mode;
    assert_int_equal(sweep_jvp(e, prog, &ydot), want);
    assert_int_equal(cr_tape_status(e->t), want);
    assert_contains(cr_tape_errmsg(e->t), msg1);
    if (msg2 != NULL)
        assert_contains(cr_tape_errmsg(e->t), msg2);
    g_mode = M_OK;
    assert_int_equal(sweep_jvp(e, prog, &ydot), CR_OK);
    ASSERT_CLOSE(ydot, fd_jvp(g), 1e-7);
}

static void test_so_tuple_frule_malformed(void **state)
{
    fixture *f = *state;
    so_env e;
    so_setup(f, &e);
    double ydot;
    /* the well-formed override, first and second order */
    g_mode = M_OK;
    assert_int_equal(sweep_jvp(&e, rec_ext, &ydot), CR_OK);
    ASSERT_CLOSE(ydot, fd_jvp(ext_c), 1e-7);
    check_hvp(&e, rec_ext, ext_c);
    /* a ZeroTangent for the tuple: a zero tangent, no error */
    g_mode = M_ZERO;
    assert_int_equal(sweep_jvp(&e, rec_ext, &ydot), CR_OK);
    ASSERT_DBL(ydot, 0.0);
    /* thunks for the whole tuple and for each element are evaluated */
    g_mode = M_THUNK;
    assert_int_equal(sweep_jvp(&e, rec_ext, &ydot), CR_OK);
    ASSERT_CLOSE(ydot, fd_jvp(ext_c), 1e-7);
    g_mode = M_THUNK_ELEMS;
    assert_int_equal(sweep_jvp(&e, rec_ext, &ydot), CR_OK);
    ASSERT_CLOSE(ydot, fd_jvp(ext_c), 1e-7);
    check_hvp(&e, rec_ext, ext_c);
    /* malformed results */
    expect_sweep_failure(&e, rec_ext, ext_c, M_SCALAR, CR_EINVAL,
                         "extrema: its frule gave a f64 tangent for a tuple result", NULL);
    expect_sweep_failure(&e, rec_ext, ext_c, M_FAIL_ELEM, CR_EDOMAIN, "the frule of extrema failed",
                         "cov_failing_thunk: no value here");
    expect_sweep_failure(&e, rec_ext, ext_c, M_BAD_ELEM, CR_ETANGENT, "the frule of extrema failed",
                         "got array");
    expect_sweep_failure(&e, rec_ext, ext_c, M_FAIL_THUNK, CR_EDOMAIN,
                         "the frule of extrema failed", "cov_failing_thunk: no value here");
    expect_sweep_failure(&e, rec_ext, ext_c, M_ERR, CR_EDOMAIN, "the frule of extrema failed",
                         "cov_user_frule: refused");
    so_teardown(&e);
}

static void test_so_scalar_frule_malformed(void **state)
{
    fixture *f = *state;
    so_env e;
    so_setup(f, &e);
    double ydot;
    g_mode = M_OK;
    assert_int_equal(sweep_jvp(&e, rec_sum, &ydot), CR_OK);
    ASSERT_CLOSE(ydot, fd_jvp(sumsq_c), 1e-7);
    check_hvp(&e, rec_sum, sumsq_c);
    /* a thunk for the scalar result is evaluated */
    g_mode = M_THUNK;
    assert_int_equal(sweep_jvp(&e, rec_sum, &ydot), CR_OK);
    ASSERT_CLOSE(ydot, fd_jvp(sumsq_c), 1e-7);
    check_hvp(&e, rec_sum, sumsq_c);
    expect_sweep_failure(&e, rec_sum, sumsq_c, M_FAIL_THUNK, CR_EDOMAIN, "the frule of sum failed",
                         "cov_failing_thunk: no value here");
    expect_sweep_failure(&e, rec_sum, sumsq_c, M_ARRAY, CR_ETANGENT, "the frule of sum failed",
                         "got array");
    expect_sweep_failure(&e, rec_sum, sumsq_c, M_ERR, CR_EDOMAIN, "the frule of sum failed",
                         "cov_user_frule: refused");
    so_teardown(&e);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_scalar_primal_errors),
        T(test_scalar_partials_c128),
        T(test_scalar_register_invalid),
        T(test_scalar_frule_tangents),
        T(test_scalar_rule_fns_refuse),
        T(test_scalar_pullback_cotangents),
        T(test_argspec_kinds),
        T(test_struct_union_overlap),
        T(test_lookup_many_args),
        T(test_registry_null_and_missing),
        T(test_registry_duplicate_with_caps),
        T(test_intersection_next_to_variadic),
        T(test_registry_struct_size),
        T(test_too_many_candidates),
        T(test_many_candidates_unique_best),
        T(test_entry_point_null_arguments),
        T(test_pullback_call_paths),
        T(test_rrule_nx_and_debug_projectors),
        T(test_nondiff_primal_fails),
        T(test_so_tuple_frule_malformed),
        T(test_so_scalar_frule_malformed),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
