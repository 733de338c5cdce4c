/*
 * chainrules-mpi in forward mode on dual numbers (include/chainrules/mpi.h, dual.h): the
 * tangents travel with the values, in the same message. Each element is packed as 1 + k
 * doubles (its value and k directions, k the most any element of the buffer carries, agreed
 * over the ranks of a collective and sent in the header of a point-to-point message); the
 * linear operations then move the packed doubles as they are (a sum of duals is the sum of
 * their packings), and MPI_PROD, MPI_MAX and MPI_MIN form the tangent of the result from
 * every rank's packing (PROD) or the winner's (MAX, MIN).
 *
 * Errors reach every rank as in mpi.c: collectives agree first, messages carry a header
 * (count and k) or an error mark.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <chainrules/mpi.h>

#include "../core/checked.h"
#include "mpi_impl.h"

#define W(k) ((size_t)1 + (size_t)(k)) /* doubles per packed element */

static cr_status failf(cr_ctx *ctx, cr_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static cr_status failf(cr_ctx *ctx, cr_status st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx != NULL)
        cr_ctx_error(ctx, st, "%s", msg);
    return st;
}

static cr_status mpi_rc(cr_ctx *ctx, const char *who, const char *call, int rc)
{
    char es[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, es, &len) != MPI_SUCCESS)
        snprintf(es, sizeof es, "error %d", rc);
    return failf(ctx, CR_ECOMM, "%s: %s failed: %s", who, call, es);
}

#define RC(who, call, expr)                   \
    do {                                      \
        int rc_ = (expr);                     \
        if (rc_ != MPI_SUCCESS) {             \
            st = mpi_rc(ctx, who, call, rc_); \
            goto done;                        \
        }                                     \
    } while (0)

/* A buffer of n elements of w doubles from the context (NULL: too large or no memory). */
static double *take(cr_ctx *ctx, size_t n, size_t w, size_t *bytes)
{
    *bytes = 0;
    size_t nw = 0, b = 0;
    if (!cr__mul_size(n, w, &nw) || !cr__mul_size(nw != 0 ? nw : 1, sizeof(double), &b))
        return NULL;
    double *p = cr_ctx_alloc(ctx, b);
    if (p != NULL)
        *bytes = b;
    return p;
}

static void give(cr_ctx *ctx, double *p, size_t bytes)
{
    if (p != NULL)
        cr_ctx_dealloc(ctx, p, bytes);
}

static uint32_t dirs(const cr_dual *x, size_t n)
{
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++)
        k = x[i].n > k ? x[i].n : k;
    return k > CR_DUAL_MAX_CHUNK ? CR_DUAL_MAX_CHUNK : k;
}

static void pack(const cr_dual *x, size_t n, uint32_t k, double *p)
{
    for (size_t i = 0; i < n; i++, p += W(k)) {
        p[0] = x[i].v;
        for (uint32_t d = 0; d < k; d++)
            p[1 + d] = x[i].d[d]; /* zero past the element's own n */
    }
}

static void unpack(const double *p, size_t n, uint32_t k, cr_dual *y)
{
    for (size_t i = 0; i < n; i++, p += W(k))
        y[i] = cr_dual_make(p[0], p + 1, k);
}

static bool bad_buffer(const void *b, size_t n)
{
    return b == NULL && n > 0;
}

/* n elements per rank times the p ranks of a communicator; TIMES_P_OVERFLOW when the
 * product does not fit a size_t (collective() then fails with CR_EOVERFLOW, on every rank
 * through its agreement). */
#define TIMES_P_OVERFLOW SIZE_MAX

static size_t times_p(size_t n, int p)
{
    size_t np = 0;
    return cr__mul_size(n, p > 0 ? (size_t)p : 0, &np) && np != TIMES_P_OVERFLOW ? np
                                                                                 : TIMES_P_OVERFLOW;
}

static bool bad_count(size_t n, uint32_t k)
{
    return n > (size_t)INT_MAX / W(CR_DUAL_MAX_CHUNK) - 2 || k > CR_DUAL_MAX_CHUNK;
}

/* The agreement of a collective: every rank learns whether one failed, whether the counts n
 * (n < 0: not compared) differ, and the most directions k any rank has. */
