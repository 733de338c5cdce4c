/**
 * @file rules_array.h
 * @brief Array rules: shapes, reductions, indexing, broadcasting and the ML array
 *        functions, as function values with frules and rrules.
 *
 * Each `cr_fn_NAME` is a `const cr_value` of kind CR_KIND_FUNC; call it through
 * cr_function_call(), cr_frule() or cr_rrule(). Conventions (docs/rules-arrays.md):
 *
 * - **Element types**: f64, f32 and c128 arrays (complex float is not supported). Mixed
 *   arguments promote as Julia does (f32 < f64 < c128). f32 work is done in double and
 *   rounded to f32 on output; cotangents are projected onto their arguments (an f32
 *   argument gets f32, a real argument never a complex cotangent, a Diagonal argument a
 *   Diagonal cotangent).
 * - **Row-major, 0-based**: dimensions and indices count from 0; `dims` arguments are an
 *   integer (one dimension) or an i64 array (several). Reductions over `dims` keep the
 *   reduced dimensions with extent 1, as Julia's do.
 * - **Integer arguments** (dims, indices, shapes) are CR_KIND_I64 values or i64 arrays;
 *   their cotangent is NoTangent.
 * - **Outputs** are new arena arrays, except the view-returning functions (reshape,
 *   transpose, permutedims, view), which return descriptors of the argument's memory
 *   when its layout allows it, without the CR_ARRAY_WRITABLE flag.
 * - **Pullbacks** keep references to the arguments (no copies, like Julia's closures):
 *   keep them alive and unmodified until the pullback and the thunks it returned have
 *   run. Cotangents of large arguments are InplaceableThunks where a cheaper in-place
 *   add! exists (getindex scatters into the accumulator; prod accumulates into it
 *   through one scratch array of the prefix products).
 *
 * @code
 * double w[6] = {1, 2, 3, 4, 5, 6};
 * cr_array W = cr_array_matrix(w, 2, 3);
 * cr_value args[2] = {cr_value_array(&W), cr_value_i64(1)}, y;   // sum(W; dims=1)
 * cr_pullback pb;
 * cr_rrule(NULL, arena, &cr_fn_sum, args, 2, &y, &pb);           // y: 2x1 {6, 15}
 * @endcode
 *
 * @note The function values are immutable and may be shared between threads.
 */
#ifndef CR_RULES_ARRAY_H
#define CR_RULES_ARRAY_H

#include "common.h"
#include "rule.h"
#include "value.h"

CR_BEGIN_DECLS

/* ---- Index ranges -------------------------------------------------------------------- */

/**
 * A range of indices for getindex and view: start, start + step, ... while before `stop`
 * (half-open, as Python's range; step may be negative, never 0). Pass it as
 * `cr_value_struct(&cr_range_type, &r)`.
 */
typedef struct cr_range {
    int64_t start; /**< First index (0-based). */
    int64_t stop;  /**< One past the last index (in the direction of step). */
    int64_t step;  /**< Step; 0 is an error. */
} cr_range;

/** The type descriptor of cr_range (three i64 fields: start, stop, step). */
CR_API extern const cr_type cr_range_type;

/** The colon `:` (all indices of a dimension): a value of kind CR_KIND_NOTHING. */
CR_API extern const cr_value cr_colon;

/* ---- Shapes ------------------------------------------------------------------------- */

/**
 * `reshape(A, shape)`: the elements of A in row-major order, with the extents of the i64
 * array `shape` (or an integer: a vector). A view of A when A is dense and contiguous.
 * Pullback: the cotangent reshaped back.
 */
CR_API extern const cr_value cr_fn_reshape;

/**
 * `transpose(A)`: a matrix transposed (a vector becomes a 1 x n matrix). A view with
 * swapped strides for dense, diagonal, symmetric and triangular A (Upper becomes Lower);
 * a copy for complex Hermitian A. Pullback: the cotangent transposed.
 */
CR_API extern const cr_value cr_fn_transpose;

/**
 * `adjoint(A)` (A'): the conjugate transpose; for real A, transpose(A). A complex
 * Hermitian A is returned as it is; other complex arrays are copied.
 */
CR_API extern const cr_value cr_fn_adjoint;

/**
 * `permutedims(A, perm)`: dimension k of the result is dimension perm[k] of A (perm is an
 * i64 array, a permutation of 0..ndim-1). A strided view of dense A.
 */
