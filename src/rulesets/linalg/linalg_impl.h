/*
 * Private helpers of the linear-algebra rule files (src/rulesets/linalg/): column-major work
 * matrices of f64 or c128 (the LAPACK layout) with their conversion from and to the
 * library's row-major arrays, small BLAS-like kernels on them, (co)tangents read as work
 * matrices, fields of tuple cotangents and the LAPACK error and no-LAPACKE helpers
 * (work_matrix.c); the square-matrix arguments, decompositions and test samples the LAPACK
 * rule files share (decompositions.c); the family's registrations.
 */
#ifndef CR_LINALG_IMPL_H
#define CR_LINALG_IMPL_H

#include <complex.h>

#include <chainrules/rules_sparse.h>

#include "../array_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>
#endif

/* ---- Column-major work matrices ---------------------------------------------------------- */

/* A column-major work matrix; p NULL stands for a zero (co)tangent where a helper says so. */
typedef struct cr__cmat {
    void *p; /* column-major, leading dimension r */
    size_t r, c;
    bool cplx; /* double complex elements, else double */
} cr__cmat;

/* A new r x c work matrix in the arena (zero-filled when zero is true). Its element and
 * byte counts are checked (CR_EOVERFLOW, "linalg work matrix: shape ... overflows"), so that
 * a product of a work matrix's own extents, or an index below them, never overflows; a rule
 * whose work matrix has a shape of extents of different arguments (pinv's n x n of an m x n
 * matrix) checks that shape itself first, under its own name. */
CR_INTERNAL cr_status cr__cmat_new(cr_arena *arena, bool cplx, size_t r, size_t c, bool zero,
                                   cr__cmat *m);

/* Element (i, j) of m. */
static inline cr_complex cr__cmat_get(const cr__cmat *m, size_t i, size_t j)
{
    return m->cplx ? ((const cr_complex *)m->p)[i + j * m->r]
                   : ((const double *)m->p)[i + j * m->r];
}

/* Element (i, j) of m := v (its real part when m is real). */
static inline void cr__cmat_set(cr__cmat *m, size_t i, size_t j, cr_complex v)
{
    if (m->cplx)
        ((cr_complex *)m->p)[i + j * m->r] = v;
    else
        ((double *)m->p)[i + j * m->r] = creal(v);
}

/* The logical value of a 0-d (1 x 1), 1-d (a column) or 2-d array as a new work matrix of
 * f64 (cplx false) or c128. */
CR_INTERNAL cr_status cr__cmat_from(cr_arena *arena, const cr_array *a, bool cplx, cr__cmat *m);

/* A new copy of s with complex (cplx) or real elements (the real parts of a complex s). */
CR_INTERNAL cr_status cr__cmat_copy_as(cr_arena *arena, const cr__cmat *s, bool cplx, cr__cmat *m);

/* A new copy of s. */
static inline cr_status cr__cmat_copy(cr_arena *arena, const cr__cmat *s, cr__cmat *m)
{
    return cr__cmat_copy_as(arena, s, s->cplx, m);
}

/* New op(s): 'N' a copy, 'T' the transpose, 'C' the adjoint. */
CR_INTERNAL cr_status cr__cmat_op(cr_arena *arena, char op, const cr__cmat *s, cr__cmat *m);

/* New sᴴ. */
static inline cr_status cr__cmat_adj(cr_arena *arena, const cr__cmat *s, cr__cmat *m)
{
    return cr__cmat_op(arena, 'C', s, m);
}

/* m := conj(m) in place (nothing for a real m). */
CR_INTERNAL void cr__cmat_conj(cr__cmat *m);

/* Keep the triangle of m: 'U' (on and above the diagonal) or 'L' (on and below); with
 * strict, the diagonal goes too. */
CR_INTERNAL void cr__cmat_tri(cr__cmat *m, char uplo, bool strict);

/* A new row-major work array (f64 or c128) of m, 1-d when vec. */
CR_INTERNAL cr_status cr__cmat_to_array(cr_arena *arena, const cr__cmat *m, bool vec,
                                        cr_array **out);

/* m as a new row-major array of dtype dt (the real part when dt is real), 1-d when vec. */
CR_INTERNAL cr_status cr__cmat_out(cr_arena *arena, const cr__cmat *m, bool vec, cr_dtype dt,
                                   cr_array **out);

