/*
 * Random programs under allocation failure (the SQLite way, as test_fault_ad.c does for fixed
 * programs). Each seeded program is a short register machine over scalar variables:
 * arithmetic rows, named rules (tanh), rules kept as pullbacks (hypot, evalpoly), a user
 * function with a registered rrule (cube), a user function with an overlay recorded inline
 * (wave); array programs add fused kernels, broadcasts, matmul, solve, det, inv, cholesky,
 * and map / broadcast of the user functions. The setup creates the registry (the rrule), the
 * engine (the overlay), the tapes and the prepared gradients; the run records and sweeps:
 *  scalar programs: cr_tape_value_and_gradient, cr_tape_record of two outputs, gradient, vjp,
 *    Jacobian; on a second-order tape jvp, hvp, Hessian; the prepared gradient and H v at two
 *    points;
 *  array programs: cr_tape_value_and_gradient_arrays, cr_tape_gradient_arrays; on a
 *    second-order tape cr_tape_ajvp and cr_tape_ahvp; the prepared gradient and H v of
 *    arrays at two points.
 * (Second-order operations only for programs without pullback rules and user rules.)
 * With the context's hook failing the N-th allocation, N = 1, 2, ... until the program runs
 * without reaching it, every failing call returns CR_ENOMEM with a message (a tape
 * operation also as the tape's sticky status); the same objects then redo the run with
 * memory back and give the numbers of a run without failure bit for bit; once freed, no
 * block is live and no free had a wrong size. A prepared object's second call allocates
 * nothing. The numbers themselves are checked by the other random tests (against central
 * differences); here the oracle is the run without failure.
 * CR_RANDOM_PROGRAMS=<count> runs more (CTest runs 600 as three tests of 200, from
 * CR_RANDOM_FROM=0, 200 and 400), CR_RANDOM_SEED=<seed> replays one, CR_RANDOM_DUMP=1
 * prints it.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>
#include <chainrules/kernel.h>
#include <chainrules/tape_inline.h>

#define CR_TEST_OWN_FIXTURE
#include "test_util.h"

#include "test_cube.h"
#include "test_fault_hook.h"
#include "test_random.h"
#include "test_wave.h"

/* ---- what a run computes ---------------------------------------------------------------- */

enum { OUT_MAX = 4096 };

typedef struct outv {
    size_t n;
    double v[OUT_MAX];
} outv;

static void put(outv *o, const double *v, size_t n)
{
    assert_true(o->n + n <= OUT_MAX);
    memcpy(o->v + o->n, v, n * sizeof *v);
    o->n += n;
}

static void put1(outv *o, double v)
{
    put(o, &v, 1);
}

/* ---- the program -------------------------------------------------------------------------- */

enum {
    O_ADD,
    O_SUB,
    O_MUL,
    O_SIN,
    O_EXPSIN, /* exp(sin a) */
    O_TANH,   /* a named rule through cr_tape_call */
    O_WAVE,   /* a sin a: a user function with an overlay, recorded inline */
    /* no second order from here */
    O_HYPOT,    /* hypot(a, b, 1): a rule kept as a pullback */
    O_EVALPOLY, /* evalpoly(tanh a, b, 0.5): a rule kept as a pullback */
    O_CUBE,     /* a^3: a user function with a registered rrule */
    O_NSCALAR,
    /* arrays (array programs) */
    O_KSUM = O_NSCALAR, /* sum_i ka(X[i], a) / L */
    O_BCAST,            /* sum(sin.(X .* a)) */
    O_MATMUL,           /* a sum(M X[0:3]) */
    O_SOLVE,            /* a + sum(M \ X[0:3]) */
    O_DET,              /* a det(M) */
    O_INV,              /* a sum(inv(M)) */
    O_CHOL,             /* a sum(cholesky(M)) */
    /* no second order from here */
    O_MAPW,  /* a sum(map(wave, X)) */
    O_BCUBE, /* a + sum(broadcast(cube, X)) */
    O_COUNT
};

static const char *const k_names[O_COUNT] = {
    "add",  "sub",   "mul",    "sin",   "expsin", "tanh", "wave", "hypot", "evalpoly", "cube",
    "ksum", "bcast", "matmul", "solve", "det",    "inv",  "chol", "mapw",  "bcube"};