CR_API extern const cr_value cr_fn_permutedims;

/**
 * `reverse(A)`, `reverse(A, dims)`: the elements in reverse order along every dimension,
 * or along dims (an integer or an i64 array). Pullback: the cotangent reversed.
 */
CR_API extern const cr_value cr_fn_reverse;

/**
 * `circshift(A, shifts)`: elements moved by shifts[d] positions toward higher indices
 * along each dimension, wrapping around (out[i] = A[(i - s) mod n], Julia's convention);
 * shifts is an i64 array with one entry per dimension (an integer for a vector).
 */
CR_API extern const cr_value cr_fn_circshift;

/**
 * `repeat(A, counts)`: A tiled counts[d] times along each dimension (an i64 array with one
 * count per dimension). Pullback: the cotangent's tiles summed.
 */
CR_API extern const cr_value cr_fn_repeat;

/**
 * `cat(dim, A1, A2, ...)`: concatenation along dimension dim (0-based) of up to 8 arrays of
 * equal rank and equal extents elsewhere; `vcat` of matrices is cat(0, ...), `hcat`
 * cat(1, ...). Pullback: the cotangent's slices (thunks).
 */
CR_API extern const cr_value cr_fn_cat;

/** `vcat(A1, A2, ...)`: concatenation along the first dimension (cat(0, ...)); vectors
 *  make one longer vector. */
CR_API extern const cr_value cr_fn_vcat;

/** `hcat(A1, A2, ...)`: matrices side by side (cat(1, ...)); vectors of equal length
 *  become the columns of a matrix, as in Julia. */
CR_API extern const cr_value cr_fn_hcat;

/**
 * `stack(A1, A2, ...)`: up to 8 arrays of equal shape stacked along a new leading
 * dimension (result[k] is the k-th array, NumPy's default; Julia stacks along a new last
 * dimension, which suits column-major storage).
 */
CR_API extern const cr_value cr_fn_stack;

/**
 * `fill(x, shape)`: an array of the shape (an integer or an i64 array) whose elements are
 * the number x. Pullback: x̄ = the sum of the cotangent.
 */
CR_API extern const cr_value cr_fn_fill;

/** `dropdims(A, dims)`: A without the listed dimensions, which must have extent 1. */
CR_API extern const cr_value cr_fn_dropdims;

/** `diag(A)`, `diag(A, k)`: the k-th diagonal of a matrix as a vector (k > 0 above the main
 *  diagonal, k < 0 below). Pullback: the cotangent placed on that diagonal. */
CR_API extern const cr_value cr_fn_diag;

/** `diagm(v)`, `diagm(v, k)`: the square matrix with the vector v on its k-th diagonal
 *  and zeros elsewhere (dense). Pullback: the cotangent's k-th diagonal.
 *  `diagm(k1, v1, k2, v2, ...)` and `diagm(m, n, k1, v1, ...)` (Julia's
 *  `diagm(k1 => v1, ...)` and `diagm(m, n, k1 => v1, ...)`, up to 4 pairs, 3 with a size):
 *  each vector on its diagonal, a diagonal given twice holding the sum; square of order
 *  max(length(v_i) + |k_i|) without a size, CR_ESHAPE when a diagonal does not fit the
 *  m x n size given. Pullback: v̄_i is the cotangent's diagonal k_i. */
CR_API extern const cr_value cr_fn_diagm;

/** `triu(A)`, `triu(A, k)`: the entries of a matrix on and above its k-th diagonal, zeros
 *  elsewhere (dense). Pullback: the cotangent's upper part. */
CR_API extern const cr_value cr_fn_triu;

/** `tril(A)`, `tril(A, k)`: the entries on and below the k-th diagonal. */
CR_API extern const cr_value cr_fn_tril;

/* ---- Reductions ---------------------------------------------------------------------- */

/**
 * `sum(A)` (a scalar of A's element type) and `sum(A, dims)` (an array with the reduced
 * dimensions of extent 1). Pullback: the cotangent broadcast back to A's shape.
 * `sum(f, A)`, `sum(f, A, dims)` sum f over the elements (see the higher-order functions
 * below): with a row, in one pass keeping only the partials f'(A) (Ā = conj(f'(A)) Ȳ, an
 * InplaceableThunk); otherwise as sum(map(f, A), dims).
 */
CR_API extern const cr_value cr_fn_sum;

