/*
 * cexpint2(ν, z) = E_ν(z), the generalised exponential integral of a real order and a
 * complex argument (SpecialFunctions' expint(ν, z) for complex z), on the principal branch
 * (the cut on the negative real axis, its side chosen by the sign of a zero imaginary part):
 * the power series of DLMF 8.19.10 near 0 and left of 0 near the cut, the continued
 * fraction of DLMF 8.19.17 elsewhere. ∂/∂z = -E_(ν-1)(z) (DLMF 8.19.13); ∂/∂ν is
 * NotImplemented, as for expint2 (SpecialFunctions.jl issue 321).
 */
#include <chainrules/rules_special.h>

#include "rows_impl.h"

#define EULER 0.57721566490153286061

/* log Γ(1 + e) for |e| <= 1/4: -γ e + Σ_(k>=2) ζ(k) (-e)^k / k (DLMF 5.7.3), with no
 * cancellation for small e (lgamma(1 + e) has an absolute, not relative, error there). */
static double lgamma1p_small(double e)
{
    static const double zeta[17] = {0,
                                    0,
                                    1.6449340668482264365,
                                    1.2020569031595942854,
                                    1.0823232337111381915,
                                    1.0369277551433699263,
                                    1.0173430619844491397,
                                    1.0083492773819228268,
                                    1.0040773561979443394,
                                    1.0020083928260822144,
                                    1.0009945751278180853,
                                    1.0004941886041194646,
                                    1.0002460865533080483,
                                    1.0001227133475784891,
                                    1.0000612481350587048,
                                    1.0000305882363070205,
                                    1.0000152822594086519};
    double s = -EULER * e, p = -e;
    for (int k = 2; k <= 60; k++) {
        p *= -e;
        /* ζ(k) = 1 + 2^-k + 3^-k + (below 2^-60 relative for k > 16) */
        double z = k <= 16 ? zeta[k] : 1 + ldexp(1, -k) + pow(3, -k);
        double t = z * p / k;
        s += t;
        if (fabs(t) <= 1e-18 * fabs(s))
            break;
    }
    return s;
}

/* e^w - 1 for a complex w, without cancellation for small |w|. */
static cr_complex cexpm1_(cr_complex w)
{
    double a = creal(w), b = cimag(w), sb = sin(b / 2);
    return cr__c(expm1(a) * cos(b) - 2 * sb * sb, exp(a) * sin(b));
}

/* E_ν(z) = Γ(1-ν) z^(ν-1) - Σ_(k>=0) (-z)^k / (k! (1-ν+k)). For ν within 1/4 of an integer
 * n >= 1 the first term and the term k = n-1 (both of order 1/(n-ν)) are combined: with
 * e = n - ν, they are (-z)^(n-1)/(n-1)! · (e^L - 1)/e, L = log Γ(1+e) - e log z -
 * Σ_(j<n) log(1 - e/j), and at e = 0 (-z)^(n-1)/(n-1)! (ψ(n) - log z). */
static cr_complex ev_series(double nu, cr_complex z)
{
    double n = nearbyint(nu), e = n - nu, az = cabs(z);
    long kn = n >= 1 && fabs(e) <= 0.25 ? (long)n - 1 : -1;
    cr_complex s = 0, t = 1, lz = clog(z), head = 0;
    for (long k = 0; k < 1000000; k++) {
        if (k > 0)
            t *= -z / (double)k; /* (-z)^k / k! */
        if (k == kn) {
            cr_complex L = lgamma1p_small(e) - e * lz;
            double h = 0;
            for (long j = 1; j <= kn; j++) {
                L -= log1p(-e / (double)j);
                h += 1.0 / (double)j;
            }
            head = t * (e == 0 ? h - EULER - lz : cexpm1_(L) / e);
            continue;
        }
        cr_complex term = t / (1 - nu + (double)k);
        s += term;
        if (k > kn && k > az && cabs(term) <= 1e-17 * cabs(s))
            break;
    }
    return (kn >= 0 ? head : cexp((nu - 1) * lz) * tgamma(1 - nu)) - s;
}

/* The continued fraction z + ν - 1·ν/(z + ν + 2 - 2(ν+1)/(z + ν + 4 - ...)) to depth N,
 * evaluated backwards. */
static cr_complex ev_cf_n(double nu, cr_complex z, int N)
{
    cr_complex t = z + nu + 2.0 * N;
    for (int k = N; k >= 1; k--)
        t = z + nu + 2.0 * (k - 1) - (double)k * (nu - 1 + k) / t;
    return t;
}

