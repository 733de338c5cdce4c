/*
 * The analyses of one function under one activity context:
 *  - calls: a function of the file (transformed with it), a rule row (<math.h>), a
 *    function whose derivative is zero (floor...), or an error;
 *  - which parameters each function writes (interprocedural);
 *  - activity: varied (depends on an independent input) and useful (influences an active
 *    output), per variable, flow-insensitively (arrays and structs as a whole);
 *  - the values the adjoint sweep reads (operands of non-linear partials, indices, the
 *    arguments of calls), so that only those are stored when overwritten;
 *  - statements that leave their block early, and canonical for loops.
 */
#include <string.h>

#include "ad.h"

/* Functions whose derivative is zero everywhere it exists: their results are constants. */
static const char *const k_zero_derivative[] = {
    "floor",   "ceil",       "trunc",      "round",  "rint",     "nearbyint", "lround",
    "llround", "lrint",      "llrint",     "floorf", "ceilf",    "truncf",    "roundf",
    "rintf",   "nearbyintf", "isnan",      "isinf",  "isfinite", "signbit",   "abs",
    "labs",    "llabs",      "fpclassify", NULL};

static bool zero_derivative(const char *name)
{
    for (int i = 0; k_zero_derivative[i]; i++)
        if (strcmp(name, k_zero_derivative[i]) == 0)
            return true;
    return false;
}

/* The variable at the root of an lvalue or pointer expression (x in x[i].f, p in p->a[j],
 * p in p + 3), or NULL. */
ad_var *ad_root(const ad_expr *e)
{
    while (e) {
        switch (e->kind) {
        case EX_VAR:
            return e->var;
        case EX_INDEX:
        case EX_MEMBER:
        case EX_CAST:
        case EX_ADDR:
        case EX_DEREF:
            e = e->a;
            break;
        case EX_BIN:
            if (strcmp(e->op, "+") == 0 || strcmp(e->op, "-") == 0)
                e = e->a->type->kind == TY_PTR || e->a->type->kind == TY_ARRAY ? e->a : e->b;
            else
                return NULL;
            break;
        default:
            return NULL;
        }
    }
    return NULL;
}

/* ---- Walks ------------------------------------------------------------------------------------
 */

typedef void (*expr_fn)(ad_expr *e, void *env);

static void walk_expr(ad_expr *e, expr_fn fn, void *env)
{
    if (!e)
        return;
    walk_expr(e->a, fn, env);
    walk_expr(e->b, fn, env);
    walk_expr(e->c, fn, env);
    for (int i = 0; i < e->nargs; i++)
        walk_expr(e->args[i], fn, env);
    fn(e, env);
}

typedef void (*stmt_fn)(ad_stmt *s, void *env);

static void walk_stmt(ad_stmt *s, stmt_fn fn, void *env)
{
    if (!s)
        return;
    fn(s, env);
    for (int i = 0; i < s->n; i++)
        walk_stmt(s->body[i], fn, env);
    walk_stmt(s->init, fn, env);
    walk_stmt(s->then, fn, env);
    walk_stmt(s->els, fn, env);
}

/* ---- Calls ------------------------------------------------------------------------------------
 */

typedef struct call_env {
    ad_unit *u;
    int errors;
} call_env;

static void resolve_call(ad_expr *e, void *env)
{
    call_env *c = env;
    if (e->kind == EX_BIN &&
        (!strcmp(e->op, "+") || !strcmp(e->op, "-") || !strcmp(e->op, "*") || !strcmp(e->op, "/")))
        e->row = ad_type_is_real(e->type) ? ad_row_for_op(e->op) : NULL;
    if (e->kind == EX_UN && !strcmp(e->op, "-"))
        e->row = ad_type_is_real(e->type) ? ad_row_for_op("neg") : NULL;
    if (e->kind != EX_CALL)
        return;
    ad_func *g = ad_unit_find(c->u, e->text);
    if (g && (g->has_body || g->prim)) {
        e->callee = g;
        return;
    }
    bool fl;
    e->row = ad_row_for_call(e->text, &fl);
    if (e->row && e->row->nin != e->nargs)
        e->row = NULL;
}

/* ---- Writes -----------------------------------------------------------------------------------
 */

static void mark_written_lvalue(ad_func *f, ad_expr *l)
{
    ad_var *v = ad_root(l);
    if (!v)
        return;
    v->written = true;
    if (v->kind == VAR_PARAM && v->index < 64 && (l->kind != EX_VAR || v->type->kind != TY_PTR))
        f->writes_param[v->index] = true;
}

typedef struct write_env {
    ad_func *f;
    bool changed;
} write_env;

static void writes_expr(ad_expr *e, void *env)
{
    write_env *w = env;
    if (e->kind == EX_ASSIGN || e->kind == EX_INCDEC) {
        ad_var *v = ad_root(e->a);
        bool before = v && v->kind == VAR_PARAM && v->index < 64 && w->f->writes_param[v->index];
        mark_written_lvalue(w->f, e->a);
        if (v && v->kind == VAR_PARAM && v->index < 64 && !before && w->f->writes_param[v->index])
            w->changed = true;
    }
    if (e->kind == EX_CALL && e->callee) {
        for (int i = 0; i < e->nargs && i < e->callee->nparams && i < 64; i++)
            if (e->callee->writes_param[i] && e->callee->params[i]->type->kind == TY_PTR) {
                ad_var *v = ad_root(e->args[i]);
                if (!v)
                    continue;
                v->written = true;
                if (v->kind == VAR_PARAM && v->index < 64 && !w->f->writes_param[v->index]) {
                    w->f->writes_param[v->index] = true;
                    w->changed = true;
                }
            }
    }
}

static void writes_stmt(ad_stmt *s, void *env)
{
    write_env *w = env;
    if (s->kind == ST_DECL && s->var)
        s->var->written = true;
    walk_expr(s->e, writes_expr, w);
    walk_expr(s->inc, writes_expr, w);
}

/* ---- Activity ---------------------------------------------------------------------------------
 */

typedef struct act_env {
    bool changed;
    bool any;
} act_env;

/* Whether the value of e depends on a varied variable. Results of zero-derivative calls and
 * integer-valued subexpressions are constants. */
static bool expr_varied(const ad_expr *e)
{
    if (!e)
        return false;
    switch (e->kind) {
    case EX_VAR:
        return e->var->varied && ad_type_has_real(e->var->type) && ad_type_has_real(e->type);
    case EX_NUM:
    case EX_GLOBAL:
    case EX_TEXT:
        return false;
    case EX_CALL:
        if (!e->callee && !e->row)
            return false;
        for (int i = 0; i < e->nargs; i++)
            if (expr_varied(e->args[i]))
                return ad_type_has_real(e->type) || e->type->kind == TY_VOID;
        return false;
    case EX_INDEX:
        return ad_type_has_real(e->type) && expr_varied(e->a);
    case EX_MEMBER:
    case EX_DEREF:
    case EX_ADDR:
        return ad_type_has_real(e->type) && expr_varied(e->a);
    case EX_COND:
        return ad_type_has_real(e->type) && (expr_varied(e->b) || expr_varied(e->c));
    default:
        if (!ad_type_has_real(e->type))
            return false;
        return expr_varied(e->a) || expr_varied(e->b);
    }
}

