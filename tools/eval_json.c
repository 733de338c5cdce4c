/*
 * chainrules-eval --json: a line protocol that lets any language script the rules. Each
 * input line is a JSON request naming a registered function, its arguments and optional
 * tangents and output cotangent; each output line gives the primal, the frule's
 * pushforward and the rrule's cotangents, or an error. The format is in docs/eval.md.
 *
 * Everything a request builds (arguments, tangents, rule outputs) lives in one arena,
 * reset after the line, so memory stays bounded by the largest request.
 */
#define _POSIX_C_SOURCE 200809L

#include "eval_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <chainrules.h>

#include "checked.h" /* the library's checked arithmetic (src/core/checked.h) */

/* Most arguments a request may pass (variadic functions such as cat take up to 8 arrays). */
#define MAX_ARGS 32

/* re + i im, keeping the signs of zeros. */
static cr_complex cplx(double re, double im)
{
    double parts[2] = {re, im};
    cr_complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}

/* ---- A growable output string ---------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom; /* an allocation failed: the contents are incomplete */
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t len)
{
    if (b->oom)
        return;
    size_t need;
    if (!cr__add_size(len, 1, &need)) {
        b->oom = true;
        return;
    }
    if (need > b->cap - b->n || b->p == NULL) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < need) {
            if (!cr__mul_size(cap, 2, &cap)) {
                b->oom = true;
                return;
            }
        }
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->oom = true; /* only used for numbers, which always fit */
        return;
    }
    sb_put(b, tmp, (size_t)n);
}

/* A number: %.17g (round-trip), the non-finite values as the strings "inf", "-inf", "nan". */
static void sb_num(sbuf *b, double v)
{
    if (isnan(v))
        sb_puts(b, "\"nan\"");
    else if (isinf(v))
        sb_puts(b, v > 0 ? "\"inf\"" : "\"-inf\"");
    else
        sb_printf(b, "%.17g", v);
}

static void sb_complex(sbuf *b, cr_complex z)
{
    sb_puts(b, "[");
    sb_num(b, creal(z));
    sb_puts(b, ",");
    sb_num(b, cimag(z));
    sb_puts(b, "]");
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 if it is not valid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned cp;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        len = 2;
        cp = s[0] & 0x1Fu;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        len = 3;
        cp = s[0] & 0x0Fu;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        len = 4;
        cp = s[0] & 0x07u;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    /* Overlong forms, surrogates and code points past U+10FFFF are not valid UTF-8. */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* A JSON string: quotes, backslashes and control characters escaped, invalid UTF-8
 * (a function name echoed from a request, say) replaced by U+FFFD. */
static void sb_str(sbuf *b, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    sb_puts(b, "\"");
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            sb_put(b, esc, 2);
            i++;
        } else if (c == '\n') {
            sb_puts(b, "\\n");
            i++;
        } else if (c == '\t') {
            sb_puts(b, "\\t");
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            sb_printf(b, "\\u%04x", (unsigned)c);
            i++;
        } else {
            size_t len = utf8_len(u + i, n - i);
            if (len == 0) {
                sb_puts(b, "\\ufffd");
                i++;
            } else {
                sb_put(b, s + i, len);
                i += len;
            }
        }
    }
    sb_puts(b, "\"");
}

/* ---- One request --------------------------------------------------------------------- */

typedef struct job {
    cr_ctx *ctx;
    cr_arena *arena;
    sbuf *out;      /* the response being built */
    char err[1024]; /* the error message, once failed */
    bool failed;
} job;

/* Record the request's error (the first one wins) and return false. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool
fail(job *j, const char *fmt, ...)
{
    if (!j->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->err, sizeof j->err, fmt, ap);
        va_end(ap);
        j->failed = true;
    }
    return false;
}

/* A library status: the context's message, which names the function, and the status;
 * prefixed with `what` unless the message starts with it already. */
static bool fail_lib(job *j, const char *what, cr_status st)
{
    const char *msg = cr_ctx_errmsg(j->ctx);
    size_t n = strlen(what);
    if (msg[0] == '\0')
        msg = cr_status_str(st);
    if (strncmp(msg, what, n) == 0 && msg[n] == ':')
        return fail(j, "%s (%s)", msg, cr_status_name(st));
    return fail(j, "%s: %s (%s)", what, msg, cr_status_name(st));
}

/* "det(array{f64})": the signature of a call, for "no rule" messages. */
static void call_signature(const cr_function *fn, const cr_value *args, size_t nargs, char *buf,
                           size_t size)
{
    cr_argspec specs[MAX_ARGS];
    for (size_t i = 0; i < nargs; i++)
        specs[i] = cr_argspec_of(&args[i]);
    cr_signature_str(fn->name, specs, nargs, false, buf, size);
}

/* ---- Reading numbers ------------------------------------------------------------------ */

/* A JSON number, or a string strtod reads whole ("inf", "-inf", "nan", "0x1p-3", ...). */
static bool get_number(const cJSON *n, double *out)
{
    if (cJSON_IsNumber(n)) {
        *out = n->valuedouble;
        return true;
    }
    if (cJSON_IsString(n) && n->valuestring[0] != '\0') {
        char *end;
        *out = strtod(n->valuestring, &end);
        return *end == '\0';
    }
    return false;
}

