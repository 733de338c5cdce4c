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
 * Inline operations: cr_add(), cr_sub(), cr_mul(), cr_div() and cr_neg() are macros over
 * static inline functions that write the record in the caller when they can (a tape given
 * explicitly, first order, not failed, room in the current chunk, operands of its
 * recording) and call the exported function of the same name otherwise; both paths give
 * the same values, records and errors. The inline code depends on the first fields of
 * the tape and on the record format, which therefore belong to the library's ABI. Define
 * `CR_TAPE_NO_INLINE` before including this header to call the exported functions only
 * (bindings, plugins built against another version); `&cr_add` and `(cr_add)(t, a, b)`
 * always name the exported function.
 */
#ifndef CR_TAPE_H
#define CR_TAPE_H

#include <string.h>

#include "arena.h"
#include "arith_rows.h"
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

/* ---- Prepared gradients ------------------------------------------------------------------ */

/**
 * Opaque prepared gradient (cr_prepare_gradient()).
 * @note A prepared gradient is thread-confined, like the tape it holds and its context:
 *       every call, cr_prepared_value_and_gradient() included, writes its workspace (the
 *       values, adjoints and partials of the program, the replay tape's arena) and reports
 *       errors on its context, so two threads must not call one at the same time. It may
 *       move to another thread with its context (with the synchronisation that hands any
 *       object over). Threads that need the same gradient each prepare their own, from one
 *       engine, function and env that they only read.
 */
typedef struct cr_prepared cr_prepared;

/**
 * Prepare a gradient (Mooncake's prepare_gradient_cache + value_and_gradient!!; ADOL-C's
 * record once, replay many): record f (one output) at x on a replay tape, which keeps
 * with each operation how to evaluate it again, and allocate the workspace. Then
 * cr_prepared_value_and_gradient() computes value and gradient at new inputs of the same
 * size by replaying the records, without calling f, recording or allocating.
 *
 * The replay is exact when f's operations do not depend on the inputs except through the
 * tape: branch with cr_tape_cmp() (the outcome is checked at each replay), never on `x.v`;
 * a constant made from a variable's value (cr_const(x.v)) keeps its recorded value. f may
 * use scalar-table functions, overlays, array functions (cr_tape_acall()) and scalar rules
 * kept as pullbacks (cr_tape_call() of a function that is not a row): both are replayed by
 * calling their rrules again, as cr_prepare_gradient_arrays() describes, with the rules
 * looked up when preparing. Zero-adjoint and non-differentiable functions of variables are
 * evaluated again through their primal (or row), or through their overlay run on constants
 * when they have neither.
 * @param[in]  ctx allocations and errors; must outlive the prepared gradient.
 * @param[in]  eng rules and user functions; NULL: built-in rules.
 * @param[in]  f   the function (its env must stay valid only during this call).
 * @param[in]  env passed to f.
 * @param[in]  x   n inputs where f is recorded.
 * @param[in]  n   number of inputs.
 * @param[out] out caller owns; release with cr_prepared_free().
 * @return CR_OK; CR_EINVAL; CR_EUNIMPL (a rule that cannot be replayed); the recording's
 *         status; CR_ENOMEM.
 */
CR_API cr_status cr_prepare_gradient(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                                     const double *x, size_t n, cr_prepared **out);

/**
 * Value and gradient at new inputs, by replaying the prepared recording. Allocates nothing
 * (after the first call, when f calls array functions).
 * @param[in]  p    the prepared gradient.
 * @param[in]  x    n inputs.
 * @param[in]  n    must be the number the gradient was prepared for.
 * @param[out] y    the value (may be NULL).
 * @param[out] grad n partial derivatives.
 * @return CR_OK; CR_ESHAPE (another number of inputs; a rule's result of another kind or
 *         shape); CR_EDOMAIN (a comparison recorded with cr_tape_cmp() comes out otherwise
 *         at x, or an integer result changed: the recording does not describe f there;
 *         nothing is written, prepare again at x); a rule's or pullback's status at x;
 *         CR_EINVAL (NULL, a gradient prepared with cr_prepare_gradient_arrays()). A failed
 *         replay leaves the prepared gradient usable.
 */
CR_API cr_status cr_prepared_value_and_gradient(cr_prepared *p, const double *x, size_t n,
                                                double *y, double *grad);

/**
 * Prepare Hessian-vector products (and gradients) of f: record f at x on a replay tape and
 * build its program, as cr_prepare_gradient() does, and allocate the workspace of the
 * second-order replay. cr_prepared_hvp() then gives value, gradient and H v at new inputs
 * and directions by forward-over-reverse on the program (cr_tape_hvp()'s method), without
 * calling f, recording or allocating; cr_prepared_value_and_gradient() works too.
 *
 * The second derivatives come from the rows, as on a CR_TAPE_SECOND_ORDER tape. As for
 * cr_prepare_gradient(): branch with cr_tape_cmp(), whose outcome each call checks.
 * Zero-adjoint and non-differentiable functions of variables are evaluated again with no
 * derivative. Array functions (cr_tape_acall()) and fused kernels are replayed as the
 * first-order replay does (their rules or loops called again), then go through their
 * forward and second-order steps as on a CR_TAPE_SECOND_ORDER tape; those without a
 * second-order form are refused when f records them (CR_EUNIMPL, as a second-order tape
 * refuses them). Scalar rules kept as pullbacks (cr_tape_call() of a function with a rule
 * that is not a row, a user rule overriding a row, rrule_via_ad, hypot of three arguments,
 * evalpoly, tuple rules) are called again at each replay as a CR_TAPE_SECOND_ORDER tape
 * records them: the partials from the pullback, the second derivatives by central
 * differences of the partials from the rule at x ± h along each variable argument (1 + 2k
 * rule calls for k variable arguments).
 * @param[in]  ctx allocations and errors; must outlive the prepared H v.
 * @param[in]  eng rules and user functions; NULL: built-in rules.
 * @param[in]  f   the function (its env must stay valid only during this call).
 * @param[in]  env passed to f.
 * @param[in]  x   n inputs where f is recorded.
 * @param[in]  n   number of inputs.
 * @param[out] out caller owns; release with cr_prepared_free(). NULL on failure.
 * @return CR_OK; CR_EINVAL; CR_EUNIMPL (an array function or kernel without a
 *         second-order form, naming it; a rule that cannot be replayed); the recording's
 *         status; CR_ENOMEM.
 */
