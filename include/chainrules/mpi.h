/**
 * @file mpi.h
 * @brief chainrules-mpi: MPI communication recorded on the tape, whose reverse sweep performs
 *        the adjoint communication and whose forward sweep communicates tangents.
 *
 * A separate library, `libchainrules-mpi` (pkg-config `chainrules-mpi`), built when CMake
 * finds MPI. Each function here does what the MPI call of the same name does with doubles
 * (MPI_DOUBLE), on scalar variables or f64 array variables of a tape, and records an
 * operation (cr_tape_op_record()) whose reverse step is the adjoint communication:
 *
 * | primal                         | adjoint (reverse sweep)                              |
 * |--------------------------------|------------------------------------------------------|
 * | send x to p                    | receive x̄ from p, x̄ added to x's adjoint             |
 * | receive y from p               | send ȳ to p                                          |
 * | sendrecv                       | sendrecv of the cotangents, directions swapped       |
 * | isend x to p / wait            | irecv posted at the wait's adjoint, waited at the isend's |
 * | irecv y from p / wait          | isend ȳ posted at the wait's adjoint, waited at the irecv's |
 * | bcast from root                | sum-reduce of ȳ to the root                          |
 * | reduce / allreduce, MPI_SUM    | bcast of ȳ from the root / allreduce of ȳ            |
 * | MPI_PROD                       | as SUM, times the product of the other ranks' x      |
 * | MPI_MAX, MPI_MIN               | as SUM, to the rank holding the winner only          |
 * | gather(v) / scatter(v)         | scatter(v) / gather(v) of the cotangents             |
 * | allgather(v)                   | reduce-scatter (sum) of the cotangents               |
 * | alltoall                       | alltoall of the cotangents                           |
 *
 * Every rank records on its own tape; the reverse sweep on each rank runs the adjoints in
 * the reverse order of its own recording, which matches the partners' reversed order
 * whenever the primal program does not deadlock (docs/mpi.md).
 *
 * Errors reach every rank concerned, never a hang: collectives first agree (an allreduce of
 * an error flag and of the element counts) and all fail together; point-to-point messages
 * carry a header word with the count, or an error mark, so that the receiver of a failed
 * sender fails too. Calls go on communicating after the tape failed (with error marks), so
 * a rank that failed keeps its partners in step; call cr_mpi_agree() before a sweep so that
 * every rank sweeps, or none. A failure names the function and, on the other ranks, the
 * rank that failed (CR_ECOMM).
 *
 * @code
 * // f(x) = sum over ranks of sum_i x_i^2, gradient on every rank
 * cr_avar X = cr_tape_array_input(t, &xa), S;
 * cr_var s = cr_av_dot(t, X, X), tot;
 * cr_mpi_allreduce(t, cr_mpi_in_vars(&s, 1), cr_mpi_out_vars(&tot, 1), MPI_SUM, NULL, comm);
 * cr_var f = cr_mpi_objective(t, tot, 0, comm);       // one objective, not one per rank
 * if (cr_mpi_agree(t, comm) == CR_OK)
 *     cr_tape_gradient_arrays(t, f, NULL, 0, NULL, &X, 1, &gp);
 * @endcode
 *
 * Limits: MPI_DOUBLE data, contiguous buffers; the tape's second-order sweeps and prepared
 * gradients refuse these records (CR_EUNIMPL naming the operation); reduction operations
 * other than MPI_SUM, MPI_PROD, MPI_MAX and MPI_MIN are refused naming them; MPI calls made
 * directly on tape values are not recorded.
 */
#ifndef CR_MPI_H
#define CR_MPI_H

#include <mpi.h>

#include "dual.h"
#include "tape.h"

CR_BEGIN_DECLS

/**
 * A buffer sent, broadcast or reduced: n scalar variables (or constants), or one f64
 * array variable (or constant array) with contiguous row-major data, its elements in
 * row-major order. Make it with cr_mpi_in_vars() or cr_mpi_in_array().
 */
