/*
 * Private to the higher-order rules of the array family (broadcast.c, higher_order.c,
 * fold_dims.c): the samples of broadcast and map with more arguments than a scalar row has,
 * and the rules of foldl and accumulate over a vector, which the folds over dimensions
 * apply slice by slice.
 */
#ifndef CR_ARRAY_HOF_IMPL_H
#define CR_ARRAY_HOF_IMPL_H

#include "family.h"

/* The arguments of f(x_1, ..., x_n), n = nargs - 1: the variadic hypot or evalpoly, over
 * arrays of one shape (same) or of shapes that broadcast, and numbers (broadcast.c). */
CR_INTERNAL cr_status cr__sample_bc_many(cr_arena *arena, uint64_t *rng, cr_value *args,
                                         size_t nargs, bool same);

/* foldl (acc false) or accumulate (acc true) of (op, v[, init]) over a vector: the rrule
 * and frule behind cr_fn_foldl and cr_fn_accumulate; who names the function in messages
 * (higher_order.c). */
CR_INTERNAL cr_status cr__fold_rrule(const cr_config *cfg, cr_arena *arena, const char *who,
                                     bool acc, const cr_value *args, size_t nargs, cr_value *y,
                                     cr_pullback *pb, const void *udata);
CR_INTERNAL cr_status cr__fold_frule(const cr_config *cfg, cr_arena *arena, const char *who,
                                     bool acc, const cr_tangent *dargs, const cr_value *args,
                                     size_t nargs, cr_value *y, cr_tangent *dy);

/* Register reduce(op, A[, dims[, init]]) and accumulate_ex(op, A, dim[, init]) (fold_dims.c;
 * called by cr__array_register_hof after foldl and accumulate). */
CR_INTERNAL cr_status cr__array_register_fold_dims(cr_registry *reg);

#endif /* CR_ARRAY_HOF_IMPL_H */
