/*
 * The floating-point arithmetic of <math.h> in the math family: fma, the remainders (fmod,
 * rem, remainder, mod, modf), fdim, fmax, fmin, copysign, fabs, the scalings (ldexp, scalbn,
 * scalbln), hypot (a row for two arguments, a hand-written rule for more), and the
 * hand-written rules of frexp and remquo, whose outputs are a real and an int.
 */
#include "math_impl.h"

/* ∂/∂x hypot(x, y) = x/h (h = hypot(x, y)), 0 at the origin (ChainRules). When h
 * overflows although x/h does not (hypot(1.7e308, 1.7e308)), the arguments are first
 * scaled by a power of two. */
static double hypot_dx_d(double x, double y, double h)
{
    if (h == 0)
        return 0;
    if (isinf(h) && isfinite(x) && isfinite(y)) {
        int e = ilogb(fmax(fabs(x), fabs(y)));
        double xs = scalbn(x, -e), ys = scalbn(y, -e);
        return xs / sqrt(fma(xs, xs, ys * ys));
    }
    return x / h;
}

static float hypot_dx_f(float x, float y, float h)
{
    (void)h; /* recomputed in double, where it does not overflow */
    return (float)hypot_dx_d((double)x, (double)y, hypot((double)x, (double)y));
}

/* ---- Remainders ----------------------------------------------------------------------- */

/* The integer quotient n of a remainder: x = n y + r exactly, n integral. (x - r)/y is
 * within an ulp of n, so rounding recovers it while |n| < 2^51. */
static double quotient(double x, double y, double r)
{
    if (isinf(y))
        return 0;
    return round((x - r) / y);
}

/*
 * Partials of the remainders fmod (rem), remainder and mod: ∂/∂x = 1, ∂/∂y = -n with n the
 * integer quotient. At a jump of the function both are NaN (ChainRules' rem and mod):
 *   fmod:      x/y a nonzero integer (r == 0, x != 0); at x = 0, where fmod(x, y) = x
 *              near 0, the partials are (1, 0);
 *   remainder: x/y a half-integer (|r| == |y|/2);
 *   mod:       x/y an integer, x = 0 included (r == 0).
 */
typedef enum { REM_FMOD, REM_REMAINDER, REM_MOD } rem_kind;

static double rem_partial_d(rem_kind kind, int wrt, double x, double y, double r)
{
    bool jump = false;
    switch (kind) {
    case REM_FMOD:
        jump = r == 0 && x != 0;
        break;
    case REM_REMAINDER:
        jump = fabs(r) == fabs(y) / 2;
        break;
    case REM_MOD:
        jump = r == 0;
        break;
    }
    if (jump || isnan(r))
        return DNAN;
    if (wrt == 0)
        return 1;
    return x == 0 ? 0.0 : -quotient(x, y, r);
}

static float rem_partial_f(rem_kind kind, int wrt, float x, float y, float r)
{
    return (float)rem_partial_d(kind, wrt, (double)x, (double)y, (double)r);
}

#define REM_PARTIAL(KIND, WRT, X, Y, R) \
    _Generic((X), float : rem_partial_f, default : rem_partial_d)(KIND, WRT, X, Y, R)

/* Julia's mod(x, y) = x - floor(x/y) y: the remainder with the sign of y. */
static double mod_d(double x, double y)
{
    double r = fmod(x, y);
    if (r != 0 && (r < 0) != (y < 0))
        r += y;
    else if (r == 0)
        r = copysign(0.0, y);
    return r;
}

FLOAT_VIA_DOUBLE2(mod)

/* modf, which <tgmath.h> leaves out. */
static double modf_d(double x, double *ip)
{
    return modf(x, ip);
}

static float modf_f(float x, float *ip)
{
    return modff(x, ip);
}

/* An int (long) exponent argument of ldexp, scalbn (scalbln) given as a real number. */
static int to_int(double n)
{
    if (isnan(n))
        return 0;
    return n >= (double)INT_MAX ? INT_MAX : n <= (double)INT_MIN ? INT_MIN : (int)n;
}

