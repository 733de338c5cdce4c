/*
 * The arithmetic rows (+, -, *, /, unary minus): one definition each, instantiated in
 * basic.c (the registered rules) and in the reverse tape (src/ad/tape.c), whose named
 * operations call them directly so that the compiler inlines value and partials into the
 * record. Include after <tgmath.h> and <chainrules/scalar_rule.h>.
 */
#ifndef CR_ROWS_ARITH_H
#define CR_ROWS_ARITH_H

/* x + y: ∂/∂x = 1, ∂/∂y = 1 */
CR_SCALAR_EVALS(add, 2, 1, Y[0] = x[0] + x[1], D[0] = 1; D[1] = 1)
/* x - y: ∂/∂x = 1, ∂/∂y = -1 */
CR_SCALAR_EVALS(sub, 2, 1, Y[0] = x[0] - x[1], D[0] = 1; D[1] = -1)
/* x * y: ∂/∂x = y, ∂/∂y = x */
CR_SCALAR_EVALS(mul, 2, 1, Y[0] = x[0] * x[1], D[0] = x[1]; D[1] = x[0])
/* x / y: ∂/∂x = 1/y, ∂/∂y = -Ω/y */
CR_SCALAR_EVALS(div, 2, 1, Y[0] = x[0] / x[1], D[0] = 1 / x[1]; D[1] = -Y[0] / x[1])
/* -x: ∂/∂x = -1 */
CR_SCALAR_EVALS(neg, 1, 1, Y[0] = -x[0], D[0] = -1)

#endif /* CR_ROWS_ARITH_H */
