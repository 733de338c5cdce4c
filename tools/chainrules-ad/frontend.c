/*
 * The frontend: libclang parses the input with the user's flags; this file turns the
 * function definitions of the main file into the tree of ad.h and refuses, with a located
 * message, every construct the transformer does not support.
 */
/* realpath() is POSIX. */
#define _DEFAULT_SOURCE 1

#include <clang-c/Index.h>
#include <stdlib.h>
#include <string.h>

#include "ad.h"

typedef struct fe {
    CXTranslationUnit tu;
    ad_unit *u;
    ad_func *f; /* the function being read */
    /* the variables of the function, by their declaration cursor */
    struct fe_var {
        CXCursor decl;
        ad_var *var;
    } * vars;
    int nvars, capvars;
    /* compound literals (compound_literal): the declarations of their locals, put before
     * the statement being read; the loop depth of that statement; where a literal cannot be
     * lowered (a loop condition or increment, evaluated more than once), else NULL; the
     * depth of operands of ?:, && and || (evaluated conditionally) */
    ad_stmt **pre;
    int npre, cappre;
    int depth;
    const char *no_literal;
    int guarded;
    int nliterals;
} fe;

static ad_loc loc_of(CXCursor c)
{
    CXSourceLocation l = clang_getCursorLocation(c);
    CXFile file;
    unsigned line, col, off;
    clang_getExpansionLocation(l, &file, &line, &col, &off);
    CXString s = clang_getFileName(file);
    const char *cs = clang_getCString(s);
    ad_loc r = {ad_strdup(cs ? cs : "<input>"), line, col};
    clang_disposeString(s);
    return r;
}

static size_t offset_of(CXSourceLocation l)
{
    CXFile file;
    unsigned line, col, off;
    clang_getExpansionLocation(l, &file, &line, &col, &off);
    return off;
}

static char *spelling(CXCursor c)
{
    CXString s = clang_getCursorSpelling(c);
    char *r = ad_strdup(clang_getCString(s));
    clang_disposeString(s);
    return r;
}

static char *type_spelling(CXType t)
{
    CXString s = clang_getTypeSpelling(t);
    char *r = ad_strdup(clang_getCString(s));
    clang_disposeString(s);
    return r;
}

/* ---- Types ----------------------------------------------------------------------------------- */

static ad_type *convert_type(CXType t);

static enum CXChildVisitResult field_visit(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    ad_type *st = data;
    if (clang_getCursorKind(c) == CXCursor_FieldDecl) {
        ad_field *f = ad_alloc(sizeof *f);
        f->name = spelling(c);
        f->type = convert_type(clang_getCursorType(c));
        ad_field **p = &st->fields;
        while (*p)
            p = &(*p)->next;
        *p = f;
    }
    return CXChildVisit_Continue;
}

static ad_type *convert_type(CXType t0)
{
    CXType t = clang_getCanonicalType(t0);
    ad_type *r = ad_alloc(sizeof *r);
    r->spelling = type_spelling(t0);
    r->unq = type_spelling(clang_getUnqualifiedType(t0));
    r->is_const = clang_isConstQualifiedType(t) != 0;
    switch (t.kind) {
    case CXType_Void:
        r->kind = TY_VOID;
        break;
    case CXType_Bool:
    case CXType_Char_U:
    case CXType_UChar:
    case CXType_UShort:
    case CXType_UInt:
    case CXType_ULong:
    case CXType_ULongLong:
    case CXType_Char_S:
    case CXType_SChar:
    case CXType_Short:
    case CXType_Int:
    case CXType_Long:
    case CXType_LongLong:
    case CXType_Enum:
        r->kind = TY_INT;
        break;
    case CXType_Float:
        r->kind = TY_FLOAT;
        break;
    case CXType_Double:
        r->kind = TY_DOUBLE;
        break;
    case CXType_Pointer: {
        CXType p = clang_getPointeeType(t);
        r->kind = TY_PTR;
        r->elem = convert_type(p);
        r->is_const = clang_isConstQualifiedType(p) != 0;
        break;
    }
    case CXType_ConstantArray:
        r->kind = TY_ARRAY;
        r->elem = convert_type(clang_getArrayElementType(t));
        r->len = clang_getArraySize(t);
        break;
    case CXType_IncompleteArray:
        r->kind = TY_PTR;
        r->elem = convert_type(clang_getArrayElementType(t));
        break;
    case CXType_Record: {
        CXCursor d = clang_getTypeDeclaration(t);
        r->kind = TY_STRUCT;
        r->is_union = clang_getCursorKind(d) == CXCursor_UnionDecl;
        r->name = type_spelling(clang_getUnqualifiedType(t0));
        clang_visitChildren(d, field_visit, r);
        break;
    }
    default:
        r->kind = TY_OTHER;
        break;
    }
    return r;
}

/* ---- Variables ------------------------------------------------------------------------------- */

static ad_var *find_var(fe *s, CXCursor decl)
{
    for (int i = 0; i < s->nvars; i++)
        if (clang_equalCursors(s->vars[i].decl, decl))
            return s->vars[i].var;
    return NULL;
}

static ad_var *new_var(fe *s, CXCursor decl, ad_vkind kind, int loop_depth)
{
    ad_var *v = ad_alloc(sizeof *v);
    v->name = spelling(decl);
    v->cname = v->name;
    v->type = convert_type(clang_getCursorType(decl));
    v->kind = kind;
    v->loc = loc_of(decl);
    v->loop_depth = loop_depth;
    s->vars = ad_grow(s->vars, s->nvars, &s->capvars, sizeof *s->vars);
    s->vars[s->nvars].decl = decl;
    s->vars[s->nvars].var = v;
    s->nvars++;
    if (kind == VAR_LOCAL) {
        ad_func *f = s->f;
        /* a local that shadows a name already used is renamed */
        int same = 0;
        for (int i = 0; i < f->nlocals; i++)
            if (strcmp(f->locals[i]->name, v->name) == 0)
                same++;
        for (int i = 0; i < f->nparams; i++)
            if (strcmp(f->params[i]->name, v->name) == 0)
                same++;
        if (same)
            v->cname = ad_fmt("%s_%d", v->name, same + 1);
        ad_func_add_local(f, v);
    }
    /* a name of the generated code's form (t4_, t4_D, x_, and shadows x_d, x_b: the input
     * is itself generated, differentiated again) is renamed, so that it meets no
     * temporary or shadow of the new derivative */
    if (kind == VAR_LOCAL || kind == VAR_PARAM) {
        size_t len = strlen(v->name);
        if ((len && v->name[len - 1] == '_') ||
            (len > 2 && v->name[len - 2] == '_' && strchr("Ddb", v->name[len - 1])))
            v->cname = ad_fmt("%sin", v->cname);
    }
    return v;
}

/* ---- Children -------------------------------------------------------------------------------- */

typedef struct kids {
    CXCursor *c;
    int n, cap;
} kids;

static enum CXChildVisitResult kids_visit(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    kids *k = data;
    k->c = ad_grow(k->c, k->n, &k->cap, sizeof *k->c);
    k->c[k->n++] = c;
    return CXChildVisit_Continue;
}

static kids children(CXCursor c)
{
    kids k = {0};
    clang_visitChildren(c, kids_visit, &k);
    return k;
}

/* ---- Expressions ----------------------------------------------------------------------------- */

static ad_expr *expr(fe *s, CXCursor c);

static ad_expr *new_expr(ad_ekind kind, CXCursor c)
{
    ad_expr *e = ad_alloc(sizeof *e);
    e->kind = kind;
    e->loc = loc_of(c);
    e->type = convert_type(clang_getCursorType(c));
    e->tmp = -1;
    return e;
}

