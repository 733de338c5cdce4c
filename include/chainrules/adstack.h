/**
 * @file adstack.h
 * @brief The value stack of generated reverse-mode code: a LIFO of 8-byte items that grows
 *        in chunks.
 *
 * The forward sweep of a reverse-mode derivative pushes the values the adjoint sweep will
 * need and that the primal overwrites (and the control flow: branch directions, loop trip
 * counts); the adjoint sweep pops them in the reverse order. Every item takes one 8-byte
 * slot whatever its type (`double`, `int64_t`, `float`, a pointer); an item is popped with
 * the type it was pushed with (popping another type gives unspecified bits, never undefined
 * behaviour).
 *
 * Layout: a doubly linked list of chunks, each a header followed by its slots. The first
 * chunk is allocated by the first push (4 KiB by default), each new chunk doubles the
 * previous one up to a cap (8 MiB by default), so the number of chunks grows with the
 * logarithm of the depth while it is below the cap and linearly beyond. Pops cross back
 * into the previous chunk; a chunk left by pops is kept and reused by the next pushes, and
 * every chunk is freed by cr_adstack_deinit().
 *
 * Speed: push and pop are static inline functions whose common path is one comparison
 * with the current chunk's end (push) or start (pop), the move of the top and one store
 * (load); a pop also keeps the high-water mark (one more comparison, and a store only on
 * the first pop after pushes) so that cr_adstack_peak_bytes() is exact at no cost to
 * pushes. Going to the next chunk and back to the previous one is done out of line by
 * cr_adstack_push_slow() and cr_adstack_pop_slow() (exported functions of the library).
 *
 * Memory: chunks come from `malloc`/`free` (the stack has no cr_ctx), or from the
 * cr_realloc_fn given to cr_adstack_init_ex(). Allocation failure does not stop the caller:
 * the stack is marked failed (cr_adstack_failed()), later pushes are dropped and every
 * later pop returns NaN, 0 or NULL; check cr_adstack_failed() once at the end of the
 * adjoint sweep. A pop on an empty stack (a misuse: generated code never pops more than it
 * pushed) marks the stack failed the same way and returns NaN, 0 or NULL. No input reaches
 * undefined behaviour; a zero-initialised cr_adstack (`cr_adstack st = {0};`, static
 * storage) is an empty stack with the defaults, as after cr_adstack_init().
 *
 * @code
 * cr_adstack st;
 * cr_adstack_init(&st);
 * for (i = 0; i < n; i++) {          // forward sweep: save what is overwritten
 *     cr_adstack_push_f64(&st, x);
 *     x = sin(x) * c[i];
 * }
 * for (i = n; i-- > 0;) {            // adjoint sweep: restore it, last first
 *     x = cr_adstack_pop_f64(&st);
 *     x_b = x_b * c[i] * cos(x);
 * }
 * if (cr_adstack_failed(&st)) { ... }   // out of memory somewhere: x_b is not valid
 * cr_adstack_deinit(&st);
 * @endcode
 *
 * @note A stack is thread-confined: one thread at a time.
 */
#ifndef CR_ADSTACK_H
#define CR_ADSTACK_H

#include "common.h"
#include "ctx.h"
#include "status.h"

CR_BEGIN_DECLS

/** Default size in bytes of the first chunk (header included). */
#define CR_ADSTACK_FIRST_CHUNK ((size_t)4096)
/** Default cap in bytes of a chunk (header included): chunks double up to this size. */
#define CR_ADSTACK_MAX_CHUNK ((size_t)8 << 20)
/** Smallest chunk size cr_adstack_init_ex() accepts, in bytes. */
#define CR_ADSTACK_MIN_CHUNK ((size_t)64)

/**
 * One 8-byte slot. Items are written and read through the member of their type (a pointer
 * is kept as `u64`); the union has no pointer member, so that a store into a slot cannot
 * alias the stack's own pointers.
 */