typedef struct cr_mpi_in {
    const cr_var *vars; /**< n scalar variables, or NULL for `arr`. */
    cr_avar arr;        /**< The array variable when vars is NULL. */
    size_t n;           /**< Elements (for an array: its element count). */
} cr_mpi_in;

/**
 * A buffer received: n new scalar variables written into `vars`, or one new 1-d f64 array
 * variable of n elements written into `*arr` (its value lives in the tape's arena). Make it
 * with cr_mpi_out_vars() or cr_mpi_out_array().
 */
typedef struct cr_mpi_out {
    cr_var *vars; /**< n results, or NULL for `arr`. */
    cr_avar *arr; /**< Where the array result goes when vars is NULL. */
    size_t n;     /**< Elements. */
} cr_mpi_out;

/** n scalar variables as a buffer to send. @param[in] v the variables. @param[in] n count. */
static inline cr_mpi_in cr_mpi_in_vars(const cr_var *v, size_t n)
{
    cr_mpi_in b;
    b.vars = v;
    b.arr = cr_av_const(NULL);
    b.n = n;
    return b;
}

/** An f64 array variable as a buffer to send. @param[in] a the variable (dense, contiguous). */
static inline cr_mpi_in cr_mpi_in_array(cr_avar a)
{
    cr_mpi_in b;
    b.vars = NULL;
    b.arr = a;
    b.n = a.a != NULL ? cr_array_numel(a.a) : 0;
    return b;
}

/** n scalar variables to receive into. @param[out] v n variables. @param[in] n count. */
static inline cr_mpi_out cr_mpi_out_vars(cr_var *v, size_t n)
{
    cr_mpi_out b;
    b.vars = v;
    b.arr = NULL;
    b.n = n;
    return b;
}

/** A new 1-d f64 array variable of n elements to receive into. @param[out] a the result. */
static inline cr_mpi_out cr_mpi_out_array(cr_avar *a, size_t n)
{
    cr_mpi_out b;
    b.vars = NULL;
    b.arr = a;
    b.n = n;
    return b;
}

/**
 * Agree on the tapes' status over comm (a collective): when the tape of any rank has
 * failed, every rank's tape fails (CR_ECOMM naming the lowest failed rank, unless it failed
 * itself) and every rank returns a failure; CR_OK on every rank otherwise. Call it between
 * recording and sweeping, so that every rank sweeps (and performs the adjoint
 * communication) or none does.
 * @param[in] t    the tape (NULL: the current tape; a missing tape counts as failed).
 * @param[in] comm the communicator.
 * @return CR_OK; the tape's status; CR_ECOMM.
 */
CR_API cr_status cr_mpi_agree(cr_tape *t, MPI_Comm comm);

/**
 * A value every rank holds the same copy of (the result of cr_mpi_allreduce() or
 * cr_mpi_bcast()), made the objective of every rank's reverse sweep: a new variable of the
 * same value whose cotangent is passed on by the root only. Each rank then calls
 * cr_tape_gradient() (or any sweep seeded with 1) on the result, and the gradients are those
 * of the one objective: seeding every copy with 1 instead would count it once per rank (the
 * adjoint of an allreduce sums its cotangents). Forward sweeps pass the tangent on everywhere.
 * No communication.
 * @param[in] t    the tape (NULL: the current tape).
 * @param[in] y    the replicated value.
 * @param[in] root the rank that passes the cotangent on.
 * @param[in] comm the communicator (to know this rank's number).
 * @return the objective; a NaN constant when the tape has failed.
 */
CR_API cr_var cr_mpi_objective(cr_tape *t, cr_var y, int root, MPI_Comm comm);

/**
 * MPI_Send of x to dest (MPI_PROC_NULL: nothing, nothing recorded).
 * @param[in] t    the tape (NULL: the current tape).
 * @param[in] x    the buffer.
 * @param[in] dest destination rank.
 * @param[in] tag  message tag.
 * @param[in] comm communicator.
 * @return the tape's status: CR_OK; CR_EINVAL (a bad buffer or rank); CR_ECOMM (MPI
 *         failed); allocation statuses.
 */
