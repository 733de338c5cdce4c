/*
 * Random-program differential test of the AD engines (SQLite's spirit: many generated cases,
 * each replayable from its seed). A seeded generator builds straight-line programs over a
 * register file: inputs, then instructions writing new registers from earlier registers and
 * constants through every way the engines record a scalar operation (the inline arithmetic of
 * tape.h with variable, constant and same-variable operands, the exported functions, the
 * thread's current tape, the named operations, rows through cr_tape_call, rows with several
 * results, rules kept as pullbacks, a user rrule, a user rule with a tuple result, constants in
 * registers) and, in some programs, fused kernels, broadcasts and array rules over a constant
 * array or over an input array. Every mode of the engines (reverse tape, vjp, Jacobian, forward
 * sweep, second order, Hessian, prepared gradient and H v at new points, dual numbers, the
 * array forms) is compared with central differences of a plain-double interpreter of the same
 * program, and with each other where they compute the same quantity.
 *
 * Replay a failure: CR_RANDOM_SEED=<seed printed> build/tests/test_tape_random. Run longer:
 * CR_RANDOM_PROGRAMS=<programs per group> (the default keeps the test within a second).
 */
#include <chainrules/kernel.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules/tape_inline.h>

#include "test_polar.h" /* polar(x, y) = (r, theta): a user rule with a tuple result */
#include "test_random.h"
#include "test_util.h"

/* ---- Kernels and user rules --------------------------------------------------------------- */

/* ka(e, s) = sin(e s) + e^2 / (1.5 + s^2) */
#define KA(x) \
    cr_k_add(cr_k_sin(cr_k_mul(x[0], x[1])), cr_k_div(cr_k_sq(x[0]), cr_k_add(1.5, cr_k_sq(x[1]))))
CR_KERNEL(rk_a, 2, KA);
static double ka_c(double e, double s)
{
    return sin(e * s) + e * e / (1.5 + s * s);
}

/* kb(e, s, u) = tanh(e) s + cos(u e) */
#define KB(x) cr_k_add(cr_k_mul(cr_k_tanh(x[0]), x[1]), cr_k_cos(cr_k_mul(x[2], x[0])))
CR_KERNEL(rk_b, 3, KB);
static double kb_c(double e, double s, double u)
{
    return tanh(e) * s + cos(u * e);
}

/* ---- Programs ------------------------------------------------------------------------------ */

/* The operations. Each keeps its arguments in a domain where it is smooth for every value the
 * operands can take (the generator tracks a bound on each register), so that central
 * differences are accurate: log(1 + a^2), a / (1.5 + b^2), asin(0.5 tanh a), ... */
enum op {
    /* the arithmetic of tape.h (inline, exported or current tape, by the instruction's path) */
    O_ADD,   /* a + b */
    O_SUB,   /* a - b */
    O_MUL,   /* a * b */
    O_DIVS,  /* a / (1.5 + b b) */
    O_NEG,   /* -a */
    O_ADDC,  /* a + k */
    O_CSUB,  /* k - a */
    O_MULC,  /* k * a (k may be exactly 1 or -1) */
    O_DIVC,  /* a / k */
    O_CDIV,  /* k / (1.5 + a a) */
    O_SADD,  /* a + a */
    O_SSUB,  /* a - a */
    O_SMUL,  /* a * a */
    O_SDIV,  /* q / q, q = 1.5 + a a */
    O_CONST, /* the constant k in a register */
    /* the named operations */
    O_SIN,
    O_COS,
    O_EXP,   /* a bounded by 3 */
    O_LOG1,  /* log(1 + a a) */
    O_SQRT1, /* sqrt(1 + a a) */
    O_ASIN,  /* asin(0.5 tanh a) */
    /* rows through cr_tape_call */
    O_TANH,
    O_ATAN,
    O_LOGISTIC,
    O_ERF,
    O_SINH,   /* a bounded by 3 */
    O_EXPM1,  /* a bounded by 3 */
    O_LOG1P,  /* log1p(a a) */
    O_CBRT,   /* cbrt(1.5 + a a) */
    O_HYPOT2, /* hypot(a, 0.5 + b b) */
    O_POW,    /* pow(1.5 + a a, tanh b) */
    O_ATAN2,  /* atan2(a, 1 + b b) */
    O_MULADD, /* muladd(a, b, c): a row of three arguments */
    O_SINCOS, /* (sin a, cos a): a row of two results, two registers */
    /* rules kept as pullbacks (GENERIC records) */
    O_HYPOT3,   /* hypot(a, b, 1) */
    O_EVALPOLY, /* evalpoly(tanh a, k, b, 0.5) */
    O_USER,     /* uf(a, b) */
    O_POLAR,    /* polar(a, 0.5 + b b): two registers */
    /* arrays (S: the constant array C, or the input array X of an array program) */
    O_KSUM,   /* sum_i ka(S[off + i], a) / len */
    O_KMAP,   /* Y = kb.(S[off:off+len], a, b); sum(Y) / len, or dot(Y, Y) / len */
    O_BCAST,  /* sum(sin.(S .* a)) / len */
    O_LSE,    /* logsumexp(sin.(S .* a)) */
    O_GETIDX, /* X[off] */
    O_COUNT
};

static const char *const k_op_names[O_COUNT] = {
    "add",   "sub",   "mul",    "divs", "neg",   "addc",     "csub",   "mulc",   "divc",
    "cdiv",  "sadd",  "ssub",   "smul", "sdiv",  "const",    "sin",    "cos",    "exp",
    "log1",  "sqrt1", "asin",   "tanh", "atan",  "logistic", "erf",    "sinh",   "expm1",
    "log1p", "cbrt",  "hypot2", "pow",  "atan2", "muladd",   "sincos", "hypot3", "evalpoly",
    "user",  "polar", "ksum",   "kmap", "bcast", "lse",      "getidx"};

/* Where an operation is recorded: tape.h's inline path, the exported function, the thread's
 * current tape (NULL as the tape), or a recording cursor (tape.h, cr_rec) opened on the tape
 * for a run of arithmetic instructions (the other instructions take P_INLINE, with the
 * cursor closed before them). */
enum { P_INLINE = 0, P_EXPORTED = 1, P_CURRENT = 2, P_CURSOR = 3 };

typedef struct ins {
    uint8_t op, path, arr, flag; /* arr: 1 reads X, 0 reads C; flag: KMAP's dot */
    uint32_t a, b, c, dst;       /* operands; the (first) result register */
    uint32_t off, len;           /* array operations */
    double k;                    /* constant */
} ins;

#define MAX_OUT  4
#define MAX_CLEN 300

typedef struct prog {
    uint64_t seed;
    size_t nin;  /* inputs: the scalars x0.. or the elements of X */
    size_t nsc;  /* scalar inputs in registers 0..nsc-1 (array programs: X[off] of GETIDX) */
    bool arr;    /* an array program: one input array X */
    size_t nreg; /* registers */
    size_t nins; /* instructions */
    ins *code;
    size_t m; /* outputs */
    uint32_t out[MAX_OUT];
    bool generic; /* has rules kept as pullbacks (counted apart by the prepared H v) */
    bool dual_ok; /* uses only operations dual numbers take */
    double cdata[MAX_CLEN];
    size_t clen;
    cr_array C;      /* the constant array */
    cr_var *vr;      /* tape registers */
    double *dr;      /* plain registers */
    cr_dual *xr;     /* dual registers */
    cr_arena *arena; /* for cr_dual_call's rules */
    size_t split;    /* inputs made by cr_tape_inputs before single cr_tape_input calls */
} prog;

/* Values of registers stay within BOUND (the generator squashes past it), inputs in [-2, 2]. */
#define BOUND 6.0
#define XMAX  2.0

static const cr_value *g_uf, *g_polar; /* function values of the user rules */
static cr_value g_uf_v, g_polar_v;

/* ---- Generation ---------------------------------------------------------------------------- */

typedef struct gen {
    uint64_t s;
    prog *p;
    double *bnd;    /* bound of each register's magnitude */
    bool *isc;      /* register holds a constant */
    size_t cap;     /* of code */
    bool pullbacks; /* rules kept as pullbacks allowed (then no second order) */
} gen;

/* An earlier register: half the time one of the last eight, else any. */
static uint32_t pick(gen *g)
{
    size_t n = g->p->nreg;
    if (n > 8 && rnd_unit(&g->s) < 0.5)
        return (uint32_t)(n - 1 - rnd_below(&g->s, 8));
    return (uint32_t)rnd_below(&g->s, n);
}

static double pick_k(gen *g, bool nonzero)
{
    double r = rnd_unit(&g->s);
    if (r < 0.1)
        return 1.0; /* partials of exactly +-1 */
    if (r < 0.2)
        return -1.0;
    double k = rnd_range(&g->s, 0.5, 2.0);
    if (!nonzero && r < 0.25)
        return 0.0;
    return rnd_unit(&g->s) < 0.5 ? -k : k;
}