typedef union cr_adstack_slot {
    double f64;   /**< A double item. */
    int64_t i64;  /**< An integer item. */
    float f32;    /**< A float item (the first 4 bytes of the slot). */
    uint64_t u64; /**< A pointer item, as `uintptr_t`. */
} cr_adstack_slot;

/** A chunk of slots (private; see src/ad/adstack.c). */
typedef struct cr_adstack_chunk cr_adstack_chunk;

/**
 * A value stack. Caller storage: declare it anywhere and set it up with cr_adstack_init()
 * or cr_adstack_init_ex(), or zero-initialise it (the defaults). The fields are described for
 * debugging and to make the inline functions possible; they are private: use the functions.
 */
typedef struct cr_adstack {
    cr_adstack_slot *top;     /**< Next free slot of the current chunk. */
    cr_adstack_slot *end;     /**< One past the current chunk's last slot (push limit). */
    cr_adstack_slot *base;    /**< The current chunk's first slot (pop limit). */
    cr_adstack_slot *high;    /**< High-water mark of the current chunk, as seen by the pops
                                   (the highest `top` is the larger of it and `top`). */
    cr_adstack_chunk *chunk;  /**< Current chunk, NULL before the first push. */
    size_t below;             /**< Items in the chunks below the current one. */
    size_t peak;              /**< Largest item count seen at a chunk change, reset or
                                   failure. */
    size_t reserved;          /**< Bytes of chunk memory allocated (headers included). */
    size_t first_chunk;       /**< Size in bytes of the first chunk. */
    size_t max_chunk;         /**< Cap in bytes of a chunk. */
    cr_realloc_fn realloc_fn; /**< Allocation hook, NULL for malloc/free. */
    void *alloc_env;          /**< Passed to realloc_fn. */
    int failed;               /**< Nonzero once an allocation failed or the stack underflowed. */
    void *borrowed;           /**< The caller's first chunk (cr_adstack_init_buf()), or NULL. */
} cr_adstack;

/** Parameters of cr_adstack_init_ex(). Zero-initialised means defaults. */
typedef struct cr_adstack_params {
    uint32_t struct_size;     /**< sizeof(cr_adstack_params), or 0; other sizes: CR_EINVAL. */
    size_t first_chunk_bytes; /**< First chunk in bytes, header included; 0 means
                                   CR_ADSTACK_FIRST_CHUNK. At least CR_ADSTACK_MIN_CHUNK. */
    size_t max_chunk_bytes;   /**< Cap of a chunk in bytes; 0 means CR_ADSTACK_MAX_CHUNK
                                   (or first_chunk_bytes if that is larger). At least
                                   first_chunk_bytes, at most SIZE_MAX / 4. */
    cr_realloc_fn realloc_fn; /**< Allocation hook (Lua's lua_Alloc contract, see ctx.h);
                                   NULL means malloc/free. */
    void *alloc_env;          /**< Passed as `env` to realloc_fn. */
} cr_adstack_params;

/**
 * Set up an empty stack with the default chunk sizes and malloc/free. Allocates nothing
 * (the first push allocates the first chunk).
 * @param[out] s the stack; NULL is ignored.
 * @note Cannot fail.
 */
CR_API void cr_adstack_init(cr_adstack *s);

/**
 * Set up an empty stack whose first chunk is the caller's buffer (on its own stack, for
 * instance), so that a stack that stays small allocates nothing; more chunks come from
 * malloc as with cr_adstack_init(). Generated reverse-mode code sets up its stack this way.
 * @param[out] s     the stack; NULL is ignored.
 * @param[in]  buf   the first chunk, aligned for a cr_adstack_slot (declare it as an array of
 *                   cr_adstack_slot); borrowed until cr_adstack_deinit(). NULL, or bytes
 *                   under CR_ADSTACK_MIN_CHUNK, give a stack set up as by cr_adstack_init().
 * @param[in]  bytes its size in bytes.
 * @note Cannot fail.
 */
CR_API void cr_adstack_init_buf(cr_adstack *s, void *buf, size_t bytes);

