/**
 * @file tape_array.h
 * @brief Array variables on the tape: array inputs, array functions through their rrules,
 *        the cr_av_ operations, operations with their own steps, and the sweeps, prepared
 *        gradients and second-order products of functions of arrays.
 *
 * Part of the tape API: tape.h includes it (after the tape, its variables and
 * sweeps), and including it alone includes tape.h. See docs/engine.md.
 */
#if !defined(CR_TAPE_H) && !defined(CR_DOXYGEN)
/* Included first: tape.h declares the tape, then includes this header. */
#include "tape.h"
#elif !defined(CR_TAPE_ARRAY_H)
#define CR_TAPE_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "tape.h"
#include "tape_prepared.h"

CR_BEGIN_DECLS

/* ---- Array variables ------------------------------------------------------------------------ */

/**
 * An array variable: an array recorded on a tape. Passed by value. Its value `a` is the
 * caller's array for an input (cr_tape_array_input()) and an array in the tape's arena for
 * a result (valid until the tape is reset). A constant array (cr_av_const()) has index
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
 * cr_avar S = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(X));
 * cr_var y = cr_div(t, cr_av_sum(t, S), cr_const((double)n));
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
static inline cr_avar cr_av_const(const cr_array *a)
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
CR_API cr_avar cr_av_broadcast1(cr_tape *t, const cr_value *f, cr_targ x);

/**
 * Broadcast (Julia's f.(x, y)) of a two-argument scalar function (cr_fn_broadcast); x and y are
 * arrays of broadcasting shapes, scalar variables or constants. f64 arrays of one shape and f64
 * scalars are recorded as a fused kernel, as cr_av_broadcast1() says.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] f a scalar function (cr_fn_add, cr_fn_mul, ...).
 * @param[in] x first argument.
 * @param[in] y second argument.
 * @return the array variable (as cr_tape_acall_a()).
 */
CR_API cr_avar cr_av_broadcast2(cr_tape *t, const cr_value *f, cr_targ x, cr_targ y);

/**
 * `sum(x)`, a scalar variable (cr_fn_sum). Of an f64 array (contiguous, or 1-d of any stride)
 * it is recorded as a fused kernel sum (four interleaved partial sums) unless the tape's
 * engine has a rule of its own for sum.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] x the array.
 * @return the sum (as cr_tape_acall_s()).
 */
CR_API cr_var cr_av_sum(cr_tape *t, cr_avar x);

/**
 * `dot(x, y)`, a scalar variable (cr_fn_dot). Of two f64 arrays of one shape (contiguous, or
 * 1-d of any stride) it is recorded as a fused kernel sum of x .* y (four interleaved partial
 * sums) unless the tape's engine has a rule of its own for dot.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] x first array.
 * @param[in] y second array.
 * @return the dot product (as cr_tape_acall_s()).
 */
CR_API cr_var cr_av_dot(cr_tape *t, cr_avar x, cr_avar y);

/**
 * `x[start:stop)` of a vector: a view (cr_fn_view with a cr_range).
 * @param[in] t     the tape (NULL: the current tape).
 * @param[in] x     a 1-d array.
 * @param[in] start first index (0-based).
 * @param[in] stop  one past the last index.
 * @return the array variable (as cr_tape_acall_a()).
 */
CR_API cr_avar cr_av_slice(cr_tape *t, cr_avar x, int64_t start, int64_t stop);

/**
 * `A * B`: matrix-matrix or matrix-vector product (cr_fn_matmul).
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] A left operand.
 * @param[in] B right operand.
 * @return the array variable (as cr_tape_acall_a()).
 */
CR_API cr_avar cr_av_matmul(cr_tape *t, cr_avar A, cr_avar B);

/* ---- Scalar variables in arrays, any number of arrays, C integer dims ------------------ */

/**
 * Scalar variables packed into an array variable (Julia's `[x1, x2, ...]`, `vcat` of
 * scalars, reshaped): element i of the result, in row-major order, is xs[i]; the cotangent
 * of xs[i] is element i of the result's. Every sweep (reverse, forward, second order) and
 * prepared gradients take it: on first-order and forward tapes it is one record that
 * copies cotangents and tangents element by element; on second-order tapes and in prepared
 * gradients, calls of `vect` (cr_fn_vect) of up to 16 scalars and a tree of `cat`s of those
 * vectors (about n/16 + n/112 array records).
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
CR_API cr_avar cr_av_pack(cr_tape *t, const cr_var *xs, size_t n, const int64_t *shape,
                          size_t ndim);

/**
 * Element i of an array variable as a scalar variable (`getindex(x, i)`, cr_fn_getindex with
 * one linear index: row-major, 0-based). Its pullback scatters the cotangent into the
 * array's shadow in place.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] x the array (f64 or f32).
 * @param[in] i the linear index, 0 <= i < numel(x) (CR_EINVAL otherwise, failing the tape).
 * @return the scalar variable (as cr_tape_acall_s()).
 */