static void set_varied(ad_var *v, act_env *a)
{
    if (v && !v->varied && ad_type_has_real(v->type)) {
        v->varied = true;
        a->changed = true;
    }
}

static void set_useful(ad_var *v, act_env *a)
{
    if (v && !v->useful && ad_type_has_real(v->type)) {
        v->useful = true;
        a->changed = true;
    }
}

static void useful_vars(ad_expr *e, void *env)
{
    if (e->kind == EX_VAR)
        set_useful(e->var, env);
}

/* Marks every variable read by e (its real data) useful. */
static void make_useful(ad_expr *e, act_env *a)
{
    walk_expr(e, useful_vars, a);
}

static void act_expr(ad_expr *e, void *env)
{
    act_env *a = env;
    if (e->kind == EX_ASSIGN || e->kind == EX_INCDEC) {
        ad_var *v = ad_root(e->a);
        if (e->kind == EX_ASSIGN && expr_varied(e->b))
            set_varied(v, a);
        if (v && v->useful && ad_type_has_real(e->a->type) && e->kind == EX_ASSIGN)
            make_useful(e->b, a);
    }
    if (e->kind == EX_CALL && e->callee) {
        bool varied = false, useful = false;
        for (int i = 0; i < e->nargs; i++)
            varied |= expr_varied(e->args[i]);
        /* data received from another rank may depend on its active inputs */
        if (e->callee->prim && e->callee->prim->mpi)
            varied = true;
        for (int i = 0; i < e->nargs && i < 64; i++) {
            ad_var *v = ad_root(e->args[i]);
            if (i < e->callee->nparams && e->callee->writes_param[i] &&
                e->callee->params[i]->type->kind == TY_PTR) {
                if (varied)
                    set_varied(v, a);
                if (v && v->useful)
                    useful = true;
            }
        }
        if (useful || e->active)
            for (int i = 0; i < e->nargs; i++)
                make_useful(e->args[i], a);
    }
}

/* The call expressions whose value flows into a useful variable are marked through
 * e->active before act_expr runs; the statement walk sets it. */
static void mark_call_values(ad_expr *e, void *env)
{
    (void)env;
    if (e->kind == EX_CALL && e->callee)
        e->active = true; /* conservative: a call's result is assumed used */
}

typedef struct stmt_act {
    act_env a;
    ad_func *f;
} stmt_act;

static void act_stmt(ad_stmt *s, void *env)
{
    stmt_act *sa = env;
    act_env *a = &sa->a;
    if (s->kind == ST_DECL && s->var) {
        if (s->e && expr_varied(s->e))
            set_varied(s->var, a);
        for (int i = 0; i < s->ninits; i++)
            if (expr_varied(s->inits[i]))
                set_varied(s->var, a);
        if (s->var->useful) {
            make_useful(s->e, a);
            for (int i = 0; i < s->ninits; i++)
                make_useful(s->inits[i], a);
        }
    }
    if (s->kind == ST_RETURN && s->e && ad_type_has_real(sa->f->ret))
        make_useful(s->e, a);
    walk_expr(s->e, mark_call_values, NULL);
    walk_expr(s->e, act_expr, a);
    walk_expr(s->inc, act_expr, a);
}

/* ---- Expression activity and the values the adjoint needs --------------------------------------
 */

static void mark_active(ad_expr *e, void *env)
{
    (void)env;
    e->active = expr_varied(e) && ad_type_is_real(e->type);
}

/* Where need_all() records: the variables' `needed` flags, or (the to-be-recorded analysis)
 * the set of the variables one statement's adjoint reads. */
static unsigned char *g_reads;
static int g_nparams;

static int var_slot(const ad_var *v)
{
    return v->kind == VAR_PARAM ? v->index : g_nparams + v->index;
}

static void need_all(ad_expr *e, void *env)
{
    (void)env;
    if (e->kind != EX_VAR || e->var->kind == VAR_GLOBAL)
        return;
    if (g_reads)
        g_reads[var_slot(e->var)] = 1;
    else
        e->var->needed = true;
}

/* The values read when e's adjoint is propagated: operands of partials that read them, all
 * indices, conditions and call arguments. */
static void need_expr(ad_expr *e)
{
    if (!e)
        return;
    switch (e->kind) {
    case EX_INDEX:
        walk_expr(e->b, need_all, NULL);
        need_expr(e->a);
        return;
    case EX_MEMBER:
    case EX_CAST:
    case EX_ADDR:
    case EX_DEREF:
        need_expr(e->a);
        return;
    case EX_COND:
        walk_expr(e->a, need_all, NULL);
        need_expr(e->b);
        need_expr(e->c);
        return;
    case EX_CALL:
    case EX_BIN:
    case EX_UN:
        if (e->kind == EX_CALL && e->callee) {
            for (int i = 0; i < e->nargs; i++)
                walk_expr(e->args[i], need_all, NULL);
            return;
        }
        if (e->row) {
            ad_expr *ops[4] = {e->kind == EX_CALL ? NULL : e->a, e->kind == EX_CALL ? NULL : e->b};
            int n = e->kind == EX_CALL ? e->nargs : (e->kind == EX_UN ? 1 : 2);
            if (n > 4)
                n = 4;
            if (e->kind == EX_CALL)
                for (int j = 0; j < n; j++)
                    ops[j] = e->args[j];
            /* operand j's value is read by the partials of the active operands */
            unsigned reads = 0;
            for (int k = 0; k < n; k++)
                if (ops[k]->active)
                    reads |= e->row->dep[k];
            for (int j = 0; j < n; j++) {
                if (reads >> j & 1)
                    walk_expr(ops[j], need_all, NULL);
                need_expr(ops[j]);
            }
            return;
        }
        need_expr(e->a);
        need_expr(e->b);
        for (int i = 0; i < e->nargs; i++)
            need_expr(e->args[i]);
        return;
    default:
        return;
    }
}

/* The values the adjoint of a statement with stored partials reads: only the indices of the
 * places its active operands are (the partials themselves come from the stack). */
static void need_preacc(ad_expr *e)
{
    if (!e || !e->active)
        return;
    switch (e->kind) {
    case EX_VAR:
    case EX_INDEX:
    case EX_MEMBER:
    case EX_DEREF:
        need_expr(e);
        return;
    case EX_CALL:
        for (int i = 0; i < e->nargs; i++)
            need_preacc(e->args[i]);
        return;
    default:
        need_preacc(e->a);
        need_preacc(e->b);
        return;
    }
}

typedef struct need_env {
    ad_func *f;
} need_env;

static void need_stmt(ad_stmt *s, void *env)
{
    (void)env;
    ad_expr *e = s->e;
    if (s->preacc) {
        if (s->kind == ST_EXPR)
            need_expr(e->a);
        need_preacc(s->kind == ST_EXPR ? e->b : e);
    } else if (s->kind == ST_DECL && s->var && s->var->active) {
        need_expr(s->e);
        for (int i = 0; i < s->ninits; i++)
            need_expr(s->inits[i]);
    } else if (s->kind == ST_RETURN && e && e->active) {
        need_expr(e);
    } else if (s->kind == ST_EXPR && e) {
        if (e->kind == EX_ASSIGN) {
            ad_var *v = ad_root(e->a);
            if (v && v->active && ad_type_is_real(e->a->type)) {
                /* the lvalue's indices, and the operands the compound operator reads */
                need_expr(e->a);
                need_expr(e->b);
            }
        } else if (e->kind == EX_CALL && e->callee) {
            need_expr(e);
        }
    }
}

