/*
 * Rosenbrock's function f(x) = sum_i 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2: its gradient
 * from the reverse tape, Hessian-vector products from a second-order recording, and a
 * Newton-CG minimisation that uses only Hessian-vector products (the Hessian is never
 * formed), printing f going down to 0 at x = (1, ..., 1).
 */
#include <math.h>
#include <stdio.h>

#include <chainrules.h>

#define N 10

static cr_status rosenbrock(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_sub(t, x[i + 1], cr_mul(t, x[i], x[i]));
        cr_var b = cr_sub(t, cr_const(1.0), x[i]);
        s = cr_add(t, s, cr_add(t, cr_mul(t, cr_const(100.0), cr_mul(t, a, a)), cr_mul(t, b, b)));
    }
    y[0] = s;
    return cr_tape_status(t);
}

static double dot(const double *a, const double *b)
{
    double s = 0;
    for (size_t i = 0; i < N; i++)
        s += a[i] * b[i];
    return s;
}

/* Solve H p = -g approximately by conjugate gradients with Hessian-vector products on
 * the recording (Steihaug's truncation: stop at negative curvature). */
static cr_status newton_direction(cr_tape *t, cr_var y, const cr_var *xs, const double *g,
                                  double *p)
{
    double r[N], d[N], hd[N];
    for (size_t i = 0; i < N; i++) {
        p[i] = 0.0;
        r[i] = -g[i];
        d[i] = r[i];
    }
    double rr = dot(r, r);
    for (int it = 0; it < 2 * N && rr > 1e-20; it++) {
        cr_status st = cr_tape_hvp(t, y, xs, N, d, hd, NULL);
        if (st != CR_OK)
            return st;
        double dhd = dot(d, hd);
        if (dhd <= 0) {
            if (it == 0)
                for (size_t i = 0; i < N; i++)
                    p[i] = -g[i];
            break;
        }
        double alpha = rr / dhd;
        for (size_t i = 0; i < N; i++) {
            p[i] += alpha * d[i];
            r[i] -= alpha * hd[i];
        }
        double rr2 = dot(r, r);
        for (size_t i = 0; i < N; i++)
            d[i] = r[i] + rr2 / rr * d[i];
        rr = rr2;
    }
    return CR_OK;
}

int main(void)
{
    cr_ctx *ctx;
    cr_tape *t;
    cr_tape_params params = {.struct_size = sizeof params, .flags = CR_TAPE_SECOND_ORDER};
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_tape_new(ctx, &params, &t) != CR_OK)
        return 1;
    double x[N], g[N], v[N], hv[N];
    for (size_t i = 0; i < N; i++)
        x[i] = 0.0;

    /* The gradient and one Hessian-vector product at the start. */
    cr_var xs[N], y;
    if (cr_tape_record(t, rosenbrock, NULL, x, N, xs, &y, 1) != CR_OK ||
        cr_tape_gradient(t, y, xs, N, g) != CR_OK)
        return 1;
    for (size_t i = 0; i < N; i++)
        v[i] = 1.0;
    if (cr_tape_hvp(t, y, xs, N, v, hv, NULL) != CR_OK)
        return 1;
    printf("f(x0) = %.6f\n", y.v);
    printf("gradient[0..3]        = %10.4f %10.4f %10.4f %10.4f\n", g[0], g[1], g[2], g[3]);
    printf("(H * ones)[0..3]      = %10.4f %10.4f %10.4f %10.4f\n", hv[0], hv[1], hv[2], hv[3]);
    /* The same entries from Rosenbrock's Hessian written by hand, for comparison. */
    double h0 = 1200 * x[0] * x[0] - 400 * x[1] + 2 - 400 * x[0];
    double h1 = -400 * x[0] + 200 + 1200 * x[1] * x[1] - 400 * x[2] + 2 - 400 * x[1];
    printf("by hand: (H*ones)[0..1] = %10.4f %10.4f\n", h0, h1);

    /* Newton-CG with a backtracking line search. */
    printf("\n iter   f(x)            |grad|\n");
    for (int it = 0; it < 60; it++) {
        if (cr_tape_record(t, rosenbrock, NULL, x, N, xs, &y, 1) != CR_OK ||
            cr_tape_gradient(t, y, xs, N, g) != CR_OK)
            return 1;
        double gn = sqrt(dot(g, g));
        if (it % 5 == 0 || gn < 1e-8)
            printf(" %4d   %-14.6e  %.3e\n", it, y.v, gn);
        if (gn < 1e-8)
            break;
        double p[N], xn[N], step = 1.0, fx = y.v;
        if (newton_direction(t, y, xs, g, p) != CR_OK)
            return 1;
        for (int ls = 0; ls < 40; ls++, step *= 0.5) {
            for (size_t i = 0; i < N; i++)
                xn[i] = x[i] + step * p[i];
            cr_var yn;
            if (cr_tape_record(t, rosenbrock, NULL, xn, N, NULL, &yn, 1) != CR_OK)
                return 1;
            if (yn.v <= fx + 1e-4 * step * dot(g, p))
                break;
        }
        for (size_t i = 0; i < N; i++)
            x[i] = xn[i];
    }
    printf("x = ");
    for (size_t i = 0; i < N; i++)
        printf("%.6f ", x[i]);
    printf("\n");
    cr_tape_free(t);
    cr_ctx_free(ctx);
    return 0;
}