/**
 * `mean(A)`, `mean(A, dims)`: sum divided by the number of reduced elements. `mean(f, A)`,
 * `mean(f, A, dims)`: the same of `sum(f, A[, dims])` (Statistics' mean(f, itr)), with its
 * rules: Ā = conj(f'(A)) Ȳ / n with a row. An empty A is CR_EINVAL.
 */
CR_API extern const cr_value cr_fn_mean;

/**
 * `prod(A)`, `prod(A, dims)`. Nothing is divided: each partial (the product of the other
 * elements of the slice) is a prefix product times a suffix product, O(n) and exact with
 * zeros: with one zero among the reduced elements only its cotangent is nonzero (the
 * product of the others); with two or more zeros every cotangent of that slice is zero
 * (ChainRules' ∇prod). The frule multiplies dual numbers.
 */
CR_API extern const cr_value cr_fn_prod;

/**
 * `cumsum(A, dim)` and `cumsum(v)` for a vector: running sums along a dimension.
 * Pullback: reversed running sums of the cotangent.
 */
CR_API extern const cr_value cr_fn_cumsum;

/**
 * `maximum(A)`, `maximum(A, dims)` of a real array. **Ties**: the cotangent goes to the
 * first maximal element in row-major order (the element findmax returns), as in
 * ChainRules; a NaN counts as the maximum (it propagates).
 */
CR_API extern const cr_value cr_fn_maximum;

/** `minimum(A)`, `minimum(A, dims)`: as cr_fn_maximum, with the first minimal element. */
CR_API extern const cr_value cr_fn_minimum;

/**
 * `findmax(A)`: the tuple (maximum, row-major linear index as i64); `findmax(A, dims)`:
 * the tuple (array of maxima, i64 array of linear indices into A), reduced dimensions of
 * extent 1. Ties: the first index. The index has NoTangent; the cotangent of the maximum
 * goes to A at the index.
 */
CR_API extern const cr_value cr_fn_findmax;

/** `findmin(A)`, `findmin(A, dims)`: as cr_fn_findmax for minima. */
CR_API extern const cr_value cr_fn_findmin;

/**
 * `extrema(A)`: the tuple (minimum, maximum) of a real array; `extrema(A, dims)`: the tuple
 * of the two reduced arrays. Ties go to the first extremal element, as for maximum.
 */
CR_API extern const cr_value cr_fn_extrema;

/**
 * `cumprod(A, dim)`, `cumprod(v)`: running products along a dimension. Frule and pullback
 * run the recurrence y_k = y_{k-1} x_k forward and backward, dividing by nothing, so
 * zeros in the input are handled exactly.
 */
CR_API extern const cr_value cr_fn_cumprod;

/**
 * `var(A)`, `var(A, dims)`: the corrected variance Σ|x - mean|² / (n - 1), real also for a
 * complex A. Pullback: 2 (x - mean) ȳ / (n - 1).
 */
CR_API extern const cr_value cr_fn_var;

/**
 * `std(A)`, `std(A, dims)`: sqrt(var). Pullback: (x - mean) ȳ / ((n - 1) std); where the
 * standard deviation is 0 (all elements equal) the cotangent is 0, not NaN.
 */
CR_API extern const cr_value cr_fn_std;

/**
 * `var_ex(x, corrected[, mean[, dims]])`: Julia's `var(x; corrected, mean, dims)`, the
 * variance Σ|x - μ|² / (n - corrected) of all elements or of each slice along dims (kept
 * with extent 1). corrected is a bool (or 0 / 1); mean is nothing (the slices' own means),
 * a number without dims, or with dims an array of x's shape with the reduced dimensions of
 * extent 1. A given mean is an argument like x: x̄ = 2 (x - μ) ȳ / (n - corrected) and
 * μ̄ = -Σ 2 (x - μ) ȳ / (n - corrected) over the slice. The result is real (f32 when x and
 * the mean are f32), also for complex x or mean.
 */
CR_API extern const cr_value cr_fn_var_ex;

/**
 * `std_ex(x, corrected[, mean[, dims]])`: Julia's `std(x; corrected, mean, dims)`,
 * sqrt(var_ex). x̄ = (x - μ) ȳ / ((n - corrected) σ), μ̄ its negated sum over the slice; where
 * σ = 0 (the whole slice at its mean) both are 0, not NaN.
 */
