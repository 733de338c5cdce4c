/*
 * Shared parts of the built-in second-order forms (cr_rule_form, docs/second-order-forms.md):
 * an array argument as the forms read it (dense f64, its slices for a reduction over dims),
 * the cotangent and tangents in that layout, calls of other rules a form needs for a first
 * derivative, and the forms each ruleset family registers with its rules.
 *
 * A form's init builds its state (a struct that starts with a cr__form) in the point's arena;
 * its dir, called once per direction by the engine, writes S into the argument slots.
 */
#ifndef CR_FORMS_IMPL_H
#define CR_FORMS_IMPL_H

#include "array_impl.h"

#define CR__FORM_MAX_ARGS 16 /* as the tape's array records */

/* What cr__form_frule_dir hands a form's step along one direction. */
typedef struct cr__form_along {
    const double *xd;  /* ẋ, never zero */
    const cr_value *y; /* the factorization's value at x (NULL without one) */
    cr_tangent dy;     /* its tangent along ẋ (ZeroTangent without one) */
    const double *yd;  /* with F.ydot, the result's tangent ẏ (NULL when zero or without) */
} cr__form_along;

/* The per-direction step of a form whose dir is cr__form_frule_dir: S (zeros, of x's shape)
 * from the form's state and the direction d. */
typedef cr_status (*cr__form_step)(const void *state, const cr__form_along *d, double *s);

/* A call's array argument xj as the forms read it. */
typedef struct cr__form {
    const cr_form_point *p;
    cr_arena *arena;
    const char *who;   /* the function's name */
    size_t xj;         /* the array argument's position */
    const cr_array *x; /* its value, f64, contiguous row-major */
    size_t N;          /* its elements */
    size_t ns;         /* slices (1 without dims) */
    size_t *sl;        /* the slice of each element; NULL when ns == 1 */
    /* For cr__form_frule_dir (NULL otherwise): the factorization whose frule gives the first
     * derivatives along a direction (NULL: none), and the form's step. */
    const cr_value *fact;
    cr__form_step step;
    bool ydot; /* the step reads the result's tangent ẏ (of an array result) */
} cr__form;

/* Set up F for argument xj of the call at p; dims (or NULL) are the reduced dimensions. */
CR_INTERNAL cr_status cr__form_init(cr__form *F, const cr_form_point *p, size_t xj,
                                    const cr_value *dims);

/* Allocate a form's state of `size` bytes (its first member a cr__form) and set it up as
 * cr__form_init does; *out is NULL on failure. */
CR_INTERNAL cr_status cr__form_state(const cr_form_point *p, size_t size, size_t xj,
                                     const cr_value *dims, void **out);

/* The slice of element e. */
static inline size_t cr__form_slice(const cr__form *F, size_t e)
{
    return F->sl == NULL ? 0 : F->sl[e];
}

/* Argument j of the call, or NULL past the end (an optional dims or p). */
static inline const cr_value *cr__form_opt(const cr_form_point *p, size_t j)
{
    return p->nargs > j ? &p->args[j] : NULL;
}

/* The cotangent ȳ of a reduction's result (ns values, in slice order). */
CR_INTERNAL cr_status cr__form_ybar_slices(const cr__form *F, const double **yb);

/* A tangent or cotangent of x's shape, in f64 (NULL for a zero one). */
CR_INTERNAL cr_status cr__form_like_x(const cr__form *F, cr_tangent v, const double **out);

/* The same, never NULL: a zero one is an array of zeros. */
CR_INTERNAL cr_status cr__form_like_x0(const cr__form *F, cr_tangent v, const double **out);

/* The tangent ẏ of a scalar result as a number. */
CR_INTERNAL double cr__form_scalar(cr_tangent v);

/* The result's tangent ydot, as f64 of the array result's shape; NULL when zero. */
CR_INTERNAL cr_status cr__form_y_dot_arr(const cr__form *F, cr_tangent ydot, const double **yd);

/* The result as a dense f64 array (an array result). */
CR_INTERNAL cr_status cr__form_y_array(const cr__form *F, const double **y);

/* A new f64 array of x's shape (zeros). */
CR_INTERNAL cr_status cr__form_new_s(const cr__form *F, cr_array **S);

/* The recorded pullback applied to ȳ: x's cotangent G = pullback(ȳ)_x, in f64. */
CR_INTERNAL cr_status cr__form_pulled(const cr__form *F, const double **G);

/* The frule of fn (a function of the call's one array argument) at x along raw, which a form
 * needs for a first derivative; a failure names both ("f: the second-order form needs g's
 * frule: ..."). */
CR_INTERNAL cr_status cr__form_frule_along(const cr__form *F, const cr_value *fn, cr_tangent raw,
                                           cr_value *y, cr_tangent *dy);

/* The start of a dir that reads the tangent xdot of F's argument and the result's tangent
 * ydot: both as f64 in *xd and *yd (NULL when zero) and *S a new zero S of x's shape, or
 * NULL when both are zero (S = 0). */
CR_INTERNAL cr_status cr__form_dir_xy(const cr__form *F, cr_tangent xdot, cr_tangent ydot,
                                      const double **xd, const double **yd, cr_array **S);

/* The dir of a form whose state starts with F (its fact and step set): nothing along a zero
 * ẋ of argument F.xj; else fact's frule at x along ẋ (cr__form_frule_along), with F.ydot the
 * result's tangent ydot, and F.step, which writes S[F.xj]. */