CR_API cr_status cr_prepare_hvp(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                                const double *x, size_t n, cr_prepared **out);

/**
 * Value, gradient and Hessian-vector product H v at new inputs, by replaying the program of
 * cr_prepare_hvp(): one forward pass carries the values and the tangents along v, one
 * reverse pass the adjoints and their tangents. Allocates nothing (after the first call,
 * when f evaluates zero-adjoint functions again or calls array functions).
 * @param[in]  p    prepared with cr_prepare_hvp().
 * @param[in]  x    n inputs.
 * @param[in]  n    must be the number p was prepared for.
 * @param[in]  v    n direction components (finite).
 * @param[out] hv   n components of H v.
 * @param[out] y    the value (may be NULL).
 * @param[out] grad n partial derivatives (may be NULL).
 * @return CR_OK; CR_EINVAL (NULL p, x, v or hv; p prepared with cr_prepare_gradient(),
 *         cr_prepare_gradient_arrays() or cr_prepare_hvp_arrays()); CR_ESHAPE (another number
 *         of inputs; an array function's result of another shape); CR_EDOMAIN (a non-finite
 *         v; a comparison recorded with cr_tape_cmp() comes out otherwise at x); a primal's,
 *         rule's or frule's status at x (a rule kept as a pullback: also its status when it
 *         fails on both sides of x along an argument); CR_ENOMEM. Nothing is written on
 *         failure, and p stays usable.
 */
CR_API cr_status cr_prepared_hvp(cr_prepared *p, const double *x, size_t n, const double *v,
                                 double *hv, double *y, double *grad);

/** Release a prepared gradient. @param[in] p may be NULL. */
CR_API void cr_prepared_free(cr_prepared *p);

/* ---- Structs: friendly gradients ----------------------------------------------------------- */

/**
 * Number of real fields (f64, f32) of a described struct, nested structs included: the
 * number of variables cr_tape_struct_inputs() makes for it.
 * @param[in] type the descriptor (NULL gives 0).
 */
CR_API size_t cr_type_real_fields(const cr_type *type);

/**
 * Inputs from a C struct: one variable per real field, depth-first in field order (nested
 * structs are walked; integer, bool, array and function fields make no variable).
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  type the struct's descriptor.
 * @param[in]  obj  the struct (read only).
 * @param[out] vars cr_type_real_fields(type) variables.
 * @param[in]  n    the capacity of vars.
 * @return CR_OK; CR_EINVAL (NULL, n too small, a nested struct field without descriptor);
 *         the tape's status.
 */
CR_API cr_status cr_tape_struct_inputs(cr_tape *t, const cr_type *type, const void *obj,
                                       cr_var *vars, size_t n);

/**
 * The variable of a field, by path: "w", or "inner.x" for a nested struct.
 * @return the variable; a NaN constant when the path names no real field.
 */
CR_API cr_var cr_tape_struct_field(const cr_type *type, const cr_var *vars, const char *path);

/**
 * The friendly gradient of y with respect to a struct's real fields, written into a struct
 * of the same C type (Mooncake's friendly tangents): each f64 or f32 field receives its
 * derivative (an f32 field in f32), integer and bool fields are set to zero, array and
 * function fields are left as they are (cr_tape_gradient_struct_arrays() also fills the
 * array fields).
 * @param[in]  t    the tape.
 * @param[in]  y    the output.
 * @param[in]  type the struct's descriptor.
 * @param[in]  vars the variables from cr_tape_struct_inputs().
 * @param[out] grad a struct of the type (caller storage).
 * @return as cr_tape_gradient(); CR_EINVAL for a NULL tape, type, variables or grad.
 */
CR_API cr_status cr_tape_gradient_struct(cr_tape *t, cr_var y, const cr_type *type,
                                         const cr_var *vars, void *grad);

/**
 * The same gradient as the raw structural tangent (ChainRules' `Tangent{P}`): a
 * CR_TAN_STRUCT of `type` whose real fields are f64 (f32 for float fields) tangents,
 * integer and bool fields NoTangent, nested structs nested structural tangents, and array
 * and function fields ZeroTangent. Allocated in `arena` (which may be the tape's).
 * @param[in]  t     the tape.
 * @param[in]  y     the output.
 * @param[in]  type  the struct's descriptor.
 * @param[in]  vars  the variables from cr_tape_struct_inputs().
 * @param[in]  arena where the tangent is allocated.
 * @param[out] out   the tangent.
 * @return as cr_tape_gradient(); CR_EINVAL for NULL arguments; allocation statuses.
 */
CR_API cr_status cr_tape_gradient_tangent(cr_tape *t, cr_var y, const cr_type *type,
                                          const cr_var *vars, cr_arena *arena, cr_tangent *out);

/* ---- Array variables ------------------------------------------------------------------------ */

/**
 * An array variable: an array recorded on a tape. Passed by value. Its value `a` is the
 * caller's array for an input (cr_tape_array_input()) and an array in the tape's arena for
 * a result (valid until the tape is reset). A constant array (cr_aconst()) has index
 * CR_VAR_CONST.
 *
 * Array functions (rules_array.h, rules_linalg.h) are recorded through their rrules
 * (cr_tape_acall()): the tape keeps each pullback, and the reverse sweep gives every array
 * variable a shadow, its accumulated cotangent, which pullbacks add into in place
 * (InplaceableThunks write straight into it; the first cotangent an array receives is
 * adopted without a copy when the rule hands over a buffer nobody else holds). Scalar
 * variables flow in and out of array functions (sum, dot, getindex give scalar variables;
 * broadcasting takes them), so scalar and array code mix on one tape.
 *
 * @code
 * // f(x) = sum(x .^ 2) / n and its gradient into gbuf, x the n doubles of xbuf
 * cr_array xa = cr_array_vector(xbuf, n), ga = cr_array_vector(gbuf, n);
 * cr_avar X = cr_tape_array_input(t, &xa);
 * cr_avar S = cr_abroadcast1(t, &cr_fn_square, cr_targ_arr(X));
 * cr_var y = cr_div(t, cr_asum(t, S), cr_const((double)n));
 * cr_array *gp = &ga; // the gradients are given as an array of pointers
 * cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp);
 * @endcode
 */
