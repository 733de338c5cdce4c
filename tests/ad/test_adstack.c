/*
 * Tests of the value stack of generated reverse-mode code: LIFO order of mixed items over
 * many chunk boundaries, crossing a boundary back and forth, chunk reuse, exact byte
 * accounting against a model, allocation failure and empty pops (NaN / 0 / NULL, never
 * undefined behaviour), and the parameters cr_adstack_init_ex() refuses.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <chainrules.h>

/* An allocator hook that counts live blocks and bytes, checks that every block is freed
 * with the size it was allocated with, and fails the fail_at-th allocation (0: never). */
typedef struct alloc_log {
    size_t allocs, live, live_bytes, fail_at, bad_free;
} alloc_log;

typedef struct block_head {
    size_t size;
    size_t pad; /* keeps the block 16-byte aligned */
} block_head;

static void *log_realloc(void *env, void *ptr, size_t old_size, size_t new_size)
{
    alloc_log *c = env;
    if (new_size == 0) {
        if (ptr != NULL) {
            block_head *h = (block_head *)ptr - 1;
            if (h->size != old_size)
                c->bad_free++;
            c->live--;
            c->live_bytes -= h->size;
            free(h);
        }
        return NULL;
    }
    if (ptr != NULL) /* the stack never resizes a chunk */
        return NULL;
    c->allocs++;
    if (c->fail_at != 0 && c->allocs == c->fail_at)
        return NULL;
    block_head *h = malloc(sizeof *h + new_size);
    if (h == NULL)
        return NULL;
    h->size = new_size;
    c->live++;
    c->live_bytes += new_size;
    return h + 1;
}

static cr_adstack_params params_with(alloc_log *c, size_t first, size_t max)
{
    cr_adstack_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = (uint32_t)sizeof p;
    p.first_chunk_bytes = first;
    p.max_chunk_bytes = max;
    p.realloc_fn = c != NULL ? log_realloc : NULL;
    p.alloc_env = c;
    return p;
}

