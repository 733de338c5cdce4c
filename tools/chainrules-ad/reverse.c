/*
 * The adjoint (reverse-mode) generator.
 *
 * A forward sweep runs the primal and pushes on a value stack (cr_adstack) only what the
 * adjoint sweep needs and what is overwritten: the old value of a needed variable before it
 * is assigned again, branch directions, loop trip counts (and the first value of a canonical
 * loop's counter, from which the counter is recomputed), and where control left a block
 * early. The adjoint sweep then walks the statements backwards, restoring values as it
 * goes, and propagates adjoints through each statement's expression with the partials of
 * the rule rows (lin.c). No record per operation is kept.
 *
 * A function of the file called from a transformed function is transformed in split mode:
 * `cr_ad_g_fw<mask>` (its forward sweep, pushing onto the caller's stack) and
 * `cr_ad_g_bw<mask>` (its adjoint sweep), specialised to the arguments that are active at
 * the call (mask bit i: parameter i has a shadow).
 */
#include <string.h>

#include "ad.h"
#include "lin.h"
#include "requests.h"

typedef struct xc {
    int kind; /* 'b' block (index), 'i' if (direction), 'l' loop */
    int index;
    ad_stmt *s;
} xc;

typedef struct rv {
    ad_unit *u;
    ad_func *f;
    lin l;
    ad_buf *fw, *bw;
    xc xs[512];
    int nxs;
    bool split; /* emitting cr_ad_f_fw / cr_ad_f_bw */
    int loops;
} rv;

static const char *stack_kind(const ad_type *t)
{
    switch (t->kind) {
    case TY_DOUBLE:
        return "f64";
    case TY_FLOAT:
        return "f32";
    case TY_PTR:
        return "ptr";
    default:
        return "i64";
    }
}

static char *text(const ad_expr *e)
{
    ad_buf b = {0};
    ad_emit_expr(&b, e);
    char *r = ad_strdup(b.p);
    ad_buf_free(&b);
    return r;
}

static char *shadow_text(const ad_expr *e)
{
    ad_buf b = {0};
    ad_emit_shadow(&b, e, "_b");
    char *r = ad_strdup(b.p);
    ad_buf_free(&b);
    return r;
}

/* ---- Which statements have adjoint work --------------------------------------------------- */

/* Whether assigning the place of root v must store the old value first. */
static bool pushes(const ad_var *v, bool fresh_decl)
{
    return v && v->needed && !fresh_decl;
}

static bool assign_active(const ad_expr *l)
{
    const ad_var *v = ad_root(l);
    return v && v->active && ad_type_is_real(l->type);
}

static bool call_active(const ad_expr *c)
{
    if (!c || c->kind != EX_CALL || !c->callee)
        return false;
    return ad_call_mask(c) != 0;
}

static bool rev_stmt(const ad_stmt *s);

static bool rev_stmt(const ad_stmt *s)
{
    if (!s)
        return false;
    switch (s->kind) {
    case ST_BLOCK:
        if (s->has_exit)
            return true;
        for (int i = 0; i < s->n; i++)
            if (rev_stmt(s->body[i]))
                return true;
        return false;
    case ST_DECL:
        return s->var->active || (s->var->needed && s->var->loop_depth > 0);
    case ST_EXPR:
        if (s->e->kind == EX_ASSIGN) {
            const ad_var *v = ad_root(s->e->a);
            return assign_active(s->e->a) || pushes(v, false) || call_active(s->e->b);
        }
        return call_active(s->e);
    case ST_RETURN:
        return true;
    case ST_IF:
        return s->has_exit || rev_stmt(s->then) || rev_stmt(s->els);
    case ST_FOR:
        return rev_stmt(s->then) || rev_stmt(s->init) ||
               (s->inc && !s->canon && pushes(ad_root(s->inc->a), false));
    case ST_WHILE:
    case ST_DO:
        return rev_stmt(s->then);
    case ST_BREAK:
    case ST_CONTINUE:
        return false;
    default:
        return false;
    }
}

/* Whether a loop body holds a break that leaves this loop, or a return. */
static bool loop_breaks(const ad_stmt *s, bool nested)
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
        return loop_breaks(s->then, true);
    default: {
        bool r = loop_breaks(s->then, nested) || loop_breaks(s->els, nested);
        for (int i = 0; i < s->n; i++)
            r |= loop_breaks(s->body[i], nested);
        return r;
    }
    }
}

