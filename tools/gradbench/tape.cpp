/*
 * The chainrules-c-tape variant of chainrules-gradbench (docs/gradbench.md, "The tape
 * variant").
 *
 * The objectives are not written again: the plain C files of bench/objectives are included
 * here, in the namespace gbt, with `double` defined as gbt::treal, a variable of the
 * library's reverse tape (cr_var) whose arithmetic, comparisons and <math.h> functions are
 * the tape's operations (cr_add(), cr_tape_cmp(), cr_exp(), ...). C++ is used only for
 * that: operator overloading lets the same source text record on the tape. Every
 * derivative below is a sweep of the tape (cr_tape_gradient(), cr_tape_jvp(),
 * cr_tape_hvp(), cr_prepared_value_and_gradient()); nothing here differentiates by hand.
 *
 * particle and saddle nest two derivatives: the outer function (the particle's path, the
 * inner argmax) calls an inner gradient, which is chainrules-ad's forward mode of the inner
 * function (plain C, included here with the rest, so recorded on the tape like the
 * objectives); the tape gives the outer derivative, by a forward sweep (ff) or a reverse
 * sweep (rf). For fr and rr the same outer files are included again with the inner
 * gradient taken from chainrules-ad's reverse mode (below).
 *
 * Where a recording would be too large to keep (gmm and kmeans at GradBench's larger
 * sizes), the objective is recorded over blocks of points: both are sums over the points
 * (gmm plus terms that do not depend on the points, removed exactly by
 * E(n) = sum_b E(n_b) - (B - 1) E(0)), so the gradient is the sum of the blocks' gradients.
 */
#include <math.h>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>

#include "gb_tape.h"
#include "objectives.h"
#include "objectives_ad.h"

