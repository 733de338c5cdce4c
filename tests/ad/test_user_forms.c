/*
 * Second-order forms declared by a user's own array rules (cr_rule_def.form, .linearity):
 * three rules registered in an engine, each with an frule, an rrule and a form,
 *     cube(A) = A.^3 (an array result),
 *     wsq(w, x) = Σ w_i x_i² (two array arguments, a scalar result; its form's check
 *         declares it linear when x is a constant),
 *     sqsq(x) = (Σ x_i²)² (a form that reads the result's tangent ẏ),
 * recorded on second-order tapes and in prepared H v. Each H v is checked against central
 * differences, along the direction, of the gradient of a first-order tape (which knows
 * only the rules' pullbacks). Also: the same rule without a form is refused (CR_EUNIMPL) on
 * a second-order tape and by cr_prepare_hvp_arrays; a form's check refuses a call; a
 * form's failure is the tape's failure; the registry refuses a form without its step and an
 * unknown class, and reads a definition of the first version's size as one without a form.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "test_util.h"

#define N 4 /* elements of each array input */

/* A point of L components from a seed, and a direction with every component nonzero. */
static void point(size_t L, unsigned seed, double scale, double *z)
{
    for (size_t i = 0; i < L; i++)
        z[i] = scale * sin(1.7 * (double)i + 0.9 * (double)seed + 0.4);
}

static void direction(size_t L, unsigned seed, double *v)
{
    for (size_t i = 0; i < L; i++)
        v[i] = cos(1.3 * (double)i + 0.7 * (double)seed + 0.2);
}

/* f(a) or f(a, b) (n arguments) with a scalar or an array result. */
static cr_var call_s(cr_tape *t, const cr_value *f, cr_targ a, cr_targ b, size_t n)
{
    cr_targ args[2] = {a, b};
    return cr_tape_acall_s(t, f, args, n);
}

static cr_avar call_a(cr_tape *t, const cr_value *f, cr_targ a, cr_targ b, size_t n)
{
    cr_targ args[2] = {a, b};
    return cr_tape_acall_a(t, f, args, n);
}

static cr_var sum_sin(cr_tape *t, cr_avar a)
{
    return cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(a)));
}

/* ---- Reading tangents -------------------------------------------------------------------- */

/* The n elements of a tangent (zero, f64 or a float array of n elements) as doubles. */
static cr_status tan_read(cr_tangent v, size_t n, double *out)
{
    cr_status st = cr_tangent_unthunk(v, &v);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        out[i] = 0.0;
    if (cr_tangent_is_zero(v))
        return CR_OK;
    if (v.tag == CR_TAN_F64 && n == 1) {
        out[0] = v.u.f64;
        return CR_OK;
    }
    if (v.tag != CR_TAN_ARRAY || cr_array_numel(v.u.arr) != n)
        return CR_EINVAL;
    for (size_t i = 0; i < n; i++)
        out[i] = creal(cr_array_get_linear(v.u.arr, i));
    return CR_OK;
}

/* A value's n elements (a float array). */
static void val_read(const cr_value *v, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = creal(cr_array_get_linear(v->u.arr, i));
}

/* A new f64 vector of n elements from data, as a tangent (in the arena). */
static cr_status vec_tangent(cr_arena *arena, const double *data, size_t n, cr_tangent *out)
{
    cr_array *a;
    size_t sh[1] = {n};
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, sh, &a);
    if (st != CR_OK)
        return st;
    memcpy(a->data, data, n * sizeof *data);
    *out = cr_tangent_array(a);
    return CR_OK;
}

static cr_status vec_value(cr_arena *arena, const double *data, size_t n, cr_value *out)
{
    cr_tangent t;
    cr_status st = vec_tangent(arena, data, n, &t);
    if (st == CR_OK)
        *out = cr_value_array(t.u.arr);
    return st;
}

/* ---- cube(A) = A.^3 ------------------------------------------------------------------------ */

static cr_status cube_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *y)
{
    (void)fv;
    (void)nargs;
    size_t n = cr_array_numel(args[0].u.arr);
    double a[N];
    if (n != N)
        return CR_ESHAPE;
    val_read(&args[0], n, a);
    for (size_t i = 0; i < n; i++)
        a[i] = a[i] * a[i] * a[i];
    return vec_value(arena, a, n, y);
}

