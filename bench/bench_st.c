/*
 * The st_* figures of chainrules-bench: derivatives written by chainrules-ad
 * (bench/objectives, library cr_objectives_ad) against the primal and against the
 * hand-written derivatives (bench/objectives/hand), timed in the same run, alternating the
 * two sides, medians of ST_RUNS ratios (BENCHMARKS.md has the command and the figures).
 *
 *   st_chain_ratio        chain (250000 steps of t + x[k % 1000] exp(sin t)): gradient / primal
 *   st_chain_hand_ratio   the hand-written gradient / primal, for scale
 *   st_rosen_loop_ratio   Rosenbrock's scalar loop, n = 1e6: gradient / primal
 *   st_rosen_hand_ratio   the hand-written gradient / primal
 *   st_rosen_bytes_per_term  value-stack bytes the gradient holds at its peak, per term
 *   st_mse_ns             gradient of mse over 30 points, per call
 *   st_mse_hand_ns        the hand-written gradient, per call
 *   st_gmm_vs_hand        gmm (d = 10, k = 25, n = 1000): gradient / hand-written gradient
 *   st_lstm_vs_hand       lstm (l = 2, c = 1024, b = 14): gradient / hand-written gradient
 *   st_ba_vs_hand         the 2 x 15 Jacobians of 10000 reprojection blocks by the vector
 *                         forward mode with static lane sparsity (ba_project_jacfwd) / by hand
 *   st_ba_fwdv_vs_hand    the same Jacobians by the dense vector forward mode (ba_project_fwdv,
 *                         15 directions) / by hand
 *   st_ba_rev_vs_hand     the same Jacobians by two reverse sweeps each / by hand
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <chainrules/adstack.h>

#include "bench_st.h"
#include "objectives.h"
#include "objectives_ad.h"

#include "bench_util.h"

#define ST_RUNS 9

static volatile double g_sink;

typedef bench_work_fn work_fn;

/* Median time of one call of f in ns (f runs `reps` calls). */
static double median_ns(work_fn f, void *env, long reps)
{
    double r[ST_RUNS];
    g_sink = f(env);
    for (int i = 0; i < ST_RUNS; i++) {
        double t0 = bench_now_ns();
        g_sink += f(env);
        r[i] = (bench_now_ns() - t0) / (double)reps;
    }
    return bench_median(r, ST_RUNS);
}

/* ---- chain, Rosenbrock, mse ------------------------------------------------------------- */

enum { CHAIN_N = 1000, ROSEN_N = 1000000, MSE_N = 30, MSE_REPS = 20000 };
#define CHAIN_STEPS 250000L

typedef struct vec_env {
    double *x, *y, *g;
    long n;
} vec_env;

static double chain_p(void *e)
{
    vec_env *v = e;
    return chain(v->x, CHAIN_N, CHAIN_STEPS);
}
static double chain_g(void *e)
{
    vec_env *v = e;
    return chain_rev(v->x, v->g, CHAIN_N, CHAIN_STEPS, 1.0);
}
static double chain_h(void *e)
{
    vec_env *v = e;
    return chain_grad(v->x, v->g, CHAIN_N, CHAIN_STEPS, 1.0);
}
static double rosen_p(void *e)
{
    vec_env *v = e;
    return rosen(v->x, v->n);
}
static double rosen_g(void *e)
{
    vec_env *v = e;
    return rosen_rev(v->x, v->g, v->n, 1.0);
}
static double rosen_h(void *e)
{
    vec_env *v = e;
    return rosen_grad(v->x, v->g, v->n, 1.0);
}
static double mse_g(void *e)
{
    vec_env *v = e;
    double s = 0;
    for (long r = 0; r < MSE_REPS; r++)
        s += mse_rev(v->x, v->g, v->y, MSE_N, 1.0);
    return s;
}
static double mse_h(void *e)
{
    vec_env *v = e;
    double s = 0;
    for (long r = 0; r < MSE_REPS; r++)
        s += mse_grad(v->x, v->g, v->y, MSE_N, 1.0);
    return s;
}

/* ---- gmm, lstm, ba ----------------------------------------------------------------------- */

enum { GD = 10, GK = 25, GN = 1000, LL = 2, LC = 1024, LB = 14, BA_BLOCKS = 10000 };

typedef struct gmm_env {
    double *alphas, *means, *q, *l, *x, *g;
} gmm_env;

