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

/**
 * `kron(A, B)`: the Kronecker product of two matrices (or of two vectors):
 * C[i p + k, j q + l] = A[i, j] B[k, l] for B of p x q. Pullback: Ā[i, j] = Σ conj(B[k, l])
 * C̄[...], B̄ likewise (thunks).
 */
CR_API extern const cr_value cr_fn_kron;

/**
 * `cross(a, b)`: the cross product of two vectors of length 3. Pullback: ā = conj(b) × c̄,
 * b̄ = c̄ × conj(a) (thunks).
 */
CR_API extern const cr_value cr_fn_cross;

/**
 * `asum(x)` = Σ |re x_i| + |im x_i| (BLAS asum; the 1-norm of a real array). Pullback:
 * (sign re x_i + i sign im x_i) ȳ, 0 at 0. (nrm2 and gemv: cr_fn_nrm2, cr_fn_gemv.)
 */
CR_API extern const cr_value cr_fn_asum;

/**
 * `Symmetric(A)`: a view of the square matrix A tagged CR_MAT_SYMMETRIC (its upper
 * triangle read, mirrored). Pullback: Ā_ij = Ȳ_ij + Ȳ_ji above the diagonal, Ȳ_ii on it, 0
 * below (the lower triangle is not read).
 */
CR_API extern const cr_value cr_fn_symmetric;

/** `Hermitian(A)`: a view tagged CR_MAT_HERMITIAN. Pullback: Ȳ_ij + conj(Ȳ_ji) above the
 *  diagonal, re Ȳ_ii on it, 0 below. */
CR_API extern const cr_value cr_fn_hermitian;

/** `Diagonal(v)` of a vector, `Diagonal(A)` of a square matrix's diagonal: a view tagged
 *  CR_MAT_DIAGONAL. Pullback: the diagonal of Ȳ. */
CR_API extern const cr_value cr_fn_diagonal;

/* ---- LAPACK level --------------------------------------------------------------------- */

/**
 * `det(A)` of a square matrix (LU, getrf). Pullback: Ā = adj(A)ᴴ ȳ, with the adjugate
 * adj(A) = det(A) A⁻¹ from the LU factors; for a singular A (a zero pivot) the adjugate
 * comes from the SVD instead (no division by zero).
 */
CR_API extern const cr_value cr_fn_det;

/**
 * `logdet(A)` = log(det A) of a real matrix with positive determinant, or of any
 * nonsingular complex matrix (principal log, computed as Σ log|u_ii| + i arg det). Pullback:
 * Ā = A⁻ᴴ ȳ. A negative determinant (real) or a singular matrix gives CR_EDOMAIN.
 */
CR_API extern const cr_value cr_fn_logdet;

/**
 * `logabsdet(A)`: the tuple (log|det A|, sign), sign = det/|det| (±1 for real A, of unit
 * modulus for complex A). The sign of a real matrix has a zero derivative. Pullback:
 * Ā = c A⁻ᴴ with c = l̄ + i im(conj(sign) s̄). A singular A gives CR_EDOMAIN.
 */
CR_API extern const cr_value cr_fn_logabsdet;

/** `inv(A)` of a square nonsingular matrix (LU, getrf + getrs), named cr_fn_matinv so as
 *  not to clash with the scalar cr_fn_inv. Pullback: Ā = -Yᴴ Ȳ Yᴴ. */
CR_API extern const cr_value cr_fn_matinv;

/**
 * `solve(A, B)` (A \ B): A square, B a vector or matrix. Dense, Symmetric and Hermitian A
 * use LU (getrf/getrs), Upper/Lower A a triangular solve (trtrs), Tridiagonal,
 * SymTridiagonal and Bidiagonal A gttrf/gttrs, Diagonal A a division. A singular A gives
 * CR_EDOMAIN. Pullback: B̄ = A⁻ᴴ Ȳ, Ā = -B̄ Yᴴ (a thunk, projected onto A's structure; for
 * a Diagonal or band A formed on the entries A reads only, in O(n) memory). Frule:
 * Ẏ = A⁻¹ (Ḃ - Ȧ Y), a Diagonal- or band-tagged Ȧ applied on its band in O(n) per column.
 */
