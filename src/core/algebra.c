/*
 * The tangent algebra: +, -, scaling, conj, dot, add!! (accumulation), materialised zeros,
 * copies and approximate comparison, with every strong-zero identity of ChainRulesCore
 * (precedence NotImplemented > NoTangent > ZeroTangent > Thunk > everything else for +,
 * ZeroTangent > NoTangent > NotImplemented for *). Zeros never allocate.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core_impl.h"

typedef enum { OP_ADD, OP_SUB } binop;

static bool is_scalar(uint8_t tag)
{
    return tag == CR_TAN_F64 || tag == CR_TAN_F32 || tag == CR_TAN_C128;
}

/* The number a scalar tangent carries (0 for any other). */
static cr_complex scalar_value(cr_tangent t)
{
    return t.tag == CR_TAN_F64    ? (cr_complex)t.u.f64
           : t.tag == CR_TAN_F32  ? (cr_complex)(double)t.u.f32
           : t.tag == CR_TAN_C128 ? t.u.c128
                                  : 0.0;
}

static cr_dtype promote(cr_dtype a, cr_dtype b)
{
    if (a == CR_DT_C128 || b == CR_DT_C128)
        return CR_DT_C128;
    if (a == CR_DT_F64 || b == CR_DT_F64)
        return CR_DT_F64;
    return CR_DT_F32;
}

static void shape_str(const cr_array *a, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = '\0';
    k += (size_t)snprintf(buf + k, n - k, "(");
    for (size_t d = 0; d < a->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d == 0 ? "%zu" : ",%zu", a->shape[d]);
    if (k < n)
        snprintf(buf + k, n - k, ")");
}

static cr_status shape_error(cr_arena *arena, const char *op, const cr_array *x, const cr_array *y)
{
    char sx[96], sy[96];
    shape_str(x, sx, sizeof sx);
    shape_str(y, sy, sizeof sy);
    return CR__FAIL(arena, CR_ESHAPE, "tangent %s: shapes %s and %s differ", op, sx, sy);
}

static cr_status kind_error(cr_arena *arena, const char *op, cr_tangent x, cr_tangent y)
{
    return CR__FAIL(arena, CR_ETANGENT, "tangent %s: cannot combine %s with %s", op,
                    cr_tag_name((cr_tag)x.tag), cr_tag_name((cr_tag)y.tag));
}

/* A new array holding the storage of `like` (structure and logical shape kept). */
static cr_status new_like(cr_arena *arena, const cr_array *like, cr_dtype dtype, cr_array **out)
{
    cr_array sv = cr__storage_view(like);
    cr_status st = cr_array_new(arena, dtype, sv.ndim, sv.shape, out);
    if (st != CR_OK)
        return st;
    if (like->structure != CR_MAT_DENSE) {
        cr_array *r = *out;
        r->structure = like->structure;
        if (like->structure == CR_MAT_DIAGONAL) {
            r->ndim = 2;
            r->shape[0] = r->shape[1] = like->shape[0];
            r->strides[0] = 1;
            r->strides[1] = 0;
        }
    }
    return CR_OK;
}

static cr_status array_binary(cr_arena *arena, binop op, const cr_array *x, const cr_array *y,
                              cr_tangent *out)
{
    if (!cr_array_same_shape(x, y))
        return shape_error(arena, op == OP_ADD ? "+" : "-", x, y);
    cr_dtype dt = promote((cr_dtype)x->dtype, (cr_dtype)y->dtype);
    double sg = op == OP_ADD ? 1.0 : -1.0;
    cr_array *r;
    cr_status st;
    if (x->structure == y->structure && !cr__struct_unit(x->structure)) {
        st = new_like(arena, x, dt, &r);
        if (st != CR_OK)
            return st;
        cr_array xs = cr__storage_view(x), ys = cr__storage_view(y), rs = cr__storage_view(r);
        size_t n = cr_array_nstored(x);
        if (dt == CR_DT_F64 && x->dtype == CR_DT_F64 && y->dtype == CR_DT_F64 &&
            cr_array_is_contiguous(x) && cr_array_is_contiguous(y)) {
            const double *a = x->data, *b = y->data;
            double *c = r->data;
            for (size_t k = 0; k < n; k++)
                c[k] = a[k] + sg * b[k];
        } else if (n > 0) {
            const cr_array *arrs[3] = {&xs, &ys, &rs};
            cr__iter it;
            cr__iter_init(&it, arrs, 3);
            do
                cr__store(&rs, it.off[2], cr__load(&xs, it.off[0]) + sg * cr__load(&ys, it.off[1]));
            while (cr__iter_next(&it));
        }
    } else {
        st = cr_array_new(arena, dt, x->ndim, x->shape, &r);
        if (st != CR_OK)
            return st;
        size_t n = cr_array_numel(x);
        for (size_t k = 0; k < n; k++)
            cr__store(r, (ptrdiff_t)k, cr_array_get_linear(x, k) + sg * cr_array_get_linear(y, k));
    }
    *out = cr_tangent_array(r);
    return CR_OK;
}

