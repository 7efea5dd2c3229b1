/* map_stages_search: the placement of a plan whose stages differ (map_stages.h: the objective
 * and what this search guarantees): an enumeration of the in-host placements of small cases,
 * else greedy placements improved by swaps; and `planfarm map`'s entry for such plans. */
#include "planner/map/map_stages_search.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void pf_map_stages_search_opts_init(pf_map_stages_search_opts_t *o)
{
    o->exhaustive_max = PF_MAP_STAGES_SEARCH_EXHAUSTIVE;
    o->rounds = PF_MAP_STAGES_SEARCH_ROUNDS;
    o->max_evals = PF_MAP_STAGES_SEARCH_EVALS;
}

/* ---------------------------------------------------------------- greedy */

typedef struct {
    const pf_map_stages_t *m;
    int *used;     /* D */
    int *free_h;   /* H: free devices per host */
    int *rest;     /* sizes of the groups not yet placed */
    int nrest;
    int *scratch;  /* H + G */
    bool packable; /* the groups left can all go inside hosts */
} alloc_t;

/* Takes t free devices of host h (lowest indices) into out. */
static void take_host(alloc_t *a, int h, int t, int *out)
{
    const pf_map_stages_t *m = a->m;
    for (int i = m->host_off[h], k = 0; k < t; i++)
        if (!a->used[m->host_dev[i]]) {
            out[k++] = m->host_dev[i];
            a->used[m->host_dev[i]] = 1;
        }
    a->free_h[h] -= t;
}

/* Drops one group of size t from the sizes left. */
static void drop_rest(alloc_t *a, int t)
{
    for (int i = 0; i < a->nrest; i++)
        if (a->rest[i] == t) {
            a->rest[i] = a->rest[--a->nrest];
            return;
        }
}

/* One group of t devices into out: the first host in order that has room and leaves the other
 * groups packable; else the first with room; else free devices in host order (spanning hosts). */
static void place_group(alloc_t *a, const int *hosts, int t, int *out)
{
    const pf_map_stages_t *m = a->m;
    drop_rest(a, t);
    int fallback = -1;
    for (int i = 0; i < m->H; i++) {
        int h = hosts[i];
        if (a->free_h[h] < t)
            continue;
        if (fallback < 0)
            fallback = h;
        if (!a->packable)
            break;
        a->free_h[h] -= t;
        bool ok = pf_map_stages_ffd_packs(a->rest, a->nrest, a->free_h, m->H, a->scratch);
        a->free_h[h] += t;
        if (ok) {
            take_host(a, h, t, out);
            return;
        }
    }
    if (fallback >= 0) {
        take_host(a, fallback, t, out);
        return;
    }
    for (int i = 0, k = 0; i < m->H && k < t; i++)
        for (int j = m->host_off[hosts[i]]; j < m->host_off[hosts[i] + 1] && k < t; j++)
            if (!a->used[m->host_dev[j]]) {
                out[k++] = m->host_dev[j];
                a->used[m->host_dev[j]] = 1;
                a->free_h[hosts[i]]--;
            }
}

static int alloc_init(alloc_t *a, const pf_map_stages_t *m)
{
    memset(a, 0, sizeof *a);
    a->m = m;
    a->used = calloc((size_t)m->D, sizeof *a->used);
    a->free_h = malloc((size_t)m->H * sizeof *a->free_h);
    a->rest = malloc((size_t)m->G * sizeof *a->rest);
    a->scratch = malloc(((size_t)m->H + m->G) * sizeof *a->scratch);
    return a->used && a->free_h && a->rest && a->scratch ? PF_OK : PF_ERR;
}

static void alloc_free(alloc_t *a)
{
    free(a->used);
    free(a->free_h);
    free(a->rest);
    free(a->scratch);
}

/* Every group of the stages in `order` over the hosts in `hosts`: stage after stage (each
 * stage's replicas in turn), or with replica_major replica r of every stage before replica r + 1
 * (one pipeline's stages side by side, as the p2p map). */
