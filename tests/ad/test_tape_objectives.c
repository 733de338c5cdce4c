/*
 * GradBench's gmm and lstm written against the tape API (bench/tape_objectives.c, the
 * objectives of chainrules-bench's tape_gmm_* and tape_lstm_* figures): their values against
 * the plain C objectives of bench/objectives (gmm.c, lstm.c), their gradients, recorded and
 * from a prepared gradient at new inputs, against central differences of those plain C
 * objectives, at small sizes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

#include "../../bench/objectives/gmm.c"
#include "../../bench/objectives/inputs.c"
#include "../../bench/objectives/lstm.c"
#include "../../bench/tape_objectives.c"

#define FD_RTOL 1e-7

/* A taped objective, its plain C primal as a cr_fd_vec_fn, and its inputs. */
typedef struct objective {
    const char *name;
    cr_ad_fn f;
    void *env;
    cr_fd_vec_fn fc;
    size_t n;
    double *x;
} objective;

/* Value and gradient from the tape and from a prepared gradient (prepared at x, then called
 * at x and at two shifted points) against the plain C value and central differences. */
static void check_objective(fixture *fx, const objective *o)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    double *g = malloc(o->n * sizeof *g), *fd = malloc(o->n * sizeof *fd);
    double *x = malloc(o->n * sizeof *x);
    assert_non_null(g);
    assert_non_null(fd);
    assert_non_null(x);
    cr_tape *t;
    assert_int_equal(cr_tape_new(fx->ctx, NULL, &t), CR_OK);
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(fx->ctx, NULL, o->f, o->env, o->x, o->n, &p), CR_OK);
    for (int point = 0; point < 3; point++) {
        for (size_t j = 0; j < o->n; j++)
            x[j] = o->x[j] + 0.05 * point * sin(1.0 + (double)j);
        double yc, y;
        assert_int_equal(o->fc(x, o->n, &yc, 1, o->env), CR_OK);
        assert_int_equal(cr_fd_jacobian(&m, NULL, o->fc, o->env, x, o->n, 1, fx->arena, fd, NULL),
                         CR_OK);
        cr_arena_reset(fx->arena);
        for (int prepared = 0; prepared < 2; prepared++) {
            if (prepared)
                assert_int_equal(cr_prepared_value_and_gradient(p, x, o->n, &y, g), CR_OK);
            else
                assert_int_equal(cr_tape_value_and_gradient(t, o->f, o->env, x, o->n, &y, g),
                                 CR_OK);
            assert_close(y, yc, 1e-12);
            for (size_t j = 0; j < o->n; j++) {
                if (fabs(g[j] - fd[j]) > FD_RTOL * (1 + fabs(fd[j])))
                    print_message("%s (%s), point %d, input %zu: %.17g, differences %.17g\n",
                                  o->name, prepared ? "prepared" : "tape", point, j, g[j], fd[j]);
                assert_close(g[j], fd[j], FD_RTOL);
            }
        }
    }
    cr_prepared_free(p);
    cr_tape_free(t);
    free(g);
    free(fd);
    free(x);
}

/* ---- gmm: d = 3, k = 4, n = 6 ---------------------------------------------------------- */

enum { GD = 3, GK = 4, GN = 6 };

static cr_status gmm_c(const double *x, size_t n, double *y, size_t m, void *env)
{
    const tape_gmm_env *e = env;
    (void)n;
    (void)m;
    int d = e->d, k = e->k;
    y[0] =
        gmm_objective(d, k, e->n, x, x + k, x + k + k * d, x + k + 2 * k * d, e->x, e->gamma, e->m);
    return CR_OK;
}

static void test_gmm(void **state)
{
    fixture *fx = *state;
    size_t n = tape_gmm_nin(GD, GK);
    double x[GK * (1 + 2 * GD + GD * (GD - 1) / 2)], pts[GD * GN];
    cr_var work[GD * GK + 2 * GK + 2 * GD];
    assert_int_equal(n, sizeof x / sizeof x[0]);
    assert_int_equal(tape_gmm_work(GD, GK), sizeof work / sizeof work[0]);
    gmm_make_input(GD, GK, GN, 5, x, x + GK, x + GK + GD * GK, x + GK + 2 * GD * GK, pts);
    /* (m = 2: the prior's m sum(q) term is not zero) */
    tape_gmm_env e = {.d = GD, .k = GK, .n = GN, .x = pts, .gamma = 1.5, .m = 2, .work = work};
    objective o = {"gmm", tape_gmm, &e, gmm_c, n, x};
    check_objective(fx, &o);
}

/* ---- lstm: l = 2, c = 5, b = 3 --------------------------------------------------------- */

enum { LL = 2, LC = 5, LB = 3 };

static cr_status lstm_c(const double *x, size_t n, double *y, size_t m, void *env)
{
    const tape_lstm_env *e = env;
    (void)n;
    (void)m;
    y[0] = lstm_objective(e->l, e->c, e->b, x, x + 8 * e->l * e->b, e->state, e->sequence);
    return CR_OK;
}

static void test_lstm(void **state)
{
    fixture *fx = *state;
    size_t n = tape_lstm_nin(LL, LB);
    double x[8 * LL * LB + 3 * LB], st[2 * LL * LB], seq[LC * LB];
    cr_var work[2 * LL * LB + LB];
    assert_int_equal(n, sizeof x / sizeof x[0]);
    assert_int_equal(tape_lstm_work(LL, LB), sizeof work / sizeof work[0]);
    lstm_make_input(LL, LC, LB, 6, x, x + 8 * LL * LB, st, seq);
    tape_lstm_env e = {.l = LL, .c = LC, .b = LB, .state = st, .sequence = seq, .work = work};
    objective o = {"lstm", tape_lstm, &e, lstm_c, n, x};
    check_objective(fx, &o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gmm, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lstm, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