enum { NREG = 24, NIN_MAX = 5, NOPS_MAX = 14, XL = 6 };

typedef struct ins {
    uint8_t op, a, b;
} ins;

typedef struct prog {
    uint64_t seed;
    bool arrays;
    bool second; /* no pullback rules, no user rules: second-order operations */
    size_t nin, nops;
    size_t block; /* first block size of the tapes' memory */
    ins code[NOPS_MAX];
    double x[NIN_MAX], X[XL], M[9];
} prog;

static const size_t k_blocks[] = {64, 128, 256, 512, 1024, 2048, 4096, 16384};

static void gen(prog *p, uint64_t seed)
{
    uint64_t s = seed;
    memset(p, 0, sizeof *p);
    p->seed = seed;
    p->arrays = rnd_unit(&s) < 0.5;
    p->second = rnd_unit(&s) < 0.5;
    p->nin = 2 + rnd_below(&s, NIN_MAX - 1);
    p->nops = 3 + rnd_below(&s, NOPS_MAX - 2);
    p->block = k_blocks[rnd_below(&s, sizeof k_blocks / sizeof k_blocks[0])];
    for (size_t i = 0; i < p->nin; i++)
        p->x[i] = rnd_range(&s, -1.2, 1.2);
    for (size_t i = 0; i < XL; i++)
        p->X[i] = rnd_range(&s, -1.0, 1.0);
    /* M = B B^T + 2 I: symmetric positive definite for cholesky, nonsingular for the rest */
    double B[9];
    for (size_t i = 0; i < 9; i++)
        B[i] = rnd_range(&s, -0.8, 0.8);
    for (size_t r = 0; r < 3; r++)
        for (size_t c = 0; c < 3; c++) {
            double v = r == c ? 2.0 : 0.0;
            for (size_t k = 0; k < 3; k++)
                v += B[3 * r + k] * B[3 * c + k];
            p->M[3 * r + c] = v;
        }
    size_t nreg = p->nin;
    size_t top = p->second ? (p->arrays ? O_MAPW : O_HYPOT) : (p->arrays ? O_COUNT : O_NSCALAR);
    for (size_t i = 0; i < p->nops; i++) {
        uint8_t op = (uint8_t)rnd_below(&s, top);
        if (p->arrays && i == 0) /* every array program uses its arrays */
            op = (uint8_t)(O_KSUM + rnd_below(&s, top - O_KSUM));
        else if (p->second && op >= O_HYPOT && op < O_NSCALAR)
            op = (uint8_t)rnd_below(&s, O_HYPOT); /* no second-order form */
        p->code[i] = (ins){op, (uint8_t)rnd_below(&s, nreg), (uint8_t)rnd_below(&s, nreg)};
        nreg++;
    }
}

static void dump(const prog *p)
{
    print_message("program %#llx: %s, %s, %zu inputs, blocks of %zu bytes\n",
                  (unsigned long long)p->seed, p->arrays ? "arrays" : "scalars",
                  p->second ? "second order" : "first order", p->nin, p->block);
    for (size_t i = 0; i < p->nops; i++)
        print_message("  r%zu = %s(r%u, r%u)\n", p->nin + i, k_names[p->code[i].op], p->code[i].a,
                      p->code[i].b);
}

/* ka(e, s) = sin(e s) + e^2 / (1.5 + s^2) */
#define KA(x) \
    cr_k_add(cr_k_sin(cr_k_mul(x[0], x[1])), cr_k_div(cr_k_sq(x[0]), cr_k_add(1.5, cr_k_sq(x[1]))))
CR_KERNEL(rk_a, 2, KA);

/* ---- recording ---------------------------------------------------------------------------- */

static const prog *g_prog;