/* ---- Forward sweep -------------------------------------------------------------------------- */

static void fw_stmt(rv *r, ad_stmt *s, const char *ind);
static void bw_stmt(rv *r, ad_stmt *s, const char *ind);

static void push_place(rv *r, const ad_expr *l, const char *ind)
{
    ad_buf_printf(r->fw, "%scr_adstack_push_%s(&st_, %s);\n", ind, stack_kind(l->type), text(l));
}

static void pop_place(rv *r, const ad_expr *l, const char *ind)
{
    const char *k = stack_kind(l->type);
    if (!strcmp(k, "ptr"))
        ad_buf_printf(r->bw, "%s%s = (%s)cr_adstack_pop_ptr(&st_);\n", ind, text(l),
                      l->type->spelling);
    else if (!strcmp(k, "i64"))
        ad_buf_printf(r->bw, "%s%s = (%s)cr_adstack_pop_i64(&st_);\n", ind, text(l),
                      l->type->spelling);
    else
        ad_buf_printf(r->bw, "%s%s = cr_adstack_pop_%s(&st_);\n", ind, text(l), k);
}

/* The exit chain at a break/continue (to the innermost loop) or return (to the function). */
static void exit_chain(rv *r, bool to_function, const char *ind)
{
    for (int i = r->nxs - 1; i >= 0; i--) {
        xc *x = &r->xs[i];
        if (x->kind == 'l') {
            if (!to_function)
                return;
            ad_stmt *lp = x->s;
            if (lp->canon && lp->canon->needed)
                ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, i0_%d_);\n", ind, lp->id);
            ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, n_%d_);\n", ind, lp->id);
            ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, 1);\n", ind);
        } else if (x->kind == 'b') {
            ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, %d);\n", ind, x->index);
        } else if (x->kind == 'i') {
            ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, %d);\n", ind, x->index);
        }
    }
}

/* Arguments of a call to a transformed function: primal values; shadows where masked. */
static void call_args(rv *r, const ad_expr *c, uint64_t mask, bool shadows, ad_buf *b,
                      const char **scalar_adj)
{
    ad_func *g = c->callee;
    for (int i = 0; i < c->nargs; i++) {
        if (i)
            ad_buf_put(b, ", ");
        ad_buf_put(b, text(c->args[i]));
        if (!shadows || i >= 64 || !(mask >> i & 1))
            continue;
        if (ad_type_is_real(g->params[i]->type)) {
            ad_buf_printf(b, ", &%s", scalar_adj[i]);
        } else {
            ad_buf_printf(b, ", %s", shadow_text(c->args[i]));
        }
    }
    (void)r;
}

static void fw_call(rv *r, ad_expr *lhs, ad_expr *c, const char *ind)
{
    uint64_t mask = ad_call_mask(c);
    ad_buf b = {0};
    if (lhs) {
        ad_buf_printf(&b, "%s = ", text(lhs));
    }
    if (mask) {
        const char *name = ad_request(r->u, c->callee, mask, REQ_SPLIT);
        ad_buf_printf(&b, "cr_ad_%s_fw%s(", c->callee->name, name);
        call_args(r, c, mask, false, &b, NULL);
        ad_buf_put(&b, c->nargs ? ", &st_)" : "&st_)");
    } else {
        ad_buf_put(&b, text(c));
    }
    ad_buf_printf(r->fw, "%s%s;\n", ind, b.p);
    ad_buf_free(&b);
}

