/*
 * GradBench's particle eval (evals/particle/README.md): the potential of the two fixed
 * charges at (cx0, cy0) and (cx1, cy1) at the particle's position (x, y), the sum of the
 * inverse distances. nested/particle_euler.c integrates the particle's path with its
 * gradient.
 */
#include <math.h>

#include "objectives.h"

double particle_accel(double cx0, double cy0, double cx1, double cy1, double x, double y)
{
    double d0 = sqrt((cx0 - x) * (cx0 - x) + (cy0 - y) * (cy0 - y));
    double d1 = sqrt((cx1 - x) * (cx1 - x) + (cy1 - y) * (cy1 - y));
    return 1.0 / d0 + 1.0 / d1;
}
