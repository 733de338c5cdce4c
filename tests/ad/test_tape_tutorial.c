/*
 * docs/tutorial.md, compiled and run. Every ```c block of the tutorial appears in this
 * file verbatim (up to whitespace), which test_snippets_are_here checks, so every snippet
 * of the tutorial is compiled and run in CI; the tests below check what the tutorial says
 * its code prints, against finite differences of the plain C function.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

/* ---- The tutorial's code, in the tutorial's order ---------------------------------------- */

/* Tutorial, step 1: the function in plain C. */
static double softclip_c(double u)
{
    return u / sqrt(1.0 + u * u);
}

static const double T[4] = {-1.0, 0.0, 0.5, 2.0}; /* inputs  */
static const double Z[4] = {-0.5, 0.1, 0.3, 0.8}; /* targets */

/* loss(p) = sum_i (softclip(p0 * T[i] + p1) - Z[i])^2 */
static double loss_c(const double *p)
{
    double s = 0.0;
    for (int i = 0; i < 4; i++) {
        double e = softclip_c(p[0] * T[i] + p[1]) - Z[i];
        s += e * e;
    }
    return s;
}

/* Tutorial, step 2: the same function written against the engine. */
static cr_var softclip_t(cr_tape *t, cr_var u)
{
    return cr_div(t, u, cr_sqrt(t, cr_add(t, cr_const(1.0), cr_mul(t, u, u))));
}

static cr_status loss_t(cr_tape *t, const cr_var *p, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n, (void)m, (void)env;
    cr_var s = cr_const(0.0);
    for (int i = 0; i < 4; i++) {
        cr_var u = cr_add(t, cr_mul(t, p[0], cr_const(T[i])), p[1]);
        cr_var e = cr_sub(t, softclip_t(t, u), cr_const(Z[i]));
        s = cr_add(t, s, cr_mul(t, e, e));
    }
    y[0] = s;
    return cr_tape_status(t);
}

/* Tutorial, step 8: the same function through a recording cursor. */
static cr_status loss_rec(cr_tape *t, const cr_var *p, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n, (void)m, (void)env;
    cr_rec r;
    cr_rec_open(&r, t);
    cr_var s = cr_const(0.0);
    for (int i = 0; i < 4; i++) {
        cr_var u = cr_rec_add(&r, cr_rec_mul(&r, p[0], cr_const(T[i])), p[1]);
        cr_var q = cr_rec_call1(&r, cr_sqrt, cr_rec_add(&r, cr_const(1.0), cr_rec_mul(&r, u, u)));
        cr_var e = cr_rec_sub(&r, cr_rec_div(&r, u, q), cr_const(Z[i]));
        s = cr_rec_add(&r, s, cr_rec_mul(&r, e, e));
    }
    cr_rec_close(&r);
    y[0] = s;
    return cr_tape_status(t);
}

/* Tutorial, step 10: a scalar loop, logsumexp through its array rule, scalar code again. */
static cr_status lse_loss_t(cr_tape *t, const cr_var *p, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n, (void)m, (void)env;
    cr_var sq[4];
    for (int i = 0; i < 4; i++) {
        cr_var u = cr_add(t, cr_mul(t, p[0], cr_const(T[i])), p[1]);
        cr_var e = cr_sub(t, softclip_t(t, u), cr_const(Z[i]));
        sq[i] = cr_mul(t, e, e);
    }
    cr_avar E = cr_av_pack(t, sq, 4, NULL, 0); /* the four variables as a vector */
    cr_targ a = cr_targ_arr(E);
    cr_var lse = cr_tape_acall_s(t, &cr_fn_logsumexp, &a, 1);
    y[0] = cr_sub(t, lse, cr_av_getindex(t, E, 0)); /* back to scalar code */
    return cr_tape_status(t);
}

/* Tutorial, step 11: a mixture's log-likelihood, logsumexp inside the loop over points. */
static cr_status mix_loss_t(cr_tape *t, const cr_var *p, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n, (void)m, (void)env;
    cr_var prec = cr_exp(t, cr_mul(t, cr_const(2.0), p[1])); /* precision exp(2 p1) */
    cr_var s = cr_const(0.0);
    for (int i = 0; i < 4; i++) { /* the loop over points */
        cr_var term[3];
        for (int j = 0; j < 3; j++) { /* component j: mean p0 + j */
            cr_var d = cr_sub(t, cr_const(T[i]), cr_add(t, p[0], cr_const(j)));
            term[j] = cr_sub(t, p[1], cr_mul(t, cr_mul(t, cr_const(0.5), prec), cr_mul(t, d, d)));
        }
        cr_targ a = cr_targ_arr(cr_av_pack(t, term, 3, NULL, 0));
        s = cr_add(t, s, cr_tape_acall_s(t, &cr_fn_logsumexp, &a, 1)); /* log sum_j exp(term_j) */
    }
    y[0] = s;
    return cr_tape_status(t);
}

