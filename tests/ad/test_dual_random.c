/*
 * Random-program differential test of forward mode (dual.h). A seeded generator builds
 * straight-line programs over 1 to 40 inputs (so Jacobians cross the chunks of
 * CR_DUAL_MAX_CHUNK directions) and 1 to 5 outputs, each instruction one of: the named dual
 * operations (with constant operands, so duals of no direction meet duals of several),
 * cr_dual_call of scalar-table rows of one to three arguments and one or two results (with
 * and without an arena, with and without an engine's configuration), built-in functions that
 * are not rows and go through their frule once per direction (hypot of 3 to 64 arguments,
 * evalpoly, gamma_inc), and user functions through an engine's configuration (a user frule,
 * frule_via_ad of overlays of one and two results and of a user rrule with a tuple result,
 * zero-adjoint and non-differentiable functions).
 *
 * For each program: the values against a plain-double interpreter; cr_dual_jacobian against
 * fourth-order central differences of it; cr_dual_jvp against J v and cr_dual_derivative
 * against J; the program run on duals seeded by hand with 1 to 8 directions (some inputs with
 * fewer, some with none) against J times the seeds, and every register's unused tangents
 * zero; a forward tape's cr_tape_jacobian and cr_tape_jvp of the same program against the
 * duals; and error paths chosen at random (a non-finite direction, a function that fails in
 * some chunk, a failing rule, result-count mismatches, a NULL arena or scratch where one is
 * needed, no frule, more than 64 arguments), each with its exact status and message.
 *
 * Replay a failure: CR_RANDOM_SEED=<seed printed> build/tests/test_dual_random
 * (CR_RANDOM_DUMP=1 prints the program). Run longer: CR_RANDOM_PROGRAMS=<n>.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_polar.h" /* polar(x, y) = (r, theta): a user rrule with a tuple result */
#include "test_random.h"
#include "test_util.h"

#define MAX_IN    40
#define MAX_OUT   5
#define MAX_HYPOT 64 /* cr_dual_call's most arguments */
#define BOUND     6.0
#define XMAX      2.0

/* ---- User functions ------------------------------------------------------------------------ */

/* ov(a, b) = a sin(b) / (1 + a^2) + cos(b): an overlay, no rule (frule_via_ad) */
static double ov_c(double a, double b)
{
    return a * sin(b) / (1 + a * a) + cos(b);
}

static cr_status ov_impl(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var q = cr_add(t, cr_const(1.0), cr_mul(t, x[0], x[0]));
    y[0] = cr_add(t, cr_div(t, cr_mul(t, x[0], cr_sin(t, x[1])), q), cr_cos(t, x[1]));
    return cr_tape_status(t);
}
static const cr_function ov_fn = {.name = "ov", .arity = 2};

/* ov2(a, b) = (a b / (1 + b^2), sin(a) + b / 2): an overlay of two results */
static void ov2_c(double a, double b, double *y)
{
    y[0] = a * b / (1 + b * b);
    y[1] = sin(a) + 0.5 * b;
}

static cr_status ov2_impl(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_div(t, cr_mul(t, x[0], x[1]), cr_add(t, cr_const(1.0), cr_mul(t, x[1], x[1])));
    y[1] = cr_add(t, cr_sin(t, x[0]), cr_mul(t, cr_const(0.5), x[1]));
    return cr_tape_status(t);
}
static const cr_function ov2_fn = {.name = "ov2", .arity = 2};

/* zf(a, b) = sin(a) b + 0.3, zero-adjoint (cr_engine_zero_adjoint) */
static double zf_c(double a, double b)
{
    return sin(a) * b + 0.3;
}

static cr_status zf_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                           cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(zf_c(args[0].u.f64, args[1].u.f64));
    return CR_OK;
}
static const cr_function zf_fn = {.name = "zf", .arity = 2, .primal = zf_primal};

/* nd(a) = a^2 / (1 + a^2), non-differentiable (cr_registry_non_differentiable) */
static double nd_c(double a)
{
    return a * a / (1 + a * a);
}

static cr_status nd_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                           cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(nd_c(args[0].u.f64));
    return CR_OK;
}
static const cr_function nd_fn = {.name = "nd", .arity = 1, .primal = nd_primal};

/* bad(a): an frule that fails (the error paths) */
static cr_status bad_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(args[0].u.f64);
    return CR_OK;
}
static const cr_function bad_fn = {.name = "bad", .arity = 1, .primal = bad_primal};

static cr_status bad_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                           const cr_value *fv, const cr_value *args, size_t nargs, cr_value *y,
                           cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)dargs;
    (void)fv;
    (void)nargs;
    (void)y;
    (void)dy;
    (void)udata;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "bad: fails on purpose at %g",
                        args[0].u.f64);
}

static const cr_value g_uf = {.kind = CR_KIND_FUNC, .u.func = {&uf_fn, NULL}};
static const cr_value g_ov = {.kind = CR_KIND_FUNC, .u.func = {&ov_fn, NULL}};
static const cr_value g_ov2 = {.kind = CR_KIND_FUNC, .u.func = {&ov2_fn, NULL}};
static const cr_value g_polar = {.kind = CR_KIND_FUNC, .u.func = {&polar_fn, NULL}};
static const cr_value g_zf = {.kind = CR_KIND_FUNC, .u.func = {&zf_fn, NULL}};
static const cr_value g_nd = {.kind = CR_KIND_FUNC, .u.func = {&nd_fn, NULL}};
static const cr_value g_bad = {.kind = CR_KIND_FUNC, .u.func = {&bad_fn, NULL}};

/* ---- Rows ------------------------------------------------------------------------------------ */

/* How an argument of a row call is made from its register: as it is, 1.5 + a^2, 0.5 + a^2,
 * 1 + a^2, tanh(a), tanh(a) / 2 (keeping every row where it is smooth). */
enum { T_ID, T_SQ15, T_SQ05, T_SQ1, T_TANH, T_HTANH };

typedef struct rowdef {
    const char *name;
    const cr_value *f;
    uint8_t nin, nout;
    uint8_t tr[3];
    bool small; /* the argument's bound must be at most 3 (sinh, cosh, expm1) */
} rowdef;

enum {
    R_TANH,
    R_ATAN,
    R_LOGISTIC,
    R_ERF,
    R_ASINH,
    R_SINH,
    R_COSH,
    R_EXPM1,
    R_LOG1P,
    R_CBRT,
    R_INV,
    R_ACOS,
    R_ATANH,
    R_LOG1PEXP,
    R_SQUARE,
    R_SIN,
    R_HYPOT,
    R_POW,
    R_ATAN2,
    R_LOGADDEXP,
    R_MUL,
    R_MULADD,
    R_FMA,
    R_SINCOS,
    R_SINCOSPI,
    R_COUNT
};

static const rowdef k_rows[R_COUNT] = {
    {"tanh", &cr_fn_tanh, 1, 1, {T_ID}, false},
    {"atan", &cr_fn_atan, 1, 1, {T_ID}, false},
    {"logistic", &cr_fn_logistic, 1, 1, {T_ID}, false},
    {"erf", &cr_fn_erf, 1, 1, {T_ID}, false},
    {"asinh", &cr_fn_asinh, 1, 1, {T_ID}, false},
    {"sinh", &cr_fn_sinh, 1, 1, {T_ID}, true},
    {"cosh", &cr_fn_cosh, 1, 1, {T_ID}, true},
    {"expm1", &cr_fn_expm1, 1, 1, {T_ID}, true},
    {"log1p", &cr_fn_log1p, 1, 1, {T_SQ05}, false},
    {"cbrt", &cr_fn_cbrt, 1, 1, {T_SQ15}, false},
    {"inv", &cr_fn_inv, 1, 1, {T_SQ15}, false},
    {"acos", &cr_fn_acos, 1, 1, {T_HTANH}, false},
    {"atanh", &cr_fn_atanh, 1, 1, {T_HTANH}, false},
    {"log1pexp", &cr_fn_log1pexp, 1, 1, {T_ID}, false},
    {"square", &cr_fn_square, 1, 1, {T_ID}, false},
    {"sin", &cr_fn_sin, 1, 1, {T_ID}, false},
    {"hypot", &cr_fn_hypot, 2, 1, {T_ID, T_SQ05}, false},
    {"pow", &cr_fn_pow, 2, 1, {T_SQ15, T_TANH}, false},
    {"atan2", &cr_fn_atan2, 2, 1, {T_ID, T_SQ1}, false},
    {"logaddexp", &cr_fn_logaddexp, 2, 1, {T_ID, T_ID}, false},
    {"mul", &cr_fn_mul, 2, 1, {T_ID, T_ID}, false},
    {"muladd", &cr_fn_muladd, 3, 1, {T_ID, T_ID, T_ID}, false},
    {"fma", &cr_fn_fma, 3, 1, {T_ID, T_ID, T_ID}, false},
    {"sincos", &cr_fn_sincos, 1, 2, {T_ID}, false},
    {"sincospi", &cr_fn_sincospi, 1, 2, {T_ID}, false},
};

