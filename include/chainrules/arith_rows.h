/**
 * @file arith_rows.h
 * @brief The arithmetic rows (+, -, *, /, unary minus), written once (private).
 *
 * Each row is one entry of the X-macro `CR__ARITH_ROWS(X)`:
 * `X(NAME, NIN, NOUT, PRIMAL, PARTIALS...)`, in the form of CR_SCALAR_EVALS() (`x` the
 * arguments, `Y` the results, `D` the partials, row-major, Ω written `Y[0]`). The one
 * definition is instantiated three times: by the rule table (src/rulesets/scalar/arith.c, through
 * CR_SCALAR_EVALS), by the reverse tape's out-of-line operations (src/ad/tape.c), and by
 * the inline operations of tape.h (cr_add() and the others, recorded in the caller).
 *
 * Not part of the API: the macro may change in any release. Use the rules (cr_fn_add, ...)
 * or the tape's operations instead.
 */
#ifndef CR_ARITH_ROWS_H
#define CR_ARITH_ROWS_H

/** @cond CR_PRIVATE */

/* x + y: ∂/∂x = 1, ∂/∂y = 1
 * x - y: ∂/∂x = 1, ∂/∂y = -1
 * x * y: ∂/∂x = y, ∂/∂y = x
 * x / y: ∂/∂x = 1/y, ∂/∂y = -Ω/y
 * -x:    ∂/∂x = -1 */
#define CR__ARITH_ROWS(X)                                                  \
    X(add, 2, 1, Y[0] = x[0] + x[1], D[0] = 1; D[1] = 1)                   \
    X(sub, 2, 1, Y[0] = x[0] - x[1], D[0] = 1; D[1] = -1)                  \
    X(mul, 2, 1, Y[0] = x[0] * x[1], D[0] = x[1]; D[1] = x[0])             \
    X(div, 2, 1, Y[0] = x[0] / x[1], D[0] = 1 / x[1]; D[1] = -Y[0] / x[1]) \
    X(neg, 1, 1, Y[0] = -x[0], D[0] = -1)

/* The number of rows of CR__ARITH_ROWS. */
enum { CR__ARITH_NROWS = 5 };

/** @endcond */

#endif /* CR_ARITH_ROWS_H */
