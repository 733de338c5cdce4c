/*
 * chainrules-ad: differentiates plain C with the rules of chainrules-c.
 *
 *   chainrules-ad --reverse f[,g...] [--reverse-set f[,...]] [--wrt a,b] [--forward h[,...]]
 *                 [--vector h[,...]]
 *                 [--jacobian j[,...] [--dims a=N,...]] [-o out.c] input.c [-- cflags...]
 *
 * docs/source-transformation.md is the reference: the generated signatures, the supported
 * C, how the rules are used, memory, errors.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>

#include "ad.h"
#include "requests.h"

static void usage(FILE *fp)
{
    fputs("usage: chainrules-ad [--reverse f[,g...]] [--reverse-set f[,...]] [--forward h[,...]]\n"
          "                     [--vector h[,...]] [--lane-ranges]\n"
          "                     [--jacobian j[,...] [--dims a=N,...]]\n"
          "                     [--wrt a,b] [--rules lib.so] [--emit-rules f[,...]\n"
          "                     [--rules-function name]]\n"
          "                     [-o out.c] input.c [-- cflags...]\n"
          "Writes f_rev (reverse mode), f_rev_set (the same, assigning the gradient),\n"
          "h_fwd (forward mode), h_fwdv (vector forward mode) and j_jacfwd (the Jacobian by\n"
          "the forward mode with static lane sparsity) for functions of input.c; see\n"
          "docs/source-transformation.md.\n",
          fp);
}

/* --lane-ranges: the helpers of the vector forward mode's lane ranges. A local tangent's
 * lanes outside its range [lo, hi) are zero; the range is empty when hi <= lo. */
static const char lane_range_helpers[] =
    "/* lane ranges (--lane-ranges): [lo, hi) holds a tangent's nonzero lanes, empty when\n"
    " * hi <= lo; the lanes outside it are zero */\n"
    "static inline void cr_ad_lr_grow_(int *lo, int *hi, int a, int b)\n"
    "{\n"
    "    if (b <= a)\n"
    "        return;\n"
    "    if (*hi <= *lo) {\n"
    "        *lo = a;\n"
    "        *hi = b;\n"
    "        return;\n"
    "    }\n"
    "    if (a < *lo)\n"
    "        *lo = a;\n"
    "    if (b > *hi)\n"
    "        *hi = b;\n"
    "}\n"
    "/* grows [lo, hi) by the nonzero lanes of d[0..w) (a caller's tangent, not tracked) */\n"
    "static inline void cr_ad_lr_scan_(int *lo, int *hi, const double *d, int w)\n"
    "{\n"
    "    int a = 0;\n"
    "    while (a < w && d[a] == 0)\n"
    "        a++;\n"
    "    if (a == w)\n"
    "        return;\n"
    "    int b = w;\n"
    "    while (d[b - 1] == 0)\n"
    "        b--;\n"
    "    cr_ad_lr_grow_(lo, hi, a, b);\n"
    "}\n"
    "/* zeroes the lanes of [olo, ohi) outside [lo, hi) */\n"
    "static inline void cr_ad_lr_clear_(double *d, int olo, int ohi, int lo, int hi)\n"
    "{\n"
    "    for (int k = olo; k < ohi; k++)\n"
    "        if (hi <= lo || k < lo || k >= hi)\n"
    "            d[k] = 0;\n"
    "}\n"
    "/* zeroes the lanes that [lo, hi) grown by [a, b) gains */\n"
    "static inline void cr_ad_lr_widen_(double *d, int lo, int hi, int a, int b)\n"
    "{\n"
    "    if (b <= a)\n"
    "        return;\n"
    "    int s = hi <= lo || a < lo ? a : lo, e = hi <= lo || b > hi ? b : hi;\n"
    "    for (int k = s; k < e; k++)\n"
    "        if (hi <= lo || k < lo || k >= hi)\n"
    "            d[k] = 0;\n"
    "}\n"
    "/* n ranges made [0, w) (an array a callee wrote) */\n"
    "static inline void cr_ad_lr_fill_(int *lo, int *hi, size_t n, int w)\n"
    "{\n"
    "    for (size_t i = 0; i < n; i++) {\n"
    "        lo[i] = 0;\n"
    "        hi[i] = w;\n"
    "    }\n"
    "}\n\n";

/* Splits "a,b,c" into *list (appended). */
static void split_names(const char *s, const char ***list, int *n)
{
    char *copy = ad_strdup(s);
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
        const char **nl = ad_alloc((size_t)(*n + 1) * sizeof *nl);
        if (*n)
            memcpy(nl, *list, (size_t)*n * sizeof *nl);
        nl[(*n)++] = tok;
        *list = nl;
    }
}