static void place_all(alloc_t *a, const int *order, const int *hosts, bool replica_major,
                      int *dev)
{
    const pf_map_stages_t *m = a->m;
    int dmax = 1;
    memset(a->used, 0, (size_t)m->D * sizeof *a->used);
    for (int h = 0; h < m->H; h++)
        a->free_h[h] = m->host_off[h + 1] - m->host_off[h];
    a->nrest = 0;
    for (int j = 0; j < m->G; j++)
        a->rest[a->nrest++] = m->t[m->grp_stage[j]];
    a->packable = pf_map_stages_ffd_packs(a->rest, a->nrest, a->free_h, m->H, a->scratch);
    for (int s = 0; s < m->S; s++)
        dmax = m->d[s] > dmax ? m->d[s] : dmax;
    for (int pass = 0; pass < (replica_major ? dmax : 1); pass++)
        for (int i = 0; i < m->S; i++) {
            int s = order[i], r0 = replica_major ? pass : 0;
            int r1 = replica_major ? (pass < m->d[s] ? pass + 1 : pass) : m->d[s];
            for (int r = r0; r < r1; r++)
                place_group(a, hosts, m->t[s], dev + m->off[s] + r * m->t[s]);
        }
}

/* The next permutation of v[0..n) in lexicographic order; false after the last. */
static bool next_permutation(int *v, int n)
{
    int i = n - 2;
    while (i >= 0 && v[i] >= v[i + 1])
        i--;
    if (i < 0)
        return false;
    int j = n - 1;
    while (v[j] <= v[i])
        j--;
    int x = v[i];
    v[i] = v[j];
    v[j] = x;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        x = v[l];
        v[l] = v[r];
        v[r] = x;
    }
    return true;
}

/* Stage s's load: c_u(s) / d_s on the fastest kind (the time its replicas share). */
static double load_ms(const pf_map_stages_t *m, int s)
{
    double best = INFINITY;
    for (int v = 0; v < m->D; v++)
        best = fmin(best, pf_map_stages_cu_ms(m, s, v));
    return best / m->d[s];
}

/* Hosts fastest first (host_speed ascending, ties by index). */
static void hosts_fast_first(const pf_map_stages_t *m, int *hosts)
{
    for (int i = 0; i < m->H; i++) {
        int h = i, j = i;
        while (j > 0 && m->host_speed[hosts[j - 1]] > m->host_speed[h]) {
            hosts[j] = hosts[j - 1];
            j--;
        }
        hosts[j] = h;
    }
}

/* The heaviest stages (by load) that fit the fastest tier of hosts (hosts of one speed) go
 * there, then the next tier's, and so on; order: tier by tier, each in pipeline order, then the
 * stages no tier held. tier: S ints of scratch. */
static void stages_by_tier(const pf_map_stages_t *m, const int *hosts, int *order, int *tier)
{
    int S = m->S, n = 0, ntiers = 0;
    for (int s = 0; s < S; s++)
        tier[s] = -1;
    for (int i = 0; i < m->H; ntiers++) {
        int room = 0, j = i;
        for (; j < m->H && m->host_speed[hosts[j]] == m->host_speed[hosts[i]]; j++)
            room += m->host_off[hosts[j] + 1] - m->host_off[hosts[j]];
        for (;;) { /* the heaviest stage left that fits */
            int best = -1;
            for (int s = 0; s < S; s++)
                if (tier[s] < 0 && m->d[s] * m->t[s] <= room &&
                    (best < 0 || load_ms(m, s) > load_ms(m, best)))
                    best = s;
            if (best < 0)
                break;
            tier[best] = ntiers;
            room -= m->d[best] * m->t[best];
        }
        i = j;
    }
    for (int k = 0; k <= ntiers; k++)
        for (int s = 0; s < S; s++)
            if (tier[s] == (k < ntiers ? k : -1))
                order[n++] = s;
}

/* ---------------------------------------------------------------- swaps */

