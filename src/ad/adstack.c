/*
 * The value stack of generated reverse-mode code: the out-of-line half of push and pop
 * (moving to the next chunk, allocating it, moving back), set-up, failure and accounting.
 * The inline half is in include/chainrules/adstack.h.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules/adstack.h>

/* A chunk: this header, then `nslots` slots. The header's size is a multiple of 8 (four
 * pointer-sized words), so the slots that follow are aligned for any 8-byte item. */
struct cr_adstack_chunk {
    cr_adstack_chunk *prev; /* the chunk below, NULL for the first */
    cr_adstack_chunk *next; /* the chunk above (kept for reuse), or NULL */
    size_t nslots;          /* slots of this chunk */
    size_t bytes;           /* bytes allocated for it, header included */
};

#define HEADER_BYTES sizeof(cr_adstack_chunk)

static cr_adstack_slot *chunk_slots(cr_adstack_chunk *c)
{
    return (cr_adstack_slot *)(void *)((unsigned char *)c + HEADER_BYTES);
}

static void set_defaults(cr_adstack *s)
{
    memset(s, 0, sizeof *s);
    s->first_chunk = CR_ADSTACK_FIRST_CHUNK;
    s->max_chunk = CR_ADSTACK_MAX_CHUNK;
}

void cr_adstack_init(cr_adstack *s)
{
    if (s != NULL)
        set_defaults(s);
}

void cr_adstack_init_buf(cr_adstack *s, void *buf, size_t bytes)
{
    if (s == NULL)
        return;
    set_defaults(s);
    if (buf == NULL || bytes < CR_ADSTACK_MIN_CHUNK || bytes > SIZE_MAX / 4)
        return;
    /* the borrowed chunk is entered by the first push, as an allocated one would be */
    cr_adstack_chunk *c = buf;
    c->prev = c->next = NULL;
    c->bytes = bytes;
    c->nslots = (bytes - HEADER_BYTES) / sizeof(cr_adstack_slot);
    s->borrowed = c;
    if (bytes > s->first_chunk)
        s->first_chunk = bytes;
}

cr_status cr_adstack_init_ex(cr_adstack *s, const cr_adstack_params *params)
{
    if (s == NULL)
        return CR_EINVAL;
    set_defaults(s);
    if (params == NULL)
        return CR_OK;
    cr_adstack_params p = {0};
    size_t n = params->struct_size == 0 ? sizeof p : params->struct_size;
    if (n != sizeof p) {
        s->failed = 1;
        return CR_EINVAL;
    }
    memcpy(&p, params, sizeof p);
    size_t first = p.first_chunk_bytes == 0 ? CR_ADSTACK_FIRST_CHUNK : p.first_chunk_bytes;
    size_t max = p.max_chunk_bytes;
    if (max == 0)
        max = first > CR_ADSTACK_MAX_CHUNK ? first : CR_ADSTACK_MAX_CHUNK;
    // SIZE_MAX / 4 keeps the doubling of a chunk size and the sum of two of them from
    // wrapping; no real allocation comes near it.
    if (first < CR_ADSTACK_MIN_CHUNK || max < first || max > SIZE_MAX / 4) {
        s->failed = 1;
        return CR_EINVAL;
    }
    s->first_chunk = first;
    s->max_chunk = max;
    s->realloc_fn = p.realloc_fn;
    s->alloc_env = p.alloc_env;
    return CR_OK;
}

/* ---- The per-thread cache of chunks ------------------------------------------------------
 *
 * A generated f_rev sets up a stack, uses it and releases it on every call. With malloc and
 * free alone, the large chunks of a long sweep would go back to the system on every call
 * and be faulted in again on the next (several times the cost of the sweep). Chunks of the
 * default allocator are therefore kept, up to CACHE_MAX_BYTES per thread, and reused by the
 * next stack of the same thread; cr_adstack_trim() releases them, and so does the thread's
 * end (a POSIX thread-specific key's destructor). */

#define CACHE_MAX_BYTES ((size_t)64 << 20)

