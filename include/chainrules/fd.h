/**
 * @file fd.h
 * @brief Finite differences: p-point estimates of q-th derivatives with an adaptive step
 *        and an error estimate, Richardson extrapolation, and jvp / jacobian / j'vp of
 *        maps R^n -> R^m (the C counterpart of FiniteDifferences.jl).
 *
 * A method (`cr_fdm`) is a grid of p integer (or, for custom grids, real) multiples of a
 * step h and the coefficients that combine f(x + g_i h) into an estimate of the q-th
 * derivative:
 *
 *     f^(q)(x) ~= sum_i c_i f(x + g_i h) / h^q,
 *
 * exact for polynomials of degree < p. The coefficients come from the Vandermonde system
 * sum_i c_i g_i^k = q! [k == q], k = 0..p-1, solved with Fornberg's recurrence in
 * double-double arithmetic, so any grid of distinct points works and every coefficient is
 * correct to the last bit of a double.
 *
 * The step is chosen as FiniteDifferences.jl's `central_fdm(p, q; adapt)` chooses it: the
 * total error is bounded by a round-off term and a truncation term,
 *
 *     err(h) = eps(|f|) * factor * sum_i |c_i| / h^q  +  M * sum_i |c_i g_i^p| / p! * h^(p-q),
 *
 * where M bounds |f^(p)| near x, and h minimises err(h). With `adapt` > 0 (default 1), M
 * and |f| are estimated by a (p+2)-point method for the p-th derivative, itself run with
 * `adapt - 1` levels of adaptation; with no adaptation M is the `condition` option and
 * eps(|f|) is the machine epsilon. The step never exceeds `max_range / max|g_i|`, so a
 * function is never evaluated farther than `max_range` from x (use it, or a forward or
 * backward method, for functions with restricted domains), nor 1000 times the unadapted
 * step. It is then rounded to the nearest power of two (within those limits), which makes
 * every x + g_i h exact for integer grids: otherwise rounding the arguments adds an error
 * |f'| ulp(x) / h that dominates for large |x|. err(h) at the final step is returned as
 * the error estimate; docs/finite-differences.md tabulates how it compares with the
 * actual error.
 *
 * Callbacks return a `cr_status`; any status other than `CR_OK` stops the computation and
 * is returned unchanged. A non-finite function value gives `CR_EDOMAIN`.
 *
 * Nothing here allocates: methods are plain values; the vector functions take their
 * scratch memory from a caller's arena and release it before returning. A call uses up to
 * about 24 KiB of stack (the chain of bound methods and the recurrence's table).
 *
 * @code
 * #include <math.h>
 * #include <stdio.h>
 * #include <chainrules/fd.h>
 *
 * static cr_status my_sin(double x, double *y, void *env)
 * {
 *     (void)env;
 *     *y = sin(x);
 *     return CR_OK;
 * }
 *
 * int main(void)
 * {
 *     cr_fdm m;
 *     double d, err;
 *     if (cr_fdm_central(5, 1, &m) != CR_OK)             // central_fdm(5, 1)
 *         return 1;
 *     if (cr_fd_derivative(&m, NULL, my_sin, NULL, 1.0, &d, &err) != CR_OK)
 *         return 1;
 *     printf("%.17g +- %.2g (error %.2g)\n", d, err, d - cos(1.0));
 *     return 0;
 * }
 * @endcode
 *
 * @note Every function here is reentrant and keeps no global state. A `cr_fdm` is
 *       immutable once built and may be shared between threads; the scratch arena of the
 *       vector functions is thread-confined, like every arena.
 */
#ifndef CR_FD_H
#define CR_FD_H

#include "arena.h"
#include "common.h"
#include "status.h"

CR_BEGIN_DECLS

/** Largest number of grid points of a method, including the higher-order methods that
 *  adaptation builds (a p-point method with `adapt` levels needs p + 2*adapt points). */
#define CR_FD_MAX_POINTS 25

/** Default `condition` (assumed bound on |f^(p)| when no adaptation estimates it). */
#define CR_FD_DEFAULT_CONDITION 10.0

/** Default `factor` (multiplier of the round-off error of one function evaluation). */
#define CR_FD_DEFAULT_FACTOR 1.0

/** Default number of adaptation levels. */
#define CR_FD_DEFAULT_ADAPT 1

