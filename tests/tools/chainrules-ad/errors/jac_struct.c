/* expect: jac_struct.c:4:30: error: the Jacobian mode of 'f' \(--jacobian\): only real scalars and pointers to real arrays are supported; not 'm' */
/* args: --jacobian f */
struct model { double a, b; };
double f(const struct model *m, const double *x)
{
    return m->a * x[0] + m->b;
}
