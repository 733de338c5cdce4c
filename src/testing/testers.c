/*
 * test_frule, test_rrule, the frule/rrule dot-product test and test_scalar: call a rule,
 * compare with finite differences of the primal through the flattening (flatten.c), and
 * record every check in a report. ChainRulesTestUtils' testers.jl and check_result.jl
 * list the checks; nothing here prints.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testing_impl.h"

#define DEFAULT_SEED 0x5EEDC0DE2024ull

/* ---- Setup -------------------------------------------------------------------------- */

static void load_opts(const cr_test_opts *in, cr_test_opts *out)
{
    memset(out, 0, sizeof *out);
    if (in == NULL)
        return;
    size_t n =
        in->struct_size == 0 || in->struct_size > sizeof *out ? sizeof *out : in->struct_size;
    memcpy(out, in, n);
    out->struct_size = (uint32_t)sizeof *out;
}

cr_status cr__tester_init(cr__tester *t, cr_arena *arena, const cr_test_opts *opts,
                          const cr_value *vals, size_t nargs, cr_test_report *rep)
{
    memset(t, 0, sizeof *t);
    t->arena = arena;
    t->rep = rep;
    t->nargs = nargs;
    load_opts(opts, &t->o);
    bool f32 = false;
    for (size_t i = 0; vals != NULL && i <= nargs; i++)
        f32 = f32 || cr__test_has_f32(&vals[i]);
    double dflt = f32 ? CR_TEST_F32_TOL : CR_TEST_DEFAULT_TOL;
    t->rtol = t->o.rtol > 0 ? t->o.rtol : dflt;
    t->atol = t->o.atol > 0 ? t->o.atol : dflt;
    t->marginal = t->o.marginal >= 1 ? t->o.marginal : CR_TEST_DEFAULT_MARGINAL;
    if (t->o.fdm != NULL)
        t->fdm = *t->o.fdm;
    else if (cr_fdm_central(5, 1, &t->fdm) != CR_OK)
        return CR_EINVAL;
    memset(&t->fdo, 0, sizeof t->fdo);
    if (t->o.fd_opts != NULL) {
        size_t n = t->o.fd_opts->struct_size == 0 || t->o.fd_opts->struct_size > sizeof t->fdo
                       ? sizeof t->fdo
                       : t->o.fd_opts->struct_size;
        memcpy(&t->fdo, t->o.fd_opts, n);
    }
    t->fdo.struct_size = (uint32_t)sizeof t->fdo;
    if (f32) {
        /* f32 values are rounded to FLT_EPSILON, 2^29 times the round-off of a double:
         * the step must grow accordingly. */
        double factor = (double)FLT_EPSILON / DBL_EPSILON;
        if (t->fdo.factor < factor)
            t->fdo.factor = factor;
    }
    t->rng = t->o.seed != 0 ? t->o.seed : DEFAULT_SEED;
    /* A method or options that finite differences refuse would otherwise read as points
     * outside the domain. */
    if (cr__fd_check(&t->fdm, &t->fdo) != CR_OK) {
        if (rep != NULL)
            cr__test_note(rep, CR_VERDICT_FAIL, HUGE_VAL, "setup", "%s",
                          "invalid finite-difference method or options (opts.fdm, "
                          "opts.fd_opts)");
        return CR_EINVAL;
    }
    return CR_OK;
}

/* ---- Calling the rules --------------------------------------------------------------- */

static bool is_alloc_error(cr_status st)
{
    return st == CR_ENOMEM || st == CR_EARENA || st == CR_EOVERFLOW;
}

static cr_status call_frule(cr__tester *t, const cr_value *vals, const cr_tangent *dargs,
                            cr_value *y, cr_tangent *dy)
{
    memset(y, 0, sizeof *y);
    *dy = cr_tangent_zero();
    if (t->def != NULL) {
        if (t->def->frule == NULL)
            return CR_NOTHING;
        return t->def->frule(t->o.cfg, t->arena, dargs, &vals[0], vals + 1, t->nargs, y, dy,
                             t->def->udata);
    }
    return cr_frule(t->o.cfg, t->arena, dargs, &vals[0], vals + 1, t->nargs, y, dy);
}

static cr_status call_rrule(cr__tester *t, const cr_value *vals, cr_value *y, cr_pullback *pb)
{
    memset(y, 0, sizeof *y);
    memset(pb, 0, sizeof *pb);
    if (t->def != NULL) {
        if (t->def->rrule == NULL)
            return CR_NOTHING;
        cr_status st =
            t->def->rrule(t->o.cfg, t->arena, &vals[0], vals + 1, t->nargs, y, pb, t->def->udata);
        if (st == CR_OK && pb->nx == 0)
            pb->nx = t->nargs + 1;
        return st;
    }
    return cr_rrule(t->o.cfg, t->arena, &vals[0], vals + 1, t->nargs, y, pb);
}

cr_status cr__eval_primal(cr__tester *t, const cr_value *vals, cr_value *y)
{
    const cr_function *fn = vals[0].u.func.fn;
    if (fn != NULL && fn->primal != NULL)
        return cr_function_call(t->arena, &vals[0], vals + 1, t->nargs, y);
    cr_pullback pb;
    cr_status st = call_rrule(t, vals, y, &pb);
    if (st != CR_NOTHING)
        return st;
    size_t nv = t->nargs + 1;
    cr_tangent *z = cr_arena_calloc(t->arena, nv, sizeof *z, _Alignof(cr_tangent));
    if (z == NULL)
        return CR__ALLOC_STATUS(t->arena);
    cr_tangent dy;
    st = call_frule(t, vals, z, y, &dy);
    return st == CR_NOTHING ? CR_ENORULE : st;
}

/* ---- Labels ------------------------------------------------------------------------- */

static void arg_label(const cr_value *vals, size_t i, char *buf, size_t size)
{
    const cr_value *v = &vals[i];
    char kind[48];
    if (v->kind == CR_KIND_ARRAY && v->u.arr != NULL) {
        const cr_array *a = v->u.arr;
        bool dense = a->structure == CR_MAT_DENSE;
        snprintf(kind, sizeof kind, "%s%s%s array",
                 dense ? "" : cr_matstruct_name((cr_matstruct)a->structure), dense ? "" : " ",
                 cr_dtype_name((cr_dtype)a->dtype));
    } else if (v->kind == CR_KIND_STRUCT && v->u.obj.type != NULL && v->u.obj.type->name != NULL) {
        snprintf(kind, sizeof kind, "%s", v->u.obj.type->name);
    } else {
        snprintf(kind, sizeof kind, "%s", cr_kind_name(v->kind));
    }
    if (i == 0)
        snprintf(buf, size, "self (%s)",
                 v->u.func.fn != NULL && v->u.func.fn->name ? v->u.func.fn->name : "?");
    else
        snprintf(buf, size, "argument %zu (%s)", i, kind);
}

/* "name(kind, kind, ...)" of a call. */
static void call_sig(const cr_value *vals, size_t nargs, char *buf, size_t size)
{
    cr_argspec specs[CR_SIG_MAX_ARGS];
    size_t n = nargs < CR_SIG_MAX_ARGS ? nargs : CR_SIG_MAX_ARGS;
    for (size_t i = 0; i < n; i++)
        specs[i] = cr_argspec_of(&vals[i + 1]);
    const cr_function *fn = vals[0].u.func.fn;
    cr_signature_str(fn != NULL && fn->name != NULL ? fn->name : "?", specs, n, nargs > n, buf,
                     size);
}

static const char *ctx_msg(cr__tester *t)
{
    return cr_ctx_errmsg(cr_arena_ctx(t->arena));
}

/* Note a check: where = label + check. */
#define NOTE(t, v, ratio, check, ...)                                 \
    do {                                                              \
        char where_[320];                                             \
        snprintf(where_, sizeof where_, "%s%s", (t)->label, (check)); \
        cr__test_note((t)->rep, (v), (ratio), where_, __VA_ARGS__);   \
    } while (0)

static cr_verdict verdict_of(const cr__tester *t, double ratio)
{
    if (ratio <= 1.0)
        return CR_VERDICT_PASS;
    if (ratio <= t->marginal)
        return CR_VERDICT_MARGINAL;
    return CR_VERDICT_FAIL;
}

/* The point cannot be tested (CR_EDOMAIN), for the reason given. */
static cr_status not_testable(cr__tester *t, const char *why)
{
    t->skip_why = why;
    return CR_EDOMAIN;
}

/* A rule or pullback returned an error: BROKEN for CR_EUNIMPL, FAIL otherwise. Returns the
 * status the tester should return (allocation errors end the test). */
static cr_status rule_error(cr__tester *t, const char *check, const char *what, cr_status st)
{
    if (is_alloc_error(st))
        return st;
    if (st == CR_EUNIMPL)
        NOTE(t, CR_VERDICT_BROKEN, 0, check, "%s is not implemented (CR_EUNIMPL): %s", what,
             ctx_msg(t));
    else
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check, "%s failed with %s: %s", what, cr_status_name(st),
             ctx_msg(t));
    return CR_OK;
}