CR_API cr_var cr_av_getindex(cr_tape *t, cr_avar x, int64_t i);

/**
 * Every element of an array variable as a scalar variable: out[i] = cr_av_getindex(t, x, i)
 * for i = 0 .. n-1 (row-major order), the inverse of cr_av_pack().
 * @param[in]  t   the tape (NULL: the current tape).
 * @param[in]  x   the array.
 * @param[out] out n variables (NaN constants on failure).
 * @param[in]  n   number of elements of x.
 * @return the tape's status: CR_OK; CR_ESHAPE (n is not x's element count); CR_EINVAL (NULL
 *         out with n > 0, or a NULL array); as cr_av_getindex().
 */
CR_API cr_status cr_av_unpack(cr_tape *t, cr_avar x, cr_var *out, size_t n);

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
CR_API cr_avar cr_av_cat(cr_tape *t, int64_t dim, const cr_avar *xs, size_t n);

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
CR_API cr_avar cr_av_reshape(cr_tape *t, cr_avar x, const int64_t *shape, size_t ndim);

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
CR_API cr_avar cr_av_sum_dims(cr_tape *t, cr_avar x, const int64_t *dims, size_t ndims);

/**
 * `einsum(spec, a, b)` of two array variables (cr_fn_einsum): the contraction the index
 * spec describes ("ij,jk->ik", "bij,bjk->bik", "ij,ij->", docs/rules-arrays.md). The spec
 * is copied (it need not outlive the call). Every sweep, second-order tapes and prepared
 * gradients take it (the rule is multilinear).
 * @param[in] t    the tape (NULL: the current tape).
 * @param[in] spec the index spec of two operands.
 * @param[in] a    first operand.
 * @param[in] b    second operand.
 * @return the array variable (0-d for an empty output; as cr_tape_acall_a()): a constant
 *         with a NULL `a` when the tape has failed: CR_EINVAL (a NULL spec, a bad spec,
 *         naming the position), CR_ESHAPE (an operand's rank or an index's extents), as
 *         cr_tape_acall_a().
 */
CR_API cr_avar cr_av_einsum(cr_tape *t, const char *spec, cr_avar a, cr_avar b);

/**
 * `einsum(spec, a)` of one array variable: permutations ("ij->ji"), diagonals ("ii->i"),
 * traces ("ii->"), sums ("ij->i"). As cr_av_einsum() otherwise (the rule is linear).
 * @param[in] t    the tape (NULL: the current tape).
 * @param[in] spec the index spec of one operand.
 * @param[in] a    the operand.
 * @return the array variable, as cr_av_einsum().
 */
CR_API cr_avar cr_av_einsum1(cr_tape *t, const char *spec, cr_avar a);

/**
 * Batched matrix product: C[b] = A[b] B[b] for 3-d arrays (batch x rows x inner and batch x
 * inner x cols), `einsum("bij,bjk->bik", A, B)`, one BLAS gemm per batch.
 * @param[in] t the tape (NULL: the current tape).
 * @param[in] A batch x m x k.
 * @param[in] B batch x k x n.
 * @return the batch x m x n array variable, as cr_av_einsum(); CR_ESHAPE when A or B is not
 *         3-d or their extents disagree.
 */
CR_API cr_avar cr_av_bmm(cr_tape *t, cr_avar A, cr_avar B);

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

/* ---- Prepared gradients of functions of arrays ------------------------------------------- */

/**
 * A function of array variables written against the engine (cr_prepare_gradient_arrays()):
 * compute the scalar output y from the n array inputs xs with array functions
 * (cr_tape_acall(), cr_tape_acall_n(), cr_av_sum(), ...) and scalar operations on tape t.
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
 * cr_av_const(), cr_targ_value()) keep their recorded values, and the arrays they hold must
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

CR_END_DECLS

#endif /* CR_TAPE_ARRAY_H */
