/*
 * The array variables of a tape (array_slots.c): the slots that hold their values and
 * shadows (cotangent accumulators), cr_tape_array_input, the cr_targ constructors, add!! into
 * a shadow, and the per-sweep state of forward and second-order sweeps (the slots' tangents
 * and their shadows' derivatives). Below every array node kind (array calls, fused kernels,
 * custom operations) and the sweeps, which reach the kinds through their cr__anode_ops.
 */
#include <string.h>

#include "../rules/array_rule_impl.h"
#include "tape_impl.h"

/* ---- Arguments and array variables ---------------------------------------------------------- */

cr_targ cr_targ_var(cr_var x)
{
    return cr__targ_var(x);
}

cr_targ cr_targ_arr(cr_avar x)
{
    return cr__targ_arr(x);
}

cr_targ cr_targ_value(cr_value v)
{
    return cr__targ_value(v);
}

/* Room for one more array slot: the tape's own few (a reset points the table at them; a
 * new tape has none yet), then a table in the arena four times as large. Out of line: a
 * small recording never takes it after its first reset. */
NOINLINE cr_status cr__more_aslots(cr_tape *t)
{
    if (t->avars.cap == 0) {
        t->avars.slots = t->avars.few;
        t->avars.cap = CR__ASLOT_FEW;
        return CR_OK;
    }
    if (t->avars.cap >= CR__ASLOT_BIT / 4) /* before 4 * avars.cap could wrap a uint32_t */
        return cr__tape_fail(t, CR_EOVERFLOW, "tape: too many array variables");
    uint32_t cap = 4 * t->avars.cap;
    cr__aslot *s = cr_arena_alloc(t->arena, cap * sizeof *s, _Alignof(cr__aslot));
    if (s == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), "tape: array variables");
    if (t->avars.n)
        memcpy(s, t->avars.slots, t->avars.n * sizeof *s);
    t->avars.slots = s;
    t->avars.cap = cap;
    return CR_OK;
}

cr_status cr__array_slot(cr_tape *t, const cr_array *val, uint32_t *idx)
{
    return cr__new_aslot(t, val, false, idx);
}

cr_avar cr_tape_array_input(cr_tape *t, const cr_array *a)
{
    if ((t = cr__tape_or_current(t)) == NULL)
        return cr__bad_avar(a);
    return cr__array_input(t, a);
}

/* ---- Shadows --------------------------------------------------------------------------- */

/* A writable array cotangent sharing memory with the seed or with another cotangent of the
 * same pullback must not be mutated by add!!: give it to the accumulator read only. */
cr_status cr__guard_alias(cr_arena *arena, const cr_tangent *dy, cr_tangent *dx, size_t nx,
                          size_t j)
{
    cr_tangent *d = &dx[j];
    if (d->tag != CR_TAN_ARRAY || !(d->u.arr->flags & CR_ARRAY_WRITABLE))
        return CR_OK;
    bool shared = dy->tag == CR_TAN_ARRAY && dy->u.arr->data == d->u.arr->data;
    for (size_t k = 1; k < nx && !shared; k++)
        shared = k != j && dx[k].tag == CR_TAN_ARRAY && dx[k].u.arr->data == d->u.arr->data;
    if (!shared)
        return CR_OK;
    cr_array *v;
    cr_status st = cr__view_of(arena, d->u.arr, &v);
    if (st == CR_OK)
        d->u.arr = v;
    return st;
}

/* The caller's gradient array dest as a shadow add!! may write in place: dest itself when
 * the caller flagged it CR_ARRAY_WRITABLE, else a writable copy of its descriptor (same
 * memory). Made only when a generic pullback adds into the shadow: the kernels' reverse
 * steps write into dest->data directly. */
static cr_status writable_dest(cr_arena *arena, cr_array *g, cr_array **out)
{
    if (g->flags & CR_ARRAY_WRITABLE) {
        *out = g;
        return CR_OK;
    }
    /* Field by field: a struct copy compiles to a string instruction whose start-up costs
     * more than the fields; the dimensions as fixed-size copies (a few vector moves). */
    cr_array *d = cr_arena_alloc(arena, sizeof *d, _Alignof(cr_array));
    if (d == NULL)
        return CR__ALLOC_STATUS(arena);
    d->data = g->data;
    memcpy(d->shape, g->shape, sizeof d->shape);
    memcpy(d->strides, g->strides, sizeof d->strides);
    d->dtype = g->dtype;
    d->ndim = g->ndim;
    d->structure = g->structure;
    d->flags = g->flags | CR_ARRAY_WRITABLE;
    *out = d;
    return CR_OK;
}

