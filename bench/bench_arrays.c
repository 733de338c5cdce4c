/*
 * chainrules-bench-arrays: speed figures of the array and linear-algebra rules, one line
 * each as `name value unit`, medians of several runs. Never a test: run it by hand (see
 * BENCHMARKS.md). BLAS runs on one thread (OPENBLAS_NUM_THREADS=1, set by re-executing the
 * program when the environment lacks it), so the ratios compare like with like.
 *
 *   mlp_ratio              gradient of an MLP 784-256-10 (tanh hidden layer, softmax
 *                          cross-entropy, batch 128, f64) through the rules, rrules chained
 *                          by hand as in the ChainRules example, over a hand-written CBLAS
 *                          forward + backward pass timed in the same run (both computing
 *                          the loss and the four parameter gradients, checked equal)
 *   matmul_pullback_ratio  512 x 512: matmul's pullback with both cotangents evaluated,
 *                          over the forward rrule (one gemm)
 *   matmul_accum_ratio     the same pullback accumulated with add!! into existing buffers
 *                          (gemm with beta = 1, no temporaries), over the forward
 *   mlp_ms, mlp_ref_ms     the two MLP gradients, per batch
 *
 * Usage: chainrules-bench-arrays [figure...]   (no argument: all figures)
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <chainrules.h>

#include "bench_util.h"

#if defined(CR_HAVE_CBLAS)
#include <cblas.h>
#endif

#define RUNS 7

static void die(const char *what, cr_status st, cr_ctx *ctx)
{
    fprintf(stderr, "chainrules-bench-arrays: %s: %s (%s)\n", what, cr_status_name(st),
            ctx != NULL ? cr_ctx_errmsg(ctx) : "");
    exit(1);
}

#define CHECK(call)                 \
    do {                            \
        cr_status st_ = (call);     \
        if (st_ != CR_OK)           \
            die(#call, st_, g_ctx); \
    } while (0)

static cr_ctx *g_ctx;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) * 0x1.0p-53;
}

static double *rand_buf(size_t n, double scale)
{
    double *p = malloc(n * sizeof *p);
    if (p == NULL)
        exit(1);
    for (size_t i = 0; i < n; i++)
        p[i] = scale * (2 * urand() - 1);
    return p;
}

/* The value of a (possibly thunked) array tangent. */
static const double *grad_data(cr_tangent t)
{
    cr_tangent v;
    CHECK(cr_tangent_unthunk(t, &v));
    if (v.tag != CR_TAN_ARRAY || !cr_array_is_contiguous(v.u.arr) || v.u.arr->dtype != CR_DT_F64)
        die("gradient is not a contiguous f64 array", CR_ETANGENT, NULL);
    return v.u.arr->data;
}

/* ---- The MLP ------------------------------------------------------------------------------ */

enum { B = 128, NI = 784, NH = 256, NO = 10 };

typedef struct mlp {
    double *X, *Y, *W1, *b1, *W2, *b2; /* data and parameters */
    double *gW1, *gb1, *gW2, *gb2;     /* gradients */
    double loss;
    /* the reference's work buffers */
    double *Hr, *Pr, *dA2, *dH;
} mlp;

static void mlp_init(mlp *m)
{
    m->X = rand_buf((size_t)B * NI, 1.0);
    m->W1 = rand_buf((size_t)NI * NH, 1.0 / sqrt((double)NI));
    m->b1 = rand_buf(NH, 0.1);
    m->W2 = rand_buf((size_t)NH * NO, 1.0 / sqrt((double)NH));
    m->b2 = rand_buf(NO, 0.1);
    m->Y = calloc((size_t)B * NO, sizeof(double));
    for (size_t i = 0; i < B; i++)
        m->Y[i * NO + (size_t)(urand() * NO) % NO] = 1;
    m->gW1 = malloc((size_t)NI * NH * sizeof(double));
    m->gb1 = malloc(NH * sizeof(double));
    m->gW2 = malloc((size_t)NH * NO * sizeof(double));
    m->gb2 = malloc(NO * sizeof(double));
    m->Hr = malloc((size_t)B * NH * sizeof(double));
    m->Pr = malloc((size_t)B * NO * sizeof(double));
    m->dA2 = malloc((size_t)B * NO * sizeof(double));
    m->dH = malloc((size_t)B * NH * sizeof(double));
    if (m->Y == NULL || m->gW1 == NULL || m->gb1 == NULL || m->gW2 == NULL || m->gb2 == NULL ||
        m->Hr == NULL || m->Pr == NULL || m->dA2 == NULL || m->dH == NULL)
        exit(1);
}

