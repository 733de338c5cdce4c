/* expect: mpi_count.c:20:5: error: MPI_Send: a count of 4 doubles for 'x', an array of 3 */
/* A constant count of MPI_DOUBLE larger than the array it names is refused at its line (the
 * primal would read past the array, and the adjoint write past its adjoint); a count of
 * MPI_BYTE is not judged. (The MPI declarations are written out as OpenMPI's, whose
 * MPI_DOUBLE is the address of ompi_mpi_double: the test runs the tool without MPI's
 * headers.) */
typedef struct cr_test_comm *MPI_Comm;
typedef struct cr_test_datatype *MPI_Datatype;
extern struct cr_test_datatype ompi_mpi_double, ompi_mpi_byte;
#define MPI_DOUBLE ((MPI_Datatype)(void *)&ompi_mpi_double)
#define MPI_BYTE   ((MPI_Datatype)(void *)&ompi_mpi_byte)

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm);

double f(const double *in, MPI_Comm c)
{
    double x[3];
    for (int i = 0; i < 3; i++)
        x[i] = in[i] * in[i];
    MPI_Send(x, 4, MPI_DOUBLE, 1, 0, c);
    MPI_Send(x, 24, MPI_BYTE, 1, 0, c);
    return x[0];
}
