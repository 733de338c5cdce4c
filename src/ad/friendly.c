/*
 * Friendly tangents: a C struct's real fields (scalar variables) and array fields (array
 * variables) as tape inputs, and the gradient with respect to them written back into a
 * struct of the same C type through its descriptor (Mooncake's friendly_tangents), or given
 * as the raw structural tangent.
 */
#include <string.h>

#include "../rules/array_rule_impl.h"
#include "tape_impl.h"

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
    cr_status st = cr__type_check(t->ctx, type);
    if (st != CR_OK)
        return cr__tape_fail(t, st, "%s", cr_ctx_errmsg(t->ctx));
    size_t need = cr__type_fields(type, arrays);
    if (n < need)
        return cr__tape_fail(t, CR_EINVAL, "%s: %s has %zu %s fields, room for %zu variable%s", who,
                             type->name, need, arrays ? "array" : "real", n, CR__S(n));
    return CR_OK;
}

/* The struct's real fields as scalar inputs (arrays false) or its array fields as array
 * inputs, into out. */
static cr_status struct_inputs(cr_tape *t, const char *who, const cr_type *type, const void *obj,
                               void *out, size_t n, bool arrays)
{
    cr_status st = inputs_check(&t, who, type, obj, out, n, arrays);
    if (st != CR_OK)
        return st;
    size_t k = 0;
    if (arrays)
        array_inputs_walk(t, type, obj, out, &k);
    else
        inputs_walk(t, type, obj, out, &k);
    return t->status;
}

cr_status cr_tape_struct_inputs(cr_tape *t, const cr_type *type, const void *obj, cr_var *vars,
                                size_t n)
{
    return struct_inputs(t, "cr_tape_struct_inputs", type, obj, vars, n, false);
}

cr_status cr_tape_struct_array_inputs(cr_tape *t, const cr_type *type, const void *obj,
                                      cr_avar *avars, size_t na)
{
    return struct_inputs(t, "cr_tape_struct_array_inputs", type, obj, avars, na, true);
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
                return cr__field_in_group(fd->kind, arrays);
            return fd->kind == CR_KIND_STRUCT && fd->type != NULL &&
                   find_path(fd->type, path + len + 1, arrays, k);
        }
        if (cr__field_in_group(fd->kind, arrays))
            (*k)++;
        else if (fd->kind == CR_KIND_STRUCT)
            *k += cr__type_fields(fd->type, arrays);
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
        return cr_av_const(NULL);
    return avars[k];
}

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
        cr_status st = cr__struct_tangent_walk(w->t->arena, type, w->g, &w->k, w->ag, &w->ka, &raw);
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
    if (type == NULL || (vars == NULL && cr__type_fields(type, false) > 0) ||
        (arrays && avars == NULL && cr__type_fields(type, true) > 0))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: NULL type or variables", who);
    if (t->status != CR_OK)
        return t->status;
    cr_status st = cr__type_check(t->ctx, type);
    /* Variables of an earlier recording are refused before their arrays, which the caller
     * may have released after the reset, are read. */
    if (st == CR_OK && arrays)
        st = cr__check_avars(t, who, avars, cr__type_fields(type, true), "array input");
    return st;
}

/* The gradient of y with respect to the struct's variables: the real fields' into *g (in
 * `arena`), the array fields' into the arrays ag (NULL: the real fields only). */
static cr_status struct_gradient(cr_tape *t, cr_arena *arena, cr_var y, const cr_type *type,
                                 const cr_var *vars, const cr_avar *avars, cr_array *const *ag,
                                 double **g)
{
    size_t n = cr__type_fields(type, false);
    *g = cr_arena_alloc(arena, (n ? n : 1) * sizeof **g, _Alignof(double));
    if (*g == NULL) /* the sweep's workspace: a failure is the tape's, as in the sweeps */
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(arena), "struct gradient");
    if (ag == NULL)
        return cr_tape_gradient(t, y, vars, n, *g);
    return cr_tape_gradient_arrays(t, y, vars, n, *g, avars, cr__type_fields(type, true), ag);
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
        size_t na = cr__type_fields(type, true), k = 0;
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
    size_t na = arrays ? cr__type_fields(type, true) : 0;
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
        st = cr__struct_tangent_walk(arena, type, g, &k, ag, &ka, out);
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
