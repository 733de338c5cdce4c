/*
 * Random C programs for the source transformer (docs/source-transformation-testing.md).
 *
 *   gen_random_c --seed S [--funcs F] --prog prog.c --harness harness.c
 *       [--calls-in-conditions] [--checkpoint] [--no-inout-helpers] [--no-fcalls]
 *       writes prog.c, F random differentiable functions f0..f{F-1} (and the static helpers
 *       they call) in the C subset chainrules-ad accepts, and harness.c: the same functions
 *       written a second time against the tape API (the independent engine), wrappers that
 *       call f, f_rev, f_fwd, f_fwdv and f_jacfwd with one layout, and a table that st_harness.h's
 *       main() checks. Prints the names f0,...,f{F-1} (for --reverse and --forward).
 *   gen_random_c --harness-for case.c --harness harness.c
 *       the harness of a hand-written case (tests/tools/st/regressions/): its functions are named
 *       by lines `// st: NAME ns=K m=M ret=R` and are checked against differences only.
 *
 * Every generated function has the signature
 *   [double|void] fK(const double *x, int n[, double a[, double b]][, double *y])
 * with y an output of M <= 3 values (written before anything reads it) and a void return only
 * when y is present. The program is deterministic in the seed. Calls of the generated
 * functions stay out of conditions and of the operands of ?: unless --calls-in-conditions is
 * given (chainrules-ad asks for them to be assigned to a variable first). --checkpoint puts
 * `#pragma chainrules checkpoint(K)` (K from 1 to 3) before some outermost for loops of the
 * checked functions. --no-inout-helpers and --no-fcalls leave out helpers that write through
 * a pointer and calls between the checked functions (to look past faults found there).
 *
 * Magnitudes are bounded by construction: every expression is built so that its value is at
 * most 4 in magnitude when its operands are (a tracked bound per variable; a variable whose
 * bound has grown is read as v * (4 / bound)); `+=` and `-=` inside a loop are allowed only
 * on the accumulators chosen when the loop is opened, which the loop body never reads, so a
 * bound times the trip count is a bound; `*=` and `/=` only contract. Math functions get
 * arguments in their domains (log(1 + e*e), sqrt(1 + e*e/2), pow(1.25 + cos(e), e/4)...).
 * Kinks (comparisons, fabs, fmax, fmin, hypot, atan2) are allowed anywhere: the tape version
 * records the smallest distance to a kink met at the point, and the harness moves the point
 * when it is too close.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Random numbers (splitmix64, as tests/test_random.h) ------------------------------------ */

static uint64_t g_rng;

static uint64_t rnd_next(void)
{
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static int rnd(int n) /* [0, n) */
{
    return (int)(rnd_next() % (uint64_t)n);
}

static double rnd_unit(void)
{
    return (double)(rnd_next() >> 11) * 0x1.0p-53;
}

static int chance(double p)
{
    return rnd_unit() < p;
}

/* ---- Strings -------------------------------------------------------------------------------- */

static char *fmt(const char *f, ...)
{
    va_list ap, aq;
    va_start(ap, f);
    va_copy(aq, ap);
    int len = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *s = malloc((size_t)len + 1);
    if (s == NULL) {
        fprintf(stderr, "gen_random_c: out of memory\n");
        exit(2);
    }
    vsnprintf(s, (size_t)len + 1, f, aq);
    va_end(aq);
    return s;
}

/* Growable text: the tape versions are written into one while the plain C goes to prog. */
typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *s)
{
    size_t k = strlen(s);
    if (t->len + k + 1 > t->cap) {
        t->cap = (t->len + k + 1) * 2;
        t->s = realloc(t->s, t->cap);
        if (t->s == NULL) {
            fprintf(stderr, "gen_random_c: out of memory\n");
            exit(2);
        }
    }
    memcpy(t->s + t->len, s, k + 1);
    t->len += k;
}

static text g_c;  /* the plain functions */
static text g_t;  /* their tape versions */
static int g_ind; /* indentation level */

/* One line in both versions. */
static void line2(const char *c, const char *t)
{
    for (int i = 0; i < g_ind; i++) {
        put(&g_c, "    ");
        put(&g_t, "    ");
    }
    put(&g_c, c);
    put(&g_c, "\n");
    put(&g_t, t);
    put(&g_t, "\n");
}

static void line1(const char *s)
{
    line2(s, s);
}

/* An expression in both versions. */
typedef struct ex {
    char *c, *t;
} ex;

static ex ex2(char *c, char *t)
{
    ex e = {c, t};
    return e;
}

static ex ex_const(double k)
{
    return ex2(fmt("%.3f", k), fmt("cr_const(%.3f)", k));
}

static ex ex_bin(char op, ex a, ex b)
{
    const char *f = op == '+'   ? "(cr_add)"
                    : op == '-' ? "(cr_sub)"
                    : op == '*' ? "(cr_mul)"
                                : "(cr_div)";
    return ex2(fmt("(%s %c %s)", a.c, op, b.c), fmt("%s(tp, %s, %s)", f, a.t, b.t));
}

static ex ex_scale(double k, ex a)
{
    return ex_bin('*', ex_const(k), a);
}

static ex ex_call1(const char *f, ex a)
{
    return ex2(fmt("%s(%s)", f, a.c),
               fmt("cr_tape_call1(tp, &cr_fn_%s, (cr_var[]){%s}, 1)", f, a.t));
}

static ex ex_call2(const char *f, ex a, ex b)
{
    return ex2(fmt("%s(%s, %s)", f, a.c, b.c),
               fmt("cr_tape_call1(tp, &cr_fn_%s, (cr_var[]){%s, %s}, 2)", f, a.t, b.t));
}

/* A function whose tape version also notes the distance to its kink (st_harness.h). */
static ex ex_kink1(const char *f, ex a)
{
    return ex2(fmt("%s(%s)", f, a.c), fmt("st_%s(tp, %s)", f, a.t));
}

static ex ex_kink2(const char *f, ex a, ex b)
{
    return ex2(fmt("%s(%s, %s)", f, a.c, b.c), fmt("st_%s(tp, %s, %s)", f, a.t, b.t));
}

/* ---- Scope ------------------------------------------------------------------------------------
 */

enum { MAXV = 128, MAXLOOP = 8 };

/* A floating-point variable: a scalar or an array (local, parameter or output). */
typedef struct var {
    char name[16];
    int is_arr;
    char len[16]; /* array length: a constant or the name of an int parameter */
    double bound; /* |every value| <= bound */
    int decl;     /* loop depth at the declaration (0 outside loops) */
    int acc;      /* an accumulator of an open loop: written with += and -=, never read */
    int ro;       /* read-only (const parameter) */
    int writable; /* may be assigned (an output or an in-out parameter or a local) */
} var;

/* An int loop counter: values in [0, len) (len a constant or a parameter name). */
typedef struct ivar {
    char name[16];
    char len[16];
} ivar;

/* A generated function callable from later ones. */
enum { K_MAIN, K_H1, K_H2, K_H3, K_REC };
typedef struct fninfo {
    char name[16];
    int kind; /* K_MAIN: (x, n, scalars..., [y]); K_H1: (u, v); K_H2: (x, n, u);
                 K_H3: (x, n, u, w, m) void; K_REC: (u, d) */
    int ns, m, ret;
    int io;        /* K_MAIN: y is read before it is written (an in-out array) */
    double wbound; /* K_H3: the bound of w after a call */
} fninfo;

