/*
 * Private layout of prepared gradients (prepared.c, prepared_array.c): the replay tape's
 * records are turned once into a flat program of instructions, which each call evaluates
 * forwards (rows inline or through their function pointers, array functions through their
 * rrules) and sweeps back.
 */
#ifndef CR_PREPARED_IMPL_H
#define CR_PREPARED_IMPL_H

#include "tape_impl.h"

/* Instruction codes: the arithmetic rows first (one per row of CR__ARITH_ROWS, evaluated
 * inline), then any other row, inputs, comparisons and array functions. */
#define CR__ROP_ENUM(NAME, NIN, NOUT, PRIMAL, ...) CR__ROP_##NAME,
enum {
    CR__ARITH_ROWS(CR__ROP_ENUM) CR__ROP_ROW, /* any row, through its function pointer */
    CR__ROP_INPUT,                            /* a scalar input */
    CR__ROP_GUARD,                            /* a comparison made with cr_tape_cmp */
    CR__ROP_ARRAY                             /* an array function: its rrule is called again */
};
#undef CR__ROP_ENUM

/* One instruction: a record of the replay tape. */
typedef struct cr__rop {
    uint8_t code; /* CR__ROP_* */
    uint8_t nin;  /* a row's arguments */
    uint8_t o;    /* the row's result this record holds; a guard's cr_cmp */
    uint8_t nv;   /* an array function's scalar variables */
    uint32_t res; /* the variable it makes (the first one); a guard's record number */
    /* Argument j of a row (or a guard's operand): the variable it reads, or the slot of its
     * constant, after the variables in the workspace. An input: its position. */
    uint32_t src[CR_SCALAR_MAX_IN];
    double p[CR_SCALAR_MAX_IN]; /* the partials of the last evaluation, per argument */
    void *ptr;                  /* the row's replay information (rows, guards); the node */
} cr__rop;

struct cr_prepared {
    cr_ctx *ctx;
    cr_tape *tape;
    size_t n;      /* inputs (scalars, or arrays) */
    bool arrays;   /* prepared with cr_prepare_gradient_arrays */
    cr_var y;      /* the output */
    cr_var *xs;    /* scalar inputs (n, at least 1) */
    cr__rop *prog; /* the program, one instruction per record */
    size_t nprog;
    size_t ntop;  /* instructions up to the one that makes y */
    size_t nlead; /* leading inputs in order: variable j is input j */
    double *vals; /* workspace: variables' values, then the constants; then the adjoints */
    double *adj;
    size_t nws;          /* doubles of workspace */
    cr_array *ain;       /* array inputs as prepared (shape and dtype; data NULL) */
    uint32_t *aidx;      /* their array slots */
    cr_arena_mark mark;  /* the tape's arena after recording: rewound at each call */
    bool has_arrays;     /* the program calls rules (the arena is rewound) */
    uint32_t nres_slots; /* array variables made by array functions */
};

/* Call an array function's rrule again at the current values (instruction r): new pullback,
 * new result, checked against the recorded one. Errors go to the context. */
CR_INTERNAL cr_status cr__prepared_rerun(cr_prepared *p, const cr__rop *r, double *v);

/* Turn the tape's records into p's program and allocate the workspace. */
/* A zeroed prepared gradient for n inputs with an empty replay tape. *out is NULL when it
 * could not be allocated (CR_ENOMEM); with another failure status it is allocated but its
 * tape is NULL, and the caller frees it with cr_prepared_free(). */
CR_INTERNAL cr_status cr__prepared_new(cr_ctx *ctx, const cr_engine *eng, size_t n,
                                       cr_prepared **out);

CR_INTERNAL cr_status cr__prepared_build(cr_prepared *p);

/* Start a call: clear the tape's error, rewind its arena. */
CR_INTERNAL void cr__prepared_begin(cr_prepared *p);

/* Replay forwards (x: the scalar inputs, NULL for array inputs) and sweep back from y:
 * p->adj holds the scalar adjoints, the array slots' accumulators the array ones. */
CR_INTERNAL cr_status cr__prepared_run(cr_prepared *p, const double *x);

#endif /* CR_PREPARED_IMPL_H */
