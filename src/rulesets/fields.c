/*
 * The rules of struct fields: getfield, setfield! and ChainRulesCore's construct, for any
 * struct described by a cr_type. setfield! follows the mutating functions' convention
 * (src/rulesets/array/mutate.c): as a rule it returns the new contents of the struct, and
 * cr_setfield_frule() / cr_setfield_rrule() apply it in place, updating the struct's
 * MutableTangent (src/core/mutable.c). docs/tangents.md describes them.
 */
#include <limits.h>
#include <stdalign.h>
#include <stddef.h>

#include "array_impl.h"

/* ---- Helpers ------------------------------------------------------------------------------ */

/* Whether values of kind k have tangents (the rest get NoTangent). */
static bool diff_kind(cr_kind k)
{
    return k == CR_KIND_F64 || k == CR_KIND_F32 || k == CR_KIND_C128 || k == CR_KIND_ARRAY ||
           k == CR_KIND_STRUCT;
}

static const char *field_name(const cr_type *type, size_t i)
{
    return type->fields[i].name != NULL ? type->fields[i].name : "(tuple element)";
}

/* The field index of an integer argument, checked against the type. */
static cr_status field_index(cr_arena *arena, const char *who, const cr_type *type,
                             const cr_value *iv, size_t *out)
{
    if (iv->kind != CR_KIND_I64 && iv->kind != CR_KIND_I32)
        return CR__FAIL(arena, CR_EINVAL, "%s: the field index is a %s, not an integer", who,
                        cr_kind_name(iv->kind));
    if (iv->u.i64 < 0 || (uint64_t)iv->u.i64 >= type->nfields)
        return CR__FAIL(arena, CR_EINVAL, "%s: field %lld of %s, which has %zu field%s (0-based)",
                        who, (long long)iv->u.i64, type->name, type->nfields, CR__S(type->nfields));
    *out = (size_t)iv->u.i64;
    return CR_OK;
}

static cr_status struct_arg(cr_arena *arena, const char *who, const cr_value *v)
{
    if (v->kind != CR_KIND_STRUCT || v->u.obj.type == NULL || v->u.obj.ptr == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s: a %s is not a described struct", who,
                        cr_kind_name(v->kind));
    return CR_OK;
}

/* Write x into field i of the struct at p, converted to the field's kind as Julia's
 * setfield! converts (an integer into a float field, a real into a complex one). */
static cr_status write_field(cr_arena *arena, const char *who, const cr_type *type, void *p,
                             size_t i, const cr_value *x)
{
    const cr_field *f = &type->fields[i];
    unsigned char *at = (unsigned char *)p + f->offset;
    cr_complex z;
    bool number = cr__value_number(x, &z);
    bool real = number && x->kind != CR_KIND_C128;
    bool integer = x->kind == CR_KIND_I64 || x->kind == CR_KIND_I32 || x->kind == CR_KIND_BOOL;
    switch (f->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32: {
        if (!real)
            break;
        double d = creal(z);
        float s = (float)d;
        if (f->kind == CR_KIND_F64)
            memcpy(at, &d, sizeof d);
        else
            memcpy(at, &s, sizeof s);
        return CR_OK;
    }
    case CR_KIND_C128:
        if (!number)
            break;
        memcpy(at, &z, sizeof z);
        return CR_OK;
    case CR_KIND_I64:
    case CR_KIND_I32: {
        if (!integer)
            break;
        int64_t v = x->kind == CR_KIND_BOOL ? (int64_t)x->u.b : x->u.i64;
        if (f->kind == CR_KIND_I64) {
            memcpy(at, &v, sizeof v);
            return CR_OK;
        }
        if (v < INT_MIN || v > INT_MAX)
            return CR__FAIL(arena, CR_EINVAL,
                            "%s: %lld does not fit the int field '%s' of %s (InexactError)", who,
                            (long long)v, field_name(type, i), type->name);
        int w = (int)v;
        memcpy(at, &w, sizeof w);
        return CR_OK;
    }
    case CR_KIND_BOOL:
        if (x->kind != CR_KIND_BOOL)
            break;
        memcpy(at, &x->u.b, sizeof(bool));
        return CR_OK;
    case CR_KIND_ARRAY:
        if (x->kind != CR_KIND_ARRAY || x->u.arr == NULL)
            break;
        memcpy(at, x->u.arr, sizeof(cr_array));
        return CR_OK;
    case CR_KIND_STRUCT:
        if (x->kind != CR_KIND_STRUCT || x->u.obj.type != f->type || x->u.obj.ptr == NULL)
            break;
        memmove(at, x->u.obj.ptr, f->type->size);
        return CR_OK;
    case CR_KIND_FUNC:
        if (x->kind != CR_KIND_FUNC || x->u.func.self != NULL)
            break;
        memcpy(at, &x->u.func.fn, sizeof x->u.func.fn);
        return CR_OK;
    default:
        break;
    }
    return CR__FAIL(arena, CR_EINVAL, "%s: a %s%s%s for the %s field '%s' of %s", who,
                    cr_kind_name(x->kind), x->kind == CR_KIND_STRUCT && x->u.obj.type ? " " : "",
                    x->kind == CR_KIND_STRUCT && x->u.obj.type ? x->u.obj.type->name : "",
                    cr_kind_name(f->kind), field_name(type, i), type->name);
}

