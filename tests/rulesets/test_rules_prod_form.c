/*
 * prod's second-order form (src/rulesets/array/reduce_forms.c) where a form by division
 * (ẋ_k / x_k) breaks down: a slice whose product underflows to zero though its Hessian does
 * not (1e-200 twice), a subnormal element (ẋ / x overflows), one and two zeros, and large
 * and small factors together, with and without dims. H v on a second-order tape
 * (cr_tape_ahvp of y = prod(x), or of y = sum(prod(A, 1)): ȳ = 1 per slice, so H v is the
 * form's S) is compared with the Hessian of a product by its definition,
 * H_ik = Π_{j∉{i,k}} x_j over the slice, multiplied out here term by term in long double.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

/* (H v)_i = Σ_{k≠i} v_k Π_{j∉{i,k}} x_j over the slice of i: the rows of a rows x cols
 * row-major x (one slice per row). */
static void hv_by_definition(const double *x, const double *v, size_t rows, size_t cols,
                             double *out)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < cols; i++) {
            long double acc = 0;
            for (size_t k = 0; k < cols; k++) {
                if (k == i)
                    continue;
                long double p = v[r * cols + k];
                for (size_t j = 0; j < cols; j++)
                    if (j != i && j != k)
                        p *= x[r * cols + j];
                acc += p;
            }
            out[r * cols + i] = (double)acc;
        }
}

/* H v of prod(x) (rows 0: x a vector of cols) or of sum(prod(x, 1)) on a second-order tape. */
static void hv_by_tape(fixture *fx, const double *x, const double *v, size_t rows, size_t cols,
                       double *out)
{
    size_t shape[2] = {rows ? rows : cols, cols}, nd = rows ? 2 : 1, N = rows ? rows * cols : cols;
    if (!rows)
        shape[0] = cols;
    cr_array *xa, *va, *ha;
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, nd, shape, &xa), CR_OK);
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, nd, shape, &va), CR_OK);
    assert_int_equal(cr_array_new(fx->arena, CR_DT_F64, nd, shape, &ha), CR_OK);
    memcpy(xa->data, x, N * sizeof *x);
    memcpy(va->data, v, N * sizeof *v);
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_SECOND_ORDER};
    cr_tape *t;
    assert_int_equal(cr_tape_new(fx->ctx, &tp, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, xa);
    cr_targ args[2] = {cr_targ_arr(X), cr_targ_value(cr_value_i64(1))};
    cr_var y = rows ? cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_prod, args, 2))
                    : cr_tape_acall_s(t, &cr_fn_prod, args, 1);
    const cr_array *vp[1] = {va};
    cr_array *op[1] = {ha};
    assert_ok(t, cr_tape_ahvp(t, y, NULL, 0, NULL, NULL, &X, 1, vp, op));
    memcpy(out, ha->data, N * sizeof *out);
    cr_tape_free(t);
}

static void expect_close(const double *got, const double *want, size_t N, const char *what)
{
    for (size_t i = 0; i < N; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-13 * fabs(want[i]))) {
            print_error("%s: element %zu: %.17g, by definition %.17g\n", what, i, got[i], want[i]);
            fail();
        }
}

/* Rows: a product underflowing to 0 (1e-200 twice, its Hessian near 1e-200); a subnormal
 * element; huge and tiny factors; one zero; two zeros; an ordinary row. */
static const double k_x[6][4] = {{1e-200, 1e-200, 2.0, 3.0},     {1e-310, 2.0, 3.0, 0.5},
                                 {1e200, 1e-200, 1e100, 1e-150}, {0.0, 1.5, -2.0, 0.25},
                                 {0.0, 1.5, 0.0, -3.0},          {0.9, -1.1, 1.3, 0.7}};
static const double k_v[4] = {0.5, -1.25, 0.75, 2.0};

static void test_rows(void **state)
{
    fixture *fx = *state;
    double x[24], v[24], got[24], want[24];
    memcpy(x, k_x, sizeof x);
    for (size_t i = 0; i < 24; i++)
        v[i] = k_v[i % 4] + 0.125 * (double)(i / 4);
    hv_by_definition(x, v, 6, 4, want);
    hv_by_tape(fx, x, v, 6, 4, got);
    expect_close(got, want, 24, "sum(prod(A, 1))");
}

static void test_vectors(void **state)
{
    fixture *fx = *state;
    for (size_t r = 0; r < 6; r++) {
        double got[4], want[4];
        hv_by_definition(k_x[r], k_v, 1, 4, want);
        hv_by_tape(fx, k_x[r], k_v, 0, 4, got);
        char what[40];
        snprintf(what, sizeof what, "prod(x), row %zu", r);
        expect_close(got, want, 4, what);
        cr_arena_reset(fx->arena);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_vectors, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
