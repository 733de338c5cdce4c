/*
 * The benchmark objectives of bench/objectives and their hand-written derivatives.
 *
 * Values: every objective against an independent long-double implementation written
 * differently (GradBench's naive gmm log posterior from Gaussian and Wishart densities,
 * determinants by elimination; the rotation of ba as a matrix; ode's Runge-Kutta stages as
 * vectors, and the exact solution of the ODE), and closed forms where there are some.
 * Derivatives: every hand-written gradient and Jacobian against central finite differences
 * (cr_fd_jacobian, 5 points, adaptive step), at the sizes of the brief (gmm d=3 k=4 n=10,
 * lstm l=2 c=5 b=4, one ba block, rosen n=10); ht (no hand-written derivative) against a
 * long-double pose built from general matrix products, and its closed form at theta = 0; the
 * gradient functions add into their shadows and scale with the seed, which is checked too.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include "objectives.h"

#define RTOL 1e-6

/* ------------------------------------------------------------------------------------ */
/* Finite differences of a packed map R^n -> R^m */

typedef cr_status (*packed_fn)(const double *v, size_t n, double *y, size_t m, void *env);

/* fd[m*n], row-major */
static void fd_jacobian(fixture *f, packed_fn fn, void *env, const double *v, size_t n, size_t m,
                        double *jac)
{
    cr_fdm meth;
    assert_int_equal(cr_fdm_central(5, 1, &meth), CR_OK);
    assert_int_equal(cr_fd_jacobian(&meth, NULL, fn, env, v, n, m, f->arena, jac, NULL), CR_OK);
}

/* |got_i - want_i| <= rtol max(|want_i|, 1e-3 max_j |want_j|): relative, except for the
 * entries much smaller than the largest (the differences' error scales with the latter). */
