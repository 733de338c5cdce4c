/*
 * Paths of the second-order and forward sweeps over array records (src/ad/tape_array2.c)
 * that the other tests do not reach: broadcasts of a scalar row whose arguments include
 * scalars (variables and constants) or only scalars (a scalar result), cotangents with zero
 * elements, a tuple record none of whose elements is used, and the argument checks of
 * cr_tape_ajvp and cr_tape_ahvp (NULL tape, sticky status, NULL arrays, variables of another
 * tape, bad directions, a constant array among the inputs). Each H v is checked against
 * central differences of a first-order tape's gradient (test_prob.h); each error for its
 * status and a message naming the function, and the tape is used again afterwards.
 */
#include <math.h>
#include <stdio.h>

#include "test_forms.h"

static double k_w5[5] = {0.0, 1.3, 0.0, -0.8, 2.1}; /* zeros: ȳ of those elements is 0 */

/* s0, s1, X (5 values): Σ w ⊙ hypot.(X, s0) ⊙ pow.(s1, X) + Σ hypot.(X, 0.7)²
 *   + hypot(s0, s1) · s1 (a broadcast over scalars only: a scalar result) */
static cr_var row_scalars_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    static cr_array w;
    w = cr_array_vector(k_w5, 5);
    cr_avar h = cr_abroadcast2(t, &cr_fn_hypot, cr_targ_arr(X[0]), cr_targ_var(s[0]));
    cr_avar p = cr_abroadcast2(t, &cr_fn_pow, cr_targ_var(s[1]), cr_targ_arr(X[0]));
    cr_avar hp = cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(h), cr_targ_arr(p));
    cr_avar whp = cr_abroadcast2(t, &cr_fn_mul, cr_targ_arr(hp), cr_targ_arr(cr_aconst(&w)));
    cr_avar hc = cr_abroadcast2(t, &cr_fn_hypot, cr_targ_arr(X[0]), f64(0.7));
    cr_targ sargs[3] = {cr_targ_value(cr_fn_hypot), cr_targ_var(s[0]), cr_targ_var(s[1])};
    cr_var hs = cr_asum(t, cr_tape_acall_a(t, &cr_fn_broadcast, sargs, 3));
    return cr_add(t, cr_add(t, cr_asum(t, whp), sum_sq(t, hc)), cr_mul(t, hs, s[1]));
}

/* second_row with scalar arguments (variable and constant), zeros in ȳ, and a broadcast
 * over scalars only: H v against central differences at several points and directions. */
static void test_row_scalar_args(void **state)
{
    fixture *f = *state;
    prob p = {.f = row_scalars_p, .ns = 2, .na = 1, .ndim = {1}, .shape = {{5}}};
    for (unsigned seed = 0; seed < 3; seed++) {
        double z[7];
        point(7, seed, 1.0, z);
        z[1] = 1.3 + 0.2 * seed; /* pow's base positive */
        check_hvp_dirs(f->ctx, &p, z, 1e-6, 3);
    }
}

/* s0, s1, s2: h = hypot.(s0, s1) (a broadcast over scalars: a 0-dimensional array), summed;
 * h sin(s2) + pow.(s2, 3) h */
static cr_var row_only_scalars_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    cr_targ a[3] = {cr_targ_value(cr_fn_hypot), cr_targ_var(s[0]), cr_targ_var(s[1])};
    cr_var h = cr_asum(t, cr_tape_acall_a(t, &cr_fn_broadcast, a, 3));
    cr_targ b[3] = {cr_targ_value(cr_fn_pow), cr_targ_var(s[2]), f64(3.0)};
    cr_var q = cr_asum(t, cr_tape_acall_a(t, &cr_fn_broadcast, b, 3));
    return cr_add(t, cr_mul(t, h, cr_sin(t, s[2])), cr_mul(t, q, h));
}

/* The full Hessian (several directions per sweep) of a function of scalars through
 * broadcasts over scalars only. */
static void test_row_only_scalars_hessian(void **state)
{
    fixture *f = *state;
    prob p = {.f = row_only_scalars_p, .ns = 3};
    double z[3] = {0.8, -1.1, 0.6};
    check_hessian(f->ctx, &p, z, 1e-6);
}

/* X 3 x 3: eigen(Symmetric(X)) recorded but not used (its tuple's cotangent is zero),
 * then Σ sin(X) + (Σ X²)² */
static cr_var unused_tuple_p(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar S = call_a(t, &cr_fn_symmetric, cr_targ_arr(X[0]), i64(0), 1);
    cr_targ a[1] = {cr_targ_arr(S)};
    cr_targ out[2];
    assert_int_equal(cr_tape_acall_n(t, &cr_fn_eigen, a, 1, out, 2), CR_OK);
    cr_var q = sum_sq(t, X[0]);
    return cr_add(t, sum_sin(t, X[0]), cr_mul(t, q, q));
}

