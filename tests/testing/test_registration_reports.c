/*
 * Rare paths of the registration tests, the flattening, the reports and the finite
 * differences (src/testing/registration.c, flatten.c, report.c, fd.c): wrong
 * non-differentiable declarations (a tangent, a failing rule, a wrong count), tolerance
 * overrides of a registration, scalar arguments with an array output, samplers that
 * skip or fail, a primal that fails, empty and untestable boxes, opt-outs, missing
 * capabilities, too many arguments; struct and array rules whose cotangents have the
 * wrong type or length; flattening of structs with f32, c128, array and nested fields
 * and the errors of every flattening function; reports at their limits; and the error
 * paths of cr_fd_* (failing callbacks in each phase, invalid options, empty problems,
 * overflowing extrapolations).
 */
#include <float.h>
#include <stdio.h>
#include <tgmath.h> /* the scalar rows below are type-generic */

#define CR_TEST_OWN_FIXTURE
#include "test_util.h"

#include <chainrules/testing_cmocka.h>

#include "test_testing_util.h"
#include "testing/testing_impl.h"

#define CI ((cr_complex)I)

static cr_status tan_re(cr_tangent t, double *x)
{
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    switch ((cr_tag)t.tag) {
    case CR_TAN_ZERO:
    case CR_TAN_NONE:
        *x = 0;
        return CR_OK;
    case CR_TAN_F64:
        *x = t.u.f64;
        return CR_OK;
    default:
        return CR_ETANGENT;
    }
}

/* The last entry added to the fixture's registry. */
static cr_rule_info last_entry(fixture *f)
{
    cr_rule_info info;
    assert_int_equal(cr_registry_get(f->reg, cr_registry_size(f->reg) - 1, &info), CR_OK);
    return info;
}

static const cr_argspec k_f64_1[1] = {{CR_M_F64, NULL}};

/* ---- Non-differentiable declarations that are wrong --------------------------------------- */

typedef enum { N_OK, N_FVAL, N_FERR, N_RERR, N_NX, N_PBERR, N_PBVAL, N_COUNT } nd_variant;
static const int k_nd[N_COUNT] = {N_OK, N_FVAL, N_FERR, N_RERR, N_NX, N_PBERR, N_PBVAL};

static cr_status floor_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_f64(floor(args[0].u.f64));
    return CR_OK;
}

static cr_status nd_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                          const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                          cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)dargs;
    int v = *(const int *)udata;
    if (v == N_FERR)
        return cr_ctx_error(cr_arena_ctx(arena), CR_ETANGENT, "nd_frule: refuses");
    *dy = v == N_FVAL ? cr_tangent_f64(0.0) : cr_tangent_none();
    return floor_primal(arena, f, args, nargs, y);
}

static cr_status nd_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    (void)dy;
    (void)arena;
    int v = *(const int *)env;
    if (v == N_PBERR)
        return CR_ETANGENT;
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    if (v == N_PBVAL)
        dx[1] = cr_tangent_zero();
    return CR_OK;
}

static cr_status nd_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                          const void *udata)
{
    (void)cfg;
    int v = *(const int *)udata;
    if (v == N_RERR)
        return CR_ETANGENT;
    pb->fn = nd_pullback;
    pb->env = (void *)(uintptr_t)udata;
    pb->name = "nd_pullback";
    pb->nx = v == N_NX ? nargs : nargs + 1;
    return floor_primal(arena, f, args, nargs, y);
}

static const cr_function k_floor_fn = {.name = "myfloor", .arity = 1, .primal = floor_primal};

static void test_wrong_non_differentiable(void **state)
{
    fixture *f = *state;
    static const char *const expect[N_COUNT] = {
        NULL,
        "a non-differentiable function's frule gave a f64 tangent",
        "the frule failed with CR_ETANGENT: nd_frule: refuses",
        "the rrule failed with CR_ETANGENT",
        "the pullback returns 1 cotangents, expected 2",
        "the pullback failed with CR_ETANGENT",
        "a non-differentiable function's pullback gave a ZeroTangent cotangent",
    };
    for (int v = 0; v < N_COUNT; v++) {
        cr_rule_def d;
        memset(&d, 0, sizeof d);
        d.fn = &k_floor_fn;
        d.nargs = 1;
        d.args = k_f64_1;
        d.frule = nd_frule;
        d.rrule = nd_rrule;
        d.udata = &k_nd[v];
        if (v == N_NX) {
            /* Without an frule only the rrule is checked. */
            d.frule = NULL;
        }
        cr_rule_info info;
        memset(&info, 0, sizeof info);
        info.fn = &k_floor_fn;
        info.nargs = 1;
        info.args = k_f64_1;
        info.has_frule = d.frule != NULL;
        info.has_rrule = true;
        info.non_differentiable = true;
        info.def = &d;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(f->arena, NULL, &info, &r);
        if (v == N_OK) {
            CR_ASSERT_RULE_TEST(st, r);
            assert_int_equal(r.verdict, CR_VERDICT_PASS);
            continue;
        }
        assert_int_equal(st, CR_OK);
        CR_ASSERT_RULE_FAILS(r);
        assert_contains(r.message, expect[v]);
        assert_contains(r.message, "at (");
    }
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* ---- Registrations: tolerances, outputs, samplers, boxes, refusals ------------------------ */

/* sin with a relative error of 1e-6: fails at the default tolerance, passes at 1e-5. */
CR_SCALAR_EVALS(cov2_far, 1, 1, Y[0] = sin(x[0]), D[0] = cos(x[0]) * (1 + 1e-6))
static const cr_scalar_rule cov2_far_row = CR_SCALAR_ROW(cov2_far);
static const cr_scalar_rule cov2_far_loose_row =
    CR_SCALAR_ROW_EX(cov2_far, .test = {.rtol = 1e-5, .atol = 1e-7});
static const cr_function cov2_far_fn = CR_SCALAR_FUNCTION("cov2_far", cov2_far_row, 1);
static const cr_function cov2_far_loose_fn =
    CR_SCALAR_FUNCTION("cov2_far_loose", cov2_far_loose_row, 1);

/* sum8: eight arguments and an frule with a wrong last partial; its hard point prints too
 * long for the failure message, which is cut. */
static cr_status sum8_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += args[i].u.f64;
    *out = cr_value_f64(s);
    return CR_OK;
}

