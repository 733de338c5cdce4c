/*
 * Random programs with branches (SQLite's spirit: generated cases, each replayable from its
 * seed). A seeded generator builds scalar programs over a register file whose instructions
 * are expression trees: bounded arithmetic leaves and branches on cr_tape_cmp() of registers
 * or constants (general if/else, max, min, abs and clamps written with branches), nested up
 * to three deep. A plain-C interpreter evaluates the same program and records the outcome of
 * every comparison it takes (the path). Checked:
 *
 *  - prepared gradients and H v (cr_prepare_gradient, cr_prepare_hvp) replayed at many new
 *    points: where the path equals the recording's, the replay must equal a fresh recording
 *    at the point (first- and second-order tapes) and central differences (stencils on the
 *    same path); where it differs, the replay must be refused with CR_EDOMAIN and a message,
 *    write nothing (the outputs keep a sentinel), and stay usable;
 *  - the prepared array form over findmax and a comparison on a sum: a replay where the
 *    index or the comparison changes is refused the same way;
 *  - tapes on caller buffers of random sizes: the recording fits and is right, or fails with
 *    CR_EARENA and a message, allocating nothing, and the tape then records shorter programs;
 *  - one tape reused through random sequences of reset, record, sweep, errors (a foreign
 *    variable: CR_ETAPE, sticky) and clear_error, against fresh tapes.
 *
 * Replay a failure: CR_RANDOM_SEED=<seed printed> build/tests/test_tape_random_branch
 * (CR_RANDOM_DUMP=1 prints the program). Run longer: CR_RANDOM_PROGRAMS=<programs>.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules/tape_inline.h>

#include "test_alloc.h"
#include "test_random.h"
#include "test_util.h"

/* ---- Programs ------------------------------------------------------------------------------ */

/* Leaves keep every register in [-3, 3] when the inputs are there. */
enum leaf {
    L_COPY,  /* a */
    L_NEG,   /* -a */
    L_CONST, /* k */
    L_AVG,   /* (a + b) / 2 */
    L_HDIFF, /* (a - b) / 2 */
    L_MULS,  /* a b / (1 + b b) */
    L_SINM,  /* 2 sin(a b) */
    L_ACOS,  /* a cos(b) */
    L_EXPS,  /* exp(sin(a) / 2) */
    L_SQ,    /* 0.3 a a */
    L_ADDC,  /* 0.8 a + k */
    L_COUNT
};
static const char *const k_leaf_names[L_COUNT] = {"copy", "neg",  "const", "avg", "hdiff", "muls",
                                                  "sinm", "acos", "exps",  "sq",  "addc"};
static const char *const k_cmp_names[6] = {"<", "<=", ">", ">=", "==", "!="};

enum { N_LEAF, N_SEL };

typedef struct node {
    int kind; /* N_LEAF or N_SEL */
    int op;   /* the leaf, or the comparison */
    int bk;   /* N_SEL: compare a with the constant k */
    size_t a, b;
    double k;
    size_t child[2]; /* N_SEL: taken when the comparison is true, false */
} node;

typedef struct prog {
    uint64_t seed;
    size_t nin, nins, use; /* inputs, instructions, instructions in use (a prefix) */
    size_t *root;          /* nins roots */
    node *nodes;
    size_t nnodes, cap;
    cr_var *vars; /* scratch registers for the tape */
} prog;

static size_t new_node(prog *p)
{
    if (p->nnodes == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 32;
        p->nodes = realloc(p->nodes, p->cap * sizeof *p->nodes);
        assert_non_null(p->nodes);
    }
    memset(&p->nodes[p->nnodes], 0, sizeof *p->nodes);
    return p->nnodes++;
}

static size_t pick_reg(uint64_t *s, size_t nreg)
{
    /* mostly recent registers, so that branches feed branches */
    if (nreg > 3 && rnd_unit(s) < 0.6)
        return nreg - 1 - rnd_below(s, 3);
    return rnd_below(s, nreg);
}

static size_t leaf(prog *p, int op, size_t a, size_t b, double k)
{
    size_t i = new_node(p);
    p->nodes[i].kind = N_LEAF;
    p->nodes[i].op = op;
    p->nodes[i].a = a;
    p->nodes[i].b = b;
    p->nodes[i].k = k;
    return i;
}

static size_t sel(prog *p, int op, size_t a, int bk, size_t b, double k, size_t c0, size_t c1)
{
    size_t i = new_node(p);
    p->nodes[i] = (node){N_SEL, op, bk, a, b, k, {c0, c1}};
    return i;
}

