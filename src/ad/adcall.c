/*
 * Rules called from generated code (adcall.h): the adjoint and the tangent of a call of a
 * primitive, through the rule API.
 *
 * The arguments arrive as raw doubles and dense row-major arrays with their shadows; they
 * become array views (no copy) and f64 values, the rule runs in an arena of its own, and
 * the cotangents (reverse) or the output tangent (forward) are read back into the shadows.
 * Nothing is written to a shadow before every cotangent has been computed and checked, so
 * a failure leaves the caller's derivatives as they were.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chainrules/adcall.h"
#include "chainrules/arena.h"
#include "chainrules/array.h"
#include "chainrules/ctx.h"
#include "chainrules/tangent.h"
#include "core/checked.h"

static _Thread_local char t_message[256];

const char *cr_adcall_message(void)
{
    return t_message;
}

static cr_status fail(cr_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static cr_status fail(cr_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_message, sizeof t_message, fmt, ap);
    va_end(ap);
    return st;
}

/* The name of the rule, for messages. */
static const char *rule_name(const cr_value *fn, const cr_rule_def *def)
{
    const cr_function *f = def ? def->fn : (fn && fn->kind == CR_KIND_FUNC ? fn->u.func.fn : NULL);
    return f && f->name ? f->name : "(unnamed rule)";
}

/* Checks a descriptor; *n is its element count (1 for a scalar). */
static cr_status check_arg(const cr_adcall_arg *a, bool need_x, size_t *n)
{
    if (!a || a->ndim > CR_ADCALL_MAX_DIMS || (need_x && !a->x) || a->dinc < 0)
        return CR_EINVAL;
    size_t count = 1;
    for (size_t d = 0; d < a->ndim; d++)
        if (!cr__mul_size(count, a->shape[d], &count))
            return CR_EOVERFLOW;
    if (count > (size_t)PTRDIFF_MAX / sizeof(double))
        return CR_EOVERFLOW;
    *n = count;
    return CR_OK;
}

/* A view of the memory p with a's shape, elements inc apart. */
static cr_status view(cr_array *out, double *p, const cr_adcall_arg *a, ptrdiff_t inc)
{
    ptrdiff_t strides[CR_ADCALL_MAX_DIMS] = {inc, inc};
    if (a->ndim == 2)
        strides[0] = (ptrdiff_t)a->shape[1] * inc;
    return cr_array_view_init(out, p, CR_DT_F64, a->ndim, a->shape, strides);
}

/* The element at linear (row-major) index i of a real array of any layout or structure. */
static double elem(const cr_array *a, size_t i)
{
    return creal(cr_array_get_linear(a, i));
}

/* Checks that tangent t fits an argument of n elements and shape a: a real number for a
 * scalar, a real array of the same element count for an array. */
static cr_status check_tangent(const cr_tangent *t, const cr_adcall_arg *a, size_t n,
                               const char *name, size_t k)
{
    if (t->tag == CR_TAN_ZERO || t->tag == CR_TAN_NONE)
        return CR_OK;
    if (a->ndim == 0 && (t->tag == CR_TAN_F64 || t->tag == CR_TAN_F32))
        return CR_OK;
    if (a->ndim == 0 && t->tag == CR_TAN_ARRAY && cr_array_numel(t->u.arr) == 1 &&
        t->u.arr->dtype != CR_DT_C128)
        return CR_OK;
    if (a->ndim > 0 && t->tag == CR_TAN_ARRAY) {
        if (t->u.arr->dtype == CR_DT_C128)
            return fail(CR_ETANGENT, "%s: the tangent of %s %zu is complex", name,
                        k ? "argument" : "the output", k);
        if (cr_array_numel(t->u.arr) != n)
            return fail(CR_ESHAPE, "%s: the tangent of %s %zu has %zu elements, not %zu", name,
                        k ? "argument" : "the output", k, cr_array_numel(t->u.arr), n);
        return CR_OK;
    }
    return fail(CR_ETANGENT, "%s: the tangent of %s %zu is a %s, not a real %s", name,
                k ? "argument" : "the output", k, cr_tag_name((cr_tag)t->tag),
                a->ndim ? "array" : "number");
}

