/*
 * The fault-injecting, leak-tracking allocation hook of the fault tests (test_fault*.c and
 * the prepared objects' tests): fails the N-th allocation after arm(), counts the blocks
 * still live and their bytes, and catches frees of unknown pointers or with the wrong size;
 * and fault_each_allocation, the loop that fails each allocation of preparing and of the
 * first call in turn.
 */
#ifndef CR_TEST_FAULT_HOOK_H
#define CR_TEST_FAULT_HOOK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

#define MAX_LIVE 4096

typedef struct live_block {
    void *ptr;
    size_t size;
} live_block;

typedef struct fault {
    size_t count;       /* allocations attempted since the last arm() */
    size_t fail_at;     /* fail this allocation (1-based); 0: never */
    size_t failures;    /* allocations refused */
    size_t live_blocks; /* blocks handed out and not yet freed */
    size_t live_bytes;  /* their total size */
    size_t bad_frees;   /* frees of unknown pointers or with the wrong old_size */
    size_t top;         /* slots of live[] ever used (the scans stop there) */
    live_block live[MAX_LIVE];
} fault;

static live_block *find_live(fault *fl, const void *p)
{
    for (size_t i = 0; i < fl->top; i++)
        if (fl->live[i].ptr == p && p != NULL)
            return &fl->live[i];
    return NULL;
}

static void *fault_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    fault *fl = env;
    if (new_size == 0) {
        if (ptr == NULL)
            return NULL;
        live_block *b = find_live(fl, ptr);
        if (b == NULL || b->size != old_size)
            fl->bad_frees++; /* unknown pointer, or not the size it was allocated with */
        if (b != NULL) {
            fl->live_blocks--;
            fl->live_bytes -= b->size;
            b->ptr = NULL;
            b->size = 0;
        }
        free(ptr);
        return NULL;
    }
    fl->count++;
    if (fl->count == fl->fail_at) {
        fl->failures++;
        return NULL;
    }
    if (ptr != NULL) { /* resize: the core layer never does, but honour the contract */
        live_block *b = find_live(fl, ptr);
        void *q = realloc(ptr, new_size);
        if (q == NULL)
            return NULL;
        if (b != NULL) {
            fl->live_bytes = fl->live_bytes - b->size + new_size;
            b->ptr = q;
            b->size = new_size;
        } else {
            fl->bad_frees++;
        }
        return q;
    }
    live_block *slot = NULL;
    for (size_t i = 0; slot == NULL && i < MAX_LIVE; i++)
        if (fl->live[i].ptr == NULL)
            slot = &fl->live[i];
    if (slot != NULL && (size_t)(slot - fl->live) >= fl->top)
        fl->top = (size_t)(slot - fl->live) + 1;
    if (slot == NULL)
        return NULL; /* table full: counts as a failure the test will see */
    void *p = malloc(new_size);
    if (p == NULL)
        return NULL;
    slot->ptr = p;
    slot->size = new_size;
    fl->live_blocks++;
    fl->live_bytes += new_size;
    return p;
}

/* One tracker for the whole program: a failing assertion jumps out of the test, so a
 * heap-allocated one would leak. */
static fault g_fault;

static void release_all(fault *fl);

static fault *new_tracker(void)
{
    release_all(&g_fault); /* blocks left by a test that failed */
    memset(&g_fault, 0, sizeof g_fault);
    return &g_fault;
}

static void arm(fault *fl, size_t fail_at)
{
    fl->count = 0;
    fl->fail_at = fail_at;
    fl->failures = 0;
}

/* Free whatever is still live (after a deliberate leak), so sanitizers stay quiet. */
static void release_all(fault *fl)
{
    for (size_t i = 0; i < MAX_LIVE; i++)
        if (fl->live[i].ptr != NULL) {
            free(fl->live[i].ptr);
            fl->live[i].ptr = NULL;
            fl->live[i].size = 0;
        }
    fl->live_blocks = 0;
    fl->live_bytes = 0;
}

/* ---- Each allocation of preparing and of the first call failing in turn ------------------ */