static const char *binop_text(enum CXBinaryOperatorKind k)
{
    switch (k) {
    case CXBinaryOperator_Mul:
        return "*";
    case CXBinaryOperator_Div:
        return "/";
    case CXBinaryOperator_Rem:
        return "%";
    case CXBinaryOperator_Add:
        return "+";
    case CXBinaryOperator_Sub:
        return "-";
    case CXBinaryOperator_Shl:
        return "<<";
    case CXBinaryOperator_Shr:
        return ">>";
    case CXBinaryOperator_LT:
        return "<";
    case CXBinaryOperator_GT:
        return ">";
    case CXBinaryOperator_LE:
        return "<=";
    case CXBinaryOperator_GE:
        return ">=";
    case CXBinaryOperator_EQ:
        return "==";
    case CXBinaryOperator_NE:
        return "!=";
    case CXBinaryOperator_And:
        return "&";
    case CXBinaryOperator_Xor:
        return "^";
    case CXBinaryOperator_Or:
        return "|";
    case CXBinaryOperator_LAnd:
        return "&&";
    case CXBinaryOperator_LOr:
        return "||";
    case CXBinaryOperator_Assign:
        return "=";
    case CXBinaryOperator_MulAssign:
        return "*=";
    case CXBinaryOperator_DivAssign:
        return "/=";
    case CXBinaryOperator_RemAssign:
        return "%=";
    case CXBinaryOperator_AddAssign:
        return "+=";
    case CXBinaryOperator_SubAssign:
        return "-=";
    case CXBinaryOperator_ShlAssign:
        return "<<=";
    case CXBinaryOperator_ShrAssign:
        return ">>=";
    case CXBinaryOperator_AndAssign:
        return "&=";
    case CXBinaryOperator_XorAssign:
        return "^=";
    case CXBinaryOperator_OrAssign:
        return "|=";
    case CXBinaryOperator_Comma:
        return ",";
    default:
        return NULL;
    }
}

/* The value of a constant expression as C text, or NULL. */
static char *constant_text(CXCursor c)
{
    CXEvalResult r = clang_Cursor_Evaluate(c);
    if (!r)
        return NULL;
    char *t = NULL;
    switch (clang_EvalResult_getKind(r)) {
    case CXEval_Int:
        if (clang_EvalResult_isUnsignedInt(r))
            t = ad_fmt("%lluu", clang_EvalResult_getAsUnsigned(r));
        else
            t = ad_fmt("%lld", clang_EvalResult_getAsLongLong(r));
        break;
    case CXEval_Float: {
        double v = clang_EvalResult_getAsDouble(r);
        CXType ty = clang_getCanonicalType(clang_getCursorType(c));
        t = ad_fmt(ty.kind == CXType_Float ? "%.9gf" : "%.17g", v);
        if (!strpbrk(t, ".eEni")) /* an integral value: keep it floating */
            t = ad_fmt(ty.kind == CXType_Float ? "%.1ff" : "%.1f", v);
        break;
    }
    default:
        break;
    }
    clang_EvalResult_dispose(r);
    return t;
}

static ad_expr *unsupported(CXCursor c, const char *what, const char *hint)
{
    ad_error(loc_of(c), "unsupported construct: %s (%s)", what, hint);
    return NULL;
}

static ad_expr *compound_literal(fe *s, CXCursor c);

static ad_expr *expr(fe *s, CXCursor c)
{
    enum CXCursorKind k = clang_getCursorKind(c);
    switch (k) {
    case CXCursor_ParenExpr: {
        kids ch = children(c);
        return ch.n == 1 ? expr(s, ch.c[0]) : unsupported(c, "parenthesis", "malformed");
    }
    case CXCursor_IntegerLiteral:
    case CXCursor_FloatingLiteral:
    case CXCursor_CharacterLiteral: {
        ad_expr *e = new_expr(EX_NUM, c);
        e->text = constant_text(c);
        if (!e->text)
            return unsupported(c, "literal", "not a constant");
        return e;
    }
    case CXCursor_UnaryExpr: /* sizeof, _Alignof */
    {
        ad_expr *e = new_expr(EX_NUM, c);
        e->text = constant_text(c);
        if (!e->text)
            return unsupported(c, "sizeof of a variable-length type", "use a constant size");
        return e;
    }
    case CXCursor_DeclRefExpr: {
        CXCursor d = clang_getCursorReferenced(c);
        enum CXCursorKind dk = clang_getCursorKind(d);
        if (dk == CXCursor_EnumConstantDecl) {
            ad_expr *e = new_expr(EX_NUM, c);
            e->text = constant_text(c);
            return e;
        }
        if (dk == CXCursor_FunctionDecl)
            return unsupported(c, "a function used as a value (function pointer)",
                               "call functions directly, or register a rule");
        ad_var *v = find_var(s, d);
        if (!v) {
            /* a global: constants are fine; mutable real globals are refused */
            ad_type *t = convert_type(clang_getCursorType(d));
            if (ad_type_has_real(t) && !t->is_const &&
                !(t->kind == TY_ARRAY && t->elem && t->elem->is_const))
                return unsupported(c,
                                   ad_fmt("the mutable global '%s' holding real data", spelling(d)),
                                   "pass it as a parameter");
            ad_expr *e = new_expr(EX_GLOBAL, c);
            e->text = spelling(d);
            return e;
        }
        ad_expr *e = new_expr(EX_VAR, c);
        e->var = v;
        return e;
    }
    case CXCursor_UnexposedExpr:
    case CXCursor_CStyleCastExpr: {
        kids ch = children(c);
        CXCursor inner = ch.c ? ch.c[ch.n - 1] : c;
        if (ch.n == 0) {
            char *t = constant_text(c);
            if (t) {
                ad_expr *e = new_expr(EX_NUM, c);
                e->text = t;
                return e;
            }
            return unsupported(c, "expression", "not understood");
        }
        if (clang_getCursorKind(inner) == CXCursor_TypeRef)
            return unsupported(c, "cast", "malformed");
        ad_expr *sub = expr(s, inner);
        if (!sub)
            return NULL;
        ad_expr *e = new_expr(EX_CAST, c);
        /* an implicit conversion that changes nothing is dropped */
        if (k == CXCursor_UnexposedExpr &&
            (e->type->kind == sub->type->kind && e->type->kind != TY_OTHER))
            return sub;
        if (e->type->kind == TY_PTR && sub->type->kind == TY_ARRAY)
            return sub; /* array decay */
        if (e->type->kind == TY_OTHER && k == CXCursor_UnexposedExpr)
            return sub; /* e.g. function-to-pointer decay */
        e->a = sub;
        return e;
    }
    case CXCursor_BinaryOperator:
    case CXCursor_CompoundAssignOperator: {
        const char *op = binop_text(clang_getCursorBinaryOperatorKind(c));
        kids ch = children(c);
        if (!op || ch.n != 2)
            return unsupported(c, "binary operator", "not understood");
        if (strcmp(op, ",") == 0)
            return unsupported(c, "the comma operator", "write two statements");
        bool lazy = !strcmp(op, "&&") || !strcmp(op, "||");
        ad_expr *l = expr(s, ch.c[0]);
        s->guarded += lazy;
        ad_expr *r = expr(s, ch.c[1]);
        s->guarded -= lazy;
        if (!l || !r)
            return NULL;
        bool assign = op[strlen(op) - 1] == '=' && strcmp(op, "==") && strcmp(op, "<=") &&
                      strcmp(op, ">=") && strcmp(op, "!=");
        ad_expr *e = new_expr(assign ? EX_ASSIGN : EX_BIN, c);
        e->op = op;
        e->a = l;
        e->b = r;
        return e;
    }
    case CXCursor_UnaryOperator: {
        enum CXUnaryOperatorKind uk = clang_getCursorUnaryOperatorKind(c);
        kids ch = children(c);
        if (ch.n != 1)
            return unsupported(c, "unary operator", "malformed");
        ad_expr *a = expr(s, ch.c[0]);
        if (!a)
            return NULL;
        ad_expr *e;
        switch (uk) {
        case CXUnaryOperator_PostInc:
        case CXUnaryOperator_PostDec:
        case CXUnaryOperator_PreInc:
        case CXUnaryOperator_PreDec:
            e = new_expr(EX_INCDEC, c);
            e->op = (uk == CXUnaryOperator_PostInc || uk == CXUnaryOperator_PreInc) ? "++" : "--";
            e->prefix = uk == CXUnaryOperator_PreInc || uk == CXUnaryOperator_PreDec;
            break;
        case CXUnaryOperator_AddrOf:
            e = new_expr(EX_ADDR, c);
            break;
        case CXUnaryOperator_Deref:
            e = new_expr(EX_DEREF, c);
            break;
        case CXUnaryOperator_Plus:
            return a;
        case CXUnaryOperator_Minus:
            e = new_expr(EX_UN, c);
            e->op = "-";
            break;
        case CXUnaryOperator_Not:
            e = new_expr(EX_UN, c);
            e->op = "~";
            break;
        case CXUnaryOperator_LNot:
            e = new_expr(EX_UN, c);
            e->op = "!";
            break;
        default:
            return unsupported(c, "unary operator", "not supported");
        }
        e->a = a;
        return e;
    }
    case CXCursor_ConditionalOperator: {
        kids ch = children(c);
        if (ch.n != 3)
            return unsupported(c, "conditional operator", "malformed");
        ad_expr *e = new_expr(EX_COND, c);
        e->a = expr(s, ch.c[0]);
        s->guarded++;
        e->b = expr(s, ch.c[1]);
        e->c = expr(s, ch.c[2]);
        s->guarded--;
        return e->a && e->b && e->c ? e : NULL;
    }
    case CXCursor_ArraySubscriptExpr: {
        kids ch = children(c);
        if (ch.n != 2)
            return unsupported(c, "subscript", "malformed");
        ad_expr *e = new_expr(EX_INDEX, c);
        e->a = expr(s, ch.c[0]);
        e->b = expr(s, ch.c[1]);
        return e->a && e->b ? e : NULL;
    }
    case CXCursor_MemberRefExpr: {
        kids ch = children(c);
        if (ch.n != 1)
            return unsupported(c, "member access", "malformed");
        ad_expr *e = new_expr(EX_MEMBER, c);
        e->a = expr(s, ch.c[0]);
        e->text = spelling(c);
        e->arrow = e->a && e->a->type->kind == TY_PTR;
        return e->a ? e : NULL;
    }
    case CXCursor_CallExpr: {
        CXCursor callee = clang_getCursorReferenced(c);
        if (clang_Cursor_isNull(callee) || clang_getCursorKind(callee) != CXCursor_FunctionDecl)
            return unsupported(c, "a call through a function pointer",
                               "call the function by name, or register a rule for it");
        ad_expr *e = new_expr(EX_CALL, c);
        e->text = spelling(callee);
        if (strstr(e->text, "setjmp") || strstr(e->text, "longjmp"))
            return unsupported(c, "setjmp and longjmp", "use structured control flow");
        e->nargs = clang_Cursor_getNumArguments(c);
        e->args = ad_alloc((size_t)(e->nargs ? e->nargs : 1) * sizeof *e->args);
        for (int i = 0; i < e->nargs; i++) {
            e->args[i] = expr(s, clang_Cursor_getArgument(c, (unsigned)i));
            if (!e->args[i])
                return NULL;
        }
        return e;
    }
    case CXCursor_StmtExpr:
        return unsupported(c, "a statement expression", "GNU extension");
    case CXCursor_StringLiteral:
        return unsupported(c, "a string literal", "only numbers are supported");
    case CXCursor_CompoundLiteralExpr:
        return compound_literal(s, c);
    case CXCursor_InitListExpr:
        return unsupported(c, "an initialiser list", "only for local arrays");
    default: {
        char *t = constant_text(c);
        if (t) {
            ad_expr *e = new_expr(EX_NUM, c);
            e->text = t;
            return e;
        }
        CXString ks = clang_getCursorKindSpelling(k);
        ad_expr *r = unsupported(c, ad_fmt("expression '%s'", clang_getCString(ks)),
                                 "not in the supported C (docs/source-transformation.md)");
        clang_disposeString(ks);
        return r;
    }
    }
}

