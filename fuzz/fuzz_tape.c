/*
 * fuzz_tape: a sequence of tape API calls decoded from the input, on one tape whose flags
 * (first order, CR_TAPE_FORWARD, CR_TAPE_SECOND_ORDER), storage (growable, small blocks, a
 * small fixed buffer) and addressing (given, or the thread's current tape through NULL)
 * come from the first byte. Each following byte picks an operation:
 *
 *   scalar recording  inputs, constants, + - * /, the unary operations, cr_tape_call of
 *                     table and rule functions, cr_tape_cmp, recording cursors (cr_rec)
 *                     with operations on the tape while one is open (misuse)
 *   array recording   array inputs (f64/f32/c128, strided, reversed...), cr_tape_acall_n of
 *                     the registry's array functions, broadcasts, sum, dot, slices, matmul
 *   sweeps            gradient, vjp, jacobian, jvp, hvp, hessian, gradient_arrays, avjp,
 *                     ajvp, ahvp, stats
 *   lifecycle         reset (older variables become stale), clear_error, variables forged
 *                     from the tape's id and an index past the recording
 *   functions         cr_tape_value_and_gradient, cr_tape_record, cr_prepare_gradient /
 *                     cr_prepare_hvp / cr_prepare_gradient_arrays with replays at new
 *                     points; the function is a sub-program of the following bytes, run on
 *                     its tape with the recording operations only
 *
 * Operands are taken from pools of the variables made so far (stale ones included). Sizes
 * are bounded (arrays of at most 9^3 elements, 8 inputs per call, 160 operations) so that
 * every input runs in milliseconds. Byte layout: docs/fuzzing.md.
 */
#include "fuzz_common.h"

#include <chainrules/tape_inline.h> /* the inline recording path, as fast programs use it */
#include <stdio.h>

#define NV       32  /* scalar variable pool */
#define NA       16  /* array variable pool */
#define MAX_OPS  160 /* operations of one input */
#define MAX_SUB  48  /* operations of a sub-program (a function given to the engine) */
#define MAX_ARGN 8   /* variables per call */

typedef struct vm {
    cr_tape *t;  /* the tape operations are given (NULL: the current tape) */
    cr_tape *tt; /* the tape itself */
    bool inside; /* running as the function of value_and_gradient / prepare: recording only */
    cr_var v[NV];
    size_t nv, vnext;
    cr_avar a[NA];
    uint32_t aepoch[NA]; /* the epoch each array variable was made in */
    size_t na, anext;
    uint32_t epoch; /* how many times the tape was reset */
} vm;

typedef struct entry {
    const cr_function *fn;
    const cr_argspec *args;
    size_t nargs;
    bool variadic;
} entry;

static bool g_trace; /* FUZZ_TAPE_TRACE set: each operation and the tape's status after it */
static fuzz_alloc g_alloc;
static cr_ctx *g_ctx;
static cr_arena *g_arena; /* the harness's: arrays and buffers of one input */
static const cr_function **g_scalar1, **g_scalar2, **g_scalarn;
static size_t g_n1, g_n2, g_nn;
static entry *g_arrayfns; /* signatures with an array matcher */
static size_t g_narrayfns;
static unsigned char g_fixed[16384] __attribute__((aligned(64))); /* a fixed-buffer tape's */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_one_thread();
    g_trace = getenv("FUZZ_TAPE_TRACE") != NULL;
    g_ctx = fuzz_ctx_new(&g_alloc);
    if (g_ctx == NULL || cr_arena_new(g_ctx, NULL, &g_arena) != CR_OK)
        abort();
    const cr_registry *reg = cr_registry_builtin();
    size_t n = cr_registry_size(reg);
    g_scalar1 = calloc(n + 1, sizeof *g_scalar1);
    g_scalar2 = calloc(n + 1, sizeof *g_scalar2);
    g_scalarn = calloc(n + 1, sizeof *g_scalarn);
    g_arrayfns = calloc(n + 1, sizeof *g_arrayfns);
    if (g_scalar1 == NULL || g_scalar2 == NULL || g_scalarn == NULL || g_arrayfns == NULL)
        abort();
    const uint32_t arrays = CR_M_A_F64 | CR_M_A_F32 | CR_M_A_C128;
    for (size_t i = 0; i < n; i++) {
        cr_rule_info info;
        if (cr_registry_get(reg, i, &info) != CR_OK || info.fn == NULL)
            continue;
        const cr_function *fn = info.fn;
        bool row = (fn->flags & CR_FN_SCALAR_ROW) != 0;
        if (row && fn->arity == 1 && (g_n1 == 0 || g_scalar1[g_n1 - 1] != fn))
            g_scalar1[g_n1++] = fn;
        else if (row && fn->arity == 2 && (g_n2 == 0 || g_scalar2[g_n2 - 1] != fn))
            g_scalar2[g_n2++] = fn;
        bool has_array = false, real_only = info.nargs > 0;
        for (size_t k = 0; k < info.nargs; k++) {
            has_array = has_array || (info.args[k].mask & arrays);
            real_only = real_only && (info.args[k].mask & CR_M_F64);
        }
        if (has_array)
            g_arrayfns[g_narrayfns++] = (entry){info.fn, info.args, info.nargs, info.variadic};
        else if (!row && real_only && (g_nn == 0 || g_scalarn[g_nn - 1] != fn))
            g_scalarn[g_nn++] = fn; /* scalar rules kept as pullbacks (hypot(x...), ...) */
    }
    if (g_n1 == 0 || g_n2 == 0 || g_narrayfns == 0)
        abort();
    return 0;
}