/* The tangent a field of kind k gets from a value x with tangent dx. */
static cr_tangent field_tangent(cr_kind k, const cr_value *x, cr_tangent dx)
{
    if (!diff_kind(k))
        return cr_tangent_none();
    if (!diff_kind(x->kind)) /* an integer stored in a float field is a constant */
        return cr_tangent_zero();
    return dx.tag == CR_TAN_ABSENT ? cr_tangent_zero() : dx;
}

/* The cotangent of a value of kind xk from the cotangent c of the field it went into:
 * ProjectTo(x) of c (the real part for a real x, f32 for f32, NoTangent for integers). */
static cr_status project_kind(cr_arena *arena, const char *who, cr_kind xk, cr_tangent c,
                              cr_tangent *out)
{
    if (!diff_kind(xk)) {
        *out = cr_tangent_none();
        return CR_OK;
    }
    cr_status st;
    if (c.tag == CR_TAN_THUNK && (st = cr_tangent_unthunk(c, &c)) != CR_OK)
        return st;
    cr_complex z;
    cr__tan_number k = cr__tangent_number(c, &z);
    if (k != CR__TN_NUMBER) { /* the zeros become ZeroTangent; the rest is passed on */
        *out = k == CR__TN_ZERO ? cr_tangent_zero() : c;
        return CR_OK;
    }
    if (xk == CR_KIND_F64)
        *out = cr_tangent_f64(creal(z));
    else if (xk == CR_KIND_F32)
        *out = cr_tangent_f32((float)creal(z));
    else if (xk == CR_KIND_C128)
        *out = cr_tangent_c128(z);
    else
        return CR__FAIL(arena, CR_ETANGENT, "%s: a number cotangent for a %s", who,
                        cr_kind_name(xk));
    return CR_OK;
}

/* A new struct of the type, zero-filled. */
static void *new_struct(cr_arena *arena, const cr_type *type)
{
    return cr_arena_calloc(arena, 1, type->size ? type->size : 1, alignof(max_align_t));
}

/* A structural tangent of type with every field from f (n == nfields, ABSENT allowed). */
static cr_status make_struct_tangent(cr_arena *arena, const cr_type *type, const cr_tangent *f,
                                     cr_tangent *out)
{
    return cr_tangent_struct(arena, type, NULL, f, type->nfields, out);
}

