/* chainrules-ad: the derivative functions to write (requests.c). */
#ifndef CR_AD_REQUESTS_H
#define CR_AD_REQUESTS_H

#include "ad.h"

typedef enum ad_req_kind {
    REQ_REV,   /* public f_rev */
    REQ_RSET,  /* public f_rev_set (its input shadows assigned) */
    REQ_FWD,   /* public f_fwd */
    REQ_FWDV,  /* public f_fwdv */
    REQ_SPLIT, /* cr_ad_f_fw<mask> + cr_ad_f_bw<mask> */
    REQ_TAN,   /* cr_ad_f_tan<mask> */
    REQ_TANV,  /* cr_ad_f_tanv<mask> */
    REQ_JAC    /* public f_jacfwd */
} ad_req_kind;

/* The shadows of a call's arguments: bit i when argument i is active at the call. */
uint64_t ad_call_mask(const ad_expr *call);
/* Asks for a derivative function of f under mask; returns the mask's name suffix ("_3"). */
const char *ad_request(ad_unit *u, ad_func *f, uint64_t mask, ad_req_kind kind);
/* Takes the next request not yet written, or returns 0. */
int ad_next_request(ad_func **f, uint64_t *mask, ad_req_kind *kind);

/* f_rev, or with `set` f_rev_set (nothing written, errors reported, when its shadows cannot
 * be assigned). */
void ad_emit_reverse_public(ad_buf *out, ad_unit *u, ad_func *f, bool set);
void ad_emit_reverse_split(ad_buf *out, ad_unit *u, ad_func *f, const char *mname);
void ad_emit_forward_fn(ad_buf *out, ad_unit *u, ad_func *f, const char *mname, bool vector,
                        bool public_fn);

#endif