CR_API cr_status cr_mpi_send(cr_tape *t, cr_mpi_in x, int dest, int tag, MPI_Comm comm);

/**
 * MPI_Recv of y.n elements from source (MPI_ANY_SOURCE and MPI_ANY_TAG allowed; the
 * adjoint goes to the rank the message came from). MPI_PROC_NULL: y is left as it is.
 * @param[in]  t      the tape (NULL: the current tape).
 * @param[out] y      the new variables.
 * @param[in]  source source rank.
 * @param[in]  tag    message tag.
 * @param[in]  comm   communicator.
 * @param[out] status MPI status (count in doubles), or MPI_STATUS_IGNORE.
 * @return the tape's status: CR_OK; CR_EINVAL; CR_ESHAPE (the message has another count);
 *         CR_ECOMM (the sender failed, naming its rank; MPI failed).
 */
CR_API cr_status cr_mpi_recv(cr_tape *t, cr_mpi_out y, int source, int tag, MPI_Comm comm,
                             MPI_Status *status);

/**
 * MPI_Sendrecv: x to dest and y from source at once.
 * @param[in]  t       the tape (NULL: the current tape).
 * @param[in]  x       the buffer sent.
 * @param[in]  dest    destination rank (or MPI_PROC_NULL).
 * @param[in]  sendtag tag of the message sent.
 * @param[out] y       the buffer received.
 * @param[in]  source  source rank (or MPI_PROC_NULL, MPI_ANY_SOURCE).
 * @param[in]  recvtag tag of the message received.
 * @param[in]  comm    communicator.
 * @param[out] status  MPI status of the receive, or MPI_STATUS_IGNORE.
 * @return as cr_mpi_send() and cr_mpi_recv().
 */
CR_API cr_status cr_mpi_sendrecv(cr_tape *t, cr_mpi_in x, int dest, int sendtag, cr_mpi_out y,
                                 int source, int recvtag, MPI_Comm comm, MPI_Status *status);

/** A non-blocking operation on the tape: from cr_mpi_isend() or cr_mpi_irecv(); NULL once
 *  completed by cr_mpi_wait(). Lives in the tape's arena. */
typedef struct cr_mpi_req *cr_mpi_request;

/**
 * MPI_Isend of x to dest. x's values are copied: the variables may be reused at once.
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  x    the buffer.
 * @param[in]  dest destination rank.
 * @param[in]  tag  message tag.
 * @param[in]  comm communicator.
 * @param[out] req  the request; complete it with cr_mpi_wait() on this tape.
 * @return as cr_mpi_send().
 */
CR_API cr_status cr_mpi_isend(cr_tape *t, cr_mpi_in x, int dest, int tag, MPI_Comm comm,
                              cr_mpi_request *req);

/**
 * MPI_Irecv of y.n elements from source. The variables are made (and written into y) by
 * the cr_mpi_wait() that completes the request: y's storage must stay valid until then.
 * @param[in]  t      the tape (NULL: the current tape).
 * @param[out] y      where the wait writes the new variables.
 * @param[in]  source source rank (MPI_ANY_SOURCE allowed).
 * @param[in]  tag    message tag.
 * @param[in]  comm   communicator.
 * @param[out] req    the request.
 * @return as cr_mpi_recv().
 */
CR_API cr_status cr_mpi_irecv(cr_tape *t, cr_mpi_out y, int source, int tag, MPI_Comm comm,
                              cr_mpi_request *req);

/**
 * MPI_Wait: complete a request (a receive's variables are made here); *req becomes NULL.
 * A NULL *req is complete already (CR_OK, nothing recorded).
 * @param[in]     t      the tape the request was made on.
 * @param[in,out] req    the request.
 * @param[out]    status MPI status, or MPI_STATUS_IGNORE.
 * @return as cr_mpi_recv(); CR_EINVAL for a request of another tape.
 */
CR_API cr_status cr_mpi_wait(cr_tape *t, cr_mpi_request *req, MPI_Status *status);