/* Whether n is a JSON number with an integral value of 2^53 or beyond, which a JSON number does
 * not carry exactly (9007199254740993 reads as ...992): such integers are written as
 * strings. */
static bool is_inexact_int(const cJSON *n)
{
    if (!cJSON_IsNumber(n))
        return false;
    double v = fabs(n->valuedouble);
    return v >= 9007199254740992.0 && v == trunc(v);
}

/* The message for an integer that get_int refused. */
static bool fail_int(job *j, const char *what, const cJSON *n)
{
    if (is_inexact_int(n))
        return fail(j,
                    "%s: an integer of 2^53 or more (read as %.17g) is not exact as a JSON "
                    "number: write it as a string, e.g. {\"int\": \"9007199254740993\"}",
                    what, n->valuedouble);
    if (cJSON_IsString(n) && n->valuestring[0] != '\0') {
        char *end;
        errno = 0;
        (void)strtoll(n->valuestring, &end, 10);
        if (*end == '\0' && errno == ERANGE)
            return fail(j, "%s: \"%.64s\" is outside the int64 range", what, n->valuestring);
    }
    return fail(j, "%s: not an integer", what);
}

/* An integer: a JSON number with an integral value below 2^53 in magnitude, or a
 * decimal string (for values beyond 2^53, which a JSON number cannot carry exactly). */
static bool get_int(const cJSON *n, int64_t *out)
{
    if (cJSON_IsString(n) && n->valuestring[0] != '\0') {
        char *end;
        errno = 0;
        long long v = strtoll(n->valuestring, &end, 10);
        if (*end != '\0' || errno != 0)
            return false;
        *out = (int64_t)v;
        return true;
    }
    if (!cJSON_IsNumber(n))
        return false;
    double v = n->valuedouble;
    if (!(v > -9007199254740992.0 && v < 9007199254740992.0) || v != trunc(v))
        return false;
    *out = (int64_t)v;
    return true;
}

/* An object {"re": number, "im": number} and nothing else. */
static bool is_reim(const cJSON *n)
{
    return cJSON_IsObject(n) && (cJSON_GetObjectItemCaseSensitive(n, "re") != NULL ||
                                 cJSON_GetObjectItemCaseSensitive(n, "im") != NULL);
}

/* A list of exactly two numbers: [re, im]. */
static bool is_pair(const cJSON *n)
{
    double v;
    return cJSON_IsArray(n) && cJSON_GetArraySize(n) == 2 && get_number(n->child, &v) &&
           get_number(n->child->next, &v);
}

static bool get_reim(job *j, const char *what, const cJSON *n, cr_complex *z)
{
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(n, "re");
    const cJSON *im = cJSON_GetObjectItemCaseSensitive(n, "im");
    double r = 0.0, i = 0.0;
    if (cJSON_GetArraySize(n) != 2 || !get_number(re, &r) || !get_number(im, &i))
        return fail(j, "%s: a complex number object is {\"re\": number, \"im\": number}", what);
    *z = cplx(r, i);
    return true;
}

/* A complex scalar: [re, im], {"re": .., "im": ..} or, when real_ok, a real number. */
static bool get_complex(job *j, const char *what, const cJSON *n, bool real_ok, cr_complex *z)
{
    double r = 0.0, i = 0.0;
    if (is_reim(n))
        return get_reim(j, what, n, z);
    if (is_pair(n)) {
        get_number(n->child, &r);
        get_number(n->child->next, &i);
        *z = cplx(r, i);
        return true;
    }
    if (real_ok && get_number(n, &r)) {
        *z = cplx(r, 0.0);
        return true;
    }
    return fail(j, "%s: a complex number is [re, im] or {\"re\": .., \"im\": ..}", what);
}

/* ---- Nested lists as arrays ----------------------------------------------------------- */

/* Whether n is an element rather than a level of nesting. With `pairs` (an explicit c128
 * dtype) a list of two numbers is one complex element. */
static bool is_leaf(const cJSON *n, bool pairs)
{
    return !cJSON_IsArray(n) || (pairs && is_pair(n));
}

static bool store_leaf(job *j, const char *what, const cJSON *n, bool pairs, cr_array *a, size_t k)
{
    switch ((cr_dtype)a->dtype) {
    case CR_DT_F64:
    case CR_DT_F32: {
        double v;
        if (!get_number(n, &v))
            return fail(j, "%s: element %zu is not a number", what, k);
        if (a->dtype == CR_DT_F64)
            ((double *)a->data)[k] = v;
        else
            ((float *)a->data)[k] = (float)v;
        return true;
    }
    case CR_DT_C128: {
        cr_complex z;
        /* With an explicit c128 dtype every element is written as a complex number, so
         * that [1, 2] can only mean 1 + 2i, never a vector. */
        if (pairs && !is_pair(n) && !is_reim(n))
            return fail(j,
                        "%s: element %zu: the elements of a c128 array are [re, im] or "
                        "{\"re\": .., \"im\": ..}",
                        what, k);
        if (!get_complex(j, what, n, true, &z))
            return false;
        ((cr_complex *)a->data)[k] = z;
        return true;
    }
    case CR_DT_I64: {
        int64_t v;
        if (!get_int(n, &v)) {
            char w[96];
            snprintf(w, sizeof w, "%s: element %zu", what, k);
            return fail_int(j, w, n);
        }
        ((int64_t *)a->data)[k] = v;
        return true;
    }
    case CR_DT_BOOL:
        if (!cJSON_IsBool(n))
            return fail(j, "%s: element %zu is not true or false", what, k);
        ((bool *)a->data)[k] = cJSON_IsTrue(n) != 0;
        return true;
    }
    return fail(j, "%s: unsupported element type", what);
}

