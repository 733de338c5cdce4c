/*
 * Tests of the first-order replay's fused steps (src/ad/node_scalar_replay.c): a product read
 * only by the sum just after it runs as one step of each pass. A loop whose steps make such
 * pairs in every form the passes distinguish: the sum's other operand first or second, in
 * memory or in the register S (an accumulator); the sum kept in S for a later step or not;
 * backwards, the sum's adjoint in memory (two readers), in P (read by the next step) or in S
 * (one reader further on), and the other operand's adjoint in memory or in S; a square (the
 * same operand twice), products whose operands are in registers (not fused), a sum of a
 * product with itself (not fused), rows between pairs, a comparison on an accumulated sum
 * that fails at some inputs, a pair whose product makes the output and whose sum is after
 * it (fused forwards only), and the same loop with an array function in it (the reverse pass
 * of a program with array functions keeps memory everywhere: fused forwards only); the
 * first-order call and H·v of an object prepared for H·v.
 * Gradients at several points against central differences of the same function in plain C
 * and against recording again on an ordinary tape; allocation failures at every allocation
 * of preparing and of the first call.
 */
#include <math.h>
#include <stdio.h>

#include "test_fault_hook.h"
#include "test_util.h"

#define FD_RTOL 1e-7
#define NX      6
#define STEPS   7

static const double k_B[3] = {0.5, -1.0, 0.25};

/* The function in plain C; arrays: the array form (an array function in each step). */
static double fused_c(const double *x, bool arrays)
{
    double h12 = x[0] * x[4] + x[2]; /* S is free: kept there forwards */
    double f12 = x[3] * x[3];
    double g12 = sin(f12 - h12); /* (a row: S is free again) */
    /* Differences times an operand, with S free: the difference kept in S (read twice), or
     * the product (read two steps on); rows take the results (a row keeps nothing in S). */
    double dA = x[0] - x[1], mA = x[2] * dA, nA = dA * x[3], rA = sin(mA + nA);
    double dA2 = x[3] - x[4], mA2 = dA2 * x[5], nA2 = dA2 * x[0], rA2 = sin(mA2 + nA2);
    double dB = x[1] - x[3], mB = dB * x[4], eB = x[2] + x[5], rB = sin(mB * eB);
    double dB2 = x[5] - x[2], mB2 = x[1] * dB2, eB2 = x[0] + x[4], rB2 = sin(eB2 * mB2);
    double dC = x[2] - x[5], mC = x[0] * dC, eC = x[1] + x[4], kC = eC * mC;
    double rC = sin(kC + dC); /* (mC's adjoint in S backwards) */
    double pre = rA + rA2 + rB + rB2 + rC;
    double acc = 0.0, out = 0.01 * g12 + 0.1 * pre;
    for (int i = 0; i < STEPS; i++) {
        double a = x[i % NX], b = x[(i + 1) % NX], c = x[(i + 2) % NX], d = x[(i + 3) % NX];
        acc = acc + a * b;           /* an accumulator: S, the product second */
        double q = a * c + d;        /* the product first, the other in memory */
        double e = c - d;            /* read once, further on: its adjoint in S */
        double u = sin(q);           /* a row: the registers start again */
        double s1 = u * u + acc;     /* a square of a row's result */
        double s2 = e + b * d;       /* the other operand e, made two steps before */
        double w = (s1 + a * d) * c; /* the sum read by the next step (P) */
        double z = s2 * w + s1;      /* s1 read twice: memory */
        double sq = a * a + z;       /* a square: both contributions to a's adjoint */
        double t = sq * sq;          /* operands in a register: not fused */
        double r = t + t;            /* (not a pair) */
        double p2 = b * c;
        double pp = p2 + p2; /* a product added to itself: not fused */
        double e1 = a - b, f1 = c + d;
        double h1 = e1 + c * d;   /* the other operand read only here: S */
        double g1 = h1 * f1 + h1; /* h1 read twice: memory */
        double e2 = b - c;
        double h2 = a * d + e2;
        double g2 = h2 * b; /* h2 read once, by the next step: P */
        double e3 = c - a;
        double h3 = e3 + b * b;
        double f3 = a + b;
        double g3 = f3 * h3; /* h3 read once, further on: S */
        double h4 = c * b + d;
        double f4 = d - a;
        double g4 = h4 * f4;
        double h5 = a * b + c; /* kept in S forwards */
        double f5 = d * d;
        double oo = out * 1e-3; /* out read twice: its adjoint in memory */
        double g5 = f5 - h5 + oo;
        double e6 = a - b;
        double h6 = e6 + c * d; /* the other operand in S, the sum in memory */
        double e7 = b - c;
        double h7 = c * d + e7;
        double g6 = h6 * d + h6 + h7 * a + h7;
        double e8 = b - a;
        double h8 = e8 + a * d;
        double g8 = h8 * b;    /* the sum in P, the other operand in S */
        double h9 = c + b * b; /* the sum in S, the other operand in memory */
        double f9 = a + b;
        double g9 = h9 * f9;
        double h10 = b * b + c;
        double f10 = a + d;
        double g10 = h10 * f10;
        double e11 = c - a;
        double h11 = b * b + e11; /* both in S */
        double f11 = a + b;
        double g11 = f11 * h11;
        pp = pp + 0.1 * (g1 + g2 + g3 + g4 + g5) + 0.01 * (g6 + g8 + g9 + g10 + g11);
        double dd1 = c - a;   /* a difference read again, times an operand */
        double mm1 = b * dd1; /* read twice: its adjoint in memory */
        double dd2 = d - b;
        double mm2 = dd2 * a;
        double kk2 = mm2 * c; /* mm2 read by the next step: P */
        double dd3 = a - d;
        double mm3 = c * dd3;
        double ee3 = b + c;
        double kk3 = ee3 * mm3; /* mm3 read once, further on: S */
        pp = pp + 0.01 * ((mm1 + mm1 * d + kk2 + kk3) + dd1 * dd2 * dd3);
        if (arrays) {
            double sb = 0.0;
            for (int j = 0; j < 3; j++)
                sb += exp(k_B[j] * a);
            r = r + sb;
        }
        /* (a row makes out: rows keep nothing in S, so the loop's sums can) */
        out = fmax(out + (acc < 4.0 ? 0.01 * r + pp : 0.5 * z - pp), -1e9);
    }
    return out * x[1];
}

