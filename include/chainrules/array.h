/**
 * @file array.h
 * @brief Dense n-d arrays and strided views: element types, shapes, structure tags.
 *
 * A `cr_array` describes memory it does not own: a data pointer, an element type, up to
 * CR_ARRAY_MAX_DIMS dimensions and a stride (in elements, may be negative or zero) per
 * dimension. The default layout is row-major (C order). Arrays serve both as primal
 * values and as natural tangents.
 *
 * Matrices may carry a structure tag (Julia's Diagonal, Symmetric, Hermitian,
 * UpperTriangular, LowerTriangular wrappers):
 * - CR_MAT_DIAGONAL stores only the diagonal: `shape` is {n, n}, the n diagonal entries
 *   are at `data + k*strides[0]` (strides[1] is ignored).
 * - CR_MAT_SYMMETRIC, CR_MAT_HERMITIAN store a full n x n matrix of which only the upper
 *   triangle is read (the lower is implied: mirrored, or conjugate-mirrored).
 * - CR_MAT_UPPER, CR_MAT_LOWER store a full matrix of which only the triangle is read;
 *   the other triangle is logically zero whatever the memory holds.
 *
 * The banded and unit-diagonal structures (Julia's Tridiagonal, SymTridiagonal, Bidiagonal,
 * UnitUpperTriangular, UnitLowerTriangular) and the lower-triangle Symmetric/Hermitian
 * (`Symmetric(A, :L)`) follow the same convention: a full n x n matrix with any strides, of
 * which only the entries named below are read; every other entry is logically zero (or
 * mirrored) whatever the memory holds. The band is thus addressed as A(i, j); strides that
 * overlap give a compact store (strides {2, 1} put the three central diagonals of an n x n
 * band in 3n - 2 elements, as the band cotangents of matmul are stored; such an array is
 * never an in-place destination of the tangent algebra):
 * - CR_MAT_TRIDIAGONAL reads the entries with |i - j| <= 1 (dl = A(i+1, i), d = A(i, i),
 *   du = A(i, i+1)).
 * - CR_MAT_SYMTRIDIAGONAL reads the diagonal and A(i, i+1); A(i+1, i) is A(i, i+1) (a
 *   symmetric matrix, also for complex entries: no conjugation, as Julia's SymTridiagonal).
 * - CR_MAT_BIDIAG_UPPER reads A(i, i) and A(i, i+1); CR_MAT_BIDIAG_LOWER A(i, i) and A(i+1, i).
 * - CR_MAT_UNIT_UPPER, CR_MAT_UNIT_LOWER read the strict triangle; the diagonal is 1 and is
 *   not read. Their tangents are CR_MAT_UPPER / CR_MAT_LOWER arrays with a zero diagonal
 *   (the diagonal is not free), which is what projection (project.h) gives.
 * - CR_MAT_SYMMETRIC_LOWER, CR_MAT_HERMITIAN_LOWER read the lower triangle (diagonal
 *   included), the upper one mirrored (conjugate-mirrored, real diagonal, for Hermitian).
 * Tangents of the band structures and of the lower-triangle Symmetric/Hermitian carry the
 * structure of their primal; elementwise tangent algebra runs on their storage. A unit
 * structure is not closed under addition or scaling: the tangent algebra (tangent.h) reads
 * a unit-tagged array as its logical dense value.
 *
 * @code
 * double w[6] = {1, 2, 3, 4, 5, 6};
 * cr_array W = cr_array_matrix(w, 2, 3);        // 2x3 row-major view, borrows w
 * cr_array *G;
 * cr_array_new(arena, CR_DT_F64, 2, W.shape, &G); // zero-filled 2x3, lives in the arena
 * @endcode
 */
#ifndef CR_ARRAY_H
#define CR_ARRAY_H

#include "arena.h"
#include "common.h"
#include "status.h"

CR_BEGIN_DECLS

/** Element types. Append-only. */
typedef enum cr_dtype {
    CR_DT_F64 = 1,  /**< double */
    CR_DT_F32 = 2,  /**< float */
    CR_DT_C128 = 3, /**< double complex (cr_complex) */
    CR_DT_I64 = 4,  /**< int64_t (not differentiable: NoTangent) */
    CR_DT_BOOL = 5  /**< bool (not differentiable: NoTangent) */
} cr_dtype;

/** Matrix structure tags. Append-only. */
typedef enum cr_matstruct {
    CR_MAT_DENSE = 0,            /**< General array. */
    CR_MAT_DIAGONAL = 1,         /**< Diagonal matrix, only the diagonal stored. */
    CR_MAT_SYMMETRIC = 2,        /**< Symmetric; upper triangle read. */
    CR_MAT_HERMITIAN = 3,        /**< Hermitian; upper triangle read, diagonal real. */
    CR_MAT_UPPER = 4,            /**< Upper triangular. */
    CR_MAT_LOWER = 5,            /**< Lower triangular. */
    CR_MAT_TRIDIAGONAL = 6,      /**< Tridiagonal; the three central diagonals read. */
    CR_MAT_SYMTRIDIAGONAL = 7,   /**< Symmetric tridiagonal; diagonal and superdiagonal read. */
    CR_MAT_BIDIAG_UPPER = 8,     /**< Upper bidiagonal; diagonal and superdiagonal read. */
    CR_MAT_BIDIAG_LOWER = 9,     /**< Lower bidiagonal; diagonal and subdiagonal read. */
    CR_MAT_UNIT_UPPER = 10,      /**< Unit upper triangular; strict upper triangle read. */
    CR_MAT_UNIT_LOWER = 11,      /**< Unit lower triangular; strict lower triangle read. */
    CR_MAT_SYMMETRIC_LOWER = 12, /**< Symmetric; lower triangle read. */
    CR_MAT_HERMITIAN_LOWER = 13  /**< Hermitian; lower triangle read, diagonal real. */
} cr_matstruct;

