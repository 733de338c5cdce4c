/* expect: once_consts.c:8:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: its shadow has more than one contribution */
/* args: --reverse-set f */
/* x[1] read by two statements outside loops: two contributions to one element */
double f(const double *x, int n)
{
    double a = x[0] * x[1];
    double b = a * x[2] + n;
    return b * x[1];
}
