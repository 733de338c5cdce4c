/*
 * The <complex.h> rule family. Holomorphic functions are complex rows (value and f'(z)
 * written once; frule multiplies by f'(z), the pullback by conj(f'(z))); cabs, carg, conj,
 * creal, cimag, cproj and abs2 are written by hand from their real Jacobian. Arguments
 * convert to double complex as in C. Branch cuts and signed zeros follow C99 Annex G.
 */
#include <stdint.h>
#include <string.h>

#include <chainrules/rules_complex.h>

#include "rows_impl.h"

/* ---- Helpers ----------------------------------------------------------------------------- */

/* 1 - z and 1 + z, exact in the signs of zero: clang computes `1 - z` as (1 + 0i) - z,
 * which loses the sign of a zero imaginary part, and the sign chooses the branch. */
static inline cr_complex one_minus(cr_complex z)
{
    return cr__c(1.0 - creal(z), -cimag(z));
}

static inline cr_complex one_plus(cr_complex z)
{
    return cr__c(1.0 + creal(z), cimag(z));
}

/* i·z, exactly. */
static inline cr_complex times_i(cr_complex z)
{
    return cr__c(-cimag(z), creal(z));
}

/* An argument converted to double complex, as C converts it; CR_EINVAL for non-numbers. */
static cr_status arg_complex(cr_arena *arena, const char *name, const cr_value *v, size_t j,
                             cr_complex *z)
{
    if (!cr__value_number(v, z)) /* *z = 0 then: callers read it only on success */
        return CR__FAIL(arena, CR_EINVAL, "%s: argument %zu is a %s, not a number", name, j + 1,
                        cr_kind_name(v->kind));
    return CR_OK;
}

/* The number carried by a scalar tangent (unthunked); *nonzero is false for the zeros. */
static cr_status tangent_number(cr_arena *arena, const char *who, cr_tangent t, cr_complex *v,
                                bool *nonzero)
{
    return cr__tangent_scalar(arena, who, t, v, nonzero);
}

/* The tangent of argument j for the frule: zero for integers (NoTangent primal). */
static cr_status arg_tangent(cr_arena *arena, const char *who, const cr_tangent *dargs,
                             const cr_value *args, size_t j, cr_complex *v, bool *nonzero)
{
    cr_status st = tangent_number(arena, who, dargs[j + 1], v, nonzero);
    if (st == CR_OK && cr__is_int_kind(args[j].kind)) {
        *nonzero = false;
        *v = 0.0;
    }
    return st;
}

/* ProjectTo the argument's kind: a real argument keeps the real part of its cotangent. */
static cr_tangent project_to(uint8_t kind, cr_complex g)
{
    return kind == CR_KIND_C128 ? cr_tangent_c128(g) : cr__project_real((cr_kind)kind, creal(g));
}

/* ---- Test registration: sampling boxes that keep away from cuts and poles --------------- */

/* Where a function's derivative is not continuous (or does not exist). */
enum cut {
    CUT_NONE,         /* entire */
    CUT_NEG_REAL,     /* clog, csqrt, cpow in z, carg: re z <= 0, im z = 0 */
    CUT_REAL_OUTSIDE, /* casin, cacos, catanh: |re z| >= 1, im z = 0 */
    CUT_IMAG_OUTSIDE, /* catan, casinh: |im z| >= 1, re z = 0 */
    CUT_REAL_BELOW,   /* cacosh: re z <= 1, im z = 0 */
    CUT_POLES_REAL,   /* ctan: poles at pi/2 + k pi */
    CUT_POLES_IMAG,   /* ctanh: poles at i (pi/2 + k pi) */
    CUT_ORIGIN        /* cinv, cabs: z = 0 */
};

#define SAMPLE_MARGIN  0.2
#define SAMPLE_HALF_PI 1.5707963267948966

static double sample_uniform(uint64_t *rng, double lo, double hi)
{
    /* splitmix64 */
    uint64_t s = (*rng += 0x9E3779B97F4A7C15u);
    s = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9u;
    s = (s ^ (s >> 27)) * 0x94D049BB133111EBu;
    s ^= s >> 31;
    return lo + (hi - lo) * ((double)(s >> 11) * 0x1.0p-53);
}

