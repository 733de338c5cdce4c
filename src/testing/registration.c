/*
 * Registration tests: sample points from a rule's cr_rule_test (hard points, box
 * corners, random points in the box, or its sampler), run the testers on the rule's own
 * frule and rrule for every argument variant its signature admits, and list the entries
 * of a registry that cannot be tested (completeness).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testing_impl.h"

#define FLOAT_MASK (CR_M_F64 | CR_M_F32 | CR_M_C128)

static cr_argspec spec_of(const cr_rule_info *rule, size_t j)
{
    if (rule->nargs == 0)
        return (cr_argspec){0, NULL};
    return rule->args[j < rule->nargs ? j : rule->nargs - 1];
}

static bool scalar_signature(const cr_rule_info *rule)
{
    for (size_t j = 0; j < rule->nargs; j++)
        if (!(spec_of(rule, j).mask & FLOAT_MASK))
            return false;
    return true;
}

static bool nothing_to_test(const cr_rule_info *rule)
{
    return !rule->has_frule && !rule->has_rrule && !rule->non_differentiable;
}

bool cr_test_registration_usable(const cr_rule_info *rule)
{
    if (rule == NULL)
        return false;
    if (nothing_to_test(rule) || rule->non_differentiable)
        return true;
    if (rule->test == NULL)
        return false;
    if (rule->test->sample != NULL)
        return true;
    if (rule->fn != NULL && rule->fn->self_type != NULL)
        return false;
    return scalar_signature(rule);
}

static void entry_str(const cr_rule_info *rule, char *buf, size_t size)
{
    const char *modes = rule->non_differentiable             ? "non_differentiable"
                        : rule->has_frule && rule->has_rrule ? "frule+rrule"
                        : rule->has_frule                    ? "frule"
                        : rule->has_rrule                    ? "rrule"
                                                             : "opt-out";
    char sig[200];
    cr_signature_str(rule->fn != NULL && rule->fn->name ? rule->fn->name : "?", rule->args,
                     rule->nargs, rule->variadic, sig, sizeof sig);
    snprintf(buf, size, "%s %s", modes, sig);
}

size_t cr_test_untested_rules(const cr_registry *reg, char *buf, size_t size)
{
    if (buf != NULL && size > 0)
        buf[0] = '\0';
    if (reg == NULL)
        return 0;
    size_t count = 0, len = 0;
    size_t n = cr_registry_size(reg);
    for (size_t i = 0; i < n; i++) {
        cr_rule_info info;
        if (cr_registry_get(reg, i, &info) != CR_OK || cr_test_registration_usable(&info))
            continue;
        count++;
        if (buf == NULL || size == 0 || len + 1 >= size)
            continue;
        char line[260];
        entry_str(&info, line, sizeof line);
        const char *why =
            info.test == NULL ? "no test registration" : "no sampler for its argument kinds";
        int m = snprintf(buf + len, size - len, "%s (%s)\n", line, why);
        if (m > 0)
            len = len + (size_t)m < size ? len + (size_t)m : size - 1;
    }
    return count;
}

/* ---- Points -------------------------------------------------------------------------- */

typedef enum { V_F64, V_C128, V_MIX, V_INT, V_F32 } variant;

static const char *const k_variant_name[] = {"f64", "c128", "f64/c128", "int", "f32"};

/* A number in [lo, hi] on a grid of 2^-10 (exact in f32 as in f64, short in messages). */
static double sample_in(uint64_t *rng, double lo, double hi)
{
    double x = lo + (hi - lo) * cr__test_uniform(rng);
    double g = round(x * 1024.0) / 1024.0;
    if (g < lo)
        g += 1.0 / 1024.0;
    if (g > hi)
        g -= 1.0 / 1024.0;
    return g >= lo && g <= hi ? g : x;
}

typedef struct point_ctx {
    cr_arena *arena;
    const cr_test_opts *opts;
    const cr_rule_info *rule;
    double rtol, atol;
    cr_test_report *out;
    uint64_t *rng;
    cr_status fatal;
} point_ctx;

