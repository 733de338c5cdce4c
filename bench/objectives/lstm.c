/*
 * GradBench's lstm objective (cpp/gradbench/evals/lstm.hpp, from ADBench): an l-layer
 * element-wise LSTM of width b predicts each next character of a sequence; the loss is the
 * mean negative log-likelihood, with logsumexp_2(v) = log(sum(exp(v)) + 2).
 *
 * Layer ly, element i, at each character: with `in` the layer's input (the scaled
 * character for layer 0, the new hidden values of layer ly - 1 above) and h, c its state,
 *   forget = sigmoid(in Wf + bf),  ingate = sigmoid(h Wi + bi),
 *   outgate = sigmoid(in Wo + bo), change = tanh(h Wc + bc),
 *   c = c forget + ingate change,  h = outgate tanh(c).
 */
#include <math.h>

#include "objectives.h"

double lstm_objective(int l, int c, int b, const double *main_params, const double *extra_params,
                      const double *state, const double *sequence)
{
    double st[2 * LSTM_MAX_L * LSTM_MAX_B];
    double ypred[LSTM_MAX_B];

    if (l < 1 || l > LSTM_MAX_L || b < 1 || b > LSTM_MAX_B || c < 2)
        return 0.0 / 0.0;
    for (int i = 0; i < 2 * l * b; i++)
        st[i] = state[i];

    double total = 0.0;
    int count = 0;
    for (int t = 0; t < c - 1; t++) {
        for (int i = 0; i < b; i++)
            ypred[i] = sequence[t * b + i] * extra_params[i];
        for (int ly = 0; ly < l; ly++) {
            int pb = 8 * b * ly;
            int sb = 2 * b * ly;
            for (int i = 0; i < b; i++) {
                double in;
                if (ly == 0)
                    in = ypred[i];
                else
                    in = st[sb - 2 * b + i];
                double hid = st[sb + i];
                double forget =
                    1.0 / (1.0 + exp(-(in * main_params[pb + i] + main_params[pb + 4 * b + i])));
                double ingate =
                    1.0 /
                    (1.0 + exp(-(hid * main_params[pb + b + i] + main_params[pb + 5 * b + i])));
                double outgate =
                    1.0 /
                    (1.0 + exp(-(in * main_params[pb + 2 * b + i] + main_params[pb + 6 * b + i])));
                double change =
                    tanh(hid * main_params[pb + 3 * b + i] + main_params[pb + 7 * b + i]);
                st[sb + b + i] = st[sb + b + i] * forget + ingate * change;
                st[sb + i] = outgate * tanh(st[sb + b + i]);
            }
        }
        int top = 2 * b * (l - 1);
        double sum = 0.0;
        for (int i = 0; i < b; i++) {
            ypred[i] = st[top + i] * extra_params[b + i] + extra_params[2 * b + i];
            sum += exp(ypred[i]);
        }
        double lse = log(sum + 2.0);
        for (int i = 0; i < b; i++)
            total += sequence[(t + 1) * b + i] * (ypred[i] - lse);
        count += b;
    }
    return -total / count;
}
