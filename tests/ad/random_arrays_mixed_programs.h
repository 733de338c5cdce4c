/*
 * The programs of test_tape_random_arrays_mixed.c: registers (real scalars, real and complex
 * arrays, factors, indices), instructions, the seeded generator and the dump printed with
 * CR_RANDOM_DUMP=1. Included by that file only.
 */
#ifndef TEST_RANDOM_ARRAYS_MIXED_PROGRAMS_H
#define TEST_RANDOM_ARRAYS_MIXED_PROGRAMS_H

#include <complex.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_random.h"
#include "test_util.h"

/* ---- Programs ------------------------------------------------------------------------------ */

#define MAX_IN    5 /* array and scalar inputs */
#define MAX_REG   240
#define MAX_INS   240
#define MAX_OUT   3
#define MAX_NUM   36  /* elements of any register */
#define MAX_DATA  160 /* real numbers of all the inputs */
#define MAX_CONST 24

enum { RK_S = 0, RK_A = 1, RK_Z = 2, RK_X = 3, RK_I = 4 };

/* A register: a real scalar, a real array (f64 or f32), a complex array, a factor that is
 * not an operand (eigenvectors, singular vectors: RK_X, complex when z) or an index (RK_I);
 * r x c (c == 0: a vector of r); bnd bounds the magnitude of its elements. */
typedef struct reg {
    uint8_t kind, r, c, st, f32, z;
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
    O_BSCALEK, /* k .* A */
    O_BTANH,
    O_BSIN, /* real or complex */
    O_BSQ,
    O_ABS2,
    O_REAL,
    O_IMAG,
    O_CONJ,
    O_CPLX, /* i .* A (a real A) */
    O_SUM,
    O_DOT,
    O_SUMDIM,
    O_GETINDEX,
    O_GETIDX, /* getindex(B, index register) */
    O_RESHAPE,
    O_VIEWCOL,
    O_ADDS, /* A + sI, s a scalar register */
    O_ADDI, /* A + kI */
    O_NORM,
    O_DET,
    O_INV,
    O_SOLVE,
    O_SYMM,
    O_HERM,
    O_EIGEN,   /* (values, vectors) */
    O_EIGG,    /* eigen_general of a real matrix: (values, vectors), complex */
    O_SVD,     /* (U, S, V) */
    O_LU,      /* (L, U, p) */
    O_FINDMAX, /* (max, index) */
    O_PMUL,    /* P * A, P a constant permutation matrix */
    O_CMATMUL, /* Aᴴ w-like products with a constant vector: matmul(A, const) */
    O_COUNT
};

static const char *const k_op_names[O_COUNT] = {
    "sadd",    "smul",      "ssq",       "matmul",    "transpose", "adjoint",
    "b+",      "b-",        "b*",        "s.*",       "k.*",       "tanh.",
    "sin.",    "square.",   "abs2.",     "real.",     "imag.",     "conj.",
    "i.*",     "sum",       "dot",       "sumdims",   "getindex",  "getidx",
    "reshape", "view(:,j)", "+sI",       "+kI",       "norm",      "det",
    "inv",     "solve",     "Symmetric", "Hermitian", "eigen",     "eigen_general",
    "svd",     "lu",        "findmax",   "P*",        "matmul(c)"};

/* Operations that a second-order tape records with complex arguments (linear ones). */
static bool so_complex_ok(unsigned op)
{
    return op == O_TRANSPOSE || op == O_ADJOINT || op == O_BADD || op == O_BSUB || op == O_REAL ||
           op == O_IMAG || op == O_CONJ || op == O_SUMDIM || op == O_RESHAPE || op == O_VIEWCOL ||
           op == O_HERM || op == O_ADDI || op == O_ADDS || op == O_CPLX;
}

typedef struct ins {
    uint8_t op, path, nout;
    uint32_t a, b;
    double k;
    int64_t i1;
    int32_t cst; /* a constant array (O_PMUL, O_CMATMUL), or -1 */
    int64_t shp[2];
    cr_array shpa;
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
    size_t m;
    uint32_t outs[MAX_OUT];
    uint32_t aout;
    bool so;  /* a second-order tape records it */
    bool f32; /* an f32 input: float accuracy */
    size_t ncst;
    double cdat[MAX_CONST][MAX_NUM];
    cr_array carr[MAX_CONST];
} prog;

static size_t numel_of(const reg *r)
{
    return r->kind == RK_S ? 1 : (size_t)r->r * (r->c ? r->c : 1);
}

/* Real numbers of an input's data: 1 for a scalar, 2 per complex element. */
static size_t ndata_of(const reg *r)
{
    return numel_of(r) * (r->kind == RK_Z ? 2 : 1);
}

typedef struct gen {
    prog *p;
    uint64_t s;
} gen;

