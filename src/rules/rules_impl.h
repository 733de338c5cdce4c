/*
 * Private declarations of the rule layer: registry entries, the built-in table hooks and
 * the generic rule implementations shared by rule families.
 */
#ifndef CR_RULES_IMPL_H
#define CR_RULES_IMPL_H

#include <string.h>
#include <tgmath.h>

#include <chainrules/rule.h>
#include <chainrules/scalar_rule.h>

#include "../core/core_impl.h"

enum { E_NO_FRULE = 1u, E_NO_RRULE = 2u, E_NONDIFF = 4u };

typedef struct cr__entry {
    cr_rule_def def; /* def.args points to args below */
    cr_argspec args[CR_SIG_MAX_ARGS];
    uint32_t flags; /* E_* */
    uint32_t next;  /* next entry of the same function in this registry, index + 1 */
} cr__entry;

struct cr_registry {
    cr_ctx *ctx; /* NULL for the built-in registry */
    const cr_registry *parent;
    bool frozen;
    cr__entry *entries;
    size_t n, cap;
    uint32_t *buckets; /* head entry index + 1 per bucket */
    size_t nbuckets;   /* power of two */
};

/* A built-in rule family: called once, at indexing, to add its rules. */
typedef cr_status (*cr__family_fn)(cr_registry *reg);

/* The families (src/rulesets), listed in src/rulesets/builtin.c: basic (scalar/arith.c), math
 * (scalar/math.c), complex (scalar/complex.c), special (scalar/special_gamma_erf.c), array
 * (array/shape.c) and linalg (linalg/products.c). */
CR_INTERNAL cr_status cr__family_basic(cr_registry *reg);
CR_INTERNAL cr_status cr__family_math(cr_registry *reg);
CR_INTERNAL cr_status cr__family_complex(cr_registry *reg);
CR_INTERNAL cr_status cr__family_special(cr_registry *reg);
CR_INTERNAL cr_status cr__family_array(cr_registry *reg);
CR_INTERNAL cr_status cr__family_linalg(cr_registry *reg);
CR_INTERNAL cr_status cr__family_structured(cr_registry *reg); /* linalg/structured.c */

/* Every built-in family added to reg in order (src/rulesets/builtin.c): the built-in
 * registry's one hook into the rule sets. Returns the first failure (the others still run). */
CR_INTERNAL cr_status cr__builtin_families(cr_registry *reg);

/* digamma for x not a pole (NaN at 0, -1, -2, ...): src/rulesets/scalar/exp_log.c. */
CR_INTERNAL double cr__digamma(double x);

/* Generic implementations for non-differentiable declarations. */
CR_INTERNAL cr_status cr__nondiff_frule(const cr_config *cfg, cr_arena *arena,
                                        const cr_tangent *dargs, const cr_value *f,
                                        const cr_value *args, size_t nargs, cr_value *y,
                                        cr_tangent *dy, const void *udata);
CR_INTERNAL cr_status cr__nondiff_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                        const cr_value *args, size_t nargs, cr_value *y,
                                        cr_pullback *pb, const void *udata);

/* cr_rrule() with the rule already found (rrule and udata of the cr_rule_def a lookup
 * returned): what an engine calls when it keeps the match, as prepared gradients do. */
CR_INTERNAL cr_status cr__rrule_with(const cr_config *cfg, cr_arena *arena, cr_rrule_fn rrule,
                                     const void *udata, const cr_value *f, const cr_value *args,
                                     size_t nargs, cr_value *y, cr_pullback *pb);

/* The number a scalar tangent carries, unthunked: 0 (and *nonzero false) for the zeros
 * and absent fields; CR_EUNIMPL for NotImplemented (naming its file, line and message),
 * CR_ETANGENT for anything that is not a scalar. `who` names the rule in messages;
 * nonzero may be NULL. (src/rules/scalar.c) */
CR_INTERNAL cr_status cr__tangent_scalar(cr_arena *arena, const char *who, cr_tangent t,
                                         cr_complex *v, bool *nonzero);

/* The number a scalar value holds (f64, f32, c128, an integer, a bool) in *z, a real one
 * with a zero imaginary part; false, and *z = 0, for any other kind. The one reading of a
 * value as a number that the scalar rules share. */
static inline bool cr__value_number(const cr_value *v, cr_complex *z)
{
    switch (v->kind) {
    case CR_KIND_F64:
        *z = v->u.f64;
        return true;
    case CR_KIND_F32:
        *z = (double)v->u.f32;
        return true;
    case CR_KIND_C128:
        *z = v->u.c128;
        return true;
    case CR_KIND_I64:
    case CR_KIND_I32:
        *z = (double)v->u.i64;
        return true;
    case CR_KIND_BOOL:
        *z = v->u.b ? 1.0 : 0.0;
        return true;
    default:
        *z = 0.0;
        return false;
    }
}

