/*
 * The former names of the array-variable operations (deprecated.h: cr_asum(), cr_adot(),
 * cr_aslice(), cr_amatmul(), cr_abroadcast1/2(), cr_aconst(), cr_akernel(),
 * cr_akernel_sum()) still compile, link and record: a function written with every one of
 * them has the value of the same function in plain C, its gradient matches central
 * differences of the plain-C function, and the recording is the one the cr_av_ names
 * make (same value and gradient, bit for bit).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "test_util.h"
#include <chainrules/deprecated.h>
#include <chainrules/kernel.h>

enum { N = 4, M = 2 };

static const double k_w[M * N] = {0.5, -1.0, 0.25, 2.0, 1.5, 0.75, -0.5, 1.0};

#define SQ(x) cr_k_sq(x[0])
CR_KERNEL(dn_sq, 1, SQ);
#define HALF(x) cr_k_mul(0.5, x[0])
CR_KERNEL(dn_half, 1, HALF);

/* sum(sin.(W x)) + dot(x[0:2], (x .* x)[2:4]) + sum(x .^ 2) + sum(0.5 .* (x .^ 2)) */
static double plain(const double *x)
{
    double s = 0;
    for (size_t i = 0; i < M; i++) {
        double z = 0;
        for (size_t j = 0; j < N; j++)
            z += k_w[i * N + j] * x[j];
        s += sin(z);
    }
    for (size_t i = 0; i < 2; i++)
        s += x[i] * (x[i + 2] * x[i + 2]);
    for (size_t i = 0; i < N; i++)
        s += x[i] * x[i] + 0.5 * x[i] * x[i];
    return s;
}

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
static cr_var with_old_names(cr_tape *t, cr_avar X, cr_array *wa)
{
    cr_avar W = cr_aconst(wa);
    cr_var a = cr_asum(t, cr_abroadcast1(t, &cr_fn_sin, cr_targ_arr(cr_amatmul(t, W, X))));
    cr_avar q = cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_arr(X));
    cr_var b = cr_adot(t, cr_aslice(t, X, 0, 2), cr_aslice(t, q, 2, N));
    cr_kin in[1] = {cr_kin_arr(X, 0)};
    cr_var c = cr_akernel_sum(t, &dn_sq, in, 1, N);
    cr_kin in2[1] = {cr_kin_arr(cr_akernel(t, &dn_sq, in, 1, N), 0)};
    cr_var d = cr_akernel_sum(t, &dn_half, in2, 1, N);
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
}
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif

static cr_var with_new_names(cr_tape *t, cr_avar X, cr_array *wa)
{
    cr_avar W = cr_av_const(wa);
    cr_var a = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(cr_av_matmul(t, W, X))));
    cr_avar q = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_arr(X));
    cr_var b = cr_av_dot(t, cr_av_slice(t, X, 0, 2), cr_av_slice(t, q, 2, N));
    cr_kin in[1] = {cr_kin_arr(X, 0)};
    cr_var c = cr_av_kernel_sum(t, &dn_sq, in, 1, N);
    cr_kin in2[1] = {cr_kin_arr(cr_av_kernel(t, &dn_sq, in, 1, N), 0)};
    cr_var d = cr_av_kernel_sum(t, &dn_half, in2, 1, N);
    return cr_add(t, cr_add(t, a, b), cr_add(t, c, d));
}

typedef cr_var (*recorder)(cr_tape *t, cr_avar X, cr_array *wa);

/* The value and gradient of f at x, recorded on a new tape. */
static double value_and_gradient(fixture *f, recorder rec, double *x, double *g)
{
    double w[M * N];
    memcpy(w, k_w, sizeof w);
    cr_array wa = cr_array_matrix(w, M, N), xa = cr_array_vector(x, N), ga = cr_array_vector(g, N);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_var y = rec(t, X, &wa);
    assert_int_equal(cr_tape_status(t), CR_OK);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    cr_tape_free(t);
    return y.v;
}

static void test_old_names_record_the_function(void **state)
{
    fixture *f = *state;
    double x[N] = {0.3, -1.1, 0.8, 1.7}, g[N], want[N];
    double v = value_and_gradient(f, with_old_names, x, g);
    assert_close(v, plain(x), 1e-14);
    for (size_t i = 0; i < N; i++) { /* five-point central differences */
        double xi = x[i], h = 1e-4 * fmax(1.0, fabs(xi)), p[4];
        const double step[4] = {2 * h, h, -h, -2 * h};
        for (int k = 0; k < 4; k++) {
            x[i] = xi + step[k];
            p[k] = plain(x);
        }
        x[i] = xi;
        want[i] = (8 * (p[1] - p[2]) - (p[0] - p[3])) / (12 * h);
    }
    for (size_t i = 0; i < N; i++)
        assert_close(g[i], want[i], 1e-8);
}

static void test_old_names_match_new_names(void **state)
{
    fixture *f = *state;
    double x[N] = {-0.6, 0.4, 2.2, -0.9}, g_old[N], g_new[N];
    double v_old = value_and_gradient(f, with_old_names, x, g_old);
    double v_new = value_and_gradient(f, with_new_names, x, g_new);
    assert_same_bits(v_old, v_new);
    for (size_t i = 0; i < N; i++)
        assert_same_bits(g_old[i], g_new[i]);
}

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
/* Called on a failed tape, the old names fail as the new ones do: NaN constants. */
static void test_old_names_on_a_failed_tape(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array bad = cr_array_vector(NULL, 3); /* NULL data with elements: CR_EINVAL */
    cr_avar X = cr_tape_array_input(t, &bad);
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    cr_var s = cr_asum(t, X);
    assert_true(isnan(s.v));
    assert_int_equal(s.idx, CR_VAR_CONST);
    cr_var d = cr_adot(t, X, X);
    assert_true(isnan(d.v));
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    cr_tape_free(t);
}
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_old_names_record_the_function, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_old_names_match_new_names, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_old_names_on_a_failed_tape, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
