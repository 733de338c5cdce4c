/* expect: once_cond.c:9:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: its contribution is conditional */
/* args: --reverse-set f */
/* under an if, the element is written in some calls only: the caller's value would stay */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        if (i % 2 == 0)
            s = s + 2 * x[i];
    }
    return s;
}
