/**
 * @file tape_inline.h
 * @brief Opt-in: the tape's arithmetic operations and recording cursors inline in the
 *        caller, and the record format they write.
 *
 * Including this header (after, or instead of, chainrules.h or chainrules/tape.h) makes
 * cr_add(), cr_sub(), cr_mul(), cr_div(), cr_neg() and the cursor operations cr_rec_open(),
 * cr_rec_add() ... cr_rec_call2() macros over static inline functions that write the record
 * in the caller when they can (a tape given explicitly, first order, not failed, room in
 * the current chunk, operands of its recording) and call the exported function of the same
 * name otherwise; both paths give the same values, records and errors. Without it (the
 * umbrella header alone) the same names are the exported functions: one call per
 * operation, and no dependence on the library's internals.
 *
 * The inline code reads the first fields of the tape and writes the record format, so a
 * program that includes this header depends on them: they belong to the library's ABI
 * (changing them needs a new soname). Code that must not (bindings, plugins built against
 * another version) leaves this header out. Programs whose speed is the recording's (tight
 * scalar loops on a tape) include it: about a third less time per arithmetic operation on
 * Rosenbrock's scalar loop (BENCHMARKS.md).
 *
 * `&cr_add` and `(cr_add)(t, a, b)` always name the exported function.
 */
#ifndef CR_TAPE_INLINE_H
#define CR_TAPE_INLINE_H

#include <string.h>

#include "arith_rows.h"
#include "tape.h"

CR_BEGIN_DECLS

/**
 * @cond CR_PRIVATE
 *
 * cr_add, cr_sub, cr_mul, cr_div and cr_neg are recorded in the caller: each is a macro
 * over a static inline function that evaluates the row (arith_rows.h, the one definition
 * of value and partials) and, on the fast path, writes the record itself. The fast path
 * is taken when the tape is given (not NULL), is a plain first-order tape that has not
 * failed, has room for the record in its current chunk, and the operands are variables
 * of its current recording or constants (not both constants). Everything else (the
 * thread's current tape, a full chunk, a failed, forward, second-order or replay tape, a
 * foreign variable, two constants) calls the exported function of the same name, which
 * handles it exactly as before: the records, values, errors and messages are the same on
 * both paths.
 *
 * What the inline code relies on: the first fields of the tape (cr__tape_hot), the
 * record header's encoding and the numbers of the compact record kinds. They are part of
 * the library's ABI from this version on: changing them needs a new soname. Code that must
 * not depend on them (a plugin loaded by a program built against another version, a
 * language binding) does not include this header (or defines CR_TAPE_NO_INLINE before it, which
 * keeps the layout's declarations and leaves out the inline operations) and calls the
 * exported functions; `&cr_add` and `(cr_add)(t, a, b)` always name them.
 */

/* The first fields of every tape, read and written by the inline operations. fast_id is
 * the current recording's id while the inline path may record on the tape, and
 * CR__TAPE_NO_ID (an id no recording has) otherwise. nvars and fast_id are laid out as a
 * cr_var's idx and tape, so that `key` holds, in one word, the (idx, tape) pair of the
 * next variable the inline path makes. While a cursor (cr_rec) is open, cur, lim and key
 * are where they were when it last left the library, lim is cur (so that the inline path
 * on the tape, and every other record, goes to the library, which refuses it) and rlim is
 * the chunk's end the cursor may write up to; rlim is NULL otherwise. */
typedef struct cr__tape_hot {
    cr__word *cur; /* next free word of the current chunk */
    cr__word *lim; /* end of the current chunk */
    union {
        struct {
            uint32_t nvars;   /* variables recorded; the next one's index */
            uint32_t fast_id; /* the recording's id, or CR__TAPE_NO_ID: take the exported
                                 function */
        } f;
        uint64_t key; /* the same two fields as one word */
    } vt;
    cr__word *rlim; /* the open cursor's chunk end, or NULL */
} cr__tape_hot;

#define CR__TAPE_NO_ID UINT32_MAX