typedef enum { UN_SCALE, UN_CONJ } unop;

static cr_status array_unary(cr_arena *arena, unop op, cr_complex s, const cr_array *x,
                             cr_tangent *out)
{
    cr_dtype dt = (cr_dtype)x->dtype;
    if (op == UN_SCALE && cimag(s) != 0.0)
        dt = CR_DT_C128;
    cr_array *r;
    cr_status st;
    if (op == UN_SCALE &&
        ((cimag(s) != 0.0 && cr__struct_herm(x->structure)) || cr__struct_unit(x->structure))) {
        /* A complex multiple of a Hermitian matrix is not Hermitian, a multiple of a unit
         * triangle not unit. */
        st = cr__densify(arena, x, dt, &r);
        if (st != CR_OK)
            return st;
        size_t n = cr_array_numel(r);
        for (size_t k = 0; k < n; k++)
            cr__store(r, (ptrdiff_t)k, s * cr__load(r, (ptrdiff_t)k));
        *out = cr_tangent_array(r);
        return CR_OK;
    }
    st = new_like(arena, x, dt, &r);
    if (st != CR_OK)
        return st;
    cr_array xs = cr__storage_view(x), rs = cr__storage_view(r);
    if (cr_array_nstored(x) > 0) {
        const cr_array *arrs[2] = {&xs, &rs};
        cr__iter it;
        cr__iter_init(&it, arrs, 2);
        do {
            cr_complex v = cr__load(&xs, it.off[0]);
            cr__store(&rs, it.off[1], op == UN_CONJ ? conj(v) : s * v);
        } while (cr__iter_next(&it));
    }
    *out = cr_tangent_array(r);
    return CR_OK;
}

static cr_status struct_check(cr_arena *arena, const char *op, cr_tangent x, cr_tangent y)
{
    if (x.u.s.type != y.u.s.type)
        return CR__FAIL(arena, CR_ETANGENT, "tangent %s: Tangent{%s} and Tangent{%s} differ", op,
                        x.u.s.type->name, y.u.s.type->name);
    return CR_OK;
}

static cr_status struct_binary(cr_arena *arena, binop op, cr_tangent x, cr_tangent y,
                               cr_tangent *out);

static cr_status unthunk_pair(cr_tangent *x, cr_tangent *y)
{
    cr_status st = cr_tangent_unthunk(*x, x);
    if (st == CR_OK)
        st = cr_tangent_unthunk(*y, y);
    return st;
}

static cr_status scalar_binary(binop op, cr_tangent x, cr_tangent y, cr_tangent *out)
{
    double sg = op == OP_ADD ? 1.0 : -1.0;
    if (x.tag == CR_TAN_C128 || y.tag == CR_TAN_C128)
        *out = cr_tangent_c128(scalar_value(x) + sg * scalar_value(y));
    else if (x.tag == CR_TAN_F32 && y.tag == CR_TAN_F32)
        *out = cr_tangent_f32(x.u.f32 + (float)sg * y.u.f32);
    else
        *out = cr_tangent_f64(creal(scalar_value(x)) + sg * creal(scalar_value(y)));
    return CR_OK;
}

/* x op y for non-special, unthunked operands. */
static cr_status plain_binary(cr_arena *arena, binop op, cr_tangent x, cr_tangent y,
                              cr_tangent *out)
{
    const char *name = op == OP_ADD ? "+" : "-";
    if (is_scalar(x.tag) && is_scalar(y.tag))
        return scalar_binary(op, x, y, out);
    if (x.tag == CR_TAN_ARRAY && y.tag == CR_TAN_ARRAY)
        return array_binary(arena, op, x.u.arr, y.u.arr, out);
    if (x.tag == CR_TAN_STRUCT && y.tag == CR_TAN_STRUCT)
        return struct_binary(arena, op, x, y, out);
    return kind_error(arena, name, x, y);
}

