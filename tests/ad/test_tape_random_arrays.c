/*
 * Random-program differential test of the AD engines over ARRAY programs: the counterpart of
 * test_tape_random.c for the array and linear-algebra rules. A seeded generator builds
 * straight-line programs over a register file of arrays (vectors and matrices of 1 to 6 rows
 * and columns, f64; inputs dense or Symmetric, Upper, Lower, Diagonal) and scalars, from 1 to
 * 3 input arrays, through the rules as the tape records them: the shortcuts (cr_av_matmul,
 * cr_av_broadcast1/2, cr_av_sum, cr_av_dot, cr_av_slice: kernels where they apply) and
 * cr_tape_acall / cr_tape_acall_a / cr_tape_acall_s / cr_tape_acall_n on matmul, transpose,
 * adjoint, broadcasts, sum (with dims), dot, reshape, view, getindex, hcat, vcat, tr,
 * A + λI, λI * A, det, logdet, inv, solve, cholesky, norm, kron, diag, diagm, expm,
 * Symmetric, logsumexp, softmax, and the tuple results logabsdet, eigen, qr, lu and extrema;
 * one register is often used several times (A * A, dot(x, x), x .* x, B * Bᵀ), and the
 * inline scalar arithmetic of tape.h mixes in. Matrices handed to det, inv, solve, logdet
 * and the factorizations are made well conditioned (I + 0.3/n tanh.(B), B Bᵀ + 0.5 I) and
 * magnitudes are squashed (tanh broadcasts, x / (1 + x²)), so that central differences are
 * accurate.
 *
 * Every mode (value_and_gradient_arrays, gradient_arrays over several outputs, avjp of an
 * array output, ajvp on a forward tape, ahvp on a second-order tape, prepared gradients and
 * prepared H v at new arrays) is compared with central differences of a plain interpreter of
 * the same program, which calls the rules' primal functions (cr_function_call) on plain
 * arrays, and with each other where they compute the same quantity. Structured inputs are
 * differenced along their data (the entries the engine reads).
 *
 * Replay a failure: CR_RANDOM_SEED=<seed printed> build/tests/test_tape_random_arrays (with
 * CR_RANDOM_DUMP=1 to print the program). Run longer: CR_RANDOM_PROGRAMS=<count>.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules/tape_inline.h>

#include "test_random.h"
#include "test_util.h"

/* ---- Programs ------------------------------------------------------------------------------ */

#define MAX_IN   3
#define MAX_REG  200
#define MAX_INS  200
#define MAX_OUT  3
#define MAX_DATA 36 /* elements of one input's data or logical array */
#define MAX_NUM  72 /* elements of any register (hcat, vcat and kron may reach it) */

enum { RK_S = 0, RK_A = 1 };

/* A register: a scalar, or an array of r x c (c == 0: a vector of r) with a structure tag;
 * bnd bounds the magnitude of its elements. */
typedef struct reg {
    uint8_t kind, st, r, c;
    double bnd;
} reg;

enum op {
    O_SADD,
    O_SMUL,
    O_SSQ, /* a / (1 + a²) */
    O_MATMUL,
    O_TRANSPOSE,
    O_ADJOINT,
    O_BADD,
    O_BSUB,
    O_BMUL,
    O_BSCALE,  /* s .* A, s a scalar register */
    O_BSCALEK, /* k .* A, k a constant */
    O_BTANH,
    O_BSIN,
    O_BSQ,
    O_SUM,
    O_DOT,
    O_SUMDIM,
    O_VEC,
    O_RESHAPE,
    O_SLICE,
    O_GETINDEX,
    O_HCAT,
    O_VCAT,
    O_TR,
    O_ADDI, /* A + kI */
    O_MULU, /* kI * A */
    O_DET,
    O_LOGDET,
    O_INV,
    O_SOLVE,
    O_CHOL,
    O_NORM,
    O_KRON,
    O_DIAG,
    O_DIAGM,
    O_EXPM,
    O_SYMM,
    O_LOGSUMEXP,
    O_SOFTMAX,
    O_LOGABSDET, /* tuple (logabsdet, sign) */
    O_EIGEN,     /* tuple (values, vectors) */
    O_QR,        /* tuple (Q, R) */
    O_LU,        /* tuple (L, U, p) */
    O_EXTREMA,   /* tuple (lo, hi) */
    O_FINDMAX,   /* tuple (max, index): the index is a constant of the recording */
    O_SVD,       /* tuple (U, S, V) */
    O_GEMM,      /* k A B + 0.5 C: no second-order form */
    O_VIEWRC,    /* view(A, i, :) (i1 >= 0) or view(A, :, j) (j = -1 - i1): a strided vector */
    O_OUTER,     /* (generator only) u .* w' or u .+ w' by broadcasting (r x 1) with (1 x c) */
    O_SUMF,      /* sum(sin, A) */
    O_CHOLSOLVE, /* cholesky_solve(U, B) */
    O_COUNT
};

static const char *const k_op_names[O_COUNT] = {
    "sadd",    "smul",     "ssq",      "matmul",  "transpose", "adjoint", "b+",      "b-",
    "b*",      "s.*",      "k.*",      "tanh.",   "sin.",      "square.", "sum",     "dot",
    "sumdims", "vec",      "reshape",  "view",    "getindex",  "hcat",    "vcat",    "tr",
    "+kI",     "kI*",      "det",      "logdet",  "inv",       "solve",   "chol",    "norm",
    "kron",    "diag",     "diagm",    "expm",    "Symmetric", "lse",     "softmax", "logabsdet",
    "eigen",   "qr",       "lu",       "extrema", "findmax",   "svd",     "gemm",    "view(i|j)",
    "outer",   "sum(sin)", "cholsolve"};

typedef struct ins {
    uint8_t op, path, nout;
    uint32_t a, b;
    double k;
    int64_t i1;
    int64_t shp[2];
    cr_array shpa; /* shp as an i64 array (reshape) */
    cr_range rg;   /* view's range */
    int32_t out[3];
} ins;

typedef struct prog {
    uint64_t seed;
    size_t nin;
    size_t off[MAX_IN + 1]; /* data offsets of the inputs; off[nin] = all data */
    reg regs[MAX_REG];
    size_t nreg;
    ins code[MAX_INS];
    size_t nins;
    size_t m;               /* scalar outputs */
    uint32_t outs[MAX_OUT]; /* their registers */
    uint32_t aout;          /* the array output's register */
    bool so;                /* every function has a second-order form */
    size_t gsk;             /* stride of the gradient, direction and H v arrays (1 or 2) */
    size_t wrec, wrep;      /* stride of the inputs' data when recorded, when replayed */
    bool ops_used[O_COUNT];
} prog;

static size_t numel_of(const reg *r)
{
    return r->kind == RK_S ? 1 : (size_t)r->r * (r->c ? r->c : 1);
}

static size_t ndata_of(const reg *r)
{
    return r->st == CR_MAT_DIAGONAL ? r->r : numel_of(r);
}

typedef struct gen {
    prog *p;
    uint64_t s;
} gen;

static uint32_t new_reg(prog *p, unsigned kind, size_t r, size_t c, unsigned st, double bnd)
{
    assert_true(p->nreg < MAX_REG);
    reg *g = &p->regs[p->nreg];
    g->kind = (uint8_t)kind;
    g->r = (uint8_t)r;
    g->c = (uint8_t)c;
    g->st = (uint8_t)st;
    g->bnd = bnd;
    assert_true(numel_of(g) <= MAX_NUM);
    return (uint32_t)p->nreg++;
}

static ins *emit(gen *g, unsigned op, uint32_t a, uint32_t b)
{
    prog *p = g->p;
    assert_true(p->nins < MAX_INS);
    ins *in = &p->code[p->nins++];
    memset(in, 0, sizeof *in);
    in->op = (uint8_t)op;
    in->path = (uint8_t)rnd_below(&g->s, 3);
    in->nout = 1;
    in->a = a;
    in->b = b;
    in->out[0] = in->out[1] = in->out[2] = -1;
    p->ops_used[op] = true;
    return in;
}

/* One result register for the instruction just emitted. */
static uint32_t res(gen *g, ins *in, unsigned kind, size_t r, size_t c, unsigned st, double bnd)
{
    uint32_t o = new_reg(g->p, kind, r, c, st, bnd);
    in->out[0] = (int32_t)o;
    return o;
}

static bool is_arr(const reg *r)
{
    return r->kind == RK_A;
}
static bool is_mat(const reg *r)
{
    return r->kind == RK_A && r->c != 0;
}
static bool is_sq(const reg *r)
{
    return r->kind == RK_A && r->c == r->r;
}
static bool is_vec(const reg *r)
{
    return r->kind == RK_A && r->c == 0;
}
static bool is_sca(const reg *r)
{
    return r->kind == RK_S;
}

/* A register satisfying pred (recent ones preferred), or -1. */
static int64_t pick(gen *g, bool (*pred)(const reg *))
{
    prog *p = g->p;
    uint32_t cand[MAX_REG];
    size_t n = 0;
    for (size_t i = 0; i < p->nreg; i++)
        if (pred(&p->regs[i]))
            cand[n++] = (uint32_t)i;
    if (n == 0)
        return -1;
    if (n > 4 && rnd_unit(&g->s) < 0.6)
        return cand[n - 1 - rnd_below(&g->s, 4)];
    return cand[rnd_below(&g->s, n)];
}

/* Another register of a's shape (a itself, often: aliasing). */
static uint32_t pick_same(gen *g, uint32_t a)
{
    prog *p = g->p;
    const reg *ra = &p->regs[a];
    if (rnd_unit(&g->s) < 0.35)
        return a;
    uint32_t cand[MAX_REG];
    size_t n = 0;
    for (size_t i = 0; i < p->nreg; i++) {
        const reg *r = &p->regs[i];
        if (r->kind == RK_A && r->r == ra->r && r->c == ra->c)
            cand[n++] = (uint32_t)i;
    }
    return cand[rnd_below(&g->s, n)];
}

static uint32_t un(gen *g, unsigned op, uint32_t a, double bnd)
{
    const reg *r = &g->p->regs[a];
    ins *in = emit(g, op, a, 0);
    size_t rr = r->r, cc = r->c;
    unsigned st = op == O_SYMM ? CR_MAT_SYMMETRIC : CR_MAT_DENSE;
    if (op == O_TRANSPOSE || op == O_ADJOINT) {
        rr = r->c;
        cc = r->r;
        st = r->st == CR_MAT_UPPER ? CR_MAT_LOWER : r->st == CR_MAT_LOWER ? CR_MAT_UPPER : r->st;
    }
    return res(g, in, RK_A, rr, cc, st, bnd);
}

