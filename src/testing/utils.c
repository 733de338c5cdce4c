/*
 * Testing utilities of ChainRulesTestUtils and FiniteDifferences that the testers build
 * on: test_approx (which component differs, by how much), a rule configuration whose
 * rrule_via_ad / frule_via_ad are finite differences (TestConfig), FiniteDifferences'
 * grad, and well-conditioned random matrices.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chainrules/arena.h"
#include "chainrules/array.h"
#include "chainrules/ctx.h"
#include "chainrules/fd.h"
#include "chainrules/testing.h"
#include "core/checked.h"
#include "testing_impl.h"

/* ---- test_approx --------------------------------------------------------------------------- */

bool cr_test_approx(const cr_value *primal, cr_tangent a, cr_tangent b, double rtol, double atol,
                    char *where, size_t size)
{
    if (where && size)
        where[0] = '\0';
    if (!primal || !(rtol >= 0) || !(atol >= 0)) {
        if (where && size)
            snprintf(where, size, "bad arguments (NULL primal or negative tolerance)");
        return false;
    }
    size_t n = cr__test_ncomps(primal);
    double stack_a[64], stack_b[64], *va = stack_a, *vb = stack_b;
    cr_ctx *ctx = NULL;
    cr_arena *arena = NULL;
    bool ok = false;
    char msg[160] = "";
    if (n > 64) {
        size_t bytes;
        if (!cr__mul_size(n, sizeof(double), &bytes) || cr_ctx_new(NULL, &ctx) != CR_OK ||
            cr_arena_new(ctx, NULL, &arena) != CR_OK || !(va = cr_arena_alloc(arena, bytes, 0)) ||
            !(vb = cr_arena_alloc(arena, bytes, 0))) {
            if (where && size)
                snprintf(where, size, "out of memory comparing %zu components", n);
            goto done;
        }
    }
    double ia = 0, ib = 0;
    if (cr__test_expand(primal, a, va, n, &ia, msg, sizeof msg) != CR_OK) {
        if (where && size)
            snprintf(where, size, "the first tangent does not fit the primal: %s", msg);
        goto done;
    }
    if (cr__test_expand(primal, b, vb, n, &ib, msg, sizeof msg) != CR_OK) {
        if (where && size)
            snprintf(where, size, "the second tangent does not fit the primal: %s", msg);
        goto done;
    }
    /* the worst component: the largest error relative to its tolerance */
    size_t worst = SIZE_MAX;
    double worst_ratio = 0;
    for (size_t k = 0; k < n; k++) {
        double x = va[k], y = vb[k];
        if (x == y || (isnan(x) && isnan(y)))
            continue;
        double e = fabs(x - y), tol = fmax(atol, rtol * fmax(fabs(x), fabs(y)));
        double ratio = isfinite(e) ? (tol > 0 ? e / tol : HUGE_VAL) : HUGE_VAL;
        if (ratio > 1 && (worst == SIZE_MAX || ratio > worst_ratio)) {
            worst = k;
            worst_ratio = ratio;
        }
    }
    double itol = atol; /* an imaginary part carried by the tangent of a real value */
    if (ia > itol || ib > itol) {
        if (where && size)
            snprintf(where, size, "an imaginary part of %.3g in the tangent of a real value",
                     fmax(ia, ib));
        goto done;
    }
    if (worst != SIZE_MAX) {
        if (where && size) {
            char name[96];
            cr__test_comp_name(primal, worst, name, sizeof name);
            double x = va[worst], y = vb[worst], e = fabs(x - y);
            double s = fmax(fabs(x), fabs(y));
            snprintf(where, size,
                     "component %s%s: %.17g against %.17g (absolute error %.3g, relative %.3g)",
                     name[0] ? name : "(the value)", "", x, y, e, s > 0 ? e / s : e);
        }
        goto done;
    }
    ok = true;
done:
    cr_arena_free(arena);
    cr_ctx_free(ctx);
    return ok;
}

/* ---- A rule configuration by finite differences ------------------------------------------ */

