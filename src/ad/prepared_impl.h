/*
 * Private layout of prepared gradients (prepared.c, prepared_array.c, prepared_hvp.c, and the
 * scalar kind's replay, node_scalar_replay.c): the replay tape's records are turned once into
 * a flat program of instructions, which each call evaluates forwards and sweeps back. The
 * program is a sequence of *runs*, instructions of one node kind in a row: a kind that
 * compiles its records (the scalar rows, cr__replay_steps) runs a whole run in its own loops;
 * the others (array functions, rules kept as pullbacks) are called instruction by instruction
 * through their node kind's rerun and replay_pull steps (tape_impl.h).
 */
#ifndef CR_PREPARED_IMPL_H
#define CR_PREPARED_IMPL_H

#include <stdio.h>

#include "../rules/array_rule_impl.h"
#include "tape_impl.h"

/* Instruction codes: the arithmetic rows first (one per row of CR__ARITH_ROWS, evaluated
 * inline), then any other row, inputs, comparisons and array functions. */
#define CR__ROP_ENUM(NAME, NIN, NOUT, PRIMAL, ...) CR__ROP_##NAME,
enum {
    CR__ARITH_ROWS(CR__ROP_ENUM) CR__ROP_ROW, /* any row, through its function pointer */
    CR__ROP_INPUT,                            /* a scalar input */
    CR__ROP_GUARD,                            /* a comparison made with cr_tape_cmp */
    CR__ROP_ARRAY,                            /* an array function: its rrule is called again */
    CR__ROP_GENERIC /* a scalar function kept as a pullback: its rrule (or primal) again */
};
#undef CR__ROP_ENUM

/* One instruction: a record of the replay tape. */
typedef struct cr__rop {
    uint8_t code; /* CR__ROP_* */
    uint8_t nin;  /* a row's arguments */
    uint8_t o;    /* the row's result this record holds; a guard's cr_cmp */
    uint8_t nv;   /* an array function's scalar variables */
    uint32_t res; /* the variable it makes (the first one); a guard's record number */
    union {
        struct {
            /* Argument j of a row (or a guard's operand): the variable it reads, or the slot
             * of its constant, after the variables in the workspace. An input: its
             * position. */
            uint32_t src[CR_SCALAR_MAX_IN];
            double p[CR_SCALAR_MAX_IN]; /* the partials of the last evaluation, per argument */
        };
        /* An array function's or a GENERIC record's rrule, looked up once when preparing
         * (rrule NULL: none kept, cr_rrule() finds it at each call). */
        cr__rule_ref rule;
    };
    void *ptr; /* the row's replay information (rows, guards); the node (arrays); the
                  cr__greplay (GENERIC) */
} cr__rop;

/* One instruction of the first-order replay's compact program: its sources (8 bytes), and
 * a one-byte code per pass in arrays of their own (cr_prepared.fcodes, rcodes), so that a
 * pass reads 9 bytes an instruction; instruction k of prog is instruction k here, and its
 * result follows from its position. The arithmetic rows keep no partials: the reverse pass
 * evaluates the row's partials again at the stored values (constant ones fold away). An
 * arithmetic row's code also says where its operands are read (forward) or their adjoints
 * sent (reverse), memory or one of two registers (node_scalar_replay.c). Rows of one result and at
 * most two arguments and comparisons read their entries (cr__lrow, cr__lguard); every other
 * code reads its 64-byte instruction prog[k]. */
typedef struct cr__fop {
    uint32_t src[2]; /* the arguments' variables or constant slots; an input's position */
} cr__fop;

/* A row of one result and at most two arguments in the first-order replay's compact program
 * (codes FC_LROW / RC_LROW): the rows' entries lie in program order in their own array, which
 * the forward pass walks up and the reverse pass down with a cursor, so that a row's step
 * reads 24 bytes in sequence and no pointer into the replay tape (a cache miss per row). */
typedef struct cr__lrow {
    const cr_scalar_rule *row;
    double p[2]; /* the partials of the last evaluation (p[1]: a row of two arguments) */
} cr__lrow;

/* A comparison in the compact program (FC_LGUARD), walked with a cursor as the rows are;
 * its operands are the instruction's sources. */
typedef struct cr__lguard {
    uint32_t rec;    /* its record number, for messages */
    uint8_t cmp;     /* cr_cmp */
    uint8_t outcome; /* when recorded */
} cr__lguard;

/* Replay modes of a GENERIC record (cr__greplay.mode). */
enum {
    CR__GREPLAY_RRULE = 0, /* the rrule is called again; its pullback is the reverse step */
    CR__GREPLAY_PRIMAL = 1 /* zero-adjoint or non-differentiable: the primal, no derivative */
};

/* A GENERIC record of a replay tape (recorded by cr__replay_call): what its pullback needs
 * (node, the record's payload, whose pullback each replay replaces) and what evaluating the
 * call again needs. Both words of the record point here. */
