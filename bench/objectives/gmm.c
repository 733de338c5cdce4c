/*
 * GradBench's gmm objective (evals/gmm/README.md; cpp/gradbench/evals/gmm.hpp): the log
 * posterior of a Gaussian mixture model with a Wishart prior on the precision matrices,
 *
 *   E = -n d log(2 pi) / 2
 *       + sum_i logsumexp_j(alpha_j + sum(q_j) - |Q_j (x_i - mu_j)|^2 / 2)
 *       - n logsumexp(alpha)
 *       - sum_j (gamma^2 / 2 (|exp(q_j)|^2 + |l_j|^2) - m sum(q_j))
 *       + k (N d (log gamma - log(2) / 2) - log Gamma_d(N / 2)),   N = d + m + 1,
 *
 * Q_j lower triangular with diagonal exp(q_j) and strictly lower part l_j (column by
 * column), Gamma_d the multivariate gamma function.
 */
#include <math.h>

#include "objectives.h"

double gmm_objective(int d, int k, int n, const double *alphas, const double *means,
                     const double *q, const double *l, const double *x, double wishart_gamma,
                     int wishart_m)
{
    double qdiag[GMM_MAX_D * GMM_MAX_K];
    double sum_qs[GMM_MAX_K];
    double main_term[GMM_MAX_K];
    double xc[GMM_MAX_D];
    double qxc[GMM_MAX_D];
    const double pi = 3.14159265358979323846;

    if (d < 1 || d > GMM_MAX_D || k < 1 || k > GMM_MAX_K || n < 0)
        return 0.0 / 0.0;
    int lsz = d * (d - 1) / 2;

    for (int i = 0; i < d * k; i++)
        qdiag[i] = exp(q[i]);
    for (int j = 0; j < k; j++) {
        sum_qs[j] = 0.0;
        for (int p = 0; p < d; p++)
            sum_qs[j] += q[j * d + p];
    }

    double slse = 0.0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < k; j++) {
            for (int p = 0; p < d; p++) {
                xc[p] = x[i * d + p] - means[j * d + p];
                qxc[p] = qdiag[j * d + p] * xc[p];
            }
            int li = j * lsz;
            for (int p = 0; p < d; p++) {
                for (int r = p + 1; r < d; r++) {
                    qxc[r] += l[li] * xc[p];
                    li++;
                }
            }
            double sq = 0.0;
            for (int p = 0; p < d; p++)
                sq += qxc[p] * qxc[p];
            main_term[j] = alphas[j] + sum_qs[j] - 0.5 * sq;
        }
        double mx = main_term[0];
        for (int j = 1; j < k; j++) {
            if (main_term[j] > mx)
                mx = main_term[j];
        }
        double semx = 0.0;
        for (int j = 0; j < k; j++)
            semx += exp(main_term[j] - mx);
        slse += log(semx) + mx;
    }

    double amx = alphas[0];
    for (int j = 1; j < k; j++) {
        if (alphas[j] > amx)
            amx = alphas[j];
    }
    double asum = 0.0;
    for (int j = 0; j < k; j++)
        asum += exp(alphas[j] - amx);
    double lse_alpha = log(asum) + amx;

    double err = -0.5 * n * d * log(2.0 * pi) + slse - n * lse_alpha;

    /* The Wishart prior. */
    int nw = d + wishart_m + 1;
    double lgd = 0.25 * d * (d - 1) * log(pi);
    for (int p = 1; p <= d; p++)
        lgd += lgamma(0.5 * nw + 0.5 * (1 - p));
    double cst = nw * d * (log(wishart_gamma) - 0.5 * log(2.0)) - lgd;
    double prior = 0.0;
    for (int j = 0; j < k; j++) {
        double frob = 0.0;
        for (int p = 0; p < d; p++)
            frob += qdiag[j * d + p] * qdiag[j * d + p];
        for (int p = 0; p < lsz; p++)
            frob += l[j * lsz + p] * l[j * lsz + p];
        prior += 0.5 * wishart_gamma * wishart_gamma * frob - wishart_m * sum_qs[j];
    }
    return err - prior + k * cst;
}
