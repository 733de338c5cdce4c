/*
 * GradBench's gmm and lstm objectives written against the tape API as a user writes them
 * (tape_objectives.c): scalar named operations on cr_var, one taped operation per operation
 * of the plain C objectives of bench/objectives (gmm.c, lstm.c), which compute the same
 * values. Used by chainrules-bench's tape_gmm_* and tape_lstm_* figures (bench_tape.c) and by
 * tests/ad/test_tape_objectives.c, which checks their gradients against differences.
 */
#ifndef CR_BENCH_TAPE_OBJECTIVES_H
#define CR_BENCH_TAPE_OBJECTIVES_H

#include <chainrules.h>
#include <chainrules/tape_inline.h>

/* The constants and working storage of the taped gmm. The input vector (n of the cr_ad_fn)
 * is alphas (k), means (k d), q (k d), l (k d (d - 1) / 2), the order of GradBench's
 * gradient; x (n d points) and the Wishart prior's gamma and m are constants. */
typedef struct tape_gmm_env {
    int d, k, n;
    const double *x;
    double gamma;
    int m;
    cr_var *work; /* tape_gmm_work(d, k) variables */
} tape_gmm_env;

/* Variables of working storage tape_gmm needs. */
static inline size_t tape_gmm_work(int d, int k)
{
    return (size_t)d * (size_t)k + 2 * (size_t)k + 2 * (size_t)d;
}

/* Inputs of tape_gmm: k + 2 k d + k d (d - 1) / 2. */
static inline size_t tape_gmm_nin(int d, int k)
{
    return (size_t)k * (1 + 2 * (size_t)d + (size_t)d * (size_t)(d - 1) / 2);
}

/* gmm_objective of bench/objectives on tape t (a cr_ad_fn; env a tape_gmm_env). */
cr_status tape_gmm(cr_tape *t, const cr_var *x, size_t nx, cr_var *y, size_t m, void *env);

/* The constants and working storage of the taped lstm. The input vector is main_params
 * (8 l b) then extra_params (3 b), GradBench's order; the state (2 l b) and the sequence
 * (c b) are constants. */
typedef struct tape_lstm_env {
    int l, c, b;
    const double *state;
    const double *sequence;
    cr_var *work; /* tape_lstm_work(l, b) variables */
} tape_lstm_env;

/* Variables of working storage tape_lstm needs. */
static inline size_t tape_lstm_work(int l, int b)
{
    return 2 * (size_t)l * (size_t)b + (size_t)b;
}

/* Inputs of tape_lstm: 8 l b + 3 b. */
static inline size_t tape_lstm_nin(int l, int b)
{
    return 8 * (size_t)l * (size_t)b + 3 * (size_t)b;
}

/* lstm_objective of bench/objectives on tape t (a cr_ad_fn; env a tape_lstm_env). */
cr_status tape_lstm(cr_tape *t, const cr_var *x, size_t nx, cr_var *y, size_t m, void *env);

#endif
