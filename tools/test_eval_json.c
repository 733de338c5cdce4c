/*
 * Tests of `chainrules-eval --json` (tools/eval_json.c): requests are written to a file and
 * piped through the tool (its path is argv[1]); the responses are parsed with cJSON. The
 * jvp and vjp the tool prints are checked against central differences of the primal that
 * the same tool prints at perturbed arguments, so no derivative is written here.
 *
 *   test_eval_json <chainrules-eval> <tools/tests/eval_requests.jsonl>
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cJSON.h>
#include <cmocka.h>

static const char *g_tool;
static const char *g_requests;

/* ---- Running the tool ------------------------------------------------------------------ */

typedef struct responses {
    cJSON **r;
    size_t n;
} responses;

static void responses_free(responses *rs)
{
    for (size_t i = 0; i < rs->n; i++)
        cJSON_Delete(rs->r[i]);
    free(rs->r);
    rs->r = NULL;
    rs->n = 0;
}

/* Run `tool --json < file` and parse every output line; the exit status must be 0. */
static responses run_file(const char *path)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --json < '%s'", g_tool, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    responses rs = {NULL, 0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, p)) > 0) {
        assert_true(line[len - 1] == '\n'); /* every response is one whole line */
        cJSON *r = cJSON_Parse(line);
        if (r == NULL)
            print_error("not JSON: %s", line);
        assert_non_null(r);
        assert_true(cJSON_IsObject(r));
        cJSON **grown = realloc(rs.r, (rs.n + 1) * sizeof *grown);
        assert_non_null(grown);
        rs.r = grown;
        rs.r[rs.n++] = r;
    }
    free(line);
    assert_int_equal(pclose(p), 0);
    return rs;
}

/* Write the lines to a request file in the working directory and run the tool on it. */
static responses run_lines(const char *const *lines, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "eval_json_requests_%ld.jsonl", (long)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) {
        fputs(lines[i], f);
        fputc('\n', f);
    }
    assert_int_equal(fclose(f), 0);
    responses rs = run_file(path);
    remove(path);
    return rs;
}

static const cJSON *key(const cJSON *r, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(r, k);
}

/* The error message of a response, or NULL. */
static const char *error_of(const cJSON *r)
{
    const cJSON *e = key(r, "error");
    return cJSON_IsString(e) ? e->valuestring : NULL;
}

static void expect_ok(const cJSON *r)
{
    const char *e = error_of(r);
    if (e != NULL)
        print_error("unexpected error: %s\n", e);
    assert_null(e);
    assert_non_null(key(r, "primal"));
}

static void expect_error(const cJSON *r, const char *part)
{
    const char *e = error_of(r);
    assert_non_null(e);
    if (strstr(e, part) == NULL)
        print_error("error '%s' does not mention '%s'\n", e, part);
    assert_non_null(strstr(e, part));
    assert_null(key(r, "primal"));
}

