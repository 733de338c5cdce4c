/*
 * Basic scalar rules: the arithmetic operators and Julia Base's arithmetic extras (inv,
 * sign, muladd, identity, clamp, min, max, x^2, x^3, evalpoly), and
 * ignore_derivatives. Each function but evalpoly is one row of the scalar-rule table; the
 * frule, rrule, partials and test registration all come from that row.
 */
#include <chainrules/rules_math.h>

#include "rows_impl.h"

/* The arithmetic rows' bodies (shared with the reverse tape). */
#include "../rows_arith.h"

static const double k_box2_lo[] = {-3, -3}, k_box2_hi[] = {3, 3};

/* x + y: ∂/∂x = 1, ∂/∂y = 1 */
static const double add_pts[] = {1e-300, -1e-300, 1e300, 1e300};
static const cr_scalar_rule add_row = CR_SCALAR_ROW_EX(
    add,
    .test = {.lo = k_box2_lo, .hi = k_box2_hi, .npoints = NPTS(add_pts, 2), .points = add_pts});
DEFINE_FN(add, "+", 2)

/* x - y: ∂/∂x = 1, ∂/∂y = -1 */
static const double sub_pts[] = {1e-300, 1e-300, 1e300, -1e300};
static const cr_scalar_rule sub_row = CR_SCALAR_ROW_EX(
    sub,
    .test = {.lo = k_box2_lo, .hi = k_box2_hi, .npoints = NPTS(sub_pts, 2), .points = sub_pts});
DEFINE_FN(sub, "-", 2)

/* x * y: ∂/∂x = y, ∂/∂y = x */
static const double mul_pts[] = {1e-300, 1e300, 1e200, 1e100};
static const cr_scalar_rule mul_row = CR_SCALAR_ROW_EX(
    mul,
    .test = {.lo = k_box2_lo, .hi = k_box2_hi, .npoints = NPTS(mul_pts, 2), .points = mul_pts});
DEFINE_FN(mul, "*", 2)

/* x / y: ∂/∂x = 1/y, ∂/∂y = -Ω/y */
static const double div_lo[] = {-3, 0.2}, div_hi[] = {3, 3};
static const double div_pts[] = {1e-300, 1e300, 1, -3, 1e200, 1e-100};
static const cr_scalar_rule div_row = CR_SCALAR_ROW_EX(div, TESTREG(div), .notes = "y != 0");
DEFINE_FN(div, "/", 2)

/* -x: ∂/∂x = -1 */
static const double k_box1_lo[] = {-3}, k_box1_hi[] = {3};
static const double neg_pts[] = {1e300, -1e-300};
static const cr_scalar_rule neg_row = CR_SCALAR_ROW_EX(
    neg,
    .test = {.lo = k_box1_lo, .hi = k_box1_hi, .npoints = NPTS(neg_pts, 1), .points = neg_pts});
DEFINE_FN(neg, "neg", 1)

/* identity(x) = x: 1 */
static const double identity_pts[] = {1e300, -1e-300};
ROW1(identity, x[0], 1,
     .test = {.lo = k_box1_lo,
              .hi = k_box1_hi,
              .npoints = NPTS(identity_pts, 1),
              .points = identity_pts})

/* inv(x) = 1/x: -Ω² */
static const double inv_lo[] = {0.2}, inv_hi[] = {3};
static const double inv_pts[] = {-1e150, 1e300, -3, 1e-150};
ROW1(inv, 1 / x[0], -(Y[0] * Y[0]), TESTREG(inv), .notes = "x != 0")

/* square(x) = x^2 (Julia's literal x^2): 2x */
static const double square_pts[] = {1e150, -1e-150, 3};
ROW1(square, x[0] * x[0], 2 * x[0],
     .test = {.lo = k_box1_lo,
              .hi = k_box1_hi,
              .npoints = NPTS(square_pts, 1),
              .points = square_pts},
     .notes = "Julia's x^2 (Base.literal_pow)")

/* cube(x) = x^3 (Julia's literal x^3): 3x² */
static const double cube_pts[] = {1e100, -1e-100, 3};
CR_SCALAR_EVALS(cube, 1, 1, T x2_ = x[0] * x[0]; Y[0] = x2_ * x[0], D[0] = 3 * (x[0] * x[0]))
static const cr_scalar_rule cube_row = CR_SCALAR_ROW_EX(
    cube,
    .test = {.lo = k_box1_lo, .hi = k_box1_hi, .npoints = NPTS(cube_pts, 1), .points = cube_pts},
    .notes = "Julia's x^3 (Base.literal_pow)");
