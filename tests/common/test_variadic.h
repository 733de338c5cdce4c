/*
 * The library's variadic scalar functions for the tests: hypot(x, y, ...) (a two-argument
 * row and a hand-written rule for three or more) and evalpoly(x, c0, c1, ...) (rules only),
 * called with n arguments inside a small program y = sin(F) + x0 F, F = f(x0, ..., x_{n-1}),
 * written against the tape, against the duals and in plain C (sqrt of the sum of squares,
 * Horner's scheme) for central differences.
 */
#ifndef TEST_VARIADIC_H
#define TEST_VARIADIC_H

#include <math.h>

#include "test_util.h"

typedef struct vcall {
    const cr_value *fn;   /* &cr_fn_hypot or &cr_fn_evalpoly */
    cr_arena *arena;      /* for cr_dual_call's frules */
    const cr_config *cfg; /* cr_dual_call's configuration (NULL: built-in rules) */
} vcall;

/* F in plain C: hypot as sqrt(sum x_i^2); evalpoly(x, c0, ...) = c0 + c1 x + ... */
static inline double vcall_f_c(const vcall *v, const double *x, size_t n)
{
    double s = 0;
    if (v->fn == &cr_fn_hypot) {
        for (size_t i = 0; i < n; i++)
            s += x[i] * x[i];
        return sqrt(s);
    }
    for (size_t i = n; i-- > 1;)
        s = s * x[0] + x[i];
    return s;
}

/* The program in plain C (a cr_fd_vec_fn). */
static inline cr_status vcall_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    double F = vcall_f_c(env, x, n);
    y[0] = sin(F) + x[0] * F;
    return CR_OK;
}

/* F alone in plain C (a cr_fd_vec_fn). */
static inline cr_status vcall_f_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    y[0] = vcall_f_c(env, x, n);
    return CR_OK;
}

/* The program on a tape (a cr_ad_fn). */
static inline cr_status vcall_tape(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
                                   void *env)
{
    (void)m;
    const vcall *v = env;
    cr_var F = cr_tape_call1(t, v->fn, x, n);
    y[0] = cr_add(t, cr_sin(t, F), cr_mul(t, x[0], F));
    return cr_tape_status(t);
}

/* The program on duals (a cr_dual_fn). */
static inline cr_status vcall_dual(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *env)
{
    (void)m;
    const vcall *v = env;
    cr_dual F;
    cr_status st = cr_dual_call(v->cfg, v->arena, v->fn, x, n, &F, 1);
    if (st != CR_OK)
        return st;
    y[0] = cr_dual_add(cr_dual_sin(F), cr_dual_mul(x[0], F));
    return CR_OK;
}

/* Central differences (the library's 5-point method) of a plain-C function of n variables
 * (vcall_fd, vcall_f_fd): its gradient. */
static inline void vcall_fd_grad_of(cr_arena *arena, cr_fd_vec_fn f, vcall *v, const double *x,
                                    size_t n, double *g)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, f, v, x, n, 1, arena, g, NULL), CR_OK);
}

/* The same for the program. */
static inline void vcall_fd_grad(cr_arena *arena, vcall *v, const double *x, size_t n, double *g)
{
    vcall_fd_grad_of(arena, vcall_fd, v, x, n, g);
}

/* Points for n = 2, 3, 5 and 10 arguments (no zero: hypot's kink is at the origin). */
static const double vcall_pts[4][10] = {
    {0.6, -1.9},
    {0.7, -1.3, 2.1},
    {0.4, 1.7, -0.6, 2.2, -1.1},
    {0.9, -0.5, 1.2, 0.3, -2.0, 0.8, 1.5, -0.7, 0.6, -1.4},
};
static const size_t vcall_ns[4] = {2, 3, 5, 10};

#endif /* TEST_VARIADIC_H */