/** Value of cr_fd_opts::adapt that turns adaptation off (FiniteDifferences' `adapt=0`). */
#define CR_FD_ADAPT_NONE (-1)

/** Largest tableau of cr_fd_richardson(): at most this many step sizes are tried. */
#define CR_FD_RICHARDSON_MAX 32

/** Flag for cr_fdm_make(): geometrically spaced grid, g -> sign(g) 3^(|g|-1). */
#define CR_FDM_GEOM 1u

/** Shape of a method's grid. Append only; values never change. */
typedef enum cr_fd_grid {
    CR_FD_GRID_CENTRAL = 0,  /**< Odd p: -(p-1)/2..(p-1)/2; even p: -p/2..-1, 1..p/2. */
    CR_FD_GRID_FORWARD = 1,  /**< 0, 1, ..., p-1: evaluates f only at x and above. */
    CR_FD_GRID_BACKWARD = 2, /**< 1-p, ..., -1, 0: evaluates f only at x and below. */
    CR_FD_GRID_CUSTOM = 3    /**< Any distinct real points (cr_fdm_from_grid()). */
} cr_fd_grid;

/**
 * A finite-difference method: a grid and its coefficients for the q-th derivative.
 *
 * A plain value (about 1 KiB): build it with cr_fdm_central(), cr_fdm_forward(),
 * cr_fdm_backward(), cr_fdm_make() or cr_fdm_from_grid(), copy it freely, never free it.
 * The fields are readable; do not modify them.
 */
typedef struct cr_fdm {
    int p;                                  /**< Number of grid points. */
    int q;                                  /**< Order of the derivative, 0 <= q < p. */
    cr_fd_grid kind;                        /**< Grid shape. */
    unsigned flags;                         /**< CR_FDM_GEOM or 0. */
    double grid[CR_FD_MAX_POINTS];          /**< Multiples of the step, grid[0..p). */
    double coefs[CR_FD_MAX_POINTS];         /**< Coefficients c_i, coefs[0..p). */
    double coefs_nbhd[3][CR_FD_MAX_POINTS]; /**< Coefficients for the q-th derivative at
                                                 three points near x (for bound estimation). */
    double bound_mult;                      /**< sum_i |c_i g_i^p| / p! (truncation error). */
    double error_mult;                      /**< sum_i |c_i| (round-off error). */
} cr_fdm;

/**
 * Options of the derivative functions. Zero-initialised means defaults.
 */
typedef struct cr_fd_opts {
    uint32_t struct_size; /**< sizeof(cr_fd_opts), or 0 for the current size. */
    int adapt;            /**< Levels of adaptation: 0 means CR_FD_DEFAULT_ADAPT (1);
                               CR_FD_ADAPT_NONE means none; n > 0 means n levels. */
    double condition;     /**< Bound on |f^(p)| assumed without adaptation, and used to
                               cap the step; 0 means CR_FD_DEFAULT_CONDITION. */
    double factor;        /**< Multiplier of the round-off error of f (raise it for
                               functions computed less accurately than to 1 ulp);
                               0 means CR_FD_DEFAULT_FACTOR. */
    double max_range;     /**< Largest distance from x at which f is evaluated (in units of
                               the parameter t for the vector functions); 0 means no limit. */
    double step;          /**< Fixed step: if > 0 it is used instead of the adaptive step
                               (step * max|g_i| must not exceed max_range); 0 means adaptive. */
} cr_fd_opts;

/**
 * Options of cr_fd_richardson(). Zero-initialised means defaults.
 */
typedef struct cr_fd_richardson_opts {
    uint32_t struct_size; /**< sizeof(cr_fd_richardson_opts), or 0 for the current size. */
    double initial_step;  /**< First step; 0 means 10 (FiniteDifferences' extrapolate_fdm),
                               reduced to max_range / max|g_i| if that is smaller. */
    double contract;      /**< Step contraction per iteration, in (0, 1); 0 means 0.125. */
    double power;         /**< The estimate's error expands in powers of h^power; 0 means 2
                               for a symmetric grid (even error expansion) and 1 otherwise. */
    double atol;          /**< Stop when the error estimate is <= max(rtol*|d|, atol); 0 default. */
    double rtol;          /**< 0 means sqrt(DBL_EPSILON) when atol is 0, otherwise 0. */
    double breaktol;      /**< Stop when the error grows by more than this factor; 0 means
                               never (infinity, as extrapolate_fdm). */
    unsigned max_evals;   /**< Most step sizes tried (each costs up to p evaluations of f);
                               0 means 20; at most CR_FD_RICHARDSON_MAX. */
    double max_range;     /**< Largest distance from x at which f is evaluated; 0: no limit. */
} cr_fd_richardson_opts;