static uint64_t bits_f64(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static uint32_t bits_f32(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* The item number i of a mixed sequence: its kind is i % 4. */
static double item_f64(size_t i)
{
    return (double)i * 0.5 - 1e6;
}
static int64_t item_i64(size_t i)
{
    return (int64_t)i * -7 + 3;
}
static float item_f32(size_t i)
{
    return (float)(i % 100000) * 0.25f;
}
static int g_targets[97];
static const void *item_ptr(size_t i)
{
    return i % 13 == 0 ? NULL : &g_targets[i % 97];
}

static void push_item(cr_adstack *s, size_t i)
{
    switch (i % 4) {
    case 0:
        cr_adstack_push_f64(s, item_f64(i));
        break;
    case 1:
        cr_adstack_push_i64(s, item_i64(i));
        break;
    case 2:
        cr_adstack_push_f32(s, item_f32(i));
        break;
    default:
        cr_adstack_push_ptr(s, item_ptr(i));
        break;
    }
}

/* Pops item i and tells whether it is the one pushed (bit for bit). */
static int pop_item_ok(cr_adstack *s, size_t i)
{
    switch (i % 4) {
    case 0:
        return bits_f64(cr_adstack_pop_f64(s)) == bits_f64(item_f64(i));
    case 1:
        return cr_adstack_pop_i64(s) == item_i64(i);
    case 2:
        return bits_f32(cr_adstack_pop_f32(s)) == bits_f32(item_f32(i));
    default:
        return cr_adstack_pop_ptr(s) == item_ptr(i);
    }
}

/* Millions of mixed items through the default chunks (4 KiB doubling to 8 MiB, so both
 * the geometric and the capped regime), then all popped in reverse order. */
static void test_lifo_millions_default(void **state)
{
    (void)state;
    const size_t n = 3000000; /* 24 MB of items: 4K .. 8M chunks, then 8M ones */
    cr_adstack s;
    cr_adstack_init(&s);
    assert_int_equal(cr_adstack_reserved_bytes(&s), 0); /* init allocates nothing */
    for (size_t i = 0; i < n; i++)
        push_item(&s, i);
    assert_false(cr_adstack_failed(&s));
    assert_int_equal(cr_adstack_bytes(&s), n * 8);
    assert_int_equal(cr_adstack_peak_bytes(&s), n * 8);
    /* Chunks of 4 KiB, 8 KiB, ..., 8 MiB (12 of them, 16 MiB - 4 KiB), then 8 MiB ones. */
    size_t sum = 0, size = 4096, slots = 0;
    while (slots < n) {
        sum += size;
        slots += (size - 32) / 8;
        size = size * 2 > ((size_t)8 << 20) ? ((size_t)8 << 20) : size * 2;
    }
    assert_int_equal(cr_adstack_reserved_bytes(&s), sum);
    size_t bad = 0;
    for (size_t i = n; i-- > 0;)
        bad += !pop_item_ok(&s, i);
    assert_int_equal(bad, 0);
    assert_false(cr_adstack_failed(&s));
    assert_int_equal(cr_adstack_bytes(&s), 0);
    assert_int_equal(cr_adstack_peak_bytes(&s), n * 8);
    cr_adstack_deinit(&s);
    assert_int_equal(cr_adstack_reserved_bytes(&s), 0);
    assert_int_equal(cr_adstack_peak_bytes(&s), 0);
}

/* The same with the smallest chunks (4 slots, doubling to 12): about 250 000 boundaries
 * crossed each way; every chunk is freed with its size. */
static void test_lifo_many_small_chunks(void **state)
{
    (void)state;
    alloc_log c = {0};
    cr_adstack_params p = params_with(&c, 64, 128);
    cr_adstack s;
    assert_int_equal(cr_adstack_init_ex(&s, &p), CR_OK);
    const size_t n = 1000003;
    for (int round = 0; round < 2; round++) { /* the second round reuses every chunk */
        for (size_t i = 0; i < n; i++)
            push_item(&s, i);
        size_t chunks = c.live;
        size_t bad = 0;
        for (size_t i = n; i-- > 0;)
            bad += !pop_item_ok(&s, i);
        assert_int_equal(bad, 0);
        assert_int_equal(c.live, chunks);
        assert_int_equal(cr_adstack_bytes(&s), 0);
    }
    /* 4 + 12 + 12 + ... slots: (n - 4) / 12 chunks beyond the first, rounded up. */
    assert_int_equal(c.live, 1 + (n - 4 + 11) / 12);
    assert_int_equal(c.allocs, c.live);
    assert_int_equal(cr_adstack_reserved_bytes(&s), c.live_bytes);
    assert_false(cr_adstack_failed(&s));
    cr_adstack_deinit(&s);
    assert_int_equal(c.live, 0);
    assert_int_equal(c.bad_free, 0);
}

/* Push, pop, push again across one boundary, back and forth: the chunk above is reused,
 * never reallocated, and every value comes back. */
static void test_boundary_back_and_forth(void **state)
{
    (void)state;
    alloc_log c = {0};
    cr_adstack_params p = params_with(&c, 64, 64); /* 4 slots a chunk */
    cr_adstack s;
    assert_int_equal(cr_adstack_init_ex(&s, &p), CR_OK);
    for (int i = 0; i < 4; i++)
        cr_adstack_push_i64(&s, i);
    assert_int_equal(c.allocs, 1);
    for (int k = 0; k < 1000; k++) {
        cr_adstack_push_f64(&s, 0.5 * k); /* into the second chunk */
        cr_adstack_push_i64(&s, k);
        assert_int_equal(cr_adstack_pop_i64(&s), k);
        assert_true(cr_adstack_pop_f64(&s) == 0.5 * k); /* back at the boundary */
        assert_int_equal(cr_adstack_pop_i64(&s), 3);    /* into the first chunk */
        cr_adstack_push_i64(&s, 3);
    }
    assert_int_equal(c.allocs, 2);
    /* Down to empty and up three chunks, repeatedly: still three chunks. */
    for (int k = 0; k < 50; k++) {
        for (int i = 0; i < 12; i++)
            cr_adstack_push_i64(&s, 100 * k + i);
        for (int i = 12; i-- > 0;)
            assert_int_equal(cr_adstack_pop_i64(&s), 100 * k + i);
    }
    assert_int_equal(c.allocs, 4); /* 16 items at most: 4 chunks of 4 */
    for (int i = 4; i-- > 0;)
        assert_int_equal(cr_adstack_pop_i64(&s), i);
    assert_int_equal(cr_adstack_bytes(&s), 0);
    assert_false(cr_adstack_failed(&s));
    cr_adstack_deinit(&s);
    assert_int_equal(c.live, 0);
}

/* A random walk of pushes and pops against an array: every pop gives the value pushed,
 * and bytes and peak equal the model's depth and largest depth after every operation. */
static void test_random_walk_accounting(void **state)
{
    (void)state;
    const size_t cap = 5000;
    double *model = malloc(cap * sizeof *model);
    assert_non_null(model);
    size_t sizes[][2] = {{64, 64}, {64, 256}, {96, 1000}, {4096, 8192}};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        alloc_log c = {0};
        cr_adstack_params p = params_with(&c, sizes[t][0], sizes[t][1]);
        cr_adstack s;
        assert_int_equal(cr_adstack_init_ex(&s, &p), CR_OK);
        size_t depth = 0, peak = 0, bad = 0;
        uint64_t rng = 0x9E3779B97F4A7C15u + t;
        for (size_t k = 0; k < 200000; k++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            unsigned r = (unsigned)(rng >> 33) % 100;
            /* Drift up then down in phases, so that the walk spans many chunks. */
            int up = (k / 20000) % 2 == 0 ? r < 60 : r < 40;
            if ((up && depth < cap) || depth == 0) {
                double v = (double)k + 0.25;
                model[depth++] = v;
                cr_adstack_push_f64(&s, v);
            } else {
                double v = cr_adstack_pop_f64(&s);
                bad += v != model[--depth];
            }
            if (depth > peak)
                peak = depth;
            bad += cr_adstack_bytes(&s) != depth * 8;
            bad += cr_adstack_peak_bytes(&s) != peak * 8;
        }
        assert_int_equal(bad, 0);
        assert_false(cr_adstack_failed(&s));
        assert_int_equal(cr_adstack_reserved_bytes(&s), c.live_bytes);
        cr_adstack_deinit(&s);
        assert_int_equal(c.live, 0);
        assert_int_equal(c.bad_free, 0);
    }
    free(model);
}

/* Accounting by hand: a peak inside a chunk is exact; reset keeps chunks and peak, clears
 * items; deinit clears everything and the stack is usable again. */
static void test_accounting_and_reset(void **state)
{
    (void)state;
    alloc_log c = {0};
    cr_adstack_params p = params_with(&c, 4096, 1 << 20);
    cr_adstack s;
    assert_int_equal(cr_adstack_init_ex(&s, &p), CR_OK);
    assert_int_equal(cr_adstack_bytes(&s), 0);
    assert_int_equal(cr_adstack_peak_bytes(&s), 0);
    for (int i = 0; i < 10; i++)
        cr_adstack_push_f64(&s, i);
    for (int i = 0; i < 5; i++)
        (void)cr_adstack_pop_f64(&s);
    assert_int_equal(cr_adstack_bytes(&s), 40);
    assert_int_equal(cr_adstack_peak_bytes(&s), 80);
    assert_int_equal(cr_adstack_reserved_bytes(&s), 4096);
    /* 4096-byte chunk: 508 slots; 600 items need the 8192-byte one too. */
    for (int i = 0; i < 595; i++)
        cr_adstack_push_i64(&s, i);
    assert_int_equal(cr_adstack_bytes(&s), 600 * 8);
    assert_int_equal(cr_adstack_reserved_bytes(&s), 4096 + 8192);
    for (int i = 0; i < 300; i++)
        (void)cr_adstack_pop_i64(&s);
    assert_int_equal(cr_adstack_peak_bytes(&s), 600 * 8);
    assert_int_equal(cr_adstack_bytes(&s), 300 * 8);

    cr_adstack_reset(&s);
    assert_int_equal(cr_adstack_bytes(&s), 0);
    assert_int_equal(cr_adstack_peak_bytes(&s), 600 * 8);
    assert_int_equal(cr_adstack_reserved_bytes(&s), 4096 + 8192);
    for (int i = 0; i < 1600; i++) /* reuses both chunks (508 + 1020 slots), then 16 KiB */
        cr_adstack_push_i64(&s, i);
    assert_int_equal(c.allocs, 3);
    assert_int_equal(cr_adstack_reserved_bytes(&s), 4096 + 8192 + 16384);
    assert_int_equal(cr_adstack_peak_bytes(&s), 1600 * 8);
    for (int i = 1600; i-- > 0;)
        assert_int_equal(cr_adstack_pop_i64(&s), i);
    assert_false(cr_adstack_failed(&s));

    cr_adstack_deinit(&s);
    assert_int_equal(c.live, 0);
    assert_int_equal(cr_adstack_peak_bytes(&s), 0);
    assert_int_equal(cr_adstack_reserved_bytes(&s), 0);
    cr_adstack_push_f64(&s, 2.5); /* same parameters: the hook again */
    assert_int_equal(c.allocs, 4);
    assert_true(cr_adstack_pop_f64(&s) == 2.5);
    cr_adstack_deinit(&s);
    cr_adstack_deinit(&s); /* twice is fine */
    cr_adstack_deinit(NULL);
    assert_int_equal(c.live, 0);
}

/* Special values come back bit for bit: signed zeros, infinities, NaN payloads,
 * subnormals, the extreme integers. */
static void test_special_values(void **state)
{
    (void)state;
    cr_adstack s;
    cr_adstack_init(&s);
    uint64_t dbits[] = {0x8000000000000000u, 0x7FF0000000000000u, 0x7FF8000000000123u,
                        0xFFF4000000000001u, 0x0000000000000001u, 0x7FEFFFFFFFFFFFFFu};
    uint32_t fbits[] = {0x80000000u, 0x7F800000u, 0x7FC00042u, 0x00000001u};
    for (size_t i = 0; i < 6; i++) {
        double v;
        memcpy(&v, &dbits[i], sizeof v);
        cr_adstack_push_f64(&s, v);
    }
    for (size_t i = 0; i < 4; i++) {
        float v;
        memcpy(&v, &fbits[i], sizeof v);
        cr_adstack_push_f32(&s, v);
    }
    cr_adstack_push_i64(&s, INT64_MIN);
    cr_adstack_push_i64(&s, INT64_MAX);
    cr_adstack_push_ptr(&s, NULL);
    cr_adstack_push_ptr(&s, &s);
    assert_ptr_equal(cr_adstack_pop_ptr(&s), &s);
    assert_null(cr_adstack_pop_ptr(&s));
    assert_true(cr_adstack_pop_i64(&s) == INT64_MAX);
    assert_true(cr_adstack_pop_i64(&s) == INT64_MIN);
    for (size_t i = 4; i-- > 0;)
        assert_int_equal(bits_f32(cr_adstack_pop_f32(&s)), fbits[i]);
    for (size_t i = 6; i-- > 0;)
        assert_true(bits_f64(cr_adstack_pop_f64(&s)) == dbits[i]);
    assert_false(cr_adstack_failed(&s));
    cr_adstack_deinit(&s);
}

/* Failing the k-th allocation, for every k of a run: the stack is marked failed, the push
 * that failed and every later one are dropped, every later pop gives NaN / 0 / NULL,
 * nothing leaks, and reset makes the stack usable again. */
static void test_allocation_failure(void **state)
{
    (void)state;
    for (size_t k = 1; k <= 6; k++) {
        alloc_log c = {.fail_at = k};
        cr_adstack_params p = params_with(&c, 64, 256);
        cr_adstack s;
        assert_int_equal(cr_adstack_init_ex(&s, &p), CR_OK);
        size_t pushed = 0;
        /* Chunks of 4, 12, 28, 28, ... slots: the k-th allocation is at item
         * 4 + 12 + 28 (k - 3) (k >= 3). */
        size_t fail_item = k == 1 ? 0 : k == 2 ? 4 : 16 + 28 * (k - 3);
        for (size_t i = 0; i < 400; i++) {
            cr_adstack_push_f64(&s, (double)i);
            if (!cr_adstack_failed(&s))
                pushed++;
        }
        assert_true(cr_adstack_failed(&s));
        assert_int_equal(pushed, fail_item);
        assert_int_equal(c.allocs, k); /* no allocation is tried after the failure */
        assert_int_equal(cr_adstack_bytes(&s), fail_item * 8);
        assert_int_equal(cr_adstack_peak_bytes(&s), fail_item * 8);
        cr_adstack_push_i64(&s, 5); /* dropped */
        assert_int_equal(cr_adstack_bytes(&s), fail_item * 8);
        assert_true(isnan(cr_adstack_pop_f64(&s)));
        assert_int_equal(cr_adstack_pop_i64(&s), 0);
        assert_true(isnan(cr_adstack_pop_f32(&s)));
        assert_null(cr_adstack_pop_ptr(&s));
        assert_true(cr_adstack_failed(&s));

        cr_adstack_reset(&s);
        assert_false(cr_adstack_failed(&s));
        assert_int_equal(cr_adstack_bytes(&s), 0);
        for (int i = 0; i < 100; i++)
            cr_adstack_push_i64(&s, i);
        for (int i = 100; i-- > 0;)
            assert_int_equal(cr_adstack_pop_i64(&s), i);
        assert_false(cr_adstack_failed(&s));
        cr_adstack_deinit(&s);
        assert_int_equal(c.live, 0);
        assert_int_equal(c.bad_free, 0);
    }
}

/* Blocks of 1..5 doubles pushed and popped at once, mixed with single items, on 4-slot
 * chunks (every block size meets every offset in a chunk, so most blocks straddle a
 * boundary): every value comes back, the accounting matches single pushes, and on a failed
 * or empty stack a block pop gives NaNs. */
static void test_blocks(void **state)
{
    (void)state;
    alloc_log c = {0};
    cr_adstack_params p = params_with(&c, 64, 64);
    cr_adstack s;
    assert_int_equal(cr_adstack_init_ex(&s, &p), CR_OK);
    double v[5], w[5];
    size_t items = 0;
    for (int k = 0; k < 200; k++) {
        size_t n = (size_t)(k % 5) + 1;
        for (size_t i = 0; i < n; i++)
            v[i] = k + 0.125 * (double)i;
        cr_adstack_push_f64n(&s, v, n);
        cr_adstack_push_i64(&s, k);
        items += n + 1;
        assert_int_equal(cr_adstack_bytes(&s), items * 8);
    }
    for (int k = 200; k-- > 0;) {
        size_t n = (size_t)(k % 5) + 1;
        assert_int_equal(cr_adstack_pop_i64(&s), k);
        cr_adstack_pop_f64n(&s, w, n);
        for (size_t i = 0; i < n; i++)
            assert_true(w[i] == k + 0.125 * (double)i);
    }
    assert_int_equal(cr_adstack_bytes(&s), 0);
    assert_false(cr_adstack_failed(&s));
    /* single pushes popped as a block and the reverse */
    for (int i = 0; i < 3; i++)
        cr_adstack_push_f64(&s, i);
    cr_adstack_pop_f64n(&s, w, 3);
    assert_true(w[0] == 0 && w[1] == 1 && w[2] == 2);
    cr_adstack_push_f64n(&s, (const double[]){4, 5, 6}, 3);
    assert_true(cr_adstack_pop_f64(&s) == 6 && cr_adstack_pop_f64(&s) == 5);
    assert_true(cr_adstack_pop_f64(&s) == 4);
    /* one value too many: the missing one is NaN and the stack has failed */
    cr_adstack_push_f64(&s, 7);
    cr_adstack_pop_f64n(&s, w, 2);
    assert_true(isnan(w[0]) && w[1] == 7);
    assert_true(cr_adstack_failed(&s));
    cr_adstack_push_f64n(&s, v, 3); /* dropped */
    cr_adstack_pop_f64n(&s, w, 3);
    assert_true(isnan(w[0]) && isnan(w[1]) && isnan(w[2]));
    cr_adstack_deinit(&s);
    assert_int_equal(c.live, 0);

    /* a zero-initialised stack (no chunk yet) takes a block */
    cr_adstack z = {0};
    cr_adstack_push_f64n(&z, v, 4);
    cr_adstack_pop_f64n(&z, w, 4);
    for (size_t i = 0; i < 4; i++)
        assert_true(w[i] == v[i]);
    assert_false(cr_adstack_failed(&z));
    cr_adstack_deinit(&z);
}

/* Pops on an empty stack: NaN / 0 / NULL, the stack marked failed, pushes then dropped;
 * after reset the stack works. Also one pop too many after pushes, across a chunk. */
static void test_empty_pops(void **state)
{
    (void)state;
    cr_adstack s;
    cr_adstack_init(&s);
    assert_true(isnan(cr_adstack_pop_f64(&s)));
    assert_true(cr_adstack_failed(&s));
    assert_int_equal(cr_adstack_pop_i64(&s), 0);
    assert_true(isnan(cr_adstack_pop_f32(&s)));
    assert_null(cr_adstack_pop_ptr(&s));
    cr_adstack_push_f64(&s, 1.0);
    assert_int_equal(cr_adstack_bytes(&s), 0);
    cr_adstack_reset(&s);
    assert_false(cr_adstack_failed(&s));

    alloc_log c = {0};
    cr_adstack_params p = params_with(&c, 64, 64);
    assert_int_equal(cr_adstack_init_ex(&s, &p), CR_OK);
    for (int i = 0; i < 6; i++) /* two chunks */
        cr_adstack_push_i64(&s, i + 1);
    for (int i = 6; i-- > 0;)
        assert_int_equal(cr_adstack_pop_i64(&s), i + 1);
    assert_false(cr_adstack_failed(&s));
    assert_int_equal(cr_adstack_pop_i64(&s), 0);
    assert_true(cr_adstack_failed(&s));
    assert_true(isnan(cr_adstack_pop_f64(&s)));
    cr_adstack_push_i64(&s, 9);
    assert_int_equal(cr_adstack_pop_i64(&s), 0);
    assert_int_equal(cr_adstack_peak_bytes(&s), 48);
    cr_adstack_reset(&s);
    cr_adstack_push_i64(&s, 9);
    assert_int_equal(cr_adstack_pop_i64(&s), 9);
    assert_false(cr_adstack_failed(&s));
    cr_adstack_deinit(&s);
    assert_int_equal(c.live, 0);
}

/* The parameters cr_adstack_init_ex() refuses; the stack is then a failed one that
 * drops pushes and can be deinitialised. NULL arguments. */
static void test_params_and_null(void **state)
{
    (void)state;
    cr_adstack s;
    assert_int_equal(cr_adstack_init_ex(NULL, NULL), CR_EINVAL);
    assert_int_equal(cr_adstack_init_ex(&s, NULL), CR_OK);
    assert_false(cr_adstack_failed(&s));
    cr_adstack_deinit(&s);

    cr_adstack_params bad[5];
    bad[0] = params_with(NULL, 32, 0);              /* first below the minimum */
    bad[1] = params_with(NULL, 8192, 4096);         /* max below first */
    bad[2] = params_with(NULL, 4096, SIZE_MAX / 2); /* max too large */
    bad[3] = params_with(NULL, 4096, SIZE_MAX);     /* max too large */
    bad[4] = params_with(NULL, 0, 0);
    bad[4].struct_size = 3; /* unknown size */
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(cr_adstack_init_ex(&s, &bad[i]), CR_EINVAL);
        assert_true(cr_adstack_failed(&s));
        cr_adstack_push_f64(&s, 1.0);
        assert_int_equal(cr_adstack_bytes(&s), 0);
        assert_int_equal(cr_adstack_reserved_bytes(&s), 0);
        assert_true(isnan(cr_adstack_pop_f64(&s)));
        cr_adstack_deinit(&s);
    }
    /* Accepted: 0 means default; a first chunk above the default cap raises the cap. */
    cr_adstack_params ok = params_with(NULL, (size_t)16 << 20, 0);
    assert_int_equal(cr_adstack_init_ex(&s, &ok), CR_OK);
    cr_adstack_push_i64(&s, 1);
    assert_int_equal(cr_adstack_reserved_bytes(&s), (size_t)16 << 20);
    cr_adstack_deinit(&s);
    ok = params_with(NULL, 0, 0);
    ok.struct_size = 0;
    assert_int_equal(cr_adstack_init_ex(&s, &ok), CR_OK);
    cr_adstack_push_i64(&s, 1);
    assert_int_equal(cr_adstack_reserved_bytes(&s), CR_ADSTACK_FIRST_CHUNK);
    cr_adstack_deinit(&s);

    cr_adstack_init(NULL);
    cr_adstack_reset(NULL);
    assert_true(cr_adstack_failed(NULL));
    assert_int_equal(cr_adstack_bytes(NULL), 0);
    assert_int_equal(cr_adstack_peak_bytes(NULL), 0);
    assert_int_equal(cr_adstack_reserved_bytes(NULL), 0);
}

