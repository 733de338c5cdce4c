/*
 * MPI calls in the input (mpi.c): the non-blocking requests (MPI_Isend, MPI_Irecv, their
 * persistent forms and every completion), mapped to their derivative messages by a table in
 * the generated file; the agreement between the ranks on the collectives' counts.
 */
#include <stdlib.h>
#include <string.h>

#include "ad.h"
#include "mpi.h"

/* ---- Non-blocking requests ---------------------------------------------------------------- */

/* The map from the user's request objects to the derivative messages, in the generated
 * file once (before the first wrapper that uses it). A request object is known by its
 * address, as the calls pass it: MPI_Isend / MPI_Irecv(..., &r) make an entry, the
 * MPI_Wait(&r) or MPI_Waitall(n, r) that completes it finds and removes it. Three phases
 * keep their entries apart: 0 the forward sweep of the reverse mode (what the adjoint will
 * need: kind, count, actual partner and tag, communicator, the shadow of a receive's
 * buffer, pushed on the value stack at the wait), 1 its adjoint sweep (the adjoint message
 * posted at the wait's adjoint, completed at the post's adjoint), 2 the forward (tangent)
 * mode (the tangent message posted with the primal one, completed at its wait). */
static const char *const k_runtime[] = {
    "/* chainrules-ad: the user's MPI requests and their derivative messages */\n"
    "typedef struct cr_ad_mreq_ {\n"
    "    const void *key; /* the user's request object */\n"
    "    int phase, kind, count, peer, tag, fail, deferred;\n"
    "    int orig; /* a tangent receive's count as posted (count: 0 for another datatype) */\n"
    "    MPI_Comm comm;\n"
    "    MPI_Datatype type; /* a receive's, for its count */\n"
    "    double *shadow, *tmp;\n"
    "    double *buf; /* a persistent request's buffer (its template) */\n"
    "    MPI_Request dreq;\n"
    "} cr_ad_mreq_;\n",
    "static cr_ad_mreq_ *cr_ad_mreqs_;\n"
    "static int cr_ad_nmreqs_, cr_ad_capmreqs_;\n\n"
    "static inline cr_ad_mreq_ *cr_ad_mreq_add_(const void *key, int phase, int kind, int count,\n"
    "                                    int tmp)\n{\n"
    "    if (cr_ad_nmreqs_ == cr_ad_capmreqs_) {\n"
    "        const int cap = cr_ad_capmreqs_ ? 2 * cr_ad_capmreqs_ : 16;\n"
    "        cr_ad_mreq_ *p = realloc(cr_ad_mreqs_, (size_t)cap * sizeof *p);\n"
    "        if (!p)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n"
    "        cr_ad_mreqs_ = p;\n        cr_ad_capmreqs_ = cap;\n    }\n"
    "    cr_ad_mreq_ *e = &cr_ad_mreqs_[cr_ad_nmreqs_++];\n"
    "    memset(e, 0, sizeof *e);\n"
    "    e->key = key;\n    e->phase = phase;\n    e->kind = kind;\n"
    "    e->count = count > 0 ? count : 0;\n    e->dreq = MPI_REQUEST_NULL;\n"
    "    e->comm = MPI_COMM_NULL;\n"
    "    if (tmp) {\n"
    "        e->tmp = calloc((size_t)(e->count > 0 ? e->count : 1), sizeof(double));\n"
    "        if (!e->tmp)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n    }\n"
    "    return e;\n}\n\n",
    "static inline cr_ad_mreq_ *cr_ad_mreq_find_(const void *key, int phase)\n{\n"
    "    for (int i = cr_ad_nmreqs_; i-- > 0;)\n"
    "        if (cr_ad_mreqs_[i].key == key && cr_ad_mreqs_[i].phase == phase)\n"
    "            return &cr_ad_mreqs_[i];\n"
    "    return NULL;\n}\n\n",
    "static inline void cr_ad_mreq_del_(cr_ad_mreq_ *e)\n{\n"
    "    free(e->tmp);\n"
    "    const int i = (int)(e - cr_ad_mreqs_);\n"
    "    memmove(e, e + 1, (size_t)(cr_ad_nmreqs_ - 1 - i) * sizeof *e);\n"
    "    if (--cr_ad_nmreqs_ == 0) {\n"
    "        free(cr_ad_mreqs_);\n        cr_ad_mreqs_ = NULL;\n        cr_ad_capmreqs_ = 0;\n"
    "    }\n}\n\n",
    "/* the elements a completed receive got (its count when from MPI_PROC_NULL) and whether\n"
    " * they are the count posted, without an error (rc: the wait's) */\n"
    "static inline int cr_ad_mreq_got_(const cr_ad_mreq_ *e, const MPI_Status *s, int rc, int "
    "*got)\n"
    "{\n"
    "    int c = e->count;\n"
    "    if (e->type != MPI_DOUBLE) { /* no derivative: nothing to send back */\n"
    "        *got = 0;\n        return rc == MPI_SUCCESS;\n    }\n"
    "    if (s->MPI_SOURCE != MPI_PROC_NULL &&\n"
    "        (MPI_Get_count(s, e->type, &c) != MPI_SUCCESS || c == MPI_UNDEFINED || c < 0))\n"
    "        c = e->count;\n"
    "    *got = c < e->count ? c : e->count;\n"
    "    return rc == MPI_SUCCESS && c == e->count;\n}\n\n",
    "/* forward sweep: the request at key completed (status s, rc its error or MPI_SUCCESS);\n"
    " * what its adjoint needs */\n"
    "static inline void cr_ad_mreq_fw_wait_(cr_adstack *stp_, const void *key, const MPI_Status "
    "*s,\n"
    "                                int rc)\n{\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 0);\n"
    "    if (!e) {\n        cr_adstack_push_i64(stp_, 0); /* not a request of the wrappers */\n"
    "        return;\n    }\n"
    "    int got = e->count, ok = rc == MPI_SUCCESS;\n"
    "    if (e->kind == 2)\n        ok = cr_ad_mreq_got_(e, s, rc, &got);\n"
    "    cr_adstack_push_ptr(stp_, e->shadow);\n"
    "    cr_adstack_push_i64(stp_, e->count);\n"
    "    cr_adstack_push_i64(stp_, got);\n"
    "    cr_adstack_push_i64(stp_, ok);\n"
    "    cr_adstack_push_i64(stp_, e->kind == 2 ? s->MPI_SOURCE : e->peer);\n"
    "    cr_adstack_push_i64(stp_, e->kind == 2 ? s->MPI_TAG : e->tag);\n"
    "    cr_adstack_push_i64(stp_, (int64_t)MPI_Comm_c2f(e->comm));\n"
    "    cr_adstack_push_i64(stp_, e->kind);\n"
    "    cr_ad_mreq_del_(e);\n}\n\n",
    "/* adjoint sweep of a wait: post the adjoint message (an isend's: a receive of the\n"
    " * adjoint; an irecv's: a send of the adjoint of the elements it got, which is then zero;\n"
    " * empty when the receive got another count or failed, so that the sender's derivative\n"
    " * fails too) */\n"
    "static inline void cr_ad_mreq_bw_wait_(cr_adstack *stp_, const void *key)\n{\n"
    "    const int kind = (int)cr_adstack_pop_i64(stp_);\n"
    "    if (kind == 0)\n        return;\n"
    "    const MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)cr_adstack_pop_i64(stp_));\n"
    "    const int tag = (int)cr_adstack_pop_i64(stp_);\n"
    "    const int peer = (int)cr_adstack_pop_i64(stp_);\n"
    "    const int ok = (int)cr_adstack_pop_i64(stp_);\n"
    "    const int got = (int)cr_adstack_pop_i64(stp_);\n"
    "    const int count = (int)cr_adstack_pop_i64(stp_);\n"
    "    double *shadow = cr_adstack_pop_ptr(stp_);\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_add_(key, 1, kind, count, 1);\n"
    "    e->peer = peer;\n"
    "    if (peer == MPI_PROC_NULL) /* no message, and the buffer was kept */\n"
    "        return;\n"
    "    if (kind == 1) {\n"
    "        MPI_Irecv(e->tmp, count, MPI_DOUBLE, peer, tag, comm, &e->dreq);\n"
    "        return;\n    }\n"
    "    for (int i = 0; i < got; i++) {\n"
    "        e->tmp[i] = shadow ? shadow[i] : 0;\n"
    "        if (shadow)\n            shadow[i] = 0;\n    }\n"
    "    if (!ok)\n        cr_ad_mpi_failed_ = 1;\n"
    "    MPI_Isend(e->tmp, ok ? got : 0, MPI_DOUBLE, peer, tag, comm, &e->dreq);\n}\n\n",
    "/* adjoint sweep of an isend or irecv: its adjoint message completes (an isend's is\n"
    " * added into the shadow of its buffer: NaN when it has another count) */\n"
    "static inline void cr_ad_mreq_bw_post_(cr_adstack *stp_, const void *key, double *shadow)\n{\n"
    "    (void)stp_;\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 1);\n"
    "    if (!e) { /* never completed in the primal: no adjoint */\n"
    "        cr_ad_mpi_failed_ = 1;\n        return;\n    }\n"
    "    if (e->peer == MPI_PROC_NULL) { /* nothing came, nothing to add */\n"
    "        cr_ad_mreq_del_(e);\n        return;\n    }\n"
    "    MPI_Status s;\n"
    "    const int rc = MPI_Wait(&e->dreq, &s);\n"
    "    int c = e->count;\n"
    "    if (e->kind == 1 && s.MPI_SOURCE != MPI_PROC_NULL &&\n"
    "        MPI_Get_count(&s, MPI_DOUBLE, &c) != MPI_SUCCESS)\n        c = -1;\n"
    "    if (e->kind == 1 && (rc != MPI_SUCCESS || c != e->count))\n"
    "        cr_ad_mpi_failed_ = 1;\n"
    "    if (e->kind == 1 && shadow)\n"
    "        for (int i = 0; i < e->count; i++)\n"
    "            shadow[i] += rc == MPI_SUCCESS && c == e->count ? e->tmp[i] : (double)NAN;\n"
    "    cr_ad_mreq_del_(e);\n}\n\n",
    "/* forward mode: the tangent message of the request at key completes (status s and rc\n"
    " * the primal's: a receive posted with wildcards takes its tangent from the actual source\n"
    " * and tag); the tangents NaN when the primal or the tangent message had another count */\n"
    "static inline void cr_ad_mreq_tan_wait_(const void *key, const MPI_Status *s, int rc)\n{\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 2);\n"
    "    if (!e)\n        return;\n"
    "    double *dst = e->shadow ? e->shadow : e->tmp;\n"
    "    int got = e->count, ok = e->kind != 2 || cr_ad_mreq_got_(e, s, rc, &got);\n"
    "    MPI_Status ts;\n"
    "    int trc, c = e->count;\n"
    "    if (e->deferred)\n"
    "        trc = MPI_Recv(dst, e->count, MPI_DOUBLE, s->MPI_SOURCE, s->MPI_TAG, e->comm, &ts);\n"
    "    else\n        trc = MPI_Wait(&e->dreq, &ts);\n"
    "    if (e->kind == 2 && ts.MPI_SOURCE != MPI_PROC_NULL &&\n"
    "        (trc != MPI_SUCCESS || MPI_Get_count(&ts, MPI_DOUBLE, &c) != MPI_SUCCESS))\n"
    "        c = -1;\n"
    "    if (e->kind == 2 && (e->fail || !ok || c != e->count) && e->shadow) {\n"
    "        for (int i = 0; i < e->count; i++)\n            e->shadow[i] = (double)NAN;\n"
    "        if (e->orig > 0) /* another datatype: its first element at least */\n"
    "            e->shadow[0] = (double)NAN;\n    }\n"
    "    cr_ad_mreq_del_(e);\n}\n\n",
    "/* persistent requests: the template of an init (phase 3 in the reverse mode, 4 in the\n"
    " * forward mode) */\n"
    "static inline void cr_ad_mreq_init_(const void *key, int phase, int kind, void *buf, int "
    "count,\n"
    "                                    MPI_Datatype type, int peer, int tag, MPI_Comm comm,\n"
    "                                    double *shadow, int fail)\n{\n"
    "    const int dbl = type == MPI_DOUBLE && !fail;\n"
    "    cr_ad_mreq_ *t = cr_ad_mreq_add_(key, phase, kind, dbl ? count : 0, 0);\n"
    "    t->buf = dbl ? (double *)buf : NULL;\n"
    "    t->type = type;\n    t->peer = peer;\n    t->tag = tag;\n    t->comm = comm;\n"
    "    t->shadow = dbl ? shadow : NULL;\n    t->fail = fail;\n    t->orig = count;\n}\n\n",
    "static inline void cr_ad_mreq_uninit_(const void *key, int phase)\n{\n"
    "    cr_ad_mreq_ *t = cr_ad_mreq_find_(key, phase);\n"
    "    if (t)\n        cr_ad_mreq_del_(t);\n}\n\n",
    "/* forward sweep of a start: the buffer of a receive saved, the request posted as an\n"
    " * isend or irecv would be (1 pushed; 0: not a template of the wrappers) */\n"
    "static inline void cr_ad_mreq_fw_start_(cr_adstack *stp_, const void *key)\n{\n"
    "    const cr_ad_mreq_ *t = cr_ad_mreq_find_(key, 3);\n"
    "    if (!t) {\n        cr_adstack_push_i64(stp_, 0);\n        return;\n    }\n"
    "    const cr_ad_mreq_ c = *t; /* (the table may move) */\n"
    "    for (int i = 0; c.kind == 2 && c.buf && i < c.count; i++)\n"
    "        cr_adstack_push_f64(stp_, c.buf[i]);\n"
    "    cr_adstack_push_i64(stp_, c.kind == 2 && c.buf ? c.count : 0);\n"
    "    cr_adstack_push_i64(stp_, 1);\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_add_(key, 0, c.kind, c.count, 0);\n"
    "    e->peer = c.peer;\n    e->tag = c.tag;\n    e->comm = c.comm;\n    e->type = c.type;\n"
    "    e->shadow = c.kind == 2 ? c.shadow : NULL;\n}\n\n",
    "/* adjoint sweep of a start: its adjoint message completes (a send's added into the\n"
    " * shadow of its buffer), a receive's buffer restored */\n"
    "static inline void cr_ad_mreq_bw_start_(cr_adstack *stp_, const void *key)\n{\n"
    "    if (!cr_adstack_pop_i64(stp_))\n        return;\n"
    "    const cr_ad_mreq_ *t = cr_ad_mreq_find_(key, 3);\n"
    "    double *buf = t ? t->buf : NULL, *shadow = t && t->kind == 1 ? t->shadow : NULL;\n"
    "    cr_ad_mreq_bw_post_(stp_, key, shadow);\n"
    "    for (int i = (int)cr_adstack_pop_i64(stp_); i-- > 0;) {\n"
    "        const double v = cr_adstack_pop_f64(stp_);\n"
    "        if (buf)\n            buf[i] = v;\n    }\n}\n\n",
    "/* forward sweep of MPI_Request_free: an active request completes here for its adjoint\n"
    " * (a send exactly; a receive, whose data arrive at an unknown point, fails the\n"
    " * derivative with an empty adjoint message), a template is saved and removed */\n"
    "static inline void cr_ad_mreq_fw_free_(cr_adstack *stp_, const void *key)\n{\n"
    "    const cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 0);\n"
    "    if (e) {\n"
    "        MPI_Status s;\n        memset(&s, 0, sizeof s);\n"
    "        s.MPI_SOURCE = e->peer == MPI_ANY_SOURCE ? MPI_PROC_NULL : e->peer;\n"
    "        s.MPI_TAG = e->tag;\n"
    "        MPI_Status_set_elements(&s, MPI_DOUBLE, 0);\n"
    "        cr_ad_mreq_fw_wait_(stp_, key, &s, e->kind == 1 ? MPI_SUCCESS : MPI_ERR_REQUEST);\n"
    "    }\n"
    "    cr_adstack_push_i64(stp_, e != NULL);\n"
    "    const cr_ad_mreq_ *t = cr_ad_mreq_find_(key, 3);\n"
    "    if (t) {\n"
    "        cr_adstack_push_ptr(stp_, t->buf);\n        cr_adstack_push_ptr(stp_, t->shadow);\n"
    "        cr_adstack_push_i64(stp_, t->count);\n        cr_adstack_push_i64(stp_, t->peer);\n"
    "        cr_adstack_push_i64(stp_, t->tag);\n"
    "        cr_adstack_push_i64(stp_, (int64_t)MPI_Comm_c2f(t->comm));\n"
    "        cr_adstack_push_i64(stp_, (int64_t)MPI_Type_c2f(t->type));\n"
    "        cr_adstack_push_i64(stp_, t->kind);\n"
    "        cr_ad_mreq_del_((cr_ad_mreq_ *)t);\n    }\n"
    "    cr_adstack_push_i64(stp_, t != NULL);\n}\n\n",
    "static inline void cr_ad_mreq_bw_free_(cr_adstack *stp_, const void *key)\n{\n"
    "    if (cr_adstack_pop_i64(stp_)) { /* the template again */\n"
    "        const int kind = (int)cr_adstack_pop_i64(stp_);\n"
    "        const MPI_Datatype type = MPI_Type_f2c((MPI_Fint)cr_adstack_pop_i64(stp_));\n"
    "        const MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)cr_adstack_pop_i64(stp_));\n"
    "        const int tag = (int)cr_adstack_pop_i64(stp_);\n"
    "        const int peer = (int)cr_adstack_pop_i64(stp_);\n"
    "        const int count = (int)cr_adstack_pop_i64(stp_);\n"
    "        double *shadow = cr_adstack_pop_ptr(stp_);\n"
    "        double *buf = cr_adstack_pop_ptr(stp_);\n"
    "        cr_ad_mreq_ *t = cr_ad_mreq_add_(key, 3, kind, count, 0);\n"
    "        t->buf = buf;\n        t->shadow = shadow;\n        t->peer = peer;\n"
    "        t->tag = tag;\n        t->comm = comm;\n        t->type = type;\n    }\n"
    "    if (cr_adstack_pop_i64(stp_)) /* an active request: as at its wait */\n"
    "        cr_ad_mreq_bw_wait_(stp_, key);\n}\n\n",
    "/* forward mode: a start posts the tangent message beside the primal one */\n"
    "static inline void cr_ad_mreq_tan_start_(const void *key)\n{\n"
    "    const cr_ad_mreq_ *t = cr_ad_mreq_find_(key, 4);\n"
    "    if (!t)\n        return;\n"
    "    const cr_ad_mreq_ c = *t; /* (the table may move) */\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_add_(key, 2, c.kind, c.count, 1);\n"
    "    e->comm = c.comm;\n"
    "    if (c.kind == 1) {\n"
    "        if (c.shadow)\n"
    "            memcpy(e->tmp, c.shadow, (size_t)c.count * sizeof(double));\n"
    "        MPI_Isend(e->tmp, c.count, MPI_DOUBLE, c.peer, c.tag, c.comm, &e->dreq);\n"
    "        return;\n    }\n"
    "    e->shadow = c.shadow;\n    e->fail = c.fail;\n    e->orig = c.orig;\n    e->type = "
    "c.type;\n"
    "    if (c.peer == MPI_ANY_SOURCE || c.tag == MPI_ANY_TAG)\n        e->deferred = 1;\n"
    "    else\n"
    "        MPI_Irecv(e->shadow && !e->fail ? e->shadow : e->tmp, e->count, MPI_DOUBLE, c.peer,\n"
    "                  c.tag, c.comm, &e->dreq);\n}\n\n",
    "/* forward mode of MPI_Request_free: an active request's tangent message completes here\n"
    " * (MPI_Wait: the program must not need the free to return before its partner posts\n"
    " * the matching call); a template is removed */\n"
    "static inline void cr_ad_mreq_tan_free_(const void *key)\n{\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 2);\n"
    "    if (e) {\n"
    "        if (e->deferred)\n            e->fail = 1;\n"
    "        else\n            MPI_Wait(&e->dreq, MPI_STATUS_IGNORE);\n"
    "        if (e->kind == 2 && e->shadow)\n"
    "            for (int i = 0; i < e->count; i++)\n                e->shadow[i] = (double)NAN;\n"
    "        cr_ad_mreq_del_(e);\n    }\n"
    "    cr_ad_mreq_uninit_(key, 4);\n}\n\n",
    NULL};