/* E_ν(z) = e^-z / (the fraction), its depth doubled until two agree. */
static cr_complex ev_cf(double nu, cr_complex z)
{
    cr_complex f = ev_cf_n(nu, z, 40);
    for (int N = 80; N <= (1 << 18); N *= 2) {
        cr_complex g = ev_cf_n(nu, z, N);
        bool done = cabs(g - f) <= 1e-16 * cabs(g);
        f = g;
        if (done)
            break;
    }
    return cexp(-z) / f;
}

cr_complex cr_sf_expint2_complex(double nu, cr_complex z)
{
    double x = creal(z), y = cimag(z), r = cabs(z);
    if (isnan(nu) || isnan(x) || isnan(y) || fabs(nu) > 100000)
        return cr__c((double)NAN, (double)NAN);
    if (r == 0) /* E_ν(0) = 1/(ν-1) for ν > 1; the integral diverges otherwise */
        return cr__c(nu > 1 ? 1 / (nu - 1) : (double)INFINITY, 0.0);
    /* The series where its terms (about e^|z|) do not cancel much against the result:
     * |z| <= 1, or left of 0 near the cut (y² <= 6|x|: at most a factor e^3 cancels); the
     * continued fraction elsewhere, away from the cut. As for E1, beyond |z| = 740 on the
     * series' side the terms overflow: E_ν(z) is then infinite in double. */
    if (r <= 1 || (x < 0 && y * y <= 6 * -x))
        return r > 740 ? cr__c(-(double)INFINITY, -copysign(3.14159265358979323846, y))
                       : ev_series(nu, z);
    return ev_cf(nu, z);
}

/* ---- The rule ------------------------------------------------------------------------------ */

#define CEXPINT2_INFO                                                                          \
    "the derivative of the exponential integral with respect to its order is not implemented " \
    "(SpecialFunctions.jl issue 321)"

static bool real_kind(cr_kind k)
{
    return k == CR_KIND_F64 || k == CR_KIND_F32 || cr__is_int_kind(k);
}

/* A number value as a complex number. */
static cr_complex number_of(const cr_value *v)
{
    switch ((cr_kind)v->kind) {
    case CR_KIND_F64:
        return v->u.f64;
    case CR_KIND_F32:
        return (double)v->u.f32;
    case CR_KIND_C128:
        return v->u.c128;
    case CR_KIND_BOOL:
        return v->u.b ? 1.0 : 0.0;
    default:
        return (double)v->u.i64;
    }
}

/* ν (a real number) and z (any number) of cexpint2(ν, z). */
static cr_status cexpint2_args(cr_arena *arena, const cr_value *args, size_t nargs, double *nu,
                               cr_complex *z)
{
    if (nargs != 2)
        return CR__FAIL(arena, CR_EINVAL, "cexpint2 takes 2 arguments (ν, z), %zu given", nargs);
    if (!real_kind((cr_kind)args[0].kind))
        return CR__FAIL(arena, CR_EINVAL, "cexpint2: the order is a %s, not a real number",
                        cr_kind_name(args[0].kind));
    cr_kind zk = (cr_kind)args[1].kind;
    if (!real_kind(zk) && zk != CR_KIND_C128)
        return CR__FAIL(arena, CR_EINVAL, "cexpint2: z is a %s, not a number",
                        cr_kind_name(args[1].kind));
    *nu = creal(number_of(&args[0]));
    *z = number_of(&args[1]);
    return CR_OK;
}

static cr_status cexpint2_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                 size_t nargs, cr_value *out)
{
    (void)f;
    double nu = 0;
    cr_complex z = 0;
    cr_status st = cexpint2_args(arena, args, nargs, &nu, &z);
    if (st == CR_OK)
        *out = cr_value_c128(cr_sf_expint2_complex(nu, z));
    return st;
}

static const cr_function cexpint2_function = {
    .name = "cexpint2", .arity = 2, .primal = cexpint2_primal};
const cr_value cr_fn_cexpint2 = {.kind = CR_KIND_FUNC, .u.func = {&cexpint2_function, NULL}};

/* A tangent's number, NotImplemented (*ni) and zeros (*nz false) told apart. */
static cr_status tan_number(cr_arena *arena, cr_tangent t, cr_complex *v, bool *nz, bool *ni)
{
    *v = 0;
    *nz = *ni = false;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    if (t.tag == CR_TAN_NOTIMPL) {
        *ni = true;
        return CR_OK;
    }
    return cr__tangent_scalar(arena, "cexpint2", t, v, nz);
}

