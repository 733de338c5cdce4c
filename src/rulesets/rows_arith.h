/*
 * The arithmetic rows (+, -, *, /, unary minus): one definition each, in the X-macro
 * CR__ARITH_ROWS of <chainrules/arith_rows.h>, instantiated here for basic.c (the
 * registered rules) and the reverse tape (src/ad/tape.c); tape.h instantiates the same
 * macro for the operations it records inline. Include after <tgmath.h> and
 * <chainrules/scalar_rule.h>.
 */
#ifndef CR_ROWS_ARITH_H
#define CR_ROWS_ARITH_H

#include <chainrules/arith_rows.h>

CR__ARITH_ROWS(CR_SCALAR_EVALS)

#endif /* CR_ROWS_ARITH_H */
