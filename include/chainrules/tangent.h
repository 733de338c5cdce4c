/**
 * @file tangent.h
 * @brief Tangents and their algebra: ChainRulesCore's tangent types in C.
 *
 * A `cr_tangent` is a 24-byte by-value tagged union (Lua's TValue):
 *
 * | tag               | ChainRulesCore        | payload                              |
 * |-------------------|-----------------------|--------------------------------------|
 * | CR_TAN_ZERO       | ZeroTangent()         | none (a zero-initialised cr_tangent) |
 * | CR_TAN_NONE       | NoTangent()           | none                                 |
 * | CR_TAN_F64/F32    | natural real tangent  | double / float (precision is kept)   |
 * | CR_TAN_C128       | natural complex       | cr_complex                           |
 * | CR_TAN_ARRAY      | natural array tangent | cr_array * (arena or caller memory)  |
 * | CR_TAN_STRUCT     | Tangent{P}, Mutable…  | type descriptor + field tangents     |
 * | CR_TAN_THUNK      | Thunk / Inplaceable…  | cr_thunk * (memoised)                |
 * | CR_TAN_NOTIMPL    | NotImplemented        | const cr_notimpl * (file, line, msg) |
 *
 * Zeros are strong: the algebra returns them (or the other operand) without allocating.
 * Operations that build arrays or structs allocate from the arena passed in; errors are
 * recorded on the arena's context. Thunks are memoised: evaluated at most once however
 * often they are unthunked.
 *
 * @code
 * cr_tangent a = cr_tangent_f64(1.5), b = cr_tangent_zero(), s;
 * cr_tangent_add(arena, a, b, &s);              // s is a: ZeroTangent is the identity
 * cr_tangent_add(arena, cr_tangent_none(), b, &s); // NoTangent wins +
 * @endcode
 *
 * @note Tangents and the arenas they live in are thread-confined.
 */
#ifndef CR_TANGENT_H
#define CR_TANGENT_H

#include "arena.h"
#include "array.h"
#include "common.h"
#include "status.h"
#include "value.h"

CR_BEGIN_DECLS

/** Tangent tags. Append-only. */
typedef enum cr_tag {
    CR_TAN_ZERO = 0,    /**< ZeroTangent: the additive identity. */
    CR_TAN_NONE = 1,    /**< NoTangent: the derivative does not exist (ints, bools, indices). */
    CR_TAN_F64 = 2,     /**< double */
    CR_TAN_F32 = 3,     /**< float */
    CR_TAN_C128 = 4,    /**< complex double */
    CR_TAN_ARRAY = 5,   /**< array tangent */
    CR_TAN_STRUCT = 6,  /**< structural tangent of a struct or tuple */
    CR_TAN_THUNK = 7,   /**< Thunk or InplaceableThunk */
    CR_TAN_NOTIMPL = 8, /**< NotImplemented */
    CR_TAN_ABSENT = 9   /**< a struct field not present (reads as ZeroTangent); only in fields */
} cr_tag;

struct cr_thunk;
struct cr_tangent;
struct cr_config;
struct cr_pullback;

/** Information carried by a NotImplemented tangent. */
typedef struct cr_notimpl {
    const char *file; /**< Source file of the rule. */
    int line;         /**< Line in that file. */
    const char *msg;  /**< What is missing (and, ideally, where it is tracked). */
} cr_notimpl;

/** A tangent (by value). Zero-initialised it is ZeroTangent. */
typedef struct cr_tangent {
    uint8_t tag; /**< A cr_tag. */
    union {
        double f64;            /**< CR_TAN_F64 */
        float f32;             /**< CR_TAN_F32 */
        cr_complex_field c128; /**< CR_TAN_C128 */
        cr_array *arr;         /**< CR_TAN_ARRAY */
        struct {
            const cr_type *type;       /**< Primal type. */
            struct cr_tangent *fields; /**< type->nfields tangents, or NULL: all absent. */
        } s;                           /**< CR_TAN_STRUCT */
        struct cr_thunk *thunk;        /**< CR_TAN_THUNK */
        const cr_notimpl *ni;          /**< CR_TAN_NOTIMPL */
    } u;                               /**< Payload. */
} cr_tangent;