/* Bound array registers: tanh.(a) when a may exceed 3. */
static uint32_t tame(gen *g, uint32_t a)
{
    reg *r = &g->p->regs[a];
    if (r->kind == RK_A && r->bnd > 3)
        return un(g, O_BTANH, a, 1);
    if (r->kind == RK_S && r->bnd > 3) {
        ins *in = emit(g, O_SSQ, a, 0);
        return res(g, in, RK_S, 0, 0, 0, 0.5);
    }
    return a;
}

static uint32_t scalek(gen *g, uint32_t a, double k)
{
    ins *in = emit(g, O_BSCALEK, a, 0);
    in->k = k;
    const reg *r = &g->p->regs[a];
    return res(g, in, RK_A, r->r, r->c, CR_MAT_DENSE, fabs(k) * r->bnd);
}

static uint32_t addi(gen *g, uint32_t a, double k)
{
    ins *in = emit(g, O_ADDI, a, 0);
    in->k = k;
    const reg *r = &g->p->regs[a];
    return res(g, in, RK_A, r->r, r->c, CR_MAT_DENSE, r->bnd + fabs(k));
}

/* A square matrix register, made if needed (M Mᵀ of a matrix, diagm of a vector). */
static uint32_t square(gen *g)
{
    int64_t a = pick(g, is_sq);
    if (a >= 0 && rnd_unit(&g->s) < 0.8)
        return (uint32_t)a;
    a = pick(g, is_mat);
    if (a >= 0) {
        uint32_t t = un(g, O_TRANSPOSE, (uint32_t)a, g->p->regs[a].bnd);
        const reg *r = &g->p->regs[a];
        ins *in = emit(g, O_MATMUL, (uint32_t)a, t);
        return tame(g, res(g, in, RK_A, r->r, r->r, CR_MAT_DENSE, r->c * r->bnd * r->bnd));
    }
    a = pick(g, is_vec);
    if (g->p->regs[a].r > 6) {
        ins *in = emit(g, O_SLICE, (uint32_t)a, 0);
        in->rg = (cr_range){0, 6, 1};
        a = res(g, in, RK_A, 6, 0, CR_MAT_DENSE, g->p->regs[a].bnd);
    }
    const reg *r = &g->p->regs[a];
    ins *in = emit(g, O_DIAGM, (uint32_t)a, 0);
    return res(g, in, RK_A, r->r, r->r, CR_MAT_DENSE, r->bnd);
}

/* I + 0.3/n tanh.(a): eigenvalues within 0.3 of 1 (det, inv, solve, lu, qr). */
static uint32_t wellcond(gen *g, uint32_t a)
{
    size_t n = g->p->regs[a].r;
    uint32_t t = un(g, O_BTANH, a, 1);
    if (rnd_unit(&g->s) < 0.5) {
        t = scalek(g, t, 0.3 / (double)n);
    } else {
        ins *in = emit(g, O_MULU, t, 0);
        in->k = 0.3 / (double)n;
        t = res(g, in, RK_A, n, n, CR_MAT_DENSE, 0.3 / (double)n);
    }
    return addi(g, t, 1.0);
}

/* 0.4² B Bᵀ / k + 0.5 I, B = tanh.(a) of k columns: eigenvalues in [0.5, 0.66 + 0.16 n]. */
static uint32_t spd(gen *g, uint32_t a)
{
    const reg *r = &g->p->regs[a];
    if (r->c == 0 && r->r > 6) {
        ins *in = emit(g, O_SLICE, a, 0);
        in->rg = (cr_range){0, 6, 1};
        a = res(g, in, RK_A, 6, 0, CR_MAT_DENSE, r->bnd);
        r = &g->p->regs[a];
    }
    size_t n = r->r, k = r->c ? r->c : 1;
    if (r->c == 0) {
        ins *in = emit(g, O_RESHAPE, a, 0);
        in->shp[0] = (int64_t)n;
        in->shp[1] = 1;
        a = res(g, in, RK_A, n, 1, CR_MAT_DENSE, r->bnd);
    }
    uint32_t b = scalek(g, un(g, O_BTANH, a, 1), 0.4 / sqrt((double)k));
    uint32_t bt = un(g, rnd_unit(&g->s) < 0.5 ? O_TRANSPOSE : O_ADJOINT, b, 0.4);
    ins *in = emit(g, O_MATMUL, b, bt);
    uint32_t s = res(g, in, RK_A, n, n, CR_MAT_DENSE, 0.16);
    return addi(g, s, 0.5);
}

static uint32_t scalar_of(gen *g)
{
    int64_t s = pick(g, is_sca);
    if (s >= 0 && rnd_unit(&g->s) < 0.7)
        return (uint32_t)s;
    uint32_t a = (uint32_t)pick(g, is_arr);
    const reg *r = &g->p->regs[a];
    ins *in = emit(g, O_SUM, a, 0);
    return tame(g, res(g, in, RK_S, 0, 0, 0, (double)numel_of(r) * r->bnd));
}

