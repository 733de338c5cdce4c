/*
 * The chainrules-c-tape variant of chainrules-gradbench (docs/gradbench.md): the plain C
 * objectives of bench/objectives, compiled a second time with their `double` standing for a
 * variable of the library's reverse tape (tools/gradbench/tape.cpp), recorded and swept.
 *
 * Every function returns 0 or a cr_status; gbt_errmsg() then says what failed. The
 * derivative arrays are written (not added to).
 */
#ifndef CR_GB_TAPE_H
#define CR_GB_TAPE_H

#ifdef __cplusplus
extern "C" {
#endif

/** The message of the last failure of a gbt_ function ("" when none). */
const char *gbt_errmsg(void);

/** Releases the tapes and the prepared gradients (at the tool's exit). */
void gbt_shutdown(void);

/** hello: d(x^2)/dx. */
int gbt_hello(double x, double *g);

/** lse: the gradient of lse_objective(x, n). */
int gbt_lse(const double *x, long n, double *g);

/** llsq: the gradient of llsq_objective(x, m, n) with respect to x (m values). */
int gbt_llsq(const double *x, long m, long n, double *g);

/** ode: the gradient of the last component of ode_primal(n, x, s). */
int gbt_ode(int n, const double *x, int s, double *g);

/** det: the gradient of det_objective(a, ell, r, c) (r, c: ell + 1 work indices). */
int gbt_det(const double *a, long ell, long *r, long *c, double *g);

/** kmeans: the gradient J of kmeans_cost with respect to the centroids and H 1 (its
 *  diagonal Hessian times ones), k * d values each. */
int gbt_kmeans(int n, int k, int d, const double *points, const double *centroids, double *J,
               double *hd);

/** gmm: the gradient of gmm_objective with respect to alphas, means, q and l. */
int gbt_gmm(int d, int k, int n, const double *alphas, const double *means, const double *q,
            const double *l, const double *x, double gamma, int m, double *ga, double *gmeans,
            double *gq, double *gl);

/** lstm: the gradient of lstm_objective with respect to main_params and extra_params. */
int gbt_lstm(int l, int c, int b, const double *main_params, const double *extra_params,
             const double *state, const double *sequence, double *gmain, double *gextra);

/** ba: records one reprojection block (both rows) and the weight error as prepared
 *  gradients at the given values; gbt_ba_block() then replays them. */
int gbt_ba_prepare(const double *cam, const double *X, const double *w, const double *feat);

/** ba: the 2 x 15 Jacobian of one block (row-major: 11 camera, 3 point, 1 weight columns)
 *  and the weight error's derivative, by replaying the prepared recordings. */
int gbt_ba_block(const double *cam, const double *X, const double *w, const double *feat, double *J,
                 double *dw);

/** ht: the Jacobian of the errors (3 npts rows) with respect to theta (and, when us is not
 *  NULL, (u0, u1) of every point as two leading columns): J[row * nd + col], one forward
 *  sweep per column. triangles and us are NULL for the simple variant. */
int gbt_ht(int nbones, int nverts, int npts, const int *parents, const double *base_relatives,
           const double *inverse_base_absolutes, const double *base_positions,
           const double *weights, int is_mirrored, const int *correspondences, const int *triangles,
           const double *points, const double *theta, const double *us, double *J);

/** particle: the derivative of particle_euler_f at w, by the tape's reverse sweep
 *  (outer_reverse) or forward sweep; the inner gradient is chainrules-ad's reverse mode
 *  (inner_reverse) or forward mode, recorded on the tape. */
int gbt_particle(int outer_reverse, int inner_reverse, double w, double *g);

/** saddle: the gradient of saddle_max_f(p1, start) with respect to p1 (2 values), by the
 *  tape's reverse sweep (outer_reverse) or two forward sweeps; the inner gradient as for
 *  gbt_particle(). */
int gbt_saddle_outer(int outer_reverse, int inner_reverse, const double *p1, const double *start,
                     double *g);

/** saddle: the gradient of saddle_f(p1, p2) with respect to p2, by the tape's reverse
 *  sweep (reverse) or two forward sweeps. */
int gbt_saddle_inner(int reverse, const double *p1, const double *p2, double *g);

#ifdef __cplusplus
}
#endif

#endif