/* ẏ = -E_(ν-1)(z) ż; NotImplemented when ν̇ is nonzero (an integer order has none). */
static cr_status cexpint2_frule(CR__FRULE_PARAMS)
{
    double nu = 0;
    cr_complex z, nd, zd;
    bool nnz, nni, znz, zni;
    cr_status st = cexpint2_args(arena, args, nargs, &nu, &z);
    if (st == CR_OK)
        st = tan_number(arena, dargs[1], &nd, &nnz, &nni);
    if (st == CR_OK)
        st = tan_number(arena, dargs[2], &zd, &znz, &zni);
    if (st != CR_OK)
        return st;
    *y = cr_value_c128(cr_sf_expint2_complex(nu, z));
    bool order = (nnz || nni) && !cr__is_int_kind((cr_kind)args[0].kind);
    bool zint = cr__is_int_kind((cr_kind)args[1].kind);
    if (order || (zni && !zint))
        return CR_NOT_IMPLEMENTED(arena, order ? CEXPINT2_INFO : "NotImplemented tangent of z", dy);
    if (!znz || zint) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    *dy = cr_tangent_c128(-cr_sf_expint2_complex(nu - 1, z) * zd);
    return CR_OK;
}

typedef struct cexpint2_env {
    cr_complex d; /* ∂E/∂z = -E_(ν-1)(z) */
    uint8_t nkind, zkind;
} cexpint2_env;

/* (NoTangent, NotImplemented (NoTangent for an integer order), conj(∂E/∂z) ȳ projected onto
 * z: its real part for a real z, f32 for an f32 one). */
static cr_status cexpint2_pullback(CR__PULLBACK_PARAMS)
{
    const cexpint2_env *e = env;
    cr_complex g;
    bool nz, ni;
    cr_status st = tan_number(arena, *dy, &g, &nz, &ni);
    if (st != CR_OK)
        return st;
    cr__dx_none(dx, nx);
    if (!cr__is_int_kind((cr_kind)e->nkind)) {
        if (nz || ni)
            st = CR_NOT_IMPLEMENTED(arena, CEXPINT2_INFO, &dx[1]);
        else
            dx[1] = cr_tangent_zero();
    }
    if (st != CR_OK || cr__is_int_kind((cr_kind)e->zkind))
        return st;
    if (ni)
        return CR_NOT_IMPLEMENTED(arena, "NotImplemented cotangent", &dx[2]);
    cr_complex v = conj(e->d) * g;
    if (!nz)
        dx[2] = cr_tangent_zero();
    else if (e->zkind == CR_KIND_C128)
        dx[2] = cr_tangent_c128(v);
    else
        dx[2] = cr__project_real((cr_kind)e->zkind, creal(v));
    return CR_OK;
}

static cr_status cexpint2_rrule(CR__RRULE_PARAMS)
{
    double nu = 0;
    cr_complex z = 0;
    cr_status st = cexpint2_args(arena, args, nargs, &nu, &z);
    if (st != CR_OK)
        return st;
    cexpint2_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(cexpint2_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    *y = cr_value_c128(cr_sf_expint2_complex(nu, z));
    e->d = -cr_sf_expint2_complex(nu - 1, z);
    e->nkind = (uint8_t)args[0].kind;
    e->zkind = (uint8_t)args[1].kind;
    *pb = (cr_pullback){cexpint2_pullback, e, "cexpint2_pullback", 3};
    return CR_OK;
}

/* ν in [-2.5, 4.5], z's parts in [-4, 4] (complex z: the left half-plane and the cut's
 * neighbourhood included); hard points on the method switch (|z| = 1), near integer orders
 * (where the series combines two terms), at integer orders (the logarithmic case), on the
 * negative real axis (a real z: the upper side of the cut) and at a negative order. */
static const double k_lo[2] = {-2.5, -4.0}, k_hi[2] = {4.5, 4.0};
static const double k_pts[] = {1.0,  0.5,   1.0000001, 0.3,  0.9999, 2.0, 2.0, -3.0, 0.75, 1.0,
                               0.75, 1.001, 3.0,       -0.5, -2.5,   2.0, 0.0, 1.5,  2.2,  -0.7};
static const cr_rule_test k_test = {
    .lo = k_lo, .hi = k_hi, .points = k_pts, .npoints = sizeof k_pts / sizeof k_pts[0] / 2};

/* The family of cexpint2 (builtin.c). */
CR_INTERNAL cr_status cr__family_cexpint(cr_registry *reg);
cr_status cr__family_cexpint(cr_registry *reg)
{
    const cr_argspec a[2] = {CR_ARG_REAL, CR_ARG_NUMBER}; /* copied by the registry */
    cr_rule_def d = {0};
    d.fn = &cexpint2_function;
    d.nargs = 2;
    d.args = a;
    d.frule = cexpint2_frule;
    d.rrule = cexpint2_rrule;
    d.test = &k_test;
    return cr_registry_add(reg, &d);
}
