/*
 * The reverse tape: recording. Scalar-table functions are evaluated once for value and
 * partials and recorded as compact records (no closure, no lookup, no allocation per
 * operation); other functions go through their rrule and the tape keeps the pullback.
 * The record layout is described in tape_impl.h; the sweeps are in sweep.c.
 */
#include <float.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules/rules_math.h>
#include <chainrules/rules_special.h>

#include "../rules/array_rule_impl.h"
#include "tape_impl.h"

/* The arithmetic rows, instantiated here too (their float and complex variants and source
 * strings are unused in this file). */
#include <tgmath.h>

#include <chainrules/scalar_rule.h>
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-const-variable"
#endif
#include <chainrules/arith_rows.h>
CR__ARITH_ROWS(CR_SCALAR_EVALS)
#include "arith_second.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#define FIRST_CHUNK_WORDS ((size_t)1024)
#define MAX_CHUNK_WORDS   ((size_t)1 << 20)

/* Recording ids: one per recording, so that variables of another tape, or of this tape
 * before a reset, are recognised. A tape takes a block of ID_BLOCK ids from a process-wide
 * atomic counter and hands them out at each reset, so resetting costs no atomic operation.
 * The counter is the library's only mutable global besides the built-in rule table and the
 * thread's current tape; it hands out numbers and nothing depends on their order. */
#define ID_BLOCK 1024u
static atomic_uint g_next_block = 1;

static uint32_t new_id(cr_tape *t)
{
    if (t->id_left == 0) {
        uint32_t b;
        do
            b = (uint32_t)atomic_fetch_add_explicit(&g_next_block, 1u, memory_order_relaxed);
        /* id 0 is never used (constants carry it), nor the block of CR__TAPE_NO_ID */
        while ((uint32_t)(b * ID_BLOCK) == 0 || (uint32_t)(b * ID_BLOCK) == 0u - ID_BLOCK);
        t->id_next = b * ID_BLOCK;
        t->id_left = ID_BLOCK;
    }
    t->id_left--;
    return t->id_next++;
}

/* The inline operations of tape.h write these records and read these fields. */
_Static_assert(K_UNARY == CR__TAPE_K_UNARY && K_BINARY == CR__TAPE_K_BINARY &&
                   K_ADD == CR__TAPE_K_ADD && K_SUB == CR__TAPE_K_SUB &&
                   K_COPY == CR__TAPE_K_COPY && K_NEG == CR__TAPE_K_NEG,
               "record kinds of tape.h and tape_impl.h differ");
_Static_assert(offsetof(struct cr_tape, hot) == 0 &&
                   offsetof(struct cr_tape, cur) == offsetof(cr__tape_hot, cur) &&
                   offsetof(struct cr_tape, lim) == offsetof(cr__tape_hot, lim) &&
                   offsetof(struct cr_tape, nvars) == offsetof(cr__tape_hot, vt.f.nvars) &&
                   offsetof(struct cr_tape, fast_id) == offsetof(cr__tape_hot, vt.f.fast_id) &&
                   offsetof(struct cr_tape, rlim) == offsetof(cr__tape_hot, rlim),
               "the first fields of struct cr_tape are not cr__tape_hot");
/* A key (tape.h) is a cr_var's (idx, tape) pair read as one word, as (nvars, fast_id) is. */
/* A chunk's stop header is the word just before its first (c->base is c + 1). */
_Static_assert(offsetof(cr__chunk, stop) + sizeof(uint64_t) == sizeof(cr__chunk) &&
                   sizeof(cr__chunk) % sizeof(cr__word) == 0,
               "cr__chunk.stop is the word before the chunk's first");
_Static_assert(sizeof(cr_var) == 16 && offsetof(cr_var, idx) == 8 && offsetof(cr_var, tape) == 12 &&
                   offsetof(cr__tape_kvar, k.key) == offsetof(cr_var, idx) &&
                   offsetof(cr__tape_hot, vt.f.fast_id) - offsetof(cr__tape_hot, vt.f.nvars) ==
                       offsetof(cr_var, tape) - offsetof(cr_var, idx),
               "a cr_var's idx and tape are not laid out as the tape's nvars and fast_id");

/* Whether the byte order tape.h assumed for keys is the machine's: the tape half of the
 * key of variable 1 of recording 2 is 2, and the next key is variable 2's. When it is not
 * (a compiler that does not tell the byte order, on a big-endian machine), the inline
 * operations never record: they call the exported functions. */
static bool keys_work(void)
{
    cr__tape_kvar u;
    u.v.v = 0.0;
    u.v.idx = 1;
    u.v.tape = 2;
    uint64_t k = u.k.key;
    u.k.key = k + CR__TAPE_KEY_ONE;
    return CR__TAPE_KEY_ID(k) == 2 && u.v.idx == 2 && u.v.tape == 2;
}

/* Open or close the inline operations' fast path: open on a plain first-order tape (no
 * leading words) that has not failed. Called wherever id, slow or pre change. */
static void set_fast(cr_tape *t)
{
    /* Stored with nvars as one word, as the inline operations and the kernels read and
     * write them (a key): a word read over two separate 4-byte stores waits for them to
     * reach the cache instead of being forwarded. */
    cr__tape_kvar u;
    u.v.idx = t->nvars;
    u.v.tape = t->slow == 0 && t->pre == 0 && keys_work() ? t->id : CR__TAPE_NO_ID;
    t->hot.vt.key = u.k.key;
}

/* The slow flag of a tape that has not failed: second order, replay, misuse checks and the
 * checking mode take the exported functions. */
static uint32_t slow_base(const cr_tape *t)
{
    return (t->flags & CR_TAPE_SECOND_ORDER) != 0 || t->pre > 1 || t->checks != 0 ||
           t->check_finite;
}

static _Thread_local cr_tape *g_current;

/* A byte per thread: its address tells the threads apart (CR_CTX_CHECK_THREAD). */
static _Thread_local char g_thread_tag;

cr_tape *cr_tape_set_current(cr_tape *t)
{
    cr_tape *old = g_current;
    g_current = t;
    return old;
}

cr_tape *cr_tape_current(void)
{
    return g_current;
}

/* ---- Errors ---------------------------------------------------------------------------- */

bool cr__tape_check(cr_tape *t)
{
    if (t->magic == CR__TAPE_FREED)
        return true; /* failed with its message when it was freed */
    if ((t->checks & CR_CTX_CHECK_THREAD) && t->owner != &g_thread_tag) {
        /* Another thread's tape: nothing of it is written here but the flag its owner
         * reads at its next call. */
        atomic_store_explicit(&t->foreign_use, 1, memory_order_relaxed);
        return true;
    }
    if (t->ctx->dead) {
        cr__tape_fail(t, CR_EMISUSE, "tape used after cr_ctx_free of its context");
        return true;
    }
    if (atomic_load_explicit(&t->foreign_use, memory_order_relaxed) != 0) {
        atomic_store_explicit(&t->foreign_use, 0, memory_order_relaxed);
        cr__tape_fail(t, CR_EMISUSE,
                      "tape used from a thread other than its owner (tapes are thread-confined; "
                      "a tape handed over is adopted with cr_tape_adopt)");
        return true;
    }
    return false;
}

cr_status cr_tape_adopt(cr_tape *t)
{
    if (t == NULL)
        return CR_EINVAL;
    if (t->checks == 0)
        return CR_OK;
    if (t->magic == CR__TAPE_FREED)
        return CR_EMISUSE;
    t->owner = &g_thread_tag;
    return CR_OK;
}

cr_status cr__tape_fail(cr_tape *t, cr_status st, const char *fmt, ...)
{
    if (t->status != CR_OK)
        return t->status; /* the first failure wins */
    t->status = st;
    t->slow = 1;
    t->rlim = NULL; /* an open cursor records through the exported functions now */
    set_fast(t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->errmsg, sizeof t->errmsg, fmt, ap);
    va_end(ap);
    cr_ctx_error(t->ctx, st, "%s", t->errmsg);
    return st;
}

cr_status cr__tape_fail_ctx(cr_tape *t, cr_status st, const char *what)
{
    const char *msg = cr_ctx_errmsg(t->ctx);
    if (cr_ctx_errcode(t->ctx) == st && msg[0] != '\0')
        return cr__names(msg, what) ? cr__tape_fail(t, st, "%s", msg)
                                    : cr__tape_fail(t, st, "%s: %s", what, msg);
    return cr__tape_fail(t, st, "%s: %s", what, cr_status_str(st));
}

cr_status cr_tape_status(const cr_tape *t)
{
    return t == NULL ? CR_EINVAL : t->status;
}

const char *cr_tape_errmsg(const cr_tape *t)
{
    return t == NULL ? "" : t->errmsg;
}

void cr_tape_clear_error(cr_tape *t)
{
    if (t == NULL || cr__tape_misused(t))
        return;
    t->status = CR_OK;
    t->slow = slow_base(t);
    t->errmsg[0] = '\0';
    set_fast(t);
}

/* ---- Creation ------------------------------------------------------------------------- */

