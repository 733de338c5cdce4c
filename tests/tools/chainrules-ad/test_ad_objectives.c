/*
 * The GradBench objectives of bench/objectives, written as plain C and differentiated by
 * chainrules-ad at build time (cr_objectives_ad): each derivative against the hand-written
 * one (bench/objectives/hand, itself checked against central differences by
 * tests/tools/test_objectives_hand.c) or, for ht, against central differences directly.
 */
#include "test_util.h"

#include "objectives.h"
#include "objectives_ad.h"

/* a and b agree to rtol relative to the largest |b|. */
static void assert_all_close(const char *what, const double *a, const double *b, size_t n,
                             double rtol)
{
    double scale = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= rtol * fmax(scale, 1e-300))) {
            print_error("%s[%zu]: %.17g, expected %.17g\n", what, i, a[i], b[i]);
            fail();
        }
}

static void test_scalar_workloads(void **state)
{
    (void)state;
    enum { N = 500 };
    double x[N], y[N], g[N], h[N];
    obj_fill_uniform(x, N, -1.5, 1.5, 1);
    obj_fill_uniform(y, N, -1, 1, 2);
    memset(g, 0, sizeof g);
    memset(h, 0, sizeof h);
    assert_close(rosen_rev(x, g, N, 1.0), rosen_grad(x, h, N, 1.0), 1e-15);
    assert_all_close("rosen", g, h, N, 1e-13);
    memset(g, 0, sizeof g);
    memset(h, 0, sizeof h);
    for (int i = 0; i < N; i++)
        x[i] *= 1e-3;
    assert_close(chain_rev(x, g, N, 20000, 1.0), chain_grad(x, h, N, 20000, 1.0), 1e-15);
    assert_all_close("chain", g, h, N, 1e-12);
    memset(g, 0, sizeof g);
    memset(h, 0, sizeof h);
    assert_close(mse_rev(x, g, y, 30, 2.0), mse_grad(x, h, y, 30, 2.0), 1e-15);
    assert_all_close("mse", g, h, 30, 1e-13);
}

static void test_gmm(void **state)
{
    (void)state;
    static const int sizes[][3] = {{3, 4, 10}, {10, 25, 50}};
    for (int t = 0; t < 2; t++) {
        int d = sizes[t][0], k = sizes[t][1], n = sizes[t][2], lsz = d * (d - 1) / 2;
        double *in = calloc((size_t)(k + 3 * d * k + lsz * k + d * n), sizeof *in);
        double *ga = calloc((size_t)(2 * (k + 2 * d * k + lsz * k)), sizeof *ga);
        assert_non_null(in);
        assert_non_null(ga);
        double *alphas = in, *means = alphas + k, *q = means + d * k, *l = q + d * k,
               *x = l + lsz * k;
        gmm_make_input(d, k, n, 7 + t, alphas, means, q, l, x);
        int np = k + 2 * d * k + lsz * k;
        double *g = ga, *h = ga + np;
        double v = gmm_objective_rev(d, k, n, alphas, g, means, g + k, q, g + k + d * k, l,
                                     g + k + 2 * d * k, x, 1.0, 0, 1.0);
        double w = gmm_objective_grad(d, k, n, alphas, h, means, h + k, q, h + k + d * k, l,
                                      h + k + 2 * d * k, x, 1.0, 0, 1.0);
        assert_close(v, w, 1e-14);
        assert_all_close("gmm", g, h, (size_t)np, 1e-12);
        free(in);
        free(ga);
    }
}