static size_t gen_node(prog *p, uint64_t *s, size_t nreg, int depth)
{
    double r = rnd_unit(s);
    size_t a = pick_reg(s, nreg), b = pick_reg(s, nreg);
    if (depth < 3 && r < 0.45) {
        double w = rnd_unit(s);
        if (w < 0.4) { /* if a op b (or k) then ... else ... */
            int op = (int)rnd_below(s, 4), bk = rnd_unit(s) < 0.3;
            if (rnd_unit(s) < 0.08) { /* a == a, a != a: always the same way */
                op = 4 + (int)rnd_below(s, 2);
                b = a;
                bk = 0;
            }
            double k = rnd_range(s, -1.0, 1.0);
            size_t c0 = gen_node(p, s, nreg, depth + 1), c1 = gen_node(p, s, nreg, depth + 1);
            return sel(p, op, a, bk, b, k, c0, c1);
        }
        if (w < 0.6) { /* max(a, b) = a < b ? b : a */
            size_t c0 = leaf(p, L_COPY, b, b, 0), c1 = leaf(p, L_COPY, a, a, 0);
            return sel(p, CR_CMP_LT, a, 0, b, 0, c0, c1);
        }
        if (w < 0.75) { /* min(a, b) = a <= b ? a : b */
            size_t c0 = leaf(p, L_COPY, a, a, 0), c1 = leaf(p, L_COPY, b, b, 0);
            return sel(p, CR_CMP_LE, a, 0, b, 0, c0, c1);
        }
        if (w < 0.87) { /* abs(a) = a < 0 ? -a : a */
            size_t c0 = leaf(p, L_NEG, a, a, 0), c1 = leaf(p, L_COPY, a, a, 0);
            return sel(p, CR_CMP_LT, a, 1, a, 0.0, c0, c1);
        }
        /* clamp(a, lo, hi) = a < lo ? lo : (a > hi ? hi : a) */
        double lo = rnd_range(s, -1.5, 0.0), hi = rnd_range(s, 0.0, 1.5);
        size_t chi = leaf(p, L_CONST, a, a, hi), ca = leaf(p, L_COPY, a, a, 0);
        size_t inner = sel(p, CR_CMP_GT, a, 1, a, hi, chi, ca);
        size_t clo = leaf(p, L_CONST, a, a, lo);
        return sel(p, CR_CMP_LT, a, 1, a, lo, clo, inner);
    }
    int op = 3 + (int)rnd_below(s, L_COUNT - 3);
    if (rnd_unit(s) < 0.05)
        op = (int)rnd_below(s, 3);
    return leaf(p, op, a, b, rnd_range(s, -1.0, 1.0) * (op == L_ADDC ? 0.5 : 1.0));
}

static void gen_prog(prog *p, uint64_t seed)
{
    uint64_t s = seed;
    memset(p, 0, sizeof *p);
    p->seed = seed;
    p->nin = 1 + rnd_below(&s, 6);
    p->nins = 1 + rnd_below(&s, rnd_unit(&s) < 0.8 ? 12 : 40);
    p->use = p->nins;
    p->root = malloc(p->nins * sizeof *p->root);
    p->vars = malloc((p->nin + p->nins) * sizeof *p->vars);
    assert_non_null(p->root);
    assert_non_null(p->vars);
    for (size_t i = 0; i < p->nins; i++)
        p->root[i] = gen_node(p, &s, p->nin + i, 0);
}

static void free_prog(prog *p)
{
    free(p->root);
    free(p->nodes);
    free(p->vars);
}

static void dump_node(const prog *p, size_t i)
{
    const node *nd = &p->nodes[i];
    if (nd->kind == N_SEL) {
        if (nd->bk)
            printf("(r%zu %s %.17g ? ", nd->a, k_cmp_names[nd->op], nd->k);
        else
            printf("(r%zu %s r%zu ? ", nd->a, k_cmp_names[nd->op], nd->b);
        dump_node(p, nd->child[0]);
        printf(" : ");
        dump_node(p, nd->child[1]);
        printf(")");
    } else {
        printf("%s(r%zu, r%zu, %.17g)", k_leaf_names[nd->op], nd->a, nd->b, nd->k);
    }
}

static void dump_prog(const prog *p)
{
    printf("program 0x%016" PRIx64 ": %zu inputs, %zu instructions (%zu used)\n", p->seed, p->nin,
           p->nins, p->use);
    for (size_t i = 0; i < p->use; i++) {
        printf("  r%zu = ", p->nin + i);
        dump_node(p, p->root[i]);
        printf("\n");
    }
}

static size_t out_reg(const prog *p)
{
    return p->use > 0 ? p->nin + p->use - 1 : 0;
}

/* ---- The plain-C interpreter --------------------------------------------------------------- */

typedef struct path {
    unsigned char bit[4096];
    size_t n;
} path;

static bool compare(int op, double a, double b)
{
    switch (op) {
    case CR_CMP_LT:
        return a < b;
    case CR_CMP_LE:
        return a <= b;
    case CR_CMP_GT:
        return a > b;
    case CR_CMP_GE:
        return a >= b;
    case CR_CMP_EQ:
        return a == b;
    default:
        return a != b;
    }
}