typedef struct chunk_cache {
    cr_adstack_chunk *list; /* linked through `next` */
    size_t bytes;
    int registered; /* the key's destructor will free it */
} chunk_cache;

static _Thread_local chunk_cache t_cache;
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_cache_key;
static int g_cache_key_ok;

static void cache_release(chunk_cache *cache)
{
    while (cache->list != NULL) {
        cr_adstack_chunk *next = cache->list->next;
        free(cache->list);
        cache->list = next;
    }
    cache->bytes = 0;
}

static void cache_destroy(void *p)
{
    cache_release(p);
}

static void cache_key_create(void)
{
    g_cache_key_ok = pthread_key_create(&g_cache_key, cache_destroy) == 0;
}

void cr_adstack_trim(void)
{
    cache_release(&t_cache);
}

size_t cr_adstack_cache_bytes(void)
{
    return t_cache.bytes;
}

static void *chunk_alloc(cr_adstack *s, size_t bytes)
{
    if (s->realloc_fn != NULL)
        return s->realloc_fn(s->alloc_env, NULL, 0, bytes);
    for (cr_adstack_chunk **p = &t_cache.list; *p != NULL; p = &(*p)->next)
        if ((*p)->bytes == bytes) {
            cr_adstack_chunk *c = *p;
            *p = c->next;
            t_cache.bytes -= bytes;
            return c;
        }
    return malloc(bytes);
}

static void chunk_free(cr_adstack *s, cr_adstack_chunk *c)
{
    if (c == s->borrowed)
        return;
    if (s->realloc_fn != NULL) {
        (void)s->realloc_fn(s->alloc_env, c, c->bytes, 0);
        return;
    }
    if (c->bytes <= CACHE_MAX_BYTES - t_cache.bytes) {
        /* the key's destructor frees the cache when the thread exits */
        if (!t_cache.registered && pthread_once(&g_cache_once, cache_key_create) == 0 &&
            g_cache_key_ok && pthread_setspecific(g_cache_key, &t_cache) == 0)
            t_cache.registered = 1;
        if (t_cache.registered) {
            c->next = t_cache.list;
            t_cache.list = c;
            t_cache.bytes += c->bytes;
            return;
        }
    }
    free(c);
}

/* The items held now. */
static size_t held(const cr_adstack *s)
{
    if (s->top == NULL) // no chunk yet (pointer arithmetic on NULL is not defined)
        return s->below;
    return s->below + (size_t)(s->top - s->base);
}

/* The largest item count so far: the pops keep the current chunk's high-water mark, and
 * pushes since the last pop may have gone above it. */
static size_t peak_items(const cr_adstack *s)
{
    size_t here = s->below;
    if (s->top != NULL) {
        const cr_adstack_slot *hw = s->top > s->high ? s->top : s->high;
        here += (size_t)(hw - s->base);
    }
    return here > s->peak ? here : s->peak;
}

/* Mark the stack failed and close both inline paths: with base == end == top, every push
 * and every pop goes to the slow path, which sees the failure. The items held are folded
 * into `below` so that cr_adstack_bytes() keeps reporting them. */
static void fail(cr_adstack *s)
{
    s->peak = peak_items(s);
    s->below = held(s);
    s->base = s->end = s->high = s->top;
    s->failed = 1;
}

/* Enter chunk c with `top` at offset `at` (slots). */
static void enter(cr_adstack *s, cr_adstack_chunk *c, size_t at)
{
    s->chunk = c;
    s->base = chunk_slots(c);
    s->end = s->base + c->nslots;
    s->top = s->base + at;
    s->high = s->top;
}

