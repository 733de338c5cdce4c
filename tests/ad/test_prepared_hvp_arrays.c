/*
 * Tests of prepared Hessian-vector products of functions of arrays (cr_prepare_hvp_arrays,
 * cr_prepared_hvp_arrays): value, gradient and H v at several new inputs and directions
 * against central differences of the same functions in plain C (the gradient by 5-point
 * differences, H v as the derivative of that gradient along v) and against cr_tape_ahvp on a
 * fresh second-order recording. The programs: Rosenbrock as one fused kernel, Rosenbrock as
 * array operations (views, broadcasts, a sum), and a function of two arrays through matmul,
 * logsumexp and norm (rules with their own second-order forms, which read the rule's result)
 * and broadcast, sum and dot kernels, and std(x) as the last operation (its form reads its
 * result's tangent, which the replay leaves out for a last kernel). Also: the first-order
 * replay on the same prepared H v,
 * strided and f32 arguments, a branch that holds or flips, a constant output, every bad
 * argument (nothing written, the prepared H v still usable), no allocation after the first
 * call, and allocation failures at every point.
 */
#include <chainrules/kernel.h>
#include <math.h>
#include <string.h>

#include "test_alloc.h"
#include "test_fault_hook.h"
#include "test_fdhvp.h"
#include "test_util.h"

#define MAXZ 12 /* all the inputs' elements together */

/* A program: its array inputs (1-d, of lengths len[]), the taped function and the same
 * function in plain C of all the elements together. */
typedef struct prog {
    cr_ad_array_fn f;
    cr_fd_vec_fn fc;
    size_t na, len[2];
} prog;

/* ---- Rosenbrock, as one kernel and as array operations ---------------------------------- */

#define ROSEN(x) \
    cr_k_add(cr_k_mul(100.0, cr_k_sq(cr_k_sub(x[1], cr_k_sq(x[0])))), cr_k_sq(cr_k_sub(1.0, x[0])))
CR_KERNEL(rosen_term, 2, ROSEN);

static cr_status rosen_kernel(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    size_t len = cr_array_numel(xs[0].a);
    cr_kin in[2] = {cr_kin_arr(xs[0], 0), cr_kin_arr(xs[0], 1)};
    *y = cr_av_kernel_sum(t, &rosen_term, in, 2, len - 1);
    return cr_tape_status(t);
}

/* sum(100 .* (x[2:end] .- x[1:end-1].^2).^2 .+ (1 .- x[1:end-1]).^2) */
static cr_status rosen_ops(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    int64_t len = (int64_t)cr_array_numel(xs[0].a);
    cr_avar lo = cr_av_slice(t, xs[0], 0, len - 1), hi = cr_av_slice(t, xs[0], 1, len);
    cr_avar a = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_arr(hi),
                                 cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(lo))));
    cr_avar b = cr_av_broadcast2(t, &cr_fn_sub, cr_targ_var(cr_const(1.0)), cr_targ_arr(lo));
    cr_avar s =
        cr_av_broadcast2(t, &cr_fn_add,
                         cr_targ_arr(cr_av_broadcast2(
                             t, &cr_fn_mul, cr_targ_var(cr_const(100.0)),
                             cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(a))))),
                         cr_targ_arr(cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(b))));
    *y = cr_av_sum(t, s);
    return cr_tape_status(t);
}

static cr_status rosen_c(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    double s = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i], b = 1.0 - x[i];
        s += 100.0 * a * a + b * b;
    }
    y[0] = s;
    return CR_OK;
}

/* ---- A function of two arrays through rules with their own second-order forms ----------- */

/* logsumexp(A x) + norm(x) + sum(tanh.(x .* w)) + dot(x, w)^2 / 4, x and w of length 5 */
static double k_A[3][5] = {
    {0.3, -0.2, 0.5, 0.1, -0.4}, {-0.6, 0.2, 0.1, 0.7, 0.3}, {0.2, 0.4, -0.3, -0.1, 0.5}};

