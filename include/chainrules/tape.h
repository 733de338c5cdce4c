/**
 * @file tape.h
 * @brief The reverse-mode engine: a tape that records calls through the rules, and
 *        gradients, vector-Jacobian products, Jacobians, Jacobian-vector products and
 *        Hessian-vector products computed from it.
 *
 * A scalar variable is a `cr_var` (a value, its index on the tape and the tape's id),
 * passed by value. Every operation on variables computes its value and records what the
 * reverse sweep needs: for a scalar-table function (sin, *, ...) the row is evaluated
 * once for the value and the partials, and the tape stores the operand indices and the
 * partials, nothing else (no closure, no dispatch lookup, no allocation per operation).
 * Other functions go through their rrule, looked up once per call, and the tape keeps the
 * pullback (its environment lives in the tape's arena).
 *
 * @code
 * // foo(x) = asin(0.2 + sin(x)), and its derivative at x = 3
 * cr_tape *t;
 * cr_tape_new(ctx, NULL, &t);
 * cr_var x = cr_tape_input(t, 3.0);
 * cr_var y = cr_asin(t, cr_add(t, cr_const(0.2), cr_sin(t, x)));
 * double dx;
 * if (cr_tape_gradient(t, y, &x, 1, &dx) != CR_OK)     // the tape's error is sticky:
 *     fprintf(stderr, "%s\n", cr_tape_errmsg(t));       // one check after recording
 * cr_tape_reset(t);          // record again, reusing the memory
 * cr_tape_free(t);
 * @endcode
 *
 * Tape or thread-local tape: every operation takes the tape first; NULL means the thread's
 * current tape (cr_tape_set_current()).
 *
 * Errors are sticky (SQLite's mallocFailed): after the first failure every operation
 * returns a NaN constant and records nothing, and the sweeps return the failure, so a
 * whole function can be recorded and checked once. The message is kept on the tape
 * (cr_tape_errmsg()) and recorded on the context.
 *
 * Memory: records live in chunks carved from the tape's arena (caller buffer or growable
 * blocks); cr_tape_reset() rewinds and keeps them, so recording the same function again
 * allocates nothing. Sweeps take their workspace (one double per variable, more for
 * second order) from the same arena and give it back before returning, except one: a
 * first-order tape made by cr_tape_new() without a caller buffer keeps the workspace of its
 * gradients and vector-Jacobian products with respect to the recording's first inputs
 * (those of cr_tape_record() and cr_tape_value_and_gradient()) between calls, kept at zero
 * by the sweep itself so that no clearing pass precedes the next one; it grows with the
 * recordings and is freed by cr_tape_free(). Should its allocation fail, the arena's
 * workspace serves.
 *
 * @note A tape is thread-confined. Each thread records on its own tape.
 *
 * The tape API is split by concept; this header declares the tape, scalar variables and
 * their operations, user functions and the sweeps, and includes the others, so including
 * it is enough: tape_array.h (array variables, cr_av_ operations, operations with their own
 * steps, functions of arrays), tape_prepared.h (prepared gradients), tape_struct.h
 * (friendly tangents of structs), tape_ops.h (a named operation per scalar row) and
 * deprecated.h (former names).
 *
 * Inline operations: here cr_add(), cr_sub(), cr_mul(), cr_div(), cr_neg() and the cursor
 * operations cr_rec_* are exported functions. A program whose speed is the recording's
 * includes the opt-in header chainrules/tape_inline.h as well, which makes them inline in
 * the caller (the record written there when it can be), with the same values, records and
 * errors; that header holds the record format and the tape's first fields the inline code
 * depends on, which are then part of the program's dependence on the library's ABI.
 */
#ifndef CR_TAPE_H
#define CR_TAPE_H

#include <string.h>

#include "arena.h"
#include "common.h"
#include "ctx.h"
#include "rule.h"
#include "status.h"
#include "value.h"

CR_BEGIN_DECLS

/** Opaque tape. Create with cr_tape_new(), release with cr_tape_free(). */
typedef struct cr_tape cr_tape;

/** Opaque engine configuration (rules, user functions); see engine.h. */
typedef struct cr_engine cr_engine;

/**
 * A scalar variable: its value, its index on the tape and the tape's id. Passed by value.
 * A constant (cr_const()) has index CR_VAR_CONST; it belongs to no tape and no gradient
 * flows through it.
 */