/* The row's result(s) in plain C. */
static void row_c(int r, const double *x, double *y)
{
    const double pi = 3.14159265358979323846;
    switch (r) {
    case R_TANH:
        y[0] = tanh(x[0]);
        break;
    case R_ATAN:
        y[0] = atan(x[0]);
        break;
    case R_LOGISTIC:
        y[0] = 1 / (1 + exp(-x[0]));
        break;
    case R_ERF:
        y[0] = erf(x[0]);
        break;
    case R_ASINH:
        y[0] = asinh(x[0]);
        break;
    case R_SINH:
        y[0] = sinh(x[0]);
        break;
    case R_COSH:
        y[0] = cosh(x[0]);
        break;
    case R_EXPM1:
        y[0] = expm1(x[0]);
        break;
    case R_LOG1P:
        y[0] = log1p(x[0]);
        break;
    case R_CBRT:
        y[0] = cbrt(x[0]);
        break;
    case R_INV:
        y[0] = 1 / x[0];
        break;
    case R_ACOS:
        y[0] = acos(x[0]);
        break;
    case R_ATANH:
        y[0] = atanh(x[0]);
        break;
    case R_LOG1PEXP:
        y[0] = log1p(exp(x[0]));
        break;
    case R_SQUARE:
        y[0] = x[0] * x[0];
        break;
    case R_SIN:
        y[0] = sin(x[0]);
        break;
    case R_HYPOT:
        y[0] = hypot(x[0], x[1]);
        break;
    case R_POW:
        y[0] = pow(x[0], x[1]);
        break;
    case R_ATAN2:
        y[0] = atan2(x[0], x[1]);
        break;
    case R_LOGADDEXP:
        y[0] = fmax(x[0], x[1]) + log1p(exp(-fabs(x[0] - x[1])));
        break;
    case R_MUL:
        y[0] = x[0] * x[1];
        break;
    case R_MULADD:
    case R_FMA:
        y[0] = x[0] * x[1] + x[2];
        break;
    case R_SINCOS:
        y[0] = sin(x[0]);
        y[1] = cos(x[0]);
        break;
    default: /* R_SINCOSPI */
        y[0] = sin(pi * x[0]);
        y[1] = cos(pi * x[0]);
        break;
    }
}

/* The bound of a row's results given its arguments' bounds (after the transforms). */
static double row_bound(int r, const double *B)
{
    switch (r) {
    case R_TANH:
    case R_LOGISTIC:
    case R_ERF:
    case R_SIN:
    case R_SINCOS:
    case R_SINCOSPI:
        return 1;
    case R_ATAN:
    case R_ATAN2:
        return 1.6;
    case R_ASINH:
        return asinh(B[0]);
    case R_SINH:
    case R_COSH:
    case R_EXPM1:
        return exp(B[0]);
    case R_LOG1P:
        return log1p(B[0]);
    case R_CBRT:
        return cbrt(B[0]);
    case R_INV:
        return 1 / 1.5;
    case R_ACOS:
        return 3.15;
    case R_ATANH:
        return 0.55;
    case R_LOG1PEXP:
        return B[0] + 0.7;
    case R_SQUARE:
        return B[0] * B[0];
    case R_HYPOT:
        return hypot(B[0], B[1]);
    case R_POW:
        return B[0];
    case R_LOGADDEXP:
        return fmax(B[0], B[1]) + 0.7;
    case R_MUL:
        return B[0] * B[1];
    default: /* muladd, fma */
        return B[0] * B[1] + B[2];
    }
}

/* ---- Programs ------------------------------------------------------------------------------ */

enum op {
    O_ADD,    /* a + b */
    O_SUB,    /* a - b */
    O_MUL,    /* a * b */
    O_DIVS,   /* a / (1.5 + b b) */
    O_NEG,    /* -a */
    O_ADDC,   /* a + k */
    O_CSUB,   /* k - a */
    O_MULC,   /* k * a */
    O_DIVC,   /* a / k */
    O_CDIV,   /* k / (1.5 + a a) */
    O_CONST,  /* k in a register */
    O_SIN,    /* the named operations */
    O_COS,    /**/
    O_EXP,    /* a bounded by 3 */
    O_LOG1,   /* log(1 + a a) */
    O_SQRT1,  /* sqrt(1 + a a) */
    O_ASIN,   /* asin(tanh(a) / 2) */
    O_ROW,    /* a row through cr_dual_call (in->row; in->mode: configuration and arena) */
    O_HYPOTN, /* hypot(1, r...) of 3 to 64 arguments: the frule */
    O_EVPOLY, /* evalpoly(tanh a, k, b, 0.5, c): the frule */
    O_GINC,   /* gamma_inc(k, 0.5 + a a): the frule, two results */
    O_UF,     /* uf(a, b): a user frule */
    O_OV,     /* ov(a, b): frule_via_ad of an overlay */
    O_OV2,    /* ov2(a, b): frule_via_ad of an overlay of two results */
    O_POLAR,  /* polar(a, 0.5 + b b): frule_via_ad of a user rrule with a tuple result */
    O_ZF,     /* zf(a, b): zero-adjoint */
    O_ND,     /* nd(a): non-differentiable */
    O_COUNT
};

static const char *const k_op_names[O_COUNT] = {
    "add",    "sub",      "mul",       "divs", "neg", "addc", "csub",  "mulc", "divc",
    "cdiv",   "const",    "sin",       "cos",  "exp", "log1", "sqrt1", "asin", "row",
    "hypotn", "evalpoly", "gamma_inc", "uf",   "ov",  "ov2",  "polar", "zf",   "nd"};

/* How a row is called: configuration NULL or the engine's, arena NULL or not. */
enum { M_NULL_NULL, M_NULL_ARENA, M_ENG_ARENA, M_ENG_NULL, M_COUNT };
static const char *const k_mode_names[M_COUNT] = {"cfg=NULL arena=NULL", "cfg=NULL arena",
                                                  "cfg=engine arena", "cfg=engine arena=NULL"};

typedef struct ins {
    uint8_t op, row, mode, nres;
    uint32_t a, b, c, dst;
    uint32_t nargs, off; /* HYPOTN: its registers are pool[off..off + nargs) */
    double k;
} ins;

typedef struct prog {
    uint64_t seed;
    size_t n, m; /* inputs, outputs */
    size_t nreg; /* registers (inputs first) */
    size_t nins; /* instructions */
    size_t nfrz; /* results of zero-adjoint and non-differentiable calls */
    ins *code;
    uint32_t *pool;
    uint32_t out[MAX_OUT];
    double *pr;  /* plain registers */
    double *frz; /* the frozen results, in order */
    cr_dual *dr; /* dual registers */
    cr_var *vr;  /* tape registers */
} prog;

typedef struct gen {
    uint64_t s;
    prog *p;
    double *bnd;
    size_t cap, pcap, unused; /* unused: the next input not yet read */
} gen;

static uint32_t pick(gen *g)
{
    prog *p = g->p;
    if (g->unused < p->n && rnd_unit(&g->s) < 0.4)
        return (uint32_t)g->unused++;
    size_t n = p->nreg;
    if (n > 8 && rnd_unit(&g->s) < 0.5)
        return (uint32_t)(n - 1 - rnd_below(&g->s, 8));
    return (uint32_t)rnd_below(&g->s, n);
}

static double pick_k(gen *g)
{
    double r = rnd_unit(&g->s);
    if (r < 0.1)
        return 1.0;
    if (r < 0.2)
        return -1.0;
    double k = rnd_range(&g->s, 0.5, 2.0);
    return rnd_unit(&g->s) < 0.5 ? -k : k;
}

static ins *emit(gen *g, unsigned op, uint32_t a, uint32_t b, uint32_t c, double bnd, unsigned nres)
{
    prog *p = g->p;
    if (p->nins == g->cap) {
        g->cap *= 2;
        p->code = realloc(p->code, g->cap * sizeof *p->code);
        assert_non_null(p->code);
    }
    g->bnd = realloc(g->bnd, (p->nreg + nres) * sizeof *g->bnd);
    assert_non_null(g->bnd);
    ins *in = &p->code[p->nins++];
    memset(in, 0, sizeof *in);
    in->op = (uint8_t)op;
    in->a = a;
    in->b = b;
    in->c = c;
    in->dst = (uint32_t)p->nreg;
    in->nres = (uint8_t)nres;
    for (unsigned i = 0; i < nres; i++)
        g->bnd[p->nreg++] = bnd;
    if (op == O_ZF || op == O_ND)
        p->nfrz++;
    return in;
}

/* Squash register a into [-1.6, 1.6] with a bounded row. */
static void squash(gen *g, uint32_t a)
{
    static const uint8_t rows[] = {R_TANH, R_ATAN, R_LOGISTIC, R_ERF, R_SIN};
    uint8_t r = rows[rnd_below(&g->s, sizeof rows)];
    ins *in = emit(g, O_ROW, a, a, a, 1.6, 1);
    in->row = r;
    in->mode = (uint8_t)rnd_below(&g->s, M_COUNT);
}