/**
 * A thunk's computation: write the tangent into *out, allocating from `arena` (the arena
 * the thunk was made in). Return CR_OK or an error (recorded on the arena's context).
 */
typedef cr_status (*cr_thunk_fn)(cr_arena *arena, cr_tangent *out, void *env);

/**
 * An InplaceableThunk's add! function: accumulate the thunk's value into dest in place
 * (dest += value, element by element). dest is a writable array of the thunk value's
 * shape and of a dtype that can hold it (complex only if dest is complex).
 */
typedef cr_status (*cr_thunk_add_fn)(cr_arena *arena, cr_array *dest, void *env);

/** A deferred tangent. Allocate with cr_tangent_thunk() / cr_tangent_inplaceable_thunk(). */
typedef struct cr_thunk {
    cr_thunk_fn fn;      /**< Computation. */
    cr_thunk_add_fn add; /**< In-place add! (NULL for a plain Thunk). */
    void *env;           /**< Environment (arena memory: no destructor). */
    cr_arena *arena;     /**< Where the value is allocated. */
    const char *name;    /**< Name shown in error messages. */
    uint8_t state;       /**< 0 pending, 1 running, 2 done, 3 failed. */
    cr_status status;    /**< Result of the evaluation, once done or failed. */
    cr_tangent value;    /**< Memoised value, once done. */
} cr_thunk;

/* ---- Constructors (no allocation unless an arena is taken) ---------------------------- */

/** ZeroTangent(). */
CR_API cr_tangent cr_tangent_zero(void);
/** NoTangent(). */
CR_API cr_tangent cr_tangent_none(void);
/** A double tangent. */
CR_API cr_tangent cr_tangent_f64(double x);
/** A float tangent. */
CR_API cr_tangent cr_tangent_f32(float x);
/** A complex tangent. */
CR_API cr_tangent cr_tangent_c128(cr_complex z);
/** An array tangent (borrows arr: it must outlive the tangent). */
CR_API cr_tangent cr_tangent_array(cr_array *arr);
/** NotImplemented, from static information (info must outlive the tangent). */
CR_API cr_tangent cr_tangent_notimpl(const cr_notimpl *info);

/**
 * NotImplemented with the information copied into the arena.
 * @return CR_OK, or an allocation status (then *out is ZeroTangent).
 */
CR_API cr_status cr_tangent_not_implemented(cr_arena *arena, const char *file, int line,
                                            const char *msg, cr_tangent *out);

/** `@not_implemented(msg)`: NotImplemented tangent naming this file and line. */
#define CR_NOT_IMPLEMENTED(arena, msg, out) \
    cr_tangent_not_implemented((arena), __FILE__, __LINE__, (msg), (out))

/**
 * A structural tangent for `type` with every field absent (reads as ZeroTangent). No
 * allocation.
 */
CR_API cr_tangent cr_tangent_struct_empty(const cr_type *type);

/**
 * A structural tangent for `type` with the named fields set (`Tangent{P}(; a = da)`);
 * fields not named are absent. For tuples (NULL field names) pass names = NULL and
 * n == type->nfields values in order.
 * @param[in] arena  where the field array is allocated.
 * @param[in] type   the primal type.
 * @param[in] names  n field names, or NULL for positional.
 * @param[in] values n tangents (copied).
 * @param[in] n      number of fields given.
 * @param[out] out   the structural tangent.
 * @return CR_OK; CR_EINVAL for an unknown or repeated name or n > nfields; allocation errors.
 */
CR_API cr_status cr_tangent_struct(cr_arena *arena, const cr_type *type, const char *const *names,
                                   const cr_tangent *values, size_t n, cr_tangent *out);

/**
 * Field i of a structural tangent: ZeroTangent when absent. Zero and NoTangent inputs
 * give themselves (a zero struct has zero fields).
 */
