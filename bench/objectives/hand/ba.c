/*
 * Hand-written Jacobian of one ba reprojection block (2 x 15) and of the weight error.
 *
 * One forward pass keeps the intermediate values; err = w (proj - feat) gives the weight,
 * focal length, principal point and distortion columns directly; the two rows of
 * d err / d Xcam (2 x 3) are then pulled back through the Rodrigues rotation, one reverse
 * sweep per row, to the rotation, centre and point columns.
 */
#include <math.h>

#include "objectives.h"

/* Pull g = d err_r / d Xcam back through Xcam = rot(r) xo: adds into rb[3] and xob[3]. */
typedef struct rod {
    int small; /* r == 0: Xcam = xo + r x xo */
    double theta, ct, st, inv, w[3], wx[3], dot, tmp;
} rod;

static void rod_pullback(const rod *R, const double *r, const double *xo, const double *g,
                         double *rb, double *xob)
{
    if (R->small) {
        /* xc = xo + r x xo: xo_b = g + g x r, r_b = xo x g. */
        xob[0] = g[0] + (g[1] * r[2] - g[2] * r[1]);
        xob[1] = g[1] + (g[2] * r[0] - g[0] * r[2]);
        xob[2] = g[2] + (g[0] * r[1] - g[1] * r[0]);
        rb[0] = xo[1] * g[2] - xo[2] * g[1];
        rb[1] = xo[2] * g[0] - xo[0] * g[2];
        rb[2] = xo[0] * g[1] - xo[1] * g[0];
        return;
    }
    const double *w = R->w, *wx = R->wx;
    /* xc = xo ct + wx st + w tmp */
    double ctb = g[0] * xo[0] + g[1] * xo[1] + g[2] * xo[2];
    double stb = g[0] * wx[0] + g[1] * wx[1] + g[2] * wx[2];
    double tmpb = g[0] * w[0] + g[1] * w[1] + g[2] * w[2];
    double wb[3], wxb[3];
    for (int i = 0; i < 3; i++) {
        xob[i] = g[i] * R->ct;
        wxb[i] = g[i] * R->st;
        wb[i] = g[i] * R->tmp;
    }
    /* tmp = dot (1 - ct) */
    double dotb = tmpb * (1.0 - R->ct);
    ctb -= tmpb * R->dot;
    for (int i = 0; i < 3; i++) {
        wb[i] += dotb * xo[i];
        xob[i] += dotb * w[i];
    }
    /* wx = w x xo: w_b += xo x wxb, xo_b += wxb x w */
    wb[0] += xo[1] * wxb[2] - xo[2] * wxb[1];
    wb[1] += xo[2] * wxb[0] - xo[0] * wxb[2];
    wb[2] += xo[0] * wxb[1] - xo[1] * wxb[0];
    xob[0] += wxb[1] * w[2] - wxb[2] * w[1];
    xob[1] += wxb[2] * w[0] - wxb[0] * w[2];
    xob[2] += wxb[0] * w[1] - wxb[1] * w[0];
    /* w = r inv, inv = 1 / theta, ct = cos theta, st = sin theta, theta = |r| */
    double invb = wb[0] * r[0] + wb[1] * r[1] + wb[2] * r[2];
    double thetab = -invb * R->inv * R->inv - R->st * ctb + R->ct * stb;
    double sqb = thetab * 0.5 * R->inv;
    for (int i = 0; i < 3; i++)
        rb[i] = wb[i] * R->inv + 2.0 * r[i] * sqb;
}

void ba_project_jac(const double *cam, const double *X, const double *w, const double *feat,
                    double *err, double *J)
{
    const double *r = cam;
    double xo[3] = {X[0] - cam[3], X[1] - cam[4], X[2] - cam[5]};
    double xc[3];
    rod R = {0};
    double sq = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
    R.small = !(sq != 0.0);
    if (!R.small) {
        R.theta = sqrt(sq);
        R.ct = cos(R.theta);
        R.st = sin(R.theta);
        R.inv = 1.0 / R.theta;
        for (int i = 0; i < 3; i++)
            R.w[i] = r[i] * R.inv;
        R.wx[0] = R.w[1] * xo[2] - R.w[2] * xo[1];
        R.wx[1] = R.w[2] * xo[0] - R.w[0] * xo[2];
        R.wx[2] = R.w[0] * xo[1] - R.w[1] * xo[0];
        R.dot = R.w[0] * xo[0] + R.w[1] * xo[1] + R.w[2] * xo[2];
        R.tmp = R.dot * (1.0 - R.ct);
        for (int i = 0; i < 3; i++)
            xc[i] = xo[i] * R.ct + R.wx[i] * R.st + R.w[i] * R.tmp;
    } else {
        xc[0] = xo[0] + (r[1] * xo[2] - r[2] * xo[1]);
        xc[1] = xo[1] + (r[2] * xo[0] - r[0] * xo[2]);
        xc[2] = xo[2] + (r[0] * xo[1] - r[1] * xo[0]);
    }
    double iz = 1.0 / xc[2];
    double p[2] = {xc[0] * iz, xc[1] * iz};
    double rsq = p[0] * p[0] + p[1] * p[1];
    double k1 = cam[9], k2 = cam[10], f = cam[6], wt = w[0];
    double lr = 1.0 + k1 * rsq + k2 * rsq * rsq;
    double dl = 2.0 * (k1 + 2.0 * k2 * rsq); /* d lr / d p_s = dl p_s */
    double dist[2] = {p[0] * lr, p[1] * lr};
    double proj[2] = {dist[0] * f + cam[7], dist[1] * f + cam[8]};

    for (int row = 0; row < 2; row++) {
        double *Jr = J + row * BA_NCOLS;
        err[row] = wt * (proj[row] - feat[row]);
        Jr[14] = proj[row] - feat[row];
        Jr[6] = wt * dist[row];
        Jr[7] = row == 0 ? wt : 0.0;
        Jr[8] = row == 0 ? 0.0 : wt;
        Jr[9] = wt * f * p[row] * rsq;
        Jr[10] = wt * f * p[row] * rsq * rsq;
        /* d err_row / d p_s = w f (lr [row == s] + p_row dl p_s) */
        double gp[2];
        for (int s = 0; s < 2; s++)
            gp[s] = wt * f * ((row == s ? lr : 0.0) + p[row] * dl * p[s]);
        /* p_s = xc_s / xc_2 */
        double g[3] = {gp[0] * iz, gp[1] * iz, -(gp[0] * p[0] + gp[1] * p[1]) * iz};
        double rb[3], xob[3];
        rod_pullback(&R, r, xo, g, rb, xob);
        for (int i = 0; i < 3; i++) {
            Jr[i] = rb[i];
            Jr[3 + i] = -xob[i];
            Jr[11 + i] = xob[i];
        }
    }
}

void ba_weight_error_jac(const double *w, double *err, double *J)
{
    err[0] = 1.0 - w[0] * w[0];
    J[0] = -2.0 * w[0];
}
