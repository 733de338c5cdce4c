/* expect: struct_vector.c:16:12: error: unsupported construct in the vector forward mode of 'f': the local struct 'q' passed by address to 'len2' \(pass its fields, or use the forward mode\) */
/* args: --vector f */
/* A local struct's tangent in f_fwdv is one struct per direction; a callee takes none. */
struct pt {
    double x, y;
};
static double len2(const struct pt *p)
{
    return p->x * p->x + p->y * p->y;
}
double f(const double *x)
{
    struct pt q[2];
    q[1].x = x[0];
    q[1].y = x[1];
    return len2(&q[1]) + q[0].x;
}
