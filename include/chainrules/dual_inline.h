/**
 * @file dual_inline.h
 * @brief Inline forward mode: dual numbers whose arithmetic and scalar rows compile into
 *        the caller (header-only), with one direction, a compile-time number of directions
 *        (CR_DUALN_DEFINE) or a run-time number (cr_dualv_*).
 *
 * Every operation is a `static inline` function that evaluates the scalar rule row of its
 * function (the row's primal and partials, the single definition of its derivative:
 * arith_rows.h and src/rulesets) and pushes the tangents through the partials:
 * ẏ = Σ_j ∂y/∂x_j ẋ_j. The operations of every row are generated from the row table into
 * dual_inline_rows.h (tools/gen_dual_rows.c); this file holds the types, the constructors
 * and the chain-rule loops. There is no allocation, no state and no status: the
 * operations are plain arithmetic, safe from any thread.
 *
 * Three forms, with the same operation names (NAME is the row's registered name: add, sub,
 * mul, div, neg, sin, tanh, logistic, atan2, hypot, pow, muladd, sincos, ...):
 *
 * - **one direction**, cr_dual1 {v, d}: `cr_dual1_NAME(a, ...)`.
 * - **N directions fixed at compile time**: `CR_DUALN_DEFINE(my_dual, 4);` defines the
 *   type `my_dual` {d[4], v} and `my_dual_NAME(a, ...)`: the row's partials computed once,
 *   then one multiply-add per SIMD unit of the directions (N rounded up to a multiple of 4,
 *   the extra lanes zero; with GCC and Clang the units are vectors of the target's width,
 *   2 lanes with SSE2, 4 with AVX), in loops of constant trip count that are unrolled so
 *   that the tangents stay in registers.
 * - **n directions chosen at run time**: `cr_dualv_NAME(n, a, da, ..., dy)` takes each
 *   operand as its value and the address of its n tangents, writes the n tangents of the
 *   result to dy and returns its value; the storage is the caller's.
 *
 * Functions of several results (sincos, sincospi, modf, logabsgamma) write their results
 * to an array instead of returning them.
 *
 * A function made of stages that each depend on few variables can be differentiated stage
 * by stage on narrower types, the stages' Jacobians composed by `TYPE_chain` (the chain
 * rule through intermediates), so that no operation carries the directions its stage does
 * not depend on (docs/forward-mode.md, "Stages on narrower duals").
 *
 * @code
 * // d/dx asin(0.2 + sin(x)) at x = 3
 * cr_dual1 x = cr_dual1_var(3.0);
 * cr_dual1 y = cr_dual1_asin(cr_dual1_add(cr_dual1_const(0.2), cr_dual1_sin(x)));
 * // y.v = asin(0.2 + sin(3)), y.d = its derivative
 *
 * // the gradient of f(x, y) = x * exp(y) in one evaluation
 * CR_DUALN_DEFINE(dual2, 2);    // at file scope
 * dual2 a = dual2_var(1.5, 0), b = dual2_var(0.5, 1);
 * dual2 f = dual2_mul(a, dual2_exp(b));   // f.d[0] = ∂f/∂x, f.d[1] = ∂f/∂y
 * @endcode
 *
 * **IEEE products.** A tangent is Σ_j ∂_j·ẋ_j computed as written: where a partial is
 * infinite or NaN (sqrt and log at 0, asin at 1), a zero tangent times it is NaN, as in
 * ForwardDiff. So the tangent of `x * sqrt(c)` for a constant c = 0 is NaN, not 0. The
 * operations test nothing per direction; cr_dual_call() of dual.h skips constant operands
 * instead.
 *
 * **Real only.** The duals hold doubles; the rows' complex instantiations are reached
 * through the rules (cr_frule) and the tape, not through these types.
 *
 * Rows whose text calls private helpers of the library (near hard points, or special
 * functions: atan, pow, erf, digamma, ...) call the library's instantiation of the row, an
 * out-of-line call; the rest of their operation, and every other row, is inline.
 * The parts of dual_inline_rows.h (dual_inline_rows_1.h, ...) say which rows are which.
 *
 * For Jacobians through function values and registered frules, see dual.h (cr_dual,
 * cr_dual_call(), cr_dual_jacobian()).
 */
