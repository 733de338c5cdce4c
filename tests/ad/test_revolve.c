/*
 * Tests of binomial checkpointing (revolve): every schedule of 0..300 steps with 1..12
 * slots, and larger ones, run against a simulated state (a step counter and the slots'
 * contents): each adjoint step exactly once, in reverse order, from the right state; no
 * slot out of range; the forward steps equal to an independent dynamic program over all
 * checkpointing schedules and to the closed form evaluated here in 128-bit arithmetic.
 * End to end: the gradient of a 10^4-step ODE loop by revolve with 10 slots (and a 10^5-step
 * one with 20) equals the one from storing every state and central differences.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

/* ---------------------------------------------------------------------------------------
 * Running a schedule against a simulated state. */

typedef struct sim_result {
    int64_t forward;  /* ADVANCE steps + REVERSE runs */
    int64_t reverses; /* REVERSE operations */
    int32_t slots;    /* highest slot index used + 1 */
    int64_t stores, restores;
    int errors; /* violations; the first is printed */
} sim_result;

static void sim_error(sim_result *res, int64_t steps, int32_t snaps, const char *what,
                      const cr_revolve_op *op)
{
    if (res->errors++ == 0)
        printf("steps %lld snaps %d: %s (op %d step %lld end %lld slot %d)\n", (long long)steps,
               snaps, what, op != NULL ? (int)op->action : -1,
               op != NULL ? (long long)op->step : -1, op != NULL ? (long long)op->end : -1,
               op != NULL ? op->slot : -1);
}