static ins *emit(gen *g, unsigned op, uint32_t a, uint32_t b, double bnd, unsigned nres)
{
    prog *p = g->p;
    assert_true(p->nins < g->cap);
    ins *in = &p->code[p->nins++];
    memset(in, 0, sizeof *in);
    in->op = (uint8_t)op;
    in->a = a;
    in->b = b;
    in->dst = (uint32_t)p->nreg;
    double r = rnd_unit(&g->s);
    in->path = r < 0.3 ? P_CURSOR : r < 0.6 ? P_INLINE : r < 0.85 ? P_EXPORTED : P_CURRENT;
    for (unsigned i = 0; i < nres; i++) {
        g->bnd[p->nreg] = bnd;
        g->isc[p->nreg] = g->isc[a] && g->isc[b];
        p->nreg++;
    }
    return in;
}

/* Squash register a into [-1, 1] by a random one of the bounded operations. */
static void squash(gen *g, uint32_t a)
{
    static const unsigned ops[] = {O_TANH, O_SIN, O_COS, O_ATAN, O_LOGISTIC, O_ERF, O_ASIN};
    unsigned op = ops[rnd_below(&g->s, sizeof ops / sizeof ops[0])];
    emit(g, op, a, a, op == O_ATAN ? 1.6 : 1.0, 1);
}

/* One operation (or a squash when its result could pass BOUND). */
static void gen_one(gen *g, bool arrays)
{
    prog *p = g->p;
    uint32_t a = pick(g), b = pick(g), c = pick(g);
    double A = g->bnd[a], B = g->bnd[b], Cb = g->bnd[c];
    unsigned op;
    for (;;) {
        op = (unsigned)rnd_below(&g->s, O_COUNT);
        if (op == O_GETIDX && !p->arr)
            continue;
        if (op >= O_KSUM && op <= O_LSE && (!arrays || rnd_unit(&g->s) < 0.6))
            continue;
        if (op == O_CONST && rnd_unit(&g->s) < 0.5)
            continue;
        if (op >= O_HYPOT3 && op <= O_POLAR && !g->pullbacks)
            continue;
        break;
    }
    double k = 0, bnd;
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
        k = pick_k(g, false);
        bnd = A + fabs(k);
        break;
    case O_MULC:
        k = pick_k(g, false);
        bnd = A * fabs(k);
        break;
    case O_DIVC:
        k = pick_k(g, true);
        bnd = A / fabs(k);
        break;
    case O_CDIV:
        k = pick_k(g, false);
        bnd = fabs(k) / 1.5;
        break;
    case O_SADD:
        bnd = 2 * A;
        break;
    case O_SSUB:
        bnd = 0;
        break;
    case O_SMUL:
        bnd = A * A;
        break;
    case O_SDIV:
        bnd = 1;
        break;
    case O_CONST:
        k = pick_k(g, false);
        bnd = fabs(k);
        break;
    case O_SIN:
    case O_COS:
    case O_TANH:
    case O_LOGISTIC:
    case O_ERF:
        bnd = 1;
        break;
    case O_ATAN:
        bnd = 1.6;
        break;
    case O_ASIN:
        bnd = 0.53;
        break;
    case O_EXP:
        bnd = A <= 3 ? exp(A) : (double)INFINITY;
        break;
    case O_SINH:
    case O_EXPM1:
        bnd = A <= 3 ? exp(A) : (double)INFINITY;
        break;
    case O_LOG1:
    case O_LOG1P:
        bnd = log1p(A * A);
        break;
    case O_SQRT1:
        bnd = sqrt(1 + A * A);
        break;
    case O_CBRT:
        bnd = cbrt(1.5 + A * A);
        break;
    case O_HYPOT2:
        bnd = hypot(A, 0.5 + B * B);
        break;
    case O_POW:
        bnd = 1.5 + A * A;
        break;
    case O_ATAN2:
        bnd = 1.6;
        break;
    case O_MULADD:
        bnd = A * B + Cb;
        break;
    case O_SINCOS:
        bnd = 1;
        break;
    case O_HYPOT3:
        bnd = sqrt(A * A + B * B + 1);
        break;
    case O_EVALPOLY:
        k = pick_k(g, false);
        bnd = fabs(k) + B + 0.5;
        break;
    case O_USER:
        bnd = A * B + 1;
        break;
    case O_POLAR:
        bnd = fmax(hypot(A, 0.5 + B * B), 3.2);
        break;
    case O_KSUM:
        bnd = 1 + XMAX * XMAX / 1.5;
        break;
    case O_KMAP:
        bnd = (A + 1) * (A + 1);
        break;
    case O_BCAST:
        bnd = 1;
        break;
    case O_LSE:
        bnd = 1 + log(MAX_CLEN);
        break;
    default:
        bnd = XMAX;
        break; /* GETIDX */
    }
    if (!(bnd <= BOUND)) {
        squash(g, a);
        return;
    }
    unsigned nres = (op == O_SINCOS || op == O_POLAR) ? 2 : 1;
    ins *in = emit(g, op, a, b, bnd, nres);
    in->c = c;
    in->k = k;
    if (op == O_CONST) {
        g->isc[in->dst] = true;
    } else if (op == O_MULADD) {
        g->isc[in->dst] = g->isc[a] && g->isc[b] && g->isc[c];
    } else if (op == O_NEG || op == O_ADDC || op == O_CSUB || op == O_MULC || op == O_DIVC ||
               op == O_CDIV || (op >= O_SADD && op <= O_SDIV) || (op >= O_SIN && op <= O_CBRT) ||
               op == O_SINCOS) {
        for (unsigned i = 0; i < nres; i++)
            g->isc[in->dst + i] = g->isc[a];
    } else if (op == O_GETIDX) {
        g->isc[in->dst] = false;
    }
    if (op >= O_HYPOT3 && op <= O_POLAR && !g->isc[in->dst])
        p->generic = true; /* (of constants, the rule is called and gives constants) */
    if (op == O_USER || op == O_POLAR || (op >= O_KSUM && op <= O_GETIDX))
        p->dual_ok = false;
    if (op >= O_KSUM && op <= O_GETIDX) {
        in->arr = (uint8_t)(p->arr && rnd_unit(&g->s) < 0.8);
        size_t slen = in->arr ? p->nin : p->clen;
        if (op == O_GETIDX) {
            in->arr = 1;
            in->off = (uint32_t)rnd_below(&g->s, p->nin);
        } else if (op == O_KSUM || op == O_KMAP) {
            in->len = (uint32_t)(1 + rnd_below(&g->s, slen));
            in->off = (uint32_t)rnd_below(&g->s, slen - in->len + 1);
            in->flag = (uint8_t)(rnd_unit(&g->s) < 0.5);
        } else {
            in->len = (uint32_t)slen;
        }
        if (in->arr) /* reads the input array: a variable whatever a is */
            g->isc[in->dst] = false;
        else if (op != O_KMAP)
            g->isc[in->dst] = g->isc[a];
    }
}

/* The program of a seed: n inputs (or an input array), len instructions, m outputs. */
static void gen_prog(prog *p, uint64_t seed, size_t len, bool arrays, bool arr_inputs)
{
    memset(p, 0, sizeof *p);
    gen g = {.s = seed, .p = p};
    p->seed = seed;
    p->arr = arr_inputs;
    p->dual_ok = true;
    g.pullbacks = rnd_unit(&g.s) < 0.3;
    double r = rnd_unit(&g.s);
    if (arr_inputs)
        p->nin = r < 0.7 ? 1 + rnd_below(&g.s, 12) : 200 + rnd_below(&g.s, 400);
    else
        p->nin = r < 0.85 ? 1 + rnd_below(&g.s, 8) : 9 + rnd_below(&g.s, 16);
    p->nsc = arr_inputs ? 1 + rnd_below(&g.s, 6) : p->nin;
    p->split = rnd_below(&g.s, p->nin + 1);
    p->clen = 1 + rnd_below(&g.s, rnd_unit(&g.s) < 0.8 ? 20 : MAX_CLEN);
    for (size_t i = 0; i < p->clen; i++)
        p->cdata[i] = rnd_range(&g.s, -1, 1);
    p->C = cr_array_vector(p->cdata, p->clen);
    /* Each instruction makes at most two registers, a squash one; a few more for the inputs,
     * the GETIDX and the last fix. */
    g.cap = p->nsc + len + 4;
    size_t regcap = 2 * g.cap + p->nin + 8;
    p->code = calloc(g.cap, sizeof *p->code);
    g.bnd = calloc(regcap, sizeof *g.bnd);
    g.isc = calloc(regcap, sizeof *g.isc);
    assert_non_null(p->code);
    assert_non_null(g.bnd);
    assert_non_null(g.isc);
    if (arr_inputs) {
        for (size_t i = 0; i < p->nsc; i++) {
            ins *in = emit(&g, O_GETIDX, 0, 0, XMAX, 1);
            in->arr = 1;
            in->off = (uint32_t)rnd_below(&g.s, p->nin);
            g.isc[in->dst] = false;
            p->dual_ok = false;
        }
    } else {
        for (size_t i = 0; i < p->nin; i++) {
            g.bnd[i] = XMAX;
            g.isc[i] = false;
        }
        p->nreg = p->nin;
    }
    for (size_t i = 0; i < len; i++)
        gen_one(&g, arrays);
    /* The last register is the first output (the function of the gradient modes): never a
     * constant. */
    if (g.isc[p->nreg - 1])
        emit(&g, O_ADD, (uint32_t)(p->nreg - 1), 0, g.bnd[p->nreg - 1] + XMAX, 1);
    p->m = 1 + rnd_below(&g.s, MAX_OUT);
    p->out[0] = (uint32_t)(p->nreg - 1);
    for (size_t i = 1; i < p->m; i++) {
        p->out[i] = (uint32_t)rnd_below(&g.s, p->nreg); /* an input or a constant too */
    }
    p->vr = calloc(p->nreg, sizeof *p->vr);
    p->dr = calloc(p->nreg, sizeof *p->dr);
    p->xr = calloc(p->nreg, sizeof *p->xr);
    assert_non_null(p->vr);
    assert_non_null(p->dr);
    assert_non_null(p->xr);
    free(g.bnd);
    free(g.isc);
}

