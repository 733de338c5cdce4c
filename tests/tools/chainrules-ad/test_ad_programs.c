/*
 * The derivatives chainrules-ad writes for tests/tools/chainrules-ad/programs.c, checked against
 * central differences (cr_fd_jacobian, five points, adaptive steps), against one another's
 * independent code paths (reverse sweep, tangent, vector tangent) and against the tape
 * engine (Rosenbrock): never against the generated code itself.
 */
#include "programs.h"
#include "test_rosen.h"
#include "test_util.h"

enum { N = 6 };

/* The test points: away from the branch ties of the functions. */
static const double k_points[3][N] = {{0.3, -0.7, 1.2, 0.5, 0.9, 0.2},
                                      {1.1, 0.4, 0.8, -0.6, 1.7, 0.3},
                                      {-0.2, 0.6, 0.4, 0.45, -0.3, 2.1}};

/* ---- Finite differences of any map R^n -> R^m ------------------------------------------- */

typedef void (*map_fn)(const double *x, size_t n, double *y, size_t m, void *env);

typedef struct map_env {
    map_fn f;
    void *env;
} map_env;

static cr_status call_map(const double *x, size_t n, double *y, size_t m, void *env)
{
    map_env *e = env;
    e->f(x, n, y, m, e->env);
    return CR_OK;
}

/* jac (m x n, row-major) of f at x by central differences. */
static void fd_jacobian(fixture *fx, map_fn f, void *env, const double *x, size_t n, size_t m,
                        double *jac)
{
    cr_fdm method;
    assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
    map_env e = {f, env};
    assert_int_equal(cr_fd_jacobian(&method, NULL, call_map, &e, x, n, m, fx->arena, jac, NULL),
                     CR_OK);
}

/* ---- Arrays in, a scalar out ------------------------------------------------------------- */

typedef struct array_fn {
    const char *name;
    double (*f)(const double *, int);
    double (*rev)(const double *, double *, int, double);
    double (*fwd)(const double *, const double *, int, double *);
    double (*fwdv)(const double *, const double *, int, double *, int);
} array_fn;

#define P_ENTRY(name) {#name, name, name##_rev, name##_fwd, name##_fwdv},
static const array_fn k_array_fns[] = {P_ARRAY_FNS(P_ENTRY)};

static void array_map(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    y[0] = ((const array_fn *)env)->f(x, (int)n);
}

static void check_array_fn(fixture *fx, const array_fn *a, const double *x)
{
    double fd[N], g[N] = {0}, jv[N * 20], v[N * 20], fdv[20];
    fd_jacobian(fx, array_map, (void *)a, x, N, 1, fd);
    /* reverse: value and gradient, added into the shadow */
    double y = a->rev(x, g, N, 1.0);
    assert_close(y, a->f(x, N), 1e-14);
    for (int i = 0; i < N; i++)
        assert_near_(g[i], fd[i], 1e-7, a->name, __FILE__, __LINE__);
    double g2[N];
    memcpy(g2, g, sizeof g);
    a->rev(x, g2, N, 0.5);
    for (int i = 0; i < N; i++)
        assert_close(g2[i], 1.5 * g[i], 1e-13);
    /* tangent: one direction at a time */
    for (int i = 0; i < N; i++) {
        double e[N] = {0}, d = NAN;
        e[i] = 1;
        assert_close(a->fwd(x, e, N, &d), y, 1e-14);
        assert_near_(d, fd[i], 1e-7, a->name, __FILE__, __LINE__);
    }
    /* vector tangent: 20 directions (more than one block of CR_AD_VMAX) */
    for (int k = 0; k < 20; k++) {
        fdv[k] = 0;
        for (int i = 0; i < N; i++) {
            v[i * 20 + k] = sin(1.0 + k + 7.0 * i);
            fdv[k] += fd[i] * v[i * 20 + k];
        }
    }
    assert_close(a->fwdv(x, v, N, jv, 20), y, 1e-14);
    for (int k = 0; k < 20; k++) {
        assert_near_(jv[k], fdv[k], 1e-7, a->name, __FILE__, __LINE__);
        /* lane k against f_fwd in the same direction */
        double dir[N], d = NAN;
        for (int i = 0; i < N; i++)
            dir[i] = v[i * 20 + k];
        a->fwd(x, dir, N, &d);
        assert_near_(jv[k], d, 1e-13, a->name, __FILE__, __LINE__);
    }
}

