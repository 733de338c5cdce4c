/*
 * cr_check_main: the command-line checker behind `chainrules-check`, for the built-in
 * registry or a user's. It runs cr_test_rule_registration() over every entry, shows a
 * progress bar on a terminal and prints a summary. It is built as the small library
 * chainrules_check, apart from chainrules (which never prints).
 */
#if !defined(_POSIX_C_SOURCE) && (defined(__unix__) || defined(__APPLE__))
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#define CR_HAVE_ISATTY 1
#endif

#include <chainrules.h>

typedef struct check_args {
    cr_test_opts opts;
    const char *filter;
    bool parents, verbose, quiet, progress, list;
} check_args;

typedef struct result {
    cr_rule_info info;
    cr_test_report rep;
    cr_status st;
} result;

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [options]\n"
            "Check every registered rule against finite differences at random and edge "
            "points.\n"
            "\n"
            "  --points N      random points per argument variant (default %d)\n"
            "  --seed S        seed of the random points and tangents (default fixed)\n"
            "  --filter TEXT   only the functions whose name contains TEXT\n"
            "  --rtol X        relative tolerance (default 1e-9; a rule's registration may "
            "override)\n"
            "  --atol X        absolute tolerance (default 1e-9)\n"
            "  --f64-only      only f64 arguments (no complex, mixed, integer or f32 variants)\n"
            "  --no-edges      skip the corners of each rule's sampling box\n"
            "  --parents       also check the rules of the registry's parents (built-ins)\n"
            "  --list          list the rules and whether they can be tested, then exit\n"
            "  -v, --verbose   one line per rule\n"
            "  -q, --quiet     only the summary line\n"
            "  --no-progress   no progress bar (it is shown only when stderr is a terminal)\n"
            "  -h, --help      this help\n"
            "\n"
            "Exit status: 0 when no rule failed, 1 when a rule failed or could not be tested, "
            "2 for a usage error.\n",
            prog, CR_TEST_DEFAULT_NPOINTS);
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v > 0))
        return false;
    *out = v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
        return false;
    *out = (uint64_t)v;
    return true;
}

/* Returns 0, or 2 for a usage error, or -1 for --help. */
static int parse(int argc, char **argv, check_args *a)
{
    const char *prog = argc > 0 && argv[0] != NULL ? argv[0] : "chainrules-check";
    memset(a, 0, sizeof *a);
    a->opts.struct_size = (uint32_t)sizeof a->opts;
#ifdef CR_HAVE_ISATTY
    a->progress = isatty(fileno(stderr)) != 0;
#endif
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            usage(stdout, prog);
            return -1;
        } else if (strcmp(s, "--points") == 0 && val != NULL && parse_u64(val, &u) && u > 0) {
            a->opts.npoints = (size_t)u;
            i++;
        } else if (strcmp(s, "--seed") == 0 && val != NULL && parse_u64(val, &u)) {
            a->opts.seed = u;
            i++;
        } else if (strcmp(s, "--filter") == 0 && val != NULL) {
            a->filter = val;
            i++;
        } else if (strcmp(s, "--rtol") == 0 && val != NULL && parse_double(val, &a->opts.rtol)) {
            i++;
        } else if (strcmp(s, "--atol") == 0 && val != NULL && parse_double(val, &a->opts.atol)) {
            i++;
        } else if (strcmp(s, "--f64-only") == 0) {
            a->opts.flags |= CR_TEST_F64_ONLY;
        } else if (strcmp(s, "--no-edges") == 0) {
            a->opts.flags |= CR_TEST_NO_EDGES;
        } else if (strcmp(s, "--parents") == 0) {
            a->parents = true;
        } else if (strcmp(s, "--list") == 0) {
            a->list = true;
        } else if (strcmp(s, "-v") == 0 || strcmp(s, "--verbose") == 0) {
            a->verbose = true;
        } else if (strcmp(s, "-q") == 0 || strcmp(s, "--quiet") == 0) {
            a->quiet = true;
        } else if (strcmp(s, "--no-progress") == 0) {
            a->progress = false;
        } else {
            fprintf(stderr, "%s: bad option or value: %s\n", prog, s);
            usage(stderr, prog);
            return 2;
        }
    }
    if (a->quiet)
        a->progress = false;
    return 0;
}