typedef struct cr_var {
    double v;      /**< The value. */
    uint32_t idx;  /**< Index on the tape, or CR_VAR_CONST. */
    uint32_t tape; /**< Id of the recording it belongs to (changes at each reset). */
} cr_var;

/** The index of constants. */
#define CR_VAR_CONST UINT32_MAX

/** Most variables one recording may hold (indices are 30 bits in the records). */
#define CR_TAPE_MAX_VARS ((size_t)1 << 30)

/** A constant: a value the derivatives do not flow through. */
static inline cr_var cr_const(double v)
{
    cr_var c;
    c.v = v;
    c.idx = CR_VAR_CONST;
    c.tape = 0;
    return c;
}

/** Whether x is a constant. */
static inline bool cr_var_is_const(cr_var x)
{
    return x.idx == CR_VAR_CONST;
}

/** Tape flags (cr_tape_params.flags). */
enum {
    /** Records can also be swept forwards: cr_tape_jvp() (8 more bytes per record). */
    CR_TAPE_FORWARD = 1u,
    /** Records also keep each operation's second derivatives: cr_tape_hvp(),
     *  cr_tape_hessian(). Implies CR_TAPE_FORWARD. */
    CR_TAPE_SECOND_ORDER = 2u,
    /** Checking mode: the recording stops at the first operation that makes a non-finite
     *  value from finite inputs (cr_tape_set_check_finite()). */
    CR_TAPE_CHECK_FINITE = 4u
};

/** Parameters for cr_tape_new(). Zero-initialised means defaults. */
typedef struct cr_tape_params {
    uint32_t struct_size;    /**< sizeof(cr_tape_params), or 0; other sizes: CR_EINVAL. */
    uint32_t flags;          /**< CR_TAPE_* flags. */
    void *buffer;            /**< Caller storage for records, pullbacks and sweep workspace
                                  (fixed capacity: CR_EARENA when full), or NULL. */
    size_t buffer_size;      /**< Its size in bytes. */
    size_t block_size;       /**< First arena block of a growable tape; 0: 64 KiB. */
    const cr_engine *engine; /**< Rules and user functions (engine.h); NULL: the built-in
                                  rules. Must outlive the tape. */
} cr_tape_params;

/**
 * Create a tape.
 * @param[in]  ctx    allocation hook and errors; must outlive the tape.
 * @param[in]  params NULL for defaults (growable, first order, built-in rules).
 * @param[out] out    caller owns; release with cr_tape_free(). NULL on failure.
 * @return CR_OK; CR_EINVAL (NULL ctx/out, buffer without size, unknown flags or
 *         struct_size); CR_ENOMEM.
 */
CR_API cr_status cr_tape_new(cr_ctx *ctx, const cr_tape_params *params, cr_tape **out);

/** Release a tape and everything recorded on it. @param[in] t may be NULL. */
CR_API void cr_tape_free(cr_tape *t);

/**
 * Make the calling thread the owner of a tape whose context checks threads
 * (CR_CTX_CHECK_THREAD): a tape handed over to another thread (with the synchronisation
 * that hands any object over) is adopted there before its first call. Without the check
 * it does nothing.
 * @param[in] t the tape; may be NULL.
 * @return CR_OK; CR_EINVAL (NULL); CR_EMISUSE (a tape freed under CR_CTX_CHECK_FREED).
 */
CR_API cr_status cr_tape_adopt(cr_tape *t);

/**
 * Forget the recording, keep the memory, clear the error. Variables of the old
 * recording become foreign (using one is a CR_ETAPE error).
 * @param[in] t may be NULL.
 */
CR_API void cr_tape_reset(cr_tape *t);

/** The tape's sticky status: CR_OK, or the first failure since the last reset. */
CR_API cr_status cr_tape_status(const cr_tape *t);

/** The message of the tape's failure ("" when none); owned by the tape. Never NULL. */
CR_API const char *cr_tape_errmsg(const cr_tape *t);

/**
 * Forget the failure and accept operations again (the records made before it stay).
 * @param[in] t may be NULL.
 */
CR_API void cr_tape_clear_error(cr_tape *t);

