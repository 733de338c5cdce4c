/*
 * Prepared gradients: a replay tape records f once, keeping with each operation its row,
 * which result it holds and its constants; a replay walks the records forwards, evaluates
 * each row again at the new values (writing the new partials into the records), checks
 * the recorded comparisons, then sweeps back. No call of f, no recording, no allocation.
 */
#include <string.h>

#include "tape_impl.h"

struct cr_prepared {
    cr_ctx *ctx;
    cr_tape *tape;
    size_t n;     /* inputs */
    cr_var y;     /* the output */
    cr_var *xs;   /* the input variables (n, at least 1) */
    double *vals; /* workspace: every variable's value, then the adjoints */
    double *adj;
    size_t nws; /* doubles of workspace */
};

void cr_prepared_free(cr_prepared *p)
{
    if (p == NULL)
        return;
    cr_tape_free(p->tape);
    cr_ctx_dealloc(p->ctx, p->xs, (p->n ? p->n : 1) * sizeof *p->xs);
    cr_ctx_dealloc(p->ctx, p->vals, p->nws * sizeof *p->vals);
    cr_ctx_dealloc(p->ctx, p, sizeof *p);
}

cr_status cr_prepare_gradient(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                              const double *x, size_t n, cr_prepared **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "cr_prepare_gradient: out is NULL");
    *out = NULL;
    if (ctx == NULL)
        return CR_EINVAL;
    if (f == NULL || (n > 0 && x == NULL))
        return cr_ctx_error(ctx, CR_EINVAL, "cr_prepare_gradient: NULL function or inputs");
    cr_prepared *p = cr_ctx_alloc(ctx, sizeof *p);
    if (p == NULL)
        return CR_ENOMEM;
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->n = n;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    cr_status st = cr_tape_new(ctx, &tp, &p->tape);
    if (st == CR_OK) {
        cr__tape_make_replay(p->tape);
        p->xs = cr_ctx_alloc(ctx, (n ? n : 1) * sizeof *p->xs);
        if (p->xs == NULL)
            st = CR_ENOMEM;
    }
    if (st == CR_OK) {
        st = cr_tape_record(p->tape, f, env, x, n, p->xs, &p->y, 1);
        if (st != CR_OK && cr_tape_status(p->tape) != CR_OK)
            cr_ctx_error(ctx, st, "%s", cr_tape_errmsg(p->tape));
    }
    if (st == CR_OK && p->tape->ninputs != n)
        st = cr_ctx_error(ctx, CR_EINVAL,
                          "cr_prepare_gradient: the function made %zu inputs of its own; a "
                          "prepared gradient replays with the given inputs only",
                          p->tape->ninputs - n);
    if (st == CR_OK) {
        p->nws = 2 * (size_t)(p->tape->nvars ? p->tape->nvars : 1);
        p->vals = cr_ctx_alloc(ctx, p->nws * sizeof *p->vals);
        if (p->vals == NULL)
            st = CR_ENOMEM;
        else
            p->adj = p->vals + p->nws / 2;
    }
    if (st != CR_OK) {
        if (p->vals == NULL)
            p->nws = 0;
        cr_prepared_free(p);
        return st;
    }
    *out = p;
    return CR_OK;
}

static bool compare(cr_cmp op, double a, double b)
{
    switch (op) {
    case CR_CMP_LT:
        return a < b;
    case CR_CMP_LE:
        return a <= b;
    case CR_CMP_GT:
        return a > b;
    case CR_CMP_GE:
        return a >= b;
    case CR_CMP_EQ:
        return a == b;
    default:
        return a != b;
    }
}

static const char *const k_cmp_names[] = {"<", "<=", ">", ">=", "==", "!="};