static double eval_leaf(int op, double a, double b, double k)
{
    switch (op) {
    case L_COPY:
        return a;
    case L_NEG:
        return -a;
    case L_CONST:
        return k;
    case L_AVG:
        return 0.5 * (a + b);
    case L_HDIFF:
        return 0.5 * (a - b);
    case L_MULS:
        return a * b / (1.0 + b * b);
    case L_SINM:
        return 2.0 * sin(a * b);
    case L_ACOS:
        return a * cos(b);
    case L_EXPS:
        return exp(0.5 * sin(a));
    case L_SQ:
        return 0.3 * (a * a);
    default:
        return 0.8 * a + k;
    }
}

static double eval_node(const prog *p, size_t i, const double *r, path *pa)
{
    const node *nd = &p->nodes[i];
    if (nd->kind == N_LEAF)
        return eval_leaf(nd->op, r[nd->a], r[nd->b], nd->k);
    bool c = compare(nd->op, r[nd->a], nd->bk ? nd->k : r[nd->b]);
    if (pa->n < sizeof pa->bit)
        pa->bit[pa->n] = c;
    pa->n++;
    return eval_node(p, nd->child[c ? 0 : 1], r, pa);
}

static double interp(const prog *p, const double *x, path *pa)
{
    double r[64];
    path scratch;
    if (pa == NULL)
        pa = &scratch;
    pa->n = 0;
    memcpy(r, x, p->nin * sizeof *x);
    for (size_t i = 0; i < p->use; i++)
        r[p->nin + i] = eval_node(p, p->root[i], r, pa);
    return r[out_reg(p)];
}

static bool same_path(const path *a, const path *b)
{
    return a->n == b->n && memcmp(a->bit, b->bit, a->n < sizeof a->bit ? a->n : sizeof a->bit) == 0;
}

/* ---- The program on a tape ----------------------------------------------------------------- */

static cr_var tape_leaf(cr_tape *t, int op, cr_var a, cr_var b, double k)
{
    switch (op) {
    case L_COPY:
        return a;
    case L_NEG:
        return cr_neg(t, a);
    case L_CONST:
        return cr_const(k);
    case L_AVG:
        return cr_mul(t, cr_const(0.5), cr_add(t, a, b));
    case L_HDIFF:
        return cr_mul(t, cr_const(0.5), cr_sub(t, a, b));
    case L_MULS:
        return cr_div(t, cr_mul(t, a, b), cr_add(t, cr_const(1.0), cr_mul(t, b, b)));
    case L_SINM:
        return cr_mul(t, cr_const(2.0), cr_sin(t, cr_mul(t, a, b)));
    case L_ACOS:
        return cr_mul(t, a, cr_cos(t, b));
    case L_EXPS:
        return cr_exp(t, cr_mul(t, cr_const(0.5), cr_sin(t, a)));
    case L_SQ:
        return cr_mul(t, cr_const(0.3), cr_mul(t, a, a));
    default:
        return cr_add(t, cr_mul(t, cr_const(0.8), a), cr_const(k));
    }
}

static cr_var tape_node(cr_tape *t, const prog *p, size_t i, const cr_var *r)
{
    const node *nd = &p->nodes[i];
    if (nd->kind == N_LEAF)
        return tape_leaf(t, nd->op, r[nd->a], r[nd->b], nd->k);
    bool c = cr_tape_cmp(t, r[nd->a], (cr_cmp)nd->op, nd->bk ? cr_const(nd->k) : r[nd->b]);
    return tape_node(t, p, nd->child[c ? 0 : 1], r);
}

static cr_status prog_fn(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *pe)
{
    (void)m;
    prog *p = pe;
    memcpy(p->vars, x, n * sizeof *x);
    for (size_t i = 0; i < p->use; i++)
        p->vars[p->nin + i] = tape_node(t, p, p->root[i], p->vars);
    *y = p->vars[out_reg(p)];
    return cr_tape_status(t);
}

/* ---- Checks -------------------------------------------------------------------------------- */

typedef struct env {
    cr_ctx *ctx, *cctx; /* cctx: the counting allocator */
    counter cnt;
    size_t programs, agree, refused, fd_checked, fd_skipped, hv_fd, buf_fit, buf_full, buf_shorter,
        reuse_steps, foreign, arr_ok, arr_refused;
} env;

/* A failure of mode at element i (the checks of test_random.h). */
static void fail_at(ck *c, const char *mode, size_t i, double got, double want)
{
    ck_fail(c, "%s [%zu]: got %.17g, expected %.17g", mode, i, got, want);
}

static void check_true(ck *c, bool ok, const char *what)
{
    if (!ok)
        ck_fail(c, "%s", what);
}

