/*
 * The scalar rows' node kind, all its phases: recording (the rows' operations, cr_add ...
 * cr_sin and the named operations of the rows of one or two inputs, inputs, comparisons,
 * the general record of a row's results, recording cursors and recorded user functions),
 * the reverse step (the first-order threaded loop of sweep_scalar.h and the other scalar
 * kinds), the forward step and the second-order reverse step, which the sweeps (sweep.c)
 * call through cr__scalar_kind. Their prepared replay (the compiler of scalar records into
 * the prepared program and its interpreters) is the kind's replay steps, in
 * node_scalar_replay.c. The record layout is described in tape_impl.h.
 */
#include <stddef.h>
#include <string.h>

#include <chainrules/rules_math.h>
#include <chainrules/rules_special.h>

#include "../rules/array_rule_impl.h"
#include "prepared_impl.h"

/* The arithmetic rows, instantiated here too (their float and complex variants and source
 * strings are unused in this file). */
#include <tgmath.h>

#include <chainrules/scalar_rule.h>
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-const-variable"
#endif
#include <chainrules/arith_rows.h>
CR__ARITH_ROWS(CR_SCALAR_EVALS)
#include "arith_second.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/* ---- Records ------------------------------------------------------------------------------ */

static inline cr_var new_var(cr_tape *t, double v)
{
    cr_var r;
    r.v = v;
    r.idx = t->nvars;
    r.tape = t->id;
    t->hot.vt.key += CR__TAPE_KEY_ONE; /* nvars + 1, stored as the key word (set_fast) */
    return r;
}

/* The words in front of a record's payload: on forward tapes a copy of the header, on
 * replay tapes also the replay information (t->fwd.rinfo). */
static inline cr__word *lead(const cr_tape *t, cr__word *w, uint64_t h)
{
    if (t->pre) {
        (w++)->u = h;
        if (t->pre > 1)
            (w++)->cp = t->fwd.rinfo;
    }
    return w;
}

/* A record with no payload. */
static cr_var emit0(cr_tape *t, double y, unsigned kind, uint32_t a, uint32_t b)
{
    if (!cr__tape_room(t, 1 + t->pre) && cr__tape_grow(t, 1 + t->pre) != CR_OK)
        return cr__nan_const();
    uint64_t h = hdr_make(kind, a, b);
    cr__word *w = lead(t, t->cur, h);
    (w++)->u = h;
    t->cur = w;
    if (kind == K_GUARD)
        return cr_const(y);
    return new_var(t, y);
}

/* A replay tape's record of m variable operands vm with partials pm: never compacted
 * (the partials change when it is replayed), the row and constants in t->fwd.rinfo. */
static cr_var emit_replay(cr_tape *t, double y, size_t m, const uint32_t *vm, const double *pm)
{
    size_t nops = m > 2 ? (m + 1) / 2 : 0;
    size_t need = t->pre + m + nops + 1;
    if (!cr__tape_room(t, need) && cr__tape_grow(t, need) != CR_OK)
        return cr__nan_const();
    unsigned kind = m == 1 ? K_UNARY : m == 2 ? K_BINARY : K_NARY;
    uint64_t h =
        m <= 2 ? hdr_make(kind, vm[0], m == 2 ? vm[1] : 0) : hdr_make(kind, (uint32_t)m, 0);
    cr__word *w = lead(t, t->cur, h);
    for (size_t j = 0; j < m; j++)
        (w++)->d = pm[j];
    for (size_t j = 0; j < nops * 2; j += 2)
        (w++)->u = (uint64_t)vm[j] | (j + 1 < m ? (uint64_t)vm[j + 1] << 32 : 0);
    (w++)->u = h;
    t->cur = w;
    return new_var(t, y);
}

/* A record of the given kind and operands a, b whose payload is the n doubles pay (n a
 * constant where it is inlined): room made, the leading copy of the header on forward
 * tapes, the payload, the header; then the new variable of value y. */
static ALWAYS_INLINE cr_var emit_payload(cr_tape *t, double y, unsigned kind, uint32_t a,
                                         uint32_t b, const double *pay, size_t n)
{
    if (!cr__tape_room(t, n + 1 + t->pre) && cr__tape_grow(t, n + 1 + t->pre) != CR_OK)
        return cr__nan_const();
    uint64_t h = hdr_make(kind, a, b);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    for (size_t j = 0; j < n; j++)
        (w++)->d = pay[j];
    (w++)->u = h;
    t->cur = w;
    return new_var(t, y);
}

/* A linear record of one operand with partial p (first order, or zero Hessian). */
static inline cr_var emit_unary(cr_tape *t, double y, double p, uint32_t a)
{
    if (p == 1.0)
        return emit0(t, y, K_COPY, a, 0);
    if (p == -1.0)
        return emit0(t, y, K_NEG, a, 0);
    const double pay[1] = {p};
    return emit_payload(t, y, K_UNARY, a, 0, pay, 1);
}

/* A record of two operands with partials p0, p1 and no second derivatives, or the MUL
 * kind (Hessian (0 1; 1 0)) on a second-order tape. */
static inline cr_var emit_binary(cr_tape *t, double y, double p0, double p1, uint32_t a, uint32_t b,
                                 unsigned kind)
{
    if (kind == K_BINARY && p0 == 1.0) {
        if (p1 == 1.0)
            return emit0(t, y, K_ADD, a, b);
        if (p1 == -1.0)
            return emit0(t, y, K_SUB, a, b);
    }
    const double pay[2] = {p0, p1};
    return emit_payload(t, y, kind, a, b, pay, 2);
}

/* The record of one operand v with partial p and second derivative h (second-order tapes;
 * a linear one, h = 0, is the first-order record). */
static inline cr_var emit_one2(cr_tape *t, double y, double p, double h2, uint32_t v)
{
    if (h2 == 0.0)
        return emit_unary(t, y, p, v);
    const double pay[2] = {h2, p};
    return emit_payload(t, y, K_UNARY2, v, 0, pay, 2);
}

/* The record of two distinct operands v0, v1 with partials p0, p1 and the 2 x 2 Hessian H
 * (row-major): the first-order record when H = 0, MUL when H = [0 1; 1 0]. */
static inline cr_var emit_two2(cr_tape *t, double y, double p0, double p1, uint32_t v0, uint32_t v1,
                               const double *H)
{
    if (H[0] == 0.0 && H[1] == 0.0 && H[2] == 0.0 && H[3] == 0.0)
        return emit_binary(t, y, p0, p1, v0, v1, K_BINARY);
    if (H[0] == 0.0 && H[3] == 0.0 && H[1] == 1.0 && H[2] == 1.0)
        return emit_binary(t, y, p0, p1, v0, v1, K_MUL);
    const double pay[5] = {H[0], 0.5 * (H[1] + H[2]), H[3], p0, p1};
    return emit_payload(t, y, K_BINARY2, v0, v1, pay, 5);
}

