/*
 * saddle's fr and rr: nested/saddle_max.c again, with the inner gradient from
 * chainrules-ad's reverse mode of saddle_f instead of its forward mode. The outer file
 * calls saddle_f_fwd(..., x, dx, y, dy, out) for the derivative along (dx, dy); here that
 * call is saddle_f_dir_rev(), the dot product of saddle_f_rev's gradient with (dx, dy),
 * and the outer function is named saddle_max_f_r. CMake concatenates the primal, its first
 * derivatives, this file and nested/saddle_max.c, and differentiates saddle_max_f_r again
 * (forward: fr, reverse: rr): the tool reads its own reverse mode (straight-line code,
 * written without a label or a value stack).
 */
#include "objectives.h"
#include "objectives_ad.h"

static double saddle_f_dir_rev(double p1x, double p1y, double x0, double d0, double x1, double d1,
                               double *out)
{
    double g[2] = {0.0, 0.0};
    double v = saddle_f_rev(p1x, p1y, x0, &g[0], x1, &g[1], 1.0);
    out[0] = g[0] * d0 + g[1] * d1;
    return v;
}

#define saddle_f_fwd saddle_f_dir_rev
#define saddle_max_f saddle_max_f_r