/* ---- Comparisons -------------------------------------------------------------------- */

static double *alloc_doubles(cr__tester *t, size_t n)
{
    return cr_arena_calloc(t->arena, n ? n : 1, sizeof(double), _Alignof(double));
}

/* A comparison of components a (the rule's) with b (the reference): the worst component
 * by error / tolerance, the error maxima, and whether the reference cannot decide. */
typedef struct measure {
    double worst, wa, wb, wtol, max_abs, max_rel, amax;
    size_t wk;
    bool inconclusive;
} measure;

/* A finite-difference value whose error estimate exceeds this fraction of its magnitude
 * cannot decide a comparison (nor can a huge one against an overflowed rule value). */
#define FD_DECISIVE    1e-3
#define FD_OVERFLOWISH 1e150

/* Measures a against b; err (may be NULL) holds the reference's estimated error per
 * component, err_all one for every component: the tolerance is
 * max(atol, rtol * max(|a|, |b|), err). */
static void measure_comps(const double *a, const double *b, const double *err, double err_all,
                          size_t n, double rtol, double atol, measure *m)
{
    memset(m, 0, sizeof *m);
    m->wk = SIZE_MAX;
    for (size_t k = 0; k < n; k++) {
        double ak = a[k], bk = b[k];
        bool same = ak == bk || (isnan(ak) && isnan(bk));
        double e = same ? 0 : fabs(ak - bk);
        double s = fmax(fabs(ak), fabs(bk));
        double fe = err != NULL ? fabs(err[k]) : err_all;
        double base = fmax(atol, rtol * s), tol = base, ratio;
        if (!same && (!isfinite(ak) || !isfinite(bk))) {
            ratio = HUGE_VAL;
            /* An overflowed derivative against a huge finite difference: undecidable. */
            if (isinf(ak) && isfinite(bk) && fabs(bk) > FD_OVERFLOWISH)
                m->inconclusive = true;
        } else {
            if (isfinite(fe))
                tol = fmax(tol, fe);
            ratio = tol > 0 ? e / tol : (e > 0 ? HUGE_VAL : 0);
            if (e > base && !(fe <= fmax(atol, FD_DECISIVE * s)))
                m->inconclusive = true;
        }
        if (isfinite(s))
            m->amax = fmax(m->amax, s);
        if (isfinite(e)) {
            m->max_abs = fmax(m->max_abs, e);
            if (s > atol) /* not for components that are zero up to atol */
                m->max_rel = fmax(m->max_rel, e / s);
        } else {
            m->max_abs = m->max_rel = HUGE_VAL;
        }
        if (m->wk == SIZE_MAX || ratio > m->worst) {
            m->worst = ratio;
            m->wk = k;
            m->wa = ak;
            m->wb = bk;
            m->wtol = tol;
        }
    }
}

/* Notes the check a measure describes; imag is the largest imaginary part the rule's
 * tangent of a real value carried. */
static void note_measure(cr__tester *t, const char *check, const cr_value *tmpl, const measure *m,
                         double imag)
{
    cr__test_errors(t->rep, m->max_abs, m->max_rel);
    double itol = fmax(t->atol, t->rtol * m->amax);
    double iratio = itol > 0 ? imag / itol : (imag > 0 ? HUGE_VAL : 0);
    if (iratio > m->worst && iratio > 1) {
        NOTE(t, verdict_of(t, iratio), iratio, check,
             "an imaginary part of %.3g in the tangent of a real value (missing projection or "
             "real part)",
             imag);
        return;
    }
    if (m->wk == SIZE_MAX || m->worst <= 1.0) {
        NOTE(t, CR_VERDICT_PASS, m->worst, check, "%s", "");
        return;
    }
    char where[160], name[96];
    cr__test_comp_name(tmpl, m->wk, name, sizeof name);
    if (name[0] != '\0')
        snprintf(where, sizeof where, "%s, component %s", check, name);
    else
        snprintf(where, sizeof where, "%s", check);
    NOTE(t, verdict_of(t, m->worst), m->worst, where,
         "rule gives %.17g, expected %.17g (error %.3g, tolerance %.3g)", m->wa, m->wb,
         fabs(m->wa - m->wb), m->wtol);
}

/* Compares components and notes one check. */
static void compare_comps(cr__tester *t, const char *check, const cr_value *tmpl, const double *a,
                          const double *b, size_t n, double imag)
{
    measure m;
    measure_comps(a, b, NULL, 0, n, t->rtol, t->atol, &m);
    note_measure(t, check, tmpl, &m, imag);
}

/* The components of the rule's tangent ad of tmpl into a. A NotImplemented tangent is
 * noted BROKEN, one that does not fit the value FAIL; *noted says so. */
static cr_status rule_comps(cr__tester *t, const char *check, const cr_value *tmpl, cr_tangent ad,
                            double *a, size_t n, double *imag, bool *noted)
{
    char msg[200];
    *noted = false;
    *imag = 0;
    cr_status st = cr__test_expand(tmpl, ad, a, n, imag, msg, sizeof msg);
    if (st == CR_EUNIMPL) {
        NOTE(t, CR_VERDICT_BROKEN, 0, check, "NotImplemented%s%s", msg[0] ? ": " : "", msg);
        *noted = true;
        return CR_OK;
    }
    if (is_alloc_error(st))
        return st;
    if (st != CR_OK) {
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check, "the rule's tangent does not fit the value: %s",
             msg[0] ? msg : cr_status_str(st));
        *noted = true;
    }
    return CR_OK;
}

/* Compares tangent ad with the reference ref (tangents of tmpl) in logical components. */
static cr_status compare_tangents(cr__tester *t, const char *check, const cr_value *tmpl,
                                  cr_tangent ad, cr_tangent ref)
{
    size_t n = cr__test_ncomps(tmpl);
    double *a = alloc_doubles(t, n), *b = alloc_doubles(t, n);
    if (a == NULL || b == NULL)
        return CR__ALLOC_STATUS(t->arena);
    double imag;
    bool noted;
    cr_status st = rule_comps(t, check, tmpl, ad, a, n, &imag, &noted);
    if (st != CR_OK || noted)
        return st;
    char msg[200];
    st = cr__test_expand(tmpl, ref, b, n, NULL, msg, sizeof msg);
    if (st == CR_EUNIMPL) {
        NOTE(t, CR_VERDICT_BROKEN, 0, check, "NotImplemented reference%s%s", msg[0] ? ": " : "",
             msg);
        return CR_OK;
    }
    if (st != CR_OK)
        return st;
    compare_comps(t, check, tmpl, a, b, n, imag);
    return CR_OK;
}

/* The primal check: the rule's output y against the primal's y0. */
static cr_status compare_values(cr__tester *t, const char *check, const cr_value *y,
                                const cr_value *y0)
{
    size_t n = cr__test_ncomps(y0), n1 = cr__test_ncomps(y);
    if (n != n1 || cr__test_hash_discrete(y) != cr__test_hash_discrete(y0)) {
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check,
             "the rule's output (%s, %zu real components) differs in kind, shape or integer "
             "parts from the primal's (%s, %zu)",
             cr_kind_name(y->kind), n1, cr_kind_name(y0->kind), n);
        return CR_OK;
    }
    double *a = alloc_doubles(t, n), *b = alloc_doubles(t, n);
    if (a == NULL || b == NULL)
        return CR__ALLOC_STATUS(t->arena);
    if (cr__test_expand_value(y, a, n) != CR_OK || cr__test_expand_value(y0, b, n) != CR_OK) {
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check, "%s", "the output cannot be read");
        return CR_OK;
    }
    compare_comps(t, check, y0, a, b, n, 0);
    return CR_OK;
}

/* The tangent a test uses for the value v: the caller's (given), or a random one of v. */
static cr_status given_or_random(cr__tester *t, const cr_tangent *given, const cr_value *v,
                                 cr_tangent *out)
{
    if (given == NULL)
        return cr_rand_tangent(t->arena, &t->rng, v, out);
    *out = *given;
    return CR_OK;
}

/* After the frule or rrule (which) returned st: true to go on; false, with *out the tester's
 * status, when no such rule applies (a failure; CR_ENORULE) or the rule failed (rule_error). */
static bool rule_called(cr__tester *t, const char *which, const cr_value *vals, cr_status st,
                        cr_status *out)
{
    char the[16];
    snprintf(the, sizeof the, "the %s", which);
    if (st == CR_NOTHING) {
        char sig[160];
        call_sig(vals, t->nargs, sig, sizeof sig);
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, which, "no %s applies to %s", which, sig);
        *out = CR_ENORULE;
    } else {
        *out = st == CR_OK ? CR_OK : rule_error(t, which, the, st);
    }
    return st == CR_OK;
}

/* The rule's primal y compared with y0 (check), then the output tangent the test uses: the
 * caller's (given) or a random one of y0. */
static cr_status primal_and_tangent(cr__tester *t, const char *check, const cr_value *y,
                                    const cr_value *y0, const cr_tangent *given, cr_tangent *out)
{
    cr_status st = compare_values(t, check, y, y0);
    return st != CR_OK ? st : given_or_random(t, given, y0, out);
}

