/**
 * @file deprecated.h
 * @brief Former names of public functions, kept so that code written against them still
 *        compiles and links; each is deprecated and names its replacement.
 *
 * The array-variable operations of the tape were `cr_a<name>` (cr_asum(), cr_adot(), ...),
 * which reads like the arc functions (cr_asin(), cr_acos(), ...); they are now
 * `cr_av_<name>` ("array variable"). The old names below are exported functions that call
 * the new ones, declared deprecated: a call compiles and links (old binaries too), and the
 * compiler's deprecation warning names the replacement. They are removed in release 0.3.0;
 * docs/migration.md lists every renamed name.
 *
 * Included by tape.h.
 */
#ifndef CR_DEPRECATED_H
#define CR_DEPRECATED_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "tape.h"

CR_BEGIN_DECLS

struct cr_kernel;
struct cr_kin;

/** @deprecated Use cr_av_const(), removed in 0.3.0. @param[in] a borrowed.
 *  @return as cr_av_const(). */
CR_DEPRECATED("use cr_av_const") CR_API cr_avar cr_aconst(const cr_array *a);

/** @deprecated Use cr_av_broadcast1(), removed in 0.3.0. @param[in] t the tape.
 *  @param[in] f the function. @param[in] x its argument. @return as cr_av_broadcast1(). */
CR_DEPRECATED("use cr_av_broadcast1")
CR_API cr_avar cr_abroadcast1(cr_tape *t, const cr_value *f, cr_targ x);

/** @deprecated Use cr_av_broadcast2(), removed in 0.3.0. @param[in] t the tape.
 *  @param[in] f the function. @param[in] x first argument. @param[in] y second argument.
 *  @return as cr_av_broadcast2(). */
CR_DEPRECATED("use cr_av_broadcast2")
CR_API cr_avar cr_abroadcast2(cr_tape *t, const cr_value *f, cr_targ x, cr_targ y);

/** @deprecated Use cr_av_sum(), removed in 0.3.0. @param[in] t the tape.
 *  @param[in] x the array. @return as cr_av_sum(). */
CR_DEPRECATED("use cr_av_sum") CR_API cr_var cr_asum(cr_tape *t, cr_avar x);

/** @deprecated Use cr_av_dot(), removed in 0.3.0. @param[in] t the tape.
 *  @param[in] x first array. @param[in] y second array. @return as cr_av_dot(). */
CR_DEPRECATED("use cr_av_dot") CR_API cr_var cr_adot(cr_tape *t, cr_avar x, cr_avar y);

/** @deprecated Use cr_av_slice(), removed in 0.3.0. @param[in] t the tape.
 *  @param[in] x a 1-d array. @param[in] start first index. @param[in] stop one past the last.
 *  @return as cr_av_slice(). */
CR_DEPRECATED("use cr_av_slice")
CR_API cr_avar cr_aslice(cr_tape *t, cr_avar x, int64_t start, int64_t stop);

/** @deprecated Use cr_av_matmul(), removed in 0.3.0. @param[in] t the tape.
 *  @param[in] A left operand. @param[in] B right operand. @return as cr_av_matmul(). */
CR_DEPRECATED("use cr_av_matmul") CR_API cr_avar cr_amatmul(cr_tape *t, cr_avar A, cr_avar B);

/** @deprecated Use cr_av_kernel() (kernel.h), removed in 0.3.0. @param[in] t the tape.
 *  @param[in] k the kernel. @param[in] args nargs arguments. @param[in] nargs their number.
 *  @param[in] n number of elements. @return as cr_av_kernel(). */
CR_DEPRECATED("use cr_av_kernel")
CR_API cr_avar cr_akernel(cr_tape *t, const struct cr_kernel *k, const struct cr_kin *args,
                          size_t nargs, size_t n);

/** @deprecated Use cr_av_kernel_sum() (kernel.h), removed in 0.3.0. @param[in] t the tape.
 *  @param[in] k the kernel. @param[in] args nargs arguments. @param[in] nargs their number.
 *  @param[in] n number of elements. @return as cr_av_kernel_sum(). */
CR_DEPRECATED("use cr_av_kernel_sum")
CR_API cr_var cr_akernel_sum(cr_tape *t, const struct cr_kernel *k, const struct cr_kin *args,
                             size_t nargs, size_t n);

CR_END_DECLS

#endif /* CR_DEPRECATED_H */