/* ---- Statements ------------------------------------------------------------------------------ */

typedef struct ctx {
    int loop_depth;
} ctx;

static ad_stmt *stmt(fe *s, CXCursor c, ctx *x);

static ad_stmt *new_stmt(ad_skind kind, CXCursor c)
{
    ad_stmt *st = ad_alloc(sizeof *st);
    st->kind = kind;
    st->loc = loc_of(c);
    return st;
}

static ad_stmt *block_of(ad_stmt **items, int n, ad_loc loc)
{
    ad_stmt *b = ad_alloc(sizeof *b);
    b->kind = ST_BLOCK;
    b->loc = loc;
    b->body = items;
    b->n = n;
    return b;
}

/* One declaration statement may declare several variables: a block of ST_DECLs (marked so
 * that it does not open a scope; names are unique after renaming anyway). */
static ad_stmt *decl_stmt(fe *s, CXCursor c, ctx *x)
{
    kids ch = children(c);
    ad_stmt **items = ad_alloc((size_t)(ch.n ? ch.n : 1) * sizeof *items);
    int n = 0;
    for (int i = 0; i < ch.n; i++) {
        CXCursor d = ch.c[i];
        enum CXCursorKind dk = clang_getCursorKind(d);
        if (dk == CXCursor_StructDecl || dk == CXCursor_TypedefDecl || dk == CXCursor_EnumDecl)
            continue;
        if (dk != CXCursor_VarDecl) {
            ad_error(loc_of(d), "unsupported construct: a local declaration of this kind");
            return NULL;
        }
        if (clang_Cursor_getStorageClass(d) == CX_SC_Static ||
            clang_Cursor_getStorageClass(d) == CX_SC_Extern) {
            ad_type *t = convert_type(clang_getCursorType(d));
            if (ad_type_has_real(t) && !t->is_const) {
                ad_error(loc_of(d), "unsupported construct: a static local holding real data "
                                    "(make it a parameter or a constant)");
                return NULL;
            }
        }
        ad_var *v = new_var(s, d, VAR_LOCAL, x->loop_depth);
        if (v->type->kind == TY_OTHER ||
            (v->type->kind == TY_STRUCT && v->type->is_union && ad_type_has_real(v->type))) {
            ad_error(v->loc,
                     "unsupported construct: a local of type '%s' (use double, float, "
                     "integers, fixed arrays and structs of them)",
                     v->type->spelling);
            return NULL;
        }
        if (v->type->kind == TY_PTR && ad_type_has_real(v->type)) {
            /* a local pointer to real data: allowed only as an alias of a parameter that never
             * changes; refused for simplicity */
            ad_error(v->loc,
                     "unsupported construct: a local pointer to real data '%s' (index the "
                     "parameter directly)",
                     v->name);
            return NULL;
        }
        ad_stmt *st = new_stmt(ST_DECL, d);
        st->var = v;
        CXCursor init = clang_Cursor_getVarDeclInitializer(d);
        if (!clang_Cursor_isNull(init)) {
            if (clang_getCursorKind(init) == CXCursor_InitListExpr) {
                kids il = children(init);
                st->ninits = il.n;
                st->inits = ad_alloc((size_t)(il.n ? il.n : 1) * sizeof *st->inits);
                for (int j = 0; j < il.n; j++)
                    if (!(st->inits[j] = expr(s, il.c[j])))
                        return NULL;
                if (v->type->kind != TY_ARRAY || v->type->elem->kind == TY_ARRAY ||
                    v->type->elem->kind == TY_STRUCT) {
                    ad_error(v->loc,
                             "unsupported construct: an initialiser list for '%s' (only "
                             "one-dimensional arrays of numbers)",
                             v->name);
                    return NULL;
                }
                if (!il.n) { /* `= {}`: every element zero, as `= {0}` */
                    st->inits[0] = ad_expr_zero(ad_expr_elem(v, 0));
                    st->ninits = 1;
                }
            } else if (!(st->e = expr(s, init))) {
                return NULL;
            }
        }
        items[n++] = st;
    }
    if (n == 1)
        return items[0];
    return block_of(items, n, loc_of(c));
}

/* Whether any part of c's extent comes from a macro expansion (a location whose spelling
 * is not where it is expanded): its tokens are then not those of the file at its offsets. */
static bool from_macro(CXCursor c)
{
    CXSourceRange r = clang_getCursorExtent(c);
    CXSourceLocation ends[2] = {clang_getRangeStart(r), clang_getRangeEnd(r)};
    for (int i = 0; i < 2; i++) {
        CXFile f1, f2;
        unsigned o1, o2;
        clang_getExpansionLocation(ends[i], &f1, NULL, NULL, &o1);
        clang_getSpellingLocation(ends[i], &f2, NULL, NULL, &o2);
        if (o1 != o2 || !clang_File_isEqual(f1, f2))
            return true;
    }
    return false;
}

/* Which of a for statement's init, condition and increment are present (bits 0, 1, 2),
 * for a statement from a macro: read from the text where its `for` is spelled (the macro's
 * definition, or a macro argument), the tokens between "for (" and the two semicolons at
 * the parentheses' level; -1 if that text is not a for statement's header. */
