/* json_stream: read a big JSON object member by member, and its big arrays element by element,
 * so that no tree of the whole text exists (issue 26 item 7: jansson's tree of a 34 MB,
 * 200,000-op graph file is 319 MB; a graph's own arrays are a fifth of that).
 *
 * A small hand scanner finds each piece's bytes (a key, a member's value, one array element:
 * strings with their escapes, nesting) and jansson parses the piece (json_loadb on its span), so
 * every value is jansson's. Errors are the ones a parse of the whole text gives, word for word:
 * when a piece does not parse or the scanner finds no piece where one belongs (a missing comma,
 * a file cut between two elements, a repeated key), jansson re-reads the text from the last good
 * place behind a short prefix that puts its parser in the same state there (`{"name":0,"ops":[0`
 * before a bad element of "ops"), and the line and column it reports are mapped back to the
 * whole text. The rest (a top level that is not an object, an array element that is neither an
 * object nor an array, nesting deeper than PF_JSON_STREAM_DEPTH) is left to one whole parse:
 * the calls then return PF_JSON_STREAM_TREE and pf_json_stream_tree hands the tree over. */
#ifndef PF_JSON_STREAM_H
#define PF_JSON_STREAM_H

#include <jansson.h>
#include <stddef.h>

typedef struct pf_json_stream pf_json_stream_t;

/* Returned (positive) when the text must be read as one tree: pf_json_stream_tree. */
#define PF_JSON_STREAM_TREE 2
/* Pieces nested deeper than this go through the whole-text path (jansson's own limit is 2048
 * levels counted from the top; a piece parsed alone would count from itself). */
#define PF_JSON_STREAM_DEPTH 1000

/* A reader over text[0..len) (which must outlive it). Refuses a NUL byte anywhere, as
 * pf_json_load_buffer does: PF_EINPUT "<label>:<line>:<col>: NUL byte at byte offset N". */
int pf_json_stream_open(const char *text, size_t len, const char *label, pf_json_stream_t **out,
                        char *err, size_t errlen);
void pf_json_stream_destroy(pf_json_stream_t **s);

/* The next member of the top-level object: 1 with *key (decoded; valid until the next call),
 * 0 after the closing brace (only white space may follow), PF_JSON_STREAM_TREE, or PF_EINPUT /
 * PF_ERR with "<label>:<line>:<col>: <jansson's message>". A value the caller did not read is
 * parsed and dropped first, so that its syntax errors are still found. */
int pf_json_stream_next(pf_json_stream_t *s, const char **key, char *err, size_t errlen);
/* 1 when the current member's value is an array (what follows the colon is '['), else 0. */
int pf_json_stream_at_array(const pf_json_stream_t *s);
/* The current member's value as a tree (*out the caller's): PF_OK, PF_JSON_STREAM_TREE or an
 * error as for next. */
int pf_json_stream_value(pf_json_stream_t *s, json_t **out, char *err, size_t errlen);
/* The next element of the current member's array (at_array must have said 1): 1 with *out (the
 * caller's), 0 after the closing bracket, PF_JSON_STREAM_TREE or an error as for next. */
int pf_json_stream_element(pf_json_stream_t *s, json_t **out, char *err, size_t errlen);
/* After PF_JSON_STREAM_TREE: the whole text's tree, handed to the caller (NULL otherwise). */
json_t *pf_json_stream_tree(pf_json_stream_t *s);

/* Which of keys[0..n) the top-level object has (found[i] = 0 or 1), scanning past the values
 * without parsing them: PF_OK, or PF_EINPUT when the top level cannot be followed (not an
 * object, a broken member); the caller then parses the text for jansson's message. */
int pf_json_stream_find_keys(const char *text, size_t len, const char *const *keys, int n,
                             int *found);

/* A whole file ("-" = stdin) into *buf (NUL-terminated, *len bytes without it; the caller
 * frees): PF_OK, or PF_EINPUT "<path>: <strerror>" / "<path>: read error", PF_ERR. */
int pf_json_stream_read_file(const char *path, char **buf, size_t *len, char *err,
                             size_t errlen);

#endif