typedef struct cr_avar {
    const cr_array *a; /**< The value (read only). */
    uint32_t idx;      /**< Index among the tape's array variables, or CR_VAR_CONST. */
    uint32_t tape;     /**< Id of the recording it belongs to. */
} cr_avar;

/** A constant array: no derivative flows through it. @param[in] a borrowed. */
static inline cr_avar cr_aconst(const cr_array *a)
{
    cr_avar c;
    c.a = a;
    c.idx = CR_VAR_CONST;
    c.tape = 0;
    return c;
}

/** What a cr_targ holds. */
typedef enum cr_targ_kind {
    CR_TARG_VAR = 0,  /**< a scalar variable (or constant) */
    CR_TARG_ARR = 1,  /**< an array variable (or constant array) */
    CR_TARG_VALUE = 2 /**< any other value, a constant (integers, dims, ranges, functions) */
} cr_targ_kind;

/** An argument or result of an array function on the tape. */
typedef struct cr_targ {
    cr_targ_kind kind; /**< Which member of u is valid. */
    union {
        cr_var s;   /**< CR_TARG_VAR */
        cr_avar a;  /**< CR_TARG_ARR */
        cr_value v; /**< CR_TARG_VALUE */
    } u;            /**< Payload. */
} cr_targ;

/** A scalar variable as an argument. @param[in] x the variable. */
CR_API cr_targ cr_targ_var(cr_var x);

/** An array variable as an argument. @param[in] x the variable. */
CR_API cr_targ cr_targ_arr(cr_avar x);

/** A constant value as an argument. @param[in] v the value (arrays in it are borrowed). */
CR_API cr_targ cr_targ_value(cr_value v);

/**
 * A new array input variable.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] a the value: borrowed, read only; keep it alive and unmodified until the tape
 *              is reset (pullbacks read it).
 * @return the variable; a constant (CR_VAR_CONST) whose `a` is `a` when the tape has failed
 *         (CR_EINVAL for a NULL or non-float array, or NULL data with elements;
 *         CR_ENOMEM, CR_EARENA).
 */
CR_API cr_avar cr_tape_array_input(cr_tape *t, const cr_array *a);

/**
 * f(args...) for a function with an rrule, recorded: the arguments mix scalar variables,
 * array variables and constant values. The rrule is looked up with the tape's
 * configuration and called on the arguments' values; the tape keeps its pullback. The
 * result is a scalar variable (f64 or f32 result) or an array variable (float array result);
 * a function whose arguments are all constants is called and gives a constant.
 * @param[in]  t     the tape (NULL: the current tape).
 * @param[in]  f     a function value with rules (rules_array.h, rules_linalg.h, ...).
 * @param[in]  args  nargs arguments.
 * @param[in]  nargs number of arguments.
 * @param[out] out   the result (a NaN constant scalar on failure).
 * @return the tape's status: CR_OK; CR_ENORULE (no rrule for these argument kinds, naming
 *         them); CR_ETAPE (a variable of another recording); CR_EINVAL (NULL, a bad argument
 *         kind, a tuple result: see cr_tape_acall_n()); CR_EUNIMPL (a non-float result; on a
 *         second-order tape, a function without a second-order form or a complex argument);
 *         the rule's status (CR_ESHAPE, ...); CR_ENOMEM, CR_EARENA.
 */
CR_API cr_status cr_tape_acall(cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs,
                               cr_targ *out);

/** Most elements of a tuple result cr_tape_acall_n() takes. */
#define CR_TAPE_MAX_TUPLE 8

/**
 * f(args...) for a function with an rrule whose result is a tuple (svd, eigen, qr, lu,
 * findmax, findmin, extrema, logabsdet, ...), recorded as cr_tape_acall() records one
 * result: each float element becomes a variable (a scalar variable for an f64 or f32
 * element, an array variable for a float array), each integer element (an index, a pivot
 * vector) a constant value (CR_TARG_VALUE). The pullback receives a tuple cotangent whose
 * elements nobody used are zero (NoTangent for the integer ones). A function with one
 * result may be called with nout = 1, as with cr_tape_acall(). Forward sweeps (on a
 * CR_TAPE_FORWARD tape) give the elements the tangents of the function's frule; a
 * second-order tape records findmax, findmin, extrema, logabsdet (of a dense matrix) and
 * eigen (of a symmetric matrix) and refuses the other factorizations (CR_EUNIMPL).
 * @param[in]  t     the tape (NULL: the current tape).
 * @param[in]  f     a function value with rules.
 * @param[in]  args  nargs arguments.
 * @param[in]  nargs number of arguments.
 * @param[out] out   nout results, one per tuple element (NaN constants on failure).
 * @param[in]  nout  number of results expected: the tuple's length (at most
 *                   CR_TAPE_MAX_TUPLE), or 1 for a function with one result.
 * @return as cr_tape_acall(); CR_EINVAL when nout is not the result's length; CR_EUNIMPL
 *         for a tuple element the tape cannot hold (a complex scalar, a nested struct), or
 *         on a second-order tape for a function without a second-order form (svd, qr,
 *         lu, ...).
 */
CR_API cr_status cr_tape_acall_n(cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs,
                                 cr_targ *out, size_t nout);

/**
 * cr_tape_acall() for an array result.
 * @param[in] t     the tape (NULL: the current tape).
 * @param[in] f     the function.
 * @param[in] args  nargs arguments.
 * @param[in] nargs number of arguments.
 * @return the array variable; a constant with a NULL `a` on failure (CR_EINVAL when the
 *         result is a scalar).
 */
CR_API cr_avar cr_tape_acall_a(cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs);

/**
 * cr_tape_acall() for a scalar result.
 * @param[in] t     the tape (NULL: the current tape).
 * @param[in] f     the function.
 * @param[in] args  nargs arguments.
 * @param[in] nargs number of arguments.
 * @return the scalar variable; a NaN constant on failure (CR_EINVAL when the result is an
 *         array).
 */