static long to_long(double n)
{
    if (isnan(n))
        return 0;
    return n >= (double)LONG_MAX ? LONG_MAX : n <= (double)LONG_MIN ? LONG_MIN : (long)n;
}

/* ---- Arithmetic of <math.h> ---- */

/* fma of each instantiation: C's fma and fmaf; for complex numbers xy + z with each part
 * formed by nested fmas (re = xr yr - xi yi + zr, im = xr yi + xi yr + zi), so that a real
 * product part and z are added before rounding (Julia's fma of complex numbers is xy + z). */
static double fma_d(double x, double y, double z)
{
    return fma(x, y, z);
}

static float fma_f(float x, float y, float z)
{
    return fmaf(x, y, z);
}

static cr_complex fma_c(cr_complex x, cr_complex y, cr_complex z)
{
    double xr = creal(x), xi = cimag(x), yr = creal(y), yi = cimag(y);
    return cr__c(fma(xr, yr, fma(-xi, yi, creal(z))), fma(xr, yi, fma(xi, yr, cimag(z))));
}

#define FMA_G(X, Y, Z) _Generic((X), float : fma_f, double : fma_d, default : fma_c)(X, Y, Z)

/* fma(x, y, z) = xy + z, one rounding for real arguments: (y, x, 1); holomorphic, so the
 * row has a complex instantiation. */
static const double fma_lo[] = {-3, -3, -3}, fma_hi[] = {3, 3, 3};
static const double fma_pts[] = {1e-300, 1e-300, 1e-310, 1e200, 1e100, -1e300};
CR_SCALAR_EVALS(fma, 3, 1, Y[0] = FMA_G(x[0], x[1], x[2]), D[0] = x[1]; D[1] = x[0]; D[2] = 1)
static const cr_scalar_rule fma_row = CR_SCALAR_ROW_EX(fma, TESTREG(fma));
DEFINE_FN(fma, "fma", 3)

/* fmod(x, y) = x - trunc(x/y) y: (1, -trunc(x/y)); jumps where x/y is a nonzero integer */
static const double fmod_lo[] = {3.1, 1.2}, fmod_hi[] = {3.4, 1.4};
static const double fmod_pts[] = {5.3, 1.7, -7.1, 2, 1e-300, 1, 1e17, 3, 12345.678, 0.001};
REAL_ROW(fmod, 2, Y[0] = fmod(x[0], x[1]), D[0] = REM_PARTIAL(REM_FMOD, 0, x[0], x[1], Y[0]);
         D[1] = REM_PARTIAL(REM_FMOD, 1, x[0], x[1], Y[0]), TESTREG(fmod),
         .notes = "jumps where x/y is a nonzero integer: NaN partials there (ChainRules' rem); at "
                  "x = 0, where fmod is smooth, (1, 0)")

/* rem(x, y): Julia's name for fmod; the same row under another name. */
ALIAS_ROW(rem, fmod, 2, "Julia's rem: the fmod row (same partials and conventions)", TESTREG(fmod))
DEFINE_FN(rem, "rem", 2)

/* remainder(x, y) = x - n y, n = x/y rounded to nearest even: (1, -n); jumps where x/y is
 * a half-integer */
static const double remainder_lo[] = {3.1, 1.45}, remainder_hi[] = {3.4, 1.6};
static const double remainder_pts[] = {5.3, 1.7, -7.1, 2, 1e-300, 1, 2, 3, 1e17, 3};
REAL_ROW(remainder, 2, Y[0] = remainder(x[0], x[1]),
         D[0] = REM_PARTIAL(REM_REMAINDER, 0, x[0], x[1], Y[0]);
         D[1] = REM_PARTIAL(REM_REMAINDER, 1, x[0], x[1], Y[0]), TESTREG(remainder),
         .notes = "jumps where x/y is a half-integer (|Ω| = |y|/2): NaN partials there")