/**
 * A real function of one real variable.
 * @param[in]  x   the argument.
 * @param[out] y   f(x).
 * @param[in]  env the caller's environment, passed through unchanged.
 * @return CR_OK, or any error status (which the caller of the FD function receives).
 */
typedef cr_status (*cr_fd_fn)(double x, double *y, void *env);

/**
 * A map R^n -> R^m.
 * @param[in]  x   n inputs (borrowed for the duration of the call; do not keep it).
 * @param[in]  n   number of inputs.
 * @param[out] y   m outputs.
 * @param[in]  m   number of outputs.
 * @param[in]  env the caller's environment, passed through unchanged.
 * @return CR_OK, or any error status (which the caller of the FD function receives).
 */
typedef cr_status (*cr_fd_vec_fn)(const double *x, size_t n, double *y, size_t m, void *env);

/**
 * Build a method with a standard grid of p points for the q-th derivative.
 * @param[in]  kind  CR_FD_GRID_CENTRAL, CR_FD_GRID_FORWARD or CR_FD_GRID_BACKWARD.
 * @param[in]  p     number of points, 1 <= p <= CR_FD_MAX_POINTS.
 * @param[in]  q     order of the derivative, 0 <= q < p.
 * @param[in]  flags 0, or CR_FDM_GEOM for geometrically spaced points.
 * @param[out] out   the method (caller's storage); untouched on error.
 * @return CR_OK; CR_EINVAL if out is NULL, kind is not one of the three, p or q is out of
 *         range (in particular q >= p), or flags has unknown bits.
 * @note Thread-safe.
 */
CR_API cr_status cr_fdm_make(cr_fd_grid kind, int p, int q, unsigned flags, cr_fdm *out);

/**
 * Central method, FiniteDifferences' `central_fdm(p, q)`: cr_fdm_make(CR_FD_GRID_CENTRAL, p, q, 0,
 * out).
 * @param[in]  p   number of points, 1 <= p <= CR_FD_MAX_POINTS.
 * @param[in]  q   order of the derivative, 0 <= q < p.
 * @param[out] out the method (caller's storage); untouched on error.
 * @return CR_OK; CR_EINVAL (out NULL, p or q out of range).
 * @note Thread-safe.
 */
CR_API cr_status cr_fdm_central(int p, int q, cr_fdm *out);

/**
 * Forward method (grid 0..p-1), FiniteDifferences' `forward_fdm(p, q)`.
 * @param[in]  p   number of points, 1 <= p <= CR_FD_MAX_POINTS.
 * @param[in]  q   order of the derivative, 0 <= q < p.
 * @param[out] out the method (caller's storage); untouched on error.
 * @return CR_OK; CR_EINVAL (out NULL, p or q out of range).
 * @note Thread-safe.
 */
CR_API cr_status cr_fdm_forward(int p, int q, cr_fdm *out);

/**
 * Backward method (grid 1-p..0), FiniteDifferences' `backward_fdm(p, q)`.
 * @param[in]  p   number of points, 1 <= p <= CR_FD_MAX_POINTS.
 * @param[in]  q   order of the derivative, 0 <= q < p.
 * @param[out] out the method (caller's storage); untouched on error.
 * @return CR_OK; CR_EINVAL (out NULL, p or q out of range).
 * @note Thread-safe.
 */
CR_API cr_status cr_fdm_backward(int p, int q, cr_fdm *out);

/**
 * Build a method on any grid of distinct points (FiniteDifferences'
 * `FiniteDifferenceMethod(grid, q)`).
 *
 * When adaptation is on, the p-th derivative is bounded with a (p+2)-point central,
 * forward or backward method, chosen from the signs of the grid (all >= 0: forward;
 * all <= 0: backward; otherwise central), so a one-sided grid stays one-sided.
 * @param[in]  grid p distinct finite multiples of the step (copied; not kept).
 * @param[in]  p    number of points, 1 <= p <= CR_FD_MAX_POINTS.
 * @param[in]  q    order of the derivative, 0 <= q < p.
 * @param[out] out  the method (caller's storage); untouched on error.
 * @return CR_OK; CR_EINVAL (grid or out NULL, p or q out of range, a point repeated or
 *         not finite).
 * @note Thread-safe.
 */
