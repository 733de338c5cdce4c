/**
 * @file engine.h
 * @brief The AD engine's configuration: which rules it uses, what it records for user
 *        functions, and the RuleConfig it gives to rules (rrule_via_ad, frule_via_ad).
 *
 * What the engine does with a call f(args...) on a tape (cr_tape_call()), in order
 * (Mooncake's build_rrule):
 *
 * 1. f is declared zero-adjoint (cr_engine_zero_adjoint(), Mooncake's `@zero_adjoint`) or
 *    has a non-differentiable rule: f runs, its results are constants.
 * 2. f has a rule for these argument kinds (Mooncake's `is_primitive`): the rule is used
 *    and nothing inside f is recorded. Rules come from the engine's registry, which falls
 *    back to the built-ins; cr_engine_from_rrule() adds a rule written in the generic
 *    rrule form (ChainRules' `rrule`), used as it is (Mooncake's `@from_rrule`).
 * 3. f has an implementation written against the tape API (cr_engine_overlay(), Mooncake's
 *    `@mooncake_overlay`): it is run on the tape and its operations are recorded. An overlay
 *    is seen only by the AD: f's primal (used everywhere else) may be a plain C function
 *    the engine cannot look into.
 * 4. Otherwise: CR_ENORULE, naming f and the argument kinds.
 *
 * The engine's RuleConfig has CR_CAP_REVERSE and CR_CAP_FORWARD: a rule that needs to
 * differentiate a function it was given (map, sum(f, x), foldl, broadcast of a user
 * function) calls cr_rrule_via_ad() / cr_frule_via_ad(), and the engine records that
 * function on a sub-tape in the rule's arena, by the same four steps.
 *
 * @code
 * static cr_status my_f_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
 *                          void *env) { y[0] = cr_mul(t, x[0], cr_sin(t, x[0])); return CR_OK; }
 * static const cr_function my_f = {.name = "my_f", .arity = 1, .primal = my_f_primal};
 * cr_engine *eng;
 * cr_engine_new(ctx, NULL, &eng);
 * cr_engine_overlay(eng, &my_f, my_f_ad, 1, NULL);
 * cr_tape_new(ctx, &(cr_tape_params){.engine = eng}, &t);
 * cr_value f = cr_value_function(&my_f, NULL);
 * cr_var y = cr_tape_call1(t, &f, &x, 1);       // records x * sin(x)
 * @endcode
 *
 * @note An engine is filled by one thread, then only read: any number of tapes, on any
 *       threads, may use it once it is no longer modified.
 */
#ifndef CR_ENGINE_H
#define CR_ENGINE_H

#include "common.h"
#include "ctx.h"
#include "rule.h"
#include "status.h"
#include "tape.h"

CR_BEGIN_DECLS

/**
 * Create an engine.
 * @param[in]  ctx      allocations and errors; must outlive the engine.
 * @param[in]  registry the rules to use (falls back to the built-ins); NULL: built-ins
 *                      only. Borrowed: must outlive the engine.
 * @param[out] out      caller owns; release with cr_engine_free() after the tapes using it.
 * @return CR_OK; CR_EINVAL; CR_ENOMEM.
 */
CR_API cr_status cr_engine_new(cr_ctx *ctx, const cr_registry *registry, cr_engine **out);

/** Release an engine. @param[in] eng may be NULL. */
CR_API void cr_engine_free(cr_engine *eng);

/**
 * The implementation the AD records for fn (an overlay: only the AD sees it). Used when
 * fn has no rule for the arguments. Replaces an earlier overlay of fn.
 * @param[in] eng  the engine.
 * @param[in] fn   the function's identity; must outlive the engine.
 * @param[in] impl its implementation against the tape API.
 * @param[in] nout number of results impl produces.
 * @param[in] env  passed to impl (borrowed).
 * @return CR_OK; CR_EINVAL (NULL, nout 0); CR_ENOMEM.
 */
CR_API cr_status cr_engine_overlay(cr_engine *eng, const cr_function *fn, cr_ad_fn impl,
                                   size_t nout, void *env);