/*
 * The general record of k variable operands (indices vi; k <= CR__MAX_GENERIC_ARGS) with
 * partials p and, when H is not NULL, the k x k Hessian H (row-major, symmetric) of the
 * result in those operands. Picks the compact kinds when the values allow. scratch: k^2
 * doubles when k > CR_SCALAR_MAX_IN and H is not NULL (else unused, may be NULL).
 */
cr_var cr__emit_general(cr_tape *t, double y, size_t k, const uint32_t *vi, const double *p,
                        const double *H, double *scratch)
{
    double pm[CR__MAX_GENERIC_ARGS], Hsmall[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
    double *Hm = k <= CR_SCALAR_MAX_IN ? Hsmall : scratch;
    uint32_t vm[CR__MAX_GENERIC_ARGS];
    /* An operand that appears twice (x * x) is one operand whose partial is the sum, and
     * whose second derivative sums the block. */
    size_t m = 0;
    size_t map[CR__MAX_GENERIC_ARGS];
    for (size_t j = 0; j < k; j++) {
        size_t r = m;
        for (size_t q = 0; q < m; q++)
            if (vm[q] == vi[j])
                r = q;
        if (r == m) {
            vm[m] = vi[j];
            pm[m] = 0.0;
            m++;
        }
        map[j] = r;
        pm[r] += p[j];
    }
    bool second = H != NULL;
    bool linear = true;
    if (second) {
        for (size_t q = 0; q < m * m; q++)
            Hm[q] = 0.0;
        for (size_t j = 0; j < k; j++)
            for (size_t l = 0; l < k; l++)
                Hm[map[j] * m + map[l]] += H[j * k + l];
        for (size_t q = 0; q < m * m; q++)
            if (Hm[q] != 0.0)
                linear = false;
    }
    if (m == 1)
        return linear ? emit_unary(t, y, pm[0], vm[0]) : emit_one2(t, y, pm[0], Hm[0], vm[0]);
    if (m == 2)
        return linear ? emit_binary(t, y, pm[0], pm[1], vm[0], vm[1], K_BINARY)
                      : emit_two2(t, y, pm[0], pm[1], vm[0], vm[1], Hm);
    /* n-ary: [Hessian triangle][partials][operands, two per word][header] */
    size_t need = linear ? cr__general_words(t, m) - m * (m + 1) / 2 : cr__general_words(t, m);
    if (!cr__tape_room(t, need) && cr__tape_grow(t, need) != CR_OK)
        return cr__nan_const();
    unsigned kind = linear ? K_NARY : K_NARY2;
    uint64_t h = hdr_make(kind, (uint32_t)m, 0);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    for (size_t j = 0; j < m && !linear; j++)
        for (size_t l = j; l < m; l++)
            (w++)->d = 0.5 * (Hm[j * m + l] + Hm[l * m + j]);
    for (size_t j = 0; j < m; j++)
        (w++)->d = pm[j];
    for (size_t j = 0; j < m; j += 2)
        (w++)->u = (uint64_t)vm[j] | (j + 1 < m ? (uint64_t)vm[j + 1] << 32 : 0);
    (w++)->u = h;
    t->cur = w;
    return new_var(t, y);
}

/* ---- Operations on scalar rows ---------------------------------------------------------- */

cr_var cr__tape_foreign(cr_tape *t, const char *fname, cr_var x)
{
    if (t->rec.open && x.tape == t->id) { /* a variable the open cursor made */
        cr__tape_fail(t, CR_EMISUSE,
                      "tape: a record made on the tape while a recording cursor is open "
                      "(record through the cursor, cr_rec_call1/2, or close it first)");
        return cr__nan_const();
    }
    if (x.tape == t->id)
        cr__tape_fail(t, CR_ETAPE,
                      "%s: variable %u is past this recording's %u variable%s (forged, or of "
                      "this tape before its last reset)",
                      fname, (unsigned)x.idx, (unsigned)t->nvars, CR__S((unsigned)t->nvars));
    cr__tape_fail(t, CR_ETAPE,
                  "%s: variable %u belongs to another tape, or to this tape before its last "
                  "reset (tape id %u, this recording is %u)",
                  fname, (unsigned)x.idx, (unsigned)x.tape, (unsigned)t->id);
    return cr__nan_const();
}

/* The replay tape's records of a row's results: operands merged as in emit_general, and
 * for each result the information to evaluate it again (row, result index, which argument
 * is which operand, the constants). */
static cr_status record_replay(cr_tape *t, const cr_scalar_rule *row, const cr_var *args,
                               const double *x, const double *Y, const double *D, cr_var *out,
                               const uint32_t *vi, const size_t *slot, size_t k)
{
    size_t nin = row->nin, m = 0;
    uint32_t vm[CR_SCALAR_MAX_IN];
    int8_t map[CR_SCALAR_MAX_IN];
    for (size_t j = 0; j < nin; j++)
        map[j] = -1;
    for (size_t q = 0; q < k; q++) {
        size_t r = m;
        for (size_t u = 0; u < m; u++)
            if (vm[u] == vi[q])
                r = u;
        if (r == m)
            vm[m++] = vi[q];
        map[slot[q]] = (int8_t)r;
    }
    (void)args;
    for (size_t o = 0; o < row->nout; o++) {
        cr__rinfo *info = cr_arena_alloc(t->arena, sizeof *info, _Alignof(cr__rinfo));
        if (info == NULL)
            return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), "tape: replay information");
        info->row = row;
        info->o = (uint8_t)o;
        info->nin = (uint8_t)nin;
        info->outcome = false;
        double pm[CR_SCALAR_MAX_IN] = {0};
        for (size_t j = 0; j < nin; j++) {
            info->map[j] = map[j];
            info->c[j] = x[j];
            if (map[j] >= 0)
                pm[map[j]] += D[o * nin + j];
        }
        t->fwd.rinfo = info;
        out[o] = emit_replay(t, Y[o], m, vm, pm);
    }
    return t->status;
}

/*
 * Record a row's results for arguments args (nin of them), whose values were evaluated:
 * Y (nout) and D (nout x nin). Constants are dropped from the records.
 */