/* The function f at the coordinates x of its arguments, flattened. */
typedef struct fd_call {
    const cr_value *f;
    const cr_value *args; /* the template arguments */
    size_t nargs;
    size_t *sizes; /* coordinates per argument */
    cr_arena *arena;
    const cr_value *y; /* the output's template */
    size_t m;
} fd_call;

static cr_status fd_call_fn(const double *x, size_t n, double *out, size_t m, void *env)
{
    fd_call *c = env;
    (void)n;
    cr_value vals[CR_SIG_MAX_ARGS], y;
    size_t off = 0;
    for (size_t i = 0; i < c->nargs; i++) {
        cr_status st = cr_test_unflatten(c->arena, &c->args[i], x + off, c->sizes[i], &vals[i]);
        if (st != CR_OK)
            return st;
        off += c->sizes[i];
    }
    cr_status st = cr_function_call(c->arena, c->f, vals, c->nargs, &y);
    if (st != CR_OK)
        return st;
    if (cr_test_flat_size(&y) != m)
        return CR_ESHAPE;
    return cr_test_flatten(&y, out, m);
}

/* Sets up c for f at args with output y; *xout the arguments' coordinates. */
static cr_status fd_call_init(fd_call *c, cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, const cr_value *y, double **xout, size_t *nout)
{
    if (nargs > CR_SIG_MAX_ARGS)
        return CR_EINVAL;
    *c = (fd_call){.f = f, .args = args, .nargs = nargs, .arena = arena, .y = y};
    c->m = cr_test_flat_size(y);
    c->sizes = cr_arena_alloc(arena, (nargs ? nargs : 1) * sizeof *c->sizes, 0);
    if (!c->sizes)
        return CR_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < nargs; i++) {
        c->sizes[i] = cr_test_flat_size(&args[i]);
        if (!cr__add_size(n, c->sizes[i], &n))
            return CR_EOVERFLOW;
    }
    size_t bytes;
    if (!cr__mul_size(n ? n : 1, sizeof(double), &bytes))
        return CR_EOVERFLOW;
    double *x = cr_arena_alloc(arena, bytes, 0);
    if (!x)
        return CR_ENOMEM;
    size_t off = 0;
    for (size_t i = 0; i < nargs; i++) {
        cr_status st = cr_test_flatten(&args[i], x + off, c->sizes[i]);
        if (st != CR_OK)
            return st;
        off += c->sizes[i];
    }
    *xout = x;
    *nout = n;
    return CR_OK;
}

static double *doubles(cr_arena *arena, size_t n)
{
    size_t bytes;
    if (!cr__mul_size(n ? n : 1, sizeof(double), &bytes))
        return NULL;
    return cr_arena_alloc(arena, bytes, 0);
}

static cr_status fd_frule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, size_t nargs, const cr_tangent *dargs, cr_value *y,
                          cr_tangent *dy)
{
    const cr_test_fd_env *env = cfg->ad_env;
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    fd_call c;
    double *x;
    size_t n;
    st = fd_call_init(&c, arena, f, args, nargs, y, &x, &n);
    double *v = st == CR_OK ? doubles(arena, n) : NULL;
    double *jv = st == CR_OK ? doubles(arena, c.m) : NULL;
    if (st == CR_OK && (!v || !jv))
        st = CR_ENOMEM;
    for (size_t i = 0, off = 0; st == CR_OK && i < nargs; off += c.sizes[i], i++)
        st = cr_test_tangent_flatten(&args[i], dargs[i + 1], v + off, c.sizes[i]);
    if (st == CR_OK)
        st = cr_fd_jvp(&env->method, env->fd_opts, fd_call_fn, &c, x, n, v, c.m, arena, jv, NULL);
    if (st == CR_OK)
        st = cr_test_tangent_unflatten(arena, y, jv, c.m, dy);
    return st;
}

typedef struct fd_pb_env {
    const cr_test_fd_env *env;
    fd_call c;
    double *x;
    size_t n;
} fd_pb_env;

