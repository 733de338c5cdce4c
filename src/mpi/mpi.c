/*
 * chainrules-mpi: MPI calls on tape variables (include/chainrules/mpi.h, docs/mpi.md).
 *
 * Each call checks its buffers, agrees with the ranks it communicates with on whether
 * anyone failed (collectives: an allreduce of an error flag and the counts; point-to-point:
 * a header word in front of each message, the count or -1 for an error), performs the
 * primal communication and records an operation with its own steps (cr_tape_op_record):
 * the reverse step is the adjoint communication, the forward step the same communication
 * of tangents. Messages of the sweeps carry no header: a sweep runs only after
 * cr_mpi_agree() found every tape sound.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <stdatomic.h>

#include <chainrules/mpi.h>

#include "../core/checked.h"
#include "mpi_impl.h"

/* ---- Failures ------------------------------------------------------------------------------ */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static cr_status
failf(cr_tape *t, cr_status st, const char *fmt, ...)
{
    if (t == NULL)
        return st;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cr_status old = cr_tape_status(t);
    return old != CR_OK ? old : cr_tape_op_fail(t, st, msg);
}

/* CR_OK, or CR_ECOMM with MPI's message when rc is an MPI error (under MPI_ERRORS_RETURN). */
static cr_status mpi_rc(cr_tape *t, const char *who, const char *call, int rc)
{
    if (rc == MPI_SUCCESS)
        return CR_OK;
    char es[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, es, &len) != MPI_SUCCESS)
        snprintf(es, sizeof es, "error %d", rc);
    return failf(t, CR_ECOMM, "%s: %s failed: %s", who, call, es);
}

static inline cr_tape *tape_of(cr_tape *t)
{
    return t != NULL ? t : cr_tape_current();
}

static inline bool sound(cr_tape *t)
{
    return t != NULL && cr_tape_status(t) == CR_OK;
}

static cr_status status_of(cr_tape *t)
{
    return t == NULL ? CR_EMISUSE : cr_tape_status(t);
}

/* n elements of size bytes from the tape's arena (NULL: no memory, or the byte count does
 * not fit a size_t; the callers fail the tape with CR_ENOMEM). */
static void *arena_alloc(cr_tape *t, size_t n, size_t size)
{
    size_t bytes = 0;
    if (!cr__mul_size(n ? n : 1, size, &bytes))
        return NULL;
    return cr_arena_alloc(cr_tape_arena(t), bytes, 16);
}

/* ---- Buffers ------------------------------------------------------------------------------- */

/* Whether a is a dense f64 array with contiguous row-major data. */
static bool contiguous_f64(const cr_array *a)
{
    if (a->dtype != CR_DT_F64 || a->structure != CR_MAT_DENSE)
        return false;
    ptrdiff_t s = 1;
    for (size_t d = a->ndim; d-- > 0;) {
        if (a->shape[d] > 1 && a->strides[d] != s)
            return false;
        s *= (ptrdiff_t)a->shape[d];
    }
    return true;
}

/* Check an input buffer (who's `what`); CR_OK or a failure of the tape. */
static cr_status in_check(cr_tape *t, const char *who, const char *what, cr_mpi_in x)
{
    if (x.vars == NULL) {
        if (x.arr.a == NULL)
            return x.n == 0 ? CR_OK
                            : failf(t, CR_EINVAL, "%s: %s has %zu elements and no buffer", who,
                                    what, x.n);
        if (!contiguous_f64(x.arr.a))
            return failf(t, CR_EINVAL, "%s: %s is not a contiguous f64 array", who, what);
        if (cr_array_numel(x.arr.a) != x.n)
            return failf(t, CR_ESHAPE, "%s: %s has %zu elements, its array %zu", who, what, x.n,
                         cr_array_numel(x.arr.a));
        if (x.n > 0 && x.arr.a->data == NULL)
            return failf(t, CR_EINVAL, "%s: %s has NULL data", who, what);
    }
    if (x.n > (size_t)INT_MAX - 1)
        return failf(t, CR_EOVERFLOW, "%s: %s has %zu elements (MPI counts are int)", who, what,
                     x.n);
    return CR_OK;
}

static cr_status out_check(cr_tape *t, const char *who, const char *what, cr_mpi_out y)
{
    if (y.vars == NULL && y.arr == NULL && y.n > 0)
        return failf(t, CR_EINVAL, "%s: %s has %zu elements and no buffer", who, what, y.n);
    if (y.n > (size_t)INT_MAX - 1)
        return failf(t, CR_EOVERFLOW, "%s: %s has %zu elements (MPI counts are int)", who, what,
                     y.n);
    return CR_OK;
}

/* The values of an input buffer (checked), contiguous: the array's data, or the variables'
 * values copied into the tape's arena. NULL on an allocation failure (tape failed). */
static const double *in_values(cr_tape *t, const char *who, cr_mpi_in x)
{
    if (x.vars == NULL)
        return x.arr.a != NULL ? (const double *)x.arr.a->data : NULL;
    double *v = arena_alloc(t, x.n, sizeof *v);
    if (v == NULL) {
        failf(t, CR_ENOMEM, "%s: no memory for %zu values", who, x.n);
        return NULL;
    }
    for (size_t i = 0; i < x.n; i++)
        v[i] = x.vars[i].v;
    return v;
}

/* The results of a failed call: NaN constants. */
static void out_nan(cr_mpi_out y)
{
    if (y.vars != NULL)
        for (size_t i = 0; i < y.n; i++)
            y.vars[i] = cr_const((double)NAN);
    else if (y.arr != NULL)
        *y.arr = cr_av_const(NULL);
}

/* A receive buffer of y.n doubles: an array's own data (the array is made now, in the
 * tape's arena), or scratch for the variables' values. */
typedef struct obuf {
    double *data;
    cr_array *arr;
} obuf;

static cr_status obuf_make(cr_tape *t, const char *who, cr_mpi_out y, obuf *o)
{
    o->arr = NULL;
    o->data = NULL;
    if (y.vars == NULL && y.arr != NULL) {
        size_t n = y.n;
        cr_status st = cr_array_new(cr_tape_arena(t), CR_DT_F64, 1, &n, &o->arr);
        if (st != CR_OK)
            return failf(t, st, "%s: no memory for a result of %zu elements", who, n);
        o->data = o->arr->data;
        return CR_OK;
    }
    o->data = arena_alloc(t, y.n, sizeof(double));
    if (o->data == NULL)
        return failf(t, CR_ENOMEM, "%s: no memory for %zu values", who, y.n);
    memset(o->data, 0, (y.n ? y.n : 1) * sizeof(double));
    return CR_OK;
}

/* Record op: inputs x (NULL: none), outputs y with values o (NULL: none); the new
 * variables are written into y. */
static cr_status record(cr_tape *t, const char *who, const cr_tape_op *op, void *env,
                        const cr_mpi_in *x, const cr_mpi_out *y, const obuf *o)
{
    size_t nin = x == NULL ? 0 : x->vars != NULL ? x->n : 1;
    size_t nout = y == NULL ? 0 : y->vars != NULL ? y->n : 1;
    cr_targ *in = arena_alloc(t, nin + nout, sizeof *in);
    cr_targ *vals = arena_alloc(t, nout, sizeof *vals);
    cr_targ *out = arena_alloc(t, nout, sizeof *out);
    if (in == NULL || vals == NULL || out == NULL)
        return failf(t, CR_ENOMEM, "%s: no memory to record %zu variables", who, nin + nout);
    if (x != NULL) {
        if (x->vars != NULL)
            for (size_t i = 0; i < x->n; i++)
                in[i] = cr_targ_var(x->vars[i]);
        else
            in[0] = cr_targ_arr(x->arr.a != NULL ? x->arr : cr_av_const(NULL));
        if (x->vars == NULL && x->arr.a == NULL)
            nin = 0; /* an empty buffer */
    }
    if (y != NULL) {
        if (y->vars != NULL)
            for (size_t i = 0; i < y->n; i++)
                vals[i] = cr_targ_var(cr_const(o->data[i]));
        else
            vals[0] = cr_targ_arr(cr_av_const(o->arr));
    }
    cr_status st = cr_tape_op_record(t, op, env, in, nin, vals, out, nout);
    if (st != CR_OK) {
        if (y != NULL)
            out_nan(*y);
        return st;
    }
    if (y != NULL) {
        if (y->vars != NULL)
            for (size_t i = 0; i < y->n; i++)
                y->vars[i] = out[i].u.s;
        else
            *y->arr = out[0].u.a;
    }
    return CR_OK;
}