CR_API extern const cr_value cr_fn_solve;

/**
 * `rdiv(B, A)` (B / A = B A⁻¹): A square, B a matrix with as many columns as A, or a
 * vector (a row; the result is a vector). Uses A's structure as solve does. Pullback:
 * B̄ = Ȳ A⁻ᴴ, Ā = -Yᴴ B̄ (a thunk, projected onto A's structure; for a Diagonal or band A
 * formed on the entries A reads only, in O(n) memory). Frule: Ẏ = (Ḃ - Y Ȧ) A⁻¹, a
 * Diagonal- or band-tagged Ȧ applied on its band in O(n) per row.
 */
CR_API extern const cr_value cr_fn_rdiv;

/**
 * `cholesky(A)` of a Hermitian positive definite matrix: the Upper-tagged factor U with
 * A = Uᴴ U (potrf). Only A's upper triangle is read (a dense A's lower triangle is
 * ignored, as LAPACK does), so a dense A's cotangent lives on its upper triangle and a
 * Symmetric/Hermitian A's is Hermitian. CR_EDOMAIN when A is not positive definite.
 * Pullback: Seeger et al. (ChainRules' formula). `cholesky(x)` of a real number x > 0 (a
 * 1 x 1 matrix; Julia's `cholesky(x::Real)`) is the number √x of x's precision, with
 * x̄ = ȳ / (2√x); CR_EDOMAIN for x <= 0.
 */
CR_API extern const cr_value cr_fn_cholesky;

/**
 * `eigen(A)` of a Symmetric or Hermitian matrix (or a dense one, whose upper triangle is
 * read, as for cholesky): the tuple (values, vectors), ascending real eigenvalues and orthonormal
 * eigenvectors in the columns (syevd/heevd). Pullback: Ā = V (diag(λ̄) + F ∘ (Vᴴ V̄)) Vᴴ
 * with F_ij = 1/(λ_j - λ_i); for repeated (or numerically equal) eigenvalues F_ij is 0,
 * which is correct when the loss does not depend on the choice of basis of the
 * eigenspace (docs/rules-linalg.md).
 */
CR_API extern const cr_value cr_fn_eigen;

/** `eigvals(A)` of a Symmetric or Hermitian matrix: ascending eigenvalues. Pullback:
 *  V diag(λ̄) Vᴴ, well defined for repeated eigenvalues. */
CR_API extern const cr_value cr_fn_eigvals;

/**
 * `svd(A)` of a real or complex m x n matrix: the tuple (U, S, V) of the thin SVD
 * A = U diag(S) Vᴴ (gesdd), U m x k, S real descending of length k = min(m, n), V n x k
 * (Julia's `F.U, F.S, F.V`). For a complex A the phases are fixed (the gauge): in each
 * column of U the entry of largest magnitude (the first of equal ones) is real positive,
 * and V's column turns with it. Pullback: the formula of ChainRules' svd_rev, with
 * 1/(s_j² - s_i²) replaced by 0 where two singular values are equal and 1/s_i by 0 where
 * one is zero, so degenerate and rank-deficient matrices give finite cotangents
 * (ChainRules #664); for complex A plus the term U diag(-i im(VᴴV̄)_ii / s_i) Vᴴ of the
 * complex SVD adjoint (Wan and Zhang) and the derivative of the gauge, so that the
 * rules are exact for losses that depend on the phases as well as for those that do not.
 */
CR_API extern const cr_value cr_fn_svd;

/**
 * `expm(A)`: the exponential of a general square matrix (Julia's `exp(A)`), by scaling and
 * squaring with a Padé approximant of degree 3 to 13 (Higham 2005). The frule gives the
 * Fréchet derivative L(A, Ȧ), the pullback L(Aᴴ, Ȳ), both from the exponential of the
 * block matrix [A E; 0 A].
 */
