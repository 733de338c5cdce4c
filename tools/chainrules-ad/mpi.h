/* chainrules-ad: what mpi.c (the MPI functions, their wrappers) and mpi_requests.c (the
 * non-blocking requests) share. */
#ifndef CR_AD_MPI_H
#define CR_AD_MPI_H

#include "ad.h"

enum {
    K_SEND,
    K_RECV,
    K_SENDRECV,
    K_BCAST,
    K_REDUCE,
    K_ALLREDUCE,
    K_GATHER,
    K_SCATTER,
    K_ALLGATHER,
    K_ALLTOALL,
    K_ISEND,
    K_IRECV,
    K_WAIT,
    K_WAITALL,
    K_GATHERV,
    K_SCATTERV,
    K_ALLGATHERV,
    K_TEST,
    K_TESTALL,
    K_WAITANY,
    K_TESTANY,
    K_WAITSOME,
    K_TESTSOME,
    K_SEND_INIT,
    K_RECV_INIT,
    K_START,
    K_STARTALL,
    K_REQUEST_FREE
};

typedef struct mpi_fn {
    const char *name;
    int kind, nparams;
    int in, in_count, in_type;    /* the buffer read (-1: none) and its count and datatype */
    int out, out_count, out_type; /* the buffer written (-1: none) */
} mpi_fn;

/* mpi.c: the entry of the table for g (an MPI function bound by ad_mpi_bind). */
const mpi_fn *mpi_fn_of(const ad_func *g);
/* mpi.c: the wrappers' pieces: the name of argument i, the parameter list (shadows of the
 * buffers in mask, with suffix sfx), the call of the primal into `status`, a buffer's text
 * as a double pointer, the checks of the datatypes and operations (setting `fail`). */
const char *mpi_arg(int i);
void mpi_params(ad_buf *out, const ad_func *g, uint64_t mask, const char *sfx);
void mpi_call_primal(ad_buf *out, const ad_func *g, const char *status);
const char *mpi_dbl(const char *p);
void mpi_checks(ad_buf *o, const mpi_fn *m, uint64_t mask, const char *fail);

/* mpi_requests.c: the wrappers of the non-blocking calls and completions (reverse mode's
 * split pair, tangent); the agreement of the collectives' counts (and of the v variants')
 * between the ranks; the declarations the generated file needs, each once. */
void mpi_nb_split(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn);
void mpi_nb_tangent(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn);
bool mpi_agreed_kind(int k);
void mpi_agree(ad_buf *o, const mpi_fn *m, const char *comm, const char *fail);
void mpi_zero_agreed(ad_buf *o, const mpi_fn *m);
void mpi_v_agree(ad_buf *o, int kind, const char *comm, const char *fail);
void mpi_v_zero(ad_buf *o, int kind);
void mpi_emit_decls(ad_buf *decls, bool flag, bool agreed, bool vagree, bool runtime);

#endif /* CR_AD_MPI_H */
