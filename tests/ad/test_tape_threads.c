/*
 * The AD engines under concurrency. Four threads at once record and differentiate seeded
 * programs, each on its own tapes (explicit and the thread's current tape, first order,
 * forward and second order), prepare and replay their own gradients, differentiate array
 * functions (a fused kernel, broadcasts, matmul, solve), use one engine built beforehand on
 * the main thread (a user rrule, an overlay, a zero-adjoint declaration; map and broadcast
 * of user functions through rrule_via_ad / frule_via_ad), dual numbers and rule lookups.
 * Every thread's numbers must equal, bit for bit, those of the same work done on the main
 * thread alone, which are checked against central differences of plain-C versions. Tape
 * ids must never repeat across threads, a variable handed to another thread's tape must
 * give CR_ETAPE, and the current tape must be the thread's own. Meant to run clean under
 * ThreadSanitizer (`make tsan CTEST_ARGS="-R threads"`).
 */
/* ctest-labels: thread */
#define _POSIX_C_SOURCE 200809L /* pthread_barrier_t */

#include <chainrules/kernel.h>
#include <pthread.h>

#include "test_random.h"
#include "test_util.h"
#include "test_wave.h"

#include "test_cube.h"

#define NTHREADS 4
#define NIN_MAX  4
#define NOPS_MAX 12
#define NREG     (NIN_MAX + NOPS_MAX)
#define NPTS     3   /* new points of each prepared replay */
#define NREPLAY  4   /* replays of each point */
#define NX       6   /* the array jobs' vector */
#define MAXOUT   320 /* numbers one job gives */
#define NFIRST   8   /* programs of the first-use test */
#define NROUNDS  24  /* rounds of the hand-over test */

static const char *const k_test = "build/tests/test_tape_threads";

/* ---- User functions: cube (a rule), wave (an overlay), frz (zero-adjoint) ---------------- */

static cr_status cube_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *fv, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_tangent d;
    cr_status st = cr_tangent_unthunk(dargs[1], &d);
    if (st != CR_OK)
        return st;
    double x = args[0].u.f64;
    *dy = cr_tangent_is_zero(d) ? cr_tangent_zero() : cr_tangent_f64(3.0 * x * x * d.u.f64);
    return cube_primal(arena, fv, args, nargs, y);
}

static double num(const cr_value *v)
{
    return v->kind == CR_KIND_F32 ? (double)v->u.f32 : v->u.f64;
}

/* frz(x) = x / (1 + x^2), declared zero-adjoint: a constant to the AD. */
static cr_status frz_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    double x = num(&args[0]);
    *out = cr_value_f64(x / (1 + x * x));
    return CR_OK;
}
static const cr_function frz_fn = {.name = "frz", .arity = 1, .primal = frz_primal};

/* A function with a primal and nothing the engine can differentiate. */
static const cr_function opaque_fn = {.name = "opaque", .arity = 1, .primal = wave_primal};

static double cube_d(double x)
{
    return x * x * x;
}
static double wave_d(double x)
{
    return x * sin(x);
}
static double frz_d(double x)
{
    return x / (1 + x * x);
}

/* The engine every thread shares: built here, on the main thread, then only read. */
static cr_status make_engine(cr_ctx *ctx, cr_engine **out)
{
    const cr_argspec s_f64[1] = {CR_ARG_F64};
    cr_engine *eng;
    cr_status st = cr_engine_new(ctx, NULL, &eng);
    if (st != CR_OK)
        return st;
    cr_rule_def d = {0};
    d.fn = &cube_fn;
    d.nargs = 1;
    d.args = s_f64;
    d.rrule = cube_rrule;
    d.frule = cube_frule;
    if ((st = cr_engine_from_rrule(eng, &d)) != CR_OK ||
        (st = cr_engine_overlay(eng, &wave_fn, wave_ad, 1, NULL)) != CR_OK ||
        (st = cr_engine_zero_adjoint(eng, &frz_fn)) != CR_OK) {
        cr_engine_free(eng);
        return st;
    }
    *out = eng;
    return CR_OK;
}

/* ---- Scalar programs ------------------------------------------------------------------ */

/* Each operation keeps its result bounded and smooth wherever its operands go. */
enum {
    O_MEAN,     /* (a + b) / 2: inline + and * */
    O_RATIO,    /* a b / (1 + b^2): inline * / + */
    O_DIV,      /* a / (1.5 + b^2) */
    O_NEG,      /* -(0.9 a): inline unary minus */
    O_TRIG,     /* sin a + cos(b) / 2: named operations */
    O_EXPLOG,   /* exp(sin a) - log(1 + b^2) */
    O_ROOT,     /* sqrt(1 + a^2) / 2 */
    O_ATAN2,    /* atan2(a, 2 + cos b): a row of two arguments through cr_tape_call */
    O_HYPOT2,   /* hypot(a, 1.2 + sin b) / 2: hypot's row */
    O_TANHASIN, /* asin(tanh(a) / 2) + b / 4: tanh's row */
    O_HYPOT3,   /* hypot(a, b, 1) / 2: kept as a pullback (GENERIC) */
    O_CUBE,     /* cube(tanh a) + b / 2: the user rule, kept as a pullback */
    O_WAVE,     /* wave(a) / 2: the overlay, recorded inline */
    O_FRZ,      /* a frz(b): the zero-adjoint function */
    O_N
};

struct prog {
    uint64_t seed;
    size_t nin, nops;
    struct {
        uint8_t op, a, b;
    } code[NOPS_MAX];
    double x[NIN_MAX], v[NIN_MAX], ybar[2];
    double px[NPTS][NIN_MAX], pv[NPTS][NIN_MAX]; /* the prepared replays' points */
};
typedef struct prog prog;

/* user: the engine's user functions may be called (cube, wave, frz). */
static void gen_prog(prog *p, uint64_t seed, bool user)
{
    uint64_t s = seed;
    memset(p, 0, sizeof *p);
    p->seed = seed;
    bool so = rnd_below(&s, 2) == 0; /* only what cr_prepare_hvp takes */
    size_t nops = user ? O_N : O_HYPOT3 + 1;
    p->nin = 1 + rnd_below(&s, NIN_MAX);
    p->nops = 2 + rnd_below(&s, NOPS_MAX - 1);
    for (size_t i = 0; i < p->nops; i++) {
        size_t op;
        do
            op = rnd_below(&s, nops);
        while (so && (op == O_HYPOT3 || op == O_CUBE));
        p->code[i].op = (uint8_t)op;
        p->code[i].a = (uint8_t)rnd_below(&s, p->nin + i);
        p->code[i].b = (uint8_t)rnd_below(&s, p->nin + i);
    }
    for (size_t j = 0; j < p->nin; j++) {
        p->x[j] = rnd_range(&s, -1.5, 1.5);
        p->v[j] = rnd_range(&s, -1, 1);
        for (size_t k = 0; k < NPTS; k++) {
            p->px[k][j] = p->x[j] + rnd_range(&s, -0.7, 0.7);
            p->pv[k][j] = rnd_range(&s, -1, 1);
        }
    }
    p->ybar[0] = rnd_range(&s, -2, 2);
    p->ybar[1] = rnd_range(&s, -2, 2);
}

/* The plain-C version. fz: the zero-adjoint results, one per instruction, computed when
 * store and read back otherwise (frozen for the differences). y: the two outputs. */