static var g_v[MAXV];
static int g_nv;
static ivar g_iv[MAXV];
static int g_niv;
static int g_depth;             /* loop depth */
static int g_trip[MAXLOOP + 1]; /* trip count bound of each open loop */
static int g_ifdepth;
static int g_budget; /* statements left in this function */
static int g_ret;    /* the function returns a double */
static int g_uniq;   /* names */
static int g_exprdepth;
static int g_incond;         /* generating a condition or a branch of ?: */
static int g_calls_in_conds; /* --calls-in-conditions: calls there too */
static int g_checkpoint;     /* --checkpoint: #pragma chainrules checkpoint(K) before loops */
static int g_in_main;        /* generating a checked function (not a helper) */
static int g_no_inout;       /* --no-inout-helpers: no helpers writing through a pointer */
static int g_ckpt_depth;     /* depth of the checkpointed loop being generated, or 0 */
static int g_main_m;         /* the length of y in the function being generated (0: none) */
static int g_no_fcalls;      /* --no-fcalls: checked functions do not call each other */

static fninfo g_fn[256];
static int g_nfn;
static int g_cur; /* the function being generated (calls only go to earlier ones) */

static var *add_var(const char *name, int is_arr, const char *len, double bound)
{
    if (g_nv >= MAXV) {
        fprintf(stderr, "gen_random_c: too many variables\n");
        exit(2);
    }
    var *v = &g_v[g_nv++];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->is_arr = is_arr;
    snprintf(v->len, sizeof v->len, "%s", len ? len : "");
    v->bound = bound;
    v->decl = g_depth;
    v->writable = 1;
    return v;
}

/* The product of the trip counts of the loops opened since depth d. */
static double trips_since(int d)
{
    double t = 1;
    for (int k = d + 1; k <= g_depth; k++)
        t *= g_trip[k];
    return t;
}

/* ---- Indices ----------------------------------------------------------------------------------
 */

static int is_num(const char *s)
{
    return s[0] >= '0' && s[0] <= '9';
}

/* An index into an array of length len (a constant or an int parameter name, at least 1). */
static char *gen_index(const char *len)
{
    int cand = 0;
    ivar *pick[MAXV];
    for (int i = 0; i < g_niv; i++)
        pick[cand++] = &g_iv[i];
    if (cand > 0 && chance(0.8)) {
        ivar *iv = pick[rnd(cand)];
        if (strcmp(iv->len, len) == 0) {
            switch (rnd(3)) {
            case 0:
                return fmt("%s", iv->name);
            case 1:
                return fmt("%s - 1 - %s", len, iv->name);
            default:
                return fmt("(%s + %d) %% %s", iv->name, 1 + rnd(3), len);
            }
        }
        if (is_num(len) && is_num(iv->len) && atoi(iv->len) <= atoi(len) && chance(0.5))
            return fmt("%s", iv->name);
        return chance(0.5) ? fmt("%s %% %s", iv->name, len)
                           : fmt("(%s + %d) %% %s", iv->name, 1 + rnd(3), len);
    }
    if (is_num(len))
        return fmt("%d", rnd(atoi(len)));
    switch (rnd(3)) {
    case 0:
        return fmt("0");
    case 1:
        return fmt("%s - 1", len);
    default:
        return fmt("%d %% %s", 1 + rnd(4), len);
    }
}

/* ---- Expressions ------------------------------------------------------------------------------
 */

static ex gen_expr(int depth);
static ex gen_cond(int depth);

/* A readable variable (scalar, or array element), scaled to |value| <= 4. */
static int readable(const var *v)
{
    return !v->acc;
}

static ex read_var(const var *v)
{
    ex e;
    if (v->is_arr) {
        char *i = gen_index(v->len);
        e = ex2(fmt("%s[%s]", v->name, i), fmt("%s[%s]", v->name, i));
    } else {
        e = ex2(fmt("%s", v->name), fmt("%s", v->name));
    }
    if (v->bound > 4.0001)
        e = ex_scale(4.0 / v->bound, e);
    return e;
}

static ex gen_leaf(void)
{
    int cands[MAXV], nc = 0;
    for (int i = 0; i < g_nv; i++)
        if (readable(&g_v[i]))
            cands[nc++] = i;
    int r = rnd(20);
    if (r < 16 && nc > 0)
        return read_var(&g_v[cands[rnd(nc)]]);
    if (r < 18 && g_niv > 0) {
        ivar *iv = &g_iv[rnd(g_niv)];
        double k = 0.25;
        return ex2(fmt("(%.2f * (double)%s)", k, iv->name),
                   fmt("cr_const(%.2f * (double)%s)", k, iv->name));
    }
    return ex_const(rnd_unit() * 4 - 2);
}

/* A helper call as an expression (a function returning double defined earlier). */
static int gen_call(ex *out, int depth)
{
    int cands[256], nc = 0;
    if (g_incond > 0 && !g_calls_in_conds)
        return 0;
    for (int i = 0; i < g_cur; i++) {
        const fninfo *f = &g_fn[i];
        if (f->kind == K_H3 || (f->kind == K_MAIN && (f->m > 0 || !f->ret || g_no_fcalls)))
            continue;
        cands[nc++] = i;
    }
    if (nc == 0)
        return 0;
    const fninfo *f = &g_fn[cands[rnd(nc)]];
    switch (f->kind) {
    case K_H1: {
        ex a = gen_expr(depth), b = gen_expr(depth);
        *out =
            ex2(fmt("%s(%s, %s)", f->name, a.c, b.c), fmt("%s_t(tp, %s, %s)", f->name, a.t, b.t));
        return 1;
    }
    case K_H2: {
        /* x, or a local array of bound <= 4 */
        const var *arr = NULL;
        int ac[MAXV], na = 0;
        for (int i = 0; i < g_nv; i++)
            if (g_v[i].is_arr && readable(&g_v[i]) && g_v[i].bound <= 4.0001)
                ac[na++] = i;
        if (na == 0)
            return 0;
        arr = &g_v[ac[rnd(na)]];
        ex u = gen_expr(depth);
        *out = ex2(fmt("%s(%s, %s, %s)", f->name, arr->name, arr->len, u.c),
                   fmt("%s_t(tp, %s, %s, %s)", f->name, arr->name, arr->len, u.t));
        return 1;
    }
    case K_REC: {
        ex u = gen_expr(depth);
        int d = 1 + rnd(3);
        *out = ex2(fmt("%s(%s, %d)", f->name, u.c, d), fmt("%s_t(tp, %s, %d)", f->name, u.t, d));
        return 1;
    }
    case K_MAIN: {
        /* fJ(x, n, scalars...) of an earlier main function without outputs */
        const var *x = NULL;
        for (int i = 0; i < g_nv; i++)
            if (strcmp(g_v[i].name, "x") == 0)
                x = &g_v[i];
        if (x == NULL)
            return 0;
        char *ac = fmt("%s(x, n", f->name), *at = fmt("%s_t(tp, x, n", f->name);
        for (int s = 0; s < f->ns; s++) {
            ex a = gen_expr(depth);
            ac = fmt("%s, %s", ac, a.c);
            at = fmt("%s, %s", at, a.t);
        }
        *out = ex2(fmt("%s)", ac), fmt("%s)", at));
        return 1;
    }
    default:
        return 0;
    }
}

/* A second operand that is not the same expression as the first (a structural tie: a - a,
 * fmax(a, a), a < a). */
static ex gen_other(int depth, ex a)
{
    for (int k = 0; k < 8; k++) {
        ex b = gen_expr(depth);
        if (strcmp(a.c, b.c) != 0)
            return b;
    }
    return ex_const(2.5);
}

