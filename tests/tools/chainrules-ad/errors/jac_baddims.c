/* expect: chainrules-ad: --dims wants name=N with 1 <= N <= 1048576, not 'x=0' */
/* args: --jacobian f --dims x=0 */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}