static int for_parts_spelled(fe *s, CXCursor c)
{
    CXFile file;
    unsigned off;
    clang_getSpellingLocation(clang_getRangeStart(clang_getCursorExtent(c)), &file, NULL, NULL,
                              &off);
    size_t size = 0;
    if (!file || !clang_getFileContents(s->tu, file, &size) || off >= size)
        return -1;
    size_t end = size - off > 65536 ? off + 65536 : size;
    CXSourceRange r = clang_getRange(clang_getLocationForOffset(s->tu, file, off),
                                     clang_getLocationForOffset(s->tu, file, (unsigned)end));
    CXToken *toks;
    unsigned ntok;
    clang_tokenize(s->tu, r, &toks, &ntok);
    int parts = -1, depth = 0, seg = 0, present = 0, ntoks_seg = 0;
    for (unsigned i = 0; i < ntok; i++) {
        CXString ts = clang_getTokenSpelling(s->tu, toks[i]);
        const char *t = clang_getCString(ts);
        bool stop = false;
        if (i == 0 || i == 1) {
            stop = strcmp(t, i == 0 ? "for" : "(") != 0;
        } else if (!strcmp(t, "(") || !strcmp(t, "[") || !strcmp(t, "{")) {
            depth++;
            ntoks_seg++;
        } else if ((!strcmp(t, ")") || !strcmp(t, "]") || !strcmp(t, "}")) && depth > 0) {
            depth--;
            ntoks_seg++;
        } else if (depth == 0 && (!strcmp(t, ";") || !strcmp(t, ")"))) {
            present |= (ntoks_seg > 0) << seg;
            ntoks_seg = 0;
            if (*t == ')') {
                parts = seg == 2 ? present : -1;
                stop = true;
            } else if (++seg > 2) {
                stop = true;
            }
        } else {
            ntoks_seg++;
        }
        clang_disposeString(ts);
        if (stop)
            break;
    }
    clang_disposeTokens(s->tu, toks, ntok);
    return parts;
}

/* The parts of a for statement: libclang leaves the missing ones out of the children, so
 * they are placed by the offsets of the two semicolons in the parentheses; a for statement
 * written by a macro (whose tokens in the file are the macro's call) by its printed text. */
static ad_stmt *for_stmt(fe *s, CXCursor c, ctx *x)
{
    kids ch = children(c);
    size_t semi[2] = {0, 0};
    int parts = -1; /* from the printed text: the roles of the children in order */
    if (from_macro(c)) {
        parts = for_parts_spelled(s, c);
        int np = (parts & 1) + (parts >> 1 & 1) + (parts >> 2 & 1);
        if (parts < 0 || np != ch.n - 1)
            return (ad_stmt *)unsupported(c, "for statement", "could not read its parts");
    } else {
        CXToken *toks;
        unsigned ntok;
        clang_tokenize(s->tu, clang_getCursorExtent(c), &toks, &ntok);
        int nsemi = 0, depth = 0;
        for (unsigned i = 0; i < ntok && nsemi < 2; i++) {
            CXString ts = clang_getTokenSpelling(s->tu, toks[i]);
            const char *t = clang_getCString(ts);
            if (strcmp(t, "(") == 0)
                depth++;
            else if (strcmp(t, ")") == 0)
                depth--;
            else if (strcmp(t, ";") == 0 && depth == 1)
                semi[nsemi++] = offset_of(clang_getTokenLocation(s->tu, toks[i]));
            clang_disposeString(ts);
        }
        clang_disposeTokens(s->tu, toks, ntok);
        if (nsemi != 2)
            return (ad_stmt *)unsupported(c, "for statement", "could not read its parts");
    }
    ad_stmt *st = new_stmt(ST_FOR, c);
    CXCursor body = ch.c[ch.n - 1];
    for (int i = 0, role = 0; i < ch.n - 1; i++, role++) {
        size_t off;
        if (parts >= 0) {
            /* the i-th child has the i-th present role: 0 init, 1 condition, 2 increment */
            while (!(parts >> role & 1))
                role++;
            semi[0] = 1;
            semi[1] = 2;
            off = (size_t)role;
        } else {
            off = offset_of(clang_getRangeStart(clang_getCursorExtent(ch.c[i])));
        }
        if (off < semi[0]) {
            if (clang_getCursorKind(ch.c[i]) == CXCursor_DeclStmt)
                st->init = decl_stmt(s, ch.c[i], x);
            else {
                ad_stmt *e = new_stmt(ST_EXPR, ch.c[i]);
                e->e = expr(s, ch.c[i]);
                st->init = e->e ? e : NULL;
            }
            if (!st->init)
                return NULL;
        } else if (off < semi[1]) {
            s->no_literal = "a loop condition";
            st->e = expr(s, ch.c[i]);
            s->no_literal = NULL;
            if (!st->e)
                return NULL;
        } else {
            s->no_literal = "a for loop's increment";
            st->inc = expr(s, ch.c[i]);
            s->no_literal = NULL;
            if (!st->inc)
                return NULL;
        }
    }
    x->loop_depth++;
    st->then = stmt(s, body, x);
    x->loop_depth--;
    return st->then ? st : NULL;
}

/* ---- switch, lowered to structured code ------------------------------------------------ */

/* switch (e) { case A: S1 case B: case C: S2 default: S3 } becomes
 *   sw = e; hit = (sw == A || sw == B || sw == C); m = 0;
 *   do { if (m || sw == A) { m = 1; S1 } if (m || sw == B || sw == C) { m = 1; S2 }
 *        if (m || !hit) { m = 1; S3 } } while (0);
 * so that fall-through, `break` (which leaves the do) and a default anywhere keep their
 * meaning. `continue` inside the switch would continue the do, and is refused. */

typedef struct seg {
    const char **vals; /* case values as C text */
    int nvals;
    bool is_default;
    ad_stmt **items;
    int nitems, capitems;
} seg;

static ad_type *int_type(void)
{
    ad_type *t = ad_alloc(sizeof *t);
    t->kind = TY_INT;
    t->spelling = "long long";
    return t;
}

static ad_expr *mk(ad_ekind k, ad_type *t, ad_loc loc)
{
    ad_expr *e = ad_alloc(sizeof *e);
    e->kind = k;
    e->type = t;
    e->loc = loc;
    e->tmp = -1;
    return e;
}

static ad_expr *mk_bin(const char *op, ad_expr *a, ad_expr *b, ad_type *t)
{
    ad_expr *e = mk(EX_BIN, t, a->loc);
    e->op = op;
    e->a = a;
    e->b = b;
    return e;
}

static ad_expr *mk_var(ad_var *v, ad_loc loc)
{
    ad_expr *e = mk(EX_VAR, v->type, loc);
    e->var = v;
    return e;
}

static ad_expr *mk_num(const char *text, ad_type *t, ad_loc loc)
{
    ad_expr *e = mk(EX_NUM, t, loc);
    e->text = text;
    return e;
}

static ad_stmt *mk_assign(ad_var *v, ad_expr *val, ad_loc loc)
{
    ad_stmt *st = ad_alloc(sizeof *st);
    st->kind = ST_EXPR;
    st->loc = loc;
    ad_expr *as = mk(EX_ASSIGN, v->type, loc);
    as->op = "=";
    as->a = mk_var(v, loc);
    as->b = val;
    st->e = as;
    return st;
}

/* ---- Compound literals ------------------------------------------------------------------ */

/* A compound literal is an unnamed local initialised where it appears: it becomes a new
 * local `litN_` declared (with its initialiser) before the statement that holds it, and the
 * literal reads that local. Its initialisers are then evaluated before the rest of the
 * statement, which is what C does when nothing else in the statement has an effect (an
 * assignment inside an expression is refused, normalize.c). A literal evaluated more than
 * once per statement (in a loop's condition or increment) or maybe not at all (an operand
 * of ?:, && or ||) is refused. */

enum { LITERAL_MAX = 65536 }; /* elements of an array literal */

static bool literal_scalar(const ad_type *t)
{
    return t->kind == TY_INT || t->kind == TY_FLOAT || t->kind == TY_DOUBLE;
}

static bool literal_array(const ad_type *t)
{
    return t->kind == TY_ARRAY && literal_scalar(t->elem) && t->len > 0 && t->len <= LITERAL_MAX;
}

/* Whether c is a designated initialiser (`.f = v`, `[k] = v`): libclang shows it as an
 * unexposed expression of type void whose children are the designator and the value. */
static bool designated(CXCursor c, kids *parts)
{
    if (clang_getCursorKind(c) != CXCursor_UnexposedExpr ||
        clang_getCursorType(c).kind != CXType_Void)
        return false;
    *parts = children(c);
    return true;
}

/* The elements of an array of type t from its initialiser list il into vals (len NULLs
 * first; an element left out stays NULL, a zero). */