static void assert_vec_close(const double *got, const double *want, size_t n, double rtol,
                             const char *what)
{
    double scale = 0.0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        if (!(fabs(got[i] - want[i]) <= rtol * fmax(fabs(want[i]), 1e-3 * scale))) {
            print_error("%s[%zu]: %.17g, finite differences %.17g\n", what, i, got[i], want[i]);
            fail();
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* rosen, chain, mse */

static cr_status rosen_packed(const double *v, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    y[0] = rosen(v, (long)n);
    return CR_OK;
}

static void test_rosen(void **state)
{
    fixture *f = *state;
    enum { N = 10 };
    double x[N], g[N], fd[N];
    long double want = 0.0L;
    obj_fill_uniform(x, N, -1.5, 1.5, 7);
    for (int i = 0; i + 1 < N; i++) {
        long double a = (long double)x[i + 1] - (long double)x[i] * (long double)x[i];
        long double b = 1.0L - (long double)x[i];
        want += 100.0L * a * a + b * b;
    }
    assert_close(rosen(x, N), (double)want, 1e-14);
    double ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0;
    ASSERT_DBL(rosen(ones, N), 0.0);
    ASSERT_DBL(rosen(ones, 1), 0.0);

    fd_jacobian(f, rosen_packed, NULL, x, N, 1, fd);
    for (int i = 0; i < N; i++)
        g[i] = 0.25; /* the gradient is added to what is there */
    double y = rosen_grad(x, g, N, 2.0);
    assert_close(y, rosen(x, N), 1e-15);
    for (int i = 0; i < N; i++)
        g[i] = (g[i] - 0.25) / 2.0;
    assert_vec_close(g, fd, N, RTOL, "rosen gradient");
}

typedef struct chain_env {
    int n;
    long steps;
} chain_env;

static cr_status chain_packed(const double *v, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const chain_env *e = env;
    y[0] = chain(v, e->n, e->steps);
    return CR_OK;
}

static void test_chain(void **state)
{
    fixture *f = *state;
    enum { N = 7 };
    chain_env e = {N, 40};
    double x[N], g[N] = {0}, fd[N];
    for (int i = 0; i < N; i++)
        x[i] = 1e-1 * (1.0 + sin((double)i));
    long double t = 0.0L;
    for (long k = 0; k < e.steps; k++)
        t = t + (long double)x[k % N] * expl(sinl(t));
    assert_close(chain(x, N, e.steps), (double)t, 1e-13);
    ASSERT_DBL(chain(x, N, 0), 0.0);

    fd_jacobian(f, chain_packed, &e, x, N, 1, fd);
    double y = chain_grad(x, g, N, e.steps, 1.0);
    assert_close(y, chain(x, N, e.steps), 1e-15);
    assert_vec_close(g, fd, N, RTOL, "chain gradient");
    /* a second call adds as much again */
    chain_grad(x, g, N, e.steps, 1.0);
    for (int i = 0; i < N; i++)
        fd[i] *= 2.0;
    assert_vec_close(g, fd, N, RTOL, "chain gradient, twice");
}

static double k_mse_y[30];

static cr_status mse_packed(const double *v, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    y[0] = mse(v, k_mse_y, (int)n);
    return CR_OK;
}

static void test_mse(void **state)
{
    fixture *f = *state;
    enum { N = 30 };
    double x[N], g[N] = {0}, fd[N];
    for (int i = 0; i < N; i++) {
        x[i] = 1.0 + 0.1 * i;
        k_mse_y[i] = sin((double)i);
    }
    long double s = 0.0L;
    for (int i = 0; i < N; i++)
        s += ((long double)x[i] - (long double)k_mse_y[i]) *
             ((long double)x[i] - (long double)k_mse_y[i]);
    assert_close(mse(x, k_mse_y, N), (double)(s / N), 1e-15);
    double a[2] = {1.0, 3.0}, b[2] = {0.0, 1.0};
    ASSERT_DBL(mse(a, b, 2), 2.5);

    fd_jacobian(f, mse_packed, NULL, x, N, 1, fd);
    double y = mse_grad(x, g, k_mse_y, N, -3.0);
    assert_close(y, mse(x, k_mse_y, N), 1e-15);
    for (int i = 0; i < N; i++)
        g[i] /= -3.0;
    assert_vec_close(g, fd, N, RTOL, "mse gradient");
}

/* ------------------------------------------------------------------------------------ */
/* gmm */

enum { GD = 3, GK = 4, GN = 10, GL = GD * (GD - 1) / 2, GP = GK + 2 * GK * GD + GK * GL };

typedef struct gmm_env {
    double x[GN * GD];
    double gamma;
    int m;
} gmm_env;

static cr_status gmm_packed(const double *v, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const gmm_env *e = env;
    const double *al = v, *mu = al + GK, *q = mu + GK * GD, *l = q + GK * GD;
    y[0] = gmm_objective(GD, GK, GN, al, mu, q, l, e->x, e->gamma, e->m);
    return CR_OK;
}

/* log det of a d x d matrix (positive determinant) by Gaussian elimination. */
static long double logdet_l(long double *a, int d)
{
    long double ld = 0.0L;
    for (int c = 0; c < d; c++) {
        int piv = c;
        for (int r = c + 1; r < d; r++)
            if (fabsl(a[r * d + c]) > fabsl(a[piv * d + c]))
                piv = r;
        if (piv != c)
            for (int j = 0; j < d; j++) {
                long double t = a[c * d + j];
                a[c * d + j] = a[piv * d + j];
                a[piv * d + j] = -t; /* swap and negate: the determinant is unchanged */
            }
        ld += logl(fabsl(a[c * d + c]));
        for (int r = c + 1; r < d; r++) {
            long double fct = a[r * d + c] / a[c * d + c];
            for (int j = c; j < d; j++)
                a[r * d + j] -= fct * a[c * d + j];
        }
    }
    return ld;
}

/* GradBench's naive log posterior (gmm/run.py log_posterior): log of the product of the
 * mixture densities and of the Wishart densities of the precision matrices Q^T Q. */
static double gmm_naive(int d, int k, int n, const double *al, const double *mu, const double *q,
                        const double *l, const double *x, double gamma, int m)
{
    const long double pi = 3.14159265358979323846264338327950288L;
    long double Q[GD * GD], S[GD][GK][GD], phi[GK], asum = 0.0L, total = 0.0L;
    long double logdet[GK];
    assert_true(d == GD && k == GK);
    for (int j = 0; j < k; j++)
        asum += expl((long double)al[j]);
    for (int j = 0; j < k; j++)
        phi[j] = expl((long double)al[j]) / asum;
    for (int j = 0; j < k; j++) {
        for (int i = 0; i < d * d; i++)
            Q[i] = 0.0L;
        int ii = 0;
        for (int c = 0; c < d; c++) {
            Q[c * d + c] = expl((long double)q[j * d + c]);
            for (int r = c + 1; r < d; r++)
                Q[r * d + c] = (long double)l[j * GL + ii++];
        }
        long double a[GD * GD];
        for (int r = 0; r < d; r++)
            for (int c = 0; c < d; c++) {
                long double s = 0.0L;
                for (int t = 0; t < d; t++)
                    s += Q[t * d + r] * Q[t * d + c];
                S[r][j][c] = s;
                a[r * d + c] = s;
            }
        logdet[j] = logdet_l(a, d);
    }
    for (int i = 0; i < n; i++) {
        long double lik = 0.0L;
        for (int j = 0; j < k; j++) {
            long double quad = 0.0L;
            for (int r = 0; r < d; r++)
                for (int c = 0; c < d; c++)
                    quad += ((long double)x[i * d + r] - (long double)mu[j * d + r]) * S[r][j][c] *
                            ((long double)x[i * d + c] - (long double)mu[j * d + c]);
            lik += phi[j] * expl(-0.5L * quad) / sqrtl(powl(2.0L * pi, d) / expl(logdet[j]));
        }
        total += logl(lik);
    }
    long double nw = d + m + 1, g = (long double)gamma;
    long double mgl = 0.25L * d * (d - 1) * logl(pi);
    for (int j = 1; j <= d; j++)
        mgl += lgammal(nw / 2.0L + (1 - j) / 2.0L);
    for (int j = 0; j < k; j++) {
        long double tr = 0.0L;
        for (int r = 0; r < d; r++)
            tr += S[r][j][r];
        total += (nw - d - 1) / 2.0L * logdet[j] - g * g * tr / 2.0L - d * nw / 2.0L * logl(2.0L) -
                 nw / 2.0L * (-2.0L * d * logl(g)) - mgl;
    }
    return (double)total;
}

static void gmm_case(fixture *f, double gamma, int m, unsigned long seed)
{
    gmm_env e = {.gamma = gamma, .m = m};
    double v[GP], g[GP], fd[GP];
    double *al = v, *mu = al + GK, *q = mu + GK * GD, *l = q + GK * GD;
    gmm_make_input(GD, GK, GN, seed, al, mu, q, l, e.x);

    double y = gmm_objective(GD, GK, GN, al, mu, q, l, e.x, gamma, m);
    assert_close(y, gmm_naive(GD, GK, GN, al, mu, q, l, e.x, gamma, m), 1e-12);

    fd_jacobian(f, gmm_packed, &e, v, GP, 1, fd);
    for (int i = 0; i < GP; i++)
        g[i] = 1.0;
    double *gal = g, *gmu = gal + GK, *gq = gmu + GK * GD, *gl = gq + GK * GD;
    double yh = gmm_objective_grad(GD, GK, GN, al, gal, mu, gmu, q, gq, l, gl, e.x, gamma, m, 0.5);
    assert_close(yh, y, 1e-14);
    for (int i = 0; i < GP; i++)
        g[i] = (g[i] - 1.0) / 0.5;
    assert_vec_close(g, fd, GP, RTOL, "gmm gradient");
}

static void test_gmm(void **state)
{
    fixture *f = *state;
    gmm_case(f, 1.0, 0, 31337); /* GradBench's gamma and m */
    gmm_case(f, 1.7, 2, 5);     /* every term of the prior */
}

static void test_gmm_sizes(void **state)
{
    (void)state;
    double a[1] = {0.0}, z[1] = {0.0};
    assert_true(isnan(gmm_objective(GMM_MAX_D + 1, 1, 0, a, z, z, z, z, 1.0, 0)));
    assert_true(isnan(gmm_objective(1, 0, 0, a, z, z, z, z, 1.0, 0)));
    assert_true(
        isnan(gmm_objective_grad(1, GMM_MAX_K + 1, 0, a, a, z, z, z, z, z, z, z, 1.0, 0, 1.0)));
    /* d = 1, k = 1, no points: only the prior, -gamma^2 e^{2q} / 2 + m q + C */
    double q[1] = {0.3};
    double y = gmm_objective(1, 1, 0, a, z, q, z, z, 2.0, 1);
    double want = -0.5 * 4.0 * exp(0.6) + 0.3 + 3.0 * (log(2.0) - 0.5 * log(2.0)) - lgamma(1.5);
    assert_close(y, want, 1e-14);
}

/* ------------------------------------------------------------------------------------ */
/* lstm */

enum { LL = 2, LC = 5, LB = 4, LMAIN = 8 * LL * LB, LEXTRA = 3 * LB, LP = LMAIN + LEXTRA };

typedef struct lstm_env {
    double state[2 * LL * LB], seq[LC * LB];
} lstm_env;

static cr_status lstm_packed(const double *v, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const lstm_env *e = env;
    y[0] = lstm_objective(LL, LC, LB, v, v + LMAIN, e->state, e->seq);
    return CR_OK;
}

static long double sigl(long double z)
{
    return 1.0L / (1.0L + expl(-z));
}

/* The LSTM with the state as [layer][hidden|cell][element] and the parameters as
 * [layer][weight|bias][gate][element]. */
static double lstm_ref(const double *mp, const double *ep, const double *st0, const double *seq)
{
    long double h[LL][LB], cl[LL][LB], total = 0.0L;
    for (int ly = 0; ly < LL; ly++)
        for (int i = 0; i < LB; i++) {
            h[ly][i] = (long double)st0[(ly * 2 + 0) * LB + i];
            cl[ly][i] = (long double)st0[(ly * 2 + 1) * LB + i];
        }
    for (int t = 0; t + 1 < LC; t++) {
        long double in[LB];
        for (int i = 0; i < LB; i++)
            in[i] = (long double)seq[t * LB + i] * (long double)ep[i];
        for (int ly = 0; ly < LL; ly++) {
#define W(gate, i) ((long double)mp[((ly * 2 + 0) * 4 + (gate)) * LB + (i)])
#define B(gate, i) ((long double)mp[((ly * 2 + 1) * 4 + (gate)) * LB + (i)])
            for (int i = 0; i < LB; i++) {
                long double fg = sigl(in[i] * W(0, i) + B(0, i));
                long double ig = sigl(h[ly][i] * W(1, i) + B(1, i));
                long double og = sigl(in[i] * W(2, i) + B(2, i));
                long double ch = tanhl(h[ly][i] * W(3, i) + B(3, i));
                cl[ly][i] = cl[ly][i] * fg + ig * ch;
                h[ly][i] = og * tanhl(cl[ly][i]);
                in[i] = h[ly][i];
            }
#undef W
#undef B
        }
        long double yp[LB], s = 2.0L;
        for (int i = 0; i < LB; i++) {
            yp[i] = in[i] * (long double)ep[LB + i] + (long double)ep[2 * LB + i];
            s += expl(yp[i]);
        }
        for (int i = 0; i < LB; i++)
            total += (long double)seq[(t + 1) * LB + i] * (yp[i] - logl(s));
    }
    return (double)(-total / ((LC - 1) * LB));
}

static void test_lstm(void **state)
{
    fixture *f = *state;
    lstm_env e;
    double v[LP], g[LP], fd[LP];
    lstm_make_input(LL, LC, LB, 11, v, v + LMAIN, e.state, e.seq);
    for (int i = 0; i < LC * LB; i++)
        assert_true(e.seq[i] == 0.0 || e.seq[i] == 1.0);

    double y = lstm_objective(LL, LC, LB, v, v + LMAIN, e.state, e.seq);
    assert_close(y, lstm_ref(v, v + LMAIN, e.state, e.seq), 1e-13);

    fd_jacobian(f, lstm_packed, &e, v, LP, 1, fd);
    for (int i = 0; i < LP; i++)
        g[i] = -1.0;
    double yh = lstm_objective_grad(LL, LC, LB, v, g, v + LMAIN, g + LMAIN, e.state, e.seq, 2.0);
    assert_close(yh, y, 1e-14);
    for (int i = 0; i < LP; i++)
        g[i] = (g[i] + 1.0) / 2.0;
    assert_vec_close(g, fd, LP, RTOL, "lstm gradient");

    /* one layer, GradBench's 7 bits per character */
    enum { L1 = 1, C1 = 6, B1 = 7 };
    double mp[8 * L1 * B1], ep[3 * B1], st[2 * L1 * B1], sq[C1 * B1];
    double gm[8 * L1 * B1] = {0}, gx[3 * B1] = {0};
    lstm_make_input(L1, C1, B1, 3, mp, ep, st, sq);
    double y1 = lstm_objective(L1, C1, B1, mp, ep, st, sq);
    assert_close(lstm_objective_grad(L1, C1, B1, mp, gm, ep, gx, st, sq, 1.0), y1, 1e-14);
    /* d loss / d (output bias) by central differences, with a fixed step */
    for (int i = 0; i < B1; i++) {
        double hstep = 1e-5, ep2[3 * B1];
        for (int j = 0; j < 3 * B1; j++)
            ep2[j] = ep[j];
        ep2[2 * B1 + i] = ep[2 * B1 + i] + hstep;
        double yp = lstm_objective(L1, C1, B1, mp, ep2, st, sq);
        ep2[2 * B1 + i] = ep[2 * B1 + i] - hstep;
        double ym = lstm_objective(L1, C1, B1, mp, ep2, st, sq);
        assert_close(gx[2 * B1 + i], (yp - ym) / (2.0 * hstep), 1e-7);
    }
}

static void test_lstm_sizes(void **state)
{
    (void)state;
    double z[1] = {0.0};
    assert_true(isnan(lstm_objective(LSTM_MAX_L + 1, 2, 1, z, z, z, z)));
    assert_true(isnan(lstm_objective(1, 1, 1, z, z, z, z)));
    assert_true(isnan(lstm_objective(1, 2, LSTM_MAX_B + 1, z, z, z, z)));
    assert_true(isnan(lstm_objective_grad(1, 2, 0, z, z, z, z, z, z, 1.0)));
}

/* ------------------------------------------------------------------------------------ */
/* ba */

static cr_status ba_packed(const double *v, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    ba_project(v, v + 11, v + 14, env, y);
    return CR_OK;
}

static cr_status baw_packed(const double *v, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    ba_weight_error(v, y);
    return CR_OK;
}

/* The projection with the rotation as a matrix, R = cos t I + sin t [k]x + (1 - cos t) k k^T. */
static void ba_ref(const double *cam, const double *X, double w, const double *feat, double *err)
{
    long double r[3] = {(long double)cam[0], (long double)cam[1], (long double)cam[2]},
                t = sqrtl(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
    long double R[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    if (t > 0) {
        long double kx = r[0] / t, ky = r[1] / t, kz = r[2] / t, c = cosl(t), s = sinl(t);
        long double K[3][3] = {{0, -kz, ky}, {kz, 0, -kx}, {-ky, kx, 0}};
        long double kv[3] = {kx, ky, kz};
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                R[i][j] = (i == j ? c : 0.0L) + s * K[i][j] + (1.0L - c) * kv[i] * kv[j];
    }
    long double xo[3], xc[3];
    for (int i = 0; i < 3; i++)
        xo[i] = (long double)X[i] - (long double)cam[3 + i];
    for (int i = 0; i < 3; i++)
        xc[i] = R[i][0] * xo[0] + R[i][1] * xo[1] + R[i][2] * xo[2];
    long double p0 = xc[0] / xc[2], p1 = xc[1] / xc[2], rs = p0 * p0 + p1 * p1;
    long double L = 1.0L + (long double)cam[9] * rs + (long double)cam[10] * rs * rs;
    err[0] = (double)((long double)w *
                      (p0 * L * (long double)cam[6] + (long double)cam[7] - (long double)feat[0]));
    err[1] = (double)((long double)w *
                      (p1 * L * (long double)cam[6] + (long double)cam[8] - (long double)feat[1]));
}

static void ba_case(fixture *f, const double *v, const double *feat)
{
    double err[2], errj[2], J[2 * BA_NCOLS], fd[2 * BA_NCOLS], want[2];
    ba_project(v, v + 11, v + 14, feat, err);
    ba_ref(v, v + 11, v[14], feat, want);
    assert_close(err[0], want[0], 1e-12);
    assert_close(err[1], want[1], 1e-12);
    ba_project_jac(v, v + 11, v + 14, feat, errj, J);
    assert_close(errj[0], err[0], 1e-14);
    assert_close(errj[1], err[1], 1e-14);
    fd_jacobian(f, ba_packed, (void *)feat, v, BA_NCOLS, 2, fd);
    assert_vec_close(J, fd, 2 * BA_NCOLS, RTOL, "ba Jacobian");
}

static void test_ba(void **state)
{
    fixture *f = *state;
    double v[BA_NCOLS], feat[2];
    for (unsigned long seed = 1; seed <= 3; seed++) {
        ba_make_block(seed, v, v + 11, v + 14, feat);
        ba_case(f, v, feat);
    }
    /* no rotation: the first-order branch */
    ba_make_block(9, v, v + 11, v + 14, feat);
    v[0] = v[1] = v[2] = 0.0;
    ba_case(f, v, feat);

    double w = 0.7, e, jw, fd;
    ba_weight_error_jac(&w, &e, &jw);
    ba_weight_error(&w, &fd);
    ASSERT_DBL(e, fd);
    assert_close(e, 0.51, 1e-15);
    fd_jacobian(f, baw_packed, NULL, &w, 1, 1, &fd);
    assert_close(jw, fd, RTOL);
}

static void test_ba_problem(void **state)
{
    (void)state;
    enum { N = 3, M = 5, P = 7 };
    double cams[11 * N], X[3 * M], w[P], feats[2 * P];
    int obs[2 * P];
    ba_make_problem(N, M, P, 4, cams, X, w, obs, feats);
    for (int i = 0; i < P; i++) {
        assert_int_equal(obs[2 * i], i % N);
        assert_int_equal(obs[2 * i + 1], i % M);
        double err[2];
        ba_project(cams + 11 * obs[2 * i], X + 3 * obs[2 * i + 1], w + i, feats + 2 * i, err);
        assert_true(isfinite(err[0]) && isfinite(err[1]));
    }
    /* distinct cameras */
    assert_true(cams[0] != cams[11]);
}

/* ------------------------------------------------------------------------------------ */
/* ode */

/* GradBench's vector form of the RK4 steps, in long double. */
static void ode_ref(int n, const double *x, int s, long double *y)
{
    long double k1[8], k2[8], k3[8], k4[8], yt[8], h = 2.0L / s;
    for (int i = 0; i < n; i++)
        y[i] = 0.0L;
    for (int st = 0; st < s; st++) {
        for (int i = 0; i < n; i++)
            k1[i] = i == 0 ? (long double)x[0] : (long double)x[i] * y[i - 1];
        for (int i = 0; i < n; i++)
            yt[i] = y[i] + h * k1[i] / 2;
        for (int i = 0; i < n; i++)
            k2[i] = i == 0 ? (long double)x[0] : (long double)x[i] * yt[i - 1];
        for (int i = 0; i < n; i++)
            yt[i] = y[i] + h * k2[i] / 2;
        for (int i = 0; i < n; i++)
            k3[i] = i == 0 ? (long double)x[0] : (long double)x[i] * yt[i - 1];
        for (int i = 0; i < n; i++)
            yt[i] = y[i] + h * k3[i];
        for (int i = 0; i < n; i++)
            k4[i] = i == 0 ? (long double)x[0] : (long double)x[i] * yt[i - 1];
        for (int i = 0; i < n; i++)
            y[i] += h * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]) / 6;
    }
}

typedef struct ode_env {
    int s;
} ode_env;

static cr_status ode_packed(const double *v, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    ode_primal((int)n, v, ((const ode_env *)env)->s, y);
    return CR_OK;
}

/* ode_primal_grad against the Jacobian by central differences: x_b = J^T yf_b. */
static void ode_grad_case(fixture *f, int s)
{
    enum { N = 8 };
    ode_env e = {s};
    double x[N], y[N], yv[N], yb[N], wb[N], xb[N], jac[N * N], want[N];
    ode_make_input(N, 5, x);
    obj_fill_normal(wb, N, 6);
    fd_jacobian(f, ode_packed, &e, x, N, N, jac);
    for (int j = 0; j < N; j++) {
        want[j] = 0.0;
        for (int i = 0; i < N; i++)
            want[j] += jac[i * N + j] * wb[i];
        xb[j] = 0.5; /* added to */
        yb[j] = wb[j];
    }
    ode_primal_grad(N, x, xb, s, y, yb);
    ode_primal(N, x, s, yv);
    for (int i = 0; i < N; i++) {
        ASSERT_DBL(y[i], yv[i]);
        ASSERT_DBL(yb[i], 0.0);
        xb[i] -= 0.5;
    }
    assert_vec_close(xb, want, N, RTOL, "ode gradient");
}

static void test_ode_grad(void **state)
{
    fixture *f = *state;
    ode_grad_case(f, 1);
    ode_grad_case(f, 10);
}

static void test_ode(void **state)
{
    (void)state;
    enum { N = 8 };
    double x[N], y[N];
    long double want[N];
    ode_make_input(N, 31337, x);
    int steps[3] = {1, 10, 100};
    for (int j = 0; j < 3; j++) {
        ode_primal(N, x, steps[j], y);
        ode_ref(N, x, steps[j], want);
        for (int i = 0; i < N; i++)
            assert_close(y[i], (double)want[i], 1e-13);
    }
    /* the exact solution y_i(2) = 2^{i+1} x_0 ... x_i / (i+1)!, RK4's error O(h^4) */
    ode_primal(N, x, 200, y);
    double prod = 1.0;
    for (int i = 0; i < N; i++) {
        prod *= x[i] * 2.0 / (i + 1);
        assert_true(fabs(y[i] - prod) <= 1e-8 * fmax(1e-3, fabs(prod)));
    }
    /* y_0 and y_1 are polynomials of degree <= 2: exact for any step */
    ode_primal(2, x, 1, y);
    assert_close(y[0], 2.0 * x[0], 1e-15);
    assert_close(y[1], 2.0 * x[0] * x[1], 1e-15);
}

/* ------------------------------------------------------------------------------------ */
/* ht */

enum { HB = HT_MIN_BONES, HV = 50, HP = 20, HTRI = 30 };

typedef struct ht_model {
    int parents[HB];
    double rel[HB * 16], inv[HB * 16], pos[HV * 4], w[HV * HB];
} ht_model;

static void mat_l(const long double *a, const long double *b, int n, int m, int p, long double *out)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < p; k++) {
            long double s = 0.0L;
            for (int j = 0; j < m; j++)
                s += a[i * m + j] * b[j * p + k];
            out[i * p + k] = s;
        }
}

