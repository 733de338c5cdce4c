/*
 * The C API used from C++ (C++11, no extensions): the structs with unions can be declared
 * without an initialiser (arrays of them too); a complex member of those unions converts
 * to and from std::complex<double> with the value C sees; a complex frule and a tape's
 * gradient give what finite differences of the same function written in C++ give; the
 * value stack's inline push and pop (compiled as C++) keep the order of mixed items over
 * chunk boundaries, and a revolve schedule runs every adjoint step once, in reverse order.
 * Exit status 0 when every check holds; each failed check prints one line.
 */
#include <chainrules.h>

#include <cmath>
#include <complex>
#include <cstdio>

static int g_failed = 0;

/* An inline dual type defined in C++ (dual_inline.h). */
CR_DUALN_DEFINE(cxx_dual2, 2);

static void check(bool ok, const char *what)
{
    if (!ok) {
        std::printf("FAILED: %s\n", what);
        g_failed++;
    }
}

static bool close(double a, double b, double rtol)
{
    return std::fabs(a - b) <= rtol * (std::fabs(a) + std::fabs(b) + 1e-300);
}

static double f_plain(const double *x)
{
    return std::sin(x[0]) * x[1] + std::exp(x[0] / x[1]);
}

static cr_status f_taped(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_add(t, cr_mul(t, cr_sin(t, x[0]), x[1]), cr_exp(t, cr_div(t, x[0], x[1])));
    return cr_tape_status(t);
}