static void peval(const prog *p, const double *x, double *fz, bool store, double *y)
{
    double r[NREG];
    memcpy(r, x, p->nin * sizeof *x);
    for (size_t i = 0; i < p->nops; i++) {
        double a = r[p->code[i].a], b = r[p->code[i].b], o = 0;
        switch (p->code[i].op) {
        case O_MEAN:
            o = (a + b) * 0.5;
            break;
        case O_RATIO:
            o = a * b / (1 + b * b);
            break;
        case O_DIV:
            o = a / (1.5 + b * b);
            break;
        case O_NEG:
            o = -(a * 0.9);
            break;
        case O_TRIG:
            o = sin(a) + 0.5 * cos(b);
            break;
        case O_EXPLOG:
            o = exp(sin(a)) - log(1 + b * b);
            break;
        case O_ROOT:
            o = 0.5 * sqrt(1 + a * a);
            break;
        case O_ATAN2:
            o = atan2(a, 2 + cos(b));
            break;
        case O_HYPOT2:
            o = 0.5 * hypot(a, 1.2 + sin(b));
            break;
        case O_TANHASIN:
            o = asin(0.5 * tanh(a)) + 0.25 * b;
            break;
        case O_HYPOT3:
            o = 0.5 * sqrt(a * a + b * b + 1);
            break;
        case O_CUBE:
            o = cube_d(tanh(a)) + 0.5 * b;
            break;
        case O_WAVE:
            o = 0.5 * wave_d(a);
            break;
        case O_FRZ:
            if (store)
                fz[i] = frz_d(b);
            o = a * fz[i];
            break;
        default:
            break;
        }
        r[p->nin + i] = o;
    }
    size_t last = p->nin + p->nops - 1;
    y[0] = r[last];
    y[1] = r[last - 1];
}

/* The same program on a tape (NULL: the thread's current tape); r[0..nin) are the inputs. */
static void teval(cr_tape *t, const prog *p, cr_var *r)
{
    const cr_value cube = cr_value_function(&cube_fn, NULL);
    const cr_value wave = cr_value_function(&wave_fn, NULL);
    const cr_value frz = cr_value_function(&frz_fn, NULL);
    const cr_var half = cr_const(0.5), one = cr_const(1);
    for (size_t i = 0; i < p->nops; i++) {
        cr_var a = r[p->code[i].a], b = r[p->code[i].b], o;
        switch (p->code[i].op) {
        case O_MEAN:
            o = cr_mul(t, cr_add(t, a, b), half);
            break;
        case O_RATIO:
            o = cr_div(t, cr_mul(t, a, b), cr_add(t, one, cr_mul(t, b, b)));
            break;
        case O_DIV:
            o = cr_div(t, a, cr_add(t, cr_const(1.5), cr_mul(t, b, b)));
            break;
        case O_NEG:
            o = cr_neg(t, cr_mul(t, a, cr_const(0.9)));
            break;
        case O_TRIG:
            o = cr_add(t, cr_sin(t, a), cr_mul(t, half, cr_cos(t, b)));
            break;
        case O_EXPLOG:
            o = cr_sub(t, cr_exp(t, cr_sin(t, a)), cr_log(t, cr_add(t, one, cr_mul(t, b, b))));
            break;
        case O_ROOT:
            o = cr_mul(t, half, cr_sqrt(t, cr_add(t, one, cr_mul(t, a, a))));
            break;
        case O_ATAN2: {
            cr_var args[2] = {a, cr_add(t, cr_const(2), cr_cos(t, b))};
            o = cr_tape_call1(t, &cr_fn_atan2, args, 2);
            break;
        }
        case O_HYPOT2: {
            cr_var args[2] = {a, cr_add(t, cr_const(1.2), cr_sin(t, b))};
            o = cr_mul(t, half, cr_tape_call1(t, &cr_fn_hypot, args, 2));
            break;
        }
        case O_TANHASIN:
            o = cr_add(t, cr_asin(t, cr_mul(t, half, cr_tape_call1(t, &cr_fn_tanh, &a, 1))),
                       cr_mul(t, cr_const(0.25), b));
            break;
        case O_HYPOT3: {
            cr_var args[3] = {a, b, one};
            o = cr_mul(t, half, cr_tape_call1(t, &cr_fn_hypot, args, 3));
            break;
        }
        case O_CUBE: {
            cr_var th = cr_tape_call1(t, &cr_fn_tanh, &a, 1);
            o = cr_add(t, cr_tape_call1(t, &cube, &th, 1), cr_mul(t, half, b));
            break;
        }
        case O_WAVE:
            o = cr_mul(t, half, cr_tape_call1(t, &wave, &a, 1));
            break;
        case O_FRZ:
            o = cr_mul(t, a, cr_tape_call1(t, &frz, &b, 1));
            break;
        default:
            o = cr_const(NAN);
            break;
        }
        r[p->nin + i] = o;
    }
}

/* A cr_ad_fn: y[0] the last register, y[1] (m = 2) the one before. */
static cr_status f_tape(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    const prog *p = env;
    cr_var r[NREG];
    memcpy(r, x, n * sizeof *x);
    teval(t, p, r);
    size_t last = p->nin + p->nops - 1;
    y[0] = r[last];
    if (m > 1)
        y[1] = r[last - 1];
    return cr_tape_status(t);
}

/* The same program on dual numbers: rows, rules and user functions through cr_dual_call
 * with the engine's configuration (frules, frule_via_ad of the overlay, zero-adjoint). */
typedef struct denv {
    const prog *p;
    const cr_config *cfg;
    cr_arena *arena;
} denv;

static cr_status op_dual(const denv *e, uint8_t op, cr_dual a, cr_dual b, cr_dual *o)
{
    const cr_value cube = cr_value_function(&cube_fn, NULL);
    const cr_value wave = cr_value_function(&wave_fn, NULL);
    const cr_value frz = cr_value_function(&frz_fn, NULL);
    const cr_dual half = cr_dual_const(0.5), one = cr_dual_const(1);
    cr_dual args[3], h;
    cr_status st = CR_OK;
    switch (op) {
    case O_MEAN:
        *o = cr_dual_mul(cr_dual_add(a, b), half);
        break;
    case O_RATIO:
        *o = cr_dual_div(cr_dual_mul(a, b), cr_dual_add(one, cr_dual_mul(b, b)));
        break;
    case O_DIV:
        *o = cr_dual_div(a, cr_dual_add(cr_dual_const(1.5), cr_dual_mul(b, b)));
        break;
    case O_NEG:
        *o = cr_dual_neg(cr_dual_mul(a, cr_dual_const(0.9)));
        break;
    case O_TRIG:
        *o = cr_dual_add(cr_dual_sin(a), cr_dual_mul(half, cr_dual_cos(b)));
        break;
    case O_EXPLOG:
        *o = cr_dual_sub(cr_dual_exp(cr_dual_sin(a)),
                         cr_dual_log(cr_dual_add(one, cr_dual_mul(b, b))));
        break;
    case O_ROOT:
        *o = cr_dual_mul(half, cr_dual_sqrt(cr_dual_add(one, cr_dual_mul(a, a))));
        break;
    case O_ATAN2:
        args[0] = a;
        args[1] = cr_dual_add(cr_dual_const(2), cr_dual_cos(b));
        st = cr_dual_call(e->cfg, e->arena, &cr_fn_atan2, args, 2, o, 1);
        break;
    case O_HYPOT2:
        args[0] = a;
        args[1] = cr_dual_add(cr_dual_const(1.2), cr_dual_sin(b));
        st = cr_dual_call(e->cfg, e->arena, &cr_fn_hypot, args, 2, &h, 1);
        *o = cr_dual_mul(half, h);
        break;
    case O_TANHASIN:
        st = cr_dual_call(e->cfg, e->arena, &cr_fn_tanh, &a, 1, &h, 1);
        *o = cr_dual_add(cr_dual_asin(cr_dual_mul(half, h)), cr_dual_mul(cr_dual_const(0.25), b));
        break;
    case O_HYPOT3:
        args[0] = a;
        args[1] = b;
        args[2] = one;
        st = cr_dual_call(e->cfg, e->arena, &cr_fn_hypot, args, 3, &h, 1);
        *o = cr_dual_mul(half, h);
        break;
    case O_CUBE:
        st = cr_dual_call(e->cfg, e->arena, &cr_fn_tanh, &a, 1, &args[0], 1);
        if (st == CR_OK)
            st = cr_dual_call(e->cfg, e->arena, &cube, &args[0], 1, &h, 1);
        *o = cr_dual_add(h, cr_dual_mul(half, b));
        break;
    case O_WAVE:
        st = cr_dual_call(e->cfg, e->arena, &wave, &a, 1, &h, 1);
        *o = cr_dual_mul(half, h);
        break;
    case O_FRZ:
        st = cr_dual_call(e->cfg, e->arena, &frz, &b, 1, &h, 1);
        *o = cr_dual_mul(a, h);
        break;
    default:
        st = CR_EINVAL;
        break;
    }
    return st;
}

