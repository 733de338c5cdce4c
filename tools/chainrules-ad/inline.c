/*
 * Rewrites before normalisation, which let the derivative of a function treat small
 * helpers and small arrays as plain scalar code:
 *
 *  - inlining: a statement `g(args);` that calls a static void function g of the file whose
 *    body is straight-line (declarations and expression statements only, no call of a
 *    function of the file) is replaced by g's body, where g's scalar parameters are new
 *    locals initialised by the arguments and g's pointer parameters, which the body only
 *    indexes with constants (p[0], *p), are the caller's arrays, pointers or `&scalar` that
 *    the call passes. The rule rows chainrules-ad writes into its own output are such
 *    helpers, so the output of the forward mode, differentiated again, has no callees;
 *  - scalar replacement: a local array of at most AD_SCALARIZE_MAX numbers that an inlined
 *    helper read (its argument) or declared, and that the function only indexes with
 *    constants, becomes one scalar local per element. The input's other arrays are kept
 *    (the vector forward mode of GradBench's ba block was 5% slower with its small arrays
 *    as scalars).
 *  - in a function where a call was inlined, declarations where their value is made:
 *    nested blocks spliced, `T v; ... v = e;` (v's only assignment, every read after it in
 *    its block) made `T v = e;`, and `v = a; for (; c; v = ...)` made `for (v = a; ...)`
 *    (the first order's output declares its locals at the top and writes its loops so).
 *
 * All keep the meaning of the code exactly; the analyses then see scalars declared where
 * they are computed, which the reverse mode recomputes where it can and otherwise stores
 * only when they are needed and overwritten (an array is stored element by element at
 * every assignment).
 */
#include <stdlib.h>
#include <string.h>

#include "ad.h"

#define AD_SCALARIZE_MAX    16
#define AD_INLINE_MAX_STMTS 64

/* ---- Inlining ------------------------------------------------------------------------------ */

/* What a parameter of the inlined function stands for at one call. */
typedef struct binding {
    ad_var *param;
    ad_var *local;  /* a scalar parameter: its new local */
    ad_var *array;  /* a pointer parameter: the array or pointer passed */
    ad_var *scalar; /* a pointer parameter: the scalar whose address is passed */
} binding;

typedef struct inl {
    ad_func *caller;
    binding *b;
    int nb;
    ad_var **from, **to; /* the callee's locals and their copies */
    int nmap, capfrom, capto;
    int serial;
} inl;

static bool const_index(const ad_expr *e, long long *out)
{
    if (!e || e->kind != EX_NUM || !e->text)
        return false;
    char *end;
    long long v = strtoll(e->text, &end, 10);
    if (end == e->text || (*end && strcmp(end, "u") != 0 && strcmp(end, "U") != 0))
        return false;
    *out = v;
    return true;
}

static bool is_param_of(const ad_func *g, const ad_var *v)
{
    return v && v->kind == VAR_PARAM && v->index >= 0 && v->index < g->nparams &&
           g->params[v->index] == v;
}

/* Whether g's expression e uses g's parameters only in the forms inlining can bind: a pointer
 * parameter as p[constant] or *p, a scalar parameter only read. */