/* Tutorial, step 4: softclip as a function with its own rule. */
static cr_status softclip_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                 size_t nargs, cr_value *out)
{
    (void)arena, (void)f, (void)nargs;
    *out = cr_value_f64(softclip_c(args[0].u.f64));
    return CR_OK;
}

static const cr_function softclip_fn = {.name = "softclip", .arity = 1, .primal = softclip_primal};

/* d softclip / du = (1 + u^2)^(-3/2); the pullback keeps that number. The seed dy may
 * be any tangent of a real (a double, a zero, a thunk): cr_tangent_scale handles them. */
static cr_status softclip_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                   void *env)
{
    (void)nx;
    const double *d = env;
    dx[0] = cr_tangent_none(); /* softclip has no fields */
    return cr_tangent_scale(arena, *d, *dy, &dx[1]);
}

static cr_status softclip_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                const void *udata)
{
    (void)cfg, (void)udata;
    double u = args[0].u.f64;
    double *d = cr_arena_alloc(arena, sizeof *d, _Alignof(double));
    if (d == NULL)
        return CR_ENOMEM;
    *d = pow(1.0 + u * u, -1.5);
    *pb = (cr_pullback){softclip_pullback, d, "softclip_pullback", 2};
    return softclip_primal(arena, f, args, nargs, y);
}

/* softclip as a value, to pass to calls */
static const cr_value softclip = {.kind = CR_KIND_FUNC, .u.func = {&softclip_fn, NULL}};

/* Tutorial, step 5: the loss calls the primitive instead of its pieces. */
static cr_status loss_p(cr_tape *t, const cr_var *p, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n, (void)m, (void)env;
    cr_var s = cr_const(0.0);
    for (int i = 0; i < 4; i++) {
        cr_var u = cr_add(t, cr_mul(t, p[0], cr_const(T[i])), p[1]);
        cr_var e = cr_sub(t, cr_tape_call1(t, &softclip, &u, 1), cr_const(Z[i]));
        s = cr_add(t, s, cr_mul(t, e, e));
    }
    y[0] = s;
    return cr_tape_status(t);
}

/* The tutorial's main(), as a function returning what it printed. */
typedef struct results {
    double y, grad[2];  /* step 3 */
    double fd[2];       /* step 3, finite differences */
    cr_verdict verdict; /* step 4, the rule tester */
    double grad_p[2];   /* step 5 */
    cr_status bad;      /* step 6 */
    char msg[256];
} results;

static int tutorial_main(results *r)
{
    /* Step 3: the gradient. */
    cr_ctx *ctx;
    cr_tape *t;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_tape_new(ctx, NULL, &t) != CR_OK)
        return 1;

    double p[2] = {0.7, -0.2}, y, grad[2];
    if (cr_tape_value_and_gradient(t, loss_t, NULL, p, 2, &y, grad) != CR_OK) {
        fprintf(stderr, "%s\n", cr_tape_errmsg(t));
        return 1;
    }
    printf("loss = %.6f, gradient = (%.6f, %.6f)\n", y, grad[0], grad[1]);

    r->y = y;
    r->grad[0] = grad[0];
    r->grad[1] = grad[1];
    cr_arena *arena;
    if (cr_arena_new(ctx, NULL, &arena) != CR_OK)
        return 1;

    /* Check the rule with the rule tester before using it. */
    cr_value u0 = cr_value_f64(0.8);
    cr_test_report rep;
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &softclip_fn,
                       .nargs = 1,
                       .args = (const cr_argspec[]){CR_ARG_F64},
                       .rrule = softclip_rrule};
    cr_engine *eng;
    if (cr_engine_new(ctx, NULL, &eng) != CR_OK || cr_engine_from_rrule(eng, &def) != CR_OK)
        return 1;
    cr_test_opts opts = {.struct_size = sizeof opts, .cfg = cr_engine_config(eng)};
    if (cr_test_rrule(arena, &opts, &softclip, &u0, 1, &rep) != CR_OK)
        return 1;
    printf("test_rrule(softclip): %s %s\n", cr_verdict_name(rep.verdict), rep.message);

    r->verdict = rep.verdict;
    /* Step 5: a tape with the engine. */
    cr_tape *te;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    if (cr_tape_new(ctx, &tp, &te) != CR_OK ||
        cr_tape_value_and_gradient(te, loss_p, NULL, p, 2, &y, grad) != CR_OK)
        return 1;
    printf("with the rule: gradient = (%.6f, %.6f)\n", grad[0], grad[1]);

    r->grad_p[0] = grad[0];
    r->grad_p[1] = grad[1];
    /* Step 6: mistakes are reported. */
    cr_tape_reset(t);
    cr_var a = cr_tape_input(t, 1.0);
    cr_var b = cr_tape_call1(t, &softclip, &a, 1); /* t has no engine: no rule */
    cr_var c = cr_mul(t, b, a);                    /* does nothing: t has failed */
    if (cr_tape_status(t) != CR_OK)
        printf("%s: %s\n", cr_status_name(cr_tape_status(t)), cr_tape_errmsg(t));

    r->bad = cr_tape_status(t);
    snprintf(r->msg, sizeof r->msg, "%s", cr_tape_errmsg(t));
    (void)c;
    /* Step 7: release everything (tapes before their engine, all before the context). */
    cr_tape_free(te);
    cr_tape_free(t);
    cr_engine_free(eng);
    cr_arena_free(arena);
    cr_ctx_free(ctx);
    return 0;
}