static cr_status f_dual(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *env)
{
    const denv *e = env;
    const prog *p = e->p;
    cr_dual r[NREG];
    memcpy(r, x, n * sizeof *x);
    for (size_t i = 0; i < p->nops; i++) {
        cr_status st = op_dual(e, p->code[i].op, r[p->code[i].a], r[p->code[i].b], &r[p->nin + i]);
        if (st != CR_OK)
            return st;
    }
    size_t last = p->nin + p->nops - 1;
    y[0] = r[last];
    if (m > 1)
        y[1] = r[last - 1];
    return CR_OK;
}

/* ---- References: central differences of the plain-C versions -------------------------- */

#define FD_H  1e-3
#define FD_HV 2e-3 /* the outer differences of H v */

/* The 2 x n Jacobian of the outputs at x by fourth-order differences, with the zero-adjoint
 * results frozen at x, and the differences' error estimate (the same stencil at 2h). */
static void fd_jac(const prog *p, const double *x, double *J, double *E)
{
    double fz[NOPS_MAX], y[2], xk[NIN_MAX];
    peval(p, x, fz, true, y);
    for (size_t j = 0; j < p->nin; j++) {
        double d[2][2] = {{0, 0}, {0, 0}};
        for (int s = 0; s < 2; s++) {
            double h = FD_H * (s + 1);
            for (int k = 0; k < 4; k++) {
                memcpy(xk, x, p->nin * sizeof *x);
                xk[j] += k_fd_o[k] * h;
                peval(p, xk, fz, false, y);
                d[s][0] += k_fd_c[k] * y[0] / h;
                d[s][1] += k_fd_c[k] * y[1] / h;
            }
        }
        for (int o = 0; o < 2; o++) {
            J[(size_t)o * p->nin + j] = d[0][o];
            E[(size_t)o * p->nin + j] = fabs(d[0][o] - d[1][o]);
        }
    }
}

/* H v of output 0 at x: fourth-order differences along v of the fourth-order differences
 * of the gradient (zero-adjoint results frozen at x), and their error estimate (the same at
 * twice the steps). */
static void fd_hv(const prog *p, const double *x, const double *v, double *hv, double *err)
{
    double fz[NOPS_MAX], y[2], xk[NIN_MAX];
    peval(p, x, fz, true, y);
    for (size_t i = 0; i < p->nin; i++) {
        double d[2] = {0, 0};
        for (int s = 0; s < 2; s++) {
            double h = FD_H * (s + 1), hv_ = FD_HV * (s + 1);
            for (int kv = 0; kv < 4; kv++)
                for (int ki = 0; ki < 4; ki++) {
                    for (size_t j = 0; j < p->nin; j++)
                        xk[j] = x[j] + k_fd_o[kv] * hv_ * v[j] + (j == i ? k_fd_o[ki] * h : 0);
                    peval(p, xk, fz, false, y);
                    d[s] += k_fd_c[kv] * k_fd_c[ki] * y[0];
                }
            d[s] /= h * hv_;
        }
        hv[i] = d[0];
        err[i] = fabs(d[0] - d[1]);
    }
}

/* ---- Array jobs ----------------------------------------------------------------------- */

/* y = c0 sum(pair(x_i, x_i+1)) [a fused kernel] + c1 sum(sin.(x .* c6)) [broadcasts]
 *   + c2 sum(M x[0:3]) [matmul] + c3 sum(M \ x[0:3]) [solve] + c4 sum(map(wave, x))
 *   + c5 sum(cube.(x)) [broadcast of the user rule], the terms of mask. M is 3 x 3. */
typedef struct aprog {
    uint64_t seed;
    unsigned mask;
    double c[7];
    double X[NX], M[9];
    double pX[NPTS][NX], pM[NPTS][9]; /* the prepared replays' points */
    double W[NX], V[NX];              /* cotangent and tangent of the direct rule calls */
} aprog;

#define KPAIR(x) \
    cr_k_add(cr_k_sin(cr_k_mul(x[0], x[1])), cr_k_div(cr_k_sq(x[0]), cr_k_add(1.5, cr_k_sq(x[1]))))
CR_KERNEL(k_pair, 2, KPAIR);

static void gen_matrix(uint64_t *s, double *M)
{
    for (size_t i = 0; i < 9; i++)
        M[i] = (i % 4 == 0 ? 3.0 : 0.0) + rnd_range(s, -0.6, 0.6);
}

static void gen_aprog(aprog *a, uint64_t seed)
{
    uint64_t s = seed;
    memset(a, 0, sizeof *a);
    a->seed = seed;
    a->mask = (unsigned)rnd_below(&s, 64) | 1u << rnd_below(&s, 6);
    for (size_t i = 0; i < 7; i++)
        a->c[i] = rnd_range(&s, -1.5, 1.5);
    for (size_t i = 0; i < NX; i++) {
        a->X[i] = rnd_range(&s, -1.5, 1.5);
        a->W[i] = rnd_range(&s, -1, 1);
        a->V[i] = rnd_range(&s, -1, 1);
        for (size_t k = 0; k < NPTS; k++)
            a->pX[k][i] = a->X[i] + rnd_range(&s, -0.5, 0.5);
    }
    gen_matrix(&s, a->M);
    for (size_t k = 0; k < NPTS; k++)
        gen_matrix(&s, a->pM[k]);
}

/* x = M \ b of a 3 x 3 row-major M, by Gaussian elimination with partial pivoting. */
static void solve3(const double *M, const double *b, double *x)
{
    double A[3][4];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++)
            A[i][j] = M[3 * i + j];
        A[i][3] = b[i];
    }
    for (int k = 0; k < 3; k++) {
        int piv = k;
        for (int i = k + 1; i < 3; i++)
            if (fabs(A[i][k]) > fabs(A[piv][k]))
                piv = i;
        for (int j = 0; j < 4; j++) {
            double tmp = A[k][j];
            A[k][j] = A[piv][j];
            A[piv][j] = tmp;
        }
        for (int i = k + 1; i < 3; i++) {
            double f = A[i][k] / A[k][k];
            for (int j = k; j < 4; j++)
                A[i][j] -= f * A[k][j];
        }
    }
    for (int i = 2; i >= 0; i--) {
        double s = A[i][3];
        for (int j = i + 1; j < 3; j++)
            s -= A[i][j] * x[j];
        x[i] = s / A[i][i];
    }
}

