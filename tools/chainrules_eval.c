/*
 * chainrules-eval: evaluate a built-in function's rules at a point and print the primal,
 * the frule pushforward of every unit input direction and the rrule cotangents of every
 * unit output seed, each as a decimal (%.17g) and a C99 hex float (%a).
 *
 *   chainrules-eval atan2 1e200 1e200
 *   chainrules-eval sin 0.5,1          (a complex argument: re,im)
 *   chainrules-eval ldexp 3 int:4      (an integer argument)
 *
 * Exit status: 0 on success, 1 when the rule fails or there is none for these argument
 * kinds, 2 for a usage error (unknown function, unparsable argument).
 *
 * `chainrules-eval --json` (tools/eval_json.c, docs/eval.md) serves JSON requests from
 * standard input instead, one per line, for any function of the registry, arrays included.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>

#ifdef CR_EVAL_HAVE_CJSON
#include "eval_json.h"
#endif

#define MAX_ARGS 16

/* re + i im, keeping the signs of zeros (C11's CMPLX is missing from some compilers). */
static cr_complex cplx(double re, double im)
{
    double parts[2] = {re, im};
    cr_complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}

static void usage(FILE *f)
{
    fputs("usage: chainrules-eval FUNCTION [ARG...]\n"
          "       chainrules-eval --json\n"
          "\n"
          "Evaluates the built-in rules of FUNCTION (a name known to cr_registry_find():\n"
          "C names such as atan2, Julia names such as sind or logistic, + - * / neg) and\n"
          "prints the primal, the frule pushforward of each unit input direction and the\n"
          "rrule cotangents of each unit output seed, in decimal and in hex.\n"
          "\n"
          "ARG is a number in C syntax (1.5, -2e300, 0x1p-3, inf, nan), by default a\n"
          "double; prefixes select other kinds: f32:1.5 (float), int:3 (integer),\n"
          "bool:1; RE,IM is a complex number (1,-0.5).\n"
          "\n"
          "--json reads one JSON request per line on standard input and writes one JSON\n"
          "response per line on standard output (flushed after each), until end of input:\n"
          "  {\"fn\": \"det\", \"args\": [[[1,2],[3,4]]], \"tangents\": [[[0.1,0],[0,0.2]]],\n"
          "   \"cotangent\": 1.0}\n"
          "  -> {\"primal\": -2, \"type\": \"f64\", \"jvp\": .., \"vjp\": [..]}\n"
          "FUNCTION is any registered function, arrays and linear algebra included.\n"
          "Arguments: a number is an f64; a nested list an f64 array (row-major);\n"
          "{\"re\": x, \"im\": y} a complex number; {\"int\": 3} or {\"int\": [0, 1]} integers\n"
          "(dims, indices); {\"fn\": \"sin\"} a function; true/false a bool. An optional\n"
          "\"dtypes\" list (one entry per argument, null for the default) selects \"f64\",\n"
          "\"f32\", \"c128\" (elements written [re, im]), \"i64\" or \"bool\".\n"
          "\"tangents\" (one per argument, null for zero) asks for the frule's pushforward\n"
          "\"jvp\"; \"cotangent\" (shaped like the primal, a list for a tuple) asks for\n"
          "the rrule's cotangents \"vjp\", one per argument (null: no tangent space).\n"
          "Complex numbers are written [re, im], non-finite numbers \"inf\", \"-inf\",\n"
          "\"nan\", others with %.17g. A failed request gives {\"error\": \"...\"} and the\n"
          "next line is read; an optional \"id\" is echoed. Exit status 0 at end of\n"
          "input, 1 when reading or writing fails. Details: docs/eval.md.\n",
          f);
}

/* Parse a whole double; false if anything is left over. */
static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool parse_arg(const char *s, cr_value *out)
{
    double re, im;
    if (strncmp(s, "f32:", 4) == 0) {
        if (!parse_double(s + 4, &re))
            return false;
        *out = cr_value_f32((float)re);
        return true;
    }
    if (strncmp(s, "int:", 4) == 0) {
        char *end;
        errno = 0;
        long long v = strtoll(s + 4, &end, 0);
        if (end == s + 4 || *end != '\0' || errno != 0)
            return false;
        *out = cr_value_i64((int64_t)v);
        return true;
    }
    if (strncmp(s, "bool:", 5) == 0) {
        if (strcmp(s + 5, "1") == 0 || strcmp(s + 5, "true") == 0)
            *out = cr_value_bool(true);
        else if (strcmp(s + 5, "0") == 0 || strcmp(s + 5, "false") == 0)
            *out = cr_value_bool(false);
        else
            return false;
        return true;
    }
    const char *comma = strchr(s, ',');
    if (comma != NULL) {
        char buf[128];
        size_t n = (size_t)(comma - s);
        if (n >= sizeof buf)
            return false;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (!parse_double(buf, &re) || !parse_double(comma + 1, &im))
            return false;
        *out = cr_value_c128(cplx(re, im));
        return true;
    }
    if (!parse_double(s, &re))
        return false;
    *out = cr_value_f64(re);
    return true;
}

