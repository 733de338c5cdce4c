/*
 * The fault-injecting, leak-tracking allocation hook of the fault tests (test_fault*.c):
 * fails the N-th allocation after arm(), counts the blocks still live and their bytes, and
 * catches frees of unknown pointers or with the wrong size. Include after cmocka.h.
 */
#ifndef CR_TEST_FAULT_HOOK_H
#define CR_TEST_FAULT_HOOK_H

#include <stdlib.h>
#include <string.h>

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

#endif /* CR_TEST_FAULT_HOOK_H */
