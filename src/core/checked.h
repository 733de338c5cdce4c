/*
 * Checked integer arithmetic: the one set of helpers through which every count, extent,
 * stride, offset and byte size that comes from a caller is multiplied, added or negated.
 * Each returns false when the exact result does not fit its type (and then leaves *out
 * unspecified); none has undefined behaviour for any operands.
 *
 * Header-only and free of library types, so that the tools (tools/eval_json.c,
 * tools/chainrules_eval.c) use the same helpers as the library. The library's helpers that
 * also record CR_EOVERFLOW with a message naming the function and the operands are
 * cr__ck_* in core_impl.h.
 *
 * The library keeps one invariant on top of these: an array's element count, and its byte
 * count, fit in ptrdiff_t (CR__MAX_BYTES), so that a product of the extents of an array that
 * exists, a linear index into it or an offset in bytes never overflows a size_t, int64_t or
 * ptrdiff_t. cr__shape_numel checks it. tools/check_products.py fails on any raw product of
 * integer operands that tools/check_products.allow does not list with the reason it cannot
 * overflow (docs/reliability.md, "Raw products").
 */
#ifndef CR_CHECKED_H
#define CR_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest element or byte count of an array. */
#define CR__MAX_BYTES ((size_t)PTRDIFF_MAX)

#if defined(__GNUC__) || defined(__clang__)
#define CR__HAVE_BUILTIN_OVERFLOW 1
#endif

/* static inline bool NAME(T a, T b, T *out): *out = a OP b, false when the exact result does
 * not fit T. With the compiler's BUILTIN (__builtin_*_overflow); otherwise the portable
 * test OVERFLOWS, of a and b, comes first and the operation runs only when it is false. */
#ifdef CR__HAVE_BUILTIN_OVERFLOW
#define CR__CHECKED_OP(NAME, T, BUILTIN, OP, OVERFLOWS) \
    static inline bool NAME(T a, T b, T *out)           \
    {                                                   \
        return !BUILTIN(a, b, out);                     \
    }
#else
#define CR__CHECKED_OP(NAME, T, BUILTIN, OP, OVERFLOWS) \
    static inline bool NAME(T a, T b, T *out)           \
    {                                                   \
        if (OVERFLOWS)                                  \
            return false;                               \
        *out = a OP b;                                  \
        return true;                                    \
    }
#endif

/* a * b in size_t. */
CR__CHECKED_OP(cr__mul_size, size_t, __builtin_mul_overflow, *, a != 0 && b > SIZE_MAX / a)

/* a + b in size_t. */
CR__CHECKED_OP(cr__add_size, size_t, __builtin_add_overflow, +, b > SIZE_MAX - a)

/* a * b in int64_t (a zero operand never overflows; the quotients below are exact tests). */
CR__CHECKED_OP(cr__mul_i64, int64_t, __builtin_mul_overflow, *,
               a != 0 && b != 0 &&
                   ((a == -1 && b == INT64_MIN) || (b == -1 && a == INT64_MIN) ||
                    (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
                           : (b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b))))

/* a + b in int64_t. */
CR__CHECKED_OP(cr__add_i64, int64_t, __builtin_add_overflow, +,
               (b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))

/* a - b in int64_t. */
CR__CHECKED_OP(cr__sub_i64, int64_t, __builtin_sub_overflow, -,
               (b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b))

/* -a in int64_t (false for INT64_MIN). */
static inline bool cr__neg_i64(int64_t a, int64_t *out)
{
    if (a == INT64_MIN)
        return false;
    *out = -a;
    return true;
}

/* |a| as a uint64_t: always exact (INT64_MIN gives 2^63). */
static inline uint64_t cr__abs_u64(int64_t a)
{
    return a < 0 ? 0u - (uint64_t)a : (uint64_t)a;
}

/* An int64_t as a size_t extent: false when negative or beyond CR__MAX_BYTES. */
static inline bool cr__i64_to_size(int64_t a, size_t *out)
{
    if (a < 0 || (uint64_t)a > (uint64_t)CR__MAX_BYTES)
        return false;
    *out = (size_t)a;
    return true;
}

/* The element count of a shape, checked to fit CR__MAX_BYTES together with its byte count
 * at elsize bytes an element (0: the count alone). The product is taken with extents 0
 * counted as 1, so that the row-major strides of an empty shape fit as well. */
static inline bool cr__shape_numel(size_t ndim, const size_t *shape, size_t elsize, size_t *out)
{
    size_t n = 1, bytes;
    bool empty = false;
    for (size_t d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            empty = true;
        else if (!cr__mul_size(n, shape[d], &n) || n > CR__MAX_BYTES)
            return false;
    }
    if (elsize != 0 && (!cr__mul_size(n, elsize, &bytes) || bytes > CR__MAX_BYTES))
        return false;
    *out = empty ? 0 : n;
    return true;
}

/* The number of elements of the range start:step:stop (stop excluded; step != 0), exact
 * for any operands: the distance is taken in uint64_t, where it cannot wrap. */
static inline uint64_t cr__range_len(int64_t start, int64_t stop, int64_t step)
{
    if (step > 0)
        return stop <= start ? 0 : ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
    return stop >= start ? 0 : ((uint64_t)start - (uint64_t)stop - 1) / cr__abs_u64(step) + 1;
}

#endif /* CR_CHECKED_H */