/* Distance from pi/2 + k pi (the poles of tan on the real axis). */
static double pole_distance(double t)
{
    double u = fmod(fabs(t) - SAMPLE_HALF_PI, 2 * SAMPLE_HALF_PI);
    return fmin(fabs(u), 2 * SAMPLE_HALF_PI - fabs(u));
}

static bool near_cut(enum cut c, cr_complex z)
{
    double x = creal(z), y = cimag(z), m = SAMPLE_MARGIN;
    switch (c) {
    case CUT_NONE:
        return false;
    case CUT_NEG_REAL:
        return fabs(y) < m && x < m;
    case CUT_REAL_OUTSIDE:
        return fabs(y) < m && fabs(x) > 1 - m;
    case CUT_IMAG_OUTSIDE:
        return fabs(x) < m && fabs(y) > 1 - m;
    case CUT_REAL_BELOW:
        return fabs(y) < m && x < 1 + m;
    case CUT_POLES_REAL:
        return fabs(y) < m && pole_distance(x) < m;
    case CUT_POLES_IMAG:
        return fabs(x) < m && pole_distance(y) < m;
    case CUT_ORIGIN:
        return cabs(z) < m;
    }
    return false;
}

/* Complex arguments in [-2, 2] + [-2, 2]i; the first keeps away from the cut (env). */
static cr_status complex_sample(CR__SAMPLE_PARAMS)
{
    enum cut c = (enum cut)(uintptr_t)env;
    for (size_t j = 0; j < nargs; j++) {
        cr_complex z;
        do {
            z = cr__c(sample_uniform(rng, -2, 2), sample_uniform(rng, -2, 2));
        } while (j == 0 && near_cut(c, z));
        args[j] = cr_value_c128(z);
    }
    return CR_OK;
}

#define SAMPLER(CUT)                                              \
    {                                                             \
        .sample = complex_sample, .env = (void *)(uintptr_t)(CUT) \
    }

static const cr_rule_test k_test_none = SAMPLER(CUT_NONE);
static const cr_rule_test k_test_neg_real = SAMPLER(CUT_NEG_REAL);
static const cr_rule_test k_test_real_outside = SAMPLER(CUT_REAL_OUTSIDE);
static const cr_rule_test k_test_imag_outside = SAMPLER(CUT_IMAG_OUTSIDE);
static const cr_rule_test k_test_real_below = SAMPLER(CUT_REAL_BELOW);
static const cr_rule_test k_test_poles_real = SAMPLER(CUT_POLES_REAL);
static const cr_rule_test k_test_poles_imag = SAMPLER(CUT_POLES_IMAG);
static const cr_rule_test k_test_origin = SAMPLER(CUT_ORIGIN);

/* ---- Complex rows: holomorphic functions ------------------------------------------------ */

/* A complex row: the value Y[0] = f(x...) and, when D is not NULL, the holomorphic
 * partials D[j] = ∂f/∂x[j] (not conjugated: the pullback conjugates). */
typedef void (*crow_eval)(const cr_complex *x, cr_complex *Y, cr_complex *D);

typedef struct crow {
    const char *name;
    size_t nin;
    crow_eval eval;
    const char *pullback_name;
} crow;

#define CROW_MAX_IN 2