DEFINE_FN(cube, "cube", 1)

/* sign(x) (Julia: ±1, ±0 at ±0, NaN at NaN): 0, also at 0 (ChainRules) */
static const double sign_lo[] = {0.2}, sign_hi[] = {3};
static const double sign_pts[] = {-2, -1e300, 1e-300};
REAL_ROW1(sign,
          x[0] > 0   ? 1
          : x[0] < 0 ? -1
                     : x[0],
          0, TESTREG(sign), .notes = "derivative 0 everywhere, the jump at 0 included (ChainRules)")

/* muladd(x, y, z) = xy + z: (y, x, 1) */
static const double k_box3_lo[] = {-3, -3, -3}, k_box3_hi[] = {3, 3, 3};
static const double muladd_pts[] = {1e-300, 1e-300, 1e-310, 1e200, 1e100, -1e300};
CR_SCALAR_EVALS(muladd, 3, 1, Y[0] = x[0] * x[1] + x[2], D[0] = x[1]; D[1] = x[0]; D[2] = 1)
static const cr_scalar_rule muladd_row = CR_SCALAR_ROW_EX(
    muladd,
    .test = {
        .lo = k_box3_lo, .hi = k_box3_hi, .npoints = NPTS(muladd_pts, 3), .points = muladd_pts});
DEFINE_FN(muladd, "muladd", 3)

/* clamp(x, lo, hi) (Julia): (1, 0, 0) inside, (0, 1, 0) below lo, (0, 0, 1) above hi; at
 * x == lo or x == hi the derivative goes to x (ChainRules) */
static const double clamp_lo[] = {-1, -3, 2}, clamp_hi[] = {1, -2, 3};
static const double clamp_pts[] = {-2.5, -2, 2, 2.5, -2, 2, 1e-300, -1, 1};
REAL_ROW(clamp, 3,
         Y[0] = x[0] > x[2]   ? x[2]
                : x[0] < x[1] ? x[1]
                              : x[0],
         D[1] = x[0] < x[1];
         D[2] = x[2] < x[0];
         D[0] = !(D[1] != 0 || D[2] != 0), TESTREG(clamp),
         .notes = "at x == lo or x == hi the derivative goes to x: (1, 0, 0) (ChainRules)")

/* max(x, y) (Julia: NaN if either is NaN, max(-0.0, 0.0) = 0.0): (x > y, !(x > y)) */
static const double max_lo[] = {0.5, -2}, max_hi[] = {2, 0};
static const double max_pts[] = {1, 2, 3, -1, -1e300, 1e300};
REAL_ROW(max, 2,
         Y[0] = isnan(x[0]) || isnan(x[1])                                    ? x[0] + x[1]
                : (x[1] > x[0] || (signbit(x[1]) == 0 && signbit(x[0]) != 0)) ? x[1]
                                                                              : x[0],
         D[0] = x[0] > x[1];
         D[1] = !(x[0] > x[1]), TESTREG(max),
         .notes = "tie x == y: (0, 1) (ChainRules); NaN arguments give NaN and the partials of the "
                  "comparison, (0, 1)")

/* min(x, y) (Julia: NaN if either is NaN, min(-0.0, 0.0) = -0.0): (!(x > y), x > y) */
static const double min_lo[] = {-2, 0.5}, min_hi[] = {0, 2};
static const double min_pts[] = {1, 2, 3, -1, -1e300, 1e300};
REAL_ROW(min, 2,
         Y[0] = isnan(x[0]) || isnan(x[1])                                    ? x[0] + x[1]
                : (x[1] < x[0] || (signbit(x[1]) != 0 && signbit(x[0]) == 0)) ? x[1]
                                                                              : x[0],
         D[0] = !(x[0] > x[1]);
         D[1] = x[0] > x[1], TESTREG(min),
         .notes = "tie x == y: (1, 0) (ChainRules); NaN arguments give NaN and the partials of the "
                  "comparison, (1, 0)")

const cr_value cr_fn_ignore_derivatives = {.kind = CR_KIND_FUNC,
                                           .u.func = {&cr_function_ignore_derivatives, NULL}};

/* ---- evalpoly(x, c0, c1, ..., c_{n-1}) = c0 + c1 x + ... + c_{n-1} x^(n-1) ---------------- */

