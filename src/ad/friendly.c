/*
 * Friendly tangents: a C struct's real fields (scalar variables) and array fields (array
 * variables) as tape inputs, and the gradient with respect to them written back into a
 * struct of the same C type through its descriptor (Mooncake's friendly_tangents), or given
 * as the raw structural tangent.
 */
#include <string.h>

#include "../rules/array_rule_impl.h"
#include "tape_impl.h"

static bool is_real(cr_kind k)
{
    return k == CR_KIND_F64 || k == CR_KIND_F32;
}

/* Whether a field of kind k is one of the group counted: the real fields (scalar
 * variables) or the array fields (array variables). */
static bool in_group(cr_kind k, bool arrays)
{
    return arrays ? k == CR_KIND_ARRAY : is_real(k);
}

static size_t count_fields(const cr_type *type, bool arrays)
{
    if (type == NULL)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        if (in_group(fd->kind, arrays))
            n++;
        else if (fd->kind == CR_KIND_STRUCT)
            n += count_fields(fd->type, arrays);
    }
    return n;
}

size_t cr_type_real_fields(const cr_type *type)
{
    return count_fields(type, false);
}

size_t cr_type_array_fields(const cr_type *type)
{
    return count_fields(type, true);
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

static void array_inputs_walk(cr_tape *t, const cr_type *type, const unsigned char *obj,
                              cr_avar *avars, size_t *k)
{
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        const unsigned char *p = obj + fd->offset;
        if (fd->kind == CR_KIND_ARRAY)
            avars[(*k)++] = cr_tape_array_input(t, (const cr_array *)(const void *)p);
        else if (fd->kind == CR_KIND_STRUCT)
            array_inputs_walk(t, fd->type, p, avars, k);
    }
}

/* The checks common to both kinds of struct inputs: the tape (NULL: the current one), the
 * arguments, the descriptor, and room for the fields of the group. */
static cr_status inputs_check(cr_tape **tp, const char *who, const cr_type *type, const void *obj,
                              const void *out, size_t n, bool arrays)
{
    cr_tape *t = *tp;
    if (t == NULL && (*tp = t = cr_tape_current()) == NULL)
        return CR_EMISUSE;
    if (type == NULL || obj == NULL || (out == NULL && n > 0))
        return cr__tape_fail(t, CR_EINVAL, "%s: NULL type, struct or variables", who);
    cr_status st = check_type(t->ctx, type);
    if (st != CR_OK)
        return cr__tape_fail(t, st, "%s", cr_ctx_errmsg(t->ctx));
    size_t need = count_fields(type, arrays);
    if (n < need)
        return cr__tape_fail(t, CR_EINVAL, "%s: %s has %zu %s fields, room for %zu variable%s", who,
                             type->name, need, arrays ? "array" : "real", n, CR__S(n));
    return CR_OK;
}

cr_status cr_tape_struct_inputs(cr_tape *t, const cr_type *type, const void *obj, cr_var *vars,
                                size_t n)
{
    cr_status st = inputs_check(&t, "cr_tape_struct_inputs", type, obj, vars, n, false);
    if (st != CR_OK)
        return st;
    size_t k = 0;
    inputs_walk(t, type, obj, vars, &k);
    return t->status;
}

cr_status cr_tape_struct_array_inputs(cr_tape *t, const cr_type *type, const void *obj,
                                      cr_avar *avars, size_t na)
{
    cr_status st = inputs_check(&t, "cr_tape_struct_array_inputs", type, obj, avars, na, true);
    if (st != CR_OK)
        return st;
    size_t k = 0;
    array_inputs_walk(t, type, obj, avars, &k);
    return t->status;
}

/* The index (in the depth-first order of the group's fields) of the field named by path. */
static bool find_path(const cr_type *type, const char *path, bool arrays, size_t *k)
{
    size_t len = strcspn(path, ".");
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        bool match =
            fd->name != NULL && strlen(fd->name) == len && strncmp(fd->name, path, len) == 0;
        if (match) {
            if (path[len] == '\0')
                return in_group(fd->kind, arrays);
            return fd->kind == CR_KIND_STRUCT && fd->type != NULL &&
                   find_path(fd->type, path + len + 1, arrays, k);
        }
        if (in_group(fd->kind, arrays))
            (*k)++;
        else if (fd->kind == CR_KIND_STRUCT)
            *k += count_fields(fd->type, arrays);
    }
    return false;
}

cr_var cr_tape_struct_field(const cr_type *type, const cr_var *vars, const char *path)
{
    size_t k = 0;
    if (type == NULL || vars == NULL || path == NULL || !find_path(type, path, false, &k))
        return cr_const((double)NAN);
    return vars[k];
}

cr_avar cr_tape_struct_array_field(const cr_type *type, const cr_avar *avars, const char *path)
{
    size_t k = 0;
    if (type == NULL || avars == NULL || path == NULL || !find_path(type, path, true, &k))
        return cr_aconst(NULL);
    return avars[k];
}