static cr_status crow_args(cr_arena *arena, const crow *row, const cr_value *args, size_t nargs,
                           cr_complex *x)
{
    for (size_t j = 0; j < row->nin; j++)
        x[j] = 0;
    if (nargs != row->nin)
        return CR__FAIL(arena, CR_EINVAL, "%s takes %zu argument%s, %zu given", row->name, row->nin,
                        CR__S(row->nin), nargs);
    for (size_t j = 0; j < nargs; j++) {
        cr_status st = arg_complex(arena, row->name, &args[j], j, &x[j]);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status crow_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                             cr_value *out)
{
    const crow *row = f->u.func.fn->udata;
    cr_complex x[CROW_MAX_IN], y;
    cr_status st = crow_args(arena, row, args, nargs, x);
    if (st != CR_OK)
        return st;
    row->eval(x, &y, NULL);
    *out = cr_value_c128(y);
    return CR_OK;
}

static cr_status crow_frule(CR__FRULE_PARAMS)
{
    const crow *row = udata;
    cr_complex x[CROW_MAX_IN], Y, D[CROW_MAX_IN], acc = 0.0;
    cr_status st = crow_args(arena, row, args, nargs, x);
    if (st != CR_OK)
        return st;
    bool any = false;
    cr_complex xd[CROW_MAX_IN];
    bool nz[CROW_MAX_IN];
    for (size_t j = 0; j < nargs; j++) {
        st = arg_tangent(arena, row->name, dargs, args, j, &xd[j], &nz[j]);
        if (st != CR_OK)
            return st;
        any = any || nz[j];
    }
    row->eval(x, &Y, D);
    for (size_t j = 0; j < nargs; j++)
        if (nz[j])
            acc += D[j] * xd[j];
    *y = cr_value_c128(Y);
    *dy = any ? cr_tangent_c128(acc) : cr_tangent_zero();
    return CR_OK;
}

typedef struct crow_env {
    const crow *row;
    uint8_t kinds[CROW_MAX_IN];
    cr_complex D[CROW_MAX_IN];
} crow_env;

/* Jᵀ·ȳ for a holomorphic f: conj(∂f/∂x[j])·ȳ, projected onto argument j. */
static cr_status crow_pullback(CR__PULLBACK_PARAMS)
{
    const crow_env *e = env;
    cr_complex g;
    bool nz;
    cr_status st = tangent_number(arena, e->row->pullback_name, *dy, &g, &nz);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    for (size_t j = 0; j + 1 < nx; j++)
        dx[j + 1] = cr__is_int_kind((cr_kind)e->kinds[j]) ? cr_tangent_none()
                    : nz ? project_to(e->kinds[j], conj(e->D[j]) * g)
                         : cr_tangent_zero();
    return CR_OK;
}

static cr_status crow_rrule(CR__RRULE_PARAMS)
{
    const crow *row = udata;
    cr_complex x[CROW_MAX_IN], Y;
    cr_status st = crow_args(arena, row, args, nargs, x);
    if (st != CR_OK)
        return st;
    CR__ARENA_NEW(arena, crow_env, e);
    e->row = row;
    for (size_t j = 0; j < nargs; j++)
        e->kinds[j] = (uint8_t)args[j].kind;
    row->eval(x, &Y, e->D);
    *y = cr_value_c128(Y);
    pb->fn = crow_pullback;
    pb->env = e;
    pb->name = row->pullback_name;
    pb->nx = nargs + 1;
    return CR_OK;
}

/* Defines the row of the C function NAME with NIN complex inputs x[j]: PRIMAL sets Y[0],
 * PARTIALS set D[j] (skipped when D is NULL, for the primal alone); exports cr_fn_NAME. */
#define COMPLEX_ROW(NAME, NIN, PRIMAL, PARTIALS)                                   \
    static void NAME##_eval(const cr_complex *x, cr_complex *Y, cr_complex *D)     \
    {                                                                              \
        PRIMAL;                                                                    \
        if (D != NULL) {                                                           \
            PARTIALS;                                                              \
        }                                                                          \
    }                                                                              \
    static const crow NAME##_row = {#NAME, NIN, NAME##_eval, #NAME "_pullback"};   \
    static const cr_function NAME##_function = {                                   \
        .name = #NAME, .arity = NIN, .primal = crow_primal, .udata = &NAME##_row}; \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

/* Trigonometric. tan' = 1 + tan² cancels to nothing when |im z| is large (tan z -> ±i);
 * 1/cos² keeps full relative accuracy there and is the same function. */
COMPLEX_ROW(csin, 1, Y[0] = csin(x[0]), D[0] = ccos(x[0]))
COMPLEX_ROW(ccos, 1, Y[0] = ccos(x[0]), D[0] = -csin(x[0]))
COMPLEX_ROW(ctan, 1, Y[0] = ctan(x[0]), cr_complex c = ccos(x[0]); D[0] = 1 / (c * c))

/* Inverse trigonometric. 1 - z² is written (1 - z)(1 + z): exact factors near the branch
 * points ±1 (no cancellation), and on the cuts |re z| > 1 the product carries the sign of
 * the zero imaginary part into csqrt, so the derivative is the one from the side C's
 * casin takes there. catan's 1 + z² is (z - i)(z + i), exact near ±i. */
COMPLEX_ROW(casin, 1, Y[0] = casin(x[0]), D[0] = 1 / csqrt(one_minus(x[0]) * one_plus(x[0])))
COMPLEX_ROW(cacos, 1, Y[0] = cacos(x[0]), D[0] = -1 / csqrt(one_minus(x[0]) * one_plus(x[0])))
COMPLEX_ROW(catan, 1, Y[0] = catan(x[0]),
            D[0] = 1 / ((x[0] - cr__c(0.0, 1.0)) * (x[0] + cr__c(0.0, 1.0))))

/* Hyperbolic; tanh' = 1/cosh² for the same reason as tan. */
COMPLEX_ROW(csinh, 1, Y[0] = csinh(x[0]), D[0] = ccosh(x[0]))
COMPLEX_ROW(ccosh, 1, Y[0] = ccosh(x[0]), D[0] = csinh(x[0]))
COMPLEX_ROW(ctanh, 1, Y[0] = ctanh(x[0]), cr_complex c = ccosh(x[0]); D[0] = 1 / (c * c))

/* Inverse hyperbolic. casinh(z) = -i casin(iz) (C99's definition, signed zeros included),
 * so casinh'(z) = casin'(iz) with iz formed exactly. cacosh' is 1/(sqrt(z-1) sqrt(z+1)),
 * the product of two principal roots (not sqrt(z² - 1), which has the wrong sign on half
 * the plane). */
COMPLEX_ROW(casinh, 1, Y[0] = casinh(x[0]), cr_complex w = times_i(x[0]);
            D[0] = 1 / csqrt(one_minus(w) * one_plus(w)))
COMPLEX_ROW(cacosh, 1, Y[0] = cacosh(x[0]),
            D[0] = 1 / (csqrt(cr__c(creal(x[0]) - 1.0, cimag(x[0]))) *
                        csqrt(cr__c(creal(x[0]) + 1.0, cimag(x[0])))))
COMPLEX_ROW(catanh, 1, Y[0] = catanh(x[0]), D[0] = 1 / (one_minus(x[0]) * one_plus(x[0])))

/* Exponential, logarithm, roots, powers. */
COMPLEX_ROW(cexp, 1, Y[0] = cexp(x[0]), D[0] = Y[0])
COMPLEX_ROW(clog, 1, Y[0] = clog(x[0]), D[0] = 1 / x[0])
COMPLEX_ROW(csqrt, 1, Y[0] = csqrt(x[0]), D[0] = 1 / (2 * Y[0]))
COMPLEX_ROW(cinv, 1, Y[0] = 1 / x[0], D[0] = -(Y[0] * Y[0]))

/* cpow(z, w) = exp(w log z): ∂/∂z = w z^(w-1) = wΩ/z on the same branch as Ω, and
 * ∂/∂w = Ω log z. At z = 0 the limits are used where they exist (ChainRules' _pow_grad_x
 * and _pow_grad_p for real arguments). */
static cr_complex cpow_dz(cr_complex z, cr_complex w, cr_complex y)
{
    if (z != 0)
        return w * y / z;
    if (w == 1)
        return 1.0;
    return creal(w) > 1 ? 0.0 : (double)NAN;
}

static cr_complex cpow_dw(cr_complex z, cr_complex w, cr_complex y)
{
    if (z != 0)
        return y * clog(z);
    return creal(w) > 0 ? 0.0 : (double)NAN;
}

COMPLEX_ROW(cpow, 2, Y[0] = cpow(x[0], x[1]), D[0] = cpow_dz(x[0], x[1], Y[0]);
            D[1] = cpow_dw(x[0], x[1], Y[0]))

/* A function and its test registration. */
typedef struct fn_test {
    const cr_function *fn;
    const cr_rule_test *test;
} fn_test;

static const fn_test k_rows[] = {
    {&csin_function, &k_test_none},          {&ccos_function, &k_test_none},
    {&ctan_function, &k_test_poles_real},    {&casin_function, &k_test_real_outside},
    {&cacos_function, &k_test_real_outside}, {&catan_function, &k_test_imag_outside},
    {&csinh_function, &k_test_none},         {&ccosh_function, &k_test_none},
    {&ctanh_function, &k_test_poles_imag},   {&casinh_function, &k_test_imag_outside},
    {&cacosh_function, &k_test_real_below},  {&catanh_function, &k_test_real_outside},
    {&cexp_function, &k_test_none},          {&clog_function, &k_test_neg_real},
    {&csqrt_function, &k_test_neg_real},     {&cinv_function, &k_test_origin},
    {&cpow_function, &k_test_neg_real},
};

/* ---- Non-holomorphic functions ----------------------------------------------------------- */

/* Each is derived from its real Jacobian J (z = x + iy seen as (x, y)): the frule is J·ż,
 * the pullback Jᵀ·ȳ. A real output's cotangent contributes through its real part only. */

/* A non-holomorphic function of one argument, derived from its real Jacobian J: its value,
 * J·t and Jᵀ·g, the last two written as complex numbers (a real output's tangent is the real
 * part of jvp; its cotangent g has a zero imaginary part). */
typedef struct zfun {
    const char *name, *pullback_name;
    bool real_out;
    cr_complex (*value)(cr_complex z);
    cr_complex (*jvp)(cr_complex z, cr_complex t);
    cr_complex (*vjp)(cr_complex z, cr_complex g);
    bool (*flat)(cr_complex z); /* NULL, or true where J is zero (ZeroTangent) */
} zfun;

typedef struct z_env {
    const zfun *fn;
    cr_complex z;
    uint8_t kind;
} z_env;

/* The single argument as a complex number. */
static cr_status one_arg(cr_arena *arena, const char *name, const cr_value *args, size_t nargs,
                         cr_complex *z)
{
    *z = 0;
    if (nargs != 1)
        return CR__FAIL(arena, CR_EINVAL, "%s takes 1 argument, %zu given", name, nargs);
    return arg_complex(arena, name, &args[0], 0, z);
}

/* The cotangent of a real output: its real part (Jᵀ has one column). */
static cr_status real_cotangent(cr_arena *arena, const char *who, const cr_tangent *dy, double *g,
                                bool *nz)
{
    cr_complex c;
    cr_status st = tangent_number(arena, who, *dy, &c, nz);
    *g = creal(c);
    return st;
}

/* z/|z|, zero at 0 (ChainRules: the denominator 0 is replaced by 1). */
static cr_complex unit_of(cr_complex z, double r)
{
    return r == 0 ? 0.0 : z / r;
}

static cr_value zfun_out(const zfun *fn, cr_complex v)
{
    return fn->real_out ? cr_value_f64(creal(v)) : cr_value_c128(v);
}

static bool zfun_flat(const zfun *fn, cr_complex z)
{
    return fn->flat != NULL && fn->flat(z);
}

static cr_status zfun_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                             cr_value *out)
{
    const zfun *fn = f->u.func.fn->udata;
    cr_complex z;
    cr_status st = one_arg(arena, fn->name, args, nargs, &z);
    if (st == CR_OK)
        *out = zfun_out(fn, fn->value(z));
    return st;
}

