/*
 * particle's fr and rr: nested/particle_euler.c again, with the inner gradient from
 * chainrules-ad's reverse mode of particle_accel instead of its forward mode. The outer
 * file calls particle_accel_fwd(..., x, dx, y, dy, out) for the derivative along (dx, dy);
 * here that call is particle_accel_dir_rev(), the dot product of particle_accel_rev's
 * gradient with (dx, dy), and the outer function is named particle_euler_f_r. CMake
 * concatenates the primal, its first derivatives, this file and nested/particle_euler.c,
 * and differentiates particle_euler_f_r again (forward: fr, reverse: rr).
 */
#include "objectives.h"
#include "objectives_ad.h"

static double particle_accel_dir_rev(double cx0, double cy0, double cx1, double cy1, double x,
                                     double dx, double y, double dy, double *out)
{
    double g[2] = {0.0, 0.0};
    double v = particle_accel_rev(cx0, cy0, cx1, cy1, x, &g[0], y, &g[1], 1.0);
    out[0] = g[0] * dx + g[1] * dy;
    return v;
}

#define particle_accel_fwd particle_accel_dir_rev
#define particle_euler_f   particle_euler_f_r
