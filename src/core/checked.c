/*
 * The checked-arithmetic helpers that record CR_EOVERFLOW (core_impl.h; the arithmetic
 * itself is in checked.h). Off every hot path: they run where a shape or a count enters
 * the library, once a call.
 */
#include <inttypes.h>
#include <stdio.h>

#include "core_impl.h"

static const char *name_of(const char *who)
{
    return who != NULL ? who : "chainrules";
}

cr_status cr__ck_numel(cr_ctx *ctx, const char *who, size_t ndim, const size_t *shape,
                       size_t elsize, size_t *out)
{
    if (cr__shape_numel(ndim, shape, elsize, out))
        return CR_OK;
    char buf[CR_ARRAY_MAX_DIMS * 24 + 8];
    size_t k = 0;
    buf[0] = '\0';
    for (size_t d = 0; d < ndim && d < CR_ARRAY_MAX_DIMS && k < sizeof buf; d++) {
        int w = snprintf(buf + k, sizeof buf - k, "%s%zu", d ? " x " : "", shape[d]);
        if (w < 0)
            break;
        k += (size_t)w;
    }
    if (elsize != 0)
        return cr_ctx_error(ctx, CR_EOVERFLOW,
                            "%s: shape %s of %zu-byte elements overflows (at most %zu byte%s)",
                            name_of(who), buf, elsize, CR__MAX_BYTES, CR__S(CR__MAX_BYTES));
    return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: shape %s overflows (at most %zu element%s)",
                        name_of(who), buf, CR__MAX_BYTES, CR__S(CR__MAX_BYTES));
}

cr_status cr__ck_mul(cr_ctx *ctx, const char *who, size_t a, size_t b, size_t *out)
{
    if (cr__mul_size(a, b, out) && *out <= CR__MAX_BYTES)
        return CR_OK;
    return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: %zu * %zu overflows (at most %zu)", name_of(who), a,
                        b, CR__MAX_BYTES);
}

cr_status cr__ck_add(cr_ctx *ctx, const char *who, size_t a, size_t b, size_t *out)
{
    if (cr__add_size(a, b, out) && *out <= CR__MAX_BYTES)
        return CR_OK;
    return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: %zu + %zu overflows (at most %zu)", name_of(who), a,
                        b, CR__MAX_BYTES);
}

cr_status cr__ck_mul_i64(cr_ctx *ctx, const char *who, int64_t a, int64_t b, int64_t *out)
{
    if (cr__mul_i64(a, b, out))
        return CR_OK;
    return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: %" PRId64 " * %" PRId64 " overflows int64",
                        name_of(who), a, b);
}

cr_status cr__ck_add_i64(cr_ctx *ctx, const char *who, int64_t a, int64_t b, int64_t *out)
{
    if (cr__add_i64(a, b, out))
        return CR_OK;
    return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: %" PRId64 " + %" PRId64 " overflows int64",
                        name_of(who), a, b);
}

cr_status cr__ck_sub_i64(cr_ctx *ctx, const char *who, int64_t a, int64_t b, int64_t *out)
{
    if (cr__sub_i64(a, b, out))
        return CR_OK;
    return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: %" PRId64 " - %" PRId64 " overflows int64",
                        name_of(who), a, b);
}

cr_status cr__ck_neg_i64(cr_ctx *ctx, const char *who, int64_t a, int64_t *out)
{
    if (cr__neg_i64(a, out))
        return CR_OK;
    return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: -(%" PRId64 ") overflows int64", name_of(who), a);
}

cr_status cr__ck_extent(cr_ctx *ctx, const char *who, const char *what, int64_t a, size_t *out)
{
    if (cr__i64_to_size(a, out))
        return CR_OK;
    if (a < 0)
        return cr_ctx_error(ctx, CR_EINVAL, "%s: negative %s %" PRId64, name_of(who), what, a);
    return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: %s %" PRId64 " overflows (at most %zu)",
                        name_of(who), what, a, CR__MAX_BYTES);
}