static cr_status tangent_walk(cr_arena *arena, const cr_type *type, const double *g, size_t *k,
                              cr_array *const *ag, size_t *ka, cr_tangent *out);

/* Writing a friendly gradient: the tape (its engine's customised types, its arena for raw
 * tangents), the real fields' gradient g from index k, and the array fields' gradients ag
 * (NULL when the arrays are not variables) from index ka. */
typedef struct writer {
    cr_tape *t;
    const char *who;
    const double *g;
    size_t k;
    cr_array *const *ag;
    size_t ka;
} writer;

/* Write the friendly gradient of a struct of `type` at obj: through the engine's
 * customised conversion of the type when it has one (given the raw tangent of the struct),
 * field by field otherwise. */
static cr_status write_struct(writer *w, const cr_type *type, unsigned char *obj)
{
    const cr__friendly *cust = cr__engine_friendly_of(w->t->engine, type);
    if (cust != NULL) {
        cr_tangent raw;
        cr_status st = tangent_walk(w->t->arena, type, w->g, &w->k, w->ag, &w->ka, &raw);
        if (st != CR_OK) /* the tape's scratch: as a sweep's workspace, the tape's failure */
            return cr__tape_fail_ctx(w->t, st, w->who);
        st = cust->fn(type, raw, obj, cust->udata);
        if (st != CR_OK)
            return cr_ctx_error(w->t->ctx, st, "%s: the friendly gradient of %s failed (%s)",
                                w->who, type->name, cr_status_str(st));
        return CR_OK;
    }
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        unsigned char *p = obj + fd->offset;
        switch (fd->kind) {
        case CR_KIND_F64:
            memcpy(p, &w->g[w->k++], sizeof(double));
            break;
        case CR_KIND_F32: {
            float v = (float)w->g[w->k++];
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
        case CR_KIND_STRUCT: {
            cr_status st = write_struct(w, fd->type, p);
            if (st != CR_OK)
                return st;
            break;
        }
        case CR_KIND_ARRAY: /* filled by the sweep (or not a variable): left as it is */
            if (w->ag != NULL)
                w->ka++;
            break;
        default: /* functions: left as they are */
            break;
        }
    }
    return CR_OK;
}

/* grad's array fields, depth first: the arrays the array fields' gradients go into. */
static cr_status dest_arrays_walk(cr_ctx *ctx, const char *who, const cr_type *type,
                                  unsigned char *obj, cr_array **out, size_t *k)
{
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *fd = &type->fields[i];
        unsigned char *p = obj + fd->offset;
        if (fd->kind == CR_KIND_ARRAY) {
            cr_array *a = (cr_array *)(void *)p;
            if (a->data == NULL)
                return cr_ctx_error(ctx, CR_EINVAL,
                                    "%s: the array field %s of %s in grad has no data for its "
                                    "gradient",
                                    who, fd->name != NULL ? fd->name : "(unnamed)", type->name);
            out[(*k)++] = a;
        } else if (fd->kind == CR_KIND_STRUCT) {
            cr_status st = dest_arrays_walk(ctx, who, fd->type, p, out, k);
            if (st != CR_OK)
                return st;
        }
    }
    return CR_OK;
}

/* The checks common to the struct gradients: the descriptor and the variables (avars only
 * when arrays). */
static cr_status gradient_check(cr_tape *t, const char *who, const cr_type *type,
                                const cr_var *vars, const cr_avar *avars, bool arrays)
{
    if (type == NULL || (vars == NULL && count_fields(type, false) > 0) ||
        (arrays && avars == NULL && count_fields(type, true) > 0))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: NULL type or variables", who);
    if (t->status != CR_OK)
        return t->status;
    cr_status st = check_type(t->ctx, type);
    /* Variables of an earlier recording are refused before their arrays, which the caller
     * may have released after the reset, are read. */
    if (st == CR_OK && arrays)
        st = cr__check_avars(t, who, avars, count_fields(type, true), "array input");
    return st;
}

/* The gradient of y with respect to the struct's variables: the real fields' into *g (in
 * `arena`), the array fields' into the arrays ag (NULL: the real fields only). */
static cr_status struct_gradient(cr_tape *t, cr_arena *arena, cr_var y, const cr_type *type,
                                 const cr_var *vars, const cr_avar *avars, cr_array *const *ag,
                                 double **g)
{
    size_t n = count_fields(type, false);
    *g = cr_arena_alloc(arena, (n ? n : 1) * sizeof **g, _Alignof(double));
    if (*g == NULL) /* the sweep's workspace: a failure is the tape's, as in the sweeps */
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(arena), "struct gradient");
    if (ag == NULL)
        return cr_tape_gradient(t, y, vars, n, *g);
    return cr_tape_gradient_arrays(t, y, vars, n, *g, avars, count_fields(type, true), ag);
}