/**
 * MPI_Waitall: complete n requests (cr_mpi_wait() on each, in order, after MPI_Waitall).
 * @param[in]     t        the tape.
 * @param[in]     n        number of requests.
 * @param[in,out] reqs     the requests.
 * @param[out]    statuses n statuses, or MPI_STATUSES_IGNORE.
 * @return as cr_mpi_wait(): the first failure.
 */
CR_API cr_status cr_mpi_waitall(cr_tape *t, size_t n, cr_mpi_request *reqs, MPI_Status *statuses);

/**
 * MPI_Bcast: y on every rank is the root's x (x is read on the root only; y.n elements
 * everywhere, x.n == y.n on the root).
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  x    the root's buffer.
 * @param[out] y    the result on every rank.
 * @param[in]  root the root.
 * @param[in]  comm communicator.
 * @return the tape's status: CR_OK; CR_EINVAL; CR_ESHAPE (ranks give different counts);
 *         CR_ECOMM (another rank failed, naming it; MPI failed).
 */
CR_API cr_status cr_mpi_bcast(cr_tape *t, cr_mpi_in x, cr_mpi_out y, int root, MPI_Comm comm);

/**
 * MPI_Reduce: on the root y = op over the ranks of x, elementwise (y.n == x.n; y and loc
 * are used on the root only).
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  x    each rank's buffer.
 * @param[out] y    the result on the root.
 * @param[in]  op   MPI_SUM, MPI_PROD, MPI_MAX or MPI_MIN; others: CR_EUNIMPL naming them.
 * @param[out] loc  for MPI_MAX and MPI_MIN, the winner's rank per element (the lowest rank
 *                  on ties, as MPI_MAXLOC); may be NULL; x.n ints on the root.
 * @param[in]  root the root.
 * @param[in]  comm communicator.
 * @return as cr_mpi_bcast(); CR_EUNIMPL for an uncovered operation.
 */
CR_API cr_status cr_mpi_reduce(cr_tape *t, cr_mpi_in x, cr_mpi_out y, MPI_Op op, int *loc, int root,
                               MPI_Comm comm);

/**
 * MPI_Allreduce: y = op over the ranks of x on every rank (as cr_mpi_reduce()).
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  x    each rank's buffer.
 * @param[out] y    the result.
 * @param[in]  op   MPI_SUM, MPI_PROD, MPI_MAX or MPI_MIN.
 * @param[out] loc  the winner's rank per element for MPI_MAX / MPI_MIN, or NULL.
 * @param[in]  comm communicator.
 * @return as cr_mpi_reduce().
 */
CR_API cr_status cr_mpi_allreduce(cr_tape *t, cr_mpi_in x, cr_mpi_out y, MPI_Op op, int *loc,
                                  MPI_Comm comm);

/**
 * MPI_Gather: the root's y (x.n times the ranks) holds every rank's x in rank order.
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  x    each rank's buffer (the same count on every rank).
 * @param[out] y    the result on the root (ignored elsewhere).
 * @param[in]  root the root.
 * @param[in]  comm communicator.
 * @return as cr_mpi_bcast().
 */
CR_API cr_status cr_mpi_gather(cr_tape *t, cr_mpi_in x, cr_mpi_out y, int root, MPI_Comm comm);

/**
 * MPI_Gatherv: rank r's x (counts[r] elements) goes to y[displs[r] ...] on the root;
 * elements of y no rank sends are constants 0.
 * @param[in]  t      the tape (NULL: the current tape).
 * @param[in]  x      each rank's buffer.
 * @param[out] y      the result on the root.
 * @param[in]  counts per rank (read on the root).
 * @param[in]  displs per rank (read on the root).
 * @param[in]  root   the root.
 * @param[in]  comm   communicator.
 * @return as cr_mpi_bcast().
 */
CR_API cr_status cr_mpi_gatherv(cr_tape *t, cr_mpi_in x, cr_mpi_out y, const int *counts,
                                const int *displs, int root, MPI_Comm comm);