static uint32_t new_reg(prog *p, unsigned kind, size_t r, size_t c, double bnd)
{
    assert_true(p->nreg < MAX_REG);
    reg *g = &p->regs[p->nreg];
    memset(g, 0, sizeof *g);
    g->kind = (uint8_t)kind;
    g->r = (uint8_t)r;
    g->c = (uint8_t)c;
    g->bnd = bnd;
    assert_true(numel_of(g) <= MAX_NUM);
    return (uint32_t)p->nreg++;
}

static bool is_cplx(const prog *p, uint32_t a)
{
    const reg *r = &p->regs[a];
    return r->kind == RK_Z || (r->kind == RK_X && r->z);
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
    in->cst = -1;
    in->out[0] = in->out[1] = in->out[2] = -1;
    bool unary = op == O_TRANSPOSE || op == O_ADJOINT || op == O_BSCALEK || op == O_BTANH ||
                 op == O_BSIN || op == O_BSQ || op == O_ABS2 || op == O_REAL || op == O_IMAG ||
                 op == O_CONJ || op == O_CPLX || op == O_SUM || op == O_SUMDIM ||
                 op == O_GETINDEX || op == O_RESHAPE || op == O_VIEWCOL || op == O_ADDI ||
                 op == O_NORM || op == O_DET || op == O_INV || op == O_SYMM || op == O_HERM ||
                 op == O_EIGEN || op == O_EIGG || op == O_SVD || op == O_LU || op == O_FINDMAX ||
                 op == O_PMUL || op == O_CMATMUL;
    if (op > O_SSQ && !so_complex_ok(op) &&
        (is_cplx(p, a) || (!unary && op != O_GETIDX && is_cplx(p, b))))
        p->so = false;
    return in;
}

static uint32_t res(gen *g, ins *in, unsigned kind, size_t r, size_t c, double bnd)
{
    uint32_t o = new_reg(g->p, kind, r, c, bnd);
    in->out[0] = (int32_t)o;
    return o;
}

static bool is_sca(const reg *r)
{
    return r->kind == RK_S;
}
static bool is_arr(const reg *r)
{
    return r->kind == RK_A;
}
static bool is_any(const reg *r)
{
    return r->kind == RK_A || r->kind == RK_Z;
}
static bool is_z(const reg *r)
{
    return r->kind == RK_Z;
}
static bool is_mat_any(const reg *r)
{
    return is_any(r) && r->c != 0;
}
static bool is_sq_any(const reg *r)
{
    return is_any(r) && r->c == r->r;
}
static bool is_sq_arr(const reg *r)
{
    return r->kind == RK_A && r->c == r->r;
}

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

/* An array register of a's shape (a itself, often). */
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
        if (is_any(r) && r->r == ra->r && r->c == ra->c)
            cand[n++] = (uint32_t)i;
    }
    return cand[rnd_below(&g->s, n)];
}

static unsigned kind_of2(const prog *p, uint32_t a, uint32_t b)
{
    return is_cplx(p, a) || is_cplx(p, b) ? RK_Z : RK_A;
}

static uint32_t un(gen *g, unsigned op, uint32_t a, double bnd)
{
    prog *p = g->p;
    const reg *r = &p->regs[a];
    unsigned kind = is_cplx(p, a) ? RK_Z : RK_A;
    if (op == O_ABS2 || op == O_REAL || op == O_IMAG)
        kind = RK_A;
    if (op == O_CPLX)
        kind = RK_Z;
    size_t rr = r->r, cc = r->c;
    if (op == O_TRANSPOSE || op == O_ADJOINT) {
        rr = r->c;
        cc = r->r;
    }
    ins *in = emit(g, op, a, 0);
    return res(g, in, kind, rr, cc, bnd);
}

static uint32_t scalek(gen *g, uint32_t a, double k)
{
    ins *in = emit(g, O_BSCALEK, a, 0);
    in->k = k;
    const reg *r = &g->p->regs[a];
    return res(g, in, is_cplx(g->p, a) ? RK_Z : RK_A, r->r, r->c, fabs(k) * r->bnd);
}

static uint32_t tame1(gen *g, uint32_t a);

/* Bound a register by about 1: tanh. of a real array, a scaling of a complex one. The
 * register itself is no longer an operand (sin of a large argument would oscillate faster
 * than the differences of f32 programs resolve). */
static uint32_t tame(gen *g, uint32_t a)
{
    uint32_t o = tame1(g, a);
    reg *r = &g->p->regs[a];
    if (o != a && r->kind != RK_S) {
        r->z = r->kind == RK_Z;
        r->kind = RK_X;
    }
    return o;
}

