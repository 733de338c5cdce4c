/*
 * ChainRulesCore's MutableTangent: a structural tangent whose field list is its own and is
 * updated in place (setproperty!), so that every copy of the cr_tangent, like every
 * reference to a Julia MutableTangent, sees the change. The algebra reads it as any
 * structural tangent; only these functions write into it.
 */
#include <string.h>

#include "core_impl.h"

/* Whether a tangent can sit in a field of kind k (and, for a struct field, type ft). */
static bool fits_field(cr_tangent v, cr_kind k, const cr_type *ft)
{
    switch ((cr_tag)v.tag) {
    case CR_TAN_ZERO:
    case CR_TAN_NONE:
        return true;
    case CR_TAN_THUNK:
    case CR_TAN_NOTIMPL:
        return k == CR_KIND_F64 || k == CR_KIND_F32 || k == CR_KIND_C128 || k == CR_KIND_ARRAY ||
               k == CR_KIND_STRUCT;
    case CR_TAN_F64:
    case CR_TAN_F32:
        return k == CR_KIND_F64 || k == CR_KIND_F32 || k == CR_KIND_C128;
    case CR_TAN_C128:
        return k == CR_KIND_C128;
    case CR_TAN_ARRAY:
        return k == CR_KIND_ARRAY;
    case CR_TAN_STRUCT:
        return k == CR_KIND_STRUCT && v.u.s.type == ft;
    default:
        return false;
    }
}

/* mt is a MutableTangent (a structural tangent with a field list); who names the caller. */
static cr_status check_mutable(cr_arena *arena, const char *who, cr_tangent mt)
{
    if (mt.tag != CR_TAN_STRUCT || mt.u.s.type == NULL)
        return CR__FAIL(arena, CR_ETANGENT, "%s: a %s is not a MutableTangent", who,
                        cr_tag_name((cr_tag)mt.tag));
    if (mt.u.s.fields == NULL)
        return CR__FAIL(arena, CR_ETANGENT,
                        "%s: Tangent{%s} has no field list to write into (an all-absent "
                        "Tangent, not a MutableTangent)",
                        who, mt.u.s.type->name);
    return CR_OK;
}

static cr_status check_value(cr_arena *arena, const char *who, cr_tangent mt, size_t i,
                             cr_tangent v)
{
    const cr_type *type = mt.u.s.type;
    if (i >= type->nfields)
        return CR__FAIL(arena, CR_EINVAL, "%s: field %zu of %s, which has %zu field%s", who, i,
                        type->name, type->nfields, CR__S(type->nfields));
    const cr_field *f = &type->fields[i];
    if (!fits_field(v, f->kind, f->type))
        return CR__FAIL(arena, CR_ETANGENT, "%s: a %s tangent for the %s field '%s' of %s", who,
                        v.tag == CR_TAN_STRUCT && v.u.s.type ? v.u.s.type->name
                                                             : cr_tag_name((cr_tag)v.tag),
                        cr_kind_name(f->kind), f->name ? f->name : "(tuple element)", type->name);
    return CR_OK;
}

/* v may be written into field i of the MutableTangent mt (check_mutable, then check_value). */
static cr_status check_field_write(cr_arena *arena, const char *who, cr_tangent mt, size_t i,
                                   cr_tangent v)
{
    cr_status st = check_mutable(arena, who, mt);
    return st != CR_OK ? st : check_value(arena, who, mt, i, v);
}

cr_status cr_mutable_tangent(cr_arena *arena, const cr_type *type, const char *const *names,
                             const cr_tangent *values, size_t n, cr_tangent *out)
{
    if (out == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_mutable_tangent: NULL out");
    *out = cr_tangent_zero();
    cr_tangent t;
    cr_status st = cr_tangent_struct(arena, type, names, values, n, &t);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < type->nfields; i++) {
        if (t.u.s.fields[i].tag == CR_TAN_ABSENT) {
            t.u.s.fields[i] = cr_tangent_zero();
            continue;
        }
        if ((st = check_value(arena, "MutableTangent", t, i, t.u.s.fields[i])) != CR_OK)
            return st;
    }
    *out = t;
    return CR_OK;
}

