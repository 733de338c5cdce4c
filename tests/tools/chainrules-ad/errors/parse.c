/* expect: parse.c:4:22: error: */
double f(const double *x, int n)
{
    return x[0] * n +;
}