static uint32_t tame1(gen *g, uint32_t a)
{
    reg *r = &g->p->regs[a];
    if (r->kind == RK_A && r->bnd > 3)
        return un(g, O_BTANH, a, 1);
    if (r->kind == RK_Z && r->bnd > 3)
        return scalek(g, a, 1 / r->bnd);
    if (r->kind == RK_S && r->bnd > 3) {
        ins *in = emit(g, O_SSQ, a, 0);
        return res(g, in, RK_S, 0, 0, 0.5);
    }
    return a;
}

/* Elements of magnitude at most 1 (tanh. or a scaling). */
static uint32_t unit(gen *g, uint32_t a)
{
    const reg *r = &g->p->regs[a];
    if (r->kind == RK_A)
        return un(g, O_BTANH, a, 1);
    return r->bnd > 1 ? scalek(g, a, 1 / r->bnd) : a;
}

static uint32_t addi(gen *g, uint32_t a, double k)
{
    ins *in = emit(g, O_ADDI, a, 0);
    in->k = k;
    const reg *r = &g->p->regs[a];
    return res(g, in, is_cplx(g->p, a) ? RK_Z : RK_A, r->r, r->c, r->bnd + fabs(k));
}

static uint32_t reshape2(gen *g, uint32_t a, size_t r, size_t c)
{
    const reg *ra = &g->p->regs[a];
    ins *in = emit(g, O_RESHAPE, a, 0);
    in->shp[0] = (int64_t)r;
    in->shp[1] = (int64_t)c;
    return res(g, in, ra->kind == RK_Z ? RK_Z : RK_A, r, c, ra->bnd);
}

/* A square array register (real or complex when allowed), made if needed. */
static uint32_t square(gen *g, bool real)
{
    prog *p = g->p;
    int64_t a = pick(g, real ? is_sq_arr : is_sq_any);
    if (a >= 0 && rnd_unit(&g->s) < 0.8)
        return (uint32_t)a;
    a = pick(g, real ? is_arr : is_any);
    if (a < 0) {
        a = pick(g, is_any);
        a = un(g, O_ABS2, (uint32_t)a, p->regs[a].bnd * p->regs[a].bnd);
    }
    const reg *r = &p->regs[a];
    if (r->c == 0 && r->r <= 6) { /* u uᵀ */
        uint32_t col = reshape2(g, (uint32_t)a, r->r, 1);
        uint32_t t = un(g, O_TRANSPOSE, col, r->bnd);
        ins *in = emit(g, O_MATMUL, col, t);
        r = &p->regs[a];
        return tame(g, res(g, in, p->regs[col].kind, r->r, r->r, r->bnd * r->bnd));
    }
    if (r->c == 0)
        a = reshape2(g, (uint32_t)a, 1, r->r);
    r = &p->regs[a];
    bool left = r->r <= 6; /* M Mᴴ, or Mᴴ M when M has more than 6 rows */
    uint32_t t = un(g, rnd_unit(&g->s) < 0.5 ? O_TRANSPOSE : O_ADJOINT, (uint32_t)a, r->bnd);
    r = &p->regs[a];
    ins *in = emit(g, O_MATMUL, left ? (uint32_t)a : t, left ? t : (uint32_t)a);
    size_t n = left ? r->r : r->c, k = left ? r->c : r->r;
    return tame(g, res(g, in, kind_of2(p, (uint32_t)a, t), n, n, (double)k * r->bnd * r->bnd));
}

/* I + 0.3/n unit(a): eigenvalues within 0.3 of 1. */
static uint32_t wellcond(gen *g, uint32_t a)
{
    size_t n = g->p->regs[a].r;
    uint32_t t = scalek(g, unit(g, a), 0.3 / (double)n);
    return addi(g, t, 1.0);
}

static uint32_t scalar_of(gen *g)
{
    int64_t s = pick(g, is_sca);
    if (s >= 0 && rnd_unit(&g->s) < 0.7)
        return (uint32_t)s;
    int64_t a = pick(g, is_arr);
    if (a < 0) {
        a = pick(g, is_z);
        uint32_t n = (uint32_t)a;
        ins *in = emit(g, O_NORM, n, 0);
        return tame(g,
                    res(g, in, RK_S, 0, 0, (double)numel_of(&g->p->regs[n]) * g->p->regs[n].bnd));
    }
    const reg *r = &g->p->regs[a];
    ins *in = emit(g, O_SUM, (uint32_t)a, 0);
    return tame(g, res(g, in, RK_S, 0, 0, (double)numel_of(r) * r->bnd));
}

/* A constant array of r x c (c == 0: a vector) with random elements in [-1, 1]. */
static int32_t new_const(gen *g, size_t r, size_t c)
{
    prog *p = g->p;
    assert_true(p->ncst < MAX_CONST);
    int32_t k = (int32_t)p->ncst++;
    for (size_t e = 0; e < r * (c ? c : 1); e++)
        p->cdat[k][e] = rnd_range(&g->s, -1, 1);
    p->carr[k] = c == 0 ? cr_array_vector(p->cdat[k], r) : cr_array_matrix(p->cdat[k], r, c);
    return k;
}