static void gen_one(gen *g)
{
    prog *p = g->p;
    uint64_t *s = &g->s;
    unsigned op = (unsigned)rnd_below(s, O_COUNT);
    uint32_t a = (uint32_t)pick(g, is_arr);
    const reg *ra = &p->regs[a];
    ins *in;
    switch (op) {
    case O_SADD:
    case O_SMUL: {
        uint32_t x = scalar_of(g), y = rnd_unit(s) < 0.3 ? x : scalar_of(g);
        double bx = p->regs[x].bnd, by = p->regs[y].bnd;
        in = emit(g, op, x, y);
        tame(g, res(g, in, RK_S, 0, 0, 0, op == O_SADD ? bx + by : bx * by));
        return;
    }
    case O_SSQ:
        in = emit(g, O_SSQ, scalar_of(g), 0);
        res(g, in, RK_S, 0, 0, 0, 0.5);
        return;
    case O_MATMUL: {
        int64_t m = pick(g, is_mat);
        if (m < 0)
            break;
        const reg *rm = &p->regs[m];
        uint32_t b;
        if (rm->r == rm->c && rnd_unit(s) < 0.3) {
            b = (uint32_t)m; /* A * A */
        } else {
            uint32_t cand[MAX_REG];
            size_t n = 0;
            for (size_t i = 0; i < p->nreg; i++)
                if (p->regs[i].kind == RK_A && p->regs[i].r == rm->c)
                    cand[n++] = (uint32_t)i;
            b = n > 0 && rnd_unit(s) < 0.7 ? cand[rnd_below(s, n)]
                                           : un(g, O_TRANSPOSE, (uint32_t)m, rm->bnd);
        }
        const reg *rb = &p->regs[b];
        rm = &p->regs[m];
        in = emit(g, O_MATMUL, (uint32_t)m, b);
        tame(g, res(g, in, RK_A, rm->r, rb->c, CR_MAT_DENSE, rm->c * rm->bnd * rb->bnd));
        return;
    }
    case O_TRANSPOSE:
    case O_ADJOINT: {
        int64_t m = pick(g, is_mat);
        if (m < 0)
            break;
        un(g, op, (uint32_t)m, p->regs[m].bnd);
        return;
    }
    case O_BADD:
    case O_BSUB:
    case O_BMUL: {
        uint32_t b = pick_same(g, a);
        double ba = p->regs[a].bnd, bb = p->regs[b].bnd;
        in = emit(g, op, a, b);
        tame(g, res(g, in, RK_A, ra->r, ra->c, CR_MAT_DENSE, op == O_BMUL ? ba * bb : ba + bb));
        return;
    }
    case O_BSCALE: {
        uint32_t x = scalar_of(g);
        ra = &p->regs[a];
        in = emit(g, O_BSCALE, x, a);
        tame(g, res(g, in, RK_A, ra->r, ra->c, CR_MAT_DENSE, p->regs[x].bnd * ra->bnd));
        return;
    }
    case O_BSCALEK:
        tame(g, scalek(g, a, rnd_range(s, -1.5, 1.5)));
        return;
    case O_BTANH:
    case O_BSIN:
        un(g, op, a, 1);
        return;
    case O_BSQ:
        tame(g, un(g, op, a, ra->bnd * ra->bnd));
        return;
    case O_SUM:
    case O_NORM:
    case O_LOGSUMEXP:
        in = emit(g, op, a, 0);
        tame(g, res(g, in, RK_S, 0, 0, 0,
                    op == O_LOGSUMEXP ? ra->bnd + log((double)numel_of(ra))
                                      : (double)numel_of(ra) * ra->bnd));
        return;
    case O_DOT: {
        uint32_t b = pick_same(g, a);
        double bb = p->regs[b].bnd;
        in = emit(g, op, a, b);
        tame(g, res(g, in, RK_S, 0, 0, 0, (double)numel_of(ra) * ra->bnd * bb));
        return;
    }
    case O_SUMDIM: {
        int64_t m = pick(g, is_mat);
        if (m < 0)
            break;
        const reg *r = &p->regs[m];
        in = emit(g, op, (uint32_t)m, 0);
        in->i1 = (int64_t)rnd_below(s, 2);
        tame(g, res(g, in, RK_A, in->i1 ? r->r : 1, in->i1 ? 1 : r->c, CR_MAT_DENSE,
                    (in->i1 ? r->c : r->r) * r->bnd));
        return;
    }
    case O_VEC: {
        int64_t m = pick(g, is_mat);
        if (m < 0)
            break;
        const reg *r = &p->regs[m];
        in = emit(g, op, (uint32_t)m, 0);
        res(g, in, RK_A, numel_of(r), 0, CR_MAT_DENSE, r->bnd);
        return;
    }
    case O_RESHAPE: {
        int64_t v = pick(g, is_vec);
        if (v < 0)
            break;
        const reg *r = &p->regs[v];
        size_t n = r->r, rr, dv[MAX_NUM], nd = 0;
        for (size_t q = 1; q <= 8 && q <= n; q++)
            if (n % q == 0 && n / q <= 8)
                dv[nd++] = q;
        if (nd == 0)
            break;
        rr = dv[rnd_below(s, nd)];
        in = emit(g, op, (uint32_t)v, 0);
        in->shp[0] = (int64_t)rr;
        in->shp[1] = (int64_t)(n / rr);
        res(g, in, RK_A, rr, n / rr, CR_MAT_DENSE, r->bnd);
        return;
    }
    case O_SLICE: {
        int64_t v = pick(g, is_vec);
        if (v < 0 || p->regs[v].r < 2)
            break;
        const reg *r = &p->regs[v];
        size_t lo = rnd_below(s, r->r - 1), hi = lo + 1 + rnd_below(s, r->r - lo);
        in = emit(g, op, (uint32_t)v, 0);
        in->rg = (cr_range){(int64_t)lo, (int64_t)hi, 1};
        res(g, in, RK_A, hi - lo, 0, CR_MAT_DENSE, r->bnd);
        return;
    }
    case O_GETINDEX:
        in = emit(g, op, a, 0);
        in->i1 = (int64_t)rnd_below(s, numel_of(ra));
        res(g, in, RK_S, 0, 0, 0, ra->bnd);
        return;
    case O_HCAT:
    case O_VCAT: {
        int64_t m = pick(g, is_mat);
        if (m < 0)
            break;
        const reg *r = &p->regs[m];
        uint32_t cand[MAX_REG];
        size_t n = 0;
        for (size_t i = 0; i < p->nreg; i++) {
            const reg *q = &p->regs[i];
            if (is_mat(q) && (op == O_HCAT ? q->r == r->r && q->c + r->c <= 8
                                           : q->c == r->c && q->r + r->r <= 8))
                cand[n++] = (uint32_t)i;
        }
        if (n == 0)
            break;
        uint32_t b = cand[rnd_below(s, n)];
        const reg *q = &p->regs[b];
        in = emit(g, op, (uint32_t)m, b);
        res(g, in, RK_A, op == O_HCAT ? r->r : r->r + q->r, op == O_HCAT ? r->c + q->c : r->c,
            CR_MAT_DENSE, fmax(r->bnd, q->bnd));
        return;
    }
    case O_TR: {
        uint32_t m = square(g);
        const reg *r = &p->regs[m];
        in = emit(g, op, m, 0);
        tame(g, res(g, in, RK_S, 0, 0, 0, r->r * r->bnd));
        return;
    }
    case O_ADDI:
        tame(g, addi(g, square(g), rnd_range(s, -1, 1)));
        return;
    case O_MULU:
        in = emit(g, op, a, 0);
        in->k = rnd_range(s, -1.5, 1.5);
        tame(g, res(g, in, RK_A, ra->r, ra->c, CR_MAT_DENSE, fabs(in->k) * ra->bnd));
        return;
    case O_DET:
    case O_LOGDET:
    case O_LOGABSDET: {
        uint32_t m = square(g);
        size_t n = p->regs[m].r;
        uint32_t w = op == O_LOGDET && rnd_unit(s) < 0.5 ? spd(g, m) : wellcond(g, m);
        in = emit(g, op, w, 0);
        res(g, in, RK_S, 0, 0, 0, op == O_DET ? 5 : 0.5 * (double)n);
        if (op == O_LOGABSDET) {
            in->nout = 2;
            in->out[1] = (int32_t)new_reg(p, RK_S, 0, 0, 0, 1);
        }
        return;
    }
    case O_INV: {
        uint32_t m = square(g);
        uint32_t w = rnd_unit(s) < 0.3 ? spd(g, m) : wellcond(g, m);
        size_t n = p->regs[w].r;
        in = emit(g, op, w, 0);
        res(g, in, RK_A, n, n, CR_MAT_DENSE, 2);
        return;
    }
    case O_SOLVE: {
        uint32_t m = square(g);
        size_t n = p->regs[m].r;
        uint32_t cand[MAX_REG];
        size_t nc = 0;
        for (size_t i = 0; i < p->nreg; i++)
            if (p->regs[i].kind == RK_A && p->regs[i].r == n)
                cand[nc++] = (uint32_t)i;
        uint32_t b = cand[rnd_below(s, nc)];
        uint32_t w = rnd_unit(s) < 0.3 ? spd(g, m) : wellcond(g, m);
        const reg *rb = &p->regs[b];
        in = emit(g, op, w, b);
        tame(g, res(g, in, RK_A, n, rb->c, CR_MAT_DENSE, 2 * (double)n * rb->bnd));
        return;
    }
    case O_CHOL: {
        int64_t m = pick(g, is_arr);
        uint32_t w = spd(g, (uint32_t)m);
        size_t n = p->regs[w].r;
        in = emit(g, op, w, 0);
        res(g, in, RK_A, n, n, CR_MAT_UPPER, 1.5);
        return;
    }
    case O_KRON: {
        uint32_t cand[MAX_REG];
        size_t n = 0;
        for (size_t i = 0; i < p->nreg; i++) {
            const reg *q = &p->regs[i];
            if (q->kind == RK_A && (q->c == 0) == (ra->c == 0) && q->r * ra->r <= 8 &&
                q->c * ra->c <= 8)
                cand[n++] = (uint32_t)i;
        }
        if (n == 0)
            break;
        uint32_t b = cand[rnd_below(s, n)];
        const reg *q = &p->regs[b];
        in = emit(g, op, a, b);
        tame(g, res(g, in, RK_A, ra->r * q->r, ra->c * q->c, CR_MAT_DENSE, ra->bnd * q->bnd));
        return;
    }
    case O_DIAG: {
        uint32_t m = square(g);
        const reg *r = &p->regs[m];
        in = emit(g, op, m, 0);
        res(g, in, RK_A, r->r, 0, CR_MAT_DENSE, r->bnd);
        return;
    }
    case O_DIAGM: {
        int64_t v = pick(g, is_vec);
        if (v < 0 || p->regs[v].r > 8)
            break;
        const reg *r = &p->regs[v];
        in = emit(g, op, (uint32_t)v, 0);
        res(g, in, RK_A, r->r, r->r, CR_MAT_DENSE, r->bnd);
        return;
    }
    case O_EXPM: {
        uint32_t m = square(g);
        size_t n = p->regs[m].r;
        uint32_t t = scalek(g, un(g, O_BTANH, m, 1), 0.3 / (double)n);
        in = emit(g, op, t, 0);
        res(g, in, RK_A, n, n, CR_MAT_DENSE, 1.5);
        return;
    }
    case O_SYMM: {
        uint32_t m = square(g);
        const reg *r = &p->regs[m];
        in = emit(g, op, m, 0);
        res(g, in, RK_A, r->r, r->r, CR_MAT_SYMMETRIC, r->bnd);
        return;
    }
    case O_SOFTMAX:
        in = emit(g, op, a, 0);
        res(g, in, RK_A, ra->r, ra->c, CR_MAT_DENSE, 1);
        return;
    case O_EIGEN: {
        uint32_t m = un(g, O_BTANH, square(g), 1);
        size_t n = p->regs[m].r;
        if (rnd_unit(s) < 0.5)
            m = un(g, O_SYMM, m, 1);
        in = emit(g, op, m, 0);
        in->nout = 2;
        res(g, in, RK_A, n, 0, CR_MAT_DENSE, (double)n);
        /* the vectors' signs are arbitrary: only their squares enter the program */
        uint32_t vv = new_reg(p, RK_A, n, n, CR_MAT_DENSE, 1);
        in->out[1] = (int32_t)vv;
        p->regs[vv].kind = 2; /* not an operand */
        ins *sq = emit(g, O_BSQ, vv, 0);
        res(g, sq, RK_A, n, n, CR_MAT_DENSE, 1);
        return;
    }
    case O_QR:
    case O_LU: {
        uint32_t m = square(g);
        size_t n = p->regs[m].r;
        uint32_t w = wellcond(g, m);
        in = emit(g, op, w, 0);
        in->nout = op == O_QR ? 2 : 3;
        res(g, in, RK_A, n, n, op == O_QR ? CR_MAT_DENSE : CR_MAT_LOWER, 2);
        in->out[1] = (int32_t)new_reg(p, RK_A, n, n, CR_MAT_UPPER, 2);
        return;
    }
    case O_FINDMAX:
        in = emit(g, op, a, 0);
        in->nout = 2;
        res(g, in, RK_S, 0, 0, 0, ra->bnd);
        return;
    case O_SVD: {
        int64_t m = pick(g, is_mat);
        if (m < 0)
            break;
        uint32_t t = un(g, O_BTANH, (uint32_t)m, 1);
        size_t rr = p->regs[m].r, cc = p->regs[m].c, k = rr < cc ? rr : cc;
        in = emit(g, op, t, 0);
        in->nout = 3;
        uint32_t uu = res(g, in, RK_A, rr, k, CR_MAT_DENSE, 1);
        uint32_t sv = new_reg(p, RK_A, k, 0, CR_MAT_DENSE, (double)(rr * cc));
        uint32_t vv = new_reg(p, RK_A, cc, k, CR_MAT_DENSE, 1);
        in->out[1] = (int32_t)sv;
        in->out[2] = (int32_t)vv;
        /* the singular vectors' signs are arbitrary: only their squares enter */
        p->regs[uu].kind = 2;
        p->regs[vv].kind = 2;
        tame(g, sv);
        res(g, emit(g, O_BSQ, uu, 0), RK_A, rr, k, CR_MAT_DENSE, 1);
        res(g, emit(g, O_BSQ, vv, 0), RK_A, cc, k, CR_MAT_DENSE, 1);
        return;
    }
    case O_GEMM: {
        int64_t m = pick(g, is_mat);
        if (m < 0 || rnd_unit(s) < 0.5)
            break;
        const reg *r = &p->regs[m];
        uint32_t t = un(g, O_TRANSPOSE, (uint32_t)m, r->bnd);
        ins *mm = emit(g, O_MATMUL, (uint32_t)m, t);
        uint32_t c = res(g, mm, RK_A, r->r, r->r, CR_MAT_DENSE, r->c * r->bnd * r->bnd);
        in = emit(g, op, (uint32_t)m, t);
        in->k = rnd_range(s, -1, 1);
        in->i1 = c;
        tame(g, res(g, in, RK_A, r->r, r->r, CR_MAT_DENSE, 2 * p->regs[c].bnd));
        p->so = false;
        return;
    }
    case O_VIEWRC: {
        int64_t m = pick(g, is_mat);
        if (m < 0)
            break;
        const reg *r = &p->regs[m];
        in = emit(g, op, (uint32_t)m, 0);
        bool row = rnd_unit(s) < 0.5;
        in->i1 = row ? (int64_t)rnd_below(s, r->r) : -1 - (int64_t)rnd_below(s, r->c);
        res(g, in, RK_A, row ? r->c : r->r, 0, CR_MAT_DENSE, r->bnd);
        return;
    }
    case O_OUTER: {
        int64_t u1 = pick(g, is_vec), u2 = pick(g, is_vec);
        if (u1 < 0 || p->regs[u1].r > 8 || p->regs[u2].r > 8)
            break;
        size_t rr = p->regs[u1].r, cc = p->regs[u2].r;
        ins *q = emit(g, O_RESHAPE, (uint32_t)u1, 0);
        q->shp[0] = (int64_t)rr;
        q->shp[1] = 1;
        uint32_t col = res(g, q, RK_A, rr, 1, CR_MAT_DENSE, p->regs[u1].bnd);
        q = emit(g, O_RESHAPE, (uint32_t)u2, 0);
        q->shp[0] = 1;
        q->shp[1] = (int64_t)cc;
        uint32_t row = res(g, q, RK_A, 1, cc, CR_MAT_DENSE, p->regs[u2].bnd);
        bool mul = rnd_unit(s) < 0.6;
        in = emit(g, mul ? O_BMUL : O_BSUB, col, row);
        double b1 = p->regs[col].bnd, b2 = p->regs[row].bnd;
        tame(g, res(g, in, RK_A, rr, cc, CR_MAT_DENSE, mul ? b1 * b2 : b1 + b2));
        return;
    }
    case O_SUMF:
        in = emit(g, op, a, 0);
        tame(g, res(g, in, RK_S, 0, 0, 0, (double)numel_of(ra)));
        return;
    case O_CHOLSOLVE: {
        uint32_t m = square(g);
        size_t n = p->regs[m].r;
        uint32_t cand[MAX_REG];
        size_t nc = 0;
        for (size_t i = 0; i < p->nreg; i++)
            if (p->regs[i].kind == RK_A && p->regs[i].r == n)
                cand[nc++] = (uint32_t)i;
        uint32_t b = cand[rnd_below(s, nc)];
        ins *q = emit(g, O_CHOL, spd(g, m), 0);
        uint32_t uu = res(g, q, RK_A, n, n, CR_MAT_UPPER, 1.5);
        const reg *rb = &p->regs[b];
        if (rb->st != CR_MAT_DENSE)
            p->so = false; /* its second-order form covers a dense B only (refused) */
        in = emit(g, op, uu, b);
        tame(g, res(g, in, RK_A, n, rb->c, CR_MAT_DENSE, 2 * (double)n * rb->bnd));
        return;
    }
    case O_EXTREMA:
        if (numel_of(ra) < 2)
            break;
        in = emit(g, op, a, 0);
        in->nout = 2;
        res(g, in, RK_S, 0, 0, 0, ra->bnd);
        in->out[1] = (int32_t)new_reg(p, RK_S, 0, 0, 0, ra->bnd);
        return;
    default:
        break;
    }
    un(g, O_BSIN, a, 1); /* the op did not fit */
}

