/*
 * The tape figures of chainrules-bench on GradBench's gmm (d = 10, k = 25, n = 1000) and lstm
 * (l = 2, c = 1024, b = 14), written against the tape API (tape_objectives.c), each timed
 * against the plain C primal of bench/objectives in alternation (medians of 9 runs):
 *
 *   tape_gmm_ratio          record + gradient sweep (cr_tape_value_and_gradient) / primal
 *   prepared_gmm_ratio      prepared once (cr_prepare_gradient), then
 *                           cr_prepared_value_and_gradient / primal
 *   prepared_gmm_vs_tape    the prepared call / record + sweep, timed against each other
 *   tape_gmm_bytes_per_op   bytes of records per taped operation (cr_tape_stats_get)
 *   prepared_gmm_mem_ratio  bytes a prepared gradient holds after a call / the most bytes
 *                           one record + sweep held (a counting allocator on the context)
 *   tape_lstm_ratio, prepared_lstm_ratio, prepared_lstm_vs_tape, prepared_lstm_mem_ratio
 *                           the same for lstm
 *
 * CR_BENCH_GMM_N=n in the environment times gmm at n points instead of 1000.
 *
 * Each first checks its gradient against the hand-written one of bench/objectives/hand.
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_tape.h"
#include "bench_util.h"
#include "objectives.h"
#include "tape_objectives.h"

enum { GD = 10, GK = 25, LL = 2, LC = 1024, LB = 14 };

/* gmm's points: 1000, or CR_BENCH_GMM_N (1 to 100000) from the environment, to time the
 * same objective with every array in the caches (n = 10: about 1 MB) and out of them. */
static int gmm_points(void)
{
    const char *s = getenv("CR_BENCH_GMM_N");
    long n = s != NULL ? strtol(s, NULL, 10) : 1000;
    return n >= 1 && n <= 100000 ? (int)n : 1000;
}

/* A context whose allocations are counted: bytes held now and at most. */
typedef struct counter {
    size_t now, peak;
} counter;

static void *counting_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    counter *c = env;
    if (new_size == 0) {
        free(ptr);
        c->now -= old_size;
        return NULL;
    }
    void *q = realloc(ptr, new_size);
    if (q != NULL) {
        c->now = c->now - old_size + new_size;
        if (c->now > c->peak)
            c->peak = c->now;
    }
    return q;
}

/* One objective: its inputs, its taped form and its primal and hand-written gradient. */
typedef struct obj {
    const char *name;
    cr_ad_fn f;
    void *env;
    size_t nin;
    double *x, *grad, *want;
    double (*primal)(const struct obj *o);
    cr_ctx *ctx;
    counter count;
    cr_tape *tape;
    cr_prepared *prep;
} obj;

static volatile double g_sink;

static double run_primal(void *env)
{
    const obj *o = env;
    return o->primal(o);
}

static double run_tape(void *env)
{
    obj *o = env;
    double y;
    if (cr_tape_value_and_gradient(o->tape, o->f, o->env, o->x, o->nin, &y, o->grad) != CR_OK)
        return (double)NAN;
    return y + o->grad[0];
}

static double run_prepared(void *env)
{
    obj *o = env;
    double y;
    if (cr_prepared_value_and_gradient(o->prep, o->x, o->nin, &y, o->grad) != CR_OK)
        return (double)NAN;
    return y + o->grad[0];
}

static int check(const obj *o, const char *what)
{
    for (size_t i = 0; i < o->nin; i++)
        if (!(fabs(o->grad[i] - o->want[i]) <= 1e-9 * fmax(1.0, fabs(o->want[i])))) {
            fprintf(stderr, "chainrules-bench: %s %s gradient[%zu] = %.17g, hand-written %.17g\n",
                    o->name, what, i, o->grad[i], o->want[i]);
            return 1;
        }
    return 0;
}

static int wanted(int argc, char **argv, const char *name)
{
    if (argc <= 1)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

static int wanted_any(int argc, char **argv, const char *name)
{
    static const char *const suffixes[] = {"tape_%s_ratio", "prepared_%s_ratio",
                                           "prepared_%s_vs_tape", "tape_%s_bytes_per_op",
                                           "prepared_%s_mem_ratio"};
    char buf[64];
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(buf, sizeof buf, suffixes[i], name);
        if (wanted(argc, argv, buf))
            return 1;
    }
    return 0;
}