namespace gbt {

/* The tape the objectives record on (set before each recording). */
static cr_tape *g_t;

/* A scalar of the objectives: a tape variable, or a constant (cr_const()). */
struct treal {
    cr_var v;
    treal() : v(cr_const(0.0))
    {
    }
    /* implicit: literals and passive values become constants */
    treal(double c) : v(cr_const(c))
    {
    }
    explicit treal(cr_var x) : v(x)
    {
    }
};
static_assert(sizeof(treal) == sizeof(cr_var), "treal is a cr_var");

static inline treal operator+(treal a, treal b)
{
    return treal(cr_add(g_t, a.v, b.v));
}
static inline treal operator-(treal a, treal b)
{
    return treal(cr_sub(g_t, a.v, b.v));
}
static inline treal operator*(treal a, treal b)
{
    return treal(cr_mul(g_t, a.v, b.v));
}
static inline treal operator/(treal a, treal b)
{
    return treal(cr_div(g_t, a.v, b.v));
}
static inline treal operator-(treal a)
{
    return treal(cr_neg(g_t, a.v));
}
static inline treal operator+(treal a)
{
    return a;
}
static inline treal &operator+=(treal &a, treal b)
{
    return a = a + b;
}
static inline treal &operator-=(treal &a, treal b)
{
    return a = a - b;
}
static inline treal &operator*=(treal &a, treal b)
{
    return a = a * b;
}
static inline treal &operator/=(treal &a, treal b)
{
    return a = a / b;
}

/* Comparisons of variables are recorded (cr_tape_cmp()), so that a replay at other
 * inputs checks that it takes the same branches. */
static inline bool cmp(treal a, cr_cmp op, treal b)
{
    if (a.v.idx == CR_VAR_CONST && b.v.idx == CR_VAR_CONST) {
        switch (op) {
        case CR_CMP_LT:
            return a.v.v < b.v.v;
        case CR_CMP_LE:
            return a.v.v <= b.v.v;
        case CR_CMP_GT:
            return a.v.v > b.v.v;
        case CR_CMP_GE:
            return a.v.v >= b.v.v;
        case CR_CMP_EQ:
            return a.v.v == b.v.v;
        default:
            return a.v.v != b.v.v;
        }
    }
    return cr_tape_cmp(g_t, a.v, op, b.v);
}
static inline bool operator<(treal a, treal b)
{
    return cmp(a, CR_CMP_LT, b);
}
static inline bool operator<=(treal a, treal b)
{
    return cmp(a, CR_CMP_LE, b);
}
static inline bool operator>(treal a, treal b)
{
    return cmp(a, CR_CMP_GT, b);
}
static inline bool operator>=(treal a, treal b)
{
    return cmp(a, CR_CMP_GE, b);
}
static inline bool operator==(treal a, treal b)
{
    return cmp(a, CR_CMP_EQ, b);
}
static inline bool operator!=(treal a, treal b)
{
    return cmp(a, CR_CMP_NE, b);
}

/* The <math.h> functions the objectives call. */
static inline treal exp(treal a)
{
    return treal(cr_exp(g_t, a.v));
}
static inline treal log(treal a)
{
    return treal(cr_log(g_t, a.v));
}
static inline treal sqrt(treal a)
{
    return treal(cr_sqrt(g_t, a.v));
}
static inline treal sin(treal a)
{
    return treal(cr_sin(g_t, a.v));
}
static inline treal cos(treal a)
{
    return treal(cr_cos(g_t, a.v));
}
static inline treal tanh(treal a)
{
    return treal(cr_tanh(g_t, a.v));
}
static inline treal lgamma(treal a)
{
    return treal(cr_lgamma(g_t, a.v));
}
/* floor's derivative is zero: its value, a constant (lse's shift) */
static inline treal floor(treal a)
{
    return treal(::floor(a.v.v));
}

/* The objectives, with `double` a tape scalar. Their headers (math.h, objectives.h) are
 * already included above, with the real double, and are not read again. */
#define double treal
#include "ba.c"
#include "det.c"
#include "gmm.c"
#include "hello.c"
#include "ht.c"
#include "kmeans.c"
#include "llsq.c"
#include "lse.c"
#include "lstm.c"
#include "ode.c"
/* particle and saddle: the outer functions of bench/objectives/nested, each file the
 * primal, chainrules-ad's derivatives of it (the inner gradient: its forward mode, plain C
 * with the rule rows inline) and the outer function that calls them, as concatenated for
 * the chainrules-c variant. The outer derivative is the tape's. */
#include "particle_euler_nested.c"
#include "saddle_max_nested.c"
#undef double

/* fr and rr: the same outer functions with the inner gradient from chainrules-ad's reverse
 * mode instead (straight-line code: its value stack holds nothing, so it records on the
 * tape as it is). The outer files call the inner forward mode f_fwd(..., x, dx, y, dy,
 * &out) for the derivative along (dx, dy); here that call is the dot product of the
 * reverse mode's gradient with (dx, dy), and the outer functions are renamed _r. */
#define double treal
static double particle_accel_dir_rev(double cx0, double cy0, double cx1, double cy1, double x,
                                     double dx, double y, double dy, double *out)
{
    double bx = 0.0, by = 0.0;
    double v = particle_accel_rev(cx0, cy0, cx1, cy1, x, &bx, y, &by, 1.0);
    out[0] = bx * dx + by * dy;
    return v;
}
static double saddle_f_dir_rev(double p1x, double p1y, double x0, double d0, double x1, double d1,
                               double *out)
{
    double b0 = 0.0, b1 = 0.0;
    double v = saddle_f_rev(p1x, p1y, x0, &b0, x1, &b1, 1.0);
    out[0] = b0 * d0 + b1 * d1;
    return v;
}
#define particle_accel_fwd particle_accel_dir_rev
#define particle_euler_f   particle_euler_f_r
#define saddle_f_fwd       saddle_f_dir_rev
#define saddle_max_f       saddle_max_f_r
#include "nested/particle_euler.c"
#include "nested/saddle_max.c"
#undef particle_accel_fwd
#undef particle_euler_f
#undef saddle_f_fwd
#undef saddle_max_f
#undef double

} // namespace gbt

using gbt::treal;

/* ---------------------------------------------------------------------------------- */
/* Tapes, errors and buffers                                                            */

static cr_ctx *g_ctx;
static cr_tape *g_tapes[3];  /* first order, forward, second order */
static cr_prepared *g_ba[3]; /* ba's rows 0 and 1, the weight error */
static char g_msg[512];

