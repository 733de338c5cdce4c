/*
 * Normalisation before the analyses: compound assignments and ++/-- become plain
 * assignments (x += e is x = x + e, whose partials come from the row of +), and a call to a
 * function of the file inside an expression is moved to a statement of its own that assigns
 * a new local (so that its forward sweep and its adjoint each run exactly once).
 */
#include <string.h>

#include "ad.h"

static int g_tmp;

/* A new expression node of the kind, operator, operands, type and place given. */
static ad_expr *node(ad_ekind kind, const char *op, ad_expr *a, ad_expr *b, ad_type *type,
                     ad_loc loc)
{
    ad_expr *e = ad_alloc(sizeof *e);
    e->kind = kind;
    e->op = op;
    e->a = a;
    e->b = b;
    e->type = type;
    e->loc = loc;
    e->tmp = -1;
    return e;
}

/* The constant `text` of type t. */
static ad_expr *num(const char *text, ad_type *t, ad_loc loc)
{
    ad_expr *e = node(EX_NUM, NULL, NULL, NULL, t, loc);
    e->text = text;
    return e;
}

/* The type int, for the integer constants and conditions the rewrites make. */
static ad_type *int_type(void)
{
    ad_type *it = ad_alloc(sizeof *it);
    it->kind = TY_INT;
    it->spelling = it->unq = "int";
    return it;
}

static ad_expr *num_one(const ad_expr *like)
{
    return num(ad_type_is_real(like->type) ? "1.0" : "1", like->type, like->loc);
}

static ad_expr *bin(const char *op, ad_expr *a, ad_expr *b, ad_type *t)
{
    return node(EX_BIN, op, a, b, t, a->loc);
}

/* x op= e -> x = x op e; x++ -> x = x + 1. */
static ad_expr *desugar(ad_expr *e)
{
    if (e->kind == EX_ASSIGN && strcmp(e->op, "=") != 0) {
        size_t n = strlen(e->op);
        const char *op = ad_fmt("%.*s", (int)(n - 1), e->op);
        ad_expr *rhs = e->b;
        /* the operation is done in the type of the left operand */
        e->b = bin(op, e->a, rhs, e->a->type);
        e->op = "=";
    } else if (e->kind == EX_INCDEC) {
        ad_expr *a = ad_alloc(sizeof *a);
        *a = *e;
        a->kind = EX_ASSIGN;
        a->op = "=";
        a->a = e->a;
        a->b = bin(e->op[0] == '+' ? "+" : "-", e->a, num_one(e->a), e->a->type);
        return a;
    }
    return e;
}

static bool nested_side_effect(const ad_expr *e, bool top)
{
    if (!e)
        return false;
    if (!top && (e->kind == EX_ASSIGN || e->kind == EX_INCDEC)) {
        ad_error(e->loc, "unsupported construct: an assignment or ++/-- inside an expression "
                         "(write it as a statement of its own)");
        return true;
    }
    bool r = nested_side_effect(e->a, false) | nested_side_effect(e->b, false) |
             nested_side_effect(e->c, false);
    for (int i = 0; i < e->nargs; i++)
        r |= nested_side_effect(e->args[i], false);
    return r;
}

typedef struct hoist {
    ad_func *f;
    ad_stmt **pre; /* statements to insert before */
    int npre, cappre;
    int depth;
    bool forbid; /* inside && || ?: */
} hoist;

static void add_pre(hoist *h, ad_stmt *s)
{
    h->pre = ad_grow(h->pre, h->npre, &h->cappre, sizeof *h->pre);
    h->pre[h->npre++] = s;
}

static ad_var *new_local(ad_func *f, ad_type *t, const char *base, ad_loc loc, int depth)
{
    return ad_func_new_local(f, t, ad_fmt("%s_r%d_", base, ++g_tmp), loc, depth);
}

