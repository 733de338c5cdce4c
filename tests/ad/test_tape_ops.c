/*
 * Tests of the named tape operations of every scalar row (tape_ops.h, generated from the
 * registry): a loop over CR_TAPE_SCALAR_OPS. Each operation is recorded at random points of
 * its row's sampling box, and the gradient of each of its results, swept on the tape, is
 * checked against central finite differences of the row's primal (chainrules/fd.h). The
 * value is the row's, each operation records what cr_tape_call() of its function records
 * (the same gradient), and the list covers every scalar row of the built-in registry.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

/* One entry of CR_TAPE_SCALAR_OPS: the operation, by its arity. */
typedef struct op_entry {
    const char *name;
    const cr_value *fn;
    unsigned nin, nout;
    union {
        cr_var (*f11)(cr_tape *, cr_var);
        cr_var (*f21)(cr_tape *, cr_var, cr_var);
        cr_var (*f31)(cr_tape *, cr_var, cr_var, cr_var);
        cr_status (*f12)(cr_tape *, cr_var, cr_var *);
    } u;
} op_entry;

/* (OP) names the exported function, also for the inline arithmetic of tape.h. */
#define ENTRY(NAME, OP, NIN, NOUT, HAND) {#NAME, &cr_fn_##NAME, NIN, NOUT, {.f##NIN##NOUT = (OP)}},
static const op_entry k_ops[] = {CR_TAPE_SCALAR_OPS(ENTRY)};
#undef ENTRY
#define N_OPS (sizeof k_ops / sizeof k_ops[0])

/* Record op at x on t: its results in y (nout of them). */
static cr_status record(cr_tape *t, const op_entry *op, const cr_var *x, cr_var *y)
{
    switch (op->nin * 10 + op->nout) {
    case 11:
        y[0] = op->u.f11(t, x[0]);
        return cr_tape_status(t);
    case 21:
        y[0] = op->u.f21(t, x[0], x[1]);
        return cr_tape_status(t);
    case 31:
        y[0] = op->u.f31(t, x[0], x[1], x[2]);
        return cr_tape_status(t);
    case 12:
        return op->u.f12(t, x[0], y);
    default:
        return CR_EUNIMPL;
    }
}

/* The row's primal, for the differences. */
static cr_status primal(const double *x, size_t n, double *y, size_t m, void *env)
{
    const cr_scalar_rule *row = env;
    double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    (void)n;
    row->f64(x, Y, D);
    for (size_t i = 0; i < m; i++)
        y[i] = Y[i];
    return CR_OK;
}

static uint64_t g_rng = 0x9E3779B97F4A7C15u;

static double uniform(double lo, double hi)
{
    g_rng = g_rng * 6364136223846793005u + 1442695040888963407u;
    double u = (double)(g_rng >> 11) * 0x1p-53;
    return lo + (hi - lo) * u;
}

/* The list is the registry's scalar rows, with their arities. */
static void test_ops_cover_every_row(void **state)
{
    (void)state;
    assert_int_equal(N_OPS, CR_TAPE_SCALAR_NOPS);
    const cr_registry *reg = cr_registry_builtin();
    size_t rows = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        const cr_scalar_rule *row = cr_scalar_rule_of(info.fn);
        if (row == NULL || info.variadic || info.non_differentiable || info.def->udata != row)
            continue;
        rows++;
        size_t found = 0;
        for (size_t k = 0; k < N_OPS; k++)
            found += k_ops[k].fn->u.func.fn == info.fn;
        if (found != 1) {
            print_error("row %s: %zu operations\n", info.fn->name, found);
            fail();
        }
    }
    assert_int_equal(rows, N_OPS);
    for (size_t k = 0; k < N_OPS; k++) {
        const cr_scalar_rule *row = cr_scalar_rule_of(k_ops[k].fn->u.func.fn);
        assert_non_null(row);
        assert_int_equal(row->nin, k_ops[k].nin);
        assert_int_equal(row->nout, k_ops[k].nout);
    }
}