/* The cotangent of an argument from the work matrix m, projected by p (cr__give). */
CR_INTERNAL cr_status cr__cmat_give(cr_arena *arena, const cr_project *p, const cr__cmat *m,
                                    bool vec, cr_tangent *out);

/* C = alpha op(A) op(B) + beta C; op is 'N', 'T' or 'C' (BLAS when the element types
 * agree, a plain loop otherwise). */
CR_INTERNAL void cr__cmat_gemm(char ta, char tb, cr_complex alpha, const cr__cmat *A,
                               const cr__cmat *B, cr_complex beta, cr__cmat *C);

/* New C = alpha op(A) op(B) (complex when A or B is). */
CR_INTERNAL cr_status cr__cmat_mul(cr_arena *arena, char ta, char tb, cr_complex alpha,
                                   const cr__cmat *A, const cr__cmat *B, cr__cmat *C);

/* ---- Tangents ---------------------------------------------------------------------------- */

/* A (co)tangent of a 1-d or 2-d array of `shape` as a work matrix (p NULL when zero). */
CR_INTERNAL cr_status cr__cmat_tan(cr_arena *arena, const char *who, cr_tangent t, size_t ndim,
                                   const size_t *shape, bool cplx, cr__cmat *m);

/* The only argument, an array (cr__nargs for one argument, then cr__array_arg). */
CR_INTERNAL cr_status cr__array_arg1(cr_arena *arena, const char *who, const cr_value *args,
                                     size_t nargs, const cr_array **A);

/* The tangent of array argument i of an frule (dargs[i + 1]) as a work matrix (p NULL when
 * zero or when args[i] is not a perturbable array). */
CR_INTERNAL cr_status cr__cmat_dx(cr_arena *arena, const char *who, const cr_tangent *dargs,
                                  const cr_value *args, size_t i, bool cplx, cr__cmat *m);

/* The tangent of an output array o from the work matrix m (a column when vec), projected onto
 * o. */
CR_INTERNAL cr_status cr__tangent_like(cr_arena *arena, cr_array *o, const cr__cmat *m, bool vec,
                                       cr_tangent *out);

/* The end of an rrule whose env keeps the arguments' projectors in *p: *y = the array o; then,
 * unless udata is CR__PRIMAL_ONLY, the projectors into *p and *pb = pbv. */
CR_INTERNAL cr_status cr__rrule_tail(cr_arena *arena, const cr_value *args, size_t nargs,
                                     const void *udata, cr_project ***p, cr_array *o, cr_value *y,
                                     cr_pullback *pb, cr_pullback pbv);

/* The end of an rrule whose output is computed and whose env keeps the projector of one
 * argument, arg, in *p: unless udata is CR__PRIMAL_ONLY, that projector and *pb = pbv. */
CR_INTERNAL cr_status cr__rrule_tail1(cr_arena *arena, const cr_value *arg, const void *udata,
                                      cr_project **p, cr_pullback *pb, cr_pullback pbv);

/* The end of a two-argument rrule whose env keeps the projectors of args[0] and args[1] in
 * *p0 and *p1: *y = the array o; then, unless udata is CR__PRIMAL_ONLY, the projectors and
 * *pb = pbv. */
CR_INTERNAL cr_status cr__rrule_tail2(cr_arena *arena, const cr_value *args, const void *udata,
                                      cr_project **p0, cr_project **p1, cr_array *o, cr_value *y,
                                      cr_pullback *pb, cr_pullback pbv);

/* The start of a two-argument frule after its forward pass: *y = the array o, *t0 and *t1 the
 * tangents of args[0] and args[1] as arrays of dtype wdt (NULL when zero, cr__dx_array);
 * *none when both are zero, and then *dy = ZeroTangent. */
CR_INTERNAL cr_status cr__frule_pair(cr_arena *arena, const char *who, const cr_tangent *dargs,
                                     const cr_value *args, cr_dtype wdt, cr_array *o, cr_value *y,
                                     const cr_array **t0, const cr_array **t1, cr_tangent *dy,
                                     bool *none);

/* The same for work matrices: *t0 and *t1 the tangents of args[i0] and args[i1]
 * (cr__cmat_dx; p NULL when zero). */
CR_INTERNAL cr_status cr__frule_pair_cmat(cr_arena *arena, const char *who, const cr_tangent *dargs,
                                          const cr_value *args, size_t i0, size_t i1, bool cplx,
                                          cr_array *o, cr_value *y, cr__cmat *t0, cr__cmat *t1,
                                          cr_tangent *dy, bool *none);

