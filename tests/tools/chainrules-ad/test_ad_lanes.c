/*
 * The vector forward mode with lane ranges (chainrules-ad --lane-ranges) on lanes_input.c,
 * checked against central differences (cr_fd_jacobian, five points, adaptive steps) and
 * against the plain forward mode of the same programs (f_fwd, one direction per call, no
 * lane ranges): with sparse seeds (the identity's columns, one lane each, so that tangents
 * carry few lanes), dense random seeds, 20 directions (two sweeps, the second of 4 lanes)
 * and run-time indices that make two elements the same. The stack is filled with NaN
 * before each call, so that a local array's tangent lanes the generated code reads before
 * writing them (it does not zero the tangents of arrays declared with no initialiser) show.
 */
#include "lanes_input.h"
#include "test_util.h"

enum { ND = 20, NIN = L_N + 1 };

typedef struct prog {
    const char *name;
    void (*f)(const int *, const double *, double *);
    void (*fwd)(const int *, const double *, const double *, double *, double *);
    void (*fwdv)(const int *, const double *, const double *, double *, double *, int);
} prog;

#define PROG(n)                  \
    {                            \
#n, n, n##_fwd, n##_fwdv \
    }
static const prog k_progs[] = {PROG(l_gather), PROG(l_blocks), PROG(l_cond), PROG(l_call),
                               PROG(l_lazy),   PROG(l_struct), PROG(l_rows)};

/* run-time indices: distinct, then idx[0] == idx[1] == idx[2] */
static const int k_idx[2][4] = {{2, 5, 1, 3}, {4, 4, 4, 0}};
static const double k_x[2][L_N] = {{0.3, -0.7, 1.2, 0.5, 0.9, 0.2},
                                   {1.1, 0.4, 0.8, -0.6, 1.7, 0.35}};

typedef struct env {
    const prog *p;
    const int *idx;
} env;

static cr_status call_prog(const double *x, size_t n, double *y, size_t m, void *e)
{
    (void)n;
    (void)m;
    const env *v = e;
    if (v->p)
        v->p->f(v->idx, x, y);
    else
        l_scalar(v->idx, x, x[L_N], y);
    return CR_OK;
}

/* Fills the stack below the caller with NaN (where the next call's locals will live). */
static __attribute__((noinline)) void paint_stack(void)
{
    volatile double junk[1 << 14];
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
        junk[i] = NAN;
}

/* jac (L_M x n) by central differences */
static void fd_jac(fixture *fx, env *e, const double *x, size_t n, double *jac)
{
    cr_fdm method;
    assert_int_equal(cr_fdm_central(5, 1, &method), CR_OK);
    assert_int_equal(cr_fd_jacobian(&method, NULL, call_prog, e, x, n, L_M, fx->arena, jac, NULL),
                     CR_OK);
}

/* seeds[i*ND + k]: direction k of input i; sparse: direction k is input k % n */
static void make_seeds(double *seeds, size_t n, bool sparse)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < ND; k++)
            seeds[i * ND + k] = sparse ? (double)((size_t)k % n == i) : sin(1.0 + k + 7.0 * i);
}

static void check_prog(fixture *fx, const prog *p, int c, bool sparse)
{
    double jac[L_M * L_N], seeds[L_N * ND], yd[L_M * ND], y[L_M], y0[L_M];
    env e = {p, k_idx[c]};
    fd_jac(fx, &e, k_x[c], L_N, jac);
    make_seeds(seeds, L_N, sparse);
    for (int i = 0; i < L_M * ND; i++)
        yd[i] = NAN;
    paint_stack();
    p->fwdv(k_idx[c], k_x[c], seeds, y, yd, ND);
    p->f(k_idx[c], k_x[c], y0);
    for (int r = 0; r < L_M; r++) {
        assert_close(y[r], y0[r], 1e-14);
        for (int k = 0; k < ND; k++) {
            double want = 0, dir[L_N], yt[L_M], ydt[L_M];
            for (int i = 0; i < L_N; i++) {
                dir[i] = seeds[i * ND + k];
                want += jac[r * L_N + i] * dir[i];
            }
            assert_near_(yd[r * ND + k], want, 1e-7, p->name, __FILE__, __LINE__);
            p->fwd(k_idx[c], k_x[c], dir, yt, ydt);
            assert_near_(yd[r * ND + k], ydt[r], 1e-13, p->name, __FILE__, __LINE__);
        }
    }
}

static void test_programs(void **state)
{
    fixture *fx = *state;
    for (size_t p = 0; p < sizeof k_progs / sizeof k_progs[0]; p++)
        for (int c = 0; c < 2; c++) {
            check_prog(fx, &k_progs[p], c, true);
            check_prog(fx, &k_progs[p], c, false);
        }
}

/* A scalar parameter's tangent lanes are found from its seeds. */
static void test_scalar_parameter(void **state)
{
    fixture *fx = *state;
    for (int c = 0; c < 2; c++)
        for (int sparse = 0; sparse < 2; sparse++) {
            double x[NIN], jac[L_M * NIN], seeds[NIN * ND], yd[L_M * ND], y[L_M];
            memcpy(x, k_x[c], sizeof k_x[c]);
            x[L_N] = 0.7 + 0.2 * c;
            env e = {NULL, k_idx[c]};
            fd_jac(fx, &e, x, NIN, jac);
            make_seeds(seeds, NIN, sparse);
            paint_stack();
            l_scalar_fwdv(k_idx[c], x, seeds, x[L_N], seeds + L_N * ND, y, yd, ND);
            for (int r = 0; r < L_M; r++)
                for (int k = 0; k < ND; k++) {
                    double want = 0;
                    for (int i = 0; i < NIN; i++)
                        want += jac[r * NIN + i] * seeds[i * ND + k];
                    assert_near_(yd[r * ND + k], want, 1e-7, "l_scalar", __FILE__, __LINE__);
                }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_programs, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_scalar_parameter, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
