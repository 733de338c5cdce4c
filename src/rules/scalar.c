/*
 * The generic frule, rrule and primal of scalar-table rows (the @scalar_rule analogue):
 * pick the element type (f32 < f64 < c128), evaluate the row once for value and
 * partials, keep the partials in the pullback's arena environment.
 * Complex convention: frule multiplies by f'(z), the pullback by conj(f'(z)).
 */
#include <float.h>
#include <string.h>

#include "rules_impl.h"

typedef enum { ST_F32 = 0, ST_F64 = 1, ST_C128 = 2 } stype;

/* Tuple descriptors for multi-output rows: (T, T), (T, T, T), (T, T, T, T). */
#define TUPLE_FIELDS(T, K)                                                  \
    {                                                                       \
        {NULL, 0 * sizeof(T), K, NULL}, {NULL, 1 * sizeof(T), K, NULL},     \
            {NULL, 2 * sizeof(T), K, NULL}, {NULL, 3 * sizeof(T), K, NULL}, \
    }
static const cr_field k_tf32[4] = TUPLE_FIELDS(float, CR_KIND_F32);
static const cr_field k_tf64[4] = TUPLE_FIELDS(double, CR_KIND_F64);
static const cr_field k_tc128[4] = TUPLE_FIELDS(cr_complex, CR_KIND_C128);
static const cr_type k_tuples[3][3] = {
    {{"tuple(f32,f32)", 2 * sizeof(float), 2, k_tf32},
     {"tuple(f32,f32,f32)", 3 * sizeof(float), 3, k_tf32},
     {"tuple(f32,f32,f32,f32)", 4 * sizeof(float), 4, k_tf32}},
    {{"tuple(f64,f64)", 2 * sizeof(double), 2, k_tf64},
     {"tuple(f64,f64,f64)", 3 * sizeof(double), 3, k_tf64},
     {"tuple(f64,f64,f64,f64)", 4 * sizeof(double), 4, k_tf64}},
    {{"tuple(c128,c128)", 2 * sizeof(cr_complex), 2, k_tc128},
     {"tuple(c128,c128,c128)", 3 * sizeof(cr_complex), 3, k_tc128},
     {"tuple(c128,c128,c128,c128)", 4 * sizeof(cr_complex), 4, k_tc128}},
};

static const size_t k_size[3] = {sizeof(float), sizeof(double), sizeof(cr_complex)};

static cr_status pick_type(cr_arena *arena, const cr_scalar_rule *row, const cr_value *args,
                           size_t nargs, stype *t)
{
    if (nargs != row->nin)
        return CR__FAIL(arena, CR_EINVAL, "%s takes %u argument%s, %zu given", row->name,
                        (unsigned)row->nin, CR__S((unsigned)row->nin), nargs);
    /* Julia's promotion: integers and bools join any float type (Float32 * Int is
     * Float32); only integers and bools alone compute in f64. */
    unsigned has;
    size_t bad = 0;
    if (!cr__number_kinds(args, nargs, &has, &bad))
        return CR__FAIL(arena, CR_EINVAL, "%s: argument %zu is a %s, not a number", row->name,
                        bad + 1, cr_kind_name(args[bad].kind));
    bool c = has & CR__HAS_C128, d = has & CR__HAS_F64, s = has & CR__HAS_F32;
    if (c) {
        if (row->c128 == NULL)
            return CR__FAIL(arena, CR_EDOMAIN, "%s is defined for real arguments only", row->name);
        *t = ST_C128;
    } else if (d || !s || row->f32 == NULL) {
        *t = ST_F64;
    } else {
        *t = ST_F32;
    }
    return CR_OK;
}

static cr_complex value_as_complex(const cr_value *v)
{
    cr_complex z;
    (void)cr__value_number(v, &z); /* the arguments were checked (row_type) */
    return z;
}

