/*
 * Random programs through the engine's user-function machinery (Mooncake's rule tools),
 * cross-examined in every engine mode against central differences of a plain-C evaluation of
 * the same program (docs/engine.md, "Random programs through user functions").
 *
 * A seeded generator (splitmix64, tests/test_random.h) builds a program over a register file:
 * 1 to 6 scalar inputs (in some programs also the three real fields of a C struct), then
 * instructions of inline scalar arithmetic and calls of user functions, and 1 to 3 outputs.
 * The functions come from a pool of four smooth base functions of 1 to 3 arguments and 0 to 3
 * compound functions per program (small random programs of their own that call base
 * functions and earlier compounds: nesting depth up to 3), called in every way the engine
 * supports: recorded inline, through an overlay, as a primitive with a user rrule + frule
 * (cr_engine_from_rrule) or with an rrule only (cr_registry_add), as an overlay closure (its
 * field a constant on the tape), zero-adjoint (cr_engine_zero_adjoint) and non-differentiable
 * (cr_registry_non_differentiable), through a rule that calls rrule_via_ad / frule_via_ad (of
 * the function's overlay, or of a closure whose captured value is an argument: its gradient is
 * the closure's cotangent), and through rules applying map, sum(f, x), foldl (with and
 * without init), accumulate and broadcast (one array, an array and a scalar) with a user
 * function (overlay, rule, closure, compound) or a scalar-table row; the same higher-order
 * rules are also recorded on the engine's tape (cr_tape_acall) over an array variable made of
 * the arguments. In some programs the struct's gradient is written back into the struct
 * (cr_tape_gradient_struct).
 *
 * Modes: cr_tape_value_and_gradient, cr_tape_jacobian, cr_tape_gradient of every output,
 * cr_tape_vjp, cr_tape_jvp (forward tape), cr_dual_jvp (user functions through
 * cr_dual_call), cr_tape_hvp (second-order tape) and cr_prepare_gradient / cr_prepare_hvp
 * replayed at a new point; programs with a record second order cannot take must be refused
 * (CR_EUNIMPL and a message). CR_RANDOM_SEED replays one program, CR_RANDOM_DUMP prints it,
 * CR_RANDOM_PROGRAMS runs more and prints what ran.
 *
 * The plain-C reference evaluates the same program; a zero-adjoint or non-differentiable
 * result is frozen at the evaluation point for the differences (its derivative contribution
 * must be zero: inputs that reach an output only through such calls must get a gradient of
 * exactly 0).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <chainrules/tape_inline.h>

#include "test_random.h"
#include "test_util.h"

/* ---- The base functions: plain C, tape, dual, partials (one math, three spellings) ------- */

#define NBASE    4
#define MAXCOMP  3
#define NCALLEE  (NBASE + MAXCOMP)
#define MAXHOF   6
#define MAXARG   8
#define MAX_OUT  3
#define MAXINS   48
#define MAXREG   (16 + MAXINS)
#define MAXIN    9 /* 6 scalars + 3 struct fields */
#define XMAX     1.5
#define FZ_CAP   (1u << 14)
#define CL_K_MUL 0.25

static const int k_base_arity[NBASE] = {1, 2, 3, 1};
static const char *const k_base_name[NBASE] = {"w", "m", "t", "q"};

/* w(x) = x/(1+x^2) + sin x;  m(a,b) = a sin b/(1+a^2) + cos b;
 * t(a,b,c) = sin(ab) + c/(2+a^2+c^2);  q(x) = log(1+x^2) */
static double base_c(int id, const double *x)
{
    switch (id) {
    case 0:
        return x[0] / (1 + x[0] * x[0]) + sin(x[0]);
    case 1:
        return x[0] * sin(x[1]) / (1 + x[0] * x[0]) + cos(x[1]);
    case 2:
        return sin(x[0] * x[1]) + x[2] / (2 + x[0] * x[0] + x[2] * x[2]);
    default:
        return log(1 + x[0] * x[0]);
    }
}

/* The partials, for the user rules (the same math, differentiated by hand). */
static void base_partials(int id, const double *x, double *d)
{
    switch (id) {
    case 0: {
        double u = 1 + x[0] * x[0];
        d[0] = (1 - x[0] * x[0]) / (u * u) + cos(x[0]);
        break;
    }
    case 1: {
        double u = 1 + x[0] * x[0];
        d[0] = sin(x[1]) * (1 - x[0] * x[0]) / (u * u);
        d[1] = x[0] * cos(x[1]) / u - sin(x[1]);
        break;
    }
    case 2: {
        double D = 2 + x[0] * x[0] + x[2] * x[2], c = cos(x[0] * x[1]);
        d[0] = x[1] * c - 2 * x[0] * x[2] / (D * D);
        d[1] = x[0] * c;
        d[2] = (2 + x[0] * x[0] - x[2] * x[2]) / (D * D);
        break;
    }
    default:
        d[0] = 2 * x[0] / (1 + x[0] * x[0]);
        break;
    }
}

static cr_var base_t(cr_tape *t, int id, const cr_var *x)
{
    cr_var one = cr_const(1);
    switch (id) {
    case 0:
        return cr_add(t, cr_div(t, x[0], cr_add(t, one, cr_mul(t, x[0], x[0]))), cr_sin(t, x[0]));
    case 1:
        return cr_add(
            t, cr_div(t, cr_mul(t, x[0], cr_sin(t, x[1])), cr_add(t, one, cr_mul(t, x[0], x[0]))),
            cr_cos(t, x[1]));
    case 2:
        return cr_add(t, cr_sin(t, cr_mul(t, x[0], x[1])),
                      cr_div(t, x[2],
                             cr_add(t, cr_const(2),
                                    cr_add(t, cr_mul(t, x[0], x[0]), cr_mul(t, x[2], x[2])))));
    default:
        return cr_log(t, cr_add(t, one, cr_mul(t, x[0], x[0])));
    }
}

static cr_dual base_d(int id, const cr_dual *x)
{
    cr_dual one = cr_dual_const(1);
    switch (id) {
    case 0:
        return cr_dual_add(cr_dual_div(x[0], cr_dual_add(one, cr_dual_mul(x[0], x[0]))),
                           cr_dual_sin(x[0]));
    case 1:
        return cr_dual_add(cr_dual_div(cr_dual_mul(x[0], cr_dual_sin(x[1])),
                                       cr_dual_add(one, cr_dual_mul(x[0], x[0]))),
                           cr_dual_cos(x[1]));
    case 2:
        return cr_dual_add(
            cr_dual_sin(cr_dual_mul(x[0], x[1])),
            cr_dual_div(x[2], cr_dual_add(cr_dual_const(2), cr_dual_add(cr_dual_mul(x[0], x[0]),
                                                                        cr_dual_mul(x[2], x[2])))));
    default:
        return cr_dual_log(cr_dual_add(one, cr_dual_mul(x[0], x[0])));
    }
}

/* ---- Programs ------------------------------------------------------------------------------ */

enum op { O_ADD, O_MUL, O_SIN, O_DIV, O_EXP, O_SQRT, O_CALL, O_COUNT };
static const char *const k_op_name[O_COUNT] = {"add", "mul", "sin", "div", "exp", "sqrt", "call"};

enum way {
    W_INLINE,  /* the function's tape code run on the tape (recorded inside) */
    W_OVERLAY, /* cr_tape_call of a function with an overlay */
    W_RULE,    /* a primitive: rrule + frule by cr_engine_from_rrule (base functions) */
    W_REGRULE, /* a primitive: an rrule only, by cr_registry_add (base functions) */
    W_CLOSURE, /* an overlay closure, its field a constant on the tape (base functions) */
    W_ZERO,    /* zero-adjoint */
    W_NONDIFF, /* non-differentiable (a registry declaration) */
    W_VIA,     /* a rule calling rrule_via_ad / frule_via_ad on the function's overlay */
    W_VIACL,   /* the same on a closure whose field is the first argument (base functions) */
    W_HOF,     /* a rule applying a higher-order array rule with a user function */
    W_ACALL,   /* the higher-order rule recorded on the tape (cr_tape_acall) over an array
                  variable made of the arguments */
    W_COUNT
};
static const char *const k_way_name[W_COUNT] = {"inline",         "overlay", "rule",    "regrule",
                                                "closure",        "zero",    "nondiff", "via_ad",
                                                "via_ad_closure", "hof",     "acall"};

enum hofop { H_MAP, H_SUM, H_FOLDL, H_FOLDL0, H_ACCUM, H_BCAST1, H_BCAST2, H_COUNT };
static const char *const k_hof_name[H_COUNT] = {"map",        "sum",      "foldl",     "foldl_init",
                                                "accumulate", "bcast(X)", "bcast(X,s)"};
enum fkind { F_OVERLAY, F_RULE, F_CLOSURE, F_ROW, F_COUNT };
static const char *const k_fkind_name[F_COUNT] = {"overlay", "rule", "closure", "row"};

typedef struct ins {
    uint8_t op, way, callee, nargs, hof;
    uint16_t a[MAXARG];
} ins;

typedef struct body {
    size_t nin, nins, nout;
    ins code[MAXINS];
    uint16_t out[MAX_OUT];
} body;