/* A zero-initialised stack, never through init, is an empty one with the defaults; sizes
 * broken by the caller make the first push fail, never write out of bounds. */
static void test_zero_initialised(void **state)
{
    (void)state;
    cr_adstack s;
    memset(&s, 0, sizeof s);
    assert_false(cr_adstack_failed(&s));
    assert_true(isnan(cr_adstack_pop_f64(&s))); /* empty */
    cr_adstack_reset(&s);
    for (int i = 0; i < 2000; i++)
        cr_adstack_push_i64(&s, i);
    assert_int_equal(cr_adstack_reserved_bytes(&s), 4096 + 8192 + 16384);
    for (int i = 2000; i-- > 0;)
        assert_int_equal(cr_adstack_pop_i64(&s), i);
    assert_false(cr_adstack_failed(&s));
    cr_adstack_deinit(&s);

    cr_adstack_init(&s);
    s.first_chunk = 8; /* below the minimum: no room for a header */
    cr_adstack_push_f64(&s, 1.0);
    assert_true(cr_adstack_failed(&s));
    assert_int_equal(cr_adstack_reserved_bytes(&s), 0);
    cr_adstack_deinit(&s);
}

/* The out-of-line functions called directly while the chunk has room (or items) act as the
 * inline paths do; their failure values follow the kind. */
