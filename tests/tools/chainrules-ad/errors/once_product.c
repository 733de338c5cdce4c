/* expect: once_product.c:8:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: its element is not indexed by c \* i \+ d, with i the loop's counter, c a nonzero constant and d unchanged by the loop */
/* args: --reverse-set f */
/* x[i * k]: the coefficient k is not a constant (0 would read one element n times) */
double f(const double *x, int n, int k)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s = s + x[i * k] * (i + 1);
    return s;
}