#if defined(CR_HAVE_CBLAS)
/* Hand-written forward + backward with CBLAS: loss = -Σ Y log softmax(tanh(X W1 + b1) W2 + b2) / B.
 */
static void mlp_reference(mlp *m, double *grads[4])
{
    double *H = m->Hr, *P = m->Pr;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, NH, NI, 1.0, m->X, NI, m->W1, NH, 0.0,
                H, NH);
    for (size_t i = 0; i < B; i++)
        for (size_t j = 0; j < NH; j++)
            H[i * NH + j] = tanh(H[i * NH + j] + m->b1[j]);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, NO, NH, 1.0, H, NH, m->W2, NO, 0.0, P,
                NO);
    double loss = 0;
    for (size_t i = 0; i < B; i++) {
        double *z = P + i * NO, mx = -HUGE_VAL, s = 0;
        for (size_t j = 0; j < NO; j++) {
            z[j] += m->b2[j];
            mx = fmax(mx, z[j]);
        }
        for (size_t j = 0; j < NO; j++)
            s += exp(z[j] - mx);
        double lse = mx + log(s);
        for (size_t j = 0; j < NO; j++) {
            loss -= m->Y[i * NO + j] * (z[j] - lse);
            /* dA2 = (softmax - Y) / B */
            m->dA2[i * NO + j] = (exp(z[j] - lse) - m->Y[i * NO + j]) / B;
        }
    }
    m->loss = loss / B;
    double *gW1 = grads[0], *gb1 = grads[1], *gW2 = grads[2], *gb2 = grads[3];
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NH, NO, B, 1.0, H, NH, m->dA2, NO, 0.0,
                gW2, NO);
    for (size_t j = 0; j < NO; j++)
        gb2[j] = 0;
    for (size_t i = 0; i < B; i++)
        for (size_t j = 0; j < NO; j++)
            gb2[j] += m->dA2[i * NO + j];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, NH, NO, 1.0, m->dA2, NO, m->W2, NO, 0.0,
                m->dH, NH);
    for (size_t j = 0; j < NH; j++)
        gb1[j] = 0;
    for (size_t i = 0; i < B; i++)
        for (size_t j = 0; j < NH; j++) {
            double h = H[i * NH + j], d = m->dH[i * NH + j] * (1 - h * h);
            m->dH[i * NH + j] = d;
            gb1[j] += d;
        }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NI, NH, B, 1.0, m->X, NI, m->dH, NH, 0.0,
                gW1, NH);
}
#endif

/* The same through the rules: eight rrules chained by hand, then their pullbacks in reverse.
 * The gradients are read from the cotangents' values (thunks unthunked); the cotangents of
 * X and Y are never evaluated. */
