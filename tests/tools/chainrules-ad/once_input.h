/* The programs of once_input.c and the derivatives chainrules-ad writes for them. */
#ifndef CR_TEST_ONCE_INPUT_H
#define CR_TEST_ONCE_INPUT_H

double o_lse(const double *x, long n);
double o_lse_rev(const double *x, double *x_b, long n, double o_lse_b);
double o_lse_rev_set(const double *x, double *x_b, long n, double o_lse_b);

double o_terms(const double *x, const double *y, double w, int n);
double o_terms_rev(const double *x, double *x_b, const double *y, double *y_b, double w,
                   double *w_b, int n, double o_terms_b);
double o_terms_rev_set(const double *x, double *x_b, const double *y, double *y_b, double w,
                       double *w_b, int n, double o_terms_b);

double o_straight(const double *x, const double *z, int n);
double o_straight_rev(const double *x, double *x_b, const double *z, double *z_b, int n,
                      double o_straight_b);
double o_straight_rev_set(const double *x, double *x_b, const double *z, double *z_b, int n,
                          double o_straight_b);

void o_output(const double *x, double *out, int n);
void o_output_rev(const double *x, double *x_b, double *out, double *out_b, int n);
void o_output_rev_set(const double *x, double *x_b, double *out, double *out_b, int n);

#endif