static void gen_prog(prog *p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->so = true; /* until gemm, which has no second-order form, is emitted */
    gen g = {p, seed};
    uint64_t *s = &g.s;
    p->seed = seed;
    p->nin = 1 + rnd_below(s, MAX_IN);
    size_t off = 0;
    for (size_t j = 0; j < p->nin; j++) {
        size_t r = 1 + rnd_below(s, 6), c = rnd_below(s, 7);
        unsigned st = CR_MAT_DENSE;
        double u = rnd_unit(s);
        if (u < 0.3) {
            c = r; /* square */
            static const unsigned k_st[4] = {CR_MAT_DIAGONAL, CR_MAT_SYMMETRIC, CR_MAT_UPPER,
                                             CR_MAT_LOWER};
            if (u < 0.2)
                st = k_st[rnd_below(s, 4)];
        }
        uint32_t i = new_reg(p, RK_A, r, c, st, 2);
        p->off[j] = off;
        off += ndata_of(&p->regs[i]);
    }
    p->off[p->nin] = off;
    double lr = rnd_unit(s);
    size_t len = 1 + rnd_below(s, lr < 0.6 ? 8 : lr < 0.9 ? 24 : 60);
    for (size_t i = 0; i < len && p->nins < MAX_INS - 40; i++)
        gen_one(&g);
    /* the array output: the last array result (an operation's, not an input) */
    p->aout = UINT32_MAX;
    for (size_t i = p->nreg; i-- > p->nin;)
        if (p->regs[i].kind == RK_A) {
            p->aout = (uint32_t)i;
            break;
        }
    if (p->aout == UINT32_MAX)
        p->aout = un(&g, O_BSIN, (uint32_t)pick(&g, is_arr), 1);
    /* output 0: a reduction of the array output plus recent scalars */
    uint32_t x = p->aout;
    const reg *rx = &p->regs[x];
    unsigned fin = (unsigned)rnd_below(s, 4);
    ins *in;
    uint32_t y;
    if (fin == 3 && is_sq(rx)) {
        in = emit(&g, O_TR, x, 0);
    } else if (fin == 2) {
        in = emit(&g, O_NORM, x, 0);
    } else {
        in = emit(&g, fin == 1 ? O_DOT : O_SUM, x, x);
    }
    y = tame(&g, res(&g, in, RK_S, 0, 0, 0, (double)numel_of(rx) * rx->bnd * rx->bnd));
    uint32_t others[MAX_REG];
    size_t no = 0;
    for (size_t i = 0; i < p->nreg; i++)
        if (p->regs[i].kind == RK_S && i != y)
            others[no++] = (uint32_t)i;
    for (size_t k = 0; k < 2 && no > 0; k++) {
        uint32_t o = others[no - 1 - rnd_below(s, no < 3 ? no : 3)];
        in = emit(&g, rnd_unit(s) < 0.7 ? O_SADD : O_SMUL, y, o);
        y = tame(&g, res(&g, in, RK_S, 0, 0, 0, p->regs[y].bnd + p->regs[o].bnd));
    }
    p->outs[0] = y;
    p->m = 1;
    while (p->m < MAX_OUT && no > 0 && rnd_unit(s) < 0.6)
        p->outs[p->m++] = others[rnd_below(s, no)];
    for (size_t i = 0; i < p->nins; i++) {
        ins *q = &p->code[i];
        if (q->op == O_RESHAPE) {
            size_t shape = 2;
            assert_int_equal(cr_array_view_init(&q->shpa, q->shp, CR_DT_I64, 1, &shape, NULL),
                             CR_OK);
        }
    }
}

static void dump_prog(const prog *p)
{
    printf("program %#" PRIx64 ": %zu inputs\n", p->seed, p->nin);
    for (size_t j = 0; j < p->nin; j++) {
        const reg *r = &p->regs[j];
        printf("  r%zu = input %ux%u %s\n", j, r->r, r->c, cr_matstruct_name((cr_matstruct)r->st));
    }
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->code[i];
        printf("  ");
        for (unsigned k = 0; k < in->nout; k++)
            if (in->out[k] >= 0) {
                const reg *r = &p->regs[in->out[k]];
                if (r->kind == RK_S)
                    printf("r%d(s) ", in->out[k]);
                else
                    printf("r%d(%ux%u%s) ", in->out[k], r->r, r->c,
                           r->st ? cr_matstruct_name((cr_matstruct)r->st) : "");
            }
        printf("= %s(r%u, r%u) path %u k %g i %" PRId64 "\n", k_op_names[in->op], in->a, in->b,
               in->path, in->k, in->i1);
    }
    printf("  outputs:");
    for (size_t i = 0; i < p->m; i++)
        printf(" r%u", p->outs[i]);
    printf("; array output r%u\n", p->aout);
}

/* ---- The operations as function calls ------------------------------------------------------- */

/* An argument: a register, or a constant value (reg < 0). */
typedef struct sarg {
    int32_t reg;
    cr_value v;
} sarg;

static sarg rg_(uint32_t r)
{
    sarg a = {(int32_t)r, {0}};
    return a;
}
static sarg cv_(cr_value v)
{
    sarg a = {-1, v};
    return a;
}