static void close_to(ck *c, const char *mode, size_t i, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
        fail_at(c, mode, i, got, want);
}

#define SENTINEL 12345.5

static bool all_sentinel(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != SENTINEL)
            return false;
    return true;
}

static void fill(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = SENTINEL;
}

/* Fourth-order central difference of the interpreter along direction d at x, or false when
 * some point of the stencil takes another path. */
static bool fd_step(const prog *p, const double *x, const double *d, const path *want, double h,
                    double *out)
{
    double xs[64], acc = 0;
    for (int s = 0; s < 4; s++) {
        for (size_t i = 0; i < p->nin; i++)
            xs[i] = x[i] + k_fd_o[s] * h * d[i];
        path pa;
        double f = interp(p, xs, &pa);
        if (!same_path(&pa, want))
            return false;
        acc += k_fd_c[s] * f;
    }
    *out = acc / h;
    return true;
}

static bool fd_dir(const prog *p, const double *x, const double *d, const path *want, double *out)
{
    return fd_step(p, x, d, want, 1e-3, out);
}

static void unit(double *d, size_t n, size_t i)
{
    memset(d, 0, n * sizeof *d);
    d[i] = 1.0;
}

/* 1. Prepared gradient and H v at new points: agree with fresh tapes, or refuse. */
static void run_prepared(env *e, prog *p, ck *c, uint64_t *s)
{
    size_t n = p->nin;
    double x0[8], x[8], v[8], d[8], g0[8], g[8], gf[8], hv[8], hv2[8], gh[8], g2[8];
    for (size_t i = 0; i < n; i++)
        x0[i] = rnd_range(s, -1.5, 1.5);
    path p0, pa;
    double yi0 = interp(p, x0, &p0), y0, y, yf, yh;

    cr_tape *t = NULL, *t2 = NULL;
    cr_tape_params sp = {.flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(e->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(e->ctx, &sp, &t2), CR_OK);
    assert_int_equal(cr_tape_value_and_gradient(t, prog_fn, p, x0, n, &y0, g0), CR_OK);
    close_to(c, "tape value at x0", 0, y0, yi0, 1e-13);

    cr_prepared *pg = NULL, *ph = NULL;
    assert_int_equal(cr_prepare_gradient(e->ctx, NULL, prog_fn, p, x0, n, &pg), CR_OK);
    assert_int_equal(cr_prepare_hvp(e->ctx, NULL, prog_fn, p, x0, n, &ph), CR_OK);

    size_t npts = 10;
    for (size_t k = 0; k < npts; k++) {
        static const double scales[4] = {1e-3, 0.03, 0.3, 1.0};
        double sc = scales[rnd_below(s, 4)];
        for (size_t i = 0; i < n; i++) {
            x[i] = x0[i] + sc * rnd_range(s, -1.0, 1.0);
            v[i] = rnd_range(s, -1.0, 1.0);
        }
        double yi = interp(p, x, &pa);
        bool agree = same_path(&pa, &p0);

        /* the prepared gradient */
        y = SENTINEL;
        fill(g, n);
        cr_status st = cr_prepared_value_and_gradient(pg, x, n, &y, g);
        if (agree) {
            e->agree++;
            if (st != CR_OK) {
                check_true(c, false, "prepared gradient refused a point on the recorded path");
                printf("  status %d: %s\n", (int)st, cr_ctx_errmsg(e->ctx));
                continue;
            }
            assert_int_equal(cr_tape_value_and_gradient(t, prog_fn, p, x, n, &yf, gf), CR_OK);
            close_to(c, "prepared value vs interpreter", 0, y, yi, 1e-13);
            close_to(c, "prepared value vs fresh tape", 0, y, yf, 1e-14);
            double scale = 0;
            for (size_t i = 0; i < n; i++) {
                close_to(c, "prepared gradient vs fresh tape", i, g[i], gf[i], 1e-13);
                scale = fmax(scale, fabs(gf[i]));
            }
            for (size_t i = 0; i < n; i++) {
                double fd, fd2;
                unit(d, n, i);
                /* tolerance: the vector's scale, plus the differences' own error estimate
                 * (the same stencil at 2h) */
                if (fd_dir(p, x, d, &p0, &fd) && fd_step(p, x, d, &p0, 2e-3, &fd2)) {
                    e->fd_checked++;
                    close_to(c, "prepared gradient vs differences", i, g[i], fd,
                             1e-7 * (1.0 + scale) + 8.0 * fabs(fd - fd2));
                } else {
                    e->fd_skipped++;
                }
            }
        } else {
            e->refused++;
            check_true(c, st == CR_EDOMAIN, "prepared gradient: another path not refused");
            assert_contains(cr_ctx_errmsg(e->ctx), "prepared gradient: the comparison");
            check_true(c, y == SENTINEL && all_sentinel(g, n),
                       "a refused prepared gradient wrote its outputs");
            /* still usable: at x0 again */
            assert_int_equal(cr_prepared_value_and_gradient(pg, x0, n, &y, g), CR_OK);
            close_to(c, "prepared value at x0 after a refusal", 0, y, y0, 1e-14);
            for (size_t i = 0; i < n; i++)
                close_to(c, "prepared gradient at x0 after a refusal", i, g[i], g0[i], 1e-13);
        }

        /* the prepared H v */
        yh = SENTINEL;
        fill(hv, n);
        fill(gh, n);
        st = cr_prepared_hvp(ph, x, n, v, hv, &yh, gh);
        if (agree) {
            if (st != CR_OK) {
                check_true(c, false, "prepared H v refused a point on the recorded path");
                printf("  status %d: %s\n", (int)st, cr_ctx_errmsg(e->ctx));
                continue;
            }
            cr_var xs[8], ys;
            assert_int_equal(cr_tape_record(t2, prog_fn, p, x, n, xs, &ys, 1), CR_OK);
            assert_int_equal(cr_tape_hvp(t2, ys, xs, n, v, hv2, g2), CR_OK);
            close_to(c, "prepared H v value", 0, yh, yi, 1e-13);
            double scale = 0;
            for (size_t i = 0; i < n; i++) {
                close_to(c, "prepared H v vs second-order tape", i, hv[i], hv2[i], 1e-12);
                close_to(c, "prepared H v gradient vs tape", i, gh[i], g2[i], 1e-13);
                scale = fmax(scale, fabs(hv2[i]));
            }
            /* H v against differences along v of the interpreter's partials (both
             * fourth-order central differences, on the recorded path) */
            for (size_t i = 0; i < n && n <= 4; i++) {
                static const double st4[4] = {-2.0, -1.0, 1.0, 2.0}, w4[4] = {1.0, -8.0, 8.0, -1.0};
                double xp[8], est[2] = {0, 0}, dfd;
                bool ok = true;
                unit(d, n, i);
                for (int hs = 0; hs < 2; hs++) { /* steps h and 2h: the error estimate */
                    double hstep = hs ? 2e-3 : 1e-3;
                    for (int q = 0; q < 4 && ok; q++) {
                        for (size_t j = 0; j < n; j++)
                            xp[j] = x[j] + st4[q] * hstep * v[j];
                        ok = fd_dir(p, xp, d, &p0, &dfd);
                        est[hs] += w4[q] * dfd / (12.0 * hstep);
                    }
                }
                if (ok) {
                    e->hv_fd++;
                    close_to(c, "prepared H v vs differences", i, hv[i], est[0],
                             1e-5 * (1.0 + scale) + 8.0 * fabs(est[0] - est[1]));
                }
            }
            /* the first-order replay of the H v preparation */
            y = SENTINEL;
            assert_int_equal(cr_prepared_value_and_gradient(ph, x, n, &y, g), CR_OK);
            close_to(c, "value_and_gradient on a prepared H v", 0, y, yi, 1e-13);
        } else {
            check_true(c, st == CR_EDOMAIN, "prepared H v: another path not refused");
            assert_contains(cr_ctx_errmsg(e->ctx), "comparison");
            check_true(c, yh == SENTINEL && all_sentinel(hv, n) && all_sentinel(gh, n),
                       "a refused prepared H v wrote its outputs");
            for (size_t i = 0; i < n; i++)
                v[i] = 0.5;
            assert_int_equal(cr_prepared_hvp(ph, x0, n, v, hv, &yh, gh), CR_OK);
            close_to(c, "prepared H v at x0 after a refusal", 0, yh, y0, 1e-14);
            for (size_t i = 0; i < n; i++)
                close_to(c, "prepared H v gradient at x0 after a refusal", i, gh[i], g0[i], 1e-13);
        }
    }
    cr_prepared_free(pg);
    cr_prepared_free(ph);
    cr_tape_free(t);
    cr_tape_free(t2);
}

/* 3. Caller buffers of random sizes. */
static void run_buffer(env *e, prog *p, ck *c, uint64_t *s)
{
    size_t n = p->nin;
    double x[8], g[8], gf[8], y, yf;
    for (size_t i = 0; i < n; i++)
        x[i] = rnd_range(s, -1.5, 1.5);
    /* tiny to ample: 16 bytes to 1 MiB, log-uniform */
    double r = rnd_unit(s);
    size_t sz = r < 0.1   ? (size_t)1 << 20
                : r < 0.4 ? (size_t)16 << rnd_below(s, 14)
                          : (size_t)1024 << rnd_below(s, 4);
    sz += rnd_below(s, sz / 2 + 1);
    void *buf = malloc(sz);
    assert_non_null(buf);
    cr_tape_params tp = {.buffer = buf, .buffer_size = sz};
    if (rnd_unit(s) < 0.3)
        tp.flags = CR_TAPE_SECOND_ORDER;
    cr_tape *tb = NULL, *t = NULL;
    size_t live = e->cnt.live;
    cr_status st = cr_tape_new(e->cctx, &tp, &tb);
    assert_int_equal(st, CR_OK);
    assert_int_equal(cr_tape_new(e->ctx, NULL, &t), CR_OK);
    size_t use = p->use;
    for (bool first = true;; first = false) {
        size_t allocs = e->cnt.allocs;
        path pa;
        double yi = interp(p, x, &pa);
        fill(g, n);
        st = cr_tape_value_and_gradient(tb, prog_fn, p, x, n, &y, g);
        check_true(c, e->cnt.allocs == allocs, "a tape on a caller buffer allocated");
        if (st == CR_OK) {
            if (first)
                e->buf_fit++;
            else
                e->buf_shorter++;
            assert_int_equal(cr_tape_value_and_gradient(t, prog_fn, p, x, n, &yf, gf), CR_OK);
            close_to(c, "buffer tape value", 0, y, yi, 1e-13);
            for (size_t i = 0; i < n; i++)
                close_to(c, "buffer tape gradient vs fresh tape", i, g[i], gf[i], 0);
            break;
        }
        check_true(c, st == CR_EARENA, "a full caller buffer did not give CR_EARENA");
        check_true(c, cr_tape_status(tb) == CR_EARENA, "tape status after a full buffer");
        check_true(c, cr_tape_errmsg(tb)[0] != '\0', "no message for a full buffer");
        check_true(c, sz < (1u << 20), "an ample buffer was full");
        if (first)
            e->buf_full++;
        if (p->use == 0) {
            check_true(c, sz < 2048, "a buffer of 2 KiB does not take one input");
            break;
        }
        p->use /= 2; /* a shorter program on the same tape */
    }
    p->use = use;
    cr_tape_free(tb);
    cr_tape_free(t);
    check_true(c, e->cnt.live == live, "a tape on a caller buffer left an allocation");
    free(buf);
}

/* 4. One tape through random resets, recordings, sweeps, errors and clear_error. */
static void run_reuse(env *e, prog *p, ck *c, uint64_t *s)
{
    size_t n = p->nin;
    double x[8], g[8], gf[8], yf;
    cr_tape *t = NULL, *other = NULL, *fresh = NULL;
    assert_int_equal(cr_tape_new(e->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(e->ctx, NULL, &other), CR_OK);
    cr_var ox = cr_tape_input(other, 1.0);   /* a foreign variable */
    cr_var old = cr_const(0.0);              /* a variable of t's previous recording */
    bool have_old = false, old_live = false; /* old_live: no reset since old was made */
    size_t use = p->use;
    for (size_t step = 0; step < 8; step++) {
        e->reuse_steps++;
        for (size_t i = 0; i < n; i++)
            x[i] = rnd_range(s, -1.5, 1.5);
        p->use = rnd_below(s, use + 1);
        int act = (int)rnd_below(s, 4);
        cr_var xs[8], y;
        if (act == 0 || act == 1) {
            /* reset (or not) and record by hand, maybe after a foreign variable and
             * clear_error (the records made before the error stay) */
            if (act == 0 || cr_tape_status(t) != CR_OK) {
                cr_tape_reset(t);
                old_live = false;
            }
            if (rnd_unit(s) < 0.5) {
                cr_var f = rnd_unit(s) < 0.5 || !have_old || old_live ? ox : old;
                cr_var r = cr_add(t, f, cr_const(1.0));
                e->foreign++;
                check_true(c, cr_tape_status(t) == CR_ETAPE, "a foreign variable: no CR_ETAPE");
                check_true(c, isnan(r.v), "a foreign variable's result is not NaN");
                check_true(c, cr_tape_errmsg(t)[0] != '\0', "CR_ETAPE without a message");
                cr_var r2 = cr_mul(t, cr_tape_input(t, 2.0), cr_const(3.0));
                check_true(c, cr_tape_status(t) == CR_ETAPE && isnan(r2.v),
                           "CR_ETAPE is not sticky");
                check_true(c, cr_tape_gradient(t, r2, &r2, 1, g) == CR_ETAPE,
                           "a sweep after CR_ETAPE");
                cr_tape_clear_error(t);
                check_true(c, cr_tape_status(t) == CR_OK, "clear_error");
            }
            assert_int_equal(cr_tape_inputs(t, x, n, xs), CR_OK);
            assert_int_equal(prog_fn(t, xs, n, &y, 1, p), CR_OK);
        } else if (act == 2) {
            old_live = false;
            assert_int_equal(cr_tape_record(t, prog_fn, p, x, n, xs, &y, 1), CR_OK);
        } else {
            /* value_and_gradient, after maybe a foreign variable left the tape failed:
             * it resets */
            if (rnd_unit(s) < 0.5) {
                cr_var f = have_old && !old_live ? old : ox;
                (void)cr_sub(t, f, f);
                check_true(c, cr_tape_status(t) == CR_ETAPE, "a foreign variable: no CR_ETAPE");
            }
            double yv;
            assert_int_equal(cr_tape_value_and_gradient(t, prog_fn, p, x, n, &yv, g), CR_OK);
            assert_int_equal(cr_tape_new(e->ctx, NULL, &fresh), CR_OK);
            assert_int_equal(cr_tape_value_and_gradient(fresh, prog_fn, p, x, n, &yf, gf), CR_OK);
            cr_tape_free(fresh);
            close_to(c, "reused tape value", 0, yv, yf, 0);
            for (size_t i = 0; i < n; i++)
                close_to(c, "reused tape gradient", i, g[i], gf[i], 0);
            have_old = false;
            continue;
        }
        /* sweep (twice: the recording is reused) and compare with a fresh tape */
        assert_int_equal(cr_tape_new(e->ctx, NULL, &fresh), CR_OK);
        assert_int_equal(cr_tape_value_and_gradient(fresh, prog_fn, p, x, n, &yf, gf), CR_OK);
        cr_tape_free(fresh);
        close_to(c, "reused tape value", 0, y.v, yf, 0);
        for (int rep = 0; rep < 2; rep++) {
            assert_int_equal(cr_tape_gradient(t, y, xs, n, g), CR_OK);
            for (size_t i = 0; i < n; i++)
                close_to(c, "reused tape gradient", i, g[i], gf[i], 0);
        }
        old = xs[0];
        have_old = old_live = true;
    }
    p->use = use;
    cr_tape_free(t);
    cr_tape_free(other);
}

static void run_seed(env *e, uint64_t seed)
{
    prog p;
    gen_prog(&p, seed);
    ck c = {.p = &p, .seed = seed, .test = "test_tape_random_branch", .mode = ""};
    if (getenv("CR_RANDOM_DUMP") != NULL)
        dump_prog(&p);
    uint64_t s = seed ^ 0x5bd1e995u;
    run_prepared(e, &p, &c, &s);
    run_buffer(e, &p, &c, &s);
    run_reuse(e, &p, &c, &s);
    if (c.failed != 0 && getenv("CR_RANDOM_DUMP") == NULL)
        dump_prog(&p);
    free_prog(&p);
    e->programs++;
    assert_int_equal(c.failed, 0);
}

/* ---- 2. The prepared array form: findmax and a comparison on a sum ------------------------- */

/* y = 2 max(x) + (sum(x) > k ? dot(x, x) / 4 : sum(sin.(x))) */
typedef struct aenv {
    double k;
} aenv;

static cr_status arr_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *ae)
{
    (void)n;
    const aenv *a = ae;
    cr_targ x = cr_targ_arr(xs[0]), mi[2];
    if (cr_tape_acall_n(t, &cr_fn_findmax, &x, 1, mi, 2) != CR_OK)
        return cr_tape_status(t);
    cr_var b;
    if (cr_tape_cmp(t, cr_av_sum(t, xs[0]), CR_CMP_GT, cr_const(a->k)))
        b = cr_mul(t, cr_const(0.25), cr_av_dot(t, xs[0], xs[0]));
    else
        b = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, x));
    *y = cr_add(t, cr_mul(t, cr_const(2.0), mi[0].u.s), b);
    return cr_tape_status(t);
}

