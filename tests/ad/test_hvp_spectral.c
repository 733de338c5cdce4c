/*
 * The spectral second-order forms (src/rulesets/linalg/): svdvals,
 * opnorm (p = 2 through the SVD; p = 1 and Inf piecewise linear) and eigvals of a
 * symmetric matrix, on second-order tapes. Each H v (cr_tape_ahvp) is checked against
 * central differences, along the direction, of the gradient a first-order tape computes, at
 * several points (tall, wide and square matrices) and directions, each function composed
 * with others so that its cotangent varies from one singular value (eigenvalue) to the
 * next; a full Hessian (cr_tape_hessian) of a function of scalars through them; and eigvals
 * of a Diagonal matrix, accepted when recorded (H v of svdvals and opnorm of structured
 * matrices and of eigvals: test_hvp_structured.c).
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"
#include <complex.h>

static double k_w4[4] = {1.0, -0.7, 2.0, 0.4};

/* Σ w_i sin(v_i) + (Σ v_i²)² over a vector v of n <= 4 values */
static cr_var mix(cr_tape *t, cr_avar v, size_t n)
{
    static cr_array w;
    w = cr_array_vector(k_w4, n);
    cr_avar sv = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(v));
    cr_var a = cr_av_sum(
        t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(sv), cr_targ_arr(cr_av_const(&w))));
    cr_var q = sum_sq(t, v);
    return cr_add(t, a, cr_mul(t, q, q));
}

/* ---- svdvals -------------------------------------------------------------------------------- */

/* A (rows x cols), given by env: mix(svdvals(A)) */
static cr_var svdvals_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const size_t *r = env;
    return mix(t, call_a(t, &cr_fn_svdvals, cr_targ_arr(X[0]), i64(0), 1), r[0]);
}

static void test_svdvals(void **state)
{
    fixture *f = *state;
    static const size_t shapes[3][3] = {{4, 3, 3}, {2, 4, 2}, {3, 3, 3}}; /* rows, cols, k */
    for (int q = 0; q < 3; q++) {
        prob p = {.f = svdvals_p,
                  .env = &shapes[q][2],
                  .na = 1,
                  .ndim = {2},
                  .shape = {{shapes[q][0], shapes[q][1]}}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[12];
            point(12, seed + 3 * (unsigned)q, 1.2, z);
            z[0] += 1.5; /* singular values well apart */
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        }
    }
}

/* ---- opnorm -----------------------------------------------------------------------------------
 */

/* A 3 x 4: sin(opnorm(A)) opnorm(A) + opnorm(A, 1)² + opnorm(A, Inf) opnorm(A, 2) */
static cr_var opnorm_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ A = cr_targ_arr(X[0]);
    cr_var n2 = call_s(t, &cr_fn_opnorm, A, A, 1);
    cr_var n1 = call_s(t, &cr_fn_opnorm, A, f64(1.0), 2);
    cr_var ni = call_s(t, &cr_fn_opnorm, A, f64(INFINITY), 2);
    cr_var n22 = call_s(t, &cr_fn_opnorm, A, i64(2), 2);
    cr_var a = cr_mul(t, cr_sin(t, n2), n2);
    return cr_add(t, cr_add(t, a, cr_mul(t, n1, n1)), cr_mul(t, ni, n22));
}

static void test_opnorm(void **state)
{
    fixture *f = *state;
    prob p = {.f = opnorm_p, .na = 1, .ndim = {2}, .shape = {{3, 4}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[12];
        point(12, seed, 1.1, z);
        z[5] += 2.0; /* one column and one row clearly the largest */
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
    }
}

/* ---- eigvals --------------------------------------------------------------------------------- */

/* B 3 x 3: mix(eigvals(Symmetric(B))) (B's upper triangle read) */
static cr_var eigvals_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar S = call_a(t, &cr_fn_symmetric, cr_targ_arr(X[0]), i64(0), 1);
    return mix(t, call_a(t, &cr_fn_eigvals, cr_targ_arr(S), i64(0), 1), 3);
}

/* B 3 x 3, dense: mix(eigvals(B)), B's upper triangle read (its cotangent lives there) */
static cr_var eigvals_dense_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    return mix(t, call_a(t, &cr_fn_eigvals, cr_targ_arr(X[0]), i64(0), 1), 3);
}

