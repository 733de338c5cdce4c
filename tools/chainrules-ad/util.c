/* chainrules-ad: the node pool, text buffers and diagnostics. */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ad.h"

/* ---- The pool: blocks of at least 1 MiB, freed together ------------------------------------ */

typedef struct block {
    struct block *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} block;

static block *g_pool;

static void out_of_memory(void)
{
    fputs("chainrules-ad: out of memory\n", stderr);
    exit(70);
}

void *ad_alloc(size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (!g_pool || g_pool->size - g_pool->used < size) {
        size_t bs = size > (1u << 20) ? size : (1u << 20);
        block *b = malloc(sizeof *b + bs);
        if (!b)
            out_of_memory();
        b->next = g_pool;
        b->used = 0;
        b->size = bs;
        g_pool = b;
    }
    void *p = g_pool->data + g_pool->used;
    g_pool->used += size;
    memset(p, 0, size);
    return p;
}

void ad_pool_free(void)
{
    while (g_pool) {
        block *n = g_pool->next;
        free(g_pool);
        g_pool = n;
    }
}

void *ad_grow(void *p, int n, int *cap, size_t elem)
{
    if (n < *cap)
        return p;
    if (*cap > INT_MAX / 2)
        out_of_memory(); /* a list of a billion items: no source is that large */
    int nc = *cap ? 2 * *cap : 8;
    void *np = ad_alloc((size_t)nc * elem);
    if (n)
        memcpy(np, p, (size_t)n * elem);
    *cap = nc;
    return np;
}

char *ad_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ad_alloc(n);
    memcpy(p, s, n);
    return p;
}

static char *vfmt(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        n = 0;
    char *p = ad_alloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

char *ad_fmt(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = vfmt(fmt, ap);
    va_end(ap);
    return p;
}

/* ---- Text buffers --------------------------------------------------------------------------- */

void ad_buf_put(ad_buf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            out_of_memory();
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

void ad_buf_printf(ad_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof small) {
        ad_buf_put(b, small);
    } else {
        char *p = vfmt(fmt, ap2);
        ad_buf_put(b, p);
    }
    va_end(ap2);
}

void ad_buf_free(ad_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---- Diagnostics ---------------------------------------------------------------------------- */

static int g_errors;
static ad_buf *g_sink;

void ad_error_sink(ad_buf *sink)
{
    g_sink = sink;
}

void ad_error(ad_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = vfmt(fmt, ap);
    va_end(ap);
    char *line =
        ad_fmt("%s:%u:%u: error: %s\n", loc.file ? loc.file : "<input>", loc.line, loc.col, msg);
    if (g_sink) {
        ad_buf_put(g_sink, line);
        return;
    }
    fputs(line, stderr);
    g_errors++;
}

int ad_errors(void)
{
    return g_errors;
}

/* ---- Types ---------------------------------------------------------------------------------- */

bool ad_type_is_real(const ad_type *t)
{
    return t && (t->kind == TY_DOUBLE || t->kind == TY_FLOAT);
}

bool ad_type_has_real(const ad_type *t)
{
    if (!t)
        return false;
    switch (t->kind) {
    case TY_FLOAT:
    case TY_DOUBLE:
        return true;
    case TY_PTR:
    case TY_ARRAY:
        return ad_type_has_real(t->elem);
    case TY_STRUCT:
        for (const ad_field *f = t->fields; f; f = f->next)
            if (ad_type_has_real(f->type))
                return true;
        return false;
    default:
        return false;
    }
}

ad_type *ad_type_scalar_of(ad_type *t)
{
    while (t && (t->kind == TY_PTR || t->kind == TY_ARRAY))
        t = t->elem;
    return t;
}

const char *ad_type_real_name(const ad_type *t)
{
    return t && t->kind == TY_FLOAT ? "float" : "double";
}

/* ---- Functions' locals and made expressions -------------------------------------------------- */

void ad_func_add_local(ad_func *f, ad_var *v)
{
    f->locals = ad_grow(f->locals, f->nlocals, &f->caplocals, sizeof *f->locals);
    v->index = f->nlocals;
    f->locals[f->nlocals++] = v;
}

ad_var *ad_func_new_local(ad_func *f, ad_type *t, const char *name, ad_loc loc, int depth)
{
    ad_var *v = ad_alloc(sizeof *v);
    v->name = v->cname = name;
    v->type = t;
    v->kind = VAR_LOCAL;
    v->loc = loc;
    v->loop_depth = depth;
    ad_func_add_local(f, v);
    return v;
}

ad_expr *ad_expr_var(ad_var *v)
{
    ad_expr *e = ad_alloc(sizeof *e);
    e->kind = EX_VAR;
    e->var = v;
    e->type = v->type;
    e->loc = v->loc;
    e->tmp = -1;
    return e;
}

ad_expr *ad_expr_zero(const ad_expr *like)
{
    ad_expr *z = ad_alloc(sizeof *z);
    z->kind = EX_NUM;
    z->type = like->type;
    z->loc = like->loc;
    z->text = "0";
    z->tmp = -1;
    return z;
}

ad_expr *ad_expr_elem(ad_var *v, long long i)
{
    ad_expr *e = ad_alloc(sizeof *e);
    e->kind = EX_INDEX;
    e->a = ad_expr_var(v);
    e->b = ad_alloc(sizeof *e->b);
    e->b->kind = EX_NUM;
    e->b->text = ad_fmt("%lld", i);
    e->b->type = v->type;
    e->b->tmp = -1;
    e->type = v->type->elem;
    e->loc = v->loc;
    e->tmp = -1;
    return e;
}
