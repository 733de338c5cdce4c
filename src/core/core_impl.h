/*
 * Private declarations shared by the core layer: the context's layout, the internal
 * allocation entry point (also the fault-injection point) and error helpers.
 */
#ifndef CR_CORE_IMPL_H
#define CR_CORE_IMPL_H

#include <chainrules/arena.h>
#include <chainrules/ctx.h>
#include <chainrules/status.h>

#if defined(__GNUC__)
#define CR_INTERNAL __attribute__((visibility("hidden")))
#else
#define CR_INTERNAL
#endif

#define CR_ERRMSG_SIZE 512

struct cr_ctx {
    cr_realloc_fn realloc_fn;
    void *alloc_env;
    cr_status errcode;
    bool debug;
    char errmsg[CR_ERRMSG_SIZE];
};

/* Every library allocation goes through these two (the allocation hook of the context). */
CR_INTERNAL void *cr__alloc(cr_ctx *ctx, size_t size);
CR_INTERNAL void cr__free(cr_ctx *ctx, void *ptr, size_t size);

/* Overflow-checked a * b; returns false when it overflows. */
static inline bool cr__mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return false;
    *out = a * b;
    return true;
}

/* ---- Array element access (array.c) ----------------------------------------------- */

#include <chainrules/array.h>
#include <chainrules/tangent.h>

/* Iterates the logical multi-indices of a shape in row-major order, keeping the storage
 * offsets (in elements) of up to three arrays that share that shape. */
typedef struct cr__iter {
    size_t ndim;
    size_t narr;
    size_t count;  /* elements visited so far */
    size_t total;  /* elements in all */
    size_t shape[CR_ARRAY_MAX_DIMS];
    size_t idx[CR_ARRAY_MAX_DIMS];
    ptrdiff_t strides[3][CR_ARRAY_MAX_DIMS];
    ptrdiff_t off[3];
} cr__iter;

/* Set up iteration over the storage of arrays a[0..narr) (same storage shape). */
CR_INTERNAL void cr__iter_init(cr__iter *it, const cr_array *const *a, size_t narr);
/* Advance; returns false after the last element. */
CR_INTERNAL bool cr__iter_next(cr__iter *it);

/* The storage view of an array: a Diagonal's n stored entries as a 1-d array; other
 * arrays unchanged. Elementwise work on two arrays of one structure runs on these. */
CR_INTERNAL cr_array cr__storage_view(const cr_array *a);

CR_INTERNAL cr_complex cr__load(const cr_array *a, ptrdiff_t off);
CR_INTERNAL void cr__store(cr_array *a, ptrdiff_t off, cr_complex v);
CR_INTERNAL double cr__load_real(const cr_array *a, ptrdiff_t off);

/* A dense, contiguous, writable copy of the logical value of a (structure applied),
 * with the given dtype (0 keeps a's). */
CR_INTERNAL cr_status cr__densify(cr_arena *arena, const cr_array *a, cr_dtype dtype,
                                  cr_array **out);

/* Error helpers that record on the arena's context. */
#define CR__FAIL(arena, status, ...) cr_ctx_error(cr_arena_ctx(arena), (status), __VA_ARGS__)
/* Status of a failed arena allocation. */
#define CR__ALLOC_STATUS(arena) cr_ctx_errcode(cr_arena_ctx(arena))

#endif /* CR_CORE_IMPL_H */