static bool allows(const cr_rule_info *rule, size_t j, uint32_t atom)
{
    return (spec_of(rule, j).mask & atom) != 0;
}

static bool variant_ok(const cr_rule_info *rule, variant v, const double *x, const double *lo,
                       const double *hi)
{
    size_t n = rule->nargs;
    /* The kind each variant gives the first argument and the others. */
    static const uint32_t k_need[][2] = {[V_F64] = {CR_M_F64, CR_M_F64},
                                         [V_C128] = {CR_M_C128, CR_M_C128},
                                         [V_MIX] = {CR_M_F64, CR_M_C128},
                                         [V_INT] = {CR_M_INT, CR_M_F64},
                                         [V_F32] = {CR_M_F32, CR_M_F32}};
    for (size_t j = 0; j < n; j++)
        if (!allows(rule, j, k_need[v][j == 0 ? 0 : 1]))
            return false;
    if ((v == V_MIX && n < 2) || (n == 0 && v != V_F64))
        return false; /* without arguments every variant is the same */
    if (v == V_INT) {
        double r = round(x[0]);
        if (r < lo[0] || r > hi[0])
            return false;
    }
    return true;
}

/* The arguments of a point as text, e.g. "0.5, 1+2i". */
static void point_str(const cr_value *args, size_t nargs, char *at, size_t size)
{
    size_t len = 0;
    at[0] = '\0';
    for (size_t j = 0; j < nargs && len < size; j++) {
        const cr_value *a = &args[j];
        const char *sep = j ? ", " : "";
        int m;
        switch (a->kind) {
        case CR_KIND_F64:
            m = snprintf(at + len, size - len, "%s%.17g", sep, a->u.f64);
            break;
        case CR_KIND_F32:
            m = snprintf(at + len, size - len, "%s%.9gf", sep, (double)a->u.f32);
            break;
        case CR_KIND_C128:
            m = snprintf(at + len, size - len, "%s%.17g%+.17gi", sep, creal(a->u.c128),
                         cimag(a->u.c128));
            break;
        case CR_KIND_I64:
        case CR_KIND_I32:
            m = snprintf(at + len, size - len, "%s%lld", sep, (long long)a->u.i64);
            break;
        case CR_KIND_ARRAY: {
            const cr_array *arr = a->u.arr;
            m = snprintf(at + len, size - len, "%s%s array", sep,
                         arr != NULL ? cr_dtype_name((cr_dtype)arr->dtype) : "NULL");
            for (size_t d = 0; arr != NULL && d < arr->ndim && m > 0 && len + (size_t)m < size;
                 d++) {
                int k = snprintf(at + len + (size_t)m, size - len - (size_t)m, "%s%zu",
                                 d ? "x" : " ", arr->shape[d]);
                if (k > 0)
                    m += k;
            }
            break;
        }
        default:
            m = snprintf(at + len, size - len, "%s(%s)", sep, cr_kind_name(a->kind));
            break;
        }
        if (m > 0)
            len += (size_t)m;
        if (len >= size) {
            at[size - 1] = '\0';
            return;
        }
    }
}

/* The frule (random input tangents), rrule and consistency testers of a rule at vals
 * (nv values), each that the rule has, until one fails. */
static cr_status run_general(cr__tester *t, cr_arena *arena, cr_value *vals, size_t nv)
{
    cr_status st = CR_OK;
    if (!t->no_frule) {
        cr_tangent *d = cr_arena_calloc(arena, nv, sizeof *d, _Alignof(cr_tangent));
        st = d == NULL ? CR__ALLOC_STATUS(arena) : CR_OK;
        for (size_t i = 0; i < nv && st == CR_OK; i++)
            st = cr_rand_tangent(arena, &t->rng, &vals[i], &d[i]);
        if (st == CR_OK)
            st = cr__run_frule(t, vals, d, NULL);
    }
    if (st == CR_OK && !t->no_rrule)
        st = cr__run_rrule(t, vals, NULL, NULL);
    if (st == CR_OK && !t->no_frule && !t->no_rrule)
        st = cr__run_consistency(t, vals, NULL, NULL);
    return st;
}