/* *out = v; CR_OK. */
static inline cr_status put(cr_tangent *out, cr_tangent v)
{
    *out = v;
    return CR_OK;
}

/* x + y or x - y once neither is a zero nor NotImplemented: thunks are unthunked first. */
static cr_status binary_rest(cr_arena *arena, binop op, cr_tangent x, cr_tangent y, cr_tangent *out)
{
    if (x.tag == CR_TAN_THUNK || y.tag == CR_TAN_THUNK) {
        cr_status st = unthunk_pair(&x, &y);
        if (st != CR_OK)
            return st;
        return op == OP_ADD ? cr_tangent_add(arena, x, y, out) : cr_tangent_sub(arena, x, y, out);
    }
    return plain_binary(arena, op, x, y, out);
}

cr_status cr_tangent_add(cr_arena *arena, cr_tangent x, cr_tangent y, cr_tangent *out)
{
    /* NotImplemented always wins +. */
    if (x.tag == CR_TAN_NOTIMPL)
        return put(out, x);
    if (y.tag == CR_TAN_NOTIMPL)
        return put(out, y);
    /* NoTangent + ZeroTangent = NoTangent; a zero is the identity otherwise. */
    if (x.tag == CR_TAN_ZERO || x.tag == CR_TAN_NONE)
        return put(out, (y.tag == CR_TAN_ZERO && x.tag == CR_TAN_NONE) ? x : y);
    if (y.tag == CR_TAN_ZERO || y.tag == CR_TAN_NONE)
        return put(out, x);
    return binary_rest(arena, OP_ADD, x, y, out);
}

cr_status cr_tangent_neg(cr_arena *arena, cr_tangent x, cr_tangent *out)
{
    return cr_tangent_scale(arena, -1.0, x, out);
}

cr_status cr_tangent_sub(cr_arena *arena, cr_tangent x, cr_tangent y, cr_tangent *out)
{
    if (x.tag == CR_TAN_NOTIMPL || y.tag == CR_TAN_NOTIMPL) {
        const cr_notimpl *ni = x.tag == CR_TAN_NOTIMPL ? x.u.ni : y.u.ni;
        *out = cr_tangent_zero();
        return CR__FAIL(arena, CR_EUNIMPL, "cannot subtract a NotImplemented tangent (%s:%d: %s)",
                        ni->file, ni->line, ni->msg);
    }
    if (x.tag == CR_TAN_ZERO || x.tag == CR_TAN_NONE) {
        if (y.tag == CR_TAN_ZERO || y.tag == CR_TAN_NONE) {
            *out = (x.tag == CR_TAN_NONE || y.tag == CR_TAN_NONE) ? cr_tangent_none()
                                                                  : cr_tangent_zero();
            return CR_OK;
        }
        return cr_tangent_neg(arena, y, out);
    }
    if (y.tag == CR_TAN_ZERO || y.tag == CR_TAN_NONE)
        return put(out, x);
    return binary_rest(arena, OP_SUB, x, y, out);
}

static cr_status struct_binary(cr_arena *arena, binop op, cr_tangent x, cr_tangent y,
                               cr_tangent *out)
{
    cr_status st = struct_check(arena, op == OP_ADD ? "+" : "-", x, y);
    if (st != CR_OK)
        return st;
    const cr_type *type = x.u.s.type;
    if (x.u.s.fields == NULL && op == OP_ADD)
        return put(out, y);
    if (y.u.s.fields == NULL)
        return put(out, x);
    cr_tangent *f = cr__arena_array(arena, op == OP_ADD ? "+" : "-", type->nfields, sizeof *f,
                                    _Alignof(cr_tangent));
    if (f == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < type->nfields; i++) {
        bool px = cr_tangent_field_present(x, i), py = cr_tangent_field_present(y, i);
        memset(&f[i], 0, sizeof f[i]);
        if (!px && !py) {
            f[i].tag = CR_TAN_ABSENT;
            continue;
        }
        cr_tangent a = cr_tangent_field(x, i), b = cr_tangent_field(y, i);
        st = op == OP_ADD ? cr_tangent_add(arena, a, b, &f[i]) : cr_tangent_sub(arena, a, b, &f[i]);
        if (st != CR_OK)
            return st;
    }
    *out = cr_tangent_struct_empty(type);
    out->u.s.fields = f;
    return CR_OK;
}

