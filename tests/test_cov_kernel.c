/*
 * Tests of the rarer paths of fused kernels (kernel.h, kernel.c): a call of more elements than
 * an array may hold (refused, the tape usable again); a strided seed of cr_tape_avjp() at a
 * kernel's array result (its cotangent gathered before the reverse step); and, on
 * second-order tapes, a kernel whose result does not reach y and a kernel sum whose adjoint is
 * exactly zero where the derivative of its adjoint is not. Derivatives are checked against
 * central differences of the same functions written in plain C.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <chainrules/kernel.h>

#include "test_util.h"

/* sin(x) */
#define SIN1(x) cr_k_sin(x[0])
CR_KERNEL(ksin, 1, SIN1);

/* x^2 exp(x / 2) */
#define SQE(x) cr_k_mul(cr_k_sq(x[0]), cr_k_exp(cr_k_mul(0.5, x[0])))
CR_KERNEL(ksqe, 1, SQE);

static double sqe_c(double x)
{
    return x * x * exp(0.5 * x);
}

static cr_tape *new_tape(cr_ctx *ctx, uint32_t flags)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    return t;
}

/* More elements than an array of doubles may hold, over an array of 3: CR_ESHAPE naming the
 * kernel, n, the offset and the array's length; then the same tape records a good call. */
static void test_too_many_elements(void **state)
{
    fixture *f = *state;
    double x[3] = {0.1, 0.2, 0.3};
    cr_array xa = cr_array_vector(x, 3);
    cr_tape *t = new_tape(f->ctx, 0);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin a = cr_kin_arr(X, 0);
    cr_avar Y = cr_akernel(t, &ksin, &a, 1, SIZE_MAX / 2);
    assert_null(Y.a);
    assert_int_equal(cr_tape_status(t), CR_ESHAPE);
    char want[192];
    snprintf(want, sizeof want,
             "kernel ksin: argument 0 reads n = %zu elements from offset 0 of a (3) array of 3 "
             "elements: only 3 are left from that offset",
             SIZE_MAX / 2);
    assert_string_equal(cr_tape_errmsg(t), want);
    cr_var s = cr_akernel_sum(t, &ksin, &a, 1, SIZE_MAX / 2);
    assert_true(isnan(s.v));
    cr_tape_clear_error(t);
    s = cr_akernel_sum(t, &ksin, &a, 1, 3);
    assert_ok(t, cr_tape_status(t));
    assert_close(s.v, sin(0.1) + sin(0.2) + sin(0.3), 1e-15);
    cr_tape_free(t);
}

/* ---- A strided seed at a kernel's array result --------------------------------------------- */

enum { N = 5 };
static const double k_w[N] = {1.0, -0.5, 2.0, 0.25, -1.5};

/* w' f(x), f = x^2 exp(x/2) elementwise: the vector-Jacobian product's value */
static double wf_c(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += k_w[i] * sqe_c(x[i]);
    return s;
}

static void test_strided_seed(void **state)
{
    fixture *f = *state;
    double x[N] = {0.3, -1.2, 0.8, 2.0, -0.4}, g[N], seed[2 * N];
    for (size_t i = 0; i < N; i++) {
        seed[2 * i] = k_w[i];
        seed[2 * i + 1] = 1e6; /* not read */
    }
    size_t shape[1] = {N};
    ptrdiff_t stride[1] = {2};
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N), sa;
    assert_int_equal(cr_array_view_init(&sa, seed, CR_DT_F64, 1, shape, stride), CR_OK);
    cr_tape *t = new_tape(f->ctx, 0);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin a = cr_kin_arr(X, 0);
    cr_avar Y = cr_akernel(t, &ksqe, &a, 1, N);
    assert_ok(t, cr_tape_status(t));
    for (size_t i = 0; i < N; i++)
        assert_close(((const double *)Y.a->data)[i], sqe_c(x[i]), 1e-15);
    cr_array *gp = &ga;
    assert_ok(t, cr_tape_avjp(t, Y, &sa, NULL, 0, NULL, &X, 1, &gp));
    for (size_t i = 0; i < N; i++) {
        double xi = x[i], h = 1e-6 * fmax(1.0, fabs(xi));
        x[i] = xi + h;
        double fp = wf_c(x, N);
        x[i] = xi - h;
        double fm = wf_c(x, N);
        x[i] = xi;
        assert_close(g[i], (fp - fm) / (2 * h), 1e-7);
    }
    cr_tape_free(t);
}

/* ---- Second order ------------------------------------------------------------------------ */

/* y = (sum sin.(x))^2 + x'x / 2, at x = (a, -a, b, -b) where sum sin.(x) is exactly zero:
 * the kernel sum's adjoint 2 s is zero, the derivative of its adjoint 2 ṡ is not. A kernel
 * call whose result y does not use is recorded too. */
enum { M = 4 };

static double sq0_c(const double *x, size_t n)
{
    double s = 0, q = 0;
    for (size_t i = 0; i < n; i++) {
        s += sin(x[i]);
        q += x[i] * x[i];
    }
    return s * s + 0.5 * q;
}

/* H v by central differences of sq0_c: the mixed second difference along v and e_i. */
static void fd_hv(double *x, size_t n, const double *v, double *hv)
{
    const double h = 1e-4;
    double xp[M];
    for (size_t i = 0; i < n; i++) {
        double acc = 0;
        for (int sv = -1; sv <= 1; sv += 2)
            for (int si = -1; si <= 1; si += 2) {
                for (size_t j = 0; j < n; j++)
                    xp[j] = x[j] + sv * h * v[j];
                xp[i] += si * h;
                acc += sv * si * sq0_c(xp, n);
            }
        hv[i] = acc / (4 * h * h);
    }
}

static void test_second_order_zero_adjoint(void **state)
{
    fixture *f = *state;
    double x[M] = {0.7, -0.7, 1.3, -1.3}, v[M] = {1.0, 0.5, -0.25, 2.0}, hv[M], want[M];
    cr_array xa = cr_array_vector(x, M), va = cr_array_vector(v, M), hva = cr_array_vector(hv, M);
    cr_tape *t = new_tape(f->ctx, CR_TAPE_SECOND_ORDER);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_kin a = cr_kin_arr(X, 0);
    cr_var s = cr_akernel_sum(t, &ksin, &a, 1, M);
    assert_true(s.v == 0.0); /* exactly: sin is odd, the partial sums pair up */
    cr_var unused = cr_akernel_sum(t, &ksqe, &a, 1, M);
    cr_avar unused_a = cr_akernel(t, &ksqe, &a, 1, M);
    (void)unused;
    (void)unused_a;
    cr_var y = cr_add(t, cr_mul(t, s, s), cr_mul(t, cr_const(0.5), cr_adot(t, X, X)));
    assert_ok(t, cr_tape_status(t));
    assert_close(y.v, sq0_c(x, M), 1e-15);
    const cr_array *av[1] = {&va};
    cr_array *hp[1] = {&hva};
    assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, av, hp));
    fd_hv(x, M, v, want);
    for (size_t i = 0; i < M; i++)
        assert_close(hv[i], want[i], 1e-6);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_too_many_elements, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_strided_seed, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_second_order_zero_adjoint, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
