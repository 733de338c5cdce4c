/*
 * Plain C functions that tests/tools/chainrules-ad/test_ad_programs.c differentiates with
 * chainrules-ad (tests/tools/chainrules-ad/CMakeLists.txt lists which, in which modes) and checks
 * against central differences and the tape. Each exercises a construct of the supported C
 * (docs/source-transformation.md).
 */
#include <math.h>
#include <stddef.h>

#include "programs.h"

/* ---- Arrays in, a scalar out: double f(const double *x, int n) ------------------------- */

/* Rosenbrock's scalar loop: a local recomputed by the adjoint, a compound assignment. */
double p_rosen(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n - 1; i++) {
        double t = x[i + 1] - x[i] * x[i];
        s += 100 * t * t + (1 - x[i]) * (1 - x[i]);
    }
    return s;
}

/* break and continue. */
double p_break(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        if (x[i] > 1.5)
            break;
        s += sin(x[i]) * x[i];
        if (x[i] < -0.5)
            continue;
        s *= 1.1;
    }
    return s;
}

/* An early return from inside a loop. */
double p_return(const double *x, int n)
{
    double p = 1;
    for (int i = 0; i < n; i++) {
        p *= x[i];
        if (p > 3)
            return p * 2;
    }
    return exp(p);
}

/* while and do loops with an integer counter that the adjoint restores. */
double p_while(const double *x, int n)
{
    double s = x[0];
    int k = 0;
    while (k < n) {
        s = s * cos(x[k]) + x[k];
        k += 2;
    }
    do {
        s = s / (1 + x[k - 1] * x[k - 1]);
        k--;
    } while (k > 2);
    return s;
}

static double sq(double v)
{
    return v * v;
}

static void axpy(double a, const double *x, double *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

static double dot(const double *x, const double *y, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * y[i];
    return s;
}

/* Calls of functions of the file (transformed with it), a local array, a call inside an
 * expression. */
double p_calls(const double *x, int n)
{
    double t[8];
    int m = n < 8 ? n : 8;
    for (int i = 0; i < 8; i++)
        t[i] = 0;
    axpy(sq(x[0]), x, t, m);
    double d = dot(t, x, m);
    return d + sq(d) * 0.01;
}

/* The ternary operator, % on integers, math functions with two arguments. */
double p_ternary(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        double v = x[i] > 0 ? log(1 + x[i]) : x[i] * x[i];
        s += i % 2 ? v : -v;
    }
    double m = s;
    m = fmax(m, x[1]);
    return m * pow(fabs(x[2]) + 1, 1.5) + atan2(x[0], x[3]) + tanh(x[4]) + hypot(x[1], x[2]);
}

/* Nested loops, a value overwritten many times. */
double p_nested(const double *x, int n)
{
    double acc = 0;
    for (int i = 0; i < n; i++) {
        double r = x[i];
        for (int j = 0; j < 3; j++) {
            r = r * r * 0.5 + sqrt(1 + r * r);
            if (r > 4)
                r = r / 2;
        }
        acc += r;
    }
    return acc;
}

/* switch with fall-through and a default in the middle. */
double p_switch(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        switch (i % 4) {
        case 0:
            s += x[i] * x[i];
            break;
        default:
            s += exp(x[i] / 4);
            /* fall through */
        case 2:
            s -= sin(x[i]);
            break;
        case 3:
            s *= 1 + x[i] * 0.1;
        }
    }
    return s;
}

/* Recursion. */
static double horner(const double *c, int k, double t)
{
    if (k == 0)
        return c[0];
    return c[k] + t * horner(c, k - 1, t);
}

double p_recursion(const double *x, int n)
{
    return horner(x, n - 2, x[n - 1]);
}

/* A local array with an initialiser, integer arithmetic that only indexes, casts. */
double p_local_array(const double *x, int n)
{
    double w[4] = {0.5, -1.0, 2.0, 0.25};
    double acc[4] = {0};
    for (int i = 0; i < n; i++)
        acc[(i * 3 + 1) % 4] += w[i % 4] * x[i] * x[(i + 1) % n];
    double s = 0;
    for (int j = 0; j < 4; j++)
        s += (double)(j + 1) * acc[j] * acc[j];
    return s + (float)x[0];
}

/* An index computed into a local from the counters of two loops (the adjoint recomputes
 * the local, so it must restore both counters), and const locals. */