/**
 * Set up an empty stack with chosen chunk sizes and allocator. Allocates nothing.
 * @param[out] s      the stack.
 * @param[in]  params NULL for the defaults (as cr_adstack_init()); read during the call only.
 * @return CR_OK; CR_EINVAL if s is NULL, struct_size is unknown, first_chunk_bytes is below
 *         CR_ADSTACK_MIN_CHUNK, or max_chunk_bytes is below first_chunk_bytes or above
 *         SIZE_MAX / 4. On CR_EINVAL a non-NULL s is set up as a failed stack (pushes
 *         dropped, pops give NaN/0/NULL, cr_adstack_deinit() allowed), so that code that
 *         ignores the status stays defined.
 */
CR_API cr_status cr_adstack_init_ex(cr_adstack *s, const cr_adstack_params *params);

/**
 * Free every chunk. The stack is then empty, not failed, with its peak reset, and may be
 * used again (same parameters) or dropped.
 * @param[in,out] s the stack, or NULL (nothing happens).
 */
CR_API void cr_adstack_deinit(cr_adstack *s);

/**
 * Empty the stack and clear its failure, keeping the chunks for the next pushes (so that
 * a derivative called again allocates nothing). The peak is kept.
 * @param[in,out] s the stack, or NULL (nothing happens).
 */
CR_API void cr_adstack_reset(cr_adstack *s);

/** The type of an item, for cr_adstack_pop_slow()'s failure value. Append only. */
typedef enum cr_adstack_kind {
    CR_ADSTACK_F64 = 0, /**< double: NaN on failure. */
    CR_ADSTACK_I64 = 1, /**< int64_t: 0 on failure. */
    CR_ADSTACK_F32 = 2, /**< float: NaN on failure. */
    CR_ADSTACK_PTR = 3  /**< pointer: NULL on failure. */
} cr_adstack_kind;

/**
 * Out-of-line part of a push, called by the inline functions when the current chunk is
 * full: moves to the next chunk (reused, or allocated at twice the size of the current one
 * up to the cap) and writes the item in its first slot. Called with room left, it pushes
 * as the inline path does.
 * @param[in,out] s the stack.
 * @param[in]     v the item, in the union member of its type.
 * @note If the stack has failed or fails now (allocation, size overflow), the item is
 *       dropped.
 */
CR_API void cr_adstack_push_slow(cr_adstack *s, cr_adstack_slot v);

/**
 * Out-of-line part of a pop, called by the inline functions at the start of a chunk:
 * moves back to the previous chunk (which is full) and takes its last item. Called with
 * items left in the chunk, it pops as the inline path does.
 * @param[in,out] s    the stack.
 * @param[in]     kind the item's type, which chooses the value returned on failure.
 * @return the item; on failure (the stack has failed, or is empty and is marked failed
 *         now) a slot whose member of that type is NaN, 0 or NULL.
 */
CR_API cr_adstack_slot cr_adstack_pop_slow(cr_adstack *s, cr_adstack_kind kind);

/**
 * Whether the stack has failed: an allocation failed (or a chunk size overflowed), the
 * stack was popped while empty, or cr_adstack_init_ex() refused its parameters. Cleared
 * only by cr_adstack_reset() and cr_adstack_deinit().
 * @param[in] s the stack; NULL counts as failed.
 * @return nonzero once failed.
 */
CR_API int cr_adstack_failed(const cr_adstack *s);

/**
 * Mark the stack failed, as an allocation failure does (later pushes are dropped, pops give
 * NaN, 0 or NULL). Generated code calls it when memory it needs beside the stack (the
 * snapshots of a checkpointed loop) cannot be had, so that one cr_adstack_failed() at the
 * end reports every failure.
 * @param[in,out] s the stack; NULL is ignored.
 */
CR_API void cr_adstack_set_failed(cr_adstack *s);

