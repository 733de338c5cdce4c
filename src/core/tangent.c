/*
 * Tangent constructors, structural tangents (absent fields, canonicalize), memoised
 * thunks and NotImplemented.
 */
#include <string.h>

#include "core_impl.h"

enum { THUNK_PENDING = 0, THUNK_RUNNING = 1, THUNK_DONE = 2, THUNK_FAILED = 3 };

cr_tangent cr_tangent_zero(void)
{
    cr_tangent t = {.tag = CR_TAN_ZERO};
    return t;
}

cr_tangent cr_tangent_none(void)
{
    cr_tangent t = {.tag = CR_TAN_NONE};
    return t;
}

cr_tangent cr_tangent_f64(double x)
{
    cr_tangent t = {.tag = CR_TAN_F64, .u.f64 = x};
    return t;
}

cr_tangent cr_tangent_f32(float x)
{
    cr_tangent t = {.tag = CR_TAN_F32, .u.f32 = x};
    return t;
}

cr_tangent cr_tangent_c128(cr_complex z)
{
    cr_tangent t = {.tag = CR_TAN_C128, .u.c128 = z};
    return t;
}

cr_tangent cr_tangent_array(cr_array *arr)
{
    cr_tangent t = {.tag = CR_TAN_ARRAY, .u.arr = arr};
    return t;
}

cr_tangent cr_tangent_notimpl(const cr_notimpl *info)
{
    cr_tangent t = {.tag = CR_TAN_NOTIMPL, .u.ni = info};
    return t;
}

cr_status cr_tangent_not_implemented(cr_arena *arena, const char *file, int line, const char *msg,
                                     cr_tangent *out)
{
    *out = cr_tangent_zero();
    cr_notimpl *ni = cr_arena_alloc(arena, sizeof *ni, _Alignof(cr_notimpl));
    if (ni == NULL)
        return CR__ALLOC_STATUS(arena);
    ni->file = cr_arena_strdup(arena, file != NULL ? file : "?");
    ni->msg = cr_arena_strdup(arena, msg != NULL ? msg : "");
    ni->line = line;
    if (ni->file == NULL || ni->msg == NULL)
        return CR__ALLOC_STATUS(arena);
    *out = cr_tangent_notimpl(ni);
    return CR_OK;
}

cr_tangent cr_tangent_struct_empty(const cr_type *type)
{
    cr_tangent t = {.tag = CR_TAN_STRUCT};
    t.u.s.type = type;
    t.u.s.fields = NULL;
    return t;
}

static cr_tangent *alloc_fields(cr_arena *arena, const char *who, size_t n, uint8_t fill)
{
    cr_tangent *f = cr__arena_array(arena, who, n, sizeof *f, _Alignof(cr_tangent));
    if (f == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        memset(&f[i], 0, sizeof f[i]);
        f[i].tag = fill;
    }
    return f;
}

cr_status cr_tangent_struct(cr_arena *arena, const cr_type *type, const char *const *names,
                            const cr_tangent *values, size_t n, cr_tangent *out)
{
    if (out == NULL || type == NULL || (n > 0 && values == NULL))
        return CR__FAIL(arena, CR_EINVAL, "cr_tangent_struct: NULL argument");
    *out = cr_tangent_zero();
    if (n > type->nfields)
        return CR__FAIL(arena, CR_EINVAL, "Tangent{%s}: %zu field%s given, type has %zu",
                        type->name, n, CR__S(n), type->nfields);
    cr_tangent *f = alloc_fields(arena, "cr_tangent_struct", type->nfields, CR_TAN_ABSENT);
    if (f == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < n; k++) {
        size_t i = k;
        if (names != NULL) {
            ptrdiff_t j = cr_type_field_index(type, names[k]);
            if (j < 0)
                return CR__FAIL(arena, CR_EINVAL, "Tangent{%s}: no field named '%s'", type->name,
                                names[k] != NULL ? names[k] : "(null)");
            i = (size_t)j;
        }
        if (f[i].tag != CR_TAN_ABSENT)
            return CR__FAIL(arena, CR_EINVAL, "Tangent{%s}: field %zu given twice", type->name, i);
        if (values[k].tag == CR_TAN_ABSENT)
            continue;
        f[i] = values[k];
    }
    *out = cr_tangent_struct_empty(type);
    out->u.s.fields = f;
    return CR_OK;
}