static int failed(cr_status st, const char *what, const char *detail)
{
    snprintf(g_msg, sizeof g_msg, "%s: %s%s%s", what, cr_status_name(st), detail ? ": " : "",
             detail ? detail : "");
    return st != CR_OK ? (int)st : (int)CR_ENOMEM;
}

extern "C" const char *gbt_errmsg(void)
{
    return g_msg;
}

extern "C" void gbt_shutdown(void)
{
    for (cr_prepared *&p : g_ba) {
        cr_prepared_free(p);
        p = nullptr;
    }
    for (cr_tape *&t : g_tapes) {
        cr_tape_free(t);
        t = nullptr;
    }
    cr_ctx_free(g_ctx);
    g_ctx = nullptr;
}

/* The tape of the given kind (0 first order, 1 forward, 2 second order), reset and made
 * the one the objectives record on. */
static int tape(int kind, cr_tape **out)
{
    static const uint32_t flags[3] = {0u, CR_TAPE_FORWARD, CR_TAPE_SECOND_ORDER};
    cr_status st;
    if (!g_ctx && (st = cr_ctx_new(nullptr, &g_ctx)) != CR_OK)
        return failed(st, "creating the context", nullptr);
    if (!g_tapes[kind]) {
        cr_tape_params p = {};
        p.struct_size = sizeof p;
        p.flags = flags[kind];
        if ((st = cr_tape_new(g_ctx, &p, &g_tapes[kind])) != CR_OK)
            return failed(st, "creating the tape", cr_ctx_errmsg(g_ctx));
    }
    cr_tape_reset(g_tapes[kind]);
    gbt::g_t = g_tapes[kind];
    *out = g_tapes[kind];
    return 0;
}

/* An array of tape scalars, released at the end of the scope. */
struct tbuf {
    treal *p = nullptr;
    explicit tbuf(size_t n) : p(new (std::nothrow) treal[n > 0 ? n : 1])
    {
    }
    tbuf(const tbuf &) = delete;
    tbuf &operator=(const tbuf &) = delete;
    ~tbuf()
    {
        delete[] p;
    }
    cr_var *vars()
    {
        return reinterpret_cast<cr_var *>(p);
    }
};

/* n new input variables with values x, into b at offset off. */
static int inputs(cr_tape *t, tbuf &b, size_t off, const double *x, size_t n)
{
    cr_status st = cr_tape_inputs(t, x, n, b.vars() + off);
    return st == CR_OK ? 0 : failed(st, "inputs", cr_tape_errmsg(t));
}

/* The constants x (passive data of an objective). */
static void consts(treal *b, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = treal(x[i]);
}

static int recorded(cr_tape *t)
{
    cr_status st = cr_tape_status(t);
    return st == CR_OK ? 0 : failed(st, "recording", cr_tape_errmsg(t));
}

static int swept(cr_tape *t, cr_status st)
{
    return st == CR_OK ? 0 : failed(st, "sweep", cr_tape_errmsg(t));
}

#define GBT_NOMEM(b) ((b).p == nullptr)
#define GBT_TRY(e)          \
    do {                    \
        int gbt_rc_ = (e);  \
        if (gbt_rc_)        \
            return gbt_rc_; \
    } while (0)

/* One output, gradient with respect to the n inputs x (in the tape's order). */
static int gradient(cr_tape *t, treal y, tbuf &x, size_t n, double *g)
{
    GBT_TRY(recorded(t));
    return swept(t, cr_tape_gradient(t, y.v, x.vars(), n, g));
}

/* ---------------------------------------------------------------------------------- */
/* The evals                                                                            */

extern "C" int gbt_hello(double x, double *g)
{
    cr_tape *t;
    GBT_TRY(tape(0, &t));
    tbuf xs(1);
    if (GBT_NOMEM(xs))
        return failed(CR_ENOMEM, "hello", nullptr);
    GBT_TRY(inputs(t, xs, 0, &x, 1));
    treal y = gbt::hello_square(xs.p[0]);
    return gradient(t, y, xs, 1, g);
}