/* The function and arguments of an array instruction. */
static size_t spec(ins *in, const cr_value **f, sarg *a)
{
    switch (in->op) {
    case O_MATMUL:
        *f = &cr_fn_matmul;
        break;
    case O_TRANSPOSE:
    case O_ADJOINT:
        *f = in->op == O_TRANSPOSE ? &cr_fn_transpose : &cr_fn_adjoint;
        a[0] = rg_(in->a);
        return 1;
    case O_BADD:
    case O_BSUB:
    case O_BMUL:
        *f = &cr_fn_broadcast;
        a[0] = cv_(in->op == O_BADD ? cr_fn_add : in->op == O_BSUB ? cr_fn_sub : cr_fn_mul);
        a[1] = rg_(in->a);
        a[2] = rg_(in->b);
        return 3;
    case O_BSCALE:
        *f = &cr_fn_broadcast;
        a[0] = cv_(cr_fn_mul);
        a[1] = rg_(in->a);
        a[2] = rg_(in->b);
        return 3;
    case O_BSCALEK:
        *f = &cr_fn_broadcast;
        a[0] = cv_(cr_fn_mul);
        a[1] = cv_(cr_value_f64(in->k));
        a[2] = rg_(in->a);
        return 3;
    case O_BTANH:
    case O_BSIN:
    case O_BSQ:
        *f = &cr_fn_broadcast;
        a[0] = cv_(in->op == O_BTANH ? cr_fn_tanh : in->op == O_BSIN ? cr_fn_sin : cr_fn_square);
        a[1] = rg_(in->a);
        return 2;
    case O_SUM:
        *f = &cr_fn_sum;
        a[0] = rg_(in->a);
        return 1;
    case O_DOT:
        *f = &cr_fn_dot;
        break;
    case O_SUMDIM:
        *f = &cr_fn_sum;
        a[0] = rg_(in->a);
        a[1] = cv_(cr_value_i64(in->i1));
        return 2;
    case O_VEC:
        *f = &cr_fn_reshape;
        a[0] = rg_(in->a);
        a[1] = cv_(cr_value_i64(-1));
        return 2; /* fixed below */
    case O_RESHAPE:
        *f = &cr_fn_reshape;
        a[0] = rg_(in->a);
        a[1] = cv_(cr_value_array(&in->shpa));
        return 2;
    case O_SLICE:
        *f = &cr_fn_view;
        a[0] = rg_(in->a);
        a[1] = cv_(cr_value_struct(&cr_range_type, &in->rg));
        return 2;
    case O_GETINDEX:
        *f = &cr_fn_getindex;
        a[0] = rg_(in->a);
        a[1] = cv_(cr_value_i64(in->i1));
        return 2;
    case O_HCAT:
        *f = &cr_fn_hcat;
        break;
    case O_VCAT:
        *f = &cr_fn_vcat;
        break;
    case O_TR:
        *f = &cr_fn_tr;
        a[0] = rg_(in->a);
        return 1;
    case O_ADDI:
        *f = &cr_fn_add_uniform;
        a[0] = rg_(in->a);
        a[1] = cv_(cr_value_f64(in->k));
        return 2;
    case O_MULU:
        *f = &cr_fn_mul_uniform;
        a[0] = cv_(cr_value_f64(in->k));
        a[1] = rg_(in->a);
        return 2;
    case O_DET:
        *f = &cr_fn_det;
        a[0] = rg_(in->a);
        return 1;
    case O_LOGDET:
        *f = &cr_fn_logdet;
        a[0] = rg_(in->a);
        return 1;
    case O_INV:
        *f = &cr_fn_matinv;
        a[0] = rg_(in->a);
        return 1;
    case O_SOLVE:
        *f = &cr_fn_solve;
        break;
    case O_CHOL:
        *f = &cr_fn_cholesky;
        a[0] = rg_(in->a);
        return 1;
    case O_NORM:
        *f = &cr_fn_norm;
        a[0] = rg_(in->a);
        return 1;
    case O_KRON:
        *f = &cr_fn_kron;
        break;
    case O_DIAG:
        *f = &cr_fn_diag;
        a[0] = rg_(in->a);
        return 1;
    case O_DIAGM:
        *f = &cr_fn_diagm;
        a[0] = rg_(in->a);
        return 1;
    case O_EXPM:
        *f = &cr_fn_expm;
        a[0] = rg_(in->a);
        return 1;
    case O_SYMM:
        *f = &cr_fn_symmetric;
        a[0] = rg_(in->a);
        return 1;
    case O_LOGSUMEXP:
        *f = &cr_fn_logsumexp;
        a[0] = rg_(in->a);
        return 1;
    case O_SOFTMAX:
        *f = &cr_fn_softmax;
        a[0] = rg_(in->a);
        return 1;
    case O_LOGABSDET:
        *f = &cr_fn_logabsdet;
        a[0] = rg_(in->a);
        return 1;
    case O_EIGEN:
        *f = &cr_fn_eigen;
        a[0] = rg_(in->a);
        return 1;
    case O_QR:
        *f = &cr_fn_qr;
        a[0] = rg_(in->a);
        return 1;
    case O_LU:
        *f = &cr_fn_lu;
        a[0] = rg_(in->a);
        return 1;
    case O_EXTREMA:
        *f = &cr_fn_extrema;
        a[0] = rg_(in->a);
        return 1;
    case O_FINDMAX:
        *f = &cr_fn_findmax;
        a[0] = rg_(in->a);
        return 1;
    case O_SVD:
        *f = &cr_fn_svd;
        a[0] = rg_(in->a);
        return 1;
    case O_VIEWRC:
        *f = &cr_fn_view;
        a[0] = rg_(in->a);
        a[1] = in->i1 >= 0 ? cv_(cr_value_i64(in->i1)) : cv_(cr_colon);
        a[2] = in->i1 >= 0 ? cv_(cr_colon) : cv_(cr_value_i64(-1 - in->i1));
        return 3;
    case O_SUMF:
        *f = &cr_fn_sum;
        a[0] = cv_(cr_fn_sin);
        a[1] = rg_(in->a);
        return 2;
    case O_CHOLSOLVE:
        *f = &cr_fn_cholesky_solve;
        break;
    case O_GEMM:
        *f = &cr_fn_gemm;
        a[0] = cv_(cr_value_f64(in->k));
        a[1] = rg_(in->a);
        a[2] = rg_(in->b);
        a[3] = cv_(cr_value_f64(0.5));
        a[4] = rg_((uint32_t)in->i1);
        return 5;
    default:
        fail_msg("op %u has no spec", in->op);
    }
    a[0] = rg_(in->a);
    a[1] = rg_(in->b);
    return 2;
}

/* ---- The plain interpreter --------------------------------------------------------------- */

typedef struct env {
    cr_ctx *ctx;
    cr_arena *arena;
    size_t programs, skipped, points_skipped, fd_hvps;
    size_t refused, edomain;
    uint64_t sig; /* the integer elements of tuple results of the last plain run */
    const char *modes[16];
    size_t runs[16];
    size_t op_runs[O_COUNT];
    cr_tape *tapes[3];
} env;

/* The inputs as arrays over the data x (a Diagonal's n entries, others r x c); with sk = 2,
 * over a copy of x in w with every other element (strided arrays). */
static void make_inputs(const prog *p, double *x, size_t sk, double *w, cr_array *X)
{
    if (sk == 2) {
        for (size_t k = 0; k < p->off[p->nin]; k++)
            w[2 * k] = x[k];
        x = w;
    }
    for (size_t j = 0; j < p->nin; j++) {
        const reg *r = &p->regs[j];
        double *d = x + p->off[j] * sk;
        X[j] = r->c == 0 ? cr_array_vector(d, r->r) : cr_array_matrix(d, r->r, r->c);
        X[j].structure = r->st;
        X[j].strides[0] *= (ptrdiff_t)sk;
        X[j].strides[1] *= (ptrdiff_t)sk;
        if (r->st == CR_MAT_DIAGONAL)
            X[j].strides[0] = (ptrdiff_t)sk;
    }
}

/* The logical value of an array register as a dense row-major vector. */
static void logical(const cr_array *a, double *out)
{
    size_t n = cr_array_numel(a);
    for (size_t e = 0; e < n; e++)
        out[e] = creal(cr_array_get_linear(a, e));
}

/* Run p at the data x: the m scalar outputs into y, and y[m] = <cbar, array output>.
 * *fragile: the point is near a place where the program is not smooth (close eigenvalues,
 * close extremal elements, a norm near 0), where differences are not accurate. */
static cr_status plain_run(env *e, const prog *p, double *x, const double *cbar, double *y,
                           bool *fragile)
{
    cr_arena_reset(e->arena);
    e->sig = 0;
    cr_array X[MAX_IN];
    make_inputs(p, x, 1, NULL, X);
    double sv[MAX_REG];
    cr_array *av[MAX_REG];
    for (size_t j = 0; j < p->nin; j++)
        av[j] = &X[j];
    *fragile = false;
    for (size_t i = 0; i < p->nins; i++) {
        ins *in = (ins *)&p->code[i];
        int32_t o = in->out[0];
        switch (in->op) {
        case O_SADD:
            sv[o] = sv[in->a] + sv[in->b];
            continue;
        case O_SMUL:
            sv[o] = sv[in->a] * sv[in->b];
            continue;
        case O_SSQ:
            sv[o] = sv[in->a] / (1 + sv[in->a] * sv[in->a]);
            continue;
        default:
            break;
        }
        const cr_value *f;
        sarg sa[5];
        cr_value args[5], out;
        size_t n = spec(in, &f, sa);
        for (size_t k = 0; k < n; k++) {
            if (sa[k].reg < 0)
                args[k] = sa[k].v;
            else if (p->regs[sa[k].reg].kind == RK_S)
                args[k] = cr_value_f64(sv[sa[k].reg]);
            else
                args[k] = cr_value_array(av[sa[k].reg]);
        }
        if (in->op == O_VEC)
            args[1] = cr_value_i64((int64_t)cr_array_numel(av[in->a]));
        cr_status st = cr_function_call(e->arena, f, args, n, &out);
        if (st != CR_OK) {
            printf("plain %s: %s\n", k_op_names[in->op], cr_ctx_errmsg(e->ctx));
            return st;
        }
        cr_value el[3];
        size_t ne = 1;
        el[0] = out;
        if (out.kind == CR_KIND_STRUCT) {
            ne = out.u.obj.type->nfields;
            for (size_t k = 0; k < ne && k < 3; k++) {
                const cr_field *fd = &out.u.obj.type->fields[k];
                char *ptr = (char *)out.u.obj.ptr + fd->offset;
                if (fd->kind == CR_KIND_F64) {
                    double d;
                    memcpy(&d, ptr, sizeof d);
                    el[k] = cr_value_f64(d);
                } else if (fd->kind == CR_KIND_ARRAY) {
                    el[k] = cr_value_array((cr_array *)(void *)ptr);
                } else if (fd->kind == CR_KIND_I64) {
                    int64_t idx;
                    memcpy(&idx, ptr, sizeof idx);
                    e->sig = e->sig * 31 + (uint64_t)idx + 1;
                    el[k].kind = CR_KIND_NOTHING;
                } else {
                    el[k].kind = CR_KIND_NOTHING;
                }
            }
        }
        for (size_t k = 0; k < in->nout && k < ne; k++) {
            int32_t r = in->out[k];
            if (r < 0)
                continue;
            if (el[k].kind == CR_KIND_F64)
                sv[r] = el[k].u.f64;
            else if (el[k].kind == CR_KIND_ARRAY)
                av[r] = el[k].u.arr;
            else {
                printf("plain %s: result %zu of kind %d\n", k_op_names[in->op], k, el[k].kind);
                return CR_EINVAL;
            }
        }
        /* where the program is not smooth */
        double buf[MAX_NUM];
        if (in->op == O_EIGEN) {
            const cr_array *l = av[in->out[0]];
            logical(l, buf);
            for (size_t k = 1; k < cr_array_numel(l); k++)
                if (fabs(buf[k] - buf[k - 1]) < 0.05)
                    *fragile = true;
        } else if (in->op == O_SVD) {
            const cr_array *sg = av[in->out[1]];
            logical(sg, buf);
            for (size_t k = 0; k < cr_array_numel(sg); k++)
                if (buf[k] < 0.05 || (k > 0 && buf[k - 1] - buf[k] < 0.05))
                    *fragile = true;
        } else if (in->op == O_FINDMAX) {
            const cr_array *a = av[in->a];
            logical(a, buf);
            size_t nhi = 0;
            for (size_t k = 0; k < cr_array_numel(a); k++)
                nhi += buf[k] > sv[o] - 0.02;
            if (nhi > 1)
                *fragile = true;
        } else if (in->op == O_EXTREMA) {
            const cr_array *a = av[in->a];
            size_t ne2 = cr_array_numel(a);
            logical(a, buf);
            double lo = sv[in->out[0]], hi = sv[in->out[1]];
            size_t nlo = 0, nhi = 0;
            for (size_t k = 0; k < ne2; k++) {
                nlo += buf[k] < lo + 0.02;
                nhi += buf[k] > hi - 0.02;
            }
            if (nlo > 1 || nhi > 1)
                *fragile = true;
        } else if (in->op == O_NORM && sv[o] < 0.05) {
            *fragile = true;
        }
    }
    for (size_t i = 0; i < p->m; i++)
        y[i] = sv[p->outs[i]];
    double buf[MAX_NUM];
    const cr_array *ao = av[p->aout];
    logical(ao, buf);
    y[p->m] = 0;
    for (size_t k = 0; k < cr_array_numel(ao); k++)
        y[p->m] += cbar[k] * buf[k];
    return CR_OK;
}

