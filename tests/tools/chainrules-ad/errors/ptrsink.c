/* expect: ptrsink.c:9:5: error: call to .accumulate. with active arguments has no rule and no body */
int accumulate(const void *in, void *out, int n);

double f(const double *x, int n)
{
    double s = x[0] * 2, t = 0;
    (void)n;
    /* t receives data that depend on x: an unknown call must not be read as inactive */
    accumulate(&s, &t, 1);
    return t;
}