static void test_eigvals(void **state)
{
    fixture *f = *state;
    prob p = {.f = eigvals_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    prob q = {.f = eigvals_dense_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[9];
        point(9, seed, 1.0, z);
        z[0] += 2.0; /* eigenvalues apart */
        z[8] -= 2.0;
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 4);
        check_hvp_dirs(f->ctx, &q, z, 1e-6, 4);
    }
}

/* ---- A full Hessian of scalars ------------------------------------------------------------ */

/* x, y: opnorm(M)² + sum(sin.(svdvals(M))) + eigvals(Symmetric(M))[2], M = x E + y F + C */
static double k_E[6] = {1, 0, 0, 0, 1, 0}, k_F[6] = {0, 1, 0, 1, 0, 1},
              k_C[6] = {0.3, 0, 2, 0, 0.5, 0}, k_D[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};

static cr_var two_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, C, D;
    E = cr_array_matrix(k_E, 2, 3);
    F = cr_array_matrix(k_F, 2, 3);
    C = cr_array_matrix(k_C, 2, 3);
    D = cr_array_matrix(k_D, 3, 3);
    cr_avar M = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[0]), cr_targ_arr(cr_av_const(&E)));
    M = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(M),
                         cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[1]),
                                                      cr_targ_arr(cr_av_const(&F)))));
    M = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(M), cr_targ_arr(cr_av_const(&C)));
    cr_var o = call_s(t, &cr_fn_opnorm, cr_targ_arr(M), i64(0), 1);
    cr_var a = cr_add(t, cr_mul(t, o, o),
                      sum_sin(t, call_a(t, &cr_fn_svdvals, cr_targ_arr(M), i64(0), 1)));
    /* Mᵀ M + D, symmetric 3 x 3 */
    cr_avar Mt = call_a(t, &cr_fn_transpose, cr_targ_arr(M), i64(0), 1);
    cr_avar G = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(cr_av_matmul(t, Mt, M)),
                                 cr_targ_arr(cr_av_const(&D)));
    cr_avar ev =
        call_a(t, &cr_fn_eigvals,
               cr_targ_arr(call_a(t, &cr_fn_symmetric, cr_targ_arr(G), i64(0), 1)), i64(0), 1);
    cr_var e = cr_tape_acall_s(t, &cr_fn_getindex, (cr_targ[]){cr_targ_arr(ev), i64(1)}, 2);
    return cr_add(t, a, cr_mul(t, e, e));
}

static void test_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = two_p, .ns = 2, .na = 0};
    double pts[3][2] = {{1.3, 0.4}, {-0.7, 1.9}, {2.6, -0.8}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* Structured matrices: eigvals of a Diagonal one is accepted when recorded, as svdvals and
 * opnorm of any (H v: test_hvp_structured.c). */
static void test_refusals(void **state)
{
    fixture *f = *state;
    double v[3] = {1.0, -2.0, 0.5};
    cr_array va = cr_array_vector(v, 3);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_targ V = cr_targ_arr(cr_tape_array_input(t, &va));
    cr_targ D = cr_targ_arr(call_a(t, &cr_fn_diagonal, V, V, 1));
    assert_ok(t, cr_tape_status(t));
    cr_targ out;
    assert_ok(t, cr_tape_acall(t, &cr_fn_eigvals, &D, 1, &out));
    cr_tape_free(t);
}

/* A form that needs another function's frule, which the tape's engine does not have (svd's
 * frule opted out in a child registry): H v stops with CR_EUNIMPL naming both functions,
 * and the first-order gradient on the same engine is unaffected. */
static void test_frule_missing(void **state)
{
    fixture *f = *state;
    cr_registry *reg;
    cr_engine *eng;
    cr_argspec arr = CR_ARG_ARRAY_F64;
    assert_int_equal(cr_registry_new(f->ctx, cr_registry_builtin(), &reg), CR_OK);
    assert_int_equal(
        cr_registry_opt_out(reg, CR_MODE_FRULE, cr_fn_svd.u.func.fn, &arr, 1, false, 0), CR_OK);
    assert_int_equal(cr_registry_freeze(reg), CR_OK);
    assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
    double a[9] = {2.0, 0.3, -0.5, 0.1, 1.4, 0.2, -0.7, 0.6, 0.9}, dir[9], hv[9], g[9];
    for (int e = 0; e < 9; e++)
        dir[e] = 0.1 * (e + 1);
    cr_array A = cr_array_matrix(a, 3, 3), D = cr_array_matrix(dir, 3, 3);
    cr_array H = cr_array_matrix(hv, 3, 3), G = cr_array_matrix(g, 3, 3);
    const cr_array *dv[1] = {&D};
    cr_array *hp[1] = {&H}, *gp[1] = {&G};
    for (uint32_t flags = 0; flags <= CR_TAPE_SECOND_ORDER; flags += CR_TAPE_SECOND_ORDER) {
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags, .engine = eng};
        assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
        cr_avar X = cr_tape_array_input(t, &A);
        cr_var y = sum_sq(t, call_a(t, &cr_fn_svdvals, cr_targ_arr(X), i64(0), 1));
        assert_ok(t, cr_tape_status(t));
        if (flags == 0) {
            assert_int_equal(cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, gp), CR_OK);
        } else {
            assert_int_equal(cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, dv, hp), CR_EUNIMPL);
            assert_contains(cr_tape_errmsg(t), "svdvals: the second-order form needs svd's frule");
        }
        cr_tape_free(t);
    }
    cr_engine_free(eng);
    cr_registry_free(reg);
}

