/**
 * @file ctx.h
 * @brief The context: allocator hook, last error, debug mode.
 *
 * A context owns the allocation hook every library allocation goes through (and which
 * tests use for fault injection), the code and message of the last error, and the debug
 * switch. It is thread-confined: use one context per thread.
 *
 * @code
 * cr_ctx *ctx;
 * if (cr_ctx_new(NULL, &ctx) != CR_OK) return 1;      // default allocator
 * ...
 * if (st != CR_OK) fprintf(stderr, "%s\n", cr_ctx_errmsg(ctx));
 * cr_ctx_free(ctx);
 * @endcode
 */
#ifndef CR_CTX_H
#define CR_CTX_H

#include "common.h"
#include "status.h"

CR_BEGIN_DECLS

/**
 * Allocation hook, Lua's `lua_Alloc` contract.
 *
 * - `new_size > 0`: allocate (`ptr == NULL`) or resize `ptr` (of `old_size` bytes) to
 *   `new_size` bytes; return the block, or NULL on failure (then `ptr` is untouched).
 * - `new_size == 0`: free `ptr` (which may be NULL) and return NULL.
 *
 * The returned memory must be aligned for any object (`max_align_t`).
 */
typedef void *(*cr_realloc_fn)(void *env, void *ptr, size_t old_size, size_t new_size);

/** Opaque context. Create with cr_ctx_new(), release with cr_ctx_free(). */
typedef struct cr_ctx cr_ctx;

/** Parameters for cr_ctx_new(). Zero-initialised means defaults. */
typedef struct cr_ctx_params {
    uint32_t struct_size;     /**< sizeof(cr_ctx_params), or 0 for the current size, or
                                   offsetof(cr_ctx_params, debug) or
                                   offsetof(cr_ctx_params, checks) (the earlier versions);
                                   other sizes: CR_EINVAL. */
    cr_realloc_fn realloc_fn; /**< Allocation hook; NULL selects the C library's. */
    void *alloc_env;          /**< Passed as `env` to realloc_fn. */
    bool debug;               /**< Start in debug mode (see cr_ctx_set_debug()). */
    uint64_t checks;          /**< Misuse checks of the context's tapes: CR_CTX_CHECK_* bits
                                   (0, the default: none, and no cost). */
} cr_ctx_params;

/**
 * cr_ctx_params.checks: each tape made by cr_tape_new() records the thread that made it,
 * and its calls (recording, sweeps, reset, free) check that they run on that thread: a
 * call from another thread returns CR_EMISUSE (or a NaN constant) without touching the
 * tape, and the owner's next call fails the tape with CR_EMISUSE and a message saying so.
 * A tape handed over to another thread is adopted there first (cr_tape_adopt()). The
 * inline operations of tape.h are closed on such tapes (every operation goes through the
 * library), which is the cost of the check. docs/engine.md, "Threads".
 */
#define CR_CTX_CHECK_THREAD 1u
/**
 * cr_ctx_params.checks: cr_tape_free() releases a tape's records and arena but keeps its
 * struct, poisoned, in a quarantine of the context until cr_ctx_free(); a later call on
 * the freed tape fails with CR_EMISUSE ("used after cr_tape_free") instead of reading freed
 * memory, and a second cr_tape_free() of it does nothing. cr_ctx_free() with tapes still
 * alive keeps the context (poisoned) until the last of them is freed, so that a tape used
 * after cr_ctx_free() fails with CR_EMISUSE too. A freed tape whose context has been freed
 * as well is gone: its use is not detected.
 */
#define CR_CTX_CHECK_FREED 2u
/** cr_ctx_params.checks: every check (CR_CTX_CHECK_THREAD | CR_CTX_CHECK_FREED). */
#define CR_CTX_CHECK_TAPES 3u
/**
 * cr_ctx_params.checks: every tape made by cr_tape_new() (the tapes of the prepared
 * gradients included) starts in the checking mode of cr_tape_set_check_finite(): a
 * recording stops with CR_ENONFINITE at the first operation that makes a non-finite value
 * from finite inputs. Not part of CR_CTX_CHECK_TAPES.
 */
#define CR_CTX_CHECK_FINITE 4u

/**
 * Create a context.
 * @param[in]  params NULL for defaults.
 * @param[out] out    the new context; caller owns it, release with cr_ctx_free().
 *                    Set to NULL on failure.
 * @return CR_OK; CR_EINVAL if out is NULL or params->struct_size is not a size this
 *         library knows; CR_ENOMEM if the hook failed.
 * @note Thread-safe; the context itself is thread-confined.
 */
CR_API cr_status cr_ctx_new(const cr_ctx_params *params, cr_ctx **out);

/**
 * Release a context. Arenas created from it must be freed first.
 * @param[in] ctx may be NULL.
 */
CR_API void cr_ctx_free(cr_ctx *ctx);

/**
 * The status of the last error recorded on the context, or CR_OK.
 * @param[in] ctx may be NULL (gives CR_EMISUSE).
 */
CR_API cr_status cr_ctx_errcode(const cr_ctx *ctx);

/**
 * The message of the last error: names the function, the signature and, in debug mode,
 * the chain of pullbacks that led there.
 * @param[in] ctx may be NULL.
 * @return a string owned by the context, valid until the next call that records an error
 *         or cr_ctx_clear_error(); "" when there is no error. Never NULL.
 */
CR_API const char *cr_ctx_errmsg(const cr_ctx *ctx);

/**
 * Forget the last error.
 * @param[in] ctx may be NULL.
 */
CR_API void cr_ctx_clear_error(cr_ctx *ctx);

/**
 * Record an error on the context, with a printf-style message. Rule authors use it to
 * explain a failing status; it returns `status` so that it can end a function:
 * `return cr_ctx_error(ctx, CR_EDOMAIN, "mylog: x = %g < 0", x);`
 * @param[in] ctx    may be NULL (then only `status` is returned).
 * @param[in] status the status to record.
 * @param[in] fmt    printf format; the message is truncated to 511 bytes.
 * @return status.
 */
CR_API cr_status cr_ctx_error(cr_ctx *ctx, cr_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/**
 * Switch debug mode on or off. In debug mode the library makes extra checks (add!!
 * returned its destination, a tangent's kind fits its projected primal) and error
 * messages carry the chain of pullback names.
 * @param[in] ctx may be NULL (no effect).
 * @param[in] on  true to switch debug mode on.
 */
CR_API void cr_ctx_set_debug(cr_ctx *ctx, bool on);

/** Whether debug mode is on. @param[in] ctx may be NULL (gives false). */
CR_API bool cr_ctx_debug(const cr_ctx *ctx);

/**
 * Allocate `size` bytes through the context's hook (for objects that outlive arenas).
 * @return the block, or NULL with CR_ENOMEM recorded on ctx. Release with cr_ctx_dealloc().
 */
CR_API void *cr_ctx_alloc(cr_ctx *ctx, size_t size);

/**
 * Release a block from cr_ctx_alloc().
 * @param[in] ctx  the context it was allocated from; may be NULL (no effect).
 * @param[in] ptr  may be NULL.
 * @param[in] size the size it was allocated with.
 */
CR_API void cr_ctx_dealloc(cr_ctx *ctx, void *ptr, size_t size);

CR_END_DECLS

#endif /* CR_CTX_H */
