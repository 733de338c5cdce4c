/*
 * GradBench's gmm objective written against the tape API with logsumexp inside its loop
 * over points: a scalar loop computes the k per-component terms of a point, cr_av_pack makes
 * them an array variable, logsumexp's array rule reduces it, and the scalar code goes on
 * with the result. Checked against central finite differences of the objective in plain C
 * (the formula of bench/objectives/gmm.c) and against the same objective with logsumexp
 * written out in scalar operations; through a prepared gradient replayed at new points and
 * through H·v on a second-order tape.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

enum { D = 3, K = 4, NPT = 5, LSZ = D * (D - 1) / 2 };
enum { NP = K + 2 * K * D + K * LSZ }; /* alphas, means, q, l */
enum { WM = 2 };                       /* the Wishart prior's m */
static const double k_gamma = 1.3;     /* and its gamma */

/* The data points, constants of the objective. */
static double g_x[NPT * D];

static void make_points(void)
{
    for (size_t i = 0; i < NPT * D; i++)
        g_x[i] = sin(0.9 * (double)i + 0.3) + 0.2 * (double)(i % 3);
}

/* log Γ_d(N / 2) and the constant of the prior. */
static double prior_const(void)
{
    const double pi = 3.14159265358979323846;
    double nw = D + WM + 1, lgd = 0.25 * D * (D - 1) * log(pi);
    for (int p = 1; p <= D; p++)
        lgd += lgamma(0.5 * nw + 0.5 * (1 - p));
    return K * (nw * D * (log(k_gamma) - 0.5 * log(2.0)) - lgd) - 0.5 * NPT * D * log(2.0 * pi);
}

static double lse_c(const double *v, size_t n)
{
    double m = v[0], s = 0;
    for (size_t i = 1; i < n; i++)
        m = fmax(m, v[i]);
    for (size_t i = 0; i < n; i++)
        s += exp(v[i] - m);
    return m + log(s);
}

/* The objective in plain C. */
static double gmm_c(const double *w, size_t np)
{
    (void)np;
    const double *al = w, *mu = w + K, *q = w + K + K * D, *l = w + K + 2 * K * D;
    double slse = 0, prior = 0;
    for (int i = 0; i < NPT; i++) {
        double main[K];
        for (int j = 0; j < K; j++) {
            double xc[D], qxc[D], sq = 0, sumq = 0;
            for (int p = 0; p < D; p++) {
                xc[p] = g_x[i * D + p] - mu[j * D + p];
                qxc[p] = exp(q[j * D + p]) * xc[p];
                sumq += q[j * D + p];
            }
            int li = j * LSZ;
            for (int p = 0; p < D; p++)
                for (int r = p + 1; r < D; r++)
                    qxc[r] += l[li++] * xc[p];
            for (int p = 0; p < D; p++)
                sq += qxc[p] * qxc[p];
            main[j] = al[j] + sumq - 0.5 * sq;
        }
        slse += lse_c(main, K);
    }
    for (int j = 0; j < K; j++) {
        double frob = 0, sumq = 0;
        for (int p = 0; p < D; p++) {
            frob += exp(2 * q[j * D + p]);
            sumq += q[j * D + p];
        }
        for (int p = 0; p < LSZ; p++)
            frob += l[j * LSZ + p] * l[j * LSZ + p];
        prior += 0.5 * k_gamma * k_gamma * frob - WM * sumq;
    }
    return prior_const() + slse - NPT * lse_c(al, K) - prior;
}

/* logsumexp of k scalar variables: through the array rule (packed), or written out with
 * scalar operations (shifted by the largest value, a constant of the recording as in the
 * rule). */
static cr_var lse_t(cr_tape *t, const cr_var *v, size_t k, bool packed)
{
    if (packed) {
        cr_targ a = cr_targ_arr(cr_av_pack(t, v, k, NULL, 0));
        return cr_tape_acall_s(t, &cr_fn_logsumexp, &a, 1);
    }
    size_t im = 0;
    for (size_t i = 1; i < k; i++)
        if (v[i].v > v[im].v)
            im = i;
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i < k; i++)
        s = cr_add(t, s, cr_exp(t, cr_sub(t, v[i], cr_const(v[im].v))));
    return cr_add(t, cr_const(v[im].v), cr_log(t, s));
}