typedef struct cr__greplay {
    cr__gen_node node;
    cr_value fv;               /* the function */
    cr_value *vals;            /* its arguments (constants as recorded; the tape's arena) */
    cr_value y;                /* the result when recorded (CR_KIND_NOTHING for a row) */
    const cr_scalar_rule *row; /* PRIMAL mode through a row, else NULL */
    const cr__impl *im;        /* PRIMAL mode through the overlay (no row, no primal), else NULL */
    uint8_t mode;              /* CR__GREPLAY_* */
    /* Prepared with cr_prepare_hvp (RRULE mode, with results): the partials and second
     * derivatives of the last evaluation, P[o*k + q] and H[(o*k + q)*k + l] (symmetrised)
     * for its k variable arguments (cr_prepared.gso). */
    double *so;
} cr__greplay;

/* Where a first-order pass stands between two runs (prepared.c hands it from one to the
 * next). Forwards: k is the next instruction and res the first variable it makes; backwards:
 * k is one past the next instruction to sweep and res one past the variables it makes. cur:
 * the compiled kind's cursors in its own arrays (the scalar kind's: its rows' entries and
 * its comparisons'), 0 at the start of a forward pass, rtop's at the start of a reverse one. */
typedef struct cr__rpos {
    size_t k;
    uint32_t res;
    uint32_t cur[2];
} cr__rpos;

/* A run of the program: instructions first up to the next run's first (or the end), all of
 * one node kind. */
typedef struct cr__prun {
    const cr__node_kind *kind;
    size_t first;
} cr__prun;

/* Where a record is compiled (cr__replay_steps.compile): the record at w (its header w[0],
 * its replay information w[1], its payload from w + 2), the variable it makes first (i), its
 * number (k), the inputs compiled before it (kin) and the constant slots so far (nc), which
 * the step advances; fill: write the constants' values into the workspace (the second walk),
 * else only count them. */
typedef struct cr__cpos {
    const cr__word *w;
    size_t i, k, kin, nc;
    bool fill;
} cr__cpos;

/* The steps of a node kind that compiles its records into the prepared program and replays
 * them in its own loops (cr__node_kind.replay; the scalar rows', node_scalar_replay.c).
 * compile: the record at s into instruction r. link: once the program of nrec instructions
 * is compiled (p->prog, p->runs), build what the passes read (the compact program, its codes, its
 * entries, rtop, nlead, compact). forward: the first-order forward pass from s over the run that
 * starts there (the inputs x), up to the first instruction of another kind (or the end), where s is
 * left; reverse: the reverse pass from s down over the run, up to the first instruction of
 * another kind or the reverse pass's first one. forward2 and reverse2: the H·v passes over
 * instructions [first, end) of p->prog (in: the inputs and dir the direction, when first is
 * 0). Failures go to the context. */
typedef struct cr__replay_steps {
    cr_status (*compile)(cr_prepared *p, cr__cpos *s, struct cr__rop *r);
    cr_status (*link)(cr_prepared *p, size_t nrec);
    cr_status (*forward)(cr_prepared *p, const double *x);
    cr_status (*reverse)(cr_prepared *p);
    cr_status (*forward2)(cr_prepared *p, size_t first, size_t end, const double *in,
                          const double *dir);
    cr_status (*reverse2)(cr_prepared *p, size_t first, size_t end);
} cr__replay_steps;

/* The scalar rows' (node_scalar_replay.c; cr__scalar_kind.replay). */
CR_INTERNAL extern const cr__replay_steps cr__scalar_replay;

struct cr_prepared {
    cr_ctx *ctx;
    cr_tape *tape; /* the replay tape; NULL once a lean program no longer needs it (below) */
    size_t n;      /* inputs (scalars, or arrays) */
    bool arrays;   /* prepared with cr_prepare_gradient_arrays */
    cr_var y;      /* the output */
    cr_var *xs;    /* scalar inputs (n, at least 1) */
    /* The program, one instruction per record. A first-order program of scalar inputs made
     * only of rows and comparisons that the compact program holds on its own (cr__lrow,
     * cr__lguard) is *lean*: once the compact program is built, prog and the replay tape
     * are released (prog NULL, tape NULL) and a call reads only fops, lrows, lguards and
     * the workspace. */
    cr__rop *prog;
    size_t nprog;
    cr__prun *runs; /* the program's runs (a lean program: one), in order */
    size_t nruns;   /* their number (0: an empty program; at least one allocated) */
    /* A program of one run of a compiled kind: that kind's steps, which the passes call
     * directly; else NULL. */
    const cr__replay_steps *solo;
    cr__fop *fops; /* the same program, compact, between two ends (first-order replay) */
    size_t nfops;  /* its allocated length */
    /* Their codes, one byte each: the forward pass's (fcodes), then the reverse pass's
     * (rcodes = fcodes + nfops), each read in a stream of its own; 2 nfops bytes. */
    uint8_t *fcodes, *rcodes;
    size_t ntop;         /* instructions up to the one that makes y */
    size_t nlead;        /* leading inputs in order: variable j is input j */
    cr__lrow *lrows;     /* rows of the compact program (cr__lrow), in program order */
    size_t nlrows;       /* their number */
    cr__rpos rtop;       /* where the reverse pass starts: after the instruction making y */
    cr__rpos pos;        /* where a pass stands between two runs (kept here: no register) */
    bool compact;        /* the compact program holds every compiled instruction (lean) */
    bool lean;           /* a lean program (prog above) */
    uint32_t nvar;       /* the recording's variables (constant slots follow them) */
    cr__lguard *lguards; /* comparisons of the compact program, in program order */
    size_t nlguards;     /* their number */
    double *vals;        /* workspace: variables' values, then the constants; then the adjoints */
    double *adj;
    size_t nws;          /* doubles of workspace */
    cr_array *ain;       /* array inputs as prepared (shape and dtype; data NULL) */
    uint32_t *aidx;      /* their array slots */
    cr_arena_mark mark;  /* the tape's arena after recording: rewound at each call */
    bool has_arrays;     /* the program calls rules (the arena is rewound) */
    uint32_t nres_slots; /* array variables made by array functions */
    /* Prepared with cr_prepare_hvp (prepared_hvp.c): the variables' tangents along the
     * direction (constant slots stay 0), then the adjoints' tangents; ntan doubles. */
    double *tan;
    size_t ntan;
    /* cr_prepare_hvp(_arrays) of a program with array functions: per instruction, the
     * result recorded (nd->y), which the second-order forms read at the new values during a
     * call and which is put back after it; NULL otherwise. */
    cr_value *yrec;
    /* cr_prepare_hvp(_arrays) of a program with rules kept as pullbacks: their second-order
     * data (cr__greplay.so), ngso doubles; NULL otherwise. */
    double *gso;
    size_t ngso;
};