/* add!!(copy(acc), val) == acc + val (accumulation first, so an InplaceableThunk's add!
 * is exercised before anything evaluates it). */
static cr_status check_accum(cr__tester *t, const char *check, const cr_value *tmpl, cr_tangent acc,
                             cr_tangent val)
{
    if (acc.tag == CR_TAN_NONE)
        return CR_OK;
    if (val.tag == CR_TAN_NOTIMPL) {
        NOTE(t, CR_VERDICT_BROKEN, 0, check, "NotImplemented: %s",
             val.u.ni && val.u.ni->msg ? val.u.ni->msg : "");
        return CR_OK;
    }
    cr_tangent copy, r1, r2;
    cr_status st = cr_tangent_copy(t->arena, acc, &copy);
    if (st != CR_OK)
        return st;
    st = cr_tangent_accum(t->arena, copy, val, &r1);
    if (st == CR_OK)
        st = cr_tangent_add(t->arena, acc, val, &r2);
    if (st != CR_OK) {
        if (is_alloc_error(st))
            return st;
        NOTE(t, st == CR_EUNIMPL ? CR_VERDICT_BROKEN : CR_VERDICT_FAIL,
             st == CR_EUNIMPL ? 0 : HUGE_VAL, check, "add!! or + failed with %s: %s",
             cr_status_name(st), ctx_msg(t));
        return CR_OK;
    }
    return compare_tangents(t, check, tmpl, r1, r2);
}

/* ---- Mutation ----------------------------------------------------------------------- */

static void hash_values(const cr_value *vals, size_t nv, uint64_t *h)
{
    for (size_t i = 0; i < nv; i++)
        h[i] = cr__test_hash_value(&vals[i], 0);
}

/* One check: the values still hash to h (and the tangents to ht when given). */
static void check_unmutated(cr__tester *t, const char *check, const char *by, const cr_value *vals,
                            size_t nv, const uint64_t *h, const cr_tangent *tans, size_t nt,
                            const uint64_t *ht, const char *tan_what)
{
    for (size_t i = 0; i < nv; i++)
        if (cr__test_hash_value(&vals[i], 0) != h[i]) {
            char lab[96];
            arg_label(vals, i, lab, sizeof lab);
            NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check, "%s mutated its input %s", by, lab);
            return;
        }
    for (size_t i = 0; i < nt; i++)
        if (cr__test_hash_tangent(tans[i], 0) != ht[i]) {
            char lab[96];
            if (nt == 1)
                snprintf(lab, sizeof lab, "%s", tan_what);
            else {
                char a[80];
                arg_label(vals, i, a, sizeof a);
                snprintf(lab, sizeof lab, "%s of %s", tan_what, a);
            }
            NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check, "%s mutated its input %s", by, lab);
            return;
        }
    NOTE(t, CR_VERDICT_PASS, 0, check, "%s", "");
}

/* ---- Finite differences ------------------------------------------------------------- */

/* Finite differences run on the real parameter t of
 *     t -> flatten(f(unflatten(x + t dir)))
 * (cr_fd_jvp with one input), so that the tester knows the intended displacement t dir
 * and can see when x + t dir rounds it away: at |x| = 1e300 no step can be resolved, and
 * the result would be meaningless. The coordinates x are those of the perturbed values,
 * concatenated. */
typedef struct fd_env {
    cr__tester *t;
    const cr_value *vals;
    const bool *perturbed;
    const size_t *off, *nc;
    cr_value *work;
    size_t n, m;       /* coordinates, outputs */
    const double *x;   /* base coordinates */
    const double *dir; /* direction */
    double *xt;        /* x + t dir */
    double maxdev;     /* largest relative rounding of a displacement seen */
    double radius;     /* largest |t| evaluated */
} fd_env;

static cr_status fd_fn(const double *tp, size_t one, double *y, size_t m, void *env)
{
    fd_env *e = env;
    cr__tester *t = e->t;
    (void)one;
    double tt = tp[0], dev = 0, disp = 0;
    e->radius = fmax(e->radius, fabs(tt));
    for (size_t k = 0; k < e->n; k++) {
        double d = tt * e->dir[k];
        double s = e->x[k] + d;
        e->xt[k] = s;
        dev = fmax(dev, fabs((s - e->x[k]) - d));
        disp = fmax(disp, fabs(d));
    }
    if (disp > 0)
        e->maxdev = fmax(e->maxdev, dev / disp);
    cr_arena_mark mark = cr_arena_get_mark(t->arena);
    cr_status st = CR_OK;
    for (size_t i = 0; i <= t->nargs && st == CR_OK; i++) {
        if (e->perturbed[i])
            st = cr_test_unflatten(t->arena, &e->vals[i], e->xt + e->off[i], e->nc[i], &e->work[i]);
        else
            e->work[i] = e->vals[i];
    }
    cr_value out;
    if (st == CR_OK)
        st = cr__eval_primal(t, e->work, &out);
    if (st == CR_OK)
        st = cr_test_flat_size(&out) == m ? cr_test_flatten(&out, y, m) : CR_ESHAPE;
    cr_arena_rewind(t->arena, mark);
    return st;
}

/* Flattens the perturbed values into e->x; sets the offsets and scratch. */
static cr_status fd_setup(cr__tester *t, const cr_value *vals, const bool *perturbed, fd_env *e)
{
    size_t nv = t->nargs + 1;
    *e = (fd_env){.t = t, .vals = vals, .perturbed = perturbed};
    size_t *off = cr_arena_calloc(t->arena, nv, sizeof *off, _Alignof(size_t));
    size_t *nc = cr_arena_calloc(t->arena, nv, sizeof *nc, _Alignof(size_t));
    e->work = cr_arena_calloc(t->arena, nv, sizeof *e->work, _Alignof(cr_value));
    if (off == NULL || nc == NULL || e->work == NULL)
        return CR__ALLOC_STATUS(t->arena);
    size_t total = 0;
    for (size_t i = 0; i < nv; i++) {
        off[i] = total;
        nc[i] = perturbed[i] ? cr_test_flat_size(&vals[i]) : 0;
        total += nc[i];
    }
    double *xs = alloc_doubles(t, total);
    e->xt = alloc_doubles(t, total);
    if (xs == NULL || e->xt == NULL)
        return CR__ALLOC_STATUS(t->arena);
    for (size_t i = 0; i < nv; i++)
        if (perturbed[i] && cr_test_flatten(&vals[i], xs + off[i], nc[i]) != CR_OK)
            return CR_EINVAL;
    e->off = off;
    e->nc = nc;
    e->n = total;
    e->x = xs;
    return CR_OK;
}

/* The distances (in t, per unit of the direction's largest component) tried when finite
 * differences leave the domain. */
static const double k_ranges[] = {0.0, 0.1, 1e-3};

/* Fraction of a non-zero coordinate's magnitude that finite differences may move it by. */
#define GUARD 0.1

/* d/dt flatten(f(x + t dir)) at 0 into out (e->m values), its estimated error in *err.
 * CR_EDOMAIN when the point cannot be tested by finite differences: the function is not
 * finite nearby, or the step cannot be resolved at the magnitude of x. */
static cr_status fd_dir(cr__tester *t, fd_env *e, const cr_fdm *method, const double *dir,
                        double *out, double *err)
{
    e->dir = dir;
    double vmax = 0, guard = 0;
    for (size_t k = 0; k < e->n; k++) {
        vmax = fmax(vmax, fabs(dir[k]));
        /* Never cross zero in a coordinate that is not zero: kinks, jumps and branch cuts
         * sit there more often than anywhere else (|x|, sign, relu, arguments on the
         * real axis); nor move it by more than a tenth of itself, where singularities at
         * zero (1/x, log) would make the estimate inaccurate. */
        if (dir[k] != 0 && e->x[k] != 0) {
            double r = GUARD * fabs(e->x[k] / dir[k]);
            if (!(r >= 1e3 * DBL_MIN))
                return not_testable(t, "no finite-difference step stays on this side of zero");
            guard = guard > 0 ? fmin(guard, r) : r;
        }
    }
    if (vmax == 0) {
        memset(out, 0, e->m * sizeof *out);
        *err = 0;
        return CR_OK;
    }
    static const double zero = 0, unit = 1;
    cr_status st = CR_EDOMAIN;
    for (size_t r = 0; r < sizeof k_ranges / sizeof k_ranges[0] && st == CR_EDOMAIN; r++) {
        cr_fd_opts fo = t->fdo;
        double range = guard;
        if (k_ranges[r] > 0)
            range = range > 0 ? fmin(range, k_ranges[r] / vmax) : k_ranges[r] / vmax;
        if (range > 0)
            fo.max_range = fo.max_range > 0 ? fmin(fo.max_range, range) : range;
        if (fo.max_range > 0 && fo.max_range < 1e3 * DBL_MIN)
            return not_testable(t, "no finite-difference step stays on this side of zero");
        if (fo.step > 0 && fo.max_range > 0 && fo.step * CR_FD_MAX_POINTS > fo.max_range)
            fo.step = 0;
        e->maxdev = 0;
        e->radius = 0;
        st = cr_fd_jvp(method, &fo, fd_fn, e, &zero, 1, &unit, e->m, t->arena, out, err);
        if (st == CR_EINVAL && range > 0)
            st = CR_EDOMAIN; /* the range we imposed leaves no usable step */
    }
    if (st == CR_OK && !(e->maxdev <= 0.1 * t->rtol))
        return not_testable(t, "no finite-difference step can be resolved at this magnitude of the "
                               "arguments");
    if (st == CR_EDOMAIN)
        return not_testable(t, "finite differences leave the function's domain");
    return st;
}