typedef struct {
    const pf_map_stages_t *m;
    int *dev;
    double *stage_ms; /* S: each stage's slowest replica */
    int *used;        /* D: position in dev + 1, 0 when free */
    int *tmp;         /* the largest t */
    int *save;        /* 2 x the largest t */
    double obj, sum;
    int swaps;
    long long evals, budget; /* replica times computed; the most allowed */
} improve_t;

static void key_of(const improve_t *im, double *obj, double *sum)
{
    *obj = 0;
    *sum = 0;
    for (int s = 0; s < im->m->S; s++) {
        *obj = fmax(*obj, im->stage_ms[s]);
        *sum += im->stage_ms[s];
    }
}

/* Re-prices stage s and its neighbours after s's devices changed. */
static void reprice(improve_t *im, int s)
{
    int cnt;
    const int *nb = pf_stage_graph_neighbors(im->m->sg, s, &cnt);
    im->stage_ms[s] = pf_map_stages_stage_ms(im->m, im->dev, s);
    im->evals += im->m->d[s];
    for (int i = 0; i < cnt; i++) {
        im->stage_ms[nb[i]] = pf_map_stages_stage_ms(im->m, im->dev, nb[i]);
        im->evals += im->m->d[nb[i]];
    }
}

static bool better(double obj, double sum, double best_obj, double best_sum)
{
    const double eps = 1e-12;
    if (obj < best_obj * (1 - eps))
        return true;
    return obj <= best_obj * (1 + eps) && sum < best_sum * (1 - eps);
}

/* Exchanges the t devices at a and b (b may be outside dev: free devices). */
static void exchange(int *a, int *b, int t)
{
    for (int k = 0; k < t; k++) {
        int x = a[k];
        a[k] = b[k];
        b[k] = x;
    }
}

/* Tries swapping groups i and j (same size); keeps it when the key falls. */
static bool try_swap(improve_t *im, int s, int r, int u, int q)
{
    const pf_map_stages_t *m = im->m;
    int t = m->t[s];
    int *a = im->dev + m->off[s] + r * t, *b = im->dev + m->off[u] + q * t;
    double *keep = im->stage_ms + m->S; /* the S entries after stage_ms: a copy */
    memcpy(keep, im->stage_ms, (size_t)m->S * sizeof *keep);
    exchange(a, b, t);
    reprice(im, s);
    reprice(im, u);
    double obj, sum;
    key_of(im, &obj, &sum);
    if (better(obj, sum, im->obj, im->sum)) {
        for (int k = 0; k < t; k++) {
            im->used[a[k]] = (int)(a - im->dev) + k + 1;
            im->used[b[k]] = (int)(b - im->dev) + k + 1;
        }
        im->obj = obj;
        im->sum = sum;
        im->swaps++;
        return true;
    }
    exchange(a, b, t);
    memcpy(im->stage_ms, keep, (size_t)m->S * sizeof *keep);
    return false;
}

/* Tries moving group (s, r) onto the lowest free devices of host h. */
static bool try_move(improve_t *im, int s, int r, int h)
{
    const pf_map_stages_t *m = im->m;
    int t = m->t[s], k = 0;
    for (int i = m->host_off[h]; i < m->host_off[h + 1] && k < t; i++)
        if (!im->used[m->host_dev[i]])
            im->tmp[k++] = m->host_dev[i];
    if (k < t)
        return false;
    int *a = im->dev + m->off[s] + r * t;
    double *keep = im->stage_ms + m->S;
    memcpy(keep, im->stage_ms, (size_t)m->S * sizeof *keep);
    exchange(a, im->tmp, t);
    reprice(im, s);
    double obj, sum;
    key_of(im, &obj, &sum);
    if (better(obj, sum, im->obj, im->sum)) {
        for (int i = 0; i < t; i++) {
            im->used[im->tmp[i]] = 0;
            im->used[a[i]] = (int)(a - im->dev) + i + 1;
        }
        im->obj = obj;
        im->sum = sum;
        im->swaps++;
        return true;
    }
    exchange(a, im->tmp, t);
    memcpy(im->stage_ms, keep, (size_t)m->S * sizeof *keep);
    return false;
}