CR_API extern const cr_value cr_fn_expm;

/**
 * `matfun_herm(f, A)`: f(A) = V diag(f(λ)) Vᴴ for a Hermitian A (its upper triangle is
 * read, as eigen does) and a scalar-table function f of one argument (exp, log, sqrt,
 * sin, cos, tanh, ... from rules_math.h): Julia's `exp(Hermitian(A))` and friends. The
 * result is tagged Symmetric (real) or Hermitian (complex). The derivative is
 * Daleckii-Krein's, with the divided differences (f(λ_i) - f(λ_j))/(λ_i - λ_j), and
 * f'((λ_i + λ_j)/2) where the eigenvalues (nearly) coincide. CR_EDOMAIN where f is not
 * finite at an eigenvalue (log of a matrix that is not positive definite).
 */
CR_API extern const cr_value cr_fn_matfun_herm;

/**
 * `sincos_herm(A)`: the tuple (sin A, cos A) of a Hermitian A (its upper triangle read), both
 * from one eigendecomposition (Julia's `sincos(Hermitian(A))`), each tagged as matfun_herm's
 * result. Pullback: the sum of the two Daleckii-Krein terms, V (F_sin ∘ (Vᴴ S̄ V) + F_cos ∘
 * (Vᴴ C̄ V)) Vᴴ, folded onto the triangle read.
 */
CR_API extern const cr_value cr_fn_sincos_herm;

/** `svdvals(A)` of a real or complex matrix: the singular values, descending. Pullback:
 *  U diag(S̄) Vᴴ. */
CR_API extern const cr_value cr_fn_svdvals;

/* ---- Factorizations (linalg/factorizations.c)
 * ------------------------------------------------------ */

/**
 * `lu(A)` of an m x n matrix with partial pivoting (getrf): the tuple (L, U, p) with
 * A[p[i], :] = (L U)[i, :]; L m x k unit lower, U k x n upper (k = min(m, n); tagged
 * CR_MAT_LOWER and CR_MAT_UPPER when A is square, dense trapezoids otherwise), p a 0-based
 * i64 permutation of the m rows (Julia's `F.p` minus one) whose tangent is NoTangent. A
 * singular A (a zero pivot) gives CR_EDOMAIN, as Julia's `lu` throws. Pullback:
 * Ā = Pᵀ L⁻ᴴ (tril(Lᴴ L̄, -1) + triu(Ū Uᴴ)) U⁻ᴴ, with the extra block of a rectangular A
 * folded in (ChainRules' rule). Real and complex.
 */
CR_API extern const cr_value cr_fn_lu;

/**
 * `qr(A)` of an m x n matrix: the tuple (Q, R) of the thin QR factorization (geqrf,
 * orgqr/ungqr), k = min(m, n): Q m x k with orthonormal columns, R k x n upper triangular
 * (tagged CR_MAT_UPPER when square; a dense upper trapezoid for a wide A) with a real
 * diagonal of any sign (LAPACK's and Julia's convention). Pullback: M = R R̄ᴴ - Q̄ᴴ Q,
 * Ā = (Q̄ + Q copyltu(M)) R⁻ᴴ; a wide A = [X Y], R = [U V] gets X̄ from that rule with
 * Q̄ + Y V̄ᴴ and Ū, and Ȳ = Q V̄. A rank-deficient A (a zero on R's diagonal) gives
 * CR_EDOMAIN there. Real and complex.
 */
CR_API extern const cr_value cr_fn_qr;

/**
 * `eigen_general(A)`: Julia's `eigen` of a general (non-Hermitian) square matrix (geev):
 * the tuple (values, vectors) of c128 arrays, eigenvalues sorted by real then imaginary part,
 * eigenvectors in the columns, each of unit 2-norm with its component of largest modulus
 * (the first on a tie) real and positive. Pullback: Ā = V⁻ᴴ (diag(λ̄) + conj(F) ∘ H) Vᴴ with
 * F_ij = 1/(λ_j - λ_i) and H = Vᴴ V̄ - Vᴴ V diag(re diag(Vᴴ V̄)) plus the term of the phase
 * convention (zero for losses that do not depend on the phases). Repeated eigenvalues: the
 * eigenvectors have no derivative; their infinite terms are dropped (finite results); a
 * defective A (singular V) gives CR_EDOMAIN in the pullback and frule. Real and complex A;
 * a real A gets a real cotangent. (cr_fn_eigen is the Hermitian eigendecomposition.)
 */
