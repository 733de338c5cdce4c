/**
 * @file tape_struct.h
 * @brief Friendly tangents: a described C struct's real fields (and array fields) as tape
 *        inputs, and the gradient written back into a struct of the same type.
 *
 * Part of the tape API: tape.h includes it (after the tape, its variables and
 * sweeps), and including it alone includes tape.h. See docs/engine.md.
 */
#if !defined(CR_TAPE_H) && !defined(CR_DOXYGEN)
/* Included first: tape.h declares the tape, then includes this header. */
#include "tape.h"
#elif !defined(CR_TAPE_STRUCT_H)
#define CR_TAPE_STRUCT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "tape.h"
#include "tape_array.h"

CR_BEGIN_DECLS

/* ---- Structs: friendly gradients ----------------------------------------------------------- */

/**
 * Number of real fields (f64, f32) of a described struct, nested structs included: the
 * number of variables cr_tape_struct_inputs() makes for it.
 * @param[in] type the descriptor (NULL gives 0).
 */
CR_API size_t cr_type_real_fields(const cr_type *type);

/**
 * Inputs from a C struct: one variable per real field, depth-first in field order (nested
 * structs are walked; integer, bool, array and function fields make no variable).
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  type the struct's descriptor.
 * @param[in]  obj  the struct (read only).
 * @param[out] vars cr_type_real_fields(type) variables.
 * @param[in]  n    the capacity of vars.
 * @return CR_OK; CR_EINVAL (NULL, n too small, a nested struct field without descriptor);
 *         the tape's status.
 */
CR_API cr_status cr_tape_struct_inputs(cr_tape *t, const cr_type *type, const void *obj,
                                       cr_var *vars, size_t n);

/**
 * The variable of a field, by path: "w", or "inner.x" for a nested struct.
 * @return the variable; a NaN constant when the path names no real field.
 */
CR_API cr_var cr_tape_struct_field(const cr_type *type, const cr_var *vars, const char *path);

/**
 * The friendly gradient of y with respect to a struct's real fields, written into a struct
 * of the same C type (Mooncake's friendly tangents): each f64 or f32 field receives its
 * derivative (an f32 field in f32), integer and bool fields are set to zero, array and
 * function fields are left as they are (cr_tape_gradient_struct_arrays() also fills the
 * array fields).
 * @param[in]  t    the tape.
 * @param[in]  y    the output.
 * @param[in]  type the struct's descriptor.
 * @param[in]  vars the variables from cr_tape_struct_inputs().
 * @param[out] grad a struct of the type (caller storage).
 * @return as cr_tape_gradient(); CR_EINVAL for a NULL tape, type, variables or grad.
 */
CR_API cr_status cr_tape_gradient_struct(cr_tape *t, cr_var y, const cr_type *type,
                                         const cr_var *vars, void *grad);

/**
 * The same gradient as the raw structural tangent (ChainRules' `Tangent{P}`): a
 * CR_TAN_STRUCT of `type` whose real fields are f64 (f32 for float fields) tangents,
 * integer and bool fields NoTangent, nested structs nested structural tangents, and array
 * and function fields ZeroTangent. Allocated in `arena` (which may be the tape's).
 * @param[in]  t     the tape.
 * @param[in]  y     the output.
 * @param[in]  type  the struct's descriptor.
 * @param[in]  vars  the variables from cr_tape_struct_inputs().
 * @param[in]  arena where the tangent is allocated.
 * @param[out] out   the tangent.
 * @return as cr_tape_gradient(); CR_EINVAL for NULL arguments; allocation statuses.
 */
CR_API cr_status cr_tape_gradient_tangent(cr_tape *t, cr_var y, const cr_type *type,
                                          const cr_var *vars, cr_arena *arena, cr_tangent *out);

/* ---- Structs with array fields: friendly gradients ---------------------------------------- */

/**
 * Number of array fields (CR_KIND_ARRAY: a cr_array held by value) of a described struct,
 * nested structs included: the number of array variables cr_tape_struct_array_inputs()
 * makes for it.
 * @param[in] type the descriptor (NULL gives 0).
 */
CR_API size_t cr_type_array_fields(const cr_type *type);

/**
 * Array inputs from a C struct: one array variable per array field, depth-first in field
 * order (as cr_tape_array_input() on each field's cr_array). With cr_tape_struct_inputs()
 * for the real fields, every differentiable field of the struct is a variable.
 * @param[in]  t     the tape (NULL: the current tape).
 * @param[in]  type  the struct's descriptor.
 * @param[in]  obj   the struct: borrowed, read only; its array fields (and their data) must
 *                   stay alive and unmodified until the tape is reset.
 * @param[out] avars cr_type_array_fields(type) array variables.
 * @param[in]  na    the capacity of avars.
 * @return CR_OK; CR_EINVAL (NULL, na too small, a nested struct field without descriptor, an
 *         array field that is not a float array); the tape's status.
 */
CR_API cr_status cr_tape_struct_array_inputs(cr_tape *t, const cr_type *type, const void *obj,
                                             cr_avar *avars, size_t na);

/**
 * The array variable of an array field, by path: "w", or "layer.b" for a nested struct.
 * @param[in] type  the struct's descriptor.
 * @param[in] avars the variables from cr_tape_struct_array_inputs().
 * @param[in] path  the field's path.
 * @return the variable; a constant with a NULL array when the path names no array field.
 */
CR_API cr_avar cr_tape_struct_array_field(const cr_type *type, const cr_avar *avars,
                                          const char *path);

/**
 * The friendly gradient of y with respect to a struct's real and array fields, written into
 * a struct of the same C type: real, integer and bool fields as cr_tape_gradient_struct();
 * each array field's gradient into the array that grad's field describes, which the caller
 * sets up (for instance with cr_array_vector() over its own buffer) with the input's shape
 * and a float dtype, any strides, as cr_tape_gradient_arrays() writes gradient arrays.
 * @param[in]  t     the tape.
 * @param[in]  y     the output.
 * @param[in]  type  the struct's descriptor.
 * @param[in]  vars  the variables from cr_tape_struct_inputs().
 * @param[in]  avars the array variables from cr_tape_struct_array_inputs().
 * @param[in,out] grad a struct of the type whose array fields describe the destinations.
 * @return as cr_tape_gradient_arrays(); CR_EINVAL for NULL arguments or an array field of
 *         grad without data; CR_ESHAPE for a destination of another size.
 */
CR_API cr_status cr_tape_gradient_struct_arrays(cr_tape *t, cr_var y, const cr_type *type,
                                                const cr_var *vars, const cr_avar *avars,
                                                void *grad);

/**
 * The gradient with respect to a struct's real and array fields as the raw structural
 * tangent: as cr_tape_gradient_tangent(), with each array field an array tangent (a new
 * array of the field's shape and dtype).
 * @param[in]  t     the tape.
 * @param[in]  y     the output.
 * @param[in]  type  the struct's descriptor.
 * @param[in]  vars  the variables from cr_tape_struct_inputs().
 * @param[in]  avars the array variables from cr_tape_struct_array_inputs().
 * @param[in]  arena where the tangent and its arrays are allocated.
 * @param[out] out   the tangent.
 * @return as cr_tape_gradient_arrays(); CR_EINVAL for NULL arguments; allocation statuses.
 */
CR_API cr_status cr_tape_gradient_tangent_arrays(cr_tape *t, cr_var y, const cr_type *type,
                                                 const cr_var *vars, const cr_avar *avars,
                                                 cr_arena *arena, cr_tangent *out);

CR_END_DECLS

#endif /* CR_TAPE_STRUCT_H */
