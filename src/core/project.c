/*
 * ProjectTo: projectors built from primals (precision, shape, matrix structure, struct
 * layout) and applied to tangents; applied to a thunk they give a thunk.
 */
#include <string.h>

#include <chainrules/project.h>

#include "core_impl.h"

typedef enum { P_NONE, P_F64, P_F32, P_C128, P_ARRAY, P_STRUCT } pkind;

struct cr_project {
    pkind kind;
    /* P_ARRAY */
    cr_dtype dtype;
    uint8_t structure;
    size_t ndim;
    size_t shape[CR_ARRAY_MAX_DIMS];
    /* P_STRUCT */
    const cr_type *type;
    cr_project **fields;
};

static cr_status build(cr_arena *arena, const cr_value *v, cr_project **out)
{
    cr_project *p = cr_arena_calloc(arena, 1, sizeof *p, _Alignof(cr_project));
    if (p == NULL)
        return CR__ALLOC_STATUS(arena);
    *out = p;
    switch (v->kind) {
    case CR_KIND_F64:
        p->kind = P_F64;
        return CR_OK;
    case CR_KIND_F32:
        p->kind = P_F32;
        return CR_OK;
    case CR_KIND_C128:
        p->kind = P_C128;
        return CR_OK;
    case CR_KIND_ARRAY: {
        const cr_array *a = v->u.arr;
        if (a == NULL)
            return CR__FAIL(arena, CR_EINVAL, "ProjectTo: NULL array");
        if (!cr_dtype_is_float((cr_dtype)a->dtype)) {
            p->kind = P_NONE;
            return CR_OK;
        }
        p->kind = P_ARRAY;
        p->dtype = (cr_dtype)a->dtype;
        p->structure = a->structure;
        p->ndim = a->ndim;
        memcpy(p->shape, a->shape, sizeof p->shape);
        return CR_OK;
    }
    case CR_KIND_STRUCT: {
        const cr_type *type = v->u.obj.type;
        if (type == NULL || v->u.obj.ptr == NULL)
            return CR__FAIL(arena, CR_EINVAL, "ProjectTo: NULL struct or type");
        p->kind = P_STRUCT;
        p->type = type;
        p->fields = cr_arena_calloc(arena, type->nfields ? type->nfields : 1, sizeof *p->fields,
                                    _Alignof(cr_project *));
        if (p->fields == NULL)
            return CR__ALLOC_STATUS(arena);
        for (size_t i = 0; i < type->nfields; i++) {
            cr_value fv;
            if (cr_type_field_value(type, v->u.obj.ptr, i, &fv) != CR_OK)
                return CR__FAIL(arena, CR_EINVAL, "ProjectTo: type %s has a bad field %zu",
                                type->name, i);
            cr_status st = build(arena, &fv, &p->fields[i]);
            if (st != CR_OK)
                return st;
        }
        return CR_OK;
    }
    default:
        p->kind = P_NONE;
        return CR_OK;
    }
}

