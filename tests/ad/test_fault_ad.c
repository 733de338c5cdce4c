/*
 * Fault injection over the AD engines (the method of test_fault.c: Lua's
 * Memcontrol.failnext, SQLite's OOM tests). Each scenario goes through one engine path:
 * the scalar tape with a user rrule, forward mode with duals, second order, array
 * variables, fused kernels, second-order array forms, user functions through the engine's
 * RuleConfig, prepared gradients (and H v through rules kept as pullbacks) and friendly
 * tangents. A scenario has a setup (contexts,
 * registries, engines, tapes, arenas, prepared gradients) and a run (recordings and sweeps
 * on those objects, whose numbers are collected). It is run
 *  (a) in a context whose allocation hook fails the N-th allocation, for N = 1, 2, ...
 *      until the scenario succeeds: every failing run returns CR_ENOMEM (a tape operation's
 *      failure is also the tape's sticky status), the same objects then redo the run once
 *      memory is back and give the reference numbers (those of a run without failure)
 *      exactly, and once everything is freed no block is live;
 *  (b) where the API takes caller memory (cr_tape_params.buffer, cr_arena_params.buffer),
 *      in buffers of growing size until the scenario succeeds: every failure is CR_EARENA,
 *      the first size that suffices gives the reference numbers exactly, nothing leaks.
 * A run that returns CR_OK although an allocation failed (a fallback) must give the
 * reference numbers exactly too. The reference numbers themselves are checked against
 * central differences of the same functions in plain C (derivatives) or against the plain
 * functions (values).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>
#include <chainrules/kernel.h>
#include <chainrules/tape_inline.h>

#define CR_TEST_OWN_FIXTURE
#include "test_util.h"

#include "test_cube.h"
#include "test_fault_hook.h"
#include "test_wave.h"

/* ---- what a run computes ---------------------------------------------------------------- */

enum { OUT_MAX = 1024 };

typedef struct outv {
    size_t n;
    size_t nput; /* results put: a failing run stopped in stage nput */
    double v[OUT_MAX];
} outv;

static void put(outv *o, const double *v, size_t n)
{
    assert_true(o->n + n <= OUT_MAX);
    memcpy(o->v + o->n, v, n * sizeof *v);
    o->n += n;
    o->nput++;
}

static void put1(outv *o, double v)
{
    put(o, &v, 1);
}

/* ---- the objects of a scenario ----------------------------------------------------------- */

enum { MAX_TAPES = 3, MAX_ARENAS = 2, MAX_PREP = 3 };

typedef struct sstate {
    cr_ctx *ctx;
    unsigned char *buf; /* caller memory (fixed-buffer runs), or NULL */
    size_t slice;       /* bytes of buf per tape or arena that takes caller memory */
    size_t nslices;     /* slices handed out */
    cr_registry *reg;
    cr_engine *eng;
    cr_tape *tape[MAX_TAPES];
    uint32_t tape_flags[MAX_TAPES];
    size_t ntapes;
    cr_arena *arena[MAX_ARENAS];
    size_t narenas;
    cr_prepared *prep[MAX_PREP];
    size_t nprep;
} sstate;

/* Free in reverse order of dependence: prepared gradients and tapes use the engine, which
 * uses the registry. */
static void teardown(sstate *s)
{
    for (size_t i = 0; i < s->nprep; i++)
        cr_prepared_free(s->prep[i]);
    for (size_t i = 0; i < s->ntapes; i++)
        cr_tape_free(s->tape[i]);
    for (size_t i = 0; i < s->narenas; i++)
        cr_arena_free(s->arena[i]);
    cr_engine_free(s->eng);
    cr_registry_free(s->reg);
    cr_ctx *ctx = s->ctx;
    unsigned char *buf = s->buf;
    size_t slice = s->slice;
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->buf = buf;
    s->slice = slice;
}

static unsigned char *next_slice(sstate *s)
{
    if (s->buf == NULL)
        return NULL;
    return s->buf + s->slice * s->nslices++;
}

/* First block size of the growable tapes' and arenas' arenas: the failure points move with
 * it, so the hook runs go through several. */
static size_t g_block = 2048;
static const size_t k_blocks[] = {32,    48,    64,    96,    128,   160,   200,   256,   320,
                                  400,   512,   640,   800,   1024,  1280,  1600,  2048,  2560,
                                  3200,  4096,  5120,  6400,  8192,  10240, 12800, 16384, 20480,
                                  25600, 32768, 40960, 51200, 65536, 98304, 131072};

/* The stages where failing runs stopped: k after the k-th result of the run, 63 in the
 * setup. */
static uint64_t g_stages;

static void stage_seen(size_t k)
{
    g_stages |= (uint64_t)1 << (k < 63 ? k : 63);
}

static size_t popcount64(uint64_t x)
{
    size_t c = 0;
    for (; x != 0; x &= x - 1)
        c++;
    return c;
}

static cr_status new_tape(sstate *s, uint32_t flags, cr_tape **out)
{
    assert_true(s->ntapes < MAX_TAPES);
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags, .engine = s->eng};
    tp.buffer = next_slice(s);
    if (tp.buffer != NULL)
        tp.buffer_size = s->slice;
    else
        tp.block_size = g_block;
    cr_status st = cr_tape_new(s->ctx, &tp, out);
    if (st == CR_OK)
        s->tape_flags[s->ntapes] = flags, s->tape[s->ntapes++] = *out;
    else
        assert_null(*out);
    return st;
}

static cr_status new_arena(sstate *s, cr_arena **out)
{
    assert_true(s->narenas < MAX_ARENAS);
    cr_arena_params ap = {.struct_size = sizeof ap};
    ap.buffer = next_slice(s);
    if (ap.buffer != NULL)
        ap.buffer_size = s->slice;
    else
        ap.block_size = g_block;
    cr_status st = cr_arena_new(s->ctx, &ap, out);
    if (st == CR_OK)
        s->arena[s->narenas++] = *out;
    else
        assert_null(*out);
    return st;
}

static cr_status new_engine(sstate *s)
{
    cr_status st = cr_engine_new(s->ctx, s->reg, &s->eng);
    if (st != CR_OK)
        assert_null(s->eng);
    return st;
}

/* The scenario and the failure of the current run, for messages. */
static const char *g_name;
static char g_where[96];

#define TRY(expr)                   \
    do {                            \
        cr_status try_st_ = (expr); \
        if (try_st_ != CR_OK)       \
            return try_st_;         \
    } while (0)

/* A tape operation: a failure must also be the tape's sticky status, with a message. */
#define TRYT(t, expr)                                                                             \
    do {                                                                                          \
        cr_status try_st_ = (expr);                                                               \
        if (try_st_ != CR_OK) {                                                                   \
            if (cr_tape_status(t) != try_st_ || cr_tape_errmsg(t)[0] == '\0') {                   \
                print_error("%s, %s: %s gave %s (%s), the tape has %s\n", g_name, g_where, #expr, \
                            cr_status_name(try_st_), cr_ctx_errmsg(cr_tape_ctx(t)),               \
                            cr_status_name(cr_tape_status(t)));                                   \
                fail();                                                                           \
            }                                                                                     \
            return try_st_;                                                                       \
        }                                                                                         \
    } while (0)

/* ---- running a scenario ----------------------------------------------------------------- */

typedef struct scenario {
    const char *name;
    const char *fixed_name; /* the caller-buffer variant, or NULL when there is none */
    cr_status (*setup)(sstate *s);
    cr_status (*run)(sstate *s, outv *o);
    void (*check_ref)(const outv *o); /* the reference against plain C */
    size_t nslices;                   /* tapes and arenas taking caller memory */
} scenario;

static void same_numbers(const scenario *sc, const char *when, size_t n, const outv *got,
                         const outv *want)
{
    if (got->n != want->n) {
        print_error("%s, %s %zu: %zu numbers instead of %zu\n", sc->name, when, n, got->n, want->n);
        fail();
    }
    for (size_t i = 0; i < want->n; i++)
        if (!(got->v[i] == want->v[i]) && !(isnan(got->v[i]) && isnan(want->v[i]))) {
            print_error("%s, %s %zu: number %zu is %.17g instead of %.17g\n", sc->name, when, n, i,
                        got->v[i], want->v[i]);
            fail();
        }
}

static void no_leak(const scenario *sc, const char *when, size_t n, const fault *fl)
{
    if (fl->live_blocks != 0 || fl->live_bytes != 0 || fl->bad_frees != 0) {
        print_error("%s, %s %zu: %zu blocks (%zu bytes) leaked, %zu bad frees\n", sc->name, when, n,
                    fl->live_blocks, fl->live_bytes, fl->bad_frees);
        fail();
    }
}

static void expect_status(const scenario *sc, const char *when, size_t n, cr_status st,
                          cr_status want)
{
    if (st != want) {
        print_error("%s, %s %zu: %s instead of %s\n", sc->name, when, n, cr_status_name(st),
                    cr_status_name(want));
        fail();
    }
}

static outv g_ref, g_got;

/* The reference: setup and run without failure, in a context with the tracking hook. */
static void reference(const scenario *sc, fault *fl)
{
    arm(fl, 0);
    snprintf(g_where, sizeof g_where, "reference run");
    cr_ctx_params p = {.struct_size = sizeof p, .realloc_fn = fault_realloc, .alloc_env = fl};
    sstate s = {0};
    assert_int_equal(cr_ctx_new(&p, &s.ctx), CR_OK);
    memset(&g_ref, 0, sizeof g_ref);
    cr_status st = sc->setup(&s);
    if (st == CR_OK)
        st = sc->run(&s, &g_ref);
    if (st != CR_OK)
        print_error("%s: %s (%s)\n", sc->name, cr_status_name(st), cr_ctx_errmsg(s.ctx));
    assert_int_equal(st, CR_OK);
    /* A second run on the same objects gives the same numbers. */
    memset(&g_got, 0, sizeof g_got);
    assert_int_equal(sc->run(&s, &g_got), CR_OK);
    same_numbers(sc, "second run", 0, &g_got, &g_ref);
    teardown(&s);
    cr_ctx_free(s.ctx);
    no_leak(sc, "reference run", 0, fl);
    if (sc->check_ref != NULL)
        sc->check_ref(&g_ref);
}