static cr_status gradient_struct(cr_tape *t, const char *who, cr_var y, const cr_type *type,
                                 const cr_var *vars, const cr_avar *avars, bool arrays, void *grad)
{
    if (t == NULL)
        return CR_EINVAL;
    if (grad == NULL)
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: grad is NULL", who);
    cr_status st = gradient_check(t, who, type, vars, avars, arrays);
    if (st != CR_OK)
        return st;
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    cr_array **ag = NULL;
    if (arrays) {
        size_t na = count_fields(type, true), k = 0;
        ag = cr_arena_alloc(t->arena, (na ? na : 1) * sizeof *ag, _Alignof(cr_array *));
        st = ag == NULL ? cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), who)
                        : dest_arrays_walk(t->ctx, who, type, grad, ag, &k);
    }
    double *g = NULL;
    if (st == CR_OK)
        st = struct_gradient(t, t->arena, y, type, vars, avars, ag, &g);
    /* Written into a copy first, so that a customised conversion that fails leaves grad as
     * it was. */
    unsigned char *copy = NULL;
    if (st == CR_OK) {
        copy = cr_arena_alloc(t->arena, type->size ? type->size : 1, _Alignof(max_align_t));
        if (copy == NULL)
            st = cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), who);
    }
    if (st == CR_OK) {
        memcpy(copy, grad, type->size);
        writer w = {.t = t, .who = who, .g = g, .ag = ag};
        st = write_struct(&w, type, copy);
    }
    if (st == CR_OK)
        memcpy(grad, copy, type->size);
    cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_gradient_struct(cr_tape *t, cr_var y, const cr_type *type, const cr_var *vars,
                                  void *grad)
{
    return gradient_struct(t, "cr_tape_gradient_struct", y, type, vars, NULL, false, grad);
}

cr_status cr_tape_gradient_struct_arrays(cr_tape *t, cr_var y, const cr_type *type,
                                         const cr_var *vars, const cr_avar *avars, void *grad)
{
    return gradient_struct(t, "cr_tape_gradient_struct_arrays", y, type, vars, avars, true, grad);
}

/* The structural tangent of `type` from the real fields' gradient g and the array fields'
 * gradients ag (NULL: array fields are ZeroTangent), depth first from *k and *ka. */
static cr_status tangent_walk(cr_arena *arena, const cr_type *type, const double *g, size_t *k,
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
            cr_status st = tangent_walk(arena, fd->type, g, k, ag, ka, &f[i]);
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

static cr_status gradient_tangent(cr_tape *t, const char *who, cr_var y, const cr_type *type,
                                  const cr_var *vars, const cr_avar *avars, bool arrays,
                                  cr_arena *arena, cr_tangent *out)
{
    if (t == NULL)
        return CR_EINVAL;
    if (arena == NULL || out == NULL)
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: NULL arena or out", who);
    cr_status st = gradient_check(t, who, type, vars, avars, arrays);
    if (st != CR_OK)
        return st;
    /* The array gradients and the tangent go to `arena`; the real fields' gradient to the
     * tape's scratch, unless `arena` is the tape's (then it stays there with the result). */
    cr_arena_mark ma = cr_arena_get_mark(arena), mt = cr_arena_get_mark(t->arena);
    size_t na = arrays ? count_fields(type, true) : 0;
    cr_array **ag = NULL;
    if (arrays) {
        ag = cr_arena_alloc(arena, (na ? na : 1) * sizeof *ag, _Alignof(cr_array *));
        if (ag == NULL)
            st = CR__ALLOC_STATUS(arena);
        for (size_t j = 0; j < na && st == CR_OK; j++) {
            const cr_array *a = avars[j].a;
            st = a == NULL
                     ? cr_ctx_error(t->ctx, CR_EINVAL, "%s: array variable %zu is NULL", who, j)
                     : cr__new_like(arena, (cr_dtype)a->dtype, a, true, &ag[j]);
        }
    }
    double *g = NULL;
    if (st == CR_OK)
        st = struct_gradient(t, t->arena, y, type, vars, avars, ag, &g);
    if (st == CR_OK) {
        size_t k = 0, ka = 0;
        st = tangent_walk(arena, type, g, &k, ag, &ka, out);
    }
    if (arena != t->arena)
        cr_arena_rewind(t->arena, mt);
    if (st != CR_OK)
        cr_arena_rewind(arena, ma);
    return st;
}

cr_status cr_tape_gradient_tangent(cr_tape *t, cr_var y, const cr_type *type, const cr_var *vars,
                                   cr_arena *arena, cr_tangent *out)
{
    return gradient_tangent(t, "cr_tape_gradient_tangent", y, type, vars, NULL, false, arena, out);
}

cr_status cr_tape_gradient_tangent_arrays(cr_tape *t, cr_var y, const cr_type *type,
                                          const cr_var *vars, const cr_avar *avars, cr_arena *arena,
                                          cr_tangent *out)
{
    return gradient_tangent(t, "cr_tape_gradient_tangent_arrays", y, type, vars, avars, true, arena,
                            out);
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
    size_t k = 0, ka = 0;
    return tangent_walk(arena, type, g, &k, NULL, &ka, out);
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
