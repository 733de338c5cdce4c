/*
 * Second-order forms (cr_rule_form) of the reductions and their kin: logsumexp, softmax,
 * logsoftmax, prod, norm (and nrm2), normalize, var, std, cumprod and sum(f, A) of a
 * scalar-table function. For a call y = f(x, ...) whose result has the cotangent ȳ, a form
 * gives, along each direction ẋ,
 *
 *     S = d/dε [pullback at x + ε ẋ](ȳ),
 *
 * the derivative of the pullback itself (the engine adds pullback(ȳ̇) separately). The first
 * derivatives in S come from the rules: the recorded pullback (called with ȳ), the result's
 * tangent ẏ that the forward sweep got from the function's frule, and the frules of softmax
 * and norm. What is written here is only what the rules cannot give: the second derivative,
 * each with its formula and derivation next to it.
 *
 * Reductions over dimensions (dims) work slice by slice: a slice is the set of elements of x
 * reduced into one element of the result; ȳ, and the sums the forms take, are per slice.
 */
#include <complex.h>
#include <math.h>
#include <string.h>

#include <chainrules/rules_array.h>
#include <chainrules/rules_linalg.h>

#include "family.h"

/* ---- softmax, logsoftmax, logsumexp ---------------------------------------------------------- */

/* ṡ = softmax's frule tangent at the call's arguments (x[, dims]) along ẋ. */
static cr_status softmax_dot(const cr__form *F, cr_tangent xdot, const double **sd)
{
    cr_tangent dargs[3] = {cr_tangent_none(), xdot, cr_tangent_zero()};
    cr_value y;
    cr_tangent dy;
    cr_status st =
        cr_frule(F->p->cfg, F->arena, dargs, &cr_fn_softmax, F->p->args, F->p->nargs, &y, &dy);
    if (st == CR_OK)
        st = cr__form_like_x0(F, dy, sd);
    return st;
}

/* The state of the softmax family: x, and per slice the cotangent's numbers. */
typedef struct sm_state {
    cr__form F;
    const double *yb; /* ȳ: per slice (logsumexp) or of x's shape */
    const double *y;  /* softmax: the result */
    double *c;        /* logsoftmax: Σȳ per slice; softmax: Σ y ⊙ ȳ per slice */
} sm_state;

/* Σ over each slice of a ⊙ b (b NULL: of a), into a new array of ns values. */
static cr_status slice_sums(const cr__form *F, const double *a, const double *b, double **out)
{
    double *o = cr_arena_calloc(F->arena, F->ns, sizeof *o, _Alignof(double));
    if (o == NULL)
        return CR__ALLOC_STATUS(F->arena);
    for (size_t e = 0; e < F->N; e++)
        o[cr__form_slice(F, e)] += b == NULL ? a[e] : a[e] * b[e];
    *out = o;
    return CR_OK;
}

/*
 * logsumexp(x[, dims]): the pullback is x̄ = ȳ ⊙ softmax(x) (ȳ spread over each slice), so
 *     S = ȳ ⊙ ṡ,   ṡ = softmax's frule tangent at x along ẋ.
 */
static cr_status logsumexp_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(sm_state), 0, cr__form_opt(p, 1), state);
    sm_state *z = *state;
    return st == CR_OK ? cr__form_ybar_slices(&z->F, &z->yb) : st;
}