static cr_status mixed(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    static cr_array A; /* a constant's array lives as long as the prepared H v */
    A = cr_array_matrix(&k_A[0][0], 3, 5);
    cr_targ lx[1] = {cr_targ_arr(cr_av_matmul(t, cr_av_const(&A), xs[0]))};
    cr_var l = cr_tape_acall_s(t, &cr_fn_logsumexp, lx, 1);
    cr_targ nx[1] = {cr_targ_arr(xs[0])};
    cr_var nrm = cr_tape_acall_s(t, &cr_fn_norm, nx, 1);
    cr_avar xw = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(xs[0]), cr_targ_arr(xs[1]));
    cr_var th = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_tanh, cr_targ_arr(xw)));
    cr_var d = cr_av_dot(t, xs[0], xs[1]);
    cr_var q = cr_div(t, cr_mul(t, d, d), cr_const(4.0));
    *y = cr_add(t, cr_add(t, l, nrm), cr_add(t, th, q));
    return cr_tape_status(t);
}

static cr_status mixed_c(const double *z, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    const double *x = z, *w = z + 5;
    double ax[3], mx = -INFINITY, se = 0.0, nn = 0.0, th = 0.0, d = 0.0;
    for (size_t r = 0; r < 3; r++) {
        ax[r] = 0.0;
        for (size_t c = 0; c < 5; c++)
            ax[r] += k_A[r][c] * x[c];
        mx = fmax(mx, ax[r]);
    }
    for (size_t r = 0; r < 3; r++)
        se += exp(ax[r] - mx);
    for (size_t c = 0; c < 5; c++) {
        nn += x[c] * x[c];
        th += tanh(x[c] * w[c]);
        d += x[c] * w[c];
    }
    y[0] = mx + log(se) + sqrt(nn) + th + d * d / 4.0;
    return CR_OK;
}

/* ---- The output's own record ---------------------------------------------------------------- */

/* std(x), the program's last operation: the replay leaves out the forward step of a last
 * operation that is a fused kernel (rosen_kernel above), but std's second-order form reads
 * the tangent of its result, so its step stays. */
static cr_status std_out(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_targ x[1] = {cr_targ_arr(xs[0])};
    *y = cr_tape_acall_s(t, &cr_fn_std, x, 1);
    return cr_tape_status(t);
}

static cr_status std_c(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    double mean = 0.0, ss = 0.0;
    for (size_t i = 0; i < n; i++)
        mean += x[i] / (double)n;
    for (size_t i = 0; i < n; i++)
        ss += (x[i] - mean) * (x[i] - mean);
    y[0] = sqrt(ss / (double)(n - 1)); /* corrected, as Julia's std */
    return CR_OK;
}

/* ---- Checks --------------------------------------------------------------------------------- */

static size_t total(const prog *g)
{
    return g->na == 1 ? g->len[0] : g->len[0] + g->len[1];
}

/* H v (and gradient and value) of g at the elements z (the inputs one after the other) along
 * the direction v, by cr_tape_ahvp on a fresh second-order recording. */
static void tape_ahvp(cr_ctx *ctx, const prog *g, const double *z, const double *v, double *hv,
                      double *y, double *grad)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    double zc[MAXZ], vc[MAXZ];
    memcpy(zc, z, total(g) * sizeof *zc);
    memcpy(vc, v, total(g) * sizeof *vc);
    cr_array xa[2], va[2], ha[2], ga[2];
    const cr_array *vp[2];
    cr_array *hp[2], *gp[2];
    cr_avar as[2];
    for (size_t j = 0, o = 0; j < g->na; o += g->len[j++]) {
        xa[j] = cr_array_vector(zc + o, g->len[j]);
        va[j] = cr_array_vector(vc + o, g->len[j]);
        ha[j] = cr_array_vector(hv + o, g->len[j]);
        ga[j] = cr_array_vector(grad + o, g->len[j]);
        vp[j] = &va[j];
        hp[j] = &ha[j];
        gp[j] = &ga[j];
        as[j] = cr_tape_array_input(t, &xa[j]);
    }
    cr_var out;
    assert_int_equal(g->f(t, as, g->na, &out, NULL), CR_OK);
    assert_int_equal(cr_tape_ahvp(t, out, NULL, 0, NULL, NULL, as, g->na, vp, hp), CR_OK);
    assert_int_equal(cr_tape_gradient_arrays(t, out, NULL, 0, NULL, as, g->na, gp), CR_OK);
    *y = out.v;
    cr_tape_free(t);
}

