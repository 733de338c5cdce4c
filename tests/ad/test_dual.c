/*
 * Tests of forward mode: dual numbers (one and several directions), derivative, jvp and
 * Jacobians by chunks, checked against central finite differences of the same functions
 * in plain C; cr_dual_call through rows, frules and frule_via_ad, and of the variadic hypot
 * and evalpoly (a row for hypot's two arguments, frules for other counts); and the forward
 * sweep of a CR_TAPE_FORWARD tape, which must agree with the duals.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"
#include "test_variadic.h"
#include "test_wave.h"

#define FD_RTOL 1e-8

/* foo(x) = asin(0.2 + sin(x)) */
static cr_status foo_fd(double x, double *y, void *env)
{
    (void)env;
    *y = asin(0.2 + sin(x));
    return CR_OK;
}

static cr_status foo_dual(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_dual_asin(cr_dual_add(cr_dual_const(0.2), cr_dual_sin(x[0])));
    return CR_OK;
}

/* w: R^N -> R^2, w0 = sum_i sin(x_i) x_{i+1}, w1 = sqrt(sum_i x_i^2) / (1 + exp(x_0)) */
enum { WN = 19 };

static cr_status w_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    double s = 0, q = 0;
    for (size_t i = 0; i + 1 < n; i++)
        s += sin(x[i]) * x[i + 1];
    for (size_t i = 0; i < n; i++)
        q += x[i] * x[i];
    y[0] = s;
    y[1] = sqrt(q) / (1.0 + exp(x[0]));
    return CR_OK;
}

static cr_status w_dual(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_dual s = cr_dual_const(0.0), q = cr_dual_const(0.0);
    for (size_t i = 0; i + 1 < n; i++)
        s = cr_dual_add(s, cr_dual_mul(cr_dual_sin(x[i]), x[i + 1]));
    for (size_t i = 0; i < n; i++)
        q = cr_dual_add(q, cr_dual_mul(x[i], x[i]));
    y[0] = s;
    y[1] = cr_dual_div(cr_dual_sqrt(q), cr_dual_add(cr_dual_const(1.0), cr_dual_exp(x[0])));
    return CR_OK;
}

/* The same function against the tape. */
static cr_status w_tape(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0), q = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++)
        s = cr_add(t, s, cr_mul(t, cr_sin(t, x[i]), x[i + 1]));
    for (size_t i = 0; i < n; i++)
        q = cr_add(t, q, cr_mul(t, x[i], x[i]));
    y[0] = s;
    y[1] = cr_div(t, cr_sqrt(t, q), cr_add(t, cr_const(1.0), cr_exp(t, x[0])));
    return cr_tape_status(t);
}

static void w_point(double *x)
{
    for (size_t i = 0; i < WN; i++)
        x[i] = 0.3 + 0.8 * sin(1.3 * (double)i + 0.4);
}

