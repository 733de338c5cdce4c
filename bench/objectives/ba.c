/*
 * GradBench's ba objective, one reprojection block and the weight error
 * (cpp/gradbench/evals/ba.hpp: computeReprojError, computeZachWeightError).
 *
 * Xcam = R(r) (X - C), R the Rodrigues rotation of r (for r = 0: X - C + r x (X - C), the
 * first-order form GradBench uses there); p = Xcam[0..1] / Xcam[2];
 * proj = p (1 + k1 |p|^2 + k2 |p|^4) f + (u0, v0); err = w (proj - feat).
 */
#include <math.h>

#include "objectives.h"

void ba_project(const double *cam, const double *X, const double *w, const double *feat,
                double *err)
{
    double xo[3], xc[3];
    xo[0] = X[0] - cam[3];
    xo[1] = X[1] - cam[4];
    xo[2] = X[2] - cam[5];

    double sqtheta = cam[0] * cam[0] + cam[1] * cam[1] + cam[2] * cam[2];
    if (sqtheta != 0.0) {
        double theta = sqrt(sqtheta);
        double costheta = cos(theta);
        double sintheta = sin(theta);
        double theta_inverse = 1.0 / theta;
        double w0 = cam[0] * theta_inverse;
        double w1 = cam[1] * theta_inverse;
        double w2 = cam[2] * theta_inverse;
        double c0 = w1 * xo[2] - w2 * xo[1];
        double c1 = w2 * xo[0] - w0 * xo[2];
        double c2 = w0 * xo[1] - w1 * xo[0];
        double tmp = (w0 * xo[0] + w1 * xo[1] + w2 * xo[2]) * (1.0 - costheta);
        xc[0] = xo[0] * costheta + c0 * sintheta + w0 * tmp;
        xc[1] = xo[1] * costheta + c1 * sintheta + w1 * tmp;
        xc[2] = xo[2] * costheta + c2 * sintheta + w2 * tmp;
    } else {
        xc[0] = xo[0] + (cam[1] * xo[2] - cam[2] * xo[1]);
        xc[1] = xo[1] + (cam[2] * xo[0] - cam[0] * xo[2]);
        xc[2] = xo[2] + (cam[0] * xo[1] - cam[1] * xo[0]);
    }

    double p0 = xc[0] / xc[2];
    double p1 = xc[1] / xc[2];
    double rsq = p0 * p0 + p1 * p1;
    double lr = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq;
    p0 = p0 * lr;
    p1 = p1 * lr;
    double proj0 = p0 * cam[6] + cam[7];
    double proj1 = p1 * cam[6] + cam[8];

    err[0] = w[0] * (proj0 - feat[0]);
    err[1] = w[0] * (proj1 - feat[1]);
}

void ba_weight_error(const double *w, double *err)
{
    err[0] = 1.0 - w[0] * w[0];
}
