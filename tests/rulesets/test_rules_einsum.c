/*
 * Tests of einsum (cr_fn_einsum): both registrations through the rule tester (frule and
 * rrule against finite differences, the dot-product test, thunked seeds) at the points the
 * sampler draws (matrix, batched, transposed, outer and elementwise products, diagonals,
 * traces, sums, implicit outputs; f64, f32 and c128; strided operands; hard points with
 * extents 1 and exact zeros); values and cotangents against other rules computed by other
 * code (matmul, transpose, tr, sum, diagm); element types; empty extents; the second-order
 * classes; and the errors.
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>

#include "test_util.h"

#include <chainrules/testing_cmocka.h>

static cr_value spec_value(cr_einsum_spec *s, const char *spec)
{
    s->spec = spec;
    return cr_value_struct(&cr_einsum_spec_type, s);
}

static void test_registrations(void **state)
{
    fixture *fx = *state;
    cr_ctx_set_debug(fx->ctx, true);
    const cr_registry *reg = cr_registry_builtin();
    assert_int_equal(cr_registry_builtin_status(), CR_OK);
    size_t tested = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        if (strcmp(info.fn->name, "einsum") != 0)
            continue;
        assert_true(cr_test_registration_usable(&info));
        /* the classes a second-order tape takes: linear in one operand, multilinear in two */
        assert_int_equal(info.def->linearity, info.nargs == 2 ? CR_LINEAR : CR_MULTILINEAR);
        cr_test_opts opts = {0};
        opts.npoints = 80;
        cr_test_report r;
        cr_status st = cr_test_rule_registration(fx->arena, &opts, &info, &r);
        if (st != CR_OK || r.verdict == CR_VERDICT_FAIL) {
            char buf[1200];
            cr_test_report_format(&r, buf, sizeof buf);
            print_error("einsum/%zu: %s (%s; %s)\n", info.nargs, buf, cr_status_name(st),
                        cr_ctx_errmsg(fx->ctx));
            fail();
        }
        assert_true(r.npoints >= 60);
        tested++;
    }
    assert_int_equal(tested, 2);
}

/* Element i of a value or tangent (thunks unthunked; ZeroTangent reads 0). */
static cr_complex val_at(const cr_value *v, size_t i)
{
    assert_int_equal(v->kind, CR_KIND_ARRAY);
    return cr_array_get_linear(v->u.arr, i);
}

static cr_complex tan_at(cr_tangent t, size_t i)
{
    cr_tangent v;
    assert_int_equal(cr_tangent_unthunk(t, &v), CR_OK);
    if (v.tag == CR_TAN_ZERO)
        return 0;
    if (v.tag == CR_TAN_F64)
        return v.u.f64;
    assert_int_equal(v.tag, CR_TAN_ARRAY);
    return cr_array_get_linear(v.u.arr, i);
}

static cr_complex scalar_c(const cr_value *v)
{
    if (v->kind == CR_KIND_C128) {
        cr_complex z;
        memcpy(&z, &v->u.c128, sizeof z);
        return z;
    }
    assert_int_equal(v->kind, CR_KIND_F64);
    return v->u.f64;
}

static void assert_cclose(cr_complex a, cr_complex b, double tol)
{
    if (!(cabs(a - b) <= tol * fmax(1.0, cabs(b)))) {
        print_error("%.17g%+.17gi != %.17g%+.17gi\n", creal(a), cimag(a), creal(b), cimag(b));
        fail();
    }
}

static cr_array *rand_arr(fixture *fx, cr_dtype dt, size_t nd, const size_t *shape, double s)
{
    cr_array *a;
    assert_int_equal(cr_array_new(fx->arena, dt, nd, shape, &a), CR_OK);
    size_t n = cr_array_numel(a);
    for (size_t i = 0; i < n; i++) {
        double re = sin(1.3 * (double)i + s), im = cos(0.7 * (double)i - s);
        if (dt == CR_DT_C128)
            ((cr_complex *)a->data)[i] = CMPLX(re, im);
        else if (dt == CR_DT_F32)
            ((float *)a->data)[i] = (float)re;
        else
            ((double *)a->data)[i] = re;
    }
    return a;
}

/* einsum(spec, args[1..]) and f(fargs) agree in value and, for the cotangent dy of the
 * result, in their cotangents: einsum's argument k + 1 against f's argument map[k]. */
