/* interleave: compute orders of a pipeline rank (interleave.h). */
#include "planner/sim/interleave.h"
#include "planner/core/util.h"

#include <string.h>

int pf_interleave_warmup(int P, int V, int MB, int rank)
{
    int total = MB * V;
    if (MB == P) /* Megatron-LM: every forward first, then every backward */
        return total;
    int warm = (P - rank - 1) * 2 + (V - 1) * P;
    return warm < total ? warm : total;
}

/* Forwards go through the chunks in groups of P micro-batches: P forwards of chunk 0, P of chunk
 * 1, ..., P of chunk V - 1, then the next P micro-batches; backwards the same with the chunks
 * from the last ([Narayanan21] Fig. 4, Megatron-LM's get_model_chunk_id). */
void pf_interleave_kth(int P, int V, int k, int bwd, int *chunk, int *microbatch)
{
    int in_group = k % (P * V);
    int c = in_group / P;
    *chunk = bwd ? V - 1 - c : c;
    *microbatch = k / (P * V) * P + in_group % P;
}

static int entry(int P, int V, int MB, int k, int bwd)
{
    int c, m;
    pf_interleave_kth(P, V, k, bwd, &c, &m);
    return bwd ? -1 - (c * MB + m) : c * MB + m;
}

/* 1F1B over the MB x V micro-batch-chunks: warm forwards, then forward warm + i and backward i
 * alternate, then the remaining backwards; the k-th task is the one pf_interleave_kth gives. */
static void one_f_one_b(int P, int V, int MB, int warm, int *out)
{
    int total = MB * V, n = 0;
    for (int k = 0; k < warm; k++)
        out[n++] = entry(P, V, MB, k, 0);
    for (int i = 0; i + warm < total; i++) {
        out[n++] = entry(P, V, MB, warm + i, 0);
        out[n++] = entry(P, V, MB, i, 1);
    }
    for (int k = total - warm; k < total; k++)
        out[n++] = entry(P, V, MB, k, 1);
}

/* The compute order of one stage: `out[i]` is micro-batch m as m (forward) or -1 - m (backward).
 * 1F1B (Narayanan et al. 2021, PipeDream-Flush): W = min(MB, S - s - 1) warm-up forwards, then
 * forward W + i and backward i alternate, then the remaining backwards; in flight at most W + 1 =
 * min(MB, S - s). Eager-1F1B (Zhuang et al., Fig. 4b) runs more warm-up forwards: we take one extra
 * per downstream stage, W = min(MB, 2 (S - s - 1)), so that between a stage's two dependent
 * tasks there is always another micro-batch's forward to overlap the transfer with. */
static void stage_order(pf_training_schedule_t order, int S, int MB, int s, int *out)
{
    int n = 0;
    if (order == PF_SCHEDULE_GPIPE) {
        for (int m = 0; m < MB; m++)
            out[n++] = m;
        for (int m = MB - 1; m >= 0; m--) /* autograd unwinds the newest micro-batch first */
            out[n++] = -1 - m;
        return;
    }
    int warm = order == PF_SCHEDULE_EAGER_1F1B ? 2 * (S - s - 1) : S - s - 1;
    one_f_one_b(S, 1, MB, warm < MB ? warm : MB, out); /* one chunk: the k-th task is m = k */
}

/* Interleaved 1F1B as Megatron-LM runs it: one_f_one_b with W warm-up forwards
 * (pf_interleave_warmup). */
void pf_interleave_order(pf_training_schedule_t order, int P, int V, int MB, int rank, int *out)
{
    if (V <= 1) {
        stage_order(order, P, MB, rank, out);
        return;
    }
    one_f_one_b(P, V, MB, pf_interleave_warmup(P, V, MB, rank), out);
}

int pf_interleave_check(int stages, int V, int MB, int *P, char *err, size_t errlen)
{
    if (V < 0 || stages % (V > 1 ? V : 1) != 0)
        return pf_fail(err, errlen, PF_EINPUT, "simulate: %d stages are not the chunks of "
                       "ranks with %d each", stages, V);
    *P = stages / (V > 1 ? V : 1);
    if (V > 1 && MB % *P != 0) /* Megatron-LM asks it of the interleaved schedule */
        return pf_fail(err, errlen, PF_EINPUT, "simulate: interleaved 1F1B needs micro-batches "
                       "(%d) a multiple of the pipeline ranks (%d)", MB, *P);
    return PF_OK;
}

int pf_interleave_same_devices(const int *dev, const int *first, int n, int s, int P, char *err,
                               size_t errlen)
{
    if (memcmp(dev, first, (size_t)n * sizeof *dev) != 0)
        return pf_fail(err, errlen, PF_EINPUT, "simulate: stage %d (chunk %d of rank %d) is not "
                       "on the devices of stage %d", s, s / P, s % P, s - P);
    return PF_OK;
}
