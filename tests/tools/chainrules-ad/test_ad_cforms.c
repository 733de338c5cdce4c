/*
 * Ordinary C forms through chainrules-ad (cforms_input.c): qualified return types and
 * storage classes, compound literals, loop conditions with side effects. Each program's
 * gradient in every mode it is written in (f_rev, f_rev_set, f_fwd along each unit
 * vector, f_fwdv with all of them at once, f_jacfwd) against central differences
 * (cr_fd_jacobian, five points), and the primal value each mode returns against the
 * program's. The derivative file compiles with -Werror -Wall -Wextra (CMakeLists.txt).
 */
#include <math.h>
#include <string.h>

#include "cforms_input.h"
#include "test_util.h"

enum { N = 4 };

typedef double (*prog_fn)(const double *, int);

typedef struct prog {
    const char *name;
    prog_fn f;
    double (*rev)(const double *, double *, int, double);
    double (*rev_set)(const double *, double *, int, double); /* or NULL */
    double (*fwd)(const double *, const double *, int, double *);
    double (*fwdv)(const double *, const double *, int, double *, int); /* or NULL */
    double (*jac)(const double *, int, double *);                       /* or NULL */
} prog;

static cr_status prog_map(const double *x, size_t n, double *out, size_t m, void *env)
{
    (void)m;
    out[0] = ((const prog *)env)->f(x, (int)n);
    return CR_OK;
}

static void check_prog(fixture *fx, const prog *p, const double *x)
{
    double fd[N];
    cr_fdm method;
    assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
    assert_int_equal(
        cr_fd_jacobian(&method, NULL, prog_map, (void *)p, x, N, 1, fx->arena, fd, NULL), CR_OK);
    const double f = p->f(x, N);
    double g[N] = {0}, gs[N], gv[N], gj[N], xd[N * N] = {0};
    assert_close(p->rev(x, g, N, 1.0), f, 1e-15);
    for (int i = 0; i < N; i++) {
        gs[i] = NAN;
        gv[i] = gj[i] = NAN;
        xd[i * N + i] = 1; /* direction i of element i */
    }
    if (p->rev_set)
        assert_close(p->rev_set(x, gs, N, 1.0), f, 1e-15);
    if (p->fwdv)
        assert_close(p->fwdv(x, xd, N, gv, N), f, 1e-15);
    if (p->jac)
        assert_close(p->jac(x, N, gj), f, 1e-15);
    for (int k = 0; k < N; k++) {
        double e[N] = {0}, d = NAN;
        e[k] = 1;
        assert_close(p->fwd(x, e, N, &d), f, 1e-15);
        const double tol = 1e-7 * (1 + fabs(fd[k]));
        assert_near_(g[k], fd[k], tol, p->name, __FILE__, __LINE__);
        assert_near_(d, fd[k], tol, p->name, __FILE__, __LINE__);
        if (p->rev_set)
            assert_near_(gs[k], fd[k], tol, p->name, __FILE__, __LINE__);
        if (p->fwdv)
            assert_near_(gv[k], fd[k], tol, p->name, __FILE__, __LINE__);
        if (p->jac)
            assert_near_(gj[k], fd[k], tol, p->name, __FILE__, __LINE__);
    }
}

/* two points: the programs' branches (loop exits, conditions) are constant near each */
static const double k_points[2][N] = {{0.7, 1.1, -0.4, 0.9}, {-0.3, 0.8, 1.3, -1.2}};

static void check_all(void **state, const prog *progs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < 2; p++)
            check_prog(*state, &progs[i], k_points[p]);
}

/* const double, a const typedef, static inline and extern: every mode */
static void test_return_types(void **state)
{
    const prog progs[] = {
        {"c_ret", (prog_fn)c_ret, c_ret_rev, NULL, c_ret_fwd, c_ret_fwdv, c_ret_jacfwd},
        {"c_ret2", (prog_fn)c_ret2, c_ret2_rev, NULL, c_ret2_fwd, c_ret2_fwdv, c_ret2_jacfwd},
    };
    check_all(state, progs, sizeof progs / sizeof *progs);
}

/* array and struct literals; the Jacobian entries refuse a struct passed by address
 * (c_lit_struct) */
static void test_literals(void **state)
{
    const prog progs[] = {
        {"c_once", (prog_fn)c_once, c_once_rev, c_once_rev_set, c_once_fwd, NULL, c_once_jacfwd},
        {"c_lit_array", c_lit_array, c_lit_array_rev, NULL, c_lit_array_fwd, c_lit_array_fwdv,
         c_lit_array_jacfwd},
        {"c_lit_struct", c_lit_struct, c_lit_struct_rev, NULL, c_lit_struct_fwd, c_lit_struct_fwdv,
         NULL},
        {"c_lit_member", c_lit_member, c_lit_member_rev, NULL, c_lit_member_fwd, c_lit_member_fwdv,
         c_lit_member_jacfwd},
    };
    check_all(state, progs, sizeof progs / sizeof *progs);
}

/* i++ < n, (j += 2) < n, i-- > 0, ++j < n of a do loop, (t = next(t)) < c && k < m */
static void test_loop_conditions(void **state)
{
    const prog progs[] = {
        {"c_post", c_post, c_post_rev, NULL, c_post_fwd, c_post_fwdv, c_post_jacfwd},
        {"c_down", c_down, c_down_rev, NULL, c_down_fwd, c_down_fwdv, c_down_jacfwd},
        {"c_iter", c_iter, c_iter_rev, NULL, c_iter_fwd, c_iter_fwdv, c_iter_jacfwd},
    };
    check_all(state, progs, sizeof progs / sizeof *progs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_return_types, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_literals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_loop_conditions, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