CR_API cr_var cr_tape_acall_s(cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs);

/**
 * Broadcast (Julia's f.(x)) of a one-argument scalar function (cr_fn_broadcast). Over an f64
 * array (contiguous, or 1-d of any stride) of a scalar-table function of one result, the call
 * is recorded as a fused kernel (kernel.h: its row's values and partials, no rule called)
 * unless the tape's engine has a rule of its own for broadcast; otherwise through the rule.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] f a scalar function (cr_fn_sin, cr_fn_square, ...).
 * @param[in] x its argument.
 * @return the array variable (as cr_tape_acall_a()).
 */
CR_API cr_avar cr_abroadcast1(cr_tape *t, const cr_value *f, cr_targ x);

/**
 * Broadcast (Julia's f.(x, y)) of a two-argument scalar function (cr_fn_broadcast); x and y are
 * arrays of broadcasting shapes, scalar variables or constants. f64 arrays of one shape and f64
 * scalars are recorded as a fused kernel, as cr_abroadcast1() says.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] f a scalar function (cr_fn_add, cr_fn_mul, ...).
 * @param[in] x first argument.
 * @param[in] y second argument.
 * @return the array variable (as cr_tape_acall_a()).
 */
CR_API cr_avar cr_abroadcast2(cr_tape *t, const cr_value *f, cr_targ x, cr_targ y);

/**
 * `sum(x)`, a scalar variable (cr_fn_sum). Of an f64 array (contiguous, or 1-d of any stride)
 * it is recorded as a fused kernel sum (four interleaved partial sums) unless the tape's
 * engine has a rule of its own for sum.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] x the array.
 * @return the sum (as cr_tape_acall_s()).
 */
CR_API cr_var cr_asum(cr_tape *t, cr_avar x);

/**
 * `dot(x, y)`, a scalar variable (cr_fn_dot). Of two f64 arrays of one shape (contiguous, or
 * 1-d of any stride) it is recorded as a fused kernel sum of x .* y (four interleaved partial
 * sums) unless the tape's engine has a rule of its own for dot.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] x first array.
 * @param[in] y second array.
 * @return the dot product (as cr_tape_acall_s()).
 */
CR_API cr_var cr_adot(cr_tape *t, cr_avar x, cr_avar y);

/**
 * `x[start:stop)` of a vector: a view (cr_fn_view with a cr_range).
 * @param[in] t     the tape (NULL: the current tape).
 * @param[in] x     a 1-d array.
 * @param[in] start first index (0-based).
 * @param[in] stop  one past the last index.
 * @return the array variable (as cr_tape_acall_a()).
 */
CR_API cr_avar cr_aslice(cr_tape *t, cr_avar x, int64_t start, int64_t stop);

/**
 * `A * B`: matrix-matrix or matrix-vector product (cr_fn_matmul).
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] A left operand.
 * @param[in] B right operand.
 * @return the array variable (as cr_tape_acall_a()).
 */
CR_API cr_avar cr_amatmul(cr_tape *t, cr_avar A, cr_avar B);

/* ---- Scalar variables in arrays, any number of arrays, C integer dims ------------------ */

/**
 * Scalar variables packed into an array variable (Julia's `[x1, x2, ...]`, `vcat` of
 * scalars, reshaped): element i of the result, in row-major order, is xs[i]; the cotangent
 * of xs[i] is element i of the result's. Every sweep (reverse, forward, second order) and
 * prepared gradients take it: on first-order and forward tapes it is one record that
 * copies cotangents and tangents element by element; on second-order tapes and in prepared
 * gradients, n one-element `fill`s and a tree of `cat`s (about n + n/7 array records).
 * @param[in] t     the tape (NULL: the current tape).
 * @param[in] xs    n scalar variables or constants (cr_const()); may be NULL when n is 0.
 * @param[in] n     number of variables (any).
 * @param[in] shape ndim extents whose product is n, copied (the array need not outlive the
 *                  call); NULL with ndim 0: a vector of n.
 * @param[in] ndim  number of dimensions (at most CR_ARRAY_MAX_DIMS).
 * @return the f64 array variable (a constant of the shape when n is 0); a constant with a
 *         NULL `a` when the tape has failed: CR_EINVAL (NULL xs, NULL shape with ndim > 0,
 *         a negative extent, too many dimensions), CR_ESHAPE (a shape of another element
 *         count), CR_EOVERFLOW, CR_ETAPE (a variable of another recording), CR_ENOMEM,
 *         CR_EARENA.
 */
CR_API cr_avar cr_apack(cr_tape *t, const cr_var *xs, size_t n, const int64_t *shape, size_t ndim);

/**
 * Element i of an array variable as a scalar variable (`getindex(x, i)`, cr_fn_getindex with
 * one linear index: row-major, 0-based). Its pullback scatters the cotangent into the
 * array's shadow in place.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] x the array (f64 or f32).
 * @param[in] i the linear index, 0 <= i < numel(x) (CR_EINVAL otherwise, failing the tape).
 * @return the scalar variable (as cr_tape_acall_s()).
 */
CR_API cr_var cr_agetindex(cr_tape *t, cr_avar x, int64_t i);

/**
 * Every element of an array variable as a scalar variable: out[i] = cr_agetindex(t, x, i)
 * for i = 0 .. n-1 (row-major order), the inverse of cr_apack().
 * @param[in]  t   the tape (NULL: the current tape).
 * @param[in]  x   the array.
 * @param[out] out n variables (NaN constants on failure).
 * @param[in]  n   number of elements of x.
 * @return the tape's status: CR_OK; CR_ESHAPE (n is not x's element count); CR_EINVAL (NULL
 *         out with n > 0, or a NULL array); as cr_agetindex().
 */
CR_API cr_status cr_aunpack(cr_tape *t, cr_avar x, cr_var *out, size_t n);

/**
 * `cat(dim, xs...)` of any number of arrays (cr_fn_cat takes at most 8): a tree of calls of
 * cr_fn_cat of at most 8 arrays each, so every sweep and prepared gradients take it.
 * @param[in] t   the tape (NULL: the current tape).
 * @param[in] dim the dimension (0-based): 0 for vcat, 1 for hcat of matrices.
 * @param[in] xs  n arrays of equal rank and equal extents except along dim.
 * @param[in] n   number of arrays, at least 1.
 * @return the array variable; a constant with a NULL `a` on failure: CR_EINVAL (no arrays,
 *         NULL xs, dim out of range), CR_ESHAPE (extents that differ), as cr_tape_acall_a().
 */