static bool fill(job *j, const char *what, const cJSON *n, size_t depth, bool pairs, cr_array *a,
                 size_t *k)
{
    if (depth == a->ndim) {
        if (!is_leaf(n, pairs))
            return fail(j, "%s: ragged nested list (a list where a number belongs, at depth %zu)",
                        what, depth);
        return store_leaf(j, what, n, pairs, a, (*k)++);
    }
    if (is_leaf(n, pairs) || (size_t)cJSON_GetArraySize(n) != a->shape[depth])
        return fail(j,
                    "%s: ragged nested list (depth %zu should be a list of %zu elements, like "
                    "the first)",
                    what, depth, a->shape[depth]);
    for (const cJSON *c = n->child; c != NULL; c = c->next)
        if (!fill(j, what, c, depth + 1, pairs, a, k))
            return false;
    return true;
}

/* A row-major array of dtype from a nested list (its shape from the first elements). */
static bool make_array(job *j, const char *what, const cJSON *n, cr_dtype dtype, bool pairs,
                       cr_array **out)
{
    size_t shape[CR_ARRAY_MAX_DIMS], ndim = 0;
    const cJSON *c = n;
    while (!is_leaf(c, pairs)) {
        if (ndim == CR_ARRAY_MAX_DIMS)
            return fail(j, "%s: more than %d levels of nesting", what, CR_ARRAY_MAX_DIMS);
        size_t len = (size_t)cJSON_GetArraySize(c);
        shape[ndim++] = len;
        if (len == 0)
            break;
        c = c->child;
    }
    cr_array *a;
    cr_status st = cr_array_new(j->arena, dtype, ndim, shape, &a);
    if (st != CR_OK)
        return fail_lib(j, what, st);
    size_t k = 0;
    if (!fill(j, what, n, 0, pairs, a, &k))
        return false;
    a->flags = 0; /* an input: no rule may accumulate into it */
    *out = a;
    return true;
}

/* The element type of an untyped nested list: c128 if an element is {"re", "im"}, bool if
 * the elements are true/false, f64 otherwise. */
static void scan_leaves(const cJSON *n, bool *has_complex, bool *has_bool)
{
    if (!cJSON_IsArray(n)) {
        *has_complex = *has_complex || is_reim(n);
        *has_bool = *has_bool || cJSON_IsBool(n);
        return;
    }
    for (const cJSON *c = n->child; c != NULL; c = c->next)
        scan_leaves(c, has_complex, has_bool);
}

/* ---- Arguments ------------------------------------------------------------------------ */

static bool dtype_of_name(const char *s, cr_dtype *out)
{
    static const struct {
        const char *name;
        cr_dtype dtype;
    } names[] = {{"f64", CR_DT_F64},
                 {"f32", CR_DT_F32},
                 {"c128", CR_DT_C128},
                 {"i64", CR_DT_I64},
                 {"bool", CR_DT_BOOL}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].dtype;
            return true;
        }
    }
    return false;
}

/* An argument without a dtype: its JSON form says what it is. */
static bool parse_untyped(job *j, const char *what, const cJSON *n, cr_value *out)
{
    double v;
    if (get_number(n, &v)) {
        *out = cr_value_f64(v);
        return true;
    }
    if (cJSON_IsBool(n)) {
        *out = cr_value_bool(cJSON_IsTrue(n) != 0);
        return true;
    }
    if (is_reim(n)) {
        cr_complex z;
        if (!get_reim(j, what, n, &z))
            return false;
        *out = cr_value_c128(z);
        return true;
    }
    if (cJSON_IsObject(n)) {
        const cJSON *i = cJSON_GetObjectItemCaseSensitive(n, "int");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(n, "fn");
        if (i != NULL && cJSON_GetArraySize(n) == 1) {
            if (cJSON_IsArray(i)) {
                cr_array *a;
                if (!make_array(j, what, i, CR_DT_I64, false, &a))
                    return false;
                *out = cr_value_array(a);
                return true;
            }
            int64_t k;
            if (!get_int(i, &k) && (is_inexact_int(i) || cJSON_IsString(i)))
                return fail_int(j, what, i);
            if (!get_int(i, &k))
                return fail(j, "%s: {\"int\": ..} takes an integer or a nested list of them", what);
            *out = cr_value_i64(k);
            return true;
        }
        if (f != NULL && cJSON_GetArraySize(n) == 1) {
            const cr_function *fn =
                cJSON_IsString(f) ? cr_registry_find(cr_registry_builtin(), f->valuestring) : NULL;
            if (fn == NULL)
                return fail(j, "%s: {\"fn\": name} names no registered function", what);
            *out = cr_value_function(fn, NULL);
            return true;
        }
        return fail(j,
                    "%s: an object argument is {\"re\": .., \"im\": ..}, {\"int\": ..} or "
                    "{\"fn\": name}",
                    what);
    }
    if (cJSON_IsArray(n)) {
        bool has_complex = false, has_bool = false;
        scan_leaves(n, &has_complex, &has_bool);
        cr_dtype dt = has_complex ? CR_DT_C128 : has_bool ? CR_DT_BOOL : CR_DT_F64;
        cr_array *a;
        if (!make_array(j, what, n, dt, false, &a))
            return false;
        *out = cr_value_array(a);
        return true;
    }
    if (cJSON_IsString(n))
        return fail(j,
                    "%s: the string \"%.64s\" is not a number (numbers are JSON numbers or "
                    "strings such as \"inf\", \"-inf\", \"nan\", \"0x1p-3\")",
                    what, n->valuestring);
    return fail(j, "%s: not a number, list or argument object", what);
}

