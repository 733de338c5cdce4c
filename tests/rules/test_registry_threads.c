/*
 * Thread safety of rule lookup: the first use of the built-in registry from several
 * threads at once, then a frozen user registry (over the built-ins) read concurrently by
 * threads that each own a context and an arena, running rrules, frules and pullbacks and
 * checking every result against finite differences computed beforehand.
 * Meant to run clean under ThreadSanitizer (-DCR_SANITIZE=thread).
 */
/* ctest-labels: thread */
#define _POSIX_C_SOURCE 200809L /* pthread_barrier_t */

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

#define NTHREADS 4
#define NFIRST   8
#define NITER    10000
#define NPOINTS  7
#define FD_H     1e-6
#define FD_RTOL  1e-7

/* ---- The first call to cr_registry_builtin() from several threads ----------------------- */

typedef struct first_call {
    pthread_barrier_t *barrier;
    const cr_registry *reg;
    cr_status status;
    size_t size;
} first_call;

static void *first_call_thread(void *arg)
{
    first_call *fc = arg;
    pthread_barrier_wait(fc->barrier);
    fc->reg = cr_registry_builtin();
    fc->status = cr_registry_builtin_status();
    fc->size = cr_registry_size(fc->reg);
    return NULL;
}

/* Must run first: nothing else in this program has touched the built-in registry yet. */
static void test_builtin_first_use(void **state)
{
    (void)state;
    pthread_barrier_t barrier;
    assert_int_equal(pthread_barrier_init(&barrier, NULL, NFIRST), 0);
    first_call fc[NFIRST];
    pthread_t th[NFIRST];
    for (size_t i = 0; i < NFIRST; i++) {
        fc[i] = (first_call){&barrier, NULL, CR_EINVAL, 0};
        assert_int_equal(pthread_create(&th[i], NULL, first_call_thread, &fc[i]), 0);
    }
    for (size_t i = 0; i < NFIRST; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&barrier);
    for (size_t i = 0; i < NFIRST; i++) {
        assert_non_null(fc[i].reg);
        assert_ptr_equal(fc[i].reg, fc[0].reg);
        assert_int_equal(fc[i].status, CR_OK);
        assert_int_equal(fc[i].size, fc[0].size);
    }
    assert_true(fc[0].size >= 13);
    assert_ptr_equal(cr_registry_find(fc[0].reg, "sin"), cr_fn_sin.u.func.fn);
}

/* ---- A user rule: cube(x) = x^3, with a hand-written rrule and frule ------------------- */

static cr_status cube_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                             cr_value *out)
{
    (void)arena;
    (void)f;
    (void)nargs;
    double x = args[0].u.f64;
    *out = cr_value_f64(x * x * x);
    return CR_OK;
}

static const cr_function cube_fn = {.name = "cube", .arity = 1, .primal = cube_primal};

static cr_status cube_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    const double *x = env;
    cr_tangent d;
    cr_status st = cr_tangent_unthunk(*dy, &d);
    if (st != CR_OK)
        return st;
    if (d.tag != CR_TAN_F64)
        return cr_ctx_error(cr_arena_ctx(arena), CR_ETANGENT, "cube_pullback: f64 expected");
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(3 * *x * *x * d.u.f64);
    return CR_OK;
}

static cr_status cube_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    double *x = cr_arena_alloc(arena, sizeof *x, _Alignof(double));
    if (x == NULL)
        return cr_ctx_errcode(cr_arena_ctx(arena));
    *x = args[0].u.f64;
    *pb = (cr_pullback){cube_pullback, x, "cube_pullback", nargs + 1};
    return CR_OK;
}

static cr_status cube_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    cr_tangent d;
    st = cr_tangent_unthunk(dargs[1], &d);
    if (st != CR_OK)
        return st;
    double x = args[0].u.f64;
    *dy = cr_tangent_is_zero(d) ? cr_tangent_zero() : cr_tangent_f64(3 * x * x * d.u.f64);
    return CR_OK;
}

static double cube(double x)
{
    return x * x * x;
}

static double fd1(double (*f)(double), double x)
{
    return (f(x + FD_H) - f(x - FD_H)) / (2 * FD_H);
}

/* ---- Concurrent lookups ----------------------------------------------------------------- */

typedef struct shared {
    const cr_config *cfg;
    double x[NPOINTS];
    double dsin[NPOINTS]; /* finite differences, computed before the threads start */
    double dcube[NPOINTS];
    double dexp[NPOINTS];
} shared;

typedef struct worker {
    const shared *sh;
    int id;
    long checks;
    long failures;
    char first_failure[256];
} worker;

static bool close_to(double a, double b)
{
    return fabs(a - b) <= FD_RTOL * fmax(1.0, fabs(b));
}