/* mod(x, y) = x - floor(x/y) y (Julia): (1, -floor(x/y)); jumps where x/y is an integer */
static const double mod_lo[] = {-3.4, 1.2}, mod_hi[] = {-3.1, 1.4};
static const double mod_pts[] = {5.3, -1.7, -7.1, 2, 1e17, 3, 1e-300, 1};
REAL_ROW(mod, 2, Y[0] = GENR(mod, x[0])(x[0], x[1]),
         D[0] = REM_PARTIAL(REM_MOD, 0, x[0], x[1], Y[0]);
         D[1] = REM_PARTIAL(REM_MOD, 1, x[0], x[1], Y[0]), TESTREG(mod),
         .notes = "the remainder with the sign of y; jumps where x/y is an integer, x = 0 "
                  "included: NaN partials there (ChainRules)")

/* fdim(x, y) = max(x - y, 0): (1, -1) if x > y, else (0, 0) (also at the tie x == y) */
static const double fdim_lo[] = {0.5, -2}, fdim_hi[] = {2, 0};
static const double fdim_pts[] = {-1, 2, 1e300, -1e300, 1e-300, -1e-300};
REAL_ROW(fdim, 2, Y[0] = fdim(x[0], x[1]),
         D[0] = isnan(Y[0])   ? Y[0]
                : x[0] > x[1] ? 1
                              : 0;
         D[1] = -D[0], TESTREG(fdim),
         .notes = "tie x == y: (0, 0) (the zero branch, as ChainRules' max(x - y, 0)); NaN "
                  "arguments: NaN partials")

/* fmax(x, y): (1, 0) when x is returned, (0, 1) when y is; a NaN argument is ignored. */
static const double fmax_lo[] = {0.5, -2}, fmax_hi[] = {2, 0};
static const double fmax_pts[] = {1, 2, 3, -1, -1e300, 1e300};
REAL_ROW(fmax, 2, Y[0] = fmax(x[0], x[1]), D[0] = isnan(x[1]) || x[0] > x[1] ? 1 : 0;
         D[1] = 1 - D[0], TESTREG(fmax),
         .notes = "tie x == y: (0, 1), as ChainRules' max; a NaN argument is ignored, as fmax "
                  "ignores it: fmax(NaN, y) gives (0, 1), fmax(x, NaN) (1, 0)")

/* fmin(x, y): (1, 0) when x is returned, (0, 1) when y is. */
static const double fmin_lo[] = {-2, 0.5}, fmin_hi[] = {0, 2};
static const double fmin_pts[] = {1, 2, 3, -1, -1e300, 1e300};
REAL_ROW(fmin, 2, Y[0] = fmin(x[0], x[1]),
         D[0] = isnan(x[1]) || (!isnan(x[0]) && !(x[0] > x[1])) ? 1 : 0;
         D[1] = 1 - D[0], TESTREG(fmin),
         .notes = "tie x == y: (1, 0), as ChainRules' min; a NaN argument is ignored: "
                  "fmin(NaN, y) gives (0, 1), fmin(x, NaN) (1, 0)")

/* copysign(x, y) = |x| sign(y): (±1, 0), -1 when the sign bits differ (ChainRules) */
static const double copysign_lo[] = {0.5, -3}, copysign_hi[] = {3, -0.5};
static const double copysign_pts[] = {2, 3, -2, -1, 1e300, -1e-300};
REAL_ROW(copysign, 2, Y[0] = copysign(x[0], x[1]), D[0] = !signbit(x[0]) != !signbit(x[1]) ? -1 : 1;
         D[1] = 0, TESTREG(copysign),
         .notes = "∂/∂x = -1 when the sign bits of x and y differ, else 1 (so ±1 at x = ±0); "
                  "∂/∂y = 0 (y's sign is not differentiable; ChainRules' NoTangent)")

/* fabs(x): sign(x), 0 at x = 0 (ChainRules' abs) */
static const double fabs_lo[] = {0.2}, fabs_hi[] = {3};
static const double fabs_pts[] = {-1.5, 1e300, -1e-300, 0x1p-1074};
REAL_ROW1(fabs, fabs(x[0]),
          x[0] > 0    ? 1
          : x[0] < 0  ? -1
          : x[0] == 0 ? 0
                      : x[0],
          TESTREG(fabs), .notes = "derivative sign(x): 0 at x = ±0 (ChainRules' abs)")