static const cr_function cube_fn = {.name = "cube", .arity = 1, .primal = cube_primal};

static cr_status cube_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    double a[N], ad[N];
    cr_status st = cube_primal(arena, f, args, nargs, y);
    if (st == CR_OK)
        st = tan_read(dargs[1], N, ad);
    if (st != CR_OK)
        return st;
    val_read(&args[0], N, a);
    for (size_t i = 0; i < N; i++)
        ad[i] *= 3.0 * a[i] * a[i];
    return vec_tangent(arena, ad, N, dy);
}

/* Ā = 3 A.^2 ⊙ Ȳ */
static cr_status cube_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    const cr_value *A = env;
    double a[N], g[N];
    cr_status st = tan_read(*dy, N, g);
    if (st != CR_OK)
        return st;
    val_read(A, N, a);
    for (size_t i = 0; i < N; i++)
        g[i] *= 3.0 * a[i] * a[i];
    dx[0] = cr_tangent_none();
    return vec_tangent(arena, g, N, &dx[1]);
}

static cr_status cube_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){cube_pullback, (void *)(uintptr_t)&args[0], "cube_pullback", 2};
    return cube_primal(arena, f, args, nargs, y);
}

/* S = d/dε [3 (A + εȦ).^2 ⊙ Ȳ] = 6 A ⊙ Ȧ ⊙ Ȳ; the state: Ȳ read once. */
static cr_status cube_form_init(const cr_form_point *p, void **state)
{
    double *g = cr_arena_alloc(p->arena, N * sizeof *g, _Alignof(double));
    if (g == NULL)
        return CR_ENOMEM;
    *state = g;
    return tan_read(p->ybar, N, g);
}

static cr_status cube_form_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                               cr_tangent ydot, cr_tangent *S)
{
    (void)ydot;
    const double *g = state;
    double a[N], ad[N];
    cr_status st = tan_read(xdot[0], N, ad);
    if (st != CR_OK)
        return st;
    val_read(&p->args[0], N, a);
    for (size_t i = 0; i < N; i++)
        ad[i] *= 6.0 * a[i] * g[i];
    return vec_tangent(p->arena, ad, N, &S[0]);
}

static const cr_rule_form k_cube_form = {NULL, cube_form_init, cube_form_dir};

/* ---- wsq(w, x) = Σ w_i x_i² ------------------------------------------------------------------ */

static cr_status wsq_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *y)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    double w[N], x[N], s = 0.0;
    if (cr_array_numel(args[0].u.arr) != N || cr_array_numel(args[1].u.arr) != N)
        return CR_ESHAPE;
    val_read(&args[0], N, w);
    val_read(&args[1], N, x);
    for (size_t i = 0; i < N; i++)
        s += w[i] * x[i] * x[i];
    *y = cr_value_f64(s);
    return CR_OK;
}

static const cr_function wsq_fn = {.name = "wsq", .arity = 2, .primal = wsq_primal};

static cr_status wsq_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                           const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                           cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    double w[N], x[N], wd[N], xd[N], s = 0.0;
    cr_status st = wsq_primal(arena, f, args, nargs, y);
    if (st == CR_OK && (st = tan_read(dargs[1], N, wd)) == CR_OK)
        st = tan_read(dargs[2], N, xd);
    if (st != CR_OK)
        return st;
    val_read(&args[0], N, w);
    val_read(&args[1], N, x);
    for (size_t i = 0; i < N; i++)
        s += wd[i] * x[i] * x[i] + 2.0 * w[i] * x[i] * xd[i];
    *dy = cr_tangent_f64(s);
    return CR_OK;
}

/* w̄ = ȳ x.^2, x̄ = 2 ȳ w ⊙ x */
static cr_status wsq_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)nx;
    const cr_value *args = env;
    double w[N], x[N], gw[N], gx[N], g;
    cr_status st = tan_read(*dy, 1, &g);
    if (st != CR_OK)
        return st;
    val_read(&args[0], N, w);
    val_read(&args[1], N, x);
    for (size_t i = 0; i < N; i++) {
        gw[i] = g * x[i] * x[i];
        gx[i] = 2.0 * g * w[i] * x[i];
    }
    dx[0] = cr_tangent_none();
    if ((st = vec_tangent(arena, gw, N, &dx[1])) != CR_OK)
        return st;
    return vec_tangent(arena, gx, N, &dx[2]);
}

