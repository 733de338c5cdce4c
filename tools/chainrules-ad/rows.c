/*
 * The rule rows in generated code.
 *
 * Every derivative the generated code takes comes from a scalar rule row of the library
 * (CR_SCALAR_EVALS): the row's own text (its primal and partials, as the row's single
 * definition wrote them, kept in cr_scalar_rule.primal_src / partials_src) becomes a static
 * inline helper `cr_ad_row_NAME_f64(const double *x, double *Y, double *D)` of the output
 * when it uses only <math.h>; a row whose text calls private helpers of the library (for
 * accuracy near hard points) is called through the library's own instantiation
 * (cr_fn_NAME's row->f64). No partial derivative is written anywhere else.
 */
#include <ctype.h>
#include <string.h>

#include <chainrules.h>

#include "ad.h"

#define MAX_ROWS 256

static ad_row g_rows[MAX_ROWS];
static int g_nrows;

/* Identifiers a row's text may use and still be emitted inline: the row's own names and
 * <math.h>. A local of the row ends in '_' (the rows' convention). */
static const char *const k_math_names[] = {
    "x",       "Y",        "D",     "T",        "sin",    "cos",    "tan",   "asin",  "acos",
    "atan",    "atan2",    "sinh",  "cosh",     "tanh",   "asinh",  "acosh", "atanh", "exp",
    "exp2",    "expm1",    "log",   "log2",     "log10",  "log1p",  "sqrt",  "cbrt",  "pow",
    "hypot",   "fabs",     "erf",   "erfc",     "tgamma", "lgamma", "fmax",  "fmin",  "copysign",
    "floor",   "ceil",     "trunc", "round",    "fma",    "fmod",   "isnan", "isinf", "isfinite",
    "signbit", "INFINITY", "NAN",   "HUGE_VAL", NULL};

static bool allowed_ident(const char *s, size_t n)
{
    if (n > 1 && s[n - 1] == '_')
        return true;
    for (int i = 0; k_math_names[i]; i++)
        if (strlen(k_math_names[i]) == n && strncmp(k_math_names[i], s, n) == 0)
            return true;
    return false;
}

/* Scans a row's text: are all identifiers allowed; which x[j] and Y it reads. */
static bool scan_text(const char *s, ad_row *r, bool partials)
{
    bool ok = true;
    while (*s) {
        if (isalpha((unsigned char)*s) || *s == '_') {
            const char *b = s;
            while (isalnum((unsigned char)*s) || *s == '_')
                s++;
            size_t n = (size_t)(s - b);
            if (!allowed_ident(b, n))
                ok = false;
            if (partials && n == 1 && b[0] == 'x' && s[0] == '[' && isdigit((unsigned char)s[1])) {
                int j = s[1] - '0';
                if (j >= 0 && j < 4)
                    r->uses_x[j] = true;
            }
            if (partials && n == 1 && b[0] == 'Y')
                r->uses_y = true;
        } else if (isdigit((unsigned char)*s) || *s == '.') {
            /* a number, with exponent and suffix */
            while (isalnum((unsigned char)*s) || *s == '.' ||
                   ((*s == '+' || *s == '-') &&
                    (s[-1] == 'e' || s[-1] == 'E' || s[-1] == 'p' || s[-1] == 'P')))
                s++;
        } else {
            s++;
        }
    }
    return ok;
}

/* The inputs each partial reads: the row's partials text is a sequence of assignments
 * (`D[k] = ...`, `T s_ = ...`) whose right sides read x[j], Y (all inputs), earlier partials
 * and the row's locals. Anything else makes every partial read every input. */
