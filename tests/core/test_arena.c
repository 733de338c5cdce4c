/*
 * Tests of the bump-allocation arenas: alignment, growth with stable pointers, reset and
 * reuse, fixed caller buffers, overflow checks, marks and deferred cleanups.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

/* A counting allocator hook: counts block allocations and live blocks. */
typedef struct counter {
    size_t allocs;
    size_t frees;
    long live;
    size_t live_bytes;
} counter;

static void *counting_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    counter *c = env;
    if (new_size == 0) {
        if (ptr != NULL) {
            c->frees++;
            c->live--;
            c->live_bytes -= old_size;
        }
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, new_size);
    if (p != NULL && ptr == NULL) {
        c->allocs++;
        c->live++;
        c->live_bytes += new_size;
    }
    return p;
}

typedef struct fixture {
    counter c;
    cr_ctx *ctx;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    cr_ctx_params p = {.realloc_fn = counting_realloc, .alloc_env = &f->c};
    if (cr_ctx_new(&p, &f->ctx) != CR_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cr_ctx_free(f->ctx);
    /* Everything the tests allocated through the hook has been given back. */
    long live = f->c.live;
    free(f);
    return live == 0 ? 0 : -1;
}

static cr_arena *new_arena(fixture *f, size_t block_size)
{
    cr_arena_params p = {.struct_size = sizeof p, .block_size = block_size};
    cr_arena *a = NULL;
    assert_int_equal(cr_arena_new(f->ctx, &p, &a), CR_OK);
    assert_non_null(a);
    return a;
}

static void test_new_arguments(void **state)
{
    fixture *f = *state;
    cr_arena *a = (cr_arena *)(uintptr_t)1;
    assert_int_equal(cr_arena_new(NULL, NULL, &a), CR_EINVAL);
    assert_null(a);
    assert_int_equal(cr_arena_new(f->ctx, NULL, NULL), CR_EINVAL);

    char buf[64];
    cr_arena_params nosize = {.buffer = buf, .buffer_size = 0};
    a = (cr_arena *)(uintptr_t)1;
    assert_int_equal(cr_arena_new(f->ctx, &nosize, &a), CR_EINVAL);
    assert_null(a);
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EINVAL);

    cr_arena_params big = {.struct_size = (uint32_t)sizeof(cr_arena_params) + 4};
    assert_int_equal(cr_arena_new(f->ctx, &big, &a), CR_EINVAL);
    assert_null(a);
    /* A size that cuts the struct is refused too (the buffer would be read in part). */
    cr_arena_params cut = {.struct_size = 12, .buffer = buf, .buffer_size = sizeof buf};
    a = (cr_arena *)(uintptr_t)1;
    assert_int_equal(cr_arena_new(f->ctx, &cut, &a), CR_EINVAL);
    assert_null(a);
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EINVAL);

    assert_int_equal(cr_arena_new(f->ctx, NULL, &a), CR_OK);
    assert_ptr_equal(cr_arena_ctx(a), f->ctx);
    assert_int_equal(cr_arena_used(a), 0);
    cr_arena_free(a);
    cr_arena_free(NULL);
    cr_arena_reset(NULL);
    assert_null(cr_arena_ctx(NULL));
    assert_int_equal(cr_arena_used(NULL), 0);
    assert_int_equal(cr_arena_capacity(NULL), 0);
}

static void test_default_block_size(void **state)
{
    fixture *f = *state;
    cr_arena *a;
    assert_int_equal(cr_arena_new(f->ctx, NULL, &a), CR_OK);
    assert_int_equal(cr_arena_capacity(a), 0); /* blocks come lazily */
    assert_non_null(cr_arena_alloc(a, 10, 0));
    assert_int_equal(cr_arena_capacity(a), 64 * 1024);
    cr_arena_free(a);
}