static bool expr_inlinable(const ad_func *g, const ad_expr *e, bool top)
{
    if (!e)
        return true;
    switch (e->kind) {
    case EX_VAR:
        if (is_param_of(g, e->var))
            return e->var->type->kind == TY_INT || ad_type_is_real(e->var->type);
        return e->var->kind == VAR_LOCAL;
    case EX_INDEX:
    case EX_DEREF: {
        long long i = 0;
        if (e->a && e->a->kind == EX_VAR && is_param_of(g, e->a->var)) {
            if (e->a->var->type->kind != TY_PTR || !e->a->var->type->elem ||
                (e->a->var->type->elem->kind != TY_INT && !ad_type_is_real(e->a->var->type->elem)))
                return false;
            return e->kind == EX_DEREF || (const_index(e->b, &i) && i >= 0);
        }
        break;
    }
    case EX_CALL:
        if (e->callee)
            return false;
        break;
    case EX_ASSIGN:
    case EX_INCDEC:
    case EX_ADDR: {
        /* a scalar parameter is never written, and no address is taken of one */
        const ad_var *r = ad_root(e->a);
        if (r && is_param_of(g, r) && r->type->kind != TY_PTR)
            return false;
        if (e->kind == EX_ADDR)
            return false;
        break;
    }
    case EX_CAST:
        /* (void)p of a pointer parameter: a statement of its own, dropped */
        if (top && e->type->kind == TY_VOID && e->a && e->a->kind == EX_VAR &&
            is_param_of(g, e->a->var))
            return true;
        break;
    case EX_MEMBER:
        return false;
    default:
        break;
    }
    if (!expr_inlinable(g, e->a, false) || !expr_inlinable(g, e->b, false) ||
        !expr_inlinable(g, e->c, false))
        return false;
    for (int i = 0; i < e->nargs; i++)
        if (!expr_inlinable(g, e->args[i], false))
            return false;
    return true;
}

static bool stmt_inlinable(const ad_func *g, const ad_stmt *s, bool last, int *count)
{
    if (!s)
        return true;
    if (++*count > AD_INLINE_MAX_STMTS)
        return false;
    switch (s->kind) {
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            if (!stmt_inlinable(g, s->body[i], last && i == s->n - 1, count))
                return false;
        return true;
    case ST_DECL:
        if (s->var->type->kind == TY_STRUCT || s->var->type->kind == TY_PTR)
            return false;
        if (!expr_inlinable(g, s->e, false))
            return false;
        for (int i = 0; i < s->ninits; i++)
            if (!expr_inlinable(g, s->inits[i], false))
                return false;
        return true;
    case ST_EXPR:
        return expr_inlinable(g, s->e, true);
    case ST_NULL:
        return true;
    case ST_RETURN:
        return last && !s->e;
    default:
        return false;
    }
}

static bool func_inlinable(const ad_func *g)
{
    if (!g || !g->has_body || !g->body || !g->is_static || g->prim || g->nerrors ||
        g->ret->kind != TY_VOID)
        return false;
    for (int i = 0; i < g->nparams; i++) {
        const ad_type *t = g->params[i]->type;
        if (t->kind != TY_INT && !ad_type_is_real(t) && t->kind != TY_PTR)
            return false;
    }
    int count = 0;
    return stmt_inlinable(g, g->body, true, &count);
}

/* The variable an argument passes for a pointer parameter of element type `elem`: an array
 * or pointer variable, or the address of a scalar (*scalar). */
static bool bind_pointer(const ad_expr *a, const ad_type *elem, binding *b)
{
    while (a && a->kind == EX_CAST && a->a && a->type->kind == TY_PTR &&
           (a->a->type->kind == TY_PTR || a->a->type->kind == TY_ARRAY) && a->a->type->elem &&
           a->a->type->elem->kind == elem->kind)
        a = a->a;
    if (!a)
        return false;
    if (a->kind == EX_VAR && (a->var->type->kind == TY_ARRAY || a->var->type->kind == TY_PTR) &&
        a->var->type->elem && a->var->type->elem->kind == elem->kind) {
        b->array = a->var;
        a->var->inlined = true;
        return true;
    }
    if (a->kind == EX_ADDR && a->a && a->a->kind == EX_VAR && a->a->var->type->kind == elem->kind) {
        b->scalar = a->a->var;
        return true;
    }
    return false;
}

static ad_var *mapped(const inl *in, ad_var *v)
{
    for (int i = 0; i < in->nmap; i++)
        if (in->from[i] == v)
            return in->to[i];
    return NULL;
}

static binding *binding_of(const inl *in, const ad_var *p)
{
    for (int i = 0; i < in->nb; i++)
        if (in->b[i].param == p)
            return &in->b[i];
    return NULL;
}

static bool name_taken(const ad_func *f, const char *name)
{
    for (int i = 0; i < f->nparams; i++)
        if (!strcmp(f->params[i]->cname, name) || !strcmp(f->params[i]->name, name))
            return true;
    for (int i = 0; i < f->nlocals; i++)
        if (f->locals[i] &&
            (!strcmp(f->locals[i]->cname, name) || !strcmp(f->locals[i]->name, name)))
            return true;
    return false;
}

