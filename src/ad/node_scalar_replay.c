/*
 * The scalar rows' node kind, its prepared replay (cr__scalar_kind.replay, prepared_impl.h):
 * the compiler that turns the scalar records of a replay tape (inputs, rows, comparisons)
 * into the prepared program's instructions, the compact program of the first-order replay
 * with its codes, and the interpreters of both replays, which run a whole run of scalar
 * instructions per call of the driver (prepared.c, prepared_hvp.c). The arithmetic rows are
 * expanded inline from their one definition (CR__ARITH_ROWS), other rows are called through
 * their function pointers; no derivative is written here.
 */
#include <string.h>

#include <chainrules/rules_math.h>

#include "arith_second.h"
#include "prepared_impl.h"

/* ---- Compiling ---------------------------------------------------------------------------- */

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
static uint32_t arg_src(cr_prepared *p, cr__cpos *s, int8_t map, const uint32_t *ops, double c)
{
    if (map >= 0)
        return ops[map];
    size_t slot = (size_t)p->tape->nvars + s->nc++;
    if (s->fill)
        p->vals[slot] = c;
    return (uint32_t)slot;
}
/* The record at s into instruction r: an input (its position among the inputs), a
 * comparison (its operands, its record number) or a row (its code, arguments, the result
 * it holds and its replay information). */
static cr_status scalar_compile(cr_prepared *p, cr__cpos *s, cr__rop *r)
{
    const cr__word *w = s->w;
    uint64_t h = w[0].u;
    cr__rinfo *info = (cr__rinfo *)(uintptr_t)w[1].cp;
    const cr__word *pl = w + 2;
    unsigned kind = hdr_kind(h);
    uint32_t ops[CR_SCALAR_MAX_IN] = {hdr_a(h), hdr_b(h)};
    switch (kind) {
    case K_INPUT:
        r->code = CR__ROP_INPUT;
        r->res = (uint32_t)s->i;
        r->src[0] = (uint32_t)s->kin++;
        return CR_OK;
    case K_GUARD:
        r->code = CR__ROP_GUARD;
        r->o = info->o;
        r->res = (uint32_t)s->k;
        r->ptr = info;
        for (size_t j = 0; j < 2; j++) {
            int8_t map = info->map[j] < 0 ? -1 : (int8_t)j;
            r->src[j] = arg_src(p, s, map, ops, info->c[j]);
        }
        return CR_OK;
    case K_UNARY:
    case K_BINARY:
    case K_NARY:
        if (kind == K_NARY) {
            size_t m = hdr_a(h);
            for (size_t j = 0; j < m; j++) {
                uint64_t u = pl[m + j / 2].u;
                ops[j] = (uint32_t)((j & 1) ? (u >> 32) : (u & 0xFFFFFFFFu));
            }
        }
        r->code = row_code(info->row);
        r->nin = info->nin;
        r->o = info->o;
        r->res = (uint32_t)s->i;
        r->ptr = info;
        for (size_t j = 0; j < info->nin; j++)
            r->src[j] = arg_src(p, s, info->map[j], ops, info->c[j]);
        return CR_OK;
    default:
        return cr_ctx_error(p->ctx, CR_EUNIMPL,
                            "prepared gradient: record %zu (kind %u) cannot be replayed", s->k,
                            kind);
    }
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
    FC_MA,             /* a product and the sum that reads it: 8 codes (FMA_CODE) */
    FC_SM = FC_MA + 8, /* a difference and the product that reads it: 6 codes (FSM_CODE) */
    FC_END = FC_SM + 6
};
enum {
    RC_ROW = CR__ARITH_NROWS * 27,
    RC_SKIP,
    RC_CALL,
    RC_LROW1,
    RC_LROW2,
    RC_INPUT,
    RC_MA,              /* the same pair swept back: 12 codes (RMA_CODE) */
    RC_SM = RC_MA + 12, /* a difference and a product swept back: 3 codes (RSM_CODE) */
    RC_END = RC_SM + 3
};
/* The fused pair's codes: the sum's other operand (C: LOC_M or LOC_S) is its argument J;
 * forwards, W: the sum kept in S; backwards, G: where the sum's adjoint is. */
