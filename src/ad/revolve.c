/*
 * Binomial checkpointing (Griewank 1992; Griewank and Walther, ACM TOMS 26(1), 2000):
 * the schedule as a state machine that hands out one operation per call, and the count
 * of its forward steps. Written from the published recursion and cost formula.
 *
 * Notation: beta(s, r) = binom(s + r, r) is the largest number of steps that s slots
 * reverse when no step is advanced more than r times. For l steps and s slots, r(l, s) is
 * the least r with beta(s, r) >= l, and the least number of advanced steps is
 * p(l, s) = r l - beta(s + 1, r - 1) (Griewank and Walther 2000, Proposition 1). p is convex and
 * piecewise linear in l, with slope r on beta(s, r - 1) < l <= beta(s, r).
 *
 * The schedule: with the state of step a in a slot and the steps a .. e-1 to reverse with s
 * slots (that one included), advance a to a + j, store there and reverse a + j .. e-1 with
 * s - 1 slots, then restore a and reverse a .. a+j-1 with s slots. Its cost is
 * j + p(l - j, s - 1) + p(j, s) with l = e - a; by the convexity of p it is least (p(l, s))
 * whenever the tail l - j lies in [beta(s-1, r-1), beta(s-1, r)] (slope r) and the head j
 * in [beta(s, r-2), beta(s, r-1)] (slope r - 1); these intervals meet because
 * beta(s, r) = beta(s, r-1) + beta(s-1, r). The split taken is the largest such j,
 * min(beta(s, r-1), l - beta(s-1, r-1)), which lies in 1 .. l-1. A tail of one step is
 * reversed at once, without being stored.
 */
#include <string.h>

#include <chainrules/revolve.h>

#define REVOLVE_MAGIC 0x52564C56u /* "RVLV" */

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* min(binom(n, k), cap), for k <= n. The product runs over the smaller of k and n - k, and
 * stops as soon as it reaches cap: its partial values binom(n - k + i, i) grow with i. */
static uint64_t binom_cap(uint64_t n, uint64_t k, uint64_t cap)
{
    if (k > n - k)
        k = n - k;
    uint64_t b = 1;
    for (uint64_t i = 1; i <= k; i++) {
        // b * (n - k + i) / i is exact; divide first by the common factors so that only
        // the result has to fit.
        uint64_t g = gcd_u64(b, i);
        uint64_t bi = b / g, ii = i / g, m = (n - k + i) / ii; // ii divides n - k + i
        if (bi > cap / m)
            return cap;
        b = bi * m;
        if (b >= cap)
            return cap;
    }
    return b;
}

/* beta(s, r) = binom(s + r, r), capped, for r >= 0. */
static uint64_t beta_cap(int64_t s, int64_t r, uint64_t cap)
{
    return binom_cap((uint64_t)s + (uint64_t)r, (uint64_t)r, cap);
}

/* r(l, s): the least r with beta(s, r) >= l, for l >= 2, s >= 1 (so r >= 1, and
 * beta(s, l-1) >= l bounds it). A doubling search then bisection: O(log r) binomials of
 * O(min(s, r)) terms. */