#define CHECK(w, cond)                                                                          \
    do {                                                                                        \
        (w)->checks++;                                                                          \
        if (!(cond)) {                                                                          \
            if ((w)->failures++ == 0)                                                           \
                snprintf((w)->first_failure, sizeof(w)->first_failure, "line %d: %s", __LINE__, \
                         #cond);                                                                \
        }                                                                                       \
    } while (0)

static void *worker_thread(void *arg)
{
    worker *w = arg;
    const shared *sh = w->sh;
    cr_ctx *ctx = NULL;
    cr_arena *arena = NULL;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_arena_new(ctx, NULL, &arena) != CR_OK) {
        w->failures++;
        snprintf(w->first_failure, sizeof w->first_failure, "no context or arena");
        cr_ctx_free(ctx);
        return NULL;
    }
    cr_ctx_set_debug(ctx, w->id % 2 == 1); /* half of them with the debug wrappers */
    const cr_value fcube = cr_value_function(&cube_fn, NULL);
    for (int it = 0; it < NITER; it++) {
        size_t k = (size_t)(it + w->id) % NPOINTS;
        cr_value x = cr_value_f64(sh->x[k]), y;
        cr_pullback pb;
        cr_tangent ybar = cr_tangent_f64(1.0), dx[2], dy;

        /* A built-in rule through the user registry. */
        CHECK(w, cr_rrule(sh->cfg, arena, &cr_fn_sin, &x, 1, &y, &pb) == CR_OK);
        CHECK(w, cr_pullback_call(arena, &pb, &ybar, dx, 2) == CR_OK);
        CHECK(w, dx[1].tag == CR_TAN_F64 && close_to(dx[1].u.f64, sh->dsin[k]));

        /* The user rule. */
        CHECK(w, cr_rrule(sh->cfg, arena, &fcube, &x, 1, &y, &pb) == CR_OK);
        CHECK(w, y.kind == CR_KIND_F64 && y.u.f64 == cube(sh->x[k]));
        CHECK(w, strcmp(pb.name, "cube_pullback") == 0);
        CHECK(w, cr_pullback_call(arena, &pb, &ybar, dx, 2) == CR_OK);
        CHECK(w, dx[1].tag == CR_TAN_F64 && close_to(dx[1].u.f64, sh->dcube[k]));
        cr_tangent dargs[2] = {cr_tangent_none(), cr_tangent_f64(-2.0)};
        CHECK(w, cr_frule(sh->cfg, arena, dargs, &fcube, &x, 1, &y, &dy) == CR_OK);
        CHECK(w, dy.tag == CR_TAN_F64 && close_to(dy.u.f64, -2.0 * sh->dcube[k]));

        /* An opt-out in the user registry, and the built-in it hides. */
        cr_value xs = cr_value_f32((float)sh->x[k]);
        CHECK(w, cr_rrule(sh->cfg, arena, &cr_fn_exp, &xs, 1, &y, &pb) == CR_NOTHING);
        CHECK(w, cr_rrule(NULL, arena, &cr_fn_exp, &xs, 1, &y, &pb) == CR_OK);
        CHECK(w, cr_frule(sh->cfg, arena, dargs, &cr_fn_exp, &x, 1, &y, &dy) == CR_OK);
        CHECK(w, dy.tag == CR_TAN_F64 && close_to(dy.u.f64, -2.0 * sh->dexp[k]));

        /* Lookups that find nothing, and lookups by name. */
        CHECK(w, cr_registry_find(sh->cfg->registry, "cube") == &cube_fn);
        CHECK(w, cr_rrule(NULL, arena, &fcube, &x, 1, &y, &pb) == CR_NOTHING);

        if (it % 64 == 63)
            cr_arena_reset(arena);
    }
    cr_arena_free(arena);
    cr_ctx_free(ctx);
    return NULL;
}

static void test_concurrent_lookup(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_registry *reg;
    assert_int_equal(cr_registry_new(ctx, NULL, &reg), CR_OK);
    const cr_argspec s_f64[1] = {CR_ARG_F64}, s_f32[1] = {CR_ARG_F32};
    cr_rule_def d = {0};
    d.fn = &cube_fn;
    d.nargs = 1;
    d.args = s_f64;
    d.rrule = cube_rrule;
    d.frule = cube_frule;
    assert_int_equal(cr_registry_add(reg, &d), CR_OK);
    assert_int_equal(
        cr_registry_opt_out(reg, CR_MODE_RRULE, cr_fn_exp.u.func.fn, s_f32, 1, false, 0), CR_OK);
    assert_int_equal(cr_registry_freeze(reg), CR_OK);
    const cr_config cfg = {.registry = reg};

    shared sh;
    sh.cfg = &cfg;
    for (size_t k = 0; k < NPOINTS; k++) {
        sh.x[k] = -1.5 + 0.5 * (double)k;
        sh.dsin[k] = fd1(sin, sh.x[k]);
        sh.dcube[k] = fd1(cube, sh.x[k]);
        sh.dexp[k] = fd1(exp, sh.x[k]);
    }

    worker w[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){.sh = &sh, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, worker_thread, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < NTHREADS; i++) {
        if (w[i].failures != 0)
            print_error("thread %d: %ld failures, first: %s\n", i, w[i].failures,
                        w[i].first_failure);
        assert_int_equal(w[i].failures, 0);
        assert_true(w[i].checks >= (long)NITER * 16);
    }
    cr_registry_free(reg);
    cr_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_first_use), /* first: see the comment there */
        cmocka_unit_test(test_concurrent_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