static cr_status zfun_frule(CR__FRULE_PARAMS)
{
    const zfun *fn = udata;
    cr_complex z, zd;
    bool nz;
    cr_status st = one_arg(arena, fn->name, args, nargs, &z);
    if (st == CR_OK)
        st = arg_tangent(arena, fn->name, dargs, args, 0, &zd, &nz);
    if (st != CR_OK)
        return st;
    *y = zfun_out(fn, fn->value(z));
    if (!nz || zfun_flat(fn, z))
        *dy = cr_tangent_zero();
    else if (fn->real_out)
        *dy = cr_tangent_f64(creal(fn->jvp(z, zd)));
    else
        *dy = cr_tangent_c128(fn->jvp(z, zd));
    return CR_OK;
}

static cr_status zfun_pullback(CR__PULLBACK_PARAMS)
{
    const z_env *e = env;
    const zfun *fn = e->fn;
    cr_complex g;
    bool nz;
    cr_status st = tangent_number(arena, fn->pullback_name, *dy, &g, &nz);
    if (st != CR_OK)
        return st;
    if (fn->real_out)
        g = creal(g);
    dx[0] = cr_tangent_none();
    dx[1] = cr__is_int_kind((cr_kind)e->kind) ? cr_tangent_none()
            : nz && !zfun_flat(fn, e->z)      ? project_to(e->kind, fn->vjp(e->z, g))
                                              : cr_tangent_zero();
    return CR_OK;
}

