/**
 * @file rule.h
 * @brief Rules: function objects, frule / rrule with named pullbacks, RuleConfig, the
 *        rule registry with dispatch, opt-out, non-differentiable declarations.
 *
 * A differentiable function is a `cr_function` (identity, name, arity, primal). Its
 * rules are found by dispatch on the kinds of the arguments:
 *
 * - cr_frule() takes the tangents (Δself, Δargs...) and gives (Ω, ΔΩ): the output value
 *   and its tangent (the pushforward fused with the primal computation);
 * - cr_rrule() gives (Ω, pullback); calling the pullback with ΔΩ gives (∂self, ∂args...),
 *   one cotangent per argument plus one for the function itself;
 * - both return CR_NOTHING (not an error) when no rule applies, Julia's `nothing`.
 *
 * @code
 * // Example of using the rules directly: foo(x) = asin(0.2 + sin(x)) at x = 3.
 * cr_value x = cr_value_f64(3.0), a, b, c;
 * cr_pullback pa, pb, pc;
 * cr_value args2[2];
 * cr_rrule(NULL, arena, &cr_fn_sin, &x, 1, &a, &pa);
 * args2[0] = cr_value_f64(0.2); args2[1] = a;
 * cr_rrule(NULL, arena, &cr_fn_add, args2, 2, &b, &pb);
 * cr_rrule(NULL, arena, &cr_fn_asin, &b, 1, &c, &pc);
 * cr_tangent dc = cr_tangent_f64(1.0), d1[2], d2[3], d3[2];
 * cr_pullback_call(arena, &pc, &dc, d1, 2);      // d1[1] = ∂c/∂b
 * cr_pullback_call(arena, &pb, &d1[1], d2, 3);   // d2[2] = ∂c/∂a
 * cr_pullback_call(arena, &pa, &d2[2], d3, 2);   // d3[1] = dfoo/dx
 * @endcode
 *
 * Here `&cr_fn_sin` is a `const cr_value *` naming the built-in sin (see rules_math.h).
 *
 * Thread-safety: built-in tables are indexed once (thread-safe) and read without locks.
 * A user registry is thread-confined while it is being filled; after
 * cr_registry_freeze() any number of threads may look rules up in it concurrently.
 */
#ifndef CR_RULE_H
#define CR_RULE_H

#include "arena.h"
#include "common.h"
#include "status.h"
#include "tangent.h"
#include "value.h"

CR_BEGIN_DECLS

struct cr_config;
struct cr_registry;

/* ---- Function objects ------------------------------------------------------------------ */

/**
 * A primal implementation: compute f(args...) into *out, allocating results (arrays,
 * tuples) from `arena`. `f` is the function value itself (its fields, for a functor).
 */
typedef cr_status (*cr_primal_fn)(cr_arena *arena, const cr_value *f, const cr_value *args,
                                  size_t nargs, cr_value *out);

/**
 * A differentiable function's identity (compared by address), name, arity and primal.
 * Usually `static const`. A closure or functor sets `self_type`: its values carry the
 * fields (cr_value_function(fn, &fields)) and its ∂self is a structural tangent of
 * that type.
 */
typedef struct cr_function {
    const char *name;         /**< Name used in messages and by cr_registry_find(). */
    int arity;                /**< Number of arguments, or -1 for variadic. */
    cr_primal_fn primal;      /**< Primal implementation; may be NULL (rules only). */
    const cr_type *self_type; /**< Fields of a functor/closure; NULL for plain functions. */
    const void *udata;        /**< Free for the definer (scalar rows keep their row here). */
    uint32_t flags;           /**< CR_FN_* flags. */
} cr_function;

/** cr_function flag: udata is the function's cr_scalar_rule (see scalar_rule.h). */
#define CR_FN_SCALAR_ROW 1u

/**
 * Call a function's primal implementation.
 * @return CR_OK; CR_EINVAL (f not a function, arity mismatch); CR_ENORULE (no primal);
 *         whatever the primal returns.
 */