/* ldexp(x, n) = x 2^n: (2^n, 0); n is an integer (NoTangent when passed as one) */
static const double ldexp_lo[] = {-3, -4.5}, ldexp_hi[] = {3, 4.5};
static const double ldexp_pts[] = {1e-300, 1100.5, 1e300, -1100.5, 3, 1};
REAL_ROW(ldexp, 2, Y[0] = ldexp(x[0], to_int(x[1])), D[0] = ldexp((T)1, to_int(x[1]));
         D[1] = 0, TESTREG(ldexp),
         .notes = "n is an integer: NoTangent for an int n, 0 for a real one (truncated to int)")

/* scalbn(x, n) = x 2^n (FLT_RADIX is 2): (2^n, 0) */
static const double scalbn_lo[] = {-3, -4.5}, scalbn_hi[] = {3, 4.5};
static const double scalbn_pts[] = {1e-300, 1100.5, 1e300, -1100.5, 3, 1};
REAL_ROW(scalbn, 2, Y[0] = scalbn(x[0], to_int(x[1])), D[0] = scalbn((T)1, to_int(x[1]));
         D[1] = 0, TESTREG(scalbn), .notes = "n is an integer (see ldexp)")

/* scalbln(x, n) = x 2^n with a long n: (2^n, 0) */
static const double scalbln_lo[] = {-3, -4.5}, scalbln_hi[] = {3, 4.5};
static const double scalbln_pts[] = {1e-300, 1100.5, 1e300, -1100.5, 3, 1};
REAL_ROW(scalbln, 2, Y[0] = scalbln(x[0], to_long(x[1])), D[0] = scalbln((T)1, to_long(x[1]));
         D[1] = 0, TESTREG(scalbln), .notes = "n is an integer (see ldexp)")

/* modf(x) = (fractional part, integral part), both real: (1, 0) */
static const double modf_lo[] = {0.1}, modf_hi[] = {0.9};
static const double modf_pts[] = {2.5, -3.25, 1e-300, 1e15 + 0.5};
CR_SCALAR_EVALS_REAL(modf, 1, 2, T ip_; Y[0] = GENR(modf, x[0])(x[0], &ip_); Y[1] = ip_, D[0] = 1;
                     D[1] = 0)
static const cr_scalar_rule modf_row = CR_SCALAR_ROW_REAL_EX(
    modf, TESTREG(modf),
    .notes = "a tuple (frac, int): partials (1, 0) everywhere, at the jumps (integers) too");
DEFINE_FN(modf, "modf", 1)

/* hypot(x, y): (x, y)/Ω, and 0 at (0, 0) (ChainRules); see hypot_dx_d */
static const double hypot_lo[] = {-3, -3}, hypot_hi[] = {3, 3};
static const double hypot_pts[] = {3,     -4,     1e300,  1,     1.7e308, -1.5e308, 1e200,
                                   1e200, 1e-200, 3e-200, 1e308, 1e308,   5e-324,   1e-310};
CR_SCALAR_EVALS_REAL(hypot, 2, 1, Y[0] = hypot(x[0], x[1]),
                     D[0] = GENR(hypot_dx, x[0])(x[0], x[1], Y[0]);
                     D[1] = GENR(hypot_dx, x[0])(x[1], x[0], Y[0]))
static const cr_scalar_rule hypot_row =
    CR_SCALAR_ROW_REAL_EX(hypot, TESTREG(hypot),
                          .notes = "(0, 0) at x = y = 0 (ChainRules); also hypot(x...) of 3+ "
                                   "arguments (hand-written rule)");

/* ---- Tangents of real arguments ---- */

/* A real primal's tangent as a double: the real part of the scalar the tangent carries
 * (ZeroTangent/NoTangent as 0), or an error. */
static cr_status real_tangent(cr_arena *arena, const char *who, cr_tangent t, double *v)
{
    cr_complex c;
    cr_status st = cr__tangent_scalar(arena, who, t, &c, NULL);
    *v = creal(c);
    return st;
}