static cr_status wsq_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){wsq_pullback, (void *)(uintptr_t)args, "wsq_pullback", 3};
    return wsq_primal(arena, f, args, nargs, y);
}

/* With x a constant, wsq is linear in w: the class says so and the form is not called.
 * Counted, to see that the engine takes the class. */
static int g_wsq_dirs;

static const char *wsq_form_check(const cr_value *args, size_t nargs, const bool *var,
                                  uint32_t *linearity)
{
    (void)args;
    (void)nargs;
    if (!var[1])
        *linearity = CR_LINEAR;
    return NULL;
}

/* S_w = 2 ȳ x ⊙ ẋ, S_x = 2 ȳ (ẇ ⊙ x + w ⊙ ẋ) */
static cr_status wsq_form_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                              cr_tangent ydot, cr_tangent *S)
{
    (void)state;
    (void)ydot;
    double w[N], x[N], wd[N], xd[N], sw[N], sx[N], g;
    cr_status st = tan_read(p->ybar, 1, &g);
    if (st == CR_OK && (st = tan_read(xdot[0], N, wd)) == CR_OK)
        st = tan_read(xdot[1], N, xd);
    if (st != CR_OK)
        return st;
    g_wsq_dirs++;
    val_read(&p->args[0], N, w);
    val_read(&p->args[1], N, x);
    for (size_t i = 0; i < N; i++) {
        sw[i] = 2.0 * g * x[i] * xd[i];
        sx[i] = 2.0 * g * (wd[i] * x[i] + w[i] * xd[i]);
    }
    if (p->var[0] && (st = vec_tangent(p->arena, sw, N, &S[0])) != CR_OK)
        return st;
    return p->var[1] ? vec_tangent(p->arena, sx, N, &S[1]) : CR_OK;
}

static const cr_rule_form k_wsq_form = {wsq_form_check, NULL, wsq_form_dir};

/* ---- sqsq(x) = (Σ x_i²)² --------------------------------------------------------------------- */

static double sumsq(const cr_value *x)
{
    double a[N], s = 0.0;
    val_read(x, N, a);
    for (size_t i = 0; i < N; i++)
        s += a[i] * a[i];
    return s;
}

static cr_status sqsq_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *y)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    if (cr_array_numel(args[0].u.arr) != N)
        return CR_ESHAPE;
    double s = sumsq(&args[0]);
    *y = cr_value_f64(s * s);
    return CR_OK;
}

static const cr_function sqsq_fn = {.name = "sqsq", .arity = 1, .primal = sqsq_primal};

static cr_status sqsq_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    double x[N], xd[N], d = 0.0;
    cr_status st = sqsq_primal(arena, f, args, nargs, y);
    if (st == CR_OK)
        st = tan_read(dargs[1], N, xd);
    if (st != CR_OK)
        return st;
    val_read(&args[0], N, x);
    for (size_t i = 0; i < N; i++)
        d += x[i] * xd[i];
    *dy = cr_tangent_f64(4.0 * sumsq(&args[0]) * d);
    return CR_OK;
}

/* x̄ = 4 s ȳ x, s = Σ x² */
static cr_status sqsq_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    const cr_value *X = env;
    double x[N], g;
    cr_status st = tan_read(*dy, 1, &g);
    if (st != CR_OK)
        return st;
    val_read(X, N, x);
    double c = 4.0 * sumsq(X) * g;
    for (size_t i = 0; i < N; i++)
        x[i] *= c;
    dx[0] = cr_tangent_none();
    return vec_tangent(arena, x, N, &dx[1]);
}

static cr_status sqsq_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){sqsq_pullback, (void *)(uintptr_t)&args[0], "sqsq_pullback", 2};
    return sqsq_primal(arena, f, args, nargs, y);
}

/* S = 4 ȳ (ṡ x + s ẋ) with ṡ = 2 x·ẋ = ẏ / (2 s) (ẏ = 2 s ṡ, the frule's tangent);
 * refused (CR_EDOMAIN, a message naming sqsq) at x = 0, where ṡ cannot be had from ẏ. */