static int stage_of_pos(const pf_map_stages_t *m, int i)
{
    int s = 0;
    while (m->off[s + 1] <= i)
        s++;
    return s;
}

static void sort_group(int *g, int t)
{
    for (int i = 1; i < t; i++)
        for (int j = i; j > 0 && g[j - 1] > g[j]; j--) {
            int x = g[j];
            g[j] = g[j - 1];
            g[j - 1] = x;
        }
}

/* Sets the positions of group g's t devices after it changed. */
static void mark_group(improve_t *im, const int *g, int t)
{
    for (int k = 0; k < t; k++)
        im->used[g[k]] = (int)(g - im->dev) + k + 1;
}

/* Tries device v (same host) at position i: taken from the free devices, or exchanged with the
 * position holding it; groups kept as ascending sets. */
static bool try_exchange(improve_t *im, int i, int v)
{
    const pf_map_stages_t *m = im->m;
    int j = im->used[v] - 1, s = stage_of_pos(m, i), t = m->t[s], u = j >= 0 ? stage_of_pos(m, j) : s;
    int *ga = im->dev + m->off[s] + (i - m->off[s]) / t * t;
    int *gb = j >= 0 ? im->dev + m->off[u] + (j - m->off[u]) / m->t[u] * m->t[u] : NULL;
    if (ga == gb)
        return false;
    double *keep = im->stage_ms + m->S, obj, sum;
    memcpy(keep, im->stage_ms, (size_t)m->S * sizeof *keep);
    memcpy(im->save, ga, (size_t)t * sizeof *ga);
    if (gb)
        memcpy(im->save + t, gb, (size_t)m->t[u] * sizeof *gb);
    int old = im->dev[i];
    im->dev[i] = v;
    if (gb)
        im->dev[j] = old;
    sort_group(ga, t);
    if (gb)
        sort_group(gb, m->t[u]);
    reprice(im, s);
    if (gb)
        reprice(im, u);
    key_of(im, &obj, &sum);
    if (better(obj, sum, im->obj, im->sum)) {
        if (!gb)
            im->used[old] = 0;
        mark_group(im, ga, t);
        if (gb)
            mark_group(im, gb, m->t[u]);
        im->obj = obj;
        im->sum = sum;
        im->swaps++;
        return true;
    }
    memcpy(ga, im->save, (size_t)t * sizeof *ga);
    if (gb)
        memcpy(gb, im->save + t, (size_t)m->t[u] * sizeof *gb);
    memcpy(im->stage_ms, keep, (size_t)m->S * sizeof *keep);
    return false;
}

/* Every device of the host of each of group (s, r)'s devices, at that device's position. */
static bool pass_devices(improve_t *im, int s, int r)
{
    const pf_map_stages_t *m = im->m;
    bool moved = false;
    for (int k = 0; k < m->t[s]; k++) {
        int i = m->off[s] + r * m->t[s] + k, h = m->host_of[im->dev[i]];
        for (int x = m->host_off[h]; x < m->host_off[h + 1]; x++)
            if (m->host_dev[x] != im->dev[i])
                moved |= try_exchange(im, i, m->host_dev[x]);
    }
    return moved;
}

/* Stage s is one of the slowest (within 1e-9). */
static bool critical(const improve_t *im, int s)
{
    return im->stage_ms[s] >= im->obj * (1 - 1e-9);
}

/* One pass over the groups: every swap and move from group (s, r). true when one was taken. */
static bool pass_group(improve_t *im, int s, int r, bool all_pairs)
{
    const pf_map_stages_t *m = im->m;
    bool moved = false;
    for (int u = 0; u < m->S; u++) {
        if (m->t[u] != m->t[s])
            continue;
        for (int q = 0; q < m->d[u] && im->evals <= im->budget; q++) {
            if ((u < s || (u == s && q <= r)) && (all_pairs || critical(im, u)))
                continue; /* that pair was tried from the other side */
            moved |= try_swap(im, s, r, u, q);
        }
    }
    for (int h = 0; h < m->H; h++)
        moved |= try_move(im, s, r, h);
    moved |= pass_devices(im, s, r);
    return moved;
}