/* A second method, to confirm a disagreement: two more points (two fewer for large p). */
static cr_status second_method(const cr__tester *t, cr_fdm *m2)
{
    int p = t->fdm.p <= 9 ? t->fdm.p + 4 : t->fdm.p - 2;
    cr_fd_grid kind = t->fdm.kind == CR_FD_GRID_CUSTOM ? CR_FD_GRID_CENTRAL : t->fdm.kind;
    return cr_fdm_make(kind, p, t->fdm.q, 0, m2);
}

/* J v: the frule's reference, as logical components of the output y0 (b, with the
 * estimated error of each in eb). */
static cr_status fd_jvp_comps(cr__tester *t, fd_env *e, const cr_fdm *method, const double *v,
                              const cr_value *y0, double *b, double *eb, size_t ncomp,
                              double *radius)
{
    double *jv = alloc_doubles(t, e->m);
    if (jv == NULL)
        return CR__ALLOC_STATUS(t->arena);
    double err = 0;
    cr_status st = fd_dir(t, e, method, v, jv, &err);
    if (st != CR_OK)
        return st;
    *radius = e->radius;
    cr_tangent ref;
    st = cr_test_tangent_unflatten(t->arena, y0, jv, e->m, &ref);
    if (st == CR_OK)
        st = cr__test_expand(y0, ref, b, ncomp, NULL, NULL, 0);
    for (size_t k = 0; k < ncomp; k++)
        eb[k] = err;
    return st;
}

/* J' ybar in coordinates (jtv, with errors), one direction e_j per coordinate. */
static cr_status fd_jtvp(cr__tester *t, fd_env *e, const cr_fdm *method, const double *ybar,
                         double *jtv, double *err, double *radius)
{
    double *dir = alloc_doubles(t, e->n), *col = alloc_doubles(t, e->m);
    if (dir == NULL || col == NULL)
        return CR__ALLOC_STATUS(t->arena);
    double ysum = 0;
    for (size_t i = 0; i < e->m; i++)
        ysum += fabs(ybar[i]);
    for (size_t j = 0; j < e->n; j++) {
        dir[j] = 1;
        double cerr = 0;
        cr_status st = fd_dir(t, e, method, dir, col, &cerr);
        dir[j] = 0;
        if (st != CR_OK)
            return st;
        double acc = 0;
        for (size_t i = 0; i < e->m; i++)
            acc += ybar[i] * col[i];
        jtv[j] = acc;
        err[j] = cerr * ysum;
        radius[j] = e->radius;
    }
    return CR_OK;
}

/* The natural cotangent of vals[i] from dual coordinates (jtv, err) as logical components
 * (b, eb): the dual coordinates are divided by the coordinates' weights. */
static cr_status cotangent_comps(cr__tester *t, const cr_value *v, const double *jtv,
                                 const double *err, size_t nc, double *b, double *eb, size_t ncomp)
{
    double *w = alloc_doubles(t, nc), *c = alloc_doubles(t, nc), *ce = alloc_doubles(t, nc);
    double *tmp = alloc_doubles(t, ncomp);
    if (w == NULL || c == NULL || ce == NULL || tmp == NULL)
        return CR__ALLOC_STATUS(t->arena);
    cr__test_weights(v, w, nc);
    for (size_t k = 0; k < nc; k++) {
        c[k] = jtv[k] / w[k];
        ce[k] = err[k] / w[k];
    }
    cr_tangent ref, reft;
    cr_status st = cr_test_tangent_unflatten(t->arena, v, c, nc, &ref);
    if (st == CR_OK)
        st = cr_test_tangent_unflatten(t->arena, v, ce, nc, &reft);
    if (st == CR_OK)
        st = cr__test_expand(v, ref, b, ncomp, NULL, NULL, 0);
    if (st == CR_OK)
        st = cr__test_expand(v, reft, tmp, ncomp, NULL, NULL, 0);
    for (size_t k = 0; k < ncomp && st == CR_OK; k++)
        eb[k] = fabs(tmp[k]);
    return st;
}

/* Whether the rule says the function changes by far more than its own size, and than
 * finite differences saw, within the finite-difference stencil (of radius `radius` in the
 * parameter t): a pole or a jump inside the stencil, where finite differences cannot test
 * the rule (tan at fl(pi/2)). amax and bmax are the largest components of the rule's and
 * the finite differences' derivative, fscale the size of the function. */
static bool beyond_stencil(const double *a, const double *b, size_t n, double fscale, double radius)
{
    double amax = 0, bmax = 0;
    for (size_t k = 0; k < n; k++) {
        amax = fmax(amax, fabs(a[k]));
        bmax = fmax(bmax, fabs(b[k]));
    }
    return amax * radius > 1e4 * (fscale + bmax * radius);
}

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t k = 0; k < n; k++)
        m = fmax(m, fabs(x[k]));
    return m;
}

/* Whether a measure against finite differences needs a second opinion. */
static bool needs_confirmation(const measure *m)
{
    return m->worst > 1.0 || m->inconclusive;
}

/* Re-measures a against the second method's b2 when it has more points than the first
 * (b1 otherwise), with the disagreement of the two, |b1 - b2|, as the reference's error;
 * CR_EDOMAIN when even that cannot decide. */
static cr_status confirm(cr__tester *t, const cr_fdm *m2, const double *a, const double *b1,
                         const double *b2, size_t n, measure *m)
{
    double *d = alloc_doubles(t, n);
    if (d == NULL)
        return CR__ALLOC_STATUS(t->arena);
    for (size_t k = 0; k < n; k++)
        d[k] = fabs(b1[k] - b2[k]);
    measure_comps(a, m2->p > t->fdm.p ? b2 : b1, d, 0, n, t->rtol, t->atol, m);
    return m->inconclusive ? not_testable(t, "finite differences are not accurate enough here (two "
                                             "methods disagree)")
                           : CR_OK;
}

static bool primal_ok(cr__tester *t, const cr_value *vals, cr_value *y0, cr_status *st)
{
    *st = cr__eval_primal(t, vals, y0);
    if (*st == CR_EDOMAIN)
        *st = not_testable(t, "the primal fails with CR_EDOMAIN here");
    if (*st == CR_ENORULE) {
        char sig[160];
        call_sig(vals, t->nargs, sig, sizeof sig);
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, "primal value",
             "%s has no primal and no rule applies to compute its value", sig);
    } else if (*st != CR_OK && *st != CR_EDOMAIN) {
        t->primal_failed = true;
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, "primal value", "f(args) failed with %s: %s",
             cr_status_name(*st), ctx_msg(t));
    }
    if (*st != CR_OK)
        return false;
    if (!cr__test_is_finite(y0)) {
        *st = not_testable(t, "the primal is not finite here");
        return false;
    }
    return true;
}