static bool literal_elements(fe *s, CXCursor il, const ad_type *t, ad_expr **vals)
{
    kids ch = children(il);
    long long pos = 0;
    for (int i = 0; i < ch.n; i++) {
        CXCursor v = ch.c[i];
        kids parts;
        if (designated(v, &parts)) {
            char *k = parts.n == 2 ? constant_text(parts.c[0]) : NULL;
            if (!k) {
                ad_error(loc_of(v), "unsupported construct: this designator in a compound "
                                    "literal (use one constant index, `[k] = v`)");
                return false;
            }
            pos = strtoll(k, NULL, 10);
            v = parts.c[1];
        }
        if (pos < 0 || pos >= t->len) {
            ad_error(loc_of(v), "unsupported construct: an element of a compound literal "
                                "outside its array");
            return false;
        }
        if (clang_getCursorKind(v) == CXCursor_InitListExpr) {
            ad_error(loc_of(v), "unsupported construct: a nested initialiser list in a "
                                "compound literal (only arrays of numbers, and structs of "
                                "numbers and such arrays)");
            return false;
        }
        if (!(vals[pos++] = expr(s, v)))
            return false;
    }
    return true;
}

static ad_stmt *literal_set(ad_expr *lhs, ad_expr *val, ad_loc loc)
{
    ad_stmt *st = ad_alloc(sizeof *st);
    st->kind = ST_EXPR;
    st->loc = loc;
    ad_expr *as = mk(EX_ASSIGN, lhs->type, loc);
    as->op = "=";
    as->a = lhs;
    as->b = val ? val : mk_num(lhs->type->kind == TY_INT ? "0" : "0.0", lhs->type, loc);
    st->e = as;
    return st;
}

static void literal_pre(fe *s, ad_stmt *st)
{
    s->pre = ad_grow(s->pre, s->npre, &s->cappre, sizeof *s->pre);
    s->pre[s->npre++] = st;
}

/* A struct literal: the local declared, then every field assigned (zero where the list
 * leaves it out). */
static bool literal_struct(fe *s, CXCursor il, ad_var *v, ad_loc loc)
{
    int nf = 0;
    for (const ad_field *f = v->type->fields; f; f = f->next, nf++)
        if (!literal_scalar(f->type) && !literal_array(f->type)) {
            ad_error(loc,
                     "unsupported construct: a compound literal of type '%s', whose "
                     "field '%s' is neither a number nor an array of numbers",
                     v->type->spelling, f->name);
            return false;
        }
    ad_field **fields = ad_alloc((size_t)(nf ? nf : 1) * sizeof *fields);
    ad_expr ***vals = ad_alloc((size_t)(nf ? nf : 1) * sizeof *vals);
    int k = 0;
    for (ad_field *f = v->type->fields; f; f = f->next, k++) {
        fields[k] = f;
        long long n = f->type->kind == TY_ARRAY ? f->type->len : 1;
        vals[k] = ad_alloc((size_t)n * sizeof **vals);
    }
    kids ch = children(il);
    int pos = 0;
    for (int i = 0; i < ch.n; i++) {
        CXCursor c = ch.c[i];
        kids parts;
        if (designated(c, &parts)) {
            if (parts.n != 2 || clang_getCursorKind(parts.c[0]) != CXCursor_MemberRef) {
                ad_error(loc_of(c), "unsupported construct: this designator in a compound "
                                    "literal (use one field name, `.f = v`)");
                return false;
            }
            char *name = spelling(parts.c[0]);
            for (pos = 0; pos < nf && strcmp(fields[pos]->name, name); pos++)
                ;
            c = parts.c[1];
        }
        if (pos >= nf) {
            ad_error(loc_of(c), "unsupported construct: a compound literal's initialiser "
                                "past its last field");
            return false;
        }
        const ad_type *ft = fields[pos]->type;
        if (ft->kind == TY_ARRAY) {
            if (clang_getCursorKind(c) != CXCursor_InitListExpr) {
                ad_error(loc_of(c),
                         "unsupported construct: the array field '%s' of a "
                         "compound literal set without braces (write `{...}`)",
                         fields[pos]->name);
                return false;
            }
            if (!literal_elements(s, c, ft, vals[pos]))
                return false;
        } else if (clang_getCursorKind(c) == CXCursor_InitListExpr ||
                   !(vals[pos][0] = expr(s, c))) {
            if (clang_getCursorKind(c) == CXCursor_InitListExpr)
                ad_error(loc_of(c),
                         "unsupported construct: braces around the number field "
                         "'%s' of a compound literal",
                         fields[pos]->name);
            return false;
        }
        pos++;
    }
    ad_stmt *decl = ad_alloc(sizeof *decl);
    decl->kind = ST_DECL;
    decl->loc = loc;
    decl->var = v;
    literal_pre(s, decl);
    for (k = 0; k < nf; k++) {
        ad_expr *m = mk(EX_MEMBER, fields[k]->type, loc);
        m->a = mk_var(v, loc);
        m->text = fields[k]->name;
        if (fields[k]->type->kind != TY_ARRAY) {
            literal_pre(s, literal_set(m, vals[k][0], loc));
            continue;
        }
        for (long long j = 0; j < fields[k]->type->len; j++) {
            ad_expr *el = mk(EX_INDEX, fields[k]->type->elem, loc);
            el->a = m;
            el->b = mk_num(ad_fmt("%lld", j), int_type(), loc);
            literal_pre(s, literal_set(el, vals[k][j], loc));
        }
    }
    return true;
}

static ad_expr *compound_literal(fe *s, CXCursor c)
{
    if (s->no_literal)
        return unsupported(c, ad_fmt("a compound literal in %s", s->no_literal),
                           "declare a local before the loop, or assign it in the body");
    if (s->guarded)
        return unsupported(c, "a compound literal in an operand of ?:, && or ||",
                           "declare a local before the statement");
    kids ch = children(c);
    CXCursor il = ch.n ? ch.c[ch.n - 1] : c;
    if (clang_getCursorKind(il) != CXCursor_InitListExpr)
        return unsupported(c, "a compound literal", "malformed");
    ad_type *t = convert_type(clang_getUnqualifiedType(clang_getCursorType(c)));
    ad_loc loc = loc_of(c);
    ad_var *v = ad_func_new_local(s->f, t, ad_fmt("lit%d_", ++s->nliterals), loc, s->depth);
    v->literal = true;
    if (t->kind == TY_STRUCT && !t->is_union)
        return literal_struct(s, il, v, loc) ? mk_var(v, loc) : NULL;
    ad_stmt *decl = ad_alloc(sizeof *decl);
    decl->kind = ST_DECL;
    decl->loc = loc;
    decl->var = v;
    if (literal_array(t)) {
        ad_expr **vals = ad_alloc((size_t)t->len * sizeof *vals);
        if (!literal_elements(s, il, t, vals))
            return NULL;
        for (long long j = 0; j < t->len; j++)
            if (!vals[j])
                vals[j] = mk_num(t->elem->kind == TY_INT ? "0" : "0.0", t->elem, loc);
        decl->inits = vals;
        decl->ninits = (int)t->len;
    } else if (literal_scalar(t)) {
        kids one = children(il);
        if (one.n != 1 || clang_getCursorKind(one.c[0]) == CXCursor_InitListExpr)
            return unsupported(c, "a compound literal of a number", "give one value");
        if (!(decl->e = expr(s, one.c[0])))
            return NULL;
    } else {
        return unsupported(c, ad_fmt("a compound literal of type '%s'", t->spelling),
                           "only numbers, arrays of numbers, and structs of numbers and "
                           "such arrays");
    }
    literal_pre(s, decl);
    return mk_var(v, loc);
}

static ad_var *switch_var(fe *s, const char *base, ad_loc loc, int depth)
{
    return ad_func_new_local(s->f, int_type(), ad_fmt("%s%d_", base, s->f->nlocals), loc, depth);
}

static void seg_add(seg *g, ad_stmt *st)
{
    g->items = ad_grow(g->items, g->nitems, &g->capitems, sizeof *g->items);
    g->items[g->nitems++] = st;
}

static bool has_continue(const ad_stmt *st)
{
    if (!st)
        return false;
    if (st->kind == ST_CONTINUE)
        return true;
    if (st->kind == ST_FOR || st->kind == ST_WHILE || st->kind == ST_DO)
        return false;
    for (int i = 0; i < st->n; i++)
        if (has_continue(st->body[i]))
            return true;
    return has_continue(st->then) || has_continue(st->els);
}

