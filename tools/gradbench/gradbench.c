/*
 * chainrules-gradbench: a GradBench tool (docs/gradbench.md).
 *
 * Speaks GradBench's protocol (its CONTRIBUTING.md, "Protocol"): one JSON message per line
 * on standard input, one JSON response per line on standard output. The functions of every
 * eval are the plain C objectives of bench/objectives, and their derivatives are the code
 * chainrules-ad wrote for them at build time (bench/objectives/CMakeLists.txt): nothing here
 * computes a derivative. This file only converts JSON to flat arrays and back, seeds the
 * derivative functions and times them.
 *
 * The variant chainrules-c-tape (selected by the option --tape, or by a program name
 * ending in "-tape") computes the same functions' derivatives on the library's tape instead:
 * the same objectives, recorded (tools/gradbench/tape.cpp).
 *
 *   chainrules-gradbench [--tape]   (reads messages until end of input)
 */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gb_tape.h"
#include "objectives.h"
#include "objectives_ad.h"

#define GB_MAX_ELEMS 100000000L /* largest array accepted from an input */

/* ------------------------------------------------------------------------------------ */
/* Errors and JSON input                                                                */

typedef struct gb_err {
    char msg[512];
} gb_err;

static bool fail(gb_err *e, const char *fmt, const char *what)
{
    snprintf(e->msg, sizeof e->msg, fmt, what);
    return false;
}

static const cJSON *field(const cJSON *obj, const char *name, gb_err *e)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!f)
        fail(e, "input has no field '%s'", name);
    return f;
}

static bool get_number(const cJSON *obj, const char *name, double *out, gb_err *e)
{
    const cJSON *f = field(obj, name, e);
    if (!f)
        return false;
    if (!cJSON_IsNumber(f))
        return fail(e, "input field '%s' is not a number", name);
    *out = f->valuedouble;
    return true;
}

static bool get_count(const cJSON *obj, const char *name, long lo, long hi, long *out, gb_err *e)
{
    double v;
    if (!get_number(obj, name, &v, e))
        return false;
    if (!(v >= (double)lo && v <= (double)hi) || v != floor(v))
        return fail(e, "input field '%s' is not an integer in range", name);
    *out = (long)v;
    return true;
}

/* A flat array of numbers (or of arrays of numbers of equal length `inner`, which is set
 * from the first element when *inner is 0). Allocates *out; *n receives the number of
 * outer elements. */
static bool read_array(const cJSON *a, const char *name, int depth, long *n, long *inner,
                       double **out, gb_err *e)
{
    if (!cJSON_IsArray(a))
        return fail(e, "input field '%s' is not an array", name);
    long rows = cJSON_GetArraySize(a);
    long cols = 1;
    if (depth == 2) {
        if (*inner == 0) {
            const cJSON *first = cJSON_GetArrayItem(a, 0);
            if (!first || !cJSON_IsArray(first))
                return fail(e, "input field '%s' is not an array of arrays", name);
            *inner = cJSON_GetArraySize(first);
        }
        cols = *inner;
    }
    if (rows < 0 || cols < 0 || (cols > 0 && rows > GB_MAX_ELEMS / cols))
        return fail(e, "input field '%s' is too large", name);
    double *v = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *v);
    if (!v)
        return fail(e, "out of memory reading '%s'", name);
    long i = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, a)
    {
        if (depth == 1) {
            if (!cJSON_IsNumber(row)) {
                free(v);
                return fail(e, "input field '%s' holds a non-number", name);
            }
            v[i++] = row->valuedouble;
            continue;
        }
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != cols) {
            free(v);
            return fail(e, "input field '%s' is not a rectangular array", name);
        }
        const cJSON *x;
        cJSON_ArrayForEach(x, row)
        {
            if (!cJSON_IsNumber(x)) {
                free(v);
                return fail(e, "input field '%s' holds a non-number", name);
            }
            v[i++] = x->valuedouble;
        }
    }
    *n = rows;
    *out = v;
    return true;
}

static bool get_vector(const cJSON *obj, const char *name, long *n, double **out, gb_err *e)
{
    const cJSON *a = field(obj, name, e);
    long inner = 0;
    return a && read_array(a, name, 1, n, &inner, out, e);
}

/* An array of arrays: *rows x *cols (cols fixed by the caller when non-zero). */
static bool get_matrix(const cJSON *obj, const char *name, long *rows, long *cols, double **out,
                       gb_err *e)
{
    const cJSON *a = field(obj, name, e);
    return a && read_array(a, name, 2, rows, cols, out, e);
}