static void test_lstm(void **state)
{
    (void)state;
    enum { L = 2, C = 5, B = 4 };
    double mp[2 * L * 4 * B], ep[3 * B], st[2 * L * B], seq[C * B];
    double g[2 * L * 4 * B + 3 * B] = {0}, h[2 * L * 4 * B + 3 * B] = {0};
    lstm_make_input(L, C, B, 5, mp, ep, st, seq);
    double v = lstm_objective_rev(L, C, B, mp, g, ep, g + 2 * L * 4 * B, st, seq, 1.0);
    double w = lstm_objective_grad(L, C, B, mp, h, ep, h + 2 * L * 4 * B, st, seq, 1.0);
    assert_close(v, w, 1e-14);
    assert_all_close("lstm", g, h, sizeof g / sizeof g[0], 1e-12);
}

/* One reprojection block's 2 x 15 Jacobian (cam 11, X 3, w 1) three ways. */
static void test_ba(void **state)
{
    (void)state;
    for (unsigned long seed = 1; seed <= 5; seed++) {
        double cam[11], X[3], w[1], feat[2], err[2], J[30], Jv[30], Jf[30], Jr[30];
        ba_make_block(seed, cam, X, w, feat);
        ba_project_jac(cam, X, w, feat, err, J);
        /* vector forward: direction j is the unit vector e_j */
        double cd[11 * 15] = {0}, Xd[3 * 15] = {0}, wd[15] = {0}, ed[2 * 15];
        for (int j = 0; j < 11; j++)
            cd[j * 15 + j] = 1;
        for (int j = 0; j < 3; j++)
            Xd[j * 15 + 11 + j] = 1;
        wd[14] = 1;
        ba_project_fwdv(cam, cd, X, Xd, w, wd, feat, err, ed, 15);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 15; j++)
                Jv[i * 15 + j] = ed[i * 15 + j];
        /* forward, one direction at a time; reverse, one output at a time */
        for (int j = 0; j < 15; j++) {
            double c1[11] = {0}, X1[3] = {0}, w1[1] = {0}, e1[2];
            if (j < 11)
                c1[j] = 1;
            else if (j < 14)
                X1[j - 11] = 1;
            else
                w1[0] = 1;
            ba_project_fwd(cam, c1, X, X1, w, w1, feat, err, e1);
            Jf[j] = e1[0];
            Jf[15 + j] = e1[1];
        }
        for (int i = 0; i < 2; i++) {
            double cb[11] = {0}, Xb[3] = {0}, wb[1] = {0}, eb[2] = {0};
            eb[i] = 1;
            ba_project_rev(cam, cb, X, Xb, w, wb, feat, err, eb);
            assert_true(eb[0] == 0 && eb[1] == 0); /* the seed is consumed */
            memcpy(Jr + i * 15, cb, sizeof cb);
            memcpy(Jr + i * 15 + 11, Xb, sizeof Xb);
            Jr[i * 15 + 14] = wb[0];
        }
        assert_all_close("ba fwdv", Jv, J, 30, 1e-13);
        assert_all_close("ba fwd", Jf, J, 30, 1e-13);
        assert_all_close("ba rev", Jr, J, 30, 1e-13);
        /* the Jacobian entry (static lane sparsity): every entry written (NaN before) */
        double Jj[30], ej[2], ep[2];
        for (int i = 0; i < 30; i++)
            Jj[i] = NAN;
        ba_project_jacfwd(cam, X, w, feat, ej, Jj);
        ba_project(cam, X, w, feat, ep);
        assert_true(ej[0] == ep[0] && ej[1] == ep[1]);
        assert_all_close("ba jacfwd", Jj, J, 30, 1e-13);
        assert_all_close("ba jacfwd/rev", Jj, Jr, 30, 1e-13);
        /* the rotation's other branch (r = 0), against the reverse mode */
        double cam0[11];
        memcpy(cam0, cam, sizeof cam0);
        cam0[0] = cam0[1] = cam0[2] = 0;
        ba_project_jacfwd(cam0, X, w, feat, ej, Jj);
        for (int i = 0; i < 2; i++) {
            double cb[11] = {0}, Xb[3] = {0}, wb[1] = {0}, eb[2] = {0};
            eb[i] = 1;
            ba_project_rev(cam0, cb, X, Xb, w, wb, feat, err, eb);
            memcpy(Jr + i * 15, cb, sizeof cb);
            memcpy(Jr + i * 15 + 11, Xb, sizeof Xb);
            Jr[i * 15 + 14] = wb[0];
        }
        assert_all_close("ba jacfwd r=0", Jj, Jr, 30, 1e-13);
        double we, wJ, wd1 = 1, wed, wb = 0, web = 1;
        ba_weight_error_jac(w, &we, &wJ);
        ba_weight_error_fwd(w, &wd1, &we, &wed);
        ba_weight_error_rev(w, &wb, &we, &web);
        assert_close(wed, wJ, 1e-15);
        assert_close(wb, wJ, 1e-15);
    }
}