/* One call of p at z along v: value, gradient and H v into y, grad, hv. */
static cr_status call(cr_prepared *p, const prog *g, const double *z, const double *v, double *hv,
                      double *y, double *grad)
{
    cr_array xa[2], va[2], ha[2], ga[2];
    const cr_array *xp[2], *vp[2];
    cr_array *hp[2], *gp[2];
    for (size_t j = 0, o = 0; j < g->na; o += g->len[j++]) {
        xa[j] = cr_array_vector((double *)(uintptr_t)(z + o), g->len[j]);
        va[j] = cr_array_vector((double *)(uintptr_t)(v + o), g->len[j]);
        ha[j] = cr_array_vector(hv + o, g->len[j]);
        ga[j] = cr_array_vector(grad + o, g->len[j]);
        xp[j] = &xa[j];
        vp[j] = &va[j];
        hp[j] = &ha[j];
        gp[j] = &ga[j];
    }
    return cr_prepared_hvp_arrays(p, xp, g->na, vp, hp, y, grad != NULL ? gp : NULL);
}

/* Prepare g at pts[0], then at each point and along three directions compare with central
 * differences of g->fc and with cr_tape_ahvp at that point. */
static void check_prog(const prog *g, const double (*pts)[MAXZ], size_t npts)
{
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_arena *arena;
    assert_int_equal(cr_arena_new(ctx, 0, &arena), CR_OK);
    size_t n = total(g);
    cr_array xa[2];
    const cr_array *xp[2];
    for (size_t j = 0, o = 0; j < g->na; o += g->len[j++]) {
        xa[j] = cr_array_vector((double *)(uintptr_t)(pts[0] + o), g->len[j]);
        xp[j] = &xa[j];
    }
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, g->f, NULL, xp, g->na, &p), CR_OK);
    for (size_t k = 0; k < npts; k++) {
        for (unsigned d = 0; d < 3; d++) {
            double v[MAXZ] = {0}, hv[MAXZ], gr[MAXZ], y, want[MAXZ], gw[MAXZ], yw;
            double th[MAXZ], tg[MAXZ], ty;
            direction(n, d + 3 * (unsigned)k, v);
            assert_int_equal(call(p, g, pts[k], v, hv, &y, gr), CR_OK);
            fdref r = {g->fc, NULL, pts[k], v, n, arena};
            assert_int_equal(g->fc(pts[k], n, &yw, 1, NULL), CR_OK);
            assert_close(y, yw, 1e-13);
            fd_grad(&r, pts[k], gw);
            fd_hvp(&r, want);
            tape_ahvp(ctx, g, pts[k], v, th, &ty, tg);
            assert_true(y == ty);
            for (size_t j = 0; j < n; j++) {
                ASSERT_CLOSE(gr[j], gw[j], 1e-7 * (1 + fabs(gw[j])));
                ASSERT_CLOSE(hv[j], want[j], 1e-6 * (1 + fabs(want[j])));
                ASSERT_CLOSE(gr[j], tg[j], 1e-13 * (1 + fabs(tg[j])));
                ASSERT_CLOSE(hv[j], th[j], 1e-12 * (1 + fabs(th[j])));
            }
        }
    }
    /* The first-order replay on the same p, after the second-order calls, and the
     * gradients may be left out. */
    double y, gr[MAXZ], gw[MAXZ], yw, v[MAXZ] = {0}, hv[MAXZ], hv2[MAXZ];
    cr_array ga[2];
    cr_array *gp[2];
    const cr_array *xq[2];
    for (size_t j = 0, o = 0; j < g->na; o += g->len[j++]) {
        xa[j] = cr_array_vector((double *)(uintptr_t)(pts[npts - 1] + o), g->len[j]);
        xq[j] = &xa[j];
        ga[j] = cr_array_vector(gr + o, g->len[j]);
        gp[j] = &ga[j];
    }
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xq, g->na, &y, gp), CR_OK);
    cr_prepared *q;
    assert_int_equal(cr_prepare_gradient_arrays(ctx, NULL, g->f, NULL, xp, g->na, &q), CR_OK);
    for (size_t j = 0, o = 0; j < g->na; o += g->len[j++])
        ga[j] = cr_array_vector(gw + o, g->len[j]);
    assert_int_equal(cr_prepared_value_and_gradient_arrays(q, xq, g->na, &yw, gp), CR_OK);
    assert_true(y == yw);
    for (size_t j = 0; j < n; j++)
        assert_true(gr[j] == gw[j]);
    cr_prepared_free(q);
    direction(n, 7, v);
    assert_int_equal(call(p, g, pts[0], v, hv, NULL, NULL), CR_OK);
    assert_int_equal(call(p, g, pts[0], v, hv2, &y, gr), CR_OK);
    for (size_t j = 0; j < n; j++)
        assert_true(hv[j] == hv2[j]);
    cr_prepared_free(p);
    cr_arena_free(arena);
    cr_ctx_free(ctx);
}