CR_API cr_status cr_fdm_from_grid(const double *grid, int p, int q, cr_fdm *out);

/**
 * Estimate the q-th derivative of f at x with an adaptive step, and its error.
 *
 * With q = 0 the result is f(x) itself and the error 0 (as FiniteDifferences does).
 * @param[in]  method the method.
 * @param[in]  opts   options; NULL for defaults.
 * @param[in]  f      the function; called only at x + t with |t| <= max_range.
 * @param[in]  env    passed to f.
 * @param[in]  x      the point (finite).
 * @param[out] out    the estimate; untouched on error.
 * @param[out] err    the estimated absolute error (see the file overview); may be NULL.
 * @return CR_OK; CR_EINVAL (NULL method/f/out, invalid method or options, non-finite x,
 *         p + 2*adapt > CR_FD_MAX_POINTS, fixed step beyond max_range); CR_EDOMAIN if f
 *         returned a non-finite value; any status f returned.
 * @note Reentrant; thread-safe if f is.
 */
CR_API cr_status cr_fd_derivative(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_fn f,
                                  void *env, double x, double *out, double *err);

/**
 * Choose the step that cr_fd_derivative() would use, and estimate the error it would make
 * (FiniteDifferences' `estimate_step`). Costs the evaluations of the adaptation only.
 * @param[in]  method the method (q >= 1).
 * @param[in]  opts   options; NULL for defaults (a fixed `step` is returned as is).
 * @param[in]  f      the function.
 * @param[in]  env    passed to f.
 * @param[in]  x      the point (finite).
 * @param[out] step   the step h; untouched on error.
 * @param[out] err    the estimated absolute error at that step; may be NULL.
 * @return CR_OK; CR_EINVAL (as cr_fd_derivative(), or q == 0); CR_EDOMAIN; any status of f.
 * @note Reentrant; thread-safe if f is.
 */
CR_API cr_status cr_fd_estimate_step(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_fn f,
                                     void *env, double x, double *step, double *err);

/**
 * Apply a method with a given step: sum_i c_i f(x + g_i step) / step^q, no adaptation.
 * Points whose coefficient is exactly zero are not evaluated.
 * @param[in]  method the method.
 * @param[in]  f      the function.
 * @param[in]  env    passed to f.
 * @param[in]  x      the point (finite).
 * @param[in]  step   the step, finite and > 0.
 * @param[out] out    the estimate; untouched on error.
 * @return CR_OK; CR_EINVAL (NULL method/f/out, invalid method, bad x or step);
 *         CR_EDOMAIN; any status of f.
 * @note Reentrant; thread-safe if f is.
 */
CR_API cr_status cr_fd_apply(const cr_fdm *method, cr_fd_fn f, void *env, double x, double step,
                             double *out);

/**
 * Richardson extrapolation of the method to step 0 (FiniteDifferences' `extrapolate_fdm`,
 * the Neville-tableau algorithm of Richardson.jl): the method is applied with steps
 * h, h*contract, h*contract^2, ... and the estimates are extrapolated polynomially in
 * h^power; the entry of the tableau that changed least is returned with that change as
 * the error estimate.
 * @param[in]  method the method (q >= 1).
 * @param[in]  opts   options; NULL for defaults.
 * @param[in]  f      the function; called only within max_range of x.
 * @param[in]  env    passed to f.
 * @param[in]  x      the point (finite).
 * @param[out] out    the extrapolated derivative; untouched on error.
 * @param[out] err    its estimated absolute error (the smallest change between successive
 *                    tableau entries, at least DBL_EPSILON * |out|); may be NULL.
 * @return CR_OK; CR_EINVAL (NULL method/f/out, invalid method or options, q == 0,
 *         non-finite x); CR_EDOMAIN (f returned a non-finite value, e.g. because the
 *         initial step left its domain: set max_range or initial_step); any status of f.
 * @note Reentrant; thread-safe if f is.
 */
CR_API cr_status cr_fd_richardson(const cr_fdm *method, const cr_fd_richardson_opts *opts,
                                  cr_fd_fn f, void *env, double x, double *out, double *err);