CR_API extern const cr_value cr_fn_std_ex;

/**
 * `norm(A)`, `norm(A, p)`: (Σ |a|^p)^(1/p) over all elements (p = 2 by default: Frobenius
 * for a matrix, as Julia's `norm`; p = 1; p = Inf, the largest |a|; any p > 0), computed
 * scaled by the largest |a| so it neither overflows nor underflows. As Julia's: p = -Inf
 * is the smallest |a|; p < 0 the same sum scaled by the smallest |a| (0 when an element is
 * 0); p = 0 the number of nonzero elements (its derivatives are 0). The cotangent at a
 * zero array (or of a zero element when p < 2) is 0, the subgradient, not NaN; p = Inf
 * (-Inf) gives the whole cotangent to the first largest (smallest) element; a float p gets
 * its cotangent too. A NaN p is CR_EDOMAIN.
 */
CR_API extern const cr_value cr_fn_norm;

/* ---- Indexing ------------------------------------------------------------------------ */

/**
 * `getindex(A, I...)` (A[I...]), a copy. With one index per dimension, each index is an
 * integer (the dimension is dropped), a cr_range, an i64 array of indices (repeats
 * allowed), a bool mask of that dimension's extent, or cr_colon. With a single index into
 * an array of several dimensions, the index is linear (row-major) or a bool mask of A's
 * shape (the selected elements, in row-major order, as a vector). Indices are 0-based and
 * checked (CR_EINVAL when out of bounds). Pullback: the cotangent scatter-added into a
 * zero array of A's shape; repeated indices accumulate. It is an InplaceableThunk whose
 * add! scatters straight into the accumulator.
 */
CR_API extern const cr_value cr_fn_getindex;

/**
 * `view(A, I...)`: as cr_fn_getindex, but for integers, ranges and colons the result is a
 * strided view of A's memory (no copy, not writable); other indices give a copy.
 */
CR_API extern const cr_value cr_fn_view;

/**
 * `sort(v)`: a real vector's elements in ascending order (a stable sort; NaN last, as
 * Julia's isless orders them). Pullback: the cotangent sent back through the permutation.
 */
CR_API extern const cr_value cr_fn_sort;

/** `partialsort(v, k)`: the k-th smallest element (0-based) of a real vector, a scalar.
 *  Pullback: the cotangent at that element. */
CR_API extern const cr_value cr_fn_partialsort;

/* ---- Broadcasting and ML functions ------------------------------------------------------ */

/**
 * `broadcast(f, x...)` (f.(x...)): the scalar function f applied elementwise over arrays
 * and scalars whose shapes broadcast (NumPy's rule for row-major arrays: trailing
 * dimensions are aligned and an extent of 1 stretches). f must be a scalar-table function
 * (rules_math.h) with one output, or any function with scalar rules (then the pullback
 * keeps one pullback per element). For table functions the rrule stores only the partial
 * derivatives (one array per perturbable argument), and the pullback multiplies and sums
 * over the broadcast dimensions (unbroadcast). `+`, `-`, `*`, `/` and `^` with the
 * integer exponent 2 are fused: nothing is stored but references to the arguments. Any
 * number of arguments (a row has at most four; more go element by element through f's
 * rules). A function returning a tuple of m numbers (1 <= m <= 8: a row of several outputs
 * such as sincos, or a rule returning a tuple) gives a tuple of m arrays (a struct value of
 * m array fields), whose cotangent is a structural tangent of m fields.
 */
CR_API extern const cr_value cr_fn_broadcast;

/**
 * `softmax(x)` over all elements, `softmax(x, dims)` along dims: exp(x - max) normalised.
 * The maximum is subtracted first, so large inputs do not overflow. Real arrays.
 */
CR_API extern const cr_value cr_fn_softmax;

/** `logsoftmax(x)`, `logsoftmax(x, dims)`: x - logsumexp(x, dims), computed shifted. */
CR_API extern const cr_value cr_fn_logsoftmax;

/**
 * `logsumexp(x)` (a scalar), `logsumexp(x, dims)`: log(sum(exp(x))) computed as
 * max + log(sum(exp(x - max))). Pullback: softmax times the cotangent.
 */
CR_API extern const cr_value cr_fn_logsumexp;

/* ---- Slices, unique, operator norms, UniformScaling ------------------------------------- */

