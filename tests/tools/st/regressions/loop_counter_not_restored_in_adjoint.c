/*
 * The adjoint of a loop that only fills a local array restores the array's old values with
 * w[j] = pop() for each iteration, but j keeps the value the forward loop left (2): the
 * restores write w[2], past the array. At -O0 this overwrote the value stack and f_rev
 * crashed in cr_adstack_pop_f64; at -O2 the write lands elsewhere on the stack (the
 * regression cases are compiled with the address sanitizer, which reports it).
 *
 * y1 = y1 / (1 + 0.5 y0): d y1 / d y0 = -0.5 y1 / (1 + 0.5 y0)^2,
 * d y1 / d y1(on entry) = 1 / (1 + 0.5 y0). Found as random program seed 5004 (generator of
 * commit 720e207, with --no-inout-helpers --no-fcalls), f28.
 */
#include <math.h>

// st: f ns=0 m=2 ret=0 io=1

void f(const double *x, int n, double *y)
{
    (void)x;
    (void)n;
    double w[2];
    for (int j = 0; j < 2; j++) {
        w[j] = 0.5;
    }
    y[1] /= 1.0 + y[0] * w[0];
}