static void test_rosen_kernel(void **state)
{
    (void)state;
    prog g = {rosen_kernel, rosen_c, 1, {6, 0}};
    const double pts[3][MAXZ] = {{-1.2, 1.0, 0.3, 0.8, -0.4, 1.1},
                                 {0.7, -0.3, 2.1, 0.05, -1.6, 0.9},
                                 {1.0, 1.0, 1.0, 1.0, 1.0, 1.0}};
    check_prog(&g, pts, 3);
}

static void test_rosen_ops(void **state)
{
    (void)state;
    prog g = {rosen_ops, rosen_c, 1, {6, 0}};
    const double pts[3][MAXZ] = {{0.5, 0.5, 0.5, 0.5, 0.5, 0.5},
                                 {-1.2, 1.0, 0.3, 0.8, -0.4, 1.1},
                                 {0.7, -0.3, 2.1, 0.05, -1.6, 0.9}};
    check_prog(&g, pts, 3);
}

/* The forms of logsumexp and norm read the rule's result: at new inputs, the new one. */
static void test_forms_two_inputs(void **state)
{
    (void)state;
    prog g = {mixed, mixed_c, 2, {5, 5}};
    const double pts[3][MAXZ] = {{0.4, -0.7, 1.1, 0.2, -0.3, 0.9, 0.5, -1.2, 0.3, 0.8},
                                 {-1.5, 0.6, 0.2, 2.0, 0.7, -0.4, 1.3, 0.6, -0.9, 0.1},
                                 {2.2, 1.4, -0.8, -0.5, 1.0, 0.2, -0.3, 0.7, 1.5, -1.1}};
    check_prog(&g, pts, 3);
}

static void test_std_output(void **state)
{
    (void)state;
    prog g = {std_out, std_c, 1, {5, 0}};
    const double pts[3][MAXZ] = {
        {0.4, -0.7, 1.1, 0.2, -0.3}, {-1.5, 0.6, 0.2, 2.0, 0.7}, {2.2, 1.4, -0.8, -0.5, 1.0}};
    check_prog(&g, pts, 3);
}

