/*
 * gen-dual-rows: include/chainrules/dual_inline_rows.h and its parts dual_inline_rows_K.h,
 * the inline forward-mode operations of every scalar rule row, from the built-in registry.
 *
 * For each row (cr_scalar_rule: the primal and the partials as the row's single
 * definition wrote them, kept in primal_src and partials_src) it writes
 *   - cr__dual_row_NAME(x, Y, D): the row's own text, inline, when the text uses only
 *     <math.h>; otherwise a call of the library's instantiation of the row (cr_fn_NAME's
 *     row->f64), for rows whose text calls private helpers of the library (accuracy near
 *     hard points, special functions);
 *   - cr_dual1_NAME: the operation on a one-direction dual (cr_dual1);
 *   - cr_dualv_NAME: the operation on n directions held in caller arrays;
 * and the X-macro CR__DUAL_ROWS that CR_DUALN_DEFINE (dual_inline.h) expands into the
 * operations of a dual type with a compile-time number of directions. No partial
 * derivative is written here: every one is the row's.
 *
 * The operations go to the parts dual_inline_rows_1.h .. dual_inline_rows_N.h, cut at row
 * boundaries so that no part is longer than PART_LINES lines; dual_inline_rows.h includes
 * them and holds CR__DUAL_ROWS and CR__DUAL_NROWS.
 *
 *   gen-dual-rows                  print every file, each after a line "==> NAME"
 *   gen-dual-rows --write DIR      write them to DIR (include/chainrules) and remove the
 *                                  parts of DIR beyond the last
 *   gen-dual-rows --check DIR      exit 1 if a file of DIR differs from what --write would
 *                                  write, or DIR holds a part beyond the last
 */
#define _POSIX_C_SOURCE 200809L /* opendir */

#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules/ctx.h>
#include <chainrules/rule.h>
#include <chainrules/scalar_rule.h>
#include <chainrules/status.h>

#define GEN_PROG "gen-dual-rows"
#include "gen_buf.h"

/* Identifiers a row's text may use and still be written inline: the row's own names and
 * C's <math.h>. A local of a row ends in '_' (the rows' convention). */
static const char *const k_math_names[] = {
    "x",       "Y",        "D",     "T",        "sin",    "cos",    "tan",   "asin",  "acos",
    "atan",    "atan2",    "sinh",  "cosh",     "tanh",   "asinh",  "acosh", "atanh", "exp",
    "exp2",    "expm1",    "log",   "log2",     "log10",  "log1p",  "sqrt",  "cbrt",  "pow",
    "hypot",   "fabs",     "erf",   "erfc",     "tgamma", "lgamma", "fmax",  "fmin",  "copysign",
    "floor",   "ceil",     "trunc", "round",    "fma",    "fmod",   "isnan", "isinf", "isfinite",
    "signbit", "INFINITY", "NAN",   "HUGE_VAL", NULL};

static bool own_name(const char *s, size_t n)
{
    return (n == 1 && strchr("xYDT", *s) != NULL) || (n > 1 && s[n - 1] == '_');
}

static bool allowed_ident(const char *s, size_t n)
{
    if (own_name(s, n))
        return true;
    for (int i = 0; k_math_names[i]; i++)
        if (strlen(k_math_names[i]) == n && strncmp(k_math_names[i], s, n) == 0)
            return true;
    return false;
}

/* The length of the number at s (digits, '.', exponent with its sign, suffix). */
static size_t number_len(const char *s)
{
    const char *b = s;
    while (isalnum((unsigned char)*s) || *s == '.' ||
           ((*s == '+' || *s == '-') && s > b && strchr("eEpP", s[-1]) != NULL))
        s++;
    return (size_t)(s - b);
}

/* Does the text use only the row's names and <math.h>? */
static bool inline_ok(const char *s)
{
    while (*s) {
        if (isalpha((unsigned char)*s) || *s == '_') {
            const char *b = s;
            while (isalnum((unsigned char)*s) || *s == '_')
                s++;
            if (!allowed_ident(b, (size_t)(s - b)))
                return false;
        } else if (isdigit((unsigned char)*s) || *s == '.') {
            s += number_len(s);
        } else {
            s++;
        }
    }
    return true;
}

/* The row's text as statements, its own names (x, Y, D, T and its locals) prefixed with
 * cr__ so that they can neither shadow nor meet the includer's names and macros. */
