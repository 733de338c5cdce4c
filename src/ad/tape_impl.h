/*
 * Private layout of the tape: the record stream, the record kinds and the helpers shared
 * by the tape (tape.c), the node kinds (node_scalar.c, rule_call.c, node_array.c, ...), the
 * sweeps (sweep.c) and the engine (engine.c).
 */
#ifndef CR_TAPE_IMPL_H
#define CR_TAPE_IMPL_H

/* The library's files call the exported operations, not the inline ones of tape_inline.h
 * (whose record format and cr__tape_hot layout they use): no file reads a tape's fields both
 * through struct cr_tape and through cr__tape_hot. */
#ifndef CR_TAPE_NO_INLINE
#define CR_TAPE_NO_INLINE
#endif

#include <stdatomic.h>

#include <chainrules/engine.h>
#include <chainrules/tape.h>
#include <chainrules/tape_inline.h>

#include "../rules/rules_impl.h"

/* A file that included tape_inline.h before this header got the inline operations: take them
 * back. */
#undef cr_add
#undef cr_sub
#undef cr_mul
#undef cr_div
#undef cr_neg

/*
 * Records. The stream is a sequence of 8-byte words in chunks carved from the tape's
 * arena. A record is its payload followed by a header word:
 *
 *     [payload ...][header]            header = a | b << 30 | kind << 60
 *
 * a and b are operand indices (30 bits each). The reverse sweep reads a header, learns
 * the record's size from its kind and the tape's flags, and steps back over it. Record i
 * (counting variables, not words) produces variable i, so no result index is stored; a
 * record with several results (a pullback with a tuple output) produces consecutive
 * variables, the last one named by its position.
 *
 * A tape with CR_TAPE_FORWARD also puts a copy of the header in front of each record, so
 * that forward sweeps can step over records too. A CR_TAPE_SECOND_ORDER tape puts the
 * operation's second derivatives (upper triangle of its Hessian) first in the payload
 * of the kinds that have them.
 *
 *   kind      payload (first order)          meaning (g = adjoint of the result)
 *   INPUT     -                              a inputs: nothing flows back
 *   UNARY     p                              a += p g
 *   BINARY    p0 p1                          a += p0 g, b += p1 g
 *   ADD       -                              a += g,  b += g   (partials were 1, 1)
 *   SUB       -                              a += g,  b -= g   (partials were 1, -1)
 *   COPY      -                              a += g            (partial was 1)
 *   NEG       -                              a -= g            (partial was -1)
 *   NARY      p[k] ops[ceil(k/2)]            a = k operands, packed two per word
 *   GENERIC   node*                          a pullback (see gen_node), nout results
 *   UNARY2    h p                            second-order tape: a nonlinear unary record
 *   BINARY2   h00 h01 h11 p0 p1              second-order tape: a nonlinear binary record
 *   MUL       p0 p1                          second-order tape: Hessian (0 1; 1 0)
 *   NARY2     h[k(k+1)/2] p[k] ops           second-order tape: nonlinear n-ary record
 *
 * An INPUT record makes a consecutive input variables (a >= 1): on a first-order tape,
 * inputs made one after the other share one record (cr_tape_inputs(), cr_tape_input()), so
 * that a function of n inputs has one input record, not n; other tapes make one record
 * per input (a = 1).
 *
 * The compact kinds (ADD, SUB, COPY, NEG, MUL, linear UNARY/BINARY) are chosen from the
 * values the row computed (partials that are exactly 1 or -1, Hessians that are zero),
 * not from knowing which function it was: every derivative still comes from its row.
 */
enum {
    K_INPUT = 0,
    K_UNARY = 1,
    K_BINARY = 2,
    K_ADD = 3,
    K_SUB = 4,
    K_COPY = 5,
    K_NEG = 6,
    K_NARY = 7,
    K_GENERIC = 8,
    K_UNARY2 = 9,
    K_BINARY2 = 10,
    K_MUL = 11,
    K_NARY2 = 12,
    K_GUARD = 13,
    K_ARRAY = 14, /* an array function's pullback (array_call.c): payload cr__anode*, a = the
                    scalar variables it makes (0 for an array result, 1 for a scalar one) */
    K_STOP = 15   /* never recorded: the header each chunk keeps in the word before its first
                     (cr__chunk.stop) */
};

/* Replay tapes (prepared gradients) lead each record with its header and a pointer to
 * this: how to evaluate the record again at new inputs. A GUARD record (a comparison made
 * with cr_tape_cmp, no variable) keeps the comparison and its outcome. */
typedef struct cr__rinfo {
    const cr_scalar_rule *row;    /* NULL for a guard */
    uint8_t o;                    /* the row's result this record holds; a guard's cr_cmp */
    uint8_t nin;                  /* the row's arguments */
    int8_t map[CR_SCALAR_MAX_IN]; /* argument j: operand position, or -1 for c[j] */
    bool outcome;                 /* a guard's result when recorded */
    double c[CR_SCALAR_MAX_IN];   /* the arguments' values when recorded (constants kept) */
} cr__rinfo;

/* cr__word, the stream's 8-byte word, is defined in tape.h (tape_inline.h's operations write
 * records). */

#define IDX_MASK ((uint64_t)0x3FFFFFFF)

/* Functions of the engine's hot paths that must be inlined, and ones that must not. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define NOINLINE      __attribute__((noinline))
#else
#define ALWAYS_INLINE inline
#define NOINLINE
#endif

static inline uint64_t hdr_make(unsigned kind, uint32_t a, uint32_t b)
{
    return cr__tape_hdr(kind, a, b); /* the encoding the inline operations of tape_inline.h use */
}
static inline unsigned hdr_kind(uint64_t h)
{
    return (unsigned)(h >> 60);
}
static inline uint32_t hdr_a(uint64_t h)
{
    return (uint32_t)(h & IDX_MASK);
}
static inline uint32_t hdr_b(uint64_t h)
{
    return (uint32_t)((h >> 30) & IDX_MASK);
}

/* Words of a record after its leading header (payload and trailing header). */
static inline size_t rec_words(uint64_t h)
{
    size_t k;
    switch (hdr_kind(h)) {
    case K_UNARY:
    case K_GENERIC:
    case K_ARRAY:
        return 2;
    case K_BINARY:
    case K_MUL:
    case K_UNARY2:
        return 3;
    case K_BINARY2:
        return 6;
    case K_NARY:
        k = hdr_a(h);
        return 1 + k + (k + 1) / 2;
    case K_NARY2:
        k = hdr_a(h);
        return 1 + k + (k + 1) / 2 + k * (k + 1) / 2;
    default: /* INPUT, ADD, SUB, COPY, NEG */
        return 1;
    }
}

/* Variables a record makes. */
static inline size_t rec_vars(uint64_t h)
{
    unsigned k = hdr_kind(h);
    return (k == K_GENERIC || k == K_ARRAY || k == K_INPUT) ? hdr_a(h) : k == K_GUARD ? 0 : 1;
}

