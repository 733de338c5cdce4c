/* expect: prim_shape.c:3:1: error: primitive .g.: give the extents of .x. with shape\(x\[n\]\) */
double g(const double *x, int n);
#pragma chainrules primitive(g) rule(cr_fn_logsumexp)
double f(const double *x, int n)
{
    return g(x, n);
}