static cr_status zfun_rrule(CR__RRULE_PARAMS)
{
    const zfun *fn = udata;
    cr_complex z = 0;
    cr_status st = one_arg(arena, fn->name, args, nargs, &z);
    if (st != CR_OK)
        return st;
    CR__ARENA_NEW(arena, z_env, e);
    *e = (z_env){fn, z, (uint8_t)args[0].kind};
    *y = zfun_out(fn, fn->value(z));
    *pb = (cr_pullback){zfun_pullback, e, fn->pullback_name, 2};
    return CR_OK;
}

/* Defines the zfun NAME_fn and the exported cr_fn_NAME from NAME_value, NAME_jvp and
 * NAME_vjp (REAL: whether the output is real; FLAT: NULL or where J is zero). */
#define ZFUN(NAME, REAL, FLAT)                                                        \
    static const zfun NAME##_fn = {#NAME,      #NAME "_pullback", REAL, NAME##_value, \
                                   NAME##_jvp, NAME##_vjp,        FLAT};              \
    static const cr_function NAME##_function = {                                      \
        .name = #NAME, .arity = 1, .primal = zfun_primal, .udata = &NAME##_fn};       \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

/* NAME_value(z) = F(z) and NAME_jvp(z, t) = F(t) for an R-linear F (J·ż is F itself). */
#define LINEAR_ZFUN(NAME, F)                                 \
    static cr_complex NAME##_value(cr_complex z)             \
    {                                                        \
        return F(z);                                         \
    }                                                        \
    static cr_complex NAME##_jvp(cr_complex z, cr_complex t) \
    {                                                        \
        (void)z;                                             \
        return F(t);                                         \
    }