/* A run that succeeded leaves no error on its context (it starts with none): an attempt
 * that failed and was made good another way must not leave its status behind. */
static void clean_ctx(const scenario *sc, const char *when, size_t n, const cr_ctx *ctx)
{
    if (cr_ctx_errcode(ctx) != CR_OK) {
        print_error("%s, %s %zu: succeeded, but the context has %s (%s)\n", sc->name, when, n,
                    cr_status_name(cr_ctx_errcode(ctx)), cr_ctx_errmsg(ctx));
        fail();
    }
}

/* One run with the n-th allocation failing; returns the status of the first attempt. */
static cr_status run_once(const scenario *sc, fault *fl, size_t n, bool *fallback)
{
    arm(fl, n);
    snprintf(g_where, sizeof g_where, "allocation %zu failing, blocks of %zu bytes", n, g_block);
    cr_ctx_params p = {.struct_size = sizeof p, .realloc_fn = fault_realloc, .alloc_env = fl};
    sstate s = {0};
    cr_status st = cr_ctx_new(&p, &s.ctx);
    if (st != CR_OK) {
        assert_null(s.ctx);
        return st;
    }
    memset(&g_got, 0, sizeof g_got);
    cr_status first = sc->setup(&s);
    if (first != CR_OK) {
        expect_status(sc, "setup, allocation", n, first, CR_ENOMEM);
        stage_seen(63);
        assert_int_equal(cr_ctx_errcode(s.ctx), CR_ENOMEM);
        /* With memory back, the same context sets up and runs. */
        fl->fail_at = 0;
        teardown(&s);
        cr_ctx_clear_error(s.ctx);
        assert_int_equal(sc->setup(&s), CR_OK);
        assert_int_equal(sc->run(&s, &g_got), CR_OK);
        same_numbers(sc, "setup again after allocation", n, &g_got, &g_ref);
    } else {
        first = sc->run(&s, &g_got);
        if (first != CR_OK) {
            expect_status(sc, "allocation", n, first, CR_ENOMEM);
            stage_seen(g_got.nput);
            /* Sticky on every tape that failed, with the allocation status. */
            for (size_t i = 0; i < s.ntapes; i++) {
                cr_status ts = cr_tape_status(s.tape[i]);
                if (ts != CR_OK)
                    expect_status(sc, "tape status, allocation", n, ts, CR_ENOMEM);
            }
            /* The same objects redo the work once memory is back. */
            fl->fail_at = 0;
            cr_ctx_clear_error(s.ctx);
            memset(&g_got, 0, sizeof g_got);
            cr_status again = sc->run(&s, &g_got);
            if (again != CR_OK)
                print_error("%s, run again after allocation %zu: %s (%s)\n", sc->name, n,
                            cr_status_name(again), cr_ctx_errmsg(s.ctx));
            assert_int_equal(again, CR_OK);
            same_numbers(sc, "run again after allocation", n, &g_got, &g_ref);
        } else {
            /* Succeeded: either the n-th allocation was never reached, or a fallback. */
            *fallback = fl->failures != 0;
            same_numbers(sc, "allocation", n, &g_got, &g_ref);
            clean_ctx(sc, "allocation", n, s.ctx);
        }
    }
    teardown(&s);
    cr_ctx_free(s.ctx);
    return first;
}

/* All the allocations of the scenario, each failing in turn, with blocks of g_block bytes;
 * returns how many runs failed. */
static size_t run_blocks(const scenario *sc, fault *fl)
{
    size_t n, failed = 0, fallbacks = 0;
    for (n = 1; n < 20000; n++) {
        bool fallback = false;
        cr_status st = run_once(sc, fl, n, &fallback);
        no_leak(sc, "allocation", n, fl);
        if (st == CR_OK && !fallback)
            break; /* the n-th allocation was never reached */
        if (st == CR_OK) {
            fallbacks++;
            continue;
        }
        expect_status(sc, "allocation", n, st, CR_ENOMEM);
        assert_int_equal(fl->failures, 1);
        failed++;
    }
    assert_true(n < 20000);
    assert_true(failed >= 3);
    assert_int_equal(failed + fallbacks, n - 1);
    return failed;
}

static void run_scenario(const scenario *sc)
{
    fault *fl = new_tracker();
    g_name = sc->name;
    g_block = 2048;
    reference(sc, fl);
    g_stages = 0;
    /* Without tapes or arenas of its own (nslices 0), one block size is enough. */
    size_t failed = 0, nb = sc->nslices == 0 ? 1 : sizeof k_blocks / sizeof k_blocks[0];
    for (size_t b = 0; b < nb; b++) {
        g_block = k_blocks[b];
        failed += run_blocks(sc, fl);
    }
    print_message("%s: %zu failing allocations over %zu block sizes, stopping %zu of %zu "
                  "stages (%#llx)\n",
                  sc->name, failed, nb, popcount64(g_stages), g_ref.nput + 1,
                  (unsigned long long)g_stages);
}

/* A small recording and its gradient after a reset: value, derivative and status. */
static void tiny(cr_tape *t, double out[3])
{
    cr_tape_reset(t);
    cr_var x = cr_tape_input(t, 0.7);
    cr_var y = cr_add(t, cr_mul(t, x, cr_sin(t, x)), cr_exp(t, x));
    double g = 0;
    cr_status st = cr_tape_status(t);
    if (st == CR_OK)
        st = cr_tape_gradient(t, y, &x, 1, &g);
    out[0] = y.v;
    out[1] = g;
    out[2] = (double)st;
}

/* A tape whose caller memory was full is reset and used again: it must behave as a new
 * tape in the same memory (the same status and numbers for a small recording). */
static size_t g_reused; /* tapes that recorded again after their failure */

static void check_usable(const scenario *sc, sstate *s)
{
    for (size_t i = 0; i < s->ntapes; i++) {
        double again[3], fresh[3];
        tiny(s->tape[i], again);
        g_reused += again[2] == (double)CR_OK;
        unsigned char *mem = malloc(s->slice);
        assert_non_null(mem);
        cr_tape_params tp = {.struct_size = sizeof tp,
                             .flags = s->tape_flags[i],
                             .buffer = mem,
                             .buffer_size = s->slice};
        cr_tape *t;
        assert_int_equal(cr_tape_new(s->ctx, &tp, &t), CR_OK);
        tiny(t, fresh);
        cr_tape_free(t);
        free(mem);
        if (memcmp(again, fresh, sizeof again) != 0) {
            print_error("%s, %s: tape %zu after its failure gives %g %g (%s), a new one %g %g "
                        "(%s)\n",
                        sc->fixed_name, g_where, i, again[0], again[1],
                        cr_status_name((cr_status)again[2]), fresh[0], fresh[1],
                        cr_status_name((cr_status)fresh[2]));
            fail();
        }
    }
}

/* Caller memory of growing size, split in sc->nslices equal slices: every failure must be
 * CR_EARENA, the tapes that failed work again after a reset, the first size that suffices
 * gives the reference, nothing leaks. */
static void run_scenario_fixed(const scenario *sc)
{
    fault *fl = new_tracker();
    g_name = sc->fixed_name;
    reference(sc, fl);
    g_reused = 0;
    g_stages = 0;
    size_t failed = 0, slice, runs = 0;
    bool done = false;
    for (slice = 256; slice < ((size_t)1 << 24) && !done;
         slice += 16 + (slice / 1024 & ~(size_t)15)) {
        arm(fl, 0);
        snprintf(g_where, sizeof g_where, "caller memory of %zu bytes per slice", slice);
        cr_ctx_params p = {.struct_size = sizeof p, .realloc_fn = fault_realloc, .alloc_env = fl};
        sstate s = {0};
        assert_int_equal(cr_ctx_new(&p, &s.ctx), CR_OK);
        s.buf = malloc(slice * sc->nslices);
        assert_non_null(s.buf);
        s.slice = slice;
        memset(&g_got, 0, sizeof g_got);
        cr_status st = sc->setup(&s);
        bool in_setup = st != CR_OK;
        if (st == CR_OK)
            st = sc->run(&s, &g_got);
        runs++;
        if (st == CR_OK) {
            same_numbers(sc, "slices of", slice, &g_got, &g_ref);
            clean_ctx(sc, "slices of", slice, s.ctx);
            done = true;
        } else {
            expect_status(sc, "slices of", slice, st, CR_EARENA);
            for (size_t i = 0; i < s.ntapes; i++) {
                cr_status ts = cr_tape_status(s.tape[i]);
                if (ts != CR_OK)
                    expect_status(sc, "tape status, slices of", slice, ts, CR_EARENA);
            }
            stage_seen(in_setup ? 63 : g_got.nput);
            check_usable(sc, &s);
            failed++;
        }
        unsigned char *buf = s.buf;
        teardown(&s);
        cr_ctx_free(s.ctx);
        free(buf);
        no_leak(sc, "slices of", slice, fl);
    }
    assert_true(done);
    print_message("%s: %zu sizes failed (up to %zu bytes per slice), stopping %zu of %zu stages "
                  "(%#llx); %zu tapes reset and used again\n",
                  sc->fixed_name, failed, slice, popcount64(g_stages), g_ref.nput + 1,
                  (unsigned long long)g_stages, g_reused);
    assert_true(failed >= 3);
}

/* ---- plain-C checks of the references ---------------------------------------------------- */

/* Central difference of f along coordinate i, step scaled to x[i]. */
static double fd1(double (*f)(const double *x, size_t n), double *x, size_t n, size_t i)
{
    double xi = x[i], h = 1e-6 * fmax(1.0, fabs(xi));
    x[i] = xi + h;
    double fp = f(x, n);
    x[i] = xi - h;
    double fm = f(x, n);
    x[i] = xi;
    return (fp - fm) / (2 * h);
}

static void point(double *x, size_t n, double phase)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.4 + 0.5 * sin(1.3 * (double)i + phase);
}

