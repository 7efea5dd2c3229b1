/* util: sizes with units at every magnitude, UTF-8 checks, range checks. */
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void test_fmt_bytes(void)
{
    static const struct {
        double bytes;
        const char *expect;
    } cases[] = {
        {0, "0 bytes"},
        {512, "512 bytes"},
        {1536, "1.5 KiB"},                    /* 1536 / 1024 */
        {1.5 * 1073741824.0, "1.5 GiB"},
        {1e18, "888.2 PiB"},                  /* 1e18 / 2^50 = 888.18 */
        {1e21, "867.4 EiB"},                  /* 1e21 / 2^60 = 867.36 */
        {1e24, "847.0 ZiB"},                  /* 1e24 / 2^70 = 847.03 */
        {1e27, "827.2 YiB"},                  /* 1e27 / 2^80 = 827.18 */
        {1e37, "8.3e+12 YiB"},                /* 1e37 / 2^80 = 8.27e12 */
        {1e300, "8.3e+275 YiB"},
        {-3072, "-3.0 KiB"},
        {INFINITY, "inf bytes"},
        {NAN, "nan bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        pf_fmt_bytes(buf, sizeof buf, cases[i].bytes);
        if (strcmp(buf, cases[i].expect))
            fprintf(stderr, "\n  %g: got '%s', want '%s'\n", cases[i].bytes, buf, cases[i].expect);
        CU_ASSERT_STRING_EQUAL(buf, cases[i].expect);
    }
    /* DBL_MAX still fits a 32-byte buffer with its unit */
    char buf[32];
    pf_fmt_bytes(buf, sizeof buf, 1.7976931348623157e308);
    CU_ASSERT_STRING_EQUAL(buf, "1.5e+284 YiB");
}

static void test_utf8(void)
{
    static const struct {
        const char *s;
        long at;
    } cases[] = {
        {"", -1},
        {"plain.ascii", -1},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", -1}, /* U+00E9, U+20AC, U+1F600 */
        {"\xf4\x8f\xbf\xbf", -1},                          /* U+10FFFF, the last */
        {"ab\xff", 2},
        {"\x80", 0},                                       /* lone continuation byte */
        {"\xc1\xbf", 0},                                   /* overlong U+007F */
        {"\xe0\x9f\xbf", 0},                               /* overlong U+07FF */
        {"x\xed\xa0\x80", 1},                              /* U+D800 */
        {"xy\xed\xbf\xbf", 2},                             /* U+DFFF */
        {"\xf4\x90\x80\x80", 0},                           /* U+110000 */
        {"abc\xe2\x82", 3},                                /* cut short by the end */
        {"\xe2\x82z", 0},                                  /* cut short by ASCII */
        {"\xf8\x88\x80\x80\x80", 0},                       /* 5-byte form */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CU_ASSERT_EQUAL(pf_utf8_invalid_at(cases[i].s), cases[i].at);
    char err[128];
    CU_ASSERT_EQUAL(pf_check_utf8("ok\xc3\xa9", "ops[3].name", err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_check_utf8("layers.\xc3", "ops[3].name", err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "ops[3].name: invalid UTF-8 at byte 7");

    /* shortening never cuts a character: "a\xc3\xa9" is 3 bytes, 2 would split the e-acute */
    CU_ASSERT_EQUAL(pf_utf8_fit("a\xc3\xa9", 2), 1);
    CU_ASSERT_EQUAL(pf_utf8_fit("a\xc3\xa9", 3), 3);
    CU_ASSERT_EQUAL(pf_utf8_fit("a\xc3\xa9", 10), 3);
    CU_ASSERT_EQUAL(pf_utf8_fit("\xf0\x9f\x98\x80z", 3), 0);
    CU_ASSERT_EQUAL(pf_utf8_fit("abcdef", 4), 4);
}

static void test_range(void)
{
    char err[128];
    CU_ASSERT_EQUAL(pf_check_range(1e9, 1e9, "ms", "x", err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_check_range(0, 1e9, "ms", "x", err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_check_range(1.0000001e9, 1e9, "ms", "ops[2].fwd_ms", err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "ops[2].fwd_ms: 1e+09 is above the limit of 1e+09 ms");
    CU_ASSERT_EQUAL(pf_check_range(-0.5, 1e9, "ms", "y", err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "y: negative (-0.5)");
    CU_ASSERT_EQUAL(pf_check_range(NAN, 1e9, "ms", "z", err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "z: not finite");
}

void pf_suite_util(void)
{
    CU_pSuite s = CU_add_suite("util", NULL, NULL);
    CU_add_test(s, "sizes keep their unit at every magnitude", test_fmt_bytes);
    CU_add_test(s, "UTF-8: valid, invalid, where, shortening", test_utf8);
    CU_add_test(s, "range checks name the limit and the unit", test_range);
}