static void test_array_functions(void **state)
{
    fixture *fx = *state;
    for (size_t f = 0; f < sizeof k_array_fns / sizeof k_array_fns[0]; f++)
        for (int p = 0; p < 3; p++)
            check_array_fn(fx, &k_array_fns[f], k_points[p]);
}

/* ---- f_rev_set: the gradient assigned into shadows filled with NaN ----------------------- */

typedef struct set_fn {
    const char *name;
    double (*f)(const double *, int);
    double (*rev)(const double *, double *, int, double);
    double (*set)(const double *, double *, int, double);
} set_fn;

#define P_SET_ENTRY(name) {#name, name, name##_rev, name##_rev_set},
static const set_fn k_set_fns[] = {P_SET_FNS(P_SET_ENTRY)};

/* f_rev_set against f_rev from zeroed shadows and central differences; an element it does not
 * write (NaN left) must be one the function never reads (zero derivative); a second call
 * with another seed replaces the first result. */
static void check_set_fn(fixture *fx, const set_fn *a, const double *x)
{
    array_fn af = {a->name, a->f, NULL, NULL, NULL};
    double fd[N], g[N] = {0}, s[N];
    fd_jacobian(fx, array_map, &af, x, N, 1, fd);
    double y = a->rev(x, g, N, 0.7);
    for (int i = 0; i < N; i++)
        s[i] = NAN;
    assert_close(a->set(x, s, N, 0.7), y, 1e-15);
    int written = 0;
    for (int i = 0; i < N; i++) {
        if (isnan(s[i])) {
            assert_near_(g[i], 0, 0, a->name, __FILE__, __LINE__);
            assert_near_(fd[i], 0, 1e-9, a->name, __FILE__, __LINE__);
            continue;
        }
        written++;
        assert_near_(s[i], g[i], 1e-13 * (1 + fabs(g[i])), a->name, __FILE__, __LINE__);
        assert_near_(s[i], 0.7 * fd[i], 1e-7 * (1 + fabs(g[i])), a->name, __FILE__, __LINE__);
    }
    assert_true(written > 0);
    double s2[N];
    memcpy(s2, s, sizeof s);
    a->set(x, s2, N, -1.3);
    for (int i = 0; i < N; i++)
        if (!isnan(s[i]))
            assert_near_(s2[i], -1.3 / 0.7 * s[i], 1e-12 * (1 + fabs(s[i])), a->name, __FILE__,
                         __LINE__);
}

static void test_reverse_set(void **state)
{
    fixture *fx = *state;
    for (size_t f = 0; f < sizeof k_set_fns / sizeof k_set_fns[0]; f++)
        for (int p = 0; p < 3; p++)
            check_set_fn(fx, &k_set_fns[f], k_points[p]);
}

/* The generated Rosenbrock gradient against the tape engine's, at n = 1000. */
static void test_rosen_against_tape(void **state)
{
    fixture *fx = *state;
    enum { M = 1000 };
    double *x = malloc(M * sizeof *x), *g = calloc(M, sizeof *g), *gt = malloc(M * sizeof *gt);
    assert_non_null(x);
    assert_non_null(g);
    assert_non_null(gt);
    for (int i = 0; i < M; i++)
        x[i] = 0.5 + 0.7 * sin(0.1 * i);
    cr_tape *t;
    assert_int_equal(cr_tape_new(fx->ctx, NULL, &t), CR_OK);
    double yt;
    assert_int_equal(cr_tape_value_and_gradient(t, rosen_t, NULL, x, M, &yt, gt), CR_OK);
    double y = p_rosen_rev(x, g, M, 1.0);
    assert_close(y, yt, 1e-13);
    for (int i = 0; i < M; i++)
        assert_close(g[i], gt[i], 1e-12);
    cr_tape_free(t);
    free(x);
    free(g);
    free(gt);
}