static double arr_c(const double *x, size_t len, double k, size_t *imax, bool *cond)
{
    size_t im = 0;
    double sum = 0, dot = 0, sins = 0;
    for (size_t i = 0; i < len; i++) {
        if (x[i] > x[im])
            im = i;
        sum += x[i];
        dot += x[i] * x[i];
        sins += sin(x[i]);
    }
    *imax = im;
    *cond = sum > k;
    return 2.0 * x[im] + (*cond ? 0.25 * dot : sins);
}

static void run_arrays(env *e, uint64_t seed)
{
    uint64_t s = seed;
    prog dummy = {.seed = seed};
    ck c = {.p = &dummy, .seed = seed, .test = "test_tape_random_branch", .mode = "arrays"};
    size_t len = 2 + rnd_below(&s, 7);
    aenv a = {rnd_range(&s, -1.0, 1.0)};
    double x0[8], x[8], g[8], gf[8], y, yf;
    for (size_t i = 0; i < len; i++)
        x0[i] = rnd_range(&s, -1.5, 1.5);
    cr_array xa0 = cr_array_vector(x0, len), xa = cr_array_vector(x, len);
    cr_array ga = cr_array_vector(g, len), gfa = cr_array_vector(gf, len);
    const cr_array *xs0[1] = {&xa0}, *xs[1] = {&xa};
    cr_array *gs[1] = {&ga}, *gfs[1] = {&gfa};
    size_t im0, im;
    bool c0, cn;
    (void)arr_c(x0, len, a.k, &im0, &c0);
    cr_prepared *pg = NULL;
    cr_tape *t = NULL;
    assert_int_equal(cr_tape_new(e->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_prepare_gradient_arrays(e->ctx, NULL, arr_fn, &a, xs0, 1, &pg), CR_OK);
    for (size_t k = 0; k < 12; k++) {
        double sc = rnd_unit(&s) < 0.5 ? 0.02 : 0.8;
        for (size_t i = 0; i < len; i++)
            x[i] = x0[i] + sc * rnd_range(&s, -1.0, 1.0);
        double yi = arr_c(x, len, a.k, &im, &cn);
        y = SENTINEL;
        fill(g, len);
        cr_status st = cr_prepared_value_and_gradient_arrays(pg, xs, 1, &y, gs);
        if (im == im0 && cn == c0) {
            e->arr_ok++;
            check_true(&c, st == CR_OK, "prepared arrays refused the recorded index and branch");
            if (st != CR_OK)
                continue;
            assert_int_equal(cr_tape_value_and_gradient_arrays(t, arr_fn, &a, xs, 1, &yf, gfs),
                             CR_OK);
            close_to(&c, "prepared arrays value", 0, y, yi, 1e-13);
            close_to(&c, "prepared arrays value vs tape", 0, y, yf, 1e-14);
            for (size_t i = 0; i < len; i++) {
                close_to(&c, "prepared arrays gradient vs tape", i, g[i], gf[i], 1e-13);
                /* central differences, away from ties and the branch boundary */
                double h = 1e-4, xi = x[i], f[2];
                size_t imh;
                bool ch, same = true;
                for (int sgn = 0; sgn < 2; sgn++) {
                    x[i] = xi + (sgn ? h : -h);
                    f[sgn] = arr_c(x, len, a.k, &imh, &ch);
                    same = same && imh == im0 && ch == c0;
                }
                x[i] = xi;
                if (same)
                    close_to(&c, "prepared arrays gradient vs differences", i, g[i],
                             (f[1] - f[0]) / (2 * h), 1e-6);
            }
        } else {
            e->arr_refused++;
            check_true(&c, st == CR_EDOMAIN, "prepared arrays: another index or branch");
            const char *msg = cr_ctx_errmsg(e->ctx);
            check_true(&c, strstr(msg, im != im0 ? "findmax" : "comparison") != NULL,
                       "prepared arrays: the message names findmax or the comparison");
            check_true(&c, y == SENTINEL && all_sentinel(g, len),
                       "a refused prepared arrays replay wrote its outputs");
        }
    }
    cr_prepared_free(pg);
    cr_tape_free(t);
    if (c.failed != 0)
        printf("  arrays: len %zu, k %.17g\n", len, a.k);
    assert_int_equal(c.failed, 0);
}

/* ---- Driver -------------------------------------------------------------------------------- */

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    if (e == NULL || cr_ctx_new(NULL, &e->ctx) != CR_OK)
        return -1;
    cr_ctx_params cp = {.realloc_fn = counting_realloc, .alloc_env = &e->cnt};
    if (cr_ctx_new(&cp, &e->cctx) != CR_OK)
        return -1;
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    cr_ctx_free(e->ctx);
    cr_ctx_free(e->cctx);
    free(e);
    return 0;
}

static void test_random_branch_programs(void **state)
{
    env *e = *state;
    uint64_t one = replay_seed();
    if (one != 0) {
        run_seed(e, one);
        run_arrays(e, one);
        return;
    }
    size_t n = programs(2000);
    size_t from = programs_from();
    for (size_t i = from; i < from + n; i++) {
        uint64_t s = 0xb7a0c4u * 0x100000000u + i;
        uint64_t seed = rnd_next(&s) | 1;
        run_seed(e, seed);
        run_arrays(e, seed);
    }
    if (getenv("CR_RANDOM_PROGRAMS") != NULL)
        printf("%zu programs; prepared: %zu points on the recorded path, %zu refused, %zu "
               "gradient components against differences (%zu skipped: a stencil crossed a "
               "branch), %zu H v components; buffers: %zu fit, %zu full (%zu shorter programs "
               "then fit); reuse: %zu steps, %zu foreign variables; arrays: %zu replays, %zu "
               "refused\n",
               e->programs, e->agree, e->refused, e->fd_checked, e->fd_skipped, e->hv_fd,
               e->buf_fit, e->buf_full, e->buf_shorter, e->reuse_steps, e->foreign, e->arr_ok,
               e->arr_refused);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_branch_programs),
    };
    return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
