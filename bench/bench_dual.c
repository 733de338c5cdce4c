/*
 * The dual_* figures of chainrules-bench: the inline forward mode (dual_inline.h) against
 * the plain C primal of the same workload, timed back to back in each run (medians).
 *
 *   dual_ba_ratio     the 2 x 15 Jacobians of all reprojection blocks and the 1 x 1 ones of
 *                     all weight errors of a problem shaped as GradBench's ba1 (49 cameras,
 *                     7776 points, 31843 observations), each block in one evaluation of
 *                     ba_project_jac_staged (ba_dual.h: three stages on duals of 3, 8 and
 *                     9 directions composed by TYPE_chain) / ba_project and
 *                     ba_weight_error of bench/objectives on every block
 *   dual_ba_dense_ratio  the same with each block in one evaluation on a 15-direction dual
 *                     (ba_project_dual)
 *   dual_chain_ratio  one direction (cr_dual1) through the chain workload (250000 steps of
 *                     t + x[k % 1000] exp(sin t)) / chain() of bench/objectives
 *
 * Each first checks its derivatives against the hand-written ones of bench/objectives/hand.
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules/dual_inline.h>

#include "ba_dual.h"
#include "bench_dual.h"
#include "bench_util.h"
#include "objectives.h"

#define DUAL_RUNS 9

static volatile double g_sink;

typedef bench_work_fn work_fn;

/* ---- ba (ba_project_dual: ba_dual.h) ---------------------------------------------------- */

/* The 2 x 15 Jacobian of one block (row-major, as ba_project_jac) and its errors. */
static void ba_block_jac(const double *cam, const double *X, const double *w, const double *feat,
                         double *err, double *J)
{
    ba_dual c[11], x[3], e[2];
    for (size_t i = 0; i < 11; i++)
        c[i] = ba_dual_var(cam[i], i);
    for (size_t i = 0; i < 3; i++)
        x[i] = ba_dual_var(X[i], 11 + i);
    ba_project_dual(c, x, ba_dual_var(w[0], 14), feat, e);
    for (int r = 0; r < 2; r++) {
        err[r] = e[r].v;
        memcpy(J + 15 * r, e[r].d, 15 * sizeof(double));
    }
}

/* 1 - w^2 on one direction. */
static void ba_weight_jac(const double *w, double *err, double *J)
{
    cr_dual1 x = cr_dual1_var(w[0]);
    cr_dual1 e = cr_dual1_sub(cr_dual1_const(1.0), cr_dual1_mul(x, x));
    err[0] = e.v;
    J[0] = e.d;
}

enum { BA_N = 49, BA_M = 7776, BA_P = 31843 };

typedef struct ba_env {
    double *cams, *X, *w, *feats, *err, *J, *werr, *wJ;
    int *obs;
} ba_env;

static double ba_primal(void *env)
{
    ba_env *e = env;
    for (int i = 0; i < BA_P; i++)
        ba_project(e->cams + 11 * e->obs[2 * i], e->X + 3 * e->obs[2 * i + 1], e->w + i,
                   e->feats + 2 * i, e->err + 2 * i);
    for (int i = 0; i < BA_P; i++)
        ba_weight_error(e->w + i, e->werr + i);
    return e->err[0] + e->werr[BA_P - 1];
}

/* The same Jacobians in stages on narrower duals (ba_project_jac_staged: ba_dual.h). */
static double ba_staged_jacobian(void *env)
{
    ba_env *e = env;
    for (int i = 0; i < BA_P; i++)
        ba_project_jac_staged(e->cams + 11 * e->obs[2 * i], e->X + 3 * e->obs[2 * i + 1], e->w + i,
                              e->feats + 2 * i, e->err + 2 * i, e->J + 30 * (size_t)i);
    for (int i = 0; i < BA_P; i++)
        ba_weight_jac(e->w + i, e->werr + i, e->wJ + i);
    return e->J[0] + e->wJ[BA_P - 1];
}

static double ba_dual_jacobian(void *env)
{
    ba_env *e = env;
    for (int i = 0; i < BA_P; i++)
        ba_block_jac(e->cams + 11 * e->obs[2 * i], e->X + 3 * e->obs[2 * i + 1], e->w + i,
                     e->feats + 2 * i, e->err + 2 * i, e->J + 30 * (size_t)i);
    for (int i = 0; i < BA_P; i++)
        ba_weight_jac(e->w + i, e->werr + i, e->wJ + i);
    return e->J[0] + e->wJ[BA_P - 1];
}