/**
 * Turn the checking mode of a tape on or off (also set by CR_TAPE_CHECK_FINITE, or by
 * CR_CTX_CHECK_FINITE for every tape of a context). While it is on, a scalar operation
 * (arithmetic, the named operations, cr_tape_call()) or an array function
 * (cr_tape_acall() and the functions built on it) whose result holds an infinity or a
 * NaN although all its inputs are finite fails the tape with CR_ENONFINITE and a message
 * naming the operation, its input values, the value it made and the labels pushed with
 * cr_tape_push_label(), e.g. "non-finite value: log(-1) = nan (in loss > softclip)".
 * Operations on constants only are checked too. Every operation goes through the library
 * while the mode is on (the inline fast path is closed), which is its cost. Fused kernels
 * (kernel.h) are not checked.
 * @param[in] t  the tape; NULL does nothing.
 * @param[in] on true to check.
 */
CR_API void cr_tape_set_check_finite(cr_tape *t, bool on);

/** Whether the checking mode of cr_tape_set_check_finite() is on (false for NULL). */
CR_API bool cr_tape_check_finite(const cr_tape *t);

/** Most labels of cr_tape_push_label() a message names; deeper ones are counted. */
#define CR_TAPE_MAX_LABELS 16

/**
 * Push a label naming the user function being recorded, as a call stack: the messages of
 * the checking mode (cr_tape_set_check_finite()) name the labels pushed, outermost first.
 * The label is borrowed: it must stay valid until it is popped (a string literal, usually).
 * More than CR_TAPE_MAX_LABELS may be pushed; the message then names the first ones and the
 * number of the others. cr_tape_reset() pops every label.
 * @param[in] t     the tape; NULL does nothing.
 * @param[in] label a NUL-terminated name; NULL is taken as "?".
 */
CR_API void cr_tape_push_label(cr_tape *t, const char *label);

/** Pop the label pushed last (nothing when none is left). @param[in] t may be NULL. */
CR_API void cr_tape_pop_label(cr_tape *t);

/** The context of a tape. */
CR_API cr_ctx *cr_tape_ctx(const cr_tape *t);

/** The tape's arena (rules called by the tape allocate there); valid until cr_tape_free(). */
CR_API cr_arena *cr_tape_arena(cr_tape *t);

/** The rule configuration the tape looks rules up with (its engine's). */
CR_API const cr_config *cr_tape_config(const cr_tape *t);

/** Sizes of a recording, from cr_tape_stats(). */
typedef struct cr_tape_stats {
    size_t nvars;        /**< Variables (inputs and results). */
    size_t ninputs;      /**< Inputs (cr_tape_input()). */
    size_t nrecords;     /**< Operations recorded (including inputs). */
    size_t record_bytes; /**< Bytes of records (operand indices, partials, pullbacks' slots). */
    size_t arena_bytes;  /**< Bytes the tape's arena holds (records, pullback environments). */
} cr_tape_stats;

/**
 * Sizes of the current recording.
 * @return CR_OK; CR_EINVAL for NULL; CR_EMISUSE while a recording cursor is open on the
 * tape (cr_rec_open(): its latest records are the cursor's until it is closed), with *out
 * left as it was.
 */
CR_API cr_status cr_tape_stats_get(const cr_tape *t, cr_tape_stats *out);

/**
 * Bytes a scalar operation takes at most on a first-order tape (a two-operand operation:
 * one header word and two partials), for sizing caller buffers.
 */
CR_API size_t cr_tape_node_overhead(void);

/* ---- The thread's current tape --------------------------------------------------------- */

/**
 * Make t the calling thread's current tape (the one operations use when given NULL).
 * @param[in] t a tape, or NULL to unset.
 * @return the previous current tape (to restore it afterwards).
 */
CR_API cr_tape *cr_tape_set_current(cr_tape *t);

/** The calling thread's current tape, or NULL. */
CR_API cr_tape *cr_tape_current(void);

/* ---- Variables and operations ---------------------------------------------------------- */

/**
 * A new input variable with value v.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] v its value.
 * @return the variable; a NaN constant when the tape has failed (CR_ENOMEM, CR_EARENA,
 *         CR_EOVERFLOW past CR_TAPE_MAX_VARS).
 */
CR_API cr_var cr_tape_input(cr_tape *t, double v);

/**
 * n new input variables with values x.
 * @param[in]  t   the tape (NULL: the current tape).
 * @param[in]  x   n values.
 * @param[in]  n   number of inputs.
 * @param[out] out n variables.
 * @return the tape's status: CR_EINVAL (NULL x or out with n > 0) and CR_EOVERFLOW (n more
 *         variables would pass CR_TAPE_MAX_VARS) are refused before x is read or out
 *         written; after CR_ENOMEM or CR_EARENA the variables are NaN constants.
 */
