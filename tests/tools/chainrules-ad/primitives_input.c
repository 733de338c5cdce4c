/*
 * Calls of primitives (`#pragma chainrules primitive`): functions differentiated by a rule
 * of the rule API rather than transformed. lse has its body here (not transformed: its
 * rule is the library's logsumexp); matmul and logdet are declared only (defined in
 * test_ad_primitives.c); wsq's rule is a user's cr_rule_def (test_ad_primitives.c).
 */
#include <math.h>

#include "primitives.h"

double lse(const double *x, int n)
{
    double m = x[0], s = 0;
    for (int i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    for (int i = 0; i < n; i++)
        s += exp(x[i] - m);
    return m + log(s);
}
#pragma chainrules primitive(lse) rule(cr_fn_logsumexp) shape(x[n])
#pragma chainrules primitive(matmul) rule(cr_fn_matmul) shape(A[m][k], B[k][n], C[m][n])
#pragma chainrules primitive(logdet) rule(cr_fn_logdet) shape(A[n][n])
#pragma chainrules primitive(wsq) rule(wsq_rule) shape(x[n])
#pragma chainrules primitive(bad_rule) rule(cr_fn_matmul) shape(x[n])

/* Three steps x <- tanh(W x) through matmul (its output array overwritten in the loop and
 * restored by the adjoint), then lse, wsq and logdet. */
double q_chain(const double *W, const double *x0, double s, int n)
{
    double x[8], y[8];
    for (int i = 0; i < n; i++)
        x[i] = x0[i];
    for (int t = 0; t < 3; t++) {
        matmul(W, x, y, n, n, 1);
        for (int i = 0; i < n; i++)
            x[i] = tanh(y[i]);
    }
    return s * lse(x, n) + wsq(x, s, n) + logdet(W, n) * s;
}

/* A primitive whose rule does not take its arguments: the derivative fails cleanly. */
double q_bad(const double *x, int n)
{
    return 2 * bad_rule(x, n);
}
