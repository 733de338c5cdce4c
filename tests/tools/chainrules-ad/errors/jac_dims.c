/* expect: jac_dims.c:3:24: error: the Jacobian mode of 'f' \(--jacobian\): the length of an array indexed by a variable is needed: give it with --dims name=N for 'x' */
/* args: --jacobian f */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    return s;
}