CR_API cr_status cr_tape_inputs(cr_tape *t, const double *x, size_t n, cr_var *out);

/** a + b. Operations take the tape first (NULL: current); on failure they give NaN. */
CR_API cr_var cr_add(cr_tape *t, cr_var a, cr_var b);
/** a - b */
CR_API cr_var cr_sub(cr_tape *t, cr_var a, cr_var b);
/** a * b */
CR_API cr_var cr_mul(cr_tape *t, cr_var a, cr_var b);
/** a / b */
CR_API cr_var cr_div(cr_tape *t, cr_var a, cr_var b);
/** -a */
CR_API cr_var cr_neg(cr_tape *t, cr_var a);
/** sin(a) */
CR_API cr_var cr_sin(cr_tape *t, cr_var a);
/** cos(a) */
CR_API cr_var cr_cos(cr_tape *t, cr_var a);
/** exp(a) */
CR_API cr_var cr_exp(cr_tape *t, cr_var a);
/** log(a) */
CR_API cr_var cr_log(cr_tape *t, cr_var a);
/** sqrt(a) */
CR_API cr_var cr_sqrt(cr_tape *t, cr_var a);
/** asin(a) */
CR_API cr_var cr_asin(cr_tape *t, cr_var a);

/**
 * f(args...) for any function value, recorded. In order:
 *  - a zero-adjoint declaration (engine.h) or a non-differentiable rule: the primal is
 *    called and the outputs are constants;
 *  - a scalar-table function (and no user rule overriding it): the row gives value and
 *    partials in one evaluation, recorded compactly (one record per output);
 *  - an rrule (looked up once, with the tape's configuration): the pullback is kept on
 *    the tape (Mooncake's is_primitive). On a CR_TAPE_SECOND_ORDER tape the record keeps
 *    instead the partials the pullback gives and their central differences from the rrule
 *    called again at x ± h along each variable argument (about ten significant digits;
 *    any number of variable arguments, 2k + 1 rule calls for k of them);
 *  - an implementation registered with the engine (cr_engine_overlay()): it is called
 *    with this tape, so its operations are recorded inside;
 *  - otherwise CR_ENORULE, naming the function and the argument kinds.
 * @param[in]  t     the tape (NULL: the current tape).
 * @param[in]  f     a function value.
 * @param[in]  args  nargs variables or constants.
 * @param[in]  nargs number of arguments.
 * @param[out] out   nout results (a tuple result gives one variable per element).
 * @param[in]  nout  number of results expected.
 * @return the tape's status: CR_OK; CR_ENORULE; CR_ETAPE (a variable from another tape or
 *         recording); CR_EINVAL (f not a function, nout does not match the result);
 *         CR_EUNIMPL (a result the scalar tape cannot hold); the rule's status (at x, or
 *         on both sides of x on a second-order tape); CR_ENOMEM, CR_EARENA.
 */
CR_API cr_status cr_tape_call(cr_tape *t, const cr_value *f, const cr_var *args, size_t nargs,
                              cr_var *out, size_t nout);

/** cr_tape_call() for one result, returned (a NaN constant on failure). */
CR_API cr_var cr_tape_call1(cr_tape *t, const cr_value *f, const cr_var *args, size_t nargs);

/** Comparisons for cr_tape_cmp(). */
typedef enum cr_cmp {
    CR_CMP_LT = 0, /**< a < b */
    CR_CMP_LE = 1, /**< a <= b */
    CR_CMP_GT = 2, /**< a > b */
    CR_CMP_GE = 3, /**< a >= b */
    CR_CMP_EQ = 4, /**< a == b */
    CR_CMP_NE = 5  /**< a != b */
} cr_cmp;

/**
 * Compare two values, as a branch of the recorded function. Derivatives do not flow
 * through a comparison; on the tape of a prepared gradient the outcome is kept, and a
 * replay at inputs where it comes out otherwise fails instead of returning the gradient of
 * the other branch. Branch on cr_tape_cmp(), not on `x.v`, in functions you prepare.
 * @param[in] t  the tape (NULL: the current tape).
 * @param[in] a  left operand.
 * @param[in] op the comparison.
 * @param[in] b  right operand.
 * @return the comparison's result; false for an op that is not a cr_cmp, which fails the
 *         tape with CR_EINVAL.
 */