cr_status cr__record_evaluated(cr_tape *t, const char *fname, const cr_scalar_rule *row,
                               const cr_var *args, const double *x, const double *Y,
                               const double *D, cr_var *out)
{
    size_t nin = row->nin, nout = row->nout;
    uint32_t vi[CR_SCALAR_MAX_IN];
    size_t slot[CR_SCALAR_MAX_IN], k = 0;
    unsigned cols = 0;
    for (size_t j = 0; j < nin; j++) {
        if (args[j].idx == CR_VAR_CONST)
            continue;
        if (!cr__var_ours(t, args[j])) {
            cr__tape_foreign(t, fname, args[j]);
            return t->status;
        }
        vi[k] = args[j].idx;
        slot[k] = j;
        cols |= 1u << j;
        k++;
    }
    if (k == 0) {
        for (size_t o = 0; o < nout; o++)
            out[o] = cr_const(Y[o]);
        return CR_OK;
    }
    if (t->pre > 1)
        return record_replay(t, row, args, x, Y, D, out, vi, slot, k);
    double Hfull[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
    bool second = (t->flags & CR_TAPE_SECOND_ORDER) != 0;
    if (second)
        cr__row_hessian(row, x, D, Hfull, cols);
    for (size_t o = 0; o < nout; o++) {
        double p[CR_SCALAR_MAX_IN], H[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
        for (size_t j = 0; j < k; j++) {
            p[j] = D[o * nin + slot[j]];
            for (size_t l = 0; l < k && second; l++)
                H[j * k + l] = Hfull[(o * nin + slot[j]) * nin + slot[l]];
        }
        if (!second && k == 1)
            out[o] = emit_unary(t, Y[o], p[0], vi[0]);
        else if (!second && k == 2 && vi[0] != vi[1])
            out[o] = emit_binary(t, Y[o], p[0], p[1], vi[0], vi[1], K_BINARY);
        else
            out[o] = cr__emit_general(t, Y[o], k, vi, p, second ? H : NULL, NULL);
    }
    return t->status;
}

/* The row of a built-in function value (set by the scalar-rule table). */
static inline const cr_scalar_rule *row_of(const cr_value *f)
{
    return (const cr_scalar_rule *)f->u.func.fn->udata;
}

/* The tape of a call (NULL: the current one); NULL too when a checked tape's call must not
 * go on (cr__tape_misused): the callers' answer to no tape, a NaN constant or CR_EMISUSE. */
static inline cr_tape *tape_or_current(cr_tape *t)
{
    return cr__tape_or_current(t);
}

/* Whether t is a second-order tape on which the arithmetic operations take op_second: not
 * failed, not a replay tape (whose records op2_slow makes). */
static inline bool second_fast(const cr_tape *t)
{
    return (t->flags & CR_TAPE_SECOND_ORDER) != 0 && t->status == CR_OK && t->pre <= 1 &&
           !t->check.finite;
}

/*
 * An arithmetic operation on a second-order tape, its arguments variables of this
 * recording or constants (at least one variable). Value and partials from the row (ev),
 * second derivatives by the complex step on the row's body over complex numbers (hcol,
 * arith_second.h: the same definition, expanded inline), the record written directly:
 * what record_evaluated and cr__row_hessian compute through the row's pointers, about five
 * times faster per operation on Rosenbrock's scalar loop.
 */
static ALWAYS_INLINE cr_var op_second(cr_tape *t, cr_scalar_eval_f64 ev, cr__hcol_fn hcol,
                                      const cr_var *args, size_t nin)
{
    double x[2], Y[1], D[2], p[2] = {0.0, 0.0}, H[4] = {0.0, 0.0, 0.0, 0.0};
    uint32_t vi[2] = {0, 0};
    size_t slot[2] = {0, 0}, k = 0;
    for (size_t j = 0; j < nin; j++) {
        x[j] = args[j].v;
        if (args[j].idx != CR_VAR_CONST) {
            vi[k] = args[j].idx;
            slot[k++] = j;
        }
    }
    ev(x, Y, D);
    for (size_t l = 0; l < k; l++) {
        double col[2] = {0.0, 0.0};
        hcol(x, slot[l], 1.0, col);
        for (size_t j = 0; j < k; j++)
            H[j * k + l] = col[slot[j]];
    }
    for (size_t j = 0; j < k; j++)
        p[j] = D[slot[j]];
    if (k == 1)
        return emit_one2(t, Y[0], p[0], H[0], vi[0]);
    if (vi[0] == vi[1]) /* x op x: one operand, the partials and the block summed */
        return emit_one2(t, Y[0], p[0] + p[1], H[0] + H[1] + H[2] + H[3], vi[0]);
    return emit_two2(t, Y[0], p[0], p[1], vi[0], vi[1], H);
}

/* The rare paths of a one-argument operation: no tape given (the current one), a failed
 * tape, a constant or foreign argument, a second-order tape. */
static NOINLINE cr_var op1_slow(cr_tape *t, const cr_value *f, cr_var a)
{
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK)
        return cr__nan_const();
    double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    row_of(f)->f64(&a.v, Y, D);
    if (t->check.finite &&
        cr__tape_check_finite(t, f->u.func.fn->name, &a.v, 1, Y, row_of(f)->nout) != CR_OK)
        return cr__nan_const();
    if (a.idx == CR_VAR_CONST)
        return cr_const(Y[0]);
    if (!cr__var_ours(t, a))
        return cr__tape_foreign(t, f->u.func.fn->name, a);
    cr_var r;
    if (cr__record_evaluated(t, f->u.func.fn->name, row_of(f), &a, &a.v, Y, D, &r) != CR_OK)
        return cr__nan_const();
    return r;
}

/*
 * One-argument scalar operation: the hot path (a variable of this recording, a
 * first-order tape). The row is evaluated once for value and partial, and writes the
 * partial straight into its place in the record; the record is then closed with its
 * header (a partial of exactly +-1 leaves only the header: COPY, NEG).
 */
static inline cr_var op1e(cr_tape *t, const cr_value *f, cr_scalar_eval_f64 ev, cr__hcol_fn hcol,
                          cr_var a)
{
    if (t != NULL && t->slow != 0 && hcol != NULL && second_fast(t) && cr__var_ours(t, a))
        return op_second(t, ev, hcol, &a, 1);
    if (t == NULL || t->slow != 0 || !cr__var_ours(t, a))
        return op1_slow(t, f, a);
    if (!cr__tape_room(t, 2 + t->pre) && cr__tape_grow(t, 2 + t->pre) != CR_OK)
        return cr__nan_const();
    cr__word *w = t->cur + t->pre;
    double x = a.v, Y[CR_SCALAR_MAX_OUT];
    ev(&x, Y, &w[0].d);
    double p = w[0].d;
    uint64_t h;
    if (p == 1.0 || p == -1.0) {
        h = hdr_make(p == 1.0 ? K_COPY : K_NEG, a.idx, 0);
        w[0].u = h;
        w += 1;
    } else {
        h = hdr_make(K_UNARY, a.idx, 0);
        w[1].u = h;
        w += 2;
    }
    if (t->pre)
        t->cur[0].u = h;
    t->cur = w;
    return new_var(t, Y[0]);
}

/* The rare paths of a two-argument operation (see op1_slow). */
static NOINLINE cr_var op2_slow(cr_tape *t, const cr_value *f, cr_var a, cr_var b)
{
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK)
        return cr__nan_const();
    double x[2] = {a.v, b.v}, Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    row_of(f)->f64(x, Y, D);
    if (t->check.finite &&
        cr__tape_check_finite(t, f->u.func.fn->name, x, 2, Y, row_of(f)->nout) != CR_OK)
        return cr__nan_const();
    if (a.idx == CR_VAR_CONST && b.idx == CR_VAR_CONST)
        return cr_const(Y[0]);
    cr_var args[2] = {a, b}, r;
    if (cr__record_evaluated(t, f->u.func.fn->name, row_of(f), args, x, Y, D, &r) != CR_OK)
        return cr__nan_const();
    return r;
}

