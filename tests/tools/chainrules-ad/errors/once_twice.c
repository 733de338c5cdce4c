/* expect: once_twice.c:11:.*'f_rev_set' \(--reverse-set\): cannot assign the shadow of 'x' once per element: its shadow has more than one contribution */
/* args: --reverse-set f */
/* x[i] read by two statements: its shadow's element has two contributions */
double exp(double);
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        double e = exp(x[i]);
        s = s + e;
        s = s * x[i];
    }
    return s;
}