/* A new local of f named after `base` and not used by f. */
static ad_var *fresh_local(ad_func *f, ad_type *t, const char *base, ad_loc loc, int depth,
                           int *serial)
{
    const char *name;
    do
        name = ad_fmt("%s_i%d", base, ++*serial);
    while (name_taken(f, name));
    return ad_func_new_local(f, t, name, loc, depth);
}

static ad_expr *copy_expr(inl *in, const ad_expr *e)
{
    if (!e)
        return NULL;
    ad_expr *c = ad_alloc(sizeof *c);
    *c = *e;
    c->tmp = -1;
    if ((e->kind == EX_INDEX || e->kind == EX_DEREF) && e->a && e->a->kind == EX_VAR) {
        binding *b = binding_of(in, e->a->var);
        if (b) {
            long long i = 0;
            if (e->kind == EX_INDEX)
                const_index(e->b, &i);
            if (b->scalar) {
                ad_expr *v = ad_expr_var(b->scalar);
                v->loc = e->loc;
                v->tmp = -1;
                return v;
            }
            ad_expr *x = ad_expr_elem(b->array, i);
            x->type = e->type;
            x->loc = e->loc;
            x->tmp = -1;
            if (x->b)
                x->b->tmp = -1;
            if (x->a)
                x->a->tmp = -1;
            return x;
        }
    }
    if (e->kind == EX_VAR) {
        binding *b = binding_of(in, e->var);
        ad_var *m = b ? b->local : mapped(in, e->var);
        if (m)
            c->var = m;
        return c;
    }
    c->a = copy_expr(in, e->a);
    c->b = copy_expr(in, e->b);
    c->c = copy_expr(in, e->c);
    if (e->nargs) {
        c->args = ad_alloc((size_t)e->nargs * sizeof *c->args);
        for (int i = 0; i < e->nargs; i++)
            c->args[i] = copy_expr(in, e->args[i]);
    }
    return c;
}

static ad_stmt *copy_stmt(inl *in, const ad_stmt *s, int depth)
{
    ad_stmt *c = ad_alloc(sizeof *c);
    *c = *s;
    switch (s->kind) {
    case ST_BLOCK:
        c->body = ad_alloc((size_t)(s->n ? s->n : 1) * sizeof *c->body);
        for (int i = 0; i < s->n; i++)
            c->body[i] = copy_stmt(in, s->body[i], depth);
        return c;
    case ST_DECL: {
        ad_var *v =
            fresh_local(in->caller, s->var->type, s->var->cname, s->var->loc, depth, &in->serial);
        v->inlined = true;
        c->e = copy_expr(in, s->e);
        if (s->ninits) {
            c->inits = ad_alloc((size_t)s->ninits * sizeof *c->inits);
            for (int i = 0; i < s->ninits; i++)
                c->inits[i] = copy_expr(in, s->inits[i]);
        }
        /* mapped after its initialiser, which cannot read it */
        in->from = ad_grow(in->from, in->nmap, &in->capfrom, sizeof *in->from);
        in->to = ad_grow(in->to, in->nmap, &in->capto, sizeof *in->to);
        in->from[in->nmap] = s->var;
        in->to[in->nmap++] = v;
        c->var = v;
        return c;
    }
    case ST_EXPR: {
        const ad_expr *e = s->e;
        if (e->kind == EX_CAST && e->type->kind == TY_VOID && e->a && e->a->kind == EX_VAR &&
            binding_of(in, e->a->var) && e->a->var->type->kind == TY_PTR) {
            c->kind = ST_NULL;
            c->e = NULL;
            return c;
        }
        c->e = copy_expr(in, e);
        return c;
    }
    case ST_RETURN:
        c->kind = ST_NULL;
        return c;
    default:
        return c;
    }
}

/* The statements that replace the call statement s (callee g), or NULL when the call's
 * arguments cannot be bound. */