cr_status cr_project_new(cr_arena *arena, const cr_value *primal, cr_project **out)
{
    if (out == NULL || primal == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_project_new: NULL argument");
    *out = NULL;
    cr_project *p = NULL;
    cr_status st = build(arena, primal, &p);
    if (st == CR_OK)
        *out = p;
    return st;
}

static const char *pname(const cr_project *p)
{
    switch (p->kind) {
    case P_F64:
        return "f64";
    case P_F32:
        return "f32";
    case P_C128:
        return "c128";
    case P_ARRAY:
        return "array";
    case P_STRUCT:
        return p->type->name;
    default:
        return "NoTangent";
    }
}

static cr_status mismatch(cr_arena *arena, const cr_project *p, cr_tangent dx)
{
    return CR__FAIL(arena, CR_ETANGENT, "ProjectTo(%s): cannot project a %s tangent", pname(p),
                    cr_tag_name((cr_tag)dx.tag));
}

static bool shape_matches(const cr_project *p, const cr_array *a)
{
    if (a->ndim != p->ndim)
        return false;
    for (size_t d = 0; d < p->ndim; d++)
        if (a->shape[d] != p->shape[d])
            return false;
    return true;
}

static size_t pnumel(const cr_project *p)
{
    size_t n = 1;
    for (size_t d = 0; d < p->ndim; d++)
        n *= p->shape[d];
    return n;
}

/* Whether the array tangent dx (of p's shape) has the structure of p's tangents: p's own, or
 * for a unit triangle the triangle with a zero diagonal (the diagonal is not free). */
static bool struct_fits(const cr_project *p, const cr_array *dx)
{
    if (dx->structure != cr__matstruct_tangent(p->structure))
        return false;
    if (!cr__struct_unit(p->structure))
        return true;
    for (size_t i = 0; i < p->shape[0]; i++)
        if (cr__load(dx, (ptrdiff_t)i * dx->strides[0] + (ptrdiff_t)i * dx->strides[1]) != 0.0)
            return false;
    return true;
}

bool cr_project_fits(const cr_project *p, cr_tangent dx)
{
    if (dx.tag == CR_TAN_ZERO || dx.tag == CR_TAN_THUNK || dx.tag == CR_TAN_NOTIMPL)
        return true;
    switch (p->kind) {
    case P_NONE:
        return dx.tag == CR_TAN_NONE;
    case P_F64:
        return dx.tag == CR_TAN_F64 || dx.tag == CR_TAN_NONE;
    case P_F32:
        return dx.tag == CR_TAN_F32 || dx.tag == CR_TAN_NONE;
    case P_C128:
        return dx.tag == CR_TAN_C128 || dx.tag == CR_TAN_NONE;
    case P_ARRAY: {
        if (dx.tag == CR_TAN_NONE)
            return true;
        if (dx.tag != CR_TAN_ARRAY || !shape_matches(p, dx.u.arr) || dx.u.arr->dtype != p->dtype)
            return false;
        if (p->structure == CR_MAT_DENSE) /* a unit-tagged dx is projected to its dense value */
            return !cr__struct_unit(dx.u.arr->structure);
        return struct_fits(p, dx.u.arr);
    }
    case P_STRUCT:
        if (dx.tag == CR_TAN_NONE)
            return true;
        if (dx.tag != CR_TAN_STRUCT || dx.u.s.type != p->type)
            return false;
        for (size_t i = 0; i < p->type->nfields; i++)
            if (!cr_project_fits(p->fields[i], cr_tangent_field(dx, i)))
                return false;
        return true;
    }
    return false;
}

typedef struct project_thunk_env {
    const cr_project *p;
    cr_tangent inner;
} project_thunk_env;

static cr_status project_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    const project_thunk_env *e = env;
    cr_tangent v;
    cr_status st = cr_tangent_unthunk(e->inner, &v);
    return st != CR_OK ? st : cr_project_apply(arena, e->p, v, out);
}