/* ---- Agreement ------------------------------------------------------------------------------ */

/* Every rank of comm learns whether one failed (ok false) and whether the counts n (n < 0:
 * not compared) differ. A rank that did not fail but learns of a failure fails with
 * CR_ECOMM naming the lowest failed rank; counts that differ fail every rank (CR_ESHAPE). */
static cr_status agree_n(cr_tape *t, MPI_Comm comm, const char *who, bool ok, long n)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    long v[3], r[3];
    v[0] = ok ? -(long)INT_MAX - 1 : -(long)rank;
    v[1] = n < 0 ? LONG_MIN : n;
    v[2] = n < 0 ? LONG_MIN : -n;
    int rc = MPI_Allreduce(v, r, 3, MPI_LONG, MPI_MAX, comm);
    if (rc != MPI_SUCCESS)
        return mpi_rc(t, who, "the agreement (MPI_Allreduce)", rc);
    if (r[0] > -(long)INT_MAX - 1) {
        if (ok)
            return failf(t, CR_ECOMM, "%s: rank %ld failed (its own status says why)", who, -r[0]);
        return status_of(t);
    }
    if (r[1] != LONG_MIN && r[1] != -r[2])
        return failf(t, CR_ESHAPE, "%s: the ranks give from %ld to %ld elements", who, -r[2], r[1]);
    return CR_OK;
}

cr_status cr_mpi_agree(cr_tape *t, MPI_Comm comm)
{
    t = tape_of(t);
    return agree_n(t, comm, "cr_mpi_agree", sound(t), -1);
}

/* ---- The objective ----------------------------------------------------------------------- */

static cr_status objective_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    (void)t;
    xbar[0] = *(const int *)ev ? ybar[0] : 0.0;
    return CR_OK;
}

static cr_status objective_fwd(cr_tape *t, void *ev, const double *xdot, double *ydot)
{
    (void)t;
    (void)ev;
    ydot[0] = xdot[0];
    return CR_OK;
}

static const cr_tape_op op_objective = {"cr_mpi_objective", objective_rev, objective_fwd};

cr_var cr_mpi_objective(cr_tape *t, cr_var y, int root, MPI_Comm comm)
{
    t = tape_of(t);
    int rank = 0;
    if (!sound(t))
        return cr_const((double)NAN);
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS) {
        failf(t, CR_EINVAL, "cr_mpi_objective: not a communicator");
        return cr_const((double)NAN);
    }
    int *mine = arena_alloc(t, 1, sizeof *mine);
    if (mine == NULL) {
        failf(t, CR_ENOMEM, "cr_mpi_objective: no memory");
        return cr_const((double)NAN);
    }
    *mine = rank == root;
    cr_targ in = cr_targ_var(y), val = cr_targ_var(cr_const(y.v)), out;
    if (cr_tape_op_record(t, &op_objective, mine, &in, 1, &val, &out, 1) != CR_OK)
        return cr_const((double)NAN);
    return out.u.s;
}

/* ---- Environments ---------------------------------------------------------------------------- */

enum { RED_SUM = 0, RED_PROD = 1, RED_WIN = 2 };

typedef struct env {
    MPI_Comm comm;
    int rank, size;
    int peer, tag;   /* point to point: the partner (send: dest; recv: the actual source) */
    bool recv;       /* point to point: a receive */
    int peer2, tag2; /* sendrecv: the source and its tag */
    int root;
    size_t nx, ny; /* elements recorded as input and output on this rank */
    int red;       /* RED_* */
    bool all;      /* allreduce */
    double *w;     /* PROD: the product of the other ranks' x, per element */
    int *win;      /* MAX / MIN: 1 where this rank holds the winner */
    int *counts, *displs;
    double *scratch; /* max(nx, ny, ...) doubles */
    struct cr_mpi_req *req;
} env;

static env *env_new(cr_tape *t, const char *who, MPI_Comm comm)
{
    env *e = arena_alloc(t, 1, sizeof *e);
    if (e == NULL) {
        failf(t, CR_ENOMEM, "%s: no memory", who);
        return NULL;
    }
    memset(e, 0, sizeof *e);
    e->comm = comm;
    MPI_Comm_rank(comm, &e->rank);
    MPI_Comm_size(comm, &e->size);
    return e;
}

#define RC(who, call, expr)                   \
    do {                                      \
        int rc_ = (expr);                     \
        if (rc_ != MPI_SUCCESS)               \
            return mpi_rc(t, who, call, rc_); \
    } while (0)

/* ---- Point to point ---------------------------------------------------------------------- */

/*
 * A message's header: its count, and -1 for a blocking send or the sender's sequence number
 * for a non-blocking one (an error mark is one word, -1). The adjoint of a message sent
 * with MPI_Isend travels under its own tag, ATAG0 + seq % ATAGS, which both ends know:
 * the adjoint receives are posted at the adjoints of the waits, in the reverse order of
 * each side's waits, and two requests of one channel completed in different orders by the
 * two sides would otherwise exchange their cotangents. Messages of blocking calls keep the
 * user's tag: both sides reverse the same program order.
 */
#define HDR   2
#define ATAG0 16384
#define ATAGS 16384

static atomic_uint g_seq;

static int adjoint_tag(double seq, int tag)
{
    return seq < 0 ? tag : ATAG0 + (int)((unsigned long)seq % ATAGS);
}

/* Send n values v (NULL with ok false: an error mark) with a header word. */
static cr_status send_hdr(cr_tape *t, const char *who, const double *v, size_t n, bool ok, int dest,
                          int tag, MPI_Comm comm)
{
    double *buf = ok ? arena_alloc(t, n + HDR, sizeof *buf) : NULL;
    double mark = -1.0;
    if (ok && buf == NULL) {
        failf(t, CR_ENOMEM, "%s: no memory for the message", who);
        ok = false;
    }
    if (!ok)
        RC(who, "MPI_Send", MPI_Send(&mark, 1, MPI_DOUBLE, dest, tag, comm));
    else {
        buf[0] = (double)n;
        buf[1] = -1.0;
        if (n > 0)
            memcpy(buf + HDR, v, n * sizeof *v);
        RC(who, "MPI_Send", MPI_Send(buf, (int)n + HDR, MPI_DOUBLE, dest, tag, comm));
    }
    return status_of(t);
}

/* Receive a message with a header word of n values into v (ok false: received and dropped);
 * *st gets the message's status. */
static cr_status recv_hdr(cr_tape *t, const char *who, double *v, size_t n, bool ok, int source,
                          int tag, MPI_Comm comm, MPI_Status *st, int *atag)
{
    RC(who, "MPI_Probe", MPI_Probe(source, tag, comm, st));
    int c = 0;
    RC(who, "MPI_Get_count", MPI_Get_count(st, MPI_DOUBLE, &c));
    double *buf = arena_alloc(t, c > 0 ? (size_t)c : 1, sizeof *buf);
    double one;
    bool drop = buf == NULL;
    if (drop) /* receive the message all the same, so that the sender goes on */
        buf = &one;
    MPI_Status st2;
    if (drop && c > 1) {
        /* no room: receive into a datatype-less drop by probing pieces is not possible, so
         * receive with a derived count of one and accept MPI's truncation error */
        failf(t, CR_ENOMEM, "%s: no memory for a message of %d values", who, c);
        MPI_Recv(buf, 1, MPI_DOUBLE, st->MPI_SOURCE, st->MPI_TAG, comm, &st2);
        return status_of(t);
    }
    RC(who, "MPI_Recv", MPI_Recv(buf, c, MPI_DOUBLE, st->MPI_SOURCE, st->MPI_TAG, comm, &st2));
    if (drop)
        return failf(t, CR_ENOMEM, "%s: no memory for a message", who);
    if (c < HDR || buf[0] < 0)
        return failf(t, CR_ECOMM, "%s: rank %d (the sender) failed (its own status says why)", who,
                     st->MPI_SOURCE);
    if (!ok)
        return status_of(t);
    if ((size_t)c != n + HDR)
        return failf(t, CR_ESHAPE, "%s: the message from rank %d has %d elements, %zu expected",
                     who, st->MPI_SOURCE, c - HDR, n);
    if (n > 0)
        memcpy(v, buf + HDR, n * sizeof *v);
    *atag = adjoint_tag(buf[1], st->MPI_TAG);
    return CR_OK;
}

