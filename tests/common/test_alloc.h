/*
 * A counting allocator for the tests: counts allocations and live blocks, and fails the
 * fail_at-th allocation (0: never), for no-allocation checks and fault injection.
 */
#ifndef TEST_ALLOC_H
#define TEST_ALLOC_H

#include <stdlib.h>

typedef struct counter {
    size_t allocs, live, fail_at;
} counter;

static void *counting_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    counter *c = env;
    (void)old_size;
    if (new_size == 0) {
        if (ptr != NULL)
            c->live--;
        free(ptr);
        return NULL;
    }
    c->allocs++;
    if (c->fail_at != 0 && c->allocs == c->fail_at)
        return NULL;
    void *p = realloc(ptr, new_size);
    if (p != NULL && ptr == NULL)
        c->live++;
    return p;
}

#endif /* TEST_ALLOC_H */
