/**
 * @file dual.h
 * @brief Forward mode: dual numbers carrying up to CR_DUAL_MAX_CHUNK directions at once
 *        (ForwardDiff's vector mode), and derivative / jvp / Jacobian drivers.
 *
 * A `cr_dual` is a value and its tangents along n directions. Operations evaluate the
 * scalar-table row once for value and partials and push every direction through them
 * (ẏ = Σ_j ∂y/∂x_j ẋ_j), so n directions cost one evaluation of the function and its
 * partials. Other functions go through their frule (one call per direction) or, with an
 * engine's configuration, frule_via_ad.
 *
 * @code
 * // d/dx asin(0.2 + sin(x)) at x = 3
 * cr_dual x = cr_dual_var(3.0, 0);                    // direction 0 is dx
 * cr_dual y = cr_dual_asin(cr_dual_add(cr_dual_const(0.2), cr_dual_sin(x)));
 * printf("%g %g\n", y.v, y.d[0]);
 * @endcode
 *
 * Drivers take a function written against the dual API (cr_dual_fn) and seed the
 * directions: cr_dual_jacobian() needs ceil(n / CR_DUAL_MAX_CHUNK) evaluations.
 *
 * @note Duals are plain values: no allocation, no state, thread-safe.
 */
#ifndef CR_DUAL_H
#define CR_DUAL_H

#include "arena.h"
#include "common.h"
#include "rule.h"
#include "status.h"
#include "value.h"

CR_BEGIN_DECLS

/** Most directions a dual carries. */
#define CR_DUAL_MAX_CHUNK 8

/**
 * A dual number: the value v and its tangents d[0..n) along n directions. Entries of d
 * from n on are zero (every constructor and operation keeps them so).
 */
typedef struct cr_dual {
    double v;                    /**< The value. */
    uint32_t n;                  /**< Directions in use (0 for a constant). */
    double d[CR_DUAL_MAX_CHUNK]; /**< The tangents. */
} cr_dual;

/** A constant: no tangent. */
CR_API cr_dual cr_dual_const(double v);

/**
 * The variable of direction dir: tangent 1 along dir, 0 along the others.
 * @param[in] v   its value.
 * @param[in] dir 0 <= dir < CR_DUAL_MAX_CHUNK (larger gives a constant).
 */
CR_API cr_dual cr_dual_var(double v, size_t dir);

/** A dual with n tangents d (n is clamped to CR_DUAL_MAX_CHUNK; d may be NULL if n is 0). */
CR_API cr_dual cr_dual_make(double v, const double *d, size_t n);

/** a + b */
CR_API cr_dual cr_dual_add(cr_dual a, cr_dual b);
/** a - b */
CR_API cr_dual cr_dual_sub(cr_dual a, cr_dual b);
/** a * b */
CR_API cr_dual cr_dual_mul(cr_dual a, cr_dual b);
/** a / b */
CR_API cr_dual cr_dual_div(cr_dual a, cr_dual b);
/** -a */
CR_API cr_dual cr_dual_neg(cr_dual a);
/** sin(a) */
CR_API cr_dual cr_dual_sin(cr_dual a);
/** cos(a) */
CR_API cr_dual cr_dual_cos(cr_dual a);
/** exp(a) */
CR_API cr_dual cr_dual_exp(cr_dual a);
/** log(a) */
CR_API cr_dual cr_dual_log(cr_dual a);
/** sqrt(a) */
CR_API cr_dual cr_dual_sqrt(cr_dual a);
/** asin(a) */
CR_API cr_dual cr_dual_asin(cr_dual a);

/**
 * f(args...) for any function value, on duals. A scalar-table function is evaluated once
 * (value and partials) for all directions. Otherwise the frule is called once per
 * direction; with no frule and a configuration with CR_CAP_FORWARD (an engine's, see
 * engine.h), frule_via_ad. Under an engine's configuration, a function the engine declared
 * zero-adjoint (cr_engine_zero_adjoint()) has zero tangents whatever its rules, as on the
 * engine's tapes.
 * @param[in]  cfg   configuration (rules, forward capability); NULL: built-in rules.
 * @param[in]  arena where rules allocate; may be NULL for scalar-table functions given their
 *                   row's number of arguments (hypot of two; not of three, which is its rule),
 *                   also under a configuration with a registry unless a rule registered there
 *                   overrides the row.
 * @param[in]  f     a function value.
 * @param[in]  args  nargs duals.
 * @param[in]  nargs number of arguments (at most 64).
 * @param[out] out   nout results (the elements of a tuple result); may be args (they are
 *                   read before out is written).
 * @param[in]  nout  number of results expected.
 * @return CR_OK; CR_ENORULE (no frule, naming the signature); CR_EINVAL (not a function,
 *         result count mismatch, NULL arena where a rule needs one); CR_EUNIMPL (a result
 *         that is not real); the rule's status.
 */
CR_API cr_status cr_dual_call(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_dual *args, size_t nargs, cr_dual *out, size_t nout);

/**
 * A function written against the dual API: y (m duals) from x (n duals).
 * @return CR_OK or an error, which the drivers return unchanged.
 */
typedef cr_status (*cr_dual_fn)(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *env);

/**
 * The derivative of a real function of one real variable.
 * @param[in]  f   the function (one input, one output).
 * @param[in]  env passed to f.
 * @param[in]  x   the point.
 * @param[out] y  f(x) (may be NULL).
 * @param[out] dy f'(x).
 * @return CR_OK; CR_EINVAL (NULL f or dy); f's status.
 */
CR_API cr_status cr_dual_derivative(cr_dual_fn f, void *env, double x, double *y, double *dy);

/**
 * Jacobian-vector product J(x) v in one evaluation.
 * @param[in]  f   the function (n inputs, m outputs).
 * @param[in]  env passed to f.
 * @param[in]  x   the n input values.
 * @param[in]  n   number of inputs.
 * @param[in]  v   the n components of the direction.
 * @param[in]  m   number of outputs.
 * @param[in]  scratch arena for n + m duals (released before return); may be NULL when
 *                     n + m <= 32.
 * @param[out] y  the m values (may be NULL).
 * @param[out] jv the m results.
 * @return CR_OK; CR_EINVAL; CR_EDOMAIN (v not finite); allocation statuses; f's status. On
 *         failure y and jv are untouched.
 */
CR_API cr_status cr_dual_jvp(cr_dual_fn f, void *env, const double *x, size_t n, const double *v,
                             size_t m, cr_arena *scratch, double *y, double *jv);

/**
 * The m x n Jacobian (row-major) by chunks of CR_DUAL_MAX_CHUNK directions: one evaluation
 * of f per chunk. When f fails in a chunk, its status is returned and the columns of the
 * chunks before it have been written (y too, unless the first chunk failed); the rest of y
 * and jac is untouched.
 * @param[in]  f   the function (n inputs, m outputs).
 * @param[in]  env passed to f.
 * @param[in]  x   the n input values.
 * @param[in]  n   number of inputs.
 * @param[in]  m   number of outputs.
 * @param[in]  scratch arena for n + m duals (released before return); may be NULL when
 *                     n + m <= 32.
 * @param[out] y   the m values (may be NULL).
 * @param[out] jac the m x n Jacobian, row-major.
 * @return as cr_dual_jvp(); CR_EOVERFLOW when m x n (or n + m duals) overflows.
 */
CR_API cr_status cr_dual_jacobian(cr_dual_fn f, void *env, const double *x, size_t n, size_t m,
                                  cr_arena *scratch, double *y, double *jac);

CR_END_DECLS

#endif /* CR_DUAL_H */