/* -- cabs: J = [x, y]/r; frule re(conj(z)ż)/r; pullback z re(ȳ)/r; zero at z = 0. -- */

static cr_complex cabs_value(cr_complex z)
{
    return cabs(z);
}
static cr_complex cabs_jvp(cr_complex z, cr_complex t)
{
    return conj(unit_of(z, cabs(z))) * t;
}
static cr_complex cabs_vjp(cr_complex z, cr_complex g)
{
    return unit_of(z, cabs(z)) * g;
}
ZFUN(cabs, true, NULL)

/* -- carg: θ = atan2(y, x); J = [-y, x]/r²; frule im(conj(z)ż)/r²; pullback i z re(ȳ)/r².
 * Computed as (z/r)/r so that r² neither overflows nor underflows; zero at z = 0. -- */

/* i z / r², or 0 where ChainRules takes 0 (z = 0) or the limit is 0 (z infinite). */
static cr_complex carg_grad(cr_complex z)
{
    double r = cabs(z);
    if (r == 0 || isinf(r))
        return 0.0;
    return times_i(z / r) / r;
}
static cr_complex carg_value(cr_complex z)
{
    return carg(z);
}
/* J·ż = <grad, ż> in R²: re(conj(grad)·ż). */
static cr_complex carg_jvp(cr_complex z, cr_complex t)
{
    return conj(carg_grad(z)) * t;
}
static cr_complex carg_vjp(cr_complex z, cr_complex g)
{
    return carg_grad(z) * g;
}
ZFUN(carg, true, NULL)

/* -- conj: J = diag(1, -1); frule conj(ż); pullback conj(ȳ). -- */

LINEAR_ZFUN(conj, conj)
#define conj_vjp conj_jvp
ZFUN(conj, false, NULL)

/* -- creal: J = [1, 0]; frule re ż; pullback re ȳ (+ 0i). -- */

LINEAR_ZFUN(creal, creal)
#define creal_vjp creal_jvp
ZFUN(creal, true, NULL)