static void print_real(double v)
{
    printf("%.17g %a", v, v);
}

static void print_complex(cr_complex z)
{
    printf("%.17g,%.17g %a,%a", creal(z), cimag(z), creal(z), cimag(z));
}

static void print_value(const cr_value *v)
{
    switch (v->kind) {
    case CR_KIND_F64:
        print_real(v->u.f64);
        break;
    case CR_KIND_F32:
        print_real((double)v->u.f32);
        printf(" (f32)");
        break;
    case CR_KIND_C128:
        print_complex(v->u.c128);
        break;
    case CR_KIND_I64:
    case CR_KIND_I32:
        printf("%lld (int)", (long long)v->u.i64);
        break;
    case CR_KIND_BOOL:
        printf("%s (bool)", v->u.b ? "true" : "false");
        break;
    case CR_KIND_STRUCT: {
        printf("(");
        for (size_t i = 0; i < v->u.obj.type->nfields; i++) {
            cr_value fv;
            if (i)
                printf("; ");
            if (cr_type_field_value(v->u.obj.type, v->u.obj.ptr, i, &fv) == CR_OK)
                print_value(&fv);
            else
                printf("?");
        }
        printf(")");
        break;
    }
    default:
        printf("(%s)", cr_kind_name(v->kind));
        break;
    }
}

static void print_tangent(cr_tangent t)
{
    if (cr_tangent_unthunk(t, &t) != CR_OK) {
        printf("(failed thunk)");
        return;
    }
    switch ((cr_tag)t.tag) {
    case CR_TAN_F64:
        print_real(t.u.f64);
        break;
    case CR_TAN_F32:
        print_real((double)t.u.f32);
        printf(" (f32)");
        break;
    case CR_TAN_C128:
        print_complex(t.u.c128);
        break;
    case CR_TAN_STRUCT: {
        printf("(");
        for (size_t i = 0; i < t.u.s.type->nfields; i++) {
            if (i)
                printf("; ");
            print_tangent(cr_tangent_field(t, i));
        }
        printf(")");
        break;
    }
    case CR_TAN_ZERO:
        printf("ZeroTangent");
        break;
    case CR_TAN_NONE:
        printf("NoTangent");
        break;
    default:
        printf("%s", cr_tag_name((cr_tag)t.tag));
        break;
    }
}

/* The unit tangent (times 1 or i) of a value's kind; false for a non-perturbable kind. */
static bool unit_tangent(cr_kind k, bool imag, cr_tangent *out)
{
    switch (k) {
    case CR_KIND_F64:
        *out = cr_tangent_f64(1.0);
        return !imag;
    case CR_KIND_F32:
        *out = cr_tangent_f32(1.0f);
        return !imag;
    case CR_KIND_C128:
        *out = cr_tangent_c128(imag ? cplx(0.0, 1.0) : cplx(1.0, 0.0));
        return true;
    default:
        *out = cr_tangent_none();
        return false;
    }
}

static int fail(cr_ctx *ctx, const char *what, cr_status st)
{
    if (st == CR_NOTHING)
        fprintf(stderr, "chainrules-eval: no %s for these argument kinds\n", what);
    else
        fprintf(stderr, "chainrules-eval: %s failed: %s (%s)\n", what, cr_status_name(st),
                cr_ctx_errmsg(ctx));
    return 1;
}