/**
 * `eachslice(A, dims)`: the slices of A along the dimensions `dims` (an integer or an i64
 * array, in the order listed), as a tuple (a struct value whose type, allocated in the
 * arena, has one CR_KIND_ARRAY field per slice). Slice k fixes the listed dimensions at
 * the k-th index tuple in row-major order and keeps the other dimensions in order. The
 * slices are views of A's memory (of a dense copy when A is structured), not writable.
 * Pullback: the tuple's structural cotangent (absent or zero fields contribute nothing)
 * added slice by slice into a zero array of A's shape, as an InplaceableThunk.
 */
CR_API extern const cr_value cr_fn_eachslice;

/** `eachrow(A)`: eachslice(A, 0) of a matrix (the rows), or of a vector (0-d slices). */
CR_API extern const cr_value cr_fn_eachrow;

/** `eachcol(A)`: eachslice(A, 1) of a matrix (the columns); a vector is one column. */
CR_API extern const cr_value cr_fn_eachcol;

/**
 * `unique(x)` of a real (f64 or f32) vector: its distinct values in order of first
 * appearance (isequal: NaNs are equal, -0.0 and 0.0 are not). Pullback: each output's
 * cotangent goes to the *first* occurrence of its value only (later duplicates get 0), an
 * InplaceableThunk that scatters into the accumulator.
 */
CR_API extern const cr_value cr_fn_unique;

/**
 * `opnorm(A)`, `opnorm(A, p)` of a matrix, p = 1 (largest column sum of |a|), 2 (the
 * default: the largest singular value, through svdvals; needs LAPACKE) or Inf (largest
 * row sum). Ties between columns (rows) give the cotangent to the first one; a zero entry
 * of it gets 0 (the subgradient); for p = 2 the cotangent is u₁ v₁ᴴ ȳ for the top singular
 * pair LAPACK returns, finite also when the top singular value is repeated or zero. p has
 * NoTangent.
 */
CR_API extern const cr_value cr_fn_opnorm;

/**
 * `normalize(x)`, `normalize(x, p)`: x / norm(x, p) (p = 2 by default, as cr_fn_norm: 1,
 * Inf or any p > 0, a float p gets its cotangent). A zero norm is CR_EDOMAIN. Pullback:
 * Ȳ / n plus norm's pullback at n̄ = -re⟨y, Ȳ⟩ / n.
 */
CR_API extern const cr_value cr_fn_normalize;

/**
 * Julia's `A + λI` and `λI + A` (UniformScaling λI, λ a plain number: f64, f32, c128 or an
 * integer, in either argument position): the square matrix A with λ added to its diagonal.
 * Pullback: Ā = Ȳ, λ̄ = tr Ȳ (projected: real for real λ, f32 for f32 λ).
 */
CR_API extern const cr_value cr_fn_add_uniform;

/** `A - λI` (A first) and `λI - A` (λ first). Pullback: ±Ȳ and ±tr Ȳ. */
CR_API extern const cr_value cr_fn_sub_uniform;

/** `λI * A` and `A * λI`: λA for an array A of any shape. Pullback: Ā = conj(λ) Ȳ (an
 *  InplaceableThunk), λ̄ = Σ conj(A) Ȳ. */
CR_API extern const cr_value cr_fn_mul_uniform;

/**
 * `(λI) \ A` = A / λ (λ first) and `A \ (λI)` = λ A⁻¹ (A first, a square nonsingular
 * matrix, through matinv; needs LAPACKE). λ = 0 in A / λ is CR_EDOMAIN.
 */
CR_API extern const cr_value cr_fn_ldiv_uniform;

/** `A / (λI)` = A / λ (A first) and `(λI) / A` = λ A⁻¹ (λ first; needs LAPACKE). */
CR_API extern const cr_value cr_fn_rdiv_uniform;
/* ---- Higher-order functions ------------------------------------------------------------ */

/*
 * These take a function value f and differentiate it. A scalar-table function (a row,
 * rules_math.h or CR_SCALAR_FUNCTION) goes through its partials, kept as arrays: no
 * per-element pullback. Any other function goes through its own rules, or, when it has
 * none, through the configuration's AD: cr_rrule_via_ad() (CR_CAP_REVERSE) and
 * cr_frule_via_ad() (CR_CAP_FORWARD), one call per element or step, whose pullbacks the
 * rule keeps in the arena. Without the capability such a function gives CR_ENOCAP naming
 * it. A failure inside f keeps its status, its message prefixed with the rule, f and the
 * element. ∂f is NoTangent for a plain function; for a functor (a function with fields) it
 * is the sum of the elements' ∂self, NotImplemented when the AD cannot differentiate the
 * fields (the engine's cannot yet). sum(f, A[, dims]) is cr_fn_sum with a function first.
 */

