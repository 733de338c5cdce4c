/*
 * Tests of the first-order prepared replay's compact program (src/ad/prepared.c): each
 * arithmetic row with variables on both sides, a constant on either side, the same variable
 * on both sides, and unary minus, whose partials the reverse pass evaluates again from the
 * row; programs mixing them with rows called through their pointers, comparisons and an
 * array function; an output that is an input; the same program replayed for H·v between
 * gradient calls. Gradients at several new points against central differences of the same
 * functions in plain C.
 */
#include <math.h>
#include <stdio.h>

#include "test_alloc.h"
#include "test_util.h"

#define FD_RTOL 1e-8

/* The arithmetic operations, and where their arguments come from: inputs, a constant on
 * either side, an input on both sides; made by the step just before (m = x0 x1, q = x2 / 2:
 * op(m, q), the replay keeps m in its second register and q in its first) or two steps
 * before (op(m, m) straight after m, or after q); interleaved: op(q, m x1), each argument
 * made two steps before its reader. */
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_NEG, NOPS };
enum { VV, VC, CV, SAME, MADE, MADE_SAME, MADE_SAME_FAR, INTERLEAVED, NPAT };
static const char *const k_op_names[NOPS] = {"add", "sub", "mul", "div", "neg"};
static const char *const k_pat_names[NPAT] = {"var op var",
                                              "var op const",
                                              "const op var",
                                              "x op x",
                                              "made op made",
                                              "made op itself",
                                              "made two steps before op itself",
                                              "interleaved"};

typedef struct case_env {
    int op, pat;
} case_env;

static double op_c(int op, double a, double b)
{
    switch (op) {
    case OP_ADD:
        return a + b;
    case OP_SUB:
        return a - b;
    case OP_MUL:
        return a * b;
    case OP_DIV:
        return a / b;
    default:
        return -a;
    }
}

static cr_var op_t(cr_tape *t, int op, cr_var a, cr_var b)
{
    switch (op) {
    case OP_ADD:
        return cr_add(t, a, b);
    case OP_SUB:
        return cr_sub(t, a, b);
    case OP_MUL:
        return cr_mul(t, a, b);
    case OP_DIV:
        return cr_div(t, a, b);
    default:
        return cr_neg(t, a);
    }
}

/* The operation on the pattern's arguments, times x2, plus x1 (so that its adjoint is not 1
 * and every input is read), plus q x1 + q when q is not an argument (q read twice keeps its
 * adjoint in memory, and leaves the second register free for op(m, m)). */
static double case_c(const case_env *e, const double *x)
{
    double m = x[0] * x[1], q = x[2] * 0.5, a, b;
    switch (e->pat) {
    case VV:
        a = x[0], b = x[1];
        break;
    case VC:
        a = x[0], b = 2.3;
        break;
    case CV:
        a = -1.7, b = x[0];
        break;
    case SAME:
        a = b = x[0];
        break;
    case MADE:
        a = m, b = q;
        break;
    case INTERLEAVED:
        a = q, b = m * x[1];
        break;
    default:
        a = b = m;
        break;
    }
    double y = op_c(e->op, a, b) * x[2] + x[1];
    return e->pat == MADE_SAME_FAR ? y + q * x[1] + q : y;
}

static cr_status case_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    y[0] = case_c(env, x);
    return CR_OK;
}