static double tr_bound(int tr, double A)
{
    switch (tr) {
    case T_SQ15:
        return 1.5 + A * A;
    case T_SQ05:
        return 0.5 + A * A;
    case T_SQ1:
        return 1 + A * A;
    case T_TANH:
        return 1;
    case T_HTANH:
        return 0.5;
    default:
        return A;
    }
}

static void gen_one(gen *g)
{
    prog *p = g->p;
    uint32_t a = pick(g), b = pick(g), c = pick(g);
    double A = g->bnd[a], B = g->bnd[b], C = g->bnd[c];
    unsigned op;
    int row = 0;
    for (;;) {
        op = (unsigned)rnd_below(&g->s, O_COUNT);
        if (op == O_ROW || rnd_unit(&g->s) < 0.3) { /* rows are a third of the calls */
            op = O_ROW;
            row = (int)rnd_below(&g->s, R_COUNT);
            if (k_rows[row].small && A > 3)
                continue;
        }
        if (op == O_EXP && A > 3)
            continue;
        if (op == O_CONST && rnd_unit(&g->s) < 0.5)
            continue;
        if (op == O_HYPOTN && rnd_unit(&g->s) < 0.5)
            continue;
        break;
    }
    double k = 0, bnd;
    unsigned nres = 1;
    uint32_t nargs = 0, off = 0;
    switch (op) {
    case O_ADD:
    case O_SUB:
        bnd = A + B;
        break;
    case O_MUL:
        bnd = A * B;
        break;
    case O_DIVS:
        bnd = A / 1.5;
        break;
    case O_NEG:
        bnd = A;
        break;
    case O_ADDC:
    case O_CSUB:
        k = pick_k(g);
        bnd = A + fabs(k);
        break;
    case O_MULC:
        k = pick_k(g);
        bnd = A * fabs(k);
        break;
    case O_DIVC:
        k = pick_k(g);
        bnd = A / fabs(k);
        break;
    case O_CDIV:
        k = pick_k(g);
        bnd = fabs(k) / 1.5;
        break;
    case O_CONST:
        k = pick_k(g);
        bnd = fabs(k);
        break;
    case O_SIN:
    case O_COS:
        bnd = 1;
        break;
    case O_EXP:
        bnd = exp(A);
        break;
    case O_LOG1:
        bnd = log1p(A * A);
        break;
    case O_SQRT1:
        bnd = sqrt(1 + A * A);
        break;
    case O_ASIN:
        bnd = 0.53;
        break;
    case O_ROW: {
        const rowdef *d = &k_rows[row];
        double Bs[3], in3[3] = {A, B, C};
        for (int j = 0; j < d->nin; j++)
            Bs[j] = tr_bound(d->tr[j], in3[j]);
        bnd = row_bound(row, Bs);
        nres = d->nout;
        break;
    }
    case O_HYPOTN: {
        double r = rnd_unit(&g->s);
        nargs = r < 0.7   ? 3 + (uint32_t)rnd_below(&g->s, 6)
                : r < 0.9 ? 9 + (uint32_t)rnd_below(&g->s, 40)
                          : 60 + (uint32_t)rnd_below(&g->s, 5);
        double s = 1;
        p->pool = realloc(p->pool, (g->pcap + nargs) * sizeof *p->pool);
        assert_non_null(p->pool);
        off = (uint32_t)g->pcap;
        for (uint32_t j = 1; j < nargs; j++) {
            uint32_t r2 = pick(g);
            p->pool[off + j] = r2;
            s += g->bnd[r2] * g->bnd[r2];
        }
        p->pool[off] = 0; /* the constant 1 */
        g->pcap += nargs;
        bnd = sqrt(s);
        break;
    }
    case O_EVPOLY:
        k = pick_k(g);
        bnd = fabs(k) + B + 0.5 + C;
        break;
    case O_GINC:
        k = rnd_range(&g->s, 0.5, 3.0);
        bnd = 1;
        nres = 2;
        break;
    case O_UF:
        bnd = A * B + 1;
        break;
    case O_OV:
        bnd = 1.5;
        break;
    case O_OV2:
        bnd = fmax(A / 2, 1 + B / 2);
        nres = 2;
        break;
    case O_POLAR:
        bnd = fmax(hypot(A, 0.5 + B * B), 3.2);
        nres = 2;
        break;
    case O_ZF:
        bnd = B + 0.3;
        break;
    default: /* O_ND */
        bnd = 1;
        break;
    }
    if (!(bnd <= BOUND)) { /* squash an operand instead (registers stay within BOUND) */
        if (op == O_HYPOTN)
            g->pcap -= nargs;
        squash(g, a);
        return;
    }
    ins *in = emit(g, op, a, b, c, bnd, nres);
    in->k = k;
    in->row = (uint8_t)row;
    in->nargs = nargs;
    in->off = off;
    in->mode = (uint8_t)rnd_below(&g->s, M_COUNT);
}

/* The registers an instruction reads through a differentiable path (not those of zero-adjoint
 * and non-differentiable calls). */
static void mark_reads(const prog *p, const ins *in, bool *rd)
{
    switch (in->op) {
    case O_CONST:
    case O_ZF:
    case O_ND:
        break;
    case O_HYPOTN:
        for (uint32_t j = 1; j < in->nargs; j++)
            rd[p->pool[in->off + j]] = true;
        break;
    case O_ROW:
        rd[in->a] = true;
        rd[in->b] = rd[in->b] || k_rows[in->row].nin >= 2;
        rd[in->c] = rd[in->c] || k_rows[in->row].nin >= 3;
        break;
    case O_ADD:
    case O_SUB:
    case O_MUL:
    case O_DIVS:
    case O_UF:
    case O_OV:
    case O_OV2:
    case O_POLAR:
        rd[in->a] = rd[in->b] = true;
        break;
    case O_EVPOLY:
        rd[in->a] = rd[in->b] = rd[in->c] = true;
        break;
    default:
        rd[in->a] = true;
        break;
    }
}

/* Fold every register nothing reads (inputs included) into the last one, so that every
 * input reaches output 0 and every column of the Jacobian can be nonzero. */
static void fold(gen *g)
{
    prog *p = g->p;
    bool *rd = calloc(p->nreg, sizeof *rd);
    assert_non_null(rd);
    for (size_t i = 0; i < p->nins; i++)
        mark_reads(p, &p->code[i], rd);
    size_t nreg = p->nreg;
    uint32_t acc = (uint32_t)(nreg - 1);
    for (uint32_t q = 0; q + 1 < nreg; q++) {
        if (rd[q])
            continue;
        static const unsigned ops[] = {O_ADD, O_SUB, O_MUL, O_DIVS};
        unsigned op = ops[rnd_below(&g->s, 4)];
        bool swap = rnd_unit(&g->s) < 0.5;
        uint32_t a = swap ? q : acc, b = swap ? acc : q;
        double A = g->bnd[a], B = g->bnd[b];
        double bnd = op == O_MUL ? A * B : op == O_DIVS ? A / 1.5 : A + B;
        if (!(bnd <= BOUND)) {
            squash(g, acc);
            acc = (uint32_t)(p->nreg - 1);
            a = swap ? q : acc;
            b = swap ? acc : q;
            A = g->bnd[a];
            B = g->bnd[b];
            bnd = op == O_MUL ? A * B : op == O_DIVS ? A / 1.5 : A + B;
        }
        if (!(bnd <= BOUND))
            op = O_DIVS, a = q, b = acc, bnd = g->bnd[q] / 1.5;
        ins *in = emit(g, op, a, b, b, bnd, 1);
        in->mode = (uint8_t)rnd_below(&g->s, M_COUNT);
        acc = in->dst;
    }
    free(rd);
}

/* Input counts around the chunk boundaries half the time. */
static const size_t k_edges[] = {1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 39, 40};

static void gen_prog(prog *p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->seed = seed;
    gen g = {.s = seed, .p = p, .cap = 64};
    p->n = rnd_unit(&g.s) < 0.5 ? k_edges[rnd_below(&g.s, sizeof k_edges / sizeof k_edges[0])]
                                : 1 + rnd_below(&g.s, MAX_IN);
    p->m = 1 + rnd_below(&g.s, MAX_OUT);
    double r = rnd_unit(&g.s);
    size_t len = r < 0.8 ? 1 + rnd_below(&g.s, 40) : 40 + rnd_below(&g.s, 160);
    p->code = malloc(g.cap * sizeof *p->code);
    g.bnd = malloc(p->n * sizeof *g.bnd);
    assert_non_null(p->code);
    assert_non_null(g.bnd);
    for (size_t j = 0; j < p->n; j++)
        g.bnd[j] = XMAX;
    p->nreg = p->n;
    while (p->nins < len)
        gen_one(&g);
    fold(&g);
    p->out[0] = (uint32_t)(p->nreg - 1);
    for (size_t i = 1; i < p->m; i++)
        p->out[i] = rnd_unit(&g.s) < 0.8 ? (uint32_t)(p->n + rnd_below(&g.s, p->nreg - p->n))
                                         : (uint32_t)rnd_below(&g.s, p->nreg);
    free(g.bnd);
    p->pr = malloc(p->nreg * sizeof *p->pr);
    p->frz = malloc((p->nfrz + 1) * sizeof *p->frz);
    p->dr = malloc(p->nreg * sizeof *p->dr);
    p->vr = malloc(p->nreg * sizeof *p->vr);
    assert_non_null(p->pr);
    assert_non_null(p->frz);
    assert_non_null(p->dr);
    assert_non_null(p->vr);
}

