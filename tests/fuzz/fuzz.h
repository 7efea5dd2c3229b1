/* Shared by the libFuzzer targets (tests/fuzz/fuzz_<target>.c) and the seed generator: the small
 * fixed graph and cluster that plans, job results and probes are read against, and a way to hand
 * fuzzer bytes to readers that only take a path. */
#ifndef PF_FUZZ_H
#define PF_FUZZ_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define PF_FUZZ_OPS 6
#define PF_FUZZ_DEVICES 4

/* ops 0..5 (ids 10..15), a chain with one skip edge 0 -> 2. */
static inline pf_graph_t *pf_fuzz_graph(void)
{
    pf_graph_t *g = pf_graph_new("fuzz", 2);
    for (int i = 0; i < PF_FUZZ_OPS; i++) {
        pf_op_t op = {.id = 10 + i, .fwd_ms = 1 + i, .bwd_ms = 2 + i, .param_bytes = 1e6,
                      .mem_fwd_bytes = 1e5, .mem_bwd_bytes = 1e5};
        pf_graph_add_op(g, &op);
    }
    for (int i = 1; i < PF_FUZZ_OPS; i++)
        pf_graph_add_edge(g, i - 1, i, 1e5 * i);
    pf_graph_add_edge(g, 0, 2, 7e4);
    if (pf_graph_finalize(g, NULL, 0) != 0)
        pf_graph_destroy(&g);
    return g;
}

/* 4 devices on 2 hosts: 100 GB/s inside a host, 10 between. */
static inline pf_cluster_t *pf_fuzz_cluster(void)
{
    pf_cluster_t *c = pf_cluster_new("fuzz4", PF_FUZZ_DEVICES);
    for (int i = 0; i < PF_FUZZ_DEVICES; i++) {
        pf_device_t d = {.id = i, .host = i / 2, .name = "gpu", .mem_bytes = 16e9, .tflops = 100};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < PF_FUZZ_DEVICES; j++)
            if (i != j)
                pf_cluster_set_bw(c, i, j, i / 2 == j / 2 ? 100 : 10);
    }
    if (pf_cluster_validate(c, NULL, 0) != 0)
        pf_cluster_destroy(&c);
    return c;
}

/* The bytes as an anonymous in-memory file; path receives "/proc/self/fd/N". Returns the fd
 * (close it after use) or -1. */
static inline int pf_fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t len)
{
    int fd = memfd_create("pf_fuzz", 0);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t k = write(fd, data + off, size - off);
        if (k <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)k;
    }
    snprintf(path, len, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
