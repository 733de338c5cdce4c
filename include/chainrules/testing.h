/**
 * @file testing.h
 * @brief Rule testing: test_frule, test_rrule, test_scalar and registration checks against
 *        finite differences (the C counterpart of ChainRulesTestUtils.jl).
 *
 * The testers call a rule, compare what it returns with finite differences of the primal
 * computation (fd.h), and fill a `cr_test_report`. They never print, abort or depend on a
 * unit-test framework, so any framework can use them; `testing_cmocka.h` adds an
 * assertion for cmocka.
 *
 * What is checked (each item is one "check" of the report):
 *
 * - cr_test_frule(): the primal value; the tangent against a finite-difference jvp;
 *   add!! of the tangent into a random accumulator equals +; the inputs (arguments and
 *   tangents) are not mutated.
 * - cr_test_rrule(): the primal value; one cotangent per argument plus ∂self; each
 *   cotangent against a finite-difference j'vp; NoTangent (not ZeroTangent) for
 *   non-perturbable arguments (integers, bools, plain functions' ∂self); add!! into a
 *   random accumulator equals +; a thunked seed gives the same cotangents; neither the
 *   rrule nor the pullback mutates the arguments or the seed.
 * - cr_test_consistency(): frule and rrule agree, by the dot-product test
 *   <ȳ, J ẋ> = <Jᵀ ȳ, ẋ> with random ẋ and ȳ.
 * - cr_test_scalar(): both rules with unit (co)tangents, 1 and i for complex arguments and
 *   outputs, as ChainRulesTestUtils' test_scalar, plus the dot-product test.
 * - cr_test_rule_registration(): all of the above at points sampled from a rule's
 *   `cr_rule_test` (random points in its box, its hard points, the box corners, or its
 *   custom sampler), for real, complex, mixed, integer and float arguments as the
 *   signature allows.
 *
 * A NotImplemented tangent is reported as known-broken (CR_VERDICT_BROKEN), not as a
 * failure. The verdict of a report is that of its worst check: PASS < MARGINAL < BROKEN <
 * FAIL. A numerical check compares each component with
 * `|ad - fd| <= max(atol, rtol * max(|ad|, |fd|), fd_err)`, where fd_err is the finite
 * differences' own error estimate; it PASSes within that tolerance, is MARGINAL within
 * `marginal` times it, and FAILs beyond.
 *
 * Values are perturbed through a flattening to real vectors (cr_test_flatten()): f64 and
 * f32 give one coordinate, c128 two (re, im), float arrays one or two per free entry
 * (every element of a dense array, the diagonal of a Diagonal, the triangle of an
 * Upper/Lower, the upper triangle of a Symmetric or Hermitian, whose diagonal is real),
 * structs and tuples their fields in order, a functor its fields; integers, bools, integer
 * arrays and plain functions none. docs/testing-rules.md explains the flattening and
 * the tolerance policy.
 *
 * @code
 * #include <chainrules.h>
 *
 * int main(void)
 * {
 *     cr_ctx *ctx;
 *     cr_arena *scratch;
 *     if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_arena_new(ctx, NULL, &scratch) != CR_OK)
 *         return 2;
 *     cr_value x = cr_value_f64(0.75);
 *     cr_test_report r;
 *     cr_status st = cr_test_rrule(scratch, NULL, &cr_fn_sin, &x, 1, &r);
 *     char line[800];
 *     cr_test_report_format(&r, line, sizeof line);
 *     puts(line);   // "PASS: 8 checks (8 passed), max abs err 5.3e-14, max rel err 8.2e-14"
 *     cr_arena_free(scratch);
 *     cr_ctx_free(ctx);
 *     return st != CR_OK || r.verdict == CR_VERDICT_FAIL;
 * }
 * @endcode
 *
 * @note Every function here is reentrant and keeps no global state. The scratch arena is
 *       thread-confined, like every arena; the testers allocate from it and rewind it to
 *       where it was before they return.
 */
#ifndef CR_TESTING_H
#define CR_TESTING_H

#include "arena.h"
#include "common.h"
#include "fd.h"
#include "rule.h"
#include "status.h"
#include "tangent.h"
#include "value.h"

CR_BEGIN_DECLS