/* ---- a user rrule: cube(x) = x^3 (test_cube.h), registered ---------------------------- */

static cr_status add_cube_rule(sstate *s)
{
    TRY(cr_registry_new(s->ctx, NULL, &s->reg));
    static const cr_argspec a1[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &cube_fn, .nargs = 1, .args = a1, .rrule = cube_rrule};
    return cr_registry_add(s->reg, &def);
}

/* ---- scalar tape: rows, a user rrule, gradient, vjp, Jacobian, reset -------------------- */

/* Inputs: several hundred variables, sweeps beyond the stack's 64; the recording after the
 * reset is larger (it needs more memory than the first). */
enum { SN = 40, SN2 = 90 };

/* y0 = sum_i sin(x_i) exp(x_{i+1}) + cube(x_i) / 4,  y1 = sum_i x_i cube(x_{i+1}) - x_i */
static double s0_c(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i + 1 < n; i++)
        s += sin(x[i]) * exp(x[i + 1]) + x[i] * x[i] * x[i] / 4;
    return s;
}

static double s1_c(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i + 1 < n; i++)
        s += x[i] * x[i + 1] * x[i + 1] * x[i + 1] - x[i];
    return s;
}

static cr_status scalar_f(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_value cube = cr_value_function(&cube_fn, NULL);
    cr_var a = cr_const(0), b = cr_const(0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var c = cr_tape_call1(t, &cube, &x[i], 1), d = cr_tape_call1(t, &cube, &x[i + 1], 1);
        a = cr_add(
            t, a,
            cr_add(t, cr_mul(t, cr_sin(t, x[i]), cr_exp(t, x[i + 1])), cr_div(t, c, cr_const(4))));
        b = cr_add(t, b, cr_sub(t, cr_mul(t, x[i], d), x[i]));
    }
    y[0] = a;
    y[1] = b;
    return cr_tape_status(t);
}

static cr_status scalar_setup(sstate *s)
{
    TRY(add_cube_rule(s));
    TRY(new_engine(s));
    cr_tape *t;
    return new_tape(s, 0, &t);
}

static cr_status scalar_run(sstate *s, outv *o)
{
    cr_tape *t = s->tape[0];
    double x[SN], g[SN], jac[2 * SN], ybar[2] = {0.5, -2.0};
    cr_var xs[SN], ys[2];
    point(x, SN, 0.0);
    TRYT(t, cr_tape_record(t, scalar_f, NULL, x, SN, xs, ys, 2));
    put1(o, ys[0].v);
    put1(o, ys[1].v);
    TRYT(t, cr_tape_gradient(t, ys[0], xs, SN, g));
    put(o, g, SN);
    TRYT(t, cr_tape_vjp(t, ys, ybar, 2, xs, SN, g));
    put(o, g, SN);
    TRYT(t, cr_tape_jacobian(t, ys, 2, xs, SN, jac));
    put(o, jac, 2 * SN);
    /* Reset, record a larger function at another point, gradient again. */
    double x2[SN2], g2[SN2];
    cr_var xs2[SN2];
    cr_tape_reset(t);
    point(x2, SN2, 1.0);
    TRYT(t, cr_tape_inputs(t, x2, SN2, xs2));
    TRYT(t, scalar_f(t, xs2, SN2, ys, 2, NULL));
    put1(o, ys[1].v);
    TRYT(t, cr_tape_gradient(t, ys[1], xs2, SN2, g2));
    put(o, g2, SN2);
    return CR_OK;
}

static void scalar_check(const outv *o)
{
    double x[SN];
    point(x, SN, 0.0);
    assert_close(o->v[0], s0_c(x, SN), 1e-14);
    assert_close(o->v[1], s1_c(x, SN), 1e-14);
    const double *g = o->v + 2, *vjp = g + SN, *jac = vjp + SN, *g2 = jac + 2 * SN + 1;
    for (size_t i = 0; i < SN; i++) {
        double d0 = fd1(s0_c, x, SN, i), d1 = fd1(s1_c, x, SN, i);
        assert_close(g[i], d0, 1e-7);
        assert_close(jac[i], d0, 1e-7);
        assert_close(jac[SN + i], d1, 1e-7);
        assert_close(vjp[i], 0.5 * d0 - 2.0 * d1, 1e-7);
    }
    double x2[SN2];
    point(x2, SN2, 1.0);
    assert_close(g2[-1], s1_c(x2, SN2), 1e-14);
    for (size_t i = 0; i < SN2; i++)
        assert_close(g2[i], fd1(s1_c, x2, SN2, i), 1e-7);
}

/* ---- forward mode: jvp and Jacobian by chunks, frule_via_ad of an overlay ------------------ */

/* mix(a, b) = a sin(b) + b */
static cr_status mix_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(args[0].u.f64 * sin(args[1].u.f64) + args[1].u.f64);
    return CR_OK;
}
static const cr_function mix_fn = {.name = "mix", .arity = 2, .primal = mix_primal};

static cr_status mix_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_add(t, cr_mul(t, x[0], cr_sin(t, x[1])), x[1]);
    return cr_tape_status(t);
}

enum { FN = 40 }; /* 40 + 2 duals: beyond the 32 on the stack, scratch from the arena */

typedef struct dual_env {
    const cr_config *cfg;
    cr_arena *arena;
} dual_env;

/* w0 = sum_i sin(x_i) x_{i+1} + wave(x_0),  w1 = sqrt(sum x_i^2) / (1 + exp(x_0)) */
static double w0_c(const double *x, size_t n)
{
    double s = x[0] * sin(x[0]);
    for (size_t i = 0; i + 1 < n; i++)
        s += sin(x[i]) * x[i + 1];
    return s;
}

static double w1_c(const double *x, size_t n)
{
    double q = 0;
    for (size_t i = 0; i < n; i++)
        q += x[i] * x[i];
    return sqrt(q) / (1.0 + exp(x[0]));
}

static cr_status w_dual(const cr_dual *x, size_t n, cr_dual *y, size_t m, void *envp)
{
    (void)m;
    const dual_env *e = envp;
    cr_value wave = cr_value_function(&wave_fn, NULL);
    cr_dual s, q = cr_dual_const(0.0);
    TRY(cr_dual_call(e->cfg, e->arena, &wave, &x[0], 1, &s, 1));
    for (size_t i = 0; i + 1 < n; i++)
        s = cr_dual_add(s, cr_dual_mul(cr_dual_sin(x[i]), x[i + 1]));
    for (size_t i = 0; i < n; i++)
        q = cr_dual_add(q, cr_dual_mul(x[i], x[i]));
    y[0] = s;
    y[1] = cr_dual_div(cr_dual_sqrt(q), cr_dual_add(cr_dual_const(1.0), cr_dual_exp(x[0])));
    return CR_OK;
}

static cr_status dual_setup(sstate *s)
{
    TRY(new_engine(s));
    TRY(cr_engine_overlay(s->eng, &wave_fn, wave_ad, 1, NULL));
    cr_arena *a;
    TRY(new_arena(s, &a));   /* the duals' scratch */
    return new_arena(s, &a); /* the rules' (frule_via_ad records a sub-tape there) */
}

static cr_status dual_run(sstate *s, outv *o)
{
    double x[FN], v[FN], y[2], jv[2], jac[2 * FN];
    point(x, FN, 0.5);
    for (size_t i = 0; i < FN; i++)
        v[i] = cos(0.7 * (double)i);
    cr_arena_reset(s->arena[0]);
    cr_arena_reset(s->arena[1]);
    dual_env e = {cr_engine_config(s->eng), s->arena[1]};
    TRY(cr_dual_jvp(w_dual, &e, x, FN, v, 2, s->arena[0], y, jv));
    put(o, y, 2);
    put(o, jv, 2);
    TRY(cr_dual_jacobian(w_dual, &e, x, FN, 2, s->arena[0], y, jac));
    put(o, jac, 2 * FN);
    return CR_OK;
}

static void dual_check(const outv *o)
{
    double x[FN], jv0 = 0, jv1 = 0;
    point(x, FN, 0.5);
    assert_close(o->v[0], w0_c(x, FN), 1e-14);
    assert_close(o->v[1], w1_c(x, FN), 1e-14);
    for (size_t i = 0; i < FN; i++) {
        double d0 = fd1(w0_c, x, FN, i), d1 = fd1(w1_c, x, FN, i);
        assert_close(o->v[4 + i], d0, 1e-7);
        assert_close(o->v[4 + FN + i], d1, 1e-7);
        jv0 += d0 * cos(0.7 * (double)i);
        jv1 += d1 * cos(0.7 * (double)i);
    }
    assert_close(o->v[2], jv0, 1e-6);
    assert_close(o->v[3], jv1, 1e-6);
}

/* ---- second order: cr_tape_hvp and cr_tape_hessian ------------------------------------- */

enum { HN = 12 };

/* sum_i sin(x_i) exp(x_{i+1}) + x_i^2 / (1 + x_{i+1}^2) + sqrt(1 + x_i^2) */
static double h_c(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i + 1 < n; i++)
        s += sin(x[i]) * exp(x[i + 1]) + x[i] * x[i] / (1 + x[i + 1] * x[i + 1]) +
             sqrt(1 + x[i] * x[i]);
    return s;
}

static cr_status h_f(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_mul(t, cr_sin(t, x[i]), cr_exp(t, x[i + 1]));
        cr_var b =
            cr_div(t, cr_mul(t, x[i], x[i]), cr_add(t, cr_const(1), cr_mul(t, x[i + 1], x[i + 1])));
        cr_var c = cr_sqrt(t, cr_add(t, cr_const(1), cr_mul(t, x[i], x[i])));
        s = cr_add(t, s, cr_add(t, a, cr_add(t, b, c)));
    }
    y[0] = s;
    return cr_tape_status(t);
}

/* h_c plus, every third i, cube(x_i) + hypot(x_i, x_{i+1}, 1), plus hypot(x_0, ..., x_4, 1):
 * rules kept as pullbacks, whose second derivatives come from differences of their partials
 * (the rules called again), the last one of more variable arguments than a row has */
