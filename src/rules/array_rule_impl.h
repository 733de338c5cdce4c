/*
 * The array helpers shared by the array rule families (src/rulesets) and the engine
 * (src/ad): element work types, arena arrays, canonical dense copies and views, row-major
 * strides, shape strings for messages, canonical (co)tangent arrays and the generic add!.
 * Defined in src/rulesets/array_common.c; the families' own helpers stay in
 * src/rulesets/array_impl.h, which includes this header.
 */
#ifndef CR_ARRAY_RULE_IMPL_H
#define CR_ARRAY_RULE_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include <chainrules/array.h>
#include <chainrules/tangent.h>

#include "../core/core_impl.h"

/* ---- Element types ---------------------------------------------------------------------- */

static inline bool cr__is_cplx(cr_dtype d)
{
    return d == CR_DT_C128;
}

/* The work dtype of an element type: double for real types, complex for c128. */
static inline cr_dtype cr__work(cr_dtype d)
{
    return d == CR_DT_C128 ? CR_DT_C128 : CR_DT_F64;
}

/* ---- Arrays -------------------------------------------------------------------------- */

/* A new contiguous row-major writable array (zero-filled when zero is true). */
CR_INTERNAL cr_status cr__new(cr_arena *arena, cr_dtype dt, size_t ndim, const size_t *shape,
                              bool zero, cr_array **out);

/* A new array of a's shape. */
static inline cr_status cr__new_like(cr_arena *arena, cr_dtype dt, const cr_array *a, bool zero,
                                     cr_array **out)
{
    return cr__new(arena, dt, a->ndim, a->shape, zero, out);
}

/* The logical value of a as a contiguous row-major dense array of dtype wdt: a itself
 * when it already is one, a new arena copy otherwise. Never write through *out unless it
 * is flagged writable and not a. */
CR_INTERNAL cr_status cr__dense(cr_arena *arena, const cr_array *a, cr_dtype wdt,
                                const cr_array **out);

/* The work array w converted to dtype dt (w itself, flagged as it is, when dt is its dtype). */
CR_INTERNAL cr_status cr__cast(cr_arena *arena, const cr_array *w, cr_dtype dt, cr_array **out);

/* A copy of the descriptor a without CR_ARRAY_WRITABLE (a view that add!! will not
 * mutate), in the arena. */
CR_INTERNAL cr_status cr__view_of(cr_arena *arena, const cr_array *a, cr_array **out);

/* Row-major strides of a shape. */
static inline void cr__row_major(size_t ndim, const size_t *shape, ptrdiff_t *strides)
{
    ptrdiff_t s = 1;
    for (size_t d = ndim; d-- > 0;) {
        strides[d] = s;
        s *= (ptrdiff_t)(shape[d] == 0 ? 1 : shape[d]);
    }
}

/* Whether the array is dense (no structure) and contiguous row-major. */
CR_INTERNAL bool cr__is_contig_dense(const cr_array *a);

/* "(3,4)" into buf, for messages. */
CR_INTERNAL const char *cr__shape_str(const cr_array *a, char *buf, size_t size);

/* ---- Tangents ------------------------------------------------------------------------- */

/* A (co)tangent of an array of `shape` canonicalised: unthunked; zeros give NULL; an array
 * with that many elements is read in row-major order into a contiguous array of dtype wdt
 * (borrowed when it already is one; structure applied); a scalar tangent stands for a
 * one-element array. NotImplemented gives CR_EUNIMPL, other kinds CR_ETANGENT. */
CR_INTERNAL cr_status cr__tan_array(cr_arena *arena, const char *who, cr_tangent t, size_t ndim,
                                    const size_t *shape, cr_dtype wdt, const cr_array **out);

/* dest += value of t (evaluated) elementwise; dest is a writable dense array of the
 * shape of t. The generic add! of InplaceableThunks whose fast path does not apply. */
CR_INTERNAL cr_status cr__add_into(cr_arena *arena, cr_array *dest, cr_tangent t);

#endif /* CR_ARRAY_RULE_IMPL_H */