/* An expression with |value| <= 4 when its operands are within their bounds. */
static ex gen_expr(int depth)
{
    if (depth <= 0 || chance(0.2))
        return gen_leaf();
    int d = depth - 1;
    switch (rnd(27)) {
    case 0:
    case 1:
        return ex_scale(0.5, ex_bin('+', gen_expr(d), gen_expr(d)));
    case 2:
    case 3: {
        ex a = gen_expr(d);
        return ex_scale(0.5, ex_bin('-', a, gen_other(d, a)));
    }
    case 4:
    case 5:
        return ex_bin('*', ex_scale(0.25, gen_expr(d)), gen_expr(d));
    case 6: { /* a b / (1 + b b) */
        ex a = gen_expr(d), b = gen_expr(d);
        return ex_bin('/', ex_bin('*', a, b), ex_bin('+', ex_const(1), ex_bin('*', b, b)));
    }
    case 7: /* a / (2 + sin b) */
        return ex_bin('/', gen_expr(d), ex_bin('+', ex_const(2), ex_call1("sin", gen_expr(d))));
    case 8:
        return ex_scale(2, ex_call1("sin", gen_expr(d)));
    case 9:
        return ex_scale(2, ex_call1("cos", gen_expr(d)));
    case 10:
        return ex_scale(3, ex_call1("tanh", gen_expr(d)));
    case 11:
        return ex_scale(2, ex_call1("atan", gen_expr(d)));
    case 12:
        return ex_call1("exp", ex_scale(0.25, gen_expr(d)));
    case 13: {
        ex a = gen_expr(d);
        return ex_call1("log", ex_bin('+', ex_const(1), ex_bin('*', a, a)));
    }
    case 14: {
        ex a = gen_expr(d);
        return ex_call1("sqrt", ex_bin('+', ex_const(1), ex_scale(0.5, ex_bin('*', a, a))));
    }
    case 15: /* pow(1.25 + cos a, b / 4) */
        return ex_call2("pow", ex_bin('+', ex_const(1.25), ex_call1("cos", gen_expr(d))),
                        ex_scale(0.25, gen_expr(d)));
    case 16: { /* pow(0.5 + a a / 8, 1.5) */
        ex a = gen_expr(d);
        return ex_call2("pow", ex_bin('+', ex_const(0.5), ex_scale(0.125, ex_bin('*', a, a))),
                        ex_const(1.5));
    }
    case 17:
        return ex_kink1("fabs", gen_expr(d));
    case 18: {
        ex a = gen_expr(d);
        return ex_kink2(chance(0.5) ? "fmax" : "fmin", a, gen_other(d, a));
    }
    case 19: {
        ex a = gen_expr(d);
        return ex_scale(0.5, ex_kink2("hypot", a, gen_other(d, a)));
    }
    case 20: {
        ex a = gen_expr(d);
        return ex_kink2("atan2", a, gen_other(d, a));
    }
    case 21:
        return ex_call1("expm1", ex_scale(0.25, gen_expr(d)));
    case 22: {
        ex a = gen_expr(d);
        return ex_call1("log1p", ex_scale(0.25, ex_bin('*', a, a)));
    }
    case 23:
        return ex_scale(2, ex_call1("erf", gen_expr(d)));
    case 24: {
        int k = rnd(3);
        const char *f = k == 0 ? "sinh" : k == 1 ? "cosh" : chance(0.5) ? "asin" : "acos";
        return ex_call1(f, ex_scale(k == 2 ? 0.2 : 0.5, gen_expr(d)));
    }
    case 25: { /* c ? a : b */
        if (g_exprdepth > 2)
            return gen_leaf();
        g_exprdepth++;
        g_incond++;
        ex c = gen_cond(1), a = gen_expr(d), b = gen_expr(d);
        g_incond--;
        g_exprdepth--;
        return ex2(fmt("(%s ? %s : %s)", c.c, a.c, b.c), fmt("(%s ? %s : %s)", c.t, a.t, b.t));
    }
    default: {
        ex e;
        if (g_exprdepth <= 2) {
            g_exprdepth++;
            int ok = gen_call(&e, d);
            g_exprdepth--;
            if (ok)
                return e;
        }
        return ex_bin('-', ex_const(0), gen_expr(d)); /* written (0.0 - e) */
    }
    }
}

static ex gen_cmp(int depth)
{
    static const char *ops[4] = {"<", ">", "<=", ">="};
    static const char *fns[4] = {"st_lt", "st_gt", "st_le", "st_ge"};
    int o = rnd(4);
    ex a = gen_expr(depth);
    ex b = chance(0.3) ? ex_const(rnd_unit() * 2 - 1) : gen_other(depth, a);
    return ex2(fmt("(%s %s %s)", a.c, ops[o], b.c), fmt("%s(%s, %s)", fns[o], a.t, b.t));
}

/* A condition: comparisons of values (the tape version notes their distance to the tie),
 * or of loop counters. */
static ex gen_cond1(int depth);

static ex gen_cond(int depth)
{
    g_incond++;
    ex e = gen_cond1(depth);
    g_incond--;
    return e;
}

static ex gen_cond1(int depth)
{
    int r = rnd(10);
    if (r < 2 && g_niv > 0) {
        ivar *iv = &g_iv[rnd(g_niv)];
        ex e;
        if (chance(0.5))
            e = ex2(fmt("(%s %% 2 == 0)", iv->name), NULL);
        else
            e = ex2(fmt("(%s == %d)", iv->name, rnd(3)), NULL);
        e.t = e.c;
        return e;
    }
    if (r < 3) {
        ex a = gen_cmp(depth), b = gen_cmp(depth);
        const char *op = chance(0.5) ? "&&" : "||";
        return ex2(fmt("(%s %s %s)", a.c, op, b.c), fmt("(%s %s %s)", a.t, op, b.t));
    }
    if (r < 4) {
        ex a = gen_cmp(depth);
        return ex2(fmt("(!%s)", a.c), fmt("(!%s)", a.t));
    }
    return gen_cmp(depth);
}

/* ---- Statements -------------------------------------------------------------------------------
 */

static void gen_block(int nstmt);

static int can_assign(const var *v)
{
    return v->writable && !v->ro;
}

/* += and -= : a local declared at this loop depth, or an accumulator of an open loop. */
static int can_accumulate(const var *v)
{
    return can_assign(v) && (v->acc || (v->decl == g_depth));
}

/* A target: variable or array element (both versions). */
static ex target(const var *v)
{
    if (v->is_arr) {
        char *i = gen_index(v->len);
        return ex2(fmt("%s[%s]", v->name, i), fmt("%s[%s]", v->name, i));
    }
    return ex2(fmt("%s", v->name), fmt("%s", v->name));
}

static int pick_var(int (*ok)(const var *))
{
    int c[MAXV], nc = 0;
    for (int i = 0; i < g_nv; i++)
        if (ok(&g_v[i]))
            c[nc++] = i;
    return nc ? c[rnd(nc)] : -1;
}

static int assign_ok(const var *v)
{
    return can_assign(v) && (!v->acc || 1);
}

/* A contracting factor, |f| <= 1. */
static ex gen_contract(void)
{
    ex e = gen_expr(2);
    switch (rnd(4)) {
    case 0:
        return ex_call1("cos", e);
    case 1:
        return ex_call1("tanh", e);
    case 2:
        return ex_bin('/', e, ex_bin('+', ex_const(4.01), ex_kink1("fabs", e)));
    default:
        return ex_scale(0.5, ex_call1("sin", e));
    }
}

/* A divisor >= 1. */
static ex gen_divisor(void)
{
    ex e = gen_expr(2);
    switch (rnd(3)) {
    case 0:
        return ex_bin('+', ex_const(1), ex_bin('*', e, e));
    case 1:
        return ex_bin('+', ex_const(2), ex_call1("sin", e));
    default:
        return ex_bin('+', ex_const(1), ex_call1("exp", ex_scale(0.25, e)));
    }
}