static cr_tangent real_result_tangent(bool f32, double v)
{
    return f32 ? cr_tangent_f32((float)v) : cr_tangent_f64(v);
}

/* ---- frexp and remquo: a real and an int output ---- */

typedef struct frexp_f64 {
    double v;
    int e;
} frexp_f64;

typedef struct frexp_f32 {
    float v;
    int e;
} frexp_f32;

static const cr_field k_real_int_f64_fields[2] = {
    {NULL, offsetof(frexp_f64, v), CR_KIND_F64, NULL},
    {NULL, offsetof(frexp_f64, e), CR_KIND_I32, NULL},
};
static const cr_field k_real_int_f32_fields[2] = {
    {NULL, offsetof(frexp_f32, v), CR_KIND_F32, NULL},
    {NULL, offsetof(frexp_f32, e), CR_KIND_I32, NULL},
};
static const cr_type k_real_int_f64 = {"tuple(f64,int)", sizeof(frexp_f64), 2,
                                       k_real_int_f64_fields};
static const cr_type k_real_int_f32 = {"tuple(f32,int)", sizeof(frexp_f32), 2,
                                       k_real_int_f32_fields};

/* Allocate a (real, int) tuple value. */
static cr_status real_int_value(cr_arena *arena, bool f32, double v, int e, cr_value *out)
{
    if (f32) {
        CR__ARENA_NEW(arena, frexp_f32, p);
        p->v = (float)v;
        p->e = e;
        *out = cr_value_struct(&k_real_int_f32, p);
    } else {
        CR__ARENA_NEW(arena, frexp_f64, p);
        p->v = v;
        p->e = e;
        *out = cr_value_struct(&k_real_int_f64, p);
    }
    return CR_OK;
}

/* The tangent of a (real, int) tuple: (dv, NoTangent). */
static cr_status real_int_tangent(cr_arena *arena, bool f32, double dv, cr_tangent *out)
{
    cr_tangent f[2] = {real_result_tangent(f32, dv), cr_tangent_none()};
    return cr_tangent_struct(arena, f32 ? &k_real_int_f32 : &k_real_int_f64, NULL, f, 2, out);
}

/* The real field of a (real, int) tuple cotangent. */
static cr_status real_int_cotangent(cr_arena *arena, const char *who, const cr_tangent *dy,
                                    double *v)
{
    cr_tangent d;
    cr_status st = cr__tuple_cotangent(arena, who, "a (real, int) tuple", *dy, &d);
    if (st != CR_OK)
        return st;
    return real_tangent(arena, who, cr_tangent_field(d, 0), v);
}

/* frexp(x) = (m, e), x = m 2^e, 1/2 <= |m| < 1. ∂m/∂x = 2^-e, the slope of the piece
 * containing x; at the jumps (powers of two) that is the slope to their right (for x > 0).
 * At x = 0, m = 0 and the slope is 1; NaN for non-finite x. */
static void frexp_eval(double x, bool f32, double *m, int *e, double *dm)
{
    if (f32) {
        *m = (double)frexpf((float)x, e);
    } else {
        *m = frexp(x, e);
    }
    *dm = isfinite(x) ? ldexp(1.0, -*e) : DNAN;
}

static cr_status frexp_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)f;
    bool f32 = false;
    if (nargs != 1 || !real_args(args, 1, &f32))
        return CR__FAIL(arena, CR_EINVAL, "frexp takes one real argument");
    double m, dm;
    int e;
    frexp_eval(real_of(&args[0]), f32, &m, &e, &dm);
    return real_int_value(arena, f32, m, e, out);
}

/* The primal of a rule of real arguments (frexp, remquo, hypot) at args into *y, and whether
 * they make it f32 (real_args). */
static cr_status real_primal(cr_status (*primal)(cr_arena *, const cr_value *, const cr_value *,
                                                 size_t, cr_value *),
                             cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                             cr_value *y, bool *f32)
{
    cr_status st = primal(arena, f, args, nargs, y);
    *f32 = false;
    if (st == CR_OK)
        real_args(args, nargs, f32);
    return st;
}