/* S = sign c[slice] ṡ, ṡ = softmax's frule tangent at x along ẋ (c one value a slice). */
static cr_status sm_slice_dir(const sm_state *z, const double *c, double sign,
                              const cr_tangent *xdot, cr_tangent *S)
{
    const cr__form *F = &z->F;
    const double *sd;
    cr_array *Sa;
    cr_status st;
    if ((st = softmax_dot(F, xdot[0], &sd)) != CR_OK || (st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    double *s = Sa->data;
    for (size_t e = 0; e < F->N; e++)
        s[e] = sign * c[cr__form_slice(F, e)] * sd[e];
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

static cr_status logsumexp_dir(CR__FORM_DIR_PARAMS)
{
    const sm_state *z = state;
    return sm_slice_dir(z, z->yb, 1.0, xdot, S);
}

static const char *softmax_check(CR__FORM_CHECK_PARAMS)
{
    return cr__form_check_leading(args, nargs, var, 1);
}

const cr_rule_form cr__form_logsumexp = {softmax_check, logsumexp_init, logsumexp_dir};

/*
 * logsoftmax(x[, dims]) = x - logsumexp(x): the pullback is x̄ = ȳ - softmax(x) Σȳ (the sum
 * over each slice), so
 *     S = -ṡ Σȳ,   ṡ = softmax's frule tangent at x along ẋ.
 */
/* The state of logsoftmax's and softmax's forms with ȳ of x's shape (CR_NOTHING when ȳ is
 * zero). */
static cr_status sm_state_ybar(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(sm_state), 0, cr__form_opt(p, 1), state);
    sm_state *z = *state;
    if (st == CR_OK && (st = cr__form_like_x(&z->F, p->ybar, &z->yb)) == CR_OK && z->yb == NULL)
        return CR_NOTHING;
    return st;
}

static cr_status logsoftmax_init(const cr_form_point *p, void **state)
{
    cr_status st = sm_state_ybar(p, state);
    sm_state *z = *state;
    return st == CR_OK ? slice_sums(&z->F, z->yb, NULL, &z->c) : st;
}

static cr_status logsoftmax_dir(CR__FORM_DIR_PARAMS)
{
    const sm_state *z = state;
    return sm_slice_dir(z, z->c, -1.0, xdot, S);
}

const cr_rule_form cr__form_logsoftmax = {softmax_check, logsoftmax_init, logsoftmax_dir};

/*
 * softmax(x[, dims]) = y: the pullback is x̄ = y ⊙ (ȳ - c), c = Σ y ⊙ ȳ over each slice. Its
 * derivative along ẋ, with ẏ the result's tangent (softmax's frule, from the forward sweep):
 *     S = ẏ ⊙ (ȳ - c) - y ⊙ ċ,   ċ = Σ ẏ ⊙ ȳ over each slice.
 */
static cr_status softmax_init(const cr_form_point *p, void **state)
{
    cr_status st = sm_state_ybar(p, state);
    sm_state *z = *state;
    if (st == CR_OK)
        st = cr__form_y_array(&z->F, &z->y);
    return st == CR_OK ? slice_sums(&z->F, z->y, z->yb, &z->c) : st;
}

static cr_status softmax_dir(CR__FORM_DIR_PARAMS)
{
    sm_state *z = state;
    const cr__form *F = &z->F;
    const double *xd, *yd;
    double *cd;
    cr_array *Sa;
    cr_status st;
    if ((st = cr__form_like_x(F, xdot[0], &xd)) != CR_OK || xd == NULL)
        return st;
    if ((st = cr__form_like_x(F, ydot, &yd)) != CR_OK || yd == NULL)
        return st;
    if ((st = slice_sums(F, yd, z->yb, &cd)) != CR_OK || (st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    double *s = Sa->data;
    for (size_t e = 0; e < F->N; e++) {
        size_t q = cr__form_slice(F, e);
        s[e] = yd[e] * (z->yb[e] - z->c[q]) - z->y[e] * cd[q];
    }
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_softmax = {softmax_check, softmax_init, softmax_dir};

/* ---- prod ------------------------------------------------------------------------------------ */

typedef struct prod_state {
    cr__form F;
    const double *yb; /* ȳ per slice */
    double *P;        /* N: per element, the prefix product of its slice (its value; the ε
                       * part waits in S) */
    double *av, *ad;  /* ns each: per slice, the running product (value, ε part) */
} prod_state;

/*
 * prod(x[, dims]): per slice, y = Π x_j and the pullback is x̄_i = ȳ Π_{j≠i} x_j (the
 * recorded pullback, by prefix and suffix products). Its derivative along ẋ is
 *     S_i = ȳ Σ_{k≠i} ẋ_k Π_{j∉{i,k}} x_j = ȳ ε-part of Π_{j≠i} (x_j + ε ẋ_j),
 * the dual numbers' product (ε² = 0). It is taken as the pullback takes its products: the
 * prefix product p_i + ε p'_i of the slice before i (a forward walk) times the suffix
 * product q_i + ε q'_i after i (a backward walk), S_i = ȳ (p_i q'_i + p'_i q_i), in O(N)
 * per direction with no division:
 * exact where x has zeros (one zero a: S_a = ȳ Σ_{k≠a} ẋ_k Π_{j∉{a,k}} x_j and
 * S_i = ȳ ẋ_a Π_{j∉{a,i}} x_j; two: S nonzero at the two zeros only; three or more: S = 0)
 * and where y underflows or ẋ_k / x_k would overflow.
 */
static cr_status prod_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(prod_state), 0, cr__form_opt(p, 1), state);
    prod_state *w = *state;
    if (st == CR_OK)
        st = cr__form_ybar_slices(&w->F, &w->yb);
    if (st != CR_OK)
        return st;
    const cr__form *F = &w->F;
    size_t N = F->N ? F->N : 1, ns = F->ns ? F->ns : 1;
    w->P = cr_arena_calloc(F->arena, N, sizeof *w->P, _Alignof(double));
    w->av = cr_arena_calloc(F->arena, ns, sizeof *w->av, _Alignof(double));
    w->ad = cr_arena_calloc(F->arena, ns, sizeof *w->ad, _Alignof(double));
    return w->P == NULL || w->av == NULL || w->ad == NULL ? CR__ALLOC_STATUS(F->arena) : CR_OK;
}

/* The running products of every slice := 1 + 0 ε. */
static void prod_acc_one(double *av, double *ad, size_t ns)
{
    for (size_t q = 0; q < ns; q++) {
        av[q] = 1.0;
        ad[q] = 0.0;
    }
}

static cr_status prod_dir(CR__FORM_DIR_PARAMS)
{
    prod_state *w = state;
    const cr__form *F = &w->F;
    const double *xd, *x = F->x->data, *yb = w->yb;
    double *P = w->P, *av = w->av, *ad = w->ad;
    cr_array *Sa;
    cr_status st;
    if ((st = cr__form_like_x(F, xdot[0], &xd)) != CR_OK || xd == NULL)
        return st;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    double *s = Sa->data;
    prod_acc_one(av, ad, F->ns);
    for (size_t e = 0; e < F->N; e++) { /* P_e + ε s_e: Π of the slice's elements before e */
        size_t q = cr__form_slice(F, e);
        P[e] = av[q];
        s[e] = ad[q];
        ad[q] = ad[q] * x[e] + av[q] * xd[e];
        av[q] *= x[e];
    }
    prod_acc_one(av, ad, F->ns);
    for (size_t e = F->N; e-- > 0;) { /* av, ad: Π of the slice's elements after e */
        size_t q = cr__form_slice(F, e);
        s[e] = yb[q] * (P[e] * ad[q] + s[e] * av[q]);
        ad[q] = ad[q] * x[e] + av[q] * xd[e];
        av[q] *= x[e];
    }
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_prod = {softmax_check, prod_init, prod_dir};

/* ---- norm, normalize --------------------------------------------------------------------------
 */

/* The exponent of norm(x[, p]) or normalize(x[, p]). */
static double norm_p(const cr_form_point *p)
{
    return p->nargs > 1 ? creal(cr__scalar_of(&p->args[1])) : 2.0;
}

/* The norm's second derivative along ẋ, scaled (see norm_init for the derivation): with
 * G = ȳ ∇y and ẏ = ∇y · ẋ,
 *     s = (p-1)/y (ȳ (|x|/y)^(p-2) ⊙ ẋ - G ẏ)   (0 for p = Inf).
 * Also used by normalize's form (ȳ = 1, G = ∇y). */
static void norm_hdir(const double *x, size_t N, double p, double y, double ybar, const double *G,
                      const double *xd, double ydot, double *s)
{
    double c = (p - 1.0) / y;
    for (size_t e = 0; e < N; e++) {
        if (isinf(p)) {
            s[e] = 0.0;
            continue;
        }
        double w = p == 2.0 ? 1.0 : pow(fabs(x[e]) / y, p - 2.0);
        s[e] = c * (ybar * w * xd[e] - G[e] * ydot);
    }
}

/* The points where the norm of x (y) has no second derivative: a zero array, and a zero
 * element when p < 2 (CR_EDOMAIN). */
static cr_status norm_domain(const cr__form *F, double p, double y)
{
    const double *x = F->x->data;
    if (y == 0.0)
        return cr__form_fail(F, CR_EDOMAIN,
                             "%s: no second derivative at a zero array (the norm is not twice "
                             "differentiable there)",
                             F->who);
    for (size_t e = 0; e < F->N && p < 2.0; e++)
        if (x[e] == 0.0)
            return cr__form_fail(F, CR_EDOMAIN,
                                 "%s: no second derivative at a zero element (element %zu) when "
                                 "p = %g < 2",
                                 F->who, e, p);
    return CR_OK;
}

/* norm and normalize take a constant exponent. */
static const char *norm_check(CR__FORM_CHECK_PARAMS)
{
    const char *why = cr__form_check_leading(args, nargs, var, 1);
    return why != NULL && nargs > 1 && var[1] ? "the exponent p is a variable" : why;
}

typedef struct norm_state {
    cr__form F;
    double p, y;
    const double *yb, *G;
} norm_state;

/*
 * norm(x, p) = y = (Σ |x_j|^p)^(1/p) (p = 2 by default). With g = ∇y (g_i = sgn(x_i)
 * |x_i|^(p-1) / y^(p-1)), differentiating g_i once more:
 *     ∂g_i/∂x_l = (p-1) |x_i|^(p-2) / y^(p-1) δ_il + (1-p) sgn(x_i) |x_i|^(p-1) y^(-p) g_l
 *               = (p-1)/y ((|x_i|/y)^(p-2) δ_il - g_i g_l),
 * so, with G = ȳ g (the recorded pullback applied to ȳ) and ẏ = g·ẋ (norm's frule, from the
 * forward sweep),
 *     S = (p-1)/y (ȳ (|x|/y)^(p-2) ⊙ ẋ - G ẏ);   p = 2: S = (ȳ ẋ - G ẏ) / y.
 * p = Inf: the norm is the largest |x_j|, linear near x: S = 0 (p = -Inf the smallest; p = 0
 * counts the nonzero elements, constant near x). The same S for p < 0. Refused
 * (CR_EDOMAIN, no second derivative there): y = 0, and a zero element when p < 2.
 */
static cr_status norm_init(const cr_form_point *p, void **state)
{
    double pp = norm_p(p), y = creal(cr__scalar_of(p->y));
    if (isinf(pp) || pp == 0)
        return CR_NOTHING; /* the largest or smallest |x_j|, or a count: linear or constant */
    cr_status st = cr__form_state(p, sizeof(norm_state), 0, NULL, state);
    norm_state *w = *state;
    if (st == CR_OK)
        st = cr__form_ybar_slices(&w->F, &w->yb);
    if (st == CR_OK)
        st = norm_domain(&w->F, pp, y);
    if (st == CR_OK)
        st = cr__form_pulled(&w->F, &w->G);
    if (st == CR_OK) {
        w->p = pp;
        w->y = y;
    }
    return st;
}

/* The start of a direction: ẋ (xdot) as an f64 array like x, the output's tangent ẏ as an
 * array (when yd is not NULL) and a new S of x's shape. False when there is nothing more to
 * do: *st a failure, or CR_OK for a zero ẋ (S stays zero). */
static bool dir_start(const cr__form *F, cr_tangent xdot, cr_tangent ydot, const double **yd,
                      const double **xd, cr_array **Sa, cr_status *st)
{
    return (*st = cr__form_like_x(F, xdot, xd)) == CR_OK && *xd != NULL &&
           (yd == NULL || (*st = cr__form_y_dot_arr(F, ydot, yd)) == CR_OK) &&
           (*st = cr__form_new_s(F, Sa)) == CR_OK;
}

static cr_status norm_dir(CR__FORM_DIR_PARAMS)
{
    norm_state *w = state;
    const double *xd;
    cr_array *Sa;
    cr_status st;
    if (!dir_start(&w->F, xdot[0], ydot, NULL, &xd, &Sa, &st))
        return st;
    norm_hdir(w->F.x->data, w->F.N, w->p, w->y, w->yb[0], w->G, xd, cr__form_scalar(ydot),
              Sa->data);
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_norm = {norm_check, norm_init, norm_dir};

typedef struct normalize_state {
    cr__form F;
    double p, n, nbar;
    const double *yb, *y, *g;
} normalize_state;

/*
 * normalize(x[, p]) = y = x / n, n = norm(x, p): the rule's pullback is
 *     x̄ = Ȳ / n + n̄ g,   n̄ = -⟨y, Ȳ⟩ / n,   g = ∇n (norm's pullback applied to 1).
 * Along ẋ, with ṅ = ⟨g, ẋ⟩, ẏ the result's tangent (normalize's frule, from the forward sweep)
 * and ġ = H_n ẋ (the norm's second derivative, norm_hdir):
 *     ṅ̄ = -⟨ẏ, Ȳ⟩ / n + ⟨y, Ȳ⟩ ṅ / n² = -(⟨ẏ, Ȳ⟩ + n̄ ṅ) / n,
 *     S = -Ȳ ṅ / n² + n̄ H_n ẋ + ṅ̄ g.
 * The norm's points without a second derivative (a zero element when p < 2) are refused as
 * for norm (a zero array is refused by the rule itself).
 */
static cr_status normalize_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(normalize_state), 0, NULL, state);
    normalize_state *w = *state;
    if (st == CR_OK && (st = cr__form_like_x(&w->F, p->ybar, &w->yb)) == CR_OK && w->yb == NULL)
        return CR_NOTHING;
    if (st == CR_OK)
        st = cr__form_y_array(&w->F, &w->y);
    cr_value nv;
    cr_pullback npb;
    cr_tangent one = cr_tangent_f64(1.0), dx[3];
    if (st == CR_OK)
        st = cr_rrule(p->cfg, p->arena, &cr_fn_norm, p->args, p->nargs, &nv, &npb);
    if (st == CR_OK)
        st = cr_pullback_call(p->arena, &npb, &one, dx, p->nargs + 1);
    if (st == CR_OK)
        st = cr__form_like_x(&w->F, dx[1], &w->g);
    if (st != CR_OK)
        return st;
    w->p = norm_p(p);
    w->n = creal(cr__scalar_of(&nv));
    if ((st = norm_domain(&w->F, w->p, w->n)) != CR_OK)
        return st;
    if (w->g == NULL)
        return CR_NOTHING; /* the rule refused a zero norm when recorded */
    double c = 0.0;
    for (size_t e = 0; e < w->F.N; e++)
        c += w->y[e] * w->yb[e];
    w->nbar = -c / w->n;
    return CR_OK;
}

static cr_status normalize_dir(CR__FORM_DIR_PARAMS)
{
    normalize_state *w = state;
    const cr__form *F = &w->F;
    const double *xd, *yd, *g = w->g, *yb = w->yb;
    cr_array *Sa;
    cr_status st;
    if (!dir_start(F, xdot[0], ydot, &yd, &xd, &Sa, &st))
        return st;
    double nd_ = 0.0, yy = 0.0, n = w->n; /* ṅ, ⟨ẏ, Ȳ⟩ */
    for (size_t e = 0; e < F->N; e++) {
        nd_ += g[e] * xd[e];
        yy += yd != NULL ? yd[e] * yb[e] : 0.0;
    }
    double *s = Sa->data, nbd = -(yy + w->nbar * nd_) / n;
    norm_hdir(F->x->data, F->N, w->p, n, 1.0, g, xd, nd_, s); /* H_n ẋ */
    for (size_t e = 0; e < F->N; e++)
        s[e] = -yb[e] * nd_ / (n * n) + w->nbar * s[e] + nbd * g[e];
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_normalize = {norm_check, normalize_init, normalize_dir};

/* ---- var, std -------------------------------------------------------------------------------- */

/* var's rrule at the call's arguments with x replaced by xa, its pullback applied to cot:
 * x's component (a tangent of x's shape). */
static cr_status var_pulled_at(const cr__form *F, const cr_array *xa, cr_tangent cot,
                               cr_tangent *out)
{
    const cr_form_point *p = F->p;
    cr_value vals[CR__FORM_MAX_ARGS], y;
    cr_tangent dx[CR__FORM_MAX_ARGS + 1];
    if (p->nargs > CR__FORM_MAX_ARGS)
        return CR_EINVAL;
    memcpy(vals, p->args, p->nargs * sizeof *vals);
    vals[F->xj] = cr_value_array((cr_array *)(uintptr_t)xa); /* only read */
    cr_pullback pb;
    cr_status st = cr_rrule(p->cfg, F->arena, &cr_fn_var, vals, p->nargs, &y, &pb);
    if (st == CR_OK)
        st = cr_pullback_call(F->arena, &pb, &cot, dx, p->nargs + 1);
    if (st == CR_OK)
        *out = dx[F->xj + 1];
    return st;
}

/* ẋ as an f64 array of x's shape (NULL when zero). */
static cr_status x_dot_arr(const cr__form *F, cr_tangent raw, const cr_array **xa)
{
    *xa = NULL;
    if (cr_tangent_is_zero(raw))
        return CR_OK;
    return cr__tan_array(F->arena, F->who, raw, F->x->ndim, F->x->shape, CR_DT_F64, xa);
}

/*
 * var(x[, dims]) = Σ (x - μ)² / (n - 1) per slice is a quadratic form of x, so its pullback,
 * x̄ = 2 ȳ (x - μ) / (n - 1), is linear in x and its derivative along ẋ is the same pullback
 * at ẋ:
 *     S = var's rrule at ẋ (same dims), its pullback applied to ȳ.
 * No derivative is written: a call of the rule.
 */
static cr_status var_init(const cr_form_point *p, void **state)
{
    return cr__form_state(p, sizeof(cr__form), 0, NULL, state);
}

static cr_status var_dir(CR__FORM_DIR_PARAMS)
{
    const cr__form *F = state;
    const cr_array *xa;
    cr_status st = x_dot_arr(F, xdot[0], &xa);
    if (st != CR_OK || xa == NULL)
        return st;
    return var_pulled_at(F, xa, p->ybar, &S[0]);
}

const cr_rule_form cr__form_var = {softmax_check, var_init, var_dir};

typedef struct std_state {
    cr__form F;
    const double *sig, *G;
    cr_tangent cot; /* var's cotangent ȳ / (2σ), of the result's shape */
} std_state;

/*
 * std(x[, dims]) = σ = sqrt(var) per slice: the pullback is G = c (x - μ) with
 * c = ȳ / ((n - 1) σ). Its derivative along ẋ, with σ̇ the result's tangent (std's frule, from
 * the forward sweep) and ċ = -c σ̇ / σ:
 *     S = c (ẋ - μ̇) - (σ̇ / σ) G,
 * where c (ẋ - μ̇) is var's pullback at ẋ applied to ȳ / (2σ) (var's is 2 ȳ (x - μ)/(n - 1))
 * and G std's recorded pullback applied to ȳ. Where σ = 0 (all the slice's elements equal) std
 * has no second derivative (|x - μ| scaled, a kink: the rule gives the subgradient 0 there):
 * refused with CR_EDOMAIN.
 */
static cr_status std_init(const cr_form_point *p, void **state)
{
    const double *yb = NULL, *sig = NULL;
    cr_status st = cr__form_state(p, sizeof(std_state), 0, cr__form_opt(p, 1), state);
    std_state *w = *state;
    if (st == CR_OK)
        st = cr__form_ybar_slices(&w->F, &yb);
    bool arr = p->y->kind == CR_KIND_ARRAY;
    if (st == CR_OK && arr) {
        st = cr__form_y_array(&w->F, &sig);
    } else if (st == CR_OK) {
        double *v = cr_arena_alloc(p->arena, sizeof *v, _Alignof(double));
        if (v == NULL)
            return CR__ALLOC_STATUS(p->arena);
        *v = creal(cr__scalar_of(p->y));
        sig = v;
    }
    if (st != CR_OK)
        return st;
    for (size_t q = 0; q < w->F.ns; q++)
        if (!(sig[q] > 0.0))
            return cr__form_fail(&w->F, CR_EDOMAIN,
                                 "%s: no second derivative where the standard deviation is zero "
                                 "(slice %zu: all its elements are equal)",
                                 w->F.who, q);
    if ((st = cr__form_pulled(&w->F, &w->G)) != CR_OK)
        return st;
    w->sig = sig;
    if (!arr) {
        w->cot = cr_tangent_f64(yb[0] / (2.0 * sig[0]));
    } else {
        const cr_array *yv = p->y->u.arr;
        cr_array *c;
        if ((st = cr__new(p->arena, CR_DT_F64, yv->ndim, yv->shape, false, &c)) != CR_OK)
            return st;
        for (size_t q = 0; q < w->F.ns; q++)
            ((double *)c->data)[q] = yb[q] / (2.0 * sig[q]);
        w->cot = cr_tangent_array(c);
    }
    return CR_OK;
}

static cr_status std_dir(CR__FORM_DIR_PARAMS)
{
    std_state *w = state;
    const cr__form *F = &w->F;
    const cr_array *xa;
    const double *V = NULL, *sd = NULL, *sig = w->sig;
    double sd1;
    cr_tangent Vt;
    cr_array *Sa;
    cr_status st = x_dot_arr(F, xdot[0], &xa);
    if (st != CR_OK || xa == NULL)
        return st;
    if ((st = var_pulled_at(F, xa, w->cot, &Vt)) != CR_OK ||
        (st = cr__form_like_x(F, Vt, &V)) != CR_OK)
        return st;
    if (p->y->kind == CR_KIND_ARRAY) {
        st = cr__form_y_dot_arr(F, ydot, &sd);
    } else {
        sd1 = cr__form_scalar(ydot);
        sd = &sd1;
    }
    if (st != CR_OK || (st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    double *s = Sa->data;
    for (size_t e = 0; e < F->N; e++) {
        size_t q = cr__form_slice(F, e);
        s[e] = (V != NULL ? V[e] : 0.0) - (sd != NULL ? sd[q] / sig[q] : 0.0) * w->G[e];
    }
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_std = {softmax_check, std_init, std_dir};

/* ---- cumprod ----------------------------------------------------------------------------------
 */

typedef struct cumprod_state {
    cr__form F;
    const double *y;
    double *a;
    size_t L, inner, nlines;
} cumprod_state;

/* element k of line l: (l / inner) L inner + l % inner + k inner */
#define CP_AT(l, kk) (((l) / inner) * L * inner + (l) % inner + (kk)*inner)

/*
 * cumprod(x[, dim]): along each line y_k = y_{k-1} x_k (y_{-1} = 1), and the rule's pullback
 * runs the recurrence backwards without dividing:
 *     a_k = ȳ_k + x_{k+1} a_{k+1} (a_{L-1} = ȳ_{L-1}),   x̄_k = y_{k-1} a_k.
 * The rule does not expose a (x̄_k / y_{k-1} is no substitute at zeros), so it is run here;
 * differentiating both lines along ẋ (ȳ fixed), with ẏ the result's tangent (cumprod's frule,
 * from the forward sweep):
 *     ȧ_k = ẋ_{k+1} a_{k+1} + x_{k+1} ȧ_{k+1} (ȧ_{L-1} = 0),
 *     S_k = ẏ_{k-1} a_k + y_{k-1} ȧ_k (ẏ_{-1} = 0).
 * Nothing divides, so zeros in x are exact, as in the rule.
 */
static cr_status cumprod_init(const cr_form_point *p, void **state)
{
    const double *yb;
    cr_status st = cr__form_state(p, sizeof(cumprod_state), 0, NULL, state);
    cumprod_state *w = *state;
    if (st == CR_OK && (st = cr__form_like_x(&w->F, p->ybar, &yb)) == CR_OK && yb == NULL)
        return CR_NOTHING;
    if (st == CR_OK)
        st = cr__form_y_array(&w->F, &w->y);
    int64_t dim = 0;
    if (st == CR_OK && p->nargs > 1)
        st = cr__int_arg(p->arena, p->name, &p->args[1], &dim);
    if (st != CR_OK)
        return st;
    const cr__form *F = &w->F;
    if (dim < 0 || (size_t)dim >= F->x->ndim || F->N == 0)
        return CR_NOTHING; /* the rule refused it when recorded */
    size_t L = F->x->shape[dim], inner = 1;
    for (size_t q = (size_t)dim + 1; q < F->x->ndim; q++)
        inner *= F->x->shape[q];
    size_t nlines = F->N / L;
    const double *x = F->x->data;
    double *a = cr_arena_alloc(F->arena, F->N * sizeof *a, _Alignof(double));
    if (a == NULL)
        return CR__ALLOC_STATUS(F->arena);
    for (size_t l = 0; l < nlines; l++)
        for (size_t kk = L; kk-- > 0;)
            a[CP_AT(l, kk)] =
                yb[CP_AT(l, kk)] + (kk + 1 < L ? x[CP_AT(l, kk + 1)] * a[CP_AT(l, kk + 1)] : 0.0);
    w->a = a;
    w->L = L;
    w->inner = inner;
    w->nlines = nlines;
    return CR_OK;
}

static cr_status cumprod_dir(CR__FORM_DIR_PARAMS)
{
    cumprod_state *w = state;
    const cr__form *F = &w->F;
    const double *xd, *yd, *x = F->x->data, *a = w->a, *y = w->y;
    size_t L = w->L, inner = w->inner;
    cr_array *Sa;
    cr_status st;
    if (!dir_start(F, xdot[0], ydot, &yd, &xd, &Sa, &st))
        return st;
    double *s = Sa->data;
    for (size_t l = 0; l < w->nlines; l++) {
        double ad = 0.0; /* ȧ_k */
        for (size_t kk = L; kk-- > 0;) {
            size_t e = CP_AT(l, kk);
            if (kk + 1 < L) {
                size_t e1 = CP_AT(l, kk + 1);
                ad = xd[e1] * a[e1] + x[e1] * ad;
            }
            if (kk == 0) {
                s[e] = ad;
            } else {
                size_t e0 = CP_AT(l, kk - 1);
                s[e] = (yd != NULL ? yd[e0] : 0.0) * a[e] + y[e0] * ad;
            }
        }
    }
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}
#undef CP_AT

const cr_rule_form cr__form_cumprod = {softmax_check, cumprod_init, cumprod_dir};

/* ---- sum(f, A) ------------------------------------------------------------------------------- */

/* sum(f, A[, dims]): f a scalar-table function of one argument, A an array. */
static const char *sum_f_check(CR__FORM_CHECK_PARAMS)
{
    const cr_scalar_rule *r = nargs < 2 || args[0].kind != CR_KIND_FUNC || args[0].u.func.fn == NULL
                                  ? NULL
                                  : cr_scalar_rule_of(args[0].u.func.fn);
    if (r == NULL || r->nin != 1 || r->nout != 1 || args[1].kind != CR_KIND_ARRAY)
        return "the function summed is not a scalar-table function of one argument";
    return NULL;
}

typedef struct sum_f_state {
    cr__form F;
    double *w; /* per element: ȳ f''(a_e) */
} sum_f_state;

/*
 * sum(f, A[, dims]) of a scalar-table function f of one argument: the pullback is
 * Ā_e = ȳ f'(a_e) (ȳ of e's slice), elementwise, so
 *     S_e = ȳ f''(a_e) ȧ_e,
 * with f'' taken as the broadcast form and the scalar second-order tape take it
 * (cr__row_hessian: the complex step, or central differences for real-only rows), once per
 * element for all directions.
 */
static cr_status sum_f_init(const cr_form_point *p, void **state)
{
    const double *yb;
    cr_status st = cr__form_state(p, sizeof(sum_f_state), 1, cr__form_opt(p, 2), state);
    sum_f_state *w = *state;
    if (st == CR_OK)
        st = cr__form_ybar_slices(&w->F, &yb);
    if (st != CR_OK)
        return st;
    const cr__form *F = &w->F;
    const cr_scalar_rule *row = cr_scalar_rule_of(p->args[0].u.func.fn);
    double *wt = cr_arena_calloc(F->arena, F->N ? F->N : 1, sizeof *wt, _Alignof(double));
    if (wt == NULL)
        return CR__ALLOC_STATUS(F->arena);
    const double *x = F->x->data;
    for (size_t e = 0; e < F->N; e++) {
        double g = yb[cr__form_slice(F, e)];
        if (g == 0.0)
            continue;
        double xe = x[e], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
        double H[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
        /* the partials at x (cr__row_hessian starts from them) */
        row->f64(&xe, Y, D);
        cr__row_hessian(row, &xe, D, H, 1u);
        wt[e] = g * H[0];
    }
    w->w = wt;
    return CR_OK;
}

static cr_status sum_f_dir(CR__FORM_DIR_PARAMS)
{
    const double *xd;
    cr_array *Sa;
    cr_status st;
    sum_f_state *w = state;
    if (!dir_start(&w->F, xdot[1], ydot, NULL, &xd, &Sa, &st))
        return st;
    double *s = Sa->data;
    for (size_t e = 0; e < w->F.N; e++)
        s[e] = w->w[e] * xd[e];
    S[1] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_sum_f = {sum_f_check, sum_f_init, sum_f_dir};
