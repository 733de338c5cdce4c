/*
 * Private declarations of the rule tester: the walkers over values and tangents that
 * flatten.c implements (logical components, weights, hashes, names) and the report
 * helpers of report.c, shared by the testers, the registration tests and the checker.
 */
#ifndef CR_TESTING_IMPL_H
#define CR_TESTING_IMPL_H

#include <chainrules/testing.h>

#include "../core/core_impl.h"

#include <string.h>

/* re + i im, exactly (re + im*I may turn an infinite or signed-zero part into NaN, and
 * CMPLX is missing on some compilers). C11 lays a complex out as two reals. */
static inline cr_complex cr__cplx(double re, double im)
{
    double parts[2] = {re, im};
    cr_complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}

/* ---- flatten.c ------------------------------------------------------------------------ */

/* Number of logical real components of a value's tangent space, as compared by the
 * testers: every element of an array (structure applied), re and im of complex entries,
 * the fields of structs; integers and bools none. */
/* Whether finite differences accept a method and options (fd.c): CR_OK or CR_EINVAL, with
 * no message; every estimate makes the same checks before evaluating anything. */
CR_INTERNAL cr_status cr__fd_check(const cr_fdm *method, const cr_fd_opts *opts);

CR_INTERNAL size_t cr__test_ncomps(const cr_value *v);

/* The logical components of tangent t of primal (the primal's layout). *imag receives
 * the largest |imaginary part| that a real leaf's tangent carried (0 when none). On
 * failure msg (may be NULL) says why. Returns CR_OK, CR_ETANGENT, CR_EUNIMPL, CR_EINVAL
 * or a thunk's status. */
CR_INTERNAL cr_status cr__test_expand(const cr_value *primal, cr_tangent t, double *out, size_t n,
                                      double *imag, char *msg, size_t msgsize);

/* The logical components of a value itself (its float parts). */
CR_INTERNAL cr_status cr__test_expand_value(const cr_value *v, double *out, size_t n);

/* A hash of the non-float parts of a value (integers, bools, integer arrays), to compare
 * them exactly. */
CR_INTERNAL uint64_t cr__test_hash_discrete(const cr_value *v);

/* A hash of everything a value holds (every stored element, every field), to detect
 * mutation. */
CR_INTERNAL uint64_t cr__test_hash_value(const cr_value *v, uint64_t h);

/* A hash of a tangent's contents. Thunks are evaluated (memoized) and hashed by their
 * value, so that a rule evaluating one is not taken for mutating it; one that fails to
 * evaluate hashes as its address. */
CR_INTERNAL uint64_t cr__test_hash_tangent(cr_tangent t, uint64_t h);

/* The coordinate weights <E_k, E_k> (2 for mirrored entries of Symmetric/Hermitian,
 * 1 otherwise). */
CR_INTERNAL void cr__test_weights(const cr_value *v, double *w, size_t n);

/* Name of logical component k of v's layout, e.g. "[1,0].im", ".x", "re"; "" for a real
 * scalar. */
CR_INTERNAL void cr__test_comp_name(const cr_value *v, size_t k, char *buf, size_t size);

/* Whether a value holds f32 data (a scalar or an array). */
CR_INTERNAL bool cr__test_has_f32(const cr_value *v);

/* Whether every float part of a value is finite. */
CR_INTERNAL bool cr__test_is_finite(const cr_value *v);

/* ---- rand.c --------------------------------------------------------------------------- */

/* A uniform double in [0, 1). */
CR_INTERNAL double cr__test_uniform(uint64_t *rng);

/* ---- testers.c ------------------------------------------------------------------------ */

/* State of one test: resolved options, the rule to call (a registration's, or dispatch)
 * and the report the checks go to. `vals` throughout is (f, args...): nargs + 1 values. */
typedef struct cr__tester {
    cr_arena *arena;
    cr_test_opts o; /* the caller's options, defaults not filled in */
    double rtol, atol, marginal;
    cr_fdm fdm;
    cr_fd_opts fdo;
    const cr_rule_def *def; /* call this rule's frule/rrule; NULL: dispatch through o.cfg */
    size_t nargs;
    uint64_t rng;
    cr_test_report *rep;
    bool no_frule, no_rrule; /* the rule under test has no frule / no rrule: skip */
    const char *skip_why;    /* why the last CR_EDOMAIN (point not testable) was returned */
    bool primal_failed;      /* f(args) itself failed (not a rule): the status is its */
    char label[96];          /* prefix of every `where`, e.g. "x1 = i; " */
} cr__tester;

/* Set up a tester (options resolved; f32 loosens the defaults). */
CR_INTERNAL cr_status cr__tester_init(cr__tester *t, cr_arena *arena, const cr_test_opts *opts,
                                      const cr_value *vals, size_t nargs, cr_test_report *rep);

/* The checks of test_frule with tangents dargs (nargs + 1) and accumulator acc (NULL:
 * random). CR_EDOMAIN (nothing noted about it) when the point is outside the domain. */
CR_INTERNAL cr_status cr__run_frule(cr__tester *t, const cr_value *vals, const cr_tangent *dargs,
                                    const cr_tangent *acc);

/* The checks of test_rrule with seed ybar (NULL: random) and accumulators accs
 * (nargs + 1, NULL: random). */
CR_INTERNAL cr_status cr__run_rrule(cr__tester *t, const cr_value *vals, const cr_tangent *ybar,
                                    const cr_tangent *accs);

/* The dot-product test with tangents dargs (NULL: random) and seed ybar (NULL: random). */
CR_INTERNAL cr_status cr__run_consistency(cr__tester *t, const cr_value *vals,
                                          const cr_tangent *dargs, const cr_tangent *ybar);

/* test_scalar's checks (unit tangents and seeds, embedded reals, the dot-product test). */
CR_INTERNAL cr_status cr__run_scalar(cr__tester *t, const cr_value *vals);

/* A non-differentiable declaration: the primal value, NoTangent from the frule and for
 * every cotangent of the pullback. */
CR_INTERNAL cr_status cr__run_nondiff(cr__tester *t, const cr_value *vals);

/* f(args) through the primal (or the rule's value when f has no primal). */
CR_INTERNAL cr_status cr__eval_primal(cr__tester *t, const cr_value *vals, cr_value *y);

/* ---- report.c ------------------------------------------------------------------------- */

/* Record one check with its verdict; where/message (printf formats) describe it. A worse
 * verdict than the report's, or a larger ratio at the same verdict, takes where/message. */
CR_INTERNAL void cr__test_note(cr_test_report *r, cr_verdict v, double ratio, const char *where,
                               const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Record the numerical errors of a comparison (max abs / rel). */
CR_INTERNAL void cr__test_errors(cr_test_report *r, double abs_err, double rel_err);

#endif /* CR_TESTING_IMPL_H */