static void put_text(buf *b, const char *s)
{
    puts_(b, "    ");
    while (*s) {
        if (isalpha((unsigned char)*s) || *s == '_') {
            const char *w = s;
            while (isalnum((unsigned char)*s) || *s == '_')
                s++;
            size_t n = (size_t)(s - w);
            if (own_name(w, n))
                puts_(b, "cr__");
            put(b, w, n);
        } else if (isdigit((unsigned char)*s) || *s == '.') {
            size_t n = number_len(s);
            put(b, s, n);
            s += n;
        } else if (*s == ';') {
            puts_(b, ";\n    ");
            s++;
            while (*s == ' ')
                s++;
        } else {
            put(b, s, 1);
            s++;
        }
    }
    puts_(b, ";\n");
}

/* Text inside a comment: whitespace runs collapsed, no comment terminator. */
static void put_comment_text(buf *b, const char *s)
{
    bool space = false;
    for (; *s; s++) {
        if (*s == ' ' || *s == '\n' || *s == '\t') {
            space = true;
            continue;
        }
        if (space)
            puts_(b, " ");
        space = false;
        if (*s == '*' && s[1] == '/')
            puts_(b, "* ");
        else
            put(b, s, 1);
    }
}

typedef struct row {
    const char *name; /* the C name: cr_dual1_NAME, cr_fn_NAME */
    const cr_scalar_rule *rule;
    bool inl;
} row;

#define MAX_ROWS 512

static row g_rows[MAX_ROWS];
static size_t g_nrows;

/* Every scalar row of the built-in registry once, in registration order. */
static bool collect(void)
{
    const cr_registry *reg = cr_registry_builtin();
    size_t n = cr_registry_size(reg);
    for (size_t i = 0; i < n; i++) {
        cr_rule_info info;
        if (cr_registry_get(reg, i, &info) != CR_OK || info.non_differentiable)
            continue;
        const cr_scalar_rule *rule = cr_scalar_rule_of(info.fn);
        if (rule == NULL || info.def->udata != rule)
            continue;
        /* the C name: the function's registered name, or the row's where that is not an
         * identifier (the row of "+" is add, its function value cr_fn_add) */
        const char *name = info.fn->name;
        for (const char *c = name; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '_')
                name = rule->name;
        bool seen = false;
        for (size_t k = 0; k < g_nrows; k++)
            if (strcmp(g_rows[k].name, name) == 0)
                seen = true;
        if (seen)
            continue;
        if (g_nrows == MAX_ROWS) {
            fputs("gen-dual-rows: more than 512 rows\n", stderr);
            return false;
        }
        if (rule->nin < 1 || rule->nin > 3 || (rule->nout > 1 && rule->nin != 1)) {
            fprintf(stderr, "gen-dual-rows: row %s: %u inputs, %u outputs: not supported\n", name,
                    (unsigned)rule->nin, (unsigned)rule->nout);
            return false;
        }
        g_rows[g_nrows].name = name;
        g_rows[g_nrows].rule = rule;
        g_rows[g_nrows].inl = inline_ok(rule->primal_src) && inline_ok(rule->partials_src);
        g_nrows++;
    }
    return true;
}

static const char k_args[3][2] = {"a", "b", "c"};

/* The argument list "a, b" of a row of nin inputs. */
static void put_call_args(buf *b, unsigned nin)
{
    for (unsigned j = 0; j < nin; j++)
        printf_(b, "%s%s", j ? ", " : "", k_args[j]);
}

