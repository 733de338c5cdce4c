/*
 * Friendly tangents: a C struct's real fields as tape inputs, and the gradient with
 * respect to them written back into a struct of the same C type through its descriptor
 * (Mooncake's friendly_tangents), or given as the raw structural tangent.
 */
#include <string.h>

#include "tape_impl.h"

static bool is_real(cr_kind k)
{
    return k == CR_KIND_F64 || k == CR_KIND_F32;
}

size_t cr_type_real_fields(const cr_type *type)
{
    if (type == NULL)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        if (is_real(fd->kind))
            n++;
        else if (fd->kind == CR_KIND_STRUCT)
            n += cr_type_real_fields(fd->type);
    }
    return n;
}

static cr_status check_type(cr_ctx *ctx, const cr_type *type)
{
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        if (fd->kind == CR_KIND_STRUCT) {
            if (fd->type == NULL)
                return cr_ctx_error(ctx, CR_EINVAL,
                                    "%s: field %zu is a struct without a descriptor", type->name,
                                    i);
            cr_status st = check_type(ctx, fd->type);
            if (st != CR_OK)
                return st;
        }
    }
    return CR_OK;
}

static void inputs_walk(cr_tape *t, const cr_type *type, const unsigned char *obj, cr_var *vars,
                        size_t *k)
{
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        const unsigned char *p = obj + fd->offset;
        if (fd->kind == CR_KIND_F64) {
            double v;
            memcpy(&v, p, sizeof v);
            vars[(*k)++] = cr_tape_input(t, v);
        } else if (fd->kind == CR_KIND_F32) {
            float v;
            memcpy(&v, p, sizeof v);
            vars[(*k)++] = cr_tape_input(t, (double)v);
        } else if (fd->kind == CR_KIND_STRUCT) {
            inputs_walk(t, fd->type, p, vars, k);
        }
    }
}

cr_status cr_tape_struct_inputs(cr_tape *t, const cr_type *type, const void *obj, cr_var *vars,
                                size_t n)
{
    if (t == NULL && (t = cr_tape_current()) == NULL)
        return CR_EMISUSE;
    if (type == NULL || obj == NULL || (vars == NULL && n > 0))
        return cr__tape_fail(t, CR_EINVAL, "cr_tape_struct_inputs: NULL type, struct or vars");
    cr_status st = check_type(t->ctx, type);
    if (st != CR_OK)
        return cr__tape_fail(t, st, "%s", cr_ctx_errmsg(t->ctx));
    size_t need = cr_type_real_fields(type);
    if (n < need)
        return cr__tape_fail(t, CR_EINVAL,
                             "cr_tape_struct_inputs: %s has %zu real fields, room "
                             "for %zu variables",
                             type->name, need, n);
    size_t k = 0;
    inputs_walk(t, type, obj, vars, &k);
    return t->status;
}

/* The index (in the depth-first order of real fields) of the field named by path. */
static bool find_path(const cr_type *type, const char *path, size_t *k)
{
    size_t len = strcspn(path, ".");
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        bool match =
            fd->name != NULL && strlen(fd->name) == len && strncmp(fd->name, path, len) == 0;
        if (match) {
            if (path[len] == '\0')
                return is_real(fd->kind);
            return fd->kind == CR_KIND_STRUCT && fd->type != NULL &&
                   find_path(fd->type, path + len + 1, k);
        }
        if (is_real(fd->kind))
            (*k)++;
        else if (fd->kind == CR_KIND_STRUCT)
            *k += cr_type_real_fields(fd->type);
    }
    return false;
}

cr_var cr_tape_struct_field(const cr_type *type, const cr_var *vars, const char *path)
{
    size_t k = 0;
    if (type == NULL || vars == NULL || path == NULL || !find_path(type, path, &k))
        return cr_const((double)NAN);
    return vars[k];
}

static void write_walk(const cr_type *type, unsigned char *obj, const double *g, size_t *k)
{
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        unsigned char *p = obj + fd->offset;
        switch (fd->kind) {
        case CR_KIND_F64:
            memcpy(p, &g[(*k)++], sizeof(double));
            break;
        case CR_KIND_F32: {
            float v = (float)g[(*k)++];
            memcpy(p, &v, sizeof v);
            break;
        }
        case CR_KIND_I64: {
            int64_t z = 0;
            memcpy(p, &z, sizeof z);
            break;
        }
        case CR_KIND_I32: {
            int z = 0;
            memcpy(p, &z, sizeof z);
            break;
        }
        case CR_KIND_BOOL: {
            bool z = false;
            memcpy(p, &z, sizeof z);
            break;
        }
        case CR_KIND_STRUCT:
            write_walk(fd->type, p, g, k);
            break;
        default: /* arrays, functions: left as they are */
            break;
        }
    }
}