/* ---- Exits and loops ----------------------------------------------------------------------------
 */

static bool contains_return(const ad_stmt *s)
{
    if (!s)
        return false;
    if (s->kind == ST_RETURN)
        return true;
    for (int i = 0; i < s->n; i++)
        if (contains_return(s->body[i]))
            return true;
    return contains_return(s->init) || contains_return(s->then) || contains_return(s->els);
}

/* Sets has_exit on every statement that contains a break or continue leaving it (not
 * inside a loop of its own) or a return. Returns whether s has one. */
static bool mark_exits(ad_stmt *s)
{
    if (!s)
        return false;
    bool r = false;
    switch (s->kind) {
    case ST_BREAK:
    case ST_CONTINUE:
    case ST_RETURN:
        r = true;
        break;
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            r |= mark_exits(s->body[i]);
        break;
    case ST_IF:
        r = mark_exits(s->then);
        r |= mark_exits(s->els);
        break;
    case ST_FOR:
    case ST_WHILE:
    case ST_DO:
        /* a break or continue inside stays inside; a return leaves */
        mark_exits(s->then);
        r = contains_return(s->then);
        break;
    default:
        break;
    }
    s->has_exit = r;
    return r;
}

static bool assigns_var(ad_stmt *s, const ad_var *v);

static void assigns_expr(ad_expr *e, void *env)
{
    void **p = env;
    if ((e->kind == EX_ASSIGN || e->kind == EX_INCDEC) && e->a->kind == EX_VAR && e->a->var == p[0])
        p[1] = (void *)1;
    if (e->kind == EX_ADDR && ad_root(e->a) == p[0])
        p[1] = (void *)1;
}

static void assigns_stmt_fn(ad_stmt *s, void *env)
{
    walk_expr(s->e, assigns_expr, env);
    walk_expr(s->inc, assigns_expr, env);
    for (int i = 0; i < s->ninits; i++)
        walk_expr(s->inits[i], assigns_expr, env);
}

static bool assigns_var(ad_stmt *s, const ad_var *v)
{
    void *p[2] = {(void *)v, NULL};
    walk_stmt(s, assigns_stmt_fn, p);
    return p[1] != NULL;
}

bool ad_leaves_loop(const ad_stmt *s, bool nested)
{
    if (!s)
        return false;
    switch (s->kind) {
    case ST_BREAK:
        return !nested;
    case ST_RETURN:
        return true;
    case ST_FOR:
    case ST_WHILE:
    case ST_DO:
        return ad_leaves_loop(s->then, true);
    default: {
        bool r = ad_leaves_loop(s->then, nested) || ad_leaves_loop(s->els, nested);
        for (int i = 0; i < s->n; i++)
            r |= ad_leaves_loop(s->body[i], nested);
        return r;
    }
    }
}

static void reads_fn(ad_expr *e, void *env)
{
    void **p = env;
    if (e->kind == EX_VAR && e->var == p[0])
        p[1] = (void *)1;
    if (e->kind == EX_CALL)
        p[1] = (void *)1; /* a call: not a static bound */
}

static bool reads_var(ad_expr *e, const ad_var *v)
{
    void *p[2] = {(void *)v, NULL};
    walk_expr(e, reads_fn, p);
    return p[1] != NULL;
}

typedef struct changes_env {
    ad_stmt *loop;
    bool changed;
} changes_env;

static void changes_fn(ad_expr *e, void *env)
{
    changes_env *c = env;
    if (e->kind == EX_VAR && (assigns_var(c->loop->then, e->var) || e->var->type->kind != TY_INT))
        c->changed = true;
    if (e->kind == EX_INDEX || e->kind == EX_MEMBER || e->kind == EX_DEREF || e->kind == EX_CALL)
        c->changed = true; /* memory: not proved unchanged */
}

/* Whether the loop may change what e reads (e reads only integer variables the body does
 * not assign). */
static bool changes_any(ad_stmt *loop, ad_expr *e)
{
    changes_env c = {loop, false};
    walk_expr(e, changes_fn, &c);
    return c.changed;
}

bool ad_loop_invariant(ad_stmt *loop, ad_expr *e)
{
    return !changes_any(loop, e);
}

/* for (i = a; i <op> b; i++ | i-- | i += c | i -= c) with i an integer not assigned in the
 * body: the adjoint recomputes i from its first value and the trip count. */
static void find_canonical(ad_stmt *s, void *env)
{
    (void)env;
    if (s->kind != ST_FOR || !s->init || !s->inc || !s->e)
        return;
    ad_var *i = NULL;
    if (s->init->kind == ST_DECL && s->init->var && s->init->e)
        i = s->init->var;
    else if (s->init->kind == ST_EXPR && s->init->e->kind == EX_ASSIGN &&
             !strcmp(s->init->e->op, "=") && s->init->e->a->kind == EX_VAR)
        i = s->init->e->a->var;
    if (!i || i->type->kind != TY_INT)
        return;
    long long step = 0;
    ad_expr *inc = s->inc;
    /* after normalisation the increment is i = i + c or i = i - c */
    if (inc->kind == EX_ASSIGN && inc->a->kind == EX_VAR && inc->a->var == i &&
        inc->b->kind == EX_BIN && (!strcmp(inc->b->op, "+") || !strcmp(inc->b->op, "-")) &&
        inc->b->a->kind == EX_VAR && inc->b->a->var == i && inc->b->b->kind == EX_NUM) {
        long long c = 0;
        if (sscanf(inc->b->b->text, "%lld", &c) != 1 || c == 0)
            return;
        step = inc->b->op[0] == '+' ? c : -c;
    }
    if (!step || assigns_var(s->then, i))
        return;
    s->canon = i;
    s->canon_step = step;
    i->counter = true;
    /* static bounds: i OP hi with hi and the first value not changed by the loop, and no
     * early exit: the adjoint computes the trip count instead of storing it */
    ad_expr *lo = s->init->kind == ST_DECL ? s->init->e : s->init->e->b;
    ad_expr *c = s->e;
    if (c->kind != EX_BIN || c->a->kind != EX_VAR || c->a->var != i)
        return;
    bool up = !strcmp(c->op, "<") || !strcmp(c->op, "<=");
    bool down = !strcmp(c->op, ">") || !strcmp(c->op, ">=");
    if (!((up && step > 0) || (down && step < 0)))
        return;
    if (reads_var(lo, i) || reads_var(c->b, i) || changes_any(s, lo) || changes_any(s, c->b) ||
        c->b->type->kind != TY_INT || lo->type->kind != TY_INT)
        return;
    if (ad_leaves_loop(s->then, false))
        return;
    s->lo = lo;
    s->hi = c->b;
    s->hi_op = c->op;
}

/* ---- Recomputed locals -------------------------------------------------------------------------
 */

/* The roots a statement assigns (directly or through the pointer arguments of a callee). */
typedef struct roots {
    ad_var *v[256];
    int n;
    bool overflow;
} roots;