/* An empty record stream: the tape's own first chunk when it has one (no allocation at
 * each reset), else none until the first record. Sets the inline operations' fast path. */
static void start_stream(cr_tape *t)
{
    cr__chunk *c = t->own_chunk;
    t->record_words = 0;
    t->next_words = t->first_words;
    if (c != NULL) {
        c->prev = c->next = NULL;
        c->end = c->base;
        t->chunk = t->first = c;
        t->cur = c->base;
        t->lim = c->base + FIRST_CHUNK_WORDS;
        t->next_words *= 2; /* as grow() leaves it after a first chunk */
    } else {
        t->chunk = t->first = NULL;
        t->cur = t->lim = &t->dummy;
    }
    /* A cursor open before (on the old recording) records through the exported functions
     * from now on (cr_rec_apply2: not open). */
    t->rec_open = false;
    t->rlim = NULL;
    set_fast(t);
}

/* Bytes of a tape made by cr_tape_new: the struct, and its own first chunk unless the
 * records go to a caller buffer. */
static size_t tape_bytes(bool own_chunk)
{
    return own_chunk ? sizeof(cr_tape) + sizeof(cr__chunk) + FIRST_CHUNK_WORDS * sizeof(cr__word)
                     : sizeof(cr_tape);
}

static void tape_init(cr_tape *t, cr_ctx *ctx, cr_arena *arena, bool own, const cr_engine *eng,
                      const cr_config *config, uint32_t flags)
{
    memset(t, 0, sizeof *t);
    t->ctx = ctx;
    t->arena = arena;
    t->own_arena = own;
    t->engine = eng;
    t->config = config;
    if (flags & CR_TAPE_SECOND_ORDER)
        flags |= CR_TAPE_FORWARD;
    t->flags = flags;
    t->pre = (flags & CR_TAPE_FORWARD) ? 1u : 0u;
    t->slow = (flags & CR_TAPE_SECOND_ORDER) != 0;
    t->first_words = FIRST_CHUNK_WORDS;
    t->id = new_id(t);
    start_stream(t);
}

cr_status cr__tape_open(cr_ctx *ctx, const cr_tape_params *params, cr__config_of_fn config_of,
                        cr_tape **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "cr_tape_new: out is NULL");
    *out = NULL;
    if (ctx == NULL)
        return CR_EINVAL;
    cr_tape_params p = {0};
    if (params != NULL) {
        size_t n = params->struct_size == 0 ? sizeof p : params->struct_size;
        if (n != sizeof p) /* one version so far: a smaller size cuts a field */
            return cr_ctx_error(ctx, CR_EINVAL, "cr_tape_new: unknown struct_size %zu", n);
        memcpy(&p, params, n);
    }
    if (p.flags & ~(uint32_t)(CR_TAPE_FORWARD | CR_TAPE_SECOND_ORDER | CR_TAPE_CHECK_FINITE))
        return cr_ctx_error(ctx, CR_EINVAL, "cr_tape_new: unknown flags 0x%x", p.flags);
    cr_arena *arena;
    cr_arena_params ap = {.struct_size = sizeof ap,
                          .buffer = p.buffer,
                          .buffer_size = p.buffer_size,
                          .block_size = p.block_size};
    cr_status st = cr_arena_new(ctx, &ap, &arena);
    if (st != CR_OK)
        return st;
    bool own_chunk = p.buffer == NULL;
    cr_tape *t = cr_ctx_alloc(ctx, tape_bytes(own_chunk));
    if (t == NULL) {
        cr_arena_free(arena);
        return CR_ENOMEM;
    }
    tape_init(t, ctx, arena, true, p.engine, config_of(p.engine),
              p.flags & ~(uint32_t)CR_TAPE_CHECK_FINITE);
    if ((p.flags & CR_TAPE_CHECK_FINITE) || (ctx->checks & CR_CTX_CHECK_FINITE)) {
        t->check_finite = true;
        t->slow = 1;
        set_fast(t);
    }
    if ((ctx->checks & CR_CTX_CHECK_TAPES) != 0) { /* every operation through the library */
        t->checks = ctx->checks & CR_CTX_CHECK_TAPES;
        t->owner = &g_thread_tag;
        t->slow = 1;
        set_fast(t);
        if (ctx->checks & CR_CTX_CHECK_FREED)
            ctx->live_tapes++;
    }
    if (own_chunk) {
        cr__chunk *c = (cr__chunk *)(void *)(t + 1);
        c->base = (cr__word *)(void *)(c + 1);
        c->stop = hdr_make(K_STOP, 0, 0);
        t->own_chunk = c;
        start_stream(t);
    }
    *out = t;
    return CR_OK;
}

cr_status cr__tape_new_in(cr_arena *arena, const cr_engine *eng, const cr_config *config,
                          uint32_t flags, cr_tape **out)
{
    cr_tape *t = cr_arena_alloc(arena, sizeof *t, _Alignof(cr_tape));
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    tape_init(t, cr_arena_ctx(arena), arena, false, eng, config, flags);
    *out = t;
    return CR_OK;
}

void cr_tape_free(cr_tape *t)
{
    if (t == NULL || (t->checks != 0 && t->magic == CR__TAPE_FREED))
        return;
    if ((t->checks & CR_CTX_CHECK_THREAD) && t->owner != &g_thread_tag) {
        (void)cr__tape_check(t); /* another thread's: flagged for its owner, not freed */
        return;
    }
    if (g_current == t)
        g_current = NULL;
    if (t->checks & CR_CTX_CHECK_FREED) {
        /* Release what the tape holds, keep its struct poisoned: a failed tape whose every
         * call stops at cr__tape_check, in the context's quarantine. */
        cr_ctx *ctx = t->ctx;
        size_t bytes = tape_bytes(t->own_chunk != NULL);
        cr_arena_free(t->arena);
        cr_ctx_dealloc(ctx, t->ws, t->ws_cap * sizeof *t->ws);
        t->arena = NULL;
        t->ws = NULL;
        t->ws_cap = t->ws_dirty = 0;
        t->chunk = t->first = t->own_chunk = NULL;
        t->cur = t->lim = &t->dummy;
        t->rlim = NULL;
        t->rec_open = false;
        t->nvars = 0;
        t->naslots = 0;
        t->status = CR_OK;
        cr__tape_fail(t, CR_EMISUSE, "tape used after cr_tape_free");
        t->magic = CR__TAPE_FREED;
        cr__ctx_quarantine(ctx, &t->qnode, t, bytes);
        return;
    }
    if (t->own_arena) {
        cr_arena_free(t->arena);
        cr_ctx_dealloc(t->ctx, t->ws, t->ws_cap * sizeof *t->ws);
        cr_ctx_dealloc(t->ctx, t, tape_bytes(t->own_chunk != NULL));
    }
}

void cr_tape_reset(cr_tape *t)
{
    if (t == NULL || cr__tape_misused(t))
        return;
    if (t->own_arena)
        cr_arena_reset(t->arena);
    t->nvars = 0;
    t->ninputs = 0;
    t->aslots = t->aslot_few; /* the first array variables' slots (array_slots.c) */
    t->aslot_cap = CR__ASLOT_FEW;
    t->naslots = 0;
    t->status = CR_OK;
    t->slow = slow_base(t);
    t->errmsg[0] = '\0';
    t->nlabels = 0;
    t->id = new_id(t);
    start_stream(t);
}

void cr__tape_make_replay(cr_tape *t)
{
    t->flags |= CR_TAPE_FORWARD;
    t->pre = 2;
    t->slow = 1;
    set_fast(t);
}

/* ---- Checking mode: non-finite values from finite inputs ---------------------------------- */

void cr_tape_set_check_finite(cr_tape *t, bool on)
{
    if (t == NULL || cr__tape_misused(t))
        return;
    t->check_finite = on;
    if (t->status == CR_OK)
        t->slow = slow_base(t);
    set_fast(t);
}

bool cr_tape_check_finite(const cr_tape *t)
{
    return t != NULL && t->check_finite;
}

void cr_tape_push_label(cr_tape *t, const char *label)
{
    if (t == NULL || cr__tape_misused(t))
        return;
    if (t->nlabels < CR_TAPE_MAX_LABELS)
        t->labels[t->nlabels] = label != NULL ? label : "?";
    if (t->nlabels < UINT32_MAX)
        t->nlabels++;
}

void cr_tape_pop_label(cr_tape *t)
{
    if (t == NULL || cr__tape_misused(t))
        return;
    if (t->nlabels > 0)
        t->nlabels--;
}