static cr_status fused_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    y[0] = fused_c(x, *(const bool *)env);
    return CR_OK;
}

static cr_status fused_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    bool arrays = env != NULL && *(const bool *)env; /* (NULL: the scalar form) */
    cr_array B = cr_array_vector((double *)k_B, 3);
    cr_var h12 = cr_add(t, cr_mul(t, x[0], x[4]), x[2]);
    cr_var f12 = cr_mul(t, x[3], x[3]);
    cr_var g12 = cr_sin(t, cr_sub(t, f12, h12));
    cr_var dA = cr_sub(t, x[0], x[1]), mA = cr_mul(t, x[2], dA), nA = cr_mul(t, dA, x[3]);
    cr_var rA = cr_sin(t, cr_add(t, mA, nA));
    cr_var dA2 = cr_sub(t, x[3], x[4]), mA2 = cr_mul(t, dA2, x[5]), nA2 = cr_mul(t, dA2, x[0]);
    cr_var rA2 = cr_sin(t, cr_add(t, mA2, nA2));
    cr_var dB = cr_sub(t, x[1], x[3]), mB = cr_mul(t, dB, x[4]), eB = cr_add(t, x[2], x[5]);
    cr_var rB = cr_sin(t, cr_mul(t, mB, eB));
    cr_var dB2 = cr_sub(t, x[5], x[2]), mB2 = cr_mul(t, x[1], dB2), eB2 = cr_add(t, x[0], x[4]);
    cr_var rB2 = cr_sin(t, cr_mul(t, eB2, mB2));
    cr_var dC = cr_sub(t, x[2], x[5]), mC = cr_mul(t, x[0], dC), eC = cr_add(t, x[1], x[4]);
    cr_var kC = cr_mul(t, eC, mC);
    cr_var rC = cr_sin(t, cr_add(t, kC, dC));
    cr_var pre = cr_add(t, cr_add(t, cr_add(t, cr_add(t, rA, rA2), rB), rB2), rC);
    cr_var acc = cr_const(0.0);
    cr_var out = cr_add(t, cr_mul(t, cr_const(0.01), g12), cr_mul(t, cr_const(0.1), pre));
    for (int i = 0; i < STEPS; i++) {
        cr_var a = x[i % NX], b = x[(i + 1) % NX], c = x[(i + 2) % NX], d = x[(i + 3) % NX];
        acc = cr_add(t, acc, cr_mul(t, a, b));
        cr_var q = cr_add(t, cr_mul(t, a, c), d);
        cr_var e = cr_sub(t, c, d);
        cr_var u = cr_sin(t, q);
        cr_var s1 = cr_add(t, cr_mul(t, u, u), acc);
        cr_var s2 = cr_add(t, e, cr_mul(t, b, d));
        cr_var w = cr_mul(t, cr_add(t, s1, cr_mul(t, a, d)), c);
        cr_var z = cr_add(t, cr_mul(t, s2, w), s1);
        cr_var sq = cr_add(t, cr_mul(t, a, a), z);
        cr_var tt = cr_mul(t, sq, sq);
        cr_var r = cr_add(t, tt, tt);
        cr_var p2 = cr_mul(t, b, c);
        cr_var pp = cr_add(t, p2, p2);
        cr_var e1 = cr_sub(t, a, b), f1 = cr_add(t, c, d);
        cr_var h1 = cr_add(t, e1, cr_mul(t, c, d));
        cr_var g1 = cr_add(t, cr_mul(t, h1, f1), h1);
        cr_var e2 = cr_sub(t, b, c);
        cr_var h2 = cr_add(t, cr_mul(t, a, d), e2);
        cr_var g2 = cr_mul(t, h2, b);
        cr_var e3 = cr_sub(t, c, a);
        cr_var h3 = cr_add(t, e3, cr_mul(t, b, b));
        cr_var f3 = cr_add(t, a, b);
        cr_var g3 = cr_mul(t, f3, h3);
        cr_var h4 = cr_add(t, cr_mul(t, c, b), d);
        cr_var f4 = cr_sub(t, d, a);
        cr_var g4 = cr_mul(t, h4, f4);
        cr_var h5 = cr_add(t, cr_mul(t, a, b), c);
        cr_var f5 = cr_mul(t, d, d);
        cr_var oo = cr_mul(t, out, cr_const(1e-3));
        cr_var g5 = cr_add(t, cr_sub(t, f5, h5), oo);
        cr_var e6 = cr_sub(t, a, b);
        cr_var h6 = cr_add(t, e6, cr_mul(t, c, d));
        cr_var e7 = cr_sub(t, b, c);
        cr_var h7 = cr_add(t, cr_mul(t, c, d), e7);
        cr_var g6 = cr_add(t, cr_add(t, cr_add(t, cr_mul(t, h6, d), h6), cr_mul(t, h7, a)), h7);
        cr_var e8 = cr_sub(t, b, a);
        cr_var h8 = cr_add(t, e8, cr_mul(t, a, d));
        cr_var g8 = cr_mul(t, h8, b);
        cr_var h9 = cr_add(t, c, cr_mul(t, b, b));
        cr_var f9 = cr_add(t, a, b);
        cr_var g9 = cr_mul(t, h9, f9);
        cr_var h10 = cr_add(t, cr_mul(t, b, b), c);
        cr_var f10 = cr_add(t, a, d);
        cr_var g10 = cr_mul(t, h10, f10);
        cr_var e11 = cr_sub(t, c, a);
        cr_var h11 = cr_add(t, cr_mul(t, b, b), e11);
        cr_var f11 = cr_add(t, a, b);
        cr_var g11 = cr_mul(t, f11, h11);
        cr_var gs = cr_add(t, cr_add(t, cr_add(t, cr_add(t, g1, g2), g3), g4), g5);
        cr_var gt = cr_add(t, cr_add(t, cr_add(t, cr_add(t, g6, g8), g9), g10), g11);
        pp = cr_add(t, cr_add(t, pp, cr_mul(t, cr_const(0.1), gs)), cr_mul(t, cr_const(0.01), gt));
        cr_var dd1 = cr_sub(t, c, a);
        cr_var mm1 = cr_mul(t, b, dd1);
        cr_var dd2 = cr_sub(t, d, b);
        cr_var mm2 = cr_mul(t, dd2, a);
        cr_var kk2 = cr_mul(t, mm2, c);
        cr_var dd3 = cr_sub(t, a, d);
        cr_var mm3 = cr_mul(t, c, dd3);
        cr_var ee3 = cr_add(t, b, c);
        cr_var kk3 = cr_mul(t, ee3, mm3);
        cr_var m4 = cr_add(t, cr_add(t, cr_add(t, mm1, cr_mul(t, mm1, d)), kk2), kk3);
        cr_var d4 = cr_mul(t, cr_mul(t, dd1, dd2), dd3);
        pp = cr_add(t, pp, cr_mul(t, cr_const(0.01), cr_add(t, m4, d4)));
        if (arrays) {
            cr_var sb = cr_av_sum(
                t, cr_av_broadcast1(
                       t, &cr_fn_exp,
                       cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(cr_av_const(&B)),
                                                    cr_targ_var(a)))));
            r = cr_add(t, r, sb);
        }
        if (cr_tape_cmp(t, acc, CR_CMP_LT, cr_const(4.0)))
            out = cr_max(t, cr_add(t, out, cr_add(t, cr_mul(t, cr_const(0.01), r), pp)),
                         cr_const(-1e9));
        else
            out = cr_max(t, cr_add(t, out, cr_sub(t, cr_mul(t, cr_const(0.5), z), pp)),
                         cr_const(-1e9));
    }
    /* The output is a product; the sum after it reads it and is not swept. */
    y[0] = cr_mul(t, out, x[1]);
    (void)cr_add(t, x[2], y[0]);
    return cr_tape_status(t);
}

