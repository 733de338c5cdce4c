/* The plain-C model of examples/06_plain_c.c and its derivatives (model/logreg.c). */
#ifndef EXAMPLE_LOGREG_H
#define EXAMPLE_LOGREG_H

/* The loss at weights w (d weights, then the bias) over n points X (n x d) with labels y. */
double loss(const double *w, const double *X, const double *y, int n, int d, double lambda);
/* Written by chainrules-ad: the value, and the gradient times loss_b added into w_b. */
double loss_rev(const double *w, double *w_b, const double *X, const double *y, int n, int d,
                double lambda, double loss_b);
/* Written by chainrules-ad: the value, and the derivative along w_d in *loss_d. */
double loss_fwd(const double *w, const double *w_d, const double *X, const double *y, int n, int d,
                double lambda, double *loss_d);

#endif
