/**
 * @file objectives_ad.h
 * @brief The derivatives chainrules-ad writes for the objectives of objectives.h (library
 *        cr_objectives_ad, bench/objectives/CMakeLists.txt): declared here from the
 *        documented signature rules (docs/source-transformation.md), so that a change of
 *        the generated signatures fails to compile.
 */
#ifndef CR_BENCH_OBJECTIVES_AD_H
#define CR_BENCH_OBJECTIVES_AD_H

#ifdef __cplusplus
extern "C" {
#endif

/** Reverse mode of rosen(): adds the gradient times rosen_b into x_b; returns the value. */
double rosen_rev(const double *x, double *x_b, long n, double rosen_b);
/** Reverse mode of chain() with respect to x. */
double chain_rev(const double *x, double *x_b, int n, long steps, double chain_b);
/** Reverse mode of mse() with respect to x. */
double mse_rev(const double *x, double *x_b, const double *y, int n, double mse_b);
/** Reverse mode of gmm_objective() with respect to alphas, means, q and l. */
double gmm_objective_rev(int d, int k, int n, const double *alphas, double *alphas_b,
                         const double *means, double *means_b, const double *q, double *q_b,
                         const double *l, double *l_b, const double *x, double wishart_gamma,
                         int wishart_m, double gmm_objective_b);
/** Reverse mode of lstm_objective() with respect to the parameters. */
double lstm_objective_rev(int l, int c, int b, const double *main_params, double *main_params_b,
                          const double *extra_params, double *extra_params_b, const double *state,
                          const double *sequence, double lstm_objective_b);
/** Reverse mode of ba_project() with respect to cam, X and w (err_b: the seed, zeroed). */
void ba_project_rev(const double *cam, double *cam_b, const double *X, double *X_b, const double *w,
                    double *w_b, const double *feat, double *err, double *err_b);
/** Forward mode of ba_project(). */
void ba_project_fwd(const double *cam, const double *cam_d, const double *X, const double *X_d,
                    const double *w, const double *w_d, const double *feat, double *err,
                    double *err_d);
/** Vector forward mode of ba_project(): nd directions, element-major (a_d[i*nd + k]). */
void ba_project_fwdv(const double *cam, const double *cam_d, const double *X, const double *X_d,
                     const double *w, const double *w_d, const double *feat, double *err,
                     double *err_d, int nd);
/** The 2 x 15 Jacobian of ba_project()'s err with respect to cam, X and w (row-major, columns
 *  cam[0..10], X[0..2], w[0]) by the forward mode with static lane sparsity. */
void ba_project_jacfwd(const double *cam, const double *X, const double *w, const double *feat,
                       double *err, double *J);
/** Reverse mode of ba_weight_error(). */
void ba_weight_error_rev(const double *w, double *w_b, double *err, double *err_b);
/** Forward mode of ba_weight_error(). */
void ba_weight_error_fwd(const double *w, const double *w_d, double *err, double *err_d);
/** Reverse mode of ode_primal() (yf_b: the seed, zeroed). */
void ode_primal_rev(int n, const double *x, double *x_b, int s, double *yf, double *yf_b);
/** Forward mode of ode_primal(). */
void ode_primal_fwd(int n, const double *x, const double *x_d, int s, double *yf, double *yf_d);
/** Reverse mode of ht_objective() with respect to theta. */
void ht_objective_rev(int nbones, int nverts, int npts, const int *parents,
                      const double *base_relatives, const double *inverse_base_absolutes,
                      const double *base_positions, const double *weights, int is_mirrored,
                      const int *correspondences, const double *points, const double *theta,
                      double *theta_b, double *err, double *err_b);
/** Vector forward mode of ht_objective() with respect to theta. */
void ht_objective_fwdv(int nbones, int nverts, int npts, const int *parents,
                       const double *base_relatives, const double *inverse_base_absolutes,
                       const double *base_positions, const double *weights, int is_mirrored,
                       const int *correspondences, const double *points, const double *theta,
                       const double *theta_d, double *err, double *err_d, int nd);
/** Reverse mode of ht_objective_complicated() with respect to theta and us. */
void ht_objective_complicated_rev(int nbones, int nverts, int npts, const int *parents,
                                  const double *base_relatives,
                                  const double *inverse_base_absolutes,
                                  const double *base_positions, const double *weights,
                                  int is_mirrored, const int *correspondences, const int *triangles,
                                  const double *points, const double *theta, double *theta_b,
                                  const double *us, double *us_b, double *err, double *err_b);
/** Vector forward mode of ht_objective_complicated() with respect to theta and us. */
void ht_objective_complicated_fwdv(int nbones, int nverts, int npts, const int *parents,
                                   const double *base_relatives,
                                   const double *inverse_base_absolutes,
                                   const double *base_positions, const double *weights,
                                   int is_mirrored, const int *correspondences,
                                   const int *triangles, const double *points, const double *theta,
                                   const double *theta_d, const double *us, const double *us_d,
                                   double *err, double *err_d, int nd);

/** Reverse mode of hello_square(). */
double hello_square_rev(double x, double *x_b, double hello_square_b);
/** Reverse mode of lse_objective(). */
double lse_objective_rev(const double *x, double *x_b, long n, double lse_objective_b);
/** The same, x_b[i] assigned (not added): no clearing before the call (--reverse-set). */
double lse_objective_rev_set(const double *x, double *x_b, long n, double lse_objective_b);
/** Reverse mode of llsq_objective(). */
double llsq_objective_rev(const double *x, double *x_b, long m, long n, double llsq_objective_b);
/** Reverse mode of det_objective() with respect to a (r and c: working storage). */
double det_objective_rev(const double *a, double *a_b, long ell, long *r, long *c,
                         double det_objective_b);
/** Reverse mode of kmeans_cost() with respect to the centroids. */
double kmeans_cost_rev(int n, int k, int d, const double *points, const double *centroids,
                       double *centroids_b, double kmeans_cost_b);
/** Forward mode of kmeans_cost() with respect to the centroids. */
double kmeans_cost_fwd(int n, int k, int d, const double *points, const double *centroids,
                       const double *centroids_d, double *kmeans_cost_d);
/**
 * Reverse mode of kmeans_cost_fwd() (second order: the tool applied to its own output) with
 * respect to the centroids and their tangent: centroids_b += H centroids_d * kmeans_cost_d_b
 * + grad * kmeans_cost_fwd_b, centroids_d_b += grad * kmeans_cost_d_b (H the Hessian).
 */
double kmeans_cost_fwd_rev(int n, int k, int d, const double *points, const double *centroids,
                           double *centroids_b, const double *centroids_d, double *centroids_d_b,
                           double *kmeans_cost_d, double *kmeans_cost_d_b,
                           double kmeans_cost_fwd_b);

/** Forward mode of saddle_f() with respect to p2. */
double saddle_f_fwd(double p1x, double p1y, double p2x, double p2x_d, double p2y, double p2y_d,
                    double *saddle_f_d);
/** Reverse mode of saddle_f() with respect to p2. */
double saddle_f_rev(double p1x, double p1y, double p2x, double *p2x_b, double p2y, double *p2y_b,
                    double saddle_f_b);
/** Forward mode of saddle_max_f() with respect to p1 (forward over forward). */
double saddle_max_f_fwd(double p1x, double p1x_d, double p1y, double p1y_d, double s0, double s1,
                        double *saddle_max_f_d);
/** Reverse mode of saddle_max_f() with respect to p1 (reverse over forward). */
double saddle_max_f_rev(double p1x, double *p1x_b, double p1y, double *p1y_b, double s0, double s1,
                        double saddle_max_f_b);
/** Forward mode of particle_accel() with respect to the particle's position. */
double particle_accel_fwd(double cx0, double cy0, double cx1, double cy1, double x, double x_d,
                          double y, double y_d, double *particle_accel_d);
/** Forward mode of particle_euler_f() (forward over forward). */
double particle_euler_f_fwd(double w, double w_d, double *particle_euler_f_d);
/** Reverse mode of particle_euler_f() (reverse over forward). */
double particle_euler_f_rev(double w, double *w_b, double particle_euler_f_b);
/** Reverse mode of particle_accel() with respect to the particle's position. */
double particle_accel_rev(double cx0, double cy0, double cx1, double cy1, double x, double *x_b,
                          double y, double *y_b, double particle_accel_b);

/* fr and rr: the outer functions with the inner gradient from the reverse mode
 * (nested/saddle_rev.c, nested/particle_rev.c), differentiated again. */
/** Forward mode of saddle_max_f_r() with respect to p1 (forward over reverse). */
double saddle_max_f_r_fwd(double p1x, double p1x_d, double p1y, double p1y_d, double s0, double s1,
                          double *saddle_max_f_r_d);
/** Reverse mode of saddle_max_f_r() with respect to p1 (reverse over reverse). */
double saddle_max_f_r_rev(double p1x, double *p1x_b, double p1y, double *p1y_b, double s0,
                          double s1, double saddle_max_f_r_b);
/** Forward mode of particle_euler_f_r() (forward over reverse). */
double particle_euler_f_r_fwd(double w, double w_d, double *particle_euler_f_r_d);
/** Reverse mode of particle_euler_f_r() (reverse over reverse). */
double particle_euler_f_r_rev(double w, double *w_b, double particle_euler_f_r_b);

#ifdef __cplusplus
}
#endif

#endif /* CR_BENCH_OBJECTIVES_AD_H */
