/*
 * Private to the scalar rule families (src/rulesets/scalar/): the macros that declare a
 * row's function value and its test registration.
 */
#ifndef CR_SCALAR_ROWS_IMPL_H
#define CR_SCALAR_ROWS_IMPL_H

#include "../../rules/rules_impl.h"

/* Declares the cr_function of row NAME_row, named STR with NIN arguments, and its exported
 * function value cr_fn_NAME. */
#define DEFINE_FN(NAME, STR, NIN)                                                        \
    static const cr_function NAME##_function = CR_SCALAR_FUNCTION(STR, NAME##_row, NIN); \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

/* Number of points of a hard-point array of NIN coordinates each. */
#define NPTS(PTS, NIN) (sizeof(PTS) / sizeof(PTS)[0] / (NIN))

/* The test registration of row NAME from the arrays NAME_lo, NAME_hi (sampling box, one
 * bound per argument) and NAME_pts (hard points, nin coordinates each). */
#define TESTREG(NAME)                                                          \
    .test = {.lo = NAME##_lo,                                                  \
             .hi = NAME##_hi,                                                  \
             .npoints = sizeof NAME##_pts / sizeof NAME##_pts[0] / NAME##_nin, \
             .points = NAME##_pts}

#endif /* CR_SCALAR_ROWS_IMPL_H */
