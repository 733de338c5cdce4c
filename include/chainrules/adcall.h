/**
 * @file adcall.h
 * @brief Rules called from code that `chainrules-ad` generates: a function of the user's C
 *        source declared a primitive (`#pragma chainrules primitive`) is differentiated by
 *        its rule, not transformed.
 *
 * The generated code describes each argument of the call (a double or a dense row-major
 * array of doubles, with its shadow) and calls cr_adcall_reverse() in the adjoint sweep
 * or cr_adcall_forward() in the tangent code. These run the rule through the rule API:
 * a library function value (`cr_fn_NAME`) by dispatch on the built-in registry, or a
 * user's `cr_rule_def` directly. docs/source-transformation.md (Primitives) is the
 * reference.
 *
 * @code
 * // the adjoint of y = lse(x, n), lse bound to cr_fn_logsumexp:
 * cr_adcall_arg a = {x, x_b, 1, {n, 0}, 0}, out = {NULL, &y_b, 0, {0, 0}, 0};
 * if (cr_adcall_reverse(&cr_fn_logsumexp, NULL, &a, 1, &out) != CR_OK) ...
 * @endcode
 *
 * Each call creates its own context and arena and frees them before it returns; the
 * functions are reentrant and thread-safe. They never print and never abort; a failure
 * leaves its message in cr_adcall_message() (per thread).
 */
#ifndef CR_ADCALL_H
#define CR_ADCALL_H

#include <stddef.h>

#include "arena.h"
#include "common.h"
#include "rule.h"
#include "status.h"
#include "tangent.h"
#include "value.h"

CR_BEGIN_DECLS

/** Most dimensions of an argument of a primitive. */
#define CR_ADCALL_MAX_DIMS 2

/**
 * An argument (or the output) of a primitive: a double or a dense row-major array of
 * doubles, with its shadow.
 */
typedef struct cr_adcall_arg {
    double *x;   /**< The value: the scalar's address, or the array's first element. For the
                      output of cr_adcall_reverse() it may be NULL (the rule recomputes it). */
    double *dx;  /**< The shadow, or NULL when the argument is inactive. Reverse: the
                      cotangent is added into it (the output's is read, then zeroed). Forward:
                      the tangent is read from it (the output's is written). */
    size_t ndim; /**< 0 (a scalar), 1 (a vector) or 2 (a matrix). */
    size_t shape[CR_ADCALL_MAX_DIMS]; /**< The extents of the first ndim dimensions. */
    ptrdiff_t dinc; /**< Elements between consecutive elements of dx (0 means 1): the
                         vector forward mode keeps one direction's tangents strided. */
} cr_adcall_arg;

/**
 * The adjoint of a primitive call: run the rule's rrule on the arguments' values, call
 * its pullback with the output's cotangent `*out->dx`, add each argument's cotangent
 * into its shadow (`+=`), and set the output's cotangent to zero (consumed).
 * @param[in]     fn    a library function value (dispatch on the built-in registry), or
 *                      NULL when `def` is given.
 * @param[in]     def   a rule definition whose rrule is called directly, or NULL.
 * @param[in]     args  the nargs arguments of the rule, in order.
 * @param[in]     nargs number of arguments (at most CR_SIG_MAX_ARGS).
 * @param[in,out] out   the output: a scalar (ndim 0) or an array of the shape the rule
 *                      returns; its dx holds the cotangent.
 * @return CR_OK; CR_EINVAL (bad descriptors: NULL data, ndim > 2, both or neither of fn
 *         and def); CR_EOVERFLOW (a shape's element count); CR_ENORULE (no rrule applies);
 *         CR_ESHAPE (the rule's output or a cotangent does not have the declared shape);
 *         CR_ETANGENT (a complex or structural cotangent); the rule's own status. On
 *         failure no shadow has been changed.
 */
CR_API cr_status cr_adcall_reverse(const cr_value *fn, const cr_rule_def *def,
                                   const cr_adcall_arg *args, size_t nargs,
                                   const cr_adcall_arg *out);

/**
 * The tangent of a primitive call: run the rule's frule with the arguments' tangents
 * (zero for those without a shadow) and write the output's value into `*out->x` (a
 * scalar) or the array at out->x, and its tangent into out->dx (when not NULL).
 * @return as cr_adcall_reverse(), with CR_ENORULE when no frule applies. On failure the
 *         output's value and tangent are set to NaN.
 */
CR_API cr_status cr_adcall_forward(const cr_value *fn, const cr_rule_def *def,
                                   const cr_adcall_arg *args, size_t nargs,
                                   const cr_adcall_arg *out);

/* ---- For the rules that `chainrules-ad --emit-rules` writes over arrays ------------------ */

/**
 * The elements of an f64 array value as one contiguous row-major block: its own memory when
 * it is dense and contiguous, else a copy in `arena`.
 * @param[in]  arena where a copy is made.
 * @param[in]  v     the value (an array of dtype f64).
 * @param[in]  count the element count the caller expects.
 * @param[out] out   the block.
 * @return CR_OK; CR_EINVAL (not an f64 array, NULL); CR_ESHAPE (another element count);
 *         CR_ENOMEM.
 */
CR_API cr_status cr_adcall_dense(cr_arena *arena, const cr_value *v, size_t count,
                                 const double **out);

/**
 * The same for a tangent: a zero tangent (ZeroTangent, NoTangent) gives `count` zeros, a
 * thunk is evaluated, a real array tangent of `count` elements is made contiguous.
 * @return as cr_adcall_dense(); CR_ETANGENT for a complex, scalar or structural tangent.
 */
CR_API cr_status cr_adcall_dense_tangent(cr_arena *arena, const cr_tangent *t, size_t count,
                                         const double **out);

/**
 * A real scalar tangent as a double: 0 for the zeros, the value of an f64 or f32 tangent
 * or of a one-element real array.
 * @return CR_OK; CR_ETANGENT for any other tangent (*out is then 0).
 */
CR_API cr_status cr_adcall_seed(const cr_tangent *t, double *out);

/**
 * The message of the last failure of cr_adcall_reverse() or cr_adcall_forward() in this
 * thread ("" when none): which rule failed and why.
 */
CR_API const char *cr_adcall_message(void);

CR_END_DECLS

#endif /* CR_ADCALL_H */