/* The agreement of a blocking collective, before its primal call (every rank, in the
 * forward sweep of the reverse mode and in the forward mode): the ranks' byte counts
 * (count times MPI_Type_size) must be the same, the root's per-rank count (rn) equal to
 * each rank's, and each count times mul (the ranks, for the buffers of gathers, scatters and
 * alltoalls) must fit an int. When they do not, every rank learns it here, the call is
 * made with every count 0 (matched, nothing moved) and returns MPI_ERR_COUNT, and the
 * derivative fails: a rank with the wrong count would otherwise leave its partners
 * waiting or be written past its buffer, in the primal or in the adjoint. */
static const char k_agree[] =
    "/* chainrules-ad: the ranks agree on a collective's sizes before it (1: they do) */\n"
    "static inline int cr_ad_mpi_agree_(MPI_Comm comm, int mul, int sn, MPI_Datatype st,\n"
    "                                   int has_r, int rn, MPI_Datatype rt)\n{\n"
    "    int ss = 0, rs = 0, bad = sn < 0 || MPI_Type_size(st, &ss) != MPI_SUCCESS;\n"
    "    if (has_r)\n"
    "        bad |= rn < 0 || MPI_Type_size(rt, &rs) != MPI_SUCCESS;\n"
    "    const int64_t lim = (int64_t)(~0u >> 1) / (mul > 0 ? mul : 1); /* INT_MAX / mul */\n"
    "    bad |= sn > lim || (has_r && rn > lim);\n"
    "    const int64_t s = bad ? 0 : (int64_t)sn * ss, r = bad ? 0 : (int64_t)rn * rs;\n"
    "    int64_t v[5] = {bad, s, -s, has_r ? r : INT64_MIN, has_r ? -r : INT64_MIN};\n"
    "    if (MPI_Allreduce(MPI_IN_PLACE, v, 5, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS)\n"
    "        return 0;\n"
    "    return v[0] == 0 && v[1] == -v[2] &&\n"
    "           (v[3] == INT64_MIN || (v[3] == -v[4] && v[3] == v[1]));\n}\n\n";