static cr_var op_scalar(cr_tape *t, const ins *in, cr_var a, cr_var b)
{
    cr_value cube = cr_value_function(&cube_fn, NULL), wave = cr_value_function(&wave_fn, NULL);
    switch (in->op) {
    case O_ADD:
        return cr_add(t, a, b);
    case O_SUB:
        return cr_sub(t, a, b);
    case O_MUL:
        return cr_mul(t, a, b);
    case O_SIN:
        return cr_sin(t, a);
    case O_EXPSIN:
        return cr_exp(t, cr_sin(t, a));
    case O_TANH:
        return cr_tape_call1(t, &cr_fn_tanh, &a, 1);
    case O_WAVE:
        return cr_tape_call1(t, &wave, &a, 1);
    case O_HYPOT: {
        cr_var args[3] = {a, b, cr_const(1.0)};
        return cr_tape_call1(t, &cr_fn_hypot, args, 3);
    }
    case O_EVALPOLY: {
        cr_var args[3] = {cr_tape_call1(t, &cr_fn_tanh, &a, 1), b, cr_const(0.5)};
        return cr_tape_call1(t, &cr_fn_evalpoly, args, 3);
    }
    case O_CUBE:
        return cr_tape_call1(t, &cube, &a, 1);
    default:
        return cr_const(NAN);
    }
}

static cr_var op_array(cr_tape *t, const ins *in, cr_var a, cr_avar X, cr_avar M)
{
    cr_value cube = cr_value_function(&cube_fn, NULL), wave = cr_value_function(&wave_fn, NULL);
    cr_avar X3 = cr_av_slice(t, X, 0, 3);
    switch (in->op) {
    case O_KSUM: {
        cr_kin kin[2] = {cr_kin_arr(X, 0), cr_kin_var(a)};
        return cr_div(t, cr_av_kernel_sum(t, &rk_a, kin, 2, XL), cr_const((double)XL));
    }
    case O_BCAST:
        return cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin,
                                             cr_targ_arr(cr_av_broadcast2(
                                                 t, &cr_fn_mul, cr_targ_arr(X), cr_targ_var(a)))));
    case O_MATMUL: {
        cr_targ ab[2] = {cr_targ_arr(M), cr_targ_arr(X3)};
        return cr_mul(t, a, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_matmul, ab, 2)));
    }
    case O_SOLVE: {
        cr_targ ab[2] = {cr_targ_arr(M), cr_targ_arr(X3)};
        return cr_add(t, a, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_solve, ab, 2)));
    }
    case O_DET: {
        cr_targ am[1] = {cr_targ_arr(M)};
        return cr_mul(t, a, cr_tape_acall_s(t, &cr_fn_det, am, 1));
    }
    case O_INV: {
        cr_targ am[1] = {cr_targ_arr(M)};
        return cr_mul(t, a, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_matinv, am, 1)));
    }
    case O_CHOL: {
        cr_targ am[1] = {cr_targ_arr(M)};
        return cr_mul(t, a, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_cholesky, am, 1)));
    }
    case O_MAPW: {
        cr_targ ma[2] = {cr_targ_value(wave), cr_targ_arr(X)};
        return cr_mul(t, a, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_map, ma, 2)));
    }
    case O_BCUBE: {
        cr_targ ba[2] = {cr_targ_value(cube), cr_targ_arr(X)};
        return cr_add(t, a, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_broadcast, ba, 2)));
    }
    default:
        return cr_const(NAN);
    }
}

/* The registers after the program; r[0..nin) are the inputs. */
static void program(cr_tape *t, const prog *p, cr_var *r, cr_avar X, cr_avar M)
{
    for (size_t i = 0; i < p->nops; i++) {
        const ins *in = &p->code[i];
        cr_var a = r[in->a], b = r[in->b];
        r[p->nin + i] = in->op < O_NSCALAR ? op_scalar(t, in, a, b) : op_array(t, in, a, X, M);
    }
}

/* Scalar programs: y0 = the last register, y1 = the one before. */
static cr_status scalar_f(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    const prog *p = env;
    cr_var r[NREG];
    memcpy(r, x, n * sizeof *x);
    program(t, p, r, cr_av_const(NULL), cr_av_const(NULL));
    size_t last = p->nin + p->nops - 1;
    y[0] = r[last];
    if (m > 1)
        y[1] = r[last - 1];
    return cr_tape_status(t);
}