static cr_status sum8_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    double s = 0, d;
    for (size_t i = 1; i <= nargs; i++) {
        cr_status st = tan_re(dargs[i], &d);
        if (st != CR_OK)
            return st;
        s += i == nargs && fabs(args[0].u.f64) < 1e-50 ? 2 * d : d; /* wrong near 0 */
    }
    *dy = cr_tangent_f64(s);
    return sum8_primal(arena, f, args, nargs, y);
}

static const cr_function k_sum8_fn = {.name = "sum8", .arity = 8, .primal = sum8_primal};
static const cr_argspec k_f64_8[8] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL},
                                      {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL},
                                      {CR_M_F64, NULL}, {CR_M_F64, NULL}};
#define LONGPT -1.2345678901234567e-100
static const double k_sum8_pts[8] = {LONGPT, LONGPT, LONGPT, LONGPT,
                                     LONGPT, LONGPT, LONGPT, LONGPT};
static const cr_rule_test k_sum8_test = {.npoints = 1, .points = k_sum8_pts};

/* A box not on the 2^-10 grid, and one where the primal is nowhere finite. */
static const double k_narrow[1] = {0.30005};
CR_SCALAR_EVALS_REAL(cov2_log, 1, 1, Y[0] = log(x[0]), D[0] = 1 / x[0])
static const cr_scalar_rule cov2_log_narrow_row =
    CR_SCALAR_ROW_REAL_EX(cov2_log, .test = {.lo = k_narrow, .hi = k_narrow});
static const double k_neg_lo[1] = {-2}, k_neg_hi[1] = {-1};
static const cr_scalar_rule cov2_log_neg_row =
    CR_SCALAR_ROW_REAL_EX(cov2_log, .test = {.lo = k_neg_hi, .hi = k_neg_lo});
static const cr_scalar_rule cov2_log_nowhere_row =
    CR_SCALAR_ROW_REAL_EX(cov2_log, .test = {.lo = k_neg_lo, .hi = k_neg_hi});
static const cr_function cov2_log_narrow_fn =
    CR_SCALAR_FUNCTION("cov2_log_narrow", cov2_log_narrow_row, 1);
static const cr_function cov2_log_neg_fn = CR_SCALAR_FUNCTION("cov2_log_neg", cov2_log_neg_row, 1);
static const cr_function cov2_log_nowhere_fn =
    CR_SCALAR_FUNCTION("cov2_log_nowhere", cov2_log_nowhere_row, 1);

static void test_registration_rows(void **state)
{
    fixture *f = *state;
    cr_test_report r;
    cr_test_opts o = {0};
    o.npoints = 1;
    /* The registration's tolerances override the options'. */
    assert_int_equal(cr_scalar_rule_register(f->reg, &cov2_far_fn, &cov2_far_row), CR_OK);
    cr_rule_info info = last_entry(f);
    assert_int_equal(cr_test_rule_registration(f->arena, &o, &info, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_int_equal(cr_scalar_rule_register(f->reg, &cov2_far_loose_fn, &cov2_far_loose_row),
                     CR_OK);
    info = last_entry(f);
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, &o, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    /* A long point is cut to fit in the message. */
    cr_rule_def d;
    memset(&d, 0, sizeof d);
    d.fn = &k_sum8_fn;
    d.nargs = 8;
    d.args = k_f64_8;
    d.frule = sum8_frule;
    d.test = &k_sum8_test;
    assert_int_equal(cr_registry_add(f->reg, &d), CR_OK);
    info = last_entry(f);
    o.flags = CR_TEST_NO_EDGES | CR_TEST_F64_ONLY;
    assert_int_equal(cr_test_rule_registration(f->arena, &o, &info, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "at (-1.2345678901234567e-100, ");
    assert_null(strstr(r.message, "e-100):")); /* the eighth coordinate did not fit */
    assert_int_equal(r.npoints, 2);
    /* A box narrower than the grid: its one value is used. */
    assert_int_equal(cr_scalar_rule_register(f->reg, &cov2_log_narrow_fn, &cov2_log_narrow_row),
                     CR_OK);
    info = last_entry(f);
    o.flags = CR_TEST_F64_ONLY | CR_TEST_NO_EDGES;
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, &o, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(r.npoints, 1);
    /* An empty box, and one where nothing can be tested. */
    assert_int_equal(cr_scalar_rule_register(f->reg, &cov2_log_neg_fn, &cov2_log_neg_row), CR_OK);
    info = last_entry(f);
    assert_int_equal(cr_test_rule_registration(f->arena, &o, &info, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "empty sampling box for argument 1");
    assert_int_equal(cr_scalar_rule_register(f->reg, &cov2_log_nowhere_fn, &cov2_log_nowhere_row),
                     CR_OK);
    info = last_entry(f);
    o.flags = CR_TEST_F64_ONLY;
    assert_int_equal(cr_test_rule_registration(f->arena, &o, &info, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "no point could be tested");
    assert_true(r.nskipped >= 3);
    /* Invalid options are refused before any point. */
    cr_fd_opts bad = {0};
    bad.adapt = 100;
    o.fd_opts = &bad;
    info = last_entry(f);
    assert_int_equal(cr_test_rule_registration(f->arena, &o, &info, &r), CR_EINVAL);
    assert_contains(r.message, "finite-difference");
    assert_int_equal(r.npoints, 0);
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* vec2(x) = [x, 2x] (scalar argument, array output), with a right or wrong pullback. */
static cr_status vec2_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)f;
    (void)n;
    cr_array *a;
    size_t shape[1] = {2};
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, shape, &a);
    if (st != CR_OK)
        return st;
    ((double *)a->data)[0] = args[0].u.f64;
    ((double *)a->data)[1] = 2 * args[0].u.f64;
    *out = cr_value_array(a);
    return CR_OK;
}

static cr_status vec2_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    double dx;
    cr_status st = tan_re(dargs[1], &dx);
    if (st == CR_OK)
        st = vec2_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    cr_value t;
    st = vec2_primal(arena, f, &(cr_value){.kind = CR_KIND_F64, .u.f64 = dx}, 1, &t);
    *dy = cr_tangent_array(t.u.arr);
    return st;
}

static cr_status vec2_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    (void)arena;
    cr_tangent g;
    cr_status st = cr_tangent_unthunk(*dy, &g);
    if (st != CR_OK)
        return st;
    double s = 0;
    if (g.tag == CR_TAN_ARRAY)
        s = creal(cr_array_get_linear(g.u.arr, 0)) +
            (env != NULL ? 3.0 : 2.0) * creal(cr_array_get_linear(g.u.arr, 1));
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(s);
    return CR_OK;
}

static cr_status vec2_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    pb->fn = vec2_pullback;
    pb->env = (void *)(uintptr_t)udata;
    pb->name = "vec2_pullback";
    pb->nx = 0; /* the tester (like dispatch) fills in nargs + 1 */
    return vec2_primal(arena, f, args, nargs, y);
}