cr_status cr__run_frule(cr__tester *t, const cr_value *vals, const cr_tangent *dargs,
                        const cr_tangent *acc)
{
    size_t nv = t->nargs + 1;
    uint64_t *h = cr_arena_alloc(t->arena, 2 * nv * sizeof *h, _Alignof(uint64_t));
    if (h == NULL)
        return CR__ALLOC_STATUS(t->arena);
    uint64_t *ht = h + nv;
    hash_values(vals, nv, h);
    for (size_t i = 0; i < nv; i++)
        ht[i] = cr__test_hash_tangent(dargs[i], 0);

    cr_value y0;
    cr_status st;
    if (!primal_ok(t, vals, &y0, &st))
        return st;
    /* The input tangents must fit their values (and a NotImplemented one cannot be used). */
    for (size_t i = 0; i < nv; i++) {
        char msg[200];
        double imag = 0;
        size_t ncomp = cr__test_ncomps(&vals[i]);
        double *comps = alloc_doubles(t, ncomp);
        if (comps == NULL)
            return CR__ALLOC_STATUS(t->arena);
        st = cr__test_expand(&vals[i], dargs[i], comps, ncomp, &imag, msg, sizeof msg);
        if (st == CR_OK && imag > 0)
            snprintf(msg, sizeof msg, "a complex tangent for a real value");
        if (st != CR_OK || imag > 0) {
            char lab[96];
            arg_label(vals, i, lab, sizeof lab);
            NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, "frule: input tangents",
                 "the input tangent of %s does not fit it: %s", lab,
                 msg[0] ? msg : cr_status_name(st));
            return is_alloc_error(st) ? st : CR_EINVAL;
        }
    }

    cr_value y;
    cr_tangent dy;
    if (!rule_called(t, "frule", vals, call_frule(t, vals, dargs, &y, &dy), &st))
        return st;
    check_unmutated(t, "frule: inputs not mutated", "the frule", vals, nv, h, dargs, nv, ht,
                    "tangent");

    cr_tangent accum;
    st = primal_and_tangent(t, "frule: primal value", &y, &y0, acc, &accum);
    if (st != CR_OK)
        return st;
    st = check_accum(t, "frule: add!! of the output tangent", &y0, accum, dy);
    if (st != CR_OK)
        return st;

    /* Finite differences: d/dt flatten(f(x + t ẋ)) over the arguments whose tangent is not
     * NoTangent. */
    static const char check[] = "frule: tangent of the output (vs finite differences)";
    size_t ncomp = cr__test_ncomps(&y0);
    double *a = alloc_doubles(t, ncomp), *b = alloc_doubles(t, ncomp);
    double *eb = alloc_doubles(t, ncomp), imag;
    bool *pert = cr_arena_calloc(t->arena, nv, sizeof *pert, _Alignof(bool));
    if (a == NULL || b == NULL || eb == NULL || pert == NULL)
        return CR__ALLOC_STATUS(t->arena);
    bool noted;
    st = rule_comps(t, check, &y0, dy, a, ncomp, &imag, &noted);
    if (st != CR_OK || noted)
        return st;
    for (size_t i = 0; i < nv; i++)
        pert[i] = dargs[i].tag != CR_TAN_NONE && cr_test_flat_size(&vals[i]) > 0;
    fd_env e;
    st = fd_setup(t, vals, pert, &e);
    if (st != CR_OK)
        return st;
    e.m = cr_test_flat_size(&y0);
    measure m;
    if (e.n == 0 || e.m == 0) {
        /* Nothing is perturbed, or the output has no coordinates: the tangent is zero. */
        measure_comps(a, b, NULL, 0, ncomp, t->rtol, t->atol, &m);
        note_measure(t, check, &y0, &m, imag);
        return CR_OK;
    }
    double *v = alloc_doubles(t, e.n);
    if (v == NULL)
        return CR__ALLOC_STATUS(t->arena);
    for (size_t i = 0; i < nv; i++)
        if (pert[i] && cr_test_tangent_flatten(&vals[i], dargs[i], v + e.off[i], e.nc[i]) != CR_OK)
            return CR_EINVAL; /* checked above */
    double radius = 0, radius2 = 0;
    st = fd_jvp_comps(t, &e, &t->fdm, v, &y0, b, eb, ncomp, &radius);
    if (st != CR_OK)
        return st;
    measure_comps(a, b, eb, 0, ncomp, t->rtol, t->atol, &m);
    if (needs_confirmation(&m)) {
        cr_fdm m2;
        double *b2 = alloc_doubles(t, ncomp), *eb2 = alloc_doubles(t, ncomp);
        double *yv = alloc_doubles(t, ncomp);
        if (b2 == NULL || eb2 == NULL || yv == NULL)
            return CR__ALLOC_STATUS(t->arena);
        st = second_method(t, &m2);
        if (st == CR_OK)
            st = fd_jvp_comps(t, &e, &m2, v, &y0, b2, eb2, ncomp, &radius2);
        if (st == CR_OK)
            st = confirm(t, &m2, a, b, b2, ncomp, &m);
        if (st == CR_OK && m.worst > 1.0 && cr__test_expand_value(&y0, yv, ncomp) == CR_OK &&
            beyond_stencil(a, b, ncomp, max_abs(yv, ncomp), fmax(radius, radius2)))
            st = not_testable(t, "a pole or jump lies inside the finite-difference stencil");
        if (st != CR_OK)
            return st;
    }
    note_measure(t, check, &y0, &m, imag);
    return CR_OK;
}

/* ---- test_rrule --------------------------------------------------------------------- */

typedef struct seed_env {
    cr_tangent seed;
} seed_env;

static cr_status seed_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)arena;
    *out = ((seed_env *)env)->seed;
    return CR_OK;
}

static bool tangent_is_zero_like(cr_tangent t)
{
    return t.tag == CR_TAN_ZERO || t.tag == CR_TAN_NONE;
}