static cr_status agree(cr_ctx *ctx, MPI_Comm comm, const char *who, cr_status local, long n,
                       uint32_t *k)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    long v[4], r[4];
    v[0] = local == CR_OK ? -(long)INT_MAX - 1 : -(long)rank;
    v[1] = n < 0 ? LONG_MIN : n;
    v[2] = n < 0 ? LONG_MIN : -n;
    v[3] = (long)*k;
    int rc = MPI_Allreduce(v, r, 4, MPI_LONG, MPI_MAX, comm);
    if (rc != MPI_SUCCESS)
        return mpi_rc(ctx, who, "the agreement (MPI_Allreduce)", rc);
    if (r[0] > -(long)INT_MAX - 1)
        return local != CR_OK ? local
                              : failf(ctx, CR_ECOMM,
                                      "%s: rank %ld failed (its own status says why)", who, -r[0]);
    if (r[1] != LONG_MIN && r[1] != -r[2])
        return failf(ctx, CR_ESHAPE, "%s: the ranks give from %ld to %ld elements", who, -r[2],
                     r[1]);
    *k = (uint32_t)r[3];
    return CR_OK;
}

/* ---- Point to point ---------------------------------------------------------------------- */

/* Send x (n duals) with a header (count, directions), or an error mark when local fails. */
static cr_status send_part(cr_ctx *ctx, const char *who, const cr_dual *x, size_t n,
                           cr_status local, int dest, int tag, MPI_Comm comm, MPI_Request *rq,
                           double **buf, size_t *bytes)
{
    static double mark = -1.0;
    uint32_t k = local == CR_OK ? dirs(x, n) : 0;
    *buf = local == CR_OK ? take(ctx, n + 1, W(k), bytes) : NULL;
    int rc;
    if (*buf == NULL) {
        if (local == CR_OK)
            local = failf(ctx, CR_ENOMEM, "%s: no memory for the message", who);
        rc = MPI_Isend(&mark, 1, MPI_DOUBLE, dest, tag, comm, rq);
    } else {
        (*buf)[0] = (double)n;
        (*buf)[1] = (double)k;
        pack(x, n, k, *buf + 2);
        rc = MPI_Isend(*buf, (int)(2 + n * W(k)), MPI_DOUBLE, dest, tag, comm, rq);
    }
    if (rc != MPI_SUCCESS)
        return mpi_rc(ctx, who, "MPI_Isend", rc);
    return local;
}

/* Receive a message of n duals (probed: its count is checked, not truncated). */
static cr_status recv_part(cr_ctx *ctx, const char *who, cr_dual *y, size_t n, cr_status local,
                           int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status st;
    int c = 0, rc = MPI_Probe(source, tag, comm, &st);
    if (rc == MPI_SUCCESS)
        rc = MPI_Get_count(&st, MPI_DOUBLE, &c);
    if (rc != MPI_SUCCESS)
        return mpi_rc(ctx, who, "MPI_Probe", rc);
    size_t bytes;
    double one, *buf = take(ctx, c > 0 ? (size_t)c : 1, 1, &bytes);
    rc = MPI_Recv(buf != NULL ? buf : &one, buf != NULL ? c : 1, MPI_DOUBLE, st.MPI_SOURCE,
                  st.MPI_TAG, comm, MPI_STATUS_IGNORE);
    cr_status res = local;
    if (status != MPI_STATUS_IGNORE) {
        *status = st;
        MPI_Status_set_elements(status, MPI_DOUBLE, (int)n);
    }
    if (rc != MPI_SUCCESS)
        res = mpi_rc(ctx, who, "MPI_Recv", rc);
    else if (buf == NULL)
        res = failf(ctx, CR_ENOMEM, "%s: no memory for a message of %d values", who, c);
    else if (c < 2 || buf[0] < 0)
        res = local != CR_OK ? local
                             : failf(ctx, CR_ECOMM,
                                     "%s: rank %d (the sender) failed (its own status says why)",
                                     who, st.MPI_SOURCE);
    else if (local == CR_OK) {
        uint32_t k = (uint32_t)buf[1];
        if ((size_t)buf[0] != n || k > CR_DUAL_MAX_CHUNK || (size_t)c != 2 + n * W(k))
            res =
                failf(ctx, CR_ESHAPE, "%s: the message from rank %d has %g elements, %zu expected",
                      who, st.MPI_SOURCE, buf[0], n);
        else
            unpack(buf + 2, n, k, y);
    }
    give(ctx, buf, bytes);
    return res;
}

