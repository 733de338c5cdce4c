/*
 * Prepared gradients: a replay tape records f once, keeping with each operation its row,
 * which result it holds and its constants. Preparing turns the records into a flat program
 * (prepared_impl.h); a call evaluates it forwards at the new inputs (the arithmetic rows
 * inline from their one definition, other rows through their function pointers, array
 * functions and scalar rules kept as pullbacks through their rrules), checks the recorded
 * comparisons, and sweeps back over it. No call of f, no recording; nothing allocated after the
 * first call.
 */
#include <string.h>

#include <chainrules/rules_math.h>

#include "prepared_impl.h"

void cr_prepared_free(cr_prepared *p)
{
    if (p == NULL)
        return;
    cr_tape_free(p->tape);
    cr_ctx_dealloc(p->ctx, p->xs, (p->n ? p->n : 1) * sizeof *p->xs);
    cr_ctx_dealloc(p->ctx, p->vals, p->nws * sizeof *p->vals);
    cr_ctx_dealloc(p->ctx, p->tan, p->ntan * sizeof *p->tan);
    cr_ctx_dealloc(p->ctx, p->prog, p->nprog * sizeof *p->prog);
    cr_ctx_dealloc(p->ctx, p->fops, p->nfops * sizeof *p->fops);
    cr_ctx_dealloc(p->ctx, p->ain, p->n * sizeof *p->ain);
    cr_ctx_dealloc(p->ctx, p->aidx, p->n * sizeof *p->aidx);
    cr_ctx_dealloc(p->ctx, p, sizeof *p);
}

/* ---- The program ------------------------------------------------------------------------ */

/* The row of a built-in function value (set by the scalar-rule table). */
static inline const cr_scalar_rule *row_of(const cr_value *f)
{
    return (const cr_scalar_rule *)f->u.func.fn->udata;
}