static void mlp_rules(cr_arena *arena, mlp *m, const double *grads[4])
{
    size_t sx[2] = {B, NI}, sw1[2] = {NI, NH}, sb1 = NH, sw2[2] = {NH, NO}, sb2 = NO,
           sy[2] = {B, NO};
    cr_array X, W1, b1, W2, b2, Y;
    cr_array_view_init(&X, m->X, CR_DT_F64, 2, sx, NULL);
    cr_array_view_init(&W1, m->W1, CR_DT_F64, 2, sw1, NULL);
    cr_array_view_init(&b1, m->b1, CR_DT_F64, 1, &sb1, NULL);
    cr_array_view_init(&W2, m->W2, CR_DT_F64, 2, sw2, NULL);
    cr_array_view_init(&b2, m->b2, CR_DT_F64, 1, &sb2, NULL);
    cr_array_view_init(&Y, m->Y, CR_DT_F64, 2, sy, NULL);
    static const cr_function *tanh_fn;
    if (tanh_fn == NULL)
        tanh_fn = cr_registry_find(cr_registry_builtin(), "tanh");
    cr_value vtanh = cr_value_function(tanh_fn, NULL);
    cr_value z1, a1, h, z2, a2, lp, p, s;
    cr_pullback pz1, pa1, ph, pz2, pa2, plp, pp, ps;
    cr_value args[3];
    args[0] = cr_value_array(&X);
    args[1] = cr_value_array(&W1);
    CHECK(cr_rrule(NULL, arena, &cr_fn_matmul, args, 2, &z1, &pz1));
    args[0] = cr_fn_add;
    args[1] = z1;
    args[2] = cr_value_array(&b1);
    CHECK(cr_rrule(NULL, arena, &cr_fn_broadcast, args, 3, &a1, &pa1));
    args[0] = vtanh;
    args[1] = a1;
    CHECK(cr_rrule(NULL, arena, &cr_fn_broadcast, args, 2, &h, &ph));
    args[0] = h;
    args[1] = cr_value_array(&W2);
    CHECK(cr_rrule(NULL, arena, &cr_fn_matmul, args, 2, &z2, &pz2));
    args[0] = cr_fn_add;
    args[1] = z2;
    args[2] = cr_value_array(&b2);
    CHECK(cr_rrule(NULL, arena, &cr_fn_broadcast, args, 3, &a2, &pa2));
    args[0] = a2;
    args[1] = cr_value_i64(1);
    CHECK(cr_rrule(NULL, arena, &cr_fn_logsoftmax, args, 2, &lp, &plp));
    args[0] = cr_fn_mul;
    args[1] = cr_value_array(&Y);
    args[2] = lp;
    CHECK(cr_rrule(NULL, arena, &cr_fn_broadcast, args, 3, &p, &pp));
    CHECK(cr_rrule(NULL, arena, &cr_fn_sum, &p, 1, &s, &ps));
    m->loss = -s.u.f64 / B;

    cr_tangent ds = cr_tangent_f64(-1.0 / B), d1[2], d3[4], d2[3], d3b[4], d2b[3], d3c[4], d3d[4];
    CHECK(cr_pullback_call(arena, &ps, &ds, d1, 2));       /* sum */
    CHECK(cr_pullback_call(arena, &pp, &d1[1], d3, 4));    /* Y .* lp: d3[3] = d lp */
    CHECK(cr_pullback_call(arena, &plp, &d3[3], d2, 3));   /* logsoftmax: d2[1] = d a2 */
    CHECK(cr_pullback_call(arena, &pa2, &d2[1], d3b, 4));  /* z2 .+ b2 */
    grads[3] = grad_data(d3b[3]);                          /* b2 */
    CHECK(cr_pullback_call(arena, &pz2, &d3b[2], d2b, 3)); /* H W2 */
    grads[2] = grad_data(d2b[2]);                          /* W2 */
    CHECK(cr_pullback_call(arena, &ph, &d2b[1], d3c, 3));  /* tanh: d3c[2] = d a1 */
    CHECK(cr_pullback_call(arena, &pa1, &d3c[2], d3d, 4)); /* z1 .+ b1 */
    grads[1] = grad_data(d3d[3]);                          /* b1 */
    cr_tangent dz1[3];
    CHECK(cr_pullback_call(arena, &pz1, &d3d[2], dz1, 3)); /* X W1 */
    grads[0] = grad_data(dz1[2]);                          /* W1 */
}

static double max_rel_diff(const double *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs(a[i] - b[i]));
        den = fmax(den, fabs(b[i]));
    }
    return den > 0 ? num / den : num;
}

static void bench_mlp(cr_arena *arena, bool print_ratio, bool print_ms)
{
#if defined(CR_HAVE_CBLAS)
    mlp m;
    mlp_init(&m);
    double *ref[4] = {m.gW1, m.gb1, m.gW2, m.gb2};
    const double *got[4];
    /* Check once: same loss, same gradients. */
    mlp_reference(&m, ref);
    double ref_loss = m.loss;
    mlp_rules(arena, &m, got);
    size_t sizes[4] = {(size_t)NI * NH, NH, (size_t)NH * NO, NO};
    double worst = fabs(m.loss - ref_loss) / fabs(ref_loss);
    for (int k = 0; k < 4; k++)
        worst = fmax(worst, max_rel_diff(got[k], ref[k], sizes[k]));
    if (!(worst < 1e-10)) {
        fprintf(stderr, "chainrules-bench-arrays: MLP gradients differ (relative %.3g)\n", worst);
        exit(1);
    }
    cr_arena_reset(arena);
    const int iters = 20;
    double t_rules[RUNS], t_ref[RUNS];
    for (int r = 0; r < RUNS; r++) {
        /* Interleave the two, so that machine load affects both alike. */
        double t0 = bench_now_ns();
        for (int i = 0; i < iters; i++)
            mlp_reference(&m, ref);
        double t1 = bench_now_ns();
        for (int i = 0; i < iters; i++) {
            cr_arena_reset(arena);
            mlp_rules(arena, &m, got);
        }
        double t2 = bench_now_ns();
        t_ref[r] = (t1 - t0) / iters;
        t_rules[r] = (t2 - t1) / iters;
    }
    double a = bench_median(t_rules, RUNS), b = bench_median(t_ref, RUNS);
    if (print_ratio)
        printf("mlp_ratio %.3f x\n", a / b);
    if (print_ms) {
        printf("mlp_ms %.3f ms\n", a / 1e6);
        printf("mlp_ref_ms %.3f ms\n", b / 1e6);
    }
    cr_arena_reset(arena);
#else
    (void)arena;
    (void)print_ratio;
    (void)print_ms;
    printf("mlp_ratio - (built without CBLAS)\n");
#endif
}