static void stmt_assign(void)
{
    int i = pick_var(assign_ok);
    if (i < 0)
        return;
    var *v = &g_v[i];
    int r = rnd(10);
    if (r < 4 || !(r < 7 ? can_accumulate(v) : 1)) {
        ex t = target(v), e = gen_expr(2 + chance(0.25));
        line2(fmt("%s = %s;", t.c, e.c), fmt("%s = %s;", t.t, e.t));
        if (v->bound < 4)
            v->bound = 4;
    } else if (r < 7) {
        ex t = target(v), e = gen_expr(2 + chance(0.25));
        char op = chance(0.5) ? '+' : '-';
        line2(fmt("%s %c= %s;", t.c, op, e.c),
              fmt("%s = %s(tp, %s, %s);", t.t, op == '+' ? "(cr_add)" : "(cr_sub)", t.t, e.t));
        v->bound += 4 * trips_since(v->decl);
    } else if (r < 9) {
        ex t = target(v), e = gen_contract();
        line2(fmt("%s *= %s;", t.c, e.c), fmt("%s = (cr_mul)(tp, %s, %s);", t.t, t.t, e.t));
    } else {
        ex t = target(v), e = gen_divisor();
        line2(fmt("%s /= %s;", t.c, e.c), fmt("%s = (cr_div)(tp, %s, %s);", t.t, t.t, e.t));
    }
}

static void stmt_decl(void)
{
    char name[16];
    snprintf(name, sizeof name, "v%d", g_uniq++);
    ex e = gen_expr(2 + chance(0.25));
    line2(fmt("double %s = %s;", name, e.c), fmt("cr_var %s = %s;", name, e.t));
    add_var(name, 0, NULL, 4);
}

static void stmt_decl_arr(void)
{
    char name[16], j[16], len[16];
    int s = 2 + rnd(4);
    snprintf(name, sizeof name, "w%d", g_uniq++);
    snprintf(j, sizeof j, "j%d", g_uniq++);
    snprintf(len, sizeof len, "%d", s);
    line2(fmt("double %s[%d];", name, s), fmt("cr_var %s[%d];", name, s));
    line1(fmt("for (int %s = 0; %s < %d; %s++) {", j, j, s, j));
    g_ind++;
    ivar *iv = &g_iv[g_niv++];
    snprintf(iv->name, sizeof iv->name, "%s", j);
    snprintf(iv->len, sizeof iv->len, "%s", len);
    ex e = gen_expr(2);
    line2(fmt("%s[%s] = %s;", name, j, e.c), fmt("%s[%s] = %s;", name, j, e.t));
    g_niv--;
    g_ind--;
    line1("}");
    add_var(name, 1, len, 4);
}

/* Whether v may become an accumulator of the loop just opened (g_depth counts it): declared in
 * the body that holds the loop. A variable declared further out may be read by an enclosing
 * loop's body, whose next iteration would see it grown; it may only be accumulated here if an
 * enclosing loop already made it an accumulator. */
static int acc_ok(const var *v)
{
    return can_assign(v) && !v->acc && v->decl == g_depth - 1;
}

/* Whether the C text from `from` on writes through y (y[...] assigned, or y given to a helper
 * that writes through its pointer). */
static int writes_y(size_t from)
{
    const char *t = g_c.s + from;
    for (const char *p = strstr(t, "y["); p != NULL; p = strstr(p + 1, "y[")) {
        if (p > g_c.s &&
            (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= '0' && p[-1] <= '9')))
            continue;
        int depth = 0;
        const char *q = p + 1;
        for (; *q != '\0'; q++) {
            if (*q == '[')
                depth++;
            else if (*q == ']' && --depth == 0)
                break;
        }
        if (*q == ']' && (strncmp(q + 1, " = ", 3) == 0 || strncmp(q + 1, " += ", 4) == 0 ||
                          strncmp(q + 1, " -= ", 4) == 0 || strncmp(q + 1, " *= ", 4) == 0 ||
                          strncmp(q + 1, " /= ", 4) == 0))
            return 1;
    }
    return strstr(t, ", y, ") != NULL;
}

/* Put `#pragma chainrules checkpoint(k)` (with y's length when the loop writes y) before the
 * loop written from `at` on, in the plain C only. */
static void insert_pragma(size_t at, int k)
{
    char *rest = fmt("%s", g_c.s + at);
    char *pragma = g_main_m > 0 && writes_y(at)
                       ? fmt("#pragma chainrules checkpoint(%d) sizes(y: %d)\n", k, g_main_m)
                       : fmt("#pragma chainrules checkpoint(%d)\n", k);
    g_c.len = at;
    g_c.s[at] = '\0';
    for (int i = 0; i < g_ind; i++)
        put(&g_c, "    ");
    put(&g_c, pragma);
    put(&g_c, rest);
}

/* Open a loop: choose its accumulators, run the body, restore the scope. */
static void loop_body(int trips)
{
    int nv0 = g_nv;
    int locked[MAXV], nl = 0;
    g_depth++;
    g_trip[g_depth] = trips;
    for (int i = 0; i < g_nv; i++)
        if (acc_ok(&g_v[i]) && chance(0.3)) {
            g_v[i].acc = 1;
            locked[nl++] = i;
        }
    gen_block(1 + rnd(4));
    for (int i = 0; i < nl; i++)
        g_v[locked[i]].acc = 0;
    g_nv = nv0;
    g_depth--;
}

static void stmt_loop(void)
{
    char i[16];
    snprintf(i, sizeof i, "i%d", g_uniq++);
    int kind = rnd(6);
    int c = 1 + rnd(4);
    int niv0 = g_niv;
    ivar *iv = &g_iv[g_niv++];
    snprintf(iv->name, sizeof iv->name, "%s", i);
    const var *x = NULL;
    for (int k = 0; k < g_nv; k++)
        if (strcmp(g_v[k].name, "x") == 0)
            x = &g_v[k];
    /* a checkpointed loop is counted upwards (for (i = a; i < b; i++)) and has no break or
     * return of its own; the arrays it writes through pointers get their lengths */
    int ckpt = g_checkpoint && g_in_main && g_depth == 0 && kind <= 3 && chance(0.8);
    size_t ckpt_at = g_c.len; /* the pragma goes there once the loop is written */
    int ckpt_k = 0;
    if (ckpt) {
        if (kind == 1)
            kind = 0;
        ckpt_k = 1 + rnd(3);
        g_ckpt_depth = 1;
    }
    if (kind <= 1 && x != NULL) { /* over x */
        snprintf(iv->len, sizeof iv->len, "n");
        if (kind == 0 && !ckpt && chance(0.3))
            line1(fmt("for (size_t %s = 0; %s < (size_t)n; %s++) {", i, i, i));
        else if (kind == 0)
            line1(fmt("for (int %s = 0; %s < n; %s++) {", i, i, i));
        else
            line1(fmt("for (int %s = n - 1; %s >= 0; %s--) {", i, i, i));
        g_ind++;
        loop_body(6);
    } else if (kind <= 3) {
        snprintf(iv->len, sizeof iv->len, "%d", c);
        line1(fmt("for (int %s = 0; %s < %d; %s++) {", i, i, c, i));
        g_ind++;
        loop_body(c);
    } else if (kind == 4) { /* while, maybe with a condition on values */
        snprintf(iv->len, sizeof iv->len, "%d", c);
        line1(fmt("int %s = %d;", i, c));
        /* the condition is read at every iteration: build it inside the loop's scope */
        int nv0 = g_nv;
        g_depth++;
        g_trip[g_depth] = c;
        int locked[MAXV], nl = 0;
        for (int k = 0; k < g_nv; k++)
            if (acc_ok(&g_v[k]) && chance(0.3)) {
                g_v[k].acc = 1;
                locked[nl++] = k;
            }
        if (chance(0.5)) {
            g_niv--; /* the counter is not an index inside the condition */
            g_incond++;
            ex cond = gen_cmp(1);
            g_incond--;
            g_niv++;
            line2(fmt("while (%s > 0 && %s) {", i, cond.c),
                  fmt("while (%s > 0 && %s) {", i, cond.t));
        } else {
            line1(fmt("while (%s > 0) {", i));
        }
        g_ind++;
        line1(fmt("%s--;", i));
        gen_block(1 + rnd(4));
        for (int k = 0; k < nl; k++)
            g_v[locked[k]].acc = 0;
        g_nv = nv0;
        g_depth--;
    } else { /* do-while */
        snprintf(iv->len, sizeof iv->len, "%d", c + 1);
        line1(fmt("int %s = 0;", i));
        line1("do {");
        g_ind++;
        line1(fmt("%s++;", i));
        loop_body(c);
        g_ind--;
        line1(fmt("} while (%s < %d);", i, c));
        g_niv = niv0;
        return;
    }
    g_ind--;
    line1("}");
    g_niv = niv0;
    if (ckpt) {
        g_ckpt_depth = 0;
        insert_pragma(ckpt_at, ckpt_k);
    }
}