static double pa_eval(const aprog *a, const double *X, const double *M)
{
    double y = 0;
    if (a->mask & 1u) {
        double s = 0;
        for (size_t i = 0; i + 1 < NX; i++)
            s += sin(X[i] * X[i + 1]) + X[i] * X[i] / (1.5 + X[i + 1] * X[i + 1]);
        y += a->c[0] * s;
    }
    if (a->mask & 2u) {
        double s = 0;
        for (size_t i = 0; i < NX; i++)
            s += sin(X[i] * a->c[6]);
        y += a->c[1] * s;
    }
    if (a->mask & 4u) {
        double s = 0;
        for (size_t i = 0; i < 9; i++)
            s += M[i] * X[i % 3];
        y += a->c[2] * s;
    }
    if (a->mask & 8u) {
        double z[3];
        solve3(M, X, z);
        y += a->c[3] * (z[0] + z[1] + z[2]);
    }
    if (a->mask & 16u) {
        double s = 0;
        for (size_t i = 0; i < NX; i++)
            s += wave_d(X[i]);
        y += a->c[4] * s;
    }
    if (a->mask & 32u) {
        double s = 0;
        for (size_t i = 0; i < NX; i++)
            s += cube_d(X[i]);
        y += a->c[5] * s;
    }
    return y;
}

static cr_var term(cr_tape *t, cr_var acc, double c, cr_var v)
{
    return cr_add(t, acc, cr_mul(t, cr_const(c), v));
}

static cr_status f_arr(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    const aprog *a = env;
    const cr_value wave = cr_value_function(&wave_fn, NULL);
    const cr_value cube = cr_value_function(&cube_fn, NULL);
    cr_avar X = xs[0], M = xs[1];
    cr_var s = cr_const(0);
    if (a->mask & 1u) {
        cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
        s = term(t, s, a->c[0], cr_av_kernel_sum(t, &k_pair, in, 2, NX - 1));
    }
    if (a->mask & 2u) {
        cr_avar xc =
            cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_var(cr_const(a->c[6])));
        s = term(t, s, a->c[1], cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(xc))));
    }
    if (a->mask & 12u) {
        cr_targ mx[2] = {cr_targ_arr(M), cr_targ_arr(cr_av_slice(t, X, 0, 3))};
        if (a->mask & 4u)
            s = term(t, s, a->c[2], cr_av_sum(t, cr_av_matmul(t, M, mx[1].u.a)));
        if (a->mask & 8u)
            s = term(t, s, a->c[3], cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_solve, mx, 2)));
    }
    if (a->mask & 16u) {
        cr_targ m[2] = {cr_targ_value(wave), cr_targ_arr(X)};
        s = term(t, s, a->c[4], cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_map, m, 2)));
    }
    if (a->mask & 32u) {
        cr_targ m[2] = {cr_targ_value(cube), cr_targ_arr(X)};
        s = term(t, s, a->c[5], cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_broadcast, m, 2)));
    }
    *y = s;
    return cr_tape_status(t);
}

/* The gradient of pa_eval with respect to (X, M) by fourth-order differences. */
static void fd_arr(const aprog *a, const double *X, const double *M, double *g, double *err)
{
    double Xk[NX], Mk[9];
    for (size_t j = 0; j < NX + 9; j++) {
        double d[2] = {0, 0};
        for (int s = 0; s < 2; s++) {
            double h = FD_H * (s + 1);
            for (int k = 0; k < 4; k++) {
                memcpy(Xk, X, sizeof Xk);
                memcpy(Mk, M, sizeof Mk);
                if (j < NX)
                    Xk[j] += k_fd_o[k] * h;
                else
                    Mk[j - NX] += k_fd_o[k] * h;
                d[s] += k_fd_c[k] * pa_eval(a, Xk, Mk) / h;
            }
        }
        g[j] = d[0];
        err[j] = fabs(d[0] - d[1]);
    }
}

/* The derivative of a scalar function at each element of X, by fourth-order differences. */
static void fd_elem(double (*f)(double), const double *X, double *d, double *err)
{
    for (size_t i = 0; i < NX; i++) {
        double e[2] = {0, 0};
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < 4; k++)
                e[s] += k_fd_c[k] * f(X[i] + k_fd_o[k] * FD_H * (s + 1)) / (FD_H * (s + 1));
        d[i] = e[0];
        err[i] = fabs(e[0] - e[1]);
    }
}

/* ---- A worker: one thread's context, arena and tapes ------------------------------------ */

/* The numbers of one job, compared bit for bit. */
typedef struct sink {
    size_t n;
    bool over;
    double v[MAXOUT];
} sink;

static void put(sink *s, double x)
{
    if (s->n < MAXOUT)
        s->v[s->n++] = x;
    else
        s->over = true;
}

static void putv(sink *s, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put(s, x[i]);
}

static void put_st(sink *s, cr_status st)
{
    put(s, (double)st);
}

typedef struct worker {
    int id;
    const cr_engine *eng; /* shared, read only; NULL: the built-in rules */
    bool fd;              /* check against differences (the main thread's reference run) */
    cr_ctx *ctx;
    cr_arena *arena;
    cr_tape *t1;   /* first order, reused with resets */
    cr_tape *tc;   /* recorded through the thread's current tape */
    cr_tape *ts;   /* second order */
    uint32_t *ids; /* the recording ids seen */
    size_t nids, capids;
    long jobs;
    size_t compared; /* numbers compared bit for bit */
    ck c;
} worker;

static void log_id(worker *w, cr_var x)
{
    if (w->nids < w->capids && !cr_var_is_const(x))
        w->ids[w->nids++] = x.tape;
}

static cr_status worker_open(worker *w, int id, const cr_engine *eng, bool fd, size_t capids)
{
    memset(w, 0, sizeof *w);
    w->id = id;
    w->eng = eng;
    w->fd = fd;
    w->c.test = k_test;
    w->capids = capids;
    w->ids = malloc(capids * sizeof *w->ids);
    if (w->ids == NULL)
        return CR_ENOMEM;
    cr_status st = cr_ctx_new(NULL, &w->ctx);
    if (st != CR_OK)
        return st;
    cr_ctx_set_debug(w->ctx, id % 2 == 1); /* half of them with the debug wrappers */
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    if ((st = cr_arena_new(w->ctx, NULL, &w->arena)) != CR_OK ||
        (st = cr_tape_new(w->ctx, &tp, &w->t1)) != CR_OK ||
        (st = cr_tape_new(w->ctx, &tp, &w->tc)) != CR_OK)
        return st;
    tp.flags = CR_TAPE_SECOND_ORDER;
    return cr_tape_new(w->ctx, &tp, &w->ts);
}

static void worker_close(worker *w)
{
    cr_tape_free(w->t1);
    cr_tape_free(w->tc);
    cr_tape_free(w->ts);
    cr_arena_free(w->arena);
    cr_ctx_free(w->ctx);
    free(w->ids);
}

/* ---- One scalar program in every mode ---------------------------------------------------- */