#ifndef CR_DUAL_INLINE_H
#define CR_DUAL_INLINE_H

#include <math.h>
#include <stddef.h>

#include "common.h"

CR_BEGIN_DECLS

/** @cond CR_PRIVATE */
#define CR__DUAL_INLINE static inline
/* The operations CR_DUALN_DEFINE writes into the includer's file: unused ones are not
 * worth a warning there. */
#if defined(__GNUC__)
#define CR__DUALN_INLINE static inline __attribute__((unused))
#else
#define CR__DUALN_INLINE static inline
#endif
/** @endcond */

/** A dual number with one direction: the value v and its tangent d. */
typedef struct cr_dual1 {
    double v; /**< The value. */
    double d; /**< The tangent. */
} cr_dual1;

/** A constant: tangent 0. */
CR__DUAL_INLINE cr_dual1 cr_dual1_const(double v)
{
    cr_dual1 r;
    r.v = v;
    r.d = 0.0;
    return r;
}

/** The variable: tangent 1. */
CR__DUAL_INLINE cr_dual1 cr_dual1_var(double v)
{
    cr_dual1 r;
    r.v = v;
    r.d = 1.0;
    return r;
}

/** The value v with tangent d. */
CR__DUAL_INLINE cr_dual1 cr_dual1_make(double v, double d)
{
    cr_dual1 r;
    r.v = v;
    r.d = d;
    return r;
}

/** @cond CR_PRIVATE */
/* dy[i] = D0 da[i] (+ D1 db[i] (+ D2 dc[i])) for i < n; dy may be one of the inputs (each
 * i is read before it is written). */
CR__DUAL_INLINE void cr__dualv_lin1(size_t n, double D0, const double *da, double *dy)
{
    for (size_t i = 0; i < n; i++)
        dy[i] = D0 * da[i];
}

CR__DUAL_INLINE void cr__dualv_lin2(size_t n, double D0, const double *da, double D1,
                                    const double *db, double *dy)
{
    for (size_t i = 0; i < n; i++)
        dy[i] = D0 * da[i] + D1 * db[i];
}

CR__DUAL_INLINE void cr__dualv_lin3(size_t n, double D0, const double *da, double D1,
                                    const double *db, double D2, const double *dc, double *dy)
{
    for (size_t i = 0; i < n; i++)
        dy[i] = D0 * da[i] + D1 * db[i] + D2 * dc[i];
}

/* The tangents of a CR_DUALN_DEFINE type: N rounded up to a multiple of 4, so that the
 * loops have a trip count the vectorisers accept (the lanes past N stay zero). */
#define CR__DUALN_LANES(N) (((size_t)(N) + 3) / 4 * 4)

/* Unroll the loops over the directions: with constant indices the operands' tangents can
 * live in registers (an indexed access would keep every dual in memory). */
#if defined(__clang__)
#define CR__DUALN_UNROLL _Pragma("unroll 64")
#elif defined(__GNUC__)
#define CR__DUALN_UNROLL _Pragma("GCC unroll 64")
#else
#define CR__DUALN_UNROLL
#endif

/* The unit of the loops over the directions. With GCC and Clang, a SIMD vector of the
 * widest width the target enables up to 32 bytes (4 lanes with AVX, 2 with SSE2 or NEON),
 * written with the compilers' vector extensions: an operation is then one whole-register
 * multiply (and add) per unit, which the vectorisers do not always find on a loop over
 * doubles (they mix scalar lanes, shuffles and partial vectors). The tangents are also
 * visible as doubles, d[], through an anonymous union. The unit and the type are aligned
 * to 16 bytes whatever the width (and with CR_DUALN_NO_SIMD), so that the layout does not
 * depend on the target's options (a 32-byte alignment made every dual 160 bytes instead of
 * 144 at N = 15 and the ba Jacobians 15% slower). Elsewhere the unit is one double.
 * CR_DUALN_NO_SIMD before the include selects the double unit. */
