/*
 * The context: allocation hook, last error and debug switch; status names and messages
 * generated from CR_STATUS_MAP; the library version.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules/version.h>

#include "core_impl.h"

const char *cr_status_name(cr_status status)
{
    switch (status) {
#define CR__STATUS_NAME(name, value, msg) \
    case name:                            \
        return #name;
        CR_STATUS_MAP(CR__STATUS_NAME)
#undef CR__STATUS_NAME
    }
    return "CR_UNKNOWN";
}

const char *cr_status_str(cr_status status)
{
    switch (status) {
#define CR__STATUS_STR(name, value, msg) \
    case name:                           \
        return msg;
        CR_STATUS_MAP(CR__STATUS_STR)
#undef CR__STATUS_STR
    }
    return "unknown status";
}

int cr_version_number(void)
{
    return CR_VERSION_NUMBER;
}

const char *cr_version_string(void)
{
    return CR_VERSION_STRING;
}

static void *default_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    (void)env;
    (void)old_size;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, new_size);
}

cr_status cr__params_copy(cr_ctx *ctx, const char *who, const void *params, void *out, size_t size)
{
    memset(out, 0, size);
    if (params == NULL)
        return CR_OK;
    uint32_t struct_size;
    memcpy(&struct_size, params, sizeof struct_size);
    size_t n = struct_size == 0 ? size : struct_size;
    if (n != size) /* one version so far: a smaller size cuts a field */
        return cr_ctx_error(ctx, CR_EINVAL, "%s: unknown struct_size %zu", who, n);
    memcpy(out, params, n);
    return CR_OK;
}

void *cr__alloc(cr_ctx *ctx, size_t size)
{
    void *p = ctx->realloc_fn(ctx->alloc_env, NULL, 0, size == 0 ? 1 : size);
    if (p == NULL)
        cr_ctx_error(ctx, CR_ENOMEM, "out of memory allocating %zu byte%s", size, CR__S(size));
    return p;
}

void *cr__alloc_quiet(cr_ctx *ctx, size_t size)
{
    return ctx->realloc_fn(ctx->alloc_env, NULL, 0, size == 0 ? 1 : size);
}

void cr__free(cr_ctx *ctx, void *ptr, size_t size)
{
    if (ptr != NULL)
        ctx->realloc_fn(ctx->alloc_env, ptr, size == 0 ? 1 : size, 0);
}

cr_status cr_ctx_new(const cr_ctx_params *params, cr_ctx **out)
{
    if (out == NULL)
        return CR_EINVAL;
    *out = NULL;
    cr_ctx_params p = {0};
    if (params != NULL) {
        size_t n = params->struct_size == 0 ? sizeof p : params->struct_size;
        /* this version, or the one before debug was added; any other size cuts a field */
        if (n != sizeof p && n != offsetof(cr_ctx_params, debug) &&
            n != offsetof(cr_ctx_params, checks))
            return CR_EINVAL;
        memcpy(&p, params, n);
    }
    cr_realloc_fn fn = p.realloc_fn != NULL ? p.realloc_fn : default_realloc;
    cr_ctx *ctx = fn(p.alloc_env, NULL, 0, sizeof *ctx);
    if (ctx == NULL)
        return CR_ENOMEM;
    memset(ctx, 0, sizeof *ctx);
    ctx->realloc_fn = fn;
    ctx->alloc_env = p.alloc_env;
    ctx->debug = p.debug;
    if (p.checks & ~(uint64_t)(CR_CTX_CHECK_TAPES | CR_CTX_CHECK_FINITE)) {
        fn(p.alloc_env, ctx, sizeof *ctx, 0);
        return CR_EINVAL;
    }
    ctx->checks = (uint32_t)p.checks;
    *out = ctx;
    return CR_OK;
}

/* Release the quarantine and the context. */
static void release(cr_ctx *ctx)
{
    for (cr__qnode *q = ctx->quarantine, *next; q != NULL; q = next) {
        next = q->next;
        ctx->realloc_fn(ctx->alloc_env, q->ptr, q->size, 0);
    }
    ctx->realloc_fn(ctx->alloc_env, ctx, sizeof *ctx, 0);
}

void cr__ctx_quarantine(cr_ctx *ctx, cr__qnode *node, void *ptr, size_t size)
{
    node->ptr = ptr;
    node->size = size;
    node->next = ctx->quarantine;
    ctx->quarantine = node;
    if (ctx->live_tapes > 0)
        ctx->live_tapes--;
    if (ctx->dead && ctx->live_tapes == 0)
        release(ctx);
}

void cr_ctx_free(cr_ctx *ctx)
{
    if (ctx == NULL || ctx->dead)
        return;
    if ((ctx->checks & CR_CTX_CHECK_FREED) && ctx->live_tapes > 0) {
        ctx->dead = true; /* kept, poisoned, until its last tape is freed */
        return;
    }
    release(ctx);
}

cr_status cr_ctx_errcode(const cr_ctx *ctx)
{
    return ctx == NULL ? CR_EMISUSE : ctx->errcode;
}

const char *cr_ctx_errmsg(const cr_ctx *ctx)
{
    return ctx == NULL ? "" : ctx->errmsg;
}

void cr_ctx_clear_error(cr_ctx *ctx)
{
    if (ctx == NULL)
        return;
    ctx->errcode = CR_OK;
    ctx->errmsg[0] = '\0';
}

cr_status cr_ctx_error(cr_ctx *ctx, cr_status status, const char *fmt, ...)
{
    if (ctx == NULL)
        return status;
    ctx->errcode = status;
    if (fmt == NULL) {
        snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", cr_status_str(status));
        return status;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
    va_end(ap);
    return status;
}

void cr_ctx_set_debug(cr_ctx *ctx, bool on)
{
    if (ctx != NULL)
        ctx->debug = on;
}

bool cr_ctx_debug(const cr_ctx *ctx)
{
    return ctx != NULL && ctx->debug;
}

void *cr_ctx_alloc(cr_ctx *ctx, size_t size)
{
    return ctx == NULL ? NULL : cr__alloc(ctx, size);
}

void cr_ctx_dealloc(cr_ctx *ctx, void *ptr, size_t size)
{
    if (ctx != NULL)
        cr__free(ctx, ptr, size);
}