CR_API cr_tangent cr_tangent_field(cr_tangent t, size_t i);

/** Whether field i is present (set explicitly, possibly to a zero). */
CR_API bool cr_tangent_field_present(cr_tangent t, size_t i);

/**
 * Field `name` of a structural tangent (`t.name`); ZeroTangent when absent.
 * @return CR_OK; CR_EINVAL when the type has no such field or t is not structural/zero.
 */
CR_API cr_status cr_tangent_getfield(cr_tangent t, const char *name, cr_tangent *out);

/**
 * `canonicalize`: the structural tangent with every field present, absent ones set to
 * ZeroTangent. Other tangents are returned unchanged.
 */
CR_API cr_status cr_tangent_canonicalize(cr_arena *arena, cr_tangent t, cr_tangent *out);

/**
 * A memoised Thunk: `fn(arena, out, env)` runs at the first unthunk, never again.
 * @param[in] arena where the thunk and its value live.
 * @param[in] fn    the computation.
 * @param[in] env   its environment (arena memory, or outliving the thunk).
 * @param[in] name  shown in messages; static or arena storage.
 * @param[out] out  the thunk tangent.
 * @return CR_OK or an allocation status.
 */
CR_API cr_status cr_tangent_thunk(cr_arena *arena, cr_thunk_fn fn, void *env, const char *name,
                                  cr_tangent *out);

/**
 * An InplaceableThunk: like cr_tangent_thunk() plus `add`, used by cr_tangent_accum()
 * to add the value into an inplaceable destination without materialising it.
 */
CR_API cr_status cr_tangent_inplaceable_thunk(cr_arena *arena, cr_thunk_fn fn, cr_thunk_add_fn add,
                                              void *env, const char *name, cr_tangent *out);

/* ---- Queries -------------------------------------------------------------------------- */

/** Whether t is ZeroTangent or NoTangent (AbstractZero). */
CR_API bool cr_tangent_is_zero(cr_tangent t);

/** Whether t is a Thunk or InplaceableThunk. */
CR_API bool cr_tangent_is_thunk(cr_tangent t);

/** Whether t is an InplaceableThunk. */
CR_API bool cr_tangent_is_inplaceable_thunk(cr_tangent t);

/** Name of a tag ("ZeroTangent", "NoTangent", "f64", ..., "Thunk", "NotImplemented"). */
CR_API const char *cr_tag_name(cr_tag tag);

/**
 * `is_inplaceable_destination`: t is an array tangent flagged CR_ARRAY_WRITABLE whose
 * dtype is f64, f32 or c128 (a buffer the accumulator owns).
 */
CR_API bool cr_tangent_is_inplaceable_destination(cr_tangent t);

/* ---- Thunks --------------------------------------------------------------------------- */

/**
 * `unthunk`: the value of a thunk (evaluated at most once, then memoised), repeated
 * while the value is itself a thunk; any other tangent is returned as it is.
 * @return CR_OK, the thunk's failure status (memoised too), or CR_EMISUSE when a thunk
 *         depends on itself.
 */
CR_API cr_status cr_tangent_unthunk(cr_tangent t, cr_tangent *out);

/* ---- The algebra ---------------------------------------------------------------------- */

/**
 * `x + y`. Strong zeros: NoTangent + ZeroTangent = NoTangent, zero + y = y (no
 * allocation), NotImplemented + anything = that NotImplemented. Thunks are unthunked.
 * Arrays must have the same shape; real + complex promotes to complex; f32 + f32 stays f32;
 * structured + same structure keeps the structure. Structs must have the same type.
 * @return CR_OK; CR_ESHAPE; CR_ETANGENT (incompatible kinds); allocation statuses;
 *         a thunk's failure status.
 */
CR_API cr_status cr_tangent_add(cr_arena *arena, cr_tangent x, cr_tangent y, cr_tangent *out);

/**
 * `x - y`. As cr_tangent_add(); subtraction involving NotImplemented is an error
 * (CR_EUNIMPL), as in ChainRulesCore.
 */