/* ---- matmul's pullback ------------------------------------------------------------------- */

static void bench_matmul(cr_arena *arena, bool print_pb, bool print_acc)
{
    enum { N = 512 };
    size_t shape[2] = {N, N};
    double *a = rand_buf((size_t)N * N, 1), *b = rand_buf((size_t)N * N, 1),
           *g = rand_buf((size_t)N * N, 1);
    cr_array A, Bm, G;
    cr_array_view_init(&A, a, CR_DT_F64, 2, shape, NULL);
    cr_array_view_init(&Bm, b, CR_DT_F64, 2, shape, NULL);
    cr_array_view_init(&G, g, CR_DT_F64, 2, shape, NULL);
    cr_value args[2] = {cr_value_array(&A), cr_value_array(&Bm)}, y;
    cr_pullback pb;
    cr_tangent dy = cr_tangent_array(&G), dx[3], v;
    cr_array *accA, *accB;
    CHECK(cr_array_new(arena, CR_DT_F64, 2, shape, &accA));
    CHECK(cr_array_new(arena, CR_DT_F64, 2, shape, &accB));
    cr_arena_mark mark = cr_arena_get_mark(arena);
    double t_fwd[RUNS], t_pb[RUNS], t_acc[RUNS];
    const int iters = 4;
    /* Warm up (BLAS buffers, page faults of the arena). */
    CHECK(cr_rrule(NULL, arena, &cr_fn_matmul, args, 2, &y, &pb));
    CHECK(cr_pullback_call(arena, &pb, &dy, dx, 3));
    CHECK(cr_tangent_unthunk(dx[1], &v));
    CHECK(cr_tangent_unthunk(dx[2], &v));
    /* Each iteration: the forward rrule, the pullback with both thunks evaluated, the
     * pullback accumulated with add!! (the thunks' add! runs gemm into accA, accB). */
    for (int r = 0; r < RUNS; r++) {
        double fwd = 0, pbt = 0, acc = 0;
        for (int i = 0; i < iters; i++) {
            cr_arena_rewind(arena, mark);
            double s0 = bench_now_ns();
            CHECK(cr_rrule(NULL, arena, &cr_fn_matmul, args, 2, &y, &pb));
            double s1 = bench_now_ns();
            CHECK(cr_pullback_call(arena, &pb, &dy, dx, 3));
            CHECK(cr_tangent_unthunk(dx[1], &v));
            CHECK(cr_tangent_unthunk(dx[2], &v));
            double s2 = bench_now_ns();
            CHECK(cr_pullback_call(arena, &pb, &dy, dx, 3));
            CHECK(cr_tangent_accum(arena, cr_tangent_array(accA), dx[1], &v));
            CHECK(cr_tangent_accum(arena, cr_tangent_array(accB), dx[2], &v));
            double s3 = bench_now_ns();
            fwd += s1 - s0;
            pbt += s2 - s1;
            acc += s3 - s2;
        }
        t_fwd[r] = fwd / iters;
        t_pb[r] = pbt / iters;
        t_acc[r] = acc / iters;
    }
    double f = bench_median(t_fwd, RUNS), p = bench_median(t_pb, RUNS),
           c = bench_median(t_acc, RUNS);
    if (print_pb)
        printf("matmul_pullback_ratio %.3f x\n", p / f);
    if (print_acc)
        printf("matmul_accum_ratio %.3f x\n", c / f);
    cr_arena_rewind(arena, mark);
    free(a);
    free(b);
    free(g);
}

/* BLAS reads OPENBLAS_NUM_THREADS when it is loaded, before main: set it and start again. */
static void single_threaded_blas(char **argv)
{
    if (getenv("OPENBLAS_NUM_THREADS") != NULL)
        return;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 0);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with whatever threading BLAS chose. */
}

static bool wanted(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    single_threaded_blas(argv);
    cr_arena *arena;
    if (cr_ctx_new(NULL, &g_ctx) != CR_OK || cr_arena_new(g_ctx, NULL, &arena) != CR_OK)
        return 1;
    if (wanted(argc, argv, "mlp_ratio") || wanted(argc, argv, "mlp_ms"))
        bench_mlp(arena, wanted(argc, argv, "mlp_ratio"), wanted(argc, argv, "mlp_ms"));
    if (wanted(argc, argv, "matmul_pullback_ratio") || wanted(argc, argv, "matmul_accum_ratio"))
        bench_matmul(arena, wanted(argc, argv, "matmul_pullback_ratio"),
                     wanted(argc, argv, "matmul_accum_ratio"));
    cr_arena_free(arena);
    cr_ctx_free(g_ctx);
    return 0;
}
