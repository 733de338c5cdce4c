/*
 * The problems of the second-order tests (test_tape_array_jvp_hvp.c, test_tape_kernel_jvp_hvp.c): a
 * program of ns scalar and na array inputs packed in one flat vector, recorded on a tape,
 * its gradient from a first-order tape, H v from a second-order tape, and H v as central
 * differences of that gradient.
 */
#ifndef TEST_PROB_H
#define TEST_PROB_H

#include "test_util.h"

#define MAXA 3
#define MAXS 10
#define MAXZ 64

typedef cr_var (*prog_fn)(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env);

/* ns scalar inputs and na array inputs (vectors or matrices); the flat vector z holds the
 * scalars first, then each array's elements in row-major order. */
typedef struct prob {
    prog_fn f;
    const void *env;
    size_t ns, na;
    size_t ndim[MAXA], shape[MAXA][2];
} prob;

static size_t numel_of(const prob *p, size_t j)
{
    return p->ndim[j] == 1 ? p->shape[j][0] : p->shape[j][0] * p->shape[j][1];
}

static size_t flat_len(const prob *p)
{
    size_t L = p->ns;
    for (size_t j = 0; j < p->na; j++)
        L += numel_of(p, j);
    return L;
}

/* Array views of the array part of z. */
static void views(const prob *p, double *z, cr_array *a)
{
    size_t off = p->ns;
    for (size_t j = 0; j < p->na; j++) {
        a[j] = p->ndim[j] == 1 ? cr_array_vector(z + off, p->shape[j][0])
                               : cr_array_matrix(z + off, p->shape[j][0], p->shape[j][1]);
        off += numel_of(p, j);
    }
}

/* Reset t and record p at z (a: storage for the input arrays' descriptors). */
static cr_var record(cr_tape *t, const prob *p, double *z, cr_array *a, cr_var *s, cr_avar *X)
{
    cr_tape_reset(t);
    views(p, z, a);
    for (size_t i = 0; i < p->ns; i++)
        s[i] = cr_tape_input(t, z[i]);
    for (size_t j = 0; j < p->na; j++)
        X[j] = cr_tape_array_input(t, &a[j]);
    return p->f(t, s, X, p->env);
}

/* The gradient at z, from a first-order tape. */
static void grad_at(cr_ctx *ctx, const prob *p, double *z, double *g)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    cr_array a[MAXA], ga[MAXA], *gp[MAXA];
    cr_var s[MAXS];
    cr_avar X[MAXA];
    cr_var y = record(t, p, z, a, s, X);
    views(p, g, ga);
    for (size_t j = 0; j < p->na; j++)
        gp[j] = &ga[j];
    assert_ok(t, cr_tape_gradient_arrays(t, y, s, p->ns, g, X, p->na, gp));
    cr_tape_free(t);
}

/* H v: central differences of the first-order gradient along v. */
static void fd_hvp(cr_ctx *ctx, const prob *p, const double *z, const double *v, double *out)
{
    size_t L = flat_len(p);
    double zp[MAXZ], zm[MAXZ], gp[MAXZ], gm[MAXZ], h = 1e-5;
    for (size_t i = 0; i < L; i++) {
        zp[i] = z[i] + h * v[i];
        zm[i] = z[i] - h * v[i];
    }
    grad_at(ctx, p, zp, gp);
    grad_at(ctx, p, zm, gm);
    for (size_t i = 0; i < L; i++)
        out[i] = (gp[i] - gm[i]) / (2 * h);
}

/* H v from the second-order tape t (recorded again at z). */
static void tape_hvp(cr_tape *t, const prob *p, double *z, const double *v, double *out)
{
    size_t L = flat_len(p);
    double vv[MAXZ];
    memcpy(vv, v, L * sizeof *v);
    cr_array a[MAXA], va[MAXA], oa[MAXA];
    const cr_array *vp[MAXA];
    cr_array *op[MAXA];
    cr_var s[MAXS];
    cr_avar X[MAXA];
    cr_var y = record(t, p, z, a, s, X);
    assert_ok(t, cr_tape_status(t));
    views(p, vv, va);
    views(p, out, oa);
    for (size_t j = 0; j < p->na; j++) {
        vp[j] = &va[j];
        op[j] = &oa[j];
    }
    assert_ok(t, cr_tape_ahvp(t, y, s, p->ns, vv, out, X, p->na, vp, op));
}