/* One step of a recorded send or receive: receive (in) the n values of into from the recorded
 * peer, or send those of from to it; what names the step in messages. */
static cr_status p2p(cr_tape *t, const char *what, const env *e, bool in, double *into,
                     const double *from, size_t n)
{
    if (in)
        RC(what, "MPI_Recv",
           MPI_Recv(into, (int)n, MPI_DOUBLE, e->peer, e->tag, e->comm, MPI_STATUS_IGNORE));
    else
        RC(what, "MPI_Send", MPI_Send(from, (int)n, MPI_DOUBLE, e->peer, e->tag, e->comm));
    return CR_OK;
}

/* The sweeps of a send (x̄ comes back from the destination, ẋ goes to it) and of a receive
 * (ȳ goes back to the source, ẏ comes from it). */
static cr_status p2p_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    const env *e = ev;
    return e->recv ? p2p(t, "MPI_Recv adjoint", e, false, NULL, ybar, e->ny)
                   : p2p(t, "MPI_Send adjoint", e, true, xbar, NULL, e->nx);
}

static cr_status p2p_fwd(cr_tape *t, void *ev, const double *xdot, double *ydot)
{
    const env *e = ev;
    return e->recv ? p2p(t, "MPI_Recv tangent", e, true, ydot, NULL, e->ny)
                   : p2p(t, "MPI_Send tangent", e, false, NULL, xdot, e->nx);
}

static const cr_tape_op op_send = {"MPI_Send", p2p_rev, p2p_fwd};
static const cr_tape_op op_recv = {"MPI_Recv", p2p_rev, p2p_fwd};

static cr_status check_rank(cr_tape *t, const char *who, const char *what, int r, MPI_Comm comm,
                            bool any)
{
    int size = 0;
    if (r == MPI_PROC_NULL || (any && r == MPI_ANY_SOURCE))
        return CR_OK;
    if (MPI_Comm_size(comm, &size) != MPI_SUCCESS || r < 0 || r >= size)
        return failf(t, CR_EINVAL, "%s: %s %d is not a rank of the communicator (size %d)", who,
                     what, r, size);
    return CR_OK;
}

cr_status cr_mpi_send(cr_tape *t, cr_mpi_in x, int dest, int tag, MPI_Comm comm)
{
    const char *who = "cr_mpi_send";
    t = tape_of(t);
    if (dest == MPI_PROC_NULL)
        return status_of(t);
    if (check_rank(t, who, "destination", dest, comm, false) != CR_OK)
        return status_of(t); /* nobody to tell */
    bool ok = sound(t) && in_check(t, who, "the buffer", x) == CR_OK;
    const double *v = ok ? in_values(t, who, x) : NULL;
    ok = ok && (v != NULL || x.n == 0);
    env *e = ok ? env_new(t, who, comm) : NULL;
    ok = ok && e != NULL;
    cr_status st = send_hdr(t, who, v, x.n, ok, dest, tag, comm);
    if (st != CR_OK || !ok)
        return status_of(t) != CR_OK ? status_of(t) : st;
    e->peer = dest;
    e->tag = tag;
    e->nx = x.n;
    return record(t, who, &op_send, e, &x, NULL, NULL);
}

cr_status cr_mpi_recv(cr_tape *t, cr_mpi_out y, int source, int tag, MPI_Comm comm,
                      MPI_Status *status)
{
    const char *who = "cr_mpi_recv";
    t = tape_of(t);
    if (source == MPI_PROC_NULL) {
        if (status != MPI_STATUS_IGNORE)
            MPI_Recv(NULL, 0, MPI_DOUBLE, MPI_PROC_NULL, tag, comm, status);
        return status_of(t);
    }
    if (check_rank(t, who, "source", source, comm, true) != CR_OK) {
        out_nan(y);
        return status_of(t);
    }
    bool ok = sound(t) && out_check(t, who, "the buffer", y) == CR_OK;
    obuf o = {NULL, NULL};
    ok = ok && obuf_make(t, who, y, &o) == CR_OK;
    env *e = ok ? env_new(t, who, comm) : NULL;
    ok = ok && e != NULL;
    MPI_Status st;
    int atag = tag;
    cr_status rs = recv_hdr(t, who, o.data, y.n, ok, source, tag, comm, &st, &atag);
    if (status != MPI_STATUS_IGNORE) {
        *status = st;
        MPI_Status_set_elements(status, MPI_DOUBLE, (int)y.n);
    }
    if (rs != CR_OK || !ok) {
        out_nan(y);
        return status_of(t) != CR_OK ? status_of(t) : rs;
    }
    e->peer = st.MPI_SOURCE;
    e->tag = atag;
    e->ny = y.n;
    e->recv = true;
    return record(t, who, &op_recv, e, NULL, &y, &o);
}

static cr_status sendrecv_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    env *e = ev; /* peer, tag: where x went; peer2, tag2: where y came from */
    RC("MPI_Sendrecv adjoint", "MPI_Sendrecv",
       MPI_Sendrecv(ybar, (int)e->ny, MPI_DOUBLE, e->peer2, e->tag2, xbar, (int)e->nx, MPI_DOUBLE,
                    e->peer, e->tag, e->comm, MPI_STATUS_IGNORE));
    return CR_OK;
}

static cr_status sendrecv_fwd(cr_tape *t, void *ev, const double *xdot, double *ydot)
{
    env *e = ev;
    RC("MPI_Sendrecv tangent", "MPI_Sendrecv",
       MPI_Sendrecv(xdot, (int)e->nx, MPI_DOUBLE, e->peer, e->tag, ydot, (int)e->ny, MPI_DOUBLE,
                    e->peer2, e->tag2, e->comm, MPI_STATUS_IGNORE));
    return CR_OK;
}

static const cr_tape_op op_sendrecv = {"MPI_Sendrecv", sendrecv_rev, sendrecv_fwd};

cr_status cr_mpi_sendrecv(cr_tape *t, cr_mpi_in x, int dest, int sendtag, cr_mpi_out y, int source,
                          int recvtag, MPI_Comm comm, MPI_Status *status)
{
    const char *who = "cr_mpi_sendrecv";
    t = tape_of(t);
    bool sends = dest != MPI_PROC_NULL, recvs = source != MPI_PROC_NULL;
    if (check_rank(t, who, "destination", dest, comm, false) != CR_OK ||
        check_rank(t, who, "source", source, comm, true) != CR_OK) {
        if (recvs)
            out_nan(y);
        return status_of(t);
    }
    bool ok = sound(t) && (!sends || in_check(t, who, "the send buffer", x) == CR_OK) &&
              (!recvs || out_check(t, who, "the receive buffer", y) == CR_OK);
    const double *v = ok && sends ? in_values(t, who, x) : NULL;
    ok = ok && (!sends || v != NULL || x.n == 0);
    obuf o = {NULL, NULL};
    ok = ok && (!recvs || obuf_make(t, who, y, &o) == CR_OK);
    env *e = ok ? env_new(t, who, comm) : NULL;
    ok = ok && e != NULL;
    /* The send is posted first, so that two ranks exchanging with each other both get to
     * their receive; the receive probes the message (its count is checked, not truncated). */
    MPI_Request sr = MPI_REQUEST_NULL;
    double *buf = sends && ok ? arena_alloc(t, x.n + HDR, sizeof *buf) : NULL;
    double mark = -1.0;
    if (sends) {
        int rc;
        if (buf != NULL) {
            buf[0] = (double)x.n;
            buf[1] = -1.0; /* completed here: a blocking send for the adjoint */
            if (x.n > 0)
                memcpy(buf + HDR, v, x.n * sizeof *v);
            rc = MPI_Isend(buf, (int)x.n + HDR, MPI_DOUBLE, dest, sendtag, comm, &sr);
        } else {
            if (ok)
                failf(t, CR_ENOMEM, "%s: no memory for the message", who);
            ok = false;
            rc = MPI_Isend(&mark, 1, MPI_DOUBLE, dest, sendtag, comm, &sr);
        }
        if (rc != MPI_SUCCESS)
            return mpi_rc(t, who, "MPI_Isend", rc);
    }
    MPI_Status st;
    cr_status rs = CR_OK;
    int atag = recvtag;
    if (recvs)
        rs = recv_hdr(t, who, o.data, y.n, ok, source, recvtag, comm, &st, &atag);
    if (sends)
        RC(who, "MPI_Wait", MPI_Wait(&sr, MPI_STATUS_IGNORE));
    if (status != MPI_STATUS_IGNORE) {
        if (recvs) {
            *status = st;
            MPI_Status_set_elements(status, MPI_DOUBLE, (int)y.n);
        } else {
            MPI_Recv(NULL, 0, MPI_DOUBLE, MPI_PROC_NULL, recvtag, comm, status);
        }
    }
    if (rs != CR_OK || !ok) {
        if (recvs)
            out_nan(y);
        return status_of(t) != CR_OK ? status_of(t) : rs;
    }
    e->peer = dest;
    e->tag = sendtag;
    e->peer2 = recvs ? st.MPI_SOURCE : MPI_PROC_NULL;
    e->tag2 = recvs ? atag : 0;
    e->nx = sends ? x.n : 0;
    e->ny = recvs ? y.n : 0;
    return record(t, who, &op_sendrecv, e, sends ? &x : NULL, recvs ? &y : NULL, &o);
}