static void test_constructors(void **state)
{
    (void)state;
    cr_dual c = cr_dual_const(2.5);
    assert_true(c.v == 2.5 && c.n == 0);
    for (size_t k = 0; k < CR_DUAL_MAX_CHUNK; k++)
        assert_true(c.d[k] == 0.0);
    cr_dual v = cr_dual_var(1.0, 3);
    assert_int_equal(v.n, 4);
    assert_true(v.d[3] == 1.0 && v.d[0] == 0.0 && v.d[7] == 0.0);
    assert_int_equal(cr_dual_var(1.0, CR_DUAL_MAX_CHUNK).n, 0); /* out of range: constant */
    double d[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    cr_dual m = cr_dual_make(0.0, d, 10);
    assert_int_equal(m.n, CR_DUAL_MAX_CHUNK);
    assert_true(m.d[7] == 8.0);
    /* Operations on constants stay constants. */
    cr_dual e = cr_dual_exp(cr_dual_mul(c, c));
    assert_int_equal(e.n, 0);
    assert_close(e.v, exp(6.25), 1e-15);
}

static void test_derivative(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    const double pts[] = {3.0, -0.7, 0.1, 2.6};
    for (size_t i = 0; i < 4; i++) {
        double y, dy, fd;
        assert_int_equal(cr_dual_derivative(foo_dual, NULL, pts[i], &y, &dy), CR_OK);
        assert_int_equal(cr_fd_derivative(&m, NULL, foo_fd, NULL, pts[i], &fd, NULL), CR_OK);
        assert_close(y, asin(0.2 + sin(pts[i])), 1e-15);
        assert_close(dy, fd, FD_RTOL);
    }
    assert_int_equal(cr_dual_derivative(NULL, NULL, 1.0, NULL, NULL), CR_EINVAL);
}

static void test_jacobian_chunks(void **state)
{
    fixture *f = *state;
    double x[WN], J[2 * WN], fd[2 * WN], y[2], yfd[2];
    w_point(x);
    /* WN = 19 columns: three chunks of 8, 8 and 3 directions. */
    assert_int_equal(cr_dual_jacobian(w_dual, NULL, x, WN, 2, f->arena, y, J), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, w_fd, NULL, x, WN, 2, f->arena, fd, NULL), CR_OK);
    w_fd(x, WN, yfd, 2, NULL);
    assert_close(y[0], yfd[0], 1e-14);
    assert_close(y[1], yfd[1], 1e-14);
    for (size_t i = 0; i < 2 * WN; i++)
        assert_close(J[i], fd[i], FD_RTOL);
    /* Without scratch, 19 + 2 duals fit on the stack. */
    assert_int_equal(cr_dual_jacobian(w_dual, NULL, x, WN, 2, NULL, NULL, J), CR_OK);
    assert_close(J[5], fd[5], FD_RTOL);
}

static void test_jvp_dual_and_tape(void **state)
{
    fixture *f = *state;
    double x[WN], v[WN], jv[2], jv_tape[2], fd[2];
    w_point(x);
    for (size_t i = 0; i < WN; i++)
        v[i] = cos(0.7 * (double)i);
    assert_int_equal(cr_dual_jvp(w_dual, NULL, x, WN, v, 2, f->arena, NULL, jv), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jvp(&m, NULL, w_fd, NULL, x, WN, v, 2, f->arena, fd, NULL), CR_OK);
    assert_close(jv[0], fd[0], FD_RTOL);
    assert_close(jv[1], fd[1], FD_RTOL);
    /* The forward sweep of a tape gives the same numbers. */
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_FORWARD};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    cr_var xs[WN], ys[2];
    assert_int_equal(cr_tape_record(t, w_tape, NULL, x, WN, xs, ys, 2), CR_OK);
    assert_int_equal(cr_tape_jvp(t, xs, v, WN, ys, 2, jv_tape), CR_OK);
    assert_close(jv_tape[0], jv[0], 1e-14);
    assert_close(jv_tape[1], jv[1], 1e-14);
    /* A first-order tape has no forward sweep. */
    cr_tape *r;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &r), CR_OK);
    cr_var rx[WN], ry[2];
    assert_int_equal(cr_tape_record(r, w_tape, NULL, x, WN, rx, ry, 2), CR_OK);
    assert_int_equal(cr_tape_jvp(r, rx, v, WN, ry, 2, jv_tape), CR_EMISUSE);
    assert_contains(cr_ctx_errmsg(f->ctx), "CR_TAPE_FORWARD");
    /* Non-finite directions */
    v[3] = (double)NAN;
    assert_int_equal(cr_dual_jvp(w_dual, NULL, x, WN, v, 2, f->arena, NULL, jv), CR_EDOMAIN);
    assert_int_equal(cr_tape_jvp(t, xs, v, WN, ys, 2, jv_tape), CR_EDOMAIN);
    cr_tape_free(t);
    cr_tape_free(r);
}

/* A user function with an frule only: cube(x) = x^3, frule written in the generic form. */
static cr_status cube_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    double x = args[0].u.f64;
    *out = cr_value_f64(x * x * x);
    return CR_OK;
}
static const cr_function cube_fn = {.name = "cube", .arity = 1, .primal = cube_primal};

