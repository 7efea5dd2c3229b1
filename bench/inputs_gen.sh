#!/bin/sh
# gen.sh chain N OUT [MEM_FWD_BYTES] | wide N OUT | longname BYTES OUT
kind=$1 n=$2 out=$3 mem=${4:-1048576}
case $kind in
chain) awk -v n="$n" -v mem="$mem" 'BEGIN{printf "{\"name\":\"chain%d\",\"microbatch\":1,\"ops\":[\n",n;
  for(i=0;i<n;i++) printf "%s{\"id\":%d,\"name\":\"op%d\",\"fwd_ms\":%g,\"bwd_ms\":%g,\"param_bytes\":%d,\"mem_fwd_bytes\":%d,\"mem_bwd_bytes\":1048576}\n", (i?",":""), i, i, 0.1+(i%7)*0.01, 0.2+(i%5)*0.02, 1024, mem;
  printf "],\"edges\":[\n"; for(i=1;i<n;i++) printf "%s{\"src\":%d,\"dst\":%d,\"bytes\":1048576}\n", (i>1?",":""), i-1, i; printf "]}\n"}' > "$out";;
wide) awk -v n="$n" 'BEGIN{w=n-2; printf "{\"name\":\"wide%d\",\"microbatch\":1,\"ops\":[\n",n;
  printf "{\"id\":0,\"name\":\"src\",\"fwd_ms\":0.1,\"bwd_ms\":0.2,\"param_bytes\":1048576}\n";
  for(i=1;i<=w;i++) printf ",{\"id\":%d,\"name\":\"op%d\",\"fwd_ms\":0.1,\"bwd_ms\":0.2,\"param_bytes\":1048576}\n", i, i;
  printf ",{\"id\":%d,\"name\":\"sink\",\"fwd_ms\":0.1,\"bwd_ms\":0.2,\"param_bytes\":1048576}\n", w+1;
  printf "],\"edges\":[\n"; for(i=1;i<=w;i++) printf "%s{\"src\":0,\"dst\":%d,\"bytes\":1024},{\"src\":%d,\"dst\":%d,\"bytes\":1024}\n", (i>1?",":""), i, i, w+1; printf "]}\n"}' > "$out";;
longname) awk -v n="$n" 'BEGIN{printf "{\"name\":\""; s="xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; for(i=0;i<n/64;i++) printf "%s", s;
  printf "\",\"microbatch\":1,\"ops\":[{\"id\":0,\"name\":\"a\",\"fwd_ms\":1,\"bwd_ms\":2},{\"id\":1,\"name\":\"b\",\"fwd_ms\":1,\"bwd_ms\":2}],\"edges\":[{\"src\":0,\"dst\":1,\"bytes\":1024}]}\n"}' > "$out";;
esac