/* ---- Pools ------------------------------------------------------------------------------ */

static void push_v(vm *m, cr_var x)
{
    m->v[m->vnext] = x;
    m->vnext = (m->vnext + 1) % NV;
    if (m->nv < NV)
        m->nv++;
}

static cr_var pick_v(vm *m, fuzz_in *in)
{
    uint8_t c = fuzz_u8(in);
    if (m->nv == 0 || c >= 240)
        return cr_const(fuzz_double(in));
    return m->v[c % m->nv];
}

static void push_a(vm *m, cr_avar x)
{
    if (x.a == NULL)
        return;
    m->aepoch[m->anext] = m->epoch;
    m->a[m->anext] = x;
    m->anext = (m->anext + 1) % NA;
    if (m->na < NA)
        m->na++;
}

/* After the tape is reset: the pool's constant arrays that results made (all-constant
 * calls) live in the tape's arena and are gone; drop them. Variables of the old recording
 * stay: using one must be refused (CR_ETAPE) before its array is read. */
static void drop_constants(vm *m)
{
    size_t k = 0;
    for (size_t i = 0; i < m->na; i++)
        if (m->a[i].idx != CR_VAR_CONST) {
            m->aepoch[k] = m->aepoch[i];
            m->a[k++] = m->a[i];
        }
    m->na = k;
    m->anext = k % NA;
    m->epoch++;
}

/* An array operand: a pool variable, or a constant array. *shape_of is where the harness
 * may read the operand's shape: its array, or NULL for a variable of an older recording,
 * whose array the reset released (the library must refuse it without reading it). */
/* In trace mode: an array made by the harness. */
static void trace_array(const char *what, const cr_array *a)
{
    if (!g_trace || a == NULL)
        return;
    fprintf(stderr, "      %s: %s ndim %u structure %s shape", what,
            cr_dtype_name((cr_dtype)a->dtype), (unsigned)a->ndim,
            cr_matstruct_name((cr_matstruct)a->structure));
    for (unsigned d = 0; d < a->ndim; d++)
        fprintf(stderr, " %zu", a->shape[d]);
    fprintf(stderr, " strides");
    for (unsigned d = 0; d < a->ndim; d++)
        fprintf(stderr, " %td", a->strides[d]);
    fprintf(stderr, "\n");
}

static cr_avar pick_a2(vm *m, fuzz_in *in, const cr_array **shape_of)
{
    uint8_t c = fuzz_u8(in);
    if (m->na == 0 || c >= 240) {
        cr_array *x = fuzz_array(in, g_arena, CR_DT_F64);
        trace_array("constant", x);
        *shape_of = x;
        return cr_av_const(x);
    }
    size_t i = c % m->na;
    *shape_of = m->aepoch[i] == m->epoch ? m->a[i].a : NULL;
    return m->a[i];
}