/* Field i of a tuple cotangent (zeros give ZeroTangent; CR_ETANGENT naming `who` when dy is
 * not structural). */
CR_INTERNAL cr_status cr__tuple_field(cr_arena *arena, const char *who, cr_tangent dy, size_t i,
                                      cr_tangent *out);

/* ---- eigen_general's gaps ------------------------------------------------------------------ */

/* 1/(λ_j - λ_i), 0 where the two are equal to working precision relative to scale (a repeated
 * eigenvalue: its eigenvectors have no derivative; the terms that would be infinite are
 * dropped). eigen_general's rules and its second-order form (src/rulesets/linalg/spectral.c)
 * take their gaps from here. */
static inline cr_complex cr__inv_gap_c(cr_complex lj, cr_complex li, double scale)
{
    cr_complex d = lj - li;
    return cabs(d) <= 64 * DBL_EPSILON * scale ? 0.0 : 1.0 / d;
}

/* max |w_i|, the scale of cr__inv_gap_c for a spectrum w of n complex values. */
static inline double cr__spectrum_scale_c(const cr_complex *w, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s = fmax(s, cabs(w[i]));
    return s;
}

/* ---- LAPACK ------------------------------------------------------------------------------ */

/* Whether a size fits LAPACK's (32-bit) int. */
static inline bool cr__lapack_size_ok(size_t n)
{
    return n <= (size_t)INT32_MAX;
}

/* ---- The family's registrations ------------------------------------------------------------ */

/* One signature of a linear-algebra rule: fn for args[0..n), its frule and rrule, its test
 * registration and its second-order form (or NULL); nonlinear. */
typedef struct cr__linalg_rule {
    const cr_function *fn;
    const cr_argspec *args;
    size_t n;
    cr_frule_fn frule;
    cr_rrule_fn rrule;
    const cr_rule_test *test;
    const cr_rule_form *form;
} cr__linalg_rule;

/* Three float-array argument specs: args of a rule of one, two or three array arguments. */
CR_INTERNAL extern const cr_argspec cr__linalg_fa[3];

/* Register the rows k[0..n) in order (cr__add_rule_so, CR_NONLINEAR, never variadic). */
CR_INTERNAL cr_status cr__linalg_add_rules(cr_registry *reg, const cr__linalg_rule *k, size_t n);

/* Besides cr__linalg_register_blas (products.c), _lapack (solve.c), _fact
 * (factorizations.c) and _level (lapack_calls.c), declared in array_impl.h; cr__family_linalg
 * (products.c) calls them in a fixed order, the order of docs/rules-index.md. */
CR_INTERNAL cr_status cr__linalg_register_cholesky(cr_registry *reg);   /* cholesky.c */
CR_INTERNAL cr_status cr__linalg_register_spectral(cr_registry *reg);   /* spectral.c */
CR_INTERNAL cr_status cr__linalg_register_expm(cr_registry *reg);       /* expm.c */
CR_INTERNAL cr_status cr__linalg_register_blas_calls(cr_registry *reg); /* blas_calls.c */
CR_INTERNAL cr_status cr__linalg_register_blas_rank(cr_registry *reg);  /* blas_rank.c */

/* ---- Arguments of the functional BLAS and LAPACK calls (blas_calls.c) ----------------------- */

/* Argument i, a flag: an integer character code among `allowed` (lower case accepted). */
CR_INTERNAL cr_status cr__flag_arg(cr_arena *arena, const char *who, const cr_value *args, size_t i,
                                   const char *allowed, char *out);

/* Argument i, a float matrix (square when `square`) of extents within LAPACK's int. */
CR_INTERNAL cr_status cr__matrix32_arg(cr_arena *arena, const char *who, const cr_value *args,
                                       size_t nargs, size_t i, bool square, const cr_array **A);

/* Argument i, a right-hand side: a float vector or matrix with n rows. */
CR_INTERNAL cr_status cr__rhs_arg(cr_arena *arena, const char *who, const cr_value *args,
                                  size_t nargs, size_t i, size_t n, const cr_array **B);

/* NoTangent for every cotangent, then ZeroTangent for the perturbable arguments. */
CR_INTERNAL void cr__zero_cotangents(const bool *diff, cr_tangent *dx, size_t nx);

