/* expect: jac_dims_unknown.c: error: --dims names 'z', which is not a parameter of the functions of --jacobian */
/* args: --jacobian f --dims x=4,z=3 */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}