static void free_prog(prog *p)
{
    free(p->code);
    free(p->vr);
    free(p->dr);
    free(p->xr);
}

static void dump_prog(const prog *p)
{
    printf("program %#" PRIx64 ": %zu inputs%s, %zu instructions, %zu registers, outputs", p->seed,
           p->nin, p->arr ? " (array X)" : "", p->nins, p->nreg);
    for (size_t i = 0; i < p->m; i++)
        printf(" r%u", (unsigned)p->out[i]);
    printf("\n");
    for (size_t i = 0; i < p->nins && i < 200; i++) {
        const ins *in = &p->code[i];
        printf("  r%u = %s%s(r%u, r%u, r%u; k=%g%s off=%u len=%u)\n", (unsigned)in->dst,
               k_op_names[in->op],
               in->path == P_EXPORTED  ? "[exported]"
               : in->path == P_CURRENT ? "[current]"
               : in->path == P_CURSOR  ? "[cursor]"
                                       : "",
               (unsigned)in->a, (unsigned)in->b, (unsigned)in->c, in->k, in->arr ? " X" : "",
               (unsigned)in->off, (unsigned)in->len);
    }
    if (p->nins > 200)
        printf("  ...\n");
}

/* ---- The plain-double interpreter ------------------------------------------------------------ */

static void plain_run(const prog *p, const double *x, double *y)
{
    double *r = p->dr;
    if (!p->arr)
        memcpy(r, x, p->nin * sizeof *x);
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->code[i];
        double a = r[in->a], b = r[in->b], c = r[in->c], k = in->k, *d = &r[in->dst];
        const double *S = in->arr ? x : p->cdata;
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
        case O_SADD:
            *d = a + a;
            break;
        case O_SSUB:
            *d = a - a;
            break;
        case O_SMUL:
            *d = a * a;
            break;
        case O_SDIV:
            *d = (1.5 + a * a) / (1.5 + a * a);
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
            *d = log(1.0 + a * a);
            break;
        case O_SQRT1:
            *d = sqrt(1.0 + a * a);
            break;
        case O_ASIN:
            *d = asin(0.5 * tanh(a));
            break;
        case O_TANH:
            *d = tanh(a);
            break;
        case O_ATAN:
            *d = atan(a);
            break;
        case O_LOGISTIC:
            *d = 1.0 / (1.0 + exp(-a));
            break;
        case O_ERF:
            *d = erf(a);
            break;
        case O_SINH:
            *d = sinh(a);
            break;
        case O_EXPM1:
            *d = expm1(a);
            break;
        case O_LOG1P:
            *d = log1p(a * a);
            break;
        case O_CBRT:
            *d = cbrt(1.5 + a * a);
            break;
        case O_HYPOT2:
            *d = hypot(a, 0.5 + b * b);
            break;
        case O_POW:
            *d = pow(1.5 + a * a, tanh(b));
            break;
        case O_ATAN2:
            *d = atan2(a, 1.0 + b * b);
            break;
        case O_MULADD:
            *d = a * b + c;
            break;
        case O_SINCOS:
            d[0] = sin(a);
            d[1] = cos(a);
            break;
        case O_HYPOT3:
            *d = sqrt(a * a + b * b + 1.0);
            break;
        case O_EVALPOLY: {
            double u = tanh(a);
            *d = k + u * (b + u * 0.5);
            break;
        }
        case O_USER:
            *d = a * b + sin(a);
            break;
        case O_POLAR: {
            double q = 0.5 + b * b;
            d[0] = sqrt(a * a + q * q);
            d[1] = atan2(q, a);
            break;
        }
        case O_KSUM: {
            double s = 0;
            for (size_t j = 0; j < in->len; j++)
                s += ka_c(S[in->off + j], a);
            *d = s / (double)in->len;
            break;
        }
        case O_KMAP: {
            double s = 0;
            for (size_t j = 0; j < in->len; j++) {
                double e = kb_c(S[in->off + j], a, b);
                s += in->flag ? e * e : e;
            }
            *d = s / (double)in->len;
            break;
        }
        case O_BCAST:
        case O_LSE: {
            double s = 0, mx = -INFINITY;
            for (size_t j = 0; j < in->len; j++)
                mx = fmax(mx, sin(S[j] * a));
            for (size_t j = 0; j < in->len; j++)
                s += in->op == O_BCAST ? sin(S[j] * a) : exp(sin(S[j] * a) - mx);
            *d = in->op == O_BCAST ? s / (double)in->len : mx + log(s);
            break;
        }
        case O_GETIDX:
            *d = x[in->off];
            break;
        default:
            break;
        }
    }
    for (size_t i = 0; i < p->m; i++)
        y[i] = r[p->out[i]];
}

/* ---- The program on a tape --------------------------------------------------------------------
 */

/* The cursor of P_CURSOR instructions (tape_run opens and closes it). */
static cr_rec g_rc;

static cr_var t_add(int path, cr_tape *t, cr_var a, cr_var b)
{
    return path == P_INLINE     ? cr_add(t, a, b)
           : path == P_EXPORTED ? (cr_add)(t, a, b)
           : path == P_CURSOR   ? cr_rec_add(&g_rc, a, b)
                                : cr_add(NULL, a, b);
}
static cr_var t_sub(int path, cr_tape *t, cr_var a, cr_var b)
{
    return path == P_INLINE     ? cr_sub(t, a, b)
           : path == P_EXPORTED ? (cr_sub)(t, a, b)
           : path == P_CURSOR   ? cr_rec_sub(&g_rc, a, b)
                                : cr_sub(NULL, a, b);
}
static cr_var t_mul(int path, cr_tape *t, cr_var a, cr_var b)
{
    return path == P_INLINE     ? cr_mul(t, a, b)
           : path == P_EXPORTED ? (cr_mul)(t, a, b)
           : path == P_CURSOR   ? cr_rec_mul(&g_rc, a, b)
                                : cr_mul(NULL, a, b);
}
static cr_var t_div(int path, cr_tape *t, cr_var a, cr_var b)
{
    return path == P_INLINE     ? cr_div(t, a, b)
           : path == P_EXPORTED ? (cr_div)(t, a, b)
           : path == P_CURSOR   ? cr_rec_div(&g_rc, a, b)
                                : cr_div(NULL, a, b);
}
static cr_var t_neg(int path, cr_tape *t, cr_var a)
{
    return path == P_INLINE     ? cr_neg(t, a)
           : path == P_EXPORTED ? (cr_neg)(t, a)
           : path == P_CURSOR   ? cr_rec_neg(&g_rc, a)
                                : cr_neg(NULL, a);
}
static cr_var t_call1(int path, cr_tape *t, const cr_value *f, const cr_var *args, size_t n)
{
    return cr_tape_call1(path == P_CURRENT ? NULL : t, f, args, n);
}
static cr_var t_tanh(int path, cr_tape *t, cr_var a)
{
    return t_call1(path, t, &cr_fn_tanh, &a, 1);
}
/* c + a a */
static cr_var t_cpsq(int path, cr_tape *t, double c, cr_var a)
{
    return t_add(path, t, cr_const(c), t_mul(path, t, a, a));
}

/* Y = S[off:off+len] as an argument: the whole array, or a view */
static cr_avar t_source(const prog *p, const ins *in, cr_avar X)
{
    return in->arr ? X : cr_av_const(&p->C);
}

