/*
 * Private helpers of the array and linear-algebra rule families (array*.c, linalg*.c):
 * canonicalisation of array arguments and tangents at the rule boundary (Mooncake's
 * arrayify/matrixify), dtype promotion, output allocation in the arena, projection of
 * cotangents, an n-ary strided loop for elementwise kernels and reductions, and thin
 * BLAS wrappers with a plain-C fallback.
 *
 * Conventions shared by every array rule:
 * - Computation happens in a *work dtype*: double for f64 and f32 arrays, double complex
 *   for c128. Results are rounded to the output dtype at the end (an f32 computation
 *   returns f32), and cotangents are projected onto their argument (cr_project), so an
 *   f32 argument gets an f32 cotangent and a real argument a real one.
 * - Arguments are canonicalised once: cr__dense() gives a contiguous row-major array of
 *   the work dtype with the structure applied (borrowing the argument when it already is
 *   one), cr__tan_array() does the same for (co)tangents and reads zeros as NULL.
 * - Rules keep references to their array arguments (no copies), as Julia's closures do:
 *   callers keep arguments alive and unmodified until the pullback and its thunks have
 *   run (docs/rules-arrays.md).
 */
#ifndef CR_ARRAY_IMPL_H
#define CR_ARRAY_IMPL_H

#include <float.h>
#include <math.h>
#include <string.h>

#include <chainrules/project.h>
#include <chainrules/rules_array.h>
#include <chainrules/rules_linalg.h>

#include "../rules/array_rule_impl.h"
#include "../rules/rules_impl.h"

/* ---- Registration ------------------------------------------------------------------------ */

/* Sub-families of cr__family_array / cr__family_linalg (one per file). */
CR_INTERNAL cr_status cr__array_register_shape(cr_registry *reg);     /* array.c */
CR_INTERNAL cr_status cr__array_register_reduce(cr_registry *reg);    /* array_reduce.c */
CR_INTERNAL cr_status cr__array_register_index(cr_registry *reg);     /* array_index.c */
CR_INTERNAL cr_status cr__array_register_broadcast(cr_registry *reg); /* array_broadcast.c */
CR_INTERNAL cr_status cr__array_register_gather(cr_registry *reg);    /* array_gather.c */
CR_INTERNAL cr_status cr__array_register_extra(cr_registry *reg);     /* array_extra.c */
CR_INTERNAL cr_status cr__array_register_hof(cr_registry *reg);       /* array_hof.c */
CR_INTERNAL cr_status cr__array_register_mutate(cr_registry *reg);    /* array/mutate.c */
CR_INTERNAL cr_status cr__array_register_select(cr_registry *reg);    /* array/select.c */
CR_INTERNAL cr_status cr__linalg_register_blas(cr_registry *reg);     /* linalg/products.c */
CR_INTERNAL cr_status cr__linalg_register_lapack(cr_registry *reg);   /* linalg/solve.c */
CR_INTERNAL cr_status cr__linalg_register_fact(cr_registry *reg);     /* linalg/factorizations.c */
CR_INTERNAL cr_status cr__linalg_register_level(cr_registry *reg);    /* linalg/lapack_calls.c */
CR_INTERNAL cr_status cr__linalg_register_sparse(cr_registry *reg);   /* linalg/sparse.c */
CR_INTERNAL cr_status cr__linalg_register_blas_tri(cr_registry *reg); /* linalg/blas_tri.c */

/* The udata with which a function's primal calls its own rrule: compute the output only,
 * build no pullback. */
CR_INTERNAL extern const char cr__primal_only_tag;
#define CR__PRIMAL_ONLY ((const void *)&cr__primal_only_tag)

/* The primal of an array function: its rrule called with CR__PRIMAL_ONLY. The function's
 * udata is a `const cr__op *`. */
typedef struct cr__op {
    cr_rrule_fn rrule;
} cr__op;
CR_INTERNAL cr_status cr__primal_via_rrule(cr_arena *arena, const cr_value *f, const cr_value *args,
                                           size_t nargs, cr_value *out);

