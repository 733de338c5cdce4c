/*
 * compare-adolc: chainrules-bench's engine figures written with ADOL-C (adouble,
 * trace_on/trace_off, gradient(), fos_reverse(), hess_vec()), timed as chainrules-bench
 * times them: each ratio is the median of 7 pairs (the plain C primal, then the AD call)
 * timed in alternation; each per-call figure is the median of 7 runs of many calls. Every
 * derivative is first checked against the hand-written one of compare_ref.c (the same as
 * chainrules-bench's); a failed check ends the program with status 1.
 *
 * Built only when ADOL-C is found (bench/CMakeLists.txt, CR_BENCH_ADOLC); never run by
 * ctest. Figures, one `name value unit` line each:
 *
 *   adolc_chain_ratio          250000 steps t = t + x[k % 1000] * exp(sin(t)) with 1000
 *                              inputs: trace_on .. trace_off, then gradient() (a zero-order
 *                              forward replay that keeps the values, then the reverse
 *                              sweep), over the plain C loop
 *   adolc_chain_keep_ratio     the same traced with keepTaylors = 1 (the values are kept
 *                              while taping), then fos_reverse() alone: ADOL-C's cheapest
 *                              record + sweep, the closest to chainrules' chain_ratio
 *   adolc_chain_replay_ratio   gradient() of the tape recorded once (record once, replay
 *                              many), over the primal
 *   adolc_rosen_loop_ratio     Rosenbrock, n = 1e6, as a scalar loop: the same three forms
 *   adolc_rosen_loop_keep_ratio
 *   adolc_rosen_loop_replay_ratio
 *   adolc_tape_bytes_per_op    bytes of ADOL-C's tape per operation of that loop
 *                              (operation codes 1 B, locations 4 B, constants 8 B; the
 *                              Taylor stack of kept values not counted)
 *   adolc_hvp_loop_ratio       Rosenbrock, n = 1e5, scalar loop: trace, then hess_vec()
 *                              (forward-over-reverse on the tape), over the primal
 *   adolc_hvp_replay_ratio     hess_vec() of the tape recorded once, at other inputs
 *   adolc_sum3_ns              a[0] + a[1] + a[2] of a length-30 input: trace + gradient(),
 *                              per call
 *   adolc_sum3_keep_ns         traced with keepTaylors = 1 + fos_reverse(), per call
 *   adolc_sum3_replay_ns       gradient() of the tape recorded once, at new inputs, per call
 *   adolc_mse_ns               sum((x - y)^2) / 30 over 30 points as a scalar loop: the same
 *   adolc_mse_keep_ns          three forms
 *   adolc_mse_replay_ns
 *
 * ADOL-C writes a tape to files in the working directory when it outgrows its buffers;
 * every trace_on here gives buffers large enough for the whole tape, and the program
 * checks (tapestats) that no tape went to a file, so that every figure is in memory as
 * chainrules' are.
 *
 * ADOL-C allocates those buffers at each trace_on, and its sweeps their Taylor and adjoint
 * stores at each call; glibc serves large blocks with fresh pages (mmap) that fault in at
 * first touch. With --keep-heap, the program first makes glibc take every block from the
 * heap and keep freed memory (mallopt), which shows that cost: each figure's name then ends
 * in _keepheap.
 *
 * Usage: compare-adolc [--keep-heap] [figure...]   (no figure: all of them)
 */
#include <adolc/adolc.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "compare_ref.h"

#include <sys/wait.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#define RUNS 7

static volatile double g_sink;

static double median(double *v, int n)
{
    std::sort(v, v + n);
    return v[n / 2];
}

typedef double (*run_fn)(void *env);

/* The ratio num / den of two timings taken in alternation, the median of RUNS pairs (as
 * chainrules-bench's median_ratio). */
static double median_ratio(run_fn num, run_fn den, void *env)
{
    double r[RUNS];
    g_sink = num(env) + den(env); /* warm up */
    for (int i = 0; i < RUNS; i++) {
        double t0 = cmp_now_ns();
        g_sink = den(env);
        double t1 = cmp_now_ns();
        g_sink = g_sink + num(env);
        double t2 = cmp_now_ns();
        if (std::isnan(g_sink))
            return NAN;
        r[i] = (t2 - t1) / (t1 - t0);
    }
    return median(r, RUNS);
}