typedef struct hofspec {
    uint8_t op, fkind, callee, k; /* k: the rule's scalar arguments */
    double w[MAXARG];             /* weights of the array results' elements */
    cr_array wa;                  /* the weights as an array (of the array result's length) */
} hofspec;

typedef struct cl_self {
    double c;
    int k;
} cl_self;

typedef struct sp_inner {
    double b;
    float f;
} sp_inner;
typedef struct sparams {
    double a;
    int k;
    sp_inner in;
} sparams;

typedef struct prog {
    uint64_t seed;
    size_t nsc;      /* scalar inputs */
    bool has_struct; /* 3 more inputs: the struct's real fields */
    bool so_only;    /* calls only in ways that second-order tapes record */
    size_t nin, m;
    size_t ncomp, nhof;
    body main;
    body comp[MAXCOMP];
    int comp_arity[MAXCOMP];
    hofspec hofs[MAXHOF];
    cl_self cl;          /* the closures' captured values */
    bool uses[W_COUNT];  /* ways used anywhere */
    bool second_ok;      /* no record the second-order tapes refuse */
    bool so_either;      /* second-order tapes may record or refuse it (below) */
    bool so_unheld;      /* a rule kept as a pullback with a zero-adjoint call inside: its
                            second derivatives see that call's value change (not compared) */
    bool prep_second_ok; /* nor cr_prepare_hvp (its replays evaluate zero-adjoint calls of variables
                            again: what they feed is recorded) */
    bool prep_either;    /* cr_prepare_hvp may take or refuse it (as so_either) */
    bool used_hof[H_COUNT];
} prog;

static prog *g_prog; /* the program the engine's user functions belong to */

static int callee_arity(const prog *p, int c)
{
    return c < NBASE ? k_base_arity[c] : p->comp_arity[c - NBASE];
}

static size_t hof_farity(int op)
{
    return op == H_MAP || op == H_SUM || op == H_BCAST1 ? 1 : 2;
}

/* ---- Generation ---------------------------------------------------------------------------- */

typedef struct gen {
    uint64_t s;
    prog *p;
} gen;

/* A callee below `limit` of the given arity (0: any), or -1. */
static int pick_callee(gen *g, int limit, int arity, bool base_only)
{
    int c[NCALLEE], n = 0;
    for (int i = 0; i < (base_only ? NBASE : limit); i++)
        if (arity == 0 || callee_arity(g->p, i) == arity)
            c[n++] = i;
    return n == 0 ? -1 : c[rnd_below(&g->s, (size_t)n)];
}

static void gen_body(gen *g, body *b, size_t nin, size_t nins, size_t nout, int limit)
{
    prog *p = g->p;
    b->nin = nin;
    b->nins = nins;
    b->nout = nout;
    for (size_t i = 0; i < nins; i++) {
        ins *in = &b->code[i];
        memset(in, 0, sizeof *in);
        size_t nreg = nin + i;
        /* operands: mostly recent registers */
        for (int j = 0; j < MAXARG; j++) {
            size_t back = rnd_below(&g->s, 4) == 0 ? nreg : (nreg < 4 ? nreg : 4);
            in->a[j] = (uint16_t)(nreg - 1 - rnd_below(&g->s, back));
        }
        in->op = (uint8_t)(rnd_below(&g->s, 2) == 0 ? O_CALL : rnd_below(&g->s, O_CALL));
        if (in->op != O_CALL)
            continue;
        static const uint8_t so_ways[5] = {W_INLINE, W_OVERLAY, W_CLOSURE, W_ZERO, W_NONDIFF};
        unsigned way =
            p->so_only ? so_ways[rnd_below(&g->s, 5)] : (unsigned)rnd_below(&g->s, W_COUNT);
        bool hofway = way == W_HOF || way == W_ACALL;
        if (hofway && p->nhof == MAXHOF)
            way = W_OVERLAY;
        in->way = (uint8_t)way;
        bool base_only = way == W_RULE || way == W_REGRULE || way == W_CLOSURE || way == W_VIACL;
        if (way == W_HOF || way == W_ACALL) {
            hofspec *h = &p->hofs[p->nhof];
            in->hof = (uint8_t)p->nhof++;
            h->op = (uint8_t)rnd_below(&g->s, H_COUNT);
            int ar = (int)hof_farity(h->op);
            h->fkind = (uint8_t)rnd_below(&g->s, F_COUNT);
            int c = pick_callee(g, limit, ar, h->fkind == F_RULE || h->fkind == F_CLOSURE);
            if (c < 0)
                c = pick_callee(g, NBASE, ar, true);
            h->callee = (uint8_t)c;
            size_t lo = h->op == H_FOLDL0 || h->op == H_BCAST2 ? 2 : 1;
            h->k = (uint8_t)(lo + rnd_below(&g->s, 6));
            if (h->fkind == F_ROW && ar == 2 && h->k > 3) /* foldl(*) of at most 3 factors */
                h->k = 3;
            for (size_t j = 0; j < MAXARG; j++)
                h->w[j] = rnd_range(&g->s, -1, 1) / h->k;
            in->nargs = h->k;
            p->used_hof[h->op] = true;
            h->wa = cr_array_vector(
                h->w, (size_t)h->k - (size_t)(h->op == H_FOLDL0 || h->op == H_BCAST2 ? 1 : 0));
            continue;
        }
        int c = pick_callee(g, limit, 0, base_only);
        in->callee = (uint8_t)c;
        in->nargs = (uint8_t)(callee_arity(p, c) + (way == W_VIACL ? 1 : 0));
    }
    for (size_t o = 0; o < nout; o++)
        b->out[o] = (uint16_t)(o == 0 || nins == 0 ? nin + nins - 1 : nin + rnd_below(&g->s, nins));
}

static void body_mask(const prog *p, const body *b, const uint32_t *xm, uint32_t *ym, bool zero);

/* Whether second-order tapes record the higher-order rule on the tape: a broadcast, map or
 * sum of a scalar-table function (foldl and accumulate have no second-order form). */
static bool acall_second(const hofspec *h)
{
    return h->fkind == F_ROW && h->op != H_FOLDL && h->op != H_FOLDL0 && h->op != H_ACCUM;
}

/* Whether user function c (a compound) makes a zero-adjoint or non-differentiable call,
 * itself or in what it calls. */
static bool calls_zero(const prog *p, int c)
{
    if (c < NBASE)
        return false;
    const body *b = &p->comp[c - NBASE];
    for (size_t i = 0; i < b->nins; i++) {
        const ins *in = &b->code[i];
        if (in->op != O_CALL)
            continue;
        bool hw = in->way == W_HOF || in->way == W_ACALL;
        if (in->way == W_ZERO || in->way == W_NONDIFF ||
            calls_zero(p, hw ? p->hofs[in->hof].callee : in->callee))
            return true;
    }
    return false;
}

/* Ways used, and whether a record a second-order tape refuses is made: an array function
 * without a second-order form called with a variable (a call of constants only is evaluated,
 * not recorded), here or in a compound recorded from here. xm: the inputs' masks (0: a
 * constant). */
static bool body_scan(prog *p, const body *b, const uint32_t *xm, bool recorded, bool zero,
                      bool over)
{
    bool ok = true;
    uint32_t r[MAXREG];
    for (size_t j = 0; j < b->nin; j++)
        r[j] = xm[j];
    for (size_t i = 0; i < b->nins; i++) {
        const ins *in = &b->code[i];
        uint32_t am[MAXARG], any = 0;
        size_t na = in->op == O_CALL ? in->nargs : 2;
        for (size_t j = 0; j < na; j++)
            any |= am[j] = r[in->a[j]];
        if (in->op == O_CALL) {
            p->uses[in->way] = true;
            /* A scalar rule kept as a pullback: a second-order tape and cr_prepare_hvp take its
             * second derivatives from its partials, in any number of variable arguments; an
             * array function without a second-order form is refused. */
            bool pullback = in->way == W_RULE || in->way == W_REGRULE || in->way == W_VIA ||
                            in->way == W_VIACL || in->way == W_HOF;
            bool generic = in->way == W_ACALL && !acall_second(&p->hofs[in->hof]);
            if (generic && recorded && any != 0)
                ok = false;
            bool hw = in->way == W_HOF || in->way == W_ACALL;
            int c = hw ? p->hofs[in->hof].callee : in->callee;
            /* Its second derivatives are differences of its partials at nearby points, where
             * a zero-adjoint value inside it is evaluated again, not held as the reference
             * holds it. */
            if (pullback && !zero && recorded && any != 0 && calls_zero(p, c))
                p->so_unheld = true;
            bool comp = c >= NBASE && !(hw && p->hofs[in->hof].fkind == F_ROW);
            if (comp) {
                bool rec = recorded && any != 0 && (in->way == W_INLINE || in->way == W_OVERLAY);
                if (!body_scan(p, &p->comp[c - NBASE], am, rec, zero, over))
                    ok = false;
            }
        }
        /* over: whether the register may be a variable on the tape (a superset of the
         * registers with derivatives: a result of a rule kept as a pullback is a variable
         * whenever an argument is, even where a zero-adjoint call inside makes its
         * derivative zero) */
        if (over) {
            r[b->nin + i] =
                !zero && in->op == O_CALL && (in->way == W_ZERO || in->way == W_NONDIFF) ? 0 : any;
            continue;
        }
        /* the register's mask, as body_mask gives it */
        body tmp = {b->nin + i, 1, 1, {*in}, {0}};
        for (size_t j = 0; j < na; j++)
            tmp.code[0].a[j] = in->a[j];
        tmp.out[0] = (uint16_t)(b->nin + i);
        body_mask(p, &tmp, r, &r[b->nin + i], zero);
    }
    return ok;
}