static int run(cr_ctx *ctx, cr_arena *arena, const cr_function *fn, const cr_value *args,
               size_t nargs)
{
    cr_value f = cr_value_function(fn, NULL), y;
    cr_tangent dargs[MAX_ARGS + 1], dy;
    cr_status st;

    printf("f = %s(", fn->name);
    for (size_t j = 0; j < nargs; j++) {
        printf("%s%s ", j ? ", " : "", cr_kind_name(args[j].kind));
        print_value(&args[j]);
    }
    printf(")\n");

    st = cr_function_call(arena, &f, args, nargs, &y);
    if (st != CR_OK)
        return fail(ctx, "primal", st);
    printf("y = ");
    print_value(&y);
    printf("\n");

    /* frule: one unit direction per argument (two, 1 and i, for a complex argument). */
    for (size_t j = 0; j < nargs; j++) {
        for (int im = 0; im < 2; im++) {
            cr_tangent u;
            if (!unit_tangent(args[j].kind, im != 0, &u)) {
                if (im == 0 && args[j].kind != CR_KIND_F64 && args[j].kind != CR_KIND_F32)
                    printf("frule e%zu = (argument %zu is not perturbable)\n", j + 1, j + 1);
                continue;
            }
            dargs[0] = cr_tangent_none();
            for (size_t k = 0; k < nargs; k++)
                dargs[k + 1] = k == j ? u : cr_tangent_zero();
            st = cr_frule(NULL, arena, dargs, &f, args, nargs, &y, &dy);
            if (st != CR_OK)
                return fail(ctx, "frule", st);
            printf("frule e%zu%s = ", j + 1, im ? "*i" : "");
            print_tangent(dy);
            printf("\n");
        }
    }

    /* rrule: one pullback call per unit output seed (per component of a tuple output). */
    cr_pullback pb;
    st = cr_rrule(NULL, arena, &f, args, nargs, &y, &pb);
    if (st != CR_OK)
        return fail(ctx, "rrule", st);
    size_t nout = y.kind == CR_KIND_STRUCT ? y.u.obj.type->nfields : 1;
    for (size_t i = 0; i < nout; i++) {
        cr_tangent seed, dx[MAX_ARGS + 1];
        if (y.kind == CR_KIND_STRUCT) {
            cr_tangent fields[8];
            if (nout > 8)
                return fail(ctx, "rrule (tuple too long)", CR_EINVAL);
            bool ok = false;
            for (size_t k = 0; k < nout; k++) {
                fields[k] = cr_tangent_zero();
                if (k == i)
                    ok = unit_tangent(y.u.obj.type->fields[k].kind, false, &fields[k]);
            }
            if (!ok)
                continue; /* an integer component: no seed */
            st = cr_tangent_struct(arena, y.u.obj.type, NULL, fields, nout, &seed);
            if (st != CR_OK)
                return fail(ctx, "rrule seed", st);
        } else if (!unit_tangent(y.kind, false, &seed)) {
            printf("rrule: the output is not perturbable\n");
            break;
        }
        st = cr_pullback_call(arena, &pb, &seed, dx, nargs + 1);
        if (st != CR_OK)
            return fail(ctx, "pullback", st);
        for (size_t j = 0; j < nargs; j++) {
            if (nout > 1)
                printf("rrule y%zu dx%zu = ", i + 1, j + 1);
            else
                printf("rrule dx%zu = ", j + 1);
            print_tangent(dx[j + 1]);
            printf("\n");
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--json") == 0) {
        if (argc > 2) {
            fprintf(stderr, "chainrules-eval: --json takes no other arguments\n");
            return 2;
        }
#ifdef CR_EVAL_HAVE_CJSON
        return cr_eval_json_main(stdin, stdout);
#else
        fprintf(stderr, "chainrules-eval: --json is unavailable: this build has no libcjson "
                        "(Debian: libcjson-dev; reconfigure after installing it)\n");
        return 2;
#endif
    }
    const cr_function *fn = cr_registry_find(cr_registry_builtin(), argv[1]);
    if (fn == NULL) {
        fprintf(stderr, "chainrules-eval: unknown function '%s'\n", argv[1]);
        return 2;
    }
    size_t nargs = (size_t)(argc - 2);
    if (nargs > MAX_ARGS) {
        fprintf(stderr, "chainrules-eval: at most %d arguments\n", MAX_ARGS);
        return 2;
    }
    if (fn->arity >= 0 && (size_t)fn->arity != nargs) {
        fprintf(stderr, "chainrules-eval: %s takes %d argument%s, %zu given\n", fn->name, fn->arity,
                fn->arity == 1 ? "" : "s", nargs);
        return 2;
    }
    cr_value args[MAX_ARGS];
    for (size_t j = 0; j < nargs; j++) {
        if (!parse_arg(argv[j + 2], &args[j])) {
            fprintf(stderr, "chainrules-eval: cannot parse argument %zu '%s'\n", j + 1,
                    argv[j + 2]);
            usage(stderr);
            return 2;
        }
    }
    cr_ctx *ctx = NULL;
    cr_arena *arena = NULL;
    if (cr_ctx_new(NULL, &ctx) != CR_OK || cr_arena_new(ctx, NULL, &arena) != CR_OK) {
        fprintf(stderr, "chainrules-eval: out of memory\n");
        cr_ctx_free(ctx);
        return 1;
    }
    int rc = run(ctx, arena, fn, args, nargs);
    cr_arena_free(arena);
    cr_ctx_free(ctx);
    return rc;
}