static void free_prog(prog *p)
{
    free(p->code);
    free(p->pool);
    free(p->pr);
    free(p->frz);
    free(p->dr);
    free(p->vr);
}

static void dump_prog(const prog *p)
{
    printf("program %#" PRIx64 ": %zu inputs, %zu outputs, %zu instructions\n", p->seed, p->n, p->m,
           p->nins);
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->code[i];
        printf("  r%u = %s", in->dst, k_op_names[in->op]);
        if (in->op == O_ROW)
            printf(" %s [%s]", k_rows[in->row].name, k_mode_names[in->mode]);
        if (in->op == O_HYPOTN) {
            printf("(1");
            for (uint32_t j = 1; j < in->nargs; j++)
                printf(", r%u", p->pool[in->off + j]);
            printf(")\n");
            continue;
        }
        printf("(r%u, r%u, r%u; k=%g)%s\n", in->a, in->b, in->c, in->k,
               in->nres > 1 ? " (two results)" : "");
    }
    printf("  outputs:");
    for (size_t i = 0; i < p->m; i++)
        printf(" r%u", p->out[i]);
    printf("\n");
}

/* ---- The plain interpreter ------------------------------------------------------------------ */

static double tr_c(int tr, double a)
{
    switch (tr) {
    case T_SQ15:
        return 1.5 + a * a;
    case T_SQ05:
        return 0.5 + a * a;
    case T_SQ1:
        return 1 + a * a;
    case T_TANH:
        return tanh(a);
    case T_HTANH:
        return 0.5 * tanh(a);
    default:
        return a;
    }
}

/* y = p(x). rec: compute the zero-adjoint and non-differentiable results and keep them;
 * otherwise read them back (they are constants of the program: frozen for the differences). */
static void plain_run(const prog *p, const double *x, double *y, bool rec)
{
    double *r = p->pr;
    size_t f = 0;
    memcpy(r, x, p->n * sizeof *r);
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->code[i];
        double a = r[in->a], b = r[in->b], c = r[in->c], k = in->k, *d = &r[in->dst];
        switch (in->op) {
        case O_ADD:
            *d = a + b;
            break;
        case O_SUB:
            *d = a - b;
            break;
        case O_MUL:
            *d = a * b;
            break;
        case O_DIVS:
            *d = a / (1.5 + b * b);
            break;
        case O_NEG:
            *d = -a;
            break;
        case O_ADDC:
            *d = a + k;
            break;
        case O_CSUB:
            *d = k - a;
            break;
        case O_MULC:
            *d = k * a;
            break;
        case O_DIVC:
            *d = a / k;
            break;
        case O_CDIV:
            *d = k / (1.5 + a * a);
            break;
        case O_CONST:
            *d = k;
            break;
        case O_SIN:
            *d = sin(a);
            break;
        case O_COS:
            *d = cos(a);
            break;
        case O_EXP:
            *d = exp(a);
            break;
        case O_LOG1:
            *d = log(1 + a * a);
            break;
        case O_SQRT1:
            *d = sqrt(1 + a * a);
            break;
        case O_ASIN:
            *d = asin(0.5 * tanh(a));
            break;
        case O_ROW: {
            const rowdef *rd = &k_rows[in->row];
            double xs[3] = {a, b, c};
            for (int j = 0; j < rd->nin; j++)
                xs[j] = tr_c(rd->tr[j], xs[j]);
            row_c(in->row, xs, d);
            break;
        }
        case O_HYPOTN: {
            double s = 1;
            for (uint32_t j = 1; j < in->nargs; j++)
                s += r[p->pool[in->off + j]] * r[p->pool[in->off + j]];
            *d = sqrt(s);
            break;
        }
        case O_EVPOLY: {
            double t = tanh(a);
            *d = k + t * (b + t * (0.5 + t * c));
            break;
        }
        case O_GINC:
            cr_sf_gamma_inc(k, 0.5 + a * a, &d[0], &d[1]);
            break;
        case O_UF:
            *d = uf_c(a, b);
            break;
        case O_OV:
            *d = ov_c(a, b);
            break;
        case O_OV2:
            ov2_c(a, b, d);
            break;
        case O_POLAR: {
            double yb = 0.5 + b * b;
            d[0] = sqrt(a * a + yb * yb);
            d[1] = atan2(yb, a);
            break;
        }
        case O_ZF:
            if (rec)
                p->frz[f] = zf_c(a, b);
            *d = p->frz[f++];
            break;
        default: /* O_ND */
            if (rec)
                p->frz[f] = nd_c(a);
            *d = p->frz[f++];
            break;
        }
    }
    for (size_t i = 0; i < p->m; i++)
        y[i] = r[p->out[i]];
}

/* ---- The program on duals ------------------------------------------------------------------- */

typedef struct env {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_registry *reg;
    cr_engine *eng;
    const cr_config *cfg; /* the engine's */
    cr_tape *tape;        /* forward, with the engine */
    size_t programs;
    size_t ops[O_COUNT], rows[R_COUNT], modes[M_COUNT], errs[16], chunks[6], seeded[9];
} env;

/* A run of the program on duals: the program, the arena its calls use, whether every
 * register kept its unused tangents zero, and a failure to plant (the errors). */
typedef struct drun {
    prog *p;
    env *e;
    bool tail_ok;
    int fail_call;     /* fail at this call of the function (0: never) */
    cr_status fail_st; /* with this status */
    bool fail_rule;    /* end with a call of bad() */
    int calls;
} drun;

static cr_dual d_tr(int tr, cr_dual a, cr_status *st)
{
    switch (tr) {
    case T_SQ15:
        return cr_dual_add(cr_dual_const(1.5), cr_dual_mul(a, a));
    case T_SQ05:
        return cr_dual_add(cr_dual_const(0.5), cr_dual_mul(a, a));
    case T_SQ1:
        return cr_dual_add(cr_dual_const(1.0), cr_dual_mul(a, a));
    case T_TANH:
    case T_HTANH: {
        cr_dual t = cr_dual_const((double)NAN);
        cr_status s = cr_dual_call(NULL, NULL, &cr_fn_tanh, &a, 1, &t, 1);
        if (s != CR_OK)
            *st = s;
        return tr == T_TANH ? t : cr_dual_mul(cr_dual_const(0.5), t);
    }
    default:
        return a;
    }
}

static bool tail_zero(const cr_dual *d)
{
    if (d->n > CR_DUAL_MAX_CHUNK)
        return false;
    for (size_t q = d->n; q < CR_DUAL_MAX_CHUNK; q++)
        if (d->d[q] != 0.0)
            return false;
    return true;
}