double p_index_local(const double *x, int n)
{
    const double half = 0.5;
    const double w[2] = {1.0, -2.0};
    double s = 0.0;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < n / 2; i++) {
            int j = 2 * i + r;
            s += w[r] * half * x[j] * x[j] * x[(j + 1) % n];
        }
    return s;
}

/* A callee (split in a forward and an adjoint function) whose adjoint reads its own local
 * array, and integer counters stepped in nested loops (undone by their inverses). */
static double smooth_energy(const double *x, int n, int start)
{
    double work[16];
    int k = start;
    for (int i = 0; i < n && i < 16; i++) {
        work[i] = sin(x[k % n]);
        k++;
        if (i % 3 == 0)
            k++;
    }
    double e = 0.0;
    for (int i = 0; i < n && i < 16; i++)
        e += work[i] * work[(i + 1) % n] * x[i];
    return e;
}

double p_callee_locals(const double *x, int n)
{
    double s = 0.0;
    for (int r = 0; r < 2; r++)
        s += smooth_energy(x, n, r) * (r + 1);
    return s;
}

/* A straight-line static helper with pointer parameters (inlined by the tool: its pointers
 * become the caller's local array and scalar) and local arrays indexed only by constants
 * (replaced by scalars), in a loop whose values change every iteration. */
static void pair_rot(const double *in, double *out, double *norm, double c)
{
    double u[2];
    u[0] = c * in[0] - sin(in[1]);
    u[1] = in[0] * in[1] + c;
    out[0] = u[0] * u[1];
    out[1] = u[1] - exp(0.1 * u[0]);
    *norm = out[0] * out[0] + out[1] * out[1];
}

double p_inline_helper(const double *x, int n)
{
    double s = 0.0;
    for (int i = 0; i + 1 < n; i++) {
        const double in[2] = {x[i], x[i + 1]};
        double out[2], nrm;
        pair_rot(in, out, &nrm, 0.5 + 0.1 * i);
        s += nrm * out[1] - out[0];
    }
    return s;
}

/* Calls of the file's functions in the branches of ?: (lowered to if/else). */
double p_ternary_calls(const double *x, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += x[i] > 0.7 ? sq(x[i]) * 2 : sq(sin(x[i])) + dot(x, x, i);
    return s;
}

/* Counted loops whose trip counts the adjoint computes again from their bounds: <=, a
 * step of 2, counting down by 3, an inner bound from the outer counter, an empty loop. */
double p_bounds(const double *x, int n)
{
    double s = 0.0;
    for (int i = 1; i <= n - 1; i += 2)
        s += x[i] * x[i - 1];
    for (int j = n - 1; j > 0; j -= 3)
        s += sin(x[j]) * s;
    for (int p = 0; p < n; p++)
        for (int r = p + 1; r < n; r++)
            s += x[p] * x[r] * 0.1;
    for (int k = 5; k < 2; k++)
        s *= x[k];
    for (int q = n; q >= 2; q--)
        s += cos(x[q - 1]) * x[q - 2];
    return s;
}

/* Costly assignments in a loop: the forward sweep stores their partials; the first
 * overwrites t, whose old value the adjoint of u's update reads (kept with the partials). */
double p_stored_partials(const double *x, int n)
{
    double t = 0.1, u = 0;
    for (int i = 0; i < n; i++) {
        u = u + t * x[i];
        t = t + x[i] * exp(sin(t));
        double c = sqrt(1 + t * t) * cos(x[(i + 1) % n]);
        t = 0.5 * t + tanh(c);
    }
    return t + u;
}

/* A last loop of sums whose tail's adjoint reads only values the loop does not write: the
 * loop and its adjoint run as one pass. */
double p_fused_tail(const double *x, int n)
{
    double s = 0, q = 0;
    double c = x[0] * x[1];
    for (int i = 0; i < n; i++) {
        double d = x[i] - 0.3 * i;
        s += d * d * c;
        q = q - x[i] * d * 0.5;
    }
    double m = s / n;
    return 3 * m - q * n;
}

/* The same loop with a tail whose adjoint reads the loop's sum: not fused. */
double p_unfused_tail(const double *x, int n)
{
    double s = 0.5;
    for (int i = 0; i < n; i++) {
        double d = x[i] - 0.3 * i;
        s += d * d;
    }
    return log(s) * x[2];
}

/* A local array written whole by a loop, then updated by a triangular loop and read by a
 * sum, in each iteration of an outer loop, after an early return: its updates are not
 * stored (the whole write undoes them). */
