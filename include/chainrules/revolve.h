/**
 * @file revolve.h
 * @brief Binomial checkpointing (Griewank and Walther's revolve): the schedule that
 *        reverses a time loop of `steps` steps with at most `snaps` stored states and the
 *        fewest repeated forward steps.
 *
 * The adjoint of a loop `for (i = 0; i < steps; i++) state = F_i(state);` needs the state
 * before every step, last first. Storing them all costs `steps` states; with `snaps`
 * snapshot slots the schedule stores some of them, restores one and runs the primal
 * forward again to rebuild the others. The schedule is binomial (Griewank 1992; Griewank
 * and Walther, "Algorithm 799: revolve", ACM TOMS 26(1), 2000): its number of forward
 * steps is the least of every schedule with `snaps` slots, cr_revolve_forward_steps().
 *
 * The caller owns the state and the slots; the schedule says what to do next, one
 * operation per call of cr_revolve_next():
 *
 * | action             | the caller                                                     |
 * |--------------------|----------------------------------------------------------------|
 * | CR_REVOLVE_STORE   | copies the current state (at step `op.step`) into `op.slot`    |
 * | CR_REVOLVE_RESTORE | copies slot `op.slot` into the state, now at step `op.step`    |
 * | CR_REVOLVE_ADVANCE | runs steps `op.step` .. `op.end - 1` (plain primal, no record) |
 * | CR_REVOLVE_REVERSE | runs step `op.step` with recording, then its adjoint           |
 * | CR_REVOLVE_DONE    | stops: every step's adjoint has run, step 0's last             |
 * | CR_REVOLVE_FAILED  | stops: misuse, see cr_revolve_status()                         |
 *
 * The first operation is STORE into slot 0 of step 0's state (the loop's input, set by the
 * caller); the REVERSE operations come in the order steps-1, steps-2, ..., 0, each with the
 * state at that step; after a REVERSE the current state is unspecified (the schedule
 * restores before it advances again). Slots are 0 .. snaps-1 and at most
 * min(snaps, steps) of them are used. With steps == 0 the first operation is DONE.
 *
 * @code
 * cr_revolve rv;
 * cr_revolve_op op;
 * if (cr_revolve_init(&rv, n, 20) != CR_OK) ...;
 * for (;;) {
 *     cr_revolve_action a = cr_revolve_next(&rv, &op);
 *     if (a == CR_REVOLVE_STORE)        memcpy(slot[op.slot], x, sizeof x);
 *     else if (a == CR_REVOLVE_RESTORE) memcpy(x, slot[op.slot], sizeof x);
 *     else if (a == CR_REVOLVE_ADVANCE) for (i = op.step; i < op.end; i++) step(i, x);
 *     else if (a == CR_REVOLVE_REVERSE) step_adjoint(op.step, x, x_b); // records, then adjoint
 *     else break;   // CR_REVOLVE_DONE (or CR_REVOLVE_FAILED: cr_revolve_status())
 * }
 * @endcode
 *
 * @note A cr_revolve is thread-confined; cr_revolve_forward_steps() is thread-safe.
 */
#ifndef CR_REVOLVE_H
#define CR_REVOLVE_H

#include "common.h"
#include "status.h"

CR_BEGIN_DECLS

/** What the caller does next; see the table of revolve.h. Append only. */
typedef enum cr_revolve_action {
    CR_REVOLVE_STORE = 1, /**< Copy the current state (at step `step`) into slot `slot`. */
    CR_REVOLVE_RESTORE,   /**< Copy slot `slot` into the current state, now at step `step`. */
    CR_REVOLVE_ADVANCE,   /**< Run the primal steps `step` .. `end - 1`, without recording. */
    CR_REVOLVE_REVERSE,   /**< Run step `step` with recording, then its adjoint. */
    CR_REVOLVE_DONE,      /**< Finished: every adjoint step has run. */
    CR_REVOLVE_FAILED     /**< Misuse (or an internal error): see cr_revolve_status(). */
} cr_revolve_action;

