/*
 * Private declarations of the rule layer: registry entries, the built-in table hooks and
 * the generic rule implementations shared by rule families.
 */
#ifndef CR_RULES_IMPL_H
#define CR_RULES_IMPL_H

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

/* The families (src/rulesets), listed in src/rules/builtin.c. */
CR_INTERNAL cr_status cr__family_basic(cr_registry *reg);
CR_INTERNAL cr_status cr__family_math(cr_registry *reg);    /* src/rulesets/math.c */
CR_INTERNAL cr_status cr__family_complex(cr_registry *reg); /* src/rulesets/complex.c */
CR_INTERNAL cr_status cr__family_special(cr_registry *reg); /* src/rulesets/special.c */
CR_INTERNAL cr_status cr__family_array(cr_registry *reg);   /* src/rulesets/array.c */
CR_INTERNAL cr_status cr__family_linalg(cr_registry *reg);  /* src/rulesets/linalg.c */

/* digamma for x not a pole (NaN at 0, -1, -2, ...): src/rulesets/math.c. */
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

/* Name of a function value for messages. */
CR_INTERNAL const char *cr__fname(const cr_value *f);

/* "name(kind, kind, ...)" of an actual call, into buf. */
CR_INTERNAL void cr__call_str(const cr_value *f, const cr_value *args, size_t nargs, char *buf,
                              size_t size);

#endif /* CR_RULES_IMPL_H */