/* A text buffer that truncates. */
typedef struct msgbuf {
    char *p;
    size_t n, cap;
} msgbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
mb_put(msgbuf *b, const char *fmt, ...)
{
    if (b->n + 1 >= b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        b->n = b->n + (size_t)k < b->cap ? b->n + (size_t)k : b->cap - 1;
}

/* The shortest of %.15g, %.16g and %.17g that reads back as v. */
static void mb_num(msgbuf *b, double v)
{
    char tmp[40];
    if (isnan(v)) { /* whatever its sign bit */
        mb_put(b, "nan");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (!isfinite(v) || strtod(tmp, NULL) == v)
            break;
    }
    mb_put(b, "%s", tmp);
}

/* " (in a > b > c)", from the labels pushed. */
static void mb_labels(msgbuf *b, const cr_tape *t)
{
    if (t->nlabels == 0)
        return;
    size_t kept = t->nlabels < CR_TAPE_MAX_LABELS ? t->nlabels : CR_TAPE_MAX_LABELS;
    mb_put(b, " (in ");
    for (size_t i = 0; i < kept; i++)
        mb_put(b, "%s%s", i > 0 ? " > " : "", t->labels[i]);
    if (t->nlabels > kept)
        mb_put(b, " > %lu more", (unsigned long)(t->nlabels - kept));
    mb_put(b, ")");
}

cr_status cr__tape_check_finite(cr_tape *t, const char *what, const double *x, size_t nx,
                                const double *y, size_t n)
{
    if (!t->check_finite || t->status != CR_OK)
        return t->status;
    size_t o = 0;
    while (o < n && isfinite(y[o]))
        o++;
    if (o == n)
        return CR_OK;
    for (size_t j = 0; j < nx; j++)
        if (!isfinite(x[j]))
            return CR_OK; /* not born here */
    char text[CR__TAPE_MSG];
    msgbuf b = {text, 0, sizeof text};
    /* The arithmetic rows (+ - * /) as "x op y", the others as "name(x, ...)". */
    bool infix = nx == 2 && what[0] != '\0' && what[1] == '\0' && strchr("+-*/", what[0]);
    char op[4] = {' ', what[0], ' ', '\0'};
    mb_put(&b, "non-finite value: %s%s", infix ? "" : what, infix ? "" : "(");
    for (size_t j = 0; j < nx; j++) {
        mb_put(&b, "%s", j == 0 ? "" : infix ? op : ", ");
        mb_num(&b, x[j]);
    }
    mb_put(&b, "%s = %s", infix ? "" : ")", n > 1 ? "(" : "");
    for (size_t k = 0; k < n; k++) {
        mb_put(&b, "%s", k > 0 ? ", " : "");
        mb_num(&b, y[k]);
    }
    mb_put(&b, "%s", n > 1 ? ")" : "");
    mb_labels(&b, t);
    return cr__tape_fail(t, CR_ENONFINITE, "%s", text);
}

/* The elements of a float value (f64, f32, c128 scalars and arrays; other kinds have none):
 * calls fn on each (re, and im for a complex one) until it returns false. */
typedef bool (*elem_fn)(void *env, double re, double im, bool cplx);

static void each_elem(const cr_value *v, elem_fn fn, void *env)
{
    switch (v->kind) {
    case CR_KIND_F64:
        fn(env, v->u.f64, 0.0, false);
        return;
    case CR_KIND_F32:
        fn(env, (double)v->u.f32, 0.0, false);
        return;
    case CR_KIND_C128: {
        cr_complex z = v->u.c128;
        fn(env, creal(z), cimag(z), true);
        return;
    }
    case CR_KIND_ARRAY:
        break;
    default:
        return;
    }
    const cr_array *a = v->u.arr;
    if (a == NULL || a->data == NULL || !cr_dtype_is_float((cr_dtype)a->dtype))
        return;
    size_t idx[CR_ARRAY_MAX_DIMS] = {0};
    for (size_t d = 0; d < a->ndim; d++)
        if (a->shape[d] == 0)
            return;
    for (;;) {
        ptrdiff_t off = 0;
        for (size_t d = 0; d < a->ndim; d++)
            off += (ptrdiff_t)idx[d] * a->strides[d];
        bool go;
        if (a->dtype == CR_DT_F64) {
            go = fn(env, ((const double *)a->data)[off], 0.0, false);
        } else if (a->dtype == CR_DT_F32) {
            go = fn(env, (double)((const float *)a->data)[off], 0.0, false);
        } else {
            cr_complex z = ((const cr_complex *)a->data)[off];
            go = fn(env, creal(z), cimag(z), true);
        }
        if (!go)
            return;
        size_t d = 0;
        while (d < a->ndim && ++idx[d] == a->shape[d])
            idx[d++] = 0;
        if (d == a->ndim)
            return;
    }
}

typedef struct find_bad {
    size_t k;      /* elements seen */
    size_t at;     /* the first non-finite one, or SIZE_MAX */
    double re, im; /* its value */
    bool cplx;
} find_bad;

static bool find_bad_elem(void *env, double re, double im, bool cplx)
{
    find_bad *f = env;
    if (!isfinite(re) || !isfinite(im)) {
        f->at = f->k;
        f->re = re;
        f->im = im;
        f->cplx = cplx;
        return false;
    }
    f->k++;
    return true;
}

static void mb_elem(msgbuf *b, double re, double im, bool cplx)
{
    if (!cplx) {
        mb_num(b, re);
        return;
    }
    mb_put(b, "(");
    mb_num(b, re);
    mb_put(b, "%s", signbit(im) ? " - " : " + ");
    mb_num(b, fabs(im));
    mb_put(b, "i)");
}

typedef struct show_elems {
    msgbuf *b;
    size_t k;
} show_elems;

enum { SHOW_ELEMS = 4 };

static bool show_elem(void *env, double re, double im, bool cplx)
{
    show_elems *s = env;
    if (s->k == SHOW_ELEMS) {
        mb_put(s->b, ", ...");
        return false;
    }
    mb_put(s->b, "%s", s->k > 0 ? ", " : "");
    mb_elem(s->b, re, im, cplx);
    s->k++;
    return true;
}

/* A value in a message: a number, or an array's first elements and its element count. */
static void mb_value(msgbuf *b, const cr_value *v)
{
    if (v->kind != CR_KIND_ARRAY) {
        show_elems s = {b, 0};
        if (v->kind == CR_KIND_F64 || v->kind == CR_KIND_F32 || v->kind == CR_KIND_C128)
            each_elem(v, show_elem, &s);
        else if (v->kind == CR_KIND_FUNC && v->u.func.fn != NULL)
            mb_put(b, "%s", v->u.func.fn->name);
        else
            mb_put(b, "%s", cr_kind_name(v->kind));
        return;
    }
    size_t numel = 1;
    for (size_t d = 0; d < v->u.arr->ndim; d++)
        numel *= v->u.arr->shape[d];
    show_elems s = {b, 0};
    mb_put(b, "[");
    each_elem(v, show_elem, &s);
    mb_put(b, "] (%zu element%s)", numel, numel == 1 ? "" : "s");
}

cr_status cr__tape_check_finite_values(cr_tape *t, const char *what, const cr_value *in, size_t nin,
                                       const cr_value *out, size_t nout)
{
    if (!t->check_finite || t->status != CR_OK)
        return t->status;
    size_t o = 0;
    find_bad bad = {0, SIZE_MAX, 0.0, 0.0, false};
    for (; o < nout; o++) {
        bad.k = 0;
        each_elem(&out[o], find_bad_elem, &bad);
        if (bad.at != SIZE_MAX)
            break;
    }
    if (o == nout)
        return CR_OK;
    for (size_t j = 0; j < nin; j++) {
        find_bad src = {0, SIZE_MAX, 0.0, 0.0, false};
        each_elem(&in[j], find_bad_elem, &src);
        if (src.at != SIZE_MAX)
            return CR_OK; /* not born here */
    }
    char text[CR__TAPE_MSG];
    msgbuf b = {text, 0, sizeof text};
    mb_put(&b, "non-finite value: %s(", what);
    for (size_t j = 0; j < nin; j++) {
        mb_put(&b, "%s", j > 0 ? ", " : "");
        mb_value(&b, &in[j]);
    }
    mb_put(&b, ") = ");
    mb_value(&b, &out[o]);
    if (nout > 1)
        mb_put(&b, " (result %zu)", o + 1);
    if (out[o].kind == CR_KIND_ARRAY) {
        mb_put(&b, ", element %zu is ", bad.at);
        mb_elem(&b, bad.re, bad.im, bad.cplx);
    }
    mb_labels(&b, t);
    return cr__tape_fail(t, CR_ENONFINITE, "%s", text);
}

cr_ctx *cr_tape_ctx(const cr_tape *t)
{
    return t == NULL ? NULL : t->ctx;
}

cr_arena *cr_tape_arena(cr_tape *t)
{
    return t == NULL ? NULL : t->arena;
}

cr_status cr_tape_stats_get(const cr_tape *t, cr_tape_stats *out)
{
    if (t == NULL || out == NULL)
        return CR_EINVAL;
    if (t->rec_open) /* the cursor's records since it last left the library are not counted */
        return cr_ctx_error(t->ctx, CR_EMISUSE,
                            "cr_tape_stats_get: a recording cursor is open on the tape (close it "
                            "first: cr_rec_close)");
    size_t words = t->record_words;
    if (t->chunk != NULL)
        words += (size_t)(t->cur - t->chunk->base);
    out->nvars = t->nvars;
    out->ninputs = t->ninputs;
    size_t nrec = 0;
    for (const cr__chunk *c = t->chunk; c != NULL; c = c->prev) {
        const cr__word *p = c == t->chunk ? t->cur : c->end;
        while (p > c->base) {
            uint64_t h = p[-1].u;
            p -= rec_words(h) + t->pre;
            nrec += hdr_kind(h) == K_INPUT ? hdr_a(h) : 1; /* one operation per input */
        }
    }
    out->nrecords = nrec;
    out->record_bytes = words * sizeof(cr__word);
    out->arena_bytes = cr_arena_capacity(t->arena);
    return CR_OK;
}

size_t cr_tape_node_overhead(void)
{
    return 3 * sizeof(cr__word);
}

/* ---- The record stream ------------------------------------------------------------------ */

/* Start a new chunk with room for at least `need` words. */
static NOINLINE cr_status grow(cr_tape *t, size_t need)
{
    if (t->status != CR_OK)
        return t->status;
    if (t->rec_open) /* lim is cur while a cursor is open: every other record comes here */
        return cr__tape_fail(t, CR_EMISUSE,
                             "tape: a record made on the tape while a recording cursor is open "
                             "(record through the cursor, cr_rec_call1/2, or close it first)");
    size_t words = t->next_words;
    if (words < need)
        words = need;
    /* Each record takes at least one word and makes one variable (GENERIC records check
     * their own count), so a chunk of `words` words cannot pass the variable limit. */
    size_t left = CR_TAPE_MAX_VARS - 1 - t->nvars;
    if (words > left)
        words = left;
    if (words < need)
        return cr__tape_fail(t, CR_EOVERFLOW, "tape: more than %zu variable%s in one recording",
                             CR_TAPE_MAX_VARS - 1, CR__S(CR_TAPE_MAX_VARS - 1));
    size_t align =
        _Alignof(cr__word) > _Alignof(cr__chunk) ? _Alignof(cr__word) : _Alignof(cr__chunk);
    /* A caller buffer may still hold a smaller chunk: halve to what it holds before asking
     * (a failed attempt would leave CR_EARENA on the context of a recording that goes on). */
    size_t room = cr__arena_room(t->arena, align);
    while (words / 2 >= need + 64 &&
           (room < sizeof(cr__chunk) || (room - sizeof(cr__chunk)) / sizeof(cr__word) < words))
        words /= 2;
    cr__chunk *c = cr_arena_alloc(t->arena, sizeof(cr__chunk) + words * sizeof(cr__word), align);
    if (c == NULL) {
        cr_status st = CR__ALLOC_STATUS(t->arena);
        return cr__tape_fail_ctx(t, st == CR_OK ? CR_ENOMEM : st, "tape: no room for records");
    }
    if (t->chunk != NULL) {
        t->chunk->end = t->cur;
        t->record_words += (size_t)(t->cur - t->chunk->base);
    }
    c->prev = t->chunk;
    c->next = NULL;
    if (t->chunk != NULL)
        t->chunk->next = c;
    else
        t->first = c;
    c->base = (cr__word *)(void *)(c + 1);
    c->stop = hdr_make(K_STOP, 0, 0);
    c->end = c->base;
    t->chunk = c;
    t->cur = c->base;
    t->lim = c->base + words;
    if (t->next_words < MAX_CHUNK_WORDS)
        t->next_words *= 2;
    return CR_OK;
}

cr_status cr__tape_grow(cr_tape *t, size_t need)
{
    return grow(t, need);
}

static inline cr_var new_var(cr_tape *t, double v)
{
    cr_var r;
    r.v = v;
    r.idx = t->nvars;
    r.tape = t->id;
    t->hot.vt.key += CR__TAPE_KEY_ONE; /* nvars + 1, stored as the key word (set_fast) */
    return r;
}

/* The words in front of a record's payload: on forward tapes a copy of the header, on
 * replay tapes also the replay information (t->rinfo). */
static inline cr__word *lead(const cr_tape *t, cr__word *w, uint64_t h)
{
    if (t->pre) {
        (w++)->u = h;
        if (t->pre > 1)
            (w++)->cp = t->rinfo;
    }
    return w;
}

/* A record with no payload. */
static cr_var emit0(cr_tape *t, double y, unsigned kind, uint32_t a, uint32_t b)
{
    if (!cr__tape_room(t, 1 + t->pre) && grow(t, 1 + t->pre) != CR_OK)
        return cr__nan_const();
    uint64_t h = hdr_make(kind, a, b);
    cr__word *w = lead(t, t->cur, h);
    (w++)->u = h;
    t->cur = w;
    if (kind == K_GUARD)
        return cr_const(y);
    return new_var(t, y);
}

/* A replay tape's record of m variable operands vm with partials pm: never compacted
 * (the partials change when it is replayed), the row and constants in t->rinfo. */
static cr_var emit_replay(cr_tape *t, double y, size_t m, const uint32_t *vm, const double *pm)
{
    size_t nops = m > 2 ? (m + 1) / 2 : 0;
    size_t need = t->pre + m + nops + 1;
    if (!cr__tape_room(t, need) && grow(t, need) != CR_OK)
        return cr__nan_const();
    unsigned kind = m == 1 ? K_UNARY : m == 2 ? K_BINARY : K_NARY;
    uint64_t h =
        m <= 2 ? hdr_make(kind, vm[0], m == 2 ? vm[1] : 0) : hdr_make(kind, (uint32_t)m, 0);
    cr__word *w = lead(t, t->cur, h);
    for (size_t j = 0; j < m; j++)
        (w++)->d = pm[j];
    for (size_t j = 0; j < nops * 2; j += 2)
        (w++)->u = (uint64_t)vm[j] | (j + 1 < m ? (uint64_t)vm[j + 1] << 32 : 0);
    (w++)->u = h;
    t->cur = w;
    return new_var(t, y);
}

/* A linear record of one operand with partial p (first order, or zero Hessian). */
static inline cr_var emit_unary(cr_tape *t, double y, double p, uint32_t a)
{
    if (p == 1.0)
        return emit0(t, y, K_COPY, a, 0);
    if (p == -1.0)
        return emit0(t, y, K_NEG, a, 0);
    if (!cr__tape_room(t, 2 + t->pre) && grow(t, 2 + t->pre) != CR_OK)
        return cr__nan_const();
    uint64_t h = hdr_make(K_UNARY, a, 0);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    (w++)->d = p;
    (w++)->u = h;
    t->cur = w;
    return new_var(t, y);
}

/* A record of two operands with partials p0, p1 and no second derivatives, or the MUL
 * kind (Hessian (0 1; 1 0)) on a second-order tape. */
static inline cr_var emit_binary(cr_tape *t, double y, double p0, double p1, uint32_t a, uint32_t b,
                                 unsigned kind)
{
    if (kind == K_BINARY && p0 == 1.0) {
        if (p1 == 1.0)
            return emit0(t, y, K_ADD, a, b);
        if (p1 == -1.0)
            return emit0(t, y, K_SUB, a, b);
    }
    if (!cr__tape_room(t, 3 + t->pre) && grow(t, 3 + t->pre) != CR_OK)
        return cr__nan_const();
    uint64_t h = hdr_make(kind, a, b);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    (w++)->d = p0;
    (w++)->d = p1;
    (w++)->u = h;
    t->cur = w;
    return new_var(t, y);
}

/* The record of one operand v with partial p and second derivative h (second-order tapes;
 * a linear one, h = 0, is the first-order record). */
static inline cr_var emit_one2(cr_tape *t, double y, double p, double h2, uint32_t v)
{
    if (h2 == 0.0)
        return emit_unary(t, y, p, v);
    if (!cr__tape_room(t, 3 + t->pre) && grow(t, 3 + t->pre) != CR_OK)
        return cr__nan_const();
    uint64_t h = hdr_make(K_UNARY2, v, 0);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    (w++)->d = h2;
    (w++)->d = p;
    (w++)->u = h;
    t->cur = w;
    return new_var(t, y);
}

/* The record of two distinct operands v0, v1 with partials p0, p1 and the 2 x 2 Hessian H
 * (row-major): the first-order record when H = 0, MUL when H = [0 1; 1 0]. */
static inline cr_var emit_two2(cr_tape *t, double y, double p0, double p1, uint32_t v0, uint32_t v1,
                               const double *H)
{
    if (H[0] == 0.0 && H[1] == 0.0 && H[2] == 0.0 && H[3] == 0.0)
        return emit_binary(t, y, p0, p1, v0, v1, K_BINARY);
    if (H[0] == 0.0 && H[3] == 0.0 && H[1] == 1.0 && H[2] == 1.0)
        return emit_binary(t, y, p0, p1, v0, v1, K_MUL);
    if (!cr__tape_room(t, 6 + t->pre) && grow(t, 6 + t->pre) != CR_OK)
        return cr__nan_const();
    uint64_t h = hdr_make(K_BINARY2, v0, v1);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    (w++)->d = H[0];
    (w++)->d = 0.5 * (H[1] + H[2]);
    (w++)->d = H[3];
    (w++)->d = p0;
    (w++)->d = p1;
    (w++)->u = h;
    t->cur = w;
    return new_var(t, y);
}

/*
 * The general record of k variable operands (indices vi; k <= CR__MAX_GENERIC_ARGS) with
 * partials p and, when H is not NULL, the k x k Hessian H (row-major, symmetric) of the
 * result in those operands. Picks the compact kinds when the values allow. scratch: k^2
 * doubles when k > CR_SCALAR_MAX_IN and H is not NULL (else unused, may be NULL).
 */
cr_var cr__emit_general(cr_tape *t, double y, size_t k, const uint32_t *vi, const double *p,
                        const double *H, double *scratch)
{
    double pm[CR__MAX_GENERIC_ARGS], Hsmall[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
    double *Hm = k <= CR_SCALAR_MAX_IN ? Hsmall : scratch;
    uint32_t vm[CR__MAX_GENERIC_ARGS];
    /* An operand that appears twice (x * x) is one operand whose partial is the sum, and
     * whose second derivative sums the block. */
    size_t m = 0;
    size_t map[CR__MAX_GENERIC_ARGS];
    for (size_t j = 0; j < k; j++) {
        size_t r = m;
        for (size_t q = 0; q < m; q++)
            if (vm[q] == vi[j])
                r = q;
        if (r == m) {
            vm[m] = vi[j];
            pm[m] = 0.0;
            m++;
        }
        map[j] = r;
        pm[r] += p[j];
    }
    bool second = H != NULL;
    bool linear = true;
    if (second) {
        for (size_t q = 0; q < m * m; q++)
            Hm[q] = 0.0;
        for (size_t j = 0; j < k; j++)
            for (size_t l = 0; l < k; l++)
                Hm[map[j] * m + map[l]] += H[j * k + l];
        for (size_t q = 0; q < m * m; q++)
            if (Hm[q] != 0.0)
                linear = false;
    }
    if (m == 1)
        return linear ? emit_unary(t, y, pm[0], vm[0]) : emit_one2(t, y, pm[0], Hm[0], vm[0]);
    if (m == 2)
        return linear ? emit_binary(t, y, pm[0], pm[1], vm[0], vm[1], K_BINARY)
                      : emit_two2(t, y, pm[0], pm[1], vm[0], vm[1], Hm);
    /* n-ary: [Hessian triangle][partials][operands, two per word][header] */
    size_t need = linear ? cr__general_words(t, m) - m * (m + 1) / 2 : cr__general_words(t, m);
    if (!cr__tape_room(t, need) && grow(t, need) != CR_OK)
        return cr__nan_const();
    unsigned kind = linear ? K_NARY : K_NARY2;
    uint64_t h = hdr_make(kind, (uint32_t)m, 0);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    for (size_t j = 0; j < m && !linear; j++)
        for (size_t l = j; l < m; l++)
            (w++)->d = 0.5 * (Hm[j * m + l] + Hm[l * m + j]);
    for (size_t j = 0; j < m; j++)
        (w++)->d = pm[j];
    for (size_t j = 0; j < m; j += 2)
        (w++)->u = (uint64_t)vm[j] | (j + 1 < m ? (uint64_t)vm[j + 1] << 32 : 0);
    (w++)->u = h;
    t->cur = w;
    return new_var(t, y);
}

/* ---- Operations on scalar rows ---------------------------------------------------------- */

cr_var cr__tape_foreign(cr_tape *t, const char *fname, cr_var x)
{
    if (t->rec_open && x.tape == t->id) { /* a variable the open cursor made */
        cr__tape_fail(t, CR_EMISUSE,
                      "tape: a record made on the tape while a recording cursor is open "
                      "(record through the cursor, cr_rec_call1/2, or close it first)");
        return cr__nan_const();
    }
    if (x.tape == t->id)
        cr__tape_fail(t, CR_ETAPE,
                      "%s: variable %u is past this recording's %u variable%s (forged, or of "
                      "this tape before its last reset)",
                      fname, (unsigned)x.idx, (unsigned)t->nvars, CR__S((unsigned)t->nvars));
    cr__tape_fail(t, CR_ETAPE,
                  "%s: variable %u belongs to another tape, or to this tape before its last "
                  "reset (tape id %u, this recording is %u)",
                  fname, (unsigned)x.idx, (unsigned)x.tape, (unsigned)t->id);
    return cr__nan_const();
}

/* The replay tape's records of a row's results: operands merged as in emit_general, and
 * for each result the information to evaluate it again (row, result index, which argument
 * is which operand, the constants). */
static cr_status record_replay(cr_tape *t, const cr_scalar_rule *row, const cr_var *args,
                               const double *x, const double *Y, const double *D, cr_var *out,
                               const uint32_t *vi, const size_t *slot, size_t k)
{
    size_t nin = row->nin, m = 0;
    uint32_t vm[CR_SCALAR_MAX_IN];
    int8_t map[CR_SCALAR_MAX_IN];
    for (size_t j = 0; j < nin; j++)
        map[j] = -1;
    for (size_t q = 0; q < k; q++) {
        size_t r = m;
        for (size_t u = 0; u < m; u++)
            if (vm[u] == vi[q])
                r = u;
        if (r == m)
            vm[m++] = vi[q];
        map[slot[q]] = (int8_t)r;
    }
    (void)args;
    for (size_t o = 0; o < row->nout; o++) {
        cr__rinfo *info = cr_arena_alloc(t->arena, sizeof *info, _Alignof(cr__rinfo));
        if (info == NULL)
            return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), "tape: replay information");
        info->row = row;
        info->o = (uint8_t)o;
        info->nin = (uint8_t)nin;
        info->outcome = false;
        double pm[CR_SCALAR_MAX_IN] = {0};
        for (size_t j = 0; j < nin; j++) {
            info->map[j] = map[j];
            info->c[j] = x[j];
            if (map[j] >= 0)
                pm[map[j]] += D[o * nin + j];
        }
        t->rinfo = info;
        out[o] = emit_replay(t, Y[o], m, vm, pm);
    }
    return t->status;
}

