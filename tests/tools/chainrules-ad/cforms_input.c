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
 * Compound literals (c_once, c_lit_*) and loop conditions with side effects (c_post,
 * c_down, c_iter), which the tool lowers to plain statements.
 */
#include <math.h>

#include "cforms_input.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-qualifiers"

typedef const double c_real;

/* a point with a weight pair, built by the struct literals below */
struct c_pt {
    double x, y;
    double w[2];
    int k;
};

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

/* each element read once, no call of a function of the file (--reverse-set too) */
extern const double c_once(const double *x, int n)
{
    return (double[]){sin(x[0]), x[1] * x[2]}[1] * n + (struct c_pt){.x = x[3], .k = 1}.x;
}

#pragma GCC diagnostic pop

/* ---- Compound literals: unnamed locals, lowered to new locals with their initialisers */

static double c_dot(const double *a, const double *b, int m)
{
    double s = 0;
    for (int i = 0; i < m; i++)
        s += a[i] * b[i];
    return s;
}

static double c_len(const struct c_pt *p)
{
    return sqrt(p->x * p->x + p->y * p->y) + p->w[0] * p->w[1] + p->k;
}

/* array literals: an argument, indexed, constant, designated, in a loop's body */
double c_lit_array(const double *x, int n)
{
    double s = c_dot((double[]){x[0], x[1] * x[2], sin(x[3])}, x, 3);
    s += (double[]){x[0], 2 * x[1]}[n % 2] * c_dot((const double[]){1.5, -2, 0.25}, x + 1, 3);
    double d = (double[4]){[2] = x[1], [0] = exp(x[3])}[0];
    for (int i = 0; i < n; i++)
        s += (double[]){x[i], x[i] * d}[1] * (float[]){0.5f, 2.0f}[i % 2];
    return s;
}

/* struct literals: by address to a helper, designated and positional, a member read */
double c_lit_struct(const double *x, int n)
{
    double s = c_len(&(struct c_pt){.y = x[0], .x = x[1] * x[2], .w = {x[3]}, .k = n});
    s += (struct c_pt){x[0] * x[3], cos(x[1]), {0.5, x[2]}, 0}.y;
    for (int i = 1; i < n; i++)
        s *= 1 + 0.1 * c_len(&(struct c_pt){x[i - 1], x[i], {x[i], 2}, 1});
    return s;
}

/* struct literals read by member only (every mode: the vector forward mode and the Jacobian
 * entries pass no pointer to a local struct to a callee) */
double c_lit_member(const double *x, int n)
{
    double s = (struct c_pt){.y = x[0] * x[1], .w = {x[2], exp(x[3])}, .k = n}.w[1];
    struct c_pt q = (struct c_pt){x[1], sin(x[2]), {0, 0}, 0};
    s += q.x * q.y + (struct c_pt){.x = x[3]}.x * c_dot((double[]){x[0], x[1]}, x + 2, 2);
    return s;
}

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