static bool has_local_call(const ad_expr *e)
{
    if (!e)
        return false;
    if (e->kind == EX_CALL && e->callee)
        return true;
    if (has_local_call(e->a) || has_local_call(e->b) || has_local_call(e->c))
        return true;
    for (int i = 0; i < e->nargs; i++)
        if (has_local_call(e->args[i]))
            return true;
    return false;
}

static ad_expr *hoist_calls(hoist *h, ad_expr *e, bool top);

/* The expression `a = b` (of a's type). */
static ad_expr *assign_expr(ad_expr *a, ad_expr *b, ad_loc loc)
{
    return node(EX_ASSIGN, "=", a, b, a->type, loc);
}

static ad_expr *var_expr(ad_var *v, ad_loc loc)
{
    ad_expr *ref = ad_expr_var(v);
    ref->loc = loc;
    return ref;
}

static ad_stmt *assign_stmt(ad_var *v, ad_expr *value)
{
    ad_stmt *s = ad_alloc(sizeof *s);
    s->kind = ST_EXPR;
    s->loc = value->loc;
    s->e = assign_expr(var_expr(v, value->loc), value, value->loc);
    return s;
}

/* One branch of a lowered c ? a : b: its own hoisted calls, then t = value. */
static ad_stmt *branch_block(hoist *h, ad_var *t, ad_expr *value)
{
    hoist inner = {.f = h->f, .depth = h->depth};
    ad_expr *v = hoist_calls(&inner, value, false);
    ad_stmt **items = ad_alloc((size_t)(inner.npre + 1) * sizeof *items);
    if (inner.npre)
        memcpy(items, inner.pre, (size_t)inner.npre * sizeof *items);
    items[inner.npre] = assign_stmt(t, v);
    ad_stmt *b = ad_alloc(sizeof *b);
    b->kind = ST_BLOCK;
    b->loc = value->loc;
    b->body = items;
    b->n = inner.npre + 1;
    return b;
}

/* Replaces calls of functions of the file below e by new locals assigned before. */
static ad_expr *hoist_calls(hoist *h, ad_expr *e, bool top)
{
    if (!e)
        return e;
    if (e->kind == EX_COND && !h->forbid && (has_local_call(e->b) || has_local_call(e->c)) &&
        !has_local_call(e->a)) {
        /* t = c ? a : b with calls in a branch: if (c) t = a; else t = b; */
        ad_var *t = new_local(h->f, e->type, "cond", e->loc, h->depth);
        ad_stmt *st = ad_alloc(sizeof *st);
        st->kind = ST_IF;
        st->loc = e->loc;
        st->e = e->a;
        st->then = branch_block(h, t, e->b);
        st->els = branch_block(h, t, e->c);
        add_pre(h, st);
        return var_expr(t, e->loc);
    }
    bool forbid = h->forbid;
    if (e->kind == EX_COND || (e->kind == EX_BIN && (!strcmp(e->op, "&&") || !strcmp(e->op, "||"))))
        h->forbid = true;
    e->a = hoist_calls(h, e->a, false);
    e->b = hoist_calls(h, e->b, false);
    e->c = hoist_calls(h, e->c, false);
    h->forbid = forbid;
    for (int i = 0; i < e->nargs; i++)
        e->args[i] = hoist_calls(h, e->args[i], false);
    if (e->kind != EX_CALL || top || !e->callee)
        return e;
    if (h->forbid) {
        ad_error(e->loc,
                 "unsupported construct: a call to '%s' inside &&, || or ?: (assign it to "
                 "a variable first)",
                 e->text);
        return e;
    }
    if (e->type->kind == TY_VOID)
        return e;
    ad_var *v = new_local(h->f, e->type, e->text, e->loc, h->depth);
    ad_expr *ref = var_expr(v, e->loc);
    ad_stmt *s = ad_alloc(sizeof *s);
    s->kind = ST_EXPR;
    s->loc = e->loc;
    s->e = assign_expr(ref, e, e->loc);
    add_pre(h, s);
    return ref;
}