/*
 * Record a row's results for arguments args (nin of them), whose values were evaluated:
 * Y (nout) and D (nout x nin). Constants are dropped from the records.
 */
cr_status cr__record_evaluated(cr_tape *t, const char *fname, const cr_scalar_rule *row,
                               const cr_var *args, const double *x, const double *Y,
                               const double *D, cr_var *out)
{
    size_t nin = row->nin, nout = row->nout;
    uint32_t vi[CR_SCALAR_MAX_IN];
    size_t slot[CR_SCALAR_MAX_IN], k = 0;
    unsigned cols = 0;
    for (size_t j = 0; j < nin; j++) {
        if (args[j].idx == CR_VAR_CONST)
            continue;
        if (!cr__var_ours(t, args[j])) {
            cr__tape_foreign(t, fname, args[j]);
            return t->status;
        }
        vi[k] = args[j].idx;
        slot[k] = j;
        cols |= 1u << j;
        k++;
    }
    if (k == 0) {
        for (size_t o = 0; o < nout; o++)
            out[o] = cr_const(Y[o]);
        return CR_OK;
    }
    if (t->pre > 1)
        return record_replay(t, row, args, x, Y, D, out, vi, slot, k);
    double Hfull[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
    bool second = (t->flags & CR_TAPE_SECOND_ORDER) != 0;
    if (second)
        cr__row_hessian(row, x, D, Hfull, cols);
    for (size_t o = 0; o < nout; o++) {
        double p[CR_SCALAR_MAX_IN], H[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
        for (size_t j = 0; j < k; j++) {
            p[j] = D[o * nin + slot[j]];
            for (size_t l = 0; l < k && second; l++)
                H[j * k + l] = Hfull[(o * nin + slot[j]) * nin + slot[l]];
        }
        if (!second && k == 1)
            out[o] = emit_unary(t, Y[o], p[0], vi[0]);
        else if (!second && k == 2 && vi[0] != vi[1])
            out[o] = emit_binary(t, Y[o], p[0], p[1], vi[0], vi[1], K_BINARY);
        else
            out[o] = cr__emit_general(t, Y[o], k, vi, p, second ? H : NULL, NULL);
    }
    return t->status;
}

/* The row of a built-in function value (set by the scalar-rule table). */
static inline const cr_scalar_rule *row_of(const cr_value *f)
{
    return (const cr_scalar_rule *)f->u.func.fn->udata;
}

/* The tape of a call (NULL: the current one); NULL too when a checked tape's call must not
 * go on (cr__tape_misused): the callers' answer to no tape, a NaN constant or CR_EMISUSE. */
static inline cr_tape *tape_or_current(cr_tape *t)
{
    t = t != NULL ? t : g_current;
    return t != NULL && cr__tape_misused(t) ? NULL : t;
}

/* Whether t is a second-order tape on which the arithmetic operations take op_second: not
 * failed, not a replay tape (whose records op2_slow makes). */
static inline bool second_fast(const cr_tape *t)
{
    return (t->flags & CR_TAPE_SECOND_ORDER) != 0 && t->status == CR_OK && t->pre <= 1 &&
           !t->check_finite;
}

/*
 * An arithmetic operation on a second-order tape, its arguments variables of this
 * recording or constants (at least one variable). Value and partials from the row (ev),
 * second derivatives by the complex step on the row's body over complex numbers (hcol,
 * arith_second.h: the same definition, expanded inline), the record written directly:
 * what record_evaluated and cr__row_hessian compute through the row's pointers, about five
 * times faster per operation on Rosenbrock's scalar loop.
 */
static ALWAYS_INLINE cr_var op_second(cr_tape *t, cr_scalar_eval_f64 ev, cr__hcol_fn hcol,
                                      const cr_var *args, size_t nin)
{
    double x[2], Y[1], D[2], p[2] = {0.0, 0.0}, H[4] = {0.0, 0.0, 0.0, 0.0};
    uint32_t vi[2] = {0, 0};
    size_t slot[2] = {0, 0}, k = 0;
    for (size_t j = 0; j < nin; j++) {
        x[j] = args[j].v;
        if (args[j].idx != CR_VAR_CONST) {
            vi[k] = args[j].idx;
            slot[k++] = j;
        }
    }
    ev(x, Y, D);
    for (size_t l = 0; l < k; l++) {
        double col[2] = {0.0, 0.0};
        hcol(x, slot[l], 1.0, col);
        for (size_t j = 0; j < k; j++)
            H[j * k + l] = col[slot[j]];
    }
    for (size_t j = 0; j < k; j++)
        p[j] = D[slot[j]];
    if (k == 1)
        return emit_one2(t, Y[0], p[0], H[0], vi[0]);
    if (vi[0] == vi[1]) /* x op x: one operand, the partials and the block summed */
        return emit_one2(t, Y[0], p[0] + p[1], H[0] + H[1] + H[2] + H[3], vi[0]);
    return emit_two2(t, Y[0], p[0], p[1], vi[0], vi[1], H);
}

/* The rare paths of a one-argument operation: no tape given (the current one), a failed
 * tape, a constant or foreign argument, a second-order tape. */
static NOINLINE cr_var op1_slow(cr_tape *t, const cr_value *f, cr_var a)
{
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK)
        return cr__nan_const();
    double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    row_of(f)->f64(&a.v, Y, D);
    if (t->check_finite &&
        cr__tape_check_finite(t, f->u.func.fn->name, &a.v, 1, Y, row_of(f)->nout) != CR_OK)
        return cr__nan_const();
    if (a.idx == CR_VAR_CONST)
        return cr_const(Y[0]);
    if (!cr__var_ours(t, a))
        return cr__tape_foreign(t, f->u.func.fn->name, a);
    cr_var r;
    if (cr__record_evaluated(t, f->u.func.fn->name, row_of(f), &a, &a.v, Y, D, &r) != CR_OK)
        return cr__nan_const();
    return r;
}

/*
 * One-argument scalar operation: the hot path (a variable of this recording, a
 * first-order tape). The row is evaluated once for value and partial, and writes the
 * partial straight into its place in the record; the record is then closed with its
 * header (a partial of exactly +-1 leaves only the header: COPY, NEG).
 */
static inline cr_var op1e(cr_tape *t, const cr_value *f, cr_scalar_eval_f64 ev, cr__hcol_fn hcol,
                          cr_var a)
{
    if (t != NULL && t->slow != 0 && hcol != NULL && second_fast(t) && cr__var_ours(t, a))
        return op_second(t, ev, hcol, &a, 1);
    if (t == NULL || t->slow != 0 || !cr__var_ours(t, a))
        return op1_slow(t, f, a);
    if (!cr__tape_room(t, 2 + t->pre) && grow(t, 2 + t->pre) != CR_OK)
        return cr__nan_const();
    cr__word *w = t->cur + t->pre;
    double x = a.v, Y[CR_SCALAR_MAX_OUT];
    ev(&x, Y, &w[0].d);
    double p = w[0].d;
    uint64_t h;
    if (p == 1.0 || p == -1.0) {
        h = hdr_make(p == 1.0 ? K_COPY : K_NEG, a.idx, 0);
        w[0].u = h;
        w += 1;
    } else {
        h = hdr_make(K_UNARY, a.idx, 0);
        w[1].u = h;
        w += 2;
    }
    if (t->pre)
        t->cur[0].u = h;
    t->cur = w;
    return new_var(t, Y[0]);
}

/* The rare paths of a two-argument operation (see op1_slow). */
static NOINLINE cr_var op2_slow(cr_tape *t, const cr_value *f, cr_var a, cr_var b)
{
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK)
        return cr__nan_const();
    double x[2] = {a.v, b.v}, Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    row_of(f)->f64(x, Y, D);
    if (t->check_finite &&
        cr__tape_check_finite(t, f->u.func.fn->name, x, 2, Y, row_of(f)->nout) != CR_OK)
        return cr__nan_const();
    if (a.idx == CR_VAR_CONST && b.idx == CR_VAR_CONST)
        return cr_const(Y[0]);
    cr_var args[2] = {a, b}, r;
    if (cr__record_evaluated(t, f->u.func.fn->name, row_of(f), args, x, Y, D, &r) != CR_OK)
        return cr__nan_const();
    return r;
}