static void test_alignment(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 512);
    static const size_t sizes[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100};
    for (int round = 0; round < 20; round++) {
        for (size_t align = 1; align <= 16; align *= 2) {
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                unsigned char *p = cr_arena_alloc(a, sizes[k], align);
                assert_non_null(p);
                assert_int_equal((uintptr_t)p % align, 0);
                memset(p, 0x5a, sizes[k]);
            }
        }
        /* align 0 means CR_ARENA_ALIGN (16) */
        void *p = cr_arena_alloc(a, 3, 0);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % CR_ARENA_ALIGN, 0);
        assert_int_equal(CR_ARENA_ALIGN, 16);
    }
    cr_arena_free(a);
}

static void test_bad_alignment(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 0);
    cr_ctx_clear_error(f->ctx);
    assert_null(cr_arena_alloc(a, 8, 3));
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EINVAL);
    cr_ctx_clear_error(f->ctx);
    assert_null(cr_arena_alloc(a, 8, 32));
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EINVAL);
    assert_null(cr_arena_alloc(NULL, 8, 8));
    cr_arena_free(a);
}

static void test_used_accounts_padding(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 1024);
    /* Block data starts 16-aligned, so the offsets are predictable. */
    unsigned char *p0 = cr_arena_alloc(a, 3, 1); /* [0, 3) */
    assert_int_equal(cr_arena_used(a), 3);
    unsigned char *p1 = cr_arena_alloc(a, 8, 8); /* [8, 16) */
    assert_int_equal(cr_arena_used(a), 16);
    unsigned char *p2 = cr_arena_alloc(a, 1, 16); /* [16, 17) */
    assert_int_equal(cr_arena_used(a), 17);
    unsigned char *p3 = cr_arena_alloc(a, 2, 2); /* [18, 20) */
    assert_int_equal(cr_arena_used(a), 20);
    assert_int_equal(p1 - p0, 8);
    assert_int_equal(p2 - p0, 16);
    assert_int_equal(p3 - p0, 18);
    /* Zero-size requests give distinct valid pointers. */
    unsigned char *z1 = cr_arena_alloc(a, 0, 1);
    unsigned char *z2 = cr_arena_alloc(a, 0, 1);
    assert_non_null(z1);
    assert_non_null(z2);
    assert_ptr_not_equal(z1, z2);
    assert_int_equal(cr_arena_used(a), 22);
    cr_arena_free(a);
}

/* The byte pattern of allocation k. */
static unsigned char pattern(size_t k, size_t i)
{
    return (unsigned char)((k * 131u + i * 7u + 1u) & 0xffu);
}

static void test_growth_pointer_stability(void **state)
{
    fixture *f = *state;
    enum { N = 2000 };
    cr_arena *a = new_arena(f, 256);
    size_t allocs_before = f->c.allocs;
    unsigned char **ptrs = calloc(N, sizeof *ptrs);
    size_t *lens = calloc(N, sizeof *lens);
    assert_non_null(ptrs);
    assert_non_null(lens);
    size_t total = 0;
    for (size_t k = 0; k < N; k++) {
        lens[k] = 1 + (k * 37) % 300; /* some larger than the first block */
        if (k % 97 == 0)
            lens[k] = 5000;
        ptrs[k] = cr_arena_alloc(a, lens[k], 1 + (k % 5 == 0 ? 15 : 0));
        assert_non_null(ptrs[k]);
        for (size_t i = 0; i < lens[k]; i++)
            ptrs[k][i] = pattern(k, i);
        total += lens[k];
    }
    /* The arena grew by several blocks and holds at least what was asked. */
    assert_true(f->c.allocs - allocs_before > 3);
    assert_true(cr_arena_capacity(a) >= total);
    assert_true(cr_arena_used(a) >= total);
    /* Nothing was moved or overwritten. */
    for (size_t k = 0; k < N; k++)
        for (size_t i = 0; i < lens[k]; i++)
            assert_int_equal(ptrs[k][i], pattern(k, i));
    /* No two allocations overlap. */
    for (size_t k = 1; k < N; k++)
        for (size_t j = 0; j < k; j += 37) {
            bool disjoint = ptrs[k] + lens[k] <= ptrs[j] || ptrs[j] + lens[j] <= ptrs[k];
            assert_true(disjoint);
        }
    free(ptrs);
    free(lens);
    cr_arena_free(a);
}

