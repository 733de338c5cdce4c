/*
 * Shared helpers of the unit tests: C11's CMPLX where the C library lacks it, exact
 * assertions that print both values, and the common fixture (a context and an arena).
 */
#ifndef CR_TEST_UTIL_H
#define CR_TEST_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

/* C11's CMPLX, which some C libraries do not define for every compiler (glibc and clang
 * before 12): the layout of a complex is two doubles, real part first. */
#ifndef CMPLX
static inline cr_complex cmplx_(double re, double im)
{
    double parts[2] = {re, im};
    cr_complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}
#define CMPLX(x, y) cmplx_((double)(x), (double)(y))
#endif

#define ASSERT_DBL(got, want)                                               \
    do {                                                                    \
        double got_ = (got), want_ = (want);                                \
        if (!(got_ == want_)) {                                             \
            print_error("%s = %.17g, expected %.17g\n", #got, got_, want_); \
            fail();                                                         \
        }                                                                   \
    } while (0)

#define ASSERT_CPLX(got, re, im)                                                        \
    do {                                                                                \
        cr_complex gz_ = (got);                                                         \
        if (!(creal(gz_) == (re) && cimag(gz_) == (im))) {                              \
            print_error("%s = %.17g%+.17gi, expected %.17g%+.17gi\n", #got, creal(gz_), \
                        cimag(gz_), (double)(re), (double)(im));                        \
            fail();                                                                     \
        }                                                                               \
    } while (0)

/* |a - b| <= rtol * max(1, |b|), printing both values and the expression otherwise. */
static inline void assert_close_(double a, double b, double rtol, const char *what,
                                 const char *file, int line)
{
    if (!(fabs(a - b) <= rtol * fmax(1.0, fabs(b)))) {
        print_error("%s: %.17g != %.17g (rtol %g)\n", what, a, b, rtol);
        _fail(file, line);
    }
}
#define assert_close(a, b, rtol) assert_close_((a), (b), (rtol), #a " ~ " #b, __FILE__, __LINE__)

/* |got - want| <= tol * (1 + |want|), naming the expression otherwise. */
static inline void assert_near_(double got, double want, double tol, const char *what,
                                const char *file, int line)
{
    if (!(fabs(got - want) <= tol * (1 + fabs(want)))) {
        print_error("%s: got %.17g, want %.17g\n", what, got, want);
        _fail(file, line);
    }
}
#define ASSERT_CLOSE(got, want, tol) assert_near_((got), (want), (tol), #got, __FILE__, __LINE__)

/* s contains sub (for error messages). */
static inline void assert_contains_(const char *s, const char *sub, const char *file, int line)
{
    if (s == NULL || strstr(s, sub) == NULL) {
        print_error("\"%s\" does not contain \"%s\"\n", s ? s : "(null)", sub);
        _fail(file, line);
    }
}
#define assert_contains(s, sub) assert_contains_((s), (sub), __FILE__, __LINE__)

/* An error message that names who exactly once and contains sub. */
static inline void assert_error_once_(const char *s, const char *who, const char *sub,
                                      const char *file, int line)
{
    assert_contains_(s, sub, file, line);
    size_t count = 0, len = strlen(who);
    for (const char *at = strstr(s, who); at != NULL; at = strstr(at + len, who))
        count++;
    if (count != 1) {
        print_error("\"%s\" names \"%s\" %zu times\n", s, who, count);
        _fail(file, line);
    }
}
#define assert_error_once(s, who, sub) assert_error_once_((s), (who), (sub), __FILE__, __LINE__)

/* The common fixture: a context with the default allocator and a growable arena. A test
 * file with a fixture of its own defines CR_TEST_OWN_FIXTURE first. */
#ifndef CR_TEST_OWN_FIXTURE
typedef struct fixture {
    cr_ctx *ctx;
    cr_arena *arena;
} fixture;

static inline int fixture_setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || cr_ctx_new(NULL, &f->ctx) != CR_OK ||
        cr_arena_new(f->ctx, NULL, &f->arena) != CR_OK)
        return -1;
    *state = f;
    return 0;
}

static inline int fixture_teardown(void **state)
{
    fixture *f = *state;
    cr_arena_free(f->arena);
    cr_ctx_free(f->ctx);
    free(f);
    return 0;
}

/* f(args) through cr_rrule and its pullback (cotangent: the output itself when an array) in
 * fixed arenas of growing size: every run short of room fails with CR_EARENA, and the first
 * that fits gives the output of a run in a growable arena. */
