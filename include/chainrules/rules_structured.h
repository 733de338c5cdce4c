/**
 * @file rules_structured.h
 * @brief Structured-matrix constructors: Tridiagonal, SymTridiagonal, Bidiagonal, the
 *        triangular wrappers as functions, and the conversion to a dense Matrix.
 *
 * Each is a function value with an frule and an rrule in the built-in registry (Julia's
 * LinearAlgebra constructors, ChainRules' rules). The results are n x n arrays tagged with
 * the structures of array.h (CR_MAT_TRIDIAGONAL, ...): full storage of which the structure's
 * entries are read. Their cotangents are projected onto the structure (project.h), and the
 * generic linear-algebra rules (matmul, solve, det, logdet, tr, transpose, adjoint, +, -)
 * take them as arguments (docs/rules-linalg.md, "Structured matrices").
 *
 * `Symmetric(A, uplo)` and `Hermitian(A, uplo)` are the two-argument signatures of
 * cr_fn_symmetric and cr_fn_hermitian (rules_linalg.h): uplo 'U' reads the upper triangle
 * (CR_MAT_SYMMETRIC / CR_MAT_HERMITIAN), 'L' the lower one (CR_MAT_SYMMETRIC_LOWER /
 * CR_MAT_HERMITIAN_LOWER). Flags are i64 values holding character codes (`cr_value_i64('L')`,
 * lower case accepted), as for the LAPACK-level functions.
 *
 * @code
 * double dl[2] = {1, 2}, d[3] = {4, 5, 6}, du[2] = {-1, -2};
 * cr_value args[3] = {cr_value_array(&DL), cr_value_array(&D), cr_value_array(&DU)}, T, x;
 * cr_function_call(arena, &cr_fn_tridiagonal, args, 3, &T);      // 3 x 3, tagged
 * CR_MAT_TRIDIAGONAL cr_value sargs[2] = {T, cr_value_array(&b)}; cr_function_call(arena,
 * &cr_fn_solve, sargs, 2, &x);    // gttrf + gttrs
 * @endcode
 */
#ifndef CR_RULES_STRUCTURED_H
#define CR_RULES_STRUCTURED_H

#include "common.h"
#include "value.h"

CR_BEGIN_DECLS

/**
 * `Tridiagonal(dl, d, du)`: the n x n matrix with subdiagonal dl (n - 1), diagonal d (n) and
 * superdiagonal du (n - 1), float vectors; tagged CR_MAT_TRIDIAGONAL, of their promoted
 * element type. Pullback: dl̄ = diag(Ȳ, -1), d̄ = diag(Ȳ), dū = diag(Ȳ, 1).
 */
CR_API extern const cr_value cr_fn_tridiagonal;

/**
 * `SymTridiagonal(dv, ev)`: the symmetric tridiagonal matrix with diagonal dv (n) and
 * off-diagonal ev (n - 1); tagged CR_MAT_SYMTRIDIAGONAL (complex entries are not conjugated
 * in the mirror, as in Julia). Pullback: dv̄ = diag(Ȳ), ēv = diag(Ȳ, 1) + diag(Ȳ, -1).
 */
CR_API extern const cr_value cr_fn_symtridiagonal;

/**
 * `Bidiagonal(dv, ev, uplo)`: diagonal dv (n) and superdiagonal ('U') or subdiagonal ('L') ev
 * (n - 1); tagged CR_MAT_BIDIAG_UPPER / CR_MAT_BIDIAG_LOWER. Pullback: dv̄ = diag(Ȳ),
 * ēv = diag(Ȳ, ±1); uplo gets NoTangent.
 */
CR_API extern const cr_value cr_fn_bidiagonal;

/**
 * `UpperTriangular(A)` as a function: a view of the square A tagged CR_MAT_UPPER (a structured
 * A is copied to its dense value first). Pullback: the upper triangle of Ȳ, projected onto A.
 */
CR_API extern const cr_value cr_fn_upper_triangular;

/** `LowerTriangular(A)`: as cr_fn_upper_triangular for the lower triangle (CR_MAT_LOWER). */
CR_API extern const cr_value cr_fn_lower_triangular;

/**
 * `UnitUpperTriangular(A)`: a view of the square A tagged CR_MAT_UNIT_UPPER (strict upper
 * triangle read, unit diagonal). Affine: the frule gives the strict upper triangle of Ȧ as
 * an Upper tangent with a zero diagonal; the pullback the strict upper triangle of Ȳ.
 */
CR_API extern const cr_value cr_fn_unit_upper_triangular;

/** `UnitLowerTriangular(A)`: as cr_fn_unit_upper_triangular for the strict lower triangle. */
CR_API extern const cr_value cr_fn_unit_lower_triangular;

/**
 * `Matrix(A)`: the dense value of a float matrix of any structure, a new untagged array.
 * Pullback: Ȳ projected onto A's structure (a Tridiagonal A gets its band, a Symmetric A
 * the symmetric part, ...).
 */
CR_API extern const cr_value cr_fn_matrix;

CR_END_DECLS

#endif /* CR_RULES_STRUCTURED_H */