static const cr_function frexp_function = {.name = "frexp", .arity = 1, .primal = frexp_primal};
const cr_value cr_fn_frexp = {.kind = CR_KIND_FUNC, .u.func = {&frexp_function, NULL}};

static cr_status frexp_frule(CR__FRULE_PARAMS)
{
    bool f32;
    cr_status st = real_primal(frexp_primal, arena, f, args, nargs, y, &f32);
    if (st != CR_OK)
        return st;
    double m, dm, dx;
    int e;
    frexp_eval(real_of(&args[0]), f32, &m, &e, &dm);
    st = real_tangent(arena, "frexp", dargs[1], &dx);
    if (st != CR_OK)
        return st;
    if (cr__is_int_kind(args[0].kind))
        dx = 0;
    return real_int_tangent(arena, f32, dm * dx, dy);
}

typedef struct frexp_env {
    double dm;
    cr_kind kind;
} frexp_env;

static cr_status frexp_pullback(CR__PULLBACK_PARAMS)
{
    const frexp_env *e = env;
    double g = 0.0;
    cr_status st = real_int_cotangent(arena, "frexp_pullback", dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = cr__project_real(e->kind, e->dm * g);
    return CR_OK;
}

static cr_status frexp_rrule(CR__RRULE_PARAMS)
{
    bool f32;
    cr_status st = real_primal(frexp_primal, arena, f, args, nargs, y, &f32);
    if (st != CR_OK)
        return st;
    CR__ARENA_NEW(arena, frexp_env, e);
    double m;
    int ex;
    frexp_eval(real_of(&args[0]), f32, &m, &ex, &e->dm);
    e->kind = args[0].kind;
    *pb = (cr_pullback){frexp_pullback, e, "frexp_pullback", nargs + 1};
    return CR_OK;
}

static const double frexp_lo[] = {0.55}, frexp_hi[] = {0.95};
static const double frexp_pts[] = {3.0, -5.5, 1e300, 1e-310};
static const cr_rule_test frexp_test = {
    .npoints = NPTS(frexp_pts, 1), .points = frexp_pts, .lo = frexp_lo, .hi = frexp_hi};

/* remquo(x, y) = (r, quo): r = remainder(x, y) and the low bits of the quotient. The
 * partials of r are those of the remainder row (jumps at half-integer x/y: NaN). */
static void remquo_eval(double x, double y, bool f32, double *r, int *q, double D[2])
{
    if (f32) {
        float xf = (float)x, yf = (float)y, Y[1], Df[2], xs[2] = {xf, yf};
        *r = (double)remquof(xf, yf, q);
        remainder_row.f32(xs, Y, Df);
        D[0] = (double)Df[0];
        D[1] = (double)Df[1];
    } else {
        double xs[2] = {x, y}, Y[1];
        *r = remquo(x, y, q);
        cr_scalar_partials_f64(&remainder_row, xs, Y, D);
    }
}

static cr_status remquo_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)f;
    bool f32 = false;
    if (nargs != 2 || !real_args(args, 2, &f32))
        return CR__FAIL(arena, CR_EINVAL, "remquo takes two real arguments");
    double r, D[2];
    int q;
    remquo_eval(real_of(&args[0]), real_of(&args[1]), f32, &r, &q, D);
    return real_int_value(arena, f32, r, q, out);
}

static const cr_function remquo_function = {.name = "remquo", .arity = 2, .primal = remquo_primal};
const cr_value cr_fn_remquo = {.kind = CR_KIND_FUNC, .u.func = {&remquo_function, NULL}};

