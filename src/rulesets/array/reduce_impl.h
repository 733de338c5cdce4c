/*
 * Private to the reductions of the array family (reduce.c, softmax.c, var_std.c, norm.c): a
 * reduction parsed from its arguments (over all elements or along dims), its output and
 * cotangent, and the samplers of their test registrations.
 */
#ifndef CR_ARRAY_REDUCE_IMPL_H
#define CR_ARRAY_REDUCE_IMPL_H

#include "family.h"

/* A parsed reduction: the argument, the output shape (A's, reduced dimensions 1). */
typedef struct cr__red {
    const cr_array *A;
    const cr_array *Aw; /* A in the work dtype, any strides */
    bool all;           /* no dims: the output is a scalar */
    bool mask[CR_ARRAY_MAX_DIMS];
    size_t ndim;
    size_t oshape[CR_ARRAY_MAX_DIMS];
    size_t count; /* elements per slice */
    cr_dtype wdt;
    const char *who; /* the function's name, for messages */
} cr__red;

/* Parse f(A[, dims]) of at most max_args arguments (real_only: no c128) into r. */
CR_INTERNAL cr_status cr__red_parse(cr_arena *arena, const char *who, const cr_value *args,
                                    size_t nargs, size_t max_args, bool real_only, cr__red *r);

/* The output value from the work array w of shape oshape. */
CR_INTERNAL cr_status cr__red_output(cr_arena *arena, const cr__red *r, const cr_array *w,
                                     cr_value *y);

/* The cotangent (or tangent) of the output, as a work array of shape oshape (0-d for a
 * scalar output); NULL when zero. */
CR_INTERNAL cr_status cr__red_cot(cr_arena *arena, const char *who, const cr__red *r, cr_tangent dy,
                                  const cr_array **g);

/* The reductions that reduce(op, A[, dims]) hands its operator to (array/fold_dims.c):
 * sum for +, prod for *, maximum for max, minimum for min. */
typedef enum cr__red_op {
    CR__RED_OP_SUM,
    CR__RED_OP_PROD,
    CR__RED_OP_MAX,
    CR__RED_OP_MIN
} cr__red_op;

/* The rrule (frule) of the reduction op over (A[, dims]): args, dargs and the pullback's
 * cotangents are those of the reduction (no operator). */
CR_INTERNAL cr_status cr__red_op_rrule(cr__red_op op, const cr_config *cfg, cr_arena *arena,
                                       const cr_value *args, size_t nargs, cr_value *y,
                                       cr_pullback *pb, const void *udata);
CR_INTERNAL cr_status cr__red_op_frule(cr__red_op op, const cr_config *cfg, cr_arena *arena,
                                       const cr_tangent *dargs, const cr_value *args, size_t nargs,
                                       cr_value *y, cr_tangent *dy);

/* ---- Test registrations ---- */

typedef struct cr__red_sample_opts {
    bool dims; /* a second argument: dims */
    bool real_only;
    bool zeros;   /* sometimes plant zeros (prod) */
    bool one_dim; /* dims is one integer (cumsum) */
} cr__red_sample_opts;

/* A reduction's arguments: an array of 1 to 3 dimensions and, with o->dims, dims (env is a
 * `const cr__red_sample_opts *`). */
CR_INTERNAL cr_status cr__sample_red(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                                     void *env);

CR_INTERNAL extern const cr__red_sample_opts cr__so_red_all;
/* Any array, with or without dims; a real array (distinct values), with or without dims. */
CR_INTERNAL extern const cr_rule_test cr__t_red_all, cr__t_red_dims, cr__t_red_real,
    cr__t_red_real_dims;

#endif /* CR_ARRAY_REDUCE_IMPL_H */
