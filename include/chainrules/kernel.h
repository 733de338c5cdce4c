/**
 * @file kernel.h
 * @brief Fused elementwise kernels (Julia's broadcast fusion) on the reverse tape: an
 *        element function written once, compiled as a primal loop, as a loop of
 *        forward-mode dual numbers and as a loop of hyper-dual numbers (second order),
 *        recorded as one record.
 *
 * An expression such as `sum(100 .* (x[2:end] .- x[1:end-1].^2).^2 .+ (1 .- x[1:end-1]).^2)`
 * recorded as array operations is two views, seven broadcasts and a sum: ten passes over
 * the data each way, each with its rule's generic machinery. A kernel is the element
 * function of the whole expression, written once with the cr_k_* operations:
 *
 * @code
 * #include <chainrules.h>
 * #include <chainrules/kernel.h> // not in the umbrella header: include it by name
 *
 * // 100 (x1 - x0^2)^2 + (1 - x0)^2, with x[0] and x[1] the kernel's arguments
 * #define ROSEN(x)                                                   \
 *     cr_k_add(cr_k_mul(100.0, cr_k_sq(cr_k_sub(x[1], cr_k_sq(x[0])))), \
 *              cr_k_sq(cr_k_sub(1.0, x[0])))
 * CR_KERNEL(rosen_term, 2, ROSEN); // defines the kernel `rosen_term`
 *
 * // Rosenbrock of X (an array variable of length n): x[0] = X[i], x[1] = X[i + 1]
 * cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
 * cr_var y = cr_av_kernel_sum(t, &rosen_term, in, 2, n - 1);
 * cr_array ga = cr_array_vector(gbuf, n), *gp = &ga; // the gradient into gbuf
 * cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp);
 * @endcode
 *
 * CR_KERNEL compiles the body three times in the caller's file: over doubles (the primal),
 * over a dual number carrying the partials with respect to the kernel's arguments
 * (cr_kd1 ... cr_kd4, one type per arity, so a two-argument kernel carries two partials),
 * and over a hyper-dual number (cr_kh1 ... cr_kh4: that dual number and its tangent along
 * one direction), whose partials' tangents are the second derivatives second-order sweeps
 * need.
 * The cr_k_* macros choose, with C11 `_Generic`, the operation for double or dual operands;
 * integer and double literals and other C expressions of arithmetic type are constants.
 * The arithmetic (+ - * / unary minus, square) is inlined from the rows of arith_rows.h,
 * the one definition of their values and partials; elementary functions (sin, exp, log,
 * ...) call their row of the rule table once per element for value and partial (and, in
 * the hyper-dual loop, for the second derivative, taken from the row as the scalar
 * second-order tape takes it: the complex step, or central differences of the partials).
 * Pushing tangents through these (the hyper-dual arithmetic) is algebra.
 *
 * On the tape a kernel call is one record. The reverse sweep evaluates the dual loop again
 * (the partials are recomputed, not stored) in blocks of CR_K_BLOCK elements and adds into
 * the arguments' shadows in place, and into the adjoints of scalar arguments.
 *
 * Forward sweeps (cr_tape_jvp(), cr_tape_ajvp()) give the result's tangent from the dual
 * loop's partials; on a CR_TAPE_SECOND_ORDER tape (cr_tape_hvp(), cr_tape_hessian(),
 * cr_tape_ahvp()) the second-order reverse step runs the hyper-dual loop once per direction.
 *
 * Limits: arguments are f64 or f32 arrays (1-d with any stride, or contiguous of any shape
 * read in row-major order; f32 elements are read as doubles, the loops run in double and an
 * array result is f64), scalar variables and constants; complex arrays are refused; a second-order
 * tape refuses a kernel without a hyper-dual loop (one made by hand with `second` NULL;
 * CR_EUNIMPL). Prepared gradients (cr_prepare_gradient_arrays()) replay kernels: their loops run
 * again at the new arrays. As with ForwardDiff's dual numbers, a non-finite partial of one argument
 * (pow(x, y) at x < 0 differentiated in y) makes the partials of the others NaN too.
 *
 * @note Kernels are immutable descriptors: any number of threads may use one.
 */
#ifndef CR_KERNEL_H
#define CR_KERNEL_H

#include <stddef.h>

#include "arith_rows.h"
#include "common.h"
#include "tape.h"

CR_BEGIN_DECLS

/** Most arguments of a kernel (the width of the widest dual type). */
#define CR_K_MAX_ARGS 4

/** Elements per block of the kernel loops (the stride of the partials' block, see
 *  cr_kernel_partials_fn). A multiple of 4. */
#define CR_K_BLOCK 256

/** Dual number of a one-argument kernel: value and the partial along the argument. */
typedef struct cr_kd1 {
    double v;    /**< Value. */
    double d[1]; /**< Partial with respect to argument 0. */
} cr_kd1;

/** Dual number of a two-argument kernel. */
typedef struct cr_kd2 {
    double v;    /**< Value. */
    double d[2]; /**< Partials with respect to arguments 0, 1. */
} cr_kd2;

/** Dual number of a three-argument kernel. */
typedef struct cr_kd3 {
    double v;    /**< Value. */
    double d[3]; /**< Partials with respect to arguments 0..2. */
} cr_kd3;

/** Dual number of a four-argument kernel. */
typedef struct cr_kd4 {
    double v;    /**< Value. */
    double d[4]; /**< Partials with respect to arguments 0..3. */
} cr_kd4;

/** Hyper-dual number of a one-argument kernel: a dual number of the kernel and its tangent
 *  along one direction (a dual number of dual numbers). */
typedef struct cr_kh1 {
    cr_kd1 p; /**< Value and partial. */
    cr_kd1 t; /**< Their directional derivatives: the value's tangent and the partial's. */
} cr_kh1;

