/*
 * Forward mode on duals, the paths the other dual tests leave out: the remaining
 * operations (sub, neg, cos, log), results of a user frule that are f32, tuples (f64 and
 * f32 fields) or not real, cr_dual_call's argument errors, and the drivers with more
 * duals than fit on the stack (scratch arena, released after), without scratch, with NULL
 * arguments and with a function that fails. Derivatives are checked against central
 * differences of plain-C versions of the same functions.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#define FD_RTOL 1e-8

/* ---- sub, neg, cos, log on a function of many inputs ------------------------------------- */

/* y0 = sum_i (cos(x_i) - x_{i+1}) x_i,  y1 = -log(1 + sum_i x_i^2) */
enum { BIGN = 40 };

static cr_status big_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    double s = 0, q = 1.0;
    for (size_t i = 0; i + 1 < n; i++)
        s += (cos(x[i]) - x[i + 1]) * x[i];
    for (size_t i = 0; i < n; i++)
        q += x[i] * x[i];
    y[0] = s;
    y[1] = -log(q);
    return CR_OK;
}

static cr_status big_dual(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *env)
{
    (void)m;
    int *fail = env;
    if (fail != NULL && *fail)
        return CR_EDOMAIN;
    cr_dual s = cr_dual_const(0.0), q = cr_dual_const(1.0);
    for (size_t i = 0; i + 1 < n; i++)
        s = cr_dual_add(s, cr_dual_mul(cr_dual_sub(cr_dual_cos(x[i]), x[i + 1]), x[i]));
    for (size_t i = 0; i < n; i++)
        q = cr_dual_add(q, cr_dual_mul(x[i], x[i]));
    y[0] = s;
    y[1] = cr_dual_neg(cr_dual_log(q));
    return CR_OK;
}

static void big_point(double *x, double *v)
{
    for (size_t i = 0; i < BIGN; i++) {
        x[i] = 0.2 + 0.9 * sin(0.7 * (double)i + 0.3);
        v[i] = cos(1.1 * (double)i);
    }
}

/* Jacobian and jvp with n + m > 32 duals: they come from the scratch arena, which is
 * rewound before return (also when f fails). */
static void test_big_scratch(void **state)
{
    fixture *f = *state;
    double x[BIGN], v[BIGN], y[2], yfd[2], jv[2], fdv[2];
    double *J = malloc(2 * BIGN * sizeof *J), *fd = malloc(2 * BIGN * sizeof *fd);
    assert_non_null(J);
    assert_non_null(fd);
    big_point(x, v);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, big_fd, NULL, x, BIGN, 2, f->arena, fd, NULL), CR_OK);
    assert_int_equal(cr_fd_jvp(&m, NULL, big_fd, NULL, x, BIGN, v, 2, f->arena, fdv, NULL), CR_OK);
    big_fd(x, BIGN, yfd, 2, NULL);

    size_t used = cr_arena_used(f->arena);
    assert_int_equal(cr_dual_jacobian(big_dual, NULL, x, BIGN, 2, f->arena, y, J), CR_OK);
    assert_int_equal(cr_arena_used(f->arena), used);
    assert_close(y[0], yfd[0], 1e-14);
    assert_close(y[1], yfd[1], 1e-14);
    for (size_t i = 0; i < 2 * BIGN; i++)
        assert_close(J[i], fd[i], FD_RTOL);

    y[0] = y[1] = 0.0;
    assert_int_equal(cr_dual_jvp(big_dual, NULL, x, BIGN, v, 2, f->arena, y, jv), CR_OK);
    assert_int_equal(cr_arena_used(f->arena), used);
    assert_close(y[0], yfd[0], 1e-14);
    assert_close(y[1], yfd[1], 1e-14);
    assert_close(jv[0], fdv[0], FD_RTOL);
    assert_close(jv[1], fdv[1], FD_RTOL);

    /* f's status comes back unchanged, and the scratch is released. */
    int fail = 1;
    assert_int_equal(cr_dual_jacobian(big_dual, &fail, x, BIGN, 2, f->arena, y, J), CR_EDOMAIN);
    assert_int_equal(cr_arena_used(f->arena), used);
    assert_int_equal(cr_dual_jvp(big_dual, &fail, x, BIGN, v, 2, f->arena, y, jv), CR_EDOMAIN);
    assert_int_equal(cr_arena_used(f->arena), used);

    /* Too many duals for the stack and no scratch. */
    assert_int_equal(cr_dual_jacobian(big_dual, NULL, x, BIGN, 2, NULL, y, J), CR_EINVAL);
    assert_int_equal(cr_dual_jvp(big_dual, NULL, x, BIGN, v, 2, NULL, y, jv), CR_EINVAL);
    /* The same work with scratch still succeeds. */
    assert_int_equal(cr_dual_jvp(big_dual, NULL, x, BIGN, v, 2, f->arena, NULL, jv), CR_OK);
    assert_close(jv[1], fdv[1], FD_RTOL);
    free(J);
    free(fd);
}