CR_API extern const cr_value cr_fn_eigen_general;

/** `eigvals_general(A)`: the eigenvalues of a general square matrix (c128, sorted as
 *  eigen_general sorts them). Pullback: Ā = V⁻ᴴ diag(λ̄) Vᴴ. */
CR_API extern const cr_value cr_fn_eigvals_general;

/**
 * `cholesky_solve(U, B)` = (Uᴴ U) \ B for a Cholesky factor U (as cr_fn_cholesky returns
 * it; only its upper triangle is read) and a vector or matrix B: Julia's `C \ B` for
 * `C = cholesky(A)`, two triangular solves. A zero on U's diagonal gives CR_EDOMAIN.
 * Pullback: B̄ = (Uᴴ U)⁻¹ Ȳ, Ū = triu(U (Ā + Āᴴ)) with Ā = -B̄ Yᴴ (a thunk).
 */
CR_API extern const cr_value cr_fn_cholesky_solve;

/**
 * `cholesky_rdiv(B, U)` = B (Uᴴ U)⁻¹ for a Cholesky factor U and a matrix B with as many
 * columns as U (or a vector, read as a row): Julia's `B / C` for `C = cholesky(A)`, the
 * adjoint of cholesky_solve(U, Bᴴ). A zero on U's diagonal gives CR_EDOMAIN. Pullback:
 * B̄ = Ȳ (Uᴴ U)⁻¹, Ū = triu(U (Ā + Āᴴ)) with Ā = -Yᴴ B̄ (a thunk).
 */
CR_API extern const cr_value cr_fn_cholesky_rdiv;

/** `cholesky_det(U)` = det(Uᴴ U) = Π |u_ii|² of a Cholesky factor (a real number).
 *  Pullback: Ū_ii = 2 ȳ u_ii Π_{j≠i} |u_jj|² (no division: zeros allowed). */
CR_API extern const cr_value cr_fn_cholesky_det;

/** `cholesky_logdet(U)` = logdet(Uᴴ U) = 2 Σ log |u_ii| of a Cholesky factor (real). A zero
 *  on the diagonal gives CR_EDOMAIN. Pullback: Ū_ii = 2 ȳ / conj(u_ii). */
CR_API extern const cr_value cr_fn_cholesky_logdet;

/**
 * `pinv(A)`: the Moore-Penrose pseudo-inverse of an m x n matrix through the SVD (gesdd),
 * singular values at or below eps * min(m, n) * s_max treated as zero (Julia's default;
 * eps of the argument's precision, FLT_EPSILON for f32). Pullback (Golub and Pereyra):
 * Ā = -Yᴴ Ȳ Yᴴ + (I - A Y) Ȳᴴ Y Yᴴ + Yᴴ Y Ȳᴴ (I - Y A), also at rank-deficient A (the
 * derivative of the truncated pseudo-inverse). Real and complex.
 */
CR_API extern const cr_value cr_fn_pinv;

/**
 * `pinv_ex(A, atol)` and `pinv_ex(A, atol, rtol)`: Julia's `pinv(A; atol, rtol)`, the
 * singular values at or below max(atol, rtol * s_max) treated as zero; without rtol, Julia's
 * default eps * min(m, n) when atol is 0 and 0 otherwise. atol and rtol are real numbers
 * (CR_EINVAL for NaN; a negative one truncates nothing) with zero cotangents. pinv and pinv_ex of a
 * vector x (an m x 1 matrix) give the 1 x m matrix xᴴ / |x|² (zero at x = 0), Julia's `pinv(x)`.
 * Pullback: pinv's.
 */