static void gen_row(buf *b, const row *r)
{
    const cr_scalar_rule *q = r->rule;
    unsigned nin = q->nin, nout = q->nout;

    printf_(b, "/* ---- %s ---- */\n\n", r->name);
    /* the row */
    puts_(b, "/** @cond CR_PRIVATE */\n");
    printf_(b, "/* The row '%s'", r->name);
    printf_(b, r->inl ? ", its text inline:\n *   "
                      : " (its text calls private helpers of the "
                        "library: its instantiation is called):\n"
                        " *   ");
    put_comment_text(b, q->primal_src);
    puts_(b, "\n *   ");
    put_comment_text(b, q->partials_src);
    puts_(b, " */\n");
    printf_(b,
            "CR__DUAL_INLINE void cr__dual_row_%s(const double *cr__x, double *cr__Y, double "
            "*cr__D)\n{\n",
            r->name);
    if (r->inl) {
        puts_(b, "    typedef double cr__T;\n    (void)sizeof(cr__T);\n    (void)cr__x;\n");
        put_text(b, q->primal_src);
        put_text(b, q->partials_src);
    } else {
        printf_(b,
                "    ((const cr_scalar_rule *)cr_fn_%s.u.func.fn->udata)->f64(cr__x, cr__Y, "
                "cr__D);\n",
                r->name);
    }
    puts_(b, "}\n/** @endcond */\n\n");

    /* one direction */
    if (nout == 1) {
        printf_(b, "/** %s(", r->name);
        put_call_args(b, nin);
        puts_(b, ") on one-direction duals; partials of the row: `");
        put_comment_text(b, q->partials_src);
        puts_(b, "`. */\n");
        printf_(b, "CR__DUAL_INLINE cr_dual1 cr_dual1_%s(", r->name);
        for (unsigned j = 0; j < nin; j++)
            printf_(b, "%scr_dual1 %s", j ? ", " : "", k_args[j]);
        puts_(b, ")\n{\n");
        printf_(b, "    double cr__x[%u], cr__Y[1], cr__D[%u];\n", nin, nin);
        puts_(b, "    cr_dual1 cr__r;\n");
        for (unsigned j = 0; j < nin; j++)
            printf_(b, "    cr__x[%u] = %s.v;\n", j, k_args[j]);
        printf_(b, "    cr__dual_row_%s(cr__x, cr__Y, cr__D);\n", r->name);
        puts_(b, "    cr__r.v = cr__Y[0];\n    cr__r.d = ");
        for (unsigned j = 0; j < nin; j++)
            printf_(b, "%scr__D[%u] * %s.d", j ? " + " : "", j, k_args[j]);
        puts_(b, ";\n    return cr__r;\n}\n\n");
    } else {
        printf_(b,
                "/** %s(a) on a one-direction dual: its %u results in y[0..%u); partials of the "
                "row: `",
                r->name, nout, nout);
        put_comment_text(b, q->partials_src);
        puts_(b, "`. */\n");
        printf_(b, "CR__DUAL_INLINE void cr_dual1_%s(cr_dual1 a, cr_dual1 *y)\n{\n", r->name);
        printf_(b, "    double cr__Y[%u], cr__D[%u];\n", nout, nout);
        printf_(b, "    cr__dual_row_%s(&a.v, cr__Y, cr__D);\n", r->name);
        printf_(b, "    for (int cr__k = 0; cr__k < %u; cr__k++) {\n", nout);
        puts_(b, "        y[cr__k].v = cr__Y[cr__k];\n"
                 "        y[cr__k].d = cr__D[cr__k] * a.d;\n    }\n}\n\n");
    }

    /* n directions */
    if (nout == 1) {
        printf_(b, "/** %s(", r->name);
        put_call_args(b, nin);
        printf_(b,
                ") on n directions: returns the value and writes its n tangents to dy from "
                "the operands' n tangents in %s (dy may be one of them). */\n",
                nin == 1   ? "da"
                : nin == 2 ? "da, db"
                           : "da, db, dc");
        printf_(b, "CR__DUAL_INLINE double cr_dualv_%s(size_t n", r->name);
        for (unsigned j = 0; j < nin; j++)
            printf_(b, ", double %s, const double *d%s", k_args[j], k_args[j]);
        puts_(b, ", double *dy)\n{\n");
        printf_(b, "    double cr__x[%u], cr__Y[1], cr__D[%u];\n", nin, nin);
        for (unsigned j = 0; j < nin; j++)
            printf_(b, "    cr__x[%u] = %s;\n", j, k_args[j]);
        printf_(b, "    cr__dual_row_%s(cr__x, cr__Y, cr__D);\n", r->name);
        printf_(b, "    cr__dualv_lin%u(n", nin);
        for (unsigned j = 0; j < nin; j++)
            printf_(b, ", cr__D[%u], d%s", j, k_args[j]);
        puts_(b, ", dy);\n    return cr__Y[0];\n}\n\n");
    } else {
        printf_(b,
                "/** %s(a) on n directions: its %u values in y[0..%u), the tangents of result k "
                "in dy[k*n .. k*n+n) (dy must not overlap da). */\n",
                r->name, nout, nout);
        printf_(b,
                "CR__DUAL_INLINE void cr_dualv_%s(size_t n, double a, const double *da, double "
                "*y, double *dy)\n{\n",
                r->name);
        printf_(b, "    double cr__Y[%u], cr__D[%u];\n", nout, nout);
        printf_(b, "    cr__dual_row_%s(&a, cr__Y, cr__D);\n", r->name);
        printf_(b, "    for (int cr__k = 0; cr__k < %u; cr__k++) {\n", nout);
        puts_(b, "        y[cr__k] = cr__Y[cr__k];\n"
                 "        cr__dualv_lin1(n, cr__D[cr__k], da, dy + (size_t)cr__k * n);\n"
                 "    }\n}\n\n");
    }
}