/* Run the schedule; max_ops bounds the loop (a broken schedule could run forever). */
static sim_result simulate(int64_t steps, int32_t snaps, int64_t max_ops)
{
    sim_result res = {0};
    cr_revolve rv;
    if (cr_revolve_init(&rv, steps, snaps) != CR_OK) {
        sim_error(&res, steps, snaps, "init failed", NULL);
        return res;
    }
    int32_t nslots = snaps < 64 ? snaps : 64;
    int64_t slot[64];
    for (int i = 0; i < 64; i++)
        slot[i] = -1;
    int64_t cur = 0;          /* the state's step; -1: unspecified (after a REVERSE) */
    int64_t next = steps - 1; /* the next step whose adjoint must run */
    int64_t ops = 0;
    cr_revolve_op op;
    for (;;) {
        if (++ops > max_ops) {
            sim_error(&res, steps, snaps, "too many operations", NULL);
            return res;
        }
        cr_revolve_action a = cr_revolve_next(&rv, &op);
        if (a != op.action)
            sim_error(&res, steps, snaps, "returned action differs from op.action", &op);
        if (ops == 1 && steps > 0 && !(a == CR_REVOLVE_STORE && op.slot == 0 && op.step == 0))
            sim_error(&res, steps, snaps, "first operation is not STORE of step 0 in slot 0", &op);
        if (a == CR_REVOLVE_DONE) {
            if (next != -1)
                sim_error(&res, steps, snaps, "DONE before every adjoint step", &op);
            cr_revolve_op again;
            if (cr_revolve_next(&rv, &again) != CR_REVOLVE_DONE)
                sim_error(&res, steps, snaps, "not DONE again after DONE", &again);
            return res;
        }
        switch (a) {
        case CR_REVOLVE_STORE:
            if (op.slot < 0 || op.slot >= nslots || op.slot >= snaps) {
                sim_error(&res, steps, snaps, "slot out of range", &op);
                return res;
            }
            if (cur < 0 || op.step != cur || op.end != op.step)
                sim_error(&res, steps, snaps, "STORE of a state not at op.step", &op);
            slot[op.slot] = cur;
            if (op.slot + 1 > res.slots)
                res.slots = op.slot + 1;
            res.stores++;
            break;
        case CR_REVOLVE_RESTORE:
            if (op.slot < 0 || op.slot >= nslots || op.slot >= snaps) {
                sim_error(&res, steps, snaps, "slot out of range", &op);
                return res;
            }
            if (slot[op.slot] != op.step || op.end != op.step)
                sim_error(&res, steps, snaps, "RESTORE of a slot not holding op.step", &op);
            cur = slot[op.slot];
            res.restores++;
            break;
        case CR_REVOLVE_ADVANCE:
            if (cur < 0 || op.step != cur || op.end <= op.step || op.end > next || op.slot != -1)
                sim_error(&res, steps, snaps, "inconsistent ADVANCE", &op);
            res.forward += op.end - op.step;
            cur = op.end;
            break;
        case CR_REVOLVE_REVERSE:
            if (op.step != next || cur != op.step || op.end != op.step + 1 || op.slot != -1)
                sim_error(&res, steps, snaps, "REVERSE out of order or from the wrong state", &op);
            res.forward += 1;
            res.reverses++;
            next--;
            cur = -1;
            break;
        default:
            sim_error(&res, steps, snaps, "FAILED or unknown action", &op);
            return res;
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * The references. */

#define DP_L 300
#define DP_S 12

/* The least number of advanced steps over all checkpointing schedules, by dynamic
 * programming over the first checkpoint: with the state of the first step stored and s
 * slots in all, advance j steps, store, reverse the last l - j steps with s - 1 slots,
 * then the first j with s (Griewank 1992). F(0, s) = F(1, s) = 0; a single step needs no
 * slot (the state is current), longer ranges need one: F(l, 0) = infinity for l >= 2. */
static int64_t g_dp[DP_L + 1][DP_S + 1];

static void dp_fill(void)
{
    const int64_t inf = INT64_MAX / 4;
    for (int s = 0; s <= DP_S; s++) {
        g_dp[0][s] = 0;
        g_dp[1][s] = 0;
    }
    for (int l = 2; l <= DP_L; l++)
        g_dp[l][0] = inf;
    for (int s = 1; s <= DP_S; s++)
        for (int l = 2; l <= DP_L; l++) {
            int64_t best = inf;
            for (int j = 1; j < l; j++) {
                int64_t c = j + g_dp[l - j][s - 1] + g_dp[j][s];
                if (c < best)
                    best = c;
            }
            g_dp[l][s] = best;
        }
}

__extension__ typedef unsigned __int128 u128;

/* binom(n, k), saturated at 2^126, in 128-bit arithmetic (product over min(k, n-k)). */
static u128 binom128(u128 n, u128 k)
{
    const u128 lim = (u128)1 << 126;
    if (k > n - k)
        k = n - k;
    u128 b = 1;
    for (u128 i = 1; i <= k; i++) {
        u128 m = n - k + i;
        if (b > lim / m)
            return lim;
        b = b * m / i; /* exact: b * m = binom(n - k + i, i) * i */
        if (b >= lim)
            return lim;
    }
    return b;
}

/* The closed form (Griewank and Walther 2000; "Evaluating Derivatives", ch. 12): with r
 * the least integer such that beta(s, r) = binom(s + r, s) >= l, the least number of
 * advanced steps is r l - beta(s + 1, r - 1); plus one recorded run per step. -1 above
 * INT64_MAX. */
static int64_t closed_form(int64_t l, int64_t s)
{
    if (l <= 1)
        return l;
    u128 lo = 0, hi = (u128)(uint64_t)l; /* beta(s, 0) = 1 < l <= beta(s, l) */
    while (hi - lo > 1) {
        u128 mid = lo + (hi - lo) / 2;
        if (binom128((u128)(uint64_t)s + mid, mid) >= (u128)(uint64_t)l)
            hi = mid;
        else
            lo = mid;
    }
    u128 r = hi;
    u128 total = r * (u128)(uint64_t)l;
    total -= binom128((u128)(uint64_t)s + r, r - (u128)1);
    total += (u128)(uint64_t)l;
    return total > (u128)INT64_MAX ? -1 : (int64_t)total;
}

/* ---------------------------------------------------------------------------------------
 * Schedules. */

/* Every schedule of 0..300 steps with 1..12 slots. */
static void test_all_small_schedules(void **state)
{
    (void)state;
    dp_fill();
    int bad = 0;
    for (int32_t s = 1; s <= DP_S; s++) {
        for (int64_t l = 0; l <= DP_L; l++) {
            int64_t want = g_dp[l][s] + l;
            sim_result res = simulate(l, s, 10 * want + 10);
            bad += res.errors != 0;
            if (res.forward != want || res.reverses != l ||
                cr_revolve_forward_steps(l, s) != want || closed_form(l, s) != want ||
                res.slots > (l < s ? l : s)) {
                if (bad++ < 5)
                    printf("steps %lld snaps %d: forward %lld, forward_steps %lld, closed "
                           "form %lld, dynamic program %lld, slots %d\n",
                           (long long)l, s, (long long)res.forward,
                           (long long)cr_revolve_forward_steps(l, s), (long long)closed_form(l, s),
                           (long long)want, res.slots);
            }
        }
    }
    assert_int_equal(bad, 0);
    /* Known values: one slot recomputes from the start every time (l (l - 1) / 2), l - 1
     * slots store every state but the last (l - 1 advances). */
    assert_int_equal(cr_revolve_forward_steps(100, 1), 100 * 99 / 2 + 100);
    assert_int_equal(cr_revolve_forward_steps(100, 99), 99 + 100);
    assert_int_equal(cr_revolve_forward_steps(100, 1000), 99 + 100);
}

/* Larger schedules: 10^5 steps with 20 slots (and others); the same checks against the
 * closed form. */
static void test_large_schedules(void **state)
{
    (void)state;
    const struct {
        int64_t steps;
        int32_t snaps;
    } cases[] = {{100000, 20}, {100000, 3},  {54321, 5}, {1000000, 64},
                 {10000, 10},  {200000, 64}, {3003, 5},  {3004, 5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t want = closed_form(cases[i].steps, cases[i].snaps);
        sim_result res = simulate(cases[i].steps, cases[i].snaps, 10 * want);
        assert_int_equal(res.errors, 0);
        assert_int_equal(res.reverses, cases[i].steps);
        assert_int_equal(res.forward, want);
        assert_int_equal(cr_revolve_forward_steps(cases[i].steps, cases[i].snaps), want);
        assert_true(res.slots <= cases[i].snaps);
    }
    /* 10^5 steps, 20 slots: r = 6 (binom(25, 5) = 53130 < 10^5 <= binom(26, 6) = 230230),
     * 6 * 10^5 - binom(26, 5) = 534220 advances, plus 10^5 recorded runs. */
    assert_int_equal(cr_revolve_forward_steps(100000, 20), 600000 - 65780 + 100000);
}

/* The count near and beyond INT64_MAX: exact while it fits, -1 beyond; huge slot counts. */
static void test_forward_steps_range(void **state)
{
    (void)state;
    /* One slot: l (l + 1) / 2 in all; 2^32 - 1 steps give 2^63 - 2^31, 2^32 overflow. */
    assert_true(cr_revolve_forward_steps(4294967295, 1) == INT64_C(9223372034707292160));
    assert_int_equal(cr_revolve_forward_steps(4294967296, 1), -1);
    assert_int_equal(cr_revolve_forward_steps(INT64_MAX, 1), -1);
    const int64_t big[] = {INT64_C(1000000000000000),
                           INT64_C(1000000000000000000),
                           INT64_MAX,
                           INT64_MAX / 3,
                           INT64_C(12345678901),
                           INT64_C(4611686018427387904),
                           INT64_C(3037000499),
                           INT64_C(999999999989)};
    const int32_t snaps[] = {2, 3, 5, 7, 12, 20, 40, 64, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        for (size_t j = 0; j < sizeof snaps / sizeof snaps[0]; j++)
            assert_true(cr_revolve_forward_steps(big[i], snaps[j]) ==
                        closed_form(big[i], snaps[j]));
    /* Some of these fit: the schedule of 10^15 steps with 20 slots is about 10^16. */
    assert_true(cr_revolve_forward_steps(INT64_C(1000000000000000), 20) > 0);
    /* Slots beyond the steps do not matter: one advance per step but the last. */
    assert_int_equal(cr_revolve_forward_steps(1000, INT32_MAX), 1999);
    assert_true(cr_revolve_forward_steps(INT64_MAX / 4, INT32_MAX) ==
                closed_form(INT64_MAX / 4, INT32_MAX));
    assert_int_equal(cr_revolve_forward_steps(0, 1), 0);
    assert_int_equal(cr_revolve_forward_steps(1, 1), 1);
    assert_int_equal(cr_revolve_forward_steps(-1, 1), -1);
    assert_int_equal(cr_revolve_forward_steps(10, 0), -1);
    assert_int_equal(cr_revolve_forward_steps(10, -3), -1);
}

/* A schedule of INT64_MAX steps starts sensibly: stores at increasing steps in increasing
 * slots, advances within range, and nothing overflows (only its first operations run). */
static void test_huge_schedule_start(void **state)
{
    (void)state;
    const int32_t snaps[] = {1, 2, 20, 64};
    for (size_t k = 0; k < 4; k++) {
        cr_revolve rv;
        assert_int_equal(cr_revolve_init(&rv, INT64_MAX, snaps[k]), CR_OK);
        cr_revolve_op op;
        int64_t cur = 0, last_store = -1;
        int32_t last_slot = -1;
        int reversed = 0;
        /* STORE 0, then (ADVANCE, STORE) into each further slot, ADVANCE, REVERSE. */
        for (int i = 0; i < 2 * snaps[k] + 1 && !reversed; i++) {
            cr_revolve_action a = cr_revolve_next(&rv, &op);
            if (a == CR_REVOLVE_REVERSE) { /* the last step, with all slots in use */
                assert_true(op.step == INT64_MAX - 1 && cur == op.step);
                reversed = 1;
                continue;
            }
            if (a == CR_REVOLVE_STORE) {
                assert_true(op.step == cur && op.step > last_store);
                assert_int_equal(op.slot, last_slot + 1);
                assert_true(op.slot < snaps[k]);
                last_store = op.step;
                last_slot = op.slot;
            } else {
                assert_int_equal(a, CR_REVOLVE_ADVANCE);
                assert_true(op.step == cur && op.end > op.step && op.end < INT64_MAX);
                cur = op.end;
            }
        }
        assert_true(reversed);
        assert_int_equal(last_slot, snaps[k] - 1);
    }
}

/* Misuse: bad arguments, too many slots for the struct, a struct never initialised, NULL;
 * the op may be NULL. */
static void test_misuse(void **state)
{
    (void)state;
    cr_revolve rv;
    cr_revolve_op op;
    assert_int_equal(cr_revolve_init(&rv, -1, 3), CR_EINVAL);
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_FAILED);
    assert_int_equal(op.action, CR_REVOLVE_FAILED);
    assert_int_equal(cr_revolve_status(&rv), CR_EINVAL);
    assert_int_equal(cr_revolve_init(&rv, 10, 0), CR_EINVAL);
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_FAILED);
    assert_int_equal(cr_revolve_init(&rv, 10, -5), CR_EINVAL);
    assert_int_equal(cr_revolve_init(NULL, 10, 2), CR_EINVAL);
    assert_int_equal(cr_revolve_next(NULL, &op), CR_REVOLVE_FAILED);
    assert_int_equal(cr_revolve_status(NULL), CR_EINVAL);
    /* More slots than the struct holds: refused only if there are more steps too. */
    assert_int_equal(cr_revolve_init(&rv, 1000, CR_REVOLVE_MAX_SNAPS + 1), CR_EINVAL);
    assert_int_equal(cr_revolve_next(&rv, NULL), CR_REVOLVE_FAILED);
    assert_int_equal(cr_revolve_init(&rv, 50, 1000), CR_OK);
    assert_int_equal(cr_revolve_status(&rv), CR_OK);
    sim_result res = simulate(50, 1000, 1000);
    assert_int_equal(res.errors, 0);
    assert_int_equal(res.forward, 49 + 50);
    assert_int_equal(cr_revolve_init(&rv, CR_REVOLVE_MAX_SNAPS, INT32_MAX), CR_OK);
    /* A struct cr_revolve_init() never saw. */
    memset(&rv, 0xA5, sizeof rv);
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_FAILED);
    assert_int_equal(cr_revolve_status(&rv), CR_EMISUSE);
    memset(&rv, 0, sizeof rv);
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_FAILED);
    /* Fields broken by the caller mid-schedule. */
    assert_int_equal(cr_revolve_init(&rv, 100, 4), CR_OK);
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_STORE);
    rv.top = 7;
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_FAILED);
    assert_int_equal(cr_revolve_status(&rv), CR_EMISUSE);
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_FAILED); /* it stays failed */
    assert_int_equal(cr_revolve_init(&rv, 100, 4), CR_OK);
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_STORE);
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_ADVANCE);
    rv.snaps = 1; /* no slot left for the STORE that comes next */
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_FAILED);
    assert_int_equal(cr_revolve_status(&rv), CR_EMISUSE);
    /* Zero steps: DONE at once, and again. */
    assert_int_equal(cr_revolve_init(&rv, 0, 1), CR_OK);
    assert_int_equal(cr_revolve_next(&rv, &op), CR_REVOLVE_DONE);
    assert_int_equal(cr_revolve_next(&rv, NULL), CR_REVOLVE_DONE);
    /* The op is optional. */
    assert_int_equal(cr_revolve_init(&rv, 3, 2), CR_OK);
    int n = 0;
    while (cr_revolve_next(&rv, NULL) != CR_REVOLVE_DONE && n < 100)
        n++;
    assert_true(n > 0 && n < 100);
}

