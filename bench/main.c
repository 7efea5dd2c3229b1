/* pf_bench [name ...]: runs every benchmark (or the named ones). Each prints its own table of
 * ratios against a baseline measured in the same run. */
#include <stdio.h>
#include <string.h>

#define PF_BENCH(name) int pf_bench_##name(void);
#include "bench/benches.h"
#undef PF_BENCH
#define PF_BENCH(name) {#name, pf_bench_##name},
static const struct {
    const char *name;
    int (*run)(void);
} benches[] = {
#include "bench/benches.h"
    {NULL, NULL}};

int main(int argc, char **argv)
{
    int failed = 0, ran = 0;
    for (size_t i = 0; benches[i].name; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            want |= strcmp(argv[a], benches[i].name) == 0;
        if (!want)
            continue;
        printf("\n==== bench %s ====\n", benches[i].name);
        fflush(stdout);
        ran++;
        if (benches[i].run() != 0) {
            fprintf(stderr, "bench %s failed\n", benches[i].name);
            failed = 1;
        }
    }
    if (!ran)
        fprintf(stderr, "no benchmark matched\n");
    return failed || !ran;
}
