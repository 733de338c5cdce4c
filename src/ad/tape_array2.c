/*
 * Array records (K_ARRAY, tape_array.c) in forward sweeps and in second-order sweeps.
 * Forward: each record's result tangent comes from the function's frule, called on the
 * recorded arguments with their tangents. Second order (forward-over-reverse): each record's
 * arguments get x̄ += pullback(ȳ) and x̄̇ += pullback(ȳ̇) + S, where S, the derivative of the
 * pullback along the tangents ẋ applied to ȳ, comes from the rule the call dispatched to
 * (cr_rule_def.linearity and .form, docs/second-order-forms.md): zero for linear and
 * piecewise-linear functions, calls of the same rrule at tangents for multilinear ones, and
 * the rule's form otherwise, run here once per direction.
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <chainrules/project.h>
#include <chainrules/rules_array.h>
#include <chainrules/rules_complex.h>
#include <chainrules/rules_linalg.h>
#include <chainrules/rules_math.h>

#include "../rules/array_rule_impl.h"
#include "tape_impl.h"

#define MAX_ARGS 16 /* as tape_array.c */
#define MAX_DIRS 8  /* directions per second-order sweep (cr_tape_hessian's chunk) */

/* ---- Second-order classes --------------------------------------------------------------- */

enum {
    SO_NONE = 0, /* no second-order form: refused on a second-order tape */
    SO_LINEAR,   /* linear in its differentiable arguments: S = 0 */
    SO_MULTI,    /* multilinear: S from the rrule called with one argument replaced by its
                    tangent */
    SO_RFORM     /* a nonlinear function whose rule declares a form (cr_rule_def.form) */
};

/*
 * No rule of f matches these arguments: the form of another of f's rules (the first found,
 * from the configuration's registry down to the built-ins) says why, if it has a check that
 * refuses them (prod of a number: "the first argument is not an array"); *why is its reason.
 */
static bool other_form_refuses(const cr_tape *t, const cr_value *f, const cr_value *vals,
                               size_t nargs, const bool *var, const char **why)
{
    const cr_registry *reg = t->config != NULL && t->config->registry != NULL
                                 ? t->config->registry
                                 : cr_registry_builtin();
    for (; reg != NULL; reg = cr_registry_parent(reg)) {
        size_t n = cr_registry_size(reg);
        for (size_t e = 0; e < n; e++) {
            cr_rule_info info;
            if (cr_registry_get(reg, e, &info) != CR_OK || info.fn != f->u.func.fn ||
                info.def == NULL || info.def->form == NULL || info.def->form->check == NULL)
                continue;
            uint32_t lin = CR_NONLINEAR;
            return (*why = info.def->form->check(vals, nargs, var, &lin)) != NULL;
        }
    }
    return false;
}

/*
 * The class the rule that f(vals...) dispatches to declares: its linearity, refined by its
 * form's check at these arguments, or its form (*rform). SO_NONE when the rule declares
 * neither, or with *why (else NULL) when the form's check refuses the call.
 */
static int so_class(const cr_tape *t, const cr_value *f, const cr_value *vals,
                    const uint32_t *codes, size_t nargs, const cr_rule_form **rform,
                    const char **why)
{
    cr_rule_match m;
    bool var[MAX_ARGS];
    for (size_t j = 0; j < nargs; j++)
        var[j] = codes[j] != CR_VAR_CONST;
    *rform = NULL;
    *why = NULL;
    if (cr_registry_lookup(NULL, t->config, CR_MODE_RRULE, f, vals, nargs, &m) != CR_OK ||
        m.def == NULL) {
        (void)other_form_refuses(t, f, vals, nargs, var, why);
        return SO_NONE;
    }
    const cr_rule_def *def = m.def;
    cr_rule_match b;
    /* A user's rule that overrides a built-in one and declares nothing of its own keeps the
     * built-in rule's class and form: they belong to the function it computes. */
    if (def->linearity == CR_NONLINEAR && def->form == NULL && t->config != NULL &&
        t->config->registry != NULL &&
        cr_registry_lookup(cr_registry_builtin(), t->config, CR_MODE_RRULE, f, vals, nargs, &b) ==
            CR_OK &&
        b.def != NULL)
        def = b.def;
    uint32_t lin = def->linearity;
    if (def->form != NULL && def->form->check != NULL &&
        (*why = def->form->check(vals, nargs, var, &lin)) != NULL)
        return SO_NONE;
    if (lin == CR_LINEAR || lin == CR_PIECEWISE_LINEAR)
        return SO_LINEAR;
    if (lin == CR_MULTILINEAR)
        return SO_MULTI;
    if (def->form != NULL) {
        *rform = def->form;
        return SO_RFORM;
    }
    return SO_NONE;
}