/* d cube = 3 x^2 dx */
static cr_status cube_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *fv, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cube_primal(arena, fv, args, nargs, y);
    double x = args[0].u.f64, dx = 0.0;
    if (dargs[1].tag == CR_TAN_F64)
        dx = dargs[1].u.f64;
    *dy = cr_tangent_f64(3.0 * x * x * dx);
    return st;
}

/* A user registry holding cube's frule. */
static cr_registry *cube_registry(fixture *f)
{
    cr_registry *reg;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    static const cr_argspec a1[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &cube_fn, .nargs = 1, .args = a1, .frule = cube_frule};
    assert_int_equal(cr_registry_add(reg, &def), CR_OK);
    return reg;
}

static void test_dual_call(void **state)
{
    fixture *f = *state;
    /* A row with two results: sincos, all directions in one evaluation. */
    double d[3] = {1.0, 2.0, -0.5};
    cr_dual x = cr_dual_make(0.9, d, 3), sc[2];
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_sincos, &x, 1, sc, 2), CR_OK);
    for (size_t k = 0; k < 3; k++) {
        assert_close(sc[0].d[k], cos(0.9) * d[k], 1e-15);
        assert_close(sc[1].d[k], -sin(0.9) * d[k], 1e-15);
    }
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_sincos, &x, 1, sc, 1), CR_EINVAL);

    /* A user frule, in a user registry: one call per direction. */
    cr_registry *reg = cube_registry(f);
    cr_config cfg = {.struct_size = sizeof cfg, .registry = reg};
    cr_value cube = cr_value_function(&cube_fn, NULL);
    cr_dual y, s0;
    assert_int_equal(cr_dual_call(&cfg, f->arena, &cube, &x, 1, &y, 1), CR_OK);
    assert_close(y.v, 0.729, 1e-15);
    for (size_t k = 0; k < 3; k++)
        assert_close(y.d[k], 3 * 0.81 * d[k], 1e-15);
    /* The result in place of the argument: every direction still reads the argument's
     * tangents (the first direction's result once overwrote them). */
    cr_dual xy = x;
    assert_int_equal(cr_dual_call(&cfg, f->arena, &cube, &xy, 1, &xy, 1), CR_OK);
    assert_true(xy.v == y.v && xy.n == y.n);
    assert_memory_equal(xy.d, y.d, sizeof y.d);
    xy = x;
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_sin, &xy, 1, &xy, 1), CR_OK);
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_sin, &x, 1, &s0, 1), CR_OK);
    assert_true(xy.v == s0.v && xy.n == s0.n);
    assert_memory_equal(xy.d, s0.d, sizeof s0.d);
    /* The built-in rows still work with a registry (looked up, then the row's rule). */
    cr_dual s;
    assert_int_equal(cr_dual_call(&cfg, f->arena, &cr_fn_sin, &x, 1, &s, 1), CR_OK);
    assert_close(s.d[1], cos(0.9) * 2.0, 1e-15);

    /* No frule and no forward capability: CR_ENORULE naming the signature. */
    cr_value wave = cr_value_function(&wave_fn, NULL);
    assert_int_equal(cr_dual_call(NULL, f->arena, &wave, &x, 1, &y, 1), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(f->ctx), "wave(f64)");
    /* With an engine that has an overlay for it: frule_via_ad records it. */
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_overlay(eng, &wave_fn, wave_ad, 1, NULL), CR_OK);
    assert_int_equal(cr_dual_call(cr_engine_config(eng), f->arena, &wave, &x, 1, &y, 1), CR_OK);
    assert_close(y.v, 0.9 * sin(0.9), 1e-15);
    for (size_t k = 0; k < 3; k++)
        assert_close(y.d[k], (sin(0.9) + 0.9 * cos(0.9)) * d[k], 1e-14);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/* A user frule for sin that counts its calls and gives the built-in row's answer. */
static int g_sin_calls;
static cr_status counting_sin_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                    const cr_value *fv, const cr_value *args, size_t nargs,
                                    cr_value *y, cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    g_sin_calls++;
    return cr_frule(NULL, arena, dargs, fv, args, nargs, y, dy);
}