static void bw_call(rv *r, ad_expr *lhs, ad_expr *c, const char *ind)
{
    uint64_t mask = ad_call_mask(c);
    if (!mask)
        return;
    ad_func *g = c->callee;
    const char *name = ad_request(r->u, g, mask, REQ_SPLIT);
    const char *adj[64] = {0};
    const char *ind2 = ad_fmt("%s    ", ind);
    ad_buf_printf(r->bw, "%s{\n", ind);
    for (int i = 0; i < c->nargs && i < 64; i++)
        if ((mask >> i & 1) && ad_type_is_real(g->params[i]->type)) {
            adj[i] = ad_fmt("s%d_", ++r->l.tmp);
            ad_buf_printf(r->bw, "%s%s %s = 0;\n", ind2, g->params[i]->type->spelling, adj[i]);
        }
    const char *seed = NULL;
    if (ad_type_is_real(g->ret)) {
        seed = ad_fmt("r%d_", ++r->l.tmp);
        if (lhs && assign_active(lhs)) {
            ad_buf_printf(r->bw, "%sconst %s %s = %s;\n%s%s = 0;\n", ind2, g->ret->spelling, seed,
                          shadow_text(lhs), ind2, shadow_text(lhs));
        } else {
            ad_buf_printf(r->bw, "%sconst %s %s = 0;\n", ind2, g->ret->spelling, seed);
        }
    }
    ad_buf b = {0};
    ad_buf_printf(&b, "cr_ad_%s_bw%s(", g->name, name);
    call_args(r, c, mask, true, &b, adj);
    ad_buf_printf(&b, "%s&st_%s%s)", c->nargs ? ", " : "", seed ? ", " : "", seed ? seed : "");
    ad_buf_printf(r->bw, "%s%s;\n", ind2, b.p);
    ad_buf_free(&b);
    /* the adjoints of scalar arguments flow into the expressions passed */
    for (int i = 0; i < c->nargs && i < 64; i++)
        if (adj[i]) {
            r->l.out = r->bw;
            r->l.ind = ind2;
            lin_value(&r->l, c->args[i]);
            lin_adjoint(&r->l, c->args[i], adj[i]);
        }
    ad_buf_printf(r->bw, "%s}\n", ind);
}

/* An assignment place = value (value may be a call of the file). */
static void fw_assign(rv *r, ad_expr *place, ad_expr *value, bool fresh, const char *ind)
{
    if (value->kind == EX_CALL && value->callee) {
        /* the callee's pushes come first, then the old value: the adjoint restores the old
         * value (which the call's arguments may read), then runs the callee's adjoint */
        if (!pushes(ad_root(place), fresh)) {
            fw_call(r, place, value, ind);
            return;
        }
        ad_expr *tmp = ad_alloc(sizeof *tmp);
        *tmp = *place;
        tmp->kind = EX_TEXT;
        tmp->text = ad_fmt("c%d_", ++r->l.tmp);
        ad_buf_printf(r->fw, "%s{\n%s    %s %s;\n", ind, ind, place->type->spelling, tmp->text);
        const char *ind2 = ad_fmt("%s    ", ind);
        fw_call(r, tmp, value, ind2);
        push_place(r, place, ind2);
        ad_buf_printf(r->fw, "%s%s = %s;\n%s}\n", ind2, text(place), tmp->text, ind);
        return;
    }
    if (pushes(ad_root(place), fresh))
        push_place(r, place, ind);
    ad_buf_printf(r->fw, "%s%s = %s;\n", ind, text(place), text(value));
}

static void bw_assign(rv *r, ad_expr *place, ad_expr *value, bool fresh, const char *ind)
{
    bool restore = pushes(ad_root(place), fresh);
    if (value->kind == EX_CALL && value->callee) {
        if (restore)
            pop_place(r, place, ind);
        bw_call(r, place, value, ind);
        return;
    }
    if (!assign_active(place)) {
        if (restore)
            pop_place(r, place, ind);
        return;
    }
    ad_buf_printf(r->bw, "%s{\n", ind);
    const char *ind2 = ad_fmt("%s    ", ind);
    if (restore)
        pop_place(r, place, ind2);
    int a = ++r->l.tmp;
    const char *sh = shadow_text(place);
    ad_buf_printf(r->bw, "%sconst %s a%d_ = %s;\n%s(void)a%d_;\n%s%s = 0;\n", ind2,
                  ad_type_real_name(place->type), a, sh, ind2, a, ind2, sh);
    r->l.out = r->bw;
    r->l.ind = ind2;
    lin_value(&r->l, value);
    lin_adjoint(&r->l, value, ad_fmt("a%d_", a));
    ad_buf_printf(r->bw, "%s}\n", ind);
}

static ad_expr *var_ref(ad_var *v)
{
    ad_expr *e = ad_alloc(sizeof *e);
    e->kind = EX_VAR;
    e->var = v;
    e->type = v->type;
    e->loc = v->loc;
    e->tmp = -1;
    return e;
}