static cr_tangent *tangent_list(cr_arena *arena, const char *who, size_t n)
{
    cr_tangent *f = cr__arena_array(arena, who, n, sizeof *f, _Alignof(cr_tangent));
    if (f != NULL)
        for (size_t i = 0; i < n; i++) {
            memset(&f[i], 0, sizeof f[i]);
            f[i].tag = CR_TAN_ABSENT;
        }
    return f;
}

/* The tangent (what = "tangent") or cotangent d of a struct of the type, unthunked: a
 * structural tangent of that type or a zero (or NotImplemented, where notimpl is true);
 * CR_ETANGENT naming the rule for anything else. */
static cr_status struct_tangent_of(cr_arena *arena, const char *who, const char *what, bool notimpl,
                                   const cr_type *type, cr_tangent *d)
{
    cr_status st;
    if (d->tag == CR_TAN_THUNK && (st = cr_tangent_unthunk(*d, d)) != CR_OK)
        return st;
    if ((d->tag == CR_TAN_STRUCT && d->u.s.type != type) ||
        (d->tag != CR_TAN_STRUCT && d->tag != CR_TAN_ZERO && d->tag != CR_TAN_NONE &&
         !(notimpl && d->tag == CR_TAN_NOTIMPL)))
        return CR__FAIL(arena, CR_ETANGENT, "%s: a %s %s for a %s", who,
                        d->tag == CR_TAN_STRUCT ? d->u.s.type->name : cr_tag_name((cr_tag)d->tag),
                        what, type->name);
    return CR_OK;
}

/* A struct rule's pullback starts here: the cotangent *dy checked (struct_tangent_of) into *d,
 * and NoTangent for the function (dx[0]). */
static cr_status struct_pullback_start(cr_arena *arena, const char *who, const cr_type *type,
                                       const cr_tangent *dy, cr_tangent *dx, cr_tangent *d)
{
    *d = *dy;
    dx[0] = cr_tangent_none();
    return struct_tangent_of(arena, who, "cotangent", false, type, d);
}

/* The arguments of getfield(obj, i) and setfield!(obj, i, x): `want` of them, a described
 * struct first and the index *i of one of its fields second. */
static cr_status field_args(cr_arena *arena, const char *who, size_t want, const cr_value *args,
                            size_t nargs, size_t *i)
{
    cr_status st = nargs == want
                       ? struct_arg(arena, who, &args[0])
                       : CR__FAIL(arena, CR_EINVAL, "%s: %zu arguments, not %zu", who, want, nargs);
    return st != CR_OK ? st : field_index(arena, who, args[0].u.obj.type, &args[1], i);
}

/* The function value cr_fn_VALUE of the function NAME (named STR) with its primal. */
#define FIELD_FN(NAME, VALUE, STR, ARITY)                          \
    static const cr_function NAME##_function = {                   \
        .name = (STR), .arity = (ARITY), .primal = NAME##_primal}; \
    const cr_value cr_fn_##VALUE = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}}

/* What the pullbacks of getfield and setfield! keep: the struct's type, the field and the
 * kind of the value setfield! wrote. */
typedef struct field_env {
    const cr_type *type;
    size_t i;
    cr_kind xkind;
} field_env;

/* ---- getfield(obj, i) ------------------------------------------------------------------- */

static cr_status getfield_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                 size_t nargs, cr_value *out)
{
    (void)f;
    size_t i;
    cr_status st = field_args(arena, "getfield", 2, args, nargs, &i);
    if (st == CR_OK && cr_type_field_value(args[0].u.obj.type, args[0].u.obj.ptr, i, out) != CR_OK)
        st = CR__FAIL(arena, CR_EINVAL, "getfield: the descriptor of %s is inconsistent",
                      args[0].u.obj.type->name);
    return st;
}

FIELD_FN(getfield, getfield, "getfield", 2);

