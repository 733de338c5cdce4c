/* expect: mpi_cancel.c:20:5: error: MPI_Cancel is not covered by chainrules-ad: a cancelled request has no adjoint */
/* A cancelled request has no adjoint here (its partner's adjoint message would have no
 * match): the call is refused at its line, by name. (The MPI declarations are written out:
 * the test runs the tool without MPI's headers.) */
typedef struct cr_test_comm *MPI_Comm;
typedef struct cr_test_datatype *MPI_Datatype;
typedef struct cr_test_request *MPI_Request;
typedef struct cr_test_status MPI_Status;

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *request);
int MPI_Cancel(MPI_Request *request);
int MPI_Wait(MPI_Request *request, MPI_Status *status);

double f(double *x, MPI_Datatype t, MPI_Comm c, MPI_Status *st)
{
    MPI_Request r;
    x[0] = x[0] * x[0];
    MPI_Isend(x, 2, t, 1, 0, c, &r);
    MPI_Cancel(&r);
    MPI_Wait(&r, st);
    return x[0] + x[1];
}