static inline void assert_arena_sweep_(void *fxp, const cr_value *f, const cr_value *args,
                                       size_t nargs, const char *file, int line)
{
    fixture *fx = fxp;
    cr_value want;
    cr_pullback pb;
    if (cr_rrule(NULL, fx->arena, f, args, nargs, &want, &pb) != CR_OK)
        _fail(file, line);
    bool arr = want.kind == CR_KIND_ARRAY;
    for (size_t size = 64;; size += 64) {
        void *buf = malloc(size);
        cr_arena *a = NULL;
        cr_arena_params ap = {.struct_size = sizeof ap, .buffer = buf, .buffer_size = size};
        if (buf == NULL || cr_arena_new(fx->ctx, &ap, &a) != CR_OK)
            _fail(file, line);
        cr_value y;
        cr_status st = cr_rrule(NULL, a, f, args, nargs, &y, &pb);
        if (st == CR_OK && arr) {
            cr_tangent dy = cr_tangent_array(want.u.arr), dx[CR_SIG_MAX_ARGS + 1];
            st = cr_pullback_call(a, &pb, &dy, dx, nargs + 1);
        }
        bool done = st == CR_OK;
        if (done && arr) {
            size_t n = cr_array_numel(want.u.arr);
            for (size_t k = 0; k < n; k++)
                if (cr_array_get_linear(y.u.arr, k) != cr_array_get_linear(want.u.arr, k))
                    _fail(file, line);
        }
        cr_arena_free(a);
        free(buf);
        if (done)
            return;
        if (st != CR_EARENA) {
            print_error("%s instead of CR_EARENA with %zu bytes\n", cr_status_name(st), size);
            _fail(file, line);
        }
    }
}
#define assert_arena_sweep(fx, f, args, nargs) \
    assert_arena_sweep_((fx), (f), (args), (nargs), __FILE__, __LINE__)

/* One run of f(args) in arena a: the rrule, its pullback at the cotangent dy and every
 * cotangent unthunked (rule != 0), or the frule at the tangents dargs (rule == 0). */
static inline cr_status sweep_run_(cr_arena *a, int rule, const cr_value *f, const cr_value *args,
                                   size_t nargs, const cr_tangent *dargs, cr_tangent dy,
                                   cr_value *y, cr_tangent *out)
{
    if (!rule)
        return cr_frule(NULL, a, dargs, f, args, nargs, y, out);
    cr_pullback pb;
    cr_status st = cr_rrule(NULL, a, f, args, nargs, y, &pb);
    if (st == CR_OK)
        st = cr_pullback_call(a, &pb, &dy, out, nargs + 1);
    for (size_t k = 1; st == CR_OK && k <= nargs; k++)
        st = cr_tangent_unthunk(out[k], &out[k]);
    return st;
}

/* The failure of a sweep: the function's name and the helper's line that failed. */
static inline void sweep_fail_(const cr_value *f, int at, const char *file, int line)
{
    print_error("arena sweep of %s failed (test_util.h:%d)\n",
                f->kind == CR_KIND_FUNC && f->u.func.fn ? f->u.func.fn->name : "?", at);
    _fail(file, line);
}

/* f(args) through both rules in fixed arenas of growing size: the rrule, its pullback (at a
 * random cotangent of the output) with every cotangent unthunked, and the frule when f has
 * one (at random tangents of the arguments). Every run short of room fails with CR_EARENA and a
 * message; the first run that fits gives the output and the (co)tangents of a run in a growable
 * arena. */