/* ---------------------------------------------------------------------------------------
 * End to end: the gradient of a time loop. The state (x, y, z) of a damped pendulum driving
 * a third variable, by explicit Euler with h = 10^-3:
 *   x' = y,  y' = -a sin x - b y,  z' = c x y - z,
 * and J = x_N^2 + y_N + sin z_N after N = 10^4 steps; the gradient is with respect to the
 * initial state and (a, b, c). */

#define ODE_H 1e-3

typedef struct ode_par {
    double a, b, c;
} ode_par;

static void ode_step(double *u, const ode_par *p)
{
    double x = u[0], y = u[1], z = u[2];
    u[0] = x + ODE_H * y;
    u[1] = y + ODE_H * (-p->a * sin(x) - p->b * y);
    u[2] = z + ODE_H * (p->c * x * y - z);
}

/* The step's adjoint at the input state u: u_b (the output's adjoint) becomes the input's,
 * and the parameters' adjoints are added to p_b. Hand-written. */
static void ode_step_adjoint(const double *u, const ode_par *p, double *u_b, double *p_b)
{
    double x = u[0], y = u[1];
    double xb = u_b[0], yb = u_b[1], zb = u_b[2];
    u_b[0] = xb + yb * ODE_H * (-p->a * cos(x)) + zb * ODE_H * p->c * y;
    u_b[1] = xb * ODE_H + yb * (1.0 - ODE_H * p->b) + zb * ODE_H * p->c * x;
    u_b[2] = zb * (1.0 - ODE_H);
    p_b[0] += yb * ODE_H * (-sin(x));
    p_b[1] += yb * ODE_H * (-y);
    p_b[2] += zb * ODE_H * x * y;
}

