/*
 * The random-program tests' generator numbers and environment (test_tape_random.c,
 * test_tape_random_arrays.c): splitmix64, and the variables that run more programs or
 * replay one.
 */
#ifndef CR_TEST_RANDOM_H
#define CR_TEST_RANDOM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline uint64_t rnd_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static inline double rnd_unit(uint64_t *s) /* [0, 1) */
{
    return (double)(rnd_next(s) >> 11) * 0x1.0p-53;
}

static inline double rnd_range(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * rnd_unit(s);
}

static inline size_t rnd_below(uint64_t *s, size_t n) /* [0, n) */
{
    return (size_t)(rnd_next(s) % (uint64_t)n);
}

/* Programs to run: CR_RANDOM_PROGRAMS, or the default. */
static inline size_t programs(size_t dflt)
{
    const char *s = getenv("CR_RANDOM_PROGRAMS");
    return s != NULL && *s != '\0' ? (size_t)strtoull(s, NULL, 0) : dflt;
}

/* The seed to replay alone (CR_RANDOM_SEED), or 0. */
static inline uint64_t replay_seed(void)
{
    const char *s = getenv("CR_RANDOM_SEED");
    return s != NULL && *s != '\0' ? (uint64_t)strtoull(s, NULL, 0) : 0;
}

#endif
