/*
 * Hand-written gradient of lstm_objective() with respect to main_params and extra_params.
 *
 * Every operation of the element-wise LSTM acts on one element i of each layer, so the
 * forward pass keeps, per character t, layer ly and element i, the gate values and the
 * values they were computed from (in, h, c before the update, forget, ingate, outgate,
 * change, tanh(c) after: 8 doubles), and the prediction's softmax weights per character.
 * The reverse pass walks the characters backwards carrying the adjoints of each layer's
 * hidden and cell values (hb, cb), layers top-down within a character (layer ly's input is
 * layer ly - 1's new hidden value: its adjoint is added to hb[ly - 1] before that layer is
 * visited).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "objectives.h"

enum { S_IN, S_H, S_C, S_F, S_I, S_O, S_G, S_T, S_N };

double lstm_objective_grad(int l, int c, int b, const double *main_params, double *main_params_b,
                           const double *extra_params, double *extra_params_b, const double *state,
                           const double *sequence, double lstm_objective_b)
{
    if (l < 1 || l > LSTM_MAX_L || b < 1 || b > LSTM_MAX_B || c < 2)
        return (double)NAN;
    long steps = (long)(c - 1), lb = (long)l * b;
    /* saved gates: steps * l * b * S_N; softmax weights: steps * b; state: 2 l b;
     * adjoints hb, cb: l b each; parameter sums: 8 l b + 3 b */
    long nsave = steps * lb * S_N, nsm = steps * b;
    long nbuf = nsave + nsm + 2 * lb + 2 * lb + 8 * lb + 3 * (long)b;
    double *buf = calloc((size_t)nbuf, sizeof *buf);
    if (buf == NULL)
        return (double)NAN;
    double *sv = buf, *sm = sv + nsave, *st = sm + nsm, *hb = st + 2 * lb, *cb = hb + lb;
    double *gm = cb + lb, *ge = gm + 8 * lb;
    memcpy(st, state, (size_t)(2 * lb) * sizeof *st);

    const double *inw = extra_params, *outw = extra_params + b, *outb = extra_params + 2 * b;
    double total = 0.0;
    for (long t = 0; t < steps; t++) {
        const double *xt = sequence + t * b;
        for (int ly = 0; ly < l; ly++) {
            const double *P = main_params + (long)8 * b * ly;
            double *h = st + (long)2 * b * ly, *cl = h + b;
            const double *hin = ly > 0 ? h - 2 * b : NULL; /* layer ly - 1's new hidden values */
            double *s = sv + (t * l + ly) * b * S_N;
            for (int i = 0; i < b; i++, s += S_N) {
                double in = ly == 0 ? xt[i] * inw[i] : hin[i];
                double hi = h[i], ci = cl[i];
                double f = 1.0 / (1.0 + exp(-(in * P[i] + P[4 * b + i])));
                double ig = 1.0 / (1.0 + exp(-(hi * P[b + i] + P[5 * b + i])));
                double o = 1.0 / (1.0 + exp(-(in * P[2 * b + i] + P[6 * b + i])));
                double g = tanh(hi * P[3 * b + i] + P[7 * b + i]);
                double cn = ci * f + ig * g;
                double tc = tanh(cn);
                s[S_IN] = in;
                s[S_H] = hi;
                s[S_C] = ci;
                s[S_F] = f;
                s[S_I] = ig;
                s[S_O] = o;
                s[S_G] = g;
                s[S_T] = tc;
                cl[i] = cn;
                h[i] = o * tc;
            }
        }
        const double *top = st + 2 * (lb - b);
        const double *ygold = sequence + (t + 1) * b;
        double *smt = sm + t * b, sum = 0.0, yp[LSTM_MAX_B];
        for (int i = 0; i < b; i++) {
            yp[i] = top[i] * outw[i] + outb[i];
            smt[i] = exp(yp[i]);
            sum += smt[i];
        }
        double lse = log(sum + 2.0);
        double isum = 1.0 / (sum + 2.0);
        for (int i = 0; i < b; i++) {
            total += ygold[i] * (yp[i] - lse);
            smt[i] *= isum;
        }
    }
    double count = (double)steps * b;
    double value = -total / count;

    /* Reverse. total_b = -seed / count; ypred_b_i = total_b (ygold_i - sm_i sum(ygold)). */
    double totb = -lstm_objective_b / count;
    for (long t = steps - 1; t >= 0; t--) {
        const double *xt = sequence + t * b, *ygold = sequence + (t + 1) * b;
        const double *smt = sm + t * b;
        double gsum = 0.0;
        for (int i = 0; i < b; i++)
            gsum += ygold[i];
        /* top layer's new hidden value at t: o tc, from the saved gates */
        const double *stop = sv + (t * l + (long)(l - 1)) * b * S_N;
        double *hbt = hb + (long)(l - 1) * b;
        for (int i = 0; i < b; i++) {
            double ypb = totb * (ygold[i] - smt[i] * gsum);
            double htop = stop[i * S_N + S_O] * stop[i * S_N + S_T];
            ge[b + i] += ypb * htop;
            ge[2 * b + i] += ypb;
            hbt[i] += ypb * outw[i];
        }
        for (int ly = l - 1; ly >= 0; ly--) {
            const double *P = main_params + (long)8 * b * ly;
            double *G = gm + (long)8 * b * ly;
            double *hbl = hb + (long)ly * b, *cbl = cb + (long)ly * b;
            double *hbin = ly > 0 ? hb + (long)(ly - 1) * b : NULL;
            const double *s = sv + (t * l + ly) * b * S_N;
            for (int i = 0; i < b; i++, s += S_N) {
                double in = s[S_IN], hi = s[S_H], ci = s[S_C], f = s[S_F], ig = s[S_I];
                double o = s[S_O], g = s[S_G], tc = s[S_T];
                double h_b = hbl[i];
                double ob = h_b * tc;
                double cnb = cbl[i] + h_b * o * (1.0 - tc * tc);
                double zf = cnb * ci * f * (1.0 - f);
                double zi = cnb * g * ig * (1.0 - ig);
                double zo = ob * o * (1.0 - o);
                double zg = cnb * ig * (1.0 - g * g);
                G[i] += zf * in;
                G[4 * b + i] += zf;
                G[b + i] += zi * hi;
                G[5 * b + i] += zi;
                G[2 * b + i] += zo * in;
                G[6 * b + i] += zo;
                G[3 * b + i] += zg * hi;
                G[7 * b + i] += zg;
                double inb = zf * P[i] + zo * P[2 * b + i];
                hbl[i] = zi * P[b + i] + zg * P[3 * b + i]; /* h at t - 1 */
                cbl[i] = cnb * f;                           /* c at t - 1 */
                if (ly > 0)
                    hbin[i] += inb;
                else
                    ge[i] += inb * xt[i];
            }
        }
    }

    for (long i = 0; i < 8 * lb; i++)
        main_params_b[i] += gm[i];
    for (int i = 0; i < 3 * b; i++)
        extra_params_b[i] += ge[i];
    free(buf);
    return value;
}
