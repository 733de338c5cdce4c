/*
 * The second-order forms of sylvester(A, B, C) and lyap(A, C) (src/rulesets/linalg/forms_factors.c,
 * form_sylvester) on second-order tapes. Each H v (cr_tape_ahvp) is checked against central
 * differences, along the direction, of the gradient a first-order tape computes, at several
 * points and directions, the solution composed with other operations so that its cotangent
 * is not constant: all arguments variables, and each subset of them constant; a full Hessian
 * (cr_tape_hessian) of a function of scalars through both; and the arguments the form does not
 * cover (structured or complex matrices), refused when recorded.
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"

/* Σ sin(X) + (Σ X²)² + Σ X ⊙ M, M a fixed matrix (so that X̄ varies from entry to entry) */
static double k_M[9] = {0.4, -1.1, 0.7, 0.2, 1.3, -0.6, -0.9, 0.5, 0.8};

static cr_var mix(cr_tape *t, cr_avar X, size_t r, size_t c)
{
    static cr_array M;
    M = cr_array_matrix(k_M, r, c);
    cr_var q = sum_sq(t, X);
    cr_var a =
        cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_arr(cr_av_const(&M))));
    return cr_add(t, cr_add(t, sum_sin(t, X), cr_mul(t, q, q)), a);
}

/* Which arguments are constants (bit j: argument j is the fixed value k_fix[j]). */
typedef struct sylv_case {
    unsigned konst;
    size_t n, m;
} sylv_case;

static double k_fixA[9] = {2.1, 0.3, -0.2, 0.1, 1.8, 0.4, -0.3, 0.2, 2.4};
static double k_fixB[4] = {1.2, -0.3, 0.25, 0.9};
static double k_fixC[6] = {0.5, -0.4, 1.0, 0.3, -0.8, 0.6};

static cr_avar arg_or_fix(unsigned konst, size_t j, cr_avar x, const double *fix, size_t r,
                          size_t c)
{
    static cr_array F[3];
    if (!(konst & (1u << j)))
        return x;
    F[j] = cr_array_matrix((double *)(uintptr_t)fix, r, c); /* only read */
    return cr_av_const(&F[j]);
}

/* A n x n, B m x m, C n x m: mix(sylvester(A, B, C)) + Σ sin(A), so that the program stays
 * nonlinear in every input (a constant argument's input is then only in that sum). */
static cr_var sylv_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const sylv_case *c = env;
    size_t n = c->n, m = c->m;
    cr_targ args[3] = {cr_targ_arr(arg_or_fix(c->konst, 0, X[0], k_fixA, n, n)),
                       cr_targ_arr(arg_or_fix(c->konst, 1, X[1], k_fixB, m, m)),
                       cr_targ_arr(arg_or_fix(c->konst, 2, X[2], k_fixC, n, m))};
    cr_avar Y = cr_tape_acall_a(t, &cr_fn_sylvester, args, 3);
    cr_var e = cr_add(t, sum_sin(t, X[0]), sum_sin(t, X[1]));
    return cr_add(t, cr_add(t, mix(t, Y, n, m), e), sum_sin(t, X[2]));
}

/* A point with A = 2 I + R, B = I + R (R small), so that λ(A) + λ(B) stays away from 0. */
static void sylv_point(const sylv_case *c, unsigned seed, double *z)
{
    size_t n = c->n, m = c->m, L = n * n + m * m + n * m;
    point(L, seed, 0.5, z);
    for (size_t a = 0; a < n; a++)
        z[a * n + a] += 2.0;
    for (size_t a = 0; a < m; a++)
        z[n * n + a * m + a] += 1.0;
}