/* Swaps and moves while the key falls, at most `rounds` passes; st gets the swaps taken and
 * whether the last pass took none. With more than PF_MAP_STAGES_SEARCH_ALL_PAIRS groups only
 * groups of the slowest stages start a swap. PF_OK or PF_ERR. */
static int improve(const pf_map_stages_t *m, int *dev, const pf_map_stages_search_opts_t *o,
                   pf_map_stages_search_stats_t *st)
{
    improve_t im = {.m = m, .dev = dev, .budget = o->max_evals};
    int rounds = o->rounds;
    int tmax = 1;
    for (int s = 0; s < m->S; s++)
        tmax = m->t[s] > tmax ? m->t[s] : tmax;
    im.stage_ms = malloc((size_t)m->S * 2 * sizeof *im.stage_ms);
    im.used = calloc((size_t)m->D, sizeof *im.used);
    im.tmp = malloc((size_t)tmax * sizeof *im.tmp);
    im.save = malloc((size_t)tmax * 2 * sizeof *im.save);
    if (!im.stage_ms || !im.used || !im.tmp || !im.save) {
        im.swaps = -1;
        goto done;
    }
    for (int i = 0; i < m->n; i++)
        im.used[dev[i]] = i + 1;
    for (int s = 0; s < m->S; s++)
        im.stage_ms[s] = pf_map_stages_stage_ms(m, dev, s);
    key_of(&im, &im.obj, &im.sum);
    bool all_pairs = m->G <= PF_MAP_STAGES_SEARCH_ALL_PAIRS, moved = true;
    for (int round = 0; round < rounds && moved; round++) {
        moved = false;
        for (int s = 0; s < m->S; s++)
            for (int r = 0; r < m->d[s]; r++)
                if ((all_pairs || critical(&im, s)) && im.evals <= im.budget)
                    moved |= pass_group(&im, s, r, all_pairs);
    }
    moved |= im.evals > im.budget; /* stopped short: not shown a local optimum */
    st->swaps = im.swaps;
    st->converged = !moved;
done:
    free(im.stage_ms);
    free(im.used);
    free(im.tmp);
    free(im.save);
    return im.swaps < 0 ? PF_ERR : PF_OK;
}


/* ---------------------------------------------------------------- greedy and swaps */

#define PERMUTE_MAX_STAGES 4 /* every stage order up to this many stages (24 orders) */
#define IMPROVE_BEST 4       /* greedy placements the swaps start from */

typedef struct {
    int *dev;    /* IMPROVE_BEST placements */
    double ms[IMPROVE_BEST];
    int kept;
} cands_t;

/* Keeps cand among the IMPROVE_BEST best so far (sorted, distinct objectives). */
static void keep_candidate(const pf_map_stages_t *m, cands_t *k, const int *cand)
{
    double ms = pf_map_stages_objective_ms(m, cand);
    int at = k->kept;
    for (int i = 0; i < k->kept; i++)
        if (ms == k->ms[i])
            return;
    while (at > 0 && k->ms[at - 1] > ms)
        at--;
    if (at == IMPROVE_BEST)
        return;
    int last = k->kept < IMPROVE_BEST ? k->kept : IMPROVE_BEST - 1;
    for (int i = last; i > at; i--) {
        k->ms[i] = k->ms[i - 1];
        memcpy(k->dev + (size_t)i * m->n, k->dev + (size_t)(i - 1) * m->n,
               (size_t)m->n * sizeof *k->dev);
    }
    k->ms[at] = ms;
    memcpy(k->dev + (size_t)at * m->n, cand, (size_t)m->n * sizeof *cand);
    k->kept += k->kept < IMPROVE_BEST;
}

