/**
 * @file rules_sparse.h
 * @brief Sparse matrices in compressed-column form and their rules (Julia's SparseArrays).
 *
 * A `cr_sparse` is an m x n matrix stored as Julia's SparseMatrixCSC, built from the
 * library's own arrays: `colptr` (i64, n + 1 entries), `rowval` (i64, one per stored
 * entry) and `nzval` (f64, f32 or c128, one per stored entry). Column j stores the entries
 * colptr[j] .. colptr[j + 1] - 1, with 0-based row indices strictly increasing. It is
 * passed to rules as a struct value (`cr_value_struct(&cr_sparse_type, &S)`).
 *
 * The tangent of a sparse matrix is a structural tangent of `cr_sparse_type` whose only
 * present field is `nzval`, an array of the stored entries' tangents: the pattern is fixed
 * (ChainRules' ProjectTo of a SparseMatrixCSC), so the cotangent of a sparse argument is
 * sparse on the same pattern, and a stored zero is a stored entry like any other.
 * docs/rules-sparse.md lists the functions, their pullbacks and their limits.
 *
 * @code
 * int64_t rows[3] = {0, 2, 0}, cols[3] = {0, 1, 0};
 * double V[3] = {1, 2, 3};                 // (0,0) appears twice: its entries are summed
 * cr_array Ia, Ja, Va = cr_array_vector(V, 3);
 * size_t three = 3;
 * cr_array_view_init(&Ia, rows, CR_DT_I64, 1, &three, NULL);
 * cr_array_view_init(&Ja, cols, CR_DT_I64, 1, &three, NULL);
 * cr_value args[5] = {cr_value_array(&Ia), cr_value_array(&Ja), cr_value_array(&Va),
 *                     cr_value_i64(3), cr_value_i64(2)}, S;
 * cr_function_call(arena, &cr_fn_sparse, args, 5, &S);  // 3 x 2, nzval = {4, 2}
 * @endcode
 *
 * @note The function values are immutable and may be shared between threads.
 */
#ifndef CR_RULES_SPARSE_H
#define CR_RULES_SPARSE_H

#include "common.h"
#include "value.h"

CR_BEGIN_DECLS

/** A compressed-column sparse matrix (SparseMatrixCSC); arrays are borrowed views. */
typedef struct cr_sparse {
    int64_t m;       /**< Rows (>= 0). */
    int64_t n;       /**< Columns (>= 0). */
    cr_array colptr; /**< i64, n + 1 entries: colptr[0] = 0, non-decreasing, colptr[n] = nnz. */
    cr_array rowval; /**< i64, nnz 0-based row indices, strictly increasing in each column. */
    cr_array nzval;  /**< f64, f32 or c128, nnz stored values (1-d). */
} cr_sparse;

/** The type descriptor of cr_sparse (fields m, n, colptr, rowval, nzval). */
CR_API extern const cr_type cr_sparse_type;

/**
 * `sparse(I, J, V)` and `sparse(I, J, V, m, n)`: the m x n matrix with V[k] at (I[k], J[k])
 * (0-based i64 arrays of V's length; repeated positions are summed, zeros are stored). The
 * size defaults to max(I) + 1 by max(J) + 1. Pullback: V̄[k] = S̄'s stored value at
 * (I[k], J[k]). `sparse(A)` of a dense matrix (a vector: one column) stores its nonzero
 * entries; Ā = S̄ at those, 0 at the zeros.
 */
CR_API extern const cr_value cr_fn_sparse;

/**
 * `spdiagm(v)` and `spdiagm(k, v)`: the square sparse matrix of size length(v) + |k| with v
 * on diagonal k (0 the main one, k > 0 above it). Pullback: v̄ = S̄'s stored values.
 */
CR_API extern const cr_value cr_fn_spdiagm;

/**
 * `findnz(S)`: the tuple (I, J, V) of the stored entries in column order (I, J 0-based i64
 * arrays with NoTangent, V a copy of nzval). Pullback: S̄ = V̄ on S's pattern.
 */
CR_API extern const cr_value cr_fn_findnz;

/**
 * `sparse_dense(S)`: the dense m x n matrix of S (Julia's `Matrix(S)`). Pullback: the dense
 * cotangent read on S's pattern.
 */
CR_API extern const cr_value cr_fn_sparse_dense;

/**
 * `sparse_mul(S, B)` and `sparse_mul(S, B, trans)`: op(S) B for a dense vector or matrix B,
 * op chosen by trans ('N', 'T' or 'C' as an i64, 'N' by default). Pullback:
 * B̄ = op(S)ᴴ Ȳ, and S̄ = the entries of Ȳ Bᴴ (through op) on S's pattern.
 */
CR_API extern const cr_value cr_fn_sparse_mul;

/**
 * `sparse_rmul(B, S)` and `sparse_rmul(B, S, trans)`: B op(S) for a dense matrix B (or a
 * vector, as a row). Pullback: B̄ = Ȳ op(S)ᴴ, and S̄ = the entries of Bᴴ Ȳ (through op) on
 * S's pattern.
 */
CR_API extern const cr_value cr_fn_sparse_rmul;

/**
 * `sparse_det(S)`, `sparse_logdet(S)`, `sparse_logabsdet(S)`: det, logdet and logabsdet of
 * a square sparse matrix, through the dense rules (cr_fn_det, ...) on its dense matrix:
 * the same values, domain errors and finite pullbacks at singular matrices; the cotangent
 * is the dense one read on S's pattern. LAPACKE builds only (CR_EUNIMPL otherwise).
 */
CR_API extern const cr_value cr_fn_sparse_det;
/** See cr_fn_sparse_det. */
CR_API extern const cr_value cr_fn_sparse_logdet;
/** See cr_fn_sparse_det. */
CR_API extern const cr_value cr_fn_sparse_logabsdet;

/**
 * `sparse_spmul(A, B)`, `sparse_spmul(A, B, ta, tb)`: the sparse product op(A) op(B) of two
 * sparse matrices (Julia's `A * B`, `A' * B`, `transpose(A) * B`, ... of two
 * SparseMatrixCSC), op by the flags ta and tb (i64 character codes, both or neither): 'N'
 * the matrix, 'T' its transpose, 'C' its adjoint (lower case accepted; CR_EINVAL for
 * another). The result lies on the structural pattern of the product: (i, j) is stored when
 * some k has op(A)[i, k] and op(B)[k, j] stored, even where the terms cancel. The values
 * have the promoted type of A's and B's. Pullback: op(A)'s cotangent C̄ op(B)ᴴ and op(B)'s
 * op(A)ᴴ C̄, computed at the stored entries and carried back through op (transposed,
 * conjugated for 'C'), so that Ā and B̄ keep the arguments' patterns; C̄ a structural tangent
 * or a dense m x n array, read on C's pattern. frule: op(Ȧ) op(B) + op(A) op(Ḃ) on C's
 * pattern. A transposed operand costs one counting pass over its entries.
 */
CR_API extern const cr_value cr_fn_sparse_spmul;

CR_END_DECLS

#endif /* CR_RULES_SPARSE_H */