struct cr__aext {
    cr_value f;                /* the function called (a copy) */
    const cr_value *vals;      /* its arguments' values (the tape's copy, in the arena) */
    const cr_rule_form *rform; /* SO_RFORM: the form its rule declares */
    int cls;                   /* SO_*; SO_NONE on forward tapes for unknown functions */
};

struct cr__asweep {
    size_t k;
    cr_tangent *tan;  /* tan[slot * k + d]: array variable slot's tangent along direction d */
    cr_tangent *accd; /* second order: the derivative of slot's shadow along d, else NULL */
};

static bool is_complex(const cr_value *v)
{
    return v->kind == CR_KIND_C128 ||
           (v->kind == CR_KIND_ARRAY && v->u.arr != NULL && v->u.arr->dtype == CR_DT_C128);
}

cr_status cr__array_ext(cr_tape *t, const cr_value *f, const cr_value *vals, const uint32_t *codes,
                        size_t nargs, const cr__aext **out)
{
    const char *fname = f->u.func.fn->name;
    const cr_rule_form *rform = NULL;
    const char *why;
    int cls = so_class(t, f, vals, codes, nargs, &rform, &why);
    if (t->flags & (CR_TAPE_SECOND_ORDER | CR__TAPE_SO_CHECK)) {
        if (cls == SO_NONE && why != NULL)
            return cr__tape_fail(t, CR_EUNIMPL, "%s: no second-order form on the tape: %s", fname,
                                 why);
        if (cls == SO_NONE)
            return cr__tape_fail(t, CR_EUNIMPL,
                                 "%s: no second-order form on the tape (second-order tapes record "
                                 "linear and multilinear array functions, broadcasts of "
                                 "scalar-table functions and the functions of docs/engine.md's "
                                 "table)",
                                 fname);
        for (size_t j = 0; j < nargs && cls != SO_LINEAR; j++) /* S = 0 whatever the dtype */
            if (codes[j] != CR_VAR_CONST && is_complex(&vals[j]))
                return cr__tape_fail(t, CR_EUNIMPL,
                                     "%s: argument %zu is complex: second-order tapes record "
                                     "real array functions only",
                                     fname, j);
    }
    cr__aext *e = cr_arena_alloc(t->arena, sizeof *e, _Alignof(cr__aext));
    if (e == NULL)
        return cr__tape_fail(t, CR__ALLOC_STATUS(t->arena), "%s: no room for the record", fname);
    e->f = *f;
    e->vals = vals;
    e->rform = rform;
    e->cls = cls;
    *out = e;
    return CR_OK;
}

/* ---- Sweep state --------------------------------------------------------------------------- */

cr_status cr__array_sweep_begin(cr_tape *t, size_t k, bool second)
{
    size_t n = (size_t)t->naslots * k;
    cr__asweep *w = cr_arena_alloc(t->arena, sizeof *w, _Alignof(cr__asweep));
    cr_tangent *tan =
        w == NULL ? NULL : cr_arena_calloc(t->arena, n ? n : 1, sizeof *tan, _Alignof(cr_tangent));
    cr_tangent *accd = tan == NULL || !second ? NULL
                                              : cr_arena_calloc(t->arena, n ? n : 1, sizeof *accd,
                                                                _Alignof(cr_tangent));
    if (tan == NULL || (second && accd == NULL))
        return cr__tape_fail(t, CR__ALLOC_STATUS(t->arena),
                             "tape: no room for the tangents of %u array variables",
                             (unsigned)t->naslots);
    /* calloc'd tangents are ZeroTangent (tag 0) */
    w->k = k;
    w->tan = tan;
    w->accd = accd;
    t->asw = w;
    if (second)
        cr__array_clear(t);
    return CR_OK;
}

void cr__array_sweep_end(cr_tape *t)
{
    if (t->asw != NULL && t->asw->accd != NULL)
        cr__array_clear(t);
    t->asw = NULL;
}

/* The tangent of argument `code` of a record along direction d. */
static cr_tangent arg_tangent(const cr_tape *t, uint32_t code, const double *tan, size_t k,
                              size_t d)
{
    if (code == CR_VAR_CONST)
        return cr_tangent_zero();
    if (code & CR__ASLOT_BIT) {
        const cr__asweep *w = t->asw;
        return w == NULL ? cr_tangent_zero() : w->tan[(size_t)(code & ~CR__ASLOT_BIT) * k + d];
    }
    double v = tan[(size_t)code * k + d];
    return v == 0.0 ? cr_tangent_zero() : cr_tangent_f64(v);
}

/* A failure of a rule called by a sweep: its message is on the context. */
static cr_status rule_failed(cr_tape *t, const cr__anode *nd, const char *what, cr_status st)
{
    const char *msg = cr_ctx_errmsg(t->ctx);
    return cr__tape_fail(t, st, "%s of %s failed: %s", what, nd->fname,
                         msg[0] != '\0' ? cr__after_name(msg, nd->fname) : cr_status_str(st));
}