static double h2_c(const double *x, size_t n)
{
    double s = h_c(x, n), q = 1;
    for (size_t i = 0; i + 1 < n; i += 3)
        s += x[i] * x[i] * x[i] + sqrt(x[i] * x[i] + x[i + 1] * x[i + 1] + 1);
    for (size_t i = 0; i < 5; i++)
        q += x[i] * x[i];
    return s + sqrt(q);
}

static cr_status h2_f(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    if (h_f(t, x, n, y, m, env) != CR_OK)
        return cr_tape_status(t);
    cr_value cube = cr_value_function(&cube_fn, NULL);
    for (size_t i = 0; i + 1 < n; i += 3) {
        cr_var h[3] = {x[i], x[i + 1], cr_const(1)};
        cr_var c = cr_tape_call1(t, &cube, &x[i], 1);
        y[0] = cr_add(t, y[0], cr_add(t, c, cr_tape_call1(t, &cr_fn_hypot, h, 3)));
    }
    cr_var h6[6] = {x[0], x[1], x[2], x[3], x[4], cr_const(1)};
    y[0] = cr_add(t, y[0], cr_tape_call1(t, &cr_fn_hypot, h6, 6));
    return cr_tape_status(t);
}

static cr_status second_setup(sstate *s)
{
    TRY(add_cube_rule(s));
    TRY(new_engine(s));
    cr_tape *t;
    return new_tape(s, CR_TAPE_SECOND_ORDER, &t);
}

static void direction(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = cos(0.9 * (double)i + 0.2);
}

static cr_status second_run(sstate *s, outv *o)
{
    cr_tape *t = s->tape[0];
    double x[HN], v[HN], hv[HN], g[HN], H[HN * HN];
    cr_var xs[HN], y;
    point(x, HN, 0.3);
    direction(v, HN);
    TRYT(t, cr_tape_record(t, h2_f, NULL, x, HN, xs, &y, 1));
    put1(o, y.v);
    TRYT(t, cr_tape_hvp(t, y, xs, HN, v, hv, g));
    put(o, hv, HN);
    put(o, g, HN);
    TRYT(t, cr_tape_hessian(t, y, xs, HN, H));
    put(o, H, HN * HN);
    return CR_OK;
}

/* The gradient of h2_c, by central differences, and H v by central differences of that
 * gradient along v would need third differences of h2_c: the Hessian's columns by central
 * differences of the analytic gradient are not allowed either, so H is checked against
 * second central differences of h2_c itself. */
static double h_second(double (*f)(const double *x, size_t n), double *x, size_t i, size_t j)
{
    double hi = 1e-4, hj = 1e-4, xi = x[i], xj = x[j], y[4];
    const int si[4] = {1, 1, -1, -1}, sj[4] = {1, -1, 1, -1};
    for (int k = 0; k < 4; k++) {
        x[i] = xi + si[k] * hi;
        x[j] = (i == j ? x[i] : xj) + sj[k] * hj;
        y[k] = f(x, HN);
        x[i] = xi;
        x[j] = xj;
    }
    return (y[0] - y[1] - y[2] + y[3]) / (4 * hi * hj);
}

static void second_check(const outv *o)
{
    double x[HN], v[HN];
    point(x, HN, 0.3);
    direction(v, HN);
    assert_close(o->v[0], h2_c(x, HN), 1e-14);
    const double *hv = o->v + 1, *g = hv + HN, *H = g + HN;
    for (size_t i = 0; i < HN; i++) {
        assert_close(g[i], fd1(h2_c, x, HN, i), 1e-7);
        double want = 0;
        for (size_t j = 0; j < HN; j++) {
            double hij = h_second(h2_c, x, i, j);
            ASSERT_CLOSE(H[i * HN + j], hij, 1e-5);
            want += H[i * HN + j] * v[j];
        }
        ASSERT_CLOSE(hv[i], want, 1e-12);
    }
}

/* ---- array variables: broadcast, matmul, sum, sum(sin, X), gradient and vjp ------------ */

enum { AN = 30, AM = 4 };

/* y = sum((A (s .* sin.(X))).^2) + s sum(sin, X) + prod(X[0:4]) */
static double arr_c(const double *z, size_t len)
{
    (void)len;
    const double s = z[0], *X = z + 1, *A = z + 1 + AN;
    double y = 0, ss = 0;
    for (size_t r = 0; r < AM; r++) {
        double w = 0;
        for (size_t c = 0; c < AN; c++)
            w += A[r * AN + c] * s * sin(X[c]);
        y += w * w;
    }
    for (size_t c = 0; c < AN; c++)
        ss += sin(X[c]);
    return y + s * ss + X[0] * X[1] * X[2] * X[3];
}

static cr_var arr_t(cr_tape *t, cr_var s, cr_avar X, cr_avar A, cr_avar *W)
{
    cr_value sinv = cr_value_function(cr_fn_sin.u.func.fn, NULL);
    cr_avar Z = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s),
                                 cr_targ_arr(cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(X))));
    *W = cr_av_matmul(t, A, Z);
    cr_var y1 = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(*W)));
    cr_targ sargs[2] = {cr_targ_value(sinv), cr_targ_arr(X)};
    cr_var y2 = cr_tape_acall_s(t, &cr_fn_sum, sargs, 2); /* its pullback gives a thunk */
    cr_targ pargs[1] = {cr_targ_arr(cr_av_slice(t, X, 0, 4))};
    cr_var y3 = cr_tape_acall_s(t, &cr_fn_prod, pargs, 1);
    return cr_add(t, cr_add(t, y1, cr_mul(t, s, y2)), y3);
}

static void arr_point(double *z)
{
    point(z, 1 + AN + AM * AN, 0.7);
}

static cr_status arr_setup(sstate *s)
{
    cr_tape *t;
    return new_tape(s, 0, &t);
}

static cr_status arr_run(sstate *s, outv *o)
{
    cr_tape *t = s->tape[0];
    double z[1 + AN + AM * AN], gx[AN], ga[AM * AN], gs, wbar[AM] = {1, -0.5, 2, 0.25}, vx[AN],
                                                         va[AM * AN], vs;
    arr_point(z);
    cr_array xa = cr_array_vector(z + 1, AN), aa = cr_array_matrix(z + 1 + AN, AM, AN);
    cr_array gxa = cr_array_vector(gx, AN), gaa = cr_array_matrix(ga, AM, AN);
    cr_array vxa = cr_array_vector(vx, AN), vaa = cr_array_matrix(va, AM, AN);
    cr_array wb = cr_array_vector(wbar, AM);
    cr_tape_reset(t);
    cr_var sv = cr_tape_input(t, z[0]);
    cr_avar X = cr_tape_array_input(t, &xa), A = cr_tape_array_input(t, &aa), W;
    cr_var y = arr_t(t, sv, X, A, &W);
    TRYT(t, cr_tape_status(t));
    put1(o, y.v);
    cr_avar as[2] = {X, A};
    cr_array *gs_[2] = {&gxa, &gaa}, *vs_[2] = {&vxa, &vaa};
    TRYT(t, cr_tape_gradient_arrays(t, y, &sv, 1, &gs, as, 2, gs_));
    put1(o, gs);
    put(o, gx, AN);
    put(o, ga, AM * AN);
    TRYT(t, cr_tape_avjp(t, W, &wb, &sv, 1, &vs, as, 2, vs_));
    put1(o, vs);
    put(o, vx, AN);
    put(o, va, AM * AN);
    return CR_OK;
}

static double arr_w(const double *z, size_t len)
{
    (void)len;
    /* wbar . (A (s .* sin.(X))) */
    static const double wbar[AM] = {1, -0.5, 2, 0.25};
    const double s = z[0], *X = z + 1, *A = z + 1 + AN;
    double y = 0;
    for (size_t r = 0; r < AM; r++)
        for (size_t c = 0; c < AN; c++)
            y += wbar[r] * A[r * AN + c] * s * sin(X[c]);
    return y;
}

static void arr_check(const outv *o)
{
    enum { L = 1 + AN + AM * AN };
    double z[L];
    arr_point(z);
    assert_close(o->v[0], arr_c(z, L), 1e-13);
    for (size_t i = 0; i < L; i++) {
        assert_close(o->v[1 + i], fd1(arr_c, z, L, i), 1e-6);
        assert_close(o->v[1 + L + i], fd1(arr_w, z, L, i), 1e-7);
    }
}

/* ---- fused kernels: sum and map kernels, gradient, forward sweep, H v ------------------ */

#define KROSEN(x) \
    cr_k_add(cr_k_mul(100.0, cr_k_sq(cr_k_sub(x[1], cr_k_sq(x[0])))), cr_k_sq(cr_k_sub(1.0, x[0])))
CR_KERNEL(k_rosen, 2, KROSEN);

#define KSINSQ(x) cr_k_mul(cr_k_sin(x[0]), cr_k_sub(cr_k_sq(x[0]), 1.0))
CR_KERNEL(k_sinsq, 1, KSINSQ);

enum { KN = 300 }; /* more than one block of CR_K_BLOCK elements */

static double kfun_c(const double *x, size_t n)
{
    double s = 0, t = 0;
    double w[KN];
    for (size_t i = 0; i < n; i++)
        w[i] = sin(x[i]) * (x[i] * x[i] - 1);
    for (size_t i = 0; i + 1 < n; i++) {
        double u = x[i + 1] - x[i] * x[i], v = 1 - x[i];
        s += 100 * u * u + v * v;
        u = w[i + 1] - w[i] * w[i];
        v = 1 - w[i];
        t += 100 * u * u + v * v;
    }
    return s + 0.01 * t;
}

/* rosen(X) + 0.01 rosen(sin.(X) .* (X.^2 .- 1)): a kernel's array read by another kernel */
static cr_var kfun_t(cr_tape *t, cr_avar X)
{
    cr_kin a[2] = {cr_kin_arr(X, 0), cr_kin_arr(X, 1)};
    cr_var s = cr_av_kernel_sum(t, &k_rosen, a, 2, KN - 1);
    cr_kin b[1] = {cr_kin_arr(X, 0)};
    cr_avar W = cr_av_kernel(t, &k_sinsq, b, 1, KN);
    cr_kin c[2] = {cr_kin_arr(W, 0), cr_kin_arr(W, 1)};
    return cr_add(t, s, cr_mul(t, cr_const(0.01), cr_av_kernel_sum(t, &k_rosen, c, 2, KN - 1)));
}

