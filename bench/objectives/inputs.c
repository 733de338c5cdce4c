/*
 * Deterministic inputs for the objectives, distributed as GradBench's generators
 * (python/gradbench/gradbench/evals/<name>/run.py) without reproducing its values: a
 * splitmix64 stream, uniforms from its top 53 bits, normals by Box-Muller.
 */
#include <math.h>
#include <stddef.h>
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

/* A rigid transform [R t; 0 1] with R = Rz(c) Ry(b) Rx(a), row-major. */
static void rigid(double a, double b, double c, const double *t, double *m)
{
    double ca = cos(a), sa = sin(a), cb = cos(b), sb = sin(b), cc = cos(c), sc = sin(c);
    double R[9] = {cc * cb,
                   cc * sb * sa - sc * ca,
                   cc * sb * ca + sc * sa,
                   sc * cb,
                   sc * sb * sa + cc * ca,
                   sc * sb * ca - cc * sa,
                   -sb,
                   cb * sa,
                   cb * ca};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++)
            m[i * 4 + j] = R[i * 3 + j];
        m[i * 4 + 3] = t[i];
    }
    m[12] = m[13] = m[14] = 0.0;
    m[15] = 1.0;
}

static void mat4_mul(const double *a, const double *b, double *out)
{
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++) {
            double s = 0.0;
            for (int j = 0; j < 4; j++)
                s += a[i * 4 + j] * b[j * 4 + k];
            out[i * 4 + k] = s;
        }
}

void ht_make_model(int nverts, unsigned long seed, int *parents, double *base_relatives,
                   double *inverse_base_absolutes, double *base_positions, double *weights)
{
    enum { NB = HT_MIN_BONES };
    obj_rng r = rng_seeded(seed);
    double absolutes[NB * 16];
    for (int b = 0; b < NB; b++) {
        if (b == 0 || b == NB - 1)
            parents[b] = b == 0 ? -1 : 0; /* wrist, forearm */
        else
            parents[b] = (b - 1) % 4 == 0 ? 0 : b - 1; /* finger bones in a chain */
        double ang[3], t[3];
        for (int i = 0; i < 3; i++)
            ang[i] = 0.5 * (2.0 * rng_uniform(&r) - 1.0);
        for (int i = 0; i < 3; i++)
            t[i] = 0.05 * (2.0 * rng_uniform(&r) - 1.0);
        double *m = base_relatives + b * 16, *A = absolutes + b * 16;
        rigid(ang[0], ang[1], ang[2], t, m);
        if (parents[b] < 0)
            for (int i = 0; i < 16; i++)
                A[i] = m[i];
        else
            mat4_mul(absolutes + parents[b] * 16, m, A);
        /* inverse of [R t; 0 1]: [R^T -R^T t; 0 1] */
        double *inv = inverse_base_absolutes + b * 16;
        for (int i = 0; i < 3; i++) {
            double s = 0.0;
            for (int j = 0; j < 3; j++) {
                inv[i * 4 + j] = A[j * 4 + i];
                s -= A[j * 4 + i] * A[j * 4 + 3];
            }
            inv[i * 4 + 3] = s;
        }
        inv[12] = inv[13] = inv[14] = 0.0;
        inv[15] = 1.0;
    }
    for (int v = 0; v < nverts; v++) {
        for (int i = 0; i < 3; i++)
            base_positions[v * 4 + i] = 0.1 * (2.0 * rng_uniform(&r) - 1.0);
        base_positions[v * 4 + 3] = 1.0;
        double *w = weights + v * NB, sum = 0.0;
        for (int b = 0; b < NB; b++)
            w[b] = 0.0;
        int nb = 1 + (int)(rng_next(&r) % 4u);
        for (int j = 0; j < nb; j++) {
            int b = (int)(rng_next(&r) % (uint64_t)NB);
            double x = 0.1 + rng_uniform(&r);
            w[b] += x;
            sum += x;
        }
        for (int b = 0; b < NB; b++)
            w[b] /= sum;
    }
}

void ht_make_input(int nverts, int ntri, int npts, unsigned long seed, double *theta,
                   int *correspondences, double *points, int *triangles, double *us)
{
    obj_rng r = rng_seeded(seed);
    for (int i = 0; i < HT_NTHETA; i++)
        theta[i] = 0.3 * rng_normal(&r);
    if (triangles != NULL) {
        for (int t = 0; t < ntri; t++) {
            int a = (int)(rng_next(&r) % (uint64_t)nverts), b = a, c = a;
            while (nverts > 2 && (b == a))
                b = (int)(rng_next(&r) % (uint64_t)nverts);
            while (nverts > 2 && (c == a || c == b))
                c = (int)(rng_next(&r) % (uint64_t)nverts);
            triangles[3 * t] = a;
            triangles[3 * t + 1] = b;
            triangles[3 * t + 2] = c;
        }
    }
    int range = triangles != NULL ? ntri : nverts;
    for (int i = 0; i < npts; i++) {
        correspondences[i] = (int)(rng_next(&r) % (uint64_t)range);
        for (int j = 0; j < 3; j++)
            points[3 * i + j] = 0.1 * (2.0 * rng_uniform(&r) - 1.0);
        if (us != NULL) {
            double u0 = rng_uniform(&r), u1 = rng_uniform(&r);
            if (u0 + u1 > 1.0) {
                u0 = 1.0 - u0;
                u1 = 1.0 - u1;
            }
            us[2 * i] = u0;
            us[2 * i + 1] = u1;
        }
    }
}