cr_status cr_mutable_tangent_zero_of(cr_arena *arena, const cr_value *primal, cr_tangent *out)
{
    if (primal == NULL || out == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_mutable_tangent_zero_of: NULL argument");
    *out = cr_tangent_zero();
    if (primal->kind != CR_KIND_STRUCT || primal->u.obj.type == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_mutable_tangent_zero_of: a %s is not a struct",
                        cr_kind_name(primal->kind));
    /* zero_of builds a new field list with every field present */
    cr_tangent t;
    cr_status st = cr_tangent_zero_of(arena, primal, &t);
    if (st != CR_OK)
        return st;
    if (t.tag != CR_TAN_STRUCT || t.u.s.fields == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_mutable_tangent_zero_of: %s has no fields",
                        primal->u.obj.type->name);
    *out = t;
    return CR_OK;
}

cr_status cr_mutable_tangent_setfield(cr_arena *arena, cr_tangent mt, size_t i, cr_tangent v)
{
    cr_status st = check_field_write(arena, "setproperty!", mt, i, v);
    if (st != CR_OK)
        return st;
    mt.u.s.fields[i] = v.tag == CR_TAN_ABSENT ? cr_tangent_zero() : v;
    return CR_OK;
}

cr_status cr_mutable_tangent_setproperty(cr_arena *arena, cr_tangent mt, const char *name,
                                         cr_tangent v)
{
    cr_status st = check_mutable(arena, "setproperty!", mt);
    if (st != CR_OK)
        return st;
    ptrdiff_t i = name != NULL ? cr_type_field_index(mt.u.s.type, name) : -1;
    if (i < 0)
        return CR__FAIL(arena, CR_EINVAL, "setproperty!: %s has no field '%s'", mt.u.s.type->name,
                        name != NULL ? name : "(null)");
    return cr_mutable_tangent_setfield(arena, mt, (size_t)i, v);
}

cr_status cr_mutable_tangent_accumfield(cr_arena *arena, cr_tangent mt, size_t i, cr_tangent v)
{
    cr_status st = check_field_write(arena, "MutableTangent accumulation", mt, i, v);
    if (st != CR_OK)
        return st;
    cr_tangent sum;
    st = cr_tangent_accum(arena, cr_tangent_field(mt, i), v, &sum);
    if (st != CR_OK)
        return st;
    mt.u.s.fields[i] = sum;
    return CR_OK;
}

cr_status cr_mutable_tangent_assign(cr_arena *arena, cr_tangent mt, cr_tangent t)
{
    cr_status st = check_mutable(arena, "MutableTangent assignment", mt);
    if (st != CR_OK)
        return st;
    if (t.tag == CR_TAN_THUNK && (st = cr_tangent_unthunk(t, &t)) != CR_OK)
        return st;
    const cr_type *type = mt.u.s.type;
    if (t.tag == CR_TAN_ZERO || t.tag == CR_TAN_NONE) {
        for (size_t i = 0; i < type->nfields; i++)
            mt.u.s.fields[i] = t;
        return CR_OK;
    }
    if (t.tag != CR_TAN_STRUCT || t.u.s.type != type)
        return CR__FAIL(arena, CR_ETANGENT, "MutableTangent assignment: a %s for Tangent{%s}",
                        t.tag == CR_TAN_STRUCT && t.u.s.type ? t.u.s.type->name
                                                             : cr_tag_name((cr_tag)t.tag),
                        type->name);
    if (t.u.s.fields == mt.u.s.fields)
        return CR_OK;
    for (size_t i = 0; i < type->nfields; i++)
        if ((st = check_value(arena, "MutableTangent assignment", mt, i, cr_tangent_field(t, i))) !=
            CR_OK)
            return st;
    for (size_t i = 0; i < type->nfields; i++)
        mt.u.s.fields[i] = cr_tangent_field(t, i);
    return CR_OK;
}