CR_API cr_status cr_function_call(cr_arena *arena, const cr_value *f, const cr_value *args,
                                  size_t nargs, cr_value *out);

/* ---- Pullbacks ------------------------------------------------------------------------ */

/**
 * A pullback: given the output cotangent *dy (a structural tangent for a tuple output;
 * possibly a thunk), write nx = nargs + 1 cotangents into dx: dx[0] = ∂self, then one per
 * argument. Allocates from `arena`. Returns CR_OK or an error (recorded on the arena's
 * context).
 */
typedef cr_status (*cr_pullback_fn)(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                    cr_arena *arena, void *env);

/** A named closure: function pointer, environment (arena memory) and name. */
typedef struct cr_pullback {
    cr_pullback_fn fn; /**< The pullback. */
    void *env;         /**< Its captured environment. */
    const char *name;  /**< Its name, e.g. "sin_pullback"; appears in error messages. */
    size_t nx;         /**< Number of cotangents it writes (arguments + 1). */
} cr_pullback;

/**
 * Run a pullback. A zero cotangent (ZeroTangent/NoTangent) is not passed on: every dx is
 * set to ZeroTangent without calling it (pullbacks are linear). On failure, in debug mode,
 * the pullback's name is appended to the context's message, so nested failures read as a
 * chain of pullback names.
 * @param[in]  arena where the cotangents are allocated; errors go to its context.
 * @param[in]  pb the pullback (from cr_rrule()).
 * @param[in]  dy the output cotangent.
 * @param[out] dx nx cotangents.
 * @param[in]  nx number of cotangents; must equal pb->nx.
 * @return CR_OK; CR_EINVAL (NULL, nx mismatch); the pullback's status.
 */
CR_API cr_status cr_pullback_call(cr_arena *arena, const cr_pullback *pb, const cr_tangent *dy,
                                  cr_tangent *dx, size_t nx);

/* ---- Rule configuration (RuleConfig) -------------------------------------------------- */

/** Capability flags of a rule configuration (an AD system). */
typedef enum cr_caps {
    CR_CAP_REVERSE = 1u, /**< HasReverseMode: rrule_via_ad is available. */
    CR_CAP_FORWARD = 2u, /**< HasForwardsMode: frule_via_ad is available. */
    CR_CAP_MUTATION = 4u /**< SupportsMutation. */
} cr_caps;

/** A pullback result of cr_rrule(). */
typedef cr_status (*cr_rrule_via_ad_fn)(const struct cr_config *cfg, cr_arena *arena,
                                        const cr_value *f, const cr_value *args, size_t nargs,
                                        cr_value *y, cr_pullback *pb, void *ad_env);

/** frule_via_ad as an AD system implements it. */
typedef cr_status (*cr_frule_via_ad_fn)(const struct cr_config *cfg, cr_arena *arena,
                                        const cr_tangent *dargs, const cr_value *f,
                                        const cr_value *args, size_t nargs, cr_value *y,
                                        cr_tangent *dy, void *ad_env);

/**
 * A rule configuration: what the calling AD system can do, and its callbacks. NULL
 * wherever a `const cr_config *` is taken means: no capabilities, built-in registry.
 */
typedef struct cr_config {
    uint32_t struct_size;               /**< sizeof(cr_config) or 0. */
    uint32_t caps;                      /**< cr_caps flags. */
    const struct cr_registry *registry; /**< Where rules are looked up; NULL: built-ins. */
    cr_frule_via_ad_fn frule_via_ad;    /**< Required with CR_CAP_FORWARD. */
    cr_rrule_via_ad_fn rrule_via_ad;    /**< Required with CR_CAP_REVERSE. */
    void *ad_env;                       /**< Passed to the callbacks. */
} cr_config;

/**
 * rrule_via_ad: an rrule computed by the configuration's AD system.
 * @return as cr_rrule(); CR_ENOCAP (with a message naming f) when cfg lacks
 *         CR_CAP_REVERSE or the callback.
 */
