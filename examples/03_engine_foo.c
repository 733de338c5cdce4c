/*
 * The seed's worked example, foo(x) = asin(0.2 + sin(x)) at x = 3, differentiated by the
 * engines instead of by chaining rules by hand (compare 01_seed_example.c): the reverse
 * tape (explicitly, then through the thread's current tape), forward mode on dual
 * numbers, and a user function recorded through the engine with cr_tape_value_and_gradient.
 */
#include <math.h>
#include <stdio.h>

#include <chainrules.h>

/* foo written against the engine: each operation is recorded on tape t. */
static cr_var foo(cr_tape *t, cr_var x)
{
    return cr_asin(t, cr_add(t, cr_const(0.2), cr_sin(t, x)));
}

/* The same as a cr_ad_fn, the form the drivers take. */
static cr_status foo_fn(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = foo(t, x[0]);
    return cr_tape_status(t);
}

/* foo on dual numbers (forward mode). */
static cr_dual foo_dual(cr_dual x)
{
    return cr_dual_asin(cr_dual_add(cr_dual_const(0.2), cr_dual_sin(x)));
}

int main(void)
{
    cr_ctx *ctx;
    cr_tape *t;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_tape_new(ctx, NULL, &t) != CR_OK)
        return 1;

    /* Reverse mode: record, then sweep back from y. */
    cr_var x = cr_tape_input(t, 3.0);
    cr_var y = foo(t, x);
    double dx;
    if (cr_tape_gradient(t, y, &x, 1, &dx) != CR_OK) {
        fprintf(stderr, "gradient failed: %s\n", cr_tape_errmsg(t));
        return 1;
    }
    printf("foo(3)                 = %.12f\n", y.v);
    printf("dfoo/dx (tape)         = %.11f\n", dx);

    /* The same through the thread's current tape: operations given NULL use it. */
    cr_tape_reset(t);
    cr_tape_set_current(t);
    x = cr_tape_input(NULL, 3.0);
    y = foo(NULL, x);
    cr_tape_set_current(NULL);
    if (cr_tape_gradient(t, y, &x, 1, &dx) != CR_OK)
        return 1;
    printf("dfoo/dx (current tape) = %.11f\n", dx);

    /* Forward mode: one dual number carries the tangent. */
    cr_dual yd = foo_dual(cr_dual_var(3.0, 0));
    printf("dfoo/dx (duals)        = %.11f\n", yd.d[0]);

    /* A driver: value and gradient of a cr_ad_fn, reusing the tape's memory. */
    double x0 = 3.0, val;
    if (cr_tape_value_and_gradient(t, foo_fn, NULL, &x0, 1, &val, &dx) != CR_OK)
        return 1;
    printf("value_and_gradient     = (%.12f, %.11f)\n", val, dx);

    /* The chain rule written out, to show that all of them agree with it. */
    double s = 0.2 + sin(3.0);
    printf("chain rule             = %.11f\n", cos(3.0) / sqrt(1.0 - s * s));

    /* A mistake is reported, not ignored: a variable of an earlier recording. */
    cr_tape_reset(t);
    (void)cr_sin(t, x);
    printf("stale variable         : %s: %s\n", cr_status_name(cr_tape_status(t)),
           cr_tape_errmsg(t));

    cr_tape_free(t);
    cr_ctx_free(ctx);
    return 0;
}