/* An argument with an explicit dtype: a scalar or a nested list of that element type. */
static bool parse_typed(job *j, const char *what, const cJSON *n, cr_dtype dt, cr_value *out)
{
    bool pairs = dt == CR_DT_C128;
    if (cJSON_IsArray(n) && !(pairs && is_pair(n))) {
        cr_array *a;
        if (!make_array(j, what, n, dt, pairs, &a))
            return false;
        *out = cr_value_array(a);
        return true;
    }
    double v;
    switch (dt) {
    case CR_DT_F64:
    case CR_DT_F32:
        if (!get_number(n, &v))
            return fail(j, "%s: not a number", what);
        *out = dt == CR_DT_F64 ? cr_value_f64(v) : cr_value_f32((float)v);
        return true;
    case CR_DT_C128: {
        cr_complex z;
        if (!get_complex(j, what, n, true, &z))
            return false;
        *out = cr_value_c128(z);
        return true;
    }
    case CR_DT_I64: {
        int64_t k;
        if (!get_int(n, &k))
            return fail_int(j, what, n);
        *out = cr_value_i64(k);
        return true;
    }
    case CR_DT_BOOL:
        if (!cJSON_IsBool(n))
            return fail(j, "%s: not true or false", what);
        *out = cr_value_bool(cJSON_IsTrue(n) != 0);
        return true;
    }
    return fail(j, "%s: unsupported dtype", what);
}

/* ---- Tangents and cotangents ---------------------------------------------------------- */

/* Whether a primal has a tangent space (integers, bools and functions do not). */
static bool differentiable(const cr_value *p)
{
    switch (p->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32:
    case CR_KIND_C128:
        return true;
    case CR_KIND_ARRAY:
        return cr_dtype_is_float((cr_dtype)p->u.arr->dtype);
    case CR_KIND_STRUCT:
        for (size_t i = 0; i < p->u.obj.type->nfields; i++) {
            cr_value fv;
            if (cr_type_field_value(p->u.obj.type, p->u.obj.ptr, i, &fv) == CR_OK &&
                differentiable(&fv))
                return true;
        }
        return false;
    default:
        return false;
    }
}

/* A (co)tangent for primal p, written like p (nested lists of p's shape, complex numbers as
 * [re, im] or {"re", "im"}, a list per tuple); null or absent is a zero, NoTangent for a
 * primal without a tangent space. */
static bool parse_tangent(job *j, const char *what, const cJSON *n, const cr_value *p,
                          cr_tangent *out)
{
    if (n == NULL || cJSON_IsNull(n)) {
        *out = differentiable(p) ? cr_tangent_zero() : cr_tangent_none();
        return true;
    }
    double v;
    switch (p->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32:
        if (!get_number(n, &v))
            return fail(j, "%s: a number is expected (the primal is %s)", what,
                        cr_kind_name(p->kind));
        *out = p->kind == CR_KIND_F64 ? cr_tangent_f64(v) : cr_tangent_f32((float)v);
        return true;
    case CR_KIND_C128: {
        cr_complex z;
        if (!get_complex(j, what, n, true, &z))
            return false;
        *out = cr_tangent_c128(z);
        return true;
    }
    case CR_KIND_ARRAY: {
        const cr_array *pa = p->u.arr;
        if (!cr_dtype_is_float((cr_dtype)pa->dtype))
            break;
        if (!cJSON_IsArray(n))
            return fail(j, "%s: a nested list of the primal's shape is expected", what);
        cr_array *a;
        if (!make_array(j, what, n, (cr_dtype)pa->dtype, pa->dtype == CR_DT_C128, &a))
            return false;
        bool same = a->ndim == pa->ndim;
        for (size_t d = 0; same && d < a->ndim; d++)
            same = a->shape[d] == pa->shape[d];
        if (!same) {
            char shape[128];
            size_t len = 0;
            shape[0] = '\0';
            for (size_t d = 0; d < pa->ndim && len < sizeof shape; d++)
                len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%zu", d ? "," : "",
                                        pa->shape[d]);
            return fail(j, "%s: the primal has shape [%s]; the nested list has another", what,
                        shape);
        }
        *out = cr_tangent_array(a);
        return true;
    }
    case CR_KIND_STRUCT: {
        const cr_type *type = p->u.obj.type;
        if (!cJSON_IsArray(n) || (size_t)cJSON_GetArraySize(n) != type->nfields)
            return fail(j, "%s: a list of %zu elements (one per tuple element) is expected", what,
                        type->nfields);
        cr_tangent *fields = cr_arena_calloc(j->arena, type->nfields, sizeof *fields, 0);
        if (fields == NULL)
            return fail_lib(j, what, cr_ctx_errcode(j->ctx));
        const cJSON *c = n->child;
        for (size_t i = 0; i < type->nfields; i++, c = c->next) {
            cr_value fv;
            char sub[96];
            snprintf(sub, sizeof sub, "%s element %zu", what, i + 1);
            cr_status st = cr_type_field_value(type, p->u.obj.ptr, i, &fv);
            if (st != CR_OK)
                return fail_lib(j, sub, st);
            if (!parse_tangent(j, sub, c, &fv, &fields[i]))
                return false;
            if (fields[i].tag == CR_TAN_NONE)
                fields[i] = cr_tangent_zero();
        }
        cr_status st = cr_tangent_struct(j->arena, type, NULL, fields, type->nfields, out);
        return st == CR_OK || fail_lib(j, what, st);
    }
    default:
        break;
    }
    return fail(j, "%s: the primal (%s) has no tangent space: give null", what,
                cr_kind_name(p->kind));
}

