/* expect: jac_call.c:12:12: error: the Jacobian mode of 'f' \(--jacobian\): a call with active arguments of a function that is not inlined .*: g */
/* args: --jacobian f --dims x=4 */
static double g(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    return s;
}
double f(const double *x, int n)
{
    return g(x, n) * x[0];
}
