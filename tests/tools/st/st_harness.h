/*
 * The checks of the random programs and regression cases of the source transformer
 * (tests/tools/st/gen_random_c.c writes the harness that includes this header; see
 * docs/source-transformation-testing.md).
 *
 * Each function is reached through wrappers with one layout: the inputs u = (x[0..n-1], the
 * scalar parameters), the outputs (the return value, then y[0..m-1]). At a random point the
 * harness computes:
 *  - the Jacobian by central differences of fourth order (steps h, 2h and h/2, giving the
 *    error estimate of tests/test_random.h);
 *  - the Jacobian by the tape engine (the function written a second time against the tape),
 *    which also gives the smallest distance to a kink met at the point (comparisons, fabs,
 *    fmax, fmin, hypot, atan2): points nearer than ST_MARGIN, or where the differences are
 *    unsteady, are replaced by new ones;
 * then checks f_rev (w^T J added into the shadows, the primal returned, the output shadows
 * zeroed), f_fwd (J d) and f_fwdv (J D for ST_ND directions) against the tape (tightly) and
 * the differences (within their error), and the tape against the differences.
 *
 * Run: ./harness [seed]; ST_ONLY=f3 checks one function; ST_VERBOSE=1 prints every check.
 * Where fork() exists each function is checked in a child process, so that a crash in one
 * (a derivative writing out of bounds) is reported as that function's failure and the others
 * are still checked; ST_NOFORK=1 checks them all in one process (for a debugger).
 */
#ifndef ST_HARNESS_H
#define ST_HARNESS_H

#if defined(__unix__) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* fork, waitpid */
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>

#if defined(__unix__)
#include <sys/wait.h>
#include <unistd.h>
#define ST_FORK 1
#else
#define ST_FORK 0
#endif

/* ST_AD=0: no derivative functions (the generator checked alone: tape against differences). */
#ifndef ST_AD
#define ST_AD 1
#endif
#if ST_AD
#define ST_AD_FN(f) f
#else
#define ST_AD_FN(f) NULL
#undef ST_FWDV
#define ST_FWDV 0
#endif
#ifndef ST_SPARSE_DIRECTIONS
#define ST_SPARSE_DIRECTIONS 0 /* 1: f_fwdv's directions sparse (run_random.sh --toolflags) */
#endif
#ifndef ST_FWDV
#define ST_FWDV 1
#endif
/* ST_JAC=1: f_jacfwd (--jacobian) is checked for the functions ST_JAC_<name> names (those the
 * Jacobian mode accepts). */
#ifndef ST_JAC
#define ST_JAC 0
#endif
/* ST_SET=1: f_rev_set (--reverse-set) is checked for the functions ST_SET_<name> names (those
 * it accepts). */
#ifndef ST_SET
#define ST_SET 0
#endif
#if ST_FWDV
#define ST_FWDV_FN(f) f
#else
#define ST_FWDV_FN(f) NULL
#endif

enum { ST_NMAX = 6, ST_NDMAX = 3, ST_INMAX = ST_NMAX + 5, ST_OUTMAX = 4 };

/* The value the outputs hold on entry (a pure output is written before it is read). */
#define ST_YFILL 0.75
/* Points nearer a kink than this are replaced. */
#define ST_MARGIN 0.02

typedef struct st_fn {
    const char *name;
    int ns, m, ret; /* inputs after x (the scalars, then an in-out y's values), outputs in y,
                       returns a double */
    void (*call)(const double *u, int n, double *out);
    int (*rev)(const double *u, int n, const double *w, double *g, double *out);
    void (*fwd)(const double *u, int n, const double *du, double *out, double *dout);
    void (*fwdv)(const double *u, int n, const double *du, int nd, double *out, double *dout);
    int (*tape)(cr_tape *tp, const double *u, int n, double *J, double *out);
    /* f_jacfwd: out and J (nout x nin); returns the count of entries outside the harness's
     * layout that are not zero */
    int (*jac)(const double *u, int n, double *out, double *J);
    /* f_rev_set: the gradient w^T J assigned into g */
    void (*set)(const double *u, int n, const double *w, double *g, double *out);
} st_fn;