/* ---- Other signatures -------------------------------------------------------------------- */

static void scalar_map(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    y[0] = p_scalar(x[0], x[1], *(const int *)env);
}

static void test_scalar_parameters(void **state)
{
    fixture *fx = *state;
    for (int k = 0; k < 4; k++) {
        const double x[2] = {0.4 - 0.3 * k, 0.3 + 0.1 * k};
        double fd[2], ab = 0.25, bb = -1; /* the shadows are added to */
        fd_jacobian(fx, scalar_map, &k, x, 2, 1, fd);
        assert_close(p_scalar_rev(x[0], &ab, x[1], &bb, k, 2.0), p_scalar(x[0], x[1], k), 1e-14);
        ASSERT_CLOSE(ab, 0.25 + 2 * fd[0], 1e-7);
        ASSERT_CLOSE(bb, -1 + 2 * fd[1], 1e-7);
        double da, db;
        p_scalar_fwd(x[0], 1, x[1], 0, k, &da);
        p_scalar_fwd(x[0], 0, x[1], 1, k, &db);
        ASSERT_CLOSE(da, fd[0], 1e-7);
        ASSERT_CLOSE(db, fd[1], 1e-7);
    }
}

/* x (N) and scale -> y (N). */
static void outputs_map(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)env;
    (void)m;
    p_outputs(x, x[n - 1], y, (int)n - 1);
}

static void test_output_array(void **state)
{
    fixture *fx = *state;
    enum { K = 5 };
    const double in[K + 1] = {0.3, -1.2, 0.7, 2.0, 0.4, 1.5}; /* x, then scale */
    double jac[K * (K + 1)];
    fd_jacobian(fx, outputs_map, NULL, in, K + 1, K, jac);
    /* reverse: y_b holds the cotangent on entry and is zero on return */
    double y[K], yb[K] = {1, -2, 0.5, 3, -1}, xb[K] = {0}, sb = 0, want[K + 1] = {0};
    for (int j = 0; j <= K; j++)
        for (int i = 0; i < K; i++)
            want[j] += jac[i * (K + 1) + j] * yb[i];
    p_outputs_rev(in, xb, in[K], &sb, y, yb, K);
    for (int j = 0; j < K; j++)
        ASSERT_CLOSE(xb[j], want[j], 1e-7);
    ASSERT_CLOSE(sb, want[K], 1e-7);
    for (int i = 0; i < K; i++) {
        ASSERT_DBL(yb[i], 0.0);
        assert_close(y[i], in[K] * in[i] * in[(i + 1) % K], 1e-15);
    }
    /* tangent and vector tangent: J v */
    const double xd[K] = {0.1, 0.2, -0.3, 0.4, 0.5}, sd = -0.7;
    double yd[K], jvref[K];
    for (int i = 0; i < K; i++) {
        jvref[i] = jac[i * (K + 1) + K] * sd;
        for (int j = 0; j < K; j++)
            jvref[i] += jac[i * (K + 1) + j] * xd[j];
    }
    p_outputs_fwd(in, xd, in[K], sd, y, yd, K);
    for (int i = 0; i < K; i++)
        ASSERT_CLOSE(yd[i], jvref[i], 1e-7);
    /* the full Jacobian at once: direction j is the unit vector e_j */
    double xdv[K * (K + 1)] = {0}, sdv[K + 1] = {0}, ydv[K * (K + 1)];
    for (int j = 0; j < K; j++)
        xdv[j * (K + 1) + j] = 1;
    sdv[K] = 1;
    p_outputs_fwdv(in, xdv, in[K], sdv, y, ydv, K, K + 1);
    for (int i = 0; i < K; i++)
        for (int j = 0; j <= K; j++)
            ASSERT_CLOSE(ydv[i * (K + 1) + j], jac[i * (K + 1) + j], 1e-7);
}

