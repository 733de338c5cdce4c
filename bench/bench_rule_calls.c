/*
 * chainrules-bench-rule-calls: a fixed amount of rule calls, for exact instruction counts
 * under callgrind (BENCHMARKS.md), not for timing. Each call is an rrule through the
 * registry, then its pullback with a cotangent like the result, its thunks unthunked, on a
 * 16 x 16 f64 array: sum (all, dims 1), prod, maximum (dims 1), extrema, cumprod (dims 1),
 * var (dims 1), softmax (dims 1), norm, transpose and getindex (a row); then 20 times as
 * many calls of the scalar rows mul, atan2 and hypot.
 *
 * Usage: chainrules-bench-rule-calls [N]   (N calls of each array rule, default 2000)
 */
#include <stdio.h>
#include <stdlib.h>

#include <chainrules.h>

static cr_ctx *g_ctx;
static cr_arena *g_arena;

static int run(const cr_value *f, cr_value *args, size_t nargs, long n)
{
    for (long i = 0; i < n; i++) {
        cr_value y;
        cr_pullback pb;
        cr_tangent dy = cr_tangent_zero(), dx[4];
        cr_status st = cr_rrule(NULL, g_arena, f, args, nargs, &y, &pb);
        if (st == CR_OK && y.kind == CR_KIND_ARRAY) {
            cr_array *g;
            st = cr_array_copy(g_arena, y.u.arr, &g);
            dy = cr_tangent_array(g);
        } else if (y.kind == CR_KIND_F64) {
            dy = cr_tangent_f64(1.0);
        }
        if (st == CR_OK)
            st = cr_pullback_call(g_arena, &pb, &dy, dx, pb.nx);
        for (size_t j = 0; st == CR_OK && j < pb.nx; j++) {
            cr_tangent u;
            st = cr_tangent_unthunk(dx[j], &u);
        }
        if (st != CR_OK) {
            fprintf(stderr, "chainrules-bench-rule-calls: %s\n", cr_ctx_errmsg(g_ctx));
            return 1;
        }
        cr_arena_reset(g_arena);
    }
    return 0;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
    cr_arena *keep;
    cr_array *A;
    size_t shape[2] = {16, 16};
    if (cr_ctx_new(NULL, &g_ctx) != CR_OK || cr_arena_new(g_ctx, NULL, &g_arena) != CR_OK ||
        cr_arena_new(g_ctx, NULL, &keep) != CR_OK ||
        cr_array_new(keep, CR_DT_F64, 2, shape, &A) != CR_OK)
        return 1;
    double *d = A->data;
    for (size_t i = 0; i < 256; i++)
        d[i] = 0.5 + 0.01 * (double)((i * 37) % 101);
    cr_value a[2] = {cr_value_array(A), cr_value_i64(1)};
    cr_value ix[2] = {cr_value_array(A), cr_value_i64(3)};
    cr_value s[2] = {cr_value_f64(1.5), cr_value_f64(2.5)};
    int bad = run(&cr_fn_sum, a, 1, n) || run(&cr_fn_sum, a, 2, n) || run(&cr_fn_prod, a, 1, n) ||
              run(&cr_fn_maximum, a, 2, n) || run(&cr_fn_extrema, a, 1, n) ||
              run(&cr_fn_cumprod, a, 2, n) || run(&cr_fn_var, a, 2, n) ||
              run(&cr_fn_softmax, a, 2, n) || run(&cr_fn_norm, a, 1, n) ||
              run(&cr_fn_transpose, a, 1, n) || run(&cr_fn_getindex, ix, 2, n) ||
              run(&cr_fn_mul, s, 2, 20 * n) || run(&cr_fn_atan2, s, 2, 20 * n) ||
              run(&cr_fn_hypot, s, 2, 20 * n);
    cr_arena_free(keep);
    cr_arena_free(g_arena);
    cr_ctx_free(g_ctx);
    return bad;
}