static ad_stmt *norm_stmt(hoist *h, ad_stmt *s);

/* A statement with the hoisted calls before it: a block when there are any. */
static ad_stmt *with_pre(hoist *h, ad_stmt *s, int mark)
{
    if (h->npre == mark)
        return s;
    int n = h->npre - mark + 1;
    ad_stmt **items = ad_alloc((size_t)n * sizeof *items);
    memcpy(items, h->pre + mark, (size_t)(n - 1) * sizeof *items);
    items[n - 1] = s;
    h->npre = mark;
    ad_stmt *b = ad_alloc(sizeof *b);
    b->kind = ST_BLOCK;
    b->loc = s->loc;
    b->body = items;
    b->n = n;
    return b;
}

static ad_expr *norm_top_expr(hoist *h, ad_expr *e)
{
    if (!e)
        return e;
    nested_side_effect(e, true);
    e = desugar(e);
    if (e->kind == EX_ASSIGN) {
        e->a = hoist_calls(h, e->a, false);
        e->b = hoist_calls(h, e->b, e->b->kind == EX_CALL);
        return e;
    }
    return hoist_calls(h, e, true);
}

static void no_calls(ad_expr *e, const char *where)
{
    if (!e)
        return;
    if (e->kind == EX_CALL && e->callee)
        ad_error(e->loc,
                 "unsupported construct: a call to '%s' in %s (assign it to a variable first)",
                 e->text, where);
    no_calls(e->a, where);
    no_calls(e->b, where);
    no_calls(e->c, where);
    for (int i = 0; i < e->nargs; i++)
        no_calls(e->args[i], where);
}

/* ---- Loop conditions with side effects ---------------------------------------------------
 *
 * `while (i++ < n) B` becomes `while (1) { t = i; i = i + 1; if (!(t < n)) break; B }`: the
 * condition's assignments, ++/-- and calls of functions of the file are statements at the
 * top of the body, in their order of evaluation, and the condition reads their results
 * (a postfix ++/-- the value before, through a new local). `for (I; C; N) B` keeps I and N
 * (a `continue` still runs N, then the condition); `do B while (C)` puts them at the end
 * of its body, and is refused when B continues it (the `continue` would skip them). A side
 * effect in an operand of &&, || or ?: (evaluated or not) is refused. */

static ad_expr *copy_expr(const ad_expr *e)
{
    if (!e)
        return NULL;
    ad_expr *c = ad_alloc(sizeof *c);
    *c = *e;
    c->a = copy_expr(e->a);
    c->b = copy_expr(e->b);
    c->c = copy_expr(e->c);
    if (e->nargs) {
        c->args = ad_alloc((size_t)e->nargs * sizeof *c->args);
        for (int i = 0; i < e->nargs; i++)
            c->args[i] = copy_expr(e->args[i]);
    }
    return c;
}

static bool has_effect(const ad_expr *e)
{
    if (!e)
        return false;
    if (e->kind == EX_ASSIGN || e->kind == EX_INCDEC || (e->kind == EX_CALL && e->callee))
        return true;
    if (has_effect(e->a) || has_effect(e->b) || has_effect(e->c))
        return true;
    for (int i = 0; i < e->nargs; i++)
        if (has_effect(e->args[i]))
            return true;
    return false;
}

typedef struct lift {
    hoist *h;
    ad_stmt **items;
    int n, cap;
    bool failed;
} lift;

static void lift_add(lift *l, ad_stmt *st)
{
    l->items = ad_grow(l->items, l->n, &l->cap, sizeof *l->items);
    l->items[l->n++] = st;
}

static ad_stmt *expr_stmt(ad_expr *e)
{
    ad_stmt *st = ad_alloc(sizeof *st);
    st->kind = ST_EXPR;
    st->loc = e->loc;
    st->e = e;
    return st;
}

/* The assignments and ++/-- of e moved to statements of l (their operands' first), e
 * rewritten to read their values; guarded: an operand that may not be evaluated. */