/* The gradient with respect to the struct's variables, in the arena (rewound by the
 * caller). */
static cr_status struct_gradient(cr_tape *t, cr_var y, const cr_type *type, const cr_var *vars,
                                 double **g, size_t *n)
{
    if (t == NULL)
        return CR_EINVAL;
    if (type == NULL || (vars == NULL && cr_type_real_fields(type) > 0))
        return cr_ctx_error(t->ctx, CR_EINVAL, "struct gradient: NULL type or variables");
    cr_status st = check_type(t->ctx, type);
    if (st != CR_OK)
        return st;
    *n = cr_type_real_fields(type);
    *g = cr_arena_alloc(t->arena, (*n ? *n : 1) * sizeof **g, _Alignof(double));
    if (*g == NULL)
        return CR__ALLOC_STATUS(t->arena);
    return cr_tape_gradient(t, y, vars, *n, *g);
}

cr_status cr_tape_gradient_struct(cr_tape *t, cr_var y, const cr_type *type, const cr_var *vars,
                                  void *grad)
{
    if (t == NULL)
        return CR_EINVAL;
    if (grad == NULL)
        return cr_ctx_error(t->ctx, CR_EINVAL, "cr_tape_gradient_struct: grad is NULL");
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    double *g = NULL;
    size_t n = 0, k = 0;
    cr_status st = struct_gradient(t, y, type, vars, &g, &n);
    if (st == CR_OK)
        write_walk(type, grad, g, &k);
    cr_arena_rewind(t->arena, mk);
    return st;
}

static cr_status tangent_walk(cr_arena *arena, const cr_type *type, const double *g, size_t *k,
                              cr_tangent *out)
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
            cr_status st = tangent_walk(arena, fd->type, g, k, &f[i]);
            if (st != CR_OK)
                return st;
            break;
        }
        default:
            f[i] = cr_tangent_zero();
            break;
        }
    }
    return cr_tangent_struct(arena, type, NULL, f, type->nfields, out);
}

cr_status cr_tape_gradient_tangent(cr_tape *t, cr_var y, const cr_type *type, const cr_var *vars,
                                   cr_arena *arena, cr_tangent *out)
{
    if (t == NULL)
        return CR_EINVAL;
    if (arena == NULL || out == NULL)
        return cr_ctx_error(t->ctx, CR_EINVAL, "cr_tape_gradient_tangent: NULL arena or out");
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    double *g = NULL;
    size_t n = 0, k = 0;
    cr_status st = struct_gradient(t, y, type, vars, &g, &n);
    if (st == CR_OK) {
        if (arena == t->arena) {
            /* Keep the result: copy the gradient out of the scratch first. */
            double small[64], *copy = n <= 64 ? small : NULL;
            if (copy == NULL) {
                cr_arena_rewind(t->arena, mk);
                return cr_ctx_error(t->ctx, CR_EINVAL,
                                    "cr_tape_gradient_tangent: give an arena other than the "
                                    "tape's for structs of more than 64 real fields");
            }
            memcpy(copy, g, n * sizeof *g);
            cr_arena_rewind(t->arena, mk);
            return tangent_walk(arena, type, copy, &k, out);
        }
        st = tangent_walk(arena, type, g, &k, out);
    }
    cr_arena_rewind(t->arena, mk);
    return st;
}

/* ---- Closures (engine.c, tape.c): a functor's fields as variables ----------------------- */

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

cr_status cr__type_check(cr_ctx *ctx, const cr_type *type)
{
    return check_type(ctx, type);
}

cr_status cr__struct_values(cr_ctx *ctx, const cr_type *type, const void *obj, double *out)
{
    cr_status st = check_type(ctx, type);
    if (st != CR_OK)
        return st;
    size_t k = 0;
    values_walk(type, obj, out, &k);
    return CR_OK;
}

cr_status cr__struct_tangent(cr_arena *arena, const cr_type *type, const double *g, cr_tangent *out)
{
    size_t k = 0;
    return tangent_walk(arena, type, g, &k, out);
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