/** Hyper-dual number of a two-argument kernel. */
typedef struct cr_kh2 {
    cr_kd2 p; /**< Value and partials. */
    cr_kd2 t; /**< Their directional derivatives. */
} cr_kh2;

/** Hyper-dual number of a three-argument kernel. */
typedef struct cr_kh3 {
    cr_kd3 p; /**< Value and partials. */
    cr_kd3 t; /**< Their directional derivatives. */
} cr_kh3;

/** Hyper-dual number of a four-argument kernel. */
typedef struct cr_kh4 {
    cr_kd4 p; /**< Value and partials. */
    cr_kd4 t; /**< Their directional derivatives. */
} cr_kh4;

/**
 * A kernel's primal loop: y[i] = f(x[0][i], ..., x[nargs-1][i]) for i < n (unit strides).
 * @param[in]  n number of elements.
 * @param[in]  x nargs argument pointers.
 * @param[out] y n results.
 */
typedef void (*cr_kernel_map_fn)(size_t n, const double *const *x, double *y);

/**
 * A kernel's summing loop: acc[i % 4] += f(x[.][i]) for i < n, so that four sums run
 * interleaved (n is a multiple of 4 except in the last block of a call).
 * @param[in]     n   number of elements.
 * @param[in]     x   nargs argument pointers.
 * @param[in,out] acc the four partial sums.
 */
typedef void (*cr_kernel_sum_fn)(size_t n, const double *const *x, double *acc);

/**
 * A kernel's dual loop: P[j * CR_K_BLOCK + i] = ∂f/∂x_j at element i, for i < n <=
 * CR_K_BLOCK and j < nargs.
 * @param[in]  n number of elements (at most CR_K_BLOCK).
 * @param[in]  x nargs argument pointers.
 * @param[out] P the partials, one block of CR_K_BLOCK per argument.
 */
typedef void (*cr_kernel_partials_fn)(size_t n, const double *const *x, double *P);

/**
 * A kernel's hyper-dual loop, along one direction: for i < n <= CR_K_BLOCK and j < nargs,
 * P[j * CR_K_BLOCK + i] = ∂f/∂x_j and PD[j * CR_K_BLOCK + i] = Σ_l ∂²f/∂x_j∂x_l xd[l][i] at
 * element i (the derivative of the partial along the direction xd).
 * @param[in]  n  number of elements (at most CR_K_BLOCK).
 * @param[in]  x  nargs argument pointers.
 * @param[in]  xd nargs pointers to the arguments' tangents along the direction.
 * @param[out] P  the partials, one block of CR_K_BLOCK per argument.
 * @param[out] PD their directional derivatives, laid out as P.
 */
typedef void (*cr_kernel_second_fn)(size_t n, const double *const *x, const double *const *xd,
                                    double *P, double *PD);

/**
 * A kernel's fused reverse loop, for the sum of a call with a scalar adjoint g: for i < n
 * and each j < nargs with out[j] != NULL, out[j][i] = g ∂f/∂x_j at element i. The out[j]
 * are n elements each, overlapping neither each other nor the arguments.
 * @param[in]  n   number of elements (any).
 * @param[in]  x   nargs argument pointers.
 * @param[in]  g   the adjoint of the sum.
 * @param[out] out nargs pointers to the shadows the partials go to (NULL: skipped).
 */
typedef void (*cr_kernel_pull_fn)(size_t n, const double *const *x, double g, double *const *out);

/** A fused elementwise kernel: made by CR_KERNEL (or by hand, with the same loops; `second`
 *  and `pull` may be NULL). */
typedef struct cr_kernel {
    const char *name;               /**< Name, for messages. */
    unsigned nargs;                 /**< Arguments (1..CR_K_MAX_ARGS). */
    cr_kernel_map_fn map;           /**< The primal loop. */
    cr_kernel_sum_fn sum;           /**< The summing loop. */
    cr_kernel_partials_fn partials; /**< The dual loop. */
    cr_kernel_second_fn second;     /**< The hyper-dual loop (NULL: first order only). */
    cr_kernel_pull_fn pull; /**< The fused reverse loop of a sum (NULL: the dual loop is used). */
} cr_kernel;

/** What a cr_kin holds. */
typedef enum cr_kin_kind {
    CR_KIN_ARR = 0, /**< an array variable (or constant array) read from an offset */
    CR_KIN_VAR = 1  /**< a scalar variable or constant, the same for every element */
} cr_kin_kind;

/** An argument of a kernel call. */
typedef struct cr_kin {
    cr_kin_kind kind; /**< Which of a, s is valid. */
    size_t off;       /**< CR_KIN_ARR: element i of the call reads element off + i. */
    cr_avar a;        /**< CR_KIN_ARR: the array. */
    cr_var s;         /**< CR_KIN_VAR: the scalar. */
} cr_kin;

/**
 * An array argument: element i of the call reads element `off + i` of x (in row-major
 * order for a contiguous array of several dimensions; along the stride of a 1-d array).
 * @param[in] x   an array variable (or cr_av_const()) of dtype f64 or f32 (read as doubles).
 * @param[in] off the first element read.
 * @return the argument.
 */
static inline cr_kin cr_kin_arr(cr_avar x, size_t off)
{
    cr_kin r;
    r.kind = CR_KIN_ARR;
    r.off = off;
    r.a = x;
    r.s = cr_const(0.0);
    return r;
}

/**
 * A scalar argument, broadcast to every element; its adjoint receives the sum over the
 * elements.
 * @param[in] x a scalar variable or constant.
 * @return the argument.
 */
static inline cr_kin cr_kin_var(cr_var x)
{
    cr_kin r;
    r.kind = CR_KIN_VAR;
    r.off = 0;
    r.a = cr_av_const(NULL);
    r.s = x;
    return r;
}

/**
 * A constant scalar argument.
 * @param[in] c its value.
 * @return the argument.
 */
static inline cr_kin cr_kin_const(double c)
{
    return cr_kin_var(cr_const(c));
}