CR_API bool cr_tape_cmp(cr_tape *t, cr_var a, cr_cmp op, cr_var b);

/* ---- Recording cursors ------------------------------------------------------------------- */

/**
 * @cond CR_PRIVATE
 * One word of the record stream (private: the inline operations write it).
 */
typedef union cr__word {
    double d;
    uint64_t u;
    void *p;
    const void *cp;
} cr__word;
/** @endcond */

/**
 * A recording cursor: a tape's write position, held in the caller's variable while a loop
 * records on it.
 *
 * The inline operations on a tape (cr_add(t, ...), ...) keep the write position in the
 * tape, so each one stores it back to memory: the compiler cannot keep it in a register
 * across operations that may call into the library. A cursor is a local copy the compiler
 * can keep in registers; cr_rec_add(), cr_rec_sub(), cr_rec_mul(), cr_rec_div() and
 * cr_rec_neg() record through it the same records, values and errors as cr_add() ...
 * cr_neg() on the tape, and cr_rec_call1() / cr_rec_call2() record any other operation
 * (cr_sin, ...). On Rosenbrock's scalar loop the recording takes about 14% less time
 * (docs/engine.md, "Recording cursors").
 *
 * @code
 * cr_rec r;
 * cr_rec_open(&r, t);
 * for (size_t i = 0; i + 1 < n; i++) {
 *     cr_var a = cr_rec_sub(&r, x[i + 1], cr_rec_mul(&r, x[i], x[i]));
 *     s = cr_rec_add(&r, s, cr_rec_mul(&r, a, a));
 *     s = cr_rec_call1(&r, cr_sin, s);            // any other operation
 * }
 * cr_rec_close(&r);                               // before using t otherwise
 * @endcode
 *
 * Rules:
 *  - Between cr_rec_open() and cr_rec_close() the tape records through the cursor only.
 *    Anything else that records on it (cr_add(t, ...), cr_tape_call(), an array function,
 *    another cursor) or sweeps it fails the tape with CR_EMISUSE, naming the cursor.
 *  - A function recorded by cr_tape_record() (or value_and_gradient, a prepared gradient)
 *    closes the cursors it opens before it returns; one left open fails the recording
 *    with CR_EMISUSE.
 *  - After cr_rec_close(), a reset of the tape or its failure, a cursor records through
 *    the tape's exported functions, as cr_add(t, ...) would. A copy of a cursor is not a
 *    cursor: once another cursor is opened on the tape, do not use an old one.
 *  - Keep the cursor in a local variable and pass its address to the cr_rec_ operations
 *    only: they are inline, so the compiler keeps its fields in registers; passing the
 *    address to a function of your own that is not inlined costs that.
 *
 * The fields are private.
 */
typedef struct cr_rec {
    /** @cond CR_PRIVATE */
    cr__word *cur;        /* the next free word, while the cursor is open */
    uint64_t key;         /* the next variable's key (see cr__tape_hot) */
    cr__word *const *lim; /* where the chunk's end is read at each operation: the tape's
                             field, NULL when the cursor may not write inline (closed,
                             reset, failed), or a NULL of the library's */
    cr_tape *t;           /* the tape, or NULL */
    uint32_t gen;         /* which opening of the tape this cursor is */
    /** @endcond */
} cr_rec;

/**
 * Open a recording cursor on t.
 * @param[out] r the cursor (a local variable).
 * @param[in]  t the tape (NULL: the current tape; with none, the cursor's operations give
 *               NaN constants, as cr_add(NULL, ...) does).
 * A tape with a cursor already open fails with CR_EMISUSE, and r then records through the
 * exported functions (which give NaN constants on the failed tape).
 */
CR_API void cr_rec_open(cr_rec *r, cr_tape *t);

/**
 * Close a cursor: its position goes back to the tape, which records and sweeps as usual
 * again. Closing a cursor that is not open (closed, or its tape reset) does nothing.
 * @param[in] r the cursor.
 */
CR_API void cr_rec_close(cr_rec *r);

