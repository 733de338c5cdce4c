/*
 * GradBench's particle eval: the particle's path by Euler's method (time step 0.1) from
 * (0, 8) with velocity (0.75, 0), accelerated by minus the gradient of the potential of
 * the charges at (10, 10 - w) and (10, 0), until it crosses the x axis; the result is the
 * squared x coordinate of the crossing (linear interpolation in the last step). The
 * gradient of the potential is chainrules-ad's forward mode of particle_accel (one call
 * per coordinate); this function is differentiated again with respect to w
 * (CMakeLists.txt).
 */
#include "objectives.h"
#include "objectives_ad.h"

double particle_euler_f(double w)
{
    double x0 = 0.0;
    double x1 = 8.0;
    double v0 = 0.75;
    double v1 = 0.0;
    const double dt = 0.1;
    double cy0 = 10.0 - w;
    double t[1];
    while (1) {
        particle_accel_fwd(10.0, cy0, 10.0, 0.0, x0, 1.0, x1, 0.0, t);
        double a0 = -t[0];
        particle_accel_fwd(10.0, cy0, 10.0, 0.0, x0, 0.0, x1, 1.0, t);
        double a1 = -t[0];
        x0 += dt * v0;
        x1 += dt * v1;
        if (x1 <= 0.0) {
            double dtf = -x1 / v1;
            double xf = x0 + dtf * v0;
            return xf * xf;
        }
        v0 += dt * a0;
        v1 += dt * a1;
    }
    return 0.0;
}