/* A constant permutation matrix of n x n that is not the identity (n > 1). */
static int32_t new_perm(gen *g, size_t n)
{
    prog *p = g->p;
    assert_true(p->ncst < MAX_CONST);
    int32_t k = (int32_t)p->ncst++;
    size_t pi[8];
    for (size_t i = 0; i < n; i++)
        pi[i] = i;
    for (size_t i = n; i-- > 1;) {
        size_t j = rnd_below(&g->s, i + 1);
        size_t t = pi[i];
        pi[i] = pi[j];
        pi[j] = t;
    }
    if (n > 1 && pi[0] == 0) { /* not the identity: swap the first two */
        size_t t = pi[0];
        pi[0] = pi[1];
        pi[1] = t;
    }
    memset(p->cdat[k], 0, sizeof p->cdat[k]);
    for (size_t i = 0; i < n; i++)
        p->cdat[k][i * n + pi[i]] = 1;
    p->carr[k] = cr_array_matrix(p->cdat[k], n, n);
    return k;
}

static uint32_t viewcol(gen *g, uint32_t a, size_t j)
{
    const reg *r = &g->p->regs[a];
    ins *in = emit(g, O_VIEWCOL, a, 0);
    in->i1 = (int64_t)j;
    return res(g, in, is_cplx(g->p, a) ? RK_Z : RK_A, r->r, 0, r->bnd);
}

/* |x|² elementwise of a complex register: abs2. or real.² + imag.² */
static uint32_t abs2_of(gen *g, uint32_t a)
{
    double b = g->p->regs[a].bnd;
    if (rnd_unit(&g->s) < 0.5)
        return un(g, O_ABS2, a, b * b);
    uint32_t re = un(g, O_BSQ, un(g, O_REAL, a, b), b * b);
    uint32_t im = un(g, O_BSQ, un(g, O_IMAG, a, b), b * b);
    const reg *r = &g->p->regs[re];
    ins *in = emit(g, O_BADD, re, im);
    return res(g, in, RK_A, r->r, r->c, 2 * b * b);
}

/* A loss of the columns of V (rows x k; eigenvectors or singular vectors, defined up to a
 * sign or a phase per column) that does not depend on those: |Vᴴ w|² (w a register or a
 * constant), or the outer product v_j v2_jᴴ of column j of V and of V2 (V itself, or the
 * other factor of an svd, whose column turns with V's). */
static uint32_t vec_loss1(gen *g, uint32_t V, uint32_t V2);

static void vec_loss(gen *g, uint32_t V, uint32_t V2)
{
    prog *p = g->p;
    size_t first = p->nreg;
    uint32_t o = vec_loss1(g, V, V2);
    /* the steps before the loss depend on the vectors' signs or phases: not operands */
    for (size_t i = first; i < p->nreg; i++)
        if (i != o && p->regs[i].kind != RK_X) {
            p->regs[i].z = p->regs[i].kind == RK_Z;
            p->regs[i].kind = RK_X;
        }
}

static uint32_t vec_loss1(gen *g, uint32_t V, uint32_t V2)
{
    prog *p = g->p;
    size_t rows = p->regs[V].r, k = p->regs[V].c;
    bool z = is_cplx(p, V);
    if (rnd_unit(&g->s) < 0.5 || (size_t)rows * p->regs[V2].r > MAX_NUM) {
        uint32_t cand[MAX_REG];
        size_t n = 0;
        for (size_t i = 0; i < p->nreg; i++)
            if (is_any(&p->regs[i]) && p->regs[i].c == 0 && p->regs[i].r == rows)
                cand[n++] = (uint32_t)i;
        uint32_t vh = un(g, z ? O_ADJOINT : O_TRANSPOSE, V, 1);
        uint32_t t;
        if (n > 0 && rnd_unit(&g->s) < 0.7) {
            uint32_t w = cand[rnd_below(&g->s, n)];
            double bw = p->regs[w].bnd;
            ins *in = emit(g, O_MATMUL, vh, w);
            t = res(g, in, kind_of2(p, vh, w), k, 0, (double)rows * bw);
        } else {
            ins *in = emit(g, O_CMATMUL, vh, 0);
            in->cst = new_const(g, rows, 0);
            t = res(g, in, z ? RK_Z : RK_A, k, 0, (double)rows);
        }
        t = p->regs[t].kind == RK_Z ? abs2_of(g, t)
                                    : un(g, O_BSQ, t, p->regs[t].bnd * p->regs[t].bnd);
        return tame(g, t);
    }
    size_t j = rnd_below(&g->s, k), rows2 = p->regs[V2].r;
    uint32_t col = reshape2(g, viewcol(g, V, j), rows, 1);
    uint32_t v = viewcol(g, V2, j);
    if (is_cplx(p, V2))
        v = un(g, O_CONJ, v, 1);
    uint32_t row = reshape2(g, v, 1, rows2);
    ins *in = emit(g, O_BMUL, col, row);
    return res(g, in, kind_of2(p, col, row), rows, rows2, 1);
}