CR_API cr_avar cr_acat(cr_tape *t, int64_t dim, const cr_avar *xs, size_t n);

/**
 * n C integers as a constant argument of an array function (an i64 vector: dims, a shape,
 * shifts, counts, a permutation), copied into the tape's arena: the caller's array need not
 * outlive the call. The copy lives until the tape's reset.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] v n integers (may be NULL when n is 0).
 * @param[in] n how many.
 * @return the argument; a CR_KIND_NOTHING value, the tape failed, on error (CR_EINVAL for
 *         NULL v with n > 0, CR_EOVERFLOW, CR_ENOMEM, CR_EARENA).
 */
CR_API cr_targ cr_targ_ints(cr_tape *t, const int64_t *v, size_t n);

/**
 * `reshape(x, shape)` with the extents as C integers (copied: the array need not outlive
 * the call); a view of x when x is dense and contiguous.
 * @param[in] t     the tape (NULL: the current tape).
 * @param[in] x     the array.
 * @param[in] shape ndim extents whose product is x's element count.
 * @param[in] ndim  number of extents.
 * @return the array variable (as cr_tape_acall_a(); the rule's CR_ESHAPE for another element
 *         count); as cr_targ_ints() for NULL shape.
 */
CR_API cr_avar cr_areshape(cr_tape *t, cr_avar x, const int64_t *shape, size_t ndim);

/**
 * `sum(x, dims)` with the dims (0-based) as C integers (copied): an array with the summed
 * dimensions of extent 1.
 * @param[in] t     the tape (NULL: the current tape).
 * @param[in] x     the array.
 * @param[in] dims  ndims dimensions.
 * @param[in] ndims number of dimensions.
 * @return the array variable (as cr_tape_acall_a(); the rule's CR_EINVAL for a dimension
 *         out of range); as cr_targ_ints() for NULL dims.
 */
CR_API cr_avar cr_asum_dims(cr_tape *t, cr_avar x, const int64_t *dims, size_t ndims);

/* ---- Operations with their own steps --------------------------------------------------------- */

/**
 * A step of an operation recorded with cr_tape_op_record(): read `in` (the concatenated
 * elements of one side of the operation, f64, dense) and write `out` (the other side's,
 * zeroed before the call).
 * @return CR_OK or an error (its message on the tape's context, or set with
 *         cr_tape_op_fail()).
 */
typedef cr_status (*cr_tape_op_fn)(cr_tape *t, void *env, const double *in, double *out);

/**
 * An operation whose reverse (and forward) steps are the caller's: the tape keeps the step
 * functions and their environment, not a rule. Made for operations with effects outside
 * the tape that must run in every sweep, in record order or its reverse, such as the
 * adjoint communication of a message-passing call (chainrules/mpi.h).
 */
typedef struct cr_tape_op {
    const char *name;      /**< Named in messages. */
    cr_tape_op_fn reverse; /**< Reverse step: in = the outputs' cotangents, out = the
                                cotangents to add to the inputs'. Required. */
    cr_tape_op_fn forward; /**< Forward step (cr_tape_jvp() on a CR_TAPE_FORWARD tape): in =
                                the inputs' tangents, out = the outputs' tangents. NULL: forward
                                sweeps fail with CR_EUNIMPL naming the operation. */
} cr_tape_op;

/**
 * Record an operation whose steps are op's: its inputs `in` (scalar variables, f64 array
 * variables, or constants of either) and its outputs, whose values the caller computed
 * (`vals`: a scalar's value in `u.s.v`, an array's in `u.a.a`, an f64 array that must stay
 * valid and unchanged until the tape is reset, for instance in cr_tape_arena()), made new
 * variables in `out`.
 *
 * Unlike a rule's pullback, which is skipped when its result's cotangent is zero, the
 * reverse step runs in every reverse sweep that reaches the record (every sweep seeded at a
 * variable made after it, or at the last variable made before it: seed the objective
 * recorded last), in the reverse order of recording, with zeros for cotangents
 * nobody gave; a record with no input and no output variable is recorded and run too. The
 * elements of `in` and of the outputs are concatenated in argument order (a scalar is one
 * element, an array its elements in row-major order); the step's `out` holds as many
 * doubles as the other side, zeroed; what it writes for constant inputs is dropped. The
 * forward step runs in every forward sweep, once per direction, in record order.
 *
 * Records made this way are refused (CR_EUNIMPL naming op) on CR_TAPE_SECOND_ORDER tapes
 * and in prepared gradients and H v (which replay records by their rules).
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  op   the steps (must outlive the recording; usually static).
 * @param[in]  env  passed to the steps (keep it valid until the tape is reset: allocate it
 *                  in cr_tape_arena()).
 * @param[in]  in   nin inputs (NULL when nin is 0).
 * @param[in]  nin  number of inputs.
 * @param[in]  vals nout output values (kinds CR_TARG_VAR or CR_TARG_ARR).
 * @param[out] out  nout output variables (NaN constants on failure).
 * @param[in]  nout number of outputs.
 * @return the tape's status: CR_OK; CR_EINVAL (NULL op, op->reverse, in, vals or out where
 *         needed; an array that is not f64 or has NULL data; a value of kind CR_TARG_VALUE);
 *         CR_ETAPE (a variable of another recording); CR_EUNIMPL (as above); CR_EOVERFLOW;
 *         CR_ENOMEM, CR_EARENA.
 */
CR_API cr_status cr_tape_op_record(cr_tape *t, const cr_tape_op *op, void *env, const cr_targ *in,
                                   size_t nin, const cr_targ *vals, cr_targ *out, size_t nout);

/**
 * Fail the tape from inside an operation's step (or while preparing one) with status st and
 * a message, which cr_tape_errmsg() then gives.
 * @param[in] t   the tape.
 * @param[in] st  a failure status.
 * @param[in] msg the message (copied).
 * @return st.
 */