/* The figures of one objective (o->want holds its hand-written gradient). */
static int figures(int argc, char **argv, obj *o)
{
    char buf[64];
    cr_ctx_params cp = {
        .struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &o->count};
    if (cr_ctx_new(&cp, &o->ctx) != CR_OK)
        return 1;
    int err = 0;
    /* One recording on a new tape: its peak of memory and its records. */
    size_t base = o->count.now;
    o->count.peak = base;
    err = cr_tape_new(o->ctx, NULL, &o->tape) != CR_OK || isnan(run_tape(o)) || check(o, "tape");
    size_t rec_peak = o->count.peak - base;
    cr_tape_stats st;
    if (!err && cr_tape_stats_get(o->tape, &st) == CR_OK) {
        snprintf(buf, sizeof buf, "tape_%s_bytes_per_op", o->name);
        if (wanted(argc, argv, buf))
            printf("%s %.1f B\n", buf,
                   (double)st.record_bytes / (double)(st.nrecords - st.ninputs));
    }
    /* A prepared gradient: what it holds after a call. */
    base = o->count.now;
    if (!err) {
        memset(o->grad, 0, o->nin * sizeof *o->grad);
        err = cr_prepare_gradient(o->ctx, NULL, o->f, o->env, o->x, o->nin, &o->prep) != CR_OK ||
              isnan(run_prepared(o)) || check(o, "prepared");
    }
    if (!err) {
        snprintf(buf, sizeof buf, "prepared_%s_mem_ratio", o->name);
        if (wanted(argc, argv, buf))
            printf("%s %.2f x\n", buf, (double)(o->count.now - base) / (double)rec_peak);
        snprintf(buf, sizeof buf, "tape_%s_ratio", o->name);
        if (wanted(argc, argv, buf))
            printf("%s %.2f x\n", buf, bench_median_ratio(run_tape, run_primal, o));
        snprintf(buf, sizeof buf, "prepared_%s_ratio", o->name);
        if (wanted(argc, argv, buf))
            printf("%s %.2f x\n", buf, bench_median_ratio(run_prepared, run_primal, o));
        snprintf(buf, sizeof buf, "prepared_%s_vs_tape", o->name);
        if (wanted(argc, argv, buf))
            printf("%s %.2f x\n", buf, bench_median_ratio(run_prepared, run_tape, o));
    }
    if (err)
        fprintf(stderr, "chainrules-bench: %s: %s\n", o->name, cr_ctx_errmsg(o->ctx));
    cr_prepared_free(o->prep);
    cr_tape_free(o->tape);
    cr_ctx_free(o->ctx);
    return err;
}

/* ---- gmm -------------------------------------------------------------------------------- */

typedef struct gmm_data {
    tape_gmm_env e;
    double *x;
} gmm_data;

static double gmm_primal(const obj *o)
{
    const tape_gmm_env *e = o->env;
    int d = e->d, k = e->k, lsz = d * (d - 1) / 2;
    (void)lsz;
    return gmm_objective(d, k, e->n, o->x, o->x + k, o->x + k + k * d, o->x + k + 2 * k * d, e->x,
                         e->gamma, e->m);
}

static int bench_gmm(int argc, char **argv)
{
    size_t nin = tape_gmm_nin(GD, GK);
    int gn = gmm_points();
    tape_gmm_env e = {.d = GD, .k = GK, .n = gn, .gamma = 1.0, .m = 0};
    double *pts = malloc((size_t)GD * (size_t)gn * sizeof *pts);
    double *x = malloc(nin * sizeof *x), *g = malloc(nin * sizeof *g);
    double *want = calloc(nin, sizeof *want);
    cr_var *work = malloc(tape_gmm_work(GD, GK) * sizeof *work);
    int err = !pts || !x || !g || !want || !work;
    if (!err) {
        e.x = pts;
        e.work = work;
        gmm_make_input(GD, GK, gn, 21, x, x + GK, x + GK + GD * GK, x + GK + 2 * GD * GK, pts);
        gmm_objective_grad(GD, GK, gn, x, want, x + GK, want + GK, x + GK + GD * GK,
                           want + GK + GD * GK, x + GK + 2 * GD * GK, want + GK + 2 * GD * GK, pts,
                           1.0, 0, 1.0);
        obj o = {.name = "gmm",
                 .f = tape_gmm,
                 .env = &e,
                 .nin = nin,
                 .x = x,
                 .grad = g,
                 .want = want,
                 .primal = gmm_primal};
        err = figures(argc, argv, &o);
    }
    free(pts);
    free(x);
    free(g);
    free(want);
    free(work);
    return err;
}

/* ---- lstm ------------------------------------------------------------------------------- */

static double lstm_primal(const obj *o)
{
    const tape_lstm_env *e = o->env;
    return lstm_objective(e->l, e->c, e->b, o->x, o->x + 8 * e->l * e->b, e->state, e->sequence);
}

static int bench_lstm(int argc, char **argv)
{
    size_t nin = tape_lstm_nin(LL, LB);
    double *state = malloc(2 * LL * LB * sizeof *state);
    double *seq = malloc((size_t)LC * LB * sizeof *seq);
    double *x = malloc(nin * sizeof *x), *g = malloc(nin * sizeof *g);
    double *want = calloc(nin, sizeof *want);
    cr_var *work = malloc(tape_lstm_work(LL, LB) * sizeof *work);
    int err = !state || !seq || !x || !g || !want || !work;
    if (!err) {
        tape_lstm_env e = {
            .l = LL, .c = LC, .b = LB, .state = state, .sequence = seq, .work = work};
        lstm_make_input(LL, LC, LB, 22, x, x + 8 * LL * LB, state, seq);
        lstm_objective_grad(LL, LC, LB, x, want, x + 8 * LL * LB, want + 8 * LL * LB, state, seq,
                            1.0);
        obj o = {.name = "lstm",
                 .f = tape_lstm,
                 .env = &e,
                 .nin = nin,
                 .x = x,
                 .grad = g,
                 .want = want,
                 .primal = lstm_primal};
        err = figures(argc, argv, &o);
    }
    free(state);
    free(seq);
    free(x);
    free(g);
    free(want);
    free(work);
    return err;
}

int bench_tape(int argc, char **argv)
{
    if (wanted_any(argc, argv, "gmm") && bench_gmm(argc, argv) != 0)
        return 1;
    if (wanted_any(argc, argv, "lstm") && bench_lstm(argc, argv) != 0)
        return 1;
    return 0;
}
