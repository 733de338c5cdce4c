/*
 * The hostile-input catalogue of the tools (docs/reliability.md): bad requests to
 * `chainrules-eval --json` and bad command lines of the positional `chainrules-eval`,
 * each with the exact outcome expected. tests/test_hostile.c is the C API's part.
 *
 *   test_hostile_tools <chainrules-eval> <tools/tests/hostile_requests.jsonl>
 *
 * Each request of the file carries its expectation in its "id", which the tool echoes:
 * {"status": "CR_EOVERFLOW", "names": "fill"} means an error ending "(CR_EOVERFLOW)" whose
 * message starts with "fill:" and names it once; "tool" a request error of the tool itself
 * (no library status) containing `names` once; "ok" a success, with "primal" (optional)
 * the exact primal. The whole file must be answered within a bound on the time (a request
 * must never run for minutes).
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cJSON.h>
#include <cmocka.h>

static const char *g_tool;
static const char *g_requests;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Occurrences of s in text. */
static size_t count_of(const char *text, const char *s)
{
    size_t n = 0, len = strlen(s);
    for (const char *p = strstr(text, s); p != NULL; p = strstr(p + len, s))
        n++;
    return n;
}

static size_t g_failures;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
complain(const char *line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    printf("\n  response: %s\n", line);
    g_failures++;
}

/* Check one response line against the expectation in its id. */
static void check_response(const char *line)
{
    cJSON *r = cJSON_Parse(line);
    if (r == NULL) {
        complain(line, "not JSON");
        return;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(id, "status");
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(id, "names");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(r, "error");
    if (!cJSON_IsString(st) || !cJSON_IsString(names)) {
        complain(line, "no expectation in the id");
    } else if (strcmp(st->valuestring, "ok") == 0) {
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(id, "primal");
        const cJSON *got = cJSON_GetObjectItemCaseSensitive(r, "primal");
        if (err != NULL || got == NULL)
            complain(line, "expected a success");
        else if (want != NULL && !cJSON_Compare(want, got, 1))
            complain(line, "another primal than the expected one");
    } else if (!cJSON_IsString(err)) {
        complain(line, "expected an error (%s)", st->valuestring);
    } else {
        const char *e = err->valuestring, *n = names->valuestring;
        char tag[64], head[128];
        snprintf(head, sizeof head, "%s:", n);
        if (strcmp(st->valuestring, "tool") == 0) {
            if (count_of(e, n) != 1)
                complain(line, "the message should contain '%s' once", n);
            if (strstr(e, "(CR_") != NULL)
                complain(line, "a request error of the tool, not a library status");
        } else {
            snprintf(tag, sizeof tag, "(%s)", st->valuestring);
            size_t le = strlen(e), lt = strlen(tag);
            if (le < lt || strcmp(e + le - lt, tag) != 0)
                complain(line, "the status should be %s", st->valuestring);
            if (strncmp(e, head, strlen(head)) != 0 || count_of(e, head) != 1)
                complain(line, "the message should start with '%s' and name it once", head);
        }
    }
    cJSON_Delete(r);
}

static void test_json_catalogue(void **state)
{
    (void)state;
    FILE *f = fopen(g_requests, "r");
    assert_non_null(f);
    size_t nreq = 0;
    int c, prev = '\n';
    while ((c = fgetc(f)) != EOF) {
        if (c == '\n' && prev != '\n')
            nreq++;
        prev = c;
    }
    fclose(f);
    assert_true(nreq >= 100);

    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --json < '%s'", g_tool, g_requests);
    double t0 = now();
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *line = NULL;
    size_t cap = 0, nresp = 0;
    ssize_t len;
    g_failures = 0;
    while ((len = getline(&line, &cap, p)) > 0) {
        assert_true(line[len - 1] == '\n');
        check_response(line);
        nresp++;
    }
    free(line);
    assert_int_equal(pclose(p), 0);
    double dt = now() - t0;
    printf("%zu hostile requests answered in %.2f s\n", nresp, dt);
    assert_int_equal(nresp, nreq);
    assert_int_equal(g_failures, 0);
    /* Each request is bounded (docs/reliability.md: under a second, here for all of them
     * together, with room for a sanitizer build). */
    assert_true(dt < 30.0);
}

/* ---- The positional command line ---------------------------------------------------------- */

typedef struct cli_case {
    const char *args; /* the arguments, shell-quoted as needed */
    int exit_code;
    const char *status; /* the library status named in the message, or NULL */
    const char *names;  /* what the first line names, once */
} cli_case;

static const cli_case k_cli[] = {
    {"polygamma int:-1 1.5", 1, "CR_EDOMAIN", "polygamma:"},
    {"polygamma int:2147483647 1.5", 1, "CR_EDOMAIN", "polygamma:"},
    {"polygamma 1.5 1.5", 1, "CR_EINVAL", "polygamma:"},
    {"jn int:2147483646 1.5", 1, "CR_EDOMAIN", "jn:"},
    {"jn int:-100001 0.5", 1, "CR_EDOMAIN", "jn:"},
    {"yn int:2147483646 1.5", 1, "CR_EDOMAIN", "yn:"},
    {"yn int:-9223372036854775808 1.5", 1, "CR_EDOMAIN", "yn:"},
    {"fill 1 int:-1", 1, "CR_EINVAL", "fill:"},
    {"fill 1 int:2305843009213693953", 1, "CR_EOVERFLOW", "fill:"},
    {"fill 1 int:9223372036854775807", 1, "CR_EOVERFLOW", "fill:"},
    {"repeat 1 int:3", 1, "CR_EINVAL", "repeat:"},
    {"circshift 1 int:-9223372036854775808", 1, "CR_EINVAL", "circshift:"},
    {"diagm 1 int:-9223372036854775808", 1, "CR_EINVAL", "diagm:"},
    {"sin", 2, NULL, "sin takes 1 argument"},
    {"sin 1 2", 2, NULL, "sin takes 1 argument"},
    {"nosuch 1", 2, NULL, "unknown function"},
    {"sin abc", 2, NULL, "cannot parse argument 1"},
    {"sin int:99999999999999999999", 2, NULL, "cannot parse argument 1"},
    {"sin f32:abc", 2, NULL, "cannot parse argument 1"},
    {"sin bool:2", 2, NULL, "cannot parse argument 1"},
    {"sin 1,2,3", 2, NULL, "cannot parse argument 1"},
    {"sin 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", 2, NULL, "at most 16 arguments"},
    {"", 2, NULL, "usage:"},
};

static void test_cli_catalogue(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_cli / sizeof k_cli[0]; i++) {
        const cli_case *k = &k_cli[i];
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", g_tool, k->args);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char first[1024] = "";
        if (fgets(first, sizeof first, p) == NULL)
            first[0] = '\0';
        char rest[4096];
        while (fgets(rest, sizeof rest, p) != NULL)
            continue;
        int ws = pclose(p);
        assert_true(WIFEXITED(ws));
        bool ok = WEXITSTATUS(ws) == k->exit_code && count_of(first, k->names) == 1;
        if (k->status != NULL) {
            char tag[96];
            snprintf(tag, sizeof tag, "%s (%s", k->status, k->names);
            ok = ok && strstr(first, tag) != NULL;
        }
        if (!ok)
            printf("chainrules-eval %s: exit %d, first line %s", k->args, WEXITSTATUS(ws), first);
        assert_true(ok);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_hostile_tools <chainrules-eval> <hostile_requests.jsonl>\n");
        return 2;
    }
    g_tool = argv[1];
    g_requests = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_catalogue),
        cmocka_unit_test(test_cli_catalogue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