/* A chunk of the record stream. */
typedef struct cr__chunk {
    struct cr__chunk *prev;
    struct cr__chunk *next;
    cr__word *base; /* first word */
    cr__word *end;  /* one past the last used word (set when the chunk is left) */
    uint64_t stop;  /* the word before base: a header of kind K_STOP, where the scalar
                       sweep's threaded loop (sweep_scalar.h) leaves the chunk */
} cr__chunk;

/* A recorded pullback (kind GENERIC). */
typedef struct cr__gen_node {
    cr_pullback pb;
    uint32_t nargs;
    uint32_t nout;
    uint32_t *args;       /* variable index per argument, CR_VAR_CONST for constants */
    const cr_type *tuple; /* output tuple type when nout > 1 */
    const char *fname;    /* function name, for messages */
} cr__gen_node;

struct cr__impl; /* a user implementation of the engine (below) */

/* On a replay tape (prepared gradients, rule_call.c): record the call f(args) (vals:
 * the arguments' values) so that a replay can evaluate it again: through its rrule, or, with
 * zero set (zero-adjoint or non-differentiable f, some argument a variable), through its
 * primal (row: its scalar row, else fn->primal, else the overlay im on constants), results
 * of no derivative. out, nout, got as cr__tape_call_any. Fails the tape. */
CR_INTERNAL cr_status cr__replay_call(cr_tape *t, const cr_value *f, const cr_scalar_rule *row,
                                      const struct cr__impl *im, const cr_var *args,
                                      const cr_value *vals, size_t nargs, cr_var *out, size_t nout,
                                      size_t *got, bool zero);

/* The values of a zero-adjoint function known through its overlay im, at the arguments'
 * values vals: the overlay run on constants, on a scratch tape in t's arena, its im->nout
 * results into yv (tape.c). Errors on the context. */
CR_INTERNAL cr_status cr__overlay_values(cr_tape *t, const struct cr__impl *im, const cr_value *f,
                                         const cr_value *vals, size_t nargs, double *yv);

/* A failure reported by a rule or the arena, whose message is on the context already:
 * recorded on the tape as "what: message" (tape.c). */
CR_INTERNAL cr_status cr__tape_fail_ctx(cr_tape *t, cr_status st, const char *what);

/* The fields of the tuple value y into v[0..nfields) as doubles, while they are real (f64
 * or f32): returns the index of the first field of another kind, nfields when there is none
 * (rule_call.c). */
CR_INTERNAL size_t cr__tuple_reals(const cr_value *y, double *v);

/* The real results of a rule's or function's value y: one real (*k = 1), an integer or bool
 * (*k = 1, *constant: it is a constant, not a variable), or a tuple of up to cap reals (*k
 * its fields). CR_EUNIMPL (message on ctx) for anything else (tape.c). */
CR_INTERNAL cr_status cr__unpack_result(cr_ctx *ctx, const char *fname, const cr_value *y,
                                        double *vals, size_t cap, size_t *k, bool *constant);

/* Whether a call of k results fits the caller's nout (exactly; at most nout when got is
 * not NULL, *got = k): else CR_EINVAL on the tape (tape.c). */
CR_INTERNAL cr_status cr__check_nout(cr_tape *t, const char *fname, size_t k, size_t nout,
                                     size_t *got);

/* Whether a op b holds, op one of CR_CMP_LT..CR_CMP_NE: the one reading of a comparison, for
 * cr_tape_cmp when recording and for the prepared replay's guards, which must agree. */
static inline bool cr__cmp_holds(cr_cmp op, double a, double b)
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

/* fn's scalar row when a call of nargs arguments may take it: always for a function of fixed
 * arity (a call of another count is refused with the row's "takes n arguments"); for a
 * variadic function (arity -1, such as hypot(x, y, ...), whose row is hypot(x, y)) only
 * when nargs is the row's count, other counts going through the function's rules. */
static inline const cr_scalar_rule *cr__row_for(const cr_function *fn, size_t nargs)
{
    const cr_scalar_rule *row = cr_scalar_rule_of(fn);
    if (row != NULL && fn->arity < 0 && row->nin != nargs)
        return NULL;
    return row;
}

/* Before "no rule" for a call of fn that no rule takes: when fn is variadic and has a
 * primal, the primal says whether the arguments themselves are wrong (hypot(x) or
 * evalpoly(x): "takes two or more ..."), and that status is returned (its message on the
 * arena's context); CR_OK otherwise. The primal's result goes above a mark, rewound. */
static inline cr_status cr__variadic_args(cr_arena *arena, const cr_value *f, const cr_value *vals,
                                          size_t nargs)
{
    const cr_function *fn = f->u.func.fn;
    if (fn->arity >= 0 || fn->primal == NULL)
        return CR_OK;
    cr_arena_mark mk = cr_arena_get_mark(arena);
    cr_value y;
    cr_status st = cr_function_call(arena, f, vals, nargs, &y);
    cr_arena_rewind(arena, mk);
    return st;
}

/* ---- Tangents on the sweeps' paths ------------------------------------------------------ */

/* cr_tangent_zero, cr_tangent_is_zero and cr_tangent_array, inline. The exported functions
 * return their 24-byte struct through memory: a call, and a load that waits for the two
 * stores that wrote it, on every record of every sweep. Same values. */
static inline cr_tangent cr__tzero(void)
{
    cr_tangent t;
    t.tag = CR_TAN_ZERO;
    t.u.arr = NULL;
    return t;
}

static inline bool cr__tis_zero(cr_tangent t)
{
    return t.tag == CR_TAN_ZERO || t.tag == CR_TAN_NONE;
}

static inline cr_tangent cr__tarray(cr_array *a)
{
    cr_tangent t;
    t.tag = CR_TAN_ARRAY;
    t.u.arr = a;
    return t;
}

/* ---- Array variables (array_slots.c, array_call.c) ------------------------------------ */

/* An argument of a K_ARRAY record: a scalar variable's index, an array variable's slot with
 * CR__ASLOT_BIT set, or CR_VAR_CONST. */
#define CR__ASLOT_BIT ((uint32_t)1 << 31)

/* Array variables a tape holds without allocating (struct cr_tape's avars.few). */
#define CR__ASLOT_FEW 4

/* An array variable: its value and, during a reverse sweep, its accumulated cotangent
 * (the shadow: pullbacks add into it in place when it is an inplaceable destination). */
typedef struct cr__aslot {
    const cr_array *val;
    cr_tangent acc;
    /* During a sweep of cr_tape_gradient_arrays: the caller's gradient array of this input,
     * when its layout lets the shadow live there (dense row-major f64 of val's shape, not
     * overlapping any array of the tape): the first cotangent is written into it instead of
     * a buffer of the sweep, which saves copying the shadow out; the accumulator is then
     * dest itself (or, once a generic pullback added into it, a writable descriptor of the
     * same memory). NULL otherwise. */
    cr_array *dest;
    bool input; /* made by cr_tape_array_input */
} cr__aslot;