/** Verdict of a check or a report. Append only; values never change. */
typedef enum cr_verdict {
    CR_VERDICT_PASS = 0,     /**< Within tolerance. */
    CR_VERDICT_MARGINAL = 1, /**< Beyond tolerance but within `marginal` times it. */
    CR_VERDICT_FAIL = 2,     /**< Wrong. */
    CR_VERDICT_BROKEN = 3    /**< Known broken: a NotImplemented tangent (test_broken). */
} cr_verdict;

/** Default relative and absolute tolerance (ChainRulesTestUtils' rtol = atol = 1e-9). */
#define CR_TEST_DEFAULT_TOL 1e-9
/** Default width of the MARGINAL band, as a factor of the tolerance. */
#define CR_TEST_DEFAULT_MARGINAL 10.0
/** Tolerance used instead of the defaults when f32 values are involved. */
#define CR_TEST_F32_TOL 1e-3
/** Default number of random points per argument variant in registration tests. */
#define CR_TEST_DEFAULT_NPOINTS 3

/** Flag of cr_test_opts: do not check that a thunked seed gives the same cotangents. */
#define CR_TEST_NO_THUNK_CHECK 1u
/** Flag of cr_test_opts: registration tests use only f64 arguments (no complex, mixed,
 *  integer or f32 variants). */
#define CR_TEST_F64_ONLY 2u
/** Flag of cr_test_opts: registration tests skip the box corners (edge points). */
#define CR_TEST_NO_EDGES 4u

/**
 * What a test found. Filled by every tester; `where` and `message` describe the worst
 * check (the first of the worst verdict, the largest error among failures).
 */
typedef struct cr_test_report {
    cr_verdict verdict;  /**< The worst verdict of any check (PASS when none ran). */
    double max_abs_err;  /**< Largest |ad - fd| of any numerical comparison. */
    double max_rel_err;  /**< Largest |ad - fd| / max(|ad|, |fd|). */
    double worst_ratio;  /**< Largest error / tolerance (1 is the edge of PASS). */
    char where[160];     /**< Which check, argument and component, e.g. "rrule: cotangent
                              of argument 2 (f64), component re". */
    char message[512];   /**< What went wrong (or "" when everything passed). */
    size_t nchecks;      /**< Checks made. */
    size_t npassed;      /**< Checks that passed. */
    size_t nmarginal;    /**< Checks that were marginal. */
    size_t nfailed;      /**< Checks that failed. */
    size_t nbroken;      /**< Checks that met a NotImplemented tangent. */
    size_t npoints;      /**< Points tested (registration tests; 1 for the others). */
    size_t nskipped;     /**< Points skipped because finite differences cannot test them:
                              the primal is not finite, finite differences leave the
                              domain, cross a pole, or cannot resolve a step at the
                              arguments' magnitude (see docs/testing-rules.md). */
    char skip_note[160]; /**< Why the first skipped point was skipped, and where ("" when
                              none was). */
} cr_test_report;

/** Options of the testers. Zero-initialised means defaults. */
typedef struct cr_test_opts {
    uint32_t struct_size;             /**< sizeof(cr_test_opts), or 0 for the current size. */
    double rtol;                      /**< Relative tolerance; 0 means 1e-9 (1e-3 with f32). */
    double atol;                      /**< Absolute tolerance; 0 means 1e-9 (1e-3 with f32). */
    double marginal;                  /**< MARGINAL band factor (>= 1); 0 means 10. */
    const cr_fdm *fdm;                /**< Method; NULL means central_fdm(5, 1). */
    const cr_fd_opts *fd_opts;        /**< Finite-difference options; NULL means defaults
                                           (adaptive step). With f32 values the round-off
                                           factor is raised to FLT_EPSILON / DBL_EPSILON. */
    const cr_config *cfg;             /**< Configuration the rules are called with (and whose
                                           registry dispatch uses); NULL: built-ins. */
    uint64_t seed;                    /**< Seed of the random tangents and points; 0 means a
                                           fixed default (tests are reproducible). */
    const cr_tangent *input_tangents; /**< nargs + 1 tangents (Δself first): the frule's
                                           input tangents and the rrule's accumulators, or
                                           NULL for random ones. NoTangent marks an
                                           argument that is not perturbed. */
    const cr_tangent *output_tangent; /**< The rrule's seed ȳ and the frule's accumulator,
                                           or NULL for a random one. */
    size_t npoints;                   /**< Registration tests: random points per variant;
                                           0 means CR_TEST_DEFAULT_NPOINTS. */
    uint32_t flags;                   /**< CR_TEST_* flags. */
} cr_test_opts;

