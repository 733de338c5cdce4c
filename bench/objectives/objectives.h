/**
 * @file objectives.h
 * @brief Benchmark objectives written as plain C (the subset chainrules-ad reads), their
 *        hand-written derivatives, and deterministic input generators.
 *
 * The objectives are GradBench's gmm, lstm, ba and ode evals (github.com/gradbench/gradbench,
 * evals/<name>/README.md and cpp/gradbench/evals/<name>.hpp give the definitions), with the
 * same mathematics and the same flat input layouts, and the library's own benchmark workloads
 * (Rosenbrock, the chain, mse). bench/objectives/README.md describes each one.
 *
 * Every objective is one function of flat pointer and scalar parameters, written in the C
 * subset of docs/source-transformation.md: no allocation, no pointer arithmetic, local
 * arrays of constant size only. Where an objective needs working storage larger than a
 * small constant it uses local arrays bounded by the GMM_MAX_* / LSTM_MAX_* constants
 * below and returns NaN for larger sizes.
 *
 * The hand-written derivatives (bench/objectives/hand/) have the signature that
 * `chainrules-ad --reverse f --wrt ...` gives f_rev, under the name f_grad: each active
 * parameter is followed by its shadow, the gradient is added (`+=`) into the shadows, the
 * last parameter is the output's cotangent seed and the primal value is returned. They are
 * the baseline of the source transformer's speed figures.
 */
#ifndef CR_BENCH_OBJECTIVES_H
#define CR_BENCH_OBJECTIVES_H

