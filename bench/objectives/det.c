/*
 * GradBench's det eval (cpp/gradbench/evals/det.hpp, after cmpad's det_of_minor): the
 * determinant of an ell x ell matrix by expansion in minors, recursively. A minor is
 * represented without moving data: r[i] (c[i]) is the row (column) following row
 * (column) i in the minor, r[ell] (c[ell]) its first row (column).
 */
#include "objectives.h"

static double det_of_minor(const double *a, long n, long m, long *r, long *c)
{
    long r0 = r[n];
    long cj = c[n];
    if (m == 1)
        return a[r0 * n + cj];
    double det_m = 0.0;
    int sign = 1;
    r[n] = r[r0]; /* remove row r0 from the sub-minors */
    long cj1 = n;
    for (long j = 0; j < m; j++) {
        double m0j = a[r0 * n + cj];
        c[cj1] = c[cj]; /* remove column cj */
        double det_s = det_of_minor(a, n, m - 1, r, c);
        c[cj1] = cj; /* restore it */
        if (sign > 0)
            det_m = det_m + m0j * det_s;
        else
            det_m = det_m - m0j * det_s;
        cj1 = cj;
        cj = c[cj];
        sign = -sign;
    }
    r[n] = r0;
    return det_m;
}

double det_objective(const double *a, long ell, long *r, long *c)
{
    for (long i = 0; i < ell; i++) {
        r[i] = i + 1;
        c[i] = i + 1;
    }
    r[ell] = 0;
    c[ell] = 0;
    return det_of_minor(a, ell, ell, r, c);
}