static void test_blocks_double(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 128);
    /* Fill blocks of 128, 256, 512: capacity follows the doubling. */
    assert_non_null(cr_arena_alloc(a, 128, 1));
    assert_int_equal(cr_arena_capacity(a), 128);
    assert_non_null(cr_arena_alloc(a, 1, 1));
    assert_int_equal(cr_arena_capacity(a), 128 + 256);
    assert_non_null(cr_arena_alloc(a, 256, 1));
    assert_int_equal(cr_arena_capacity(a), 128 + 256 + 512);
    /* A request larger than the next block gets a block big enough for it. */
    assert_non_null(cr_arena_alloc(a, 5000, 1));
    assert_true(cr_arena_capacity(a) >= 128 + 256 + 512 + 5000);
    cr_arena_free(a);
}

static void test_reset_reuses(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 256);
    void *first = cr_arena_alloc(a, 40, 8);
    for (int k = 0; k < 100; k++)
        assert_non_null(cr_arena_alloc(a, 50, 8));
    size_t cap = cr_arena_capacity(a);
    size_t used = cr_arena_used(a);
    size_t blocks = f->c.allocs;
    assert_true(used >= 40 + 100 * 50);

    cr_arena_reset(a);
    assert_int_equal(cr_arena_used(a), 0);
    assert_int_equal(cr_arena_capacity(a), cap);
    /* The same sequence of requests reuses the kept blocks: same first pointer, no new
     * block from the hook. */
    void *again = cr_arena_alloc(a, 40, 8);
    assert_ptr_equal(again, first);
    for (int k = 0; k < 100; k++)
        assert_non_null(cr_arena_alloc(a, 50, 8));
    assert_int_equal(f->c.allocs, blocks);
    assert_int_equal(cr_arena_capacity(a), cap);
    assert_int_equal(cr_arena_used(a), used);
    cr_arena_free(a);
}

static void test_calloc_zeroes_and_overflow(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 256);
    unsigned char *p = cr_arena_alloc(a, 64, 16);
    memset(p, 0xff, 64);
    cr_arena_reset(a);
    unsigned char *q = cr_arena_calloc(a, 8, 8, 16);
    assert_ptr_equal(q, p); /* the dirty memory again */
    for (int i = 0; i < 64; i++)
        assert_int_equal(q[i], 0);

    cr_ctx_clear_error(f->ctx);
    assert_null(cr_arena_calloc(a, SIZE_MAX / 2, 3, 8));
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EOVERFLOW);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "overflow"));

    cr_ctx_clear_error(f->ctx);
    assert_null(cr_arena_alloc(a, SIZE_MAX - 4, 8));
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EOVERFLOW);
    assert_null(cr_arena_calloc(NULL, 2, 2, 2));
    cr_arena_free(a);
}

static void test_strdup(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 0);
    char src[] = "hello arena";
    char *d = cr_arena_strdup(a, src);
    assert_non_null(d);
    assert_ptr_not_equal(d, src);
    src[0] = 'j';
    assert_string_equal(d, "hello arena");
    assert_null(cr_arena_strdup(a, NULL));
    cr_arena_free(a);
}