/* A random flag among the characters of flags, as an i64 (the rule tests' samples). */
CR_INTERNAL cr_value cr__rand_flag(uint64_t *rng, const char *flags);

#if defined(CR_HAVE_LAPACKE)

/* ---- Shared by the LAPACK rule files (decompositions.c) ------------------------------------ */

/* Argument i, a square float matrix of at most INT32_MAX rows (CR_ESHAPE naming who
 * otherwise); *cplx (unless NULL): whether it is complex (its work dtype c128, else f64). */
CR_INTERNAL cr_status cr__square_arg(cr_arena *arena, const char *who, const cr_value *args,
                                     size_t nargs, size_t i, const cr_array **A, bool *cplx);

/* The Hermitian matrix whose upper triangle is that of A (the diagonal's real part), as
 * LAPACK's syev/heev/potrf read it. */
CR_INTERNAL cr_status cr__herm_upper(cr_arena *arena, const cr_array *A, bool cplx, cr__cmat *m);

/* The cotangent of A for a function of cr__herm_upper(A), given the Hermitian gradient S with
 * respect to that matrix (S is folded in place onto the upper triangle for a dense A). */
CR_INTERNAL cr_status cr__herm_give(cr_arena *arena, const cr_array *A, cr_project *p, cr__cmat *S,
                                    cr_tangent *out);

/* CR_EDOMAIN: "who: the matrix is singular". */
CR_INTERNAL cr_status cr__singular(cr_arena *arena, const char *who);

/* A thin SVD A = U diag(s) Vt of an m x n work matrix, k = min(m, n). */
typedef struct cr__svd {
    cr__cmat U;  /* m x k */
    double *s;   /* k, descending */
    cr__cmat Vt; /* k x n */
    size_t m, n, k;
} cr__svd;

/* The thin SVD of A0 (gesdd; CR_EDOMAIN for a non-finite element, CR_EBACKEND when LAPACK
 * fails), its factors in the arena. */
CR_INTERNAL cr_status cr__svd_of(cr_arena *arena, const char *who, const cr__cmat *A0,
                                 cr__svd *out);

/* The eigendecomposition of the Hermitian work matrix H in place (syevd/heevd): H's columns
 * become the eigenvectors, *w the n ascending eigenvalues (in the arena). */
CR_INTERNAL cr_status cr__eigh(cr_arena *arena, const char *who, cr__cmat *H, double **w);

/* The square matrices the rule tests sample (cr__rand_square). */
typedef enum {
    CR__SQ_GENERAL, /* diagonally dominant (well conditioned), det > 0; structures */
    CR__SQ_SPD,     /* Hermitian positive definite; tagged or dense with junk below */
    CR__SQ_HERM,    /* Hermitian with separated eigenvalues */
    CR__SQ_REALSYM, /* real symmetric (eigen: vectors of complex Hermitian have a phase gauge) */
    CR__SQ_RECT     /* rectangular (svd; complex ones have a fixed gauge) */
} cr__sq_kind;

/* A random matrix of the kind, of 2 to 4 rows, of a random float dtype. */
CR_INTERNAL cr_status cr__rand_square(cr_arena *arena, uint64_t *rng, cr__sq_kind kind,
                                      cr_array **out);

/* A cr_rule_test sampler: args[0] a cr__rand_square of the kind in env (a cr__sq_kind), and
 * for two arguments a right-hand side of solve (a vector or an n x 2 matrix). */
CR_INTERNAL cr_status cr__sample_sq(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                                    void *env);

/* X := op(T)⁻¹ X for a triangular T (uplo 'U' or 'L', op 'N' or 'C', unit diagonal when diag
 * is 'U'; trtrs). T's diagonal must have no zero (checked by the callers). */
CR_INTERNAL cr_status cr__tri_left(cr_arena *arena, const char *who, const cr__cmat *T, char uplo,
                                   char op, char diag, cr__cmat *X);

/* X := X op(T)⁻¹ (as cr__tri_left, through adjoints). */
CR_INTERNAL cr_status cr__tri_right(cr_arena *arena, const char *who, const cr__cmat *T, char uplo,
                                    char op, char diag, cr__cmat *X);

/* A new copy of rows [r0, r0 + r) and columns [c0, c0 + c) of M. */
CR_INTERNAL cr_status cr__cmat_block(cr_arena *arena, const cr__cmat *M, size_t r0, size_t r,
                                     size_t c0, size_t c, cr__cmat *out);