cr_tangent *cr__asweep_slot(cr_tape *t, uint32_t slot, size_t d, bool deriv)
{
    cr__asweep *w = t->asw;
    if (w == NULL || (deriv && w->accd == NULL))
        return NULL;
    return &(deriv ? w->accd : w->tan)[(size_t)slot * w->k + d];
}

/* A record without forward or second-order information: one made on a first-order tape. */
static cr_status no_form(cr_tape *t, const cr__anode *nd, const char *what)
{
    return cr__tape_fail(t, CR_EUNIMPL, "%s: recorded without CR_TAPE_FORWARD (%s sweeps need it)",
                         nd->fname, what);
}

/* ---- Forward ------------------------------------------------------------------------------- */

/* Add the tangent dy of a tuple result along direction d to its elements' variables: a
 * scalar element c of the record making scalar variables from i is variable i + c, an array
 * element has its slot; integer elements (constants) have no tangent. */
static cr_status tuple_tangents(cr_tape *t, const cr__anode *nd, cr_tangent dy, double *tan,
                                size_t k, size_t i, size_t d)
{
    if (cr_tangent_is_zero(dy))
        return CR_OK;
    if (dy.tag != CR_TAN_STRUCT)
        return cr__tape_fail(t, CR_EINVAL, "%s: its frule gave a %s tangent for a tuple result",
                             nd->fname, cr_tag_name((cr_tag)dy.tag));
    cr__asweep *w = t->asw;
    for (size_t o = 0; o < nd->nout; o++) {
        uint32_t c = nd->outs[o];
        cr_tangent e = cr_tangent_field(dy, o);
        cr_status st = CR_OK;
        if (c == CR_VAR_CONST || cr_tangent_is_zero(e))
            continue;
        if (cr_tangent_is_thunk(e) && (st = cr_tangent_unthunk(e, &e)) != CR_OK)
            return rule_failed(t, nd, "the frule", st);
        if (!(c & CR__ASLOT_BIT)) {
            st = cr__accum_real(t->arena, nd->fname, e, &tan[(i + c) * k + d]);
        } else if (w == NULL) {
            return cr__tape_fail(t, CR_EINVAL, "tape: %s: forward sweep without array tangents",
                                 nd->fname);
        } else {
            cr_tangent *slot = &w->tan[(size_t)(c & ~CR__ASLOT_BIT) * k + d];
            st = cr_tangent_is_zero(*slot) ? (*slot = e, CR_OK)
                                           : cr_tangent_add(t->arena, *slot, e, slot);
        }
        if (st != CR_OK)
            return rule_failed(t, nd, "the frule", st);
    }
    return CR_OK;
}

cr_status cr__array_forward(cr_tape *t, const cr__anode *nd, double *tan, size_t k, size_t i)
{
    if (nd->custom) /* an operation with its own steps */
        return cr__custom_forward(t, nd, tan, k, i);
    if (nd->pull != NULL) /* a fused kernel */
        return cr__kernel_forward(t, nd, tan, k, i);
    const cr__aext *e = nd->ext;
    if (e == NULL)
        return no_form(t, nd, "forward");
    cr__asweep *w = t->asw;
    size_t nargs = nd->nargs;
    bool scalar = nd->out == CR_VAR_CONST;
    if (!scalar && nd->nout == 0 && w == NULL)
        return cr__tape_fail(t, CR_EINVAL, "tape: %s: forward sweep without array tangents",
                             nd->fname);
    cr_tangent dargs[MAX_ARGS + 1];
    for (size_t d = 0; d < k; d++) {
        bool any = false;
        dargs[0] = cr_tangent_none(); /* the function called has no fields */
        for (size_t j = 0; j < nargs; j++) {
            dargs[j + 1] = arg_tangent(t, nd->args[j], tan, k, d);
            any = any || !cr_tangent_is_zero(dargs[j + 1]);
        }
        if (!any)
            continue; /* a zero tangent */
        cr_value y;
        cr_tangent dy;
        cr_status st = cr_frule(t->config, t->arena, dargs, &e->f, e->vals, nargs, &y, &dy);
        if (st == CR_NOTHING)
            return cr__tape_fail(
                t, CR_EUNIMPL, "%s has no frule: a forward sweep cannot go through it", nd->fname);
        if (st == CR_OK && cr_tangent_is_thunk(dy))
            st = cr_tangent_unthunk(dy, &dy);
        if (st != CR_OK)
            return rule_failed(t, nd, "the frule", st);
        if (nd->nout > 0) {
            if ((st = tuple_tangents(t, nd, dy, tan, k, i, d)) != CR_OK)
                return st;
            continue;
        }
        if (scalar) {
            st = cr__accum_real(t->arena, nd->fname, dy, &tan[i * k + d]);
        } else {
            cr_tangent *slot = &w->tan[(size_t)nd->out * k + d];
            st = cr_tangent_is_zero(*slot) ? (*slot = dy, CR_OK)
                                           : cr_tangent_add(t->arena, *slot, dy, slot);
        }
        if (st != CR_OK)
            return rule_failed(t, nd, "the frule", st);
    }
    return CR_OK;
}