/* The greedy placements: stage orders (all of them up to PERMUTE_MAX_STAGES stages, else
 * pipeline and reversed; on a cluster that mixes kinds also the tiers by load) x host orders (by
 * index; fastest first when kinds mix) x stage- or replica-major; the best IMPROVE_BEST kept.
 * Returns how many were tried, -1 when out of memory. */
static int greedy(const pf_map_stages_t *m, cands_t *k)
{
    int S = m->S, H = m->H, tried = 0;
    int *order = malloc((size_t)S * 2 * sizeof *order), *hosts = malloc((size_t)H * 2 * sizeof *hosts);
    int *cand = malloc((size_t)m->n * sizeof *cand);
    alloc_t a;
    if (alloc_init(&a, m) != PF_OK || !order || !hosts || !cand) {
        tried = -1;
        goto done;
    }
    for (int h = 0; h < H; h++)
        hosts[h] = h;
    hosts_fast_first(m, hosts + H);
    for (int hc = 0; hc < (m->nkinds ? 2 : 1); hc++)
        for (int oc = 0; oc < (m->nkinds ? 3 : 2); oc++) {
            for (int s = 0; s < S; s++)
                order[s] = oc == 1 ? S - 1 - s : s;
            if (oc == 2)
                stages_by_tier(m, hosts + hc * H, order, order + S);
            bool more = true;
            while (more) {
                for (int major = 0; major < 2; major++, tried++) {
                    place_all(&a, order, hosts + hc * H, major, cand);
                    keep_candidate(m, k, cand);
                }
                more = oc == 0 && S <= PERMUTE_MAX_STAGES && next_permutation(order, S);
            }
        }
done:
    alloc_free(&a);
    free(order);
    free(hosts);
    free(cand);
    return tried;
}

/* The swaps from each kept greedy placement; the best result into dev. */
static int greedy_and_swaps(const pf_map_stages_t *m, const pf_map_stages_search_opts_t *o,
                            int *dev, pf_map_stages_search_stats_t *st)
{
    cands_t k = {.dev = malloc((size_t)IMPROVE_BEST * m->n * sizeof *k.dev)};
    pf_map_stages_search_stats_t one;
    int rc = PF_ERR;
    double best = INFINITY;
    if (!k.dev || (st->candidates = greedy(m, &k)) < 0)
        goto done;
    for (int i = 0; i < k.kept; i++) {
        int *x = k.dev + (size_t)i * m->n;
        memset(&one, 0, sizeof one);
        if (improve(m, x, o, &one) != PF_OK)
            goto done;
        double ms = pf_map_stages_objective_ms(m, x);
        st->swaps += one.swaps;
        if (ms < best) {
            best = ms;
            st->converged = one.converged;
            memcpy(dev, x, (size_t)m->n * sizeof *dev);
        }
    }
    rc = PF_OK;
done:
    free(k.dev);
    return rc;
}

/* ---------------------------------------------------------------- enumeration */

typedef struct {
    const pf_map_stages_t *m;
    int *dev, *best, *used, *free_h;
    double best_ms;
    long long leaves;
} enum_t;

/* The in-host placements, bounded: the product over groups of sum_h C(|h|, t) (an upper bound
 * of their number); stops above cap. */
static double count_bound(const pf_map_stages_t *m, double cap)
{
    double n = 1;
    for (int j = 0; j < m->G && n <= cap; j++) {
        int t = m->t[m->grp_stage[j]];
        double ways = 0;
        for (int h = 0; h < m->H; h++) {
            int sz = m->host_off[h + 1] - m->host_off[h];
            double c = 1;
            for (int i = 0; i < t; i++)
                c = c * (sz - i) / (i + 1);
            ways += sz >= t ? c : 0;
        }
        n *= ways;
    }
    return n;
}

static void enum_group(enum_t *e, int j);

