#!/usr/bin/env python3
"""bench/calculon_model.py: the `planfarm model gpt` flags of the model a Calculon model file
(calculon/models/*.json in ../shared/peers) describes, for bench/peers.sh [Calculon].

    python3 bench/calculon_model.py MODEL.json     -> one line of flags on stdout

  --layers  num_blocks      --hidden  hidden     --ffn  feedforward     --seq  seq_size
  --heads   attn_heads, and --head-dim attn_size when attn_heads x attn_size is not hidden
            (GPT-3 13B: 40 heads of 128 in a hidden of 5140), so that q, k, v, the scores and
            their memory are Calculon's. planfarm's t divides the heads; Calculon's must also
            divide hidden (t 8 on 5140 it refuses): such a plan's row says so
  --vocab   51200: Calculon's file has none; its parameter count takes a 51,200-token embedding
            (Llm.Application.num_parameters) and its step prices no embedding or head, which
            planfarm's graph has (noted on stderr)
Uses the json module only (bench glue)."""
import json
import sys

VOCAB = 51200


def flags(m):
    """(flags list, notes list) for a Calculon model dict"""
    notes = []
    hidden, heads, size = int(m["hidden"]), int(m["attn_heads"]), int(m["attn_size"])
    extra = []
    if heads * size != hidden:
        notes.append("attn_heads %d x attn_size %d != hidden %d: --head-dim %d" % (heads, size,
                                                                                 hidden, size))
        extra = ["--head-dim", size]
    notes.append("vocab %d as in Calculon's parameter count; Calculon's step has no embedding or head"
                 % VOCAB)
    out = ["--layers", m["num_blocks"], "--hidden", hidden, "--heads", heads] + extra + [
        "--ffn", m["feedforward"], "--seq", m["seq_size"], "--vocab", VOCAB]
    return [str(x) for x in out], notes


def main(argv):
    if len(argv) != 1:
        print("usage: calculon_model.py MODEL.json", file=sys.stderr)
        return 2
    try:
        with open(argv[0]) as f:
            fl, notes = flags(json.load(f))
    except (OSError, ValueError, KeyError) as e:
        print("calculon_model: %s: %s" % (argv[0], e), file=sys.stderr)
        return 1
    print(" ".join(fl))
    for n in notes:
        print("calculon_model: note: %s" % n, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