CR_API cr_status cr_rrule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb);

/**
 * frule_via_ad: an frule computed by the configuration's AD system.
 * @return as cr_frule(); CR_ENOCAP when cfg lacks CR_CAP_FORWARD or the callback.
 */
CR_API cr_status cr_frule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                 const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                                 cr_tangent *dy);

/* ---- Rules ---------------------------------------------------------------------------- */

/**
 * An frule implementation: given dargs[0] = Δself and dargs[1..nargs] = Δargs, compute
 * *y = f(args...) and *dy, its tangent. `udata` is the rule's registered data.
 */
typedef cr_status (*cr_frule_fn)(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                 const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                                 cr_tangent *dy, const void *udata);

/**
 * An rrule implementation: compute *y = f(args...) and the pullback *pb (whose env lives
 * in `arena`, whose name is set and whose nx is nargs + 1).
 */
typedef cr_status (*cr_rrule_fn)(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                 const void *udata);

/**
 * frule((Δself, Δargs...), f, args...): find the most specific frule for the argument
 * kinds and the configuration's capabilities, and run it.
 * @param[in]  cfg   NULL: no capabilities, built-in registry.
 * @param[in]  arena where outputs, tangents and pullback environments are allocated.
 * @param[in]  dargs nargs + 1 tangents, Δself first.
 * @param[in]  f     a CR_KIND_FUNC value.
 * @param[in]  args  the nargs arguments.
 * @param[in]  nargs number of arguments.
 * @param[out] y     the output Ω.
 * @param[out] dy    its tangent ΔΩ (a structural tangent for a tuple output).
 * @return CR_OK; CR_NOTHING when no frule applies (nothing written, no error recorded);
 *         CR_EINVAL (NULL, f not a function); CR_EMISUSE (ambiguous match); the rule's status.
 */
CR_API cr_status cr_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                          const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                          cr_tangent *dy);

/**
 * rrule(f, args...): find the most specific rrule and run it, giving Ω and its pullback.
 * In debug mode the pullback is wrapped so that each cotangent it returns is checked
 * against its argument's projection (CR_ETANGENT naming the pullback and argument).
 * @return CR_OK; CR_NOTHING when no rrule applies; as cr_frule() otherwise.
 */
CR_API cr_status cr_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb);

/* ---- Signatures and dispatch ----------------------------------------------------------- */

/** Atoms of argument kinds; a matcher is a set of atoms. */
enum {
    CR_M_F64 = 1u << 0,     /**< double */
    CR_M_F32 = 1u << 1,     /**< float */
    CR_M_C128 = 1u << 2,    /**< complex double */
    CR_M_INT = 1u << 3,     /**< int64 / int */
    CR_M_BOOL = 1u << 4,    /**< bool */
    CR_M_A_F64 = 1u << 5,   /**< array of double */
    CR_M_A_F32 = 1u << 6,   /**< array of float */
    CR_M_A_C128 = 1u << 7,  /**< array of complex */
    CR_M_A_INT = 1u << 8,   /**< array of int64 */
    CR_M_A_BOOL = 1u << 9,  /**< array of bool */
    CR_M_STRUCT = 1u << 10, /**< a struct (of `type`, or any when type is NULL) */
    CR_M_FUNC = 1u << 11,   /**< a function value */
    CR_M_NOTHING = 1u << 12 /**< no value */
};

/** An argument matcher: a set of kinds, and a struct type for CR_M_STRUCT. */
typedef struct cr_argspec {
    uint32_t mask;       /**< Union of CR_M_* atoms. */
    const cr_type *type; /**< With CR_M_STRUCT: the struct type; NULL matches any struct. */
} cr_argspec;