/* Declares `static const cr_function NAME_function` (primal through NAME_rrule) and the
 * exported cr_fn_NAME. NAME_rrule must be declared before. */
#define CR__ARRAY_FN(NAME, STR, ARITY)                                                         \
    static const cr__op NAME##_op = {NAME##_rrule};                                            \
    static const cr_function NAME##_function = {                                               \
        .name = (STR), .arity = (ARITY), .primal = cr__primal_via_rrule, .udata = &NAME##_op}; \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

/* The frule and rrule of NAME as calls of shared implementations that take one parameter
 * (a kind, a flag, a function): RIMPL(arena, PARAM, args, nargs, y, pb, udata) and
 * FIMPL(arena, PARAM, dargs, args, nargs, y, dy); then the function value (CR__ARRAY_FN). */
#define CR__PARAM_RULES(NAME, RIMPL, FIMPL, PARAM, ARITY) \
    CR__PARAM_RULE_FNS(NAME, RIMPL, FIMPL, PARAM)         \
    CR__ARRAY_FN(NAME, #NAME, ARITY)
/* The same two rules without the function value. */
#define CR__PARAM_RULE_FNS(NAME, RIMPL, FIMPL, PARAM)          \
    static cr_status NAME##_rrule(CR__RRULE_PARAMS)            \
    {                                                          \
        return RIMPL(arena, PARAM, args, nargs, y, pb, udata); \
    }                                                          \
    static cr_status NAME##_frule(CR__FRULE_PARAMS)            \
    {                                                          \
        return FIMPL(arena, PARAM, dargs, args, nargs, y, dy); \
    }

/* Register frule + rrule of fn for the signature args[0..n) (variadic: last repeats). */
CR_INTERNAL cr_status cr__add_rule(cr_registry *reg, const cr_function *fn, const cr_argspec *args,
                                   size_t n, bool variadic, cr_frule_fn frule, cr_rrule_fn rrule,
                                   const cr_rule_test *test);

/* The same with the rule's second-order behaviour: its cr_linearity class and its form (or
 * NULL), docs/second-order-forms.md. */
CR_INTERNAL cr_status cr__add_rule_so(cr_registry *reg, const cr_function *fn,
                                      const cr_argspec *args, size_t n, bool variadic,
                                      cr_frule_fn frule, cr_rrule_fn rrule,
                                      const cr_rule_test *test, uint32_t linearity,
                                      const cr_rule_form *form);

/* Matchers used by the families. */
#define CR__M_FARRAY   (CR_M_A_F64 | CR_M_A_F32 | CR_M_A_C128)
#define CR__M_RARRAY   (CR_M_A_F64 | CR_M_A_F32)
#define CR__M_NUM      (CR_M_F64 | CR_M_F32 | CR_M_C128 | CR_M_INT | CR_M_BOOL)
#define CR__ARG_FARRAY ((cr_argspec){CR__M_FARRAY, NULL})
#define CR__ARG_RARRAY ((cr_argspec){CR__M_RARRAY, NULL})
#define CR__ARG_DIMS   ((cr_argspec){CR_M_INT | CR_M_A_INT, NULL})

/* ---- Element types ---------------------------------------------------------------------- */

/* Julia's promotion: f32 < f64 < c128; 0 (integers, bools) is neutral. */
CR_INTERNAL cr_dtype cr__promote(cr_dtype a, cr_dtype b);

/* The float dtype of a value (arrays: their dtype if float; scalars: theirs), or 0 for
 * integers, bools and everything else. */
CR_INTERNAL cr_dtype cr__value_dtype(const cr_value *v);

/* Whether a value is perturbable (a float scalar or a float array). */
CR_INTERNAL bool cr__is_diff(const cr_value *v);

/* Whether an argument has coordinates to perturb: a float number (cr__is_diff) or a
 * non-empty float array (array/common.c). */
CR_INTERNAL bool cr__arg_perturbable(const cr_value *v);
/* The arguments a rule gives NoTangent: bit i set when !perturbable(&args[i]) (the first 32
 * arguments). */
CR_INTERNAL uint32_t cr__nondiff_mask(const cr_value *args, size_t nargs,
                                      bool (*perturbable)(const cr_value *));
/* NoTangent for the function (dx[0]) and for each argument whose bit is set in mask. */
CR_INTERNAL void cr__mark_nondiff(cr_tangent *dx, size_t nx, uint32_t mask);
/* NAME_pullback: NAME_pullback_body, then NoTangent for the arguments in the mask `nd` of
 * its environment ENV (cr__nondiff_mask at the rrule), whatever the body returned. */
#define CR__MASKED_PULLBACK(NAME, ENV)                                                \
    static cr_status NAME##_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, \
                                     cr_arena *arena, void *env)                      \
    {                                                                                 \
        cr_status st = NAME##_pullback_body(dy, dx, nx, arena, env);                  \
        cr__mark_nondiff(dx, nx, ((const ENV *)env)->nd);                             \
        return st;                                                                    \
    }