static cr_status case_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const case_env *e = env;
    cr_var a, b, q = cr_const(0.0);
    switch (e->pat) {
    case VV:
        a = x[0], b = x[1];
        break;
    case VC:
        a = x[0], b = cr_const(2.3);
        break;
    case CV:
        a = cr_const(-1.7), b = x[0];
        break;
    case SAME:
        a = b = x[0];
        break;
    case MADE:
        a = cr_mul(t, x[0], x[1]);
        b = q = cr_mul(t, x[2], cr_const(0.5));
        break;
    case MADE_SAME:
        a = b = cr_mul(t, x[0], x[1]);
        break;
    case INTERLEAVED: {
        cr_var mm = cr_mul(t, x[0], x[1]);
        a = cr_mul(t, x[2], cr_const(0.5));
        b = cr_mul(t, mm, x[1]);
        break;
    }
    default:
        a = b = cr_mul(t, x[0], x[1]);
        q = cr_mul(t, x[2], cr_const(0.5));
        break;
    }
    cr_var r = cr_add(t, cr_mul(t, op_t(t, e->op, a, b), x[2]), x[1]);
    y[0] = e->pat == MADE_SAME_FAR ? cr_add(t, cr_add(t, r, cr_mul(t, q, x[1])), q) : r;
    return cr_tape_status(t);
}

/* Gradient and value of p at pts against central differences of fc. */
static void check_points(fixture *f, cr_prepared *p, cr_fd_vec_fn fc, void *env,
                         double (*val)(const void *, const double *), size_t n, const double *pts,
                         size_t npts, const char *what)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    for (size_t i = 0; i < npts; i++) {
        const double *x = pts + i * n;
        double y, g[16], fd[16];
        assert_true(n <= 16);
        assert_int_equal(cr_prepared_value_and_gradient(p, x, n, &y, g), CR_OK);
        assert_close(y, val(env, x), 1e-14);
        assert_int_equal(cr_fd_jacobian(&m, NULL, fc, env, x, n, 1, f->arena, fd, NULL), CR_OK);
        cr_arena_reset(f->arena);
        for (size_t j = 0; j < n; j++) {
            if (fabs(g[j] - fd[j]) > FD_RTOL * (1 + fabs(fd[j])))
                print_message("%s, point %zu, input %zu: %.17g, differences %.17g\n", what, i, j,
                              g[j], fd[j]);
            assert_close(g[j], fd[j], FD_RTOL);
        }
    }
}

static double case_val(const void *env, const double *x)
{
    return case_c(env, x);
}

static void test_each_operation(void **state)
{
    fixture *f = *state;
    const double x0[3] = {0.7, -1.3, 0.4};
    const double pts[4][3] = {
        {0.7, -1.3, 0.4}, {1.9, 0.6, -2.1}, {-0.45, 2.2, 1.5}, {3.1, -0.8, 0.9}};
    for (int op = 0; op < NOPS; op++) {
        for (int pat = 0; pat < NPAT; pat++) {
            if (op == OP_NEG && pat != VV)
                continue;
            case_env e = {op, pat};
            char what[64];
            snprintf(what, sizeof what, "%s, %s", k_op_names[op], k_pat_names[pat]);
            cr_prepared *p;
            assert_int_equal(cr_prepare_gradient(f->ctx, NULL, case_t, &e, x0, 3, &p), CR_OK);
            check_points(f, p, case_fd, &e, case_val, 3, &pts[0][0], 4, what);
            cr_prepared_free(p);
        }
    }
}

/* A long chain of every operation, compact instructions among rows called through their
 * pointers (sin, exp, pow, atan2), comparisons and an array function (a broadcast of a
 * variable over a constant array, summed):
 *   s = x0; for k < 12: s = s * c_k + x1 / (x2 + 2) - sin(s) ... (see mix_c). */
static double k_arr[4] = {0.5, -1.0, 1.5, 0.25};

static double mix_c(const double *x)
{
    double s = x[0], acc = 0.0;
    for (int k = 0; k < 12; k++) {
        double c = 0.1 * (k + 1);
        double a = s * c + x[1] / (x[2] + 2.0);
        double b = -(a - x[3]) * (a - x[3]);
        double r = k % 3 == 0 ? sin(a) : k % 3 == 1 ? exp(0.1 * b) : atan2(a, 1.5 + x[2] * x[2]);
        s = (r + a * 0.5) / (1.0 + c);
        acc = acc + s * s - (3.0 - s);
    }
    double w = 0.0;
    for (int i = 0; i < 4; i++)
        w += x[1] * k_arr[i];
    return acc + w * x[0] + pow(x[2] * x[2] + 1.0, 1.5);
}