static void partial_deps(ad_row *r, const char *src)
{
    unsigned all = (1u << r->nin) - 1;
    for (int k = 0; k < 4; k++)
        r->dep[k] = all;
    struct {
        char name[32];
        unsigned mask;
    } locals[8];
    int nlocals = 0;
    unsigned dep[4] = {0};
    const char *p = src;
    while (*p) {
        /* one statement: up to ';' at depth 0 */
        const char *b = p, *eq = NULL;
        int depth = 0;
        for (; *p && !(depth == 0 && *p == ';'); p++) {
            if (*p == '(')
                depth++;
            else if (*p == ')')
                depth--;
            else if (*p == '=' && depth == 0 && !eq && p[1] != '=' && p > b &&
                     !strchr("=!<>", p[-1]))
                eq = p;
        }
        const char *end = p;
        if (*p == ';')
            p++;
        if (!eq)
            return;
        /* the target: D[k] or a local */
        int target = -1;
        char lname[32] = "";
        const char *t = eq;
        while (t > b && isspace((unsigned char)t[-1]))
            t--;
        if (t - b >= 4 && t[-1] == ']' && t[-4] == 'D' && t[-3] == '[' &&
            isdigit((unsigned char)t[-2]))
            target = t[-2] - '0';
        else {
            const char *e = t;
            while (t > b && (isalnum((unsigned char)t[-1]) || t[-1] == '_'))
                t--;
            if (e - t <= 0 || e - t >= 31)
                return;
            memcpy(lname, t, (size_t)(e - t));
            lname[e - t] = 0;
        }
        if (target >= 4 || (target < 0 && nlocals == 8))
            return;
        /* what the right side reads */
        unsigned m = 0;
        for (const char *q = eq + 1; q < end;) {
            if (isalpha((unsigned char)*q) || *q == '_') {
                const char *w = q;
                while (q < end && (isalnum((unsigned char)*q) || *q == '_'))
                    q++;
                size_t n = (size_t)(q - w);
                if (n == 1 && *w == 'Y')
                    m |= all;
                else if (n == 1 && *w == 'x' && q[0] == '[' && isdigit((unsigned char)q[1]))
                    m |= 1u << (q[1] - '0');
                else if (n == 1 && *w == 'D' && q[0] == '[' && isdigit((unsigned char)q[1]) &&
                         q[1] - '0' < 4)
                    m |= dep[q[1] - '0'];
                else
                    for (int i = 0; i < nlocals; i++)
                        if (strlen(locals[i].name) == n && !strncmp(locals[i].name, w, n))
                            m |= locals[i].mask;
            } else if (isdigit((unsigned char)*q)) {
                while (q < end && (isalnum((unsigned char)*q) || *q == '.'))
                    q++;
            } else {
                q++;
            }
        }
        if (target >= 0) {
            dep[target] = m & all;
        } else {
            memcpy(locals[nlocals].name, lname, sizeof lname);
            locals[nlocals].mask = m;
            nlocals++;
        }
        while (*p && isspace((unsigned char)*p))
            p++;
    }
    for (int k = 0; k < 4; k++)
        r->dep[k] = dep[k];
}

static const ad_row *row_named(const char *regname)
{
    const cr_function *fn = cr_registry_find(cr_registry_builtin(), regname);
    if (!fn || !(fn->flags & CR_FN_SCALAR_ROW))
        return NULL;
    const cr_scalar_rule *rule = fn->udata;
    for (int i = 0; i < g_nrows; i++)
        if (g_rows[i].rule == rule)
            return &g_rows[i];
    if (g_nrows == MAX_ROWS || rule->nout != 1)
        return NULL;
    ad_row *r = &g_rows[g_nrows++];
    memset(r, 0, sizeof *r);
    r->name = rule->name;
    r->nin = rule->nin;
    r->nout = rule->nout;
    r->rule = rule;
    bool ok_primal = scan_text(rule->primal_src, r, false);
    bool ok_partials = scan_text(rule->partials_src, r, true);
    r->inline_ok = ok_primal && ok_partials;
    partial_deps(r, rule->partials_src);
    return r;
}

/* The registries of --rules (users' scalar rows). */
static const cr_registry *g_user[8];
static int g_nuser;

void ad_rows_add_registry(const void *reg)
{
    if (g_nuser < 8)
        g_user[g_nuser++] = reg;
}

/* A user's scalar row named `name`, or NULL; *why says why a rule found is not usable. */
static const ad_row *user_row(const char *name, const char **why)
{
    for (int i = 0; i < g_nuser; i++) {
        const cr_function *fn = cr_registry_find(g_user[i], name);
        if (!fn)
            continue;
        if (!(fn->flags & CR_FN_SCALAR_ROW)) {
            *why = "its rule is not a scalar row (only scalar rows can be used by generated code)";
            return NULL;
        }
        const cr_scalar_rule *rule = fn->udata;
        for (int k = 0; k < g_nrows; k++)
            if (g_rows[k].rule == rule)
                return &g_rows[k];
        if (g_nrows == MAX_ROWS || rule->nout != 1) {
            *why = "its row has more than one output";
            return NULL;
        }
        ad_row *r = &g_rows[g_nrows];
        memset(r, 0, sizeof *r);
        r->name = rule->name;
        r->nin = rule->nin;
        r->nout = rule->nout;
        r->rule = rule;
        r->inline_ok =
            scan_text(rule->primal_src, r, false) && scan_text(rule->partials_src, r, true);
        if (!r->inline_ok) {
            /* generated code cannot reach a user's instantiation: its text must be inlined */
            *why = "its row's text calls functions other than <math.h>'s";
            return NULL;
        }
        partial_deps(r, rule->partials_src);
        g_nrows++;
        return r;
    }
    return NULL;
}

const char *ad_rows_why_not(const char *name)
{
    const char *why = NULL;
    if (!user_row(name, &why) && why)
        return why;
    return NULL;
}