static ad_stmt *switch_stmt(fe *s, CXCursor c, ctx *x)
{
    kids ch = children(c);
    if (ch.n != 2 || clang_getCursorKind(ch.c[1]) != CXCursor_CompoundStmt)
        return (ad_stmt *)unsupported(c, "switch", "write its body as a { } block of cases");
    ad_loc loc = loc_of(c);
    ad_expr *cond = expr(s, ch.c[0]);
    if (!cond)
        return NULL;
    kids body = children(ch.c[1]);
    seg *segs = ad_alloc((size_t)(body.n + 1) * sizeof *segs);
    int nseg = 0;
    x->loop_depth++; /* the statements run inside a do { } while (0) */
    for (int i = 0; i < body.n; i++) {
        CXCursor it = body.c[i];
        bool label = false;
        for (;;) {
            enum CXCursorKind k = clang_getCursorKind(it);
            if (k != CXCursor_CaseStmt && k != CXCursor_DefaultStmt)
                break;
            kids lk = children(it);
            if (!label) {
                nseg++;
                label = true;
            }
            seg *g = &segs[nseg - 1];
            if (k == CXCursor_DefaultStmt) {
                g->is_default = true;
            } else {
                if (lk.n != 2) {
                    x->loop_depth--;
                    return (ad_stmt *)unsupported(it, "case range", "list the values");
                }
                char *v = constant_text(lk.c[0]);
                if (!v) {
                    x->loop_depth--;
                    return (ad_stmt *)unsupported(it, "case label", "not a constant");
                }
                const char **nv = ad_alloc((size_t)(g->nvals + 1) * sizeof *nv);
                if (g->nvals)
                    memcpy(nv, g->vals, (size_t)g->nvals * sizeof *nv);
                nv[g->nvals++] = v;
                g->vals = nv;
            }
            it = lk.c[lk.n - 1];
        }
        if (!nseg) {
            x->loop_depth--;
            return (ad_stmt *)unsupported(it, "a statement before the first case", "remove it");
        }
        ad_stmt *st = stmt(s, it, x);
        if (!st) {
            x->loop_depth--;
            return NULL;
        }
        if (has_continue(st)) {
            x->loop_depth--;
            return (ad_stmt *)unsupported(it, "continue inside a switch",
                                          "set a flag and continue after the switch");
        }
        seg_add(&segs[nseg - 1], st);
    }
    x->loop_depth--;
    ad_type *it = int_type();
    ad_var *sw = switch_var(s, "sw", loc, x->loop_depth);
    ad_var *hit = switch_var(s, "hit", loc, x->loop_depth);
    ad_var *m = switch_var(s, "m", loc, x->loop_depth);
    ad_stmt **out = ad_alloc(4 * sizeof *out);
    ad_expr *cast = mk(EX_CAST, it, loc);
    cast->a = cond;
    out[0] = mk_assign(sw, cast, loc);
    ad_expr *any = mk_num("0", it, loc);
    for (int g = 0; g < nseg; g++)
        for (int j = 0; j < segs[g].nvals; j++)
            any = mk_bin("||", any,
                         mk_bin("==", mk_var(sw, loc), mk_num(segs[g].vals[j], it, loc), it), it);
    out[1] = mk_assign(hit, any, loc);
    out[2] = mk_assign(m, mk_num("0", it, loc), loc);
    ad_stmt **ifs = ad_alloc((size_t)(nseg + 1) * sizeof *ifs);
    for (int g = 0; g < nseg; g++) {
        ad_expr *when = mk_var(m, loc);
        for (int j = 0; j < segs[g].nvals; j++)
            when = mk_bin("||", when,
                          mk_bin("==", mk_var(sw, loc), mk_num(segs[g].vals[j], it, loc), it), it);
        if (segs[g].is_default) {
            ad_expr *no = mk(EX_UN, it, loc);
            no->op = "!";
            no->a = mk_var(hit, loc);
            when = mk_bin("||", when, no, it);
        }
        ad_stmt **items = ad_alloc((size_t)(segs[g].nitems + 1) * sizeof *items);
        items[0] = mk_assign(m, mk_num("1", it, loc), loc);
        memcpy(items + 1, segs[g].items, (size_t)segs[g].nitems * sizeof *items);
        ad_stmt *st = ad_alloc(sizeof *st);
        st->kind = ST_IF;
        st->loc = loc;
        st->e = when;
        st->then = block_of(items, segs[g].nitems + 1, loc);
        ifs[g] = st;
    }
    ad_stmt *dowhile = ad_alloc(sizeof *dowhile);
    dowhile->kind = ST_DO;
    dowhile->loc = loc;
    dowhile->then = block_of(ifs, nseg, loc);
    dowhile->e = mk_num("0", it, loc);
    out[3] = dowhile;
    return block_of(out, 4, loc);
}

/* A statement, after the declarations of the compound literals its own expressions hold
 * (a block of them and it; blocks open no scope in the generated code). */
static ad_stmt *stmt_read(fe *s, CXCursor c, ctx *x);

static ad_stmt *stmt(fe *s, CXCursor c, ctx *x)
{
    int mark = s->npre, depth = s->depth;
    s->depth = x->loop_depth;
    ad_stmt *st = stmt_read(s, c, x);
    s->depth = depth;
    if (st && s->npre > mark) {
        int n = s->npre - mark + 1;
        ad_stmt **items = ad_alloc((size_t)n * sizeof *items);
        memcpy(items, s->pre + mark, (size_t)(n - 1) * sizeof *items);
        items[n - 1] = st;
        st = block_of(items, n, st->loc);
    }
    s->npre = mark;
    return st;
}

static ad_stmt *stmt_read(fe *s, CXCursor c, ctx *x)
{
    enum CXCursorKind k = clang_getCursorKind(c);
    kids ch;
    ad_stmt *st;
    switch (k) {
    case CXCursor_CompoundStmt: {
        ch = children(c);
        ad_stmt **items = NULL;
        int n = 0, cap = 0;
        for (int i = 0; i < ch.n; i++) {
            /* the declarations of a statement's compound literals are items of the block
             * (a return stays at its level) */
            int mark = s->npre, depth = s->depth;
            s->depth = x->loop_depth;
            ad_stmt *it = stmt_read(s, ch.c[i], x);
            s->depth = depth;
            if (!it)
                return NULL;
            for (int j = mark; j < s->npre; j++) {
                items = ad_grow(items, n, &cap, sizeof *items);
                items[n++] = s->pre[j];
            }
            s->npre = mark;
            items = ad_grow(items, n, &cap, sizeof *items);
            items[n++] = it;
        }
        if (!items)
            items = ad_alloc(sizeof *items);
        return block_of(items, n, loc_of(c));
    }
    case CXCursor_DeclStmt:
        return decl_stmt(s, c, x);
    case CXCursor_NullStmt:
        return new_stmt(ST_NULL, c);
    case CXCursor_IfStmt:
        ch = children(c);
        if (ch.n < 2)
            return (ad_stmt *)unsupported(c, "if statement", "malformed");
        st = new_stmt(ST_IF, c);
        if (!(st->e = expr(s, ch.c[0])) || !(st->then = stmt(s, ch.c[1], x)))
            return NULL;
        if (ch.n > 2 && !(st->els = stmt(s, ch.c[2], x)))
            return NULL;
        return st;
    case CXCursor_ForStmt:
        return for_stmt(s, c, x);
    case CXCursor_WhileStmt:
        ch = children(c);
        if (ch.n != 2)
            return (ad_stmt *)unsupported(c, "while statement", "declarations in the condition");
        st = new_stmt(ST_WHILE, c);
        s->no_literal = "a loop condition";
        st->e = expr(s, ch.c[0]);
        s->no_literal = NULL;
        if (!st->e)
            return NULL;
        x->loop_depth++;
        st->then = stmt(s, ch.c[1], x);
        x->loop_depth--;
        return st->then ? st : NULL;
    case CXCursor_DoStmt:
        ch = children(c);
        if (ch.n != 2)
            return (ad_stmt *)unsupported(c, "do statement", "malformed");
        st = new_stmt(ST_DO, c);
        x->loop_depth++;
        st->then = stmt(s, ch.c[0], x);
        x->loop_depth--;
        if (!st->then)
            return NULL;
        s->no_literal = "a loop condition";
        st->e = expr(s, ch.c[1]);
        s->no_literal = NULL;
        return st->e ? st : NULL;
    case CXCursor_BreakStmt:
        return new_stmt(ST_BREAK, c);
    case CXCursor_ContinueStmt:
        return new_stmt(ST_CONTINUE, c);
    case CXCursor_ReturnStmt:
        ch = children(c);
        st = new_stmt(ST_RETURN, c);
        if (ch.n == 1 && !(st->e = expr(s, ch.c[0])))
            return NULL;
        return st;
    case CXCursor_GotoStmt:
    case CXCursor_IndirectGotoStmt:
    case CXCursor_LabelStmt:
        return (ad_stmt *)unsupported(c, "goto and labels",
                                      "use structured loops, break, continue and return");
    case CXCursor_SwitchStmt:
        return switch_stmt(s, c, x);
    case CXCursor_GCCAsmStmt:
    case CXCursor_MSAsmStmt:
        return (ad_stmt *)unsupported(c, "inline assembly", "move it to a function with a rule");
    default:
        if (clang_isExpression(k)) {
            st = new_stmt(ST_EXPR, c);
            st->e = expr(s, c);
            return st->e ? st : NULL;
        }
        {
            CXString ks = clang_getCursorKindSpelling(k);
            ad_stmt *r = (ad_stmt *)unsupported(c, ad_fmt("statement '%s'", clang_getCString(ks)),
                                                "not in the supported C");
            clang_disposeString(ks);
            return r;
        }
    }
}