/** Name of a verdict: "PASS", "MARGINAL", "FAIL", "BROKEN"; "?" when unknown. */
CR_API const char *cr_verdict_name(cr_verdict v);

/**
 * Severity order of verdicts: PASS 0 < MARGINAL 1 < BROKEN 2 < FAIL 3.
 * @param[in] v a verdict.
 * @return its rank (unknown verdicts rank as FAIL).
 */
CR_API int cr_verdict_rank(cr_verdict v);

/**
 * Reset a report: PASS, no checks, empty strings.
 * @param[out] r the report (caller storage).
 */
CR_API void cr_test_report_init(cr_test_report *r);

/**
 * Merge the checks of `src` into `dst` (counts add up, the worst check wins).
 * @param[in,out] dst the accumulated report.
 * @param[in]     src a report to fold in.
 */
CR_API void cr_test_report_merge(cr_test_report *dst, const cr_test_report *src);

/**
 * One line describing a report: verdict, counts, errors and, unless it passed, where and
 * what, e.g. "FAIL: 12 checks (11 passed, 1 failed), max abs err 0.42, max rel err 1 --
 * rrule: cotangent of argument 1 (f64), component re: ...".
 * @param[in]  r    the report.
 * @param[out] buf  where the line goes (NUL-terminated, truncated to size).
 * @param[in]  size size of buf.
 * @return the length the full line needs (like snprintf).
 */
CR_API size_t cr_test_report_format(const cr_test_report *r, char *buf, size_t size);

/**
 * test_frule: call the frule of f at args with input tangents (random unless given) and
 * check it (see the file overview).
 * @param[in]  scratch where everything is allocated; rewound before return.
 * @param[in]  opts    NULL for defaults.
 * @param[in]  f       the function value (CR_KIND_FUNC).
 * @param[in]  args    nargs arguments (borrowed; must not be mutated by the rule).
 * @param[in]  nargs   number of arguments.
 * @param[out] out     the report.
 * @return CR_OK when the test ran, whatever the verdict (a rule that returns an error
 *         status is a FAIL, or BROKEN for CR_EUNIMPL); CR_EINVAL (bad arguments or
 *         tangents); CR_ENORULE (no frule applies: out says FAIL too); CR_EDOMAIN (the
 *         primal is not finite at args, or finite differences could not stay in its
 *         domain); allocation statuses.
 */
CR_API cr_status cr_test_frule(cr_arena *scratch, const cr_test_opts *opts, const cr_value *f,
                               const cr_value *args, size_t nargs, cr_test_report *out);

/**
 * test_rrule: call the rrule of f at args and its pullback with a seed (random unless
 * given) and check them (see the file overview).
 * @param[in]  scratch where everything is allocated; rewound before return.
 * @param[in]  opts    NULL for defaults.
 * @param[in]  f       the function value.
 * @param[in]  args    nargs arguments (borrowed).
 * @param[in]  nargs   number of arguments.
 * @param[out] out     the report.
 * @return as cr_test_frule().
 */
CR_API cr_status cr_test_rrule(cr_arena *scratch, const cr_test_opts *opts, const cr_value *f,
                               const cr_value *args, size_t nargs, cr_test_report *out);

/**
 * The dot-product test: with random ẋ (all arguments and self) and ȳ (or those of opts),
 * check <ȳ, frule(ẋ)> = Σ <pullback(ȳ)_i, ẋ_i>, so that the frule and the rrule
 * compute the same derivative. No finite differences are involved.
 * @param[in]  scratch where everything is allocated; rewound before return.
 * @param[in]  opts    NULL for defaults.
 * @param[in]  f       the function value.
 * @param[in]  args    nargs arguments (borrowed).
 * @param[in]  nargs   number of arguments.
 * @param[out] out     the report.
 * @return as cr_test_frule().
 */
CR_API cr_status cr_test_consistency(cr_arena *scratch, const cr_test_opts *opts, const cr_value *f,
                                     const cr_value *args, size_t nargs, cr_test_report *out);