/* Add a cotangent into an array variable's shadow. The first one is adopted when the rule
 * handed over a buffer nobody else holds (a writable dense array of the work dtype);
 * otherwise the shadow is a zeroed buffer the sweep owns, and add!! writes into it in place
 * (an InplaceableThunk through its add!, without materialising its value). */
cr_status cr__shadow_accum(cr_arena *arena, cr__aslot *s, cr_tangent d)
{
    if (cr__tis_zero(d))
        return CR_OK;
    if (s->dest != NULL) {
        /* The caller's gradient array is the shadow (see cr__gradient_dests): zeroed when
         * it is fresh, given a writable descriptor for add!! (once). */
        if (cr__tis_zero(s->acc)) {
            memset(s->dest->data, 0, cr_array_numel(s->dest) * sizeof(double));
            s->acc = cr__tarray(s->dest);
        }
        if (s->acc.tag == CR_TAN_ARRAY && s->acc.u.arr == s->dest) {
            cr_array *w = NULL;
            cr_status st = writable_dest(arena, s->dest, &w);
            if (st != CR_OK)
                return st;
            s->acc = cr__tarray(w);
        }
    }
    if (cr__tis_zero(s->acc)) {
        const cr_array *v = s->val;
        cr_dtype wdt = cr__work((cr_dtype)v->dtype);
        if (d.tag == CR_TAN_ARRAY && (d.u.arr->flags & CR_ARRAY_WRITABLE) &&
            d.u.arr->dtype == (uint8_t)v->dtype && cr__is_contig_dense(d.u.arr) &&
            (v->dtype == CR_DT_F32 || d.u.arr->dtype == (uint8_t)wdt)) {
            s->acc = d;
            return CR_OK;
        }
        if (d.tag == CR_TAN_ARRAY || cr_tangent_is_thunk(d)) {
            cr_array *buf;
            cr_status st = cr__new(arena, v->dtype == CR_DT_F32 ? CR_DT_F32 : wdt, v->ndim,
                                   v->shape, true, &buf);
            if (st != CR_OK)
                return st;
            s->acc = cr__tarray(buf);
        }
    }
    return cr_tangent_accum(arena, s->acc, d, &s->acc);
}

/* ---- The state of forward and second-order sweeps ------------------------------------------ */

cr_status cr__array_sweep_begin(cr_tape *t, size_t k, bool second)
{
    size_t n = (size_t)t->avars.n * k;
    cr__asweep *w = cr_arena_alloc(t->arena, sizeof *w, _Alignof(cr__asweep));
    cr_tangent *tan =
        w == NULL ? NULL : cr_arena_calloc(t->arena, n ? n : 1, sizeof *tan, _Alignof(cr_tangent));
    cr_tangent *accd = tan == NULL || !second ? NULL
                                              : cr_arena_calloc(t->arena, n ? n : 1, sizeof *accd,
                                                                _Alignof(cr_tangent));
    if (tan == NULL || (second && accd == NULL))
        return cr__tape_fail(t, CR__ALLOC_STATUS(t->arena),
                             "tape: no room for the tangents of %u array variables",
                             (unsigned)t->avars.n);
    /* calloc'd tangents are ZeroTangent (tag 0) */
    w->k = k;
    w->tan = tan;
    w->accd = accd;
    t->fwd.asw = w;
    if (second)
        cr__array_clear(t);
    return CR_OK;
}

void cr__array_sweep_end(cr_tape *t)
{
    if (t->fwd.asw != NULL && t->fwd.asw->accd != NULL)
        cr__array_clear(t);
    t->fwd.asw = NULL;
}

cr_tangent *cr__asweep_slot(cr_tape *t, uint32_t slot, size_t d, bool deriv)
{
    cr__asweep *w = t->fwd.asw;
    if (w == NULL || (deriv && w->accd == NULL))
        return NULL;
    return &(deriv ? w->accd : w->tan)[(size_t)slot * w->k + d];
}