/* The gradient by recording on an ordinary tape and sweeping. */
static void rerecord(cr_ctx *ctx, const double *x, bool arrays, double *y, double *g)
{
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_value_and_gradient(t, fused_t, &arrays, x, NX, y, g), CR_OK);
    cr_tape_free(t);
}

static void fd_grad(cr_arena *arena, bool arrays, const double *x, double *g)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, fused_fd, &arrays, x, NX, 1, arena, g, NULL), CR_OK);
}

/* acc < 4 at every step at the first three points; not at the fourth (a comparison fails). */
static const double k_pts[5][NX] = {{0.3, 0.5, 0.7, -0.2, 0.4, 0.1},
                                    {-0.6, 0.2, -0.3, 0.8, 0.5, -0.4},
                                    {0.45, -0.35, 0.15, 0.65, -0.25, 0.55},
                                    {1.5, 1.4, 1.3, 1.2, 1.1, 1.6},
                                    {0.1, 0.9, -0.5, 0.3, 0.2, -0.7}};

static void check_gradients(fixture *f, bool arrays)
{
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, fused_t, &arrays, k_pts[0], NX, &p), CR_OK);
    for (size_t k = 0; k < 5; k++) {
        double y, g[NX], fd[NX], yr, gr[NX];
        cr_status st = cr_prepared_value_and_gradient(p, k_pts[k], NX, &y, g);
        if (k == 3) { /* the comparison changed: the recording does not describe f here */
            assert_int_equal(st, CR_EDOMAIN);
            continue;
        }
        assert_int_equal(st, CR_OK);
        assert_close(y, fused_c(k_pts[k], arrays), 1e-13);
        fd_grad(f->arena, arrays, k_pts[k], fd);
        rerecord(f->ctx, k_pts[k], arrays, &yr, gr);
        assert_close(y, yr, 1e-14);
        for (size_t j = 0; j < NX; j++) {
            assert_close(g[j], fd[j], FD_RTOL);
            assert_close(g[j], gr[j], 1e-13);
        }
    }
    cr_prepared_free(p);
}

