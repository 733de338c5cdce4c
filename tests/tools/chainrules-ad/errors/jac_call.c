/* expect: jac_call.c:17:12: error: the Jacobian mode of 'f' \(--jacobian\): an argument that is not a real scalar or p, p \+ k, &p\[k\] of a 1-D real array of known length, in the call of g */
/* args: --jacobian f --dims x=4 */
static double g(const double (*a)[2], int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += a[i][0] * a[i][1];
    return s;
}
double f(const double *x)
{
    double a[2][2];
    a[0][0] = x[0];
    a[0][1] = x[1];
    a[1][0] = x[2];
    a[1][1] = x[3];
    return g(a, 2) * x[0];
}