/* A scalar value as a complex number (integers and bools converted). */
CR_INTERNAL cr_complex cr__scalar_of(const cr_value *v);

/* A scalar value / tangent of dtype dt (f32 rounded, real part for real dtypes). */
CR_INTERNAL cr_value cr__scalar_value(cr_dtype dt, cr_complex v);
CR_INTERNAL cr_tangent cr__scalar_tangent(cr_dtype dt, cr_complex v);

/* ---- Arrays -------------------------------------------------------------------------- */

/* Like cr__dense() but any strides are accepted (for elementwise kernels, which iterate
 * strides): only the dtype and a non-dense structure force a copy. */
CR_INTERNAL cr_status cr__strided(cr_arena *arena, const cr_array *a, cr_dtype wdt,
                                  const cr_array **out);

/* ---- Integer arguments -------------------------------------------------------------- */

/* Reduction dimensions from an i64 scalar or i64 array value: sets mask[d] for each listed
 * dim (0-based, < ndim, no repeats). */
CR_INTERNAL cr_status cr__dims_arg(cr_arena *arena, const char *who, const cr_value *v, size_t ndim,
                                   bool *mask);

/* An integer scalar argument. */
CR_INTERNAL cr_status cr__int_arg(cr_arena *arena, const char *who, const cr_value *v,
                                  int64_t *out);

/* An i64 array argument read as a list of integers (1-d, or any shape read in order). */
CR_INTERNAL cr_status cr__int_list(cr_arena *arena, const char *who, const cr_value *v,
                                   int64_t **out, size_t *n);

/* ---- Tangents ------------------------------------------------------------------------- */

/* A scalar (co)tangent: unthunked; zeros give 0 with *nz false; a one-element array is read
 * as its element. */
CR_INTERNAL cr_status cr__tan_scalar(cr_arena *arena, const char *who, cr_tangent t, cr_complex *v,
                                     bool *nz);

/* The input tangent of argument i of an frule (dargs[i + 1]) as an array like args[i]
 * (NULL when zero or the argument is not perturbable). */
CR_INTERNAL cr_status cr__dx_array(cr_arena *arena, const char *who, const cr_tangent *dargs,
                                   const cr_value *args, size_t i, cr_dtype wdt,
                                   const cr_array **out);

/* Projectors of every argument (NoTangent ones for integers), built in the rrule. */
CR_INTERNAL cr_status cr__projectors(cr_arena *arena, const cr_value *args, size_t nargs,
                                     cr_project ***out);

/* The cotangent of an argument: raw == NULL gives ZeroTangent, else the projection of raw
 * (a work array that nobody else holds: it may be returned writable). */
CR_INTERNAL cr_status cr__give(cr_arena *arena, const cr_project *p, cr_array *raw,
                               cr_tangent *out);

/* Whether an add! fast path can write into dest directly: dest dense, contiguous,
 * writable, of dtype dt and of the shape of the argument `like`, which is dense and of
 * dtype dt too (so that projecting onto it changes nothing). */
CR_INTERNAL bool cr__dest_ok(const cr_array *dest, cr_dtype dt, const cr_array *like);