static cr_avar pick_a(vm *m, fuzz_in *in)
{
    const cr_array *unused;
    return pick_a2(m, in, &unused);
}

/* Up to MAX_ARGN pool variables. */
static size_t pick_vs(vm *m, fuzz_in *in, cr_var *out)
{
    size_t n = fuzz_below(in, MAX_ARGN + 1);
    for (size_t i = 0; i < n; i++)
        out[i] = pick_v(m, in);
    return n;
}

/* An f64 array of a's shape (for gradients, seeds, directions); of a drawn shape when a is
 * NULL. NULL when out of memory. */
static cr_array *like(fuzz_in *in, const cr_array *a, bool finite)
{
    cr_array *g = a != NULL ? fuzz_array_shaped(in, g_arena, CR_DT_F64, a->ndim, a->shape)
                            : fuzz_array(in, g_arena, CR_DT_F64);
    if (g != NULL && finite) {
        size_t n = cr_array_numel(g);
        for (size_t k = 0; k < n; k++) {
            double *p = (double *)g->data + fuzz_offset(g, k);
            if (!isfinite(*p))
                *p = 1.0;
        }
    }
    if (g != NULL)
        g->flags = CR_ARRAY_WRITABLE;
    return g;
}

/* ---- Operations -------------------------------------------------------------------------- */

enum {
    OP_INPUT,
    OP_INPUTS,
    OP_CONST,
    OP_BIN,
    OP_UN,
    OP_CALL,
    OP_CMP,
    OP_REC,
    OP_AINPUT,
    OP_ACALL,
    OP_ABCAST,
    OP_AREDUCE,
    OP_ASLICE,
    OP_AMATMUL,
    /* the recording operations end here: a sub-program uses only those above */
    OP_GRAD,
    OP_VJP,
    OP_JAC,
    OP_JVP,
    OP_HVP,
    OP_HESS,
    OP_AGRAD,
    OP_AVJP,
    OP_AJVP,
    OP_AHVP,
    OP_STATS,
    OP_RESET,
    OP_CLEAR,
    OP_FORGE,
    OP_VG,
    OP_RECORD,
    OP_PREP,
    OP_PREP_ARR,
    OP_COUNT
};
#define OP_RECORDING (OP_AMATMUL + 1)

static void run(vm *m, fuzz_in *in, size_t max_ops);

static cr_var unary(cr_tape *t, unsigned which, cr_var a)
{
    switch (which % 7) {
    case 0:
        return cr_neg(t, a);
    case 1:
        return cr_sin(t, a);
    case 2:
        return cr_cos(t, a);
    case 3:
        return cr_exp(t, a);
    case 4:
        return cr_log(t, a);
    case 5:
        return cr_sqrt(t, a);
    default:
        return cr_asin(t, a);
    }
}

static cr_var binary(cr_tape *t, unsigned which, cr_var a, cr_var b)
{
    switch (which % 4) {
    case 0:
        return cr_add(t, a, b);
    case 1:
        return cr_sub(t, a, b);
    case 2:
        return cr_mul(t, a, b);
    default:
        return cr_div(t, a, b);
    }
}

/* A recording cursor: up to 8 operations through it; sometimes an operation on the tape
 * itself while it is open (refused: CR_EMISUSE). */
static void op_rec(vm *m, fuzz_in *in)
{
    cr_rec r;
    cr_rec_open(&r, m->t);
    size_t k = fuzz_below(in, 9);
    for (size_t i = 0; i < k; i++) {
        uint8_t c = fuzz_u8(in);
        cr_var a = pick_v(m, in), b = pick_v(m, in), y;
        switch (c % 8) {
        case 0:
            y = cr_rec_add(&r, a, b);
            break;
        case 1:
            y = cr_rec_sub(&r, a, b);
            break;
        case 2:
            y = cr_rec_mul(&r, a, b);
            break;
        case 3:
            y = cr_rec_div(&r, a, b);
            break;
        case 4:
            y = cr_rec_neg(&r, a);
            break;
        case 5:
            y = cr_rec_call1(&r, cr_sin, a);
            break;
        case 6:
            y = cr_rec_call2(&r, (cr_mul), a, b);
            break;
        default:
            y = binary(m->t, c >> 3, a, b); /* on the tape, with the cursor open */
            break;
        }
        push_v(m, y);
    }
    cr_rec_close(&r);
}

