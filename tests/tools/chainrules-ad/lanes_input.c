/*
 * Programs for the vector forward mode with lane ranges (chainrules-ad --lane-ranges,
 * test_ad_lanes.c): local arrays indexed by run-time values, accumulations, a place read
 * by its own value, elements that are the same at run time, conditional expressions, a
 * callee writing the caller's array, a scalar parameter, outputs written from narrow
 * ranges. Each maps x (L_N values, and s for l_scalar) to y (L_M values).
 */
#include <math.h>

#include "lanes_input.h"

/* Gathers and scatters through run-time indices: each element of a carries the lanes of the
 * inputs it was made from; idx[0] and idx[1] may be equal. */
void l_gather(const int *idx, const double *x, double *y)
{
    double a[8];
    double s = 0.0;
    for (int i = 0; i < 8; i++)
        a[i] = 0.0;
    a[idx[0]] = sin(x[0]) * x[1];
    a[idx[1]] = x[2] * x[2] + a[idx[1]];
    a[idx[2]] = a[idx[0]] * x[3]; /* the same element as idx[0] when they are equal */
    for (int i = 0; i < 5; i++) {
        s += a[idx[i % 3]] * cos(x[4] + 0.1 * i);
        s = s * (1.0 + 0.1 * x[5]);
    }
    y[0] = s;
    y[1] = a[idx[1]] - a[idx[0]] * s;
    y[2] = a[idx[2]] * a[idx[2]];
    y[3] = a[7];
}

/* Blocks of a transform each made from two inputs, then a weighted sum over all of them per
 * output (the structure of GradBench's skinning): the terms' lanes differ by block. */
void l_blocks(const int *idx, const double *x, double *y)
{
    double m[3 * 4];
    for (int b = 0; b < 3; b++) {
        double c = cos(x[2 * b]);
        double s = sin(x[2 * b + 1]);
        m[b * 4] = c * s;
        m[b * 4 + 1] = c - s;
        m[b * 4 + 2] = exp(0.1 * x[2 * b]);
        m[b * 4 + 3] = 1.0;
    }
    for (int v = 0; v < 4; v++) {
        double p = 0.0;
        double q = 0.0;
        for (int b = 0; b < 3; b++) {
            double w = 0.25 * (1 + ((v + b + idx[v]) % 3));
            p += (m[b * 4] * 0.5 + m[b * 4 + 1] * 0.25 + m[b * 4 + 3]) * w;
            q -= m[b * 4 + 2] * w;
        }
        y[v] = p * q;
    }
}

/* Conditional expressions and a branch on values. */
void l_cond(const int *idx, const double *x, double *y)
{
    double t[L_N];
    for (int i = 0; i < L_N; i++)
        t[i] = x[i] * x[(i + 1) % L_N];
    double m = t[idx[0]] > t[idx[1]] ? t[idx[0]] : t[idx[1]];
    if (x[5] > 0)
        m = m * x[5];
    y[0] = m;
    y[1] = t[idx[2]] < 0.5 ? 2.0 * t[idx[2]] : t[idx[2]] * t[3];
    y[2] = m + t[0];
    y[3] = 0.0;
}

/* Not inlined (a loop): writes the caller's local array through a pointer. */
static void fill(int n, const double *x, double *out)
{
    for (int i = 0; i < n; i++)
        out[i] = x[i] * x[(i + 1) % n];
}

void l_call(const int *idx, const double *x, double *y)
{
    double a[L_N];
    double b[L_N];
    for (int i = 0; i < L_N; i++)
        b[i] = x[i];
    fill(L_N, x, a);
    for (int i = 0; i < 4; i++)
        y[i] = a[idx[i]] + b[(i + 2) % L_N] * a[0];
}

/* A scalar parameter with a tangent. */
void l_scalar(const int *idx, const double *x, double s, double *y)
{
    double u = s * s;
    double v = x[idx[0]] * u;
    y[0] = v;
    y[1] = u;
    y[2] = v + x[1];
    y[3] = v * s;
}