/*
 * Two-argument scalar operation: the hot path (two variables, or a variable and a
 * constant, of this recording on a first-order tape). As op1, the row writes its two
 * partials into the record. When compact, the kind is picked from their values (ADD, SUB,
 * COPY, NEG for partials of exactly +-1); mul and div, whose partials are the operands,
 * always make UNARY and BINARY records, as their inline forms in tape.h do.
 */
static inline cr_var op2e(cr_tape *t, const cr_value *f, cr_scalar_eval_f64 ev, cr__hcol_fn hcol,
                          cr_var a, cr_var b, bool compact)
{
    if (t == NULL)
        return op2_slow(t, f, a, b);
    bool va = cr__var_ours(t, a), vb = cr__var_ours(t, b);
    bool ours = (va || a.idx == CR_VAR_CONST) && (vb || b.idx == CR_VAR_CONST) && (va || vb);
    if (t->slow != 0 && hcol != NULL && ours && second_fast(t)) {
        cr_var args[2] = {a, b};
        return op_second(t, ev, hcol, args, 2);
    }
    if (t->slow != 0 || !ours)
        return op2_slow(t, f, a, b);
    if (!cr__tape_room(t, 3 + t->pre) && grow(t, 3 + t->pre) != CR_OK)
        return cr__nan_const();
    cr__word *w = t->cur + t->pre;
    double x[2], Y[CR_SCALAR_MAX_OUT];
    x[0] = a.v;
    x[1] = b.v;
    ev(x, Y, &w[0].d);
    uint64_t h;
    if (va && vb && a.idx != b.idx) {
        double p0 = w[0].d, p1 = w[1].d;
        if (compact && p0 == 1.0 && (p1 == 1.0 || p1 == -1.0)) {
            h = hdr_make(p1 == 1.0 ? K_ADD : K_SUB, a.idx, b.idx);
            w[0].u = h;
            w += 1;
        } else {
            h = hdr_make(K_BINARY, a.idx, b.idx);
            w[2].u = h;
            w += 3;
        }
    } else {
        /* One operand: the variable's partial, or the sum for x op x. */
        double p = va && vb ? w[0].d + w[1].d : va ? w[0].d : w[1].d;
        uint32_t v = va ? a.idx : b.idx;
        if (compact && (p == 1.0 || p == -1.0)) {
            h = hdr_make(p == 1.0 ? K_COPY : K_NEG, v, 0);
            w[0].u = h;
            w += 1;
        } else {
            h = hdr_make(K_UNARY, v, 0);
            w[0].d = p;
            w[1].u = h;
            w += 2;
        }
    }
    if (t->pre)
        t->cur[0].u = h;
    t->cur = w;
    return new_var(t, Y[0]);
}

