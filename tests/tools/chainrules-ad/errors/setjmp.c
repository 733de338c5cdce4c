/* expect: setjmp.c:7:9: error: unsupported construct: setjmp and longjmp */
#include <setjmp.h>
static jmp_buf env;
double f(const double *x, int n)
{
    double s = x[0] * n;
    if (setjmp(env))
        s = s * x[1];
    return s;
}
