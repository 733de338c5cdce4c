/*
 * Bump-allocation arenas (ggml's context, minus the aborts): a chain of blocks that is
 * never realloc'ed, or one fixed caller buffer. Reset rewinds and keeps the blocks;
 * deferred cleanups run last-in first-out at reset, rewind and free.
 */
#include <string.h>

#define CR__ARENA_IMPL /* the functions themselves, not the inline fast path */
#include "core_impl.h"

#define DEFAULT_BLOCK_SIZE ((size_t)64 * 1024)

#define HEADER_SIZE CR__ARENA_HEADER
#define block_data  cr__block_data
#define set_cur     cr__arena_set_cur

cr_status cr_arena_new(cr_ctx *ctx, const cr_arena_params *params, cr_arena **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "cr_arena_new: out is NULL");
    *out = NULL;
    if (ctx == NULL)
        return CR_EINVAL;
    cr_arena_params p;
    cr_status st = cr__params_copy(ctx, "cr_arena_new", params, &p, sizeof p);
    if (st != CR_OK)
        return st;
    if (p.buffer != NULL && p.buffer_size == 0)
        return cr_ctx_error(ctx, CR_EINVAL, "cr_arena_new: buffer given with size 0");
    cr_arena *a = cr__alloc(ctx, sizeof *a);
    if (a == NULL)
        return CR_ENOMEM;
    memset(a, 0, sizeof *a);
    a->ctx = ctx;
    a->next_size = p.block_size != 0 ? p.block_size : DEFAULT_BLOCK_SIZE;
    if (p.buffer != NULL) {
        /* Align the start of the caller buffer ourselves. */
        uintptr_t base = (uintptr_t)p.buffer;
        uintptr_t aligned = (base + CR_ARENA_ALIGN - 1) & ~(uintptr_t)(CR_ARENA_ALIGN - 1);
        size_t skip = (size_t)(aligned - base);
        a->fixed = true;
        a->fixed_data = (unsigned char *)aligned;
        a->fixed_block.size = p.buffer_size > skip ? p.buffer_size - skip : 0;
        a->fixed_block.owned = false;
        a->first = &a->fixed_block;
        set_cur(a, a->first);
    }
    *out = a;
    return CR_OK;
}

static void run_defers(cr_arena *a, size_t keep)
{
    while (a->ndefer > keep) {
        cr__defer_node *d = a->defers;
        a->defers = d->prev;
        a->ndefer--;
        d->fn(d->env);
    }
}

void cr_arena_free(cr_arena *arena)
{
    if (arena == NULL)
        return;
    run_defers(arena, 0);
    cr__block *b = arena->first;
    while (b != NULL) {
        cr__block *next = b->next;
        if (b->owned)
            cr__free(arena->ctx, b, HEADER_SIZE + b->size);
        b = next;
    }
    cr__free(arena->ctx, arena, sizeof *arena);
}

void cr_arena_reset(cr_arena *arena)
{
    if (arena == NULL)
        return;
    run_defers(arena, 0);
    set_cur(arena, arena->first);
    arena->used = 0;
    arena->total = 0;
}

/* Offset at which an object of `align` fits in block b after `used` bytes. */
static size_t align_up(size_t used, size_t align)
{
    return (used + align - 1) & ~(align - 1);
}

static bool fits(const cr__block *b, size_t used, size_t size, size_t align, size_t *off)
{
    if (b == NULL)
        return false;
    size_t o = align_up(used, align);
    if (o > b->size || size > b->size - o)
        return false;
    *off = o;
    return true;
}