/* A number as the tool writes it: a JSON number or "inf", "-inf", "nan". */
static double num(const cJSON *v)
{
    if (cJSON_IsString(v)) {
        if (strcmp(v->valuestring, "inf") == 0)
            return INFINITY;
        if (strcmp(v->valuestring, "-inf") == 0)
            return -INFINITY;
        assert_string_equal(v->valuestring, "nan");
        return NAN;
    }
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* The numbers of v in order (re, im of {"re", "im"} objects), skipping its null parts and
 * the parts where `mask` (a value of the same structure, or NULL for none) is null. */
static void flatten(const cJSON *v, const cJSON *mask, double *out, size_t *n, size_t max)
{
    if (cJSON_IsNull(v) || (mask != NULL && cJSON_IsNull(mask)))
        return;
    if (cJSON_IsObject(v)) { /* {"re": .., "im": ..} */
        assert_true(*n + 2 <= max);
        out[(*n)++] = num(cJSON_GetObjectItemCaseSensitive(v, "re"));
        out[(*n)++] = num(cJSON_GetObjectItemCaseSensitive(v, "im"));
        return;
    }
    if (cJSON_IsObject(mask)) /* a complex number: the primal's [re, im] all count */
        mask = NULL;
    if (cJSON_IsArray(v)) {
        if (mask != NULL) {
            assert_true(cJSON_IsArray(mask));
            assert_int_equal(cJSON_GetArraySize(mask), cJSON_GetArraySize(v));
        }
        const cJSON *m = mask != NULL ? mask->child : NULL;
        for (const cJSON *c = v->child; c != NULL; c = c->next) {
            flatten(c, m, out, n, max);
            if (m != NULL)
                m = m->next;
        }
        return;
    }
    assert_true(*n < max);
    out[(*n)++] = num(v);
}

static bool close_to(double a, double b, double rtol, double atol)
{
    return fabs(a - b) <= atol + rtol * fmax(fabs(a), fabs(b));
}

/* ---- Checking jvp and vjp against finite differences ------------------------------------ */

#define MAXN 65536

/* The perturbable numbers of an argument: every number except inside {"int": ..} and
 * {"fn": ..}; the re and im of {"re": .., "im": ..}. */
static void arg_leaves(cJSON *v, cJSON **out, size_t *n)
{
    if (cJSON_IsObject(v)) {
        if (cJSON_GetObjectItemCaseSensitive(v, "int") != NULL ||
            cJSON_GetObjectItemCaseSensitive(v, "fn") != NULL)
            return;
        for (cJSON *c = v->child; c != NULL; c = c->next)
            arg_leaves(c, out, n);
        return;
    }
    if (cJSON_IsArray(v)) {
        for (cJSON *c = v->child; c != NULL; c = c->next)
            arg_leaves(c, out, n);
        return;
    }
    if (cJSON_IsNumber(v)) {
        assert_true(*n < MAXN);
        out[(*n)++] = v;
    }
}

typedef struct fd_opts {
    double h;    /* step of the 5-point stencil */
    double rtol; /* tolerances of the comparison */
    double atol;
    bool per_coord; /* each vjp component against its own difference (else <vjp, t> only) */
} fd_opts;

static const fd_opts k_f64 = {1e-4, 1e-7, 1e-8, true};
static const fd_opts k_f32 = {1e-2, 2e-3, 2e-3, true};

/* Check the jvp (when the request has "tangents") and the vjp (when it has "cotangent")
 * against 5-point central differences of the primal. Returns the base response. */
static cJSON *check_fd(const char *request, fd_opts o)
{
    cJSON *req = cJSON_Parse(request);
    assert_non_null(req);
    const cJSON *tangents = key(req, "tangents");
    const cJSON *cot = key(req, "cotangent");

    /* The probe: the request without tangents and cotangent, its numbers perturbed. */
    cJSON *probe = cJSON_Duplicate(req, 1);
    assert_non_null(probe);
    cJSON_DeleteItemFromObjectCaseSensitive(probe, "tangents");
    cJSON_DeleteItemFromObjectCaseSensitive(probe, "cotangent");
    cJSON_DeleteItemFromObjectCaseSensitive(probe, "id");
    cJSON *pargs = cJSON_GetObjectItemCaseSensitive(probe, "args");
    const cJSON *dtypes = key(req, "dtypes");
    size_t nargs = (size_t)cJSON_GetArraySize(pargs);

    static cJSON *leaf[MAXN];
    static double x0[MAXN], t[MAXN];
    size_t nleaf = 0, start[33];
    assert_true(nargs <= 32);
    cJSON *a = pargs->child;
    const cJSON *tj = tangents != NULL ? tangents->child : NULL;
    for (size_t i = 0; i < nargs; i++, a = a->next) {
        start[i] = nleaf;
        const cJSON *d = dtypes != NULL ? cJSON_GetArrayItem(dtypes, (int)i) : NULL;
        bool integer = cJSON_IsString(d) &&
                       (strcmp(d->valuestring, "i64") == 0 || strcmp(d->valuestring, "bool") == 0);
        if (!integer)
            arg_leaves(a, leaf, &nleaf);
        for (size_t k = start[i]; k < nleaf; k++)
            x0[k] = leaf[k]->valuedouble;
        /* The tangent's numbers, in the same order ([re, im] pairs where the argument has
         * {"re", "im"} objects or c128 pairs); null is zero. */
        if (tj != NULL && !cJSON_IsNull(tj)) {
            size_t nt = 0;
            flatten(tj, NULL, t + start[i], &nt, MAXN - start[i]);
            assert_int_equal(nt, nleaf - start[i]);
        } else {
            for (size_t k = start[i]; k < nleaf; k++)
                t[k] = 0.0;
        }
        if (tj != NULL)
            tj = tj->next;
    }
    start[nargs] = nleaf;

    /* The requests: the base, 4 along t, 4 along each coordinate. */
    const double steps[4] = {-2.0, -1.0, 1.0, 2.0};
    size_t nj = tangents != NULL ? 4 : 0, ncoord = cot != NULL && o.per_coord ? 4 * nleaf : 0;
    size_t nlines = 1 + nj + ncoord, at = 0;
    char **lines = calloc(nlines, sizeof *lines);
    assert_non_null(lines);
    lines[at++] = strdup(request);
    for (size_t s = 0; tangents != NULL && s < 4; s++) {
        for (size_t k = 0; k < nleaf; k++)
            cJSON_SetNumberValue(leaf[k], x0[k] + steps[s] * o.h * t[k]);
        lines[at++] = cJSON_PrintUnformatted(probe);
    }
    for (size_t k = 0; k < nleaf; k++)
        cJSON_SetNumberValue(leaf[k], x0[k]);
    for (size_t k = 0; cot != NULL && o.per_coord && k < nleaf; k++) {
        for (size_t s = 0; s < 4; s++) {
            cJSON_SetNumberValue(leaf[k], x0[k] + steps[s] * o.h);
            lines[at++] = cJSON_PrintUnformatted(probe);
        }
        cJSON_SetNumberValue(leaf[k], x0[k]);
    }
    assert_int_equal(at, nlines);
    responses rs = run_lines((const char *const *)lines, nlines);
    assert_int_equal(rs.n, nlines);
    for (size_t i = 0; i < nlines; i++) {
        expect_ok(rs.r[i]);
        cJSON_free(lines[i]);
    }
    free(lines);

    const cJSON *base = rs.r[0];
    static double f[4][MAXN], d[MAXN], jvp[MAXN], c[MAXN], vjp[MAXN];
    size_t nf = 0;

    /* jvp: the derivative of the primal along t (parts where the jvp is null, integer
     * outputs, are left out). */
    const cJSON *jv = key(base, "jvp");
    size_t njvp = 0;
    if (tangents != NULL) {
        assert_non_null(jv);
        flatten(jv, NULL, jvp, &njvp, MAXN);
        for (size_t s = 0; s < 4; s++) {
            nf = 0;
            flatten(key(rs.r[1 + s], "primal"), jv, f[s], &nf, MAXN);
            assert_int_equal(nf, njvp);
        }
        for (size_t m = 0; m < njvp; m++) {
            d[m] = (f[0][m] - 8.0 * f[1][m] + 8.0 * f[2][m] - f[3][m]) / (12.0 * o.h);
            if (!close_to(jvp[m], d[m], o.rtol, o.atol))
                print_error("%s\n  jvp[%zu] = %.17g, finite differences %.17g\n", request, m,
                            jvp[m], d[m]);
            assert_true(close_to(jvp[m], d[m], o.rtol, o.atol));
        }
    } else {
        assert_null(jv);
    }

    /* vjp: one cotangent per argument; null exactly for the arguments without numbers. */
    const cJSON *vj = key(base, "vjp");
    if (cot != NULL) {
        assert_true(cJSON_IsArray(vj));
        assert_int_equal(cJSON_GetArraySize(vj), (int)nargs);
        size_t nc = 0, nv = 0;
        flatten(cot, NULL, c, &nc, MAXN);
        const cJSON *v = vj->child;
        for (size_t i = 0; i < nargs; i++, v = v->next) {
            if (start[i + 1] == start[i]) {
                assert_true(cJSON_IsNull(v));
                continue;
            }
            size_t before = nv;
            flatten(v, NULL, vjp, &nv, MAXN);
            assert_int_equal(nv - before, start[i + 1] - start[i]);
        }
        if (o.per_coord) {
            for (size_t k = 0; k < nleaf; k++) {
                for (size_t s = 0; s < 4; s++) {
                    nf = 0;
                    flatten(key(rs.r[1 + nj + 4 * k + s], "primal"), cot, f[s], &nf, MAXN);
                    assert_int_equal(nf, nc);
                }
                double want = 0.0;
                for (size_t m = 0; m < nc; m++)
                    want +=
                        c[m] * (f[0][m] - 8.0 * f[1][m] + 8.0 * f[2][m] - f[3][m]) / (12.0 * o.h);
                if (!close_to(vjp[k], want, o.rtol, o.atol))
                    print_error("%s\n  vjp component %zu = %.17g, finite differences %.17g\n",
                                request, k, vjp[k], want);
                assert_true(close_to(vjp[k], want, o.rtol, o.atol));
            }
        } else {
            /* <vjp, t> = <cotangent, J t>, J t from the differences above. */
            assert_non_null(tangents);
            assert_int_equal(nc, njvp);
            double lhs = 0.0, rhs = 0.0;
            for (size_t k = 0; k < nleaf; k++)
                lhs += vjp[k] * t[k];
            for (size_t m = 0; m < nc; m++)
                rhs += c[m] * d[m];
            if (!close_to(lhs, rhs, o.rtol, o.atol))
                print_error("%s\n  <vjp, t> = %.17g, <cotangent, FD> = %.17g\n", request, lhs, rhs);
            assert_true(close_to(lhs, rhs, o.rtol, o.atol));
        }
    } else {
        assert_null(vj);
    }

    cJSON *out = cJSON_Duplicate(base, 1);
    responses_free(&rs);
    cJSON_Delete(probe);
    cJSON_Delete(req);
    return out;
}

static void expect_type(const cJSON *r, const char *type)
{
    const cJSON *ty = key(r, "type");
    assert_true(cJSON_IsString(ty));
    assert_string_equal(ty->valuestring, type);
}

/* A deterministic pseudo-random number in [-1, 1). */
static double rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) * 0x1p-52 - 1.0;
}