static void stmt_if(void)
{
    ex c = gen_cond(2);
    line2(fmt("if %s {", c.c), fmt("if (%s) {", c.t));
    g_ind++;
    g_ifdepth++;
    int nv0 = g_nv;
    gen_block(1 + rnd(3));
    g_nv = nv0;
    g_ind--;
    if (chance(0.5)) {
        line1("} else {");
        g_ind++;
        gen_block(1 + rnd(3));
        g_nv = nv0;
        g_ind--;
    }
    g_ifdepth--;
    line1("}");
}

static void stmt_jump(void)
{
    /* in a checkpointed loop: no return, and break only in the loops inside it */
    if (g_ckpt_depth > 0 && g_depth == g_ckpt_depth)
        return;
    ex c = gen_cond(2);
    if (g_depth > 0 && (g_ckpt_depth > 0 || chance(0.7))) {
        const char *j = chance(0.5) ? "break;" : "continue;";
        line2(fmt("if %s {", c.c), fmt("if (%s) {", c.t));
        g_ind++;
        line1(j);
        g_ind--;
        line1("}");
        return;
    }
    line2(fmt("if %s {", c.c), fmt("if (%s) {", c.t));
    g_ind++;
    if (g_ret) {
        ex e = gen_expr(2 + chance(0.25));
        line2(fmt("return %s;", e.c), fmt("return %s;", e.t));
    } else {
        line1("return;");
    }
    g_ind--;
    line1("}");
}

/* A call of a void helper writing a local array (or the output) of bound <= 4. */
static int h3_ok(const var *v)
{
    return v->is_arr && can_assign(v) && !v->acc && v->bound <= 4.0001;
}

static void stmt_call_void(void)
{
    int c[256], nc = 0;
    for (int i = 0; i < g_cur; i++)
        if (g_fn[i].kind == K_H3)
            c[nc++] = i;
    int w = pick_var(h3_ok);
    const var *x = NULL;
    if (nc == 0 || w < 0)
        return;
    for (int k = 0; k < g_nv; k++)
        if (g_v[k].is_arr && readable(&g_v[k]) && g_v[k].bound <= 4.0001 && &g_v[k] != &g_v[w] &&
            chance(0.6))
            x = &g_v[k];
    if (nc == 0 || w < 0 || x == NULL)
        return;
    const fninfo *f = &g_fn[c[rnd(nc)]];
    ex u = gen_expr(2);
    line2(fmt("%s(%s, %s, %s, %s, %s);", f->name, x->name, x->len, u.c, g_v[w].name, g_v[w].len),
          fmt("%s_t(tp, %s, %s, %s, %s, %s);", f->name, x->name, x->len, u.t, g_v[w].name,
              g_v[w].len));
    if (g_v[w].bound < f->wbound)
        g_v[w].bound = f->wbound;
}

static void gen_stmt(void)
{
    g_budget--;
    int r = rnd(20);
    if (r < 3)
        stmt_decl();
    else if (r < 8)
        stmt_assign();
    else if (r < 9 && g_depth == 0)
        stmt_decl_arr();
    else if (r < 12 && g_depth < 3 && g_budget > 2)
        stmt_loop();
    else if (r < 15 && g_ifdepth < 3 && g_budget > 2)
        stmt_if();
    else if (r < 16)
        stmt_jump();
    else if (r < 18)
        stmt_call_void();
    else
        stmt_assign();
}

static void gen_block(int nstmt)
{
    for (int k = 0; k < nstmt && g_budget > 0; k++)
        gen_stmt();
}

/* ---- Functions --------------------------------------------------------------------------------
 */

static void begin_fn(void)
{
    g_nv = 0;
    g_niv = 0;
    g_depth = 0;
    g_ifdepth = 0;
    g_uniq = 0;
    g_exprdepth = 0;
    g_ckpt_depth = 0;
    g_main_m = 0;
}

static void final_return(void)
{
    ex e = gen_expr(2 + chance(0.25));
    line2(fmt("return %s;", e.c), fmt("return %s;", e.t));
}

static void gen_helper(int idx)
{
    fninfo *f = &g_fn[idx];
    g_cur = idx;
    begin_fn();
    int kind = f->kind;
    g_ret = kind != K_H3;
    g_budget = 3 + rnd(6);
    g_ind = 0;
    switch (kind) {
    case K_H1:
        line2(fmt("static double %s(double u, double v)", f->name),
              fmt("static cr_var %s_t(cr_tape *tp, cr_var u, cr_var v)", f->name));
        line1("{");
        g_ind++;
        add_var("u", 0, NULL, 4)->writable = 0;
        add_var("v", 0, NULL, 4)->writable = 0;
        break;
    case K_H2:
        line2(fmt("static double %s(const double *x, int n, double u)", f->name),
              fmt("static cr_var %s_t(cr_tape *tp, const cr_var *x, int n, cr_var u)", f->name));
        line1("{");
        g_ind++;
        add_var("x", 1, "n", 4)->ro = 1;
        add_var("u", 0, NULL, 4)->writable = 0;
        break;
    case K_H3:
        line2(
            fmt("static void %s(const double *x, int n, double u, double *w, int m)", f->name),
            fmt("static void %s_t(cr_tape *tp, const cr_var *x, int n, cr_var u, cr_var *w, int m)",
                f->name));
        line1("{");
        g_ind++;
        add_var("x", 1, "n", 4)->ro = 1;
        add_var("u", 0, NULL, 4)->writable = 0;
        add_var("w", 1, "m", 4);
        break;
    case K_REC: {
        line2(fmt("static double %s(double u, int d)", f->name),
              fmt("static cr_var %s_t(cr_tape *tp, cr_var u, int d)", f->name));
        line1("{");
        g_ind++;
        add_var("u", 0, NULL, 4)->writable = 0;
        line1("if (d <= 0) {");
        g_ind++;
        final_return();
        g_ind--;
        line1("}");
        ex a = gen_expr(1);
        line2(fmt("double r = %s(%s, d - 1);", f->name, a.c),
              fmt("cr_var r = %s_t(tp, %s, d - 1);", f->name, a.t));
        add_var("r", 0, NULL, 4)->writable = 0;
        g_budget = 2;
        break;
    }
    }
    gen_block(g_budget);
    if (g_ret)
        final_return();
    if (kind == K_H3)
        f->wbound = g_v[2].bound; /* bounds only grow: the largest on any path */
    g_ind--;
    line1("}");
    line1("");
}