/* The LU factorization P A = L U of an m x n A (k = min(m, n)): L m x k unit lower
 * trapezoidal, U k x n upper trapezoidal, their leading k x k blocks nonsingular. The
 * cotangent G of P A (m x n) from L̄ and Ū (p NULL for zero; only L̄'s strictly lower part
 * and Ū's upper part are read): the square rule Pᵀ L⁻ᴴ (tril₋(Lᴴ L̄) + triu(Ū Uᴴ)) U⁻ᴴ on the
 * leading block, with a wide A's U₂ = L⁻¹ (P A)₂ and a tall A's L₂ = (P A)₂ U⁻¹ folded in
 * (ChainRules' lu rule for rectangular matrices). */
CR_INTERNAL cr_status cr__lu_pullback(cr_arena *arena, const char *who, const cr__cmat *L,
                                      const cr__cmat *U, const cr__cmat *Lb, const cr__cmat *Ub,
                                      cr__cmat *G);

/* The tangents L̇ (m x k) and U̇ (k x n) of the same factorization along P Ȧ: X = L₁⁻¹ (P Ȧ)₁
 * U₁⁻¹, L̇₁ = L₁ tril₋(X), U̇₁ = triu(X) U₁; U̇₂ = L⁻¹ ((P Ȧ)₂ - L̇ U₂) (wide),
 * L̇₂ = ((P Ȧ)₂ - L₂ U̇) U⁻¹ (tall). */
CR_INTERNAL cr_status cr__lu_tangent(cr_arena *arena, const char *who, const cr__cmat *L,
                                     const cr__cmat *U, const cr__cmat *PdA, cr__cmat *dL,
                                     cr__cmat *dU);

/* CR_EBACKEND for a LAPACK info != 0, naming `who`. */
CR_INTERNAL cr_status cr__lapack_fail(cr_arena *arena, const char *who, lapack_int info);

/* CR_EDOMAIN (message naming who and the element) when the work matrix A has a NaN or
 * infinite element: the iterative LAPACK routines (SVD, eigendecompositions, Schur forms)
 * are not defined there (they may report an illegal argument, print, or leave outputs
 * unset), so their rules refuse such a matrix before calling them. */
CR_INTERNAL cr_status cr__lapack_finite(cr_arena *arena, const char *who, const cr__cmat *A);

#else /* !CR_HAVE_LAPACKE */

/* The primal of a function that needs LAPACKE in a build without it: CR_EUNIMPL. */
CR_INTERNAL cr_status cr__no_lapack(cr_arena *arena, const cr_value *f, const cr_value *args,
                                    size_t nargs, cr_value *out);

/* The function value cr_fn_NAME (named STR) of a build without LAPACKE. */
#define CR__NO_LAPACK_FN(NAME, STR)                           \
    static const cr_function NAME##_function = {              \
        .name = (STR), .arity = -1, .primal = cr__no_lapack}; \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

#endif /* CR_HAVE_LAPACKE */

/* ---- Rule tables --------------------------------------------------------------------------- */

/* The argument spec {M, NULL} of the matcher M, in the signature tables of the registrations. */
#define CR__SPEC(M) \
    {               \
        (M), NULL   \
    }

/* A row of a cr__array_rule table (array/family.h): NAME's function, frule and rrule for the
 * signature ARGS[0..N), the test registration TEST, the cr_linearity class LIN, no form. */
#define CR__LA_ROW(NAME, ARGS, N, TEST, LIN)                                                  \
    {                                                                                         \
        &NAME##_function, (ARGS), (N), NAME##_frule, NAME##_rrule, (TEST), (LIN), NULL, false \
    }

/* The same for a linear function whose frule applies it to the tangent (cr__linear_frule). */
#define CR__LA_LINEAR_ROW(NAME, ARGS, N, TEST)                                                  \
    {                                                                                           \
        &NAME##_function, (ARGS), (N), cr__linear_frule, NAME##_rrule, (TEST), CR_LINEAR, NULL, \
            false                                                                               \
    }

/* ---- Contiguous work arrays ---------------------------------------------------------------- */

/* Element i of a contiguous work array (f64 or c128). */
static inline cr_complex cr__wget(const cr_array *w, size_t i)
{
    return w->dtype == CR_DT_C128 ? ((const cr_complex *)w->data)[i] : ((const double *)w->data)[i];
}