static void run_scalar(worker *w, const prog *p, sink *s)
{
    ck *c = &w->c;
    c->p = p;
    c->seed = p->seed;
    const size_t n = p->nin;
    double y, y2[2], g[NIN_MAX], g1[NIN_MAX], gc[NIN_MAX], xb[NIN_MAX], jac[2 * NIN_MAX];
    double yd[2], hv[NIN_MAX], g2[NIN_MAX], J[2 * NIN_MAX], E[2 * NIN_MAX];
    cr_var xs[NIN_MAX], ys[2];
    cr_status st;
    if (w->fd)
        fd_jac(p, p->x, J, E);

    /* value_and_gradient, record, gradient, vjp and Jacobian on an explicit tape */
    c->mode = "value_and_gradient";
    st = cr_tape_value_and_gradient(w->t1, f_tape, (void *)(uintptr_t)p, p->x, n, &y, g);
    ck_status(c, "cr_tape_value_and_gradient", st, cr_tape_errmsg(w->t1));
    put_st(s, st);
    put(s, y);
    putv(s, g, n);
    c->mode = "record";
    st = cr_tape_record(w->t1, f_tape, (void *)(uintptr_t)p, p->x, n, xs, ys, 2);
    ck_status(c, "cr_tape_record", st, cr_tape_errmsg(w->t1));
    log_id(w, xs[0]);
    put(s, ys[0].v);
    put(s, ys[1].v);
    put_st(s, cr_tape_gradient(w->t1, ys[1], xs, n, g1));
    putv(s, g1, n);
    put_st(s, cr_tape_vjp(w->t1, ys, p->ybar, 2, xs, n, xb));
    putv(s, xb, n);
    put_st(s, cr_tape_jacobian(w->t1, ys, 2, xs, n, jac));
    putv(s, jac, 2 * n);
    if (ys[0].v != y || memcmp(jac, g, n * sizeof *g) != 0)
        ck_fail(c, "the Jacobian's first row or value differ from value_and_gradient's");
    if (w->fd) {
        double fz[NOPS_MAX], want[2], vj[NIN_MAX] = {0}, ve[NIN_MAX] = {0};
        peval(p, p->x, fz, true, want);
        cmp_vec(c, "value", &y, want, NULL, 1, 1e-12);
        cmp_vec(c, "gradient", g, J, E, n, 1e-7);
        cmp_vec(c, "gradient of y1", g1, J + n, E + n, n, 1e-7);
        cmp_vec(c, "jacobian", jac, J, E, 2 * n, 1e-7);
        for (size_t j = 0; j < n; j++)
            for (int o = 0; o < 2; o++) {
                vj[j] += p->ybar[o] * J[(size_t)o * n + j];
                ve[j] += fabs(p->ybar[o]) * E[(size_t)o * n + j];
            }
        cmp_vec(c, "vjp", xb, vj, ve, n, 1e-7);
    }

    /* the same program on the thread's current tape (operations given NULL) */
    c->mode = "current tape";
    cr_tape *prev = cr_tape_set_current(w->tc);
    if (prev != NULL)
        ck_fail(c, "the thread's current tape was not NULL between jobs");
    cr_tape_reset(w->tc);
    cr_var r[NREG];
    st = cr_tape_inputs(NULL, p->x, n, r);
    teval(NULL, p, r);
    log_id(w, r[0]);
    if (cr_tape_current() != w->tc)
        ck_fail(c, "cr_tape_current() is not the tape this thread set");
    cr_tape_set_current(prev);
    ck_status(c, "recording on the current tape", cr_tape_status(w->tc), cr_tape_errmsg(w->tc));
    st = cr_tape_gradient(w->tc, r[p->nin + p->nops - 1], r, n, gc);
    put_st(s, st);
    if (st != CR_OK || memcmp(gc, g, n * sizeof *g) != 0)
        ck_fail(c, "the current tape's gradient differs from the explicit tape's");

    /* jvp on a forward tape made and released for this program */
    c->mode = "jvp";
    cr_tape *tf = NULL;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_FORWARD, .engine = w->eng};
    st = cr_tape_new(w->ctx, &tp, &tf);
    if (st == CR_OK)
        st = cr_tape_record(tf, f_tape, (void *)(uintptr_t)p, p->x, n, xs, ys, 2);
    if (st == CR_OK) {
        log_id(w, xs[0]);
        st = cr_tape_jvp(tf, xs, p->v, n, ys, 2, yd);
    }
    ck_status(c, "cr_tape_jvp", st, cr_ctx_errmsg(w->ctx));
    cr_tape_free(tf);
    put_st(s, st);
    putv(s, yd, 2);
    if (w->fd && st == CR_OK) {
        double jv[2] = {0, 0}, je[2] = {0, 0};
        for (int o = 0; o < 2; o++)
            for (size_t j = 0; j < n; j++) {
                jv[o] += J[(size_t)o * n + j] * p->v[j];
                je[o] += E[(size_t)o * n + j] * fabs(p->v[j]);
            }
        cmp_vec(c, "jvp", yd, jv, je, 2, 1e-7);
    }

    /* H v on the second-order tape (rules kept as pullbacks: differences of their partials) */
    c->mode = "hvp";
    st = cr_tape_record(w->ts, f_tape, (void *)(uintptr_t)p, p->x, n, xs, ys, 1);
    put_st(s, st);
    ck_status(c, "record (second order)", st, cr_tape_errmsg(w->ts));
    log_id(w, xs[0]);
    st = cr_tape_hvp(w->ts, ys[0], xs, n, p->v, hv, g2);
    ck_status(c, "cr_tape_hvp", st, cr_tape_errmsg(w->ts));
    put_st(s, st);
    putv(s, hv, n);
    putv(s, g2, n);
    if (w->fd) {
        double want[NIN_MAX], e[NIN_MAX];
        fd_hv(p, p->x, p->v, want, e);
        cmp_vec(c, "hvp", hv, want, e, n, 1e-7);
        cmp_vec(c, "hvp gradient", g2, J, E, n, 1e-7);
    }

    /* dual numbers: the Jacobian, rules through cr_dual_call */
    c->mode = "dual";
    denv de = {p, cr_engine_config(w->eng), w->arena};
    st = cr_dual_jacobian(f_dual, &de, p->x, n, 2, w->arena, y2, jac);
    ck_status(c, "cr_dual_jacobian", st, cr_ctx_errmsg(w->ctx));
    put_st(s, st);
    putv(s, y2, 2);
    putv(s, jac, 2 * n);
    if (w->fd && st == CR_OK)
        cmp_vec(c, "dual jacobian", jac, J, E, 2 * n, 1e-7);
    cr_arena_reset(w->arena);

    /* a prepared gradient and a prepared H v of the thread's own, replayed at new points */
    for (int hvp = 0; hvp < 2; hvp++) {
        c->mode = hvp ? "prepared hvp" : "prepared gradient";
        cr_prepared *pp = NULL;
        st = hvp ? cr_prepare_hvp(w->ctx, w->eng, f_tape, (void *)(uintptr_t)p, p->x, n, &pp)
                 : cr_prepare_gradient(w->ctx, w->eng, f_tape, (void *)(uintptr_t)p, p->x, n, &pp);
        put_st(s, st);
        ck_status(c, "prepare", st, cr_ctx_errmsg(w->ctx));
        if (st != CR_OK)
            continue;
        double first[NPTS][1 + 2 * NIN_MAX];
        for (int rep = 0; rep < NREPLAY; rep++)
            for (size_t k = 0; k < NPTS; k++) {
                double out[1 + 2 * NIN_MAX] = {0};
                st = hvp ? cr_prepared_hvp(pp, p->px[k], n, p->pv[k], out + 1 + n, out, out + 1)
                         : cr_prepared_value_and_gradient(pp, p->px[k], n, out, out + 1);
                if (st != CR_OK) {
                    ck_status(c, "replay", st, cr_ctx_errmsg(w->ctx));
                    break;
                }
                if (rep == 0) {
                    memcpy(first[k], out, sizeof out);
                    putv(s, out, 1 + (hvp ? 2 : 1) * n);
                } else if (memcmp(first[k], out, sizeof out) != 0) {
                    ck_fail(c, "replay %d of point %zu differs from the first", rep, k);
                }
            }
        cr_prepared_free(pp);
        if (!w->fd)
            continue;
        for (size_t k = 0; k < NPTS; k++) {
            double fz[NOPS_MAX], want[2], Jk[2 * NIN_MAX], Ek[2 * NIN_MAX], hw[NIN_MAX];
            peval(p, p->px[k], fz, true, want);
            fd_jac(p, p->px[k], Jk, Ek);
            cmp_vec(c, "replayed value", first[k], want, NULL, 1, 1e-12);
            cmp_vec(c, "replayed gradient", first[k] + 1, Jk, Ek, n, 1e-7);
            if (hvp) {
                fd_hv(p, p->px[k], p->pv[k], hw, Ek);
                cmp_vec(c, "replayed hvp", first[k] + 1 + n, hw, Ek, n, 1e-7);
            }
        }
    }
}