/**
 * test_scalar, for functions of scalar arguments (f64, f32, c128, integers, bools) with a
 * scalar or tuple-of-scalars output: the frule with each unit tangent (1, and i for a
 * complex argument; one argument at a time), the rrule with each unit seed (1, and i for
 * a complex output; one output at a time), a real tangent and seed against the same one
 * embedded in the complex numbers, and the dot-product test.
 * @param[in]  scratch where everything is allocated; rewound before return.
 * @param[in]  opts    NULL for defaults (input_tangents and output_tangent are ignored).
 * @param[in]  f       the function value.
 * @param[in]  args    nargs scalar arguments.
 * @param[in]  nargs   number of arguments (1 in ChainRulesTestUtils' test_scalar).
 * @param[out] out     the report (all the sub-tests merged).
 * @return as cr_test_frule(); CR_EINVAL when an argument is not a scalar.
 */
CR_API cr_status cr_test_scalar(cr_arena *scratch, const cr_test_opts *opts, const cr_value *f,
                                const cr_value *args, size_t nargs, cr_test_report *out);

/**
 * Test one registered rule (an entry from cr_registry_get()) at the points its
 * `cr_rule_test` describes: hard points, the corners of its box, `opts->npoints` random
 * points in the box (default [-3, 3] per argument) for each argument variant the
 * signature admits (f64; c128 and mixed f64/c128 for complex signatures; the first
 * argument an integer, and f32, at one point), or `npoints` calls of its sampler.
 * The rule's own frule and rrule are called (not dispatch). A non-differentiable
 * declaration is checked to give NoTangent everywhere; an opt-out entry has nothing to
 * test. Points where the primal is not finite, or where finite differences leave the
 * domain, are skipped (counted in nskipped).
 * @param[in]  scratch where everything is allocated; rewound before return.
 * @param[in]  opts    NULL for defaults; the registration's rtol/atol override opts'.
 * @param[in]  rule    the entry.
 * @param[out] out     the report of every point merged (npoints counts them).
 * @return CR_OK when the rule was tested; CR_EINVAL when its arguments cannot be
 *         generated (a signature of arrays or structs without a sampler; out says FAIL
 *         and why) or no point could be tested; CR_ENOCAP when the rule needs
 *         capabilities opts->cfg lacks; allocation statuses.
 */
CR_API cr_status cr_test_rule_registration(cr_arena *scratch, const cr_test_opts *opts,
                                           const cr_rule_info *rule, cr_test_report *out);

/**
 * Whether the rule tester can generate arguments for an entry: a test registration is
 * present and either every argument matcher admits a real scalar (the box is used) or
 * the registration has a sampler. Non-differentiable declarations and opt-outs need no
 * registration.
 * @param[in] rule an entry from cr_registry_get().
 * @return true when the entry can be tested (or needs no test).
 */
CR_API bool cr_test_registration_usable(const cr_rule_info *rule);

/**
 * Completeness: the entries of `reg` itself (not its parents) that have no usable test
 * registration (see cr_test_registration_usable()).
 * @param[in]  reg  the registry.
 * @param[out] buf  their signatures, one per line (e.g. "frule+rrule foo(f64, array)");
 *                  may be NULL when size is 0.
 * @param[in]  size size of buf (the list is truncated to fit).
 * @return the number of such entries.
 */
CR_API size_t cr_test_untested_rules(const cr_registry *reg, char *buf, size_t size);

/**
 * rand_tangent: a random tangent for a primal, with exactly representable components
 * (multiples of 1/8 in [-9, 9], never 0 for a scalar) so that failure messages read well.
 * f64, f32 and c128 primals get a tangent of their own precision; float arrays a new
 * writable array of the same shape and structure (a real diagonal for Hermitian); structs,
 * tuples and functors a structural tangent, or NoTangent when no field can be perturbed;
 * integers, bools, integer arrays and plain functions NoTangent.
 * @param[in]     arena  where arrays and structural tangents are allocated.
 * @param[in,out] rng    the generator state (any value; advanced).
 * @param[in]     primal the primal.
 * @param[out]    out    the tangent.
 * @return CR_OK; CR_EINVAL (NULL arguments, inconsistent descriptors); allocation statuses.
 */
CR_API cr_status cr_rand_tangent(cr_arena *arena, uint64_t *rng, const cr_value *primal,
                                 cr_tangent *out);

/**
 * The next 64 random bits of the testers' generator (splitmix64).
 * @param[in,out] rng the state, advanced.
 * @return the bits.
 */
CR_API uint64_t cr_test_rand_u64(uint64_t *rng);

/* ---- Flattening -------------------------------------------------------------------------- */

/**
 * Number of real coordinates of a value (see the file overview): its dimension as a
 * point of the tangent space.
 * @param[in] v the value; NULL gives 0.
 */
