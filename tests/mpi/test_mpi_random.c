/*
 * Random programs on 2 to 4 ranks: each rank holds a vector of L scalar variables; a
 * program (the same sequence on every rank, drawn from a seed) interleaves random local
 * operations with random communications of chainrules-mpi, whose results are folded back
 * into the vector; the objective is the weighted sum of every rank's vector. Its gradient
 * on each rank must equal the gradient of the same program run serially on one tape (the
 * communications written out as data movement) and central differences of the distributed
 * program.
 */
#include "mpi_ops.h"

static cr_ctx *g_ctx;
static int g_rank, g_p;
static size_t g_L;

#define NSTEPS 10
#define NSEEDS 4

typedef struct step {
    int kind; /* 0..2: a local operation; 3: a communication */
    int op;   /* the communication */
} step;

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

static void draw(uint64_t seed, step *prog)
{
    uint64_t s = seed;
    for (int k = 0; k < NSTEPS; k++) {
        prog[k].kind = (int)(lcg(&s) % 5u) < 2 ? (int)(lcg(&s) % 3u) : 3;
        prog[k].op = (int)(lcg(&s) % (uint64_t)OP_COUNT);
    }
}

/* A local operation on one rank's vector s (L elements). */
static void local(cr_tape *t, int kind, cr_var *s, size_t L)
{
    cr_var o[MAXL];
    for (size_t i = 0; i < L; i++) {
        cr_var a = s[i], b = s[(i + 1) % L], c = s[(i + 2) % L];
        if (kind == 0)
            o[i] = cr_add(t, cr_sin(t, a), cr_mul(t, cr_const(0.3), b));
        else if (kind == 1)
            o[i] = cr_add(t, cr_mul(t, cr_mul(t, a, c), cr_const(0.5)), cr_const(0.1));
        else
            o[i] = cr_sub(t, cr_sqrt(t, cr_add(t, cr_mul(t, a, a), cr_const(1.0))),
                          cr_mul(t, cr_const(0.2), a));
    }
    memcpy(s, o, L * sizeof *s);
}

/* Fold a communication's result y (n elements) into s. */
static void fold(cr_tape *t, cr_var *s, size_t L, const cr_var *y, size_t n)
{
    for (size_t i = 0; i < L && n > 0; i++)
        s[i] = cr_add(t, s[i], cr_mul(t, cr_const(0.5), cr_cos(t, y[i % n])));
}

/* The program on this rank, from its inputs x. */
static cr_status dist_prog(cr_tape *t, const step *prog, const double *x, cr_var *xs, cr_var *J)
{
    size_t L = g_L;
    vec *u = calloc(2, sizeof *u);
    if (u == NULL)
        return CR_ENOMEM;
    vec *y = u + 1;
    cr_tape_inputs(t, x, L, xs);
    memcpy(u->s, xs, L * sizeof *xs);
    u->mode = M_SCALAR;
    u->n = L;
    cr_status st = CR_OK;
    for (int k = 0; k < NSTEPS; k++) {
        if (prog[k].kind < 3) {
            local(t, prog[k].kind, u->s, L);
            continue;
        }
        cr_status s1 = dist_op(t, prog[k].op, u, y, MPI_COMM_WORLD);
        st = st != CR_OK ? st : s1;
        fold(t, u->s, L, y->s, y->n);
    }
    cr_var local_sum = cr_const(0.0);
    for (size_t i = 0; i < L; i++)
        local_sum = cr_add(t, local_sum, cr_mul(t, cr_const(weight(g_rank, i)), u->s[i]));
    cr_status s2 = cr_mpi_allreduce(t, cr_mpi_in_vars(&local_sum, 1), cr_mpi_out_vars(J, 1),
                                    MPI_SUM, NULL, MPI_COMM_WORLD);
    *J = cr_mpi_objective(t, *J, 0, MPI_COMM_WORLD);
    free(u);
    return st != CR_OK ? st : s2;
}

/* The program serially on every rank's inputs xall; its gradient into g. */
static double serial_prog(const step *prog, const double *xall, double *g)
{
    int p = g_p;
    size_t L = g_L, N = (size_t)p * L;
    cr_tape *t;
    if (cr_tape_new(g_ctx, NULL, &t) != CR_OK)
        return NAN;
    cr_var(*S)[MAXL] = calloc(MAXP, sizeof *S);
    cr_var(*Y)[MAXY] = calloc(MAXP, sizeof *Y);
    cr_var *xs = calloc(N, sizeof *xs);
    size_t ny[MAXP];
    double J = NAN;
    if (S != NULL && Y != NULL && xs != NULL) {
        cr_tape_inputs(t, xall, N, xs);
        for (int r = 0; r < p; r++)
            memcpy(S[r], xs + (size_t)r * L, L * sizeof *xs);
        for (int k = 0; k < NSTEPS; k++) {
            if (prog[k].kind < 3) {
                for (int r = 0; r < p; r++)
                    local(t, prog[k].kind, S[r], L);
                continue;
            }
            serial_op(t, prog[k].op, p, L, S, Y, ny);
            for (int r = 0; r < p; r++)
                fold(t, S[r], L, Y[r], ny[r]);
        }
        cr_var acc = cr_const(0.0);
        for (int r = 0; r < p; r++)
            for (size_t i = 0; i < L; i++)
                acc = cr_add(t, acc, cr_mul(t, cr_const(weight(r, i)), S[r][i]));
        J = acc.v;
        if (cr_tape_gradient(t, acc, xs, N, g) != CR_OK)
            J = NAN;
    }
    free(S);
    free(Y);
    free(xs);
    cr_tape_free(t);
    return J;
}