/* Record kinds written inline (the numbers of src/ad/tape_impl.h, checked there). */
#define CR__TAPE_K_UNARY  1u
#define CR__TAPE_K_BINARY 2u
#define CR__TAPE_K_ADD    3u
#define CR__TAPE_K_SUB    4u
#define CR__TAPE_K_COPY   5u
#define CR__TAPE_K_NEG    6u

/* A record header: operand indices a, b (30 bits each) and the kind. */
static inline uint64_t cr__tape_hdr(unsigned kind, uint32_t a, uint32_t b)
{
    return (uint64_t)a | ((uint64_t)b << 30) | ((uint64_t)kind << 60);
}

/* A cr_var seen as its value and the word holding its (idx, tape) pair: its key. */
typedef union cr__tape_kvar {
    cr_var v;
    struct {
        double d;
        uint64_t key;
    } k;
} cr__tape_kvar;

/* The tape half of a key, and the key of the next index. A key is the bytes of (idx,
 * tape) read as one word, so which half is the tape depends on the byte order; the
 * library checks the layout when a tape is made and keeps the inline path closed if it
 * differs. */
/* CR__TAPE_OURS(ka, k): key ka is a variable of the recording whose next key is k: the same
 * tape half and an index below nvars (an index past the recording, forged or stale, would
 * have the sweep read past its adjoints). In the little-endian layout (nvars the low half)
 * that is one test: ka = k - d with 1 <= d <= nvars, where k - ka cannot borrow from the
 * tape half; a constant (index UINT32_MAX, tape 0) never passes. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define CR__TAPE_KEY_ID(k)   ((uint32_t)(k))
#define CR__TAPE_KEY_ONE     ((uint64_t)1 << 32)
#define CR__TAPE_OURS(ka, k) ((CR__TAPE_KEY_ID((ka) ^ (k)) == 0) & ((ka) < (k)))
#else
#define CR__TAPE_KEY_ID(k)   ((uint32_t)((k) >> 32))
#define CR__TAPE_KEY_ONE     ((uint64_t)1)
#define CR__TAPE_OURS(ka, k) ((uint64_t)((k) - (ka)-1u) < (uint64_t)(uint32_t)(k))
#endif

#if !defined(CR_TAPE_NO_INLINE) && !defined(CR_DOXYGEN)

/* CR__TAPE_CONST(x): x is known at compile time to be a constant (cr_const()). */
#if defined(__GNUC__)
#define CR__TAPE_INLINE    static inline __attribute__((always_inline))
#define CR__TAPE_LIKELY(c) __builtin_expect(!!(c), 1)
#define CR__TAPE_CONST(x)  (__builtin_constant_p((x).idx) && (x).idx == CR_VAR_CONST)
#else
#define CR__TAPE_INLINE    static inline
#define CR__TAPE_LIKELY(c) (c)
#define CR__TAPE_CONST(x)  0
#endif

/* The rows' f64 bodies: cr__tape_row_add(x, Y, D), ... */
#define CR__TAPE_ROW(NAME, NIN, NOUT, PRIMAL, ...)                                  \
    CR__TAPE_INLINE void cr__tape_row_##NAME(const double *x, double *Y, double *D) \
    {                                                                               \
        PRIMAL;                                                                     \
        __VA_ARGS__;                                                                \
    }
CR__ARITH_ROWS(CR__TAPE_ROW)
#undef CR__TAPE_ROW

/* The words are written as uint64_t and double, not through the union: a store through
 * the union may alias any pointer (the tape's cursor included). */
CR__TAPE_INLINE uint64_t *cr__tape_u(cr__word *w)
{
    return &w->u;
}
CR__TAPE_INLINE double *cr__tape_d(cr__word *w)
{
    return &w->d;
}

/* The bits of a double. */
CR__TAPE_INLINE uint64_t cr__tape_bits(double p)
{
    uint64_t u;
    memcpy(&u, &p, sizeof u);
    return u;
}

/* Whether n words fit between the cursor w and the chunk's end lim, compared as addresses
 * (one addition and one comparison; the difference of the pointers took two more
 * instructions). w + n cannot wrap: w is in a chunk or is the tape's dummy word. */
