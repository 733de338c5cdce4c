/* expect: pragma.c:5:1: error: malformed pragma */
double f(const double *x, int n)
{
    double s = 0;
#pragma chainrules checkpoint(zero)
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    return s;
}