/**
 * Record y[i] = k(args at element i) for i < n: an array variable of n f64 elements (a
 * 1-d array in the tape's arena, valid until the reset), in one record.
 * @param[in] t     the tape (NULL: the current tape).
 * @param[in] k     the kernel.
 * @param[in] args  nargs arguments (k->nargs of them).
 * @param[in] nargs number of arguments.
 * @param[in] n     number of elements.
 * @return the array variable (a constant array when every argument is constant); on
 *         failure a constant with a NULL `a`, and the tape fails with: CR_EINVAL (NULL
 *         kernel or arguments, a number of arguments other than k->nargs or more than
 *         CR_K_MAX_ARGS, a NULL array); CR_ETAPE (a variable of another recording);
 *         CR_ESHAPE (an argument's offset + n past the end of its array: the message gives
 *         n, the offset and the array's length); CR_EOVERFLOW (n more elements than an
 *         array of doubles can hold); CR_EUNIMPL (an array that is neither f64 nor f32, not
 *         dense, or neither 1-d nor contiguous; a second-order tape and a kernel without
 *         hyper-dual loop); CR_ENOMEM, CR_EARENA. Messages name the kernel.
 */
CR_API cr_avar cr_av_kernel(cr_tape *t, const cr_kernel *k, const cr_kin *args, size_t nargs,
                            size_t n);

/**
 * Record sum over i < n of k(args at element i): the fused map-reduce, one record, no
 * array of n elements. The sum runs in four interleaved partial sums (element i into sum
 * i % 4), added as (s0 + s1) + (s2 + s3).
 * @param[in] t     the tape (NULL: the current tape).
 * @param[in] k     the kernel.
 * @param[in] args  nargs arguments.
 * @param[in] nargs number of arguments.
 * @param[in] n     number of elements.
 * @return the scalar variable (a constant when every argument is constant); a NaN constant
 *         on failure, with the statuses of cr_av_kernel().
 */
CR_API cr_var cr_av_kernel_sum(cr_tape *t, const cr_kernel *k, const cr_kin *args, size_t nargs,
                               size_t n);

/** Elementary functions of the kernels (the first argument of cr_k_row1()). */
typedef enum cr_k_fn1 {
    CR_K_SIN = 0,    /**< sin */
    CR_K_COS = 1,    /**< cos */
    CR_K_TAN = 2,    /**< tan */
    CR_K_ASIN = 3,   /**< asin */
    CR_K_ACOS = 4,   /**< acos */
    CR_K_ATAN = 5,   /**< atan */
    CR_K_SINH = 6,   /**< sinh */
    CR_K_COSH = 7,   /**< cosh */
    CR_K_TANH = 8,   /**< tanh */
    CR_K_EXP = 9,    /**< exp */
    CR_K_EXPM1 = 10, /**< expm1 */
    CR_K_LOG = 11,   /**< log */
    CR_K_LOG1P = 12, /**< log1p */
    CR_K_SQRT = 13,  /**< sqrt */
    CR_K_CBRT = 14,  /**< cbrt */
    CR_K_ABS = 15,   /**< fabs */
    CR_K_NFN1 = 16   /**< number of one-argument functions */
} cr_k_fn1;

/** Two-argument elementary functions of the kernels (the first argument of cr_k_row2()). */
typedef enum cr_k_fn2 {
    CR_K_POW = 0,   /**< pow */
    CR_K_ATAN2 = 1, /**< atan2 */
    CR_K_HYPOT = 2, /**< hypot */
    CR_K_NFN2 = 3   /**< number of two-argument functions */
} cr_k_fn2;

/**
 * Value and derivative of a one-argument function, from its row of the rule table (the
 * rule's one definition).
 * @param[in]  fn   a cr_k_fn1.
 * @param[in]  x    the argument.
 * @param[out] dydx the derivative.
 * @return the value; NaN (and a NaN derivative) for an unknown fn.
 */
CR_API double cr_k_row1(unsigned fn, double x, double *dydx);

/**
 * Value and partials of a two-argument function, from its row of the rule table.
 * @param[in]  fn a cr_k_fn2.
 * @param[in]  x  first argument.
 * @param[in]  y  second argument.
 * @param[out] d  the two partials.
 * @return the value; NaN (and NaN partials) for an unknown fn.
 */
CR_API double cr_k_row2(unsigned fn, double x, double y, double *d);

/**
 * Value, derivative and second derivative of a one-argument function: the first two from
 * its row of the rule table, the second derivative from the same row as the scalar
 * second-order tape takes it (the complex step on the row's complex instantiation, or
 * central differences of the row's partials for real-only rows).
 * @param[in]  fn   a cr_k_fn1.
 * @param[in]  x    the argument.
 * @param[out] dydx the derivative.
 * @param[out] d2   the second derivative.
 * @return the value; NaN (and NaN derivatives) for an unknown fn.
 */
CR_API double cr_k_row1_h(unsigned fn, double x, double *dydx, double *d2);

/**
 * Value, partials and second partials of a two-argument function (as cr_k_row1_h()).
 * @param[in]  fn   a cr_k_fn2.
 * @param[in]  x    first argument.
 * @param[in]  y    second argument.
 * @param[in]  vary which arguments vary: bit 0 for x, bit 1 for y; second partials
 *                  involving only a fixed argument are not computed (set to 0).
 * @param[out] d    the two partials.
 * @param[out] h    ∂²/∂x², ∂²/∂x∂y, ∂²/∂y².
 * @return the value; NaN (and NaN derivatives) for an unknown fn.
 */
CR_API double cr_k_row2_h(unsigned fn, double x, double y, unsigned vary, double *d, double *h);

/**
 * @cond CR_PRIVATE
 *
 * The operations on doubles and dual numbers. Each is a plain static inline function,
 * cr__k_<op>_<widths> (s a double, 1..4 a dual of that width: cr__k_mul_s2 multiplies a
 * double by a cr_kd2); the cr_k_* macros below pick one with _Generic.
 */