/* ---- Non-blocking ------------------------------------------------------------------------ */

/* A tangent message of a forward sweep in flight (FIFO per request). */
typedef struct fmsg {
    MPI_Request r;
    double *buf;
    struct fmsg *next;
} fmsg;

struct cr_mpi_req {
    cr_tape *t;
    bool send;
    bool ok; /* the post was sound (else an error mark went, or the message is dropped) */
    MPI_Comm comm;
    int peer, tag;
    size_t n;
    MPI_Request r;  /* the primal request */
    double *buf;    /* its message: header and n values */
    cr_mpi_out y;   /* a receive's destination */
    int atag;       /* the adjoint's tag (adjoint_tag) */
    MPI_Request ar; /* the adjoint's request: posted at the wait's reverse step */
    double *abuf;   /* its n values */
    fmsg *fhead, *ftail;
};

static cr_status req_push(cr_tape *t, struct cr_mpi_req *q, fmsg **out)
{
    fmsg *m = arena_alloc(t, 1, sizeof *m);
    if (m == NULL)
        return failf(t, CR_ENOMEM, "MPI tangent: no memory");
    m->next = NULL;
    m->r = MPI_REQUEST_NULL;
    m->buf = NULL;
    if (q->ftail != NULL)
        q->ftail->next = m;
    else
        q->fhead = m;
    q->ftail = m;
    *out = m;
    return CR_OK;
}

static fmsg *req_pop(struct cr_mpi_req *q)
{
    fmsg *m = q->fhead;
    if (m != NULL && (q->fhead = m->next) == NULL)
        q->ftail = NULL;
    return m;
}

/* Isend record (input x). Reverse: the adjoint receive posted at the wait's reverse step
 * completes here, its values the cotangent of x. Forward: the tangent is sent. */
static cr_status isend_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    (void)ybar;
    struct cr_mpi_req *q = ((env *)ev)->req;
    RC("MPI_Isend adjoint", "MPI_Wait", MPI_Wait(&q->ar, MPI_STATUS_IGNORE));
    memcpy(xbar, q->abuf, q->n * sizeof *xbar);
    return CR_OK;
}

static cr_status isend_fwd(cr_tape *t, void *ev, const double *xdot, double *ydot)
{
    (void)ydot;
    struct cr_mpi_req *q = ((env *)ev)->req;
    fmsg *m = NULL;
    if (req_push(t, q, &m) != CR_OK)
        return status_of(t);
    RC("MPI_Isend tangent", "MPI_Isend",
       MPI_Isend(xdot, (int)q->n, MPI_DOUBLE, q->peer, q->tag, q->comm, &m->r));
    return CR_OK;
}

/* Irecv record (nothing in or out). Reverse: the adjoint send posted at the wait's reverse
 * step completes. Forward: the tangent's receive is posted. */
static cr_status irecv_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    (void)ybar;
    (void)xbar;
    struct cr_mpi_req *q = ((env *)ev)->req;
    RC("MPI_Irecv adjoint", "MPI_Wait", MPI_Wait(&q->ar, MPI_STATUS_IGNORE));
    return CR_OK;
}

static cr_status irecv_fwd(cr_tape *t, void *ev, const double *xdot, double *ydot)
{
    (void)xdot;
    (void)ydot;
    struct cr_mpi_req *q = ((env *)ev)->req;
    fmsg *m = NULL;
    if (req_push(t, q, &m) != CR_OK)
        return status_of(t);
    if ((m->buf = arena_alloc(t, q->n, sizeof *m->buf)) == NULL)
        return failf(t, CR_ENOMEM, "MPI_Irecv tangent: no memory");
    RC("MPI_Irecv tangent", "MPI_Irecv",
       MPI_Irecv(m->buf, (int)q->n, MPI_DOUBLE, q->peer, q->tag, q->comm, &m->r));
    return CR_OK;
}

/* Wait record of a send (nothing in or out). Reverse: post the adjoint receive. Forward:
 * complete the tangent's send. */
static cr_status wsend_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    (void)ybar;
    (void)xbar;
    struct cr_mpi_req *q = ((env *)ev)->req;
    RC("MPI_Wait adjoint", "MPI_Irecv",
       MPI_Irecv(q->abuf, (int)q->n, MPI_DOUBLE, q->peer, q->atag, q->comm, &q->ar));
    return CR_OK;
}

static cr_status wait_fwd(cr_tape *t, void *ev, const double *xdot, double *ydot)
{
    (void)xdot;
    struct cr_mpi_req *q = ((env *)ev)->req;
    fmsg *m = req_pop(q);
    if (m == NULL)
        return failf(t, CR_EMISUSE, "MPI_Wait tangent: no tangent message in flight");
    RC("MPI_Wait tangent", "MPI_Wait", MPI_Wait(&m->r, MPI_STATUS_IGNORE));
    if (!q->send)
        memcpy(ydot, m->buf, q->n * sizeof *ydot);
    return CR_OK;
}

/* Wait record of a receive (outputs y). Reverse: post the adjoint send of y's cotangent. */
static cr_status wrecv_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    (void)xbar;
    struct cr_mpi_req *q = ((env *)ev)->req;
    memcpy(q->abuf, ybar, q->n * sizeof *ybar);
    RC("MPI_Wait adjoint", "MPI_Isend",
       MPI_Isend(q->abuf, (int)q->n, MPI_DOUBLE, q->peer, q->atag, q->comm, &q->ar));
    return CR_OK;
}

static const cr_tape_op op_isend = {"MPI_Isend", isend_rev, isend_fwd};
static const cr_tape_op op_irecv = {"MPI_Irecv", irecv_rev, irecv_fwd};
static const cr_tape_op op_wait_send = {"MPI_Wait (of an MPI_Isend)", wsend_rev, wait_fwd};
static const cr_tape_op op_wait_recv = {"MPI_Wait (of an MPI_Irecv)", wrecv_rev, wait_fwd};

static struct cr_mpi_req *req_new(cr_tape *t, const char *who, bool send, MPI_Comm comm, int peer,
                                  int tag, size_t n)
{
    struct cr_mpi_req *q = t != NULL ? arena_alloc(t, 1, sizeof *q) : NULL;
    double *buf = q != NULL ? arena_alloc(t, n + HDR, sizeof *buf) : NULL;
    double *abuf = buf != NULL ? arena_alloc(t, n, sizeof *abuf) : NULL;
    if (abuf == NULL) {
        failf(t, CR_ENOMEM, "%s: no memory for the request", who);
        return NULL;
    }
    *q = (struct cr_mpi_req){.t = t,
                             .send = send,
                             .comm = comm,
                             .peer = peer,
                             .tag = tag,
                             .n = n,
                             .r = MPI_REQUEST_NULL,
                             .ar = MPI_REQUEST_NULL,
                             .buf = buf,
                             .abuf = abuf};
    return q;
}