/**
 * `map(f, A1, ..., Ak)`: y[i] = f(A1[i], ..., Ak[i]) over k >= 1 arrays of one shape
 * (CR_ESHAPE otherwise; broadcast stretches shapes, map does not). It is broadcast's rule
 * (cr_fn_broadcast) for equal shapes: rows keep one array of partials per perturbable
 * argument, other functions one pullback per element. The result has the elements' type:
 * complex when f returns complex numbers, f32 for f32 arguments, else f64. A function
 * returning a tuple of m numbers (sincos, or any function whose rule returns a tuple) gives
 * a tuple of m arrays, as broadcast does.
 */
CR_API extern const cr_value cr_fn_map;

/**
 * `foldl(op, v)`, `foldl(op, v, init)`: op(...op(op(init, v[0]), v[1])..., v[n-1]) over a
 * vector (1-d f64, f32 or c128 array); without init the fold starts at v[0], and an empty
 * v needs an init (CR_EINVAL). init is a number (an integer gets NoTangent). With a row,
 * the rrule keeps ∂op/∂a and ∂op/∂b of each step (2n numbers) and the pullback sweeps
 * back: v̄[k] = conj(∂op/∂b) ā, ā ← conj(∂op/∂a) ā; v̄ is an InplaceableThunk. Otherwise
 * each step's pullback is kept and run in reverse order.
 */
CR_API extern const cr_value cr_fn_foldl;

/**
 * `accumulate(op, v)`, `accumulate(op, v, init)`: the vector of foldl's intermediate
 * values, y[k] = op(y[k-1], v[k]) with y[0] = v[0] without init and op(init, v[0]) with
 * it. Pullback: as foldl, the cotangent of y[k] joining the running cotangent at step k.
 */
CR_API extern const cr_value cr_fn_accumulate;

/**
 * `reduce(op, A)`, `reduce(op, A, dims)`, `reduce(op, A, dims, init)`: Julia's
 * `reduce(op, A; dims, init)`, defined as foldl over the elements of each slice in
 * row-major order (Julia leaves the association unspecified; this is one of its choices).
 * dims is an integer, an i64 array or nothing (every element: the result is a number);
 * with dims the result keeps the reduced dimensions with extent 1. A of any shape (f64,
 * f32 or c128), init a number. Op `+`, `*` (cr_fn_add, cr_fn_mul), `max` or `min`
 * (cr_fn_max, cr_fn_min; real A and init) over a non-empty A run the rules of sum, prod,
 * maximum or minimum: one pass over A, the same values (bit for bit over one reduced
 * dimension), maximum's convention at ties (the first element); an init is then combined
 * with each value m as op(init, m) (one rule call for all slices; + and * equal to the fold
 * up to rounding; a tie of init and m goes to m for max, to init for min, as the scalar
 * rows' partials give it). Otherwise each slice goes
 * through foldl's rules (a row keeps its partials, another op its steps' pullbacks); the
 * pullback scatters each slice's cotangent back, init's cotangent is the sum over the
 * slices.
 */
CR_API extern const cr_value cr_fn_reduce;

/**
 * `accumulate_ex(op, A, dim)`, `accumulate_ex(op, A, dim, init)`: Julia's
 * `accumulate(op, A; dims = dim, init)`, accumulate along one dimension of an array of any
 * shape: every line along dim is accumulated as a vector. The result has A's shape.
 */
CR_API extern const cr_value cr_fn_accumulate_ex;

/* ---- Selections with options: filter, sort with rev and by, unique and sortslices along
 * a dimension, repeat with inner, hvcat --------------------------------------------------- */

/**
 * `filter(f, A)`: the elements x of A (row-major order) for which f(x) returns true, as a
 * vector (f a function value returning a bool). Pullback: the cotangent scattered back to
 * the chosen elements; f gets NoTangent (its choice is held fixed).
 */
CR_API extern const cr_value cr_fn_filter;