static void gen_one(gen *g)
{
    prog *p = g->p;
    uint64_t *s = &g->s;
    unsigned op = (unsigned)rnd_below(s, O_COUNT);
    uint32_t a = (uint32_t)pick(g, is_any);
    const reg *ra = &p->regs[a];
    ins *in;
    switch (op) {
    case O_SADD:
    case O_SMUL: {
        uint32_t x = scalar_of(g), y = rnd_unit(s) < 0.3 ? x : scalar_of(g);
        double bx = p->regs[x].bnd, by = p->regs[y].bnd;
        in = emit(g, op, x, y);
        tame(g, res(g, in, RK_S, 0, 0, op == O_SADD ? bx + by : bx * by));
        return;
    }
    case O_SSQ:
        in = emit(g, O_SSQ, scalar_of(g), 0);
        res(g, in, RK_S, 0, 0, 0.5);
        return;
    case O_MATMUL: {
        int64_t m = pick(g, is_mat_any);
        if (m < 0)
            break;
        const reg *rm = &p->regs[m];
        uint32_t cand[MAX_REG], b;
        size_t n = 0;
        for (size_t i = 0; i < p->nreg; i++)
            if (is_any(&p->regs[i]) && p->regs[i].r == rm->c)
                cand[n++] = (uint32_t)i;
        b = n > 0 && rnd_unit(s) < 0.7 ? cand[rnd_below(s, n)]
                                       : un(g, O_ADJOINT, (uint32_t)m, rm->bnd);
        const reg *rb = &p->regs[b];
        rm = &p->regs[m];
        if ((size_t)rm->r * (rb->c ? rb->c : 1) > MAX_NUM)
            break;
        in = emit(g, O_MATMUL, (uint32_t)m, b);
        tame(g, res(g, in, kind_of2(p, (uint32_t)m, b), rm->r, rb->c, rm->c * rm->bnd * rb->bnd));
        return;
    }
    case O_TRANSPOSE:
    case O_ADJOINT: {
        int64_t m = pick(g, is_mat_any);
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
        tame(g, res(g, in, kind_of2(p, a, b), ra->r, ra->c, op == O_BMUL ? ba * bb : ba + bb));
        return;
    }
    case O_BSCALE: {
        uint32_t x = scalar_of(g);
        ra = &p->regs[a];
        in = emit(g, O_BSCALE, x, a);
        tame(g, res(g, in, ra->kind, ra->r, ra->c, p->regs[x].bnd * ra->bnd));
        return;
    }
    case O_BSCALEK:
        tame(g, scalek(g, a, rnd_range(s, -1.5, 1.5)));
        return;
    case O_BTANH: {
        int64_t r = pick(g, is_arr);
        if (r < 0)
            break;
        un(g, op, (uint32_t)r, 1);
        return;
    }
    case O_BSIN:
        /* sin of a complex z grows as e^|im z|: its argument is bounded first */
        un(g, op, ra->kind == RK_Z ? unit(g, a) : a, ra->kind == RK_Z ? 1.6 : 1);
        return;
    case O_BSQ: {
        int64_t r = pick(g, is_arr);
        if (r < 0)
            break;
        tame(g, un(g, op, (uint32_t)r, p->regs[r].bnd * p->regs[r].bnd));
        return;
    }
    case O_ABS2:
    case O_REAL:
    case O_IMAG:
    case O_CONJ: {
        int64_t z = pick(g, is_z);
        if (z < 0)
            break;
        if (op == O_ABS2)
            tame(g, abs2_of(g, (uint32_t)z));
        else
            un(g, op, (uint32_t)z, p->regs[z].bnd);
        return;
    }
    case O_CPLX: {
        /* x .+ i .* y: a complex array from real ones */
        int64_t x = pick(g, is_arr);
        if (x < 0)
            break;
        uint32_t y = pick_same(g, (uint32_t)x);
        if (is_cplx(p, y))
            y = (uint32_t)x;
        uint32_t iy = un(g, O_CPLX, y, p->regs[y].bnd);
        in = emit(g, O_BADD, (uint32_t)x, iy);
        res(g, in, RK_Z, p->regs[x].r, p->regs[x].c, p->regs[x].bnd + p->regs[y].bnd);
        return;
    }
    case O_SUM: {
        int64_t r = pick(g, is_arr);
        if (r < 0)
            break;
        in = emit(g, op, (uint32_t)r, 0);
        tame(g, res(g, in, RK_S, 0, 0, (double)numel_of(&p->regs[r]) * p->regs[r].bnd));
        return;
    }
    case O_NORM:
        in = emit(g, op, a, 0);
        tame(g, res(g, in, RK_S, 0, 0, (double)numel_of(ra) * ra->bnd));
        return;
    case O_DOT: {
        int64_t r = pick(g, is_arr);
        if (r < 0)
            break;
        uint32_t b = pick_same(g, (uint32_t)r);
        if (is_cplx(p, b))
            b = (uint32_t)r;
        in = emit(g, op, (uint32_t)r, b);
        tame(g, res(g, in, RK_S, 0, 0,
                    (double)numel_of(&p->regs[r]) * p->regs[r].bnd * p->regs[b].bnd));
        return;
    }
    case O_SUMDIM: {
        int64_t m = pick(g, is_mat_any);
        if (m < 0)
            break;
        const reg *r = &p->regs[m];
        in = emit(g, op, (uint32_t)m, 0);
        in->i1 = (int64_t)rnd_below(s, 2);
        tame(g, res(g, in, r->kind, in->i1 ? r->r : 1, in->i1 ? 1 : r->c,
                    (in->i1 ? r->c : r->r) * r->bnd));
        return;
    }
    case O_GETINDEX: {
        int64_t r = pick(g, is_arr);
        if (r < 0)
            break;
        in = emit(g, op, (uint32_t)r, 0);
        in->i1 = (int64_t)rnd_below(s, numel_of(&p->regs[r]));
        res(g, in, RK_S, 0, 0, p->regs[r].bnd);
        return;
    }
    case O_RESHAPE: {
        size_t n = numel_of(ra), dv[MAX_NUM], nd = 0;
        for (size_t q = 1; q <= n; q++)
            if (n % q == 0)
                dv[nd++] = q;
        size_t rr = dv[rnd_below(s, nd)];
        reshape2(g, a, rr, n / rr);
        return;
    }
    case O_VIEWCOL: {
        int64_t m = pick(g, is_mat_any);
        if (m < 0)
            break;
        viewcol(g, (uint32_t)m, rnd_below(s, p->regs[m].c));
        return;
    }
    case O_ADDS:
    case O_ADDI: {
        uint32_t m = square(g, false);
        if (op == O_ADDI) {
            tame(g, addi(g, m, rnd_range(s, -1, 1)));
            return;
        }
        uint32_t x = scalar_of(g);
        const reg *r = &p->regs[m];
        in = emit(g, op, m, x);
        tame(g, res(g, in, r->kind, r->r, r->c, r->bnd + p->regs[x].bnd));
        return;
    }
    case O_DET: {
        uint32_t w = wellcond(g, square(g, true));
        in = emit(g, op, w, 0);
        res(g, in, RK_S, 0, 0, 5);
        return;
    }
    case O_INV: {
        uint32_t w = wellcond(g, square(g, false));
        size_t n = p->regs[w].r;
        in = emit(g, op, w, 0);
        res(g, in, p->regs[w].kind, n, n, 2);
        return;
    }
    case O_SOLVE: {
        uint32_t m = square(g, false);
        size_t n = p->regs[m].r;
        uint32_t cand[MAX_REG];
        size_t nc = 0;
        for (size_t i = 0; i < p->nreg; i++)
            if (is_any(&p->regs[i]) && p->regs[i].r == n)
                cand[nc++] = (uint32_t)i;
        uint32_t b = cand[rnd_below(s, nc)];
        uint32_t w = wellcond(g, m);
        const reg *rb = &p->regs[b];
        in = emit(g, op, w, b);
        tame(g, res(g, in, kind_of2(p, w, b), n, rb->c, 2 * (double)n * rb->bnd));
        return;
    }
    case O_SYMM:
    case O_HERM: {
        uint32_t m = square(g, op == O_SYMM);
        const reg *r = &p->regs[m];
        in = emit(g, op, m, 0);
        uint32_t o = res(g, in, r->kind, r->r, r->r, r->bnd);
        p->regs[o].st = (uint8_t)(op == O_SYMM ? CR_MAT_SYMMETRIC : CR_MAT_HERMITIAN);
        return;
    }
    case O_EIGEN: {
        uint32_t m = unit(g, square(g, false));
        size_t n = p->regs[m].r;
        bool z = is_cplx(p, m);
        if (z || rnd_unit(s) < 0.5)
            m = un(g, z ? O_HERM : O_SYMM, m, 1);
        in = emit(g, op, m, 0);
        in->nout = 2;
        res(g, in, RK_A, n, 0, (double)n);
        uint32_t vv = new_reg(p, RK_X, n, n, 1);
        p->regs[vv].z = z;
        in->out[1] = (int32_t)vv;
        vec_loss(g, vv, vv);
        return;
    }
    case O_EIGG: {
        uint32_t m = un(g, O_BTANH, square(g, true), 1);
        size_t n = p->regs[m].r;
        in = emit(g, op, m, 0);
        in->nout = 2;
        res(g, in, RK_Z, n, 0, (double)n);
        uint32_t vv = new_reg(p, RK_X, n, n, 1);
        p->regs[vv].z = 1;
        in->out[1] = (int32_t)vv;
        vec_loss(g, vv, vv);
        return;
    }
    case O_SVD: {
        int64_t m = pick(g, is_mat_any);
        if (m < 0)
            break;
        uint32_t t = unit(g, (uint32_t)m);
        size_t rr = p->regs[m].r, cc = p->regs[m].c, k = rr < cc ? rr : cc;
        bool z = is_cplx(p, t);
        in = emit(g, op, t, 0);
        in->nout = 3;
        uint32_t uu = res(g, in, RK_X, rr, k, 1);
        uint32_t sv = new_reg(p, RK_A, k, 0, sqrt((double)(rr * cc)));
        uint32_t vv = new_reg(p, RK_X, cc, k, 1);
        p->regs[uu].z = p->regs[vv].z = z;
        in->out[1] = (int32_t)sv;
        in->out[2] = (int32_t)vv;
        tame(g, sv);
        double u = rnd_unit(s);
        if (u < 0.4)
            vec_loss(g, uu, vv);
        else
            vec_loss(g, u < 0.7 ? uu : vv, u < 0.7 ? uu : vv);
        return;
    }
    case O_LU: {
        uint32_t m = square(g, false);
        size_t n = p->regs[m].r;
        uint32_t w;
        if (n > 1 && rnd_unit(s) < 0.6) { /* P W: the pivots are P's */
            uint32_t wc = wellcond(g, m);
            in = emit(g, O_PMUL, wc, 0);
            in->cst = new_perm(g, n);
            w = res(g, in, p->regs[wc].kind, n, n, p->regs[wc].bnd);
        } else { /* a general matrix: the pivots depend on the point */
            w = addi(g, unit(g, m), rnd_range(s, -0.6, 0.6));
        }
        in = emit(g, op, w, 0);
        in->nout = 3;
        unsigned kind = p->regs[w].kind;
        res(g, in, kind, n, n, 1);
        in->out[1] = (int32_t)new_reg(p, kind, n, n, 4);
        p->regs[in->out[0]].st = CR_MAT_LOWER;
        p->regs[in->out[1]].st = CR_MAT_UPPER;
        tame(g, (uint32_t)in->out[1]);
        return;
    }
    case O_FINDMAX: {
        int64_t r = pick(g, is_arr);
        if (r < 0 || numel_of(&p->regs[r]) < 2)
            break;
        in = emit(g, op, (uint32_t)r, 0);
        in->nout = 2;
        res(g, in, RK_S, 0, 0, p->regs[r].bnd);
        uint32_t idx = new_reg(p, RK_I, 0, 0, 0);
        in->out[1] = (int32_t)idx;
        /* getindex of an array of as many elements at the index */
        uint32_t cand[MAX_REG];
        size_t nc = 0;
        for (size_t i = 0; i < p->nreg; i++)
            if (is_arr(&p->regs[i]) && numel_of(&p->regs[i]) == numel_of(&p->regs[r]))
                cand[nc++] = (uint32_t)i;
        uint32_t b = cand[rnd_below(s, nc)];
        ins *q = emit(g, O_GETIDX, idx, b);
        res(g, q, RK_S, 0, 0, p->regs[b].bnd);
        return;
    }
    default:
        break;
    }
    if (ra->kind == RK_A)
        un(g, O_BSIN, a, 1);
    else
        un(g, O_CONJ, a, ra->bnd);
}