extern "C" int gbt_lse(const double *x, long n, double *g)
{
    cr_tape *t;
    GBT_TRY(tape(0, &t));
    tbuf xs((size_t)n);
    if (GBT_NOMEM(xs))
        return failed(CR_ENOMEM, "lse", nullptr);
    GBT_TRY(inputs(t, xs, 0, x, (size_t)n));
    treal y = gbt::lse_objective(xs.p, n);
    return gradient(t, y, xs, (size_t)n, g);
}

extern "C" int gbt_llsq(const double *x, long m, long n, double *g)
{
    cr_tape *t;
    GBT_TRY(tape(0, &t));
    tbuf xs((size_t)m);
    if (GBT_NOMEM(xs))
        return failed(CR_ENOMEM, "llsq", nullptr);
    GBT_TRY(inputs(t, xs, 0, x, (size_t)m));
    treal y = gbt::llsq_objective(xs.p, m, n);
    return gradient(t, y, xs, (size_t)m, g);
}

extern "C" int gbt_ode(int n, const double *x, int s, double *g)
{
    cr_tape *t;
    GBT_TRY(tape(0, &t));
    tbuf xs((size_t)n), yf((size_t)n);
    if (GBT_NOMEM(xs) || GBT_NOMEM(yf))
        return failed(CR_ENOMEM, "ode", nullptr);
    GBT_TRY(inputs(t, xs, 0, x, (size_t)n));
    gbt::ode_primal(n, xs.p, s, yf.p);
    return gradient(t, yf.p[n - 1], xs, (size_t)n, g);
}

extern "C" int gbt_det(const double *a, long ell, long *r, long *c, double *g)
{
    cr_tape *t;
    GBT_TRY(tape(0, &t));
    size_t n = (size_t)(ell * ell);
    tbuf xs(n);
    if (GBT_NOMEM(xs))
        return failed(CR_ENOMEM, "det", nullptr);
    GBT_TRY(inputs(t, xs, 0, a, n));
    treal y = gbt::det_objective(xs.p, ell, r, c);
    return gradient(t, y, xs, n, g);
}

/* Records of a block of points at most about this many (gmm, kmeans). */
#define GBT_BLOCK_RECORDS 2000000L

extern "C" int gbt_kmeans(int n, int k, int d, const double *points, const double *centroids,
                          double *J, double *hd)
{
    size_t kd = (size_t)k * (size_t)d;
    long per_point = 3L * k * d;
    int block = (int)(GBT_BLOCK_RECORDS / per_point > 0 ? GBT_BLOCK_RECORDS / per_point : 1);
    if (block > n)
        block = n;
    tbuf cs(kd), pts((size_t)block * (size_t)d);
    double *ones = (double *)malloc(3 * kd * sizeof(double));
    if (GBT_NOMEM(cs) || GBT_NOMEM(pts) || !ones) {
        free(ones);
        return failed(CR_ENOMEM, "kmeans", nullptr);
    }
    double *hv = ones + kd, *gr = ones + 2 * kd;
    for (size_t i = 0; i < kd; i++) {
        ones[i] = 1.0;
        J[i] = hd[i] = 0.0;
    }
    int rc = 0;
    for (int i0 = 0; i0 < n && !rc; i0 += block) {
        int nb = n - i0 < block ? n - i0 : block;
        cr_tape *t;
        if ((rc = tape(2, &t)) || (rc = inputs(t, cs, 0, centroids, kd)))
            break;
        consts(pts.p, points + (size_t)i0 * (size_t)d, (size_t)nb * (size_t)d);
        treal y = gbt::kmeans_cost(nb, k, d, pts.p, cs.p);
        if ((rc = recorded(t)) || (rc = swept(t, cr_tape_hvp(t, y.v, cs.vars(), kd, ones, hv, gr))))
            break;
        for (size_t i = 0; i < kd; i++) {
            J[i] += gr[i];
            hd[i] += hv[i];
        }
    }
    free(ones);
    return rc;
}