/* Walk the records forwards: new values, new partials, comparisons checked. */
static cr_status replay(cr_prepared *p, const double *x)
{
    cr_tape *t = p->tape;
    double *v = p->vals;
    size_t i = 0, kin = 0, rec = 0;
    for (cr__chunk *c = t->first; c != NULL; c = c->next) {
        cr__word *w = c->base;
        cr__word *end = c == t->chunk ? t->cur : c->end;
        while (w < end) {
            uint64_t h = w[0].u;
            const cr__rinfo *info = w[1].cp;
            cr__word *pl = w + 2;
            unsigned kind = hdr_kind(h);
            switch (kind) {
            case K_INPUT:
                v[i++] = x[kin++];
                break;
            case K_GUARD: {
                double a = info->map[0] < 0 ? info->c[0] : v[hdr_a(h)];
                double b = info->map[1] < 0 ? info->c[1] : v[hdr_b(h)];
                if (compare((cr_cmp)info->o, a, b) != info->outcome)
                    return cr_ctx_error(
                        p->ctx, CR_EDOMAIN,
                        "prepared gradient: the comparison %g %s %g (record %zu) was %s when "
                        "recorded and is %s at these inputs: the recording does not describe "
                        "the function here; prepare it again at these inputs",
                        a, k_cmp_names[info->o <= 5 ? info->o : 5], b, rec,
                        info->outcome ? "true" : "false", info->outcome ? "false" : "true");
                break;
            }
            case K_UNARY:
            case K_BINARY:
            case K_NARY: {
                size_t m = kind == K_UNARY ? 1 : kind == K_BINARY ? 2 : hdr_a(h);
                uint32_t ops[CR_SCALAR_MAX_IN];
                if (kind == K_NARY) {
                    for (size_t j = 0; j < m; j++) {
                        uint64_t u = pl[m + j / 2].u;
                        ops[j] = (uint32_t)((j & 1) ? (u >> 32) : (u & 0xFFFFFFFFu));
                    }
                } else {
                    ops[0] = hdr_a(h);
                    ops[1] = hdr_b(h);
                }
                const cr_scalar_rule *row = info->row;
                size_t nin = info->nin;
                double xin[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT];
                double D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
                for (size_t j = 0; j < nin; j++)
                    xin[j] = info->map[j] < 0 ? info->c[j] : v[ops[info->map[j]]];
                row->f64(xin, Y, D);
                v[i++] = Y[info->o];
                for (size_t q = 0; q < m; q++)
                    pl[q].d = 0.0;
                for (size_t j = 0; j < nin; j++)
                    if (info->map[j] >= 0)
                        pl[info->map[j]].d += D[info->o * nin + j];
                break;
            }
            default:
                return cr_ctx_error(p->ctx, CR_EINVAL,
                                    "prepared gradient: record %zu (kind %u) cannot be replayed",
                                    rec, kind);
            }
            w += t->pre + rec_words(h);
            rec++;
        }
    }
    return CR_OK;
}

cr_status cr_prepared_value_and_gradient(cr_prepared *p, const double *x, size_t n, double *y,
                                         double *grad)
{
    if (p == NULL)
        return CR_EINVAL;
    if ((n > 0 && (x == NULL || grad == NULL)))
        return cr_ctx_error(p->ctx, CR_EINVAL, "cr_prepared_value_and_gradient: NULL x or grad");
    if (n != p->n)
        return cr_ctx_error(p->ctx, CR_ESHAPE,
                            "prepared gradient: prepared for %zu inputs, %zu given", p->n, n);
    if (p->y.idx == CR_VAR_CONST) {
        if (y != NULL)
            *y = p->y.v;
        memset(grad, 0, n * sizeof *grad);
        return CR_OK;
    }
    /* The partials in the records are overwritten by the replay: a failed replay (a
     * comparison that changed) leaves records of two points; the next replay rewrites all
     * of them before any sweep, so the prepared gradient stays usable. */
    cr_status st = replay(p, x);
    if (st != CR_OK)
        return st;
    size_t top = (size_t)p->y.idx + 1;
    memset(p->adj, 0, top * sizeof *p->adj);
    p->adj[p->y.idx] = 1.0;
    st = cr__sweep_reverse(p->tape, p->adj, top);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        grad[j] = p->xs[j].idx < top ? p->adj[p->xs[j].idx] : 0.0;
    if (y != NULL)
        *y = p->vals[p->y.idx];
    return CR_OK;
}