cr_status cr_mpi_dual_sendrecv(cr_ctx *ctx, const cr_dual *x, size_t nx, int dest, int sendtag,
                               cr_dual *y, size_t ny, int source, int recvtag, MPI_Comm comm,
                               MPI_Status *status)
{
    const char *who = "cr_mpi_dual_sendrecv";
    cr_status local = CR_OK;
    if (ctx == NULL)
        return CR_EINVAL;
    if (dest != MPI_PROC_NULL && (bad_buffer(x, nx) || bad_count(nx, 0)))
        local = failf(ctx, CR_EINVAL,
                      "%s: the send buffer (%zu elements) has no storage or is "
                      "too large",
                      who, nx);
    if (source != MPI_PROC_NULL && (bad_buffer(y, ny) || bad_count(ny, 0)) && local == CR_OK)
        local =
            failf(ctx, CR_EINVAL,
                  "%s: the receive buffer (%zu elements) has no storage or is too large", who, ny);
    MPI_Request rq = MPI_REQUEST_NULL;
    double *buf = NULL;
    size_t bytes = 0;
    cr_status st = local;
    if (dest != MPI_PROC_NULL)
        st = send_part(ctx, who, x, nx, local, dest, sendtag, comm, &rq, &buf, &bytes);
    if (source != MPI_PROC_NULL) {
        cr_status r = recv_part(ctx, who, y, ny, st, source, recvtag, comm, status);
        st = st != CR_OK ? st : r;
    }
    int rc = MPI_Wait(&rq, MPI_STATUS_IGNORE);
    give(ctx, buf, bytes);
    if (rc != MPI_SUCCESS && st == CR_OK)
        st = mpi_rc(ctx, who, "MPI_Wait", rc);
    return st;
}

cr_status cr_mpi_dual_send(cr_ctx *ctx, const cr_dual *x, size_t n, int dest, int tag,
                           MPI_Comm comm)
{
    return cr_mpi_dual_sendrecv(ctx, x, n, dest, tag, NULL, 0, MPI_PROC_NULL, 0, comm,
                                MPI_STATUS_IGNORE);
}

cr_status cr_mpi_dual_recv(cr_ctx *ctx, cr_dual *y, size_t n, int source, int tag, MPI_Comm comm,
                           MPI_Status *status)
{
    return cr_mpi_dual_sendrecv(ctx, NULL, 0, MPI_PROC_NULL, 0, y, n, source, tag, comm, status);
}

/* ---- Collectives ------------------------------------------------------------------------- */

typedef enum { D_BCAST, D_REDUCE, D_ALLREDUCE, D_GATHER, D_SCATTER, D_ALLGATHER, D_ALLTOALL } dkind;

/* One collective: x (nx duals, or NULL where the rank sends nothing), y (ny); n the count the
 * ranks must agree on. */