static double dist_value(const step *prog, const double *x)
{
    cr_tape *t;
    cr_var xs[MAXL], J;
    if (cr_tape_new(g_ctx, NULL, &t) != CR_OK)
        return NAN;
    cr_status st = dist_prog(t, prog, x, xs, &J);
    cr_status sa = cr_mpi_agree(t, MPI_COMM_WORLD);
    double v = st == CR_OK && sa == CR_OK ? J.v : (double)NAN;
    cr_tape_free(t);
    return v;
}

static void test_seed(uint64_t seed)
{
    step prog[NSTEPS];
    draw(seed, prog);
    size_t L = g_L;
    double xall[MAXP * MAXL], gser[MAXP * MAXL], x[MAXL], g[MAXL];
    for (int r = 0; r < g_p; r++)
        for (size_t i = 0; i < L; i++)
            xall[(size_t)r * L + i] = input_value(r, i, L) + 0.05 * (double)(seed % 7u);
    memcpy(x, xall + (size_t)g_rank * L, L * sizeof *x);
    double Js = serial_prog(prog, xall, gser);
    CHECK(Js == Js, "seed %llu: serial program failed", (unsigned long long)seed);
    cr_tape *t;
    if (cr_tape_new(g_ctx, NULL, &t) != CR_OK)
        return;
    cr_var xs[MAXL], J;
    cr_status st = dist_prog(t, prog, x, xs, &J);
    CHECK(st == CR_OK, "seed %llu: recording failed: %s", (unsigned long long)seed,
          cr_tape_errmsg(t));
    st = cr_mpi_agree(t, MPI_COMM_WORLD);
    if (st == CR_OK)
        st = cr_tape_gradient(t, J, xs, L, g);
    CHECK(st == CR_OK, "seed %llu: gradient failed: %s", (unsigned long long)seed,
          cr_tape_errmsg(t));
    CHECK(close_to(J.v, Js, 1e-12, 1e-12), "seed %llu: J = %.17g, serial %.17g",
          (unsigned long long)seed, J.v, Js);
    for (size_t i = 0; i < L && st == CR_OK; i++)
        CHECK(close_to(g[i], gser[(size_t)g_rank * L + i], 1e-11, 1e-12),
              "seed %llu: dJ/dx[%d][%zu] = %.17g, serial %.17g", (unsigned long long)seed, g_rank,
              i, g[i], gser[(size_t)g_rank * L + i]);
    cr_tape_free(t);
    /* Central differences along one coordinate of each rank. */
    for (int q = 0; q < g_p; q++) {
        size_t i = (size_t)(seed + (uint64_t)q) % L;
        double h = 1e-6, xp[MAXL];
        memcpy(xp, x, L * sizeof *x);
        if (g_rank == q)
            xp[i] = x[i] + h;
        double jp = dist_value(prog, xp);
        if (g_rank == q)
            xp[i] = x[i] - h;
        double jm = dist_value(prog, xp);
        double fd = (jp - jm) / (2 * h), want = gser[(size_t)q * L + i];
        CHECK(close_to(fd, want, 1e-5, 1e-7),
              "seed %llu: central difference along x[%d][%zu] = %.12g, gradient %.12g",
              (unsigned long long)seed, q, i, fd, want);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_p);
    if (g_p > MAXP) {
        MPI_Finalize();
        return 1;
    }
    g_L = (size_t)NPER * (size_t)(g_p + 1);
    if (cr_ctx_new(NULL, &g_ctx) != CR_OK) {
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    for (uint64_t seed = 1; seed <= NSEEDS; seed++)
        test_seed(seed * 7919u + (uint64_t)g_p);
    int fails = 0, checks = 0;
    MPI_Allreduce(&g_fail, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g_checks, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_mpi_random on %d ranks: %d programs of %d steps: %d checks, %d failed\n", g_p,
               NSEEDS, NSTEPS, checks, fails);
    cr_ctx_free(g_ctx);
    MPI_Finalize();
    return fails == 0 ? 0 : 1;
}
