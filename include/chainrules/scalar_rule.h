/**
 * @file scalar_rule.h
 * @brief The scalar-rule definition tool: ChainRulesCore's `@scalar_rule` in C.
 *
 * A scalar function's rule is written once, as a row: the primal and the partial
 * derivatives, with the outputs `Y[i]` bound (Julia's Ω) so the partials can reuse them.
 * From that one row come the frule, the rrule (with ChainRules' complex convention: the
 * pullback of a holomorphic f is conj(f'(z))·ȳ), the partials function
 * (derivatives_given_output), the AD engines' taped and forward operations, broadcast
 * kernels and the test registration.
 *
 * The body is instantiated for double, float and (unless the row is real-only) double
 * complex through `<tgmath.h>`, so `sin(x[0])` calls sin, sinf or csin. Inside the body:
 * `x[j]` are the inputs, `Y[i]` the outputs, `D[i*NIN + j]` = ∂Y[i]/∂x[j], and `T` is the
 * element type (for setup variables, e.g. `T c = cos(x[0]);`). Partials are written as the
 * derivative of a holomorphic function (no conj): the rrule conjugates.
 *
 * @code
 * #include <tgmath.h>                  // the rows' bodies are type-generic
 * #include <chainrules/scalar_rule.h>
 *
 * // sinh(x): Ω = sinh(x), ∂Ω/∂x = cosh(x)
 * CR_SCALAR_EVALS(my_sinh, 1, 1, Y[0] = sinh(x[0]), D[0] = cosh(x[0]))
 * static const cr_scalar_rule my_sinh_row = CR_SCALAR_ROW(my_sinh);
 * static const cr_function my_sinh_fn = CR_SCALAR_FUNCTION("my_sinh", my_sinh_row, 1);
 * ...
 * cr_scalar_rule_register(reg, &my_sinh_fn, &my_sinh_row);   // frule + rrule
 * @endcode
 *
 * Rows with comparisons or real-only functions (atan2, erf, fmod, ...) use
 * CR_SCALAR_EVALS_REAL / CR_SCALAR_ROW_REAL (double and float only). CR_SCALAR_ROW_EX adds
 * designated initialisers, e.g. `.test = {.lo = lo, .hi = hi}, .notes = "x > 0"`. Functions that
 * are not holomorphic (abs, angle, conj, real, imag) cannot be rows for complex arguments: write
 * their complex rules by hand.
 *
 * Include <tgmath.h> in the C file that defines rows (this header does not, so that it
 * does not change the meaning of math calls elsewhere).
 */
#ifndef CR_SCALAR_RULE_H
#define CR_SCALAR_RULE_H

#include "common.h"
#include "rule.h"
#include "status.h"

CR_BEGIN_DECLS

/** Row body instantiated for double: inputs x, outputs Y, partials D (nout x nin). */
typedef void (*cr_scalar_eval_f64)(const double *x, double *Y, double *D);
/** Row body instantiated for float. */
typedef void (*cr_scalar_eval_f32)(const float *x, float *Y, float *D);
/** Row body instantiated for double complex. */
typedef void (*cr_scalar_eval_c128)(const cr_complex *x, cr_complex *Y, cr_complex *D);

/** Most inputs and outputs of a scalar row. */
#define CR_SCALAR_MAX_IN 4
/** Most outputs of a scalar row. */
#define CR_SCALAR_MAX_OUT 4

/** A scalar rule: one row. */
typedef struct cr_scalar_rule {
    const char *name;          /**< Function name. */
    uint8_t nin;               /**< Inputs (1..CR_SCALAR_MAX_IN). */
    uint8_t nout;              /**< Outputs (1..CR_SCALAR_MAX_OUT); >1 gives a tuple. */
    cr_scalar_eval_f64 f64;    /**< double instantiation (required). */
    cr_scalar_eval_f32 f32;    /**< float instantiation, or NULL. */
    cr_scalar_eval_c128 c128;  /**< complex instantiation, or NULL (real-only row). */
    const char *primal_src;    /**< The primal as written (for generated docs). */
    const char *partials_src;  /**< The partials as written (for generated docs). */
    const char *pullback_name; /**< "<name>_pullback". */
    const char *notes;         /**< Domain and conventions at kinks (docs), or NULL. */
    cr_rule_test test;         /**< Test registration: sampling box and hard points. */
} cr_scalar_rule;

