/*
 * GradBench's gmm and lstm on the reverse tape, written as a user of the tape API writes
 * them (tape_objectives.h): the plain C of bench/objectives/gmm.c and lstm.c with every
 * double that depends on the inputs a cr_var and every operation a named tape operation.
 */
#include <math.h>

#include "tape_objectives.h"

cr_status tape_gmm(cr_tape *t, const cr_var *x, size_t nx, cr_var *y, size_t m, void *env)
{
    const tape_gmm_env *e = env;
    int d = e->d, k = e->k, n = e->n, lsz = d * (d - 1) / 2;
    (void)m;
    if (nx != tape_gmm_nin(d, k))
        return CR_ESHAPE;
    const cr_var *alphas = x, *means = x + k, *q = x + k + k * d, *l = x + k + 2 * k * d;
    cr_var *qdiag = e->work, *sum_qs = qdiag + k * d, *main_term = sum_qs + k;
    cr_var *xc = main_term + k, *qxc = xc + d;
    const double pi = 3.14159265358979323846;

    for (int i = 0; i < d * k; i++)
        qdiag[i] = cr_exp(t, q[i]);
    for (int j = 0; j < k; j++) {
        sum_qs[j] = q[j * d];
        for (int p = 1; p < d; p++)
            sum_qs[j] = cr_add(t, sum_qs[j], q[j * d + p]);
    }

    cr_var slse = cr_const(0.0);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < k; j++) {
            for (int p = 0; p < d; p++) {
                xc[p] = cr_sub(t, cr_const(e->x[i * d + p]), means[j * d + p]);
                qxc[p] = cr_mul(t, qdiag[j * d + p], xc[p]);
            }
            int li = j * lsz;
            for (int p = 0; p < d; p++)
                for (int r = p + 1; r < d; r++)
                    qxc[r] = cr_add(t, qxc[r], cr_mul(t, l[li++], xc[p]));
            cr_var sq = cr_mul(t, qxc[0], qxc[0]);
            for (int p = 1; p < d; p++)
                sq = cr_add(t, sq, cr_mul(t, qxc[p], qxc[p]));
            main_term[j] = cr_sub(t, cr_add(t, alphas[j], sum_qs[j]), cr_mul(t, cr_const(0.5), sq));
        }
        cr_var mx = main_term[0];
        for (int j = 1; j < k; j++)
            mx = cr_max(t, mx, main_term[j]);
        cr_var semx = cr_exp(t, cr_sub(t, main_term[0], mx));
        for (int j = 1; j < k; j++)
            semx = cr_add(t, semx, cr_exp(t, cr_sub(t, main_term[j], mx)));
        slse = cr_add(t, slse, cr_add(t, cr_log(t, semx), mx));
    }

    cr_var amx = alphas[0];
    for (int j = 1; j < k; j++)
        amx = cr_max(t, amx, alphas[j]);
    cr_var asum = cr_exp(t, cr_sub(t, alphas[0], amx));
    for (int j = 1; j < k; j++)
        asum = cr_add(t, asum, cr_exp(t, cr_sub(t, alphas[j], amx)));
    cr_var lse_alpha = cr_add(t, cr_log(t, asum), amx);
    cr_var err = cr_sub(t, cr_add(t, cr_const(-0.5 * n * d * log(2.0 * pi)), slse),
                        cr_mul(t, cr_const((double)n), lse_alpha));

    /* The Wishart prior. */
    int nw = d + e->m + 1;
    double lgd = 0.25 * d * (d - 1) * log(pi);
    for (int p = 1; p <= d; p++)
        lgd += lgamma(0.5 * nw + 0.5 * (1 - p));
    double cst = nw * d * (log(e->gamma) - 0.5 * log(2.0)) - lgd;
    cr_var prior = cr_const(0.0);
    for (int j = 0; j < k; j++) {
        cr_var frob = cr_const(0.0);
        for (int p = 0; p < d; p++)
            frob = cr_add(t, frob, cr_mul(t, qdiag[j * d + p], qdiag[j * d + p]));
        for (int p = 0; p < lsz; p++)
            frob = cr_add(t, frob, cr_mul(t, l[j * lsz + p], l[j * lsz + p]));
        prior = cr_add(t, prior,
                       cr_sub(t, cr_mul(t, cr_const(0.5 * e->gamma * e->gamma), frob),
                              cr_mul(t, cr_const((double)e->m), sum_qs[j])));
    }
    y[0] = cr_add(t, cr_sub(t, err, prior), cr_const(k * cst));
    return cr_tape_status(t);
}

cr_status tape_lstm(cr_tape *t, const cr_var *x, size_t nx, cr_var *y, size_t m, void *env)
{
    const tape_lstm_env *e = env;
    int l = e->l, c = e->c, b = e->b;
    (void)m;
    if (nx != tape_lstm_nin(l, b))
        return CR_ESHAPE;
    const cr_var *mp = x, *ep = x + 8 * l * b;
    const double *seq = e->sequence;
    cr_var *st = e->work, *ypred = st + 2 * l * b;
    for (int i = 0; i < 2 * l * b; i++)
        st[i] = cr_const(e->state[i]);

    cr_var total = cr_const(0.0);
    int count = 0;
    for (int ti = 0; ti < c - 1; ti++) {
        for (int i = 0; i < b; i++)
            ypred[i] = cr_mul(t, cr_const(seq[ti * b + i]), ep[i]);
        for (int ly = 0; ly < l; ly++) {
            int pb = 8 * b * ly, sb = 2 * b * ly;
            for (int i = 0; i < b; i++) {
                cr_var in = ly == 0 ? ypred[i] : st[sb - 2 * b + i];
                cr_var hid = st[sb + i];
                cr_var forget =
                    cr_logistic(t, cr_add(t, cr_mul(t, in, mp[pb + i]), mp[pb + 4 * b + i]));
                cr_var ingate =
                    cr_logistic(t, cr_add(t, cr_mul(t, hid, mp[pb + b + i]), mp[pb + 5 * b + i]));
                cr_var outgate = cr_logistic(
                    t, cr_add(t, cr_mul(t, in, mp[pb + 2 * b + i]), mp[pb + 6 * b + i]));
                cr_var change =
                    cr_tanh(t, cr_add(t, cr_mul(t, hid, mp[pb + 3 * b + i]), mp[pb + 7 * b + i]));
                st[sb + b + i] =
                    cr_add(t, cr_mul(t, st[sb + b + i], forget), cr_mul(t, ingate, change));
                st[sb + i] = cr_mul(t, outgate, cr_tanh(t, st[sb + b + i]));
            }
        }
        int top = 2 * b * (l - 1);
        cr_var sum = cr_const(0.0);
        for (int i = 0; i < b; i++) {
            ypred[i] = cr_add(t, cr_mul(t, st[top + i], ep[b + i]), ep[2 * b + i]);
            sum = cr_add(t, sum, cr_exp(t, ypred[i]));
        }
        cr_var lse = cr_log(t, cr_add(t, sum, cr_const(2.0)));
        for (int i = 0; i < b; i++)
            total = cr_add(t, total,
                           cr_mul(t, cr_const(seq[(ti + 1) * b + i]), cr_sub(t, ypred[i], lse)));
        count += b;
    }
    y[0] = cr_div(t, cr_neg(t, total), cr_const((double)count));
    return cr_tape_status(t);
}