/* ---- One array job --------------------------------------------------------------------- */

static void arr_elems(const cr_array *a, double *out)
{
    for (size_t i = 0; i < NX; i++)
        out[i] = creal(cr_array_get_linear(a, i));
}

/* map(wave, X) and broadcast(cube, X) called directly with the engine's configuration:
 * rrule_via_ad and its pullback, frule_via_ad, the user rule through rrule_via_ad. */
static void run_rules(worker *w, const aprog *a, sink *s)
{
    ck *c = &w->c;
    c->mode = "rules via ad";
    const cr_config *cfg = cr_engine_config(w->eng);
    const cr_value wave = cr_value_function(&wave_fn, NULL);
    const cr_value cube = cr_value_function(&cube_fn, NULL);
    double Xd[NX], Wd[NX], Vd[NX], out[NX];
    memcpy(Xd, a->X, sizeof Xd);
    memcpy(Wd, a->W, sizeof Wd);
    memcpy(Vd, a->V, sizeof Vd);
    cr_array Xa = cr_array_vector(Xd, NX), Wa = cr_array_vector(Wd, NX);
    cr_array Va = cr_array_vector(Vd, NX);
    const cr_value fs[2] = {wave, cube};
    double d[2][NX], err[2][NX];
    if (w->fd) {
        fd_elem(wave_d, a->X, d[0], err[0]);
        fd_elem(cube_d, a->X, d[1], err[1]);
    }
    const cr_value *rules[2] = {&cr_fn_map, &cr_fn_broadcast};
    for (int k = 0; k < 2; k++) {
        cr_value args[2] = {fs[k], cr_value_array(&Xa)}, yv;
        cr_pullback pb;
        cr_tangent wt = cr_tangent_array(&Wa), dx[3], dxa;
        cr_status st = cr_rrule(cfg, w->arena, rules[k], args, 2, &yv, &pb);
        if (st == CR_OK)
            st = cr_pullback_call(w->arena, &pb, &wt, dx, 3);
        if (st == CR_OK)
            st = cr_tangent_unthunk(dx[2], &dxa);
        ck_status(c, "rrule of map / broadcast of a user function", st, cr_ctx_errmsg(w->ctx));
        put_st(s, st);
        if (st != CR_OK || yv.kind != CR_KIND_ARRAY || dxa.tag != CR_TAN_ARRAY) {
            ck_fail(c, "rule %d: no array result or cotangent", k);
            continue;
        }
        arr_elems(yv.u.arr, out);
        putv(s, out, NX);
        if (w->fd) {
            double want[NX];
            for (size_t i = 0; i < NX; i++)
                want[i] = k == 0 ? wave_d(a->X[i]) : cube_d(a->X[i]);
            cmp_vec(c, "rule value", out, want, NULL, NX, 1e-14);
        }
        arr_elems(dxa.u.arr, out);
        putv(s, out, NX);
        if (w->fd) {
            double want[NX], e[NX];
            for (size_t i = 0; i < NX; i++) {
                want[i] = a->W[i] * d[k][i];
                e[i] = fabs(a->W[i]) * err[k][i];
            }
            cmp_vec(c, "rule pullback", out, want, e, NX, 1e-7);
        }
        /* frule_via_ad (wave) and the user frule (cube) */
        cr_tangent dargs[3] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_array(&Va)}, dy,
                   dyu;
        st = cr_frule(cfg, w->arena, dargs, rules[k], args, 2, &yv, &dy);
        if (st == CR_OK)
            st = cr_tangent_unthunk(dy, &dyu);
        ck_status(c, "frule of map / broadcast of a user function", st, cr_ctx_errmsg(w->ctx));
        put_st(s, st);
        if (st != CR_OK || dyu.tag != CR_TAN_ARRAY) {
            ck_fail(c, "rule %d: no array tangent", k);
            continue;
        }
        arr_elems(dyu.u.arr, out);
        putv(s, out, NX);
        if (w->fd) {
            double want[NX], e[NX];
            for (size_t i = 0; i < NX; i++) {
                want[i] = a->V[i] * d[k][i];
                e[i] = fabs(a->V[i]) * err[k][i];
            }
            cmp_vec(c, "rule frule", out, want, e, NX, 1e-7);
        }
    }
    /* what the engine treats as a primitive (looked up in its registry from every thread) */
    cr_value x1 = cr_value_f64(a->X[0]);
    const cr_value frz = cr_value_function(&frz_fn, NULL);
    if (!cr_engine_is_primitive(w->eng, &cube, &x1, 1) ||
        cr_engine_is_primitive(w->eng, &wave, &x1, 1) ||
        !cr_engine_is_primitive(w->eng, &frz, &x1, 1) ||
        !cr_engine_is_primitive(w->eng, &cr_fn_sin, &x1, 1))
        ck_fail(c, "cr_engine_is_primitive: wrong answer for cube, wave, frz or sin");
    /* Refusals through the shared engine: the messages go to the thread's own context. */
    const cr_value opaque = cr_value_function(&opaque_fn, NULL);
    cr_value args[2] = {opaque, cr_value_array(&Xa)}, yv;
    cr_pullback pb;
    cr_status st = cr_rrule(cfg, w->arena, &cr_fn_map, args, 2, &yv, &pb);
    put_st(s, st);
    ck_refused_with(c, "map of opaque", st, CR_ENORULE, cr_ctx_errmsg(w->ctx), "opaque(f64)");
    cr_tape_reset(w->t1);
    cr_var y = cr_tape_call1(w->t1, &opaque, (cr_var[1]){cr_tape_input(w->t1, a->X[1])}, 1);
    put_st(s, cr_tape_status(w->t1));
    ck_refused_with(c, "tape call of opaque", cr_tape_status(w->t1), CR_ENORULE,
                    cr_tape_errmsg(w->t1), "opaque(f64)");
    if (!isnan(y.v))
        ck_fail(c, "a refused call gave %g, not NaN", y.v);
    cr_tape_reset(w->t1);
    cr_arena_reset(w->arena);
}