/* ---- Distance to the kinks met by the tape version ----------------------------------------- */

static double st_margin = INFINITY;

static inline void st_note(double d)
{
    d = fabs(d);
    if (d < st_margin)
        st_margin = d;
}

static inline int st_lt(cr_var a, cr_var b)
{
    st_note(a.v - b.v);
    return a.v < b.v;
}
static inline int st_gt(cr_var a, cr_var b)
{
    st_note(a.v - b.v);
    return a.v > b.v;
}
static inline int st_le(cr_var a, cr_var b)
{
    st_note(a.v - b.v);
    return a.v <= b.v;
}
static inline int st_ge(cr_var a, cr_var b)
{
    st_note(a.v - b.v);
    return a.v >= b.v;
}
static inline cr_var st_fabs(cr_tape *tp, cr_var a)
{
    st_note(a.v);
    return cr_tape_call1(tp, &cr_fn_fabs, &a, 1);
}
static inline cr_var st_fmax(cr_tape *tp, cr_var a, cr_var b)
{
    cr_var ab[2] = {a, b};
    st_note(a.v - b.v);
    return cr_tape_call1(tp, &cr_fn_fmax, ab, 2);
}
static inline cr_var st_fmin(cr_tape *tp, cr_var a, cr_var b)
{
    cr_var ab[2] = {a, b};
    st_note(a.v - b.v);
    return cr_tape_call1(tp, &cr_fn_fmin, ab, 2);
}
static inline cr_var st_hypot(cr_tape *tp, cr_var a, cr_var b)
{
    cr_var ab[2] = {a, b};
    st_note(hypot(a.v, b.v));
    return cr_tape_call1(tp, &cr_fn_hypot, ab, 2);
}
static inline cr_var st_atan2(cr_tape *tp, cr_var a, cr_var b)
{
    cr_var ab[2] = {a, b};
    st_note(hypot(a.v, b.v));
    return cr_tape_call1(tp, &cr_fn_atan2, ab, 2);
}

/* The values of the nout outputs and their Jacobian rows (one reverse sweep each). */
static inline int st_tape_jacobian(cr_tape *tp, const cr_var *in, int nin, const cr_var *ys,
                                   int nout, double *J, double *out)
{
    if (cr_tape_status(tp) != CR_OK)
        return -1;
    for (int o = 0; o < nout; o++) {
        out[o] = ys[o].v;
        if (cr_var_is_const(ys[o])) {
            for (int i = 0; i < nin; i++)
                J[o * nin + i] = 0;
        } else if (cr_tape_gradient(tp, ys[o], in, (size_t)nin, J + o * nin) != CR_OK) {
            return -1;
        }
    }
    return 0;
}

/* ---- Checks ---------------------------------------------------------------------------------- */

static uint64_t st_rng;