/* Every operation's gradients against central differences of its row's primal. */
static void test_ops_gradients_match_differences(void **state)
{
    (void)state;
    cr_ctx *ctx;
    cr_tape *t;
    cr_arena *scratch;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_arena_new(ctx, NULL, &scratch), CR_OK);
    cr_fdm method;
    assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
    size_t checked = 0;
    for (size_t k = 0; k < N_OPS; k++) {
        const op_entry *op = &k_ops[k];
        const cr_scalar_rule *row = cr_scalar_rule_of(op->fn->u.func.fn);
        size_t good = 0;
        for (int attempt = 0; attempt < 12 && good < 3; attempt++) {
            double x[CR_SCALAR_MAX_IN], room = INFINITY;
            for (unsigned j = 0; j < op->nin; j++) {
                double lo = row->test.lo != NULL ? row->test.lo[j] : -3.0;
                double hi = row->test.hi != NULL ? row->test.hi[j] : 3.0;
                x[j] = uniform(lo, hi);
                if (hi > lo)
                    room = fmin(room, fmin(x[j] - lo, hi - x[j]));
            }
            /* The differences: never outside the box (domains end at its edges). */
            cr_fd_opts opts = {.struct_size = sizeof opts, .max_range = 0.5 * room};
            double jac[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN], err = 0.0;
            if (!(room > 1e-9) || cr_fd_jacobian(&method, &opts, primal, (void *)row, x, op->nin,
                                                 op->nout, scratch, jac, &err) != CR_OK)
                continue;
            double scale = 0.0;
            for (unsigned i = 0; i < op->nin * op->nout; i++)
                scale = fmax(scale, fabs(jac[i]));
            if (!(err <= 1e-7 * (1.0 + scale)))
                continue; /* a jump or a kink nearby: the differences are not trusted */

            double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
            row->f64(x, Y, D);
            cr_tape_reset(t);
            cr_var xs[CR_SCALAR_MAX_IN], ys[CR_SCALAR_MAX_OUT];
            assert_int_equal(cr_tape_inputs(t, x, op->nin, xs), CR_OK);
            cr_status st = record(t, op, xs, ys);
            if (st != CR_OK) {
                print_error("%s: %s\n", op->name, cr_tape_errmsg(t));
                fail();
            }
            for (unsigned i = 0; i < op->nout; i++) {
                double g[CR_SCALAR_MAX_IN];
                ASSERT_DBL(ys[i].v, Y[i]);
                assert_int_equal(cr_tape_gradient(t, ys[i], xs, op->nin, g), CR_OK);
                for (unsigned j = 0; j < op->nin; j++) {
                    double want = jac[i * op->nin + j];
                    if (!(fabs(g[j] - want) <= 1e-6 * (1.0 + fabs(want)))) {
                        print_error("%s at (%.17g, %.17g, %.17g): d result %u / d x%u = %.17g, "
                                    "differences %.17g (error %.3g)\n",
                                    op->name, x[0], op->nin > 1 ? x[1] : 0.0,
                                    op->nin > 2 ? x[2] : 0.0, i, j, g[j], want, err);
                        fail();
                    }
                }
            }
            /* The same records as cr_tape_call() of the function: the same gradient. */
            cr_tape_reset(t);
            assert_int_equal(cr_tape_inputs(t, x, op->nin, xs), CR_OK);
            cr_var zs[CR_SCALAR_MAX_OUT];
            assert_int_equal(cr_tape_call(t, op->fn, xs, op->nin, zs, op->nout), CR_OK);
            for (unsigned i = 0; i < op->nout; i++) {
                double g[CR_SCALAR_MAX_IN], h[CR_SCALAR_MAX_IN];
                ASSERT_DBL(zs[i].v, Y[i]);
                assert_int_equal(cr_tape_gradient(t, zs[i], xs, op->nin, h), CR_OK);
                cr_tape_reset(t);
                assert_int_equal(cr_tape_inputs(t, x, op->nin, xs), CR_OK);
                assert_int_equal(record(t, op, xs, ys), CR_OK);
                assert_int_equal(cr_tape_gradient(t, ys[i], xs, op->nin, g), CR_OK);
                for (unsigned j = 0; j < op->nin; j++)
                    ASSERT_DBL(g[j], h[j]);
                cr_tape_reset(t);
                assert_int_equal(cr_tape_inputs(t, x, op->nin, xs), CR_OK);
                assert_int_equal(cr_tape_call(t, op->fn, xs, op->nin, zs, op->nout), CR_OK);
            }
            good++;
        }
        if (good == 0) {
            print_error("%s: no point of its box where the differences could be trusted\n",
                        op->name);
            fail();
        }
        checked++;
    }
    assert_int_equal(checked, N_OPS);
    cr_arena_free(scratch);
    cr_tape_free(t);
    cr_ctx_free(ctx);
}

/* The current tape (NULL), a failed tape, and a row of two results given no room. */
static void test_ops_tape_handling(void **state)
{
    (void)state;
    cr_ctx *ctx;
    cr_tape *t;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    cr_tape *old = cr_tape_set_current(t);
    cr_var x = cr_tape_input(NULL, 0.5);
    cr_var y = cr_tanh(NULL, x);
    double g;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    assert_close(y.v, tanh(0.5), 1e-15);
    assert_close(g, 1.0 - tanh(0.5) * tanh(0.5), 1e-14);
    cr_tape_set_current(old);

    cr_var sc[2];
    assert_int_equal(cr_sincos(t, x, sc), CR_OK);
    ASSERT_DBL(sc[0].v, sin(0.5));
    ASSERT_DBL(sc[1].v, cos(0.5));
    assert_int_equal(cr_sincos(t, x, NULL), CR_EINVAL);
    /* The tape has failed: NaN constants, nothing recorded. */
    cr_var z = cr_atan2(t, x, x);
    assert_true(isnan(z.v) && cr_var_is_const(z));
    assert_int_equal(cr_sincos(t, x, sc), CR_EINVAL);
    assert_true(isnan(sc[0].v) && isnan(sc[1].v));
    /* No tape at all. */
    assert_int_equal(cr_sincos(NULL, x, sc), CR_EMISUSE);
    assert_true(isnan(sc[0].v) && isnan(sc[1].v));
    assert_true(isnan(cr_logistic(NULL, x).v));
    cr_tape_free(t);
    cr_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_cover_every_row),
        cmocka_unit_test(test_ops_gradients_match_differences),
        cmocka_unit_test(test_ops_tape_handling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