cr_status cr__run_rrule(cr__tester *t, const cr_value *vals, const cr_tangent *ybar,
                        const cr_tangent *accs)
{
    size_t nv = t->nargs + 1;
    uint64_t *h = cr_arena_alloc(t->arena, nv * sizeof *h, _Alignof(uint64_t));
    if (h == NULL)
        return CR__ALLOC_STATUS(t->arena);
    hash_values(vals, nv, h);

    cr_value y0;
    cr_status st;
    if (!primal_ok(t, vals, &y0, &st))
        return st;

    cr_value y;
    cr_pullback pb;
    if (!rule_called(t, "rrule", vals, call_rrule(t, vals, &y, &pb), &st))
        return st;
    cr_tangent yb;
    st = primal_and_tangent(t, "rrule: primal value", &y, &y0, ybar, &yb);
    if (st != CR_OK)
        return st;
    uint64_t hy = cr__test_hash_tangent(yb, 0);

    if (pb.nx != nv) {
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, "rrule: number of cotangents",
             "the pullback %s returns %zu cotangents, expected %zu (one for self and one per "
             "argument)",
             pb.name ? pb.name : "(unnamed)", pb.nx, nv);
        return CR_OK;
    }
    NOTE(t, CR_VERDICT_PASS, 0, "rrule: number of cotangents", "%s", "");
    cr_tangent *dx = cr_arena_calloc(t->arena, 2 * nv, sizeof *dx, _Alignof(cr_tangent));
    cr_tangent *acc = cr_arena_calloc(t->arena, nv, sizeof *acc, _Alignof(cr_tangent));
    if (dx == NULL || acc == NULL)
        return CR__ALLOC_STATUS(t->arena);
    cr_tangent *dx2 = dx + nv;
    st = cr_pullback_call(t->arena, &pb, &yb, dx, nv);
    if (st != CR_OK)
        return rule_error(t, "rrule: pullback", "the pullback", st);
    check_unmutated(t, "rrule: inputs not mutated", "the rrule or its pullback", vals, nv, h, &yb,
                    1, &hy, "seed (output cotangent)");

    for (size_t i = 0; i < nv; i++)
        if ((st = given_or_random(t, accs ? &accs[i] : NULL, &vals[i], &acc[i])) != CR_OK)
            return st;

    /* Per argument: NoTangent for what cannot be perturbed; accumulation for the rest. */
    bool *pert = cr_arena_calloc(t->arena, nv, sizeof *pert, _Alignof(bool));
    if (pert == NULL)
        return CR__ALLOC_STATUS(t->arena);
    for (size_t i = 0; i < nv; i++) {
        char lab[96], check[160];
        arg_label(vals, i, lab, sizeof lab);
        size_t nc = cr_test_flat_size(&vals[i]);
        if (acc[i].tag == CR_TAN_NONE) {
            if (nc > 0 || tangent_is_zero_like(yb))
                continue; /* perturbable but not tested; or the engine answered for a zero */
            snprintf(check, sizeof check, "rrule: cotangent of %s (not perturbable)", lab);
            switch ((cr_tag)dx[i].tag) {
            case CR_TAN_NONE:
                NOTE(t, CR_VERDICT_PASS, 0, check, "%s", "");
                break;
            case CR_TAN_ZERO:
                NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check,
                     "the pullback should use NoTangent rather than ZeroTangent for "
                     "non-perturbable arguments");
                break;
            case CR_TAN_NOTIMPL:
                NOTE(t, CR_VERDICT_BROKEN, 0, check,
                     "NotImplemented for an argument that cannot be perturbed (NoTangent would "
                     "be right)");
                break;
            default:
                NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check,
                     "a %s cotangent for an argument that cannot be perturbed (expected "
                     "NoTangent)",
                     cr_tag_name((cr_tag)dx[i].tag));
                break;
            }
            continue;
        }
        pert[i] = nc > 0;
        snprintf(check, sizeof check, "rrule: add!! into the accumulator of %s", lab);
        st = check_accum(t, check, &vals[i], acc[i], dx[i]);
        if (st != CR_OK)
            return st;
    }

    /* A thunked seed gives the same cotangents. */
    if (!(t->o.flags & CR_TEST_NO_THUNK_CHECK) && !tangent_is_zero_like(yb)) {
        seed_env *se = cr_arena_alloc(t->arena, sizeof *se, _Alignof(seed_env));
        if (se == NULL)
            return CR__ALLOC_STATUS(t->arena);
        se->seed = yb;
        cr_tangent th;
        st = cr_tangent_thunk(t->arena, seed_thunk, se, "seed_thunk", &th);
        if (st != CR_OK)
            return st;
        st = cr_pullback_call(t->arena, &pb, &th, dx2, nv);
        if (st != CR_OK) {
            st = rule_error(t, "rrule: pulling back a thunked seed", "the pullback", st);
            if (st != CR_OK)
                return st;
        } else {
            for (size_t i = 0; i < nv; i++) {
                char lab[96], check[200];
                arg_label(vals, i, lab, sizeof lab);
                snprintf(check, sizeof check, "rrule: pulling back a thunked seed, cotangent of %s",
                         lab);
                bool n1 = dx[i].tag == CR_TAN_NONE, n2 = dx2[i].tag == CR_TAN_NONE;
                bool i1 = dx[i].tag == CR_TAN_NOTIMPL, i2 = dx2[i].tag == CR_TAN_NOTIMPL;
                if (n1 != n2 || i1 != i2) {
                    NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check,
                         "%s with the seed, %s with the thunked seed",
                         cr_tag_name((cr_tag)dx[i].tag), cr_tag_name((cr_tag)dx2[i].tag));
                    continue;
                }
                if (n1 || i1) {
                    NOTE(t, CR_VERDICT_PASS, 0, check, "%s", "");
                    continue;
                }
                st = compare_tangents(t, check, &vals[i], dx2[i], dx[i]);
                if (st != CR_OK)
                    return st;
            }
        }
    }

    /* Finite differences: J' ȳ in coordinates, converted to natural cotangents. */
    fd_env e;
    st = fd_setup(t, vals, pert, &e);
    if (st != CR_OK)
        return st;
    if (e.n == 0)
        return CR_OK;
    e.m = cr_test_flat_size(&y0);
    double *jtv = alloc_doubles(t, e.n), *err = alloc_doubles(t, e.n), *yc = alloc_doubles(t, e.m);
    double *rad = alloc_doubles(t, e.n), *rad2 = alloc_doubles(t, e.n);
    if (jtv == NULL || err == NULL || yc == NULL || rad == NULL || rad2 == NULL)
        return CR__ALLOC_STATUS(t->arena);
    if (e.m > 0) {
        st = cr_test_cotangent_flatten(&y0, yb, yc, e.m);
        if (st != CR_OK) {
            NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, "rrule: seed",
                 "the seed (output cotangent) does not fit the output (%s)", cr_status_name(st));
            return CR_EINVAL;
        }
        st = fd_jtvp(t, &e, &t->fdm, yc, jtv, err, rad);
        if (st != CR_OK)
            return st;
    }
    /* Per argument: the rule's components a, the reference b (errors eb), the measure. */
    double **a = cr_arena_calloc(t->arena, 3 * nv, sizeof *a, _Alignof(double *));
    measure *ms = cr_arena_calloc(t->arena, nv, sizeof *ms, _Alignof(measure));
    double *imags = alloc_doubles(t, nv);
    bool *skip = cr_arena_calloc(t->arena, nv, sizeof *skip, _Alignof(bool));
    if (a == NULL || ms == NULL || imags == NULL || skip == NULL)
        return CR__ALLOC_STATUS(t->arena);
    double **b = a + nv, **eb = a + 2 * nv;
    bool confirm_needed = false;
    for (size_t i = 0; i < nv; i++) {
        if (!pert[i])
            continue;
        char lab[96], check[200];
        arg_label(vals, i, lab, sizeof lab);
        snprintf(check, sizeof check, "rrule: cotangent of %s (vs finite differences)", lab);
        size_t ncomp = cr__test_ncomps(&vals[i]);
        a[i] = alloc_doubles(t, ncomp);
        b[i] = alloc_doubles(t, ncomp);
        eb[i] = alloc_doubles(t, ncomp);
        if (a[i] == NULL || b[i] == NULL || eb[i] == NULL)
            return CR__ALLOC_STATUS(t->arena);
        st = rule_comps(t, check, &vals[i], dx[i], a[i], ncomp, &imags[i], &skip[i]);
        if (st == CR_OK)
            st = cotangent_comps(t, &vals[i], jtv + e.off[i], err + e.off[i], e.nc[i], b[i], eb[i],
                                 ncomp);
        if (st != CR_OK)
            return st;
        if (skip[i])
            continue; /* BROKEN or FAIL already noted */
        measure_comps(a[i], b[i], eb[i], 0, ncomp, t->rtol, t->atol, &ms[i]);
        confirm_needed = confirm_needed || needs_confirmation(&ms[i]);
    }
    if (confirm_needed && e.m > 0) {
        cr_fdm m2;
        double *jtv2 = alloc_doubles(t, e.n), *err2 = alloc_doubles(t, e.n);
        if (jtv2 == NULL || err2 == NULL)
            return CR__ALLOC_STATUS(t->arena);
        st = second_method(t, &m2);
        if (st == CR_OK)
            st = fd_jtvp(t, &e, &m2, yc, jtv2, err2, rad2);
        /* The size of <ȳ, f>, for the pole check. */
        double fscale = 0, *yf = alloc_doubles(t, e.m);
        if (yf == NULL)
            return CR__ALLOC_STATUS(t->arena);
        if (st == CR_OK && cr_test_flatten(&y0, yf, e.m) == CR_OK)
            for (size_t k = 0; k < e.m; k++)
                fscale += fabs(yc[k] * yf[k]);
        for (size_t i = 0; i < nv && st == CR_OK; i++) {
            if (!pert[i] || skip[i] || !needs_confirmation(&ms[i]))
                continue;
            size_t ncomp = cr__test_ncomps(&vals[i]);
            double *b2 = alloc_doubles(t, ncomp), *eb2 = alloc_doubles(t, ncomp);
            if (b2 == NULL || eb2 == NULL)
                return CR__ALLOC_STATUS(t->arena);
            st = cotangent_comps(t, &vals[i], jtv2 + e.off[i], err2 + e.off[i], e.nc[i], b2, eb2,
                                 ncomp);
            if (st == CR_OK)
                st = confirm(t, &m2, a[i], b[i], b2, ncomp, &ms[i]);
            double r = 0;
            for (size_t k = 0; k < e.nc[i]; k++)
                r = fmax(r, fmax(rad[e.off[i] + k], rad2[e.off[i] + k]));
            if (st == CR_OK && ms[i].worst > 1.0 && beyond_stencil(a[i], b[i], ncomp, fscale, r))
                st = not_testable(t, "a pole or jump lies inside the finite-difference stencil");
        }
        if (st != CR_OK)
            return st;
    }
    for (size_t i = 0; i < nv; i++) {
        if (!pert[i] || skip[i])
            continue;
        char lab[96], check[200];
        arg_label(vals, i, lab, sizeof lab);
        snprintf(check, sizeof check, "rrule: cotangent of %s (vs finite differences)", lab);
        note_measure(t, check, &vals[i], &ms[i], imags[i]);
    }
    return CR_OK;
}

/* ---- The dot-product test ----------------------------------------------------------- */

/* <a, b> over logical components, with Σ|a_k b_k| as its scale; *nan is set when a
 * component of a or b is NaN (no overflow makes one: a wrong rule). */
static cr_status dot_comps(cr__tester *t, const cr_value *tmpl, cr_tangent a, cr_tangent b,
                           double *dot, double *scale, bool *nan)
{
    size_t n = cr__test_ncomps(tmpl);
    double *x = alloc_doubles(t, n), *y = alloc_doubles(t, n);
    if (x == NULL || y == NULL)
        return CR__ALLOC_STATUS(t->arena);
    cr_status st = cr__test_expand(tmpl, a, x, n, NULL, NULL, 0);
    if (st == CR_OK)
        st = cr__test_expand(tmpl, b, y, n, NULL, NULL, 0);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < n; k++) {
        *nan = *nan || isnan(x[k]) || isnan(y[k]);
        *dot += x[k] * y[k];
        *scale += fabs(x[k] * y[k]);
    }
    return CR_OK;
}