static inline double st_unit(void)
{
    uint64_t z = (st_rng += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

typedef struct st_run {
    const char *prog;
    uint64_t seed;
    int checked, skipped, failed, verbose, tape_only, jac_checked, set_checked;
    const st_fn *f;
    int n;
    const double *u;
    int fn_failed;
} st_run;

static inline void st_print_vec(const char *label, const double *v, int k)
{
    printf("    %-9s [", label);
    for (int i = 0; i < k; i++)
        printf("%s%.17g", i ? ", " : "", v[i]);
    printf("]\n");
}

/* got against want: |got - want| <= rtol * scale + 8 err (err: NULL for 0). */
static inline void st_cmp(st_run *r, const char *what, const double *got, const double *want,
                          const double *err, int k, double rtol, double scale)
{
    int bad = 0;
    for (int i = 0; i < k; i++) {
        double tol = rtol * scale + (err ? 8 * err[i] : 0);
        if (!(fabs(got[i] - want[i]) <= tol))
            bad = 1;
    }
    if (!bad && !r->verbose)
        return;
    if (bad) {
        r->fn_failed++;
        printf("FAIL %s %s: %s (seed %#llx, n = %d)\n", r->prog, r->f->name, what,
               (unsigned long long)r->seed, r->n);
        st_print_vec("point", r->u, r->n + r->f->ns);
    } else {
        printf("ok   %s %s: %s\n", r->prog, r->f->name, what);
    }
    st_print_vec("expected", want, k);
    st_print_vec("got", got, k);
    fflush(stdout);
}

static inline double st_maxabs(const double *v, int k)
{
    double m = 0;
    for (int i = 0; i < k; i++)
        if (fabs(v[i]) > m)
            m = fabs(v[i]);
    return m;
}

/* Fourth-order central differences of all outputs along input i at step h. */
static inline void st_fd_dir(const st_fn *f, const double *u, int n, int i, double h, double *d)
{
    static const double o[4] = {-2, -1, 1, 2}, c[4] = {1.0 / 12, -8.0 / 12, 8.0 / 12, -1.0 / 12};
    int nin = n + f->ns, nout = f->ret + f->m;
    double v[ST_INMAX], out[ST_OUTMAX];
    for (int k = 0; k < nout; k++)
        d[k] = 0;
    for (int s = 0; s < 4; s++) {
        memcpy(v, u, sizeof(double) * (size_t)nin);
        v[i] += o[s] * h;
        f->call(v, n, out);
        for (int k = 0; k < nout; k++)
            d[k] += c[s] * out[k] / h;
    }
}

/* The Jacobian by differences (nout x nin) and its estimated error. */
static inline void st_fd_jacobian(const st_fn *f, const double *u, int n, double *J, double *E)
{
    const double h = 1e-3;
    int nin = n + f->ns, nout = f->ret + f->m;
    for (int i = 0; i < nin; i++) {
        double d[ST_OUTMAX], d2[ST_OUTMAX], dh[ST_OUTMAX];
        st_fd_dir(f, u, n, i, h, d);
        st_fd_dir(f, u, n, i, 2 * h, d2);
        st_fd_dir(f, u, n, i, h / 2, dh);
        for (int k = 0; k < nout; k++) {
            J[k * nin + i] = d[k];
            E[k * nin + i] = fmax(fabs(d[k] - d2[k]) / 15, fabs(d[k] - dh[k]) * 16 / 15);
        }
    }
}

/* y = J v (nout x nin), and its error bound from E. */
static inline void st_matvec(const double *J, const double *E, int nout, int nin, const double *v,
                             double *y, double *ey)
{
    for (int k = 0; k < nout; k++) {
        y[k] = 0;
        if (ey)
            ey[k] = 0;
        for (int i = 0; i < nin; i++) {
            y[k] += J[k * nin + i] * v[i];
            if (ey)
                ey[k] += E[k * nin + i] * fabs(v[i]);
        }
    }
}

/* y = w^T J (nin). */
static inline void st_vecmat(const double *J, const double *E, int nout, int nin, const double *w,
                             double *y, double *ey)
{
    for (int i = 0; i < nin; i++) {
        y[i] = 0;
        if (ey)
            ey[i] = 0;
        for (int k = 0; k < nout; k++) {
            y[i] += w[k] * J[k * nin + i];
            if (ey)
                ey[i] += fabs(w[k]) * E[k * nin + i];
        }
    }
}

static inline void st_check_fn(st_run *r, cr_tape *tp, const st_fn *f)
{
    double u[ST_INMAX], out0[ST_OUTMAX], outt[ST_OUTMAX];
    double Jt[ST_OUTMAX * ST_INMAX], Jfd[ST_OUTMAX * ST_INMAX], E[ST_OUTMAX * ST_INMAX];
    int nout = f->ret + f->m, n = 0, nin = 0, good = 0, finite = 0;
    r->f = f;
    r->fn_failed = 0;
    for (int attempt = 0; attempt < 16 && !good; attempt++) {
        n = 1 + (int)(st_unit() * ST_NMAX);
        nin = n + f->ns;
        for (int i = 0; i < nin; i++)
            u[i] = 3 * st_unit() - 1.5;
        f->call(u, n, out0);
        finite = 1;
        for (int k = 0; k < nout; k++)
            finite = finite && isfinite(out0[k]);
        if (!finite)
            continue; /* out of the generator's bounds: not the transformer's fault */
        if (f->tape != NULL) {
            st_margin = INFINITY;
            if (f->tape(tp, u, n, Jt, outt) != 0) {
                printf("FAIL %s %s: the tape version failed: %s\n", r->prog, f->name,
                       cr_tape_errmsg(tp));
                r->failed++;
                return;
            }
            if (st_margin < ST_MARGIN) {
                if (r->verbose)
                    printf("move %s %s: a kink at %g\n", r->prog, f->name, st_margin);
                continue;
            }
        }
        st_fd_jacobian(f, u, n, Jfd, E);
        double scale = fmax(1, st_maxabs(Jfd, nout * nin));
        good = st_maxabs(E, nout * nin) <= 1e-7 * scale;
        if (!good && r->verbose)
            printf("move %s %s: differences unsteady (error %g, scale %g)\n", r->prog, f->name,
                   st_maxabs(E, nout * nin), scale);
    }
    if (!finite) {
        r->skipped++;
        printf("skip %s %s: the primal is not finite at any point tried (seed %#llx)\n", r->prog,
               f->name, (unsigned long long)r->seed);
        return;
    }
    if (!good && f->tape == NULL) {
        r->skipped++;
        if (r->verbose)
            printf("skip %s %s: no point away from the kinks\n", r->prog, f->name);
        return;
    }
    /* No point away from the kinks (a value that stays near one, as y *= tanh(y) driving y
     * to 0): the last point, where the tape and the transformed code take the same path, is
     * checked against the tape alone. */
    if (!good) {
        /* a kink the point could not leave can also give the tape NaN partials on a dead
         * branch (atan2(0, 0) feeding only a comparison): 0 x NaN poisons its gradient */
        for (int i = 0; i < nout * nin; i++)
            if (!isfinite(Jt[i])) {
                r->skipped++;
                if (r->verbose)
                    printf("skip %s %s: the tape's Jacobian is not finite\n", r->prog, f->name);
                return;
            }
        r->tape_only++;
    }
    r->n = n;
    r->u = u;
    double scale = fmax(1, st_maxabs(f->tape ? Jt : Jfd, nout * nin));
    const double *Jref = f->tape ? Jt : Jfd;
    const double *Eref = f->tape ? NULL : E;
    double rtol = f->tape ? 1e-9 : 1e-6;

    if (f->tape && good) {
        st_cmp(r, "primal: tape against f", outt, out0, NULL, nout, 1e-12,
               fmax(1, st_maxabs(out0, nout)));
        st_cmp(r, "Jacobian: tape against differences", Jt, Jfd, E, nout * nin, 1e-6, scale);
    }

    if (f->rev == NULL || f->fwd == NULL) {
        r->checked++;
        if (r->fn_failed)
            r->failed++;
        return;
    }

    /* reverse: g0 + w^T J added into shadows holding g0 */
    double w[ST_OUTMAX], g[ST_INMAX], want[ST_INMAX], ew[ST_INMAX], out[ST_OUTMAX];
    for (int k = 0; k < nout; k++)
        w[k] = 2 * st_unit() - 1;
    for (int i = 0; i < nin; i++)
        g[i] = 0.5;
    int left = f->rev(u, n, w, g, out);
    for (int i = 0; i < nin; i++)
        g[i] -= 0.5;
    st_vecmat(Jref, Eref, nout, nin, w, want, Eref ? ew : NULL);
    double ws = 0;
    for (int k = 0; k < nout; k++)
        ws += fabs(w[k]);
    st_cmp(r, "f_rev: gradient", g, want, Eref ? ew : NULL, nin, rtol, scale * fmax(ws, 1));
    /* The value f_rev returns; the outputs y it leaves as they were on entry (the tool's
     * choice, as Tapenade's), so they are not compared. */
    if (f->ret)
        st_cmp(r, "f_rev: primal", out, out0, NULL, 1, 1e-12, fmax(1, fabs(out0[0])));
    if (left != 0) {
        printf("FAIL %s %s: f_rev left %d output shadows non-zero (seed %#llx)\n", r->prog, f->name,
               left, (unsigned long long)r->seed);
        r->fn_failed++;
    }

    /* f_rev_set: the same gradient assigned into shadows filled with NaN; an element it
     * leaves NaN must have a zero gradient in f_rev (an element the function never reads) */
    if (f->set) {
        double gs[ST_INMAX], gz[ST_INMAX], outs[ST_OUTMAX];
        for (int i = 0; i < nin; i++)
            gs[i] = NAN;
        f->set(u, n, w, gs, outs);
        int unread_bad = 0;
        for (int i = 0; i < nin; i++) {
            gz[i] = isnan(gs[i]) ? 0 : gs[i];
            unread_bad += isnan(gs[i]) && g[i] != 0;
        }
        st_cmp(r, "f_rev_set: gradient", gz, g, NULL, nin, 1e-12, scale * fmax(ws, 1));
        st_cmp(r, "f_rev_set: against the reference", gz, want, Eref ? ew : NULL, nin, rtol,
               scale * fmax(ws, 1));
        if (f->ret)
            st_cmp(r, "f_rev_set: primal", outs, out0, NULL, 1, 1e-12, fmax(1, fabs(out0[0])));
        if (unread_bad) {
            printf("FAIL %s %s: f_rev_set left %d elements of nonzero gradient unwritten (seed "
                   "%#llx)\n",
                   r->prog, f->name, unread_bad, (unsigned long long)r->seed);
            r->fn_failed++;
        }
        r->set_checked++;
    }

    /* forward: J d */
    double du[ST_INMAX * ST_NDMAX], dout[ST_OUTMAX * ST_NDMAX], wantf[ST_OUTMAX * ST_NDMAX],
        ef[ST_OUTMAX * ST_NDMAX];
    for (int i = 0; i < nin * ST_NDMAX; i++)
        du[i] = 2 * st_unit() - 1;
    f->fwd(u, n, du, out, dout);
    st_matvec(Jref, Eref, nout, nin, du, wantf, Eref ? ef : NULL);
    st_cmp(r, "f_fwd: tangent", dout, wantf, Eref ? ef : NULL, nout, rtol, scale * nin);
    st_cmp(r, "f_fwd: primal", out, out0, NULL, nout, 1e-12, fmax(1, st_maxabs(out0, nout)));

    if (f->fwdv) {
#if ST_SPARSE_DIRECTIONS
        /* Each input's tangent nonzero on a short random window of the directions only (or
         * on none), so that a vector mode that tracks nonzero lanes (chainrules-ad
         * --lane-ranges) meets narrow, disjoint and empty ranges. */
        for (int i = 0; i < nin; i++) {
            int lo = (int)(st_unit() * ST_NDMAX),
                len = st_unit() < 0.2 ? 0 : 1 + (int)(st_unit() * 4);
            for (int k = 0; k < ST_NDMAX; k++)
                du[k * nin + i] = k >= lo && k < lo + len ? 2 * st_unit() - 1 : 0;
        }
#endif
        f->fwdv(u, n, du, ST_NDMAX, out, dout);
        for (int k = 0; k < ST_NDMAX; k++)
            st_matvec(Jref, Eref, nout, nin, du + k * nin, wantf + k * nout,
                      Eref ? ef + k * nout : NULL);
        st_cmp(r, "f_fwdv: tangents", dout, wantf, Eref ? ef : NULL, nout * ST_NDMAX, rtol,
               scale * nin);
        st_cmp(r, "f_fwdv: primal", out, out0, NULL, nout, 1e-12, fmax(1, st_maxabs(out0, nout)));
    }

    if (f->jac) {
        double Jj[ST_OUTMAX * ST_INMAX];
        int nonzero = f->jac(u, n, out, Jj);
        st_cmp(r, "f_jacfwd: Jacobian", Jj, Jref, Eref, nout * nin, rtol, scale);
        st_cmp(r, "f_jacfwd: primal", out, out0, NULL, nout, 1e-12, fmax(1, st_maxabs(out0, nout)));
        if (nonzero != 0) {
            printf("FAIL %s %s: f_jacfwd wrote %d non-zero entries that must be zero (seed "
                   "%#llx)\n",
                   r->prog, f->name, nonzero, (unsigned long long)r->seed);
            r->fn_failed++;
        }
        r->jac_checked++;
    }
    r->checked++;
    if (r->fn_failed)
        r->failed++;
}

static inline int st_main(const st_fn *fns, int nf, int argc, char **argv)
{
    st_run r;
    memset(&r, 0, sizeof r);
    r.prog = argc > 0 ? argv[0] : "harness";
    r.seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
    st_rng = r.seed;
    const char *v = getenv("ST_VERBOSE");
    r.verbose = v != NULL && *v != '\0' && *v != '0';
    const char *only = getenv("ST_ONLY");
    cr_ctx *ctx = NULL;
    cr_tape *tp = NULL;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_tape_new(ctx, NULL, &tp) != CR_OK) {
        printf("FAIL %s: cannot create a tape\n", r.prog);
        return 1;
    }
    const char *nofork = getenv("ST_NOFORK");
    int use_fork = ST_FORK && !(nofork != NULL && *nofork != '\0' && *nofork != '0');
    for (int i = 0; i < nf; i++) {
        if (only != NULL && *only != '\0' && strcmp(only, fns[i].name) != 0)
            continue;
        /* each function's points depend on the seed and its place only (ST_ONLY replays) */
        st_rng = r.seed + 0x9E3779B97F4A7C15u * (uint64_t)(i + 1);
#if ST_FORK
        if (use_fork) {
            /* the child reports its counts in its exit status: 64 (its mark: a sanitizer
             * exits with 1) + 1 checked, 2 tape only, 4 skipped, 8 failed, 16 f_jacfwd, 32
             * f_rev_set checked */
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                st_run c = r;
                c.checked = c.tape_only = c.skipped = c.failed = c.jac_checked = 0;
                c.set_checked = 0;
                st_check_fn(&c, tp, &fns[i]);
                fflush(stdout);
                _exit(64 | (c.checked ? 1 : 0) | (c.tape_only ? 2 : 0) | (c.skipped ? 4 : 0) |
                      (c.failed ? 8 : 0) | (c.jac_checked ? 16 : 0) | (c.set_checked ? 32 : 0));
            }
            int status = 0;
            if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
                (WEXITSTATUS(status) & 64) == 0) {
                printf("FAIL %s %s: the check crashed (%s %d, seed %#llx)\n", r.prog, fns[i].name,
                       WIFSIGNALED(status) ? "signal" : "status",
                       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                       (unsigned long long)r.seed);
                r.failed++;
            } else {
                int code = WEXITSTATUS(status);
                r.checked += code & 1;
                r.tape_only += (code >> 1) & 1;
                r.skipped += (code >> 2) & 1;
                r.failed += (code >> 3) & 1;
                r.jac_checked += (code >> 4) & 1;
                r.set_checked += (code >> 5) & 1;
            }
            continue;
        }
#endif
        (void)use_fork;
        st_check_fn(&r, tp, &fns[i]);
    }
    cr_tape_free(tp);
    cr_ctx_free(ctx);
    printf("st-random: %s functions=%d checked=%d tape_only=%d skipped=%d failed=%d "
           "jac_checked=%d set_checked=%d\n",
           r.prog, nf, r.checked, r.tape_only, r.skipped, r.failed, r.jac_checked, r.set_checked);
    return r.failed ? 1 : 0;
}

#define ST_MAIN(table)                                                              \
    int main(int argc, char **argv)                                                 \
    {                                                                               \
        return st_main(table, (int)(sizeof(table) / sizeof(table[0])), argc, argv); \
    }

#endif
