/* expect: prim_outputs.c:3:1: error: primitive .g.: a primitive has one output, its double return value or its one non-const pointer parameter \(.y. is a second\) */
double g(const double *x, double *y, int n);
#pragma chainrules primitive(g) rule(cr_fn_logsumexp) shape(x[n], y[n])
double f(const double *x, int n)
{
    double y[4];
    return g(x, y, n);
}