/**
 * MPI_Scatter: rank r's y (y.n elements) is the root's x[r y.n ...].
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  x    the root's buffer (y.n times the ranks; ignored elsewhere).
 * @param[out] y    each rank's part.
 * @param[in]  root the root.
 * @param[in]  comm communicator.
 * @return as cr_mpi_bcast().
 */
CR_API cr_status cr_mpi_scatter(cr_tape *t, cr_mpi_in x, cr_mpi_out y, int root, MPI_Comm comm);

/**
 * MPI_Scatterv: rank r's y (counts[r] elements) is the root's x[displs[r] ...].
 * @param[in]  t      the tape (NULL: the current tape).
 * @param[in]  x      the root's buffer.
 * @param[in]  counts per rank (read on the root).
 * @param[in]  displs per rank (read on the root).
 * @param[out] y      each rank's part.
 * @param[in]  root   the root.
 * @param[in]  comm   communicator.
 * @return as cr_mpi_bcast().
 */
CR_API cr_status cr_mpi_scatterv(cr_tape *t, cr_mpi_in x, const int *counts, const int *displs,
                                 cr_mpi_out y, int root, MPI_Comm comm);

/**
 * MPI_Allgather: every rank's y (x.n times the ranks) holds every rank's x in rank order.
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  x    each rank's buffer (the same count everywhere).
 * @param[out] y    the result.
 * @param[in]  comm communicator.
 * @return as cr_mpi_bcast().
 */
CR_API cr_status cr_mpi_allgather(cr_tape *t, cr_mpi_in x, cr_mpi_out y, MPI_Comm comm);

/**
 * MPI_Allgatherv: rank r's x (counts[r] elements) goes to y[displs[r] ...] on every rank
 * (counts and displs the same on every rank); elements of y no rank sends are constants 0.
 * @param[in]  t      the tape (NULL: the current tape).
 * @param[in]  x      each rank's buffer.
 * @param[out] y      the result.
 * @param[in]  counts per rank.
 * @param[in]  displs per rank.
 * @param[in]  comm   communicator.
 * @return as cr_mpi_bcast().
 */
CR_API cr_status cr_mpi_allgatherv(cr_tape *t, cr_mpi_in x, cr_mpi_out y, const int *counts,
                                   const int *displs, MPI_Comm comm);

/**
 * MPI_Alltoall: block s of rank r's x (x.n / ranks elements) becomes block r of rank s's y.
 * @param[in]  t    the tape (NULL: the current tape).
 * @param[in]  x    each rank's buffer (a multiple of the ranks; the same count everywhere).
 * @param[out] y    the result (y.n == x.n).
 * @param[in]  comm communicator.
 * @return as cr_mpi_bcast().
 */
CR_API cr_status cr_mpi_alltoall(cr_tape *t, cr_mpi_in x, cr_mpi_out y, MPI_Comm comm);

/* ---- Forward mode on dual numbers ---------------------------------------------------------- */

/**
 * MPI_Sendrecv of dual numbers (dual.h): the values and their tangents travel together,
 * each element as its value and k directions (k the most any element of x carries; the
 * receiver's elements get k directions). Either side may be MPI_PROC_NULL.
 * @param[in]  ctx     errors (messages); memory for the packed messages. Not NULL.
 * @param[in]  x       nx duals sent to dest.
 * @param[in]  nx      their count.
 * @param[in]  dest    destination rank.
 * @param[in]  sendtag tag of the message sent.
 * @param[out] y       ny duals received from source.
 * @param[in]  ny      their count.
 * @param[in]  source  source rank (MPI_ANY_SOURCE allowed).
 * @param[in]  recvtag tag of the message received.
 * @param[in]  comm    communicator.
 * @param[out] status  the receive's status, or MPI_STATUS_IGNORE.
 * @return CR_OK; CR_EINVAL (NULL ctx, a buffer without storage); CR_ESHAPE (a message of
 *         another count); CR_ECOMM (the sender failed, naming it; MPI failed); CR_ENOMEM.
 */
CR_API cr_status cr_mpi_dual_sendrecv(cr_ctx *ctx, const cr_dual *x, size_t nx, int dest,
                                      int sendtag, cr_dual *y, size_t ny, int source, int recvtag,
                                      MPI_Comm comm, MPI_Status *status);

