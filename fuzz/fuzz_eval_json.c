/*
 * fuzz_eval_json: the request path of `chainrules-eval --json` (tools/eval_json.c,
 * docs/eval.md). The input is split into lines as the tool splits its standard input, and
 * each non-blank line goes through answer(), the function that parses one request, calls
 * the registered function, its frule and its rrule's pullback and writes the response.
 * The context, arena and output buffer are kept from line to line and from input to
 * input, reset after each line as the tool resets them.
 *
 * Besides the sanitizers' findings, each response is checked: one line, a JSON object
 * that cJSON parses back, with "primal" or "error". Dictionary: fuzz/fuzz_eval_json.dict.
 */
#include "eval_json.c" /* its static answer() and sbuf; defines _POSIX_C_SOURCE first */

#include "fuzz_common.h"

/* Lines of one input that are answered (later ones are ignored). */
#define FUZZ_MAX_LINES 8

static fuzz_alloc g_alloc;
static cr_ctx *g_ctx;
static cr_arena *g_arena;
static sbuf g_out;
static bool g_print; /* FUZZ_EVAL_PRINT set: write each response to stdout */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_one_thread();
    g_print = getenv("FUZZ_EVAL_PRINT") != NULL;
    g_ctx = fuzz_ctx_new(&g_alloc);
    if (g_ctx == NULL || cr_arena_new(g_ctx, NULL, &g_arena) != CR_OK)
        abort();
    return 0;
}

/* A response must be one JSON object on one line, with a "primal" or an "error". */
static void check_response(const sbuf *b)
{
    if (b->oom)
        return; /* the tool prints a fixed error line instead */
    if (b->n < 3 || b->p[b->n - 1] != '\n' || memchr(b->p, '\n', b->n - 1) != NULL)
        abort();
    cJSON *r = cJSON_ParseWithLength(b->p, b->n);
    if (r == NULL || !cJSON_IsObject(r))
        abort();
    const cJSON *primal = cJSON_GetObjectItemCaseSensitive(r, "primal");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(r, "error");
    if ((primal == NULL) == (error == NULL) || (error != NULL && !cJSON_IsString(error)))
        abort();
    cJSON_Delete(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t start = 0;
    for (int lines = 0; start < size && lines < FUZZ_MAX_LINES; lines++) {
        const uint8_t *nl = memchr(data + start, '\n', size - start);
        size_t end = nl != NULL ? (size_t)(nl - data) : size;
        size_t len = end - start;
        /* A copy of its own, NUL-terminated, so that reading past it is caught. */
        char *line = malloc(len + 1);
        if (line == NULL)
            return 0;
        memcpy(line, data + start, len);
        line[len] = '\0';
        start = end + 1;

        /* As cr_eval_json_main() treats a line. */
        bool nul = strlen(line) != len;
        while (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t'))
            k++;
        if (k < len) {
            if (nul)
                line[0] = '\0';
            answer(g_ctx, g_arena, &g_out, line, nul ? 0 : len);
            check_response(&g_out);
            if (g_print && !g_out.oom)
                fwrite(g_out.p, 1, g_out.n, stdout);
            cr_arena_reset(g_arena);
            cr_ctx_clear_error(g_ctx);
        }
        free(line);
    }
    return 0;
}