/* cr_tape_call: a table function of one or two arguments, or a scalar rule kept as a
 * pullback, with sometimes one argument too many and two outputs asked for. */
static void op_call(vm *m, fuzz_in *in)
{
    uint8_t c = fuzz_u8(in);
    const cr_function *fn;
    size_t nargs;
    if (c % 3 == 0) {
        fn = g_scalar1[fuzz_below(in, g_n1)];
        nargs = 1;
    } else if (c % 3 == 1 || g_nn == 0) {
        fn = g_scalar2[fuzz_below(in, g_n2)];
        nargs = 2;
    } else {
        fn = g_scalarn[fuzz_below(in, g_nn)];
        nargs = 1 + fuzz_below(in, 3);
    }
    if ((c >> 2 & 7u) == 7u)
        nargs++;
    size_t nout = (c >> 5) == 7 ? 2 : 1;
    cr_var args[4], out[2];
    for (size_t i = 0; i < nargs; i++)
        args[i] = pick_v(m, in);
    cr_value f = cr_value_function(fn, NULL);
    if (cr_tape_call(m->t, &f, args, nargs, out, nout) == CR_OK)
        for (size_t i = 0; i < nout; i++)
            push_v(m, out[i]);
}

/* cr_tape_acall_n of an array function of the registry: array matchers get pool arrays
 * (or constants), float ones pool scalars, integers small constants, functions a table
 * function; results go to the pools. */
static void op_acall(vm *m, fuzz_in *in)
{
    const entry *e = &g_arrayfns[fuzz_below(in, g_narrayfns)];
    size_t nargs = e->nargs;
    if (e->variadic)
        nargs = e->nargs - 1 + fuzz_below(in, 3);
    if (nargs > MAX_ARGN)
        nargs = MAX_ARGN;
    cr_targ args[MAX_ARGN];
    for (size_t i = 0; i < nargs; i++) {
        uint32_t mask = e->args[i < e->nargs ? i : e->nargs - 1].mask;
        if (mask & (CR_M_A_F64 | CR_M_A_F32 | CR_M_A_C128))
            args[i] = cr_targ_arr(pick_a(m, in));
        else if (mask & (CR_M_F64 | CR_M_F32))
            args[i] = cr_targ_var(pick_v(m, in));
        else if (mask & CR_M_INT)
            args[i] = cr_targ_value(cr_value_i64(fuzz_int(in)));
        else if (mask & CR_M_FUNC)
            args[i] = cr_targ_value(cr_value_function(g_scalar1[fuzz_below(in, g_n1)], NULL));
        else if (mask & CR_M_BOOL)
            args[i] = cr_targ_value(cr_value_bool(fuzz_bool(in)));
        else if (mask & CR_M_A_INT) {
            cr_array *x = fuzz_array(in, g_arena, CR_DT_I64);
            args[i] = x != NULL ? cr_targ_value(cr_value_array(x)) : cr_targ_value(cr_colon);
        } else
            args[i] = cr_targ_value(cr_colon);
    }
    size_t nout = 1 + fuzz_below(in, 4);
    cr_targ out[CR_TAPE_MAX_TUPLE];
    cr_value f = cr_value_function(e->fn, NULL);
    if (cr_tape_acall_n(m->t, &f, args, nargs, out, nout) != CR_OK)
        return;
    for (size_t i = 0; i < nout; i++) {
        if (out[i].kind == CR_TARG_VAR)
            push_v(m, out[i].u.s);
        else if (out[i].kind == CR_TARG_ARR)
            push_a(m, out[i].u.a);
    }
}

/* A sub-program as the function of the engine's calls: its bytes, run on the tape the
 * engine gives, with the inputs in the pool and the last pool variables as outputs. */
typedef struct sub {
    const uint8_t *p;
    size_t n;
} sub;