CR_API size_t cr_test_flat_size(const cr_value *v);

/**
 * A value's coordinates, in the order of cr_test_flat_size().
 * @param[in]  v   the value.
 * @param[out] x   n coordinates.
 * @param[in]  n   must equal cr_test_flat_size(v).
 * @return CR_OK; CR_EINVAL (NULL, wrong n, inconsistent descriptors).
 */
CR_API cr_status cr_test_flatten(const cr_value *v, double *x, size_t n);

/**
 * A copy of `like` with the coordinates x: arrays become contiguous writable copies of
 * the same shape, dtype and structure, structs and functor fields are copied; what has
 * no coordinate (integers, function pointers, the ignored triangle of a structured
 * matrix) is copied as it is.
 * @param[in]  arena where the copies live.
 * @param[in]  like  the template value (borrowed, not modified).
 * @param[in]  x     n coordinates.
 * @param[in]  n     must equal cr_test_flat_size(like).
 * @param[out] out   the new value.
 * @return CR_OK; CR_EINVAL; allocation statuses.
 */
CR_API cr_status cr_test_unflatten(cr_arena *arena, const cr_value *like, const double *x, size_t n,
                                   cr_value *out);

/**
 * The coordinates of a tangent of `primal`: the direction in which cr_test_unflatten()
 * moves when the tangent is added. Zeros, NoTangent and absent fields give zeros; thunks
 * are unthunked; a tangent outside the primal's tangent space (a dense tangent of a
 * Symmetric matrix) is read at the coordinate positions (the upper triangle).
 * @param[in]  primal the primal.
 * @param[in]  t      the tangent.
 * @param[out] x      n coordinates.
 * @param[in]  n      must equal cr_test_flat_size(primal).
 * @return CR_OK; CR_EINVAL; CR_ETANGENT (a tangent of the wrong kind or shape);
 *         CR_EUNIMPL (a NotImplemented tangent); a thunk's status.
 */
CR_API cr_status cr_test_tangent_flatten(const cr_value *primal, cr_tangent t, double *x, size_t n);

/**
 * The natural tangent of `primal` with coordinates x (the inverse of
 * cr_test_tangent_flatten() on the tangent space): f64/f32/c128 scalars, new writable
 * arrays of the primal's structure, structural tangents; NoTangent for what has no
 * coordinate.
 * @param[in]  arena  where arrays and structural tangents are allocated.
 * @param[in]  primal the primal.
 * @param[in]  x      n coordinates.
 * @param[in]  n      must equal cr_test_flat_size(primal).
 * @param[out] out    the tangent.
 * @return CR_OK; CR_EINVAL; allocation statuses.
 */
CR_API cr_status cr_test_tangent_unflatten(cr_arena *arena, const cr_value *primal, const double *x,
                                           size_t n, cr_tangent *out);

/**
 * The dual coordinates of a cotangent of `primal`: g_k = <t, E_k>, the real inner product
 * (real part of the Frobenius product) of t with the tangent E_k of the k-th coordinate.
 * This is what a finite-difference j'vp computes in coordinates, so
 * cr_test_cotangent_flatten(pullback(ȳ)) should equal j'vp(ȳ). It equals
 * cr_test_tangent_flatten() except for mirrored entries of Symmetric and Hermitian
 * matrices, whose coordinates move two elements at once.
 * @param[in]  primal the primal.
 * @param[in]  t      the cotangent.
 * @param[out] g      n dual coordinates.
 * @param[in]  n      must equal cr_test_flat_size(primal).
 * @return as cr_test_tangent_flatten().
 */
CR_API cr_status cr_test_cotangent_flatten(const cr_value *primal, cr_tangent t, double *g,
                                           size_t n);

/* ---- Utilities: test_approx, a finite-difference RuleConfig, grad, random matrices --------- */

/**
 * `test_approx`: whether two tangents of `primal` agree component by component within
 * |a - b| <= max(atol, rtol * max(|a|, |b|)) (zeros, NoTangent and absent fields read as
 * zeros; thunks are evaluated). When they do not, `where` says which component differs
 * most (as the testers name it: ".x", "[1,0].im", "re") and by how much: both values, the
 * absolute and the relative error; or why a tangent does not fit the primal.
 * @param[in]  primal the primal both are tangents of.
 * @param[in]  a, b   the tangents.
 * @param[in]  rtol   relative tolerance (>= 0).
 * @param[in]  atol   absolute tolerance (>= 0).
 * @param[out] where  the explanation ("" when they agree), or NULL.
 * @param[in]  size   its size.
 * @return true when they agree.
 */