CR_API cr_status cr_tangent_sub(cr_arena *arena, cr_tangent x, cr_tangent y, cr_tangent *out);

/** `-x` (NotImplemented stays itself). */
CR_API cr_status cr_tangent_neg(cr_arena *arena, cr_tangent x, cr_tangent *out);

/**
 * `s * x` for a real s. Zeros and NotImplemented stay themselves; f32 stays f32.
 */
CR_API cr_status cr_tangent_scale(cr_arena *arena, double s, cr_tangent x, cr_tangent *out);

/** `s * x` for a complex s (a real tangent becomes complex). */
CR_API cr_status cr_tangent_scale_c(cr_arena *arena, cr_complex s, cr_tangent x, cr_tangent *out);

/**
 * `a * b` of two tangents where at least one is a zero, NotImplemented or a scalar:
 * ZeroTangent wins (NoTangent * ZeroTangent = ZeroTangent), NoTangent * x = NoTangent,
 * NotImplemented loses to the zeros and wins otherwise; scalar * tangent scales.
 * @return CR_OK; CR_ETANGENT when neither operand is a scalar or special.
 */
CR_API cr_status cr_tangent_mul(cr_arena *arena, cr_tangent a, cr_tangent b, cr_tangent *out);

/** `conj(x)` (real tangents and zeros are returned as they are). */
CR_API cr_status cr_tangent_conj(cr_arena *arena, cr_tangent x, cr_tangent *out);

/**
 * `dot(x, y)` = sum conj(x_i) y_i over all real or complex components (struct fields
 * summed). Zeros give ZeroTangent (or NoTangent if one is NoTangent and the other is not
 * ZeroTangent); NotImplemented loses to zeros and wins otherwise; a number result is an
 * f64 tangent when both are real, c128 otherwise.
 */
CR_API cr_status cr_tangent_dot(cr_arena *arena, cr_tangent x, cr_tangent y, cr_tangent *out);

/**
 * `add!!(x, y)`: x + y, mutating x's buffer in place when x is an inplaceable
 * destination and y fits in it (same shape; complex only if x is; a structured x only
 * takes the same structure). Otherwise out of place, like cr_tangent_add(). An
 * InplaceableThunk y is added with its add! function (never evaluated) when x is a dense
 * inplaceable destination; a structured destination (Diagonal, triangular, ...) gets the
 * evaluated value added instead, since add! writes a dense array.
 * In place, out->u.arr == x.u.arr. Structural tangents accumulate field by field.
 * In debug mode, checks that an in-place add! left the destination in place.
 * @return as cr_tangent_add().
 */
CR_API cr_status cr_tangent_accum(cr_arena *arena, cr_tangent x, cr_tangent y, cr_tangent *out);

/**
 * A natural zero tangent of the same structure as t, materialised (zero-filled writable
 * arrays, structs with explicit zero fields, 0.0 scalars); zeros stay zeros.
 */
CR_API cr_status cr_tangent_zeros_like(cr_arena *arena, cr_tangent t, cr_tangent *out);

/**
 * The zero tangent of a primal value, materialised: 0.0 of the right precision, a
 * zero-filled writable array of the same shape and dtype (structure kept), a struct
 * tangent with explicit zero fields; NoTangent for integers, bools, integer arrays and
 * function objects.
 */
CR_API cr_status cr_tangent_zero_of(cr_arena *arena, const cr_value *primal, cr_tangent *out);

/**
 * Deep-copy a tangent into the arena (arrays become contiguous writable copies;
 * thunks are unthunked first).
 */
CR_API cr_status cr_tangent_copy(cr_arena *arena, cr_tangent t, cr_tangent *out);

/**
 * Whether two tangents are equal within tolerance: |a - b| <= atol + rtol * max(|a|,|b|)
 * componentwise, with zeros equal to zero values and absent fields to zeros.
 * Thunks are unthunked. Used by tests and the rule tester.
 */
CR_API bool cr_tangent_isapprox(cr_tangent a, cr_tangent b, double rtol, double atol);