static const cr_function k_vec2_fn = {.name = "vec2", .arity = 1, .primal = vec2_primal};
static const cr_function k_vec2_bad_fn = {.name = "vec2_bad", .arity = 1, .primal = vec2_primal};
static const cr_rule_test k_default_box = {0};
static const int k_yes = 1;

/* A primal that fails with CR_ESHAPE above 2: the registration stops there. */
static cr_status shapey_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                               cr_value *out)
{
    (void)f;
    (void)n;
    if (args[0].u.f64 > 2)
        return cr_ctx_error(cr_arena_ctx(arena), CR_ESHAPE, "shapey: too large");
    *out = cr_value_f64(args[0].u.f64);
    return CR_OK;
}

static cr_status shapey_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    *dy = dargs[1];
    return shapey_primal(arena, f, args, nargs, y);
}

/* The same, refusing with CR_EINVAL: such points are skipped, not failed. */
static cr_status picky_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)f;
    (void)n;
    if (args[0].u.f64 > 2)
        return cr_ctx_error(cr_arena_ctx(arena), CR_EINVAL, "picky: too large");
    *out = cr_value_f64(args[0].u.f64);
    return CR_OK;
}

static cr_status picky_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                             const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                             cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    *dy = dargs[1];
    return picky_primal(arena, f, args, nargs, y);
}

static const cr_function k_picky_fn = {.name = "picky", .arity = 1, .primal = picky_primal};
static const double k_shapey_pts[] = {3.0, 0.5};
static const cr_rule_test k_shapey_test = {.npoints = 2, .points = k_shapey_pts};
static const cr_function k_shapey_fn = {.name = "shapey", .arity = 1, .primal = shapey_primal};

static void add_def(fixture *f, const cr_function *fn, const cr_argspec *args, size_t nargs,
                    cr_frule_fn fr, cr_rrule_fn rr, const void *udata, const cr_rule_test *test)
{
    cr_rule_def d;
    memset(&d, 0, sizeof d);
    d.fn = fn;
    d.nargs = nargs;
    d.args = args;
    d.frule = fr;
    d.rrule = rr;
    d.udata = udata;
    d.test = test;
    assert_int_equal(cr_registry_add(f->reg, &d), CR_OK);
}

static void test_registration_general(void **state)
{
    fixture *f = *state;
    cr_test_report r;
    cr_test_opts o = {0};
    o.npoints = 2;
    /* Scalar arguments, array output: the general testers run (frule, rrule, dot product). */
    add_def(f, &k_vec2_fn, k_f64_1, 1, vec2_frule, vec2_rrule, NULL, &k_default_box);
    cr_rule_info info = last_entry(f);
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, &o, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_true(r.npoints >= 2);
    add_def(f, &k_vec2_bad_fn, k_f64_1, 1, vec2_frule, vec2_rrule, &k_yes, &k_default_box);
    info = last_entry(f);
    assert_int_equal(cr_test_rule_registration(f->arena, &o, &info, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "rrule: cotangent of argument 1");
    /* rrule only: no frule checks, no dot-product test. */
    static const cr_function vec2r = {.name = "vec2r", .arity = 1, .primal = vec2_primal};
    add_def(f, &vec2r, k_f64_1, 1, NULL, vec2_rrule, NULL, &k_default_box);
    info = last_entry(f);
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, &o, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    /* No primal and no rrule: the frule's value stands for it. */
    static const cr_function vec2np = {.name = "vec2np", .arity = 1};
    add_def(f, &vec2np, k_f64_1, 1, vec2_frule, NULL, NULL, &k_default_box);
    info = last_entry(f);
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, &o, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    /* A primal that fails: the failure is reported, the status returned, the rest skipped. */
    add_def(f, &k_shapey_fn, k_f64_1, 1, shapey_frule, NULL, NULL, &k_shapey_test);
    info = last_entry(f);
    assert_int_equal(cr_test_rule_registration(f->arena, &o, &info, &r), CR_ESHAPE);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "f(args) failed with CR_ESHAPE: shapey: too large");
    assert_int_equal(r.npoints, 1);
    add_def(f, &k_picky_fn, k_f64_1, 1, picky_frule, NULL, NULL, &k_shapey_test);
    info = last_entry(f);
    o.flags = CR_TEST_F64_ONLY | CR_TEST_NO_EDGES;
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, &o, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(r.nskipped, 1);
    assert_contains(r.skip_note, "at (3): the primal refuses these arguments (CR_EINVAL)");
    /* The single-point testers say FAIL and return the status. */
    cr_value pv = cr_value_function(&k_picky_fn, NULL), big = cr_value_f64(3);
    assert_int_equal(cr_test_frule(f->arena, &f->opts, &pv, &big, 1, &r), CR_EINVAL);
    assert_int_equal(r.verdict, CR_VERDICT_FAIL);
    assert_contains(r.message, "f(args) failed with CR_EINVAL: picky: too large");
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* answer() = 42: no arguments at all. */
static cr_status answer_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                               cr_value *out)
{
    (void)arena;
    (void)f;
    (void)args;
    (void)n;
    *out = cr_value_f64(42);
    return CR_OK;
}

static cr_status answer_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)dargs;
    /* Wrong when udata is set: a constant has no tangent. */
    *dy = udata != NULL ? cr_tangent_f64(1.0) : cr_tangent_zero();
    return answer_primal(arena, f, args, nargs, y);
}

static const cr_function k_answer_fn = {.name = "answer", .arity = 0, .primal = answer_primal};
static const cr_function k_answer_bad_fn = {
    .name = "answer_bad", .arity = 0, .primal = answer_primal};

static void test_registration_no_arguments(void **state)
{
    fixture *f = *state;
    cr_test_report r;
    add_def(f, &k_answer_fn, NULL, 0, answer_frule, NULL, NULL, &k_default_box);
    cr_rule_info info = last_entry(f);
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, NULL, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_true(r.npoints >= 1);
    add_def(f, &k_answer_bad_fn, NULL, 0, answer_frule, NULL, &k_yes, &k_default_box);
    info = last_entry(f);
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, &info, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.where, "frule: tangent of the output");
    assert_int_equal(cr_arena_used(f->arena), 0);
}