static ad_expr *elem_ref(ad_var *v, int i)
{
    ad_expr *e = ad_alloc(sizeof *e);
    e->kind = EX_INDEX;
    e->a = var_ref(v);
    e->b = ad_alloc(sizeof *e->b);
    e->b->kind = EX_NUM;
    e->b->text = ad_fmt("%d", i);
    e->b->type = v->type; /* unused */
    e->type = v->type->elem;
    e->loc = v->loc;
    e->tmp = -1;
    return e;
}

static void fw_stmt(rv *r, ad_stmt *s, const char *ind)
{
    const char *ind2 = ad_fmt("%s    ", ind);
    switch (s->kind) {
    case ST_BLOCK: {
        bool mark = s->has_exit;
        for (int i = 0; i < s->n; i++) {
            if (mark)
                r->xs[r->nxs++] = (xc){'b', i + 1, s};
            fw_stmt(r, s->body[i], ind);
            if (mark)
                r->nxs--;
        }
        if (mark)
            ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, %d);\n", ind, s->n);
        return;
    }
    case ST_DECL: {
        bool fresh = s->var->loop_depth == 0 || s->var->counter || s->recompute;
        if (s->e)
            fw_assign(r, var_ref(s->var), s->e, fresh, ind);
        for (int i = 0; i < s->ninits; i++)
            fw_assign(r, elem_ref(s->var, i), s->inits[i], fresh, ind);
        if (s->ninits && s->var->type->kind == TY_ARRAY)
            for (long long i = s->ninits; i < s->var->type->len; i++)
                fw_assign(r, elem_ref(s->var, (int)i), s->inits[0]->kind == EX_NUM ? s->inits[0] : s->inits[0], fresh, ind);
        return;
    }
    case ST_EXPR:
        if (s->e->kind == EX_ASSIGN)
            fw_assign(r, s->e->a, s->e->b, false, ind);
        else if (s->e->kind == EX_CALL && s->e->callee)
            fw_call(r, NULL, s->e, ind);
        else
            ad_buf_printf(r->fw, "%s%s;\n", ind, text(s->e));
        return;
    case ST_RETURN:
        if (s->e)
            ad_buf_printf(r->fw, "%sret_ = %s;\n", ind, text(s->e));
        exit_chain(r, true, ind);
        ad_buf_printf(r->fw, "%sgoto fw_end_;\n", ind);
        return;
    case ST_BREAK:
    case ST_CONTINUE:
        exit_chain(r, false, ind);
        if (s->kind == ST_BREAK) {
            /* the innermost loop records that it was left by a break */
            for (int i = r->nxs - 1; i >= 0; i--)
                if (r->xs[i].kind == 'l') {
                    ad_buf_printf(r->fw, "%sbrk_%d_ = 1;\n", ind, r->xs[i].s->id);
                    break;
                }
        }
        ad_buf_printf(r->fw, "%s%s;\n", ind, s->kind == ST_BREAK ? "break" : "continue");
        return;
    case ST_IF: {
        bool dir = rev_stmt(s);
        ad_buf_printf(r->fw, "%sif (%s) {\n", ind, text(s->e));
        if (dir)
            r->xs[r->nxs++] = (xc){'i', 1, s};
        fw_stmt(r, s->then, ind2);
        if (dir) {
            r->nxs--;
            ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, 1);\n", ind2);
        }
        ad_buf_printf(r->fw, "%s} else {\n", ind);
        if (dir)
            r->xs[r->nxs++] = (xc){'i', 0, s};
        if (s->els)
            fw_stmt(r, s->els, ind2);
        if (dir) {
            r->nxs--;
            ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, 0);\n", ind2);
        }
        ad_buf_printf(r->fw, "%s}\n", ind);
        return;
    }
    case ST_FOR:
    case ST_WHILE:
    case ST_DO: {
        bool any = rev_stmt(s);
        if (s->kind == ST_FOR && s->init)
            fw_stmt(r, s->init, ind);
        if (!any) {
            /* no adjoint work: the primal loop as it is */
            ad_buf b = {0};
            if (s->kind == ST_FOR) {
                ad_buf_printf(&b, "%sfor (; %s; %s)\n", ind, s->e ? text(s->e) : "",
                              s->inc ? text(s->inc) : "");
            } else if (s->kind == ST_WHILE) {
                ad_buf_printf(&b, "%swhile (%s)\n", ind, text(s->e));
            } else {
                ad_buf_printf(&b, "%sdo\n", ind);
            }
            ad_buf_put(r->fw, b.p);
            ad_buf_free(&b);
            ad_buf_printf(r->fw, "%s{\n", ind);
            r->xs[r->nxs++] = (xc){'l', 0, s};
            fw_stmt(r, s->then, ind2);
            r->nxs--;
            ad_buf_printf(r->fw, "%s}%s\n", ind,
                          s->kind == ST_DO ? ad_fmt(" while (%s);", text(s->e)) : "");
            return;
        }
        s->id = ++r->loops;
        bool brk = loop_breaks(s->then, false);
        ad_buf_printf(r->fw, "%s{\n", ind);
        if (s->canon && s->canon->needed)
            ad_buf_printf(r->fw, "%sconst int64_t i0_%d_ = (int64_t)%s;\n", ind2, s->id,
                          s->canon->cname);
        ad_buf_printf(r->fw, "%sint64_t n_%d_ = 0;\n", ind2, s->id);
        if (brk)
            ad_buf_printf(r->fw, "%sint brk_%d_ = 0;\n", ind2, s->id);
        const char *inc = "";
        if (s->kind == ST_FOR && s->inc) {
            ad_var *iv = ad_root(s->inc->a);
            if (!s->canon && pushes(iv, false))
                inc = ad_fmt("(cr_adstack_push_%s(&st_, %s), %s)", stack_kind(s->inc->a->type),
                             text(s->inc->a), text(s->inc));
            else
                inc = text(s->inc);
        }
        if (s->kind == ST_FOR)
            ad_buf_printf(r->fw, "%sfor (; %s; %s) {\n", ind2, s->e ? text(s->e) : "", inc);
        else if (s->kind == ST_WHILE)
            ad_buf_printf(r->fw, "%swhile (%s) {\n", ind2, text(s->e));
        else
            ad_buf_printf(r->fw, "%sdo {\n", ind2);
        const char *ind3 = ad_fmt("%s    ", ind2);
        ad_buf_printf(r->fw, "%sn_%d_++;\n", ind3, s->id);
        r->xs[r->nxs++] = (xc){'l', 0, s};
        fw_stmt(r, s->then, ind3);
        r->nxs--;
        ad_buf_printf(r->fw, "%s}%s\n", ind2,
                      s->kind == ST_DO ? ad_fmt(" while (%s);", text(s->e)) : "");
        if (s->canon && s->canon->needed)
            ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, i0_%d_);\n", ind2, s->id);
        ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, n_%d_);\n", ind2, s->id);
        if (brk)
            ad_buf_printf(r->fw, "%scr_adstack_push_i64(&st_, brk_%d_);\n", ind2, s->id);
        ad_buf_printf(r->fw, "%s}\n", ind);
        return;
    }
    case ST_NULL:
        return;
    }
}

