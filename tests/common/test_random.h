/*
 * The random-program tests' generator numbers and environment (test_tape_random*.c,
 * test_dual_random.c): splitmix64, the variables that run more programs or replay one, the
 * checks of a program against its references, and uf, a user rule with an rrule and an frule.
 */
#ifndef CR_TEST_RANDOM_H
#define CR_TEST_RANDOM_H

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>

static inline uint64_t rnd_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static inline double rnd_unit(uint64_t *s) /* [0, 1) */
{
    return (double)(rnd_next(s) >> 11) * 0x1.0p-53;
}

static inline double rnd_range(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * rnd_unit(s);
}

static inline size_t rnd_below(uint64_t *s, size_t n) /* [0, n) */
{
    return (size_t)(rnd_next(s) % (uint64_t)n);
}

/* Programs to run: CR_RANDOM_PROGRAMS, or the default. */
static inline size_t programs(size_t dflt)
{
    const char *s = getenv("CR_RANDOM_PROGRAMS");
    return s != NULL && *s != '\0' ? (size_t)strtoull(s, NULL, 0) : dflt;
}

/* The number of the first program to run (CR_RANDOM_FROM, default 0): a longer run goes on
 * past the programs that earlier runs checked (CR_RANDOM_FROM=20000 CR_RANDOM_PROGRAMS=20000
 * runs programs 20000 to 39999 of each group). */
static inline size_t programs_from(void)
{
    const char *s = getenv("CR_RANDOM_FROM");
    return s != NULL && *s != '\0' ? (size_t)strtoull(s, NULL, 0) : 0;
}

/* The seed to replay alone (CR_RANDOM_SEED), or 0. */
static inline uint64_t replay_seed(void)
{
    const char *s = getenv("CR_RANDOM_SEED");
    return s != NULL && *s != '\0' ? (uint64_t)strtoull(s, NULL, 0) : 0;
}

/* ---- Checks of a program ---------------------------------------------------------------- */

/* Central differences of fourth order: offsets and weights (times 1/h). */
static const double k_fd_o[4] = {-2, -1, 1, 2};
static const double k_fd_c[4] = {1.0 / 12, -8.0 / 12, 8.0 / 12, -1.0 / 12};

/* The error of a fourth-order central difference d = D(h) (first differences, or the mixed
 * second differences), from the same stencil at 2h (d2) and at h / 2 (dh). Where the h^4
 * term rules, the error of D(h) is |D(h) - D(2h)| / 15 and also 16/15 |D(h) - D(h/2)|. The
 * larger is taken: a function that varies fast at the scale of 2h can bring D(2h) close to
 * D(h) by chance (test_tape_random_arrays' program 0x5186d5dc65565cf1: D(h) was 3.4e-3
 * from the limit, |D(h) - D(2h)| / 15 said 3.1e-4). */
static inline double fd_err4(double d, double d2, double dh)
{
    return fmax(fabs(d - d2) / 15, fabs(d - dh) * 16 / 15);
}

/* The checks of one program: the program (each test's own struct prog), its seed, the test
 * (named in the replay line), the mode being checked, and the failures so far (the first
 * four are printed). */
typedef struct ck {
    const struct prog *p;
    uint64_t seed;
    const char *test;
    const char *mode;
    int failed;
} ck;

/* One failure: "FAIL seed mode ", the message, and how to replay it. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static inline void
ck_fail(ck *c, const char *fmt, ...)
{
    if (c->failed++ >= 4)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL seed=%#" PRIx64 " mode=%s ", c->seed, c->mode);
    vprintf(fmt, ap);
    printf("\n  replay: CR_RANDOM_SEED=%#" PRIx64 " %s\n", c->seed, c->test);
    fflush(stdout); /* kept if a later check crashes */
    va_end(ap);
}

/* got against want: |got - want| <= rtol * scale + 8 err, with scale = max(1, max |want|) over
 * the vector (a derivative that is a cancellation of larger terms is compared at the scale of
 * the others). err: the reference's estimated error (NULL: 0). */
static inline void cmp_vec(ck *c, const char *what, const double *got, const double *want,
                           const double *err, size_t n, double rtol)
{
    double scale = 1;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double tol = rtol * scale + (err != NULL ? 8 * err[i] : 0);
        if (!(fabs(got[i] - want[i]) <= tol)) {
            ck_fail(c, "%s[%zu]: got %.17g want %.17g (tol %.3g)", what, i, got[i], want[i], tol);
            return;
        }
    }
}

/* A call that must succeed. */
static inline void ck_status(ck *c, const char *what, cr_status st, const char *msg)
{
    if (st != CR_OK)
        ck_fail(c, "%s: %s (%s)", what, cr_status_str(st), msg);
}

/* A refusal: status want with a message (containing sub unless sub is NULL), never a
 * number. */
static inline void ck_refused_with(ck *c, const char *what, cr_status st, cr_status want,
                                   const char *msg, const char *sub)
{
    if (st != want || msg == NULL || msg[0] == '\0' || (sub != NULL && strstr(msg, sub) == NULL))
        ck_fail(c, "%s: %s, expected %s with a message%s%s (\"%s\")", what, cr_status_str(st),
                cr_status_str(want), sub != NULL ? " containing " : "", sub != NULL ? sub : "",
                msg != NULL ? msg : "");
}

static inline void ck_refused(ck *c, const char *what, cr_status st, cr_status want,
                              const char *msg)
{
    ck_refused_with(c, what, st, want, msg, NULL);
}

/* ---- A user rule ---------------------------------------------------------------------------- */

/* A real tangent's value (0 for a zero or absent tangent). */
static inline double tan_f64(cr_tangent t)
{
    return t.tag == CR_TAN_F64 ? t.u.f64 : 0.0;
}

/* uf(a, b) = a b + sin(a): a user function with a hand-written rrule (its pullback keeps a and b
 * in the rule's arena) and frule, registered with cr_engine_from_rrule. */
static inline double uf_c(double a, double b)
{
    return a * b + sin(a);
}

static inline cr_status uf_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                                  size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(uf_c(args[0].u.f64, args[1].u.f64));
    return CR_OK;
}
static const cr_function uf_fn = {.name = "uf", .arity = 2, .primal = uf_primal};

static inline cr_status uf_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                    cr_arena *arena, void *env)
{
    (void)nx;
    (void)arena;
    const double *e = env;
    double g = dy->u.f64;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(g * (e[1] + cos(e[0])));
    dx[2] = cr_tangent_f64(g * e[0]);
    return CR_OK;
}

static inline cr_status uf_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                 const void *udata)
{
    (void)cfg;
    (void)udata;
    double *e = cr_arena_alloc(arena, 2 * sizeof *e, _Alignof(double));
    if (e == NULL)
        return CR_ENOMEM;
    e[0] = args[0].u.f64;
    e[1] = args[1].u.f64;
    *pb = (cr_pullback){uf_pullback, e, "uf_pullback", 3};
    return uf_primal(arena, fv, args, nargs, y);
}

static inline cr_status uf_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                 const cr_value *fv, const cr_value *args, size_t nargs,
                                 cr_value *y, cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    double a = args[0].u.f64, b = args[1].u.f64;
    *dy = cr_tangent_f64((b + cos(a)) * tan_f64(dargs[1]) + a * tan_f64(dargs[2]));
    return uf_primal(arena, fv, args, nargs, y);
}

#endif
