/**
 * @file project.h
 * @brief ProjectTo: keep a tangent in its primal's tangent space.
 *
 * A projector is built once from a primal (outside the pullback) and applied to the
 * tangents the pullback computes, as ChainRulesCore's `ProjectTo(x)(dx)`:
 *
 * - real primals keep their precision (an f32 primal gets an f32 tangent) and drop the
 *   imaginary part of a complex tangent; complex primals accept real tangents;
 * - integer and bool primals (and integer/bool arrays, function objects) give NoTangent,
 *   whatever the tangent, ZeroTangent included (they are not perturbable);
 * - arrays: the tangent is reshaped to the primal's shape (same element count) and
 *   converted to its element type; Diagonal keeps the diagonal of a dense tangent,
 *   Symmetric symmetrises ((dx + dxᵀ)/2), Hermitian takes (dx + dxᴴ)/2,
 *   UpperTriangular / LowerTriangular keep their triangle; Tridiagonal and Bidiagonal keep
 *   their band; SymTridiagonal keeps its band with the off-diagonal symmetrised
 *   ((dx_{i,i+1} + dx_{i+1,i})/2); the lower-triangle Symmetric / Hermitian are projected as
 *   the upper ones; UnitUpperTriangular / UnitLowerTriangular keep their strict triangle and
 *   give an Upper / Lower tangent with a zero diagonal (the unit diagonal is not free);
 * - structs and tuples project field by field;
 * - ZeroTangent, NoTangent and NotImplemented pass through; a thunk gives a thunk that
 *   projects its value when unthunked.
 *
 * @code
 * cr_project *pA;
 * cr_project_new(arena, &A_value, &pA);        // in the rrule
 * ...
 * cr_project_apply(arena, pA, dA_raw, &dA);    // in the pullback
 * @endcode
 */
#ifndef CR_PROJECT_H
#define CR_PROJECT_H

#include "arena.h"
#include "common.h"
#include "status.h"
#include "tangent.h"
#include "value.h"

CR_BEGIN_DECLS

/** A projector (lives in the arena it was built in). */
typedef struct cr_project cr_project;

/**
 * Build the projector of a primal value.
 * @param[in]  arena  where the projector lives; errors are recorded on its context.
 * @param[in]  primal read now, not kept (array shapes and struct layouts are copied).
 * @param[out] out    valid until the arena's reset or free.
 * @return CR_OK; CR_EINVAL (NULL arguments, inconsistent descriptors); allocation statuses.
 */
CR_API cr_status cr_project_new(cr_arena *arena, const cr_value *primal, cr_project **out);

/**
 * Project a tangent. A tangent that already fits is returned as it is (no copy).
 * @return CR_OK; CR_ETANGENT (a tangent that cannot be projected, e.g. an array of several
 *         elements onto a scalar, or a struct of another type); CR_ESHAPE (element counts differ);
 *         allocation statuses.
 */
CR_API cr_status cr_project_apply(cr_arena *arena, const cr_project *p, cr_tangent dx,
                                  cr_tangent *out);

/**
 * Whether dx already lies in the projector's tangent space (projecting would return it
 * unchanged). Zeros and thunks always fit. Used by debug mode.
 */
CR_API bool cr_project_fits(const cr_project *p, cr_tangent dx);

/** One-shot: cr_project_new() then cr_project_apply(). */
CR_API cr_status cr_project_tangent(cr_arena *arena, const cr_value *primal, cr_tangent dx,
                                    cr_tangent *out);

CR_END_DECLS

#endif /* CR_PROJECT_H */