static cr_status sub_fn(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t mo, void *env)
{
    const sub *s = env;
    vm m = {.t = t, .tt = t, .inside = true};
    for (size_t i = 0; i < n; i++)
        push_v(&m, x[i]);
    fuzz_in in = {s->p, s->n};
    run(&m, &in, MAX_SUB);
    for (size_t i = 0; i < mo; i++)
        y[i] = m.nv > 0 ? m.v[(m.vnext + NV - 1 - i % m.nv) % NV] : cr_const(1.0);
    return cr_tape_status(t);
}

static cr_status sub_afn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    const sub *s = env;
    vm m = {.t = t, .tt = t, .inside = true};
    for (size_t i = 0; i < n; i++)
        push_a(&m, xs[i]);
    fuzz_in in = {s->p, s->n};
    run(&m, &in, MAX_SUB);
    *y = m.nv > 0 ? m.v[(m.vnext + NV - 1) % NV] : cr_av_sum(t, xs[0]);
    return cr_tape_status(t);
}

/* Take the sub-program's bytes (a length byte, then that many bytes) off the input. */
static sub take_sub(fuzz_in *in)
{
    size_t len = fuzz_u8(in);
    if (len > in->n)
        len = in->n;
    sub s = {in->p, len};
    in->p += len;
    in->n -= len;
    return s;
}

static void op_engine(vm *m, fuzz_in *in, int op)
{
    sub s = take_sub(in);
    double x[MAX_ARGN], x2[MAX_ARGN], v[MAX_ARGN], grad[MAX_ARGN], hv[MAX_ARGN], y;
    size_t n = 1 + fuzz_below(in, MAX_ARGN);
    for (size_t i = 0; i < n; i++) {
        x[i] = fuzz_double(in);
        x2[i] = fuzz_double(in);
        v[i] = fuzz_finite(in);
    }
    if (op == OP_VG) {
        cr_tape_value_and_gradient(m->tt, sub_fn, &s, x, n, &y, grad);
        drop_constants(m); /* it resets the tape */
    } else if (op == OP_RECORD) {
        cr_var xs[MAX_ARGN], ys[3];
        size_t mo = 1 + fuzz_below(in, 3);
        cr_status st = cr_tape_record(m->tt, sub_fn, &s, x, n, xs, ys, mo);
        drop_constants(m); /* it resets the tape */
        if (st == CR_OK) {
            for (size_t i = 0; i < n; i++)
                push_v(m, xs[i]);
            for (size_t i = 0; i < mo; i++)
                push_v(m, ys[i]);
        }
    } else {
        cr_prepared *p = NULL;
        bool hvp = fuzz_bool(in);
        cr_status st = hvp ? cr_prepare_hvp(g_ctx, NULL, sub_fn, &s, x, n, &p)
                           : cr_prepare_gradient(g_ctx, NULL, sub_fn, &s, x, n, &p);
        if (st == CR_OK) {
            size_t reps = 1 + fuzz_below(in, 3);
            for (size_t r = 0; r < reps; r++) {
                const double *at = r == 0 ? x : x2;
                size_t nn = fuzz_u8(in) == 255 ? n + 1 : n; /* another size: CR_ESHAPE */
                if (hvp && fuzz_bool(in))
                    cr_prepared_hvp(p, at, nn, v, hv, &y, grad);
                else
                    cr_prepared_value_and_gradient(p, at, nn, &y, grad);
            }
        }
        cr_prepared_free(p);
    }
}

/* cr_prepare_gradient_arrays (or _hvp_arrays) of a sub-program over 1-3 array inputs, with
 * replays at new arrays of the same shapes (sometimes another shape). */