static void test_gradient(void **state)
{
    check_gradients(*state, false);
}

static void test_gradient_arrays(void **state)
{
    check_gradients(*state, true);
}

/* Prepared for H·v, the same object's first-order call (the fused steps, on a program that
 * keeps its recording) against recording again, and H·v against differences of recorded
 * gradients. */
static void test_hvp_object(void **state)
{
    fixture *f = *state;
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(f->ctx, NULL, fused_t, NULL, k_pts[0], NX, &p), CR_OK);
    cr_tape *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    const double v[NX] = {0.4, -1.0, 0.3, 0.2, -0.6, 0.9};
    for (size_t k = 0; k < 5; k++) {
        if (k == 3)
            continue;
        double hv[NX], g[NX], g1[NX], y, y1, yr, gr[NX];
        assert_int_equal(cr_prepared_value_and_gradient(p, k_pts[k], NX, &y1, g1), CR_OK);
        assert_int_equal(cr_prepared_hvp(p, k_pts[k], NX, v, hv, &y, g), CR_OK);
        rerecord(f->ctx, k_pts[k], false, &yr, gr);
        assert_close(y1, yr, 1e-14);
        assert_close(y, yr, 1e-14);
        for (size_t j = 0; j < NX; j++) {
            assert_close(g1[j], gr[j], 1e-13);
            assert_close(g[j], gr[j], 1e-13);
        }
        assert_hvp_by_gradients(u, fused_t, k_pts[k], v, NX, hv);
    }
    cr_tape_free(u);
    cr_prepared_free(p);
}