static void kpoint(double *x)
{
    for (size_t i = 0; i < KN; i++)
        x[i] = 0.6 * cos((double)i);
}

static cr_status kern_setup(sstate *s)
{
    cr_tape *t;
    TRY(new_tape(s, 0, &t));
    return new_tape(s, CR_TAPE_SECOND_ORDER, &t);
}

static cr_status kern_run(sstate *s, outv *o)
{
    static double x[KN], v[KN], g[KN], hv[KN];
    kpoint(x);
    direction(v, KN);
    cr_array xa = cr_array_vector(x, KN), va = cr_array_vector(v, KN), ga = cr_array_vector(g, KN),
             ha = cr_array_vector(hv, KN);
    const cr_array *vp = &va;
    cr_array *gp = &ga, *hp = &ha;
    /* first order: the gradient */
    cr_tape *t = s->tape[0];
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = kfun_t(t, X);
    TRYT(t, cr_tape_status(t));
    put1(o, y.v);
    TRYT(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    put(o, g, KN);
    /* second order: the forward sweep, then H v */
    t = s->tape[1];
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    y = kfun_t(t, X);
    TRYT(t, cr_tape_status(t));
    double yd;
    TRYT(t, cr_tape_ajvp(t, NULL, NULL, 0, &X, &vp, 1, &y, 1, &yd, NULL, 0, NULL));
    put1(o, yd);
    TRYT(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, &vp, &hp));
    put(o, hv, KN);
    return CR_OK;
}

static void kern_check(const outv *o)
{
    static double x[KN], v[KN];
    kpoint(x);
    direction(v, KN);
    assert_close(o->v[0], kfun_c(x, KN), 1e-13);
    double jv = 0;
    for (size_t i = 0; i < KN; i += 7) /* a sample of the coordinates */
        assert_close(o->v[1 + i], fd1(kfun_c, x, KN, i), 1e-6);
    for (size_t i = 0; i < KN; i++)
        jv += o->v[1 + i] * v[i];
    assert_close(o->v[1 + KN], jv, 1e-12); /* the forward sweep: the gradient along v */
    /* H v: central differences of the first-order gradient along v */
    double h = 1e-6, gp[KN], gm[KN];
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    for (int k = 0; k < 2; k++) {
        static double xs[KN];
        for (size_t i = 0; i < KN; i++)
            xs[i] = x[i] + (k == 0 ? h : -h) * v[i];
        cr_array xa = cr_array_vector(xs, KN), ga = cr_array_vector(k == 0 ? gp : gm, KN);
        cr_array *gpp = &ga;
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_var y = kfun_t(t, X);
        assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gpp));
    }
    for (size_t i = 0; i < KN; i++)
        ASSERT_CLOSE(o->v[2 + KN + i], (gp[i] - gm[i]) / (2 * h), 1e-4);
    cr_tape_free(t);
    cr_ctx_free(ctx);
}

/* ---- second-order array forms: matmul, logsumexp, solve, det ------------------------- */

/* y = logsumexp(A b) + det(A) + sum(solve(A, b)) over A (3x3) and b (3) */
static double a2_c(const double *z, size_t len)
{
    (void)len;
    const double *A = z, *b = z + 9;
    double w[3], m = -INFINITY, se = 0;
    for (size_t r = 0; r < 3; r++) {
        w[r] = A[3 * r] * b[0] + A[3 * r + 1] * b[1] + A[3 * r + 2] * b[2];
        m = fmax(m, w[r]);
    }
    for (size_t r = 0; r < 3; r++)
        se += exp(w[r] - m);
    double det = A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) +
                 A[2] * (A[3] * A[7] - A[4] * A[6]);
    /* solve by Cramer's rule */
    double sx = 0;
    for (size_t c = 0; c < 3; c++) {
        double M[9];
        memcpy(M, A, sizeof M);
        for (size_t r = 0; r < 3; r++)
            M[3 * r + c] = b[r];
        sx += (M[0] * (M[4] * M[8] - M[5] * M[7]) - M[1] * (M[3] * M[8] - M[5] * M[6]) +
               M[2] * (M[3] * M[7] - M[4] * M[6])) /
              det;
    }
    return m + log(se) + det + sx;
}

static cr_var a2_t(cr_tape *t, cr_avar A, cr_avar b)
{
    cr_targ ab[2] = {cr_targ_arr(A), cr_targ_arr(b)};
    cr_avar w = cr_tape_acall_a(t, &cr_fn_matmul, ab, 2);
    cr_targ lw[1] = {cr_targ_arr(w)}, la[1] = {cr_targ_arr(A)};
    cr_var l = cr_tape_acall_s(t, &cr_fn_logsumexp, lw, 1);
    cr_var d = cr_tape_acall_s(t, &cr_fn_det, la, 1);
    cr_avar x = cr_tape_acall_a(t, &cr_fn_solve, ab, 2);
    return cr_add(t, cr_add(t, l, d), cr_av_sum(t, x));
}

static void a2_point(double *z)
{
    static const double A[9] = {2.0, 0.3, -0.4, 0.5, 1.5, 0.2, -0.1, 0.6, 1.8};
    memcpy(z, A, sizeof A);
    z[9] = 0.4;
    z[10] = -0.7;
    z[11] = 0.9;
}

static cr_status a2_setup(sstate *s)
{
    cr_tape *t;
    return new_tape(s, CR_TAPE_SECOND_ORDER, &t);
}

/* Record at z; the value, then H v along dz and the gradient (12 each), each put in o
 * when o is not NULL. */
static cr_status a2_sweep(cr_tape *t, double *z, const double *dz, outv *o, double *hv, double *g)
{
    cr_array Aa = cr_array_matrix(z, 3, 3), ba = cr_array_vector(z + 9, 3);
    double vz[12];
    memcpy(vz, dz, sizeof vz);
    cr_array vA = cr_array_matrix(vz, 3, 3), vb = cr_array_vector(vz + 9, 3);
    cr_array hA = cr_array_matrix(hv, 3, 3), hb = cr_array_vector(hv + 9, 3);
    cr_array gA = cr_array_matrix(g, 3, 3), gb = cr_array_vector(g + 9, 3);
    const cr_array *vp[2] = {&vA, &vb};
    cr_array *hp[2] = {&hA, &hb}, *gp[2] = {&gA, &gb};
    cr_tape_reset(t);
    cr_avar as[2] = {cr_tape_array_input(t, &Aa), cr_tape_array_input(t, &ba)};
    cr_var y = a2_t(t, as[0], as[1]);
    TRYT(t, cr_tape_status(t));
    if (o != NULL)
        put1(o, y.v);
    TRYT(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, as, 2, vp, hp));
    if (o != NULL)
        put(o, hv, 12);
    TRYT(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, as, 2, gp));
    if (o != NULL)
        put(o, g, 12);
    return CR_OK;
}

static cr_status a2_run(sstate *s, outv *o)
{
    double z[12], v[12], hv[12], g[12];
    a2_point(z);
    direction(v, 12);
    return a2_sweep(s->tape[0], z, v, o, hv, g);
}

static void a2_check(const outv *o)
{
    double z[12], v[12];
    a2_point(z);
    direction(v, 12);
    assert_close(o->v[0], a2_c(z, 12), 1e-13);
    for (size_t i = 0; i < 12; i++)
        assert_close(o->v[13 + i], fd1(a2_c, z, 12, i), 1e-7);
    /* H v: central differences of the gradient along v */
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    double h = 1e-5, gp[12], gm[12], hv[12];
    for (int k = 0; k < 2; k++) {
        double zs[12];
        for (size_t i = 0; i < 12; i++)
            zs[i] = z[i] + (k == 0 ? h : -h) * v[i];
        assert_ok(t, a2_sweep(t, zs, v, NULL, hv, k == 0 ? gp : gm));
    }
    for (size_t i = 0; i < 12; i++)
        ASSERT_CLOSE(o->v[1 + i], (gp[i] - gm[i]) / (2 * h), 1e-6);
    cr_tape_free(t);
    cr_ctx_free(ctx);
}

/* ---- more second-order forms: factorisations, matrix functions, vector reductions -------- */

/* y = sum(inv(A)) + logdet(A) + sum(expm(A / 10)) + sum(svdvals(A)) + sum(eigvals(A))
 *     + sum(cholesky(A)) + dot(softmax(b), b) + var(b) + norm(b) + prod(b) + sum(cumprod(b))
 *     + logabsdet(A)[0] + sum(eigen(A).values)
 * over a symmetric positive definite A (3x3, a dense variable) and b (4) */
static cr_var f3_t(cr_tape *t, cr_avar A, cr_avar b)
{
    cr_targ a1[1] = {cr_targ_arr(A)}, b1[1] = {cr_targ_arr(b)};
    cr_targ sa[1] = {
        cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(cr_const(0.1)), cr_targ_arr(A)))};
    cr_var y = cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_matinv, a1, 1));
    y = cr_add(t, y, cr_tape_acall_s(t, &cr_fn_logdet, a1, 1));
    y = cr_add(t, y, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_expm, sa, 1)));
    y = cr_add(t, y, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_svdvals, a1, 1)));
    y = cr_add(t, y, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_eigvals, a1, 1)));
    y = cr_add(t, y, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_cholesky, a1, 1)));
    y = cr_add(t, y, cr_av_dot(t, cr_tape_acall_a(t, &cr_fn_softmax, b1, 1), b));
    y = cr_add(t, y, cr_tape_acall_s(t, &cr_fn_var, b1, 1));
    y = cr_add(t, y, cr_tape_acall_s(t, &cr_fn_norm, b1, 1));
    y = cr_add(t, y, cr_tape_acall_s(t, &cr_fn_prod, b1, 1));
    y = cr_add(t, y, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_cumprod, b1, 1)));
    cr_targ la[2], ev[2]; /* tuple results: (log|det|, sign), (values, vectors) */
    if (cr_tape_acall_n(t, &cr_fn_logabsdet, a1, 1, la, 2) == CR_OK &&
        cr_tape_acall_n(t, &cr_fn_eigen, a1, 1, ev, 2) == CR_OK)
        y = cr_add(t, cr_add(t, y, la[0].u.s), cr_av_sum(t, ev[0].u.a));
    return y;
}