cr_status cr__run_consistency(cr__tester *t, const cr_value *vals, const cr_tangent *dargs,
                              const cr_tangent *ybar)
{
    static const char check[] = "frule/rrule agreement: <ȳ, J ẋ> = <Jᵀ ȳ, ẋ>";
    size_t nv = t->nargs + 1;
    cr_value y0;
    cr_status st;
    if (!primal_ok(t, vals, &y0, &st))
        return st;
    cr_tangent *xd = cr_arena_calloc(t->arena, 2 * nv, sizeof *xd, _Alignof(cr_tangent));
    if (xd == NULL)
        return CR__ALLOC_STATUS(t->arena);
    cr_tangent *dx = xd + nv;
    for (size_t i = 0; i < nv; i++)
        if ((st = given_or_random(t, dargs ? &dargs[i] : NULL, &vals[i], &xd[i])) != CR_OK)
            return st;
    cr_tangent yb;
    if ((st = given_or_random(t, ybar, &y0, &yb)) != CR_OK)
        return st;
    cr_value y1, y2;
    cr_tangent dy;
    const char *missing = NULL;
    st = call_frule(t, vals, xd, &y1, &dy);
    if (st == CR_NOTHING)
        missing = "frule";
    else if (st != CR_OK)
        return rule_error(t, check, "the frule", st);
    cr_pullback pb;
    st = call_rrule(t, vals, &y2, &pb);
    if (st == CR_NOTHING && missing == NULL)
        missing = "rrule";
    else if (st != CR_OK && st != CR_NOTHING)
        return rule_error(t, check, "the rrule", st);
    if (missing != NULL) {
        /* Both rules are needed (registration tests of single-mode rules skip this test). */
        char sig[160];
        call_sig(vals, t->nargs, sig, sizeof sig);
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check, "no %s applies to %s", missing, sig);
        return CR_ENORULE;
    }
    if (pb.nx != nv) {
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check,
             "the pullback %s returns %zu cotangents, expected %zu (one for self and one per "
             "argument)",
             pb.name ? pb.name : "(unnamed)", pb.nx, nv);
        return CR_OK;
    }
    st = cr_pullback_call(t->arena, &pb, &yb, dx, nv);
    if (st != CR_OK)
        return rule_error(t, check, "the pullback", st);

    double lhs = 0, ls = 0, rhs = 0, rs = 0;
    bool nan = false;
    st = dot_comps(t, &y0, yb, dy, &lhs, &ls, &nan);
    for (size_t i = 0; i < nv && st == CR_OK; i++)
        if (xd[i].tag != CR_TAN_NONE)
            st = dot_comps(t, &vals[i], dx[i], xd[i], &rhs, &rs, &nan);
    if (st == CR_EUNIMPL) {
        NOTE(t, CR_VERDICT_BROKEN, 0, check, "%s", "a tangent or cotangent is NotImplemented");
        return CR_OK;
    }
    if (is_alloc_error(st))
        return st;
    if (st != CR_OK) {
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check,
             "a tangent or cotangent does not fit its value (%s)", cr_status_name(st));
        return CR_OK;
    }
    if (nan) {
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check, "%s", "a tangent or cotangent is NaN");
        return CR_OK;
    }
    if (!isfinite(lhs) || !isfinite(rhs) || !isfinite(ls) || !isfinite(rs))
        return not_testable(t, "the tangents overflow here");
    double e = fabs(lhs - rhs), s = fmax(ls, rs);
    double tol = fmax(t->atol, t->rtol * s);
    double ratio = isnan(e) ? HUGE_VAL : (tol > 0 ? e / tol : (e > 0 ? HUGE_VAL : 0));
    cr__test_errors(t->rep, isfinite(e) ? e : HUGE_VAL, s > t->atol ? e / s : 0);
    if (ratio <= 1) {
        NOTE(t, CR_VERDICT_PASS, ratio, check, "%s", "");
        return CR_OK;
    }
    NOTE(t, verdict_of(t, ratio), ratio, check,
         "<ȳ, frule(ẋ)> = %.17g but Σ <pullback(ȳ)ᵢ, ẋᵢ> = %.17g (error %.3g, tolerance "
         "%.3g): the frule and the rrule disagree",
         lhs, rhs, e, tol);
    return CR_OK;
}

/* ---- test_scalar -------------------------------------------------------------------- */

static bool scalar_kind(cr_kind k)
{
    return k == CR_KIND_F64 || k == CR_KIND_F32 || k == CR_KIND_C128 || k == CR_KIND_I64 ||
           k == CR_KIND_I32 || k == CR_KIND_BOOL;
}

static bool float_kind(cr_kind k)
{
    return k == CR_KIND_F64 || k == CR_KIND_F32 || k == CR_KIND_C128;
}

/* A unit tangent (1 or i) of kind k. */
static cr_tangent unit_of(cr_kind k, bool imag)
{
    if (k == CR_KIND_C128)
        return cr_tangent_c128(imag ? (cr_complex)I : (cr_complex)1.0);
    if (k == CR_KIND_F32)
        return cr_tangent_f32(1.0f);
    return cr_tangent_f64(1.0);
}

/* The frule's input tangents for a unit in argument j: ZeroTangent for the other floats,
 * NoTangent for what cannot be perturbed. */
static void unit_dargs(const cr_value *vals, size_t nv, size_t j, cr_tangent u, cr_tangent *d)
{
    for (size_t i = 0; i < nv; i++) {
        if (cr_test_flat_size(&vals[i]) == 0)
            d[i] = cr_tangent_none();
        else
            d[i] = i == j ? u : cr_tangent_zero();
    }
}

/* One-output seed: u for output component i, ZeroTangent for the others. */
static cr_status unit_seed(cr_arena *arena, const cr_value *y, size_t i, cr_tangent u,
                           cr_tangent *out)
{
    if (y->kind != CR_KIND_STRUCT) {
        *out = u;
        return CR_OK;
    }
    const cr_type *type = y->u.obj.type;
    cr_tangent *f =
        cr_arena_calloc(arena, type->nfields ? type->nfields : 1, sizeof *f, _Alignof(cr_tangent));
    if (f == NULL)
        return CR__ALLOC_STATUS(arena);
    f[i] = u;
    *out = cr_tangent_struct_empty(type);
    out->u.s.fields = f;
    return CR_OK;
}

#define MAX_SCALAR_OUTPUTS 8

cr_status cr__run_scalar(cr__tester *t, const cr_value *vals)
{
    size_t nv = t->nargs + 1;
    cr_value y0;
    cr_status st;
    if (!primal_ok(t, vals, &y0, &st))
        return st;
    /* The outputs: a scalar, or the fields of a tuple of scalars. */
    size_t nout = 1;
    cr_kind okind[MAX_SCALAR_OUTPUTS];
    if (y0.kind == CR_KIND_STRUCT) {
        const cr_type *type = y0.u.obj.type;
        if (type == NULL || type->nfields > MAX_SCALAR_OUTPUTS)
            return CR_EINVAL;
        nout = type->nfields;
        for (size_t i = 0; i < nout; i++) {
            if (!scalar_kind(type->fields[i].kind))
                return CR_EINVAL;
            okind[i] = type->fields[i].kind;
        }
    } else if (scalar_kind(y0.kind)) {
        okind[0] = y0.kind;
    } else {
        return CR_EINVAL;
    }

    cr_tangent *d = cr_arena_calloc(t->arena, 2 * nv, sizeof *d, _Alignof(cr_tangent));
    if (d == NULL)
        return CR__ALLOC_STATUS(t->arena);
    cr_tangent *d2 = d + nv;

    /* Forward mode, one unit tangent at a time. */
    bool any = false;
    for (size_t j = 1; j < nv && !t->no_frule; j++) {
        if (!float_kind(vals[j].kind))
            continue;
        any = true;
        for (int im = 0; im <= (vals[j].kind == CR_KIND_C128); im++) {
            snprintf(t->label, sizeof t->label, "ẋ%zu = %s; ", j, im ? "i" : "1");
            unit_dargs(vals, nv, j, unit_of(vals[j].kind, im != 0), d);
            st = cr__run_frule(t, vals, d, NULL);
            if (st != CR_OK)
                goto out;
        }
        if (vals[j].kind == CR_KIND_C128) {
            /* A real tangent 1 and the complex 1 + 0i give the same tangent. */
            t->label[0] = '\0';
            char check[120];
            snprintf(check, sizeof check, "frule: real tangent 1 vs complex 1+0i for argument %zu",
                     j);
            cr_value ya, yb;
            cr_tangent da, db;
            unit_dargs(vals, nv, j, cr_tangent_f64(1.0), d);
            unit_dargs(vals, nv, j, cr_tangent_c128(1.0), d2);
            st = call_frule(t, vals, d, &ya, &da);
            if (st == CR_OK)
                st = call_frule(t, vals, d2, &yb, &db);
            if (st == CR_OK)
                st = compare_tangents(t, check, &y0, da, db);
            else if (st != CR_NOTHING)
                st = rule_error(t, check, "the frule", st);
            else
                st = CR_OK;
            if (st != CR_OK)
                goto out;
        }
    }

    if (!any && !t->no_frule) {
        /* No float argument (none at all, or integers only): the frule is still checked,
         * for its value and a zero tangent. */
        unit_dargs(vals, nv, SIZE_MAX, cr_tangent_zero(), d);
        st = cr__run_frule(t, vals, d, NULL);
        if (st != CR_OK)
            goto out;
    }

    /* Reverse mode, one unit seed at a time. */
    any = false;
    for (size_t i = 0; i < nout && !t->no_rrule; i++) {
        if (!float_kind(okind[i]))
            continue;
        any = true;
        for (int im = 0; im <= (okind[i] == CR_KIND_C128); im++) {
            cr_tangent seed;
            st = unit_seed(t->arena, &y0, i, unit_of(okind[i], im != 0), &seed);
            if (st != CR_OK)
                goto out;
            if (nout > 1)
                snprintf(t->label, sizeof t->label, "ȳ.%zu = %s; ", i + 1, im ? "i" : "1");
            else
                snprintf(t->label, sizeof t->label, "ȳ = %s; ", im ? "i" : "1");
            st = cr__run_rrule(t, vals, &seed, NULL);
            if (st != CR_OK)
                goto out;
        }
        if (okind[i] == CR_KIND_C128) {
            t->label[0] = '\0';
            char check[120];
            snprintf(check, sizeof check,
                     "rrule: real seed 1 vs complex 1+0i for output component %zu", i + 1);
            cr_tangent sa, sb;
            st = unit_seed(t->arena, &y0, i, cr_tangent_f64(1.0), &sa);
            if (st == CR_OK)
                st = unit_seed(t->arena, &y0, i, cr_tangent_c128(1.0), &sb);
            if (st != CR_OK)
                goto out;
            cr_value y;
            cr_pullback pb;
            st = call_rrule(t, vals, &y, &pb);
            if (st == CR_OK && pb.nx == nv) {
                st = cr_pullback_call(t->arena, &pb, &sa, d, nv);
                if (st == CR_OK)
                    st = cr_pullback_call(t->arena, &pb, &sb, d2, nv);
                for (size_t k = 0; k < nv && st == CR_OK; k++) {
                    if (d[k].tag == CR_TAN_NONE && d2[k].tag == CR_TAN_NONE)
                        continue;
                    st = compare_tangents(t, check, &vals[k], d[k], d2[k]);
                }
                if (st != CR_OK && !is_alloc_error(st))
                    st = rule_error(t, check, "the pullback", st);
            } else if (st != CR_OK && st != CR_NOTHING) {
                st = rule_error(t, check, "the rrule", st);
            } else {
                st = CR_OK;
            }
            if (st != CR_OK)
                goto out;
        }
    }

    if (!any && !t->no_rrule) {
        /* No float output: the rrule's value and its cotangents (NoTangent) are checked. */
        st = cr__run_rrule(t, vals, NULL, NULL);
        if (st != CR_OK)
            goto out;
    }

    t->label[0] = '\0';
    if (!t->no_frule && !t->no_rrule)
        st = cr__run_consistency(t, vals, NULL, NULL);
out:
    t->label[0] = '\0';
    return st;
}