CR_INTERNAL cr_status cr__form_frule_dir(const cr_form_point *p, void *state,
                                         const cr_tangent *xdot, cr_tangent ydot, cr_tangent *S);

/* A form's failure: the message "who: ..." on the arena's context (kept by the engine). */
CR_INTERNAL cr_status cr__form_fail(const cr__form *F, cr_status st, const char *fmt, ...);

/* A check that accepts a call whose first argument is an array and whose arguments from
 * nvar on are constants (dims, p); the reasons to refuse otherwise. */
CR_INTERNAL const char *cr__form_check_leading(const cr_value *args, size_t nargs, const bool *var,
                                               size_t nvar);

/* ---- Matrix helpers of the linear-algebra forms ---------------------------------------------
 */

/* A form's check for a call whose one variable argument is its first, a matrix (det,
 * logdet, svd, ...): cr__form_check_leading with nvar 1. */
CR_INTERNAL const char *cr__form_check_matrix(const cr_value *args, size_t nargs, const bool *var,
                                              uint32_t *linearity);

/* One term c x r x s of a workspace size (cr__form_work). */
typedef struct cr__form_term {
    size_t c, r, s;
} cr__form_term;

/* A new zeroed workspace of Σ c·r·s doubles over the nterms terms (at least one double), each
 * product and the sum checked: CR_EOVERFLOW naming the form's function when one overflows.
 * Offsets into the workspace that add up its terms then stay below its size. */
CR_INTERNAL cr_status cr__form_work(const cr__form *F, size_t nterms, const cr__form_term *terms,
                                    double **out);

/* C = alpha op(A) op(B) + beta C for dense row-major f64 matrices (A ar x ac, B br x bc as
 * stored; ta, tb: transposed). */
CR_INTERNAL void cr__form_mm(double alpha, const double *A, size_t ar, size_t ac, int ta,
                             const double *B, size_t br, size_t bc, int tb, double beta, double *C);

/* The rule's pullback with argument j's cotangent unprojected, for a form that needs it (a
 * rule projects the cotangent of a structured matrix onto its structure): the recorded
 * pullback for a dense argument j, else the rule's pullback at the call's arguments with
 * argument j replaced by its logical dense matrix, as the rule reads it. */
CR_INTERNAL cr_status cr__form_pullback_dense(const cr__form *F, size_t j, cr_pullback *pb);

/* Element e of a tuple value (a float array of ndim dimensions), as a dense f64 array. */
CR_INTERNAL cr_status cr__form_factor_of(const cr__form *F, const cr_value *y, size_t e,
                                         size_t ndim, const cr_array **out);

/* Element e (a matrix of shape r x c) of a tuple tangent, dense f64 (NULL when zero). */
CR_INTERNAL cr_status cr__form_field_mat(const cr__form *F, cr_tangent t, size_t e, size_t r,
                                         size_t c, const double **out);

/* The cotangent of a dense square matrix of which a rule reads the upper triangle (n x n,
 * row-major), in place: s_ij + s_ji above the diagonal, 0 below, as the rule folds its own. */
CR_INTERNAL void cr__form_fold_upper(double *s, size_t n);

/* X <- X T⁻ᵀ for X (r x n) and T (n x n, upper triangular, nonzero diagonal): the rows z of
 * the result solve T z = x, back substitution from the last element. */
CR_INTERNAL void cr__form_right_solve_upper_t(const double *T, size_t n, double *X, size_t r);

/* ---- The forms of the families ---------------------------------------------------------------
 */

/* Reductions (array_reduce_forms.c). */
CR_INTERNAL extern const cr_rule_form cr__form_logsumexp, cr__form_logsoftmax, cr__form_softmax,
    cr__form_prod, cr__form_norm, cr__form_var, cr__form_std, cr__form_cumprod, cr__form_sum_f,
    cr__form_normalize;

/* Broadcasts and maps of scalar-table functions (array_broadcast.c). */
CR_INTERNAL extern const cr_rule_form cr__form_broadcast;

/* Beside their rules in src/rulesets/linalg/: det, logdet (and logabsdet), inv, solve, rdiv
 * (solve.c), svdvals, eigvals, opnorm, eigen, svd, matfun_herm, eigen_general, eigvals_general
 * (spectral.c), expm (expm.c), pinv, qr (factorizations.c). */
CR_INTERNAL extern const cr_rule_form cr__form_det, cr__form_logdet, cr__form_inv, cr__form_solve,
    cr__form_rdiv, cr__form_svdvals, cr__form_eigvals, cr__form_opnorm, cr__form_eigen,
    cr__form_expm, cr__form_svd, cr__form_eigen_general, cr__form_eigvals_general,
    cr__form_matfun_herm, cr__form_pinv, cr__form_qr;

/* cholesky, cholesky_solve, cholesky_det, cholesky_logdet, lu, sylvester, lyap and the
 * LAPACK-level potrf, potrs, getrf, getri, getrs, trtrs, trsyl (linalg/forms_factors.c, which
 * share their steps). */
CR_INTERNAL extern const cr_rule_form cr__form_cholesky, cr__form_cholesky_solve,
    cr__form_cholesky_det, cr__form_cholesky_logdet, cr__form_lu, cr__form_sylvester, cr__form_lyap,
    cr__form_potrf, cr__form_potrs, cr__form_getrf, cr__form_getri, cr__form_getrs, cr__form_trtrs,
    cr__form_trsyl;

#endif /* CR_FORMS_IMPL_H */