enum { F3 = 13 }; /* 9 + 4 */

static void f3_point(double *z)
{
    static const double z0[F3] = {4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0, 0.4, -0.7, 0.9, 1.3};
    memcpy(z, z0, sizeof z0);
}

/* Record at z; the value, H v along dz and the gradient, each put in o when not NULL. */
static cr_status f3_sweep(cr_tape *t, double *z, const double *dz, outv *o, double *hv, double *g)
{
    cr_array Aa = cr_array_matrix(z, 3, 3), ba = cr_array_vector(z + 9, 4);
    double vz[F3];
    memcpy(vz, dz, sizeof vz);
    cr_array vA = cr_array_matrix(vz, 3, 3), vb = cr_array_vector(vz + 9, 4);
    cr_array hA = cr_array_matrix(hv, 3, 3), hb = cr_array_vector(hv + 9, 4);
    cr_array gA = cr_array_matrix(g, 3, 3), gb = cr_array_vector(g + 9, 4);
    const cr_array *vp[2] = {&vA, &vb};
    cr_array *hp[2] = {&hA, &hb}, *gp[2] = {&gA, &gb};
    cr_tape_reset(t);
    cr_avar as[2] = {cr_tape_array_input(t, &Aa), cr_tape_array_input(t, &ba)};
    cr_var y = f3_t(t, as[0], as[1]);
    TRYT(t, cr_tape_status(t));
    if (o != NULL)
        put1(o, y.v);
    TRYT(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, as, 2, vp, hp));
    if (o != NULL)
        put(o, hv, F3);
    TRYT(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, as, 2, gp));
    if (o != NULL)
        put(o, g, F3);
    return CR_OK;
}

static cr_status f3_run(sstate *s, outv *o)
{
    double z[F3], v[F3], hv[F3], g[F3];
    f3_point(z);
    direction(v, F3);
    return f3_sweep(s->tape[0], z, v, o, hv, g);
}

/* The library's primal of f3 at z, for central differences: a recording's value. */
static double f3_value(const double *z, size_t len)
{
    (void)len;
    double zz[F3], v[F3] = {0}, hv[F3], g[F3];
    memcpy(zz, z, sizeof zz);
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    outv *o = calloc(1, sizeof *o);
    assert_non_null(o);
    assert_ok(t, f3_sweep(t, zz, v, o, hv, g));
    double y = o->v[0];
    free(o);
    cr_tape_free(t);
    cr_ctx_free(ctx);
    return y;
}

static void f3_check(const outv *o)
{
    double z[F3], v[F3];
    f3_point(z);
    direction(v, F3);
    for (size_t i = 0; i < F3; i++) /* the gradient against central differences */
        assert_close(o->v[1 + F3 + i], fd1(f3_value, z, F3, i), 1e-6);
    /* H v: central differences of the gradient along v */
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    double h = 1e-5, gp[F3], gm[F3], hv[F3];
    for (int k = 0; k < 2; k++) {
        double zs[F3];
        for (size_t i = 0; i < F3; i++)
            zs[i] = z[i] + (k == 0 ? h : -h) * v[i];
        assert_ok(t, f3_sweep(t, zs, v, NULL, hv, k == 0 ? gp : gm));
    }
    for (size_t i = 0; i < F3; i++)
        ASSERT_CLOSE(o->v[1 + i], (gp[i] - gm[i]) / (2 * h), 1e-5);
    cr_tape_free(t);
    cr_ctx_free(ctx);
}

/* ---- tuple results (factorizations) on a forward tape: gradient and forward sweep ------- */

/* y = sum(svd(A).S) + sum(qr(A).R .^ 2) + sum(lu(A).U) + logabsdet(A)[0]
 *     + sum(eigen(A).values) over a general A (4x4) */
static cr_var tup_t(cr_tape *t, cr_avar A)
{
    cr_targ a1[1] = {cr_targ_arr(A)}, sv[3], qr[2], lu[3], la[2], ev[2];
    cr_var y = cr_const(0.0);
    if (cr_tape_acall_n(t, &cr_fn_svd, a1, 1, sv, 3) == CR_OK)
        y = cr_add(t, y, cr_av_sum(t, sv[1].u.a));
    if (cr_tape_acall_n(t, &cr_fn_qr, a1, 1, qr, 2) == CR_OK)
        y = cr_add(t, y, cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, qr[1])));
    if (cr_tape_acall_n(t, &cr_fn_lu, a1, 1, lu, 3) == CR_OK)
        y = cr_add(t, y, cr_av_sum(t, lu[1].u.a));
    if (cr_tape_acall_n(t, &cr_fn_logabsdet, a1, 1, la, 2) == CR_OK)
        y = cr_add(t, y, la[0].u.s);
    if (cr_tape_acall_n(t, &cr_fn_eigen, a1, 1, ev, 2) == CR_OK)
        y = cr_add(t, y, cr_av_sum(t, ev[0].u.a));
    return y;
}

enum { TN = 16 };

static void tup_point(double *z)
{
    for (size_t i = 0; i < TN; i++)
        z[i] = (i % 5 == 0 ? 3.0 : 0.0) + 0.4 * sin(1.7 * (double)i + 0.3);
}

/* Record at z; the value, the forward sweep along dz and the gradient, each put in o when
 * not NULL (the gradient also into g). */
static cr_status tup_sweep(cr_tape *t, double *z, const double *dz, outv *o, double *g)
{
    cr_array Aa = cr_array_matrix(z, 4, 4), ga = cr_array_matrix(g, 4, 4);
    double vz[TN];
    memcpy(vz, dz, sizeof vz);
    cr_array vA = cr_array_matrix(vz, 4, 4);
    const cr_array *vp = &vA;
    cr_array *gp = &ga;
    cr_tape_reset(t);
    cr_avar A = cr_tape_array_input(t, &Aa);
    cr_var y = tup_t(t, A);
    TRYT(t, cr_tape_status(t));
    if (o != NULL)
        put1(o, y.v);
    double yd;
    TRYT(t, cr_tape_ajvp(t, NULL, NULL, 0, &A, &vp, 1, &y, 1, &yd, NULL, 0, NULL));
    if (o != NULL)
        put1(o, yd);
    TRYT(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &A, 1, &gp));
    if (o != NULL)
        put(o, g, TN);
    return CR_OK;
}

static cr_status tup_setup(sstate *s)
{
    cr_tape *t;
    return new_tape(s, CR_TAPE_FORWARD, &t);
}

static cr_status tup_run(sstate *s, outv *o)
{
    double z[TN], v[TN], g[TN];
    tup_point(z);
    direction(v, TN);
    return tup_sweep(s->tape[0], z, v, o, g);
}

/* The library's primal at z, for central differences: a recording's value. */
static double tup_value(const double *z, size_t len)
{
    (void)len;
    double zz[TN], v[TN] = {0}, g[TN];
    memcpy(zz, z, sizeof zz);
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_FORWARD};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    outv *o = calloc(1, sizeof *o);
    assert_non_null(o);
    assert_ok(t, tup_sweep(t, zz, v, o, g));
    double y = o->v[0];
    free(o);
    cr_tape_free(t);
    cr_ctx_free(ctx);
    return y;
}

static void tup_check(const outv *o)
{
    double z[TN], v[TN], jv = 0;
    tup_point(z);
    direction(v, TN);
    for (size_t i = 0; i < TN; i++) {
        double d = fd1(tup_value, z, TN, i);
        assert_close(o->v[2 + i], d, 1e-6);
        jv += d * v[i];
    }
    assert_close(o->v[1], jv, 1e-6);
}

/* ---- the engine: rrule_via_ad, map and foldl of user functions, overlays --------------- */

enum { EN = 8 };

/* rrule_via_ad(wave) at 0.8 (value, derivative), then on the tape
 * y = sum(map(wave, X)) + foldl(mix, X; init = s) + wave(s) */
static double eng_c(const double *z, size_t len)
{
    (void)len;
    double s = z[0], acc = s, sm = 0;
    for (size_t i = 0; i < EN; i++) {
        sm += z[1 + i] * sin(z[1 + i]);
        acc = acc * sin(z[1 + i]) + z[1 + i];
    }
    return sm + acc + s * sin(s);
}

static cr_status eng_setup(sstate *s)
{
    TRY(new_engine(s));
    TRY(cr_engine_overlay(s->eng, &wave_fn, wave_ad, 1, NULL));
    TRY(cr_engine_overlay(s->eng, &mix_fn, mix_ad, 1, NULL));
    cr_tape *t;
    TRY(new_tape(s, 0, &t));
    cr_arena *a;
    return new_arena(s, &a);
}

static void eng_point(double *z)
{
    point(z, 1 + EN, 0.1);
}