static cr_status sqsq_form_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                               cr_tangent ydot, cr_tangent *S)
{
    (void)state;
    double x[N], xd[N], g, yd, s = sumsq(&p->args[0]);
    cr_status st = tan_read(p->ybar, 1, &g);
    if (st == CR_OK && (st = tan_read(xdot[0], N, xd)) == CR_OK)
        st = tan_read(ydot, 1, &yd);
    if (st != CR_OK)
        return st;
    if (s == 0.0)
        return cr_ctx_error(cr_arena_ctx(p->arena), CR_EDOMAIN, "%s: a zero array", p->name);
    val_read(&p->args[0], N, x);
    double sd = yd / (2.0 * s);
    for (size_t i = 0; i < N; i++)
        x[i] = 4.0 * g * (sd * x[i] + s * xd[i]);
    return vec_tangent(p->arena, x, N, &S[0]);
}

static const cr_rule_form k_sqsq_form = {NULL, NULL, sqsq_form_dir};

/* ---- The engine ------------------------------------------------------------------------------ */

static const cr_argspec k_a1[1] = {{CR_M_A_F64, NULL}};
static const cr_argspec k_a2[2] = {{CR_M_A_F64, NULL}, {CR_M_A_F64, NULL}};

/* The three rules, with their forms (forms false: cube without its form). */
static cr_engine *user_engine(cr_ctx *ctx, bool forms)
{
    cr_engine *eng;
    assert_int_equal(cr_engine_new(ctx, NULL, &eng), CR_OK);
    cr_rule_def d[3] = {
        {.struct_size = sizeof d[0],
         .fn = &cube_fn,
         .nargs = 1,
         .args = k_a1,
         .frule = cube_frule,
         .rrule = cube_rrule,
         .form = forms ? &k_cube_form : NULL},
        {.struct_size = sizeof d[0],
         .fn = &wsq_fn,
         .nargs = 2,
         .args = k_a2,
         .frule = wsq_frule,
         .rrule = wsq_rrule,
         .form = &k_wsq_form},
        {.struct_size = sizeof d[0],
         .fn = &sqsq_fn,
         .nargs = 1,
         .args = k_a1,
         .frule = sqsq_frule,
         .rrule = sqsq_rrule,
         .form = &k_sqsq_form},
    };
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(cr_engine_from_rrule(eng, &d[i]), CR_OK);
    return eng;
}

/* The program of two arrays A, w (N each):
 *   sum(sin.(cube(A))) + sin(wsq(w, A)) + sin(sqsq(w)) + wsq(A, c)
 * with c a constant array (wsq linear in its first argument there). */
static double k_c[N] = {0.3, -0.7, 1.1, 0.4};

static cr_status prog(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    static cr_array ca;
    ca = cr_array_vector(k_c, N);
    cr_value cube = cr_value_function(&cube_fn, NULL), wsq = cr_value_function(&wsq_fn, NULL);
    cr_value sqsq = cr_value_function(&sqsq_fn, NULL);
    cr_targ A = cr_targ_arr(xs[0]), w = cr_targ_arr(xs[1]);
    cr_var a = sum_sin(t, call_a(t, &cube, A, A, 1));
    cr_var b = cr_sin(t, call_s(t, &wsq, w, A, 2));
    cr_var c = cr_sin(t, call_s(t, &sqsq, w, w, 1));
    cr_var d = call_s(t, &wsq, A, cr_targ_arr(cr_av_const(&ca)), 2);
    *y = cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
    return cr_tape_status(t);
}

/* The gradient at z (2N: A then w) from a first-order tape. */
static void grad_at(cr_ctx *ctx, cr_engine *eng, const double *z, double *g)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    double zz[2 * N];
    memcpy(zz, z, sizeof zz);
    cr_array a[2] = {cr_array_vector(zz, N), cr_array_vector(zz + N, N)};
    cr_array ga[2] = {cr_array_vector(g, N), cr_array_vector(g + N, N)};
    cr_array *gp[2] = {&ga[0], &ga[1]};
    cr_avar X[2] = {cr_tape_array_input(t, &a[0]), cr_tape_array_input(t, &a[1])};
    cr_var y;
    assert_ok(t, prog(t, X, 2, &y, NULL));
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, X, 2, gp));
    cr_tape_free(t);
}