/* ---- Writing values and tangents ------------------------------------------------------ */

static void put_element(sbuf *b, const cr_array *a, size_t k)
{
    if (a->dtype == CR_DT_I64 || a->dtype == CR_DT_BOOL) {
        ptrdiff_t off = 0;
        size_t r = k;
        for (size_t d = a->ndim; d-- > 0;) {
            off += (ptrdiff_t)(r % a->shape[d]) * a->strides[d];
            r /= a->shape[d];
        }
        if (a->dtype == CR_DT_I64)
            sb_printf(b, "%lld", (long long)((const int64_t *)a->data)[off]);
        else
            sb_puts(b, ((const bool *)a->data)[off] ? "true" : "false");
        return;
    }
    /* The logical element: zeros off a Diagonal, mirrored Symmetric, ... */
    cr_complex z = cr_array_get_linear(a, k);
    if (a->dtype == CR_DT_C128)
        sb_complex(b, z);
    else
        sb_num(b, creal(z));
}

/* Nested lists, row-major; zeros_only writes zeros of the array's shape and dtype. */
static void put_array_rec(sbuf *b, const cr_array *a, size_t depth, size_t *k, bool zeros_only)
{
    if (depth == a->ndim) {
        if (!zeros_only)
            put_element(b, a, *k);
        else
            sb_puts(b, a->dtype == CR_DT_C128 ? "[0,0]" : "0");
        (*k)++;
        return;
    }
    sb_puts(b, "[");
    for (size_t i = 0; i < a->shape[depth]; i++) {
        if (i)
            sb_puts(b, ",");
        put_array_rec(b, a, depth + 1, k, zeros_only);
    }
    sb_puts(b, "]");
}

static void put_array(sbuf *b, const cr_array *a, bool zeros_only)
{
    size_t n;
    if (!cr__shape_numel(a->ndim, a->shape, 0, &n)) { /* never from the library */
        b->oom = true;
        return;
    }
    size_t k = 0;
    put_array_rec(b, a, 0, &k, zeros_only);
}

/* A tuple (struct) value as a JSON list, each field written by put. */
static bool put_fields(job *j, const cr_value *v, bool (*put)(job *, const cr_value *),
                       const char *what)
{
    sbuf *b = j->out;
    sb_puts(b, "[");
    for (size_t i = 0; i < v->u.obj.type->nfields; i++) {
        cr_value fv;
        cr_status st = cr_type_field_value(v->u.obj.type, v->u.obj.ptr, i, &fv);
        if (st != CR_OK)
            return fail_lib(j, what, st);
        if (i)
            sb_puts(b, ",");
        if (!put(j, &fv))
            return false;
    }
    sb_puts(b, "]");
    return true;
}

static bool put_value(job *j, const cr_value *v)
{
    sbuf *b = j->out;
    switch (v->kind) {
    case CR_KIND_F64:
        sb_num(b, v->u.f64);
        return true;
    case CR_KIND_F32:
        sb_num(b, (double)v->u.f32);
        return true;
    case CR_KIND_C128:
        sb_complex(b, v->u.c128);
        return true;
    case CR_KIND_I64:
    case CR_KIND_I32:
        sb_printf(b, "%lld", (long long)v->u.i64);
        return true;
    case CR_KIND_BOOL:
        sb_puts(b, v->u.b ? "true" : "false");
        return true;
    case CR_KIND_ARRAY:
        put_array(b, v->u.arr, false);
        return true;
    case CR_KIND_STRUCT:
        return put_fields(j, v, put_value, "primal");
    case CR_KIND_FUNC:
        sb_str(b, v->u.func.fn->name);
        return true;
    case CR_KIND_NOTHING:
        sb_puts(b, "null");
        return true;
    }
    return fail(j, "primal: a value of unknown kind");
}