/* Array programs over (P, X, M): the scalars are P's elements; y = r_last + r_last-1 / 2. */
static cr_status array_f(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    const prog *p = env;
    cr_var r[NREG];
    for (size_t i = 0; i < p->nin; i++)
        r[i] = cr_av_sum(t, cr_av_slice(t, xs[0], (int64_t)i, (int64_t)i + 1));
    program(t, p, r, xs[1], xs[2]);
    size_t last = p->nin + p->nops - 1;
    *y = cr_add(t, r[last], cr_mul(t, cr_const(0.5), r[last - 1]));
    return cr_tape_status(t);
}

/* ---- the objects of a run ------------------------------------------------------------------ */

typedef struct sstate {
    cr_ctx *ctx;
    cr_registry *reg;
    cr_engine *eng;
    cr_tape *t1, *t2;
    cr_prepared *pg, *ph;
} sstate;

static void teardown(sstate *s)
{
    cr_prepared_free(s->pg);
    cr_prepared_free(s->ph);
    cr_tape_free(s->t1);
    cr_tape_free(s->t2);
    cr_engine_free(s->eng);
    cr_registry_free(s->reg);
    cr_ctx *ctx = s->ctx;
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
}

#define TRY(expr)                   \
    do {                            \
        cr_status try_st_ = (expr); \
        if (try_st_ != CR_OK)       \
            return try_st_;         \
    } while (0)

static char g_where[128];

/* A failing call leaves a message on the context (and, for a tape, is its sticky status). */
static void failed_call(const char *what, cr_status st, cr_ctx *ctx, cr_tape *t)
{
    if (cr_ctx_errmsg(ctx)[0] == '\0') {
        print_error("%s: %s gave %s without a message\n", g_where, what, cr_status_name(st));
        fail();
    }
    if (t != NULL && (cr_tape_status(t) != st || cr_tape_errmsg(t)[0] == '\0')) {
        print_error("%s: %s gave %s (%s), the tape has %s\n", g_where, what, cr_status_name(st),
                    cr_ctx_errmsg(ctx), cr_status_name(cr_tape_status(t)));
        fail();
    }
}

