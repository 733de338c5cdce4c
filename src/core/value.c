/*
 * Primal values and struct/tuple type descriptors.
 */
#include <string.h>

#include "core_impl.h"

cr_value cr_value_f64(double x)
{
    return (cr_value){.kind = CR_KIND_F64, .u.f64 = x};
}

cr_value cr_value_f32(float x)
{
    return (cr_value){.kind = CR_KIND_F32, .u.f32 = x};
}

cr_value cr_value_c128(cr_complex z)
{
    return (cr_value){.kind = CR_KIND_C128, .u.c128 = z};
}

cr_value cr_value_i64(int64_t i)
{
    return (cr_value){.kind = CR_KIND_I64, .u.i64 = i};
}

cr_value cr_value_bool(bool b)
{
    return (cr_value){.kind = CR_KIND_BOOL, .u.b = b};
}

cr_value cr_value_array(cr_array *arr)
{
    return (cr_value){.kind = CR_KIND_ARRAY, .u.arr = arr};
}

cr_value cr_value_struct(const cr_type *type, void *ptr)
{
    return (cr_value){.kind = CR_KIND_STRUCT, .u.obj = {.type = type, .ptr = ptr}};
}

cr_value cr_value_function(const struct cr_function *fn, void *self)
{
    return (cr_value){.kind = CR_KIND_FUNC, .u.func = {.fn = fn, .self = self}};
}

/* names[i], or "?" past the end of the n names. */
static const char *name_of(const char *const *names, size_t n, size_t i)
{
    return i < n ? names[i] : "?";
}

const char *cr_kind_name(cr_kind kind)
{
    static const char *const k_names[] = {"nothing", "f64",  "f32",   "c128",   "i64",
                                          "i32",     "bool", "array", "struct", "function"};
    return name_of(k_names, sizeof k_names / sizeof k_names[0], (size_t)kind);
}

/* The size of a number of kind k (f64, f32, c128, i64 or bool). */
static size_t number_size(cr_kind k)
{
    return k == CR_KIND_F64    ? sizeof(double)
           : k == CR_KIND_F32  ? sizeof(float)
           : k == CR_KIND_C128 ? sizeof(cr_complex)
           : k == CR_KIND_I64  ? sizeof(int64_t)
                               : sizeof(bool);
}

cr_status cr_type_field_value(const cr_type *type, void *obj, size_t i, cr_value *out)
{
    if (type == NULL || obj == NULL || out == NULL || i >= type->nfields)
        return CR_EINVAL;
    const cr_field *f = &type->fields[i];
    unsigned char *p = (unsigned char *)obj + f->offset;
    memset(out, 0, sizeof *out);
    out->kind = f->kind;
    switch (f->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32:
    case CR_KIND_C128:
    case CR_KIND_I64:
    case CR_KIND_BOOL: /* a number, read into the union (all its members start at 0) */
        memcpy(&out->u, p, number_size(f->kind));
        break;
    case CR_KIND_I32: {
        int v;
        memcpy(&v, p, sizeof v);
        out->u.i64 = v;
        break;
    }
    case CR_KIND_ARRAY:
        out->u.arr = (cr_array *)(void *)p;
        break;
    case CR_KIND_STRUCT:
        if (f->type == NULL)
            return CR_EINVAL;
        out->u.obj.type = f->type;
        out->u.obj.ptr = p;
        break;
    case CR_KIND_FUNC:
        memcpy(&out->u.func.fn, p, sizeof out->u.func.fn);
        out->u.func.self = NULL;
        break;
    case CR_KIND_NOTHING:
        break;
    default:
        return CR_EINVAL;
    }
    return CR_OK;
}

ptrdiff_t cr_type_field_index(const cr_type *type, const char *name)
{
    if (type == NULL || name == NULL)
        return -1;
    for (size_t i = 0; i < type->nfields; i++)
        if (type->fields[i].name != NULL && strcmp(type->fields[i].name, name) == 0)
            return (ptrdiff_t)i;
    return -1;
}