static cr_status collective(cr_ctx *ctx, const char *who, dkind kind, const cr_dual *x, size_t nx,
                            cr_dual *y, size_t ny, long n, MPI_Op op, int root, MPI_Comm comm)
{
    if (ctx == NULL)
        return CR_EINVAL;
    int rank = 0, p = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    cr_status local = CR_OK, st;
    if ((kind == D_REDUCE || kind == D_ALLREDUCE) && op != MPI_SUM && op != MPI_PROD &&
        op != MPI_MAX && op != MPI_MIN)
        local = failf(ctx, CR_EUNIMPL,
                      "%s: the operation is not covered (MPI_SUM, MPI_PROD, MPI_MAX and MPI_MIN "
                      "are)",
                      who);
    else if (kind != D_ALLREDUCE && kind != D_ALLGATHER && kind != D_ALLTOALL &&
             (root < 0 || root >= p))
        local = failf(ctx, CR_EINVAL, "%s: root %d is not a rank of the communicator (size %d)",
                      who, root, p);
    else if (nx == TIMES_P_OVERFLOW || ny == TIMES_P_OVERFLOW)
        local = failf(ctx, CR_EOVERFLOW,
                      "%s: the count times the %d ranks of the communicator overflows", who, p);
    else if (bad_buffer(x, nx) || bad_buffer(y, ny) || bad_count(nx, 0) || bad_count(ny, 0))
        local = failf(ctx, CR_EINVAL,
                      "%s: a buffer of %zu or %zu elements has no storage or is "
                      "too large",
                      who, nx, ny);
    uint32_t k = local == CR_OK && x != NULL ? dirs(x, nx) : 0;
    size_t bx = 0, by = 0, bz = 0;
    double *px = NULL, *py = NULL, *pz = NULL;
    if (local == CR_OK) {
        /* room for the most directions (k is agreed below, and can only grow) */
        size_t zn = kind == D_REDUCE || kind == D_ALLREDUCE ? times_p(nx, p) : 0;
        px = take(ctx, nx, W(CR_DUAL_MAX_CHUNK), &bx);
        py = take(ctx, ny, W(CR_DUAL_MAX_CHUNK), &by);
        pz = take(ctx, zn, W(CR_DUAL_MAX_CHUNK), &bz);
        if (px == NULL || py == NULL || pz == NULL)
            local = failf(ctx, CR_ENOMEM, "%s: no memory for the packed buffers", who);
    }
    st = agree(ctx, comm, who, local, n, &k);
    if (st != CR_OK)
        goto done;
    if (x != NULL)
        pack(x, nx, k, px);
    int cx = (int)(nx * W(k)), cy = (int)(ny * W(k));
    switch (kind) {
    case D_BCAST:
        if (rank == root)
            memcpy(py, px, (size_t)cy * sizeof *py);
        RC(who, "MPI_Bcast", MPI_Bcast(py, cy, MPI_DOUBLE, root, comm));
        break;
    case D_GATHER:
        RC(who, "MPI_Gather", MPI_Gather(px, cx, MPI_DOUBLE, py, cx, MPI_DOUBLE, root, comm));
        break;
    case D_SCATTER:
        RC(who, "MPI_Scatter", MPI_Scatter(px, cy, MPI_DOUBLE, py, cy, MPI_DOUBLE, root, comm));
        break;
    case D_ALLGATHER:
        RC(who, "MPI_Allgather", MPI_Allgather(px, cx, MPI_DOUBLE, py, cx, MPI_DOUBLE, comm));
        break;
    case D_ALLTOALL:
        RC(who, "MPI_Alltoall", MPI_Alltoall(px, cx / p, MPI_DOUBLE, py, cy / p, MPI_DOUBLE, comm));
        break;
    default: { /* reductions */
        bool all = kind == D_ALLREDUCE, gets = all || rank == root;
        if (op == MPI_SUM) {
            if (all)
                RC(who, "MPI_Allreduce", MPI_Allreduce(px, py, cx, MPI_DOUBLE, MPI_SUM, comm));
            else
                RC(who, "MPI_Reduce", MPI_Reduce(px, py, cx, MPI_DOUBLE, MPI_SUM, root, comm));
            break;
        }
        /* PROD, MAX, MIN: every rank's packing, then the result where it is wanted */
        RC(who, "MPI_Allgather", MPI_Allgather(px, cx, MPI_DOUBLE, pz, cx, MPI_DOUBLE, comm));
        if (!gets)
            break;
        for (size_t i = 0; i < nx; i++) {
            double *o = py + i * W(k);
            const double *e0 = pz + i * W(k);
            if (op == MPI_PROD) {
                memset(o, 0, W(k) * sizeof *o);
                o[0] = 1.0;
                for (int r = 0; r < p; r++) {
                    const double *er = pz + ((size_t)r * nx + i) * W(k);
                    for (uint32_t d = 0; d < k; d++)
                        o[1 + d] = o[1 + d] * er[0] + o[0] * er[1 + d];
                    o[0] *= er[0];
                }
            } else { /* the lowest rank wins ties, as MPI_MAXLOC */
                const double *best = e0;
                for (int r = 1; r < p; r++) {
                    const double *er = pz + ((size_t)r * nx + i) * W(k);
                    if (op == MPI_MAX ? er[0] > best[0] : er[0] < best[0])
                        best = er;
                }
                memcpy(o, best, W(k) * sizeof *o);
            }
        }
        break;
    }
    }
    if (y != NULL && ny > 0)
        unpack(py, ny, k, y);
done:
    give(ctx, px, bx);
    give(ctx, py, by);
    give(ctx, pz, bz);
    return st;
}