/** Maximum number of dimensions. */
#define CR_ARRAY_MAX_DIMS 8

/** Flag: the buffer may be mutated in place by accumulation (add!!). See tangent.h. */
#define CR_ARRAY_WRITABLE 1u

/** An array descriptor (a view: it does not own `data`). */
typedef struct cr_array {
    void *data;                           /**< First element (logical index 0,...,0). */
    size_t shape[CR_ARRAY_MAX_DIMS];      /**< Extent of each dimension. */
    ptrdiff_t strides[CR_ARRAY_MAX_DIMS]; /**< Step between elements, in elements. */
    uint8_t dtype;                        /**< A cr_dtype. */
    uint8_t ndim;                         /**< Number of dimensions, 0..CR_ARRAY_MAX_DIMS. */
    uint8_t structure;                    /**< A cr_matstruct (ndim == 2 unless DENSE). */
    uint8_t flags;                        /**< CR_ARRAY_WRITABLE or 0. */
} cr_array;

/** Size in bytes of one element of `dtype`; 0 for an unknown dtype. */
CR_API size_t cr_dtype_size(cr_dtype dtype);

/** Name of a dtype ("f64", "f32", "c128", "i64", "bool"); "?" when unknown. */
CR_API const char *cr_dtype_name(cr_dtype dtype);

/** Whether the dtype is differentiable (f64, f32, c128). */
CR_API bool cr_dtype_is_float(cr_dtype dtype);

/** Name of a structure tag ("dense", "diagonal", ...). */
CR_API const char *cr_matstruct_name(cr_matstruct s);

/**
 * Describe existing memory as an array.
 * @param[out] out     the descriptor (flags 0, structure DENSE).
 * @param[in]  data    first element; borrowed, must outlive every use of the view.
 * @param[in]  dtype   element type.
 * @param[in]  ndim    number of dimensions (<= CR_ARRAY_MAX_DIMS).
 * @param[in]  shape   ndim extents (may be NULL when ndim == 0).
 * @param[in]  strides ndim strides in elements, or NULL for contiguous row-major.
 * @return CR_OK; CR_EINVAL (NULL out, bad dtype, ndim too large, NULL data with elements);
 *         CR_EOVERFLOW (the element count or the byte count of the shape exceeds
 *         PTRDIFF_MAX, extents 0 counted as 1).
 */
CR_API cr_status cr_array_view_init(cr_array *out, void *data, cr_dtype dtype, size_t ndim,
                                    const size_t *shape, const ptrdiff_t *strides);

/** A contiguous f64 vector view of n elements at data (borrowed). */
CR_API cr_array cr_array_vector(double *data, size_t n);

/** A contiguous row-major f64 matrix view (rows x cols) at data (borrowed). */
CR_API cr_array cr_array_matrix(double *data, size_t rows, size_t cols);

/**
 * Allocate a zero-filled contiguous row-major array in an arena, flagged writable.
 * @param[in]  arena where descriptor and data live (until its reset or free).
 * @param[in]  dtype element type.
 * @param[in]  ndim  number of dimensions (<= CR_ARRAY_MAX_DIMS).
 * @param[in]  shape ndim extents.
 * @param[out] out   the new array.
 * @return CR_OK, CR_EINVAL, CR_EOVERFLOW, CR_ENOMEM, CR_EARENA.
 */
CR_API cr_status cr_array_new(cr_arena *arena, cr_dtype dtype, size_t ndim, const size_t *shape,
                              cr_array **out);

/**
 * Copy an array into a new contiguous, writable arena array of the same shape, dtype and
 * structure (a Diagonal copy stores n elements).
 * @return as cr_array_new().
 */
CR_API cr_status cr_array_copy(cr_arena *arena, const cr_array *src, cr_array **out);

/** Number of logical elements (product of the shape; 1 for ndim 0). */
CR_API size_t cr_array_numel(const cr_array *a);

/** Number of stored elements (n for a Diagonal, numel otherwise). */
CR_API size_t cr_array_nstored(const cr_array *a);

/** Whether the array's storage is contiguous row-major (a Diagonal: unit stride). */
CR_API bool cr_array_is_contiguous(const cr_array *a);

/** Whether two arrays have the same ndim and shape. */
CR_API bool cr_array_same_shape(const cr_array *a, const cr_array *b);

/**
 * Read the logical element at a row-major linear index (structure applied: zeros off a
 * Diagonal or outside a triangle, mirrored Symmetric/Hermitian), widened to complex.
 * @note Slow path for generic code and tests; rules use the storage directly.
 */
CR_API cr_complex cr_array_get_linear(const cr_array *a, size_t index);

CR_END_DECLS

#endif /* CR_ARRAY_H */