/* The start of cr_mpi_isend and cr_mpi_irecv: *req cleared; false, with *out the call's
 * status, when nothing more is to be done (a NULL request, MPI_PROC_NULL as the peer (what), a
 * peer not in comm, no tape). */
static bool request_start(cr_tape *t, const char *who, cr_mpi_request *req, const char *what,
                          int peer, MPI_Comm comm, bool any, cr_status *out)
{
    if (req != NULL)
        *req = NULL;
    if (req == NULL) {
        *out = failf(t, CR_EINVAL, "%s: NULL request", who);
        return false;
    }
    if (peer == MPI_PROC_NULL || check_rank(t, who, what, peer, comm, any) != CR_OK || t == NULL) {
        *out = status_of(t);
        return false;
    }
    return true;
}

cr_status cr_mpi_isend(cr_tape *t, cr_mpi_in x, int dest, int tag, MPI_Comm comm,
                       cr_mpi_request *req)
{
    const char *who = "cr_mpi_isend";
    cr_status out;
    t = tape_of(t);
    if (!request_start(t, who, req, "destination", dest, comm, false, &out))
        return out;
    bool ok = sound(t) && in_check(t, who, "the buffer", x) == CR_OK;
    const double *v = ok ? in_values(t, who, x) : NULL;
    ok = ok && (v != NULL || x.n == 0);
    struct cr_mpi_req *q = req_new(t, who, true, comm, dest, tag, ok ? x.n : 0);
    env *e = q != NULL ? env_new(t, who, comm) : NULL;
    if (e == NULL) { /* no memory: the error mark, blocking (nothing can wait for it) */
        double mark = -1.0;
        RC(who, "MPI_Send", MPI_Send(&mark, 1, MPI_DOUBLE, dest, tag, comm));
        return status_of(t);
    }
    e->req = q;
    q->ok = ok;
    int count = 1;
    q->buf[0] = -1.0;
    if (ok) {
        unsigned seq = atomic_fetch_add(&g_seq, 1u);
        q->buf[0] = (double)x.n;
        q->buf[1] = (double)(seq % ATAGS);
        q->atag = adjoint_tag(q->buf[1], tag);
        if (x.n > 0)
            memcpy(q->buf + HDR, v, x.n * sizeof *v);
        count = (int)x.n + HDR;
    }
    RC(who, "MPI_Isend", MPI_Isend(q->buf, count, MPI_DOUBLE, dest, tag, comm, &q->r));
    *req = q;
    if (!ok)
        return status_of(t);
    e->nx = x.n;
    return record(t, who, &op_isend, e, &x, NULL, NULL);
}

cr_status cr_mpi_irecv(cr_tape *t, cr_mpi_out y, int source, int tag, MPI_Comm comm,
                       cr_mpi_request *req)
{
    const char *who = "cr_mpi_irecv";
    cr_status out;
    t = tape_of(t);
    if (!request_start(t, who, req, "source", source, comm, true, &out))
        return out;
    bool ok = sound(t) && out_check(t, who, "the buffer", y) == CR_OK;
    struct cr_mpi_req *q = req_new(t, who, false, comm, source, tag, y.n);
    env *e = q != NULL ? env_new(t, who, comm) : NULL;
    if (e == NULL)
        return status_of(t); /* the sender's message is left unreceived: see docs/mpi.md */
    e->req = q;
    q->ok = ok;
    q->y = y;
    out_nan(y); /* the variables are made by the wait */
    RC(who, "MPI_Irecv", MPI_Irecv(q->buf, (int)y.n + HDR, MPI_DOUBLE, source, tag, comm, &q->r));
    *req = q;
    if (!ok)
        return status_of(t);
    return record(t, who, &op_irecv, e, NULL, NULL, NULL);
}

cr_status cr_mpi_wait(cr_tape *t, cr_mpi_request *req, MPI_Status *status)
{
    const char *who = "cr_mpi_wait";
    t = tape_of(t);
    if (req == NULL)
        return failf(t, CR_EINVAL, "%s: NULL request", who);
    struct cr_mpi_req *q = *req;
    if (q == NULL)
        return status_of(t);
    if (q->t != t)
        return failf(t, CR_EINVAL, "%s: a request of another tape", who);
    MPI_Status st;
    RC(who, "MPI_Wait", MPI_Wait(&q->r, &st));
    *req = NULL;
    if (status != MPI_STATUS_IGNORE)
        *status = st;
    env *e = env_new(t, who, q->comm);
    if (e == NULL)
        return status_of(t);
    e->req = q;
    if (q->send) {
        if (!q->ok || !sound(t))
            return status_of(t);
        return record(t, who, &op_wait_send, e, NULL, NULL, NULL);
    }
    int c = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &c);
    if (status != MPI_STATUS_IGNORE)
        MPI_Status_set_elements(status, MPI_DOUBLE, c >= HDR ? c - HDR : 0);
    if (c < HDR || q->buf[0] < 0) {
        out_nan(q->y);
        return failf(t, CR_ECOMM, "%s: rank %d (the sender) failed (its own status says why)", who,
                     st.MPI_SOURCE);
    }
    if (!q->ok || !sound(t)) {
        out_nan(q->y);
        return status_of(t);
    }
    if ((size_t)c != q->n + HDR) {
        out_nan(q->y);
        return failf(t, CR_ESHAPE, "%s: the message from rank %d has %d elements, %zu expected",
                     who, st.MPI_SOURCE, c - HDR, q->n);
    }
    q->peer = st.MPI_SOURCE; /* the adjoint goes back where the message came from */
    q->atag = adjoint_tag(q->buf[1], st.MPI_TAG);
    q->tag = st.MPI_TAG; /* and its tangent (forward sweeps) under the tag it came with */
    obuf o = {NULL, NULL};
    if (obuf_make(t, who, q->y, &o) != CR_OK) {
        out_nan(q->y);
        return status_of(t);
    }
    memcpy(o.data, q->buf + HDR, q->n * sizeof *o.data);
    e->ny = q->n;
    return record(t, who, &op_wait_recv, e, NULL, &q->y, &o);
}

cr_status cr_mpi_waitall(cr_tape *t, size_t n, cr_mpi_request *reqs, MPI_Status *statuses)
{
    t = tape_of(t);
    if (n > 0 && reqs == NULL)
        return failf(t, CR_EINVAL, "cr_mpi_waitall: NULL requests");
    cr_status first = CR_OK;
    for (size_t i = 0; i < n; i++) {
        cr_status st = cr_mpi_wait(
            t, &reqs[i], statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i]);
        if (first == CR_OK)
            first = st;
    }
    return first != CR_OK ? first : status_of(t);
}

/* ---- Collectives ------------------------------------------------------------------------- */

/* An element of MPI_DOUBLE_INT. */
typedef struct dint {
    double v;
    int r;
} dint;

static cr_status bcast_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    env *e = ev;
    RC("MPI_Bcast adjoint", "MPI_Reduce",
       MPI_Reduce(ybar, xbar, (int)e->ny, MPI_DOUBLE, MPI_SUM, e->root, e->comm));
    return CR_OK;
}

static cr_status bcast_fwd(cr_tape *t, void *ev, const double *xdot, double *ydot)
{
    env *e = ev;
    if (e->rank == e->root)
        memcpy(ydot, xdot, e->ny * sizeof *ydot);
    RC("MPI_Bcast tangent", "MPI_Bcast", MPI_Bcast(ydot, (int)e->ny, MPI_DOUBLE, e->root, e->comm));
    return CR_OK;
}

static const cr_tape_op op_bcast = {"MPI_Bcast", bcast_rev, bcast_fwd};

static cr_status check_root(cr_tape *t, const char *who, int root, MPI_Comm comm)
{
    int size = 0;
    MPI_Comm_size(comm, &size);
    if (root < 0 || root >= size)
        return failf(t, CR_EINVAL, "%s: root %d is not a rank of the communicator (size %d)", who,
                     root, size);
    return CR_OK;
}