#ifdef __cplusplus
extern "C" {
#endif

/** Largest dimension d accepted by gmm_objective() (GradBench's largest is 128). */
#define GMM_MAX_D 128
/** Largest number of components k accepted by gmm_objective() (GradBench's largest: 200). */
#define GMM_MAX_K 200
/** Largest number of layers l accepted by lstm_objective() (GradBench's largest: 6). */
#define LSTM_MAX_L 8
/** Largest number of character bits b accepted by lstm_objective(). */
#define LSTM_MAX_B 32
/** Smallest number of bones of a hand model (the pose addresses 5 fingers of 4 bones after
 *  the wrist: GradBench's models have 22). */
#define HT_MIN_BONES 22
/** Largest number of bones accepted by ht_objective(). */
#define HT_MAX_BONES 32
/** Largest number of vertices accepted by ht_objective() (GradBench's big model: 10000). */
#define HT_MAX_VERTS 10000
/** Largest number of vertices of a model that ht.c poses into its smaller array of the
 *  posed model (when the points read more vertex instances than the model has vertices;
 *  GradBench's small model: 544). */
#define HT_POSED_SMALL 1024
/** Number of pose parameters theta of the hand model. */
#define HT_NTHETA 26
/** Number of camera parameters of a bundle-adjustment camera. */
#define BA_NCAMPARAMS 11
/** Columns of one reprojection block's Jacobian: 11 camera, 3 point, 1 weight. */
#define BA_NCOLS 15

/* ----------------------------------------------------------------------------------- */
/* Objectives (one file each in bench/objectives/)                                       */

/**
 * Rosenbrock's function as a scalar loop (rosen.c).
 * @param[in] x n values.
 * @param[in] n number of values (the sum has n - 1 terms; 0 for n < 2).
 * @return sum_{i=0}^{n-2} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2.
 */
double rosen(const double *x, long n);

/**
 * The chain workload of chainrules-bench (chain.c): t_0 = 0,
 * t_{s+1} = t_s + x[s mod n] exp(sin(t_s)) for s = 0..steps-1.
 * @param[in] x     n values.
 * @param[in] n     number of values (>= 1).
 * @param[in] steps number of steps (chainrules-bench: 250000 with n = 1000).
 * @return t_steps.
 */
double chain(const double *x, int n, long steps);

/**
 * Mean squared error (mse.c), the mse workload of chainrules-bench (n = 30 there).
 * @param[in] x n values (the active input).
 * @param[in] y n targets.
 * @param[in] n number of values (>= 1).
 * @return sum_i (x[i] - y[i])^2 / n.
 */
double mse(const double *x, const double *y, int n);

/**
 * GradBench's gmm objective (gmm.c): the log posterior of a Gaussian mixture with a
 * Wishart prior on the precision matrices, log(likelihood * prior).
 *
 * The precision matrix of component j is Q_j^T Q_j with Q_j lower triangular, its diagonal
 * exp(q[j*d + 0..d-1]) and its strictly lower part packed column by column in
 * l[j*d*(d-1)/2 + ...] (Q_j[1][0], Q_j[2][0], ..., Q_j[d-1][0], Q_j[2][1], ...).
 *
 * @param[in] d             dimension, 1 <= d <= GMM_MAX_D.
 * @param[in] k             number of components, 1 <= k <= GMM_MAX_K.
 * @param[in] n             number of points, >= 0.
 * @param[in] alphas        k weight parameters (the weights are softmax(alphas)).
 * @param[in] means         k*d means, component-major.
 * @param[in] q             k*d logarithms of the diagonals of the Q_j.
 * @param[in] l             k*d*(d-1)/2 strictly lower parts of the Q_j.
 * @param[in] x             n*d data points, point-major.
 * @param[in] wishart_gamma the Wishart prior's precision gamma (GradBench: 1).
 * @param[in] wishart_m     the Wishart prior's extra degrees of freedom m (GradBench: 0).
 * @return the log posterior; NaN if d or k is out of range.
 */
double gmm_objective(int d, int k, int n, const double *alphas, const double *means,
                     const double *q, const double *l, const double *x, double wishart_gamma,
                     int wishart_m);

/**
 * GradBench's lstm objective (lstm.c): the mean negative log-likelihood of the next
 * character of a sequence predicted by an l-layer LSTM of width b (ADBench's element-wise
 * LSTM). The state is copied into a local array (LSTM_MAX_L x LSTM_MAX_B): the caller's
 * `state` is only read.
 *
 * Layouts: main_params holds, for each layer, 8 blocks of b values: the weights of the
 * forget, input, output and change gates, then their biases (8*b*l values). extra_params
 * holds the input weights, output weights and output biases (3*b). state holds, for each
 * layer, the hidden values then the cell values (2*b*l). sequence holds c characters of b
 * values each (c*b, character-major).
 *
 * @param[in] l            number of layers, 1 <= l <= LSTM_MAX_L.
 * @param[in] c            number of characters, >= 2.
 * @param[in] b            values per character, 1 <= b <= LSTM_MAX_B.
 * @param[in] main_params  8*b*l parameters.
 * @param[in] extra_params 3*b parameters.
 * @param[in] state        2*b*l initial state (read only).
 * @param[in] sequence     c*b inputs.
 * @return the loss -sum_t sum_i y_{t+1,i} (p_{t,i} - logsumexp_2(p_t)) / ((c-1) b); NaN if
 *         a size is out of range.
 */
double lstm_objective(int l, int c, int b, const double *main_params, const double *extra_params,
                      const double *state, const double *sequence);

/**
 * One reprojection block of GradBench's ba objective (ba.c): the weighted error of the
 * projection of a point by a camera with radial distortion.
 * @param[in]  cam  11 camera parameters: Rodrigues rotation r[3], centre C[3], focal
 *                  length f, principal point u0, v0, radial distortion k1, k2.
 * @param[in]  X    3 point coordinates.
 * @param[in]  w    1 weight.
 * @param[in]  feat 2 measured feature coordinates.
 * @param[out] err  2 errors w (proj - feat).
 */
void ba_project(const double *cam, const double *X, const double *w, const double *feat,
                double *err);

/**
 * The weight error of GradBench's ba objective (ba.c).
 * @param[in]  w   1 weight.
 * @param[out] err 1 - w^2.
 */
void ba_weight_error(const double *w, double *err);

/**
 * GradBench's ode eval (ode.c): s steps of the classical fourth-order Runge-Kutta method
 * on [0, 2] for y_0' = x_0, y_i' = x_i y_{i-1}, from y(0) = 0. The stages are computed in
 * one sweep over i (each stage of y_i needs only the stages of y_{i-1}), with the same
 * floating-point operations as GradBench's vector form.
 * @param[in]  n  dimension, >= 1.
 * @param[in]  x  n coefficients.
 * @param[in]  s  number of steps, >= 1.
 * @param[out] yf n values y(2).
 */
void ode_primal(int n, const double *x, int s, double *yf);

/**
 * GradBench's ht objective, "simple" variant (ht.c): the differences between measured
 * points and the vertices of a skinned hand model posed by theta.
 *
 * The pose: theta[0..2] a global angle-axis rotation, theta[3..5] a global translation,
 * theta[6..25] Euler angles of the finger bones (GradBench's to_pose_params). Each bone b
 * has the relative transform base_relatives[b] times the rotation of its angles, its
 * absolute transform is its parent's absolute transform times that, and its skinning
 * transform that times inverse_base_absolutes[b]. A vertex's position is the weighted sum
 * of its skinning transforms applied to its base position (x -x if is_mirrored), then the
 * global rotation and translation.
 *
 * @param[in]  nbones                 number of bones, HT_MIN_BONES..HT_MAX_BONES.
 * @param[in]  nverts                 number of vertices, 1..HT_MAX_VERTS.
 * @param[in]  npts                   number of measured points.
 * @param[in]  parents                nbones parent indices (-1 for a root), each parent
 *                                    before its children.
 * @param[in]  base_relatives         nbones 4 x 4 row-major matrices.
 * @param[in]  inverse_base_absolutes nbones 4 x 4 row-major matrices.
 * @param[in]  base_positions         nverts homogeneous positions (4 values each).
 * @param[in]  weights                nverts x nbones skinning weights, vertex-major.
 * @param[in]  is_mirrored            non-zero to mirror the model in x.
 * @param[in]  correspondences        npts vertex indices.
 * @param[in]  points                 npts x 3 measured points.
 * @param[in]  theta                  HT_NTHETA pose parameters.
 * @param[out] err                    npts x 3: point - vertex; NaN if a size is out of range.
 */
void ht_objective(int nbones, int nverts, int npts, const int *parents,
                  const double *base_relatives, const double *inverse_base_absolutes,
                  const double *base_positions, const double *weights, int is_mirrored,
                  const int *correspondences, const double *points, const double *theta,
                  double *err);

/**
 * GradBench's ht objective, "complicated" variant (ht.c): as ht_objective(), but the model
 * point of measurement i is u0 A + u1 B + (1 - u0 - u1) C on triangle correspondences[i]
 * = (A, B, C), with (u0, u1) = us[2i..2i+1].
 * @param[in]  triangles 3 vertex indices per triangle.
 * @param[in]  us        npts x 2 barycentric coordinates.
 * The other parameters are those of ht_objective(), correspondences indexing triangles.
 */
void ht_objective_complicated(int nbones, int nverts, int npts, const int *parents,
                              const double *base_relatives, const double *inverse_base_absolutes,
                              const double *base_positions, const double *weights, int is_mirrored,
                              const int *correspondences, const int *triangles,
                              const double *points, const double *theta, const double *us,
                              double *err);

/**
 * GradBench's hello eval (hello.c): x squared.
 * @param[in] x the value.
 * @return x * x.
 */
double hello_square(double x);

/**
 * GradBench's lse eval (lse.c): log(sum_i exp(x_i)), shifted by the maximum.
 * @param[in] x n values.
 * @param[in] n number of values, >= 1.
 * @return the log-sum-exp of x.
 */
double lse_objective(const double *x, long n);

/**
 * GradBench's llsq eval (llsq.c): half the squared residual of the polynomial with
 * coefficients x fitted to sign(t) at n points t_i = -1 + 2 i / (n - 1).
 * @param[in] x m coefficients.
 * @param[in] m number of coefficients.
 * @param[in] n number of points, >= 2.
 * @return (1/2) sum_i (sign(t_i) - sum_j x_j t_i^j)^2.
 */
double llsq_objective(const double *x, long m, long n);

/**
 * GradBench's det eval (det.c): the determinant by expansion in minors (ell! products).
 * @param[in]     a   ell x ell matrix, row-major.
 * @param[in]     ell order, >= 1.
 * @param[in,out] r   ell + 1 integers of working storage.
 * @param[in,out] c   ell + 1 integers of working storage.
 * @return det(a).
 */
double det_objective(const double *a, long ell, long *r, long *c);

/**
 * GradBench's kmeans eval (kmeans.c): sum over the points of the squared distance to the
 * closest centroid.
 * @param[in] n         number of points.
 * @param[in] k         number of centroids, >= 1.
 * @param[in] d         dimension.
 * @param[in] points    n x d points, point-major.
 * @param[in] centroids k x d centroids.
 * @return the cost.
 */
double kmeans_cost(int n, int k, int d, const double *points, const double *centroids);

/**
 * GradBench's saddle function (saddle.c): (p1x^2 + p1y^2) - (p2x^2 + p2y^2).
 * @param[in] p1x first point, x.
 * @param[in] p1y first point, y.
 * @param[in] p2x second point, x.
 * @param[in] p2y second point, y.
 * @return the value.
 */
double saddle_f(double p1x, double p1y, double p2x, double p2y);

/**
 * The inner maximum of GradBench's saddle eval (nested/saddle_max.c): max over p2 of
 * saddle_f(p1, p2) by GradBench's gradient descent from s, the gradient by
 * saddle_f_fwd().
 * @param[in] p1x first point, x.
 * @param[in] p1y first point, y.
 * @param[in] s0  starting point, x.
 * @param[in] s1  starting point, y.
 * @return saddle_f(p1, p2) at the maximising p2 found.
 */
double saddle_max_f(double p1x, double p1y, double s0, double s1);

/**
 * The potential of GradBench's particle eval (particle.c): 1 / |c0 - x| + 1 / |c1 - x|.
 * @param[in] cx0 first charge, x.
 * @param[in] cy0 first charge, y.
 * @param[in] cx1 second charge, x.
 * @param[in] cy1 second charge, y.
 * @param[in] x   the particle, x.
 * @param[in] y   the particle, y.
 * @return the potential.
 */
double particle_accel(double cx0, double cy0, double cx1, double cy1, double x, double y);

/**
 * GradBench's particle path (nested/particle_euler.c): Euler's method with the charges at
 * (10, 10 - w) and (10, 0), the acceleration by particle_accel_fwd().
 * @param[in] w the control parameter.
 * @return the squared x coordinate where the path crosses the x axis.
 */
double particle_euler_f(double w);

/* ----------------------------------------------------------------------------------- */
/* Hand-written derivatives (bench/objectives/hand/)                                     */

/**
 * Gradient of rosen(), added into x_b.
 * @param[in]     x      n values.
 * @param[in,out] x_b    n shadows: x_b += rosen_b * grad rosen(x).
 * @param[in]     n      number of values.
 * @param[in]     rosen_b the output's cotangent.
 * @return rosen(x, n).
 */
double rosen_grad(const double *x, double *x_b, long n, double rosen_b);

/**
 * Gradient of chain() (the t_s are kept in a buffer of steps doubles).
 * @param[in]     x       n values.
 * @param[in,out] x_b     n shadows: x_b += chain_b * grad chain(x).
 * @param[in]     n       number of values.
 * @param[in]     steps   number of steps.
 * @param[in]     chain_b the output's cotangent.
 * @return chain(x, n, steps); NaN if the buffer cannot be allocated (x_b untouched).
 */
double chain_grad(const double *x, double *x_b, int n, long steps, double chain_b);

/**
 * Gradient of mse() with respect to x.
 * @param[in]     x     n values.
 * @param[in,out] x_b   n shadows: x_b += mse_b * 2 (x - y) / n.
 * @param[in]     y     n targets.
 * @param[in]     n     number of values.
 * @param[in]     mse_b the output's cotangent.
 * @return mse(x, y, n).
 */
double mse_grad(const double *x, double *x_b, const double *y, int n, double mse_b);

/**
 * Gradient of gmm_objective() with respect to alphas, means, q and l (GradBench's
 * jacobian), added into the shadows (the signature of `--wrt alphas,means,q,l`).
 * @return gmm_objective(...); NaN if d or k is out of range or scratch memory cannot be
 *         allocated (the shadows are then untouched).
 */
double gmm_objective_grad(int d, int k, int n, const double *alphas, double *alphas_b,
                          const double *means, double *means_b, const double *q, double *q_b,
                          const double *l, double *l_b, const double *x, double wishart_gamma,
                          int wishart_m, double gmm_objective_b);

/**
 * Gradient of lstm_objective() with respect to main_params and extra_params (GradBench's
 * jacobian), added into the shadows (the signature of `--wrt main_params,extra_params`).
 * @return lstm_objective(...); NaN if a size is out of range or scratch memory cannot be
 *         allocated (the shadows are then untouched).
 */
double lstm_objective_grad(int l, int c, int b, const double *main_params, double *main_params_b,
                           const double *extra_params, double *extra_params_b, const double *state,
                           const double *sequence, double lstm_objective_b);

/**
 * Reverse mode of ode_primal(): the signature chainrules-ad gives ode_primal_rev (yf an
 * output). The y at the start of every step are kept (n s doubles).
 * @param[in]     n    dimension.
 * @param[in]     x    n coefficients.
 * @param[in,out] x_b  n shadows: x_b += (d yf / d x)^T yf_b.
 * @param[in]     s    number of steps.
 * @param[out]    yf   n values y(2), as ode_primal(); NaN if the buffer cannot be
 *                     allocated (x_b and yf_b are then untouched).
 * @param[in,out] yf_b n cotangents of yf on entry; zero on exit (consumed).
 */
void ode_primal_grad(int n, const double *x, double *x_b, int s, double *yf, double *yf_b);

/**
 * ba_project() and its 2 x 15 Jacobian.
 * @param[in]  cam  11 camera parameters.
 * @param[in]  X    3 point coordinates.
 * @param[in]  w    1 weight.
 * @param[in]  feat 2 measured feature coordinates.
 * @param[out] err  2 errors, as ba_project().
 * @param[out] J    2 x 15 row-major: J[r*15 + c] = d err[r] / d v[c], v = (cam[0..10],
 *                  X[0..2], w).
 */
void ba_project_jac(const double *cam, const double *X, const double *w, const double *feat,
                    double *err, double *J);

/**
 * ba_weight_error() and its derivative.
 * @param[in]  w   1 weight.
 * @param[out] err 1 - w^2.
 * @param[out] J   d err / d w = -2 w.
 */
void ba_weight_error_jac(const double *w, double *err, double *J);

/* ----------------------------------------------------------------------------------- */
/* Deterministic inputs (inputs.c): the same seed gives the same values on every run and  */
/* platform (a 64-bit splitmix generator; normals by Box-Muller).                        */

/**
 * n values uniform in [lo, hi).
 * @param[out] x    n values.
 * @param[in]  n    number of values.
 * @param[in]  lo   lower bound.
 * @param[in]  hi   upper bound.
 * @param[in]  seed seed.
 */
void obj_fill_uniform(double *x, long n, double lo, double hi, unsigned long seed);

/**
 * n standard normal values.
 * @param[out] x    n values.
 * @param[in]  n    number of values.
 * @param[in]  seed seed.
 */
void obj_fill_normal(double *x, long n, unsigned long seed);

/**
 * A gmm input distributed as GradBench's (gmm/run.py generate()): x, alphas, q and l
 * standard normal, means uniform in [0, 1). GradBench's gamma is 1 and m is 0.
 * @param[in]  d      dimension.
 * @param[in]  k      number of components.
 * @param[in]  n      number of points.
 * @param[in]  seed   seed.
 * @param[out] alphas k values.
 * @param[out] means  k*d values.
 * @param[out] q      k*d values.
 * @param[out] l      k*d*(d-1)/2 values.
 * @param[out] x      n*d values.
 */
void gmm_make_input(int d, int k, int n, unsigned long seed, double *alphas, double *means,
                    double *q, double *l, double *x);

/**
 * An lstm input distributed as GradBench's (lstm/run.py gen_lstm()): parameters and state
 * uniform in [0, 1); the sequence is c random printable ASCII characters (32..126), each
 * written as its b lowest bits, most significant first (0.0 or 1.0).
 * @param[in]  l            number of layers.
 * @param[in]  c            number of characters.
 * @param[in]  b            bits per character (GradBench: 7 for ASCII text).
 * @param[in]  seed         seed.
 * @param[out] main_params  8*b*l values.
 * @param[out] extra_params 3*b values.
 * @param[out] state        2*b*l values.
 * @param[out] sequence     c*b values.
 */
void lstm_make_input(int l, int c, int b, unsigned long seed, double *main_params,
                     double *extra_params, double *state, double *sequence);

/**
 * One ba block near GradBench's ba1 data (its single camera, point, weight and feature,
 * each perturbed by a few per cent), with the point in front of the camera.
 * @param[in]  seed seed.
 * @param[out] cam  11 values.
 * @param[out] X    3 values.
 * @param[out] w    1 value.
 * @param[out] feat 2 values.
 */
void ba_make_block(unsigned long seed, double *cam, double *X, double *w, double *feat);

/**
 * A ba problem laid out as GradBench's (ba.hpp from_json): n cameras, m points, p
 * observations, observation i of camera i mod n and point i mod m. Each camera, point,
 * weight and feature comes from ba_make_block() with its own seed.
 * @param[in]  n     number of cameras.
 * @param[in]  m     number of points.
 * @param[in]  p     number of observations.
 * @param[in]  seed  seed.
 * @param[out] cams  11*n values.
 * @param[out] X     3*m values.
 * @param[out] w     p values.
 * @param[out] obs   2*p indices (camera, point).
 * @param[out] feats 2*p values.
 */
void ba_make_problem(int n, int m, int p, unsigned long seed, double *cams, double *X, double *w,
                     int *obs, double *feats);

/**
 * A synthetic hand model shaped as GradBench's (a wrist, 5 fingers of 4 bones each, a
 * forearm: 22 bones; the fingers' bones each the child of the previous one): base relative
 * transforms are random rotations (angles up to 0.5) with translations up to 0.05, the
 * inverse base absolutes are the exact inverses of the base absolutes, base positions are
 * homogeneous points in [-0.1, 0.1)^3, and each vertex has 1 to 4 bones with weights
 * summing to 1.
 * @param[in]  nverts                 number of vertices.
 * @param[in]  seed                   seed.
 * @param[out] parents                22 values.
 * @param[out] base_relatives         22 x 16 values.
 * @param[out] inverse_base_absolutes 22 x 16 values.
 * @param[out] base_positions         nverts x 4 values.
 * @param[out] weights                nverts x 22 values.
 */
void ht_make_model(int nverts, unsigned long seed, int *parents, double *base_relatives,
                   double *inverse_base_absolutes, double *base_positions, double *weights);

/**
 * Measurements for a hand model of nverts vertices (and ntri triangles, for the
 * complicated variant): theta normal with standard deviation 0.3, correspondences uniform
 * (vertex indices if triangles is NULL, triangle indices otherwise), triangles random
 * triples of distinct vertices, points uniform in [-0.1, 0.1)^3, us uniform in the
 * triangle (u0, u1 >= 0, u0 + u1 <= 1).
 * @param[in]  nverts          number of vertices.
 * @param[in]  ntri            number of triangles to make (0 with triangles NULL).
 * @param[in]  npts            number of points.
 * @param[in]  seed            seed.
 * @param[out] theta           HT_NTHETA values.
 * @param[out] correspondences npts indices.
 * @param[out] points          npts x 3 values.
 * @param[out] triangles       ntri x 3 indices, or NULL.
 * @param[out] us              npts x 2 values, or NULL.
 */
void ht_make_input(int nverts, int ntri, int npts, unsigned long seed, double *theta,
                   int *correspondences, double *points, int *triangles, double *us);

/**
 * An ode input distributed as GradBench's (ode/run.py): x uniform in [0, 1).
 * @param[in]  n    dimension.
 * @param[in]  seed seed.
 * @param[out] x    n values.
 */
void ode_make_input(int n, unsigned long seed, double *x);

#ifdef __cplusplus
}
#endif

#endif /* CR_BENCH_OBJECTIVES_H */