static void test_registration_refusals(void **state)
{
    fixture *f = *state;
    cr_test_report r;
    add_def(f, &k_vec2_fn, k_f64_1, 1, vec2_frule, vec2_rrule, NULL, &k_default_box);
    cr_rule_info info = last_entry(f);
    /* Misuse. */
    assert_int_equal(cr_test_rule_registration(NULL, NULL, &info, &r), CR_EINVAL);
    assert_contains(r.message, "invalid arguments");
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, NULL, &r), CR_EINVAL);
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, &info, NULL), CR_EINVAL);
    assert_false(cr_test_registration_usable(NULL));
    assert_int_equal(cr_test_untested_rules(NULL, NULL, 0), 0);
    /* An opt-out: nothing to test. */
    cr_rule_info opt = info;
    opt.has_frule = opt.has_rrule = false;
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, NULL, &opt, &r), r);
    assert_int_equal(r.nchecks, 0);
    assert_contains(r.message, "opt-out vec2(f64): an opt-out, nothing to test");
    /* Capabilities the configuration lacks. */
    cr_rule_info capped = info;
    capped.caps = 1;
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, &capped, &r), CR_ENOCAP);
    assert_contains(r.message, "needs configuration capabilities 0x1");
    /* More arguments than a signature can have. */
    static const cr_argspec many[CR_SIG_MAX_ARGS + 1] = {
        {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL},
        {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_rule_info wide = info;
    wide.nargs = CR_SIG_MAX_ARGS + 1;
    wide.args = many;
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, &wide, &r), CR_EINVAL);
    assert_contains(r.message, "too many arguments");
    /* A functor needs a sampler; without one it is listed as untested. */
    static const cr_field sf[] = {{"a", 0, CR_KIND_F64, NULL}};
    static const cr_type st = {"functor_t", sizeof(double), 1, sf};
    static const cr_function functor = {.name = "functor", .arity = 1, .self_type = &st};
    add_def(f, &functor, k_f64_1, 1, vec2_frule, NULL, NULL, &k_default_box);
    info = last_entry(f);
    assert_false(cr_test_registration_usable(&info));
    char buf[256];
    assert_int_equal(cr_test_untested_rules(f->reg, buf, sizeof buf), 1);
    assert_contains(buf, "frule functor(f64) (no sampler for its argument kinds)");
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* ---- Struct and array arguments: cotangents of the wrong type or length ------------------ */

typedef struct pt {
    double a, b;
} pt;
static const cr_field k_pt_fields[] = {{"a", offsetof(pt, a), CR_KIND_F64, NULL},
                                       {"b", offsetof(pt, b), CR_KIND_F64, NULL}};
static const cr_type k_pt_type = {"pt", sizeof(pt), 2, k_pt_fields};
static const cr_type k_pt2_type = {"pt2", sizeof(pt), 2, k_pt_fields};

typedef enum { S_OK, S_OTHER_TYPE, S_SCALAR, S_SHORT, S_COUNT } sv_variant;
static const int k_sv[S_COUNT] = {S_OK, S_OTHER_TYPE, S_SCALAR, S_SHORT};

static cr_status sumsq_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                              cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    const pt *p = args[0].u.obj.ptr;
    *out = cr_value_f64(p->a * p->a + p->b * p->b);
    return CR_OK;
}

typedef struct sumsq_env {
    const pt *p;
    int v;
} sumsq_env;

static cr_status sumsq_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    const pt *p = ((const sumsq_env *)env)->p;
    int v = ((const sumsq_env *)env)->v;
    double g;
    cr_status st = tan_re(*dy, &g);
    if (st != CR_OK)
        return st;
    cr_tangent fl[2] = {cr_tangent_f64(2 * p->a * g), cr_tangent_f64(2 * p->b * g)};
    dx[0] = cr_tangent_none();
    switch (v) {
    case S_OTHER_TYPE:
        return cr_tangent_struct(arena, &k_pt2_type, NULL, fl, 2, &dx[1]);
    case S_SCALAR:
        dx[1] = fl[0];
        return CR_OK;
    default:
        return cr_tangent_struct(arena, &k_pt_type, NULL, fl, 2, &dx[1]);
    }
}

static cr_status sumsq_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    sumsq_env *env = cr_arena_alloc(arena, sizeof *env, _Alignof(sumsq_env));
    if (env == NULL)
        return CR_ENOMEM;
    env->p = args[0].u.obj.ptr;
    env->v = *(const int *)udata;
    pb->fn = sumsq_pullback;
    pb->env = env;
    pb->name = "sumsq_pullback";
    pb->nx = nargs + 1;
    return sumsq_primal(arena, f, args, nargs, y);
}

/* asum(A) = Σ A_k^2 over a 4-vector; the pullback's cotangent can be too short or a scalar. */
static cr_status asum_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    double s = 0;
    for (size_t k = 0; k < cr_array_numel(args[0].u.arr); k++) {
        double a = creal(cr_array_get_linear(args[0].u.arr, k));
        s += a * a;
    }
    *out = cr_value_f64(s);
    return CR_OK;
}

typedef struct asum_env {
    const cr_array *a;
    int v;
} asum_env;

static cr_status asum_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    const asum_env *e = env;
    double g;
    cr_status st = tan_re(*dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    if (e->v == S_SCALAR) {
        dx[1] = cr_tangent_f64(g);
        return CR_OK;
    }
    size_t n = cr_array_numel(e->a) - (e->v == S_SHORT);
    cr_array *G;
    st = cr_array_new(arena, CR_DT_F64, 1, &n, &G);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < n; k++)
        ((double *)G->data)[k] = 2 * creal(cr_array_get_linear(e->a, k)) * g;
    dx[1] = cr_tangent_array(G);
    return CR_OK;
}

static cr_status asum_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    asum_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(asum_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->a = args[0].u.arr;
    e->v = *(const int *)udata;
    pb->fn = asum_pullback;
    pb->env = e;
    pb->name = "asum_pullback";
    pb->nx = nargs + 1;
    return asum_primal(arena, f, args, nargs, y);
}

/* A sampler of pt arguments (struct values: the point is printed by kind). */
static cr_status sample_pt(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs, void *env)
{
    (void)nargs;
    (void)env;
    pt *p = cr_arena_alloc(arena, sizeof *p, _Alignof(pt));
    if (p == NULL)
        return CR_ENOMEM;
    p->a = (double)(cr_test_rand_u64(rng) % 16) / 8 + 0.25;
    p->b = -(double)(cr_test_rand_u64(rng) % 16) / 8 - 0.25;
    args[0] = cr_value_struct(&k_pt_type, p);
    return CR_OK;
}