/* "[[a,b,..],..]": an n x m matrix of random numbers (plus `diag` on the diagonal). */
static void random_matrix(char *buf, size_t size, size_t n, size_t m, double diag, uint64_t *s)
{
    size_t len = 0;
    len += (size_t)snprintf(buf + len, size - len, "[");
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(buf + len, size - len, "%s[", i ? "," : "");
        for (size_t j = 0; j < m; j++)
            len += (size_t)snprintf(buf + len, size - len, "%s%.17g", j ? "," : "",
                                    rnd(s) + (i == j ? diag : 0.0));
        len += (size_t)snprintf(buf + len, size - len, "]");
    }
    snprintf(buf + len, size - len, "]");
}

/* ---- Tests ---------------------------------------------------------------------------- */

/* The example of the specification: det([[1,2],[3,4]]) = -2. */
static void test_det_example(void **state)
{
    (void)state;
    cJSON *r = check_fd("{\"fn\": \"det\", \"args\": [[[1,2],[3,4]]], "
                        "\"tangents\": [[[0.1,0],[0,0.2]]], \"cotangent\": 1.0}",
                        k_f64);
    assert_true(close_to(num(key(r, "primal")), -2.0, 1e-14, 0.0));
    expect_type(r, "f64");
    /* The vjp is written as a 2 x 2 nested list, like the argument. */
    const cJSON *v = cJSON_GetArrayItem(key(r, "vjp"), 0);
    assert_int_equal(cJSON_GetArraySize(v), 2);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(v, 0)), 2);
    cJSON_Delete(r);
}