static void add_root(roots *r, ad_var *v)
{
    if (!v)
        return;
    for (int i = 0; i < r->n; i++)
        if (r->v[i] == v)
            return;
    if (r->n == 256)
        r->overflow = true;
    else
        r->v[r->n++] = v;
}

static void roots_expr(ad_expr *e, void *env)
{
    roots *r = env;
    if (e->kind == EX_ASSIGN || e->kind == EX_INCDEC)
        add_root(r, ad_root(e->a));
    if (e->kind == EX_CALL && e->callee)
        for (int i = 0; i < e->nargs && i < e->callee->nparams && i < 64; i++)
            if (e->callee->writes_param[i])
                add_root(r, ad_root(e->args[i]));
}

static void roots_stmt(ad_stmt *s, void *env)
{
    if (s->kind == ST_DECL && s->var)
        add_root(env, s->var);
    walk_expr(s->e, roots_expr, env);
    walk_expr(s->inc, roots_expr, env);
}

static bool in_roots(const roots *r, const ad_var *v)
{
    for (int i = 0; i < r->n; i++)
        if (r->v[i] == v)
            return true;
    return false;
}

/* Also written, for ad_tail_independent: what a call may write through a pointer argument
 * and what has its address taken. */
static void escapes_expr(ad_expr *e, void *env)
{
    if (e->kind == EX_ADDR)
        add_root(env, ad_root(e->a));
    if (e->kind == EX_CALL)
        for (int i = 0; i < e->nargs; i++)
            if (e->args[i]->type->kind == TY_PTR || e->args[i]->type->kind == TY_ARRAY)
                add_root(env, ad_root(e->args[i]));
}

static void written_stmt(ad_stmt *s, void *env)
{
    roots_stmt(s, env);
    walk_expr(s->e, escapes_expr, env);
    walk_expr(s->inc, escapes_expr, env);
}

bool ad_tail_independent(const ad_func *f, int from)
{
    const ad_stmt *b = f->body;
    roots w = {.n = 0};
    for (int j = from; j < b->n; j++)
        walk_stmt(b->body[j], written_stmt, &w);
    if (w.overflow)
        return false;
    unsigned char *R = ad_alloc((size_t)(f->nparams + f->nlocals) + 1);
    g_nparams = f->nparams;
    g_reads = R;
    for (int j = from + 1; j < b->n; j++)
        need_stmt(b->body[j], NULL);
    g_reads = NULL;
    for (int k = 0; k < w.n; k++)
        if (w.v[k]->kind != VAR_GLOBAL && R[var_slot(w.v[k])])
            return false;
    return true;
}

typedef struct recomp_env {
    const roots *assigned;
    const ad_var *counter;
    ad_var **ok; /* recomputable decls seen so far in the body */
    int nok;
    bool fine;
} recomp_env;

static void recomp_reads(ad_expr *e, void *env)
{
    recomp_env *r = env;
    if (e->kind == EX_CALL && e->callee)
        r->fine = false;
    if (e->kind != EX_VAR)
        return;
    if (e->var == r->counter || !in_roots(r->assigned, e->var))
        return;
    for (int i = 0; i < r->nok; i++)
        if (r->ok[i] == e->var)
            return;
    r->fine = false;
}

static int count_assignments(ad_stmt *body, const ad_var *v);

static void count_expr(ad_expr *e, void *env)
{
    void **p = env;
    if ((e->kind == EX_ASSIGN || e->kind == EX_INCDEC) && ad_root(e->a) == p[0])
        (*(int *)p[1])++;
    if (e->kind == EX_ADDR && ad_root(e->a) == p[0])
        (*(int *)p[1]) += 2;
    if (e->kind == EX_CALL && e->callee)
        for (int i = 0; i < e->nargs && i < 64; i++)
            if (ad_root(e->args[i]) == p[0] && i < e->callee->nparams && e->callee->writes_param[i])
                (*(int *)p[1]) += 2;
}

static void count_stmt(ad_stmt *s, void *env)
{
    void **p = env;
    if (s->kind == ST_DECL && s->var == p[0])
        (*(int *)p[1])++;
    walk_expr(s->e, count_expr, env);
    walk_expr(s->inc, count_expr, env);
}

static int count_assignments(ad_stmt *body, const ad_var *v)
{
    int n = 0;
    void *p[2] = {(void *)v, &n};
    walk_stmt(body, count_stmt, p);
    return n;
}

/* A scalar declared (and only assigned) at the top level of a loop body, from values the
 * body does not change, is recomputed by the adjoint instead of stored. */
static void find_recompute(ad_func *f, ad_stmt *loop)
{
    ad_stmt *body = loop->then;
    if (!body || body->kind != ST_BLOCK || body->has_exit)
        return;
    roots assigned = {.n = 0};
    walk_stmt(body, roots_stmt, &assigned);
    if (loop->kind == ST_FOR && loop->inc)
        walk_expr(loop->inc, roots_expr, &assigned);
    if (assigned.overflow)
        return;
    ad_var *ok[256];
    recomp_env r = {&assigned, loop->canon, ok, 0, true};
    for (int i = 0; i < body->n; i++) {
        ad_stmt *items[64];
        int n = 0;
        ad_stmt *s = body->body[i];
        if (s->kind == ST_DECL) {
            items[n++] = s;
        } else if (s->kind == ST_BLOCK && !s->has_exit) {
            bool decls = s->n <= 64;
            for (int j = 0; decls && j < s->n; j++)
                decls = s->body[j]->kind == ST_DECL;
            if (decls)
                for (int j = 0; j < s->n; j++)
                    items[n++] = s->body[j];
        }
        for (int j = 0; j < n; j++) {
            ad_stmt *d = items[j];
            ad_var *v = d->var;
            if (!d->e || d->ninits || v->type->kind == TY_ARRAY || v->type->kind == TY_STRUCT ||
                v->type->kind == TY_PTR || count_assignments(f->body, v) != 1)
                continue;
            r.fine = true;
            walk_expr(d->e, recomp_reads, &r);
            if (!r.fine)
                continue;
            /* a local the adjoint does not read yet can still be recomputed for a later one
             * that reads it (which makes it needed: recomputed at the next pass) */
            d->recompute = v->needed;
            if (r.nok < 256)
                ok[r.nok++] = v;
        }
    }
}

static void recompute_stmt(ad_stmt *s, void *env)
{
    if (s->kind == ST_FOR || s->kind == ST_WHILE || s->kind == ST_DO)
        find_recompute(env, s);
}

/* ---- The state of a checkpointed loop ----------------------------------------------------- */

static void decls_stmt(ad_stmt *s, void *env)
{
    if (s->kind == ST_DECL && s->var)
        add_root(env, s->var);
}

int ad_loop_state(ad_stmt *loop, ad_var **out, int max)
{
    roots written = {.n = 0}, local = {.n = 0};
    walk_stmt(loop->then, roots_stmt, &written);
    walk_stmt(loop->then, decls_stmt, &local);
    if (written.overflow || local.overflow)
        return -1;
    int n = 0;
    for (int i = 0; i < written.n; i++) {
        ad_var *v = written.v[i];
        if (v == loop->canon || in_roots(&local, v))
            continue;
        if (n == max)
            return -1;
        out[n++] = v;
    }
    return n;
}

static int count_needed(const ad_func *f)
{
    int n = 0;
    for (int i = 0; i < f->nparams; i++)
        n += f->params[i]->needed;
    for (int i = 0; i < f->nlocals; i++)
        n += f->locals[i]->needed;
    return n;
}

