/*
 * Flattening for the rule tester: values and tangents to real coordinate vectors and
 * back (what finite differences perturb), the dual coordinates of cotangents, the
 * logical components the testers compare, and hashes that detect mutation.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testing_impl.h"

/* ---- Coordinates of one array --------------------------------------------------------- */

#define NO_MIRROR SIZE_MAX

/* One coordinate of an array: logical element p (row-major linear index), its real or
 * imaginary part, the mirrored element q of a Symmetric/Hermitian matrix (or NO_MIRROR)
 * and the storage offset of p in a contiguous copy of the same structure. */
typedef struct acoord {
    size_t p, q, off;
    int part;  /* 0 re, 1 im */
    bool herm; /* the mirror is conjugated */
} acoord;

typedef cr_status (*coord_fn)(void *env, const acoord *c);

static bool dtype_complex(const cr_array *a)
{
    return a->dtype == CR_DT_C128;
}

static cr_status visit(coord_fn fn, void *env, size_t p, size_t q, size_t off, bool cplx, bool herm,
                       bool real_only)
{
    acoord c = {p, q, off, 0, herm};
    cr_status st = fn(env, &c);
    if (st != CR_OK || !cplx || real_only)
        return st;
    c.part = 1;
    return fn(env, &c);
}

/* Calls fn for every coordinate of a float array, in order. */
static cr_status for_each_coord(const cr_array *a, coord_fn fn, void *env)
{
    bool cplx = dtype_complex(a);
    cr_status st = CR_OK;
    if (a->ndim != 2 || a->structure == CR_MAT_DENSE) {
        size_t n = cr_array_numel(a);
        for (size_t p = 0; p < n && st == CR_OK; p++)
            st = visit(fn, env, p, NO_MIRROR, p, cplx, false, false);
        return st;
    }
    size_t rows = a->shape[0], cols = a->shape[1];
    switch ((cr_matstruct)a->structure) {
    case CR_MAT_DIAGONAL: {
        size_t n = rows < cols ? rows : cols;
        for (size_t i = 0; i < n && st == CR_OK; i++)
            st = visit(fn, env, i * cols + i, NO_MIRROR, i, cplx, false, false);
        return st;
    }
    case CR_MAT_UPPER:
        for (size_t i = 0; i < rows; i++)
            for (size_t j = i; j < cols && st == CR_OK; j++)
                st = visit(fn, env, i * cols + j, NO_MIRROR, i * cols + j, cplx, false, false);
        return st;
    case CR_MAT_LOWER:
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j <= i && j < cols && st == CR_OK; j++)
                st = visit(fn, env, i * cols + j, NO_MIRROR, i * cols + j, cplx, false, false);
        return st;
    case CR_MAT_SYMMETRIC:
    case CR_MAT_HERMITIAN: {
        bool herm = a->structure == CR_MAT_HERMITIAN;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = i; j < cols && st == CR_OK; j++)
                st = visit(fn, env, i * cols + j, i == j ? NO_MIRROR : j * cols + i, i * cols + j,
                           cplx, herm, herm && i == j);
        return st;
    }
    case CR_MAT_TRIDIAGONAL:
    case CR_MAT_SYMTRIDIAGONAL:
    case CR_MAT_BIDIAG_UPPER:
    case CR_MAT_BIDIAG_LOWER:
    case CR_MAT_UNIT_UPPER:
    case CR_MAT_UNIT_LOWER:
    case CR_MAT_SYMMETRIC_LOWER:
    case CR_MAT_HERMITIAN_LOWER: {
        /* The entries read from their own place (array.h), with the mirror that reads the
         * same entry; a unit diagonal is not a coordinate. */
        bool herm = cr__struct_herm(a->structure);
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols && st == CR_OK; j++) {
                size_t r, c, r2, c2;
                cr__rd how = cr__struct_read(a->structure, i, j, &r, &c);
                if ((how != CR__RD_SELF && how != CR__RD_REAL) || r != i || c != j)
                    continue;
                size_t q = NO_MIRROR;
                if (i != j) {
                    cr__rd h2 = cr__struct_read(a->structure, j, i, &r2, &c2);
                    if ((h2 == CR__RD_SELF || h2 == CR__RD_CONJ) && r2 == i && c2 == j)
                        q = j * cols + i;
                }
                st = visit(fn, env, i * cols + j, q, i * cols + j, cplx, herm, how == CR__RD_REAL);
            }
        return st;
    }
    case CR_MAT_DENSE:
        break;
    }
    return CR_EINVAL;
}

static cr_status count_coord(void *env, const acoord *c)
{
    (void)c;
    (*(size_t *)env)++;
    return CR_OK;
}

