/*
 * Primitives: calls differentiated by rules of the rule API (docs/source-transformation.md,
 * Primitives). q_chain calls the library's matmul, logsumexp and logdet and a user's rule
 * (wsq_rule below); its gradient (f_rev), tangents (f_fwd) and vector tangents (f_fwdv)
 * are checked against central differences of q_chain itself. Then the failure paths:
 * a rule that does not apply, and bad descriptors given to cr_adcall_* directly.
 */
#include "primitives.h"
#include "test_util.h"

/* ---- The primitives' primal code (the rules are the references' subject, not these) ---- */

void matmul(const double *A, const double *B, double *C, int m, int k, int n)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int l = 0; l < k; l++)
                s += A[i * k + l] * B[l * n + j];
            C[i * n + j] = s;
        }
}

/* log det A by Gaussian elimination without pivoting (A is near the identity here). */
double logdet(const double *A, int n)
{
    double M[64], s = 0;
    memcpy(M, A, (size_t)(n * n) * sizeof *M);
    for (int p = 0; p < n; p++) {
        s += log(M[p * n + p]);
        for (int i = p + 1; i < n; i++) {
            double r = M[i * n + p] / M[p * n + p];
            for (int j = p; j < n; j++)
                M[i * n + j] -= r * M[p * n + j];
        }
    }
    return s;
}

double wsq(const double *x, double w, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    return w * s;
}

double bad_rule(const double *x, int n)
{
    return x[0] * n;
}

/* ---- A user's rule for wsq(x, w) = w * sum(x^2), written against the rule API ---------- */

static double sumsq(const cr_array *x)
{
    const double *p = x->data;
    double s = 0;
    for (size_t i = 0; i < cr_array_numel(x); i++)
        s += p[i] * p[i];
    return s;
}

static cr_status wsq_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t n,
                            cr_value *out)
{
    (void)arena;
    (void)f;
    (void)n;
    *out = cr_value_f64(args[1].u.f64 * sumsq(args[0].u.arr));
    return CR_OK;
}

static const cr_function wsq_function = {"wsq", 2, wsq_primal, NULL, NULL, 0};

typedef struct wsq_env {
    const cr_array *x;
    double w;
} wsq_env;

static cr_status wsq_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)nx;
    const wsq_env *e = env;
    double g = dy->tag == CR_TAN_F64 ? dy->u.f64 : 0;
    cr_array *gx;
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, e->x->shape, &gx);
    if (st != CR_OK)
        return st;
    const double *x = e->x->data;
    double *gp = gx->data;
    for (size_t i = 0; i < cr_array_numel(e->x); i++)
        gp[i] = 2 * e->w * x[i] * g;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_array(gx);
    dx[2] = cr_tangent_f64(sumsq(e->x) * g);
    return CR_OK;
}

static cr_status wsq_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    (void)udata;
    wsq_env *e = cr_arena_alloc(arena, sizeof *e, 0);
    if (!e)
        return CR_ENOMEM;
    e->x = args[0].u.arr;
    e->w = args[1].u.f64;
    cr_status st = wsq_primal(arena, f, args, nargs, y);
    *pb = (cr_pullback){wsq_pullback, e, "wsq_pullback", nargs + 1};
    return st;
}

static cr_status wsq_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                           const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                           cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    const cr_array *x = args[0].u.arr;
    double w = args[1].u.f64, d = 0;
    if (dargs[1].tag == CR_TAN_ARRAY)
        for (size_t i = 0; i < cr_array_numel(x); i++)
            d += 2 * w * ((const double *)x->data)[i] *
                 creal(cr_array_get_linear(dargs[1].u.arr, i));
    if (dargs[2].tag == CR_TAN_F64)
        d += sumsq(x) * dargs[2].u.f64;
    *dy = cr_tangent_f64(d);
    return wsq_primal(arena, f, args, nargs, y);
}

static const cr_argspec wsq_args[2] = {CR_ARG_ARRAY_F64, CR_ARG_F64};
const cr_rule_def wsq_rule = {.struct_size = sizeof(cr_rule_def),
                              .fn = &wsq_function,
                              .nargs = 2,
                              .args = wsq_args,
                              .frule = wsq_frule,
                              .rrule = wsq_rrule};

/* ---- The tests ---------------------------------------------------------------------------- */

enum { N = 4, NIN = N * N + N + 1 };

static void inputs(double *W, double *x0, double *s)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            W[i * N + j] = (i == j ? 1.0 : 0.0) + 0.15 * sin(1.0 + i * N + j);
    for (int i = 0; i < N; i++)
        x0[i] = 0.4 * cos(0.7 * i) - 0.1;
    *s = 0.8;
}

/* The input vector (W, x0, s) as one array for the differences. */
static double q_of(const double *v)
{
    return q_chain(v, v + N * N, v[N * N + N], N);
}

static void test_gradient(void **state)
{
    (void)state;
    double v[NIN], g[NIN] = {0};
    inputs(v, v + N * N, &v[N * N + N]);
    double y = q_chain_rev(v, g, v + N * N, g + N * N, v[N * N + N], &g[N * N + N], N, 1.0);
    assert_close(y, q_of(v), 1e-14);
    for (int i = 0; i < NIN; i++) {
        double p[NIN], m[NIN], h = 1e-6;
        memcpy(p, v, sizeof p);
        memcpy(m, v, sizeof m);
        p[i] += h;
        m[i] -= h;
        ASSERT_CLOSE(g[i], (q_of(p) - q_of(m)) / (2 * h), 1e-7);
    }
    /* the gradient is added: a second call doubles it */
    double g2[NIN];
    memcpy(g2, g, sizeof g2);
    (void)q_chain_rev(v, g2, v + N * N, g2 + N * N, v[N * N + N], &g2[N * N + N], N, 1.0);
    for (int i = 0; i < NIN; i++)
        assert_close(g2[i], 2 * g[i], 1e-14);
}