static cr_status remquo_frule(CR__FRULE_PARAMS)
{
    bool f32;
    cr_status st = real_primal(remquo_primal, arena, f, args, nargs, y, &f32);
    if (st != CR_OK)
        return st;
    double r, D[2], acc = 0;
    int q;
    remquo_eval(real_of(&args[0]), real_of(&args[1]), f32, &r, &q, D);
    for (size_t j = 0; j < 2; j++) {
        double t;
        st = real_tangent(arena, "remquo", dargs[j + 1], &t);
        if (st != CR_OK)
            return st;
        if (!cr__is_int_kind(args[j].kind) && t != 0)
            acc += D[j] * t;
    }
    return real_int_tangent(arena, f32, acc, dy);
}

typedef struct remquo_env {
    double D[2];
    cr_kind kinds[2];
} remquo_env;

static cr_status remquo_pullback(CR__PULLBACK_PARAMS)
{
    const remquo_env *e = env;
    double g = 0.0;
    cr_status st = real_int_cotangent(arena, "remquo_pullback", dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    for (size_t j = 0; j < 2; j++)
        dx[j + 1] = cr__project_real(e->kinds[j], e->D[j] * g);
    return CR_OK;
}

static cr_status remquo_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_NEW(arena, remquo_env, e);
    bool f32;
    cr_status st = real_primal(remquo_primal, arena, f, args, nargs, y, &f32);
    if (st != CR_OK)
        return st;
    double r;
    int q;
    remquo_eval(real_of(&args[0]), real_of(&args[1]), f32, &r, &q, e->D);
    e->kinds[0] = args[0].kind;
    e->kinds[1] = args[1].kind;
    *pb = (cr_pullback){remquo_pullback, e, "remquo_pullback", nargs + 1};
    return CR_OK;
}

static const cr_rule_test remquo_test = {.npoints = NPTS(remainder_pts, 2),
                                         .points = remainder_pts,
                                         .lo = remainder_lo,
                                         .hi = remainder_hi};

/* ---- hypot(x, y, z, ...) ---- */

/*
 * hypot of n >= 3 real arguments: 2^e s with s = sqrt(sum (x_i 2^-e)²) and 2^e the power of
 * two at the largest |x_i| (exact scaling: no overflow or underflow of the squares). An
 * infinite argument gives +inf even with a NaN among the others (as C's hypot). The
 * partials are x_i 2^-e / s, which do not overflow with h; 0 when h = 0 (ChainRules).
 * Returns h; *e and *s are the scaling (s = 0 for h = 0, NaN for a non-finite h).
 */
static double hypot_n(const cr_value *args, size_t n, int *e, double *s)
{
    double m = 0;
    bool nan = false, inf = false;
    *e = 0;
    *s = DNAN;
    for (size_t i = 0; i < n; i++) {
        double a = fabs(real_of(&args[i]));
        if (isinf(a))
            inf = true;
        else if (isnan(a))
            nan = true;
        else if (a > m)
            m = a;
    }
    if (inf)
        return DINF;
    if (nan)
        return DNAN;
    if (m == 0) {
        *s = 0;
        return 0;
    }
    *e = ilogb(m);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double v = scalbn(real_of(&args[i]), -*e);
        sum = fma(v, v, sum);
    }
    *s = sqrt(sum);
    return scalbn(*s, *e);
}

/* ∂h/∂x_i from hypot_n's scaling. */
static double hypot_n_partial(double x, int e, double s)
{
    if (s == 0)
        return 0;
    return scalbn(x, -e) / s;
}

static cr_status hypot_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    if (nargs == 2)
        return cr_scalar_primal(arena, f, args, nargs, out);
    bool f32 = false;
    if (nargs < 2 || !real_args(args, nargs, &f32))
        return CR__FAIL(arena, CR_EINVAL, "hypot takes two or more real arguments");
    int e;
    double sc, h = hypot_n(args, nargs, &e, &sc);
    *out = f32 ? cr_value_f32((float)h) : cr_value_f64(h);
    return CR_OK;
}

/* hypot is one function: the 2-argument row and the n-argument hand-written rule. */
static const cr_function hypot_function = {.name = "hypot",
                                           .arity = -1,
                                           .primal = hypot_primal,
                                           .self_type = NULL,
                                           .udata = &hypot_row,
                                           .flags = CR_FN_SCALAR_ROW};
