/*
 * Finite differences after FiniteDifferences.jl: coefficients for any grid (Fornberg's
 * recurrence in extended precision), steps that balance round-off against truncation
 * error with the p-th derivative bounded adaptively, Richardson extrapolation, and
 * jvp / jacobian / j'vp of maps R^n -> R^m. Nothing here allocates except from the
 * caller's scratch arena.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chainrules/ctx.h"
#include "chainrules/fd.h"
#include "testing_impl.h"

/* ------------------------------------------------------------------------------------ */
/* Coefficients                                                                          */
/* ------------------------------------------------------------------------------------ */

/*
 * Double-double arithmetic (a value is hi + lo with |lo| <= ulp(hi)/2, about 106 bits),
 * from the error-free transformations of Knuth (two_sum) and Dekker (split, two_prod). It
 * keeps the coefficients exact to the last bit of a double on every platform: `long double`
 * is only a double on some (MSVC, Apple arm64, and under valgrind), and there the 25-point
 * methods of high adaptation levels lose digits. No FMA is needed, so the results are the
 * same everywhere.
 */
typedef struct dd {
    double hi, lo;
} dd;

static dd dd_from(double a)
{
    dd r = {a, 0.0};
    return r;
}

static dd quick_two_sum(double a, double b)
{
    dd r;
    r.hi = a + b;
    r.lo = b - (r.hi - a);
    return r;
}

static dd two_sum(double a, double b)
{
    dd r;
    r.hi = a + b;
    double bb = r.hi - a;
    r.lo = (a - (r.hi - bb)) + (b - bb);
    return r;
}

static void split(double a, double *hi, double *lo)
{
    double t = 134217729.0 * a; /* 2^27 + 1 */
    *hi = t - (t - a);
    *lo = a - *hi;
}

static dd two_prod(double a, double b)
{
    double ah, al, bh, bl;
    split(a, &ah, &al);
    split(b, &bh, &bl);
    dd r;
    r.hi = a * b;
    r.lo = ((ah * bh - r.hi) + ah * bl + al * bh) + al * bl;
    return r;
}

static dd dd_add(dd a, dd b)
{
    dd s = two_sum(a.hi, b.hi);
    dd t = two_sum(a.lo, b.lo);
    s.lo += t.hi;
    s = quick_two_sum(s.hi, s.lo);
    s.lo += t.lo;
    return quick_two_sum(s.hi, s.lo);
}

static dd dd_neg(dd a)
{
    dd r = {-a.hi, -a.lo};
    return r;
}

static dd dd_sub(dd a, dd b)
{
    return dd_add(a, dd_neg(b));
}

static dd dd_mul(dd a, dd b)
{
    dd p = two_prod(a.hi, b.hi);
    p.lo += a.hi * b.lo + a.lo * b.hi;
    return quick_two_sum(p.hi, p.lo);
}

/* Long division: three quotient digits, each from the remainder of the previous. */
static dd dd_div(dd a, dd b)
{
    double q1 = a.hi / b.hi;
    dd r = dd_sub(a, dd_mul(b, dd_from(q1)));
    double q2 = r.hi / b.hi;
    r = dd_sub(r, dd_mul(b, dd_from(q2)));
    double q3 = r.hi / b.hi;
    dd q = quick_two_sum(q1, q2);
    return dd_add(q, dd_from(q3));
}

/*
 * Weights w[j] such that sum_j w[j] f(alpha[j]) approximates f^(q)(z), exact for
 * polynomials of degree < n (Fornberg, "Calculation of weights in finite difference
 * formulas", SIAM Review 40, 1998). The recurrence builds the Lagrange basis one node at a
 * time and never forms the Vandermonde matrix, whose condition number grows like g^p; in
 * double-double the weights come out correct to the last bit of a double for every grid
 * the tests cover (up to 25 points).
 */
static void fornberg(const double *alpha, int n, int q, double z, dd *w)
{
    dd c[CR_FD_MAX_POINTS][CR_FD_MAX_POINTS];
    for (int i = 0; i < n; i++)
        for (int k = 0; k <= q; k++)
            c[i][k] = dd_from(0.0);
    c[0][0] = dd_from(1.0);
    dd c1 = dd_from(1.0);
    dd c4 = two_sum(alpha[0], -z);
    for (int i = 1; i < n; i++) {
        int mn = i < q ? i : q;
        dd c2 = dd_from(1.0);
        dd c5 = c4;
        c4 = two_sum(alpha[i], -z);
        for (int j = 0; j < i; j++) {
            dd c3 = two_sum(alpha[i], -alpha[j]);
            c2 = dd_mul(c2, c3);
            if (j == i - 1) {
                dd r = dd_div(c1, c2);
                for (int k = mn; k >= 1; k--) {
                    dd t = dd_sub(dd_mul(dd_from((double)k), c[i - 1][k - 1]),
                                  dd_mul(c5, c[i - 1][k]));
                    c[i][k] = dd_mul(r, t);
                }
                c[i][0] = dd_neg(dd_mul(r, dd_mul(c5, c[i - 1][0])));
            }
            dd rc3 = dd_div(dd_from(1.0), c3);
            for (int k = mn; k >= 1; k--) {
                dd t = dd_sub(dd_mul(c4, c[j][k]), dd_mul(dd_from((double)k), c[j][k - 1]));
                c[j][k] = dd_mul(t, rc3);
            }
            c[j][0] = dd_mul(dd_mul(c4, c[j][0]), rc3);
        }
        c1 = c2;
    }
    for (int j = 0; j < n; j++)
        w[j] = c[j][q];
}