static void same_as(fixture *fx, const char *spec, cr_value *args, size_t nargs, const cr_value *f,
                    const cr_value *fargs, size_t nf, const int *map)
{
    cr_einsum_spec s;
    args[0] = spec_value(&s, spec);
    cr_value y, z;
    cr_pullback pb, pf;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_einsum, args, nargs, &y, &pb), CR_OK);
    assert_int_equal(cr_rrule(NULL, fx->arena, f, fargs, nf, &z, &pf), CR_OK);
    size_t n = cr_array_numel(y.u.arr);
    if (z.kind == CR_KIND_ARRAY)
        assert_int_equal(cr_array_numel(z.u.arr), n);
    for (size_t i = 0; i < n; i++)
        assert_cclose(val_at(&y, i), z.kind == CR_KIND_ARRAY ? val_at(&z, i) : scalar_c(&z), 1e-13);
    cr_array *g = rand_arr(fx, (cr_dtype)y.u.arr->dtype, y.u.arr->ndim, y.u.arr->shape, 0.4);
    cr_tangent dy = cr_tangent_array(g), dz = dy, dx[4], dw[4];
    if (z.kind != CR_KIND_ARRAY)
        dz = z.kind == CR_KIND_C128 ? cr_tangent_c128(cr_array_get_linear(g, 0))
                                    : cr_tangent_f64(creal(cr_array_get_linear(g, 0)));
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, nargs + 1), CR_OK);
    assert_int_equal(cr_pullback_call(fx->arena, &pf, &dz, dw, nf + 1), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    for (size_t k = 0; k + 1 < nargs; k++) {
        if (map[k] < 0)
            continue;
        size_t m = cr_array_numel(args[k + 1].u.arr);
        for (size_t i = 0; i < m; i++)
            assert_cclose(tan_at(dx[k + 2], i), tan_at(dw[map[k] + 1], i), 1e-13);
    }
}

/* Products through BLAS (plain, transposed operands, batched, complex) against matmul. */
static void test_products(void **state)
{
    fixture *fx = *state;
    size_t s34[2] = {3, 4}, s42[2] = {4, 2}, s43[2] = {4, 3}, s24[2] = {2, 4};
    const int id[2] = {0, 1};
    for (int c = 0; c < 2; c++) {
        cr_dtype dt = c ? CR_DT_C128 : CR_DT_F64;
        cr_array *A = rand_arr(fx, dt, 2, s34, 0.1), *B = rand_arr(fx, dt, 2, s42, 0.2);
        cr_value args[3] = {{0}, cr_value_array(A), cr_value_array(B)};
        cr_value margs[2] = {cr_value_array(A), cr_value_array(B)};
        same_as(fx, "ij,jk->ik", args, 3, &cr_fn_matmul, margs, 2, id);
        same_as(fx, "ij,jk", args, 3, &cr_fn_matmul, margs, 2, id); /* implicit output */
        /* A stored as its transpose (4 x 3): read transposed by gemm. */
        cr_array *At = rand_arr(fx, dt, 2, s43, 0.3), *Bt = rand_arr(fx, dt, 2, s24, 0.5);
        cr_value ta = cr_value_array(At), tb = cr_value_array(Bt), t1, t2;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_transpose, &ta, 1, &t1), CR_OK);
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_transpose, &tb, 1, &t2), CR_OK);
        cr_value a2[3] = {{0}, cr_value_array(At), cr_value_array(Bt)};
        cr_value m2[2] = {t1, t2};
        cr_value yv, zv;
        cr_einsum_spec s;
        a2[0] = spec_value(&s, "ji,kj->ik");
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, a2, 3, &yv), CR_OK);
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_matmul, m2, 2, &zv), CR_OK);
        for (size_t i = 0; i < 6; i++)
            assert_cclose(val_at(&yv, i), val_at(&zv, i), 1e-13);
        /* implicit output in ASCII order: "ba,cb" is "ba,cb->ac" = Aᵀ Bᵀ */
        a2[0] = spec_value(&s, "ba,cb");
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, a2, 3, &yv), CR_OK);
        assert_int_equal(yv.u.arr->shape[0], 3);
        for (size_t i = 0; i < 6; i++)
            assert_cclose(val_at(&yv, i), val_at(&zv, i), 1e-13);
    }
    /* batched: each slice of bij,bjk->bik is the matmul of the slices */
    size_t s234[3] = {2, 3, 4}, s242[3] = {2, 4, 2};
    cr_array *X = rand_arr(fx, CR_DT_F64, 3, s234, 0.7), *Y = rand_arr(fx, CR_DT_F64, 3, s242, 0.9);
    cr_value args[3] = {{0}, cr_value_array(X), cr_value_array(Y)}, y;
    cr_einsum_spec s;
    args[0] = spec_value(&s, "bij,bjk->bik");
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, args, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->ndim, 3);
    for (size_t b = 0; b < 2; b++) {
        cr_array xs = cr_array_matrix((double *)X->data + b * 12, 3, 4),
                 ys = cr_array_matrix((double *)Y->data + b * 8, 4, 2);
        cr_value m[2] = {cr_value_array(&xs), cr_value_array(&ys)}, z;
        assert_int_equal(cr_function_call(fx->arena, &cr_fn_matmul, m, 2, &z), CR_OK);
        for (size_t i = 0; i < 6; i++)
            assert_cclose(val_at(&y, b * 6 + i), val_at(&z, i), 1e-13);
    }
}