static ad_expr *lift_effects(lift *l, ad_expr *e, bool guarded)
{
    if (!e)
        return e;
    bool lazy =
        e->kind == EX_COND || (e->kind == EX_BIN && (!strcmp(e->op, "&&") || !strcmp(e->op, "||")));
    if (e->kind == EX_ASSIGN)
        e->b = lift_effects(l, e->b, guarded); /* the value, then the place */
    else
        e->a = lift_effects(l, e->a, guarded);
    e->b = e->kind == EX_ASSIGN ? e->b : lift_effects(l, e->b, guarded || lazy);
    e->c = lift_effects(l, e->c, guarded || lazy);
    for (int i = 0; i < e->nargs; i++)
        e->args[i] = lift_effects(l, e->args[i], guarded);
    if (e->kind != EX_ASSIGN && e->kind != EX_INCDEC && !(e->kind == EX_CALL && e->callee))
        return e;
    if (guarded) {
        if (!l->failed)
            ad_error(e->loc,
                     "unsupported construct: %s in an operand of &&, || or ?: of a "
                     "loop condition (test it in the loop's body)",
                     e->kind == EX_CALL ? "a call of a function of the file"
                                        : "an assignment or ++/--");
        l->failed = true;
        return e;
    }
    if (e->kind == EX_ASSIGN && e->a->kind != EX_VAR && e->a->kind != EX_INDEX &&
        e->a->kind != EX_MEMBER) {
        ad_error(e->loc, "unsupported construct: this assignment in a loop condition");
        l->failed = true;
        return e;
    }
    if (e->kind == EX_CALL) {
        if (e->type->kind == TY_VOID)
            return e;
        ad_var *r = new_local(l->h->f, e->type, e->text, e->loc, l->h->depth + 1);
        lift_add(l, assign_stmt(r, e));
        return var_expr(r, e->loc);
    }
    ad_expr *place = copy_expr(e->a);
    if (e->kind == EX_INCDEC && !e->prefix) {
        ad_var *old = new_local(l->h->f, e->a->type, "old", e->loc, l->h->depth + 1);
        lift_add(l, assign_stmt(old, copy_expr(e->a)));
        lift_add(l, expr_stmt(e));
        return var_expr(old, e->loc);
    }
    lift_add(l, expr_stmt(e));
    return place;
}

static bool continues(const ad_stmt *s)
{
    if (!s)
        return false;
    switch (s->kind) {
    case ST_CONTINUE:
        return true;
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            if (continues(s->body[i]))
                return true;
        return false;
    case ST_IF:
        return continues(s->then) || continues(s->els);
    default:
        return false; /* a nested loop's continue is its own */
    }
}

/* The loop s rewritten as above when its condition has an effect; false on an error. */
static bool lower_condition(hoist *h, ad_stmt *s)
{
    if (!s->e || !has_effect(s->e))
        return true;
    if (s->checkpoint) {
        ad_error(s->loc, "unsupported construct: a checkpointed loop whose condition has a "
                         "side effect (count it with a for loop)");
        return false;
    }
    if (s->kind == ST_DO && continues(s->then)) {
        ad_error(s->loc, "unsupported construct: `continue` in a do loop whose condition has "
                         "a side effect (test the condition in the body)");
        return false;
    }
    lift l = {.h = h};
    ad_expr *cond = lift_effects(&l, s->e, false);
    if (l.failed)
        return false;
    ad_type *it = int_type();
    ad_expr *neg = node(EX_UN, "!", cond, NULL, it, cond->loc);
    ad_stmt *brk = ad_alloc(sizeof *brk);
    brk->kind = ST_BREAK;
    brk->loc = s->loc;
    ad_stmt *test = ad_alloc(sizeof *test);
    test->kind = ST_IF;
    test->loc = s->loc;
    test->e = neg;
    test->then = brk;
    lift_add(&l, test);
    ad_stmt **items = ad_alloc((size_t)(l.n + 1) * sizeof *items);
    if (s->kind == ST_DO) {
        items[0] = s->then;
        memcpy(items + 1, l.items, (size_t)l.n * sizeof *items);
    } else {
        memcpy(items, l.items, (size_t)l.n * sizeof *items);
        items[l.n] = s->then;
    }
    ad_stmt *b = ad_alloc(sizeof *b);
    b->kind = ST_BLOCK;
    b->loc = s->then->loc;
    b->body = items;
    b->n = l.n + 1;
    s->then = b;
    s->e = num("1", it, s->e->loc);
    return true;
}