/* Any row, through its function pointer. */
static inline cr_var op1(cr_tape *t, const cr_value *f, cr_var a)
{
    return op1e(t, f, row_of(f)->f64, NULL, a);
}

/* The arithmetic operations call the same rows' bodies directly (CR__ARITH_ROWS above), so the
 * compiler inlines value and partials into the record. */
cr_var cr_add(cr_tape *t, cr_var a, cr_var b)
{
    return op2e(t, &cr_fn_add, add_f64, cr__hcol_add, a, b, true);
}

cr_var cr_sub(cr_tape *t, cr_var a, cr_var b)
{
    return op2e(t, &cr_fn_sub, sub_f64, cr__hcol_sub, a, b, true);
}

cr_var cr_mul(cr_tape *t, cr_var a, cr_var b)
{
    return op2e(t, &cr_fn_mul, mul_f64, cr__hcol_mul, a, b, false);
}

cr_var cr_div(cr_tape *t, cr_var a, cr_var b)
{
    return op2e(t, &cr_fn_div, div_f64, cr__hcol_div, a, b, false);
}

cr_var cr_neg(cr_tape *t, cr_var a)
{
    return op1e(t, &cr_fn_neg, neg_f64, cr__hcol_neg, a);
}

cr_var cr_sin(cr_tape *t, cr_var a)
{
    return op1(t, &cr_fn_sin, a);
}