static cr_status prog_dual(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *envp)
{
    drun *run = envp;
    prog *p = run->p;
    env *e = run->e;
    (void)n;
    if (run->fail_call != 0 && ++run->calls == run->fail_call)
        return run->fail_st;
    cr_dual *r = p->dr;
    memcpy(r, x, p->n * sizeof *r);
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->code[i];
        cr_dual a = r[in->a], b = r[in->b], c = r[in->c], k = cr_dual_const(in->k),
                *d = &r[in->dst];
        cr_status st = CR_OK;
        switch (in->op) {
        case O_ADD:
            *d = cr_dual_add(a, b);
            break;
        case O_SUB:
            *d = cr_dual_sub(a, b);
            break;
        case O_MUL:
            *d = cr_dual_mul(a, b);
            break;
        case O_DIVS:
            *d = cr_dual_div(a, d_tr(T_SQ15, b, &st));
            break;
        case O_NEG:
            *d = cr_dual_neg(a);
            break;
        case O_ADDC:
            *d = cr_dual_add(a, k);
            break;
        case O_CSUB:
            *d = cr_dual_sub(k, a);
            break;
        case O_MULC:
            *d = cr_dual_mul(k, a);
            break;
        case O_DIVC:
            *d = cr_dual_div(a, k);
            break;
        case O_CDIV:
            *d = cr_dual_div(k, d_tr(T_SQ15, a, &st));
            break;
        case O_CONST:
            *d = k;
            break;
        case O_SIN:
            *d = cr_dual_sin(a);
            break;
        case O_COS:
            *d = cr_dual_cos(a);
            break;
        case O_EXP:
            *d = cr_dual_exp(a);
            break;
        case O_LOG1:
            *d = cr_dual_log(d_tr(T_SQ1, a, &st));
            break;
        case O_SQRT1:
            *d = cr_dual_sqrt(d_tr(T_SQ1, a, &st));
            break;
        case O_ASIN:
            *d = cr_dual_asin(d_tr(T_HTANH, a, &st));
            break;
        case O_ROW: {
            const rowdef *rd = &k_rows[in->row];
            cr_dual xs[3] = {a, b, c};
            for (int j = 0; j < rd->nin; j++)
                xs[j] = d_tr(rd->tr[j], xs[j], &st);
            bool eng = in->mode == M_ENG_ARENA || in->mode == M_ENG_NULL;
            bool ar = in->mode == M_NULL_ARENA || in->mode == M_ENG_ARENA;
            if (st == CR_OK)
                st = cr_dual_call(eng ? e->cfg : NULL, ar ? e->arena : NULL, rd->f, xs, rd->nin, d,
                                  rd->nout);
            break;
        }
        case O_HYPOTN: {
            cr_dual xs[MAX_HYPOT];
            xs[0] = cr_dual_const(1.0);
            for (uint32_t j = 1; j < in->nargs; j++)
                xs[j] = r[p->pool[in->off + j]];
            st = cr_dual_call(in->mode & 1 ? e->cfg : NULL, e->arena, &cr_fn_hypot, xs, in->nargs,
                              d, 1);
            break;
        }
        case O_EVPOLY: {
            cr_dual xs[5] = {d_tr(T_TANH, a, &st), k, b, cr_dual_const(0.5), c};
            if (st == CR_OK)
                st = cr_dual_call(in->mode & 1 ? e->cfg : NULL, e->arena, &cr_fn_evalpoly, xs, 5, d,
                                  1);
            break;
        }
        case O_GINC: {
            cr_dual xs[2] = {k, d_tr(T_SQ05, a, &st)};
            st =
                cr_dual_call(in->mode & 1 ? e->cfg : NULL, e->arena, &cr_fn_gamma_inc, xs, 2, d, 2);
            break;
        }
        case O_UF:
        case O_OV:
        case O_OV2:
        case O_ZF: {
            const cr_value *f = in->op == O_UF   ? &g_uf
                                : in->op == O_OV ? &g_ov
                                : in->op == O_ZF ? &g_zf
                                                 : &g_ov2;
            cr_dual xs[2] = {a, b};
            st = cr_dual_call(e->cfg, e->arena, f, xs, 2, d, in->nres);
            break;
        }
        case O_POLAR: {
            cr_dual xs[2] = {a, d_tr(T_SQ05, b, &st)};
            st = cr_dual_call(e->cfg, e->arena, &g_polar, xs, 2, d, 2);
            break;
        }
        default: /* O_ND */
            st = cr_dual_call(e->cfg, e->arena, &g_nd, &a, 1, d, 1);
            break;
        }
        if (st != CR_OK)
            return st;
        for (unsigned o = 0; o < in->nres; o++)
            run->tail_ok = run->tail_ok && tail_zero(&d[o]);
    }
    for (size_t i = 0; i < m; i++)
        y[i] = r[p->out[i]];
    if (run->fail_rule) {
        cr_dual z = cr_dual_const(0.0);
        cr_status st = cr_dual_call(e->cfg, e->arena, &g_bad, &y[0], 1, &z, 1);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

/* ---- The program on a tape ---------------------------------------------------------------- */

static cr_var t_tr(cr_tape *t, int tr, cr_var a)
{
    switch (tr) {
    case T_SQ15:
        return cr_add(t, cr_const(1.5), cr_mul(t, a, a));
    case T_SQ05:
        return cr_add(t, cr_const(0.5), cr_mul(t, a, a));
    case T_SQ1:
        return cr_add(t, cr_const(1.0), cr_mul(t, a, a));
    case T_TANH:
    case T_HTANH: {
        cr_var y = cr_tape_call1(t, &cr_fn_tanh, &a, 1);
        return tr == T_TANH ? y : cr_mul(t, cr_const(0.5), y);
    }
    default:
        return a;
    }
}

static cr_status tape_run(const prog *p, cr_tape *t, const cr_var *xs, cr_var *ys)
{
    cr_var *r = p->vr;
    memcpy(r, xs, p->n * sizeof *r);
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->code[i];
        cr_var a = r[in->a], b = r[in->b], c = r[in->c], k = cr_const(in->k), *d = &r[in->dst];
        switch (in->op) {
        case O_ADD:
            *d = cr_add(t, a, b);
            break;
        case O_SUB:
            *d = cr_sub(t, a, b);
            break;
        case O_MUL:
            *d = cr_mul(t, a, b);
            break;
        case O_DIVS:
            *d = cr_div(t, a, t_tr(t, T_SQ15, b));
            break;
        case O_NEG:
            *d = cr_neg(t, a);
            break;
        case O_ADDC:
            *d = cr_add(t, a, k);
            break;
        case O_CSUB:
            *d = cr_sub(t, k, a);
            break;
        case O_MULC:
            *d = cr_mul(t, k, a);
            break;
        case O_DIVC:
            *d = cr_div(t, a, k);
            break;
        case O_CDIV:
            *d = cr_div(t, k, t_tr(t, T_SQ15, a));
            break;
        case O_CONST:
            *d = k;
            break;
        case O_SIN:
            *d = cr_sin(t, a);
            break;
        case O_COS:
            *d = cr_cos(t, a);
            break;
        case O_EXP:
            *d = cr_exp(t, a);
            break;
        case O_LOG1:
            *d = cr_log(t, t_tr(t, T_SQ1, a));
            break;
        case O_SQRT1:
            *d = cr_sqrt(t, t_tr(t, T_SQ1, a));
            break;
        case O_ASIN:
            *d = cr_asin(t, t_tr(t, T_HTANH, a));
            break;
        case O_ROW: {
            const rowdef *rd = &k_rows[in->row];
            cr_var xs3[3] = {a, b, c};
            for (int j = 0; j < rd->nin; j++)
                xs3[j] = t_tr(t, rd->tr[j], xs3[j]);
            cr_tape_call(t, rd->f, xs3, rd->nin, d, rd->nout);
            break;
        }
        case O_HYPOTN: {
            cr_var xs3[MAX_HYPOT];
            xs3[0] = cr_const(1.0);
            for (uint32_t j = 1; j < in->nargs; j++)
                xs3[j] = r[p->pool[in->off + j]];
            cr_tape_call(t, &cr_fn_hypot, xs3, in->nargs, d, 1);
            break;
        }
        case O_EVPOLY: {
            cr_var xs3[5] = {t_tr(t, T_TANH, a), k, b, cr_const(0.5), c};
            cr_tape_call(t, &cr_fn_evalpoly, xs3, 5, d, 1);
            break;
        }
        case O_GINC: {
            cr_var xs3[2] = {k, t_tr(t, T_SQ05, a)};
            cr_tape_call(t, &cr_fn_gamma_inc, xs3, 2, d, 2);
            break;
        }
        case O_UF:
        case O_OV:
        case O_OV2:
        case O_ZF: {
            const cr_value *f = in->op == O_UF   ? &g_uf
                                : in->op == O_OV ? &g_ov
                                : in->op == O_ZF ? &g_zf
                                                 : &g_ov2;
            cr_var xs3[2] = {a, b};
            cr_tape_call(t, f, xs3, 2, d, in->nres);
            break;
        }
        case O_POLAR: {
            cr_var xs3[2] = {a, t_tr(t, T_SQ05, b)};
            cr_tape_call(t, &g_polar, xs3, 2, d, 2);
            break;
        }
        default: /* O_ND */
            cr_tape_call(t, &g_nd, &a, 1, d, 1);
            break;
        }
    }
    for (size_t i = 0; i < p->m; i++)
        ys[i] = r[p->out[i]];
    return cr_tape_status(t);
}

/* ---- Differences ---------------------------------------------------------------------------- */

#define FD_H 1e-3

/* Column j of the Jacobian (all m outputs) with step h */
static void fd_col(prog *p, double *xs, const double *x, size_t j, double h, double *out)
{
    double y[MAX_OUT];
    for (size_t i = 0; i < p->m; i++)
        out[i] = 0;
    memcpy(xs, x, p->n * sizeof *xs);
    for (int s = 0; s < 4; s++) {
        xs[j] = x[j] + k_fd_o[s] * h;
        plain_run(p, xs, y, false);
        for (size_t i = 0; i < p->m; i++)
            out[i] += k_fd_c[s] * y[i] / h;
    }
}

/* Tolerances: values 1e-10 relative; the Jacobian against differences 1e-7 of the vector's
 * scale plus 8 times their error estimate; modes computing the same quantity 1e-11. */
#define RT_VALUE 1e-10
#define RT_FD1   1e-7
#define RT_MODE  1e-11

/* ---- Error paths ----------------------------------------------------------------------------- */