/* det and inv at random, ill-conditioned and structured points; `inv` names both the scalar
 * and the matrix inverse: a matrix argument selects the matrix one. */
static void test_linalg_random(void **state)
{
    (void)state;
    uint64_t s = 0x9E3779B97F4A7C15u;
    char A[1024], T[1024], req[4096];
    for (int trial = 0; trial < 3; trial++) {
        random_matrix(A, sizeof A, 3, 3, 2.0, &s);
        random_matrix(T, sizeof T, 3, 3, 0.0, &s);
        snprintf(req, sizeof req,
                 "{\"fn\": \"det\", \"args\": [%s], \"tangents\": [%s], \"cotangent\": %.17g}", A,
                 T, rnd(&s));
        cJSON_Delete(check_fd(req, k_f64));
        snprintf(req, sizeof req,
                 "{\"fn\": \"inv\", \"args\": [%s], \"tangents\": [%s], \"cotangent\": %s}", A, T,
                 T);
        cJSON *r = check_fd(req, k_f64);
        expect_type(r, "f64[3,3]");
        cJSON_Delete(r);
    }
    /* Nearly singular (condition number ~4e6): derivatives are large but smooth. */
    cJSON_Delete(check_fd("{\"fn\": \"inv\", \"args\": [[[1,1],[1,1.000001]]], "
                          "\"tangents\": [[[0.5,-0.25],[0.125,1]]], "
                          "\"cotangent\": [[1,0],[0,-1]]}",
                          (fd_opts){1e-9, 1e-5, 1e-3, true}));
    /* Singular: det is still differentiable (its gradient is the adjugate). */
    cJSON_Delete(check_fd("{\"fn\": \"det\", \"args\": [[[1,2],[2,4]]], "
                          "\"tangents\": [[[1,0.5],[0,1]]], \"cotangent\": 1}",
                          k_f64));
    /* A triangular matrix and the identity. */
    cJSON_Delete(check_fd("{\"fn\": \"det\", \"args\": [[[2,5,1],[0,3,7],[0,0,0.5]]], "
                          "\"tangents\": [[[1,0,0],[1,1,0],[1,1,1]]], \"cotangent\": 2}",
                          k_f64));
    cJSON_Delete(check_fd("{\"fn\": \"inv\", \"args\": [[[1,0],[0,1]]], "
                          "\"tangents\": [[[1,2],[3,4]]], \"cotangent\": [[1,2],[3,4]]}",
                          k_f64));
}

/* A scalar function, and non-finite numbers written as strings both ways. */
static void test_scalar(void **state)
{
    (void)state;
    cJSON *r = check_fd("{\"fn\": \"sin\", \"args\": [0.7], \"tangents\": [1], "
                        "\"cotangent\": 1}",
                        k_f64);
    assert_true(close_to(num(key(r, "primal")), sin(0.7), 1e-15, 0.0));
    expect_type(r, "f64");
    cJSON_Delete(r);
    cJSON_Delete(check_fd("{\"fn\": \"atan2\", \"args\": [0.3, -1.2], \"tangents\": [1, -2], "
                          "\"cotangent\": -0.5}",
                          k_f64));
    cJSON_Delete(check_fd("{\"fn\": \"hypot\", \"args\": [3, 4], \"tangents\": [0.5, 1], "
                          "\"cotangent\": 2}",
                          k_f64));

    const char *lines[] = {
        "{\"fn\": \"log\", \"args\": [0]}",
        "{\"fn\": \"exp\", \"args\": [\"-inf\"], \"tangents\": [1]}",
        "{\"fn\": \"sqrt\", \"args\": [\"inf\"]}",
        "{\"fn\": \"exp\", \"args\": [\"nan\"]}",
        "{\"fn\": \"exp\", \"args\": [\"0x1p-1\"]}",
    };
    responses rs = run_lines(lines, 5);
    assert_int_equal(rs.n, 5);
    for (size_t i = 0; i < rs.n; i++)
        expect_ok(rs.r[i]);
    assert_string_equal(key(rs.r[0], "primal")->valuestring, "-inf");
    assert_true(num(key(rs.r[1], "primal")) == 0.0);
    assert_string_equal(key(rs.r[2], "primal")->valuestring, "inf");
    assert_string_equal(key(rs.r[3], "primal")->valuestring, "nan");
    assert_true(num(key(rs.r[4], "primal")) == exp(0.5));
    responses_free(&rs);
}