static size_t array_ncoords(const cr_array *a)
{
    size_t n = 0;
    for_each_coord(a, count_coord, &n);
    return n;
}

static double part_of(cr_complex z, int part)
{
    return part == 0 ? creal(z) : cimag(z);
}

/* ---- Tangent leaves ------------------------------------------------------------------- */

/* Element p (logical) of a tangent that stands for an array or a scalar (p = 0). */
static cr_complex tan_elem(cr_tangent t, size_t p)
{
    switch ((cr_tag)t.tag) {
    case CR_TAN_F64:
        return t.u.f64;
    case CR_TAN_F32:
        return (double)t.u.f32;
    case CR_TAN_C128:
        return t.u.c128;
    case CR_TAN_ARRAY:
        return cr_array_get_linear(t.u.arr, p);
    default:
        return 0.0;
    }
}

static bool tag_is_scalar(uint8_t tag)
{
    return tag == CR_TAN_F64 || tag == CR_TAN_F32 || tag == CR_TAN_C128;
}

/* ---- The walker ----------------------------------------------------------------------- */

/* A walk over a value (and, in parallel, a tangent of it) that calls back at every
 * leaf: float scalars and float arrays (`leaf`), everything else (`other`). Tangents are
 * unthunked; zeros, NoTangent and absent fields reach the callbacks as ZeroTangent. */
typedef struct walker walker;
struct walker {
    cr_status (*leaf)(walker *w, const cr_value *v, cr_tangent t);
    cr_status (*other)(walker *w, const cr_value *v);
    bool with_tangent;
    char *msg;
    size_t msgsize;
    /* Path of the current leaf, for names. */
    char path[128];
    size_t plen;
    /* Operation state. */
    double *out;
    size_t n, k;
    double imag;
    uint64_t hash;
    bool flag;
    size_t target;
    char *name;
    size_t namesize;
};

static cr_status walk_error(walker *w, cr_status st, const char *fmt, const char *a, const char *b)
{
    if (w->msg != NULL && w->msgsize > 0) {
        char head[160];
        snprintf(head, sizeof head, fmt, a, b);
        snprintf(w->msg, w->msgsize, "%s%s%s", head, w->plen ? " at " : "", w->plen ? w->path : "");
    }
    return st;
}

static size_t path_push(walker *w, const cr_field *f, size_t i)
{
    size_t old = w->plen;
    int len = f->name != NULL ? snprintf(w->path + old, sizeof w->path - old, ".%s", f->name)
                              : snprintf(w->path + old, sizeof w->path - old, ".%zu", i + 1);
    if (len > 0)
        w->plen = old + (size_t)len < sizeof w->path ? old + (size_t)len : sizeof w->path - 1;
    return old;
}

static void path_pop(walker *w, size_t old)
{
    w->plen = old;
    w->path[old] = '\0';
}

static cr_status walk(walker *w, const cr_value *v, cr_tangent t);

