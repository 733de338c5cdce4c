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
 * - **N directions fixed at compile time**: `CR_DUALN_DEFINE(my_dual, 4)` defines the type
 *   `my_dual` {v, d[4]} and `my_dual_NAME(a, ...)`, whose loops over the N directions have
 *   a constant trip count the compiler unrolls and vectorises.
 * - **n directions chosen at run time**: `cr_dualv_NAME(n, a, da, ..., dy)` takes each
 *   operand as its value and the address of its n tangents, writes the n tangents of the
 *   result to dy and returns its value; the storage is the caller's.
 *
 * Functions of several results (sincos, sincospi, modf, logabsgamma) write their results
 * to an array instead of returning them.
 *
 * @code
 * // d/dx asin(0.2 + sin(x)) at x = 3
 * cr_dual1 x = cr_dual1_var(3.0);
 * cr_dual1 y = cr_dual1_asin(cr_dual1_add(cr_dual1_const(0.2), cr_dual1_sin(x)));
 * // y.v = asin(0.2 + sin(3)), y.d = its derivative
 *
 * // the gradient of f(x, y) = x * exp(y) in one evaluation
 * CR_DUALN_DEFINE(dual2, 2)
 * dual2 a = dual2_var(1.5, 0), b = dual2_var(0.5, 1);
 * dual2 f = dual2_mul(a, dual2_exp(b));   // f.d[0] = ∂f/∂x, f.d[1] = ∂f/∂y
 * @endcode
 *
 * **Zero tangents are strong zeros.** A direction along which an operand does not move
 * contributes nothing to the result, even where the operand's partial is infinite or NaN
 * (the tangent of `x * sqrt(c)` for a constant c = 0 is sqrt(0) = 0, not NaN): the
 * product ∂·ẋ is taken as 0 when ẋ = 0 and the partial is not finite. Finite partials
 * cost no test per direction.
 *
 * **Real only.** The duals hold doubles; the rows' complex instantiations are reached
 * through the rules (cr_frule) and the tape, not through these types.
 *
 * Rows whose text calls private helpers of the library (near hard points, or special
 * functions: atan, pow, erf, digamma, ...) call the library's instantiation of the row, an
 * out-of-line call; the rest of their operation, and every other row, is inline.
 * dual_inline_rows.h says which rows are which.
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
/* The term D·d of a tangent: 0 when d is 0, whatever D (strong zero). A finite D (a
 * constant in the rows of +, -, *) takes the product alone. */
CR__DUAL_INLINE double cr__dual_term(double D, double d)
{
    return isfinite(D) || d != 0.0 ? D * d : 0.0;
}

/* dy[i] = D0 da[i] (+ D1 db[i] (+ D2 dc[i])) for i < n. The test of the partials is made
 * once, out of the loop; dy may be one of the inputs (each i is read before written). */
CR__DUAL_INLINE void cr__dualv_lin1(size_t n, double D0, const double *da, double *dy)
{
    if (isfinite(D0))
        for (size_t i = 0; i < n; i++)
            dy[i] = D0 * da[i];
    else
        for (size_t i = 0; i < n; i++)
            dy[i] = cr__dual_term(D0, da[i]);
}

CR__DUAL_INLINE void cr__dualv_lin2(size_t n, double D0, const double *da, double D1,
                                    const double *db, double *dy)
{
    if (isfinite(D0) && isfinite(D1))
        for (size_t i = 0; i < n; i++)
            dy[i] = D0 * da[i] + D1 * db[i];
    else
        for (size_t i = 0; i < n; i++)
            dy[i] = cr__dual_term(D0, da[i]) + cr__dual_term(D1, db[i]);
}

CR__DUAL_INLINE void cr__dualv_lin3(size_t n, double D0, const double *da, double D1,
                                    const double *db, double D2, const double *dc, double *dy)
{
    if (isfinite(D0) && isfinite(D1) && isfinite(D2))
        for (size_t i = 0; i < n; i++)
            dy[i] = D0 * da[i] + D1 * db[i] + D2 * dc[i];
    else
        for (size_t i = 0; i < n; i++)
            dy[i] = cr__dual_term(D0, da[i]) + cr__dual_term(D1, db[i]) + cr__dual_term(D2, dc[i]);
}