static double ode_objective(const double *u)
{
    return u[0] * u[0] + u[1] + sin(u[2]);
}

static void ode_objective_grad(const double *u, double *u_b)
{
    u_b[0] = 2.0 * u[0];
    u_b[1] = 1.0;
    u_b[2] = cos(u[2]);
}

/* J as a function of the six inputs (u0, a, b, c), for the differences. */
static double ode_run(const double *in, int64_t n)
{
    double u[3] = {in[0], in[1], in[2]};
    ode_par p = {in[3], in[4], in[5]};
    for (int64_t i = 0; i < n; i++)
        ode_step(u, &p);
    return ode_objective(u);
}

/* The gradient from every state stored. */
static double ode_grad_store_all(const double *in, int64_t n, double *grad)
{
    double *states = malloc((size_t)(n + 1) * 3 * sizeof *states);
    assert_non_null(states);
    ode_par p = {in[3], in[4], in[5]};
    memcpy(states, in, 3 * sizeof *states);
    for (int64_t i = 0; i < n; i++) {
        memcpy(states + 3 * (i + 1), states + 3 * i, 3 * sizeof *states);
        ode_step(states + 3 * (i + 1), &p);
    }
    double J = ode_objective(states + 3 * n);
    double u_b[3], p_b[3] = {0, 0, 0};
    ode_objective_grad(states + 3 * n, u_b);
    for (int64_t i = n; i-- > 0;)
        ode_step_adjoint(states + 3 * i, &p, u_b, p_b);
    memcpy(grad, u_b, sizeof u_b);
    memcpy(grad + 3, p_b, sizeof p_b);
    free(states);
    return J;
}