/* ---- Functions ------------------------------------------------------------------------------- */

static ad_func *read_function(fe *s, CXCursor c)
{
    ad_func *f = ad_alloc(sizeof *f);
    f->name = spelling(c);
    f->loc = loc_of(c);
    /* a function returns the unqualified version of its declared type (C17, DR 423): the
     * qualifiers, also those a typedef carries, are dropped, so that no generated
     * declaration or local spells them (`const double f_fwd(...)` draws
     * -Wignored-qualifiers) */
    CXType rt = clang_getUnqualifiedType(clang_getResultType(clang_getCursorType(c)));
    CXType canon = clang_getCanonicalType(rt);
    if (clang_isConstQualifiedType(canon) || clang_isVolatileQualifiedType(canon))
        rt = clang_getUnqualifiedType(canon);
    f->ret = convert_type(rt);
    f->is_static = clang_Cursor_getStorageClass(c) == CX_SC_Static;
    int np = clang_Cursor_getNumArguments(c);
    f->nparams = np;
    f->params = ad_alloc((size_t)(np ? np : 1) * sizeof *f->params);
    s->f = f;
    s->nvars = 0;
    for (int i = 0; i < np; i++) {
        f->params[i] = new_var(s, clang_Cursor_getArgument(c, (unsigned)i), VAR_PARAM, 0);
        f->params[i]->index = i;
    }
    kids ch = children(c);
    ad_error_sink(&f->errors);
    for (int i = 0; i < ch.n; i++)
        if (clang_getCursorKind(ch.c[i]) == CXCursor_CompoundStmt) {
            f->has_body = true;
            ctx x = {0};
            f->body = stmt(s, ch.c[i], &x);
        }
    ad_error_sink(NULL);
    f->nerrors = f->errors.len != 0;
    return f;
}

typedef struct top {
    fe *s;
    CXFile main;
} top;

static enum CXChildVisitResult top_visit(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    top *t = data;
    CXFile file;
    clang_getExpansionLocation(clang_getCursorLocation(c), &file, NULL, NULL, NULL);
    ad_unit *u = t->s->u;
    enum CXCursorKind k = clang_getCursorKind(c);
    if (k == CXCursor_FunctionDecl && !clang_isCursorDefinition(c) &&
        clang_Cursor_isNull(clang_getCursorDefinition(c))) {
        /* a function declared only (here or in a header): read if a primitive names it */
        const char *name = spelling(c);
        int mk = ad_mpi_kind(name);
        if (mk >= 0 && !ad_unit_find(u, name)) {
            ad_func *g = read_function(t->s, c);
            u->funcs[u->nfuncs++] = g;
            ad_mpi_bind(g, mk);
            return CXChildVisit_Continue;
        }
        for (int i = 0; i < u->nprims; i++)
            if (!strcmp(u->prims[i].name, name) && !ad_unit_find(u, name)) {
                u->funcs[u->nfuncs++] = read_function(t->s, c);
                break;
            }
        return CXChildVisit_Continue;
    }
    if (!clang_File_isEqual(file, t->main))
        return CXChildVisit_Continue;
    if (k == CXCursor_FunctionDecl && clang_isCursorDefinition(c)) {
        ad_func *f = read_function(t->s, c);
        u->funcs[u->nfuncs++] = f;
        if (f->is_static) {
            /* the output calls the transformed copies: the primal may be unused there */
            size_t b = offset_of(clang_getRangeStart(clang_getCursorExtent(c)));
            u->cuts[u->ncuts++] = (struct ad_cut){b, b, "CR_AD_UNUSED "};
        }
        if (!f->is_static) {
            /* the output declares it: its body is cut from the copy of the input */
            kids ch = children(c);
            CXCursor body = ch.c[ch.n - 1];
            CXSourceRange r = clang_getCursorExtent(body);
            u->cuts[u->ncuts].begin = offset_of(clang_getRangeStart(r));
            u->cuts[u->ncuts].end = offset_of(clang_getRangeEnd(r));
            u->cuts[u->ncuts].with = ";";
            u->ncuts++;
        }
    } else if (k == CXCursor_VarDecl && clang_Cursor_getStorageClass(c) != CX_SC_Static &&
               clang_Cursor_getStorageClass(c) != CX_SC_Extern) {
        /* a global defined in the input is declared extern in the output */
        CXSourceRange r = clang_getCursorExtent(c);
        size_t b = offset_of(clang_getRangeStart(r));
        u->cuts[u->ncuts].begin = b;
        u->cuts[u->ncuts].end = b;
        u->cuts[u->ncuts].with = "extern ";
        u->ncuts++;
        CXCursor init = clang_Cursor_getVarDeclInitializer(c);
        if (!clang_Cursor_isNull(init)) {
            /* cut " = init" : from the end of the declarator to the end of the initialiser */
            CXSourceRange ir = clang_getCursorExtent(init);
            CXToken *toks;
            unsigned ntok;
            clang_tokenize(t->s->tu, r, &toks, &ntok);
            size_t eq = 0;
            for (unsigned i = 0; i < ntok; i++) {
                CXString ts = clang_getTokenSpelling(t->s->tu, toks[i]);
                if (strcmp(clang_getCString(ts), "=") == 0 && !eq)
                    eq = offset_of(clang_getTokenLocation(t->s->tu, toks[i]));
                clang_disposeString(ts);
            }
            clang_disposeTokens(t->s->tu, toks, ntok);
            if (eq) {
                u->cuts[u->ncuts].begin = eq;
                u->cuts[u->ncuts].end = offset_of(clang_getRangeEnd(ir));
                u->cuts[u->ncuts].with = "";
                u->ncuts++;
            }
        }
    }
    return CXChildVisit_Continue;
}

static enum CXChildVisitResult count_top(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)c;
    (void)parent;
    (*(int *)data)++;
    return CXChildVisit_Continue;
}

/* "checkpoint(K) [sizes(name: expr, ...)]" (the text after "#pragma chainrules"), to the
 * end of the line. */
static const char *skip_ws(const char *q)
{
    while (*q == ' ' || *q == '\t')
        q++;
    return q;
}

static int parse_pragma(const char *q, struct ad_pragma *pg)
{
    int k = 0, used = 0;
    if (sscanf(q, "checkpoint ( %d )%n", &k, &used) != 1 || used == 0 || k < 1 || k > 64)
        return 1;
    pg->k = k;
    q = skip_ws(q + used);
    if (*q == '\n' || *q == 0 || *q == '\r')
        return 0;
    if (strncmp(q, "sizes", 5) != 0)
        return 1;
    q = skip_ws(q + 5);
    if (*q != '(')
        return 1;
    q++;
    for (;;) {
        q = skip_ws(q);
        const char *b = q;
        while (*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
               (*q >= '0' && *q <= '9'))
            q++;
        if (q == b)
            return 1;
        const char *name = ad_fmt("%.*s", (int)(q - b), b);
        q = skip_ws(q);
        if (*q != ':')
            return 1;
        q++;
        const char *e = q;
        int depth = 0;
        while (*q && *q != '\n' && !(depth == 0 && (*q == ',' || *q == ')'))) {
            if (*q == '(')
                depth++;
            if (*q == ')')
                depth--;
            q++;
        }
        if (*q != ',' && *q != ')')
            return 1;
        const char **nn = ad_alloc((size_t)(pg->nsizes + 1) * sizeof *nn);
        const char **ne = ad_alloc((size_t)(pg->nsizes + 1) * sizeof *ne);
        if (pg->nsizes) {
            memcpy(nn, pg->size_names, (size_t)pg->nsizes * sizeof *nn);
            memcpy(ne, pg->size_exprs, (size_t)pg->nsizes * sizeof *ne);
        }
        nn[pg->nsizes] = name;
        ne[pg->nsizes] = ad_fmt("%.*s", (int)(q - e), e);
        pg->size_names = nn;
        pg->size_exprs = ne;
        pg->nsizes++;
        if (*q == ')')
            break;
        q++;
    }
    q = skip_ws(q + 1);
    return (*q == '\n' || *q == 0 || *q == '\r') ? 0 : 1;
}