void cr_adstack_push_slow(cr_adstack *s, cr_adstack_slot v)
{
    if (s->failed)
        return;
    if (s->top == s->end) {
        cr_adstack_chunk *cur = s->chunk, *next = NULL;
        if (cur != NULL && cur->next != NULL) {
            next = cur->next; // left by pops: reuse it
        } else if (cur == NULL && s->borrowed != NULL) {
            next = s->borrowed; // the caller's first chunk
        } else {
            // A zero-initialised stack (never through init) has the default sizes.
            size_t first = s->first_chunk != 0 ? s->first_chunk : CR_ADSTACK_FIRST_CHUNK;
            size_t max = s->max_chunk != 0 ? s->max_chunk : CR_ADSTACK_MAX_CHUNK;
            if (first < CR_ADSTACK_MIN_CHUNK || max < first || max > SIZE_MAX / 4) {
                fail(s); // sizes changed by the caller
                return;
            }
            size_t bytes = first;
            if (cur != NULL)
                bytes = cur->bytes >= max / 2 ? max : 2 * cur->bytes;
            if (bytes > SIZE_MAX - s->reserved) { // cannot happen with real memory
                fail(s);
                return;
            }
            next = chunk_alloc(s, bytes);
            if (next == NULL) {
                fail(s);
                return;
            }
            next->prev = cur;
            next->next = NULL;
            next->nslots = (bytes - HEADER_BYTES) / sizeof(cr_adstack_slot);
            next->bytes = bytes;
            s->reserved += bytes;
            if (cur != NULL)
                cur->next = next;
        }
        // Leaving a full chunk: its high-water mark is its size.
        s->peak = peak_items(s);
        if (cur != NULL)
            s->below += cur->nslots;
        enter(s, next, 0);
    }
    *s->top++ = v; // as the inline path does
}

cr_adstack_slot cr_adstack_pop_slow(cr_adstack *s, cr_adstack_kind kind)
{
    cr_adstack_slot bad;
    bad.u64 = 0; // i64 0, pointer NULL
    if (kind == CR_ADSTACK_F64)
        bad.f64 = (double)NAN;
    else if (kind == CR_ADSTACK_F32)
        bad.f32 = NAN;
    if (s->failed)
        return bad;
    if (s->top == s->base) {
        cr_adstack_chunk *cur = s->chunk;
        if (cur == NULL || cur->prev == NULL) { // empty: a misuse
            fail(s);
            return bad;
        }
        s->peak = peak_items(s);
        cr_adstack_chunk *prev = cur->prev;
        s->below -= prev->nslots;
        // The chunk below is full (a push moves up only from a full chunk).
        enter(s, prev, prev->nslots);
    }
    if (s->top > s->high) // as the inline path does
        s->high = s->top;
    return *--s->top;
}

void cr_adstack_deinit(cr_adstack *s)
{
    if (s == NULL)
        return;
    cr_adstack_chunk *c = s->chunk;
    while (c != NULL && c->prev != NULL)
        c = c->prev;
    while (c != NULL) {
        cr_adstack_chunk *next = c->next;
        chunk_free(s, c);
        c = next;
    }
    size_t first = s->first_chunk, max = s->max_chunk;
    cr_realloc_fn fn = s->realloc_fn;
    void *env = s->alloc_env;
    set_defaults(s);
    s->first_chunk = first;
    s->max_chunk = max;
    s->realloc_fn = fn;
    s->alloc_env = env;
}

void cr_adstack_reset(cr_adstack *s)
{
    if (s == NULL)
        return;
    s->peak = peak_items(s);
    cr_adstack_chunk *c = s->chunk;
    while (c != NULL && c->prev != NULL)
        c = c->prev;
    s->below = 0;
    s->failed = 0;
    if (c != NULL) {
        enter(s, c, 0);
    } else {
        s->chunk = NULL;
        s->top = s->end = s->base = s->high = NULL;
    }
}

void cr_adstack_set_failed(cr_adstack *s)
{
    if (s != NULL && !s->failed)
        fail(s);
}

int cr_adstack_failed(const cr_adstack *s)
{
    return s == NULL ? 1 : s->failed != 0;
}

size_t cr_adstack_peak_bytes(const cr_adstack *s)
{
    return s == NULL ? 0 : peak_items(s) * sizeof(cr_adstack_slot);
}

size_t cr_adstack_bytes(const cr_adstack *s)
{
    return s == NULL ? 0 : held(s) * sizeof(cr_adstack_slot);
}

size_t cr_adstack_reserved_bytes(const cr_adstack *s)
{
    return s == NULL ? 0 : s->reserved;
}