/* The median time of RUNS runs of run, in ns (as chainrules-bench's median_time). */
static double median_time(run_fn run, void *env)
{
    double t[RUNS];
    g_sink = run(env); /* warm up */
    for (int r = 0; r < RUNS; r++) {
        double t0 = cmp_now_ns();
        g_sink = run(env);
        t[r] = cmp_now_ns() - t0;
        if (std::isnan(g_sink))
            return NAN;
    }
    return median(t, RUNS);
}

static int check(const char *what, const double *got, const double *want, long n, double rtol)
{
    long i = cmp_mismatch(got, want, n, rtol);
    if (i >= 0) {
        std::fprintf(stderr, "compare-adolc: %s[%ld] = %.17g, hand-written %.17g\n", what, i,
                     got[i], want[i]);
        return 1;
    }
    return 0;
}

/* Buffer sizes of a tape, in elements (operations, locations, values, Taylor values). */
struct bufs {
    unsigned obs, lbs, vbs, tbs;
};

/* Fails when the tape of tag went to a file or its kept values (Taylor stack, counted
 * after the last sweep) outgrow the Taylor buffer. */
static int check_in_memory(const char *what, short tag, const bufs &b)
{
    size_t st[STAT_SIZE];
    tapestats(tag, st);
    if (st[OP_FILE_ACCESS] || st[LOC_FILE_ACCESS] || st[VAL_FILE_ACCESS] ||
        st[TAY_STACK_SIZE] > b.tbs) {
        std::fprintf(stderr,
                     "compare-adolc: %s: the tape does not fit its buffers (%zu operations, "
                     "%zu locations, %zu values, %zu Taylor values)\n",
                     what, st[NUM_OPERATIONS], st[NUM_LOCATIONS], st[NUM_VALUES],
                     st[TAY_STACK_SIZE]);
        return 1;
    }
    return 0;
}

/* Tape tags: one per form; each figure removes its tapes when done. */
enum { TAG_RETAPE = 1, TAG_KEEP, TAG_ONCE, TAG_HVP, TAG_HVP_ONCE, TAG_PROBE };

/* A function of n inputs and one output traced on a tape: trace fills the tape of tag
 * (keep as trace_on's keepTaylors) at x and returns the value. */
typedef double (*trace_fn)(short tag, int keep, const bufs &b, const double *x, long n,
                           const void *data);

/* ---- chain ------------------------------------------------------------------------------ */

static double chain_trace(short tag, int keep, const bufs &b, const double *x, long n,
                          const void *data)
{
    (void)data;
    double y;
    trace_on(tag, keep, b.obs, b.lbs, b.vbs, b.tbs);
    {
        std::vector<adouble> ax((size_t)n);
        for (long i = 0; i < n; i++)
            ax[(size_t)i] <<= x[i];
        adouble t = 0.0;
        for (long k = 0; k < CMP_CHAIN_STEPS; k++)
            t = t + ax[(size_t)(k % CMP_CHAIN_N)] * exp(sin(t));
        t >>= y;
    }
    trace_off();
    return y;
}

/* ---- Rosenbrock --------------------------------------------------------------------------- */

static double rosen_trace(short tag, int keep, const bufs &b, const double *x, long n,
                          const void *data)
{
    (void)data;
    double y;
    trace_on(tag, keep, b.obs, b.lbs, b.vbs, b.tbs);
    {
        std::vector<adouble> ax((size_t)n);
        for (long i = 0; i < n; i++)
            ax[(size_t)i] <<= x[i];
        adouble s = 0.0;
        for (long i = 0; i + 1 < n; i++) {
            adouble a = ax[(size_t)i + 1] - ax[(size_t)i] * ax[(size_t)i];
            adouble c = 1.0 - ax[(size_t)i];
            s += 100.0 * (a * a) + c * c;
        }
        s >>= y;
    }
    trace_off();
    return y;
}

/* ---- small functions -------------------------------------------------------------------- */