/* The longest a part may be, in lines. */
#define PART_LINES 1500
#define MAX_PARTS  64
#define HEAD_NAME  "dual_inline_rows.h"

/* The files to write: the head dual_inline_rows.h, then the parts. */
typedef struct out_file {
    char name[64];
    buf text;
} out_file;

static out_file g_files[MAX_PARTS + 1];
static size_t g_nfiles;

static size_t count_lines(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

/* Part k of n (1-based), the rows [lo, hi), their text rows->p[at[lo] .. at[hi]). */
static void gen_part(buf *b, size_t k, size_t n, const buf *rows, const size_t *at, size_t lo,
                     size_t hi)
{
    printf_(b,
            "/**\n"
            " * @file dual_inline_rows_%zu.h\n"
            " * @brief Scalar rule rows on inline dual numbers, part %zu of %zu (generated).\n"
            " *\n",
            k, k, n);
    puts_(b, " * Generated by tools/gen_dual_rows.c from the built-in registry: do not edit it "
             "by hand;\n"
             " * `cmake --build <build dir> --target dual-rows` rewrites it and the test "
             "dual-rows fails\n"
             " * when it is out of date. Include <chainrules/dual_inline.h>, which includes "
             "every part\n"
             " * through dual_inline_rows.h (which says what each row's operations are).\n");
    printf_(b,
            " *\n * Rows %zu to %zu of %zu, '%s' to '%s': cr_dual1_NAME and cr_dualv_NAME of "
            "each.\n */\n",
            lo + 1, hi, g_nrows, g_rows[lo].name, g_rows[hi - 1].name);
    printf_(b,
            "/* clang-format off */\n"
            "#ifndef CR_DUAL_INLINE_ROWS_%zu_H\n#define CR_DUAL_INLINE_ROWS_%zu_H\n\n",
            k, k);
    puts_(b, "#include \"dual_inline.h\"\n#include \"rules_math.h\"\n"
             "#include \"rules_special.h\"\n#include \"scalar_rule.h\"\n\n"
             "CR_BEGIN_DECLS\n\n");
    put(b, rows->p + at[lo], at[hi] - at[lo]);
    printf_(b, "CR_END_DECLS\n\n#endif /* CR_DUAL_INLINE_ROWS_%zu_H */\n/* clang-format on */\n",
            k);
}

static void gen_head(buf *b, size_t nparts)
{
    size_t ninl = 0;
    for (size_t i = 0; i < g_nrows; i++)
        ninl += g_rows[i].inl;
    puts_(b, "/**\n"
             " * @file " HEAD_NAME "\n"
             " * @brief Every scalar rule row on inline dual numbers (generated).\n"
             " *\n"
             " * Generated by tools/gen_dual_rows.c from the built-in registry: do not edit it "
             "by hand;\n"
             " * `cmake --build <build dir> --target dual-rows` rewrites it and the test "
             "dual-rows fails\n"
             " * when it is out of date. Include <chainrules/dual_inline.h>, which includes "
             "this file.\n"
             " *\n"
             " * For each row NAME: cr_dual1_NAME (one direction) and cr_dualv_NAME (n "
             "directions in\n"
             " * caller arrays); CR_DUALN_DEFINE(TYPE, N) adds TYPE_NAME. Partials come from "
             "the row:\n");
    printf_(b,
            " * its text inline where it uses only <math.h> (%zu rows), the library's "
            "instantiation of\n"
            " * the row otherwise (%zu rows, whose text calls private helpers).\n",
            ninl, g_nrows - ninl);
    printf_(b,
            " *\n"
            " * The operations are in the parts dual_inline_rows_1.h to dual_inline_rows_%zu.h "
            "(at most\n"
            " * %d lines each), which this file includes; it holds the list of the rows.\n */\n",
            nparts, PART_LINES);
    puts_(b, "/* clang-format off */\n"
             "#ifndef CR_DUAL_INLINE_ROWS_H\n#define CR_DUAL_INLINE_ROWS_H\n\n"
             "#include \"dual_inline.h\"\n");
    for (size_t k = 1; k <= nparts; k++)
        printf_(b, "#include \"dual_inline_rows_%zu.h\"\n", k);
    puts_(b, "\nCR_BEGIN_DECLS\n\n");

    puts_(b, "/** @cond CR_PRIVATE */\n"
             "/* Every row, for CR_DUALN_DEFINE: X1/X2/X3(TYPE, N, NAME) for the rows of 1, 2, "
             "3 inputs\n"
             " * and one output, XM(TYPE, N, NAME, NOUT) for the rows of one input and NOUT > 1 "
             "outputs. */\n"
             "#define CR__DUAL_ROWS(X1, X2, X3, XM, TYPE, N) \\\n");
    for (size_t i = 0; i < g_nrows; i++) {
        const cr_scalar_rule *q = g_rows[i].rule;
        if (q->nout == 1)
            printf_(b, "    X%u(TYPE, N, %s)%s\n", (unsigned)q->nin, g_rows[i].name,
                    i + 1 < g_nrows ? " \\" : "");
        else
            printf_(b, "    XM(TYPE, N, %s, %u)%s\n", g_rows[i].name, (unsigned)q->nout,
                    i + 1 < g_nrows ? " \\" : "");
    }
    printf_(b, "\n/* The number of rows. */\nenum { CR__DUAL_NROWS = %zu };\n", g_nrows);
    puts_(b, "/** @endcond */\n\nCR_END_DECLS\n\n#endif /* CR_DUAL_INLINE_ROWS_H */\n"
             "/* clang-format on */\n");
}

/* Every file into g_files: the rows cut into parts of at most PART_LINES lines, each part
 * filled with whole rows while they fit. */
static bool generate(void)
{
    if (g_nrows == 0) {
        fputs("gen-dual-rows: the built-in registry has no scalar row\n", stderr);
        return false;
    }
    buf rows = {0};
    static size_t at[MAX_ROWS + 1];
    for (size_t i = 0; i < g_nrows; i++) {
        at[i] = rows.n;
        gen_row(&rows, &g_rows[i]);
    }
    at[g_nrows] = rows.n;

    /* the lines of a part around its rows (the same for every part) */
    buf empty = {0};
    gen_part(&empty, 1, 1, &rows, at, 0, 1);
    size_t frame = count_lines(empty.p, empty.n) - count_lines(rows.p + at[0], at[1] - at[0]);
    free(empty.p);

    size_t cut[MAX_PARTS + 1], nparts = 0;
    cut[0] = 0;
    for (size_t i = 0; i < g_nrows;) {
        size_t lines = frame, j = i;
        while (j < g_nrows) {
            size_t k = count_lines(rows.p + at[j], at[j + 1] - at[j]);
            if (j > i && lines + k > PART_LINES)
                break;
            lines += k;
            j++;
        }
        if (lines > PART_LINES) {
            fprintf(stderr, "gen-dual-rows: row %s alone is longer than a part (%d lines)\n",
                    g_rows[i].name, PART_LINES);
            free(rows.p);
            return false;
        }
        if (nparts == MAX_PARTS) {
            fprintf(stderr, "gen-dual-rows: more than %d parts\n", MAX_PARTS);
            free(rows.p);
            return false;
        }
        cut[++nparts] = j;
        i = j;
    }

    snprintf(g_files[0].name, sizeof g_files[0].name, HEAD_NAME);
    gen_head(&g_files[0].text, nparts);
    for (size_t k = 1; k <= nparts; k++) {
        snprintf(g_files[k].name, sizeof g_files[k].name, "dual_inline_rows_%zu.h", k);
        gen_part(&g_files[k].text, k, nparts, &rows, at, cut[k - 1], cut[k]);
    }
    g_nfiles = nparts + 1;
    free(rows.p);
    return true;
}

static bool read_file(const char *path, buf *out)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    char chunk[4096];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        put(out, chunk, k);
    bool ok = !ferror(f);
    fclose(f);
    return ok;
}