/* What forward and second-order sweeps need of a K_ARRAY record (array_call.c). */
typedef struct cr__aext cr__aext;

struct cr__anode;

/* A rule as looked up once when preparing (cr_prepared's instructions): the rrule and its
 * udata, or rrule NULL (cr_rrule() finds it at each call). */
typedef struct cr__rule_ref {
    cr_rrule_fn rrule;
    const void *udata;
} cr__rule_ref;

/* The steps of a K_ARRAY record's kind, which the sweeps (sweep.c, through cr__array_kind)
 * and the prepared replays call: each node kind (an array function's call, array_call.c; a
 * fused kernel, kernel.c; an operation with its own steps, tape_op.c) defines one table and
 * points its records at it, so that the sweeps and the replays depend on no kind. pull: the
 * reverse step (g the adjoints of the record's scalar results from the first, NULL when it
 * makes none; an array result's cotangent is its slot's shadow); forward: the result's
 * tangents (tan[i * k + d] for a scalar result i, k directions); pull2: the second-order
 * reverse step; rerun: a prepared replay's "compute again" step, the record evaluated at the
 * current values (scalar variables v, array slots), its scalar results into v from res, its
 * array results into their slots, the new result in *ynew when ynew is not NULL (rule: the
 * rule looked up when preparing); NULL for a kind never on replay tapes. Failures of the
 * sweeps' steps are recorded on the tape, those of rerun on the context. */
typedef struct cr__anode_ops {
    cr_status (*pull)(cr_tape *t, const struct cr__anode *nd, const double *g, double *adj);
    cr_status (*forward)(cr_tape *t, const struct cr__anode *nd, double *tan, size_t k, size_t i);
    cr_status (*pull2)(cr_tape *t, const struct cr__anode *nd, size_t i, double *adj, double *adjd,
                       const double *tan, size_t k);
    cr_status (*rerun)(cr_tape *t, struct cr__anode *nd, const cr__rule_ref *rule, double *v,
                       uint32_t res, cr_value *ynew);
    /* The record calls a rule that a prepared replay looks up once (cr__prepared_resolve). */
    bool calls_rule;
    /* The forward step may be left out when no record reads the results' tangents: the
     * second-order step reads the arguments' tangents only (fused kernels). */
    bool tail_free;
} cr__anode_ops;

/* A recorded array function (kind K_ARRAY). A tuple result (nout > 0) makes one variable
 * per element: outs[k] is the element's array slot | CR__ASLOT_BIT, its position among the
 * record's scalar variables, or CR_VAR_CONST (an integer element: a constant). The
 * function, the argument list and the result are kept so that a prepared gradient can call
 * the rrule again (prepared.c). */
typedef struct cr__anode {
    cr_pullback pb;
    const char *fname; /* for messages */
    uint32_t nargs;
    uint32_t out;   /* the result's array slot, or CR_VAR_CONST for a scalar or tuple result */
    uint32_t *args; /* per argument, encoded as above */
    uint32_t nout;  /* elements of a tuple result; 0 for one scalar or array */
    uint32_t *outs; /* per tuple element, encoded as above */
    cr_value fv;    /* the function */
    cr_value *vals; /* the argument values the rrule was called with (the tape's arena) */
    cr_value y;     /* the result when recorded */
    const cr__aext
        *ext; /* forward and second-order tapes only (not tuples, not kernels), else NULL */
    const cr__anode_ops *ops; /* the steps of the record's kind */
} cr__anode;

/* The cotangent of a tuple result, as the structural tangent its pullback takes: the
 * adjoints of its scalar elements (element c's is g[c * gs]), the shadows of its array
 * elements (accd NULL) or, in a second-order sweep, their derivatives along direction d of k
 * (accd[slot * k + d], consumed), NoTangent for its integer elements. *zero when every
 * element's is zero (dy is then not set). */
CR_INTERNAL cr_status cr__tuple_cot(cr_tape *t, const cr__anode *nd, const double *g, size_t gs,
                                    cr_tangent *accd, size_t k, size_t d, cr_tangent *dy,
                                    bool *zero);

/* broadcast(f, args...) (or map, named by who), sum(x) and dot(x, y) recorded as fused
 * kernels (kernel.c), for f64 arrays of one shape (contiguous, or 1-d of any stride) and,
 * for broadcasts, f64 scalars: an arithmetic function by its own kernel, any other
 * scalar-table function of one result by its row's loops; *out is the result. CR_NOTHING, having
 * done nothing, when the call is not of that form (the generic rule takes it); otherwise the
 * recording's status. */
CR_INTERNAL cr_status cr__kernel_broadcast(cr_tape *t, const char *who, const cr_function *fn,
                                           const cr_targ *args, size_t nargs, cr_targ *out);
CR_INTERNAL cr_status cr__kernel_sum(cr_tape *t, const cr_targ *args, size_t nargs, cr_targ *out);

/* Write the accumulated cotangent acc of an array variable whose value is like into the
 * caller's array dst (zeros when acc is); errors go to the context, naming who and dst as
 * `what` j (what: the caller's name for it, e.g. "gradient array"). */
CR_INTERNAL cr_status cr__array_write_out(cr_tape *t, const char *who, const char *what, size_t j,
                                          cr_tangent acc, cr_array *dst, const cr_array *like);

/* Before a prepared replay's reverse sweep for the gradients of the array inputs as[0..na)
 * into agrad: let each input's shadow live in its destination when that is safe (dense
 * row-major f64 of the input's shape, overlapping no input array and no other destination);
 * sets the slots' dest, which the caller clears after the sweep. Only the inputs' arrays
 * (set for this call) are compared: the other slots still name the previous replay's
 * arrays, whose memory cr__prepared_begin gave back, and the replay makes them again in
 * the tape's own arena, where no caller's array lies. */
CR_INTERNAL cr_status cr__gradient_dests(cr_tape *t, const cr_avar *as, size_t na,
                                         cr_array *const *agrad);

/* The cr_targ constructors, inline for the engine's own calls (array calls build one per
 * argument and output); cr_targ_var, cr_targ_arr and cr_targ_value are these, exported. */
static inline cr_targ cr__targ_var(cr_var x)
{
    cr_targ r;
    r.kind = CR_TARG_VAR;
    r.u.s = x;
    return r;
}

static inline cr_targ cr__targ_arr(cr_avar x)
{
    cr_targ r;
    r.kind = CR_TARG_ARR;
    r.u.a = x;
    return r;
}

static inline cr_targ cr__targ_value(cr_value v)
{
    cr_targ r;
    r.kind = CR_TARG_VALUE;
    r.u.v = v;
    return r;
}

/* A new array variable of value val (borrowed until the reset); its slot in *idx. Fails the
 * tape (CR_EOVERFLOW, allocation statuses). */