static void run_array(worker *w, const aprog *a, sink *s)
{
    ck *c = &w->c;
    c->p = NULL;
    c->seed = a->seed;
    double X[NX], M[9], gx[NX], gm[9], y = 0, want[NX + 9], err[NX + 9];
    memcpy(X, a->X, sizeof X);
    memcpy(M, a->M, sizeof M);
    cr_array Xa = cr_array_vector(X, NX), Ma = cr_array_matrix(M, 3, 3);
    cr_array Ga = cr_array_vector(gx, NX), Gm = cr_array_matrix(gm, 3, 3);
    const cr_array *xs[2] = {&Xa, &Ma};
    cr_array *gs[2] = {&Ga, &Gm};

    c->mode = "value_and_gradient_arrays";
    cr_status st =
        cr_tape_value_and_gradient_arrays(w->t1, f_arr, (void *)(uintptr_t)a, xs, 2, &y, gs);
    ck_status(c, "cr_tape_value_and_gradient_arrays", st, cr_ctx_errmsg(w->ctx));
    put_st(s, st);
    put(s, y);
    putv(s, gx, NX);
    putv(s, gm, 9);
    if (w->fd) {
        double yw = pa_eval(a, a->X, a->M), g[NX + 9];
        memcpy(g, gx, sizeof gx);
        memcpy(g + NX, gm, sizeof gm);
        fd_arr(a, a->X, a->M, want, err);
        cmp_vec(c, "array value", &y, &yw, NULL, 1, 1e-12);
        cmp_vec(c, "array gradient", g, want, err, NX + 9, 1e-7);
    }

    c->mode = "prepared arrays";
    cr_prepared *pp = NULL;
    st = cr_prepare_gradient_arrays(w->ctx, w->eng, f_arr, (void *)(uintptr_t)a, xs, 2, &pp);
    ck_status(c, "cr_prepare_gradient_arrays", st, cr_ctx_errmsg(w->ctx));
    put_st(s, st);
    double first[NPTS][1 + NX + 9];
    for (int rep = 0; st == CR_OK && rep < NREPLAY; rep++)
        for (size_t k = 0; k < NPTS; k++) {
            memcpy(X, a->pX[k], sizeof X);
            memcpy(M, a->pM[k], sizeof M);
            cr_status rs = cr_prepared_value_and_gradient_arrays(pp, xs, 2, &y, gs);
            double out[1 + NX + 9];
            out[0] = y;
            memcpy(out + 1, gx, sizeof gx);
            memcpy(out + 1 + NX, gm, sizeof gm);
            if (rs != CR_OK) {
                ck_status(c, "cr_prepared_value_and_gradient_arrays", rs, cr_ctx_errmsg(w->ctx));
                st = rs;
                break;
            }
            if (rep == 0) {
                memcpy(first[k], out, sizeof out);
                putv(s, out, 1 + NX + 9);
            } else if (memcmp(first[k], out, sizeof out) != 0) {
                ck_fail(c, "array replay %d of point %zu differs from the first", rep, k);
            }
        }
    cr_prepared_free(pp);
    for (size_t k = 0; w->fd && st == CR_OK && k < NPTS; k++) {
        double yw = pa_eval(a, a->pX[k], a->pM[k]);
        fd_arr(a, a->pX[k], a->pM[k], want, err);
        cmp_vec(c, "replayed array value", first[k], &yw, NULL, 1, 1e-12);
        cmp_vec(c, "replayed array gradient", first[k] + 1, want, err, NX + 9, 1e-7);
    }

    if (w->eng != NULL)
        run_rules(w, a, s);
}

/* ---- The jobs ------------------------------------------------------------------------- */

/* Job k: a scalar program for k < nscalar, then array jobs. */
typedef struct jobs {
    size_t nscalar, narray;
    uint64_t base;
    bool user; /* programs may call the engine's user functions */
} jobs;

static uint64_t job_seed(const jobs *js, size_t k)
{
    uint64_t r = replay_seed();
    if (r != 0)
        return r;
    uint64_t s = js->base + k;
    return rnd_next(&s);
}

static void run_job(worker *w, const jobs *js, size_t k, sink *out)
{
    memset(out, 0, sizeof *out);
    if (k < js->nscalar) {
        prog p;
        gen_prog(&p, job_seed(js, k), js->user);
        run_scalar(w, &p, out);
    } else {
        aprog a;
        gen_aprog(&a, job_seed(js, k));
        run_array(w, &a, out);
    }
    if (out->over)
        ck_fail(&w->c, "more than %d numbers", MAXOUT);
    w->jobs++;
}

/* got against the main thread's numbers, bit for bit. */
static void compare(worker *w, const sink *got, const sink *want)
{
    if (got->n != want->n) {
        ck_fail(&w->c, "thread %d gave %zu numbers, the main thread %zu", w->id, got->n, want->n);
        return;
    }
    w->compared += got->n;
    for (size_t i = 0; i < got->n; i++)
        if (memcmp(&got->v[i], &want->v[i], sizeof got->v[i]) != 0) {
            ck_fail(&w->c, "thread %d: number %zu is %.17g, on the main thread alone %.17g", w->id,
                    i, got->v[i], want->v[i]);
            return;
        }
}

typedef struct thread_arg {
    worker w;
    const jobs *js;
    const sink *ref; /* the main thread's numbers, or NULL: keep them in out */
    sink *out;
    pthread_barrier_t *barrier;
    bool current_was_null;
} thread_arg;

static void *worker_thread(void *arg)
{
    thread_arg *ta = arg;
    worker *w = &ta->w;
    ta->current_was_null = cr_tape_current() == NULL; /* the main thread has set its own */
    pthread_barrier_wait(ta->barrier);
    size_t njobs = ta->js->nscalar + ta->js->narray;
    sink *s = ta->ref != NULL ? malloc(sizeof *s) : NULL;
    if (ta->ref != NULL && s == NULL) {
        ck_fail(&w->c, "out of memory");
        return NULL;
    }
    /* Each thread starts at another job, so that different work runs side by side. */
    for (size_t i = 0; i < njobs; i++) {
        size_t k = (i + (size_t)w->id * njobs / NTHREADS) % njobs;
        if (ta->ref != NULL) {
            run_job(w, ta->js, k, s);
            compare(w, s, &ta->ref[k]);
        } else {
            run_job(w, ta->js, k, &ta->out[k]);
        }
    }
    free(s);
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Every recording id seen by the workers is distinct (ids come in blocks from one atomic
 * counter; a block handed out twice would give two tapes the same ids). */
static void check_ids(worker *const *ws, size_t nw)
{
    size_t total = 0;
    for (size_t i = 0; i < nw; i++)
        total += ws[i]->nids;
    uint32_t *all = malloc((total + 1) * sizeof *all);
    assert_non_null(all);
    size_t n = 0;
    for (size_t i = 0; i < nw; i++)
        for (size_t j = 0; j < ws[i]->nids; j++)
            all[n++] = ws[i]->ids[j];
    qsort(all, n, sizeof *all, cmp_u32);
    size_t dup = 0;
    for (size_t i = 1; i < n; i++)
        if (all[i] == all[i - 1] && dup++ == 0)
            print_error("recording id %u seen twice\n", (unsigned)all[i]);
    free(all);
    assert_int_equal(dup, 0);
    assert_true(n >= 4 * nw);
}

/* Run js on NTHREADS threads at once. ref: compare with it as they go; otherwise keep the
 * numbers in outs[thread][job]. */
static void run_threads(const jobs *js, const cr_engine *eng, const sink *ref, sink **outs,
                        worker **ws_out, thread_arg *ta)
{
    pthread_barrier_t barrier;
    assert_int_equal(pthread_barrier_init(&barrier, NULL, NTHREADS), 0);
    pthread_t th[NTHREADS];
    size_t njobs = js->nscalar + js->narray;
    for (int i = 0; i < NTHREADS; i++) {
        ta[i].js = js;
        ta[i].ref = ref;
        ta[i].out = outs != NULL ? outs[i] : NULL;
        ta[i].barrier = &barrier;
        assert_int_equal(worker_open(&ta[i].w, i, eng, false, 8 * njobs + 8), CR_OK);
        ws_out[i] = &ta[i].w;
    }
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker_thread, &ta[i]), 0);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < NTHREADS; i++) {
        assert_true(ta[i].current_was_null);
        assert_int_equal(ta[i].w.c.failed, 0);
        assert_int_equal((size_t)ta[i].w.jobs, njobs);
    }
}

/* ---- Tests ------------------------------------------------------------------------------- */

/* Must run first: four threads use the engines (built-in rules, no engine) before anything
 * else in this process has, then the main thread does the same work alone. */
static void test_first_use(void **state)
{
    (void)state;
    jobs js = {NFIRST, 0, 0xf1257u, false};
    sink *outs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        outs[i] = calloc(NFIRST, sizeof **outs);
        assert_non_null(outs[i]);
    }
    thread_arg ta[NTHREADS];
    worker *ws[NTHREADS + 1];
    memset(ta, 0, sizeof ta);
    run_threads(&js, NULL, NULL, outs, ws, ta);

    worker wm;
    assert_int_equal(worker_open(&wm, NTHREADS, NULL, true, 8 * NFIRST + 8), CR_OK);
    sink *ref = malloc(sizeof *ref);
    assert_non_null(ref);
    for (size_t k = 0; k < NFIRST; k++) {
        run_job(&wm, &js, k, ref);
        for (int i = 0; i < NTHREADS; i++)
            compare(&wm, &outs[i][k], ref);
    }
    assert_int_equal(wm.c.failed, 0);
    ws[NTHREADS] = &wm;
    check_ids(ws, NTHREADS + 1);
    free(ref);
    worker_close(&wm);
    for (int i = 0; i < NTHREADS; i++) {
        worker_close(&ta[i].w);
        free(outs[i]);
    }
}