/* ---- The program on a tape ----------------------------------------------------------------- */

static cr_targ targ_of(const cr_targ *regs, const prog *p, sarg a)
{
    (void)p;
    return a.reg < 0 ? cr_targ_value(a.v) : regs[a.reg];
}

/* Record p on t with the array inputs X: the scalar outputs into ys (may be NULL), the array
 * output into *ya (may be NULL). */
static cr_status tape_run(const prog *p, cr_tape *t, const cr_avar *X, cr_var *ys, cr_avar *ya)
{
    cr_targ regs[MAX_REG];
    for (size_t j = 0; j < p->nin; j++)
        regs[j] = cr_targ_arr(X[j]);
    for (size_t i = 0; i < p->nins; i++) {
        ins *in = (ins *)&p->code[i];
        int32_t o = in->out[0];
        cr_targ A = regs[in->a], B = regs[in->b];
        switch (in->op) {
        case O_SADD:
            regs[o] = cr_targ_var(cr_add(t, A.u.s, B.u.s));
            continue;
        case O_SMUL:
            regs[o] = cr_targ_var(cr_mul(t, A.u.s, B.u.s));
            continue;
        case O_SSQ:
            regs[o] =
                cr_targ_var(cr_div(t, A.u.s, cr_add(t, cr_const(1), cr_mul(t, A.u.s, A.u.s))));
            continue;
        default:
            break;
        }
        if (in->path == 0) { /* the shortcuts */
            bool done = true;
            switch (in->op) {
            case O_MATMUL:
                regs[o] = cr_targ_arr(cr_av_matmul(t, A.u.a, B.u.a));
                break;
            case O_BADD:
            case O_BSUB:
            case O_BMUL:
                regs[o] = cr_targ_arr(cr_av_broadcast2(t,
                                                       in->op == O_BADD   ? &cr_fn_add
                                                       : in->op == O_BSUB ? &cr_fn_sub
                                                                          : &cr_fn_mul,
                                                       A, B));
                break;
            case O_BSCALE:
                regs[o] = cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, A, B));
                break;
            case O_BSCALEK:
                regs[o] = cr_targ_arr(
                    cr_av_broadcast2(t, &cr_fn_mul, cr_targ_value(cr_value_f64(in->k)), A));
                break;
            case O_BTANH:
            case O_BSIN:
            case O_BSQ:
                regs[o] = cr_targ_arr(cr_av_broadcast1(t,
                                                       in->op == O_BTANH  ? &cr_fn_tanh
                                                       : in->op == O_BSIN ? &cr_fn_sin
                                                                          : &cr_fn_square,
                                                       A));
                break;
            case O_SUM:
                regs[o] = cr_targ_var(cr_av_sum(t, A.u.a));
                break;
            case O_DOT:
                regs[o] = cr_targ_var(cr_av_dot(t, A.u.a, B.u.a));
                break;
            case O_SLICE:
                regs[o] = cr_targ_arr(cr_av_slice(t, A.u.a, in->rg.start, in->rg.stop));
                break;
            default:
                done = false;
            }
            if (done)
                continue;
        }
        const cr_value *f;
        sarg sa[5];
        cr_targ args[5], out[3];
        size_t n = spec(in, &f, sa);
        for (size_t k = 0; k < n; k++)
            args[k] = targ_of(regs, p, sa[k]);
        if (in->op == O_VEC)
            args[1] = cr_targ_value(cr_value_i64((int64_t)cr_array_numel(A.u.a.a)));
        cr_status st;
        const reg *ro = &p->regs[o];
        if (in->nout > 1 || in->path == 0) {
            size_t nout = in->op == O_LU ? 3 : in->nout;
            st = cr_tape_acall_n(t, f, args, n, out, nout);
        } else if (in->path == 1) {
            st = cr_tape_acall(t, f, args, n, &out[0]);
        } else if (ro->kind == RK_S) {
            out[0] = cr_targ_var(cr_tape_acall_s(t, f, args, n));
            st = cr_tape_status(t);
        } else {
            out[0] = cr_targ_arr(cr_tape_acall_a(t, f, args, n));
            st = cr_tape_status(t);
        }
        if (st != CR_OK)
            return st;
        for (size_t k = 0; k < in->nout; k++)
            if (in->out[k] >= 0)
                regs[in->out[k]] = out[k];
    }
    if (ys != NULL)
        for (size_t i = 0; i < p->m; i++)
            ys[i] = regs[p->outs[i]].u.s;
    if (ya != NULL)
        *ya = regs[p->aout].u.a;
    return cr_tape_status(t);
}

static cr_status prog_afn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *envp)
{
    (void)n;
    cr_var ys[MAX_OUT];
    cr_status st = tape_run(envp, t, xs, ys, NULL);
    *y = ys[0];
    return st;
}

/* ---- Differences ------------------------------------------------------------------------- */

#define FD_H  1e-3
#define FD_H2 2e-3

typedef struct fdw {
    env *e;
    const prog *p;
    const double *cbar;
    double x[MAX_IN * MAX_DATA];
    bool fragile; /* some point of a stencil was fragile */
} fdw;

/* D_v of the m + 1 outputs at x with step h */
static void fd_dir(fdw *w, const double *x, const double *v, double h, double *out)
{
    const prog *p = w->p;
    size_t nd = p->off[p->nin];
    double y[MAX_OUT + 1];
    for (size_t i = 0; i <= p->m; i++)
        out[i] = 0;
    for (int s = 0; s < 4; s++) {
        for (size_t j = 0; j < nd; j++)
            w->x[j] = x[j] + k_fd_o[s] * h * v[j];
        bool fr;
        assert_int_equal(plain_run(w->e, p, w->x, w->cbar, y, &fr), CR_OK);
        w->fragile |= fr;
        for (size_t i = 0; i <= p->m; i++)
            out[i] += k_fd_c[s] * y[i] / h;
    }
}

static void fd_dir_err(fdw *w, const double *x, const double *v, double *d, double *err)
{
    double d2[MAX_OUT + 1], dh[MAX_OUT + 1];
    fd_dir(w, x, v, FD_H, d);
    fd_dir(w, x, v, 2 * FD_H, d2);
    fd_dir(w, x, v, FD_H / 2, dh);
    for (size_t i = 0; i <= w->p->m; i++)
        err[i] = fd_err4(d[i], d2[i], dh[i]);
}

/* D_u D_v of output 0 */
static double fd_mixed(fdw *w, const double *x, const double *u, const double *v, double h)
{
    const prog *p = w->p;
    size_t nd = p->off[p->nin];
    double y[MAX_OUT + 1], s = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            for (size_t j = 0; j < nd; j++)
                w->x[j] = x[j] + k_fd_o[a] * h * u[j] + k_fd_o[b] * h * v[j];
            bool fr;
            assert_int_equal(plain_run(w->e, p, w->x, w->cbar, y, &fr), CR_OK);
            w->fragile |= fr;
            s += k_fd_c[a] * k_fd_c[b] * y[0];
        }
    return s / (h * h);
}

/* ---- Comparison ------------------------------------------------------------------------------ */

#define RT_VALUE 1e-10
#define RT_FD1   1e-7
#define RT_FD2   1e-5
#define RT_MODE  1e-10

/* ---- The modes ------------------------------------------------------------------------------- */

static void set_mode(env *e, ck *c, const char *mode)
{
    c->mode = mode;
    size_t i = 0;
    while (i < 16 && e->modes[i] != NULL && strcmp(e->modes[i], mode) != 0)
        i++;
    if (i < 16) {
        e->modes[i] = mode;
        e->runs[i]++;
    }
}

static cr_tape *new_tape(env *e, uint32_t flags)
{
    cr_tape **t = &e->tapes[flags];
    if (*t == NULL) {
        cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags};
        assert_int_equal(cr_tape_new(e->ctx, &tp, t), CR_OK);
    }
    cr_tape_reset(*t);
    return *t;
}

/* Per-input arrays of the logical shapes over one buffer (gradients, directions, H v). */
typedef struct lset {
    size_t sk; /* element e of input j at buf[(j MAX_DATA + e) sk] */
    double buf[2 * MAX_IN * MAX_DATA];
    cr_array a[MAX_IN];
    cr_array *pa[MAX_IN];
    const cr_array *ca[MAX_IN];
} lset;

static void lset_init(const prog *p, lset *l)
{
    memset(l->buf, 0, sizeof l->buf);
    l->sk = p->gsk;
    for (size_t j = 0; j < p->nin; j++) {
        const reg *r = &p->regs[j];
        double *d = l->buf + j * MAX_DATA * l->sk;
        l->a[j] = r->c == 0 ? cr_array_vector(d, r->r) : cr_array_matrix(d, r->r, r->c);
        l->a[j].strides[0] *= (ptrdiff_t)l->sk;
        l->a[j].strides[1] *= (ptrdiff_t)l->sk;
        l->pa[j] = &l->a[j];
        l->ca[j] = &l->a[j];
    }
}

/* The data entry logical entry e of input j reads, or -1. */
static int64_t data_of(const reg *r, size_t e)
{
    size_t c = r->c ? r->c : 1, i = e / c, k = e % c;
    switch (r->st) {
    case CR_MAT_SYMMETRIC:
        return (int64_t)(i <= k ? i * c + k : k * c + i);
    case CR_MAT_UPPER:
        return k >= i ? (int64_t)e : -1;
    case CR_MAT_LOWER:
        return k <= i ? (int64_t)e : -1;
    case CR_MAT_DIAGONAL:
        return i == k ? (int64_t)i : -1;
    default:
        return (int64_t)e;
    }
}

