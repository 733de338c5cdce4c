/*
 * Forward mode on inline dual numbers (docs/forward-mode.md): a derivative on a
 * one-direction dual, a gradient of three inputs in one evaluation on a compile-time
 * vector dual and on run-time tangent arrays. Each derivative is compared with a central
 * difference of the same function in plain C; the program fails if one disagrees.
 */
#include <math.h>
#include <stdio.h>

#include <chainrules.h>

CR_DUALN_DEFINE(dual3, 3);

/* f(x, y, z) = x exp(y) + atan2(y, z) in plain C, for the differences */
static double f_plain(const double *p)
{
    return p[0] * exp(p[1]) + atan2(p[1], p[2]);
}

static int check(const char *what, double got, double want)
{
    int ok = fabs(got - want) <= 1e-7 * (1.0 + fabs(want));
    printf("%-28s %.12f  (difference %.12f)%s\n", what, got, want, ok ? "" : "  WRONG");
    return ok ? 0 : 1;
}

int main(void)
{
    int failed = 0;

    /* d/dx asin(0.2 + sin(x)) at x = 3 */
    cr_dual1 x = cr_dual1_var(3.0);
    cr_dual1 y = cr_dual1_asin(cr_dual1_add(cr_dual1_const(0.2), cr_dual1_sin(x)));
    double h = 1e-6;
    failed += check("d/dx asin(0.2 + sin x)", y.d,
                    (asin(0.2 + sin(3.0 + h)) - asin(0.2 + sin(3.0 - h))) / (2 * h));

    /* the gradient of f at (1.5, 0.5, 2) in one evaluation */
    const double p[3] = {1.5, 0.5, 2.0};
    dual3 a = dual3_var(p[0], 0), b = dual3_var(p[1], 1), c = dual3_var(p[2], 2);
    dual3 f = dual3_add(dual3_mul(a, dual3_exp(b)), dual3_atan2(b, c));

    /* the same on run-time tangent arrays: the direction count could come from input */
    double da[3] = {1, 0, 0}, db[3] = {0, 1, 0}, dc[3] = {0, 0, 1};
    double t1[3], t2[3], t3[3], df[3];
    double e = cr_dualv_exp(3, p[1], db, t1);
    double m = cr_dualv_mul(3, p[0], da, e, t1, t2);
    double q = cr_dualv_atan2(3, p[1], db, p[2], dc, t3);
    double fv = cr_dualv_add(3, m, t2, q, t3, df);

    failed += check("f", f.v, f_plain(p));
    failed += check("f (run-time)", fv, f_plain(p));
    static const char *const names[3] = {"df/dx", "df/dy", "df/dz"};
    for (int j = 0; j < 3; j++) {
        double pp[3] = {p[0], p[1], p[2]}, pm[3] = {p[0], p[1], p[2]};
        pp[j] += h;
        pm[j] -= h;
        double fd = (f_plain(pp) - f_plain(pm)) / (2 * h);
        failed += check(names[j], f.d[j], fd);
        failed += check(names[j], df[j], fd);
    }
    return failed ? 1 : 0;
}