/** Matcher: f64. */
#define CR_ARG_F64 ((cr_argspec){CR_M_F64, NULL})
/** Matcher: f32. */
#define CR_ARG_F32 ((cr_argspec){CR_M_F32, NULL})
/** Matcher: complex double. */
#define CR_ARG_C128 ((cr_argspec){CR_M_C128, NULL})
/** Matcher: integer. */
#define CR_ARG_INT ((cr_argspec){CR_M_INT, NULL})
/** Matcher: bool. */
#define CR_ARG_BOOL ((cr_argspec){CR_M_BOOL, NULL})
/** Matcher: any real number (Julia's Real: f64, f32, integers, bool). */
#define CR_ARG_REAL ((cr_argspec){CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL, NULL})
/** Matcher: any number (Real or complex). */
#define CR_ARG_NUMBER ((cr_argspec){CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL | CR_M_C128, NULL})
/** Matcher: array of double. */
#define CR_ARG_ARRAY_F64 ((cr_argspec){CR_M_A_F64, NULL})
/** Matcher: array of float. */
#define CR_ARG_ARRAY_F32 ((cr_argspec){CR_M_A_F32, NULL})
/** Matcher: array of complex double. */
#define CR_ARG_ARRAY_C128 ((cr_argspec){CR_M_A_C128, NULL})
/** Matcher: array of any element type. */
#define CR_ARG_ARRAY \
    ((cr_argspec){CR_M_A_F64 | CR_M_A_F32 | CR_M_A_C128 | CR_M_A_INT | CR_M_A_BOOL, NULL})
/** Matcher: a struct of type T (a `const cr_type *`). */
#define CR_ARG_STRUCT(T) ((cr_argspec){CR_M_STRUCT, (T)})
/** Matcher: a function value. */
#define CR_ARG_FUNC ((cr_argspec){CR_M_FUNC, NULL})
/** Matcher: anything. */
#define CR_ARG_ANY ((cr_argspec){0x1FFFu, NULL})

/** Most arguments a signature lists (a variadic signature repeats its last matcher). */
#define CR_SIG_MAX_ARGS 8

/** Which rule a declaration is about. */
typedef enum cr_rule_mode {
    CR_MODE_FRULE = 1, /**< forward rules */
    CR_MODE_RRULE = 2, /**< reverse rules */
    CR_MODE_BOTH = 3   /**< both */
} cr_rule_mode;

/**
 * Test registration of a rule: where the rule tester (testing.h) samples inputs.
 * Scalar-table rules fill it from their row. All members optional.
 */
typedef struct cr_rule_test {
    size_t npoints;       /**< Fixed test points. */
    const double *points; /**< npoints x nargs real coordinates (hard points). */
    const double *lo;     /**< nargs lower bounds of the sampling box (NULL: -3). */
    const double *hi;     /**< nargs upper bounds (NULL: 3). */
    /** Custom generator of arguments (arrays, structs), or NULL. */
    cr_status (*sample)(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs, void *env);
    void *env;   /**< For sample. */
    double rtol; /**< Tolerance override (0: tester default). */
    double atol; /**< Tolerance override (0: tester default). */
} cr_rule_test;

/* ---- Second-order behaviour -------------------------------------------------------------- */

/**
 * The linearity class of a rule's function (cr_rule_def.linearity): what a second-order
 * engine (forward over reverse: cr_tape_hvp() and the prepared H·v of a
 * CR_TAPE_SECOND_ORDER tape) may take for S = d/dε [pullback at x + ε ẋ](ȳ), the
 * derivative of the pullback along the arguments' tangents. Only the differentiable
 * arguments count (integers, dims, index arrays are not). See docs/second-order-forms.md.
 */
typedef enum cr_linearity {
    /** No class: a second-order tape records the function only when the rule has a
     *  form (cr_rule_def.form); without one it refuses it with CR_EUNIMPL. */
    CR_NONLINEAR = 0,
    /** Linear in its differentiable arguments (sum, reshape, transpose, cat, ...): the
     *  pullback does not depend on the point, S = 0. */
    CR_LINEAR = 1,
    /** Linear in each differentiable argument separately (matmul, dot, kron): S_j is the
     *  sum over the other variable arguments l of the rule's pullback at the point with
     *  argument l replaced by its tangent, applied to ȳ. */
    CR_MULTILINEAR = 2,
    /** Linear near almost every point, the pullback fixed by a choice the rule makes
     *  (maximum, sort, findmax): S = 0, the Hessian of the branch the rule took. */
    CR_PIECEWISE_LINEAR = 3
} cr_linearity;