/**
 * `sortslices(A, dim)`: the slices of a real array along dim (0: the rows of a matrix)
 * sorted lexicographically by isless (NaN last; a stable sort, elements compared in
 * row-major order). Pullback: the cotangent sent back through the permutation.
 */
CR_API extern const cr_value cr_fn_sortslices;

/**
 * `unique_ex(A, dim)`: unique(A; dims = dim): the first occurrence of each distinct slice
 * along dim (isequal: NaNs equal, -0.0 and 0.0 not), in order. Pullback: each slice's
 * cotangent to its first occurrence.
 */
CR_API extern const cr_value cr_fn_unique_ex;

/**
 * `sort_ex(v, rev)`, `sort_ex(v, rev, by)`: sort(v; rev, by): a stable sort of the vector by
 * the keys by(v[i]) (real numbers; by a function value, or CR_KIND_NOTHING / absent for the
 * values themselves, which must then be real), in reversed order when rev is true (ties
 * still in input order, NaN keys first). Pullback: through the permutation.
 */
CR_API extern const cr_value cr_fn_sort_ex;

/**
 * `partialsort_ex(v, k, rev[, by])`: partialsort(v, k; rev, by): element k (0-based) of
 * sort_ex's order, a number, or for a cr_range k the vector of those elements.
 */
CR_API extern const cr_value cr_fn_partialsort_ex;

/**
 * `repeat_ex(A, inner, outer)`: repeat(A; inner, outer): each element repeated inner[d]
 * times along dimension d, the result tiled outer[d] times (one count per dimension, i64
 * arrays or an integer for a vector). Pullback: the sum over the copies.
 */
CR_API extern const cr_value cr_fn_repeat_ex;

/**
 * `hvcat(rows, A...)`: the block matrix of the arrays, rows[i] of them side by side (hcat)
 * in block row i, the block rows stacked (vcat); rows an integer (every block row) or an
 * i64 array. Pullback: through vcat's and hcat's.
 */
CR_API extern const cr_value cr_fn_hvcat;

/* ---- Mutating functions -------------------------------------------------------------- */

/**
 * Julia's mutating functions (names with `!`). As rules they do not mutate: each returns the
 * new contents of its destination (the first argument), and the arguments are untouched
 * (rules never write through them). cr_mutate_frule() and cr_mutate_rrule() apply one in
 * place. The destination's old contents get the cotangent of the part not overwritten
 * (zero when all of it is), docs/rules-arrays.md.
 *
 * `copyto!(dest, src)`: dest with its first numel(src) elements (row-major) replaced by
 * src's (numel(src) <= numel(dest)). Pullback: src̄ = those elements of ȳ, dest̄ = ȳ with
 * them zeroed.
 */
CR_API extern const cr_value cr_fn_copyto_bang;

/**
 * `setindex!(A, x, inds...)`: A with A[inds...] = x, the indices as cr_fn_getindex takes
 * them (one per dimension, or one linear index or i64 array); x a number (written at every
 * position) or an array with one value per position. A position written twice keeps the
 * last value. Pullback: Ā = ȳ zeroed at the positions, x̄ = ȳ at them (the sum for a
 * number; zero for a value overwritten by a later one).
 */
CR_API extern const cr_value cr_fn_setindex_bang;

/** `fill!(A, x)`: an array of A's shape and type filled with x. Pullback: x̄ = sum(ȳ). */
CR_API extern const cr_value cr_fn_fill_bang;

/**
 * `sum!(r, A)`: sum(A) over the dimensions where r has extent 1 and A does not (r has A's
 * number of dimensions). Pullback: Ā = ȳ broadcast, r̄ = 0.
 */
CR_API extern const cr_value cr_fn_sum_bang;

/** `cumsum!(B, A)`, `cumsum!(B, A, dim)`: cumsum(A[, dim]) (B of A's shape). */
CR_API extern const cr_value cr_fn_cumsum_bang;

/** `permutedims!(dest, src, perm)`: permutedims(src, perm) (dest of the result's shape). */
CR_API extern const cr_value cr_fn_permutedims_bang;

/** `reverse!(A)`, `reverse!(A, dims)`: reverse(A[, dims]), the input being the destination. */
CR_API extern const cr_value cr_fn_reverse_bang;

/** `circshift!(dest, src, shifts)`: circshift(src, shifts) (dest of src's shape). */
CR_API extern const cr_value cr_fn_circshift_bang;

