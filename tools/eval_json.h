/*
 * chainrules-eval --json: one JSON request per input line, one JSON response per output
 * line (docs/eval.md). Built only when libcjson is found (tools/CMakeLists.txt).
 */
#ifndef CR_TOOLS_EVAL_JSON_H
#define CR_TOOLS_EVAL_JSON_H

#include <stdio.h>

/*
 * Serve requests from `in` until end of file, writing one response line per request to
 * `out` (flushed after each). Returns the process exit status: 0 at end of input, 1 when
 * reading `in` or writing `out` fails or the context cannot be created.
 */
int cr_eval_json_main(FILE *in, FILE *out);

#endif /* CR_TOOLS_EVAL_JSON_H */
