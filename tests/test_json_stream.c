/* json_stream: members and elements one at a time, and errors placed as a whole parse places
 * them (hand-counted lines and columns; each also checked against pf_json_load_buffer). */
#include "planner/core/json_stream.h"
#include "planner/core/json.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* err, from the file name on, is exactly expect (case i printed when not). */
static int err_is(const char *err, const char *expect, size_t i)
{
    const char *base = strstr(err, "t.json");
    int ok = base && strcmp(base, expect) == 0;
    if (!ok)
        fprintf(stderr, "\n  case %zu: got '%s', want '%s'\n", i, err, expect);
    return ok;
}

/* Reads text to its end, every value and element read (or skipped when skip), and returns the
 * first non-positive code of the stream (or PF_JSON_STREAM_TREE); err gets its message. */
static int drain(const char *text, size_t len, int skip, char *err, size_t errlen)
{
    pf_json_stream_t *s;
    const char *key;
    json_t *v;
    int rc = pf_json_stream_open(text, len, "t.json", &s, err, errlen);
    if (rc != PF_OK)
        return rc;
    while ((rc = pf_json_stream_next(s, &key, err, errlen)) == 1) {
        if (skip)
            continue;
        if (pf_json_stream_at_array(s)) {
            while ((rc = pf_json_stream_element(s, &v, err, errlen)) == 1)
                json_decref(v);
        } else {
            rc = pf_json_stream_value(s, &v, err, errlen);
            json_decref(v);
        }
        if (rc != PF_OK)
            break;
    }
    pf_json_stream_destroy(&s);
    return rc;
}

static void test_members_and_elements(void)
{
    const char *text = "{\"a\": 1, \"list\": [{\"x\": \"a\\\"]b\"}, [1, [2, 3]], {}],\n"
                       " \"s\": \"q\\\\\"}";
    char err[256];
    pf_json_stream_t *s;
    const char *key;
    json_t *v;
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_open(text, strlen(text), "t.json", &s, err, sizeof err),
                          PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_next(s, &key, err, sizeof err), 1);
    CU_ASSERT_STRING_EQUAL(key, "a");
    CU_ASSERT_FALSE(pf_json_stream_at_array(s));
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_value(s, &v, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(json_integer_value(v), 1);
    json_decref(v);
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_next(s, &key, err, sizeof err), 1);
    CU_ASSERT_STRING_EQUAL(key, "list");
    CU_ASSERT_TRUE_FATAL(pf_json_stream_at_array(s));
    /* an escaped quote and a bracket inside a string, nested arrays, an empty object */
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_element(s, &v, err, sizeof err), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(v, "x")), "a\"]b");
    json_decref(v);
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_element(s, &v, err, sizeof err), 1);
    CU_ASSERT_EQUAL(json_array_size(v), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_array_get(v, 1), 1)), 3);
    json_decref(v);
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_element(s, &v, err, sizeof err), 1);
    CU_ASSERT_EQUAL(json_object_size(v), 0);
    json_decref(v);
    CU_ASSERT_EQUAL(pf_json_stream_element(s, &v, err, sizeof err), 0);
    CU_ASSERT_PTR_NULL(v);
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_next(s, &key, err, sizeof err), 1);
    CU_ASSERT_STRING_EQUAL(key, "s");
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_value(s, &v, err, sizeof err), PF_OK);
    CU_ASSERT_STRING_EQUAL(json_string_value(v), "q\\");
    json_decref(v);
    CU_ASSERT_EQUAL(pf_json_stream_next(s, &key, err, sizeof err), 0);
    CU_ASSERT_EQUAL(pf_json_stream_next(s, &key, err, sizeof err), 0);
    pf_json_stream_destroy(&s);
    pf_json_stream_destroy(&s);
    /* skipped values are still parsed: the same end */
    CU_ASSERT_EQUAL(drain(text, strlen(text), 1, err, sizeof err), 0);
    const char *empty = " {\n} ";
    CU_ASSERT_EQUAL(drain(empty, strlen(empty), 0, err, sizeof err), 0);
}