CR_INTERNAL cr_status cr__array_slot(cr_tape *t, const cr_array *val, uint32_t *idx);

/* Add the cotangent d into the shadow s (add!!; adopts a fresh buffer), and make a writable
 * cotangent dx[j] that shares memory with dy or another dx read only (array_slots.c). */
CR_INTERNAL cr_status cr__shadow_accum(cr_arena *arena, cr__aslot *s, cr_tangent d);
CR_INTERNAL cr_status cr__guard_alias(cr_arena *arena, const cr_tangent *dy, cr_tangent *dx,
                                      size_t nx, size_t j);

/* n zeroed doubles in the tape's arena for a sweep (at least one), or NULL with the tape
 * failed and *st set (sweep.c). */
CR_INTERNAL double *cr__sweep_workspace(cr_tape *t, size_t n, cr_status *st);

/* CR_EDOMAIN (naming who, what and the index) when one of the n values v is not finite
 * (sweep.c). */
CR_INTERNAL cr_status cr__check_finite(cr_tape *t, const char *who, const double *v, size_t n,
                                       const char *what);

/* ---- Array records in forward and second-order sweeps (array_call.c) ---------------- */

/* Array tangents of a forward sweep (k directions), and on second-order sweeps the
 * directional derivatives of the array shadows; in the tape's arena, set by
 * cr__array_sweep_begin and forgotten by cr__array_sweep_end. */
typedef struct cr__asweep {
    size_t k;
    cr_tangent *tan;  /* tan[slot * k + d]: array variable slot's tangent along direction d */
    cr_tangent *accd; /* second order: the derivative of slot's shadow along d, else NULL */
} cr__asweep;

/* On a forward or second-order tape, what the sweeps need of a call of f about to be
 * recorded (its function value and arguments, the second-order class); refuses, on a
 * second-order tape, a function without a second-order form. Fails the tape. */
CR_INTERNAL cr_status cr__array_ext(cr_tape *t, const cr_value *f, const cr_value *vals,
                                    const uint32_t *codes, size_t nargs, const cr__aext **out);

/* Start / end the array part of a sweep with k directions (second: also the shadows'
 * derivatives, and the shadows cleared). */
CR_INTERNAL cr_status cr__array_sweep_begin(cr_tape *t, size_t k, bool second);
CR_INTERNAL void cr__array_sweep_end(cr_tape *t);

/* CR_EINVAL / CR_ESHAPE / CR_EDOMAIN (on the context, naming who, what and j) unless v is
 * a float array of like's shape (any layout; like NULL: any shape) with finite elements. */
CR_INTERNAL cr_status cr__array_check_dir(cr_tape *t, const char *who, const char *what, size_t j,
                                          const cr_array *v, const cr_array *like);

/* During a forward or second-order sweep: add the tangent arrays v[j] (any float dtype and
 * layout, of the variables' shapes) to the tangents of the array variables as[j]. */
CR_INTERNAL cr_status cr__array_seed(cr_tape *t, const cr_avar *as, size_t na,
                                     const cr_array *const *v);

/* During a forward or second-order sweep: array variable slot's tangent along direction d
 * (deriv false), or its shadow's derivative (deriv true, second-order sweeps); NULL when
 * the sweep keeps none. */
CR_INTERNAL cr_tangent *cr__asweep_slot(cr_tape *t, uint32_t slot, size_t d, bool deriv);

#define CR__TAPE_MSG 512

/* An internal flag of cr_tape.flags (above the public CR_TAPE_* bits): array functions and
 * fused kernels are refused when recorded unless they have a second-order form, as on a
 * CR_TAPE_SECOND_ORDER tape, while scalar operations are recorded as first-order ones (the
 * replay tape of cr_prepare_hvp and cr_prepare_hvp_arrays). */
#define CR__TAPE_SO_CHECK (1u << 31)

/*
 * struct cr_tape, by concern. The hot prefix (cr__tape_hot) and the common core serve every
 * tape; the groups after them each belong to one file or one phase (docs/internals.md, "The
 * tape's state"). Which kind of tape it is shows in flags and pre: pre is 0 on a first-order
 * tape, 1 on a forward or second-order one (CR_TAPE_FORWARD, CR_TAPE_SECOND_ORDER), 2 on a
 * replay tape (prepared gradients); only first-order tapes keep a reverse sweep's workspace
 * and only the others a forward sweep's array tangents and replay information, so the two
 * share their memory (kept and fwd).
 */

/* The record stream's chunks (tape.c: start_stream, grow; walked by the sweeps). */
typedef struct cr__tape_store {
    cr__chunk *chunk;    /* current chunk, or NULL */
    cr__chunk *first;    /* first chunk, or NULL */
    cr__chunk *own;      /* a first chunk allocated with the tape and reused at each reset
                            (tapes that own their arena and have no caller buffer), or NULL */
    size_t next_words;   /* size of the next chunk */
    size_t first_words;  /* size of the first chunk */
    size_t record_words; /* words in chunks before the current one */
    cr__word dummy;      /* cur and lim point here before the first chunk */
} cr__tape_store;

/* A recording cursor (tape.h, cr_rec; node_scalar.c): open while one holds the write
 * position; gen numbers the openings (never 0); lim keeps the chunk's end while the hot
 * lim is cur. */
typedef struct cr__tape_cursor {
    bool open;
    uint32_t gen;
    cr__word *lim;
} cr__tape_cursor;

/* The array variables of the recording (array_slots.c): slots[0..n) of cap, which are few
 * (the first array variables of a recording live in the tape: a small function of arrays
 * allocates nothing for them) or in the arena; seeded: the next reverse sweep keeps the
 * accumulators (an array seed, array_call.c). */
typedef struct cr__tape_avars {
    cr__aslot *slots;
    uint32_t n, cap;
    bool seeded;
    cr__aslot few[CR__ASLOT_FEW];
} cr__tape_avars;

/* First-order tapes only (pre 0): the reverse sweeps' kept workspace (sweep.c, kept_ws): cap
 * doubles from the context's allocator, kept across sweeps and recordings on tapes with their
 * own chunk (store.own), freed with the tape; its first dirty doubles may be nonzero, the
 * rest are zero. */
typedef struct cr__tape_kept_ws {
    double *ws;
    size_t cap, dirty;
} cr__tape_kept_ws;

/* Forward, second-order and replay tapes only (pre 1 or 2): the array tangents of a forward
 * or second-order sweep (array_slots.c; NULL between sweeps) and, on replay tapes, the replay
 * information of the record being written (node_scalar.c, cr__tape_no_rinfo). */
typedef struct cr__tape_fwd_state {
    cr__asweep *asw;
    const cr__rinfo *rinfo;
} cr__tape_fwd_state;

/* The checking mode (cr_tape_set_check_finite; it keeps slow set) and the labels of
 * cr_tape_push_label: nlabels pushed, the first CR_TAPE_MAX_LABELS of them kept (tape.c). */