/* A thunk (or InplaceableThunk when add != NULL) in the arena. */
CR_INTERNAL cr_status cr__thunk(cr_arena *arena, cr_thunk_fn fn, cr_thunk_add_fn add, void *env,
                                const char *name, cr_tangent *out);

/* ---- Strided n-ary loops --------------------------------------------------------------- */

#define CR__ND_MAX 10

/* Arrays (by strides, in elements) walked together over one shape; a stride 0 repeats an
 * element (broadcasting, or accumulation for reductions). */
typedef struct cr__nd {
    size_t ndim;
    size_t narr;
    size_t shape[CR_ARRAY_MAX_DIMS];
    ptrdiff_t strides[CR__ND_MAX][CR_ARRAY_MAX_DIMS];
} cr__nd;

/* The inner loop of a kernel: n elements; array k starts at offset off[k] and advances by
 * step[k]. */
typedef void (*cr__inner_fn)(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *ctx);

/* Start a loop over `shape`. */
CR_INTERNAL void cr__nd_init(cr__nd *nd, size_t ndim, const size_t *shape);

/* Add an array: its strides aligned to the loop's trailing dimensions (NumPy's rule),
 * with stride 0 where the array has extent 1 or lacks the dimension. Returns its index. */
CR_INTERNAL size_t cr__nd_add(cr__nd *nd, const cr_array *a);

/* Add an array with explicit strides (ndim of the loop). Returns its index. */
CR_INTERNAL size_t cr__nd_add_strides(cr__nd *nd, const ptrdiff_t *strides);

/* Run fn over the whole shape (dimensions that are contiguous for every array merged). */
CR_INTERNAL void cr__nd_run(const cr__nd *nd, cr__inner_fn fn, void *ctx);

/* Broadcast shape of arrays (NumPy: trailing dimensions aligned, extent 1 stretches). */
CR_INTERNAL cr_status cr__bc_shape(cr_arena *arena, const char *who, const cr_array *const *a,
                                   size_t n, size_t *ndim, size_t *shape);

/* Reduce `full` (any strides, work dtype) to `shape` by summing over the broadcast
 * dimensions (unbroadcast). New writable array. */
CR_INTERNAL cr_status cr__unbroadcast(cr_arena *arena, const cr_array *full, size_t ndim,
                                      const size_t *shape, cr_array **out);

/* dst (contiguous) = src broadcast to dst's shape, times s (work dtypes). */
CR_INTERNAL void cr__broadcast_into(cr_array *dst, const cr_array *src, cr_complex s);

/* dst += s * src broadcast to dst's shape (dst any strides, work dtypes). */
CR_INTERNAL void cr__broadcast_axpy(cr_array *dst, const cr_array *src, cr_complex s);

/* A 0-d work array holding v. */
CR_INTERNAL cr_status cr__scalar_array(cr_arena *arena, cr_dtype wdt, cr_complex v, cr_array **out);

/* y += s * x for contiguous work arrays of equal numel. */
CR_INTERNAL void cr__axpy(cr_complex s, const cr_array *x, cr_array *y);

/* x *= s (contiguous work array). */
CR_INTERNAL void cr__scal(cr_complex s, cr_array *x);

/* ---- BLAS ---------------------------------------------------------------------------- */

/* A matrix operand for gemm: row-major data with leading dimension ld, used transposed
 * (trans 1) or conjugate-transposed (trans 2) or as is (0). */
typedef struct cr__mat {
    const void *data;
    size_t rows, cols; /* of the stored matrix (before op) */
    size_t ld;
    int trans;
} cr__mat;

/* A 2-d array (or 1-d as a column when as_row is false, a row when true) as a gemm operand
 * of dtype wdt without copying when its strides allow (row-major, or transposed
 * row-major); otherwise a contiguous copy. */
CR_INTERNAL cr_status cr__as_mat(cr_arena *arena, const cr_array *a, cr_dtype wdt, bool as_row,
                                 cr__mat *out);

/* The operand op(m)ᴴ (a conjugated copy when BLAS cannot express it). */
CR_INTERNAL cr_status cr__mat_adj(cr_arena *arena, cr_dtype wdt, const cr__mat *m, cr__mat *out);