static void gen_main(int idx)
{
    fninfo *f = &g_fn[idx];
    g_cur = idx;
    begin_fn();
    g_ret = f->ret;
    g_main_m = f->m;
    g_budget = 3 + rnd(8);
    g_ind = 0;
    char *pc = fmt("%s %s(const double *x, int n", f->ret ? "double" : "void", f->name);
    char *pt = fmt("static %s %s_t(cr_tape *tp, const cr_var *x, int n", f->ret ? "cr_var" : "void",
                   f->name);
    static const char *sn[2] = {"a", "b"};
    for (int s = 0; s < f->ns; s++) {
        pc = fmt("%s, double %s", pc, sn[s]);
        pt = fmt("%s, cr_var %s", pt, sn[s]);
    }
    if (f->m > 0) {
        pc = fmt("%s, double *y", pc);
        pt = fmt("%s, cr_var *y", pt);
    }
    line2(fmt("%s)", pc), fmt("%s)", pt));
    line1("{");
    g_ind++;
    add_var("x", 1, "n", 4)->ro = 1;
    for (int s = 0; s < f->ns; s++)
        add_var(sn[s], 0, NULL, 4)->writable = 0;
    if (f->m > 0 && !f->io) {
        /* the outputs are written before anything reads them */
        for (int j = 0; j < f->m; j++) {
            ex e = gen_expr(2);
            line2(fmt("y[%d] = %s;", j, e.c), fmt("y[%d] = %s;", j, e.t));
        }
    }
    if (f->m > 0) {
        char len[16];
        snprintf(len, sizeof len, "%d", f->m);
        add_var("y", 1, len, 4);
    }
    gen_block(g_budget);
    if (f->ret)
        final_return();
    g_ind--;
    line1("}");
    line1("");
}

/* ---- The harness ------------------------------------------------------------------------------
 */