/* Samplers that skip every point, or fail. */
static cr_status sample_skip(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                             void *env)
{
    (void)arena;
    (void)rng;
    (void)args;
    (void)nargs;
    (void)env;
    return CR_EDOMAIN;
}

static cr_status sample_fail(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                             void *env)
{
    (void)arena;
    (void)rng;
    (void)args;
    (void)nargs;
    (void)env;
    return CR_ESHAPE;
}

static const cr_rule_test k_pt_test = {.sample = sample_pt};
static const cr_rule_test k_skip_test = {.sample = sample_skip};
static const cr_rule_test k_fail_test = {.sample = sample_fail};
static const cr_argspec k_pt1[1] = {{CR_M_STRUCT, &k_pt_type}};
static const cr_argspec k_arr1[1] = {{CR_M_A_F64, NULL}};
static const cr_function k_sumsq_fns[S_COUNT] = {
    {.name = "sumsq", .arity = 1, .primal = sumsq_primal},
    {.name = "sumsq_other", .arity = 1, .primal = sumsq_primal},
    {.name = "sumsq_scalar", .arity = 1, .primal = sumsq_primal},
    {.name = "sumsq_short", .arity = 1, .primal = sumsq_primal},
};
static const cr_function k_asum_fns[S_COUNT] = {
    {.name = "asum", .arity = 1, .primal = asum_primal},
    {.name = "asum_other", .arity = 1, .primal = asum_primal},
    {.name = "asum_scalar", .arity = 1, .primal = asum_primal},
    {.name = "asum_short", .arity = 1, .primal = asum_primal},
};

static void test_struct_and_array_cotangents(void **state)
{
    fixture *f = *state;
    cr_test_report r;
    for (int v = 0; v < S_COUNT; v++) {
        add_def(f, &k_sumsq_fns[v], k_pt1, 1, NULL, sumsq_rrule, &k_sv[v], &k_pt_test);
        add_def(f, &k_asum_fns[v], k_arr1, 1, NULL, asum_rrule, &k_sv[v], NULL);
    }
    pt p = {0.75, -1.5};
    cr_value x = cr_value_struct(&k_pt_type, &p);
    double a[4] = {1, -2, 0.5, 3};
    cr_array A = cr_array_vector(a, 4);
    cr_value xa = cr_value_array(&A);
    /* ZeroTangent accumulators, so that add!! passes the rule's cotangent on unchanged. */
    cr_tangent zacc[2] = {cr_tangent_none(), cr_tangent_zero()};
    cr_test_opts o = f->opts;
    o.input_tangents = zacc;
    static const char *const sexp[S_COUNT] = {NULL, "a structural tangent of type pt2 for a pt",
                                              "a f64 tangent for a struct of type pt", NULL};
    static const char *const aexp[S_COUNT] = {NULL, NULL, "a f64 tangent for an array",
                                              "an array tangent of another number of elements"};
    for (int v = 0; v < S_COUNT; v++) {
        cr_value fs = cr_value_function(&k_sumsq_fns[v], NULL);
        cr_value fa = cr_value_function(&k_asum_fns[v], NULL);
        if (v == S_OK || v == S_SHORT) {
            CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &o, &fs, &x, 1, &r), r);
            assert_int_equal(r.verdict, CR_VERDICT_PASS);
        } else {
            assert_int_equal(cr_test_rrule(f->arena, &o, &fs, &x, 1, &r), CR_OK);
            CR_ASSERT_RULE_FAILS(r);
            assert_contains(r.message, sexp[v]);
            /* With random accumulators, add!! is what fails. */
            assert_int_equal(cr_test_rrule(f->arena, &f->opts, &fs, &x, 1, &r), CR_OK);
            CR_ASSERT_RULE_FAILS(r);
        }
        if (v == S_OK || v == S_OTHER_TYPE) {
            CR_ASSERT_RULE_TEST(cr_test_rrule(f->arena, &o, &fa, &xa, 1, &r), r);
            assert_int_equal(r.verdict, CR_VERDICT_PASS);
        } else {
            assert_int_equal(cr_test_rrule(f->arena, &o, &fa, &xa, 1, &r), CR_OK);
            CR_ASSERT_RULE_FAILS(r);
            assert_contains(r.message, aexp[v]);
        }
    }
    /* Through a sampler: a failure names the struct point by its kind. */
    cr_rule_info info;
    assert_int_equal(cr_registry_get(f->reg, 2 * S_OTHER_TYPE, &info), CR_OK);
    assert_ptr_equal(info.fn, &k_sumsq_fns[S_OTHER_TYPE]);
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, &info, &r), CR_OK);
    CR_ASSERT_RULE_FAILS(r);
    assert_contains(r.message, "at ((struct))");
    assert_int_equal(cr_registry_get(f->reg, 0, &info), CR_OK);
    CR_ASSERT_RULE_TEST(cr_test_rule_registration(f->arena, NULL, &info, &r), r);
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    /* Samplers that skip every point, or fail. */
    static const cr_function skipf = {.name = "sumsq_skip", .arity = 1, .primal = sumsq_primal};
    static const cr_function failf = {.name = "sumsq_fail", .arity = 1, .primal = sumsq_primal};
    add_def(f, &skipf, k_pt1, 1, NULL, sumsq_rrule, &k_sv[S_OK], &k_skip_test);
    info = last_entry(f);
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, &info, &r), CR_EINVAL);
    assert_int_equal(r.nskipped, CR_TEST_DEFAULT_NPOINTS);
    assert_contains(r.message, "no point could be tested");
    add_def(f, &failf, k_pt1, 1, NULL, sumsq_rrule, &k_sv[S_OK], &k_fail_test);
    info = last_entry(f);
    assert_int_equal(cr_test_rule_registration(f->arena, NULL, &info, &r), CR_ESHAPE);
    assert_int_equal(cr_arena_used(f->arena), 0);
}

/* ---- Flattening: rich structs and every error ------------------------------------------- */

typedef struct inner {
    double w;
    int64_t id;
} inner;
static const cr_field k_inner_fields[] = {{"w", offsetof(inner, w), CR_KIND_F64, NULL},
                                          {"id", offsetof(inner, id), CR_KIND_I64, NULL}};
static const cr_type k_inner_type = {"inner", sizeof(inner), 2, k_inner_fields};