/**
 * Where a second-order form is called: one call y = f(args...) recorded on a second-order
 * tape, in a sweep where y's cotangent ȳ is not zero.
 */
typedef struct cr_form_point {
    const struct cr_config *cfg; /**< The tape's configuration (to call other rules). */
    cr_arena *arena;       /**< Scratch, state and S; errors go to its context (cr_arena_ctx()). */
    const char *name;      /**< The function's name, for messages ("name: ..."). */
    const cr_value *f;     /**< The function called. */
    const cr_value *args;  /**< Its arguments, as the rrule got them. */
    size_t nargs;          /**< Number of arguments. */
    const bool *var;       /**< var[j]: argument j is a variable (S is taken for these only). */
    const cr_value *y;     /**< The result when recorded. */
    const cr_pullback *pb; /**< The rrule's pullback at args, as recorded. */
    cr_tangent ybar;       /**< The cotangent of y (not zero; structural for a tuple). */
} cr_form_point;

/**
 * A form's preparation, once per record and sweep: compute what does not depend on the
 * direction (factors, the pullback applied to ȳ, ...) into *state (memory of p->arena).
 * @return CR_OK; CR_NOTHING when S = 0 at this point along every direction (dir is not
 *         called); an error (with its message on the arena's context).
 */
typedef cr_status (*cr_form_init_fn)(const cr_form_point *p, void **state);

/**
 * A form's step along one direction: given the arguments' tangents xdot[0..nargs)
 * (ZeroTangent for constants and for arguments that do not move along it) and ydot, the
 * result's tangent along the same direction (from the function's frule in the forward
 * sweep; ZeroTangent for a tuple result), write into S[j], for each variable argument j,
 *     S_j = d/dε [pullback at args + ε xdot](ȳ)_j,
 * the derivative of the pullback itself (the engine adds pullback(ȳ̇) separately). The
 * caller sets every S[j] to ZeroTangent first, and projects S[j] onto a structured matrix
 * argument's structure as the rule projects its cotangent. The engine runs this once per
 * direction with at least one nonzero xdot.
 * @return CR_OK or an error (with its message on the arena's context; a message that
 *         starts with "name: " is kept as it is).
 */
typedef cr_status (*cr_form_dir_fn)(const cr_form_point *p, void *state, const cr_tangent *xdot,
                                    cr_tangent ydot, cr_tangent *S);

/**
 * A form's check when a call is recorded on a second-order tape: NULL to accept it, or the
 * reason to refuse it (a static string, quoted in the tape's CR_EUNIMPL message). It may
 * set *linearity to a cr_linearity class that holds at these arguments (a broadcast of a
 * linear scalar function, a norm with p = Inf): the engine then takes S from the class and
 * does not call the form.
 */
typedef const char *(*cr_form_check_fn)(const cr_value *args, size_t nargs, const bool *var,
                                        uint32_t *linearity);

/**
 * The second-order form of a rule: the directional derivative of its pullback, in the
 * three steps above. Usually `static const`, placed beside the rrule.
 */
typedef struct cr_rule_form {
    cr_form_check_fn check; /**< Refusals at record time, or NULL (accept every call). */
    cr_form_init_fn init;   /**< Per-record preparation, or NULL (state NULL). */
    cr_form_dir_fn dir;     /**< Per-direction step; required. */
} cr_rule_form;