static ad_stmt *inline_call(ad_func *f, ad_stmt *s, int depth, int *serial)
{
    ad_expr *call = s->e;
    ad_func *g = call->callee;
    if (call->nargs != g->nparams)
        return NULL;
    inl in = {.caller = f, .serial = *serial};
    in.b = ad_alloc((size_t)(g->nparams ? g->nparams : 1) * sizeof *in.b);
    ad_stmt **items = ad_alloc((size_t)(g->nparams + 1) * sizeof *items);
    int n = 0;
    for (int i = 0; i < g->nparams; i++) {
        ad_var *p = g->params[i];
        binding *b = &in.b[in.nb++];
        memset(b, 0, sizeof *b);
        b->param = p;
        if (p->type->kind == TY_PTR) {
            if (!bind_pointer(call->args[i], p->type->elem, b))
                return NULL;
            continue;
        }
        const ad_expr *a = call->args[i];
        if (a->kind == EX_ASSIGN || a->kind == EX_INCDEC || a->kind == EX_CALL)
            return NULL;
        b->local = fresh_local(f, p->type, p->cname, p->loc, depth, &in.serial);
        ad_stmt *d = ad_alloc(sizeof *d);
        d->kind = ST_DECL;
        d->loc = s->loc;
        d->var = b->local;
        d->e = call->args[i];
        items[n++] = d;
    }
    items[n++] = copy_stmt(&in, g->body, depth);
    *serial = in.serial;
    ad_stmt *blk = ad_alloc(sizeof *blk);
    blk->kind = ST_BLOCK;
    blk->loc = s->loc;
    blk->body = items;
    blk->n = n;
    return blk;
}

static int g_inlined; /* calls inlined in the current function */

static ad_stmt *inline_stmt(ad_func *f, ad_stmt *s, int depth, int *serial)
{
    if (!s)
        return s;
    switch (s->kind) {
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            s->body[i] = inline_stmt(f, s->body[i], depth, serial);
        return s;
    case ST_EXPR:
        if (s->e && s->e->kind == EX_CALL && s->e->callee && s->e->callee != f &&
            func_inlinable(s->e->callee)) {
            ad_stmt *r = inline_call(f, s, depth, serial);
            g_inlined += r != NULL;
            return r ? r : s;
        }
        return s;
    case ST_IF:
        s->then = inline_stmt(f, s->then, depth, serial);
        s->els = inline_stmt(f, s->els, depth, serial);
        return s;
    case ST_FOR:
    case ST_WHILE:
    case ST_DO:
        s->then = inline_stmt(f, s->then, depth + 1, serial);
        return s;
    default:
        return s;
    }
}

/* ---- Scalar replacement -------------------------------------------------------------------- */

typedef struct sra {
    ad_var *v;
    bool ok;
} sra;

static void sra_expr(sra *r, const ad_expr *e)
{
    if (!e || !r->ok)
        return;
    if (e->kind == EX_INDEX && e->a && e->a->kind == EX_VAR && e->a->var == r->v) {
        long long i;
        if (!const_index(e->b, &i) || i < 0 || i >= r->v->type->len)
            r->ok = false;
        return;
    }
    if (e->kind == EX_VAR && e->var == r->v) {
        r->ok = false; /* the array as a whole: passed, decayed, sized */
        return;
    }
    sra_expr(r, e->a);
    sra_expr(r, e->b);
    sra_expr(r, e->c);
    for (int i = 0; i < e->nargs; i++)
        sra_expr(r, e->args[i]);
}

static void sra_stmt(sra *r, const ad_stmt *s)
{
    if (!s || !r->ok)
        return;
    if (s->kind == ST_DECL && s->var == r->v && s->e)
        r->ok = false; /* initialised from an expression (a string) */
    sra_expr(r, s->e);
    sra_expr(r, s->inc);
    for (int i = 0; i < s->ninits; i++)
        sra_expr(r, s->inits[i]);
    for (int i = 0; i < s->n; i++)
        sra_stmt(r, s->body[i]);
    sra_stmt(r, s->init);
    sra_stmt(r, s->then);
    sra_stmt(r, s->els);
}