#define TRYC(ctx, t, expr)                           \
    do {                                             \
        cr_status try_st_ = (expr);                  \
        if (try_st_ != CR_OK) {                      \
            failed_call(#expr, try_st_, (ctx), (t)); \
            return try_st_;                          \
        }                                            \
    } while (0)

static cr_status setup(sstate *s)
{
    const prog *p = g_prog;
    TRYC(s->ctx, NULL, cr_registry_new(s->ctx, NULL, &s->reg));
    static const cr_argspec a1[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &cube_fn, .nargs = 1, .args = a1, .rrule = cube_rrule};
    TRYC(s->ctx, NULL, cr_registry_add(s->reg, &def));
    TRYC(s->ctx, NULL, cr_engine_new(s->ctx, s->reg, &s->eng));
    TRYC(s->ctx, NULL, cr_engine_overlay(s->eng, &wave_fn, wave_ad, 1, NULL));
    cr_tape_params tp = {
        .struct_size = sizeof tp, .flags = 0, .engine = s->eng, .block_size = p->block};
    cr_status st = cr_tape_new(s->ctx, &tp, &s->t1);
    if (st != CR_OK)
        assert_null(s->t1);
    TRYC(s->ctx, NULL, st);
    if (p->second) {
        tp.flags = CR_TAPE_SECOND_ORDER;
        st = cr_tape_new(s->ctx, &tp, &s->t2);
        if (st != CR_OK)
            assert_null(s->t2);
        TRYC(s->ctx, NULL, st);
    }
    cr_prepared *pr = NULL;
    if (!p->arrays) {
        st = cr_prepare_gradient(s->ctx, s->eng, scalar_f, (void *)(uintptr_t)p, p->x, p->nin, &pr);
    } else {
        cr_array Pa = cr_array_vector((double *)(uintptr_t)p->x, p->nin);
        cr_array Xa = cr_array_vector((double *)(uintptr_t)p->X, XL);
        cr_array Ma = cr_array_matrix((double *)(uintptr_t)p->M, 3, 3);
        const cr_array *xs[3] = {&Pa, &Xa, &Ma};
        st = cr_prepare_gradient_arrays(s->ctx, s->eng, array_f, (void *)(uintptr_t)p, xs, 3, &pr);
    }
    if (st != CR_OK)
        assert_null(pr);
    s->pg = pr;
    TRYC(s->ctx, NULL, st);
    if (p->second) {
        pr = NULL;
        if (!p->arrays) {
            st = cr_prepare_hvp(s->ctx, s->eng, scalar_f, (void *)(uintptr_t)p, p->x, p->nin, &pr);
        } else {
            cr_array Pa = cr_array_vector((double *)(uintptr_t)p->x, p->nin);
            cr_array Xa = cr_array_vector((double *)(uintptr_t)p->X, XL);
            cr_array Ma = cr_array_matrix((double *)(uintptr_t)p->M, 3, 3);
            const cr_array *xs[3] = {&Pa, &Xa, &Ma};
            st = cr_prepare_hvp_arrays(s->ctx, s->eng, array_f, (void *)(uintptr_t)p, xs, 3, &pr);
        }
        if (st != CR_OK)
            assert_null(pr);
        s->ph = pr;
        TRYC(s->ctx, NULL, st);
    }
    return CR_OK;
}

/* A point near the program's: the inputs moved by k / 10. */
static void moved(const prog *p, double k, double *x, double *X, double *M)
{
    for (size_t i = 0; i < p->nin; i++)
        x[i] = p->x[i] + 0.1 * k * cos((double)i + k);
    for (size_t i = 0; i < XL; i++)
        X[i] = p->X[i] + 0.1 * k * sin((double)i + k);
    for (size_t i = 0; i < 9; i++)
        M[i] = p->M[i] + (i % 4 == 0 ? 0.1 * k : 0.0); /* the diagonal: stays SPD */
}

/* The prepared calls at two points; the second must not allocate. */
static cr_status run_prepared_scalar(sstate *s, outv *o)
{
    const prog *p = g_prog;
    for (int k = 1; k <= 2; k++) {
        double x[NIN_MAX], X[XL], M[9], g[NIN_MAX], hv[NIN_MAX], v[NIN_MAX], y;
        moved(p, k, x, X, M);
        for (size_t i = 0; i < p->nin; i++)
            v[i] = 0.5 - 0.25 * (double)i;
        size_t before = g_fault.count;
        TRYC(s->ctx, NULL, cr_prepared_value_and_gradient(s->pg, x, p->nin, &y, g));
        put1(o, y);
        put(o, g, p->nin);
        if (s->ph != NULL) {
            TRYC(s->ctx, NULL, cr_prepared_hvp(s->ph, x, p->nin, v, hv, &y, g));
            put1(o, y);
            put(o, hv, p->nin);
            put(o, g, p->nin);
        }
        if (k == 2 && g_fault.count != before) {
            print_error("%s: a prepared object's second call made %zu allocations\n", g_where,
                        g_fault.count - before);
            fail();
        }
    }
    return CR_OK;
}

static cr_status run_scalar(sstate *s, outv *o)
{
    const prog *p = g_prog;
    void *env = (void *)(uintptr_t)p;
    size_t n = p->nin;
    cr_tape *t = s->t1;
    double g[NIN_MAX], y, jac[2 * NIN_MAX], ybar[2] = {0.75, -1.5};
    cr_var xs[NIN_MAX], ys[2];
    cr_tape_reset(t);
    TRYC(s->ctx, t, cr_tape_value_and_gradient(t, scalar_f, env, p->x, n, &y, g));
    put1(o, y);
    put(o, g, n);
    cr_tape_reset(t);
    TRYC(s->ctx, t, cr_tape_record(t, scalar_f, env, p->x, n, xs, ys, 2));
    put1(o, ys[0].v);
    put1(o, ys[1].v);
    TRYC(s->ctx, t, cr_tape_gradient(t, ys[1], xs, n, g));
    put(o, g, n);
    TRYC(s->ctx, t, cr_tape_vjp(t, ys, ybar, 2, xs, n, g));
    put(o, g, n);
    TRYC(s->ctx, t, cr_tape_jacobian(t, ys, 2, xs, n, jac));
    put(o, jac, 2 * n);
    if (s->t2 != NULL) {
        cr_tape *t2 = s->t2;
        double v[NIN_MAX], hv[NIN_MAX], H[NIN_MAX * NIN_MAX], ydot[2];
        for (size_t i = 0; i < n; i++)
            v[i] = 1.0 - 0.3 * (double)i;
        cr_tape_reset(t2);
        TRYC(s->ctx, t2, cr_tape_record(t2, scalar_f, env, p->x, n, xs, ys, 2));
        TRYC(s->ctx, t2, cr_tape_jvp(t2, xs, v, n, ys, 2, ydot));
        put(o, ydot, 2);
        TRYC(s->ctx, t2, cr_tape_hvp(t2, ys[0], xs, n, v, hv, g));
        put(o, g, n);
        put(o, hv, n);
        TRYC(s->ctx, t2, cr_tape_hessian(t2, ys[0], xs, n, H));
        put(o, H, n * n);
    }
    return run_prepared_scalar(s, o);
}

typedef struct arrs {
    double x[NIN_MAX], X[XL], M[9];
    cr_array Pa, Xa, Ma;
    const cr_array *in[3];
} arrs;

static void arrs_init(arrs *a, size_t nin)
{
    a->Pa = cr_array_vector(a->x, nin);
    a->Xa = cr_array_vector(a->X, XL);
    a->Ma = cr_array_matrix(a->M, 3, 3);
    a->in[0] = &a->Pa;
    a->in[1] = &a->Xa;
    a->in[2] = &a->Ma;
}

/* Output arrays of the inputs' shapes, over one buffer of 3 slots of 16 doubles. */
static void outs_init(double *buf, cr_array *a, cr_array **pa, size_t nin)
{
    a[0] = cr_array_vector(buf, nin);
    a[1] = cr_array_vector(buf + 16, XL);
    a[2] = cr_array_matrix(buf + 32, 3, 3);
    for (size_t i = 0; i < 3; i++)
        pa[i] = &a[i];
}

static void put_outs(outv *o, const double *buf, size_t nin)
{
    put(o, buf, nin);
    put(o, buf + 16, XL);
    put(o, buf + 32, 9);
}

static cr_status run_arrays(sstate *s, outv *o)
{
    const prog *p = g_prog;
    void *env = (void *)(uintptr_t)p;
    size_t nin = p->nin;
    arrs a;
    memcpy(a.x, p->x, sizeof a.x);
    memcpy(a.X, p->X, sizeof a.X);
    memcpy(a.M, p->M, sizeof a.M);
    arrs_init(&a, nin);
    double gb[48] = {0}, hb[48] = {0}, vb[48], y;
    cr_array ga[3], ha[3], va[3];
    cr_array *gp[3], *hp[3], *vp[3];
    outs_init(gb, ga, gp, nin);
    outs_init(hb, ha, hp, nin);
    outs_init(vb, va, vp, nin);
    for (size_t i = 0; i < 48; i++)
        vb[i] = 0.5 - 0.03 * (double)i;
    cr_tape *t = s->t1;
    cr_tape_reset(t);
    TRYC(s->ctx, t, cr_tape_value_and_gradient_arrays(t, array_f, env, a.in, 3, &y, gp));
    put1(o, y);
    put_outs(o, gb, nin);
    /* Record by hand and sweep. */
    cr_tape_reset(t);
    cr_avar as[3] = {cr_tape_array_input(t, &a.Pa), cr_tape_array_input(t, &a.Xa),
                     cr_tape_array_input(t, &a.Ma)};
    cr_var yv;
    TRYC(s->ctx, t, array_f(t, as, 3, &yv, env));
    put1(o, yv.v);
    TRYC(s->ctx, t, cr_tape_gradient_arrays(t, yv, NULL, 0, NULL, as, 3, gp));
    put_outs(o, gb, nin);
    if (s->t2 != NULL) {
        cr_tape *t2 = s->t2;
        cr_tape_reset(t2);
        cr_avar bs[3] = {cr_tape_array_input(t2, &a.Pa), cr_tape_array_input(t2, &a.Xa),
                         cr_tape_array_input(t2, &a.Ma)};
        TRYC(s->ctx, t2, array_f(t2, bs, 3, &yv, env));
        const cr_array *vc[3] = {vp[0], vp[1], vp[2]};
        double ydot;
        TRYC(s->ctx, t2, cr_tape_ajvp(t2, NULL, NULL, 0, bs, vc, 3, &yv, 1, &ydot, NULL, 0, NULL));
        put1(o, ydot);
        TRYC(s->ctx, t2, cr_tape_ahvp(t2, yv, NULL, 0, NULL, NULL, bs, 3, vc, hp));
        put_outs(o, hb, nin);
    }
    for (int k = 1; k <= 2; k++) {
        moved(p, k, a.x, a.X, a.M);
        size_t before = g_fault.count;
        TRYC(s->ctx, NULL, cr_prepared_value_and_gradient_arrays(s->pg, a.in, 3, &y, gp));
        put1(o, y);
        put_outs(o, gb, nin);
        if (s->ph != NULL) {
            const cr_array *vc[3] = {vp[0], vp[1], vp[2]};
            TRYC(s->ctx, NULL, cr_prepared_hvp_arrays(s->ph, a.in, 3, vc, hp, &y, gp));
            put1(o, y);
            put_outs(o, hb, nin);
            put_outs(o, gb, nin);
        }
        if (k == 2 && g_fault.count != before) {
            print_error("%s: a prepared object's second call made %zu allocations\n", g_where,
                        g_fault.count - before);
            fail();
        }
    }
    return CR_OK;
}

static cr_status run(sstate *s, outv *o)
{
    return g_prog->arrays ? run_arrays(s, o) : run_scalar(s, o);
}

/* ---- failure points ----------------------------------------------------------------------- */

static outv g_ref, g_got;

static void same_numbers(size_t n, const outv *got, const outv *want)
{
    if (got->n != want->n) {
        print_error("%s (%zu): %zu numbers instead of %zu\n", g_where, n, got->n, want->n);
        fail();
    }
    for (size_t i = 0; i < want->n; i++)
        if (!(got->v[i] == want->v[i]) && !(isnan(got->v[i]) && isnan(want->v[i]))) {
            print_error("%s (%zu): number %zu is %.17g instead of %.17g\n", g_where, n, i,
                        got->v[i], want->v[i]);
            fail();
        }
}

static void no_leak(const fault *fl)
{
    if (fl->live_blocks != 0 || fl->live_bytes != 0 || fl->bad_frees != 0) {
        print_error("%s: %zu blocks (%zu bytes) leaked, %zu bad frees\n", g_where, fl->live_blocks,
                    fl->live_bytes, fl->bad_frees);
        fail();
    }
}

static void expect_enomem(cr_status st)
{
    if (st != CR_ENOMEM) {
        print_error("%s: %s instead of CR_ENOMEM\n", g_where, cr_status_name(st));
        fail();
    }
}

static cr_ctx *new_ctx(fault *fl)
{
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = fault_realloc, .alloc_env = fl};
    cr_ctx *ctx = NULL;
    cr_status st = cr_ctx_new(&cp, &ctx);
    if (st != CR_OK)
        assert_null(ctx);
    return ctx;
}

