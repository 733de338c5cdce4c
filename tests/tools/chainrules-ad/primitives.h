/* The primitives of primitives_input.c and the functions the tests call. */
#ifndef CR_TEST_AD_PRIMITIVES_H
#define CR_TEST_AD_PRIMITIVES_H

double lse(const double *x, int n);
void matmul(const double *A, const double *B, double *C, int m, int k, int n);
double logdet(const double *A, int n);
double wsq(const double *x, double w, int n);
double bad_rule(const double *x, int n);

double q_chain(const double *W, const double *x0, double s, int n);
double q_chain_rev(const double *W, double *W_b, const double *x0, double *x0_b, double s,
                   double *s_b, int n, double q_chain_b);
double q_chain_fwd(const double *W, const double *W_d, const double *x0, const double *x0_d,
                   double s, double s_d, int n, double *q_chain_d);
double q_chain_fwdv(const double *W, const double *W_d, const double *x0, const double *x0_d,
                    double s, const double *s_d, int n, double *q_chain_d, int nd);
double q_bad(const double *x, int n);
double q_bad_rev(const double *x, double *x_b, int n, double q_bad_b);

#endif