static cr_status getfield_frule(CR__FRULE_PARAMS)
{
    cr_tangent d = dargs[1];
    cr_status st = getfield_primal(arena, f, args, nargs, y);
    if (st == CR_OK)
        st = struct_tangent_of(arena, "getfield", "tangent", true, args[0].u.obj.type, &d);
    if (st != CR_OK)
        return st;
    size_t i = (size_t)args[1].u.i64;
    cr_kind k = args[0].u.obj.type->fields[i].kind;
    *dy = !diff_kind(k) ? cr_tangent_none() : d.tag == CR_TAN_NOTIMPL ? d : cr_tangent_field(d, i);
    if (dy->tag == CR_TAN_NONE && diff_kind(k))
        *dy = cr_tangent_zero();
    return CR_OK;
}

static cr_status getfield_pullback(CR__PULLBACK_PARAMS)
{
    const field_env *e = env;
    dx[0] = cr_tangent_none();
    dx[2] = cr_tangent_none();
    if (!diff_kind(e->type->fields[e->i].kind)) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    cr_tangent *f = tangent_list(arena, "getfield_pullback", e->type->nfields);
    if (f == NULL)
        return CR__ALLOC_STATUS(arena);
    f[e->i] = *dy;
    return make_struct_tangent(arena, e->type, f, &dx[1]);
}

/* ---- setfield!(obj, i, x) -------------------------------------------------------------- */

static cr_status setfield_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                 size_t nargs, cr_value *out)
{
    (void)f;
    size_t i;
    cr_status st = field_args(arena, "setfield!", 3, args, nargs, &i);
    if (st != CR_OK)
        return st;
    const cr_type *type = args[0].u.obj.type;
    void *p = new_struct(arena, type);
    if (p == NULL)
        return CR__ALLOC_STATUS(arena);
    memcpy(p, args[0].u.obj.ptr, type->size);
    if ((st = write_field(arena, "setfield!", type, p, i, &args[2])) != CR_OK)
        return st;
    *out = cr_value_struct(type, p);
    return CR_OK;
}

FIELD_FN(setfield, setfield_bang, "setfield!", 3);

static cr_status setfield_frule(CR__FRULE_PARAMS)
{
    cr_status st = setfield_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    const cr_type *type = args[0].u.obj.type;
    size_t i = (size_t)args[1].u.i64;
    cr_tangent d = dargs[1];
    if ((st = struct_tangent_of(arena, "setfield!", "tangent", false, type, &d)) != CR_OK)
        return st;
    cr_tangent *fl = tangent_list(arena, "setfield!", type->nfields);
    if (fl == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < type->nfields; k++) {
        cr_tangent t = cr_tangent_field(d, k);
        fl[k] = !diff_kind(type->fields[k].kind) ? cr_tangent_none()
                : t.tag == CR_TAN_NONE           ? cr_tangent_zero()
                                                 : t;
    }
    fl[i] = field_tangent(type->fields[i].kind, &args[2], dargs[3]);
    return make_struct_tangent(arena, type, fl, dy);
}

static cr_status setfield_pullback(CR__PULLBACK_PARAMS)
{
    const field_env *e = env;
    cr_tangent d;
    cr_status st = struct_pullback_start(arena, "setfield!", e->type, dy, dx, &d);
    if (st == CR_OK)
        st = project_kind(arena, "setfield!", e->xkind, cr_tangent_field(d, e->i), &dx[3]);
    if (st != CR_OK)
        return st;
    dx[2] = cr_tangent_none();
    /* the old value of field i never reaches the result: its cotangent is zero */
    cr_tangent *fl = tangent_list(arena, "setfield_pullback", e->type->nfields);
    if (fl == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < e->type->nfields; k++)
        if (cr_tangent_field_present(d, k))
            fl[k] = d.u.s.fields[k];
    fl[e->i] = diff_kind(e->type->fields[e->i].kind) ? cr_tangent_zero() : cr_tangent_none();
    return make_struct_tangent(arena, e->type, fl, &dx[1]);
}

/* The rrules of getfield (set false) and setfield! (set true): the primal, then the pullback
 * over the struct's type, the field index and the kind of the value written. */
