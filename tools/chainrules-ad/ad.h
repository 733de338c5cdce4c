/*
 * chainrules-ad: the source transformer's internal interface.
 *
 * The tool reads a C11 translation unit with libclang (frontend.c) into the small syntax
 * tree below, analyses it (analysis.c: activity, outputs, the values the adjoint needs) and
 * writes tangent (forward.c) and adjoint (reverse.c) C code whose partial derivatives are
 * the library's scalar rule rows (rows.c). docs/source-transformation.md is the reference.
 */
#ifndef CR_AD_H
#define CR_AD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- Memory and text ---------------------------------------------------------------------- */

/* Every node of the tree is allocated from one pool, freed at exit (ad_pool_free). */
void *ad_alloc(size_t size);
char *ad_strdup(const char *s);
char *ad_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ad_pool_free(void);
/* The pool array p of n elements of `elem` bytes, with room for one more (capacity *cap). */
void *ad_grow(void *p, int n, int *cap, size_t elem);

/* A growable text buffer. */
typedef struct ad_buf {
    char *p;
    size_t len, cap;
} ad_buf;
void ad_buf_put(ad_buf *b, const char *s);
void ad_buf_printf(ad_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ad_buf_free(ad_buf *b);

/* ---- Diagnostics -------------------------------------------------------------------------- */

/* A source position. */
typedef struct ad_loc {
    const char *file;
    unsigned line, col;
} ad_loc;

/* Reports "file:line:col: error: ..." on stderr and counts it; ad_errors() is the count. */
void ad_error(ad_loc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ad_errors(void);
/* While a sink is set, errors are kept in it instead of printed (the errors of a function
 * are reported only if the function is transformed). NULL restores printing. */
void ad_error_sink(ad_buf *sink);

/* ---- Types -------------------------------------------------------------------------------- */

typedef enum ad_tkind {
    TY_VOID,
    TY_INT,    /* every integer type, _Bool and enums */
    TY_FLOAT,  /* float */
    TY_DOUBLE, /* double */
    TY_PTR,
    TY_ARRAY, /* constant size */
    TY_STRUCT,
    TY_OTHER /* anything else (long double, complex, function, union...) */
} ad_tkind;

typedef struct ad_field ad_field;

typedef struct ad_type {
    ad_tkind kind;
    bool is_const;        /* the object (for TY_PTR: the pointee) is const */
    struct ad_type *elem; /* TY_PTR, TY_ARRAY */
    long long len;        /* TY_ARRAY */
    const char *spelling; /* as C writes it, e.g. "const double *", "struct s" */
    const char *unq;      /* the same without its own qualifiers ("double" for "const double") */
    const char *name;     /* TY_STRUCT: "struct s" or the typedef name */
    ad_field *fields;     /* TY_STRUCT */
    bool is_union;
} ad_type;

struct ad_field {
    const char *name;
    ad_type *type;
    ad_field *next;
};

bool ad_type_is_real(const ad_type *t); /* float or double */
bool ad_type_has_real(
    const ad_type *t); /* holds float/double data (through arrays, pointers, fields) */
ad_type *ad_type_scalar_of(ad_type *t);          /* the element type under arrays and pointers */
const char *ad_type_real_name(const ad_type *t); /* "double" or "float" of a real type */

/* ---- Variables ---------------------------------------------------------------------------- */

typedef enum ad_vkind { VAR_PARAM, VAR_LOCAL, VAR_GLOBAL } ad_vkind;

typedef struct ad_var {
    const char *name;  /* the source name */
    const char *cname; /* the name in generated code (locals renamed where they shadow) */
    ad_type *type;
    ad_vkind kind;
    int index; /* parameter position, or local number */
    ad_loc loc;
    /* analysis */
    bool varied;    /* depends on an active input */
    bool useful;    /* influences an active output */
    bool active;    /* varied && useful && holds real data */
    bool needed;    /* its value is read by the adjoint sweep */
    bool written;   /* assigned in the function (or through a callee) */
    bool wrt;       /* parameter: an independent input of the derivative */
    bool output;    /* parameter: a non-const real pointer the function writes */
    bool shadowed;  /* parameter: has a shadow in the generated signature */
    int loop_depth; /* loops enclosing its declaration */
    bool counter;   /* the counter of a canonical for loop (restored, not stored) */
    bool inlined;   /* an array an inlined helper reads or declares (inline.c) */
    bool set_once;  /* parameter: f_rev_set assigns its shadow's elements (reverse.c) */
    bool literal;   /* the local of a compound literal (frontend.c) */
} ad_var;

/* ---- Expressions -------------------------------------------------------------------------- */

typedef enum ad_ekind {
    EX_NUM,    /* a numeric constant: text */
    EX_VAR,    /* a variable */
    EX_GLOBAL, /* a global or enum constant kept as text (inactive) */
    EX_BIN,    /* op: + - * / % < > <= >= == != && || & | ^ << >> */
    EX_UN,     /* op: - + ! ~ */
    EX_ASSIGN, /* op: = += -= *= /= %= ... */
    EX_INCDEC, /* op: ++ or --, prefix or postfix */
    EX_COND,   /* c ? a : b */
    EX_CALL,   /* name(args) */
    EX_INDEX,  /* a[i] */
    EX_MEMBER, /* a.f or a->f */
    EX_CAST,   /* (type)e, explicit or implicit */
    EX_ADDR,   /* &e */
    EX_DEREF,  /* *e */
    EX_TEXT    /* an inactive integer expression kept as source text (sizeof, ...) */
} ad_ekind;

struct ad_func;

typedef struct ad_expr {
    ad_ekind kind;
    ad_type *type;
    ad_loc loc;
    const char *op;   /* EX_BIN, EX_UN, EX_ASSIGN, EX_INCDEC */
    bool prefix;      /* EX_INCDEC */
    bool arrow;       /* EX_MEMBER */
    const char *text; /* EX_NUM, EX_GLOBAL, EX_TEXT; EX_MEMBER: the field; EX_CALL: the name */
    ad_var *var;      /* EX_VAR */
    struct ad_expr *a, *b, *c; /* operands (EX_COND: c ? a : b uses a=cond, b, c) */
    struct ad_expr **args;     /* EX_CALL */
    int nargs;
    struct ad_func *callee;   /* EX_CALL: a function of this file, or NULL */
    const struct ad_row *row; /* EX_CALL of a math function, or EX_BIN/EX_UN arithmetic */
    /* analysis */
    bool active;   /* real-valued and depends on an active variable */
    bool need_val; /* its value is needed by the adjoint */
    int tmp;       /* code generation: the number of the temporary holding it */
} ad_expr;

/* ---- Statements --------------------------------------------------------------------------- */

typedef enum ad_skind {
    ST_BLOCK,
    ST_DECL, /* var [= init] */
    ST_EXPR,
    ST_IF,
    ST_FOR,
    ST_WHILE,
    ST_DO,
    ST_BREAK,
    ST_CONTINUE,
    ST_RETURN,
    ST_NULL
} ad_skind;

typedef struct ad_stmt {
    ad_skind kind;
    ad_loc loc;
    struct ad_stmt **body; /* ST_BLOCK */
    int n;
    ad_var *var;     /* ST_DECL */
    ad_expr *e;      /* ST_DECL init, ST_EXPR, ST_RETURN value, condition of if/loops */
    ad_expr **inits; /* ST_DECL of an array with an initialiser list */
    int ninits;
    struct ad_stmt *init;           /* ST_FOR init (a statement), or NULL */
    ad_expr *inc;                   /* ST_FOR increment, or NULL */
    struct ad_stmt *then, *els;     /* ST_IF; loops: then = body */
    int checkpoint;                 /* loops: K of `#pragma chainrules checkpoint(K)`, else 0 */
    const struct ad_pragma *pragma; /* the pragma itself (its sizes) */
    /* analysis */
    bool has_exit;   /* contains a break/continue/return leaving this statement */
    bool rev;        /* has adjoint work (reverse sweep code) */
    bool recompute;  /* ST_DECL in a loop body: recomputed by the adjoint, not stored */
    bool push;       /* assignment (ST_EXPR, ST_DECL): store the old value first */
    bool invert;     /* integer v = v +- c: the adjoint restores v by the inverse */
    bool preacc;     /* active assignment whose partials the forward sweep stores (lin.c) */
    bool preacc_top; /* ... outside every loop: stored in locals when the sweeps share them */
    int preacc_slot; /* code generation: the number of those locals (pa<n>_), or 0 */
    bool inc_push;   /* the same two for a for loop's increment */
    bool inc_invert;
    int id;               /* number, for generated labels and names */
    ad_var *canon;        /* ST_FOR: the counter of a canonical loop, or NULL */
    long long canon_step; /* its constant step */
    ad_expr *lo, *hi;     /* static bounds: the counter's first value and the bound, which
                             the adjoint evaluates again (no trip count stored), or NULL */
    const char *hi_op;    /* the comparison with hi: "<", "<=", ">", ">=" */
} ad_stmt;

/* ---- Functions and the translation unit ---------------------------------------------------- */

/* A primitive (`#pragma chainrules primitive`, prim.c): a function differentiated by a rule of
 * the rule API. */
#define AD_PRIM_MAX_PARAMS 32
typedef struct ad_prim {
    const char *rule; /* the C object: cr_fn_NAME, or a user's cr_rule_def */
    bool is_def;      /* a cr_rule_def (called directly), not a library function value */
    int nargs;
    int argp[8];                            /* rule argument k is parameter argp[k] */
    int outp;                               /* the output parameter, or -1: the return value */
    int mpi;                                /* an MPI function (mpi.c): its kind + 1, else 0 */
    int ndim[AD_PRIM_MAX_PARAMS];           /* pointer parameters: 1 or 2 extents */
    const char *ext[AD_PRIM_MAX_PARAMS][2]; /* their C expressions */
} ad_prim;

typedef struct ad_func {
    const char *name;
    ad_loc loc;
    ad_type *ret;
    ad_var **params;
    int nparams;
    ad_var **locals;
    int nlocals, caplocals;
    ad_stmt *body;
    bool is_static;
    bool has_body;
    ad_prim *prim; /* a primitive: calls use its rule, its body (if any) is not transformed */
    ad_buf errors; /* the frontend's messages about its body */
    int nerrors;
    /* requests and analysis */
    bool want_rev, want_fwd; /* asked for on the command line */
    bool need_rev, need_fwd; /* generated (asked for or called from a generated function) */
    bool analysed;
    bool writes_param[64]; /* parameter i is written (directly or through a callee) */
    int nstmts;
} ad_func;

typedef struct ad_unit {
    const char *file;   /* the input path */
    const char *source; /* its text */
    size_t source_len;
    ad_func **funcs;
    int nfuncs;
    /* byte ranges of the input to cut from the copy the output starts with */
    struct ad_cut {
        size_t begin, end;
        const char *with;
    } * cuts;
    int ncuts, capcuts;
    /* `#pragma chainrules checkpoint(K)` lines */
    struct ad_pragma {
        unsigned line;
        int k;
        bool used;
        const char **size_names; /* sizes(name: expr, ...) */
        const char **size_exprs;
        int nsizes;
    } * pragmas;
    int npragmas;
    /* `#pragma chainrules primitive(g) rule(r) shape(p[e]...)` lines */
    struct ad_prim_pragma {
        unsigned line;
        const char *name, *rule;
        struct ad_prim_shape {
            const char *name;
            int ndim;
            const char *ext[2];
        } shapes[AD_PRIM_MAX_PARAMS];
        int nshapes;
    } * prims;
    int nprims, capprims;
    /* `#pragma chainrules arrays(f) shape(p[e]...)`: the arrays of a function --emit-rules
     * writes as a rule (rule is NULL) */
    struct ad_prim_pragma *arrays;
    int narrays, caparrays;
    /* --lane-ranges: the vector forward mode tracks each local tangent's nonzero lanes */
    bool lane_ranges;
} ad_unit;

ad_func *ad_unit_find(const ad_unit *u, const char *name);
/* Appends v to f's locals (its index set). */
void ad_func_add_local(ad_func *f, ad_var *v);
/* A new local of f named `name` (used as is in generated code). */
ad_var *ad_func_new_local(ad_func *f, ad_type *t, const char *name, ad_loc loc, int depth);
/* Expressions made by the transformer: v; v[i]; a zero of like's type. */
ad_expr *ad_expr_var(ad_var *v);
ad_expr *ad_expr_elem(ad_var *v, long long i);
ad_expr *ad_expr_zero(const ad_expr *like);

/* frontend.c: parse `path` with the compiler flags; 0 on success (errors reported). */
int ad_parse(const char *path, const char *const *flags, int nflags, ad_unit *out);

/* ---- Rule rows ------------------------------------------------------------------------------ */

typedef struct ad_row {
    const char *name; /* the row's name (sin, mul, ...) */
    int nin, nout;
    bool inline_ok;  /* its text uses only <math.h>: emitted inline */
    bool uses_x[4];  /* partials (or Ω) read input j */
    bool uses_y;     /* partials read Ω */
    unsigned dep[4]; /* bit j of dep[k]: the partial D[k] reads input j (through Ω, the
                        row's locals and the other partials) */
    bool emitted_f64, emitted_f32;
    const void *rule; /* the library's cr_scalar_rule */
} ad_row;

/* rows.c: the row of a C function name (sin, sinf, fabs, pow...), or NULL; *is_float is set
 * for the float spelling (sinf). */
const ad_row *ad_row_for_call(const char *name, bool *is_float);
/* Adds a user's registry (--rules): its scalar rows are used for calls of their names. */
void ad_rows_add_registry(const void *reg);
/* Why a user's rule named `name` cannot be used, or NULL. */
const char *ad_rows_why_not(const char *name);
/* The row of an arithmetic operator ("+", "-", "*", "/", "neg"). */
const ad_row *ad_row_for_op(const char *op);
/* The name of the generated helper of a row for a type ("cr_ad_row_sin_f64"); marks it used. */
const char *ad_row_helper(const ad_row *r, bool is_float);
/* Writes the definitions of every helper used so far. */
void ad_rows_emit(ad_buf *out);

/* ---- Analysis ------------------------------------------------------------------------------- */

typedef struct ad_options {
    const char **wrt; /* --wrt names, or NULL */
    int nwrt;
    bool emit_rules;
} ad_options;

/* inline.c: calls of small straight-line static helpers replaced by their bodies, their
 * small arrays indexed only by constants replaced by scalars, and, in the functions that
 * inlined a call, locals declared where their value is made (after calls are resolved,
 * before normalisation). */
void ad_inline(ad_unit *u);
/* normalize.c: compound assignments and ++/-- made plain; calls of the file's functions
 * moved to statements of their own. */
void ad_normalize(ad_func *f);
/* analysis.c: resolves calls and finds the parameters each function writes (once). */
void ad_prepare(ad_unit *u);
/* Activity, needed values, exits, canonical loops and what to store, of f when the
 * parameters of `mask` have shadows (bit i: parameter i); `callee` for the split pair of a
 * function called from another (its arrays hold the caller's values). Nonzero on error
 * (reported). */
int ad_analyse(ad_unit *u, ad_func *f, uint64_t mask, bool callee);
/* The variables a loop's iterations write and that live across them (not the canonical
 * counter, not the body's own locals): the state a checkpoint saves. Their number, or -1
 * past `max`. */
int ad_loop_state(ad_stmt *loop, ad_var **out, int max);
/* Whether the adjoints of the simple statements after f's top-level statement `from` read no
 * value that those statements or statement `from` write (or may write through a pointer). */
bool ad_tail_independent(const ad_func *f, int from);
/* Whether a loop body holds a break that leaves the loop (nested: inside a loop of its own,
 * where breaks stay) or a return. */
bool ad_leaves_loop(const ad_stmt *s, bool nested);
/* Whether e is a place: a variable, an element, a field or a dereference. */
bool ad_is_place(const ad_expr *e);
/* The variable at the root of an lvalue or pointer expression, or NULL. */
ad_var *ad_root(const ad_expr *e);

/* ---- Code generation ------------------------------------------------------------------------ */

/* emit.c: the output file's beginning: the input with non-static function bodies cut. */
void ad_emit_preamble(const ad_unit *u, ad_buf *out);
/* Expression text of the primal (no derivative), with generated names. */
void ad_emit_expr(ad_buf *b, const ad_expr *e);
/* The same with the root variable of an lvalue replaced by its shadow + suffix. */
void ad_emit_shadow(ad_buf *b, const ad_expr *e, const char *suffix);
/* The two as strings (of the pool). */
char *ad_expr_text(const ad_expr *e);
char *ad_shadow_text(const ad_expr *e, const char *suffix);
/* The C type spelling of a variable's declaration with a name ("double t[16]"). */
void ad_emit_decl(ad_buf *b, const ad_type *t, const char *name);
/* The same without const (the locals of generated code are assigned after their
 * declaration, at the top of the function). */
void ad_emit_local(ad_buf *b, const ad_type *t, const char *name);
/* The same for a parameter of a generated definition: pointers are restrict (the
 * transformer assumes that pointer parameters do not alias). */
void ad_emit_param(ad_buf *b, const ad_type *t, const char *name);
/* The generated signature of f's derivative (mode 'r', 's' f_rev_set, 'f' or 'v'), no body. */
void ad_emit_signature(ad_buf *b, const ad_func *f, char mode);

/* prim.c: a `#pragma chainrules primitive(...)` line (the text after "chainrules"); nonzero
 * when malformed. */
int ad_prim_pragma(ad_unit *u, const char *q, unsigned line);
/* The same for `#pragma chainrules arrays(f) shape(...)`. */
int ad_arrays_pragma(ad_unit *u, const char *q, unsigned line);
/* Binds the primitives to the functions they name (after the functions are read); nonzero
 * on error (reported). */
int ad_prim_attach(ad_unit *u);
/* The wrappers of primitive g under mask: kind 0 the split pair (cr_ad_g_fw/bw), 1 the
 * tangent function, 2 the vector tangent function; declarations of users' rule
 * definitions go to decls. */
void ad_emit_prim(ad_buf *out, ad_buf *decls, const ad_func *g, uint64_t mask, int kind,
                  const char *mn);

/* mpi.c: the MPI functions whose calls are differentiated (their adjoint and tangent
 * communications): the kind of a name, or -1; binding a declaration as a primitive
 * (nonzero on error, reported); the shadows of a call (bit 63 always set: the wrappers run
 * on every rank); whether parameter i is a buffer; the wrappers (kind as ad_emit_prim). */
int ad_mpi_kind(const char *name);
int ad_mpi_bind(ad_func *g, int kind);
uint64_t ad_mpi_mask(const ad_expr *call);
bool ad_mpi_buffer(const ad_func *g, int i);
void ad_mpi_emit(ad_buf *out, ad_buf *decls, const ad_func *g, uint64_t mask, int kind,
                 const char *mn);
/* mpi.c: whether the forward sweep's call c (under mask) passes shadows (an MPI_Irecv of a
 * differentiated buffer: the adjoint of its wait sends the shadow); in a called function
 * (split) an error, reported. */
bool ad_mpi_fw_shadows(const ad_expr *c, uint64_t mask, bool split);
/* mpi.c: the text that ends a public reverse function's adjoint sweep: its stack failed
 * when an MPI derivative failed during the sweep (nothing where MPI is not used). */
const char *ad_mpi_sweep_end(void);
/* mpi.c: the text that begins a public reverse function: the MPI failure flag cleared, so
 * that a call reports only the failures of its own sweep (nothing where MPI is not used). */
const char *ad_mpi_sweep_begin(void);
/* normalize.c: an element of a const real pointer parameter read more than once by one
 * statement is read once into a new local before it (for --reverse-set: one contribution
 * to the element's shadow per statement). */
void ad_share_element_reads(ad_func *f);
/* analysis.c: whether the loop `loop` leaves every variable e reads unchanged. */
bool ad_loop_invariant(ad_stmt *loop, ad_expr *e);
/* mpi.c: whether a call names an MPI function the tool does not cover (then an error at
 * its line, reported). */
bool ad_mpi_refused(const ad_expr *call);
/* mpi.c: whether an MPI call passes a constant count of MPI_DOUBLE larger than an array of
 * known length it names (then an error at its line, reported). */
bool ad_mpi_counts_past(const ad_expr *call);

/* jacobian.c: the lengths --dims gives to array parameters (name=N or f.name=N), and the
 * --wrt names. */
typedef struct ad_jac_dims {
    const char **names;
    long long *lens;
    int n;
    const char **wrt;
    int nwrt;
} ad_jac_dims;
/* jacobian.c: f_jacfwd, the dense Jacobian of f's outputs with respect to the inputs of
 * `mask` by one forward sweep with static lane sparsity (after ad_analyse); nonzero on error
 * (reported). The signature alone goes to ad_emit_jacobian_signature. */
int ad_emit_jacobian(ad_buf *out, ad_unit *u, ad_func *f, uint64_t mask, const ad_jac_dims *dims);
void ad_emit_jacobian_signature(ad_buf *b, const ad_func *f);

/* rules.c: the rules of --emit-rules (each function's scalar rule row, its function value
 * `<f>_fn` and the registry function `regfn`); their declarations go to `decls`. Nonzero
 * on error (reported). */
int ad_emit_rules(ad_buf *out, ad_buf *decls, const ad_unit *u, ad_func **fs, int n,
                  const char *regfn);

#endif /* CR_AD_H */
