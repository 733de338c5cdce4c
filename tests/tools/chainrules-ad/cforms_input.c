/*
 * Ordinary C forms for test_ad_cforms.c, differentiated in every mode that accepts them;
 * the derivative file is compiled with -Werror -Wall -Wextra (CMakeLists.txt).
 *
 * Return types spelt with qualifiers and storage classes: `const double`, a typedef of a
 * const type, `static inline` and `extern` functions. A function returns the unqualified
 * type, and the generated code must not spell the qualifier (-Wignored-qualifiers). The
 * input's own qualifiers are the user's: the warning is silenced for this text only (its
 * copy in the derivative file pops it before the generated code).
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