/* Element i of a contiguous work array := v (its real part for f64). */
static inline void cr__wset(cr_array *w, size_t i, cr_complex v)
{
    if (w->dtype == CR_DT_C128)
        ((cr_complex *)w->data)[i] = v;
    else
        ((double *)w->data)[i] = creal(v);
}

/* ---- Test samplers ------------------------------------------------------------------------- */

/* Each element of the array A negated with probability 1/2 (a sampler's random signs). */
static inline void cr__flip_signs(uint64_t *rng, cr_array *A)
{
    size_t n = cr_array_numel(A);
    for (size_t i = 0; i < n; i++)
        if (cr__rng_below(rng, 2))
            cr__store(A, (ptrdiff_t)i, -cr__load(A, (ptrdiff_t)i));
}

/* A sampler's end: args[0..n) = the arrays a[0..n) when st is CR_OK; st. */
static inline cr_status cr__sampled(cr_status st, cr_value *args, size_t n, cr_array *const *a)
{
    for (size_t i = 0; st == CR_OK && i < n; i++)
        args[i] = cr_value_array(a[i]);
    return st;
}

/* ---- Thunks of pullbacks ------------------------------------------------------------------- */

/* The environment of a thunk a pullback makes: the pullback's environment e and the output
 * cotangent, a work matrix g or a number s. */
typedef struct cr__pb_thunk {
    const void *e;
    cr__cmat g;
    cr_complex s;
} cr__pb_thunk;

/* *out = the thunk (fn, add) named name of a new cr__pb_thunk {e, *g (zeros when g is NULL),
 * s}. */
static inline cr_status cr__pb_thunk_new(cr_arena *arena, cr_thunk_fn fn, cr_thunk_add_fn add,
                                         const void *e, const cr__cmat *g, cr_complex s,
                                         const char *name, cr_tangent *out)
{
    CR__ARENA_NEW(arena, cr__pb_thunk, t);
    *t = (cr__pb_thunk){e, g != NULL ? *g : (cr__cmat){0}, s};
    return cr__thunk(arena, fn, add, t, name, out);
}

/* ---- Arguments (blas_calls.c) -------------------------------------------------------------- */

/* Exactly n arguments (cr__nargs), the first a float matrix of extents within LAPACK's int (square
 * when `square`, cr__matrix32_arg). */
CR_INTERNAL cr_status cr__nargs_matrix32(cr_arena *arena, const char *who, const cr_value *args,
                                         size_t nargs, size_t n, bool square, const cr_array **A);
/* ---- Tuple results and cotangents (tuples.c) -------------------------------------------- */

/* The tuples of two and three arrays that factorizations return, and their types. */
typedef struct cr__tup2 {
    cr_array a, b;
} cr__tup2;
typedef struct cr__tup3 {
    cr_array a, b, c;
} cr__tup3;
CR_INTERNAL extern const cr_type cr__k_tup2;
CR_INTERNAL extern const cr_type cr__k_tup3;

/* *y = the tuple (a[0], ..., a[n - 1]) of n = 2 or 3 arrays (copied into the arena; any n
 * other than 2 is taken as 3). */
CR_INTERNAL cr_status cr__tuple_value(cr_arena *arena, size_t n, const cr_array *const *a,
                                      cr_value *y);

/* How a field of a tuple cotangent is read as a work matrix (cr__cmat_tan). */
typedef struct cr__field_spec {
    size_t ndim;
    size_t shape[2];
    bool cplx;
} cr__field_spec;

/* `only` for a cotangent that is a tuple (cr__tuple_cmats). */
#define CR__TUPLE SIZE_MAX

/* Fields 0..n-1 of the cotangent dy as work matrices out[i] of spec[i] (p NULL for a zero
 * one): dy is a tuple when only is CR__TUPLE, else the cotangent of field `only` alone (the
 * others zero, as for eigvals against eigen). *zero: all of them are zero. */
CR_INTERNAL cr_status cr__tuple_cmats(cr_arena *arena, const char *who, cr_tangent dy, size_t n,
                                      size_t only, const cr__field_spec *spec, cr__cmat *out,
                                      bool *zero);

/* ---- Rule environments ------------------------------------------------------------------- */