enum {
    E_JVP_NONFINITE,
    E_FN_FAILS_JAC,
    E_FN_FAILS_JVP,
    E_RULE_FAILS,
    E_NOUT_ROW,
    E_NOUT_FRULE,
    E_NULL_ARENA,
    E_NORULE,
    E_MANY_ARGS,
    E_NULL_SCRATCH,
    E_COUNT
};
static const char *const k_err_names[E_COUNT] = {
    "jvp non-finite v",  "f fails in a chunk", "f fails in jvp", "a rule fails",
    "row result count",  "frule result count", "NULL arena",     "no frule",
    "more than 64 args", "NULL scratch"};

#define SENT (-7.25e300)

static bool all_sent(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != SENT)
            return false;
    return true;
}

static bool duals_sent(const cr_dual *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].v != SENT)
            return false;
    return true;
}

static const char *msg_of(env *e)
{
    return cr_ctx_errmsg(e->ctx);
}

static void run_error(env *e, prog *p, ck *c, uint64_t *s, const double *x, const double *J,
                      const double *yJ)
{
    size_t n = p->n, m = p->m, kind = rnd_below(s, E_COUNT);
    e->errs[kind]++;
    c->mode = k_err_names[kind];
    double *buf = malloc((n * m + 2 * n + 2 * MAX_OUT) * sizeof *buf);
    assert_non_null(buf);
    double *Jb = buf, *v = Jb + n * m, *yb = v + n, *jv = yb + MAX_OUT;
    for (size_t i = 0; i < n * m + n + 2 * MAX_OUT; i++)
        buf[i] = SENT;
    drun run = {.p = p, .e = e, .tail_ok = true};
    cr_arena *scr = n + m <= 32 && rnd_unit(s) < 0.5 ? NULL : e->arena;
    cr_ctx_clear_error(e->ctx);
    cr_status st;
    cr_dual out[3], args[MAX_HYPOT + 1];
    for (int i = 0; i < 3; i++)
        out[i] = cr_dual_const(SENT);
    for (size_t j = 0; j <= MAX_HYPOT; j++) {
        double d[2] = {rnd_range(s, -1, 1), rnd_range(s, -1, 1)};
        args[j] = cr_dual_make(rnd_range(s, 0.5, 2), d, rnd_below(s, 3));
    }
    switch (kind) {
    case E_JVP_NONFINITE: {
        for (size_t j = 0; j < n; j++)
            v[j] = rnd_range(s, -1, 1);
        size_t bad = rnd_below(s, n);
        double r = rnd_unit(s);
        v[bad] = r < 0.4 ? (double)NAN : r < 0.7 ? (double)INFINITY : -(double)INFINITY;
        scr = rnd_unit(s) < 0.5 ? NULL : e->arena;
        st = cr_dual_jvp(prog_dual, &run, x, n, v, m, scr, yb, jv);
        char want[64];
        snprintf(want, sizeof want, "cr_dual_jvp: direction %zu is", bad);
        if (scr != NULL)
            ck_refused_with(c, "cr_dual_jvp", st, CR_EDOMAIN, msg_of(e), want);
        else if (st != CR_EDOMAIN)
            ck_fail(c, "cr_dual_jvp: %s, expected CR_EDOMAIN", cr_status_str(st));
        if (!all_sent(yb, m) || !all_sent(jv, m))
            ck_fail(c, "cr_dual_jvp wrote its outputs on CR_EDOMAIN");
        break;
    }
    case E_FN_FAILS_JAC: {
        static const cr_status sts[] = {CR_EDOMAIN, CR_EUNIMPL, CR_ENOMEM, CR_ESHAPE};
        size_t chunks = (n + CR_DUAL_MAX_CHUNK - 1) / CR_DUAL_MAX_CHUNK;
        size_t fail = rnd_below(s, chunks);
        run.fail_call = (int)fail + 1;
        run.fail_st = sts[rnd_below(s, 4)];
        st = cr_dual_jacobian(prog_dual, &run, x, n, m, scr, yb, Jb);
        if (st != run.fail_st)
            ck_fail(c, "cr_dual_jacobian: %s, expected %s (f's status)", cr_status_str(st),
                    cr_status_str(run.fail_st));
        /* documented: the chunks before the failure are written, the rest untouched */
        if (fail == 0 ? !all_sent(yb, m) : memcmp(yb, yJ, m * sizeof *yb) != 0)
            ck_fail(c, "cr_dual_jacobian failing in chunk %zu: y %s", fail,
                    fail == 0 ? "written" : "not the values");
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                bool before = j < fail * CR_DUAL_MAX_CHUNK;
                double got = Jb[i * n + j];
                if (before ? got != J[i * n + j] : got != SENT) {
                    ck_fail(c, "cr_dual_jacobian failing in chunk %zu: J[%zu][%zu] = %g", fail, i,
                            j, got);
                    i = m;
                    break;
                }
            }
        break;
    }
    case E_FN_FAILS_JVP: {
        run.fail_call = 1;
        run.fail_st = CR_ENONDIFF;
        for (size_t j = 0; j < n; j++)
            v[j] = rnd_range(s, -1, 1);
        if (n == 1 && m == 1 && rnd_unit(s) < 0.5) {
            st = cr_dual_derivative(prog_dual, &run, x[0], yb, jv);
            if (st != CR_ENONDIFF)
                ck_fail(c, "cr_dual_derivative: %s, expected CR_ENONDIFF", cr_status_str(st));
        } else {
            st = cr_dual_jvp(prog_dual, &run, x, n, v, m, scr, yb, jv);
            if (st != CR_ENONDIFF)
                ck_fail(c, "cr_dual_jvp: %s, expected CR_ENONDIFF", cr_status_str(st));
        }
        if (!all_sent(yb, m) || !all_sent(jv, m))
            ck_fail(c, "a driver wrote its outputs when f failed");
        break;
    }
    case E_RULE_FAILS: {
        run.fail_rule = true;
        for (size_t j = 0; j < n; j++)
            v[j] = rnd_range(s, -1, 1);
        if (rnd_unit(s) < 0.5)
            st = cr_dual_jvp(prog_dual, &run, x, n, v, m, scr, yb, jv);
        else
            st = cr_dual_jacobian(prog_dual, &run, x, n, m, scr, yb, Jb);
        ck_refused_with(c, "a driver over a failing rule", st, CR_EDOMAIN, msg_of(e),
                        "bad: fails on purpose");
        if (!all_sent(yb, m) || !all_sent(jv, m) || !all_sent(Jb, n * m))
            ck_fail(c, "a driver wrote its outputs when its first evaluation failed");
        break;
    }
    case E_NOUT_ROW: {
        const rowdef *rd = &k_rows[rnd_below(s, R_COUNT)];
        size_t nout = rd->nout == 2 ? rnd_below(s, 2) : rnd_unit(s) < 0.5 ? 0 : 2;
        cr_arena *ar = rnd_unit(s) < 0.5 ? e->arena : NULL;
        st = cr_dual_call(NULL, ar, rd->f, args, rd->nin, out, nout);
        char want[96];
        snprintf(want, sizeof want, "%s takes %u argument%s and gives %u result%s (%u, %zu given)",
                 rd->f->u.func.fn->name, (unsigned)rd->nin, rd->nin == 1 ? "" : "s",
                 (unsigned)rd->nout, rd->nout == 1 ? "" : "s", (unsigned)rd->nin, nout);
        if (ar != NULL)
            ck_refused_with(c, "cr_dual_call", st, CR_EINVAL, msg_of(e), want);
        else if (st != CR_EINVAL)
            ck_fail(c, "cr_dual_call(%s, nout %zu): %s, expected CR_EINVAL", rd->name, nout,
                    cr_status_str(st));
        if (!duals_sent(out, 3))
            ck_fail(c, "cr_dual_call wrote its results on a count mismatch");
        break;
    }
    case E_NOUT_FRULE: {
        static const cr_value *const fs[] = {&cr_fn_hypot, &cr_fn_evalpoly, &cr_fn_gamma_inc, &g_uf,
                                             &g_ov,        &g_ov2,          &g_polar};
        static const size_t nargs[] = {3, 4, 2, 2, 2, 2, 2}, nres[] = {1, 1, 2, 1, 1, 2, 2};
        size_t w = rnd_below(s, 7), nout = nres[w] == 2 ? 1 : 2;
        if (w == 2)
            args[0] = cr_dual_const(1.5); /* gamma_inc: no tangent of the order */
        st = cr_dual_call(w >= 3 || rnd_unit(s) < 0.5 ? e->cfg : NULL, e->arena, fs[w], args,
                          nargs[w], out, nout);
        char want[64];
        snprintf(want, sizeof want, "%s gives %zu results, %zu expected", fs[w]->u.func.fn->name,
                 nres[w], nout);
        ck_refused_with(c, "cr_dual_call", st, CR_EINVAL, msg_of(e), want);
        if (!duals_sent(out, 3))
            ck_fail(c, "cr_dual_call wrote its results on a count mismatch");
        break;
    }
    case E_NULL_ARENA: {
        static const cr_value *const fs[] = {&cr_fn_hypot, &cr_fn_evalpoly, &g_uf,
                                             &g_ov,        &g_zf,           &g_nd};
        static const size_t nargs[] = {3, 4, 2, 2, 2, 1};
        size_t w = rnd_below(s, 6);
        st = cr_dual_call(w >= 2 || rnd_unit(s) < 0.5 ? e->cfg : NULL, NULL, fs[w], args, nargs[w],
                          out, 1);
        if (st != CR_EINVAL)
            ck_fail(c, "cr_dual_call with a NULL arena: %s, expected CR_EINVAL", cr_status_str(st));
        if (!duals_sent(out, 3))
            ck_fail(c, "cr_dual_call wrote its results with a NULL arena");
        break;
    }
    case E_NORULE: {
        static const cr_value *const fs[] = {&g_ov, &g_ov2, &g_polar, &g_zf, &g_nd};
        static const char *const sig[] = {"ov(f64, f64)", "ov2(f64, f64)", "polar(f64, f64)",
                                          "zf(f64, f64)", "nd(f64)"};
        static const size_t nargs[] = {2, 2, 2, 2, 1}, nres[] = {1, 2, 2, 1, 1};
        /* nd's rule is in the engine's registry: only the NULL configuration lacks it */
        size_t w = rnd_below(s, 5);
        cr_config nofwd = *e->cfg;
        nofwd.caps &= ~(uint32_t)CR_CAP_FORWARD;
        bool null_cfg = w == 4 || rnd_unit(s) < 0.5;
        st = cr_dual_call(null_cfg ? NULL : &nofwd, e->arena, fs[w], args, nargs[w], out, nres[w]);
        char want[64];
        snprintf(want, sizeof want, "no frule for %s", sig[w]);
        ck_refused_with(c, "cr_dual_call", st, CR_ENORULE, msg_of(e), want);
        if (!duals_sent(out, 3))
            ck_fail(c, "cr_dual_call wrote its results with no frule");
        break;
    }
    case E_MANY_ARGS: {
        size_t k = MAX_HYPOT + 1 + rnd_below(s, 2);
        cr_dual many[MAX_HYPOT + 2];
        for (size_t j = 0; j < k; j++)
            many[j] = args[j % (MAX_HYPOT + 1)];
        st = cr_dual_call(rnd_unit(s) < 0.5 ? e->cfg : NULL, e->arena, &cr_fn_hypot, many, k, out,
                          1);
        ck_refused_with(c, "cr_dual_call of 65 arguments", st, CR_EINVAL, msg_of(e),
                        "cr_dual_call: invalid arguments");
        if (!duals_sent(out, 3))
            ck_fail(c, "cr_dual_call wrote its results with too many arguments");
        /* 64 arguments are taken: the value is hypot's */
        st = cr_dual_call(NULL, e->arena, &cr_fn_hypot, many, MAX_HYPOT, out, 1);
        ck_status(c, "cr_dual_call of 64 arguments", st, msg_of(e));
        double ss = 0;
        for (size_t j = 0; j < MAX_HYPOT; j++)
            ss += many[j].v * many[j].v;
        double want = sqrt(ss);
        cmp_vec(c, "hypot of 64", &out[0].v, &want, NULL, 1, RT_VALUE);
        break;
    }
    default: {             /* E_NULL_SCRATCH */
        if (n + m <= 32) { /* the duals fit on the stack: no scratch needed */
            st = cr_dual_jacobian(prog_dual, &run, x, n, m, NULL, yb, Jb);
            ck_status(c, "cr_dual_jacobian without scratch", st, msg_of(e));
            if (st == CR_OK && memcmp(Jb, J, n * m * sizeof *J) != 0)
                ck_fail(c, "cr_dual_jacobian without scratch differs");
            break;
        }
        for (size_t j = 0; j < n; j++)
            v[j] = rnd_range(s, -1, 1);
        st = rnd_unit(s) < 0.5 ? cr_dual_jacobian(prog_dual, &run, x, n, m, NULL, yb, Jb)
                               : cr_dual_jvp(prog_dual, &run, x, n, v, m, NULL, yb, jv);
        if (st != CR_EINVAL)
            ck_fail(c, "a driver of %zu duals without scratch: %s, expected CR_EINVAL", n + m,
                    cr_status_str(st));
        if (!all_sent(yb, m) || !all_sent(jv, m) || !all_sent(Jb, n * m))
            ck_fail(c, "a driver without scratch wrote its outputs");
        break;
    }
    }
    cr_arena_reset(e->arena);
    free(buf);
}