/* "f64", "c128[2,2]", "f64[3,3] diagonal", a list for a tuple. */
static bool put_type(job *j, const cr_value *v)
{
    sbuf *b = j->out;
    if (v->kind == CR_KIND_ARRAY) {
        const cr_array *a = v->u.arr;
        sb_puts(b, "\"");
        sb_puts(b, cr_dtype_name((cr_dtype)a->dtype));
        sb_puts(b, "[");
        for (size_t d = 0; d < a->ndim; d++)
            sb_printf(b, "%s%zu", d ? "," : "", a->shape[d]);
        sb_puts(b, "]");
        if (a->structure != CR_MAT_DENSE) {
            sb_puts(b, " ");
            sb_puts(b, cr_matstruct_name((cr_matstruct)a->structure));
        }
        sb_puts(b, "\"");
        return true;
    }
    if (v->kind == CR_KIND_STRUCT) {
        sb_puts(b, "[");
        for (size_t i = 0; i < v->u.obj.type->nfields; i++) {
            cr_value fv;
            cr_status st = cr_type_field_value(v->u.obj.type, v->u.obj.ptr, i, &fv);
            if (st != CR_OK)
                return fail_lib(j, "primal", st);
            if (i)
                sb_puts(b, ",");
            if (!put_type(j, &fv))
                return false;
        }
        sb_puts(b, "]");
        return true;
    }
    sb_str(b, v->kind == CR_KIND_FUNC ? "function" : cr_kind_name(v->kind));
    return true;
}

/* Zeros of a primal's shape (null where there is no tangent space). */
static bool put_zero_of(job *j, const cr_value *p)
{
    sbuf *b = j->out;
    if (!differentiable(p)) {
        sb_puts(b, "null");
        return true;
    }
    switch (p->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32:
        sb_puts(b, "0");
        return true;
    case CR_KIND_C128:
        sb_puts(b, "[0,0]");
        return true;
    case CR_KIND_ARRAY:
        put_array(b, p->u.arr, true);
        return true;
    case CR_KIND_STRUCT:
        return put_fields(j, p, put_zero_of, "zero tangent");
    default:
        sb_puts(b, "null");
        return true;
    }
}

/* A tangent of primal p: thunks evaluated, zeros written as zeros of p's shape, NoTangent
 * (and anything for a primal without a tangent space) as null. */
static bool put_tangent(job *j, const char *what, cr_tangent t, const cr_value *p)
{
    sbuf *b = j->out;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return fail_lib(j, what, st);
    if (!differentiable(p) || t.tag == CR_TAN_NONE) {
        sb_puts(b, "null");
        return true;
    }
    switch ((cr_tag)t.tag) {
    case CR_TAN_ZERO:
    case CR_TAN_ABSENT:
        return put_zero_of(j, p);
    case CR_TAN_F64:
        sb_num(b, t.u.f64);
        return true;
    case CR_TAN_F32:
        sb_num(b, (double)t.u.f32);
        return true;
    case CR_TAN_C128:
        sb_complex(b, t.u.c128);
        return true;
    case CR_TAN_ARRAY:
        put_array(b, t.u.arr, false);
        return true;
    case CR_TAN_STRUCT: {
        const cr_type *type = t.u.s.type;
        if (p->kind != CR_KIND_STRUCT || p->u.obj.type != type)
            return fail(j, "%s: a structural tangent of %s for a %s primal", what, type->name,
                        cr_kind_name(p->kind));
        sb_puts(b, "[");
        for (size_t i = 0; i < type->nfields; i++) {
            cr_value fv;
            st = cr_type_field_value(type, p->u.obj.ptr, i, &fv);
            if (st != CR_OK)
                return fail_lib(j, what, st);
            if (i)
                sb_puts(b, ",");
            if (!put_tangent(j, what, cr_tangent_field(t, i), &fv))
                return false;
        }
        sb_puts(b, "]");
        return true;
    }
    case CR_TAN_NOTIMPL:
        return fail(j, "%s is NotImplemented: %s (%s:%d)", what, t.u.ni->msg, t.u.ni->file,
                    t.u.ni->line);
    case CR_TAN_NONE:
    case CR_TAN_THUNK:
        break;
    }
    return fail(j, "%s: a tangent of unexpected kind %s", what, cr_tag_name((cr_tag)t.tag));
}

/* ---- The request ---------------------------------------------------------------------- */

/* The function called `name` whose rules accept these arguments: names are not unique
 * (`inv` is the scalar and the matrix inverse), so every function of that name is tried in
 * registry order; the first one of that name when none has a matching rule. */
static const cr_function *resolve(const char *name, const cr_value *args, size_t nargs)
{
    const cr_registry *reg = cr_registry_builtin();
    const cr_function *first = NULL, *tried = NULL;
    size_t n = cr_registry_size(reg);
    for (size_t i = 0; i < n; i++) {
        cr_rule_info info;
        if (cr_registry_get(reg, i, &info) != CR_OK || info.fn == tried ||
            strcmp(info.fn->name, name) != 0)
            continue;
        tried = info.fn;
        if (first == NULL)
            first = info.fn;
        cr_value f = cr_value_function(info.fn, NULL);
        cr_rule_match m;
        if (cr_registry_lookup(reg, NULL, CR_MODE_RRULE, &f, args, nargs, &m) == CR_OK ||
            cr_registry_lookup(reg, NULL, CR_MODE_FRULE, &f, args, nargs, &m) == CR_OK)
            return info.fn;
    }
    return first != NULL ? first : cr_registry_find(reg, name);
}