/* Rows and columns of op(m). */
static inline size_t cr__mat_rows(const cr__mat *m)
{
    return m->trans ? m->cols : m->rows;
}
static inline size_t cr__mat_cols(const cr__mat *m)
{
    return m->trans ? m->rows : m->cols;
}

/* C = alpha op(A) op(B) + beta C, C row-major m x n with leading dimension ldc; work
 * dtype wdt (f64 or c128). */
CR_INTERNAL void cr__gemm(cr_dtype wdt, const cr__mat *A, const cr__mat *B, cr_complex alpha,
                          cr_complex beta, void *C, size_t ldc);

/* sum conj(x_i) y_i over n contiguous elements (conjugation only for complex). */
CR_INTERNAL cr_complex cr__dotc(cr_dtype wdt, size_t n, const void *x, const void *y);

/* 1/(a_j - a_i), 0 where the two are equal to working precision relative to scale (a
 * repeated eigenvalue, or singular values with equal squares): the terms a degenerate
 * spectrum would make infinite are dropped, which is exact for losses that do not depend
 * on the choice of basis of the degenerate subspace. The eigen and svd rules and the
 * second-order form of eigen (src/rulesets/linalg/spectral.c) take their gaps from here. */
static inline double cr__inv_gap(double aj, double ai, double scale)
{
    double d = aj - ai;
    return fabs(d) <= 64 * DBL_EPSILON * scale ? 0.0 : 1.0 / d;
}

/* 1/s, or 0 for a singular value s that is zero to working precision relative to the largest,
 * smax: the svd rules' S⁻¹ (rank-deficient matrices get finite cotangents), shared with svd's
 * second-order form (src/rulesets/linalg/spectral.c). */
static inline double cr__inv_sval(double s, double smax)
{
    return s <= 64 * DBL_EPSILON * smax ? 0.0 : 1.0 / s;
}

/* max |w_i|, the scale of cr__inv_gap for a spectrum w of n values. */
static inline double cr__spectrum_scale(const double *w, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s = fmax(s, fabs(w[i]));
    return s;
}

/* The tolerance of matfun_herm's divided differences for the spectrum w of n eigenvalues:
 * two closer than this count as equal (cr__divdiff1). */
static inline double cr__matfun_tol(const double *w, size_t n)
{
    return 1e-5 * fmax(1.0, cr__spectrum_scale(w, n));
}

/* matfun_herm's first divided difference f[a, b] of the scalar row f, given fa = f(a) and
 * fb = f(b): (fa - fb) / (a - b), or f' at the midpoint where |a - b| <= tol (no
 * cancellation; accurate to O(gap²)); f'(a) for a = b. The rule and its second-order form
 * (src/rulesets/linalg/spectral.c) take their divided differences from here. */
static inline double cr__divdiff1(const cr_scalar_rule *row, double a, double b, double fa,
                                  double fb, double tol)
{
    if (fabs(a - b) <= tol) {
        double m = 0.5 * (a + b), fm, dm;
        row->f64(&m, &fm, &dm);
        return dm;
    }
    return (fa - fb) / (a - b);
}

/* ---- Rule helpers ----------------------------------------------------------------------- */

/* The frule of a function linear in its first argument, the others integers: y = f(args),
 * dy = f(dA, args...) projected onto y. The function's udata is a cr__op. */
CR_INTERNAL cr_status cr__linear_frule(const cr_config *cfg, cr_arena *arena,
                                       const cr_tangent *dargs, const cr_value *f,
                                       const cr_value *args, size_t nargs, cr_value *y,
                                       cr_tangent *dy, const void *udata);

/* cr__give() for a raw array that may alias the caller's cotangent: a result sharing raw's
 * memory is returned without CR_ARRAY_WRITABLE. */
CR_INTERNAL cr_status cr__give_alias(cr_arena *arena, const cr_project *p, cr_array *raw,
                                     cr_tangent *out);

/* Argument i as an array (CR_EINVAL naming `who` otherwise). */
CR_INTERNAL cr_status cr__array_arg(cr_arena *arena, const char *who, const cr_value *args,
                                    size_t nargs, size_t i, const cr_array **out);

