/*
 * The worked example of ChainRules' documentation, "Example of using ChainRules
 * directly": foo(x) = asin(0.2 + sin(x)) at x = 3, differentiated by chaining rrules by
 * hand (a backward pass through the pullbacks) and frules by hand (a forward pass).
 */
#include <math.h>
#include <stdio.h>

#include <chainrules.h>

static int check(cr_status st, cr_ctx *ctx, const char *what)
{
    if (st != CR_OK) {
        fprintf(stderr, "%s failed: %s: %s\n", what, cr_status_name(st), cr_ctx_errmsg(ctx));
        return 1;
    }
    return 0;
}

int main(void)
{
    cr_ctx *ctx;
    cr_arena *arena;
    if (cr_ctx_new(NULL, &ctx) != CR_OK)
        return 1;
    if (check(cr_arena_new(ctx, NULL, &arena), ctx, "arena"))
        return 1;

    /* Find dfoo/dx via rrules: first the forward pass, gathering up the pullbacks. */
    cr_value x = cr_value_f64(3.0), a, b, c, args[2];
    cr_pullback a_pullback, b_pullback, c_pullback;
    int err = 0;
    err |= check(cr_rrule(NULL, arena, &cr_fn_sin, &x, 1, &a, &a_pullback), ctx, "rrule(sin)");
    args[0] = cr_value_f64(0.2);
    args[1] = a;
    err |= check(cr_rrule(NULL, arena, &cr_fn_add, args, 2, &b, &b_pullback), ctx, "rrule(+)");
    err |= check(cr_rrule(NULL, arena, &cr_fn_asin, &b, 1, &c, &c_pullback), ctx, "rrule(asin)");
    if (err)
        return 1;

    /* Then the backward pass, calculating gradients. */
    cr_tangent c_bar = cr_tangent_f64(1.0); /* ∂c/∂c */
    cr_tangent d_c[2], d_b[3], d_a[2];
    err |= check(cr_pullback_call(arena, &c_pullback, &c_bar, d_c, 2), ctx, "c_pullback");
    err |= check(cr_pullback_call(arena, &b_pullback, &d_c[1], d_b, 3), ctx, "b_pullback");
    err |= check(cr_pullback_call(arena, &a_pullback, &d_b[2], d_a, 2), ctx, "a_pullback");
    if (err)
        return 1;
    double x_bar = d_a[1].u.f64; /* ∂c/∂x = ∂foo/∂x */

    /* Find dfoo/dx via frules. */
    cr_tangent x_dot = cr_tangent_f64(1.0);  /* ∂x/∂x */
    cr_tangent nofields = cr_tangent_zero(); /* ∂self/∂self */
    cr_tangent da[2] = {nofields, x_dot}, a_dot, b_dot, c_dot;
    err |= check(cr_frule(NULL, arena, da, &cr_fn_sin, &x, 1, &a, &a_dot), ctx, "frule(sin)");
    cr_tangent db[3] = {nofields, cr_tangent_zero(), a_dot};
    args[1] = a;
    err |= check(cr_frule(NULL, arena, db, &cr_fn_add, args, 2, &b, &b_dot), ctx, "frule(+)");
    cr_tangent dc[2] = {nofields, b_dot};
    err |= check(cr_frule(NULL, arena, dc, &cr_fn_asin, &b, 1, &c, &c_dot), ctx, "frule(asin)");
    if (err)
        return 1;

    printf("foo(3)           = %.12f\n", c.u.f64);
    printf("dfoo/dx (rrules) = %.11f\n", x_bar);
    printf("dfoo/dx (frules) = %.11f\n", c_dot.u.f64);
    /* The derivative by the chain rule written out, to show both agree with it. */
    double s = 0.2 + sin(3.0);
    printf("chain rule       = %.11f\n", cos(3.0) / sqrt(1.0 - s * s));

    cr_arena_free(arena);
    cr_ctx_free(ctx);
    return 0;
}