static bool check_keys(job *j, const cJSON *req)
{
    static const char *const known[] = {"fn", "args", "dtypes", "tangents", "cotangent", "id"};
    for (const cJSON *c = req->child; c != NULL; c = c->next) {
        for (const cJSON *p = req->child; p != c; p = p->next)
            if (strcmp(p->string, c->string) == 0)
                return fail(j, "duplicate key \"%s\" (each key appears once in a request)",
                            c->string);
        bool ok = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            ok = ok || strcmp(c->string, known[i]) == 0;
        if (!ok)
            return fail(j,
                        "unknown key \"%s\" (a request has fn, args and optionally dtypes, "
                        "tangents, cotangent, id)",
                        c->string);
    }
    return true;
}

/* A list of n elements (or null/absent: NULL). */
static bool optional_list(job *j, const cJSON *req, const char *key, size_t n, const cJSON **out)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(req, key);
    *out = NULL;
    if (l == NULL || cJSON_IsNull(l))
        return true;
    if (!cJSON_IsArray(l) || (size_t)cJSON_GetArraySize(l) != n)
        return fail(j, "\"%s\" must be a list with one entry per argument (%zu)", key, n);
    *out = l->child;
    return true;
}

static bool run_request(job *j, const cJSON *req)
{
    sbuf *b = j->out;
    if (!check_keys(j, req))
        return false;
    const cJSON *fname = cJSON_GetObjectItemCaseSensitive(req, "fn");
    const cJSON *jargs = cJSON_GetObjectItemCaseSensitive(req, "args");
    if (!cJSON_IsString(fname))
        return fail(j, "\"fn\" must be a function name (a string)");
    if (!cJSON_IsArray(jargs))
        return fail(j, "\"args\" must be a list of arguments");
    size_t nargs = (size_t)cJSON_GetArraySize(jargs);
    if (nargs > MAX_ARGS)
        return fail(j, "at most %d arguments", MAX_ARGS);
    if (cr_registry_find(cr_registry_builtin(), fname->valuestring) == NULL)
        return fail(j, "unknown function '%s'", fname->valuestring);

    /* Arguments. */
    const cJSON *dt = NULL, *jt = NULL;
    if (!optional_list(j, req, "dtypes", nargs, &dt) ||
        !optional_list(j, req, "tangents", nargs, &jt))
        return false;
    const cJSON *tangents = cJSON_GetObjectItemCaseSensitive(req, "tangents");
    bool want_jvp = tangents != NULL && !cJSON_IsNull(tangents);
    const cJSON *jcot = cJSON_GetObjectItemCaseSensitive(req, "cotangent");
    bool want_vjp = jcot != NULL;

    cr_value args[MAX_ARGS];
    const cJSON *a = jargs->child;
    for (size_t i = 0; i < nargs; i++, a = a->next) {
        char what[48];
        snprintf(what, sizeof what, "argument %zu", i + 1);
        const cJSON *d = dt;
        if (dt != NULL)
            dt = dt->next;
        if (d != NULL && !cJSON_IsNull(d)) {
            cr_dtype dtype;
            if (!cJSON_IsString(d) || !dtype_of_name(d->valuestring, &dtype))
                return fail(j,
                            "dtype of %s: one of \"f64\", \"f32\", \"c128\", \"i64\", "
                            "\"bool\" or null",
                            what);
            if (!parse_typed(j, what, a, dtype, &args[i]))
                return false;
        } else if (!parse_untyped(j, what, a, &args[i])) {
            return false;
        }
    }

    const cr_function *fn = resolve(fname->valuestring, args, nargs);
    if (fn->arity >= 0 && (size_t)fn->arity != nargs)
        return fail(j, "%s takes %d argument%s, %zu given", fn->name, fn->arity,
                    fn->arity == 1 ? "" : "s", nargs);
    cr_value f = cr_value_function(fn, NULL), y;
    char sig[256], frule_of[96], rrule_of[96], pullback_of[96];
    call_signature(fn, args, nargs, sig, sizeof sig);
    snprintf(frule_of, sizeof frule_of, "frule of %s", fn->name);
    snprintf(rrule_of, sizeof rrule_of, "rrule of %s", fn->name);
    snprintf(pullback_of, sizeof pullback_of, "pullback of %s", fn->name);

    /* The primal; for a function with rules only, the rrule's. */
    cr_status st;
    cr_pullback pb;
    bool have_pb = false;
    if (fn->primal != NULL) {
        st = cr_function_call(j->arena, &f, args, nargs, &y);
        if (st != CR_OK)
            return fail_lib(j, fn->name, st);
    } else {
        st = cr_rrule(NULL, j->arena, &f, args, nargs, &y, &pb);
        if (st == CR_NOTHING)
            return fail(j, "%s has no primal implementation and no rrule", sig);
        if (st != CR_OK)
            return fail_lib(j, rrule_of, st);
        have_pb = true;
    }

    /* frule: the pushforward of the given tangents. */
    cr_tangent dy = cr_tangent_zero();
    if (want_jvp) {
        cr_tangent dargs[MAX_ARGS + 1];
        dargs[0] = cr_tangent_none();
        for (size_t i = 0; i < nargs; i++, jt = jt->next) {
            char what[48];
            snprintf(what, sizeof what, "tangent %zu", i + 1);
            if (!parse_tangent(j, what, jt, &args[i], &dargs[i + 1]))
                return false;
        }
        cr_value yf;
        st = cr_frule(NULL, j->arena, dargs, &f, args, nargs, &yf, &dy);
        if (st == CR_NOTHING)
            return fail(j, "no frule for %s", sig);
        if (st != CR_OK)
            return fail_lib(j, frule_of, st);
    }

    /* rrule: the pullback of the given cotangent. */
    cr_tangent dx[MAX_ARGS + 1];
    if (want_vjp) {
        if (!have_pb) {
            cr_value yr;
            st = cr_rrule(NULL, j->arena, &f, args, nargs, &yr, &pb);
            if (st == CR_NOTHING)
                return fail(j, "no rrule for %s", sig);
            if (st != CR_OK)
                return fail_lib(j, rrule_of, st);
        }
        cr_tangent seed;
        if (!parse_tangent(j, "cotangent", jcot, &y, &seed))
            return false;
        st = cr_pullback_call(j->arena, &pb, &seed, dx, nargs + 1);
        if (st != CR_OK)
            return fail_lib(j, pullback_of, st);
    }

    /* The response; "id" is written by the caller. */
    sb_puts(b, "\"primal\":");
    if (!put_value(j, &y))
        return false;
    sb_puts(b, ",\"type\":");
    if (!put_type(j, &y))
        return false;
    if (want_jvp) {
        sb_puts(b, ",\"jvp\":");
        if (!put_tangent(j, "jvp", dy, &y))
            return false;
    }
    if (want_vjp) {
        sb_puts(b, ",\"vjp\":[");
        for (size_t i = 0; i < nargs; i++) {
            char what[48];
            snprintf(what, sizeof what, "vjp of argument %zu", i + 1);
            if (i)
                sb_puts(b, ",");
            if (!put_tangent(j, what, dx[i + 1], &args[i]))
                return false;
        }
        sb_puts(b, "]");
    }
    return true;
}