static double sum3_trace(short tag, int keep, const bufs &b, const double *x, long n,
                         const void *data)
{
    (void)data;
    double y;
    trace_on(tag, keep, b.obs, b.lbs, b.vbs, b.tbs);
    {
        adouble ax[CMP_SMALL_N];
        for (long i = 0; i < n; i++)
            ax[i] <<= x[i];
        adouble s = ax[0] + ax[1] + ax[2];
        s >>= y;
    }
    trace_off();
    return y;
}

static double mse_trace(short tag, int keep, const bufs &b, const double *x, long n,
                        const void *data)
{
    const double *target = static_cast<const double *>(data);
    double y;
    trace_on(tag, keep, b.obs, b.lbs, b.vbs, b.tbs);
    {
        adouble ax[CMP_SMALL_N];
        for (long i = 0; i < n; i++)
            ax[i] <<= x[i];
        adouble s = 0.0;
        for (long i = 0; i < n; i++) {
            adouble d = ax[i] - target[i];
            s += d * d;
        }
        adouble m = s / (double)n;
        m >>= y;
    }
    trace_off();
    return y;
}

/* ADOL-C allocates a tape's buffers at trace_on: the timed tapes get buffers of the size of
 * the tape, measured on a first trace with ample ones (probe), plus taylor_degree Taylor
 * values per value written (1 for gradients, 2 for hess_vec). */
static bufs fit_bufs(trace_fn trace, const bufs &probe, const double *x, long n, const void *data,
                     unsigned taylor_degree)
{
    size_t st[STAT_SIZE];
    trace(TAG_PROBE, 0, probe, x, n, data);
    tapestats(TAG_PROBE, st);
    removeTape(TAG_PROBE, ADOLC_REMOVE_COMPLETELY);
    return bufs{(unsigned)st[NUM_OPERATIONS] + 64, (unsigned)st[NUM_LOCATIONS] + 64,
                (unsigned)st[NUM_VALUES] + 64, taylor_degree * (unsigned)st[TAY_STACK_SIZE] + 64};
}

/* ---- gradients: retaped at each call, or taped once ---------------------------------------- */

struct grad_env {
    trace_fn trace;
    const void *data;
    bufs b;
    long n;
    std::vector<double> x, g;
    double (*primal)(const grad_env *e);
    long calls; /* per timed run, for the per-call figures */
};

/* Traced with keepTaylors = 0, then gradient(): ADOL-C's documented retaping pattern. */
static double grad_retape(void *env)
{
    grad_env *e = static_cast<grad_env *>(env);
    double y = e->trace(TAG_RETAPE, 0, e->b, e->x.data(), e->n, e->data);
    (void)y;
    if (gradient(TAG_RETAPE, (int)e->n, e->x.data(), e->g.data()) < 0)
        return NAN;
    return e->g[0];
}

/* Traced with keepTaylors = 1, then fos_reverse() alone (no forward replay). */
static double grad_keep(void *env)
{
    grad_env *e = static_cast<grad_env *>(env);
    double y = e->trace(TAG_KEEP, 1, e->b, e->x.data(), e->n, e->data), u = 1.0;
    if (fos_reverse(TAG_KEEP, 1, (int)e->n, &u, e->g.data()) < 0)
        return NAN;
    return y + e->g[0];
}

/* gradient() of the tape traced once (TAG_ONCE). */
static double grad_replay(void *env)
{
    grad_env *e = static_cast<grad_env *>(env);
    if (gradient(TAG_ONCE, (int)e->n, e->x.data(), e->g.data()) < 0)
        return NAN;
    return e->g[0];
}

static double primal_of(void *env)
{
    grad_env *e = static_cast<grad_env *>(env);
    return e->primal(e);
}

/* Many calls of one form at inputs moving by 1e-9, for the per-call figures (as
 * chainrules-bench's small_calls). */
static run_fn g_once;
static double calls_of(void *env)
{
    grad_env *e = static_cast<grad_env *>(env);
    double s = 0;
    for (long i = 0; i < e->calls; i++) {
        e->x[0] += 1e-9;
        s += g_once(env);
    }
    return s;
}