/* ---- Structs copied as a whole --------------------------------------------------------
 *
 * `q = r` and `struct s q = r` of local structs holding real data become one assignment per
 * field (per element of an array field, through nested structs), whose derivatives the
 * modes write as for any assignment. Another source (a call, *p) is refused. */

static ad_expr *member_of(ad_expr *base, const ad_field *f)
{
    ad_expr *m = node(EX_MEMBER, NULL, base, NULL, f->type, base->loc);
    m->text = f->name;
    return m;
}

static ad_expr *element_of(ad_expr *base, long long k)
{
    ad_expr *i = num(ad_fmt("%lld", k), int_type(), base->loc);
    return node(EX_INDEX, NULL, base, i, base->type->elem, base->loc);
}

static void copy_fields(lift *l, ad_expr *dst, ad_expr *src)
{
    const ad_type *t = dst->type;
    if (t->kind == TY_STRUCT) {
        for (const ad_field *f = t->fields; f; f = f->next)
            copy_fields(l, member_of(copy_expr(dst), f), member_of(copy_expr(src), f));
        return;
    }
    if (t->kind == TY_ARRAY) {
        for (long long k = 0; k < t->len; k++)
            copy_fields(l, element_of(copy_expr(dst), k), element_of(copy_expr(src), k));
        return;
    }
    lift_add(l, expr_stmt(assign_expr(dst, src, dst->loc)));
}

static bool plain_struct(const ad_type *t, long long *slots)
{
    if (t->kind == TY_STRUCT) {
        if (t->is_union)
            return false;
        for (const ad_field *f = t->fields; f; f = f->next)
            if (!plain_struct(f->type, slots))
                return false;
        return true;
    }
    if (t->kind == TY_ARRAY) {
        long long n = 0;
        if (!plain_struct(t->elem, &n) || t->len > 65536 || n > 65536)
            return false;
        *slots += n * t->len;
        return *slots <= 65536;
    }
    *slots += 1;
    return t->kind == TY_INT || t->kind == TY_FLOAT || t->kind == TY_DOUBLE;
}

/* The statement assigning src to the struct dst field by field (a block), or NULL after an
 * error; decl: the declaration of dst to keep first, or NULL. */
static ad_stmt *struct_copy(hoist *h, ad_stmt *decl, ad_expr *dst, ad_expr *src, ad_loc loc)
{
    long long slots = 0;
    if (dst->kind != EX_VAR || src->kind != EX_VAR || !plain_struct(dst->type, &slots)) {
        ad_error(loc, "unsupported construct: a struct holding real data assigned as a whole, "
                      "other than a local copied from a local (assign its fields)");
        return NULL;
    }
    lift l = {.h = h};
    if (decl)
        lift_add(&l, decl);
    copy_fields(&l, dst, src);
    ad_stmt *b = ad_alloc(sizeof *b);
    b->kind = ST_BLOCK;
    b->loc = loc;
    b->body = l.items;
    b->n = l.n;
    return b;
}

static bool struct_with_reals(const ad_type *t)
{
    return t && t->kind == TY_STRUCT && ad_type_has_real(t);
}