static void test_unused_tuple(void **state)
{
    fixture *f = *state;
    prob p = {.f = unused_tuple_p, .na = 1, .ndim = {2}, .shape = {{3, 3}}};
    double z[9];
    point(9, 1, 1.0, z);
    check_hvp_dirs(f->ctx, &p, z, 1e-6, 2);
}

/* A broadcast whose first argument is not a function, and a form's function whose first
 * argument is not an array, are refused on a second-order tape (CR_EUNIMPL, naming the
 * function); the tape records again after a reset. */
static void test_refused_records(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    double a[3] = {0.5, -1.0, 2.0};
    cr_array A = cr_array_vector(a, 3);
    for (int round = 0; round < 2; round++) {
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &A);
        cr_targ b[2] = {cr_targ_arr(X), cr_targ_arr(X)};
        cr_targ out;
        assert_int_equal(cr_tape_acall(t, &cr_fn_broadcast, b, 2, &out), CR_EUNIMPL);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t), "broadcast: no second-order form on the tape");
        cr_tape_reset(t);
        cr_var s = cr_tape_input(t, 1.5);
        cr_targ c[1] = {cr_targ_var(s)};
        (void)cr_tape_acall_s(t, &cr_fn_prod, c, 1);
        assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
        assert_contains(cr_tape_errmsg(t),
                        "prod: no second-order form on the tape: the first argument is not an "
                        "array");
        /* usable again: the same tape records and sweeps a valid program */
        cr_tape_reset(t);
        X = cr_tape_array_input(t, &A);
        cr_var y = sum_sq(t, X);
        double d[3] = {1.0, 2.0, 3.0}, hv[3];
        cr_array D = cr_array_vector(d, 3), H = cr_array_vector(hv, 3);
        const cr_array *dp[1] = {&D};
        cr_array *hp[1] = {&H};
        assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, dp, hp));
        for (int e = 0; e < 3; e++)
            ASSERT_CLOSE(hv[e], 2.0 * d[e], 1e-12);
    }
    cr_tape_free(t);
}

/* ---- Argument checks of cr_tape_ajvp and cr_tape_ahvp -------------------------------------- */

typedef struct small {
    cr_tape *t;
    double a[3], d[3], out[3];
    cr_array A, D, O;
    cr_var s, y;
    cr_avar X;
} small;

/* On t: s (2.0) and X (3 values), y = s Σ X² (an array record and scalar records). */
static void small_record(small *q, cr_tape *t)
{
    q->t = t;
    double a[3] = {0.5, -1.0, 2.0}, d[3] = {1.0, 0.5, -2.0};
    memcpy(q->a, a, sizeof a);
    memcpy(q->d, d, sizeof d);
    q->A = cr_array_vector(q->a, 3);
    q->D = cr_array_vector(q->d, 3);
    q->O = cr_array_vector(q->out, 3);
    cr_tape_reset(t);
    q->s = cr_tape_input(t, 2.0);
    q->X = cr_tape_array_input(t, &q->A);
    q->y = cr_mul(t, q->s, sum_sq(t, q->X));
    assert_ok(t, cr_tape_status(t));
}

/* The forward sweep's ẏ along (ṡ, Ẋ) = (0.5, D): ṡ Σ X² + 2 s ⟨X, D⟩ (a valid call). */
static void small_jvp_ok(small *q)
{
    const cr_array *dp[1] = {&q->D};
    double sd = 0.5, yd = NAN;
    assert_ok(q->t, cr_tape_ajvp(q->t, &q->s, &sd, 1, &q->X, dp, 1, &q->y, 1, &yd, NULL, 0, NULL));
    double want = 0.5 * (0.25 + 1.0 + 4.0) + 2 * 2.0 * (0.5 - 0.5 - 4.0);
    ASSERT_CLOSE(yd, want, 1e-12);
}