static cJSON *vector_json(const double *v, long n)
{
    cJSON *a = cJSON_CreateArray();
    for (long i = 0; a && i < n; i++) {
        cJSON *x = cJSON_CreateNumber(v[i]);
        if (!x || !cJSON_AddItemToArray(a, x)) {
            cJSON_Delete(x);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* Adds item to o under name; deletes item when that fails (or item is NULL). */
static bool put(cJSON *o, const char *name, cJSON *item)
{
    if (!item)
        return false;
    if (!cJSON_AddItemToObject(o, name, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

static cJSON *matrix_json(const double *v, long rows, long cols)
{
    cJSON *a = cJSON_CreateArray();
    for (long i = 0; a && i < rows; i++) {
        cJSON *r = vector_json(v + i * cols, cols);
        if (!r || !cJSON_AddItemToArray(a, r)) {
            cJSON_Delete(r);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* ------------------------------------------------------------------------------------ */
/* The evals' functions: prepare (JSON to arrays, not timed as evaluation), run (timed),  */
/* output (arrays to JSON).                                                               */

typedef struct gb_state {
    /* inputs */
    long n, m, k, d, p, l, c, b, s, ell;
    double scalar, gamma;
    double *x, *y, *z, *u, *v, *w;
    double *bufs[16];
    long *ibuf[2];
    int *ints[4];
    int nbones, nverts, npts, ntri, mirrored, complicated;
    /* outputs */
    double out;
    double *res, *res2, *res3, *res4;
    int status; /* the tape variant: non-zero when a gbt_ function failed (gbt_errmsg()) */
} gb_state;

static void state_free(gb_state *s)
{
    free(s->x);
    free(s->y);
    free(s->z);
    free(s->u);
    free(s->v);
    free(s->w);
    for (int i = 0; i < 16; i++)
        free(s->bufs[i]);
    free(s->ibuf[0]);
    free(s->ibuf[1]);
    for (int i = 0; i < 4; i++)
        free(s->ints[i]);
    free(s->res);
    free(s->res2);
    free(s->res3);
    free(s->res4);
}

/* Allocates n doubles, zeroed; false (and a message) when n is absurd or memory is short. */
static bool alloc_zero(double **p, long n, gb_err *e)
{
    if (n < 0 || n > GB_MAX_ELEMS)
        return fail(e, "%s", "output too large");
    *p = calloc((size_t)(n > 0 ? n : 1), sizeof **p);
    return *p ? true : fail(e, "%s", "out of memory");
}

typedef struct gb_fn {
    const char *module;
    const char *function;
    bool (*prepare)(const cJSON *in, gb_state *s, gb_err *e);
    void (*run)(gb_state *s); /* chainrules-c's run; NULL: not implemented there */
    cJSON *(*output)(const gb_state *s);
    void (*run_tape)(gb_state *s); /* the tape variant's run; NULL: run (a primal) */
} gb_fn;

/* The variant: false chainrules-c (chainrules-ad's derivatives), true chainrules-c-tape. */
static bool g_tape;

static cJSON *out_scalar(const gb_state *s)
{
    return cJSON_CreateNumber(s->out);
}

/* hello ------------------------------------------------------------------------------ */

static bool hello_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    if (!cJSON_IsNumber(in))
        return fail(e, "%s", "hello's input is a number");
    s->scalar = in->valuedouble;
    return true;
}

static void hello_square_run(gb_state *s)
{
    s->out = hello_square(s->scalar);
}

static void hello_double_run(gb_state *s)
{
    double g = 0.0;
    hello_square_rev(s->scalar, &g, 1.0);
    s->out = g;
}

/* lse, llsq, ode: a vector x ------------------------------------------------------------ */

static bool lse_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    if (!get_vector(in, "x", &s->n, &s->x, e))
        return false;
    if (s->n < 1)
        return fail(e, "%s", "x is empty");
    return alloc_zero(&s->res, s->n, e);
}

static void lse_primal_run(gb_state *s)
{
    s->out = lse_objective(s->x, s->n);
}

static void lse_gradient_run(gb_state *s)
{
    /* every x_b[i] is assigned: nothing to clear (--reverse-set) */
    lse_objective_rev_set(s->x, s->res, s->n, 1.0);
}

static cJSON *out_res_n(const gb_state *s)
{
    return vector_json(s->res, s->n);
}

static bool llsq_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    if (!get_vector(in, "x", &s->m, &s->x, e) || !get_count(in, "n", 2, GB_MAX_ELEMS, &s->n, e))
        return false;
    return alloc_zero(&s->res, s->m, e);
}

static void llsq_primal_run(gb_state *s)
{
    s->out = llsq_objective(s->x, s->m, s->n);
}

static void llsq_gradient_run(gb_state *s)
{
    memset(s->res, 0, (size_t)s->m * sizeof *s->res);
    llsq_objective_rev(s->x, s->res, s->m, s->n, 1.0);
}

static cJSON *out_res_m(const gb_state *s)
{
    return vector_json(s->res, s->m);
}

static bool ode_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    if (!get_vector(in, "x", &s->n, &s->x, e) || !get_count(in, "s", 1, INT32_MAX, &s->s, e))
        return false;
    if (s->n < 1 || s->n > INT32_MAX)
        return fail(e, "%s", "x is empty or too long");
    return alloc_zero(&s->res, s->n, e) && alloc_zero(&s->res2, s->n, e) &&
           alloc_zero(&s->res3, s->n, e);
}

static void ode_primal_run(gb_state *s)
{
    ode_primal((int)s->n, s->x, (int)s->s, s->res);
}

static void ode_gradient_run(gb_state *s)
{
    /* the gradient of the last component of y(2): its cotangent is e_{n-1} */
    memset(s->res, 0, (size_t)s->n * sizeof *s->res);
    memset(s->res3, 0, (size_t)s->n * sizeof *s->res3);
    s->res3[s->n - 1] = 1.0;
    ode_primal_rev((int)s->n, s->x, s->res, (int)s->s, s->res2, s->res3);
}

/* det ------------------------------------------------------------------------------- */

static bool det_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    if (!get_vector(in, "A", &s->n, &s->x, e) || !get_count(in, "ell", 1, 20, &s->ell, e))
        return false;
    if (s->n != s->ell * s->ell)
        return fail(e, "%s", "A does not hold ell * ell values");
    s->ibuf[0] = calloc((size_t)s->ell + 1, sizeof(long));
    s->ibuf[1] = calloc((size_t)s->ell + 1, sizeof(long));
    if (!s->ibuf[0] || !s->ibuf[1])
        return fail(e, "%s", "out of memory");
    return alloc_zero(&s->res, s->n, e);
}

static void det_primal_run(gb_state *s)
{
    s->out = det_objective(s->x, s->ell, s->ibuf[0], s->ibuf[1]);
}

static void det_gradient_run(gb_state *s)
{
    memset(s->res, 0, (size_t)s->n * sizeof *s->res);
    det_objective_rev(s->x, s->res, s->ell, s->ibuf[0], s->ibuf[1], 1.0);
}

/* kmeans ---------------------------------------------------------------------------- */

static bool kmeans_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    long d2 = 0;
    if (!get_matrix(in, "points", &s->n, &s->d, &s->x, e))
        return false;
    d2 = s->d;
    if (!get_matrix(in, "centroids", &s->k, &d2, &s->y, e))
        return false;
    if (s->n < 1 || s->k < 1 || s->d < 1 || s->n > INT32_MAX || s->k > INT32_MAX)
        return fail(e, "%s", "kmeans needs points and centroids");
    long kd = s->k * s->d;
    if (!alloc_zero(&s->res, kd, e) || !alloc_zero(&s->res2, kd, e) ||
        !alloc_zero(&s->res3, kd, e) || !alloc_zero(&s->v, kd, e))
        return false;
    for (long i = 0; i < kd; i++)
        s->v[i] = 1.0;
    return true;
}

static void kmeans_cost_run(gb_state *s)
{
    s->out = kmeans_cost((int)s->n, (int)s->k, (int)s->d, s->x, s->y);
}

/* The Newton direction J / diag(H) (H is diagonal: each point's term depends on one
 * centroid). The reverse mode of the forward mode with tangent v = 1 and the tangent
 * output's cotangent 1: the gradient with respect to the tangent is J, the one with
 * respect to the centroids is H v = diag(H). The cost is a sum over the points and the
 * generated function adds into the shadows: it is called once per point, so that its
 * value stack holds one point's values (k d of them), not the whole sum's. */
static void kmeans_dir_run(gb_state *s)
{
    long kd = s->k * s->d;
    memset(s->res2, 0, (size_t)kd * sizeof *s->res2);
    memset(s->res3, 0, (size_t)kd * sizeof *s->res3);
    for (long i = 0; i < s->n; i++) {
        double jv = 0.0, jv_b = 1.0;
        kmeans_cost_fwd_rev(1, (int)s->k, (int)s->d, s->x + i * s->d, s->y, s->res2, s->v, s->res3,
                            &jv, &jv_b, 0.0);
    }
    for (long i = 0; i < kd; i++)
        s->res[i] = s->res3[i] / s->res2[i];
}

static cJSON *kmeans_dir_output(const gb_state *s)
{
    return matrix_json(s->res, s->k, s->d);
}

/* gmm ------------------------------------------------------------------------------- */

static bool gmm_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    long k, rows, wm;
    if (!get_count(in, "d", 1, GMM_MAX_D, &s->d, e) ||
        !get_count(in, "k", 1, GMM_MAX_K, &s->k, e) ||
        !get_count(in, "n", 1, INT32_MAX, &s->n, e) || !get_count(in, "m", 0, INT32_MAX, &wm, e) ||
        !get_number(in, "gamma", &s->gamma, e))
        return false;
    s->m = wm;
    long lsz = s->d * (s->d - 1) / 2;
    long cols = 0;
    if (!get_vector(in, "alpha", &k, &s->u, e))
        return false;
    cols = s->d;
    if (k != s->k || !get_matrix(in, "mu", &rows, &cols, &s->v, e) || rows != s->k)
        return fail(e, "%s", "alpha or mu has the wrong size");
    cols = s->d;
    if (!get_matrix(in, "q", &rows, &cols, &s->w, e) || rows != s->k)
        return fail(e, "%s", "q has the wrong size");
    cols = lsz;
    if (lsz > 0) {
        if (!get_matrix(in, "l", &rows, &cols, &s->z, e) || rows != s->k)
            return fail(e, "%s", "l has the wrong size");
    } else if (!alloc_zero(&s->z, 1, e)) {
        return false;
    }
    cols = s->d;
    if (!get_matrix(in, "x", &rows, &cols, &s->x, e) || rows != s->n)
        return fail(e, "%s", "x has the wrong size");
    return alloc_zero(&s->res, s->k, e) && alloc_zero(&s->res2, s->k * s->d, e) &&
           alloc_zero(&s->res3, s->k * s->d, e) && alloc_zero(&s->res4, s->k * lsz, e);
}

static void gmm_objective_run(gb_state *s)
{
    s->out = gmm_objective((int)s->d, (int)s->k, (int)s->n, s->u, s->v, s->w, s->z, s->x, s->gamma,
                           (int)s->m);
}

static void gmm_jacobian_run(gb_state *s)
{
    long lsz = s->d * (s->d - 1) / 2;
    memset(s->res, 0, (size_t)s->k * sizeof(double));
    memset(s->res2, 0, (size_t)(s->k * s->d) * sizeof(double));
    memset(s->res3, 0, (size_t)(s->k * s->d) * sizeof(double));
    memset(s->res4, 0, (size_t)(s->k * lsz > 0 ? s->k * lsz : 1) * sizeof(double));
    gmm_objective_rev((int)s->d, (int)s->k, (int)s->n, s->u, s->res, s->v, s->res2, s->w, s->res3,
                      s->z, s->res4, s->x, s->gamma, (int)s->m, 1.0);
}

static cJSON *gmm_jacobian_output(const gb_state *s)
{
    long lsz = s->d * (s->d - 1) / 2;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = put(o, "alpha", vector_json(s->res, s->k));
    ok = ok && put(o, "mu", matrix_json(s->res2, s->k, s->d));
    ok = ok && put(o, "q", matrix_json(s->res3, s->k, s->d));
    ok = ok && put(o, "l", matrix_json(s->res4, s->k, lsz));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* ba -------------------------------------------------------------------------------- */

static bool ba_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    long ncam, nx, nfeat;
    double *cam = NULL, *x = NULL, *feat = NULL, w;
    if (!get_count(in, "n", 1, GB_MAX_ELEMS / BA_NCAMPARAMS, &s->n, e) ||
        !get_count(in, "m", 1, GB_MAX_ELEMS / 3, &s->m, e) ||
        !get_count(in, "p", 1, GB_MAX_ELEMS / (2 * BA_NCOLS), &s->p, e) ||
        !get_number(in, "w", &w, e))
        return false;
    bool ok = get_vector(in, "cam", &ncam, &cam, e) && get_vector(in, "x", &nx, &x, e) &&
              get_vector(in, "feat", &nfeat, &feat, e);
    if (ok && (ncam != BA_NCAMPARAMS || nx != 3 || nfeat != 2))
        ok = fail(e, "%s", "cam, x or feat has the wrong size");
    /* GradBench's layout (cpp/gradbench/evals/ba.hpp): every camera, point, weight and
     * feature is the given one; observation i is of camera i mod n and point i mod m */
    ok = ok && alloc_zero(&s->x, BA_NCAMPARAMS * s->n, e) && alloc_zero(&s->y, 3 * s->m, e) &&
         alloc_zero(&s->w, s->p, e) && alloc_zero(&s->z, 2 * s->p, e) &&
         alloc_zero(&s->res, 2 * s->p, e) && alloc_zero(&s->res2, s->p, e) &&
         alloc_zero(&s->res3, 2 * BA_NCOLS * s->p, e) && alloc_zero(&s->res4, s->p, e);
    if (ok) {
        for (long i = 0; i < s->n; i++)
            memcpy(s->x + i * BA_NCAMPARAMS, cam, BA_NCAMPARAMS * sizeof(double));
        for (long i = 0; i < s->m; i++)
            memcpy(s->y + i * 3, x, 3 * sizeof(double));
        for (long i = 0; i < s->p; i++) {
            s->w[i] = w;
            s->z[2 * i] = feat[0];
            s->z[2 * i + 1] = feat[1];
        }
    }
    free(cam);
    free(x);
    free(feat);
    return ok;
}

static void ba_objective_run(gb_state *s)
{
    for (long i = 0; i < s->p; i++) {
        long cam = i % s->n, pt = i % s->m;
        ba_project(s->x + BA_NCAMPARAMS * cam, s->y + 3 * pt, s->w + i, s->z + 2 * i,
                   s->res + 2 * i);
    }
    for (long i = 0; i < s->p; i++)
        ba_weight_error(s->w + i, s->res2 + i);
}

/* Each block's 2 x 15 Jacobian (columns cam, X, w, as the eval lays them out) in one forward
 * sweep carrying the 15 directions, each intermediate only the directions it depends on
 * (chainrules-ad --jacobian: ba_project_jacfwd). */
static void ba_jacobian_run(gb_state *s)
{
    for (long i = 0; i < s->p; i++) {
        long cam = i % s->n, pt = i % s->m;
        double err[2];
        ba_project_jacfwd(s->x + BA_NCAMPARAMS * cam, s->y + 3 * pt, s->w + i, s->z + 2 * i, err,
                          s->res3 + 2 * BA_NCOLS * i);
    }
    for (long i = 0; i < s->p; i++) {
        double one = 1.0, err;
        s->res4[i] = 0.0;
        ba_weight_error_fwd(s->w + i, &one, &err, s->res4 + i);
    }
}

static cJSON *ba_objective_output(const gb_state *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *re = cJSON_CreateObject();
    cJSON *we = cJSON_CreateObject();
    bool ok = o && re && we && put(re, "elements", vector_json(s->res, 2)) &&
              cJSON_AddNumberToObject(re, "repeated", (double)s->p) &&
              cJSON_AddNumberToObject(we, "element", s->res2[0]) &&
              cJSON_AddNumberToObject(we, "repeated", (double)s->p);
    if (ok) {
        ok = put(o, "reproj_error", re); /* put() deletes it when it fails */
        re = NULL;
    }
    if (ok) {
        ok = put(o, "w_err", we);
        we = NULL;
    }
    if (!ok) {
        cJSON_Delete(re);
        cJSON_Delete(we);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* GradBench's compressed sparse Jacobian (ba.hpp, to_json of JacOutput): the first 30
 * entries of the CSR rows, columns and values (the two rows of observation 0) and the
 * last one of each (the weight error of the last observation). */
static cJSON *ba_jacobian_output(const gb_state *s)
{
    double rows[31], cols[31], vals[31];
    long ncam = BA_NCAMPARAMS * s->n, npt = 3 * s->m;
    for (int r = 0; r < 30; r++)
        rows[r] = (double)(BA_NCOLS * r);
    rows[30] = (double)(2 * BA_NCOLS * s->p + s->p);
    for (int row = 0; row < 2; row++) {
        for (int j = 0; j < BA_NCOLS; j++) {
            int at = row * BA_NCOLS + j;
            if (j < BA_NCAMPARAMS)
                cols[at] = j;
            else if (j < BA_NCAMPARAMS + 3)
                cols[at] = (double)(ncam + j - BA_NCAMPARAMS);
            else
                cols[at] = (double)(ncam + npt);
            vals[at] = s->res3[row * BA_NCOLS + j];
        }
    }
    cols[30] = (double)(ncam + npt + s->p - 1);
    vals[30] = s->res4[s->p - 1];
    cJSON *o = cJSON_CreateObject();
    bool ok = o && put(o, "rows", vector_json(rows, 31)) && put(o, "cols", vector_json(cols, 31)) &&
              put(o, "vals", vector_json(vals, 31));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* ht -------------------------------------------------------------------------------- */

static bool ints_of(const double *v, long n, long lo, long hi, int **out, const char *name,
                    gb_err *e)
{
    *out = malloc((size_t)(n > 0 ? n : 1) * sizeof **out);
    if (!*out)
        return fail(e, "%s", "out of memory");
    for (long i = 0; i < n; i++) {
        if (!(v[i] >= (double)lo && v[i] <= (double)hi) || v[i] != floor(v[i]))
            return fail(e, "input field '%s' holds an index out of range", name);
        (*out)[i] = (int)v[i];
    }
    return true;
}

/* bufs: 0 base_relatives, 1 inverse_base_absolutes, 2 base_positions, 3 weights,
 * 4 points, 5 theta seeds, 6 us seeds, 7 err_d; ints: 0 parents, 1 correspondences,
 * 2 triangles; u theta, v us */
static bool ht_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    long n, cols, rows;
    double *tmp = NULL;
    const cJSON *data = field(in, "data", e);
    const cJSON *model = data ? field(data, "model", e) : NULL;
    if (!model)
        return false;
    if (!get_vector(in, "theta", &n, &s->u, e))
        return false;
    if (n != HT_NTHETA)
        return fail(e, "%s", "theta does not hold 26 values");
    const cJSON *names = field(model, "bone_names", e);
    if (!names || !cJSON_IsArray(names))
        return fail(e, "%s", "model.bone_names is not an array");
    s->nbones = cJSON_GetArraySize(names);
    if (s->nbones < HT_MIN_BONES || s->nbones > HT_MAX_BONES)
        return fail(e, "%s", "the model's number of bones is out of range");
    bool ok = get_vector(model, "parents", &n, &tmp, e);
    ok = ok && (n == s->nbones || fail(e, "%s", "parents has the wrong size"));
    ok = ok && ints_of(tmp, n, -1, s->nbones - 1, &s->ints[0], "parents", e);
    free(tmp);
    tmp = NULL;
    if (!ok)
        return false;
    const cJSON *mir = field(model, "is_mirrored", e);
    if (!mir || !cJSON_IsBool(mir))
        return fail(e, "%s", "model.is_mirrored is not a boolean");
    s->mirrored = cJSON_IsTrue(mir);
    const char *mats[2] = {"base_relatives", "inverse_base_absolutes"};
    for (int t = 0; t < 2; t++) {
        const cJSON *a = field(model, mats[t], e);
        if (!a || !cJSON_IsArray(a) || cJSON_GetArraySize(a) != s->nbones)
            return fail(e, "model.%s is not an array of 4 x 4 matrices per bone", mats[t]);
        if (!alloc_zero(&s->bufs[t], 16L * s->nbones, e))
            return false;
        int bi = 0;
        const cJSON *mat;
        cJSON_ArrayForEach(mat, a)
        {
            long r4, c4 = 4;
            double *mv;
            if (!read_array(mat, mats[t], 2, &r4, &c4, &mv, e))
                return false;
            if (r4 != 4 || c4 != 4) {
                free(mv);
                return fail(e, "model.%s holds a matrix that is not 4 x 4", mats[t]);
            }
            memcpy(s->bufs[t] + 16 * bi, mv, 16 * sizeof(double));
            free(mv);
            bi++;
        }
    }
    cols = 4;
    if (!get_matrix(model, "base_positions", &rows, &cols, &s->bufs[2], e))
        return false;
    if (rows < 1 || rows > HT_MAX_VERTS)
        return fail(e, "%s", "the model's number of vertices is out of range");
    s->nverts = (int)rows;
    cols = s->nbones;
    if (!get_matrix(model, "weights", &rows, &cols, &s->bufs[3], e) || rows != s->nverts)
        return fail(e, "%s", "weights has the wrong size");
    cols = 3;
    if (!get_matrix(model, "triangles", &rows, &cols, &tmp, e))
        return false;
    s->ntri = (int)rows;
    ok = ints_of(tmp, 3 * rows, 0, s->nverts - 1, &s->ints[2], "triangles", e);
    free(tmp);
    tmp = NULL;
    if (!ok)
        return false;
    cols = 3;
    if (!get_matrix(data, "points", &rows, &cols, &s->bufs[4], e))
        return false;
    s->npts = (int)rows;
    if (!get_vector(data, "correspondences", &n, &tmp, e))
        return false;
    ok = n == s->npts || fail(e, "%s", "correspondences has the wrong size");
    const cJSON *us = field(in, "us", e);
    ok = ok && us && cJSON_IsArray(us);
    s->complicated = ok && cJSON_GetArraySize(us) > 0;
    long hi = s->complicated ? s->ntri - 1 : s->nverts - 1;
    ok = ok && ints_of(tmp, n, 0, hi, &s->ints[1], "correspondences", e);
    free(tmp);
    if (!ok)
        return false;
    if (s->complicated) {
        cols = 2;
        if (!get_matrix(in, "us", &rows, &cols, &s->v, e) || rows != s->npts)
            return fail(e, "%s", "us has the wrong size");
    }
    long nd = HT_NTHETA + (s->complicated ? 2 : 0);
    s->k = nd;
    if (!alloc_zero(&s->res, 3L * s->npts, e) || !alloc_zero(&s->bufs[5], HT_NTHETA * nd, e) ||
        !alloc_zero(&s->bufs[7], 3L * s->npts * nd, e))
        return false;
    /* directions: (u0, u1) first when complicated, as GradBench's columns, then theta */
    long off = s->complicated ? 2 : 0;
    for (long i = 0; i < HT_NTHETA; i++)
        s->bufs[5][i * nd + off + i] = 1.0;
    if (s->complicated) {
        if (!alloc_zero(&s->bufs[6], 2L * s->npts * nd, e))
            return false;
        for (long i = 0; i < s->npts; i++) {
            s->bufs[6][(2 * i) * nd + 0] = 1.0;
            s->bufs[6][(2 * i + 1) * nd + 1] = 1.0;
        }
    }
    return true;
}

static void ht_objective_run(gb_state *s)
{
    if (s->complicated)
        ht_objective_complicated(s->nbones, s->nverts, s->npts, s->ints[0], s->bufs[0], s->bufs[1],
                                 s->bufs[2], s->bufs[3], s->mirrored, s->ints[1], s->ints[2],
                                 s->bufs[4], s->u, s->v, s->res);
    else
        ht_objective(s->nbones, s->nverts, s->npts, s->ints[0], s->bufs[0], s->bufs[1], s->bufs[2],
                     s->bufs[3], s->mirrored, s->ints[1], s->bufs[4], s->u, s->res);
}

static void ht_jacobian_run(gb_state *s)
{
    if (s->complicated)
        ht_objective_complicated_fwdv(s->nbones, s->nverts, s->npts, s->ints[0], s->bufs[0],
                                      s->bufs[1], s->bufs[2], s->bufs[3], s->mirrored, s->ints[1],
                                      s->ints[2], s->bufs[4], s->u, s->bufs[5], s->v, s->bufs[6],
                                      s->res, s->bufs[7], (int)s->k);
    else
        ht_objective_fwdv(s->nbones, s->nverts, s->npts, s->ints[0], s->bufs[0], s->bufs[1],
                          s->bufs[2], s->bufs[3], s->mirrored, s->ints[1], s->bufs[4], s->u,
                          s->bufs[5], s->res, s->bufs[7], (int)s->k);
}

static cJSON *ht_objective_output(const gb_state *s)
{
    return vector_json(s->res, 3L * s->npts);
}

static cJSON *ht_jacobian_output(const gb_state *s)
{
    /* row r (error r) holds its derivatives in the nd directions: err_d[r*nd + k] */
    return matrix_json(s->bufs[7], 3L * s->npts, s->k);
}

/* lstm ------------------------------------------------------------------------------ */

static bool lstm_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    long rows, cols = 0;
    if (!get_matrix(in, "main_params", &rows, &cols, &s->x, e))
        return false;
    if (rows < 2 || rows % 2 || cols < 4 || cols % 4)
        return fail(e, "%s", "main_params is not 2l x 4b");
    s->l = rows / 2;
    s->b = cols / 4;
    if (s->l > LSTM_MAX_L || s->b > LSTM_MAX_B)
        return fail(e, "%s", "lstm sizes out of range");
    cols = s->b;
    if (!get_matrix(in, "extra_params", &rows, &cols, &s->y, e) || rows != 3)
        return fail(e, "%s", "extra_params is not 3 x b");
    cols = s->b;
    if (!get_matrix(in, "state", &rows, &cols, &s->z, e) || rows != 2 * s->l)
        return fail(e, "%s", "state is not 2l x b");
    cols = s->b;
    if (!get_matrix(in, "sequence", &rows, &cols, &s->w, e) || rows < 2 || rows > INT32_MAX)
        return fail(e, "%s", "sequence is not c x b, c >= 2");
    s->c = rows;
    return alloc_zero(&s->res, 8 * s->l * s->b + 3 * s->b, e);
}

static void lstm_objective_run(gb_state *s)
{
    s->out = lstm_objective((int)s->l, (int)s->c, (int)s->b, s->x, s->y, s->z, s->w);
}

static void lstm_jacobian_run(gb_state *s)
{
    long nm = 8 * s->l * s->b;
    memset(s->res, 0, (size_t)(nm + 3 * s->b) * sizeof(double));
    lstm_objective_rev((int)s->l, (int)s->c, (int)s->b, s->x, s->res, s->y, s->res + nm, s->z, s->w,
                       1.0);
}

static cJSON *lstm_jacobian_output(const gb_state *s)
{
    return vector_json(s->res, 8 * s->l * s->b + 3 * s->b);
}

/* saddle and particle: GradBench's gradient descent (cpp/gradbench/gd.hpp) -------------- */

/* An objective and its gradient for the descent, of up to 2 variables. */
typedef struct gb_problem {
    int n;
    double (*f)(const struct gb_problem *pb, const double *x);
    void (*grad)(const struct gb_problem *pb, const double *x, double *g);
    double p[2]; /* parameters */
    double sign; /* -1: maximise */
} gb_problem;

static double vec_norm(const double *v, int n)
{
    double a = 0.0;
    for (int i = 0; i < n; i++)
        a += v[i] * v[i];
    return sqrt(a);
}

/* multivariate_argmin of gd.hpp, the objective and gradient multiplied by pb->sign. */
static void gd_argmin(const gb_problem *pb, const double *start, double *x)
{
    double g[2], xp[2], d[2];
    memcpy(x, start, (size_t)pb->n * sizeof *x);
    double fx = pb->sign * pb->f(pb, x);
    pb->grad(pb, x, g);
    for (int j = 0; j < pb->n; j++)
        g[j] *= pb->sign;
    int i = 0;
    double eta = 1e-5;
    for (;;) {
        if (vec_norm(g, pb->n) <= 1e-5)
            return;
        if (i == 10) {
            eta *= 2;
            i = 0;
            continue;
        }
        for (int j = 0; j < pb->n; j++) {
            xp[j] = x[j] - eta * g[j];
            d[j] = x[j] - xp[j];
        }
        if (vec_norm(d, pb->n) <= 1e-5)
            return;
        double fxp = pb->sign * pb->f(pb, xp);
        if (fxp < fx) {
            memcpy(x, xp, (size_t)pb->n * sizeof *x);
            fx = fxp;
            pb->grad(pb, x, g);
            for (int j = 0; j < pb->n; j++)
                g[j] *= pb->sign;
            i++;
        } else {
            eta /= 2;
            i = 0;
        }
    }
}

static double particle_obj(const gb_problem *pb, const double *x)
{
    (void)pb;
    return particle_euler_f(x[0]);
}

/* the outer derivative of the path (whose inner one is the forward mode) */
static void particle_grad_f(const gb_problem *pb, const double *x, double *g)
{
    (void)pb;
    particle_euler_f_fwd(x[0], 1.0, g);
}

static void particle_grad_r(const gb_problem *pb, const double *x, double *g)
{
    (void)pb;
    g[0] = 0.0;
    particle_euler_f_rev(x[0], g, 1.0);
}

/* the same with the inner gradient from the reverse mode (particle_euler_f_r: forward and
 * reverse over reverse) */
static void particle_grad_fr(const gb_problem *pb, const double *x, double *g)
{
    (void)pb;
    particle_euler_f_r_fwd(x[0], 1.0, g);
}

static void particle_grad_rr(const gb_problem *pb, const double *x, double *g)
{
    (void)pb;
    g[0] = 0.0;
    particle_euler_f_r_rev(x[0], g, 1.0);
}

static bool particle_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    return get_number(in, "w", &s->scalar, e);
}

static void particle_run(gb_state *s, bool outer_reverse, bool inner_reverse)
{
    gb_problem pb = {1,
                     particle_obj,
                     inner_reverse ? (outer_reverse ? particle_grad_rr : particle_grad_fr)
                                   : (outer_reverse ? particle_grad_r : particle_grad_f),
                     {0, 0},
                     1.0};
    gd_argmin(&pb, &s->scalar, &s->out);
}

static void particle_ff_run(gb_state *s)
{
    particle_run(s, false, false);
}

static void particle_fr_run(gb_state *s)
{
    particle_run(s, false, true);
}

static void particle_rf_run(gb_state *s)
{
    particle_run(s, true, false);
}

static void particle_rr_run(gb_state *s)
{
    particle_run(s, true, true);
}

/* saddle: p1 = argmin_p1 max_p2 f(p1, p2) (the max by saddle_max_f, whose gradient comes
 * from the forward mode), then p2 = argmax_p2 f(p1, p2) with the outer mode's gradient */
static double saddle_outer_obj(const gb_problem *pb, const double *x)
{
    return saddle_max_f(x[0], x[1], pb->p[0], pb->p[1]);
}

static void saddle_outer_grad_f(const gb_problem *pb, const double *x, double *g)
{
    saddle_max_f_fwd(x[0], 1.0, x[1], 0.0, pb->p[0], pb->p[1], &g[0]);
    saddle_max_f_fwd(x[0], 0.0, x[1], 1.0, pb->p[0], pb->p[1], &g[1]);
}

static void saddle_outer_grad_r(const gb_problem *pb, const double *x, double *g)
{
    g[0] = g[1] = 0.0;
    saddle_max_f_rev(x[0], &g[0], x[1], &g[1], pb->p[0], pb->p[1], 1.0);
}

/* the outer gradient with the inner one from the reverse mode (saddle_max_f_r) */
static void saddle_outer_grad_fr(const gb_problem *pb, const double *x, double *g)
{
    saddle_max_f_r_fwd(x[0], 1.0, x[1], 0.0, pb->p[0], pb->p[1], &g[0]);
    saddle_max_f_r_fwd(x[0], 0.0, x[1], 1.0, pb->p[0], pb->p[1], &g[1]);
}

static void saddle_outer_grad_rr(const gb_problem *pb, const double *x, double *g)
{
    g[0] = g[1] = 0.0;
    saddle_max_f_r_rev(x[0], &g[0], x[1], &g[1], pb->p[0], pb->p[1], 1.0);
}

static double saddle_inner_obj(const gb_problem *pb, const double *x)
{
    return saddle_f(pb->p[0], pb->p[1], x[0], x[1]);
}

static void saddle_inner_grad_f(const gb_problem *pb, const double *x, double *g)
{
    saddle_f_fwd(pb->p[0], pb->p[1], x[0], 1.0, x[1], 0.0, &g[0]);
    saddle_f_fwd(pb->p[0], pb->p[1], x[0], 0.0, x[1], 1.0, &g[1]);
}

static void saddle_inner_grad_r(const gb_problem *pb, const double *x, double *g)
{
    g[0] = g[1] = 0.0;
    saddle_f_rev(pb->p[0], pb->p[1], x[0], &g[0], x[1], &g[1], 1.0);
}

static bool saddle_prepare(const cJSON *in, gb_state *s, gb_err *e)
{
    long n;
    if (!get_vector(in, "start", &n, &s->x, e))
        return false;
    if (n != 2)
        return fail(e, "%s", "start does not hold 2 values");
    return alloc_zero(&s->res, 4, e);
}

static void saddle_run(gb_state *s, bool outer_reverse, bool inner_reverse)
{
    gb_problem outer = {2,
                        saddle_outer_obj,
                        inner_reverse
                            ? (outer_reverse ? saddle_outer_grad_rr : saddle_outer_grad_fr)
                            : (outer_reverse ? saddle_outer_grad_r : saddle_outer_grad_f),
                        {s->x[0], s->x[1]},
                        1.0};
    gd_argmin(&outer, s->x, s->res);
    gb_problem inner = {2,
                        saddle_inner_obj,
                        outer_reverse ? saddle_inner_grad_r : saddle_inner_grad_f,
                        {s->res[0], s->res[1]},
                        -1.0};
    gd_argmin(&inner, s->x, s->res + 2);
}

static void saddle_ff_run(gb_state *s)
{
    saddle_run(s, false, false);
}

static void saddle_fr_run(gb_state *s)
{
    saddle_run(s, false, true);
}

static void saddle_rf_run(gb_state *s)
{
    saddle_run(s, true, false);
}

static void saddle_rr_run(gb_state *s)
{
    saddle_run(s, true, true);
}

static cJSON *saddle_output(const gb_state *s)
{
    return vector_json(s->res, 4);
}

/* ------------------------------------------------------------------------------------ */
/* The tape variant (chainrules-c-tape): the same objectives recorded on the tape and     */
/* swept (tools/gradbench/tape.cpp). Inputs and outputs as in the runs above.              */

static void hello_double_tape(gb_state *s)
{
    s->status = gbt_hello(s->scalar, &s->out);
}

static void lse_gradient_tape(gb_state *s)
{
    s->status = gbt_lse(s->x, s->n, s->res);
}

static void llsq_gradient_tape(gb_state *s)
{
    s->status = gbt_llsq(s->x, s->m, s->n, s->res);
}

static void ode_gradient_tape(gb_state *s)
{
    s->status = gbt_ode((int)s->n, s->x, (int)s->s, s->res);
}

static void det_gradient_tape(gb_state *s)
{
    s->status = gbt_det(s->x, s->ell, s->ibuf[0], s->ibuf[1], s->res);
}

/* J / diag(H): the gradient and H 1 (H is diagonal) from one Hessian-vector product */
static void kmeans_dir_tape(gb_state *s)
{
    long kd = s->k * s->d;
    s->status = gbt_kmeans((int)s->n, (int)s->k, (int)s->d, s->x, s->y, s->res2, s->res3);
    for (long i = 0; i < kd && !s->status; i++)
        s->res[i] = s->res2[i] / s->res3[i];
}

static void gmm_jacobian_tape(gb_state *s)
{
    s->status = gbt_gmm((int)s->d, (int)s->k, (int)s->n, s->u, s->v, s->w, s->z, s->x, s->gamma,
                        (int)s->m, s->res, s->res2, s->res3, s->res4);
}

static void ba_jacobian_tape(gb_state *s)
{
    for (long i = 0; i < s->p && !s->status; i++) {
        long cam = i % s->n, pt = i % s->m;
        s->status = gbt_ba_block(s->x + BA_NCAMPARAMS * cam, s->y + 3 * pt, s->w + i, s->z + 2 * i,
                                 s->res3 + 2 * BA_NCOLS * i, s->res4 + i);
    }
}

static void ht_jacobian_tape(gb_state *s)
{
    s->status =
        gbt_ht(s->nbones, s->nverts, s->npts, s->ints[0], s->bufs[0], s->bufs[1], s->bufs[2],
               s->bufs[3], s->mirrored, s->ints[1], s->complicated ? s->ints[2] : NULL, s->bufs[4],
               s->u, s->complicated ? s->v : NULL, s->bufs[7]);
}

static void lstm_jacobian_tape(gb_state *s)
{
    long nm = 8 * s->l * s->b;
    s->status =
        gbt_lstm((int)s->l, (int)s->c, (int)s->b, s->x, s->y, s->z, s->w, s->res, s->res + nm);
}

/* particle and saddle: the outer derivative on the tape (the inner one is chainrules-ad's
 * forward mode, recorded with the outer function). A failure stops the descent (a zero
 * gradient) and is reported after it. */
static int g_gd_status;

static void gd_tape_grad(int rc, double *g, int n)
{
    if (rc && !g_gd_status)
        g_gd_status = rc;
    if (g_gd_status)
        for (int j = 0; j < n; j++)
            g[j] = 0.0;
}

/* the outer mode (the tape's sweep) and the inner one (chainrules-ad's mode, recorded),
 * in pb->p: 1 reverse, 0 forward */
static void particle_grad_t(const gb_problem *pb, const double *x, double *g)
{
    gd_tape_grad(gbt_particle(pb->p[0] != 0, pb->p[1] != 0, x[0], g), g, 1);
}

static void particle_run_tape(gb_state *s, bool outer_reverse, bool inner_reverse)
{
    g_gd_status = 0;
    gb_problem pb = {1, particle_obj, particle_grad_t, {outer_reverse, inner_reverse}, 1.0};
    gd_argmin(&pb, &s->scalar, &s->out);
    s->status = g_gd_status;
}

static void particle_ff_tape(gb_state *s)
{
    particle_run_tape(s, false, false);
}

static void particle_fr_tape(gb_state *s)
{
    particle_run_tape(s, false, true);
}

static void particle_rf_tape(gb_state *s)
{
    particle_run_tape(s, true, false);
}

static void particle_rr_tape(gb_state *s)
{
    particle_run_tape(s, true, true);
}

/* the inner mode of the saddle's outer gradient (set by saddle_run_tape) */
static bool g_saddle_inner_reverse;

static void saddle_outer_grad_tf(const gb_problem *pb, const double *x, double *g)
{
    gd_tape_grad(gbt_saddle_outer(0, g_saddle_inner_reverse, x, pb->p, g), g, 2);
}

static void saddle_outer_grad_tr(const gb_problem *pb, const double *x, double *g)
{
    gd_tape_grad(gbt_saddle_outer(1, g_saddle_inner_reverse, x, pb->p, g), g, 2);
}

static void saddle_inner_grad_tf(const gb_problem *pb, const double *x, double *g)
{
    gd_tape_grad(gbt_saddle_inner(0, pb->p, x, g), g, 2);
}

static void saddle_inner_grad_tr(const gb_problem *pb, const double *x, double *g)
{
    gd_tape_grad(gbt_saddle_inner(1, pb->p, x, g), g, 2);
}

static void saddle_run_tape(gb_state *s, bool outer_reverse, bool inner_reverse)
{
    g_gd_status = 0;
    g_saddle_inner_reverse = inner_reverse;
    gb_problem outer = {2,
                        saddle_outer_obj,
                        outer_reverse ? saddle_outer_grad_tr : saddle_outer_grad_tf,
                        {s->x[0], s->x[1]},
                        1.0};
    gd_argmin(&outer, s->x, s->res);
    gb_problem inner = {2,
                        saddle_inner_obj,
                        outer_reverse ? saddle_inner_grad_tr : saddle_inner_grad_tf,
                        {s->res[0], s->res[1]},
                        -1.0};
    gd_argmin(&inner, s->x, s->res + 2);
    s->status = g_gd_status;
}

static void saddle_ff_tape(gb_state *s)
{
    saddle_run_tape(s, false, false);
}

static void saddle_fr_tape(gb_state *s)
{
    saddle_run_tape(s, false, true);
}

static void saddle_rf_tape(gb_state *s)
{
    saddle_run_tape(s, true, false);
}

static void saddle_rr_tape(gb_state *s)
{
    saddle_run_tape(s, true, true);
}

/* ------------------------------------------------------------------------------------ */

static const gb_fn g_fns[] = {
    {"hello", "square", hello_prepare, hello_square_run, out_scalar, NULL},
    {"hello", "double", hello_prepare, hello_double_run, out_scalar, hello_double_tape},
    {"lse", "primal", lse_prepare, lse_primal_run, out_scalar, NULL},
    {"lse", "gradient", lse_prepare, lse_gradient_run, out_res_n, lse_gradient_tape},
    {"llsq", "primal", llsq_prepare, llsq_primal_run, out_scalar, NULL},
    {"llsq", "gradient", llsq_prepare, llsq_gradient_run, out_res_m, llsq_gradient_tape},
    {"ode", "primal", ode_prepare, ode_primal_run, out_res_n, NULL},
    {"ode", "gradient", ode_prepare, ode_gradient_run, out_res_n, ode_gradient_tape},
    {"det", "primal", det_prepare, det_primal_run, out_scalar, NULL},
    {"det", "gradient", det_prepare, det_gradient_run, out_res_n, det_gradient_tape},
    {"kmeans", "cost", kmeans_prepare, kmeans_cost_run, out_scalar, NULL},
    {"kmeans", "dir", kmeans_prepare, kmeans_dir_run, kmeans_dir_output, kmeans_dir_tape},
    {"gmm", "objective", gmm_prepare, gmm_objective_run, out_scalar, NULL},
    {"gmm", "jacobian", gmm_prepare, gmm_jacobian_run, gmm_jacobian_output, gmm_jacobian_tape},
    {"ba", "objective", ba_prepare, ba_objective_run, ba_objective_output, NULL},
    {"ba", "jacobian", ba_prepare, ba_jacobian_run, ba_jacobian_output, ba_jacobian_tape},
    {"ht", "objective", ht_prepare, ht_objective_run, ht_objective_output, NULL},
    {"ht", "jacobian", ht_prepare, ht_jacobian_run, ht_jacobian_output, ht_jacobian_tape},
    {"lstm", "objective", lstm_prepare, lstm_objective_run, out_scalar, NULL},
    {"lstm", "jacobian", lstm_prepare, lstm_jacobian_run, lstm_jacobian_output, lstm_jacobian_tape},
    {"particle", "ff", particle_prepare, particle_ff_run, out_scalar, particle_ff_tape},
    {"particle", "rf", particle_prepare, particle_rf_run, out_scalar, particle_rf_tape},
    {"particle", "fr", particle_prepare, particle_fr_run, out_scalar, particle_fr_tape},
    {"particle", "rr", particle_prepare, particle_rr_run, out_scalar, particle_rr_tape},
    {"saddle", "ff", saddle_prepare, saddle_ff_run, saddle_output, saddle_ff_tape},
    {"saddle", "rf", saddle_prepare, saddle_rf_run, saddle_output, saddle_rf_tape},
    {"saddle", "fr", saddle_prepare, saddle_fr_run, saddle_output, saddle_fr_tape},
    {"saddle", "rr", saddle_prepare, saddle_rr_run, saddle_output, saddle_rr_tape},
};
#define GB_NFNS (sizeof g_fns / sizeof g_fns[0])

static bool module_known(const char *m)
{
    for (size_t i = 0; i < GB_NFNS; i++)
        if (strcmp(g_fns[i].module, m) == 0)
            return true;
    return false;
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static bool add_timing(cJSON *timings, const char *name, int64_t ns)
{
    cJSON *t = cJSON_CreateObject();
    if (!t || !cJSON_AddStringToObject(t, "name", name) ||
        !cJSON_AddNumberToObject(t, "nanoseconds", (double)ns) ||
        !cJSON_AddItemToArray(timings, t)) {
        cJSON_Delete(t);
        return false;
    }
    return true;
}

/* Evaluates the message's function: the input converted ("prepare" timing), the
 * function run at least min_runs times and until min_seconds have accumulated (one
 * "evaluate" timing per run), the last run's result converted. */
static void evaluate(const cJSON *msg, cJSON *resp)
{
    gb_err e = {{0}};
    const cJSON *mod = cJSON_GetObjectItemCaseSensitive(msg, "module");
    const cJSON *fun = cJSON_GetObjectItemCaseSensitive(msg, "function");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(msg, "input");
    const gb_fn *f = NULL;
    if (cJSON_IsString(mod) && cJSON_IsString(fun))
        for (size_t i = 0; i < GB_NFNS; i++)
            if (!strcmp(g_fns[i].module, mod->valuestring) &&
                !strcmp(g_fns[i].function, fun->valuestring))
                f = &g_fns[i];
    void (*run)(gb_state *) = !f ? NULL : g_tape && f->run_tape ? f->run_tape : f->run;
    if (!run || !in) {
        cJSON_AddBoolToObject(resp, "success", false);
        const char *why = !in ? "no input" : "unknown module or function";
        if (f && !run)
            why = "not implemented in this variant";
        cJSON_AddStringToObject(resp, "error", why);
        return;
    }
    double min_runs = 1, min_seconds = 0;
    if (cJSON_IsObject(in)) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(in, "min_runs");
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(in, "min_seconds");
        if (cJSON_IsNumber(r) && r->valuedouble >= 1)
            min_runs = r->valuedouble;
        if (cJSON_IsNumber(sec) && sec->valuedouble >= 0)
            min_seconds = sec->valuedouble;
    }
    gb_state s;
    memset(&s, 0, sizeof s);
    cJSON *timings = cJSON_CreateArray();
    int64_t t0 = now_ns();
    bool ok = timings && f->prepare(in, &s, &e);
    int64_t t1 = now_ns();
    if (ok) {
        add_timing(timings, "prepare", t1 - t0);
        double elapsed = 0;
        for (double runs = 0; runs < min_runs || elapsed < min_seconds; runs++) {
            int64_t a = now_ns();
            run(&s);
            int64_t b = now_ns();
            if (s.status) {
                ok = fail(&e, "%s", gbt_errmsg());
                break;
            }
            elapsed += (double)(b - a) * 1e-9;
            if (!add_timing(timings, "evaluate", b - a)) {
                ok = fail(&e, "%s", "out of memory");
                break;
            }
        }
    }
    cJSON *out = ok ? f->output(&s) : NULL;
    if (ok && !out)
        ok = fail(&e, "%s", "out of memory writing the output");
    state_free(&s);
    cJSON_AddBoolToObject(resp, "success", ok);
    if (ok) {
        cJSON_AddItemToObject(resp, "output", out);
        cJSON_AddItemToObject(resp, "timings", timings);
    } else {
        cJSON_Delete(timings);
        cJSON_AddStringToObject(resp, "error", e.msg);
    }
}

int main(int argc, char **argv)
{
    const char *name = argc > 0 && argv[0] ? argv[0] : "";
    size_t nlen = strlen(name);
    g_tape = nlen >= 5 && !strcmp(name + nlen - 5, "-tape");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tape")) {
            g_tape = true;
        } else {
            fprintf(stderr, "usage: chainrules-gradbench [--tape]\n");
            return 2;
        }
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        if (len == 0 || line[0] == '\n')
            continue;
        cJSON *msg = cJSON_Parse(line);
        const cJSON *id = msg ? cJSON_GetObjectItemCaseSensitive(msg, "id") : NULL;
        const cJSON *kind = msg ? cJSON_GetObjectItemCaseSensitive(msg, "kind") : NULL;
        if (!cJSON_IsNumber(id) || !cJSON_IsString(kind)) {
            fprintf(stderr, "chainrules-gradbench: a message without an id or a kind\n");
            cJSON_Delete(msg);
            free(line);
            return 1;
        }
        cJSON *resp = cJSON_CreateObject();
        if (!resp) {
            cJSON_Delete(msg);
            free(line);
            return 1;
        }
        cJSON_AddNumberToObject(resp, "id", id->valuedouble);
        const char *k = kind->valuestring;
        if (!strcmp(k, "start")) {
            cJSON_AddStringToObject(resp, "tool", g_tape ? "chainrules-c-tape" : "chainrules-c");
        } else if (!strcmp(k, "define")) {
            const cJSON *mod = cJSON_GetObjectItemCaseSensitive(msg, "module");
            bool known = cJSON_IsString(mod) && module_known(mod->valuestring);
            cJSON_AddBoolToObject(resp, "success", known);
            if (!known)
                cJSON_AddStringToObject(resp, "error", "module not implemented");
        } else if (!strcmp(k, "evaluate")) {
            evaluate(msg, resp);
        }
        bool end = !strcmp(k, "end");
        char *text = cJSON_PrintUnformatted(resp);
        cJSON_Delete(resp);
        cJSON_Delete(msg);
        if (!text) {
            free(line);
            return 1;
        }
        fputs(text, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        cJSON_free(text);
        if (end)
            break;
    }
    free(line);
    gbt_shutdown();
    return 0;
}