static void test_ode(void **state)
{
    (void)state;
    enum { N = 8, S = 10 };
    double x[N], y[N], yh[N], g[N] = {0}, h[N] = {0}, yb[N], yhb[N];
    ode_make_input(N, 3, x);
    for (int i = 0; i < N; i++)
        yb[i] = yhb[i] = (i == N - 1) ? 1.0 : 0.25 * i;
    ode_primal_rev(N, x, g, S, y, yb);
    ode_primal_grad(N, x, h, S, yh, yhb);
    assert_all_close("ode", g, h, N, 1e-12);
    for (int i = 0; i < N; i++)
        ASSERT_DBL(yb[i], 0.0);
    /* forward against the transpose: <yb, J xd> = <J^T yb, xd> */
    double xd[N], yd[N], lhs = 0, rhs = 0;
    for (int i = 0; i < N; i++)
        xd[i] = sin(1.0 + i);
    ode_primal_fwd(N, x, xd, S, y, yd);
    for (int i = 0; i < N; i++) {
        lhs += yd[i] * ((i == N - 1) ? 1.0 : 0.25 * i);
        rhs += h[i] * xd[i];
    }
    assert_close(lhs, rhs, 1e-12);
}

/* ---- ht: against central differences ---------------------------------------------------- */

/* HV vertices: the HP points (3 HP vertex reads when complicated) read fewer vertex
 * instances than the model has, and ht.c skins them point by point; HV_FEW: more, and it
 * poses every vertex once. */
enum { HV = 40, HV_FEW = 5, HP = 6, HTRI = 30 };

typedef struct ht_case {
    int parents[HT_MIN_BONES];
    double rel[16 * HT_MIN_BONES], inv[16 * HT_MIN_BONES], pos[4 * HV], w[HV * HT_MIN_BONES];
    double pts[HP * 3];
    int corr[HP], tri[HTRI * 3];
    double us[HP * 2];
    int nverts, complicated, mirrored;
} ht_case;

static cr_status ht_map(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const ht_case *c = env;
    if (c->complicated)
        ht_objective_complicated(HT_MIN_BONES, c->nverts, HP, c->parents, c->rel, c->inv, c->pos,
                                 c->w, c->mirrored, c->corr, c->tri, c->pts, x, x + HT_NTHETA, y);
    else
        ht_objective(HT_MIN_BONES, c->nverts, HP, c->parents, c->rel, c->inv, c->pos, c->w,
                     c->mirrored, c->corr, c->pts, x, y);
    return CR_OK;
}