CR_API extern const cr_value cr_fn_pinv_ex;

/**
 * `sylvester(A, B, C)`: the X with A X + X B + C = 0 (Julia's sign convention), A n x n, B
 * m x m, C n x m; Bartels-Stewart with complex Schur forms (gees) and trsyl, for real and
 * complex arguments. CR_EDOMAIN when A and -B share an eigenvalue (no unique solution).
 * Pullback: Λ solves Aᴴ Λ + Λ Bᴴ + X̄ = 0; C̄ = Λ, Ā = Λ Xᴴ, B̄ = Xᴴ Λ (thunks).
 */
CR_API extern const cr_value cr_fn_sylvester;

/**
 * `lyap(A, C)`: the X with A X + X Aᴴ + C = 0 (Julia's continuous Lyapunov equation), A and
 * C n x n, solved as sylvester(A, Aᴴ, C) with one Schur form. CR_EDOMAIN when λ_i + conj(λ_j)
 * = 0 for eigenvalues of A. Pullback: Λ solves Aᴴ Λ + Λ A + X̄ = 0; C̄ = Λ,
 * Ā = Λ Xᴴ + Λᴴ X (a thunk).
 */
CR_API extern const cr_value cr_fn_lyap;
/* ---- BLAS and LAPACK level (functional forms) -------------------------------------------- */

/*
 * The BLAS and LAPACK routines as functions (ChainRules' blas.jl and lapack.jl): arguments
 * are never mutated and results are new arrays, like Julia's non-bang wrappers. Flags are
 * i64 values holding LAPACK's character codes (`cr_value_i64('T')`; lower case accepted):
 * trans 'N', 'T', 'C', uplo 'U', 'L', diag 'N', 'U'. Pivots are LAPACK's 1-based row
 * interchanges (an i64 array). Flags and pivots get NoTangent. Computation is in double or
 * double complex; f32 arguments give f32 results.
 */

/**
 * `nrm2(x)`: the 2-norm of all elements of x, a name for `norm(x)` (cr_fn_norm) with the
 * same rules: computed scaled (no overflow or underflow); at a zero x the cotangent is 0
 * (the subgradient ChainRules uses), never NaN.
 */
CR_API extern const cr_value cr_fn_nrm2;

/**
 * `gemv(trans, alpha, A, x)` = alpha op(A) x and `gemv(trans, alpha, A, x, beta, y)` =
 * alpha op(A) x + beta y (the out-of-place `gemv!`), op(A) = A, Aᵀ or Aᴴ for trans 'N',
 * 'T', 'C'. Pullback: ᾱ = <op(A) x, ȳ>, Ā = conj(α) ȳ xᴴ mapped back through op (an
 * InplaceableThunk adding the rank-one matrix in place), x̄ = conj(α) op(A)ᴴ ȳ (a thunk),
 * β̄ = <y, ȳ>, ȳ_y = conj(β) ȳ.
 */
CR_API extern const cr_value cr_fn_gemv;

/**
 * `getrf(A)` of an m x n matrix: the tuple (F, ipiv) of the LU factorization with partial
 * pivoting A = P L U (LAPACK's getrf): F holds L strictly below the diagonal (L's unit
 * diagonal implied) and U on and above it; ipiv the min(m, n) 1-based row interchanges
 * (i64); a rectangular A's rules are lu's. The
 * primal of a singular A (a zero pivot) returns the factors; its frule and rrule give
 * CR_EDOMAIN (their formula needs U⁻¹). Pullback (ChainRules' lu rule), with L̄ and Ū the
 * strictly lower and upper parts of F̄: Ā = P L⁻ᴴ (tril₋(Lᴴ L̄) + triu(Ū Uᴴ)) U⁻ᴴ.
 */
CR_API extern const cr_value cr_fn_getrf;