#define CR__TAPE_FITS(w, lim, n) ((uintptr_t)(w) + (n) * sizeof(cr__word) <= (uintptr_t)(lim))

/* Whether bits u are those of 1.0 or -1.0 (the sign is u >> 63). */
#define CR__TAPE_PM1(u) (((u) << 1) == ((uint64_t)0x3FF0000000000000u << 1))

CR__TAPE_INLINE uint64_t cr__tape_key(cr_var a)
{
    cr__tape_kvar u;
    u.v = a;
    return u.k.key;
}

/* Where the inline path writes: the position and the key it advances (the tape's own
 * fields, or a cursor's copies of them). */
typedef struct cr__tape_at {
    cr__word **cur;
    uint64_t *key;
} cr__tape_at;

/* The new variable of value y whose key is k (the key before the record), the record
 * written up to w. */
CR__TAPE_INLINE cr_var cr__tape_push(cr__tape_at at, cr__word *w, uint64_t k, double y)
{
    cr__tape_kvar r;
    r.k.d = y;
    r.k.key = k;
    *at.key = k + CR__TAPE_KEY_ONE;
    *at.cur = w;
    return r.v;
}

/* The record of one operand v with partial p at w: when unit (the operation's partials
 * are +-1: add, sub, neg), COPY and NEG for partials of exactly 1 and -1 (the header
 * alone); UNARY otherwise; then the new variable (cr__tape_push). Each branch ends with
 * its own push, so that the cursor moves by a constant. */
CR__TAPE_INLINE cr_var cr__tape_push1(cr__tape_at at, cr__word *w, uint64_t k, double y, uint32_t v,
                                      double p, int unit)
{
    uint64_t u = cr__tape_bits(p);
    if (unit && CR__TAPE_PM1(u)) {
        *cr__tape_u(&w[0]) = cr__tape_hdr(CR__TAPE_K_COPY + (unsigned)(u >> 63), v, 0);
        return cr__tape_push(at, w + 1, k, y);
    }
    *cr__tape_d(&w[0]) = p;
    *cr__tape_u(&w[1]) = cr__tape_hdr(CR__TAPE_K_UNARY, v, 0);
    return cr__tape_push(at, w + 2, k, y);
}

/* A two-argument operation with value y and partials pa, pb, written at *at.cur (w) up to
 * lim with key *at.key (k) when it can be: returns 1 and the variable in *out, else 0 (the
 * caller goes to the library). The kinds follow the operation, as in the exported
 * functions: when unit (add, sub), ADD, SUB, COPY and NEG for partials of exactly +-1;
 * UNARY and BINARY otherwise (mul, div), whatever the values (testing them cost more than
 * the words they save). */
CR__TAPE_INLINE int cr__tape_try2(cr__tape_at at, cr__word *w, cr__word *lim, uint64_t k, cr_var a,
                                  cr_var b, double y, double pa, double pb, int unit, cr_var *out)
{
    uint64_t ka = cr__tape_key(a), kb = cr__tape_key(b);
    /* Two variables of this recording (a constant's tape is 0, never an id): both keys
     * agree with the tape's in their tape half and have an index below nvars
     * (CR__TAPE_OURS). The test is skipped when an operand is known to be a constant at
     * compile time. */
    if (!CR__TAPE_CONST(a) && !CR__TAPE_CONST(b) &&
        CR__TAPE_LIKELY(CR__TAPE_OURS(ka, k) & CR__TAPE_OURS(kb, k) & CR__TAPE_FITS(w, lim, 3))) {
        if (a.idx == b.idx) { /* x op x: one operand, the partials summed */
            *out = cr__tape_push1(at, w, k, y, a.idx, pa + pb, unit);
            return 1;
        }
        uint64_t ua = cr__tape_bits(pa), ub = cr__tape_bits(pb);
        if (unit && ua == (uint64_t)0x3FF0000000000000u && CR__TAPE_PM1(ub)) {
            *cr__tape_u(&w[0]) = cr__tape_hdr(CR__TAPE_K_ADD + (unsigned)(ub >> 63), a.idx, b.idx);
            *out = cr__tape_push(at, w + 1, k, y);
            return 1;
        }
        *cr__tape_d(&w[0]) = pa;
        *cr__tape_d(&w[1]) = pb;
        *cr__tape_u(&w[2]) = cr__tape_hdr(CR__TAPE_K_BINARY, a.idx, b.idx);
        *out = cr__tape_push(at, w + 3, k, y);
        return 1;
    }
    bool ca = a.idx == CR_VAR_CONST, cb = b.idx == CR_VAR_CONST;
    if (ca != cb) { /* one variable and a constant */
        uint32_t v = ca ? b.idx : a.idx;
        if (CR__TAPE_LIKELY(CR__TAPE_OURS(ca ? kb : ka, k) & CR__TAPE_FITS(w, lim, 2))) {
            *out = cr__tape_push1(at, w, k, y, v, ca ? pb : pa, unit);
            return 1;
        }
    }
    return 0;
}