/* Group j takes devices of host h from position i on, k of t chosen so far. */
static void enum_pick(enum_t *e, int j, int h, int i, int k)
{
    const pf_map_stages_t *m = e->m;
    int s = m->grp_stage[j], t = m->t[s], r = j;
    for (int u = 0; u < s; u++)
        r -= m->d[u];
    if (k == t) {
        enum_group(e, j + 1);
        return;
    }
    for (; i < m->host_off[h + 1]; i++) {
        int v = m->host_dev[i];
        if (e->used[v])
            continue;
        e->used[v] = 1;
        e->dev[m->off[s] + r * t + k] = v;
        enum_pick(e, j, h, i + 1, k + 1);
        e->used[v] = 0;
    }
}

static void enum_group(enum_t *e, int j)
{
    const pf_map_stages_t *m = e->m;
    if (j == m->G) {
        double ms = pf_map_stages_objective_ms(m, e->dev);
        e->leaves++;
        if (ms < e->best_ms) {
            e->best_ms = ms;
            memcpy(e->best, e->dev, (size_t)m->n * sizeof *e->best);
        }
        return;
    }
    int t = m->t[m->grp_stage[j]];
    for (int h = 0; h < m->H; h++) {
        if (e->free_h[h] < t)
            continue;
        e->free_h[h] -= t;
        enum_pick(e, j, h, m->host_off[h], 0);
        e->free_h[h] += t;
    }
}

/* Every in-host placement (groups in stage-major order, each a set of one host's devices);
 * the first best into dev. PF_OK, PF_ERR. */
static int enumerate(const pf_map_stages_t *m, int *dev, pf_map_stages_search_stats_t *st)
{
    enum_t e = {.m = m, .best = dev, .best_ms = INFINITY};
    e.dev = malloc((size_t)m->n * sizeof *e.dev);
    e.used = calloc((size_t)m->D, sizeof *e.used);
    e.free_h = malloc((size_t)m->H * sizeof *e.free_h);
    int rc = e.dev && e.used && e.free_h ? PF_OK : PF_ERR;
    if (rc == PF_OK) {
        for (int h = 0; h < m->H; h++)
            e.free_h[h] = m->host_off[h + 1] - m->host_off[h];
        enum_group(&e, 0);
        st->placements = e.leaves;
        st->exact = 1;
    }
    free(e.dev);
    free(e.used);
    free(e.free_h);
    return rc;
}

/* Whether the groups can all go inside hosts (first-fit decreasing). -1 when out of memory. */
static int packable(const pf_map_stages_t *m)
{
    int *sizes = malloc((size_t)m->G * sizeof *sizes), *cap = malloc((size_t)m->H * sizeof *cap);
    int *scratch = malloc(((size_t)m->H + m->G) * sizeof *scratch), ok = -1;
    if (sizes && cap && scratch) {
        for (int j = 0; j < m->G; j++)
            sizes[j] = m->t[m->grp_stage[j]];
        for (int h = 0; h < m->H; h++)
            cap[h] = m->host_off[h + 1] - m->host_off[h];
        ok = pf_map_stages_ffd_packs(sizes, m->G, cap, m->H, scratch);
    }
    free(sizes);
    free(cap);
    free(scratch);
    return ok;
}

int pf_map_stages_search(const pf_map_stages_t *m, const pf_map_stages_search_opts_t *o, int *dev,
                         pf_map_stages_search_stats_t *st, char *err, size_t errlen)
{
    pf_map_stages_search_stats_t local;
    double t0 = pf_now_s();
    st = st ? st : &local;
    memset(st, 0, sizeof *st);
    int ok = packable(m), rc = PF_ERR;
    if (ok < 0)
        goto done;
    if (ok && o->exhaustive_max > 0 && count_bound(m, (double)o->exhaustive_max) <=
                                           (double)o->exhaustive_max) {
        rc = enumerate(m, dev, st);
    } else {
        rc = greedy_and_swaps(m, o, dev, st);
    }
    st->objective_ms = rc == PF_OK ? pf_map_stages_objective_ms(m, dev) : NAN;
    st->split_groups = rc == PF_OK ? pf_map_stages_split_groups(m, dev) : 0;
done:
    st->seconds = pf_now_s() - t0;
    return rc == PF_OK ? PF_OK : pf_fail(err, errlen, PF_ERR, "out of memory");
}