static inline void assert_arena_sweep_rules_(void *fxp, const cr_value *f, const cr_value *args,
                                             size_t nargs, const char *file, int line)
{
    fixture *fx = fxp;
    uint64_t rng = 12345;
    cr_tangent dargs[CR_SIG_MAX_ARGS + 1], dy = cr_tangent_none(), want_t[CR_SIG_MAX_ARGS + 1];
    cr_value want;
    if (nargs > CR_SIG_MAX_ARGS)
        sweep_fail_(f, __LINE__, file, line);
    dargs[0] = cr_tangent_none();
    for (size_t k = 0; k < nargs; k++)
        if (cr_rand_tangent(fx->arena, &rng, &args[k], &dargs[k + 1]) != CR_OK)
            sweep_fail_(f, __LINE__, file, line);
    for (int rule = 0; rule < 2; rule++) {
        cr_status st0 = sweep_run_(fx->arena, rule, f, args, nargs, dargs, dy, &want, want_t);
        if (st0 == CR_NOTHING && rule == 0) { /* no frule: the cotangent from the primal */
            if (cr_function_call(fx->arena, f, args, nargs, &want) != CR_OK ||
                cr_rand_tangent(fx->arena, &rng, &want, &dy) != CR_OK)
                sweep_fail_(f, __LINE__, file, line);
            continue;
        }
        if (st0 != CR_OK) {
            print_error("%s: %s: %s\n", rule ? "rrule" : "frule", cr_status_name(st0),
                        cr_ctx_errmsg(fx->ctx));
            sweep_fail_(f, __LINE__, file, line);
        }
        if (rule == 0 && cr_rand_tangent(fx->arena, &rng, &want, &dy) != CR_OK)
            sweep_fail_(f, __LINE__, file, line);
        for (size_t size = 64;; size += 64) {
            void *buf = malloc(size);
            cr_arena *a = NULL;
            cr_arena_params ap = {.struct_size = sizeof ap, .buffer = buf, .buffer_size = size};
            if (buf == NULL || cr_arena_new(fx->ctx, &ap, &a) != CR_OK)
                sweep_fail_(f, __LINE__, file, line);
            cr_value y;
            cr_tangent got[CR_SIG_MAX_ARGS + 1];
            cr_ctx_clear_error(fx->ctx);
            cr_status st = sweep_run_(a, rule, f, args, nargs, dargs, dy, &y, got);
            bool same = true;
            char where[256] = "";
            if (st == CR_OK && rule == 0)
                same = cr_test_approx(&want, got[0], want_t[0], 1e-13, 1e-13, where, sizeof where);
            for (size_t k = 1; st == CR_OK && rule && k <= nargs; k++)
                same = same && cr_test_approx(&args[k - 1], got[k], want_t[k], 1e-13, 1e-13, where,
                                              sizeof where);
            cr_arena_free(a);
            free(buf);
            if (st == CR_OK) {
                if (!same) {
                    print_error("%s in %zu bytes: %s\n", rule ? "rrule" : "frule", size, where);
                    sweep_fail_(f, __LINE__, file, line);
                }
                break;
            }
            const char *msg = cr_ctx_errmsg(fx->ctx);
            if (st != CR_EARENA || msg == NULL || *msg == '\0') {
                print_error("%s in %zu bytes: %s (%s) instead of CR_EARENA\n",
                            rule ? "rrule" : "frule", size, cr_status_name(st), msg ? msg : "");
                sweep_fail_(f, __LINE__, file, line);
            }
        }
    }
    cr_ctx_clear_error(fx->ctx);
}
#define assert_arena_sweep_rules(fx, f, args, nargs) \
    assert_arena_sweep_rules_((fx), (f), (args), (nargs), __FILE__, __LINE__)

#endif /* CR_TEST_OWN_FIXTURE */

/* a and b are the same double, bit for bit. */
static inline void assert_same_bits(double a, double b)
{
    if (memcmp(&a, &b, sizeof a) != 0) {
        print_error("%.17g and %.17g differ\n", a, b);
        fail();
    }
}

/* hv[0..n) (up to 16) agrees with H v of f at x0 by central differences of f's gradient
 * along v, (grad(x0 + h v) - grad(x0 - h v)) / 2h with h = 1e-5, on the first-order tape
 * u, within a relative 1e-5. */
static inline void assert_hvp_by_gradients(cr_tape *u, cr_ad_fn f, const double *x0,
                                           const double *v, size_t n, const double *hv)
{
    enum { MAX_N = 16 };
    const double h = 1e-5;
    double xp[MAX_N], xm[MAX_N], gp[MAX_N], gm[MAX_N], yv;
    assert_true(n <= MAX_N);
    for (size_t j = 0; j < n; j++) {
        xp[j] = x0[j] + h * v[j];
        xm[j] = x0[j] - h * v[j];
    }
    assert_int_equal(cr_tape_value_and_gradient(u, f, NULL, xp, n, &yv, gp), CR_OK);
    assert_int_equal(cr_tape_value_and_gradient(u, f, NULL, xm, n, &yv, gm), CR_OK);
    for (size_t j = 0; j < n; j++)
        assert_close(hv[j], (gp[j] - gm[j]) / (2 * h), 1e-5);
}

/* A tape call that must succeed; prints the tape's message when it does not. */
#define assert_ok(t, expr)                                                              \
    do {                                                                                \
        cr_status st_ = (expr);                                                         \
        if (st_ != CR_OK) {                                                             \
            print_error("%s: %s (%s)\n", #expr, cr_status_str(st_), cr_tape_errmsg(t)); \
            fail();                                                                     \
        }                                                                               \
    } while (0)

#endif /* CR_TEST_UTIL_H */