/* Run p on tape t: the scalar inputs xs (or the input array X), the m outputs into ys. */
static cr_status tape_run(const prog *p, cr_tape *t, const cr_var *xs, cr_avar X, cr_var *ys,
                          size_t m)
{
    cr_var *r = p->vr;
    cr_tape *prev = cr_tape_set_current(t);
    if (!p->arr && xs != NULL) /* (array programs pass no xs) */
        memcpy(r, xs, p->nin * sizeof *xs);
    bool open = false; /* g_rc is open on t */
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->code[i];
        int pa = in->path;
        if (pa == P_CURSOR && in->op > O_CONST) /* only the arithmetic goes through the cursor */
            pa = P_INLINE;
        if (pa == P_CURSOR && !open)
            cr_rec_open(&g_rc, t);
        else if (pa != P_CURSOR && open)
            cr_rec_close(&g_rc);
        open = pa == P_CURSOR;
        cr_tape *tp = pa == P_CURRENT ? NULL : t;
        cr_var a = r[in->a], b = r[in->b], c = r[in->c], k = cr_const(in->k), *d = &r[in->dst];
        switch (in->op) {
        case O_ADD:
            *d = t_add(pa, t, a, b);
            break;
        case O_SUB:
            *d = t_sub(pa, t, a, b);
            break;
        case O_MUL:
            *d = t_mul(pa, t, a, b);
            break;
        case O_DIVS:
            *d = t_div(pa, t, a, t_cpsq(pa, t, 1.5, b));
            break;
        case O_NEG:
            *d = t_neg(pa, t, a);
            break;
        case O_ADDC:
            *d = t_add(pa, t, a, k);
            break;
        case O_CSUB:
            *d = t_sub(pa, t, k, a);
            break;
        case O_MULC:
            *d = t_mul(pa, t, k, a);
            break;
        case O_DIVC:
            *d = t_div(pa, t, a, k);
            break;
        case O_CDIV:
            *d = t_div(pa, t, k, t_cpsq(pa, t, 1.5, a));
            break;
        case O_SADD:
            *d = t_add(pa, t, a, a);
            break;
        case O_SSUB:
            *d = t_sub(pa, t, a, a);
            break;
        case O_SMUL:
            *d = t_mul(pa, t, a, a);
            break;
        case O_SDIV: {
            cr_var q = t_cpsq(pa, t, 1.5, a);
            *d = t_div(pa, t, q, q);
            break;
        }
        case O_CONST:
            *d = k;
            break;
        case O_SIN:
            *d = cr_sin(tp, a);
            break;
        case O_COS:
            *d = cr_cos(tp, a);
            break;
        case O_EXP:
            *d = cr_exp(tp, a);
            break;
        case O_LOG1:
            *d = cr_log(tp, t_cpsq(pa, t, 1.0, a));
            break;
        case O_SQRT1:
            *d = cr_sqrt(tp, t_cpsq(pa, t, 1.0, a));
            break;
        case O_ASIN:
            *d = cr_asin(tp, t_mul(pa, t, cr_const(0.5), t_tanh(pa, t, a)));
            break;
        case O_TANH:
            *d = t_tanh(pa, t, a);
            break;
        case O_ATAN:
            *d = t_call1(pa, t, &cr_fn_atan, &a, 1);
            break;
        case O_LOGISTIC:
            *d = t_call1(pa, t, &cr_fn_logistic, &a, 1);
            break;
        case O_ERF:
            *d = t_call1(pa, t, &cr_fn_erf, &a, 1);
            break;
        case O_SINH:
            *d = t_call1(pa, t, &cr_fn_sinh, &a, 1);
            break;
        case O_EXPM1:
            *d = t_call1(pa, t, &cr_fn_expm1, &a, 1);
            break;
        case O_LOG1P: {
            cr_var s = t_mul(pa, t, a, a);
            *d = t_call1(pa, t, &cr_fn_log1p, &s, 1);
            break;
        }
        case O_CBRT: {
            cr_var s = t_cpsq(pa, t, 1.5, a);
            *d = t_call1(pa, t, &cr_fn_cbrt, &s, 1);
            break;
        }
        case O_HYPOT2: {
            cr_var args[2] = {a, t_cpsq(pa, t, 0.5, b)};
            *d = t_call1(pa, t, &cr_fn_hypot, args, 2);
            break;
        }
        case O_POW: {
            cr_var args[2] = {t_cpsq(pa, t, 1.5, a), t_tanh(pa, t, b)};
            *d = t_call1(pa, t, &cr_fn_pow, args, 2);
            break;
        }
        case O_ATAN2: {
            cr_var args[2] = {a, t_cpsq(pa, t, 1.0, b)};
            *d = t_call1(pa, t, &cr_fn_atan2, args, 2);
            break;
        }
        case O_MULADD: {
            cr_var args[3] = {a, b, c};
            *d = t_call1(pa, t, &cr_fn_muladd, args, 3);
            break;
        }
        case O_SINCOS:
            cr_tape_call(tp, &cr_fn_sincos, &a, 1, d, 2);
            break;
        case O_HYPOT3: {
            cr_var args[3] = {a, b, cr_const(1.0)};
            *d = t_call1(pa, t, &cr_fn_hypot, args, 3);
            break;
        }
        case O_EVALPOLY: {
            cr_var args[4] = {t_tanh(pa, t, a), k, b, cr_const(0.5)};
            *d = t_call1(pa, t, &cr_fn_evalpoly, args, 4);
            break;
        }
        case O_USER: {
            cr_var args[2] = {a, b};
            *d = t_call1(pa, t, g_uf, args, 2);
            break;
        }
        case O_POLAR: {
            cr_var args[2] = {a, t_cpsq(pa, t, 0.5, b)};
            cr_tape_call(tp, g_polar, args, 2, d, 2);
            break;
        }
        case O_KSUM: {
            cr_kin kin[2] = {cr_kin_arr(t_source(p, in, X), in->off), cr_kin_var(a)};
            cr_var s = cr_av_kernel_sum(tp, &rk_a, kin, 2, in->len);
            *d = t_div(pa, t, s, cr_const((double)in->len));
            break;
        }
        case O_KMAP: {
            cr_kin kin[3] = {cr_kin_arr(t_source(p, in, X), in->off), cr_kin_var(a), cr_kin_var(b)};
            cr_avar Y = cr_av_kernel(tp, &rk_b, kin, 3, in->len);
            cr_var s = in->flag ? cr_av_dot(tp, Y, Y) : cr_av_sum(tp, Y);
            *d = t_div(pa, t, s, cr_const((double)in->len));
            break;
        }
        case O_BCAST:
        case O_LSE: {
            cr_avar Y =
                cr_av_broadcast2(tp, &cr_fn_mul, cr_targ_arr(t_source(p, in, X)), cr_targ_var(a));
            cr_avar Z = cr_av_broadcast1(tp, &cr_fn_sin, cr_targ_arr(Y));
            if (in->op == O_BCAST) {
                *d = t_div(pa, t, cr_av_sum(tp, Z), cr_const((double)in->len));
            } else {
                cr_targ z = cr_targ_arr(Z);
                *d = cr_tape_acall_s(tp, &cr_fn_logsumexp, &z, 1);
            }
            break;
        }
        case O_GETIDX: {
            cr_targ args[2] = {cr_targ_arr(X), cr_targ_value(cr_value_i64((int64_t)in->off))};
            *d = cr_tape_acall_s(tp, &cr_fn_getindex, args, 2);
            break;
        }
        default:
            break;
        }
    }
    if (open)
        cr_rec_close(&g_rc);
    for (size_t i = 0; i < m && i < p->m; i++)
        ys[i] = r[p->out[i]];
    cr_tape_set_current(prev);
    return cr_tape_status(t);
}

/* A cr_ad_fn: the program of env. */
static cr_status prog_fn(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    return tape_run(env, t, x, cr_av_const(NULL), y, m);
}

/* A cr_ad_array_fn: the array program of env (its first output). */
static cr_status prog_afn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    const prog *p = env;
    return tape_run(p, t, NULL, xs[0], y, 1);
}

/* ---- The program on dual numbers ------------------------------------------------------------ */

static cr_dual d_call(prog *p, const cr_value *f, const cr_dual *args, size_t n, cr_status *st)
{
    cr_dual y = cr_dual_const((double)NAN);
    cr_status s = cr_dual_call(NULL, p->arena, f, args, n, &y, 1);
    if (s != CR_OK && *st == CR_OK)
        *st = s;
    return y;
}

static cr_dual d_cpsq(double c, cr_dual a)
{
    return cr_dual_add(cr_dual_const(c), cr_dual_mul(a, a));
}