/* `#include "name"` of a file next to the input: the output (written elsewhere) names it
 * by its full path, so that it compiles wherever it is written. */
static void rewrite_include(ad_unit *u, const char *q)
{
    while (*q == ' ' || *q == '\t')
        q++;
    if (*q != '"' || q[1] == '/')
        return;
    const char *b = q + 1, *e = strchr(b, '"');
    const char *nl = strchr(b, '\n');
    if (!e || (nl && nl < e))
        return;
    const char *slash = strrchr(u->file, '/');
    char *dir = slash ? ad_fmt("%.*s", (int)(slash - u->file), u->file) : ad_strdup(".");
    char *path = ad_fmt("%s/%.*s", dir, (int)(e - b), b);
    char *full = realpath(path, NULL);
    if (!full)
        return;
    if (u->ncuts < u->capcuts) {
        size_t off = (size_t)(b - u->source);
        u->cuts[u->ncuts++] = (struct ad_cut){off, off + (size_t)(e - b), ad_strdup(full)};
    }
    free(full);
}

/* `#pragma chainrules checkpoint(K)` lines of the input. */
static void read_pragmas(ad_unit *u)
{
    const char *p = u->source;
    unsigned line = 1;
    int cap = 0;
    while (*p) {
        const char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, "#include", 8) == 0)
            rewrite_include(u, q + 8);
        if (strncmp(q, "#pragma", 7) == 0) {
            q += 7;
            while (*q == ' ' || *q == '\t')
                q++;
            if (strncmp(q, "chainrules", 10) == 0) {
                q += 10;
                while (*q == ' ' || *q == '\t')
                    q++;
                ad_loc l = {u->file, line, 1};
                struct ad_pragma pg = {line, 0, false, NULL, NULL, 0};
                if (strncmp(q, "primitive", 9) == 0) {
                    if (ad_prim_pragma(u, q, line) != 0)
                        ad_error(l, "malformed pragma: write '#pragma chainrules primitive(g) "
                                    "rule(cr_fn_NAME or a cr_rule_def) shape(p[n], A[m][n], ...)'");
                } else if (strncmp(q, "arrays", 6) == 0) {
                    if (ad_arrays_pragma(u, q, line) != 0)
                        ad_error(l, "malformed pragma: write '#pragma chainrules arrays(f) "
                                    "shape(p[n], A[m][n], ...)'");
                } else if (parse_pragma(q, &pg) != 0) {
                    ad_error(l, "malformed pragma: write '#pragma chainrules checkpoint(K)' with "
                                "1 <= K <= 64 snapshots, and 'sizes(p: n, ...)' for the arrays "
                                "the loop updates through pointers, just before a for loop");
                } else {
                    u->pragmas = ad_grow(u->pragmas, u->npragmas, &cap, sizeof *u->pragmas);
                    u->pragmas[u->npragmas++] = pg;
                }
            }
        }
        while (*p && *p != '\n')
            p++;
        if (*p == '\n') {
            p++;
            line++;
        }
    }
}

/* Attaches each pragma to the first loop that starts after it. */
static void attach_pragmas(ad_unit *u, ad_stmt *st)
{
    if (!st)
        return;
    if (st->kind == ST_FOR || st->kind == ST_WHILE || st->kind == ST_DO) {
        for (int i = 0; i < u->npragmas; i++)
            if (!u->pragmas[i].used && u->pragmas[i].line < st->loc.line &&
                st->loc.line - u->pragmas[i].line <= 2) {
                st->checkpoint = u->pragmas[i].k;
                st->pragma = &u->pragmas[i];
                u->pragmas[i].used = true;
            }
    }
    if (st->kind == ST_BLOCK)
        for (int i = 0; i < st->n; i++)
            attach_pragmas(u, st->body[i]);
    attach_pragmas(u, st->init);
    attach_pragmas(u, st->then);
    attach_pragmas(u, st->els);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    ad_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk - 1, fp)) > 0) {
        chunk[n] = 0;
        if (memchr(chunk, 0, n)) {
            fclose(fp);
            ad_buf_free(&b);
            return NULL;
        }
        ad_buf_put(&b, chunk);
    }
    fclose(fp);
    *len = b.len;
    char *r = ad_strdup(b.p ? b.p : "");
    ad_buf_free(&b);
    return r;
}

int ad_parse(const char *path, const char *const *flags, int nflags, ad_unit *u)
{
    memset(u, 0, sizeof *u);
    u->file = path;
    u->source = read_file(path, &u->source_len);
    if (!u->source) {
        fprintf(stderr, "chainrules-ad: cannot read '%s'\n", path);
        return 1;
    }
    const char **args = ad_alloc((size_t)(nflags + 4) * sizeof *args);
    int na = 0;
    bool has_std = false;
    for (int i = 0; i < nflags; i++)
        if (strncmp(flags[i], "-std=", 5) == 0)
            has_std = true;
    if (!has_std)
        args[na++] = "-std=c11";
    for (int i = 0; i < nflags; i++)
        args[na++] = flags[i];
    args[na++] = "-Wno-unknown-pragmas";
    CXIndex index = clang_createIndex(0, 0);
    CXTranslationUnit tu = NULL;
    enum CXErrorCode ec =
        clang_parseTranslationUnit2(index, path, args, na, NULL, 0, CXTranslationUnit_None, &tu);
    if (ec != CXError_Success || !tu) {
        fprintf(stderr, "%s: error: cannot parse the file (libclang error %d)\n", path, (int)ec);
        clang_disposeIndex(index);
        return 1;
    }
    int rc = 0;
    unsigned nd = clang_getNumDiagnostics(tu);
    for (unsigned i = 0; i < nd; i++) {
        CXDiagnostic d = clang_getDiagnostic(tu, i);
        enum CXDiagnosticSeverity sev = clang_getDiagnosticSeverity(d);
        if (sev >= CXDiagnostic_Error) {
            CXString m = clang_formatDiagnostic(d, CXDiagnostic_DisplaySourceLocation |
                                                       CXDiagnostic_DisplayColumn);
            fprintf(stderr, "%s\n", clang_getCString(m));
            clang_disposeString(m);
            rc = 1;
        }
        clang_disposeDiagnostic(d);
    }
    if (rc) {
        clang_disposeTranslationUnit(tu);
        clang_disposeIndex(index);
        return rc;
    }
    fe s = {.tu = tu, .u = u};
    CXCursor root = clang_getTranslationUnitCursor(tu);
    int ntop = 0;
    clang_visitChildren(root, count_top, &ntop);
    u->funcs = ad_alloc((size_t)(ntop + 1) * sizeof *u->funcs);
    /* three cuts a top-level entity at most, and one an include line */
    size_t lines = 1;
    for (const char *c = u->source; *c; c++)
        lines += *c == '\n';
    u->capcuts = (int)(3 * (size_t)ntop + lines + 1);
    u->cuts = ad_alloc((size_t)u->capcuts * sizeof *u->cuts);
    top t = {&s, clang_getFile(tu, path)};
    read_pragmas(u);
    clang_visitChildren(root, top_visit, &t);
    ad_prim_attach(u);
    for (int i = 0; i < u->nfuncs; i++)
        attach_pragmas(u, u->funcs[i]->body);
    for (int i = 0; i < u->npragmas; i++)
        if (!u->pragmas[i].used) {
            ad_loc l = {u->file, u->pragmas[i].line, 1};
            ad_error(l, "'#pragma chainrules checkpoint' must stand just before a loop");
        }
    clang_disposeTranslationUnit(tu);
    clang_disposeIndex(index);
    return ad_errors() ? 1 : 0;
}

ad_func *ad_unit_find(const ad_unit *u, const char *name)
{
    for (int i = 0; i < u->nfuncs; i++)
        if (strcmp(u->funcs[i]->name, name) == 0)
            return u->funcs[i];
    return NULL;
}