cr_status cr_mpi_dual_bcast(cr_ctx *ctx, cr_dual *buf, size_t n, int root, MPI_Comm comm)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    return collective(ctx, "cr_mpi_dual_bcast", D_BCAST, rank == root ? buf : NULL,
                      rank == root ? n : 0, buf, n, (long)n, MPI_SUM, root, comm);
}

cr_status cr_mpi_dual_reduce(cr_ctx *ctx, const cr_dual *x, cr_dual *y, size_t n, MPI_Op op,
                             int root, MPI_Comm comm)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    return collective(ctx, "cr_mpi_dual_reduce", D_REDUCE, x, n, rank == root ? y : NULL,
                      rank == root ? n : 0, (long)n, op, root, comm);
}

cr_status cr_mpi_dual_allreduce(cr_ctx *ctx, const cr_dual *x, cr_dual *y, size_t n, MPI_Op op,
                                MPI_Comm comm)
{
    return collective(ctx, "cr_mpi_dual_allreduce", D_ALLREDUCE, x, n, y, n, (long)n, op, 0, comm);
}

cr_status cr_mpi_dual_gather(cr_ctx *ctx, const cr_dual *x, size_t n, cr_dual *y, int root,
                             MPI_Comm comm)
{
    int rank = 0, p = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    bool r = rank == root;
    return collective(ctx, "cr_mpi_dual_gather", D_GATHER, x, n, r ? y : NULL,
                      r ? times_p(n, p) : 0, (long)n, MPI_SUM, root, comm);
}

cr_status cr_mpi_dual_scatter(cr_ctx *ctx, const cr_dual *x, cr_dual *y, size_t n, int root,
                              MPI_Comm comm)
{
    int rank = 0, p = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    bool r = rank == root;
    return collective(ctx, "cr_mpi_dual_scatter", D_SCATTER, r ? x : NULL, r ? times_p(n, p) : 0, y,
                      n, (long)n, MPI_SUM, root, comm);
}

cr_status cr_mpi_dual_allgather(cr_ctx *ctx, const cr_dual *x, size_t n, cr_dual *y, MPI_Comm comm)
{
    int p = 1;
    MPI_Comm_size(comm, &p);
    return collective(ctx, "cr_mpi_dual_allgather", D_ALLGATHER, x, n, y, times_p(n, p), (long)n,
                      MPI_SUM, 0, comm);
}

cr_status cr_mpi_dual_alltoall(cr_ctx *ctx, const cr_dual *x, cr_dual *y, size_t n, MPI_Comm comm)
{
    int p = 1;
    MPI_Comm_size(comm, &p);
    return collective(ctx, "cr_mpi_dual_alltoall", D_ALLTOALL, x, times_p(n, p), y, times_p(n, p),
                      (long)n, MPI_SUM, 0, comm);
}

/* ---- The v variants ---------------------------------------------------------------------- */

typedef enum { V_GATHER, V_SCATTER, V_ALLGATHER } vkind;

/* Counts and displacements (p ranks) against a buffer of total elements: each block inside
 * it; blocks that are written (gatherv, allgatherv) must not overlap, as MPI requires. */
static cr_status check_blocks(cr_ctx *ctx, const char *who, const int *counts, const int *displs,
                              int p, size_t total, bool written)
{
    char msg[256];
    cr_status st = cr__mpi_check_blocks(who, counts, displs, p, total, written ? CR_EINVAL : CR_OK,
                                        msg, sizeof msg);
    return st == CR_OK ? CR_OK : failf(ctx, st, "%s", msg);
}

/* One v variant. own: this rank's part (x for gatherv and allgatherv, y for scatterv) of n
 * duals; big: the root's whole buffer (every rank's for allgatherv) of nb duals, blocks at
 * counts / displs (read where big is). */