#define FMA_CODE(C, W, J) (FC_MA + ((int)(C) == (int)LOC_S) * 4 + (W)*2 + (J))
#define RMA_CODE(G, C, J) (RC_MA + (int)(G)*4 + ((int)(C) == (int)LOC_S) * 2 + (J))
/* A difference of two operands in memory, then a product of it (in P) and an operand in
 * memory (its argument J): forwards, WS and WM: the difference and the product kept in S
 * (never both: a difference kept in S holds it past the product); backwards (every
 * operand's adjoint in memory), G: where the product's adjoint is. */
#define FSM_CODE(WS, WM, J) (FC_SM + (WS)*4 + (WM)*2 + (J))
#define RSM_CODE(G)         (RC_SM + (int)(G))
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
            if (r->code >= CR__ROP_ARRAY) /* another kind's: the run ends, and the registers */
                sv = NONE;
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

/* A product of two operands in memory read only by the sum just after it (x * y, then
 * c + that or that + c, c in memory or S): one step of each pass instead of two (FMA_CODE
 * at the product forwards, RMA_CODE at the sum backwards), the same operations in the same
 * order. Forwards the product is in P and not kept in S; backwards the sum passes the
 * product's adjoint in P and the product's operands take theirs in memory. Only pairs that
 * the reverse pass sweeps whole are fused backwards: it starts at a product that makes y
 * (a sum after y reading it is not swept) with the product's own step. */
static void fuse_pairs(cr_prepared *p, size_t nrec, size_t first)
{
    uint8_t *fc = p->fcodes + 1, *rc = p->rcodes + 1;
    enum { MUL = CR__ROP_mul, ADD = CR__ROP_add };
    for (size_t k = p->nlead; k + 1 < nrec; k++) {
        if (p->prog[k].code != MUL || p->prog[k + 1].code != ADD ||
            fc[k] != FCODE(MUL, LOC_M, LOC_M, 0))
            continue;
        int f = fc[k + 1] - ADD * 18, f0 = f / 6, f1 = f % 6 / 2, w = f % 2;
        if ((f0 == LOC_P) == (f1 == LOC_P)) /* (c + c, or no product in P) */
            continue;
        int j = f0 == LOC_P ? 1 : 0;
        fc[k] = (uint8_t)FMA_CODE(j == 0 ? f0 : f1, w, j);
    }
    if (p->has_arrays) /* (reverse_codes left memory everywhere) */
        return;
    for (size_t k = first; k + 1 < p->ntop; k++) {
        if (p->prog[k].code != MUL || p->prog[k + 1].code != ADD ||
            rc[k] != RCODE(MUL, LOC_P, LOC_M, LOC_M))
            continue;
        int f = rc[k + 1] - ADD * 27, g = f / 9, d0 = f % 9 / 3, d1 = f % 3;
        if ((d0 == LOC_P) == (d1 == LOC_P))
            continue;
        int j = d0 == LOC_P ? 1 : 0;
        rc[k + 1] = (uint8_t)RMA_CODE(g, j == 0 ? d0 : d1, j);
    }
}

/* A difference of two operands in memory and the product just after it of that difference
 * (in P) and an operand in memory (x - m, then q * that: gmm's centred point times the
 * diagonal): one step of each pass (FSM_CODE at the difference forwards, RSM_CODE at the
 * product backwards), after fuse_pairs, leaving alone a product it fused (a product fused
 * with its sum backwards is swept by the sum's step). Backwards the two steps need not read
 * each other: every adjoint but the product's is in memory. */