/* A direction with every component nonzero. */
static void direction(size_t L, unsigned seed, double *v)
{
    for (size_t i = 0; i < L; i++)
        v[i] = cos(1.3 * (double)i + 0.7 * (double)seed + 0.2);
}

/* Check H v against central differences of the gradient, along ndirs directions. */
static void check_hvp_dirs(cr_ctx *ctx, const prob *p, double *z, double tol, unsigned ndirs)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    size_t L = flat_len(p);
    for (unsigned seed = 0; seed < ndirs; seed++) {
        double v[MAXZ], got[MAXZ], want[MAXZ];
        direction(L, seed, v);
        tape_hvp(t, p, z, v, got);
        fd_hvp(ctx, p, z, v, want);
        for (size_t i = 0; i < L; i++)
            ASSERT_CLOSE(got[i], want[i], tol);
    }
    cr_tape_free(t);
}

/* The value of p at z, from a first-order tape. */
static inline double value_at(cr_ctx *ctx, const prob *p, double *z)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    cr_array a[MAXA];
    cr_var s[MAXS];
    cr_avar X[MAXA];
    cr_var y = record(t, p, z, a, s, X);
    assert_ok(t, cr_tape_status(t));
    cr_tape_free(t);
    return y.v;
}

/* The tangent of p's value along ndirs directions from a forward sweep (cr_tape_ajvp on a
 * CR_TAPE_FORWARD tape), against 4-point central differences of the value. */
static inline void check_jvp(cr_ctx *ctx, const prob *p, double *z, double tol, unsigned ndirs)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_FORWARD};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    size_t L = flat_len(p);
    for (unsigned seed = 0; seed < ndirs; seed++) {
        double v[MAXZ], zz[MAXZ], h = 1e-4, f[4];
        direction(L, seed, v);
        cr_array a[MAXA], va[MAXA];
        const cr_array *vp[MAXA];
        cr_var s[MAXS];
        cr_avar X[MAXA];
        cr_var y = record(t, p, z, a, s, X);
        assert_ok(t, cr_tape_status(t));
        views(p, v, va);
        for (size_t j = 0; j < p->na; j++)
            vp[j] = &va[j];
        double yd = NAN;
        assert_ok(t, cr_tape_ajvp(t, s, v, p->ns, X, vp, p->na, &y, 1, &yd, NULL, 0, NULL));
        static const double steps[4] = {-2, -1, 1, 2};
        for (int q = 0; q < 4; q++) {
            for (size_t i = 0; i < L; i++)
                zz[i] = z[i] + steps[q] * h * v[i];
            f[q] = value_at(ctx, p, zz);
        }
        ASSERT_CLOSE(yd, (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h), tol);
    }
    cr_tape_free(t);
}

/* The full Hessian (cr_tape_hessian) of a problem of scalar inputs only at z, column by
 * column against central differences of the first-order gradient (fd_hvp along each unit
 * vector). */
static inline void check_hessian(cr_ctx *ctx, const prob *p, double *z, double tol)
{
    size_t n = p->ns;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_true(p->na == 0);
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    cr_array a[1];
    cr_var s[MAXS];
    cr_avar X[1];
    cr_var y = record(t, p, z, a, s, X);
    assert_ok(t, cr_tape_status(t));
    double H[MAXS * MAXS];
    assert_ok(t, cr_tape_hessian(t, y, s, n, H));
    for (size_t j = 0; j < n; j++) {
        double e[MAXS] = {0}, want[MAXS];
        e[j] = 1.0;
        fd_hvp(ctx, p, z, e, want);
        for (size_t i = 0; i < n; i++)
            ASSERT_CLOSE(H[i * n + j], want[i], tol);
    }
    cr_tape_free(t);
}

#endif /* TEST_PROB_H */