/** One operation of the schedule, filled by cr_revolve_next(). */
typedef struct cr_revolve_op {
    cr_revolve_action action; /**< What to do. */
    int64_t step;             /**< STORE/RESTORE: the state's step; ADVANCE: first step run;
                                   REVERSE: the step; DONE/FAILED: 0. */
    int64_t end;              /**< ADVANCE: one past the last step run (end > step); others:
                                   step (STORE, RESTORE), step + 1 (REVERSE), 0. */
    int32_t slot;             /**< STORE/RESTORE: the slot, 0 .. snaps-1; others: -1. */
} cr_revolve_op;

/**
 * The largest number of slots a cr_revolve keeps track of (its positions live in the
 * struct, which the caller stores). Schedules with more slots than steps use only `steps`
 * of them, so a larger `snaps` is refused only when `steps` is larger too.
 */
#define CR_REVOLVE_MAX_SNAPS 64

/**
 * A schedule in progress. Caller storage, set up by cr_revolve_init(); the fields are
 * private (described for debugging).
 */
typedef struct cr_revolve {
    uint32_t magic;                      /**< Set by cr_revolve_init(), to catch misuse. */
    cr_status status;                    /**< CR_OK, or why the schedule failed. */
    int32_t snaps;                       /**< Slots used: min(snaps, steps). */
    int32_t top;                         /**< Highest slot in use, -1 before the start. */
    int32_t done;                        /**< Nonzero once DONE has been returned. */
    int64_t steps;                       /**< Length of the loop. */
    int64_t end;                         /**< Steps end .. steps-1 have been reversed. */
    int64_t cur;                         /**< Step of the current state; -1 if unknown. */
    int64_t check[CR_REVOLVE_MAX_SNAPS]; /**< Step stored in each slot 0 .. top. */
} cr_revolve;

/**
 * Set up the schedule of a loop of `steps` steps with `snaps` slots.
 * @param[out] r     the schedule (caller storage).
 * @param[in]  steps the number of time steps, >= 0.
 * @param[in]  snaps the number of slots, >= 1; only min(snaps, steps) are used, which must
 *                   not exceed CR_REVOLVE_MAX_SNAPS.
 * @return CR_OK; CR_EINVAL if r is NULL, steps < 0, snaps < 1 or min(snaps, steps) >
 *         CR_REVOLVE_MAX_SNAPS. On error a non-NULL r is set up to return CR_REVOLVE_FAILED
 *         with that status.
 */
CR_API cr_status cr_revolve_init(cr_revolve *r, int64_t steps, int32_t snaps);

/**
 * The next operation of the schedule.
 * @param[in,out] r  the schedule.
 * @param[out]    op the operation (may be NULL when only the action is wanted; the
 *                   operation is then lost).
 * @return op->action: STORE, RESTORE, ADVANCE, REVERSE; then DONE, again on every later
 *         call; or FAILED if r is NULL (nothing written to r) or was not set up by
 *         cr_revolve_init() or its initialisation failed (cr_revolve_status()).
 */
CR_API cr_revolve_action cr_revolve_next(cr_revolve *r, cr_revolve_op *op);

/**
 * Why the schedule failed.
 * @param[in] r the schedule.
 * @return CR_OK while it has not; CR_EINVAL (bad arguments to cr_revolve_init()),
 *         CR_EMISUSE (r was not set up by cr_revolve_init()); CR_EINVAL for NULL.
 */
CR_API cr_status cr_revolve_status(const cr_revolve *r);

/**
 * The number of primal steps the schedule of (steps, snaps) runs: the steps of its
 * ADVANCE operations plus one recorded run per REVERSE. This is the binomial optimum:
 * with r the least integer such that binom(snaps + r, r) >= steps, the advanced steps
 * number r * steps - binom(snaps + r, r - 1) (Griewank and Walther 2000, Proposition 1),
 * and the recorded runs `steps` more; 0 for steps == 0.
 * @param[in] steps the number of time steps, >= 0.
 * @param[in] snaps the number of slots, >= 1 (any size: the count does not depend on
 *                  CR_REVOLVE_MAX_SNAPS).
 * @return the count; -1 if the arguments are invalid or the count exceeds INT64_MAX.
 * @note Thread-safe.
 */
CR_API int64_t cr_revolve_forward_steps(int64_t steps, int32_t snaps);

CR_END_DECLS

#endif /* CR_REVOLVE_H */