/* A one-argument operation whose partial is +-1 (neg; see cr__tape_try2). */
CR__TAPE_INLINE int cr__tape_try1(cr__tape_at at, cr__word *w, cr__word *lim, uint64_t k, cr_var a,
                                  double y, double p, cr_var *out)
{
    if (CR__TAPE_LIKELY(CR__TAPE_OURS(cr__tape_key(a), k) & CR__TAPE_FITS(w, lim, 2))) {
        *out = cr__tape_push1(at, w, k, y, a.idx, p, 1);
        return 1;
    }
    return 0;
}

/* The operation on tape t: inline when it can be, else `slow`, the exported function. */
CR__TAPE_INLINE cr_var cr__tape_op2(cr_tape *t, cr_var a, cr_var b, double y, double pa, double pb,
                                    int unit, cr_var (*slow)(cr_tape *, cr_var, cr_var))
{
    if (CR__TAPE_LIKELY(t != NULL)) {
        cr__tape_hot *h = (cr__tape_hot *)(void *)t;
        cr__tape_at at = {&h->cur, &h->vt.key};
        cr_var out;
        if (cr__tape_try2(at, h->cur, h->lim, h->vt.key, a, b, y, pa, pb, unit, &out))
            return out;
    }
    return slow(t, a, b);
}

CR__TAPE_INLINE cr_var cr__tape_op1(cr_tape *t, cr_var a, double y, double p,
                                    cr_var (*slow)(cr_tape *, cr_var))
{
    if (CR__TAPE_LIKELY(t != NULL)) {
        cr__tape_hot *h = (cr__tape_hot *)(void *)t;
        cr__tape_at at = {&h->cur, &h->vt.key};
        cr_var out;
        if (cr__tape_try1(at, h->cur, h->lim, h->vt.key, a, y, p, &out))
            return out;
    }
    return slow(t, a);
}

/* The operation through cursor r: inline when it can be (the cursor's copies of the
 * position and key, the chunk's end read from the tape), else the library with the
 * cursor by value (cr_rec_apply2), whose answer the cursor takes back. */
CR__TAPE_INLINE cr_var cr__rec_take(cr_rec *r, cr_rec_result st)
{
    r->cur = st.cur;
    r->key = st.key;
    return st.v;
}

CR__TAPE_INLINE cr_var cr__rec_op2(cr_rec *r, cr_var a, cr_var b, double y, double pa, double pb,
                                   int unit, cr_var (*slow)(cr_tape *, cr_var, cr_var))
{
    cr__tape_at at = {&r->cur, &r->key};
    cr_var out;
    if (cr__tape_try2(at, r->cur, *r->lim, r->key, a, b, y, pa, pb, unit, &out))
        return out;
    return cr__rec_take(r, cr_rec_apply2(*r, slow, a, b));
}

CR__TAPE_INLINE cr_var cr__rec_op1(cr_rec *r, cr_var a, double y, double p,
                                   cr_var (*slow)(cr_tape *, cr_var))
{
    cr__tape_at at = {&r->cur, &r->key};
    cr_var out;
    if (cr__tape_try1(at, r->cur, *r->lim, r->key, a, y, p, &out))
        return out;
    return cr__rec_take(r, cr_rec_apply1(*r, slow, a));
}