/* Whether grid[i] == -grid[p-1-i] for every i (so the error expands in even powers). */
static bool grid_is_symmetric(const double *grid, int p)
{
    for (int i = 0; i < p; i++)
        if (grid[i] != -grid[p - 1 - i])
            return false;
    return true;
}

static double grid_max_abs(const cr_fdm *m)
{
    double a = 0.0;
    for (int i = 0; i < m->p; i++)
        a = fmax(a, fabs(m->grid[i]));
    return a;
}

/* Fill coefficients and multipliers of a method whose p, q, kind, flags and grid are set. */
static void fdm_finish(cr_fdm *m)
{
    const int p = m->p, q = m->q;
    dd w[CR_FD_MAX_POINTS];
    fornberg(m->grid, p, q, 0.0, w);

    /* On a symmetric grid the exact weights satisfy w[i] = (-1)^q w[p-1-i]; imposing it
       removes the last-bit asymmetry of the recurrence and makes the centre weight of an
       odd-order derivative exactly zero, so that point is never evaluated. */
    if (grid_is_symmetric(m->grid, p)) {
        bool odd = q % 2 != 0;
        for (int i = 0; i < p / 2; i++) {
            int j = p - 1 - i;
            dd sum = odd ? dd_sub(w[i], w[j]) : dd_add(w[i], w[j]);
            dd avg = {0.5 * sum.hi, 0.5 * sum.lo};
            w[i] = avg;
            w[j] = odd ? dd_neg(avg) : avg;
        }
        if (p % 2 != 0 && odd)
            w[p / 2] = dd_from(0.0);
    }

    /* The multipliers only scale an error bound: double precision is plenty. */
    double fact = 1.0;
    for (int k = 2; k <= p; k++)
        fact *= (double)k;
    double bound = 0.0, errm = 0.0;
    for (int i = 0; i < p; i++) {
        m->coefs[i] = w[i].hi;
        bound += fabs(w[i].hi * pow(m->grid[i], (double)p));
        errm += fabs(w[i].hi);
    }
    m->bound_mult = bound / fact;
    m->error_mult = errm;

    /* Neighbourhood estimates: the q-th derivative at three points x + z h spanned by the
       grid, so that the bound on |f^(q)| covers a neighbourhood of x and not only x. */
    bool all_pos = true, all_neg = true;
    for (int i = 0; i < p; i++) {
        all_pos = all_pos && m->grid[i] >= 0.0;
        all_neg = all_neg && m->grid[i] <= 0.0;
    }
    double shift[3];
    if (all_pos) {
        shift[0] = 2.0, shift[1] = 1.0, shift[2] = 0.0;
    } else if (all_neg) {
        shift[0] = 0.0, shift[1] = -1.0, shift[2] = -2.0;
    } else {
        shift[0] = 1.0, shift[1] = 0.0, shift[2] = -1.0;
    }
    for (int k = 0; k < 3; k++) {
        fornberg(m->grid, p, q, shift[k], w);
        for (int i = 0; i < p; i++)
            m->coefs_nbhd[k][i] = w[i].hi;
    }
    for (int i = p; i < CR_FD_MAX_POINTS; i++) {
        m->grid[i] = 0.0;
        m->coefs[i] = 0.0;
        for (int k = 0; k < 3; k++)
            m->coefs_nbhd[k][i] = 0.0;
    }
}

static bool pq_valid(int p, int q)
{
    return p >= 1 && p <= CR_FD_MAX_POINTS && q >= 0 && q < p;
}

cr_status cr_fdm_make(cr_fd_grid kind, int p, int q, unsigned flags, cr_fdm *out)
{
    if (out == NULL || !pq_valid(p, q) || (flags & ~CR_FDM_GEOM) != 0)
        return CR_EINVAL;
    if (kind != CR_FD_GRID_CENTRAL && kind != CR_FD_GRID_FORWARD && kind != CR_FD_GRID_BACKWARD)
        return CR_EINVAL;
    cr_fdm m = {.p = p, .q = q, .kind = kind, .flags = flags};
    for (int i = 0; i < p; i++) {
        int g;
        if (kind == CR_FD_GRID_FORWARD)
            g = i;
        else if (kind == CR_FD_GRID_BACKWARD)
            g = i + 1 - p;
        else if (p % 2 != 0)
            g = i - (p - 1) / 2;
        else
            g = i < p / 2 ? i - p / 2 : i - p / 2 + 1;
        double gd = (double)g;
        if ((flags & CR_FDM_GEOM) != 0 && g != 0) /* sign(g) * 3^(|g|-1) */
            gd = copysign(pow(3.0, (double)(abs(g) - 1)), gd);
        m.grid[i] = gd;
    }
    fdm_finish(&m);
    *out = m;
    return CR_OK;
}

cr_status cr_fdm_central(int p, int q, cr_fdm *out)
{
    return cr_fdm_make(CR_FD_GRID_CENTRAL, p, q, 0u, out);
}

cr_status cr_fdm_forward(int p, int q, cr_fdm *out)
{
    return cr_fdm_make(CR_FD_GRID_FORWARD, p, q, 0u, out);
}