static void clear_recompute(ad_stmt *s, void *env)
{
    (void)env;
    s->recompute = false;
}

/* The indices of a place (not its root): read when the place is restored. */
static void need_indices(ad_expr *e)
{
    for (; e; e = e->a) {
        if (e->kind == EX_INDEX)
            walk_expr(e->b, need_all, NULL);
        if (e->kind != EX_INDEX && e->kind != EX_MEMBER && e->kind != EX_CAST &&
            e->kind != EX_DEREF && e->kind != EX_ADDR)
            break;
    }
}

static void need_closure_expr(ad_expr *e, void *env)
{
    (void)env;
    if (e->kind == EX_ASSIGN) {
        ad_var *v = ad_root(e->a);
        if (v && v->needed)
            need_indices(e->a);
    }
}

static void need_closure(ad_stmt *s, void *env)
{
    if (s->kind == ST_DECL && s->recompute)
        walk_expr(s->e, need_all, NULL);
    if (s->kind == ST_FOR && s->lo) {
        walk_expr(s->lo, need_all, NULL);
        walk_expr(s->hi, need_all, NULL);
    }
    walk_expr(s->e, need_closure_expr, env);
    walk_expr(s->inc, need_closure_expr, env);
}

/* ---- What to store: the to-be-recorded analysis --------------------------------------------
 *
 * A flow-sensitive pass in execution order keeps R, the variables whose current value the
 * adjoint of some statement already passed reads. An assignment to v stores v's old value
 * only if v is in R (else nothing will read the value it destroys); assigning a scalar
 * removes it from R. Arrays and structs are never removed (an element's write does not
 * overwrite the others). Branches join by union; a loop body is iterated to a fixpoint. An
 * integer increment by a constant is undone by its inverse instead of being stored. */

typedef struct tbr {
    ad_func *f;
    int nvars;
} tbr;

static unsigned char *tbr_new(const tbr *t)
{
    return ad_alloc((size_t)t->nvars + 1);
}

static void tbr_union(const tbr *t, unsigned char *a, const unsigned char *b)
{
    for (int i = 0; i < t->nvars; i++)
        a[i] |= b[i];
}

/* The variables the adjoint of s (a simple statement) reads, added to R. */
static void tbr_reads(ad_stmt *s, unsigned char *R)
{
    g_reads = R;
    need_stmt(s, NULL);
    g_reads = NULL;
}

static bool scalar_var(const ad_var *v)
{
    return v->type->kind != TY_ARRAY && v->type->kind != TY_PTR && v->type->kind != TY_STRUCT;
}

/* v = v + c or v = v - c, v an integer, c an integer constant. */
static bool invertible(const ad_expr *place, const ad_expr *value)
{
    return place->kind == EX_VAR && place->var->type->kind == TY_INT && value->kind == EX_BIN &&
           (!strcmp(value->op, "+") || !strcmp(value->op, "-")) && value->a->kind == EX_VAR &&
           value->a->var == place->var && value->b->kind == EX_NUM &&
           value->b->type->kind == TY_INT;
}

/* Decides whether assigning `place` stores, with R as it is before the assignment. */
static void tbr_assign(ad_expr *place, ad_expr *value, bool fresh, bool kill, unsigned char *R,
                       bool *push, bool *invert)
{
    ad_var *v = ad_root(place);
    *push = *invert = false;
    if (!v || v->kind == VAR_GLOBAL)
        return;
    if (!fresh && v->needed && R[var_slot(v)]) {
        if (value && invertible(place, value))
            *invert = true;
        else
            *push = true;
        /* the adjoint restores the place: its indices are read there */
        g_reads = R;
        need_indices(place);
        g_reads = NULL;
    }
    if (*invert)
        R[var_slot(v)] = 1; /* the inverse reads the new value */
    else if (kill && scalar_var(v))
        R[var_slot(v)] = 0;
}

/* ---- Arrays written whole ------------------------------------------------------------------
 *
 * A canonical loop `for (i = 0; i < E; i++) { ... a[i] = ...; ... }` writes every element of a
 * local array `a` that the function ever reads, when every access to `a` is `a[j]` with j the
 * counter of a canonical loop `j < E` whose first value is not negative, and E does not change
 * in the function. After such a loop no adjoint already passed can read a value of `a` that a
 * later write destroys (each later write is undone, at the latest, by the restores of this
 * loop's writes), so the to-be-recorded analysis removes `a` from R there, as it does for a
 * scalar's assignment. */

static const ad_expr *strip_casts(const ad_expr *e)
{
    while (e && e->kind == EX_CAST)
        e = e->a;
    return e;
}

typedef struct cover {
    const ad_var *a;
    const char *E;            /* the bound's text */
    const ad_stmt *loops[64]; /* the enclosing canonical loops */
    int n;
    bool ok;
} cover;

static const ad_stmt *cover_loop(const cover *c, const ad_var *counter)
{
    for (int i = c->n - 1; i >= 0; i--)
        if (c->loops[i]->canon == counter)
            return c->loops[i];
    return NULL;
}

/* A first value that is not negative: a constant >= 0, or such a counter (+ a constant >= 0). */
static bool cover_nonneg(const cover *c, const ad_expr *e, int depth)
{
    e = strip_casts(e);
    if (!e || depth > 8)
        return false;
    long long v = -1;
    if (e->kind == EX_NUM)
        return sscanf(e->text, "%lld", &v) == 1 && v >= 0;
    if (e->kind == EX_VAR) {
        const ad_stmt *l = cover_loop(c, e->var);
        return l && l->canon_step > 0 && cover_nonneg(c, l->lo, depth + 1);
    }
    if (e->kind == EX_BIN && !strcmp(e->op, "+"))
        return cover_nonneg(c, e->a, depth + 1) && cover_nonneg(c, e->b, depth + 1);
    return false;
}

static void cover_expr(cover *c, const ad_expr *e)
{
    if (!e || !c->ok)
        return;
    if (e->kind == EX_INDEX && e->a->kind == EX_VAR && e->a->var == c->a) {
        const ad_expr *i = strip_casts(e->b);
        const ad_stmt *l = i && i->kind == EX_VAR ? cover_loop(c, i->var) : NULL;
        if (!l || l->canon_step <= 0 || strcmp(l->hi_op, "<") != 0 ||
            strcmp(ad_expr_text(l->hi), c->E) != 0 || !cover_nonneg(c, l->lo, 0))
            c->ok = false;
        cover_expr(c, e->b);
        return;
    }
    if (e->kind == EX_VAR && e->var == c->a) {
        c->ok = false; /* the array itself: passed, pointed into */
        return;
    }
    cover_expr(c, e->a);
    cover_expr(c, e->b);
    cover_expr(c, e->c);
    for (int i = 0; i < e->nargs; i++)
        cover_expr(c, e->args[i]);
}