/**
 * MPI_Send of n duals (as cr_mpi_dual_sendrecv()).
 * @param[in] ctx  errors and memory. @param[in] x the duals. @param[in] n their count.
 * @param[in] dest destination rank. @param[in] tag message tag. @param[in] comm communicator.
 * @return as cr_mpi_dual_sendrecv().
 */
CR_API cr_status cr_mpi_dual_send(cr_ctx *ctx, const cr_dual *x, size_t n, int dest, int tag,
                                  MPI_Comm comm);

/**
 * MPI_Recv of n duals (as cr_mpi_dual_sendrecv()).
 * @param[in]  ctx    errors and memory. @param[out] y the duals. @param[in] n their count.
 * @param[in]  source source rank. @param[in] tag message tag. @param[in] comm communicator.
 * @param[out] status the status, or MPI_STATUS_IGNORE.
 * @return as cr_mpi_dual_sendrecv().
 */
CR_API cr_status cr_mpi_dual_recv(cr_ctx *ctx, cr_dual *y, size_t n, int source, int tag,
                                  MPI_Comm comm, MPI_Status *status);

/**
 * MPI_Bcast of n duals, in place: buf on the root is sent, elsewhere received. Collectives
 * on duals agree first as the tape's do (an error or different counts on one rank fail
 * every rank) and carry the most directions any rank has.
 * @param[in]     ctx  errors and memory.
 * @param[in,out] buf  n duals.
 * @param[in]     n    their count.
 * @param[in]     root the root.
 * @param[in]     comm communicator.
 * @return CR_OK; CR_EINVAL; CR_ESHAPE; CR_ECOMM (another rank failed); CR_ENOMEM.
 */
CR_API cr_status cr_mpi_dual_bcast(cr_ctx *ctx, cr_dual *buf, size_t n, int root, MPI_Comm comm);

/**
 * MPI_Reduce of n duals (MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN; the tangent of MAX and MIN
 * is the winner's, the lowest rank on ties): y on the root only.
 * @param[in]  ctx  errors and memory. @param[in] x each rank's n duals.
 * @param[out] y    the result on the root (ignored elsewhere). @param[in] n the count.
 * @param[in]  op   the operation (others: CR_EUNIMPL). @param[in] root the root.
 * @param[in]  comm communicator.
 * @return as cr_mpi_dual_bcast(); CR_EUNIMPL.
 */
CR_API cr_status cr_mpi_dual_reduce(cr_ctx *ctx, const cr_dual *x, cr_dual *y, size_t n, MPI_Op op,
                                    int root, MPI_Comm comm);

/**
 * MPI_Allreduce of n duals (as cr_mpi_dual_reduce(), the result on every rank).
 * @param[in]  ctx errors and memory. @param[in] x each rank's n duals.
 * @param[out] y   the result. @param[in] n the count. @param[in] op the operation.
 * @param[in]  comm communicator.
 * @return as cr_mpi_dual_reduce().
 */
CR_API cr_status cr_mpi_dual_allreduce(cr_ctx *ctx, const cr_dual *x, cr_dual *y, size_t n,
                                       MPI_Op op, MPI_Comm comm);

/**
 * MPI_Gather of n duals per rank into the root's y (n times the ranks).
 * @param[in]  ctx  errors and memory. @param[in] x n duals. @param[in] n the count.
 * @param[out] y    the root's result. @param[in] root the root. @param[in] comm communicator.
 * @return as cr_mpi_dual_bcast().
 */
CR_API cr_status cr_mpi_dual_gather(cr_ctx *ctx, const cr_dual *x, size_t n, cr_dual *y, int root,
                                    MPI_Comm comm);

/**
 * MPI_Scatter of the root's x (n times the ranks) into n duals per rank.
 * @param[in]  ctx  errors and memory. @param[in] x the root's duals.
 * @param[out] y    n duals. @param[in] n the count. @param[in] root the root.
 * @param[in]  comm communicator.
 * @return as cr_mpi_dual_bcast().
 */