/* The reference: no failure; the second run on the same objects gives the same numbers. */
static void reference(fault *fl)
{
    arm(fl, 0);
    snprintf(g_where, sizeof g_where, "program %#llx, reference", (unsigned long long)g_prog->seed);
    sstate s = {.ctx = new_ctx(fl)};
    assert_non_null(s.ctx);
    memset(&g_ref, 0, sizeof g_ref);
    cr_status st = setup(&s);
    if (st == CR_OK)
        st = run(&s, &g_ref);
    if (st != CR_OK)
        print_error("%s: %s (%s)\n", g_where, cr_status_name(st), cr_ctx_errmsg(s.ctx));
    assert_int_equal(st, CR_OK);
    memset(&g_got, 0, sizeof g_got);
    assert_int_equal(run(&s, &g_got), CR_OK);
    same_numbers(0, &g_got, &g_ref);
    teardown(&s);
    cr_ctx_free(s.ctx);
    no_leak(fl);
}

/* One run with the n-th allocation failing: the status of the first attempt; *fallback when
 * it succeeded although an allocation failed. */
static cr_status run_once(fault *fl, size_t n, bool *fallback)
{
    arm(fl, n);
    snprintf(g_where, sizeof g_where, "program %#llx, allocation %zu failing",
             (unsigned long long)g_prog->seed, n);
    sstate s = {.ctx = new_ctx(fl)};
    if (s.ctx == NULL)
        return CR_ENOMEM;
    memset(&g_got, 0, sizeof g_got);
    cr_status first = setup(&s);
    if (first != CR_OK) {
        expect_enomem(first);
        assert_int_equal(cr_ctx_errcode(s.ctx), CR_ENOMEM);
        fl->fail_at = 0;
        teardown(&s);
        cr_ctx_clear_error(s.ctx);
        assert_int_equal(setup(&s), CR_OK);
        assert_int_equal(run(&s, &g_got), CR_OK);
        same_numbers(n, &g_got, &g_ref);
    } else {
        first = run(&s, &g_got);
        if (first != CR_OK) {
            expect_enomem(first);
            /* The same objects redo the run once memory is back. */
            fl->fail_at = 0;
            cr_ctx_clear_error(s.ctx);
            memset(&g_got, 0, sizeof g_got);
            cr_status again = run(&s, &g_got);
            if (again != CR_OK)
                print_error("%s: run again: %s (%s)\n", g_where, cr_status_name(again),
                            cr_ctx_errmsg(s.ctx));
            assert_int_equal(again, CR_OK);
            same_numbers(n, &g_got, &g_ref);
        } else {
            *fallback = fl->failures != 0;
            same_numbers(n, &g_got, &g_ref);
            if (cr_ctx_errcode(s.ctx) != CR_OK) {
                print_error("%s: succeeded, but the context has %s (%s)\n", g_where,
                            cr_status_name(cr_ctx_errcode(s.ctx)), cr_ctx_errmsg(s.ctx));
                fail();
            }
        }
    }
    teardown(&s);
    cr_ctx_free(s.ctx);
    return first;
}