/* The gradient by revolve with `snaps` slots. The REVERSE operation records the step on a
 * value stack (the inputs its adjoint needs, and the step number) and runs the adjoint
 * from what it pops, as generated code does. The forward steps and the slots used are
 * reported. */
static double ode_grad_revolve(const double *in, int64_t n, int32_t snaps, double *grad,
                               int64_t *forward, int32_t *slots_used, size_t *stack_peak)
{
    double u[3] = {in[0], in[1], in[2]};
    ode_par p = {in[3], in[4], in[5]};
    double(*slot)[3] = malloc((size_t)snaps * sizeof *slot);
    assert_non_null(slot);
    double u_b[3] = {0, 0, 0}, p_b[3] = {0, 0, 0}, J = (double)NAN;
    cr_adstack st;
    cr_adstack_init(&st);
    cr_revolve rv;
    assert_int_equal(cr_revolve_init(&rv, n, snaps), CR_OK);
    cr_revolve_op op;
    *forward = 0;
    *slots_used = 0;
    for (int done = 0; !done;) {
        switch (cr_revolve_next(&rv, &op)) {
        case CR_REVOLVE_STORE:
            memcpy(slot[op.slot], u, sizeof u);
            if (op.slot + 1 > *slots_used)
                *slots_used = op.slot + 1;
            break;
        case CR_REVOLVE_RESTORE:
            memcpy(u, slot[op.slot], sizeof u);
            break;
        case CR_REVOLVE_ADVANCE:
            for (int64_t i = op.step; i < op.end; i++)
                ode_step(u, &p);
            *forward += op.end - op.step;
            break;
        case CR_REVOLVE_REVERSE: {
            if (op.step == n - 1) { /* the first REVERSE: the state is the last one's input */
                double v[3] = {u[0], u[1], u[2]};
                ode_step(v, &p);
                J = ode_objective(v);
                ode_objective_grad(v, u_b);
            }
            /* Record: what the adjoint needs (the input state) and the step number. */
            cr_adstack_push_i64(&st, op.step);
            for (int k = 0; k < 3; k++)
                cr_adstack_push_f64(&st, u[k]);
            ode_step(u, &p);
            *forward += 1;
            /* Adjoint, from the record. */
            double w[3];
            for (int k = 3; k-- > 0;)
                w[k] = cr_adstack_pop_f64(&st);
            assert_true(cr_adstack_pop_i64(&st) == op.step);
            ode_step_adjoint(w, &p, u_b, p_b);
            break;
        }
        case CR_REVOLVE_DONE:
            done = 1;
            break;
        default:
            fail_msg("revolve failed: %s", cr_status_name(cr_revolve_status(&rv)));
        }
    }
    assert_false(cr_adstack_failed(&st));
    *stack_peak = cr_adstack_peak_bytes(&st);
    cr_adstack_deinit(&st);
    free(slot);
    memcpy(grad, u_b, sizeof u_b);
    memcpy(grad + 3, p_b, sizeof p_b);
    return J;
}