static void test_slow_paths_called_directly(void **state)
{
    (void)state;
    cr_adstack s;
    cr_adstack_init(&s);
    cr_adstack_push_i64(&s, 1);
    cr_adstack_slot v;
    v.i64 = 2;
    cr_adstack_push_slow(&s, v);
    v.f64 = 0.75;
    cr_adstack_push_slow(&s, v);
    assert_int_equal(cr_adstack_bytes(&s), 24);
    assert_int_equal(cr_adstack_peak_bytes(&s), 24);
    assert_true(cr_adstack_pop_slow(&s, CR_ADSTACK_F64).f64 == 0.75);
    assert_int_equal(cr_adstack_pop_slow(&s, CR_ADSTACK_I64).i64, 2);
    assert_int_equal(cr_adstack_pop_i64(&s), 1);
    assert_false(cr_adstack_failed(&s));
    assert_true(isnan(cr_adstack_pop_slow(&s, CR_ADSTACK_F64).f64));
    assert_true(cr_adstack_failed(&s));
    assert_true(isnan(cr_adstack_pop_slow(&s, CR_ADSTACK_F32).f32));
    assert_int_equal(cr_adstack_pop_slow(&s, CR_ADSTACK_I64).i64, 0);
    assert_int_equal(cr_adstack_pop_slow(&s, CR_ADSTACK_PTR).u64, 0);
    cr_adstack_deinit(&s);
}