static void test_ht(void **state)
{
    fixture *fx = *state;
    static ht_case c;
    enum { NIN = HT_NTHETA + 2 * HP, NOUT = 3 * HP };
    double x[NIN], fd[NOUT * NIN], Jr[NOUT * NIN], Jv[NOUT * NIN];
    /* both model sizes (both paths of ht_errors), both variants, the model mirrored or not:
     * every case of ht_errors' branches */
    for (int k = 0; k < 8; k++) {
        c.complicated = k & 1;
        c.mirrored = (k >> 1) & 1;
        c.nverts = k >> 2 ? HV_FEW : HV;
        ht_make_model(c.nverts, 31, c.parents, c.rel, c.inv, c.pos, c.w);
        /* simple: the correspondences are vertices; complicated: triangles */
        if (c.complicated)
            ht_make_input(c.nverts, HTRI, HP, 32, x, c.corr, c.pts, c.tri, x + HT_NTHETA);
        else
            ht_make_input(c.nverts, 0, HP, 32, x, c.corr, c.pts, NULL, NULL);
        size_t nin = c.complicated ? NIN : HT_NTHETA;
        cr_fdm method;
        assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
        assert_int_equal(
            cr_fd_jacobian(&method, NULL, ht_map, &c, x, nin, NOUT, fx->arena, fd, NULL), CR_OK);
        double err[NOUT];
        /* reverse: one sweep per output */
        for (int i = 0; i < NOUT; i++) {
            double xb[NIN] = {0}, eb[NOUT] = {0};
            eb[i] = 1;
            if (c.complicated)
                ht_objective_complicated_rev(HT_MIN_BONES, c.nverts, HP, c.parents, c.rel, c.inv,
                                             c.pos, c.w, c.mirrored, c.corr, c.tri, c.pts, x, xb,
                                             x + HT_NTHETA, xb + HT_NTHETA, err, eb);
            else
                ht_objective_rev(HT_MIN_BONES, c.nverts, HP, c.parents, c.rel, c.inv, c.pos, c.w,
                                 c.mirrored, c.corr, c.pts, x, xb, err, eb);
            for (size_t j = 0; j < nin; j++)
                Jr[i * nin + j] = xb[j];
        }
        /* vector forward: all the inputs' directions at once */
        static double xd[NIN * NIN], ed[NOUT * NIN];
        memset(xd, 0, sizeof xd);
        for (size_t j = 0; j < nin; j++)
            xd[j * nin + j] = 1;
        if (c.complicated)
            ht_objective_complicated_fwdv(HT_MIN_BONES, c.nverts, HP, c.parents, c.rel, c.inv,
                                          c.pos, c.w, c.mirrored, c.corr, c.tri, c.pts, x, xd,
                                          x + HT_NTHETA, xd + HT_NTHETA * nin, err, ed, (int)nin);
        else
            ht_objective_fwdv(HT_MIN_BONES, c.nverts, HP, c.parents, c.rel, c.inv, c.pos, c.w,
                              c.mirrored, c.corr, c.pts, x, xd, err, ed, (int)nin);
        memcpy(Jv, ed, NOUT * nin * sizeof *Jv);
        assert_all_close("ht rev", Jr, fd, NOUT * nin, 1e-7);
        assert_all_close("ht fwdv", Jv, fd, NOUT * nin, 1e-7);
    }
}

/* A model of more than HT_POSED_SMALL vertices (test_ht_posed_large). */
enum { HTL_V = HT_POSED_SMALL + 76, HTL_P = HTL_V + 30, HTL_TRI = 700 };
typedef struct ht_case_large {
    int parents[HT_MIN_BONES];
    double rel[16 * HT_MIN_BONES], inv[16 * HT_MIN_BONES], pos[4 * HTL_V], w[HTL_V * HT_MIN_BONES];
    double pts[HTL_P * 3];
    int corr[HTL_P], tri[HTL_TRI * 3];
    int npts, complicated;
} ht_case_large;

static void ht_map_large(const ht_case_large *c, const double *x, double *y)
{
    if (c->complicated)
        ht_objective_complicated(HT_MIN_BONES, HTL_V, c->npts, c->parents, c->rel, c->inv, c->pos,
                                 c->w, 0, c->corr, c->tri, c->pts, x, x + HT_NTHETA, y);
    else
        ht_objective(HT_MIN_BONES, HTL_V, c->npts, c->parents, c->rel, c->inv, c->pos, c->w, 0,
                     c->corr, c->pts, x, y);
}