/* ---- Second order ---------------------------------------------------------------------------- */

/* Add the cotangent-derivative dx of argument j along direction d. */
static cr_status add_d(cr_tape *t, const cr__anode *nd, size_t j, cr_tangent dx, double *adjd,
                       size_t k, size_t d)
{
    uint32_t c = nd->args[j];
    if (c == CR_VAR_CONST || cr_tangent_is_zero(dx))
        return CR_OK;
    if (!(c & CR__ASLOT_BIT))
        return cr__accum_real(t->arena, nd->pb.name, dx, &adjd[(size_t)c * k + d]);
    size_t s = c & ~CR__ASLOT_BIT;
    cr__aslot tmp = {t->aslots[s].val, t->asw->accd[s * k + d], NULL, false};
    cr_status st = cr__shadow_accum(t->arena, &tmp, dx);
    t->asw->accd[s * k + d] = tmp.acc;
    return st;
}

/* The value of a tangent, as an argument of a rule (a scalar or an array). */
static cr_status value_of(cr_tape *t, const cr__anode *nd, cr_tangent v, cr_value *out)
{
    cr_status st = cr_tangent_unthunk(v, &v);
    if (st != CR_OK)
        return st;
    switch ((cr_tag)v.tag) {
    case CR_TAN_F64:
        *out = cr_value_f64(v.u.f64);
        return CR_OK;
    case CR_TAN_F32:
        *out = cr_value_f32(v.u.f32);
        return CR_OK;
    case CR_TAN_ARRAY:
        *out = cr_value_array(v.u.arr);
        return CR_OK;
    default:
        return cr__tape_fail(t, CR_EUNIMPL, "%s: a tangent of kind %s cannot be used as a point",
                             nd->fname, cr_tag_name((cr_tag)v.tag));
    }
}

/*
 * S of a multilinear function: for each variable argument l and direction d, the rrule at
 * the point with argument l replaced by its tangent, pulled back with ȳ, gives the
 * derivative of every other argument's cotangent along ẋ_l.
 */
static cr_status second_multi(cr_tape *t, const cr__anode *nd, cr_tangent ybar, double *adjd,
                              const double *tan, size_t k)
{
    const cr__aext *e = nd->ext;
    size_t nargs = nd->nargs, nvar = 0;
    for (size_t j = 0; j < nargs; j++)
        nvar += nd->args[j] != CR_VAR_CONST;
    if (nvar < 2)
        return CR_OK; /* linear in its only variable argument */
    cr_value vals[MAX_ARGS];
    cr_tangent dx[MAX_ARGS + 1];
    size_t nx = nargs + 1;
    for (size_t l = 0; l < nargs; l++) {
        if (nd->args[l] == CR_VAR_CONST)
            continue;
        for (size_t d = 0; d < k; d++) {
            cr_tangent tl = arg_tangent(t, nd->args[l], tan, k, d);
            if (cr_tangent_is_zero(tl))
                continue;
            memcpy(vals, e->vals, nargs * sizeof *vals);
            cr_status st = value_of(t, nd, tl, &vals[l]);
            if (st != CR_OK)
                return t->status != CR_OK ? t->status : rule_failed(t, nd, "a tangent", st);
            cr_value y;
            cr_pullback pb;
            st = cr_rrule(t->config, t->arena, &e->f, vals, nargs, &y, &pb);
            if (st == CR_OK)
                st = cr_pullback_call(t->arena, &pb, &ybar, dx, nx);
            for (size_t j = 0; j < nargs && st == CR_OK; j++) {
                if (j == l || nd->args[j] == CR_VAR_CONST)
                    continue;
                st = cr__guard_alias(t->arena, &ybar, dx, nx, j + 1);
                if (st == CR_OK)
                    st = add_d(t, nd, j, dx[j + 1], adjd, k, d);
            }
            if (st != CR_OK)
                return rule_failed(t, nd, "the second-order term", st);
        }
    }
    return CR_OK;
}

/* A failure of a rule's form: a message that names the function is kept as the form wrote
 * it; any other is put after "the second-order term of f failed". */
static cr_status form_failed(cr_tape *t, const cr__anode *nd, cr_status st)
{
    if (t->status != CR_OK)
        return t->status;
    const char *msg = cr_ctx_errmsg(t->ctx);
    if (cr_ctx_errcode(t->ctx) == st && cr__names(msg, nd->fname))
        return cr__tape_fail(t, st, "%s", msg);
    return rule_failed(t, nd, "the second-order term", st);
}

