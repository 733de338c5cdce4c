/* expect: struct_vector.c:13:8: error: unsupported construct in the vector forward mode of 'f' \(a pointer argument other than p, p \+ k or &p\[k\]\) */
/* args: --vector f */
/* An array field of a local struct passed to a callee: its tangents in f_fwdv are one struct
 * per direction apart, not a block of numbers with a stride. */
struct pt {
    double x, y;
    double w[2];
};
static double dot(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1];
}
double f(const double *x)
{
    struct pt q;
    q.w[0] = x[0];
    q.w[1] = x[1] * x[0];
    return dot(q.w, x);
}
