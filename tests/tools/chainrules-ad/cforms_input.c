/*
 * Ordinary C forms for test_ad_cforms.c, differentiated in every mode that accepts them;
 * the derivative file is compiled with -Werror -Wall -Wextra (CMakeLists.txt).
 *
 * Return types spelt with qualifiers and storage classes: `const double`, a typedef of a
 * const type, `static inline` and `extern` functions. A function returns the unqualified
 * type, and the generated code must not spell the qualifier (-Wignored-qualifiers). The
 * input's own qualifiers are the user's: the warning is silenced for this text only (its
 * copy in the derivative file pops it before the generated code).
 *
 * Loop conditions with side effects (c_post, c_down, c_iter), which the tool lowers to
 * plain statements.
 */
#include <math.h>

#include "cforms_input.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-qualifiers"

typedef const double c_real;

/* a static inline helper with a const return type */
static inline const double c_sq(const double v)
{
    return v * v;
}

/* an extern helper returning a const-qualified typedef */
extern c_real c_wave(const double v, const double w)
{
    return sin(v) * w + c_sq(w);
}

const double c_ret(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += c_sq(x[i]) * cos(x[i]) + c_wave(x[i], 0.5 + 0.1 * i);
    return s;
}

extern const double c_ret2(const double *x, int n)
{
    return c_wave(x[0], x[n - 1]) * exp(0.3 * x[1]);
}

#pragma GCC diagnostic pop

/* ---- Loop conditions with side effects: lowered to the top (bottom) of the body */

static double c_next(double t, double a)
{
    return t * 1.5 + a * a;
}

/* while (i++ < n) and while ((j += 2) < n) */
double c_post(const double *x, int n)
{
    double s = 0;
    int i = 0;
    while (i++ < n)
        s = s * 0.9 + x[i - 1] * x[i - 1];
    int j = -1;
    while ((j += 2) < n) {
        if (x[j] > 10)
            continue;
        s += sin(x[j]) * s;
    }
    return s;
}

/* for (unsigned i = n; i-- > 0;) and a do loop with ++j in its condition */
double c_down(const double *x, int n)
{
    double s = 1;
    for (unsigned i = (unsigned)n; i-- > 0;)
        s = s * x[i] + cos(s);
    int j = 0;
    do
        s += x[j] * x[(j + 1) % n];
    while (++j < n);
    return s;
}

/* a call in the condition assigning the iterate, and a counter incremented there */
double c_iter(const double *x, int n)
{
    double t = x[0] * x[0], s = 0;
    int k = 0;
    for (; (t = c_next(t, x[1])) < 40 && k < 8 * n; k++)
        s += t * x[k % n];
    int m = 0;
    while (m++ < n && x[m - 1] > -100)
        s += x[m - 1] * t / 100;
    return s;
}