/*
 * S of a function whose rule declares a form (cr_rule_form): the form's preparation once,
 * then, for each direction along which an argument moves, its step with the arguments' and
 * the result's tangents; each variable argument's S_j, projected onto the argument's
 * structure as the rule projects its cotangent, is added into the derivative of its
 * cotangent along that direction.
 */
static cr_status second_form(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                             double *adjd, const double *tan, size_t k)
{
    const cr__aext *e = nd->ext;
    const cr_rule_form *fm = e->rform;
    size_t nargs = nd->nargs;
    bool var[MAX_ARGS];
    for (size_t j = 0; j < nargs; j++)
        var[j] = nd->args[j] != CR_VAR_CONST;
    cr_form_point p = {t->config, t->arena, nd->fname, &e->f,   nd->vals,
                       nargs,     var,      &nd->y,    &nd->pb, ybar};
    void *state = NULL;
    cr_status st = fm->init != NULL ? fm->init(&p, &state) : CR_OK;
    if (st == CR_NOTHING)
        return CR_OK; /* S = 0 at this point */
    /* the result's tangent: scalar variable i, or the array slot (none for a tuple) */
    uint32_t ycode = nd->nout > 0              ? CR_VAR_CONST
                     : nd->out == CR_VAR_CONST ? (uint32_t)i
                                               : nd->out | CR__ASLOT_BIT;
    cr_tangent xd[MAX_ARGS], S[MAX_ARGS];
    for (size_t d = 0; d < k && st == CR_OK; d++) {
        bool any = false;
        for (size_t j = 0; j < nargs; j++) {
            xd[j] = var[j] ? arg_tangent(t, nd->args[j], tan, k, d) : cr_tangent_zero();
            any = any || !cr_tangent_is_zero(xd[j]);
            S[j] = cr_tangent_zero();
        }
        if (!any)
            continue;
        st = fm->dir(&p, state, xd, arg_tangent(t, ycode, tan, k, d), S);
        for (size_t j = 0; j < nargs && st == CR_OK; j++) {
            const cr_value *v = &nd->vals[j];
            if (!var[j] || cr_tangent_is_zero(S[j]))
                continue;
            if (v->kind == CR_KIND_ARRAY && v->u.arr != NULL && v->u.arr->structure != CR_MAT_DENSE)
                st = cr_project_tangent(t->arena, v, S[j], &S[j]);
            if (st == CR_OK)
                st = add_d(t, nd, j, S[j], adjd, k, d);
        }
    }
    return st == CR_OK ? CR_OK : form_failed(t, nd, st);
}

/* pullback(dy) added into the derivatives along direction d. */
static cr_status pull_d(cr_tape *t, const cr__anode *nd, cr_tangent dy, double *adjd, size_t k,
                        size_t d)
{
    size_t nx = (size_t)nd->nargs + 1;
    cr_tangent dx[MAX_ARGS + 1];
    cr_status st = cr_pullback_call(t->arena, &nd->pb, &dy, dx, nx);
    for (size_t j = 0; j < nd->nargs && st == CR_OK; j++) {
        if (nd->args[j] == CR_VAR_CONST)
            continue;
        st = cr__guard_alias(t->arena, &dy, dx, nx, j + 1);
        if (st == CR_OK)
            st = add_d(t, nd, j, dx[j + 1], adjd, k, d);
    }
    return st == CR_OK ? CR_OK : rule_failed(t, nd, "the pullback", st);
}

/* The cotangent ȳ of a record's result and its derivatives ȳ̇ along the k directions (those of
 * an array result and of a tuple's array elements are consumed); *anyd when one is not zero. */
static cr_status result_cots(cr_tape *t, const cr__anode *nd, size_t i, double *adj, double *adjd,
                             size_t k, cr_tangent *ybar, cr_tangent *ybd, bool *anyd)
{
    cr__asweep *w = t->asw;
    *anyd = false;
    if (nd->nout > 0) {
        bool zero;
        cr_status st = cr__tuple_cot(t, nd, &adj[i], 1, NULL, 0, 0, ybar, &zero);
        if (st == CR_OK && zero)
            *ybar = cr_tangent_zero();
        for (size_t d = 0; d < k && st == CR_OK; d++) {
            st = cr__tuple_cot(t, nd, &adjd[i * k + d], k, w != NULL ? w->accd : NULL, k, d,
                               &ybd[d], &zero);
            if (zero)
                ybd[d] = cr_tangent_zero();
            *anyd = *anyd || !zero;
        }
        return st == CR_OK ? CR_OK : rule_failed(t, nd, "the cotangent", st);
    }
    bool scalar = nd->out == CR_VAR_CONST;
    *ybar = scalar ? (adj[i] == 0.0 ? cr_tangent_zero() : cr_tangent_f64(adj[i]))
                   : t->aslots[nd->out].acc;
    for (size_t d = 0; d < k; d++) {
        if (scalar) {
            double g = adjd[i * k + d];
            ybd[d] = g == 0.0 ? cr_tangent_zero() : cr_tangent_f64(g);
        } else {
            ybd[d] = w->accd[(size_t)nd->out * k + d];
            w->accd[(size_t)nd->out * k + d] = cr_tangent_zero(); /* consumed */
        }
        *anyd = *anyd || !cr_tangent_is_zero(ybd[d]);
    }
    return CR_OK;
}