cr_status cr_mpi_bcast(cr_tape *t, cr_mpi_in x, cr_mpi_out y, int root, MPI_Comm comm)
{
    const char *who = "cr_mpi_bcast";
    t = tape_of(t);
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    bool ok = sound(t) && check_root(t, who, root, comm) == CR_OK &&
              out_check(t, who, "the result", y) == CR_OK;
    bool isroot = rank == root;
    if (ok && isroot && in_check(t, who, "the root's buffer", x) == CR_OK && x.n != y.n)
        failf(t, CR_ESHAPE, "%s: the root's buffer has %zu elements, the result %zu", who, x.n,
              y.n);
    ok = sound(t);
    const double *v = ok && isroot ? in_values(t, who, x) : NULL;
    obuf o = {NULL, NULL};
    ok = ok && (!isroot || v != NULL || x.n == 0) && obuf_make(t, who, y, &o) == CR_OK;
    env *e = ok ? env_new(t, who, comm) : NULL;
    ok = ok && e != NULL;
    cr_status st = agree_n(t, comm, who, ok, (long)y.n);
    if (st != CR_OK) {
        out_nan(y);
        return st;
    }
    if (isroot && y.n > 0)
        memcpy(o.data, v, y.n * sizeof *v);
    RC(who, "MPI_Bcast", MPI_Bcast(o.data, (int)y.n, MPI_DOUBLE, root, comm));
    e->root = root;
    e->nx = isroot ? x.n : 0;
    e->ny = y.n;
    return record(t, who, &op_bcast, e, isroot ? &x : NULL, &y, &o);
}

/* Reductions. */

static const char *op_name(MPI_Op op)
{
    static const struct {
        MPI_Op op;
        const char *name;
    } * p, names[] = {{MPI_MAXLOC, "MPI_MAXLOC"},   {MPI_MINLOC, "MPI_MINLOC"},
                      {MPI_LAND, "MPI_LAND"},       {MPI_LOR, "MPI_LOR"},
                      {MPI_LXOR, "MPI_LXOR"},       {MPI_BAND, "MPI_BAND"},
                      {MPI_BOR, "MPI_BOR"},         {MPI_BXOR, "MPI_BXOR"},
                      {MPI_REPLACE, "MPI_REPLACE"}, {MPI_NO_OP, "MPI_NO_OP"}};
    for (p = names; p < names + sizeof names / sizeof names[0]; p++)
        if (p->op == op)
            return p->name;
    return "a user-defined MPI_Op";
}

/* The reverse step of reduce / allreduce: g = the sum of the cotangents (bcast from the
 * root, or allreduce), times the weights (PROD) or on the winners only (MAX, MIN). */
static cr_status reduce_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    env *e = ev;
    size_t n = e->nx;
    if (e->all) {
        RC("MPI_Allreduce adjoint", "MPI_Allreduce",
           MPI_Allreduce(ybar, xbar, (int)n, MPI_DOUBLE, MPI_SUM, e->comm));
    } else {
        if (e->rank == e->root)
            memcpy(xbar, ybar, n * sizeof *xbar);
        RC("MPI_Reduce adjoint", "MPI_Bcast",
           MPI_Bcast(xbar, (int)n, MPI_DOUBLE, e->root, e->comm));
    }
    if (e->red == RED_PROD)
        for (size_t i = 0; i < n; i++)
            xbar[i] *= e->w[i];
    else if (e->red == RED_WIN)
        for (size_t i = 0; i < n; i++)
            xbar[i] = e->win[i] ? xbar[i] : 0.0;
    return CR_OK;
}

static cr_status reduce_fwd(cr_tape *t, void *ev, const double *xdot, double *ydot)
{
    env *e = ev;
    size_t n = e->nx;
    double *s = e->scratch;
    for (size_t i = 0; i < n; i++)
        s[i] = e->red == RED_PROD  ? e->w[i] * xdot[i]
               : e->red == RED_WIN ? (e->win[i] ? xdot[i] : 0.0)
                                   : xdot[i];
    if (e->all)
        RC("MPI_Allreduce tangent", "MPI_Allreduce",
           MPI_Allreduce(s, ydot, (int)n, MPI_DOUBLE, MPI_SUM, e->comm));
    else
        RC("MPI_Reduce tangent", "MPI_Reduce",
           MPI_Reduce(s, e->rank == e->root ? ydot : NULL, (int)n, MPI_DOUBLE, MPI_SUM, e->root,
                      e->comm));
    return CR_OK;
}

static const cr_tape_op op_reduce = {"MPI_Reduce", reduce_rev, reduce_fwd};
static const cr_tape_op op_allreduce = {"MPI_Allreduce", reduce_rev, reduce_fwd};

static cr_status reduce_any(cr_tape *t, const char *who, bool all, cr_mpi_in x, cr_mpi_out y,
                            MPI_Op op, int *loc, int root, MPI_Comm comm)
{
    t = tape_of(t);
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int red = op == MPI_SUM ? RED_SUM : op == MPI_PROD ? RED_PROD : RED_WIN;
    bool ok = sound(t);
    if (ok && op != MPI_SUM && op != MPI_PROD && op != MPI_MAX && op != MPI_MIN)
        failf(t, CR_EUNIMPL,
              "%s: %s is not covered (MPI_SUM, MPI_PROD, MPI_MAX and MPI_MIN are; for the "
              "location use MPI_MAX or MPI_MIN with loc)",
              who, op_name(op));
    ok = sound(t) && (all || check_root(t, who, root, comm) == CR_OK) &&
         in_check(t, who, "the buffer", x) == CR_OK;
    bool gets = all || rank == root;
    if (ok && gets && out_check(t, who, "the result", y) == CR_OK && y.n != x.n)
        failf(t, CR_ESHAPE, "%s: the buffer has %zu elements, the result %zu", who, x.n, y.n);
    ok = sound(t);
    size_t n = x.n;
    const double *v = ok ? in_values(t, who, x) : NULL;
    ok = ok && (v != NULL || n == 0);
    obuf o = {NULL, NULL};
    ok = ok && (!gets || obuf_make(t, who, y, &o) == CR_OK);
    env *e = ok ? env_new(t, who, comm) : NULL;
    ok = ok && e != NULL;
    double *all_x = NULL;
    dint *a = NULL;
    if (ok) {
        size_t np = 0;
        e->scratch = arena_alloc(t, n, sizeof(double));
        if (red == RED_PROD) {
            e->w = arena_alloc(t, n, sizeof(double));
            /* every rank's x, to form the product of the others' without dividing (a zero
             * factor has its derivative too): n times the ranks doubles */
            if (!cr__mul_size(n, (size_t)size, &np)) {
                failf(t, CR_EOVERFLOW, "%s: %zu elements times %d ranks overflows", who, n, size);
                ok = false;
            } else
                all_x = arena_alloc(t, np, sizeof(double));
        }
        if (red == RED_WIN) {
            e->win = arena_alloc(t, n, sizeof(int));
            a = arena_alloc(t, 2 * n, sizeof *a);
        }
        if (ok && (e->scratch == NULL || (red == RED_PROD && (e->w == NULL || all_x == NULL)) ||
                   (red == RED_WIN && (e->win == NULL || a == NULL)))) {
            failf(t, CR_ENOMEM, "%s: no memory", who);
            ok = false;
        }
    }
    cr_status st = agree_n(t, comm, who, ok, (long)n);
    if (st != CR_OK) {
        if (gets)
            out_nan(y);
        return st;
    }
    if (red == RED_SUM) {
        if (all)
            RC(who, "MPI_Allreduce", MPI_Allreduce(v, o.data, (int)n, MPI_DOUBLE, MPI_SUM, comm));
        else
            RC(who, "MPI_Reduce",
               MPI_Reduce(v, gets ? o.data : NULL, (int)n, MPI_DOUBLE, MPI_SUM, root, comm));
    } else if (red == RED_PROD) {
        RC(who, "MPI_Allgather",
           MPI_Allgather(v, (int)n, MPI_DOUBLE, all_x, (int)n, MPI_DOUBLE, comm));
        for (size_t i = 0; i < n; i++) {
            double w = 1.0;
            for (int r = 0; r < size; r++)
                if (r != rank)
                    w *= all_x[(size_t)r * n + i];
            e->w[i] = w;
            if (gets)
                o.data[i] = w * v[i];
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            a[i].v = v[i];
            a[i].r = rank;
        }
        /* Every rank learns the winners (its own derivative depends on them): an allreduce
         * for MPI_Reduce too. */
        RC(who, "MPI_Allreduce",
           MPI_Allreduce(a, a + n, (int)n, MPI_DOUBLE_INT, op == MPI_MAX ? MPI_MAXLOC : MPI_MINLOC,
                         comm));
        for (size_t i = 0; i < n; i++) {
            e->win[i] = a[n + i].r == rank;
            if (gets) {
                o.data[i] = a[n + i].v;
                if (loc != NULL)
                    loc[i] = a[n + i].r;
            }
        }
    }
    e->all = all;
    e->root = root;
    e->red = red;
    e->nx = n;
    e->ny = gets ? n : 0;
    return record(t, who, all ? &op_allreduce : &op_reduce, e, &x, gets ? &y : NULL, &o);
}