static void op_prep_arrays(fuzz_in *in)
{
    sub s = take_sub(in);
    size_t n = 1 + fuzz_below(in, 3);
    cr_array *xs[3], *ys[3], *gs[3], *vs[3], *hvs[3];
    for (size_t i = 0; i < n; i++) {
        static const cr_dtype dts[4] = {CR_DT_F64, CR_DT_F64, CR_DT_F32, CR_DT_C128};
        xs[i] = fuzz_array(in, g_arena, dts[fuzz_u8(in) & 3u]);
        if (xs[i] == NULL)
            return;
        ys[i] = fuzz_u8(in) == 255 ? fuzz_array(in, g_arena, CR_DT_F64)
                                   : fuzz_array_shaped(in, g_arena, (cr_dtype)xs[i]->dtype,
                                                       xs[i]->ndim, xs[i]->shape);
        gs[i] = like(in, xs[i], false);
        vs[i] = like(in, xs[i], true);
        hvs[i] = like(in, xs[i], false);
        if (ys[i] == NULL || gs[i] == NULL || vs[i] == NULL || hvs[i] == NULL)
            return;
    }
    cr_prepared *p = NULL;
    bool hvp = fuzz_bool(in);
    cr_status st =
        hvp ? cr_prepare_hvp_arrays(g_ctx, NULL, sub_afn, &s, (const cr_array *const *)xs, n, &p)
            : cr_prepare_gradient_arrays(g_ctx, NULL, sub_afn, &s, (const cr_array *const *)xs, n,
                                         &p);
    if (st == CR_OK) {
        double y;
        size_t reps = 1 + fuzz_below(in, 3);
        for (size_t r = 0; r < reps; r++) {
            cr_array *const *at = r == 0 ? xs : ys;
            if (hvp && fuzz_bool(in))
                cr_prepared_hvp_arrays(p, (const cr_array *const *)at, n,
                                       (const cr_array *const *)vs, hvs, &y, gs);
            else
                cr_prepared_value_and_gradient_arrays(p, (const cr_array *const *)at, n, &y, gs);
        }
    }
    cr_prepared_free(p);
}

/* The array sweeps: gradient_arrays, avjp, ajvp, ahvp over pool variables. */
static void op_asweep(vm *m, fuzz_in *in, int op)
{
    cr_var xs[MAX_ARGN];
    double g[MAX_ARGN], v[MAX_ARGN];
    size_t n = pick_vs(m, in, xs);
    for (size_t i = 0; i < n; i++)
        v[i] = fuzz_finite(in);
    size_t na = m->na == 0 ? 0 : fuzz_below(in, 4);
    cr_avar as[4];
    cr_array *ag[4];
    const cr_array *ad[4];
    for (size_t i = 0; i < na; i++) {
        const cr_array *shape;
        as[i] = pick_a2(m, in, &shape);
        ag[i] = like(in, shape, false);
        ad[i] = like(in, shape, true);
        if (ag[i] == NULL || ad[i] == NULL)
            return;
    }
    if (op == OP_AGRAD) {
        cr_tape_gradient_arrays(m->t, pick_v(m, in), xs, n, g, as, na, ag);
    } else if (op == OP_AVJP) {
        const cr_array *shape;
        cr_avar y = pick_a2(m, in, &shape);
        cr_array *ybar = like(in, shape, true);
        if (ybar != NULL)
            cr_tape_avjp(m->t, y, ybar, xs, n, g, as, na, ag);
    } else if (op == OP_AJVP) {
        cr_var ys[MAX_ARGN];
        double ydot[MAX_ARGN];
        size_t my = pick_vs(m, in, ys);
        cr_avar bs[2];
        cr_array *bd[2];
        size_t nb = m->na == 0 ? 0 : fuzz_below(in, 3);
        for (size_t i = 0; i < nb; i++) {
            const cr_array *shape;
            bs[i] = pick_a2(m, in, &shape);
            bd[i] = like(in, shape, false);
            if (bd[i] == NULL)
                return;
        }
        cr_tape_ajvp(m->t, xs, v, n, as, ad, na, ys, my, ydot, bs, nb, bd);
    } else {
        cr_tape_ahvp(m->t, pick_v(m, in), xs, n, v, g, as, na, ad, ag);
    }
}