/*
 * Julia's evalpoly(x, (c0, c1, ...)), with the coefficients as trailing arguments. Horner's
 * scheme gives p(x) and p'(x) together; ∂/∂c_i = x^i. Arguments promote as in rows
 * (f32 < f64 < c128; integers join any float type and get NoTangent); for complex
 * arguments the pullback multiplies by the conjugates (holomorphic in every argument).
 */
typedef enum { EP_F32, EP_F64, EP_C128 } ep_type;

static bool ep_promote(const cr_value *args, size_t n, ep_type *t)
{
    unsigned has;
    size_t bad;
    if (!cr__number_kinds(args, n, &has, &bad))
        return false;
    *t = (has & CR__HAS_C128)                          ? EP_C128
         : (has & CR__HAS_F32) && !(has & CR__HAS_F64) ? EP_F32
                                                       : EP_F64;
    return true;
}

/* A number of the arguments (checked by ep_promote). */
static cr_complex ep_value(const cr_value *v)
{
    cr_complex z;
    (void)cr__value_number(v, &z);
    return z;
}

/* p(x) and p'(x) by Horner's scheme, in the arithmetic of type t. */
static void ep_horner(ep_type t, const cr_value *args, size_t n, cr_complex *p, cr_complex *dp)
{
    const cr_value *c = args + 1;
    size_t m = n - 1;
    switch (t) {
    case EP_F32: {
        float x = (float)creal(ep_value(&args[0])), y = (float)creal(ep_value(&c[m - 1])), d = 0;
        for (size_t i = m - 1; i-- > 0;) {
            d = d * x + y;
            y = y * x + (float)creal(ep_value(&c[i]));
        }
        *p = (double)y;
        *dp = (double)d;
        break;
    }
    case EP_F64: {
        double x = creal(ep_value(&args[0])), y = creal(ep_value(&c[m - 1])), d = 0;
        for (size_t i = m - 1; i-- > 0;) {
            d = d * x + y;
            y = y * x + creal(ep_value(&c[i]));
        }
        *p = y;
        *dp = d;
        break;
    }
    case EP_C128: {
        cr_complex x = ep_value(&args[0]), y = ep_value(&c[m - 1]), d = 0;
        for (size_t i = m - 1; i-- > 0;) {
            d = d * x + y;
            y = y * x + ep_value(&c[i]);
        }
        *p = y;
        *dp = d;
        break;
    }
    }
}