enum form { RETAPE, KEEP, REPLAY };

/* Checks the gradient of one form against want (at the current inputs), then times it:
 * a ratio to the primal (calls == 0) or ns per call. */
static int time_gradient(grad_env &e, form f, const double *want, double rtol, const char *what,
                         double *out, double *bytes_per_op = nullptr)
{
    run_fn fn = f == RETAPE ? grad_retape : f == KEEP ? grad_keep : grad_replay;
    short tag = f == RETAPE ? TAG_RETAPE : f == KEEP ? TAG_KEEP : TAG_ONCE;
    if (f == REPLAY) {
        /* Taped once at other inputs than the ones checked and timed. */
        std::vector<double> x0(e.x);
        for (double &v : x0)
            v *= 1.01;
        e.trace(tag, 0, e.b, x0.data(), e.n, e.data);
    }
    std::fill(e.g.begin(), e.g.end(), NAN);
    if (std::isnan(fn(&e)) || check_in_memory(what, tag, e.b) ||
        check(what, e.g.data(), want, e.n, rtol))
        return 1;
    if (bytes_per_op != nullptr) {
        size_t st[STAT_SIZE];
        tapestats(tag, st);
        *bytes_per_op = (double)(st[NUM_OPERATIONS] + 4 * st[NUM_LOCATIONS] + 8 * st[NUM_VALUES]) /
                        (double)st[NUM_OPERATIONS];
    }
    if (e.calls == 0) {
        *out = median_ratio(fn, primal_of, &e);
    } else {
        g_once = fn;
        *out = median_time(calls_of, &e) / (double)e.calls;
    }
    removeTape(tag, ADOLC_REMOVE_COMPLETELY);
    return std::isnan(*out);
}

/* ---- figures -------------------------------------------------------------------------------- */

static double chain_primal_env(const grad_env *e)
{
    return cmp_chain_primal(e->x.data(), CMP_CHAIN_STEPS);
}

static int fig_chain(form f, double *out)
{
    grad_env e;
    e.trace = chain_trace;
    e.data = nullptr;
    e.n = CMP_CHAIN_N;
    e.x.resize(CMP_CHAIN_N);
    e.g.resize(CMP_CHAIN_N);
    e.primal = chain_primal_env;
    e.calls = 0;
    cmp_chain_inputs(e.x.data());
    e.b = fit_bufs(chain_trace, bufs{1u << 23, 1u << 24, 1u << 22, 1u << 23}, e.x.data(), e.n,
                   nullptr, 1);
    std::vector<double> want(CMP_CHAIN_N);
    if (cmp_chain_grad(e.x.data(), CMP_CHAIN_STEPS, want.data()) != 0)
        return 1;
    return time_gradient(e, f, want.data(), 1e-9, "adolc chain gradient", out);
}

#define ROSEN_N 1000000L

static double rosen_primal_env(const grad_env *e)
{
    return cmp_rosen_primal(e->x.data(), e->n);
}

/* Ample buffers for a first trace of Rosenbrock (10 operations, 23 locations, 2 constants
 * and 12 Taylor values per term). */
static bufs rosen_probe(long n)
{
    unsigned u = (unsigned)n;
    return bufs{16 * u, 32 * u, 4 * u, 16 * u};
}

static double g_adolc_bytes_per_op = NAN;

static int fig_rosen(form f, double *out)
{
    grad_env e;
    e.trace = rosen_trace;
    e.data = nullptr;
    e.n = ROSEN_N;
    e.x.resize(ROSEN_N);
    e.g.resize(ROSEN_N);
    e.primal = rosen_primal_env;
    e.calls = 0;
    cmp_rosen_inputs(e.x.data(), nullptr, ROSEN_N);
    e.b = fit_bufs(rosen_trace, rosen_probe(ROSEN_N), e.x.data(), e.n, nullptr, 1);
    std::vector<double> want(ROSEN_N);
    cmp_rosen_grad(e.x.data(), ROSEN_N, want.data());
    return time_gradient(e, f, want.data(), 1e-12, "adolc rosenbrock gradient", out,
                         f == RETAPE ? &g_adolc_bytes_per_op : nullptr);
}