/* Local arrays with no initialiser (their tangents start unknown: every lane in range, the
 * first assignment of an element clears the lanes outside its new range): an element
 * assigned twice with different lanes, an array declared in a loop's body, `+=` after the
 * first assignment; beside them arrays with a partial initialiser (zeros after), one in the
 * loop's body whose last element the previous iteration set. */
void l_lazy(const int *idx, const double *x, double *y)
{
    double big[64];
    double z[4] = {x[0]};
    for (int i = 0; i < L_N; i++)
        big[i] = x[i] * x[i];
    big[idx[0]] = x[idx[1]] + 1.0;
    for (int i = 0; i < L_N; i++)
        big[i] += x[(i + 3) % L_N];
    for (int r = 0; r < 2; r++) {
        double t[3];
        double u[3] = {x[r]};
        z[0] += u[1] + u[2] * x[1];
        u[2] = x[r + 1];
        t[0] = big[idx[r]] * x[r] + u[0] * u[2];
        t[1] = sin(x[r + 2]);
        t[2] = t[0] * t[1];
        z[r + 1] += t[2];
    }
    y[0] = big[idx[2]];
    y[1] = z[0] + z[1];
    y[2] = z[2] * big[0];
    y[3] = z[3] + big[idx[3]];
}

/* Elements of the caller's array written from locals whose ranges are empty, in the middle
 * of the lanes (the sparse seeds give x[i] lane i only) or apart from each other: each
 * element's every lane is written once, the first place read's lanes and zeros around them,
 * then the other places' lanes added (the caller fills y's tangent with NaN first). */
void l_rows(const int *idx, const double *x, double *y)
{
    double none = 0.0; /* active, but with no lane unless idx[3] > 8 (never) */
    if (idx[3] > 8)
        none = x[0];
    double mid = sin(x[2]) * x[3];
    double lo = x[0] * x[1];
    double hi = exp(x[5]);
    y[0] = none * 2.0;
    y[1] = mid - 1.0;
    y[2] = none + lo * hi;
    y[3] = mid * hi + lo + x[idx[0]];
}

struct l_pt {
    double x, y;
    double w[4];
};

/* callees with a local struct (their vector kernels with lane ranges), one reading a struct
 * by address, one writing it */
static double l_norm(const struct l_pt *q, int c, double b)
{
    struct l_pt p;
    p.x = q->w[c];
    p.y = b * q->x;
    return sqrt(p.x * p.x + p.y * p.y + 1.0);
}

static void l_shift(struct l_pt *q, double d)
{
    q->x = q->x + d;
    q->w[0] = q->w[0] * d;
    q->w[1] = d * d + sin(d);
}

/* Local structs (every lane of their tangents) among ranged locals: fields read and written,
 * an array field indexed at run time, a copy, a struct literal, structs passed by address to
 * callees, a ranged array declared with no initialiser read into a field and a field read
 * into it. */
void l_struct(const int *idx, const double *x, double *y)
{
    double big[16];
    const int a = idx[0] % 4, b = idx[1] % 4, c = idx[2] % 4;
    struct l_pt q;
    q.x = x[0] * x[1];
    q.y = 0.0;
    for (int i = 0; i < 4; i++)
        q.w[i] = 0.0;
    for (int i = 0; i < L_N; i++)
        big[i] = x[i] * x[i];
    q.w[a] = big[idx[1]] + sin(x[2]);
    q.w[b] += x[3] * q.x;
    struct l_pt r = q;
    r.y = l_norm(&r, c, x[4]);
    struct l_pt t = (struct l_pt){.x = x[5], .w = {x[2], 0.0, cos(x[1]), 1.0}};
    l_shift(&t, x[0]);
    big[idx[2]] = r.y * t.x + q.w[a];
    double s = 0.0;
    for (int i = 0; i < 4; i++)
        s += r.w[i] * t.w[(i + idx[3]) % 4];
    y[0] = s;
    y[1] = big[idx[2]] * r.x;
    y[2] = r.y + t.w[2] * q.w[b];
    y[3] = big[idx[3]];
}
