/*
 * ba_project (bench/objectives/ba.c) on a 15-direction dual type (CR_DUALN_DEFINE): the
 * 2 x 15 Jacobian of a reprojection block in one evaluation. chainrules-bench's
 * dual_ba_ratio times it (bench/bench_dual.c) and tests/ad/test_dual_ba.c checks it against
 * finite differences of ba_project, so both read this one copy.
 */
#ifndef CR_BENCH_BA_DUAL_H
#define CR_BENCH_BA_DUAL_H

#include <chainrules/dual_inline.h>

/* 11 camera parameters, 3 point coordinates, the weight. */
CR_DUALN_DEFINE(ba_dual, 15);

/* ba_project (bench/objectives/ba.c) on duals, operation for operation. */
static inline void ba_project_dual(const ba_dual *cam, const ba_dual *X, ba_dual w,
                                   const double *feat, ba_dual *err)
{
    ba_dual xo[3], xc[3];
    for (int i = 0; i < 3; i++)
        xo[i] = ba_dual_sub(X[i], cam[3 + i]);
    ba_dual sqtheta =
        ba_dual_add(ba_dual_add(ba_dual_mul(cam[0], cam[0]), ba_dual_mul(cam[1], cam[1])),
                    ba_dual_mul(cam[2], cam[2]));
    if (sqtheta.v != 0.0) {
        ba_dual theta = ba_dual_sqrt(sqtheta);
        ba_dual costheta = ba_dual_cos(theta);
        ba_dual sintheta = ba_dual_sin(theta);
        ba_dual theta_inverse = ba_dual_div(ba_dual_const(1.0), theta);
        ba_dual w0 = ba_dual_mul(cam[0], theta_inverse);
        ba_dual w1 = ba_dual_mul(cam[1], theta_inverse);
        ba_dual w2 = ba_dual_mul(cam[2], theta_inverse);
        ba_dual c0 = ba_dual_sub(ba_dual_mul(w1, xo[2]), ba_dual_mul(w2, xo[1]));
        ba_dual c1 = ba_dual_sub(ba_dual_mul(w2, xo[0]), ba_dual_mul(w0, xo[2]));
        ba_dual c2 = ba_dual_sub(ba_dual_mul(w0, xo[1]), ba_dual_mul(w1, xo[0]));
        ba_dual tmp =
            ba_dual_mul(ba_dual_add(ba_dual_add(ba_dual_mul(w0, xo[0]), ba_dual_mul(w1, xo[1])),
                                    ba_dual_mul(w2, xo[2])),
                        ba_dual_sub(ba_dual_const(1.0), costheta));
        xc[0] = ba_dual_add(ba_dual_add(ba_dual_mul(xo[0], costheta), ba_dual_mul(c0, sintheta)),
                            ba_dual_mul(w0, tmp));
        xc[1] = ba_dual_add(ba_dual_add(ba_dual_mul(xo[1], costheta), ba_dual_mul(c1, sintheta)),
                            ba_dual_mul(w1, tmp));
        xc[2] = ba_dual_add(ba_dual_add(ba_dual_mul(xo[2], costheta), ba_dual_mul(c2, sintheta)),
                            ba_dual_mul(w2, tmp));
    } else {
        xc[0] =
            ba_dual_add(xo[0], ba_dual_sub(ba_dual_mul(cam[1], xo[2]), ba_dual_mul(cam[2], xo[1])));
        xc[1] =
            ba_dual_add(xo[1], ba_dual_sub(ba_dual_mul(cam[2], xo[0]), ba_dual_mul(cam[0], xo[2])));
        xc[2] =
            ba_dual_add(xo[2], ba_dual_sub(ba_dual_mul(cam[0], xo[1]), ba_dual_mul(cam[1], xo[0])));
    }
    ba_dual p0 = ba_dual_div(xc[0], xc[2]);
    ba_dual p1 = ba_dual_div(xc[1], xc[2]);
    ba_dual rsq = ba_dual_add(ba_dual_mul(p0, p0), ba_dual_mul(p1, p1));
    ba_dual lr = ba_dual_add(ba_dual_add(ba_dual_const(1.0), ba_dual_mul(cam[9], rsq)),
                             ba_dual_mul(ba_dual_mul(cam[10], rsq), rsq));
    p0 = ba_dual_mul(p0, lr);
    p1 = ba_dual_mul(p1, lr);
    ba_dual proj0 = ba_dual_add(ba_dual_mul(p0, cam[6]), cam[7]);
    ba_dual proj1 = ba_dual_add(ba_dual_mul(p1, cam[6]), cam[8]);
    err[0] = ba_dual_mul(w, ba_dual_sub(proj0, ba_dual_const(feat[0])));
    err[1] = ba_dual_mul(w, ba_dual_sub(proj1, ba_dual_const(feat[1])));
}

#endif /* CR_BENCH_BA_DUAL_H */
