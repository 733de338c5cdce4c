/*
 * The second-order forms of eigen_general and eigvals_general (src/rulesets/linalg/,
 * geig_init, geig_dir): the eigendecomposition of a real general matrix, complex eigenvalues and
 * eigenvectors, on second-order tapes. The programs take the complex results to real arrays
 * with broadcasts of creal, cimag and conj (linear: S = 0, accepted on second-order tapes for
 * complex arrays) and feed them to nonlinear real functions, so that the cotangents of λ and
 * V vary from one element to the next and depend on A. Each H v (cr_tape_ahvp) is checked
 * against central differences, along the direction, of the gradient a first-order tape
 * computes, at several matrices (complex-conjugate pairs and real eigenvalues, well apart;
 * eigenvectors whose largest component is clearly the largest, so that the gauge is smooth)
 * and directions; losses that depend on the eigenvectors' phases (through the gauge) and
 * losses that do not (|V_ij|²); a forward sweep; a full Hessian (cr_tape_hessian) of a
 * function of three scalars; the refusals (a complex A when recording, a defective A in the
 * sweep); and a repeated eigenvalue (finite, not refused).
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>

#include "test_forms.h"

static double k_w4[4] = {1.0, -0.7, 2.0, 0.4};
static double k_u4[4] = {0.3, 1.1, -0.5, 0.8};

/* f.(a) of a complex (or real) array variable a, f = creal, cimag or conj */
static cr_avar cpart(cr_tape *t, const cr_value *f, cr_avar a)
{
    return cr_av_broadcast1(t, f, cr_targ_arr(a));
}

/* Σ w_i sin(re λ_i) + Σ u_i (im λ_i)² + (Σ re λ_i²)² ... over the n eigenvalues (n <= 4);
 * conj: the imaginary parts read through conj (−im conj λ = im λ) */
static cr_var lam_loss(cr_tape *t, cr_avar lam, size_t n, bool conj)
{
    static cr_array w, u;
    w = cr_array_vector(k_w4, n);
    u = cr_array_vector(k_u4, n);
    cr_avar re = cpart(t, &cr_fn_creal, lam);
    cr_avar im =
        conj ? cpart(t, &cr_fn_cimag, cpart(t, &cr_fn_conj, lam)) : cpart(t, &cr_fn_cimag, lam);
    cr_avar sr = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(re));
    cr_var a = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(sr), cr_targ_arr(cr_av_const(&w))));
    cr_avar i2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(im));
    cr_var b = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(i2), cr_targ_arr(cr_av_const(&u))));
    cr_var q = sum_sq(t, re);
    return cr_add(t, cr_add(t, a, b), cr_mul(t, cr_mul(t, q, q), cr_const(0.05)));
}

/* Weights of the eigenvector losses (n x n, n <= 4). */
static double k_c1[16] = {0.4,  -1.0, 0.7, 0.2,  1.3, 0.5,  -0.6, 0.9,
                          -0.3, 0.8,  1.1, -0.4, 0.6, -0.2, 0.3,  1.0};
static double k_c2[16] = {-0.5, 0.9, 0.3,  -0.8, 0.2,  -1.2, 0.6, 0.4,
                          1.0,  0.1, -0.7, 0.5,  -0.9, 0.3,  0.8, -0.1};

/* Phase-free: Σ C1 ∘ sin(|V|²) with |V|² = (re V)² + (im V)², unchanged by any phase of the
 * columns of V. */
static cr_var v_abs_loss(cr_tape *t, cr_avar V, size_t n)
{
    static cr_array c1;
    c1 = cr_array_matrix(k_c1, n, n);
    cr_avar r2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(cpart(t, &cr_fn_creal, V)));
    cr_avar i2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(cpart(t, &cr_fn_cimag, V)));
    cr_avar m2 = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(r2), cr_targ_arr(i2));
    cr_avar s = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(m2));
    return cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(s), cr_targ_arr(cr_av_const(&c1))));
}

/* Phase-dependent (through the gauge): Σ C1 ∘ sin(re V) + Σ C2 ∘ (im V)² + (Σ C2 ∘ im V)² */
static cr_var v_phase_loss(cr_tape *t, cr_avar V, size_t n)
{
    static cr_array c1, c2;
    c1 = cr_array_matrix(k_c1, n, n);
    c2 = cr_array_matrix(k_c2, n, n);
    cr_avar re = cpart(t, &cr_fn_creal, V), im = cpart(t, &cr_fn_cimag, V);
    cr_avar sr = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(re));
    cr_var a = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(sr), cr_targ_arr(cr_av_const(&c1))));
    cr_avar i2 = cr_av_broadcast1(t, &cr_fn_square, cr_targ_arr(im));
    cr_var b = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(i2), cr_targ_arr(cr_av_const(&c2))));
    cr_var c = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(im), cr_targ_arr(cr_av_const(&c2))));
    return cr_add(t, cr_add(t, a, b), cr_mul(t, c, c));
}