/* Complex scalars and arrays: the output is [re, im]; input as {"re", "im"} or, with
 * dtype c128, as [re, im]. */
static void test_complex(void **state)
{
    (void)state;
    cJSON *r = check_fd("{\"fn\": \"sin\", \"args\": [{\"re\": 0.5, \"im\": 1}], "
                        "\"tangents\": [[0.3, -0.2]], \"cotangent\": {\"re\": 0.7, \"im\": 0.4}}",
                        k_f64);
    expect_type(r, "c128");
    const cJSON *p = key(r, "primal");
    assert_int_equal(cJSON_GetArraySize(p), 2);
    assert_true(close_to(num(p->child), sin(0.5) * cosh(1.0), 1e-14, 0.0));
    assert_true(close_to(num(p->child->next), cos(0.5) * sinh(1.0), 1e-14, 0.0));
    cJSON_Delete(r);

    /* The same number with dtype c128 and [re, im]. */
    r = check_fd("{\"fn\": \"sin\", \"args\": [[0.5, 1]], \"dtypes\": [\"c128\"], "
                 "\"tangents\": [[1, 0]], \"cotangent\": [0, 1]}",
                 k_f64);
    expect_type(r, "c128");
    cJSON_Delete(r);

    /* A complex matrix: det and matmul (two array arguments, thunked cotangents). */
    r = check_fd("{\"fn\": \"det\", \"args\": [[[[1,2],[0.5,-1]],[[3,0],[1,1]]]], "
                 "\"dtypes\": [\"c128\"], \"tangents\": [[[[0.1,0],[0,0.2]],[[0,0.3],[0.4,0]]]], "
                 "\"cotangent\": [1, -0.5]}",
                 k_f64);
    expect_type(r, "c128");
    cJSON_Delete(r);
    r = check_fd("{\"fn\": \"matmul\", \"args\": [[[{\"re\":1,\"im\":1}, {\"re\":2,\"im\":0}]], "
                 "[[{\"re\":1,\"im\":0}],[{\"re\":0,\"im\":-1}]]], "
                 "\"tangents\": [[[[1,0],[0,1]]], null], \"cotangent\": [[[0.5, 2]]]}",
                 k_f64);
    expect_type(r, "c128[1,1]");
    cJSON_Delete(r);
    /* A real argument of a complex-valued call keeps a real cotangent. */
    r = check_fd("{\"fn\": \"*\", \"args\": [2.5, {\"re\": 0, \"im\": 1}], "
                 "\"tangents\": [1, null], \"cotangent\": [1, 1]}",
                 k_f64);
    assert_true(cJSON_IsNumber(cJSON_GetArrayItem(key(r, "vjp"), 0)));
    cJSON_Delete(r);
}

/* Tuple outputs: a list of elements; the cotangent is a list too (null: zero), integer
 * elements get null. */
static void test_tuples(void **state)
{
    (void)state;
    cJSON *r = check_fd("{\"fn\": \"sincos\", \"args\": [0.3], \"tangents\": [1], "
                        "\"cotangent\": [1, 2]}",
                        k_f64);
    const cJSON *ty = key(r, "type");
    assert_true(cJSON_IsArray(ty));
    assert_int_equal(cJSON_GetArraySize(ty), 2);
    cJSON_Delete(r);
    cJSON_Delete(
        check_fd("{\"fn\": \"sincos\", \"args\": [0.3], \"cotangent\": [null, 1]}", k_f64));

    r = check_fd("{\"fn\": \"findmax\", \"args\": [[3,1,5,2]], "
                 "\"tangents\": [[0.1,0.2,0.3,0.4]], \"cotangent\": [1, null]}",
                 k_f64);
    const cJSON *p = key(r, "primal");
    assert_true(num(p->child) == 5.0);
    assert_true(num(p->child->next) == 2.0); /* 0-based index of the maximum */
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(key(r, "jvp"), 1)));
    cJSON_Delete(r);

    /* svd: a tuple of arrays (U, S, V) at well-separated singular values. */
    r = check_fd("{\"fn\": \"svd\", \"args\": [[[3,1,0.5],[1,2,0.25]]], "
                 "\"tangents\": [[[0.1,0.2,-0.3],[0.4,-0.1,0.2]]], "
                 "\"cotangent\": [[[1,0],[0,1]], [1, 0.5], [[0.5,0],[0,1],[0.25,0.25]]]}",
                 (fd_opts){1e-4, 1e-6, 1e-7, true});
    ty = key(r, "type");
    assert_int_equal(cJSON_GetArraySize(ty), 3);
    assert_string_equal(cJSON_GetArrayItem(ty, 1)->valuestring, "f64[2]");
    cJSON_Delete(r);
    cJSON_Delete(check_fd("{\"fn\": \"extrema\", \"args\": [[[3,-1],[5,2]]], "
                          "\"tangents\": [[[1,2],[3,4]]], \"cotangent\": [null, 2]}",
                          k_f64));
}