static void test_fixed_buffer(void **state)
{
    fixture *f = *state;
    _Alignas(16) unsigned char buf[256];
    cr_arena_params p = {.buffer = buf, .buffer_size = sizeof buf};
    cr_arena *a;
    size_t before = f->c.allocs;
    assert_int_equal(cr_arena_new(f->ctx, &p, &a), CR_OK);
    assert_int_equal(f->c.allocs, before + 1); /* the arena descriptor only */
    assert_int_equal(cr_arena_capacity(a), 256);

    unsigned char *x = cr_arena_alloc(a, 100, 16); /* [0, 100) */
    unsigned char *y = cr_arena_alloc(a, 100, 16); /* [112, 212) */
    assert_ptr_equal(x, buf);
    assert_ptr_equal(y, buf + 112);
    assert_int_equal(cr_arena_used(a), 212);

    cr_ctx_clear_error(f->ctx);
    assert_null(cr_arena_alloc(a, 100, 16));
    assert_int_equal(cr_ctx_errcode(f->ctx), CR_EARENA);
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "full"));
    assert_non_null(strstr(cr_ctx_errmsg(f->ctx), "256"));
    /* The failed request changed nothing; what still fits is still given. */
    assert_int_equal(cr_arena_used(a), 212);
    unsigned char *z = cr_arena_alloc(a, 44, 1);
    assert_ptr_equal(z, buf + 212);
    assert_int_equal(cr_arena_used(a), 256);
    assert_null(cr_arena_alloc(a, 1, 1));
    assert_int_equal(f->c.allocs, before + 1); /* never grew */

    cr_arena_reset(a);
    assert_ptr_equal(cr_arena_alloc(a, 8, 8), buf);
    cr_arena_free(a);
}

static void test_fixed_buffer_misaligned(void **state)
{
    fixture *f = *state;
    _Alignas(16) unsigned char buf[128];
    cr_arena_params p = {.buffer = buf + 3, .buffer_size = 100};
    cr_arena *a;
    assert_int_equal(cr_arena_new(f->ctx, &p, &a), CR_OK);
    /* The arena aligns the start itself: 13 bytes are skipped. */
    assert_int_equal(cr_arena_capacity(a), 87);
    unsigned char *x = cr_arena_alloc(a, 16, 16);
    assert_ptr_equal(x, buf + 16);
    assert_null(cr_arena_alloc(a, 72, 1));
    assert_non_null(cr_arena_alloc(a, 71, 1));
    cr_arena_free(a);
}

static void test_mark_rewind(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 256);
    assert_non_null(cr_arena_alloc(a, 100, 8));
    cr_arena_mark m = cr_arena_get_mark(a);
    size_t used = cr_arena_used(a);
    unsigned char *s1 = cr_arena_alloc(a, 30, 8);
    /* Scratch that spans several blocks. */
    for (int k = 0; k < 50; k++)
        assert_non_null(cr_arena_alloc(a, 100, 8));
    size_t cap = cr_arena_capacity(a);
    size_t blocks = f->c.allocs;
    assert_true(cr_arena_used(a) > used + 5000);

    cr_arena_rewind(a, m);
    assert_int_equal(cr_arena_used(a), used);
    assert_int_equal(cr_arena_capacity(a), cap);
    unsigned char *s2 = cr_arena_alloc(a, 30, 8);
    assert_ptr_equal(s2, s1);
    /* The kept blocks serve the same scratch again without new blocks. */
    for (int k = 0; k < 50; k++)
        assert_non_null(cr_arena_alloc(a, 100, 8));
    assert_int_equal(f->c.allocs, blocks);
    cr_arena_free(a);
}

static void test_mark_of_fresh_arena(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 256);
    cr_arena_mark m = cr_arena_get_mark(a);
    unsigned char *p = cr_arena_alloc(a, 10, 8);
    for (int k = 0; k < 10; k++)
        assert_non_null(cr_arena_alloc(a, 100, 8));
    cr_arena_rewind(a, m);
    assert_int_equal(cr_arena_used(a), 0);
    assert_ptr_equal(cr_arena_alloc(a, 10, 8), p);
    cr_arena_rewind(NULL, m);
    cr_arena_free(a);
}

/* Deferred cleanups append their id to a log. */
typedef struct log {
    int ids[32];
    int n;
} log_t;

typedef struct cleanup {
    log_t *log;
    int id;
} cleanup;

static void record(void *env)
{
    cleanup *c = env;
    c->log->ids[c->log->n++] = c->id;
}