/*
 * A function an engine declared zero-adjoint has zero tangents under the engine's
 * configuration whatever rules it has, as on the engine's tapes: a user function with an
 * frule in the engine's registry (cr_dual_call called the frule first, and gave its nonzero
 * tangent), and a built-in row (evaluated for its value alone). The values stay those of the
 * function; a configuration without the declaration still gives the rule's tangent.
 */
static void test_dual_call_zero_adjoint(void **state)
{
    fixture *f = *state;
    cr_registry *reg = cube_registry(f);
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
    cr_value cube = cr_value_function(&cube_fn, NULL);
    double d[3] = {1.0, -2.0, 0.5};
    cr_dual x = cr_dual_make(0.7, d, 3), y;
    /* Before the declarations: the frule's and the row's tangents (nonzero). */
    assert_int_equal(cr_dual_call(cr_engine_config(eng), f->arena, &cube, &x, 1, &y, 1), CR_OK);
    assert_true(y.d[0] != 0.0);
    assert_int_equal(cr_dual_call(cr_engine_config(eng), NULL, &cr_fn_sin, &x, 1, &y, 1), CR_OK);
    assert_true(y.d[0] != 0.0);
    assert_int_equal(cr_engine_zero_adjoint(eng, &cube_fn), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(eng, cr_fn_sin.u.func.fn), CR_OK);
    const cr_value *fs[2] = {&cube, &cr_fn_sin};
    const double want[2] = {0.7 * 0.7 * 0.7, sin(0.7)};
    cr_tape_params p = {.struct_size = sizeof p, .engine = eng};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    for (size_t c = 0; c < 2; c++) {
        assert_int_equal(cr_dual_call(cr_engine_config(eng), f->arena, fs[c], &x, 1, &y, 1), CR_OK);
        assert_close(y.v, want[c], 1e-15);
        for (size_t k = 0; k < 3; k++)
            assert_true(y.d[k] == 0.0);
        /* The engine's reverse tape agrees: a zero gradient. */
        cr_tape_reset(t);
        cr_var xv = cr_tape_input(t, 0.7), yv;
        assert_int_equal(cr_tape_call(t, fs[c], &xv, 1, &yv, 1), CR_OK);
        assert_close(yv.v, want[c], 1e-15);
        double g = 1.0;
        assert_int_equal(cr_tape_gradient(t, yv, &xv, 1, &g), CR_OK);
        assert_true(g == 0.0);
    }
    /* The row's value needs no arena; another configuration still differentiates it. */
    assert_int_equal(cr_dual_call(cr_engine_config(eng), NULL, &cr_fn_sin, &x, 1, &y, 1), CR_OK);
    assert_true(y.v == sin(0.7) && y.d[1] == 0.0);
    cr_config ucfg = {.struct_size = sizeof ucfg, .registry = reg};
    assert_int_equal(cr_dual_call(&ucfg, f->arena, &cube, &x, 1, &y, 1), CR_OK);
    double h = 1e-4,
           fd = ((0.7 + h) * (0.7 + h) * (0.7 + h) - (0.7 - h) * (0.7 - h) * (0.7 - h)) / (2 * h);
    assert_close(y.d[1], fd * d[1], FD_RTOL);
    cr_tape_free(t);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/*
 * A row called with a configuration that has a registry (a user registry, an engine's
 * configuration): when the registry's rule is the row itself, the row is evaluated once for
 * all directions and needs no arena, as with no configuration (it was sent through the frule,
 * once per direction, and refused a NULL arena with CR_EINVAL). A user rule that overrides the
 * row in the registry is still called, once per direction, and needs an arena.
 */
static void test_dual_call_registry_rows(void **state)
{
    fixture *f = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
    cr_config ucfg = {.struct_size = sizeof ucfg, .registry = reg};
    const cr_config *cfgs[2] = {&ucfg, cr_engine_config(eng)};
    double d[3] = {1.0, -2.0, 0.5};
    cr_dual x = cr_dual_make(0.4, d, 3), y0, y, sc0[2], sc[2];
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_tanh, &x, 1, &y0, 1), CR_OK);
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_sincos, &x, 1, sc0, 2), CR_OK);
    /* tanh's derivative against central differences */
    double h = 1e-4,
           fd = (tanh(0.4 - 2 * h) - 8 * tanh(0.4 - h) + 8 * tanh(0.4 + h) - tanh(0.4 + 2 * h)) /
                (12 * h);
    for (size_t c = 0; c < 2; c++) {
        assert_int_equal(cr_dual_call(cfgs[c], NULL, &cr_fn_tanh, &x, 1, &y, 1), CR_OK);
        assert_int_equal(y.n, 3);
        assert_true(y.v == y0.v);
        for (size_t k = 0; k < 3; k++) {
            assert_true(y.d[k] == y0.d[k]);
            assert_close(y.d[k], fd * d[k], FD_RTOL);
        }
        assert_int_equal(cr_dual_call(cfgs[c], NULL, &cr_fn_sincos, &x, 1, sc, 2), CR_OK);
        for (size_t o = 0; o < 2; o++)
            for (size_t k = 0; k < 3; k++)
                assert_true(sc[o].d[k] == sc0[o].d[k]);
    }
    /* sin overridden in the registry by a user frule (the row's signature): called per
     * direction, with an arena; without one, CR_EINVAL. */
    cr_value xv = cr_value_f64(0.4);
    cr_rule_match m;
    assert_int_equal(cr_registry_lookup(NULL, NULL, CR_MODE_FRULE, &cr_fn_sin, &xv, 1, &m), CR_OK);
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = cr_fn_sin.u.func.fn,
                       .nargs = m.def->nargs,
                       .args = m.def->args,
                       .variadic = m.def->variadic,
                       .frule = counting_sin_frule};
    assert_int_equal(cr_registry_add(reg, &def), CR_OK);
    cr_dual s0;
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_sin, &x, 1, &s0, 1), CR_OK);
    for (size_t c = 0; c < 2; c++) {
        g_sin_calls = 0;
        assert_int_equal(cr_dual_call(cfgs[c], f->arena, &cr_fn_sin, &x, 1, &y, 1), CR_OK);
        assert_int_equal(g_sin_calls, 3);
        for (size_t k = 0; k < 3; k++)
            assert_close(y.d[k], s0.d[k], 1e-15);
        assert_int_equal(cr_dual_call(cfgs[c], NULL, &cr_fn_sin, &x, 1, &y, 1), CR_EINVAL);
        assert_int_equal(g_sin_calls, 3);
        /* rows of other functions are still taken directly */
        assert_int_equal(cr_dual_call(cfgs[c], NULL, &cr_fn_tanh, &x, 1, &y, 1), CR_OK);
    }
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/*
 * hypot(x, y, ...) and evalpoly(x, c0, ...) of 2, 3, 5 and 10 arguments through cr_dual_call
 * (built-in rules, and a configuration with a user registry): alone with one direction per
 * argument, and in a program through cr_dual_jacobian (two chunks at 10), against central
 * differences of the same functions in plain C. hypot(x, y) is its row (no arena needed);
 * other counts go through the frule (an arena needed). One argument: CR_EINVAL with the
 * function's own message; a fixed-arity row given another count: its row's message.
 */
