/* expect: once_mirror.c:9:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: its shadow has more than one contribution */
/* args: --reverse-set f */
/* x[i] and x[n - 1 - i] in one statement: element j has two contributions, from the
 * iterations j and n - 1 - j */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[n - 1 - i];
    return s;
}