/* The locals of a loop body that the adjoint recomputes (analysis: find_recompute), in
 * their order, at the start of the iteration's adjoint. */
static void recompute_locals(rv *r, ad_stmt *body, const char *ind)
{
    if (!body || body->kind != ST_BLOCK)
        return;
    for (int i = 0; i < body->n; i++) {
        ad_stmt *s = body->body[i];
        if (s->kind == ST_DECL && s->recompute)
            ad_buf_printf(r->bw, "%s%s = %s;\n", ind, s->var->cname, text(s->e));
        if (s->kind == ST_BLOCK)
            for (int j = 0; j < s->n; j++)
                if (s->body[j]->kind == ST_DECL && s->body[j]->recompute)
                    ad_buf_printf(r->bw, "%s%s = %s;\n", ind, s->body[j]->var->cname,
                                  text(s->body[j]->e));
    }
}

/* ---- Adjoint sweep -------------------------------------------------------------------------- */

static void bw_stmt(rv *r, ad_stmt *s, const char *ind)
{
    const char *ind2 = ad_fmt("%s    ", ind);
    switch (s->kind) {
    case ST_BLOCK:
        if (s->has_exit) {
            int x = ++r->l.tmp;
            ad_buf_printf(r->bw, "%s{\n%sconst int64_t x%d_ = cr_adstack_pop_i64(&st_);\n", ind,
                          ind2, x);
            for (int i = s->n - 1; i >= 0; i--) {
                if (!rev_stmt(s->body[i]))
                    continue;
                ad_buf_printf(r->bw, "%sif (x%d_ >= %d) {\n", ind2, x, i + 1);
                bw_stmt(r, s->body[i], ad_fmt("%s    ", ind2));
                ad_buf_printf(r->bw, "%s}\n", ind2);
            }
            ad_buf_printf(r->bw, "%s}\n", ind);
        } else {
            for (int i = s->n - 1; i >= 0; i--)
                if (rev_stmt(s->body[i]))
                    bw_stmt(r, s->body[i], ind);
        }
        return;
    case ST_DECL: {
        bool fresh = s->var->loop_depth == 0 || s->var->counter || s->recompute;
        if (s->ninits && s->var->type->kind == TY_ARRAY)
            for (long long i = s->var->type->len - 1; i >= s->ninits; i--)
                bw_assign(r, elem_ref(s->var, (int)i), s->inits[0], fresh, ind);
        for (int i = s->ninits - 1; i >= 0; i--)
            bw_assign(r, elem_ref(s->var, i), s->inits[i], fresh, ind);
        if (s->e)
            bw_assign(r, var_ref(s->var), s->e, fresh, ind);
        return;
    }
    case ST_EXPR:
        if (s->e->kind == EX_ASSIGN)
            bw_assign(r, s->e->a, s->e->b, false, ind);
        else if (s->e->kind == EX_CALL && s->e->callee)
            bw_call(r, NULL, s->e, ind);
        return;
    case ST_RETURN:
        if (s->e && s->e->active && ad_type_is_real(r->f->ret)) {
            ad_buf_printf(r->bw, "%s{\n", ind);
            r->l.out = r->bw;
            r->l.ind = ind2;
            lin_value(&r->l, s->e);
            lin_adjoint(&r->l, s->e, ad_fmt("%s_b", r->f->name));
            ad_buf_printf(r->bw, "%s}\n", ind);
        }
        return;
    case ST_IF:
        ad_buf_printf(r->bw, "%sif (cr_adstack_pop_i64(&st_)) {\n", ind);
        if (rev_stmt(s->then))
            bw_stmt(r, s->then, ind2);
        ad_buf_printf(r->bw, "%s} else {\n", ind);
        if (s->els && rev_stmt(s->els))
            bw_stmt(r, s->els, ind2);
        ad_buf_printf(r->bw, "%s}\n", ind);
        return;
    case ST_FOR:
    case ST_WHILE:
    case ST_DO: {
        if (s->id == 0) {
            /* no adjoint work inside: only the initialisation */
            if (s->kind == ST_FOR && s->init && rev_stmt(s->init))
                bw_stmt(r, s->init, ind);
            return;
        }
        bool brk = loop_breaks(s->then, false);
        int id = s->id;
        ad_buf_printf(r->bw, "%s{\n", ind);
        if (brk)
            ad_buf_printf(r->bw,
                          "%sconst int64_t brk_%d_ = cr_adstack_pop_i64(&st_);\n%s(void)brk_%d_;\n",
                          ind2, id, ind2, id);
        ad_buf_printf(r->bw, "%sconst int64_t n_%d_ = cr_adstack_pop_i64(&st_);\n", ind2, id);
        const char *ind3 = ad_fmt("%s    ", ind2);
        if (s->canon) {
            if (s->canon->needed)
                ad_buf_printf(r->bw, "%sconst int64_t i0_%d_ = cr_adstack_pop_i64(&st_);\n", ind2,
                              id);
            ad_buf_printf(r->bw, "%sfor (int64_t k_%d_ = n_%d_ - 1; k_%d_ >= 0; k_%d_--) {\n", ind2,
                          id, id, id, id);
            if (s->canon->needed)
                ad_buf_printf(r->bw, "%s%s = (%s)(i0_%d_ + k_%d_ * (%lld));\n", ind3,
                              s->canon->cname, s->canon->type->spelling, id, id, s->canon_step);
        } else {
            ad_buf_printf(r->bw, "%sfor (int64_t k_%d_ = n_%d_; k_%d_ > 0; k_%d_--) {\n", ind2, id,
                          id, id, id);
            if (s->kind == ST_FOR && s->inc && pushes(ad_root(s->inc->a), false)) {
                const char *cond = brk ? ad_fmt("!(brk_%d_ && k_%d_ == n_%d_)", id, id, id) : "1";
                ad_buf_printf(r->bw, "%sif (%s) {\n", ind3, cond);
                pop_place(r, s->inc->a, ad_fmt("%s    ", ind3));
                ad_buf_printf(r->bw, "%s}\n", ind3);
            }
        }
        recompute_locals(r, s->then, ind3);
        if (rev_stmt(s->then))
            bw_stmt(r, s->then, ind3);
        ad_buf_printf(r->bw, "%s}\n", ind2);
        ad_buf_printf(r->bw, "%s}\n", ind);
        if (s->kind == ST_FOR && s->init && rev_stmt(s->init))
            bw_stmt(r, s->init, ind);
        return;
    }
    default:
        return;
    }
}