static void gen_prog(prog *p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    gen g = {seed, p};
    p->nsc = 1 + rnd_below(&g.s, 6);
    p->has_struct = rnd_below(&g.s, 10) < 3;
    p->so_only = rnd_below(&g.s, 10) < 3; /* only ways second-order tapes take */
    p->nin = p->nsc + (p->has_struct ? 3 : 0);
    p->m = 1 + rnd_below(&g.s, MAX_OUT);
    p->ncomp = rnd_below(&g.s, MAXCOMP + 1);
    p->cl.c = rnd_range(&g.s, -1, 1);
    p->cl.k = (int)rnd_below(&g.s, 3);
    for (size_t j = 0; j < p->ncomp; j++) {
        p->comp_arity[j] = 1 + (int)rnd_below(&g.s, 3);
        gen_body(&g, &p->comp[j], (size_t)p->comp_arity[j], 1 + rnd_below(&g.s, 5), 1,
                 NBASE + (int)j);
    }
    size_t len =
        rnd_below(&g.s, 5) == 0 ? 10 + rnd_below(&g.s, MAXINS - 9) : 1 + rnd_below(&g.s, 12);
    gen_body(&g, &p->main, p->nin, len, p->m, NBASE + (int)p->ncomp);
    uint32_t xm[MAXIN];
    for (size_t j = 0; j < p->nin; j++)
        xm[j] = 1u << j;
    p->second_ok = body_scan(p, &p->main, xm, true, false, false);
    p->prep_second_ok = body_scan(p, &p->main, xm, true, true, false);
    /* A second-order tape refuses a rule kept as a pullback by its count of variables on the
     * tape, which lies between the count of arguments with derivatives (second_ok) and that
     * of arguments that may be variables: where the two predictions differ, either outcome. */
    p->so_either = p->second_ok != body_scan(p, &p->main, xm, true, false, true);
    p->prep_either = p->prep_second_ok != body_scan(p, &p->main, xm, true, true, true);
}

static void dump_body(const prog *p, const body *b, const char *name)
{
    printf("  %s(%zu inputs):\n", name, b->nin);
    for (size_t i = 0; i < b->nins; i++) {
        const ins *in = &b->code[i];
        printf("    r%zu = %s", b->nin + i, k_op_name[in->op]);
        if (in->op == O_CALL) {
            if (in->way == W_HOF || in->way == W_ACALL) {
                const hofspec *h = &p->hofs[in->hof];
                printf(" %s#%u %s f=%s", k_way_name[in->way], in->hof, k_hof_name[h->op],
                       k_fkind_name[h->fkind]);
                if (h->fkind != F_ROW)
                    printf(" %s%d", h->callee < NBASE ? k_base_name[h->callee] : "c",
                           h->callee < NBASE ? 0 : h->callee - NBASE);
            } else
                printf(" %s %s%d", k_way_name[in->way],
                       in->callee < NBASE ? k_base_name[in->callee] : "c",
                       in->callee < NBASE ? 0 : in->callee - NBASE);
        }
        size_t na = in->op == O_CALL ? in->nargs : 2;
        printf(" (");
        for (size_t j = 0; j < na; j++)
            printf("%sr%u", j ? ", " : "", in->a[j]);
        printf(")\n");
    }
    printf("    out:");
    for (size_t o = 0; o < b->nout; o++)
        printf(" r%u", b->out[o]);
    printf("\n");
}

static void dump_prog(const prog *p)
{
    printf("program seed=%#" PRIx64 ": %zu scalar inputs%s, %zu outputs, closure c=%g k=%d\n",
           p->seed, p->nsc, p->has_struct ? " + struct {a, in.b, in.f}" : "", p->m, p->cl.c,
           p->cl.k);
    char nm[32];
    for (size_t j = 0; j < p->ncomp; j++) {
        snprintf(nm, sizeof nm, "c%zu", j);
        dump_body(p, &p->comp[j], nm);
    }
    dump_body(p, &p->main, "main");
}

/* ---- The plain-C reference ----------------------------------------------------------------- */

/* Zero-adjoint results frozen for the differences: recorded at the point (FZ_REC), then
 * read back in the same order (FZ_USE). */
enum { FZ_REC = 1, FZ_USE = 2 };
typedef struct fz {
    int mode;
    int depth;
    size_t idx;
    double *v;
} fz;

static void body_c(const prog *p, const body *b, const double *x, double *y, fz *z);

static double callee_c(const prog *p, int c, const double *a, fz *z)
{
    if (c < NBASE)
        return base_c(c, a);
    double y;
    body_c(p, &p->comp[c - NBASE], a, &y, z);
    return y;
}

static double hof_f_c(const prog *p, const hofspec *h, const double *a, fz *z)
{
    switch (h->fkind) {
    case F_ROW:
        return hof_farity(h->op) == 1 ? sin(a[0]) : a[0] * a[1];
    case F_CLOSURE:
        return p->cl.c * base_c(h->callee, a) + CL_K_MUL * p->cl.k;
    default:
        return callee_c(p, h->callee, a, z);
    }
}

static double hof_c(const prog *p, const hofspec *h, const double *x, fz *z)
{
    size_t k = h->k;
    double s = 0, acc, ab[2];
    switch (h->op) {
    case H_MAP:
    case H_BCAST1:
        for (size_t i = 0; i < k; i++)
            s += h->w[i] * hof_f_c(p, h, &x[i], z);
        return s;
    case H_SUM:
        for (size_t i = 0; i < k; i++)
            s += hof_f_c(p, h, &x[i], z);
        return s;
    case H_FOLDL:
        acc = x[0];
        for (size_t i = 1; i < k; i++) {
            ab[0] = acc;
            ab[1] = x[i];
            acc = hof_f_c(p, h, ab, z);
        }
        return acc;
    case H_FOLDL0:
        acc = x[k - 1];
        for (size_t i = 0; i + 1 < k; i++) {
            ab[0] = acc;
            ab[1] = x[i];
            acc = hof_f_c(p, h, ab, z);
        }
        return acc;
    case H_ACCUM:
        acc = x[0];
        s = h->w[0] * acc;
        for (size_t i = 1; i < k; i++) {
            ab[0] = acc;
            ab[1] = x[i];
            acc = hof_f_c(p, h, ab, z);
            s += h->w[i] * acc;
        }
        return s;
    default: /* H_BCAST2 */
        for (size_t i = 0; i + 1 < k; i++) {
            ab[0] = x[i];
            ab[1] = x[k - 1];
            s += h->w[i] * hof_f_c(p, h, ab, z);
        }
        return s;
    }
}

/* A call by one of the ways (z NULL: nothing frozen, as the primals evaluate). */
static double call_c(const prog *p, int way, int c, int hof, const double *a, fz *z)
{
    switch (way) {
    case W_CLOSURE:
        return p->cl.c * base_c(c, a) + CL_K_MUL * p->cl.k;
    case W_VIACL:
        return a[0] * base_c(c, a + 1) + CL_K_MUL * p->cl.k;
    case W_HOF:
    case W_ACALL:
        return hof_c(p, &p->hofs[hof], a, z);
    case W_ZERO:
    case W_NONDIFF: {
        if (z == NULL)
            return callee_c(p, c, a, NULL);
        if (z->mode == FZ_USE && z->depth == 0)
            return z->v[z->idx++];
        z->depth++;
        double v = callee_c(p, c, a, z);
        z->depth--;
        if (z->mode == FZ_REC && z->depth == 0) {
            assert_true(z->idx < FZ_CAP);
            z->v[z->idx++] = v;
        }
        return v;
    }
    default:
        return callee_c(p, c, a, z);
    }
}

static void body_c(const prog *p, const body *b, const double *x, double *y, fz *z)
{
    double r[MAXREG], a[MAXARG];
    for (size_t j = 0; j < b->nin; j++)
        r[j] = x[j];
    for (size_t i = 0; i < b->nins; i++) {
        const ins *in = &b->code[i];
        double u = r[in->a[0]], v = r[in->a[1]], o;
        switch (in->op) {
        case O_ADD:
            o = 0.5 * (u + v);
            break;
        case O_MUL:
            o = u * v / (1 + v * v);
            break;
        case O_SIN:
            o = sin(u) * v;
            break;
        case O_DIV:
            o = u / (1.5 + v * v);
            break;
        case O_EXP:
            o = exp(-u * u) + 0.5 * v;
            break;
        case O_SQRT:
            o = 0.5 * sqrt(1 + u * u) - 0.25 * v;
            break;
        default:
            for (size_t j = 0; j < in->nargs; j++)
                a[j] = r[in->a[j]];
            o = call_c(p, in->way, in->callee, in->hof, a, z);
            break;
        }
        r[b->nin + i] = o;
    }
    for (size_t o = 0; o < b->nout; o++)
        y[o] = r[b->out[o]];
}

