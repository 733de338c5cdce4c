/*
 * The failure of an MPI derivative belongs to the sweep that met it (stale_input.c), on 2
 * ranks with MPI_THREAD_MULTIPLE. On rank 0 a thread runs st_fail_rev, whose adjoint fails
 * (a user's reduction operation) and then waits for rank 1; meanwhile the main thread runs
 * st_good_rev to its end. st_good's derivative must be the exact one (against central
 * differences) and st_fail_rev must return NaN: a failure flag shared by the threads would
 * be consumed by the wrong sweep. Then, with no thread, a failed call followed by a good
 * one: the good one is not failed by the earlier failure. Ranks other than 0 and 1 idle.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

double st_fail(const double *x, MPI_Op op, MPI_Comm data, MPI_Comm ctl);
double st_fail_rev(const double *x, double *x_b, MPI_Op op, MPI_Comm data, MPI_Comm ctl,
                   double st_fail_b);
double st_good(const double *x, MPI_Comm self);
double st_good_rev(const double *x, double *x_b, MPI_Comm self, double st_good_b);

static void user_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((double *)inout)[i] += ((double *)in)[i];
}

typedef struct job {
    const double *x;
    double g[2];
    double y;
    MPI_Op op;
    MPI_Comm data, ctl;
} job;

static void *run_fail(void *arg)
{
    job *j = arg;
    j->y = st_fail_rev(j->x, j->g, j->op, j->data, j->ctl, 1.0);
    return NULL;
}

/* the gradient of st_good at x by central differences */
static void fd_good(const double *x, MPI_Comm self, double *g)
{
    for (int i = 0; i < 2; i++) {
        double xp[2] = {x[0], x[1]}, xm[2] = {x[0], x[1]}, h = 1e-6;
        xp[i] += h;
        xm[i] -= h;
        g[i] = (st_good(xp, self) - st_good(xm, self)) / (2 * h);
    }
}

static int good_ok(const char *what, int rank, double y, const double *g, const double *x,
                   MPI_Comm self)
{
    double fd[2];
    fd_good(x, self, fd);
    int ok = fabs(y - st_good(x, self)) < 1e-14;
    for (int i = 0; i < 2; i++)
        ok &= fabs(g[i] - fd[i]) < 1e-7;
    if (!ok)
        fprintf(stderr, "rank %d: %s: st_good_rev %g, gradient %g %g, differences %g %g\n", rank,
                what, y, g[0], g[1], fd[0], fd[1]);
    return ok;
}

int main(int argc, char **argv)
{
    int provided = 0, rank = 0, size = 1, bad = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE || size < 2) {
        if (rank == 0)
            printf("test_ad_stale: needs 2 ranks and MPI_THREAD_MULTIPLE; skipped\n");
        MPI_Finalize();
        return 0;
    }
    MPI_Comm sub, data, ctl, self;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &sub);
    MPI_Op op;
    MPI_Op_create(user_op, 1, &op);
    const double x[2] = {0.7, -1.3};
    if (sub != MPI_COMM_NULL) {
        MPI_Comm_dup(sub, &data);
        MPI_Comm_dup(sub, &ctl);
        MPI_Comm_dup(MPI_COMM_SELF, &self);
        for (int round = 0; round < 2; round++) {
            job j = {x, {0, 0}, 0, op, data, ctl};
            if (rank == 0) {
                double g[2] = {0, 0};
                pthread_t th;
                if (round == 0) {
                    /* the failing sweep runs while the good one starts and ends */
                    pthread_create(&th, NULL, run_fail, &j);
                    struct timespec ts = {0, 200 * 1000 * 1000};
                    nanosleep(&ts, NULL);
                    double y = st_good_rev(x, g, self, 1.0);
                    bad |= !good_ok("beside a failing sweep", rank, y, g, x, self);
                    int go = 0;
                    MPI_Send(&go, 1, MPI_INT, 1, 1, ctl);
                    pthread_join(th, NULL);
                } else {
                    /* one after the other */
                    int go = 0;
                    MPI_Send(&go, 1, MPI_INT, 1, 1, ctl);
                    run_fail(&j);
                    double y = st_good_rev(x, g, self, 1.0);
                    bad |= !good_ok("after a failed sweep", rank, y, g, x, self);
                }
                if (!isnan(j.y)) {
                    fprintf(stderr, "rank 0: round %d: st_fail_rev returned %g, not NaN\n", round,
                            j.y);
                    bad = 1;
                }
            } else {
                /* rank 1 reads x through the message: its own x_b stays zero */
                run_fail(&j);
                if (fabs(j.y - (x[0] + 3 * x[1])) > 1e-14 || j.g[0] != 0 || j.g[1] != 0) {
                    fprintf(stderr, "rank 1: round %d: st_fail_rev %g, gradient %g %g\n", round,
                            j.y, j.g[0], j.g[1]);
                    bad = 1;
                }
            }
        }
        MPI_Comm_free(&self);
        MPI_Comm_free(&ctl);
        MPI_Comm_free(&data);
        MPI_Comm_free(&sub);
    }
    MPI_Op_free(&op);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_ad_stale: %s\n", any ? "FAILED" : "passed");
    MPI_Finalize();
    return any;
}