static ad_stmt *norm_stmt(hoist *h, ad_stmt *s)
{
    if (!s)
        return s;
    int mark = h->npre;
    switch (s->kind) {
    case ST_BLOCK: {
        for (int i = 0; i < s->n; i++)
            s->body[i] = norm_stmt(h, s->body[i]);
        return s;
    }
    case ST_DECL:
        if (s->e && struct_with_reals(s->var->type)) {
            ad_expr *src = s->e;
            s->e = NULL;
            ad_stmt *b = struct_copy(h, s, ad_expr_var(s->var), src, s->loc);
            return b ? b : s;
        }
        if (s->e) {
            nested_side_effect(s->e, false);
            s->e = hoist_calls(h, s->e, false);
        }
        for (int i = 0; i < s->ninits; i++) {
            nested_side_effect(s->inits[i], false);
            no_calls(s->inits[i], "an initialiser list");
        }
        return with_pre(h, s, mark);
    case ST_EXPR:
        if (s->e->kind == EX_ASSIGN && !strcmp(s->e->op, "=") && struct_with_reals(s->e->type)) {
            ad_stmt *b = struct_copy(h, NULL, s->e->a, s->e->b, s->loc);
            return b ? b : s;
        }
        s->e = norm_top_expr(h, s->e);
        return with_pre(h, s, mark);
    case ST_RETURN:
        if (s->e) {
            nested_side_effect(s->e, false);
            s->e = hoist_calls(h, s->e, false);
        }
        return with_pre(h, s, mark);
    case ST_IF:
        nested_side_effect(s->e, false);
        no_calls(s->e, "a condition");
        s->then = norm_stmt(h, s->then);
        s->els = norm_stmt(h, s->els);
        return s;
    case ST_FOR:
    case ST_WHILE:
    case ST_DO:
        if (!lower_condition(h, s))
            return s;
        nested_side_effect(s->e, false);
        no_calls(s->e, "a loop condition");
        if (s->init) {
            s->init = norm_stmt(h, s->init);
            if (s->init->kind == ST_BLOCK && h->npre != mark) {
                ad_error(s->loc, "unsupported construct: a call in a for loop's initialisation");
            }
        }
        if (s->inc) {
            nested_side_effect(s->inc, true);
            no_calls(s->inc, "a for loop's increment");
            s->inc = desugar(s->inc);
        }
        h->depth++;
        s->then = norm_stmt(h, s->then);
        h->depth--;
        return s;
    default:
        return s;
    }
}

void ad_normalize(ad_func *f)
{
    hoist h = {.f = f};
    f->body = norm_stmt(&h, f->body);
}

/* ---- One read per element and statement (--reverse-set) --------------------------------
 *
 * `s += x[i] * x[i]` reads one element twice: its adjoint makes two contributions to the
 * element's shadow, which f_rev_set could not assign. The element is read once into a new
 * local before the statement (`x_r4_ = x[i]; s += x_r4_ * x_r4_;`), whose adjoint collects
 * both partials and then makes the element's one contribution. Only elements of pointer
 * parameters to const reals (the function cannot write them), read outside the operands of
 * &&, || and ?: (which may guard the read), with an index free of calls. */

typedef struct share {
    ad_func *f;
    const ad_expr **seen; /* the element reads of the statement, in order */
    int nseen, capseen;
    ad_var **vars; /* the local of each repeated text, or NULL */
    const char **texts;
    int ntexts, captexts, capvars;
} share;

static bool shareable(const ad_expr *e)
{
    if (e->kind != EX_INDEX || !ad_type_is_real(e->type))
        return false;
    const ad_expr *b = e->a;
    while (b->kind == EX_CAST)
        b = b->a;
    if (b->kind != EX_VAR || b->var->kind != VAR_PARAM || b->var->type->kind != TY_PTR ||
        !b->var->type->is_const || !ad_type_is_real(b->var->type->elem))
        return false;
    return !has_local_call(e->b);
}

static bool guarded(const ad_expr *e)
{
    return e->kind == EX_COND ||
           (e->kind == EX_BIN && (!strcmp(e->op, "&&") || !strcmp(e->op, "||")));
}