/* Which inputs each output may depend on through differentiable paths (bit j: input j). */
static void body_mask(const prog *p, const body *b, const uint32_t *xm, uint32_t *ym, bool zero)
{
    uint32_t r[MAXREG];
    for (size_t j = 0; j < b->nin; j++)
        r[j] = xm[j];
    for (size_t i = 0; i < b->nins; i++) {
        const ins *in = &b->code[i];
        uint32_t o = 0;
        if (in->op != O_CALL)
            o = r[in->a[0]] | r[in->a[1]];
        else if ((in->way == W_ZERO || in->way == W_NONDIFF) && !zero)
            o = 0;
        else if ((in->way == W_INLINE || in->way == W_OVERLAY || in->way == W_VIA) &&
                 in->callee >= NBASE) {
            uint32_t am[MAXARG];
            for (size_t j = 0; j < in->nargs; j++)
                am[j] = r[in->a[j]];
            body_mask(p, &p->comp[in->callee - NBASE], am, &o, zero);
        } else
            for (size_t j = 0; j < in->nargs; j++)
                o |= r[in->a[j]];
        r[b->nin + i] = o;
    }
    for (size_t o = 0; o < b->nout; o++)
        ym[o] = r[b->out[o]];
}

/* ---- The engine's user functions ----------------------------------------------------------- */

typedef struct fdesc {
    uint8_t way, idx;
} fdesc;

static cr_function fn_tab[W_COUNT][NCALLEE];
static fdesc fd_tab[W_COUNT][NCALLEE];
static char fn_names[W_COUNT][NCALLEE][32];
static cr_value v_tab[W_COUNT][NCALLEE];
static const cr_field cl_fields[2] = {{"c", offsetof(cl_self, c), CR_KIND_F64, NULL},
                                      {"k", offsetof(cl_self, k), CR_KIND_I32, NULL}};
static const cr_type cl_type = {"cl", sizeof(cl_self), 2, cl_fields};
static const cr_field sp_inner_fields[2] = {{"b", offsetof(sp_inner, b), CR_KIND_F64, NULL},
                                            {"f", offsetof(sp_inner, f), CR_KIND_F32, NULL}};
static const cr_type sp_inner_type = {"sp_inner", sizeof(sp_inner), 2, sp_inner_fields};
static const cr_field sp_fields[3] = {
    {"a", offsetof(sparams, a), CR_KIND_F64, NULL},
    {"k", offsetof(sparams, k), CR_KIND_I32, NULL},
    {"in", offsetof(sparams, in), CR_KIND_STRUCT, &sp_inner_type}};
static const cr_type sp_type = {"sparams", sizeof(sparams), 3, sp_fields};

static double num(const cr_value *v)
{
    return v->kind == CR_KIND_F32 ? (double)v->u.f32 : v->u.f64;
}

static double tan_real(cr_tangent t)
{
    cr_tangent u;
    if (cr_tangent_unthunk(t, &u) != CR_OK)
        return (double)NAN;
    return u.tag == CR_TAN_F64 ? u.u.f64 : u.tag == CR_TAN_F32 ? (double)u.u.f32 : 0.0;
}

static double tan_elem(cr_tangent t, size_t i)
{
    cr_tangent u;
    if (cr_tangent_unthunk(t, &u) != CR_OK)
        return (double)NAN;
    return u.tag == CR_TAN_ARRAY ? creal(cr_array_get_linear(u.u.arr, i)) : 0.0;
}

/* Every user function's primal: the plain-C evaluation of its way (nothing frozen). */
static cr_status any_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    const fdesc *d = fv->u.func.fn->udata;
    double a[MAXARG];
    for (size_t j = 0; j < nargs && j < MAXARG; j++)
        a[j] = num(&args[j]);
    if (d->way == W_CLOSURE) {
        const cl_self *s = fv->u.func.self;
        *out = cr_value_f64(s->c * base_c(d->idx, a) + CL_K_MUL * s->k);
        return CR_OK;
    }
    bool hof = d->way == W_HOF || d->way == W_ACALL;
    *out = cr_value_f64(call_c(g_prog, d->way == W_ZERO || d->way == W_NONDIFF ? W_OVERLAY : d->way,
                               hof ? 0 : d->idx, hof ? d->idx : 0, a, NULL));
    return CR_OK;
}

static cr_status body_t(const prog *p, const body *b, cr_tape *t, const cr_var *x, cr_var *y);

static cr_var callee_t(const prog *p, cr_tape *t, int c, const cr_var *a)
{
    if (c < NBASE)
        return base_t(t, c, a);
    cr_var y = cr_const((double)NAN);
    (void)body_t(p, &p->comp[c - NBASE], t, a, &y);
    return y;
}

/* The overlay of every callee */
static cr_status ov_impl(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    y[0] = callee_t(g_prog, t, (int)(intptr_t)env, x);
    return cr_tape_status(t);
}

/* The closures' overlay: x[0] the field c, then the arguments (k read from the program). */
static cr_status cl_impl(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    y[0] = cr_add(t, cr_mul(t, x[0], base_t(t, (int)(intptr_t)env, x + 1)),
                  cr_const(CL_K_MUL * g_prog->cl.k));
    return cr_tape_status(t);
}

/* -- the base functions' rules -- */
typedef struct base_env {
    int id;
    double x[3];
} base_env;

static cr_status base_pb(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                         void *env)
{
    (void)arena;
    const base_env *e = env;
    double d[3], g = tan_real(*dy);
    base_partials(e->id, e->x, d);
    dx[0] = cr_tangent_none();
    for (size_t j = 1; j < nx; j++)
        dx[j] = cr_tangent_f64(g * d[j - 1]);
    return CR_OK;
}

static cr_status base_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    const fdesc *d = fv->u.func.fn->udata;
    base_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(base_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->id = d->idx;
    for (size_t j = 0; j < nargs; j++)
        e->x[j] = num(&args[j]);
    *y = cr_value_f64(base_c(e->id, e->x));
    *pb = (cr_pullback){base_pb, e, "base_pullback", nargs + 1};
    return CR_OK;
}

static cr_status base_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *fv, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)udata;
    const fdesc *d = fv->u.func.fn->udata;
    double x[3], p[3], s = 0;
    for (size_t j = 0; j < nargs; j++)
        x[j] = num(&args[j]);
    base_partials(d->idx, x, p);
    for (size_t j = 0; j < nargs; j++)
        s += p[j] * tan_real(dargs[1 + j]);
    *y = cr_value_f64(base_c(d->idx, x));
    *dy = cr_tangent_f64(s);
    return CR_OK;
}

/* -- via_ad: the function's overlay (or a closure with the first argument as its field) -- */
typedef struct via_env {
    cr_pullback inner;
    bool closure;
} via_env;

static cr_status via_pb(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena, void *env)
{
    const via_env *e = env;
    cr_tangent d[MAXARG + 1];
    size_t ni = e->closure ? nx - 1 : nx;
    cr_status st = cr_pullback_call(arena, &e->inner, dy, d, ni);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    size_t o = 1;
    if (e->closure) {
        cr_tangent dc = d[0].tag == CR_TAN_STRUCT ? cr_tangent_field(d[0], 0) : cr_tangent_zero();
        dx[o++] = cr_tangent_f64(tan_real(dc));
    }
    for (size_t j = 1; j < ni; j++)
        dx[o++] = d[j];
    return CR_OK;
}

static cr_status via_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)udata;
    const fdesc *d = fv->u.func.fn->udata;
    via_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(via_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->closure = d->way == W_VIACL;
    cr_value g;
    if (e->closure) {
        cl_self *s = cr_arena_alloc(arena, sizeof *s, _Alignof(cl_self));
        if (s == NULL)
            return CR_ENOMEM;
        s->c = num(&args[0]);
        s->k = g_prog->cl.k;
        g = cr_value_function(&fn_tab[W_CLOSURE][d->idx], s);
        args++;
        nargs--;
    } else
        g = v_tab[W_OVERLAY][d->idx];
    cr_status st = cr_rrule_via_ad(cfg, arena, &g, args, nargs, y, &e->inner);
    *pb = (cr_pullback){via_pb, e, "via_pullback", nargs + 1 + (e->closure ? 1 : 0)};
    return st;
}

static cr_status via_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                           const cr_value *fv, const cr_value *args, size_t nargs, cr_value *y,
                           cr_tangent *dy, const void *udata)
{
    (void)udata;
    const fdesc *d = fv->u.func.fn->udata;
    cr_tangent da[MAXARG + 1];
    cr_value g;
    if (d->way == W_VIACL) {
        cl_self *s = cr_arena_alloc(arena, sizeof *s, _Alignof(cl_self));
        if (s == NULL)
            return CR_ENOMEM;
        s->c = num(&args[0]);
        s->k = g_prog->cl.k;
        g = cr_value_function(&fn_tab[W_CLOSURE][d->idx], s);
        static const char *const names[1] = {"c"};
        cr_status st = cr_tangent_struct(arena, &cl_type, names, &dargs[1], 1, &da[0]);
        if (st != CR_OK)
            return st;
        for (size_t j = 1; j < nargs; j++)
            da[j] = dargs[j + 1];
        return cr_frule_via_ad(cfg, arena, da, &g, args + 1, nargs - 1, y, dy);
    }
    g = v_tab[W_OVERLAY][d->idx];
    da[0] = cr_tangent_zero();
    for (size_t j = 0; j < nargs; j++)
        da[j + 1] = dargs[j + 1];
    return cr_frule_via_ad(cfg, arena, da, &g, args, nargs, y, dy);
}