/* Declares TYPE *E, a new zeroed TYPE in the arena; the enclosing rule returns the arena's
 * status when it is out of memory. */
#define CR__LA_ENV(ARENA, TYPE, E)                                       \
    TYPE *E = cr_arena_calloc((ARENA), 1, sizeof(TYPE), _Alignof(TYPE)); \
    if (E == NULL)                                                       \
    return CR__ALLOC_STATUS(ARENA)

/* ---- Lazy cotangents (work_matrix.c) ----------------------------------------------------- */

/* A lazy cotangent's environment: the rule's environment e and the work matrix g the
 * pullback computed (solve's B̄, ...). */
typedef struct cr__la_thunk {
    const void *e;
    cr__cmat g;
} cr__la_thunk;

/* *out = a thunk of fn on a new cr__la_thunk {e, *g} (cr__thunk, named name). */
CR_INTERNAL cr_status cr__la_thunk_new(cr_arena *arena, cr_thunk_fn fn, const void *e,
                                       const cr__cmat *g, const char *name, cr_tangent *out);

/* *out = the cotangent -op(X) op(Y) (ops as cr__cmat_mul), projected by p (cr__cmat_give). */
CR_INTERNAL cr_status cr__give_neg_product(cr_arena *arena, char tx, const cr__cmat *X, char ty,
                                           const cr__cmat *Y, const cr_project *p, cr_tangent *out);

/* ---- One-matrix rules (work_matrix.c) ---------------------------------------------------- */

/* The start of the pullback of a function of one matrix: dx[0] = NoTangent, *G = the r x c
 * cotangent dy as a work matrix; for a zero one G->p = NULL and dx[1] = ZeroTangent. */
CR_INTERNAL cr_status cr__pull_matrix(cr_arena *arena, const char *who, const cr_tangent *dy,
                                      size_t r, size_t c, bool cplx, cr_tangent *dx, cr__cmat *G);

/* The end of the rrule of a function of args[0] whose result is the work matrix Y: *y = Y
 * as an array of dtype dt, then cr__rrule_tail1. */
CR_INTERNAL cr_status cr__rrule_out1(cr_arena *arena, const cr__cmat *Y, cr_dtype dt,
                                     const cr_value *args, const void *udata, cr_project **p,
                                     cr_value *y, cr_pullback *pb, cr_pullback pbv);

/* The start of the frule of a function of args[0] after its forward pass: *y = Y as an array
 * of dtype dt, *dA = the tangent of args[0] (cr__cmat_dx, Y's element type); for a zero one
 * dA->p = NULL and *dy = ZeroTangent. */
CR_INTERNAL cr_status cr__frule_out1(cr_arena *arena, const char *who, const cr__cmat *Y,
                                     cr_dtype dt, const cr_tangent *dargs, const cr_value *args,
                                     cr_value *y, cr__cmat *dA, cr_tangent *dy);

/* *dy = the tangent of the output y from the work matrix m (cr_project_tangent). */
CR_INTERNAL cr_status cr__cmat_project(cr_arena *arena, const cr_value *y, const cr__cmat *m,
                                       cr_tangent *dy);

/* *dA = the tangent of args[0] of an frule (cr__cmat_dx); for a zero one dA->p = NULL and
 * *dy = ZeroTangent. */
CR_INTERNAL cr_status cr__frule_dx0(cr_arena *arena, const char *who, const cr_tangent *dargs,
                                    const cr_value *args, bool cplx, cr__cmat *dA, cr_tangent *dy);

#if defined(CR_HAVE_LAPACKE)
/* The only argument, a square float matrix (cr__nargs for one argument, then cr__square_arg
 * of argument 0, which sets *cplx). */
CR_INTERNAL cr_status cr__square_arg1(cr_arena *arena, const char *who, const cr_value *args,
                                      size_t nargs, const cr_array **A, bool *cplx);
#endif

/* ---- Second-order forms ------------------------------------------------------------------ */

/* Defines the static form check NAME (cr_rule_form.check): the leading array argument and
 * the first NVAR arguments variable at most (cr__form_check_leading), then MORE, an
 * expression of args and nargs: why the form does not cover the call, or NULL. */
#define CR__LA_FORM_CHECK(NAME, NVAR, MORE)                                      \
    static const char *NAME(const cr_value *args, size_t nargs, const bool *var, \
                            uint32_t *linearity)                                 \
    {                                                                            \
        (void)linearity;                                                         \
        const char *why = cr__form_check_leading(args, nargs, var, (NVAR));      \
        return why != NULL ? why : (MORE);                                       \
    }