/* Wrappers with one layout: u = (x[0..n-1], scalars), outputs (return, y[0..m-1]). */
static void emit_wrappers(FILE *h, const fninfo *f, int with_tape)
{
    const char *N = f->name;
    static const char *sn[2] = {"a", "b"};
    /* prototypes of the plain function and its derivatives */
    fprintf(h, "%s %s(const double *x, int n", f->ret ? "double" : "void", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", double %s", sn[s]);
    fprintf(h, "%s);\n", f->m ? ", double *y" : "");
    fprintf(h, "#if ST_AD\n%s %s_rev(const double *x, double *x_b, int n",
            f->ret ? "double" : "void", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", double %s, double *%s_b", sn[s], sn[s]);
    fprintf(h, "%s%s);\n", f->m ? ", double *y, double *y_b" : "", f->ret ? ", double f_b" : "");
    fprintf(h, "%s %s_fwd(const double *x, const double *x_d, int n", f->ret ? "double" : "void",
            N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", double %s, double %s_d", sn[s], sn[s]);
    fprintf(h, "%s%s);\n", f->m ? ", double *y, double *y_d" : "", f->ret ? ", double *f_d" : "");
    fprintf(h, "#if ST_FWDV\n%s %s_fwdv(const double *x, const double *x_d, int n",
            f->ret ? "double" : "void", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", double %s, const double *%s_d", sn[s], sn[s]);
    fprintf(h, "%s%s, int nd);\n#endif\n#endif\n", f->m ? ", double *y, double *y_d" : "",
            f->ret ? ", double *f_d" : "");

    /* call */
    fprintf(h, "static void %s_call(const double *u, int n, double *out)\n{\n", N);
    fprintf(h, "    double y[3] = {ST_YFILL, ST_YFILL, ST_YFILL};\n    (void)y;\n");
    for (int j = 0; f->io && j < f->m; j++)
        fprintf(h, "    y[%d] = u[n + %d];\n", j, f->ns + j);
    fprintf(h, "    %s%s(u, n", f->ret ? "out[0] = " : "", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", u[n + %d]", s);
    fprintf(h, "%s);\n", f->m ? ", y" : "");
    for (int j = 0; j < f->m; j++)
        fprintf(h, "    out[%d] = y[%d];\n", f->ret + j, j);
    fprintf(h, "}\n");

    /* rev: g += w^T J; returns the number of output shadows left non-zero */
    fprintf(h, "#if ST_AD\n");
    fprintf(h,
            "static int %s_rev_call(const double *u, int n, const double *w, double *g, double "
            "*out)\n{\n",
            N);
    fprintf(h, "    double y[3] = {ST_YFILL, ST_YFILL, ST_YFILL}, y_b[3] = {0, 0, 0};\n");
    fprintf(h, "    (void)y;\n    (void)y_b;\n");
    for (int j = 0; j < f->m; j++)
        fprintf(h, "    y_b[%d] = w[%d];\n", j, f->ret + j);
    for (int j = 0; f->io && j < f->m; j++)
        fprintf(h, "    y[%d] = u[n + %d];\n", j, f->ns + j);
    fprintf(h, "    %s%s_rev(u, g, n", f->ret ? "out[0] = " : "", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", u[n + %d], &g[n + %d]", s, s);
    fprintf(h, "%s%s);\n", f->m ? ", y, y_b" : "", f->ret ? ", w[0]" : "");
    for (int j = 0; j < f->m; j++)
        fprintf(h, "    out[%d] = y[%d];\n", f->ret + j, j);
    if (f->io) {
        /* an in-out array's shadow holds the cotangent of the input values on exit */
        for (int j = 0; j < f->m; j++)
            fprintf(h, "    g[n + %d] += y_b[%d];\n", f->ns + j, j);
        fprintf(h, "    return 0;\n}\n");
    } else {
        fprintf(h, "    return (y_b[0] != 0) + (y_b[1] != 0) + (y_b[2] != 0);\n}\n");
    }

    /* fwd */
    fprintf(h,
            "static void %s_fwd_call(const double *u, int n, const double *du, double *out, "
            "double *dout)\n{\n",
            N);
    fprintf(h, "    double y[3] = {ST_YFILL, ST_YFILL, ST_YFILL}, y_d[3] = {0, 0, 0};\n");
    fprintf(h, "    (void)y;\n    (void)y_d;\n");
    for (int j = 0; f->io && j < f->m; j++)
        fprintf(h, "    y[%d] = u[n + %d];\n    y_d[%d] = du[n + %d];\n", j, f->ns + j, j,
                f->ns + j);
    fprintf(h, "    %s%s_fwd(u, du, n", f->ret ? "out[0] = " : "", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", u[n + %d], du[n + %d]", s, s);
    fprintf(h, "%s%s);\n", f->m ? ", y, y_d" : "", f->ret ? ", &dout[0]" : "");
    for (int j = 0; j < f->m; j++)
        fprintf(h, "    out[%d] = y[%d];\n    dout[%d] = y_d[%d];\n", f->ret + j, j, f->ret + j, j);
    fprintf(h, "}\n");

    /* fwdv: du holds nd directions of nin values each; dout nd blocks of nout values */
    fprintf(h, "#if ST_FWDV\n");
    fprintf(h,
            "static void %s_fwdv_call(const double *u, int n, const double *du, int nd, double "
            "*out, double *dout)\n{\n",
            N);
    fprintf(h, "    int nin = n + %d, nout = %d;\n", f->ns + f->io * f->m, f->ret + f->m);
    fprintf(h, "    double y[3] = {ST_YFILL, ST_YFILL, ST_YFILL}, y_d[3 * ST_NDMAX] = {0};\n");
    fprintf(h, "    double x_d[ST_NMAX * ST_NDMAX], s_d[2][ST_NDMAX], f_d[ST_NDMAX];\n");
    fprintf(h, "    (void)y;\n    (void)s_d;\n    (void)f_d;\n    (void)nout;\n");
    fprintf(h, "    for (int k = 0; k < nd; k++) {\n");
    fprintf(
        h, "        for (int i = 0; i < n; i++)\n            x_d[i * nd + k] = du[k * nin + i];\n");
    fprintf(h,
            "        for (int s = 0; s < %d; s++)\n            s_d[s][k] = du[k * nin + n + s];\n",
            f->ns);
    for (int j = 0; f->io && j < f->m; j++)
        fprintf(h, "        y_d[%d * nd + k] = du[k * nin + n + %d];\n", j, f->ns + j);
    fprintf(h, "    }\n");
    for (int j = 0; f->io && j < f->m; j++)
        fprintf(h, "    y[%d] = u[n + %d];\n", j, f->ns + j);
    fprintf(h, "    %s%s_fwdv(u, x_d, n", f->ret ? "out[0] = " : "", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", u[n + %d], s_d[%d]", s, s);
    fprintf(h, "%s%s, nd);\n", f->m ? ", y, y_d" : "", f->ret ? ", f_d" : "");
    fprintf(h, "    for (int k = 0; k < nd; k++) {\n");
    if (f->ret)
        fprintf(h, "        dout[k * nout] = f_d[k];\n");
    for (int j = 0; j < f->m; j++)
        fprintf(h, "        dout[k * nout + %d] = y_d[%d * nd + k];\n", f->ret + j, j);
    fprintf(h, "    }\n");
    for (int j = 0; j < f->m; j++)
        fprintf(h, "    out[%d] = y[%d];\n", f->ret + j, j);
    fprintf(h, "}\n#endif\n#endif\n");

    /* rev_set (chainrules-ad --reverse-set, for the functions ST_SET_<name> names: those it
     * accepts): the gradient assigned into g whatever it held; an in-out y's shadow keeps
     * f_rev's meaning (the seed on entry, the cotangent of its values on exit) */
    fprintf(h, "#if ST_AD && ST_SET && defined(ST_SET_%s)\n", N);
    fprintf(h, "%s %s_rev_set(const double *x, double *x_b, int n", f->ret ? "double" : "void", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", double %s, double *%s_b", sn[s], sn[s]);
    fprintf(h, "%s%s);\n", f->m ? ", double *y, double *y_b" : "", f->ret ? ", double f_b" : "");
    fprintf(h,
            "static void %s_set_call(const double *u, int n, const double *w, double *g, double "
            "*out)\n{\n",
            N);
    fprintf(h, "    double y[3] = {ST_YFILL, ST_YFILL, ST_YFILL}, y_b[3] = {0, 0, 0};\n");
    fprintf(h, "    (void)y;\n    (void)y_b;\n    (void)w;\n");
    for (int j = 0; j < f->m; j++)
        fprintf(h, "    y_b[%d] = w[%d];\n", j, f->ret + j);
    for (int j = 0; f->io && j < f->m; j++)
        fprintf(h, "    y[%d] = u[n + %d];\n", j, f->ns + j);
    fprintf(h, "    %s%s_rev_set(u, g, n", f->ret ? "out[0] = " : "", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", u[n + %d], &g[n + %d]", s, s);
    fprintf(h, "%s%s);\n", f->m ? ", y, y_b" : "", f->ret ? ", w[0]" : "");
    for (int j = 0; f->io && j < f->m; j++)
        fprintf(h, "    g[n + %d] = y_b[%d];\n", f->ns + j, j);
    fprintf(h, "}\n#define %s_SET %s_set_call\n#else\n#define %s_SET NULL\n#endif\n", N, N, N);

    /* jacfwd (chainrules-ad --jacobian with --dims x=6,y=3 --wrt x,a,b[,y]): J of
     * (y[0..2], return) by (x[0..5], scalars, y[0..2] on entry), mapped to the harness's
     * layout; returns the number of entries outside it that are not what they must be: zero
     * in the columns of x past n and of a pure output's values on entry; y[j] past m is
     * never written, so its row is the unit row of its own value on entry */
    fprintf(h, "#if ST_AD && ST_JAC && defined(ST_JAC_%s)\n", N);
    fprintf(h, "%s %s_jacfwd(const double *x, int n", f->ret ? "double" : "void", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", double %s", sn[s]);
    fprintf(h, "%s, double *J);\n", f->m ? ", double *y" : "");
    fprintf(h, "static int %s_jac_call(const double *u, int n, double *out, double *Jh)\n{\n", N);
    int ny = f->m ? 3 : 0;
    fprintf(h, "    enum { NC = ST_NMAX + %d, NR = %d };\n", f->ns + ny, f->ret + ny);
    fprintf(h, "    int nin = n + %d, bad = 0;\n", f->ns + f->io * f->m);
    fprintf(h, "    double y[3] = {ST_YFILL, ST_YFILL, ST_YFILL}, J[NR * NC];\n    (void)y;\n");
    for (int j = 0; f->io && j < f->m; j++)
        fprintf(h, "    y[%d] = u[n + %d];\n", j, f->ns + j);
    fprintf(h, "    %s%s_jacfwd(u, n", f->ret ? "out[0] = " : "", N);
    for (int s = 0; s < f->ns; s++)
        fprintf(h, ", u[n + %d]", s);
    fprintf(h, "%s, J);\n", f->m ? ", y" : "");
    for (int j = 0; j < f->m; j++)
        fprintf(h, "    out[%d] = y[%d];\n", f->ret + j, j);
    /* jac row r: y[r] for r < 3, then the return value; harness row k: the return value,
     * then y[j] */
    fprintf(h, "    for (int r = 0; r < NR; r++) {\n");
    fprintf(h, "        int k = %s;\n",
            f->ret ? fmt("r == %d ? 0 : r < %d ? r + 1 : -1", ny, f->m)
                   : fmt("r < %d ? r : -1", f->m));
    fprintf(h, "        for (int c = 0; c < NC; c++) {\n");
    fprintf(h, "            int i = c < n ? c : c < ST_NMAX ? -1 : c - ST_NMAX + n;\n");
    if (f->io)
        fprintf(h, "            if (c >= ST_NMAX + %d + %d)\n                i = -1;\n", f->ns,
                f->m);
    else
        fprintf(h, "            if (c >= ST_NMAX + %d)\n                i = -1;\n", f->ns);
    fprintf(
        h, "            if (k >= 0 && i >= 0)\n                Jh[k * nin + i] = J[r * NC + c];\n");
    fprintf(h,
            "            else\n                bad += J[r * NC + c] != (r >= %d && r < %d && c == "
            "ST_NMAX + %d + r);\n",
            f->m, ny, f->ns);
    fprintf(h, "        }\n    }\n    return bad;\n}\n");
    fprintf(h, "#define %s_JAC %s_jac_call\n#else\n#define %s_JAC NULL\n#endif\n", N, N, N);

    /* tape: out and the Jacobian J (nout x nin) from one recording */
    if (with_tape) {
        fprintf(h,
                "static int %s_tape_call(cr_tape *tp, const double *u, int n, double *J, double "
                "*out)\n{\n",
                N);
        fprintf(h, "    int nin = n + %d;\n", f->ns + f->io * f->m);
        fprintf(h, "    cr_var in[ST_INMAX], ys[4], y[3];\n");
        fprintf(h, "    (void)y;\n");
        fprintf(h, "    cr_tape_reset(tp);\n");
        fprintf(h,
                "    if (cr_tape_inputs(tp, u, (size_t)nin, in) != CR_OK)\n        return -1;\n");
        fprintf(h, "    for (int j = 0; j < 3; j++)\n        y[j] = cr_const(ST_YFILL);\n");
        for (int j = 0; f->io && j < f->m; j++)
            fprintf(h, "    y[%d] = in[n + %d];\n", j, f->ns + j);
        fprintf(h, "    %s%s_t(tp, in, n", f->ret ? "ys[0] = " : "", N);
        for (int s = 0; s < f->ns; s++)
            fprintf(h, ", in[n + %d]", s);
        fprintf(h, "%s);\n", f->m ? ", y" : "");
        for (int j = 0; j < f->m; j++)
            fprintf(h, "    ys[%d] = y[%d];\n", f->ret + j, j);
        fprintf(h, "    return st_tape_jacobian(tp, in, nin, ys, %d, J, out);\n}\n", f->ret + f->m);
    }
}