/* A gradient-like set (cotangents of the logical arrays) as derivatives along the data. */
static void to_data(const prog *p, const lset *l, double *gd)
{
    memset(gd, 0, p->off[p->nin] * sizeof *gd);
    for (size_t j = 0; j < p->nin; j++) {
        const reg *r = &p->regs[j];
        for (size_t e = 0; e < numel_of(r); e++) {
            int64_t d = data_of(r, e);
            if (d >= 0)
                gd[p->off[j] + (size_t)d] += l->buf[(j * MAX_DATA + e) * l->sk];
        }
    }
}

/* A direction along the data as direction arrays of the logical shapes (read through the
 * inputs' structures by the engine). */
static void from_data(const prog *p, const double *dv, lset *l)
{
    lset_init(p, l);
    for (size_t j = 0; j < p->nin; j++) {
        const reg *r = &p->regs[j];
        for (size_t e = 0; e < numel_of(r); e++) {
            int64_t d = data_of(r, e);
            bool own = r->st == CR_MAT_DIAGONAL ? d >= 0 : true;
            if (own)
                l->buf[(j * MAX_DATA + e) * l->sk] =
                    r->st == CR_MAT_DIAGONAL ? dv[p->off[j] + (size_t)d] : dv[p->off[j] + e];
        }
    }
}

static double dotn(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void random_data(uint64_t *s, double *x, size_t n, double lim)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rnd_range(s, -lim, lim);
}

/* A point where the program is smooth (up to 6 tries); false if none was found. */
static bool smooth_point(env *e, const prog *p, uint64_t *s, double *x, const double *cbar,
                         double *y)
{
    for (int k = 0; k < 6; k++) {
        bool fr;
        random_data(s, x, p->off[p->nin], 1.5);
        assert_int_equal(plain_run(e, p, x, cbar, y, &fr), CR_OK);
        if (!fr)
            return true;
    }
    return false;
}

typedef struct ref {
    double y[MAX_OUT + 1];
    double d[MAX_OUT + 1], de[MAX_OUT + 1]; /* along v */
    size_t nk;
    size_t kc[2];
    double dk[2], dke[2]; /* along the data components kc */
} ref;

static void reference(fdw *w, const double *x, const double *v, uint64_t *s, ref *r)
{
    const prog *p = w->p;
    size_t nd = p->off[p->nin];
    double ej[MAX_IN * MAX_DATA] = {0}, t[MAX_OUT + 1], te[MAX_OUT + 1];
    fd_dir_err(w, x, v, r->d, r->de);
    r->nk = nd < 2 ? nd : 2;
    for (size_t i = 0; i < r->nk; i++) {
        r->kc[i] = rnd_below(s, nd);
        ej[r->kc[i]] = 1;
        fd_dir_err(w, x, ej, t, te);
        ej[r->kc[i]] = 0;
        r->dk[i] = t[0];
        r->dke[i] = te[0];
    }
}

/* Gradient (along the data) against the reference of output i. */
static void cmp_grad(ck *c, const char *what, const double *gd, const double *v, const ref *r,
                     size_t i)
{
    double gv = dotn(gd, v, c->p->off[c->p->nin]);
    cmp_vec(c, what, &gv, &r->d[i], &r->de[i], 1, RT_FD1);
    if (i == 0)
        for (size_t k = 0; k < r->nk; k++)
            cmp_vec(c, what, &gd[r->kc[k]], &r->dk[k], &r->dke[k], 1, RT_FD1);
}