/* ---- Points -------------------------------------------------------------------------------- */

/* A base matrix B (n x n) of kind q plus 0.25 R (R from the seed): q = 0: 3 x 3, a pair
 * 0.5 ± i√3 and 3.5; q = 1: 4 x 4, a pair 1 ± i√3, 4 and −2.5; q = 2: 4 x 4, pairs 1 ± i√3
 * and −2 ± i√2; q = 3: 3 x 3, real eigenvalues 1, 3.5, −2. The pairs come from blocks
 * [a b; −c a] with b ≠ c, so that the two components of their eigenvectors have clearly
 * different moduli (the gauge's largest component is clearly the largest). */
static size_t base_point(int q, unsigned seed, double *z)
{
    size_t n = q == 0 || q == 3 ? 3 : 4;
    double B[16] = {0};
    if (q == 3) {
        B[0] = 1.0;
        B[4] = 3.5;
        B[8] = -2.0;
    } else {
        B[0] = B[n + 1] = q == 0 ? 0.5 : 1.0;
        B[1] = 3.0;
        B[n] = -1.0;
        if (q == 0) {
            B[8] = 3.5;
        } else if (q == 1) {
            B[10] = 4.0;
            B[15] = -2.5;
        } else {
            B[10] = B[15] = -2.0;
            B[11] = 2.0;
            B[14] = -1.0;
        }
    }
    point(n * n, seed, 0.25, z);
    for (size_t e = 0; e < n * n; e++)
        z[e] += B[e];
    return n;
}

/* ---- eigvals_general ------------------------------------------------------------------------ */

/* A n x n (env: n): lam_loss(eigvals_general(A)) */
static cr_var eigvals_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const size_t *n = env;
    cr_targ A = cr_targ_arr(X[0]);
    return lam_loss(t, cr_tape_acall_a(t, &cr_fn_eigvals_general, &A, 1), *n, *n == 4);
}

static void test_eigvals_general(void **state)
{
    fixture *f = *state;
    for (int q = 0; q < 4; q++)
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[16];
            size_t n = base_point(q, seed + 2 * (unsigned)q, z);
            prob p = {.f = eigvals_p, .env = &n, .na = 1, .ndim = {2}, .shape = {{n, n}}};
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
}

/* ---- eigen_general -------------------------------------------------------------------------- */

/* env: {n, which}: which = 0: both λ and V (phase-dependent); 1: V alone, phase-free; 2: V
 * alone, phase-dependent; 3: λ alone (V unused: its cotangent is zero) */
static cr_var eigen_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const size_t *e = env, n = e[0], which = e[1];
    cr_targ A = cr_targ_arr(X[0]), out[2];
    cr_tape_acall_n(t, &cr_fn_eigen_general, &A, 1, out, 2);
    cr_avar lam = out[0].u.a, V = out[1].u.a;
    switch (which) {
    case 0:
        return cr_add(t, lam_loss(t, lam, n, false),
                      cr_add(t, v_phase_loss(t, V, n), v_abs_loss(t, V, n)));
    case 1:
        return v_abs_loss(t, V, n);
    case 2:
        return v_phase_loss(t, V, n);
    default:
        return lam_loss(t, lam, n, true);
    }
}

static void test_eigen_general(void **state)
{
    fixture *f = *state;
    for (int q = 0; q < 4; q++)
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[16];
            size_t n = base_point(q, seed + 5 * (unsigned)q + 1, z);
            for (size_t which = 0; which < 4; which++) {
                size_t env[2] = {n, which};
                prob p = {.f = eigen_p, .env = env, .na = 1, .ndim = {2}, .shape = {{n, n}}};
                check_hvp_dirs(f->ctx, &p, z, 1e-6, 2);
            }
        }
}

/* A forward sweep through eigen_general and the complex parts (cr_tape_ajvp). */
static void test_jvp(void **state)
{
    fixture *f = *state;
    double z[16];
    size_t n = base_point(1, 7, z), env[2] = {n, 0};
    prob p = {.f = eigen_p, .env = env, .na = 1, .ndim = {2}, .shape = {{n, n}}};
    check_jvp(f->ctx, &p, z, 1e-7, 3);
}

/* ---- A full Hessian of scalars ------------------------------------------------------------ */

/* x, y, w: A = C + x E + y F + w² G (3 x 3); lam_loss(eigvals_general(A)) +
 * v_phase_loss(V) + v_abs_loss(V) of eigen_general(A) */