/* Runs one variant at point x (imaginary parts xi for complex variants). */
static void run_point(point_ctx *p, const cr_value *f, const cr_value *args)
{
    if (p->fatal != CR_OK)
        return;
    const cr_rule_info *rule = p->rule;
    size_t nargs = rule->nargs, nv = nargs + 1;
    cr_arena_mark mark = cr_arena_get_mark(p->arena);
    cr_value *vals = cr_arena_alloc(p->arena, nv * sizeof *vals, _Alignof(cr_value));
    if (vals == NULL) {
        p->fatal = CR__ALLOC_STATUS(p->arena);
        return;
    }
    vals[0] = *f;
    memcpy(vals + 1, args, nargs * sizeof *vals);
    cr_test_report r;
    cr_test_report_init(&r);
    cr__tester t;
    cr_test_opts o;
    memset(&o, 0, sizeof o);
    if (p->opts != NULL)
        memcpy(&o, p->opts,
               p->opts->struct_size == 0 || p->opts->struct_size > sizeof o ? sizeof o
                                                                            : p->opts->struct_size);
    o.struct_size = (uint32_t)sizeof o;
    o.input_tangents = NULL;
    o.output_tangent = NULL;
    if (p->rtol > 0)
        o.rtol = p->rtol;
    if (p->atol > 0)
        o.atol = p->atol;
    cr_status st = cr__tester_init(&t, p->arena, &o, vals, nargs, &r);
    if (st == CR_OK) {
        t.def = rule->def;
        t.no_frule = !rule->has_frule;
        t.no_rrule = !rule->has_rrule;
        t.rng = cr_test_rand_u64(p->rng);
        bool scalar = true;
        for (size_t j = 0; j < nargs; j++)
            scalar = scalar && (args[j].kind == CR_KIND_F64 || args[j].kind == CR_KIND_F32 ||
                                args[j].kind == CR_KIND_C128 || args[j].kind == CR_KIND_I64 ||
                                args[j].kind == CR_KIND_BOOL || args[j].kind == CR_KIND_I32);
        if (rule->non_differentiable) {
            st = cr__run_nondiff(&t, vals);
        } else if (!scalar || ((st = cr__run_scalar(&t, vals)) == CR_EINVAL && r.nchecks == 0)) {
            /* Not scalar, or the output is not: the general testers. */
            st = run_general(&t, p->arena, vals, nv);
        }
    }
    /* A point the primal refuses (CR_EINVAL: a sampler's combination outside what f
     * accepts) cannot be tested either. */
    bool refused = st == CR_EINVAL && t.primal_failed;
    if (st == CR_EDOMAIN || refused) {
        p->out->nskipped++;
        if (p->out->skip_note[0] == '\0') {
            char at[120];
            point_str(args, nargs, at, sizeof at);
            snprintf(p->out->skip_note, sizeof p->out->skip_note, "at (%s): %s", at,
                     refused              ? "the primal refuses these arguments (CR_EINVAL)"
                     : t.skip_why != NULL ? t.skip_why
                                          : "outside the domain");
        }
    } else {
        if (r.verdict != CR_VERDICT_PASS) {
            /* Say where: the point. */
            char at[200], msg[sizeof r.message];
            point_str(args, nargs, at, sizeof at);
            memcpy(msg, r.message, sizeof msg);
            snprintf(r.message, sizeof r.message, "at (%s): %.300s", at, msg);
        }
        r.npoints = 1;
        cr_test_report_merge(p->out, &r);
        if (st != CR_OK && st != CR_ENORULE && st != CR_EINVAL)
            p->fatal = st;
    }
    cr_arena_rewind(p->arena, mark);
}