/* The same for the v variants: the root's count for each rank (every rank's counts, for
 * allgatherv) against that rank's own, in bytes, by an MPI_Scatter (MPI_Allgather) of
 * int64_t and an MPI_Allreduce of the outcome; counts and displacements not negative, the
 * extent they address (*ext, the rank's, where it has them) within an int. */
static const char k_vagree[] =
    "/* chainrules-ad: a count in bytes (-2: a negative count or no datatype size) */\n"
    "static inline int64_t cr_ad_mpi_bytes_(int n, MPI_Datatype t)\n{\n"
    "    int ts = 0;\n"
    "    return n < 0 || MPI_Type_size(t, &ts) != MPI_SUCCESS ? -2 : (int64_t)n * ts;\n}\n\n"
    "/* chainrules-ad: the ranks agree on a v variant's counts (1: they do); own: this rank's\n"
    " * bytes (-1: in place), cnt and dsp of type t at the root (at every rank: all) */\n"
    "static inline int cr_ad_mpi_vagree_(MPI_Comm comm, int root, int all, int64_t own,\n"
    "                                    const int *cnt, const int *dsp, MPI_Datatype t,\n"
    "                                    int64_t *ext)\n{\n"
    "    int rank = 0, size = 1, ts = 0, bad = 0, rc = MPI_SUCCESS;\n"
    "    MPI_Comm_rank(comm, &rank);\n    MPI_Comm_size(comm, &size);\n"
    "    int64_t *e = malloc((size_t)(size > 0 ? size : 1) * sizeof *e), mine = -1;\n"
    "    int64_t *b = malloc((size_t)(size > 0 ? size : 1) * sizeof *b);\n"
    "    if (!e || !b)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n"
    "    *ext = 0;\n"
    "    if (all || rank == root) {\n"
    "        bad = !cnt || !dsp || MPI_Type_size(t, &ts) != MPI_SUCCESS;\n"
    "        for (int q = 0; q < size; q++) {\n"
    "            e[q] = bad ? -3 : (int64_t)cnt[q] * ts;\n"
    "            if (!bad && (cnt[q] < 0 || dsp[q] < 0))\n                bad = 1;\n"
    "            if (!bad && cnt[q] > 0 && (int64_t)dsp[q] + cnt[q] > *ext)\n"
    "                *ext = (int64_t)dsp[q] + cnt[q];\n        }\n"
    "        bad |= *ext > (int64_t)(~0u >> 1); /* INT_MAX */\n    }\n"
    "    if (all) {\n"
    "        rc = MPI_Allgather(&own, 1, MPI_INT64_T, b, 1, MPI_INT64_T, comm);\n"
    "        for (int q = 0; rc == MPI_SUCCESS && q < size; q++)\n"
    "            bad |= b[q] != -1 && b[q] != e[q];\n"
    "    } else {\n"
    "        rc = MPI_Scatter(e, 1, MPI_INT64_T, &mine, 1, MPI_INT64_T, root, comm);\n"
    "        bad |= own != -1 && own != mine;\n    }\n"
    "    bad |= rc != MPI_SUCCESS;\n"
    "    free(e);\n    free(b);\n"
    "    int any = 1;\n"
    "    if (MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)\n"
    "        any = 1;\n"
    "    return !any;\n}\n\n";

