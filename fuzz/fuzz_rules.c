/*
 * fuzz_rules: the rules of the built-in registry called with arguments drawn from the
 * input. The input picks a registered signature (a function and its argument matchers),
 * builds arguments that mostly fit the matchers (numbers of every kind, arrays of every
 * dtype with small shapes, column-major, reversed, strided and zero-stride layouts and
 * structure tags, ranges, function values) and sometimes do not (another kind, one
 * argument too many or too few), then calls the primal (cr_function_call), the frule
 * (cr_frule, with tangents of the arguments' shapes or zero, NoTangent, a scalar where an
 * array is expected) and the rrule and its pullback (cr_rrule, cr_pullback_call, with a
 * cotangent of the output's shape or a wrong one), and evaluates the thunks the pullback
 * gives. Half of the inputs run with the context in debug mode (pullbacks checked against
 * their arguments' projections); half are given the engine's rule configuration (reverse
 * and forward capabilities: rules of higher-order functions call rrule_via_ad and
 * frule_via_ad), the others none.
 *
 * Besides the sanitizers' findings, a call that fails must leave a message on the
 * context. Byte layout: docs/fuzzing.md; the seeds (fuzz/corpus/fuzz_rules/) start with
 * each signature's index.
 */
#include "fuzz_common.h"

#include <stdio.h>

#define FUZZ_MAX_ARGS 10

typedef struct entry {
    const cr_function *fn;
    const cr_argspec *args;
    size_t nargs;
    bool variadic;
} entry;

static fuzz_alloc g_alloc;
static cr_ctx *g_ctx;
static cr_arena *g_arena;
static entry *g_entries;
static size_t g_nentries;
static const cr_function **g_scalar; /* functions of the scalar table (function arguments) */
static size_t g_nscalar;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_one_thread();
    g_ctx = fuzz_ctx_new(&g_alloc);
    if (g_ctx == NULL || cr_arena_new(g_ctx, NULL, &g_arena) != CR_OK)
        abort();
    const cr_registry *reg = cr_registry_builtin();
    size_t n = cr_registry_size(reg);
    g_entries = calloc(n + 1, sizeof *g_entries);
    g_scalar = calloc(n + 1, sizeof *g_scalar);
    if (g_entries == NULL || g_scalar == NULL)
        abort();
    for (size_t i = 0; i < n; i++) {
        cr_rule_info info;
        if (cr_registry_get(reg, i, &info) != CR_OK || info.fn == NULL)
            continue;
        g_entries[g_nentries++] = (entry){
            .fn = info.fn, .args = info.args, .nargs = info.nargs, .variadic = info.variadic};
        if ((info.fn->flags & CR_FN_SCALAR_ROW) && info.fn->arity >= 1 && info.fn->arity <= 2 &&
            (g_nscalar == 0 || g_scalar[g_nscalar - 1] != info.fn))
            g_scalar[g_nscalar++] = info.fn;
    }
    if (g_nentries == 0 || g_nscalar == 0)
        abort();
    if (getenv("FUZZ_RULES_LIST") != NULL) { /* the signatures (fuzz/gen_seeds.py reads them) */
        for (size_t i = 0; i < g_nentries; i++) {
            printf("%zu %s %d", i, g_entries[i].fn->name, g_entries[i].variadic ? 1 : 0);
            for (size_t k = 0; k < g_entries[i].nargs; k++)
                printf(" %x", (unsigned)g_entries[i].args[k].mask);
            printf("\n");
        }
    }
    return 0;
}

/* ---- Arguments ------------------------------------------------------------------------ */

static cr_value make_value(fuzz_in *in, uint32_t atom, const cr_type *type, int depth);