static void sra_rewrite_expr(ad_expr *e, const ad_var *v, ad_var **elems)
{
    if (!e)
        return;
    if (e->kind == EX_INDEX && e->a && e->a->kind == EX_VAR && e->a->var == v) {
        long long i = 0;
        const_index(e->b, &i);
        e->kind = EX_VAR;
        e->var = elems[i];
        e->a = e->b = NULL;
        return;
    }
    sra_rewrite_expr(e->a, v, elems);
    sra_rewrite_expr(e->b, v, elems);
    sra_rewrite_expr(e->c, v, elems);
    for (int i = 0; i < e->nargs; i++)
        sra_rewrite_expr(e->args[i], v, elems);
}

static void sra_rewrite_stmt(ad_stmt *s, const ad_var *v, ad_var **elems)
{
    if (!s)
        return;
    if (s->kind == ST_DECL && s->var == v) {
        /* one declaration per element, in a block that opens no scope of its own */
        long long len = v->type->len;
        ad_stmt **items = ad_alloc((size_t)len * sizeof *items);
        for (long long i = 0; i < len; i++) {
            ad_stmt *d = ad_alloc(sizeof *d);
            d->kind = ST_DECL;
            d->loc = s->loc;
            d->var = elems[i];
            if (s->ninits) {
                if (i < s->ninits) {
                    d->e = s->inits[i];
                    sra_rewrite_expr(d->e, v, elems);
                } else {
                    ad_expr like = {.type = elems[i]->type, .loc = s->loc};
                    d->e = ad_expr_zero(&like);
                }
            }
            items[i] = d;
        }
        s->kind = ST_BLOCK;
        s->var = NULL;
        s->inits = NULL;
        s->ninits = 0;
        s->e = NULL;
        s->body = items;
        s->n = (int)len;
        return;
    }
    sra_rewrite_expr(s->e, v, elems);
    sra_rewrite_expr(s->inc, v, elems);
    for (int i = 0; i < s->ninits; i++)
        sra_rewrite_expr(s->inits[i], v, elems);
    for (int i = 0; i < s->n; i++)
        sra_rewrite_stmt(s->body[i], v, elems);
    sra_rewrite_stmt(s->init, v, elems);
    sra_rewrite_stmt(s->then, v, elems);
    sra_rewrite_stmt(s->els, v, elems);
}

static void scalarize(ad_func *f)
{
    int nlocals = f->nlocals; /* the elements made here are not candidates */
    for (int k = 0; k < nlocals; k++) {
        ad_var *v = f->locals[k];
        const ad_type *t = v->type;
        if (!v->inlined || t->kind != TY_ARRAY || t->len < 1 || t->len > AD_SCALARIZE_MAX ||
            !t->elem || (t->elem->kind != TY_INT && !ad_type_is_real(t->elem)))
            continue;
        sra r = {v, true};
        sra_stmt(&r, f->body);
        if (!r.ok)
            continue;
        ad_var *elems[AD_SCALARIZE_MAX];
        int serial = 0;
        for (long long i = 0; i < t->len; i++)
            elems[i] = fresh_local(f, t->elem, ad_fmt("%s_%lld", v->cname, i), v->loc,
                                   v->loop_depth, &serial);
        sra_rewrite_stmt(f->body, v, elems);
        v->type = ad_type_scalar_of(v->type); /* unused from here on */
        f->locals[k] = NULL;
    }
    /* the replaced arrays leave the function's locals */
    int n = 0;
    for (int k = 0; k < f->nlocals; k++)
        if (f->locals[k]) {
            f->locals[k]->index = n;
            f->locals[n++] = f->locals[k];
        }
    f->nlocals = n;
}

/* ---- Declarations where their value is made ---------------------------------------------- */

/* Blocks open no scope here (names are unique, generated code declares every local at the
 * top): a block's nested blocks are spliced into it. */