cr_status cr_fdm_backward(int p, int q, cr_fdm *out)
{
    return cr_fdm_make(CR_FD_GRID_BACKWARD, p, q, 0u, out);
}

cr_status cr_fdm_from_grid(const double *grid, int p, int q, cr_fdm *out)
{
    if (grid == NULL || out == NULL || !pq_valid(p, q))
        return CR_EINVAL;
    for (int i = 0; i < p; i++) {
        if (!isfinite(grid[i]))
            return CR_EINVAL;
        for (int j = 0; j < i; j++)
            if (grid[i] == grid[j])
                return CR_EINVAL;
    }
    cr_fdm m = {.p = p, .q = q, .kind = CR_FD_GRID_CUSTOM, .flags = 0u};
    memcpy(m.grid, grid, (size_t)p * sizeof *grid);
    fdm_finish(&m);
    *out = m;
    return CR_OK;
}

/* A method handed in by the caller: checked enough that nothing reads out of bounds. */
static bool fdm_valid(const cr_fdm *m)
{
    if (m == NULL || !pq_valid(m->p, m->q))
        return false;
    if ((unsigned)m->kind > (unsigned)CR_FD_GRID_CUSTOM || (m->flags & ~CR_FDM_GEOM) != 0)
        return false;
    return grid_max_abs(m) > 0.0 || m->q == 0;
}

/* The (p+2)-point method for the p-th derivative that bounds the truncation error of m. */
static void fdm_bound_method(const cr_fdm *m, cr_fdm *b)
{
    cr_fd_grid kind = m->kind;
    if (kind == CR_FD_GRID_CUSTOM) {
        bool all_pos = true, all_neg = true;
        for (int i = 0; i < m->p; i++) {
            all_pos = all_pos && m->grid[i] >= 0.0;
            all_neg = all_neg && m->grid[i] <= 0.0;
        }
        kind = all_pos ? CR_FD_GRID_FORWARD : (all_neg ? CR_FD_GRID_BACKWARD : CR_FD_GRID_CENTRAL);
    }
    /* Cannot fail: the caller checked p + 2*adapt <= CR_FD_MAX_POINTS. */
    (void)cr_fdm_make(kind, m->p + 2, m->p, m->flags, b);
}

/* bounds[l] bounds the truncation error of bounds[l-1] (bounds[-1] being m). Building the
   chain once per call, not once per level visit or Jacobian column, matters: a method costs
   four runs of the double-double recurrence. */
static void fdm_bound_chain(const cr_fdm *m, int adapt, cr_fdm *bounds)
{
    for (int l = 0; l < adapt; l++)
        fdm_bound_method(l == 0 ? m : &bounds[l - 1], &bounds[l]);
}

/* ------------------------------------------------------------------------------------ */
/* Options                                                                               */
/* ------------------------------------------------------------------------------------ */

/* Most levels of adaptation any method can have: p + 2*adapt <= CR_FD_MAX_POINTS, p >= 1. */
#define FD_MAX_ADAPT ((CR_FD_MAX_POINTS - 1) / 2)

typedef struct fd_conf {
    int adapt;
    double condition;
    double factor;
    double max_range;
    double step;
} fd_conf;

/* A caller's options (src, NULL for the defaults) into o of `size` bytes, zero-filled: the first
 * struct_size bytes of src (0: all), CR_EINVAL for a struct_size beyond `size` or shorter than
 * the struct_size field (field bytes). */
static cr_status opts_copy(void *o, size_t size, const void *src, size_t struct_size, size_t field)
{
    memset(o, 0, size);
    size_t sz = struct_size == 0 ? size : struct_size;
    if (src == NULL)
        return CR_OK;
    if (sz > size || sz < field)
        return CR_EINVAL;
    memcpy(o, src, sz);
    return CR_OK;
}

static cr_status fd_conf_get(const cr_fd_opts *opts, fd_conf *c)
{
    cr_fd_opts o;
    if (opts_copy(&o, sizeof o, opts, opts ? (size_t)opts->struct_size : 0, sizeof o.struct_size) !=
        CR_OK)
        return CR_EINVAL;
    if (o.adapt < CR_FD_ADAPT_NONE)
        return CR_EINVAL;
    c->adapt = o.adapt == 0 ? CR_FD_DEFAULT_ADAPT : (o.adapt == CR_FD_ADAPT_NONE ? 0 : o.adapt);
    if (!(o.condition >= 0.0) || !isfinite(o.condition) || !(o.factor >= 0.0) ||
        !isfinite(o.factor) || !(o.max_range >= 0.0) || !(o.step >= 0.0) || !isfinite(o.step))
        return CR_EINVAL;
    c->condition = o.condition == 0.0 ? CR_FD_DEFAULT_CONDITION : o.condition;
    c->factor = o.factor == 0.0 ? CR_FD_DEFAULT_FACTOR : o.factor;
    c->max_range = o.max_range == 0.0 ? HUGE_VAL : o.max_range;
    c->step = o.step;
    return CR_OK;
}

/* Method and options together: adaptation must fit in CR_FD_MAX_POINTS. */
static bool fd_fits(const cr_fdm *m, const fd_conf *c)
{
    return c->adapt <= (CR_FD_MAX_POINTS - m->p) / 2;
}

/* ------------------------------------------------------------------------------------ */
/* Evaluation of g(t) = f(x + t) or f(x + t v) or f(x + t e_axis)                        */
/* ------------------------------------------------------------------------------------ */