static void gen_prog(prog *p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->so = true;
    gen g = {p, seed};
    uint64_t *s = &g.s;
    p->seed = seed;
    size_t na = 1 + rnd_below(s, 3), ns = rnd_below(s, 3);
    p->nin = na + ns;
    size_t off = 0;
    /* scalar inputs first or last, as the bits say */
    bool sfirst = rnd_unit(s) < 0.5;
    for (size_t j = 0; j < p->nin; j++) {
        bool sc = sfirst ? j < ns : j >= na;
        uint32_t i;
        if (sc) {
            i = new_reg(p, RK_S, 0, 0, 1.5);
        } else {
            size_t r = 1 + rnd_below(s, 5), c = rnd_below(s, 6);
            if (rnd_unit(s) < 0.35)
                c = r;
            double u = rnd_unit(s);
            i = new_reg(p, u < 0.35 ? RK_Z : RK_A, r, c, u < 0.35 ? 2.2 : 1.5);
            if (u >= 0.35 && u < 0.65) {
                p->regs[i].f32 = 1;
                p->f32 = true;
            }
        }
        p->off[j] = off;
        off += ndata_of(&p->regs[i]);
    }
    p->off[p->nin] = off;
    if (pick(&g, is_any) < 0) { /* only scalar inputs: not generated */
        fail_msg("no array input");
    }
    double lr = rnd_unit(s);
    size_t len = 1 + rnd_below(s, lr < 0.6 ? 6 : lr < 0.9 ? 16 : 40);
    for (size_t i = 0; i < len && p->nins < MAX_INS - 50; i++)
        gen_one(&g);
    /* every scalar input is used */
    for (size_t j = 0; j < p->nin; j++)
        if (p->regs[j].kind == RK_S) {
            uint32_t a = (uint32_t)pick(&g, is_any);
            const reg *ra = &p->regs[a];
            ins *in = emit(&g, O_BSCALE, (uint32_t)j, a);
            tame(&g, res(&g, in, ra->kind, ra->r, ra->c, 1.5 * ra->bnd));
        }
    /* the array output: the last array result */
    p->aout = UINT32_MAX;
    for (size_t i = p->nreg; i-- > p->nin;)
        if (is_any(&p->regs[i])) {
            p->aout = (uint32_t)i;
            break;
        }
    if (p->aout == UINT32_MAX) {
        uint32_t a = (uint32_t)pick(&g, is_any);
        p->aout = is_cplx(p, a) ? un(&g, O_CONJ, a, p->regs[a].bnd) : un(&g, O_BSIN, a, 1);
    }
    uint32_t x = p->aout;
    const reg *rx = &p->regs[x];
    ins *in;
    uint32_t y;
    double bx = (double)numel_of(rx) * rx->bnd * rx->bnd;
    if (rx->kind == RK_Z) {
        if (rnd_unit(s) < 0.5) {
            in = emit(&g, O_NORM, x, 0);
            y = tame(&g, res(&g, in, RK_S, 0, 0, bx));
        } else {
            uint32_t q = abs2_of(&g, x);
            in = emit(&g, O_SUM, q, 0);
            y = tame(&g, res(&g, in, RK_S, 0, 0, bx));
        }
    } else {
        unsigned fin = (unsigned)rnd_below(s, 3);
        in = emit(&g, fin == 2 ? O_NORM : fin == 1 ? O_DOT : O_SUM, x, x);
        y = tame(&g, res(&g, in, RK_S, 0, 0, bx));
    }
    uint32_t others[MAX_REG];
    size_t no = 0;
    for (size_t i = 0; i < p->nreg; i++)
        if (p->regs[i].kind == RK_S && i != y)
            others[no++] = (uint32_t)i;
    for (size_t k = 0; k < 3 && no > 0; k++) {
        uint32_t o = others[no - 1 - rnd_below(s, no < 4 ? no : 4)];
        in = emit(&g, rnd_unit(s) < 0.7 ? O_SADD : O_SMUL, y, o);
        y = tame(&g, res(&g, in, RK_S, 0, 0, p->regs[y].bnd + p->regs[o].bnd));
    }
    p->outs[0] = y;
    p->m = 1;
    while (p->m < MAX_OUT && no > 0 && rnd_unit(s) < 0.5)
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

static const char *kind_name(const reg *r)
{
    static const char *const k[5] = {"s", "", "c", "x", "i"};
    return k[r->kind];
}

static void dump_prog(const prog *p)
{
    printf("program %#" PRIx64 ": %zu inputs%s%s\n", p->seed, p->nin, p->so ? "" : " (not so)",
           p->f32 ? " (f32)" : "");
    for (size_t j = 0; j < p->nin; j++) {
        const reg *r = &p->regs[j];
        if (r->kind == RK_S)
            printf("  r%zu = scalar input\n", j);
        else
            printf("  r%zu = input %ux%u %s\n", j, r->r, r->c,
                   r->kind == RK_Z ? "c128"
                   : r->f32        ? "f32"
                                   : "f64");
    }
    for (size_t i = 0; i < p->nins; i++) {
        const ins *in = &p->code[i];
        printf("  ");
        for (unsigned k = 0; k < in->nout; k++)
            if (in->out[k] >= 0) {
                const reg *r = &p->regs[in->out[k]];
                if (r->kind == RK_S || r->kind == RK_I)
                    printf("r%d(%s) ", in->out[k], kind_name(r));
                else
                    printf("r%d(%ux%u%s) ", in->out[k], r->r, r->c, kind_name(r));
            }
        printf("= %s(r%u, r%u) path %u k %g i %" PRId64 " c %d\n", k_op_names[in->op], in->a, in->b,
               in->path, in->k, in->i1, in->cst);
    }
    printf("  outputs:");
    for (size_t i = 0; i < p->m; i++)
        printf(" r%u", p->outs[i]);
    printf("; array output r%u\n", p->aout);
}

#endif /* TEST_RANDOM_ARRAYS_MIXED_PROGRAMS_H */