CR_API cr_status cr_tape_op_fail(cr_tape *t, cr_status st, const char *msg);

/**
 * Gradient of a scalar output with respect to scalar and array variables: one reverse
 * sweep. Array gradients are written into caller arrays of the variables' shapes (dense
 * or strided, dtype f64, f32 or c128; the cotangent is converted: a c128 cotangent of a
 * real array keeps its real part).
 * @param[in]  t     the tape.
 * @param[in]  y     the output.
 * @param[in]  xs    n scalar variables (may be NULL when n is 0).
 * @param[in]  n     number of scalar variables.
 * @param[out] grad  n derivatives (may be NULL when n is 0).
 * @param[in]  as    na array variables (may be NULL when na is 0).
 * @param[in]  na    number of array variables.
 * @param[out] agrad na caller arrays, written (a constant in `as` gets zeros).
 * @return as cr_tape_gradient(); CR_ESHAPE when an agrad array has another number of
 *         elements than its variable (another shape of as many elements is written in
 *         row-major order); CR_EINVAL for a non-writable dtype, or for an array variable in
 *         `as` that is not an input of the tape (cr_tape_array_input()) but the result of an
 *         operation (scalar variables in `xs` may be any variables).
 */
CR_API cr_status cr_tape_gradient_arrays(cr_tape *t, cr_var y, const cr_var *xs, size_t n,
                                         double *grad, const cr_avar *as, size_t na,
                                         cr_array *const *agrad);

/**
 * Pullback of an array output: xbar = J' ybar for the scalar variables xs and the array
 * variables as, seeded with the cotangent ybar of the array variable y (any float dtype,
 * y's shape; finite).
 * @param[in]  t     the tape.
 * @param[in]  y     the array output.
 * @param[in]  ybar  its cotangent.
 * @param[in]  xs    n scalar variables (may be NULL when n is 0).
 * @param[in]  n     number of scalar variables.
 * @param[out] xbar  n results (may be NULL when n is 0).
 * @param[in]  as    na array variables (may be NULL when na is 0).
 * @param[in]  na    number of array variables.
 * @param[out] abar  na caller arrays, written.
 * @return as cr_tape_gradient_arrays(); CR_EDOMAIN for a non-finite ybar.
 */
CR_API cr_status cr_tape_avjp(cr_tape *t, cr_avar y, const cr_array *ybar, const cr_var *xs,
                              size_t n, double *xbar, const cr_avar *as, size_t na,
                              cr_array *const *abar);

/* ---- Structs with array fields: friendly gradients ---------------------------------------- */

/**
 * Number of array fields (CR_KIND_ARRAY: a cr_array held by value) of a described struct,
 * nested structs included: the number of array variables cr_tape_struct_array_inputs()
 * makes for it.
 * @param[in] type the descriptor (NULL gives 0).
 */
CR_API size_t cr_type_array_fields(const cr_type *type);

/**
 * Array inputs from a C struct: one array variable per array field, depth-first in field
 * order (as cr_tape_array_input() on each field's cr_array). With cr_tape_struct_inputs()
 * for the real fields, every differentiable field of the struct is a variable.
 * @param[in]  t     the tape (NULL: the current tape).
 * @param[in]  type  the struct's descriptor.
 * @param[in]  obj   the struct: borrowed, read only; its array fields (and their data) must
 *                   stay alive and unmodified until the tape is reset.
 * @param[out] avars cr_type_array_fields(type) array variables.
 * @param[in]  na    the capacity of avars.
 * @return CR_OK; CR_EINVAL (NULL, na too small, a nested struct field without descriptor, an
 *         array field that is not a float array); the tape's status.
 */
CR_API cr_status cr_tape_struct_array_inputs(cr_tape *t, const cr_type *type, const void *obj,
                                             cr_avar *avars, size_t na);

/**
 * The array variable of an array field, by path: "w", or "layer.b" for a nested struct.
 * @param[in] type  the struct's descriptor.
 * @param[in] avars the variables from cr_tape_struct_array_inputs().
 * @param[in] path  the field's path.
 * @return the variable; a constant with a NULL array when the path names no array field.
 */
CR_API cr_avar cr_tape_struct_array_field(const cr_type *type, const cr_avar *avars,
                                          const char *path);

/**
 * The friendly gradient of y with respect to a struct's real and array fields, written into
 * a struct of the same C type: real, integer and bool fields as cr_tape_gradient_struct();
 * each array field's gradient into the array that grad's field describes, which the caller
 * sets up (for instance with cr_array_vector() over its own buffer) with the input's shape
 * and a float dtype, any strides, as cr_tape_gradient_arrays() writes gradient arrays.
 * @param[in]  t     the tape.
 * @param[in]  y     the output.
 * @param[in]  type  the struct's descriptor.
 * @param[in]  vars  the variables from cr_tape_struct_inputs().
 * @param[in]  avars the array variables from cr_tape_struct_array_inputs().
 * @param[in,out] grad a struct of the type whose array fields describe the destinations.
 * @return as cr_tape_gradient_arrays(); CR_EINVAL for NULL arguments or an array field of
 *         grad without data; CR_ESHAPE for a destination of another size.
 */
CR_API cr_status cr_tape_gradient_struct_arrays(cr_tape *t, cr_var y, const cr_type *type,
                                                const cr_var *vars, const cr_avar *avars,
                                                void *grad);

/**
 * The gradient with respect to a struct's real and array fields as the raw structural
 * tangent: as cr_tape_gradient_tangent(), with each array field an array tangent (a new
 * array of the field's shape and dtype).
 * @param[in]  t     the tape.
 * @param[in]  y     the output.
 * @param[in]  type  the struct's descriptor.
 * @param[in]  vars  the variables from cr_tape_struct_inputs().
 * @param[in]  avars the array variables from cr_tape_struct_array_inputs().
 * @param[in]  arena where the tangent and its arrays are allocated.
 * @param[out] out   the tangent.
 * @return as cr_tape_gradient_arrays(); CR_EINVAL for NULL arguments; allocation statuses.
 */
CR_API cr_status cr_tape_gradient_tangent_arrays(cr_tape *t, cr_var y, const cr_type *type,
                                                 const cr_var *vars, const cr_avar *avars,
                                                 cr_arena *arena, cr_tangent *out);