/* Every block's Jacobian against the hand-written one (ba_project_jac). */
static int ba_check(ba_env *e, work_fn jacobian)
{
    jacobian(e);
    for (int i = 0; i < BA_P; i++) {
        double err[2], J[30], werr, wJ;
        ba_project_jac(e->cams + 11 * e->obs[2 * i], e->X + 3 * e->obs[2 * i + 1], e->w + i,
                       e->feats + 2 * i, err, J);
        ba_weight_error_jac(e->w + i, &werr, &wJ);
        for (int k = 0; k < 30; k++) {
            double got = e->J[30 * (size_t)i + (size_t)k];
            if (!(fabs(got - J[k]) <= 1e-9 * (1.0 + fabs(J[k])))) {
                fprintf(stderr, "chainrules-bench: dual ba block %d J[%d] = %.17g, hand %.17g\n", i,
                        k, got, J[k]);
                return 1;
            }
        }
        if (!(fabs(e->wJ[i] - wJ) <= 1e-12 * (1.0 + fabs(wJ))) ||
            !(fabs(e->err[2 * i] - err[0]) <= 1e-12 * (1.0 + fabs(err[0])))) {
            fprintf(stderr, "chainrules-bench: dual ba block %d differs from the hand one\n", i);
            return 1;
        }
    }
    return 0;
}

static int fig_ba(int staged, int dense)
{
    size_t nd = 11 * BA_N + 3 * BA_M + BA_P * (1 + 2 + 2 + 30 + 1 + 1);
    double *buf = malloc(nd * sizeof(double));
    int *obs = malloc(2 * BA_P * sizeof(int));
    if (buf == NULL || obs == NULL) {
        free(buf);
        free(obs);
        fputs("chainrules-bench: out of memory\n", stderr);
        return 1;
    }
    ba_env e;
    e.cams = buf;
    e.X = e.cams + 11 * BA_N;
    e.w = e.X + 3 * BA_M;
    e.feats = e.w + BA_P;
    e.err = e.feats + 2 * BA_P;
    e.J = e.err + 2 * BA_P;
    e.werr = e.J + 30 * BA_P;
    e.wJ = e.werr + BA_P;
    e.obs = obs;
    ba_make_problem(BA_N, BA_M, BA_P, 1, e.cams, e.X, e.w, obs, e.feats);
    int rc = 0;
    if (staged) {
        rc = ba_check(&e, ba_staged_jacobian);
        if (rc == 0)
            printf("dual_ba_ratio %.2f x\n", bench_median_ratio(ba_staged_jacobian, ba_primal, &e));
    }
    if (dense && rc == 0) {
        rc = ba_check(&e, ba_dual_jacobian);
        if (rc == 0)
            printf("dual_ba_dense_ratio %.2f x\n",
                   bench_median_ratio(ba_dual_jacobian, ba_primal, &e));
    }
    free(buf);
    free(obs);
    return rc;
}

/* ---- chain ------------------------------------------------------------------------------ */

enum { CHAIN_N = 1000 };
#define CHAIN_STEPS 250000L

typedef struct chain_env {
    double x[CHAIN_N], v[CHAIN_N];
    double dt; /* the directional derivative of the last run */
} chain_env;

static double chain_primal(void *env)
{
    return chain(((chain_env *)env)->x, CHAIN_N, CHAIN_STEPS);
}

/* chain() on one-direction duals: x[k] moves along v[k]. */
static double chain_dual(void *env)
{
    chain_env *e = env;
    cr_dual1 t = cr_dual1_const(0.0);
    for (long k = 0; k < CHAIN_STEPS; k++) {
        cr_dual1 xk = cr_dual1_make(e->x[k % CHAIN_N], e->v[k % CHAIN_N]);
        t = cr_dual1_add(t, cr_dual1_mul(xk, cr_dual1_exp(cr_dual1_sin(t))));
    }
    e->dt = t.d;
    return t.v;
}

static int fig_chain(void)
{
    static chain_env e;
    static double g[CHAIN_N];
    uint64_t s = 42;
    for (int i = 0; i < CHAIN_N; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        e.x[i] = 1e-4 * ((double)(s >> 11) * 0x1p-53 - 0.5);
        s = s * 6364136223846793005u + 1442695040888963407u;
        e.v[i] = (double)(s >> 11) * 0x1p-53 - 0.5;
        g[i] = 0.0;
    }
    double y = chain_grad(e.x, g, CHAIN_N, CHAIN_STEPS, 1.0);
    double want = 0.0;
    for (int i = 0; i < CHAIN_N; i++)
        want += g[i] * e.v[i];
    double got = chain_dual(&e);
    if (!(fabs(got - y) <= 1e-12 * (1.0 + fabs(y))) ||
        !(fabs(e.dt - want) <= 1e-9 * (1.0 + fabs(want)))) {
        fprintf(stderr, "chainrules-bench: dual chain %.17g (tangent %.17g), hand %.17g (%.17g)\n",
                got, e.dt, y, want);
        return 1;
    }
    printf("dual_chain_ratio %.2f x\n", bench_median_ratio(chain_dual, chain_primal, &e));
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

int bench_dual(int argc, char **argv)
{
    int staged = wanted(argc, argv, "dual_ba_ratio"),
        dense = wanted(argc, argv, "dual_ba_dense_ratio");
    if ((staged || dense) && fig_ba(staged, dense) != 0)
        return 1;
    if (wanted(argc, argv, "dual_chain_ratio") && fig_chain() != 0)
        return 1;
    return 0;
}