/**
 * The overlay of a closure (a functor: fn->self_type describes its fields), which reads
 * its fields as variables: impl receives x[0..nf) = the closure's real fields (f64 and f32
 * fields, nested structs walked depth-first, the order of cr_tape_struct_inputs(); nf =
 * cr_type_real_fields(fn->self_type)), then x[nf..nf + nargs) = the arguments. On a tape the
 * fields are constants (the values in the function value's self); under rrule_via_ad and
 * frule_via_ad they are variables, so the pullback gives the closure's cotangent as a
 * structural tangent of fn->self_type (∂self: real fields f64/f32, integer and bool fields
 * NoTangent, function and array fields ZeroTangent) and frule_via_ad pushes a structural
 * tangent of the closure forward. This is how map, sum(f, x), foldl, accumulate and
 * broadcast give the cotangent of a closure's captured values (Zygote's closures).
 * @param[in] eng  the engine.
 * @param[in] fn   the function's identity (with a self_type); must outlive the engine.
 * @param[in] impl its implementation against the tape API (fields first, then arguments).
 * @param[in] nout number of results impl produces (1..8).
 * @param[in] env  passed to impl (borrowed).
 * @return CR_OK; CR_EINVAL (NULL, no self_type, nout outside 1..8, a nested struct field
 *         without descriptor); CR_ENOMEM.
 */
CR_API cr_status cr_engine_overlay_closure(cr_engine *eng, const cr_function *fn, cr_ad_fn impl,
                                           size_t nout, void *env);

/**
 * Declare fn zero-adjoint: its results are constants to the AD (no derivative flows
 * through them, nothing is recorded). A call needs fn's primal or an overlay to compute
 * the results; the overlay may be registered after this declaration, so neither is
 * checked here: a call of fn with neither fails the tape with CR_EINVAL ("... is
 * zero-adjoint but has no primal to call").
 * @param[in,out] eng the engine.
 * @param[in]     fn  the function (borrowed; must outlive the engine).
 * @return CR_OK; CR_EINVAL (NULL eng or fn); CR_ENOMEM.
 */
CR_API cr_status cr_engine_zero_adjoint(cr_engine *eng, const cr_function *fn);

/**
 * Use a rule written in the generic form (cr_rule_def: frule and/or rrule) for its
 * function and signature, as it is: the function becomes a primitive for those argument
 * kinds. The rule goes into a registry the engine owns (over the one it was given).
 * @return as cr_registry_add().
 */
CR_API cr_status cr_engine_from_rrule(cr_engine *eng, const cr_rule_def *def);

/**
 * Whether the engine treats f(args...) as a primitive (it has a rule for these argument
 * kinds, or a zero-adjoint declaration), Mooncake's is_primitive.
 * @param[in] eng   may be NULL (built-in rules).
 * @param[in] f     the function value.
 * @param[in] args  the arguments (only their kinds matter).
 * @param[in] nargs number of arguments.
 */
CR_API bool cr_engine_is_primitive(const cr_engine *eng, const cr_value *f, const cr_value *args,
                                   size_t nargs);

/**
 * A type's customised friendly gradient (Mooncake's `tangent_to_friendly_internal!!`, the
 * AsCustomised mode): given the raw structural tangent of a struct of `type` (real fields
 * f64/f32 tangents, array fields array tangents, integers NoTangent, nested structs nested),
 * write into `dest`, a struct of the type inside the caller's gradient, what the user sees.
 * For instance, a packed symmetric matrix {a, b, c} = [a b; b c] whose raw gradient counts
 * the off-diagonal b twice can give the gradient of each entry of the full matrix.
 * @param[in]  type  the struct's descriptor.
 * @param[in]  raw   the raw tangent (valid during the call only).
 * @param[out] dest  the struct of the type to write (its array fields describe the
 *                   caller's gradient arrays, already filled).
 * @param[in]  udata as registered.
 * @return CR_OK, or a status that the struct gradient returns (grad's fields are then left
 *         as they were; the data of its array fields may have been written).
 */
typedef cr_status (*cr_friendly_fn)(const cr_type *type, cr_tangent raw, void *dest, void *udata);

/**
 * Customise the friendly gradient of a struct type: cr_tape_gradient_struct() and
 * cr_tape_gradient_struct_arrays() on tapes made with this engine call fn for a struct of
 * this type, the struct itself or any nested field of it, instead of writing its fields
 * one by one. Replaces an earlier registration of the type.
 * @param[in] eng   the engine.
 * @param[in] type  the descriptor (compared by address); must outlive the engine.
 * @param[in] fn    the conversion.
 * @param[in] udata passed to fn (borrowed).
 * @return CR_OK; CR_EINVAL (NULL, a nested struct field without descriptor); CR_ENOMEM.
 */
CR_API cr_status cr_engine_friendly(cr_engine *eng, const cr_type *type, cr_friendly_fn fn,
                                    void *udata);

/**
 * The engine's RuleConfig: CR_CAP_REVERSE | CR_CAP_FORWARD, its registry, and the
 * rrule_via_ad / frule_via_ad callbacks.
 * @param[in] eng may be NULL: the configuration of tapes without an engine.
 * @return a configuration owned by the engine (static for NULL).
 */
CR_API const cr_config *cr_engine_config(const cr_engine *eng);

CR_END_DECLS

#endif /* CR_ENGINE_H */