/* Evaluate the row: Y (nout) and D (nout*nin) in the storage of type t. */
static void eval_row(const cr_scalar_rule *row, stype t, const cr_value *args, void *Y, void *D)
{
    size_t n = row->nin;
    switch (t) {
    case ST_F32: {
        float x[CR_SCALAR_MAX_IN];
        for (size_t j = 0; j < n; j++)
            x[j] = (float)creal(value_as_complex(&args[j]));
        row->f32(x, Y, D);
        break;
    }
    case ST_F64: {
        double x[CR_SCALAR_MAX_IN];
        for (size_t j = 0; j < n; j++)
            x[j] = args[j].kind == CR_KIND_F64 ? args[j].u.f64 : creal(value_as_complex(&args[j]));
        row->f64(x, Y, D);
        break;
    }
    case ST_C128: {
        cr_complex x[CR_SCALAR_MAX_IN];
        for (size_t j = 0; j < n; j++)
            x[j] = value_as_complex(&args[j]);
        row->c128(x, Y, D);
        break;
    }
    }
}

static cr_complex load(stype t, const void *p, size_t i)
{
    switch (t) {
    case ST_F32:
        return (double)((const float *)p)[i];
    case ST_F64:
        return ((const double *)p)[i];
    default:
        return ((const cr_complex *)p)[i];
    }
}

/* Inline constructors: the exported cr_tangent_* / cr_value_* live in another file and
 * this is the hot path of every scalar rule. */
static inline cr_tangent tan_f64(double x)
{
    return (cr_tangent){.tag = CR_TAN_F64, .u.f64 = x};
}

static inline cr_tangent tan_none(void)
{
    return (cr_tangent){.tag = CR_TAN_NONE};
}

static inline cr_tangent tan_zero(void)
{
    return (cr_tangent){.tag = CR_TAN_ZERO};
}

static cr_value scalar_value(stype t, cr_complex v)
{
    switch (t) {
    case ST_F32:
        return (cr_value){.kind = CR_KIND_F32, .u.f32 = (float)creal(v)};
    case ST_F64:
        return (cr_value){.kind = CR_KIND_F64, .u.f64 = creal(v)};
    default:
        return (cr_value){.kind = CR_KIND_C128, .u.c128 = v};
    }
}

static cr_tangent scalar_tangent(stype t, cr_complex v)
{
    switch (t) {
    case ST_F32:
        return (cr_tangent){.tag = CR_TAN_F32, .u.f32 = (float)creal(v)};
    case ST_F64:
        return tan_f64(creal(v));
    default:
        return (cr_tangent){.tag = CR_TAN_C128, .u.c128 = v};
    }
}

/* The output value: a scalar, or a tuple allocated in the arena. */
static cr_status make_output(cr_arena *arena, const cr_scalar_rule *row, stype t, const void *Y,
                             cr_value *y)
{
    if (row->nout == 1) {
        if (t == ST_F64)
            *y = (cr_value){.kind = CR_KIND_F64, .u.f64 = *(const double *)Y};
        else
            *y = scalar_value(t, load(t, Y, 0));
        return CR_OK;
    }
    size_t bytes = row->nout * k_size[t];
    void *mem = cr_arena_alloc(arena, bytes, 0);
    if (mem == NULL)
        return CR__ALLOC_STATUS(arena);
    memcpy(mem, Y, bytes);
    *y = cr_value_struct(&k_tuples[t][row->nout - 2], mem);
    return CR_OK;
}

cr_status cr__tangent_scalar(cr_arena *arena, const char *who, cr_tangent t, cr_complex *v,
                             bool *nonzero)
{
    bool nz_unused;
    if (nonzero == NULL)
        nonzero = &nz_unused;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK) {
        *v = 0.0;
        *nonzero = false;
        return st;
    }
    cr__tan_number k = cr__tangent_number(t, v);
    *nonzero = k == CR__TN_NUMBER;
    switch (k) {
    case CR__TN_ZERO:
    case CR__TN_NUMBER:
        return CR_OK;
    case CR__TN_NOTIMPL:
        return cr__notimpl_error(arena, who, t);
    default:
        return CR__FAIL(arena, CR_ETANGENT, "%s: expected a scalar tangent, got %s", who,
                        cr_tag_name((cr_tag)t.tag));
    }
}

/* ---- frule ----------------------------------------------------------------------------- */