/* -- cimag: J = [0, 1]; frule im ż; pullback i re ȳ. -- */

LINEAR_ZFUN(cimag, cimag)
static cr_complex cimag_vjp(cr_complex z, cr_complex g)
{
    (void)z;
    return cr__c(0.0, creal(g));
}
ZFUN(cimag, true, NULL)

/* -- cproj: J = I for finite z; 0 when z has an infinite part (cproj is then constant). -- */

static bool is_infinite(cr_complex z)
{
    return isinf(creal(z)) || isinf(cimag(z));
}
static cr_complex cproj_value(cr_complex z)
{
    return cproj(z);
}
static cr_complex cproj_jvp(cr_complex z, cr_complex t)
{
    (void)z;
    return t;
}
#define cproj_vjp cproj_jvp
ZFUN(cproj, false, is_infinite)

/* -- abs2: x² + y²; J = 2[x, y]; frule 2 re(conj(z)ż); pullback 2 z re(ȳ). -- */

static cr_complex abs2_value(cr_complex z)
{
    return creal(z) * creal(z) + cimag(z) * cimag(z);
}
static cr_complex abs2_jvp(cr_complex z, cr_complex t)
{
    return 2 * (conj(z) * t);
}
static cr_complex abs2_vjp(cr_complex z, cr_complex g)
{
    return 2 * creal(g) * z;
}
ZFUN(abs2, true, NULL)

/* -- csign: Ω = z/|z| (Julia's sign of a complex number), 0 at z = 0. With n = |z|,
 * dΩ = (ż - Ω re(conj(Ω) ż))/n, the projection of ż/n on the direction iΩ; it is symmetric,
 * so the pullback is (ȳ - Ω re(conj(Ω) ȳ))/n. Zero at z = 0, where sign jumps (as the real
 * sign's derivative, 0 at its jump); zero for infinite z. -- */

static cr_complex csign_value(cr_complex z)
{
    double r = cabs(z);
    if (isinf(r)) /* the direction of an infinite z: its infinite parts as ±1 */
        return unit_of(cr__c(isinf(creal(z)) ? copysign(1.0, creal(z)) : 0.0,
                             isinf(cimag(z)) ? copysign(1.0, cimag(z)) : 0.0),
                       cabs(cr__c(isinf(creal(z)) ? 1.0 : 0.0, isinf(cimag(z)) ? 1.0 : 0.0)));
    return unit_of(z, r);
}

/* (t - Ω re(conj(Ω) t))/|z| */
static cr_complex csign_jvp(cr_complex z, cr_complex t)
{
    double r = cabs(z);
    if (r == 0 || isinf(r))
        return 0.0;
    cr_complex u = z / r;
    return (t - u * creal(conj(u) * t)) / r;
}
#define csign_vjp csign_jvp
ZFUN(csign, false, NULL)

/* -- chypot(z, w) = sqrt(|z|² + |w|²) (Julia's hypot of complex numbers), real: J = [z, w]/Ω
 * (each as a 2-vector); frule re(conj(z)ż + conj(w)ẇ)/Ω; pullback (z, w) re(ȳ)/Ω; zero at
 * z = w = 0 (ChainRules' hypot). The value scales by the larger modulus (no overflow). -- */

static double chypot_of(cr_complex z, cr_complex w)
{
    return hypot(cabs(z), cabs(w));
}

static cr_complex chypot_grad(cr_complex z, double h)
{
    return h == 0 || isinf(h) ? 0.0 : z / h;
}

static cr_status two_args(cr_arena *arena, const cr_value *args, size_t nargs, cr_complex *z,
                          cr_complex *w)
{
    *z = *w = 0;
    if (nargs != 2)
        return CR__FAIL(arena, CR_EINVAL, "chypot takes 2 arguments, %zu given", nargs);
    cr_status st = arg_complex(arena, "chypot", &args[0], 0, z);
    return st == CR_OK ? arg_complex(arena, "chypot", &args[1], 1, w) : st;
}

static cr_status chypot_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)f;
    cr_complex z, w;
    cr_status st = two_args(arena, args, nargs, &z, &w);
    if (st != CR_OK)
        return st;
    *out = cr_value_f64(chypot_of(z, w));
    return CR_OK;
}