static cr_status fd_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *penv)
{
    fd_pb_env *e = penv;
    fd_call c = e->c;
    c.arena = arena;
    double *ybar = doubles(arena, c.m), *jtv = doubles(arena, e->n);
    if (!ybar || !jtv)
        return CR_ENOMEM;
    cr_status st = cr_test_cotangent_flatten(c.y, *dy, ybar, c.m);
    if (st == CR_OK)
        st = cr_fd_jtvp(&e->env->method, e->env->fd_opts, fd_call_fn, &c, e->x, e->n, ybar, c.m,
                        arena, jtv, NULL);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    for (size_t i = 0, off = 0; i + 1 < nx && i < c.nargs; off += c.sizes[i], i++) {
        if (c.sizes[i] == 0) {
            dx[i + 1] = cr_tangent_none();
            continue;
        }
        /* the cotangent with these dual coordinates: divide mirrored entries' by their
         * weight <E_k, E_k> */
        double *w = doubles(arena, c.sizes[i]);
        if (!w)
            return CR_ENOMEM;
        cr__test_weights(&c.args[i], w, c.sizes[i]);
        for (size_t k = 0; k < c.sizes[i]; k++)
            jtv[off + k] /= w[k] > 0 ? w[k] : 1;
        st = cr_test_tangent_unflatten(arena, &c.args[i], jtv + off, c.sizes[i], &dx[i + 1]);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status fd_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb)
{
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    fd_pb_env *e = cr_arena_alloc(arena, sizeof *e, 0);
    cr_value *keep = cr_arena_alloc(arena, (nargs ? nargs : 1) * sizeof *keep, 0);
    cr_value *ykeep = cr_arena_alloc(arena, sizeof *ykeep, 0);
    if (!e || !keep || !ykeep)
        return CR_ENOMEM;
    memcpy(keep, args, nargs * sizeof *keep);
    *ykeep = *y;
    e->env = cfg->ad_env;
    st = fd_call_init(&e->c, arena, f, keep, nargs, ykeep, &e->x, &e->n);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){fd_pullback, e, "fd_pullback", nargs + 1};
    return CR_OK;
}

static cr_status fd_rrule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                 void *ad_env)
{
    (void)ad_env;
    return fd_rrule(cfg, arena, f, args, nargs, y, pb);
}

static cr_status fd_frule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                 const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                                 cr_tangent *dy, void *ad_env)
{
    (void)ad_env;
    return fd_frule(cfg, arena, f, args, nargs, dargs, y, dy);
}

cr_status cr_test_fd_config(const cr_fdm *method, const cr_fd_opts *fd_opts,
                            const cr_registry *registry, cr_test_fd_env *env, cr_config *out)
{
    if (!env || !out)
        return CR_EINVAL;
    memset(env, 0, sizeof *env);
    if (method) {
        env->method = *method;
    } else {
        cr_status st = cr_fdm_central(5, 1, &env->method);
        if (st != CR_OK)
            return st;
    }
    if (env->method.q != 1)
        return CR_EINVAL;
    env->fd_opts = fd_opts;
    *out = (cr_config){.struct_size = sizeof(cr_config),
                       .caps = CR_CAP_REVERSE | CR_CAP_FORWARD,
                       .registry = registry,
                       .frule_via_ad = fd_frule_via_ad,
                       .rrule_via_ad = fd_rrule_via_ad,
                       .ad_env = env};
    return CR_OK;
}

/* ---- FiniteDifferences' grad ------------------------------------------------------------- */

cr_status cr_fd_grad(cr_arena *arena, const cr_fdm *method, const cr_fd_opts *fd_opts,
                     const cr_value *f, const cr_value *args, size_t nargs, cr_tangent *grads)
{
    if (!arena || !f || (nargs && (!args || !grads)) || nargs > CR_SIG_MAX_ARGS)
        return CR_EINVAL;
    cr_test_fd_env env;
    cr_config cfg;
    cr_status st = cr_test_fd_config(method, fd_opts, NULL, &env, &cfg);
    if (st != CR_OK)
        return st;
    cr_value y;
    cr_pullback pb;
    st = fd_rrule(&cfg, arena, f, args, nargs, &y, &pb);
    if (st != CR_OK)
        return st;
    if (y.kind != CR_KIND_F64 && y.kind != CR_KIND_F32)
        return CR_ESHAPE; /* grad is of a real-valued function */
    cr_tangent one = y.kind == CR_KIND_F64 ? cr_tangent_f64(1.0) : cr_tangent_f32(1.0f);
    cr_tangent dx[CR_SIG_MAX_ARGS + 1];
    st = fd_pullback(&one, dx, nargs + 1, arena, pb.env);
    for (size_t i = 0; st == CR_OK && i < nargs; i++)
        grads[i] = dx[i + 1];
    return st;
}