typedef struct fd_eval {
    const cr_fdm *bounds; /* bounds[l]: bound method of level l, built once per call */
    int adapt;            /* levels of adaptation of the top-level method */
    size_t dim;           /* number of outputs */
    double *y;            /* dim: last value */
    double *nb;           /* 3*dim: neighbourhood estimates */
    void *env;
    /* scalar */
    cr_fd_fn sf;
    double x0;
    /* vector */
    cr_fd_vec_fn vf;
    const double *x; /* n */
    const double *v; /* n, or NULL for the axis direction */
    size_t n;
    size_t axis;
    double *xt; /* n: x + t v */
    /* diagnostics */
    double bad_t;
    size_t bad_index;
} fd_eval;

static cr_status fd_eval_at(fd_eval *ev, double t)
{
    cr_status st;
    if (ev->vf == NULL) {
        st = ev->sf(ev->x0 + t, ev->y, ev->env);
    } else {
        if (ev->v != NULL) {
            for (size_t i = 0; i < ev->n; i++)
                ev->xt[i] = ev->x[i] + t * ev->v[i];
        } else {
            ev->xt[ev->axis] = ev->x[ev->axis] + t;
        }
        st = ev->vf(ev->xt, ev->n, ev->y, ev->dim, ev->env);
    }
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < ev->dim; i++) {
        if (!isfinite(ev->y[i])) {
            ev->bad_t = t;
            ev->bad_index = i;
            return CR_EDOMAIN;
        }
    }
    return CR_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Step selection                                                                        */
/* ------------------------------------------------------------------------------------ */

/* The distance between |a| and the next larger double: Julia's eps(a). */
static double ulp(double a)
{
    a = fabs(a);
    return nextafter(a, HUGE_VAL) - a;
}

/*
 * The error bound is err(h) = c1 / h^q + c2 h^(p-q): c1 is the round-off of the weighted
 * sum (error of one evaluation times sum |c_i|), c2 the truncation (bound on |f^(p)| times
 * sum |c_i g_i^p| / p!). Setting err'(h) = 0 gives h = (q c1 / ((p-q) c2))^(1/p).
 */
static double fd_opt_step(const cr_fdm *m, double c1, double c2)
{
    double r = (double)m->q / (double)(m->p - m->q) * (c1 / c2);
    return pow(r, 1.0 / (double)m->p);
}

static double fd_err_at(const cr_fdm *m, double c1, double c2, double h)
{
    return c1 / pow(h, (double)m->q) + c2 * pow(h, (double)(m->p - m->q));
}

/* Unadapted constants: f is assumed accurate to machine epsilon and |f^(p)| <= condition. */
static void fd_default_consts(const cr_fdm *m, const fd_conf *c, double *c1, double *c2)
{
    *c1 = DBL_EPSILON * m->error_mult * c->factor;
    *c2 = c->condition * m->bound_mult;
}

/* Largest step: max_range, and 1000 times the unadapted step (FiniteDifferences' guard
   against huge steps for slowly varying functions and high orders). */
static double fd_step_cap(const cr_fdm *m, const fd_conf *c)
{
    double d1, d2;
    fd_default_consts(m, c, &d1, &d2);
    return fmin(c->max_range / grid_max_abs(m), 1000.0 * fd_opt_step(m, d1, d2));
}

static cr_status fd_estimate_step(const cr_fdm *m, const fd_conf *c, int adapt, fd_eval *ev,
                                  double *step, double *c1, double *c2);

/*
 * Magnitudes of the p-th derivative near x (max over three neighbourhood estimates and all
 * outputs) and of f, from one run of the bound method b.
 */
static cr_status fd_magnitudes(const cr_fdm *b, const fd_conf *c, int adapt, fd_eval *ev,
                               double *gmag, double *fmag)
{
    double h, c1, c2;
    cr_status st = fd_estimate_step(b, c, adapt, ev, &h, &c1, &c2);
    if (st != CR_OK)
        return st;
    const size_t dim = ev->dim;
    for (size_t j = 0; j < 3 * dim; j++)
        ev->nb[j] = 0.0;
    double fm = 0.0;
    for (int i = 0; i < b->p; i++) {
        st = fd_eval_at(ev, h * b->grid[i]);
        if (st != CR_OK)
            return st;
        for (size_t j = 0; j < dim; j++) {
            double y = ev->y[j];
            fm = fmax(fm, fabs(y));
            for (size_t k = 0; k < 3; k++)
                ev->nb[k * dim + j] += b->coefs_nbhd[k][i] * y;
        }
    }
    double hq = pow(h, (double)b->q);
    double gm = 0.0;
    for (size_t j = 0; j < 3 * dim; j++)
        gm = fmax(gm, fabs(ev->nb[j]) / hq);
    *gmag = gm;
    *fmag = fm;
    return CR_OK;
}