/* ---- Functions -------------------------------------------------------------------------------- */

/* Declarations of the locals (all at the top, renamed where they shadow) and their shadows. */
static void emit_locals(rv *r, ad_buf *b)
{
    ad_func *f = r->f;
    for (int i = 0; i < f->nlocals; i++) {
        ad_var *v = f->locals[i];
        ad_buf_put(b, "    ");
        ad_emit_decl(b, v->type, v->cname);
        ad_buf_put(b, v->type->kind == TY_ARRAY || v->type->kind == TY_STRUCT ? " = {0};\n"
                                                                               : " = 0;\n");
        if (v->active) {
            ad_buf_put(b, "    ");
            ad_type *t = v->type;
            ad_emit_decl(b, t, ad_fmt("%s_b", v->cname));
            ad_buf_put(b, t->kind == TY_ARRAY || t->kind == TY_STRUCT ? " = {0};\n" : " = 0;\n");
        }
    }
    if (ad_type_is_real(f->ret) || f->ret->kind != TY_VOID) {
        ad_buf_put(b, "    ");
        ad_emit_decl(b, f->ret, "ret_");
        ad_buf_put(b, " = 0;\n    (void)ret_;\n");
    }
}

/* The variables whose final values the split adjoint needs (pushed at the end of the forward
 * sweep, popped at the start of the adjoint sweep). */