static double k_C[9] = {0.5, 3.0, 0.2, -1.0, 0.5, 0.1, 0.3, -0.2, 3.5};
static double k_E[9] = {1, 0, 0, 0, 0, 1, 0, 0, 0}, k_F[9] = {0, 1, 0, 0, 0, 0, 1, 0, 0},
              k_G[9] = {0, 0, 0, 1, 0, 0, 0, 1, 1};

static cr_var three_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array C, E, F, G;
    C = cr_array_matrix(k_C, 3, 3);
    E = cr_array_matrix(k_E, 3, 3);
    F = cr_array_matrix(k_F, 3, 3);
    G = cr_array_matrix(k_G, 3, 3);
    cr_var w2 = cr_mul(t, s[2], s[2]);
    cr_avar A = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[0]), cr_targ_arr(cr_av_const(&E)));
    A = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(A),
                         cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[1]),
                                                      cr_targ_arr(cr_av_const(&F)))));
    A = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(A),
                         cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(w2),
                                                      cr_targ_arr(cr_av_const(&G)))));
    A = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(A), cr_targ_arr(cr_av_const(&C)));
    cr_targ a = cr_targ_arr(A), out[2];
    cr_var l = lam_loss(t, cr_tape_acall_a(t, &cr_fn_eigvals_general, &a, 1), 3, false);
    cr_tape_acall_n(t, &cr_fn_eigen_general, &a, 1, out, 2);
    return cr_add(t, l, cr_add(t, v_phase_loss(t, out[1].u.a, 3), v_abs_loss(t, out[1].u.a, 3)));
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = three_p, .ns = 3, .na = 0};
    double pts[3][3] = {{0.2, 0.1, 0.3}, {-0.3, 0.25, -0.4}, {0.1, -0.2, 0.5}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* ---- Refusals -------------------------------------------------------------------------------- */

/* A complex A: refused when recorded (CR_EUNIMPL), naming the function; a structured one
 * (Symmetric) is accepted. */
static void test_refusals(void **state)
{
    fixture *f = *state;
    double a[9] = {1.0, 2.0, 0.5, -1.0, 0.3, 0.2, 0.4, 0.1, 3.0};
    cr_complex zc[4] = {CMPLX(1, 2), CMPLX(-0.5, 0.25), CMPLX(0.3, 0), CMPLX(2, -1)};
    size_t sh[2] = {2, 2};
    cr_array A = cr_array_matrix(a, 3, 3), za;
    assert_int_equal(cr_array_view_init(&za, zc, CR_DT_C128, 2, sh, NULL), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    static const cr_value *const fns[2] = {&cr_fn_eigen_general, &cr_fn_eigvals_general};
    static const char *const names[2] = {"eigen_general", "eigvals_general"};
    for (int q = 0; q < 4; q++) {
        bool cplx = q >= 2;
        cr_tape_reset(t);
        cr_targ X = cr_targ_arr(cr_tape_array_input(t, cplx ? &za : &A)), out[2];
        if (!cplx)
            X = cr_targ_arr(call_a(t, &cr_fn_symmetric, X, X, 1));
        assert_ok(t, cr_tape_status(t));
        assert_int_equal(q % 2 == 0 ? cr_tape_acall_n(t, fns[0], &X, 1, out, 2)
                                    : cr_tape_acall(t, fns[1], &X, 1, out),
                         cplx ? CR_EUNIMPL : CR_OK);
        if (!cplx)
            continue; /* a structured A has a form (test_hvp_structured.c) */
        char msg[160];
        snprintf(msg, sizeof msg, "%s: no second-order form on the tape: %s", names[q % 2],
                 "A is complex; the form covers real matrices only");
        assert_contains(cr_tape_errmsg(t), msg);
    }
    cr_tape_free(t);
}

/* A defective A (a Jordan block: V singular): the rule's pullback refuses it (CR_EDOMAIN),
 * and on a second-order tape the rule's frule in the forward sweep, with the rule's message,
 * before the form (which needs the same frule) is reached. */
static void test_defective(void **state)
{
    fixture *f = *state;
    double a[4] = {1.0, 1.0, 0.0, 1.0}, dir[4] = {0.3, -0.2, 0.5, 0.1}, hv[4], g[4];
    cr_array A = cr_array_matrix(a, 2, 2), D = cr_array_matrix(dir, 2, 2);
    cr_array H = cr_array_matrix(hv, 2, 2), G = cr_array_matrix(g, 2, 2);
    const cr_array *dv[1] = {&D};
    cr_array *hp[1] = {&H}, *gp[1] = {&G};
    for (int q = 0; q < 2; q++)
        for (uint32_t flags = 0; flags <= CR_TAPE_SECOND_ORDER; flags += CR_TAPE_SECOND_ORDER) {
            cr_tape *t;
            cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags};
            assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
            cr_avar X = cr_tape_array_input(t, &A);
            cr_targ x = cr_targ_arr(X), out[2];
            if (q == 0)
                cr_tape_acall_n(t, &cr_fn_eigen_general, &x, 1, out, 2);
            else
                cr_tape_acall(t, &cr_fn_eigvals_general, &x, 1, out);
            cr_var y = lam_loss(t, out[0].u.a, 2, false);
            assert_ok(t, cr_tape_status(t));
            if (flags == 0) {
                assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, gp),
                                 CR_EDOMAIN);
            } else {
                assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, dv, hp),
                                 CR_EDOMAIN);
                assert_contains(cr_tape_errmsg(t), q == 0 ? "the frule of eigen_general failed"
                                                          : "the frule of eigvals_general failed");
            }
            assert_contains(cr_tape_errmsg(t), "the eigenvector matrix is singular");
            cr_tape_free(t);
        }
}