static cr_value scalar_value(variant v, size_t j, double re, double im)
{
    switch (v) {
    case V_C128:
        return cr_value_c128(cr__cplx(re, im));
    case V_MIX:
        return j == 0 ? cr_value_f64(re) : cr_value_c128(cr__cplx(re, im));
    case V_INT:
        return j == 0 ? cr_value_i64((int64_t)round(re)) : cr_value_f64(re);
    case V_F32:
        return cr_value_f32((float)re);
    case V_F64:
    default:
        return cr_value_f64(re);
    }
}

static void run_variant(point_ctx *p, const cr_value *f, variant v, const double *x,
                        const double *xi)
{
    cr_value args[CR_SIG_MAX_ARGS];
    for (size_t j = 0; j < p->rule->nargs; j++)
        args[j] = scalar_value(v, j, x[j], xi[j]);
    (void)k_variant_name;
    run_point(p, f, args);
}

/* ---- The registration test -------------------------------------------------------------- */

cr_status cr_test_rule_registration(cr_arena *scratch, const cr_test_opts *opts,
                                    const cr_rule_info *rule, cr_test_report *out)
{
    if (out != NULL)
        cr_test_report_init(out);
    if (scratch == NULL || rule == NULL || out == NULL || rule->fn == NULL) {
        if (out != NULL)
            cr__test_note(out, CR_VERDICT_FAIL, HUGE_VAL, "setup", "%s",
                          "invalid arguments: need a scratch arena, a rule and a report");
        return CR_EINVAL;
    }
    char sig[260];
    entry_str(rule, sig, sizeof sig);
    if (nothing_to_test(rule)) {
        snprintf(out->message, sizeof out->message, "%s: an opt-out, nothing to test", sig);
        return CR_OK;
    }
    const cr_config *cfg = opts != NULL && (opts->struct_size == 0 ||
                                            opts->struct_size >= offsetof(cr_test_opts, seed))
                               ? opts->cfg
                               : NULL;
    uint32_t caps = cfg != NULL ? cfg->caps : 0;
    if ((rule->caps & caps) != rule->caps) {
        snprintf(out->message, sizeof out->message,
                 "%s needs configuration capabilities 0x%x that the test configuration lacks", sig,
                 (unsigned)rule->caps);
        return CR_ENOCAP;
    }
    const cr_rule_test *reg = rule->test;
    static const cr_rule_test k_default = {0};
    if (reg == NULL)
        reg = &k_default;
    if (!cr_test_registration_usable(rule) &&
        !(rule->test == NULL && scalar_signature(rule) && rule->fn->self_type == NULL)) {
        cr__test_note(out, CR_VERDICT_FAIL, HUGE_VAL, "setup",
                      "%s: cannot generate its arguments (a signature of arrays, structs or a "
                      "functor needs a sample function in its test registration)",
                      sig);
        return CR_EINVAL;
    }
    if (rule->nargs > CR_SIG_MAX_ARGS) {
        cr__test_note(out, CR_VERDICT_FAIL, HUGE_VAL, "setup", "%s: too many arguments", sig);
        return CR_EINVAL;
    }

    cr_test_opts o;
    memset(&o, 0, sizeof o);
    if (opts != NULL)
        memcpy(&o, opts,
               opts->struct_size == 0 || opts->struct_size > sizeof o ? sizeof o
                                                                      : opts->struct_size);
    cr__tester check;
    if (cr__tester_init(&check, scratch, &o, NULL, 0, out) != CR_OK)
        return CR_EINVAL; /* invalid finite-difference options (noted) */
    uint64_t rng = o.seed != 0 ? o.seed : 0x5EEDC0DE2024ull;
    /* Each rule gets its own stream, so a rule's points do not depend on the others. */
    for (const char *c = rule->fn->name; c != NULL && *c; c++)
        rng = rng * 31u + (unsigned char)*c;
    rng += rule->nargs;
    size_t npoints = o.npoints > 0 ? o.npoints : CR_TEST_DEFAULT_NPOINTS;

    point_ctx p = {scratch, opts, rule, reg->rtol, reg->atol, out, &rng, CR_OK};
    cr_value f = cr_value_function(rule->fn, NULL);
    size_t n = rule->nargs;

    if (reg->sample != NULL) {
        for (size_t k = 0; k < npoints && p.fatal == CR_OK; k++) {
            cr_arena_mark mark = cr_arena_get_mark(scratch);
            cr_value *args = cr_arena_calloc(scratch, n ? n : 1, sizeof *args, _Alignof(cr_value));
            cr_status st = args == NULL ? CR__ALLOC_STATUS(scratch) : CR_OK;
            if (st == CR_OK)
                st = reg->sample(scratch, &rng, args, n, reg->env);
            if (st == CR_OK)
                run_point(&p, &f, args);
            else if (st != CR_EDOMAIN)
                p.fatal = st;
            else
                out->nskipped++;
            cr_arena_rewind(scratch, mark);
        }
    } else {
        double lo[CR_SIG_MAX_ARGS], hi[CR_SIG_MAX_ARGS], x[CR_SIG_MAX_ARGS], xi[CR_SIG_MAX_ARGS];
        for (size_t j = 0; j < n; j++) {
            lo[j] = reg->lo != NULL ? reg->lo[j] : -3.0;
            hi[j] = reg->hi != NULL ? reg->hi[j] : 3.0;
            if (!(lo[j] <= hi[j])) {
                cr__test_note(out, CR_VERDICT_FAIL, HUGE_VAL, "setup",
                              "%s: empty sampling box for argument %zu", sig, j + 1);
                return CR_EINVAL;
            }
        }
        bool f64_only = (o.flags & CR_TEST_F64_ONLY) != 0;
        variant base = n == 0 || allows(rule, 0, CR_M_F64) ? V_F64 : V_C128;
        /* Hard points and box corners: the base variant. */
        for (size_t k = 0; k < reg->npoints && reg->points != NULL; k++) {
            for (size_t j = 0; j < n; j++) {
                x[j] = reg->points[k * n + j];
                xi[j] = 0;
            }
            if (variant_ok(rule, base, x, lo, hi))
                run_variant(&p, &f, base, x, xi);
        }
        if (!(o.flags & CR_TEST_NO_EDGES)) {
            for (int c = 0; c < 2; c++) {
                for (size_t j = 0; j < n; j++) {
                    x[j] = c == 0 ? lo[j] : hi[j];
                    xi[j] = 0;
                }
                if (variant_ok(rule, base, x, lo, hi))
                    run_variant(&p, &f, base, x, xi);
            }
        }
        /* Random points: every variant the signature admits. */
        for (size_t k = 0; k < npoints && p.fatal == CR_OK; k++) {
            for (size_t j = 0; j < n; j++) {
                x[j] = sample_in(&rng, lo[j], hi[j]);
                double w = fmin(3.0, (hi[j] - lo[j]) / 2);
                xi[j] = sample_in(&rng, -w, w);
            }
            for (variant v = V_F64; v <= V_F32; v++) {
                if (f64_only && v != base)
                    continue;
                if ((v == V_INT || v == V_F32) && k > 0)
                    continue; /* one point of each suffices */
                if (variant_ok(rule, v, x, lo, hi))
                    run_variant(&p, &f, v, x, xi);
            }
        }
    }
    if (p.fatal != CR_OK)
        return p.fatal;
    if (out->npoints == 0) {
        cr__test_note(out, CR_VERDICT_FAIL, HUGE_VAL, "setup",
                      "%s: no point could be tested (%zu skipped: the primal is not finite "
                      "there, or finite differences leave its domain); check its test box",
                      sig, out->nskipped);
        return CR_EINVAL;
    }
    return CR_OK;
}
