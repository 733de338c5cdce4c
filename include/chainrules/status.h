/**
 * @file status.h
 * @brief Status codes returned by every fallible chainrules call.
 *
 * The codes, their names and their messages come from one X-macro, `CR_STATUS_MAP`, so
 * they cannot drift apart. `CR_OK` is 0; every error is positive. `CR_NOTHING` (-1) is
 * not an error: it is what cr_frule() and cr_rrule() return when no rule applies (Julia's
 * `nothing`), so that the caller differentiates the function itself; no error is recorded. Details
 * of the last error (which function, which signature, which pullback) live on the context: see
 * cr_ctx_errmsg().
 *
 * @code
 * cr_status st = cr_arena_new(ctx, NULL, &arena);
 * if (st != CR_OK)
 *     fprintf(stderr, "%s: %s\n", cr_status_name(st), cr_ctx_errmsg(ctx));
 * @endcode
 */
#ifndef CR_STATUS_H
#define CR_STATUS_H

#include "common.h"

CR_BEGIN_DECLS

/**
 * The status map: X(name, value, message). Append only; values never change.
 */
#define CR_STATUS_MAP(X)                                                          \
    X(CR_NOTHING, -1, "no rule: the AD should differentiate the function itself") \
    X(CR_OK, 0, "success")                                                        \
    X(CR_ENOMEM, 1, "out of memory")                                              \
    X(CR_EINVAL, 2, "invalid argument")                                           \
    X(CR_EMISUSE, 3, "library used incorrectly")                                  \
    X(CR_ENORULE, 4, "no rule for this function and signature")                   \
    X(CR_ENONDIFF, 5, "function is not differentiable")                           \
    X(CR_ESHAPE, 6, "non-conformant shapes")                                      \
    X(CR_EDOMAIN, 7, "argument outside the domain of the function")               \
    X(CR_ETANGENT, 8, "tangent of the wrong kind for this primal")                \
    X(CR_EARENA, 9, "fixed-size arena is full")                                   \
    X(CR_EBACKEND, 10, "BLAS/LAPACK reported an error")                           \
    X(CR_EUNIMPL, 11, "derivative not implemented")                               \
    X(CR_ENOCAP, 12, "rule configuration lacks a required capability")            \
    X(CR_EOVERFLOW, 13, "size computation overflows")                             \
    X(CR_ETAPE, 14, "variable belongs to another tape, or the tape has failed")   \
    X(CR_ECOMM, 15, "communication failed, on this process or on another")        \
    X(CR_ENONFINITE, 16, "non-finite value from finite inputs")

/** Status code: `CR_OK` (0) on success, a positive error code otherwise. */
typedef enum cr_status {
#define CR__STATUS_ENUM(name, value, msg) name = value,
    CR_STATUS_MAP(CR__STATUS_ENUM)
#undef CR__STATUS_ENUM
} cr_status;

/**
 * The name of a status code, e.g. "CR_ENOMEM".
 * @param[in] status any value; unknown values give "CR_UNKNOWN".
 * @return a static string; never NULL.
 * @note Thread-safe.
 */
CR_API const char *cr_status_name(cr_status status);

/**
 * A one-line English description of a status code, e.g. "out of memory".
 * @param[in] status any value; unknown values give "unknown status".
 * @return a static string; never NULL.
 * @note Thread-safe.
 */
CR_API const char *cr_status_str(cr_status status);

CR_END_DECLS

#endif /* CR_STATUS_H */
