/* expect: jac_dims_qualified.c: error: --dims names 'g.x': 'g' is not a function of --jacobian with a parameter 'x' */
/* args: --jacobian f --dims x=4,g.x=3 */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}

double g(const double *x, int n)
{
    return x[0] * n;
}
