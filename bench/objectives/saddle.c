/*
 * GradBench's saddle eval (evals/saddle/README.md): the function whose saddle point is
 * sought, f(p1, p2) = (p1x^2 + p1y^2) - (p2x^2 + p2y^2) (GradBench's objective(x1, y1, x2,
 * y2) called with p1 = (x1, y1), p2 = (x2, y2)). nested/saddle_max.c maximises it over p2.
 */
#include "objectives.h"

double saddle_f(double p1x, double p1y, double p2x, double p2y)
{
    return (p1x * p1x + p1y * p1y) - (p2x * p2x + p2y * p2y);
}
