/**
 * @file tape_prepared.h
 * @brief Prepared gradients: a function of scalars recorded once, then its value, gradient
 *        and Hessian-vector products at new inputs replayed without recording.
 *
 * The prepared gradients of functions of arrays (cr_prepare_gradient_arrays(), ...) are
 * in tape_array.h.
 *
 * Part of the tape API: tape.h includes it (after the tape, its variables and
 * sweeps), and including it alone includes tape.h. See docs/engine.md.
 */
#if !defined(CR_TAPE_H) && !defined(CR_DOXYGEN)
/* Included first: tape.h declares the tape, then includes this header. */
#include "tape.h"
#elif !defined(CR_TAPE_PREPARED_H)
#define CR_TAPE_PREPARED_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "tape.h"

CR_BEGIN_DECLS

/* ---- Prepared gradients ------------------------------------------------------------------ */

/**
 * Opaque prepared gradient (cr_prepare_gradient()).
 * @note A prepared gradient is thread-confined, like the tape it holds and its context:
 *       every call, cr_prepared_value_and_gradient() included, writes its workspace (the
 *       values, adjoints and partials of the program, the replay tape's arena) and reports
 *       errors on its context, so two threads must not call one at the same time. It may
 *       move to another thread with its context (with the synchronisation that hands any
 *       object over). Threads that need the same gradient each prepare their own, from one
 *       engine, function and env that they only read.
 */
typedef struct cr_prepared cr_prepared;

/**
 * Prepare a gradient (Mooncake's prepare_gradient_cache + value_and_gradient!!; ADOL-C's
 * record once, replay many): record f (one output) at x on a replay tape, which keeps
 * with each operation how to evaluate it again, and allocate the workspace. Then
 * cr_prepared_value_and_gradient() computes value and gradient at new inputs of the same
 * size by replaying the records, without calling f, recording or allocating.
 *
 * The replay is exact when f's operations do not depend on the inputs except through the
 * tape: branch with cr_tape_cmp() (the outcome is checked at each replay), never on `x.v`;
 * a constant made from a variable's value (cr_const(x.v)) keeps its recorded value. f may
 * use scalar-table functions, overlays, array functions (cr_tape_acall()) and scalar rules
 * kept as pullbacks (cr_tape_call() of a function that is not a row): both are replayed by
 * calling their rrules again, as cr_prepare_gradient_arrays() describes, with the rules
 * looked up when preparing. Zero-adjoint and non-differentiable functions of variables are
 * evaluated again through their primal (or row), or through their overlay run on constants
 * when they have neither.
 * @param[in]  ctx allocations and errors; must outlive the prepared gradient.
 * @param[in]  eng rules and user functions; NULL: built-in rules.
 * @param[in]  f   the function (its env must stay valid only during this call).
 * @param[in]  env passed to f.
 * @param[in]  x   n inputs where f is recorded.
 * @param[in]  n   number of inputs.
 * @param[out] out caller owns; release with cr_prepared_free().
 * @return CR_OK; CR_EINVAL; CR_EUNIMPL (a rule that cannot be replayed); the recording's
 *         status; CR_ENOMEM.
 */
CR_API cr_status cr_prepare_gradient(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                                     const double *x, size_t n, cr_prepared **out);

/**
 * Value and gradient at new inputs, by replaying the prepared recording. Allocates nothing
 * (after the first call, when f calls array functions).
 * @param[in]  p    the prepared gradient.
 * @param[in]  x    n inputs.
 * @param[in]  n    must be the number the gradient was prepared for.
 * @param[out] y    the value (may be NULL).
 * @param[out] grad n partial derivatives.
 * @return CR_OK; CR_ESHAPE (another number of inputs; a rule's result of another kind or
 *         shape); CR_EDOMAIN (a comparison recorded with cr_tape_cmp() comes out otherwise
 *         at x, or an integer result changed: the recording does not describe f there;
 *         nothing is written, prepare again at x); a rule's or pullback's status at x;
 *         CR_EINVAL (NULL, a gradient prepared with cr_prepare_gradient_arrays()). A failed
 *         replay leaves the prepared gradient usable.
 */
