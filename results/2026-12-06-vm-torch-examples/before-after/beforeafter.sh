#!/usr/bin/env bash
# Cached bt.run before (e7f6a154) and after (HEAD), interleaved per round, each
# system a fresh process (the report protocol), example (a) at hidden H.
# usage: beforeafter.sh H ROUNDS OUTFILE
set -euo pipefail
h=$1; rounds=$2; out=$3
py=~/.cache/batchlab/peers/venv/bin/python
old=/work/wt-old; new=/work/main
w=/tmp/w/ba-h$h; mkdir -p $w
# Each version records example (a) on the same trees with its own recorder, and learns its own FSM.
for v in old new; do
  root=$([ $v = old ] && echo $old || echo $new)
  PYTHONPATH=$root/engine/torch OMP_NUM_THREADS=1 $py /tmp/w/rec_a.py $h /tmp/w/b64.json $w/$v-model >/dev/null
  $root/target/release/search train --trace $w/$v-model/trace.json --out $w/$v-fsm.yaml >/dev/null 2>&1
done
: > $out
for r in $(seq 1 $rounds); do
  for sys in bt-fsm bt-depth eager levels; do
    for train in 0 1; do
      order="old new"; [ $((r % 2)) = 0 ] && order="new old"
      for v in $order; do
        if [ $v = old ]; then
          (cd $old && PYTHONPATH=$old/engine/torch BATCHLAB_ENGINE=$old/target/release/engine $py -m batchlab_torch.bench --setup batchlab_torch.examples.tree_lstm:setup --model $w/old-model --system $sys --policy $w/old-fsm.yaml --repeats 3 --threads 1 --train $train --result $w/res.json) || continue
        else
          (cd $new && PYTHONPATH=$new/paper-repro/peers:$new/engine/torch BATCHLAB_ENGINE=$new/target/release/engine $py -m batchlab_peers.torch_bench --setup batchlab_torch.examples.tree_lstm:setup --model $w/new-model --system $sys --policy $w/new-fsm.yaml --repeats 3 --threads 1 --train $train --result $w/res.json) || continue
        fi
        python3 -c "import json,sys; d=json.load(open('$w/res.json')); print(json.dumps({'version':'$v','round':$r,'system':'$sys','train':$train,'total_s':d['total_s'],'cpu_s':d['cpu_s'],'loss':d.get('loss'),'batches':d.get('batches')}))" >> $out
      done
    done
  done
done
