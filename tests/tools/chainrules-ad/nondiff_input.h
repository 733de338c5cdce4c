/* The programs of nondiff_input.c and the derivatives chainrules-ad writes for them. */
#ifndef CR_TEST_NONDIFF_INPUT_H
#define CR_TEST_NONDIFF_INPUT_H

int n_count(const double *x, double *y, int n);
int n_count_rev(const double *x, double *x_b, double *y, double *y_b, int n);

int n_sign(double a, double b);
int n_sign_rev(double a, double *a_b, double b, double *b_b);
int n_sign_rev_set(double a, double *a_b, double b, double *b_b);

double n_partial(double a, double b, const double *z);
double n_partial_rev(double a, double *a_b, double b, double *b_b, const double *z, double *z_b,
                     double n_partial_b);
double n_partial_rev_set(double a, double *a_b, double b, double *b_b, const double *z, double *z_b,
                         double n_partial_b);

double n_const(const double a, const double *const x, const int n);
double n_const_rev(const double a, double *a_b, const double *const x, double *restrict x_b,
                   const int n, double n_const_b);

#endif