extern "C" int gbt_gmm(int d, int k, int n, const double *alphas, const double *means,
                       const double *q, const double *l, const double *x, double gamma, int m,
                       double *ga, double *gmeans, double *gq, double *gl)
{
    size_t kd = (size_t)k * (size_t)d, lsz = (size_t)d * (size_t)(d - 1) / 2;
    size_t nin = (size_t)k + 2 * kd + (size_t)k * lsz;
    long per_point = (long)k * (long)(4 * d + 2 * (long)lsz + 8);
    int block = (int)(GBT_BLOCK_RECORDS / per_point > 0 ? GBT_BLOCK_RECORDS / per_point : 1);
    if (block > n)
        block = n;
    tbuf xs(nin), pts((size_t)block * (size_t)d);
    double *g = (double *)calloc(2 * nin, sizeof(double));
    if (GBT_NOMEM(xs) || GBT_NOMEM(pts) || !g) {
        free(g);
        return failed(CR_ENOMEM, "gmm", nullptr);
    }
    double *gb = g + nin;
    const double *parts[4] = {alphas, means, q, l};
    size_t sizes[4] = {(size_t)k, kd, kd, (size_t)k * lsz};
    int rc = 0;
    /* E(n) = sum over blocks E(block) - (blocks - 1) E(0): the last pass is E(0), weighted
     * 1 - blocks */
    int nblocks = (n + block - 1) / block;
    for (int b = 0; b <= nblocks && !rc; b++) {
        cr_tape *t;
        if ((rc = tape(0, &t)))
            break;
        size_t off = 0;
        for (int p = 0; p < 4 && !rc; p++) {
            rc = sizes[p] ? inputs(t, xs, off, parts[p], sizes[p]) : 0;
            off += sizes[p];
        }
        if (rc)
            break;
        int i0 = b * block, nb = b < nblocks ? (n - i0 < block ? n - i0 : block) : 0;
        consts(pts.p, x + (size_t)i0 * (size_t)d, (size_t)nb * (size_t)d);
        treal y = gbt::gmm_objective(d, k, nb, xs.p, xs.p + k, xs.p + k + kd, xs.p + k + 2 * kd,
                                     pts.p, gamma, m);
        if ((rc = gradient(t, y, xs, nin, gb)))
            break;
        double w = b < nblocks ? 1.0 : 1.0 - nblocks;
        for (size_t i = 0; i < nin; i++)
            g[i] += w * gb[i];
    }
    if (!rc) {
        memcpy(ga, g, sizes[0] * sizeof(double));
        memcpy(gmeans, g + k, kd * sizeof(double));
        memcpy(gq, g + k + kd, kd * sizeof(double));
        if (lsz)
            memcpy(gl, g + k + 2 * kd, sizes[3] * sizeof(double));
    }
    free(g);
    return rc;
}

extern "C" int gbt_lstm(int l, int c, int b, const double *main_params, const double *extra_params,
                        const double *state, const double *sequence, double *gmain, double *gextra)
{
    size_t nm = 8 * (size_t)l * (size_t)b, ne = 3 * (size_t)b;
    cr_tape *t;
    GBT_TRY(tape(0, &t));
    tbuf xs(nm + ne), st(2 * (size_t)l * (size_t)b), seq((size_t)c * (size_t)b);
    double *g = (double *)malloc((nm + ne) * sizeof(double));
    if (GBT_NOMEM(xs) || GBT_NOMEM(st) || GBT_NOMEM(seq) || !g) {
        free(g);
        return failed(CR_ENOMEM, "lstm", nullptr);
    }
    int rc = inputs(t, xs, 0, main_params, nm);
    if (!rc)
        rc = inputs(t, xs, nm, extra_params, ne);
    if (!rc) {
        consts(st.p, state, 2 * (size_t)l * (size_t)b);
        consts(seq.p, sequence, (size_t)c * (size_t)b);
        treal y = gbt::lstm_objective(l, c, b, xs.p, xs.p + nm, st.p, seq.p);
        rc = gradient(t, y, xs, nm + ne, g);
    }
    if (!rc) {
        memcpy(gmain, g, nm * sizeof(double));
        memcpy(gextra, g + nm, ne * sizeof(double));
    }
    free(g);
    return rc;
}

/* ba: one block's inputs are cam (11), X (3), w (1) and feat (2, passive but inputs of the
 * recording so that it serves every observation). env: the row (0, 1), or 2 for the
 * weight error. */