/* A prepared object under fault injection. The callbacks share env, which holds the inputs,
 * the results of the call and the reference results (those of a context that does not fail). */
typedef struct fault_case {
    /* Makes in ctx what preparing needs (registries, engines), or NULL; these allocations
     * do not fail. */
    void (*setup)(cr_ctx *ctx, void *env);
    /* Prepares into *p. */
    cr_status (*prepare)(cr_ctx *ctx, void *env, cr_prepared **p);
    /* The first call of the prepared object, its results kept in env; NULL: no call. */
    cr_status (*call)(cr_prepared *p, void *env);
    /* Compares the results of the call with the reference, or NULL. */
    void (*check)(void *env);
    /* Frees what setup made (not the context), or NULL. */
    void (*teardown)(void *env);
    bool prepare_earena; /* preparing may fail with CR_EARENA as well as CR_ENOMEM */
    bool call_earena;    /* and the call */
    size_t max_runs;     /* the loop must end within this many runs */
} fault_case;

/* What happened over the runs of fault_each_allocation. */
typedef struct fault_tally {
    size_t runs;           /* runs, the last one without a failing allocation */
    size_t failed_prepare; /* runs whose preparing failed */
    size_t failed_call;    /* runs whose first call failed */
    size_t fallbacks;      /* runs that succeeded although an allocation failed */
} fault_tally;

/* st, the status of a step whose allocation failed, is CR_ENOMEM (or CR_EARENA, if earena). */
static inline void fault_expect(size_t k, const char *step, cr_status st, bool earena)
{
    if (st != CR_ENOMEM && !(earena && st == CR_EARENA)) {
        print_error("allocation %zu failing: %s gave %s\n", k, step, cr_status_name(st));
        fail();
    }
}

/* Runs fc with allocation k = 1, 2, ... of preparing and of the first call failing, each run
 * in a new context of the tracking hook, until a run where no allocation fails. A preparing
 * that fails gives CR_ENOMEM (or CR_EARENA where allowed) and no object; a call that fails
 * gives CR_ENOMEM (or CR_EARENA) and the next call succeeds. After every call that succeeded,
 * fc->check compares its results. Once all is freed, no block is live and no free had a wrong
 * size. Fails the test if the runs do not end within fc->max_runs. */
static inline fault_tally fault_each_allocation(const fault_case *fc, void *env)
{
    fault *fl = new_tracker();
    fault_tally n = {0};
    bool done = false;
    for (size_t k = 1; k <= fc->max_runs && !done; k++) {
        arm(fl, 0);
        cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = fault_realloc, .alloc_env = fl};
        cr_ctx *ctx;
        assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
        if (fc->setup != NULL)
            fc->setup(ctx, env);
        arm(fl, k);
        cr_prepared *p = (cr_prepared *)(void *)fl; /* not NULL: a failure must set it */
        cr_status st = fc->prepare(ctx, env, &p);
        if (st == CR_OK) {
            if (fc->call != NULL && (st = fc->call(p, env)) != CR_OK) {
                fault_expect(k, "the first call", st, fc->call_earena);
                n.failed_call++;
                assert_int_equal(fc->call(p, env), CR_OK);
            }
            if (fc->check != NULL)
                fc->check(env);
            cr_prepared_free(p);
        } else {
            fault_expect(k, "preparing", st, fc->prepare_earena);
            assert_null(p);
            n.failed_prepare++;
        }
        done = fl->failures == 0;
        if (st == CR_OK && !done)
            n.fallbacks++;
        if (fc->teardown != NULL)
            fc->teardown(env);
        cr_ctx_free(ctx);
        if (fl->live_blocks != 0 || fl->bad_frees != 0) {
            print_error("allocation %zu failing: %zu blocks (%zu bytes) live, %zu bad frees\n", k,
                        fl->live_blocks, fl->live_bytes, fl->bad_frees);
            fail();
        }
        n.runs++;
    }
    assert_true(done);
    return n;
}

#endif /* CR_TEST_FAULT_HOOK_H */