CR_API cr_status cr_mpi_dual_scatter(cr_ctx *ctx, const cr_dual *x, cr_dual *y, size_t n, int root,
                                     MPI_Comm comm);

/**
 * MPI_Allgather of n duals per rank into y (n times the ranks) on every rank.
 * @param[in]  ctx  errors and memory. @param[in] x n duals. @param[in] n the count.
 * @param[out] y    the result. @param[in] comm communicator.
 * @return as cr_mpi_dual_bcast().
 */
CR_API cr_status cr_mpi_dual_allgather(cr_ctx *ctx, const cr_dual *x, size_t n, cr_dual *y,
                                       MPI_Comm comm);

/**
 * MPI_Alltoall of blocks of n duals: block s of rank r's x becomes block r of rank s's y
 * (x and y hold n times the ranks).
 * @param[in]  ctx  errors and memory. @param[in] x the blocks sent.
 * @param[out] y    the blocks received. @param[in] n the block's count.
 * @param[in]  comm communicator.
 * @return as cr_mpi_dual_bcast().
 */
CR_API cr_status cr_mpi_dual_alltoall(cr_ctx *ctx, const cr_dual *x, cr_dual *y, size_t n,
                                      MPI_Comm comm);

/**
 * MPI_Gatherv of duals: rank r's x (n duals, counts[r] on the root) goes to
 * y[displs[r] ...] on the root; y's other elements are left as they are.
 * @param[in]  ctx    errors and memory. Not NULL.
 * @param[in]  x      this rank's n duals.
 * @param[in]  n      their count.
 * @param[out] y      the root's buffer of ny duals (ignored elsewhere).
 * @param[in]  ny     its count (read on the root).
 * @param[in]  counts per rank (read on the root).
 * @param[in]  displs per rank (read on the root); blocks inside y, not overlapping.
 * @param[in]  root   the root.
 * @param[in]  comm   communicator.
 * @return CR_OK; CR_EINVAL (a buffer without storage, NULL counts, overlapping blocks, a bad
 *         root); CR_ESHAPE (a block outside y, a rank's n unlike its count); CR_ECOMM
 *         (another rank failed, naming it); CR_ENOMEM. Every rank fails alike.
 */
CR_API cr_status cr_mpi_dual_gatherv(cr_ctx *ctx, const cr_dual *x, size_t n, cr_dual *y, size_t ny,
                                     const int *counts, const int *displs, int root, MPI_Comm comm);

/**
 * MPI_Scatterv of duals: rank r's y (n duals, counts[r] on the root) is the root's
 * x[displs[r] ...] (blocks may overlap).
 * @param[in]  ctx    errors and memory. Not NULL.
 * @param[in]  x      the root's nx duals (ignored elsewhere).
 * @param[in]  nx     their count (read on the root).
 * @param[in]  counts per rank (read on the root).
 * @param[in]  displs per rank (read on the root); blocks inside x.
 * @param[out] y      this rank's n duals.
 * @param[in]  n      their count.
 * @param[in]  root   the root.
 * @param[in]  comm   communicator.
 * @return as cr_mpi_dual_gatherv().
 */
CR_API cr_status cr_mpi_dual_scatterv(cr_ctx *ctx, const cr_dual *x, size_t nx, const int *counts,
                                      const int *displs, cr_dual *y, size_t n, int root,
                                      MPI_Comm comm);

/**
 * MPI_Allgatherv of duals: rank r's x (n == counts[r] duals) goes to y[displs[r] ...] on
 * every rank (counts and displs the same everywhere); y's other elements are left as they
 * are.
 * @param[in]  ctx    errors and memory. Not NULL.
 * @param[in]  x      this rank's n duals.
 * @param[in]  n      their count.
 * @param[out] y      ny duals.
 * @param[in]  ny     their count.
 * @param[in]  counts per rank.
 * @param[in]  displs per rank; blocks inside y, not overlapping.
 * @param[in]  comm   communicator.
 * @return as cr_mpi_dual_gatherv().
 */