static cr_status struct_map_scale(cr_arena *arena, unop op, cr_complex s, cr_tangent x,
                                  cr_tangent *out);

static cr_status unary(cr_arena *arena, unop op, cr_complex s, cr_tangent x, cr_tangent *out)
{
    switch ((cr_tag)x.tag) {
    case CR_TAN_ZERO:
    case CR_TAN_NONE:
    case CR_TAN_NOTIMPL:
    case CR_TAN_ABSENT:
        return put(out, x);
    case CR_TAN_F64:
        if (op == UN_CONJ)
            *out = x;
        else if (cimag(s) != 0.0)
            *out = cr_tangent_c128(s * x.u.f64);
        else
            *out = cr_tangent_f64(creal(s) * x.u.f64);
        return CR_OK;
    case CR_TAN_F32:
        if (op == UN_CONJ)
            *out = x;
        else if (cimag(s) != 0.0)
            *out = cr_tangent_c128(s * (double)x.u.f32);
        else
            *out = cr_tangent_f32((float)(creal(s) * (double)x.u.f32));
        return CR_OK;
    case CR_TAN_C128:
        return put(out, cr_tangent_c128(op == UN_CONJ ? conj(x.u.c128) : s * x.u.c128));
    case CR_TAN_ARRAY:
        if (op == UN_CONJ && x.u.arr->dtype != CR_DT_C128)
            return put(out, x);
        return array_unary(arena, op, s, x.u.arr, out);
    case CR_TAN_STRUCT:
        return struct_map_scale(arena, op, s, x, out);
    case CR_TAN_THUNK: {
        cr_status st = cr_tangent_unthunk(x, &x);
        if (st != CR_OK)
            return st;
        return unary(arena, op, s, x, out);
    }
    }
    return CR__FAIL(arena, CR_ETANGENT, "invalid tangent tag %d", (int)x.tag);
}

static cr_status struct_map_scale(cr_arena *arena, unop op, cr_complex s, cr_tangent x,
                                  cr_tangent *out)
{
    const cr_type *type = x.u.s.type;
    if (x.u.s.fields == NULL)
        return put(out, x);
    cr_tangent *f = cr__arena_array(arena, op == UN_SCALE ? "*" : "conj", type->nfields, sizeof *f,
                                    _Alignof(cr_tangent));
    if (f == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < type->nfields; i++) {
        cr_status st = unary(arena, op, s, x.u.s.fields[i], &f[i]);
        if (st != CR_OK)
            return st;
    }
    *out = x;
    out->u.s.fields = f;
    return CR_OK;
}

cr_status cr_tangent_scale(cr_arena *arena, double s, cr_tangent x, cr_tangent *out)
{
    return unary(arena, UN_SCALE, s, x, out);
}

cr_status cr_tangent_scale_c(cr_arena *arena, cr_complex s, cr_tangent x, cr_tangent *out)
{
    return unary(arena, UN_SCALE, s, x, out);
}

cr_status cr_tangent_conj(cr_arena *arena, cr_tangent x, cr_tangent *out)
{
    return unary(arena, UN_CONJ, 0.0, x, out);
}

/* The product-like operations (*, dot) of a and b where one side decides the result:
 * ZeroTangent wins, then NoTangent, then NotImplemented. True with *out set when it does. */
static bool absorbed(cr_tangent a, cr_tangent b, cr_tangent *out)
{
    static const uint8_t order[] = {CR_TAN_ZERO, CR_TAN_NONE, CR_TAN_NOTIMPL};
    for (size_t k = 0; k < sizeof order; k++)
        if (a.tag == order[k] || b.tag == order[k]) {
            *out = order[k] != CR_TAN_NOTIMPL ? (cr_tangent){.tag = order[k]}
                   : a.tag == order[k]        ? a
                                              : b;
            return true;
        }
    return false;
}