static void test_sylvester(void **state)
{
    fixture *f = *state;
    static const size_t shapes[2][2] = {{3, 2}, {2, 2}};
    for (int q = 0; q < 2; q++) {
        sylv_case c = {0, shapes[q][0], shapes[q][1]};
        size_t n = c.n, m = c.m;
        prob p = {
            .f = sylv_p, .env = &c, .na = 3, .ndim = {2, 2, 2}, .shape = {{n, n}, {m, m}, {n, m}}};
        for (unsigned seed = 0; seed < 3; seed++) {
            double z[MAXZ];
            sylv_point(&c, seed + 5 * (unsigned)q, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
}

/* Each subset of the arguments constant (konst 1..6; all constant leaves nothing to test). */
static void test_sylvester_constants(void **state)
{
    fixture *f = *state;
    for (unsigned konst = 1; konst < 7; konst++) {
        sylv_case c = {konst, 3, 2};
        prob p = {
            .f = sylv_p, .env = &c, .na = 3, .ndim = {2, 2, 2}, .shape = {{3, 3}, {2, 2}, {3, 2}}};
        double z[MAXZ];
        sylv_point(&c, konst, z);
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 2);
    }
}

/* ---- lyap ------------------------------------------------------------------------------------ */

/* A, C n x n: mix(lyap(A, C)) + Σ sin(A) + Σ sin(C); env: konst as for sylvester (bit 0: A,
 * bit 1: C constant) */
static cr_var lyap_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const sylv_case *c = env;
    size_t n = c->n;
    static double fixC[9] = {0.5, -0.4, 1.0, 0.3, -0.8, 0.6, 0.2, 0.1, -0.7};
    cr_targ args[2] = {cr_targ_arr(arg_or_fix(c->konst, 0, X[0], k_fixA, n, n)),
                       cr_targ_arr(arg_or_fix(c->konst, 1, X[1], fixC, n, n))};
    cr_avar Y = cr_tape_acall_a(t, &cr_fn_lyap, args, 2);
    return cr_add(t, cr_add(t, mix(t, Y, n, n), sum_sin(t, X[0])), sum_sin(t, X[1]));
}

static void test_lyap(void **state)
{
    fixture *f = *state;
    for (unsigned konst = 0; konst < 3; konst++)
        for (size_t n = 2; n <= 3; n++) {
            sylv_case c = {konst, n, n};
            prob p = {.f = lyap_p, .env = &c, .na = 2, .ndim = {2, 2}, .shape = {{n, n}, {n, n}}};
            for (unsigned seed = 0; seed < 2; seed++) {
                double z[MAXZ];
                point(2 * n * n, seed + 3 * konst + 7 * (unsigned)n, 0.5, z);
                for (size_t a = 0; a < n; a++)
                    z[a * n + a] += 1.5;
                check_hvp_dirs(f->ctx, &p, z, 1e-6, 2);
            }
        }
}

/* ---- A full Hessian of scalars ------------------------------------------------------------ */

/* x, y, w: A = A0 + x E, B = B0 + y F, C = C0 + w G;
 * Σ sylvester(A, B, C)² + lyap(A, C Cᵀ)[1, 2] x */
static double k_A0[4] = {2.0, 0.3, -0.4, 1.7}, k_E[4] = {1, 0.5, 0, -1};
static double k_B0[4] = {1.1, 0.2, 0.1, 1.4}, k_Fm[4] = {0, 1, -1, 0.5};
static double k_C0[4] = {0.6, -0.2, 0.4, 1.0}, k_G[4] = {1, 0, 0.3, 1};

static cr_avar affine(cr_tape *t, cr_var s, double *base, double *dir)
{
    static cr_array B[3], D[3];
    static int next = 0;
    int q = next++ % 3;
    B[q] = cr_array_matrix(base, 2, 2);
    D[q] = cr_array_matrix(dir, 2, 2);
    cr_avar M = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(cr_av_const(&D[q])));
    return cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(M), cr_targ_arr(cr_av_const(&B[q])));
}

static cr_var three_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    cr_avar A = affine(t, s[0], k_A0, k_E), B = affine(t, s[1], k_B0, k_Fm),
            C = affine(t, s[2], k_C0, k_G);
    cr_targ args[3] = {cr_targ_arr(A), cr_targ_arr(B), cr_targ_arr(C)};
    cr_var a = sum_sq(t, cr_tape_acall_a(t, &cr_fn_sylvester, args, 3));
    cr_avar Ct = call_a(t, &cr_fn_transpose, cr_targ_arr(C), i64(0), 1);
    cr_targ largs[2] = {cr_targ_arr(A), cr_targ_arr(cr_av_matmul(t, C, Ct))};
    cr_avar Y = cr_tape_acall_a(t, &cr_fn_lyap, largs, 2);
    cr_var e = cr_tape_acall_s(t, &cr_fn_getindex, (cr_targ[]){cr_targ_arr(Y), i64(1)}, 2);
    return cr_add(t, a, cr_mul(t, e, s[0]));
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = three_p, .ns = 3, .na = 0};
    double pts[3][3] = {{0.3, 0.4, -0.5}, {-0.2, 0.9, 0.7}, {0.6, -0.3, 1.2}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* ---- matfun_herm ----------------------------------------------------------------------------- */

/* f and A's form (dense, its upper triangle read, or a Symmetric view) given by env:
 * mix(matfun_herm(f, A)) + Σ sin(A) */
typedef struct mf_case {
    const cr_value *f;
    bool view;
} mf_case;

static cr_var matfun_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const mf_case *c = env;
    cr_targ A = cr_targ_arr(X[0]);
    if (c->view)
        A = cr_targ_arr(call_a(t, &cr_fn_symmetric, A, i64(0), 1));
    cr_avar Y = call_a(t, &cr_fn_matfun_herm, cr_targ_value(*c->f), A, 2);
    return cr_add(t, mix(t, Y, 3, 3), sum_sin(t, X[0]));
}