static void test_defer_lifo_at_reset_and_free(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 128);
    log_t log = {{0}, 0};
    cleanup c[6];
    for (int i = 0; i < 6; i++)
        c[i] = (cleanup){&log, i + 1};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cr_arena_defer(a, record, &c[i]), CR_OK);
        assert_non_null(cr_arena_alloc(a, 100, 8)); /* defer nodes in several blocks */
    }
    assert_int_equal(log.n, 0);
    cr_arena_reset(a);
    assert_int_equal(log.n, 3);
    assert_int_equal(log.ids[0], 3);
    assert_int_equal(log.ids[1], 2);
    assert_int_equal(log.ids[2], 1);
    /* Reset ran them: a second reset runs nothing. */
    cr_arena_reset(a);
    assert_int_equal(log.n, 3);

    for (int i = 3; i < 6; i++)
        assert_int_equal(cr_arena_defer(a, record, &c[i]), CR_OK);
    cr_arena_free(a);
    assert_int_equal(log.n, 6);
    assert_int_equal(log.ids[3], 6);
    assert_int_equal(log.ids[4], 5);
    assert_int_equal(log.ids[5], 4);
}

static void test_defer_rewind_runs_only_newer(void **state)
{
    fixture *f = *state;
    cr_arena *a = new_arena(f, 128);
    log_t log = {{0}, 0};
    cleanup c[5];
    for (int i = 0; i < 5; i++)
        c[i] = (cleanup){&log, i + 1};
    cr_arena_defer(a, record, &c[0]);
    cr_arena_defer(a, record, &c[1]);
    cr_arena_mark m = cr_arena_get_mark(a);
    cr_arena_defer(a, record, &c[2]);
    assert_non_null(cr_arena_alloc(a, 120, 8));
    cr_arena_defer(a, record, &c[3]);
    cr_arena_rewind(a, m);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.ids[0], 4);
    assert_int_equal(log.ids[1], 3);
    cr_arena_defer(a, record, &c[4]);
    cr_arena_free(a);
    assert_int_equal(log.n, 5);
    assert_int_equal(log.ids[2], 5);
    assert_int_equal(log.ids[3], 2);
    assert_int_equal(log.ids[4], 1);
}

static void test_defer_failure_runs_fn_now(void **state)
{
    fixture *f = *state;
    log_t log = {{0}, 0};
    cleanup c1 = {&log, 1}, c2 = {&log, 2}, c3 = {&log, 3};

    /* A full fixed buffer: the node cannot be allocated, so fn runs before return. */
    _Alignas(16) unsigned char buf[32];
    cr_arena_params p = {.buffer = buf, .buffer_size = sizeof buf};
    cr_arena *a;
    assert_int_equal(cr_arena_new(f->ctx, &p, &a), CR_OK);
    assert_non_null(cr_arena_alloc(a, 32, 1));
    assert_int_equal(cr_arena_defer(a, record, &c1), CR_EARENA);
    assert_int_equal(log.n, 1);
    assert_int_equal(log.ids[0], 1);
    cr_arena_free(a); /* and it does not run again */
    assert_int_equal(log.n, 1);

    /* NULL arena: EINVAL, and ownership passed, so fn ran. */
    assert_int_equal(cr_arena_defer(NULL, record, &c2), CR_EINVAL);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.ids[1], 2);

    /* NULL fn: EINVAL. */
    a = new_arena(f, 0);
    assert_int_equal(cr_arena_defer(a, NULL, &c3), CR_EINVAL);
    cr_arena_free(a);
    assert_int_equal(log.n, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_new_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_block_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_alignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_used_accounts_padding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_growth_pointer_stability, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocks_double, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_reuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_calloc_zeroes_and_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strdup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fixed_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fixed_buffer_misaligned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mark_rewind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mark_of_fresh_arena, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defer_lifo_at_reset_and_free, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defer_rewind_runs_only_newer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defer_failure_runs_fn_now, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