/**
 * `getrs(F, ipiv, B, trans)` = op(A)⁻¹ B for A = P L U given by getrf's factors, trans
 * 'N', 'T' or 'C', B a vector or a matrix. CR_EDOMAIN when U has a zero diagonal entry.
 * Pullback: B̄ = op(A)⁻ᴴ X̄; F̄ from Ā = op⁻¹(-B̄ Xᴴ) through A = P L U:
 * F̄ = tril₋(Pᵀ Ā Uᴴ) + triu(Lᴴ Pᵀ Ā) (a thunk).
 */
CR_API extern const cr_value cr_fn_getrs;

/**
 * `getri(F, ipiv)` = A⁻¹ for A = P L U given by getrf's factors. CR_EDOMAIN when U has a
 * zero diagonal entry. Pullback: Ā = -Yᴴ Ȳ Yᴴ, then F̄ as for getrs.
 */
CR_API extern const cr_value cr_fn_getri;

/**
 * `potrf(A, uplo)`: the Cholesky factor of the Hermitian positive definite matrix whose
 * triangle uplo is A's (the other triangle is not read, as LAPACK's potrf): U with
 * H = Uᴴ U for 'U', L with H = L Lᴴ for 'L', tagged Upper or Lower, the other triangle
 * zero. CR_EDOMAIN when H is not positive definite. Pullback: Seeger et al.'s formula (as
 * cholesky), the gradient folded onto the triangle that was read.
 */
CR_API extern const cr_value cr_fn_potrf;

/**
 * `potrs(F, uplo, B)` = H⁻¹ B for H = Uᴴ U (uplo 'U', U the upper triangle of F) or
 * H = L Lᴴ ('L', L the lower triangle), B a vector or a matrix. CR_EDOMAIN when the
 * triangle has a zero diagonal entry. Pullback: B̄ = H⁻¹ X̄, H̄ = -B̄ Xᴴ, F̄ = triu(U (H̄ + H̄ᴴ))
 * or tril((H̄ + H̄ᴴ) L) (a thunk).
 */
CR_API extern const cr_value cr_fn_potrs;

/**
 * `trtrs(A, uplo, trans, diag, B)` = op(T)⁻¹ B for T the triangle uplo of A (with a unit
 * diagonal, not read, when diag is 'U'), trans 'N', 'T' or 'C'. CR_EDOMAIN for a zero
 * diagonal entry. Pullback: B̄ = op(T)⁻ᴴ X̄, Ā = the triangle of op⁻¹(-B̄ Xᴴ) (strict for a
 * unit diagonal; a thunk).
 */
CR_API extern const cr_value cr_fn_trtrs;

/**
 * `trsyl(transa, transb, isgn, A, B, C)`: X with op(A) X + isgn X op(B) = C (LAPACK's
 * trsyl), isgn 1 or -1, A (m x m) and B (n x n) in Schur form: upper quasi-triangular
 * when real, upper triangular when complex (trans 'N' or 'C'; 'T' gives CR_EINVAL). A
 * real matrix's 2 x 2 diagonal blocks are found from the top: a nonzero subdiagonal entry
 * (i + 1, i) starts one unless row i already ends one; entries below the subdiagonal and
 * subdiagonal entries outside blocks are not read. The block structure is part of the
 * input: the derivative holds it fixed. Where LAPACK would scale the solution to avoid
 * overflow (scale < 1), or the equation is (nearly) singular, the result is CR_EDOMAIN:
 * this function returns only unscaled solutions. Pullback:
 * Y solves the adjoint equation op(A)ᴴ Y + isgn Y op(B)ᴴ = X̄; C̄ = Y,
 * Ā = op⁻¹(-Y Xᴴ), B̄ = op⁻¹(-isgn Xᴴ Y), restricted to the entries read (thunks).
 */
CR_API extern const cr_value cr_fn_trsyl;

/* ---- BLAS level 1-3 in functional form: scal, triangular products and solves, lacpy ---- */

/**
 * `scal(α, x)` = α x (BLAS scal; x any float array, α a number). Pullback: x̄ = conj(α) ȳ,
 * ᾱ = Σ conj(x) ȳ.
 */
CR_API extern const cr_value cr_fn_scal;