static void fuse_differences(cr_prepared *p, size_t nrec, size_t first)
{
    uint8_t *fc = p->fcodes + 1, *rc = p->rcodes + 1;
    enum { SUB = CR__ROP_sub, MUL = CR__ROP_mul };
    for (size_t k = p->nlead; k + 1 < nrec; k++) {
        if (p->prog[k].code != SUB || p->prog[k + 1].code != MUL ||
            (fc[k] != FCODE(SUB, LOC_M, LOC_M, 0) && fc[k] != FCODE(SUB, LOC_M, LOC_M, 1)) ||
            fc[k + 1] >= FCODE(MUL + 1, 0, 0, 0)) /* (a product fused with its sum) */
            continue;
        int f = fc[k + 1] - MUL * 18, f0 = f / 6, f1 = f % 6 / 2, w = f % 2;
        int ws = fc[k] - FCODE(SUB, LOC_M, LOC_M, 0);
        if (!((f0 == LOC_P && f1 == LOC_M) || (f0 == LOC_M && f1 == LOC_P)) || (ws && w))
            continue;
        fc[k] = (uint8_t)FSM_CODE(ws, w, f0 == LOC_P ? 1 : 0);
    }
    if (p->has_arrays)
        return;
    for (size_t k = first; k + 1 < p->ntop; k++) {
        if (p->prog[k].code != SUB || p->prog[k + 1].code != MUL ||
            rc[k] != RCODE(SUB, LOC_M, LOC_M, LOC_M) ||
            (k + 2 < p->ntop && rc[k + 2] >= RC_MA && rc[k + 2] < RC_SM))
            continue;
        int f = rc[k + 1] - MUL * 27, g = f / 9;
        if (f < 0 || f >= 27 || f % 9 != RCODE(0, 0, LOC_M, LOC_M))
            continue;
        rc[k + 1] = (uint8_t)RSM_CODE(g);
    }
}

/* The compact program of the first-order replay (p->fops + 1): prog's nrec instructions,
 * then an end, where the forward pass stops. The reverse pass stops at the end just before
 * the first instruction it sweeps (p->fops[0], or the last of the leading inputs, which the
 * forward pass does not run either). The instructions of other kinds (array functions, rules
 * kept as pullbacks) are the codes FC_CALL and RC_CALL, where the passes stop and hand back
 * to the driver: the ends of the scalar runs. */
static cr_status scalar_link(cr_prepared *p, size_t nrec)
{
    /* The inputs recorded first, in order (the usual case), are copied in one go. */
    p->nlead = 0;
    while (p->nlead < nrec && p->prog[p->nlead].code == CR__ROP_INPUT &&
           p->prog[p->nlead].res == p->nlead && p->prog[p->nlead].src[0] == p->nlead)
        p->nlead++;
    p->compact = true;
    for (size_t k = 0; k < nrec; k++)
        if (p->prog[k].code != CR__ROP_GUARD && p->prog[k].code != CR__ROP_INPUT &&
            !is_arith(&p->prog[k]) && !is_lrow(&p->prog[k]))
            p->compact = false;
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
    p->rtop = (cr__rpos){.k = p->ntop};
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
                p->rtop.cur[0] = (uint32_t)nl;
        } else if (r->code == CR__ROP_GUARD) {
            const cr__rinfo *info = r->ptr;
            p->lguards[ng++] = (cr__lguard){.rec = r->res, .cmp = r->o, .outcome = info->outcome};
        }
    }
    size_t first = p->nlead < p->ntop ? p->nlead : p->ntop;
    forward_codes(p, nrec, scratch);
    if (!p->has_arrays)
        reverse_codes(p, first, scratch, scratch + nvars);
    fuse_pairs(p, nrec, first);
    fuse_differences(p, nrec, first);
    cr_ctx_dealloc(p->ctx, scratch, 2 * nvars * sizeof *scratch);
    /* The variables made before the reverse pass's first step, where its count starts. */
    if (p->ntop > 0) {
        const cr__rop *t = &p->prog[p->ntop - 1]; /* (it makes y: not a comparison) */
        p->rtop.res = t->res + (t->code >= CR__ROP_ARRAY ? t->nv : 1u);
    }
    fops[nrec] = (cr__fop){{0, 0}};
    p->fops[0] = fops[nrec];
    fc[nrec] = FC_END;
    rc[nrec] = RC_END;
    p->fcodes[0] = FC_END;
    rc[(ptrdiff_t)first - 1] = RC_END;
    return CR_OK;
}

/* ---- Replay ----------------------------------------------------------------------------- */

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

/* A comparison r at the values v: CR_OK when it comes out as recorded, else CR_EDOMAIN
 * with the message on the context. */
static cr_status guard(cr_prepared *p, const cr__rop *r, const double *v)
{
    const cr__rinfo *info = r->ptr;
    double a = v[r->src[0]], b = v[r->src[1]];
    return cr__cmp_holds((cr_cmp)r->o, a, b) == info->outcome
               ? CR_OK
               : guard_failed(p, r->o, (unsigned)r->res, info->outcome, a, b);
}

