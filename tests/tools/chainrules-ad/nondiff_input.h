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

int n_count_fwd(const double *x, const double *x_d, double *y, double *y_d, int n);
int n_count_fwdv(const double *x, const double *x_d, double *y, double *y_d, int n, int nd);
int n_sign_fwd(double a, double a_d, double b, double b_d);
int n_sign_fwdv(double a, const double *a_d, double b, const double *b_d, int nd);

int n_above(const double *x, int n, double t);
int n_above_fwd(const double *x, const double *x_d, int n, double t, double t_d);
int n_above_fwdv(const double *x, const double *x_d, int n, double t, const double *t_d, int nd);

double n_const_fwd(const double a, double a_d, const double *const x, const double *x_d,
                   const int n, double *n_const_d);
double n_const_fwdv(const double a, const double *a_d, const double *const x, const double *x_d,
                    const int n, double *n_const_d, int nd);
double n_const_jacfwd(const double a, const double *const x, const int n, double *J);

double n_nest(const double a, const double *const x, const int n);
double n_nest_fwd(const double a, double a_d, const double *const x, const double *x_d, const int n,
                  double *n_nest_d);
double n_nest_fwdv(const double a, const double *a_d, const double *const x, const double *x_d,
                   const int n, double *n_nest_d, int nd);
double n_nest_jacfwd(const double a, const double *const x, const int n, double *J);

#endif
