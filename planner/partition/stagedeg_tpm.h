/* stagedeg_tpm: the instance and the stage prices of stagedeg_tp.h's DP: every op's
 * configurations grouped by t, the model's t(H) and memory, and [Piper]'s choice of
 * configurations for one stage (stagedeg_tp.h states all three). Split from stagedeg_tp.c, which
 * keeps the DP; transparent, since the DP's inner loop reads it. */
#ifndef PF_STAGEDEG_TPM_H
#define PF_STAGEDEG_TPM_H

#include "planner/partition/stagedeg.h"

/* One configuration of one op for t devices per replica ([Piper]'s TMPC). */
typedef struct {
    int t;              /* tensor-parallel degree: devices per replica, >= 1 */
    double time_ms;     /* per micro-batch of one replica */
    double param_bytes; /* per device: what the data-parallel all-reduce moves */
    double act_bytes;   /* per device, per micro-batch in flight */
    double fixed_bytes; /* per device, held once */
    /* bytes added to each edge when it crosses a stage boundary: one per edge into the op
     * (pf_graph_in order), then one per edge out of it (pf_graph_out order); NULL = all 0.
     * Borrowed. */
    const double *sync_bytes;
} pf_stagedeg_tmpc_t;

/* Every op's configurations, op by op: op v's are opt[first[v] .. first[v + 1]). Borrowed. */
typedef struct {
    const pf_stagedeg_tmpc_t *opt;
    const int *first; /* nops + 1 entries, first[0] = 0 */
} pf_stagedeg_tmpcs_t;

enum { PF_STAGEDEG_TPM_MAXOPT = 2 }; /* configurations per op and t ([Piper]'s heuristic's limit) */

/* Sums over a stage's ops (or one op's terms): time, boundary bytes X, parameters, act, fixed. */
typedef struct {
    double time, x, p, act, fixed;
} pf_stagedeg_tpm_sums_t;

typedef struct {
    const pf_graph_t *g;
    const pf_cost_model_t *cm;
    const pf_stagedeg_opts_t *o;
    const pf_stagedeg_tmpcs_t *tab;
    int n, mb, D, S;   /* S: the most a chain's data-parallel degrees add up to */
    int nt, tmax, *ts; /* the t <= D some configuration has, ascending */
    int *cnt;          /* cnt[ti n + v]: v's configurations at ts[ti] (0..2) */
    int *idx;          /* idx[(ti n + v) MAXOPT + l]: the l-th, counted from first[v] */
    int *fast;         /* fast[ti n + v]: v's fixed fastest l at ts[ti]; -1: none or not fixed */
    int *stable;       /* stable[ti]: every op with a configuration at ts[ti] has a fixed fastest */
    int *slot_in, *slot_out; /* per edge: its place in the head's / tail's sync_bytes */
    double *sf;              /* sf[d], d = 1..D */
} pf_stagedeg_tpm_t;

/* PF_OK, PF_EINPUT (options, configurations) or PF_ERR; pf_stagedeg_tpm_free in every case. */
int pf_stagedeg_tpm_init(pf_stagedeg_tpm_t *m, const pf_graph_t *g, const pf_cost_model_t *cm,
                         const pf_stagedeg_opts_t *o, const pf_stagedeg_tmpcs_t *tab, char *err,
                         size_t errlen);
void pf_stagedeg_tpm_free(pf_stagedeg_tpm_t *m);

/* The l-th configuration of v at ts[ti]; a configuration's sync bytes at a slot (0 without). */
const pf_stagedeg_tmpc_t *pf_stagedeg_tpm_conf(const pf_stagedeg_tpm_t *m, int ti, int v, int l);
double pf_stagedeg_tpm_sync(const pf_stagedeg_tmpc_t *c, int slot);

/* t(H) of a stage from its sums on d replicas (stagedeg_tp.h). */
static inline double pf_stagedeg_tpm_price(const pf_stagedeg_tpm_t *m,
                                           const pf_stagedeg_tpm_sums_t *h, int d)
{
    double bytes_per_ms = m->cm->flat_gbps * 1e6;
    return (h->time + m->o->edge_factor * h->x / bytes_per_ms) / d +
           m->o->allreduce_factor * (d - 1) / d * h->p / m->mb / bytes_per_ms;
}

/* Memory of a stage on each device, d replicas holding y micro-batches. */
static inline double pf_stagedeg_tpm_memory(const pf_stagedeg_tpm_t *m,
                                            const pf_stagedeg_tpm_sums_t *h, int d, int y)
{
    return m->sf[d] * h->p + y * h->act + h->fixed + m->cm->reserve_bytes;
}

/* y = min(MB, ceil(s / d)). */
static inline int pf_stagedeg_tpm_y(const pf_stagedeg_tpm_t *m, int s, int d)
{
    int y = (s + d - 1) / d;
    return y < m->mb ? y : m->mb;
}

static inline void pf_stagedeg_tpm_add(pf_stagedeg_tpm_sums_t *a, const pf_stagedeg_tpm_sums_t *b)
{
    a->time += b->time;
    a->x += b->x;
    a->p += b->p;
    a->act += b->act;
    a->fixed += b->fixed;
}

/* Op v's terms under configuration c in stage h (a bitset): its boundary edges' bytes + sync. */
pf_stagedeg_tpm_sums_t pf_stagedeg_tpm_op_sums(const pf_stagedeg_tpm_t *m, const uint64_t *h,
                                               int v, const pf_stagedeg_tmpc_t *c);

typedef struct {
    double ratio, save;
    int i;
} pf_stagedeg_tpm_cand_t;

/* A thread's scratch for one stage H: the caller fills h (its bitset), ops[0..nh) (ascending)
 * and sets cti = -1 for each new stage; the rest is the choice's. */
typedef struct {
    uint64_t *h;
    int *ops, nh, *fast, *low, *pick;
    int cti, cd; /* terms are for ts[cti] (-1: none yet), fast and val also for d = cd */
    pf_stagedeg_tpm_sums_t cfast, *terms; /* terms[i MAXOPT + l] */
    double *val;  /* val[i MAXOPT + l]: d x the op's term of t(H) at (t, d): orders configurations */
    double *coef; /* its a and b (val = a + (d - 1) b), per op and configuration */
    double *mem;
    pf_stagedeg_tpm_cand_t *cand;
} pf_stagedeg_tpm_scratch_t;

int pf_stagedeg_tpm_scratch_init(pf_stagedeg_tpm_scratch_t *sc, int n, int words);
void pf_stagedeg_tpm_scratch_free(pf_stagedeg_tpm_scratch_t *sc);

/* The stage's ops at their fastest configuration at (ts[ti], d): sc->fast and the sums. */
pf_stagedeg_tpm_sums_t pf_stagedeg_tpm_fastest(const pf_stagedeg_tpm_t *m,
                                               pf_stagedeg_tpm_scratch_t *sc, int ti, int d);

/* The stage's price at (ts[ti], d, y) as stagedeg_tp.h chooses; INFINITY when it does not fit.
 * sc->pick gets the choice and *mode 0 (every op at its fastest) or 2 ([Piper]'s swaps). */
double pf_stagedeg_tpm_choose(const pf_stagedeg_tpm_t *m, pf_stagedeg_tpm_scratch_t *sc, int ti,
                              int d, int y, int *mode);

#endif