/* The instruction code of a row: its arithmetic code when it is one of CR__ARITH_ROWS. */
static uint8_t row_code(const cr_scalar_rule *row)
{
#define MATCH(NAME, NIN, NOUT, PRIMAL, ...) \
    if (row == row_of(&cr_fn_##NAME))       \
        return (uint8_t)CR__ROP_##NAME;
    CR__ARITH_ROWS(MATCH)
#undef MATCH
    return (uint8_t)CR__ROP_ROW;
}

/* The source of argument j of a record: its operand, or a new constant slot after the
 * variables holding c (written when filling the program). */
static uint32_t arg_src(cr_prepared *p, bool fill, int8_t map, const uint32_t *ops, double c,
                        size_t *nc)
{
    if (map >= 0)
        return ops[map];
    size_t slot = (size_t)p->tape->nvars + (*nc)++;
    if (fill)
        p->vals[slot] = c;
    return (uint32_t)slot;
}

/* Walk the records of p's tape; with prog == NULL only count instructions and constants. */
static cr_status walk(cr_prepared *p, cr__rop *prog, size_t *nrec, size_t *nconst)
{
    cr_tape *t = p->tape;
    bool fill = prog != NULL;
    size_t i = 0, kin = 0, k = 0, nc = 0;
    for (cr__chunk *c = t->first; c != NULL; c = c->next) {
        cr__word *w = c->base;
        cr__word *end = c == t->chunk ? t->cur : c->end;
        while (w < end) {
            uint64_t h = w[0].u;
            cr__rinfo *info = (cr__rinfo *)(uintptr_t)w[1].cp;
            cr__word *pl = w + 2;
            unsigned kind = hdr_kind(h);
            uint32_t ops[CR_SCALAR_MAX_IN] = {hdr_a(h), hdr_b(h)};
            cr__rop r;
            memset(&r, 0, sizeof r);
            switch (kind) {
            case K_INPUT:
                r.code = CR__ROP_INPUT;
                r.res = (uint32_t)i;
                r.src[0] = (uint32_t)kin++;
                break;
            case K_GUARD:
                r.code = CR__ROP_GUARD;
                r.o = info->o;
                r.res = (uint32_t)k;
                r.ptr = info;
                for (size_t j = 0; j < 2; j++) {
                    int8_t map = info->map[j] < 0 ? -1 : (int8_t)j;
                    r.src[j] = arg_src(p, fill, map, ops, info->c[j], &nc);
                }
                break;
            case K_UNARY:
            case K_BINARY:
            case K_NARY: {
                if (kind == K_NARY) {
                    size_t m = hdr_a(h);
                    for (size_t j = 0; j < m; j++) {
                        uint64_t u = pl[m + j / 2].u;
                        ops[j] = (uint32_t)((j & 1) ? (u >> 32) : (u & 0xFFFFFFFFu));
                    }
                }
                r.code = row_code(info->row);
                r.nin = info->nin;
                r.o = info->o;
                r.res = (uint32_t)i;
                r.ptr = info;
                for (size_t j = 0; j < info->nin; j++)
                    r.src[j] = arg_src(p, fill, info->map[j], ops, info->c[j], &nc);
                break;
            }
            case K_ARRAY: {
                const cr__anode *nd = pl[0].p;
                r.code = CR__ROP_ARRAY;
                r.res = (uint32_t)i;
                r.nv = (uint8_t)hdr_a(h);
                r.ptr = pl[0].p;
                if (fill) {
                    if (nd->pull == NULL) /* an rrule (not a fused kernel) */
                        cr__prepared_resolve(p, &r, &nd->fv, nd->vals, nd->nargs);
                    p->has_arrays = true;
                    p->nres_slots += nd->out != CR_VAR_CONST;
                    for (size_t e = 0; e < nd->nout; e++)
                        p->nres_slots +=
                            nd->outs[e] != CR_VAR_CONST && (nd->outs[e] & CR__ASLOT_BIT) != 0;
                }
                break;
            }
            case K_GENERIC: {
                /* Every GENERIC record of a replay tape is written by cr__replay_call. */
                cr__greplay *g = (cr__greplay *)(uintptr_t)w[1].cp;
                r.code = CR__ROP_GENERIC;
                r.res = (uint32_t)i;
                r.nv = (uint8_t)hdr_a(h);
                r.ptr = g;
                if (fill) {
                    if (g->mode == CR__GREPLAY_RRULE)
                        cr__prepared_resolve(p, &r, &g->fv, g->vals, g->node.nargs);
                    p->has_arrays = true;
                }
                break;
            }
            default:
                return cr_ctx_error(p->ctx, CR_EUNIMPL,
                                    "prepared gradient: record %zu (kind %u) cannot be replayed", k,
                                    kind);
            }
            if (fill) {
                prog[k] = r;
                if (rec_vars(h) > 0 && p->y.idx != CR_VAR_CONST && p->y.idx >= i &&
                    p->y.idx < i + rec_vars(h))
                    p->ntop = k + 1;
            }
            i += rec_vars(h);
            w += t->pre + rec_words(h);
            k++;
        }
    }
    *nrec = k;
    *nconst = nc;
    return CR_OK;
}

/* The compact program of the first-order replay (p->fops + 1): prog's nrec instructions,
 * then CR__ROP_END, where the forward pass stops. The reverse pass stops at the CR__ROP_END
 * just before the first instruction it sweeps (p->fops[0], or the last of the leading
 * inputs, which the forward pass does not run either). */
static cr_status build_compact(cr_prepared *p, size_t nrec)
{
    p->fops = cr_ctx_alloc(p->ctx, (nrec + 2) * sizeof *p->fops);
    if (p->fops == NULL)
        return CR_ENOMEM;
    p->nfops = nrec + 2;
    cr__fop *fops = p->fops + 1;
    for (size_t k = 0; k < nrec; k++) {
        const cr__rop *r = &p->prog[k];
        cr__fop *f = &fops[k];
        f->code = r->code;
        f->res = r->res;
        /* (an array or GENERIC instruction holds its rule where the others hold src) */
        bool has_src = r->code < CR__ROP_ARRAY;
        f->src[0] = has_src ? r->src[0] : 0;
        f->src[1] = has_src && (r->code == CR__ROP_GUARD || r->nin > 1) ? r->src[1] : 0;
    }
    fops[nrec] = (cr__fop){.code = CR__ROP_END};
    p->fops[0] = fops[nrec];
    size_t first = p->nlead < p->ntop ? p->nlead : p->ntop;
    fops[(ptrdiff_t)first - 1] = fops[nrec];
    return CR_OK;
}

cr_status cr__prepared_build(cr_prepared *p)
{
    size_t nrec, nconst;
    cr_status st = walk(p, NULL, &nrec, &nconst);
    if (st != CR_OK)
        return st;
    size_t nv = (size_t)p->tape->nvars + nconst;
    p->nws = 2 * (nv ? nv : 1);
    p->nprog = nrec ? nrec : 1;
    p->vals = cr_ctx_alloc(p->ctx, p->nws * sizeof *p->vals);
    p->prog = cr_ctx_alloc(p->ctx, p->nprog * sizeof *p->prog);
    if (p->vals == NULL || p->prog == NULL) {
        if (p->vals == NULL)
            p->nws = 0;
        if (p->prog == NULL)
            p->nprog = 0;
        return CR_ENOMEM;
    }
    memset(p->vals, 0, p->nws * sizeof *p->vals);
    memset(p->prog, 0, p->nprog * sizeof *p->prog);
    p->adj = p->vals + p->nws / 2;
    p->ntop = 0;
    p->nres_slots = 0;
    st = walk(p, p->prog, &nrec, &nconst);
    p->nprog = nrec ? nrec : 1;
    /* The inputs recorded first, in order (the usual case), are copied in one go. */
    p->nlead = 0;
    while (p->nlead < nrec && p->prog[p->nlead].code == CR__ROP_INPUT &&
           p->prog[p->nlead].res == p->nlead && p->prog[p->nlead].src[0] == p->nlead)
        p->nlead++;
    p->mark = cr_arena_get_mark(p->tape->arena);
    if (st == CR_OK)
        st = build_compact(p, nrec);
    return st;
}

void cr__prepared_begin(cr_prepared *p)
{
    if (p->tape->status != CR_OK) /* (a tape without error has nothing to clear) */
        cr_tape_clear_error(p->tape);
    if (p->has_arrays)
        cr_arena_rewind(p->tape->arena, p->mark);
}

/* ---- Replay ----------------------------------------------------------------------------- */

static bool compare(cr_cmp op, double a, double b)
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

static const char *const k_cmp_names[] = {"<", "<=", ">", ">=", "==", "!="};

static cr_status guard_failed(cr_prepared *p, const cr__rop *r, double a, double b)
{
    const cr__rinfo *info = r->ptr;
    return cr_ctx_error(p->ctx, CR_EDOMAIN,
                        "prepared gradient: the comparison %g %s %g (record %u) was %s when "
                        "recorded and is %s at these inputs: the recording does not describe "
                        "the function here; prepare it again at these inputs",
                        a, k_cmp_names[info->o <= 5 ? info->o : 5], b, (unsigned)r->res,
                        info->outcome ? "true" : "false", info->outcome ? "false" : "true");
}

cr_status cr__prepared_guard(cr_prepared *p, const cr__rop *r, const double *v)
{
    const cr__rinfo *info = r->ptr;
    double a = v[r->src[0]], b = v[r->src[1]];
    return compare((cr_cmp)r->o, a, b) == info->outcome ? CR_OK : guard_failed(p, r, a, b);
}

/*
 * The first-order replay runs the compact program (cr__fop): 16 bytes per instruction
 * instead of 64, and no partials of the arithmetic rows stored or loaded. The forward pass
 * evaluates only their primals; the reverse pass evaluates their partials again from the
 * same row (CR__ARITH_ROWS, the one definition) at the stored values of the arguments and
 * the result: those of add, sub and neg are constants and fold away, mul's are its
 * arguments, div's cost the two divisions the forward pass no longer makes. Rows through
 * their function pointers keep their partials in their 64-byte instruction, and comparisons,
 * array functions and GENERIC records are read from there too.
 *
 * Dispatch: with GCC and Clang each step ends with its own indirect jump through a table of
 * label addresses (threaded code, as sweep_scalar in sweep.c); elsewhere (or with
 * CR_PREPARED_SWITCH defined) the same steps are the cases of a switch.
 */
#if defined(__GNUC__) && !defined(CR_PREPARED_SWITCH)
#define REPLAY_THREADED 1
#else
#define REPLAY_THREADED 0
#endif
/* GCC merges the steps' identical tails into one shared indirect jump, undoing the
 * threading: not in the two passes. */
#if REPLAY_THREADED && !defined(__clang__)
#define REPLAY_OPT __attribute__((optimize("no-crossjumping")))
#else
#define REPLAY_OPT
#endif

/* A row through its function pointer, forwards: its value and its partials (kept in r). */
static inline void row_forward(cr__rop *r, double *v)
{
    const cr__rinfo *info = r->ptr;
    size_t nin = r->nin;
    double xin[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT];
    double D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    for (size_t j = 0; j < nin; j++)
        xin[j] = v[r->src[j]];
    info->row->f64(xin, Y, D);
    v[r->res] = Y[r->o];
    for (size_t j = 0; j < nin; j++)
        r->p[j] = D[r->o * nin + j];
}

/* An array function or a GENERIC record, forwards: its rule (or kernel) called again. */
static NOINLINE cr_status call_forward(cr_prepared *p, const cr__rop *r, double *v)
{
    if (r->code == CR__ROP_GENERIC)
        return cr__prepared_grerun(p, r, v);
    cr__anode *nd = r->ptr;
    return nd->pull != NULL ? cr__kernel_rerun(p->tape, nd, v, r->res) /* loops */
                            : cr__prepared_rerun(p, r, v);
}

/* An array function or a GENERIC record, backwards: its pullback (or kernel). */
static NOINLINE cr_status call_reverse(cr_prepared *p, const cr__rop *r, double *adj)
{
    if (r->code == CR__ROP_GENERIC)
        return cr__prepared_gpull(p, r, adj);
    const cr__anode *nd = r->ptr;
    const double *g = r->nv ? &adj[r->res] : NULL;
    return nd->pull != NULL ? nd->pull(p->tape, nd, g, adj) /* a kernel */
                            : cr__array_pull(p->tape, nd, g, adj);
}

// clang-format off
/* Evaluate the program forwards: new values, the partials of the rows called through their
 * pointers, comparisons checked, rules called again. */
static REPLAY_OPT cr_status forward(cr_prepared *p, const double *inputs)
{
    double *v = p->vals;
    const cr__fop *const fops = p->fops + 1;
    const cr__fop *r = fops + p->nlead;
    if (p->nlead > 0)
        memcpy(v, inputs, p->nlead * sizeof *v);
    /* STEP(C) opens the step of code C; NEXT ends a step: on to the next instruction. */
#if REPLAY_THREADED
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic" /* labels as values and goto * */
#define STEP(C) f_##C:
#define NEXT           \
    do {               \
        r++;           \
        goto *step[r->code]; \
    } while (0)
#define LABEL(NAME, NIN, NOUT, PRIMAL, ...) [CR__ROP_##NAME] = &&f_CR__ROP_##NAME,
    static const void *const step[CR__ROP_END + 1] = {
        CR__ARITH_ROWS(LABEL)
        [CR__ROP_ROW] = &&f_CR__ROP_ROW,     [CR__ROP_INPUT] = &&f_CR__ROP_INPUT,
        [CR__ROP_GUARD] = &&f_CR__ROP_GUARD, [CR__ROP_ARRAY] = &&f_CR__ROP_ARRAY,
        [CR__ROP_GENERIC] = &&f_CR__ROP_ARRAY, [CR__ROP_END] = &&out};
#undef LABEL
    goto *step[r->code];
    {
#else
#define STEP(C) case C:
#define NEXT    continue
    for (;; r++) {
        switch (r->code) {
        case CR__ROP_GENERIC:
#endif
    STEP(CR__ROP_ARRAY) {
        cr_status st = call_forward(p, &p->prog[r - fops], v);
        if (st != CR_OK)
            return st;
    }
    NEXT;
#define ARITH(NAME, NIN, NOUT, PRIMAL, ...)         \
    STEP(CR__ROP_##NAME) {                          \
        double x_[2], Y[1];                         \
        x_[0] = v[r->src[0]];                       \
        x_[1] = (NIN) > 1 ? v[r->src[1]] : 0.0;     \
        {                                           \
            const double *x = x_;                   \
            PRIMAL;                                 \
        }                                           \
        v[r->res] = Y[0];                           \
    }                                               \
    NEXT;
    CR__ARITH_ROWS(ARITH)
#undef ARITH
    STEP(CR__ROP_ROW)
        row_forward(&p->prog[r - fops], v);
        NEXT;
    STEP(CR__ROP_INPUT)
        v[r->res] = inputs[r->src[0]];
        NEXT;
    STEP(CR__ROP_GUARD) {
        const cr__rop *q = &p->prog[r - fops];
        const cr__rinfo *info = q->ptr;
        double a = v[r->src[0]], b = v[r->src[1]];
        if (compare((cr_cmp)q->o, a, b) != info->outcome)
            return guard_failed(p, q, a, b);
    }
    NEXT;
#if REPLAY_THREADED
    }
#pragma GCC diagnostic pop
#else
        default: /* CR__ROP_END */
            goto out;
        }
    }
#endif
#undef STEP
#undef NEXT
out:
    return CR_OK;
}

/* Sweep back over the instructions that can reach y. The adjoints of constant slots
 * receive contributions nobody reads. */
static REPLAY_OPT cr_status reverse(cr_prepared *p)
{
    double *adj = p->adj;
    const double *v = p->vals;
    memset(adj, 0, p->nws / 2 * sizeof *adj);
    adj[p->y.idx] = 1.0;
    /* (cr_prepared_value_and_gradient_arrays leaves the accumulators clear after each call) */
    if (p->has_arrays && !p->arrays)
        cr__array_clear(p->tape);
    const cr__fop *const fops = p->fops + 1;
    const cr__fop *r = fops + p->ntop;
    /* STEP(C) opens the step of code C; NEXT ends a step: on to the previous instruction
     * (CR__ROP_END before the first one to sweep: out). */
#if REPLAY_THREADED
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic" /* labels as values and goto * */
#define STEP(C) r_##C:
#define NEXT                 \
    do {                     \
        r--;                 \
        goto *step[r->code]; \
    } while (0)
#define LABEL(NAME, NIN, NOUT, PRIMAL, ...) [CR__ROP_##NAME] = &&r_CR__ROP_##NAME,
    static const void *const step[CR__ROP_END + 1] = {
        CR__ARITH_ROWS(LABEL)
        [CR__ROP_ROW] = &&r_CR__ROP_ROW,     [CR__ROP_INPUT] = &&r_CR__ROP_INPUT,
        [CR__ROP_GUARD] = &&r_CR__ROP_INPUT, [CR__ROP_ARRAY] = &&r_CR__ROP_ARRAY,
        [CR__ROP_GENERIC] = &&r_CR__ROP_ARRAY, [CR__ROP_END] = &&out};
#undef LABEL
    NEXT;
    {
#else
#define STEP(C) case C:
#define NEXT    continue
    for (;;) {
        switch ((--r)->code) {
        case CR__ROP_GENERIC:
#endif
    STEP(CR__ROP_ARRAY) {
        cr_status st = call_reverse(p, &p->prog[r - fops], adj);
        if (st != CR_OK)
            return st;
    }
    NEXT;
    /* The partials from the row again, at the values of the forward pass (Y: the result). */
#define ARITH(NAME, NIN, NOUT, PRIMAL, ...)                  \
    STEP(CR__ROP_##NAME) {                                   \
        double x_[2], Y[1], D[2];                            \
        uint32_t s0 = r->src[0], s1 = r->src[1];             \
        double g = adj[r->res];                              \
        x_[0] = v[s0];                                       \
        x_[1] = (NIN) > 1 ? v[s1] : 0.0;                     \
        Y[0] = v[r->res];                                    \
        {                                                    \
            const double *x = x_;                            \
            __VA_ARGS__;                                     \
            (void)x;                                         \
            (void)Y;                                         \
        }                                                    \
        adj[s0] += D[0] * g;                                 \
        if ((NIN) > 1)                                       \
            adj[s1] += D[(NIN) > 1 ? 1 : 0] * g;             \
    }                                                        \
    NEXT;
    CR__ARITH_ROWS(ARITH)
#undef ARITH
    STEP(CR__ROP_ROW) {
        const cr__rop *q = &p->prog[r - fops];
        double g = adj[q->res];
        for (size_t j = 0; j < q->nin; j++)
            adj[q->src[j]] += q->p[j] * g;
    }
    NEXT;
    STEP(CR__ROP_INPUT) /* and comparisons */
        NEXT;
#if REPLAY_THREADED
    }
#pragma GCC diagnostic pop
#else
        case CR__ROP_END:
            goto out;
        default: /* inputs, comparisons */
            break;
        }
    }
#endif
#undef STEP
#undef NEXT
out:
    return CR_OK;
}
// clang-format on

cr_status cr__prepared_run(cr_prepared *p, const double *x)
{
    cr_status st = forward(p, x);
    return st == CR_OK ? reverse(p) : st;
}

cr_status cr__prepared_new(cr_ctx *ctx, const cr_engine *eng, size_t n, cr_prepared **out)
{
    cr_prepared *p = cr_ctx_alloc(ctx, sizeof *p);
    *out = p;
    if (p == NULL)
        return CR_ENOMEM;
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->n = n;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    cr_status st = cr_tape_new(ctx, &tp, &p->tape);
    if (st == CR_OK)
        cr__tape_make_replay(p->tape);
    return st;
}

/* ---- Scalar inputs ---------------------------------------------------------------------- */

cr_status cr__prepare_scalar(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                             const double *x, size_t n, const char *who, cr_prepared **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "%s: out is NULL", who);
    *out = NULL;
    if (ctx == NULL)
        return CR_EINVAL;
    if (f == NULL || (n > 0 && x == NULL))
        return cr_ctx_error(ctx, CR_EINVAL, "%s: NULL function or inputs", who);
    cr_prepared *p;
    cr_status st = cr__prepared_new(ctx, eng, n, &p);
    if (p == NULL)
        return st;
    if (st == CR_OK) {
        p->xs = cr_ctx_alloc(ctx, (n ? n : 1) * sizeof *p->xs);
        if (p->xs == NULL)
            st = CR_ENOMEM;
    }
    if (st == CR_OK) {
        st = cr_tape_record(p->tape, f, env, x, n, p->xs, &p->y, 1);
        if (st != CR_OK && cr_tape_status(p->tape) != CR_OK)
            cr_ctx_error(ctx, st, "%s", cr_tape_errmsg(p->tape));
    }
    if (st == CR_OK && p->tape->ninputs != n)
        st = cr_ctx_error(ctx, CR_EINVAL,
                          "%s: the function made %zu inputs of its own; a "
                          "prepared gradient replays with the given inputs only",
                          who, p->tape->ninputs - n);
    if (st == CR_OK)
        st = cr__prepared_build(p);
    if (st == CR_OK && p->tape->naslots != p->nres_slots)
        st = cr_ctx_error(ctx, CR_EINVAL,
                          "%s: the function made %zu array inputs of its own; "
                          "a prepared gradient replays with the given inputs only",
                          who, (size_t)(p->tape->naslots - p->nres_slots));
    if (st != CR_OK) {
        cr_prepared_free(p);
        return st;
    }
    *out = p;
    return CR_OK;
}

cr_status cr_prepare_gradient(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                              const double *x, size_t n, cr_prepared **out)
{
    return cr__prepare_scalar(ctx, eng, f, env, x, n, "cr_prepare_gradient", out);
}

cr_status cr_prepared_value_and_gradient(cr_prepared *p, const double *x, size_t n, double *y,
                                         double *grad)
{
    if (p == NULL)
        return CR_EINVAL;
    if (p->arrays)
        return cr_ctx_error(p->ctx, CR_EINVAL,
                            "cr_prepared_value_and_gradient: prepared for arrays; call "
                            "cr_prepared_value_and_gradient_arrays");
    if ((n > 0 && (x == NULL || grad == NULL)))
        return cr_ctx_error(p->ctx, CR_EINVAL, "cr_prepared_value_and_gradient: NULL x or grad");
    if (n != p->n)
        return cr_ctx_error(p->ctx, CR_ESHAPE,
                            "prepared gradient: prepared for %zu inputs, %zu given", p->n, n);
    if (p->y.idx == CR_VAR_CONST) {
        if (y != NULL)
            *y = p->y.v;
        memset(grad, 0, n * sizeof *grad);
        return CR_OK;
    }
    cr__prepared_begin(p);
    /* A failed replay (a comparison that changed) leaves values and partials of two
     * points; the next replay rewrites all of them before any sweep, so the prepared
     * gradient stays usable. */
    cr_status st = cr__prepared_run(p, x);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        grad[j] = p->adj[p->xs[j].idx];
    if (y != NULL)
        *y = p->vals[p->y.idx];
    if (p->has_arrays)
        cr__array_clear(p->tape);
    return CR_OK;
}