/* Element i of a checked real tangent (0 for the zeros). */
static double tangent_elem(const cr_tangent *t, size_t i)
{
    switch (t->tag) {
    case CR_TAN_F64:
        return t->u.f64;
    case CR_TAN_F32:
        return t->u.f32;
    case CR_TAN_ARRAY:
        return elem(t->u.arr, i);
    default:
        return 0.0;
    }
}

typedef struct call {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_value f;
    cr_value vals[CR_SIG_MAX_ARGS];
    cr_array arrs[CR_SIG_MAX_ARGS];
    size_t counts[CR_SIG_MAX_ARGS];
    size_t nout;
    const char *name;
} call;

/* The common start: descriptors checked, values built, context and arena created. */
static cr_status begin(call *c, const cr_value *fn, const cr_rule_def *def,
                       const cr_adcall_arg *args, size_t nargs, const cr_adcall_arg *out,
                       bool out_x)
{
    memset(c, 0, sizeof *c);
    c->name = rule_name(fn, def);
    if ((fn == NULL) == (def == NULL) || (fn && fn->kind != CR_KIND_FUNC) || (def && !def->fn))
        return fail(CR_EINVAL, "%s: give exactly one of a function value and a rule definition",
                    c->name);
    if (nargs > CR_SIG_MAX_ARGS || (nargs && !args))
        return fail(CR_EINVAL, "%s: %zu arguments (at most %d)", c->name, nargs, CR_SIG_MAX_ARGS);
    cr_status st = check_arg(out, out_x, &c->nout);
    if (st != CR_OK)
        return fail(st, "%s: bad output descriptor", c->name);
    for (size_t i = 0; i < nargs; i++) {
        st = check_arg(&args[i], true, &c->counts[i]);
        if (st != CR_OK)
            return fail(st, "%s: bad descriptor of argument %zu", c->name, i + 1);
        if (args[i].ndim == 0) {
            c->vals[i] = cr_value_f64(*args[i].x);
        } else {
            st = view(&c->arrs[i], args[i].x, &args[i], 1);
            if (st != CR_OK)
                return fail(st, "%s: argument %zu: bad shape", c->name, i + 1);
            c->vals[i] = cr_value_array(&c->arrs[i]);
        }
    }
    c->f = def ? cr_value_function(def->fn, NULL) : *fn;
    st = cr_ctx_new(NULL, &c->ctx);
    if (st == CR_OK)
        st = cr_arena_new(c->ctx, NULL, &c->arena);
    if (st != CR_OK)
        return fail(st, "%s: out of memory", c->name);
    return CR_OK;
}

static void end(call *c)
{
    cr_arena_free(c->arena);
    cr_ctx_free(c->ctx);
}

/* A rule's failure: its status, with the context's message. */
static cr_status rule_failed(call *c, cr_status st, const char *what)
{
    if (st == CR_NOTHING)
        return fail(CR_ENORULE, "%s: no %s applies to these arguments", c->name, what);
    const char *msg = cr_ctx_errmsg(c->ctx);
    return fail(st, "%s: %s failed: %s", c->name, what, msg && *msg ? msg : cr_status_str(st));
}

/* Checks that the rule's output y has the output's shape. */
static cr_status check_output(call *c, const cr_value *y, const cr_adcall_arg *out)
{
    if (out->ndim == 0) {
        if (y->kind == CR_KIND_F64 || y->kind == CR_KIND_F32 ||
            (y->kind == CR_KIND_ARRAY && cr_array_numel(y->u.arr) == 1 &&
             y->u.arr->dtype != CR_DT_C128))
            return CR_OK;
        return fail(CR_ESHAPE, "%s: the rule's output is not a real number", c->name);
    }
    if (y->kind != CR_KIND_ARRAY || y->u.arr->dtype == CR_DT_C128 ||
        cr_array_numel(y->u.arr) != c->nout)
        return fail(CR_ESHAPE, "%s: the rule's output is not a real array of %zu elements", c->name,
                    c->nout);
    return CR_OK;
}

static double value_elem(const cr_value *y, size_t i)
{
    if (y->kind == CR_KIND_F64)
        return y->u.f64;
    if (y->kind == CR_KIND_F32)
        return y->u.f32;
    return elem(y->u.arr, i);
}

