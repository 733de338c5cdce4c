/* expect: once_index.c:8:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: its element is not indexed by c \* i \+ d, with i the loop's counter */
/* args: --reverse-set f */
/* x[i / 2]: two iterations write the same element */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s = s + x[i / 2] * i;
    return s;
}