cr_status cr_mpi_reduce(cr_tape *t, cr_mpi_in x, cr_mpi_out y, MPI_Op op, int *loc, int root,
                        MPI_Comm comm)
{
    return reduce_any(t, "cr_mpi_reduce", false, x, y, op, loc, root, comm);
}

cr_status cr_mpi_allreduce(cr_tape *t, cr_mpi_in x, cr_mpi_out y, MPI_Op op, int *loc,
                           MPI_Comm comm)
{
    return reduce_any(t, "cr_mpi_allreduce", true, x, y, op, loc, 0, comm);
}

/* Gathers and scatters. counts and displs NULL: blocks of nx (gather) or ny (scatter). */

enum { G_GATHER, G_SCATTER, G_ALLGATHER, G_ALLTOALL };

typedef struct genv {
    env e;
    int kind;
    bool v; /* the v variant */
} genv;

/* MPI_Gather(v) of n values of send on each rank into recv at the root, and MPI_Scatter(v) of
 * the root's send into n values of recv on each rank: the blocks at the recorded counts and
 * displacements for the v variants; who names the step in messages. */
static cr_status gather_at(cr_tape *t, const char *who, const genv *g, const double *send,
                           double *recv, int n)
{
    const env *e = &g->e;
    if (g->v)
        RC(who, "MPI_Gatherv",
           MPI_Gatherv(send, n, MPI_DOUBLE, recv, e->counts, e->displs, MPI_DOUBLE, e->root,
                       e->comm));
    else
        RC(who, "MPI_Gather",
           MPI_Gather(send, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, e->root, e->comm));
    return CR_OK;
}

static cr_status scatter_to(cr_tape *t, const char *who, const genv *g, const double *send,
                            double *recv, int n)
{
    const env *e = &g->e;
    if (g->v)
        RC(who, "MPI_Scatterv",
           MPI_Scatterv(send, e->counts, e->displs, MPI_DOUBLE, recv, n, MPI_DOUBLE, e->root,
                        e->comm));
    else
        RC(who, "MPI_Scatter",
           MPI_Scatter(send, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, e->root, e->comm));
    return CR_OK;
}

static cr_status gather_rev(cr_tape *t, void *ev, const double *ybar, double *xbar)
{
    genv *g = ev;
    env *e = &g->e;
    int nx = (int)e->nx, ny = (int)e->ny;
    const char *who = "MPI_Gather adjoint";
    switch (g->kind) {
    case G_GATHER:
        return scatter_to(t, who, g, ybar, xbar, nx);
    case G_SCATTER:
        return gather_at(t, "MPI_Scatter adjoint", g, ybar, xbar, ny);
    case G_ALLGATHER:
        if (g->v) { /* the blocks in rank order, then summed and scattered */
            double *s = e->scratch;
            size_t off = 0;
            for (int r = 0; r < e->size; r++) {
                memcpy(s + off, ybar + e->displs[r], (size_t)e->counts[r] * sizeof *s);
                off += (size_t)e->counts[r];
            }
            RC("MPI_Allgather adjoint", "MPI_Reduce_scatter",
               MPI_Reduce_scatter(s, xbar, e->counts, MPI_DOUBLE, MPI_SUM, e->comm));
        } else {
            RC("MPI_Allgather adjoint", "MPI_Reduce_scatter_block",
               MPI_Reduce_scatter_block(ybar, xbar, nx, MPI_DOUBLE, MPI_SUM, e->comm));
        }
        break;
    default: /* G_ALLTOALL */
        RC("MPI_Alltoall adjoint", "MPI_Alltoall",
           MPI_Alltoall(ybar, ny / e->size, MPI_DOUBLE, xbar, nx / e->size, MPI_DOUBLE, e->comm));
        break;
    }
    return CR_OK;
}

static cr_status gather_fwd(cr_tape *t, void *ev, const double *xdot, double *ydot)
{
    genv *g = ev;
    env *e = &g->e;
    int nx = (int)e->nx, ny = (int)e->ny;
    const char *who = "MPI collective tangent";
    switch (g->kind) {
    case G_GATHER:
        return gather_at(t, who, g, xdot, ydot, nx);
    case G_SCATTER:
        return scatter_to(t, who, g, xdot, ydot, ny);
    case G_ALLGATHER:
        if (g->v)
            RC(who, "MPI_Allgatherv",
               MPI_Allgatherv(xdot, nx, MPI_DOUBLE, ydot, e->counts, e->displs, MPI_DOUBLE,
                              e->comm));
        else
            RC(who, "MPI_Allgather",
               MPI_Allgather(xdot, nx, MPI_DOUBLE, ydot, nx, MPI_DOUBLE, e->comm));
        break;
    default:
        RC(who, "MPI_Alltoall",
           MPI_Alltoall(xdot, nx / e->size, MPI_DOUBLE, ydot, ny / e->size, MPI_DOUBLE, e->comm));
        break;
    }
    return CR_OK;
}

static const cr_tape_op op_gather = {"MPI_Gather", gather_rev, gather_fwd};
static const cr_tape_op op_gatherv = {"MPI_Gatherv", gather_rev, gather_fwd};
static const cr_tape_op op_scatter = {"MPI_Scatter", gather_rev, gather_fwd};
static const cr_tape_op op_scatterv = {"MPI_Scatterv", gather_rev, gather_fwd};
static const cr_tape_op op_allgather = {"MPI_Allgather", gather_rev, gather_fwd};
static const cr_tape_op op_allgatherv = {"MPI_Allgatherv", gather_rev, gather_fwd};
static const cr_tape_op op_alltoall = {"MPI_Alltoall", gather_rev, gather_fwd};

/* Check counts and displacements (size ranks) against a buffer of total elements: each
 * block inside it, no two blocks overlapping (their adjoint would need a sum). */
static cr_status check_blocks(cr_tape *t, const char *who, const int *counts, const int *displs,
                              int size, size_t total)
{
    char msg[256];
    cr_status st =
        cr__mpi_check_blocks(who, counts, displs, size, total, CR_EUNIMPL, msg, sizeof msg);
    return st == CR_OK ? CR_OK : failf(t, st, "%s", msg);
}