static cr_status prog_dual(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    prog *p = env;
    cr_dual *r = p->xr;
    cr_status st = CR_OK;
    memcpy(r, x, p->nin * sizeof *x);
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->code[i];
        cr_dual a = r[in->a], b = r[in->b], c = r[in->c], k = cr_dual_const(in->k),
                *d = &r[in->dst];
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
            *d = cr_dual_div(a, d_cpsq(1.5, b));
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
            *d = cr_dual_div(k, d_cpsq(1.5, a));
            break;
        case O_SADD:
            *d = cr_dual_add(a, a);
            break;
        case O_SSUB:
            *d = cr_dual_sub(a, a);
            break;
        case O_SMUL:
            *d = cr_dual_mul(a, a);
            break;
        case O_SDIV:
            *d = cr_dual_div(d_cpsq(1.5, a), d_cpsq(1.5, a));
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
            *d = cr_dual_log(d_cpsq(1.0, a));
            break;
        case O_SQRT1:
            *d = cr_dual_sqrt(d_cpsq(1.0, a));
            break;
        case O_ASIN:
            *d = cr_dual_asin(cr_dual_mul(cr_dual_const(0.5), d_call(p, &cr_fn_tanh, &a, 1, &st)));
            break;
        case O_TANH:
            *d = d_call(p, &cr_fn_tanh, &a, 1, &st);
            break;
        case O_ATAN:
            *d = d_call(p, &cr_fn_atan, &a, 1, &st);
            break;
        case O_LOGISTIC:
            *d = d_call(p, &cr_fn_logistic, &a, 1, &st);
            break;
        case O_ERF:
            *d = d_call(p, &cr_fn_erf, &a, 1, &st);
            break;
        case O_SINH:
            *d = d_call(p, &cr_fn_sinh, &a, 1, &st);
            break;
        case O_EXPM1:
            *d = d_call(p, &cr_fn_expm1, &a, 1, &st);
            break;
        case O_LOG1P: {
            cr_dual s = cr_dual_mul(a, a);
            *d = d_call(p, &cr_fn_log1p, &s, 1, &st);
            break;
        }
        case O_CBRT: {
            cr_dual s = d_cpsq(1.5, a);
            *d = d_call(p, &cr_fn_cbrt, &s, 1, &st);
            break;
        }
        case O_HYPOT2: {
            cr_dual args[2] = {a, d_cpsq(0.5, b)};
            *d = d_call(p, &cr_fn_hypot, args, 2, &st);
            break;
        }
        case O_POW: {
            cr_dual args[2] = {d_cpsq(1.5, a), d_call(p, &cr_fn_tanh, &b, 1, &st)};
            *d = d_call(p, &cr_fn_pow, args, 2, &st);
            break;
        }
        case O_ATAN2: {
            cr_dual args[2] = {a, d_cpsq(1.0, b)};
            *d = d_call(p, &cr_fn_atan2, args, 2, &st);
            break;
        }
        case O_MULADD: {
            cr_dual args[3] = {a, b, c};
            *d = d_call(p, &cr_fn_muladd, args, 3, &st);
            break;
        }
        case O_SINCOS: {
            cr_status s = cr_dual_call(NULL, p->arena, &cr_fn_sincos, &a, 1, d, 2);
            if (s != CR_OK && st == CR_OK)
                st = s;
            break;
        }
        case O_HYPOT3: {
            cr_dual args[3] = {a, b, cr_dual_const(1.0)};
            *d = d_call(p, &cr_fn_hypot, args, 3, &st);
            break;
        }
        case O_EVALPOLY: {
            cr_dual args[4] = {d_call(p, &cr_fn_tanh, &a, 1, &st), k, b, cr_dual_const(0.5)};
            *d = d_call(p, &cr_fn_evalpoly, args, 4, &st);
            break;
        }
        default:
            st = CR_EINVAL;
            break; /* user rules and arrays: not dual_ok */
        }
    }
    for (size_t i = 0; i < p->m; i++)
        y[i] = r[p->out[i]];
    return st;
}

/* ---- Central differences of the plain interpreter ----------------------------------------------
 */

/* Fourth-order central differences (points at +-h, +-2h) along a direction, with an error
 * estimate from the same stencil at 2h and at h/2 (fd_err4 of test_random.h).
 * Inputs and registers are of order 1 (inputs in [-2, 2], registers bounded by BOUND), so one
 * absolute step serves every program: h = 1e-3 leaves a truncation error of about
 * h^4 |f^(5)| / 30 ~ 3e-14 |f^(5)| and a rounding error of about 1.5 eps |f| / h ~ 3e-13 |f|
 * (plus the interpreter's own rounding, amplified by 1/h). */
#define FD_H  1e-3
#define FD_H2 2e-3 /* the mixed second differences: rounding eps |f| / h^2 ~ 6e-11 |f| */

typedef struct fdw {
    const prog *p;
    double *x; /* scratch point */
    double *y; /* m outputs */
} fdw;

/* D_v f(x) (all m outputs) with step h */
static void fd_dir(fdw *w, const double *x, const double *v, double h, double *out)
{
    const prog *p = w->p;
    for (size_t i = 0; i < p->m; i++)
        out[i] = 0;
    for (int s = 0; s < 4; s++) {
        for (size_t j = 0; j < p->nin; j++)
            w->x[j] = x[j] + k_fd_o[s] * h * v[j];
        plain_run(p, w->x, w->y);
        for (size_t i = 0; i < p->m; i++)
            out[i] += k_fd_c[s] * w->y[i] / h;
    }
}

/* D_v f(x) with its error estimate (m outputs each) */
static void fd_dir_err(fdw *w, const double *x, const double *v, double *d, double *err)
{
    double d2[MAX_OUT], dh[MAX_OUT];
    fd_dir(w, x, v, FD_H, d);
    fd_dir(w, x, v, 2 * FD_H, d2);
    fd_dir(w, x, v, FD_H / 2, dh);
    for (size_t i = 0; i < w->p->m; i++)
        err[i] = fd_err4(d[i], d2[i], dh[i]);
}

/* D_u D_v f(x) of output 0 with step h */
static double fd_mixed(fdw *w, const double *x, const double *u, const double *v, double h)
{
    const prog *p = w->p;
    double s = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            for (size_t j = 0; j < p->nin; j++)
                w->x[j] = x[j] + k_fd_o[a] * h * u[j] + k_fd_o[b] * h * v[j];
            plain_run(p, w->x, w->y);
            s += k_fd_c[a] * k_fd_c[b] * w->y[0];
        }
    return s / (h * h);
}

/* ---- Comparison ------------------------------------------------------------------------------ */

/* Value tolerance: the engines evaluate the same rows as the interpreter, but a rule may
 * associate differently (a kernel's four interleaved sums, hypot of three), and the
 * difference is carried through the program: relative 1e-10. */
#define RT_VALUE 1e-10
/* Against central differences (plus 8 times the estimated error): 1e-7 of the vector's scale
 * for first derivatives, 1e-5 for second (mixed differences lose two more digits). */
#define RT_FD1 1e-7
#define RT_FD2 1e-5
/* Between modes computing the same quantity from the same rows: 1e-11 (the order of the
 * sums differs: a sweep adds adjoints in another order than a forward sweep or a dual). */
#define RT_MODE 1e-11

/* ---- The modes --------------------------------------------------------------------------------
 */

typedef struct env {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_engine *eng;
    size_t programs; /* run so far */
    size_t hvps;     /* H v compared with central differences */
    const char *modes[24];
    size_t runs[24]; /* programs each mode ran on */
    cr_tape *tapes[3];
} env;

/* Enter a mode (named in failure messages; counted for the summary). */
static void set_mode(env *e, ck *c, const char *mode)
{
    c->mode = mode;
    size_t i = 0;
    while (i < 24 && e->modes[i] != NULL && strcmp(e->modes[i], mode) != 0)
        i++;
    if (i < 24) {
        e->modes[i] = mode;
        e->runs[i]++;
    }
}

static void random_point(uint64_t *s, double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rnd_range(s, -XMAX, XMAX);
}

/* The tape of these flags (0, CR_TAPE_FORWARD or CR_TAPE_SECOND_ORDER), reset: one of each
 * serves every program, so that recordings of every length reuse the chunks of the last. */
static cr_tape *new_tape(env *e, uint32_t flags)
{
    cr_tape **t = &e->tapes[flags];
    if (*t == NULL) {
        cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags, .engine = e->eng};
        assert_int_equal(cr_tape_new(e->ctx, &tp, t), CR_OK);
    }
    cr_tape_reset(*t);
    return *t;
}

/* Record p at x on t with the inputs made partly as one run (cr_tape_inputs) and partly one
 * by one (consecutive inputs share one record on a first-order tape). */
static cr_status record(const prog *p, cr_tape *t, const double *x, cr_var *xs, cr_var *ys)
{
    cr_tape_reset(t);
    cr_status st = cr_tape_inputs(t, x, p->split, xs);
    if (st != CR_OK)
        return st;
    for (size_t j = p->split; j < p->nin; j++)
        xs[j] = cr_tape_input(t, x[j]);
    return tape_run(p, t, xs, cr_av_const(NULL), ys, p->m);
}