/* One operand: transpose, trace, sums, diagonals against their own rules. */
static void test_one_operand(void **state)
{
    fixture *fx = *state;
    size_t s33[2] = {3, 3}, s3 = 3;
    const int id[1] = {0};
    cr_array *A = rand_arr(fx, CR_DT_F64, 2, s33, 0.2), *v = rand_arr(fx, CR_DT_F64, 1, &s3, 0.6);
    cr_value args[2] = {{0}, cr_value_array(A)}, a1 = cr_value_array(A);
    same_as(fx, "ij->ji", args, 2, &cr_fn_transpose, &a1, 1, id);
    same_as(fx, "ii->", args, 2, &cr_fn_tr, &a1, 1, id);
    cr_value sargs[2] = {cr_value_array(A), cr_value_i64(1)};
    same_as(fx, "ij->i", args, 2, &cr_fn_sum, sargs, 2, id);
    cr_value dv[2] = {{0}, cr_value_array(v)}, d1 = cr_value_array(v);
    same_as(fx, "i->ii", dv, 2, &cr_fn_diagm, &d1, 1, id);
    cr_value da = cr_value_array(A);
    same_as(fx, "ii->i", args, 2, &cr_fn_diag, &da, 1, id);
}

/* Element types: f32 stays f32, f32 with f64 gives f64, complex wins; the spec's cotangent
 * is NoTangent and a real operand of a complex product gets a real cotangent. */
static void test_types(void **state)
{
    fixture *fx = *state;
    size_t s22[2] = {2, 2};
    cr_array *F = rand_arr(fx, CR_DT_F32, 2, s22, 0.1), *D = rand_arr(fx, CR_DT_F64, 2, s22, 0.2),
             *Z = rand_arr(fx, CR_DT_C128, 2, s22, 0.3);
    cr_einsum_spec s;
    cr_value y;
    cr_value ff[3] = {spec_value(&s, "ij,jk->ik"), cr_value_array(F), cr_value_array(F)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, ff, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F32);
    cr_value fd[3] = {ff[0], cr_value_array(F), cr_value_array(D)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, fd, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_F64);
    cr_value dz[3] = {ff[0], cr_value_array(D), cr_value_array(Z)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_einsum, dz, 3, &y, &pb), CR_OK);
    assert_int_equal(y.u.arr->dtype, CR_DT_C128);
    cr_tangent dy = cr_tangent_array(Z), dx[4], g;
    assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_NONE);
    assert_int_equal(cr_tangent_unthunk(dx[2], &g), CR_OK);
    assert_int_equal(g.u.arr->dtype, CR_DT_F64);
    assert_int_equal(cr_tangent_unthunk(dx[3], &g), CR_OK);
    assert_int_equal(g.u.arr->dtype, CR_DT_C128);
    /* a full contraction is a 0-d array */
    cr_value dd[3] = {spec_value(&s, "ij,ij->"), cr_value_array(D), cr_value_array(D)};
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, dd, 3, &y), CR_OK);
    assert_int_equal(y.kind, CR_KIND_ARRAY);
    assert_int_equal(y.u.arr->ndim, 0);
    double want = 0;
    for (size_t i = 0; i < 4; i++)
        want += ((double *)D->data)[i] * ((double *)D->data)[i];
    assert_close(creal(val_at(&y, 0)), want, 1e-14);
}

/* Extents of 0: an empty inner index gives zeros, an empty output an empty array. */
static void test_empty(void **state)
{
    fixture *fx = *state;
    size_t s20[2] = {2, 0}, s03[2] = {0, 3}, s23[2] = {2, 3};
    cr_array *A = rand_arr(fx, CR_DT_F64, 2, s20, 0), *B = rand_arr(fx, CR_DT_F64, 2, s03, 0),
             *G = rand_arr(fx, CR_DT_F64, 2, s23, 0.4);
    cr_einsum_spec s;
    const char *specs[2] = {"ij,jk->ik", "ij,jk->ki"}; /* gemm path, then a permuted output */
    for (int k = 0; k < 2; k++) {
        cr_value args[3] = {spec_value(&s, specs[k]), cr_value_array(A), cr_value_array(B)}, y;
        cr_pullback pb;
        assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_einsum, args, 3, &y, &pb), CR_OK);
        assert_int_equal(cr_array_numel(y.u.arr), 6);
        for (size_t i = 0; i < 6; i++)
            assert_cclose(val_at(&y, i), 0, 0);
        cr_tangent dy = cr_tangent_array(G), dx[4];
        if (k == 0) {
            assert_int_equal(cr_pullback_call(fx->arena, &pb, &dy, dx, 4), CR_OK);
            cr_tangent g;
            assert_int_equal(cr_tangent_unthunk(dx[2], &g), CR_OK);
            assert_true(g.tag == CR_TAN_ZERO || cr_array_numel(g.u.arr) == 0);
        }
    }
    cr_value e[3] = {spec_value(&s, "ji,jk->ik"), cr_value_array(B), cr_value_array(B)}, y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, e, 3, &y), CR_OK);
    assert_int_equal(y.u.arr->shape[0], 3);
    assert_int_equal(y.u.arr->shape[1], 3);
    for (size_t i = 0; i < 9; i++)
        assert_cclose(val_at(&y, i), 0, 0);
}