static cr_status field_rrule(bool set, cr_arena *arena, const cr_value *f, const cr_value *args,
                             size_t nargs, cr_value *y, cr_pullback *pb)
{
    cr_status st =
        set ? setfield_primal(arena, f, args, nargs, y) : getfield_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    CR__ARENA_ZNEW(arena, field_env, e);
    e->type = args[0].u.obj.type;
    e->i = (size_t)args[1].u.i64;
    if (set) {
        e->xkind = args[2].kind;
        *pb = (cr_pullback){setfield_pullback, e, "setfield!_pullback", 4};
    } else {
        *pb = (cr_pullback){getfield_pullback, e, "getfield_pullback", 3};
    }
    return CR_OK;
}

static cr_status getfield_rrule(CR__RRULE_PARAMS)
{
    return field_rrule(false, arena, f, args, nargs, y, pb);
}

static cr_status setfield_rrule(CR__RRULE_PARAMS)
{
    return field_rrule(true, arena, f, args, nargs, y, pb);
}

/* ---- In place ------------------------------------------------------------------------------ */

static cr_status setfield_check(cr_arena *arena, const cr_value *args, size_t nargs)
{
    if (arena == NULL)
        return CR_EINVAL;
    if (args == NULL || nargs != 3)
        return CR__FAIL(arena, CR_EINVAL, "setfield!: 3 arguments, not %zu", args ? nargs : 0);
    return struct_arg(arena, "setfield!", &args[0]);
}

cr_status cr_setfield_frule(const cr_config *cfg, cr_arena *arena, const cr_value *args,
                            const cr_tangent *dargs, size_t nargs)
{
    cr_status st = setfield_check(arena, args, nargs);
    if (st != CR_OK)
        return st;
    if (dargs == NULL)
        return CR__FAIL(arena, CR_EINVAL, "setfield!: no tangents");
    cr_tangent mt = dargs[1];
    if (mt.tag != CR_TAN_STRUCT || mt.u.s.type != args[0].u.obj.type || mt.u.s.fields == NULL)
        return CR__FAIL(arena, CR_ETANGENT,
                        "setfield!: the struct's tangent must be a MutableTangent of %s "
                        "(cr_mutable_tangent()), to update in place",
                        args[0].u.obj.type->name);
    cr_value y;
    cr_tangent dy;
    if ((st = cr_frule(cfg, arena, dargs, &cr_fn_setfield_bang, args, nargs, &y, &dy)) != CR_OK)
        return st;
    if ((st = cr_mutable_tangent_assign(arena, mt, dy)) != CR_OK)
        return st;
    memcpy(args[0].u.obj.ptr, y.u.obj.ptr, args[0].u.obj.type->size);
    return CR_OK;
}

cr_status cr_setfield_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *args,
                            size_t nargs, cr_pullback *pb)
{
    cr_status st = setfield_check(arena, args, nargs);
    if (st != CR_OK)
        return st;
    if (pb == NULL)
        return CR__FAIL(arena, CR_EINVAL, "setfield!: no pullback given");
    cr_value y;
    if ((st = cr_rrule(cfg, arena, &cr_fn_setfield_bang, args, nargs, &y, pb)) != CR_OK)
        return st;
    memcpy(args[0].u.obj.ptr, y.u.obj.ptr, args[0].u.obj.type->size);
    return CR_OK;
}

/* ---- construct(like, fields...) --------------------------------------------------------- */

static cr_status construct_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                  size_t nargs, cr_value *out)
{
    (void)f;
    if (nargs < 1 || args[0].kind != CR_KIND_STRUCT || args[0].u.obj.type == NULL)
        return CR__FAIL(arena, CR_EINVAL,
                        "construct: the first argument is a value of the type to build");
    const cr_type *type = args[0].u.obj.type;
    if (nargs - 1 != type->nfields)
        return CR__FAIL(arena, CR_EINVAL, "construct: %zu field value%s for %s, which has %zu",
                        nargs - 1, CR__S(nargs - 1), type->name, type->nfields);
    void *p = new_struct(arena, type);
    if (p == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < type->nfields; k++) {
        cr_status st = write_field(arena, "construct", type, p, k, &args[k + 1]);
        if (st != CR_OK)
            return st;
    }
    *out = cr_value_struct(type, p);
    return CR_OK;
}

