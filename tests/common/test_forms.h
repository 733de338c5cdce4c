/*
 * Helpers shared by the tests of the second-order forms (test_hvp_*.c): points
 * from a seed, constant arguments, calls of array functions with one or two arguments, and
 * small reductions that make a scalar of an array so that a form's cotangent is not 1.
 */
#ifndef TEST_FORMS_H
#define TEST_FORMS_H

#include <math.h>

#include "test_prob.h"

/* A point of L components from a seed. */
static inline void point(size_t L, unsigned seed, double scale, double *z)
{
    for (size_t i = 0; i < L; i++)
        z[i] = scale * sin(1.7 * (double)i + 0.9 * (double)seed + 0.4);
}

static inline cr_targ i64(int64_t v)
{
    return cr_targ_value(cr_value_i64(v));
}

static inline cr_targ f64(double v)
{
    return cr_targ_value(cr_value_f64(v));
}

/* f(a) or f(a, b) (n arguments) with a scalar result. */
static inline cr_var call_s(cr_tape *t, const cr_value *f, cr_targ a, cr_targ b, size_t n)
{
    cr_targ args[2] = {a, b};
    return cr_tape_acall_s(t, f, args, n);
}

/* f(a) or f(a, b) (n arguments) with an array result. */
static inline cr_avar call_a(cr_tape *t, const cr_value *f, cr_targ a, cr_targ b, size_t n)
{
    cr_targ args[2] = {a, b};
    return cr_tape_acall_a(t, f, args, n);
}

static inline cr_var sum_sq(cr_tape *t, cr_avar a)
{
    return cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(a)));
}

static inline cr_var sum_sin(cr_tape *t, cr_avar a)
{
    return cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(a)));
}

#endif