static cr_status ba_fn(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    int row = *(const int *)env;
    gbt::g_t = t;
    const treal *xs = reinterpret_cast<const treal *>(x);
    treal err[2];
    if (row < 2) {
        gbt::ba_project(xs, xs + 11, xs + 14, xs + 15, err);
        y[0] = err[row].v;
    } else {
        gbt::ba_weight_error(xs, err);
        y[0] = err[0].v;
    }
    return cr_tape_status(t);
}

static int ba_prepare_one(int which, const double *x, size_t n)
{
    static const int rows[3] = {0, 1, 2};
    cr_status st;
    if (!g_ctx && (st = cr_ctx_new(nullptr, &g_ctx)) != CR_OK)
        return failed(st, "creating the context", nullptr);
    cr_prepared_free(g_ba[which]);
    g_ba[which] = nullptr;
    st = cr_prepare_gradient(g_ctx, nullptr, ba_fn, (void *)&rows[which], x, n, &g_ba[which]);
    return st == CR_OK ? 0 : failed(st, "preparing ba", cr_ctx_errmsg(g_ctx));
}

static void ba_pack(const double *cam, const double *X, const double *w, const double *feat,
                    double *x)
{
    memcpy(x, cam, 11 * sizeof(double));
    memcpy(x + 11, X, 3 * sizeof(double));
    x[14] = *w;
    x[15] = feat[0];
    x[16] = feat[1];
}

extern "C" int gbt_ba_prepare(const double *cam, const double *X, const double *w,
                              const double *feat)
{
    double x[17];
    ba_pack(cam, X, w, feat, x);
    for (int r = 0; r < 2; r++)
        GBT_TRY(ba_prepare_one(r, x, 17));
    return ba_prepare_one(2, w, 1);
}

/* Replays prepared gradient `which` at x; prepares it again when x takes other branches. */
static int ba_replay(int which, const double *x, size_t n, double *g)
{
    double y;
    cr_status st =
        g_ba[which] ? cr_prepared_value_and_gradient(g_ba[which], x, n, &y, g) : CR_EINVAL;
    if (st == CR_EDOMAIN || !g_ba[which]) {
        GBT_TRY(ba_prepare_one(which, x, n));
        st = cr_prepared_value_and_gradient(g_ba[which], x, n, &y, g);
    }
    return st == CR_OK ? 0 : failed(st, "replaying ba", cr_ctx_errmsg(g_ctx));
}

extern "C" int gbt_ba_block(const double *cam, const double *X, const double *w, const double *feat,
                            double *J, double *dw)
{
    double x[17], g[17];
    ba_pack(cam, X, w, feat, x);
    for (int r = 0; r < 2; r++) {
        GBT_TRY(ba_replay(r, x, 17, g));
        memcpy(J + 15 * r, g, 15 * sizeof(double));
    }
    return ba_replay(2, w, 1, dw);
}

extern "C" int gbt_ht(int nbones, int nverts, int npts, const int *parents,
                      const double *base_relatives, const double *inverse_base_absolutes,
                      const double *base_positions, const double *weights, int is_mirrored,
                      const int *correspondences, const int *triangles, const double *points,
                      const double *theta, const double *us, double *J)
{
    size_t nb16 = 16 * (size_t)nbones, nv = (size_t)nverts, np = (size_t)npts;
    size_t nus = us ? 2 * np : 0, nin = HT_NTHETA + nus, nd = HT_NTHETA + (us ? 2 : 0);
    cr_tape *t;
    GBT_TRY(tape(1, &t));
    tbuf xs(nin), rel(nb16), inv(nb16), pos(4 * nv), wts(nv * (size_t)nbones), pts(3 * np),
        err(3 * np);
    double *xdot = (double *)malloc((nin + 3 * np) * sizeof(double));
    if (GBT_NOMEM(xs) || GBT_NOMEM(rel) || GBT_NOMEM(inv) || GBT_NOMEM(pos) || GBT_NOMEM(wts) ||
        GBT_NOMEM(pts) || GBT_NOMEM(err) || !xdot) {
        free(xdot);
        return failed(CR_ENOMEM, "ht", nullptr);
    }
    double *ydot = xdot + nin;
    int rc = inputs(t, xs, 0, theta, HT_NTHETA);
    if (!rc && us)
        rc = inputs(t, xs, HT_NTHETA, us, nus);
    if (!rc) {
        consts(rel.p, base_relatives, nb16);
        consts(inv.p, inverse_base_absolutes, nb16);
        consts(pos.p, base_positions, 4 * nv);
        consts(wts.p, weights, nv * (size_t)nbones);
        consts(pts.p, points, 3 * np);
        if (us)
            gbt::ht_objective_complicated(nbones, nverts, npts, parents, rel.p, inv.p, pos.p, wts.p,
                                          is_mirrored, correspondences, triangles, pts.p, xs.p,
                                          xs.p + HT_NTHETA, err.p);
        else
            gbt::ht_objective(nbones, nverts, npts, parents, rel.p, inv.p, pos.p, wts.p,
                              is_mirrored, correspondences, pts.p, xs.p, err.p);
        rc = recorded(t);
    }
    /* columns: (u0, u1) first when complicated (GradBench's order), then theta */
    size_t off = us ? 2 : 0;
    for (size_t col = 0; col < nd && !rc; col++) {
        memset(xdot, 0, nin * sizeof(double));
        if (col < off)
            for (size_t i = 0; i < np; i++)
                xdot[HT_NTHETA + 2 * i + col] = 1.0;
        else
            xdot[col - off] = 1.0;
        rc = swept(t, cr_tape_jvp(t, xs.vars(), xdot, nin, err.vars(), 3 * np, ydot));
        for (size_t r = 0; r < 3 * np && !rc; r++)
            J[r * nd + col] = ydot[r];
    }
    free(xdot);
    return rc;
}