cr_tangent cr_tangent_field(cr_tangent t, size_t i)
{
    if (t.tag == CR_TAN_ZERO || t.tag == CR_TAN_NONE)
        return t;
    if (t.tag != CR_TAN_STRUCT || t.u.s.fields == NULL || i >= t.u.s.type->nfields ||
        t.u.s.fields[i].tag == CR_TAN_ABSENT)
        return cr_tangent_zero();
    return t.u.s.fields[i];
}

bool cr_tangent_field_present(cr_tangent t, size_t i)
{
    return t.tag == CR_TAN_STRUCT && t.u.s.fields != NULL && i < t.u.s.type->nfields &&
           t.u.s.fields[i].tag != CR_TAN_ABSENT;
}

cr_status cr_tangent_getfield(cr_tangent t, const char *name, cr_tangent *out)
{
    *out = cr_tangent_zero();
    if (t.tag == CR_TAN_ZERO || t.tag == CR_TAN_NONE) {
        *out = t;
        return CR_OK;
    }
    if (t.tag != CR_TAN_STRUCT)
        return CR_EINVAL;
    ptrdiff_t i = cr_type_field_index(t.u.s.type, name);
    if (i < 0)
        return CR_EINVAL;
    *out = cr_tangent_field(t, (size_t)i);
    return CR_OK;
}

cr_status cr_tangent_canonicalize(cr_arena *arena, cr_tangent t, cr_tangent *out)
{
    *out = t;
    if (t.tag != CR_TAN_STRUCT)
        return CR_OK;
    size_t n = t.u.s.type->nfields;
    cr_tangent *f = alloc_fields(arena, "cr_tangent_canonicalize", n, CR_TAN_ZERO);
    if (f == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < n; i++)
        f[i] = cr_tangent_field(t, i);
    out->u.s.fields = f;
    return CR_OK;
}