CR_API cr_status cr_prepared_value_and_gradient(cr_prepared *p, const double *x, size_t n,
                                                double *y, double *grad);

/**
 * Prepare Hessian-vector products (and gradients) of f: record f at x on a replay tape and
 * build its program, as cr_prepare_gradient() does, and allocate the workspace of the
 * second-order replay. cr_prepared_hvp() then gives value, gradient and H v at new inputs
 * and directions by forward-over-reverse on the program (cr_tape_hvp()'s method), without
 * calling f, recording or allocating; cr_prepared_value_and_gradient() works too.
 *
 * The second derivatives come from the rows, as on a CR_TAPE_SECOND_ORDER tape. As for
 * cr_prepare_gradient(): branch with cr_tape_cmp(), whose outcome each call checks.
 * Zero-adjoint and non-differentiable functions of variables are evaluated again with no
 * derivative. Array functions (cr_tape_acall()) and fused kernels are replayed as the
 * first-order replay does (their rules or loops called again), then go through their
 * forward and second-order steps as on a CR_TAPE_SECOND_ORDER tape; those without a
 * second-order form are refused when f records them (CR_EUNIMPL, as a second-order tape
 * refuses them). Scalar rules kept as pullbacks (cr_tape_call() of a function with a rule
 * that is not a row, a user rule overriding a row, rrule_via_ad, hypot of three arguments,
 * evalpoly, tuple rules) are called again at each replay as a CR_TAPE_SECOND_ORDER tape
 * records them: the partials from the pullback, the second derivatives by central
 * differences of the partials from the rule at x ± h along each variable argument (1 + 2k
 * rule calls for k variable arguments).
 * @param[in]  ctx allocations and errors; must outlive the prepared H v.
 * @param[in]  eng rules and user functions; NULL: built-in rules.
 * @param[in]  f   the function (its env must stay valid only during this call).
 * @param[in]  env passed to f.
 * @param[in]  x   n inputs where f is recorded.
 * @param[in]  n   number of inputs.
 * @param[out] out caller owns; release with cr_prepared_free(). NULL on failure.
 * @return CR_OK; CR_EINVAL; CR_EUNIMPL (an array function or kernel without a
 *         second-order form, naming it; a rule that cannot be replayed); the recording's
 *         status; CR_ENOMEM.
 */
CR_API cr_status cr_prepare_hvp(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                                const double *x, size_t n, cr_prepared **out);

/**
 * Value, gradient and Hessian-vector product H v at new inputs, by replaying the program of
 * cr_prepare_hvp(): one forward pass carries the values and the tangents along v, one
 * reverse pass the adjoints and their tangents. Allocates nothing (after the first call,
 * when f evaluates zero-adjoint functions again or calls array functions).
 * @param[in]  p    prepared with cr_prepare_hvp().
 * @param[in]  x    n inputs.
 * @param[in]  n    must be the number p was prepared for.
 * @param[in]  v    n direction components (finite).
 * @param[out] hv   n components of H v.
 * @param[out] y    the value (may be NULL).
 * @param[out] grad n partial derivatives (may be NULL).
 * @return CR_OK; CR_EINVAL (NULL p, x, v or hv; p prepared with cr_prepare_gradient(),
 *         cr_prepare_gradient_arrays() or cr_prepare_hvp_arrays()); CR_ESHAPE (another number
 *         of inputs; an array function's result of another shape); CR_EDOMAIN (a non-finite
 *         v; a comparison recorded with cr_tape_cmp() comes out otherwise at x); a primal's,
 *         rule's or frule's status at x (a rule kept as a pullback: also its status when it
 *         fails on both sides of x along an argument); CR_ENOMEM. Nothing is written on
 *         failure, and p stays usable.
 */
CR_API cr_status cr_prepared_hvp(cr_prepared *p, const double *x, size_t n, const double *v,
                                 double *hv, double *y, double *grad);

/** Release a prepared gradient. @param[in] p may be NULL. */
CR_API void cr_prepared_free(cr_prepared *p);

CR_END_DECLS

#endif /* CR_TAPE_PREPARED_H */