/* Strided inputs, directions and results, and f32 outputs: the same numbers as dense f64. */
static void test_layouts(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    prog g = {mixed, mixed_c, 2, {5, 5}};
    const double z[MAXZ] = {0.4, -0.7, 1.1, 0.2, -0.3, 0.9, 0.5, -1.2, 0.3, 0.8};
    double v[MAXZ];
    direction(10, 2, v);
    cr_prepared *p;
    cr_array xa[2];
    const cr_array *xp[2];
    for (size_t j = 0; j < 2; j++) {
        xa[j] = cr_array_vector((double *)(uintptr_t)(z + 5 * j), 5);
        xp[j] = &xa[j];
    }
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, mixed, NULL, xp, 2, &p), CR_OK);
    double hv[MAXZ], gr[MAXZ], y;
    assert_int_equal(call(p, &g, z, v, hv, &y, gr), CR_OK);
    /* every other element of buffers twice as long */
    double zs[2][10], vs[2][10], hs[2][10], y2;
    float gf[2][5];
    cr_array xsa[2], vsa[2], hsa[2], gfa[2];
    const cr_array *xsp[2], *vsp[2];
    cr_array *hsp[2], *gfp[2];
    for (size_t j = 0; j < 2; j++) {
        for (size_t i = 0; i < 5; i++) {
            zs[j][2 * i] = z[5 * j + i];
            vs[j][2 * i] = v[5 * j + i];
            zs[j][2 * i + 1] = vs[j][2 * i + 1] = NAN;
            hs[j][2 * i + 1] = 42;
        }
        xsa[j] = cr_array_vector(zs[j], 5);
        xsa[j].strides[0] = 2;
        vsa[j] = cr_array_vector(vs[j], 5);
        vsa[j].strides[0] = 2;
        hsa[j] = cr_array_vector(hs[j], 5);
        hsa[j].strides[0] = 2;
        size_t shape[1] = {5};
        assert_int_equal(cr_array_view_init(&gfa[j], gf[j], CR_DT_F32, 1, shape, NULL), CR_OK);
        xsp[j] = &xsa[j];
        vsp[j] = &vsa[j];
        hsp[j] = &hsa[j];
        gfp[j] = &gfa[j];
    }
    assert_int_equal(cr_prepared_hvp_arrays(p, xsp, 2, vsp, hsp, &y2, gfp), CR_OK);
    assert_true(y == y2);
    for (size_t j = 0; j < 2; j++)
        for (size_t i = 0; i < 5; i++) {
            assert_true(hs[j][2 * i] == hv[5 * j + i]);
            assert_true(hs[j][2 * i + 1] == 42);
            assert_true(gf[j][i] == (float)gr[5 * j + i]);
        }
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

/* s = sum(x.^2); s > 2 ? s^2 / 8 : sin(s), branching through cr_tape_cmp */
static cr_status branch(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_var s = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(xs[0])));
    if (cr_tape_cmp(t, s, CR_CMP_GT, cr_const(2.0)))
        *y = cr_div(t, cr_mul(t, s, s), cr_const(8.0));
    else
        *y = cr_sin(t, s);
    return cr_tape_status(t);
}

static cr_status branch_c(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    y[0] = s > 2.0 ? s * s / 8.0 : sin(s);
    return CR_OK;
}

/* s = sum(x.^2); s > 2 ? s : 3: the branch makes the output a constant */
static cr_status branch_k(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_var s = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(xs[0])));
    *y = cr_tape_cmp(t, s, CR_CMP_GT, cr_const(2.0)) ? s : cr_const(3.0);
    return cr_tape_status(t);
}

/* A branch that holds is replayed; one that flips gives CR_EDOMAIN, writes nothing, and the
 * next call at a good point works. */