/* Every mode on a scalar program. */
static void run_scalar(env *e, prog *p, ck *c)
{
    size_t n = p->nin, m = p->m;
    uint64_t s = p->seed ^ 0x5DEECE66Du;
    double *buf = calloc(16 * n + 8 * n * m + 64, sizeof *buf);
    cr_var *xs = calloc(n, sizeof *xs);
    assert_non_null(buf);
    assert_non_null(xs);
    double *x = buf, *g = x + n, *g2 = g + n, *fdg = g2 + n, *fde = fdg + n, *v = fde + n,
           *hv = v + n, *fdh = hv + n, *fdhe = fdh + n, *xb = fdhe + n, *ej = xb + n, *scr = ej + n,
           *J = scr + n, *fdJ = J + n * m, *fdJe = fdJ + n * m, *H = fdJe + n * m;
    double y[MAX_OUT], yw[MAX_OUT], tmp[MAX_OUT], tmpe[MAX_OUT], ybar[MAX_OUT];
    cr_var ys[MAX_OUT];
    fdw w = {p, scr, tmp};
    double fyw[MAX_OUT];
    w.y = fyw;
    p->arena = e->arena;

    random_point(&s, x, n);
    plain_run(p, x, yw);
    /* The reference Jacobian, row by row from the columns D_{e_j} f. */
    for (size_t j = 0; j < n; j++) {
        memset(ej, 0, n * sizeof *ej);
        ej[j] = 1;
        fd_dir_err(&w, x, ej, tmp, tmpe);
        for (size_t i = 0; i < m; i++) {
            fdJ[i * n + j] = tmp[i];
            fdJe[i * n + j] = tmpe[i];
        }
    }
    memcpy(fdg, fdJ, n * sizeof *fdg);
    memcpy(fde, fdJe, n * sizeof *fde);

    /* cr_tape_value_and_gradient */
    cr_tape *t = new_tape(e, 0);
    set_mode(e, c, "value_and_gradient");
    double y0;
    cr_status st = cr_tape_value_and_gradient(t, prog_fn, p, x, n, &y0, g);
    ck_status(c, "call", st, cr_tape_errmsg(t));
    cmp_vec(c, "y", &y0, yw, NULL, 1, RT_VALUE);
    cmp_vec(c, "grad", g, fdg, fde, n, RT_FD1);

    /* cr_tape_gradient, cr_tape_vjp, cr_tape_jacobian on one recording of m outputs */
    set_mode(e, c, "gradient/vjp/jacobian");
    st = record(p, t, x, xs, ys);
    ck_status(c, "record", st, cr_tape_errmsg(t));
    for (size_t i = 0; i < m; i++)
        y[i] = ys[i].v;
    cmp_vec(c, "y", y, yw, NULL, m, RT_VALUE);
    st = cr_tape_gradient(t, ys[0], xs, n, g2);
    ck_status(c, "gradient", st, cr_tape_errmsg(t));
    cmp_vec(c, "gradient~value_and_gradient", g2, g, NULL, n, RT_MODE);
    /* the inputs asked in reverse order, one of them twice, with a constant */
    cr_var *xr = calloc(n + 2, sizeof *xr);
    double *gr = calloc(n + 2, sizeof *gr), grw[2] = {0, 0};
    assert_non_null(xr);
    assert_non_null(gr);
    for (size_t j = 0; j < n; j++)
        xr[j] = xs[n - 1 - j];
    xr[n] = xs[0];
    xr[n + 1] = cr_const(1.0);
    st = cr_tape_gradient(t, ys[0], xr, n + 2, gr);
    ck_status(c, "gradient", st, cr_tape_errmsg(t));
    for (size_t j = 0; j < n; j++)
        cmp_vec(c, "gradient of reversed inputs", &gr[j], &g[n - 1 - j], NULL, 1, 0);
    grw[0] = g[0];
    cmp_vec(c, "gradient of a repeated input and a constant", &gr[n], grw, NULL, 2, 0);
    free(xr);
    free(gr);
    st = cr_tape_jacobian(t, ys, m, xs, n, J);
    ck_status(c, "jacobian", st, cr_tape_errmsg(t));
    cmp_vec(c, "jacobian", J, fdJ, fdJe, n * m, RT_FD1);
    for (int rep = 0; rep < 2; rep++) {
        double want[64], wante[64];
        for (size_t i = 0; i < m; i++)
            ybar[i] = rnd_range(&s, -2, 2);
        st = cr_tape_vjp(t, ys, ybar, m, xs, n, xb);
        ck_status(c, "vjp", st, cr_tape_errmsg(t));
        double *wv = n <= 64 ? want : NULL;
        if (wv == NULL)
            break;
        for (size_t j = 0; j < n; j++) {
            want[j] = 0;
            wante[j] = 0;
            double jt = 0;
            for (size_t i = 0; i < m; i++) {
                want[j] += ybar[i] * fdJ[i * n + j];
                wante[j] += fabs(ybar[i]) * fdJe[i * n + j];
                jt += ybar[i] * J[i * n + j];
            }
            tmp[0] = jt;
            cmp_vec(c, "vjp~jacobian", &xb[j], tmp, NULL, 1, RT_MODE);
        }
        cmp_vec(c, "vjp", xb, want, wante, n, RT_FD1);
    }

    /* cr_tape_jvp on a forward tape */
    set_mode(e, c, "jvp");
    t = new_tape(e, CR_TAPE_FORWARD);
    st = record(p, t, x, xs, ys);
    ck_status(c, "record", st, cr_tape_errmsg(t));
    for (size_t i = 0; i < m; i++)
        y[i] = ys[i].v;
    cmp_vec(c, "y", y, yw, NULL, m, RT_VALUE);
    random_point(&s, v, n);
    double jv[MAX_OUT], fjv[MAX_OUT], fjve[MAX_OUT], Jv[MAX_OUT];
    st = cr_tape_jvp(t, xs, v, n, ys, m, jv);
    ck_status(c, "jvp", st, cr_tape_errmsg(t));
    fd_dir_err(&w, x, v, fjv, fjve);
    cmp_vec(c, "jvp", jv, fjv, fjve, m, RT_FD1);
    for (size_t i = 0; i < m; i++) {
        Jv[i] = 0;
        for (size_t j = 0; j < n; j++)
            Jv[i] += J[i * n + j] * v[j];
    }
    cmp_vec(c, "jvp~jacobian", jv, Jv, NULL, m, RT_MODE);

    /* dual numbers: cr_dual_jvp (and cr_dual_derivative for one input) */
    if (p->dual_ok) {
        set_mode(e, c, "dual");
        double dy[MAX_OUT], djv[MAX_OUT];
        st = cr_dual_jvp(prog_dual, p, x, n, v, m, e->arena, dy, djv);
        ck_status(c, "cr_dual_jvp", st, cr_ctx_errmsg(e->ctx));
        cmp_vec(c, "y", dy, yw, NULL, m, RT_VALUE);
        cmp_vec(c, "dual_jvp", djv, fjv, fjve, m, RT_FD1);
        cmp_vec(c, "dual_jvp~tape_jvp", djv, jv, NULL, m, RT_MODE);
        if (n == 1 && m == 1) {
            double d1, dd1;
            st = cr_dual_derivative(prog_dual, p, x[0], &d1, &dd1);
            ck_status(c, "cr_dual_derivative", st, cr_ctx_errmsg(e->ctx));
            cmp_vec(c, "dual_derivative", &dd1, g, NULL, 1, RT_MODE);
        }
        cr_arena_reset(e->arena);
    }

    /* second order: cr_tape_hvp, cr_tape_hessian */
    t = new_tape(e, CR_TAPE_SECOND_ORDER);
    st = record(p, t, x, xs, ys);
    /* (rules kept as pullbacks: second derivatives from differences of their partials) */
    set_mode(e, c, "hvp");
    ck_status(c, "record", st, cr_tape_errmsg(t));
    y0 = ys[0].v;
    cmp_vec(c, "y", &y0, yw, NULL, 1, RT_VALUE);
    st = cr_tape_hvp(t, ys[0], xs, n, v, hv, g2);
    ck_status(c, "hvp", st, cr_tape_errmsg(t));
    cmp_vec(c, "hvp grad~value_and_gradient", g2, g, NULL, n, RT_MODE);
    bool fd2 = n * p->nins <= 40000; /* 32 n evaluations of the program */
    if (fd2) {
        for (size_t j = 0; j < n; j++) {
            memset(ej, 0, n * sizeof *ej);
            ej[j] = 1;
            fdh[j] = fd_mixed(&w, x, ej, v, FD_H2);
            fdhe[j] = fd_err4(fdh[j], fd_mixed(&w, x, ej, v, 2 * FD_H2),
                              fd_mixed(&w, x, ej, v, FD_H2 / 2));
        }
        cmp_vec(c, "hvp", hv, fdh, fdhe, n, RT_FD2);
        e->hvps++;
    }
    if (n <= 4) {
        set_mode(e, c, "hessian");
        st = cr_tape_hessian(t, ys[0], xs, n, H);
        ck_status(c, "hessian", st, cr_tape_errmsg(t));
        double Hv[8];
        for (size_t i = 0; i < n; i++) {
            Hv[i] = 0;
            for (size_t j = 0; j < n; j++)
                Hv[i] += H[i * n + j] * v[j];
        }
        cmp_vec(c, "hessian v~hvp", Hv, hv, NULL, n, 1e-10);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < i; j++)
                cmp_vec(c, "hessian symmetric", &H[i * n + j], &H[j * n + i], NULL, 1, 1e-10);
    }

    /* prepared gradient at new points (and at the recording's) */
    set_mode(e, c, "prepared_gradient");
    cr_prepared *pg = NULL;
    st = cr_prepare_gradient(e->ctx, e->eng, prog_fn, p, x, n, &pg);
    ck_status(c, "prepare", st, cr_ctx_errmsg(e->ctx));
    if (st == CR_OK) {
        st = cr_prepared_value_and_gradient(pg, x, n, &y0, g2);
        ck_status(c, "replay at x", st, cr_ctx_errmsg(e->ctx));
        cmp_vec(c, "y", &y0, yw, NULL, 1, RT_VALUE);
        cmp_vec(c, "grad~value_and_gradient", g2, g, NULL, n, RT_MODE);
        for (int rep = 0; rep < 3; rep++) {
            double *x2 = v; /* reuse: v is not needed again before the prepared H v */
            random_point(&s, x2, n);
            st = cr_prepared_value_and_gradient(pg, x2, n, &y0, g2);
            ck_status(c, "replay", st, cr_ctx_errmsg(e->ctx));
            plain_run(p, x2, tmp);
            cmp_vec(c, "y", &y0, tmp, NULL, 1, RT_VALUE);
            for (size_t j = 0; j < n; j++) {
                memset(ej, 0, n * sizeof *ej);
                ej[j] = 1;
                double dd[MAX_OUT], de[MAX_OUT];
                fd_dir_err(&w, x2, ej, dd, de);
                fdg[j] = dd[0];
                fde[j] = de[0];
            }
            cmp_vec(c, "grad", g2, fdg, fde, n, RT_FD1);
        }
    }
    cr_prepared_free(pg);

    /* prepared H v at new points and directions */
    /* (rules kept as pullbacks: replayed with differences of their partials, as recorded) */
    set_mode(e, c, p->generic ? "prepared_hvp (pullbacks)" : "prepared_hvp");
    pg = NULL;
    st = cr_prepare_hvp(e->ctx, e->eng, prog_fn, p, x, n, &pg);
    {
        ck_status(c, "prepare", st, cr_ctx_errmsg(e->ctx));
        for (int rep = 0; st == CR_OK && rep < 2; rep++) {
            double *x2 = xb;
            random_point(&s, x2, n);
            random_point(&s, v, n);
            st = cr_prepared_hvp(pg, x2, n, v, hv, &y0, g2);
            ck_status(c, "replay", st, cr_ctx_errmsg(e->ctx));
            plain_run(p, x2, tmp);
            cmp_vec(c, "y", &y0, tmp, NULL, 1, RT_VALUE);
            double g3[64];
            if (n <= 64) {
                st = cr_prepared_value_and_gradient(pg, x2, n, &y0, g3);
                ck_status(c, "value_and_gradient on a prepared H v", st, cr_ctx_errmsg(e->ctx));
                cmp_vec(c, "grad~prepared value_and_gradient", g2, g3, NULL, n, RT_MODE);
            }
            for (size_t j = 0; j < n; j++) {
                memset(ej, 0, n * sizeof *ej);
                ej[j] = 1;
                double dd[MAX_OUT], de[MAX_OUT];
                fd_dir_err(&w, x2, ej, dd, de);
                fdg[j] = dd[0];
                fde[j] = de[0];
                if (fd2) {
                    fdh[j] = fd_mixed(&w, x2, ej, v, FD_H2);
                    fdhe[j] = fd_err4(fdh[j], fd_mixed(&w, x2, ej, v, 2 * FD_H2),
                                      fd_mixed(&w, x2, ej, v, FD_H2 / 2));
                }
            }
            cmp_vec(c, "grad", g2, fdg, fde, n, RT_FD1);
            if (fd2)
                cmp_vec(c, "hvp", hv, fdh, fdhe, n, RT_FD2);
            /* against a second-order tape at the same point and direction */
            cr_tape *t2 = new_tape(e, CR_TAPE_SECOND_ORDER);
            st = record(p, t2, x2, xs, ys);
            ck_status(c, "record", st, cr_tape_errmsg(t2));
            double hv2[64];
            if (n <= 64) {
                st = cr_tape_hvp(t2, ys[0], xs, n, v, hv2, NULL);
                ck_status(c, "hvp", st, cr_tape_errmsg(t2));
                cmp_vec(c, "prepared hvp~tape hvp", hv, hv2, NULL, n, 1e-10);
            }
        }
    }
    cr_prepared_free(pg);
    free(buf);
    free(xs);
}