/* H v by central differences of the gradient along v. */
static void fd_hv(cr_ctx *ctx, cr_engine *eng, const double *z, const double *v, double *hv)
{
    double zp[2 * N], zm[2 * N], gp[2 * N], gm[2 * N], h = 1e-5;
    for (size_t i = 0; i < 2 * N; i++) {
        zp[i] = z[i] + h * v[i];
        zm[i] = z[i] - h * v[i];
    }
    grad_at(ctx, eng, zp, gp);
    grad_at(ctx, eng, zm, gm);
    for (size_t i = 0; i < 2 * N; i++)
        hv[i] = (gp[i] - gm[i]) / (2 * h);
}

static void test_tape_hvp(void **state)
{
    fixture *f = *state;
    cr_engine *eng = user_engine(f->ctx, true);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[2 * N];
        point(2 * N, seed, 0.9, z);
        for (unsigned dir = 0; dir < 3; dir++) {
            double v[2 * N], hv[2 * N], want[2 * N];
            direction(2 * N, dir + 3 * seed, v);
            cr_tape_reset(t);
            cr_array a[2] = {cr_array_vector(z, N), cr_array_vector(z + N, N)};
            cr_array va[2] = {cr_array_vector(v, N), cr_array_vector(v + N, N)};
            cr_array ha[2] = {cr_array_vector(hv, N), cr_array_vector(hv + N, N)};
            const cr_array *vp[2] = {&va[0], &va[1]};
            cr_array *hp[2] = {&ha[0], &ha[1]};
            cr_avar X[2] = {cr_tape_array_input(t, &a[0]), cr_tape_array_input(t, &a[1])};
            cr_var y;
            assert_ok(t, prog(t, X, 2, &y, NULL));
            int before = g_wsq_dirs;
            assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, X, 2, vp, hp));
            /* wsq(w, A) took its form, wsq(A, c) its class (linear): one step each sweep */
            assert_int_equal(g_wsq_dirs - before, 1);
            fd_hv(f->ctx, eng, z, v, want);
            for (size_t i = 0; i < 2 * N; i++)
                ASSERT_CLOSE(hv[i], want[i], 1e-6);
        }
    }
    cr_tape_free(t);
    cr_engine_free(eng);
}

static void test_prepared_hvp(void **state)
{
    fixture *f = *state;
    cr_engine *eng = user_engine(f->ctx, true);
    double z0[2 * N];
    point(2 * N, 7, 0.8, z0);
    cr_array a0[2] = {cr_array_vector(z0, N), cr_array_vector(z0 + N, N)};
    const cr_array *x0[2] = {&a0[0], &a0[1]};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp_arrays(f->ctx, eng, prog, NULL, x0, 2, &p), CR_OK);
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[2 * N], v[2 * N], hv[2 * N], want[2 * N], g[2 * N], gwant[2 * N], y;
        point(2 * N, seed + 11, 0.8, z);
        direction(2 * N, seed, v);
        cr_array a[2] = {cr_array_vector(z, N), cr_array_vector(z + N, N)};
        cr_array va[2] = {cr_array_vector(v, N), cr_array_vector(v + N, N)};
        cr_array ha[2] = {cr_array_vector(hv, N), cr_array_vector(hv + N, N)};
        cr_array gaa[2] = {cr_array_vector(g, N), cr_array_vector(g + N, N)};
        const cr_array *xp[2] = {&a[0], &a[1]}, *vp[2] = {&va[0], &va[1]};
        cr_array *hp[2] = {&ha[0], &ha[1]}, *gp[2] = {&gaa[0], &gaa[1]};
        assert_int_equal(cr_prepared_hvp_arrays(p, xp, 2, vp, hp, &y, gp), CR_OK);
        fd_hv(f->ctx, eng, z, v, want);
        grad_at(f->ctx, eng, z, gwant);
        for (size_t i = 0; i < 2 * N; i++) {
            ASSERT_CLOSE(hv[i], want[i], 1e-6);
            ASSERT_CLOSE(g[i], gwant[i], 1e-12);
        }
    }
    cr_prepared_free(p);
    cr_engine_free(eng);
}