/* ---- The checks -------------------------------------------------------------------------------
 */

static void run_prog(env *e, prog *p, ck *c)
{
    size_t n = p->n, m = p->m;
    uint64_t s = p->seed ^ 0x5DEECE66Du;
    double *buf = calloc(16 * n + 6 * n * m + 64, sizeof *buf);
    cr_dual *xd = calloc(n + MAX_OUT, sizeof *xd);
    cr_var *xs = calloc(n, sizeof *xs);
    assert_non_null(buf);
    assert_non_null(xd);
    assert_non_null(xs);
    double *x = buf, *v = x + n, *scr = v + n, *J = scr + n, *fdJ = J + n * m, *fdJe = fdJ + n * m,
           *Jt = fdJe + n * m, *S = Jt + n * m;
    double y0[MAX_OUT], y[MAX_OUT], yJ[MAX_OUT], col[MAX_OUT], col2[MAX_OUT], colh[MAX_OUT],
        jv[MAX_OUT], Jv[MAX_OUT];
    for (size_t j = 0; j < n; j++)
        x[j] = rnd_range(&s, -XMAX, XMAX);
    plain_run(p, x, y0, true);
    for (size_t j = 0; j < n; j++) {
        fd_col(p, scr, x, j, FD_H, col);
        fd_col(p, scr, x, j, 2 * FD_H, col2);
        fd_col(p, scr, x, j, FD_H / 2, colh);
        for (size_t i = 0; i < m; i++) {
            fdJ[i * n + j] = col[i];
            fdJe[i * n + j] = fd_err4(col[i], col2[i], colh[i]);
        }
    }
    cr_arena *scratch = n + m <= 32 && rnd_unit(&s) < 0.5 ? NULL : e->arena;
    drun run = {.p = p, .e = e, .tail_ok = true};

    /* 1, 2: cr_dual_jacobian: values and the whole Jacobian */
    c->mode = "cr_dual_jacobian";
    e->chunks[(n + CR_DUAL_MAX_CHUNK - 1) / CR_DUAL_MAX_CHUNK]++;
    cr_status st = cr_dual_jacobian(prog_dual, &run, x, n, m, scratch, y, J);
    ck_status(c, "cr_dual_jacobian", st, cr_ctx_errmsg(e->ctx));
    memcpy(yJ, y, sizeof yJ);
    if (st == CR_OK) {
        cmp_vec(c, "y", y, y0, NULL, m, RT_VALUE);
        for (size_t i = 0; i < m; i++)
            cmp_vec(c, "jacobian row", &J[i * n], &fdJ[i * n], &fdJe[i * n], n, RT_FD1);
    }
    if (!run.tail_ok)
        ck_fail(c, "a register's tangents past its n are not zero");

    /* 3: cr_dual_jvp against J v; cr_dual_derivative against J */
    c->mode = "cr_dual_jvp";
    for (size_t j = 0; j < n; j++)
        v[j] = rnd_range(&s, -1, 1);
    st = cr_dual_jvp(prog_dual, &run, x, n, v, m, scratch, y, jv);
    ck_status(c, "cr_dual_jvp", st, cr_ctx_errmsg(e->ctx));
    for (size_t i = 0; i < m; i++) {
        Jv[i] = 0;
        for (size_t j = 0; j < n; j++)
            Jv[i] += J[i * n + j] * v[j];
    }
    if (st == CR_OK) {
        cmp_vec(c, "y", y, y0, NULL, m, RT_VALUE);
        cmp_vec(c, "jvp~J v", jv, Jv, NULL, m, RT_MODE);
    }
    if (n == 1 && m == 1) {
        c->mode = "cr_dual_derivative";
        double dy = SENT;
        st = cr_dual_derivative(prog_dual, &run, x[0], y, &dy);
        ck_status(c, "cr_dual_derivative", st, cr_ctx_errmsg(e->ctx));
        if (st == CR_OK) {
            cmp_vec(c, "y", y, y0, NULL, 1, RT_VALUE);
            cmp_vec(c, "derivative~J", &dy, J, NULL, 1, RT_MODE);
        }
    }

    /* 4: the program on duals seeded by hand: k directions, some inputs with fewer or none */
    c->mode = "hand-seeded";
    size_t k = 1 + rnd_below(&s, CR_DUAL_MAX_CHUNK), kmax = 0;
    e->seeded[k]++;
    for (size_t j = 0; j < n; j++) {
        double r = rnd_unit(&s);
        size_t kj = r < 0.15 ? 0 : r < 0.4 ? 1 + rnd_below(&s, k) : k;
        double d[CR_DUAL_MAX_CHUNK] = {0};
        for (size_t q = 0; q < CR_DUAL_MAX_CHUNK; q++)
            S[j * CR_DUAL_MAX_CHUNK + q] = q < kj ? (d[q] = rnd_range(&s, -1, 1)) : 0.0;
        xd[j] = kj == 0 && rnd_unit(&s) < 0.5 ? cr_dual_const(x[j])
                                              : cr_dual_make(x[j], kj ? d : NULL, kj);
        kmax = kj > kmax ? kj : kmax;
    }
    cr_dual *yd = xd + n;
    run.tail_ok = true;
    st = prog_dual(xd, n, yd, m, &run);
    ck_status(c, "the program on duals", st, cr_ctx_errmsg(e->ctx));
    if (!run.tail_ok)
        ck_fail(c, "a register's tangents past its n are not zero");
    for (size_t i = 0; i < m && st == CR_OK; i++) {
        double got[CR_DUAL_MAX_CHUNK], want[CR_DUAL_MAX_CHUNK];
        for (size_t q = 0; q < CR_DUAL_MAX_CHUNK; q++) {
            got[q] = yd[i].d[q];
            want[q] = 0;
            for (size_t j = 0; j < n; j++)
                want[q] += J[i * n + j] * S[j * CR_DUAL_MAX_CHUNK + q];
        }
        cmp_vec(c, "y", &yd[i].v, &y0[i], NULL, 1, RT_VALUE);
        cmp_vec(c, "seeded tangents~J S", got, want, NULL, CR_DUAL_MAX_CHUNK, RT_MODE);
        if (yd[i].n > kmax)
            ck_fail(c, "output %zu has %u directions, its inputs at most %zu", i, yd[i].n, kmax);
    }
    cr_arena_reset(e->arena);

    /* 5: the forward tape's Jacobian and jvp against the duals' */
    c->mode = "tape";
    cr_tape *t = e->tape;
    cr_tape_reset(t);
    cr_var ys[MAX_OUT];
    st = cr_tape_inputs(t, x, n, xs);
    if (st == CR_OK)
        st = tape_run(p, t, xs, ys);
    ck_status(c, "record", st, cr_tape_errmsg(t));
    if (st == CR_OK) {
        for (size_t i = 0; i < m; i++)
            y[i] = ys[i].v;
        cmp_vec(c, "y", y, y0, NULL, m, RT_VALUE);
        st = cr_tape_jacobian(t, ys, m, xs, n, Jt);
        ck_status(c, "cr_tape_jacobian", st, cr_ctx_errmsg(e->ctx));
        if (st == CR_OK)
            for (size_t i = 0; i < m; i++)
                cmp_vec(c, "tape jacobian~dual jacobian", &Jt[i * n], &J[i * n], NULL, n, RT_MODE);
        st = cr_tape_jvp(t, xs, v, n, ys, m, col);
        ck_status(c, "cr_tape_jvp", st, cr_ctx_errmsg(e->ctx));
        if (st == CR_OK)
            cmp_vec(c, "tape jvp~dual jvp", col, jv, NULL, m, RT_MODE);
    }
    cr_arena_reset(e->arena);

    /* 6: an error path */
    run_error(e, p, c, &s, x, J, yJ);

    free(buf);
    free(xd);
    free(xs);
}

