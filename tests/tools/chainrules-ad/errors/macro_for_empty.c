/* expect: macro_for_empty.c:9:5: error: unsupported construct: for statement \(could not read its parts\) */
/* a for header whose parts are macro arguments, one left empty: the parts written in the
 * macro's definition (three) are not those of the expansion (two) */
#define LOOP(init, cond, inc) for (init; cond; inc)
double f(const double *x, int n)
{
    double s = 0;
    int i = 0;
    LOOP(, i < n, i++) s += x[i] * x[i];
    return s;
}