typedef struct cr__tape_checking {
    bool finite;
    uint32_t nlabels;
    const char *labels[CR_TAPE_MAX_LABELS];
} cr__tape_checking;

/* Misuse checks (CR_CTX_CHECK_*, the context's at cr_tape_new; 0 otherwise, and then nothing
 * else here is read; tape.c): the owning thread, a use from another thread (set by that
 * thread, seen by the owner), the poison of a freed tape and its quarantine node. */
typedef struct cr__tape_misuse_checks {
    uint32_t checks;
    uint32_t magic;
    const void *owner;
    atomic_int foreign_use;
    cr__qnode qnode;
} cr__tape_misuse_checks;

struct cr_tape {
    /* Hot fields first: the write cursor and what every operation checks. The inline
     * operations of tape_inline.h see them as cr__tape_hot (same fields, same order); fast_id is
     * kept by tape.c (set_fast). */
    union {
        cr__tape_hot hot;
        struct {
            cr__word *cur;    /* next free word */
            cr__word *lim;    /* end of the current chunk */
            uint32_t nvars;   /* as a cr_var's idx: hot.vt.key is the next variable's key */
            uint32_t fast_id; /* id while the inline operations may record, else CR__TAPE_NO_ID */
            cr__word *rlim; /* the open cursor's chunk end, or NULL (tape_inline.h, cr__tape_hot) */
        };
    };
    /* The common core: every tape. */
    uint32_t id; /* id of the current recording, never 0 nor CR__TAPE_NO_ID */
    cr_status status;
    uint32_t flags; /* CR_TAPE_* */
    unsigned pre;   /* words in front of a payload: 1 on forward tapes (a copy of the
                       header), 2 on replay tapes (and the replay information), else 0 */
    uint32_t slow;  /* nonzero: operations take the slow path (failed, second order) */
    cr_ctx *ctx;
    cr_arena *arena;
    bool own_arena;
    const cr_engine *engine;
    const cr_config *config;
    size_t ninputs;
    struct {
        uint32_t next; /* next recording id of the tape's block */
        uint32_t left; /* ids left in the block */
    } ids;
    cr__tape_store store;
    cr__tape_cursor rec;
    /* The state of one kind of tape: a first-order tape's (pre 0) or the others' (pre != 0);
     * pre tells which member is in use. */
    union {
        cr__tape_kept_ws kept;
        cr__tape_fwd_state fwd;
    };
    cr__tape_avars avars;
    char errmsg[CR__TAPE_MSG];
    cr__tape_checking check;
    cr__tape_misuse_checks misuse;
};

/* Clear the replay information of the next record (cr_tape_input: an input has none). A
 * first-order tape has none: its union member is the kept workspace. */
static inline void cr__tape_no_rinfo(cr_tape *t)
{
    if (t->pre != 0)
        t->fwd.rinfo = NULL;
}

/* Clear every array variable's accumulator (start of a reverse sweep). Inline: a small
 * recording's sweep calls it once per gradient. */
static inline void cr__array_clear(cr_tape *t)
{
    for (uint32_t s = 0; s < t->avars.n; s++)
        t->avars.slots[s].acc = cr__tzero();
}

/* magic of a tape freed under CR_CTX_CHECK_FREED. */
#define CR__TAPE_FREED 0xDEADDEADu

/* The checks of a checked tape (tape.c): true when the call must not go on (the tape is
 * freed, its context freed, or it belongs to another thread), after failing the tape with
 * CR_EMISUSE where that is safe (not from another thread). */
CR_INTERNAL bool cr__tape_check(cr_tape *t);

/* Whether a call on t must stop for a misuse: nothing but a test of a field that never
 * changes unless t's context checks (cr_ctx_params.checks). */
static inline bool cr__tape_misused(cr_tape *t)
{
    return t->misuse.checks != 0 && cr__tape_check(t);
}

/* The status a call that reads t's recording starts from: CR_EINVAL without a tape,
 * CR_EMISUSE when a checked tape refuses the call (cr__tape_misused), else t's sticky
 * status. */
static inline cr_status cr__tape_entry_status(cr_tape *t)
{
    if (t == NULL)
        return CR_EINVAL;
    if (cr__tape_misused(t))
        return CR_EMISUSE;
    return t->status;
}

/* The tape of a call (NULL: the current one); NULL too when a checked tape refuses the call
 * (cr__tape_misused). */
static inline cr_tape *cr__tape_or_current(cr_tape *t)
{
    t = t != NULL ? t : cr_tape_current();
    return t != NULL && cr__tape_misused(t) ? NULL : t;
}

/* The checking mode (tape.c): when t checks, fails t with CR_ENONFINITE if one of the n
 * values y is not finite while the nx inputs x are (x may be NULL when nx is 0); what
 * names the operation. Returns t's status. */
CR_INTERNAL cr_status cr__tape_check_finite(cr_tape *t, const char *what, const double *x,
                                            size_t nx, const double *y, size_t n);
/* The same over values (f64, f32, c128 scalars and arrays; other kinds are not looked at):
 * the nin inputs of an array function and its nout results. */
CR_INTERNAL cr_status cr__tape_check_finite_values(cr_tape *t, const char *what, const cr_value *in,
                                                   size_t nin, const cr_value *out, size_t nout);

/* ---- Checks of the variables given to the sweeps ----------------------------------------- */

/* CR_ETAPE on the context for variable j (index idx; an array variable when arr) given as
 * `role` to `who`: of another tape, or of this tape before its last reset (sweep.c). */
CR_INTERNAL cr_status cr__foreign_var(cr_tape *t, const char *who, const char *role, size_t j,
                                      uint32_t idx, bool arr);

/* Whether variable a (not a constant) is one of t's current recording: its tape id, and an
 * index below the variables recorded (a forged or stale index past the recording would
 * have the sweeps read and write past their adjoints). */
static inline bool cr__var_ours(const cr_tape *t, cr_var a)
{
    return a.tape == t->id && a.idx < t->nvars;
}

/* CR_OK when each of v[0..n) is a constant or a variable of t's current recording, else the
 * error of cr__foreign_var for the first that is not; cr__check_avars the same for array
 * variables (a slot below the recording's). Inline: the small calls' entry points check
 * their inputs on every call. */
#define CR__CHECK_IDS(T, WHO, V, N, ROLE, HAVE, ARR)                                               \
    do {                                                                                           \
        for (size_t j_ = 0; j_ < (N); j_++)                                                        \
            if ((V)[j_].idx != CR_VAR_CONST && ((V)[j_].tape != (T)->id || (V)[j_].idx >= (HAVE))) \
                return cr__foreign_var((T), (WHO), (ROLE), j_, (V)[j_].idx, (ARR));                \
        return CR_OK;                                                                              \
    } while (0)

static inline cr_status cr__check_vars(cr_tape *t, const char *who, const cr_var *v, size_t n,
                                       const char *role)
{
    CR__CHECK_IDS(t, who, v, n, role, t->nvars, false);
}