/* The rows' operations on a tape (cr__tape_add, ...) and through a cursor (cr__rec_add, ...):
 * the row evaluated once for value and partials, then recorded by OP2 / OP1 on W. */
#define CR__TAPE_OP2_ON(PREFIX, W, OP2, NAME, UNIT)              \
    CR__TAPE_INLINE cr_var PREFIX##NAME(W w, cr_var a, cr_var b) \
    {                                                            \
        double x[2], Y[1], D[2];                                 \
        x[0] = a.v;                                              \
        x[1] = b.v;                                              \
        cr__tape_row_##NAME(x, Y, D);                            \
        return OP2(w, a, b, Y[0], D[0], D[1], UNIT, cr_##NAME);  \
    }
#define CR__TAPE_OP1_ON(PREFIX, W, OP1, NAME)          \
    CR__TAPE_INLINE cr_var PREFIX##NAME(W w, cr_var a) \
    {                                                  \
        double Y[1], D[1];                             \
        cr__tape_row_##NAME(&a.v, Y, D);               \
        return OP1(w, a, Y[0], D[0], cr_##NAME);       \
    }
#define CR__TAPE_OP2(NAME, UNIT)                                    \
    CR__TAPE_OP2_ON(cr__tape_, cr_tape *, cr__tape_op2, NAME, UNIT) \
    CR__TAPE_OP2_ON(cr__rec_, cr_rec *, cr__rec_op2, NAME, UNIT)
CR__TAPE_OP2(add, 1)
CR__TAPE_OP2(sub, 1)
CR__TAPE_OP2(mul, 0)
CR__TAPE_OP2(div, 0)
CR__TAPE_OP1_ON(cr__tape_, cr_tape *, cr__tape_op1, neg)
CR__TAPE_OP1_ON(cr__rec_, cr_rec *, cr__rec_op1, neg)
#undef CR__TAPE_OP2
#undef CR__TAPE_OP2_ON
#undef CR__TAPE_OP1_ON

CR__TAPE_INLINE void cr__rec_open_i(cr_rec *r, cr_tape *t)
{
    *r = cr_rec_begin(t);
}

CR__TAPE_INLINE void cr__rec_close_i(cr_rec *r)
{
    cr_rec_end(*r);
}

CR__TAPE_INLINE cr_var cr__rec_call1_i(cr_rec *r, cr_var (*f)(cr_tape *, cr_var), cr_var a)
{
    return cr__rec_take(r, cr_rec_apply1(*r, f, a));
}

CR__TAPE_INLINE cr_var cr__rec_call2_i(cr_rec *r, cr_var (*f)(cr_tape *, cr_var, cr_var), cr_var a,
                                       cr_var b)
{
    return cr__rec_take(r, cr_rec_apply2(*r, f, a, b));
}

#define cr_add(t, a, b) cr__tape_add((t), (a), (b))
#define cr_sub(t, a, b) cr__tape_sub((t), (a), (b))
#define cr_mul(t, a, b) cr__tape_mul((t), (a), (b))
#define cr_div(t, a, b) cr__tape_div((t), (a), (b))
#define cr_neg(t, a)    cr__tape_neg((t), (a))

#define cr_rec_open(r, t)        cr__rec_open_i((r), (t))
#define cr_rec_close(r)          cr__rec_close_i((r))
#define cr_rec_add(r, a, b)      cr__rec_add((r), (a), (b))
#define cr_rec_sub(r, a, b)      cr__rec_sub((r), (a), (b))
#define cr_rec_mul(r, a, b)      cr__rec_mul((r), (a), (b))
#define cr_rec_div(r, a, b)      cr__rec_div((r), (a), (b))
#define cr_rec_neg(r, a)         cr__rec_neg((r), (a))
#define cr_rec_call1(r, f, a)    cr__rec_call1_i((r), (f), (a))
#define cr_rec_call2(r, f, a, b) cr__rec_call2_i((r), (f), (a), (b))

#endif /* !CR_TAPE_NO_INLINE */

/** @endcond */

CR_END_DECLS

#endif /* CR_TAPE_INLINE_H */