static cr_status vcollective(cr_ctx *ctx, const char *who, vkind kind, const cr_dual *x, cr_dual *y,
                             size_t n, size_t nb, const int *counts, const int *displs, int root,
                             MPI_Comm comm)
{
    if (ctx == NULL)
        return CR_EINVAL;
    int rank = 0, p = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    bool rooted = kind != V_ALLGATHER, has_big = !rooted || rank == root;
    const void *ownb = kind == V_SCATTER ? (const void *)y : (const void *)x;
    const void *bigb = kind == V_SCATTER ? (const void *)x : (const void *)y;
    cr_status local = CR_OK, st;
    if (rooted && (root < 0 || root >= p))
        local = failf(ctx, CR_EINVAL, "%s: root %d is not a rank of the communicator (size %d)",
                      who, root, p);
    else if (bad_buffer(ownb, n) || bad_count(n, 0) ||
             (has_big && (bad_buffer(bigb, nb) || bad_count(nb, 0))))
        local = failf(ctx, CR_EINVAL,
                      "%s: a buffer of %zu or %zu elements has no storage or is too large", who, n,
                      has_big ? nb : 0);
    else if (has_big)
        local = check_blocks(ctx, who, counts, displs, p, nb, kind != V_SCATTER);
    if (local == CR_OK && kind == V_ALLGATHER && (size_t)counts[rank] != n)
        local = failf(ctx, CR_ESHAPE, "%s: this rank sends %zu elements, counts[%d] is %d", who, n,
                      rank, counts[rank]);
    /* room for the most directions (k is agreed below) */
    size_t bo = 0, bb = 0, bc = 0;
    double *po = NULL, *pb = NULL;
    int *sc = NULL;
    if (local == CR_OK) {
        po = take(ctx, n, W(CR_DUAL_MAX_CHUNK), &bo);
        pb = take(ctx, has_big ? nb : 0, W(CR_DUAL_MAX_CHUNK), &bb);
        sc = (int *)take(ctx, 2 * (size_t)p, (sizeof(int) + sizeof(double) - 1) / sizeof(double),
                         &bc);
        if (po == NULL || pb == NULL || sc == NULL)
            local = failf(ctx, CR_ENOMEM, "%s: no memory for the packed buffers", who);
    }
    uint32_t k = 0;
    if (local == CR_OK)
        k = kind == V_SCATTER ? (has_big ? dirs(x, nb) : 0) : dirs(x, n);
    st = agree(ctx, comm, who, local, -1, &k);
    /* rooted: each rank checks its count against the root's, and all learn the outcome */
    if (st == CR_OK && rooted) {
        int mine = -1;
        int rc = MPI_Scatter(counts, 1, MPI_INT, &mine, 1, MPI_INT, root, comm);
        if (rc != MPI_SUCCESS) {
            st = mpi_rc(ctx, who, "MPI_Scatter of the counts", rc);
            goto done;
        }
        cr_status own = CR_OK;
        if (mine < 0 || (size_t)mine != n)
            own = failf(ctx, CR_ESHAPE,
                        "%s: this rank's buffer has %zu elements, the root's "
                        "counts say %d",
                        who, n, mine);
        st = agree(ctx, comm, who, own, -1, &k);
    }
    if (st != CR_OK)
        goto done;
    int *scn = sc, *sds = sc + p, cn = (int)(n * W(k));
    if (has_big)
        for (int r = 0; r < p; r++) { /* in doubles: within the checked sizes */
            scn[r] = (int)((size_t)counts[r] * W(k));
            sds[r] = (int)((size_t)displs[r] * W(k));
        }
    switch (kind) {
    case V_GATHER:
        pack(x, n, k, po);
        RC(who, "MPI_Gatherv",
           MPI_Gatherv(po, cn, MPI_DOUBLE, pb, scn, sds, MPI_DOUBLE, root, comm));
        break;
    case V_SCATTER:
        if (has_big)
            pack(x, nb, k, pb);
        RC(who, "MPI_Scatterv",
           MPI_Scatterv(pb, scn, sds, MPI_DOUBLE, po, cn, MPI_DOUBLE, root, comm));
        unpack(po, n, k, y);
        break;
    default:
        pack(x, n, k, po);
        RC(who, "MPI_Allgatherv",
           MPI_Allgatherv(po, cn, MPI_DOUBLE, pb, scn, sds, MPI_DOUBLE, comm));
        break;
    }
    if (kind != V_SCATTER && has_big) /* the blocks only: the rest of y is left as it was */
        for (int r = 0; r < p; r++)
            unpack(pb + sds[r], (size_t)counts[r], k, y + displs[r]);
done:
    give(ctx, po, bo);
    give(ctx, pb, bb);
    give(ctx, (double *)sc, bc);
    return st;
}

