/*
 * The ba objective (GradBench's bundle adjustment, bench/objectives/ba.c) differentiated as
 * bench/objectives/ba_dual.h writes it, the code that chainrules-bench times: the 2 x 15
 * Jacobian of a reprojection block in one evaluation on the 15-direction CR_DUALN_DEFINE
 * type (dual_ba_dense_ratio) and in stages on narrower types composed by TYPE_chain
 * (ba_project_jac_staged, dual_ba_ratio), each checked entry by entry against central
 * finite differences (cr_fd_derivative) of the plain C ba_project, on blocks shaped as
 * ba1's and on a block of zero rotation (the objective's other branch); with the lane past
 * the 15th direction still zero and the tangents visible as d[].
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ba_dual.h"
#include "objectives.h"
#include "test_util.h"

/* One block: its 15 inputs (camera, point, weight) and its feature. */
typedef struct block {
    double in[15];
    double feat[2];
} block;

/* The errors and the 2 x 15 Jacobian (row-major) on duals, one evaluation. */
static void block_jac(const block *b, double *err, double *J, ba_dual *e)
{
    ba_dual c[11], x[3];
    for (size_t i = 0; i < 11; i++)
        c[i] = ba_dual_var(b->in[i], i);
    for (size_t i = 0; i < 3; i++)
        x[i] = ba_dual_var(b->in[11 + i], 11 + i);
    ba_project_dual(c, x, ba_dual_var(b->in[14], 14), b->feat, e);
    for (int r = 0; r < 2; r++) {
        err[r] = e[r].v;
        for (int j = 0; j < 15; j++)
            J[15 * r + j] = e[r].d[j];
    }
}

/* Error `out` of the plain C objective as a function of input j alone. */
typedef struct fd_env {
    const block *b;
    int j, out;
} fd_env;

static cr_status primal_j(double xj, double *y, void *env_)
{
    const fd_env *env = env_;
    double in[15], err[2];
    memcpy(in, env->b->in, sizeof in);
    in[env->j] = xj;
    ba_project(in, in + 11, in + 14, env->b->feat, err);
    *y = err[env->out];
    return CR_OK;
}

/* The errors and the Jacobian of b in the form `staged` (0: one 15-direction type,
 * ba_project_dual; 1: the stages of ba_project_jac_staged), checked against the plain C
 * errors and, entry by entry, against central differences. */
static void check_block_form(const block *b, int staged, size_t *checked)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    double err[2], J[30], want[2];
    ba_dual e[2];
    if (staged) {
        ba_project_jac_staged(b->in, b->in + 11, b->in + 14, b->feat, err, J);
    } else {
        block_jac(b, err, J, e);
        /* the lane past the 15 directions stays zero */
        for (int r = 0; r < 2; r++)
            assert_true(e[r].d[15] == 0.0);
    }
    ba_project(b->in, b->in + 11, b->in + 14, b->feat, want);
    for (int r = 0; r < 2; r++)
        assert_true(fabs(err[r] - want[r]) <= 1e-12 * (1.0 + fabs(want[r])));
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < 15; j++) {
            fd_env env = {b, j, r};
            double d, derr;
            assert_int_equal(cr_fd_derivative(&m, NULL, primal_j, &env, b->in[j], &d, &derr),
                             CR_OK);
            double got = J[15 * r + j];
            if (!(fabs(got - d) <= 1e-6 * (fabs(d) + 1e-3) + 10 * derr)) {
                print_error("%s: J[%d][%d] = %.17g, central difference %.17g (error %.3g)\n",
                            staged ? "staged" : "one type", r, j, got, d, derr);
                fail();
            }
            (*checked)++;
        }
}

static void check_block(const block *b, size_t *checked)
{
    check_block_form(b, 0, checked);
    check_block_form(b, 1, checked);
}

/* Blocks shaped as ba1's (ba_make_block), each Jacobian against differences. */
static void test_ba_blocks_against_fd(void **state)
{
    (void)state;
    size_t checked = 0;
    for (unsigned long seed = 1; seed <= 8; seed++) {
        block b;
        ba_make_block(seed, b.in, b.in + 11, b.in + 14, b.feat);
        check_block(&b, &checked);
    }
    assert_int_equal(checked, 2 * 8 * 30);
}

/* A camera of zero rotation: the objective's linearised branch, whose Jacobian along the
 * rotation is the limit of the other branch's (the differences straddle both). */
static void test_ba_zero_rotation_against_fd(void **state)
{
    (void)state;
    block b;
    ba_make_block(11, b.in, b.in + 11, b.in + 14, b.feat);
    b.in[0] = b.in[1] = b.in[2] = 0.0;
    size_t checked = 0;
    check_block(&b, &checked);
    assert_int_equal(checked, 2 * 30);
}

/* The tangents as doubles: d[] holds N lanes rounded up to 4, the value after them, and a
 * direction's seed is visible at its index. */
static void test_layout(void **state)
{
    (void)state;
    ba_dual a = ba_dual_var(2.0, 13);
    assert_int_equal(sizeof a.d / sizeof a.d[0], 16);
    /* 16 lanes and the value, aligned to 16 bytes whatever the target's vector width */
    assert_int_equal(sizeof a, 144);
    assert_int_equal(_Alignof(ba_dual), 16);
    for (size_t i = 0; i < 16; i++)
        assert_true(a.d[i] == (i == 13 ? 1.0 : 0.0));
    double t[15];
    for (int i = 0; i < 15; i++)
        t[i] = (double)i - 7.0;
    ba_dual b = ba_dual_mul(ba_dual_make(3.0, t), a);
    for (size_t i = 0; i < 15; i++)
        assert_true(b.d[i] == 2.0 * t[i] + (i == 13 ? 3.0 : 0.0));
    assert_true(b.d[15] == 0.0);
    assert_true(b.v == 6.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ba_blocks_against_fd),
        cmocka_unit_test(test_ba_zero_rotation_against_fd),
        cmocka_unit_test(test_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
