/* expect: nofunc.c: error: no function .f. with a body in this file */
double g(const double *x, int n)
{
    return x[0] * n;
}