/**
 * Release the calling thread's cache of stack chunks. Chunks of stacks that use the default
 * allocator are not returned to the system by cr_adstack_deinit(): up to 64 MiB of them are
 * kept for the thread's next stack (so that a generated f_rev called in a loop does not
 * fault in its memory on every call), and freed when the thread exits or by this call.
 * @note Thread-safe: it touches only the calling thread's cache.
 */
CR_API void cr_adstack_trim(void);

/**
 * The bytes of chunks in the calling thread's cache (see cr_adstack_trim()). After a
 * generated f_rev returns, it is the chunk memory the call's stack needed at its peak, as
 * long as that was under 64 MiB and the cache was empty before (cr_adstack_trim()).
 * @note Thread-safe: it reads only the calling thread's cache.
 */
CR_API size_t cr_adstack_cache_bytes(void);

/**
 * The largest number of bytes of items the stack has held at once (8 per item) since
 * cr_adstack_init() or cr_adstack_deinit(); exact.
 * @param[in] s the stack; NULL gives 0.
 */
CR_API size_t cr_adstack_peak_bytes(const cr_adstack *s);

/**
 * The bytes of items the stack holds now (8 per item). After a failure, the items held
 * when it failed.
 * @param[in] s the stack; NULL gives 0.
 */
CR_API size_t cr_adstack_bytes(const cr_adstack *s);

/**
 * The bytes of chunk memory the stack has allocated (headers included); chunks are kept
 * until cr_adstack_deinit(), so this is also its largest allocation at once.
 * @param[in] s the stack; NULL gives 0.
 */
CR_API size_t cr_adstack_reserved_bytes(const cr_adstack *s);

#if defined(__GNUC__)
/* Branch hint of the inline functions (the slow paths are rare). */
#define CR__ADSTACK_UNLIKELY(c) __builtin_expect(!!(c), 0)
#else
#define CR__ADSTACK_UNLIKELY(c) (c)
#endif

/* The inline paths. A push compares the top with the chunk's end, moves the top and
 * stores; a pop compares the top with the chunk's start, raises the high-water mark if the
 * top is above it (the first pop after pushes; a run of pops only compares), moves the top
 * and loads. Items are read and written as members of the union, so that an item popped
 * with another type than it was pushed with is type punning (unspecified bits), not an
 * aliasing violation; the union has no pointer member, so that its stores cannot alias the
 * stack's pointers. */

/* The inline push of `value` into union member `member` (of the type pushed). */
#define CR__ADSTACK_PUSH(s, member, value)             \
    do {                                               \
        cr_adstack_slot *cr__p = (s)->top;             \
        if (CR__ADSTACK_UNLIKELY(cr__p == (s)->end)) { \
            cr_adstack_slot cr__v;                     \
            cr__v.member = (value);                    \
            cr_adstack_push_slow((s), cr__v);          \
        } else {                                       \
            (s)->top = cr__p + 1;                      \
            cr__p->member = (value);                   \
        }                                              \
    } while (0)

/**
 * Push a double.
 * @param[in,out] s the stack.
 * @param[in]     v the value.
 */
static inline void cr_adstack_push_f64(cr_adstack *s, double v)
{
    CR__ADSTACK_PUSH(s, f64, v);
}

/**
 * Pop a double.
 * @param[in,out] s the stack.
 * @return the value, NaN if the stack has failed or was empty.
 */
static inline double cr_adstack_pop_f64(cr_adstack *s)
{
    cr_adstack_slot *p = s->top;
    if (CR__ADSTACK_UNLIKELY(p == s->base))
        return cr_adstack_pop_slow(s, CR_ADSTACK_F64).f64;
    if (p > s->high)
        s->high = p;
    s->top = --p;
    return p->f64;
}

/**
 * Push an integer (a size, a branch direction, a trip count).
 * @param[in,out] s the stack.
 * @param[in]     v the value.
 */
static inline void cr_adstack_push_i64(cr_adstack *s, int64_t v)
{
    CR__ADSTACK_PUSH(s, i64, v);
}

/**
 * Pop an integer.
 * @param[in,out] s the stack.
 * @return the value, 0 if the stack has failed or was empty.
 */
