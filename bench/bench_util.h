/* The benchmarks' clock and medians (bench/*.c): header-only, static inline. */
#ifndef CR_BENCH_UTIL_H
#define CR_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* A monotonic clock in nanoseconds. */
static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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

#endif /* CR_BENCH_UTIL_H */