/* The arithmetic rows' f64 bodies (arith_rows.h): cr__k_row_add(x, Y, D), ... */
#define CR__K_ROW(NAME, NIN, NOUT, PRIMAL, ...)                                \
    static inline void cr__k_row_##NAME(const double *x, double *Y, double *D) \
    {                                                                          \
        PRIMAL;                                                                \
        __VA_ARGS__;                                                           \
    }
CR__ARITH_ROWS(CR__K_ROW)
#undef CR__K_ROW

/* A two-argument arithmetic operation on doubles. */
#define CR__K_ARITH_SS(OP)                                   \
    static inline double cr__k_##OP##_ss(double a, double b) \
    {                                                        \
        double x[2], Y[1], D[2];                             \
        x[0] = a;                                            \
        x[1] = b;                                            \
        cr__k_row_##OP(x, Y, D);                             \
        return Y[0];                                         \
    }

/* A two-argument arithmetic operation of width W: dual op dual, dual op double, double op
 * dual. The partials of the row push the operands' partials forward. */
#define CR__K_ARITH_W(OP, W)                                           \
    static inline cr_kd##W cr__k_##OP##_##W##W(cr_kd##W a, cr_kd##W b) \
    {                                                                  \
        double x[2], Y[1], D[2];                                       \
        cr_kd##W r;                                                    \
        x[0] = a.v;                                                    \
        x[1] = b.v;                                                    \
        cr__k_row_##OP(x, Y, D);                                       \
        r.v = Y[0];                                                    \
        for (int l = 0; l < W; l++)                                    \
            r.d[l] = D[0] * a.d[l] + D[1] * b.d[l];                    \
        return r;                                                      \
    }                                                                  \
    static inline cr_kd##W cr__k_##OP##_##W##s(cr_kd##W a, double b)   \
    {                                                                  \
        double x[2], Y[1], D[2];                                       \
        cr_kd##W r;                                                    \
        x[0] = a.v;                                                    \
        x[1] = b;                                                      \
        cr__k_row_##OP(x, Y, D);                                       \
        r.v = Y[0];                                                    \
        for (int l = 0; l < W; l++)                                    \
            r.d[l] = D[0] * a.d[l];                                    \
        return r;                                                      \
    }                                                                  \
    static inline cr_kd##W cr__k_##OP##_s##W(double a, cr_kd##W b)     \
    {                                                                  \
        double x[2], Y[1], D[2];                                       \
        cr_kd##W r;                                                    \
        x[0] = a;                                                      \
        x[1] = b.v;                                                    \
        cr__k_row_##OP(x, Y, D);                                       \
        r.v = Y[0];                                                    \
        for (int l = 0; l < W; l++)                                    \
            r.d[l] = D[1] * b.d[l];                                    \
        return r;                                                      \
    }

/* Unary minus and square (x * x through the row of *) of width W, the identity and a
 * constant lifted to a dual. */
#define CR__K_UNARY_W(W)                             \
    static inline cr_kd##W cr__k_neg_##W(cr_kd##W a) \
    {                                                \
        double Y[1], D[1];                           \
        cr_kd##W r;                                  \
        cr__k_row_neg(&a.v, Y, D);                   \
        r.v = Y[0];                                  \
        for (int l = 0; l < W; l++)                  \
            r.d[l] = D[0] * a.d[l];                  \
        return r;                                    \
    }                                                \
    static inline cr_kd##W cr__k_sq_##W(cr_kd##W a)  \
    {                                                \
        return cr__k_mul_##W##W(a, a);               \
    }                                                \
    static inline cr_kd##W cr__k_id_##W(cr_kd##W a)  \
    {                                                \
        return a;                                    \
    }                                                \
    static inline cr_kd##W cr__k_const_##W(double c) \
    {                                                \
        cr_kd##W r;                                  \
        r.v = c;                                     \
        for (int l = 0; l < W; l++)                  \
            r.d[l] = 0.0;                            \
        return r;                                    \
    }

/* The elementary functions of width W, through cr_k_row1 / cr_k_row2. */
#define CR__K_FN1_W(W)                                                           \
    static inline cr_kd##W cr__k_fn1_##W(unsigned fn, cr_kd##W a)                \
    {                                                                            \
        double d;                                                                \
        cr_kd##W r;                                                              \
        r.v = cr_k_row1(fn, a.v, &d);                                            \
        for (int l = 0; l < W; l++)                                              \
            r.d[l] = d * a.d[l];                                                 \
        return r;                                                                \
    }                                                                            \
    static inline cr_kd##W cr__k_fn2_##W##W(unsigned fn, cr_kd##W a, cr_kd##W b) \
    {                                                                            \
        double d[2];                                                             \
        cr_kd##W r;                                                              \
        r.v = cr_k_row2(fn, a.v, b.v, d);                                        \
        for (int l = 0; l < W; l++)                                              \
            r.d[l] = d[0] * a.d[l] + d[1] * b.d[l];                              \
        return r;                                                                \
    }                                                                            \
    static inline cr_kd##W cr__k_fn2_##W##s(unsigned fn, cr_kd##W a, double b)   \
    {                                                                            \
        double d[2];                                                             \
        cr_kd##W r;                                                              \
        r.v = cr_k_row2(fn, a.v, b, d);                                          \
        for (int l = 0; l < W; l++)                                              \
            r.d[l] = d[0] * a.d[l];                                              \
        return r;                                                                \
    }                                                                            \
    static inline cr_kd##W cr__k_fn2_s##W(unsigned fn, double a, cr_kd##W b)     \
    {                                                                            \
        double d[2];                                                             \
        cr_kd##W r;                                                              \
        r.v = cr_k_row2(fn, a, b.v, d);                                          \
        for (int l = 0; l < W; l++)                                              \
            r.d[l] = d[1] * b.d[l];                                              \
        return r;                                                                \
    }

