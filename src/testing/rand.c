/*
 * Random numbers for the rule tester: splitmix64, and rand_tangent with exactly
 * representable components (multiples of 1/8 in [-9, 9], never zero) built through the
 * flattening, so that every kind of primal gets a tangent of its own structure.
 */
#include "testing_impl.h"

uint64_t cr_test_rand_u64(uint64_t *rng)
{
    uint64_t z = (*rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double cr__test_uniform(uint64_t *rng)
{
    return (double)(cr_test_rand_u64(rng) >> 11) * 0x1.0p-53;
}

/* k/8 for k uniform in [-72, 72] without 0: ChainRulesTestUtils draws from -9:0.01:9; binary
 * eighths print as short decimals and are exact in f32 as in f64. */
static double rand_component(uint64_t *rng)
{
    int64_t k = (int64_t)(cr_test_rand_u64(rng) % 144u) - 72;
    if (k >= 0)
        k++;
    return (double)k / 8.0;
}

cr_status cr_rand_tangent(cr_arena *arena, uint64_t *rng, const cr_value *primal, cr_tangent *out)
{
    if (arena == NULL || rng == NULL || primal == NULL || out == NULL)
        return CR_EINVAL;
    *out = cr_tangent_none();
    size_t n = cr_test_flat_size(primal);
    if (n == 0)
        return CR_OK;
    double *x = cr__arena_array(arena, "cr_rand_tangent", n, sizeof *x, _Alignof(double));
    if (x == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < n; i++)
        x[i] = rand_component(rng);
    return cr_test_tangent_unflatten(arena, primal, x, n, out);
}