/* Write `{"id": ..,` (when the request has an id) and the rest of one response line. */
static void put_id(sbuf *b, const cJSON *req)
{
    const cJSON *id = cJSON_IsObject(req) ? cJSON_GetObjectItemCaseSensitive(req, "id") : NULL;
    sb_puts(b, "{");
    if (id == NULL)
        return;
    char *s = cJSON_PrintUnformatted(id);
    if (s == NULL) {
        b->oom = true;
        return;
    }
    sb_puts(b, "\"id\":");
    sb_puts(b, s);
    sb_puts(b, ",");
    cJSON_free(s);
}

/* Answer one line (len bytes, NUL-terminated) into b. */
static void answer(cr_ctx *ctx, cr_arena *arena, sbuf *b, const char *line, size_t len)
{
    job j = {.ctx = ctx, .arena = arena, .out = b};
    const char *end = NULL;
    /* The length includes the terminating NUL, which is what tells cJSON that the value
     * must end the line (trailing text is an error). */
    cJSON *req = cJSON_ParseWithLengthOpts(line, len + 1, &end, 1);
    b->n = 0;
    b->oom = false;
    put_id(b, req);
    if (req == NULL) {
        size_t col = end != NULL && end >= line ? (size_t)(end - line) + 1 : 1;
        fail(&j, "unparsable request: invalid JSON at column %zu", col);
    } else if (!cJSON_IsObject(req)) {
        fail(&j, "a request is a JSON object: {\"fn\": .., \"args\": [..], ..}");
    } else {
        run_request(&j, req);
    }
    if (b->oom && !j.failed)
        fail(&j, "out of memory writing the response");
    if (j.failed) {
        b->n = 0;
        b->oom = false;
        put_id(b, req);
        sb_puts(b, "\"error\":");
        sb_str(b, j.err);
    }
    sb_puts(b, "}\n");
    cJSON_Delete(req);
}

int cr_eval_json_main(FILE *in, FILE *out)
{
    cr_ctx *ctx = NULL;
    cr_arena *arena = NULL;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_arena_new(ctx, NULL, &arena) != CR_OK) {
        fputs("chainrules-eval: out of memory\n", stderr);
        cr_ctx_free(ctx);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    sbuf b = {0};
    int rc = 0;
    for (;;) {
        errno = 0;
        ssize_t got = getline(&line, &cap, in);
        if (got < 0) {
            if (!feof(in) || ferror(in)) {
                fprintf(stderr, "chainrules-eval: reading standard input failed: %s\n",
                        strerror(errno != 0 ? errno : EIO));
                rc = 1;
            }
            break;
        }
        size_t len = (size_t)got;
        bool nul = strlen(line) != len; /* cJSON would stop at an embedded NUL */
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t'))
            k++;
        if (k == len)
            continue; /* blank lines get no response */
        if (nul)
            line[0] = '\0'; /* answered as unparsable */
        answer(ctx, arena, &b, line, nul ? 0 : len);
        if (b.oom) {
            static const char msg[] = "{\"error\":\"out of memory writing the response\"}\n";
            fputs(msg, out);
        } else {
            fwrite(b.p, 1, b.n, out);
        }
        cr_arena_reset(arena);
        cr_ctx_clear_error(ctx);
        if (fflush(out) != 0 || ferror(out)) {
            fprintf(stderr, "chainrules-eval: writing standard output failed: %s\n",
                    strerror(errno != 0 ? errno : EIO));
            rc = 1;
            break;
        }
    }
    free(line);
    free(b.p);
    cr_arena_free(arena);
    cr_ctx_free(ctx);
    return rc;
}