/* The objective on the tape; env points to a bool: logsumexp through the array rule. */
static cr_status gmm_t(cr_tape *t, const cr_var *w, size_t np, cr_var *y, size_t m, void *env)
{
    (void)np;
    (void)m;
    bool packed = *(const bool *)env;
    const cr_var *al = w, *mu = w + K, *q = w + K + K * D, *l = w + K + 2 * K * D;
    cr_var qd[K * D], sumq[K];
    for (int j = 0; j < K; j++) {
        sumq[j] = cr_const(0.0);
        for (int p = 0; p < D; p++) {
            qd[j * D + p] = cr_exp(t, q[j * D + p]);
            sumq[j] = cr_add(t, sumq[j], q[j * D + p]);
        }
    }
    cr_var slse = cr_const(0.0);
    for (int i = 0; i < NPT; i++) { /* the loop over points */
        cr_var main[K];
        for (int j = 0; j < K; j++) {
            cr_var xc[D], qxc[D];
            for (int p = 0; p < D; p++) {
                xc[p] = cr_sub(t, cr_const(g_x[i * D + p]), mu[j * D + p]);
                qxc[p] = cr_mul(t, qd[j * D + p], xc[p]);
            }
            int li = j * LSZ;
            for (int p = 0; p < D; p++)
                for (int r = p + 1; r < D; r++)
                    qxc[r] = cr_add(t, qxc[r], cr_mul(t, l[li++], xc[p]));
            cr_var sq = cr_const(0.0);
            for (int p = 0; p < D; p++)
                sq = cr_add(t, sq, cr_mul(t, qxc[p], qxc[p]));
            main[j] = cr_sub(t, cr_add(t, al[j], sumq[j]), cr_mul(t, cr_const(0.5), sq));
        }
        slse = cr_add(t, slse, lse_t(t, main, K, packed)); /* logsumexp of the k terms */
    }
    cr_var prior = cr_const(0.0);
    for (int j = 0; j < K; j++) {
        cr_var frob = cr_const(0.0);
        for (int p = 0; p < D; p++)
            frob = cr_add(t, frob, cr_mul(t, qd[j * D + p], qd[j * D + p]));
        for (int p = 0; p < LSZ; p++)
            frob = cr_add(t, frob, cr_mul(t, l[j * LSZ + p], l[j * LSZ + p]));
        prior = cr_add(t, prior,
                       cr_sub(t, cr_mul(t, cr_const(0.5 * k_gamma * k_gamma), frob),
                              cr_mul(t, cr_const(WM), sumq[j])));
    }
    cr_var e = cr_sub(t, slse, cr_mul(t, cr_const(NPT), lse_t(t, al, K, packed)));
    y[0] = cr_sub(t, cr_add(t, cr_const(prior_const()), e), prior);
    return cr_tape_status(t);
}

static void fill_w(double *w, double s)
{
    for (size_t i = 0; i < NP; i++)
        w[i] = 0.5 * sin(1.1 * (double)i + s) - 0.05 * (double)(i % 5);
}

static void fd_grad(double *w, double *g)
{
    for (size_t i = 0; i < NP; i++) {
        double wi = w[i], h = 1e-6 * fmax(1.0, fabs(wi));
        w[i] = wi + h;
        double fp = gmm_c(w, NP);
        w[i] = wi - h;
        double fm = gmm_c(w, NP);
        w[i] = wi;
        g[i] = (fp - fm) / (2 * h);
    }
}

static void test_gradient(void **state)
{
    fixture *f = *state;
    make_points();
    bool packed = true, scalar = false;
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    for (int round = 0; round < 3; round++) {
        double w[NP], g[NP], gs[NP], want[NP], y, ys;
        fill_w(w, 0.7 * round);
        assert_ok(t, cr_tape_value_and_gradient(t, gmm_t, &packed, w, NP, &y, g));
        assert_ok(u, cr_tape_value_and_gradient(u, gmm_t, &scalar, w, NP, &ys, gs));
        assert_close(y, gmm_c(w, NP), 1e-12);
        assert_close(y, ys, 1e-12);
        fd_grad(w, want);
        for (size_t i = 0; i < NP; i++) {
            assert_close(g[i], want[i], 1e-6);
            assert_close(g[i], gs[i], 1e-11);
        }
    }
    cr_tape_free(u);
    cr_tape_free(t);
}

static void test_prepared(void **state)
{
    fixture *f = *state;
    make_points();
    bool packed = true;
    double w[NP], g[NP], want[NP], y;
    fill_w(w, 0.1);
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, gmm_t, &packed, w, NP, &p), CR_OK);
    for (int round = 0; round < 3; round++) {
        fill_w(w, 1.3 + round); /* the maxima move to other components: the rule follows */
        assert_int_equal(cr_prepared_value_and_gradient(p, w, NP, &y, g), CR_OK);
        assert_close(y, gmm_c(w, NP), 1e-12);
        fd_grad(w, want);
        for (size_t i = 0; i < NP; i++)
            assert_close(g[i], want[i], 1e-6);
    }
    cr_prepared_free(p);
}

/* H v on a second-order tape against central differences, along v, of the gradient. */
static void test_hvp(void **state)
{
    fixture *f = *state;
    make_points();
    bool packed = true;
    double w[NP], v[NP], hv[NP], wp[NP], wm[NP], gp[NP], gm[NP], y, h = 1e-5;
    fill_w(w, 0.4);
    for (size_t i = 0; i < NP; i++)
        v[i] = cos(0.7 * (double)i) - 0.1;
    cr_tape_params p2 = {.flags = CR_TAPE_SECOND_ORDER};
    cr_tape *s, *u;
    assert_int_equal(cr_tape_new(f->ctx, &p2, &s), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    cr_var ws[NP], yv;
    assert_ok(s, cr_tape_inputs(s, w, NP, ws));
    assert_ok(s, gmm_t(s, ws, NP, &yv, 1, &packed));
    assert_ok(s, cr_tape_hvp(s, yv, ws, NP, v, hv, NULL));
    for (size_t i = 0; i < NP; i++) {
        wp[i] = w[i] + h * v[i];
        wm[i] = w[i] - h * v[i];
    }
    assert_ok(u, cr_tape_value_and_gradient(u, gmm_t, &packed, wp, NP, &y, gp));
    assert_ok(u, cr_tape_value_and_gradient(u, gmm_t, &packed, wm, NP, &y, gm));
    for (size_t i = 0; i < NP; i++)
        assert_close(hv[i], (gp[i] - gm[i]) / (2 * h), 1e-5);
    cr_tape_free(u);
    cr_tape_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gradient, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prepared, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hvp, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