/* Integer arguments: dims as {"int": ..} or with dtype i64; their vjp is null. */
static void test_dims(void **state)
{
    (void)state;
    cJSON *r = check_fd("{\"fn\": \"sum\", \"args\": [[[1,2,3],[4,5,6]], {\"int\": 1}], "
                        "\"tangents\": [[[1,0.5,0],[0,0,2]], null], \"cotangent\": [[1],[-2]]}",
                        k_f64);
    expect_type(r, "f64[2,1]");
    const cJSON *p = key(r, "primal");
    assert_true(num(p->child->child) == 6.0);
    assert_true(num(p->child->next->child) == 15.0);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(key(r, "vjp"), 1)));
    cJSON_Delete(r);

    r = check_fd("{\"fn\": \"mean\", \"args\": [[[1,2,3],[4,5,6]], [0, 1]], "
                 "\"dtypes\": [null, \"i64\"], \"tangents\": [[[1,0.5,0],[0,0,2]], null], "
                 "\"cotangent\": [[3]]}",
                 k_f64);
    expect_type(r, "f64[1,1]");
    cJSON_Delete(r);
    cJSON_Delete(check_fd("{\"fn\": \"softmax\", \"args\": [[[1,2,3],[-1,0,4]], {\"int\": 0}], "
                          "\"tangents\": [[[1,0.5,0],[0,0,2]], null], "
                          "\"cotangent\": [[1,0,0],[0,2,1]]}",
                          k_f64));
    cJSON_Delete(check_fd("{\"fn\": \"ldexp\", \"args\": [1.5, {\"int\": 3}], "
                          "\"tangents\": [1, null], \"cotangent\": 1}",
                          k_f64));
    /* A function argument: broadcast(sin, x). */
    cJSON_Delete(check_fd("{\"fn\": \"broadcast\", \"args\": [{\"fn\": \"sin\"}, [1,2,3]], "
                          "\"tangents\": [null, [1,1,-1]], \"cotangent\": [1,0.5,2]}",
                          k_f64));
}

/* f32 arguments stay f32: the primal and the (co)tangents are float numbers. */
static void test_f32(void **state)
{
    (void)state;
    cJSON *r = check_fd("{\"fn\": \"sin\", \"args\": [0.7], \"dtypes\": [\"f32\"], "
                        "\"tangents\": [1], \"cotangent\": 1}",
                        k_f32);
    expect_type(r, "f32");
    double y = num(key(r, "primal")), v = num(key(r, "vjp")->child);
    assert_true((double)(float)y == y);
    assert_true((double)(float)v == v);
    assert_true(fabs(y - sin(0.7)) < 1e-6);
    cJSON_Delete(r);

    r = check_fd("{\"fn\": \"det\", \"args\": [[[2,1],[0.5,3]]], \"dtypes\": [\"f32\"], "
                 "\"tangents\": [[[1,0],[0,1]]], \"cotangent\": 1}",
                 k_f32);
    expect_type(r, "f32");
    const cJSON *vjp = key(r, "vjp")->child;
    for (const cJSON *row = vjp->child; row != NULL; row = row->next)
        for (const cJSON *e = row->child; e != NULL; e = e->next)
            assert_true((double)(float)num(e) == num(e));
    cJSON_Delete(r);
    r = check_fd("{\"fn\": \"sum\", \"args\": [[[2,1],[0.5,3]], {\"int\": 0}], "
                 "\"dtypes\": [\"f32\", null], \"tangents\": [[[1,0],[0,1]], null], "
                 "\"cotangent\": [[1, 2]]}",
                 k_f32);
    expect_type(r, "f32[1,2]");
    cJSON_Delete(r);
}

/* A long line: a 20000-element vector (about 800 KB per request); the vjp is checked
 * through <vjp, t> = <cotangent, J t>, J t from differences along t. */