/* Stacks set up and released in turn reuse the thread's cached chunks (the chunk memory of
 * the second stack is at the same addresses as the first's), keep LIFO order, and the
 * cache is released by cr_adstack_trim() and by a thread's exit (ASan and valgrind see no
 * leak). */
static void fill_and_check(long n, const void **first_chunk)
{
    cr_adstack s;
    cr_adstack_init(&s);
    for (long i = 0; i < n; i++)
        cr_adstack_push_f64(&s, (double)i);
    /* the first slot of the first chunk: where the stack's memory starts */
    const cr_adstack_slot *p = s.base;
    for (long i = n - 1; i >= 0; i--)
        assert_true(cr_adstack_pop_f64(&s) == (double)i);
    *first_chunk = p;
    assert_false(cr_adstack_failed(&s));
    cr_adstack_deinit(&s);
}

static void test_chunk_cache_reuse(void **state)
{
    (void)state;
    const void *a, *b;
    cr_adstack_trim();
    fill_and_check(100, &a); /* one chunk, cached by deinit */
    fill_and_check(100, &b); /* takes it back */
    assert_ptr_equal(a, b);
    for (int round = 0; round < 3; round++) {
        fill_and_check(3000000, &a); /* 24 MB over many chunks */
        if (round == 1)
            cr_adstack_trim();
    }
    cr_adstack_trim();
    cr_adstack_trim(); /* twice is fine */
}

static void *thread_stack(void *arg)
{
    const void *p;
    fill_and_check(500000, &p);
    (void)arg;
    return NULL; /* the thread's cache is freed by its exit */
}

static void test_chunk_cache_threads(void **state)
{
    (void)state;
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_stack, NULL), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifo_millions_default),
        cmocka_unit_test(test_lifo_many_small_chunks),
        cmocka_unit_test(test_boundary_back_and_forth),
        cmocka_unit_test(test_random_walk_accounting),
        cmocka_unit_test(test_accounting_and_reset),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_allocation_failure),
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_empty_pops),
        cmocka_unit_test(test_params_and_null),
        cmocka_unit_test(test_zero_initialised),
        cmocka_unit_test(test_slow_paths_called_directly),
        cmocka_unit_test(test_chunk_cache_reuse),
        cmocka_unit_test(test_chunk_cache_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