static void op_sweep(vm *m, fuzz_in *in, int op)
{
    cr_var xs[MAX_ARGN], ys[4];
    double out[MAX_ARGN * MAX_ARGN], w[MAX_ARGN], hv[MAX_ARGN];
    size_t n = pick_vs(m, in, xs);
    for (size_t i = 0; i < MAX_ARGN; i++)
        w[i] = fuzz_bool(in) ? fuzz_finite(in) : fuzz_double(in);
    size_t my = fuzz_below(in, 5);
    for (size_t i = 0; i < my; i++)
        ys[i] = pick_v(m, in);
    switch (op) {
    case OP_GRAD:
        cr_tape_gradient(m->t, pick_v(m, in), xs, n, out);
        break;
    case OP_VJP:
        cr_tape_vjp(m->t, ys, w, my, xs, n, out);
        break;
    case OP_JAC:
        cr_tape_jacobian(m->t, ys, my, xs, n, out);
        break;
    case OP_JVP:
        cr_tape_jvp(m->t, xs, w, n, ys, my, out);
        break;
    case OP_HVP:
        cr_tape_hvp(m->t, pick_v(m, in), xs, n, w, hv, fuzz_bool(in) ? out : NULL);
        break;
    default:
        cr_tape_hessian(m->t, pick_v(m, in), xs, n, out);
        break;
    }
}

static const char *const op_names[OP_COUNT] = {
    "input",  "inputs", "const",  "bin",     "un",     "call",    "cmp",  "rec",
    "ainput", "acall",  "abcast", "areduce", "aslice", "amatmul", "grad", "vjp",
    "jac",    "jvp",    "hvp",    "hess",    "agrad",  "avjp",    "ajvp", "ahvp",
    "stats",  "reset",  "clear",  "forge",   "vg",     "record",  "prep", "prep_arr"};