/* ---- Prepared gradients of functions of arrays ------------------------------------------- */

/**
 * A function of array variables written against the engine (cr_prepare_gradient_arrays()):
 * compute the scalar output y from the n array inputs xs with array functions
 * (cr_tape_acall(), cr_tape_acall_n(), cr_asum(), ...) and scalar operations on tape t.
 * @return CR_OK or an error (usually cr_tape_status(t)).
 */
typedef cr_status (*cr_ad_array_fn)(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env);

/**
 * value_and_gradient of a function of arrays: reset t, make the n arrays xs array inputs,
 * record f on them and sweep, writing the gradient with respect to each input into grads
 * (as cr_tape_gradient_arrays(): a dense row-major f64 gradient array of the input's shape
 * is the input's shadow itself, written in place). The array counterpart of
 * cr_tape_value_and_gradient(), and what cr_prepared_value_and_gradient_arrays() replays.
 * @param[in]  t     the tape.
 * @param[in]  f     the function (one scalar output).
 * @param[in]  env   passed to f.
 * @param[in]  xs    n float arrays (f64, f32 or c128; any strides), borrowed during the call.
 * @param[in]  n     number of arrays (at least 1).
 * @param[out] y     f(xs) (may be NULL).
 * @param[out] grads n caller arrays of the inputs' shapes (any float dtype and strides),
 *                   written.
 * @return CR_OK; CR_EINVAL (t, f, xs or grads NULL, no inputs, an input that is NULL or
 *         not a float array); f's status (the tape fails with it, naming it); the tape's
 *         status; as cr_tape_gradient_arrays() (CR_ESHAPE for a gradient array of another
 *         shape). Allocates nothing once t has held a recording of this size.
 */
CR_API cr_status cr_tape_value_and_gradient_arrays(cr_tape *t, cr_ad_array_fn f, void *env,
                                                   const cr_array *const *xs, size_t n, double *y,
                                                   cr_array *const *grads);

/**
 * Prepare the gradient of a function of arrays: record f once at the arrays xs on a replay
 * tape, keeping each array function's rule, arguments and result shapes with its record.
 * cr_prepared_value_and_gradient_arrays() then replays the recording at new arrays of the
 * same shapes and dtypes: scalar operations are evaluated again from their rows, and each
 * array function's rrule is called again with the new argument values (its pullback is the
 * derivative at the new point), in memory that is reused from call to call.
 *
 * As for cr_prepare_gradient(): branch with cr_tape_cmp(); constants (cr_const(),
 * cr_aconst(), cr_targ_value()) keep their recorded values, and the arrays they hold must
 * stay valid as long as the prepared gradient. Integer elements of tuple results (indices,
 * pivots) are constants too: a replay where one of them changes fails (CR_EDOMAIN) rather
 * than use a stale index. f must not make inputs of its own. Scalar rules kept as
 * pullbacks (cr_tape_call() of a function that is not a row) are replayed by calling their
 * rrules again, as cr_prepare_gradient() describes.
 * @param[in]  ctx allocations and errors; must outlive the prepared gradient.
 * @param[in]  eng rules and user functions; NULL: built-in rules.
 * @param[in]  f   the function (its env must stay valid only during this call).
 * @param[in]  env passed to f.
 * @param[in]  xs  n float arrays (f64, f32 or c128; any strides) where f is recorded;
 *                 borrowed during this call only.
 * @param[in]  n   number of arrays (at least 1).
 * @param[out] out caller owns; release with cr_prepared_free().
 * @return CR_OK; CR_EINVAL (NULL, no inputs, a non-float array, inputs made inside f);
 *         CR_EUNIMPL (a rule that cannot be replayed); the recording's status; CR_ENOMEM.
 */
CR_API cr_status cr_prepare_gradient_arrays(cr_ctx *ctx, const cr_engine *eng, cr_ad_array_fn f,
                                            void *env, const cr_array *const *xs, size_t n,
                                            cr_prepared **out);

/**
 * Value and gradient of a function prepared with cr_prepare_gradient_arrays(), at new
 * arrays of the prepared shapes and dtypes, by replaying the recording. After the first
 * call, allocates nothing (the rules' results and pullbacks go to memory rewound at each
 * call).
 * @param[in]  p     the prepared gradient.
 * @param[in]  xs    n arrays, borrowed during the call.
 * @param[in]  n     must be the number of arrays the gradient was prepared for.
 * @param[out] y     the value (may be NULL).
 * @param[out] grads n caller arrays of the inputs' shapes (any float dtype and strides),
 *                   written.
 * @return CR_OK; CR_ESHAPE (another number of inputs, an input of another shape or dtype,
 *         a rule whose result has another shape than when recorded); CR_EDOMAIN (a
 *         comparison recorded with cr_tape_cmp() comes out otherwise, or an integer element
 *         of a tuple result changed: the recording does not describe f there; prepare
 *         again); a rule's or pullback's status at these inputs; CR_EINVAL (NULL, a
 *         gradient prepared with cr_prepare_gradient()). Nothing is written on failure,
 *         except grads when writing them fails; the prepared gradient stays usable.
 */
CR_API cr_status cr_prepared_value_and_gradient_arrays(cr_prepared *p, const cr_array *const *xs,
                                                       size_t n, double *y, cr_array *const *grads);

/**
 * Prepare Hessian-vector products of a function of arrays: record f at the arrays xs, as
 * cr_prepare_gradient_arrays() does, on a replay tape that refuses the array functions and
 * kernels without a second-order form (as cr_prepare_hvp() does), and allocate the
 * second-order workspace. cr_prepared_hvp_arrays() then gives value, gradient and H v at
 * new arrays of the same shapes and dtypes along new direction arrays;
 * cr_prepared_value_and_gradient_arrays() works on the same prepared H v.
 * @param[in]  ctx allocations and errors; must outlive the prepared H v.
 * @param[in]  eng rules and user functions; NULL: built-in rules.
 * @param[in]  f   the function of the array variables (its env must stay valid only during
 *                 this call).
 * @param[in]  env passed to f.
 * @param[in]  xs  n float arrays where f is recorded.
 * @param[in]  n   number of arrays (at least 1).
 * @param[out] out caller owns; release with cr_prepared_free(). NULL on failure.
 * @return as cr_prepare_gradient_arrays(); CR_EUNIMPL (an array function or kernel without a
 *         second-order form, naming it).
 */
