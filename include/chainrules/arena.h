/**
 * @file arena.h
 * @brief Bump-allocation arenas: where rules, pullbacks, thunks and tangents live.
 *
 * An arena is a chain of blocks (64 KiB by default, doubling as it grows; never
 * `realloc`ed, so pointers stay valid) or a fixed caller buffer. Allocation is a pointer
 * bump; there is no per-object free. cr_arena_reset() rewinds and keeps the blocks;
 * cr_arena_free() releases everything. Deferred cleanups registered with
 * cr_arena_defer() run, last registered first, at reset and free.
 *
 * @code
 * cr_arena *a;
 * cr_arena_new(ctx, NULL, &a);
 * double *buf = cr_arena_alloc(a, 100 * sizeof(double), _Alignof(double));
 * cr_arena_reset(a);          // buf is gone, the memory is kept for reuse
 * cr_arena_free(a);
 * @endcode
 * @note An arena is thread-confined, like its context.
 */
#ifndef CR_ARENA_H
#define CR_ARENA_H

#include "common.h"
#include "ctx.h"
#include "status.h"

CR_BEGIN_DECLS

/** Opaque arena. */
typedef struct cr_arena cr_arena;

/** Alignment of every cr_arena_alloc() block when align is 0, and the largest honoured. */
#define CR_ARENA_ALIGN 16

/** Parameters for cr_arena_new(). Zero-initialised means defaults. */
typedef struct cr_arena_params {
    uint32_t struct_size; /**< sizeof(cr_arena_params), or 0; other sizes: CR_EINVAL. */
    void *buffer;         /**< Caller buffer (fixed capacity; CR_EARENA when full), or NULL. */
    size_t buffer_size;   /**< Its size in bytes. */
    size_t block_size;    /**< First block size of a growable arena; 0 means 64 KiB. */
} cr_arena_params;

/**
 * Create an arena whose errors are recorded on ctx and whose blocks come from ctx's hook.
 * @param[in]  ctx    the owning context; must outlive the arena.
 * @param[in]  params NULL for a growable arena with 64 KiB first block.
 * @param[out] out    the arena; caller owns it, release with cr_arena_free().
 * @return CR_OK, CR_EINVAL (NULL ctx/out, buffer without size), CR_ENOMEM.
 */
CR_API cr_status cr_arena_new(cr_ctx *ctx, const cr_arena_params *params, cr_arena **out);

/** Run deferred cleanups and release every block. @param[in] arena may be NULL. */
CR_API void cr_arena_free(cr_arena *arena);

/**
 * Run deferred cleanups and rewind: everything allocated is gone, the blocks are kept.
 * @param[in] arena may be NULL.
 */
CR_API void cr_arena_reset(cr_arena *arena);

/**
 * Allocate `size` bytes aligned to `align` (a power of two <= CR_ARENA_ALIGN; 0 means
 * CR_ARENA_ALIGN). The memory is not cleared.
 * @return the block, valid until the next reset or free; NULL on failure with CR_ENOMEM,
 *         CR_EARENA (fixed buffer full), CR_EOVERFLOW or CR_EINVAL recorded on the context.
 *         A zero-size request returns a valid unique pointer.
 */
CR_API void *cr_arena_alloc(cr_arena *arena, size_t size, size_t align);

/** Like cr_arena_alloc() but the block is zero-filled. */
CR_API void *cr_arena_calloc(cr_arena *arena, size_t count, size_t size, size_t align);

/**
 * Copy a NUL-terminated string into the arena.
 * @return the copy, or NULL on failure (error recorded); NULL input gives NULL.
 */
CR_API char *cr_arena_strdup(cr_arena *arena, const char *s);

/**
 * Register `fn(env)` to run at the next reset or free (last registered runs first).
 * Ownership of env passes at the call even if it fails: then fn(env) runs before return.
 * @return CR_OK, CR_EINVAL (NULL arena or fn), CR_ENOMEM / CR_EARENA.
 */
CR_API cr_status cr_arena_defer(cr_arena *arena, void (*fn)(void *env), void *env);

/** The context the arena reports to. */
CR_API cr_ctx *cr_arena_ctx(const cr_arena *arena);

/** Bytes handed out since the last reset (including alignment padding). */
CR_API size_t cr_arena_used(const cr_arena *arena);

/** Bytes of block memory the arena holds (or the fixed buffer's size). */
CR_API size_t cr_arena_capacity(const cr_arena *arena);

/** A position in an arena, from cr_arena_mark(). */
typedef struct cr_arena_mark {
    void *block;   /**< Internal. */
    size_t used;   /**< Internal. */
    size_t total;  /**< Internal. */
    size_t ndefer; /**< Internal. */
} cr_arena_mark;

/** Remember the current position, for scratch allocations undone by cr_arena_rewind(). */
CR_API cr_arena_mark cr_arena_get_mark(const cr_arena *arena);

/**
 * Free everything allocated since `mark` (running deferred cleanups registered since).
 * The mark must come from this arena, after its last reset.
 */
CR_API void cr_arena_rewind(cr_arena *arena, cr_arena_mark mark);

CR_END_DECLS

#endif /* CR_ARENA_H */