static cr_status scalar_frule(CR__FRULE_PARAMS)
{
    const cr_scalar_rule *row = udata;
    stype t = ST_F64;
    cr_status st = pick_type(arena, row, args, nargs, &t);
    if (st != CR_OK)
        return st;
    cr_complex Yc[CR_SCALAR_MAX_OUT], Dc[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    eval_row(row, t, args, Yc, Dc);
    size_t nin = row->nin, nout = row->nout;
    cr_complex xd[CR_SCALAR_MAX_IN];
    bool nz[CR_SCALAR_MAX_IN], any = false;
    for (size_t j = 0; j < nin; j++) {
        st = cr__tangent_scalar(arena, row->name, dargs[j + 1], &xd[j], &nz[j]);
        if (st != CR_OK)
            return st;
        if (args[j].kind == CR_KIND_I64 || args[j].kind == CR_KIND_I32 ||
            args[j].kind == CR_KIND_BOOL)
            nz[j] = false;
        any = any || nz[j];
    }
    st = make_output(arena, row, t, Yc, y);
    if (st != CR_OK)
        return st;
    if (!any) {
        /* Every input tangent is zero: so is the output, tuple or not (no allocation). */
        *dy = tan_zero();
        return CR_OK;
    }
    cr_tangent outs[CR_SCALAR_MAX_OUT];
    for (size_t i = 0; i < nout; i++) {
        cr_complex acc = 0.0;
        for (size_t j = 0; j < nin; j++)
            if (nz[j])
                acc += load(t, Dc, i * nin + j) * xd[j];
        outs[i] = scalar_tangent(t, acc);
    }
    if (nout == 1) {
        *dy = outs[0];
        return CR_OK;
    }
    return cr_tangent_struct(arena, &k_tuples[t][nout - 2], NULL, outs, nout, dy);
}

/* ---- rrule and its pullback ------------------------------------------------------------ */

typedef struct scalar_env {
    const cr_scalar_rule *row;
    uint8_t type;
    uint8_t kinds[CR_SCALAR_MAX_IN]; /* argument kinds, for projection */
    /* partials follow, nout*nin elements of the type, aligned for cr_complex */
} scalar_env;

#define ENV_HEADER (((sizeof(scalar_env) + 15) / 16) * 16)

static cr_status scalar_pullback(CR__PULLBACK_PARAMS)
{
    const scalar_env *e = env;
    const cr_scalar_rule *row = e->row;
    const void *D = (const unsigned char *)env + ENV_HEADER;
    size_t nin = row->nin, nout = row->nout;
    stype t = (stype)e->type;
    (void)nx;
    /* The common case: one real input and output, a real cotangent. */
    if (nin == 1 && nout == 1 && t == ST_F64 && dy->tag == CR_TAN_F64 &&
        e->kinds[0] == CR_KIND_F64) {
        dx[0] = tan_none();
        dx[1] = tan_f64(((const double *)D)[0] * dy->u.f64);
        return CR_OK;
    }
    cr_complex g[CR_SCALAR_MAX_OUT];
    bool gnz[CR_SCALAR_MAX_OUT], any = false;
    cr_tangent d;
    cr_status st = cr_tangent_unthunk(*dy, &d);
    if (st != CR_OK)
        return st;
    if (nout > 1 && d.tag != CR_TAN_STRUCT && !cr_tangent_is_zero(d))
        return CR__FAIL(arena, CR_ETANGENT,
                        "%s: the output is a tuple, its cotangent must be a structural tangent "
                        "(got %s)",
                        row->pullback_name, cr_tag_name((cr_tag)d.tag));
    for (size_t i = 0; i < nout; i++) {
        cr_tangent ti = nout == 1 ? d : cr_tangent_field(d, i);
        st = cr__tangent_scalar(arena, row->pullback_name, ti, &g[i], &gnz[i]);
        if (st != CR_OK)
            return st;
        any = any || gnz[i];
    }
    dx[0] = tan_none();
    for (size_t j = 0; j < nin; j++) {
        cr_kind k = (cr_kind)e->kinds[j];
        if (k == CR_KIND_I64 || k == CR_KIND_I32 || k == CR_KIND_BOOL) {
            dx[j + 1] = tan_none();
            continue;
        }
        if (!any) {
            dx[j + 1] = tan_zero();
            continue;
        }
        cr_complex acc = 0.0;
        for (size_t i = 0; i < nout; i++)
            if (gnz[i])
                acc += conj(load(t, D, i * nin + j)) * g[i];
        /* ProjectTo the argument: a real argument drops the imaginary part. */
        if (k == CR_KIND_F64)
            dx[j + 1] = tan_f64(creal(acc));
        else if (k == CR_KIND_F32)
            dx[j + 1] = cr_tangent_f32((float)creal(acc));
        else
            dx[j + 1] = cr_tangent_c128(acc);
    }
    return CR_OK;
}

static cr_status scalar_rrule(CR__RRULE_PARAMS)
{
    const cr_scalar_rule *row = udata;
    stype t = ST_F64;
    cr_status st = pick_type(arena, row, args, nargs, &t);
    if (st != CR_OK)
        return st;
    if (nargs > CR_SCALAR_MAX_IN)
        return CR_EINVAL;
    size_t nd = (size_t)row->nout * row->nin;
    unsigned char *env = cr_arena_alloc(arena, ENV_HEADER + nd * k_size[t], 16);
    if (env == NULL)
        return CR__ALLOC_STATUS(arena);
    scalar_env *e = (scalar_env *)(void *)env;
    e->row = row;
    e->type = (uint8_t)t;
    for (size_t j = 0; j < nargs; j++)
        e->kinds[j] = (uint8_t)args[j].kind;
    unsigned char Y[CR_SCALAR_MAX_OUT * sizeof(cr_complex)];
    eval_row(row, t, args, Y, env + ENV_HEADER);
    st = make_output(arena, row, t, Y, y);
    if (st != CR_OK)
        return st;
    pb->fn = scalar_pullback;
    pb->env = env;
    pb->name = row->pullback_name;
    pb->nx = nargs + 1;
    return CR_OK;
}

cr_status cr_scalar_primal(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                           cr_value *out)
{
    const cr_scalar_rule *row = cr_scalar_rule_of(f->u.func.fn);
    if (row == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s is not a scalar-table function", cr__fname(f));
    stype t = ST_F64;
    cr_status st = pick_type(arena, row, args, nargs, &t);
    if (st != CR_OK)
        return st;
    cr_complex Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    eval_row(row, t, args, Y, D);
    return make_output(arena, row, t, Y, out);
}

const cr_scalar_rule *cr_scalar_rule_of(const cr_function *fn)
{
    if (fn == NULL || !(fn->flags & CR_FN_SCALAR_ROW))
        return NULL;
    return fn->udata;
}

void cr_scalar_partials_f64(const cr_scalar_rule *row, const double *x, double *Y, double *D)
{
    row->f64(x, Y, D);
}

cr_status cr_scalar_partials_c128(const cr_scalar_rule *row, const cr_complex *x, cr_complex *Y,
                                  cr_complex *D)
{
    if (row->c128 == NULL)
        return CR_EDOMAIN;
    row->c128(x, Y, D);
    return CR_OK;
}

cr_status cr_scalar_rule_register(cr_registry *reg, const cr_function *fn,
                                  const cr_scalar_rule *row)
{
    if (reg == NULL || fn == NULL || row == NULL || row->f64 == NULL || row->nin == 0 ||
        row->nin > CR_SCALAR_MAX_IN || row->nout == 0 || row->nout > CR_SCALAR_MAX_OUT)
        return reg != NULL ? cr_ctx_error(reg->ctx, CR_EINVAL, "invalid scalar rule row")
                           : CR_EINVAL;
    cr_argspec args[CR_SCALAR_MAX_IN];
    for (size_t j = 0; j < row->nin; j++)
        args[j] = row->c128 != NULL ? CR_ARG_NUMBER : CR_ARG_REAL;
    cr_rule_def d = {.fn = fn,
                     .nargs = row->nin,
                     .args = args,
                     .frule = scalar_frule,
                     .rrule = scalar_rrule,
                     .udata = row,
                     .test = &row->test};
    return cr_registry_add(reg, &d);
}

/* ---- Second derivatives of a row -------------------------------------------------------- */

/* The step of the central differences of partials along an argument at x: cbrt(eps) max(1,
 * |x|), about ten significant digits. */
double cr__fd_step(double x)
{
    return cbrt(DBL_EPSILON) * fmax(1.0, fabs(x));
}

/* A second derivative from a partial at x - hm, x and x + hp (Dm, D, Dp): the central
 * difference, or where the partial jumps within the step (a kink) the one-sided difference
 * of smaller magnitude. */
double cr__fd_second(double Dp, double D, double Dm, double hp, double hm)
{
    double f = (Dp - D) / hp, b = (D - Dm) / hm;
    double second = fabs(Dp - 2 * D + Dm);
    if (second > 1e-3 * (fabs(Dp) + fabs(Dm)) && second > 0)
        return fabs(f) < fabs(b) ? f : b;
    return (Dp - Dm) / (hp + hm);
}

/*
 * Column l of a row's second derivatives by central differences of its partials D at x,
 * with the step cbrt(eps) max(1, |x_l|) (about ten significant digits). Where the partials
 * jump within one step (a kink: abs, max, relu near 0), the one-sided difference of smaller
 * magnitude is used, which is exact for piecewise-linear functions.
 */
static void fd_column(const cr_scalar_rule *row, const double *x, const double *D, double *H,
                      size_t l)
{
    size_t nin = row->nin, nout = row->nout;
    double xp[CR_SCALAR_MAX_IN], xm[CR_SCALAR_MAX_IN], Y2[CR_SCALAR_MAX_OUT];
    double Dp[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN], Dm[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    double h = cr__fd_step(x[l]);
    memcpy(xp, x, nin * sizeof *x);
    memcpy(xm, x, nin * sizeof *x);
    xp[l] = x[l] + h;
    xm[l] = x[l] - h;
    double hp = xp[l] - x[l], hm = x[l] - xm[l]; /* the steps actually taken */
    row->f64(xp, Y2, Dp);
    row->f64(xm, Y2, Dm);
    for (size_t o = 0; o < nout; o++)
        for (size_t j = 0; j < nin; j++) {
            size_t q = o * nin + j;
            H[q * nin + l] = cr__fd_second(Dp[q], D[q], Dm[q], hp, hm);
        }
}

/*
 * H[(o*nin + j)*nin + l] = d^2 Y_o / dx_j dx_l of a row at x, whose partials there are D,
 * for the columns l in the bit set `cols` (the arguments that are variables).
 *
 * Rows with a complex instantiation: the complex step. Where the partials are holomorphic,
 * D(x + i h e_l) = D(x) + i h dD/dx_l + O(h^2): the imaginary part divided by h is the
 * second derivative with no cancellation at all, exact to rounding for h = 1e-20 |x_l|.
 * That holds only where the complex function is real on the real axis around x: pow(x, 3)
 * at x < 0 is real, but its complex instantiation exp(3 log x) sits on the branch cut of
 * log there, and its imaginary part is rounding (3.7e-16 |x|^3) that, divided by h, swamps
 * the answer. The step checks itself on the values: Im Y(x + i h e_l) / h is the first
 * derivative, which the row gives exactly (D), so where the two disagree by more than 1e-6
 * of their size the column is taken by central differences of the partials instead.
 *
 * Real-only rows: central differences of the partials (fd_column).
 */
void cr__row_hessian(const cr_scalar_rule *row, const double *x, const double *D, double *H,
                     unsigned cols)
{
    size_t nin = row->nin, nout = row->nout;
    for (size_t l = 0; l < nin; l++) {
        if (!(cols & (1u << l)))
            continue;
        bool stepped = false;
        if (row->c128 != NULL) {
            cr_complex z[CR_SCALAR_MAX_IN], Yc[CR_SCALAR_MAX_OUT];
            cr_complex Dc[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
            double h = cr__cstep(x[l]);
            for (size_t j = 0; j < nin; j++)
                z[j] = cr__c(x[j], j == l ? h : 0.0);
            row->c128(z, Yc, Dc);
            stepped = true;
            for (size_t o = 0; o < nout && stepped; o++) {
                double r = cimag(Yc[o]) / h, d = D[o * nin + l];
                stepped = fabs(r - d) <= 1e-6 * fmax(fabs(r), fabs(d));
            }
            for (size_t o = 0; o < nout && stepped; o++)
                for (size_t j = 0; j < nin; j++)
                    H[(o * nin + j) * nin + l] = cimag(Dc[o * nin + j]) / h;
        }
        if (!stepped)
            fd_column(row, x, D, H, l);
    }
}