cr_status cr_tangent_mul(cr_arena *arena, cr_tangent a, cr_tangent b, cr_tangent *out)
{
    if (absorbed(a, b, out))
        return CR_OK;
    if (a.tag == CR_TAN_THUNK || b.tag == CR_TAN_THUNK) {
        cr_status st = unthunk_pair(&a, &b);
        if (st != CR_OK)
            return st;
        return cr_tangent_mul(arena, a, b, out);
    }
    if (is_scalar(a.tag) && is_scalar(b.tag) && a.tag != CR_TAN_C128 && b.tag != CR_TAN_C128 &&
        (a.tag == CR_TAN_F32) != (b.tag == CR_TAN_F32)) {
        *out = cr_tangent_f64(creal(scalar_value(a)) * creal(scalar_value(b)));
        return CR_OK;
    }
    if (is_scalar(a.tag))
        return unary(arena, UN_SCALE, scalar_value(a), b, out);
    if (is_scalar(b.tag))
        return unary(arena, UN_SCALE, scalar_value(b), a, out);
    return kind_error(arena, "*", a, b);
}

/* Sum of conj(x_i) y_i; *complex_seen tells whether either side was complex. */
static cr_status dot_rec(cr_arena *arena, cr_tangent x, cr_tangent y, cr_complex *acc, bool *cplx)
{
    cr_status st = unthunk_pair(&x, &y);
    if (st != CR_OK)
        return st;
    if (cr_tangent_is_zero(x) || cr_tangent_is_zero(y) || x.tag == CR_TAN_ABSENT ||
        y.tag == CR_TAN_ABSENT)
        return CR_OK;
    if (x.tag == CR_TAN_NOTIMPL || y.tag == CR_TAN_NOTIMPL)
        return CR__FAIL(arena, CR_EUNIMPL, "dot: a NotImplemented tangent inside a structure");
    if (is_scalar(x.tag) && is_scalar(y.tag)) {
        *cplx = *cplx || x.tag == CR_TAN_C128 || y.tag == CR_TAN_C128;
        *acc += conj(scalar_value(x)) * scalar_value(y);
        return CR_OK;
    }
    if (x.tag == CR_TAN_ARRAY && y.tag == CR_TAN_ARRAY) {
        const cr_array *a = x.u.arr, *b = y.u.arr;
        if (!cr_array_same_shape(a, b))
            return shape_error(arena, "dot", a, b);
        *cplx = *cplx || a->dtype == CR_DT_C128 || b->dtype == CR_DT_C128;
        size_t n = cr_array_numel(a);
        if (a->structure == CR_MAT_DENSE && b->structure == CR_MAT_DENSE) {
            if (n == 0)
                return CR_OK;
            const cr_array *arrs[2] = {a, b};
            cr__iter it;
            cr__iter_init(&it, arrs, 2);
            cr_complex s = 0.0;
            do
                s += conj(cr__load(a, it.off[0])) * cr__load(b, it.off[1]);
            while (cr__iter_next(&it));
            *acc += s;
            return CR_OK;
        }
        for (size_t k = 0; k < n; k++)
            *acc += conj(cr_array_get_linear(a, k)) * cr_array_get_linear(b, k);
        return CR_OK;
    }
    if (x.tag == CR_TAN_STRUCT && y.tag == CR_TAN_STRUCT) {
        st = struct_check(arena, "dot", x, y);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < x.u.s.type->nfields; i++) {
            st = dot_rec(arena, cr_tangent_field(x, i), cr_tangent_field(y, i), acc, cplx);
            if (st != CR_OK)
                return st;
        }
        return CR_OK;
    }
    return kind_error(arena, "dot", x, y);
}

cr_status cr_tangent_dot(cr_arena *arena, cr_tangent x, cr_tangent y, cr_tangent *out)
{
    if (absorbed(x, y, out))
        return CR_OK;
    cr_complex acc = 0.0;
    bool cplx = false;
    cr_status st = dot_rec(arena, x, y, &acc, &cplx);
    if (st != CR_OK)
        return st;
    *out = cplx ? cr_tangent_c128(acc) : cr_tangent_f64(creal(acc));
    return CR_OK;
}

