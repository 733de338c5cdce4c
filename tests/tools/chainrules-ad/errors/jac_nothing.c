/* expect: jac_nothing.c:3:8: error: the Jacobian mode of 'f' \(--jacobian\): no active input or no output \(nothing to differentiate\) */
/* args: --jacobian f */
double f(const double *x)
{
    (void)0;
    return 1.0;
}