/* u (N) and h -> u after the steps (N). */
static void inplace_map(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)env;
    (void)m;
    memcpy(y, x, (n - 1) * sizeof *y);
    p_inplace(y, (int)n - 1, x[n - 1]);
}

static void test_inplace_array(void **state)
{
    fixture *fx = *state;
    enum { K = 4 };
    const double in[K + 1] = {0.5, -0.2, 0.9, 0.1, 0.3};
    double jac[K * (K + 1)];
    fd_jacobian(fx, inplace_map, NULL, in, K + 1, K, jac);
    double u[K], ub[K] = {1, 0.5, -2, 0.25}, hb = 0, want[K + 1] = {0};
    for (int j = 0; j <= K; j++)
        for (int i = 0; i < K; i++)
            want[j] += jac[i * (K + 1) + j] * ub[i];
    memcpy(u, in, sizeof u);
    p_inplace_rev(u, ub, K, in[K], &hb);
    for (int i = 0; i < K; i++) {
        ASSERT_DBL(u[i], in[i]);            /* the adjoint restored what it overwrote */
        ASSERT_CLOSE(ub[i], want[i], 1e-7); /* the cotangent of the input values */
    }
    ASSERT_CLOSE(hb, want[K], 1e-7);
    double ud[K] = {0.3, 0.1, -0.2, 0.7};
    memcpy(u, in, sizeof u);
    p_inplace_fwd(u, ud, K, in[K], 1.0);
    for (int i = 0; i < K; i++) {
        double r = jac[i * (K + 1) + K];
        const double d0[K] = {0.3, 0.1, -0.2, 0.7};
        for (int j = 0; j < K; j++)
            r += jac[i * (K + 1) + j] * d0[j];
        ASSERT_CLOSE(ud[i], r, 1e-7);
    }
}

/* bias, w[3], scale, x[4] -> p_struct. */
static void struct_map(const double *v, size_t n, double *y, size_t m, void *env)
{
    (void)env;
    (void)m;
    (void)n;
    struct p_model md = {7, v[0], {v[1], v[2], v[3]}, v[4]};
    y[0] = p_struct(&md, v + 5, 4);
}

static void test_struct_parameter(void **state)
{
    fixture *fx = *state;
    const double v[9] = {0.2, 0.5, -1.0, 0.7, 1.3, 0.4, -0.3, 0.8, 0.1};
    double fd[9];
    fd_jacobian(fx, struct_map, NULL, v, 9, 1, fd);
    struct p_model m = {7, v[0], {v[1], v[2], v[3]}, v[4]}, mb = {-5, 0, {0, 0, 0}, 0};
    double xb[4] = {0};
    p_struct_rev(&m, &mb, v + 5, xb, 4, 1.0);
    ASSERT_CLOSE(mb.bias, fd[0], 1e-7);
    for (int j = 0; j < 3; j++)
        ASSERT_CLOSE(mb.w[j], fd[1 + j], 1e-7);
    ASSERT_CLOSE(mb.scale, fd[4], 1e-7);
    assert_int_equal(mb.id, -5); /* integer fields are not touched */
    for (int j = 0; j < 4; j++)
        ASSERT_CLOSE(xb[j], fd[5 + j], 1e-7);
    struct p_model md = {0, 1, {0.5, 0.25, -1}, 2};
    const double xd[4] = {0.1, 0.2, 0.3, 0.4};
    double d;
    p_struct_fwd(&m, &md, v + 5, xd, 4, &d);
    double want = fd[0] * 1 + fd[1] * 0.5 + fd[2] * 0.25 - fd[3] + fd[4] * 2;
    for (int j = 0; j < 4; j++)
        want += fd[5 + j] * xd[j];
    ASSERT_CLOSE(d, want, 1e-7);
    /* f_fwdv, 20 directions (two blocks): mdv[k] holds the struct's tangents in direction k;
     * each lane against central differences and f_fwd in its direction */
    enum { ND = 20 };
    struct p_model mdv[ND];
    double xdv[4 * ND], dv[ND];
    for (int k = 0; k < ND; k++) {
        mdv[k] = (struct p_model){-1, sin(k + 1.0), {cos(k + 2.0), sin(3.0 * k), 0.1 * k}, 1.5};
        for (int j = 0; j < 4; j++)
            xdv[j * ND + k] = cos(1.0 + k + 5.0 * j);
    }
    ASSERT_CLOSE(p_struct_fwdv(&m, mdv, v + 5, xdv, 4, dv, ND), p_struct(&m, v + 5, 4), 1e-14);
    for (int k = 0; k < ND; k++) {
        const double in[9] = {mdv[k].bias, mdv[k].w[0],     mdv[k].w[1],
                              mdv[k].w[2], mdv[k].scale,    xdv[k],
                              xdv[ND + k], xdv[2 * ND + k], xdv[3 * ND + k]};
        double wk = 0;
        for (int j = 0; j < 9; j++)
            wk += fd[j] * in[j];
        ASSERT_CLOSE(dv[k], wk, 1e-7);
        double dk = NAN;
        p_struct_fwd(&m, &mdv[k], v + 5, in + 5, 4, &dk);
        ASSERT_CLOSE(dv[k], dk, 1e-13);
    }
}