/* The error constants c1, c2 of m: adapted (from a bound method) when adapt > 0. */
static cr_status fd_error_consts(const cr_fdm *m, const fd_conf *c, int adapt, fd_eval *ev,
                                 double *c1, double *c2)
{
    fd_default_consts(m, c, c1, c2);
    if (adapt <= 0)
        return CR_OK;
    const cr_fdm *b = &ev->bounds[ev->adapt - adapt];
    double gmag, fmag;
    cr_status st = fd_magnitudes(b, c, adapt - 1, ev, &gmag, &fmag);
    if (st != CR_OK)
        return st;
    if (!(fmag > 0.0))
        return CR_OK; /* f == 0 nearby: nothing to scale the round-off by */
    double a1 = ulp(fmag) * m->error_mult * c->factor;
    double a2 = gmag * m->bound_mult;
    if (gmag > 0.0 && isfinite(gmag)) {
        double h = fd_opt_step(m, a1, a2);
        if (h > 0.0 && isfinite(h)) {
            *c1 = a1;
            *c2 = a2;
        }
    } else {
        /* A zero bound (f is a polynomial of degree < p nearby) says nothing about the
           truncation error: keep the assumed bound, as FiniteDifferences does, but take
           the round-off from the size of f rather than from 1. */
        *c1 = fmax(*c1, a1);
    }
    return CR_OK;
}

/*
 * The nearest power of two to h that does not exceed cap. With a power-of-two step (not
 * below ulp(x)) and an integer grid, every x + g h is a multiple of ulp(x) that is
 * computed without rounding unless it crosses into a higher binade; otherwise the rounding
 * of the arguments, up to ulp(x)/2 each, adds |f'| ulp(x) / h to the error, which for
 * large |x| (sin at 100) or small |f| (log near 1) dominates the round-off of f itself.
 * The bound err(h) is flat near its minimum: the power of two costs at most 40% of it.
 */
static double fd_round_step(double h, double cap)
{
    if (!(h > 0.0) || !isfinite(h))
        return h;
    int e;
    double mant = frexp(h, &e); /* h = mant 2^e, mant in [0.5, 1) */
    double r = ldexp(1.0, mant < 0.70710678118654752 ? e - 1 : e);
    if (r > cap)
        r = ldexp(1.0, e - 1);
    return r <= cap ? r : h;
}

static cr_status fd_estimate_step(const cr_fdm *m, const fd_conf *c, int adapt, fd_eval *ev,
                                  double *step, double *c1, double *c2)
{
    cr_status st = fd_error_consts(m, c, adapt, ev, c1, c2);
    if (st != CR_OK)
        return st;
    double cap = fd_step_cap(m, c);
    *step = fd_round_step(fmin(fd_opt_step(m, *c1, *c2), cap), cap);
    return CR_OK;
}

/* out[0..dim) = sum_i c_i g(h g_i) / h^q, skipping zero coefficients. */
static cr_status fd_apply_core(const cr_fdm *m, fd_eval *ev, double h, double *out)
{
    const size_t dim = ev->dim;
    for (size_t j = 0; j < dim; j++)
        out[j] = 0.0;
    for (int i = 0; i < m->p; i++) {
        if (m->coefs[i] == 0.0)
            continue;
        cr_status st = fd_eval_at(ev, h * m->grid[i]);
        if (st != CR_OK)
            return st;
        for (size_t j = 0; j < dim; j++)
            out[j] += m->coefs[i] * ev->y[j];
    }
    double hq = pow(h, (double)m->q);
    for (size_t j = 0; j < dim; j++)
        out[j] /= hq;
    return CR_OK;
}

/* The whole estimate: step (fixed or adaptive), error, derivative into out[0..dim). */
static cr_status fd_run(const cr_fdm *m, const fd_conf *c, fd_eval *ev, double *out, double *err)
{
    cr_status st;
    if (m->q == 0) {
        st = fd_eval_at(ev, 0.0);
        if (st != CR_OK)
            return st;
        memcpy(out, ev->y, ev->dim * sizeof *out);
        if (err != NULL)
            *err = 0.0;
        return CR_OK;
    }
    double h, c1, c2;
    if (c->step > 0.0) {
        h = c->step;
        if (err != NULL) {
            st = fd_error_consts(m, c, c->adapt, ev, &c1, &c2);
            if (st != CR_OK)
                return st;
        } else {
            c1 = c2 = 0.0;
        }
    } else {
        st = fd_estimate_step(m, c, c->adapt, ev, &h, &c1, &c2);
        if (st != CR_OK)
            return st;
    }
    st = fd_apply_core(m, ev, h, out);
    if (st != CR_OK)
        return st;
    if (err != NULL)
        *err = fd_err_at(m, c1, c2, h);
    return CR_OK;
}

/* The method and options alone (what every estimate checks before evaluating anything). */
static cr_status fd_check(const cr_fdm *method, const cr_fd_opts *opts, fd_conf *c)
{
    if (!fdm_valid(method))
        return CR_EINVAL;
    cr_status st = fd_conf_get(opts, c);
    if (st != CR_OK)
        return st;
    if (!fd_fits(method, c))
        return CR_EINVAL;
    if (c->step > 0.0 && c->step * grid_max_abs(method) > c->max_range)
        return CR_EINVAL;
    return CR_OK;
}

cr_status cr__fd_check(const cr_fdm *method, const cr_fd_opts *opts)
{
    fd_conf c;
    return fd_check(method, opts, &c);
}

/* The state of an estimate: the configuration, the evaluation, the step bounds, the
 * scratch's mark (the vector entry points) and the value and neighbours of a scalar f. */
typedef struct fd_call {
    fd_conf c;
    fd_eval ev;
    cr_fdm bounds[FD_MAX_ADAPT];
    cr_arena_mark mark;
    double y, nb[3];
} fd_call;