/* The floating kinds among the scalar arguments args[0..n), for Julia's promotion (integers
 * and bools join any float type): CR__HAS_* bits in *has. False, with *bad the position of
 * the first argument that is not a number, when there is one. */
#define CR__HAS_F64  1u
#define CR__HAS_F32  2u
#define CR__HAS_C128 4u
static inline bool cr__number_kinds(const cr_value *args, size_t n, unsigned *has, size_t *bad)
{
    *has = 0;
    for (size_t j = 0; j < n; j++) {
        switch (args[j].kind) {
        case CR_KIND_F64:
            *has |= CR__HAS_F64;
            break;
        case CR_KIND_F32:
            *has |= CR__HAS_F32;
            break;
        case CR_KIND_C128:
            *has |= CR__HAS_C128;
            break;
        case CR_KIND_I64:
        case CR_KIND_I32:
        case CR_KIND_BOOL:
            break;
        default:
            *bad = j;
            return false;
        }
    }
    return true;
}

/* The cotangent of a tuple output (a struct value), unthunked into *d: a structural tangent
 * or a zero; CR_ETANGENT naming the rule `who` and the output (`what`, such as "a tuple
 * (P, Q)") for anything else. */
static inline cr_status cr__tuple_cotangent(cr_arena *arena, const char *who, const char *what,
                                            cr_tangent dy, cr_tangent *d)
{
    cr_status st = cr_tangent_unthunk(dy, d);
    if (st == CR_OK && d->tag != CR_TAN_STRUCT && !cr_tangent_is_zero(*d))
        return CR__FAIL(arena, CR_ETANGENT,
                        "%s: the output is %s, its cotangent must be a structural tangent (got %s)",
                        who, what, cr_tag_name((cr_tag)d->tag));
    return st;
}

/* CR_EUNIMPL for the NotImplemented tangent t reaching the rule `who`, naming the file, line
 * and message t carries. */
static inline cr_status cr__notimpl_error(cr_arena *arena, const char *who, cr_tangent t)
{
    return CR__FAIL(arena, CR_EUNIMPL, "%s: tangent is NotImplemented (%s:%d: %s)", who,
                    t.u.ni->file, t.u.ni->line, t.u.ni->msg);
}

/* What an unthunked tangent of a scalar carries: the zeros (ZeroTangent, NoTangent, an
 * absent field; *v = 0), a number (*v), NotImplemented (*v = 0) or anything else. */
typedef enum cr__tan_number {
    CR__TN_ZERO,
    CR__TN_NUMBER,
    CR__TN_NOTIMPL,
    CR__TN_OTHER
} cr__tan_number;
static inline cr__tan_number cr__tangent_number(cr_tangent t, cr_complex *v)
{
    switch ((cr_tag)t.tag) {
    case CR_TAN_F64:
        *v = t.u.f64;
        return CR__TN_NUMBER;
    case CR_TAN_F32:
        *v = (double)t.u.f32;
        return CR__TN_NUMBER;
    case CR_TAN_C128:
        *v = t.u.c128;
        return CR__TN_NUMBER;
    case CR_TAN_ZERO:
    case CR_TAN_NONE:
    case CR_TAN_ABSENT:
        *v = 0.0;
        return CR__TN_ZERO;
    case CR_TAN_NOTIMPL:
        *v = 0.0;
        return CR__TN_NOTIMPL;
    default:
        *v = 0.0;
        return CR__TN_OTHER;
    }
}

/* Name of a function value for messages. */
CR_INTERNAL const char *cr__fname(const cr_value *f);

/* "name(kind, kind, ...)" of an actual call, into buf. */
CR_INTERNAL void cr__call_str(const cr_value *f, const cr_value *args, size_t nargs, char *buf,
                              size_t size);

/* re + i im without the float-complex promotion of `I`. */
static inline cr_complex cr__c(double re, double im)
{
    double parts[2] = {re, im};
    cr_complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}

/* ---- Second derivatives of a scalar row (scalar.c) ------------------------------------------ */

/* The complex step along an argument at x_l: 1e-20 max(|x_l|, 1e-200) (written out: fmax is
 * a call). cr__row_hessian and the prepared H·v's inline arithmetic rows both take it. */