static inline cr_status cr__check_avars(cr_tape *t, const char *who, const cr_avar *as, size_t na,
                                        const char *role)
{
    CR__CHECK_IDS(t, who, as, na, role, t->avars.n, true);
}

/* ---- Engine (engine.c) ------------------------------------------------------------------ */

enum { CR__IMPL_OVERLAY = 1, CR__IMPL_ZERO = 2 };

typedef struct cr__impl {
    const cr_function *fn;
    int kind; /* CR__IMPL_* */
    cr_ad_fn impl;
    void *env;
    size_t nout;
    bool closure; /* the overlay receives the functor's real fields first
                     (cr_engine_overlay_closure) */
} cr__impl;

/* A type's customised friendly gradient (cr_engine_friendly). */
typedef struct cr__friendly {
    const cr_type *type;
    cr_friendly_fn fn;
    void *udata;
} cr__friendly;

struct cr_engine {
    cr_ctx *ctx;
    const cr_registry *registry; /* lookups: own registry, or the caller's, or NULL */
    cr_registry *own;            /* created by cr_engine_from_rrule */
    cr_config config;
    cr__impl *impls;
    size_t nimpls, cap;
    cr__friendly *friendly;
    size_t nfriendly, cap_friendly;
};

/* The engine's entry for fn, or NULL. Inline: the recording files look overlays up without
 * depending on engine.c, which is above them. */
static inline const cr__impl *cr__engine_find(const cr_engine *eng, const cr_function *fn)
{
    for (size_t i = 0; i < eng->nimpls; i++)
        if (eng->impls[i].fn == fn)
            return &eng->impls[i];
    return NULL;
}

/* Whether cfg is an engine's configuration (cr_engine_config) whose engine declared fn
 * zero-adjoint (cr_engine_zero_adjoint): its derivative is zero whatever rules the registry
 * has for it, in every mode (engine.c). */
CR_INTERNAL bool cr__config_zero_adjoint(const cr_config *cfg, const cr_function *fn);

/* The engine's customised friendly gradient of type, or NULL (eng may be NULL). */
static inline const cr__friendly *cr__engine_friendly_of(const cr_engine *eng, const cr_type *type)
{
    for (size_t i = 0; eng != NULL && i < eng->nfriendly; i++)
        if (eng->friendly[i].type == type)
            return &eng->friendly[i];
    return NULL;
}

/* ---- Tape internals (tape.c) ------------------------------------------------------------ */