/* The operations of a CR_DUALN_DEFINE type, one per row (see CR__DUAL_ROWS). */
#define CR__DUALN_1(TYPE, N, NAME)                         \
    CR__DUALN_INLINE TYPE TYPE##_##NAME(TYPE a)            \
    {                                                      \
        TYPE cr__r;                                        \
        cr__r.v = cr_dualv_##NAME((N), a.v, a.d, cr__r.d); \
        return cr__r;                                      \
    }
#define CR__DUALN_2(TYPE, N, NAME)                                   \
    CR__DUALN_INLINE TYPE TYPE##_##NAME(TYPE a, TYPE b)              \
    {                                                                \
        TYPE cr__r;                                                  \
        cr__r.v = cr_dualv_##NAME((N), a.v, a.d, b.v, b.d, cr__r.d); \
        return cr__r;                                                \
    }
#define CR__DUALN_3(TYPE, N, NAME)                                             \
    CR__DUALN_INLINE TYPE TYPE##_##NAME(TYPE a, TYPE b, TYPE c)                \
    {                                                                          \
        TYPE cr__r;                                                            \
        cr__r.v = cr_dualv_##NAME((N), a.v, a.d, b.v, b.d, c.v, c.d, cr__r.d); \
        return cr__r;                                                          \
    }
#define CR__DUALN_M(TYPE, N, NAME, NOUT)                                \
    CR__DUALN_INLINE void TYPE##_##NAME(TYPE a, TYPE *y)                \
    {                                                                   \
        double cr__v[NOUT], cr__d[(NOUT) * (N)];                        \
        cr_dualv_##NAME((N), a.v, a.d, cr__v, cr__d);                   \
        for (size_t cr__k = 0; cr__k < (NOUT); cr__k++) {               \
            y[cr__k].v = cr__v[cr__k];                                  \
            for (size_t cr__i = 0; cr__i < (size_t)(N); cr__i++)        \
                y[cr__k].d[cr__i] = cr__d[cr__k * (size_t)(N) + cr__i]; \
        }                                                               \
    }
/** @endcond */

/**
 * Defines a dual type TYPE with N directions fixed at compile time (N >= 1, a constant
 * expression) and its operations, all `static inline`:
 *
 * - `typedef struct TYPE { double v; double d[N]; } TYPE;`
 * - `TYPE TYPE_const(double v)`: tangents 0;
 * - `TYPE TYPE_var(double v, size_t dir)`: tangent 1 along dir, 0 along the others (a
 *   constant when dir >= N);
 * - `TYPE TYPE_make(double v, const double *d)`: the tangents d[0..N);
 * - `TYPE TYPE_NAME(TYPE a, ...)` for every row NAME of one result (TYPE_add, TYPE_sin,
 *   TYPE_atan2, TYPE_muladd, ...) and `void TYPE_NAME(TYPE a, TYPE *y)` for the rows of
 *   several results (TYPE_sincos writes y[0], y[1]).
 *
 * Use it once per type, at file scope, in any number of translation units.
 */
#define CR_DUALN_DEFINE(TYPE, N)                                               \
    typedef struct TYPE {                                                      \
        double v;                                                              \
        double d[N];                                                           \
    } TYPE;                                                                    \
    CR__DUALN_INLINE TYPE TYPE##_const(double v)                               \
    {                                                                          \
        TYPE cr__r;                                                            \
        cr__r.v = v;                                                           \
        for (size_t cr__i = 0; cr__i < (size_t)(N); cr__i++)                   \
            cr__r.d[cr__i] = 0.0;                                              \
        return cr__r;                                                          \
    }                                                                          \
    CR__DUALN_INLINE TYPE TYPE##_var(double v, size_t dir)                     \
    {                                                                          \
        TYPE cr__r = TYPE##_const(v);                                          \
        if (dir < (size_t)(N))                                                 \
            cr__r.d[dir] = 1.0;                                                \
        return cr__r;                                                          \
    }                                                                          \
    CR__DUALN_INLINE TYPE TYPE##_make(double v, const double *d)               \
    {                                                                          \
        TYPE cr__r;                                                            \
        cr__r.v = v;                                                           \
        for (size_t cr__i = 0; cr__i < (size_t)(N); cr__i++)                   \
            cr__r.d[cr__i] = d[cr__i];                                         \
        return cr__r;                                                          \
    }                                                                          \
    CR__DUAL_ROWS(CR__DUALN_1, CR__DUALN_2, CR__DUALN_3, CR__DUALN_M, TYPE, N) \
    typedef int TYPE##_cr__dualn_end

CR_END_DECLS

#include "dual_inline_rows.h"

#endif /* CR_DUAL_INLINE_H */