static void test_tangents(void **state)
{
    (void)state;
    double v[NIN], g[NIN] = {0};
    inputs(v, v + N * N, &v[N * N + N]);
    (void)q_chain_rev(v, g, v + N * N, g + N * N, v[N * N + N], &g[N * N + N], N, 1.0);
    /* one direction: the gradient's dot product with it */
    double d[NIN], dot = 0, yd = 0;
    for (int i = 0; i < NIN; i++) {
        d[i] = cos(3.0 * i);
        dot += d[i] * g[i];
    }
    double y = q_chain_fwd(v, d, v + N * N, d + N * N, v[N * N + N], d[N * N + N], N, &yd);
    assert_close(y, q_of(v), 1e-14);
    assert_close(yd, dot, 1e-12);
    /* every unit direction at once: the gradient */
    enum { ND = NIN };
    static double Wd[N * N * ND], xd[N * ND], sd[ND], out[ND];
    memset(Wd, 0, sizeof Wd);
    memset(xd, 0, sizeof xd);
    memset(sd, 0, sizeof sd);
    for (int i = 0; i < N * N; i++)
        Wd[i * ND + i] = 1;
    for (int i = 0; i < N; i++)
        xd[i * ND + N * N + i] = 1;
    sd[N * N + N] = 1;
    (void)q_chain_fwdv(v, Wd, v + N * N, xd, v[N * N + N], sd, N, out, ND);
    for (int i = 0; i < NIN; i++)
        assert_close(out[i], g[i], 1e-12);
}

/* A rule that does not apply: f_rev returns NaN, the shadows are unchanged and the
 * message names the rule. */
static void test_rule_failure(void **state)
{
    (void)state;
    double x[3] = {1, 2, 3}, g[3] = {0};
    assert_true(isnan(q_bad_rev(x, g, 3, 1.0)));
    for (int i = 0; i < 3; i++)
        assert_true(g[i] == 0);
    assert_non_null(strstr(cr_adcall_message(), "matmul"));
}

static void test_descriptors(void **state)
{
    (void)state;
    double x[4] = {1, 2, 3, 4}, xb[4] = {0}, yb = 1, y = 0, yd = 0;
    cr_adcall_arg a = {x, xb, 1, {4, 0}, 0}, o = {NULL, &yb, 0, {0, 0}, 0};
    /* neither or both of fn and def */
    assert_int_equal(cr_adcall_reverse(NULL, NULL, &a, 1, &o), CR_EINVAL);
    assert_int_equal(cr_adcall_reverse(&cr_fn_logsumexp, &wsq_rule, &a, 1, &o), CR_EINVAL);
    /* three dimensions; a NULL value; a negative increment */
    cr_adcall_arg bad = a;
    bad.ndim = 3;
    assert_int_equal(cr_adcall_reverse(&cr_fn_logsumexp, NULL, &bad, 1, &o), CR_EINVAL);
    bad = a;
    bad.x = NULL;
    assert_int_equal(cr_adcall_reverse(&cr_fn_logsumexp, NULL, &bad, 1, &o), CR_EINVAL);
    bad = a;
    bad.dinc = -1;
    assert_int_equal(cr_adcall_reverse(&cr_fn_logsumexp, NULL, &bad, 1, &o), CR_EINVAL);
    /* an element count that overflows */
    bad = a;
    bad.ndim = 2;
    bad.shape[0] = bad.shape[1] = (size_t)1 << 40;
    assert_int_equal(cr_adcall_reverse(&cr_fn_logsumexp, NULL, &bad, 1, &o), CR_EOVERFLOW);
    assert_non_null(strstr(cr_adcall_message(), "logsumexp"));
    /* a scalar output for an array-valued rule */
    cr_adcall_arg m[2] = {{x, xb, 2, {2, 2}, 0}, {x, xb, 2, {2, 2}, 0}};
    assert_int_equal(cr_adcall_reverse(&cr_fn_matmul, NULL, m, 2, &o), CR_ESHAPE);
    for (int i = 0; i < 4; i++)
        assert_true(xb[i] == 0);
    assert_true(yb == 1);
    /* forward: the output is NaN on failure */
    cr_adcall_arg fo = {&y, &yd, 0, {0, 0}, 0};
    assert_int_equal(cr_adcall_forward(&cr_fn_matmul, NULL, m, 2, &fo), CR_ESHAPE);
    assert_true(isnan(y) && isnan(yd));
    /* and a success clears nothing but computes: logsumexp's cotangent is softmax */
    assert_int_equal(cr_adcall_reverse(&cr_fn_logsumexp, NULL, &a, 1, &o), CR_OK);
    double z = 0;
    for (int i = 0; i < 4; i++)
        z += exp(x[i]);
    for (int i = 0; i < 4; i++)
        assert_close(xb[i], exp(x[i]) / z, 1e-14);
    assert_true(yb == 0); /* consumed */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradient), cmocka_unit_test(test_tangents),
        cmocka_unit_test(test_rule_failure), cmocka_unit_test(test_descriptors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
