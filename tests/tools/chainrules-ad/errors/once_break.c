/* expect: once_break.c:10:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: its contribution is conditional or repeated */
/* args: --reverse-set f */
/* a break may leave the loop before an element is read */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        if (s > 10)
            break;
        s = s + 2 * x[i];
    }
    return s;
}
