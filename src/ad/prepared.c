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
    cr_ctx_dealloc(p->ctx, p->fcodes, 2 * p->nfops);
    cr_ctx_dealloc(p->ctx, p->ain, p->n * sizeof *p->ain);
    cr_ctx_dealloc(p->ctx, p->aidx, p->n * sizeof *p->aidx);
    cr_ctx_dealloc(p->ctx, p->yrec, p->nprog * sizeof *p->yrec);
    cr_ctx_dealloc(p->ctx, p->gso, p->ngso * sizeof *p->gso);
    cr_ctx_dealloc(p->ctx, p->lrows, p->nlrows * sizeof *p->lrows);
    cr_ctx_dealloc(p->ctx, p->lguards, p->nlguards * sizeof *p->lguards);
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
    for (cr__chunk *c = t->store.first; c != NULL; c = c->next) {
        cr__word *w = c->base;
        cr__word *end = c == t->store.chunk ? t->cur : c->end;
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
                    if (nd->ops->calls_rule) /* an rrule (not a fused kernel) */
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

/* ---- The compact program ----------------------------------------------------------------- */

/*
 * Where an arithmetic step reads an operand (forward) or sends its contribution to the
 * operand's adjoint (reverse), and where it takes its own result's adjoint (reverse): in
 * memory (v or adj), in P or in S, two registers of the pass. Memory is always right;
 * the registers take the dependency chains out of memory (a value stored by one step and
 * loaded by a later one waits for the store to be forwarded, several cycles, where a
 * register costs nothing: sum = sum + t over 30 points is 30 such waits in each pass).
 *
 * Forward: every arithmetic step leaves its result in P (and in v), so the next step reads
 * it there; a step whose result is read by an arithmetic step further on also leaves it in
 * S, when S's value has no reader left (an accumulator stays in S through its loop).
 * Reverse (programs without array functions or GENERIC records, whose arguments the program
 * does not name): a variable made by an arithmetic step and read by exactly one arithmetic
 * step (once or on both sides) and by nothing else that is swept gets its adjoint in a
 * register: the reader starts it at 0 and adds its contributions there (the same sums as in
 * adj, in the same order), the maker takes it from there. P when the maker is the step just
 * before the reader, S when S is free until the maker.
 */
enum { LOC_M, LOC_P, LOC_S };
#define FCODE(OP, F0, F1, W) ((OP)*18 + (F0)*6 + (F1)*2 + (W))
#define RCODE(OP, G, D0, D1) ((OP)*27 + (G)*9 + (D0)*3 + (D1))
enum {
    FC_ROW = CR__ARITH_NROWS * 18,
    FC_INPUT,
    FC_GUARD,
    FC_CALL,
    FC_LROW1,
    FC_LROW2,
    FC_LGUARD,
    FC_END
};
enum { RC_ROW = CR__ARITH_NROWS * 27, RC_SKIP, RC_CALL, RC_LROW1, RC_LROW2, RC_INPUT, RC_END };
/* No variable (an enum constant must fit an int: UINT32_MAX does not). */
#define NONE UINT32_MAX

static bool is_arith(const cr__rop *r)
{
    return r->code < CR__ARITH_NROWS;
}

/* Whether instruction r is a row the compact program holds on its own (cr__lrow): one
 * result, at most two arguments. */
static bool is_lrow(const cr__rop *r)
{
    return r->code == CR__ROP_ROW && r->nin <= 2 && ((const cr__rinfo *)r->ptr)->row->nout == 1;
}

/* The forward codes: operands read from P or S while they hold them. last[u]: the last
 * arithmetic step reading variable u (0: none). */
static void forward_codes(cr_prepared *p, size_t nrec, uint32_t *last)
{
    uint8_t *fc = p->fcodes + 1;
    uint32_t nvars = (uint32_t)p->tape->nvars;
    memset(last, 0, nvars * sizeof *last);
    for (size_t k = 0; k < nrec; k++) {
        const cr__rop *r = &p->prog[k];
        for (size_t j = 0; is_arith(r) && j < r->nin; j++)
            if (r->src[j] < nvars)
                last[r->src[j]] = (uint32_t)k;
    }
    uint32_t pv = NONE, sv = NONE; /* the variables P and S hold */
    for (size_t k = p->nlead; k < nrec; k++) {
        const cr__rop *r = &p->prog[k];
        if (!is_arith(r)) {
            pv = NONE;
            continue;
        }
        int loc[2] = {LOC_M, LOC_M};
        for (size_t j = 0; j < r->nin; j++)
            loc[j] = r->src[j] == pv ? LOC_P : r->src[j] == sv ? LOC_S : LOC_M;
        bool w = (sv == NONE || last[sv] <= k) && last[r->res] > k + 1;
        if (w)
            sv = r->res;
        pv = r->res;
        fc[k] = (uint8_t)FCODE(r->code, loc[0], loc[1], w);
    }
}

/* The reverse codes: adjoints passed in P or S. n[u]: swept steps reading u, then where
 * u's adjoint goes; made[u]: 1 + the arithmetic step making u (0: another kind). */
static void reverse_codes(cr_prepared *p, size_t first, uint32_t *n, uint32_t *made)
{
    uint8_t *rc = p->rcodes + 1;
    uint32_t nvars = (uint32_t)p->tape->nvars;
    memset(n, 0, nvars * sizeof *n);
    memset(made, 0, nvars * sizeof *made);
    for (size_t k = first; k < p->ntop; k++) {
        const cr__rop *r = &p->prog[k];
        if (is_arith(r))
            made[r->res] = (uint32_t)k + 1;
        if (!is_arith(r) && r->code != CR__ROP_ROW)
            continue;
        for (size_t j = 0; j < r->nin; j++)
            if (r->src[j] < nvars && (j == 0 || r->src[j] != r->src[0]))
                n[r->src[j]]++;
    }
    for (size_t u = 0; u < nvars; u++) /* from here on: LOC_* + 1 once decided */
        if (n[u] != 1 || made[u] == 0)
            n[u] = 0;
    uint32_t sv = NONE; /* the variable whose adjoint S holds until its maker */
    for (size_t k = p->ntop; k-- > first;) {
        const cr__rop *r = &p->prog[k];
        if (!is_arith(r))
            continue;
        int g = n[r->res] > LOC_M + 1 ? (int)n[r->res] - 1 : LOC_M;
        if (g == LOC_S)
            sv = NONE;
        int loc[2] = {LOC_M, LOC_M};
        for (size_t j = 0; j < r->nin; j++) {
            uint32_t u = r->src[j];
            if (j == 1 && u == r->src[0]) {
                loc[1] = loc[0];
            } else if (u < nvars && n[u] == 1) {
                loc[j] = made[u] == k ? LOC_P : sv == NONE ? LOC_S : LOC_M;
                if (loc[j] == LOC_S)
                    sv = u;
                n[u] = (uint32_t)loc[j] + 1;
            }
        }
        rc[k] = (uint8_t)RCODE(r->code, g, loc[0], loc[1]);
    }
}

/* The compact program of the first-order replay (p->fops + 1): prog's nrec instructions,
 * then an end, where the forward pass stops. The reverse pass stops at the end just before
 * the first instruction it sweeps (p->fops[0], or the last of the leading inputs, which the
 * forward pass does not run either). */
static cr_status build_compact(cr_prepared *p, size_t nrec)
{
    size_t nvars = p->tape->nvars ? p->tape->nvars : 1;
    p->fops = cr_ctx_alloc(p->ctx, (nrec + 2) * sizeof *p->fops);
    p->fcodes = cr_ctx_alloc(p->ctx, 2 * (nrec + 2));
    if (p->fops == NULL || p->fcodes == NULL) {
        cr_ctx_dealloc(p->ctx, p->fops, (nrec + 2) * sizeof *p->fops);
        cr_ctx_dealloc(p->ctx, p->fcodes, 2 * (nrec + 2));
        p->fops = NULL;
        p->fcodes = NULL;
        return CR_ENOMEM;
    }
    p->nfops = nrec + 2;
    p->rcodes = p->fcodes + p->nfops;
    uint8_t *fc = p->fcodes + 1, *rc = p->rcodes + 1;
    uint32_t *scratch = cr_ctx_alloc(p->ctx, 2 * nvars * sizeof *scratch);
    if (scratch == NULL)
        return CR_ENOMEM;
    cr__fop *fops = p->fops + 1;
    static const uint8_t fother[] = {FC_ROW, FC_INPUT, FC_LGUARD, FC_CALL, FC_CALL};
    static const uint8_t rother[] = {RC_ROW, RC_INPUT, RC_SKIP, RC_CALL, RC_CALL};
    size_t nl = 0, ng = 0;
    for (size_t k = 0; k < nrec; k++) {
        nl += is_lrow(&p->prog[k]);
        ng += p->prog[k].code == CR__ROP_GUARD;
    }
    p->lrows = cr_ctx_alloc(p->ctx, (nl ? nl : 1) * sizeof *p->lrows);
    p->nlrows = p->lrows != NULL ? (nl ? nl : 1) : 0;
    p->lguards = cr_ctx_alloc(p->ctx, (ng ? ng : 1) * sizeof *p->lguards);
    p->nlguards = p->lguards != NULL ? (ng ? ng : 1) : 0;
    if (p->lrows == NULL || p->lguards == NULL) {
        cr_ctx_dealloc(p->ctx, scratch, 2 * nvars * sizeof *scratch);
        return CR_ENOMEM;
    }
    nl = ng = 0;
    p->nlrows_top = 0;
    for (size_t k = 0; k < nrec; k++) {
        const cr__rop *r = &p->prog[k];
        cr__fop *f = &fops[k];
        /* (arithmetic steps: memory everywhere, until the passes' codes below) */
        fc[k] = is_arith(r) ? (uint8_t)FCODE(r->code, 0, 0, 0) : fother[r->code - CR__ROP_ROW];
        rc[k] = is_arith(r) ? (uint8_t)RCODE(r->code, 0, 0, 0) : rother[r->code - CR__ROP_ROW];
        /* (an array or GENERIC instruction holds its rule where the others hold src) */
        bool has_src = r->code < CR__ROP_ARRAY;
        f->src[0] = has_src ? r->src[0] : 0;
        f->src[1] = has_src && (r->code == CR__ROP_GUARD || r->nin > 1) ? r->src[1] : 0;
        if (is_lrow(r)) {
            fc[k] = r->nin == 1 ? FC_LROW1 : FC_LROW2;
            rc[k] = r->nin == 1 ? RC_LROW1 : RC_LROW2;
            p->lrows[nl] = (cr__lrow){.row = ((const cr__rinfo *)r->ptr)->row};
            nl++;
            if (k < p->ntop)
                p->nlrows_top = nl;
        } else if (r->code == CR__ROP_GUARD) {
            const cr__rinfo *info = r->ptr;
            p->lguards[ng++] = (cr__lguard){.rec = r->res, .cmp = r->o, .outcome = info->outcome};
        }
    }
    size_t first = p->nlead < p->ntop ? p->nlead : p->ntop;
    forward_codes(p, nrec, scratch);
    if (!p->has_arrays)
        reverse_codes(p, first, scratch, scratch + nvars);
    cr_ctx_dealloc(p->ctx, scratch, 2 * nvars * sizeof *scratch);
    /* The variables made before the reverse pass's first step, where its count starts. */
    if (p->ntop > 0) {
        const cr__rop *t = &p->prog[p->ntop - 1]; /* (it makes y: not a comparison) */
        p->res_top = t->res + (t->code >= CR__ROP_ARRAY ? t->nv : 1u);
    }
    fops[nrec] = (cr__fop){{0, 0}};
    p->fops[0] = fops[nrec];
    fc[nrec] = FC_END;
    rc[nrec] = RC_END;
    p->fcodes[0] = FC_END;
    rc[(ptrdiff_t)first - 1] = RC_END;
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
    p->nvar = p->tape->nvars;
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

/* Release the program and the replay tape of a lean first-order program (prepared_impl.h):
 * a call reads only the compact program, its rows and comparisons and the workspace. */
static void make_lean(cr_prepared *p)
{
    if (p->has_arrays || p->arrays || p->tan != NULL || (p->tape->flags & CR__TAPE_SO_CHECK) != 0)
        return;
    for (size_t k = 0; k < p->nprog; k++)
        if (p->prog[k].code != CR__ROP_GUARD && p->prog[k].code != CR__ROP_INPUT &&
            !is_arith(&p->prog[k]) && !is_lrow(&p->prog[k]))
            return;
    cr_ctx_dealloc(p->ctx, p->prog, p->nprog * sizeof *p->prog);
    p->prog = NULL;
    p->nprog = 0;
    cr_tape_free(p->tape);
    p->tape = NULL;
    p->lean = true;
}

void cr__prepared_begin(cr_prepared *p)
{
    if (p->tape == NULL) /* a lean program: no tape, nothing to clear or rewind */
        return;
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

static NOINLINE cr_status guard_failed(cr_prepared *p, unsigned cmp, unsigned rec, bool outcome,
                                       double a, double b)
{
    return cr_ctx_error(p->ctx, CR_EDOMAIN,
                        "prepared gradient: the comparison %g %s %g (record %u) was %s when "
                        "recorded and is %s at these inputs: the recording does not describe "
                        "the function here; prepare it again at these inputs",
                        a, k_cmp_names[cmp <= 5 ? cmp : 5], b, rec, outcome ? "true" : "false",
                        outcome ? "false" : "true");
}

cr_status cr__prepared_guard(cr_prepared *p, const cr__rop *r, const double *v)
{
    const cr__rinfo *info = r->ptr;
    double a = v[r->src[0]], b = v[r->src[1]];
    return compare((cr_cmp)r->o, a, b) == info->outcome
               ? CR_OK
               : guard_failed(p, r->o, (unsigned)r->res, info->outcome, a, b);
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

/* An array function or a GENERIC record, forwards: evaluated again by its node kind. */
static NOINLINE cr_status call_forward(cr_prepared *p, const cr__rop *r, double *v)
{
    return cr__rop_kind(r)->rerun(p, r, v);
}

/* An array function or a GENERIC record, backwards: its node kind's reverse step. */
static NOINLINE cr_status call_reverse(cr_prepared *p, const cr__rop *r, double *adj)
{
    return cr__rop_kind(r)->replay_pull(p, r, adj);
}

/* Each arithmetic row once as two functions: its value, and its partials at given
 * arguments and result (Y[0] in the row). */
#define ROW_FNS(NAME, NIN, NOUT, PRIMAL, ...)                                   \
    enum { NIN_##NAME = (NIN) };                                                \
    static inline double value_##NAME(double a, double b)                       \
    {                                                                           \
        double x_[2] = {a, b}, Y[1];                                            \
        const double *x = x_;                                                   \
        PRIMAL;                                                                 \
        (void)x;                                                                \
        return Y[0];                                                            \
    }                                                                           \
    static inline void partials_##NAME(double a, double b, double y, double *D) \
    {                                                                           \
        double x_[2] = {a, b}, Y[1] = {y};                                      \
        const double *x = x_;                                                   \
        __VA_ARGS__;                                                            \
        (void)x;                                                                \
        (void)Y;                                                                \
    }
CR__ARITH_ROWS(ROW_FNS)
#undef ROW_FNS

/* The arithmetic steps, one per combination of locations: VARIANTS(LEAF, NAME) expands
 * LEAF(NAME, a, b, c) for a, b and c in M, P, S, FVARIANTS(LEAF, NAME) for a, b in M, P, S
 * and c in M, P (the forward result "not kept in S" and "kept in S"). */
#define VARIANTS(LEAF, NAME) \
    VAR1(LEAF, VAR3, NAME, M) VAR1(LEAF, VAR3, NAME, P) VAR1(LEAF, VAR3, NAME, S)
#define FVARIANTS(LEAF, NAME) \
    VAR1(LEAF, VAR2, NAME, M) VAR1(LEAF, VAR2, NAME, P) VAR1(LEAF, VAR2, NAME, S)
#define VAR1(LEAF, LAST, NAME, A) \
    LAST(LEAF, NAME, A, M) LAST(LEAF, NAME, A, P) LAST(LEAF, NAME, A, S)
#define VAR2(LEAF, NAME, A, B) LEAF(NAME, A, B, M) LEAF(NAME, A, B, P)
#define VAR3(LEAF, NAME, A, B) LEAF(NAME, A, B, M) LEAF(NAME, A, B, P) LEAF(NAME, A, B, S)
enum { L_M = LOC_M, L_P = LOC_P, L_S = LOC_S };

// clang-format off
/* Evaluate the program forwards: new values, the partials of the rows called through their
 * pointers, comparisons checked, rules called again. */
static REPLAY_OPT cr_status forward(cr_prepared *p, const double *inputs)
{
    double *v = p->vals;
    const cr__fop *const fops = p->fops + 1;
    const cr__fop *r = fops + p->nlead;
    const uint8_t *c = p->fcodes + 1 + p->nlead; /* r's code */
    double *vr = v + p->nlead; /* the next variable an instruction makes */
    cr__lrow *lr = p->lrows;
    const cr__lguard *lg = p->lguards;
    double P = 0.0, S = 0.0;
    if (p->nlead > 0)
        memcpy(v, inputs, p->nlead * sizeof *v);
#define GET_M(j) v[r->src[j]]
#define GET_P(j) P
#define GET_S(j) S
    /* STEP(C) opens the step of code C; NEXT ends a step: on to the next instruction. */
#if REPLAY_THREADED
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic" /* labels as values and goto * */
#define STEP(C, L) L:
#define NEXT                  \
    do {                      \
        r++;                  \
        c++;                  \
        goto *step[*c];       \
    } while (0)
#define LABEL(NAME, A, B, W) [FCODE(CR__ROP_##NAME, L_##A, L_##B, L_##W == L_P)] = &&f_##NAME##A##B##W,
#define LABELS(NAME, NIN, NOUT, PRIMAL, ...) FVARIANTS(LABEL, NAME)
    static const void *const step[FC_END + 1] = {
        CR__ARITH_ROWS(LABELS)
        [FC_ROW] = &&f_row, [FC_INPUT] = &&f_input, [FC_GUARD] = &&f_guard,
        [FC_CALL] = &&f_call, [FC_LROW1] = &&f_lrow1, [FC_LROW2] = &&f_lrow2,
        [FC_LGUARD] = &&f_lguard, [FC_END] = &&out};
#undef LABEL
#undef LABELS
    goto *step[*c];
    {
#else
#define STEP(C, L) case C:
#define NEXT    continue
    for (;; r++, c++) {
        switch (*c) {
#endif
    STEP(FC_CALL, f_call) {
        const cr__rop *q = &p->prog[r - fops];
        cr_status st = call_forward(p, q, v);
        if (st != CR_OK)
            return st;
        vr = v + q->res + q->nv;
    }
    NEXT;
    /* (W: P for "kept in S", S is not used) */
#define FSTEP(NAME, A, B, W)                                                       \
    STEP(FCODE(CR__ROP_##NAME, L_##A, L_##B, L_##W == L_P), f_##NAME##A##B##W) { \
        double y_ = value_##NAME(GET_##A(0), NIN_##NAME > 1 ? GET_##B(1) : 0.0);     \
        *vr++ = y_;                                                                 \
        P = y_;                                                                     \
        if (L_##W == L_P)                                                           \
            S = y_;                                                                 \
    }                                                                               \
    NEXT;
#define FSTEPS(NAME, NIN, NOUT, PRIMAL, ...) FVARIANTS(FSTEP, NAME)
    CR__ARITH_ROWS(FSTEPS)
#undef FSTEP
#undef FSTEPS
    STEP(FC_ROW, f_row)
        cr__row_forward(&p->prog[r - fops], v);
        vr++;
        NEXT;
    STEP(FC_INPUT, f_input)
        *vr++ = inputs[r->src[0]];
        NEXT;
    STEP(FC_GUARD, f_guard) {
        cr_status st = cr__prepared_guard(p, &p->prog[r - fops], v);
        if (st != CR_OK)
            return st;
    }
    NEXT;
    /* A row of the compact program: its entry is the next one (lr). */
    STEP(FC_LROW1, f_lrow1) {
        double xin[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
        xin[0] = v[r->src[0]];
        lr->row->f64(xin, Y, D);
        *vr++ = Y[0];
        lr->p[0] = D[0];
        lr++;
    }
    NEXT;
    STEP(FC_LROW2, f_lrow2) {
        double xin[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
        xin[0] = v[r->src[0]];
        xin[1] = v[r->src[1]];
        lr->row->f64(xin, Y, D);
        *vr++ = Y[0];
        lr->p[0] = D[0];
        lr->p[1] = D[1];
        lr++;
    }
    NEXT;
    STEP(FC_LGUARD, f_lguard) {
        double a = v[r->src[0]], b = v[r->src[1]];
        if (compare((cr_cmp)lg->cmp, a, b) != (bool)lg->outcome)
            return guard_failed(p, lg->cmp, lg->rec, lg->outcome, a, b);
        lg++;
    }
    NEXT;
#if REPLAY_THREADED
    }
#pragma GCC diagnostic pop
#else
        default: /* FC_END */
            goto out;
        }
    }
#endif
#undef STEP
#undef NEXT
#undef GET_M
#undef GET_P
#undef GET_S
out:
    (void)P;
    (void)S;
    (void)vr;
    return CR_OK;
}

/* Sweep back over the instructions that can reach y. The adjoints of constant slots
 * receive contributions nobody reads. */
static REPLAY_OPT cr_status reverse(cr_prepared *p)
{
    double *adj = p->adj;
    const double *v = p->vals;
    /* Each step clears its result's adjoint once read, and the gradient's reader those of
     * the inputs: a lean program starts with every adjoint 0 but the constant slots' (which
     * receive contributions nobody reads: cleared here so that they never overflow). Other
     * programs' rules may leave adjoints behind: all are cleared. */
    if (p->lean)
        memset(adj + p->nvar, 0, (p->nws / 2 - p->nvar) * sizeof *adj);
    else
        memset(adj, 0, p->nws / 2 * sizeof *adj);
    adj[p->y.idx] = 1.0;
    /* (cr_prepared_value_and_gradient_arrays leaves the accumulators clear after each call) */
    if (p->has_arrays && !p->arrays)
        cr__array_clear(p->tape);
    const cr__fop *const fops = p->fops + 1;
    const cr__fop *r = fops + p->ntop;
    const uint8_t *c = p->rcodes + 1 + p->ntop; /* r's code */
    const cr__lrow *lr = p->lrows + p->nlrows_top;
    uint32_t res = p->res_top; /* one past the variables of the step at r */
    double P = 0.0, S = 0.0;
#define GET_M adj[res]
#define GET_P P
#define GET_S S
    /* a result's adjoint, once read, is cleared for the next call (a register needs not) */
#define CLEAR_M adj[res] = 0.0
#define CLEAR_P (void)0
#define CLEAR_S (void)0
    /* the first contribution to operand j's adjoint, and a second one to the same place */
#define PUT_M(j, c) adj[r->src[j]] += (c)
#define PUT_P(j, c) P = 0.0 + (c)
#define PUT_S(j, c) S = 0.0 + (c)
#define ADD_M(c)    (void)(c)
#define ADD_P(c)    P += (c)
#define ADD_S(c)    S += (c)
    /* STEP(C) opens the step of code C; NEXT ends a step: on to the previous instruction
     * (the end before the first one to sweep: out). */
#if REPLAY_THREADED
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic" /* labels as values and goto * */
#define STEP(C, L) L:
#define NEXT                  \
    do {                      \
        r--;                  \
        c--;                  \
        goto *step[*c];       \
    } while (0)
#define LABEL(NAME, G, A, B) [RCODE(CR__ROP_##NAME, L_##G, L_##A, L_##B)] = &&r_##NAME##G##A##B,
#define LABELS(NAME, NIN, NOUT, PRIMAL, ...) VARIANTS(LABEL, NAME)
    static const void *const step[RC_END + 1] = {
        CR__ARITH_ROWS(LABELS)
        [RC_ROW] = &&r_row, [RC_SKIP] = &&r_skip, [RC_CALL] = &&r_call,
        [RC_LROW1] = &&r_lrow1, [RC_LROW2] = &&r_lrow2, [RC_INPUT] = &&r_input,
        [RC_END] = &&out};
#undef LABEL
#undef LABELS
    NEXT;
    {
#else
#define STEP(C, L) case C:
#define NEXT    continue
    for (;;) {
        r--;
        switch (*--c) {
#endif
    STEP(RC_CALL, r_call) {
        const cr__rop *q = &p->prog[r - fops];
        res = q->res;
        cr_status st = call_reverse(p, q, adj);
        if (st != CR_OK)
            return st;
    }
    NEXT;
    /* The partials from the row again, at the values of the forward pass. */
#define RSTEP(NAME, G, A, B)                                                     \
    STEP(RCODE(CR__ROP_##NAME, L_##G, L_##A, L_##B), r_##NAME##G##A##B) {        \
        res--;                                                                   \
        double g = GET_##G, D[2];                                                \
        CLEAR_##G;                                                               \
        partials_##NAME(v[r->src[0]], NIN_##NAME > 1 ? v[r->src[1]] : 0.0,       \
                        v[res], D);                                              \
        PUT_##A(0, D[0] * g);                                                    \
        if (NIN_##NAME > 1) {                                                    \
            if (L_##A == L_##B && L_##A != L_M)                                  \
                ADD_##B(D[NIN_##NAME > 1 ? 1 : 0] * g);                          \
            else                                                                 \
                PUT_##B(1, D[NIN_##NAME > 1 ? 1 : 0] * g);                       \
        }                                                                        \
    }                                                                            \
    NEXT;
#define RSTEPS(NAME, NIN, NOUT, PRIMAL, ...) VARIANTS(RSTEP, NAME)
    CR__ARITH_ROWS(RSTEPS)
#undef RSTEP
#undef RSTEPS
    STEP(RC_ROW, r_row) {
        const cr__rop *q = &p->prog[r - fops];
        res--;
        double g = adj[q->res];
        adj[q->res] = 0.0;
        for (size_t j = 0; j < q->nin; j++)
            adj[q->src[j]] += q->p[j] * g;
    }
    NEXT;
    STEP(RC_LROW1, r_lrow1) { /* its entry is the one before lr */
        lr--;
        res--;
        double g = adj[res];
        adj[res] = 0.0;
        adj[r->src[0]] += lr->p[0] * g;
    }
    NEXT;
    STEP(RC_LROW2, r_lrow2) {
        lr--;
        res--;
        double g = adj[res];
        adj[res] = 0.0;
        adj[r->src[0]] += lr->p[0] * g;
        adj[r->src[1]] += lr->p[1] * g;
    }
    NEXT;
    STEP(RC_INPUT, r_input) /* (its adjoint is the gradient's) */
        res--;
        NEXT;
    STEP(RC_SKIP, r_skip) /* comparisons */
        NEXT;
#if REPLAY_THREADED
    }
#pragma GCC diagnostic pop
#else
        default: /* RC_END */
            goto out;
        }
    }
#endif
#undef STEP
#undef NEXT
#undef GET_M
#undef GET_P
#undef GET_S
#undef CLEAR_M
#undef CLEAR_P
#undef CLEAR_S
#undef PUT_M
#undef PUT_P
#undef PUT_S
#undef ADD_M
#undef ADD_P
#undef ADD_S
out:
    (void)P;
    (void)S;
    return CR_OK;
}
// clang-format on

cr_status cr__prepared_run(cr_prepared *p, const double *x)
{
    cr_status st = forward(p, x);
    /* A constant y (a branch chose a constant) has no sweep, but the forward pass still
     * checks the comparisons that chose it. */
    return st == CR_OK && p->y.idx != CR_VAR_CONST ? reverse(p) : st;
}

cr_status cr__prepared_new(cr_ctx *ctx, const cr_engine *eng, size_t n, bool second,
                           cr_prepared **out)
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
    if (st == CR_OK) {
        cr__tape_make_replay(p->tape);
        if (second)
            p->tape->flags |= CR__TAPE_SO_CHECK;
    }
    return st;
}

/* ---- Scalar inputs ---------------------------------------------------------------------- */

cr_status cr__prepare_scalar(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                             const double *x, size_t n, const char *who, bool second,
                             cr_prepared **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "%s: out is NULL", who);
    *out = NULL;
    if (ctx == NULL)
        return CR_EINVAL;
    if (f == NULL || (n > 0 && x == NULL))
        return cr_ctx_error(ctx, CR_EINVAL, "%s: NULL function or inputs", who);
    if (n >= CR_TAPE_MAX_VARS) /* (before n variables are allocated: n * size could wrap) */
        return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: %zu input%s, more than a recording holds (%zu)",
                            who, n, CR__S(n), (size_t)CR_TAPE_MAX_VARS - 1);
    cr_prepared *p;
    cr_status st = cr__prepared_new(ctx, eng, n, second, &p);
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
                          "%s: the function made %zu input%s of its own; a "
                          "prepared gradient replays with the given inputs only",
                          who, p->tape->ninputs - n, CR__S(p->tape->ninputs - n));
    if (st == CR_OK)
        st = cr__prepared_build(p);
    if (st == CR_OK && p->tape->avars.n != p->nres_slots)
        st = cr_ctx_error(ctx, CR_EINVAL,
                          "%s: the function made %zu array input%s of its own; "
                          "a prepared gradient replays with the given inputs only",
                          who, (size_t)(p->tape->avars.n - p->nres_slots),
                          CR__S(p->tape->avars.n - p->nres_slots));
    if (st != CR_OK) {
        cr_prepared_free(p);
        return st;
    }
    if (!second)
        make_lean(p);
    *out = p;
    return CR_OK;
}

cr_status cr_prepare_gradient(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                              const double *x, size_t n, cr_prepared **out)
{
    return cr__prepare_scalar(ctx, eng, f, env, x, n, "cr_prepare_gradient", false, out);
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
                            "cr_prepared_value_and_gradient: prepared for %zu input%s, %zu given",
                            p->n, CR__S(p->n), n);
    cr__prepared_begin(p);
    /* A failed replay (a comparison that changed) leaves values and partials of two
     * points; the next replay rewrites all of them before any sweep, so the prepared
     * gradient stays usable. */
    cr_status st = cr__prepared_run(p, x);
    if (st != CR_OK)
        return st;
    bool yc = p->y.idx == CR_VAR_CONST;
    for (size_t j = 0; j < n; j++)
        grad[j] = yc ? 0.0 : p->adj[p->xs[j].idx];
    for (size_t j = 0; j < n && !yc; j++) /* (the next call starts from 0: reverse()) */
        p->adj[p->xs[j].idx] = 0.0;
    if (y != NULL)
        *y = yc ? p->y.v : p->vals[p->y.idx];
    if (p->has_arrays)
        cr__array_clear(p->tape);
    return CR_OK;
}