const ad_row *ad_row_for_call(const char *name, bool *is_float)
{
    *is_float = false;
    /* the generic names of the rows that C spells differently are not mapped: only C's
     * <math.h> names, and their float spellings */
    static const char *const k_c_names[] = {
        "sin",  "cos",  "tan",       "asin",     "acos",   "atan",   "atan2",   "sinh",
        "cosh", "tanh", "asinh",     "acosh",    "atanh",  "exp",    "exp2",    "expm1",
        "log",  "log2", "log10",     "log1p",    "sqrt",   "cbrt",   "pow",     "hypot",
        "fabs", "erf",  "erfc",      "tgamma",   "lgamma", "fmax",   "fmin",    "fdim",
        "fma",  "fmod", "remainder", "copysign", "ldexp",  "scalbn", "scalbln", NULL};
    for (int i = 0; k_c_names[i]; i++) {
        size_t n = strlen(k_c_names[i]);
        if (strcmp(name, k_c_names[i]) == 0)
            return row_named(name);
        if (strncmp(name, k_c_names[i], n) == 0 && name[n] == 'f' && name[n + 1] == 0) {
            *is_float = true;
            return row_named(k_c_names[i]);
        }
    }
    const char *why = NULL;
    return user_row(name, &why);
}

const ad_row *ad_row_for_op(const char *op)
{
    return row_named(op);
}

const char *ad_row_helper(const ad_row *r0, bool is_float)
{
    ad_row *r = (ad_row *)r0;
    if (is_float)
        r->emitted_f32 = true;
    else
        r->emitted_f64 = true;
    return ad_fmt("cr_ad_row_%s_%s", r->name, is_float ? "f32" : "f64");
}

/* The row's text with its own names (x, Y, D, T and its locals) prefixed, so that they
 * can neither shadow nor meet the input's names and macros. */
static void emit_text(ad_buf *out, const char *src)
{
    ad_buf_put(out, "    ");
    const char *s = src;
    while (*s) {
        if (isalpha((unsigned char)*s) || *s == '_') {
            const char *b = s;
            while (isalnum((unsigned char)*s) || *s == '_')
                s++;
            size_t n = (size_t)(s - b);
            bool own = (n == 1 && strchr("xYDT", *b)) || (n > 1 && b[n - 1] == '_');
            ad_buf_printf(out, "%s%.*s", own ? "cr_ad_" : "", (int)n, b);
        } else if (isdigit((unsigned char)*s) || *s == '.') {
            const char *b = s;
            while (isalnum((unsigned char)*s) || *s == '.' ||
                   ((*s == '+' || *s == '-') && strchr("eEpP", s[-1])))
                s++;
            ad_buf_printf(out, "%.*s", (int)(s - b), b);
        } else {
            char c[2] = {*s++, 0};
            ad_buf_put(out, c);
        }
    }
    ad_buf_put(out, ";\n");
}

void ad_rows_emit(ad_buf *out)
{
    for (int i = 0; i < g_nrows; i++) {
        const ad_row *r = &g_rows[i];
        const cr_scalar_rule *rule = r->rule;
        for (int fl = 0; fl < 2; fl++) {
            if (!(fl ? r->emitted_f32 : r->emitted_f64))
                continue;
            const char *T = fl ? "float" : "double";
            const char *sfx = fl ? "f32" : "f64";
            ad_buf_printf(out, "/* The rule row '%s' (%s):\n *   %s\n *   %s */\n", r->name,
                          r->inline_ok && !fl ? "its text, inline" : "the library's instantiation",
                          rule->primal_src, rule->partials_src);
            /* guarded, so that the output differentiated again (nested modes, whose input
             * already defines the rows it used) defines each row once */
            ad_buf_printf(out, "#ifndef CR_AD_ROW_%s_%s\n#define CR_AD_ROW_%s_%s 1\n", r->name, sfx,
                          r->name, sfx);
            ad_buf_printf(out,
                          "static inline void cr_ad_row_%s_%s(const %s *cr_ad_x, %s *cr_ad_Y, "
                          "%s *cr_ad_D)\n{\n",
                          r->name, sfx, T, T, T);
            if (r->inline_ok && !fl) {
                ad_buf_printf(out,
                              "    typedef %s cr_ad_T;\n    (void)sizeof(cr_ad_T);\n"
                              "    (void)cr_ad_x;\n",
                              T);
                emit_text(out, rule->primal_src);
                emit_text(out, rule->partials_src);
            } else {
                ad_buf_printf(
                    out,
                    "    ((const cr_scalar_rule *)cr_fn_%s.u.func.fn->udata)->%s(cr_ad_x, "
                    "cr_ad_Y, cr_ad_D);\n",
                    r->name, sfx);
            }
            ad_buf_put(out, "}\n#endif\n\n");
        }
    }
}