/* Every allocation of preparing and of the first call fails in turn: CR_ENOMEM, nothing
 * leaked, and a prepared gradient whose first call failed is right at the next call. */
typedef struct fault_env {
    bool arrays;
    double y, g[NX], yw, want[NX];
} fault_env;

static cr_status fault_prepare(cr_ctx *ctx, void *env, cr_prepared **p)
{
    fault_env *e = env;
    return cr_prepare_gradient(ctx, NULL, fused_t, &e->arrays, k_pts[0], NX, p);
}

static cr_status fault_call(cr_prepared *p, void *env)
{
    fault_env *e = env;
    return cr_prepared_value_and_gradient(p, k_pts[1], NX, &e->y, e->g);
}

static void fault_check(void *env)
{
    fault_env *e = env;
    assert_close(e->y, e->yw, 1e-14);
    for (size_t j = 0; j < NX; j++)
        assert_close(e->g[j], e->want[j], 1e-13);
}

static void test_fault_injection(void **state)
{
    (void)state;
    fault_env e = {.arrays = false};
    cr_ctx *clean;
    assert_int_equal(cr_ctx_new(NULL, &clean), CR_OK);
    rerecord(clean, k_pts[1], e.arrays, &e.yw, e.want);
    cr_ctx_free(clean);
    const fault_case fc = {
        .prepare = fault_prepare, .call = fault_call, .check = fault_check, .max_runs = 399};
    fault_tally n = fault_each_allocation(&fc, &e);
    assert_true(n.failed_prepare > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gradient, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gradient_arrays, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hvp_object, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