/** a + b through cursor r: the records, values and errors of cr_add() on its tape. */
CR_API cr_var cr_rec_add(cr_rec *r, cr_var a, cr_var b);
/** a - b through cursor r (cr_sub()). */
CR_API cr_var cr_rec_sub(cr_rec *r, cr_var a, cr_var b);
/** a * b through cursor r (cr_mul()). */
CR_API cr_var cr_rec_mul(cr_rec *r, cr_var a, cr_var b);
/** a / b through cursor r (cr_div()). */
CR_API cr_var cr_rec_div(cr_rec *r, cr_var a, cr_var b);
/** -a through cursor r (cr_neg()). */
CR_API cr_var cr_rec_neg(cr_rec *r, cr_var a);

/**
 * f(t, a) recorded through cursor r: any one-argument operation of this header (cr_sin,
 * cr_exp, ...) or of the caller's, on r's tape, as if the cursor were closed around it.
 * @return f's result.
 */
CR_API cr_var cr_rec_call1(cr_rec *r, cr_var (*f)(cr_tape *, cr_var), cr_var a);

/** f(t, a, b) recorded through cursor r (see cr_rec_call1()). */
CR_API cr_var cr_rec_call2(cr_rec *r, cr_var (*f)(cr_tape *, cr_var, cr_var), cr_var a, cr_var b);

/**
 * What cr_rec_apply1() and cr_rec_apply2() give back: the operation's result and the
 * cursor's position after it (private fields, for the cursor to take back).
 */
typedef struct cr_rec_result {
    cr_var v; /**< The operation's result. */
    /** @cond CR_PRIVATE */
    cr__word *cur;
    uint64_t key;
    /** @endcond */
} cr_rec_result;

/**
 * The library's side of the cursor, with the cursor passed by value (the inline forms of
 * cr_rec_open() ... cr_rec_call2() call these, so that a cursor's address never leaves the
 * caller and its fields can stay in registers). Use the cr_rec_ operations above instead.
 *
 * cr_rec_begin(): a cursor opened on t (cr_rec_open()).
 * @param[in] t the tape (NULL: the current tape).
 * @return the cursor.
 */
CR_API cr_rec cr_rec_begin(cr_tape *t);

/** Close cursor r, given by value (cr_rec_close()). @param[in] r the cursor. */
CR_API void cr_rec_end(cr_rec r);

/**
 * f(t, a) through cursor r, given by value (cr_rec_call1()): the result and the cursor's
 * new position, which the caller stores back into its cursor.
 * @param[in] r the cursor.
 * @param[in] f the operation.
 * @param[in] a its argument.
 */
CR_API cr_rec_result cr_rec_apply1(cr_rec r, cr_var (*f)(cr_tape *, cr_var), cr_var a);

/** f(t, a, b) through cursor r, given by value (see cr_rec_apply1()). */
CR_API cr_rec_result cr_rec_apply2(cr_rec r, cr_var (*f)(cr_tape *, cr_var, cr_var), cr_var a,
                                   cr_var b);

/* ---- User functions ------------------------------------------------------------------------ */

/**
 * A function written against the engine: compute the m outputs y from the n inputs x with
 * the operations above on tape t.
 * @return CR_OK or an error (usually cr_tape_status(t)).
 */
typedef cr_status (*cr_ad_fn)(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
                              void *env);

/**
 * Reset t, make n inputs with values x and record f on them.
 * @param[in]  t   the tape.
 * @param[in]  f   the function.
 * @param[in]  env passed to f.
 * @param[in]  x   the n input values.
 * @param[in]  n   number of inputs.
 * @param[out] xs n input variables (may be NULL).
 * @param[out] ys m output variables.
 * @param[in]  m  number of outputs.
 * @return CR_OK; f's status; the tape's status; CR_EOVERFLOW for n >= CR_TAPE_MAX_VARS
 *         (before x is read).
 */
CR_API cr_status cr_tape_record(cr_tape *t, cr_ad_fn f, void *env, const double *x, size_t n,
                                cr_var *xs, cr_var *ys, size_t m);

/**
 * value_and_gradient: reset t, record f (one output) at x, and sweep.
 * @param[in]  t    the tape.
 * @param[in]  f    the function (one output).
 * @param[in]  env  passed to f.
 * @param[in]  x    the n input values.
 * @param[in]  n    number of inputs.
 * @param[out] y    f(x) (may be NULL).
 * @param[out] grad n partial derivatives.
 * @return as cr_tape_record() and cr_tape_gradient(). Allocates nothing once t has held
 *         a recording of this size.
 */
CR_API cr_status cr_tape_value_and_gradient(cr_tape *t, cr_ad_fn f, void *env, const double *x,
                                            size_t n, double *y, double *grad);

