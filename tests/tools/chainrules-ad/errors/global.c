/* expect: global.c:5:19: error: unsupported construct: the mutable global .scale. holding real data */
double scale = 2.0;
double f(const double *x, int n)
{
    return x[0] * scale * n;
}