/** Defines the functions NAME_f64, NAME_f32, NAME_c128 and the source strings of a row. */
#define CR_SCALAR_EVALS(NAME, NIN, NOUT, PRIMAL, ...)                        \
    CR__SCALAR_EVAL(NAME##_f64, double, NIN, NOUT, PRIMAL, __VA_ARGS__)      \
    CR__SCALAR_EVAL_F32(NAME##_f32, NIN, NOUT, PRIMAL, __VA_ARGS__)          \
    CR__SCALAR_EVAL(NAME##_c128, cr_complex, NIN, NOUT, PRIMAL, __VA_ARGS__) \
    CR__SCALAR_SRC(NAME, NIN, NOUT, #PRIMAL, #__VA_ARGS__)

/** Like CR_SCALAR_EVALS for real-only rows (no complex instantiation). */
#define CR_SCALAR_EVALS_REAL(NAME, NIN, NOUT, PRIMAL, ...)              \
    CR__SCALAR_EVAL(NAME##_f64, double, NIN, NOUT, PRIMAL, __VA_ARGS__) \
    CR__SCALAR_EVAL_F32(NAME##_f32, NIN, NOUT, PRIMAL, __VA_ARGS__)     \
    CR__SCALAR_SRC(NAME, NIN, NOUT, #PRIMAL, #__VA_ARGS__)

/** The row of CR_SCALAR_EVALS(NAME, ...). */
#define CR_SCALAR_ROW(NAME)                     \
    {                                           \
        CR__ROW_BASE(NAME), .c128 = NAME##_c128 \
    }
/** The row of CR_SCALAR_EVALS(NAME, ...) with more designated initialisers (.test, .notes). */
#define CR_SCALAR_ROW_EX(NAME, ...)                          \
    {                                                        \
        CR__ROW_BASE(NAME), .c128 = NAME##_c128, __VA_ARGS__ \
    }
/** The row of CR_SCALAR_EVALS_REAL(NAME, ...). */
#define CR_SCALAR_ROW_REAL(NAME)         \
    {                                    \
        CR__ROW_BASE(NAME), .c128 = NULL \
    }
/** The row of CR_SCALAR_EVALS_REAL(NAME, ...) with more designated initialisers. */
#define CR_SCALAR_ROW_REAL_EX(NAME, ...)              \
    {                                                 \
        CR__ROW_BASE(NAME), .c128 = NULL, __VA_ARGS__ \
    }

/** A cr_function whose primal evaluates the row ROW of NIN inputs. */
#define CR_SCALAR_FUNCTION(NAMESTR, ROW, NIN)                                             \
    {                                                                                     \
        .name = (NAMESTR), .arity = (NIN), .primal = cr_scalar_primal, .self_type = NULL, \
        .udata = &(ROW), .flags = CR_FN_SCALAR_ROW                                        \
    }

/* Internals of the macros above. */
#define CR__SCALAR_EVAL(FN, TYPE, NIN, NOUT, PRIMAL, ...) \
    static void FN(const TYPE *x, TYPE *Y, TYPE *D)       \
    {                                                     \
        typedef TYPE T;                                   \
        (void)sizeof(T);                                  \
        (void)x;                                          \
        (void)D;                                          \
        PRIMAL;                                           \
        __VA_ARGS__;                                      \
    }
#if defined(__GNUC__)
#define CR__SCALAR_EVAL_F32(FN, NIN, NOUT, PRIMAL, ...)                               \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wconversion\"") \
        _Pragma("GCC diagnostic ignored \"-Wdouble-promotion\"")                      \
            _Pragma("GCC diagnostic ignored \"-Wfloat-conversion\"")                  \
                CR__SCALAR_EVAL(FN, float, NIN, NOUT, PRIMAL, __VA_ARGS__)            \
                    _Pragma("GCC diagnostic pop")
#else
#define CR__SCALAR_EVAL_F32(FN, NIN, NOUT, PRIMAL, ...) \
    CR__SCALAR_EVAL(FN, float, NIN, NOUT, PRIMAL, __VA_ARGS__)
#endif
/* The sources are stringified by the public macros, before their arguments are expanded
 * (<tgmath.h>'s sin is a macro), and passed here as strings. */
#define CR__SCALAR_SRC(NAME, NIN, NOUT, PRIMAL_STR, PARTIALS_STR) \
    enum { NAME##_nin = (NIN), NAME##_nout = (NOUT) };            \
    static const char NAME##_primal_src[] = PRIMAL_STR;           \
    static const char NAME##_partials_src[] = PARTIALS_STR;
#define CR__ROW_BASE(NAME)                                                                       \
    .name = #NAME, .nin = NAME##_nin, .nout = NAME##_nout, .f64 = NAME##_f64, .f32 = NAME##_f32, \
    .primal_src = NAME##_primal_src, .partials_src = NAME##_partials_src,                        \
    .pullback_name = #NAME "_pullback"

/**
 * The primal of a function made by CR_SCALAR_FUNCTION (fn->udata is the row).
 * @return CR_OK; CR_EINVAL (arity, argument kinds).
 */
CR_API cr_status cr_scalar_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                  size_t nargs, cr_value *out);

/**
 * Register a row's frule and rrule for `fn` in reg, for arguments of kind
 * (real, real, ...) — or (number, number, ...) when the row has a complex instantiation —
 * with the row's test registration. Integer and bool arguments get NoTangent; an f32
 * computation keeps f32 tangents; mixed arguments promote (f32 < f64 < c128).
 * @return as cr_registry_add().
 */
CR_API cr_status cr_scalar_rule_register(cr_registry *reg, const cr_function *fn,
                                         const cr_scalar_rule *row);

/**
 * derivatives_given_output for double arguments: Y = f(x) and D[i*nin + j] = ∂Y[i]/∂x[j].
 * @param[in]  row  the row.
 * @param[in]  x    row->nin inputs.
 * @param[out] Y    row->nout outputs.
 * @param[out] D    nout*nin partials.
 */
CR_API void cr_scalar_partials_f64(const cr_scalar_rule *row, const double *x, double *Y,
                                   double *D);

/**
 * derivatives_given_output for complex arguments (holomorphic partials, not conjugated).
 * @return CR_OK; CR_EDOMAIN for a real-only row.
 */
CR_API cr_status cr_scalar_partials_c128(const cr_scalar_rule *row, const cr_complex *x,
                                         cr_complex *Y, cr_complex *D);

/** The row behind a scalar function (fn->udata when fn came from a row), or NULL. */
CR_API const cr_scalar_rule *cr_scalar_rule_of(const cr_function *fn);

CR_END_DECLS

#endif /* CR_SCALAR_RULE_H */
