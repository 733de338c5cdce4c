/*
 * The functions of chainrules-bench's engine figures in plain C, with their derivatives
 * written by hand, for the programs that time other AD tools on them
 * (bench/compare_adolc.cpp, bench/compare_torch.py through ctypes). The inputs and the
 * hand-written derivatives are those of bench/chainrules_bench.c, so every tool is checked
 * against the same numbers and timed against the same plain C loops.
 */
#ifndef CR_BENCH_COMPARE_REF_H
#define CR_BENCH_COMPARE_REF_H

#ifdef __cplusplus
extern "C" {
#endif

/** Inputs of the chain loop. */
#define CMP_CHAIN_N 1000
/** Steps of the chain loop in chainrules-bench (four operations each). */
#define CMP_CHAIN_STEPS 250000L
/** Length of the small functions' input (mse, sum3). */
#define CMP_SMALL_N 30

/** x[i] = 1e-3 (1 + sin i), i < CMP_CHAIN_N. */
void cmp_chain_inputs(double *x);
/** t = 0; steps times t = t + x[k % CMP_CHAIN_N] * exp(sin(t)); returns t. */
double cmp_chain_primal(const double *x, long steps);
/** The adjoint of cmp_chain_primal written by hand into g[CMP_CHAIN_N]; -1 when out of
 * memory, else 0. */
int cmp_chain_grad(const double *x, long steps, double *g);

/** x[i] = 0.5 + 0.4 sin(0.37 i), v[i] = cos(0.11 i), i < n (v may be NULL). */
void cmp_rosen_inputs(double *x, double *v, long n);
/** Rosenbrock: sum over i < n - 1 of 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2. */
double cmp_rosen_primal(const double *x, long n);
/** Its gradient written by hand into g[n]. */
void cmp_rosen_grad(const double *x, long n, double *g);
/** Its Hessian (tridiagonal) times v, written by hand into hv[n]. */
void cmp_rosen_hvp(const double *x, const double *v, long n, double *hv);

/** x[i] = 1 + 0.1 i, target[i] = sin(i), i < CMP_SMALL_N. */
void cmp_small_inputs(double *x, double *target);
/** sum((x - target)^2) / n. */
double cmp_mse_primal(const double *x, const double *target, long n);
/** Its gradient 2 (x - target) / n, into g[n]. */
void cmp_mse_grad(const double *x, const double *target, long n, double *g);

/** Index of the first element where got and want differ by more than
 * rtol * max(1, |want|), or -1 when none does. */
long cmp_mismatch(const double *got, const double *want, long n, double rtol);

/** The time of the monotonic clock, in nanoseconds. */
double cmp_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif
