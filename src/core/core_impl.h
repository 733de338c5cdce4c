/*
 * Private declarations shared by the core layer: the context's layout, the internal
 * allocation entry point (also the fault-injection point) and error helpers.
 */
#ifndef CR_CORE_IMPL_H
#define CR_CORE_IMPL_H

#include <string.h>

#include <chainrules/arena.h>
#include <chainrules/ctx.h>
#include <chainrules/status.h>

#if defined(__GNUC__)
#define CR_INTERNAL __attribute__((visibility("hidden")))
#else
#define CR_INTERNAL
#endif

#define CR_ERRMSG_SIZE 512

/* A block kept in a context's quarantine (CR_CTX_CHECK_FREED): released by cr_ctx_free.
 * The node lives inside the block. */
typedef struct cr__qnode {
    struct cr__qnode *next;
    void *ptr;
    size_t size;
} cr__qnode;

struct cr_ctx {
    cr_realloc_fn realloc_fn;
    void *alloc_env;
    cr_status errcode;
    bool debug;
    char errmsg[CR_ERRMSG_SIZE];
    /* Misuse checks (cr_ctx_params.checks, CR_CTX_CHECK_*): tapes alive, freed tapes kept
     * poisoned, and whether cr_ctx_free was called while tapes were alive. */
    uint32_t checks;
    bool dead;
    size_t live_tapes;
    cr__qnode *quarantine;
};

/* Put a freed block in the context's quarantine (node inside it), and note that a checked
 * object of the context is gone: releases the context when cr_ctx_free was called before
 * and it was the last. */
CR_INTERNAL void cr__ctx_quarantine(cr_ctx *ctx, cr__qnode *node, void *ptr, size_t size);

/* Every library allocation goes through these two (the allocation hook of the context). */
CR_INTERNAL void *cr__alloc(cr_ctx *ctx, size_t size);
CR_INTERNAL void cr__free(cr_ctx *ctx, void *ptr, size_t size);
/* cr__alloc that records no error on failure: for what the caller can do without (a cache,
 * a workspace it can take elsewhere). */
CR_INTERNAL void *cr__alloc_quiet(cr_ctx *ctx, size_t size);

/* Copies a caller's parameter struct (params, NULL for the defaults) into *out of size bytes,
 * zeroed first. The struct starts with its uint32_t struct_size, 0 meaning this version;
 * any other size than `size` is refused with CR_EINVAL and a message naming who. */
CR_INTERNAL cr_status cr__params_copy(cr_ctx *ctx, const char *who, const void *params, void *out,
                                      size_t size);

/* ---- Checked arithmetic (checked.h; these record the error, checked.c) --------------- */

#include "checked.h"

/* Each returns CR_OK, or records CR_EOVERFLOW on ctx with a message naming `who` and the
 * operands ("fill: shape 4294967296 x 4294967296 overflows ...") and returns it. */
/* The element count of a shape (cr__shape_numel), elsize bytes an element (0: any). */
CR_INTERNAL cr_status cr__ck_numel(cr_ctx *ctx, const char *who, size_t ndim, const size_t *shape,
                                   size_t elsize, size_t *out);
/* a * b, and a + b, as sizes no larger than CR__MAX_BYTES. */
CR_INTERNAL cr_status cr__ck_mul(cr_ctx *ctx, const char *who, size_t a, size_t b, size_t *out);
CR_INTERNAL cr_status cr__ck_add(cr_ctx *ctx, const char *who, size_t a, size_t b, size_t *out);
/* a * b, a + b, a - b and -a in int64_t. */
CR_INTERNAL cr_status cr__ck_mul_i64(cr_ctx *ctx, const char *who, int64_t a, int64_t b,
                                     int64_t *out);
CR_INTERNAL cr_status cr__ck_add_i64(cr_ctx *ctx, const char *who, int64_t a, int64_t b,
                                     int64_t *out);
CR_INTERNAL cr_status cr__ck_sub_i64(cr_ctx *ctx, const char *who, int64_t a, int64_t b,
                                     int64_t *out);
CR_INTERNAL cr_status cr__ck_neg_i64(cr_ctx *ctx, const char *who, int64_t a, int64_t *out);
/* An int64_t extent or count as a size_t: CR_EINVAL when negative ("who: negative
 * <what> -3"), CR_EOVERFLOW beyond CR__MAX_BYTES. */
CR_INTERNAL cr_status cr__ck_extent(cr_ctx *ctx, const char *who, const char *what, int64_t a,
                                    size_t *out);

/* Whether msg starts with "name:", i.e. names the function already (a message that is
 * prefixed with the function's name must not name it twice: "view: view: ..."). */
static inline bool cr__names(const char *msg, const char *name)
{
    size_t n = strlen(name);
    return strncmp(msg, name, n) == 0 && msg[n] == ':';
}

/* msg without its leading "name: " when it has one (cr__names): where a message that
 * already names the function is put after a text naming it, the name is said once. */
static inline const char *cr__after_name(const char *msg, const char *name)
{
    if (name == NULL || !cr__names(msg, name))
        return msg;
    msg += strlen(name) + 1;
    return *msg == ' ' ? msg + 1 : msg;
}

/* The plural ending of a count in a message: "%zu argument%s", n, CR__S(n). */
#define CR__S(n) ((n) == 1 ? "" : "s")

/* ---- Arenas (arena.c) ------------------------------------------------------------- */

/* A block of an arena: its data follows the header (or is the caller's fixed buffer). */
typedef struct cr__block {
    struct cr__block *next;
    size_t size; /* usable bytes after the header */
    bool owned;  /* false for the caller's fixed buffer */
} cr__block;

typedef struct cr__defer_node {
    struct cr__defer_node *prev;
    void (*fn)(void *env);
    void *env;
} cr__defer_node;

struct cr_arena {
    cr_ctx *ctx;
    cr__block *first;
    cr__block *cur;
    size_t used; /* bytes used in cur */
    /* cur's data and usable size (NULL and 0 without a current block), for the inline path */
    unsigned char *cur_data;
    size_t cur_size;
    size_t next_size; /* size of the next block to allocate */
    /* Bytes used in blocks before cur. Not next to used: cr_arena_rewind copies the two
     * from its by-value mark, and as neighbours the compiler merges the copies into one
     * 16-byte load, which stalls on the caller's two 8-byte stores of the argument. */
    size_t total;
    bool fixed;            /* caller buffer: never grows */
    cr__block fixed_block; /* descriptor of the caller buffer */
    unsigned char *fixed_data;
    cr__defer_node *defers;
    size_t ndefer;
};

/* The block header is padded so that block data starts CR_ARENA_ALIGN-aligned. */
#define CR__ARENA_HEADER \
    (((sizeof(cr__block) + CR_ARENA_ALIGN - 1) / CR_ARENA_ALIGN) * CR_ARENA_ALIGN)

static inline unsigned char *cr__block_data(cr_arena *a, cr__block *b)
{
    if (b == &a->fixed_block)
        return a->fixed_data;
    return (unsigned char *)b + CR__ARENA_HEADER;
}

/* Make b (or nothing) the current block, keeping the inline path's copy of its extent. */
static inline void cr__arena_set_cur(cr_arena *a, cr__block *b)
{
    a->cur = b;
    a->cur_data = b != NULL ? cr__block_data(a, b) : NULL;
    a->cur_size = b != NULL ? b->size : 0;
}

/* Bytes that an allocation aligned to `align` (a power of two, at most CR_ARENA_ALIGN) can
 * take from a caller-buffer arena; SIZE_MAX for an arena that grows. A caller that can make
 * do with less asks for what fits instead of failing an attempt first: a failed allocation
 * records CR_EARENA on the context, which would stay there after the call succeeded. */
static inline size_t cr__arena_room(const cr_arena *a, size_t align)
{
    if (a == NULL || !a->fixed)
        return SIZE_MAX;
    size_t o = (a->used + align - 1) & ~(align - 1);
    return o <= a->cur_size ? a->cur_size - o : 0;
}

/*
 * cr_arena_alloc's common case inline: the request fits in the current block. Anything
 * else (a new block, a bad alignment, size 0, no arena) goes to the function, which does
 * exactly what it always did. Inside the library cr_arena_alloc names this.
 */
static inline void *cr__arena_alloc(cr_arena *arena, size_t size, size_t align)
{
    size_t al = align == 0 ? CR_ARENA_ALIGN : align;
    if (arena != NULL && size != 0 && al <= CR_ARENA_ALIGN && (al & (al - 1)) == 0) {
        size_t o = (arena->used + al - 1) & ~(al - 1);
        if (o <= arena->cur_size && size <= arena->cur_size - o) {
            arena->used = o + size;
            return arena->cur_data + o;
        }
    }
    return (cr_arena_alloc)(arena, size, align);
}

/* cr_arena_calloc inline (the product checked as the function checks it). */
static inline void *cr__arena_calloc(cr_arena *arena, size_t count, size_t size, size_t align)
{
    size_t n;
    if (!cr__mul_size(count, size, &n))
        return (cr_arena_calloc)(arena, count, size, align);
    void *p = cr__arena_alloc(arena, n, align);
    if (p != NULL)
        memset(p, 0, n);
    return p;
}

/* cr_arena_get_mark and cr_arena_rewind inline; a rewind that has cleanups to run, or
 * goes back to before the first block, calls the function. */
static inline cr_arena_mark cr__arena_get_mark(const cr_arena *arena)
{
    cr_arena_mark m = {0};
    if (arena != NULL) {
        m.block = arena->cur;
        m.used = arena->used;
        m.total = arena->total;
        m.ndefer = arena->ndefer;
    }
    return m;
}

static inline void cr__arena_rewind(cr_arena *arena, cr_arena_mark mark)
{
    if (arena != NULL && mark.block != NULL && arena->ndefer == mark.ndefer) {
        if (arena->cur != mark.block)
            cr__arena_set_cur(arena, mark.block);
        arena->used = mark.used;
        arena->total = mark.total;
        return;
    }
    (cr_arena_rewind)(arena, mark);
}

/* cr_arena_reset inline when there is nothing to undo but the offsets: no cleanups to run
 * and the first block current (its data and size are then cur_data and cur_size already).
 * A tape resets its arena at each recording. */
static inline void cr__arena_reset(cr_arena *arena)
{
    if (arena != NULL && arena->ndefer == 0 && arena->cur == arena->first) {
        arena->used = 0;
        arena->total = 0;
        return;
    }
    (cr_arena_reset)(arena);
}

#ifndef CR__ARENA_IMPL
#define cr_arena_reset(arena)              cr__arena_reset(arena)
#define cr_arena_alloc(arena, size, align) cr__arena_alloc((arena), (size), (align))
#define cr_arena_calloc(arena, count, size, align) \
    cr__arena_calloc((arena), (count), (size), (align))
#define cr_arena_get_mark(arena)     cr__arena_get_mark(arena)
#define cr_arena_rewind(arena, mark) cr__arena_rewind((arena), (mark))
#endif

/* ---- Array element access (array.c) ----------------------------------------------- */

#include <chainrules/array.h>
#include <chainrules/tangent.h>

/* Small array queries inline (inside the library the public names call these). */
static inline size_t cr__dtype_size(cr_dtype dtype)
{
    static const unsigned char size[] = {
        0, sizeof(double), sizeof(float), sizeof(cr_complex), sizeof(int64_t), sizeof(bool)};
    return (unsigned)dtype < sizeof size ? size[dtype] : 0;
}

static inline bool cr__dtype_is_float(cr_dtype dtype)
{
    return dtype == CR_DT_F64 || dtype == CR_DT_F32 || dtype == CR_DT_C128;
}

static inline size_t cr__array_numel(const cr_array *a)
{
    size_t n = 1;
    for (size_t d = 0; d < a->ndim; d++)
        n *= a->shape[d];
    return n;
}

static inline bool cr__array_is_contiguous(const cr_array *a)
{
    if (a->structure == CR_MAT_DIAGONAL)
        return a->strides[0] == 1 || a->shape[0] <= 1;
    ptrdiff_t s = 1;
    for (size_t d = a->ndim; d-- > 0;) {
        if (a->shape[d] != 1 && a->strides[d] != s)
            return false;
        s *= (ptrdiff_t)a->shape[d];
    }
    return true;
}

#ifndef CR__ARRAY_IMPL
#define cr_dtype_size(dtype)      cr__dtype_size(dtype)
#define cr_dtype_is_float(dtype)  cr__dtype_is_float(dtype)
#define cr_array_numel(a)         cr__array_numel(a)
#define cr_array_is_contiguous(a) cr__array_is_contiguous(a)
#endif

/* Iterates the logical multi-indices of a shape in row-major order, keeping the storage
 * offsets (in elements) of up to three arrays that share that shape. */
typedef struct cr__iter {
    size_t ndim;
    size_t narr;
    size_t count; /* elements visited so far */
    size_t total; /* elements in all */
    size_t shape[CR_ARRAY_MAX_DIMS];
    size_t idx[CR_ARRAY_MAX_DIMS];
    ptrdiff_t strides[3][CR_ARRAY_MAX_DIMS];
    ptrdiff_t off[3];
} cr__iter;

/* Set up iteration over the storage of arrays a[0..narr) (same storage shape). */
CR_INTERNAL void cr__iter_init(cr__iter *it, const cr_array *const *a, size_t narr);
/* Advance; returns false after the last element. */
CR_INTERNAL bool cr__iter_next(cr__iter *it);

/* How the logical element (i, j) of a square matrix of structure s (any tag but DENSE and
 * DIAGONAL, whose storage differs) is read: the stored element (*r, *c) as it is
 * (CR__RD_SELF), conjugated (CR__RD_CONJ) or its real part (CR__RD_REAL); or the constant 0
 * (CR__RD_ZERO) or 1 (CR__RD_ONE), with (*r, *c) = (i, j). The storage conventions of array.h. */
typedef enum cr__rd { CR__RD_ZERO, CR__RD_ONE, CR__RD_SELF, CR__RD_CONJ, CR__RD_REAL } cr__rd;

static inline cr__rd cr__struct_read(uint8_t s, size_t i, size_t j, size_t *r, size_t *c)
{
    bool lo = i > j, up = i < j;
    *r = i;
    *c = j;
    switch ((cr_matstruct)s) {
    case CR_MAT_UPPER:
        return lo ? CR__RD_ZERO : CR__RD_SELF;
    case CR_MAT_LOWER:
        return up ? CR__RD_ZERO : CR__RD_SELF;
    case CR_MAT_SYMMETRIC:
    case CR_MAT_HERMITIAN:
    case CR_MAT_SYMMETRIC_LOWER:
    case CR_MAT_HERMITIAN_LOWER: {
        bool upper_read = s == CR_MAT_SYMMETRIC || s == CR_MAT_HERMITIAN;
        bool herm = s == CR_MAT_HERMITIAN || s == CR_MAT_HERMITIAN_LOWER;
        if (herm && i == j)
            return CR__RD_REAL;
        if (upper_read ? lo : up) {
            *r = j;
            *c = i;
            return herm ? CR__RD_CONJ : CR__RD_SELF;
        }
        return CR__RD_SELF;
    }
    case CR_MAT_TRIDIAGONAL:
        return i <= j + 1 && j <= i + 1 ? CR__RD_SELF : CR__RD_ZERO;
    case CR_MAT_SYMTRIDIAGONAL:
        if (i == j + 1) {
            *r = j;
            *c = i;
            return CR__RD_SELF;
        }
        return j == i || j == i + 1 ? CR__RD_SELF : CR__RD_ZERO;
    case CR_MAT_BIDIAG_UPPER:
        return j == i || j == i + 1 ? CR__RD_SELF : CR__RD_ZERO;
    case CR_MAT_BIDIAG_LOWER:
        return i == j || i == j + 1 ? CR__RD_SELF : CR__RD_ZERO;
    case CR_MAT_UNIT_UPPER:
        return i == j ? CR__RD_ONE : up ? CR__RD_SELF : CR__RD_ZERO;
    case CR_MAT_UNIT_LOWER:
        return i == j ? CR__RD_ONE : lo ? CR__RD_SELF : CR__RD_ZERO;
    case CR_MAT_DIAGONAL:
        return i == j ? CR__RD_SELF : CR__RD_ZERO;
    case CR_MAT_DENSE:
        break;
    }
    return CR__RD_SELF;
}

/* Whether a structure has a constant unit diagonal (not closed under + and scaling). */
static inline bool cr__struct_unit(uint8_t s)
{
    return s == CR_MAT_UNIT_UPPER || s == CR_MAT_UNIT_LOWER;
}

/* The structure of the tangents of a primal of structure s: Upper / Lower (with a zero
 * diagonal) for the unit triangles, s itself otherwise. */
static inline uint8_t cr__matstruct_tangent(uint8_t s)
{
    return s == CR_MAT_UNIT_UPPER   ? (uint8_t)CR_MAT_UPPER
           : s == CR_MAT_UNIT_LOWER ? (uint8_t)CR_MAT_LOWER
                                    : s;
}

/* Whether a structure is Hermitian (upper or lower triangle read). */
static inline bool cr__struct_herm(uint8_t s)
{
    return s == CR_MAT_HERMITIAN || s == CR_MAT_HERMITIAN_LOWER;
}

/* The storage view of an array: a Diagonal's n stored entries as a 1-d array; other
 * arrays unchanged. Elementwise work on two arrays of one structure runs on these. */
CR_INTERNAL cr_array cr__storage_view(const cr_array *a);

CR_INTERNAL cr_complex cr__load(const cr_array *a, ptrdiff_t off);
CR_INTERNAL void cr__store(cr_array *a, ptrdiff_t off, cr_complex v);

/* A dense, contiguous, writable copy of the logical value of a (structure applied),
 * with the given dtype (0 keeps a's). */
CR_INTERNAL cr_status cr__densify(cr_arena *arena, const cr_array *a, cr_dtype dtype,
                                  cr_array **out);

/* Error helpers that record on the arena's context. */
#define CR__FAIL(arena, status, ...) cr_ctx_error(cr_arena_ctx(arena), (status), __VA_ARGS__)
/* Status of a failed arena allocation. */
#define CR__ALLOC_STATUS(arena) cr_ctx_errcode(cr_arena_ctx(arena))

/* n elements of size bytes (at least one element, so that n == 0 gives a valid pointer),
 * for a count that comes from a caller: NULL with CR_EOVERFLOW naming who when n * size
 * exceeds CR__MAX_BYTES, NULL with the arena's status when the allocation fails. */
static inline void *cr__arena_array(cr_arena *arena, const char *who, size_t n, size_t size,
                                    size_t align)
{
    size_t bytes;
    if (cr__ck_mul(cr_arena_ctx(arena), who, n ? n : 1, size, &bytes) != CR_OK)
        return NULL;
    return cr_arena_alloc(arena, bytes, align);
}

#endif /* CR_CORE_IMPL_H */