cr_status cr__array_pull2(cr_tape *t, const cr__anode *nd, size_t i, double *adj, double *adjd,
                          const double *tan, size_t k)
{
    if (nd->custom) /* refused when recorded; a corrupt record otherwise */
        return cr__tape_fail(t, CR_EUNIMPL, "%s: no second-order step", nd->fname);
    if (nd->pull != NULL) /* a fused kernel */
        return cr__kernel_pull2(t, nd, i, adj, adjd, tan, k);
    const cr__aext *e = nd->ext;
    cr__asweep *w = t->asw;
    bool scalar = nd->out == CR_VAR_CONST; /* one scalar, or a tuple's scalars from i on */
    bool arrays = !scalar;                 /* an array result or a tuple's array element */
    for (size_t o = 0; o < nd->nout; o++)
        arrays = arrays || (nd->outs[o] != CR_VAR_CONST && (nd->outs[o] & CR__ASLOT_BIT));
    if (e == NULL)
        return no_form(t, nd, "second-order");
    if ((arrays && (w == NULL || w->accd == NULL)) || k > MAX_DIRS)
        return cr__tape_fail(t, CR_EINVAL, "tape: %s: array record without second-order state",
                             nd->fname);
    cr_tangent ybar, ybd[MAX_DIRS];
    bool anyd;
    cr_status st = result_cots(t, nd, i, adj, adjd, k, &ybar, ybd, &anyd);
    if (st == CR_OK && !cr_tangent_is_zero(ybar)) {
        if (e->cls == SO_MULTI)
            st = second_multi(t, nd, ybar, adjd, tan, k);
        else if (e->cls == SO_RFORM)
            st = second_form(t, nd, i, ybar, adjd, tan, k);
        /* the ordinary reverse step: x̄ += pullback(ȳ) */
        if (st == CR_OK)
            st = cr__array_pull(t, nd, scalar ? &adj[i] : NULL, adj);
    }
    for (size_t d = 0; d < k && anyd && st == CR_OK; d++)
        if (!cr_tangent_is_zero(ybd[d]))
            st = pull_d(t, nd, ybd[d], adjd, k, d);
    return st;
}

/* ---- Public sweeps --------------------------------------------------------------------------- */

/* Check a direction or tangent array (what, as the caller names it) against its variable
 * (shape, finite values). */
static cr_status check_dir(cr_tape *t, const char *who, const char *what, size_t j,
                           const cr_array *v, const cr_array *like)
{
    if (v == NULL || v->data == NULL || !cr_dtype_is_float((cr_dtype)v->dtype))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s %zu is NULL or not a float array", who, what,
                            j);
    bool same = like == NULL || v->ndim == like->ndim;
    for (size_t q = 0; same && like != NULL && q < v->ndim; q++)
        same = v->shape[q] == like->shape[q];
    if (!same) {
        char b1[64], b2[64];
        return cr_ctx_error(t->ctx, CR_ESHAPE, "%s: %s %zu is %s, its variable is %s", who, what, j,
                            cr__shape_str(v, b1, sizeof b1), cr__shape_str(like, b2, sizeof b2));
    }
    size_t m = cr_array_numel(v);
    if (v->dtype == CR_DT_F64 && cr__is_contig_dense(v)) { /* the common case, directly */
        const double *p = v->data;
        double acc[4] = {0.0, 0.0, 0.0, 0.0}; /* four chains: not bound by add latency */
        size_t e = 0;
        for (; e + 4 <= m; e += 4)
            for (size_t l = 0; l < 4; l++)
                acc[l] += p[e + l] * 0.0; /* NaN or infinite elements make it NaN */
        for (; e < m; e++)
            acc[0] += p[e] * 0.0;
        if ((acc[0] + acc[1]) + (acc[2] + acc[3]) == 0.0)
            return CR_OK;
    }
    for (size_t e = 0; e < m; e++) {
        cr_complex z = cr_array_get_linear(v, e);
        if (!isfinite(creal(z)) || !isfinite(cimag(z)))
            return cr_ctx_error(t->ctx, CR_EDOMAIN, "%s: element %zu of %s %zu is not finite", who,
                                e, what, j);
    }
    return CR_OK;
}

