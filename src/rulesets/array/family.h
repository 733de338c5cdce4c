/*
 * Private to the files of the array rule family: the table in which a file lists its rules
 * (one row a signature, with its linearity class and second-order form) and the
 * registrations of the family's files that array_impl.h does not declare. cr__family_array
 * (shape.c) calls the registrations in a fixed order: the order of docs/rules-index.md.
 */
#ifndef CR_ARRAY_FAMILY_H
#define CR_ARRAY_FAMILY_H

#include "../forms_impl.h"

/* One signature of an array rule: fn for args[0..n), its frule and rrule, its test
 * registration, its cr_linearity class and its second-order form (or NULL). A row with
 * `lapack` set is left out of a build without LAPACK. */
typedef struct cr__array_rule {
    const cr_function *fn;
    const cr_argspec *args;
    size_t n;
    cr_frule_fn frule;
    cr_rrule_fn rrule;
    const cr_rule_test *test;
    uint32_t lin;
    const cr_rule_form *form;
    bool lapack;
} cr__array_rule;

/* `static const cr_type NAME`, named STR: the tuple (A, B) held by the struct S, of fields A
 * (kind KA) and B (kind KB), with its field table NAME_fields. */
#define CR__TUPLE2_TYPE(NAME, STR, S, A, KA, B, KB)                              \
    static const cr_field NAME##_fields[2] = {{NULL, offsetof(S, A), KA, NULL},  \
                                              {NULL, offsetof(S, B), KB, NULL}}; \
    static const cr_type NAME = {STR, sizeof(S), 2, NAME##_fields}

/* Rows of a table of cr__array_rule for NAME (NAME_function, NAME_rrule and the frule FR):
 * CR__ROW for the signature S of N arguments; CR__ROWS2 for S1, one argument (A), and S2, two
 * (A, dims), with the test registrations T1 and T2. LIN is the linearity class, FORM the
 * second-order form (or NULL), LAPACK whether the row needs LAPACK. */
#define CR__ROW(NAME, FR, S, N, T, LIN, FORM, LAPACK)                  \
    {                                                                  \
        &NAME##_function, S, N, FR, NAME##_rrule, T, LIN, FORM, LAPACK \
    }
#define CR__ROWS2(NAME, FR, S1, S2, T1, T2, LIN, FORM) \
    CR__ROW(NAME, FR, S1, 1, T1, LIN, FORM, false), CR__ROW(NAME, FR, S2, 2, T2, LIN, FORM, false)

/* *y = a struct value of `type` holding a copy, in the arena, of the `size` bytes at src
 * (alignment align). */
CR_INTERNAL cr_status cr__struct_copy(cr_arena *arena, const cr_type *type, const void *src,
                                      size_t size, size_t align, cr_value *y);
/* The same for a C struct CT initialised with the values that follow. */
#define CR__STRUCT_COPY(ARENA, TYPE, Y, CT, ...) \
    cr__struct_copy((ARENA), (TYPE), &(CT){__VA_ARGS__}, sizeof(CT), _Alignof(CT), (Y))

/* Defines `static cr_status NAME(arena, e, g, fn, add, name, out)`, the cotangent of a
 * pullback from its environment e and the canonical output cotangent g: ZeroTangent when g
 * is NULL, otherwise the thunk (fn, add) of a new TYPE whose fields e and g are set. */
#define CR__EG_THUNK_NEW(NAME, TYPE, ETYPE)                                                   \
    static cr_status NAME(cr_arena *arena, const ETYPE *e, const cr_array *g, cr_thunk_fn fn, \
                          cr_thunk_add_fn add, const char *name, cr_tangent *out)             \
    {                                                                                         \
        if (g == NULL) {                                                                      \
            *out = cr_tangent_zero();                                                         \
            return CR_OK;                                                                     \
        }                                                                                     \
        TYPE *t = cr_arena_alloc(arena, sizeof *t, _Alignof(TYPE));                           \
        if (t == NULL)                                                                        \
            return CR__ALLOC_STATUS(arena);                                                   \
        t->e = e;                                                                             \
        t->g = g;                                                                             \
        return cr__thunk(arena, fn, add, t, name, out);                                       \
    }

/* The end of an rrule whose forward computation returned st: st when that failed or when
 * udata is CR__PRIMAL_ONLY; otherwise *pa = the projector of arg and *pb = {fn, env, name,
 * nx}. */
CR_INTERNAL cr_status cr__rrule_end(cr_arena *arena, cr_status st, const void *udata,
                                    const cr_value *arg, cr_project **pa, cr_pullback_fn fn,
                                    void *env, const char *name, size_t nx, cr_pullback *pb);

/* Inside a cr__inner_fn: the offset of element i of the loop's array k. The product is an
 * index below the loop's extent times the array's stride in elements: within the span of an
 * array that exists (the size invariant; tools/check_products.allow). */
#define CR__AT(k) (off[k] + (ptrdiff_t)i * step[k])

/* The parameters of a second-order form's direction and check functions (cr_rule_form),
 * any of them possibly unused. */
#define CR__FORM_DIR_PARAMS                                                                       \
    const cr_form_point *p CR__UNUSED, void *state CR__UNUSED, const cr_tangent *xdot CR__UNUSED, \
        cr_tangent ydot CR__UNUSED, cr_tangent *S CR__UNUSED
#define CR__FORM_CHECK_PARAMS                                                             \
    const cr_value *args CR__UNUSED, size_t nargs CR__UNUSED, const bool *var CR__UNUSED, \
        uint32_t *linearity CR__UNUSED

/* In an rrule, once its output is made: `TYPE *E`, a new environment holding the projector
 * of args[0] at its field PA (CR__PB_ENV; on failure the rrule returns ST), and
 * *PB = {FN, E, NAME, nargs + 1}. The rrule then fills E's other fields. */
#define CR__PB_START(TYPE, PA, FN, NAME, E, ST)             \
    TYPE *E = CR__PB_ENV(arena, TYPE, PA, &args[0], &(ST)); \
    if (E == NULL)                                          \
        return ST;                                          \
    *pb = (cr_pullback)                                     \
    {                                                       \
        FN, E, NAME, nargs + 1                              \
    }

/* cr__nargs (lo <= nargs <= hi) and then args[0] as an array (cr__array_arg). */
CR_INTERNAL cr_status cr__nargs_array(cr_arena *arena, const char *who, const cr_value *args,
                                      size_t nargs, size_t lo, size_t hi, const cr_array **A);

/* Fill the numbers of A (real) with (i - base)/4 + [0, 1/8) for i = 0..n-1 in a random order:
 * values at least 1/8 apart, so that finite differences cross no tie. */
CR_INTERNAL void cr__fill_distinct(uint64_t *rng, cr_array *A, double base);

/* Stable merge sort of the indices ix[0..n) by the values v[ix[.]] under the strict weak
 * order less; tmp has n entries. */
CR_INTERNAL void cr__sort_index(int64_t *ix, int64_t *tmp, size_t n, const double *v,
                                bool (*less)(double, double));

/* cr__nargs_array, then CR_EINVAL unless *A holds floats (f64, f32 or c128). */
CR_INTERNAL cr_status cr__nargs_float_array(cr_arena *arena, const char *who, const cr_value *args,
                                            size_t nargs, size_t lo, size_t hi, const cr_array **A);

/* A random shape for a test sampler: 1 to 3 dimensions (the returned count, one draw), then
 * three extents of 1 to max (three draws, whatever the count). */
CR_INTERNAL size_t cr__rng_shape3(uint64_t *rng, size_t max, size_t shape[3]);

/* Register the rows k[0..n) in order (cr__add_rule_so, never variadic). */
CR_INTERNAL cr_status cr__add_rules(cr_registry *reg, const cr__array_rule *k, size_t n);

/* The environment of an array rule's pullback: a zeroed TYPE in the arena whose field PA
 * holds the projector of the argument ARG (cr_project_new). NULL, with *ST the status, when
 * either fails. */
#define CR__PB_ENV(ARENA, TYPE, PA, ARG, ST) \
    ((TYPE *)cr__pb_env((ARENA), sizeof(TYPE), _Alignof(TYPE), offsetof(TYPE, PA), (ARG), (ST)))
static inline void *cr__pb_env(cr_arena *arena, size_t size, size_t align, size_t pa_off,
                               const cr_value *arg, cr_status *st)
{
    unsigned char *e = cr_arena_calloc(arena, 1, size, align);
    if (e == NULL) {
        *st = CR__ALLOC_STATUS(arena);
        return NULL;
    }
    cr_project *pA = NULL;
    *st = cr_project_new(arena, arg, &pA);
    if (*st != CR_OK)
        return NULL;
    memcpy(e + pa_off, &pA, sizeof pA);
    return e;
}

/* The add! of an InplaceableThunk (cr__thunk) whose cotangent has the shape of LIKE in the
 * work dtype WDT: NAME(arena, dest, env), `t` being the thunk's environment (a TYPE *), runs
 * the statement IN_PLACE, which adds the cotangent into dest (or returns a status), when
 * cr__dest_ok accepts dest; otherwise it makes the cotangent with THUNK and adds it. */
#define CR__THUNK_ADD(NAME, TYPE, WDT, LIKE, IN_PLACE, THUNK)         \
    static cr_status NAME(cr_arena *arena, cr_array *dest, void *env) \
    {                                                                 \
        TYPE *t = env;                                                \
        if (cr__dest_ok(dest, WDT, LIKE)) {                           \
            IN_PLACE;                                                 \
            return CR_OK;                                             \
        }                                                             \
        cr_tangent v;                                                 \
        cr_status st = THUNK(arena, &v, env);                         \
        return st != CR_OK ? st : cr__add_into(arena, dest, v);       \
    }

/* The registrations of the family's files, in the order cr__family_array calls them. */
CR_INTERNAL cr_status cr__array_register_softmax(cr_registry *reg); /* softmax.c */
CR_INTERNAL cr_status cr__array_register_var(cr_registry *reg);     /* var_std.c */
CR_INTERNAL cr_status cr__array_register_norm(cr_registry *reg);    /* norm.c: norm */
CR_INTERNAL cr_status cr__array_register_slices(cr_registry *reg);  /* slices.c */
CR_INTERNAL cr_status cr__array_register_unique(cr_registry *reg);  /* unique.c */
CR_INTERNAL cr_status cr__array_register_opnorm(cr_registry *reg);  /* norm.c: opnorm... */
CR_INTERNAL cr_status cr__array_register_uniform(cr_registry *reg); /* uniform_scaling.c */

#endif /* CR_ARRAY_FAMILY_H */