typedef struct rich {
    float s;
    cr_complex z;
    cr_array v;
    inner in;
    bool flag;
    cr_array iv;
} rich;
static const cr_field k_rich_fields[] = {
    {"s", offsetof(rich, s), CR_KIND_F32, NULL},
    {"z", offsetof(rich, z), CR_KIND_C128, NULL},
    {"v", offsetof(rich, v), CR_KIND_ARRAY, NULL},
    {"in", offsetof(rich, in), CR_KIND_STRUCT, &k_inner_type},
    {"flag", offsetof(rich, flag), CR_KIND_BOOL, NULL},
    {"iv", offsetof(rich, iv), CR_KIND_ARRAY, NULL},
};
static const cr_type k_rich_type = {"rich", sizeof(rich), 6, k_rich_fields};

static void test_flatten_rich_struct(void **state)
{
    fixture *f = *state;
    double vd[3] = {1, 2, 3};
    int64_t ivd[2] = {7, 8};
    rich x;
    memset(&x, 0, sizeof x);
    x.s = 1.5f;
    x.z = 2 - 3 * CI;
    x.v = cr_array_vector(vd, 3);
    size_t ishape[1] = {2};
    assert_int_equal(cr_array_view_init(&x.iv, ivd, CR_DT_I64, 1, ishape, NULL), CR_OK);
    x.in.w = 4;
    x.in.id = 42;
    x.flag = true;
    cr_value v = cr_value_struct(&k_rich_type, &x);
    /* s, z (2), v (3), in.w */
    assert_int_equal(cr_test_flat_size(&v), 7);
    assert_false(cr__test_has_f32(&(cr_value){.kind = CR_KIND_F64}));
    assert_true(cr__test_has_f32(&v));
    double c[7];
    assert_int_equal(cr_test_flatten(&v, c, 7), CR_OK);
    const double want[7] = {1.5, 2, -3, 1, 2, 3, 4};
    for (int k = 0; k < 7; k++)
        ASSERT_DBL(c[k], want[k]);
    double nx[7] = {0.5, -1, 1, 10, 20, 30, 40};
    cr_value u;
    assert_int_equal(cr_test_unflatten(f->keep, &v, nx, 7, &u), CR_OK);
    const rich *ur = u.u.obj.ptr;
    ASSERT_DBL(ur->s, 0.5);
    ASSERT_CPLX(ur->z, -1, 1);
    ASSERT_DBL(creal(cr_array_get_linear(&ur->v, 2)), 30);
    ASSERT_DBL(ur->in.w, 40);
    assert_int_equal(ur->in.id, 42);
    assert_true(ur->flag);
    ASSERT_DBL(creal(cr_array_get_linear(&ur->iv, 1)), 8);
    /* The template is untouched. */
    ASSERT_DBL(vd[2], 3);
    ASSERT_DBL(x.s, 1.5f);
    /* Tangents: unflatten, flatten, components, names. */
    cr_tangent t;
    assert_int_equal(cr_test_tangent_unflatten(f->keep, &v, nx, 7, &t), CR_OK);
    double tc[7];
    assert_int_equal(cr_test_tangent_flatten(&v, t, tc, 7), CR_OK);
    for (int k = 0; k < 7; k++)
        ASSERT_DBL(tc[k], nx[k]);
    char name[64];
    cr__test_comp_name(&v, 4, name, sizeof name);
    assert_string_equal(name, ".v[1]");
    cr__test_comp_name(&v, 99, name, sizeof name);
    assert_string_equal(name, "component 99");
    cr__test_comp_name(&v, 0, NULL, 0); /* nothing to write into */
    /* Too few coordinates, at each kind of field. */
    for (size_t n = 0; n < 7; n++) {
        assert_int_equal(cr_test_unflatten(f->keep, &v, nx, n, &u), CR_EINVAL);
        assert_int_equal(cr_test_tangent_unflatten(f->keep, &v, nx, n, &t), CR_EINVAL);
    }
    /* A struct with no float field: NoTangent. */
    inner only = {1, 2};
    static const cr_field idf[] = {{"id", offsetof(inner, id), CR_KIND_I64, NULL}};
    static const cr_type idt = {"ids", sizeof(inner), 1, idf};
    cr_value iv = cr_value_struct(&idt, &only);
    assert_int_equal(cr_test_tangent_unflatten(f->keep, &iv, NULL, 0, &t), CR_OK);
    assert_int_equal(t.tag, CR_TAN_NONE);
}