cr_var cr_cos(cr_tape *t, cr_var a)
{
    return op1(t, &cr_fn_cos, a);
}

cr_var cr_exp(cr_tape *t, cr_var a)
{
    return op1(t, &cr_fn_exp, a);
}

cr_var cr_log(cr_tape *t, cr_var a)
{
    return op1(t, &cr_fn_log, a);
}

cr_var cr_sqrt(cr_tape *t, cr_var a)
{
    return op1(t, &cr_fn_sqrt, a);
}

cr_var cr_asin(cr_tape *t, cr_var a)
{
    return op1(t, &cr_fn_asin, a);
}

/* The named operations of the other scalar rows (tape_ops.h, generated from the registry):
 * rows of one and two inputs through the paths of cr_sin() and the arithmetic (the others go
 * through cr_tape_call(), rule_call.c). HAND = 1 marks those defined above. */
#define OP_1_1(OP, NAME)                 \
    cr_var OP(cr_tape *t, cr_var x)      \
    {                                    \
        return op1(t, &cr_fn_##NAME, x); \
    }
#define OP_2_1(OP, NAME)                                                              \
    cr_var OP(cr_tape *t, cr_var x, cr_var y)                                         \
    {                                                                                 \
        return op2e(t, &cr_fn_##NAME, row_of(&cr_fn_##NAME)->f64, NULL, x, y, false); \
    }
/* Rows of three inputs or two results: rule_call.c. */
#define OP_3_1(OP, NAME)
#define OP_1_2(OP, NAME)
CR_TAPE_SCALAR_OPS(CR__DEFINE_TAPE_OP)
#undef OP_1_2
#undef OP_3_1
#undef OP_2_1
#undef OP_1_1

cr_var cr_tape_input(cr_tape *t, double v)
{
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK)
        return cr__nan_const();
    t->rinfo = NULL;
    /* On a first-order tape, an input right after an input record joins it (not while a
     * cursor holds the write position: emit0 refuses the record then). */
    if (t->pre == 0 && !t->rec_open && t->chunk != NULL && t->cur > t->chunk->base) {
        uint64_t h = t->cur[-1].u;
        if (hdr_kind(h) == K_INPUT && hdr_a(h) < IDX_MASK && t->nvars + 1 < CR_TAPE_MAX_VARS) {
            t->cur[-1].u = h + 1; /* a + 1 */
            t->ninputs++;
            return new_var(t, v);
        }
    }
    cr_var r = emit0(t, v, K_INPUT, 1, 0);
    if (r.idx != CR_VAR_CONST)
        t->ninputs++;
    return r;
}

bool cr_tape_cmp(cr_tape *t, cr_var a, cr_cmp op, cr_var b)
{
    bool r;
    switch (op) {
    case CR_CMP_LT:
        r = a.v < b.v;
        break;
    case CR_CMP_LE:
        r = a.v <= b.v;
        break;
    case CR_CMP_GT:
        r = a.v > b.v;
        break;
    case CR_CMP_GE:
        r = a.v >= b.v;
        break;
    case CR_CMP_EQ:
        r = a.v == b.v;
        break;
    case CR_CMP_NE:
        r = a.v != b.v;
        break;
    default: /* not a cr_cmp: refused, never compared as some other comparison */
        if ((t = tape_or_current(t)) != NULL)
            cr__tape_fail(t, CR_EINVAL, "cr_tape_cmp: invalid comparison %d (CR_CMP_LT..NE)",
                          (int)op);
        return false;
    }
    if ((t = tape_or_current(t)) == NULL || t->status != CR_OK || t->pre < 2)
        return r;
    bool ca = a.idx == CR_VAR_CONST, cb = b.idx == CR_VAR_CONST;
    if (ca && cb)
        return r;
    if ((!ca && !cr__var_ours(t, a)) || (!cb && !cr__var_ours(t, b))) {
        cr__tape_foreign(t, "cr_tape_cmp", !ca && !cr__var_ours(t, a) ? a : b);
        return r;
    }
    /* A replay tape keeps the comparison: a replay where it comes out otherwise fails. */
    cr__rinfo *info = cr_arena_alloc(t->arena, sizeof *info, _Alignof(cr__rinfo));
    if (info == NULL) {
        cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), "tape: replay information");
        return r;
    }
    memset(info, 0, sizeof *info);
    info->o = (uint8_t)op;
    info->nin = 2;
    info->map[0] = ca ? -1 : 0;
    info->map[1] = cb ? -1 : 1;
    info->c[0] = a.v;
    info->c[1] = b.v;
    info->outcome = r;
    t->rinfo = info;
    emit0(t, 0.0, K_GUARD, ca ? 0 : a.idx, cb ? 0 : b.idx);
    return r;
}

cr_status cr_tape_inputs(cr_tape *t, const double *x, size_t n, cr_var *out)
{
    if ((t = tape_or_current(t)) == NULL)
        return CR_EMISUSE;
    if (n > 0 && (x == NULL || out == NULL))
        return cr__tape_fail(t, CR_EINVAL, "cr_tape_inputs: NULL x or out");
    /* Before reading x, on a failed tape too (which writes n NaN constants below). */
    if (n >= CR_TAPE_MAX_VARS - t->nvars)
        return cr__tape_fail(t, CR_EOVERFLOW,
                             "cr_tape_inputs: %zu input%s after %zu variable%s, "
                             "more than a recording holds (%zu)",
                             n, CR__S(n), (size_t)t->nvars, CR__S((size_t)t->nvars),
                             (size_t)CR_TAPE_MAX_VARS - 1);
    size_t j = 0;
    /* First-order tapes: the inputs join one record (its a counts them): one input made
     * the usual way opens it, the others are added to its count at once. */
    while (t->pre == 0 && t->status == CR_OK && j < n) {
        out[j] = cr_tape_input(t, x[j]);
        if (t->status != CR_OK)
            break;
        j++;
        uint64_t h = t->cur[-1].u; /* the input record out[j - 1] joined or opened */
        size_t k = IDX_MASK - hdr_a(h), left = CR_TAPE_MAX_VARS - 1 - t->nvars;
        if (k > left)
            k = left;
        if (k > n - j)
            k = n - j;
        uint32_t v = t->nvars, id = t->id;
        if (t->fast_id == id) { /* keys work (tape.h): (idx, tape) written as one word */
            cr__tape_kvar u;
            u.v.v = 0.0;
            u.v.idx = v;
            u.v.tape = id;
            uint64_t key = u.k.key;
            for (size_t q = 0; q < k; q++, key += CR__TAPE_KEY_ONE) {
                u.k.d = x[j + q];
                u.k.key = key;
                out[j + q] = u.v;
            }
        } else {
            for (size_t q = 0; q < k; q++) {
                out[j + q].v = x[j + q];
                out[j + q].idx = v + (uint32_t)q;
                out[j + q].tape = id;
            }
        }
        t->cur[-1].u = h + k;
        t->hot.vt.key += k * CR__TAPE_KEY_ONE; /* nvars = v + k, as one word (set_fast) */
        t->ninputs += k;
        j += k;
    }
    for (; j < n; j++) /* other tapes, a full count, and NaN constants after a failure */
        out[j] = cr_tape_input(t, x[j]);
    return t->status;
}

/* ---- Tuples of results, cotangents as reals ---------------------------------------------- */

static const cr_field k_tuple_fields[CR__MAX_TUPLE] = {
    {NULL, 0 * sizeof(double), CR_KIND_F64, NULL}, {NULL, 1 * sizeof(double), CR_KIND_F64, NULL},
    {NULL, 2 * sizeof(double), CR_KIND_F64, NULL}, {NULL, 3 * sizeof(double), CR_KIND_F64, NULL},
    {NULL, 4 * sizeof(double), CR_KIND_F64, NULL}, {NULL, 5 * sizeof(double), CR_KIND_F64, NULL},
    {NULL, 6 * sizeof(double), CR_KIND_F64, NULL}, {NULL, 7 * sizeof(double), CR_KIND_F64, NULL},
};
static const cr_type k_tuples[CR__MAX_TUPLE - 1] = {
    {"tuple(f64,f64)", 2 * sizeof(double), 2, k_tuple_fields},
    {"tuple(f64 x 3)", 3 * sizeof(double), 3, k_tuple_fields},
    {"tuple(f64 x 4)", 4 * sizeof(double), 4, k_tuple_fields},
    {"tuple(f64 x 5)", 5 * sizeof(double), 5, k_tuple_fields},
    {"tuple(f64 x 6)", 6 * sizeof(double), 6, k_tuple_fields},
    {"tuple(f64 x 7)", 7 * sizeof(double), 7, k_tuple_fields},
    {"tuple(f64 x 8)", 8 * sizeof(double), 8, k_tuple_fields},
};

const cr_type *cr__tuple_f64(size_t n)
{
    return n >= 2 && n <= CR__MAX_TUPLE ? &k_tuples[n - 2] : NULL;
}