static void test_matfun(void **state)
{
    fixture *f = *state;
    static const cr_value *const fns[4] = {&cr_fn_exp, &cr_fn_sin, &cr_fn_tanh, &cr_fn_cos};
    for (int q = 0; q < 8; q++) {
        mf_case c = {fns[q % 4], q >= 4};
        prob p = {.f = matfun_p, .env = &c, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[9];
            point(9, seed + 2 * (unsigned)q, 0.8, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
}

/* Nearly repeated eigenvalues (within the rule's tolerance and just outside it): the form
 * has no 1/(λ_i − λ_j) of its own, and H v still matches the differences. A = Q diag(1, 1 + g,
 * 2) Qᵀ, Q a rotation. */
static void test_matfun_close_eigenvalues(void **state)
{
    fixture *f = *state;
    const double co = cos(0.5), sn = sin(0.5);
    const double Q[9] = {co, -sn, 0, sn, co, 0, 0, 0, 1};
    static const double gaps[3] = {0.0, 1e-3, 0.1};
    for (int q = 0; q < 3; q++) {
        double lam[3] = {1.0, 1.0 + gaps[q], 2.0}, z[9];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                z[a * 3 + b] = 0.0;
                for (int e = 0; e < 3; e++)
                    z[a * 3 + b] += Q[a * 3 + e] * lam[e] * Q[b * 3 + e];
            }
        mf_case c = {&cr_fn_exp, false};
        prob p = {.f = matfun_p, .env = &c, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
        check_hvp_dirs(f->ctx, &p, z, 1e-5, 2);
    }
}

/* ---- Refusals -------------------------------------------------------------------------------- */

/* Structured or complex arguments: refused when recorded (CR_EUNIMPL), naming the function
 * and the argument. */
static void test_refusals(void **state)
{
    fixture *f = *state;
    double v[2] = {2.0, 1.5}, m[4] = {2.0, 0.1, 0.2, 1.7};
    double zc[8] = {1.0, 0.1, 0.2, 0.0, 0.3, -0.1, 1.0, 0.2};
    size_t shape[2] = {2, 2};
    cr_array va = cr_array_vector(v, 2), ma = cr_array_matrix(m, 2, 2), za;
    assert_int_equal(cr_array_view_init(&za, zc, CR_DT_C128, 2, shape, NULL), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    /* case: which argument is Diagonal (0..2) or complex (3..5), for sylvester then lyap */
    for (int q = 0; q < 10; q++) {
        bool ly = q >= 6;
        int w = ly ? (q - 6) % 2 : q % 3, cplx = ly ? q >= 8 : q >= 3;
        cr_tape_reset(t);
        cr_targ M = cr_targ_arr(cr_tape_array_input(t, &ma));
        cr_targ V = cr_targ_arr(cr_tape_array_input(t, &va));
        cr_targ odd =
            cplx ? cr_targ_arr(cr_av_const(&za)) : cr_targ_arr(call_a(t, &cr_fn_diagonal, V, V, 1));
        assert_ok(t, cr_tape_status(t));
        cr_targ args[3] = {M, M, M}, out;
        args[w] = odd;
        cr_status st =
            cr_tape_acall(t, ly ? &cr_fn_lyap : &cr_fn_sylvester, args, ly ? 2 : 3, &out);
        assert_int_equal(st, CR_EUNIMPL);
        char msg[160];
        const char *nm = ly ? (w == 0 ? "A" : "C") : (w == 0 ? "A" : w == 1 ? "B" : "C");
        snprintf(msg, sizeof msg, "%s: no second-order form on the tape: %s %s",
                 ly ? "lyap" : "sylvester", nm, cplx ? "is complex" : "has a structure");
        assert_contains(cr_tape_errmsg(t), msg);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL); /* sticky */
    }
    /* matfun_herm: a Diagonal A (accepted: test_hvp_structured.c), a complex A, an f that
     * is not a row of one argument */
    static const char *const mmsgs[3] = {
        NULL, "matfun_herm: no second-order form on the tape: A is complex",
        "matfun_herm: no second-order form on the tape: f is not a scalar-table function of one "
        "argument"};
    for (int q = 0; q < 3; q++) {
        cr_tape_reset(t);
        cr_targ M = cr_targ_arr(cr_tape_array_input(t, &ma));
        cr_targ V = cr_targ_arr(cr_tape_array_input(t, &va));
        cr_targ A = q == 0   ? cr_targ_arr(call_a(t, &cr_fn_diagonal, V, V, 1))
                    : q == 1 ? cr_targ_arr(cr_tape_array_input(t, &za))
                             : M;
        assert_ok(t, cr_tape_status(t));
        cr_targ args[2] = {cr_targ_value(q == 2 ? cr_fn_hypot : cr_fn_exp), A}, out;
        assert_int_equal(cr_tape_acall(t, &cr_fn_matfun_herm, args, 2, &out),
                         q == 0 ? CR_OK : CR_EUNIMPL);
        if (q > 0)
            assert_contains(cr_tape_errmsg(t), mmsgs[q]);
    }
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sylvester, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sylvester_constants, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lyap, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matfun, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_matfun_close_eigenvalues, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
