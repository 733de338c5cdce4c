/*
 * docs/rules-coverage.md (written by tools/rules_coverage.py) counts ChainRules.jl's,
 * SpecialFunctions.jl's and Mooncake.jl's rules that the library has; its Mapping table
 * names, for each, the registry's function. Every such name must be registered, so the
 * table never claims a rule the library lacks; no name it lists as missing may be
 * registered, so it never hides one the library has (a rule added without regenerating the
 * table fails here); and the table must not be empty.
 */
#include <stdio.h>

#include "test_util.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *p = realloc(buf, cap);
            if (p == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (buf != NULL)
        buf[len] = '\0';
    return buf;
}

static void test_mapping_is_registered(void **state)
{
    (void)state;
    const char *dir = getenv("CR_TEST_SRCDIR");
    if (dir == NULL)
        dir = "tests";
    char path[1024];
    snprintf(path, sizeof path, "%s/../docs/rules-coverage.md", dir);
    char *md = slurp(path);
    if (md == NULL) {
        print_error("cannot read %s\n", path);
        fail();
    }
    const char *map = strstr(md, "\n## Mapping");
    assert_non_null(map);
    const cr_registry *reg = cr_registry_builtin();
    size_t rows = 0, bad = 0;
    /* rows "| `julia` | `name` |" */
    for (const char *line = map; (line = strstr(line, "\n| `")) != NULL;) {
        line++;
        const char *end = strchr(line, '\n');
        const char *sep = strstr(line, "` | `");
        if (sep == NULL || (end != NULL && sep > end))
            continue;
        const char *name = sep + 5, *close = strchr(name, '`');
        assert_non_null(close);
        char buf[64];
        size_t n = (size_t)(close - name);
        assert_true(n > 0 && n < sizeof buf);
        memcpy(buf, name, n);
        buf[n] = '\0';
        rows++;
        if (cr_registry_find(reg, buf) == NULL) {
            print_error("docs/rules-coverage.md maps a rule to '%s', which is not registered\n",
                        buf);
            bad++;
        }
    }
    free(md);
    assert_true(rows >= 100);
    assert_int_equal(bad, 0);
}

/* The Julia names in "missing `a`, `b`." of the section "## Missing, family by family": none
 * may be registered under its own name (the part after the last dot: `BLAS.scal!` is
 * scal!). */
static void test_missing_is_not_registered(void **state)
{
    (void)state;
    const char *dir = getenv("CR_TEST_SRCDIR");
    if (dir == NULL)
        dir = "tests";
    char path[1024];
    snprintf(path, sizeof path, "%s/../docs/rules-coverage.md", dir);
    char *md = slurp(path);
    assert_non_null(md);
    const char *sec = strstr(md, "\n## Missing, family by family");
    assert_non_null(sec);
    const char *end = strstr(sec + 1, "\n## ");
    assert_non_null(end);
    const cr_registry *reg = cr_registry_builtin();
    size_t bad = 0;
    for (const char *m = sec; (m = strstr(m, " missing `")) != NULL && m < end;) {
        const char *stop = strchr(m, '.');
        while (stop != NULL && stop[-1] != '`')
            stop = strchr(stop + 1, '.');
        assert_non_null(stop);
        for (const char *q = strchr(m, '`'); q != NULL && q < stop; q = strchr(q + 1, '`')) {
            const char *close = strchr(q + 1, '`');
            assert_non_null(close);
            const char *name = q + 1;
            for (const char *d = name; d < close; d++)
                if (*d == '.' && d + 1 < close)
                    name = d + 1;
            char buf[64];
            size_t n = (size_t)(close - name);
            assert_true(n > 0 && n < sizeof buf);
            memcpy(buf, name, n);
            buf[n] = '\0';
            if (cr_registry_find(reg, buf) != NULL) {
                print_error("docs/rules-coverage.md lists '%s' as missing, but it is registered: "
                            "regenerate it with tools/rules_coverage.py\n",
                            buf);
                bad++;
            }
            q = close;
        }
        m = stop;
    }
    free(md);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mapping_is_registered),
                                       cmocka_unit_test(test_missing_is_not_registered)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