static void float_map(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)env;
    (void)m;
    float xf[N];
    for (size_t i = 0; i < n; i++)
        xf[i] = (float)x[i];
    y[0] = p_float(xf, (int)n);
}

static void test_float(void **state)
{
    fixture *fx = *state;
    float x[N], xb[N] = {0};
    double xd[N], fd[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)k_points[0][i];
        xd[i] = x[i];
    }
    cr_fdm method;
    assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
    cr_fd_opts opts = {.factor = 1e8}; /* float round-off */
    map_env e = {float_map, NULL};
    assert_int_equal(cr_fd_jacobian(&method, &opts, call_map, &e, xd, N, 1, fx->arena, fd, NULL),
                     CR_OK);
    float y = p_float_rev(x, xb, N, 1.0f);
    assert_close(y, p_float(x, N), 1e-6);
    for (int i = 0; i < N; i++) {
        ASSERT_CLOSE(xb[i], fd[i], 2e-3);
        float e1[N] = {0}, d;
        e1[i] = 1;
        p_float_fwd(x, e1, N, &d);
        ASSERT_CLOSE(d, xb[i], 1e-5);
    }
}

/* p(2), u(2) -> p_timeloop at `steps`. */
static void timeloop_map(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    double u[2] = {x[2], x[3]};
    y[0] = p_timeloop(x, u, *(const long *)env);
}

/* A 1e5-step time loop: with 20 snapshots (binomial checkpointing) the gradient is the
 * same as storing every step's values, to 1e-12, and agrees with central differences; the
 * value stack's peak is bounded (the snapshots hold the state), where the plain adjoint's
 * grows with the steps. */
static void test_checkpointed_time_loop(void **state)
{
    fixture *fx = *state;
    long steps = 100000;
    const double x[4] = {2.0, 0.3, 0.5, 0.1};
    double pb[2] = {0}, ub[2] = {0}, pbc[2] = {0}, ubc[2] = {0};
    double u[2] = {x[2], x[3]}, uc[2] = {x[2], x[3]};
    cr_adstack_trim();
    double y = p_timeloop_rev(x, pb, u, ub, steps, 1.0);
    size_t plain_bytes = cr_adstack_cache_bytes();
    cr_adstack_trim();
    double yc = p_timeloop_ck_rev(x, pbc, uc, ubc, steps, 1.0);
    size_t ck_bytes = cr_adstack_cache_bytes();
    cr_adstack_trim();
    assert_close(yc, y, 1e-15);
    for (int i = 0; i < 2; i++) {
        assert_close(pbc[i], pb[i], 1e-12);
        assert_close(ubc[i], ub[i], 1e-12);
    }
    assert_true(plain_bytes >= (size_t)steps * 16); /* at least two values a step */
    assert_true(ck_bytes <= 64 * 1024);
    double fd[4];
    fd_jacobian(fx, timeloop_map, &steps, x, 4, 1, fd);
    ASSERT_CLOSE(pbc[0], fd[0], 1e-6);
    ASSERT_CLOSE(pbc[1], fd[1], 1e-6);
    ASSERT_CLOSE(ubc[0], fd[2], 1e-6);
    ASSERT_CLOSE(ubc[1], fd[3], 1e-6);
}

