/*
 * The layout of a struct type (cr_type) as the engine sees it: its real fields (scalar
 * variables) and array fields (array variables), counted and walked depth first; a struct's
 * real values read out of it, and a structural tangent built from, or flattened to, the
 * values of its real fields. Used by friendly tangents (friendly.c), closures' overlays
 * (rule_call.c) and rrule_via_ad (engine.c); depends on nothing else of the engine.
 */
#include <string.h>

#include "tape_impl.h"

static bool is_real(cr_kind k)
{
    return k == CR_KIND_F64 || k == CR_KIND_F32;
}

/* Whether a field of kind k is one of the group counted: the real fields (scalar
 * variables) or the array fields (array variables). */
bool cr__field_in_group(cr_kind k, bool arrays)
{
    return arrays ? k == CR_KIND_ARRAY : is_real(k);
}

size_t cr__type_fields(const cr_type *type, bool arrays)
{
    if (type == NULL)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        if (cr__field_in_group(fd->kind, arrays))
            n++;
        else if (fd->kind == CR_KIND_STRUCT)
            n += cr__type_fields(fd->type, arrays);
    }
    return n;
}

size_t cr_type_real_fields(const cr_type *type)
{
    return cr__type_fields(type, false);
}

size_t cr_type_array_fields(const cr_type *type)
{
    return cr__type_fields(type, true);
}

cr_status cr__type_check(cr_ctx *ctx, const cr_type *type)
{
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        if (fd->kind == CR_KIND_STRUCT) {
            if (fd->type == NULL)
                return cr_ctx_error(ctx, CR_EINVAL,
                                    "%s: field %zu is a struct without a descriptor", type->name,
                                    i);
            cr_status st = cr__type_check(ctx, fd->type);
            if (st != CR_OK)
                return st;
        }
    }
    return CR_OK;
}

/* The structural tangent of `type` from the real fields' gradient g and the array fields'
 * gradients ag (NULL: array fields are ZeroTangent), depth first from *k and *ka. */
cr_status cr__struct_tangent_walk(cr_arena *arena, const cr_type *type, const double *g, size_t *k,
                                  cr_array *const *ag, size_t *ka, cr_tangent *out)
{
    cr_tangent *f = cr_arena_alloc(arena, (type->nfields ? type->nfields : 1) * sizeof *f,
                                   _Alignof(cr_tangent));
    if (f == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        switch (fd->kind) {
        case CR_KIND_F64:
            f[i] = cr_tangent_f64(g[(*k)++]);
            break;
        case CR_KIND_F32:
            f[i] = cr_tangent_f32((float)g[(*k)++]);
            break;
        case CR_KIND_I64:
        case CR_KIND_I32:
        case CR_KIND_BOOL:
            f[i] = cr_tangent_none();
            break;
        case CR_KIND_STRUCT: {
            cr_status st = cr__struct_tangent_walk(arena, fd->type, g, k, ag, ka, &f[i]);
            if (st != CR_OK)
                return st;
            break;
        }
        case CR_KIND_ARRAY:
            f[i] = ag != NULL ? cr_tangent_array(ag[(*ka)++]) : cr_tangent_zero();
            break;
        default:
            f[i] = cr_tangent_zero();
            break;
        }
    }
    return cr_tangent_struct(arena, type, NULL, f, type->nfields, out);
}

/* ---- Closures (engine.c, rule_call.c): a functor's fields as variables ------------------- */

static void values_walk(const cr_type *type, const unsigned char *obj, double *out, size_t *k)
{
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        const unsigned char *p = obj + fd->offset;
        if (fd->kind == CR_KIND_F64) {
            memcpy(&out[(*k)++], p, sizeof(double));
        } else if (fd->kind == CR_KIND_F32) {
            float v;
            memcpy(&v, p, sizeof v);
            out[(*k)++] = (double)v;
        } else if (fd->kind == CR_KIND_STRUCT) {
            values_walk(fd->type, p, out, k);
        }
    }
}

cr_status cr__struct_values(cr_ctx *ctx, const cr_type *type, const void *obj, double *out)
{
    cr_status st = cr__type_check(ctx, type);
    if (st != CR_OK)
        return st;
    size_t k = 0;
    values_walk(type, obj, out, &k);
    return CR_OK;
}

cr_status cr__struct_tangent(cr_arena *arena, const cr_type *type, const double *g, cr_tangent *out)
{
    size_t k = 0, ka = 0;
    return cr__struct_tangent_walk(arena, type, g, &k, NULL, &ka, out);
}

/* The real fields of a tangent of `type`, depth-first: a structural tangent's f64 / f32
 * fields (a zero or absent field gives 0), nested structs walked. */
static cr_status flatten_walk(cr_arena *arena, const char *who, const cr_type *type, cr_tangent d,
                              double *out, size_t *k)
{
    cr_status st = cr_tangent_unthunk(d, &d);
    if (st != CR_OK)
        return st;
    bool zero = cr_tangent_is_zero(d);
    if (!zero && d.tag != CR_TAN_STRUCT)
        return CR__FAIL(arena, CR_ETANGENT,
                        "%s: the tangent of the closure %s must be structural (got %s)", who,
                        type->name, cr_tag_name((cr_tag)d.tag));
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        if (fd->kind != CR_KIND_F64 && fd->kind != CR_KIND_F32 && fd->kind != CR_KIND_STRUCT)
            continue;
        cr_tangent fi = zero ? cr_tangent_zero() : cr_tangent_field(d, i);
        if (fd->kind == CR_KIND_STRUCT) {
            st = flatten_walk(arena, who, fd->type, fi, out, k);
            if (st != CR_OK)
                return st;
            continue;
        }
        out[*k] = 0.0;
        st = cr__accum_real(arena, who, fi, &out[*k]);
        if (st != CR_OK)
            return st;
        (*k)++;
    }
    return CR_OK;
}

cr_status cr__struct_tangent_values(cr_arena *arena, const char *who, const cr_type *type,
                                    cr_tangent d, double *out)
{
    size_t k = 0;
    return flatten_walk(arena, who, type, d, out, &k);
}