CR_API cr_status cr_mpi_dual_allgatherv(cr_ctx *ctx, const cr_dual *x, size_t n, cr_dual *y,
                                        size_t ny, const int *counts, const int *displs,
                                        MPI_Comm comm);

/** A non-blocking message of duals: from cr_mpi_dual_isend() or cr_mpi_dual_irecv(); NULL
 *  once completed by cr_mpi_dual_wait(). Memory of the cr_ctx given to the call. */
typedef struct cr_mpi_dual_req *cr_mpi_dual_request;

/**
 * MPI_Isend of n duals (values and tangents in one message, as cr_mpi_dual_send()). x is
 * packed at once: it may be reused before the wait. A sender that fails still sends an
 * error mark, which its receiver reports; complete the request with cr_mpi_dual_wait()
 * whatever the status (*req is NULL only when ctx or req is NULL, or when the request
 * itself could not be allocated: CR_ENOMEM, the error mark sent all the same).
 * @param[in]  ctx  errors and memory (the request's, until its wait). Not NULL.
 * @param[in]  x    the duals.
 * @param[in]  n    their count.
 * @param[in]  dest destination rank (or MPI_PROC_NULL).
 * @param[in]  tag  message tag.
 * @param[in]  comm communicator.
 * @param[out] req  the request.
 * @return CR_OK; CR_EINVAL (NULL ctx or req, a buffer without storage); CR_ECOMM (MPI
 *         failed); CR_ENOMEM.
 */
CR_API cr_status cr_mpi_dual_isend(cr_ctx *ctx, const cr_dual *x, size_t n, int dest, int tag,
                                   MPI_Comm comm, cr_mpi_dual_request *req);

/**
 * MPI_Irecv of n duals into y, written by the cr_mpi_dual_wait() that completes the request
 * (y must stay valid until then). Room is posted for n elements with the most directions
 * (CR_DUAL_MAX_CHUNK): a message of another count is CR_ESHAPE at the wait, one longer than
 * that room an MPI error (truncation: CR_ECOMM under MPI_ERRORS_RETURN). When the request
 * itself cannot be allocated (CR_ENOMEM, *req NULL) the message is received and dropped.
 * @param[in]  ctx    errors and memory. Not NULL.
 * @param[out] y      the duals received.
 * @param[in]  n      their count.
 * @param[in]  source source rank (MPI_ANY_SOURCE, MPI_PROC_NULL allowed).
 * @param[in]  tag    message tag (MPI_ANY_TAG allowed).
 * @param[in]  comm   communicator.
 * @param[out] req    the request.
 * @return as cr_mpi_dual_isend().
 */
CR_API cr_status cr_mpi_dual_irecv(cr_ctx *ctx, cr_dual *y, size_t n, int source, int tag,
                                   MPI_Comm comm, cr_mpi_dual_request *req);

/**
 * MPI_Wait on a request of duals; *req becomes NULL (a NULL *req: CR_OK at once).
 * @param[in,out] req    the request.
 * @param[out]    status MPI status (count in doubles: n for a receive), or
 *                       MPI_STATUS_IGNORE.
 * @return CR_OK; the post's failure again; CR_ECOMM (the sender failed, naming it; MPI
 *         failed); CR_ESHAPE (a message of another count); CR_EINVAL (NULL req).
 */
CR_API cr_status cr_mpi_dual_wait(cr_mpi_dual_request *req, MPI_Status *status);

/**
 * MPI_Waitall on n requests of duals (cr_mpi_dual_wait() on each, in order: all are posted,
 * so none blocks another).
 * @param[in]     n        number of requests.
 * @param[in,out] reqs     the requests.
 * @param[out]    statuses n statuses, or MPI_STATUSES_IGNORE.
 * @return the first failure, as cr_mpi_dual_wait().
 */
CR_API cr_status cr_mpi_dual_waitall(size_t n, cr_mpi_dual_request *reqs, MPI_Status *statuses);

CR_END_DECLS

#endif /* CR_MPI_H */