static cr_status mix_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = mix_c(x);
    return CR_OK;
}

static double mix_val(const void *env, const double *x)
{
    (void)env;
    return mix_c(x);
}

static cr_status mix_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const cr_array *B = env;
    cr_var s = x[0], acc = cr_const(0.0);
    for (int k = 0; k < 12; k++) {
        cr_var c = cr_const(0.1 * (k + 1));
        cr_var a = cr_add(t, cr_mul(t, s, c), cr_div(t, x[1], cr_add(t, x[2], cr_const(2.0))));
        cr_var d = cr_sub(t, a, x[3]);
        cr_var b = cr_mul(t, cr_neg(t, d), d);
        cr_var r;
        /* the branch taken at every point tested; the comparison is checked at each replay */
        if (cr_tape_cmp(t, a, CR_CMP_LT, cr_const(100.0)) && k % 3 == 0) {
            r = cr_sin(t, a);
        } else if (k % 3 == 1) {
            r = cr_exp(t, cr_mul(t, cr_const(0.1), b));
        } else {
            cr_var args[2] = {a, cr_add(t, cr_const(1.5), cr_mul(t, x[2], x[2]))};
            r = cr_tape_call1(t, &cr_fn_atan2, args, 2);
        }
        s = cr_div(t, cr_add(t, r, cr_mul(t, a, cr_const(0.5))), cr_add(t, cr_const(1.0), c));
        acc = cr_sub(t, cr_add(t, acc, cr_mul(t, s, s)), cr_sub(t, cr_const(3.0), s));
    }
    cr_var w = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(x[1]), cr_targ_arr(cr_av_const(B))));
    cr_var pa[2] = {cr_add(t, cr_mul(t, x[2], x[2]), cr_const(1.0)), cr_const(1.5)};
    y[0] = cr_add(t, cr_add(t, acc, cr_mul(t, w, x[0])), cr_tape_call1(t, &cr_fn_pow, pa, 2));
    return cr_tape_status(t);
}

static void test_mixed_program(void **state)
{
    fixture *f = *state;
    cr_array B = cr_array_vector(k_arr, 4);
    const double pts[4][4] = {{0.3, 0.8, -0.4, 0.2},
                              {1.2, -0.5, 0.9, -1.1},
                              {-0.7, 1.4, 0.1, 0.6},
                              {0.05, 0.3, 1.7, 2.0}};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, mix_t, &B, pts[0], 4, &p), CR_OK);
    check_points(f, p, mix_fd, NULL, mix_val, 4, &pts[0][0], 4, "mixed program");
    /* A comparison that comes out otherwise: refused, nothing written, then usable. */
    double x[4] = {5000.0, 0.0, 0.0, 0.0}, y = 42.0, g[4] = {42.0, 42.0, 42.0, 42.0};
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 4, &y, g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "< 100");
    assert_true(y == 42.0 && g[0] == 42.0 && g[1] == 42.0 && g[2] == 42.0 && g[3] == 42.0);
    check_points(f, p, mix_fd, NULL, mix_val, 4, &pts[1][0], 2, "mixed program, after a refusal");
    cr_prepared_free(p);
}

/* y is one of the inputs (the reverse pass sweeps nothing) or one input plus a constant. */
static cr_status pick_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    int which = *(const int *)env;
    cr_var unused = cr_mul(t, x[0], x[2]); /* recorded after y's input: never swept */
    (void)unused;
    y[0] = which < 3 ? x[which] : cr_sub(t, cr_const(2.0), x[1]);
    return cr_tape_status(t);
}