/* dest += y in place; dest is an inplaceable destination that can hold y. */
static void add_into(cr_array *dest, const cr_array *y)
{
    if (dest->structure == y->structure && !cr__struct_unit(y->structure)) {
        size_t n = cr_array_nstored(dest);
        if (n == 0)
            return;
        if (dest->dtype == CR_DT_F64 && y->dtype == CR_DT_F64 && cr_array_is_contiguous(dest) &&
            cr_array_is_contiguous(y)) {
            double *a = dest->data;
            const double *b = y->data;
            for (size_t k = 0; k < n; k++)
                a[k] += b[k];
            return;
        }
        cr_array ds = cr__storage_view(dest), ys = cr__storage_view(y);
        const cr_array *arrs[2] = {&ds, &ys};
        cr__iter it;
        cr__iter_init(&it, arrs, 2);
        do
            cr__store(&ds, it.off[0], cr__load(&ds, it.off[0]) + cr__load(&ys, it.off[1]));
        while (cr__iter_next(&it));
        return;
    }
    /* dest is dense, y structured: add y's logical elements. */
    size_t n = cr_array_numel(dest);
    if (n == 0)
        return;
    const cr_array *arrs[1] = {dest};
    cr__iter it;
    cr__iter_init(&it, arrs, 1);
    do
        cr__store(dest, it.off[0], cr__load(dest, it.off[0]) + cr_array_get_linear(y, it.count));
    while (cr__iter_next(&it));
}

static bool fits_into(const cr_array *dest, const cr_array *y)
{
    if (!cr_array_same_shape(dest, y))
        return false;
    if (y->dtype == CR_DT_C128 && dest->dtype != CR_DT_C128)
        return false;
    if (!cr_dtype_is_float((cr_dtype)y->dtype))
        return false;
    return dest->structure == CR_MAT_DENSE ||
           (dest->structure == y->structure && !cr__struct_unit(y->structure));
}

/* Whether two descriptors describe the same view: their fields, not their bytes (the
 * padding, and the dimensions past ndim, may hold anything: a struct copy need not copy
 * them, and the engine's descriptors made field by field leave the padding unset). */
static bool same_view(const cr_array *a, const cr_array *b)
{
    if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim ||
        a->structure != b->structure || a->flags != b->flags)
        return false;
    for (size_t i = 0; i < a->ndim && i < CR_ARRAY_MAX_DIMS; i++)
        if (a->shape[i] != b->shape[i] || a->strides[i] != b->strides[i])
            return false;
    return true;
}

static cr_status accum_ithunk(cr_arena *arena, cr_tangent x, cr_thunk *th, cr_tangent *out)
{
    cr_array before = *x.u.arr;
    cr_status st = th->add(arena, x.u.arr, th->env);
    if (st != CR_OK)
        return st;
    if (cr_ctx_debug(cr_arena_ctx(arena)) && !same_view(&before, x.u.arr))
        return CR__FAIL(arena, CR_EMISUSE,
                        "add!! of InplaceableThunk '%s' did not leave its destination in place "
                        "(the add! function replaced the destination array)",
                        th->name);
    *out = x;
    return CR_OK;
}

cr_status cr_tangent_accum(cr_arena *arena, cr_tangent x, cr_tangent y, cr_tangent *out)
{
    if (cr_tangent_is_inplaceable_destination(x)) {
        /* add! functions write dense storage: a structured x (a Diagonal stores only n
         * entries) gets the thunk's value instead, so add! cannot write past it. */
        if (y.tag == CR_TAN_THUNK && y.u.thunk->add != NULL && y.u.thunk->state != 2 &&
            x.u.arr->structure == CR_MAT_DENSE)
            return accum_ithunk(arena, x, y.u.thunk, out);
        if (y.tag == CR_TAN_THUNK) {
            cr_status st = cr_tangent_unthunk(y, &y);
            if (st != CR_OK)
                return st;
        }
        if (y.tag == CR_TAN_ARRAY && fits_into(x.u.arr, y.u.arr)) {
            add_into(x.u.arr, y.u.arr);
            *out = x;
            return CR_OK;
        }
        return cr_tangent_add(arena, x, y, out);
    }
    if (x.tag == CR_TAN_STRUCT && y.tag == CR_TAN_STRUCT && x.u.s.fields != NULL &&
        y.u.s.fields != NULL) {
        cr_status st = struct_check(arena, "add!!", x, y);
        if (st != CR_OK)
            return st;
        const cr_type *type = x.u.s.type;
        cr_tangent *f =
            cr__arena_array(arena, "add!!", type->nfields, sizeof *f, _Alignof(cr_tangent));
        if (f == NULL)
            return CR__ALLOC_STATUS(arena);
        for (size_t i = 0; i < type->nfields; i++) {
            if (!cr_tangent_field_present(x, i) && !cr_tangent_field_present(y, i)) {
                memset(&f[i], 0, sizeof f[i]);
                f[i].tag = CR_TAN_ABSENT;
                continue;
            }
            st = cr_tangent_accum(arena, cr_tangent_field(x, i), cr_tangent_field(y, i), &f[i]);
            if (st != CR_OK)
                return st;
        }
        *out = x;
        out->u.s.fields = f;
        return CR_OK;
    }
    return cr_tangent_add(arena, x, y, out);
}