static void cover_stmt(cover *c, const ad_stmt *s)
{
    if (!s || !c->ok)
        return;
    bool loop = s->kind == ST_FOR && s->canon && s->lo;
    if (loop) {
        if (c->n == 64) {
            c->ok = false;
            return;
        }
        c->loops[c->n++] = s;
    }
    cover_expr(c, s->e);
    cover_expr(c, s->inc);
    for (int i = 0; i < s->ninits; i++)
        cover_expr(c, s->inits[i]);
    for (int i = 0; i < s->n; i++)
        cover_stmt(c, s->body[i]);
    cover_stmt(c, s->init);
    cover_stmt(c, s->then);
    cover_stmt(c, s->els);
    if (loop)
        c->n--;
}

/* E reads only integer variables the function never writes (nor lets a callee write). */
static bool fixed_bound(const ad_expr *e)
{
    e = strip_casts(e);
    if (!e)
        return false;
    switch (e->kind) {
    case EX_NUM:
        return true;
    case EX_VAR:
        return e->var->type->kind == TY_INT && !e->var->written;
    case EX_BIN:
        return (!strcmp(e->op, "+") || !strcmp(e->op, "-") || !strcmp(e->op, "*")) &&
               fixed_bound(e->a) && fixed_bound(e->b);
    default:
        return false;
    }
}

/* Whether loop s writes every element of local array a that f reads (see above). */
static bool writes_whole(ad_func *f, const ad_stmt *s, const ad_var *a)
{
    if (s->kind != ST_FOR || !s->canon || !s->lo || s->canon_step != 1 ||
        strcmp(s->hi_op, "<") != 0 || !fixed_bound(s->hi))
        return false;
    const ad_expr *lo = strip_casts(s->lo);
    if (lo->kind != EX_NUM || strcmp(lo->text, "0") != 0)
        return false;
    if (a->kind != VAR_LOCAL || a->type->kind != TY_ARRAY || !a->type->elem ||
        !ad_type_is_real(a->type->elem))
        return false;
    const ad_stmt *body = s->then;
    int n = body && body->kind == ST_BLOCK ? body->n : 1;
    bool found = false;
    for (int i = 0; i < n && !found; i++) {
        const ad_stmt *st = body->kind == ST_BLOCK ? body->body[i] : body;
        if (st->kind != ST_EXPR || st->e->kind != EX_ASSIGN || strcmp(st->e->op, "=") != 0)
            continue;
        const ad_expr *pl = st->e->a;
        const ad_expr *ix = pl->kind == EX_INDEX ? strip_casts(pl->b) : NULL;
        found = pl->kind == EX_INDEX && pl->a->kind == EX_VAR && pl->a->var == a && ix &&
                ix->kind == EX_VAR && ix->var == s->canon;
    }
    if (!found || (body->kind == ST_BLOCK && body->has_exit))
        return false;
    cover c = {.a = a, .E = ad_expr_text(s->hi), .ok = true};
    cover_stmt(&c, f->body);
    return c.ok;
}

/* Whether s holds a break or continue that leaves it (jumps to a point the flow of the
 * analysis does not join): kills are not made inside such a statement. A return leaves the
 * function: nothing after it runs, so it does not prevent kills. */
static bool jumps_out(const ad_stmt *s, bool in_loop)
{
    if (!s)
        return false;
    switch (s->kind) {
    case ST_BREAK:
    case ST_CONTINUE:
        return !in_loop;
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            if (jumps_out(s->body[i], in_loop))
                return true;
        return false;
    case ST_IF:
        return jumps_out(s->then, in_loop) || jumps_out(s->els, in_loop);
    case ST_FOR:
    case ST_WHILE:
    case ST_DO:
        return jumps_out(s->then, true);
    default:
        return false;
    }
}

static void tbr_stmt(tbr *t, ad_stmt *s, unsigned char *R, bool kill);

static void tbr_list(tbr *t, ad_stmt *s, unsigned char *R, bool kill)
{
    if (s->kind == ST_BLOCK)
        for (int i = 0; i < s->n; i++)
            tbr_stmt(t, s->body[i], R, kill);
    else
        tbr_stmt(t, s, R, kill);
}

static void recompute_reads(ad_stmt *body, unsigned char *R)
{
    if (!body || body->kind != ST_BLOCK)
        return;
    g_reads = R;
    for (int i = 0; i < body->n; i++) {
        ad_stmt *s = body->body[i];
        if (s->kind == ST_DECL && s->recompute)
            walk_expr(s->e, need_all, NULL);
        for (int j = 0; s->kind == ST_BLOCK && j < s->n; j++)
            if (s->body[j]->kind == ST_DECL && s->body[j]->recompute)
                walk_expr(s->body[j]->e, need_all, NULL);
    }
    g_reads = NULL;
}

static void tbr_stmt(tbr *t, ad_stmt *s, unsigned char *R, bool kill)
{
    if (!s)
        return;
    switch (s->kind) {
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++)
            tbr_stmt(t, s->body[i], R, kill && !jumps_out(s, false));
        return;
    case ST_DECL: {
        tbr_reads(s, R);
        bool fresh = s->var->counter || s->recompute;
        if (s->e)
            tbr_assign(&(ad_expr){.kind = EX_VAR, .var = s->var, .type = s->var->type}, s->e, fresh,
                       kill && !s->ninits, R, &s->push, &s->invert);
        else if (s->ninits)
            tbr_assign(&(ad_expr){.kind = EX_VAR, .var = s->var, .type = s->var->type}, NULL, fresh,
                       false, R, &s->push, &s->invert);
        return;
    }
    case ST_EXPR:
        tbr_reads(s, R);
        if (s->e->kind == EX_ASSIGN)
            tbr_assign(s->e->a, s->e->b, false, kill, R, &s->push, &s->invert);
        return;
    case ST_RETURN:
        tbr_reads(s, R);
        return;
    case ST_IF: {
        unsigned char *r2 = tbr_new(t);
        memcpy(r2, R, (size_t)t->nvars);
        bool k2 = kill && !jumps_out(s, false);
        tbr_stmt(t, s->then, R, k2);
        tbr_stmt(t, s->els, r2, k2);
        tbr_union(t, R, r2);
        return;
    }
    case ST_FOR:
    case ST_WHILE:
    case ST_DO: {
        if (s->kind == ST_FOR)
            tbr_stmt(t, s->init, R, kill);
        bool k2 = kill && !jumps_out(s->then, false);
        unsigned char *in = tbr_new(t), *body = tbr_new(t);
        memcpy(in, R, (size_t)t->nvars);
        for (int round = 0; round < 1000; round++) {
            memcpy(body, in, (size_t)t->nvars);
            tbr_list(t, s->then, body, k2);
            recompute_reads(s->then, body);
            if (s->kind == ST_FOR && s->inc && s->inc->kind == EX_ASSIGN) {
                if (s->canon) {
                    s->inc_push = s->inc_invert = false;
                } else {
                    tbr_assign(s->inc->a, s->inc->b, false, k2, body, &s->inc_push, &s->inc_invert);
                }
            }
            bool grew = false;
            for (int i = 0; i < t->nvars; i++)
                if (body[i] && !in[i]) {
                    in[i] = 1;
                    grew = true;
                }
            if (!grew)
                break;
        }
        memcpy(R, in, (size_t)t->nvars);
        for (int i = 0; kill && s->kind == ST_FOR && i < t->f->nlocals; i++) {
            ad_var *v = t->f->locals[i];
            if (R[var_slot(v)] && writes_whole(t->f, s, v))
                R[var_slot(v)] = 0;
        }
        if (s->kind == ST_FOR && s->lo) {
            /* the adjoint evaluates the bounds again after the statements that follow */
            g_reads = R;
            walk_expr(s->lo, need_all, NULL);
            walk_expr(s->hi, need_all, NULL);
            g_reads = NULL;
        }
        return;
    }
    default:
        return;
    }
}