static void test_branch(void **state)
{
    (void)state;
    prog g = {branch, branch_c, 1, {4, 0}};
    const double pts[2][MAXZ] = {{1.0, -0.5, 0.9, 0.6}, {1.2, 0.3, -1.1, 0.4}};
    check_prog(&g, pts, 2);
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_array xa = cr_array_vector((double *)(uintptr_t)pts[0], 4);
    const cr_array *xp[1] = {&xa};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, branch, NULL, xp, 1, &p), CR_OK);
    const double small[MAXZ] = {0.1, 0.2, -0.3, 0.4};
    double v[MAXZ] = {1, 2, 3, 4}, hv[MAXZ] = {42, 42, 42, 42}, gr[MAXZ] = {42, 42, 42, 42};
    double y = 42;
    assert_int_equal(call(p, &g, small, v, hv, &y, gr), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(ctx), "comparison");
    assert_true(y == 42 && hv[0] == 42 && gr[0] == 42);
    assert_int_equal(call(p, &g, pts[1], v, hv, &y, gr), CR_OK);
    double yw;
    assert_int_equal(branch_c(pts[1], 4, &yw, 1, NULL), CR_OK);
    assert_close(y, yw, 1e-14);
    cr_prepared_free(p);
    /* Prepared where the output is a constant: the comparison that chose it is checked too
     * (a replay used to return the constant and zeros without it). */
    xa = cr_array_vector((double *)(uintptr_t)small, 4);
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, branch_k, NULL, xp, 1, &p), CR_OK);
    hv[0] = gr[0] = y = 42;
    assert_int_equal(call(p, &g, pts[0], v, hv, &y, gr), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(ctx), "comparison");
    assert_true(y == 42 && hv[0] == 42 && gr[0] == 42);
    assert_int_equal(call(p, &g, small, v, hv, &y, gr), CR_OK);
    assert_true(y == 3.0 && hv[0] == 0.0 && gr[3] == 0.0);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

static cr_status constant(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)xs;
    (void)n;
    (void)env;
    *y = cr_const(3.5);
    return cr_tape_status(t);
}

/* Bad arguments: a status and a message, nothing written, p usable afterwards; a constant
 * output; refusals when preparing. */