/* A struct of `type` with every field drawn from the input (nested structs up to depth 3). */
static cr_value make_struct(fuzz_in *in, const cr_type *type, int depth)
{
    if (type == NULL || depth > 3)
        return cr_colon;
    if (type == &cr_range_type) {
        cr_range *r = cr_arena_alloc(g_arena, sizeof *r, _Alignof(cr_range));
        if (r == NULL)
            return cr_colon;
        r->start = fuzz_int(in);
        r->stop = fuzz_int(in);
        r->step = fuzz_bool(in) ? 1 : fuzz_int(in);
        return cr_value_struct(&cr_range_type, r);
    }
    char *obj = cr_arena_calloc(g_arena, 1, type->size > 0 ? type->size : 1, 16);
    if (obj == NULL)
        return cr_colon;
    for (size_t i = 0; i < type->nfields; i++) {
        const cr_field *f = &type->fields[i];
        char *p = obj + f->offset;
        cr_value v;
        switch (f->kind) {
        case CR_KIND_F64: {
            double d = fuzz_double(in);
            memcpy(p, &d, sizeof d);
            break;
        }
        case CR_KIND_F32: {
            float x = (float)fuzz_double(in);
            memcpy(p, &x, sizeof x);
            break;
        }
        case CR_KIND_C128: {
            double d[2] = {fuzz_double(in), fuzz_double(in)};
            memcpy(p, d, sizeof d);
            break;
        }
        case CR_KIND_I64: {
            int64_t k = fuzz_int(in);
            memcpy(p, &k, sizeof k);
            break;
        }
        case CR_KIND_I32: {
            int k = (int)(fuzz_int(in) % 1000);
            memcpy(p, &k, sizeof k);
            break;
        }
        case CR_KIND_BOOL: {
            bool b = fuzz_bool(in);
            memcpy(p, &b, sizeof b);
            break;
        }
        case CR_KIND_ARRAY: {
            cr_array *a = fuzz_array(in, g_arena, CR_DT_F64);
            if (a != NULL)
                memcpy(p, a, sizeof *a);
            break;
        }
        case CR_KIND_FUNC: {
            const cr_function *fn = g_scalar[fuzz_below(in, g_nscalar)];
            memcpy(p, &fn, sizeof fn);
            break;
        }
        case CR_KIND_STRUCT:
            v = make_struct(in, f->type, depth + 1);
            if (v.kind == CR_KIND_STRUCT && f->type != NULL)
                memcpy(p, v.u.obj.ptr, f->type->size);
            break;
        default:
            break;
        }
    }
    return cr_value_struct(type, obj);
}

static cr_value make_array_value(fuzz_in *in, cr_dtype dt)
{
    cr_array *a = fuzz_array(in, g_arena, dt);
    return a != NULL ? cr_value_array(a) : cr_colon;
}

/* A value of one kind (a CR_M_* atom). */
static cr_value make_value(fuzz_in *in, uint32_t atom, const cr_type *type, int depth)
{
    switch (atom) {
    case CR_M_F64:
        return cr_value_f64(fuzz_double(in));
    case CR_M_F32:
        return cr_value_f32((float)fuzz_double(in));
    case CR_M_C128: {
        double re = fuzz_double(in), im = fuzz_double(in);
        double parts[2] = {re, im};
        cr_complex z;
        memcpy(&z, parts, sizeof z);
        return cr_value_c128(z);
    }
    case CR_M_INT:
        return cr_value_i64(fuzz_int(in));
    case CR_M_BOOL:
        return cr_value_bool(fuzz_bool(in));
    case CR_M_A_F64:
        return make_array_value(in, CR_DT_F64);
    case CR_M_A_F32:
        return make_array_value(in, CR_DT_F32);
    case CR_M_A_C128:
        return make_array_value(in, CR_DT_C128);
    case CR_M_A_INT:
        return make_array_value(in, CR_DT_I64);
    case CR_M_A_BOOL:
        return make_array_value(in, CR_DT_BOOL);
    case CR_M_STRUCT:
        return make_struct(in, type != NULL ? type : &cr_range_type, depth);
    case CR_M_FUNC: {
        const cr_function *fn = fuzz_bool(in) ? g_scalar[fuzz_below(in, g_nscalar)]
                                              : g_entries[fuzz_below(in, g_nentries)].fn;
        return cr_value_function(fn, NULL);
    }
    default:
        return cr_colon; /* CR_M_NOTHING */
    }
}

/* An argument for matcher `spec`: one of its atoms, or (1 in 16) any kind. */
static cr_value make_arg(fuzz_in *in, cr_argspec spec)
{
    uint32_t mask = spec.mask & 0x1FFFu;
    uint8_t c = fuzz_u8(in);
    if (mask == 0 || (c & 15u) == 15u)
        mask = 0x1FFFu;
    uint32_t atoms[13];
    size_t n = 0;
    for (uint32_t b = 0; b < 13; b++)
        if (mask & (1u << b))
            atoms[n++] = 1u << b;
    return make_value(in, atoms[(size_t)(c >> 4) % n], spec.type, 0);
}

/* ---- Tangents --------------------------------------------------------------------------- */

/* Replace the numbers of a materialised tangent by values from the input. */
static void randomize(fuzz_in *in, cr_tangent *t, int depth)
{
    switch ((cr_tag)t->tag) {
    case CR_TAN_F64:
        t->u.f64 = fuzz_double(in);
        break;
    case CR_TAN_F32:
        t->u.f32 = (float)fuzz_double(in);
        break;
    case CR_TAN_C128: {
        double parts[2] = {fuzz_double(in), fuzz_double(in)};
        memcpy(&t->u.c128, parts, sizeof parts);
        break;
    }
    case CR_TAN_ARRAY:
        if (t->u.arr != NULL)
            fuzz_fill(in, t->u.arr);
        break;
    case CR_TAN_STRUCT:
        if (t->u.s.fields != NULL && t->u.s.type != NULL && depth < 4)
            for (size_t i = 0; i < t->u.s.type->nfields; i++)
                randomize(in, &t->u.s.fields[i], depth + 1);
        break;
    default:
        break;
    }
}

