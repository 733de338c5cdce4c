/* expect: once_nested.c:10:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: its contribution is conditional or repeated */
/* args: --reverse-set f */
/* the inner loop reads x[i] once per j */
double sin(double);
double f(const double *x, int n)
{
    double s = 0;
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < n; i++)
            s = s + sin(x[i]) * j;
    return s;
}