/*
 * Two-argument scalar operation: the hot path (two variables, or a variable and a
 * constant, of this recording on a first-order tape). As op1, the row writes its two
 * partials into the record. When compact, the kind is picked from their values (ADD, SUB,
 * COPY, NEG for partials of exactly +-1); mul and div, whose partials are the operands,
 * always make UNARY and BINARY records, as their inline forms in tape_inline.h do.
 */
static inline cr_var op2e(cr_tape *t, const cr_value *f, cr_scalar_eval_f64 ev, cr__hcol_fn hcol,
                          cr_var a, cr_var b, bool compact)
{
    if (t == NULL)
        return op2_slow(t, f, a, b);
    bool va = cr__var_ours(t, a), vb = cr__var_ours(t, b);
    bool ours = (va || a.idx == CR_VAR_CONST) && (vb || b.idx == CR_VAR_CONST) && (va || vb);
    if (t->slow != 0 && hcol != NULL && ours && second_fast(t)) {
        cr_var args[2] = {a, b};
        return op_second(t, ev, hcol, args, 2);
    }
    if (t->slow != 0 || !ours)
        return op2_slow(t, f, a, b);
    if (!cr__tape_room(t, 3 + t->pre) && cr__tape_grow(t, 3 + t->pre) != CR_OK)
        return cr__nan_const();
    cr__word *w = t->cur + t->pre;
    double x[2], Y[CR_SCALAR_MAX_OUT];
    x[0] = a.v;
    x[1] = b.v;
    ev(x, Y, &w[0].d);
    uint64_t h;
    if (va && vb && a.idx != b.idx) {
        double p0 = w[0].d, p1 = w[1].d;
        if (compact && p0 == 1.0 && (p1 == 1.0 || p1 == -1.0)) {
            h = hdr_make(p1 == 1.0 ? K_ADD : K_SUB, a.idx, b.idx);
            w[0].u = h;
            w += 1;
        } else {
            h = hdr_make(K_BINARY, a.idx, b.idx);
            w[2].u = h;
            w += 3;
        }
    } else {
        /* One operand: the variable's partial, or the sum for x op x. */
        double p = va && vb ? w[0].d + w[1].d : va ? w[0].d : w[1].d;
        uint32_t v = va ? a.idx : b.idx;
        if (compact && (p == 1.0 || p == -1.0)) {
            h = hdr_make(p == 1.0 ? K_COPY : K_NEG, v, 0);
            w[0].u = h;
            w += 1;
        } else {
            h = hdr_make(K_UNARY, v, 0);
            w[0].d = p;
            w[1].u = h;
            w += 2;
        }
    }
    if (t->pre)
        t->cur[0].u = h;
    t->cur = w;
    return new_var(t, Y[0]);
}

/* Any row, through its function pointer. */
static inline cr_var op1(cr_tape *t, const cr_value *f, cr_var a)
{
    return op1e(t, f, row_of(f)->f64, NULL, a);
}

/* The arithmetic operations call the same rows' bodies directly (CR__ARITH_ROWS above), so the
 * compiler inlines value and partials into the record. */
cr_var cr_add(cr_tape *t, cr_var a, cr_var b)
{
    return op2e(t, &cr_fn_add, add_f64, cr__hcol_add, a, b, true);
}

cr_var cr_sub(cr_tape *t, cr_var a, cr_var b)
{
    return op2e(t, &cr_fn_sub, sub_f64, cr__hcol_sub, a, b, true);
}

cr_var cr_mul(cr_tape *t, cr_var a, cr_var b)
{
    return op2e(t, &cr_fn_mul, mul_f64, cr__hcol_mul, a, b, false);
}

cr_var cr_div(cr_tape *t, cr_var a, cr_var b)
{
    return op2e(t, &cr_fn_div, div_f64, cr__hcol_div, a, b, false);
}

cr_var cr_neg(cr_tape *t, cr_var a)
{
    return op1e(t, &cr_fn_neg, neg_f64, cr__hcol_neg, a);
}