FIELD_FN(construct, construct, "construct", -1);

static cr_status construct_frule(CR__FRULE_PARAMS)
{
    cr_status st = construct_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    const cr_type *type = args[0].u.obj.type;
    cr_tangent *fl = tangent_list(arena, "construct", type->nfields);
    if (fl == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < type->nfields; k++)
        fl[k] = field_tangent(type->fields[k].kind, &args[k + 1], dargs[k + 2]);
    return make_struct_tangent(arena, type, fl, dy);
}

typedef struct construct_env {
    const cr_type *type;
    cr_kind kinds[CR_SIG_MAX_ARGS];
} construct_env;

static cr_status construct_pullback(CR__PULLBACK_PARAMS)
{
    const construct_env *e = env;
    cr_tangent d;
    cr_status st = struct_pullback_start(arena, "construct", e->type, dy, dx, &d);
    dx[1] = cr_tangent_none(); /* the type's witness: only its type is read */
    for (size_t k = 0; k + 2 < nx && st == CR_OK; k++)
        st = project_kind(arena, "construct", e->kinds[k], cr_tangent_field(d, k), &dx[k + 2]);
    return st;
}

static cr_status construct_rrule(CR__RRULE_PARAMS)
{
    if (nargs > CR_SIG_MAX_ARGS)
        return CR__FAIL(arena, CR_EINVAL, "construct: %zu arguments, more than %d", nargs,
                        CR_SIG_MAX_ARGS);
    cr_status st = construct_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    CR__ARENA_NEW(arena, construct_env, e);
    e->type = args[0].u.obj.type;
    for (size_t k = 0; k + 1 < nargs && k < CR_SIG_MAX_ARGS; k++)
        e->kinds[k] = args[k + 1].kind;
    *pb = (cr_pullback){construct_pullback, e, "construct_pullback", nargs + 1};
    return CR_OK;
}

/* ---- Test registrations -------------------------------------------------------------------- */

/* The struct the registration tests use: real, complex, integer and nested fields. */
typedef struct sample_inner {
    double u;
    float s;
} sample_inner;
static const cr_field k_sample_inner_fields[] = {
    {"u", offsetof(sample_inner, u), CR_KIND_F64, NULL},
    {"s", offsetof(sample_inner, s), CR_KIND_F32, NULL}};
static const cr_type k_sample_inner = {"fields_sample_inner", sizeof(sample_inner), 2,
                                       k_sample_inner_fields};

typedef struct sample_obj {
    double x;
    cr_complex z;
    int64_t n;
    sample_inner in;
} sample_obj;
static const cr_field k_sample_fields[] = {
    {"x", offsetof(sample_obj, x), CR_KIND_F64, NULL},
    {"z", offsetof(sample_obj, z), CR_KIND_C128, NULL},
    {"n", offsetof(sample_obj, n), CR_KIND_I64, NULL},
    {"in", offsetof(sample_obj, in), CR_KIND_STRUCT, &k_sample_inner}};
static const cr_type k_sample_type = {"fields_sample", sizeof(sample_obj), 4, k_sample_fields};

/* A one-field type for construct's variadic signature at its minimum arity. */
typedef struct sample_one {
    double v;
} sample_one;
static const cr_field k_one_fields[] = {{"v", offsetof(sample_one, v), CR_KIND_F64, NULL}};
static const cr_type k_one_type = {"fields_sample_one", sizeof(sample_one), 1, k_one_fields};

static double rnd(uint64_t *rng)
{
    return ((double)cr__rng_below(rng, 1u << 20) / (double)(1u << 20)) * 6.0 - 3.0;
}