static void test_dual_variadic(void **state)
{
    fixture *f = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    cr_config cfg = {.struct_size = sizeof cfg, .registry = reg};
    const cr_config *cfgs[2] = {NULL, &cfg};
    const cr_value *fns[2] = {&cr_fn_hypot, &cr_fn_evalpoly};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < 4; i++)
            for (size_t c = 0; c < 2; c++) {
                vcall v = {fns[k], f->arena, cfgs[c]};
                size_t n = vcall_ns[i];
                const double *x = vcall_pts[i];
                double fd[10], jac[10], y, y0;
                if (n <= CR_DUAL_MAX_CHUNK) {
                    cr_dual d[10], o;
                    for (size_t j = 0; j < n; j++)
                        d[j] = cr_dual_var(x[j], j);
                    assert_int_equal(cr_dual_call(cfgs[c], f->arena, fns[k], d, n, &o, 1), CR_OK);
                    assert_int_equal(o.n, n);
                    assert_close(o.v, vcall_f_c(&v, x, n), 1e-15);
                    vcall_fd_grad_of(f->arena, vcall_f_fd, &v, x, n, fd);
                    for (size_t j = 0; j < n; j++)
                        assert_close(o.d[j], fd[j], FD_RTOL);
                }
                assert_int_equal(cr_dual_jacobian(vcall_dual, &v, x, n, 1, f->arena, &y, jac),
                                 CR_OK);
                vcall_fd(x, n, &y0, 1, &v);
                assert_close(y, y0, 1e-14);
                vcall_fd_grad(f->arena, &v, x, n, fd);
                for (size_t j = 0; j < n; j++)
                    assert_close(jac[j], fd[j], FD_RTOL);
            }

    /* The row needs no arena; the rule does (CR_EINVAL, nowhere for a message). */
    cr_dual d3[3] = {cr_dual_var(0.6, 0), cr_dual_var(-1.9, 1), cr_dual_var(1.1, 2)}, o;
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_hypot, d3, 2, &o, 1), CR_OK);
    assert_close(o.v, hypot(0.6, -1.9), 1e-15);
    assert_int_equal(cr_dual_call(NULL, NULL, &cr_fn_hypot, d3, 3, &o, 1), CR_EINVAL);
    /* One argument, with and without the registry; sin of two. */
    for (size_t c = 0; c < 2; c++) {
        assert_int_equal(cr_dual_call(cfgs[c], f->arena, &cr_fn_hypot, d3, 1, &o, 1), CR_EINVAL);
        assert_contains(cr_ctx_errmsg(f->ctx), "hypot takes two or more real arguments");
        assert_int_equal(cr_dual_call(cfgs[c], f->arena, &cr_fn_evalpoly, d3, 1, &o, 1), CR_EINVAL);
        assert_contains(cr_ctx_errmsg(f->ctx), "evalpoly takes a number x and one or more");
    }
    assert_int_equal(cr_dual_call(NULL, f->arena, &cr_fn_sin, d3, 2, &o, 1), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "sin takes 1 argument");
    /* Another count of results: refused. */
    cr_dual o2[2];
    assert_int_equal(cr_dual_call(NULL, f->arena, &cr_fn_hypot, d3, 3, o2, 2), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "hypot gives 1 results, 2 expected");
    cr_registry_free(reg);
}