/* ---- Sweeps ---------------------------------------------------------------------------- */

/**
 * The gradient of y with respect to the variables xs (a reverse sweep seeded with 1).
 * A constant in xs gets 0.
 * @return CR_OK; the tape's sticky failure; CR_ETAPE (y or an x from another recording);
 *         CR_EINVAL (NULL); a pullback's status; CR_ENOMEM / CR_EARENA (workspace).
 */
CR_API cr_status cr_tape_gradient(cr_tape *t, cr_var y, const cr_var *xs, size_t n, double *grad);

/**
 * Vector-Jacobian product: xbar = sum_i ybar[i] * d ys[i] / d xs (one reverse sweep).
 * @return as cr_tape_gradient(); CR_EDOMAIN when a seed is not finite.
 */
CR_API cr_status cr_tape_vjp(cr_tape *t, const cr_var *ys, const double *ybar, size_t m,
                             const cr_var *xs, size_t n, double *xbar);

/**
 * The m x n Jacobian (row-major, jac[i*n + j] = d ys[i] / d xs[j]), one reverse sweep per
 * output.
 * @return as cr_tape_gradient(); CR_EOVERFLOW when m x n overflows.
 */
CR_API cr_status cr_tape_jacobian(cr_tape *t, const cr_var *ys, size_t m, const cr_var *xs,
                                  size_t n, double *jac);

/**
 * Jacobian-vector product: ydot = d ys / d xs · xdot (one forward sweep over the records).
 * The tape needs CR_TAPE_FORWARD (or CR_TAPE_SECOND_ORDER).
 * @return as cr_tape_gradient(); CR_EMISUSE without CR_TAPE_FORWARD; CR_EDOMAIN for a
 *         non-finite xdot; CR_EUNIMPL when a recorded rrule has no forward form.
 */
CR_API cr_status cr_tape_jvp(cr_tape *t, const cr_var *xs, const double *xdot, size_t n,
                             const cr_var *ys, size_t m, double *ydot);

/**
 * Hessian-vector product of y with respect to xs: hv = H v, and optionally the gradient.
 * Forward-over-reverse on the recording: a forward sweep carries the tangents along v,
 * then one reverse sweep carries adjoints and their tangents (each record's second
 * derivatives were kept when it was recorded). Needs CR_TAPE_SECOND_ORDER. The recording
 * is reused: any number of directions, no re-recording.
 * @param[in]  t    the tape.
 * @param[in]  y    the output.
 * @param[in]  xs   the n input variables.
 * @param[in]  n    number of inputs.
 * @param[in]  v    n direction components (finite).
 * @param[out] hv   n results.
 * @param[out] grad n gradient components, or NULL.
 * @return as cr_tape_gradient(); CR_EMISUSE without CR_TAPE_SECOND_ORDER; CR_EDOMAIN for a
 *         non-finite v.
 */
CR_API cr_status cr_tape_hvp(cr_tape *t, cr_var y, const cr_var *xs, size_t n, const double *v,
                             double *hv, double *grad);

/**
 * The full n x n Hessian of y (row-major), by Hessian-vector products with the unit
 * vectors, several directions per sweep. For small n. Needs CR_TAPE_SECOND_ORDER.
 * @param[in]  t  the tape.
 * @param[in]  y  the output.
 * @param[in]  xs the n input variables.
 * @param[in]  n  number of inputs.
 * @param[out] H  n * n results, H[i * n + j] = d2 y / dxs[i] dxs[j].
 * @return as cr_tape_gradient(); CR_EMISUSE without CR_TAPE_SECOND_ORDER; CR_EINVAL for a
 *         NULL xs or H (n > 0), named in the message; CR_EOVERFLOW when n x n overflows a
 *         size_t (before xs is read).
 */
CR_API cr_status cr_tape_hessian(cr_tape *t, cr_var y, const cr_var *xs, size_t n, double *H);

CR_END_DECLS

/* The rest of the tape API, by concept: array variables, prepared gradients, structs
 * (each includes those it depends on). */
#include "tape_array.h"
#include "tape_prepared.h"
#include "tape_struct.h"

/* The named operations of every scalar row (cr_tanh(), cr_atan2(), ...). */
#include "tape_ops.h"

/* The former names of renamed operations (cr_asum(), ...), deprecated. */
#include "deprecated.h"

#endif /* CR_TAPE_H */