/* ht with a model of more than HT_POSED_SMALL vertices and more vertex reads than vertices:
 * ht.c poses every vertex into its larger array of the posed model. The vector forward mode
 * against central differences, both variants. */
static void test_ht_posed_large(void **state)
{
    (void)state;
    enum { NV = HTL_V, NTRI = HTL_TRI };
    static ht_case_large c;
    for (int k = 0; k < 2; k++) {
        c.complicated = k;
        c.npts = k ? NV / 3 + 40 : NV + 30; /* 3 npts (complicated), npts > NV */
        ht_make_model(NV, 41, c.parents, c.rel, c.inv, c.pos, c.w);
        double x[HT_NTHETA + 2 * HTL_P];
        if (c.complicated)
            ht_make_input(NV, NTRI, c.npts, 42, x, c.corr, c.pts, c.tri, x + HT_NTHETA);
        else
            ht_make_input(NV, 0, c.npts, 42, x, c.corr, c.pts, NULL, NULL);
        /* the directions: theta's, and (u0, u1) of every point as two (as GradBench's) */
        int nd = HT_NTHETA + (c.complicated ? 2 : 0);
        size_t nout = 3 * (size_t)c.npts;
        double *fd = calloc(nout * (size_t)nd, sizeof *fd);
        double *ed = calloc(nout * (size_t)nd, sizeof *ed);
        double *err = calloc(nout, sizeof *err);
        double *td = calloc((size_t)HT_NTHETA * (size_t)nd, sizeof *td);
        double *ud = calloc(2 * (size_t)c.npts * (size_t)nd, sizeof *ud);
        double *yp = calloc(nout, sizeof *yp), *ym = calloc(nout, sizeof *ym);
        assert_non_null(fd && ed && err && td && ud && yp && ym);
        int off = c.complicated ? 2 : 0;
        for (int i = 0; i < HT_NTHETA; i++)
            td[i * nd + off + i] = 1;
        for (int i = 0; i < c.npts && c.complicated; i++) {
            ud[(2 * i) * nd] = 1;
            ud[(2 * i + 1) * nd + 1] = 1;
        }
        /* central differences along each direction (all us together for the first two) */
        for (int j = 0; j < nd; j++) {
            double h = 1e-6;
            for (int s = 0; s < 2; s++) {
                double sg = s ? -h : h;
                for (int i = 0; i < HT_NTHETA; i++)
                    x[i] += sg * td[i * nd + j];
                for (int i = 0; i < 2 * c.npts && c.complicated; i++)
                    x[HT_NTHETA + i] += sg * ud[i * nd + j];
                ht_map_large(&c, x, s ? ym : yp);
                for (int i = 0; i < HT_NTHETA; i++)
                    x[i] -= sg * td[i * nd + j];
                for (int i = 0; i < 2 * c.npts && c.complicated; i++)
                    x[HT_NTHETA + i] -= sg * ud[i * nd + j];
            }
            for (size_t i = 0; i < nout; i++)
                fd[i * (size_t)nd + (size_t)j] = (yp[i] - ym[i]) / (2 * h);
        }
        if (c.complicated)
            ht_objective_complicated_fwdv(HT_MIN_BONES, NV, c.npts, c.parents, c.rel, c.inv, c.pos,
                                          c.w, 0, c.corr, c.tri, c.pts, x, td, x + HT_NTHETA, ud,
                                          err, ed, nd);
        else
            ht_objective_fwdv(HT_MIN_BONES, NV, c.npts, c.parents, c.rel, c.inv, c.pos, c.w, 0,
                              c.corr, c.pts, x, td, err, ed, nd);
        ht_map_large(&c, x, yp);
        assert_all_close("ht posed large, err", err, yp, nout, 1e-14);
        assert_all_close("ht posed large, fwdv", ed, fd, nout * (size_t)nd, 1e-6);
        free(fd);
        free(ed);
        free(err);
        free(td);
        free(ud);
        free(yp);
        free(ym);
    }
}