static int64_t reps(int64_t l, int64_t s)
{
    uint64_t ul = (uint64_t)l;
    int64_t lo = 0, hi = 1; // beta(s, lo) = 1 < l
    while (beta_cap(s, hi, ul) < ul) {
        lo = hi;
        hi = hi > (l - 1) / 2 ? l - 1 : 2 * hi;
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (beta_cap(s, mid, ul) >= ul)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* The split j of l >= 2 steps with s >= 1 slots (see the top of the file). */
static int64_t split(int64_t l, int64_t s)
{
    if (s == 1)
        return l - 1;
    int64_t r = reps(l, s); // >= 1 since l >= 2
    // Both are below l (beta(s-1, r-1) <= beta(s, r-1) < l), so no cap is reached.
    int64_t head = (int64_t)beta_cap(s, r - 1, UINT64_MAX);
    int64_t tail = (int64_t)beta_cap(s - 1, r - 1, UINT64_MAX);
    int64_t j = head < l - tail ? head : l - tail;
    // 1 <= j <= l - 1 holds (beta(s, r-1) >= 1 and l - beta(s-1, r-1) > beta(s, r-2) >= 0;
    // beta(s-1, r-1) >= 1); the clamps only guarantee a well-formed schedule regardless.
    if (j < 1)
        j = 1;
    if (j > l - 1)
        j = l - 1;
    return j;
}

int64_t cr_revolve_forward_steps(int64_t steps, int32_t snaps)
{
    if (steps < 0 || snaps < 1)
        return -1;
    if (steps <= 1)
        return steps;
    int64_t r = reps(steps, snaps);
    uint64_t l = (uint64_t)steps, ur = (uint64_t)r;
    // p(l, s) + l >= r l / 2 + l: beta(s+1, r-1) = sum_{i<r} beta(s, i) is a sum of a convex
    // sequence from 1 to beta(s, r-1) <= l - 1, so at most r l / 2. Hence r l >= 2^64
    // means an answer above INT64_MAX.
    if (ur > UINT64_MAX / l)
        return -1;
    uint64_t rl = ur * l;
    uint64_t b = binom_cap((uint64_t)snaps + ur, ur - 1, UINT64_MAX); // beta(s+1, r-1) < rl
    uint64_t p = rl - b;
    if (p > (uint64_t)INT64_MAX - l)
        return -1;
    return (int64_t)(p + l);
}

static cr_revolve_action emit(cr_revolve_op *op, cr_revolve_action a, int64_t step, int64_t end,
                              int32_t slot)
{
    if (op != NULL) {
        op->action = a;
        op->step = step;
        op->end = end;
        op->slot = slot;
    }
    return a;
}

static cr_revolve_action failed(cr_revolve *r, cr_revolve_op *op, cr_status st)
{
    if (r != NULL && r->status == CR_OK)
        r->status = st;
    return emit(op, CR_REVOLVE_FAILED, 0, 0, -1);
}

cr_status cr_revolve_init(cr_revolve *r, int64_t steps, int32_t snaps)
{
    if (r == NULL)
        return CR_EINVAL;
    memset(r, 0, sizeof *r);
    r->magic = REVOLVE_MAGIC;
    r->top = -1;
    r->cur = -1;
    if (steps < 0 || snaps < 1) {
        r->status = CR_EINVAL;
        return CR_EINVAL;
    }
    int64_t used = steps < snaps ? steps : snaps;
    if (used > CR_REVOLVE_MAX_SNAPS) {
        r->status = CR_EINVAL;
        return CR_EINVAL;
    }
    r->snaps = used < 1 ? 1 : (int32_t)used;
    r->steps = steps;
    r->end = steps;
    return CR_OK;
}

cr_status cr_revolve_status(const cr_revolve *r)
{
    if (r == NULL)
        return CR_EINVAL;
    if (r->magic != REVOLVE_MAGIC)
        return CR_EMISUSE;
    return r->status;
}

cr_revolve_action cr_revolve_next(cr_revolve *r, cr_revolve_op *op)
{
    if (r == NULL)
        return emit(op, CR_REVOLVE_FAILED, 0, 0, -1);
    if (r->magic != REVOLVE_MAGIC) {
        r->status = CR_EMISUSE; // caller storage that cr_revolve_init() never saw
        return emit(op, CR_REVOLVE_FAILED, 0, 0, -1);
    }
    if (r->status != CR_OK)
        return failed(r, op, r->status);
    if (r->done)
        return emit(op, CR_REVOLVE_DONE, 0, 0, -1);
    if (r->top < 0) { // the start: store the caller's state of step 0
        if (r->steps == 0) {
            r->done = 1;
            return emit(op, CR_REVOLVE_DONE, 0, 0, -1);
        }
        r->top = 0;
        r->check[0] = 0;
        r->cur = 0;
        return emit(op, CR_REVOLVE_STORE, 0, 0, 0);
    }
    // Fields changed by the caller would break the invariants below: refuse them.
    if (r->top >= r->snaps || r->snaps > CR_REVOLVE_MAX_SNAPS || r->end < 0 || r->end > r->steps)
        return failed(r, op, CR_EMISUSE);
    for (;;) {
        int64_t a = r->check[r->top];
        if (r->end <= a) { // this slot's range is reversed: free the slot
            if (r->top == 0) {
                r->done = 1;
                return emit(op, CR_REVOLVE_DONE, 0, 0, -1);
            }
            r->top--;
            continue;
        }
        if (r->cur == r->end - 1) { // the state is at the last step left: reverse it
            int64_t k = r->end - 1;
            r->end = k;
            r->cur = -1;
            return emit(op, CR_REVOLVE_REVERSE, k, k + 1, -1);
        }
        if (r->cur < a || r->cur >= r->end) {
            r->cur = a;
            return emit(op, CR_REVOLVE_RESTORE, a, a, r->top);
        }
        if (r->cur > a) { // just advanced past a: keep this state in the next slot
            if (r->top + 1 >= r->snaps)
                return failed(r, op, CR_EMISUSE);
            r->top++;
            r->check[r->top] = r->cur;
            return emit(op, CR_REVOLVE_STORE, r->cur, r->cur, r->top);
        }
        int64_t j = split(r->end - a, (int64_t)r->snaps - r->top);
        r->cur = a + j;
        return emit(op, CR_REVOLVE_ADVANCE, a, a + j, -1);
    }
}