/*
 * The first-order replay runs the compact program (cr__fop): 8 bytes per instruction
 * instead of 64, and no partials of the arithmetic rows stored or loaded. The forward pass
 * evaluates only their primals; the reverse pass evaluates their partials again from the
 * same row (CR__ARITH_ROWS, the one definition) at the stored values of the arguments and
 * the result: those of add, sub and neg are constants and fold away, mul's are its
 * arguments, div's cost the two divisions the forward pass no longer makes. Rows of one
 * result and at most two arguments and comparisons read their entries (cr__lrow,
 * cr__lguard); other rows keep their partials in their 64-byte instruction. Array functions
 * and GENERIC records end a run: the passes return to the driver there.
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
/* The fused pair's steps: FMA_VARIANTS(LEAF) expands LEAF(C, W, J) for C in M, S and W, J in
 * 0, 1; RMA_VARIANTS(LEAF) LEAF(G, C, J) for G in M, P, S, C in M, S and J in 0, 1. */
#define FMA_VARIANTS(LEAF) FMA_C(LEAF, M) FMA_C(LEAF, S)
#define FMA_C(LEAF, C)     LEAF(C, 0, 0) LEAF(C, 0, 1) LEAF(C, 1, 0) LEAF(C, 1, 1)
#define RMA_VARIANTS(LEAF) RMA_G(LEAF, M) RMA_G(LEAF, P) RMA_G(LEAF, S)
#define RMA_G(LEAF, G)     LEAF(G, M, 0) LEAF(G, M, 1) LEAF(G, S, 0) LEAF(G, S, 1)
/* FSM_VARIANTS(LEAF): LEAF(WS, WM, J) for WS, WM in 0, 1 (not both 1) and J in 0, 1;
 * RSM_VARIANTS(LEAF): LEAF(G), G in M, P, S. */
#define FSM_VARIANTS(LEAF) \
    LEAF(0, 0, 0) LEAF(0, 0, 1) LEAF(0, 1, 0) LEAF(0, 1, 1) LEAF(1, 0, 0) LEAF(1, 0, 1)
#define RSM_VARIANTS(LEAF) LEAF(M) LEAF(P) LEAF(S)

// clang-format off
/* Evaluate a run forwards from p->pos (s): new values, the partials of the rows called through
 * their pointers, comparisons checked; up to the next instruction of another kind (FC_CALL),
 * where s is left, or the end (FC_END). The leading inputs are copied in one go. */