/* Seed the array inputs' tangents (direction 0) with v, converted to their dtypes. */
static cr_status seed_arrays(cr_tape *t, const cr_avar *as, size_t na, const cr_array *const *v)
{
    for (size_t j = 0; j < na; j++) {
        if (as[j].idx == CR_VAR_CONST)
            continue;
        const cr_array *like = t->aslots[as[j].idx].val;
        const cr_array *w;
        cr_array *c;
        cr_dtype dt = (cr_dtype)like->dtype;
        cr_status st = cr__dense(t->arena, v[j], cr__work(dt), &w);
        if (st == CR_OK && like->ndim == 2 && like->structure != CR_MAT_DENSE) {
            /* The direction as the input reads it: data changed by v read through the
             * input's structure (Symmetric: the upper triangle mirrored; Upper, Lower: one
             * triangle; Diagonal: the diagonal), which is what finite differences of the
             * input's data see. */
            cr_array s = *w;
            s.structure = like->structure;
            if (like->structure == CR_MAT_DIAGONAL)
                s.strides[0] = (ptrdiff_t)w->shape[1] + 1;
            st = cr__dense(t->arena, &s, cr__work(dt), &w);
        }
        if (st == CR_OK)
            st = cr__cast(t->arena, w, dt == CR_DT_F32 ? CR_DT_F32 : cr__work(dt), &c);
        cr_array *r;
        if (st == CR_OK)
            st = cr__view_of(t->arena, c, &r); /* never written through */
        if (st != CR_OK)
            return cr__tape_fail(t, st, "array tangents: %s", cr_ctx_errmsg(t->ctx));
        cr_tangent *slot = &t->asw->tan[as[j].idx];
        st = cr_tangent_is_zero(*slot) ? (*slot = cr_tangent_array(r), CR_OK)
                                       : cr_tangent_add(t->arena, *slot, cr_tangent_array(r), slot);
        if (st != CR_OK)
            return cr__tape_fail(t, st, "array tangents: %s", cr_ctx_errmsg(t->ctx));
    }
    return CR_OK;
}

static double *workspace(cr_tape *t, size_t n, cr_status *st)
{
    double *w = cr_arena_calloc(t->arena, n ? n : 1, sizeof(double), _Alignof(double));
    if (w == NULL)
        *st = cr__tape_fail(t, CR__ALLOC_STATUS(t->arena),
                            "tape: no room for a sweep workspace of %zu doubles", n);
    return w;
}