/* The named operations tape.h declares itself (HAND 1 in CR_TAPE_SCALAR_OPS). */
#define OP1_HAND(NAME)                     \
    cr_var cr_##NAME(cr_tape *t, cr_var a) \
    {                                      \
        return op1(t, &cr_fn_##NAME, a);   \
    }
OP1_HAND(sin)
OP1_HAND(cos)
OP1_HAND(exp)
OP1_HAND(log)
OP1_HAND(sqrt)
OP1_HAND(asin)
#undef OP1_HAND

/* The named operations of the other scalar rows (tape_ops.h, generated from the registry):
 * rows of one and two inputs through the paths of cr_sin() and the arithmetic (the others go
 * through cr_tape_call(), rule_call.c). HAND = 1 marks those defined above. */
#define OP_1_1(OP, NAME)                 \
    cr_var OP(cr_tape *t, cr_var x)      \
    {                                    \
        return op1(t, &cr_fn_##NAME, x); \
    }
#define OP_2_1(OP, NAME)                                                              \
    cr_var OP(cr_tape *t, cr_var x, cr_var y)                                         \
    {                                                                                 \
        return op2e(t, &cr_fn_##NAME, row_of(&cr_fn_##NAME)->f64, NULL, x, y, false); \
    }
/* Rows of three inputs or two results: rule_call.c. */
#define OP_3_1(OP, NAME)
#define OP_1_2(OP, NAME)
CR_TAPE_SCALAR_OPS(CR__DEFINE_TAPE_OP)
#undef OP_1_2
#undef OP_3_1
#undef OP_2_1
#undef OP_1_1

cr_var cr_tape_input(cr_tape *t, double v)
{
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK)
        return cr__nan_const();
    cr__tape_no_rinfo(t);
    /* On a first-order tape, an input right after an input record joins it (not while a
     * cursor holds the write position: emit0 refuses the record then). */
    if (t->pre == 0 && !t->rec.open && t->store.chunk != NULL && t->cur > t->store.chunk->base) {
        uint64_t h = t->cur[-1].u;
        if (hdr_kind(h) == K_INPUT && hdr_a(h) < IDX_MASK && t->nvars + 1 < CR_TAPE_MAX_VARS) {
            t->cur[-1].u = h + 1; /* a + 1 */
            t->ninputs++;
            return new_var(t, v);
        }
    }
    cr_var r = emit0(t, v, K_INPUT, 1, 0);
    if (r.idx != CR_VAR_CONST)
        t->ninputs++;
    return r;
}

bool cr_tape_cmp(cr_tape *t, cr_var a, cr_cmp op, cr_var b)
{
    if ((unsigned)op > CR_CMP_NE) { /* not a cr_cmp: refused, never read as another one */
        if ((t = tape_or_current(t)) != NULL)
            cr__tape_fail(t, CR_EINVAL, "cr_tape_cmp: invalid comparison %d (CR_CMP_LT..NE)",
                          (int)op);
        return false;
    }
    bool r = cr__cmp_holds(op, a.v, b.v);
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK || t->pre < 2)
        return r;
    bool ca = a.idx == CR_VAR_CONST, cb = b.idx == CR_VAR_CONST;
    if (ca && cb)
        return r;
    if ((!ca && !cr__var_ours(t, a)) || (!cb && !cr__var_ours(t, b))) {
        cr__tape_foreign(t, "cr_tape_cmp", !ca && !cr__var_ours(t, a) ? a : b);
        return r;
    }
    /* A replay tape keeps the comparison: a replay where it comes out otherwise fails. */
    cr__rinfo *info = cr_arena_alloc(t->arena, sizeof *info, _Alignof(cr__rinfo));
    if (info == NULL) {
        cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), "tape: replay information");
        return r;
    }
    memset(info, 0, sizeof *info);
    info->o = (uint8_t)op;
    info->nin = 2;
    info->map[0] = ca ? -1 : 0;
    info->map[1] = cb ? -1 : 1;
    info->c[0] = a.v;
    info->c[1] = b.v;
    info->outcome = r;
    t->fwd.rinfo = info;
    emit0(t, 0.0, K_GUARD, ca ? 0 : a.idx, cb ? 0 : b.idx);
    return r;
}

cr_status cr_tape_inputs(cr_tape *t, const double *x, size_t n, cr_var *out)
{
    if ((t = tape_or_current(t)) == NULL)
        return CR_EMISUSE;
    if (n > 0 && (x == NULL || out == NULL))
        return cr__tape_fail(t, CR_EINVAL, "cr_tape_inputs: NULL x or out");
    /* Before reading x, on a failed tape too (which writes n NaN constants below). */
    if (n >= CR_TAPE_MAX_VARS - t->nvars)
        return cr__tape_fail(t, CR_EOVERFLOW,
                             "cr_tape_inputs: %zu input%s after %zu variable%s, "
                             "more than a recording holds (%zu)",
                             n, CR__S(n), (size_t)t->nvars, CR__S((size_t)t->nvars),
                             (size_t)CR_TAPE_MAX_VARS - 1);
    size_t j = 0;
    /* First-order tapes: the inputs join one record (its a counts them): one input made
     * the usual way opens it, the others are added to its count at once. */
    while (t->pre == 0 && t->status == CR_OK && j < n) {
        out[j] = cr_tape_input(t, x[j]);
        if (t->status != CR_OK)
            break;
        j++;
        uint64_t h = t->cur[-1].u; /* the input record out[j - 1] joined or opened */
        size_t k = IDX_MASK - hdr_a(h), left = CR_TAPE_MAX_VARS - 1 - t->nvars;
        if (k > left)
            k = left;
        if (k > n - j)
            k = n - j;
        uint32_t v = t->nvars, id = t->id;
        if (t->fast_id == id) { /* keys work (tape_inline.h): (idx, tape) written as one word */
            cr__tape_kvar u;
            u.v.v = 0.0;
            u.v.idx = v;
            u.v.tape = id;
            uint64_t key = u.k.key;
            for (size_t q = 0; q < k; q++, key += CR__TAPE_KEY_ONE) {
                u.k.d = x[j + q];
                u.k.key = key;
                out[j + q] = u.v;
            }
        } else {
            for (size_t q = 0; q < k; q++) {
                out[j + q].v = x[j + q];
                out[j + q].idx = v + (uint32_t)q;
                out[j + q].tape = id;
            }
        }
        t->cur[-1].u = h + k;
        t->hot.vt.key += k * CR__TAPE_KEY_ONE; /* nvars = v + k, as one word (set_fast) */
        t->ninputs += k;
        j += k;
    }
    for (; j < n; j++) /* other tapes, a full count, and NaN constants after a failure */
        out[j] = cr_tape_input(t, x[j]);
    return t->status;
}

/* ---- Reverse ------------------------------------------------------------------------------ */

/*
 * Dispatch of the first-order scalar loop. With GCC and Clang each step ends with its own
 * indirect jump through a table of label addresses (threaded code, as CPython's ceval and
 * Lua's lvm.c do): one taken branch per record instead of three (the switch's jump, the jump
 * back to the loop's test and the jump to its top), and one branch history per kind, so
 * that the jump to the next record's step is predicted from the step that precedes it.
 * Elsewhere the same steps are the cases of a switch. On Rosenbrock's scalar loop the
 * threaded form takes about a quarter less time per record.
 */
#if defined(__GNUC__) && !defined(CR_SWEEP_SWITCH)
#define SWEEP_THREADED 1
#else
#define SWEEP_THREADED 0
#endif

/* sweep_scalar, and sweep_scalar_consume which leaves the adjoints it reads at zero
 * (sweep_scalar.h). */
#define SWEEP_NAME    sweep_scalar
#define SWEEP_CONSUME 0
#include "sweep_scalar.h"
#undef SWEEP_NAME
#undef SWEEP_CONSUME
#define SWEEP_NAME    sweep_scalar_consume
#define SWEEP_CONSUME 1
#include "sweep_scalar.h"
#undef SWEEP_NAME
#undef SWEEP_CONSUME

/* The reverse step of the scalar kinds: on a first-order tape the threaded loop takes the
 * kinds scalar code records (sweep_scalar.h); every other scalar record (n-ary rows, the
 * second-order kinds, guards, and every record of a tape with leading words) is taken one
 * at a time below, and the threaded loop is entered again after each. Stops at base or at a
 * record of another node kind. */