static void test_ajvp_checks(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, &tp, &u), CR_OK);
    small q, r;
    small_record(&q, t);
    small_record(&r, u);
    const cr_array *dp[1] = {&q.D};
    double sd = 0.5, yd;
    /* NULL tape */
    assert_int_equal(cr_tape_ajvp(NULL, &q.s, &sd, 1, NULL, NULL, 0, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EINVAL);
    /* NULL arrays with nonzero counts */
    assert_int_equal(cr_tape_ajvp(t, &q.s, NULL, 1, NULL, NULL, 0, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: xdot is NULL");
    small_jvp_ok(&q);
    /* an output of another tape */
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, dp, 1, &r.y, 1, &yd, NULL, 0, NULL),
                     CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_tape_ajvp: output 0 (variable 2) belongs to another tape");
    small_jvp_ok(&q);
    /* an array input of another tape */
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &r.X, dp, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: array input 0 belongs to another tape");
    small_jvp_ok(&q);
    /* an array output of another tape */
    cr_array *op[1] = {&q.O};
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, dp, 1, &q.y, 1, &yd, &r.X, 1, op),
                     CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp: array output 0 belongs to another tape");
    small_jvp_ok(&q);
    /* a tangent that is not finite */
    double bad = NAN;
    assert_int_equal(cr_tape_ajvp(t, &q.s, &bad, 1, &q.X, dp, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_ajvp");
    small_jvp_ok(&q);
    /* a tangent array that is not a float array */
    int64_t iv[3] = {1, 2, 3};
    cr_array Ia = cr_array_vector(q.d, 3);
    Ia.dtype = CR_DT_I64;
    Ia.data = iv;
    const cr_array *ip[1] = {&Ia};
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, ip, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EINVAL);
    assert_string_equal(cr_ctx_errmsg(f->ctx),
                        "cr_tape_ajvp: tangent array 0 is NULL or not a float array");
    const cr_array *np[1] = {NULL};
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, np, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     CR_EINVAL);
    small_jvp_ok(&q);
    /* a sticky error: returned as it is until the tape is reset */
    (void)cr_tape_array_input(t, NULL);
    cr_status sticky = cr_tape_status(t);
    assert_int_not_equal(sticky, CR_OK);
    assert_int_equal(cr_tape_ajvp(t, &q.s, &sd, 1, &q.X, dp, 1, &q.y, 1, &yd, NULL, 0, NULL),
                     sticky);
    small_record(&q, t);
    small_jvp_ok(&q);
    cr_tape_free(u);
    cr_tape_free(t);
}

/* H v of s Σ X² along (0.5, D), X's part: 2 s D + 2 ṡ X. */
static void small_hvp_ok(small *q)
{
    const cr_array *dp[1] = {&q->D};
    cr_array *op[1] = {&q->O};
    double sd = 0.5, hs = NAN;
    assert_ok(q->t, cr_tape_ahvp(q->t, q->y, &q->s, 1, &sd, &hs, &q->X, 1, dp, op));
    ASSERT_CLOSE(hs, 2 * (0.5 * 1.0 - 1.0 * 0.5 - 2.0 * 2.0), 1e-12);
    for (int e = 0; e < 3; e++)
        ASSERT_CLOSE(q->out[e], 2 * 2.0 * q->d[e] + 2 * 0.5 * q->a[e], 1e-12);
}

static void test_ahvp_checks(void **state)
{
    fixture *f = *state;
    cr_tape *t, *u;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, &tp, &u), CR_OK);
    small q, r;
    small_record(&q, t);
    small_record(&r, u);
    const cr_array *dp[1] = {&q.D};
    cr_array *op[1] = {&q.O};
    double sd = 0.5, hs;
    assert_int_equal(cr_tape_ahvp(NULL, q.y, &q.s, 1, &sd, &hs, &q.X, 1, dp, op), CR_EINVAL);
    /* an array input of another tape */
    assert_int_equal(cr_tape_ahvp(t, q.y, &q.s, 1, &sd, &hs, &r.X, 1, dp, op), CR_ETAPE);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_tape_ahvp: array input 0 belongs to another tape");
    small_hvp_ok(&q);
    /* a direction array that is NULL */
    const cr_array *np[1] = {NULL};
    assert_int_equal(cr_tape_ahvp(t, q.y, &q.s, 1, &sd, &hs, &q.X, 1, np, op), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_tape_ahvp: direction array 0 is NULL or not a float array");
    small_hvp_ok(&q);
    /* a constant array among the inputs: no direction seeded, its result 0 */
    double ca[3] = {1.0, 1.0, 1.0}, co[3] = {9.0, 9.0, 9.0};
    cr_array C = cr_array_vector(ca, 3), CO = cr_array_vector(co, 3);
    cr_avar X2[2] = {cr_aconst(&C), q.X};
    const cr_array *dp2[2] = {&q.D, &q.D};
    cr_array *op2[2] = {&CO, &q.O};
    assert_ok(t, cr_tape_ahvp(t, q.y, &q.s, 1, &sd, &hs, X2, 2, dp2, op2));
    for (int e = 0; e < 3; e++) {
        assert_true(co[e] == 0.0);
        ASSERT_CLOSE(q.out[e], 2 * 2.0 * q.d[e] + 2 * 0.5 * q.a[e], 1e-12);
    }
    /* a sticky error */
    (void)cr_tape_array_input(t, NULL);
    cr_status sticky = cr_tape_status(t);
    assert_int_not_equal(sticky, CR_OK);
    assert_int_equal(cr_tape_ahvp(t, q.y, &q.s, 1, &sd, &hs, &q.X, 1, dp, op), sticky);
    small_record(&q, t);
    small_hvp_ok(&q);
    cr_tape_free(u);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_row_scalar_args, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_row_only_scalars_hessian, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_unused_tuple, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refused_records, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_ajvp_checks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_ahvp_checks, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