CR_API bool cr_test_approx(const cr_value *primal, cr_tangent a, cr_tangent b, double rtol,
                           double atol, char *where, size_t size);

/** State of a finite-difference rule configuration (cr_test_fd_config()). */
typedef struct cr_test_fd_env {
    cr_fdm method;             /**< The method (first derivative). */
    const cr_fd_opts *fd_opts; /**< Finite-difference options, or NULL. */
} cr_test_fd_env;

/**
 * ChainRulesTestUtils' TestConfig: a rule configuration with reverse and forward
 * capabilities whose `rrule_via_ad` and `frule_via_ad` are finite differences of the
 * function's primal (a j'vp and a jvp over the arguments' coordinates, cr_test_flatten()),
 * so that higher-order rules (map, broadcast, foldl with a function that has no rule) are
 * tested without an AD engine: pass it as cr_test_opts.cfg. The pullback's cotangents are
 * natural tangents of the arguments; ∂self is NoTangent.
 * @param[in]  method   a first-derivative method, or NULL for central_fdm(5, 1).
 * @param[in]  fd_opts  finite-difference options, or NULL.
 * @param[in]  registry where the configuration's rules are looked up (NULL: built-ins).
 * @param[out] env      the state; keep it alive and in place while `out` is used.
 * @param[out] out      the configuration.
 * @return CR_OK; CR_EINVAL (NULL, a method whose order is not 1); a method's status.
 */
CR_API cr_status cr_test_fd_config(const cr_fdm *method, const cr_fd_opts *fd_opts,
                                   const cr_registry *registry, cr_test_fd_env *env,
                                   cr_config *out);

/**
 * FiniteDifferences' `grad`: the gradient of a real-valued function by finite differences,
 * one cotangent per argument (natural tangents of the arguments; NoTangent for integers).
 * @param[in]  arena   where values, the gradient and scratch live.
 * @param[in]  method  a first-derivative method, or NULL for central_fdm(5, 1).
 * @param[in]  fd_opts finite-difference options, or NULL.
 * @param[in]  f       the function value (its primal is called).
 * @param[in]  args    the nargs arguments (at most CR_SIG_MAX_ARGS).
 * @param[in]  nargs   their number.
 * @param[out] grads   nargs cotangents.
 * @return CR_OK; CR_EINVAL; CR_ESHAPE (f does not return a real number); statuses of f
 *         and of the finite differences.
 */
CR_API cr_status cr_fd_grad(cr_arena *arena, const cr_fdm *method, const cr_fd_opts *fd_opts,
                            const cr_value *f, const cr_value *args, size_t nargs,
                            cr_tangent *grads);

/** Kinds of cr_test_rand_matrix(). */
typedef enum cr_test_matrix_kind {
    CR_TEST_MATRIX_GENERAL = 0,   /**< U S V^T: U, V random orthogonal. */
    CR_TEST_MATRIX_SPD = 1,       /**< U S U^T: symmetric positive definite. */
    CR_TEST_MATRIX_ORTHOGONAL = 2 /**< A random orthogonal matrix (cond is 1). */
} cr_test_matrix_kind;

/**
 * A random n x n matrix of a given 2-norm condition number: singular values (eigenvalues
 * for SPD) from `cond` down to 1, evenly spaced in the logarithm, between random
 * orthogonal factors (Householder reflections of normal vectors). For the linear-algebra
 * rules' tests: a matrix that is safely invertible, or exactly as ill-conditioned as asked.
 * @param[in]     arena where the new writable f64 array lives.
 * @param[in,out] rng   the generator state (advanced).
 * @param[in]     n     the size (>= 1).
 * @param[in]     cond  the condition number (>= 1, finite; ignored for ORTHOGONAL).
 * @param[in]     kind  GENERAL, SPD or ORTHOGONAL.
 * @param[out]    out   the matrix.
 * @return CR_OK; CR_EINVAL; CR_EOVERFLOW (n * n); allocation statuses.
 */
CR_API cr_status cr_test_rand_matrix(cr_arena *arena, uint64_t *rng, size_t n, double cond,
                                     cr_test_matrix_kind kind, cr_array **out);

/* ---- The command-line checker -------------------------------------------------------------- */

CR_END_DECLS

#endif /* CR_TESTING_H */