static bool carried(const ad_var *v)
{
    return v->needed && v->type->kind != TY_ARRAY && v->type->kind != TY_STRUCT &&
           (v->kind == VAR_LOCAL || v->written);
}

static void silence_unused(rv *r, ad_buf *b)
{
    ad_func *f = r->f;
    for (int i = 0; i < f->nlocals; i++) {
        ad_buf_printf(b, "    (void)%s;\n", f->locals[i]->cname);
        if (f->locals[i]->active)
            ad_buf_printf(b, "    (void)%s_b;\n", f->locals[i]->cname);
    }
    for (int i = 0; i < f->nparams; i++) {
        ad_buf_printf(b, "    (void)%s;\n", f->params[i]->cname);
    }
}

void ad_emit_reverse_public(ad_buf *out, ad_unit *u, ad_func *f)
{
    rv r = {.u = u, .f = f};
    ad_buf fw = {0}, bw = {0};
    r.fw = &fw;
    r.bw = &bw;
    fw_stmt(&r, f->body, "    ");
    bw_stmt(&r, f->body, "    ");
    ad_buf sig = {0};
    ad_emit_signature(&sig, f, 'r');
    ad_buf_printf(out, "%s\n{\n    cr_adstack st_;\n    cr_adstack_init(&st_);\n", sig.p);
    emit_locals(&r, out);
    silence_unused(&r, out);
    ad_buf_put(out, "    /* forward sweep */\n");
    ad_buf_put(out, fw.p ? fw.p : "");
    ad_buf_put(out, "    goto fw_end_;\nfw_end_:\n    if (cr_adstack_failed(&st_)) {\n"
                    "        /* the value stack could not grow: no adjoint (see the docs) */\n"
                    "        cr_adstack_deinit(&st_);\n");
    if (ad_type_is_real(f->ret))
        ad_buf_printf(out, "        return (%s)NAN;\n", f->ret->spelling);
    else if (f->ret->kind != TY_VOID)
        ad_buf_put(out, "        return ret_;\n");
    else
        ad_buf_put(out, "        return;\n");
    ad_buf_put(out, "    }\n    /* adjoint sweep */\n");
    ad_buf_put(out, bw.p ? bw.p : "");
    ad_buf_put(out, "    cr_adstack_deinit(&st_);\n");
    if (f->ret->kind != TY_VOID)
        ad_buf_put(out, "    return ret_;\n");
    ad_buf_put(out, "}\n\n");
    ad_buf_free(&fw);
    ad_buf_free(&bw);
    ad_buf_free(&sig);
}