CR_API cr_status cr_prepare_hvp_arrays(cr_ctx *ctx, const cr_engine *eng, cr_ad_array_fn f,
                                       void *env, const cr_array *const *xs, size_t n,
                                       cr_prepared **out);

/**
 * Value, gradient and H v at new arrays by replaying the program of cr_prepare_hvp_arrays()
 * (forward-over-reverse, as cr_tape_ahvp() on a CR_TAPE_SECOND_ORDER tape): H v is the
 * Hessian of the value with respect to all the inputs, taken together, applied to the
 * directions vs. Allocates nothing after the first call (the rules' and kernels' work lives
 * in the tape's arena, rewound at each call).
 * @param[in]  p     prepared with cr_prepare_hvp_arrays().
 * @param[in]  xs    n arrays of the shapes, dtypes and structures prepared for (any
 *                   strides).
 * @param[in]  n     must be the number p was prepared for.
 * @param[in]  vs    n direction arrays of the inputs' shapes (any float dtype and strides,
 *                   finite elements).
 * @param[out] hvs   n arrays, as many elements as their inputs (any float dtype and
 *                   strides): H v with respect to each input.
 * @param[out] y     the value (may be NULL).
 * @param[out] grads n gradient arrays as hvs, or NULL.
 * @return CR_OK; CR_EINVAL (NULL p, xs, vs or hvs or an element of them; NULL data; p
 *         prepared otherwise); CR_ESHAPE (another number of arrays, another shape or dtype
 *         than prepared, an output with another number of elements, a direction of another
 *         shape; an array function's result of another shape at xs); CR_EDOMAIN (a
 *         non-finite direction element; a comparison that comes out otherwise at xs); a
 *         rule's, frule's or kernel's status at xs. On failure p stays usable.
 */
CR_API cr_status cr_prepared_hvp_arrays(cr_prepared *p, const cr_array *const *xs, size_t n,
                                        const cr_array *const *vs, cr_array *const *hvs, double *y,
                                        cr_array *const *grads);

/**
 * Jacobian-vector product over scalar and array variables: one forward sweep, seeded with
 * the tangents xdot of the scalar variables xs and adot of the array variables as; each
 * array function's result tangent comes from its frule (looked up with the tape's
 * configuration). Writes the tangents of the scalar outputs ys and of the array outputs bs.
 * Tangent arrays live in the tape's arena during the sweep. Needs CR_TAPE_FORWARD (or
 * CR_TAPE_SECOND_ORDER). cr_tape_jvp() is this sweep for scalar inputs and outputs.
 * @param[in]  t    the tape.
 * @param[in]  xs   n scalar variables (may be NULL when n is 0).
 * @param[in]  xdot their n tangents (finite).
 * @param[in]  n    number of scalar inputs.
 * @param[in]  as   na array variables (may be NULL when na is 0).
 * @param[in]  adot na tangent arrays, each of its variable's shape (any float dtype and
 *                  strides; finite).
 * @param[in]  na   number of array inputs.
 * @param[in]  ys   m scalar outputs (may be NULL when m is 0).
 * @param[in]  m    number of scalar outputs.
 * @param[out] ydot their m tangents.
 * @param[in]  bs   nb array outputs (may be NULL when nb is 0).
 * @param[in]  nb   number of array outputs.
 * @param[out] bdot nb caller arrays of the outputs' shapes (f64, f32 or c128, any strides),
 *                  written (zeros for a constant).
 * @return CR_OK; the tape's sticky failure; CR_EMISUSE without CR_TAPE_FORWARD; CR_EINVAL
 *         (NULL); CR_ETAPE (a variable of another recording); CR_ESHAPE (a tangent or output
 *         array of another shape than its variable); CR_EDOMAIN (a non-finite tangent);
 *         CR_EUNIMPL (an array function without an frule, named); an frule's status;
 *         CR_ENOMEM / CR_EARENA.
 */
CR_API cr_status cr_tape_ajvp(cr_tape *t, const cr_var *xs, const double *xdot, size_t n,
                              const cr_avar *as, const cr_array *const *adot, size_t na,
                              const cr_var *ys, size_t m, double *ydot, const cr_avar *bs,
                              size_t nb, cr_array *const *bdot);

/**
 * Hessian-vector product of a scalar output with respect to scalar and array variables
 * (forward-over-reverse, as cr_tape_hvp(): a forward sweep of tangents along v, then a
 * reverse sweep of adjoints and their derivatives). Array functions take part through
 * their second-order classes (docs/engine.md, "Second order with array variables").
 * Needs CR_TAPE_SECOND_ORDER.
 * @param[in]  t   the tape.
 * @param[in]  y   the output.
 * @param[in]  xs  n scalar variables (may be NULL when n is 0).
 * @param[in]  n   number of scalar variables.
 * @param[in]  v   their n direction components (finite).
 * @param[out] hv  n components of H v for the scalar variables.
 * @param[in]  as  na array variables (may be NULL when na is 0).
 * @param[in]  na  number of array variables.
 * @param[in]  av  na direction arrays, each of its variable's shape (any float dtype and
 *                 strides; finite).
 * @param[out] ahv na caller arrays of the variables' shapes, written with H v.
 * @return as cr_tape_ajvp(); CR_EMISUSE without CR_TAPE_SECOND_ORDER; a pullback's or
 *         rule's status.
 */
CR_API cr_status cr_tape_ahvp(cr_tape *t, cr_var y, const cr_var *xs, size_t n, const double *v,
                              double *hv, const cr_avar *as, size_t na, const cr_array *const *av,
                              cr_array *const *ahv);

/* ---- Inline recording of the arithmetic operations (private) ---------------------------- */

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
 * language binding) defines CR_TAPE_NO_INLINE before including this header and calls the
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

/* The named operations of every scalar row (cr_tanh(), cr_atan2(), ...). */
#include "tape_ops.h"

#endif /* CR_TAPE_H */
