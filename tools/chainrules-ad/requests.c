/* chainrules-ad: the work list of derivative functions, specialised by activity. */
#include <string.h>

#include "requests.h"

typedef struct req {
    ad_func *f;
    uint64_t mask;
    ad_req_kind kind;
    bool done;
} req;

static req g_reqs[1024];
static int g_nreqs;

uint64_t ad_call_mask(const ad_expr *c)
{
    uint64_t m = 0;
    if (!c->callee)
        return 0;
    if (c->callee->prim && c->callee->prim->mpi)
        return ad_mpi_mask(c);
    for (int i = 0; i < c->nargs && i < c->callee->nparams && i < 64; i++) {
        const ad_var *p = c->callee->params[i];
        if (!ad_type_has_real(p->type))
            continue;
        const ad_expr *a = c->args[i];
        bool act;
        if (ad_type_is_real(p->type)) {
            act = a->active;
        } else {
            const ad_var *v = ad_root(a);
            act = v && v->active;
        }
        if (act)
            m |= (uint64_t)1 << i;
    }
    return m;
}

const char *ad_request(ad_unit *u, ad_func *f, uint64_t mask, ad_req_kind kind)
{
    (void)u;
    for (int i = 0; i < g_nreqs; i++)
        if (g_reqs[i].f == f && g_reqs[i].mask == mask && g_reqs[i].kind == kind)
            return ad_fmt("_%llx", (unsigned long long)mask);
    if (g_nreqs < (int)(sizeof g_reqs / sizeof g_reqs[0]))
        g_reqs[g_nreqs++] = (req){f, mask, kind, false};
    return ad_fmt("_%llx", (unsigned long long)mask);
}

int ad_next_request(ad_func **f, uint64_t *mask, ad_req_kind *kind)
{
    for (int i = 0; i < g_nreqs; i++)
        if (!g_reqs[i].done) {
            g_reqs[i].done = true;
            *f = g_reqs[i].f;
            *mask = g_reqs[i].mask;
            *kind = g_reqs[i].kind;
            return 1;
        }
    return 0;
}