/* The split pair of a callee under `mask`. */
void ad_emit_reverse_split(ad_buf *out, ad_unit *u, ad_func *f, const char *mname)
{
    rv r = {.u = u, .f = f, .split = true};
    ad_buf fw = {0}, bw = {0};
    r.fw = &fw;
    r.bw = &bw;
    fw_stmt(&r, f->body, "    ");
    bw_stmt(&r, f->body, "    ");
    /* forward sweep function */
    ad_buf_printf(out, "static %s cr_ad_%s_fw%s(", f->ret->spelling, f->name, mname);
    for (int i = 0; i < f->nparams; i++) {
        ad_emit_decl(out, f->params[i]->type, f->params[i]->cname);
        ad_buf_put(out, ", ");
    }
    ad_buf_put(out, "cr_adstack *stp_)\n{\n#define st_ (*stp_)\n");
    emit_locals(&r, out);
    silence_unused(&r, out);
    ad_buf_put(out, fw.p ? fw.p : "");
    ad_buf_put(out, "    goto fw_end_;\nfw_end_:\n");
    for (int i = 0; i < f->nlocals; i++)
        if (carried(f->locals[i]))
            ad_buf_printf(out, "    cr_adstack_push_%s(&st_, %s);\n", stack_kind(f->locals[i]->type),
                          f->locals[i]->cname);
    for (int i = 0; i < f->nparams; i++)
        if (carried(f->params[i]) && f->params[i]->kind == VAR_PARAM && f->params[i]->written &&
            f->params[i]->type->kind != TY_PTR)
            ad_buf_printf(out, "    cr_adstack_push_%s(&st_, %s);\n",
                          stack_kind(f->params[i]->type), f->params[i]->cname);
    if (f->ret->kind != TY_VOID)
        ad_buf_put(out, "    return ret_;\n");
    ad_buf_put(out, "#undef st_\n}\n\n");
    /* adjoint sweep function */
    ad_buf_printf(out, "static void cr_ad_%s_bw%s(", f->name, mname);
    for (int i = 0; i < f->nparams; i++) {
        ad_var *p = f->params[i];
        ad_emit_decl(out, p->type, p->cname);
        ad_buf_put(out, ", ");
        if (p->shadowed) {
            if (ad_type_is_real(p->type))
                ad_buf_printf(out, "%s *%s_b, ", p->type->spelling, p->cname);
            else {
                ad_buf dummy = {0};
                const ad_type *e = p->type->elem;
                const char *base = e->kind == TY_STRUCT ? e->name : e->kind == TY_PTR || e->kind == TY_ARRAY ? e->spelling : ad_type_real_name(ad_type_scalar_of(p->type));
                ad_buf_printf(out, "%s *%s_b, ", base, p->cname);
                ad_buf_free(&dummy);
            }
        }
    }
    ad_buf_put(out, "cr_adstack *stp_");
    if (ad_type_is_real(f->ret))
        ad_buf_printf(out, ", %s %s_b", f->ret->spelling, f->name);
    ad_buf_put(out, ")\n{\n#define st_ (*stp_)\n");
    emit_locals(&r, out);
    silence_unused(&r, out);
    for (int i = f->nparams - 1; i >= 0; i--)
        if (carried(f->params[i]) && f->params[i]->written && f->params[i]->type->kind != TY_PTR)
            ad_buf_printf(out, "    %s = (%s)cr_adstack_pop_%s(&st_);\n", f->params[i]->cname,
                          f->params[i]->type->spelling, stack_kind(f->params[i]->type));
    for (int i = f->nlocals - 1; i >= 0; i--)
        if (carried(f->locals[i]))
            ad_buf_printf(out, "    %s = (%s)cr_adstack_pop_%s(&st_);\n", f->locals[i]->cname,
                          f->locals[i]->type->spelling, stack_kind(f->locals[i]->type));
    ad_buf_put(out, bw.p ? bw.p : "");
    ad_buf_put(out, "#undef st_\n}\n\n");
    ad_buf_free(&fw);
    ad_buf_free(&bw);
}