double p_whole_array(const double *x, int n)
{
    double a[8], b[8];
    if (n < 2 || n > 8)
        return 0;
    double s = 0;
    for (int k = 0; k < 3; k++) {
        for (int p = 0; p < n; p++) {
            b[p] = x[p] - 0.1 * k;
            a[p] = (1 + 0.2 * k) * b[p];
        }
        for (int p = 0; p < n; p++)
            for (int r = p + 1; r < n; r++)
                a[r] += x[(p + r + k) % n] * b[p];
        double q = 0;
        for (int p = 0; p < n; p++)
            q += a[p] * a[p];
        s += log(1 + q);
    }
    return s;
}

/* A loop writing all but the last element, which is read before it and overwritten after
 * it in each iteration: the last element's old value is stored. */
double p_part_array(const double *x, int n)
{
    double a[8] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    double s = 0;
    for (int k = 0; k < 3; k++) {
        s += a[n - 1] * x[0] + a[0] * a[0];
        for (int p = 0; p < n - 1; p++)
            a[p] = x[p] * (k + 1);
        a[n - 1] = x[n - 1] * x[1] * (k + 2);
    }
    return s + a[n - 1];
}

/* A whole write followed by a break: no update is left unstored in the loop's body. */
double p_whole_break(const double *x, int n)
{
    double a[8];
    double s = 0;
    for (int k = 0; k < 4; k++) {
        for (int p = 0; p < n; p++)
            a[p] = x[p] * (k + 1);
        if (s > 2.5)
            break;
        for (int p = 0; p < n; p++)
            a[p] = a[p] * a[p] + s;
        for (int p = 0; p < n; p++)
            s += 0.1 * a[p];
    }
    return s;
}

/* Forms --reverse-set accepts (f_rev_set, test_ad_programs.c): one element read twice by one
 * statement, an index counted downwards (n - 1 - i) and by a stride (2 i + 1), elements at
 * distinct constant indices outside loops. */
double p_set_square(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i] + sin(x[i]) * (i + 1);
    return s;
}

double p_set_mirror(const double *x, int n)
{
    double s = 1;
    for (int i = 0; i < n; i++)
        s = s * 0.9 + x[n - 1 - i] * cos(x[n - 1 - i]) * (i + 1);
    return s;
}

double p_set_stride(const double *x, int n)
{
    double s = 1;
    for (int i = n / 2 - 1; i >= 0; i--)
        s = s * (1 + 0.1 * exp(0.3 * x[2 * i + 1])) + 0.01 * i;
    return s;
}

double p_set_consts(const double *x, int n)
{
    double a = x[0] * x[0] - x[1];
    double b = exp(x[2]) * a + x[4];
    double c = b * b / (1 + x[3] * x[3]);
    return a * c + n;
}

/* Statement macros as numerical C writes them: a for statement written by a macro (its
 * header in the macro's definition, in a macro argument, with parts left out), nested
 * macros (a for header built by a macro calling another), do { } while (0) with a local, an
 * if, a while and a switch from macros. The tool reads a for statement's parts where they
 * are spelled, not at the macro's call. */
#define SUM(acc, a, n)               \
    for (int i_ = 0; i_ < (n); i_++) \
    acc += (a)[i_]
#define SQ(v) ((v) * (v))
#define SUMSQ(acc, a, n)             \
    for (int j_ = 0; j_ < (n); j_++) \
    acc += SQ((a)[j_])
#define FOR_RANGE(i, lo, hi) for (i = (lo); i < (hi); i++)
#define UNTIL(i, n)          for (; (i) < (n); (i)++)
#define STEP2(i, n)          for (i = 0; (i) < (n);)
#define SCALE_BY(v, s)           \
    do {                         \
        double t_s = (s);        \
        (v) = (v)*t_s + SQ(t_s); \
    } while (0)
#define CLAMP_BELOW(v, lo) \
    if ((v) < (lo))        \
    (v) = (lo)
#define SWAP_IF_GT(a, b)      \
    do {                      \
        if ((a) > (b)) {      \
            double t_w = (a); \
            (a) = (b);        \
            (b) = t_w;        \
        }                     \
    } while (0)
#define REPEAT(stmt)          stmt
#define LOOP(init, cond, inc) for (init; cond; inc)
#define FOREACH(i, n)         LOOP(int i = 0, i < (n), i++)
#define COUNTDOWN(k, acc, a) \
    while ((k) > 0) {        \
        (k)--;               \
        acc += sin((a)[k]);  \
    }