static void test_long_line(void **state)
{
    (void)state;
    size_t n = 20000, size = 2 * n * 26 + 256, len = 0;
    char *req = malloc(size);
    assert_non_null(req);
    uint64_t s = 12345;
    len += (size_t)snprintf(req + len, size - len, "{\"fn\": \"logsumexp\", \"args\": [[");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(req + len, size - len, "%s%.17g", i ? "," : "", rnd(&s));
    len += (size_t)snprintf(req + len, size - len, "]], \"tangents\": [[");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(req + len, size - len, "%s%.17g", i ? "," : "", rnd(&s));
    snprintf(req + len, size - len, "]], \"cotangent\": 1.5}");
    cJSON *r = check_fd(req, (fd_opts){1e-3, 1e-6, 1e-8, false});
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(key(r, "vjp"), 0)), (int)n);
    cJSON_Delete(r);
    free(req);
}

/* Memory does not grow with the number of requests: each request's arena is reset after
 * its line. The largest resident size of the tool on 100 requests and on 3000 (both runs
 * are children of this process, and RUSAGE_CHILDREN keeps the largest) must be about the
 * same. The responses are counted, not kept, so that this process (whose pages a child
 * counts until it execs) does not grow in between. Skipped under the sanitizers, whose
 * allocators keep freed memory on purpose. */
static void test_memory_bounded(void **state)
{
    (void)state;
#ifdef CR_EVAL_TEST_SANITIZED
    skip();
#else
    static char A[16384], T[16384], req[3 * 16384 + 128];
    uint64_t s = 777;
    random_matrix(A, sizeof A, 24, 24, 5.0, &s);
    random_matrix(T, sizeof T, 24, 24, 0.0, &s);
    snprintf(req, sizeof req,
             "{\"fn\": \"inv\", \"args\": [%s], \"tangents\": [%s], \"cotangent\": %s}", A, T, T);
    const size_t counts[2] = {100, 3000};
    long maxrss[2];
    char path[64], cmd[4096];
    snprintf(path, sizeof path, "eval_json_memory_%ld.jsonl", (long)getpid());
    snprintf(cmd, sizeof cmd, "'%s' --json < '%s'", g_tool, path);
    for (int run = 0; run < 2; run++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        for (size_t i = 0; i < counts[run]; i++)
            fprintf(f, "%s\n", req);
        assert_int_equal(fclose(f), 0);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        static char line[1 << 17];
        size_t n = 0;
        while (fgets(line, sizeof line, p) != NULL) {
            assert_non_null(strchr(line, '\n')); /* the buffer holds a whole response */
            assert_null(strstr(line, "\"error\""));
            n++;
        }
        assert_int_equal(pclose(p), 0);
        assert_int_equal(n, counts[run]);
        struct rusage ru;
        assert_int_equal(getrusage(RUSAGE_CHILDREN, &ru), 0);
        maxrss[run] = ru.ru_maxrss; /* KiB */
    }
    remove(path);
    if (maxrss[1] > maxrss[0] + 4096)
        print_error("resident size %ld KiB after 100 requests, %ld KiB after 3000\n", maxrss[0],
                    maxrss[1]);
    assert_true(maxrss[1] <= maxrss[0] + 4096);
#endif
}

/* Errors: one line each, and the next request still runs; the exit status stays 0. */
static void test_errors(void **state)
{
    (void)state;
    const char *good = "{\"fn\": \"sin\", \"args\": [0], \"id\": \"good\"}";
    const struct {
        const char *line, *part;
    } cases[] = {
        {"{\"fn\": \"sin\", \"args\": [1", "unparsable"},
        {"{\"fn\": \"sin\", \"args\": [1]} trailing", "unparsable"},
        {"[1, 2]", "JSON object"},
        {"{\"args\": [1]}", "\"fn\""},
        {"{\"fn\": \"sin\"}", "\"args\""},
        {"{\"fn\": \"no_such_function\", \"args\": [1]}", "unknown function 'no_such_function'"},
        {"{\"fn\": \"sin\", \"args\": [1], \"tangent\": [1]}", "unknown key \"tangent\""},
        {"{\"fn\": \"atan2\", \"args\": [1]}", "takes 2 arguments"},
        {"{\"fn\": \"sin\", \"args\": [[1, 2]]}", "not a number (CR_EINVAL)"},
        {"{\"fn\": \"det\", \"args\": [[[1,2],[3]]]}", "ragged"},
        {"{\"fn\": \"det\", \"args\": [[[1,2],3]]}", "ragged"},
        {"{\"fn\": \"det\", \"args\": [[[1,2,3],[4,5,6]]]}", "det"},
        {"{\"fn\": \"det\", \"args\": [[[1,2],[3,4]]], \"tangents\": [[1,2]]}", "shape [2,2]"},
        {"{\"fn\": \"det\", \"args\": [[[1,2],[3,4]]], \"tangents\": []}", "one entry per"},
        {"{\"fn\": \"sum\", \"args\": [[1,2], {\"int\": 1.5}]}", "int"},
        {"{\"fn\": \"ldexp\", \"args\": [1, {\"int\": 2}], \"tangents\": [1, 1]}",
         "no tangent space"},
        {"{\"fn\": \"sin\", \"args\": [1], \"dtypes\": [\"f16\"]}", "dtype"},
        {"{\"fn\": \"sin\", \"args\": [[1,2,3]], \"dtypes\": [\"c128\"]}", "[re, im]"},
        {"{\"fn\": \"sin\", \"args\": [{\"re\": 1}]}", "\"im\""},
        {"{\"fn\": \"sin\", \"args\": [\"one\"]}", "\"one\" is not a number"},
        {"{\"fn\": \"sincos\", \"args\": [1], \"cotangent\": [1]}", "list of 2"},
        {"{\"fn\": \"inv\", \"args\": [[[1,2],[2,4]]]}", "CR_EDOMAIN"},
        {"{\"fn\": \"broadcast\", \"args\": [{\"fn\": \"nope\"}, [1]]}", "names no"},
        {"{\"fn\": \"sort\", \"args\": [[[1,2],[3,4]]], \"cotangent\": [[1,2],[3,4]]}", "sort"},
    };
    size_t nc = sizeof cases / sizeof cases[0];
    const char *lines[2 * sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < nc; i++) {
        lines[2 * i] = cases[i].line;
        lines[2 * i + 1] = good;
    }
    responses rs = run_lines(lines, 2 * nc);
    assert_int_equal(rs.n, 2 * nc);
    for (size_t i = 0; i < nc; i++) {
        expect_error(rs.r[2 * i], cases[i].part);
        expect_ok(rs.r[2 * i + 1]);
        assert_string_equal(key(rs.r[2 * i + 1], "id")->valuestring, "good");
    }
    responses_free(&rs);
}

