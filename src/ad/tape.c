/*
 * The tape itself: recording ids, errors, creation, resets, the checking mode, statistics
 * and the record stream's chunks. The record kinds are recorded and swept by their nodes'
 * files (node_scalar.c, rule_call.c, array_call.c, kernel.c, tape_op.c); the record layout
 * is described in tape_impl.h; the sweeps are in sweep.c.
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
    if (t->ids.left == 0) {
        uint32_t b;
        do
            b = (uint32_t)atomic_fetch_add_explicit(&g_next_block, 1u, memory_order_relaxed);
        /* id 0 is never used (constants carry it), nor the block of CR__TAPE_NO_ID */
        while ((uint32_t)(b * ID_BLOCK) == 0 || (uint32_t)(b * ID_BLOCK) == 0u - ID_BLOCK);
        t->ids.next = b * ID_BLOCK;
        t->ids.left = ID_BLOCK;
    }
    t->ids.left--;
    return t->ids.next++;
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
    return (t->flags & CR_TAPE_SECOND_ORDER) != 0 || t->pre > 1 || t->misuse.checks != 0 ||
           t->check.finite;
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
    if (t->misuse.magic == CR__TAPE_FREED)
        return true; /* failed with its message when it was freed */
    if ((t->misuse.checks & CR_CTX_CHECK_THREAD) && t->misuse.owner != &g_thread_tag) {
        /* Another thread's tape: nothing of it is written here but the flag its owner
         * reads at its next call. */
        atomic_store_explicit(&t->misuse.foreign_use, 1, memory_order_relaxed);
        return true;
    }
    if (t->ctx->dead) {
        cr__tape_fail(t, CR_EMISUSE, "tape used after cr_ctx_free of its context");
        return true;
    }
    if (atomic_load_explicit(&t->misuse.foreign_use, memory_order_relaxed) != 0) {
        atomic_store_explicit(&t->misuse.foreign_use, 0, memory_order_relaxed);
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
    if (t->misuse.checks == 0)
        return CR_OK;
    if (t->misuse.magic == CR__TAPE_FREED)
        return CR_EMISUSE;
    t->misuse.owner = &g_thread_tag;
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
    cr__chunk *c = t->store.own;
    t->store.record_words = 0;
    t->store.next_words = t->store.first_words;
    if (c != NULL) {
        c->prev = c->next = NULL;
        c->end = c->base;
        t->store.chunk = t->store.first = c;
        t->cur = c->base;
        t->lim = c->base + FIRST_CHUNK_WORDS;
        t->store.next_words *= 2; /* as grow() leaves it after a first chunk */
    } else {
        t->store.chunk = t->store.first = NULL;
        t->cur = t->lim = &t->store.dummy;
    }
    /* A cursor open before (on the old recording) records through the exported functions
     * from now on (cr_rec_apply2: not open). */
    t->rec.open = false;
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
    t->store.first_words = FIRST_CHUNK_WORDS;
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
    cr_tape_params p;
    cr_status st = cr__params_copy(ctx, "cr_tape_new", params, &p, sizeof p);
    if (st != CR_OK)
        return st;
    if (p.flags & ~(uint32_t)(CR_TAPE_FORWARD | CR_TAPE_SECOND_ORDER | CR_TAPE_CHECK_FINITE))
        return cr_ctx_error(ctx, CR_EINVAL, "cr_tape_new: unknown flags 0x%x", p.flags);
    cr_arena *arena;
    cr_arena_params ap = {.struct_size = sizeof ap,
                          .buffer = p.buffer,
                          .buffer_size = p.buffer_size,
                          .block_size = p.block_size};
    if ((st = cr_arena_new(ctx, &ap, &arena)) != CR_OK)
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
        t->check.finite = true;
        t->slow = 1;
        set_fast(t);
    }
    if ((ctx->checks & CR_CTX_CHECK_TAPES) != 0) { /* every operation through the library */
        t->misuse.checks = ctx->checks & CR_CTX_CHECK_TAPES;
        t->misuse.owner = &g_thread_tag;
        t->slow = 1;
        set_fast(t);
        if (ctx->checks & CR_CTX_CHECK_FREED)
            ctx->live_tapes++;
    }
    if (own_chunk) {
        cr__chunk *c = (cr__chunk *)(void *)(t + 1);
        c->base = (cr__word *)(void *)(c + 1);
        c->stop = hdr_make(K_STOP, 0, 0);
        t->store.own = c;
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

/* Give back a first-order tape's kept workspace (sweep.c, kept_ws) and clear the union it
 * shares with the other tapes' state (tape_impl.h): on a tape of another kind it holds no
 * memory of the context. */
static void drop_kept(cr_tape *t)
{
    if (t->pre == 0)
        cr_ctx_dealloc(t->ctx, t->kept.ws, t->kept.cap * sizeof *t->kept.ws);
    memset(&t->kept, 0, sizeof t->kept > sizeof t->fwd ? sizeof t->kept : sizeof t->fwd);
}

void cr_tape_free(cr_tape *t)
{
    if (t == NULL || (t->misuse.checks != 0 && t->misuse.magic == CR__TAPE_FREED))
        return;
    if ((t->misuse.checks & CR_CTX_CHECK_THREAD) && t->misuse.owner != &g_thread_tag) {
        (void)cr__tape_check(t); /* another thread's: flagged for its owner, not freed */
        return;
    }
    if (g_current == t)
        g_current = NULL;
    if (t->misuse.checks & CR_CTX_CHECK_FREED) {
        /* Release what the tape holds, keep its struct poisoned: a failed tape whose every
         * call stops at cr__tape_check, in the context's quarantine. */
        cr_ctx *ctx = t->ctx;
        size_t bytes = tape_bytes(t->store.own != NULL);
        cr_arena_free(t->arena);
        drop_kept(t);
        t->arena = NULL;
        t->store.chunk = t->store.first = t->store.own = NULL;
        t->cur = t->lim = &t->store.dummy;
        t->rlim = NULL;
        t->rec.open = false;
        t->nvars = 0;
        t->avars.n = 0;
        t->status = CR_OK;
        cr__tape_fail(t, CR_EMISUSE, "tape used after cr_tape_free");
        t->misuse.magic = CR__TAPE_FREED;
        cr__ctx_quarantine(ctx, &t->misuse.qnode, t, bytes);
        return;
    }
    if (t->own_arena) {
        cr_arena_free(t->arena);
        drop_kept(t);
        cr_ctx_dealloc(t->ctx, t, tape_bytes(t->store.own != NULL));
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
    t->avars.slots = t->avars.few; /* the first array variables' slots (array_slots.c) */
    t->avars.cap = CR__ASLOT_FEW;
    t->avars.n = 0;
    t->status = CR_OK;
    t->slow = slow_base(t);
    t->errmsg[0] = '\0';
    t->check.nlabels = 0;
    t->id = new_id(t);
    start_stream(t);
}

void cr__tape_make_replay(cr_tape *t)
{
    drop_kept(t); /* a first-order tape's until now: fwd from here on */
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
    t->check.finite = on;
    if (t->status == CR_OK)
        t->slow = slow_base(t);
    set_fast(t);
}

bool cr_tape_check_finite(const cr_tape *t)
{
    return t != NULL && t->check.finite;
}

void cr_tape_push_label(cr_tape *t, const char *label)
{
    if (t == NULL || cr__tape_misused(t))
        return;
    if (t->check.nlabels < CR_TAPE_MAX_LABELS)
        t->check.labels[t->check.nlabels] = label != NULL ? label : "?";
    if (t->check.nlabels < UINT32_MAX)
        t->check.nlabels++;
}

void cr_tape_pop_label(cr_tape *t)
{
    if (t == NULL || cr__tape_misused(t))
        return;
    if (t->check.nlabels > 0)
        t->check.nlabels--;
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
    if (t->check.nlabels == 0)
        return;
    size_t kept = t->check.nlabels < CR_TAPE_MAX_LABELS ? t->check.nlabels : CR_TAPE_MAX_LABELS;
    mb_put(b, " (in ");
    for (size_t i = 0; i < kept; i++)
        mb_put(b, "%s%s", i > 0 ? " > " : "", t->check.labels[i]);
    if (t->check.nlabels > kept)
        mb_put(b, " > %lu more", (unsigned long)(t->check.nlabels - kept));
    mb_put(b, ")");
}

cr_status cr__tape_check_finite(cr_tape *t, const char *what, const double *x, size_t nx,
                                const double *y, size_t n)
{
    if (!t->check.finite || t->status != CR_OK)
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
    if (!t->check.finite || t->status != CR_OK)
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
    if (t->rec.open) /* the cursor's records since it last left the library are not counted */
        return cr_ctx_error(t->ctx, CR_EMISUSE,
                            "cr_tape_stats_get: a recording cursor is open on the tape (close it "
                            "first: cr_rec_close)");
    size_t words = t->store.record_words;
    if (t->store.chunk != NULL)
        words += (size_t)(t->cur - t->store.chunk->base);
    out->nvars = t->nvars;
    out->ninputs = t->ninputs;
    size_t nrec = 0;
    for (const cr__chunk *c = t->store.chunk; c != NULL; c = c->prev) {
        const cr__word *p = c == t->store.chunk ? t->cur : c->end;
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
    if (t->rec.open) /* lim is cur while a cursor is open: every other record comes here */
        return cr__tape_fail(t, CR_EMISUSE,
                             "tape: a record made on the tape while a recording cursor is open "
                             "(record through the cursor, cr_rec_call1/2, or close it first)");
    size_t words = t->store.next_words;
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
    if (t->store.chunk != NULL) {
        t->store.chunk->end = t->cur;
        t->store.record_words += (size_t)(t->cur - t->store.chunk->base);
    }
    c->prev = t->store.chunk;
    c->next = NULL;
    if (t->store.chunk != NULL)
        t->store.chunk->next = c;
    else
        t->store.first = c;
    c->base = (cr__word *)(void *)(c + 1);
    c->stop = hdr_make(K_STOP, 0, 0);
    c->end = c->base;
    t->store.chunk = c;
    t->cur = c->base;
    t->lim = c->base + words;
    if (t->store.next_words < MAX_CHUNK_WORDS)
        t->store.next_words *= 2;
    return CR_OK;
}

cr_status cr__tape_grow(cr_tape *t, size_t need)
{
    return grow(t, need);
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