/**
 * `inv!(A)` and `exp!(A)` (LinearAlgebra's): the inverse (cr_fn_matinv) and the matrix
 * exponential (cr_fn_expm) of a square matrix, the input being the destination. LAPACKE
 * builds only (CR_EUNIMPL otherwise).
 */
CR_API extern const cr_value cr_fn_inv_bang;
/** See cr_fn_inv_bang. */
CR_API extern const cr_value cr_fn_exp_bang;

/**
 * Run the frule of a mutating function (cr_fn_copyto_bang ... cr_fn_exp_bang) in
 * place: the destination args[0] is overwritten with the result and its tangent dargs[1]
 * (a dense array of the destination's dtype and size) with the result's tangent.
 * @param[in] cfg   configuration, or NULL.
 * @param[in] arena scratch and errors.
 * @param[in] f     the mutating function.
 * @param[in,out] args  nargs arguments; args[0]'s array is written.
 * @param[in,out] dargs nargs + 1 tangents (dargs[0] for f); dargs[1]'s array is written.
 * @param[in] nargs number of arguments.
 * @return CR_OK; CR_EINVAL (not a mutating function, bad arguments), CR_ETANGENT (no
 *         buffer to write the tangent into), or the rule's status (then nothing is written).
 */
CR_API cr_status cr_mutate_frule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                 const cr_value *args, const cr_tangent *dargs, size_t nargs);

/**
 * Run the rrule of a mutating function in place: args[0]'s array is overwritten with the
 * result; *pb is the pullback, which gives the cotangents of the arguments' values before
 * the call (the destination's: ȳ with the overwritten part zeroed). The pullbacks of these
 * functions never read the destination, so overwriting it is safe.
 * @param[in] cfg   configuration, or NULL.
 * @param[in] arena scratch, the pullback's environment and errors.
 * @param[in] f     the mutating function.
 * @param[in,out] args nargs arguments; args[0]'s array is written.
 * @param[in] nargs number of arguments.
 * @param[out] pb   the pullback (its environment lives in arena).
 * @return CR_OK; CR_EINVAL; or the rule's status (then nothing is written).
 */
CR_API cr_status cr_mutate_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                 const cr_value *args, size_t nargs, cr_pullback *pb);

/* ---- Contractions ------------------------------------------------------------------------ */

/**
 * The index spec of an einsum (cr_fn_einsum): letters (a-z, A-Z) naming each operand's
 * dimensions, operands separated by ',', then "->" and the output's letters, e.g.
 * "ij,jk->ik" (matrix product), "bij,bjk->bik" (batched), "ii->" (trace). An index absent
 * from the output is summed; a letter repeated in an operand reads its diagonal, repeated in
 * the output writes one; without "->" the output is the letters used once, in ASCII order.
 * Pass it as `cr_value_struct(&cr_einsum_spec_type, &s)`; the string is borrowed.
 */
typedef struct cr_einsum_spec {
    const char *spec; /**< The spec, a NUL-terminated string. */
} cr_einsum_spec;

/** The type descriptor of cr_einsum_spec (no differentiable fields: NoTangent). */
CR_API extern const cr_type cr_einsum_spec_type;

/**
 * `einsum(spec, A)` or `einsum(spec, A, B)`: the contraction of one or two float arrays
 * that spec describes (docs/rules-arrays.md, "Contractions"), always an array (0-d for an
 * empty output). Two operands without diagonals go through BLAS gemm, one call per batch
 * index. Linear in each operand: the cotangents are einsums of the same indices (thunks
 * for two operands). Errors: CR_EINVAL for a bad spec, naming it and the position
 * ("einsum: spec \"ij,jk-ik\": '-' at position 5 is not an index letter ..."), or a
 * spec with another number of operands; CR_ESHAPE for an operand whose rank is not its
 * number of letters or for an index with two extents.
 */
CR_API extern const cr_value cr_fn_einsum;

/**
 * `vect(x1, ..., xn)`: Julia's Base.vect, the vector [x1, ..., xn] of n >= 1 numbers (f64,
 * f32, c128, integers, bools), of the float arguments' promoted type (f64 when none is
 * float). Linear: x_k's cotangent is element k of the vector's (NoTangent for integers and
 * bools). The tape's cr_av_pack() records packs this way on second-order tapes.
 */
CR_API extern const cr_value cr_fn_vect;

CR_END_DECLS

#endif /* CR_RULES_ARRAY_H */