static cr_status gather_any(cr_tape *t, const char *who, const cr_tape_op *op, int kind,
                            cr_mpi_in x, cr_mpi_out y, const int *counts, const int *displs,
                            int root, MPI_Comm comm)
{
    t = tape_of(t);
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    bool v = counts != NULL || displs != NULL || op == &op_gatherv || op == &op_scatterv ||
             op == &op_allgatherv;
    bool rooted = kind == G_GATHER || kind == G_SCATTER;
    bool isroot = !rooted || rank == root;
    /* Who holds what: gather's y and scatter's x on the root only. */
    bool has_x = kind != G_SCATTER || isroot, has_y = kind != G_GATHER || isroot;
    bool ok = sound(t) && (!rooted || check_root(t, who, root, comm) == CR_OK) &&
              (!has_x || in_check(t, who, "the send buffer", x) == CR_OK) &&
              (!has_y || out_check(t, who, "the receive buffer", y) == CR_OK);
    long agree_count = -1;
    /* The counts every rank must agree on, and each side's checks. */
    if (ok) {
        size_t p = (size_t)size;
        switch (kind) {
        case G_GATHER:
            if (!v) {
                agree_count = (long)x.n;
                if (isroot && y.n / p != x.n)
                    failf(t, CR_ESHAPE,
                          "%s: the root's result has %zu elements, %zu ranks of %zu "
                          "expected",
                          who, y.n, p, x.n);
                else if (isroot && y.n % p != 0)
                    failf(t, CR_ESHAPE,
                          "%s: the root's result has %zu elements, %zu ranks of %zu "
                          "expected",
                          who, y.n, p, x.n);
            } else if (isroot) {
                check_blocks(t, who, counts, displs, size, y.n);
            }
            break;
        case G_SCATTER:
            if (!v) {
                agree_count = (long)y.n;
                if (isroot && (x.n % p != 0 || x.n / p != y.n))
                    failf(t, CR_ESHAPE,
                          "%s: the root's buffer has %zu elements, %zu ranks of %zu "
                          "expected",
                          who, x.n, p, y.n);
            } else if (isroot) {
                check_blocks(t, who, counts, displs, size, x.n);
            }
            break;
        case G_ALLGATHER:
            if (!v) {
                agree_count = (long)x.n;
                if (y.n % p != 0 || y.n / p != x.n)
                    failf(t, CR_ESHAPE,
                          "%s: the result has %zu elements, %zu ranks of %zu expected", who, y.n, p,
                          x.n);
            } else if (check_blocks(t, who, counts, displs, size, y.n) == CR_OK &&
                       (size_t)counts[rank] != x.n) {
                failf(t, CR_ESHAPE, "%s: this rank sends %zu elements, counts[%d] is %d", who, x.n,
                      rank, counts[rank]);
            }
            break;
        default:
            agree_count = (long)x.n;
            if (x.n % p != 0 || y.n != x.n)
                failf(t, CR_ESHAPE,
                      "%s: the buffers have %zu and %zu elements, equal multiples of %zu expected",
                      who, x.n, y.n, p);
            break;
        }
        ok = sound(t);
    }
    const double *xv = ok && has_x ? in_values(t, who, x) : NULL;
    ok = ok && (!has_x || xv != NULL || x.n == 0);
    obuf o = {NULL, NULL};
    ok = ok && (!has_y || obuf_make(t, who, y, &o) == CR_OK);
    genv *g = ok ? arena_alloc(t, 1, sizeof *g) : NULL;
    ok = ok && g != NULL;
    if (ok) {
        memset(g, 0, sizeof *g);
        g->e.comm = comm;
        g->e.rank = rank;
        g->e.size = size;
        g->e.root = root;
        g->kind = kind;
        g->v = v;
        if (v && isroot) {
            g->e.counts = arena_alloc(t, (size_t)size, sizeof(int));
            g->e.displs = arena_alloc(t, (size_t)size, sizeof(int));
            if (kind == G_ALLGATHER)
                g->e.scratch = arena_alloc(t, y.n, sizeof(double));
            if (g->e.counts == NULL || g->e.displs == NULL ||
                (kind == G_ALLGATHER && g->e.scratch == NULL)) {
                failf(t, CR_ENOMEM, "%s: no memory", who);
                ok = false;
            } else {
                memcpy(g->e.counts, counts, (size_t)size * sizeof(int));
                memcpy(g->e.displs, displs, (size_t)size * sizeof(int));
            }
        }
    }
    cr_status st = agree_n(t, comm, who, ok, agree_count);
    /* Rooted v variants: once the root's counts are known sound, each rank learns its own
     * and checks its buffer against it; a second agreement tells everyone. */
    if (st == CR_OK && v && rooted) {
        int mine = -1;
        int rc = MPI_Scatter(counts, 1, MPI_INT, &mine, 1, MPI_INT, root, comm);
        if (rc != MPI_SUCCESS)
            return mpi_rc(t, who, "MPI_Scatter of the counts", rc);
        size_t own = kind == G_GATHER ? x.n : y.n;
        if (mine < 0 || (size_t)mine != own)
            failf(t, CR_ESHAPE, "%s: this rank's buffer has %zu elements, the root's counts say %d",
                  who, own, mine);
        st = agree_n(t, comm, who, sound(t), -1);
    }
    if (st != CR_OK) {
        if (has_y)
            out_nan(y);
        return st;
    }
    int nx = has_x ? (int)x.n : 0, ny = has_y ? (int)y.n : 0, p = size;
    switch (kind) {
    case G_GATHER:
        if (v)
            RC(who, "MPI_Gatherv",
               MPI_Gatherv(xv, nx, MPI_DOUBLE, o.data, counts, displs, MPI_DOUBLE, root, comm));
        else
            RC(who, "MPI_Gather",
               MPI_Gather(xv, nx, MPI_DOUBLE, o.data, nx, MPI_DOUBLE, root, comm));
        break;
    case G_SCATTER:
        if (v)
            RC(who, "MPI_Scatterv",
               MPI_Scatterv(xv, counts, displs, MPI_DOUBLE, o.data, ny, MPI_DOUBLE, root, comm));
        else
            RC(who, "MPI_Scatter",
               MPI_Scatter(xv, ny, MPI_DOUBLE, o.data, ny, MPI_DOUBLE, root, comm));
        break;
    case G_ALLGATHER:
        if (v)
            RC(who, "MPI_Allgatherv",
               MPI_Allgatherv(xv, nx, MPI_DOUBLE, o.data, counts, displs, MPI_DOUBLE, comm));
        else
            RC(who, "MPI_Allgather",
               MPI_Allgather(xv, nx, MPI_DOUBLE, o.data, nx, MPI_DOUBLE, comm));
        break;
    default:
        RC(who, "MPI_Alltoall",
           MPI_Alltoall(xv, nx / p, MPI_DOUBLE, o.data, ny / p, MPI_DOUBLE, comm));
        break;
    }
    g->e.nx = (size_t)nx;
    g->e.ny = (size_t)ny;
    return record(t, who, op, g, has_x ? &x : NULL, has_y ? &y : NULL, &o);
}

cr_status cr_mpi_gather(cr_tape *t, cr_mpi_in x, cr_mpi_out y, int root, MPI_Comm comm)
{
    return gather_any(t, "cr_mpi_gather", &op_gather, G_GATHER, x, y, NULL, NULL, root, comm);
}

cr_status cr_mpi_gatherv(cr_tape *t, cr_mpi_in x, cr_mpi_out y, const int *counts,
                         const int *displs, int root, MPI_Comm comm)
{
    return gather_any(t, "cr_mpi_gatherv", &op_gatherv, G_GATHER, x, y, counts, displs, root, comm);
}

cr_status cr_mpi_scatter(cr_tape *t, cr_mpi_in x, cr_mpi_out y, int root, MPI_Comm comm)
{
    return gather_any(t, "cr_mpi_scatter", &op_scatter, G_SCATTER, x, y, NULL, NULL, root, comm);
}

cr_status cr_mpi_scatterv(cr_tape *t, cr_mpi_in x, const int *counts, const int *displs,
                          cr_mpi_out y, int root, MPI_Comm comm)
{
    return gather_any(t, "cr_mpi_scatterv", &op_scatterv, G_SCATTER, x, y, counts, displs, root,
                      comm);
}

cr_status cr_mpi_allgather(cr_tape *t, cr_mpi_in x, cr_mpi_out y, MPI_Comm comm)
{
    return gather_any(t, "cr_mpi_allgather", &op_allgather, G_ALLGATHER, x, y, NULL, NULL, 0, comm);
}

cr_status cr_mpi_allgatherv(cr_tape *t, cr_mpi_in x, cr_mpi_out y, const int *counts,
                            const int *displs, MPI_Comm comm)
{
    return gather_any(t, "cr_mpi_allgatherv", &op_allgatherv, G_ALLGATHER, x, y, counts, displs, 0,
                      comm);
}

cr_status cr_mpi_alltoall(cr_tape *t, cr_mpi_in x, cr_mpi_out y, MPI_Comm comm)
{
    return gather_any(t, "cr_mpi_alltoall", &op_alltoall, G_ALLTOALL, x, y, NULL, NULL, 0, comm);
}
