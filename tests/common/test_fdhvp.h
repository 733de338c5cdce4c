/*
 * References for Hessian-vector products in the tests: central differences of plain C
 * functions. The gradient by 5-point differences with a fixed step (so that it is a smooth
 * function of x), and H v as the derivative of that gradient along v, by the same method.
 */
#ifndef TEST_FDHVP_H
#define TEST_FDHVP_H

#include <math.h>

#include "test_util.h"

#ifndef FDHVP_MAXN
#define FDHVP_MAXN 32
#endif

/* The methods and fixed steps of the references: 5-point central differences; the gradient's
 * step fixed so that it is a smooth function of x, which the outer difference along v
 * differentiates again. */
typedef struct fdref {
    cr_fd_vec_fn f; /* the plain C function */
    void *env;
    const double *x, *v;
    size_t n;
    cr_arena *arena;
} fdref;

static void fd_grad(fdref *r, const double *x, double *g)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    cr_fd_opts o = {.struct_size = sizeof o, .step = 1e-3};
    assert_int_equal(cr_fd_jacobian(&m, &o, r->f, r->env, x, r->n, 1, r->arena, g, NULL), CR_OK);
}

/* t -> the gradient of f at x + t v (n outputs). */
static cr_status grad_along(const double *t, size_t one, double *g, size_t n, void *env)
{
    (void)one;
    fdref *r = env;
    double xt[FDHVP_MAXN];
    assert_true(n <= FDHVP_MAXN);
    for (size_t j = 0; j < n; j++)
        xt[j] = r->x[j] + t[0] * r->v[j];
    fd_grad(r, xt, g);
    return CR_OK;
}

/* H v as the derivative of the gradient along v. */
static void fd_hvp(fdref *r, double *hv)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    cr_fd_opts o = {.struct_size = sizeof o, .step = 1e-3};
    double t0 = 0.0;
    assert_int_equal(cr_fd_jacobian(&m, &o, grad_along, r, &t0, 1, r->n, r->arena, hv, NULL),
                     CR_OK);
}

/* A direction with every component nonzero. */
static void direction(size_t n, unsigned seed, double *v)
{
    for (size_t i = 0; i < n; i++)
        v[i] = cos(1.3 * (double)i + 0.7 * (double)seed + 0.2);
}

#endif /* TEST_FDHVP_H */