cr_status cr_adcall_reverse(const cr_value *fn, const cr_rule_def *def, const cr_adcall_arg *args,
                            size_t nargs, const cr_adcall_arg *out)
{
    call c;
    cr_status st = begin(&c, fn, def, args, nargs, out, false);
    if (st != CR_OK) {
        if (c.ctx)
            end(&c);
        return st;
    }
    if (!out->dx) {
        end(&c);
        return fail(CR_EINVAL, "%s: the output has no cotangent", c.name);
    }
    cr_value y;
    cr_pullback pb;
    if (def) {
        st = def->rrule ? def->rrule(NULL, c.arena, &c.f, c.vals, nargs, &y, &pb, def->udata)
                        : CR_NOTHING;
    } else {
        st = cr_rrule(NULL, c.arena, &c.f, c.vals, nargs, &y, &pb);
    }
    if (st != CR_OK) {
        st = rule_failed(&c, st, "rrule");
        end(&c);
        return st;
    }
    st = check_output(&c, &y, out);
    cr_tangent dy, dx[CR_SIG_MAX_ARGS + 1];
    cr_array dyarr;
    const ptrdiff_t oinc = out->dinc ? out->dinc : 1;
    if (st == CR_OK && out->ndim == 0) {
        dy = cr_tangent_f64(*out->dx);
    } else if (st == CR_OK) {
        st = view(&dyarr, out->dx, out, oinc);
        dy = cr_tangent_array(&dyarr);
    }
    if (st == CR_OK) {
        st = cr_pullback_call(c.arena, &pb, &dy, dx, nargs + 1);
        if (st != CR_OK)
            st = rule_failed(&c, st, "pullback");
    }
    for (size_t i = 0; st == CR_OK && i < nargs; i++) {
        st = cr_tangent_unthunk(dx[i + 1], &dx[i + 1]);
        if (st != CR_OK)
            st = rule_failed(&c, st, "cotangent");
        else if (args[i].dx)
            st = check_tangent(&dx[i + 1], &args[i], c.counts[i], c.name, i + 1);
    }
    if (st == CR_OK) {
        for (size_t i = 0; i < nargs; i++) {
            if (!args[i].dx)
                continue;
            const ptrdiff_t inc = args[i].dinc ? args[i].dinc : 1;
            for (size_t k = 0; k < c.counts[i]; k++)
                args[i].dx[(ptrdiff_t)k * inc] += tangent_elem(&dx[i + 1], k);
        }
        for (size_t k = 0; k < c.nout; k++)
            out->dx[(ptrdiff_t)k * oinc] = 0.0;
    }
    end(&c);
    return st;
}

cr_status cr_adcall_forward(const cr_value *fn, const cr_rule_def *def, const cr_adcall_arg *args,
                            size_t nargs, const cr_adcall_arg *out)
{
    call c;
    cr_status st = begin(&c, fn, def, args, nargs, out, true);
    if (st != CR_OK) {
        if (c.ctx)
            end(&c);
        if (st != CR_EINVAL && out && out->x)
            for (size_t k = 0; k < c.nout; k++) {
                out->x[k] = (double)NAN;
                if (out->dx) /* the tangent too, as after a failure of the rule */
                    out->dx[(ptrdiff_t)k * (out->dinc ? out->dinc : 1)] = (double)NAN;
            }
        return st;
    }
    cr_tangent dargs[CR_SIG_MAX_ARGS + 1];
    cr_array darrs[CR_SIG_MAX_ARGS];
    dargs[0] = cr_tangent_zero();
    for (size_t i = 0; st == CR_OK && i < nargs; i++) {
        const cr_adcall_arg *a = &args[i];
        if (!a->dx) {
            dargs[i + 1] = cr_tangent_zero();
        } else if (a->ndim == 0) {
            dargs[i + 1] = cr_tangent_f64(*a->dx);
        } else {
            st = view(&darrs[i], a->dx, a, a->dinc ? a->dinc : 1);
            dargs[i + 1] = cr_tangent_array(&darrs[i]);
        }
    }
    cr_value y;
    cr_tangent dy = cr_tangent_zero();
    if (st == CR_OK) {
        if (def) {
            st = def->frule
                     ? def->frule(NULL, c.arena, dargs, &c.f, c.vals, nargs, &y, &dy, def->udata)
                     : CR_NOTHING;
        } else {
            st = cr_frule(NULL, c.arena, dargs, &c.f, c.vals, nargs, &y, &dy);
        }
        if (st != CR_OK)
            st = rule_failed(&c, st, "frule");
    }
    if (st == CR_OK)
        st = check_output(&c, &y, out);
    if (st == CR_OK) {
        st = cr_tangent_unthunk(dy, &dy);
        if (st != CR_OK)
            st = rule_failed(&c, st, "tangent");
        else if (out->dx)
            st = check_tangent(&dy, out, c.nout, c.name, 0);
    }
    const ptrdiff_t oinc = out->dinc ? out->dinc : 1;
    for (size_t k = 0; k < c.nout; k++) {
        out->x[k] = st == CR_OK ? value_elem(&y, k) : (double)NAN;
        if (out->dx)
            out->dx[(ptrdiff_t)k * oinc] = st == CR_OK ? tangent_elem(&dy, k) : (double)NAN;
    }
    end(&c);
    return st;
}

