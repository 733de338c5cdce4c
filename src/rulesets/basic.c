/*
 * Basic scalar rules: arithmetic operators, sin, cos, exp, log, sqrt, asin, sincos, and
 * ignore_derivatives. Each function is one row of the scalar-rule table; the frule, rrule,
 * partials and test registration all come from that row.
 */
#include <chainrules/rules_math.h>

#include "../rules/rules_impl.h"

/* Declares the cr_function of a row and its exported function value cr_fn_NAME. */
#define DEFINE_FN(NAME, STR, NIN)                                                          \
    static const cr_function NAME##_function = CR_SCALAR_FUNCTION(STR, NAME##_row, NIN);   \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

/* x + y: ∂/∂x = 1, ∂/∂y = 1 */
CR_SCALAR_EVALS(add, 2, 1, Y[0] = x[0] + x[1], D[0] = 1; D[1] = 1)
static const cr_scalar_rule add_row = CR_SCALAR_ROW(add);
DEFINE_FN(add, "+", 2)

/* x - y: ∂/∂x = 1, ∂/∂y = -1 */
CR_SCALAR_EVALS(sub, 2, 1, Y[0] = x[0] - x[1], D[0] = 1; D[1] = -1)
static const cr_scalar_rule sub_row = CR_SCALAR_ROW(sub);
DEFINE_FN(sub, "-", 2)

/* x * y: ∂/∂x = y, ∂/∂y = x */
CR_SCALAR_EVALS(mul, 2, 1, Y[0] = x[0] * x[1], D[0] = x[1]; D[1] = x[0])
static const cr_scalar_rule mul_row = CR_SCALAR_ROW(mul);
DEFINE_FN(mul, "*", 2)

/* x / y: ∂/∂x = 1/y, ∂/∂y = -Ω/y */
CR_SCALAR_EVALS(div, 2, 1, Y[0] = x[0] / x[1], D[0] = 1 / x[1]; D[1] = -Y[0] / x[1])
static const cr_scalar_rule div_row = CR_SCALAR_ROW(div);
DEFINE_FN(div, "/", 2)

/* -x: ∂/∂x = -1 */
CR_SCALAR_EVALS(neg, 1, 1, Y[0] = -x[0], D[0] = -1)
static const cr_scalar_rule neg_row = CR_SCALAR_ROW(neg);
DEFINE_FN(neg, "neg", 1)

/* sin(x): cos(x) */
CR_SCALAR_EVALS(sin, 1, 1, Y[0] = sin(x[0]), D[0] = cos(x[0]))
static const cr_scalar_rule sin_row = CR_SCALAR_ROW(sin);
DEFINE_FN(sin, "sin", 1)

/* cos(x): -sin(x) */
CR_SCALAR_EVALS(cos, 1, 1, Y[0] = cos(x[0]), D[0] = -sin(x[0]))
static const cr_scalar_rule cos_row = CR_SCALAR_ROW(cos);
DEFINE_FN(cos, "cos", 1)

/* exp(x): Ω */
CR_SCALAR_EVALS(exp, 1, 1, Y[0] = exp(x[0]), D[0] = Y[0])
static const cr_scalar_rule exp_row = CR_SCALAR_ROW(exp);
DEFINE_FN(exp, "exp", 1)

/* log(x): 1/x (domain x > 0 for real x) */
static const double k_pos_lo[] = {0.05}, k_pos_hi[] = {4.0};
CR_SCALAR_EVALS(log, 1, 1, Y[0] = log(x[0]), D[0] = 1 / x[0])
static const cr_scalar_rule log_row =
    CR_SCALAR_ROW_EX(log, .test = {.lo = k_pos_lo, .hi = k_pos_hi}, .notes = "x > 0");
DEFINE_FN(log, "log", 1)

/* sqrt(x): 1/(2Ω); +inf at x = +0 */
CR_SCALAR_EVALS(sqrt, 1, 1, Y[0] = sqrt(x[0]), D[0] = 1 / (2 * Y[0]))
static const cr_scalar_rule sqrt_row =
    CR_SCALAR_ROW_EX(sqrt, .test = {.lo = k_pos_lo, .hi = k_pos_hi},
                  .notes = "x >= 0; the derivative at +0 is +inf");
DEFINE_FN(sqrt, "sqrt", 1)

/* asin(x): 1/sqrt((1-x)(1+x)); the product form keeps accuracy near |x| = 1 where
 * 1 - x*x cancels. */
static const double k_unit_lo[] = {-0.99}, k_unit_hi[] = {0.99};
CR_SCALAR_EVALS(asin, 1, 1, Y[0] = asin(x[0]), D[0] = 1 / sqrt((1 - x[0]) * (1 + x[0])))
static const cr_scalar_rule asin_row =
    CR_SCALAR_ROW_EX(asin, .test = {.lo = k_unit_lo, .hi = k_unit_hi},
                  .notes = "-1 < x < 1 for real x");
DEFINE_FN(asin, "asin", 1)

/* sincos(x) = (sin x, cos x): partials (cos x, -sin x) */
CR_SCALAR_EVALS(sincos, 1, 2, Y[0] = sin(x[0]); Y[1] = cos(x[0]), D[0] = Y[1]; D[1] = -Y[0])
static const cr_scalar_rule sincos_row = CR_SCALAR_ROW(sincos);
DEFINE_FN(sincos, "sincos", 1)

const cr_value cr_fn_ignore_derivatives = {
    .kind = CR_KIND_FUNC, .u.func = {&cr_function_ignore_derivatives, NULL}};

static const struct {
    const cr_function *fn;
    const cr_scalar_rule *row;
} k_rows[] = {
    {&add_function, &add_row},   {&sub_function, &sub_row},   {&mul_function, &mul_row},
    {&div_function, &div_row},   {&neg_function, &neg_row},   {&sin_function, &sin_row},
    {&cos_function, &cos_row},   {&exp_function, &exp_row},   {&log_function, &log_row},
    {&sqrt_function, &sqrt_row}, {&asin_function, &asin_row}, {&sincos_function, &sincos_row},
};

cr_status cr__family_basic(cr_registry *reg)
{
    for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; i++) {
        cr_status st = cr_scalar_rule_register(reg, k_rows[i].fn, k_rows[i].row);
        if (st != CR_OK)
            return st;
    }
    static const cr_argspec any1[1] = {{0x1FFFu, NULL}};
    return cr_registry_non_differentiable(reg, &cr_function_ignore_derivatives, any1, 1, false);
}