static int fig_tape_bytes(double *out)
{
    if (std::isnan(g_adolc_bytes_per_op) && fig_rosen(RETAPE, out) != 0)
        return 1;
    *out = g_adolc_bytes_per_op;
    return 0;
}

/* H v of Rosenbrock, n = 1e5 */
#define HVP_N 100000L

struct hvp_env {
    bufs b;
    std::vector<double> x, v, hv;
    bool retape;
};

static double hvp_call(void *env)
{
    hvp_env *e = static_cast<hvp_env *>(env);
    short tag = e->retape ? TAG_HVP : TAG_HVP_ONCE;
    if (e->retape)
        rosen_trace(tag, 0, e->b, e->x.data(), HVP_N, nullptr);
    if (hess_vec(tag, (int)HVP_N, e->x.data(), e->v.data(), e->hv.data()) < 0)
        return NAN;
    return e->hv[0];
}

static double hvp_primal(void *env)
{
    return cmp_rosen_primal(static_cast<hvp_env *>(env)->x.data(), HVP_N);
}

static int fig_hvp(bool retape, double *out)
{
    hvp_env e;
    e.x.resize(HVP_N);
    e.v.resize(HVP_N);
    e.hv.resize(HVP_N);
    e.retape = retape;
    cmp_rosen_inputs(e.x.data(), e.v.data(), HVP_N);
    e.b = fit_bufs(rosen_trace, rosen_probe(HVP_N), e.x.data(), HVP_N, nullptr, 2);
    if (!retape) {
        /* Taped once at the usual inputs, checked and timed at others (as chainrules-bench's
         * hvp_prepared_ratio). */
        rosen_trace(TAG_HVP_ONCE, 0, e.b, e.x.data(), HVP_N, nullptr);
        for (long i = 0; i < HVP_N; i++)
            e.x[(size_t)i] = 0.4 + 0.5 * std::cos(0.23 * (double)i);
    }
    std::vector<double> want(HVP_N);
    cmp_rosen_hvp(e.x.data(), e.v.data(), HVP_N, want.data());
    if (std::isnan(hvp_call(&e)) ||
        check_in_memory("adolc rosenbrock hvp", retape ? TAG_HVP : TAG_HVP_ONCE, e.b) ||
        check("adolc rosenbrock hvp", e.hv.data(), want.data(), HVP_N, 1e-12))
        return 1;
    *out = median_ratio(hvp_call, hvp_primal, &e);
    removeTape(retape ? TAG_HVP : TAG_HVP_ONCE, ADOLC_REMOVE_COMPLETELY);
    return std::isnan(*out);
}

/* Small functions: ns per whole gradient call. */
#define SMALL_CALLS 100000L

static double g_target[CMP_SMALL_N];

static int fig_small(trace_fn trace, const double *want, form f, double *out)
{
    grad_env e;
    e.trace = trace;
    e.data = g_target;
    e.n = CMP_SMALL_N;
    e.x.resize(CMP_SMALL_N);
    e.g.resize(CMP_SMALL_N);
    e.primal = nullptr;
    e.calls = SMALL_CALLS / 10; /* each call costs microseconds */
    cmp_small_inputs(e.x.data(), g_target);
    e.b = fit_bufs(trace, bufs{1024, 1024, 1024, 1024}, e.x.data(), e.n, g_target, 1);
    return time_gradient(e, f, want, 1e-15, "adolc small gradient", out);
}

static int fig_sum3(form f, double *out)
{
    double want[CMP_SMALL_N] = {1.0, 1.0, 1.0};
    return fig_small(sum3_trace, want, f, out);
}

static int fig_mse(form f, double *out)
{
    double x[CMP_SMALL_N], want[CMP_SMALL_N];
    cmp_small_inputs(x, g_target);
    cmp_mse_grad(x, g_target, CMP_SMALL_N, want);
    return fig_small(mse_trace, want, f, out);
}