int main()
{
    /* Declarations without initialisers, and the complex member through std::complex. */
    cr_value vals[3];
    cr_tangent tans[2];
    vals[0] = cr_value_f64(2.0);
    vals[1] = cr_value_c128(std::complex<double>(1.5, -2.0));
    std::complex<double> z = vals[1].u.c128;
    check(vals[1].kind == CR_KIND_C128 && z == std::complex<double>(1.5, -2.0),
          "cr_value_c128 read back as std::complex");
    vals[2] = vals[1];
    vals[2].u.c128 = std::complex<double>(3.0, 4.0);
    check(std::abs(std::complex<double>(vals[2].u.c128)) == 5.0, "a complex member assigned");
    tans[0] = cr_tangent_c128(std::complex<double>(0.25, 0.5));
    tans[1] = tans[0];
    check(std::complex<double>(tans[1].u.c128) == std::complex<double>(0.25, 0.5),
          "cr_tangent_c128 read back");

    cr_ctx *ctx = NULL;
    cr_arena *arena = NULL;
    check(cr_ctx_new(NULL, &ctx) == CR_OK && cr_arena_new(ctx, NULL, &arena) == CR_OK,
          "context and arena");

    /* exp's frule at a complex point: the value, and the tangent against central
     * differences of std::exp along the tangent. */
    cr_tangent dargs[2];
    dargs[0] = cr_tangent_none();
    dargs[1] = tans[0];
    cr_value y;
    cr_tangent dy;
    check(cr_frule(NULL, arena, dargs, &cr_fn_exp, &vals[1], 1, &y, &dy) == CR_OK, "exp frule");
    std::complex<double> dz(0.25, 0.5), want = std::exp(z), h = 1e-6;
    std::complex<double> fd = (std::exp(z + h * dz) - std::exp(z - h * dz)) / (2.0 * h);
    std::complex<double> got = y.u.c128, gotd = dy.u.c128;
    check(std::abs(got - want) <= 1e-15 * std::abs(want), "exp frule value");
    check(std::abs(gotd - fd) <= 1e-8 * std::abs(fd), "exp frule tangent");

    /* A gradient on a tape, against central differences. */
    cr_tape *t = NULL;
    check(cr_tape_new(ctx, NULL, &t) == CR_OK, "tape");
    const double x[2] = {0.7, 1.3};
    double val = 0.0, g[2] = {0.0, 0.0};
    check(cr_tape_value_and_gradient(t, f_taped, NULL, x, 2, &val, g) == CR_OK,
          "value and gradient");
    check(close(val, f_plain(x), 1e-15), "value");
    for (int j = 0; j < 2; j++) {
        double xp[2] = {x[0], x[1]}, xm[2] = {x[0], x[1]}, e = 1e-6;
        xp[j] += e;
        xm[j] -= e;
        check(close(g[j], (f_plain(xp) - f_plain(xm)) / (2 * e), 1e-8), "gradient");
    }
    cr_tape_free(t);
    cr_arena_free(arena);
    cr_ctx_free(ctx);

    /* The value stack's inline functions as C++: 10^5 mixed items, LIFO. */
    cr_adstack st;
    cr_adstack_init(&st);
    for (int i = 0; i < 100000; i++) {
        cr_adstack_push_f64(&st, 0.5 * i);
        cr_adstack_push_i64(&st, -i);
        cr_adstack_push_f32(&st, static_cast<float>(i));
        cr_adstack_push_ptr(&st, &st);
    }
    bool lifo = cr_adstack_bytes(&st) == 400000u * 8u;
    for (int i = 100000; i-- > 0;) {
        lifo = lifo && cr_adstack_pop_ptr(&st) == static_cast<void *>(&st);
        lifo = lifo && cr_adstack_pop_f32(&st) == static_cast<float>(i);
        lifo = lifo && cr_adstack_pop_i64(&st) == -i;
        lifo = lifo && cr_adstack_pop_f64(&st) == 0.5 * i;
    }
    check(lifo && !cr_adstack_failed(&st), "value stack from C++");
    check(std::isnan(cr_adstack_pop_f64(&st)) && cr_adstack_failed(&st), "empty pop");
    cr_adstack_deinit(&st);

    /* A revolve schedule: the adjoint steps 999 .. 0, once each. */
    cr_revolve rv;
    cr_revolve_op op;
    check(cr_revolve_init(&rv, 1000, 5) == CR_OK, "revolve init");
    int64_t next = 999, forward = 0;
    cr_revolve_action a;
    while ((a = cr_revolve_next(&rv, &op)) != CR_REVOLVE_DONE && a != CR_REVOLVE_FAILED) {
        if (a == CR_REVOLVE_ADVANCE)
            forward += op.end - op.step;
        if (a == CR_REVOLVE_REVERSE) {
            check(op.step == next, "revolve order");
            next--;
            forward++;
        }
    }
    check(a == CR_REVOLVE_DONE && next == -1, "revolve done");
    check(forward == cr_revolve_forward_steps(1000, 5), "revolve forward steps");
    /* Inline duals compiled as C++: the gradient of x0 tanh(x1) + hypot(x0, x1) against
     * central differences, on the compile-time form (in one evaluation and in two stages)
     * and the one-direction form. */
    {
        const double p[2] = {0.7, -1.3};
        cxx_dual2 a = cxx_dual2_var(p[0], 0), b = cxx_dual2_var(p[1], 1);
        cxx_dual2 r = cxx_dual2_add(cxx_dual2_mul(a, cxx_dual2_tanh(b)), cxx_dual2_hypot(a, b));
        /* the same in two stages composed by cxx_dual2_chain */
        cxx_dual2 u[2] = {cxx_dual2_mul(a, cxx_dual2_tanh(b)), cxx_dual2_hypot(a, b)};
        cxx_dual2 s = cxx_dual2_add(cxx_dual2_var(u[0].v, 0), cxx_dual2_var(u[1].v, 1));
        cxx_dual2 g = cxx_dual2_chain(s.v, 2, s.d, u);
        const double e = 1e-6;
        for (int j = 0; j < 2; j++) {
            double pp[2] = {p[0], p[1]}, pm[2] = {p[0], p[1]};
            pp[j] += e;
            pm[j] -= e;
            double fp = pp[0] * std::tanh(pp[1]) + std::hypot(pp[0], pp[1]);
            double fm = pm[0] * std::tanh(pm[1]) + std::hypot(pm[0], pm[1]);
            double fd = (fp - fm) / (2 * e);
            check(close(r.d[j], fd, 1e-8), "inline dual gradient");
            check(close(g.d[j], fd, 1e-8), "inline dual gradient in stages");
            cr_dual1 a1 = cr_dual1_make(p[0], j == 0), b1 = cr_dual1_make(p[1], j == 1);
            cr_dual1 r1 = cr_dual1_add(cr_dual1_mul(a1, cr_dual1_tanh(b1)), cr_dual1_hypot(a1, b1));
            check(close(r1.d, fd, 1e-8), "inline dual1 derivative");
        }
    }
    if (g_failed == 0)
        std::printf("all C++ checks passed\n");
    return g_failed == 0 ? 0 : 1;
}