static cr_status eng_run(sstate *s, outv *o)
{
    cr_arena *arena = s->arena[0];
    cr_arena_reset(arena);
    const cr_config *cfg = cr_engine_config(s->eng);
    cr_value wave = cr_value_function(&wave_fn, NULL), mix = cr_value_function(&mix_fn, NULL);
    cr_value xv = cr_value_f64(0.8), yv;
    cr_pullback pb;
    TRY(cr_rrule_via_ad(cfg, arena, &wave, &xv, 1, &yv, &pb));
    cr_tangent dy = cr_tangent_f64(1.0), dx[2];
    TRY(cr_pullback_call(arena, &pb, &dy, dx, 2));
    put1(o, yv.u.f64);
    put1(o, dx[1].u.f64);

    cr_tape *t = s->tape[0];
    double z[1 + EN], g[1 + EN];
    eng_point(z);
    cr_array xa = cr_array_vector(z + 1, EN), ga = cr_array_vector(g + 1, EN);
    cr_array *gp = &ga;
    cr_tape_reset(t);
    cr_var sv = cr_tape_input(t, z[0]);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_targ margs[2] = {cr_targ_value(wave), cr_targ_arr(X)};
    cr_var m = cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_map, margs, 2));
    cr_targ fargs[3] = {cr_targ_value(mix), cr_targ_arr(X), cr_targ_var(sv)};
    cr_var f = cr_tape_acall_s(t, &cr_fn_foldl, fargs, 3);
    cr_var w = cr_tape_call1(t, &wave, &sv, 1); /* the overlay, recorded inline */
    cr_var y = cr_add(t, cr_add(t, m, f), w);
    TRYT(t, cr_tape_status(t));
    put1(o, y.v);
    TRYT(t, cr_tape_gradient_arrays(t, y, &sv, 1, g, &X, 1, &gp));
    put(o, g, 1 + EN);
    return CR_OK;
}

static double wave_c(const double *x, size_t n)
{
    (void)n;
    return x[0] * sin(x[0]);
}

static void eng_check(const outv *o)
{
    double x = 0.8, z[1 + EN];
    assert_close(o->v[0], wave_c(&x, 1), 1e-15);
    assert_close(o->v[1], fd1(wave_c, &x, 1, 0), 1e-8);
    eng_point(z);
    assert_close(o->v[2], eng_c(z, 1 + EN), 1e-14);
    for (size_t i = 0; i < 1 + EN; i++)
        assert_close(o->v[3 + i], fd1(eng_c, z, 1 + EN, i), 1e-7);
}

/* ---- prepared gradients: several calls, user rules replayed, arrays, H v --------------- */

enum { PN = 30 };

/* y = y0 + y1 / 2 of scalar_f */
static double p_c(const double *x, size_t n)
{
    return s0_c(x, n) + 0.5 * s1_c(x, n);
}

static cr_status p_f(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    cr_var ys[2];
    TRY(scalar_f(t, x, n, ys, 2, env));
    y[0] = cr_add(t, ys[0], cr_mul(t, cr_const(0.5), ys[1]));
    return cr_tape_status(t);
}

static cr_status pa_f(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_avar W;
    *y = arr_t(t, cr_const(0.7), xs[0], xs[1], &W);
    return cr_tape_status(t);
}

static double pa_c(const double *z, size_t len)
{
    double zz[1 + AN + AM * AN];
    zz[0] = 0.7;
    memcpy(zz + 1, z, len * sizeof *z);
    return arr_c(zz, len + 1);
}

static cr_status prep_setup(sstate *s)
{
    TRY(add_cube_rule(s));
    TRY(new_engine(s));
    double x[PN], z[AN + AM * AN];
    point(x, PN, 0.0);
    point(z, AN + AM * AN, 0.2);
    TRY(cr_prepare_gradient(s->ctx, s->eng, p_f, NULL, x, PN, &s->prep[0]));
    s->nprep = 1;
    cr_array xa = cr_array_vector(z, AN), aa = cr_array_matrix(z + AN, AM, AN);
    const cr_array *xs[2] = {&xa, &aa};
    TRY(cr_prepare_gradient_arrays(s->ctx, NULL, pa_f, NULL, xs, 2, &s->prep[1]));
    s->nprep = 2;
    TRY(cr_prepare_hvp(s->ctx, NULL, h_f, NULL, x, HN, &s->prep[2]));
    s->nprep = 3;
    return CR_OK;
}

/* Each prepared object at two new points. */
static cr_status prep_run(sstate *s, outv *o)
{
    for (int k = 0; k < 2; k++) {
        double x[PN], g[PN], y, z[AN + AM * AN], gz[AN + AM * AN], v[HN], hv[HN];
        point(x, PN, 0.4 + k);
        TRY(cr_prepared_value_and_gradient(s->prep[0], x, PN, &y, g));
        put1(o, y);
        put(o, g, PN);
        point(z, AN + AM * AN, 0.3 + k);
        cr_array xa = cr_array_vector(z, AN), aa = cr_array_matrix(z + AN, AM, AN);
        cr_array gxa = cr_array_vector(gz, AN), gaa = cr_array_matrix(gz + AN, AM, AN);
        const cr_array *xs[2] = {&xa, &aa};
        cr_array *gs[2] = {&gxa, &gaa};
        TRY(cr_prepared_value_and_gradient_arrays(s->prep[1], xs, 2, &y, gs));
        put1(o, y);
        put(o, gz, AN + AM * AN);
        direction(v, HN);
        TRY(cr_prepared_hvp(s->prep[2], x, HN, v, hv, &y, g));
        put1(o, y);
        put(o, hv, HN);
        put(o, g, HN);
    }
    return CR_OK;
}

static void prep_check(const outv *o)
{
    const double *r = o->v;
    for (int k = 0; k < 2; k++) {
        double x[PN], z[AN + AM * AN], v[HN];
        point(x, PN, 0.4 + k);
        assert_close(*r++, p_c(x, PN), 1e-14);
        for (size_t i = 0; i < PN; i++)
            assert_close(*r++, fd1(p_c, x, PN, i), 1e-7);
        point(z, AN + AM * AN, 0.3 + k);
        assert_close(*r++, pa_c(z, AN + AM * AN), 1e-13);
        for (size_t i = 0; i < AN + AM * AN; i++)
            assert_close(*r++, fd1(pa_c, z, AN + AM * AN, i), 1e-6);
        direction(v, HN);
        assert_close(*r++, h_c(x, HN), 1e-14);
        const double *hv = r, *g = r + HN;
        for (size_t i = 0; i < HN; i++) {
            assert_close(g[i], fd1(h_c, x, HN, i), 1e-7);
            double want = 0;
            for (size_t j = 0; j < HN; j++)
                want += h_second(h_c, x, i, j) * v[j];
            ASSERT_CLOSE(hv[i], want, 1e-5);
        }
        r += 2 * HN;
    }
}

/* ---- friendly tangents: a struct's gradient written back through its descriptor ------- */

#define NW 5
#define NB 3

typedef struct layer {
    cr_array b;
    double gain;
} layer;

typedef struct net {
    double scale;
    cr_array w;
    int n;
    layer out;
} net;

static const cr_field layer_fields[] = {
    {"b", offsetof(layer, b), CR_KIND_ARRAY, NULL},
    {"gain", offsetof(layer, gain), CR_KIND_F64, NULL},
};
static const cr_type layer_type = {"layer", sizeof(layer), 2, layer_fields};
static const cr_field net_fields[] = {
    {"scale", offsetof(net, scale), CR_KIND_F64, NULL},
    {"w", offsetof(net, w), CR_KIND_ARRAY, NULL},
    {"n", offsetof(net, n), CR_KIND_I32, NULL},
    {"out", offsetof(net, out), CR_KIND_STRUCT, &layer_type},
};
static const cr_type net_type = {"net", sizeof(net), 4, net_fields};

static const double k_c[NW] = {0.3, -1.2, 0.8, 2.0, -0.4};

/* g(m) = scale dot(w, c) + gain dot(b, b) + (sum w)^2 + n; z = (scale, w, b, gain) */
static double net_c(const double *z, size_t len)
{
    (void)len;
    const double *w = z + 1, *b = z + 1 + NW;
    double d = 0, bb = 0, sw = 0;
    for (size_t i = 0; i < NW; i++) {
        d += w[i] * k_c[i];
        sw += w[i];
    }
    for (size_t i = 0; i < NB; i++)
        bb += b[i] * b[i];
    return z[0] * d + z[1 + NW + NB] * bb + sw * sw + 7;
}

static cr_var net_t(cr_tape *t, const cr_var *v, const cr_avar *av, const net *m)
{
    static double cbuf[NW];
    static cr_array ca;
    memcpy(cbuf, k_c, sizeof cbuf);
    ca = cr_array_vector(cbuf, NW);
    cr_var scale = cr_tape_struct_field(&net_type, v, "scale");
    cr_var gain = cr_tape_struct_field(&net_type, v, "out.gain");
    cr_avar w = cr_tape_struct_array_field(&net_type, av, "w");
    cr_avar b = cr_tape_struct_array_field(&net_type, av, "out.b");
    cr_var sw = cr_av_sum(t, w);
    cr_var r = cr_add(t, cr_mul(t, scale, cr_av_dot(t, w, cr_av_const(&ca))),
                      cr_mul(t, gain, cr_av_dot(t, b, b)));
    return cr_add(t, cr_add(t, r, cr_mul(t, sw, sw)), cr_const((double)m->n));
}

/* The layer's friendly gradient: the gain's derivative halved (a user's scaling), the
 * arrays as filled. */
static size_t g_friendly_calls;

static cr_status layer_friendly(const cr_type *type, cr_tangent raw, void *dest, void *udata)
{
    (void)type;
    (void)udata;
    cr_tangent tg;
    TRY(cr_tangent_getfield(raw, "gain", &tg));
    ((layer *)dest)->gain = 0.5 * tg.u.f64;
    g_friendly_calls++;
    return CR_OK;
}

static void net_point(double *z)
{
    point(z, 1 + NW + NB + 1, 0.9);
}

static cr_status friendly_setup(sstate *s)
{
    TRY(new_engine(s));
    TRY(cr_engine_friendly(s->eng, &layer_type, layer_friendly, NULL));
    cr_tape *t;
    TRY(new_tape(s, 0, &t));
    cr_arena *a;
    return new_arena(s, &a);
}