/* Every array mode on an array program (inputs: the elements of X). */
static void run_array(env *e, prog *p, ck *c)
{
    size_t n = p->nin;
    uint64_t s = p->seed ^ 0x2545F4914F6CDD1Du;
    double *buf = calloc(12 * n + 16, sizeof *buf);
    assert_non_null(buf);
    double *x = buf, *g = x + n, *g2 = g + n, *v = g2 + n, *hv = v + n, *hv2 = hv + n,
           *ej = hv2 + n, *scr = ej + n, *x2 = scr + n, *g3 = x2 + n;
    double yw[MAX_OUT], tmp[MAX_OUT], tmpe[MAX_OUT], fy[MAX_OUT];
    fdw w = {p, scr, fy};
    /* Central differences of every component for small arrays, of 6 chosen ones otherwise
     * (the modes are compared with each other on all of them). */
    size_t nchk = n <= 16 ? n : 6, chk[16];
    for (size_t i = 0; i < nchk; i++)
        chk[i] = n <= 16 ? i : rnd_below(&s, n);

    random_point(&s, x, n);
    plain_run(p, x, yw);
    cr_array X = cr_array_vector(x, n), G = cr_array_vector(g, n), G2 = cr_array_vector(g2, n);
    const cr_array *xa[1] = {&X};
    cr_array *ga[1] = {&G}, *ga2[1] = {&G2};

    /* reference: the gradient's checked components, and H v along v */
    double fdg[16], fde[16], fdh[16], fdhe[16], got[16];
    random_point(&s, v, n);
    bool fd2 = n * p->nins <= 20000;
    for (size_t i = 0; i < nchk; i++) {
        memset(ej, 0, n * sizeof *ej);
        ej[chk[i]] = 1;
        fd_dir_err(&w, x, ej, tmp, tmpe);
        fdg[i] = tmp[0];
        fde[i] = tmpe[0];
        if (fd2) {
            fdh[i] = fd_mixed(&w, x, ej, v, FD_H2);
            fdhe[i] = fd_err4(fdh[i], fd_mixed(&w, x, ej, v, 2 * FD_H2),
                              fd_mixed(&w, x, ej, v, FD_H2 / 2));
        }
    }

    set_mode(e, c, "value_and_gradient_arrays");
    cr_tape *t = new_tape(e, 0);
    double y0;
    cr_status st = cr_tape_value_and_gradient_arrays(t, prog_afn, p, xa, 1, &y0, ga);
    ck_status(c, "call", st, cr_tape_errmsg(t));
    cmp_vec(c, "y", &y0, yw, NULL, 1, RT_VALUE);
    for (size_t i = 0; i < nchk; i++)
        got[i] = g[chk[i]];
    cmp_vec(c, "grad", got, fdg, fde, nchk, RT_FD1);

    /* forward tape: cr_tape_ajvp, against the gradient */
    set_mode(e, c, "ajvp");
    t = new_tape(e, CR_TAPE_FORWARD);
    cr_avar XV = cr_tape_array_input(t, &X);
    cr_var ys[MAX_OUT];
    st = tape_run(p, t, NULL, XV, ys, 1);
    ck_status(c, "record", st, cr_tape_errmsg(t));
    cr_array V = cr_array_vector(v, n);
    const cr_array *va[1] = {&V};
    double jv = 0, gv = 0;
    st = cr_tape_ajvp(t, NULL, NULL, 0, &XV, va, 1, &ys[0], 1, &jv, NULL, 0, NULL);
    ck_status(c, "ajvp", st, cr_tape_errmsg(t));
    for (size_t j = 0; j < n; j++)
        gv += g[j] * v[j];
    cmp_vec(c, "ajvp~gradient", &jv, &gv, NULL, 1, RT_MODE);
    if (n <= 64) {
        fd_dir_err(&w, x, v, tmp, tmpe);
        cmp_vec(c, "ajvp", &jv, tmp, tmpe, 1, RT_FD1);
    }

    /* second order: cr_tape_ahvp */
    set_mode(e, c, "ahvp");
    t = new_tape(e, CR_TAPE_SECOND_ORDER);
    XV = cr_tape_array_input(t, &X);
    st = tape_run(p, t, NULL, XV, ys, 1);
    cr_array HV = cr_array_vector(hv, n), HV2 = cr_array_vector(hv2, n);
    cr_array *hva[1] = {&HV}, *hva2[1] = {&HV2};
    ck_status(c, "record", st, cr_tape_errmsg(t));
    st = cr_tape_ahvp(t, ys[0], NULL, 0, NULL, NULL, &XV, 1, va, hva);
    ck_status(c, "ahvp", st, cr_tape_errmsg(t));
    if (fd2) {
        for (size_t i = 0; i < nchk; i++)
            got[i] = hv[chk[i]];
        cmp_vec(c, "hvp", got, fdh, fdhe, nchk, RT_FD2);
    }

    /* prepared gradient of arrays at the recording's point and new ones */
    set_mode(e, c, "prepared_gradient_arrays");
    cr_prepared *pg = NULL;
    st = cr_prepare_gradient_arrays(e->ctx, e->eng, prog_afn, p, xa, 1, &pg);
    ck_status(c, "prepare", st, cr_ctx_errmsg(e->ctx));
    if (st == CR_OK) {
        st = cr_prepared_value_and_gradient_arrays(pg, xa, 1, &y0, ga2);
        ck_status(c, "replay at x", st, cr_ctx_errmsg(e->ctx));
        cmp_vec(c, "y", &y0, yw, NULL, 1, RT_VALUE);
        cmp_vec(c, "grad~value_and_gradient_arrays", g2, g, NULL, n, RT_MODE);
        cr_array X2 = cr_array_vector(x2, n);
        const cr_array *xa2[1] = {&X2};
        for (int rep = 0; st == CR_OK && rep < 2; rep++) {
            random_point(&s, x2, n);
            st = cr_prepared_value_and_gradient_arrays(pg, xa2, 1, &y0, ga2);
            ck_status(c, "replay", st, cr_ctx_errmsg(e->ctx));
            plain_run(p, x2, tmp);
            cmp_vec(c, "y", &y0, tmp, NULL, 1, RT_VALUE);
            for (size_t i = 0; i < nchk; i++) {
                memset(ej, 0, n * sizeof *ej);
                ej[chk[i]] = 1;
                double de[MAX_OUT];
                fd_dir_err(&w, x2, ej, tmp, de);
                fdg[i] = tmp[0];
                fde[i] = de[0];
                got[i] = g2[chk[i]];
            }
            cmp_vec(c, "grad", got, fdg, fde, nchk, RT_FD1);
        }
    }
    cr_prepared_free(pg);

    /* prepared H v of arrays at new points and directions, against a second-order tape */
    set_mode(e, c, p->generic ? "prepared_hvp_arrays (pullbacks)" : "prepared_hvp_arrays");
    pg = NULL;
    st = cr_prepare_hvp_arrays(e->ctx, e->eng, prog_afn, p, xa, 1, &pg);
    {
        ck_status(c, "prepare", st, cr_ctx_errmsg(e->ctx));
        cr_array X2 = cr_array_vector(x2, n), G3 = cr_array_vector(g3, n);
        const cr_array *xa2[1] = {&X2};
        cr_array *ga3[1] = {&G3};
        for (int rep = 0; st == CR_OK && rep < 2; rep++) {
            random_point(&s, x2, n);
            random_point(&s, v, n);
            st = cr_prepared_hvp_arrays(pg, xa2, 1, va, hva, &y0, ga3);
            ck_status(c, "replay", st, cr_ctx_errmsg(e->ctx));
            plain_run(p, x2, tmp);
            cmp_vec(c, "y", &y0, tmp, NULL, 1, RT_VALUE);
            t = new_tape(e, CR_TAPE_SECOND_ORDER);
            XV = cr_tape_array_input(t, &X2);
            st = tape_run(p, t, NULL, XV, ys, 1);
            ck_status(c, "record", st, cr_tape_errmsg(t));
            st = cr_tape_ahvp(t, ys[0], NULL, 0, NULL, NULL, &XV, 1, va, hva2);
            ck_status(c, "ahvp", st, cr_tape_errmsg(t));
            cmp_vec(c, "prepared hvp~tape ahvp", hv, hv2, NULL, n, 1e-10);
            st = cr_tape_gradient_arrays(t, ys[0], NULL, 0, NULL, &XV, 1, ga2);
            ck_status(c, "gradient_arrays", st, cr_tape_errmsg(t));
            cmp_vec(c, "prepared grad~tape gradient", g3, g2, NULL, n, RT_MODE);
            if (fd2) {
                for (size_t i = 0; i < nchk; i++) {
                    memset(ej, 0, n * sizeof *ej);
                    ej[chk[i]] = 1;
                    fdh[i] = fd_mixed(&w, x2, ej, v, FD_H2);
                    fdhe[i] = fd_err4(fdh[i], fd_mixed(&w, x2, ej, v, 2 * FD_H2),
                                      fd_mixed(&w, x2, ej, v, FD_H2 / 2));
                    got[i] = hv[chk[i]];
                }
                cmp_vec(c, "hvp", got, fdh, fdhe, nchk, RT_FD2);
            }
        }
    }
    cr_prepared_free(pg);
    free(buf);
}

