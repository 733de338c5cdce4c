/* expect: MPI_Irecv of a differentiated buffer in a function called by the function differentiated */
/* The adjoint of the receive's wait sends the buffer's adjoint, which the forward sweep of
 * a called function does not have: the receive must be posted in the function differentiated.
 * (The MPI declarations are written out: the test runs the tool without MPI's headers.) */
typedef struct cr_test_comm *MPI_Comm;
typedef struct cr_test_datatype *MPI_Datatype;
typedef struct cr_test_request *MPI_Request;
typedef struct cr_test_status MPI_Status;

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *request);
int MPI_Wait(MPI_Request *request, MPI_Status *status);

static void g(double *y, MPI_Datatype t, MPI_Comm c, MPI_Status *st)
{
    MPI_Request r;
    MPI_Irecv(y, 2, t, 0, 0, c, &r);
    MPI_Wait(&r, st);
}

double f(const double *x, MPI_Datatype t, MPI_Comm c, MPI_Status *st)
{
    double y[2];
    y[0] = x[0];
    y[1] = x[1];
    g(y, t, c, st);
    return y[0] * y[1] + x[0];
}