static void test_output_is_input(void **state)
{
    fixture *f = *state;
    const double x0[3] = {1.0, 2.0, 3.0}, x1[3] = {-4.0, 5.5, 0.25};
    for (int which = 0; which < 4; which++) {
        cr_prepared *p;
        assert_int_equal(cr_prepare_gradient(f->ctx, NULL, pick_t, &which, x0, 3, &p), CR_OK);
        for (int round = 0; round < 2; round++) {
            double y, g[3];
            assert_int_equal(cr_prepared_value_and_gradient(p, x1, 3, &y, g), CR_OK);
            for (int j = 0; j < 3; j++)
                assert_true(g[j] == (which < 3 ? (j == which ? 1.0 : 0.0) : (j == 1 ? -1.0 : 0.0)));
            assert_true(y == (which < 3 ? x1[which] : 2.0 - x1[1]));
        }
        cr_prepared_free(p);
    }
}

/* The first-order replay and H·v read the same program: alternate them. */
static void test_with_hvp(void **state)
{
    fixture *f = *state;
    case_env e = {OP_DIV, VV};
    const double pts[3][3] = {{0.7, -1.3, 0.4}, {1.9, 0.6, -2.1}, {-0.45, 2.2, 1.5}};
    const double v[3] = {0.3, -1.0, 0.5};
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(f->ctx, NULL, case_t, &e, pts[0], 3, &p), CR_OK);
    for (size_t i = 0; i < 3; i++) {
        double y1, g1[3], y2, g2[3], hv[3];
        assert_int_equal(cr_prepared_value_and_gradient(p, pts[i], 3, &y1, g1), CR_OK);
        assert_int_equal(cr_prepared_hvp(p, pts[(i + 1) % 3], 3, v, hv, &y2, g2), CR_OK);
        assert_int_equal(cr_prepared_hvp(p, pts[i], 3, v, hv, &y2, g2), CR_OK);
        assert_true(y1 == y2);
        for (size_t j = 0; j < 3; j++)
            assert_close(g1[j], g2[j], 1e-15);
    }
    check_points(f, p, case_fd, &e, case_val, 3, &pts[0][0], 3, "div after H v");
    cr_prepared_free(p);
}

/* A long scalar loop (Rosenbrock-like, 200 inputs): every partial reaches the gradient;
 * nothing is allocated by the replays. */
static cr_status chain_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_var s = cr_const(0.0), one = cr_const(1.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_sub(t, x[i + 1], cr_mul(t, x[i], x[i]));
        cr_var b = cr_div(t, cr_sub(t, one, x[i]), cr_add(t, x[i + 1], cr_const(3.0)));
        s = cr_add(t, s, cr_sub(t, cr_mul(t, cr_const(100.0), cr_mul(t, a, a)), cr_neg(t, b)));
    }
    y[0] = s;
    return cr_tape_status(t);
}

static double chain_c(const double *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i + 1 < n; i++) {
        double a = x[i + 1] - x[i] * x[i];
        double b = (1.0 - x[i]) / (x[i + 1] + 3.0);
        s = s + (100.0 * (a * a) - -b);
    }
    return s;
}

static void test_long_loop(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    enum { N = 200 };
    double x[N], g[N], xp[N], xm[N], y;
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5;
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(ctx, NULL, chain_t, NULL, x, N, &p), CR_OK);
    size_t allocs = c.allocs;
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < N; i++)
            x[i] = 0.2 + 0.7 * cos(0.3 * (double)i + round);
        assert_int_equal(cr_prepared_value_and_gradient(p, x, N, &y, g), CR_OK);
        assert_close(y, chain_c(x, N), 1e-13);
        for (size_t j = 0; j < N; j++) { /* central differences, step 1e-6 */
            memcpy(xp, x, sizeof x);
            memcpy(xm, x, sizeof x);
            xp[j] += 1e-6;
            xm[j] -= 1e-6;
            double fd = (chain_c(xp, N) - chain_c(xm, N)) / 2e-6;
            assert_true(fabs(g[j] - fd) <= 1e-6 * (1 + fabs(fd)));
        }
    }
    assert_int_equal(c.allocs, allocs);
    cr_prepared_free(p);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_operation, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mixed_program, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_output_is_input, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_with_hvp, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_long_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
