/* import: what the two readers share (import_pipedream.c, import_piper.c): op types by class
 * name, the profiled batch sizes of the shipped profiles, file stems, and the id index. */
#include "planner/inputs/import.h"
#include "planner/core/util.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *cls, *type;
} type_table[] = {
    {"Conv1d", "conv"},          {"Conv2d", "conv"},
    {"Conv3d", "conv"},          {"ConvTranspose2d", "conv"},
    {"Linear", "linear"},        {"Classifier", "linear"},
    {"ReLU", "relu"},            {"ReLU6", "relu"},
    {"GELU", "gelu"},            {"BatchNorm1d", "batchnorm"},
    {"BatchNorm2d", "batchnorm"}, {"BatchNorm3d", "batchnorm"},
    {"LayerNorm", "layernorm"},  {"LSTM", "lstm"},
    {"EmuBidirLSTM", "lstm"},    {"RecurrentAttention", "attention"},
    {"MultiheadAttention", "attention"}, {"Embedding", "embedding"},
    {"MaxPool1d", "pool"},       {"MaxPool2d", "pool"},
    {"AvgPool2d", "pool"},       {"AdaptiveAvgPool2d", "pool"},
    {"Add", "elementwise"},      {"Mul", "elementwise"},
    {"Concat", "elementwise"},   {"Sigmoid", "elementwise"},
    {"Tanh", "elementwise"},     {"Hardtanh", "elementwise"},
    {"Dropout", "dropout"},      {"Softmax", "softmax"},
    {"LogSoftmax", "softmax"},   {"View", "reshape"},
    {"Flatten", "reshape"},      {"Size", "shape"},
    {"__getitem__", "getitem"},  {"hidden", "input"},
    {"tensor", "input"},         {"ParallelTransformerLayer", "transformer_layer"},
};

const char *pf_import_type_of(const char *cls, char *buf, size_t len)
{
    if (!cls)
        return "";
    for (size_t i = 0; i < sizeof type_table / sizeof type_table[0]; i++)
        if (!strcmp(cls, type_table[i].cls))
            return type_table[i].type;
    /* PipeDream numbers its graph inputs: Input, Input0, Input1, ... */
    if (!strncmp(cls, "Input", 5) && strspn(cls + 5, "0123456789") == strlen(cls + 5))
        return "input";
    if (!buf || len == 0)
        return "";
    size_t n = pf_utf8_fit(cls, len - 1), i = 0;
    for (; i < n; i++)
        buf[i] = (char)tolower((unsigned char)cls[i]);
    buf[n] = '\0';
    return buf;
}

static const struct {
    const char *format, *stem;
    int nops, microbatch;
} known_batches[] = {
    /* tests/data/README.md: the profiled minibatch of the shipped PipeDream profiles */
    {"pipedream", "alexnet", 23, 256},
    {"pipedream", "vgg16", 41, 128},
    {"pipedream", "resnet50", 177, 128},
    {"pipedream", "resnet101", 347, 64},
    /* Piper's resnet.json is PipeDream's resnet50 profile, node for node */
    {"piper", "resnet", 177, 128},
};

int pf_import_known_microbatch(const char *format, const char *stem, int nops)
{
    if (!format || !stem)
        return 0;
    for (size_t i = 0; i < sizeof known_batches / sizeof known_batches[0]; i++)
        if (!strcmp(format, known_batches[i].format) && !strcmp(stem, known_batches[i].stem) &&
            nops == known_batches[i].nops)
            return known_batches[i].microbatch;
    return 0;
}

/* "dir/vgg16.txt" -> "vgg16"; "-" -> "stdin". */
void pf_import_file_stem(const char *path, char *buf, size_t len)
{
    if (!path || !strcmp(path, "-")) {
        snprintf(buf, len, "stdin");
        return;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        n = (size_t)(dot - base);
    if (n == 0) {
        snprintf(buf, len, "graph");
        return;
    }
    snprintf(buf, len, "%.*s", (int)n, base);
}

const char *pf_import_label(const char *path)
{
    return path && strcmp(path, "-") ? path : "<stdin>";
}

/* microbatch 0: the shipped profile's batch size when known, else 1. */
int pf_import_resolve_microbatch(const char *format, const char *stem, int nops, int microbatch)
{
    if (microbatch == 0)
        microbatch = pf_import_known_microbatch(format, stem, nops);
    return microbatch > 0 ? microbatch : 1;
}

int pf_import_key_cmp(const void *a, const void *b)
{
    const pf_import_key_t *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

int pf_import_key_find(const pf_import_key_t *keys, size_t n, int64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && keys[lo].id == id ? keys[lo].index : -1;
}