static inline int64_t cr_adstack_pop_i64(cr_adstack *s)
{
    cr_adstack_slot *p = s->top;
    if (CR__ADSTACK_UNLIKELY(p == s->base))
        return cr_adstack_pop_slow(s, CR_ADSTACK_I64).i64;
    if (p > s->high)
        s->high = p;
    s->top = --p;
    return p->i64;
}

/**
 * Push a float (in an 8-byte slot, as every item).
 * @param[in,out] s the stack.
 * @param[in]     v the value.
 */
static inline void cr_adstack_push_f32(cr_adstack *s, float v)
{
    CR__ADSTACK_PUSH(s, f32, v);
}

/**
 * Pop a float.
 * @param[in,out] s the stack.
 * @return the value, NaN if the stack has failed or was empty.
 */
static inline float cr_adstack_pop_f32(cr_adstack *s)
{
    cr_adstack_slot *p = s->top;
    if (CR__ADSTACK_UNLIKELY(p == s->base))
        return cr_adstack_pop_slow(s, CR_ADSTACK_F32).f32;
    if (p > s->high)
        s->high = p;
    s->top = --p;
    return p->f32;
}

/**
 * Push a pointer (its value only: the pointee is not copied).
 * @param[in,out] s   the stack.
 * @param[in]     ptr the pointer, which may be NULL.
 */
static inline void cr_adstack_push_ptr(cr_adstack *s, const void *ptr)
{
    CR__ADSTACK_PUSH(s, u64, (uint64_t)(uintptr_t)ptr);
}

/**
 * Pop a pointer.
 * @param[in,out] s the stack.
 * @return the pointer pushed, NULL if the stack has failed or was empty.
 */
static inline void *cr_adstack_pop_ptr(cr_adstack *s)
{
    cr_adstack_slot *p = s->top;
    if (CR__ADSTACK_UNLIKELY(p == s->base))
        return (void *)(uintptr_t)cr_adstack_pop_slow(s, CR_ADSTACK_PTR).u64;
    if (p > s->high)
        s->high = p;
    s->top = --p;
    return (void *)(uintptr_t)p->u64;
}

/**
 * Push n doubles, v[0] first, with one room check when the current chunk holds them all
 * (generated code stores a statement's partials this way); the same as n calls of
 * cr_adstack_push_f64() otherwise.
 * @param[in,out] s the stack.
 * @param[in]     v n values.
 * @param[in]     n their number.
 */
static inline void cr_adstack_push_f64n(cr_adstack *s, const double *v, size_t n)
{
    cr_adstack_slot *p = s->top;
    if (!CR__ADSTACK_UNLIKELY(p == NULL) && (size_t)(s->end - p) >= n) {
        for (size_t i = 0; i < n; i++)
            p[i].f64 = v[i];
        s->top = p + n;
        return;
    }
    for (size_t i = 0; i < n; i++)
        cr_adstack_push_f64(s, v[i]);
}

/**
 * Pop the n doubles of a cr_adstack_push_f64n() (or of n pushes): v[0] receives the first
 * pushed, v[n - 1] the last; the same as n calls of cr_adstack_pop_f64(), last first.
 * @param[in,out] s the stack.
 * @param[out]    v n values (NaN where the stack has failed or was empty).
 * @param[in]     n their number.
 */
static inline void cr_adstack_pop_f64n(cr_adstack *s, double *v, size_t n)
{
    cr_adstack_slot *p = s->top;
    if (!CR__ADSTACK_UNLIKELY(p == NULL) && (size_t)(p - s->base) >= n) {
        if (p > s->high)
            s->high = p;
        p -= n;
        for (size_t i = 0; i < n; i++)
            v[i] = p[i].f64;
        s->top = p;
        return;
    }
    for (size_t i = n; i-- > 0;)
        v[i] = cr_adstack_pop_f64(s);
}

CR_END_DECLS

#endif /* CR_ADSTACK_H */