/* "f64 3x4" into buf, for messages. */
static inline const char *cr__dtype_shape_str(const cr_array *a, char *buf, size_t size)
{
    char s[64];
    snprintf(buf, size, "%s %s", cr_dtype_name((cr_dtype)a->dtype), cr__shape_str(a, s, sizeof s));
    return buf;
}

/* Whether a and b (of the same ndim) have the same extents: a loop over a few dimensions,
 * cheaper than a call of memcmp. */
static inline bool cr__same_extents(const cr_array *a, const cr_array *b)
{
    for (size_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

/* The node kind of an array or GENERIC instruction, whose steps replay it (tape_impl.h,
 * cr__node_kind). */
static inline const cr__node_kind *cr__rop_kind(const cr__rop *r)
{
    return r->code == CR__ROP_GENERIC ? &cr__generic_kind : &cr__array_kind;
}

/* Look up, once, the rrule an array or GENERIC instruction calls at each replay: the
 * arguments' kinds cannot change between calls (array inputs are checked for dtype and
 * shape, the rules' array results for dtype, shape and structure, scalars are f64,
 * constants keep their values), so neither can the rule. Leaves r->rule.rrule NULL when the
 * lookup does not give a rule (the replay then calls cr_rrule()). */
CR_INTERNAL void cr__prepared_resolve(cr_prepared *p, cr__rop *r, const cr_value *f,
                                      const cr_value *vals, size_t nargs);

/* Turn the tape's records into p's program and allocate the workspace. */
/* A zeroed prepared gradient for n inputs with an empty replay tape. *out is NULL when it
 * could not be allocated (CR_ENOMEM); with another failure status it is allocated but its
 * tape is NULL, and the caller frees it with cr_prepared_free(). */
CR_INTERNAL cr_status cr__prepared_new(cr_ctx *ctx, const cr_engine *eng, size_t n, bool second,
                                       cr_prepared **out);

CR_INTERNAL cr_status cr__prepared_build(cr_prepared *p);

/* Record f at x on a new prepared gradient's replay tape and build its program, as
 * cr_prepare_gradient() does; messages name who. second: the tape refuses, when recording,
 * array functions and kernels without a second-order form (CR__TAPE_SO_CHECK). */
CR_INTERNAL cr_status cr__prepare_scalar(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                                         const double *x, size_t n, const char *who, bool second,
                                         cr_prepared **out);

/* The same for array inputs, as cr_prepare_gradient_arrays() does. */
CR_INTERNAL cr_status cr__prepare_arrays(cr_ctx *ctx, const cr_engine *eng, cr_ad_array_fn f,
                                         void *env, const cr_array *const *xs, size_t n,
                                         const char *who, bool second, cr_prepared **out);

/* Check the n array inputs xs of a call of p (shape and dtype as prepared, data) and the
 * arrays outs[j] (what: "gradient array", ...; one per input, as many elements as it; NULL
 * outs: none). Errors on the context, naming who. */
CR_INTERNAL cr_status cr__prepared_check_arrays(cr_prepared *p, const char *who,
                                                const cr_array *const *xs, size_t n,
                                                cr_array *const *outs, const char *what);

/* Start a call: clear the tape's error, rewind its arena. */
CR_INTERNAL void cr__prepared_begin(cr_prepared *p);

/* Replay forwards (x: the scalar inputs, NULL for array inputs) and sweep back from y:
 * p->adj holds the scalar adjoints, the array slots' accumulators the array ones. */
CR_INTERNAL cr_status cr__prepared_run(cr_prepared *p, const double *x);

#endif /* CR_PREPARED_IMPL_H */