#if defined(__GNUC__) || defined(__clang__)
#define CR__DUALN_ALIGNED __attribute__((aligned(16)))
#else
#define CR__DUALN_ALIGNED
#endif
#if (defined(__GNUC__) || defined(__clang__)) && !defined(CR_DUALN_NO_SIMD)
#define CR__DUALN_SIMD 1
#if defined(__AVX__)
typedef double cr__dualn_vec __attribute__((vector_size(32), aligned(16)));
typedef long long cr__dualn_ivec __attribute__((vector_size(32), aligned(16)));
#define CR__DUALN_VW 4
#define CR__DUALN_IOTA     \
    {                      \
        0.0, 1.0, 2.0, 3.0 \
    }
#else
typedef double cr__dualn_vec __attribute__((vector_size(16)));
typedef long long cr__dualn_ivec __attribute__((vector_size(16)));
#define CR__DUALN_VW 2
#define CR__DUALN_IOTA \
    {                  \
        0.0, 1.0       \
    }
#endif
#define CR__DUALN_STORAGE(N)                                    \
    union {                                                     \
        double d[CR__DUALN_LANES(N)];                           \
        cr__dualn_vec cr__u[CR__DUALN_LANES(N) / CR__DUALN_VW]; \
    }
#define CR__DUALN_UNITS(N) (CR__DUALN_LANES(N) / CR__DUALN_VW)
#define CR__DUALN_U(x)     ((x).cr__u)
CR__DUAL_INLINE cr__dualn_vec cr__dualn_zero(void)
{
    cr__dualn_vec z = {0.0};
    return z;
}
/* Unit k of the tangents d[0..n) (zero past n), built in registers as the seed. */
CR__DUAL_INLINE cr__dualn_vec cr__dualn_load(const double *d, size_t k, size_t n)
{
    cr__dualn_vec t;
    for (size_t j = 0; j < CR__DUALN_VW; j++)
        t[j] = k * CR__DUALN_VW + j < n ? d[k * CR__DUALN_VW + j] : 0.0;
    return t;
}
/* Unit k of the seed of direction dir: 1 in lane dir, 0 elsewhere, made in registers by a
 * comparison, so that the dual is built in place: a lane written through memory would
 * stall the next load of its unit (no store forwarding into a wider load), about a fifth
 * of the time of the ba Jacobians of chainrules-bench. */
CR__DUAL_INLINE cr__dualn_vec cr__dualn_seed(size_t k, size_t dir)
{
    cr__dualn_vec iota = CR__DUALN_IOTA;
    cr__dualn_ivec sel =
        (cr__dualn_ivec)(iota + (double)(k * CR__DUALN_VW) == cr__dualn_zero() + (double)dir);
    return (cr__dualn_vec)(sel & (cr__dualn_ivec)(cr__dualn_zero() + 1.0));
}
#else
#define CR__DUALN_SIMD       0
#define CR__DUALN_STORAGE(N) double d[CR__DUALN_LANES(N)]
#define CR__DUALN_UNITS(N)   CR__DUALN_LANES(N)
#define CR__DUALN_U(x)       ((x).d)
CR__DUAL_INLINE double cr__dualn_zero(void)
{
    return 0.0;
}
CR__DUAL_INLINE double cr__dualn_load(const double *d, size_t k, size_t n)
{
    return k < n ? d[k] : 0.0;
}
CR__DUAL_INLINE double cr__dualn_seed(size_t k, size_t dir)
{
    return k == dir ? 1.0 : 0.0;
}
#endif

/* The operations of a CR_DUALN_DEFINE type, one per row (see CR__DUAL_ROWS): the row's
 * value and partials, computed once, then one loop over the units of the directions on
 * the operands' own tangents. */
#define CR__DUALN_1(TYPE, N, NAME)                                                   \
    CR__DUALN_INLINE TYPE TYPE##_##NAME(TYPE a)                                      \
    {                                                                                \
        double cr__x[1], cr__Y[1], cr__D[1];                                         \
        TYPE cr__r;                                                                  \
        cr__x[0] = a.v;                                                              \
        cr__dual_row_##NAME(cr__x, cr__Y, cr__D);                                    \
        cr__r.v = cr__Y[0];                                                          \
        CR__DUALN_UNROLL for (size_t cr__i = 0; cr__i < CR__DUALN_UNITS(N); cr__i++) \
            CR__DUALN_U(cr__r)[cr__i] = cr__D[0] * CR__DUALN_U(a)[cr__i];            \
        return cr__r;                                                                \
    }