static void tbr_function(ad_func *f, bool callee)
{
    /* a callee's arrays hold its caller's values, which the caller's adjoint may read: the
     * callee restores what it overwrites there */
    for (int i = 0; callee && i < f->nparams; i++)
        if (f->params[i]->type->kind == TY_PTR && f->params[i]->written)
            f->params[i]->needed = true;
    tbr t = {f, f->nparams + f->nlocals};
    g_nparams = f->nparams;
    unsigned char *R = tbr_new(&t);
    /* a callee's arrays hold the caller's values, which the caller's adjoint may read */
    for (int i = 0; callee && i < f->nparams; i++)
        if (f->params[i]->type->kind == TY_PTR)
            R[i] = 1;
    tbr_stmt(&t, f->body, R, true);
}

/* ---- Driver ------------------------------------------------------------------------------------
 */

static void reset_var(ad_var *v)
{
    v->varied = v->useful = v->active = v->needed = false;
    v->wrt = v->output = v->shadowed = false;
    v->counter = false;
}

static void clear_expr(ad_expr *e, void *env)
{
    (void)env;
    e->active = false;
    e->need_val = false;
    e->tmp = -1;
}

static void clear_stmt(ad_stmt *s, void *env)
{
    walk_expr(s->e, clear_expr, env);
    walk_expr(s->inc, clear_expr, env);
    for (int i = 0; i < s->ninits; i++)
        walk_expr(s->inits[i], clear_expr, env);
    s->canon = NULL;
    s->lo = s->hi = NULL;
    s->hi_op = NULL;
    s->recompute = false;
    s->push = s->invert = s->inc_push = s->inc_invert = false;
    s->preacc = s->preacc_top = false;
    s->preacc_slot = 0;
    s->id = 0;
}

static void mark_active_stmt(ad_stmt *s, void *env)
{
    walk_expr(s->e, mark_active, env);
    walk_expr(s->inc, mark_active, env);
    for (int i = 0; i < s->ninits; i++)
        walk_expr(s->inits[i], mark_active, env);
}

/* ---- Stored partials ------------------------------------------------------------------------
 *
 * An active assignment whose right-hand side calls a costly function (sin, exp, pow, ...)
 * and reads few active places has its partials with respect to those places computed by the
 * forward sweep, with the value, and stored; its adjoint then multiplies stored numbers
 * instead of evaluating the rows again, and reads no value (which also spares the stores of
 * the values it would have read). Arithmetic-only right-hand sides are recomputed: that costs
 * less than storing their partials. */

enum { PREACC_MAX_LEAVES = 4 };

typedef struct preacc_env {
    const char *leaves[PREACC_MAX_LEAVES];
    int nleaves;
    bool costly;
    bool fine;
} preacc_env;

/* Rows whose evaluation costs about as much as a store and a load of their partials. */
static bool cheap_row(const char *name)
{
    static const char *const k_cheap[] = {"fabs",  "abs",      "fmax",     "fmin", "max",
                                          "min",   "copysign", "floor",    "ceil", "trunc",
                                          "round", "fdim",     "identity", NULL};
    for (int i = 0; k_cheap[i]; i++)
        if (!strcmp(name, k_cheap[i]))
            return true;
    return false;
}

bool ad_is_place(const ad_expr *e)
{
    return e->kind == EX_VAR || e->kind == EX_INDEX || e->kind == EX_MEMBER || e->kind == EX_DEREF;
}

static void preacc_walk(const ad_expr *e, preacc_env *p)
{
    if (!p->fine || !e || !e->active)
        return;
    if (e->type->kind != TY_DOUBLE) {
        p->fine = false;
        return;
    }
    if (ad_is_place(e)) {
        const char *t = ad_expr_text(e);
        for (int i = 0; i < p->nleaves; i++)
            if (!strcmp(p->leaves[i], t))
                return;
        if (p->nleaves == PREACC_MAX_LEAVES)
            p->fine = false;
        else
            p->leaves[p->nleaves++] = t;
        return;
    }
    switch (e->kind) {
    case EX_CAST:
        preacc_walk(e->a, p);
        return;
    case EX_CALL:
        if (!e->row || e->callee || e->nargs > 4) {
            p->fine = false;
            return;
        }
        if (!cheap_row(e->row->name))
            p->costly = true;
        for (int i = 0; i < e->nargs; i++)
            preacc_walk(e->args[i], p);
        return;
    case EX_BIN:
    case EX_UN:
        if (!e->row) {
            p->fine = false;
            return;
        }
        preacc_walk(e->a, p);
        if (e->kind == EX_BIN)
            preacc_walk(e->b, p);
        return;
    default:
        p->fine = false; /* conditional expressions and the rest: evaluated again */
        return;
    }
}

static bool preacc_worth(const ad_expr *place, const ad_expr *value)
{
    ad_var *v = ad_root(place);
    if (!v || !v->active || place->type->kind != TY_DOUBLE || !value || !value->active ||
        (value->kind == EX_CALL && value->callee))
        return false;
    preacc_env p = {.fine = true};
    preacc_walk(value, &p);
    return p.fine && p.costly && p.nleaves > 0;
}

/* A statement outside every loop runs once: its partials go to locals of the function
 * (preacc_top), not the value stack, where both sweeps are in one function. */
static void mark_preacc(ad_stmt *s, int loops)
{
    if (!s)
        return;
    if (s->kind == ST_EXPR && s->e && s->e->kind == EX_ASSIGN && !strcmp(s->e->op, "="))
        s->preacc = preacc_worth(s->e->a, s->e->b);
    else if (s->kind == ST_DECL && s->var && s->e && !s->ninits && s->var->type->kind == TY_DOUBLE)
        s->preacc =
            preacc_worth(&(ad_expr){.kind = EX_VAR, .var = s->var, .type = s->var->type}, s->e);
    s->preacc_top = s->preacc && loops == 0;
    bool loop = s->kind == ST_FOR || s->kind == ST_WHILE || s->kind == ST_DO;
    for (int i = 0; i < s->n; i++)
        mark_preacc(s->body[i], loops);
    mark_preacc(s->init, loops);
    mark_preacc(s->then, loops + loop);
    mark_preacc(s->els, loops);
}

/* Whether a call may produce real data: it returns a real, or takes a non-const pointer
 * (through which it may write reals: void *, char * and pointers to reals). */
static bool may_write_real(const ad_expr *e)
{
    if (ad_type_has_real(e->type))
        return true;
    for (int i = 0; i < e->nargs; i++) {
        const ad_type *t = e->args[i]->type;
        bool ptr = t->kind == TY_PTR || t->kind == TY_ARRAY;
        if (ptr && !t->is_const && t->elem->kind != TY_STRUCT && t->elem->kind != TY_PTR)
            return true;
        if (ptr && !t->is_const && ad_type_has_real(t->elem))
            return true;
    }
    return false;
}

/* The first argument of a call that reads data depending on the inputs (before usefulness
 * is known): a varied value, or a pointer (under any cast) to a varied variable. */