/* The gradient of n steps by revolve with `snaps` slots against every state stored (to
 * 10^-12) and central differences (step 10^-6 relative: truncation and rounding stay near
 * 10^-9 relative for this smooth map; checked to 10^-7). */
static void check_ode_gradient(int64_t n, int32_t snaps)
{
    const double in[6] = {0.9, -0.3, 0.2, 2.0, 0.15, 0.8};
    double g_all[6], g_rev[6];
    double J_all = ode_grad_store_all(in, n, g_all);
    int64_t forward;
    int32_t slots;
    size_t stack_peak;
    double J_rev = ode_grad_revolve(in, n, snaps, g_rev, &forward, &slots, &stack_peak);
    /* The same operations in the same order: equal but for floating-point contraction,
     * which a compiler may apply differently to the copies of ode_step it inlines. */
    assert_true(fabs(J_rev - J_all) <= 1e-13 * fabs(J_all));
    assert_true(fabs(ode_run(in, n) - J_all) <= 1e-13 * fabs(J_all));
    for (int k = 0; k < 6; k++)
        assert_true(fabs(g_rev[k] - g_all[k]) <= 1e-12 * (1.0 + fabs(g_all[k])));
    assert_int_equal(forward, cr_revolve_forward_steps(n, snaps));
    assert_true(slots <= snaps);
    assert_int_equal(stack_peak, 4 * 8); /* one step recorded at a time */
    for (int k = 0; k < 6; k++) {
        double e = 1e-6 * (1.0 + fabs(in[k]));
        double xp[6], xm[6];
        memcpy(xp, in, sizeof xp);
        memcpy(xm, in, sizeof xm);
        xp[k] += e;
        xm[k] -= e;
        double fd = (ode_run(xp, n) - ode_run(xm, n)) / (2.0 * e);
        assert_true(fabs(fd - g_rev[k]) <= 1e-7 * (1.0 + fabs(fd)));
    }
}

/* 10^4 steps with 10 slots, and with 1, 2, 3 and 64 (1 slot on a shorter loop: its
 * schedule is quadratic). */
static void test_ode_gradient_end_to_end(void **state)
{
    (void)state;
    check_ode_gradient(10000, 10);
    check_ode_gradient(10000, 2);
    check_ode_gradient(10000, 3);
    check_ode_gradient(10000, 64);
    check_ode_gradient(500, 1);
}

/* A long loop: 10^5 steps with 20 slots (734 220 primal runs, 20 states and one step's
 * records in memory instead of 10^5 states). */
static void test_ode_gradient_long_loop(void **state)
{
    (void)state;
    check_ode_gradient(100000, 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_small_schedules),
        cmocka_unit_test(test_large_schedules),
        cmocka_unit_test(test_forward_steps_range),
        cmocka_unit_test(test_huge_schedule_start),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_ode_gradient_end_to_end),
        cmocka_unit_test(test_ode_gradient_long_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
