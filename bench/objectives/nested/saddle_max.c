/*
 * The inner problem of GradBench's saddle eval: max over p2 of saddle_f(p1, p2), by the
 * gradient descent of GradBench's cpp/gradbench/gd.hpp (multivariate_argmax, from the
 * starting point s), with the gradient with respect to p2 from chainrules-ad's forward
 * mode of saddle_f (saddle_f_fwd, one call per coordinate). The value at the maximum is
 * differentiated again with respect to p1 (the outer argmin's gradient): chainrules-ad is
 * applied to this function and the generated saddle_f_fwd together (CMakeLists.txt).
 */
#include <math.h>

#include "objectives.h"
#include "objectives_ad.h"

double saddle_max_f(double p1x, double p1y, double s0, double s1)
{
    double x0 = s0;
    double x1 = s1;
    double t[1];
    /* argmax f = argmin -f */
    double fx = -saddle_f(p1x, p1y, x0, x1);
    saddle_f_fwd(p1x, p1y, x0, 1.0, x1, 0.0, t);
    double gx0 = -t[0];
    saddle_f_fwd(p1x, p1y, x0, 0.0, x1, 1.0, t);
    double gx1 = -t[0];
    int i = 0;
    double eta = 1e-5;
    while (1) {
        if (sqrt(gx0 * gx0 + gx1 * gx1) <= 1e-5)
            break;
        if (i == 10) {
            eta *= 2;
            i = 0;
            continue;
        }
        double xp0 = x0 - eta * gx0;
        double xp1 = x1 - eta * gx1;
        if (sqrt((x0 - xp0) * (x0 - xp0) + (x1 - xp1) * (x1 - xp1)) <= 1e-5)
            break;
        double fxp = -saddle_f(p1x, p1y, xp0, xp1);
        if (fxp < fx) {
            x0 = xp0;
            x1 = xp1;
            fx = fxp;
            saddle_f_fwd(p1x, p1y, x0, 1.0, x1, 0.0, t);
            gx0 = -t[0];
            saddle_f_fwd(p1x, p1y, x0, 0.0, x1, 1.0, t);
            gx1 = -t[0];
            i++;
        } else {
            eta /= 2;
            i = 0;
        }
    }
    return saddle_f(p1x, p1y, x0, x1);
}
