/*
 * The 2 x 15 Jacobian of a reprojection block of ba_project (bench/objectives/ba.c) in one
 * evaluation, written two ways: on one 15-direction dual type (CR_DUALN_DEFINE,
 * ba_project_dual) and in three stages on narrower types composed by TYPE_chain
 * (ba_project_jac_staged). chainrules-bench times them (dual_ba_dense_ratio and
 * dual_ba_ratio, bench/bench_dual.c) and tests/ad/test_dual_ba.c checks them against
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

/*
 * The same Jacobian in stages, each on a dual type with one direction per input of the
 * stage (docs/forward-mode.md, "Stages on narrower duals"): the operations are those of
 * ba_project, in its order, but no stage carries the directions its inputs do not depend
 * on.
 *
 *   rotation    cam[0..2] -> w0, w1, w2, cos theta, sin theta          ba_rot, 3 directions
 *   transform   those 5 and xo = X - C -> xc                            ba_xf, 8 directions
 *   projection  xc, cam[6..10], w -> err                                ba_prj, 9 directions
 *
 * ba_xf_chain and ba_rot_chain then carry the tangents of err back to the inputs of the
 * block. At sqtheta = 0 (the objective's other branch) the transform reads cam[0..2]
 * themselves (xc = xo + r x xo), and the rotation stage is the identity on them.
 */
CR_DUALN_DEFINE(ba_rot, 3);
CR_DUALN_DEFINE(ba_xf, 8);
CR_DUALN_DEFINE(ba_prj, 9);

/* The errors err[0..2) and the 2 x 15 Jacobian J (row-major, columns cam[0..11), X[0..3),
 * w) of one block. */
static inline void ba_project_jac_staged(const double *cam, const double *X, const double *w,
                                         const double *feat, double *err, double *J)
{
    ba_rot rot[5];
    ba_xf in[8], xc[3];
    double xov[3];
    for (int i = 0; i < 3; i++)
        xov[i] = X[i] - cam[3 + i];
    ba_rot r0 = ba_rot_var(cam[0], 0), r1 = ba_rot_var(cam[1], 1), r2 = ba_rot_var(cam[2], 2);
    ba_rot sqtheta =
        ba_rot_add(ba_rot_add(ba_rot_mul(r0, r0), ba_rot_mul(r1, r1)), ba_rot_mul(r2, r2));
    for (size_t i = 0; i < 3; i++)
        in[5 + i] = ba_xf_var(xov[i], 5 + i);
    if (sqtheta.v != 0.0) {
        ba_rot theta = ba_rot_sqrt(sqtheta);
        rot[3] = ba_rot_cos(theta);
        rot[4] = ba_rot_sin(theta);
        ba_rot theta_inverse = ba_rot_div(ba_rot_const(1.0), theta);
        rot[0] = ba_rot_mul(r0, theta_inverse);
        rot[1] = ba_rot_mul(r1, theta_inverse);
        rot[2] = ba_rot_mul(r2, theta_inverse);
        for (size_t i = 0; i < 5; i++)
            in[i] = ba_xf_var(rot[i].v, i);
        ba_xf w0 = in[0], w1 = in[1], w2 = in[2], costheta = in[3], sintheta = in[4];
        ba_xf c0 = ba_xf_sub(ba_xf_mul(w1, in[7]), ba_xf_mul(w2, in[6]));
        ba_xf c1 = ba_xf_sub(ba_xf_mul(w2, in[5]), ba_xf_mul(w0, in[7]));
        ba_xf c2 = ba_xf_sub(ba_xf_mul(w0, in[6]), ba_xf_mul(w1, in[5]));
        ba_xf tmp = ba_xf_mul(
            ba_xf_add(ba_xf_add(ba_xf_mul(w0, in[5]), ba_xf_mul(w1, in[6])), ba_xf_mul(w2, in[7])),
            ba_xf_sub(ba_xf_const(1.0), costheta));
        xc[0] = ba_xf_add(ba_xf_add(ba_xf_mul(in[5], costheta), ba_xf_mul(c0, sintheta)),
                          ba_xf_mul(w0, tmp));
        xc[1] = ba_xf_add(ba_xf_add(ba_xf_mul(in[6], costheta), ba_xf_mul(c1, sintheta)),
                          ba_xf_mul(w1, tmp));
        xc[2] = ba_xf_add(ba_xf_add(ba_xf_mul(in[7], costheta), ba_xf_mul(c2, sintheta)),
                          ba_xf_mul(w2, tmp));
    } else {
        rot[0] = r0;
        rot[1] = r1;
        rot[2] = r2;
        rot[3] = rot[4] = ba_rot_const(0.0);
        for (size_t i = 0; i < 5; i++)
            in[i] = i < 3 ? ba_xf_var(cam[i], i) : ba_xf_const(0.0);
        xc[0] = ba_xf_add(in[5], ba_xf_sub(ba_xf_mul(in[1], in[7]), ba_xf_mul(in[2], in[6])));
        xc[1] = ba_xf_add(in[6], ba_xf_sub(ba_xf_mul(in[2], in[5]), ba_xf_mul(in[0], in[7])));
        xc[2] = ba_xf_add(in[7], ba_xf_sub(ba_xf_mul(in[0], in[6]), ba_xf_mul(in[1], in[5])));
    }
    /* the projection: directions xc[0..3), cam[6..11), w */
    ba_prj q[3];
    for (size_t i = 0; i < 3; i++)
        q[i] = ba_prj_var(xc[i].v, i);
    ba_prj f = ba_prj_var(cam[6], 3), cu = ba_prj_var(cam[7], 4), cv = ba_prj_var(cam[8], 5);
    ba_prj k1 = ba_prj_var(cam[9], 6), k2 = ba_prj_var(cam[10], 7), wd = ba_prj_var(w[0], 8);
    ba_prj p0 = ba_prj_div(q[0], q[2]);
    ba_prj p1 = ba_prj_div(q[1], q[2]);
    ba_prj rsq = ba_prj_add(ba_prj_mul(p0, p0), ba_prj_mul(p1, p1));
    ba_prj lr = ba_prj_add(ba_prj_add(ba_prj_const(1.0), ba_prj_mul(k1, rsq)),
                           ba_prj_mul(ba_prj_mul(k2, rsq), rsq));
    p0 = ba_prj_mul(p0, lr);
    p1 = ba_prj_mul(p1, lr);
    ba_prj proj0 = ba_prj_add(ba_prj_mul(p0, f), cu);
    ba_prj proj1 = ba_prj_add(ba_prj_mul(p1, f), cv);
    ba_prj e[2];
    e[0] = ba_prj_mul(wd, ba_prj_sub(proj0, ba_prj_const(feat[0])));
    e[1] = ba_prj_mul(wd, ba_prj_sub(proj1, ba_prj_const(feat[1])));
    /* back through the transform and the rotation */
    for (int r = 0; r < 2; r++) {
        double *Jr = J + 15 * r;
        err[r] = e[r].v;
        ba_xf t = ba_xf_chain(e[r].v, 3, e[r].d, xc);
        ba_rot g = ba_rot_chain(e[r].v, 5, t.d, rot);
        for (int i = 0; i < 3; i++) {
            Jr[i] = g.d[i];
            Jr[3 + i] = -t.d[5 + i];
            Jr[11 + i] = t.d[5 + i];
        }
        for (int i = 0; i < 5; i++)
            Jr[6 + i] = e[r].d[3 + i];
        Jr[14] = e[r].d[8];
    }
}

#endif /* CR_BENCH_BA_DUAL_H */