static void test_flatten_errors(void **state)
{
    fixture *f = *state;
    double x[4] = {1, 2, 3, 4}, out[4];
    cr_value u;
    cr_tangent t;
    cr_value s64 = cr_value_f64(1), s32 = cr_value_f32(1), sc = cr_value_c128(1);
    /* Arguments. */
    assert_int_equal(cr_test_flat_size(NULL), 0);
    assert_int_equal(cr_test_flatten(NULL, out, 1), CR_EINVAL);
    assert_int_equal(cr_test_flatten(&s64, NULL, 1), CR_EINVAL);
    assert_int_equal(cr_test_unflatten(NULL, &s64, x, 1, &u), CR_EINVAL);
    assert_int_equal(cr_test_unflatten(f->keep, &s64, x, 2, &u), CR_EINVAL); /* left over */
    assert_int_equal(cr_test_tangent_unflatten(NULL, &s64, x, 1, &t), CR_EINVAL);
    assert_int_equal(cr_test_tangent_unflatten(f->keep, &s64, x, 2, &t), CR_EINVAL);
    /* Too few coordinates for scalars and arrays. */
    const cr_value *sc3[3] = {&s64, &s32, &sc};
    for (int i = 0; i < 3; i++) {
        size_t n = i == 2 ? 1 : 0;
        assert_int_equal(cr_test_unflatten(f->keep, sc3[i], x, n, &u), CR_EINVAL);
        assert_int_equal(cr_test_tangent_unflatten(f->keep, sc3[i], x, n, &t), CR_EINVAL);
    }
    cr_array A = cr_array_vector(x, 3);
    cr_value av = cr_value_array(&A);
    assert_int_equal(cr_test_unflatten(f->keep, &av, x, 2, &u), CR_EINVAL);
    assert_int_equal(cr_test_tangent_unflatten(f->keep, &av, x, 2, &t), CR_EINVAL);
    /* NULL arrays, struct values without data, fields without a type. */
    cr_value nullarr = {.kind = CR_KIND_ARRAY};
    assert_int_equal(cr_test_flatten(&nullarr, out, 0), CR_EINVAL);
    assert_int_equal(cr_test_unflatten(f->keep, &nullarr, x, 0, &u), CR_EINVAL);
    assert_int_equal(cr_test_tangent_unflatten(f->keep, &nullarr, x, 0, &t), CR_EINVAL);
    assert_int_equal(cr__test_ncomps(&nullarr), 0);
    assert_false(cr__test_is_finite(&nullarr));
    cr_value nostruct = cr_value_struct(&k_inner_type, NULL);
    char msg[200];
    assert_int_equal(cr__test_expand(&nostruct, cr_tangent_zero(), out, 0, NULL, msg, sizeof msg),
                     CR_EINVAL);
    assert_contains(msg, "a struct value without descriptor or data");
    assert_int_equal(cr_test_unflatten(f->keep, &nostruct, x, 0, &u), CR_EINVAL);
    assert_int_equal(cr_test_tangent_unflatten(f->keep, &nostruct, x, 0, &t), CR_EINVAL);
    static const cr_field badf[] = {{"w", 0, CR_KIND_F64, NULL}, {"sub", 8, CR_KIND_STRUCT, NULL}};
    static const cr_type badt = {"bad", 16, 2, badf};
    double storage[2] = {1, 2};
    cr_value bv = cr_value_struct(&badt, storage);
    assert_int_equal(cr__test_expand(&bv, cr_tangent_zero(), out, 1, NULL, msg, sizeof msg),
                     CR_EINVAL);
    assert_contains(msg, "type bad: invalid field descriptor");
    assert_int_equal(cr_test_unflatten(f->keep, &bv, x, 1, &u), CR_EINVAL);
    assert_int_equal(cr_test_tangent_unflatten(f->keep, &bv, x, 1, &t), CR_EINVAL);
    static const cr_field nestf[] = {{"b", 0, CR_KIND_STRUCT, &badt}};
    static const cr_type nestt = {"nest", 16, 1, nestf};
    cr_value nv = cr_value_struct(&nestt, storage);
    assert_int_equal(cr_test_unflatten(f->keep, &nv, x, 1, &u), CR_EINVAL);
    /* An array of an unknown structure. */
    cr_array M = cr_array_matrix(x, 2, 2);
    M.structure = 99;
    cr_value mv = cr_value_array(&M);
    assert_int_equal(cr_test_flatten(&mv, out, 0), CR_EINVAL);
    /* Wrong n for the components. */
    assert_int_equal(cr__test_expand(&av, cr_tangent_zero(), out, 2, NULL, NULL, 0), CR_EINVAL);
    assert_int_equal(cr__test_expand_value(&av, out, 2), CR_EINVAL);
    assert_int_equal(cr__test_expand_value(&av, out, 4), CR_EINVAL);
    /* Weights beyond the coordinates are 1. */
    double w[3] = {0, 0, 0};
    cr__test_weights(&s64, w, 3);
    assert_true(w[0] == 1 && w[1] == 1 && w[2] == 1);
    /* Non-finite values. */
    double inf[2] = {1, INFINITY};
    cr_array IA = cr_array_vector(inf, 2);
    cr_value ia = cr_value_array(&IA);
    assert_false(cr__test_is_finite(&ia));
    /* Hashes of empty arrays, NotImplemented and failing thunks are stable. */
    cr_array E = cr_array_vector(x, 0);
    cr_value ev = cr_value_array(&E);
    assert_true(cr__test_hash_value(&ev, 0) == cr__test_hash_value(&ev, 0));
    static const cr_notimpl ni = {__FILE__, __LINE__, "x"};
    assert_true(cr__test_hash_tangent(cr_tangent_notimpl(&ni), 0) ==
                cr__test_hash_tangent(cr_tangent_notimpl(&ni), 0));
}

static cr_status fail_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    (void)out;
    (void)env;
    return CR_ETANGENT;
}

static cr_status val_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    *out = cr_tangent_f64(*(double *)env);
    return CR_OK;
}

static void test_flatten_thunks(void **state)
{
    fixture *f = *state;
    cr_value s64 = cr_value_f64(1);
    double out[1];
    char msg[200];
    cr_tangent bad, good;
    assert_int_equal(cr_tangent_thunk(f->keep, fail_thunk, NULL, "fail", &bad), CR_OK);
    assert_int_equal(cr__test_expand(&s64, bad, out, 1, NULL, msg, sizeof msg), CR_ETANGENT);
    assert_contains(msg, "a thunk failed (CR_ETANGENT)");
    uint64_t h1 = cr__test_hash_tangent(bad, 0);
    assert_true(h1 == cr__test_hash_tangent(bad, 0));
    /* An evaluated thunk hashes as its value: a pending one is evaluated first. */
    double val = 2.5;
    assert_int_equal(cr_tangent_thunk(f->keep, val_thunk, &val, "val", &good), CR_OK);
    assert_true(cr__test_hash_tangent(good, 0) == cr__test_hash_tangent(good, 0));
    cr_tangent plain = cr_tangent_f64(2.5);
    uint64_t hv = cr__test_hash_tangent(plain, 0);
    assert_true(cr__test_hash_tangent(good, 0) != hv); /* the tag differs */
    /* Its contents count: another value, another hash. */
    double val2 = 3.5;
    cr_tangent other;
    assert_int_equal(cr_tangent_thunk(f->keep, val_thunk, &val2, "val2", &other), CR_OK);
    assert_true(cr__test_hash_tangent(good, 0) != cr__test_hash_tangent(other, 0));
}

/* ---- Reports at their limits ---------------------------------------------------------- */

static void test_report_limits(void **state)
{
    (void)state;
    assert_int_equal(cr_verdict_rank((cr_verdict)42), 3);
    cr_test_report_init(NULL);
    cr_test_report_merge(NULL, NULL);
    char buf[64];
    assert_int_equal(cr_test_report_format(NULL, buf, sizeof buf), strlen("(no report)"));
    assert_string_equal(buf, "(no report)");
    cr_test_report r;
    cr_test_report_init(&r);
    cr_test_report_merge(&r, NULL);
    cr__test_note(&r, CR_VERDICT_FAIL, 2, "somewhere", NULL);
    assert_string_equal(r.message, "");
    assert_string_equal(r.where, "somewhere");
    /* A report filled to the brim: the line is cut at the formatter's limit. */
    r.nchecks = r.npassed = r.nmarginal = r.nbroken = r.nfailed = r.npoints = r.nskipped = SIZE_MAX;
    memset(r.where, 'w', sizeof r.where - 1);
    r.where[sizeof r.where - 1] = '\0';
    memset(r.message, 'm', sizeof r.message - 1);
    r.message[sizeof r.message - 1] = '\0';
    r.max_abs_err = r.max_rel_err = -DBL_MAX;
    char big[2048], small[100];
    size_t len = cr_test_report_format(&r, big, sizeof big);
    assert_int_equal(len, strlen(big));
    assert_contains(big, "18446744073709551615 checks");
    assert_int_equal(cr_test_report_format(&r, NULL, 0), len);
    assert_int_equal(cr_test_report_format(&r, small, sizeof small), len);
    assert_int_equal(strlen(small), sizeof small - 1);
}

