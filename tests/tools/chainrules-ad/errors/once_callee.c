/* expect: once_callee.c:12:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: it is passed to a function of the file */
/* args: --reverse-set f */
/* g receives x (and may read any of its elements) */
static double g(const double *v, int i)
{
    return v[i] * v[i];
}
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s = s + g(x, i);
    return s;
}