static void test_bad_arguments(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    prog g = {rosen_kernel, rosen_c, 1, {4, 0}};
    double z[4] = {0.3, -0.5, 1.2, 0.7}, v[4] = {1, 2, 3, 4}, hv[4] = {42, 42, 42, 42};
    double gr[4] = {42, 42, 42, 42}, y = 42, w[3] = {1, 2, 3};
    cr_array xa = cr_array_vector(z, 4), va = cr_array_vector(v, 4), ha = cr_array_vector(hv, 4);
    cr_array ga = cr_array_vector(gr, 4), short3 = cr_array_vector(w, 3);
    const cr_array *xp[1] = {&xa}, *vp[1] = {&va}, *sp[1] = {&short3}, *np[1] = {NULL};
    cr_array *hp[1] = {&ha}, *gp[1] = {&ga}, *hsp[1] = {&short3};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, rosen_kernel, NULL, xp, 1, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(ctx), "cr_prepare_hvp_arrays: out is NULL");
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, NULL, NULL, xp, 1, &p), CR_EINVAL);
    assert_null(p);
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, rosen_kernel, NULL, xp, 1, &p), CR_OK);

    assert_int_equal(cr_prepared_hvp_arrays(NULL, xp, 1, vp, hp, &y, gp), CR_EINVAL);
    assert_int_equal(cr_prepared_hvp_arrays(p, NULL, 1, vp, hp, &y, gp), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(ctx), "NULL inputs, directions or H v arrays");
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 1, NULL, hp, &y, gp), CR_EINVAL);
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 1, vp, NULL, &y, gp), CR_EINVAL);
    assert_int_equal(cr_prepared_hvp_arrays(p, np, 1, vp, hp, &y, gp), CR_EINVAL);
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 2, vp, hp, &y, gp), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(ctx), "prepared for 1 array, 2 given");
    assert_int_equal(cr_prepared_hvp_arrays(p, sp, 1, vp, hp, &y, gp), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(ctx), "input 0 is f64 (3), prepared for f64 (4)");
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 1, sp, hp, &y, gp), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(ctx), "direction array 0 is (3), its variable is (4)");
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 1, vp, hsp, &y, gp), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(ctx), "H v array 0 is f64 (3), its input f64 (4)");
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 1, vp, hp, &y, hsp), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(ctx), "gradient array 0 is f64 (3), its input f64 (4)");
    v[2] = INFINITY;
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 1, vp, hp, &y, gp), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(ctx), "element 2 of direction array 0 is not finite");
    v[2] = 3;
    for (size_t j = 0; j < 4; j++)
        assert_true(hv[j] == 42 && gr[j] == 42);
    assert_true(y == 42);
    /* still usable */
    double want[4], gw[4], yw;
    tape_ahvp(ctx, &g, z, v, want, &yw, gw);
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 1, vp, hp, &y, gp), CR_OK);
    assert_true(y == yw);
    for (size_t j = 0; j < 4; j++)
        assert_true(hv[j] == want[j] && gr[j] == gw[j]);
    /* and not for scalars */
    double x1[4] = {0}, h1[4];
    assert_int_equal(cr_prepared_hvp(p, x1, 4, x1, h1, NULL, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(ctx), "cr_prepared_hvp: prepared for arrays");
    cr_prepared_free(p);

    /* A first-order prepared gradient is not a prepared H v. */
    assert_int_equal(cr_prepare_gradient_arrays(ctx, NULL, rosen_kernel, NULL, xp, 1, &p), CR_OK);
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 1, vp, hp, &y, gp), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(ctx), "cr_prepared_hvp_arrays: prepared with "
                                        "cr_prepare_gradient_arrays, which is first order; "
                                        "prepare it with cr_prepare_hvp_arrays");
    cr_prepared_free(p);

    /* A constant output: zeros. */
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, constant, NULL, xp, 1, &p), CR_OK);
    assert_int_equal(cr_prepared_hvp_arrays(p, xp, 1, vp, hp, &y, gp), CR_OK);
    assert_true(y == 3.5);
    for (size_t j = 0; j < 4; j++)
        assert_true(hv[j] == 0.0 && gr[j] == 0.0);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
}

/* map of a function that is not a row has no second-order form: refused when f records
 * it, naming it. */
static cr_status halve(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                       cr_value *y)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *y = cr_value_f64(args[0].u.f64 / 2.0);
    return CR_OK;
}
static const cr_function halve_fn = {.name = "halve", .arity = 1, .primal = halve};

static cr_status mapped(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_targ mf[2] = {cr_targ_value(cr_value_function(&halve_fn, NULL)), cr_targ_arr(xs[0])};
    *y = cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_map, mf, 2));
    return cr_tape_status(t);
}

static void test_refused(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    double z[3] = {0.5, -1.0, 2.0};
    cr_array xa = cr_array_vector(z, 3);
    const cr_array *xp[1] = {&xa};
    cr_prepared *p = (cr_prepared *)&xa;
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, mapped, NULL, xp, 1, &p), CR_EUNIMPL);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(ctx), "map: no second-order form on the tape");
    cr_ctx_free(ctx);
}