void *cr_arena_alloc(cr_arena *arena, size_t size, size_t align)
{
    if (arena == NULL)
        return NULL;
    if (align == 0)
        align = CR_ARENA_ALIGN;
    if (align > CR_ARENA_ALIGN || (align & (align - 1)) != 0) {
        cr_ctx_error(arena->ctx, CR_EINVAL, "cr_arena_alloc: alignment %zu not supported", align);
        return NULL;
    }
    if (size == 0)
        size = 1;
    size_t off;
    if (fits(arena->cur, arena->used, size, align, &off)) {
        arena->used = off + size;
        return block_data(arena, arena->cur) + off;
    }
    if (arena->fixed) {
        cr_ctx_error(arena->ctx, CR_EARENA,
                     "arena buffer of %zu byte%s is full (request of %zu byte%s)",
                     arena->fixed_block.size, CR__S(arena->fixed_block.size), size, CR__S(size));
        return NULL;
    }
    /* Move on to the next kept block if it is large enough, else insert a new one. */
    cr__block *cur = arena->cur;
    cr__block *next = cur != NULL ? cur->next : arena->first;
    if (next != NULL && fits(next, 0, size, align, &off)) {
        arena->total += cur != NULL ? arena->used : 0;
        set_cur(arena, next);
        arena->used = off + size;
        return block_data(arena, next) + off;
    }
    if (size > SIZE_MAX - HEADER_SIZE - CR_ARENA_ALIGN) {
        cr_ctx_error(arena->ctx, CR_EOVERFLOW, "cr_arena_alloc: %zu byte%s overflows", size,
                     CR__S(size));
        return NULL;
    }
    size_t bsize = arena->next_size;
    while (bsize < size) {
        if (bsize > SIZE_MAX / 2 - HEADER_SIZE) {
            bsize = size;
            break;
        }
        bsize *= 2;
    }
    cr__block *b = cr__alloc(arena->ctx, HEADER_SIZE + bsize);
    if (b == NULL)
        return NULL;
    b->size = bsize;
    b->owned = true;
    b->next = next;
    if (cur != NULL) {
        cur->next = b;
        arena->total += arena->used;
    } else {
        arena->first = b;
    }
    set_cur(arena, b);
    size_t grown; /* bsize may be the request itself, up to SIZE_MAX - HEADER_SIZE */
    if (arena->next_size <= SIZE_MAX / 4 && cr__mul_size(bsize, 2, &grown))
        arena->next_size = grown;
    arena->used = size;
    return block_data(arena, b);
}

void *cr_arena_calloc(cr_arena *arena, size_t count, size_t size, size_t align)
{
    size_t n;
    if (!cr__mul_size(count, size, &n)) {
        if (arena != NULL)
            cr_ctx_error(arena->ctx, CR_EOVERFLOW, "cr_arena_calloc: %zu x %zu overflows", count,
                         size);
        return NULL;
    }
    void *p = cr__arena_alloc(arena, n, align);
    if (p != NULL)
        memset(p, 0, n);
    return p;
}

char *cr_arena_strdup(cr_arena *arena, const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = cr_arena_alloc(arena, n, 1);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

cr_status cr_arena_defer(cr_arena *arena, void (*fn)(void *env), void *env)
{
    if (fn == NULL)
        return arena != NULL ? cr_ctx_error(arena->ctx, CR_EINVAL, "cr_arena_defer: fn is NULL")
                             : CR_EINVAL;
    if (arena == NULL) {
        fn(env);
        return CR_EINVAL;
    }
    cr__defer_node *d = cr_arena_alloc(arena, sizeof *d, _Alignof(cr__defer_node));
    if (d == NULL) {
        fn(env);
        return cr_ctx_errcode(arena->ctx);
    }
    d->fn = fn;
    d->env = env;
    d->prev = arena->defers;
    arena->defers = d;
    arena->ndefer++;
    return CR_OK;
}

cr_ctx *cr_arena_ctx(const cr_arena *arena)
{
    return arena == NULL ? NULL : arena->ctx;
}

size_t cr_arena_used(const cr_arena *arena)
{
    return arena == NULL ? 0 : arena->total + arena->used;
}

size_t cr_arena_capacity(const cr_arena *arena)
{
    size_t n = 0;
    if (arena == NULL)
        return 0;
    for (const cr__block *b = arena->first; b != NULL; b = b->next)
        n += b->size;
    return n;
}

cr_arena_mark cr_arena_get_mark(const cr_arena *arena)
{
    return cr__arena_get_mark(arena);
}

void cr_arena_rewind(cr_arena *arena, cr_arena_mark mark)
{
    if (arena == NULL)
        return;
    run_defers(arena, mark.ndefer);
    if (mark.block == NULL) {
        set_cur(arena, arena->first);
        arena->used = 0;
        arena->total = 0;
        return;
    }
    set_cur(arena, mark.block);
    arena->used = mark.used;
    arena->total = mark.total;
}
