/* expect: mpi_unknown.c:17:5: error: MPI_Ssend is an MPI function that chainrules-ad does not differentiate */
/* An MPI function the tool does not cover (here a synchronous send, whose receiver's adjoint
 * would wait for a partner that never answers) is refused at its line, by name, while the
 * calls that move no data (MPI_Comm_rank) pass. (The MPI declarations are written out: the
 * test runs the tool without MPI's headers.) */
typedef struct cr_test_comm *MPI_Comm;
typedef struct cr_test_datatype *MPI_Datatype;

int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm);

double f(double *x, MPI_Datatype t, MPI_Comm c)
{
    int rank = 0;
    MPI_Comm_rank(c, &rank);
    x[0] = x[0] * x[0] * rank;
    MPI_Ssend(x, 2, t, 1, 0, c);
    return x[0] + x[1];
}