/* ---- Drivers ------------------------------------------------------------------------------------
 */

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    if (e == NULL || cr_ctx_new(NULL, &e->ctx) != CR_OK ||
        cr_arena_new(e->ctx, NULL, &e->arena) != CR_OK ||
        cr_engine_new(e->ctx, NULL, &e->eng) != CR_OK)
        return -1;
    static const cr_argspec f64_2[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &uf_fn, .nargs = 2, .args = f64_2, .rrule = uf_rrule};
    if (cr_engine_from_rrule(e->eng, &def) != CR_OK)
        return -1;
    def.fn = &polar_fn;
    def.rrule = polar_rrule;
    if (cr_engine_from_rrule(e->eng, &def) != CR_OK)
        return -1;
    g_uf_v = cr_value_function(&uf_fn, NULL);
    g_polar_v = cr_value_function(&polar_fn, NULL);
    g_uf = &g_uf_v;
    g_polar = &g_polar_v;
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    for (int i = 0; i < 3; i++)
        cr_tape_free(e->tapes[i]);
    cr_engine_free(e->eng);
    cr_arena_free(e->arena);
    cr_ctx_free(e->ctx);
    free(e);
    return 0;
}

/* A group's programs: seed i is splitmix of (group, i); the seed alone fixes the program's
 * kind and length (its top bits), so CR_RANDOM_SEED replays it in any group. */
typedef struct group {
    uint64_t base;
    size_t dflt;
} group;

static void run_seed(env *e, uint64_t seed)
{
    uint64_t s = seed;
    unsigned kind = (unsigned)(rnd_next(&s) % 100);
    double r = rnd_unit(&s);
    /* kind < 60: scalar program; < 80: scalar with arrays over constants; else array inputs */
    bool arrays = kind >= 60, arr_inputs = kind >= 80;
    size_t len = r < 0.7    ? 1 + rnd_below(&s, 40)
                 : r < 0.93 ? 40 + rnd_below(&s, 300)
                            : 400 + rnd_below(&s, 2600);
    if (arr_inputs && len > 200)
        len = 200;
    prog p;
    gen_prog(&p, rnd_next(&s), len, arrays, arr_inputs);
    p.seed = seed;
    ck c = {.p = &p, .seed = p.seed, .test = "test_tape_random", .mode = ""};
    if (getenv("CR_RANDOM_DUMP") != NULL)
        dump_prog(&p);
    if (arr_inputs)
        run_array(e, &p, &c);
    else
        run_scalar(e, &p, &c);
    if (c.failed != 0 && getenv("CR_RANDOM_DUMP") == NULL)
        dump_prog(&p);
    free_prog(&p);
    e->programs++;
    assert_int_equal(c.failed, 0);
}

static void run_group(void **state, uint64_t base, size_t dflt)
{
    env *e = *state;
    uint64_t one = replay_seed();
    if (one != 0) {
        if (base == 1)
            run_seed(e, one);
        return;
    }
    size_t n = programs(dflt);
    size_t from = programs_from();
    for (size_t i = from; i < from + n; i++) {
        uint64_t s = base * 0x100000000u + i;
        run_seed(e, rnd_next(&s) | 1);
    }
    if (getenv("CR_RANDOM_PROGRAMS") != NULL) {
        printf("%zu programs (%zu H v checked against differences); programs per mode:\n",
               e->programs, e->hvps);
        for (size_t i = 0; i < 24 && e->modes[i] != NULL; i++)
            printf("  %-32s %zu\n", e->modes[i], e->runs[i]);
    }
}

static void test_random_programs(void **state)
{
    run_group(state, 1, 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_programs),
    };
    return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