/* CR_EINVAL unless lo <= nargs <= hi. */
CR_INTERNAL cr_status cr__nargs(cr_arena *arena, const char *who, size_t nargs, size_t lo,
                                size_t hi);

/* ---- Random arguments for the test registrations (splitmix64) ------------------------------ */

/* cr__rng_next and cr__rng_unif: rules_impl.h. */
CR_INTERNAL size_t cr__rng_below(uint64_t *s, size_t n);
/* f64 most of the time, sometimes f32 or c128. */
CR_INTERNAL cr_dtype cr__rng_dtype(uint64_t *s);
/* An array of uniform entries in [lo, hi) (real and imaginary parts for c128). */
CR_INTERNAL cr_status cr__rand_array(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t ndim,
                                     const size_t *shape, double lo, double hi, cr_array **out);
/* A 1-d i64 array holding vals. */
CR_INTERNAL cr_status cr__i64_array(cr_arena *arena, size_t n, const int64_t *vals, cr_array **out);

/* ---- Higher-order rules (array_hof.c, array_broadcast.c) -------------------------------- */

/* One element's (or step's) rule inside a higher-order rule `who` (map, sum, foldl, ...):
 * with CR_CAP_REVERSE in cfg, the configuration's rrule_via_ad (which uses f's rule when it
 * has one); otherwise f's own rrule, and CR_ENOCAP naming f when it has none. A failure's
 * message is prefixed with who, f and the element k. */
CR_INTERNAL cr_status cr__elem_rrule(const cr_config *cfg, cr_arena *arena, const char *who,
                                     size_t k, const cr_value *f, const cr_value *args,
                                     size_t nargs, cr_value *y, cr_pullback *pb);

/* The same for frules: frule_via_ad with CR_CAP_FORWARD, else f's own frule. */
CR_INTERNAL cr_status cr__elem_frule(const cr_config *cfg, cr_arena *arena, const char *who,
                                     size_t k, const cr_tangent *dargs, const cr_value *f,
                                     const cr_value *args, size_t nargs, cr_value *y,
                                     cr_tangent *dy);

/* f's primal on one element, failures prefixed as above. */
CR_INTERNAL cr_status cr__elem_call(cr_arena *arena, const char *who, size_t k, const cr_value *f,
                                    const cr_value *args, size_t nargs, cr_value *y);

/* The element type of a higher-order rule's result from the promoted float type of its
 * arguments (`in`, 0 for none) and of the values f returned (`res`, 0 for none): complex
 * when f returned complex values, f32 when the arguments are f32 (an AD computes in
 * double), else f64; the arguments' type when f was never called. */
CR_INTERNAL cr_dtype cr__hof_dtype(cr_dtype in, cr_dtype res);

/* broadcast's rrule and frule (array_broadcast.c), also map's and sum(f, x)'s; who names
 * the function in messages. */
CR_INTERNAL cr_status cr__bc_rrule(const cr_config *cfg, cr_arena *arena, const char *who,
                                   const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                   const void *udata);
CR_INTERNAL cr_status cr__bc_frule(const cr_config *cfg, cr_arena *arena, const char *who,
                                   const cr_tangent *dargs, const cr_value *args, size_t nargs,
                                   cr_value *y, cr_tangent *dy);

/* sum(f, A), sum(f, A, dims): the rrule behind cr_fn_sum when its first argument is a
 * function (array_reduce.c's sum routes its primal here). */
CR_INTERNAL cr_status cr__sum_f_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                      const cr_value *args, size_t nargs, cr_value *y,
                                      cr_pullback *pb, const void *udata);
/* mean(f, A[, dims]): sum(f, A[, dims]) divided by the number of reduced elements
 * (array_hof.c); mean's primal reaches it through mean_rrule. */
CR_INTERNAL cr_status cr__mean_f_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                       const cr_value *args, size_t nargs, cr_value *y,
                                       cr_pullback *pb, const void *udata);

#endif /* CR_ARRAY_IMPL_H */