/* ---- Non-differentiable declarations ------------------------------------------------ */

cr_status cr__run_nondiff(cr__tester *t, const cr_value *vals)
{
    cr_value y0;
    cr_status st;
    if (!primal_ok(t, vals, &y0, &st))
        return st;
    size_t nv = t->nargs + 1;
    cr_tangent *d = cr_arena_calloc(t->arena, nv, sizeof *d, _Alignof(cr_tangent));
    if (d == NULL)
        return CR__ALLOC_STATUS(t->arena);
    for (size_t i = 0; i < nv; i++) {
        st = cr_rand_tangent(t->arena, &t->rng, &vals[i], &d[i]);
        if (st != CR_OK)
            return st;
    }
    cr_value y;
    cr_tangent dy;
    st = call_frule(t, vals, d, &y, &dy);
    if (st == CR_OK) {
        st = compare_values(t, "frule: primal value", &y, &y0);
        if (st != CR_OK)
            return st;
        if (dy.tag == CR_TAN_NONE)
            NOTE(t, CR_VERDICT_PASS, 0, "frule: NoTangent output", "%s", "");
        else
            NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, "frule: NoTangent output",
                 "a non-differentiable function's frule gave a %s tangent",
                 cr_tag_name((cr_tag)dy.tag));
    } else if (st != CR_NOTHING) {
        st = rule_error(t, "frule", "the frule", st);
        if (st != CR_OK)
            return st;
    }
    cr_pullback pb;
    st = call_rrule(t, vals, &y, &pb);
    if (st == CR_NOTHING)
        return CR_OK;
    if (st != CR_OK)
        return rule_error(t, "rrule", "the rrule", st);
    st = compare_values(t, "rrule: primal value", &y, &y0);
    if (st != CR_OK)
        return st;
    if (pb.nx != nv) {
        NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, "rrule: number of cotangents",
             "the pullback returns %zu cotangents, expected %zu", pb.nx, nv);
        return CR_OK;
    }
    cr_tangent seed, *dx = cr_arena_calloc(t->arena, nv, sizeof *dx, _Alignof(cr_tangent));
    if (dx == NULL)
        return CR__ALLOC_STATUS(t->arena);
    st = cr_rand_tangent(t->arena, &t->rng, &y0, &seed);
    if (st != CR_OK)
        return st;
    if (tangent_is_zero_like(seed))
        seed = cr_tangent_f64(1.0); /* make the pullback run: it ignores its seed */
    st = pb.fn(&seed, dx, nv, t->arena, pb.env);
    if (st != CR_OK)
        return rule_error(t, "rrule: pullback", "the pullback", st);
    for (size_t i = 0; i < nv; i++) {
        char lab[96], check[160];
        arg_label(vals, i, lab, sizeof lab);
        snprintf(check, sizeof check, "rrule: NoTangent for %s", lab);
        if (dx[i].tag == CR_TAN_NONE)
            NOTE(t, CR_VERDICT_PASS, 0, check, "%s", "");
        else
            NOTE(t, CR_VERDICT_FAIL, HUGE_VAL, check,
                 "a non-differentiable function's pullback gave a %s cotangent",
                 cr_tag_name((cr_tag)dx[i].tag));
    }
    return CR_OK;
}

/* ---- Public entry points ------------------------------------------------------------ */

typedef enum { T_FRULE, T_RRULE, T_CONSISTENCY, T_SCALAR } test_kind;

static cr_status run_public(cr_arena *scratch, const cr_test_opts *opts, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_test_report *out, test_kind kind)
{
    if (out != NULL)
        cr_test_report_init(out);
    if (scratch == NULL || f == NULL || out == NULL || (nargs > 0 && args == NULL) ||
        f->kind != CR_KIND_FUNC || f->u.func.fn == NULL) {
        if (out != NULL)
            cr__test_note(out, CR_VERDICT_FAIL, HUGE_VAL, "setup", "%s",
                          "invalid arguments: need a scratch arena, a function value and a "
                          "report");
        return CR_EINVAL;
    }
    out->npoints = 1;
    cr_arena_mark mark = cr_arena_get_mark(scratch);
    cr_status st = CR_OK;
    size_t nv = nargs + 1;
    cr_value *vals = cr_arena_alloc(scratch, nv * sizeof *vals, _Alignof(cr_value));
    if (vals == NULL) {
        st = CR__ALLOC_STATUS(scratch);
        goto done;
    }
    vals[0] = *f;
    if (nargs > 0)
        memcpy(vals + 1, args, nargs * sizeof *vals);
    cr__tester t;
    st = cr__tester_init(&t, scratch, opts, vals, nargs, out);
    if (st != CR_OK)
        goto done;
    switch (kind) {
    case T_FRULE: {
        cr_tangent *d = cr_arena_calloc(scratch, nv, sizeof *d, _Alignof(cr_tangent));
        if (d == NULL) {
            st = CR__ALLOC_STATUS(scratch);
            break;
        }
        for (size_t i = 0; i < nv && st == CR_OK; i++) {
            if (t.o.input_tangents != NULL)
                d[i] = t.o.input_tangents[i];
            else
                st = cr_rand_tangent(scratch, &t.rng, &vals[i], &d[i]);
        }
        if (st == CR_OK)
            st = cr__run_frule(&t, vals, d, t.o.output_tangent);
        break;
    }
    case T_RRULE:
        st = cr__run_rrule(&t, vals, t.o.output_tangent, t.o.input_tangents);
        break;
    case T_CONSISTENCY:
        st = cr__run_consistency(&t, vals, t.o.input_tangents, t.o.output_tangent);
        break;
    case T_SCALAR:
        for (size_t i = 0; i < nargs; i++)
            if (!scalar_kind(args[i].kind)) {
                cr__test_note(out, CR_VERDICT_FAIL, HUGE_VAL, "setup",
                              "test_scalar: argument %zu is a %s, not a scalar", i + 1,
                              cr_kind_name(args[i].kind));
                st = CR_EINVAL;
                goto done;
            }
        st = cr__run_scalar(&t, vals);
        if (st == CR_EINVAL && out->nchecks == 0)
            cr__test_note(out, CR_VERDICT_FAIL, HUGE_VAL, "setup", "%s",
                          "test_scalar: the output is not a scalar or a tuple of scalars");
        break;
    }
    if (st == CR_EDOMAIN)
        cr__test_note(out, CR_VERDICT_FAIL, HUGE_VAL, "setup",
                      "could not test at this point by finite differences: %s",
                      t.skip_why != NULL ? t.skip_why : "outside the domain");
done:
    cr_arena_rewind(scratch, mark);
    return st;
}

/* cr_test_NAME: run_public of the tester KIND. */
#define PUBLIC_TESTER(NAME, KIND)                                                            \
    cr_status cr_test_##NAME(cr_arena *scratch, const cr_test_opts *opts, const cr_value *f, \
                             const cr_value *args, size_t nargs, cr_test_report *out)        \
    {                                                                                        \
        return run_public(scratch, opts, f, args, nargs, out, KIND);                         \
    }

PUBLIC_TESTER(frule, T_FRULE)
PUBLIC_TESTER(rrule, T_RRULE)
PUBLIC_TESTER(consistency, T_CONSISTENCY)
PUBLIC_TESTER(scalar, T_SCALAR)
