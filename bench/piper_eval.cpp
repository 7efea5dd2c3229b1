// piper_eval: prices a pipeline given from outside (planfarm's plan) under Piper's own cost model,
// by calling Piper's Graph::getTPSForResult. Built by bench/peers.sh against Piper's unmodified
// algo.cpp from ../shared/peers/piper (found through -I); nothing of Piper is kept in this repo.
//
// Use: piper_eval FILE MAX_DEVICES MEM_GIB notp|full STAGES
//   FILE, MAX_DEVICES, MEM_GIB, notp: exactly what Piper's driver.cpp takes, and the instance is
//   built the same way (notp keeps only each node's 1-device configurations).
//   STAGES: one stage a line, "R id id ...": the stage's data-parallel degree, then the Piper node
//   ids of its nodes (the `id` field of the input file), stages in pipeline order. A line
//   "recomp R id id ..." is a stage under full recomputation: each of its nodes runs its
//   "activation recomp" configuration where the file has one (planfarm's stagedeg.h chooses
//   recomputation per stage), "vanilla" otherwise; a node id followed by "r" (17r) runs it for
//   that node alone (stagedeg's per-node choice). These lines have t = 1.
//   A line "tp T R id#l id#l ..." is a stage of R replicas of T devices each (Piper's `full`
//   mode, planfarm's stagedeg_tp.h) whose node `id` runs the l-th configuration (from 0, in the
//   file's order) of its TMPCs["T"].
// Prints {"time_per_sample": X}; X is Piper's INFTY (printed as "inf") when a stage does not fit.
#define main piper_original_main
#include "algo.cpp"
#undef main

static int usage()
{
    cerr << "usage: piper_eval FILE MAX_DEVICES MEM_GIB notp|full STAGES" << endl;
    return 2;
}

int main(int argc, char **argv)
{
    if (argc != 6)
        return usage();
    ifstream in(argv[1]);
    if (!in) {
        cerr << "piper_eval: cannot open " << argv[1] << endl;
        return 2;
    }
    json j;
    in >> j;
    if (string(argv[4]) == "notp")
        for (auto &node : j["nodes"]) {
            json keep = json::object();
            if (node["TMPCs"].count("1"))
                keep["1"] = node["TMPCs"]["1"];
            node["TMPCs"] = keep;
        }
    else if (string(argv[4]) != "full")
        return usage();
    j["maxDevices"] = atoi(argv[2]);
    j["maxMemoryPerDevice"] = atof(argv[3]) * (1 << 30);
    Instance ins = j.get<Instance>();

    ifstream stages_in(argv[5]);
    if (!stages_in) {
        cerr << "piper_eval: cannot open " << argv[5] << endl;
        return 2;
    }
    Result r;
    string line;
    int lineno = 0;
    while (getline(stages_in, line)) {
        lineno++;
        istringstream fields(line);
        ResultStage rs;
        string first;
        if (!(fields >> first))
            continue;
        const bool recomp = first == "recomp", tp = first == "tp";
        int t = 1;
        if (tp && !(fields >> t))
            continue;
        if ((recomp || tp) && !(fields >> first))
            continue;
        rs.dataParallelDegree = atoi(first.c_str());
        rs.tensorParallelDegree = t;
        string tok;
        while (fields >> tok) {
            const bool node_recomp = !tok.empty() && tok.back() == 'r';
            if (node_recomp)
                tok.pop_back();
            const size_t hash = tok.find('#');
            const int conf = hash == string::npos ? -1 : atoi(tok.c_str() + hash + 1);
            const int id = atoi(tok.substr(0, hash).c_str());
            if (!ins.newNumber.count(id)) {
                cerr << "piper_eval: " << argv[5] << ":" << lineno << ": node " << id
                     << " is not in " << argv[1] << endl;
                return 2;
            }
            const int v = ins.newNumber.at(id);
            rs.nodes.push_back(v);
            rs.TMPCids[v] = "vanilla";
            if (conf >= 0) {
                if (!ins.nodes[v].TMPCs.count(t) || conf >= (int)ins.nodes[v].TMPCs.at(t).size()) {
                    cerr << "piper_eval: " << argv[5] << ":" << lineno << ": node " << id
                         << " has no configuration " << conf << " for t = " << t << endl;
                    return 2;
                }
                rs.TMPCids[v] = ins.nodes[v].TMPCs.at(t)[conf].id;
            } else if ((recomp || node_recomp) && ins.nodes[v].TMPCs.count(1))
                for (const TMPC &c : ins.nodes[v].TMPCs.at(1))
                    if (c.id == "activation recomp")
                        rs.TMPCids[v] = c.id;
        }
        r.stages.push_back(rs);
    }
    Graph g(ins);
    cout << "{\"time_per_sample\": " << setprecision(12) << g.getTPSForResult(r) << "}" << endl;
    return 0;
}