/* ---- Tests ----------------------------------------------------------------------------------- */

static cr_status loss_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n, (void)m, (void)env;
    y[0] = loss_c(x);
    return CR_OK;
}

static void test_tutorial_runs(void **state)
{
    fixture *f = *state;
    results r;
    memset(&r, 0, sizeof r);
    assert_int_equal(tutorial_main(&r), 0);
    const double p[2] = {0.7, -0.2};
    cr_fdm m;
    double fd[2];
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, loss_fd, NULL, p, 2, 1, f->arena, fd, NULL), CR_OK);
    assert_true(fabs(r.y - loss_c(p)) < 1e-14);
    for (int j = 0; j < 2; j++) {
        assert_true(fabs(r.grad[j] - fd[j]) < 1e-8);
        assert_true(fabs(r.grad_p[j] - fd[j]) < 1e-8);
    }
    assert_int_equal(r.verdict, CR_VERDICT_PASS);
    assert_int_equal(r.bad, CR_ENORULE);
    assert_non_null(strstr(r.msg, "softclip(f64)"));
}

#ifdef CR_TUTORIAL_AD
/* Step 9: the plain C differentiated by chainrules-ad (tests/tutorial_model.c, written at
 * build time) gives step 3's gradient. */
double loss_model_rev(const double *p, double *p_b, double loss_model_b); /* generated */

static void test_source_transformation(void **state)
{
    fixture *f = *state;
    double p_st[2] = {0.7, -0.2}, grad_st[2] = {0.0, 0.0};
    double value_st = loss_model_rev(p_st, grad_st, 1.0);
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    double y, grad[2];
    assert_int_equal(cr_tape_value_and_gradient(t, loss_t, NULL, p_st, 2, &y, grad), CR_OK);
    assert_true(fabs(value_st - y) < 1e-14);
    for (int j = 0; j < 2; j++)
        assert_true(fabs(grad_st[j] - grad[j]) < 1e-13);
    cr_tape_free(t);
}
#endif

/* Step 8: the cursor's recording gives the gradient of step 3 (the same records), which
 * agrees with finite differences. */
static void test_cursor_loss(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    const double p[2] = {0.7, -0.2};
    double y, yr, g[2], gr[2], fd[2];
    assert_int_equal(cr_tape_value_and_gradient(t, loss_t, NULL, p, 2, &y, g), CR_OK);
    assert_int_equal(cr_tape_value_and_gradient(t, loss_rec, NULL, p, 2, &yr, gr), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, loss_fd, NULL, p, 2, 1, f->arena, fd, NULL), CR_OK);
    assert_true(yr == y);
    for (int j = 0; j < 2; j++) {
        assert_true(gr[j] == g[j]);
        assert_true(fabs(gr[j] - fd[j]) < 1e-8);
    }
    cr_tape_free(t);
}

/* Step 10: lse(e_i^2) - e_0^2 in plain C, for finite differences. */
static cr_status lse_loss_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n, (void)m, (void)env;
    double sq[4], mx = -INFINITY, s = 0.0;
    for (int i = 0; i < 4; i++) {
        double e = softclip_c(x[0] * T[i] + x[1]) - Z[i];
        sq[i] = e * e;
        mx = fmax(mx, sq[i]);
    }
    for (int i = 0; i < 4; i++)
        s += exp(sq[i] - mx);
    y[0] = mx + log(s) - sq[0];
    return CR_OK;
}