cr_status cr_tangent_zeros_like(cr_arena *arena, cr_tangent t, cr_tangent *out)
{
    switch ((cr_tag)t.tag) {
    case CR_TAN_ZERO:
    case CR_TAN_NONE:
    case CR_TAN_NOTIMPL:
        return put(out, t);
    case CR_TAN_ABSENT:
        return put(out, cr_tangent_zero());
    case CR_TAN_F64:
        return put(out, cr_tangent_f64(0.0));
    case CR_TAN_F32:
        return put(out, cr_tangent_f32(0.0f));
    case CR_TAN_C128:
        return put(out, cr_tangent_c128(0.0));
    case CR_TAN_ARRAY: {
        cr_array *r;
        cr_status st = new_like(arena, t.u.arr, (cr_dtype)t.u.arr->dtype, &r);
        if (st != CR_OK)
            return st;
        *out = cr_tangent_array(r);
        return CR_OK;
    }
    case CR_TAN_STRUCT: {
        const cr_type *type = t.u.s.type;
        cr_tangent *f = cr_arena_calloc(arena, type->nfields ? type->nfields : 1, sizeof *f,
                                        _Alignof(cr_tangent));
        if (f == NULL)
            return CR__ALLOC_STATUS(arena);
        for (size_t i = 0; i < type->nfields; i++) {
            cr_status st = cr_tangent_zeros_like(arena, cr_tangent_field(t, i), &f[i]);
            if (st != CR_OK)
                return st;
        }
        *out = t;
        out->u.s.fields = f;
        return CR_OK;
    }
    case CR_TAN_THUNK: {
        cr_status st = cr_tangent_unthunk(t, &t);
        if (st != CR_OK)
            return st;
        return cr_tangent_zeros_like(arena, t, out);
    }
    }
    return CR__FAIL(arena, CR_ETANGENT, "invalid tangent tag %d", (int)t.tag);
}

cr_status cr_tangent_zero_of(cr_arena *arena, const cr_value *primal, cr_tangent *out)
{
    *out = cr_tangent_none();
    switch (primal->kind) {
    case CR_KIND_F64:
        return put(out, cr_tangent_f64(0.0));
    case CR_KIND_F32:
        return put(out, cr_tangent_f32(0.0f));
    case CR_KIND_C128:
        return put(out, cr_tangent_c128(0.0));
    case CR_KIND_ARRAY: {
        if (primal->u.arr == NULL)
            return CR__FAIL(arena, CR_EINVAL, "zero tangent of a NULL array");
        if (!cr_dtype_is_float((cr_dtype)primal->u.arr->dtype))
            return CR_OK;
        cr_array *r;
        cr_status st = new_like(arena, primal->u.arr, (cr_dtype)primal->u.arr->dtype, &r);
        if (st != CR_OK)
            return st;
        r->structure = cr__matstruct_tangent(r->structure); /* a unit triangle: Upper/Lower */
        *out = cr_tangent_array(r);
        return CR_OK;
    }
    case CR_KIND_STRUCT: {
        const cr_type *type = primal->u.obj.type;
        cr_tangent *f = cr_arena_calloc(arena, type->nfields ? type->nfields : 1, sizeof *f,
                                        _Alignof(cr_tangent));
        if (f == NULL)
            return CR__ALLOC_STATUS(arena);
        for (size_t i = 0; i < type->nfields; i++) {
            cr_value fv;
            if (cr_type_field_value(type, primal->u.obj.ptr, i, &fv) != CR_OK)
                return CR__FAIL(arena, CR_EINVAL, "type %s: bad field %zu", type->name, i);
            cr_status st = cr_tangent_zero_of(arena, &fv, &f[i]);
            if (st != CR_OK)
                return st;
        }
        *out = cr_tangent_struct_empty(type);
        out->u.s.fields = f;
        return CR_OK;
    }
    default:
        return CR_OK;
    }
}

