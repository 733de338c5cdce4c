/*
 * Deterministic inputs for the objectives, distributed as GradBench's generators
 * (python/gradbench/gradbench/evals/<name>/run.py) without reproducing its values: a
 * splitmix64 stream, uniforms from its top 53 bits, normals by Box-Muller.
 */
#include <math.h>
#include <stdint.h>

#include "objectives.h"

typedef struct obj_rng {
    uint64_t s;
} obj_rng;

static uint64_t rng_next(obj_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_uniform(obj_rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

static double rng_normal(obj_rng *r)
{
    double u = 1.0 - rng_uniform(r); /* (0, 1] */
    double v = rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static obj_rng rng_seeded(unsigned long seed)
{
    obj_rng r = {(uint64_t)seed * 0x2545f4914f6cdd1du + 1u};
    return r;
}

void obj_fill_uniform(double *x, long n, double lo, double hi, unsigned long seed)
{
    obj_rng r = rng_seeded(seed);
    for (long i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * rng_uniform(&r);
}

void obj_fill_normal(double *x, long n, unsigned long seed)
{
    obj_rng r = rng_seeded(seed);
    for (long i = 0; i < n; i++)
        x[i] = rng_normal(&r);
}

void gmm_make_input(int d, int k, int n, unsigned long seed, double *alphas, double *means,
                    double *q, double *l, double *x)
{
    obj_rng r = rng_seeded(seed);
    for (long i = 0; i < (long)n * d; i++)
        x[i] = rng_normal(&r);
    for (int i = 0; i < k; i++)
        alphas[i] = rng_normal(&r);
    for (long i = 0; i < (long)k * d; i++)
        means[i] = rng_uniform(&r);
    for (long i = 0; i < (long)k * d; i++)
        q[i] = rng_normal(&r);
    for (long i = 0; i < (long)k * d * (d - 1) / 2; i++)
        l[i] = rng_normal(&r);
}

void lstm_make_input(int l, int c, int b, unsigned long seed, double *main_params,
                     double *extra_params, double *state, double *sequence)
{
    obj_rng r = rng_seeded(seed);
    for (long i = 0; i < 2L * l * b; i++)
        state[i] = rng_uniform(&r);
    for (long i = 0; i < 8L * l * b; i++)
        main_params[i] = rng_uniform(&r);
    for (long i = 0; i < 3L * b; i++)
        extra_params[i] = rng_uniform(&r);
    for (long t = 0; t < c; t++) {
        unsigned ch = 32u + (unsigned)(rng_next(&r) % 95u);
        for (int i = 0; i < b; i++) {
            int bit = b - 1 - i;
            sequence[t * b + i] = bit < 32 && ((ch >> bit) & 1u) ? 1.0 : 0.0;
        }
    }
}

/* GradBench's evals/ba/data/ba1_n49_m7776_p31843.txt: its one camera, point, weight and
 * feature. */
static const double k_ba1_cam[BA_NCAMPARAMS] = {-0.758453, -1.109613, -0.845551,  34.556073,
                                                39.676747, 53.881673, 419.194514, 5.864426,
                                                -8.518870, 0.087812,  0.002739};
static const double k_ba1_x[3] = {7.203245, 0.001144, 3.023326};
static const double k_ba1_w = 0.417022;
static const double k_ba1_feat[2] = {271.760969, 834.209256};

void ba_make_block(unsigned long seed, double *cam, double *X, double *w, double *feat)
{
    obj_rng r = rng_seeded(seed);
    for (int i = 0; i < BA_NCAMPARAMS; i++)
        cam[i] = k_ba1_cam[i] * (1.0 + 0.05 * (2.0 * rng_uniform(&r) - 1.0));
    for (int i = 0; i < 3; i++)
        X[i] = k_ba1_x[i] + 0.5 * (2.0 * rng_uniform(&r) - 1.0);
    w[0] = k_ba1_w * (1.0 + 0.1 * (2.0 * rng_uniform(&r) - 1.0));
    for (int i = 0; i < 2; i++)
        feat[i] = k_ba1_feat[i] * (1.0 + 0.05 * (2.0 * rng_uniform(&r) - 1.0));
}

void ba_make_problem(int n, int m, int p, unsigned long seed, double *cams, double *X, double *w,
                     int *obs, double *feats)
{
    double cam[BA_NCAMPARAMS], x[3], wi, f[2];
    unsigned long s = seed * 1000003ul;
    for (int i = 0; i < n; i++) {
        ba_make_block(s++, cam, x, &wi, f);
        for (int j = 0; j < BA_NCAMPARAMS; j++)
            cams[i * BA_NCAMPARAMS + j] = cam[j];
    }
    for (int i = 0; i < m; i++) {
        ba_make_block(s++, cam, x, &wi, f);
        for (int j = 0; j < 3; j++)
            X[i * 3 + j] = x[j];
    }
    for (int i = 0; i < p; i++) {
        ba_make_block(s++, cam, x, &wi, f);
        w[i] = wi;
        feats[2 * i] = f[0];
        feats[2 * i + 1] = f[1];
        obs[2 * i] = i % n;
        obs[2 * i + 1] = i % m;
    }
}

void ode_make_input(int n, unsigned long seed, double *x)
{
    obj_fill_uniform(x, n, 0.0, 1.0, seed);
}