/* The public mask of a requested function: every parameter with real data, or those named
 * by --wrt; outputs (real pointers the function writes) always. */
static int public_mask(ad_func *f, const ad_options *opt, uint64_t *mask)
{
    *mask = 0;
    if (f->nparams > 64) {
        ad_error(f->loc, "'%s' has more than 64 parameters", f->name);
        return 1;
    }
    for (int i = 0; i < f->nparams; i++) {
        ad_var *p = f->params[i];
        if (!ad_type_has_real(p->type))
            continue;
        if (p->type->kind == TY_STRUCT) {
            ad_error(p->loc,
                     "unsupported construct: the struct parameter '%s' passed by value "
                     "(pass a pointer)",
                     p->name);
            return 1;
        }
        bool in = opt->nwrt == 0 || p->output;
        for (int j = 0; j < opt->nwrt; j++)
            if (strcmp(opt->wrt[j], p->name) == 0)
                in = true;
        if (in)
            *mask |= (uint64_t)1 << i;
    }
    return 0;
}

/* --rules lib.so: a shared object exporting cr_check_plugin_init (as chainrules-check
 * --plugin loads), whose registry's scalar rows the generated code uses. The library stays
 * loaded until the tool exits. */
typedef cr_status (*plugin_init_fn)(cr_ctx *ctx, cr_registry **out);

static cr_registry *g_rules[8];
static void *g_libs[8];
static int g_nrules;

static void unload_rules(cr_ctx *ctx)
{
    for (int i = 0; i < g_nrules; i++) {
        cr_registry_free(g_rules[i]);
        dlclose(g_libs[i]);
    }
    g_nrules = 0;
    cr_ctx_free(ctx);
}

static int load_rules(const char *path, cr_ctx *ctx)
{
    if (g_nrules == 8) {
        fputs("chainrules-ad: at most 8 --rules\n", stderr);
        return 1;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "chainrules-ad: cannot load '%s': %s\n", path, dlerror());
        return 1;
    }
    void *sym = dlsym(lib, "cr_check_plugin_init");
    plugin_init_fn init;
    memcpy(&init, &sym, sizeof init); /* object pointer to function pointer, as POSIX allows */
    cr_registry *reg = NULL;
    if (!sym) {
        fprintf(stderr, "chainrules-ad: '%s' does not export cr_check_plugin_init\n", path);
        dlclose(lib);
        return 1;
    }
    cr_status st = init(ctx, &reg);
    if (st != CR_OK || !reg) {
        fprintf(stderr, "chainrules-ad: cr_check_plugin_init of '%s' failed: %s: %s\n", path,
                cr_status_name(st), cr_ctx_errmsg(ctx));
        dlclose(lib);
        return 1;
    }
    g_rules[g_nrules] = reg;
    g_libs[g_nrules++] = lib;
    ad_rows_add_registry(reg);
    return 0;
}

static int report(ad_func *f)
{
    if (f->errors.len)
        fputs(f->errors.p, stderr);
    return f->nerrors != 0 || f->errors.len != 0;
}

/* Frees the messages kept about the functions' bodies (those of functions that were not
 * transformed were never printed). */
static void free_errors(ad_unit *u)
{
    for (int i = 0; i < u->nfuncs; i++)
        ad_buf_free(&u->funcs[i]->errors);
}

/* Appends a static function and its prototype. */
static void add_static(ad_buf *protos, ad_buf *bodies, ad_buf *fn)
{
    if (!fn->p)
        return;
    char *brace = strstr(fn->p, ")\n{\n");
    if (brace) {
        size_t n = (size_t)(brace - fn->p) + 1;
        char *proto = ad_alloc(n + 3);
        memcpy(proto, fn->p, n);
        strcpy(proto + n, ";\n");
        ad_buf_put(protos, proto);
        /* a second function in the same text (the split pair) */
        char *second = strstr(brace, "\n}\n\nstatic ");
        if (second) {
            char *s2 = second + 4;
            char *b2 = strstr(s2, ")\n{\n");
            if (b2) {
                size_t n2 = (size_t)(b2 - s2) + 1;
                char *p2 = ad_alloc(n2 + 3);
                memcpy(p2, s2, n2);
                strcpy(p2 + n2, ";\n");
                ad_buf_put(protos, p2);
            }
        }
    }
    ad_buf_put(bodies, fn->p);
}