/**
 * `trmv(uplo, trans, diag, A, x)` = op(T) x for T the triangle uplo of the square A (unit
 * diagonal, not read, for diag 'U'). Pullback: x̄ = op(T)ᴴ ȳ, Ā = the triangle of
 * op⁻¹(ȳ xᴴ) (strict for a unit diagonal). Plain C: every build.
 */
CR_API extern const cr_value cr_fn_trmv;

/**
 * `trsv(uplo, trans, diag, A, x)` = op(T)⁻¹ x. CR_EDOMAIN for a zero on T's diagonal.
 * Pullback: x̄ = op(T)⁻ᴴ ȳ, Ā = the triangle of op⁻¹(-x̄ yᴴ).
 */
CR_API extern const cr_value cr_fn_trsv;

/**
 * `trmm(side, uplo, transa, diag, α, A, B)` = α op(T) B (side 'L') or α B op(T) ('R').
 * Pullback: with G = conj(α) Ȳ: B̄ = op(T)ᴴ G (or G op(T)ᴴ), op(T)̄ = G Bᴴ (or Bᴴ G) read
 * on the triangle, ᾱ = Σ conj(op(T) B) Ȳ.
 */
CR_API extern const cr_value cr_fn_trmm;

/**
 * `trsm(side, uplo, transa, diag, α, A, B)` = α op(T)⁻¹ B (side 'L') or α B op(T)⁻¹ ('R').
 * CR_EDOMAIN for a zero on T's diagonal. Pullback: W = op(T)⁻ᴴ G (or G op(T)⁻ᴴ) with
 * G = conj(α) Ȳ; B̄ = W, op(T)̄ = -W Zᴴ (or -Zᴴ W) on the triangle, Z = Y / α; ᾱ = Σ conj(Z) Ȳ.
 */
CR_API extern const cr_value cr_fn_trsm;

/**
 * `lacpy(B, A, uplo)`: B with A's triangle uplo ('U': i <= j, 'L': i >= j, any other code:
 * every entry) copied over it (LAPACK lacpy; A and B of one shape). Pullback: Ā = ȳ on the
 * copied entries, B̄ = ȳ on the others.
 */
CR_API extern const cr_value cr_fn_lacpy;

/**
 * `dotu(x, y)` = Σ x_i y_i, the unconjugated dot product of two float vectors of one length
 * (BLAS dotu; for real vectors the same as dot). Pullback: x̄ = ȳ conj(y), ȳ_y = ȳ conj(x).
 */
CR_API extern const cr_value cr_fn_dotu;

/**
 * `syrk(uplo, trans, α, A)` and `syrk(uplo, trans, α, A, β, C)`: C (zeros without β and C)
 * with its triangle uplo replaced by α op(A) op(A)ᵀ + β C (BLAS syrk, the out-of-place
 * `syrk!`), op(A) = A or Aᵀ for trans 'N' or 'T' ('C' means 'T' for real A). Pullback with
 * Gt the cotangent on the triangle and M = op(A): M̄ = conj(α) (Gt + Gtᵀ) conj(M), Ā = op(M̄),
 * ᾱ = <op(A) op(A)ᵀ, Gt>, β̄ = <C, Gt>, C̄ = conj(β) Gt on the triangle and ȳ off it.
 */
CR_API extern const cr_value cr_fn_syrk;

/**
 * `herk(uplo, trans, α, A)` and `herk(uplo, trans, α, A, β, C)`: as syrk with op(A) op(A)ᴴ,
 * trans 'N' or 'C' ('T' means 'C' for real A), α and β real; the triangle's diagonal is real
 * (BLAS herk sets its imaginary part to zero). Pullback: M̄ = α (Gt + Gtᴴ) M, Ā = op(M̄), ᾱ
 * and β̄ the real parts of syrk's, C̄ = β Gt on the triangle (the real part on the diagonal).
 */
CR_API extern const cr_value cr_fn_herk;

CR_END_DECLS

#endif /* CR_RULES_LINALG_H */