/* NULL arguments of the drivers: CR_EINVAL, with a message when there is a scratch arena. */
static void test_driver_errors(void **state)
{
    fixture *f = *state;
    double x[2] = {0.3, 0.4}, v[2] = {1, 0}, y[2], jv[2], J[4];
    assert_int_equal(cr_dual_jvp(big_dual, NULL, NULL, 2, v, 2, f->arena, y, jv), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_dual_jvp: NULL argument");
    assert_int_equal(cr_dual_jvp(big_dual, NULL, x, 2, NULL, 2, NULL, y, jv), CR_EINVAL);
    assert_int_equal(cr_dual_jvp(NULL, NULL, x, 2, v, 2, NULL, y, jv), CR_EINVAL);
    assert_int_equal(cr_dual_jacobian(big_dual, NULL, x, 2, 2, f->arena, y, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_dual_jacobian: NULL argument");
    assert_int_equal(cr_dual_jacobian(NULL, NULL, x, 2, 2, NULL, y, J), CR_EINVAL);
    /* The derivative driver returns f's status unchanged, leaving dy alone. */
    int fail = 1;
    double dy = 42.0;
    assert_int_equal(cr_dual_derivative(big_dual, &fail, 0.5, NULL, &dy), CR_EDOMAIN);
    assert_true(dy == 42.0);
    /* Afterwards the same calls with their arguments succeed. */
    double fd[4];
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, big_fd, NULL, x, 2, 2, f->arena, fd, NULL), CR_OK);
    assert_int_equal(cr_dual_jacobian(big_dual, NULL, x, 2, 2, f->arena, y, J), CR_OK);
    for (size_t i = 0; i < 4; i++)
        assert_close(J[i], fd[i], FD_RTOL);
}

/* ---- Results of user frules ---------------------------------------------------------------- */

/* pair(x0, x1) = (x0 sin(x1), x0 / x1), returned in the form g_mode selects. */
enum { P_TUPLE, P_F32, P_ONE, P_INTFIELD, P_WIDE, P_I64, P_FAIL };
static int g_mode;

static void pair_c(double x0, double x1, double *a, double *b)
{
    *a = x0 * sin(x1);
    *b = x0 / x1;
}

typedef struct pair_ab {
    double a;
    float b;
} pair_ab;
static const cr_field pair_ab_fields[2] = {{"a", offsetof(pair_ab, a), CR_KIND_F64, NULL},
                                           {"b", offsetof(pair_ab, b), CR_KIND_F32, NULL}};
static const cr_type pair_ab_type = {"pair_ab", sizeof(pair_ab), 2, pair_ab_fields};

typedef struct pair_one {
    double a;
} pair_one;
static const cr_field pair_one_fields[1] = {{"a", offsetof(pair_one, a), CR_KIND_F64, NULL}};
static const cr_type pair_one_type = {"pair_one", sizeof(pair_one), 1, pair_one_fields};

typedef struct pair_ak {
    double a;
    int64_t k;
} pair_ak;
static const cr_field pair_ak_fields[2] = {{"a", offsetof(pair_ak, a), CR_KIND_F64, NULL},
                                           {"k", offsetof(pair_ak, k), CR_KIND_I64, NULL}};
static const cr_type pair_ak_type = {"pair_ak", sizeof(pair_ak), 2, pair_ak_fields};

typedef struct pair_wide {
    double w[9];
} pair_wide;
#define WF(i)                                                                  \
    {                                                                          \
        NULL, offsetof(pair_wide, w) + (i) * sizeof(double), CR_KIND_F64, NULL \
    }
static const cr_field pair_wide_fields[9] = {WF(0), WF(1), WF(2), WF(3), WF(4),
                                             WF(5), WF(6), WF(7), WF(8)};
static const cr_type pair_wide_type = {"pair_wide", sizeof(pair_wide), 9, pair_wide_fields};

static const cr_function pair_fn = {.name = "pair", .arity = 2};

static cr_status pair_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *fv, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)fv;
    (void)nargs;
    (void)udata;
    double x0 = args[0].u.f64, x1 = args[1].u.f64, a, b;
    double d0 = dargs[1].tag == CR_TAN_F64 ? dargs[1].u.f64 : 0.0;
    double d1 = dargs[2].tag == CR_TAN_F64 ? dargs[2].u.f64 : 0.0;
    pair_c(x0, x1, &a, &b);
    double da = d0 * sin(x1) + x0 * cos(x1) * d1, db = d0 / x1 - x0 * d1 / (x1 * x1);
    switch (g_mode) {
    case P_TUPLE: {
        pair_ab *p = cr_arena_alloc(arena, sizeof *p, _Alignof(pair_ab));
        if (p == NULL)
            return CR_ENOMEM;
        p->a = a;
        p->b = (float)b;
        *y = cr_value_struct(&pair_ab_type, p);
        cr_tangent t[2] = {cr_tangent_f64(da), cr_tangent_f32((float)db)};
        return cr_tangent_struct(arena, &pair_ab_type, NULL, t, 2, dy);
    }
    case P_F32:
        *y = cr_value_f32((float)a);
        *dy = cr_tangent_f32((float)da);
        return CR_OK;
    case P_ONE: {
        pair_one *p = cr_arena_alloc(arena, sizeof *p, _Alignof(pair_one));
        if (p == NULL)
            return CR_ENOMEM;
        p->a = a;
        *y = cr_value_struct(&pair_one_type, p);
        cr_tangent t = cr_tangent_f64(da);
        return cr_tangent_struct(arena, &pair_one_type, NULL, &t, 1, dy);
    }
    case P_INTFIELD: {
        pair_ak *p = cr_arena_alloc(arena, sizeof *p, _Alignof(pair_ak));
        if (p == NULL)
            return CR_ENOMEM;
        p->a = a;
        p->k = 3;
        *y = cr_value_struct(&pair_ak_type, p);
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    case P_WIDE: {
        pair_wide *p = cr_arena_calloc(arena, 1, sizeof *p, _Alignof(pair_wide));
        if (p == NULL)
            return CR_ENOMEM;
        *y = cr_value_struct(&pair_wide_type, p);
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    case P_I64:
        *y = cr_value_i64(7);
        *dy = cr_tangent_none();
        return CR_OK;
    default:
        return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "pair: outside its domain");
    }
}

