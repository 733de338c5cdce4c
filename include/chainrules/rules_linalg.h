/**
 * @file rules_linalg.h
 * @brief Linear-algebra rules over BLAS and LAPACK, as function values with frules and
 *        rrules.
 *
 * Each `cr_fn_NAME` is a `const cr_value` of kind CR_KIND_FUNC. Conventions
 * (docs/rules-linalg.md), besides those of rules_array.h:
 *
 * - Matrices are row-major `cr_array`s of f64, f32 or c128; a transposed view (strides
 *   swapped) is passed to BLAS as a transposed operand, without a copy. Structure tags
 *   (Diagonal, Symmetric, Hermitian, Upper, Lower) are honoured: the argument's logical
 *   value is used, and its cotangent is projected onto its structure (a Diagonal argument
 *   gets a Diagonal cotangent).
 * - Complex cotangents follow ChainRules: for Y = A B the pullback gives Ȳ Bᴴ and Aᴴ Ȳ.
 * - CBLAS does the work when the library was built with it (CR_HAVE_CBLAS); otherwise a
 *   plain C loop. The LAPACK-based functions (det, inv, solve, factorizations) exist only
 *   with LAPACKE; without it their rules are not registered and calling them gives
 *   CR_EUNIMPL.
 * - Multi-output pullbacks return thunks; the matrix cotangents of matmul and gemm are
 *   InplaceableThunks whose add! runs gemm with beta = 1 into the accumulator.
 *
 * @code
 * cr_value args[2] = {cr_value_array(&A), cr_value_array(&B)}, y;
 * cr_pullback pb;
 * cr_rrule(NULL, arena, &cr_fn_matmul, args, 2, &y, &pb);  // y = A B
 * cr_tangent dy = cr_tangent_array(G), dx[3];
 * cr_pullback_call(arena, &pb, &dy, dx, 3);   // dx[1] = G Bᵀ, dx[2] = Aᵀ G (thunks)
 * @endcode
 *
 * @note The function values are immutable and may be shared between threads.
 */
#ifndef CR_RULES_LINALG_H
#define CR_RULES_LINALG_H

#include "common.h"
#include "value.h"

CR_BEGIN_DECLS

/* ---- BLAS level ------------------------------------------------------------------------ */

/**
 * `dot(x, y)` = Σ conj(x_i) y_i over arrays of equal element count (BLAS dot/dotc), and
 * `dot(x, A, y)` = xᴴ A y for vectors x, y and a matrix A. Pullback of dot(x, y):
 * x̄ = y conj(ȳ), ȳ_y = x ȳ (ChainRules' form);
 * for dot(x, A, y): x̄ = A y conj(ȳ), Ā = x ȳ yᴴ, ȳ_y = Aᴴ x ȳ.
 */
CR_API extern const cr_value cr_fn_dot;

/**
 * `matmul(A, B)` (A * B): matrix-matrix (gemm), matrix-vector (gemv: a 1-d B is a
 * column) and vector-matrix (a 1-d A is a row; the result is 1-d). Pullback:
 * Ā = Ȳ Bᴴ, B̄ = Aᴴ Ȳ, each an InplaceableThunk (projected onto A's and B's structure).
 */
CR_API extern const cr_value cr_fn_matmul;

/**
 * `gemm(alpha, A, B, beta, C)` = alpha A B + beta C (the out-of-place form of
 * `mul!(C, A, B, α, β)`); alpha and beta are numbers (differentiable), C has the shape of
 * A B. Pullback: ᾱ = <A B, Ȳ>, Ā = conj(α) Ȳ Bᴴ, B̄ = conj(α) Aᴴ Ȳ, β̄ = <C, Ȳ>,
 * C̄ = conj(β) Ȳ.
 */
CR_API extern const cr_value cr_fn_gemm;

/** `tr(A)`: the trace of a square matrix. Pullback: ȳ I (a Diagonal cotangent for a
 *  Diagonal A, projected otherwise). */
CR_API extern const cr_value cr_fn_tr;

CR_END_DECLS

#endif /* CR_RULES_LINALG_H */