static int f_chain(double *o)
{
    return fig_chain(RETAPE, o);
}
static int f_chain_keep(double *o)
{
    return fig_chain(KEEP, o);
}
static int f_chain_replay(double *o)
{
    return fig_chain(REPLAY, o);
}
static int f_rosen(double *o)
{
    return fig_rosen(RETAPE, o);
}
static int f_rosen_keep(double *o)
{
    return fig_rosen(KEEP, o);
}
static int f_rosen_replay(double *o)
{
    return fig_rosen(REPLAY, o);
}
static int f_hvp(double *o)
{
    return fig_hvp(true, o);
}
static int f_hvp_replay(double *o)
{
    return fig_hvp(false, o);
}
static int f_sum3(double *o)
{
    return fig_sum3(RETAPE, o);
}
static int f_sum3_keep(double *o)
{
    return fig_sum3(KEEP, o);
}
static int f_sum3_replay(double *o)
{
    return fig_sum3(REPLAY, o);
}
static int f_mse(double *o)
{
    return fig_mse(RETAPE, o);
}
static int f_mse_keep(double *o)
{
    return fig_mse(KEEP, o);
}
static int f_mse_replay(double *o)
{
    return fig_mse(REPLAY, o);
}

static const struct {
    const char *name;
    int (*fn)(double *out);
    const char *unit;
} k_figures[] = {
    {"adolc_chain_ratio", f_chain, "x"},
    {"adolc_chain_keep_ratio", f_chain_keep, "x"},
    {"adolc_chain_replay_ratio", f_chain_replay, "x"},
    {"adolc_rosen_loop_ratio", f_rosen, "x"},
    {"adolc_rosen_loop_keep_ratio", f_rosen_keep, "x"},
    {"adolc_rosen_loop_replay_ratio", f_rosen_replay, "x"},
    {"adolc_tape_bytes_per_op", fig_tape_bytes, "B"},
    {"adolc_hvp_loop_ratio", f_hvp, "x"},
    {"adolc_hvp_replay_ratio", f_hvp_replay, "x"},
    {"adolc_sum3_ns", f_sum3, "ns"},
    {"adolc_sum3_keep_ns", f_sum3_keep, "ns"},
    {"adolc_sum3_replay_ns", f_sum3_replay, "ns"},
    {"adolc_mse_ns", f_mse, "ns"},
    {"adolc_mse_keep_ns", f_mse_keep, "ns"},
    {"adolc_mse_replay_ns", f_mse_replay, "ns"},
};

static bool wanted(int argc, char **argv, const char *name)
{
    if (argc <= 1)
        return true;
    for (int i = 1; i < argc; i++)
        if (std::strcmp(argv[i], name) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    const char *suffix = "";
    if (argc > 1 && std::strcmp(argv[1], "--keep-heap") == 0) {
#if defined(__GLIBC__)
        /* Buffers from the heap, kept there when freed: no page faults on the buffers that
         * each trace_on and sweep allocates again. */
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, INT_MAX);
        suffix = "_keepheap";
        argc--;
        argv++;
#else
        std::fprintf(stderr, "compare-adolc: --keep-heap needs glibc\n");
        return 2;
#endif
    }
    for (int i = 1; i < argc; i++) {
        bool known = false;
        for (const auto &f : k_figures)
            known = known || std::strcmp(argv[i], f.name) == 0;
        if (!known) {
            std::fprintf(stderr, "compare-adolc: no figure %s\n", argv[i]);
            return 2;
        }
    }
    for (const auto &f : k_figures) {
        if (!wanted(argc, argv, f.name))
            continue;
        /* Each figure in a new process: ADOL-C's sweeps size their work arrays by the
         * highest location in use, which stays high after a large tape (a small gradient
         * after Rosenbrock's took 40 times as long). */
        std::fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            std::perror("compare-adolc: fork");
            return 1;
        }
        if (pid == 0) {
            double v = NAN;
            if (f.fn(&v) != 0 || std::isnan(v))
                _exit(1);
            std::printf(std::strcmp(f.unit, "x") == 0 ? "%s%s %.2f %s\n" : "%s%s %.1f %s\n", f.name,
                        suffix, v, f.unit);
            std::fflush(stdout);
            _exit(0);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            std::fprintf(stderr, "compare-adolc: %s failed\n", f.name);
            return 1;
        }
    }
    return 0;
}