/* -- the higher-order rules with a user function -- */
typedef struct hof_env {
    const hofspec *h;
    cr_pullback inner;
    size_t len; /* the array's elements */
    bool array_result;
} hof_env;

static cr_value hof_f(const prog *p, const hofspec *h)
{
    switch (h->fkind) {
    case F_ROW:
        return hof_farity(h->op) == 1
                   ? cr_value_function(cr_registry_find(cr_registry_builtin(), "sin"), NULL)
                   : cr_fn_mul;
    case F_RULE:
        return v_tab[W_RULE][h->callee];
    case F_CLOSURE:
        return cr_value_function(&fn_tab[W_CLOSURE][h->callee], (void *)&p->cl);
    default:
        return v_tab[W_OVERLAY][h->callee];
    }
}

static const cr_value *hof_rule_fn(int op)
{
    switch (op) {
    case H_MAP:
        return &cr_fn_map;
    case H_SUM:
        return &cr_fn_sum;
    case H_FOLDL:
    case H_FOLDL0:
        return &cr_fn_foldl;
    case H_ACCUM:
        return &cr_fn_accumulate;
    default:
        return &cr_fn_broadcast;
    }
}

static cr_status hof_pb(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena, void *env)
{
    const hof_env *e = env;
    const hofspec *h = e->h;
    double g = tan_real(*dy);
    cr_tangent ry,
        d[4] = {cr_tangent_zero(), cr_tangent_zero(), cr_tangent_zero(), cr_tangent_zero()};
    if (e->array_result) {
        cr_array *W;
        size_t sh = e->len;
        cr_status st = cr_array_new(arena, CR_DT_F64, 1, &sh, &W);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < e->len; i++)
            ((double *)W->data)[i] = g * h->w[i];
        ry = cr_tangent_array(W);
    } else
        ry = cr_tangent_f64(g);
    size_t nh = h->op == H_FOLDL0 || h->op == H_BCAST2 ? 3 : 2;
    cr_status st = cr_pullback_call(arena, &e->inner, &ry, d, nh + 1);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    for (size_t i = 0; i < e->len; i++)
        dx[1 + i] = cr_tangent_f64(tan_elem(d[2], i));
    if (nh == 3) /* the init of foldl, the scalar of the broadcast */
        dx[nx - 1] = cr_tangent_f64(tan_real(d[3]));
    return CR_OK;
}

static cr_status hof_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)udata;
    const fdesc *d = fv->u.func.fn->udata;
    const hofspec *h = &g_prog->hofs[d->idx];
    hof_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(hof_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->h = h;
    bool extra = h->op == H_FOLDL0 || h->op == H_BCAST2;
    e->len = nargs - (extra ? 1 : 0);
    e->array_result = h->op == H_MAP || h->op == H_ACCUM || h->op == H_BCAST1 || h->op == H_BCAST2;
    cr_array *X;
    size_t sh = e->len;
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, &sh, &X);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < e->len; i++)
        ((double *)X->data)[i] = num(&args[i]);
    cr_value ha[3] = {hof_f(g_prog, h), cr_value_array(X),
                      extra ? cr_value_f64(num(&args[nargs - 1])) : cr_value_f64(0)};
    cr_value r;
    st = cr_rrule(cfg, arena, hof_rule_fn(h->op), ha, extra ? 3 : 2, &r, &e->inner);
    if (st != CR_OK)
        return st;
    if (e->array_result) {
        double s = 0;
        for (size_t i = 0; i < e->len; i++)
            s += h->w[i] * creal(cr_array_get_linear(r.u.arr, i));
        *y = cr_value_f64(s);
    } else
        *y = cr_value_f64(num(&r));
    *pb = (cr_pullback){hof_pb, e, "hof_pullback", nargs + 1};
    return CR_OK;
}

/* ---- The program on a tape and on duals ------------------------------------------------------ */

/* Unit vectors: g_unit[len][i] is e_i of length len. */
static double g_eye[MAXARG][MAXARG];
static cr_array g_unit[MAXARG + 1][MAXARG];

/* The higher-order rule recorded on the tape: X = sum_i a_i e_i (broadcasts of * and +),
 * then map / sum / foldl / accumulate / broadcast of the function over X (cr_tape_acall),
 * an array result reduced by a dot product with the weights. */
static cr_var acall_t(const prog *p, cr_tape *t, const hofspec *h, const cr_var *a)
{
    bool extra = h->op == H_FOLDL0 || h->op == H_BCAST2;
    size_t len = (size_t)h->k - (extra ? 1u : 0u);
    cr_avar X = cr_av_const(NULL);
    for (size_t i = 0; i < len; i++) {
        cr_targ ba[3] = {cr_targ_value(cr_fn_mul), cr_targ_var(a[i]),
                         cr_targ_arr(cr_av_const(&g_unit[len][i]))};
        cr_avar T = cr_tape_acall_a(t, &cr_fn_broadcast, ba, 3);
        if (i == 0) {
            X = T;
            continue;
        }
        cr_targ sa[3] = {cr_targ_value(cr_fn_add), cr_targ_arr(X), cr_targ_arr(T)};
        X = cr_tape_acall_a(t, &cr_fn_broadcast, sa, 3);
    }
    cr_targ ha[3] = {cr_targ_value(hof_f(p, h)), cr_targ_arr(X),
                     extra ? cr_targ_var(a[h->k - 1]) : cr_targ_var(cr_const(0))};
    const cr_value *fn = hof_rule_fn(h->op);
    if (h->op == H_SUM || h->op == H_FOLDL || h->op == H_FOLDL0)
        return cr_tape_acall_s(t, fn, ha, extra ? 3 : 2);
    cr_avar Y = cr_tape_acall_a(t, fn, ha, extra ? 3 : 2);
    return cr_av_dot(t, Y, cr_av_const(&h->wa));
}

static cr_var call_t(const prog *p, cr_tape *t, const ins *in, const cr_var *a)
{
    switch (in->way) {
    case W_INLINE:
        return callee_t(p, t, in->callee, a);
    case W_CLOSURE: {
        cr_value f = cr_value_function(&fn_tab[W_CLOSURE][in->callee], (void *)&p->cl);
        return cr_tape_call1(t, &f, a, in->nargs);
    }
    case W_HOF:
        return cr_tape_call1(t, &v_tab[W_HOF][in->hof], a, in->nargs);
    case W_ACALL:
        return acall_t(p, t, &p->hofs[in->hof], a);
    default:
        return cr_tape_call1(t, &v_tab[in->way][in->callee], a, in->nargs);
    }
}

static cr_status body_t(const prog *p, const body *b, cr_tape *t, const cr_var *x, cr_var *y)
{
    cr_var r[MAXREG], a[MAXARG];
    for (size_t j = 0; j < b->nin; j++)
        r[j] = x[j];
    for (size_t i = 0; i < b->nins; i++) {
        const ins *in = &b->code[i];
        cr_var u = r[in->a[0]], v = r[in->a[1]], o;
        switch (in->op) {
        case O_ADD:
            o = cr_mul(t, cr_const(0.5), cr_add(t, u, v));
            break;
        case O_MUL:
            o = cr_div(t, cr_mul(t, u, v), cr_add(t, cr_const(1), cr_mul(t, v, v)));
            break;
        case O_SIN:
            o = cr_mul(t, cr_sin(t, u), v);
            break;
        case O_DIV:
            o = cr_div(t, u, cr_add(t, cr_const(1.5), cr_mul(t, v, v)));
            break;
        case O_EXP:
            o = cr_add(t, cr_exp(t, cr_neg(t, cr_mul(t, u, u))), cr_mul(t, cr_const(0.5), v));
            break;
        case O_SQRT:
            o = cr_sub(
                t, cr_mul(t, cr_const(0.5), cr_sqrt(t, cr_add(t, cr_const(1), cr_mul(t, u, u)))),
                cr_mul(t, cr_const(0.25), v));
            break;
        default:
            for (size_t j = 0; j < in->nargs; j++)
                a[j] = r[in->a[j]];
            o = call_t(p, t, in, a);
            break;
        }
        r[b->nin + i] = o;
    }
    for (size_t o = 0; o < b->nout; o++)
        y[o] = r[b->out[o]];
    return cr_tape_status(t);
}

static cr_status prog_fn(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    const prog *p = env;
    cr_var ys[MAX_OUT];
    cr_status st = body_t(p, &p->main, t, x, ys);
    for (size_t o = 0; o < m && o < p->main.nout; o++)
        y[o] = ys[o];
    return st;
}

static const cr_config *g_cfg;
static cr_arena *g_darena;