static void signature(const cr_rule_info *info, char *buf, size_t size)
{
    char sig[200];
    cr_signature_str(info->fn != NULL && info->fn->name ? info->fn->name : "?", info->args,
                     info->nargs, info->variadic, sig, sizeof sig);
    const char *mode = info->non_differentiable             ? " [non_differentiable]"
                       : info->has_frule && info->has_rrule ? ""
                       : info->has_frule                    ? " [frule only]"
                       : info->has_rrule                    ? " [rrule only]"
                                                            : " [opt-out]";
    snprintf(buf, size, "%s%s", sig, mode);
}

static void progress_bar(size_t done, size_t total, const char *name)
{
    enum { WIDTH = 30 };
    size_t fill = total ? done * WIDTH / total : WIDTH;
    char bar[WIDTH + 1];
    for (size_t i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    fprintf(stderr, "\r[%s] %zu/%zu %-24.24s", bar, done, total, name ? name : "");
    fflush(stderr);
}

static bool rule_failed(const result *r)
{
    return r->rep.verdict == CR_VERDICT_FAIL || (r->st != CR_OK && r->st != CR_ENOCAP);
}

int cr_check_main(int argc, char **argv, const cr_registry *reg)
{
    const char *prog = argc > 0 && argv != NULL && argv[0] != NULL ? argv[0] : "chainrules-check";
    check_args a;
    int rc = parse(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (reg == NULL)
        reg = cr_registry_builtin();
    if (cr_registry_builtin_status() != CR_OK) {
        fprintf(stderr, "%s: the built-in registry failed to index: %s\n", prog,
                cr_status_name(cr_registry_builtin_status()));
        return 1;
    }

    /* The entries: reg's, then its parents' (with --parents). */
    size_t total = 0;
    for (const cr_registry *r = reg; r != NULL; r = a.parents ? cr_registry_parent(r) : NULL)
        total += cr_registry_size(r);
    cr_ctx *ctx = NULL;
    cr_arena *scratch = NULL;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_arena_new(ctx, NULL, &scratch) != CR_OK) {
        fprintf(stderr, "%s: out of memory\n", prog);
        cr_ctx_free(ctx);
        return 1;
    }
    result *res = total ? cr_ctx_alloc(ctx, total * sizeof *res) : NULL;
    if (total && res == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        cr_arena_free(scratch);
        cr_ctx_free(ctx);
        return 1;
    }
    size_t n = 0;
    for (const cr_registry *r = reg; r != NULL; r = a.parents ? cr_registry_parent(r) : NULL) {
        size_t m = cr_registry_size(r);
        for (size_t i = 0; i < m; i++) {
            cr_rule_info info;
            if (cr_registry_get(r, i, &info) != CR_OK)
                continue;
            if (a.filter != NULL && (info.fn == NULL || info.fn->name == NULL ||
                                     strstr(info.fn->name, a.filter) == NULL))
                continue;
            memset(&res[n], 0, sizeof res[n]);
            res[n++].info = info;
        }
    }

    if (a.list) {
        for (size_t i = 0; i < n; i++) {
            char sig[260];
            signature(&res[i].info, sig, sizeof sig);
            printf("%-60s %s\n", sig,
                   cr_test_registration_usable(&res[i].info) ? ""
                                                             : "(no usable test registration)");
        }
        cr_ctx_dealloc(ctx, res, total * sizeof *res);
        cr_arena_free(scratch);
        cr_ctx_free(ctx);
        return 0;
    }

    clock_t t0 = clock();
    size_t npass = 0, nmarg = 0, nbroken = 0, nfail = 0, nerr = 0, nskip_rule = 0;
    cr_test_report all;
    cr_test_report_init(&all);
    for (size_t i = 0; i < n; i++) {
        result *r = &res[i];
        if (a.progress)
            progress_bar(i, n, r->info.fn ? r->info.fn->name : "");
        r->st = cr_test_rule_registration(scratch, &a.opts, &r->info, &r->rep);
        cr_arena_reset(scratch);
        cr_ctx_clear_error(ctx);
        cr_test_report_merge(&all, &r->rep);
        if (r->st == CR_ENOCAP)
            nskip_rule++;
        else if (r->st != CR_OK)
            nerr++;
        else if (r->rep.verdict == CR_VERDICT_FAIL)
            nfail++;
        else if (r->rep.verdict == CR_VERDICT_BROKEN)
            nbroken++;
        else if (r->rep.verdict == CR_VERDICT_MARGINAL)
            nmarg++;
        else
            npass++;
        if (a.verbose) {
            if (a.progress)
                fprintf(stderr, "\r%*s\r", 64, "");
            char sig[260], line[1400];
            signature(&r->info, sig, sizeof sig);
            cr_test_report_format(&r->rep, line, sizeof line);
            printf("%-8s %s: %s\n",
                   r->st == CR_OK || r->st == CR_ENOCAP ? cr_verdict_name(r->rep.verdict) : "ERROR",
                   sig, r->st == CR_ENOCAP ? r->rep.message : line);
            if (r->rep.nskipped > 0)
                printf("         %zu point%s skipped, first %s\n", r->rep.nskipped,
                       r->rep.nskipped == 1 ? "" : "s", r->rep.skip_note);
        }
    }
    if (a.progress) {
        progress_bar(n, n, "");
        fprintf(stderr, "\r%*s\r", 64, "");
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;

    if (!a.quiet && !a.verbose) {
        /* Everything that did not plainly pass, worst first. */
        static const int order[] = {3, 2, 1};
        for (size_t o = 0; o < sizeof order / sizeof order[0]; o++) {
            for (size_t i = 0; i < n; i++) {
                result *r = &res[i];
                int rank =
                    r->st != CR_OK && r->st != CR_ENOCAP ? 3 : cr_verdict_rank(r->rep.verdict);
                if (rank != order[o] || (r->st == CR_OK && r->rep.verdict == CR_VERDICT_PASS))
                    continue;
                char sig[260];
                signature(&r->info, sig, sizeof sig);
                const char *tag = r->st != CR_OK ? "ERROR" : cr_verdict_name(r->rep.verdict);
                printf("%-8s %s\n", tag, sig);
                if (r->st != CR_OK && r->rep.nchecks == 0)
                    printf("         %s: %s\n", cr_status_name(r->st),
                           r->rep.message[0] ? r->rep.message : cr_status_str(r->st));
                else
                    printf(
                        "         worst error %.3g (abs), %.3g (rel), %.3g x tolerance; %s%s%s\n",
                        r->rep.max_abs_err, r->rep.max_rel_err, r->rep.worst_ratio, r->rep.where,
                        r->rep.where[0] ? ": " : "", r->rep.message);
            }
        }
    }
    printf("%s: %zu rule%s checked at %zu points (%zu skipped), %zu checks in %.1f s\n", prog, n,
           n == 1 ? "" : "s", all.npoints, all.nskipped, all.nchecks, secs);
    printf("  pass %zu, marginal %zu, broken %zu, fail %zu, could not test %zu", npass, nmarg,
           nbroken, nfail, nerr);
    if (nskip_rule)
        printf(", needing capabilities %zu", nskip_rule);
    printf("\n");
    if (nfail + nerr > 0) {
        const result *worst = NULL;
        for (size_t i = 0; i < n; i++)
            if (rule_failed(&res[i]) &&
                (worst == NULL || res[i].rep.worst_ratio > worst->rep.worst_ratio))
                worst = &res[i];
        if (worst != NULL && worst->rep.nchecks > 0) {
            char sig[260];
            signature(&worst->info, sig, sizeof sig);
            printf("  worst failure: %s, %.3g x tolerance (abs err %.3g): %s\n", sig,
                   worst->rep.worst_ratio, worst->rep.max_abs_err, worst->rep.where);
        }
    }
    int code = nfail + nerr > 0 ? 1 : 0;
    cr_ctx_dealloc(ctx, res, total * sizeof *res);
    cr_arena_free(scratch);
    cr_ctx_free(ctx);
    return code;
}
