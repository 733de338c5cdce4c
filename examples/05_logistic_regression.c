/*
 * Logistic regression by gradient descent on a data set the program generates: 400
 * points with 3 features, labels drawn from a known model. The loss (mean binary cross
 * entropy, log(1 + e^z) - y z with z = w.x + b) is recorded on a tape at each step and
 * its gradient comes from the reverse sweep; the tape's memory is reused at every step.
 * Prints the loss going down, then the fitted weights next to the true ones.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <chainrules.h>

#define NPTS  400
#define NFEAT 3

typedef struct data {
    double x[NPTS][NFEAT];
    double y[NPTS];
} data;

/* A small deterministic generator (xorshift64*), so the run is reproducible. */
static double uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) * 0x1.0p-53;
}

static void generate(data *d, const double *w, double b)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < NPTS; i++) {
        double z = b;
        for (size_t j = 0; j < NFEAT; j++) {
            d->x[i][j] = 4.0 * uniform(&s) - 2.0;
            z += w[j] * d->x[i][j];
        }
        d->y[i] = uniform(&s) < 1.0 / (1.0 + exp(-z)) ? 1.0 : 0.0;
    }
}

/* params = (w_0, ..., w_{NFEAT-1}, b); y[0] = mean loss */
static cr_status loss(cr_tape *t, const cr_var *p, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const data *d = env;
    cr_var total = cr_const(0.0);
    for (size_t i = 0; i < NPTS; i++) {
        cr_var z = p[NFEAT];
        for (size_t j = 0; j < NFEAT; j++)
            z = cr_add(t, z, cr_mul(t, p[j], cr_const(d->x[i][j])));
        /* log(1 + e^z), computed without overflow by the log1pexp row */
        cr_var l = cr_tape_call1(t, &cr_fn_log1pexp, &z, 1);
        total = cr_add(t, total, cr_sub(t, l, cr_mul(t, cr_const(d->y[i]), z)));
    }
    y[0] = cr_div(t, total, cr_const((double)NPTS));
    return cr_tape_status(t);
}

int main(void)
{
    static data d;
    const double w_true[NFEAT] = {2.0, -1.0, 0.5}, b_true = -0.3;
    generate(&d, w_true, b_true);

    cr_ctx *ctx;
    cr_tape *t;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_tape_new(ctx, NULL, &t) != CR_OK)
        return 1;
    double p[NFEAT + 1] = {0}, g[NFEAT + 1], f = 0;
    const double rate = 0.3;
    printf(" step   loss\n");
    for (int step = 0; step <= 150; step++) {
        cr_status st = cr_tape_value_and_gradient(t, loss, &d, p, NFEAT + 1, &f, g);
        if (st != CR_OK) {
            fprintf(stderr, "step %d: %s\n", step, cr_tape_errmsg(t));
            return 1;
        }
        if (step % 15 == 0)
            printf(" %4d   %.6f\n", step, f);
        for (size_t j = 0; j < NFEAT + 1; j++)
            p[j] -= rate * g[j];
    }
    size_t correct = 0;
    for (size_t i = 0; i < NPTS; i++) {
        double z = p[NFEAT];
        for (size_t j = 0; j < NFEAT; j++)
            z += p[j] * d.x[i][j];
        correct += (z > 0) == (d.y[i] > 0.5);
    }
    printf("fitted: w = (%.3f, %.3f, %.3f), b = %.3f\n", p[0], p[1], p[2], p[3]);
    printf("true:   w = (%.3f, %.3f, %.3f), b = %.3f\n", w_true[0], w_true[1], w_true[2], b_true);
    printf("training accuracy: %.1f%%\n", 100.0 * (double)correct / NPTS);
    cr_tape_free(t);
    cr_ctx_free(ctx);
    return 0;
}