/* Bad arguments: a status and a message naming the spec and the place. */
static void test_errors(void **state)
{
    fixture *fx = *state;
    size_t s22[2] = {2, 2};
    cr_array *A = rand_arr(fx, CR_DT_F64, 2, s22, 0);
    cr_einsum_spec s = {NULL};
    cr_value args[3] = {cr_value_struct(&cr_einsum_spec_type, &s), cr_value_array(A),
                        cr_value_array(A)},
             y;
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, args, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "einsum: the spec is a NULL string");
    args[0] = spec_value(&s, "ij,jk->ik!");
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, args, 3, &y), CR_EINVAL);
    assert_error_once(cr_ctx_errmsg(fx->ctx), "einsum",
                      "spec \"ij,jk->ik!\": '!' at position 9 is not an index letter");
    args[0] = spec_value(&s, "ij->");
    assert_int_equal(cr_function_call(fx->arena, &cr_fn_einsum, args, 3, &y), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(fx->ctx), "einsum: spec \"ij->\" has 1 operand, 2 given");
    /* without a spec no rule matches */
    cr_value noargs[3] = {cr_value_i64(1), cr_value_array(A), cr_value_array(A)};
    cr_pullback pb;
    assert_int_equal(cr_rrule(NULL, fx->arena, &cr_fn_einsum, noargs, 3, &y, &pb), CR_NOTHING);
}

/* Every allocation short of room: CR_EARENA, then the result of a growable arena (the gemm
 * path with copies and a permuted output, the loop path, one operand). */
static void test_arena_full(void **state)
{
    fixture *fx = *state;
    size_t s23[2] = {2, 3}, s32[2] = {3, 2}, s234[3] = {2, 3, 4}, s243[3] = {2, 4, 3};
    cr_array *A = rand_arr(fx, CR_DT_F64, 2, s23, 0.1), *B = rand_arr(fx, CR_DT_F64, 2, s32, 0.2),
             *X = rand_arr(fx, CR_DT_F64, 3, s234, 0.3), *Y = rand_arr(fx, CR_DT_F64, 3, s243, 0.4),
             *Z = rand_arr(fx, CR_DT_C128, 2, s23, 0.5);
    cr_einsum_spec s[6];
    cr_value a[3] = {spec_value(&s[0], "ij,jk->ik"), cr_value_array(A), cr_value_array(B)};
    assert_arena_sweep(fx, &cr_fn_einsum, a, 3);
    assert_arena_sweep_rules(fx, &cr_fn_einsum, a, 3);
    cr_value b[3] = {spec_value(&s[1], "bij,bkj->kbi"), cr_value_array(X), cr_value_array(X)};
    assert_arena_sweep(fx, &cr_fn_einsum, b, 3);
    assert_arena_sweep_rules(fx, &cr_fn_einsum, b, 3);
    cr_value c[3] = {spec_value(&s[2], "bij,bjk->bik"), cr_value_array(X), cr_value_array(Y)};
    assert_arena_sweep(fx, &cr_fn_einsum, c, 3);
    assert_arena_sweep_rules(fx, &cr_fn_einsum, c, 3);
    cr_value d[3] = {spec_value(&s[3], "ij,ji->i"), cr_value_array(Z), cr_value_array(B)};
    assert_arena_sweep(fx, &cr_fn_einsum, d, 3);
    assert_arena_sweep_rules(fx, &cr_fn_einsum, d, 3);
    cr_value e[2] = {spec_value(&s[4], "bij->jb"), cr_value_array(X)};
    assert_arena_sweep(fx, &cr_fn_einsum, e, 2);
    assert_arena_sweep_rules(fx, &cr_fn_einsum, e, 2);
    cr_value g[2] = {spec_value(&s[5], "ij->jii"), cr_value_array(Z)};
    assert_arena_sweep(fx, &cr_fn_einsum, g, 2);
    assert_arena_sweep_rules(fx, &cr_fn_einsum, g, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_registrations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_products, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_one_operand, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_types, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_empty, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_arena_full, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
