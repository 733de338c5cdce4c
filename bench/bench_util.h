/* The benchmarks' clock and medians (every benchmark of bench/): header-only, static inline. */
#ifndef CR_BENCH_UTIL_H
#define CR_BENCH_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <time.h>

/* A monotonic clock in nanoseconds; with CR_BENCH_CPU=1 in the environment, the calling
 * thread's CPU clock instead (time another process takes from a shared core is not
 * counted; only for single-threaded figures: a BLAS's own threads are not counted either). */
static inline double bench_now_ns(void)
{
    static int clock_id = -1;
    if (clock_id < 0) {
        const char *c = getenv("CR_BENCH_CPU");
        clock_id = c && c[0] == '1' ? 1 : 0;
    }
    struct timespec ts;
    clock_gettime(clock_id ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (v is sorted). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

/* A piece of work to time: returns a number that depends on its result (kept in a sink, so
 * that the work is not optimised away). */
typedef double (*bench_work_fn)(void *env);

/* Where the timed work's results go. */
static volatile double bench_sink;

/* The median over 9 runs of time(num) / time(den), the two timed back to back in each run
 * (which one goes first alternates); NaN when a result was NaN. */
static inline double bench_median_ratio(bench_work_fn num, bench_work_fn den, void *env)
{
    enum { RUNS = 9 };
    double r[RUNS];
    bench_sink = num(env) + den(env);
    for (int i = 0; i < RUNS; i++) {
        double tn, td, t0, t1;
        if (i % 2) {
            t0 = bench_now_ns();
            bench_sink += den(env);
            t1 = bench_now_ns();
            td = t1 - t0;
            bench_sink += num(env);
            tn = bench_now_ns() - t1;
        } else {
            t0 = bench_now_ns();
            bench_sink += num(env);
            t1 = bench_now_ns();
            tn = t1 - t0;
            bench_sink += den(env);
            td = bench_now_ns() - t1;
        }
        r[i] = tn / td;
    }
    return isnan(bench_sink) ? (double)NAN : bench_median(r, RUNS);
}

#endif /* CR_BENCH_UTIL_H */