static cr_status body_d(const prog *p, const body *b, const cr_dual *x, cr_dual *y);

static cr_status call_d(const prog *p, const ins *in, const cr_dual *a, cr_dual *o)
{
    if (in->way == W_INLINE) {
        if (in->callee < NBASE) {
            *o = base_d(in->callee, a);
            return CR_OK;
        }
        return body_d(p, &p->comp[in->callee - NBASE], a, o);
    }
    cr_value f = in->way == W_CLOSURE
                     ? cr_value_function(&fn_tab[W_CLOSURE][in->callee], (void *)&p->cl)
                 : in->way == W_HOF || in->way == W_ACALL ? v_tab[W_HOF][in->hof]
                                                          : v_tab[in->way][in->callee];
    return cr_dual_call(g_cfg, g_darena, &f, a, in->nargs, o, 1);
}

static cr_status body_d(const prog *p, const body *b, const cr_dual *x, cr_dual *y)
{
    cr_dual r[MAXREG], a[MAXARG];
    for (size_t j = 0; j < b->nin; j++)
        r[j] = x[j];
    for (size_t i = 0; i < b->nins; i++) {
        const ins *in = &b->code[i];
        cr_dual u = r[in->a[0]], v = r[in->a[1]], o;
        switch (in->op) {
        case O_ADD:
            o = cr_dual_mul(cr_dual_const(0.5), cr_dual_add(u, v));
            break;
        case O_MUL:
            o = cr_dual_div(cr_dual_mul(u, v), cr_dual_add(cr_dual_const(1), cr_dual_mul(v, v)));
            break;
        case O_SIN:
            o = cr_dual_mul(cr_dual_sin(u), v);
            break;
        case O_DIV:
            o = cr_dual_div(u, cr_dual_add(cr_dual_const(1.5), cr_dual_mul(v, v)));
            break;
        case O_EXP:
            o = cr_dual_add(cr_dual_exp(cr_dual_neg(cr_dual_mul(u, u))),
                            cr_dual_mul(cr_dual_const(0.5), v));
            break;
        case O_SQRT:
            o = cr_dual_sub(
                cr_dual_mul(cr_dual_const(0.5),
                            cr_dual_sqrt(cr_dual_add(cr_dual_const(1), cr_dual_mul(u, u)))),
                cr_dual_mul(cr_dual_const(0.25), v));
            break;
        default: {
            for (size_t j = 0; j < in->nargs; j++)
                a[j] = r[in->a[j]];
            cr_status st = call_d(p, in, a, &o);
            if (st != CR_OK)
                return st;
            break;
        }
        }
        r[b->nin + i] = o;
    }
    for (size_t o = 0; o < b->nout; o++)
        y[o] = r[b->out[o]];
    return CR_OK;
}

static cr_status prog_dual(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *env)
{
    (void)n;
    const prog *p = env;
    cr_dual ys[MAX_OUT];
    cr_status st = body_d(p, &p->main, x, ys);
    for (size_t o = 0; o < m && o < p->main.nout; o++)
        y[o] = ys[o];
    return st;
}

/* ---- Central differences ------------------------------------------------------------------- */

#define FD_H  1e-3
#define FD_H2 2e-3

typedef struct fdw {
    const prog *p;
    fz z;
} fdw;

/* Freeze the zero-adjoint results at x (and return the values there). */
static void fd_freeze(fdw *w, const double *x, double *y)
{
    w->z.mode = FZ_REC;
    w->z.idx = 0;
    w->z.depth = 0;
    body_c(w->p, &w->p->main, x, y, &w->z);
    w->z.mode = FZ_USE;
}

static void fd_eval(fdw *w, const double *x, double *y)
{
    w->z.idx = 0;
    body_c(w->p, &w->p->main, x, y, &w->z);
}

static void fd_dir(fdw *w, const double *x, const double *v, double h, double *out)
{
    const prog *p = w->p;
    double xp[MAXIN], y[MAX_OUT];
    for (size_t i = 0; i < p->m; i++)
        out[i] = 0;
    for (int s = 0; s < 4; s++) {
        for (size_t j = 0; j < p->nin; j++)
            xp[j] = x[j] + k_fd_o[s] * h * v[j];
        fd_eval(w, xp, y);
        for (size_t i = 0; i < p->m; i++)
            out[i] += k_fd_c[s] * y[i] / h;
    }
}

static void fd_dir_err(fdw *w, const double *x, const double *v, double *d, double *err)
{
    double d2[MAX_OUT], dh[MAX_OUT];
    fd_dir(w, x, v, FD_H, d);
    fd_dir(w, x, v, 2 * FD_H, d2);
    fd_dir(w, x, v, FD_H / 2, dh);
    for (size_t i = 0; i < w->p->m; i++)
        err[i] = fd_err4(d[i], d2[i], dh[i]);
}

/* The m x n Jacobian (row-major) and its error estimate */
static void fd_jac(fdw *w, const double *x, double *J, double *E)
{
    size_t n = w->p->nin, m = w->p->m;
    double e[MAXIN] = {0}, d[MAX_OUT], err[MAX_OUT];
    for (size_t j = 0; j < n; j++) {
        e[j] = 1;
        fd_dir_err(w, x, e, d, err);
        e[j] = 0;
        for (size_t i = 0; i < m; i++) {
            J[i * n + j] = d[i];
            E[i * n + j] = err[i];
        }
    }
}

static double fd_mixed(fdw *w, const double *x, const double *u, const double *v, double h)
{
    const prog *p = w->p;
    double xp[MAXIN], y[MAX_OUT], s = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            for (size_t j = 0; j < p->nin; j++)
                xp[j] = x[j] + k_fd_o[a] * h * u[j] + k_fd_o[b] * h * v[j];
            fd_eval(w, xp, y);
            s += k_fd_c[a] * k_fd_c[b] * y[0];
        }
    return s / (h * h);
}

/* ---- Comparison ------------------------------------------------------------------------------ */

/* Inputs outside mask must get exactly zero. */
static void ck_zeros(ck *c, const char *what, const double *g, size_t n, uint32_t mask)
{
    for (size_t j = 0; j < n; j++)
        if (!(mask & (1u << j)) && g[j] != 0.0) {
            ck_fail(c, "%s[%zu]: got %.17g, want exactly %g (no differentiable path; tol %g)", what,
                    j, g[j], 0.0, 0.0);
            return;
        }
}

#define RT_VALUE 1e-10
#define RT_FD1   1e-7
#define RT_FD2   1e-5
#define RT_MODE  1e-11

/* ---- The modes ------------------------------------------------------------------------------- */

typedef struct env {
    cr_ctx *ctx;
    cr_arena *arena;
    double *fzbuf;
    size_t programs, skipped_so;
    const char *modes[24];
    size_t runs[24];
    size_t ways[W_COUNT], hofs[H_COUNT];
} env;

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

static void random_point(uint64_t *s, const prog *p, double *x)
{
    for (size_t j = 0; j < p->nin; j++)
        x[j] = rnd_range(s, -XMAX, XMAX);
    if (p->has_struct) /* the f32 field holds a float */
        x[p->nsc + 2] = (double)(float)x[p->nsc + 2];
}

static cr_status record(const prog *p, cr_tape *t, const double *x, cr_var *xs, cr_var *ys)
{
    return cr_tape_record(t, prog_fn, (void *)p, x, p->nin, xs, ys, p->m);
}

/* The engine of a program: overlays, rules, declarations for its functions. */
static cr_status make_engine(env *e, prog *p, cr_registry **reg, cr_engine **eng)
{
    static const cr_argspec f64s[MAXARG] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL},
                                            {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL},
                                            {CR_M_F64, NULL}, {CR_M_F64, NULL}};
    cr_status st = cr_registry_new(e->ctx, NULL, reg);
    size_t nc = NBASE + p->ncomp;
    for (size_t c = 0; c < nc && st == CR_OK; c++) {
        size_t a = (size_t)callee_arity(p, (int)c);
        st = cr_registry_non_differentiable(*reg, &fn_tab[W_NONDIFF][c], f64s, a, false);
        if (c < NBASE && st == CR_OK) {
            cr_rule_def def = {.struct_size = sizeof def,
                               .fn = &fn_tab[W_REGRULE][c],
                               .nargs = a,
                               .args = f64s,
                               .rrule = base_rrule};
            st = cr_registry_add(*reg, &def);
        }
    }
    if (st == CR_OK)
        st = cr_engine_new(e->ctx, *reg, eng);
    for (size_t c = 0; c < nc && st == CR_OK; c++) {
        size_t a = (size_t)callee_arity(p, (int)c);
        st = cr_engine_overlay(*eng, &fn_tab[W_OVERLAY][c], ov_impl, 1, (void *)(intptr_t)c);
        if (st == CR_OK)
            st = cr_engine_zero_adjoint(*eng, &fn_tab[W_ZERO][c]);
        cr_rule_def def = {.struct_size = sizeof def,
                           .fn = &fn_tab[W_VIA][c],
                           .nargs = a,
                           .args = f64s,
                           .caps = CR_CAP_REVERSE | CR_CAP_FORWARD,
                           .rrule = via_rrule,
                           .frule = via_frule};
        if (st == CR_OK)
            st = cr_engine_from_rrule(*eng, &def);
        if (c >= NBASE || st != CR_OK)
            continue;
        def.fn = &fn_tab[W_VIACL][c];
        def.nargs = a + 1;
        st = cr_engine_from_rrule(*eng, &def);
        def = (cr_rule_def){.struct_size = sizeof def,
                            .fn = &fn_tab[W_RULE][c],
                            .nargs = a,
                            .args = f64s,
                            .rrule = base_rrule,
                            .frule = base_frule};
        if (st == CR_OK)
            st = cr_engine_from_rrule(*eng, &def);
        if (st == CR_OK)
            st = cr_engine_overlay_closure(*eng, &fn_tab[W_CLOSURE][c], cl_impl, 1,
                                           (void *)(intptr_t)c);
    }
    for (size_t h = 0; h < p->nhof && st == CR_OK; h++) {
        cr_rule_def def = {.struct_size = sizeof def,
                           .fn = &fn_tab[W_HOF][h],
                           .nargs = p->hofs[h].k,
                           .args = f64s,
                           .caps = CR_CAP_REVERSE,
                           .rrule = hof_rrule};
        st = cr_engine_from_rrule(*eng, &def);
    }
    return st;
}