static cr_status scalar_reverse(cr_tape *t, cr__rev *s)
{
    const cr__word *p = s->p, *base = s->base;
    double *adj = s->adj;
    size_t i = s->i;
    const size_t pre = s->pre;
    cr_status st = CR_OK;
    while (p > base) {
        if (pre == 0 && (p = s->consume ? sweep_scalar_consume(p, base, adj, &i, &s->in_hi)
                                        : sweep_scalar(p, base, adj, &i, &s->in_hi)) == base)
            break;
        uint64_t h = p[-1].u;
        uint32_t a = hdr_a(h);
        unsigned kind = hdr_kind(h);
        if (kind == K_GENERIC || kind == K_ARRAY)
            break;
        if (kind != K_INPUT && kind != K_GUARD)
            s->general = true;
        switch (kind) {
        case K_INPUT:
            if (s->consume && s->in_hi == 0)
                s->in_hi = i;
            i -= a;
            p -= 1 + pre;
            break;
        case K_GUARD:
            p -= 1 + pre;
            break;
        case K_UNARY: {
            double g = adj[--i];
            adj[a] += p[-2].d * g;
            p -= 2 + pre;
            break;
        }
        case K_UNARY2: {
            double g = adj[--i];
            adj[a] += p[-2].d * g;
            p -= 3 + pre;
            break;
        }
        case K_BINARY:
        case K_MUL: {
            double g = adj[--i];
            adj[a] += p[-3].d * g;
            adj[hdr_b(h)] += p[-2].d * g;
            p -= 3 + pre;
            break;
        }
        case K_BINARY2: {
            double g = adj[--i];
            adj[a] += p[-3].d * g;
            adj[hdr_b(h)] += p[-2].d * g;
            p -= 6 + pre;
            break;
        }
        case K_ADD: {
            double g = adj[--i];
            adj[a] += g;
            adj[hdr_b(h)] += g;
            p -= 1 + pre;
            break;
        }
        case K_SUB: {
            double g = adj[--i];
            adj[a] += g;
            adj[hdr_b(h)] -= g;
            p -= 1 + pre;
            break;
        }
        case K_COPY:
            adj[a] += adj[--i];
            p -= 1 + pre;
            break;
        case K_NEG:
            adj[a] -= adj[--i];
            p -= 1 + pre;
            break;
        case K_NARY:
        case K_NARY2: {
            double g = adj[--i];
            size_t k = a, nops = (k + 1) / 2;
            const cr__word *ops = p - 1 - nops, *pp = ops - k;
            for (size_t j = 0; j < k; j++)
                adj[cr__nary_op(ops, j)] += pp[j].d * g;
            p -= rec_words(h) + pre;
            break;
        }
        default:
            st = cr__tape_fail(t, CR_EINVAL, "tape: corrupt record (kind %u)", kind);
            goto out;
        }
    }
out:
    s->p = p;
    s->i = i;
    return st;
}

/* ---- Forward ------------------------------------------------------------------------------ */

/* The forward step of the scalar kinds, k directions: every scalar record from s->p on,
 * up to the chunk's end, the sweep's top or a record of another node kind. */
static ALWAYS_INLINE cr_status forward_k(cr_tape *t, cr__fwd *s, size_t k)
{
    const cr__word *p = s->p, *end = s->end;
    size_t i = s->i;
    const size_t top = s->top, pre = s->pre;
    double *tan = s->tan;
    cr_status st = CR_OK;
    while (p < end && i < top) {
        uint64_t h = p[0].u;
        const cr__word *pl = p + pre; /* payload */
        size_t a = hdr_a(h), b = hdr_b(h);
        double *ti = tan + i * k;
        const double *ta = tan + a * k, *tb = tan + b * k;
        switch (hdr_kind(h)) {
        case K_INPUT:
        case K_GUARD:
            break;
        case K_UNARY:
            for (size_t d = 0; d < k; d++)
                ti[d] += pl[0].d * ta[d];
            break;
        case K_UNARY2:
            for (size_t d = 0; d < k; d++)
                ti[d] += pl[1].d * ta[d];
            break;
        case K_BINARY:
        case K_MUL:
            for (size_t d = 0; d < k; d++)
                ti[d] += pl[0].d * ta[d] + pl[1].d * tb[d];
            break;
        case K_BINARY2:
            for (size_t d = 0; d < k; d++)
                ti[d] += pl[3].d * ta[d] + pl[4].d * tb[d];
            break;
        case K_ADD:
            for (size_t d = 0; d < k; d++)
                ti[d] += ta[d] + tb[d];
            break;
        case K_SUB:
            for (size_t d = 0; d < k; d++)
                ti[d] += ta[d] - tb[d];
            break;
        case K_COPY:
            for (size_t d = 0; d < k; d++)
                ti[d] += ta[d];
            break;
        case K_NEG:
            for (size_t d = 0; d < k; d++)
                ti[d] -= ta[d];
            break;
        case K_NARY:
        case K_NARY2: {
            size_t n = a, ntri = hdr_kind(h) == K_NARY2 ? n * (n + 1) / 2 : 0;
            const cr__word *pp = pl + ntri, *ops = pp + n;
            for (size_t j = 0; j < n; j++) {
                const double *tj = tan + (size_t)cr__nary_op(ops, j) * k;
                for (size_t d = 0; d < k; d++)
                    ti[d] += pp[j].d * tj[d];
            }
            break;
        }
        case K_GENERIC:
        case K_ARRAY:
            goto out;
        default:
            st = cr__tape_fail(t, CR_EINVAL, "tape: corrupt record (kind %u)", hdr_kind(h));
            goto out;
        }
        i += rec_vars(h);
        p += pre + rec_words(h);
    }
out:
    s->p = p;
    s->i = i;
    return st;
}

/* One direction (jvp, hvp) gets its own copy of the loop, without the inner loops. */
static cr_status scalar_forward(cr_tape *t, cr__fwd *s)
{
    if (s->k == 1)
        return forward_k(t, s, 1);
    return forward_k(t, s, s->k);
}

/* ---- Second order ------------------------------------------------------------------------- */

/*
 * The second-order reverse step of the scalar kinds (forward-over-reverse): with the
 * tangents tan of every variable along k directions, the adjoints adj and their directional
 * derivatives adjd. For a record r = f(x) with partials p and Hessian H:
 *     adj[x_j]  += p_j g
 *     adjd[x_j] += p_j gd + g * sum_l H_jl tan[x_l]
 * Every scalar record from s->p back, down to base or a record of another node kind.
 */