/* The hyper-dual operations of width W: a cr_kh##W is a dual number (p) with its tangent
 * (t) along one direction, and these are the dual-number rules applied to it, over the
 * dual numbers of width W (whose operations expand the rows): (a + ε ȧ) op (b + ε ḃ) =
 * a op b + ε (tangent by the sum, product or quotient rule). This is algebra; the values
 * and partials all come from the rows through the cr_kd##W operations. */
#define CR__K_HYPER_W(W)                                                                \
    static inline cr_kh##W cr__k_add_h##W##h##W(cr_kh##W a, cr_kh##W b)                 \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_add_##W##W(a.p, b.p);                                               \
        r.t = cr__k_add_##W##W(a.t, b.t);                                               \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_add_h##W##s(cr_kh##W a, double b)                      \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_add_##W##s(a.p, b);                                                 \
        r.t = a.t;                                                                      \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_add_sh##W(double a, cr_kh##W b)                        \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_add_s##W(a, b.p);                                                   \
        r.t = b.t;                                                                      \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_sub_h##W##h##W(cr_kh##W a, cr_kh##W b)                 \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_sub_##W##W(a.p, b.p);                                               \
        r.t = cr__k_sub_##W##W(a.t, b.t);                                               \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_sub_h##W##s(cr_kh##W a, double b)                      \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_sub_##W##s(a.p, b);                                                 \
        r.t = a.t;                                                                      \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_sub_sh##W(double a, cr_kh##W b)                        \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_sub_s##W(a, b.p);                                                   \
        r.t = cr__k_neg_##W(b.t);                                                       \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_mul_h##W##h##W(cr_kh##W a, cr_kh##W b)                 \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_mul_##W##W(a.p, b.p);                                               \
        r.t = cr__k_add_##W##W(cr__k_mul_##W##W(a.t, b.p), cr__k_mul_##W##W(a.p, b.t)); \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_mul_h##W##s(cr_kh##W a, double b)                      \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_mul_##W##s(a.p, b);                                                 \
        r.t = cr__k_mul_##W##s(a.t, b);                                                 \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_mul_sh##W(double a, cr_kh##W b)                        \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_mul_s##W(a, b.p);                                                   \
        r.t = cr__k_mul_s##W(a, b.t);                                                   \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_div_h##W##h##W(cr_kh##W a, cr_kh##W b)                 \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_div_##W##W(a.p, b.p);                                               \
        r.t = cr__k_div_##W##W(cr__k_sub_##W##W(a.t, cr__k_mul_##W##W(r.p, b.t)), b.p); \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_div_h##W##s(cr_kh##W a, double b)                      \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_div_##W##s(a.p, b);                                                 \
        r.t = cr__k_div_##W##s(a.t, b);                                                 \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_div_sh##W(double a, cr_kh##W b)                        \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_div_s##W(a, b.p);                                                   \
        r.t = cr__k_div_##W##W(cr__k_neg_##W(cr__k_mul_##W##W(r.p, b.t)), b.p);         \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_neg_h##W(cr_kh##W a)                                   \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_neg_##W(a.p);                                                       \
        r.t = cr__k_neg_##W(a.t);                                                       \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_sq_h##W(cr_kh##W a)                                    \
    {                                                                                   \
        return cr__k_mul_h##W##h##W(a, a);                                              \
    }                                                                                   \
    static inline cr_kh##W cr__k_id_h##W(cr_kh##W a)                                    \
    {                                                                                   \
        return a;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_const_h##W(double c)                                   \
    {                                                                                   \
        cr_kh##W r;                                                                     \
        r.p = cr__k_const_##W(c);                                                       \
        r.t = cr__k_const_##W(0.0);                                                     \
        return r;                                                                       \
    }                                                                                   \
    /* f(a + ε ȧ) = f(a) + ε f'(a) ȧ, with f'(a) the dual number (f', f'' a.d). */  \
    static inline cr_kh##W cr__k_fn1_h##W(unsigned fn, cr_kh##W a)                      \
    {                                                                                   \
        double d1, d2;                                                                  \
        cr_kd##W fp;                                                                    \
        cr_kh##W r;                                                                     \
        r.p.v = cr_k_row1_h(fn, a.p.v, &d1, &d2);                                       \
        fp.v = d1;                                                                      \
        for (int l = 0; l < W; l++) {                                                   \
            r.p.d[l] = d1 * a.p.d[l];                                                   \
            fp.d[l] = d2 * a.p.d[l];                                                    \
        }                                                                               \
        r.t = cr__k_mul_##W##W(fp, a.t);                                                \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_fn2_h##W##h##W(unsigned fn, cr_kh##W a, cr_kh##W b)    \
    {                                                                                   \
        double d[2], h[3];                                                              \
        cr_kd##W fx, fy;                                                                \
        cr_kh##W r;                                                                     \
        r.p.v = cr_k_row2_h(fn, a.p.v, b.p.v, 3u, d, h);                                \
        fx.v = d[0];                                                                    \
        fy.v = d[1];                                                                    \
        for (int l = 0; l < W; l++) {                                                   \
            r.p.d[l] = d[0] * a.p.d[l] + d[1] * b.p.d[l];                               \
            fx.d[l] = h[0] * a.p.d[l] + h[1] * b.p.d[l];                                \
            fy.d[l] = h[1] * a.p.d[l] + h[2] * b.p.d[l];                                \
        }                                                                               \
        r.t = cr__k_add_##W##W(cr__k_mul_##W##W(fx, a.t), cr__k_mul_##W##W(fy, b.t));   \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_fn2_h##W##s(unsigned fn, cr_kh##W a, double b)         \
    {                                                                                   \
        double d[2], h[3];                                                              \
        cr_kd##W fx;                                                                    \
        cr_kh##W r;                                                                     \
        r.p.v = cr_k_row2_h(fn, a.p.v, b, 1u, d, h);                                    \
        fx.v = d[0];                                                                    \
        for (int l = 0; l < W; l++) {                                                   \
            r.p.d[l] = d[0] * a.p.d[l];                                                 \
            fx.d[l] = h[0] * a.p.d[l];                                                  \
        }                                                                               \
        r.t = cr__k_mul_##W##W(fx, a.t);                                                \
        return r;                                                                       \
    }                                                                                   \
    static inline cr_kh##W cr__k_fn2_sh##W(unsigned fn, double a, cr_kh##W b)           \
    {                                                                                   \
        double d[2], h[3];                                                              \
        cr_kd##W fy;                                                                    \
        cr_kh##W r;                                                                     \
        r.p.v = cr_k_row2_h(fn, a, b.p.v, 2u, d, h);                                    \
        fy.v = d[1];                                                                    \
        for (int l = 0; l < W; l++) {                                                   \
            r.p.d[l] = d[1] * b.p.d[l];                                                 \
            fy.d[l] = h[2] * b.p.d[l];                                                  \
        }                                                                               \
        r.t = cr__k_mul_##W##W(fy, b.t);                                                \
        return r;                                                                       \
    }

CR__K_ARITH_SS(add)
CR__K_ARITH_SS(sub)
CR__K_ARITH_SS(mul)
CR__K_ARITH_SS(div)

static inline double cr__k_neg_s(double a)
{
    double Y[1], D[1];
    cr__k_row_neg(&a, Y, D);
    return Y[0];
}

static inline double cr__k_sq_s(double a)
{
    return cr__k_mul_ss(a, a);
}

static inline double cr__k_fn1_s(unsigned fn, double a)
{
    double d;
    return cr_k_row1(fn, a, &d);
}

static inline double cr__k_fn2_ss(unsigned fn, double a, double b)
{
    double d[2];
    return cr_k_row2(fn, a, b, d);
}

#define CR__K_WIDTH(W)    \
    CR__K_ARITH_W(add, W) \
    CR__K_ARITH_W(sub, W) \
    CR__K_ARITH_W(mul, W) \
    CR__K_ARITH_W(div, W) \
    CR__K_UNARY_W(W)      \
    CR__K_FN1_W(W)        \
    CR__K_HYPER_W(W)
CR__K_WIDTH(1)
CR__K_WIDTH(2)
CR__K_WIDTH(3)
CR__K_WIDTH(4)

#if !defined(__cplusplus)

/* The width code of an operand: 1..4 for a dual, 5..8 for a hyper-dual of width 1..4, 0
 * for anything else (a constant). */
#define CR__K_W(a)                                                                        \
    _Generic((a), cr_kd1 : 1, cr_kd2 : 2, cr_kd3 : 3, cr_kd4 : 4, cr_kh1 : 5, cr_kh2 : 6, \
             cr_kh3 : 7, cr_kh4 : 8, default : 0)

/* The function P_<widths> of two operands a, b (P a prefix such as cr__k_add_). Each operand
 * is expanded twice (its type, then the call), so a kernel's text grows as 2^depth. */
#define CR__K_SEL2(P, a, b)                                          \
    _Generic((char(*)[1 + 9 * CR__K_W(a) + CR__K_W(b)])0, char(*)[1] \
             : P##ss, char(*)[2]                                     \
             : P##s1, char(*)[3]                                     \
             : P##s2, char(*)[4]                                     \
             : P##s3, char(*)[5]                                     \
             : P##s4, char(*)[6]                                     \
             : P##sh1, char(*)[7]                                    \
             : P##sh2, char(*)[8]                                    \
             : P##sh3, char(*)[9]                                    \
             : P##sh4, char(*)[10]                                   \
             : P##1s, char(*)[11]                                    \
             : P##11, char(*)[19]                                    \
             : P##2s, char(*)[21]                                    \
             : P##22, char(*)[28]                                    \
             : P##3s, char(*)[31]                                    \
             : P##33, char(*)[37]                                    \
             : P##4s, char(*)[41]                                    \
             : P##44, char(*)[46]                                    \
             : P##h1s, char(*)[51]                                   \
             : P##h1h1, char(*)[55]                                  \
             : P##h2s, char(*)[61]                                   \
             : P##h2h2, char(*)[64]                                  \
             : P##h3s, char(*)[71]                                   \
             : P##h3h3, char(*)[73]                                  \
             : P##h4s, char(*)[81]                                   \
             : P##h4h4)

/* The function P<width> of one operand. */
#define CR__K_SEL1(P, a)      \
    _Generic((a), cr_kd1      \
             : P##1, cr_kd2   \
             : P##2, cr_kd3   \
             : P##3, cr_kd4   \
             : P##4, cr_kh1   \
             : P##h1, cr_kh2  \
             : P##h2, cr_kh3  \
             : P##h3, cr_kh4  \
             : P##h4, default \
             : P##s)

#define CR__K_OP2(OP, a, b) CR__K_SEL2(cr__k_##OP##_, a, b)(a, b)
#define CR__K_OP1(OP, a)    CR__K_SEL1(cr__k_##OP##_, a)(a)
#define CR__K_F1(FN, a)     CR__K_SEL1(cr__k_fn1_, a)(FN, a)
#define CR__K_F2(FN, a, b)  CR__K_SEL2(cr__k_fn2_, a, b)(FN, a, b)

#endif /* !__cplusplus */

/* The dual type of a kernel of N arguments, and the conversion of its body's result. */
#define CR__K_CAT_(a, b) a##b
#define CR__K_CAT(a, b)  CR__K_CAT_(a, b)

#if defined(__GNUC__)
#define CR__K_UNUSED __attribute__((unused))
#define CR__K_INLINE static inline __attribute__((always_inline))
#else
#define CR__K_UNUSED
#define CR__K_INLINE static inline
#endif

/* The loops of CR_KERNEL. NAME##_cr_kf is the primal element function, NAME##_cr_kdf the
 * dual one (argument j seeded with the j-th unit partial), NAME##_cr_khf the hyper-dual one
 * (the same, with the arguments' tangents along one direction). */
#define CR__KERNEL(NAME, N, BODY, DT, HT)                                                        \
    _Static_assert((N) >= 1 && (N) <= CR_K_MAX_ARGS, "a kernel has 1 to 4 arguments");           \
    static inline double NAME##_cr_kf(const double *cr__kx)                                      \
    {                                                                                            \
        return BODY(cr__kx);                                                                     \
    }                                                                                            \
    static inline DT NAME##_cr_kdf(const DT *cr__kx)                                             \
    {                                                                                            \
        return _Generic((BODY(cr__kx)), DT                                                       \
                        : CR__K_CAT(cr__k_id_, N), default                                       \
                        : CR__K_CAT(cr__k_const_, N))(BODY(cr__kx));                             \
    }                                                                                            \
    static inline HT NAME##_cr_khf(const HT *cr__kx)                                             \
    {                                                                                            \
        return _Generic((BODY(cr__kx)), HT                                                       \
                        : CR__K_CAT(cr__k_id_h, N), default                                      \
                        : CR__K_CAT(cr__k_const_h, N))(BODY(cr__kx));                            \
    }                                                                                            \
    static void NAME##_cr_kmap(size_t cr__kn, const double *const *cr__kp, double *cr__ky)       \
    {                                                                                            \
        const double *cr__kq[N];                                                                 \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                             \
            cr__kq[cr__kj] = cr__kp[cr__kj];                                                     \
        for (size_t cr__ki = 0; cr__ki < cr__kn; cr__ki++) {                                     \
            double cr__kx[N];                                                                    \
            for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                         \
                cr__kx[cr__kj] = cr__kq[cr__kj][cr__ki];                                         \
            cr__ky[cr__ki] = NAME##_cr_kf(cr__kx);                                               \
        }                                                                                        \
    }                                                                                            \
    static inline double NAME##_cr_kat(const double *const *cr__kq, size_t cr__ki)               \
    {                                                                                            \
        double cr__kx[N];                                                                        \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                             \
            cr__kx[cr__kj] = cr__kq[cr__kj][cr__ki];                                             \
        return NAME##_cr_kf(cr__kx);                                                             \
    }                                                                                            \
    static void NAME##_cr_ksum(size_t cr__kn, const double *const *cr__kp, double *cr__kacc)     \
    {                                                                                            \
        const double *cr__kq[N];                                                                 \
        double cr__ks0 = cr__kacc[0], cr__ks1 = cr__kacc[1], cr__ks2 = cr__kacc[2],              \
               cr__ks3 = cr__kacc[3];                                                            \
        size_t cr__ki = 0;                                                                       \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                             \
            cr__kq[cr__kj] = cr__kp[cr__kj];                                                     \
        for (; cr__ki + 4 <= cr__kn; cr__ki += 4) {                                              \
            cr__ks0 += NAME##_cr_kat(cr__kq, cr__ki);                                            \
            cr__ks1 += NAME##_cr_kat(cr__kq, cr__ki + 1);                                        \
            cr__ks2 += NAME##_cr_kat(cr__kq, cr__ki + 2);                                        \
            cr__ks3 += NAME##_cr_kat(cr__kq, cr__ki + 3);                                        \
        }                                                                                        \
        if (cr__ki < cr__kn) {                                                                   \
            cr__ks0 += NAME##_cr_kat(cr__kq, cr__ki);                                            \
            if (cr__ki + 1 < cr__kn) {                                                           \
                cr__ks1 += NAME##_cr_kat(cr__kq, cr__ki + 1);                                    \
                if (cr__ki + 2 < cr__kn)                                                         \
                    cr__ks2 += NAME##_cr_kat(cr__kq, cr__ki + 2);                                \
            }                                                                                    \
        }                                                                                        \
        cr__kacc[0] = cr__ks0;                                                                   \
        cr__kacc[1] = cr__ks1;                                                                   \
        cr__kacc[2] = cr__ks2;                                                                   \
        cr__kacc[3] = cr__ks3;                                                                   \
    }                                                                                            \
    CR__K_INLINE DT NAME##_cr_kdat(const double *const *cr__kq, size_t cr__ki)                   \
    {                                                                                            \
        DT cr__kx[N];                                                                            \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++) {                                           \
            cr__kx[cr__kj].v = cr__kq[cr__kj][cr__ki];                                           \
            for (int cr__kl = 0; cr__kl < (N); cr__kl++)                                         \
                cr__kx[cr__kj].d[cr__kl] = cr__kl == cr__kj ? 1.0 : 0.0;                         \
        }                                                                                        \
        return NAME##_cr_kdf(cr__kx);                                                            \
    }                                                                                            \
    static void NAME##_cr_kpartials(size_t cr__kn, const double *const *cr__kp, double *cr__kP)  \
    {                                                                                            \
        const double *cr__kq[N];                                                                 \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                             \
            cr__kq[cr__kj] = cr__kp[cr__kj];                                                     \
        for (size_t cr__ki = 0; cr__ki < cr__kn; cr__ki++) {                                     \
            DT cr__kr = NAME##_cr_kdat(cr__kq, cr__ki);                                          \
            for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                         \
                cr__kP[(size_t)cr__kj * CR_K_BLOCK + cr__ki] = cr__kr.d[cr__kj];                 \
        }                                                                                        \
    }                                                                                            \
    static void NAME##_cr_kpull(size_t cr__kn, const double *const *cr__kp, double cr__kg,       \
                                double *const *cr__ko)                                           \
    {                                                                                            \
        const double *cr__kq[N];                                                                 \
        double *cr__kw[N];                                                                       \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++) {                                           \
            cr__kq[cr__kj] = cr__kp[cr__kj];                                                     \
            cr__kw[cr__kj] = cr__ko[cr__kj];                                                     \
        }                                                                                        \
        for (size_t cr__ki = 0; cr__ki < cr__kn; cr__ki++) {                                     \
            DT cr__kr = NAME##_cr_kdat(cr__kq, cr__ki);                                          \
            for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                         \
                if (cr__kw[cr__kj] != NULL)                                                      \
                    cr__kw[cr__kj][cr__ki] = cr__kg * cr__kr.d[cr__kj];                          \
        }                                                                                        \
    }                                                                                            \
    static void NAME##_cr_ksecond(size_t cr__kn, const double *const *cr__kp,                    \
                                  const double *const *cr__kpd, double *cr__kP, double *cr__kPD) \
    {                                                                                            \
        const double *cr__kq[N], *cr__kqd[N];                                                    \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++) {                                           \
            cr__kq[cr__kj] = cr__kp[cr__kj];                                                     \
            cr__kqd[cr__kj] = cr__kpd[cr__kj];                                                   \
        }                                                                                        \
        for (size_t cr__ki = 0; cr__ki < cr__kn; cr__ki++) {                                     \
            HT cr__kx[N], cr__kr;                                                                \
            for (int cr__kj = 0; cr__kj < (N); cr__kj++) {                                       \
                cr__kx[cr__kj].p.v = cr__kq[cr__kj][cr__ki];                                     \
                cr__kx[cr__kj].t.v = cr__kqd[cr__kj][cr__ki];                                    \
                for (int cr__kl = 0; cr__kl < (N); cr__kl++) {                                   \
                    cr__kx[cr__kj].p.d[cr__kl] = cr__kl == cr__kj ? 1.0 : 0.0;                   \
                    cr__kx[cr__kj].t.d[cr__kl] = 0.0;                                            \
                }                                                                                \
            }                                                                                    \
            cr__kr = NAME##_cr_khf(cr__kx);                                                      \
            for (int cr__kj = 0; cr__kj < (N); cr__kj++) {                                       \
                cr__kP[(size_t)cr__kj * CR_K_BLOCK + cr__ki] = cr__kr.p.d[cr__kj];               \
                cr__kPD[(size_t)cr__kj * CR_K_BLOCK + cr__ki] = cr__kr.t.d[cr__kj];              \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
    static const cr_kernel NAME CR__K_UNUSED = {#NAME,                                           \
                                                (N),                                             \
                                                NAME##_cr_kmap,                                  \
                                                NAME##_cr_ksum,                                  \
                                                NAME##_cr_kpartials,                             \
                                                NAME##_cr_ksecond,                               \
                                                NAME##_cr_kpull}

/** @endcond */

#if !defined(__cplusplus) || defined(CR_DOXYGEN)

/** a + b, for doubles and the dual numbers of a kernel (either may be a constant). */
#define cr_k_add(a, b) CR__K_OP2(add, a, b)
/** a - b */
#define cr_k_sub(a, b) CR__K_OP2(sub, a, b)
/** a * b */
#define cr_k_mul(a, b) CR__K_OP2(mul, a, b)
/** a / b */
#define cr_k_div(a, b) CR__K_OP2(div, a, b)
/** -a */
#define cr_k_neg(a) CR__K_OP1(neg, a)
/** a * a (through the row of *) */
#define cr_k_sq(a) CR__K_OP1(sq, a)
/** sin(a), from its row (one call per element) */
#define cr_k_sin(a) CR__K_F1(CR_K_SIN, a)
/** cos(a) */
#define cr_k_cos(a) CR__K_F1(CR_K_COS, a)
/** tan(a) */
#define cr_k_tan(a) CR__K_F1(CR_K_TAN, a)
/** asin(a) */
#define cr_k_asin(a) CR__K_F1(CR_K_ASIN, a)
/** acos(a) */
#define cr_k_acos(a) CR__K_F1(CR_K_ACOS, a)
/** atan(a) */
#define cr_k_atan(a) CR__K_F1(CR_K_ATAN, a)
/** sinh(a) */
#define cr_k_sinh(a) CR__K_F1(CR_K_SINH, a)
/** cosh(a) */
#define cr_k_cosh(a) CR__K_F1(CR_K_COSH, a)
/** tanh(a) */
#define cr_k_tanh(a) CR__K_F1(CR_K_TANH, a)
/** exp(a) */
#define cr_k_exp(a) CR__K_F1(CR_K_EXP, a)
/** expm1(a) */
#define cr_k_expm1(a) CR__K_F1(CR_K_EXPM1, a)
/** log(a) */
#define cr_k_log(a) CR__K_F1(CR_K_LOG, a)
/** log1p(a) */
#define cr_k_log1p(a) CR__K_F1(CR_K_LOG1P, a)
/** sqrt(a) */
#define cr_k_sqrt(a) CR__K_F1(CR_K_SQRT, a)
/** cbrt(a) */
#define cr_k_cbrt(a) CR__K_F1(CR_K_CBRT, a)
/** fabs(a) */
#define cr_k_abs(a) CR__K_F1(CR_K_ABS, a)
/** pow(a, b) */
#define cr_k_pow(a, b) CR__K_F2(CR_K_POW, a, b)
/** atan2(a, b) */
#define cr_k_atan2(a, b) CR__K_F2(CR_K_ATAN2, a, b)
/** hypot(a, b) */
#define cr_k_hypot(a, b) CR__K_F2(CR_K_HYPOT, a, b)

/**
 * Define the kernel NAME (a `static const cr_kernel`) of N arguments (a literal 1..4) whose
 * element function is BODY(x), a function-like macro over the arguments x[0] .. x[N-1]
 * written with the cr_k_* operations. Use at file scope, followed by a semicolon.
 */
#define CR_KERNEL(NAME, N, BODY) CR__KERNEL(NAME, N, BODY, CR__K_CAT(cr_kd, N), CR__K_CAT(cr_kh, N))

#endif /* !__cplusplus */

CR_END_DECLS

#endif /* CR_KERNEL_H */