static sample_obj *sample_struct(cr_arena *arena, uint64_t *rng)
{
    sample_obj *o = cr_arena_calloc(arena, 1, sizeof *o, _Alignof(sample_obj));
    if (o != NULL) {
        o->x = rnd(rng);
        o->z = cr__c(rnd(rng), rnd(rng));
        o->n = (int64_t)cr__rng_below(rng, 7);
        o->in.u = rnd(rng);
        o->in.s = (float)rnd(rng);
    }
    return o;
}

static cr_status sample_getfield(CR__SAMPLE_PARAMS)
{
    sample_obj *o = sample_struct(arena, rng);
    if (o == NULL)
        return CR__ALLOC_STATUS(arena);
    args[0] = cr_value_struct(&k_sample_type, o);
    args[1] = cr_value_i64((int64_t)cr__rng_below(rng, 4));
    return CR_OK;
}

static cr_status sample_setfield(CR__SAMPLE_PARAMS)
{
    sample_obj *o = sample_struct(arena, rng), *v = sample_struct(arena, rng);
    if (o == NULL || v == NULL)
        return CR__ALLOC_STATUS(arena);
    size_t i = cr__rng_below(rng, 4);
    args[0] = cr_value_struct(&k_sample_type, o);
    args[1] = cr_value_i64((int64_t)i);
    switch (i) {
    case 0:
        args[2] = cr_value_f64(rnd(rng));
        break;
    case 1: /* a complex field takes a real or a complex value */
        args[2] = cr__rng_below(rng, 2) ? cr_value_f64(rnd(rng))
                                        : cr_value_c128(cr__c(rnd(rng), rnd(rng)));
        break;
    case 2:
        args[2] = cr_value_i64((int64_t)cr__rng_below(rng, 9));
        break;
    default:
        args[2] = cr_value_struct(&k_sample_inner, &v->in);
        break;
    }
    return CR_OK;
}

static cr_status sample_construct(CR__SAMPLE_PARAMS)
{
    sample_one *w = cr_arena_calloc(arena, 1, sizeof *w, _Alignof(sample_one));
    if (w == NULL)
        return CR__ALLOC_STATUS(arena);
    w->v = rnd(rng);
    args[0] = cr_value_struct(&k_one_type, w);
    args[1] = cr_value_f64(rnd(rng));
    return CR_OK;
}

static const cr_rule_test k_test_getfield = {.sample = sample_getfield};
static const cr_rule_test k_test_setfield = {.sample = sample_setfield};
static const cr_rule_test k_test_construct = {.sample = sample_construct};

CR_INTERNAL cr_status cr__family_fields(cr_registry *reg);

cr_status cr__family_fields(cr_registry *reg)
{
    const cr_argspec get_sig[2] = {CR_ARG_STRUCT(NULL), CR_ARG_INT};
    const cr_argspec set_sig[3] = {CR_ARG_STRUCT(NULL), CR_ARG_INT, CR_ARG_ANY};
    const cr_argspec con_sig[2] = {CR_ARG_STRUCT(NULL), CR_ARG_ANY};
    const struct {
        const cr_function *fn;
        const cr_argspec *sig;
        size_t n;
        bool variadic;
        cr_frule_fn frule;
        cr_rrule_fn rrule;
        const cr_rule_test *test;
    } defs[] = {
        {&getfield_function, get_sig, 2, false, getfield_frule, getfield_rrule, &k_test_getfield},
        {&setfield_function, set_sig, 3, false, setfield_frule, setfield_rrule, &k_test_setfield},
        {&construct_function, con_sig, 2, true, construct_frule, construct_rrule,
         &k_test_construct},
    };
    for (size_t k = 0; k < sizeof defs / sizeof defs[0]; k++) {
        cr_status st = cr__add_rule_so(reg, defs[k].fn, defs[k].sig, defs[k].n, defs[k].variadic,
                                       defs[k].frule, defs[k].rrule, defs[k].test, CR_LINEAR, NULL);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}