/* PREFIX_f32, PREFIX_f64 or PREFIX_c128 (the default) of v, by the type t. */
#define EP_OF(PREFIX, t, v)                          \
    ((t) == EP_F32   ? PREFIX##_f32((float)creal(v)) \
     : (t) == EP_F64 ? PREFIX##_f64(creal(v))        \
                     : PREFIX##_c128(v))

static cr_value ep_result(ep_type t, cr_complex v)
{
    return EP_OF(cr_value, t, v);
}

static cr_tangent ep_tangent(ep_type t, cr_complex v)
{
    return EP_OF(cr_tangent, t, v);
}
#undef EP_OF

/* A scalar tangent as a complex number (zeros as 0), or an error. */
static cr_status ep_tangent_value(cr_arena *arena, const char *who, cr_tangent t, cr_complex *v)
{
    return cr__tangent_scalar(arena, who, t, v, NULL);
}

/* The cotangent v projected on an argument of kind k. */
static cr_tangent ep_project(cr_kind k, cr_complex v)
{
    switch (k) {
    case CR_KIND_F64:
        return cr_tangent_f64(creal(v));
    case CR_KIND_F32:
        return cr_tangent_f32((float)creal(v));
    case CR_KIND_C128:
        return cr_tangent_c128(v);
    default:
        return cr_tangent_none();
    }
}

/* ---- evalpoly(x, c) with the coefficients in a vector c (Julia's evalpoly(x, p::Vector)) - */

/* The vector of coefficients: 1-d, at least one element, of a number dtype. */
static cr_status epa_args(cr_arena *arena, const cr_value *args, size_t nargs, ep_type *t,
                          const cr_array **c)
{
    *c = NULL;
    *t = EP_F64;
    if (nargs != 2 || args[1].kind != CR_KIND_ARRAY || args[1].u.arr == NULL)
        return CR__FAIL(arena, CR_EINVAL, "evalpoly takes a number x and a vector of coefficients");
    const cr_array *a = args[1].u.arr;
    if (a->ndim != 1 || a->shape[0] == 0)
        return CR__FAIL(arena, CR_EINVAL,
                        "evalpoly: the coefficients must be a non-empty vector (got %u dimensions, "
                        "%zu elements)",
                        (unsigned)a->ndim, cr_array_numel(a));
    if (!ep_promote(args, 1, t))
        return CR__FAIL(arena, CR_EINVAL, "evalpoly: x must be a number, not a %s",
                        cr_kind_name(args[0].kind));
    bool xc = args[0].kind == CR_KIND_C128, xs = args[0].kind == CR_KIND_F32;
    bool xi = !xc && !xs && args[0].kind != CR_KIND_F64;
    *t = (xc || a->dtype == CR_DT_C128)                                           ? EP_C128
         : (a->dtype == CR_DT_F32 && (xs || xi)) || (xs && a->dtype != CR_DT_F64) ? EP_F32
                                                                                  : EP_F64;
    *c = a;
    return CR_OK;
}

/* p(x) and p'(x) by Horner's scheme over the vector (complex arithmetic, rounded to t). */
static void epa_horner(ep_type t, cr_complex x, const cr_array *c, cr_complex *p, cr_complex *dp)
{
    size_t m = c->shape[0];
    if (t != EP_C128)
        x = creal(x);
    cr_complex y = cr_array_get_linear(c, m - 1), d = 0;
    for (size_t i = m - 1; i-- > 0;) {
        d = d * x + y;
        y = y * x + cr_array_get_linear(c, i);
    }
    *p = y;
    *dp = d;
}

static cr_status epa_primal(cr_arena *arena, const cr_value *args, size_t nargs, cr_value *out,
                            ep_type *t, cr_complex *dp)
{
    const cr_array *c;
    cr_status st = epa_args(arena, args, nargs, t, &c);
    if (st != CR_OK)
        return st;
    cr_complex p, d;
    epa_horner(*t, ep_value(&args[0]), c, &p, &d);
    *out = ep_result(*t, p);
    if (dp != NULL)
        *dp = d;
    return CR_OK;
}

/* frule: Δy = p'(x) Δx + sum_i x^i Δc_i, Δc an array tangent (or a zero). */
static cr_status evalpoly_arr_frule(CR__FRULE_PARAMS)
{
    ep_type t;
    cr_complex dp, dx = 0, acc = 0, x = ep_value(&args[0]);
    cr_status st = epa_primal(arena, args, nargs, y, &t, &dp);
    if (st != CR_OK)
        return st;
    st = ep_tangent_value(arena, "evalpoly", dargs[1], &dx);
    if (st != CR_OK)
        return st;
    if (args[0].kind != CR_KIND_F64 && args[0].kind != CR_KIND_F32 && args[0].kind != CR_KIND_C128)
        dx = 0;
    cr_tangent tc;
    st = cr_tangent_unthunk(dargs[2], &tc);
    if (st != CR_OK)
        return st;
    const cr_array *c = args[1].u.arr;
    if (tc.tag == CR_TAN_ARRAY && cr_dtype_is_float((cr_dtype)c->dtype)) {
        if (!cr_array_same_shape(tc.u.arr, c))
            return CR__FAIL(arena, CR_ETANGENT,
                            "evalpoly: the tangent of the coefficients has another shape");
        for (size_t i = c->shape[0]; i-- > 0;)
            acc = acc * (t == EP_C128 ? x : creal(x)) + cr_array_get_linear(tc.u.arr, i);
    } else if (tc.tag != CR_TAN_ARRAY && !cr_tangent_is_zero(tc))
        return CR__FAIL(arena, CR_ETANGENT,
                        "evalpoly: the tangent of the coefficients must be an array, not %s",
                        cr_tag_name((cr_tag)tc.tag));
    *dy = ep_tangent(t, dx == 0 ? acc : dp * dx + acc);
    return CR_OK;
}

typedef struct evalpoly_arr_env {
    cr_complex x, dp;
    const cr_array *c;
    cr_kind xkind;
} evalpoly_arr_env;

/* (NoTangent, conj(p'(x)) ȳ projected on x, [conj(x)^i ȳ] projected on c's dtype) */
static cr_status evalpoly_arr_pullback(CR__PULLBACK_PARAMS)
{
    const evalpoly_arr_env *e = env;
    cr_complex g;
    cr_status st = ep_tangent_value(arena, "evalpoly_pullback", *dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = ep_project(e->xkind, conj(e->dp) * g);
    cr_dtype dt = (cr_dtype)e->c->dtype;
    if (!cr_dtype_is_float(dt)) {
        dx[2] = cr_tangent_none();
        return CR_OK;
    }
    cr_array *G;
    st = cr_array_new(arena, dt, 1, e->c->shape, &G);
    if (st != CR_OK)
        return st;
    cr_complex xi = 1;
    for (size_t i = 0; i < e->c->shape[0]; i++) {
        cr_complex v = xi * g;
        if (dt == CR_DT_C128)
            ((cr_complex *)G->data)[i] = v;
        else if (dt == CR_DT_F32)
            ((float *)G->data)[i] = (float)creal(v);
        else
            ((double *)G->data)[i] = creal(v);
        xi *= conj(e->x);
    }
    dx[2] = cr_tangent_array(G);
    return CR_OK;
}

static cr_status evalpoly_arr_rrule(CR__RRULE_PARAMS)
{
    ep_type t;
    cr_complex dp;
    cr_status st = epa_primal(arena, args, nargs, y, &t, &dp);
    if (st != CR_OK)
        return st;
    CR__ARENA_NEW(arena, evalpoly_arr_env, e);
    e->x = t == EP_C128 ? ep_value(&args[0]) : creal(ep_value(&args[0]));
    e->dp = dp;
    e->c = args[1].u.arr;
    e->xkind = args[0].kind;
    *pb = (cr_pullback){evalpoly_arr_pullback, e, "evalpoly_pullback", nargs + 1};
    return CR_OK;
}

/* Arguments for the rule tester: x in [-2, 2] and 1 to 5 coefficients in [-3, 3] (f64). */
static cr_status evalpoly_arr_sample(CR__SAMPLE_PARAMS)
{
    if (nargs != 2)
        return CR_EINVAL;
    uint64_t s[7];
    for (int k = 0; k < 7; k++) { /* splitmix64 */
        uint64_t z = (*rng += 0x9E3779B97F4A7C15u);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        s[k] = z ^ (z >> 31);
    }
    size_t n = 1 + (size_t)(s[0] % 5);
    cr_array *c;
    cr_status st = cr_array_new(arena, CR_DT_F64, 1, &n, &c);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        ((double *)c->data)[i] = -3 + 6 * ((double)(s[i + 2] >> 11) * 0x1.0p-53);
    args[0] = cr_value_f64(-2 + 4 * ((double)(s[1] >> 11) * 0x1.0p-53));
    args[1] = cr_value_array(c);
    return CR_OK;
}

static const cr_rule_test evalpoly_arr_test = {.sample = evalpoly_arr_sample};

static cr_status evalpoly_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                 size_t nargs, cr_value *out)
{
    (void)f;
    if (nargs == 2 && args[1].kind == CR_KIND_ARRAY) {
        ep_type t;
        return epa_primal(arena, args, nargs, out, &t, NULL);
    }
    ep_type t = EP_F64;
    if (nargs < 2 || !ep_promote(args, nargs, &t))
        return CR__FAIL(arena, CR_EINVAL,
                        "evalpoly takes a number x and one or more number coefficients");
    cr_complex p, dp;
    ep_horner(t, args, nargs, &p, &dp);
    *out = ep_result(t, p);
    return CR_OK;
}

static const cr_function evalpoly_function = {
    .name = "evalpoly", .arity = -1, .primal = evalpoly_primal};
const cr_value cr_fn_evalpoly = {.kind = CR_KIND_FUNC, .u.func = {&evalpoly_function, NULL}};

/* frule: Δy = p'(x) Δx + sum_i x^i Δc_i (the second sum by Horner's scheme too). */
static cr_status evalpoly_frule(CR__FRULE_PARAMS)
{
    cr_status st = evalpoly_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    ep_type t = EP_F64;
    ep_promote(args, nargs, &t);
    cr_complex p, dp, x = ep_value(&args[0]), acc = 0, dx = 0;
    ep_horner(t, args, nargs, &p, &dp);
    for (size_t i = nargs; i-- > 1;) {
        cr_complex dc = 0;
        st = ep_tangent_value(arena, "evalpoly", dargs[i + 1], &dc);
        if (st != CR_OK)
            return st;
        if (args[i].kind == CR_KIND_I64 || args[i].kind == CR_KIND_I32 ||
            args[i].kind == CR_KIND_BOOL)
            dc = 0;
        acc = acc * x + dc;
    }
    st = ep_tangent_value(arena, "evalpoly", dargs[1], &dx);
    if (st != CR_OK)
        return st;
    if (args[0].kind == CR_KIND_I64 || args[0].kind == CR_KIND_I32 || args[0].kind == CR_KIND_BOOL)
        dx = 0;
    /* A zero Δx contributes nothing, even where p'(x) is infinite. */
    *dy = ep_tangent(t, dx == 0 ? acc : dp * dx + acc);
    return CR_OK;
}

typedef struct evalpoly_env {
    size_t nargs;
    cr_complex x, dp;
    const cr_kind *kinds; /* of the nargs arguments */
} evalpoly_env;

static cr_status evalpoly_pullback(CR__PULLBACK_PARAMS)
{
    const evalpoly_env *e = env;
    const cr_kind *kinds = e->kinds;
    cr_complex g;
    cr_status st = ep_tangent_value(arena, "evalpoly_pullback", *dy, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = ep_project(kinds[0], conj(e->dp) * g);
    cr_complex xi = 1; /* conj(x)^i */
    for (size_t i = 1; i < e->nargs; i++) {
        dx[i + 1] = ep_project(kinds[i], xi * g);
        xi *= conj(e->x);
    }
    return CR_OK;
}

static cr_status evalpoly_rrule(CR__RRULE_PARAMS)
{
    cr_status st = evalpoly_primal(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    evalpoly_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(evalpoly_env));
    cr_kind *kinds = cr__arena_array(arena, "evalpoly", nargs, sizeof *kinds, _Alignof(cr_kind));
    if (e == NULL || kinds == NULL)
        return CR__ALLOC_STATUS(arena);
    ep_type t = EP_F64;
    ep_promote(args, nargs, &t);
    cr_complex p;
    ep_horner(t, args, nargs, &p, &e->dp);
    e->nargs = nargs;
    e->x = ep_value(&args[0]);
    for (size_t i = 0; i < nargs; i++)
        kinds[i] = args[i].kind;
    e->kinds = kinds;
    *pb = (cr_pullback){evalpoly_pullback, e, "evalpoly_pullback", nargs + 1};
    return CR_OK;
}

/* Test registration of the variadic rule: as many coordinates as matchers (x, c0, c1). */
static const double evalpoly_lo[] = {-2, -3, -3}, evalpoly_hi[] = {2, 3, 3};
static const double evalpoly_pts[] = {-0.5, 1e-300, -1, 1e300, 1, 2};
static const cr_rule_test evalpoly_test = {
    .npoints = NPTS(evalpoly_pts, 3), .points = evalpoly_pts, .lo = evalpoly_lo, .hi = evalpoly_hi};

/* ---- Registration ------------------------------------------------------------------------ */

static const struct fn_row {
    const cr_function *fn;
    const cr_scalar_rule *row;
} k_rows[] = {
    FN_ROW(add),      FN_ROW(sub),   FN_ROW(mul),    FN_ROW(div),  FN_ROW(neg),
    FN_ROW(identity), FN_ROW(inv),   FN_ROW(square), FN_ROW(cube), FN_ROW(sign),
    FN_ROW(muladd),   FN_ROW(clamp), FN_ROW(max),    FN_ROW(min),
};

cr_status cr__family_basic(cr_registry *reg)
{
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; i++) {
        cr_status st = cr_scalar_rule_register(reg, k_rows[i].fn, k_rows[i].row);
        if (st != CR_OK)
            return st;
    }
    /* evalpoly(x, c0, c1...): at least one coefficient (the last matcher repeats). */
    static const cr_argspec num3[3] = {
        {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL | CR_M_C128, NULL},
        {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL | CR_M_C128, NULL},
        {CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL | CR_M_C128, NULL}};
    cr_status st = cr__register(reg, &evalpoly_function, num3, 3, true, evalpoly_frule,
                                evalpoly_rrule, NULL, &evalpoly_test);
    if (st != CR_OK)
        return st;
    /* evalpoly(x, c) with a vector of coefficients */
    const cr_argspec num_arr[2] = {{CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL | CR_M_C128, NULL},
                                   CR_ARG_ARRAY};
    st = cr__register(reg, &evalpoly_function, num_arr, 2, false, evalpoly_arr_frule,
                      evalpoly_arr_rrule, NULL, &evalpoly_arr_test);
    if (st != CR_OK)
        return st;
    static const cr_argspec any1[1] = {{0x1FFFu, NULL}};
    return cr_registry_non_differentiable(reg, &cr_function_ignore_derivatives, any1, 1, false);
}