static int run_spectral(void)
{
    const struct CMUnitTest spectral[] = {
        cmocka_unit_test_setup_teardown(test_svdvals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_opnorm, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_eigvals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_frule_missing, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(spectral, NULL, NULL);
}

/*
 * The second-order forms of expm and svd (src/rulesets/linalg/: expm and
 * svd) on second-order tapes. Each H v (cr_tape_ahvp) is checked against central
 * differences, along the direction, of the gradient a first-order tape computes, at several
 * points and directions: expm of matrices of small and large norm (every branch of its
 * scaling and squaring), composed so that its cotangent is not constant; svd of tall, wide
 * and square matrices with U, S and V all feeding the loss (sign-free uses of the vectors:
 * their squares and U Vᵀ). A full Hessian (cr_tape_hessian) of a function of three scalars
 * through both; the complex matrices the forms do not cover, refused when recorded
 * (structured ones: test_hvp_structured.c); and svd at equal singular values, where the form
 * follows the rule's convention.
 */

static cr_var sum_mul(cr_tape *t, cr_avar a, cr_avar b)
{
    return cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(b)));
}

/* Constant weights of every shape the tests use (up to 4 x 4), from a fixed point. */
static double k_w[16], k_w2[16];

static cr_avar weights(double *buf, size_t r, size_t c, cr_array *store)
{
    *store = cr_array_matrix(buf, r, c);
    return cr_av_const(store);
}

/* ---- expm ----------------------------------------------------------------------------------- */

/* A n x n (n from env): sum(W .* sin.(expm(A))) + sum(expm(A))² + sum(sin.(expm(A C))), C a
 * constant */
static cr_var expm_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const size_t n = *(const size_t *)env;
    static cr_array W, C;
    cr_avar E = call_a(t, &cr_fn_expm, cr_targ_arr(X[0]), i64(0), 1);
    cr_var a = sum_mul(t, weights(k_w, n, n, &W), cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(E)));
    cr_var b = cr_av_sum(t, E);
    cr_avar AC = cr_av_matmul(t, X[0], weights(k_w2, n, n, &C));
    cr_var c = sum_sin(t, call_a(t, &cr_fn_expm, cr_targ_arr(AC), i64(0), 1));
    return cr_add(t, cr_add(t, a, cr_mul(t, b, b)), c);
}

static void test_expm(void **state)
{
    fixture *f = *state;
    static const size_t ns[3] = {1, 2, 3};
    /* scales: a low Padé degree, degree 13 without and with squaring */
    static const double scales[3] = {0.05, 0.8, 2.5};
    for (int q = 0; q < 3; q++) {
        prob p = {.f = expm_p, .env = &ns[q], .na = 1, .ndim = {2}, .shape = {{ns[q], ns[q]}}};
        for (int c = 0; c < 3; c++) {
            double z[9];
            point(9, (unsigned)(q + 3 * c), scales[c], z);
            double tol = c == 2 ? 1e-5 : 1e-6;
            check_hvp_dirs(f->ctx, &p, z, tol, 3);
        }
    }
}

/* ---- svd ------------------------------------------------------------------------------------ */

/* A m x n (env: m, n), r = min(m, n), (U, S, V) = svd(A):
 *     sum(W1 .* U.²) + Σ w_i sin(s_i) + (Σ s_i²)² + sum(W2 .* V.²) + sum(sin.(U Vᵀ)) */
