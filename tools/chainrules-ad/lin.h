/* chainrules-ad: linearisation of expressions (lin.c), shared by forward.c and reverse.c. */
#ifndef CR_AD_LIN_H
#define CR_AD_LIN_H

#include "ad.h"

typedef struct lin {
    ad_buf *out;      /* where the code goes */
    const char *ind;  /* indentation */
    int tmp;          /* the last temporary number used in the function */
    bool vector;      /* tangents of nd directions (k0_, k_, w_, nd in scope) */
    bool lane;        /* vector mode inside the loop over k_: a node's tangent is a scalar */
    const char *zero; /* a shadow still to be zeroed before the first contribution (or NULL) */
    bool unsupported; /* a construct the vector mode cannot write */
    bool param_lane;  /* a tangent of a pointer parameter was written (its lanes past w_ are
                         not the caller's to touch) */
    const char *klo;  /* lane ranges: lin_tangent_lanes loops over [klo, khi) (else [0, w_)) */
    const char *khi;
} lin;

/* Pass 1: writes the values and partials of e's active nodes; returns e's value as text. */
const char *lin_value(lin *l, ad_expr *e);
/* Pass 2: adds A times the derivative of e into the shadows of the places e reads. */
void lin_adjoint(lin *l, ad_expr *e, const char *A);
/* Adds A into the shadow of place e. While l->zero is set (the shadow of an assigned
 * place, which its adjoint zeroes), the first contribution resolves it: to that same
 * shadow it is an assignment (no `0 + A`, whose sign-of-zero rule keeps compilers from
 * removing a loop-carried addition); to another, the zero is written first. */
void lin_add_place(lin *l, const ad_expr *e, const char *A);
/* Writes the pending zero of l->zero, if any. */
void lin_flush_zero(lin *l);
/* After lin_value: the partials of e with respect to the distinct places it reads (in a
 * fixed order, places of the same text merged), written as temporaries when l->out is set.
 * Fills leaves[] and, if J is not NULL, J[] (the partials' texts); returns their number, or -1
 * past max. */
int lin_partials(lin *l, ad_expr *e, ad_expr **leaves, const char **J, int max);
/* After lin_value: the tangent of e as text (in vector mode, of direction k_). */
const char *lin_tangent(lin *l, ad_expr *e);
/* After lin_value: dst = tangent of e (vector mode: dst[k_] for every direction). */
void lin_tangent_assign(lin *l, ad_expr *e, const char *dst);
/* Vector mode, after lin_value: one loop over the directions that computes e's tangent
 * and stores it into `lane_dst` (a text indexed by k_); false (nothing written) when e
 * holds an active conditional expression, whose tangent needs the per-node form. When
 * `dst_local` (lane_dst is a local's tangent) and e reads no parameter array's tangent,
 * the loop runs over all CR_AD_VMAX lanes, a count known to the compiler (which then
 * vectorises it): the lanes past w_ of locals hold zeros (or NaN where a partial is
 * infinite), never stored into the caller's arrays. */
bool lin_tangent_lanes(lin *l, ad_expr *e, const char *lane_dst, bool dst_local);
/* The tangent of a place (a variable, element or field). */
const char *lin_place_tangent(lin *l, const ad_expr *e);

#endif /* CR_AD_LIN_H */