static void run_prog(env *e, prog *p, ck *c)
{
    size_t n = p->nin, m = p->m;
    uint64_t s = p->seed ^ 0x5DEECE66Du;
    cr_registry *reg = NULL;
    cr_engine *eng = NULL;
    cr_tape *t0 = NULL, *tf = NULL, *ts = NULL;
    set_mode(e, c, "engine");
    cr_status st = make_engine(e, p, &reg, &eng);
    ck_status(c, "make_engine", st, cr_ctx_errmsg(e->ctx));
    g_cfg = cr_engine_config(eng);
    g_darena = e->arena;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    assert_int_equal(cr_tape_new(e->ctx, &tp, &t0), CR_OK);
    tp.flags = CR_TAPE_FORWARD;
    assert_int_equal(cr_tape_new(e->ctx, &tp, &tf), CR_OK);
    tp.flags = CR_TAPE_SECOND_ORDER;
    assert_int_equal(cr_tape_new(e->ctx, &tp, &ts), CR_OK);

    double x[MAXIN], x2[MAXIN], v[MAXIN], u[MAXIN], y0[MAX_OUT], y2[MAX_OUT];
    double J[MAX_OUT * MAXIN], E[MAX_OUT * MAXIN], J2[MAX_OUT * MAXIN], E2[MAX_OUT * MAXIN];
    double g[MAXIN], gt[MAXIN], jac[MAX_OUT * MAXIN], w[MAX_OUT], want[MAXIN], hv[MAXIN];
    double y, jv[MAX_OUT], fdv[MAX_OUT], fde[MAX_OUT];
    cr_var xs[MAXIN], ys[MAX_OUT];
    uint32_t xm[MAXIN], ym[MAX_OUT];
    random_point(&s, p, x);
    random_point(&s, p, x2);
    for (size_t j = 0; j < n; j++) {
        v[j] = rnd_range(&s, -1, 1);
        u[j] = rnd_range(&s, -1, 1);
        xm[j] = 1u << j;
    }
    for (size_t i = 0; i < m; i++)
        w[i] = rnd_range(&s, -1, 1);
    body_mask(p, &p->main, xm, ym, false);
    fdw fw = {p, {0, 0, 0, e->fzbuf}};
    body_c(p, &p->main, x, y0, NULL);
    fd_freeze(&fw, x, y2);
    cmp_vec(c, "frozen value", y2, y0, NULL, m, 0);
    fd_jac(&fw, x, J, E);
    if (st != CR_OK)
        goto done;

    /* value and gradient of output 0 */
    set_mode(e, c, "value_and_gradient");
    st = cr_tape_value_and_gradient(t0, prog_fn, p, x, n, &y, g);
    ck_status(c, "cr_tape_value_and_gradient", st, cr_tape_errmsg(t0));
    if (st != CR_OK)
        goto done;
    cmp_vec(c, "value", &y, y0, NULL, 1, RT_VALUE);
    cmp_vec(c, "gradient", g, J, E, n, RT_FD1);
    ck_zeros(c, "gradient (zero adjoint)", g, n, ym[0]);

    /* every output: gradient, Jacobian, vjp */
    set_mode(e, c, "jacobian+vjp");
    st = record(p, t0, x, xs, ys);
    ck_status(c, "record", st, cr_tape_errmsg(t0));
    if (st != CR_OK)
        goto done;
    {
        double yv[MAX_OUT];
        for (size_t i = 0; i < m; i++)
            yv[i] = ys[i].v;
        cmp_vec(c, "values", yv, y0, NULL, m, RT_VALUE);
    }
    st = cr_tape_jacobian(t0, ys, m, xs, n, jac);
    ck_status(c, "cr_tape_jacobian", st, cr_tape_errmsg(t0));
    cmp_vec(c, "jacobian", jac, J, E, m * n, RT_FD1);
    cmp_vec(c, "jacobian row 0 vs gradient", jac, g, NULL, n, RT_MODE);
    for (size_t i = 0; i < m; i++) {
        ck_zeros(c, "jacobian (zero adjoint)", jac + i * n, n, ym[i]);
        st = cr_tape_gradient(t0, ys[i], xs, n, gt);
        ck_status(c, "cr_tape_gradient", st, cr_tape_errmsg(t0));
        cmp_vec(c, "gradient of each output vs jacobian", gt, jac + i * n, NULL, n, RT_MODE);
    }
    st = cr_tape_vjp(t0, ys, w, m, xs, n, gt);
    ck_status(c, "cr_tape_vjp", st, cr_tape_errmsg(t0));
    for (size_t j = 0; j < n; j++) {
        want[j] = 0;
        for (size_t i = 0; i < m; i++)
            want[j] += w[i] * jac[i * n + j];
    }
    cmp_vec(c, "vjp vs jacobian", gt, want, NULL, n, RT_MODE);
    double werr[MAXIN];
    for (size_t j = 0; j < n; j++) {
        want[j] = werr[j] = 0;
        for (size_t i = 0; i < m; i++) {
            want[j] += w[i] * J[i * n + j];
            werr[j] += fabs(w[i]) * E[i * n + j];
        }
    }
    cmp_vec(c, "vjp vs differences", gt, want, werr, n, RT_FD1);

    /* jvp on a forward tape, and dual numbers */
    set_mode(e, c, "jvp");
    st = record(p, tf, x, xs, ys);
    ck_status(c, "record (forward)", st, cr_tape_errmsg(tf));
    if (st == CR_OK) {
        st = cr_tape_jvp(tf, xs, v, n, ys, m, jv);
        ck_status(c, "cr_tape_jvp", st, cr_tape_errmsg(tf));
        fd_dir_err(&fw, x, v, fdv, fde);
        cmp_vec(c, "jvp", jv, fdv, fde, m, RT_FD1);
        for (size_t i = 0; i < m; i++) {
            want[i] = 0;
            for (size_t j = 0; j < n; j++)
                want[i] += jac[i * n + j] * v[j];
        }
        cmp_vec(c, "jvp vs jacobian", jv, want, NULL, m, RT_MODE);
        set_mode(e, c, "dual");
        double yd[MAX_OUT], jd[MAX_OUT];
        st = cr_dual_jvp(prog_dual, p, x, n, v, m, NULL, yd, jd);
        ck_status(c, "cr_dual_jvp", st, cr_ctx_errmsg(e->ctx));
        if (st == CR_OK) {
            cmp_vec(c, "dual value", yd, y0, NULL, m, RT_VALUE);
            cmp_vec(c, "dual jvp vs tape jvp", jd, jv, NULL, m, RT_MODE);
            cmp_vec(c, "dual jvp", jd, fdv, fde, m, RT_FD1);
        }
    }

    /* second order */
    set_mode(e, c,
             !p->second_ok  ? "hvp refused"
             : p->so_unheld ? "hvp (zero-adjoint in a pullback)"
                            : "hvp");
    st = record(p, ts, x, xs, ys);
    if (p->so_either && st == CR_EUNIMPL) {
        set_mode(e, c, "hvp refused (variables without derivatives)");
        ck_refused_with(c, "second-order tape", st, CR_EUNIMPL, cr_tape_errmsg(ts), "second-order");
    } else if (!p->second_ok) {
        ck_refused_with(c, "second-order tape", st, CR_EUNIMPL, cr_tape_errmsg(ts), "second-order");
    } else {
        ck_status(c, "record (second order)", st, cr_tape_errmsg(ts));
        if (st == CR_OK) {
            st = cr_tape_hvp(ts, ys[0], xs, n, v, hv, gt);
            ck_status(c, "cr_tape_hvp", st, cr_tape_errmsg(ts));
            cmp_vec(c, "hvp gradient vs gradient", gt, g, NULL, n, RT_MODE);
            /* the differences' truncation error estimated from the steps 2h and h/2
             * (fd_err4), as everywhere (programs with large fourth derivatives) */
            double uhv = 0, fd = fd_mixed(&fw, x, u, v, FD_H2);
            double fd_err =
                fd_err4(fd, fd_mixed(&fw, x, u, v, 2 * FD_H2), fd_mixed(&fw, x, u, v, FD_H2 / 2));
            for (size_t j = 0; j < n; j++)
                uhv += u[j] * hv[j];
            if (!p->so_unheld)
                cmp_vec(c, "u' H v", &uhv, &fd, &fd_err, 1, RT_FD2);
        }
    }

    /* prepared gradients, at the recording's point and at a new one */
    set_mode(e, c, "prepared");
    {
        cr_prepared *pp = NULL;
        st = cr_prepare_gradient(e->ctx, eng, prog_fn, p, x, n, &pp);
        ck_status(c, "cr_prepare_gradient", st, cr_ctx_errmsg(e->ctx));
        if (st == CR_OK) {
            st = cr_prepared_value_and_gradient(pp, x, n, &y, gt);
            ck_status(c, "cr_prepared_value_and_gradient", st, cr_ctx_errmsg(e->ctx));
            cmp_vec(c, "prepared value", &y, y0, NULL, 1, RT_VALUE);
            cmp_vec(c, "prepared gradient vs tape", gt, g, NULL, n, RT_MODE);
            st = cr_prepared_value_and_gradient(pp, x2, n, &y, gt);
            ck_status(c, "cr_prepared_value_and_gradient (new point)", st, cr_ctx_errmsg(e->ctx));
            body_c(p, &p->main, x2, y2, NULL);
            fd_freeze(&fw, x2, fdv);
            fd_jac(&fw, x2, J2, E2);
            cmp_vec(c, "prepared value (new point)", &y, y2, NULL, 1, RT_VALUE);
            cmp_vec(c, "prepared gradient (new point)", gt, J2, E2, n, RT_FD1);
            ck_zeros(c, "prepared gradient (zero adjoint)", gt, n, ym[0]);
            double g2[MAXIN], yy;
            st = cr_tape_value_and_gradient(t0, prog_fn, p, x2, n, &yy, g2);
            ck_status(c, "cr_tape_value_and_gradient (new point)", st, cr_tape_errmsg(t0));
            cmp_vec(c, "prepared gradient vs tape (new point)", gt, g2, NULL, n, RT_MODE);
        }
        cr_prepared_free(pp);
    }
    set_mode(e, c, p->prep_second_ok ? "prepared hvp" : "prepared hvp refused");
    {
        cr_prepared *pp = NULL;
        st = cr_prepare_hvp(e->ctx, eng, prog_fn, p, x, n, &pp);
        if (p->prep_either && st == CR_EUNIMPL) {
            set_mode(e, c, "prepared hvp refused (variables without derivatives)");
            ck_refused_with(c, "cr_prepare_hvp", st, CR_EUNIMPL, cr_ctx_errmsg(e->ctx),
                            "second-order");
        } else if (!p->prep_second_ok) {
            ck_refused_with(c, "cr_prepare_hvp", st, CR_EUNIMPL, cr_ctx_errmsg(e->ctx),
                            "second-order");
        } else {
            ck_status(c, "cr_prepare_hvp", st, cr_ctx_errmsg(e->ctx));
            if (st == CR_OK) {
                double hp[MAXIN], gp[MAXIN], yp;
                st = cr_prepared_hvp(pp, x2, n, u, hp, &yp, gp);
                ck_status(c, "cr_prepared_hvp", st, cr_ctx_errmsg(e->ctx));
                st = record(p, ts, x2, xs, ys);
                ck_status(c, "record (second order, new point)", st, cr_tape_errmsg(ts));
                if (st == CR_OK) {
                    st = cr_tape_hvp(ts, ys[0], xs, n, u, hv, gt);
                    ck_status(c, "cr_tape_hvp (new point)", st, cr_tape_errmsg(ts));
                    cmp_vec(c, "prepared hvp vs tape", hp, hv, NULL, n, RT_MODE);
                    cmp_vec(c, "prepared hvp gradient vs tape", gp, gt, NULL, n, RT_MODE);
                    cmp_vec(c, "prepared hvp value", &yp, y2, NULL, 1, RT_VALUE);
                }
            }
        }
        cr_prepared_free(pp);
    }

    /* a struct input: the friendly gradient written into the struct */
    if (p->has_struct) {
        set_mode(e, c, "struct");
        sparams obj = {x[p->nsc], 3, {x[p->nsc + 1], (float)x[p->nsc + 2]}}, grad;
        memset(&grad, 0x55, sizeof grad);
        cr_tape_reset(t0);
        st = cr_tape_inputs(t0, x, p->nsc, xs);
        if (st == CR_OK)
            st = cr_tape_struct_inputs(t0, &sp_type, &obj, xs + p->nsc, 3);
        if (st == CR_OK)
            st = prog_fn(t0, xs, n, ys, 1, p);
        if (st == CR_OK)
            st = cr_tape_gradient_struct(t0, ys[0], &sp_type, xs + p->nsc, &grad);
        ck_status(c, "struct gradient", st, cr_tape_errmsg(t0));
        if (st == CR_OK) {
            double got[3] = {grad.a, grad.in.b, (double)grad.in.f};
            double gw[3] = {g[p->nsc], g[p->nsc + 1], (double)(float)g[p->nsc + 2]};
            cmp_vec(c, "struct gradient vs tape", got, gw, NULL, 3, RT_MODE);
            double k = grad.k;
            double zero = 0;
            cmp_vec(c, "struct gradient's integer field", &k, &zero, NULL, 1, 0);
        }
    }
done:
    cr_tape_free(t0);
    cr_tape_free(tf);
    cr_tape_free(ts);
    cr_engine_free(eng);
    cr_registry_free(reg);
    cr_arena_reset(e->arena);
}

