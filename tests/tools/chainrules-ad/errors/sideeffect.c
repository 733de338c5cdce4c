/* expect: sideeffect.c:7:16: error: unsupported construct: an assignment or \+\+/-- inside an expression */
double f(const double *x, int n)
{
    double s = 0;
    int i = 0;
    while (i < n)
        s += x[i++];
    return s;
}