static inline double cr__cstep(double xl)
{
    double a = xl < 0 ? -xl : xl;
    return 1e-20 * (a >= 1e-200 ? a : 1e-200);
}

/* Second derivatives of a row at x (partials D there, which every caller passes): H[(o*nin +
 * j)*nin + l] for the columns l in the bit set cols; the complex step where its first
 * derivative agrees with D, else (a branch cut on the real axis, a real-only row) central
 * differences of the partials (tape.c). */
CR_INTERNAL void cr__row_hessian(const cr_scalar_rule *row, const double *x, const double *D,
                                 double *H, unsigned cols);

/* The step of the central differences of partials along an argument at x: cbrt(eps) max(1,
 * |x|), about ten significant digits. */
CR_INTERNAL double cr__fd_step(double x);

/* A second derivative from a partial at x - hm, x and x + hp (Dm, D, Dp): the central
 * difference, or where the partial jumps within the step (a kink) the one-sided difference
 * of smaller magnitude. */
CR_INTERNAL double cr__fd_second(double Dp, double D, double Dm, double hp, double hm);

/* The random numbers of the rules' test samplers (splitmix64; src/rulesets/array/common.c):
 * the next 64 bits of the stream *s, and a uniform double in [lo, hi) from its top 53. */
CR_INTERNAL uint64_t cr__rng_next(uint64_t *s);
CR_INTERNAL double cr__rng_unif(uint64_t *s, double lo, double hi);

/* cr_registry_add of the rule with these fields, the others zero. */
CR_INTERNAL cr_status cr__register(cr_registry *reg, const cr_function *fn, const cr_argspec *args,
                                   size_t nargs, bool variadic, cr_frule_fn frule,
                                   cr_rrule_fn rrule, const void *udata, const cr_rule_test *test);

/* dx[0..nx) = NoTangent: a pullback's start. */
static inline void cr__dx_none(cr_tangent *dx, size_t nx)
{
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
}

/* `T *E`: a new T in the arena ARENA (zeroed with the _ZNEW form), or the function returns the
 * arena's status. A declaration: at the start of a block or after the statements it needs. */
#define CR__ARENA_NEW(ARENA, T, E)                          \
    T *E = cr_arena_alloc((ARENA), sizeof(T), _Alignof(T)); \
    if (E == NULL)                                          \
    return CR__ALLOC_STATUS(ARENA)
#define CR__ARENA_ZNEW(ARENA, T, E)                             \
    T *E = cr_arena_calloc((ARENA), 1, sizeof(T), _Alignof(T)); \
    if (E == NULL)                                              \
    return CR__ALLOC_STATUS(ARENA)

/* ---- Heads of rule functions ------------------------------------------------------------ */

/* A parameter a rule function may leave unused. */
#if defined(__GNUC__)
#define CR__UNUSED __attribute__((unused))
#else
#define CR__UNUSED
#endif

/* The parameters of an rrule (cr_rrule_fn), frule (cr_frule_fn), pullback (cr_pullback_fn)
 * or test sampler (cr_rule_test.sample), with the names every rule uses, any of them
 * possibly unused: `static cr_status x_rrule(CR__RRULE_PARAMS) { ... }`. */
#define CR__RRULE_PARAMS                                                                       \
    const cr_config *cfg CR__UNUSED, cr_arena *arena CR__UNUSED, const cr_value *f CR__UNUSED, \
        const cr_value *args CR__UNUSED, size_t nargs CR__UNUSED, cr_value *y CR__UNUSED,      \
        cr_pullback *pb CR__UNUSED, const void *udata CR__UNUSED
#define CR__FRULE_PARAMS                                                                  \
    const cr_config *cfg CR__UNUSED, cr_arena *arena CR__UNUSED,                          \
        const cr_tangent *dargs CR__UNUSED, const cr_value *f CR__UNUSED,                 \
        const cr_value *args CR__UNUSED, size_t nargs CR__UNUSED, cr_value *y CR__UNUSED, \
        cr_tangent *dy CR__UNUSED, const void *udata CR__UNUSED
#define CR__PULLBACK_PARAMS                                                           \
    const cr_tangent *dy CR__UNUSED, cr_tangent *dx CR__UNUSED, size_t nx CR__UNUSED, \
        cr_arena *arena CR__UNUSED, void *env CR__UNUSED
#define CR__SAMPLE_PARAMS                                                            \
    cr_arena *arena CR__UNUSED, uint64_t *rng CR__UNUSED, cr_value *args CR__UNUSED, \
        size_t nargs CR__UNUSED, void *env CR__UNUSED

#endif /* CR_RULES_IMPL_H */