static cr_var svd_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const size_t *mn = env, m = mn[0], n = mn[1], r = m < n ? m : n;
    static cr_array W1, W2, w;
    cr_targ usv[3], a = cr_targ_arr(X[0]);
    if (cr_tape_acall_n(t, &cr_fn_svd, &a, 1, usv, 3) != CR_OK)
        return cr_const((double)NAN);
    cr_avar U = usv[0].u.a, S = usv[1].u.a, V = usv[2].u.a;
    cr_var lu = sum_mul(t, weights(k_w, m, r, &W1), cr_av_broadcast1(t, &cr_fn_square, usv[0]));
    cr_var lv = sum_mul(t, weights(k_w2, n, r, &W2), cr_av_broadcast1(t, &cr_fn_square, usv[2]));
    w = cr_array_vector(k_w2 + 5, r);
    cr_var ls = sum_mul(t, cr_av_const(&w), cr_av_broadcast1(t, &cr_fn_sin, usv[1]));
    cr_var q = sum_sq(t, S);
    cr_avar Vt = call_a(t, &cr_fn_transpose, cr_targ_arr(V), i64(0), 1);
    cr_var luv = sum_sin(t, cr_av_matmul(t, U, Vt));
    return cr_add(t, cr_add(t, cr_add(t, lu, lv), cr_add(t, ls, cr_mul(t, q, q))), luv);
}

/* A point of an m x n matrix with singular values well apart. */
static void svd_point(size_t m, size_t n, unsigned seed, double *z)
{
    point(m * n, seed, 0.6, z);
    z[0] += 3.0;
    z[n + 1] += 1.6;
}

static void test_svd(void **state)
{
    fixture *f = *state;
    static const size_t shapes[5][2] = {{4, 3}, {3, 2}, {3, 4}, {2, 4}, {3, 3}};
    for (int q = 0; q < 5; q++) {
        const size_t m = shapes[q][0], n = shapes[q][1];
        prob p = {.f = svd_p, .env = shapes[q], .na = 1, .ndim = {2}, .shape = {{m, n}}};
        for (unsigned seed = 0; seed < 2; seed++) {
            double z[16];
            svd_point(m, n, seed + 2 * (unsigned)q, z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
        }
    }
}

/* Only one element of the tuple used at a time (the others' cotangents zero): env holds
 * which (0: U, 1: S, 2: V), m and n. sum(W .* E.²) + sum(sin.(E)) of that element E. */
typedef struct one {
    size_t which, m, n;
} one;

static cr_var svd_one_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    const one *o = env;
    size_t r = o->m < o->n ? o->m : o->n, rows = o->which == 0 ? o->m : o->n;
    static cr_array W;
    cr_targ usv[3], a = cr_targ_arr(X[0]);
    if (cr_tape_acall_n(t, &cr_fn_svd, &a, 1, usv, 3) != CR_OK)
        return cr_const((double)NAN);
    if (o->which == 1)
        W = cr_array_vector(k_w, r);
    else
        W = cr_array_matrix(k_w, rows, r);
    cr_avar E = usv[o->which].u.a;
    cr_var a2 = sum_mul(t, cr_av_const(&W), cr_av_broadcast1(t, &cr_fn_square, usv[o->which]));
    return cr_add(t, a2, sum_sin(t, E));
}

static void test_svd_each(void **state)
{
    fixture *f = *state;
    static const size_t shapes[2][2] = {{4, 2}, {2, 3}};
    for (size_t q = 0; q < 2; q++)
        for (size_t w = 0; w < 3; w++) {
            const size_t m = shapes[q][0], n = shapes[q][1];
            one o = {w, m, n};
            prob p = {.f = svd_one_p, .env = &o, .na = 1, .ndim = {2}, .shape = {{m, n}}};
            double z[16];
            svd_point(m, n, (unsigned)(w + 3 * q), z);
            check_hvp_dirs(f->ctx, &p, z, 1e-6, 2);
        }
}

/* ---- A full Hessian of scalars ------------------------------------------------------------ */

/* x, y, w: M = x E + y F + w G + C (3 x 3); svd_p's loss of M + sum(sin.(expm(M / 2))) */
static double k_E_expm_svd[9] = {1, 0, 0, 0, 0, 1, 0, 0, 0},
              k_F_expm_svd[9] = {0, 1, 0, 1, 0, 0, 0, 0, 1}, k_G[9] = {0, 0, 1, 0, 1, 0, -1, 0, 0},
              k_C_expm_svd[9] = {2.5, 0.3, 0, 0, 1.2, 0.2, 0.4, 0, 0.3};