static void run_prog(env *e, prog *p, ck *c)
{
    uint64_t s = p->seed ^ 0x2545F4914F6CDD1Du;
    size_t nd = p->off[p->nin], m = p->m;
    double x[MAX_IN * MAX_DATA], x2[MAX_IN * MAX_DATA], v[MAX_IN * MAX_DATA], u[MAX_IN * MAX_DATA],
        gd[MAX_IN * MAX_DATA], gref[MAX_IN * MAX_DATA], hd[MAX_IN * MAX_DATA], cbar[MAX_NUM];
    double w1[2 * MAX_IN * MAX_DATA], w2[2 * MAX_IN * MAX_DATA];
    random_data(&s, cbar, MAX_NUM, 1);
    p->gsk = 1 + (rnd_unit(&s) < 0.25);
    p->wrec = 1 + (rnd_unit(&s) < 0.25);
    p->wrep = 1 + (rnd_unit(&s) < 0.25);
    fdw w;
    w.e = e;
    w.p = p;
    w.cbar = cbar;
    w.fragile = false;
    ref r;
    if (!smooth_point(e, p, &s, x, cbar, r.y)) {
        e->skipped++;
        return;
    }
    uint64_t sig0 = e->sig;
    for (size_t i = 0; i < p->nins; i++)
        e->op_runs[p->code[i].op]++;
    random_data(&s, v, nd, 1);
    random_data(&s, u, nd, 1);
    reference(&w, x, v, &s, &r);
    cr_array X[MAX_IN], X2[MAX_IN];
    const cr_array *xa[MAX_IN], *xa2[MAX_IN];
    make_inputs(p, x, p->wrec, w1, X);
    memcpy(x2, x, sizeof x2);
    make_inputs(p, x2, p->wrep, w2, X2);
    for (size_t j = 0; j < p->nin; j++) {
        xa[j] = &X[j];
        xa2[j] = &X2[j];
    }
    lset G, V, HV, HV2;
    from_data(p, v, &V);
    double y0;

    /* value_and_gradient_arrays */
    set_mode(e, c, "value_and_gradient_arrays");
    lset_init(p, &G);
    cr_tape *t = new_tape(e, 0);
    cr_status st = cr_tape_value_and_gradient_arrays(t, prog_afn, p, xa, p->nin, &y0, G.pa);
    ck_status(c, "call", st, cr_tape_errmsg(t));
    if (st != CR_OK)
        return;
    cmp_vec(c, "y", &y0, &r.y[0], NULL, 1, RT_VALUE);
    to_data(p, &G, gref);
    cmp_grad(c, "grad", gref, v, &r, 0);

    /* gradient_arrays of every output on one recording, then avjp of the array output */
    set_mode(e, c, "gradient_arrays+avjp");
    t = new_tape(e, 0);
    cr_avar XV[MAX_IN], YA;
    cr_var ys[MAX_OUT];
    for (size_t j = 0; j < p->nin; j++)
        XV[j] = cr_tape_array_input(t, &X[j]);
    st = tape_run(p, t, XV, ys, &YA);
    ck_status(c, "record", st, cr_tape_errmsg(t));
    if (st != CR_OK)
        return;
    for (size_t i = 0; i < m; i++) {
        lset_init(p, &G);
        st = cr_tape_gradient_arrays(t, ys[i], NULL, 0, NULL, XV, p->nin, G.pa);
        ck_status(c, "gradient_arrays", st, cr_tape_errmsg(t));
        to_data(p, &G, gd);
        if (i == 0)
            cmp_vec(c, "grad~value_and_gradient_arrays", gd, gref, NULL, nd, RT_MODE);
        cmp_grad(c, "grad", gd, v, &r, i);
    }
    size_t na = cr_array_numel(YA.a);
    cr_array CB = cr_array_vector(cbar, na);
    size_t ashape[2] = {YA.a->shape[0], YA.a->ndim > 1 ? YA.a->shape[1] : 1};
    assert_int_equal(cr_array_view_init(&CB, cbar, CR_DT_F64, YA.a->ndim, ashape, NULL), CR_OK);
    lset_init(p, &G);
    st = cr_tape_avjp(t, YA, &CB, NULL, 0, NULL, XV, p->nin, G.pa);
    ck_status(c, "avjp", st, cr_tape_errmsg(t));
    to_data(p, &G, gd);
    cmp_grad(c, "avjp", gd, v, &r, m);
    lset_init(p, &G);
    st = cr_tape_gradient_arrays(t, ys[0], NULL, 0, NULL, XV, p->nin, G.pa);
    ck_status(c, "gradient_arrays after avjp", st, cr_tape_errmsg(t));
    to_data(p, &G, gd);
    cmp_vec(c, "grad after avjp~value_and_gradient_arrays", gd, gref, NULL, nd, RT_MODE);

    /* ajvp on a forward tape: every output, scalar and array */
    set_mode(e, c, "ajvp");
    t = new_tape(e, CR_TAPE_FORWARD);
    for (size_t j = 0; j < p->nin; j++)
        XV[j] = cr_tape_array_input(t, &X[j]);
    st = tape_run(p, t, XV, ys, &YA);
    ck_status(c, "record", st, cr_tape_errmsg(t));
    if (st != CR_OK)
        return;
    double jv[MAX_OUT + 1], bdot[MAX_NUM];
    cr_array BD;
    assert_int_equal(cr_array_view_init(&BD, bdot, CR_DT_F64, YA.a->ndim, ashape, NULL), CR_OK);
    cr_array *bdp = &BD;
    st = cr_tape_ajvp(t, NULL, NULL, 0, XV, V.ca, p->nin, ys, m, jv, &YA, 1, &bdp);
    ck_status(c, "ajvp", st, cr_tape_errmsg(t));
    jv[m] = dotn(cbar, bdot, na);
    cmp_vec(c, "jvp", jv, r.d, r.de, m + 1, RT_FD1);
    double gv = dotn(gref, v, nd);
    cmp_vec(c, "jvp~gradient", &jv[0], &gv, NULL, 1, RT_MODE);

    /* ahvp on a second-order tape */
    set_mode(e, c, p->so ? "ahvp" : "ahvp (refused)");
    t = new_tape(e, CR_TAPE_SECOND_ORDER);
    for (size_t j = 0; j < p->nin; j++)
        XV[j] = cr_tape_array_input(t, &X[j]);
    st = tape_run(p, t, XV, ys, NULL);
    if (!p->so) {
        ck_refused(c, "second-order record", st, CR_EUNIMPL, cr_tape_errmsg(t));
        e->refused++;
    } else {
        ck_status(c, "record", st, cr_tape_errmsg(t));
        if (st != CR_OK)
            return;
        lset_init(p, &HV);
        st = cr_tape_ahvp(t, ys[0], NULL, 0, NULL, NULL, XV, p->nin, V.ca, HV.pa);
        ck_status(c, "ahvp", st, cr_tape_errmsg(t));
        to_data(p, &HV, hd);
        {
            /* against central differences of the value_and_gradient_arrays gradient along v */
            double fg[3][MAX_IN * MAX_DATA] = {{0}}, g1[MAX_IN * MAX_DATA],
                                  fe[MAX_IN * MAX_DATA] = {0};
            cr_tape *t0 = new_tape(e, 0);
            for (int q = 0; q < 3; q++) /* steps h, 2h, h / 2 */
                for (int k = 0; k < 4; k++) {
                    double h = q == 2 ? FD_H / 2 : FD_H * (1 + q);
                    for (size_t j = 0; j < nd; j++)
                        x2[j] = x[j] + k_fd_o[k] * h * v[j];
                    make_inputs(p, x2, p->wrep, w2, X2);
                    lset_init(p, &G);
                    st = cr_tape_value_and_gradient_arrays(t0, prog_afn, p, xa2, p->nin, &y0, G.pa);
                    ck_status(c, "gradient at x + h v", st, cr_tape_errmsg(t0));
                    to_data(p, &G, g1);
                    for (size_t j = 0; j < nd; j++)
                        fg[q][j] += k_fd_c[k] * g1[j] / h;
                }
            for (size_t j = 0; j < nd; j++)
                fe[j] = fd_err4(fg[0][j], fg[1][j], fg[2][j]);
            cmp_vec(c, "hvp~differences of the gradient", hd, fg[0], fe, nd, 1e-7);
            /* u' H v against mixed differences of the plain program */
            w.fragile = false;
            double uhv = dotn(u, hd, nd), fm = fd_mixed(&w, x, u, v, FD_H2);
            double fme =
                fd_err4(fm, fd_mixed(&w, x, u, v, 2 * FD_H2), fd_mixed(&w, x, u, v, FD_H2 / 2));
            if (!w.fragile) {
                cmp_vec(c, "u'Hv", &uhv, &fm, &fme, 1, RT_FD2);
                e->fd_hvps++;
            }
        }
    }

    /* prepared gradient at x and at new arrays */
    set_mode(e, c, "prepared_gradient_arrays");
    cr_prepared *pg = NULL;
    st = cr_prepare_gradient_arrays(e->ctx, NULL, prog_afn, p, xa, p->nin, &pg);
    ck_status(c, "prepare", st, cr_ctx_errmsg(e->ctx));
    if (st == CR_OK) {
        lset_init(p, &G);
        st = cr_prepared_value_and_gradient_arrays(pg, xa, p->nin, &y0, G.pa);
        ck_status(c, "replay at x", st, cr_ctx_errmsg(e->ctx));
        cmp_vec(c, "y", &y0, &r.y[0], NULL, 1, RT_VALUE);
        to_data(p, &G, gd);
        cmp_vec(c, "grad~value_and_gradient_arrays", gd, gref, NULL, nd, RT_MODE);
        for (int rep = 0; rep < 2; rep++) {
            ref r2;
            if (!smooth_point(e, p, &s, x2, cbar, r2.y)) {
                e->points_skipped++;
                continue;
            }
            make_inputs(p, x2, p->wrep, w2, X2);
            lset_init(p, &G);
            st = cr_prepared_value_and_gradient_arrays(pg, xa2, p->nin, &y0, G.pa);
            if (e->sig != sig0) { /* an index of a tuple result changed: refused */
                ck_refused(c, "replay where an index changed", st, CR_EDOMAIN,
                           cr_ctx_errmsg(e->ctx));
                e->edomain++;
                continue;
            }
            ck_status(c, "replay", st, cr_ctx_errmsg(e->ctx));
            cmp_vec(c, "y", &y0, &r2.y[0], NULL, 1, RT_VALUE);
            to_data(p, &G, gd);
            reference(&w, x2, v, &s, &r2);
            cmp_grad(c, "grad", gd, v, &r2, 0);
            /* against a tape recorded at the new arrays */
            lset_init(p, &HV2);
            cr_tape *t0 = new_tape(e, 0);
            st = cr_tape_value_and_gradient_arrays(t0, prog_afn, p, xa2, p->nin, &y0, HV2.pa);
            ck_status(c, "value_and_gradient_arrays at x2", st, cr_tape_errmsg(t0));
            to_data(p, &HV2, hd);
            cmp_vec(c, "grad~value_and_gradient_arrays", gd, hd, NULL, nd, RT_MODE);
        }
    }
    cr_prepared_free(pg);

    /* prepared H v at new arrays and directions, against a second-order tape */
    set_mode(e, c, "prepared_hvp_arrays");
    pg = NULL;
    st = cr_prepare_hvp_arrays(e->ctx, NULL, prog_afn, p, xa, p->nin, &pg);
    if (!p->so) {
        ck_refused(c, "prepare", st, CR_EUNIMPL, cr_ctx_errmsg(e->ctx));
        if (pg != NULL)
            ck_fail(c, "a refused prepare_hvp_arrays gave a result");
    } else {
        ck_status(c, "prepare", st, cr_ctx_errmsg(e->ctx));
    }
    if (st == CR_OK) {
        for (int rep = 0; rep < 2; rep++) {
            double yy[MAX_OUT + 1], h2[MAX_IN * MAX_DATA];
            if (!smooth_point(e, p, &s, x2, cbar, yy)) {
                e->points_skipped++;
                continue;
            }
            make_inputs(p, x2, p->wrep, w2, X2);
            random_data(&s, v, nd, 1);
            from_data(p, v, &V);
            lset_init(p, &HV);
            lset_init(p, &G);
            st = cr_prepared_hvp_arrays(pg, xa2, p->nin, V.ca, HV.pa, &y0, G.pa);
            if (e->sig != sig0) {
                ck_refused(c, "replay where an index changed", st, CR_EDOMAIN,
                           cr_ctx_errmsg(e->ctx));
                e->edomain++;
                continue;
            }
            ck_status(c, "replay", st, cr_ctx_errmsg(e->ctx));
            cmp_vec(c, "y", &y0, &yy[0], NULL, 1, RT_VALUE);
            t = new_tape(e, CR_TAPE_SECOND_ORDER);
            for (size_t j = 0; j < p->nin; j++)
                XV[j] = cr_tape_array_input(t, &X2[j]);
            st = tape_run(p, t, XV, ys, NULL);
            ck_status(c, "record at x2", st, cr_tape_errmsg(t));
            lset_init(p, &HV2);
            st = cr_tape_ahvp(t, ys[0], NULL, 0, NULL, NULL, XV, p->nin, V.ca, HV2.pa);
            ck_status(c, "ahvp at x2", st, cr_tape_errmsg(t));
            to_data(p, &HV, hd);
            to_data(p, &HV2, h2);
            cmp_vec(c, "prepared hvp~tape ahvp", hd, h2, NULL, nd, RT_MODE);
            lset_init(p, &HV2);
            st = cr_tape_gradient_arrays(t, ys[0], NULL, 0, NULL, XV, p->nin, HV2.pa);
            ck_status(c, "gradient_arrays at x2", st, cr_tape_errmsg(t));
            to_data(p, &G, gd);
            to_data(p, &HV2, h2);
            cmp_vec(c, "prepared grad~tape gradient", gd, h2, NULL, nd, RT_MODE);
            if (rep == 0) {
                w.fragile = false;
                double uhv = dotn(u, hd, nd), fm = fd_mixed(&w, x2, u, v, FD_H2);
                double fme = fd_err4(fm, fd_mixed(&w, x2, u, v, 2 * FD_H2),
                                     fd_mixed(&w, x2, u, v, FD_H2 / 2));
                if (!w.fragile) {
                    cmp_vec(c, "u'Hv", &uhv, &fm, &fme, 1, RT_FD2);
                    e->fd_hvps++;
                }
            }
        }
    }
    cr_prepared_free(pg);
}

/* ---- Drivers ------------------------------------------------------------------------------- */

static int env_setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    if (e == NULL || cr_ctx_new(NULL, &e->ctx) != CR_OK ||
        cr_arena_new(e->ctx, NULL, &e->arena) != CR_OK)
        return -1;
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    env *e = *state;
    for (int i = 0; i < 3; i++)
        cr_tape_free(e->tapes[i]);
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
    ck c = {.p = p, .seed = p->seed, .test = "test_tape_random_arrays", .mode = ""};
    if (getenv("CR_RANDOM_DUMP") != NULL)
        dump_prog(p);
    run_prog(e, p, &c);
    if (c.failed != 0 && getenv("CR_RANDOM_DUMP") == NULL)
        dump_prog(p);
    e->programs++;
    int failed = c.failed;
    free(p);
    assert_int_equal(failed, 0);
}

/* Programs that found defects, run every time: 0x72e4124ae6e04d59 made a prepared replay
 * compare its gradient destination with arrays of the previous replay, whose memory had
 * been given back (UBSan saw the garbage strides overflow; cr__gradient_dests);
 * 0x5186d5dc65565cf1 and 0xcef4bfed099b3bdd are ones whose differences of the gradient and
 * mixed differences need fd_err4's estimate from h/2 (the one from 2h alone made a right H v
 * fail). */
static const uint64_t k_found[] = {0x72e4124ae6e04d59u, 0x5186d5dc65565cf1u, 0xcef4bfed099b3bddu};

static void test_random_array_programs(void **state)
{
    env *e = *state;
    uint64_t one = replay_seed();
    if (one != 0) {
        run_seed(e, one);
        return;
    }
    for (size_t i = 0; i < sizeof k_found / sizeof k_found[0]; i++)
        run_seed(e, k_found[i]);
    size_t n = programs(120);
    size_t from = programs_from();
    for (size_t i = from; i < from + n; i++) {
        uint64_t s = 0xA77A4000000000u + i;
        run_seed(e, rnd_next(&s) | 1);
    }
    if (getenv("CR_RANDOM_PROGRAMS") != NULL) {
        printf("%zu programs (%zu skipped: not smooth at any point tried; %zu new points "
               "skipped; %zu H v against mixed differences; %zu second-order refusals; %zu replays "
               "refused for a changed index); programs per mode:\n",
               e->programs, e->skipped, e->points_skipped, e->fd_hvps, e->refused, e->edomain);
        for (size_t i = 0; i < 16 && e->modes[i] != NULL; i++)
            printf("  %-32s %zu\n", e->modes[i], e->runs[i]);
        printf("instructions per operation:\n");
        for (size_t i = 0; i < O_COUNT; i++)
            if (i != O_OUTER) /* the generator's: written as two reshapes and a broadcast */
                printf("  %-10s %zu\n", k_op_names[i], e->op_runs[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_array_programs),
    };
    return cmocka_run_group_tests(tests, env_setup, env_teardown);
}