/* Is name a stale part: dual_inline_rows_K.h with K > nparts, K = 0 or K written with a
 * leading zero? */
static bool stale_part(const char *name, size_t nparts)
{
    static const char prefix[] = "dual_inline_rows_";
    size_t np = sizeof prefix - 1, n = strlen(name);
    if (n <= np + 2 || strncmp(name, prefix, np) != 0 || strcmp(name + n - 2, ".h") != 0)
        return false;
    size_t k = 0;
    for (const char *c = name + np; c < name + n - 2; c++) {
        if (!isdigit((unsigned char)*c))
            return false;
        if (k > MAX_PARTS)
            return true;
        k = k * 10 + (size_t)(*c - '0');
    }
    return k == 0 || k > nparts || name[np] == '0';
}

/* The stale parts of dir: removed (write) or reported (check). Returns 0, 1 (stale parts
 * found by check) or 2 (error). */
static int stale_parts(const char *dir, size_t nparts, bool write)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "gen-dual-rows: cannot read the directory %s\n", dir);
        return 2;
    }
    int rc = 0;
    char path[4096];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!stale_part(e->d_name, nparts))
            continue;
        if (!write) {
            fprintf(stderr,
                    "gen-dual-rows: %s/%s is not one of the parts (the last is "
                    "dual_inline_rows_%zu.h); regenerate with `cmake --build <build dir> "
                    "--target dual-rows`, which removes it\n",
                    dir, e->d_name, nparts);
            rc = 1;
            continue;
        }
        int len = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (len < 0 || (size_t)len >= sizeof path || remove(path) != 0) {
            fprintf(stderr, "gen-dual-rows: cannot remove %s/%s\n", dir, e->d_name);
            rc = 2;
        }
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    if (cr_registry_builtin_status() != CR_OK) {
        fprintf(stderr, "gen-dual-rows: the built-in registry failed to index: %s\n",
                cr_status_name(cr_registry_builtin_status()));
        return 2;
    }
    if (!collect() || !generate())
        return 2;
    int rc = 0;
    if (argc == 1) {
        for (size_t i = 0; i < g_nfiles; i++)
            printf("==> %s\n%s", g_files[i].name, g_files[i].text.p);
    } else if (argc != 3 || (strcmp(argv[1], "--write") != 0 && strcmp(argv[1], "--check") != 0)) {
        fputs("usage: gen-dual-rows [--write DIR | --check DIR]\n", stderr);
        rc = 2;
    } else {
        bool write = strcmp(argv[1], "--write") == 0;
        char path[4096];
        for (size_t i = 0; i < g_nfiles; i++) {
            const buf *want = &g_files[i].text;
            int len = snprintf(path, sizeof path, "%s/%s", argv[2], g_files[i].name);
            if (len < 0 || (size_t)len >= sizeof path) {
                fprintf(stderr, "gen-dual-rows: the path %s is too long\n", argv[2]);
                rc = 2;
                break;
            }
            if (write) {
                FILE *f = fopen(path, "wb");
                bool ok = f != NULL && fwrite(want->p, 1, want->n, f) == want->n;
                if (f != NULL && fclose(f) != 0)
                    ok = false;
                if (!ok) {
                    fprintf(stderr, "gen-dual-rows: cannot write %s\n", path);
                    rc = 2;
                }
                continue;
            }
            buf have = {0};
            if (!read_file(path, &have)) {
                fprintf(stderr,
                        "gen-dual-rows: %s is missing or unreadable; regenerate it with "
                        "`cmake --build <build dir> --target dual-rows`\n",
                        path);
                if (rc == 0)
                    rc = 1;
            } else if (have.n != want->n || memcmp(have.p, want->p, want->n) != 0) {
                fprintf(stderr,
                        "gen-dual-rows: %s is out of date with the built-in rows; regenerate "
                        "it with `cmake --build <build dir> --target dual-rows`\n",
                        path);
                if (rc == 0)
                    rc = 1;
            }
            free(have.p);
        }
        if (rc != 2) {
            int s = stale_parts(argv[2], g_nfiles - 1, write);
            if (s > rc)
                rc = s;
        }
    }
    for (size_t i = 0; i < g_nfiles; i++)
        free(g_files[i].text.p);
    return rc;
}