/**
 * Jacobian-vector product: the q-th derivative of t -> f(x + t v) at t = 0 (for q = 1,
 * J(x) v), with one adaptive step for all m outputs (bounds are maxima over outputs).
 * @param[in]  method  the method.
 * @param[in]  opts    options; NULL for defaults. max_range bounds |t|.
 * @param[in]  f       the map R^n -> R^m.
 * @param[in]  env     passed to f.
 * @param[in]  x       n finite inputs (borrowed).
 * @param[in]  n       number of inputs.
 * @param[in]  v       n finite direction components (borrowed).
 * @param[in]  m       number of outputs.
 * @param[in]  scratch arena for n + 5m doubles of scratch, released before return.
 * @param[out] jv      m results; untouched on error.
 * @param[out] err     the estimated absolute error (max over outputs); may be NULL.
 * @return CR_OK; CR_EINVAL (NULL method/f/scratch, NULL x/v with n > 0, NULL jv with
 *         m > 0, invalid method or options, non-finite x or v); CR_EOVERFLOW; the
 *         arena's CR_ENOMEM/CR_EARENA; CR_EDOMAIN; any status of f.
 * @note Reentrant; thread-safe if f is and scratch is confined to the calling thread.
 */
CR_API cr_status cr_fd_jvp(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_vec_fn f, void *env,
                           const double *x, size_t n, const double *v, size_t m, cr_arena *scratch,
                           double *jv, double *err);

/**
 * Jacobian (method->q = 1; higher q gives the matrix of q-th directional derivatives
 * along the axes): column j is the derivative of t -> f(x + t e_j), each column with its
 * own adaptive step.
 * @param[in]  method  the method.
 * @param[in]  opts    options; NULL for defaults. max_range bounds |t|.
 * @param[in]  f       the map R^n -> R^m.
 * @param[in]  env     passed to f.
 * @param[in]  x       n finite inputs (borrowed).
 * @param[in]  n       number of inputs.
 * @param[in]  m       number of outputs.
 * @param[in]  scratch arena for (m+1)n + 5m doubles of scratch, released before return.
 * @param[out] jac     m x n matrix, row-major (jac[i*n + j] = d y_i / d x_j); untouched
 *                     on error.
 * @param[out] err     the largest estimated absolute error of any entry; may be NULL.
 * @return CR_OK; CR_EINVAL (NULL method/f/scratch, NULL x with n > 0, NULL jac with
 *         m*n > 0, invalid method or options, non-finite x); CR_EOVERFLOW; the arena's
 *         CR_ENOMEM/CR_EARENA; CR_EDOMAIN; any status of f.
 * @note Reentrant; thread-safe if f is and scratch is confined to the calling thread.
 */
CR_API cr_status cr_fd_jacobian(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_vec_fn f,
                                void *env, const double *x, size_t n, size_t m, cr_arena *scratch,
                                double *jac, double *err);

/**
 * Transposed-Jacobian-vector product J(x)^T ybar (FiniteDifferences' `j′vp`), computed
 * column by column from cr_fd_jacobian()'s columns without storing the matrix.
 * @param[in]  method  the method.
 * @param[in]  opts    options; NULL for defaults. max_range bounds |t|.
 * @param[in]  f       the map R^n -> R^m.
 * @param[in]  env     passed to f.
 * @param[in]  x       n finite inputs (borrowed).
 * @param[in]  n       number of inputs.
 * @param[in]  ybar    m finite cotangent components (borrowed).
 * @param[in]  m       number of outputs.
 * @param[in]  scratch arena for 2n + 5m doubles of scratch, released before return.
 * @param[out] jtv     n results; untouched on error.
 * @param[out] err     an estimated absolute error of each result (the largest column
 *                     error times sum_i |ybar_i|); may be NULL.
 * @return CR_OK; CR_EINVAL (NULL method/f/scratch, NULL x/jtv with n > 0, NULL ybar with
 *         m > 0, invalid method or options, non-finite x or ybar); CR_EOVERFLOW; the
 *         arena's CR_ENOMEM/CR_EARENA; CR_EDOMAIN; any status of f.
 * @note Reentrant; thread-safe if f is and scratch is confined to the calling thread.
 */
CR_API cr_status cr_fd_jtvp(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_vec_fn f, void *env,
                            const double *x, size_t n, const double *ybar, size_t m,
                            cr_arena *scratch, double *jtv, double *err);

CR_END_DECLS

#endif /* CR_FD_H */