/* particle and saddle: the outer derivative ------------------------------------------ */

extern "C" int gbt_particle(int outer_reverse, int inner_reverse, double w, double *g)
{
    cr_tape *t;
    GBT_TRY(tape(outer_reverse ? 0 : 1, &t));
    tbuf xs(1);
    if (GBT_NOMEM(xs))
        return failed(CR_ENOMEM, "particle", nullptr);
    GBT_TRY(inputs(t, xs, 0, &w, 1));
    treal y = inner_reverse ? gbt::particle_euler_f_r(xs.p[0]) : gbt::particle_euler_f(xs.p[0]);
    GBT_TRY(recorded(t));
    if (outer_reverse)
        return swept(t, cr_tape_gradient(t, y.v, xs.vars(), 1, g));
    const double one = 1.0;
    return swept(t, cr_tape_jvp(t, xs.vars(), &one, 1, &y.v, 1, g));
}

/* The gradient of saddle_max_f (p1, s) with respect to p1, or of saddle_f (p1, p2) with
 * respect to p2 (inner != 0). */
static int saddle_grad(int reverse, int inner, int inner_reverse, const double *a, const double *b,
                       double *g)
{
    cr_tape *t;
    GBT_TRY(tape(reverse ? 0 : 1, &t));
    tbuf xs(2);
    if (GBT_NOMEM(xs))
        return failed(CR_ENOMEM, "saddle", nullptr);
    GBT_TRY(inputs(t, xs, 0, inner ? b : a, 2));
    treal y = inner           ? gbt::saddle_f(a[0], a[1], xs.p[0], xs.p[1])
              : inner_reverse ? gbt::saddle_max_f_r(xs.p[0], xs.p[1], b[0], b[1])
                              : gbt::saddle_max_f(xs.p[0], xs.p[1], b[0], b[1]);
    GBT_TRY(recorded(t));
    if (reverse)
        return swept(t, cr_tape_gradient(t, y.v, xs.vars(), 2, g));
    for (int j = 0; j < 2; j++) {
        const double dir[2] = {j == 0 ? 1.0 : 0.0, j == 1 ? 1.0 : 0.0};
        GBT_TRY(swept(t, cr_tape_jvp(t, xs.vars(), dir, 2, &y.v, 1, g + j)));
    }
    return 0;
}

extern "C" int gbt_saddle_outer(int outer_reverse, int inner_reverse, const double *p1,
                                const double *start, double *g)
{
    return saddle_grad(outer_reverse, 0, inner_reverse, p1, start, g);
}

extern "C" int gbt_saddle_inner(int reverse, const double *p1, const double *p2, double *g)
{
    return saddle_grad(reverse, 1, 0, p1, p2, g);
}
