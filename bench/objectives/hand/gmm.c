/*
 * Hand-written gradient of gmm_objective() with respect to alphas, means, q and l.
 *
 * With xc = x_i - mu_j, y = Q_j xc and beta_ij = alpha_j + sum(q_j) - |y|^2 / 2, the data
 * term is sum_i logsumexp_j(beta_ij); its derivative along beta_ij is the softmax weight
 * r_ij = exp(beta_ij - lse_i), and
 *   d beta / d alpha_j = 1,   d beta / d mu_j = Q_j^T y,
 *   d beta / d q_jp = 1 - y_p xc_p exp(q_jp),   d beta / d L_j[r][p] = -y_r xc_p.
 * For each point the pass over the components keeps xc and y of every component (k*d
 * values each, in cache), then adds r_ij times these into per-component sums. The
 * -n logsumexp(alpha) term adds -n softmax(alpha); the prior adds -gamma^2 exp(2 q) + m
 * along q and -gamma^2 l along l.
 */
#include <math.h>
#include <stdlib.h>

#include "objectives.h"

double gmm_objective_grad(int d, int k, int n, const double *alphas, double *alphas_b,
                          const double *means, double *means_b, const double *q, double *q_b,
                          const double *l, double *l_b, const double *x, double wishart_gamma,
                          int wishart_m, double gmm_objective_b)
{
    const double pi = 3.14159265358979323846;
    if (d < 1 || d > GMM_MAX_D || k < 1 || k > GMM_MAX_K || n < 0)
        return (double)NAN;
    int lsz = d * (d - 1) / 2;
    long kd = (long)k * d;
    /* qdiag, sum_qs, beta, xc (k*d), y (k*d), and the gradient sums: ga (k), gmu (k*d),
     * gq (k*d), gl (k*lsz). */
    long nbuf = kd + 2 * (long)k + 2 * kd + (long)k + 2 * kd + (long)k * lsz;
    double *buf = calloc((size_t)nbuf, sizeof *buf);
    if (buf == NULL)
        return (double)NAN;
    double *qdiag = buf, *sum_qs = qdiag + kd, *beta = sum_qs + k, *xcs = beta + k;
    double *ys = xcs + kd, *ga = ys + kd, *gmu = ga + k, *gq = gmu + kd, *gl = gq + kd;

    for (long i = 0; i < kd; i++)
        qdiag[i] = exp(q[i]);
    for (int j = 0; j < k; j++) {
        double s = 0.0;
        for (int p = 0; p < d; p++)
            s += q[j * d + p];
        sum_qs[j] = s;
    }

    double slse = 0.0;
    for (int i = 0; i < n; i++) {
        const double *xi = x + (long)i * d;
        double mx = -(double)INFINITY;
        for (int j = 0; j < k; j++) {
            const double *mu = means + (long)j * d, *qd = qdiag + (long)j * d;
            const double *lj = l + (long)j * lsz;
            double *xc = xcs + (long)j * d, *y = ys + (long)j * d;
            for (int p = 0; p < d; p++) {
                xc[p] = xi[p] - mu[p];
                y[p] = qd[p] * xc[p];
            }
            int li = 0;
            for (int p = 0; p < d; p++) {
                double xp = xc[p];
                for (int r = p + 1; r < d; r++)
                    y[r] += lj[li++] * xp;
            }
            double sq = 0.0;
            for (int p = 0; p < d; p++)
                sq += y[p] * y[p];
            beta[j] = alphas[j] + sum_qs[j] - 0.5 * sq;
            if (beta[j] > mx)
                mx = beta[j];
        }
        double se = 0.0;
        for (int j = 0; j < k; j++) {
            beta[j] = exp(beta[j] - mx);
            se += beta[j];
        }
        slse += log(se) + mx;
        double ise = 1.0 / se;
        for (int j = 0; j < k; j++) {
            double rj = beta[j] * ise;
            const double *xc = xcs + (long)j * d, *y = ys + (long)j * d;
            const double *lj = l + (long)j * lsz;
            double *gm = gmu + (long)j * d, *gqj = gq + (long)j * d;
            double *glj = gl + (long)j * lsz;
            ga[j] += rj;
            /* mu: Q^T (r y); q: -r y_p xc_p (times exp(q) at the end); l: -r y_r xc_p */
            int li = 0;
            for (int p = 0; p < d; p++) {
                double ryp = rj * y[p];
                gqj[p] -= ryp * xc[p];
                double t = 0.0, xp = xc[p];
                for (int r = p + 1; r < d; r++) {
                    double ryr = rj * y[r];
                    t += lj[li] * ryr;
                    glj[li] -= ryr * xp;
                    li++;
                }
                gm[p] += t;
                gm[p] += qdiag[(long)j * d + p] * ryp;
            }
        }
    }

    double amx = alphas[0];
    for (int j = 1; j < k; j++)
        if (alphas[j] > amx)
            amx = alphas[j];
    double asum = 0.0;
    for (int j = 0; j < k; j++)
        asum += exp(alphas[j] - amx);
    double lse_alpha = log(asum) + amx;

    int nw = d + wishart_m + 1;
    double lgd = 0.25 * d * (d - 1) * log(pi);
    for (int p = 1; p <= d; p++)
        lgd += lgamma(0.5 * nw + 0.5 * (1 - p));
    double cst = nw * d * (log(wishart_gamma) - 0.5 * log(2.0)) - lgd;
    double g2 = wishart_gamma * wishart_gamma, prior = 0.0;
    for (int j = 0; j < k; j++) {
        double frob = 0.0;
        for (int p = 0; p < d; p++)
            frob += qdiag[(long)j * d + p] * qdiag[(long)j * d + p];
        for (int p = 0; p < lsz; p++)
            frob += l[(long)j * lsz + p] * l[(long)j * lsz + p];
        prior += 0.5 * g2 * frob - wishart_m * sum_qs[j];
    }
    double value = -0.5 * n * d * log(2.0 * pi) + slse - n * lse_alpha - prior + k * cst;

    /* Scatter the sums, times the seed. */
    double sb = gmm_objective_b;
    for (int j = 0; j < k; j++) {
        double sa = exp(alphas[j] - amx) / asum;
        alphas_b[j] += sb * (ga[j] - n * sa);
        for (int p = 0; p < d; p++) {
            long jp = (long)j * d + p;
            double e = qdiag[jp];
            means_b[jp] += sb * gmu[jp];
            q_b[jp] += sb * (ga[j] + gq[jp] * e - g2 * e * e + wishart_m);
        }
        for (int p = 0; p < lsz; p++) {
            long jp = (long)j * lsz + p;
            l_b[jp] += sb * (gl[jp] - g2 * l[jp]);
        }
    }
    free(buf);
    return value;
}