/* ---- The Jacobian entry (--jacobian): static lane sparsity ------------------------------- */

typedef struct jac_fn {
    const char *name;
    double (*f)(const double *, int);
    double (*rev)(const double *, double *, int, double);
    double (*jac)(const double *, int, double *);
} jac_fn;

#define P_JAC_ENTRY(name) {#name, name, name##_rev, name##_jacfwd},
static const jac_fn k_jac_fns[] = {P_JAC_FNS(P_JAC_ENTRY)};

/* f_jacfwd's row against central differences and against f_rev's gradient (another code
 * path); every entry written (NaN before); the value is f's. */
static void test_jacobian_entry(void **state)
{
    fixture *fx = *state;
    for (size_t f = 0; f < sizeof k_jac_fns / sizeof k_jac_fns[0]; f++)
        for (int p = 0; p < 3; p++) {
            const jac_fn *a = &k_jac_fns[f];
            const double *x = k_points[p];
            array_fn af = {a->name, a->f, a->rev, NULL, NULL};
            double fd[N], g[N] = {0}, J[N];
            for (int i = 0; i < N; i++)
                J[i] = NAN;
            fd_jacobian(fx, array_map, &af, x, N, 1, fd);
            a->rev(x, g, N, 1.0);
            assert_close(a->jac(x, N, J), a->f(x, N), 1e-14);
            for (int i = 0; i < N; i++) {
                assert_near_(J[i], fd[i], 1e-7, a->name, __FILE__, __LINE__);
                assert_near_(J[i], g[i], 1e-12, a->name, __FILE__, __LINE__);
            }
        }
}

/* Scalars, an output array, an in-out array (columns of its values on entry), float, and a
 * 1000-step time loop whose lanes grow through the iterations. */