static double gmm_g(void *e)
{
    gmm_env *v = e;
    int lsz = GD * (GD - 1) / 2;
    return gmm_objective_rev(GD, GK, GN, v->alphas, v->g, v->means, v->g + GK, v->q,
                             v->g + GK + GD * GK, v->l, v->g + GK + 2 * GD * GK + 0 * lsz, v->x,
                             1.0, 0, 1.0);
}
static double gmm_h(void *e)
{
    gmm_env *v = e;
    return gmm_objective_grad(GD, GK, GN, v->alphas, v->g, v->means, v->g + GK, v->q,
                              v->g + GK + GD * GK, v->l, v->g + GK + 2 * GD * GK, v->x, 1.0, 0,
                              1.0);
}

typedef struct lstm_env {
    double *mp, *ep, *st, *seq, *g;
} lstm_env;

static double lstm_g(void *e)
{
    lstm_env *v = e;
    return lstm_objective_rev(LL, LC, LB, v->mp, v->g, v->ep, v->g + 8 * LL * LB, v->st, v->seq,
                              1.0);
}
static double lstm_h(void *e)
{
    lstm_env *v = e;
    return lstm_objective_grad(LL, LC, LB, v->mp, v->g, v->ep, v->g + 8 * LL * LB, v->st, v->seq,
                               1.0);
}

typedef struct ba_env {
    double *cam, *X, *w, *feat, *J;
} ba_env;

/* The seeds of the vector forward mode: direction j is the unit vector of column j. */
static double k_cam_d[11 * 15], k_X_d[3 * 15], k_w_d[15];

static double ba_g(void *e)
{
    ba_env *v = e;
    double err[2], s = 0;
    for (int b = 0; b < BA_BLOCKS; b++) {
        ba_project_fwdv(v->cam + 11 * b, k_cam_d, v->X + 3 * b, k_X_d, v->w + b, k_w_d,
                        v->feat + 2 * b, err, v->J + 30 * b, 15);
        s += err[0];
    }
    return s;
}
static double ba_j(void *e)
{
    ba_env *v = e;
    double err[2], s = 0;
    for (int b = 0; b < BA_BLOCKS; b++) {
        ba_project_jacfwd(v->cam + 11 * b, v->X + 3 * b, v->w + b, v->feat + 2 * b, err,
                          v->J + 30 * b);
        s += err[0];
    }
    return s;
}
static double ba_r(void *e)
{
    ba_env *v = e;
    double err[2], s = 0;
    for (int b = 0; b < BA_BLOCKS; b++) {
        double *J = v->J + 30 * b;
        for (int i = 0; i < 2; i++) {
            double cb[11] = {0}, Xb[3] = {0}, wb = 0, eb[2] = {0};
            eb[i] = 1;
            ba_project_rev(v->cam + 11 * b, cb, v->X + 3 * b, Xb, v->w + b, &wb, v->feat + 2 * b,
                           err, eb);
            memcpy(J + 15 * i, cb, sizeof cb);
            memcpy(J + 15 * i + 11, Xb, sizeof Xb);
            J[15 * i + 14] = wb;
        }
        s += err[0];
    }
    return s;
}
static double ba_h(void *e)
{
    ba_env *v = e;
    double err[2], s = 0;
    for (int b = 0; b < BA_BLOCKS; b++) {
        ba_project_jac(v->cam + 11 * b, v->X + 3 * b, v->w + b, v->feat + 2 * b, err,
                       v->J + 30 * b);
        s += err[0];
    }
    return s;
}

/* ---- The figures ------------------------------------------------------------------------- */