static void flatten(ad_stmt *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        flatten(s->body[i]);
    flatten(s->init);
    flatten(s->then);
    flatten(s->els);
    if (s->kind != ST_BLOCK)
        return;
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += s->body[i]->kind == ST_BLOCK ? s->body[i]->n : 1;
    if (n == s->n)
        return;
    ad_stmt **items = ad_alloc((size_t)(n ? n : 1) * sizeof *items);
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        ad_stmt *c = s->body[i];
        if (c->kind == ST_BLOCK)
            for (int j = 0; j < c->n; j++)
                items[k++] = c->body[j];
        else
            items[k++] = c;
    }
    s->body = items;
    s->n = n;
}

typedef struct uses {
    const ad_var *v;
    int reads, writes; /* writes: assignments, ++/--, address taken, passed to a call */
} uses;

static void uses_expr(uses *u, const ad_expr *e, bool lhs)
{
    if (!e)
        return;
    if (e->kind == EX_CAST && e->type->kind == TY_VOID && e->a && e->a->kind == EX_VAR)
        return; /* (void)v: no use of the value */
    if (e->kind == EX_VAR && e->var == u->v) {
        u->reads += !lhs;
        return;
    }
    if ((e->kind == EX_ASSIGN || e->kind == EX_INCDEC) && ad_root(e->a) == u->v) {
        u->writes++;
        if (e->kind == EX_INCDEC || strcmp(e->op, "=") != 0)
            u->reads++;
        uses_expr(u, e->a, e->a->kind == EX_VAR);
        uses_expr(u, e->b, false);
        return;
    }
    if (e->kind == EX_ADDR && ad_root(e->a) == u->v)
        u->writes += 2;
    if (e->kind == EX_CALL)
        for (int i = 0; i < e->nargs; i++)
            if (e->args[i]->type->kind == TY_PTR && ad_root(e->args[i]) == u->v)
                u->writes += 2;
    uses_expr(u, e->a, false);
    uses_expr(u, e->b, false);
    uses_expr(u, e->c, false);
    for (int i = 0; i < e->nargs; i++)
        uses_expr(u, e->args[i], false);
}

static void uses_stmt(uses *u, const ad_stmt *s)
{
    if (!s)
        return;
    if (s->kind == ST_DECL && s->var == u->v && (s->e || s->ninits))
        u->writes++;
    uses_expr(u, s->e, false);
    uses_expr(u, s->inc, false);
    for (int i = 0; i < s->ninits; i++)
        uses_expr(u, s->inits[i], false);
    for (int i = 0; i < s->n; i++)
        uses_stmt(u, s->body[i]);
    uses_stmt(u, s->init);
    uses_stmt(u, s->then);
    uses_stmt(u, s->els);
}

/* The block and index of the statement `v = e` (a plain assignment of v at the top level of
 * a block), or NULL. */
static ad_stmt *find_assign(ad_stmt *s, const ad_var *v, int *at)
{
    if (!s)
        return NULL;
    if (s->kind == ST_BLOCK)
        for (int i = 0; i < s->n; i++) {
            const ad_stmt *a = s->body[i];
            if (a->kind == ST_EXPR && a->e->kind == EX_ASSIGN && !strcmp(a->e->op, "=") &&
                a->e->a->kind == EX_VAR && a->e->a->var == v) {
                *at = i;
                return s;
            }
        }
    ad_stmt *r = NULL;
    for (int i = 0; i < s->n && !r; i++)
        r = find_assign(s->body[i], v, at);
    if (!r)
        r = find_assign(s->init, v, at);
    if (!r)
        r = find_assign(s->then, v, at);
    if (!r)
        r = find_assign(s->els, v, at);
    return r;
}

static bool contains(const ad_stmt *s, const ad_stmt *x)
{
    if (!s)
        return false;
    if (s == x)
        return true;
    for (int i = 0; i < s->n; i++)
        if (contains(s->body[i], x))
            return true;
    return contains(s->init, x) || contains(s->then, x) || contains(s->els, x);
}