/* Step 10: the packed loss's value and gradient agree with finite differences. */
static void test_lse_loss(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    const double p[2] = {0.7, -0.2};
    double y, yc, g[2], fd[2];
    assert_ok(t, cr_tape_value_and_gradient(t, lse_loss_t, NULL, p, 2, &y, g));
    assert_int_equal(lse_loss_fd(p, 2, &yc, 1, NULL), CR_OK);
    assert_true(fabs(y - yc) < 1e-14);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, lse_loss_fd, NULL, p, 2, 1, f->arena, fd, NULL),
                     CR_OK);
    for (int j = 0; j < 2; j++)
        assert_true(fabs(g[j] - fd[j]) < 1e-8);
    cr_tape_free(t);
}

/* Step 11: the mixture's log-likelihood in plain C, for finite differences. */
static cr_status mix_loss_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n, (void)m, (void)env;
    double s = 0.0, prec = exp(2 * x[1]);
    for (int i = 0; i < 4; i++) {
        double term[3], mx = -INFINITY, e = 0.0;
        for (int j = 0; j < 3; j++) {
            double d = T[i] - (x[0] + j);
            term[j] = x[1] - 0.5 * prec * d * d;
            mx = fmax(mx, term[j]);
        }
        for (int j = 0; j < 3; j++)
            e += exp(term[j] - mx);
        s += mx + log(e);
    }
    y[0] = s;
    return CR_OK;
}

/* Step 11: the mixture's value and gradient agree with finite differences. */
static void test_mix_loss(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    const double p[2] = {0.7, -0.2};
    double y, yc, g[2], fd[2];
    assert_ok(t, cr_tape_value_and_gradient(t, mix_loss_t, NULL, p, 2, &y, g));
    assert_int_equal(mix_loss_fd(p, 2, &yc, 1, NULL), CR_OK);
    assert_true(fabs(y - yc) < 1e-14);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, mix_loss_fd, NULL, p, 2, 1, f->arena, fd, NULL),
                     CR_OK);
    for (int j = 0; j < 2; j++)
        assert_true(fabs(g[j] - fd[j]) < 1e-8);
    cr_tape_free(t);
}

/* Whitespace-collapsed copy of s[0..n) into out. */
static size_t squash(const char *s, size_t n, char *out)
{
    size_t k = 0;
    bool space = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') {
            space = k > 0;
            continue;
        }
        if (space)
            out[k++] = ' ';
        space = false;
        out[k++] = ch;
    }
    out[k] = '\0';
    return k;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (buf != NULL && fread(buf, 1, (size_t)len, fp) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    if (buf != NULL)
        buf[len] = '\0';
    *n = (size_t)len;
    return buf;
}

static void test_snippets_are_here(void **state)
{
    (void)state;
    const char *dir = getenv("CR_TEST_SRCDIR");
    if (dir == NULL)
        dir = "tests"; /* run from the source tree */
    char path[1024];
    size_t nmd, nsrc;
    snprintf(path, sizeof path, "%s/../docs/tutorial.md", dir);
    char *md = slurp(path, &nmd);
    snprintf(path, sizeof path, "%s/ad/test_tape_tutorial.c", dir);
    char *src = slurp(path, &nsrc);
    if (md == NULL || src == NULL) {
        print_error("cannot read docs/tutorial.md or tests/ad/test_tape_tutorial.c from %s\n", dir);
        fail();
    }
    char *flat = malloc(nsrc + 1), *snip = malloc(nmd + 1);
    assert_non_null(flat);
    assert_non_null(snip);
    squash(src, nsrc, flat);
    size_t nsnip = 0;
    for (const char *p = strstr(md, "```c\n"); p != NULL; p = strstr(p, "```c\n")) {
        p += 5;
        const char *e = strstr(p, "```");
        assert_non_null(e);
        squash(p, (size_t)(e - p), snip);
        if (strstr(flat, snip) == NULL) {
            print_error("tutorial snippet not in tests/ad/test_tape_tutorial.c:\n%.*s\n",
                        (int)(e - p), p);
            fail();
        }
        nsnip++;
        p = e + 3;
    }
    assert_true(nsnip >= 6);
    free(flat);
    free(snip);
    free(md);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tutorial_runs, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_snippets_are_here),
        cmocka_unit_test_setup_teardown(test_cursor_loss, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_lse_loss, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_mix_loss, fixture_setup, fixture_teardown),
#ifdef CR_TUTORIAL_AD
        cmocka_unit_test_setup_teardown(test_source_transformation, fixture_setup,
                                        fixture_teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