static int run_dual(void)
{
    const struct CMUnitTest dual[] = {
        cmocka_unit_test(test_constructors),
        cmocka_unit_test(test_derivative),
        cmocka_unit_test_setup_teardown(test_jacobian_chunks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_jvp_dual_and_tape, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dual_call, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dual_variadic, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dual_call_zero_adjoint, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_dual_call_registry_rows, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(dual, NULL, NULL);
}

/*
 * Forward mode on duals, the paths the other dual tests leave out: the remaining
 * operations (sub, neg, cos, log), results of a user frule that are f32, tuples (f64 and
 * f32 fields) or not real, cr_dual_call's argument errors, and the drivers with more
 * duals than fit on the stack (scratch arena, released after), without scratch, with NULL
 * arguments and with a function that fails. Derivatives are checked against central
 * differences of plain-C versions of the same functions.
 */

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

static int run_dual_edges(void)
{
    const struct CMUnitTest dual_edges[] = {
        cmocka_unit_test_setup_teardown(test_big_scratch, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_driver_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_call_tuple_result, pfix_setup, pfix_teardown),
        cmocka_unit_test_setup_teardown(test_call_f32_and_one, pfix_setup, pfix_teardown),
        cmocka_unit_test_setup_teardown(test_call_not_real, pfix_setup, pfix_teardown),
        cmocka_unit_test_setup_teardown(test_call_invalid, pfix_setup, pfix_teardown),
    };
    return cmocka_run_group_tests(dual_edges, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_dual();
    failed += run_dual_edges();
    return failed;
}