static REPLAY_OPT cr_status replay_forward(cr_prepared *p, const double *inputs)
{
    cr__rpos *const s = &p->pos;
    double *v = p->vals;
    const cr__fop *const fops = p->fops + 1;
    size_t k0 = s->k;
    uint32_t res0 = s->res;
    if (k0 < p->nlead) { /* (the leading inputs are the first run's first instructions) */
        memcpy(v, inputs, p->nlead * sizeof *v);
        k0 = p->nlead;
        res0 = (uint32_t)p->nlead;
    }
    const cr__fop *r = fops + k0;
    const uint8_t *c = p->fcodes + 1 + k0; /* r's code */
    double *vr = v + res0; /* the next variable an instruction makes */
    cr__lrow *lr = p->lrows + s->cur[0];
    const cr__lguard *lg = p->lguards + s->cur[1];
    double P = 0.0, S = 0.0;
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
#define FMA_LABEL(C, W, J) [FMA_CODE(L_##C, W, J)] = &&f_ma##C##W##J,
#define FSM_LABEL(WS, WM, J) [FSM_CODE(WS, WM, J)] = &&f_sm##WS##WM##J,
    static const void *const step[FC_END + 1] = {
        CR__ARITH_ROWS(LABELS)
        [FC_ROW] = &&f_row, [FC_INPUT] = &&f_input, [FC_GUARD] = &&f_guard,
        [FC_CALL] = &&out, [FC_LROW1] = &&f_lrow1, [FC_LROW2] = &&f_lrow2,
        [FC_LGUARD] = &&f_lguard, FMA_VARIANTS(FMA_LABEL) FSM_VARIANTS(FSM_LABEL)
        [FC_END] = &&done};
#undef LABEL
#undef LABELS
#undef FMA_LABEL
#undef FSM_LABEL
    goto *step[*c];
    {
#else
#define STEP(C, L) case C:
#define NEXT    continue
    for (;; r++, c++) {
        switch (*c) {
#endif
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
    /* A product, then the sum reading it (r + 1; its other operand c is argument J). */
#define FMASTEP(C, W, J)                                                           \
    STEP(FMA_CODE(L_##C, W, J), f_ma##C##W##J) {                                   \
        double y_ = value_mul(v[r->src[0]], v[r->src[1]]);                         \
        *vr++ = y_;                                                                \
        double c_ = L_##C == L_M ? v[r[1].src[J]] : S;                             \
        double z_ = (J) == 0 ? value_add(c_, y_) : value_add(y_, c_);              \
        *vr++ = z_;                                                                \
        P = z_;                                                                    \
        if (W)                                                                     \
            S = z_;                                                                \
        r++;                                                                       \
        c++;                                                                       \
    }                                                                              \
    NEXT;
    FMA_VARIANTS(FMASTEP)
#undef FMASTEP
    /* A difference, then the product reading it (r + 1; its other operand is argument J). */
#define FSMSTEP(WS, WM, J)                                                         \
    STEP(FSM_CODE(WS, WM, J), f_sm##WS##WM##J) {                                   \
        double y_ = value_sub(v[r->src[0]], v[r->src[1]]);                         \
        *vr++ = y_;                                                                \
        if (WS)                                                                    \
            S = y_;                                                                \
        double c_ = v[r[1].src[J]];                                                \
        double z_ = (J) == 0 ? value_mul(c_, y_) : value_mul(y_, c_);              \
        *vr++ = z_;                                                                \
        P = z_;                                                                    \
        if (WM)                                                                    \
            S = z_;                                                                \
        r++;                                                                       \
        c++;                                                                       \
    }                                                                              \
    NEXT;
    FSM_VARIANTS(FSMSTEP)
#undef FSMSTEP
    STEP(FC_ROW, f_row)
        row_forward(&p->prog[r - fops], v);
        vr++;
        NEXT;
    STEP(FC_INPUT, f_input)
        *vr++ = inputs[r->src[0]];
        NEXT;
    STEP(FC_GUARD, f_guard) { /* (a failure ends the pass: the position is not needed) */
        cr_status st = guard(p, &p->prog[r - fops], v);
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
        if (cr__cmp_holds((cr_cmp)lg->cmp, a, b) != (bool)lg->outcome)
            return guard_failed(p, lg->cmp, lg->rec, lg->outcome, a, b);
        lg++;
    }
    NEXT;
#if REPLAY_THREADED
    }
#pragma GCC diagnostic pop
#else
        case FC_CALL:
            goto out;
        default: /* FC_END */
            goto done;
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
    s->k = (size_t)(r - fops);
    s->res = (uint32_t)(vr - v);
    s->cur[0] = (uint32_t)(lr - p->lrows);
    s->cur[1] = (uint32_t)(lg - p->lguards);
    return CR_OK;
done: /* the end of the program: no position to keep */
    return CR_OK;
}

/* Sweep a run back from p->pos (s): down to the previous instruction of another kind
 * (RC_CALL), where s is left, or past the reverse pass's first one (RC_END; s->k then 0). The
 * adjoints of constant slots receive contributions nobody reads. */
static REPLAY_OPT cr_status replay_reverse(cr_prepared *p)
{
    cr__rpos *const s = &p->pos;
    double *adj = p->adj;
    const double *v = p->vals;
    const cr__fop *const fops = p->fops + 1;
    const cr__fop *r = fops + s->k;
    const uint8_t *c = p->rcodes + 1 + s->k; /* r's code */
    const cr__lrow *lr = p->lrows + s->cur[0];
    uint32_t res = s->res; /* one past the variables of the step at r */
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
#define RMA_LABEL(G, C, J) [RMA_CODE(L_##G, L_##C, J)] = &&r_ma##G##C##J,
#define RSM_LABEL(G) [RSM_CODE(L_##G)] = &&r_sm##G,
    static const void *const step[RC_END + 1] = {
        CR__ARITH_ROWS(LABELS)
        [RC_ROW] = &&r_row, [RC_SKIP] = &&r_skip, [RC_CALL] = &&out,
        [RC_LROW1] = &&r_lrow1, [RC_LROW2] = &&r_lrow2, [RC_INPUT] = &&r_input,
        RMA_VARIANTS(RMA_LABEL) RSM_VARIANTS(RSM_LABEL) [RC_END] = &&done};
#undef LABEL
#undef LABELS
#undef RMA_LABEL
#undef RSM_LABEL
    NEXT;
    {
#else
#define STEP(C, L) case C:
#define NEXT    continue
    for (;;) {
        r--;
        switch (*--c) {
#endif
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
    /* The sum (r; its other operand c is argument J), then the product before it, whose
     * adjoint the sum passes as the unfused steps do in P. */
#define RMASTEP(G, C, J)                                                           \
    STEP(RMA_CODE(L_##G, L_##C, J), r_ma##G##C##J) {                               \
        res--;                                                                     \
        double g = GET_##G, D[2];                                                  \
        CLEAR_##G;                                                                 \
        partials_add(v[r->src[0]], v[r->src[1]], v[res], D);                       \
        PUT_##C(J, D[J] * g);                                                      \
        double t_ = 0.0 + D[1 - (J)] * g;                                          \
        r--;                                                                       \
        c--;                                                                       \
        res--;                                                                     \
        partials_mul(v[r->src[0]], v[r->src[1]], v[res], D);                       \
        adj[r->src[0]] += D[0] * t_;                                               \
        adj[r->src[1]] += D[1] * t_;                                               \
    }                                                                              \
    NEXT;
    RMA_VARIANTS(RMASTEP)
#undef RMASTEP
    /* The product (r; its adjoint in G, its operands' in memory), then the difference
     * before it (its adjoint and its operands' in memory). */
#define RSMSTEP(G)                                                                 \
    STEP(RSM_CODE(L_##G), r_sm##G) {                                               \
        res--;                                                                     \
        double g = GET_##G, D[2];                                                  \
        CLEAR_##G;                                                                 \
        partials_mul(v[r->src[0]], v[r->src[1]], v[res], D);                       \
        adj[r->src[0]] += D[0] * g;                                                \
        adj[r->src[1]] += D[1] * g;                                                \
        r--;                                                                       \
        c--;                                                                       \
        res--;                                                                     \
        double g2_ = adj[res];                                                     \
        adj[res] = 0.0;                                                            \
        partials_sub(v[r->src[0]], v[r->src[1]], v[res], D);                       \
        adj[r->src[0]] += D[0] * g2_;                                              \
        adj[r->src[1]] += D[1] * g2_;                                              \
    }                                                                              \
    NEXT;
    RSM_VARIANTS(RSMSTEP)
#undef RSMSTEP
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
        case RC_CALL:
            goto out;
        default: /* RC_END */
            goto done;
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
    s->k = (size_t)(r - fops) + 1;
    s->res = res;
    s->cur[0] = (uint32_t)(lr - p->lrows);
    return CR_OK;
done: /* the reverse pass's first instruction swept: nothing before it to sweep */
    s->k = 0;
    return CR_OK;
}
// clang-format on

/* ---- H·v replay ------------------------------------------------------------------------- */

/* Forwards over instructions [first, end): values, partials and tangents at the inputs in
 * (dir: the direction, per input). Tangents of constant slots stay zero. */
static cr_status replay_forward2(cr_prepared *p, size_t first, size_t end, const double *in,
                                 const double *dir)
{
    double *v = p->vals, *vd = p->tan;
    if (first < p->nlead) { /* (the leading inputs are the first run's first instructions) */
        memcpy(v, in, p->nlead * sizeof *v);
        memcpy(vd, dir, p->nlead * sizeof *vd);
        first = p->nlead;
    }
    for (cr__rop *r = p->prog + first, *e = p->prog + end; r < e; r++) {
        switch (r->code) {
#define ARITH(NAME, NIN, NOUT, PRIMAL, ...)             \
    case CR__ROP_##NAME: {                              \
        double x_[2], Y[1], D[2];                       \
        x_[0] = v[r->src[0]];                           \
        x_[1] = (NIN) > 1 ? v[r->src[1]] : 0.0;         \
        {                                               \
            const double *x = x_;                       \
            PRIMAL;                                     \
            __VA_ARGS__;                                \
        }                                               \
        v[r->res] = Y[0];                               \
        r->p[0] = D[0];                                 \
        double t_ = D[0] * vd[r->src[0]];               \
        if ((NIN) > 1) {                                \
            r->p[1] = D[1];                             \
            t_ += D[(NIN) > 1 ? 1 : 0] * vd[r->src[1]]; \
        }                                               \
        vd[r->res] = t_;                                \
        break;                                          \
    }
            CR__ARITH_ROWS(ARITH)
#undef ARITH
        case CR__ROP_ROW: {
            row_forward(r, v);
            double t = 0.0;
            for (size_t j = 0; j < r->nin; j++)
                t += r->p[j] * vd[r->src[j]];
            vd[r->res] = t;
            break;
        }
        case CR__ROP_INPUT:
            v[r->res] = in[r->src[0]];
            vd[r->res] = dir[r->src[0]];
            break;
        default: { /* CR__ROP_GUARD */
            cr_status st = guard(p, r, v);
            if (st != CR_OK)
                return st;
            break;
        }
        }
    }
    return CR_OK;
}

/* Backwards over instructions [first, end), from the last: adjoints and their tangents. */
static cr_status replay_reverse2(cr_prepared *p, size_t first, size_t end)
{
    size_t nv = p->nws / 2;
    const double *v = p->vals, *vd = p->tan;
    double *adj = p->adj, *adjd = p->tan + nv;
    uint32_t nvar = p->nvar; /* sources at or above are constant slots */
    for (const cr__rop *r = p->prog + end, *b = p->prog + first; r-- > b;) {
        switch (r->code) {
#define ARITH2(NAME, NIN, NOUT, PRIMAL, ...)                                      \
    case CR__ROP_##NAME: {                                                        \
        double g = adj[r->res], gd = adjd[r->res];                                \
        double xr[2], hd[2] = {0.0, 0.0};                                         \
        uint32_t s0 = r->src[0], s1 = (NIN) > 1 ? r->src[1] : s0;                 \
        xr[0] = v[s0];                                                            \
        xr[1] = v[s1];                                                            \
        for (size_t l = 0; l < (NIN); l++) {                                      \
            uint32_t sl = l == 0 ? s0 : s1;                                       \
            if (sl >= nvar) /* a constant: not a column */                        \
                continue;                                                         \
            cr__hcol_##NAME(xr, l, vd[sl], hd);                                   \
        }                                                                         \
        adj[s0] += r->p[0] * g;                                                   \
        adjd[s0] += r->p[0] * gd + g * hd[0];                                     \
        if ((NIN) > 1) {                                                          \
            adj[s1] += r->p[(NIN) > 1 ? 1 : 0] * g;                               \
            adjd[s1] += r->p[(NIN) > 1 ? 1 : 0] * gd + g * hd[(NIN) > 1 ? 1 : 0]; \
        }                                                                         \
        break;                                                                    \
    }
            CR__ARITH_ROWS(ARITH2)
#undef ARITH2
        case CR__ROP_ROW: {
            const cr__rinfo *info = r->ptr;
            const cr_scalar_rule *row = info->row;
            size_t nin = r->nin, o = r->o;
            double g = adj[r->res], gd = adjd[r->res];
            double xin[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT];
            double D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
            double H[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
            unsigned cols = 0;
            for (size_t j = 0; j < nin; j++) {
                xin[j] = v[r->src[j]];
                if (info->map[j] >= 0)
                    cols |= 1u << j;
            }
            /* All the partials at x (cr__row_hessian starts from them). */
            row->f64(xin, Y, D);
            cr__row_hessian(row, xin, D, H, cols);
            /* The symmetric part, as the second-order tape keeps it (central differences
             * give the two mixed partials to about ten digits each). */
            const double *Ho = H + o * nin * nin;
            for (size_t j = 0; j < nin; j++) {
                double hd = 0.0;
                for (size_t l = 0; l < nin; l++)
                    if (cols & (1u << l))
                        hd += ((cols & (1u << j)) ? 0.5 * (Ho[j * nin + l] + Ho[l * nin + j])
                                                  : Ho[j * nin + l]) *
                              vd[r->src[l]];
                adj[r->src[j]] += r->p[j] * g;
                adjd[r->src[j]] += r->p[j] * gd + g * hd;
            }
            break;
        }
        default: /* inputs, comparisons */
            break;
        }
    }
    return CR_OK;
}

const cr__replay_steps cr__scalar_replay = {scalar_compile, scalar_link,     replay_forward,
                                            replay_reverse, replay_forward2, replay_reverse2};