/* GradBench's pose with general matrix products: Rz Ry Rx as matrices, the relative
 * transform base * [R 0; 0 1], the skinning as transform times the 4 x nverts base
 * positions; the global rotation as cos I + sin [k]x + (1 - cos) k k^T. pos[3][HV]. */
static void ht_ref_positions(const ht_model *md, int mirrored, const double *theta,
                             long double pos[3][HV])
{
    long double pose[HB + 3][3] = {{0}};
    for (int r = 0; r < 3; r++) {
        pose[0][r] = (long double)theta[r];
        pose[1][r] = 1.0L;
        pose[2][r] = (long double)theta[3 + r];
    }
    int it = 6, col = 5;
    for (int f = 0; f < 5; f++, col++)
        for (int i = 2; i <= 4; i++, col++) {
            pose[col][0] = (long double)theta[it++];
            if (i == 2)
                pose[col][1] = (long double)theta[it++];
        }
    long double A[HB][16], T[HB][16];
    for (int b = 0; b < HB; b++) {
        long double tx = pose[b + 3][0], tz = pose[b + 3][1], ty = pose[b + 3][2];
        long double Rx[9] = {1, 0, 0, 0, cosl(tx), -sinl(tx), 0, sinl(tx), cosl(tx)};
        long double Ry[9] = {cosl(ty), 0, sinl(ty), 0, 1, 0, -sinl(ty), 0, cosl(ty)};
        long double Rz[9] = {cosl(tz), -sinl(tz), 0, sinl(tz), cosl(tz), 0, 0, 0, 1};
        long double t1[9], R[9], tr[16] = {0}, base[16], rel[16], inv[16];
        mat_l(Rz, Ry, 3, 3, 3, t1);
        mat_l(t1, Rx, 3, 3, 3, R);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                tr[i * 4 + j] = R[i * 3 + j];
        tr[15] = 1.0L;
        for (int i = 0; i < 16; i++) {
            base[i] = (long double)md->rel[b * 16 + i];
            inv[i] = (long double)md->inv[b * 16 + i];
        }
        mat_l(base, tr, 4, 4, 4, rel);
        if (md->parents[b] < 0)
            memcpy(A[b], rel, sizeof rel);
        else
            mat_l(A[md->parents[b]], rel, 4, 4, 4, A[b]);
        mat_l(A[b], inv, 4, 4, 4, T[b]);
    }
    static long double bp[4 * HV], cur[4 * HV];
    for (int v = 0; v < HV; v++)
        for (int j = 0; j < 4; j++)
            bp[j * HV + v] = (long double)md->pos[v * 4 + j];
    for (int i = 0; i < 3; i++)
        for (int v = 0; v < HV; v++)
            pos[i][v] = 0.0L;
    for (int b = 0; b < HB; b++) {
        mat_l(T[b], bp, 4, 4, HV, cur);
        for (int i = 0; i < 3; i++)
            for (int v = 0; v < HV; v++)
                pos[i][v] += cur[i * HV + v] * (long double)md->w[v * HB + b];
    }
    if (mirrored)
        for (int v = 0; v < HV; v++)
            pos[0][v] = -pos[0][v];
    long double G[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    long double nrm =
        sqrtl(pose[0][0] * pose[0][0] + pose[0][1] * pose[0][1] + pose[0][2] * pose[0][2]);
    if (nrm >= 1e-4L) {
        long double k[3] = {pose[0][0] / nrm, pose[0][1] / nrm, pose[0][2] / nrm};
        long double K[9] = {0, -k[2], k[1], k[2], 0, -k[0], -k[1], k[0], 0};
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                G[i * 3 + j] = (i == j ? cosl(nrm) : 0.0L) + sinl(nrm) * K[i * 3 + j] +
                               (1.0L - cosl(nrm)) * k[i] * k[j];
    }
    for (int v = 0; v < HV; v++) {
        long double p[3] = {pos[0][v], pos[1][v], pos[2][v]};
        for (int i = 0; i < 3; i++)
            pos[i][v] = G[i * 3] * p[0] + G[i * 3 + 1] * p[1] + G[i * 3 + 2] * p[2] + pose[2][i];
    }
}

static void test_ht(void **state)
{
    (void)state;
    static ht_model md;
    double theta[HT_NTHETA], pts[HP * 3], us[HP * 2], err[HP * 3];
    int corr[HP], ctri[HP], tri[HTRI * 3];
    long double pos[3][HV];
    ht_make_model(HV, 21, md.parents, md.rel, md.inv, md.pos, md.w);
    ht_make_input(HV, 0, HP, 22, theta, corr, pts, NULL, NULL);
    ht_make_input(HV, HTRI, HP, 23, theta, ctri, pts, tri, us);
    /* ht.c poses every vertex once when the points read more vertex instances than the
     * model has vertices, else only the read ones: the simple variant with HV vertices and
     * the complicated one with HT_MAX_VERTS (only the first HV read) take the second path,
     * the simple one on the model's first HV_FEW vertices and the complicated one with HV
     * the first. */
    enum { HV_FEW = 10 };
    double theta_few[HT_NTHETA], pts_few[HP * 3];
    int corr_few[HP];
    ht_make_input(HV_FEW, 0, HP, 24, theta_few, corr_few, pts_few, NULL, NULL);
    for (int mirrored = 0; mirrored < 2; mirrored++) {
        ht_objective(HB, HV, HP, md.parents, md.rel, md.inv, md.pos, md.w, mirrored, corr, pts,
                     theta, err);
        ht_ref_positions(&md, mirrored, theta, pos);
        for (int i = 0; i < HP; i++)
            for (int j = 0; j < 3; j++)
                assert_close(err[i * 3 + j],
                             (double)((long double)pts[i * 3 + j] - pos[j][corr[i]]), 1e-13);
        ht_objective(HB, HV_FEW, HP, md.parents, md.rel, md.inv, md.pos, md.w, mirrored, corr_few,
                     pts_few, theta, err);
        for (int i = 0; i < HP; i++)
            for (int j = 0; j < 3; j++)
                assert_close(err[i * 3 + j],
                             (double)((long double)pts_few[i * 3 + j] - pos[j][corr_few[i]]),
                             1e-13);
        for (int nverts = HV; nverts <= HT_MAX_VERTS; nverts += HT_MAX_VERTS - HV) {
            ht_objective_complicated(HB, nverts, HP, md.parents, md.rel, md.inv, md.pos, md.w,
                                     mirrored, ctri, tri, pts, theta, us, err);
            for (int i = 0; i < HP; i++) {
                const int *t = tri + 3 * ctri[i];
                long double u0 = (long double)us[2 * i], u1 = (long double)us[2 * i + 1];
                for (int j = 0; j < 3; j++) {
                    long double hp =
                        u0 * pos[j][t[0]] + u1 * pos[j][t[1]] + (1.0L - u0 - u1) * pos[j][t[2]];
                    assert_close(err[i * 3 + j], (double)((long double)pts[i * 3 + j] - hp), 1e-13);
                }
            }
        }
    }
    /* at theta = 0 every skinning transform is the identity and the weights sum to 1: the
     * model is its base positions */
    for (int i = 0; i < HT_NTHETA; i++)
        theta[i] = 0.0;
    ht_objective(HB, HV, HP, md.parents, md.rel, md.inv, md.pos, md.w, 0, corr, pts, theta, err);
    for (int i = 0; i < HP; i++)
        for (int j = 0; j < 3; j++)
            assert_close(err[i * 3 + j], pts[i * 3 + j] - md.pos[corr[i] * 4 + j], 1e-14);
    /* sizes out of range */
    ht_objective(HB - 1, HV, HP, md.parents, md.rel, md.inv, md.pos, md.w, 0, corr, pts, theta,
                 err);
    assert_true(isnan(err[0]) && isnan(err[3 * HP - 1]));
    ht_objective_complicated(HB, HT_MAX_VERTS + 1, HP, md.parents, md.rel, md.inv, md.pos, md.w, 0,
                             ctri, tri, pts, theta, us, err);
    assert_true(isnan(err[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rosen, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_chain, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mse, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gmm, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_gmm_sizes),
        cmocka_unit_test_setup_teardown(test_lstm, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_lstm_sizes),
        cmocka_unit_test_setup_teardown(test_ba, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_ba_problem),
        cmocka_unit_test(test_ode),
        cmocka_unit_test_setup_teardown(test_ode_grad, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_ht),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