static void emit_table(FILE *h, int nf, const fninfo *fs, int with_tape)
{
    fprintf(h, "\nstatic const st_fn st_fns[] = {\n");
    for (int i = 0; i < nf; i++) {
        const fninfo *f = &fs[i];
        fprintf(h,
                "    {\"%s\", %d, %d, %d, %s_call, ST_AD_FN(%s_rev_call), ST_AD_FN(%s_fwd_call), "
                "ST_FWDV_FN(%s_fwdv_call), "
                "%s, %s_JAC, %s_SET},\n",
                f->name, f->ns + f->io * f->m, f->m, f->ret, f->name, f->name, f->name, f->name,
                with_tape ? fmt("%s_tape_call", f->name) : "NULL", f->name, f->name);
    }
    fprintf(h, "};\n\nST_MAIN(st_fns)\n");
}

static void harness_head(FILE *h, const char *what)
{
    fprintf(h, "/* The harness of %s (written by tests/tools/st/gen_random_c.c). */\n", what);
    fprintf(h, "#include \"st_harness.h\"\n\n");
}

static int harness_for(const char *path, const char *hpath)
{
    FILE *in = fopen(path, "r");
    if (in == NULL) {
        fprintf(stderr, "gen_random_c: cannot read %s\n", path);
        return 2;
    }
    fninfo fs[64];
    int nf = 0;
    char buf[1024];
    while (fgets(buf, sizeof buf, in) != NULL && nf < 64) {
        fninfo f;
        memset(&f, 0, sizeof f);
        if (sscanf(buf, "// st: %15s ns=%d m=%d ret=%d", f.name, &f.ns, &f.m, &f.ret) == 4) {
            f.io = strstr(buf, "io=1") != NULL;
            fs[nf++] = f;
        }
    }
    fclose(in);
    if (nf == 0) {
        fprintf(stderr, "gen_random_c: %s names no function (// st: NAME ns=K m=M ret=R)\n", path);
        return 2;
    }
    FILE *h = fopen(hpath, "w");
    if (h == NULL) {
        fprintf(stderr, "gen_random_c: cannot write %s\n", hpath);
        return 2;
    }
    harness_head(h, path);
    for (int i = 0; i < nf; i++)
        emit_wrappers(h, &fs[i], 0);
    emit_table(h, nf, fs, 0);
    fclose(h);
    for (int i = 0; i < nf; i++)
        printf("%s%s", i ? "," : "", fs[i].name);
    printf("\n");
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: gen_random_c --seed S [--funcs F] --prog prog.c --harness harness.c\n"
                    "       gen_random_c --harness-for case.c --harness harness.c\n");
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    int nmain = 20;
    const char *prog = NULL, *harness = NULL, *hfor = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--funcs") == 0 && i + 1 < argc)
            nmain = atoi(argv[++i]);
        else if (strcmp(argv[i], "--prog") == 0 && i + 1 < argc)
            prog = argv[++i];
        else if (strcmp(argv[i], "--harness") == 0 && i + 1 < argc)
            harness = argv[++i];
        else if (strcmp(argv[i], "--harness-for") == 0 && i + 1 < argc)
            hfor = argv[++i];
        else if (strcmp(argv[i], "--calls-in-conditions") == 0)
            g_calls_in_conds = 1;
        else if (strcmp(argv[i], "--checkpoint") == 0)
            g_checkpoint = 1;
        else if (strcmp(argv[i], "--no-inout-helpers") == 0)
            g_no_inout = 1;
        else if (strcmp(argv[i], "--no-fcalls") == 0)
            g_no_fcalls = 1;
        else {
            usage();
            return 2;
        }
    }

    if (hfor != NULL && harness != NULL)
        return harness_for(hfor, harness);
    if (prog == NULL || harness == NULL || nmain < 1 || nmain > 200) {
        usage();
        return 2;
    }
    g_rng = seed;

    /* helpers first (each may call earlier ones), main functions after them */
    int nh = 3 + rnd(4);
    for (int i = 0; i < nh; i++) {
        fninfo *f = &g_fn[g_nfn++];
        memset(f, 0, sizeof *f);
        static const int kinds[5] = {K_H1, K_H2, K_H3, K_H3, K_REC};
        f->kind = kinds[rnd(5)];
        if (g_no_inout && f->kind == K_H3)
            f->kind = K_H2;
        snprintf(f->name, sizeof f->name, "%c%d", f->kind == K_REC ? 'r' : 'h', i);
    }
    int first_main = g_nfn;
    for (int i = 0; i < nmain; i++) {
        fninfo *f = &g_fn[g_nfn++];
        memset(f, 0, sizeof *f);
        f->kind = K_MAIN;
        snprintf(f->name, sizeof f->name, "f%d", i);
        f->ns = rnd(3);
        f->m = chance(0.5) ? 1 + rnd(3) : 0;
        f->ret = f->m == 0 ? 1 : chance(0.5);
        f->io = f->m > 0 && chance(0.3);
    }

    put(&g_c, "");
    put(&g_t, "");
    for (int i = 0; i < first_main; i++)
        gen_helper(i);
    g_in_main = 1;
    for (int i = first_main; i < g_nfn; i++)
        gen_main(i);

    FILE *p = fopen(prog, "w");
    FILE *h = fopen(harness, "w");
    if (p == NULL || h == NULL) {
        fprintf(stderr, "gen_random_c: cannot write %s or %s\n", prog, harness);
        return 2;
    }
    fprintf(p,
            "/* Random program, seed %#llx (tests/tools/st/gen_random_c.c --seed %#llx --funcs "
            "%d). */\n",
            (unsigned long long)seed, (unsigned long long)seed, nmain);
    fprintf(p, "#include <math.h>\n#include <stddef.h>\n\n");
    for (int i = first_main; i < g_nfn; i++)
        fprintf(p, "// st: %s ns=%d m=%d ret=%d%s\n", g_fn[i].name, g_fn[i].ns, g_fn[i].m,
                g_fn[i].ret, g_fn[i].io ? " io=1" : "");
    fprintf(p, "\n%s", g_c.s);
    fclose(p);

    harness_head(h, prog);
    fprintf(h, "/* The functions of the program written against the tape. */\n%s", g_t.s);
    for (int i = first_main; i < g_nfn; i++)
        emit_wrappers(h, &g_fn[i], 1);
    emit_table(h, g_nfn - first_main, g_fn + first_main, 1);
    fclose(h);
    for (int i = first_main; i < g_nfn; i++)
        printf("%s%s", i > first_main ? "," : "", g_fn[i].name);
    printf("\n");
    return 0;
}