cr_status cr__accum_real(cr_arena *arena, const char *who, cr_tangent t, double *acc)
{
    cr_complex v;
    cr_status st = cr__tangent_scalar(arena, who, t, &v, NULL);
    if (st == CR_OK)
        *acc += creal(v); /* ProjectTo a real argument */
    return st;
}

/* ---- Recording cursors (tape.h, cr_rec) ------------------------------------------------- */

/* The chunk end of a cursor that may not write. */
static cr__word *const rec_nolim = NULL;

/* The key of a cursor that is not open: no variable's (no recording has CR__TAPE_NO_ID). */
static uint64_t rec_dead_key(void)
{
    cr__tape_kvar u;
    u.v.v = 0.0;
    u.v.idx = 0;
    u.v.tape = CR__TAPE_NO_ID;
    return u.k.key;
}

/* Give the write position to the open cursor: the inline path on the tape, and every
 * other record, then find no room (lim is cur) and reach grow(), which refuses them; the
 * cursor may write up to the chunk's end unless the tape has failed. */
static void rec_lend(cr_tape *t)
{
    t->rec_open = true;
    t->rec_lim = t->lim;
    t->lim = t->cur;
    t->rlim = t->status == CR_OK ? t->rec_lim : NULL;
}

/* Take the write position back from the open cursor (cur, and the variables counted in
 * key's index half). */
static void rec_return(cr_tape *t, cr__word *cur, uint64_t key)
{
    cr__tape_kvar u;
    u.k.key = key;
    t->cur = cur;
    t->nvars = u.v.idx;
    t->lim = t->rec_lim;
    t->rec_open = false;
    t->rlim = NULL;
}

static cr_rec_result rec_step(cr_var v, cr__word *cur, uint64_t key)
{
    cr_rec_result st;
    st.v = v;
    st.cur = cur;
    st.key = key;
    return st;
}

cr_rec cr_rec_begin(cr_tape *t)
{
    cr_rec r;
    t = tape_or_current(t);
    r.t = t;
    r.gen = 0; /* no opening's */
    r.cur = NULL;
    r.key = rec_dead_key();
    r.lim = &rec_nolim;
    if (t == NULL)
        return r;
    if (t->rec_open) {
        cr__tape_fail(t, CR_EMISUSE, "cr_rec_open: a recording cursor is already open on the tape");
        return r;
    }
    if (++t->rec_gen == 0)
        t->rec_gen = 1;
    rec_lend(t);
    r.gen = t->rec_gen;
    r.cur = t->cur;
    r.key = t->hot.vt.key;
    r.lim = &t->rlim;
    return r;
}

void cr_rec_end(cr_rec r)
{
    if (r.t != NULL && r.t->rec_open && r.t->rec_gen == r.gen)
        rec_return(r.t, r.cur, r.key);
}

/* Around an exported operation called for the cursor (gen, cur, key): the position back
 * to the tape before, to the cursor after. A cursor that is not open gets the call alone,
 * and a key that keeps it on this path. */
static bool rec_before(cr_tape *t, uint32_t gen, cr__word *cur, uint64_t key)
{
    if (t == NULL || !t->rec_open || t->rec_gen != gen)
        return false;
    rec_return(t, cur, key);
    return true;
}

static cr_rec_result rec_after(cr_tape *t, uint32_t gen, bool open, cr_var v)
{
    if (!open)
        return rec_step(v, NULL, rec_dead_key());
    if (t->rec_open) { /* f opened a cursor of its own and left it open */
        t->rec_open = false;
        t->lim = t->rec_lim;
        cr__tape_fail(t, CR_EMISUSE,
                      "cr_rec_call: the function returned with a recording cursor open");
    }
    t->rec_gen = gen;
    rec_lend(t);
    return rec_step(v, t->cur, t->hot.vt.key);
}

cr_rec_result cr_rec_apply2(cr_rec r, cr_var (*f)(cr_tape *, cr_var, cr_var), cr_var a, cr_var b)
{
    if (f == NULL) {
        if (r.t != NULL)
            cr__tape_fail(r.t, CR_EINVAL, "cr_rec_call2: f is NULL");
        return rec_step(cr__nan_const(), r.cur, r.key);
    }
    bool open = rec_before(r.t, r.gen, r.cur, r.key);
    cr_var v = f(r.t, a, b);
    return rec_after(r.t, r.gen, open, v);
}

cr_rec_result cr_rec_apply1(cr_rec r, cr_var (*f)(cr_tape *, cr_var), cr_var a)
{
    if (f == NULL) {
        if (r.t != NULL)
            cr__tape_fail(r.t, CR_EINVAL, "cr_rec_call1: f is NULL");
        return rec_step(cr__nan_const(), r.cur, r.key);
    }
    bool open = rec_before(r.t, r.gen, r.cur, r.key);
    cr_var v = f(r.t, a);
    return rec_after(r.t, r.gen, open, v);
}

/* The exported forms (CR_TAPE_NO_INLINE, bindings): each operation goes through the
 * library, with the records of the inline forms. */
void cr_rec_open(cr_rec *r, cr_tape *t)
{
    if (r != NULL)
        *r = cr_rec_begin(t);
}

void cr_rec_close(cr_rec *r)
{
    if (r != NULL)
        cr_rec_end(*r);
}

static cr_var rec_take(cr_rec *r, cr_rec_result st)
{
    r->cur = st.cur;
    r->key = st.key;
    return st.v;
}

cr_var cr_rec_call1(cr_rec *r, cr_var (*f)(cr_tape *, cr_var), cr_var a)
{
    if (r == NULL)
        return cr__nan_const();
    return rec_take(r, cr_rec_apply1(*r, f, a));
}

cr_var cr_rec_call2(cr_rec *r, cr_var (*f)(cr_tape *, cr_var, cr_var), cr_var a, cr_var b)
{
    if (r == NULL)
        return cr__nan_const();
    return rec_take(r, cr_rec_apply2(*r, f, a, b));
}

cr_var cr_rec_add(cr_rec *r, cr_var a, cr_var b)
{
    return cr_rec_call2(r, cr_add, a, b);
}

cr_var cr_rec_sub(cr_rec *r, cr_var a, cr_var b)
{
    return cr_rec_call2(r, cr_sub, a, b);
}

cr_var cr_rec_mul(cr_rec *r, cr_var a, cr_var b)
{
    return cr_rec_call2(r, cr_mul, a, b);
}

cr_var cr_rec_div(cr_rec *r, cr_var a, cr_var b)
{
    return cr_rec_call2(r, cr_div, a, b);
}

cr_var cr_rec_neg(cr_rec *r, cr_var a)
{
    return cr_rec_call1(r, cr_neg, a);
}

/* ---- Recording user functions ------------------------------------------------------------ */

cr_status cr__tape_record(cr_tape *t, cr_ad_fn f, void *env, const double *x, size_t n, cr_var **xs,
                          cr_var *ys, size_t m)
{
    if (t == NULL)
        return CR_EINVAL;
    if (cr__tape_misused(t))
        return CR_EMISUSE;
    if (f == NULL || (n > 0 && x == NULL) || (m > 0 && ys == NULL))
        return cr_ctx_error(t->ctx, CR_EINVAL, "cr_tape_record: NULL function or buffers");
    if (n >= CR_TAPE_MAX_VARS) /* before n variables are allocated or x is read */
        return cr_ctx_error(t->ctx, CR_EOVERFLOW,
                            "cr_tape_record: %zu inputs, more than a recording holds (%zu)", n,
                            (size_t)CR_TAPE_MAX_VARS - 1);
    cr_tape_reset(t);
    cr_var *in = *xs;
    if (in == NULL) {
        /* Scratch for the input variables, gone at the next reset. */
        in = cr__arena_array(t->arena, "cr_tape_record", n, sizeof *in, _Alignof(cr_var));
        if (in == NULL)
            return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), "cr_tape_record");
        *xs = in;
    }
    cr_status st = cr_tape_inputs(t, x, n, in);
    if (st == CR_OK) {
        for (size_t i = 0; i < m; i++)
            ys[i] = cr__nan_const();
        st = f(t, in, n, ys, m, env);
    }
    if (t->rec_open) {
        /* The cursor's position is lost with it: the records it made after its last call
         * into the library are not the tape's. */
        t->rec_open = false;
        t->lim = t->rec_lim;
        cr__tape_fail(t, CR_EMISUSE,
                      "the recorded function returned with a recording cursor open "
                      "(cr_rec_open without cr_rec_close)");
    }
    if (st != CR_OK && t->status == CR_OK)
        return cr__tape_fail(t, st, "the recorded function failed: %s", cr_status_str(st));
    return t->status != CR_OK ? t->status : st;
}

cr_status cr_tape_record(cr_tape *t, cr_ad_fn f, void *env, const double *x, size_t n, cr_var *xs,
                         cr_var *ys, size_t m)
{
    cr_var *in = xs;
    return cr__tape_record(t, f, env, x, n, &in, ys, m);
}