/* No allocation after the first call (the rules' work lives in the tape's arena). */
static void test_no_allocation(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    prog g = {mixed, mixed_c, 2, {5, 5}};
    double z[MAXZ] = {0.4, -0.7, 1.1, 0.2, -0.3, 0.9, 0.5, -1.2, 0.3, 0.8}, v[MAXZ];
    double hv[MAXZ], gr[MAXZ], y, th[MAXZ], tg[MAXZ], ty;
    cr_array xa[2] = {cr_array_vector(z, 5), cr_array_vector(z + 5, 5)};
    const cr_array *xp[2] = {&xa[0], &xa[1]};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp_arrays(ctx, NULL, mixed, NULL, xp, 2, &p), CR_OK);
    direction(10, 0, v);
    assert_int_equal(call(p, &g, z, v, hv, &y, gr), CR_OK);
    size_t allocs = c.allocs;
    for (unsigned round = 1; round < 4; round++) {
        for (size_t j = 0; j < 10; j++)
            z[j] += 0.1 * cos((double)(j + round));
        direction(10, round, v);
        assert_int_equal(call(p, &g, z, v, hv, &y, gr), CR_OK);
        assert_int_equal(c.allocs, allocs);
        tape_ahvp(ctx, &g, z, v, th, &ty, tg);
        allocs = c.allocs;
        assert_true(y == ty);
        for (size_t j = 0; j < 10; j++)
            ASSERT_CLOSE(hv[j], th[j], 1e-12 * (1 + fabs(th[j])));
    }
    cr_prepared_free(p);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* Allocation failures at every point of preparing and of the first call: CR_ENOMEM or
 * CR_EARENA, nothing leaks, and a failed call is followed by a good one, which agrees with a
 * context that does not fail. */
typedef struct fault_env {
    prog g;
    double z[MAXZ], v[MAXZ], want[MAXZ], gw[MAXZ], yw, hv[MAXZ], gr[MAXZ], y;
    cr_array xa[2];
    const cr_array *xp[2];
} fault_env;

static cr_status fault_prepare(cr_ctx *ctx, void *env, cr_prepared **p)
{
    fault_env *e = env;
    return cr_prepare_hvp_arrays(ctx, NULL, mixed, NULL, e->xp, 2, p);
}

static cr_status fault_call(cr_prepared *p, void *env)
{
    fault_env *e = env;
    return call(p, &e->g, e->z, e->v, e->hv, &e->y, e->gr);
}

static void fault_check(void *env)
{
    fault_env *e = env;
    assert_true(e->y == e->yw);
    for (size_t i = 0; i < 10; i++)
        assert_true(e->hv[i] == e->want[i] && e->gr[i] == e->gw[i]);
}

static void test_fault_injection(void **state)
{
    (void)state;
    fault_env e = {.g = {mixed, mixed_c, 2, {5, 5}},
                   .z = {0.4, -0.7, 1.1, 0.2, -0.3, 0.9, 0.5, -1.2, 0.3, 0.8}};
    direction(10, 1, e.v);
    e.xa[0] = cr_array_vector(e.z, 5);
    e.xa[1] = cr_array_vector(e.z + 5, 5);
    e.xp[0] = &e.xa[0];
    e.xp[1] = &e.xa[1];
    {
        cr_ctx *clean;
        assert_int_equal(cr_ctx_new(NULL, &clean), CR_OK);
        cr_prepared *p;
        assert_int_equal(fault_prepare(clean, &e, &p), CR_OK);
        assert_int_equal(call(p, &e.g, e.z, e.v, e.want, &e.yw, e.gw), CR_OK);
        cr_prepared_free(p);
        cr_ctx_free(clean);
    }
    const fault_case fc = {.prepare = fault_prepare,
                           .call = fault_call,
                           .check = fault_check,
                           .prepare_earena = true,
                           .call_earena = true,
                           .max_runs = 999};
    fault_tally n = fault_each_allocation(&fc, &e);
    /* (The first call may find all it needs in the arena's blocks: it need not fail.) */
    assert_true(n.failed_prepare > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rosen_kernel),     cmocka_unit_test(test_rosen_ops),
        cmocka_unit_test(test_forms_two_inputs), cmocka_unit_test(test_std_output),
        cmocka_unit_test(test_layouts),          cmocka_unit_test(test_branch),
        cmocka_unit_test(test_bad_arguments),    cmocka_unit_test(test_refused),
        cmocka_unit_test(test_no_allocation),    cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