/* Positions counted by hand; the message must also be the whole parse's. */
static void test_error_positions(void)
{
    const struct {
        const char *text;
        size_t len; /* 0: strlen */
        const char *expect;
    } cases[] = {
        /* a missing comma between two elements, on line 3 */
        {"{\"ops\": [{\"id\": 1},\n {\"id\": 2}\n {\"id\": 3}]}", 0,
         "t.json:3:2: ']' expected near '{'"},
        /* cut inside an element: jansson's column stops at the last character */
        {"{\"ops\": [{\"id\": 1}, {\"id\"", 0, "t.json:1:25: ':' expected near end of file"},
        /* cut between two elements, after the comma: jansson's array loop ends on the end
         * of the text before it looks for a value, so it asks for the bracket */
        {"{\"ops\": [{\"id\": 1},\n", 0, "t.json:2:0: ']' expected near end of file"},
        /* a bad token inside an element three lines down: the lexer stops before '}' */
        {"{\"a\": 1,\n \"ops\": [\n  {\"id\": 1, \"n\": tru}\n]}", 0,
         "t.json:3:20: invalid token near 'tru'"},
        /* the second "ops": after its key */
        {"{\"ops\": [], \"ops\": []}", 0, "t.json:1:17: duplicate object key near '\"ops\"'"},
        {"{\"a\": 1} x", 0, "t.json:1:10: end of file expected near 'x'"},
        /* the lexer was still in the number 4 when it met the bad byte */
        {"{\"m\": 4\x80}", 0, "t.json:1:7: unable to decode byte 0x80 near '4'"},
        /* after a string value, a bad token: jansson's parser waits for ',' or '}' */
        {"{\"n\": \"ab\"er}", 0, "t.json:1:12: '}' expected near 'er'"},
        /* columns count characters: three 2-byte ones in a key before the error */
        {"{\"\xc3\xa9\xc3\xa9\xc3\xa9\": [{}, x]}", 0, "t.json:1:14: invalid token near 'x'"},
        /* a skipped value's error: the brace where the array's element belongs */
        {"{\"a\": [1, {\"b\": 2}], \"c\": {\"d\": [}}", 0,
         "t.json:1:34: unexpected token near '}'"},
        {"{\"a\":\n 1\0}", 10, "t.json:2:3: NUL byte at byte offset 8"},
        {"", 0, "t.json:1:0: '[' or '{' expected near end of file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "", whole[256] = "";
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
        for (int skip = 0; skip < 2; skip++) {
            CU_ASSERT_EQUAL(drain(cases[i].text, len, skip, err, sizeof err), PF_EINPUT);
            CU_ASSERT_TRUE(err_is(err, cases[i].expect, i));
        }
        json_t *root;
        CU_ASSERT_EQUAL(pf_json_load_buffer(cases[i].text, len, "t.json", &root, whole,
                                            sizeof whole),
                        PF_EINPUT);
        CU_ASSERT_TRUE(err_is(whole, cases[i].expect, i));
    }
}

/* Nesting `depth` brackets deep inside the element of "ops". */
static char *deep_text(int depth)
{
    char *t = malloc((size_t)depth * 2 + 16);
    if (!t)
        return NULL;
    size_t n = (size_t)sprintf(t, "{\"ops\": [");
    memset(t + n, '[', (size_t)depth);
    memset(t + n + depth, ']', (size_t)depth);
    strcpy(t + n + 2 * (size_t)depth, "]}");
    return t;
}

/* What the scanner does not follow is one tree, or the whole parse's error. */
static void test_whole_tree(void)
{
    char err[256];
    pf_json_stream_t *s;
    const char *key;
    json_t *v;
    const char *arr = "[1, 2]";
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_open(arr, strlen(arr), "t.json", &s, err, sizeof err),
                          PF_OK);
    CU_ASSERT_EQUAL(pf_json_stream_next(s, &key, err, sizeof err), PF_JSON_STREAM_TREE);
    json_t *t = pf_json_stream_tree(s);
    CU_ASSERT_EQUAL(json_array_size(t), 2);
    CU_ASSERT_PTR_NULL(pf_json_stream_tree(s));
    json_decref(t);
    pf_json_stream_destroy(&s);
    const char *scalar = "{\"ops\": [{}, 7]}";
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_open(scalar, strlen(scalar), "t.json", &s, err,
                                              sizeof err),
                          PF_OK);
    CU_ASSERT_EQUAL(pf_json_stream_next(s, &key, err, sizeof err), 1);
    CU_ASSERT_EQUAL(pf_json_stream_element(s, &v, err, sizeof err), 1);
    json_decref(v);
    CU_ASSERT_EQUAL(pf_json_stream_element(s, &v, err, sizeof err), PF_JSON_STREAM_TREE);
    t = pf_json_stream_tree(s);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(t, "ops"), 1)), 7);
    json_decref(t);
    pf_json_stream_destroy(&s);
    /* 1500 levels: too deep to parse alone (PF_JSON_STREAM_DEPTH), fine for jansson from the
     * top; 2100: jansson's limit of 2048 from the top is at the element's 2047th bracket */
    char *ok = deep_text(1500), *bad = deep_text(2100);
    CU_ASSERT_FATAL(ok && bad);
    CU_ASSERT_EQUAL(drain(ok, strlen(ok), 0, err, sizeof err), PF_JSON_STREAM_TREE);
    CU_ASSERT_EQUAL(drain(bad, strlen(bad), 0, err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "t.json:1:2056: maximum parsing depth reached near '['");
    free(ok);
    free(bad);
}