/* The step bounds of an adaptive method (q > 0) into bounds, and ev's view of them. */
static void fd_bounds(const cr_fdm *method, const fd_conf *c, fd_eval *ev, cr_fdm *bounds)
{
    if (method->q > 0)
        fdm_bound_chain(method, c->adapt, bounds);
    ev->bounds = bounds;
    ev->adapt = c->adapt;
}

/* Shared argument checks of the scalar entry points. */
static cr_status fd_scalar_setup(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_fn f,
                                 void *env, double x, fd_call *k)
{
    if (f == NULL || !isfinite(x))
        return CR_EINVAL;
    cr_status st = fd_check(method, opts, &k->c);
    if (st != CR_OK)
        return st;
    k->ev = (fd_eval){.dim = 1, .y = &k->y, .nb = k->nb, .env = env, .sf = f, .x0 = x};
    fd_bounds(method, &k->c, &k->ev, k->bounds);
    return CR_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Scalar API                                                                            */
/* ------------------------------------------------------------------------------------ */

cr_status cr_fd_derivative(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_fn f, void *env,
                           double x, double *out, double *err)
{
    if (out == NULL)
        return CR_EINVAL;
    fd_call k;
    cr_status st = fd_scalar_setup(method, opts, f, env, x, &k);
    if (st != CR_OK)
        return st;
    double d, e;
    st = fd_run(method, &k.c, &k.ev, &d, err != NULL ? &e : NULL);
    if (st != CR_OK)
        return st;
    *out = d;
    if (err != NULL)
        *err = e;
    return CR_OK;
}

cr_status cr_fd_estimate_step(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_fn f, void *env,
                              double x, double *step, double *err)
{
    if (step == NULL || method == NULL || method->q == 0)
        return CR_EINVAL;
    fd_call k;
    cr_status st = fd_scalar_setup(method, opts, f, env, x, &k);
    if (st != CR_OK)
        return st;
    double h, c1, c2;
    if (k.c.step > 0.0) {
        h = k.c.step;
        if (err != NULL)
            st = fd_error_consts(method, &k.c, k.c.adapt, &k.ev, &c1, &c2);
    } else {
        st = fd_estimate_step(method, &k.c, k.c.adapt, &k.ev, &h, &c1, &c2);
    }
    if (st != CR_OK)
        return st;
    *step = h;
    if (err != NULL)
        *err = fd_err_at(method, c1, c2, h);
    return CR_OK;
}

cr_status cr_fd_apply(const cr_fdm *method, cr_fd_fn f, void *env, double x, double step,
                      double *out)
{
    if (!fdm_valid(method) || f == NULL || out == NULL || !isfinite(x) || !(step > 0.0) ||
        !isfinite(step))
        return CR_EINVAL;
    double y, d;
    fd_eval ev = {.dim = 1, .y = &y, .env = env, .sf = f, .x0 = x};
    cr_status st = fd_apply_core(method, &ev, step, &d);
    if (st == CR_OK)
        *out = d;
    return st;
}

cr_status cr_fd_richardson(const cr_fdm *method, const cr_fd_richardson_opts *opts, cr_fd_fn f,
                           void *env, double x, double *out, double *err)
{
    if (!fdm_valid(method) || method->q == 0 || f == NULL || out == NULL || !isfinite(x))
        return CR_EINVAL;
    cr_fd_richardson_opts o;
    if (opts_copy(&o, sizeof o, opts, opts ? (size_t)opts->struct_size : 0, sizeof o.struct_size) !=
        CR_OK)
        return CR_EINVAL;
    if (!(o.initial_step >= 0.0) || !isfinite(o.initial_step) || !(o.contract >= 0.0) ||
        !(o.contract < 1.0) || !(o.power >= 0.0) || !isfinite(o.power) || !(o.atol >= 0.0) ||
        !(o.rtol >= 0.0) || !(o.breaktol >= 0.0) || !(o.max_range >= 0.0) ||
        o.max_evals > CR_FD_RICHARDSON_MAX)
        return CR_EINVAL;
    double h = o.initial_step == 0.0 ? 10.0 : o.initial_step;
    double contract = o.contract == 0.0 ? 0.125 : o.contract;
    double power = o.power;
    if (power == 0.0)
        power = grid_is_symmetric(method->grid, method->p) ? 2.0 : 1.0;
    double atol = o.atol;
    double rtol = o.rtol == 0.0 && atol == 0.0 ? sqrt(DBL_EPSILON) : o.rtol;
    double breaktol = o.breaktol == 0.0 ? HUGE_VAL : o.breaktol;
    unsigned max_evals = o.max_evals == 0 ? 20u : o.max_evals;
    if (o.max_range > 0.0)
        h = fmin(h, o.max_range / grid_max_abs(method));

    double y;
    fd_eval ev = {.dim = 1, .y = &y, .env = env, .sf = f, .x0 = x};

    /* Neville tableau: nev[i] extrapolates the estimates i..len-1 to h = 0. */
    double nev[CR_FD_RICHARDSON_MAX];
    size_t len = 1;
    cr_status st = fd_apply_core(method, &ev, h, &nev[0]);
    if (st != CR_OK)
        return st;
    double best = nev[0], best_err = HUGE_VAL;
    const double invc = pow(1.0 / contract, power);
    for (unsigned evals = 1; evals < max_evals; evals++) {
        double hn = h * contract;
        if (!(hn > 0.0) || !isnormal(pow(hn, (double)method->q)))
            break; /* the step underflowed: nothing more to learn */
        h = hn;
        st = fd_apply_core(method, &ev, h, &nev[len]);
        if (st != CR_OK)
            return st;
        len++;
        double cc = invc, minerr = HUGE_VAL;
        for (size_t i = len - 1; i-- > 0;) {
            double old = nev[i];
            nev[i] = nev[i + 1] + (nev[i + 1] - nev[i]) / (cc - 1.0);
            double e = fabs(nev[i] - old);
            minerr = fmin(minerr, e);
            cc *= invc;
            /* An entry that did not move at all is not trusted as converged. */
            if (e == 0.0 && isinf(breaktol) && isfinite(best_err))
                continue;
            if (e < best_err) {
                best = nev[i];
                best_err = e;
            }
        }
        if (minerr > breaktol * best_err || !isfinite(minerr))
            break; /* the error grows: round-off has taken over */
        if (best_err <= fmax(rtol * fabs(best), atol))
            break; /* converged */
        if (minerr == 0.0)
            break; /* no progress */
    }
    if (!isfinite(best))
        return CR_EDOMAIN;
    *out = best;
    /* Two tableau entries can agree exactly by chance once round-off dominates; an error
       of zero would then claim more than any double computation can deliver. */
    if (err != NULL)
        *err = fmax(best_err, DBL_EPSILON * fabs(best));
    return CR_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Vector API                                                                            */
/* ------------------------------------------------------------------------------------ */

/* Record a message for a failure of our own; callback statuses pass through unchanged. */
static cr_status fd_vec_fail(cr_arena *scratch, const char *fn, cr_status st, const fd_eval *ev)
{
    cr_ctx *ctx = scratch != NULL ? cr_arena_ctx(scratch) : NULL;
    if (st == CR_EDOMAIN && ev != NULL && ev->bad_index != SIZE_MAX)
        return cr_ctx_error(ctx, st, "%s: f returned a non-finite output %zu at t = %g", fn,
                            ev->bad_index, ev->bad_t);
    if (st == CR_EINVAL)
        return cr_ctx_error(ctx, st, "%s: invalid argument", fn);
    return st;
}

/* Scratch for n + k*m + extra doubles: CR_EOVERFLOW naming fn and the operands when the count
 * or its bytes overflow (m, n and extra come from the caller). */
static cr_status fd_scratch(cr_arena *scratch, const char *fn, size_t n, size_t m, size_t k,
                            size_t extra, double **buf)
{
    cr_ctx *ctx = cr_arena_ctx(scratch);
    size_t count;
    cr_status st;
    if ((st = cr__ck_mul(ctx, fn, k, m, &count)) != CR_OK ||
        (st = cr__ck_add(ctx, fn, count, n, &count)) != CR_OK ||
        (st = cr__ck_add(ctx, fn, count, extra, &count)) != CR_OK)
        return st;
    *buf = cr__arena_array(scratch, fn, count, sizeof(double), sizeof(double));
    if (*buf == NULL) {
        st = cr_ctx_errcode(ctx);
        return st != CR_OK ? st : CR_ENOMEM;
    }
    return CR_OK;
}

static bool all_finite(const double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return false;
    return true;
}

static cr_status fd_vec_setup(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_vec_fn f,
                              void *env, const double *x, size_t n, size_t m, cr_arena *scratch,
                              fd_conf *c, fd_eval *ev, cr_fdm *bounds)
{
    if (f == NULL || scratch == NULL || (x == NULL && n > 0))
        return CR_EINVAL;
    cr_status st = fd_check(method, opts, c);
    if (st != CR_OK)
        return st;
    if (!all_finite(x, n))
        return CR_EINVAL;
    /* bad_index is set when a non-finite output is detected */
    *ev = (fd_eval){.dim = m, .env = env, .vf = f, .x = x, .n = n, .bad_index = SIZE_MAX};
    fd_bounds(method, c, ev, bounds);
    return CR_OK;
}

/* The start of cr_fd_jvp, cr_fd_jacobian and cr_fd_jtvp: fd_vec_setup, then the caller's own
 * argument test (bad: CR_EINVAL) and, for an empty result (done), *err = 0. False when the
 * call ends there, with *st its status. */
static bool fd_vec_begin(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_vec_fn f, void *env,
                         const double *x, size_t n, size_t m, cr_arena *scratch, const char *name,
                         bool bad, bool done, fd_call *k, double *err, cr_status *st)
{
    *st = fd_vec_setup(method, opts, f, env, x, n, m, scratch, &k->c, &k->ev, k->bounds);
    if (*st == CR_OK && bad)
        *st = CR_EINVAL;
    if (*st != CR_OK) {
        *st = fd_vec_fail(scratch, name, *st, NULL);
        return false;
    }
    if (done && err != NULL)
        *err = 0.0;
    return !done;
}

/* The scratch of an estimate (fd_scratch of nx, m and extra), laid out in k->ev as x(t) (n), y
 * (m) and the rows nb that follow; k->mark is where to rewind to. */
static cr_status fd_vec_buffers(cr_arena *scratch, const char *name, size_t nx, size_t m,
                                size_t extra, fd_call *k)
{
    k->mark = cr_arena_get_mark(scratch);
    double *buf;
    cr_status st = fd_scratch(scratch, name, nx, m, 5, extra, &buf);
    if (st == CR_OK) {
        k->ev.xt = buf;
        k->ev.y = buf + k->ev.n;
        k->ev.nb = k->ev.y + m;
    }
    return st;
}

/* The end of an estimate: on success its k results from src into dst and the error bound e
 * into *err (when asked); the scratch rewound to k->mark; a failure reported (fd_vec_fail). */
static cr_status fd_vec_end(cr_arena *scratch, const char *name, cr_status st, fd_call *k,
                            double *dst, const double *src, size_t cnt, double *err, double e)
{
    if (st == CR_OK) {
        memcpy(dst, src, cnt * sizeof *dst);
        if (err != NULL)
            *err = e;
    }
    cr_arena_rewind(scratch, k->mark);
    return st == CR_OK ? st : fd_vec_fail(scratch, name, st, &k->ev);
}

cr_status cr_fd_jvp(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_vec_fn f, void *env,
                    const double *x, size_t n, const double *v, size_t m, cr_arena *scratch,
                    double *jv, double *err)
{
    static const char *const name = "cr_fd_jvp";
    fd_call k;
    cr_status st;
    bool bad = (v == NULL && n > 0) || (jv == NULL && m > 0) || !all_finite(v, n);
    if (!fd_vec_begin(method, opts, f, env, x, n, m, scratch, name, bad, m == 0, &k, err, &st))
        return st;
    if ((st = fd_vec_buffers(scratch, name, n, m, 0, &k)) != CR_OK)
        return st;
    double *res = k.ev.nb + 3 * m;
    k.ev.v = v;
    double e = 0.0;
    st = fd_run(method, &k.c, &k.ev, res, &e);
    return fd_vec_end(scratch, name, st, &k, jv, res, m, err, e);
}

/*
 * Column by column: col = d^q/dt^q f(x + t e_j). For the jacobian each column is stored;
 * for j'vp it is reduced against ybar at once, so the matrix is never formed.
 */
static cr_status fd_columns(const cr_fdm *method, const fd_conf *c, fd_eval *ev, const double *ybar,
                            double *dst, double *err)
{
    const size_t n = ev->n, m = ev->dim;
    double *col = ev->nb + 3 * m;
    double emax = 0.0;
    memcpy(ev->xt, ev->x, n * sizeof *ev->xt);
    for (size_t j = 0; j < n; j++) {
        ev->axis = j;
        double e;
        cr_status st = fd_run(method, c, ev, col, &e);
        ev->xt[j] = ev->x[j];
        if (st != CR_OK)
            return st;
        emax = fmax(emax, e);
        if (ybar != NULL) {
            double s = 0.0;
            for (size_t i = 0; i < m; i++)
                s += col[i] * ybar[i];
            dst[j] = s;
        } else {
            for (size_t i = 0; i < m; i++)
                dst[i * n + j] = col[i];
        }
    }
    *err = emax;
    return CR_OK;
}

cr_status cr_fd_jacobian(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_vec_fn f, void *env,
                         const double *x, size_t n, size_t m, cr_arena *scratch, double *jac,
                         double *err)
{
    static const char *const name = "cr_fd_jacobian";
    fd_call k;
    cr_status st;
    if (!fd_vec_begin(method, opts, f, env, x, n, m, scratch, name, jac == NULL && m > 0 && n > 0,
                      m == 0 || n == 0, &k, err, &st))
        return st;
    size_t mn;
    if ((st = cr__ck_mul(cr_arena_ctx(scratch), name, m, n, &mn)) != CR_OK ||
        (st = fd_vec_buffers(scratch, name, n, m, mn, &k)) != CR_OK)
        return st;
    double *stage = k.ev.nb + 4 * m; /* after nb (3m) and col (m) */
    double e = 0.0;
    st = fd_columns(method, &k.c, &k.ev, NULL, stage, &e);
    return fd_vec_end(scratch, name, st, &k, jac, stage, mn, err, e);
}

cr_status cr_fd_jtvp(const cr_fdm *method, const cr_fd_opts *opts, cr_fd_vec_fn f, void *env,
                     const double *x, size_t n, const double *ybar, size_t m, cr_arena *scratch,
                     double *jtv, double *err)
{
    bool bad = (jtv == NULL && n > 0) || (ybar == NULL && m > 0) || !all_finite(ybar, m);
    static const char *const name = "cr_fd_jtvp";
    fd_call k;
    cr_status st;
    if (!fd_vec_begin(method, opts, f, env, x, n, m, scratch, name, bad, n == 0 || m == 0, &k, err,
                      &st)) {
        for (size_t j = 0; st == CR_OK && j < n; j++) /* m == 0: a zero result */
            jtv[j] = 0.0;
        return st;
    }
    size_t n2;
    if ((st = cr__ck_add(cr_arena_ctx(scratch), name, n, n, &n2)) != CR_OK ||
        (st = fd_vec_buffers(scratch, name, n2, m, 0, &k)) != CR_OK)
        return st;
    double *stage = k.ev.nb + 4 * m;
    double e = 0.0, s = 0.0;
    st = fd_columns(method, &k.c, &k.ev, ybar, stage, &e);
    for (size_t i = 0; i < m; i++)
        s += fabs(ybar[i]);
    return fd_vec_end(scratch, name, st, &k, jtv, stage, n, err, e * s);
}