cr_status cr_mpi_dual_gatherv(cr_ctx *ctx, const cr_dual *x, size_t n, cr_dual *y, size_t ny,
                              const int *counts, const int *displs, int root, MPI_Comm comm)
{
    return vcollective(ctx, "cr_mpi_dual_gatherv", V_GATHER, x, y, n, ny, counts, displs, root,
                       comm);
}

cr_status cr_mpi_dual_scatterv(cr_ctx *ctx, const cr_dual *x, size_t nx, const int *counts,
                               const int *displs, cr_dual *y, size_t n, int root, MPI_Comm comm)
{
    return vcollective(ctx, "cr_mpi_dual_scatterv", V_SCATTER, x, y, n, nx, counts, displs, root,
                       comm);
}

cr_status cr_mpi_dual_allgatherv(cr_ctx *ctx, const cr_dual *x, size_t n, cr_dual *y, size_t ny,
                                 const int *counts, const int *displs, MPI_Comm comm)
{
    return vcollective(ctx, "cr_mpi_dual_allgatherv", V_ALLGATHER, x, y, n, ny, counts, displs, 0,
                       comm);
}

/* ---- Non-blocking ------------------------------------------------------------------------ */

struct cr_mpi_dual_req {
    cr_ctx *ctx;
    const char *who;
    MPI_Request rq;
    MPI_Comm comm;
    cr_status local; /* this side's failure, reported again by the wait */
    bool recv;
    cr_dual *y; /* a receive's destination */
    size_t n;
    double *buf; /* the packed message (header, then the elements), or NULL */
    size_t bytes;
};

/* The error mark of a sender that failed: nothing can wait for it when the request itself
 * could not be made, so it is sent and its request freed (MPI completes it). */
static double g_mark = -1.0;

/* The start of cr_mpi_dual_isend and cr_mpi_dual_irecv: false, with *local the status, for a
 * NULL context or request; otherwise *req cleared, the buffer's fault in *local (the call
 * still takes part in the communication) and *q a new request, NULL when there is no memory. */
static bool req_new(cr_ctx *ctx, const char *who, const cr_dual *buf, size_t n,
                    cr_mpi_dual_request *req, cr_status *local, struct cr_mpi_dual_req **q)
{
    if (ctx == NULL || req == NULL) {
        *local = ctx == NULL ? CR_EINVAL : failf(ctx, CR_EINVAL, "%s: NULL request", who);
        return false;
    }
    *req = NULL;
    *local = CR_OK;
    if (bad_buffer(buf, n) || bad_count(n, 0))
        *local = failf(ctx, CR_EINVAL,
                       "%s: the buffer (%zu elements) has no storage or is too large", who, n);
    *q = cr_ctx_alloc(ctx, sizeof **q);
    return true;
}

cr_status cr_mpi_dual_isend(cr_ctx *ctx, const cr_dual *x, size_t n, int dest, int tag,
                            MPI_Comm comm, cr_mpi_dual_request *req)
{
    const char *who = "cr_mpi_dual_isend";
    cr_status local;
    struct cr_mpi_dual_req *q;
    if (!req_new(ctx, who, x, n, req, &local, &q))
        return local;
    if (q == NULL) {
        MPI_Request lost;
        if (MPI_Isend(&g_mark, 1, MPI_DOUBLE, dest, tag, comm, &lost) == MPI_SUCCESS)
            MPI_Request_free(&lost);
        return local != CR_OK ? local : failf(ctx, CR_ENOMEM, "%s: no memory for the request", who);
    }
    memset(q, 0, sizeof *q);
    q->ctx = ctx;
    q->who = who;
    q->comm = comm;
    cr_status st = send_part(ctx, who, x, n, local, dest, tag, comm, &q->rq, &q->buf, &q->bytes);
    q->local = st;
    *req = q;
    return st;
}

