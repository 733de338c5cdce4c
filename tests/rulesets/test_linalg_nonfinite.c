/*
 * Matrices with a NaN or infinite element given to the rules built on LAPACK's iterative
 * routines (SVD, symmetric and general eigendecompositions, Schur forms): a clear
 * CR_EDOMAIN naming the function and the element, from the primal and from the rrule, and
 * nothing printed (LAPACK's error handler writes to stderr when a NaN reaches the balancing
 * step of geev).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <unistd.h>

#include "test_util.h"

typedef struct fx {
    cr_ctx *ctx;
    cr_arena *arena;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (f == NULL || cr_ctx_new(NULL, &f->ctx) != CR_OK ||
        cr_arena_new(f->ctx, NULL, &f->arena) != CR_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    cr_arena_free(f->arena);
    cr_ctx_free(f->ctx);
    free(f);
    return 0;
}

/* Calls f(args) as a primal and as an rrule; both must give CR_EDOMAIN with a message
 * naming the function and the element, and print nothing on stderr. */
static void check(fx *f, const cr_value *fn, const cr_value *args, size_t nargs)
{
    const char *name = fn->u.func.fn->name;
    if (fn == &cr_fn_opnorm) /* opnorm(A) calls svdvals, whose message it passes on */
        name = "svdvals";
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    assert_true(saved >= 0 && dup2(fileno(tmp), 2) >= 0);
    cr_value y;
    cr_pullback pb;
    cr_status s1 = cr_function_call(f->arena, fn, args, nargs, &y);
    char m1[512];
    snprintf(m1, sizeof m1, "%s", cr_ctx_errmsg(f->ctx));
    cr_status s2 = cr_rrule(NULL, f->arena, fn, args, nargs, &y, &pb);
    char m2[512];
    snprintf(m2, sizeof m2, "%s", cr_ctx_errmsg(f->ctx));
    fflush(stderr);
    long printed = ftell(tmp) > 0 ? ftell(tmp) : (fseek(tmp, 0, SEEK_END), ftell(tmp));
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    fclose(tmp);
    if (s1 != CR_EDOMAIN || s2 != CR_EDOMAIN)
        fprintf(stderr, "%s: %d %d: %s / %s\n", name, (int)s1, (int)s2, m1, m2);
    assert_int_equal(s1, CR_EDOMAIN);
    assert_int_equal(s2, CR_EDOMAIN);
    /* (1, 0) where the rule mirrors the upper triangle into a symmetric work matrix */
    char want[96], mirror[96];
    snprintf(want, sizeof want, "%s: element (0, 1) of the matrix is not finite", name);
    snprintf(mirror, sizeof mirror, "%s: element (1, 0) of the matrix is not finite", name);
    assert_true(strstr(m1, want) != NULL || strstr(m1, mirror) != NULL);
    assert_true(strstr(m2, want) != NULL || strstr(m2, mirror) != NULL);
    assert_int_equal(printed, 0);
}

static void test_nonfinite(void **state)
{
    fx *f = *state;
    const double bad[2] = {NAN, INFINITY};
    for (int b = 0; b < 2; b++) {
        /* a 3 x 3 matrix (row-major) with a bad element at (0, 1), in the upper triangle that
         * the symmetric eigendecompositions read */
        double a[9] = {2, bad[b], 0.1, 0.5, 3, 0.2, 0.1, 0.2, 4};
        double c[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
        cr_array A = cr_array_matrix(a, 3, 3), C = cr_array_matrix(c, 3, 3);
        cr_value one[1] = {cr_value_array(&A)};
        const cr_value *ones[] = {&cr_fn_svd,           &cr_fn_svdvals,        &cr_fn_pinv,
                                  &cr_fn_opnorm,        &cr_fn_eigen,          &cr_fn_eigvals,
                                  &cr_fn_eigen_general, &cr_fn_eigvals_general};
        for (size_t k = 0; k < sizeof ones / sizeof ones[0]; k++)
            check(f, ones[k], one, 1);
        cr_value mf[2] = {cr_fn_sin, cr_value_array(&A)};
        check(f, &cr_fn_matfun_herm, mf, 2);
        cr_value ly[2] = {cr_value_array(&A), cr_value_array(&C)};
        check(f, &cr_fn_lyap, ly, 2);
        cr_value sy[3] = {cr_value_array(&A), cr_value_array(&C), cr_value_array(&C)};
        check(f, &cr_fn_sylvester, sy, 3);
    }
    /* complex matrices too */
    cr_complex z[4] = {CMPLX(1, 0), CMPLX(0, NAN), CMPLX(0, 1), CMPLX(2, 0)};
    size_t shape[2] = {2, 2};
    cr_array Z;
    assert_int_equal(cr_array_view_init(&Z, z, CR_DT_C128, 2, shape, NULL), CR_OK);
    cr_value zv[1] = {cr_value_array(&Z)};
    check(f, &cr_fn_svdvals, zv, 1);
    check(f, &cr_fn_eigen_general, zv, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nonfinite, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