static ALWAYS_INLINE cr_status second_k(cr_tape *t, cr__sec *s, size_t k)
{
    const cr__word *p = s->p, *base = s->base;
    double *adj = s->adj, *adjd = s->adjd;
    const double *tan = s->tan;
    size_t i = s->i;
    cr_status st = CR_OK;
    while (p > base) {
        uint64_t h = p[-1].u;
        size_t a = hdr_a(h), b = hdr_b(h);
        unsigned kind = hdr_kind(h);
        if (kind == K_GENERIC || kind == K_ARRAY)
            break;
        if (kind == K_INPUT) { /* a inputs (one per record on these tapes) */
            i -= a;
            p -= 1 + 1;
            continue;
        }
        if (kind == K_GUARD) {
            p -= 1 + 1;
            continue;
        }
        i--;
        double g = adj[i];
        const double *gd = adjd + i * k;
        const double *ta = tan + a * k, *tb = tan + b * k;
        double *da = adjd + a * k, *db = adjd + b * k;
        switch (kind) {
        case K_UNARY: {
            double p0 = p[-2].d;
            adj[a] += p0 * g;
            for (size_t d = 0; d < k; d++)
                da[d] += p0 * gd[d];
            break;
        }
        case K_UNARY2: {
            double p0 = p[-2].d, h00 = p[-3].d * g;
            adj[a] += p0 * g;
            for (size_t d = 0; d < k; d++)
                da[d] += p0 * gd[d] + h00 * ta[d];
            break;
        }
        case K_BINARY: {
            double p0 = p[-3].d, p1 = p[-2].d;
            adj[a] += p0 * g;
            adj[b] += p1 * g;
            for (size_t d = 0; d < k; d++) {
                da[d] += p0 * gd[d];
                db[d] += p1 * gd[d];
            }
            break;
        }
        case K_MUL: {
            double p0 = p[-3].d, p1 = p[-2].d;
            adj[a] += p0 * g;
            adj[b] += p1 * g;
            for (size_t d = 0; d < k; d++) {
                double ta_d = ta[d], tb_d = tb[d];
                da[d] += p0 * gd[d] + g * tb_d;
                db[d] += p1 * gd[d] + g * ta_d;
            }
            break;
        }
        case K_BINARY2: {
            double p0 = p[-3].d, p1 = p[-2].d;
            double h00 = p[-6].d * g, h01 = p[-5].d * g, h11 = p[-4].d * g;
            adj[a] += p0 * g;
            adj[b] += p1 * g;
            for (size_t d = 0; d < k; d++) {
                double ta_d = ta[d], tb_d = tb[d];
                da[d] += p0 * gd[d] + h00 * ta_d + h01 * tb_d;
                db[d] += p1 * gd[d] + h01 * ta_d + h11 * tb_d;
            }
            break;
        }
        case K_ADD:
            adj[a] += g;
            adj[b] += g;
            for (size_t d = 0; d < k; d++) {
                da[d] += gd[d];
                db[d] += gd[d];
            }
            break;
        case K_SUB:
            adj[a] += g;
            adj[b] -= g;
            for (size_t d = 0; d < k; d++) {
                da[d] += gd[d];
                db[d] -= gd[d];
            }
            break;
        case K_COPY:
            adj[a] += g;
            for (size_t d = 0; d < k; d++)
                da[d] += gd[d];
            break;
        case K_NEG:
            adj[a] -= g;
            for (size_t d = 0; d < k; d++)
                da[d] -= gd[d];
            break;
        case K_NARY:
        case K_NARY2: {
            size_t n = a, nops = (n + 1) / 2;
            const cr__word *ops = p - 1 - nops, *pp = ops - n;
            for (size_t j = 0; j < n; j++) {
                size_t xj = cr__nary_op(ops, j);
                adj[xj] += pp[j].d * g;
                for (size_t d = 0; d < k; d++)
                    adjd[xj * k + d] += pp[j].d * gd[d];
            }
            if (kind == K_NARY2) {
                /* the upper triangle, row by row */
                const cr__word *tri = pp - n * (n + 1) / 2;
                size_t q = 0;
                for (size_t j = 0; j < n; j++)
                    for (size_t l = j; l < n; l++, q++) {
                        double hjl = tri[q].d * g;
                        size_t xj = cr__nary_op(ops, j), xl = cr__nary_op(ops, l);
                        for (size_t d = 0; d < k; d++) {
                            adjd[xj * k + d] += hjl * tan[xl * k + d];
                            if (l != j)
                                adjd[xl * k + d] += hjl * tan[xj * k + d];
                        }
                    }
            }
            break;
        }
        default:
            st = cr__tape_fail(t, CR_EINVAL, "tape: corrupt record (kind %u)", kind);
            goto out;
        }
        p -= rec_words(h) + 1;
    }
out:
    s->p = p;
    s->i = i;
    return st;
}

static cr_status scalar_second(cr_tape *t, cr__sec *s)
{
    if (s->k == 1)
        return second_k(t, s, 1);
    return second_k(t, s, s->k);
}

/* No replay steps of one instruction: the kind compiles its records into the prepared
 * program and replays whole runs of them in its own loops (cr__scalar_replay,
 * node_scalar_replay.c). */
const cr__node_kind cr__scalar_kind = {
    scalar_reverse, scalar_forward, scalar_second, NULL, NULL, NULL, NULL, &cr__scalar_replay};

/* ---- Recording cursors (tape.h, cr_rec) ------------------------------------------------- */

/* The chunk end of a cursor that may not write. */
static cr__word *const rec_nolim = NULL;

/* The key of a cursor that is not open: no variable's (no recording has CR__TAPE_NO_ID). */
static uint64_t rec_dead_key(void)
{
    cr__tape_kvar u;
    u.v.v = 0.0;
    u.v.idx = 0;
    u.v.tape = CR__TAPE_NO_ID;
    return u.k.key;
}

/* Give the write position to the open cursor: the inline path on the tape, and every
 * other record, then find no room (lim is cur) and reach grow(), which refuses them; the
 * cursor may write up to the chunk's end unless the tape has failed. */
static void rec_lend(cr_tape *t)
{
    t->rec.open = true;
    t->rec.lim = t->lim;
    t->lim = t->cur;
    t->rlim = t->status == CR_OK ? t->rec.lim : NULL;
}

/* Take the write position back from the open cursor (cur, and the variables counted in
 * key's index half). */
static void rec_return(cr_tape *t, cr__word *cur, uint64_t key)
{
    cr__tape_kvar u;
    u.k.key = key;
    t->cur = cur;
    t->nvars = u.v.idx;
    t->lim = t->rec.lim;
    t->rec.open = false;
    t->rlim = NULL;
}

static cr_rec_result rec_step(cr_var v, cr__word *cur, uint64_t key)
{
    cr_rec_result st;
    st.v = v;
    st.cur = cur;
    st.key = key;
    return st;
}

cr_rec cr_rec_begin(cr_tape *t)
{
    cr_rec r;
    t = tape_or_current(t);
    r.t = t;
    r.gen = 0; /* no opening's */
    r.cur = NULL;
    r.key = rec_dead_key();
    r.lim = &rec_nolim;
    if (t == NULL)
        return r;
    if (t->rec.open) {
        cr__tape_fail(t, CR_EMISUSE, "cr_rec_open: a recording cursor is already open on the tape");
        return r;
    }
    if (++t->rec.gen == 0)
        t->rec.gen = 1;
    rec_lend(t);
    r.gen = t->rec.gen;
    r.cur = t->cur;
    r.key = t->hot.vt.key;
    r.lim = &t->rlim;
    return r;
}