static const cr_function chypot_function = {.name = "chypot", .arity = 2, .primal = chypot_primal};
const cr_value cr_fn_chypot = {.kind = CR_KIND_FUNC, .u.func = {&chypot_function, NULL}};

static cr_status chypot_frule(CR__FRULE_PARAMS)
{
    cr_complex z, w, zd, wd;
    bool znz, wnz;
    cr_status st = two_args(arena, args, nargs, &z, &w);
    if (st == CR_OK)
        st = arg_tangent(arena, "chypot", dargs, args, 0, &zd, &znz);
    if (st == CR_OK)
        st = arg_tangent(arena, "chypot", dargs, args, 1, &wd, &wnz);
    if (st != CR_OK)
        return st;
    double h = chypot_of(z, w);
    *y = cr_value_f64(h);
    double t = 0;
    if (znz)
        t += creal(conj(chypot_grad(z, h)) * zd);
    if (wnz)
        t += creal(conj(chypot_grad(w, h)) * wd);
    *dy = znz || wnz ? cr_tangent_f64(t) : cr_tangent_zero();
    return CR_OK;
}

typedef struct zw_env {
    cr_complex z, w;
    uint8_t zkind, wkind;
} zw_env;

static cr_status chypot_pullback(CR__PULLBACK_PARAMS)
{
    const zw_env *e = env;
    double g;
    bool nz;
    cr_status st = real_cotangent(arena, "chypot_pullback", dy, &g, &nz);
    if (st != CR_OK)
        return st;
    double h = chypot_of(e->z, e->w);
    dx[0] = cr_tangent_none();
    dx[1] = cr__is_int_kind((cr_kind)e->zkind) ? cr_tangent_none()
            : nz                               ? project_to(e->zkind, chypot_grad(e->z, h) * g)
                                               : cr_tangent_zero();
    dx[2] = cr__is_int_kind((cr_kind)e->wkind) ? cr_tangent_none()
            : nz                               ? project_to(e->wkind, chypot_grad(e->w, h) * g)
                                               : cr_tangent_zero();
    return CR_OK;
}

static cr_status chypot_rrule(CR__RRULE_PARAMS)
{
    cr_complex z, w;
    cr_status st = two_args(arena, args, nargs, &z, &w);
    if (st != CR_OK)
        return st;
    CR__ARENA_NEW(arena, zw_env, e);
    e->z = z;
    e->w = w;
    e->zkind = (uint8_t)args[0].kind;
    e->wkind = (uint8_t)args[1].kind;
    *y = cr_value_f64(chypot_of(z, w));
    pb->fn = chypot_pullback;
    pb->env = e;
    pb->name = "chypot_pullback";
    pb->nx = 3;
    return CR_OK;
}

static const fn_test k_hand[] = {
    {&cabs_function, &k_test_origin}, {&carg_function, &k_test_neg_real},
    {&conj_function, &k_test_none},   {&creal_function, &k_test_none},
    {&cimag_function, &k_test_none},  {&cproj_function, &k_test_none},
    {&abs2_function, &k_test_none},   {&csign_function, &k_test_origin},
};

/* ---- Registration ------------------------------------------------------------------------ */

cr_status cr__family_complex(cr_registry *reg)
{
    const cr_argspec number2[2] = {CR_ARG_NUMBER, CR_ARG_NUMBER};
    cr_status st = CR_OK;
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0] && st == CR_OK; i++)
        st = cr__register(reg, k_rows[i].fn, number2, (size_t)k_rows[i].fn->arity, false,
                          crow_frule, crow_rrule, k_rows[i].fn->udata, k_rows[i].test);
    for (size_t i = 0; i < sizeof k_hand / sizeof k_hand[0] && st == CR_OK; i++)
        st = cr__register(reg, k_hand[i].fn, number2, 1, false, zfun_frule, zfun_rrule,
                          k_hand[i].fn->udata, k_hand[i].test);
    return st == CR_OK ? cr__register(reg, &chypot_function, number2, 2, false, chypot_frule,
                                      chypot_rrule, NULL, &k_test_origin)
                       : st;
}