#define CR__DUALN_2(TYPE, N, NAME)                                                   \
    CR__DUALN_INLINE TYPE TYPE##_##NAME(TYPE a, TYPE b)                              \
    {                                                                                \
        double cr__x[2], cr__Y[1], cr__D[2];                                         \
        TYPE cr__r;                                                                  \
        cr__x[0] = a.v;                                                              \
        cr__x[1] = b.v;                                                              \
        cr__dual_row_##NAME(cr__x, cr__Y, cr__D);                                    \
        cr__r.v = cr__Y[0];                                                          \
        CR__DUALN_UNROLL for (size_t cr__i = 0; cr__i < CR__DUALN_UNITS(N); cr__i++) \
            CR__DUALN_U(cr__r)[cr__i] =                                              \
                cr__D[0] * CR__DUALN_U(a)[cr__i] + cr__D[1] * CR__DUALN_U(b)[cr__i]; \
        return cr__r;                                                                \
    }
#define CR__DUALN_3(TYPE, N, NAME)                                                    \
    CR__DUALN_INLINE TYPE TYPE##_##NAME(TYPE a, TYPE b, TYPE c)                       \
    {                                                                                 \
        double cr__x[3], cr__Y[1], cr__D[3];                                          \
        TYPE cr__r;                                                                   \
        cr__x[0] = a.v;                                                               \
        cr__x[1] = b.v;                                                               \
        cr__x[2] = c.v;                                                               \
        cr__dual_row_##NAME(cr__x, cr__Y, cr__D);                                     \
        cr__r.v = cr__Y[0];                                                           \
        CR__DUALN_UNROLL for (size_t cr__i = 0; cr__i < CR__DUALN_UNITS(N); cr__i++)  \
            CR__DUALN_U(cr__r)[cr__i] =                                               \
                cr__D[0] * CR__DUALN_U(a)[cr__i] + cr__D[1] * CR__DUALN_U(b)[cr__i] + \
                cr__D[2] * CR__DUALN_U(c)[cr__i];                                     \
        return cr__r;                                                                 \
    }
#define CR__DUALN_M(TYPE, N, NAME, NOUT)                                                 \
    CR__DUALN_INLINE void TYPE##_##NAME(TYPE a, TYPE *y)                                 \
    {                                                                                    \
        double cr__x[1], cr__Y[NOUT], cr__D[NOUT];                                       \
        cr__x[0] = a.v;                                                                  \
        cr__dual_row_##NAME(cr__x, cr__Y, cr__D);                                        \
        for (size_t cr__k = 0; cr__k < (NOUT); cr__k++) {                                \
            y[cr__k].v = cr__Y[cr__k];                                                   \
            CR__DUALN_UNROLL for (size_t cr__i = 0; cr__i < CR__DUALN_UNITS(N); cr__i++) \
                CR__DUALN_U(y[cr__k])[cr__i] = cr__D[cr__k] * CR__DUALN_U(a)[cr__i];     \
        }                                                                                \
    }
/** @endcond */

/**
 * Defines a dual type TYPE with N directions fixed at compile time (N >= 1, a constant
 * expression) and its operations, all `static inline`. Use it once per type, at file
 * scope, followed by a semicolon, in any number of translation units:
 *
 * - `typedef struct TYPE { double d[L]; double v; } TYPE;`: the tangents d[0..N) (L is N
 *   rounded up to a multiple of 4; d[N..L) are zero and stay zero) and the value v. With
 *   GCC and Clang, d shares an anonymous union with the private SIMD units the operations
 *   work on, and the type is aligned to 16 bytes, so that its size and layout are the same
 *   for every target option (CR_DUALN_NO_SIMD, defined before the include, selects loops
 *   over doubles instead, with the same layout);
 * - `TYPE TYPE_const(double v)`: tangents 0;
 * - `TYPE TYPE_var(double v, size_t dir)`: tangent 1 along dir, 0 along the others (a
 *   constant when dir >= N);
 * - `TYPE TYPE_make(double v, const double *d)`: the tangents d[0..N);
 * - `TYPE TYPE_chain(double v, size_t n, const double *dv_du, const TYPE *u)`: the value v
 *   of a function of n intermediates u[0..n), whose partials with respect to them are
 *   dv_du[0..n), with the tangents of the chain rule, Σ_k dv_du[k] u[k].d (IEEE products,
 *   in the order of k). It composes Jacobians evaluated on different dual types: evaluate
 *   a stage of a function on a type with one direction per input of the stage (seeded
 *   with TYPE_var), and TYPE_chain carries the tangents of its results, dv_du being their
 *   d[], back to the directions of the type on which those inputs were computed
 *   (docs/forward-mode.md, "Stages on narrower duals");
 * - `TYPE TYPE_NAME(TYPE a, ...)` for every row NAME of one result (TYPE_add, TYPE_sin,
 *   TYPE_atan2, TYPE_muladd, ...) and `void TYPE_NAME(TYPE a, TYPE *y)` for the rows of
 *   several results (TYPE_sincos writes y[0], y[1]).
 */