#define PICK(k, v, a)  \
    switch ((k) % 3) { \
    case 0:            \
        v += (a)[0];   \
        break;         \
    case 1:            \
        v *= (a)[1];   \
        break;         \
    default:           \
        v -= (a)[2];   \
    }

double p_macro_for(const double *x, int n)
{
    double s = 0, q = 0;
    SUM(s, x, n);
    SUMSQ(q, x, n);
    int i;
    FOR_RANGE(i, 1, n) s += x[i] * x[i - 1];
    i = 2;
    UNTIL(i, n) q += cos(x[i]);
    STEP2(i, n)
    {
        q += x[i] * s;
        i += 2;
    }
    REPEAT(for (int k = 0; k < n; k++) s += SQ(x[k] - x[0]);)
    return s * q;
}

double p_macro_stmts(const double *x, int n)
{
    double a = x[0], b = x[1], v = 0;
    SCALE_BY(a, x[2]);
    SWAP_IF_GT(a, b);
    CLAMP_BELOW(b, -1.5);
    int k = n;
    COUNTDOWN(k, v, x);
    FOREACH(m, n) v = v * 0.75 + x[m] * a;
    LOOP(int j = n - 1, j >= 1, j -= 2) v += sin(x[j] * b);
    for (int j = 0; j < n; j++) {
        PICK(j, v, x);
    }
    return a * b + v;
}

/* Initialiser lists in a loop's body: the elements a list leaves out, and every element of
 * `= {}`, are zero each time the declaration runs, whatever the last iteration left there. */
double p_loop_inits(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        double a[3] = {x[i], x[i] * x[i]};
        double b[2] = {};
        s += a[2] * x[0] + b[1];
        a[2] = x[i] * x[(i + 1) % n];
        b[1] = sin(x[i]);
        s += a[0] * a[2] + a[1] * b[1];
    }
    return s;
}

/* ---- Local structs holding real data ---------------------------------------------------- */

struct p_pt {
    double x, y;
    double w[3];
    int k;
};

struct p_seg {
    struct p_pt a;
    double len;
};

/* A local struct's fields read and written, an array field indexed at run time, a struct
 * copied (field by field), a struct literal. */
double p_struct_local(const double *x, int n)
{
    struct p_pt q;
    q.x = x[0];
    q.y = x[1] * x[2];
    q.k = n;
    for (int j = 0; j < 3; j++)
        q.w[j] = sin(x[j + 3]) + q.x * j;
    struct p_pt r = q;
    r.x = r.x * q.y + cos(r.w[1]);
    struct p_pt t = (struct p_pt){x[1] * x[0], exp(0.3 * x[4]), {x[5], 0.5, x[2]}, 1};
    double s = 0;
    for (int i = 0; i < n; i++) {
        int k = (2 * i + r.k) % 3;
        s += r.w[k] * x[i] + t.w[(i + 1) % 3] * q.x;
        r.w[k] = r.w[k] * 0.5 + t.y * x[i];
        q = r;
    }
    return s + r.x * t.x + q.y + (struct p_pt){.y = x[3] * x[3]}.y;
}

/* A static callee with a local struct (its vector kernel), a nested struct and a local array
 * of structs indexed at run time. */
static double p_seg_len(double a, double b)
{
    struct p_seg g;
    g.a.x = a;
    g.a.w[1] = b * b;
    g.len = sqrt(g.a.x * g.a.x + g.a.w[1] + 1);
    return g.len;
}

double p_struct_nested(const double *x, int n)
{
    struct p_seg sg[2];
    for (int i = 0; i < 2; i++) {
        sg[i].a.x = x[i];
        sg[i].a.y = x[i + 2] * x[i];
        sg[i].len = 0;
        for (int j = 0; j < 3; j++)
            sg[i].a.w[j] = x[(i + j) % n];
    }
    double s = 0;
    for (int i = 0; i < n; i++) {
        int m = i % 2;
        sg[m].len += p_seg_len(sg[m].a.x, x[i]) * sg[1 - m].a.w[i % 3];
        sg[m].a.w[(i + 1) % 3] = sg[m].a.y * x[i];
        s += sg[m].len * 0.1;
    }
    return s + sg[0].a.y * sg[1].len;
}