static const ad_expr *varied_arg(const ad_expr *e)
{
    for (int i = 0; i < e->nargs; i++) {
        if (expr_varied(e->args[i]))
            return e->args[i];
        const ad_expr *a = e->args[i];
        while (a->kind == EX_CAST && a->a)
            a = a->a;
        const ad_var *v = ad_root(a);
        if ((a->type->kind == TY_PTR || a->type->kind == TY_ARRAY) && v && v->varied &&
            ad_type_has_real(v->type))
            return e->args[i];
    }
    return NULL;
}

/* A call of a function with no body and no rule that may carry a derivative: data that
 * depend on the inputs go in, and reals may come out (its value, or through a pointer). Run
 * before usefulness prunes the varied set, since the tool cannot see what the call writes. */
static void check_calls(ad_expr *e, void *env)
{
    ad_func *f = env;
    if (ad_mpi_counts_past(e))
        f->nerrors++;
    if (e->kind != EX_CALL || e->callee || e->row || zero_derivative(e->text))
        return;
    if (ad_mpi_refused(e)) {
        f->nerrors++;
        return;
    }
    if (!varied_arg(e) || !may_write_real(e))
        return;
    const char *why = ad_rows_why_not(e->text);
    if (why)
        ad_error(e->loc, "call to '%s': a rule was found with --rules, but %s", e->text, why);
    else
        ad_error(e->loc,
                 "call to '%s' with active arguments has no rule and no body: provide its "
                 "body in this file, a scalar rule row for it (--rules lib.so), or a rule "
                 "of the rule API (#pragma chainrules primitive)",
                 e->text);
    f->nerrors++;
}

static void check_calls_stmt(ad_stmt *s, void *env)
{
    walk_expr(s->e, check_calls, env);
    walk_expr(s->inc, check_calls, env);
}

/* Unsupported uses of active data found after activity is known. */
static void check_active_expr(ad_expr *e, void *env)
{
    ad_func *f = env;
    if (e->kind == EX_BIN && e->a && e->b) {
        bool ptr = e->a->type->kind == TY_PTR || e->b->type->kind == TY_PTR;
        if (ptr && (!strcmp(e->op, "<") || !strcmp(e->op, ">") || !strcmp(e->op, "==") ||
                    !strcmp(e->op, "!=") || !strcmp(e->op, "<=") || !strcmp(e->op, ">="))) {
            ad_var *v = ad_root(e->a);
            if (v && v->active) {
                ad_error(e->loc, "unsupported construct: an active pointer compared (compare "
                                 "indices instead)");
                f->nerrors++;
            }
        }
    }
}

static void check_active_stmt(ad_stmt *s, void *env)
{
    walk_expr(s->e, check_active_expr, env);
    walk_expr(s->inc, check_active_expr, env);
}

static void resolve_stmt(ad_stmt *s, void *env)
{
    walk_expr(s->e, resolve_call, env);
    walk_expr(s->inc, resolve_call, env);
    for (int i = 0; i < s->ninits; i++)
        walk_expr(s->inits[i], resolve_call, env);
}

void ad_prepare(ad_unit *u)
{
    call_env ce = {u, 0};
    for (int i = 0; i < u->nfuncs; i++)
        walk_stmt(u->funcs[i]->body, resolve_stmt, &ce);
    ad_inline(u);
    for (int i = 0; i < u->nfuncs; i++)
        if (u->funcs[i]->body && !u->funcs[i]->nerrors && !u->funcs[i]->prim) {
            ad_error_sink(&u->funcs[i]->errors);
            ad_normalize(u->funcs[i]);
            ad_error_sink(NULL);
            u->funcs[i]->nerrors = u->funcs[i]->errors.len != 0;
        }
    /* the operators normalisation made get their rows */
    for (int i = 0; i < u->nfuncs; i++)
        walk_stmt(u->funcs[i]->body, resolve_stmt, &ce);
    bool changed;
    do {
        changed = false;
        for (int i = 0; i < u->nfuncs; i++) {
            write_env w = {u->funcs[i], false};
            if (!u->funcs[i]->prim)
                walk_stmt(u->funcs[i]->body, writes_stmt, &w);
            changed |= w.changed;
        }
    } while (changed);
    for (int i = 0; i < u->nfuncs; i++) {
        ad_func *f = u->funcs[i];
        for (int j = 0; j < f->nparams && j < 64; j++)
            f->params[j]->output = f->writes_param[j] && f->params[j]->type->kind == TY_PTR &&
                                   !f->params[j]->type->is_const &&
                                   ad_type_has_real(f->params[j]->type);
    }
}

int ad_analyse(ad_unit *u, ad_func *f, uint64_t mask, bool callee)
{
    (void)u;
    for (int i = 0; i < f->nparams; i++) {
        ad_var *p = f->params[i];
        bool out = p->output;
        reset_var(p);
        p->output = out;
        if (i < 64 && (mask >> i & 1) && ad_type_has_real(p->type)) {
            p->shadowed = p->wrt = true;
            p->varied = p->useful = true;
        }
    }
    for (int i = 0; i < f->nlocals; i++)
        reset_var(f->locals[i]);
    walk_stmt(f->body, clear_stmt, NULL);
    stmt_act sa = {{false, false}, f};
    do {
        sa.a.changed = false;
        walk_stmt(f->body, act_stmt, &sa);
    } while (sa.a.changed);
    int before = f->nerrors;
    walk_stmt(f->body, check_calls_stmt, f);
    for (int i = 0; i < f->nparams; i++) {
        ad_var *p = f->params[i];
        if (!p->shadowed)
            p->varied = p->useful = false; /* not active in this context */
        p->active = p->shadowed;
    }
    for (int i = 0; i < f->nlocals; i++) {
        ad_var *v = f->locals[i];
        v->active = v->varied && v->useful && ad_type_has_real(v->type);
    }
    /* expressions are active where they read active data */
    for (int i = 0; i < f->nlocals; i++)
        f->locals[i]->varied = f->locals[i]->active;
    for (int i = 0; i < f->nparams; i++)
        f->params[i]->varied = f->params[i]->active;
    walk_stmt(f->body, mark_active_stmt, NULL);
    walk_stmt(f->body, check_active_stmt, f);
    mark_preacc(f->body, 0);
    walk_stmt(f->body, need_stmt, NULL);
    walk_stmt(f->body, find_canonical, NULL);
    mark_exits(f->body);
    /* a return that ends the function leaves nothing unexecuted */
    ad_stmt *body = f->body;
    if (body && body->kind == ST_BLOCK && body->n > 0 &&
        body->body[body->n - 1]->kind == ST_RETURN) {
        bool other = false;
        for (int i = 0; i + 1 < body->n; i++)
            other |= body->body[i]->has_exit;
        if (!other)
            body->has_exit = false;
    }
    /* Until nothing changes: a restored place's indices are read by the adjoint, and so
     * are the operands of a recomputed local (whose own choice depends on what is needed). */
    for (;;) {
        int before_needed = count_needed(f);
        walk_stmt(f->body, clear_recompute, NULL);
        walk_stmt(f->body, recompute_stmt, f);
        walk_stmt(f->body, need_closure, NULL);
        if (count_needed(f) == before_needed)
            break;
    }
    tbr_function(f, callee);
    return f->nerrors > before;
}
