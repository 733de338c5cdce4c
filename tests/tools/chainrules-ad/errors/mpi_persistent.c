/* expect: mpi_persistent.c:18:5: error: MPI_Send_init is not covered by chainrules-ad: persistent requests */
/* A persistent request has no adjoint here: the call is refused at its line, by name.
 * (The MPI declarations are written out: the test runs the tool without MPI's headers.) */
typedef struct cr_test_comm *MPI_Comm;
typedef struct cr_test_datatype *MPI_Datatype;
typedef struct cr_test_request *MPI_Request;
typedef struct cr_test_status MPI_Status;

int MPI_Send_init(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                  MPI_Comm comm, MPI_Request *request);
int MPI_Start(MPI_Request *request);
int MPI_Wait(MPI_Request *request, MPI_Status *status);

double f(double *x, MPI_Datatype t, MPI_Comm c, MPI_Status *st)
{
    MPI_Request r;
    x[0] = x[0] * x[0];
    MPI_Send_init(x, 2, t, 1, 0, c, &r);
    MPI_Start(&r);
    MPI_Wait(&r, st);
    return x[0] + x[1];
}