static bool g_runtime_done, g_flag_done, g_agree_done, g_vagree_done;

/* The agreement of a v variant (k_vagree) as agreed_, with ext0_ the extent of the rank's
 * result as given; where the ranks disagree, fail (a statement, run unless NULL) and every
 * count and displacement 0 (zc_, freed by the caller). */
void mpi_v_agree(ad_buf *o, int kind, const char *comm, const char *fail)
{
    if (kind == K_GATHERV)
        ad_buf_printf(
            o,
            "    int64_t ext0_ = 0;\n"
            "    const int agreed_ = cr_ad_mpi_vagree_(%s, a7_, 0, rank_ == a7_ && a0_ == "
            "MPI_IN_PLACE ? -1 : cr_ad_mpi_bytes_(a1_, a2_), a4_, a5_, a6_, &ext0_);\n",
            comm);
    else if (kind == K_SCATTERV)
        ad_buf_printf(
            o,
            "    int64_t ext0_ = 0;\n"
            "    const int agreed_ = cr_ad_mpi_vagree_(%s, a7_, 0, rank_ == a7_ && a4_ == "
            "MPI_IN_PLACE ? -1 : cr_ad_mpi_bytes_(a5_, a6_), a1_, a2_, a3_, &ext0_);\n"
            "    ext0_ = rank_ == a7_ && a4_ == MPI_IN_PLACE ? 0 : a5_;\n",
            comm);
    else
        ad_buf_printf(
            o,
            "    int64_t ext0_ = 0;\n"
            "    const int agreed_ = cr_ad_mpi_vagree_(%s, 0, 1, a0_ == MPI_IN_PLACE ? -1 "
            ": cr_ad_mpi_bytes_(a1_, a2_), a4_, a5_, a6_, &ext0_);\n",
            comm);
    ad_buf_put(o, "    (void)ext0_;\n    int *zc_ = NULL;\n    if (!agreed_) {\n");
    if (fail)
        ad_buf_printf(o, "        %s;\n", fail);
    mpi_v_zero(o, kind);
    ad_buf_put(o, "    }\n");
}