/* dx, a thunk, projected when it is evaluated. */
static cr_status project_later(cr_arena *arena, const cr_project *p, cr_tangent dx, cr_tangent *out)
{
    project_thunk_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(project_thunk_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    *e = (project_thunk_env){p, dx};
    return cr_tangent_thunk(arena, project_thunk_fn, e, "ProjectTo", out);
}

/* The array tangent dx (of pnumel(p) elements) brought to p's shape, dtype, structure. */
static cr_status project_array(cr_arena *arena, const cr_project *p, const cr_array *dx,
                               cr_tangent *out)
{
    size_t n = pnumel(p);
    if (cr_array_numel(dx) != n) {
        return CR__FAIL(arena, CR_ESHAPE,
                        "ProjectTo(array): tangent has %zu element%s, primal has %zu",
                        cr_array_numel(dx), CR__S(cr_array_numel(dx)), n);
    }
    bool same_shape = shape_matches(p, dx);
    if (same_shape && dx->dtype == p->dtype &&
        (p->structure == CR_MAT_DENSE ? !cr__struct_unit(dx->structure) : struct_fits(p, dx))) {
        *out = cr_tangent_array((cr_array *)dx);
        return CR_OK;
    }
    if (same_shape && p->structure == CR_MAT_DENSE && dx->structure != CR_MAT_DENSE &&
        !cr__struct_unit(dx->structure)) {
        /* A structured tangent of a dense primal stays structured; only the dtype changes
         * (a unit triangle, whose diagonal is a constant, is read as its dense value below). */
        cr_array *r;
        cr_status st = cr_array_copy(arena, dx, &r);
        if (st != CR_OK)
            return st;
        if (r->dtype != p->dtype) {
            cr_array sv = cr__storage_view(r);
            cr_array *conv;
            st = cr__densify(arena, &sv, p->dtype, &conv);
            if (st != CR_OK)
                return st;
            r->data = conv->data;
            r->dtype = (uint8_t)p->dtype;
        }
        *out = cr_tangent_array(r);
        return CR_OK;
    }
    /* General case: read dx's logical elements in row-major order into p's shape. */
    cr_array *r;
    cr_status st = cr_array_new(arena, p->dtype, p->ndim, p->shape, &r);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < n; k++)
        cr__store(r, (ptrdiff_t)k, cr_array_get_linear(dx, k));
    if (p->structure == CR_MAT_DENSE) {
        *out = cr_tangent_array(r);
        return CR_OK;
    }
    size_t m = p->shape[0];
    bool herm = cr__struct_herm(p->structure);
    switch ((cr_matstruct)p->structure) {
    case CR_MAT_DIAGONAL: {
        /* Keep the diagonal: r's data already holds the dense matrix; compact it. */
        for (size_t i = 0; i < m; i++)
            cr__store(r, (ptrdiff_t)i, cr__load(r, (ptrdiff_t)(i * m + i)));
        r->strides[0] = 1;
        r->strides[1] = 0;
        break;
    }
    case CR_MAT_SYMMETRIC:
    case CR_MAT_HERMITIAN:
    case CR_MAT_SYMMETRIC_LOWER:
    case CR_MAT_HERMITIAN_LOWER:
    case CR_MAT_SYMTRIDIAGONAL: {
        /* (dx + dxᵀ)/2, or (dx + dxᴴ)/2 with a real diagonal; SymTridiagonal then keeps
         * its band (the off-diagonal symmetrised, as Julia's projection does). */
        for (size_t i = 0; i < m; i++)
            for (size_t j = i; j < m; j++) {
                cr_complex a = cr__load(r, (ptrdiff_t)(i * m + j));
                cr_complex b = cr__load(r, (ptrdiff_t)(j * m + i));
                cr_complex s = 0.5 * (a + (herm ? conj(b) : b));
                if (herm && i == j)
                    s = creal(s);
                if (p->structure == CR_MAT_SYMTRIDIAGONAL && j > i + 1)
                    s = 0.0;
                cr__store(r, (ptrdiff_t)(i * m + j), s);
                cr__store(r, (ptrdiff_t)(j * m + i), herm ? conj(s) : s);
            }
        break;
    }
    case CR_MAT_UPPER:
    case CR_MAT_LOWER:
    case CR_MAT_TRIDIAGONAL:
    case CR_MAT_BIDIAG_UPPER:
    case CR_MAT_BIDIAG_LOWER:
    case CR_MAT_UNIT_UPPER:
    case CR_MAT_UNIT_LOWER: {
        /* Keep the entries read; a unit diagonal is a constant, its tangent zero. */
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < m; j++) {
                size_t rr, cc;
                cr__rd how = cr__struct_read(p->structure, i, j, &rr, &cc);
                if (how == CR__RD_ZERO || how == CR__RD_ONE)
                    cr__store(r, (ptrdiff_t)(i * m + j), 0.0);
            }
        break;
    }
    case CR_MAT_DENSE:
        break;
    }
    r->structure = cr__matstruct_tangent(p->structure);
    *out = cr_tangent_array(r);
    return CR_OK;
}

/* Whether a projection returned its input itself (same tag, same value or object). */
static bool same_tangent(cr_tangent a, cr_tangent b)
{
    if (a.tag != b.tag)
        return false;
    switch ((cr_tag)a.tag) {
    case CR_TAN_F64:
        return memcmp(&a.u.f64, &b.u.f64, sizeof a.u.f64) == 0;
    case CR_TAN_F32:
        return memcmp(&a.u.f32, &b.u.f32, sizeof a.u.f32) == 0;
    case CR_TAN_C128:
        return memcmp(&a.u.c128, &b.u.c128, sizeof a.u.c128) == 0;
    case CR_TAN_ARRAY:
        return a.u.arr == b.u.arr;
    case CR_TAN_STRUCT:
        return a.u.s.type == b.u.s.type && a.u.s.fields == b.u.s.fields;
    case CR_TAN_THUNK:
        return a.u.thunk == b.u.thunk;
    case CR_TAN_NOTIMPL:
        return a.u.ni == b.u.ni;
    case CR_TAN_ZERO:
    case CR_TAN_NONE:
    case CR_TAN_ABSENT:
        return true;
    }
    return false;
}

