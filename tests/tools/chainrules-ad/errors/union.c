/* expect: union.c:8:13: error: unsupported construct: a local of type .union u. */
union u {
    double d;
    long l;
};
double f(const double *x, int n)
{
    union u v;
    v.d = x[0] * n;
    return v.d;
}