/* ---- Well-conditioned random matrices ---------------------------------------------------- */

/* An n x n orthogonal matrix Q (row-major) from Householder reflections of random
 * vectors: Q = H_1 ... H_n, which is Haar-distributed up to signs. */
static void rand_orthogonal(uint64_t *rng, double *q, double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            q[i * n + j] = i == j;
    for (size_t k = 0; k < n; k++) {
        double norm = 0;
        for (size_t i = 0; i < n; i++) {
            /* a normal deviate (Box-Muller) */
            double u1 = cr__test_uniform(rng), u2 = cr__test_uniform(rng);
            v[i] = sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
            norm += v[i] * v[i];
        }
        norm = sqrt(norm);
        if (!(norm > 0))
            continue;
        for (size_t i = 0; i < n; i++)
            v[i] /= norm;
        /* Q <- Q (I - 2 v v^T) */
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (size_t j = 0; j < n; j++)
                s += q[i * n + j] * v[j];
            for (size_t j = 0; j < n; j++)
                q[i * n + j] -= 2 * s * v[j];
        }
    }
}

cr_status cr_test_rand_matrix(cr_arena *arena, uint64_t *rng, size_t n, double cond,
                              cr_test_matrix_kind kind, cr_array **out)
{
    if (!arena || !rng || !out || n == 0 || !(cond >= 1) || !isfinite(cond) ||
        (kind != CR_TEST_MATRIX_GENERAL && kind != CR_TEST_MATRIX_SPD &&
         kind != CR_TEST_MATRIX_ORTHOGONAL))
        return CR_EINVAL;
    /* the matrix and two n x n work matrices, with room: 4 doubles an element */
    size_t nn, shape[2] = {n, n};
    cr_status st =
        cr__ck_numel(cr_arena_ctx(arena), "cr_test_rand_matrix", 2, shape, 4 * sizeof(double), &nn);
    if (st != CR_OK)
        return st;
    cr_array *a;
    st = cr_array_new(arena, CR_DT_F64, 2, shape, &a);
    double *u = doubles(arena, nn), *w = doubles(arena, nn), *v = doubles(arena, n);
    if (st != CR_OK)
        return st;
    if (!u || !w || !v)
        return CR_ENOMEM;
    double *m = a->data;
    rand_orthogonal(rng, u, v, n);
    if (kind == CR_TEST_MATRIX_ORTHOGONAL) {
        memcpy(m, u, nn * sizeof *m);
        *out = a;
        return CR_OK;
    }
    if (kind == CR_TEST_MATRIX_GENERAL)
        rand_orthogonal(rng, w, v, n);
    else
        for (size_t i = 0; i < n; i++) /* W = U^T: A = U S U^T */
            for (size_t j = 0; j < n; j++)
                w[i * n + j] = u[j * n + i];
    /* singular values from cond down to 1, evenly spaced in the logarithm */
    for (size_t k = 0; k < n; k++)
        v[k] = n == 1 ? 1 : exp(log(cond) * (double)(n - 1 - k) / (double)(n - 1));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t k = 0; k < n; k++)
                s += u[i * n + k] * v[k] * w[k * n + j];
            m[i * n + j] = s;
        }
    if (kind == CR_TEST_MATRIX_SPD) /* exactly symmetric */
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < i; j++)
                m[i * n + j] = m[j * n + i] = 0.5 * (m[i * n + j] + m[j * n + i]);
    *out = a;
    return CR_OK;
}