/* The main thread alone, then four threads at once, each running every job (starting at
 * different ones) with one engine built here. */
static void test_concurrent(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_engine *eng = NULL;
    assert_int_equal(make_engine(ctx, &eng), CR_OK);
    size_t np = replay_seed() != 0 ? 1 : programs(200);
    jobs js = {np, np / 4 + 1, 0x7e57ab1eu, true};
    size_t njobs = js.nscalar + js.narray;

    /* The main thread's current tape is its own: the workers must not see it. */
    cr_tape *mine;
    assert_int_equal(cr_tape_new(ctx, NULL, &mine), CR_OK);
    cr_tape_set_current(mine);

    worker wm;
    assert_int_equal(worker_open(&wm, NTHREADS, eng, true, 8 * njobs + 8), CR_OK);
    sink *ref = malloc(njobs * sizeof *ref);
    assert_non_null(ref);
    cr_tape_set_current(NULL); /* run_scalar expects none between jobs */
    for (size_t k = 0; k < njobs; k++)
        run_job(&wm, &js, k, &ref[k]);
    assert_int_equal(wm.c.failed, 0);
    cr_tape_set_current(mine);

    thread_arg ta[NTHREADS];
    worker *ws[NTHREADS + 1];
    memset(ta, 0, sizeof ta);
    run_threads(&js, eng, ref, NULL, ws, ta);
    assert_ptr_equal(cr_tape_current(), mine);
    ws[NTHREADS] = &wm;
    check_ids(ws, NTHREADS + 1);
    size_t compared = 0;
    for (int i = 0; i < NTHREADS; i++)
        compared += ta[i].w.compared;
    if (programs(0) != 0)
        printf("%zu jobs (%zu scalar programs, %zu array jobs) on %d threads, %zu numbers "
               "compared bit for bit, %zu recording ids\n",
               njobs, js.nscalar, js.narray, NTHREADS, compared, ws[0]->nids);

    cr_tape_set_current(NULL);
    free(ref);
    worker_close(&wm);
    for (int i = 0; i < NTHREADS; i++)
        worker_close(&ta[i].w);
    cr_tape_free(mine);
    cr_engine_free(eng);
    cr_ctx_free(ctx);
}

/* ---- Variables handed over between threads ---------------------------------------------- */

typedef struct handover {
    pthread_barrier_t *barrier;
    cr_var *slots; /* each thread's output of the round */
    cr_avar *aslots;
    int id;
    int failures;
    long checks;
    char first[256];
} handover;

#define HCHECK(h, cond)                                                                          \
    do {                                                                                         \
        (h)->checks++;                                                                           \
        if (!(cond) && (h)->failures++ == 0)                                                     \
            snprintf((h)->first, sizeof(h)->first, "round %d, line %d: %s", r, __LINE__, #cond); \
    } while (0)

static bool foreign_msg(const cr_tape *t)
{
    return cr_tape_status(t) == CR_ETAPE && strstr(cr_tape_errmsg(t), "another tape") != NULL;
}

static void *handover_thread(void *arg)
{
    handover *h = arg;
    int r = -1;
    HCHECK(h, cr_tape_current() == NULL);
    cr_ctx *ctx = NULL;
    cr_tape *t = NULL;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_tape_new(ctx, NULL, &t) != CR_OK) {
        h->failures++;
        snprintf(h->first, sizeof h->first, "no context or tape");
        cr_ctx_free(ctx);
        return NULL;
    }
    double data[4] = {0.5, -1.0, 1.5, 0.25 * h->id};
    cr_array xa = cr_array_vector(data, 4);
    HCHECK(h, cr_tape_set_current(t) == NULL);
    for (r = 0; r < NROUNDS; r++) {
        /* Record on the current tape and publish the result. */
        cr_tape_reset(t);
        double x0 = 0.1 * (h->id + 1) + 0.01 * r;
        cr_var x = cr_tape_input(NULL, x0), y = cr_sin(NULL, x);
        cr_avar X = cr_tape_array_input(NULL, &xa);
        h->slots[h->id] = y;
        h->aslots[h->id] = X;
        pthread_barrier_wait(h->barrier);
        cr_var other = h->slots[(h->id + 1) % NTHREADS];
        cr_avar aother = h->aslots[(h->id + 1) % NTHREADS];
        pthread_barrier_wait(h->barrier); /* all read before the next round writes */

        HCHECK(h, cr_tape_current() == t);
        HCHECK(h, other.tape != x.tape && aother.tape != X.tape);
        /* A foreign variable fails the tape, sticky; through each kind of operation. */
        switch (r % 5) {
        case 0:
            HCHECK(h, isnan(cr_add(t, x, other).v));
            break;
        case 1:
            HCHECK(h, isnan(cr_mul(NULL, other, x).v));
            break;
        case 2:
            HCHECK(h, isnan(cr_tape_call1(t, &cr_fn_tanh, &other, 1).v));
            break;
        case 3:
            HCHECK(h, isnan(cr_div(NULL, x, other).v));
            break;
        default:
            HCHECK(h, isnan(cr_av_sum(t, aother).v));
            break;
        }
        HCHECK(h, foreign_msg(t));
        double g = 0;
        HCHECK(h, cr_tape_gradient(t, y, &x, 1, &g) == CR_ETAPE);
        HCHECK(h, isnan(cr_sin(t, x).v) && foreign_msg(t));
        /* The gradient of one's own variables, once the error is cleared. */
        cr_tape_clear_error(t);
        HCHECK(h, cr_tape_gradient(t, y, &x, 1, &g) == CR_OK);
        double fd =
            (sin(x0 + 1e-3) * 8 - sin(x0 - 1e-3) * 8 - sin(x0 + 2e-3) + sin(x0 - 2e-3)) / 12e-3;
        HCHECK(h, fabs(g - fd) <= 1e-9);
        /* A variable of this tape's previous recording is foreign too. */
        cr_tape_reset(t);
        HCHECK(h, isnan(cr_add(NULL, cr_tape_input(t, 1.0), x).v) && foreign_msg(t));
    }
    HCHECK(h, cr_tape_set_current(NULL) == t);
    cr_tape_free(t);
    cr_ctx_free(ctx);
    return NULL;
}

static void test_handover(void **state)
{
    (void)state;
    cr_ctx *ctx;
    cr_tape *mine;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    assert_int_equal(cr_tape_new(ctx, NULL, &mine), CR_OK);
    cr_tape_set_current(mine);
    pthread_barrier_t barrier;
    assert_int_equal(pthread_barrier_init(&barrier, NULL, NTHREADS), 0);
    cr_var slots[NTHREADS];
    cr_avar aslots[NTHREADS];
    handover h[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&h[i], 0, sizeof h[i]);
        h[i].barrier = &barrier;
        h[i].slots = slots;
        h[i].aslots = aslots;
        h[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, handover_thread, &h[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < NTHREADS; i++) {
        if (h[i].failures != 0)
            print_error("thread %d: %d failures, first: %s\n", i, h[i].failures, h[i].first);
        assert_int_equal(h[i].failures, 0);
        assert_true(h[i].checks >= 9L * NROUNDS);
    }
    assert_ptr_equal(cr_tape_current(), mine);
    cr_tape_set_current(NULL);
    cr_tape_free(mine);
    cr_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_use), /* first: see the comment there */
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_handover),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