/* Local structs passed by address to callees that read them and write them (f_fwdv: the
 * struct's tangents, one struct per direction, are the callee's block of structs). */
static double p_pt_len(const struct p_pt *p)
{
    return sqrt(p->x * p->x + p->y * p->y + 1) + p->w[p->k % 3] * p->w[0];
}

static void p_pt_move(struct p_pt *p, double d)
{
    p->x = p->x + d * p->y;
    for (int j = 0; j < 3; j++)
        p->w[j] = p->w[j] * cos(d) + p->x;
}

double p_struct_calls(const double *x, int n)
{
    struct p_pt q;
    q.x = x[0];
    q.y = x[1] * x[2];
    q.k = n;
    for (int j = 0; j < 3; j++)
        q.w[j] = x[j + 3];
    struct p_pt pts[2];
    for (int i = 0; i < 2; i++) {
        pts[i].x = q.x * (i + 1);
        pts[i].y = i ? exp(0.2 * x[5]) : q.y;
        pts[i].k = i;
        for (int j = 0; j < 3; j++)
            pts[i].w[j] = q.w[(i + j) % 3];
    }
    double s = 0;
    for (int i = 0; i < n; i++) {
        p_pt_move(&pts[i % 2], x[i]);
        s += p_pt_len(&pts[(i + 1) % 2]) * x[i];
    }
    p_pt_move(&q, s * 0.01);
    return s + p_pt_len(&q) + p_pt_len(pts);
}

/* ---- Other signatures ------------------------------------------------------------------ */

/* Scalars in, a scalar out. */
double p_scalar(double a, double b, int k)
{
    double y = sin(a) * exp(b);
    for (int i = 0; i < k; i++)
        y = y > 0 ? y * y * 0.5 + a : -y + b;
    return y / (1 + a * a);
}

/* An output array (its shadow holds its cotangent on entry) and a scalar parameter. */
void p_outputs(const double *x, double scale, double *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = scale * x[i] * x[(i + 1) % n];
}

/* An array updated in place: three explicit Euler steps of a small ODE. */
void p_inplace(double *u, int n, double h)
{
    for (int step = 0; step < 3; step++)
        for (int i = 0; i < n; i++)
            u[i] += h * (u[(i + 1) % n] - u[i] * u[i]);
}

/* A struct with real and array fields, through a pointer. */
double p_struct(const struct p_model *m, const double *x, int n)
{
    double s = m->bias;
    for (int i = 0; i < n; i++)
        s += m->w[i % 3] * tanh(x[i] * m->scale);
    return s * s;
}

/* float. */
float p_float(const float *x, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += sinf(x[i]) * x[i] + expf(0.5f * x[i]);
    return s;
}

/* ---- Long loops: the time loop of the checkpointing test -------------------------------- */

/* A nonlinear oscillator integrated with `steps` explicit steps; the state is (u[0], u[1]).
 * p_timeloop_ck is the same loop with binomial checkpointing (20 snapshots). */
double p_timeloop(const double *p, double *u, long steps)
{
    double dt = 1e-4;
    for (long k = 0; k < steps; k++) {
        double a = -p[0] * sin(u[0]) - p[1] * u[1];
        double v = u[1] + dt * a;
        u[0] = u[0] + dt * v;
        u[1] = v;
    }
    return u[0] * u[0] + u[1];
}

double p_timeloop_ck(const double *p, double *u, long steps)
{
    double dt = 1e-4;
#pragma chainrules checkpoint(20) sizes(u : 2)
    for (long k = 0; k < steps; k++) {
        double a = -p[0] * sin(u[0]) - p[1] * u[1];
        double v = u[1] + dt * a;
        u[0] = u[0] + dt * v;
        u[1] = v;
    }
    return u[0] * u[0] + u[1];
}

/* A Jacobian entry of more than 16 lanes through a call (p_wide, 20 inputs): the callee
 * runs once per block of 16 lanes, and the arrays it updates in place (one of them inactive)
 * are restored between the blocks. */
static void wide_step(const double *x, double *acc, int *count, int n)
{
    for (int i = 0; i < n; i++) {
        acc[i % 3] += sin(x[i]) * acc[(i + 1) % 3];
        count[0] += 1;
    }
}
double p_wide(const double *x, int n)
{
    double acc[3] = {1.0, 0.5, 0.25};
    int count[1] = {0};
    wide_step(x, acc, count, n);
    return acc[0] * acc[1] + acc[2] * (double)count[0];
}
