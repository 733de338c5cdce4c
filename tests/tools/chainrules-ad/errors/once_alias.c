/* expect: once_alias.c:8:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: its pointer is used other than as x\[i\] */
/* args: --reverse-set f */
/* *(x + i) reads x[i] a second time, through pointer arithmetic */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s = s + x[i] * *(x + i);
    return s;
}