cr_status cr_mpi_dual_irecv(cr_ctx *ctx, cr_dual *y, size_t n, int source, int tag, MPI_Comm comm,
                            cr_mpi_dual_request *req)
{
    const char *who = "cr_mpi_dual_irecv";
    cr_status local;
    struct cr_mpi_dual_req *q;
    if (!req_new(ctx, who, y, n, req, &local, &q))
        return local;
    if (q == NULL) { /* the message is taken and dropped, so that its sender completes */
        static double sink;
        MPI_Request lost;
        if (MPI_Irecv(&sink, 1, MPI_DOUBLE, source, tag, comm, &lost) == MPI_SUCCESS)
            MPI_Request_free(&lost);
        return local != CR_OK ? local : failf(ctx, CR_ENOMEM, "%s: no memory for the request", who);
    }
    *q = (struct cr_mpi_dual_req){
        .ctx = ctx, .who = who, .comm = comm, .recv = true, .y = y, .n = n};
    /* room for n elements with the most directions and the header; a longer message is an
     * MPI error (truncation) */
    q->buf = !bad_count(n, 0) ? take(ctx, n + 1, W(CR_DUAL_MAX_CHUNK), &q->bytes) : NULL;
    static double one;
    if (local == CR_OK && q->buf == NULL)
        local = failf(ctx, CR_ENOMEM, "%s: no memory for the message", who);
    /* a receiver that failed still takes the message (or the sender's error mark), so that
     * its sender completes */
    int rc = q->buf != NULL ? MPI_Irecv(q->buf, (int)(2 + n * W(CR_DUAL_MAX_CHUNK)), MPI_DOUBLE,
                                        source, tag, comm, &q->rq)
                            : MPI_Irecv(&one, 1, MPI_DOUBLE, source, tag, comm, &q->rq);
    if (rc != MPI_SUCCESS && local == CR_OK)
        local = mpi_rc(ctx, who, "MPI_Irecv", rc);
    q->local = local;
    *req = q;
    return local;
}

cr_status cr_mpi_dual_wait(cr_mpi_dual_request *req, MPI_Status *status)
{
    if (req == NULL)
        return CR_EINVAL;
    struct cr_mpi_dual_req *q = *req;
    if (q == NULL)
        return CR_OK;
    cr_ctx *ctx = q->ctx;
    const char *who = q->who;
    MPI_Status s;
    int rc = MPI_Wait(&q->rq, &s), c = 0;
    cr_status st = q->local;
    if (rc != MPI_SUCCESS)
        st = st != CR_OK ? st : mpi_rc(ctx, who, "MPI_Wait", rc);
    else if (q->recv && st == CR_OK && s.MPI_SOURCE != MPI_PROC_NULL) {
        MPI_Get_count(&s, MPI_DOUBLE, &c);
        const double *b = q->buf;
        if (c < 2 || b[0] < 0)
            st = failf(ctx, CR_ECOMM, "%s: rank %d (the sender) failed (its own status says why)",
                       who, s.MPI_SOURCE);
        else {
            uint32_t k = (uint32_t)b[1];
            if ((size_t)b[0] != q->n || k > CR_DUAL_MAX_CHUNK || (size_t)c != 2 + q->n * W(k))
                st = failf(ctx, CR_ESHAPE,
                           "%s: the message from rank %d has %g elements, %zu expected", who,
                           s.MPI_SOURCE, b[0], q->n);
            else
                unpack(b + 2, q->n, k, q->y);
        }
    }
    if (status != MPI_STATUS_IGNORE) {
        *status = s;
        if (q->recv)
            MPI_Status_set_elements(status, MPI_DOUBLE,
                                    st == CR_OK && s.MPI_SOURCE != MPI_PROC_NULL ? (int)q->n : 0);
    }
    give(ctx, q->buf, q->bytes);
    cr_ctx_dealloc(ctx, q, sizeof *q);
    *req = NULL;
    return st;
}

cr_status cr_mpi_dual_waitall(size_t n, cr_mpi_dual_request *reqs, MPI_Status *statuses)
{
    if (reqs == NULL && n > 0)
        return CR_EINVAL;
    /* every request is posted: completing them one after the other cannot block any */
    cr_status first = CR_OK;
    for (size_t i = 0; i < n; i++) {
        cr_status st = cr_mpi_dual_wait(
            &reqs[i], statuses != MPI_STATUSES_IGNORE ? &statuses[i] : MPI_STATUS_IGNORE);
        first = first != CR_OK ? first : st;
    }
    return first;
}