/* The counts and displacements of a v variant whose ranks disagree: 0 (zc_). */
void mpi_v_zero(ad_buf *o, int kind)
{
    ad_buf_put(o, "        zc_ = calloc((size_t)(size_ > 0 ? size_ : 1), sizeof *zc_);\n"
                  "        if (!zc_)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n");
    if (kind == K_SCATTERV)
        ad_buf_put(o, "        a5_ = 0;\n        a1_ = zc_;\n        a2_ = zc_;\n");
    else
        ad_buf_put(o, "        a1_ = 0;\n        a4_ = zc_;\n        a5_ = zc_;\n");
}

/* The counts of a collective whose ranks disagree: 0. */
void mpi_zero_agreed(ad_buf *o, const mpi_fn *m)
{
    if (m->kind == K_BCAST)
        ad_buf_put(o, "        a1_ = 0;\n");
    else if (m->kind == K_REDUCE || m->kind == K_ALLREDUCE)
        ad_buf_put(o, "        a2_ = 0;\n");
    else
        ad_buf_put(o, "        a1_ = 0;\n        a4_ = 0;\n");
}

/* The agreement of a blocking collective (k_agree), as agreed_; the counts zeroed where
 * the ranks disagree (and fail, a statement, run unless NULL). */
void mpi_agree(ad_buf *o, const mpi_fn *m, const char *comm, const char *fail)
{
    const char *args;
    switch (m->kind) {
    case K_BCAST:
        args = "1, a1_, a2_, 0, 0, a2_";
        break;
    case K_REDUCE:
    case K_ALLREDUCE:
        args = "1, a2_, a3_, 0, 0, a3_";
        break;
    case K_GATHER:
        args = "size_, rank_ == a6_ && a0_ == MPI_IN_PLACE ? a4_ : a1_, rank_ == a6_ && a0_ == "
               "MPI_IN_PLACE ? a5_ : a2_, rank_ == a6_, a4_, a5_";
        break;
    case K_SCATTER:
        args = "size_, rank_ == a6_ && a3_ == MPI_IN_PLACE ? a1_ : a4_, rank_ == a6_ && a3_ == "
               "MPI_IN_PLACE ? a2_ : a5_, rank_ == a6_, a1_, a2_";
        break;
    default: /* allgather, alltoall */
        args = "size_, a0_ == MPI_IN_PLACE ? a4_ : a1_, a0_ == MPI_IN_PLACE ? a5_ : a2_, 1, a4_, "
               "a5_";
        break;
    }
    ad_buf_printf(o, "    const int agreed_ = cr_ad_mpi_agree_(%s, %s);\n    if (!agreed_) {\n",
                  comm, args);
    if (fail)
        ad_buf_printf(o, "        %s;\n", fail);
    mpi_zero_agreed(o, m);
    ad_buf_put(o, "    }\n");
}