typedef struct counts {
    size_t programs, arrays, second, failures, fallbacks, ops[O_COUNT];
} counts;

static void one_program(fault *fl, uint64_t seed, counts *c)
{
    static prog p;
    gen(&p, seed);
    g_prog = &p;
    if (getenv("CR_RANDOM_DUMP") != NULL)
        dump(&p);
    reference(fl);
    size_t n;
    for (n = 1; n < 100000; n++) {
        bool fallback = false;
        cr_status st = run_once(fl, n, &fallback);
        no_leak(fl);
        if (st == CR_OK && !fallback)
            break;
        if (st == CR_OK) {
            c->fallbacks++;
            continue;
        }
        expect_enomem(st);
        assert_int_equal(fl->failures, 1);
        c->failures++;
    }
    assert_true(n < 100000);
    c->programs++;
    c->arrays += p.arrays;
    c->second += p.second;
    for (size_t i = 0; i < p.nops; i++)
        c->ops[p.code[i].op]++;
}

static void test_random_fault(void **state)
{
    (void)state;
    fault *fl = new_tracker();
    counts c = {0};
    uint64_t seed = replay_seed();
    if (seed != 0) {
        one_program(fl, seed, &c);
    } else {
        size_t np = programs(600);
        size_t from = programs_from();
        for (size_t i = from; i < from + np; i++) {
            uint64_t s = 0xfa017ull + i;
            one_program(fl, rnd_next(&s), &c);
        }
    }
    print_message("%zu programs (%zu of arrays, %zu with second order): %zu failing "
                  "allocations, %zu fallbacks\n",
                  c.programs, c.arrays, c.second, c.failures, c.fallbacks);
    for (size_t i = 0; i < O_COUNT; i++)
        assert_true(seed != 0 || c.ops[i] > 0); /* every operation ran */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_random_fault)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