cr_status cr_project_apply(cr_arena *arena, const cr_project *p, cr_tangent dx, cr_tangent *out)
{
    if (p == NULL || out == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_project_apply: NULL argument");
    if (p->kind == P_NONE) {
        *out = cr_tangent_none();
        return CR_OK;
    }
    /* The zeros and NotImplemented pass through (an absent field reads as a zero). */
    if (dx.tag == CR_TAN_ZERO || dx.tag == CR_TAN_NONE || dx.tag == CR_TAN_NOTIMPL ||
        dx.tag == CR_TAN_ABSENT) {
        *out = dx.tag == CR_TAN_ABSENT ? cr_tangent_zero() : dx;
        return CR_OK;
    }
    if (dx.tag == CR_TAN_THUNK)
        return project_later(arena, p, dx, out);
    switch (p->kind) {
    case P_F64:
    case P_F32:
    case P_C128: {
        cr_complex v;
        if (dx.tag == CR_TAN_F64)
            v = dx.u.f64;
        else if (dx.tag == CR_TAN_F32)
            v = (double)dx.u.f32;
        else if (dx.tag == CR_TAN_C128)
            v = dx.u.c128;
        else if (dx.tag == CR_TAN_ARRAY && cr_array_numel(dx.u.arr) == 1)
            v = cr_array_get_linear(dx.u.arr, 0);
        else
            return mismatch(arena, p, dx);
        if (p->kind == P_F64)
            *out = dx.tag == CR_TAN_F64 ? dx : cr_tangent_f64(creal(v));
        else if (p->kind == P_F32)
            *out = dx.tag == CR_TAN_F32 ? dx : cr_tangent_f32((float)creal(v));
        else
            *out = cr_tangent_c128(v);
        return CR_OK;
    }
    case P_ARRAY:
        if (dx.tag == CR_TAN_ARRAY)
            return project_array(arena, p, dx.u.arr, out);
        if ((dx.tag == CR_TAN_F64 || dx.tag == CR_TAN_F32 || dx.tag == CR_TAN_C128) &&
            pnumel(p) == 1) {
            cr_complex v = dx.tag == CR_TAN_F64   ? dx.u.f64
                           : dx.tag == CR_TAN_F32 ? (double)dx.u.f32
                                                  : dx.u.c128;
            cr_array one;
            cr_array_view_init(&one, &v, CR_DT_C128, 0, NULL, NULL);
            return project_array(arena, p, &one, out);
        }
        return mismatch(arena, p, dx);
    case P_STRUCT: {
        if (dx.tag != CR_TAN_STRUCT)
            return mismatch(arena, p, dx);
        if (dx.u.s.type != p->type)
            return CR__FAIL(arena, CR_ETANGENT, "ProjectTo(%s): tangent is a Tangent{%s}",
                            p->type->name, dx.u.s.type->name);
        if (dx.u.s.fields == NULL) {
            *out = dx;
            return CR_OK;
        }
        size_t n = p->type->nfields;
        cr_arena_mark m = cr_arena_get_mark(arena);
        cr_tangent *f =
            cr__arena_array(arena, "cr_project_apply", n, sizeof *f, _Alignof(cr_tangent));
        if (f == NULL)
            return CR__ALLOC_STATUS(arena);
        bool changed = false;
        for (size_t i = 0; i < n; i++) {
            if (dx.u.s.fields[i].tag == CR_TAN_ABSENT) {
                f[i] = dx.u.s.fields[i];
                continue;
            }
            cr_status st = cr_project_apply(arena, p->fields[i], dx.u.s.fields[i], &f[i]);
            if (st != CR_OK)
                return st;
            changed = changed || !same_tangent(f[i], dx.u.s.fields[i]);
        }
        if (!changed) {
            /* Every field already fitted: return dx itself, not a copy (project.h). Only
             * f was allocated since the mark (unchanged fields allocate nothing). */
            cr_arena_rewind(arena, m);
            *out = dx;
            return CR_OK;
        }
        *out = dx;
        out->u.s.fields = f;
        return CR_OK;
    }
    default:
        return mismatch(arena, p, dx);
    }
}

cr_status cr_project_tangent(cr_arena *arena, const cr_value *primal, cr_tangent dx,
                             cr_tangent *out)
{
    cr_project *p = NULL;
    cr_status st = cr_project_new(arena, primal, &p);
    if (st != CR_OK)
        return st;
    return cr_project_apply(arena, p, dx, out);
}