static cr_status make_thunk(cr_arena *arena, cr_thunk_fn fn, cr_thunk_add_fn add, void *env,
                            const char *name, cr_tangent *out)
{
    if (out == NULL || fn == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_tangent_thunk: NULL function");
    *out = cr_tangent_zero();
    cr_thunk *th = cr_arena_alloc(arena, sizeof *th, _Alignof(cr_thunk));
    if (th == NULL)
        return CR__ALLOC_STATUS(arena);
    memset(th, 0, sizeof *th);
    th->fn = fn;
    th->add = add;
    th->env = env;
    th->arena = arena;
    th->name = name != NULL ? name : "thunk";
    th->state = THUNK_PENDING;
    out->tag = CR_TAN_THUNK;
    out->u.thunk = th;
    return CR_OK;
}

cr_status cr_tangent_thunk(cr_arena *arena, cr_thunk_fn fn, void *env, const char *name,
                           cr_tangent *out)
{
    return make_thunk(arena, fn, NULL, env, name, out);
}

cr_status cr_tangent_inplaceable_thunk(cr_arena *arena, cr_thunk_fn fn, cr_thunk_add_fn add,
                                       void *env, const char *name, cr_tangent *out)
{
    if (add == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_tangent_inplaceable_thunk: add! is NULL");
    return make_thunk(arena, fn, add, env, name, out);
}

bool cr_tangent_is_zero(cr_tangent t)
{
    return t.tag == CR_TAN_ZERO || t.tag == CR_TAN_NONE;
}

bool cr_tangent_is_thunk(cr_tangent t)
{
    return t.tag == CR_TAN_THUNK;
}

bool cr_tangent_is_inplaceable_thunk(cr_tangent t)
{
    return t.tag == CR_TAN_THUNK && t.u.thunk->add != NULL;
}

const char *cr_tag_name(cr_tag tag)
{
    switch (tag) {
    case CR_TAN_ZERO:
        return "ZeroTangent";
    case CR_TAN_NONE:
        return "NoTangent";
    case CR_TAN_F64:
        return "f64";
    case CR_TAN_F32:
        return "f32";
    case CR_TAN_C128:
        return "c128";
    case CR_TAN_ARRAY:
        return "array";
    case CR_TAN_STRUCT:
        return "Tangent";
    case CR_TAN_THUNK:
        return "Thunk";
    case CR_TAN_NOTIMPL:
        return "NotImplemented";
    case CR_TAN_ABSENT:
        return "absent";
    }
    return "?";
}

/* Whether distinct stored elements of a are distinct memory, so that `a .+= y` cannot
 * add twice into one place (a zero stride, as in a broadcast view, or overlapping
 * strides). A sufficient test: with the dimensions sorted by |stride|, each stride must
 * step past everything the smaller ones reach. Uncertain cases answer false, as
 * accumulation.jl asks. */
static bool storage_is_disjoint(const cr_array *a)
{
    size_t ext[CR_ARRAY_MAX_DIMS], str[CR_ARRAY_MAX_DIMS];
    size_t nd = 0;
    size_t ndim = a->structure == CR_MAT_DIAGONAL ? 1 : a->ndim;
    if (cr_array_numel(a) == 0)
        return true;
    for (size_t d = 0; d < ndim; d++) {
        if (a->shape[d] <= 1)
            continue;
        ptrdiff_t s = a->strides[d];
        ext[nd] = a->shape[d];
        str[nd] = s < 0 ? (size_t)0 - (size_t)s : (size_t)s;
        nd++;
    }
    for (size_t i = 1; i < nd; i++)
        for (size_t j = i; j > 0 && str[j - 1] > str[j]; j--) {
            size_t ts = str[j], te = ext[j];
            str[j] = str[j - 1];
            ext[j] = ext[j - 1];
            str[j - 1] = ts;
            ext[j - 1] = te;
        }
    size_t span = 0; /* largest offset the smaller dimensions reach */
    for (size_t i = 0; i < nd; i++) {
        size_t reach;
        /* A caller's descriptor may claim extents and strides whose span wraps: uncertain. */
        if (str[i] <= span || !cr__mul_size(str[i], ext[i] - 1, &reach) ||
            !cr__add_size(span, reach, &span))
            return false;
    }
    return true;
}

bool cr_tangent_is_inplaceable_destination(cr_tangent t)
{
    return t.tag == CR_TAN_ARRAY && t.u.arr != NULL && (t.u.arr->flags & CR_ARRAY_WRITABLE) &&
           cr_dtype_is_float((cr_dtype)t.u.arr->dtype) && storage_is_disjoint(t.u.arr);
}

static cr_status unthunk_one(cr_thunk *th, cr_tangent *out)
{
    switch (th->state) {
    case THUNK_DONE:
        *out = th->value;
        return CR_OK;
    case THUNK_FAILED: /* said again: the first failure's message may have been replaced */
        return CR__FAIL(th->arena, th->status, "thunk '%s' failed when first evaluated (%s)",
                        th->name, cr_status_str(th->status));
    case THUNK_RUNNING:
        return CR__FAIL(th->arena, CR_EMISUSE, "thunk '%s' depends on its own value", th->name);
    default:
        break;
    }
    th->state = THUNK_RUNNING;
    cr_tangent v = cr_tangent_zero();
    cr_status st = th->fn(th->arena, &v, th->env);
    /* A value that is itself a thunk is resolved while this one is still running, so a
     * cycle of thunks is reported as CR_EMISUSE instead of looping forever. */
    while (st == CR_OK && v.tag == CR_TAN_THUNK)
        st = unthunk_one(v.u.thunk, &v);
    if (st != CR_OK) {
        th->state = THUNK_FAILED;
        th->status = st;
        return st;
    }
    th->value = v;
    th->status = CR_OK;
    th->state = THUNK_DONE;
    *out = v;
    return CR_OK;
}

cr_status cr_tangent_unthunk(cr_tangent t, cr_tangent *out)
{
    while (t.tag == CR_TAN_THUNK) {
        cr_status st = unthunk_one(t.u.thunk, &t);
        if (st != CR_OK) {
            *out = cr_tangent_zero();
            return st;
        }
    }
    *out = t;
    return CR_OK;
}