static void test_jacobian_signatures(void **state)
{
    fixture *fx = *state;
    /* p_scalar: 1 x 2 */
    for (int k = 0; k < 4; k++) {
        const double x[2] = {0.4 - 0.3 * k, 0.3 + 0.1 * k};
        double fd[2], J[2] = {NAN, NAN};
        fd_jacobian(fx, scalar_map, &k, x, 2, 1, fd);
        assert_close(p_scalar_jacfwd(x[0], x[1], k, J), p_scalar(x[0], x[1], k), 1e-14);
        ASSERT_CLOSE(J[0], fd[0], 1e-7);
        ASSERT_CLOSE(J[1], fd[1], 1e-7);
    }
    /* p_outputs: 5 x 6, against differences and the vector forward mode */
    {
        enum { K = 5 };
        const double in[K + 1] = {0.3, -1.2, 0.7, 2.0, 0.4, 1.5};
        double jac[K * (K + 1)], J[K * (K + 1)], y[K], yv[K];
        fd_jacobian(fx, outputs_map, NULL, in, K + 1, K, jac);
        for (int i = 0; i < K * (K + 1); i++)
            J[i] = NAN;
        p_outputs_jacfwd(in, in[K], y, K, J);
        double xdv[K * (K + 1)] = {0}, sdv[K + 1] = {0}, ydv[K * (K + 1)];
        for (int j = 0; j < K; j++)
            xdv[j * (K + 1) + j] = 1;
        sdv[K] = 1;
        p_outputs_fwdv(in, xdv, in[K], sdv, yv, ydv, K, K + 1);
        for (int i = 0; i < K; i++) {
            ASSERT_DBL(y[i], yv[i]);
            for (int j = 0; j <= K; j++) {
                ASSERT_CLOSE(J[i * (K + 1) + j], jac[i * (K + 1) + j], 1e-7);
                ASSERT_CLOSE(J[i * (K + 1) + j], ydv[i * (K + 1) + j], 1e-13);
            }
        }
    }
    /* p_inplace: 4 x 5 (u on exit by u on entry and h) */
    {
        enum { K = 4 };
        const double in[K + 1] = {0.5, -0.2, 0.9, 0.1, 0.3};
        double jac[K * (K + 1)], J[K * (K + 1)], u[K], want[K];
        fd_jacobian(fx, inplace_map, NULL, in, K + 1, K, jac);
        inplace_map(in, K + 1, want, K, NULL);
        for (int i = 0; i < K * (K + 1); i++)
            J[i] = NAN;
        memcpy(u, in, sizeof u);
        p_inplace_jacfwd(u, K, in[K], J);
        for (int i = 0; i < K; i++) {
            ASSERT_DBL(u[i], want[i]);
            for (int j = 0; j <= K; j++)
                ASSERT_CLOSE(J[i * (K + 1) + j], jac[i * (K + 1) + j], 1e-7);
        }
    }
    /* p_float: against the float reverse mode */
    {
        float x[N], xb[N] = {0};
        double J[N];
        for (int i = 0; i < N; i++)
            x[i] = (float)k_points[1][i];
        p_float_rev(x, xb, N, 1.0f);
        assert_close(p_float_jacfwd(x, N, J), p_float(x, N), 1e-6);
        for (int i = 0; i < N; i++)
            ASSERT_CLOSE(J[i], xb[i], 1e-5);
    }
    /* p_timeloop, 1000 steps: rows u[0], u[1], the value; columns p[0], p[1], u[0], u[1] on
     * entry; the value's row against the reverse mode and differences */
    {
        long steps = 1000;
        const double x[4] = {2.0, 0.3, 0.5, 0.1};
        double J[12], u[2] = {x[2], x[3]}, ur[2] = {x[2], x[3]}, pb[2] = {0}, ub[2] = {0};
        double fd[4];
        for (int i = 0; i < 12; i++)
            J[i] = NAN;
        double y = p_timeloop_jacfwd(x, u, steps, J);
        assert_close(p_timeloop_rev(x, pb, ur, ub, steps, 1.0), y, 1e-14);
        fd_jacobian(fx, timeloop_map, &steps, x, 4, 1, fd);
        const double g[4] = {pb[0], pb[1], ub[0], ub[1]};
        for (int j = 0; j < 4; j++) {
            ASSERT_CLOSE(J[8 + j], g[j], 1e-12);
            ASSERT_CLOSE(J[8 + j], fd[j], 1e-6);
        }
        /* rows of u on exit: y = u0^2 + u1, so J_y = 2 u0 J_u0 + J_u1 */
        for (int j = 0; j < 4; j++)
            ASSERT_CLOSE(J[8 + j], 2 * u[0] * J[j] + J[4 + j], 1e-12);
    }
    /* p_wide: 20 lanes through a call, in two blocks */
    {
        enum { W = 20 };
        double x[W], J[W], g[W] = {0}, fd[W];
        for (int i = 0; i < W; i++)
            x[i] = 0.3 + 0.9 * sin(1.0 + 2.0 * i);
        array_fn af = {"p_wide", p_wide, p_wide_rev, NULL, NULL};
        for (int i = 0; i < W; i++)
            J[i] = NAN;
        assert_close(p_wide_jacfwd(x, W, J), p_wide(x, W), 1e-14);
        p_wide_rev(x, g, W, 1.0);
        fd_jacobian(fx, array_map, &af, x, W, 1, fd);
        for (int i = 0; i < W; i++) {
            ASSERT_CLOSE(J[i], fd[i], 1e-7);
            ASSERT_CLOSE(J[i], g[i], 1e-12);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_array_functions, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_rosen_against_tape, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_reverse_set, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scalar_parameters, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_output_array, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_inplace_array, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_struct_parameter, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_float, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_jacobian_entry, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_jacobian_signatures, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_checkpointed_time_loop, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
