/*
 * Second-order forms of the nonlinear array functions that are not broadcasts
 * (tape_array2_forms.c), used by the second-order sweep over array records (tape_array2.c).
 */
#ifndef CR_TAPE_ARRAY2_FORMS_H
#define CR_TAPE_ARRAY2_FORMS_H

#include "tape_impl.h"

/*
 * A second-order form: for the K_ARRAY record nd (its scalar result, if any, is variable i)
 * whose result has the cotangent ybar (not zero), add S_j = d/dε [pullback at x + ε ẋ](ȳ)_j
 * into the derivatives of its arguments' cotangents, for each of the k directions (tan: the
 * scalar tangents; the array tangents are the sweep's). Failures are recorded on the tape.
 */
typedef cr_status (*cr__so_form_fn)(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                                    double *adjd, const double *tan, size_t k);

/* The form of f(vals...) (codes: the arguments' variables, CR_VAR_CONST for constants), or
 * NULL; with NULL, *why is a reason to refuse f on a second-order tape (a variable norm
 * exponent, sum(f, A) of a function that is not a scalar-table row, ...), or NULL when f is
 * not one of the functions with a form. */
CR_INTERNAL cr__so_form_fn cr__so_form_of(const cr_value *f, const cr_value *vals,
                                          const uint32_t *codes, size_t nargs, const char **why);

/* The tangent of a record's argument `code` along direction d, and the addition of dx into
 * the derivative of argument j's cotangent along d (tape_array2.c). */
CR_INTERNAL cr_tangent cr__a2_arg_tangent(const cr_tape *t, uint32_t code, const double *tan,
                                          size_t k, size_t d);
CR_INTERNAL cr_status cr__a2_add_d(cr_tape *t, const cr__anode *nd, size_t j, cr_tangent dx,
                                   double *adjd, size_t k, size_t d);

#endif /* CR_TAPE_ARRAY2_FORMS_H */