static void decls_of(ad_stmt *s, ad_stmt ***out, int *n, int *cap)
{
    if (!s)
        return;
    if (s->kind == ST_DECL && !s->ninits) {
        *out = ad_grow(*out, *n, cap, sizeof **out);
        (*out)[(*n)++] = s;
    }
    for (int i = 0; i < s->n; i++)
        decls_of(s->body[i], out, n, cap);
    decls_of(s->init, out, n, cap);
    decls_of(s->then, out, n, cap);
    decls_of(s->els, out, n, cap);
}

/* `T v;` (or `T v = constant;`) and, in a block B, `v = e;`, v's only other assignment, where
 * every read of v in the function follows it in B: the declaration's own value is never
 * read, and the assignment becomes the declaration `T v = e;` (the first one is removed).
 * The reverse mode recomputes such a local instead of storing it when e allows (a local
 * declared at the top of a loop body); the first order's output declares its locals at the
 * top of the function with a zero, and assigns them where the input declared them. */
static void merge_decls(ad_func *f)
{
    ad_stmt **ds = NULL;
    int nd = 0, cap = 0;
    decls_of(f->body, &ds, &nd, &cap);
    for (int k = 0; k < nd; k++) {
        ad_stmt *d = ds[k];
        ad_var *v = d->var;
        if (!v || v->kind != VAR_LOCAL || (v->type->kind != TY_INT && !ad_type_is_real(v->type)) ||
            (d->e && d->e->kind != EX_NUM &&
             !(d->e->kind == EX_CAST && d->e->a && d->e->a->kind == EX_NUM)))
            continue;
        uses all = {v, 0, 0};
        uses_stmt(&all, f->body);
        if (all.writes != 1 + (d->e != NULL))
            continue;
        int j = -1;
        ad_stmt *b = find_assign(f->body, v, &j);
        if (!b)
            continue;
        uses self = {v, 0, 0};
        uses_stmt(&self, b->body[j]);
        if (self.reads)
            continue;
        uses after = {v, 0, 0};
        bool decl_after = false;
        for (int i = j + 1; i < b->n; i++) {
            uses_stmt(&after, b->body[i]);
            decl_after |= contains(b->body[i], d);
        }
        if (decl_after || after.reads != all.reads)
            continue;
        ad_stmt *a = b->body[j];
        ad_expr *e = a->e->b;
        a->kind = ST_DECL;
        a->var = v;
        a->e = e;
        d->kind = ST_NULL;
        d->var = NULL;
        d->e = NULL;
    }
}

/* `v = a; for (; cond; inc)` where inc assigns the integer v: the assignment becomes the
 * loop's initialisation (the first order's output writes its loops so), which makes the
 * loop canonical for the analyses when it is (its counter restored, not stored). */
static void adopt_for_init(ad_stmt *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        adopt_for_init(s->body[i]);
    adopt_for_init(s->init);
    adopt_for_init(s->then);
    adopt_for_init(s->els);
    if (s->kind != ST_BLOCK)
        return;
    for (int i = 1; i < s->n; i++) {
        ad_stmt *L = s->body[i], *a = s->body[i - 1];
        if (L->kind != ST_FOR || L->init || !L->inc || L->inc->kind != EX_ASSIGN ||
            L->inc->a->kind != EX_VAR || L->inc->a->var->type->kind != TY_INT ||
            a->kind != ST_EXPR || a->e->kind != EX_ASSIGN || strcmp(a->e->op, "=") != 0 ||
            a->e->a->kind != EX_VAR || a->e->a->var != L->inc->a->var)
            continue;
        L->init = a;
        s->body[i - 1] = ad_alloc(sizeof *s->body[i - 1]);
        s->body[i - 1]->kind = ST_NULL;
        s->body[i - 1]->loc = a->loc;
    }
}

void ad_inline(ad_unit *u)
{
    for (int i = 0; i < u->nfuncs; i++) {
        ad_func *f = u->funcs[i];
        if (!f->body || f->nerrors || f->prim)
            continue;
        int serial = 0;
        g_inlined = 0;
        f->body = inline_stmt(f, f->body, 0, &serial);
        if (!g_inlined)
            continue;
        scalarize(f);
        flatten(f->body);
        merge_decls(f);
        adopt_for_init(f->body);
    }
}