static cr_status pair_fd_a(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    double a, b;
    pair_c(x[0], x[1], &a, &b);
    y[0] = a;
    y[1] = b;
    return CR_OK;
}

typedef struct pfix {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_registry *reg;
    cr_config cfg;
} pfix;

#define CR_PFIX(state) ((pfix *)*(state))

static int pfix_setup(void **state)
{
    pfix *h = calloc(1, sizeof *h);
    if (h == NULL || cr_ctx_new(NULL, &h->ctx) != CR_OK ||
        cr_arena_new(h->ctx, NULL, &h->arena) != CR_OK ||
        cr_registry_new(h->ctx, NULL, &h->reg) != CR_OK)
        return -1;
    static const cr_argspec a2[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &pair_fn, .nargs = 2, .args = a2, .frule = pair_frule};
    if (cr_registry_add(h->reg, &def) != CR_OK)
        return -1;
    h->cfg = (cr_config){.struct_size = sizeof h->cfg, .registry = h->reg};
    *state = h;
    return 0;
}

static int pfix_teardown(void **state)
{
    pfix *h = *state;
    cr_registry_free(h->reg);
    cr_arena_free(h->arena);
    cr_ctx_free(h->ctx);
    free(h);
    return 0;
}

/* Two directions through pair, against central differences along each. */
static const double k_x[2] = {0.8, 1.3};
static const double k_dirs[2][2] = {{1.0, 0.5}, {-0.3, 2.0}};

static void pair_args(cr_dual *x)
{
    double d0[2] = {k_dirs[0][0], k_dirs[1][0]}, d1[2] = {k_dirs[0][1], k_dirs[1][1]};
    x[0] = cr_dual_make(k_x[0], d0, 2);
    x[1] = cr_dual_make(k_x[1], d1, 2);
}

static void pair_fd_dirs(pfix *h, double fd[2][2])
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    for (size_t k = 0; k < 2; k++)
        assert_int_equal(
            cr_fd_jvp(&m, NULL, pair_fd_a, NULL, k_x, 2, k_dirs[k], 2, h->arena, fd[k], NULL),
            CR_OK);
}

/* A tuple result with an f64 and an f32 field: each field is a result dual. */
static void test_call_tuple_result(void **state)
{
    pfix *h = CR_PFIX(state);
    cr_value pair = cr_value_function(&pair_fn, NULL);
    cr_dual x[2], y[2];
    pair_args(x);
    double fd[2][2], a, b;
    pair_fd_dirs(h, fd);
    pair_c(k_x[0], k_x[1], &a, &b);
    g_mode = P_TUPLE;
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, y, 2), CR_OK);
    assert_close(y[0].v, a, 1e-15);
    assert_close(y[1].v, (double)(float)b, 1e-15);
    assert_int_equal(y[0].n, 2);
    assert_int_equal(y[1].n, 2);
    for (size_t k = 0; k < 2; k++) {
        assert_close(y[0].d[k], fd[k][0], FD_RTOL);
        assert_close(y[1].d[k], fd[k][1], 1e-6); /* an f32 tangent */
    }
    /* The tuple's size must match the results expected. */
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, y, 1), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "pair gives 2 results, 1 expected");
}