static int wanted(int argc, char **argv, const char *name)
{
    if (argc <= 1)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

int bench_st(int argc, char **argv)
{
    vec_env v = {0};
    v.x = malloc(ROSEN_N * sizeof *v.x);
    v.y = malloc(ROSEN_N * sizeof *v.y);
    v.g = calloc(ROSEN_N, sizeof *v.g);
    if (!v.x || !v.y || !v.g)
        return 1;
    for (long i = 0; i < CHAIN_N; i++)
        v.x[i] = 1e-3 * (1.0 + sin((double)i));
    if (wanted(argc, argv, "st_chain_ratio"))
        printf("st_chain_ratio %.2f x\n", bench_median_ratio(chain_g, chain_p, &v));
    if (wanted(argc, argv, "st_chain_hand_ratio"))
        printf("st_chain_hand_ratio %.2f x\n", bench_median_ratio(chain_h, chain_p, &v));
    obj_fill_uniform(v.x, ROSEN_N, -1.5, 1.5, 11);
    v.n = ROSEN_N;
    if (wanted(argc, argv, "st_rosen_loop_ratio"))
        printf("st_rosen_loop_ratio %.2f x\n", bench_median_ratio(rosen_g, rosen_p, &v));
    if (wanted(argc, argv, "st_rosen_hand_ratio"))
        printf("st_rosen_hand_ratio %.2f x\n", bench_median_ratio(rosen_h, rosen_p, &v));
    if (wanted(argc, argv, "st_rosen_bytes_per_term")) {
        cr_adstack_trim();
        g_sink = rosen_rev(v.x, v.g, v.n, 1.0);
        printf("st_rosen_bytes_per_term %.1f B\n", (double)cr_adstack_cache_bytes() / (v.n - 1));
    }
    obj_fill_uniform(v.x, MSE_N, -1, 1, 12);
    obj_fill_uniform(v.y, MSE_N, -1, 1, 13);
    if (wanted(argc, argv, "st_mse_ns"))
        printf("st_mse_ns %.1f ns\n", median_ns(mse_g, &v, MSE_REPS));
    if (wanted(argc, argv, "st_mse_hand_ns"))
        printf("st_mse_hand_ns %.1f ns\n", median_ns(mse_h, &v, MSE_REPS));
    free(v.x);
    free(v.y);
    free(v.g);

    if (wanted(argc, argv, "st_gmm_vs_hand")) {
        int lsz = GD * (GD - 1) / 2;
        size_t np = GK + 2 * GD * GK + (size_t)lsz * GK;
        double *in = malloc((np + (size_t)GD * GN) * sizeof *in), *g = calloc(np, sizeof *g);
        if (!in || !g)
            return 1;
        gmm_env e = {in, in + GK, in + GK + GD * GK, in + GK + 2 * GD * GK, in + np, g};
        gmm_make_input(GD, GK, GN, 21, e.alphas, e.means, e.q, e.l, e.x);
        printf("st_gmm_vs_hand %.2f x\n", bench_median_ratio(gmm_g, gmm_h, &e));
        free(in);
        free(g);
    }
    if (wanted(argc, argv, "st_lstm_vs_hand")) {
        size_t nm = 8 * LL * LB, ne = 3 * LB, ns = 2 * LL * LB, nq = (size_t)LC * LB;
        double *in = malloc((nm + ne + ns + nq) * sizeof *in), *g = calloc(nm + ne, sizeof *g);
        if (!in || !g)
            return 1;
        lstm_env e = {in, in + nm, in + nm + ne, in + nm + ne + ns, g};
        lstm_make_input(LL, LC, LB, 22, e.mp, e.ep, e.st, e.seq);
        printf("st_lstm_vs_hand %.2f x\n", bench_median_ratio(lstm_g, lstm_h, &e));
        free(in);
        free(g);
    }
    if (wanted(argc, argv, "st_ba_vs_hand") || wanted(argc, argv, "st_ba_fwdv_vs_hand") ||
        wanted(argc, argv, "st_ba_rev_vs_hand")) {
        double *in = malloc((size_t)BA_BLOCKS * (11 + 3 + 1 + 2 + 30) * sizeof *in);
        if (!in)
            return 1;
        ba_env e = {in, in + 11 * BA_BLOCKS, in + 14 * BA_BLOCKS, in + 15 * BA_BLOCKS,
                    in + 17 * BA_BLOCKS};
        for (int b = 0; b < BA_BLOCKS; b++)
            ba_make_block((unsigned long)b + 1, e.cam + 11 * b, e.X + 3 * b, e.w + b,
                          e.feat + 2 * b);
        for (int j = 0; j < 11; j++)
            k_cam_d[j * 15 + j] = 1;
        for (int j = 0; j < 3; j++)
            k_X_d[j * 15 + 11 + j] = 1;
        k_w_d[14] = 1;
        if (wanted(argc, argv, "st_ba_vs_hand"))
            printf("st_ba_vs_hand %.2f x\n", bench_median_ratio(ba_j, ba_h, &e));
        if (wanted(argc, argv, "st_ba_fwdv_vs_hand"))
            printf("st_ba_fwdv_vs_hand %.2f x\n", bench_median_ratio(ba_g, ba_h, &e));
        if (wanted(argc, argv, "st_ba_rev_vs_hand"))
            printf("st_ba_rev_vs_hand %.2f x\n", bench_median_ratio(ba_r, ba_h, &e));
        free(in);
    }
    return isnan(g_sink) ? 1 : 0;
}