cr_status cr_tangent_copy(cr_arena *arena, cr_tangent t, cr_tangent *out)
{
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    if (t.tag == CR_TAN_ARRAY) {
        cr_array *r;
        st = cr_array_copy(arena, t.u.arr, &r);
        if (st != CR_OK)
            return st;
        *out = cr_tangent_array(r);
        return CR_OK;
    }
    if (t.tag == CR_TAN_STRUCT && t.u.s.fields != NULL) {
        size_t n = t.u.s.type->nfields;
        cr_tangent *f =
            cr__arena_array(arena, "cr_tangent_copy", n, sizeof *f, _Alignof(cr_tangent));
        if (f == NULL)
            return CR__ALLOC_STATUS(arena);
        for (size_t i = 0; i < n; i++) {
            if (t.u.s.fields[i].tag == CR_TAN_ABSENT) {
                f[i] = t.u.s.fields[i];
                continue;
            }
            st = cr_tangent_copy(arena, t.u.s.fields[i], &f[i]);
            if (st != CR_OK)
                return st;
        }
        *out = t;
        out->u.s.fields = f;
        return CR_OK;
    }
    *out = t;
    return CR_OK;
}

static bool close_enough(cr_complex a, cr_complex b, double rtol, double atol)
{
    double d = cabs(a - b);
    double m = fmax(cabs(a), cabs(b));
    return d <= atol + rtol * m;
}

/* Whether every component of t is within atol of zero. */
static bool near_zero(cr_tangent t, double atol)
{
    if (cr_tangent_is_zero(t) || t.tag == CR_TAN_ABSENT)
        return true;
    switch ((cr_tag)t.tag) {
    case CR_TAN_F64:
    case CR_TAN_F32:
    case CR_TAN_C128:
        return cabs(scalar_value(t)) <= atol;
    case CR_TAN_ARRAY: {
        size_t n = cr_array_numel(t.u.arr);
        for (size_t k = 0; k < n; k++)
            if (!(cabs(cr_array_get_linear(t.u.arr, k)) <= atol))
                return false;
        return true;
    }
    case CR_TAN_STRUCT:
        for (size_t i = 0; i < t.u.s.type->nfields; i++)
            if (!near_zero(cr_tangent_field(t, i), atol))
                return false;
        return true;
    case CR_TAN_THUNK: /* a struct field: compared by its value, as isapprox's operands */
        return cr_tangent_unthunk(t, &t) == CR_OK && near_zero(t, atol);
    default:
        return false;
    }
}

bool cr_tangent_isapprox(cr_tangent a, cr_tangent b, double rtol, double atol)
{
    if (cr_tangent_unthunk(a, &a) != CR_OK || cr_tangent_unthunk(b, &b) != CR_OK)
        return false;
    if (a.tag == CR_TAN_NOTIMPL || b.tag == CR_TAN_NOTIMPL)
        return a.tag == b.tag;
    if (cr_tangent_is_zero(a) || a.tag == CR_TAN_ABSENT)
        return near_zero(b, atol);
    if (cr_tangent_is_zero(b) || b.tag == CR_TAN_ABSENT)
        return near_zero(a, atol);
    if (is_scalar(a.tag) && is_scalar(b.tag))
        return close_enough(scalar_value(a), scalar_value(b), rtol, atol);
    if (a.tag == CR_TAN_ARRAY && b.tag == CR_TAN_ARRAY) {
        if (!cr_array_same_shape(a.u.arr, b.u.arr))
            return false;
        size_t n = cr_array_numel(a.u.arr);
        for (size_t k = 0; k < n; k++)
            if (!close_enough(cr_array_get_linear(a.u.arr, k), cr_array_get_linear(b.u.arr, k),
                              rtol, atol))
                return false;
        return true;
    }
    if (a.tag == CR_TAN_STRUCT && b.tag == CR_TAN_STRUCT) {
        if (a.u.s.type != b.u.s.type)
            return false;
        for (size_t i = 0; i < a.u.s.type->nfields; i++)
            if (!cr_tangent_isapprox(cr_tangent_field(a, i), cr_tangent_field(b, i), rtol, atol))
                return false;
        return true;
    }
    return false;
}
