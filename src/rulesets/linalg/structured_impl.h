/*
 * Private hooks of the structured-matrix rules (structured.c) into the generic linear-algebra
 * rules: the tridiagonal factorization solve() uses for Tridiagonal and SymTridiagonal
 * matrices, and the two-argument Symmetric(A, uplo) / Hermitian(A, uplo).
 */
#ifndef CR_STRUCTURED_IMPL_H
#define CR_STRUCTURED_IMPL_H

#include "linalg_impl.h"

/* The rrule of a wrapper of a square matrix tagged s (Julia's Symmetric, Hermitian, Diagonal and
 * the triangular wrappers, structured.c): Y a view of A (its dense value; Diagonal also of a
 * vector) with the structure s; Symmetric and Hermitian also take a uplo flag second ('L': the
 * lower triangle is read). The pullback gives Ā the entries of Ȳ that Y reads. */
CR_INTERNAL cr_status cr__wrap_rrule(cr_arena *arena, const char *who, cr_matstruct s,
                                     const cr_value *args, size_t nargs, cr_value *y,
                                     cr_pullback *pb, const void *udata);

/* NAME_rrule (cr__wrap_rrule of the structure S, named STR) and the function value cr_fn_NAME. */
#define CR__WRAP_RULE(NAME, STR, S, ARITY)                               \
    static cr_status NAME##_rrule(CR__RRULE_PARAMS)                      \
    {                                                                    \
        return cr__wrap_rrule(arena, STR, S, args, nargs, y, pb, udata); \
    }                                                                    \
    CR__ARRAY_FN(NAME, STR, ARITY)

/* Whether solve() factors a matrix of structure s with cr__gt_factor (Tridiagonal,
 * SymTridiagonal). */
static inline bool cr__gt_structure(uint8_t s)
{
    return s == CR_MAT_TRIDIAGONAL || s == CR_MAT_SYMTRIDIAGONAL;
}

/* Stores a band cotangent's entries at row i of a band array r (matmul's, solve's and rdiv's
 * band cotangents: strides (2, 1), (i, i) at k = 3i, (i, i+1) at 3i + 1, (i+1, i) at 3i + 2,
 * m stored elements), projected onto the structure s of the operand: v holds (i, i),
 * (i, i+1) and (i+1, i) (the last two zero in the last row); SymTridiagonal's off-diagonal
 * is symmetrised, the diagonal a Bidiagonal does not read zeroed, and only real parts are
 * kept unless cplx. A Diagonal's array (nq = 1) stores (i, i) only, at k = i. */
static inline void cr__band_store(cr_array *r, size_t k, size_t m, uint8_t s, cr_complex v[3],
                                  size_t nq, bool cplx)
{
    if (s == CR_MAT_SYMTRIDIAGONAL)
        v[1] = v[2] = 0.5 * (v[1] + v[2]);
    else if (s == CR_MAT_BIDIAG_UPPER)
        v[2] = 0;
    else if (s == CR_MAT_BIDIAG_LOWER)
        v[1] = 0;
    for (size_t q = 0; q < nq && k + q < m; q++)
        cr__store(r, (ptrdiff_t)(k + q), cplx ? v[q] : creal(v[q]));
}

#if defined(CR_HAVE_LAPACKE)

/* The LU factorization with partial pivoting of a tridiagonal matrix (gttrf). */
typedef struct cr__gtf {
    size_t n;
    bool cplx;
    void *dl, *d, *du, *du2; /* n - 1, n, n - 1, n - 2 elements (f64 or c128) */
    lapack_int *ipiv;
} cr__gtf;

/* Factor the band of the square A (its three central diagonals, read through its structure)
 * as work numbers of c128 (cplx) or f64; CR_EDOMAIN ("who: the matrix is singular") for a
 * zero pivot. */
CR_INTERNAL cr_status cr__gt_factor(cr_arena *arena, const char *who, const cr_array *A, bool cplx,
                                    cr__gtf *F);

/* X := op(A)⁻¹ X (gttrs), op 'N' or 'C'. */
CR_INTERNAL cr_status cr__gt_solve(cr_arena *arena, const char *who, const cr__gtf *F, char op,
                                   cr__cmat *X);

#endif /* CR_HAVE_LAPACKE */

#endif /* CR_STRUCTURED_IMPL_H */