/* ---- MutableTangent ------------------------------------------------------------------- */

/**
 * `MutableTangent{P}(; fields...)`: the tangent of a mutable struct (docs/tangents.md). It
 * is a structural tangent (CR_TAN_STRUCT, so the algebra, projection and testers read it as
 * Tangent{P}) whose field list is its own, with every field present (those not given are
 * ZeroTangent), and which cr_mutable_tangent_setfield() updates in place: every copy of
 * the cr_tangent sees the change, as every reference to a Julia MutableTangent does.
 * Results of the algebra (x + y, add!! of two structs) are new structural tangents.
 * @param[in]  arena  where the field list is allocated.
 * @param[in]  type   the primal type.
 * @param[in]  names  n field names, or NULL for positional values (tuples).
 * @param[in]  values n tangents (copied), each fitting its field's kind.
 * @param[in]  n      number of fields given.
 * @param[out] out    the MutableTangent.
 * @return CR_OK; CR_EINVAL (unknown or repeated name, n > nfields); CR_ETANGENT (a value
 *         that does not fit its field, e.g. a complex tangent for an f64 field);
 *         allocation statuses.
 */
CR_API cr_status cr_mutable_tangent(cr_arena *arena, const cr_type *type, const char *const *names,
                                    const cr_tangent *values, size_t n, cr_tangent *out);

/**
 * The zero MutableTangent of a struct value: cr_tangent_zero_of() (0.0 for real fields,
 * zero-filled writable arrays, NoTangent for integer, bool and function fields), which is
 * a new field list with every field present.
 * @return CR_OK; CR_EINVAL (NULL, not a struct, a struct without fields); allocation
 *         statuses.
 */
CR_API cr_status cr_mutable_tangent_zero_of(cr_arena *arena, const cr_value *primal,
                                            cr_tangent *out);

/**
 * `setproperty!(mt, i, v)`: field i of a MutableTangent becomes v, in place.
 * @param[in] arena where errors are recorded.
 * @param[in] mt    the MutableTangent (a structural tangent with a field list).
 * @param[in] i     the field (0-based).
 * @param[in] v     its new tangent (ZeroTangent, NoTangent, a thunk, NotImplemented, or a
 *                  tangent of the field's kind: a real or complex number for f64/f32 and
 *                  c128 fields (complex only for c128), an array, a structural tangent of
 *                  the field's type).
 * @return CR_OK; CR_ETANGENT (mt is not a MutableTangent: ZeroTangent or an all-absent
 *         Tangent has no field list; v does not fit the field); CR_EINVAL (i out of range).
 */
CR_API cr_status cr_mutable_tangent_setfield(cr_arena *arena, cr_tangent mt, size_t i,
                                             cr_tangent v);

/**
 * `setproperty!(mt, name, v)`: cr_mutable_tangent_setfield() by field name.
 * @return as cr_mutable_tangent_setfield(); CR_EINVAL for an unknown name.
 */
CR_API cr_status cr_mutable_tangent_setproperty(cr_arena *arena, cr_tangent mt, const char *name,
                                                cr_tangent v);

/**
 * `mt.i = add!!(mt.i, v)` in place: how reverse mode accumulates a field's cotangent into
 * the adjoint of a mutable struct (an array field's buffer is added into when it is an
 * inplaceable destination).
 * @return as cr_mutable_tangent_setfield(); statuses of cr_tangent_accum().
 */
CR_API cr_status cr_mutable_tangent_accumfield(cr_arena *arena, cr_tangent mt, size_t i,
                                               cr_tangent v);

/**
 * Every field of a MutableTangent becomes that of t, in place: t a structural tangent of
 * the same type (absent fields become ZeroTangent) or a zero (every field becomes it).
 * Reverse mode uses it to replace the adjoint of a struct after a call by the adjoint
 * before it (the pullback of cr_fn_setfield_bang).
 * @return CR_OK; CR_ETANGENT (mt not a MutableTangent, t of another type or a field that
 *         does not fit); a thunk's status.
 */