const cr_value cr_fn_hypot = {.kind = CR_KIND_FUNC, .u.func = {&hypot_function, NULL}};

static cr_status hypot_n_frule(CR__FRULE_PARAMS)
{
    bool f32;
    cr_status st = real_primal(hypot_primal, arena, f, args, nargs, y, &f32);
    if (st != CR_OK)
        return st;
    int e;
    double sc, acc = 0;
    hypot_n(args, nargs, &e, &sc);
    for (size_t i = 0; i < nargs; i++) {
        double t = 0;
        st = real_tangent(arena, "hypot", dargs[i + 1], &t);
        if (st != CR_OK)
            return st;
        if (!cr__is_int_kind(args[i].kind) && t != 0)
            acc += hypot_n_partial(real_of(&args[i]), e, sc) * t;
    }
    *dy = real_result_tangent(f32, acc);
    return CR_OK;
}

typedef struct hypot_env {
    size_t n;
    int e; /* scaling of hypot_n */
    double s;
    /* n (value, kind) pairs follow */
} hypot_env;

typedef struct hypot_arg {
    double v;
    cr_kind kind;
} hypot_arg;

static cr_status hypot_n_pullback(CR__PULLBACK_PARAMS)
{
    const hypot_env *e = env;
    const hypot_arg *a = (const hypot_arg *)(const void *)(e + 1);
    double g;
    cr_tangent d;
    cr_status st = cr_tangent_unthunk(*dy, &d);
    if (st != CR_OK)
        return st;
    st = real_tangent(arena, "hypot_pullback", d, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    for (size_t i = 0; i < e->n; i++)
        dx[i + 1] = cr__project_real(a[i].kind, hypot_n_partial(a[i].v, e->e, e->s) * g);
    return CR_OK;
}

static cr_status hypot_n_rrule(CR__RRULE_PARAMS)
{
    cr_status st = hypot_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    size_t bytes;
    if ((st = cr__ck_mul(cr_arena_ctx(arena), "hypot", nargs, sizeof(hypot_arg), &bytes)) !=
            CR_OK ||
        (st = cr__ck_add(cr_arena_ctx(arena), "hypot", sizeof(hypot_env), bytes, &bytes)) != CR_OK)
        return st;
    hypot_env *e = cr_arena_alloc(arena, bytes, _Alignof(double));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    hypot_arg *a = (hypot_arg *)(void *)(e + 1);
    e->n = nargs;
    hypot_n(args, nargs, &e->e, &e->s);
    for (size_t i = 0; i < nargs; i++)
        a[i] = (hypot_arg){real_of(&args[i]), args[i].kind};
    *pb = (cr_pullback){hypot_n_pullback, e, "hypot_pullback", nargs + 1};
    return CR_OK;
}

/* Test registration of the variadic rule: as many coordinates as matchers (four). */
static const double hypot4_lo[] = {-3, -3, -3, -3}, hypot4_hi[] = {3, 3, 3, 3};
static const double hypot4_pts[] = {1e308, 1e308, 1e308, 1e308, 1,      2,      2,      4,
                                    1e200, 1e200, 1e200, 1e200, 1e-200, 3e-200, 2e-200, 0};
static const cr_rule_test hypot4_test = {
    .npoints = NPTS(hypot4_pts, 4), .points = hypot4_pts, .lo = hypot4_lo, .hi = hypot4_hi};

/* ---- Registration ---- */

cr_status cr__math_register_hand(cr_registry *reg)
{
    cr_status st = cr__register(reg, &frexp_function, k_real_args, 1, false, frexp_frule,
                                frexp_rrule, NULL, &frexp_test);
    if (st == CR_OK)
        st = cr__register(reg, &remquo_function, k_real_args, 2, false, remquo_frule, remquo_rrule,
                          NULL, &remquo_test);
    /* hypot(x, y, z, w...): three or more arguments (the last matcher repeats). */
    if (st == CR_OK)
        st = cr__register(reg, &hypot_function, k_real_args, 4, true, hypot_n_frule, hypot_n_rrule,
                          NULL, &hypot4_test);
    return st;
}
