/**
 * @file kernel.h
 * @brief Fused elementwise kernels (Julia's broadcast fusion) on the reverse tape: an
 *        element function written once, compiled as a primal loop and as a loop of
 *        forward-mode dual numbers, recorded as one record.
 *
 * An expression such as `sum(100 .* (x[2:end] .- x[1:end-1].^2).^2 .+ (1 .- x[1:end-1]).^2)`
 * recorded as array operations is two views, seven broadcasts and a sum: ten passes over
 * the data each way, each with its rule's generic machinery. A kernel is the element
 * function of the whole expression, written once with the cr_k_* operations:
 *
 * @code
 * #include <chainrules.h>
 *
 * // 100 (x1 - x0^2)^2 + (1 - x0)^2, with x[0] and x[1] the kernel's arguments
 * #define ROSEN(x)                                                   \
 *     cr_k_add(cr_k_mul(100.0, cr_k_sq(cr_k_sub(x[1], cr_k_sq(x[0])))), \
 *              cr_k_sq(cr_k_sub(1.0, x[0])))
 * CR_KERNEL(rosen_term, 2, ROSEN); // defines the kernel `rosen_term`
 *
 * // Rosenbrock of X (an array variable of length n): x[0] = X[i], x[1] = X[i + 1]
 * cr_kin in[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
 * cr_var y = cr_akernel_sum(t, &rosen_term, in, 2, n - 1);
 * cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &g);
 * @endcode
 *
 * CR_KERNEL compiles the body twice in the caller's file: over doubles (the primal) and
 * over a dual number carrying the partials with respect to the kernel's arguments
 * (cr_kd1 ... cr_kd4, one type per arity, so a two-argument kernel carries two partials).
 * The cr_k_* macros choose, with C11 `_Generic`, the operation for double or dual operands;
 * integer and double literals and other C expressions of arithmetic type are constants.
 * The arithmetic (+ - * / unary minus, square) is inlined from the rows of arith_rows.h,
 * the one definition of their values and partials; elementary functions (sin, exp, log,
 * ...) call their row of the rule table once per element for value and partial.
 *
 * On the tape a kernel call is one record. The reverse sweep evaluates the dual loop again
 * (the partials are recomputed, not stored) in blocks of CR_K_BLOCK elements and adds into
 * the arguments' shadows in place, and into the adjoints of scalar arguments.
 *
 * Limits: arguments are f64 arrays (1-d with any stride, or contiguous of any shape read in
 * row-major order), scalar variables and constants; the tape must be first order
 * (CR_EUNIMPL otherwise), and a forward sweep (cr_tape_jvp()) refuses a kernel record.
 * Prepared gradients (cr_prepare_gradient_arrays()) replay kernels: their loops run again at
 * the new arrays. As with ForwardDiff's dual numbers, a non-finite partial of one argument (pow(x, y)
 * at x < 0 differentiated in y) makes the partials of the others NaN too.
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

/** A fused elementwise kernel: made by CR_KERNEL (or by hand, with the same loops). */
typedef struct cr_kernel {
    const char *name;               /**< Name, for messages. */
    unsigned nargs;                 /**< Arguments (1..CR_K_MAX_ARGS). */
    cr_kernel_map_fn map;           /**< The primal loop. */
    cr_kernel_sum_fn sum;           /**< The summing loop. */
    cr_kernel_partials_fn partials; /**< The dual loop. */
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
 * @param[in] x   an array variable (or cr_aconst()) of dtype f64.
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
    r.a = cr_aconst(NULL);
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
 *         CR_ESHAPE (an argument's offset + n past the end of its array); CR_EUNIMPL (an
 *         array that is not f64, not dense, or neither 1-d nor contiguous; a second-order
 *         tape); CR_ENOMEM, CR_EARENA. Messages name the kernel.
 */
CR_API cr_avar cr_akernel(cr_tape *t, const cr_kernel *k, const cr_kin *args, size_t nargs,
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
 *         on failure, with the statuses of cr_akernel().
 */
CR_API cr_var cr_akernel_sum(cr_tape *t, const cr_kernel *k, const cr_kin *args, size_t nargs,
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
    CR__K_FN1_W(W)
CR__K_WIDTH(1)
CR__K_WIDTH(2)
CR__K_WIDTH(3)
CR__K_WIDTH(4)

#if !defined(__cplusplus)

/* The width of an operand: 1..4 for a dual, 0 for anything else (a constant). */
#define CR__K_W(a) _Generic((a), cr_kd1 : 1, cr_kd2 : 2, cr_kd3 : 3, cr_kd4 : 4, default : 0)

/* The function P_<widths> of two operands a, b (P a prefix such as cr__k_add_). Each operand
 * is expanded twice (its type, then the call), so a kernel's text grows as 2^depth. */
#define CR__K_SEL2(P, a, b)                                          \
    _Generic((char(*)[1 + 5 * CR__K_W(a) + CR__K_W(b)])0, char(*)[1] \
             : P##ss, char(*)[2]                                     \
             : P##s1, char(*)[3]                                     \
             : P##s2, char(*)[4]                                     \
             : P##s3, char(*)[5]                                     \
             : P##s4, char(*)[6]                                     \
             : P##1s, char(*)[7]                                     \
             : P##11, char(*)[11]                                    \
             : P##2s, char(*)[13]                                    \
             : P##22, char(*)[16]                                    \
             : P##3s, char(*)[19]                                    \
             : P##33, char(*)[21]                                    \
             : P##4s, char(*)[25]                                    \
             : P##44)

/* The function P<width> of one operand. */
#define CR__K_SEL1(P, a) \
    _Generic((a), cr_kd1 : P##1, cr_kd2 : P##2, cr_kd3 : P##3, cr_kd4 : P##4, default : P##s)

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
#else
#define CR__K_UNUSED
#endif

/* The loops of CR_KERNEL. NAME##_cr_kf is the primal element function, NAME##_cr_kdf the
 * dual one (argument j seeded with the j-th unit partial). */
#define CR__KERNEL(NAME, N, BODY, DT)                                                           \
    _Static_assert((N) >= 1 && (N) <= CR_K_MAX_ARGS, "a kernel has 1 to 4 arguments");          \
    static inline double NAME##_cr_kf(const double *cr__kx)                                     \
    {                                                                                           \
        return BODY(cr__kx);                                                                    \
    }                                                                                           \
    static inline DT NAME##_cr_kdf(const DT *cr__kx)                                            \
    {                                                                                           \
        return _Generic((BODY(cr__kx)), DT                                                      \
                        : CR__K_CAT(cr__k_id_, N), default                                      \
                        : CR__K_CAT(cr__k_const_, N))(BODY(cr__kx));                            \
    }                                                                                           \
    static void NAME##_cr_kmap(size_t cr__kn, const double *const *cr__kp, double *cr__ky)      \
    {                                                                                           \
        const double *cr__kq[N];                                                                \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                            \
            cr__kq[cr__kj] = cr__kp[cr__kj];                                                    \
        for (size_t cr__ki = 0; cr__ki < cr__kn; cr__ki++) {                                    \
            double cr__kx[N];                                                                   \
            for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                        \
                cr__kx[cr__kj] = cr__kq[cr__kj][cr__ki];                                        \
            cr__ky[cr__ki] = NAME##_cr_kf(cr__kx);                                              \
        }                                                                                       \
    }                                                                                           \
    static inline double NAME##_cr_kat(const double *const *cr__kq, size_t cr__ki)              \
    {                                                                                           \
        double cr__kx[N];                                                                       \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                            \
            cr__kx[cr__kj] = cr__kq[cr__kj][cr__ki];                                            \
        return NAME##_cr_kf(cr__kx);                                                            \
    }                                                                                           \
    static void NAME##_cr_ksum(size_t cr__kn, const double *const *cr__kp, double *cr__kacc)    \
    {                                                                                           \
        const double *cr__kq[N];                                                                \
        double cr__ks0 = cr__kacc[0], cr__ks1 = cr__kacc[1], cr__ks2 = cr__kacc[2],             \
               cr__ks3 = cr__kacc[3];                                                           \
        size_t cr__ki = 0;                                                                      \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                            \
            cr__kq[cr__kj] = cr__kp[cr__kj];                                                    \
        for (; cr__ki + 4 <= cr__kn; cr__ki += 4) {                                             \
            cr__ks0 += NAME##_cr_kat(cr__kq, cr__ki);                                           \
            cr__ks1 += NAME##_cr_kat(cr__kq, cr__ki + 1);                                       \
            cr__ks2 += NAME##_cr_kat(cr__kq, cr__ki + 2);                                       \
            cr__ks3 += NAME##_cr_kat(cr__kq, cr__ki + 3);                                       \
        }                                                                                       \
        if (cr__ki < cr__kn) {                                                                  \
            cr__ks0 += NAME##_cr_kat(cr__kq, cr__ki);                                           \
            if (cr__ki + 1 < cr__kn) {                                                          \
                cr__ks1 += NAME##_cr_kat(cr__kq, cr__ki + 1);                                   \
                if (cr__ki + 2 < cr__kn)                                                        \
                    cr__ks2 += NAME##_cr_kat(cr__kq, cr__ki + 2);                               \
            }                                                                                   \
        }                                                                                       \
        cr__kacc[0] = cr__ks0;                                                                  \
        cr__kacc[1] = cr__ks1;                                                                  \
        cr__kacc[2] = cr__ks2;                                                                  \
        cr__kacc[3] = cr__ks3;                                                                  \
    }                                                                                           \
    static void NAME##_cr_kpartials(size_t cr__kn, const double *const *cr__kp, double *cr__kP) \
    {                                                                                           \
        const double *cr__kq[N];                                                                \
        for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                            \
            cr__kq[cr__kj] = cr__kp[cr__kj];                                                    \
        for (size_t cr__ki = 0; cr__ki < cr__kn; cr__ki++) {                                    \
            DT cr__kx[N], cr__kr;                                                               \
            for (int cr__kj = 0; cr__kj < (N); cr__kj++) {                                      \
                cr__kx[cr__kj].v = cr__kq[cr__kj][cr__ki];                                      \
                for (int cr__kl = 0; cr__kl < (N); cr__kl++)                                    \
                    cr__kx[cr__kj].d[cr__kl] = cr__kl == cr__kj ? 1.0 : 0.0;                    \
            }                                                                                   \
            cr__kr = NAME##_cr_kdf(cr__kx);                                                     \
            for (int cr__kj = 0; cr__kj < (N); cr__kj++)                                        \
                cr__kP[(size_t)cr__kj * CR_K_BLOCK + cr__ki] = cr__kr.d[cr__kj];                \
        }                                                                                       \
    }                                                                                           \
    static const cr_kernel NAME CR__K_UNUSED = {#NAME, (N), NAME##_cr_kmap, NAME##_cr_ksum,     \
                                                NAME##_cr_kpartials}

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
#define CR_KERNEL(NAME, N, BODY) CR__KERNEL(NAME, N, BODY, CR__K_CAT(cr_kd, N))

#endif /* !__cplusplus */

CR_END_DECLS

#endif /* CR_KERNEL_H */