/* ---- Rules of a fixed arity -------------------------------------------------------------- */

/* The rrule and frule of NAME and its function value cr_fn_NAME (CR__PARAM_RULES, the
 * parameter the function's name): NAME_rrule1(arena, who, args, nargs, y, pb, udata) and
 * NAME_frule1(arena, who, dargs, args, nargs, y, dy). */
#define CR__LA_RULES(NAME, ARITY) CR__PARAM_RULES(NAME, NAME##_rrule1, NAME##_frule1, #NAME, ARITY)

/* Defines NAME_rrule1 (for CR__LA_RULES) of a function of args[0] whose environment ENV
 * keeps args[0]'s projector in pA: PRIMAL(arena, args, nargs, e, y) computes the result into
 * the new environment e, then the pullback PULLBACK on e (cr__rrule_tail1). */
#define CR__LA_RRULE1(NAME, ENV, PRIMAL, PULLBACK)                                                \
    static cr_status NAME##_rrule1(cr_arena *arena, const char *who, const cr_value *args,        \
                                   size_t nargs, cr_value *y, cr_pullback *pb, const void *udata) \
    {                                                                                             \
        (void)who;                                                                                \
        CR__LA_ENV(arena, ENV, e);                                                                \
        cr_status st = PRIMAL(arena, args, nargs, e, y);                                          \
        return st != CR_OK ? st                                                                   \
                           : cr__rrule_tail1(arena, &args[0], udata, &e->pA, pb,                  \
                                             (cr_pullback){PULLBACK, e, #PULLBACK, nargs + 1});   \
    }

/* ---- Pullbacks ---------------------------------------------------------------------------- */

/* The start of a pullback: dx[0] = NoTangent (the function's cotangent), or every one of the
 * nx cotangents when all; returns the pullback's environment env. */
static inline void *cr__pb_start(cr_tangent *dx, size_t nx, bool all, void *env)
{
    for (size_t i = 0; i < (all ? nx : 1); i++)
        dx[i] = cr_tangent_none();
    return env;
}

/* Declares cr_status st and TYPE *Z, the state of a second-order form's init (cr__form_state
 * of P with argument XJ into *STATE); the init returns st when it fails. */
#define CR__LA_FORM_STATE(P, STATE, TYPE, XJ, Z)                           \
    cr_status st = cr__form_state((P), sizeof(TYPE), (XJ), NULL, (STATE)); \
    if (st != CR_OK)                                                       \
        return st;                                                         \
    TYPE *Z = *(STATE)

#if !defined(CR_HAVE_LAPACKE)
/* cr__linalg_register_FAMILY of a LAPACK rule file in a build without LAPACKE: it registers
 * nothing (the function values exist and report CR_EUNIMPL, CR__NO_LAPACK_FN). */
#define CR__NO_LAPACK_REGISTER(FAMILY)                       \
    cr_status cr__linalg_register_##FAMILY(cr_registry *reg) \
    {                                                        \
        (void)reg;                                           \
        return CR_OK;                                        \
    }
#endif

/* ---- Sparse matrices (sparse.c) ---------------------------------------------------------- */

/* The validated pattern of a cr_sparse argument: its sizes and its index arrays (contiguous
 * copies in the arena; colptr from 0 to nnz, non-decreasing; each column's row indices in
 * 0..m-1, strictly increasing). */
typedef struct cr__sparse_pat {
    const cr_sparse *S;
    size_t m, n, nnz;
    int64_t *colptr, *rowval;
} cr__sparse_pat;

/* *s = the pattern of the sparse matrix v, whose nzval must be a 1-d float array of nnz
 * values. CR_EINVAL (on the arena, messages naming who) for anything else. */
CR_INTERNAL cr_status cr__sparse_pattern(cr_arena *arena, const char *who, const cr_value *v,
                                         cr__sparse_pat *s);

/* A trans flag of the sparse products: the integer v, 'N', 'T' or 'C' (lower case accepted),
 * into *trans; CR_EINVAL otherwise. */
CR_INTERNAL cr_status cr__sparse_trans(cr_arena *arena, const char *who, const cr_value *v,
                                       char *trans);

#endif /* CR_LINALG_IMPL_H */