static cr_status friendly_run(sstate *s, outv *o)
{
    cr_tape *t = s->tape[0];
    double z[1 + NW + NB + 1], gw[NW], gb[NB];
    net_point(z);
    net m = {.scale = z[0], .w = cr_array_vector(z + 1, NW), .n = 7};
    m.out.b = cr_array_vector(z + 1 + NW, NB);
    m.out.gain = z[1 + NW + NB];
    cr_tape_reset(t);
    cr_var v[2];
    cr_avar av[2];
    TRYT(t, cr_tape_struct_inputs(t, &net_type, &m, v, 2));
    TRYT(t, cr_tape_struct_array_inputs(t, &net_type, &m, av, 2));
    cr_var y = net_t(t, v, av, &m);
    TRYT(t, cr_tape_status(t));
    put1(o, y.v);
    net g;
    memset(&g, 0, sizeof g);
    g.w = cr_array_vector(gw, NW);
    g.out.b = cr_array_vector(gb, NB);
    g_friendly_calls = 0;
    TRYT(t, cr_tape_gradient_struct_arrays(t, y, &net_type, v, av, &g));
    assert_true(g_friendly_calls > 0);
    put1(o, g.scale);
    put(o, gw, NW);
    put(o, gb, NB);
    put1(o, g.out.gain);
    net g2 = g;
    TRYT(t, cr_tape_gradient_struct(t, y, &net_type, v, &g2));
    put1(o, g2.scale);
    put1(o, g2.out.gain);
    /* The raw tangents, in another arena and in the tape's. */
    cr_arena *arenas[2] = {s->arena[0], cr_tape_arena(t)};
    cr_arena_reset(s->arena[0]);
    for (int k = 0; k < 2; k++) {
        cr_tangent tan, tw, ts, tout, tgain;
        /* The result's memory is the caller's arena: its failure need not be the tape's. */
        TRY(cr_tape_gradient_tangent_arrays(t, y, &net_type, v, av, arenas[k], &tan));
        assert_int_equal(cr_tangent_getfield(tan, "w", &tw), CR_OK);
        assert_int_equal(cr_tangent_getfield(tan, "scale", &ts), CR_OK);
        assert_int_equal(tw.tag, CR_TAN_ARRAY);
        put(o, tw.u.arr->data, NW);
        put1(o, ts.u.f64);
        TRY(cr_tape_gradient_tangent(t, y, &net_type, v, arenas[k], &tan));
        assert_int_equal(cr_tangent_getfield(tan, "out", &tout), CR_OK);
        assert_int_equal(cr_tangent_getfield(tout, "gain", &tgain), CR_OK);
        put1(o, tgain.u.f64);
    }
    return CR_OK;
}

static void friendly_check(const outv *o)
{
    enum { L = 1 + NW + NB + 1 };
    double z[L], d[L];
    net_point(z);
    for (size_t i = 0; i < L; i++)
        d[i] = fd1(net_c, z, L, i);
    const double *r = o->v;
    assert_close(*r++, net_c(z, L), 1e-14);
    for (size_t i = 0; i < L - 1; i++)
        assert_close(*r++, d[i], 1e-7);
    assert_close(*r++, 0.5 * d[L - 1], 1e-7); /* through the friendly function */
    assert_close(*r++, d[0], 1e-7);
    assert_close(*r++, 0.5 * d[L - 1], 1e-7);
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < NW; i++)
            assert_close(*r++, d[1 + i], 1e-7);
        assert_close(*r++, d[0], 1e-7);
        assert_close(*r++, d[L - 1], 1e-7); /* the raw tangent: not converted */
    }
}

/* ---- prepared H v through rules kept as pullbacks ----------------------------------------- */

/* vwave(x) = wave(x) = x sin(x), a rule whose rrule is rrule_via_ad of wave's overlay */
static const cr_function vwave_fn = {.name = "vwave", .arity = 1};

static cr_status vwave_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)fv;
    (void)udata;
    cr_value w = cr_value_function(&wave_fn, NULL);
    return cr_rrule_via_ad(cfg, arena, &w, args, nargs, y, pb);
}

/* h2_c (cube, hypot of three and of six arguments) plus vwave(x_i x_{i+1}) every fourth i */
static double ph_c(const double *x, size_t n)
{
    double s = h2_c(x, n);
    for (size_t i = 0; i + 1 < n; i += 4)
        s += x[i] * x[i + 1] * sin(x[i] * x[i + 1]);
    return s;
}

static cr_status ph_f(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    if (h2_f(t, x, n, y, m, env) != CR_OK)
        return cr_tape_status(t);
    cr_value vw = cr_value_function(&vwave_fn, NULL);
    for (size_t i = 0; i + 1 < n; i += 4) {
        cr_var a = cr_mul(t, x[i], x[i + 1]);
        y[0] = cr_add(t, y[0], cr_tape_call1(t, &vw, &a, 1));
    }
    return cr_tape_status(t);
}

static cr_status phvp_setup(sstate *s)
{
    TRY(add_cube_rule(s));
    static const cr_argspec a1[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &vwave_fn, .nargs = 1, .args = a1, .rrule = vwave_rrule};
    TRY(cr_registry_add(s->reg, &def));
    TRY(new_engine(s));
    TRY(cr_engine_overlay(s->eng, &wave_fn, wave_ad, 1, NULL));
    double x[HN];
    point(x, HN, 0.3);
    TRY(cr_prepare_hvp(s->ctx, s->eng, ph_f, NULL, x, HN, &s->prep[0]));
    s->nprep = 1;
    return CR_OK;
}

/* At two new points: the rules called again (1 + 2k calls each), their memory rewound. */
static cr_status phvp_run(sstate *s, outv *o)
{
    for (int k = 0; k < 2; k++) {
        double x[HN], v[HN], hv[HN], g[HN], y;
        point(x, HN, 0.8 + k);
        direction(v, HN);
        TRY(cr_prepared_hvp(s->prep[0], x, HN, v, hv, &y, g));
        put1(o, y);
        put(o, hv, HN);
        put(o, g, HN);
    }
    return CR_OK;
}

static void phvp_check(const outv *o)
{
    const double *r = o->v;
    for (int k = 0; k < 2; k++) {
        double x[HN], v[HN];
        point(x, HN, 0.8 + k);
        direction(v, HN);
        assert_close(*r++, ph_c(x, HN), 1e-14);
        const double *hv = r, *g = r + HN;
        for (size_t i = 0; i < HN; i++) {
            assert_close(g[i], fd1(ph_c, x, HN, i), 1e-7);
            double want = 0;
            for (size_t j = 0; j < HN; j++)
                want += h_second(ph_c, x, i, j) * v[j];
            ASSERT_CLOSE(hv[i], want, 1e-5);
        }
        r += 2 * HN;
    }
}

/* ---- cr_prepare_hvp_arrays failing at each allocation ------------------------------------- */

static cr_status a2_f(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    *y = a2_t(t, xs[0], xs[1]);
    return cr_tape_status(t);
}

/* Preparing H v of a program with array functions fails at each of its allocations in turn:
 * CR_ENOMEM, no prepared object, nothing live and no free of a wrong size. (The workspace of
 * tangents was freed with size 0 when the allocation after it failed.) */
typedef struct a2_env {
    double z[12];
    cr_array Aa, ba;
} a2_env;

static cr_status a2_prepare(cr_ctx *ctx, void *env, cr_prepared **p)
{
    a2_env *e = env;
    const cr_array *xs[2] = {&e->Aa, &e->ba};
    return cr_prepare_hvp_arrays(ctx, NULL, a2_f, NULL, xs, 2, p);
}

static void test_prepare_hvp_arrays_each_failure(void **state)
{
    (void)state;
    a2_env e;
    a2_point(e.z);
    e.Aa = cr_array_matrix(e.z, 3, 3);
    e.ba = cr_array_vector(e.z + 9, 3);
    const fault_case fc = {.prepare = a2_prepare, .max_runs = 999};
    fault_tally n = fault_each_allocation(&fc, &e);
    assert_int_equal(n.fallbacks, 0);
    assert_true(n.failed_prepare >= 3);
}

/* ---- the scenarios ----------------------------------------------------------------------- */

static const scenario k_scenarios[] = {
    {"scalar tape", "scalar tape (caller buffer)", scalar_setup, scalar_run, scalar_check, 1},
    {"forward mode", "forward mode (caller buffers)", dual_setup, dual_run, dual_check, 2},
    {"second order", "second order (caller buffer)", second_setup, second_run, second_check, 1},
    {"array variables", "array variables (caller buffer)", arr_setup, arr_run, arr_check, 1},
    {"fused kernels", "fused kernels (caller buffers)", kern_setup, kern_run, kern_check, 2},
    {"second-order array forms", "second-order array forms (caller buffer)", a2_setup, a2_run,
     a2_check, 1},
    {"more second-order forms", "more second-order forms (caller buffer)", a2_setup, f3_run,
     f3_check, 1},
    {"tuple results, forward sweep", "tuple results, forward sweep (caller buffer)", tup_setup,
     tup_run, tup_check, 1},
    {"engine: via_ad, map, foldl, overlays", "engine (caller buffers)", eng_setup, eng_run,
     eng_check, 2},
    {"prepared gradients", NULL, prep_setup, prep_run, prep_check, 0},
    {"prepared H v through rules kept as pullbacks", NULL, phvp_setup, phvp_run, phvp_check, 0},
    {"friendly tangents", "friendly tangents (caller buffers)", friendly_setup, friendly_run,
     friendly_check, 2},
};
#define N_SCENARIOS (sizeof k_scenarios / sizeof k_scenarios[0])

static void test_scenario(void **state)
{
    run_scenario(*state);
}

static void test_scenario_fixed(void **state)
{
    run_scenario_fixed(*state);
}

int main(void)
{
    struct CMUnitTest tests[2 * N_SCENARIOS + 1];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_prepare_hvp_arrays_each_failure);
    for (size_t i = 0; i < N_SCENARIOS; i++) {
        void *sc = (void *)(uintptr_t)&k_scenarios[i];
        struct CMUnitTest t = cmocka_unit_test_prestate(test_scenario, sc);
        t.name = k_scenarios[i].name;
        tests[n++] = t;
        if (k_scenarios[i].fixed_name != NULL) {
            struct CMUnitTest tf = cmocka_unit_test_prestate(test_scenario_fixed, sc);
            tf.name = k_scenarios[i].fixed_name;
            tests[n++] = tf;
        }
    }
    return _cmocka_run_group_tests("test_fault_ad", tests, n, NULL, NULL);
}