/** A rule to register. Zero-initialise, then fill. */
typedef struct cr_rule_def {
    uint32_t struct_size;     /**< sizeof(cr_rule_def) or 0; other sizes: CR_EINVAL. */
    const cr_function *fn;    /**< The function. */
    size_t nargs;             /**< Matchers in args (the fixed arity, or the minimum+1
                                   for a variadic signature). */
    const cr_argspec *args;   /**< nargs argument matchers. */
    bool variadic;            /**< Last matcher repeats (zero or more times). */
    uint32_t caps;            /**< Capabilities the config must have (cr_caps). */
    cr_frule_fn frule;        /**< Forward rule, or NULL. */
    cr_rrule_fn rrule;        /**< Reverse rule, or NULL. */
    const void *udata;        /**< Passed to the rule functions. */
    const cr_rule_test *test; /**< Test registration, or NULL. */
    /** cr_linearity class of fn in its differentiable arguments (CR_NONLINEAR: none).
     *  Added in the second version of the struct (a struct_size of the first version,
     *  offsetof(cr_rule_def, linearity), reads it as CR_NONLINEAR). */
    uint32_t linearity;
    /** Second-order form (the directional derivative of the pullback), or NULL; a
     *  nonlinear array rule with a form is recorded on second-order tapes. A rule that
     *  overrides a built-in rule of the same call and declares neither linearity nor form
     *  keeps the built-in rule's (they belong to the function it computes). */
    const cr_rule_form *form;
} cr_rule_def;

/** Opaque registry. */
typedef struct cr_registry cr_registry;

/**
 * The built-in registry (every rule of the library), indexed on first use.
 * @return never NULL (the built-in tables are static); thread-safe.
 */
CR_API const cr_registry *cr_registry_builtin(void);

/**
 * Whether indexing the built-in tables succeeded (CR_OK), or the first failure (an
 * ambiguous or invalid built-in rule: a bug in the library, caught by its tests).
 */
CR_API cr_status cr_registry_builtin_status(void);

/**
 * Create a user registry over `parent` (NULL: the built-ins). Lookups see its rules and
 * its parent's; the most specific match wins, and a signature registered in the child
 * overrides the same signature in the parent.
 * @param[in]  ctx    allocations and errors; must outlive the registry.
 * @param[in]  parent the registry below, or NULL for the built-ins; must outlive it.
 * @param[out] out caller owns; release with cr_registry_free() (after its children).
 * @return CR_OK, CR_EINVAL, CR_ENOMEM.
 */
CR_API cr_status cr_registry_new(cr_ctx *ctx, const cr_registry *parent, cr_registry **out);

/** Release a registry. @param[in] reg may be NULL. */
CR_API void cr_registry_free(cr_registry *reg);

/**
 * Make the registry read-only; from then on it may be read by many threads at once.
 * Further registrations return CR_EMISUSE.
 */
CR_API cr_status cr_registry_freeze(cr_registry *reg);

/**
 * Register a rule. A signature that is neither more nor less specific than an existing
 * one for the same function and mode, and overlaps it, is ambiguous and rejected, unless
 * a rule for exactly their intersection is already registered (Julia's rule).
 * Registering the same signature and capabilities twice in one registry is rejected too.
 * @return CR_OK; CR_EINVAL (bad definition, duplicate, ambiguous: the message names both
 *         signatures); CR_EMISUSE (frozen); CR_ENOMEM.
 */
CR_API cr_status cr_registry_add(cr_registry *reg, const cr_rule_def *def);

/**
 * `@opt_out`: for this signature (usually more specific than an existing rule), the
 * frule and/or rrule answer CR_NOTHING; the signature is listed by cr_registry_no_rule().
 * @return as cr_registry_add().
 */
CR_API cr_status cr_registry_opt_out(cr_registry *reg, cr_rule_mode mode, const cr_function *fn,
                                     const cr_argspec *args, size_t nargs, bool variadic,
                                     uint32_t caps);

/**
 * `@non_differentiable`: frule gives NoTangent and rrule's pullback gives NoTangent for
 * every argument and for self. fn must have a primal.
 * @return as cr_registry_add().
 */
CR_API cr_status cr_registry_non_differentiable(cr_registry *reg, const cr_function *fn,
                                                const cr_argspec *args, size_t nargs,
                                                bool variadic);