/* A tangent for primal p: mostly one of its shape with values from the input; else zero,
 * NoTangent, or a scalar whatever p is. */
static cr_tangent make_tangent(fuzz_in *in, const cr_value *p)
{
    uint8_t c = fuzz_u8(in);
    cr_tangent t = cr_tangent_zero();
    switch (c & 15u) {
    case 13:
        return cr_tangent_zero();
    case 14:
        return cr_tangent_none();
    case 15:
        return cr_tangent_f64(fuzz_double(in));
    default:
        if (cr_tangent_zero_of(g_arena, p, &t) != CR_OK)
            return cr_tangent_zero();
        randomize(in, &t, 0);
        return t;
    }
}

/* ---- The calls ---------------------------------------------------------------------------- */

/* A failed call must say why on the context. */
static void check_failure(cr_status st)
{
    if (st == CR_OK || st == CR_NOTHING)
        return;
    if (cr_ctx_errmsg(g_ctx)[0] == '\0') {
        fprintf(stderr, "fuzz_rules: status %s without a message\n", cr_status_name(st));
        abort();
    }
}

/* Evaluate the thunks of a cotangent (and of a structural one's fields). */
static void unthunk(cr_tangent t, int depth)
{
    cr_tangent v;
    if (cr_tangent_is_thunk(t)) {
        cr_status st = cr_tangent_unthunk(t, &v);
        check_failure(st);
        if (st != CR_OK)
            return;
        t = v;
    }
    if (t.tag == CR_TAN_STRUCT && t.u.s.fields != NULL && t.u.s.type != NULL && depth < 4)
        for (size_t i = 0; i < t.u.s.type->nfields; i++)
            unthunk(t.u.s.fields[i], depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    cr_arena_reset(g_arena);
    cr_ctx_clear_error(g_ctx);

    const entry *e = &g_entries[fuzz_below(&in, g_nentries)];
    uint8_t flags = fuzz_u8(&in);
    cr_ctx_set_debug(g_ctx, flags & 1u);
    const cr_config *cfg = (flags & 32u) ? cr_engine_config(NULL) : NULL;

    /* How many arguments: the signature's (a variadic one's last matcher repeated 0 to 3
     * times), or (1 in 16) one more or one fewer. */
    size_t nargs = e->nargs;
    if (e->variadic)
        nargs = e->nargs - 1 + fuzz_below(&in, 4);
    if ((flags >> 1 & 15u) == 15u)
        nargs = nargs + 1;
    else if ((flags >> 1 & 15u) == 14u && nargs > 0)
        nargs = nargs - 1;
    if (nargs > FUZZ_MAX_ARGS)
        nargs = FUZZ_MAX_ARGS;

    cr_value args[FUZZ_MAX_ARGS];
    for (size_t i = 0; i < nargs; i++) {
        cr_argspec spec = e->nargs == 0 ? CR_ARG_ANY : e->args[i < e->nargs ? i : e->nargs - 1];
        args[i] = make_arg(&in, spec);
    }
    cr_value f = cr_value_function(e->fn, NULL);
    uint8_t mode = fuzz_u8(&in);
    cr_status st;

    if ((mode & 3u) == 0 && e->fn->primal != NULL) {
        cr_value y;
        st = cr_function_call(g_arena, &f, args, nargs, &y);
        check_failure(st);
    }
    if (mode & 1u) {
        cr_tangent dargs[FUZZ_MAX_ARGS + 1];
        dargs[0] = fuzz_bool(&in) ? cr_tangent_none() : cr_tangent_zero();
        for (size_t i = 0; i < nargs; i++)
            dargs[i + 1] = make_tangent(&in, &args[i]);
        cr_value y;
        cr_tangent dy;
        cr_ctx_clear_error(g_ctx);
        st = cr_frule(cfg, g_arena, dargs, &f, args, nargs, &y, &dy);
        check_failure(st);
        if (st == CR_OK)
            unthunk(dy, 0);
    }
    if (mode & 2u) {
        cr_value y;
        cr_pullback pb;
        cr_ctx_clear_error(g_ctx);
        st = cr_rrule(cfg, g_arena, &f, args, nargs, &y, &pb);
        check_failure(st);
        if (st == CR_OK) {
            cr_tangent dy = make_tangent(&in, &y);
            cr_tangent dx[FUZZ_MAX_ARGS + 1];
            cr_ctx_clear_error(g_ctx);
            st = cr_pullback_call(g_arena, &pb, &dy, dx, nargs + 1);
            check_failure(st);
            if (st == CR_OK)
                for (size_t i = 0; i < nargs + 1; i++)
                    unthunk(dx[i], 0);
        }
    }
    return 0;
}