static void run(vm *m, fuzz_in *in, size_t max_ops)
{
    for (size_t k = 0; k < max_ops && fuzz_more(in); k++) {
        int op = (int)(fuzz_u8(in) % OP_COUNT);
        if (m->inside && op >= OP_RECORDING)
            continue; /* a function given to the engine only records */
        if (g_trace)
            fprintf(stderr, "%s%s\n", m->inside ? "    " : "", op_names[op]);
        switch (op) {
        case OP_INPUT:
            push_v(m, cr_tape_input(m->t, fuzz_double(in)));
            break;
        case OP_INPUTS: {
            double x[MAX_ARGN];
            cr_var out[MAX_ARGN];
            size_t n = fuzz_below(in, MAX_ARGN + 1);
            for (size_t i = 0; i < n; i++)
                x[i] = fuzz_double(in);
            if (cr_tape_inputs(m->t, x, n, out) == CR_OK)
                for (size_t i = 0; i < n; i++)
                    push_v(m, out[i]);
            break;
        }
        case OP_CONST:
            push_v(m, cr_const(fuzz_double(in)));
            break;
        case OP_BIN: {
            unsigned w = fuzz_u8(in);
            cr_var a = pick_v(m, in), b = pick_v(m, in);
            push_v(m, binary(m->t, w, a, b));
            break;
        }
        case OP_UN: {
            unsigned w = fuzz_u8(in);
            push_v(m, unary(m->t, w, pick_v(m, in)));
            break;
        }
        case OP_CALL:
            op_call(m, in);
            break;
        case OP_CMP: {
            cr_var a = pick_v(m, in), b = pick_v(m, in);
            cr_tape_cmp(m->t, a, (cr_cmp)(fuzz_u8(in) % 6), b);
            break;
        }
        case OP_REC:
            op_rec(m, in);
            break;
        case OP_AINPUT: {
            static const cr_dtype dts[4] = {CR_DT_F64, CR_DT_F64, CR_DT_F32, CR_DT_C128};
            cr_array *x = fuzz_array(in, g_arena, dts[fuzz_u8(in) & 3u]);
            trace_array("input", x);
            if (x != NULL)
                push_a(m, cr_tape_array_input(m->t, x));
            break;
        }
        case OP_ACALL:
            op_acall(m, in);
            break;
        case OP_ABCAST: {
            uint8_t c = fuzz_u8(in);
            if (c & 1u) {
                cr_value f = cr_value_function(g_scalar1[fuzz_below(in, g_n1)], NULL);
                push_a(m, cr_av_broadcast1(m->t, &f, cr_targ_arr(pick_a(m, in))));
            } else {
                cr_value f = cr_value_function(g_scalar2[fuzz_below(in, g_n2)], NULL);
                cr_targ x = cr_targ_arr(pick_a(m, in));
                cr_targ y = (c & 2u) ? cr_targ_var(pick_v(m, in)) : cr_targ_arr(pick_a(m, in));
                push_a(m, (c & 4u) ? cr_av_broadcast2(m->t, &f, y, x)
                                   : cr_av_broadcast2(m->t, &f, x, y));
            }
            break;
        }
        case OP_AREDUCE: {
            cr_avar x = pick_a(m, in);
            push_v(m, fuzz_bool(in) ? cr_av_sum(m->t, x) : cr_av_dot(m->t, x, pick_a(m, in)));
            break;
        }
        case OP_ASLICE: {
            cr_avar x = pick_a(m, in);
            int64_t start = fuzz_int(in), stop = fuzz_int(in);
            push_a(m, cr_av_slice(m->t, x, start, stop));
            break;
        }
        case OP_AMATMUL: {
            cr_avar a = pick_a(m, in), b = pick_a(m, in);
            push_a(m, cr_av_matmul(m->t, a, b));
            break;
        }
        case OP_GRAD:
        case OP_VJP:
        case OP_JAC:
        case OP_JVP:
        case OP_HVP:
        case OP_HESS:
            op_sweep(m, in, op);
            break;
        case OP_AGRAD:
        case OP_AVJP:
        case OP_AJVP:
        case OP_AHVP:
            op_asweep(m, in, op);
            break;
        case OP_STATS: {
            cr_tape_stats st;
            if (m->tt != NULL)
                cr_tape_stats_get(m->tt, &st);
            break;
        }
        case OP_RESET:
            cr_tape_reset(m->tt);
            drop_constants(m);
            break;
        case OP_CLEAR:
            cr_tape_clear_error(m->tt);
            break;
        case OP_FORGE: {
            /* A variable with the current recording's id (taken from a live variable)
             * and an index past the recording: just past it (inside the sweep's
             * workspace, which an arena block may hold: invisible to ASan) or far past. */
            cr_var x = pick_v(m, in);
            if (!cr_var_is_const(x)) {
                static const uint32_t far[4] = {1u << 16, 1u << 20, 1u << 29, UINT32_MAX - 1};
                uint8_t c = fuzz_u8(in);
                x.idx = c < 192 ? x.idx + 1 + (uint32_t)fuzz_below(in, 1024) : far[c & 3u];
                push_v(m, x);
            }
            break;
        }
        case OP_VG:
        case OP_RECORD:
        case OP_PREP:
            op_engine(m, in, op);
            break;
        case OP_PREP_ARR:
            op_prep_arrays(in);
            break;
        default:
            break;
        }
        if (g_trace && cr_tape_status(m->tt) != CR_OK)
            fprintf(stderr, "%s  -> %s: %s\n", m->inside ? "    " : "",
                    cr_status_name(cr_tape_status(m->tt)), cr_tape_errmsg(m->tt));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    cr_arena_reset(g_arena);
    cr_ctx_clear_error(g_ctx);
    uint8_t c = fuzz_u8(&in);
    static const uint32_t flags[4] = {0, CR_TAPE_FORWARD, CR_TAPE_SECOND_ORDER,
                                      CR_TAPE_FORWARD | CR_TAPE_SECOND_ORDER};
    cr_tape_params p = {.struct_size = sizeof p, .flags = flags[c & 3u]};
    if (c & 4u) {
        p.buffer = g_fixed;
        p.buffer_size = 1024u << (c >> 5 & 3u); /* 1 to 8 KiB: CR_EARENA soon */
    } else if (c & 8u) {
        p.block_size = 256;
    }
    cr_tape *t = NULL;
    if (cr_tape_new(g_ctx, &p, &t) != CR_OK)
        return 0;
    vm m = {.t = t, .tt = t};
    if (c & 16u) { /* operations name no tape: the thread's current one */
        cr_tape_set_current(t);
        m.t = NULL;
    }
    run(&m, &in, MAX_OPS);
    cr_tape_set_current(NULL);
    cr_tape_free(t);
    if (g_trace)
        fprintf(stderr, "live bytes of the context: %zu\n", g_alloc.live);
    return 0;
}