/* ---------------------------------------------------------------- planfarm map */

/* N x objective + sum_s max_r (c_u + c_m)(s, r): map_stages_search.h's step estimate. */
static double step_estimate_ms(const pf_map_stages_t *m, const int *dev, double obj_ms)
{
    double trip = 0;
    for (int s = 0; s < m->S; s++) {
        double worst = 0;
        for (int r = 0; r < m->d[s]; r++)
            worst = fmax(worst, pf_map_stages_replica_ms(m, dev, s, r));
        trip += (worst - pf_map_stages_ar_ms(m, dev, s)) * m->d[s];
    }
    return (double)m->n_micro * obj_ms + trip;
}

static void fill_plan(pf_plan_t *p, const pf_map_stages_t *m, const int *dev,
                      const pf_map_stages_search_stats_t *st)
{
    for (int s = 0; s < p->stages; s++)
        memcpy(p->stage_list[s].devices, dev + m->off[s],
               (size_t)(m->off[s + 1] - m->off[s]) * sizeof *dev);
    p->devices = m->D;
    p->objective_ms = st->objective_ms;
    p->simulated_step_ms = step_estimate_ms(m, dev, st->objective_ms);
    p->mapping.present = 1;
    snprintf(p->mapping.instantiation, sizeof p->mapping.instantiation, "stages");
    p->mapping.objective_ms = st->objective_ms;
    p->mapping.lower_bound_ms = NAN;
    p->mapping.initial_lower_bound_ms = p->mapping.initial_upper_bound_ms = NAN;
    p->mapping.probes = p->mapping.probes_timed_out = 0;
    p->mapping.symmetric_pruned = 0;
    p->mapping.seconds = st->seconds;
    p->cs_map.present = p->p2p_map.present = 0;
}

int pf_map_stages_search_plan(const pf_graph_t *g, const pf_cluster_t *c, pf_plan_t *p,
                              const pf_map_stages_search_opts_t *o,
                              pf_map_stages_search_stats_t *st, char *err, size_t errlen)
{
    pf_map_stages_search_stats_t local;
    int rc = pf_plan_validate(p, g, c, err, errlen), S = p->stages;
    if (rc != PF_OK)
        return rc;
    if ((rc = pf_plan_degrees_check(p, pf_cluster_ndevices(c), err, errlen)) != PF_OK)
        return rc;
    pf_stage_graph_t *sg = pf_stage_graph_from_plan(g, p);
    pf_map_stages_t *m = NULL;
    int *d = malloc((size_t)S * 2 * sizeof *d), *dev = NULL;
    rc = PF_ERR;
    if (!sg || !d || pf_stage_graph_price_kinds(sg, g, p, c) != PF_OK)
        goto oom;
    for (int s = 0; s < S; s++) {
        d[s] = pf_plan_degrees_replicas(p, s);
        d[S + s] = pf_plan_degrees_tp(p, s);
        if (!pf_plan_stage_devices(p, s))
            goto oom;
    }
    if (!(m = pf_map_stages_new(sg, d, d + S, pf_plan_degrees_step_microbatches(p), c, err,
                                errlen))) {
        rc = strstr(err, "out of memory") ? PF_ERR : PF_EINPUT;
        goto done;
    }
    if (!(dev = malloc((size_t)m->n * sizeof *dev)))
        goto oom;
    st = st ? st : &local;
    if ((rc = pf_map_stages_search(m, o, dev, st, err, errlen)) != PF_OK)
        goto done;
    fill_plan(p, m, dev, st);
    rc = PF_OK;
    goto done;
oom:
    rc = pf_fail(err, errlen, PF_ERR, "out of memory");
done:
    free(dev);
    free(d);
    pf_map_stages_destroy(&m);
    pf_stage_graph_destroy(&sg);
    return rc;
}