/* ---- Drivers ------------------------------------------------------------------------------------
 */

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    static const cr_argspec f64s[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
    if (e == NULL || cr_ctx_new(NULL, &e->ctx) != CR_OK ||
        cr_arena_new(e->ctx, NULL, &e->arena) != CR_OK ||
        cr_registry_new(e->ctx, NULL, &e->reg) != CR_OK ||
        cr_registry_non_differentiable(e->reg, &nd_fn, f64s, 1, false) != CR_OK ||
        cr_engine_new(e->ctx, e->reg, &e->eng) != CR_OK)
        return -1;
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &uf_fn,
                       .nargs = 2,
                       .args = f64s,
                       .rrule = uf_rrule,
                       .frule = uf_frule};
    if (cr_engine_from_rrule(e->eng, &def) != CR_OK)
        return -1;
    def = (cr_rule_def){
        .struct_size = sizeof def, .fn = &polar_fn, .nargs = 2, .args = f64s, .rrule = polar_rrule};
    if (cr_engine_from_rrule(e->eng, &def) != CR_OK)
        return -1;
    def = (cr_rule_def){
        .struct_size = sizeof def, .fn = &bad_fn, .nargs = 1, .args = f64s, .frule = bad_frule};
    if (cr_engine_from_rrule(e->eng, &def) != CR_OK ||
        cr_engine_overlay(e->eng, &ov_fn, ov_impl, 1, NULL) != CR_OK ||
        cr_engine_overlay(e->eng, &ov2_fn, ov2_impl, 2, NULL) != CR_OK ||
        cr_engine_zero_adjoint(e->eng, &zf_fn) != CR_OK)
        return -1;
    e->cfg = cr_engine_config(e->eng);
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_FORWARD, .engine = e->eng};
    if (cr_tape_new(e->ctx, &tp, &e->tape) != CR_OK)
        return -1;
    /* the rows are rows of their count, the frule functions are not */
    for (int r = 0; r < R_COUNT; r++) {
        const cr_function *fn = k_rows[r].f->u.func.fn;
        const cr_scalar_rule *row = cr_scalar_rule_of(fn);
        if (row == NULL || row->nin != k_rows[r].nin || row->nout != k_rows[r].nout) {
            printf("%s is not a row of %u arguments and %u results\n", k_rows[r].name,
                   k_rows[r].nin, k_rows[r].nout);
            return -1;
        }
    }
    if (cr_scalar_rule_of(cr_fn_evalpoly.u.func.fn) != NULL ||
        cr_scalar_rule_of(cr_fn_gamma_inc.u.func.fn) != NULL)
        return -1;
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    cr_tape_free(e->tape);
    cr_engine_free(e->eng);
    cr_registry_free(e->reg);
    cr_arena_free(e->arena);
    cr_ctx_free(e->ctx);
    free(e);
    return 0;
}

static void run_seed(env *e, uint64_t seed)
{
    prog p;
    gen_prog(&p, seed);
    ck c = {.p = &p, .seed = seed, .test = "test_dual_random", .mode = ""};
    bool dump = getenv("CR_RANDOM_DUMP") != NULL;
    if (dump)
        dump_prog(&p);
    for (size_t i = 0; i < p.nins; i++) {
        e->ops[p.code[i].op]++;
        if (p.code[i].op == O_ROW) {
            e->rows[p.code[i].row]++;
            e->modes[p.code[i].mode]++;
        }
    }
    run_prog(e, &p, &c);
    if (c.failed != 0 && !dump)
        dump_prog(&p);
    free_prog(&p);
    e->programs++;
    assert_int_equal(c.failed, 0);
}

/* Programs run every time: 0xb11645d9a5ee7c15's Jacobian needs fd_err4's error estimate
 * from h/2 (the one from 2h alone made a right Jacobian fail). */
static const uint64_t k_found[] = {0xb11645d9a5ee7c15u};

static void test_random_dual_programs(void **state)
{
    env *e = *state;
    uint64_t one = replay_seed();
    if (one != 0) {
        run_seed(e, one);
        return;
    }
    for (size_t i = 0; i < sizeof k_found / sizeof k_found[0]; i++)
        run_seed(e, k_found[i]);
    size_t np = programs(1000);
    size_t from = programs_from();
    for (size_t i = from; i < from + np; i++) {
        uint64_t s = 0xD0A1000000000000u + i;
        run_seed(e, rnd_next(&s) | 1);
    }
    if (getenv("CR_RANDOM_PROGRAMS") != NULL) {
        printf("%zu programs; by Jacobian chunks:", e->programs);
        for (size_t i = 1; i < 6; i++)
            printf(" %zu:%zu", i, e->chunks[i]);
        printf("\nhand-seeded directions:");
        for (size_t i = 1; i <= CR_DUAL_MAX_CHUNK; i++)
            printf(" %zu:%zu", i, e->seeded[i]);
        printf("\ninstructions:\n");
        for (size_t i = 0; i < O_COUNT; i++)
            printf("  %-10s %zu\n", k_op_names[i], e->ops[i]);
        printf("rows:\n");
        for (size_t i = 0; i < R_COUNT; i++)
            printf("  %-10s %zu\n", k_rows[i].name, e->rows[i]);
        for (size_t i = 0; i < M_COUNT; i++)
            printf("  %-22s %zu\n", k_mode_names[i], e->modes[i]);
        printf("error paths:\n");
        for (size_t i = 0; i < E_COUNT; i++)
            printf("  %-20s %zu\n", k_err_names[i], e->errs[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_dual_programs),
    };
    return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