/* An f32 result, and a tuple of one element. */
static void test_call_f32_and_one(void **state)
{
    pfix *h = CR_PFIX(state);
    cr_value pair = cr_value_function(&pair_fn, NULL);
    cr_dual x[2], y;
    pair_args(x);
    double fd[2][2], a, b;
    pair_fd_dirs(h, fd);
    pair_c(k_x[0], k_x[1], &a, &b);
    g_mode = P_F32;
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, &y, 1), CR_OK);
    assert_close(y.v, (double)(float)a, 1e-15);
    assert_int_equal(y.n, 2);
    for (size_t k = 0; k < 2; k++)
        assert_close(y.d[k], fd[k][0], 1e-6);
    /* A tuple of one element: its field is the result, its tangent's field the tangent. */
    g_mode = P_ONE;
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, &y, 1), CR_OK);
    assert_close(y.v, a, 1e-15);
    for (size_t k = 0; k < 2; k++)
        assert_close(y.d[k], fd[k][0], FD_RTOL);
}

/* Results that are not real: CR_EUNIMPL naming the function; a failing frule's status. The
 * arena stays usable: the same call with a real result then succeeds. */
static void test_call_not_real(void **state)
{
    pfix *h = CR_PFIX(state);
    cr_value pair = cr_value_function(&pair_fn, NULL);
    cr_dual x[2], y[2];
    pair_args(x);
    size_t used = cr_arena_used(h->arena);
    g_mode = P_INTFIELD;
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, y, 2), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(h->ctx), "pair: result field 1 is a i64, not real");
    g_mode = P_WIDE;
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, y, 2), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(h->ctx), "pair returns a struct");
    assert_contains(cr_ctx_errmsg(h->ctx), "tuples of up to 8");
    g_mode = P_I64;
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, y, 1), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(h->ctx), "pair returns a i64");
    g_mode = P_FAIL;
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, y, 1), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "pair: outside its domain");
    /* Nothing is left behind in the arena. */
    assert_int_equal(cr_arena_used(h->arena), used);
    g_mode = P_TUPLE;
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, y, 2), CR_OK);
    double a, b;
    pair_c(k_x[0], k_x[1], &a, &b);
    assert_close(y[0].v, a, 1e-15);
}

/* cr_dual_call's own argument checks. */
static void test_call_invalid(void **state)
{
    pfix *h = CR_PFIX(state);
    cr_dual x[2] = {cr_dual_var(0.4, 0), cr_dual_const(0.9)}, y[2];
    cr_value num = cr_value_f64(1.0);
    assert_int_equal(cr_dual_call(NULL, h->arena, NULL, x, 1, y, 1), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "cr_dual_call: invalid arguments");
    cr_ctx_clear_error(h->ctx);
    assert_int_equal(cr_dual_call(NULL, h->arena, &num, x, 1, y, 1), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "cr_dual_call: invalid arguments");
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_sin, x, 1, NULL, 1), CR_EINVAL);
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_sin, NULL, 1, y, 1), CR_EINVAL);
    /* A row called with the wrong arity, with an arena: the message names the row. */
    assert_int_equal(cr_dual_call(NULL, h->arena, &cr_fn_sin, x, 2, y, 1), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "takes 1 argument and gives 1 result (2, 1 given)");
    /* A function that needs its rule called, without an arena. */
    cr_value pair = cr_value_function(&pair_fn, NULL);
    g_mode = P_TUPLE;
    assert_int_equal(cr_dual_call(&h->cfg, NULL, &pair, x, 2, y, 2), CR_EINVAL);
    /* Then with one it works. */
    assert_int_equal(cr_dual_call(&h->cfg, h->arena, &pair, x, 2, y, 2), CR_OK);
    double a, b;
    pair_c(0.4, 0.9, &a, &b);
    assert_close(y[0].v, a, 1e-15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_big_scratch, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_driver_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_call_tuple_result, pfix_setup, pfix_teardown),
        cmocka_unit_test_setup_teardown(test_call_f32_and_one, pfix_setup, pfix_teardown),
        cmocka_unit_test_setup_teardown(test_call_not_real, pfix_setup, pfix_teardown),
        cmocka_unit_test_setup_teardown(test_call_invalid, pfix_setup, pfix_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