/* Blank lines get no response; "id" is echoed, errors included; a NUL byte is an error. */
static void test_protocol(void **state)
{
    (void)state;
    const char *lines[] = {
        "",
        "   ",
        "{\"fn\": \"cos\", \"args\": [0], \"id\": 17}",
        "{\"fn\": \"cos\", \"args\": [], \"id\": [\"x\", 1]}",
        "{\"fn\": \"cos\", \"args\": [0], \"cotangent\": null}",
        "\r",
    };
    responses rs = run_lines(lines, 6);
    assert_int_equal(rs.n, 3);
    assert_int_equal(key(rs.r[0], "id")->valueint, 17);
    assert_true(num(key(rs.r[0], "primal")) == 1.0);
    assert_null(key(rs.r[0], "jvp"));
    assert_null(key(rs.r[0], "vjp"));
    assert_non_null(error_of(rs.r[1]));
    assert_true(cJSON_IsArray(key(rs.r[1], "id")));
    /* A null cotangent is a zero: zeros of the argument's shape. */
    assert_true(num(key(rs.r[2], "vjp")->child) == 0.0);
    responses_free(&rs);

    /* A NUL byte inside a line. */
    char path[64];
    snprintf(path, sizeof path, "eval_json_nul_%ld.jsonl", (long)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    static const char bytes[] = "{\"fn\": \"sin\", \"args\": [1]}\0x\n{\"fn\": \"sin\", "
                                "\"args\": [1]}\n";
    fwrite(bytes, 1, sizeof bytes - 1, f);
    assert_int_equal(fclose(f), 0);
    rs = run_file(path);
    remove(path);
    assert_int_equal(rs.n, 2);
    expect_error(rs.r[0], "unparsable");
    expect_ok(rs.r[1]);
    responses_free(&rs);
}

/* The documented requests (tools/tests/eval_requests.jsonl, also in docs/eval.md): those
 * whose id starts with "error" fail, the others succeed. */
static void test_request_file(void **state)
{
    (void)state;
    responses rs = run_file(g_requests);
    assert_true(rs.n >= 5);
    bool saw_det = false;
    for (size_t i = 0; i < rs.n; i++) {
        const cJSON *id = key(rs.r[i], "id");
        assert_true(cJSON_IsString(id));
        if (strncmp(id->valuestring, "error", 5) == 0) {
            assert_non_null(error_of(rs.r[i]));
        } else {
            expect_ok(rs.r[i]);
        }
        if (strcmp(id->valuestring, "det") == 0) {
            saw_det = true;
            assert_true(close_to(num(key(rs.r[i], "primal")), -2.0, 1e-14, 0.0));
        }
    }
    assert_true(saw_det);
    responses_free(&rs);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_eval_json <chainrules-eval> <requests.jsonl>\n");
        return 2;
    }
    g_tool = argv[1];
    g_requests = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_bounded), /* first: it measures this process's children */
        cmocka_unit_test(test_det_example),
        cmocka_unit_test(test_linalg_random),
        cmocka_unit_test(test_scalar),
        cmocka_unit_test(test_complex),
        cmocka_unit_test(test_tuples),
        cmocka_unit_test(test_dims),
        cmocka_unit_test(test_f32),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_protocol),
        cmocka_unit_test(test_request_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