static void test_find_keys(void)
{
    const char *const keys[] = {"ops", "devices", "hierarchy"};
    int found[3];
    const char *text = "{\"ops\": [{\"a\": \"}\"}], \"d\\u0065vices\": {\"x\": [1, \"]\"]}, "
                       "\"n\": -1.5e3, \"t\": true}";
    CU_ASSERT_EQUAL(pf_json_stream_find_keys(text, strlen(text), keys, 3, found), PF_OK);
    CU_ASSERT_EQUAL(found[0], 1);
    CU_ASSERT_EQUAL(found[1], 1);
    CU_ASSERT_EQUAL(found[2], 0);
    CU_ASSERT_EQUAL(pf_json_stream_find_keys("{ }", 3, keys, 3, found), PF_OK);
    CU_ASSERT_EQUAL(found[0] + found[1] + found[2], 0);
    CU_ASSERT_EQUAL(pf_json_stream_find_keys("[1]", 3, keys, 3, found), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_json_stream_find_keys("{\"a\" 1}", 7, keys, 3, found), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_json_stream_find_keys("{\"ops\": ", 8, keys, 3, found), PF_EINPUT);
}

static void test_read_file(void)
{
    char err[256], *buf;
    size_t len;
    const char *text = "{\"a\": [1, 2]}\n";
    const char *path = pf_test_write("stream.json", text);
    CU_ASSERT_EQUAL_FATAL(pf_json_stream_read_file(path, &buf, &len, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(len, strlen(text));
    CU_ASSERT_STRING_EQUAL(buf, text);
    free(buf);
    CU_ASSERT_EQUAL(pf_json_stream_read_file("/nonexistent/s.json", &buf, &len, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "/nonexistent/s.json: No such file or directory");
    CU_ASSERT_PTR_NULL(buf);
}

void pf_suite_json_stream(void)
{
    CU_pSuite s = CU_add_suite("json_stream", NULL, NULL);
    CU_add_test(s, "members and elements one at a time: escapes, nesting", test_members_and_elements);
    CU_add_test(s, "errors: hand-counted line and column, as a whole parse", test_error_positions);
    CU_add_test(s, "what the scanner does not follow: one tree", test_whole_tree);
    CU_add_test(s, "top-level keys found without parsing values", test_find_keys);
    CU_add_test(s, "a whole file read", test_read_file);
}