static cr_var three_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array E, F, G, C;
    static const size_t mn[2] = {3, 3};
    E = cr_array_matrix(k_E_expm_svd, 3, 3);
    F = cr_array_matrix(k_F_expm_svd, 3, 3);
    G = cr_array_matrix(k_G, 3, 3);
    C = cr_array_matrix(k_C_expm_svd, 3, 3);
    cr_array *B[3] = {&E, &F, &G};
    cr_avar M = cr_av_const(&C);
    for (int j = 0; j < 3; j++)
        M = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(M),
                             cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s[j]),
                                                          cr_targ_arr(cr_av_const(B[j])))));
    cr_avar half = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(M), f64(0.5));
    cr_var e = sum_sin(t, call_a(t, &cr_fn_expm, cr_targ_arr(half), i64(0), 1));
    return cr_add(t, svd_p(t, s, &M, mn), e);
}

static void test_hessian_expm_svd(void **state)
{
    fixture *f = *state;
    prob p = {.f = three_p, .ns = 3, .na = 0};
    double pts[3][3] = {{0.3, -0.2, 0.5}, {-0.4, 0.6, 0.1}, {0.7, 0.25, -0.35}};
    for (int q = 0; q < 3; q++)
        check_hessian(f->ctx, &p, pts[q], 1e-6);
}

/* ---- What the forms do not cover ---------------------------------------------------------- */

/* Complex matrices: refused when recorded (CR_EUNIMPL). */
static void test_refusals_expm_svd(void **state)
{
    fixture *f = *state;
    cr_complex zc[4] = {CMPLX(1, 2), CMPLX(-0.5, 0.25), CMPLX(0.3, 0), CMPLX(2, -1)};
    cr_array za;
    size_t shape[2] = {2, 2};
    assert_int_equal(cr_array_view_init(&za, zc, CR_DT_C128, 2, shape, NULL), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    static const char *const names[2] = {"svd", "expm"};
    for (int q = 0; q < 2; q++) {
        char msg[128];
        /* a complex matrix (a structured one has a form: test_hvp_structured.c) */
        cr_tape_reset(t);
        cr_targ Z = cr_targ_arr(cr_tape_array_input(t, &za));
        cr_targ out[3];
        cr_status st = q == 0 ? cr_tape_acall_n(t, &cr_fn_svd, &Z, 1, out, 3)
                              : cr_tape_acall(t, &cr_fn_expm, &Z, 1, out);
        assert_int_equal(st, CR_EUNIMPL);
        snprintf(msg, sizeof msg,
                 "%s: argument 0 is complex: second-order tapes record real array functions only",
                 names[q]);
        assert_contains(cr_tape_errmsg(t), msg);
    }
    cr_tape_free(t);
}

/* Equal singular values: not refused. The form follows the rule's convention (the pair's
 * 1/(s_j² - s_i²) dropped, and its derivative), so H v is finite; it is not the Hessian there
 * (docs/engine.md). A = diag(2, 2, 1) Qᵀ with Q a rotation: s_1 = s_2. */
static void test_equal_singular_values(void **state)
{
    fixture *f = *state;
    const double c = cos(0.4), sn = sin(0.4);
    double z[9] = {2 * c, -2 * sn, 0, 2 * sn, 2 * c, 0, 0, 0, 1};
    static const size_t mn[2] = {3, 3};
    prob p = {.f = svd_p, .env = mn, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double v[9], hv[9];
    direction(9, 1, v);
    tape_hvp(t, &p, z, v, hv);
    assert_ok(t, cr_tape_status(t));
    double nrm = 0.0;
    for (int i = 0; i < 9; i++) {
        assert_true(isfinite(hv[i]));
        nrm += fabs(hv[i]);
    }
    assert_true(nrm > 0.0);
    cr_tape_free(t);
}

static int setup(void **state)
{
    point(16, 11, 1.0, k_w);
    point(16, 17, 0.8, k_w2);
    return fixture_setup(state);
}

static int run_expm_svd(void)
{
    const struct CMUnitTest expm_svd[] = {
        cmocka_unit_test_setup_teardown(test_expm, setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_svd, setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_svd_each, setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hessian_expm_svd, setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals_expm_svd, setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_equal_singular_values, setup, fixture_teardown),
    };
    return cmocka_run_group_tests(expm_svd, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_spectral();
    failed += run_expm_svd();
    return failed;
}