cr_status cr_tape_ajvp(cr_tape *t, const cr_var *xs, const double *xdot, size_t n,
                       const cr_avar *as, const cr_array *const *adot, size_t na, const cr_var *ys,
                       size_t m, double *ydot, const cr_avar *bs, size_t nb, cr_array *const *bdot)
{
    const char *who = "cr_tape_ajvp";
    if (t == NULL)
        return CR_EINVAL;
    if (cr__tape_misused(t))
        return CR_EMISUSE;
    if (t->status != CR_OK)
        return t->status;
    if (!(t->flags & CR_TAPE_FORWARD))
        return cr_ctx_error(t->ctx, CR_EMISUSE, "%s: the tape was not created with CR_TAPE_FORWARD",
                            who);
    if ((n > 0 && (xs == NULL || xdot == NULL)) || (na > 0 && (as == NULL || adot == NULL)) ||
        (m > 0 && (ys == NULL || ydot == NULL)) || (nb > 0 && (bs == NULL || bdot == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s is NULL", who,
                            n > 0 && xs == NULL      ? "xs"
                            : n > 0 && xdot == NULL  ? "xdot"
                            : na > 0 && as == NULL   ? "as"
                            : na > 0 && adot == NULL ? "adot"
                            : m > 0 && ys == NULL    ? "ys"
                            : m > 0 && ydot == NULL  ? "ydot"
                            : bs == NULL             ? "bs"
                                                     : "bdot");
    cr_status st;
    if ((st = cr__check_vars(t, who, xs, n, "input")) != CR_OK ||
        (st = cr__check_vars(t, who, ys, m, "output")) != CR_OK ||
        (st = cr__check_avars(t, who, as, na, "array input")) != CR_OK ||
        (st = cr__check_avars(t, who, bs, nb, "array output")) != CR_OK ||
        (st = cr__check_finite(t, who, xdot, n, "tangent")) != CR_OK)
        return st;
    for (size_t j = 0; j < na; j++)
        if ((st = check_dir(t, who, "tangent array", j, adot[j], as[j].a)) != CR_OK)
            return st;
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    size_t top = t->nvars;
    double *tan = workspace(t, top, &st);
    if (tan == NULL)
        return st;
    for (size_t j = 0; j < n; j++)
        if (xs[j].idx != CR_VAR_CONST)
            tan[xs[j].idx] += xdot[j];
    st = cr__array_sweep_begin(t, 1, false);
    if (st == CR_OK)
        st = seed_arrays(t, as, na, adot);
    /* every record: array records after the last scalar variable make array outputs */
    if (st == CR_OK)
        st = cr__sweep_forward(t, tan, 1, (size_t)-1, false);
    for (size_t j = 0; j < m && st == CR_OK; j++)
        ydot[j] = ys[j].idx == CR_VAR_CONST ? 0.0 : tan[ys[j].idx];
    for (size_t j = 0; j < nb && st == CR_OK; j++) {
        cr_tangent v = bs[j].idx == CR_VAR_CONST ? cr_tangent_zero() : t->asw->tan[bs[j].idx];
        st = cr__array_write_out(t, who, "output tangent array", j, v, bdot[j], bs[j].a);
    }
    cr__array_sweep_end(t);
    cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_ahvp(cr_tape *t, cr_var y, const cr_var *xs, size_t n, const double *v,
                       double *hv, const cr_avar *as, size_t na, const cr_array *const *av,
                       cr_array *const *ahv)
{
    const char *who = "cr_tape_ahvp";
    if (t == NULL)
        return CR_EINVAL;
    if (cr__tape_misused(t))
        return CR_EMISUSE;
    if (t->status != CR_OK)
        return t->status;
    if (!(t->flags & CR_TAPE_SECOND_ORDER))
        return cr_ctx_error(t->ctx, CR_EMISUSE,
                            "%s: the tape was not created with CR_TAPE_SECOND_ORDER", who);
    if ((n > 0 && (xs == NULL || v == NULL || hv == NULL)) ||
        (na > 0 && (as == NULL || av == NULL || ahv == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s is NULL", who,
                            n > 0 && xs == NULL    ? "xs"
                            : n > 0 && v == NULL   ? "v"
                            : n > 0 && hv == NULL  ? "hv"
                            : na > 0 && as == NULL ? "as"
                            : na > 0 && av == NULL ? "av"
                                                   : "ahv");
    cr_status st;
    if ((st = cr__check_vars(t, who, &y, 1, "output")) != CR_OK ||
        (st = cr__check_vars(t, who, xs, n, "input")) != CR_OK ||
        (st = cr__check_avars(t, who, as, na, "array input")) != CR_OK ||
        (st = cr__check_finite(t, who, v, n, "direction")) != CR_OK)
        return st;
    for (size_t j = 0; j < na; j++)
        if ((st = check_dir(t, who, "direction array", j, av[j], as[j].a)) != CR_OK)
            return st;
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    size_t top = y.idx == CR_VAR_CONST ? 0 : cr__sweep_top(t, (size_t)y.idx + 1);
    double *adj = workspace(t, top, &st), *tan = NULL, *adjd = NULL;
    if (adj != NULL)
        tan = workspace(t, top, &st);
    if (tan != NULL)
        adjd = workspace(t, top, &st);
    if (adjd == NULL) {
        cr_arena_rewind(t->arena, mk);
        return st;
    }
    st = cr__array_sweep_begin(t, 1, true);
    if (top > 0) {
        for (size_t j = 0; j < n; j++)
            if (xs[j].idx != CR_VAR_CONST && xs[j].idx < top)
                tan[xs[j].idx] += v[j];
        if (st == CR_OK)
            st = seed_arrays(t, as, na, av);
        if (st == CR_OK)
            st = cr__sweep_forward(t, tan, 1, top, true);
        adj[y.idx] = 1.0;
        if (st == CR_OK)
            st = cr__sweep_second(t, adj, adjd, tan, 1, top);
    }
    for (size_t j = 0; j < n && st == CR_OK; j++)
        hv[j] = xs[j].idx == CR_VAR_CONST || xs[j].idx >= top ? 0.0 : adjd[xs[j].idx];
    for (size_t j = 0; j < na && st == CR_OK; j++) {
        cr_tangent a = as[j].idx == CR_VAR_CONST ? cr_tangent_zero() : t->asw->accd[as[j].idx];
        st = cr__array_write_out(t, who, "result array", j, a, ahv[j], as[j].a);
    }
    cr__array_sweep_end(t);
    cr_arena_rewind(t->arena, mk);
    return st;
}

/* For the prepared Hessian-vector products of array inputs (prepared_hvp.c). */
cr_status cr__array_check_dir(cr_tape *t, const char *who, const char *what, size_t j,
                              const cr_array *v, const cr_array *like)
{
    return check_dir(t, who, what, j, v, like);
}

cr_status cr__array_seed(cr_tape *t, const cr_avar *as, size_t na, const cr_array *const *v)
{
    return seed_arrays(t, as, na, v);
}