/* Record the failure (first one wins) on the tape and its context; returns the status. */
CR_INTERNAL cr_status cr__tape_fail(cr_tape *t, cr_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- Array slots (array_slots.c) ------------------------------------------------------ */

/* Room for one more array slot: the tape's own few (a reset points the table at them; a
 * new tape has none yet), then a table in the arena four times as large. Out of line: a
 * small recording never takes it after its first reset. */
CR_INTERNAL cr_status cr__more_aslots(cr_tape *t);

/* The variable of a refused array input: a constant. */
static inline cr_avar cr__bad_avar(const cr_array *a)
{
    cr_avar r;
    r.a = a;
    r.idx = CR_VAR_CONST;
    r.tape = 0;
    return r;
}

/* A new array slot holding val; its index in *idx. Inline: one test and four stores. */
static ALWAYS_INLINE cr_status cr__new_aslot(cr_tape *t, const cr_array *val, bool input,
                                             uint32_t *idx)
{
    if (t->avars.n == t->avars.cap) {
        cr_status st = cr__more_aslots(t);
        if (st != CR_OK)
            return st;
    }
    cr__aslot *s = &t->avars.slots[t->avars.n];
    s->val = val;
    s->acc = cr__tzero();
    s->dest = NULL;
    s->input = input;
    *idx = t->avars.n++;
    return CR_OK;
}

/* cr_tape_array_input on a tape (not NULL). Inline: cr_tape_value_and_gradient_arrays makes
 * its inputs without a call per input. */
static ALWAYS_INLINE cr_avar cr__array_input(cr_tape *t, const cr_array *a)
{
    if (t->status != CR_OK)
        return cr__bad_avar(a);
    if (a == NULL || !cr_dtype_is_float((cr_dtype)a->dtype)) {
        cr__tape_fail(t, CR_EINVAL, "cr_tape_array_input: %s",
                      a == NULL ? "NULL array" : "not a float array (f64, f32 or c128)");
        return cr__bad_avar(a);
    }
    if (a->ndim > CR_ARRAY_MAX_DIMS || (a->data == NULL && cr_array_numel(a) > 0)) {
        cr__tape_fail(t, CR_EINVAL, "cr_tape_array_input: %s",
                      a->ndim > CR_ARRAY_MAX_DIMS ? "more than CR_ARRAY_MAX_DIMS dimensions"
                                                  : "NULL data with elements");
        return cr__bad_avar(a);
    }
    uint32_t idx = 0;
    if (cr__new_aslot(t, a, true, &idx) != CR_OK)
        return cr__bad_avar(a);
    cr_avar r;
    r.a = a;
    r.idx = idx;
    r.tape = t->id;
    return r;
}

/* The configuration of the tapes an engine makes (cr_engine_config). */
typedef const cr_config *(*cr__config_of_fn)(const cr_engine *eng);

/* cr_tape_new() with the function that gives the tape its configuration from the engine of
 * params (engine.c passes cr_engine_config: the recording files stay below engine.c, whose
 * configuration calls back into them through rrule_via_ad). */
CR_INTERNAL cr_status cr__tape_open(cr_ctx *ctx, const cr_tape_params *params,
                                    cr__config_of_fn config_of, cr_tape **out);

/* A tape whose records and struct live in `arena` (borrowed: never reset or freed by the
 * tape), of engine eng and configuration config; used by rrule_via_ad / frule_via_ad. */
CR_INTERNAL cr_status cr__tape_new_in(cr_arena *arena, const cr_engine *eng,
                                      const cr_config *config, uint32_t flags, cr_tape **out);

/* cr_tape_call, also reporting how many results f produced (nout is the capacity of
 * out; *got receives the count). */
CR_INTERNAL cr_status cr__tape_call_any(cr_tape *t, const cr_value *f, const cr_var *args,
                                        size_t nargs, cr_var *out, size_t nout, size_t *got);

/* cr_tape_record(); when *xs is NULL the input variables are put in the tape's arena
 * (until the next reset) and *xs points to them. */
CR_INTERNAL cr_status cr__tape_record(cr_tape *t, cr_ad_fn f, void *env, const double *x, size_t n,
                                      cr_var **xs, cr_var *ys, size_t m);

/* CR_TAPE_SCALAR_OPS(CR__DEFINE_TAPE_OP) defines the named operation OP of each row NAME of
 * NIN inputs and NOUT results not written by hand (HAND 0) as OP_NIN_NOUT(OP, NAME), which
 * the including file defines (tape.c the rows of one or two inputs and one result,
 * rule_call.c the others). */
#define CR__TAPE_OP_HAND0(...) __VA_ARGS__
#define CR__TAPE_OP_HAND1(...)
#define CR__DEFINE_TAPE_OP(NAME, OP, NIN, NOUT, HAND) \
    CR__TAPE_OP_HAND##HAND(OP_##NIN##_##NOUT(OP, NAME))

/* The most arguments a call on a tape takes (cr_tape_call). */
#define CR__MAX_GENERIC_ARGS 64

/* The f64 tuple type with n elements (2 <= n <= CR__MAX_TUPLE). */
#define CR__MAX_TUPLE 8
CR_INTERNAL const cr_type *cr__tuple_f64(size_t n);

/* Accumulate a cotangent into a double (f64, f32, zeros, thunks; complex keeps the real
 * part, the projection onto a real argument). */
CR_INTERNAL cr_status cr__accum_real(cr_arena *arena, const char *who, cr_tangent t, double *acc);

/* Start a new chunk of records with room for at least `need` words. */
CR_INTERNAL cr_status cr__tape_grow(cr_tape *t, size_t need);

/* Whether the current chunk has room for `need` more words. */
static inline bool cr__tape_room(const cr_tape *t, size_t need)
{
    return (size_t)(t->lim - t->cur) >= need;
}

/* The NaN constant: the result of an operation that failed. */
static inline cr_var cr__nan_const(void)
{
    return cr_const((double)NAN);
}

/* The most words cr__emit_general writes for k operands: the n-ary second-order record
 * (leading header, Hessian triangle, partials, packed operands, header). */
static inline size_t cr__general_words(const cr_tape *t, size_t k)
{
    return t->pre + k * (k + 1) / 2 + k + (k + 1) / 2 + 1;
}

/*
 * The general record of k variable operands (indices vi; k <= CR__MAX_GENERIC_ARGS) with
 * partials p and, when H is not NULL, the k x k Hessian H (row-major, symmetric) of the
 * result in those operands. Picks the compact kinds when the values allow. scratch: k^2
 * doubles when k > CR_SCALAR_MAX_IN and H is not NULL (else unused, may be NULL). The
 * caller made room for cr__general_words(t, k) words.
 */
CR_INTERNAL cr_var cr__emit_general(cr_tape *t, double y, size_t k, const uint32_t *vi,
                                    const double *p, const double *H, double *scratch);

/* Record a row's results for arguments args (row->nin of them), whose values were
 * evaluated: Y (nout) and D (nout x nin). Constants are dropped from the records. */
CR_INTERNAL cr_status cr__record_evaluated(cr_tape *t, const char *fname, const cr_scalar_rule *row,
                                           const cr_var *args, const double *x, const double *Y,
                                           const double *D, cr_var *out);

/* The failure of an operation given x, a variable t does not hold (another tape's, one past
 * the recording, one of an open cursor): recorded on t; returns the NaN constant. */
CR_INTERNAL cr_var cr__tape_foreign(cr_tape *t, const char *fname, cr_var x);

/* ---- Struct layouts (struct_layout.c) ---------------------------------------------------- */

/* Whether a field of kind k is one of the group counted: the real fields (scalar
 * variables, arrays false) or the array fields (array variables, arrays true). */
CR_INTERNAL bool cr__field_in_group(cr_kind k, bool arrays);

/* The number of fields of the group in `type`, nested structs included (0 for NULL). */
CR_INTERNAL size_t cr__type_fields(const cr_type *type, bool arrays);

/* The structural tangent of `type` from the real fields' gradient g and the array fields'
 * gradients ag (NULL: array fields are ZeroTangent), depth first from *k and *ka. */
CR_INTERNAL cr_status cr__struct_tangent_walk(cr_arena *arena, const cr_type *type, const double *g,
                                              size_t *k, cr_array *const *ag, size_t *ka,
                                              cr_tangent *out);

/* CR_EINVAL (with a message) when a nested struct field of `type` has no descriptor. */
CR_INTERNAL cr_status cr__type_check(cr_ctx *ctx, const cr_type *type);

/* The real fields of the struct obj of `type` (depth-first, as cr_tape_struct_inputs makes
 * variables of them) into out[cr_type_real_fields(type)]. CR_EINVAL for a nested struct
 * without descriptor. */
CR_INTERNAL cr_status cr__struct_values(cr_ctx *ctx, const cr_type *type, const void *obj,
                                        double *out);

/* The structural tangent of `type` whose real fields are g (depth-first), in `arena`. */
CR_INTERNAL cr_status cr__struct_tangent(cr_arena *arena, const cr_type *type, const double *g,
                                         cr_tangent *out);

/* The real fields of a tangent of `type` (structural, zero or a thunk of one) into out. */
CR_INTERNAL cr_status cr__struct_tangent_values(cr_arena *arena, const char *who,
                                                const cr_type *type, cr_tangent d, double *out);

/* Make a new, empty tape a replay tape (prepared gradients). */
CR_INTERNAL void cr__tape_make_replay(cr_tape *t);

/* Second order through a rule kept as a pullback (cr__rrule_second, tape.c): what a
 * second-order tape records and a prepared H·v replays. The caller fills the inputs. */
typedef struct cr__rrule2 {
    const cr_value *f;    /* the function */
    cr_rrule_fn rrule;    /* its rule as looked up once (with udata), or NULL: cr_rrule */
    const void *udata;    /* */
    const cr_value *vals; /* the arguments' values (f64 for the variables) */
    size_t nargs;         /* at most CR__MAX_GENERIC_ARGS */
    const uint32_t *args; /* per argument its variable, CR_VAR_CONST for a constant */
    /* Called with the result at vals, before any difference is taken (NULL: none): its
     * failure (message on the context or the tape) stops there. */
    cr_status (*check)(const struct cr__rrule2 *q);
    void *env; /* the check's */
    /* Outputs. */
    cr_value y;                        /* the result as the rule gave it (the arena's) */
    double yv[CR__MAX_TUPLE];          /* its real values */
    size_t nres;                       /* how many */
    bool constant;                     /* an integer result: no partials */
    size_t k;                          /* variable arguments */
    size_t slot[CR__MAX_GENERIC_ARGS]; /* their positions */
    /* The caller's buffers, for nres results of k variable arguments (the check, or
     * CR__MAX_TUPLE, bounds nres): P[o*k + q] = dy_o / dx_slot[q] (nres k doubles), and
     * H[(o*k + q)*k + l] = d(P[o*k + q]) / dx_slot[l], not symmetrised (nres k^2). */
    double *P;
    double *H;
} cr__rrule2;

/* q->f's rrule at q->vals: the result (q->y, q->yv, q->nres, q->constant); then, unless it
 * is constant or no argument is a variable, the partials P from the pullback (one call per
 * result) and their central differences H from the rrule called again at x ± h e_l for each
 * variable argument l (step cbrt(eps) max(1, |x_l|); the one-sided difference where the rule
 * fails on one side or the partial jumps within the step): 1 + 2k rule calls, whose memory
 * comes from t's arena (the caller rewinds it). P and H are written only after the check
 * passed (cr__rrule2_vars gives k before the call). Errors: the status, with a message on the
 * context naming the function ("f: ..."; the rule failing on both sides of x: "f: no second
 * derivatives in argument j at x: ..."); an allocation failure gives the arena's status. */
CR_INTERNAL cr_status cr__rrule_second(cr_tape *t, cr__rrule2 *q);

/* The variable arguments of a call whose arguments' variables are args (CR_VAR_CONST for a
 * constant): the k of cr__rrule_second, which sizes its P and H. */
static inline size_t cr__rrule2_vars(const uint32_t *args, size_t nargs)
{
    size_t k = 0;
    for (size_t j = 0; j < nargs; j++)
        k += args[j] != CR_VAR_CONST;
    return k;
}

/* ---- Node kinds: the steps the sweeps drive -------------------------------------------- */

/* The position of a reverse sweep in a chunk: the record ending at p (base: the chunk's
 * first word) makes the variables below i, down to i minus its count; adjoints adj; pre
 * words lead each payload. consume (first-order tapes over the kept workspace): the scalar
 * loop leaves each adjoint it reads at zero and the first INPUT record met sets in_hi to the
 * end of its variables; general: a record whose adjoints stay as they are was swept. */
typedef struct cr__rev {
    const cr__word *p;
    const cr__word *base;
    double *adj;
    size_t i;
    size_t pre;
    bool consume;
    bool general;
    size_t in_hi;
} cr__rev;

/* The position of a forward sweep in a chunk: the record starting at p (end: the chunk's
 * last word) makes variable i and the next; tangents tan (k directions), records up to top;
 * out_unread as cr__sweep_forward's. */
typedef struct cr__fwd {
    const cr__word *p;
    const cr__word *end;
    double *tan;
    size_t k, i, top, pre;
    bool out_unread;
} cr__fwd;

/* The position of a second-order reverse sweep (forward tapes: one leading word): as
 * cr__rev, with the adjoints' directional derivatives adjd and the tangents tan. */
typedef struct cr__sec {
    const cr__word *p;
    const cr__word *base;
    double *adj, *adjd;
    const double *tan;
    size_t k, i;
} cr__sec;

struct cr__rop; /* an instruction of a prepared program (prepared_impl.h) */

/* The steps of a record kind of the stream. The sweeps call reverse, forward and second
 * through the table of kinds (sweep.c): each sweeps at least the record at the position and
 * moves the position past what it swept (the scalar kinds sweep every record of a scalar
 * kind that follows, in their own loops); failures are recorded on the tape. The prepared
 * replays call the others on the record's instruction r (prepared.c, prepared_hvp.c):
 * rerun, the record evaluated again at the current values v (the first-order replay's
 * forward step); replay_pull, its reverse step on the adjoints adj; rerun2, the H·v
 * replay's forward step (values v and tangents vd along the direction; last: the program's
 * last instruction, whose results' tangents nothing reads); replay_pull2, its second-order
 * reverse step (adjoints adj, their tangents adjd). Their failures go to the context. A kind
 * that compiles its records into the prepared program instead (the scalar rows') has none of
 * these but replay, its compiler and the interpreters of what it compiled, which run a whole
 * run of its instructions per call (prepared_impl.h; NULL for the other kinds). */
struct cr__replay_steps;
typedef struct cr__node_kind {
    cr_status (*reverse)(cr_tape *t, cr__rev *s);
    cr_status (*forward)(cr_tape *t, cr__fwd *s);
    cr_status (*second)(cr_tape *t, cr__sec *s);
    cr_status (*rerun)(cr_prepared *p, const struct cr__rop *r, double *v);
    cr_status (*replay_pull)(cr_prepared *p, const struct cr__rop *r, double *adj);
    cr_status (*rerun2)(cr_prepared *p, const struct cr__rop *r, double *v, double *vd, bool last);
    cr_status (*replay_pull2)(cr_prepared *p, const struct cr__rop *r, double *adj, double *adjd,
                              const double *vd);
    const struct cr__replay_steps *replay;
} cr__node_kind;

/* The scalar rows' records (INPUT, UNARY, BINARY, ADD, SUB, COPY, NEG, NARY, their
 * second-order forms and GUARD; node_scalar.c), a rule kept as a pullback (GENERIC;
 * rule_call.c) and the K_ARRAY records, through their node's cr__anode_ops (node_array.c). */
CR_INTERNAL extern const cr__node_kind cr__scalar_kind;
CR_INTERNAL extern const cr__node_kind cr__generic_kind;
CR_INTERNAL extern const cr__node_kind cr__array_kind;

/* Operand j of an n-ary record whose packed operands start at ops. */
static inline uint32_t cr__nary_op(const cr__word *ops, size_t j)
{
    uint64_t w = ops[j / 2].u;
    return (uint32_t)((j & 1) ? (w >> 32) : (w & 0xFFFFFFFFu));
}

/* ---- Sweeps (sweep.c) ------------------------------------------------------------------- */

/* The workspace size of a sweep seeded at variables below top: top, or the end of the
 * record that makes variable top - 1 when that record makes variables past it (a tuple's
 * pullback, an array function's scalar results), since the sweeps take records whole. */
CR_INTERNAL size_t cr__sweep_top_slow(const cr_tape *t, size_t top);
static inline size_t cr__sweep_top(const cr_tape *t, size_t top)
{
    return top >= t->nvars ? top : cr__sweep_top_slow(t, top); /* (seeded at the last: top) */
}

/* Reverse sweep over the records of variables below `top`: adj holds `top` doubles,
 * seeded; on return it holds the adjoints. Scratch comes from the tape's arena (the
 * caller rewinds it). */
CR_INTERNAL cr_status cr__sweep_reverse(cr_tape *t, double *adj, size_t top);

/* Forward sweep over the records of variables below `top`, k directions: tan holds
 * top * k doubles, zero except the seeds, which are added to the tangent each record
 * computes (a seed is a perturbation injected at that variable). out_unread: the
 * second-order sweeps, which read no tangent of the output's record (the last below top);
 * when it is a fused kernel its forward step is left out, and its results' tangents stay
 * as they are. */
CR_INTERNAL cr_status cr__sweep_forward(cr_tape *t, double *tan, size_t k, size_t top,
                                        bool out_unread);

/* Second-order reverse sweep (forward-over-reverse) after cr__sweep_forward: adj (top
 * doubles, seeded) and adjd (top * k, zero) receive the adjoints and their derivatives. */
CR_INTERNAL cr_status cr__sweep_second(cr_tape *t, double *adj, double *adjd, const double *tan,
                                       size_t k, size_t top);

#endif /* CR_TAPE_IMPL_H */