int main(int argc, char **argv)
{
    const char **rev = NULL, **fwd = NULL, **vec = NULL, **jacs = NULL, **dimv = NULL;
    const char **revset = NULL;
    int nrev = 0, nfwd = 0, nvec = 0, njac = 0, ndimv = 0, nrevset = 0;
    ad_jac_dims dims = {0};
    ad_options opt = {0};
    const char *out_path = NULL, *in_path = NULL;
    const char **rules = NULL;
    int nrules = 0;
    const char *rules_fn = NULL;
    cr_ctx *rules_ctx = NULL; /* owns the --rules registries until exit */
    const char **rule_libs = NULL;
    int nrule_libs = 0;
    const char **flags = NULL;
    int nflags = 0;
    bool lane_ranges = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            flags = (const char **)argv + i + 1;
            nflags = argc - i - 1;
            break;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--lane-ranges")) {
            lane_ranges = true;
        } else if (!strcmp(a, "--rules") && i + 1 < argc) {
            split_names(argv[++i], &rule_libs, &nrule_libs);
        } else if (!strcmp(a, "--emit-rules") && i + 1 < argc) {
            split_names(argv[++i], &rules, &nrules);
        } else if (!strcmp(a, "--rules-function") && i + 1 < argc) {
            rules_fn = argv[++i];
        } else if (!strcmp(a, "--jacobian") && i + 1 < argc) {
            split_names(argv[++i], &jacs, &njac);
        } else if (!strcmp(a, "--reverse-set") && i + 1 < argc) {
            split_names(argv[++i], &revset, &nrevset);
        } else if (!strcmp(a, "--dims") && i + 1 < argc) {
            split_names(argv[++i], &dimv, &ndimv);
        } else if ((!strcmp(a, "--reverse") || !strcmp(a, "--forward") || !strcmp(a, "--vector") ||
                    !strcmp(a, "--wrt") || !strcmp(a, "-o")) &&
                   i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(a, "--reverse"))
                split_names(v, &rev, &nrev);
            else if (!strcmp(a, "--forward"))
                split_names(v, &fwd, &nfwd);
            else if (!strcmp(a, "--vector"))
                split_names(v, &vec, &nvec);
            else if (!strcmp(a, "--wrt"))
                split_names(v, &opt.wrt, &opt.nwrt);
            else
                out_path = v;
        } else if (a[0] == '-') {
            fprintf(stderr, "chainrules-ad: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!in_path) {
            in_path = a;
        } else {
            fprintf(stderr, "chainrules-ad: more than one input file ('%s')\n", a);
            return 2;
        }
    }
    /* a function emitted as a rule needs its reverse mode */
    for (int i = 0; i < nrules; i++) {
        split_names(rules[i], &rev, &nrev);
        split_names(rules[i], &fwd, &nfwd);
    }
    if (!in_path || (nrev + nfwd + nvec + njac + nrevset) == 0) {
        usage(stderr);
        return 2;
    }
    /* --dims a=N,b=M: the lengths of the arrays the Jacobian entry indexes by variables */
    dims.names = ad_alloc((size_t)(ndimv + 1) * sizeof *dims.names);
    dims.lens = ad_alloc((size_t)(ndimv + 1) * sizeof *dims.lens);
    for (int i = 0; i < ndimv; i++) {
        const char *eq = strchr(dimv[i], '=');
        char *end = NULL;
        long long n = eq ? strtoll(eq + 1, &end, 10) : -1;
        if (!eq || eq == dimv[i] || !end || *end || end == eq + 1 || n < 1 || n > (1 << 20)) {
            fprintf(stderr, "chainrules-ad: --dims wants name=N with 1 <= N <= 1048576, not '%s'\n",
                    dimv[i]);
            ad_pool_free();
            return 2;
        }
        dims.names[dims.n] = ad_fmt("%.*s", (int)(eq - dimv[i]), dimv[i]);
        dims.lens[dims.n++] = n;
    }
    dims.wrt = opt.wrt;
    dims.nwrt = opt.nwrt;
    if (nrule_libs) {
        if (cr_ctx_new(NULL, &rules_ctx) != CR_OK) {
            fputs("chainrules-ad: out of memory\n", stderr);
            return 1;
        }
        for (int i = 0; i < nrule_libs; i++)
            if (load_rules(rule_libs[i], rules_ctx)) {
                unload_rules(rules_ctx);
                ad_pool_free();
                return 1;
            }
    }
    ad_unit u;
    if (ad_parse(in_path, flags, nflags, &u)) {
        if (rules_ctx)
            unload_rules(rules_ctx);
        free_errors(&u);
        ad_pool_free();
        return 1;
    }
    u.lane_ranges = lane_ranges;
    ad_prepare(&u);
    /* --reverse-set: an element read twice by one statement is read once into a local */
    for (int i = 0; i < nrevset; i++) {
        ad_func *f = ad_unit_find(&u, revset[i]);
        if (f && f->has_body && !f->prim && !f->nerrors)
            ad_share_element_reads(f);
    }
    int rc = 0;
    /* the requested functions */
    const char **lists[5] = {rev, fwd, vec, jacs, revset};
    int counts[5] = {nrev, nfwd, nvec, njac, nrevset};
    ad_req_kind kinds[5] = {REQ_REV, REQ_FWD, REQ_FWDV, REQ_JAC, REQ_RSET};
    for (int m = 0; m < 5; m++)
        for (int i = 0; i < counts[m]; i++) {
            ad_func *f = ad_unit_find(&u, lists[m][i]);
            if (f && f->prim) {
                fprintf(stderr,
                        "%s: error: '%s' is a primitive (#pragma chainrules primitive): its "
                        "derivatives are its rule's\n",
                        in_path, lists[m][i]);
                rc = 1;
                continue;
            }
            if (!f || !f->has_body) {
                fprintf(stderr, "%s: error: no function '%s' with a body in this file\n", in_path,
                        lists[m][i]);
                rc = 1;
                continue;
            }
            uint64_t mask;
            if (public_mask(f, &opt, &mask)) {
                rc = 1;
                continue;
            }
            ad_request(&u, f, mask, kinds[m]);
            if (kinds[m] == REQ_FWDV)
                ad_request(&u, f, mask, REQ_TANV);
        }
    for (int i = 0; i < opt.nwrt; i++) {
        bool found = false;
        for (int m = 0; m < 5; m++)
            for (int k = 0; k < counts[m]; k++) {
                ad_func *f = ad_unit_find(&u, lists[m][k]);
                for (int j = 0; f && j < f->nparams; j++)
                    found |= !strcmp(f->params[j]->name, opt.wrt[i]);
            }
        if (!found) {
            fprintf(stderr,
                    "%s: error: --wrt names '%s', which is not a parameter of the "
                    "functions to differentiate\n",
                    in_path, opt.wrt[i]);
            rc = 1;
        }
    }
    /* --dims: each name is a parameter of a --jacobian function ("f.a": of f, a --jacobian
     * function); a name matching nothing would be ignored */
    for (int i = 0; i < dims.n; i++) {
        const char *name = dims.names[i], *dot = strchr(name, '.');
        bool found = false;
        for (int k = 0; k < njac && !found; k++) {
            const char *pname = name;
            if (dot) {
                size_t fl = (size_t)(dot - name);
                if (strlen(jacs[k]) != fl || strncmp(jacs[k], name, fl))
                    continue;
                pname = dot + 1;
            }
            ad_func *jf = ad_unit_find(&u, jacs[k]);
            for (int j = 0; jf && j < jf->nparams && !found; j++)
                found = !strcmp(jf->params[j]->name, pname);
        }
        if (!found) {
            if (dot)
                fprintf(stderr,
                        "%s: error: --dims names '%s': '%.*s' is not a function of --jacobian "
                        "with a parameter '%s'\n",
                        in_path, name, (int)(dot - name), name, dot + 1);
            else
                fprintf(stderr,
                        "%s: error: --dims names '%s', which is not a parameter of the "
                        "functions of --jacobian\n",
                        in_path, name);
            rc = 1;
        }
    }
    ad_buf publics = {0}, protos = {0}, bodies = {0};
    ad_func *f;
    uint64_t mask;
    ad_req_kind kind;
    /* a Jacobian entry or an f_rev_set that fails does not stop the others: each reports
     * its errors */
    int jac_rc = 0;
    while (!rc && ad_next_request(&f, &mask, &kind)) {
        int errors0 = ad_errors();
        if (report(f)) {
            rc = 1;
            break;
        }
        if (f->prim) {
            ad_buf fn = {0};
            ad_emit_prim(&fn, &protos, f, mask,
                         kind == REQ_SPLIT ? 0
                         : kind == REQ_TAN ? 1
                                           : 2,
                         ad_fmt("_%llx", (unsigned long long)mask));
            add_static(&protos, &bodies, &fn);
            ad_buf_free(&fn);
            continue;
        }
        if (ad_analyse(&u, f, mask, kind == REQ_SPLIT) || report(f)) {
            rc = 1;
            break;
        }
        const char *mn = ad_fmt("_%llx", (unsigned long long)mask);
        ad_buf fn = {0};
        switch (kind) {
        case REQ_REV:
        case REQ_RSET:
        case REQ_FWD:
        case REQ_FWDV: {
            /* a public function, declared first (the generated signature) */
            ad_buf sig = {0};
            ad_emit_signature(&sig, f,
                              kind == REQ_REV    ? 'r'
                              : kind == REQ_RSET ? 's'
                              : kind == REQ_FWD  ? 'f'
                                                 : 'v');
            ad_buf_printf(&protos, "%s;\n", sig.p);
            ad_buf_free(&sig);
            if (kind == REQ_REV || kind == REQ_RSET)
                ad_emit_reverse_public(&publics, &u, f, kind == REQ_RSET);
            else
                ad_emit_forward_fn(&publics, &u, f, mn, kind == REQ_FWDV, true);
            break;
        }
        case REQ_SPLIT:
            ad_emit_reverse_split(&fn, &u, f, mn);
            break;
        case REQ_TAN:
            ad_emit_forward_fn(&fn, &u, f, mn, false, false);
            break;
        case REQ_TANV:
            ad_emit_forward_fn(&fn, &u, f, mn, true, false);
            break;
        case REQ_JAC: {
            ad_buf sig = {0};
            ad_emit_jacobian_signature(&sig, f);
            ad_buf_printf(&protos, "%s;\n", sig.p);
            ad_buf_free(&sig);
            if (ad_emit_jacobian(&publics, &u, f, mask, &dims) || ad_errors() > errors0) {
                jac_rc = 1;
                continue;
            }
            break;
        }
        }
        add_static(&protos, &bodies, &fn);
        ad_buf_free(&fn);
        /* an f_rev_set refused (its message given) does not stop the others either */
        if (kind == REQ_RSET && !report(f) && ad_errors() > errors0) {
            jac_rc = 1;
            continue;
        }
        if (report(f) || ad_errors() > errors0) {
            rc = 1;
            break;
        }
    }
    rc |= jac_rc;
    ad_buf rules_out = {0};
    if (!rc && nrules) {
        const char *name = rules_fn;
        if (!name) {
            /* <input file stem>_register_rules */
            const char *b = strrchr(in_path, '/');
            b = b ? b + 1 : in_path;
            size_t n = strcspn(b, ".");
            char *stem = ad_fmt("%.*s", (int)n, b);
            for (char *c = stem; *c; c++) {
                bool ident = *c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                             (*c >= '0' && *c <= '9');
                c[0] = ident ? c[0] : '_';
            }
            name = ad_fmt("%s_register_rules", stem);
        }
        ad_func **fs = ad_alloc((size_t)nrules * sizeof *fs);
        for (int i = 0; i < nrules; i++) {
            uint64_t pm;
            fs[i] = ad_unit_find(&u, rules[i]);
            /* the public signature, which the rule calls */
            if (fs[i] && !public_mask(fs[i], &opt, &pm))
                ad_analyse(&u, fs[i], pm, false);
        }
        if (ad_emit_rules(&rules_out, &protos, &u, fs, nrules, name))
            rc = 1;
    }
    if (!rc && ad_errors())
        rc = 1;
    if (!rc) {
        ad_buf out = {0};
        ad_emit_preamble(&u, &out);
        ad_buf_put(&out, "#ifndef CR_AD_VMAX\n#define CR_AD_VMAX 16 /* directions per sweep of "
                         "the vector forward mode */\n#endif\n\n");
        if (u.lane_ranges)
            ad_buf_put(&out, lane_range_helpers);
        ad_rows_emit(&out);
        ad_buf_put(&out, protos.p ? protos.p : "");
        ad_buf_put(&out, "\n");
        ad_buf_put(&out, bodies.p ? bodies.p : "");
        ad_buf_put(&out, publics.p ? publics.p : "");
        ad_buf_put(&out, rules_out.p ? rules_out.p : "");
        FILE *fp = out_path ? fopen(out_path, "w") : stdout;
        if (!fp) {
            fprintf(stderr, "chainrules-ad: cannot write '%s'\n", out_path);
            rc = 1;
        } else {
            if (fwrite(out.p, 1, out.len, fp) != out.len)
                rc = 1;
            if (fp != stdout && fclose(fp) != 0)
                rc = 1;
            if (rc) {
                fprintf(stderr, "chainrules-ad: error writing '%s'\n", out_path);
                if (out_path)
                    remove(out_path);
            }
        }
        ad_buf_free(&out);
    }
    ad_buf_free(&rules_out);
    if (rules_ctx)
        unload_rules(rules_ctx);
    ad_buf_free(&publics);
    ad_buf_free(&protos);
    ad_buf_free(&bodies);
    free_errors(&u);
    ad_pool_free();
    return rc;
}