/* ---- Finite differences: error paths -------------------------------------------------- */

typedef struct counter {
    int calls, fail_after;
} counter;

static cr_status count_fn(double x, double *y, void *env)
{
    counter *c = env;
    if (c->calls++ >= c->fail_after)
        return CR_ESHAPE;
    *y = sin(x);
    return CR_OK;
}

static cr_status big_fn(double x, double *y, void *env)
{
    (void)env;
    *y = DBL_MAX * tanh(1e3 * x);
    return CR_OK;
}

static cr_status vec_sin(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)env;
    for (size_t i = 0; i < m; i++)
        y[i] = sin(x[i % (n ? n : 1)]);
    return CR_OK;
}

static void test_fd_error_paths(void **state)
{
    fixture *f = *state;
    cr_fdm c3, c5, q0;
    assert_int_equal(cr_fdm_central(3, 1, &c3), CR_OK);
    assert_int_equal(cr_fdm_central(5, 1, &c5), CR_OK);
    assert_int_equal(cr_fdm_central(3, 0, &q0), CR_OK);
    double d, e, h;
    /* The callback's status comes back from every phase. */
    counter c = {0, 0};
    assert_int_equal(cr_fd_derivative(&q0, NULL, count_fn, &c, 0.5, &d, &e), CR_ESHAPE);
    cr_fd_opts fixed = {0};
    fixed.step = 0.01;
    c = (counter){0, 0};
    assert_int_equal(cr_fd_derivative(&c5, &fixed, count_fn, &c, 0.5, &d, &e), CR_ESHAPE);
    c = (counter){0, 1000};
    assert_int_equal(cr_fd_derivative(&c5, &fixed, count_fn, &c, 0.5, &d, &e), CR_OK);
    ASSERT_CLOSE(d, cos(0.5), 1e-6);
    cr_fd_opts adapt2 = {0};
    adapt2.adapt = 2;
    for (int k = 0; k < 40; k++) {
        c = (counter){0, k};
        cr_status st = cr_fd_derivative(&c5, &adapt2, count_fn, &c, 0.5, &d, &e);
        assert_true(st == CR_ESHAPE || (st == CR_OK && fabs(d - cos(0.5)) < 1e-8));
    }
    /* cr_fd_estimate_step: invalid arguments, a fixed step with its error. */
    assert_int_equal(cr_fd_estimate_step(&c5, NULL, NULL, NULL, 0.5, &h, &e), CR_EINVAL);
    c = (counter){0, 1000};
    assert_int_equal(cr_fd_estimate_step(&c5, &fixed, count_fn, &c, 0.5, &h, &e), CR_OK);
    ASSERT_DBL(h, 0.01);
    assert_true(e > 0);
    c = (counter){0, 0};
    assert_int_equal(cr_fd_estimate_step(&c5, &fixed, count_fn, &c, 0.5, &h, &e), CR_ESHAPE);
    /* Richardson: a bad struct_size, a callback failing mid-way, an infinite first step. */
    cr_fd_richardson_opts ro = {0};
    ro.struct_size = sizeof ro + 8;
    assert_int_equal(cr_fd_richardson(&c3, &ro, count_fn, &c, 0.5, &d, &e), CR_EINVAL);
    for (int k = 2; k < 12; k++) {
        c = (counter){0, k};
        cr_status st = cr_fd_richardson(&c3, NULL, count_fn, &c, 0.5, &d, &e);
        assert_true(st == CR_ESHAPE || st == CR_OK);
    }
    c = (counter){0, 2};
    assert_int_equal(cr_fd_richardson(&c3, NULL, count_fn, &c, 0.5, &d, &e), CR_ESHAPE);
    memset(&ro, 0, sizeof ro);
    ro.initial_step = 1e-3;
    assert_int_equal(cr_fd_richardson(&c3, &ro, big_fn, NULL, 0.0, &d, &e), CR_EDOMAIN);
    /* Vector API: invalid options, a fixed step beyond max_range, empty problems. */
    double x[2] = {0.5, 1.0}, v[2] = {1, 0}, jv[2], jac[4];
    cr_fd_opts bad = {0};
    bad.condition = -1;
    assert_int_equal(cr_fd_jvp(&c5, &bad, vec_sin, NULL, x, 2, v, 2, f->arena, jv, &e), CR_EINVAL);
    cr_fd_opts far = {0};
    far.step = 1;
    far.max_range = 0.5;
    assert_int_equal(cr_fd_jvp(&c5, &far, vec_sin, NULL, x, 2, v, 2, f->arena, jv, &e), CR_EINVAL);
    e = -1;
    assert_int_equal(cr_fd_jvp(&c5, NULL, vec_sin, NULL, x, 2, v, 0, f->arena, NULL, &e), CR_OK);
    ASSERT_DBL(e, 0);
    assert_int_equal(cr_fd_jacobian(&c5, NULL, vec_sin, NULL, x, 2, 2, f->arena, NULL, &e),
                     CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_fd_jacobian: invalid argument");
    e = -1;
    assert_int_equal(cr_fd_jtvp(&c5, NULL, vec_sin, NULL, x, 0, v, 2, f->arena, jv, &e), CR_OK);
    ASSERT_DBL(e, 0);
    jv[0] = jv[1] = 7;
    e = -1;
    assert_int_equal(cr_fd_jtvp(&c5, NULL, vec_sin, NULL, x, 2, NULL, 0, f->arena, jv, &e), CR_OK);
    assert_true(jv[0] == 0 && jv[1] == 0 && e == 0);
    assert_int_equal(cr_fd_jtvp(&c5, NULL, vec_sin, NULL, x, 2, NULL, 0, f->arena, jv, NULL),
                     CR_OK);
    (void)jac;
    assert_int_equal(cr_arena_used(f->arena), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_wrong_non_differentiable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registration_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registration_general, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registration_no_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registration_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_struct_and_array_cotangents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flatten_rich_struct, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flatten_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flatten_thunks, setup, teardown),
        cmocka_unit_test(test_report_limits),
        cmocka_unit_test_setup_teardown(test_fd_error_paths, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