/* cube without a form: refused by second-order tapes and prepared H v, naming it. */
static void test_without_form(void **state)
{
    fixture *f = *state;
    cr_engine *eng = user_engine(f->ctx, false);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double z[2 * N];
    point(2 * N, 1, 0.9, z);
    cr_array a[2] = {cr_array_vector(z, N), cr_array_vector(z + N, N)};
    cr_avar X[2] = {cr_tape_array_input(t, &a[0]), cr_tape_array_input(t, &a[1])};
    cr_var y;
    assert_int_equal(prog(t, X, 2, &y, NULL), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "cube: no second-order form on the tape");
    cr_tape_free(t);
    const cr_array *xp[2] = {&a[0], &a[1]};
    cr_prepared *p = (cr_prepared *)1;
    assert_int_equal(cr_prepare_hvp_arrays(f->ctx, eng, prog, NULL, xp, 2, &p), CR_EUNIMPL);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(f->ctx), "cube: no second-order form");
    cr_engine_free(eng);
}

/* A check that refuses, and a step that fails: the tape's failure, with the form's words. */
static const char *refuse_check(const cr_value *args, size_t nargs, const bool *var,
                                uint32_t *linearity)
{
    (void)args;
    (void)nargs;
    (void)var;
    (void)linearity;
    return "the test refuses it";
}

static void test_refusals(void **state)
{
    fixture *f = *state;
    static const cr_rule_form k_refuse = {refuse_check, NULL, cube_form_dir};
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    cr_rule_def d = {.struct_size = sizeof d,
                     .fn = &cube_fn,
                     .nargs = 1,
                     .args = k_a1,
                     .frule = cube_frule,
                     .rrule = cube_rrule,
                     .form = &k_refuse};
    assert_int_equal(cr_engine_from_rrule(eng, &d), CR_OK);
    d = (cr_rule_def){.struct_size = sizeof d,
                      .fn = &sqsq_fn,
                      .nargs = 1,
                      .args = k_a1,
                      .frule = sqsq_frule,
                      .rrule = sqsq_rrule,
                      .form = &k_sqsq_form};
    assert_int_equal(cr_engine_from_rrule(eng, &d), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double z[N] = {0.5, -1.0, 2.0, 0.25}, v[N] = {1, 1, 1, 1}, hv[N];
    cr_array xa = cr_array_vector(z, N), va = cr_array_vector(v, N), ha = cr_array_vector(hv, N);
    cr_value cube = cr_value_function(&cube_fn, NULL), sqsq = cr_value_function(&sqsq_fn, NULL);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_targ xarg = cr_targ_arr(X);
    cr_tape_acall_a(t, &cube, &xarg, 1);
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "cube: no second-order form on the tape: the test refuses");

    /* sqsq at a zero array: its step fails, and the tape keeps its message */
    memset(z, 0, sizeof z);
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    xarg = cr_targ_arr(X);
    cr_var y = cr_tape_acall_s(t, &sqsq, &xarg, 1);
    assert_ok(t, cr_tape_status(t));
    const cr_array *vp[1] = {&va};
    cr_array *hp[1] = {&ha};
    assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, vp, hp), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "sqsq: a zero array");
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* The registry: a form without its step, an unknown class; the first version's size. */
static void test_registry(void **state)
{
    fixture *f = *state;
    static const cr_rule_form k_nodir = {NULL, cube_form_init, NULL};
    cr_registry *reg;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    cr_rule_def d = {.struct_size = sizeof d,
                     .fn = &cube_fn,
                     .nargs = 1,
                     .args = k_a1,
                     .rrule = cube_rrule,
                     .form = &k_nodir};
    assert_int_equal(cr_registry_add(reg, &d), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cube: a second-order form without dir");
    d.form = NULL;
    d.linearity = 7;
    assert_int_equal(cr_registry_add(reg, &d), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cube: unknown linearity class 7");
    /* the first version ends before linearity: the fields after it are not read */
    d.struct_size = (uint32_t)offsetof(cr_rule_def, linearity);
    d.form = &k_nodir;
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    cr_rule_info info;
    assert_int_equal(cr_registry_get(reg, 0, &info), CR_OK);
    assert_null(info.def->form);
    assert_int_equal(info.def->linearity, CR_NONLINEAR);
    cr_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tape_hvp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prepared_hvp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_without_form, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_registry, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