/* ---- Helpers of the generated rules -----------------------------------------------------------
 */

/* The elements of array a (count of them) contiguous: a itself or a copy. */
static cr_status dense(cr_arena *arena, const cr_array *a, size_t count, const double **out)
{
    if (cr_array_numel(a) != count)
        return CR_ESHAPE;
    if (a->structure == CR_MAT_DENSE && cr_array_is_contiguous(a)) {
        *out = a->data;
        return CR_OK;
    }
    double *p = cr_arena_alloc(arena, (count ? count : 1) * sizeof *p, 0);
    if (!p)
        return CR_ENOMEM;
    for (size_t i = 0; i < count; i++)
        p[i] = elem(a, i);
    *out = p;
    return CR_OK;
}

cr_status cr_adcall_dense(cr_arena *arena, const cr_value *v, size_t count, const double **out)
{
    if (!arena || !v || !out || v->kind != CR_KIND_ARRAY || !v->u.arr ||
        v->u.arr->dtype != CR_DT_F64)
        return CR_EINVAL;
    return dense(arena, v->u.arr, count, out);
}

cr_status cr_adcall_dense_tangent(cr_arena *arena, const cr_tangent *t, size_t count,
                                  const double **out)
{
    if (!arena || !t || !out)
        return CR_EINVAL;
    cr_tangent u;
    cr_status st = cr_tangent_unthunk(*t, &u);
    if (st != CR_OK)
        return st;
    if (u.tag == CR_TAN_ZERO || u.tag == CR_TAN_NONE) {
        if (count > (size_t)PTRDIFF_MAX / sizeof(double))
            return CR_EOVERFLOW;
        double *p = cr_arena_calloc(arena, count ? count : 1, sizeof *p, 0);
        if (!p)
            return CR_ENOMEM;
        *out = p;
        return CR_OK;
    }
    if (u.tag != CR_TAN_ARRAY || u.u.arr->dtype == CR_DT_C128 || u.u.arr->dtype == CR_DT_I64 ||
        u.u.arr->dtype == CR_DT_BOOL)
        return CR_ETANGENT;
    if (u.u.arr->dtype == CR_DT_F64)
        return dense(arena, u.u.arr, count, out);
    if (cr_array_numel(u.u.arr) != count)
        return CR_ESHAPE;
    double *p = cr_arena_alloc(arena, (count ? count : 1) * sizeof *p, 0);
    if (!p)
        return CR_ENOMEM;
    for (size_t i = 0; i < count; i++)
        p[i] = elem(u.u.arr, i);
    *out = p;
    return CR_OK;
}

cr_status cr_adcall_seed(const cr_tangent *t, double *out)
{
    *out = 0;
    if (!t)
        return CR_ETANGENT;
    cr_tangent u;
    if (cr_tangent_unthunk(*t, &u) != CR_OK)
        return CR_ETANGENT;
    switch (u.tag) {
    case CR_TAN_ZERO:
    case CR_TAN_NONE:
        return CR_OK;
    case CR_TAN_F64:
        *out = u.u.f64;
        return CR_OK;
    case CR_TAN_F32:
        *out = u.u.f32;
        return CR_OK;
    case CR_TAN_ARRAY:
        if (cr_array_numel(u.u.arr) == 1 && u.u.arr->dtype != CR_DT_C128 &&
            cr_dtype_is_float(u.u.arr->dtype)) {
            *out = elem(u.u.arr, 0);
            return CR_OK;
        }
        return CR_ETANGENT;
    default:
        return CR_ETANGENT;
    }
}