/* A repeated eigenvalue (not defective: A = [I b; 0 3]): the rule drops the terms with
 * 1/(λ_j − λ_i) between the two, and the form their derivatives; H v is finite and not
 * refused (no second derivative exists there in general, and none is claimed). */
static void test_repeated(void **state)
{
    fixture *f = *state;
    double a[9] = {1.0, 0.0, 0.5, 0.0, 1.0, 0.2, 0.0, 0.0, 3.0}, dir[9], hv[9];
    for (int e = 0; e < 9; e++)
        dir[e] = 0.1 * (e + 1) - 0.4;
    cr_array A = cr_array_matrix(a, 3, 3), D = cr_array_matrix(dir, 3, 3);
    cr_array H = cr_array_matrix(hv, 3, 3);
    const cr_array *dv[1] = {&D};
    cr_array *hp[1] = {&H};
    for (size_t which = 0; which < 5; which++) {
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
        assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
        cr_avar X = cr_tape_array_input(t, &A);
        size_t env[2] = {3, which};
        cr_var y = which < 4 ? eigen_p(t, NULL, &X, env) : eigvals_p(t, NULL, &X, env);
        assert_ok(t, cr_tape_status(t));
        assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, dv, hp));
        for (int e = 0; e < 9; e++)
            assert_true(isfinite(hv[e]));
        cr_tape_free(t);
    }
}

/* Several reverse sweeps over one first-order recording: the pullback is called once per
 * sweep, and the LU factors of V it makes must not outlive the sweep's memory (they were
 * kept from the first call in memory the sweep rewinds, and the next sweep solved with
 * whatever had been written there since: wrong cotangents, or a crash in zgetrs). */
static void test_sweeps_again(void **state)
{
    fixture *f = *state;
    cr_tape *t = NULL;
    cr_tape_params tp = {.struct_size = sizeof tp};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double z[16], g1[16], g2[16], g3[16], gl[16];
    size_t n = base_point(1, 11, z), env[2] = {n, 1};
    cr_array A = cr_array_matrix(z, n, n), G1 = cr_array_matrix(g1, n, n),
             G2 = cr_array_matrix(g2, n, n), G3 = cr_array_matrix(g3, n, n),
             GL = cr_array_matrix(gl, n, n);
    cr_avar X = cr_tape_array_input(t, &A);
    cr_var y = eigen_p(t, NULL, &X, env);
    env[1] = 3;
    cr_var yl = eigen_p(t, NULL, &X, env); /* another output: eigenvalues only */
    assert_int_equal(cr_tape_status(t), CR_OK);
    cr_array *gp = &G1;
    assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp), CR_OK);
    gp = &GL;
    assert_int_equal(cr_tape_gradient_arrays(t, yl, NULL, 0, NULL, &X, 1, &gp), CR_OK);
    gp = &G2;
    assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp), CR_OK);
    gp = &G3;
    assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp), CR_OK);
    for (size_t e = 0; e < n * n; e++) {
        assert_true(g2[e] == g1[e]);
        assert_true(g3[e] == g1[e]);
    }
    /* and it is the gradient: against central differences of the recorded value */
    env[1] = 1;
    prob p = {.f = eigen_p, .env = env, .na = 1, .ndim = {2}, .shape = {{n, n}}};
    const double h = 1e-5;
    for (size_t e = 0; e < n * n; e++) {
        double z0 = z[e];
        z[e] = z0 + h;
        double fp = value_at(f->ctx, &p, z);
        z[e] = z0 - h;
        double fm = value_at(f->ctx, &p, z);
        z[e] = z0;
        ASSERT_CLOSE(g1[e], (fp - fm) / (2 * h), 1e-6);
    }
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_eigvals_general, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigen_general, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_jvp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_defective, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_repeated, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_sweeps_again, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