/* Counts the texts of the shareable element reads of e (mode 0), or replaces those whose
 * text is read more than once by their local (mode 1). */
static ad_expr *share_walk(share *sh, ad_expr *e, int mode)
{
    if (!e || guarded(e))
        return e;
    if (shareable(e)) {
        const char *t = ad_expr_text(e);
        int k = 0;
        while (k < sh->ntexts && strcmp(sh->texts[k], t))
            k++;
        if (mode == 0) {
            if (k == sh->ntexts) {
                sh->texts = ad_grow(sh->texts, sh->ntexts, &sh->captexts, sizeof *sh->texts);
                sh->vars = ad_grow(sh->vars, sh->ntexts, &sh->capvars, sizeof *sh->vars);
                sh->texts[sh->ntexts] = t;
                sh->vars[sh->ntexts++] = NULL;
                sh->seen = ad_grow(sh->seen, sh->nseen, &sh->capseen, sizeof *sh->seen);
                sh->seen[sh->nseen++] = e;
            } else {
                sh->vars[k] = (ad_var *)1; /* repeated */
            }
            return e;
        }
        return k < sh->ntexts && sh->vars[k] ? var_expr(sh->vars[k], e->loc) : e;
    }
    e->a = share_walk(sh, e->a, mode);
    e->b = share_walk(sh, e->b, mode);
    e->c = share_walk(sh, e->c, mode);
    for (int i = 0; i < e->nargs; i++)
        e->args[i] = share_walk(sh, e->args[i], mode);
    return e;
}

/* The statement s (its expression *pe) with its repeated element reads shared: a block of
 * the reads, then s; or s unchanged. */
static ad_stmt *share_one(ad_func *f, ad_stmt *s, ad_expr **pe, int depth)
{
    share sh = {.f = f};
    ad_expr *e = *pe;
    /* the left side of an assignment is written, not read */
    bool assign = e->kind == EX_ASSIGN;
    share_walk(&sh, assign ? e->b : e, 0);
    ad_stmt **items = NULL;
    int n = 0, cap = 0;
    for (int k = 0; k < sh.ntexts; k++) {
        if (!sh.vars[k])
            continue;
        const ad_expr *read = sh.seen[k];
        sh.vars[k] = new_local(f, read->type, "x", read->loc, depth);
        items = ad_grow(items, n, &cap, sizeof *items);
        ad_expr *copy = ad_alloc(sizeof *copy);
        *copy = *read;
        items[n++] = assign_stmt(sh.vars[k], copy);
    }
    if (!n)
        return s;
    if (assign)
        e->b = share_walk(&sh, e->b, 1);
    else
        *pe = share_walk(&sh, e, 1);
    items = ad_grow(items, n, &cap, sizeof *items);
    items[n++] = s;
    ad_stmt *b = ad_alloc(sizeof *b);
    b->kind = ST_BLOCK;
    b->loc = s->loc;
    b->body = items;
    b->n = n;
    return b;
}

static ad_stmt *share_stmt(ad_func *f, ad_stmt *s, int depth)
{
    if (!s)
        return s;
    switch (s->kind) {
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            s->body[i] = share_stmt(f, s->body[i], depth);
        return s;
    case ST_DECL:
        return s->e && !s->ninits ? share_one(f, s, &s->e, depth) : s;
    case ST_EXPR:
        return share_one(f, s, &s->e, depth);
    case ST_RETURN:
        return s->e ? share_one(f, s, &s->e, depth) : s;
    case ST_IF:
        s->then = share_stmt(f, s->then, depth);
        s->els = share_stmt(f, s->els, depth);
        return s;
    case ST_FOR:
    case ST_WHILE:
    case ST_DO:
        s->then = share_stmt(f, s->then, depth + 1);
        return s;
    default:
        return s;
    }
}

void ad_share_element_reads(ad_func *f)
{
    if (f->body)
        f->body = share_stmt(f, f->body, 0);
}