#define CR_DUALN_DEFINE(TYPE, N)                                                               \
    typedef struct CR__DUALN_ALIGNED TYPE {                                                    \
        CR__DUALN_STORAGE(N);                                                                  \
        double v;                                                                              \
    } TYPE;                                                                                    \
    CR__DUALN_INLINE TYPE TYPE##_const(double v)                                               \
    {                                                                                          \
        TYPE cr__r;                                                                            \
        cr__r.v = v;                                                                           \
        for (size_t cr__i = 0; cr__i < CR__DUALN_UNITS(N); cr__i++)                            \
            CR__DUALN_U(cr__r)[cr__i] = cr__dualn_zero();                                      \
        return cr__r;                                                                          \
    }                                                                                          \
    CR__DUALN_INLINE TYPE TYPE##_var(double v, size_t dir)                                     \
    {                                                                                          \
        TYPE cr__r;                                                                            \
        cr__r.v = v;                                                                           \
        if (dir >= (size_t)(N))                                                                \
            dir = CR__DUALN_LANES(N);                                                          \
        for (size_t cr__i = 0; cr__i < CR__DUALN_UNITS(N); cr__i++)                            \
            CR__DUALN_U(cr__r)[cr__i] = cr__dualn_seed(cr__i, dir);                            \
        return cr__r;                                                                          \
    }                                                                                          \
    CR__DUALN_INLINE TYPE TYPE##_make(double v, const double *d)                               \
    {                                                                                          \
        TYPE cr__r;                                                                            \
        cr__r.v = v;                                                                           \
        for (size_t cr__i = 0; cr__i < CR__DUALN_UNITS(N); cr__i++)                            \
            CR__DUALN_U(cr__r)[cr__i] = cr__dualn_load(d, cr__i, (size_t)(N));                 \
        return cr__r;                                                                          \
    }                                                                                          \
    CR__DUALN_INLINE TYPE TYPE##_chain(double v, size_t n, const double *dv_du, const TYPE *u) \
    {                                                                                          \
        TYPE cr__r;                                                                            \
        cr__r.v = v;                                                                           \
        CR__DUALN_UNROLL for (size_t cr__i = 0; cr__i < CR__DUALN_UNITS(N); cr__i++)           \
            CR__DUALN_U(cr__r)[cr__i] = cr__dualn_zero();                                      \
        for (size_t cr__k = 0; cr__k < n; cr__k++) {                                           \
            double cr__p = dv_du[cr__k];                                                       \
            CR__DUALN_UNROLL for (size_t cr__i = 0; cr__i < CR__DUALN_UNITS(N); cr__i++)       \
                CR__DUALN_U(cr__r)[cr__i] += cr__p * CR__DUALN_U(u[cr__k])[cr__i];             \
        }                                                                                      \
        return cr__r;                                                                          \
    }                                                                                          \
    CR__DUAL_ROWS(CR__DUALN_1, CR__DUALN_2, CR__DUALN_3, CR__DUALN_M, TYPE, N)                 \
    typedef int TYPE##_cr__dualn_end

CR_END_DECLS

#include "dual_inline_rows.h"

#endif /* CR_DUAL_INLINE_H */