CR_API cr_status cr_mutable_tangent_assign(cr_arena *arena, cr_tangent mt, cr_tangent t);

/**
 * `getfield(obj, i)`: field i (0-based, an integer; Julia's 1-based index or name is
 * i - 1 or cr_type_field_index()) of a described struct. Rules: ẏ = ȯbj.i; the pullback
 * gives obj the structural cotangent with field i = ȳ (others absent), i NoTangent. An
 * array or struct field is returned as a view into obj (borrowed, as obj is).
 */
CR_API extern const cr_value cr_fn_getfield;

/**
 * `setfield!(obj, i, x)`. As every mutating function's rule (rules_array.h) it does not
 * write through its argument: it returns the *new contents* of obj, a copy with field i
 * set to x (x converted to the field's kind: a real number for f64/f32 fields, real or
 * complex for c128, an integer or bool for integer fields, a bool for bool fields, a
 * struct of the field's type, an array, a function). Rules: ẏ = ȯbj with field i set to ẋ
 * (a new field list); the pullback gives ōbj = ȳ with field i zeroed (the old value never
 * reaches the result) and x̄ = ȳ.i (real for a real x, NoTangent for an integer).
 * cr_setfield_frule() and cr_setfield_rrule() apply it in place.
 */
CR_API extern const cr_value cr_fn_setfield_bang;

/**
 * ChainRulesCore's `construct(T, fields...)`: a struct of type T from its field values in
 * order, bypassing any constructor. C has no type values, so T is given by any value of
 * the type (`construct(like, x0, x1, ...)`; its contents are not read and its cotangent is
 * NoTangent). Values are converted as setfield! converts them. Rules: ẏ = Tangent{T} of
 * the fields' tangents; the pullback gives each field value ȳ.k.
 */
CR_API extern const cr_value cr_fn_construct;

/**
 * Run the frule of setfield!(obj, i, x) in place: args = {obj, i, x}, dargs = {∂self,
 * ȯbj, ∂i, ẋ}. obj's struct (args[0].u.obj.ptr, the caller's memory) gets field i = x,
 * and its MutableTangent ȯbj (dargs[1]) field i = ẋ (`setproperty!(ȯbj, i, ẋ)`, as in
 * ChainRulesCore's frule of setfield!).
 * @param[in] cfg   configuration, or NULL.
 * @param[in] arena scratch and errors.
 * @param[in,out] args  3 arguments; the struct of args[0] is written.
 * @param[in,out] dargs 4 tangents; the MutableTangent dargs[1] is written.
 * @param[in] nargs 3.
 * @return CR_OK; CR_EINVAL (bad arguments, nargs); CR_ETANGENT (dargs[1] not a
 *         MutableTangent of obj's type); the rule's status (then nothing is written).
 */
CR_API cr_status cr_setfield_frule(const struct cr_config *cfg, cr_arena *arena,
                                   const cr_value *args, const cr_tangent *dargs, size_t nargs);

/**
 * Run the rrule of setfield!(obj, i, x) in place: obj's struct gets field i = x. The
 * pullback takes the adjoint of obj *after* the call (its MutableTangent M) and gives the
 * cotangents before it: dx[1] is M with field i zeroed, dx[3] = M.i for x. Reverse mode
 * then replaces M's fields with dx[1] (cr_mutable_tangent_assign()) and accumulates dx[3]
 * into x's adjoint. The pullback does not read obj, so overwriting it is safe.
 * @param[in] cfg   configuration, or NULL.
 * @param[in] arena scratch, the pullback's environment and errors.
 * @param[in,out] args 3 arguments; the struct of args[0] is written.
 * @param[in] nargs 3.
 * @param[out] pb   the pullback.
 * @return CR_OK; CR_EINVAL; the rule's status (then nothing is written).
 */
CR_API cr_status cr_setfield_rrule(const struct cr_config *cfg, cr_arena *arena,
                                   const cr_value *args, size_t nargs, struct cr_pullback *pb);

CR_END_DECLS

#endif /* CR_TANGENT_H */