void cr_rec_end(cr_rec r)
{
    if (r.t != NULL && r.t->rec.open && r.t->rec.gen == r.gen)
        rec_return(r.t, r.cur, r.key);
}

/* Around an exported operation called for the cursor (gen, cur, key): the position back
 * to the tape before, to the cursor after. A cursor that is not open gets the call alone,
 * and a key that keeps it on this path. */
static bool rec_before(cr_tape *t, uint32_t gen, cr__word *cur, uint64_t key)
{
    if (t == NULL || !t->rec.open || t->rec.gen != gen)
        return false;
    rec_return(t, cur, key);
    return true;
}

static cr_rec_result rec_after(cr_tape *t, uint32_t gen, bool open, cr_var v)
{
    if (!open)
        return rec_step(v, NULL, rec_dead_key());
    if (t->rec.open) { /* f opened a cursor of its own and left it open */
        t->rec.open = false;
        t->lim = t->rec.lim;
        cr__tape_fail(t, CR_EMISUSE,
                      "cr_rec_call: the function returned with a recording cursor open");
    }
    t->rec.gen = gen;
    rec_lend(t);
    return rec_step(v, t->cur, t->hot.vt.key);
}

cr_rec_result cr_rec_apply2(cr_rec r, cr_var (*f)(cr_tape *, cr_var, cr_var), cr_var a, cr_var b)
{
    if (f == NULL) {
        if (r.t != NULL)
            cr__tape_fail(r.t, CR_EINVAL, "cr_rec_call2: f is NULL");
        return rec_step(cr__nan_const(), r.cur, r.key);
    }
    bool open = rec_before(r.t, r.gen, r.cur, r.key);
    cr_var v = f(r.t, a, b);
    return rec_after(r.t, r.gen, open, v);
}

cr_rec_result cr_rec_apply1(cr_rec r, cr_var (*f)(cr_tape *, cr_var), cr_var a)
{
    if (f == NULL) {
        if (r.t != NULL)
            cr__tape_fail(r.t, CR_EINVAL, "cr_rec_call1: f is NULL");
        return rec_step(cr__nan_const(), r.cur, r.key);
    }
    bool open = rec_before(r.t, r.gen, r.cur, r.key);
    cr_var v = f(r.t, a);
    return rec_after(r.t, r.gen, open, v);
}

/* The exported forms (CR_TAPE_NO_INLINE, bindings): each operation goes through the
 * library, with the records of the inline forms. */
void cr_rec_open(cr_rec *r, cr_tape *t)
{
    if (r != NULL)
        *r = cr_rec_begin(t);
}

void cr_rec_close(cr_rec *r)
{
    if (r != NULL)
        cr_rec_end(*r);
}

static cr_var rec_take(cr_rec *r, cr_rec_result st)
{
    r->cur = st.cur;
    r->key = st.key;
    return st.v;
}

cr_var cr_rec_call1(cr_rec *r, cr_var (*f)(cr_tape *, cr_var), cr_var a)
{
    if (r == NULL)
        return cr__nan_const();
    return rec_take(r, cr_rec_apply1(*r, f, a));
}

cr_var cr_rec_call2(cr_rec *r, cr_var (*f)(cr_tape *, cr_var, cr_var), cr_var a, cr_var b)
{
    if (r == NULL)
        return cr__nan_const();
    return rec_take(r, cr_rec_apply2(*r, f, a, b));
}

cr_var cr_rec_add(cr_rec *r, cr_var a, cr_var b)
{
    return cr_rec_call2(r, cr_add, a, b);
}

cr_var cr_rec_sub(cr_rec *r, cr_var a, cr_var b)
{
    return cr_rec_call2(r, cr_sub, a, b);
}

cr_var cr_rec_mul(cr_rec *r, cr_var a, cr_var b)
{
    return cr_rec_call2(r, cr_mul, a, b);
}

cr_var cr_rec_div(cr_rec *r, cr_var a, cr_var b)
{
    return cr_rec_call2(r, cr_div, a, b);
}

cr_var cr_rec_neg(cr_rec *r, cr_var a)
{
    return cr_rec_call1(r, cr_neg, a);
}

/* ---- Recording user functions ------------------------------------------------------------ */

cr_status cr__tape_record(cr_tape *t, cr_ad_fn f, void *env, const double *x, size_t n, cr_var **xs,
                          cr_var *ys, size_t m)
{
    if (t == NULL)
        return CR_EINVAL;
    if (cr__tape_misused(t))
        return CR_EMISUSE;
    if (f == NULL || (n > 0 && x == NULL) || (m > 0 && ys == NULL))
        return cr_ctx_error(t->ctx, CR_EINVAL, "cr_tape_record: NULL function or buffers");
    if (n >= CR_TAPE_MAX_VARS) /* before n variables are allocated or x is read */
        return cr_ctx_error(t->ctx, CR_EOVERFLOW,
                            "cr_tape_record: %zu inputs, more than a recording holds (%zu)", n,
                            (size_t)CR_TAPE_MAX_VARS - 1);
    cr_tape_reset(t);
    cr_var *in = *xs;
    if (in == NULL) {
        /* Scratch for the input variables, gone at the next reset. */
        in = cr__arena_array(t->arena, "cr_tape_record", n, sizeof *in, _Alignof(cr_var));
        if (in == NULL)
            return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), "cr_tape_record");
        *xs = in;
    }
    cr_status st = cr_tape_inputs(t, x, n, in);
    if (st == CR_OK) {
        for (size_t i = 0; i < m; i++)
            ys[i] = cr__nan_const();
        st = f(t, in, n, ys, m, env);
    }
    if (t->rec.open) {
        /* The cursor's position is lost with it: the records it made after its last call
         * into the library are not the tape's. */
        t->rec.open = false;
        t->lim = t->rec.lim;
        cr__tape_fail(t, CR_EMISUSE,
                      "the recorded function returned with a recording cursor open "
                      "(cr_rec_open without cr_rec_close)");
    }
    if (st != CR_OK && t->status == CR_OK)
        return cr__tape_fail(t, st, "the recorded function failed: %s", cr_status_str(st));
    return t->status != CR_OK ? t->status : st;
}

cr_status cr_tape_record(cr_tape *t, cr_ad_fn f, void *env, const double *x, size_t n, cr_var *xs,
                         cr_var *ys, size_t m)
{
    cr_var *in = xs;
    return cr__tape_record(t, f, env, x, n, &in, ys, m);
}
