/* expect: literal_inc.c:6:33: error: unsupported construct: a compound literal in a for loop's increment */
/* A compound literal in a for loop's increment: not lowered. */
double f(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i += (int[]){1, 2}[i % 2])
        s += x[i];
    return s;
}