/* Central difference of f at x along coordinate i. */
#define CENTRAL(expr_at, x, i, h)     \
    do {                              \
        double x0_ = (x)[i];          \
        (x)[i] = x0_ + (h);           \
        double fp_ = (expr_at);       \
        (x)[i] = x0_ - (h);           \
        double fm_ = (expr_at);       \
        (x)[i] = x0_;                 \
        fd = (fp_ - fm_) / (2 * (h)); \
    } while (0)

/* hello, lse, llsq and det: the reverse mode against central differences. */
static void test_gradbench_scalars(void **state)
{
    (void)state;
    double g = 0, fd;
    assert_close(hello_square_rev(-1.75, &g, 2.0), 3.0625, 1e-15);
    assert_close(g, -7.0, 1e-15);

    enum { N = 40, M = 6, L = 5 };
    double x[N], gx[N];
    obj_fill_uniform(x, N, -3, 3, 5);
    memset(gx, 0, sizeof gx);
    lse_objective_rev(x, gx, N, 1.0);
    for (int i = 0; i < N; i++) {
        CENTRAL(lse_objective(x, N), x, i, 1e-6);
        assert_close(gx[i], fd, 1e-7);
    }
    memset(gx, 0, sizeof gx);
    llsq_objective_rev(x, gx, M, 33, 1.0);
    for (int i = 0; i < M; i++) {
        CENTRAL(llsq_objective(x, M, 33), x, i, 1e-6);
        assert_close(gx[i], fd, 1e-6 * fmax(1, fabs(fd)));
    }
    double a[L * L], ga[L * L];
    long r[L + 1], c[L + 1];
    obj_fill_uniform(a, L * L, 0, 1, 6);
    memset(ga, 0, sizeof ga);
    double det = det_objective_rev(a, ga, L, r, c, 1.0);
    assert_close(det, det_objective(a, L, r, c), 1e-15);
    for (int i = 0; i < L * L; i++) {
        CENTRAL(det_objective(a, L, r, c), a, i, 1e-6);
        assert_close(ga[i], fd, 1e-8);
    }
}

/* kmeans: the gradient (reverse) against central differences of the cost, and the
 * second-order kmeans_cost_fwd_rev (the tool's reverse mode of its own forward mode):
 * the gradient and H v against central differences of the first-order gradient. */
static void test_kmeans_nested(void **state)
{
    (void)state;
    enum { NP = 60, K = 4, D = 3 };
    double pts[NP * D], cen[K * D], g[K * D], hv[K * D], gd[K * D], v[K * D], fd;
    obj_fill_uniform(pts, NP * D, 0, 1, 7);
    memcpy(cen, pts, sizeof cen);
    for (int i = 0; i < K * D; i++)
        cen[i] += 0.01 * (i % 5);
    obj_fill_uniform(v, K * D, -1, 1, 8);
    memset(g, 0, sizeof g);
    kmeans_cost_rev(NP, K, D, pts, cen, g, 1.0);
    for (int i = 0; i < K * D; i++) {
        CENTRAL(kmeans_cost(NP, K, D, pts, cen), cen, i, 1e-7);
        assert_close(g[i], fd, 1e-6);
    }
    memset(hv, 0, sizeof hv);
    memset(gd, 0, sizeof gd);
    double jv = 0, jv_b = 1;
    kmeans_cost_fwd_rev(NP, K, D, pts, cen, hv, v, gd, &jv, &jv_b, 0.0);
    assert_true(jv_b == 0.0); /* the output's cotangent is consumed */
    double dot = 0;
    for (int i = 0; i < K * D; i++)
        dot += g[i] * v[i];
    assert_close(jv, dot, 1e-12);
    assert_all_close("kmeans grad", gd, g, K * D, 1e-12);
    /* H v = d/dt grad(cen + t v): central differences of the reverse-mode gradient */
    double gp[K * D], gm[K * D], cp[K * D], cm[K * D];
    const double h = 1e-6;
    for (int i = 0; i < K * D; i++) {
        cp[i] = cen[i] + h * v[i];
        cm[i] = cen[i] - h * v[i];
    }
    memset(gp, 0, sizeof gp);
    memset(gm, 0, sizeof gm);
    kmeans_cost_rev(NP, K, D, pts, cp, gp, 1.0);
    kmeans_cost_rev(NP, K, D, pts, cm, gm, 1.0);
    for (int i = 0; i < K * D; i++)
        assert_close(hv[i], (gp[i] - gm[i]) / (2 * h), 1e-6);
}