static cr_status walk_struct(walker *w, const cr_type *type, void *ptr, cr_tangent t)
{
    if (type == NULL || ptr == NULL)
        return walk_error(w, CR_EINVAL, "a struct value without %s%s", "descriptor or data", "");
    if (w->with_tangent && t.tag != CR_TAN_ZERO && t.tag != CR_TAN_STRUCT)
        return walk_error(w, CR_ETANGENT, "a %s tangent for a struct of type %s",
                          cr_tag_name((cr_tag)t.tag), type->name ? type->name : "?");
    if (w->with_tangent && t.tag == CR_TAN_STRUCT && t.u.s.type != type)
        return walk_error(w, CR_ETANGENT, "a structural tangent of type %s for a %s",
                          t.u.s.type && t.u.s.type->name ? t.u.s.type->name : "?",
                          type->name ? type->name : "?");
    for (size_t i = 0; i < type->nfields; i++) {
        cr_value fv;
        if (cr_type_field_value(type, ptr, i, &fv) != CR_OK)
            return walk_error(w, CR_EINVAL, "type %s: invalid field descriptor%s",
                              type->name ? type->name : "?", "");
        cr_tangent ft = w->with_tangent ? cr_tangent_field(t, i) : cr_tangent_zero();
        size_t old = path_push(w, &type->fields[i], i);
        cr_status st = walk(w, &fv, ft);
        path_pop(w, old);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status walk(walker *w, const cr_value *v, cr_tangent t)
{
    if (w->with_tangent) {
        cr_status st = cr_tangent_unthunk(t, &t);
        if (st != CR_OK)
            return walk_error(w, st, "a thunk failed (%s)%s", cr_status_name(st), "");
        if (t.tag == CR_TAN_NOTIMPL)
            return walk_error(w, CR_EUNIMPL, "NotImplemented%s%s", "", "");
        if (t.tag == CR_TAN_NONE || t.tag == CR_TAN_ABSENT)
            t = cr_tangent_zero();
    }
    switch (v->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32:
    case CR_KIND_C128:
        if (w->with_tangent && t.tag != CR_TAN_ZERO && !tag_is_scalar(t.tag) &&
            !(t.tag == CR_TAN_ARRAY && cr_array_numel(t.u.arr) == 1))
            return walk_error(w, CR_ETANGENT, "a %s tangent for a %s", cr_tag_name((cr_tag)t.tag),
                              cr_kind_name(v->kind));
        return w->leaf(w, v, t);
    case CR_KIND_ARRAY:
        if (v->u.arr == NULL)
            return walk_error(w, CR_EINVAL, "a NULL array%s%s", "", "");
        if (!cr_dtype_is_float((cr_dtype)v->u.arr->dtype))
            return w->other ? w->other(w, v) : CR_OK;
        if (w->with_tangent && t.tag == CR_TAN_ARRAY &&
            cr_array_numel(t.u.arr) != cr_array_numel(v->u.arr))
            return walk_error(w, CR_ETANGENT, "an array tangent of %s elements for %s",
                              "another number of", "an array");
        if (w->with_tangent && t.tag != CR_TAN_ZERO && t.tag != CR_TAN_ARRAY &&
            !(tag_is_scalar(t.tag) && cr_array_numel(v->u.arr) == 1))
            return walk_error(w, CR_ETANGENT, "a %s tangent for an %s", cr_tag_name((cr_tag)t.tag),
                              "array");
        return w->leaf(w, v, t);
    case CR_KIND_STRUCT:
        return walk_struct(w, v->u.obj.type, v->u.obj.ptr, t);
    case CR_KIND_FUNC:
        if (v->u.func.fn != NULL && v->u.func.fn->self_type != NULL && v->u.func.self != NULL)
            return walk_struct(w, v->u.func.fn->self_type, v->u.func.self, t);
        return w->other ? w->other(w, v) : CR_OK;
    default:
        return w->other ? w->other(w, v) : CR_OK;
    }
}

/* ---- Coordinates ---------------------------------------------------------------------- */

static size_t scalar_ncoords(cr_kind k)
{
    return k == CR_KIND_C128 ? 2 : 1;
}

static cr_complex scalar_value(const cr_value *v)
{
    switch (v->kind) {
    case CR_KIND_F64:
        return v->u.f64;
    case CR_KIND_F32:
        return (double)v->u.f32;
    case CR_KIND_C128:
        return v->u.c128;
    default:
        return 0.0;
    }
}

static cr_status size_leaf(walker *w, const cr_value *v, cr_tangent t)
{
    (void)t;
    w->k += v->kind == CR_KIND_ARRAY ? array_ncoords(v->u.arr) : scalar_ncoords(v->kind);
    return CR_OK;
}

size_t cr_test_flat_size(const cr_value *v)
{
    if (v == NULL)
        return 0;
    walker w = {.leaf = size_leaf};
    if (walk(&w, v, cr_tangent_zero()) != CR_OK)
        return 0;
    return w.k;
}

/* Coordinates read from the value (with_tangent false) or the tangent. */
typedef struct read_env {
    walker *w;
    const cr_array *a; /* the value's array */
    cr_tangent t;
    bool dual;
} read_env;

static cr_status read_coord(void *env, const acoord *c)
{
    read_env *e = env;
    walker *w = e->w;
    if (w->k >= w->n)
        return CR_EINVAL;
    double x;
    if (!w->with_tangent) {
        x = part_of(cr_array_get_linear(e->a, c->p), c->part);
    } else {
        x = part_of(tan_elem(e->t, c->p), c->part);
        if (e->dual && c->q != NO_MIRROR) {
            double m = part_of(tan_elem(e->t, c->q), c->part);
            x += (c->herm && c->part == 1) ? -m : m;
        }
    }
    w->out[w->k++] = x;
    return CR_OK;
}

static cr_status read_leaf(walker *w, const cr_value *v, cr_tangent t)
{
    if (v->kind == CR_KIND_ARRAY) {
        read_env e = {w, v->u.arr, t, w->flag};
        return for_each_coord(v->u.arr, read_coord, &e);
    }
    cr_complex z = w->with_tangent ? tan_elem(t, 0) : scalar_value(v);
    size_t nc = scalar_ncoords(v->kind);
    if (w->k + nc > w->n)
        return CR_EINVAL;
    w->out[w->k++] = creal(z);
    if (nc == 2)
        w->out[w->k++] = cimag(z);
    return CR_OK;
}

static cr_status read_coords(const cr_value *v, cr_tangent t, bool with_tangent, bool dual,
                             double *x, size_t n)
{
    if (v == NULL || (x == NULL && n > 0))
        return CR_EINVAL;
    walker w = {.leaf = read_leaf, .with_tangent = with_tangent, .flag = dual, .out = x, .n = n};
    cr_status st = walk(&w, v, t);
    if (st != CR_OK)
        return st;
    return w.k == n ? CR_OK : CR_EINVAL;
}

cr_status cr_test_flatten(const cr_value *v, double *x, size_t n)
{
    return read_coords(v, cr_tangent_zero(), false, false, x, n);
}

cr_status cr_test_tangent_flatten(const cr_value *primal, cr_tangent t, double *x, size_t n)
{
    return read_coords(primal, t, true, false, x, n);
}

cr_status cr_test_cotangent_flatten(const cr_value *primal, cr_tangent t, double *g, size_t n)
{
    return read_coords(primal, t, true, true, g, n);
}

static cr_status weight_coord(void *env, const acoord *c)
{
    walker *w = env;
    if (w->k < w->n)
        w->out[w->k++] = c->q != NO_MIRROR ? 2.0 : 1.0;
    return CR_OK;
}

static cr_status weight_leaf(walker *w, const cr_value *v, cr_tangent t)
{
    (void)t;
    if (v->kind == CR_KIND_ARRAY)
        return for_each_coord(v->u.arr, weight_coord, w);
    for (size_t i = 0; i < scalar_ncoords(v->kind) && w->k < w->n; i++)
        w->out[w->k++] = 1.0;
    return CR_OK;
}

void cr__test_weights(const cr_value *v, double *wts, size_t n)
{
    walker w = {.leaf = weight_leaf, .out = wts, .n = n};
    walk(&w, v, cr_tangent_zero());
    for (size_t i = w.k; i < n; i++)
        wts[i] = 1.0;
}

/* ---- Writing coordinates into new arrays, values and tangents ------------------------- */

typedef struct write_env {
    cr_array *a; /* contiguous, same structure */
    const double *x;
    size_t n, k;
} write_env;

static cr_status write_coord(void *env, const acoord *c)
{
    write_env *e = env;
    if (e->k >= e->n)
        return CR_EINVAL;
    double x = e->x[e->k++];
    ptrdiff_t off = (ptrdiff_t)c->off;
    if (!dtype_complex(e->a)) {
        cr__store(e->a, off, x);
        return CR_OK;
    }
    cr_complex z = cr__load(e->a, off);
    z = c->part == 0 ? cr__cplx(x, cimag(z)) : cr__cplx(creal(z), x);
    cr__store(e->a, off, z);
    return CR_OK;
}

/* Writes coordinates x[*k...] into arr (a contiguous array of the template's structure). */
static cr_status write_array(cr_array *arr, const cr_array *like, const double *x, size_t n,
                             size_t *k)
{
    write_env e = {arr, x, n, *k};
    /* The template's coordinates: a unit triangle's tangent is an Upper/Lower array. */
    cr_status st = for_each_coord(like, write_coord, &e);
    *k = e.k;
    return st;
}

static cr_status unflatten_struct(cr_arena *arena, const cr_type *type, void *dst, const double *x,
                                  size_t n, size_t *k);

/* Unflatten one field stored at p (inside a struct copy) whose kind is f->kind. */
static cr_status unflatten_field(cr_arena *arena, const cr_field *f, unsigned char *p,
                                 const double *x, size_t n, size_t *k)
{
    switch (f->kind) {
    case CR_KIND_F64: {
        if (*k + 1 > n)
            return CR_EINVAL;
        double d = x[(*k)++];
        memcpy(p, &d, sizeof d);
        return CR_OK;
    }
    case CR_KIND_F32: {
        if (*k + 1 > n)
            return CR_EINVAL;
        float s = (float)x[(*k)++];
        memcpy(p, &s, sizeof s);
        return CR_OK;
    }
    case CR_KIND_C128: {
        if (*k + 2 > n)
            return CR_EINVAL;
        cr_complex z = cr__cplx(x[*k], x[*k + 1]);
        *k += 2;
        memcpy(p, &z, sizeof z);
        return CR_OK;
    }
    case CR_KIND_ARRAY: {
        cr_array like;
        memcpy(&like, p, sizeof like);
        if (!cr_dtype_is_float((cr_dtype)like.dtype))
            return CR_OK;
        cr_array *copy;
        cr_status st = cr_array_copy(arena, &like, &copy);
        if (st != CR_OK)
            return st;
        st = write_array(copy, &like, x, n, k);
        if (st != CR_OK)
            return st;
        memcpy(p, copy, sizeof *copy);
        return CR_OK;
    }
    case CR_KIND_STRUCT:
        return unflatten_struct(arena, f->type, p, x, n, k);
    default:
        return CR_OK;
    }
}

static cr_status unflatten_struct(cr_arena *arena, const cr_type *type, void *dst, const double *x,
                                  size_t n, size_t *k)
{
    if (type == NULL || dst == NULL)
        return CR_EINVAL;
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *f = &type->fields[i];
        if (f->kind == CR_KIND_STRUCT && f->type == NULL)
            return CR_EINVAL;
        cr_status st = unflatten_field(arena, f, (unsigned char *)dst + f->offset, x, n, k);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

static void *copy_bytes(cr_arena *arena, const void *src, size_t size)
{
    void *p = cr_arena_alloc(arena, size ? size : 1, 0);
    if (p != NULL && size > 0)
        memcpy(p, src, size);
    return p;
}

/* The next number of x[*k..n) (two for a complex one) into the field of v->u for the kind
 * (f64, f32, c128); CR_EINVAL when x has too few left. */
static cr_status take_number(cr_kind kind, const double *x, size_t n, size_t *k, cr_value *v)
{
    size_t w = kind == CR_KIND_C128 ? 2 : 1;
    if (*k + w > n)
        return CR_EINVAL;
    if (kind == CR_KIND_F64)
        v->u.f64 = x[*k];
    else if (kind == CR_KIND_F32)
        v->u.f32 = (float)x[*k];
    else
        v->u.c128 = cr__cplx(x[*k], x[*k + 1]);
    *k += w;
    return CR_OK;
}

static cr_status unflatten_rec(cr_arena *arena, const cr_value *like, const double *x, size_t n,
                               size_t *k, cr_value *out)
{
    *out = *like;
    switch (like->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32:
    case CR_KIND_C128:
        return take_number(like->kind, x, n, k, out);
    case CR_KIND_ARRAY: {
        if (like->u.arr == NULL)
            return CR_EINVAL;
        if (!cr_dtype_is_float((cr_dtype)like->u.arr->dtype))
            return CR_OK;
        cr_array *copy;
        cr_status st = cr_array_copy(arena, like->u.arr, &copy);
        if (st != CR_OK)
            return st;
        out->u.arr = copy;
        return write_array(copy, like->u.arr, x, n, k);
    }
    case CR_KIND_STRUCT: {
        const cr_type *type = like->u.obj.type;
        if (type == NULL || like->u.obj.ptr == NULL)
            return CR_EINVAL;
        void *p = copy_bytes(arena, like->u.obj.ptr, type->size);
        if (p == NULL)
            return CR__ALLOC_STATUS(arena);
        out->u.obj.ptr = p;
        return unflatten_struct(arena, type, p, x, n, k);
    }
    case CR_KIND_FUNC: {
        const cr_function *fn = like->u.func.fn;
        if (fn == NULL || fn->self_type == NULL || like->u.func.self == NULL)
            return CR_OK;
        void *p = copy_bytes(arena, like->u.func.self, fn->self_type->size);
        if (p == NULL)
            return CR__ALLOC_STATUS(arena);
        out->u.func.self = p;
        return unflatten_struct(arena, fn->self_type, p, x, n, k);
    }
    default:
        return CR_OK;
    }
}

cr_status cr_test_unflatten(cr_arena *arena, const cr_value *like, const double *x, size_t n,
                            cr_value *out)
{
    size_t k = 0;
    cr_status st = arena == NULL || like == NULL || out == NULL || (x == NULL && n > 0)
                       ? CR_EINVAL
                       : unflatten_rec(arena, like, x, n, &k, out);
    return st != CR_OK || k == n ? st : CR_EINVAL; /* every number used */
}

static cr_status tangent_unflatten_rec(cr_arena *arena, const cr_value *primal, const double *x,
                                       size_t n, size_t *k, cr_tangent *out);

static cr_status tangent_unflatten_struct(cr_arena *arena, const cr_type *type, void *ptr,
                                          const double *x, size_t n, size_t *k, cr_tangent *out)
{
    if (type == NULL || ptr == NULL)
        return CR_EINVAL;
    cr_tangent *fields = cr_arena_calloc(arena, type->nfields ? type->nfields : 1, sizeof *fields,
                                         _Alignof(cr_tangent));
    if (fields == NULL)
        return CR__ALLOC_STATUS(arena);
    bool any = false;
    for (size_t i = 0; i < type->nfields; i++) {
        cr_value fv;
        if (cr_type_field_value(type, ptr, i, &fv) != CR_OK)
            return CR_EINVAL;
        cr_status st = tangent_unflatten_rec(arena, &fv, x, n, k, &fields[i]);
        if (st != CR_OK)
            return st;
        any = any || fields[i].tag != CR_TAN_NONE;
    }
    if (!any) {
        *out = cr_tangent_none();
        return CR_OK;
    }
    *out = cr_tangent_struct_empty(type);
    out->u.s.fields = fields;
    return CR_OK;
}

static cr_status tangent_unflatten_rec(cr_arena *arena, const cr_value *primal, const double *x,
                                       size_t n, size_t *k, cr_tangent *out)
{
    *out = cr_tangent_none();
    switch (primal->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32:
    case CR_KIND_C128: {
        cr_value v = *primal;
        cr_status st = take_number(primal->kind, x, n, k, &v);
        *out = st != CR_OK             ? cr_tangent_none()
               : v.kind == CR_KIND_F64 ? cr_tangent_f64(v.u.f64)
               : v.kind == CR_KIND_F32 ? cr_tangent_f32(v.u.f32)
                                       : cr_tangent_c128(v.u.c128);
        return st;
    }
    case CR_KIND_ARRAY: {
        if (primal->u.arr == NULL || !cr_dtype_is_float((cr_dtype)primal->u.arr->dtype))
            return primal->u.arr == NULL ? CR_EINVAL : CR_OK; /* no coordinates: NoTangent */
        cr_tangent z;
        cr_status st = cr_tangent_zero_of(arena, primal, &z);
        if (st != CR_OK)
            return st;
        if (z.tag != CR_TAN_ARRAY)
            return CR_EINVAL;
        st = write_array(z.u.arr, primal->u.arr, x, n, k);
        if (st != CR_OK)
            return st;
        *out = z;
        return CR_OK;
    }
    case CR_KIND_STRUCT:
        return tangent_unflatten_struct(arena, primal->u.obj.type, primal->u.obj.ptr, x, n, k, out);
    case CR_KIND_FUNC: {
        const cr_function *fn = primal->u.func.fn;
        if (fn == NULL || fn->self_type == NULL || primal->u.func.self == NULL)
            return CR_OK;
        return tangent_unflatten_struct(arena, fn->self_type, primal->u.func.self, x, n, k, out);
    }
    default:
        return CR_OK;
    }
}

cr_status cr_test_tangent_unflatten(cr_arena *arena, const cr_value *primal, const double *x,
                                    size_t n, cr_tangent *out)
{
    size_t k = 0;
    cr_status st = arena == NULL || primal == NULL || out == NULL || (x == NULL && n > 0)
                       ? CR_EINVAL
                       : tangent_unflatten_rec(arena, primal, x, n, &k, out);
    return st != CR_OK || k == n ? st : CR_EINVAL; /* every number used */
}

/* ---- Logical components --------------------------------------------------------------- */

static size_t leaf_ncomps(const cr_value *v)
{
    if (v->kind == CR_KIND_ARRAY)
        return cr_array_numel(v->u.arr) * (dtype_complex(v->u.arr) ? 2 : 1);
    return scalar_ncoords(v->kind);
}

static cr_status ncomps_leaf(walker *w, const cr_value *v, cr_tangent t)
{
    (void)t;
    w->k += leaf_ncomps(v);
    return CR_OK;
}

size_t cr__test_ncomps(const cr_value *v)
{
    walker w = {.leaf = ncomps_leaf};
    if (walk(&w, v, cr_tangent_zero()) != CR_OK)
        return 0;
    return w.k;
}

static cr_status expand_leaf(walker *w, const cr_value *v, cr_tangent t)
{
    bool cplx = v->kind == CR_KIND_C128 || (v->kind == CR_KIND_ARRAY && dtype_complex(v->u.arr));
    size_t numel = v->kind == CR_KIND_ARRAY ? cr_array_numel(v->u.arr) : 1;
    if (w->k + numel * (cplx ? 2u : 1u) > w->n)
        return CR_EINVAL;
    for (size_t p = 0; p < numel; p++) {
        cr_complex z;
        if (w->with_tangent)
            z = tan_elem(t, p);
        else
            z = v->kind == CR_KIND_ARRAY ? cr_array_get_linear(v->u.arr, p) : scalar_value(v);
        w->out[w->k++] = creal(z);
        if (cplx)
            w->out[w->k++] = cimag(z);
        else if (fabs(cimag(z)) > w->imag || isnan(cimag(z)))
            w->imag = fabs(cimag(z));
    }
    return CR_OK;
}

cr_status cr__test_expand(const cr_value *primal, cr_tangent t, double *out, size_t n, double *imag,
                          char *msg, size_t msgsize)
{
    walker w = {.leaf = expand_leaf, .with_tangent = true, .out = out, .n = n};
    w.msg = msg; /* why a tangent does not fit */
    w.msgsize = msgsize;
    if (msg != NULL && msgsize > 0)
        msg[0] = '\0';
    cr_status st = walk(&w, primal, t);
    if (imag != NULL)
        *imag = w.imag;
    if (st == CR_OK && w.k != n)
        st = CR_EINVAL;
    return st;
}

cr_status cr__test_expand_value(const cr_value *v, double *out, size_t n)
{
    walker w = {.leaf = expand_leaf, .out = out, .n = n};
    cr_status st = walk(&w, v, cr_tangent_zero());
    if (st == CR_OK && w.k != n)
        st = CR_EINVAL;
    return st;
}

static cr_status name_leaf(walker *w, const cr_value *v, cr_tangent t)
{
    (void)t;
    size_t nc = leaf_ncomps(v);
    if (w->flag || w->target >= w->k + nc) {
        w->k += nc;
        return CR_OK;
    }
    size_t r = w->target - w->k;
    bool cplx = v->kind == CR_KIND_C128 || (v->kind == CR_KIND_ARRAY && dtype_complex(v->u.arr));
    size_t p = cplx ? r / 2 : r;
    const char *part = cplx ? (r % 2 ? "im" : "re") : NULL;
    char idx[96] = "";
    if (v->kind == CR_KIND_ARRAY && v->u.arr->ndim > 0) {
        const cr_array *a = v->u.arr;
        size_t sub[CR_ARRAY_MAX_DIMS], q = p;
        for (size_t d = a->ndim; d-- > 0;) {
            sub[d] = a->shape[d] ? q % a->shape[d] : 0;
            q = a->shape[d] ? q / a->shape[d] : 0;
        }
        size_t len = 0;
        idx[len++] = '[';
        for (size_t d = 0; d < a->ndim && len + 24 < sizeof idx; d++) {
            int m = snprintf(idx + len, sizeof idx - len, d ? ",%zu" : "%zu", sub[d]);
            if (m > 0)
                len += (size_t)m;
        }
        if (len + 1 < sizeof idx) {
            idx[len++] = ']';
            idx[len] = '\0';
        }
    }
    const char *sep = part != NULL && (w->plen > 0 || idx[0] != '\0') ? "." : "";
    snprintf(w->name, w->namesize, "%s%s%s%s", w->path, idx, sep, part ? part : "");
    w->flag = true;
    w->k += nc;
    return CR_OK;
}

void cr__test_comp_name(const cr_value *v, size_t k, char *buf, size_t size)
{
    if (buf == NULL || size == 0)
        return;
    buf[0] = '\0';
    walker w = {.leaf = name_leaf, .target = k, .name = buf, .namesize = size};
    walk(&w, v, cr_tangent_zero());
    if (!w.flag)
        snprintf(buf, size, "component %zu", k);
}

/* ---- Hashes and predicates ------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define FNV_SEED 0xcbf29ce484222325ull

/* Every stored element of an array (any dtype), with its shape. */
static uint64_t hash_array(uint64_t h, const cr_array *a)
{
    h = fnv(h, &a->dtype, 1);
    h = fnv(h, &a->structure, 1);
    h = fnv(h, &a->ndim, 1);
    h = fnv(h, a->shape, a->ndim * sizeof a->shape[0]);
    cr_array sv = cr__storage_view(a);
    size_t n = 1;
    for (size_t d = 0; d < sv.ndim; d++)
        n *= sv.shape[d];
    if (n == 0 || sv.data == NULL)
        return h;
    size_t es = cr_dtype_size((cr_dtype)sv.dtype);
    const cr_array *arrs[1] = {&sv};
    cr__iter it;
    cr__iter_init(&it, arrs, 1);
    do
        h = fnv(h, (const unsigned char *)sv.data + it.off[0] * (ptrdiff_t)es, es);
    while (cr__iter_next(&it));
    return h;
}

static uint64_t hash_scalar_value(uint64_t h, const cr_value *v)
{
    h = fnv(h, &v->kind, sizeof v->kind);
    switch (v->kind) {
    case CR_KIND_F64:
        return fnv(h, &v->u.f64, sizeof v->u.f64);
    case CR_KIND_F32:
        return fnv(h, &v->u.f32, sizeof v->u.f32);
    case CR_KIND_C128:
        return fnv(h, &v->u.c128, sizeof v->u.c128);
    case CR_KIND_I64:
    case CR_KIND_I32:
        return fnv(h, &v->u.i64, sizeof v->u.i64);
    case CR_KIND_BOOL: {
        unsigned char b = v->u.b ? 1 : 0;
        return fnv(h, &b, 1);
    }
    case CR_KIND_FUNC:
        return fnv(h, &v->u.func.fn, sizeof v->u.func.fn);
    default:
        return h;
    }
}

static cr_status hash_leaf(walker *w, const cr_value *v, cr_tangent t)
{
    (void)t;
    w->hash =
        v->kind == CR_KIND_ARRAY ? hash_array(w->hash, v->u.arr) : hash_scalar_value(w->hash, v);
    return CR_OK;
}

static cr_status hash_other(walker *w, const cr_value *v)
{
    w->hash =
        v->kind == CR_KIND_ARRAY ? hash_array(w->hash, v->u.arr) : hash_scalar_value(w->hash, v);
    return CR_OK;
}

uint64_t cr__test_hash_value(const cr_value *v, uint64_t h)
{
    walker w = {.leaf = hash_leaf, .other = hash_other, .hash = h ? h : FNV_SEED};
    walk(&w, v, cr_tangent_zero());
    return w.hash;
}

uint64_t cr__test_hash_discrete(const cr_value *v)
{
    walker w = {.leaf = ncomps_leaf, .other = hash_other, .hash = FNV_SEED};
    walk(&w, v, cr_tangent_zero());
    return w.hash;
}

uint64_t cr__test_hash_tangent(cr_tangent t, uint64_t h)
{
    if (h == 0)
        h = FNV_SEED;
    h = fnv(h, &t.tag, 1);
    switch ((cr_tag)t.tag) {
    case CR_TAN_F64:
        return fnv(h, &t.u.f64, sizeof t.u.f64);
    case CR_TAN_F32:
        return fnv(h, &t.u.f32, sizeof t.u.f32);
    case CR_TAN_C128:
        return fnv(h, &t.u.c128, sizeof t.u.c128);
    case CR_TAN_ARRAY:
        return t.u.arr != NULL ? hash_array(h, t.u.arr) : h;
    case CR_TAN_STRUCT:
        h = fnv(h, &t.u.s.type, sizeof t.u.s.type);
        if (t.u.s.fields != NULL && t.u.s.type != NULL)
            for (size_t i = 0; i < t.u.s.type->nfields; i++)
                h = cr__test_hash_tangent(t.u.s.fields[i], h);
        return h;
    case CR_TAN_THUNK: {
        /* Evaluated (and memoized) here: a thunk hashed by its address before a rule and
         * by its value after would read as mutated when the rule merely evaluated it. */
        cr_tangent v;
        if (t.u.thunk != NULL && cr_tangent_unthunk(t, &v) == CR_OK)
            return cr__test_hash_tangent(v, h);
        return fnv(h, &t.u.thunk, sizeof t.u.thunk);
    }
    case CR_TAN_NOTIMPL:
        return fnv(h, &t.u.ni, sizeof t.u.ni);
    default:
        return h;
    }
}

static cr_status f32_leaf(walker *w, const cr_value *v, cr_tangent t)
{
    (void)t;
    if (v->kind == CR_KIND_F32 || (v->kind == CR_KIND_ARRAY && v->u.arr->dtype == CR_DT_F32))
        w->flag = true;
    return CR_OK;
}

bool cr__test_has_f32(const cr_value *v)
{
    walker w = {.leaf = f32_leaf};
    walk(&w, v, cr_tangent_zero());
    return w.flag;
}

static cr_status finite_leaf(walker *w, const cr_value *v, cr_tangent t)
{
    (void)t;
    if (v->kind == CR_KIND_ARRAY) {
        size_t n = cr_array_numel(v->u.arr);
        for (size_t p = 0; p < n; p++) {
            cr_complex z = cr_array_get_linear(v->u.arr, p);
            if (!isfinite(creal(z)) || !isfinite(cimag(z)))
                w->flag = true;
        }
        return CR_OK;
    }
    cr_complex z = scalar_value(v);
    if (!isfinite(creal(z)) || !isfinite(cimag(z)))
        w->flag = true;
    return CR_OK;
}

bool cr__test_is_finite(const cr_value *v)
{
    walker w = {.leaf = finite_leaf};
    if (walk(&w, v, cr_tangent_zero()) != CR_OK)
        return false;
    return !w.flag;
}