/** What cr_registry_get() and cr_registry_no_rule() describe. */
typedef struct cr_rule_info {
    const cr_function *fn;    /**< The function. */
    size_t nargs;             /**< Matchers. */
    const cr_argspec *args;   /**< Argument matchers (registry storage). */
    bool variadic;            /**< Last matcher repeats. */
    uint32_t caps;            /**< Required capabilities. */
    bool has_frule;           /**< An frule is registered. */
    bool has_rrule;           /**< An rrule is registered. */
    bool no_frule;            /**< frule opted out. */
    bool no_rrule;            /**< rrule opted out. */
    bool non_differentiable;  /**< Declared with cr_registry_non_differentiable(). */
    const cr_rule_test *test; /**< Test registration, or NULL. */
    const cr_rule_def *def;   /**< The definition (registry storage). */
} cr_rule_info;

/** Number of entries registered in reg itself (not its parents). */
CR_API size_t cr_registry_size(const cr_registry *reg);

/** Entry i of reg itself. @return CR_OK or CR_EINVAL (out of range). */
CR_API cr_status cr_registry_get(const cr_registry *reg, size_t i, cr_rule_info *out);

/** The registry's parent (NULL for the built-ins). */
CR_API const cr_registry *cr_registry_parent(const cr_registry *reg);

/**
 * `no_frule` / `no_rrule`: the i-th opted-out signature of reg itself for `mode`.
 * @return CR_OK, or CR_EINVAL past the end (so callers loop until it fails).
 */
CR_API cr_status cr_registry_no_rule(const cr_registry *reg, cr_rule_mode mode, size_t i,
                                     cr_rule_info *out);

/** A function of the registry (or its parents) by name, or NULL. */
CR_API const cr_function *cr_registry_find(const cr_registry *reg, const char *name);

/** A matched rule, from cr_registry_lookup(). */
typedef struct cr_rule_match {
    const cr_rule_def *def; /**< The matching definition (NULL when opted out). */
    bool opted_out;         /**< The most specific match is an opt-out. */
} cr_rule_match;

/**
 * Find the most specific rule of `mode` (CR_MODE_FRULE or CR_MODE_RRULE) for f applied to
 * args under cfg's capabilities. Engines call this once and keep the match.
 * @return CR_OK (a rule or an opt-out); CR_NOTHING (nothing matches); CR_EMISUSE
 *         (two incomparable matches); CR_EINVAL.
 */
CR_API cr_status cr_registry_lookup(const cr_registry *reg, const cr_config *cfg, cr_rule_mode mode,
                                    const cr_value *f, const cr_value *args, size_t nargs,
                                    cr_rule_match *out);

/** The matcher of a value's kind (exact: one atom, and its struct type). */
CR_API cr_argspec cr_argspec_of(const cr_value *v);

/**
 * Write a signature as text, e.g. "sin(f64)", "hypot(real, real...)" into buf.
 * @return the length it needs (like snprintf).
 */
CR_API size_t cr_signature_str(const char *name, const cr_argspec *args, size_t nargs,
                               bool variadic, char *buf, size_t size);

/* ---- Helpers for rule authors --------------------------------------------------------- */

/** Make a named thunk: `CR_THUNK(arena, fn, env, &t)` names it after fn. */
#define CR_THUNK(arena, fn, env, out) cr_tangent_thunk((arena), (fn), (env), #fn, (out))

/**
 * The built-in `ignore_derivatives(x)`: the identity whose rules give NoTangent (a value
 * passed through it is a constant to the AD).
 */
CR_API extern const cr_function cr_function_ignore_derivatives;

/**
 * `ignore_derivatives(f)`: run a callback whose work the AD must not see (logging,
 * statistics). It is a plain call; engines never record inside it.
 */
CR_API cr_status cr_ignore_derivatives(cr_status (*fn)(void *env), void *env);

CR_END_DECLS

#endif /* CR_RULE_H */
