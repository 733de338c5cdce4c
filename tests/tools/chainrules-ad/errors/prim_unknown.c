/* expect: prim_unknown.c:3:1: error: primitive .g.: the library has no function .cr_fn_nosuch. */
double g(const double *x, int n);
#pragma chainrules primitive(g) rule(cr_fn_nosuch) shape(x[n])
double f(const double *x, int n)
{
    return g(x, n);
}