bool mpi_agreed_kind(int k)
{
    return k == K_BCAST || k == K_REDUCE || k == K_ALLREDUCE || k == K_GATHER || k == K_SCATTER ||
           k == K_ALLGATHER || k == K_ALLTOALL;
}

/* A derivative that fails in an adjoint sweep (a datatype or operation not covered, a
 * request completed elsewhere than it was posted) sets this flag instead of failing the value
 * stack there: a failed stack gives the rest of the sweep nothing (no partners, tags or trip
 * counts), and the ranks' remaining adjoint messages would no longer match. The public
 * reverse function clears it on entry and fails its stack when its sweep is over
 * (reverse.c); it is per thread, so that two threads' sweeps do not report each other's
 * failures. */
static const char k_flag[] =
    "/* chainrules-ad: an MPI derivative failed in the adjoint sweep (the sweep goes on, so\n"
    " * that every adjoint message is matched; the stack is failed at its end) */\n"
    "#define CR_AD_MPI_FAILED_ 1\n"
    "static _Thread_local int cr_ad_mpi_failed_; /* each thread's sweeps their own */\n\n";

/* MPI_Test, MPI_Testall, MPI_Waitany, MPI_Testany, MPI_Waitsome, MPI_Testsome: the primal,
 * then each request it completed as at a wait: done(key, status, rc) is
 * cr_ad_mreq_fw_wait_ (the forward sweep of the reverse mode, which also records which
 * requests completed: push true) or cr_ad_mreq_tan_wait_ (the forward mode). */
static void completion(ad_buf *o, const ad_func *g, int kind, bool push)
{
    const char *done = push ? "cr_ad_mreq_fw_wait_(stp_, " : "cr_ad_mreq_tan_wait_(";
    const char *rc = "r_ == MPI_ERR_IN_STATUS ? s_[i_].MPI_ERROR : r_";
    const bool many = kind == K_TESTALL || kind == K_WAITSOME || kind == K_TESTSOME;
    if (many)
        ad_buf_put(o, "    MPI_Status *s_ = malloc((size_t)(a0_ > 0 ? a0_ : 1) * sizeof *s_);\n"
                      "    if (!s_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n    const int r_ = ");
    else
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = ");
    mpi_call_primal(o, g, many ? "s_" : "&s_");
    ad_buf_put(o, ";\n");
    switch (kind) {
    case K_TEST:
        ad_buf_printf(
            o,
            "    const int done_ = *a1_ != 0;\n    if (done_) {\n        %sa0_, &s_, r_);\n"
            "        if (a2_ != MPI_STATUS_IGNORE)\n            *a2_ = s_;\n    }\n",
            done);
        if (push)
            ad_buf_put(o, "    cr_adstack_push_i64(stp_, done_);\n");
        break;
    case K_TESTALL:
        ad_buf_printf(o,
                      "    const int done_ = *a2_ != 0;\n"
                      "    for (int i_ = 0; i_ < (done_ ? a0_ : 0); i_++) {\n"
                      "        %s&a1_[i_], &s_[i_], %s);\n"
                      "        if (a3_ != MPI_STATUSES_IGNORE)\n            a3_[i_] = s_[i_];\n"
                      "    }\n    free(s_);\n",
                      done, rc);
        if (push)
            ad_buf_put(o, "    cr_adstack_push_i64(stp_, done_);\n");
        break;
    case K_WAITANY:
    case K_TESTANY: {
        const bool test = kind == K_TESTANY;
        ad_buf_printf(o,
                      "    const int k_ = *a2_ == MPI_UNDEFINED%s ? -1 : *a2_;\n"
                      "    if (k_ >= 0)\n        %s&a1_[k_], &s_, r_);\n"
                      "    if (%s != MPI_STATUS_IGNORE%s)\n        *%s = s_;\n",
                      test ? " || !*a3_" : "", done, mpi_arg(g->nparams - 1),
                      test ? " && *a3_" : "", mpi_arg(g->nparams - 1));
        if (push)
            ad_buf_put(o, "    cr_adstack_push_i64(stp_, k_);\n");
        break;
    }
    default: /* waitsome, testsome */
        ad_buf_printf(o,
                      "    const int n_ = *a2_ == MPI_UNDEFINED ? 0 : *a2_;\n"
                      "    for (int i_ = 0; i_ < n_; i_++) {\n"
                      "        %s&a1_[a3_[i_]], &s_[i_], %s);\n%s"
                      "        if (a4_ != MPI_STATUSES_IGNORE)\n            a4_[i_] = s_[i_];\n"
                      "    }\n    free(s_);\n",
                      done, rc, push ? "        cr_adstack_push_i64(stp_, a3_[i_]);\n" : "");
        if (push)
            ad_buf_put(o, "    cr_adstack_push_i64(stp_, n_);\n");
        break;
    }
}

/* The adjoint of completion(): the adjoint messages of the requests it completed, the last
 * first. */
static void completion_bw(ad_buf *o, int kind)
{
    switch (kind) {
    case K_TEST:
        ad_buf_put(o,
                   "    if (cr_adstack_pop_i64(stp_))\n        cr_ad_mreq_bw_wait_(stp_, a0_);\n");
        break;
    case K_TESTALL:
        ad_buf_put(o, "    if (cr_adstack_pop_i64(stp_))\n        for (int i_ = a0_; i_-- > 0;)\n"
                      "            cr_ad_mreq_bw_wait_(stp_, &a1_[i_]);\n");
        break;
    case K_WAITANY:
    case K_TESTANY:
        ad_buf_put(o, "    const int k_ = (int)cr_adstack_pop_i64(stp_);\n"
                      "    if (k_ >= 0)\n        cr_ad_mreq_bw_wait_(stp_, &a1_[k_]);\n");
        break;
    default:
        ad_buf_put(o, "    for (int n_ = (int)cr_adstack_pop_i64(stp_); n_ > 0; n_--) {\n"
                      "        const int k_ = (int)cr_adstack_pop_i64(stp_);\n"
                      "        cr_ad_mreq_bw_wait_(stp_, &a1_[k_]);\n    }\n");
        break;
    }
}