/* ---- Driver ---------------------------------------------------------------------------------- */

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    if (e == NULL || cr_ctx_new(NULL, &e->ctx) != CR_OK ||
        cr_arena_new(e->ctx, NULL, &e->arena) != CR_OK)
        return -1;
    e->fzbuf = calloc(FZ_CAP, sizeof *e->fzbuf);
    for (size_t i = 0; i < MAXARG; i++)
        g_eye[i][i] = 1;
    for (size_t len = 1; len <= MAXARG; len++)
        for (size_t i = 0; i < len; i++)
            g_unit[len][i] = cr_array_vector(g_eye[i], len);
    if (e->fzbuf == NULL)
        return -1;
    for (int wy = 0; wy < W_COUNT; wy++)
        for (int i = 0; i < NCALLEE; i++) {
            fd_tab[wy][i] = (fdesc){(uint8_t)wy, (uint8_t)i};
            snprintf(fn_names[wy][i], sizeof fn_names[wy][i], "%s_%d", k_way_name[wy], i);
            fn_tab[wy][i] = (cr_function){.name = fn_names[wy][i],
                                          .arity = -1,
                                          .primal = any_primal,
                                          .self_type = wy == W_CLOSURE ? &cl_type : NULL,
                                          .udata = &fd_tab[wy][i]};
            v_tab[wy][i] = cr_value_function(&fn_tab[wy][i], NULL);
        }
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    free(e->fzbuf);
    cr_arena_free(e->arena);
    cr_ctx_free(e->ctx);
    free(e);
    return 0;
}

static void run_seed(env *e, uint64_t seed)
{
    prog *p = calloc(1, sizeof *p);
    assert_non_null(p);
    gen_prog(p, seed);
    p->seed = seed;
    g_prog = p;
    ck c = {.p = p, .seed = p->seed, .test = "test_tape_random_fns", .mode = ""};
    if (getenv("CR_RANDOM_DUMP") != NULL)
        dump_prog(p);
    for (int wy = 0; wy < W_COUNT; wy++)
        e->ways[wy] += p->uses[wy];
    for (int h = 0; h < H_COUNT; h++)
        e->hofs[h] += p->used_hof[h];
    run_prog(e, p, &c);
    if (c.failed != 0 && getenv("CR_RANDOM_DUMP") == NULL)
        dump_prog(p);
    free(p);
    e->programs++;
    assert_int_equal(c.failed, 0);
}

static void test_random_fn_programs(void **state)
{
    env *e = *state;
    uint64_t one = replay_seed();
    if (one != 0) {
        run_seed(e, one);
        return;
    }
    size_t n = programs(4000);
    size_t from = programs_from();
    for (size_t i = from; i < from + n; i++) {
        uint64_t s = 0x7F4A7C15u * 0x100000000u + i;
        run_seed(e, rnd_next(&s) | 1);
    }
    if (getenv("CR_RANDOM_PROGRAMS") != NULL) {
        printf("%zu programs; programs per mode:\n", e->programs);
        for (size_t i = 0; i < 24 && e->modes[i] != NULL; i++)
            printf("  %-28s %zu\n", e->modes[i], e->runs[i]);
        printf("programs per way of calling:\n");
        for (int wy = 0; wy < W_COUNT; wy++)
            printf("  %-28s %zu\n", k_way_name[wy], e->ways[wy]);
        printf("programs per higher-order rule:\n");
        for (int h = 0; h < H_COUNT; h++)
            printf("  %-28s %zu\n", k_hof_name[h], e->hofs[h]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_fn_programs),
    };
    return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