/* saddle and particle: the tool applied to a function that calls its own forward mode
 * (forward over forward, reverse over forward), against central differences. */
static void test_nested_outer(void **state)
{
    (void)state;
    double p[2] = {0.7, -0.3}, g[2] = {0, 0}, fd;
    double v = saddle_max_f_rev(p[0], &g[0], p[1], &g[1], 1.0, 1.0, 1.0);
    assert_close(v, saddle_max_f(p[0], p[1], 1.0, 1.0), 1e-15);
    for (int i = 0; i < 2; i++) {
        double d = 0;
        saddle_max_f_fwd(p[0], i == 0, p[1], i == 1, 1.0, 1.0, &d);
        CENTRAL(saddle_max_f(p[0], p[1], 1.0, 1.0), p, i, 1e-6);
        assert_close(g[i], fd, 1e-6);
        assert_close(d, fd, 1e-6);
    }
    double w[1] = {0.1}, gw = 0, dw = 0;
    particle_euler_f_rev(w[0], &gw, 1.0);
    particle_euler_f_fwd(w[0], 1.0, &dw);
    CENTRAL(particle_euler_f(w[0]), w, 0, 1e-6);
    assert_close(gw, fd, 1e-5);
    assert_close(dw, gw, 1e-12);
}

/* fr and rr: the same outer functions with the inner gradient from the tool's reverse mode
 * (the tool reads its own reverse output), differentiated again in both modes, against
 * central differences of the outer primal. */
static void test_nested_outer_over_reverse(void **state)
{
    (void)state;
    double p[2] = {0.7, -0.3}, g[2] = {0, 0}, fd;
    double v = saddle_max_f_r_rev(p[0], &g[0], p[1], &g[1], 1.0, 1.0, 1.0);
    assert_close(v, saddle_max_f(p[0], p[1], 1.0, 1.0), 1e-12);
    for (int i = 0; i < 2; i++) {
        double d = 0;
        double vf = saddle_max_f_r_fwd(p[0], i == 0, p[1], i == 1, 1.0, 1.0, &d);
        assert_close(vf, v, 1e-12);
        CENTRAL(saddle_max_f(p[0], p[1], 1.0, 1.0), p, i, 1e-6);
        assert_close(g[i], fd, 1e-6);
        assert_close(d, fd, 1e-6);
    }
    double w[1] = {0.1}, gw = 0, dw = 0;
    double pv = particle_euler_f_r_rev(w[0], &gw, 1.0);
    assert_close(pv, particle_euler_f(w[0]), 1e-12);
    particle_euler_f_r_fwd(w[0], 1.0, &dw);
    CENTRAL(particle_euler_f(w[0]), w, 0, 1e-6);
    assert_close(gw, fd, 1e-5);
    assert_close(dw, gw, 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_workloads),
        cmocka_unit_test(test_gmm),
        cmocka_unit_test(test_lstm),
        cmocka_unit_test(test_ba),
        cmocka_unit_test(test_ode),
        cmocka_unit_test(test_gradbench_scalars),
        cmocka_unit_test(test_kmeans_nested),
        cmocka_unit_test(test_nested_outer),
        cmocka_unit_test(test_nested_outer_over_reverse),
        cmocka_unit_test_setup_teardown(test_ht, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_ht_posed_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