/* Isend, Irecv and the completions in the reverse mode: the forward and adjoint sweeps. */
void mpi_nb_split(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = mpi_fn_of(g);
    const bool post = m->kind == K_ISEND || m->kind == K_IRECV || m->kind == K_SEND_INIT ||
                      m->kind == K_RECV_INIT;
    const bool init = m->kind == K_SEND_INIT || m->kind == K_RECV_INIT;
    /* forward sweep (an irecv gets the shadow of its buffer: the adjoint of its wait sends
     * it) */
    ad_buf_printf(o, "static int cr_ad_%s_fw%s(", g->name, mn);
    mpi_params(o, g, m->kind == K_IRECV || init ? mask : 0, "_b");
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    switch (m->kind) {
    case K_ISEND:
        ad_buf_put(o, "    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(
            o,
            ";\n    cr_ad_mreq_ *e_ = cr_ad_mreq_add_(a6_, 0, 1, a2_ == MPI_DOUBLE ? a1_ : 0, 0);\n"
            "    e_->peer = a3_;\n    e_->tag = a4_;\n    e_->comm = a5_;\n");
        break;
    case K_IRECV:
        /* the buffer's contents before the receive, for the adjoint to restore */
        ad_buf_printf(o,
                      "    const int dbl_ = a2_ == MPI_DOUBLE;\n    if (dbl_)\n"
                      "        for (int i_ = 0; i_ < a1_; i_++)\n"
                      "            cr_adstack_push_f64(stp_, %s[i_]);\n"
                      "    cr_adstack_push_i64(stp_, dbl_);\n    const int r_ = ",
                      mpi_dbl("a0_"));
        mpi_call_primal(o, g, NULL);
        ad_buf_printf(o,
                      ";\n    cr_ad_mreq_ *e_ = cr_ad_mreq_add_(a6_, 0, 2, dbl_ ? a1_ : 0, 0);\n"
                      "    e_->peer = a3_;\n    e_->tag = a4_;\n    e_->comm = a5_;\n"
                      "    e_->type = a2_;\n    e_->shadow = %s;\n",
                      mask & 1 ? "dbl_ ? (double *)(uintptr_t)a0__b : NULL" : "NULL");
        break;
    case K_WAIT:
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = ");
        mpi_call_primal(o, g, "&s_");
        ad_buf_put(o, ";\n    cr_ad_mreq_fw_wait_(stp_, a0_, &s_, r_);\n"
                      "    if (a1_ != MPI_STATUS_IGNORE)\n        *a1_ = s_;\n");
        break;
    case K_WAITALL:
        ad_buf_put(o, "    MPI_Status *s_ = malloc((size_t)(a0_ > 0 ? a0_ : 1) * sizeof *s_);\n"
                      "    if (!s_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n    const int r_ = ");
        mpi_call_primal(o, g, "s_");
        ad_buf_put(o,
                   ";\n    for (int i_ = 0; i_ < a0_; i_++) {\n"
                   "        cr_ad_mreq_fw_wait_(stp_, &a1_[i_], &s_[i_],\n"
                   "                            r_ == MPI_ERR_IN_STATUS ? s_[i_].MPI_ERROR : r_);\n"
                   "        if (a2_ != MPI_STATUSES_IGNORE)\n            a2_[i_] = s_[i_];\n"
                   "    }\n    free(s_);\n");
        break;
    case K_SEND_INIT:
    case K_RECV_INIT:
        /* the template (the buffer, its shadow) for the starts */
        ad_buf_put(o, "    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_printf(o,
                      ";\n    cr_ad_mreq_init_(a6_, 3, %d, (void *)(uintptr_t)a0_, a1_, a2_, a3_, "
                      "a4_, a5_, %s, 0);\n",
                      m->kind == K_SEND_INIT ? 1 : 2,
                      mask & 1 ? "(double *)(uintptr_t)a0__b" : "NULL");
        break;
    case K_START:
        ad_buf_put(o, "    cr_ad_mreq_fw_start_(stp_, a0_);\n    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        break;
    case K_STARTALL:
        ad_buf_put(o, "    for (int i_ = 0; i_ < a0_; i_++)\n"
                      "        cr_ad_mreq_fw_start_(stp_, &a1_[i_]);\n    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        break;
    case K_REQUEST_FREE:
        ad_buf_put(o, "    cr_ad_mreq_fw_free_(stp_, a0_);\n    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        break;
    default:
        completion(o, g, m->kind, true);
        break;
    }
    ad_buf_put(o, "    return r_;\n}\n\n");

    /* adjoint sweep */
    ad_buf_printf(o, "static void cr_ad_%s_bw%s(", g->name, mn);
    mpi_params(o, g, mask, "_b");
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    if (post)
        mpi_checks(o, m, mask, "cr_ad_mpi_failed_ = 1");
    switch (m->kind) {
    case K_ISEND:
        ad_buf_printf(o, "    cr_ad_mreq_bw_post_(stp_, a6_, %s);\n",
                      mask & 1 ? "a2_ == MPI_DOUBLE ? (double *)(uintptr_t)a0__b : NULL" : "NULL");
        break;
    case K_IRECV:
        ad_buf_printf(o,
                      "    cr_ad_mreq_bw_post_(stp_, a6_, NULL);\n"
                      "    if (cr_adstack_pop_i64(stp_))\n"
                      "        for (int i_ = a1_; i_-- > 0;)\n"
                      "            %s[i_] = cr_adstack_pop_f64(stp_);\n",
                      mpi_dbl("a0_"));
        break;
    case K_WAIT:
        ad_buf_put(o, "    cr_ad_mreq_bw_wait_(stp_, a0_);\n");
        break;
    case K_WAITALL:
        ad_buf_put(o, "    for (int i_ = a0_; i_-- > 0;)\n"
                      "        cr_ad_mreq_bw_wait_(stp_, &a1_[i_]);\n");
        break;
    case K_SEND_INIT:
    case K_RECV_INIT:
        ad_buf_put(o, "    cr_ad_mreq_uninit_(a6_, 3);\n");
        break;
    case K_START:
        ad_buf_put(o, "    cr_ad_mreq_bw_start_(stp_, a0_);\n");
        break;
    case K_STARTALL:
        ad_buf_put(o, "    for (int i_ = a0_; i_-- > 0;)\n"
                      "        cr_ad_mreq_bw_start_(stp_, &a1_[i_]);\n");
        break;
    case K_REQUEST_FREE:
        ad_buf_put(o, "    cr_ad_mreq_bw_free_(stp_, a0_);\n");
        break;
    default:
        completion_bw(o, m->kind);
        break;
    }
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", mpi_arg(i));
    if (mask & 1)
        ad_buf_put(o, "    (void)a0__b;\n");
    ad_buf_put(o, "}\n\n");
}

/* Isend, Irecv and the completions in the forward mode: the tangent messages travel beside the
 * primal ones (a receive with a wildcard source or tag takes its tangent at the wait, from
 * the actual source and tag). */
void mpi_nb_tangent(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = mpi_fn_of(g);
    ad_buf_printf(o, "static int cr_ad_%s_tan%s(", g->name, mn);
    mpi_params(o, g, mask, "_d");
    ad_buf_put(o, ")\n{\n    int fail_ = 0;\n");
    mpi_checks(o, m, mask, "fail_ = 1");
    switch (m->kind) {
    case K_ISEND:
        ad_buf_put(o, "    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(o, ";\n    cr_ad_mreq_ *e_ = cr_ad_mreq_add_(a6_, 2, 1, fail_ ? 0 : a1_, 1);\n");
        if (mask & 1)
            ad_buf_put(o, "    if (!fail_)\n        memcpy(e_->tmp, a0__d, (size_t)e_->count * "
                          "sizeof(double));\n");
        ad_buf_put(o, "    MPI_Isend(e_->tmp, e_->count, MPI_DOUBLE, a3_, a4_, a5_, &e_->dreq);\n");
        break;
    case K_IRECV:
        ad_buf_put(o, "    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_printf(
            o,
            ";\n    cr_ad_mreq_ *e_ = cr_ad_mreq_add_(a6_, 2, 2, fail_ ? 0 : a1_, 1);\n"
            "    e_->shadow = %s;\n    e_->fail = fail_;\n    e_->comm = a5_;\n"
            "    e_->orig = a1_;\n"
            "    e_->type = a2_;\n"
            "    if (a3_ == MPI_ANY_SOURCE || a4_ == MPI_ANY_TAG)\n        e_->deferred = 1;\n"
            "    else\n        MPI_Irecv(e_->shadow && !fail_ ? e_->shadow : e_->tmp, e_->count, "
            "MPI_DOUBLE, a3_, a4_, a5_, &e_->dreq);\n",
            mask & 1 ? "(double *)(uintptr_t)a0__d" : "NULL");
        break;
    case K_WAIT:
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = ");
        mpi_call_primal(o, g, "&s_");
        ad_buf_put(o, ";\n    cr_ad_mreq_tan_wait_(a0_, &s_, r_);\n"
                      "    if (a1_ != MPI_STATUS_IGNORE)\n        *a1_ = s_;\n");
        break;
    case K_WAITALL:
        ad_buf_put(o, "    MPI_Status *s_ = malloc((size_t)(a0_ > 0 ? a0_ : 1) * sizeof *s_);\n"
                      "    if (!s_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n    const int r_ = ");
        mpi_call_primal(o, g, "s_");
        ad_buf_put(
            o, ";\n    for (int i_ = 0; i_ < a0_; i_++) {\n"
               "        cr_ad_mreq_tan_wait_(&a1_[i_], &s_[i_],\n"
               "                             r_ == MPI_ERR_IN_STATUS ? s_[i_].MPI_ERROR : r_);\n"
               "        if (a2_ != MPI_STATUSES_IGNORE)\n            a2_[i_] = s_[i_];\n"
               "    }\n    free(s_);\n");
        break;
    case K_SEND_INIT:
    case K_RECV_INIT:
        ad_buf_put(o, "    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_printf(o,
                      ";\n    cr_ad_mreq_init_(a6_, 4, %d, (void *)(uintptr_t)a0_, a1_, a2_, a3_, "
                      "a4_, a5_, %s, fail_);\n",
                      m->kind == K_SEND_INIT ? 1 : 2,
                      mask & 1 ? "(double *)(uintptr_t)a0__d" : "NULL");
        break;
    case K_START:
        ad_buf_put(o, "    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(o, ";\n    cr_ad_mreq_tan_start_(a0_);\n");
        break;
    case K_STARTALL:
        ad_buf_put(o, "    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(o, ";\n    for (int i_ = 0; i_ < a0_; i_++)\n"
                      "        cr_ad_mreq_tan_start_(&a1_[i_]);\n");
        break;
    case K_REQUEST_FREE:
        ad_buf_put(o, "    cr_ad_mreq_tan_free_(a0_);\n    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        break;
    default:
        completion(o, g, m->kind, false);
        break;
    }
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", mpi_arg(i));
    ad_buf_put(o, "    (void)fail_;\n    return r_;\n}\n\n");
}

void mpi_emit_decls(ad_buf *decls, bool flag, bool agreed, bool vagree, bool runtime)
{
    if (flag && !g_flag_done)
        ad_buf_put(decls, k_flag);
    g_flag_done |= flag;
    if (agreed && !g_agree_done)
        ad_buf_put(decls, k_agree);
    g_agree_done |= agreed;
    if (vagree && !g_vagree_done)
        ad_buf_put(decls, k_vagree);
    g_vagree_done |= vagree;
    for (int i = 0; runtime && !g_runtime_done && k_runtime[i]; i++)
        ad_buf_put(decls, k_runtime[i]);
    g_runtime_done |= runtime;
}
