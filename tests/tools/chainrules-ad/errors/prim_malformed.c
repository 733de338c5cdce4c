/* expect: prim_malformed.c:3:1: error: malformed pragma: write .#pragma chainrules primitive\(g\) rule */
double g(const double *x, int n);
#pragma chainrules primitive(g) rule(cr_fn_logsumexp) shape(x[])
double f(const double *x, int n)
{
    return g(x, n);
}
