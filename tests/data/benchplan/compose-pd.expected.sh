#!/bin/sh
# vllmlint bench-plan: step 3 of vLLM's P/D checklist - the split deployment against one
# collocated `vllm serve` on the same GPUs, with the same prompts and SLOs.
set -eu

# == pair 1: Qwen/Qwen2.5-7B-Instruct, 2 GPUs ==
# prefill: tests/data/benchplan/compose-pd/compose.yaml:10 (service prefill)
# decode:  tests/data/benchplan/compose-pd/compose.yaml:20 (service decode)
# note: 2 GPUs in the pair (from its pinned GPUs); per replica of each workload
SPLIT_URL=${SPLIT_URL:-http://localhost:8000}
COLLOCATED_URL=${COLLOCATED_URL:-http://localhost:8000}
mkdir -p bench-results/pair1

# 1. the split deployment as it runs now, through its router
for RATE in 0.25 0.5 1 2; do
  vllm bench serve \
    --backend vllm \
    --base-url "$SPLIT_URL" \
    --endpoint /v1/completions \
    --model Qwen/Qwen2.5-7B-Instruct \
    --dataset-name random \
    --random-input-len 8192 \
    --random-output-len 256 \
    --num-prompts 100 \
    --request-rate "$RATE" \
    --seed 0 \
    --ignore-eos \
    --goodput ttft:2000 tpot:30 \
    --percentile-metrics ttft,tpot,itl \
    --metric-percentiles 50,99 \
    --save-result \
    --result-dir bench-results/pair1 \
    --result-filename "split-rate$RATE.json"
done

# 2. stop the split deployment; start the collocated baseline on the same GPUs:
#    CUDA_VISIBLE_DEVICES=0,1 vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 16384 --dtype bfloat16 --data-parallel-size 2 --gpu-memory-utilization 0.9 --enable-prefix-caching --port 8000
# 3. the same benchmark against it
for RATE in 0.25 0.5 1 2; do
  vllm bench serve \
    --backend vllm \
    --base-url "$COLLOCATED_URL" \
    --endpoint /v1/completions \
    --model Qwen/Qwen2.5-7B-Instruct \
    --dataset-name random \
    --random-input-len 8192 \
    --random-output-len 256 \
    --num-prompts 100 \
    --request-rate "$RATE" \
    --seed 0 \
    --ignore-eos \
    --goodput ttft:2000 tpot:30 \
    --percentile-metrics ttft,tpot,itl \
    --metric-percentiles 50,99 \
    --save-result \
    --result-dir bench-results/pair1 \
    --result-filename "collocated-rate$RATE.json"
done

# 4. compare, per rate:
# vllmlint bench-compare bench-results/pair1/split-rate0.25.json bench-results/pair1/collocated-rate0.25.json
# vllmlint bench-compare bench-results/pair1/split-rate0.5.json bench-results/pair1/collocated-rate0.5.json
# vllmlint bench-compare bench-results/pair1/split-rate1.json bench-results/pair1/collocated-rate1.json
# vllmlint bench-compare bench-results/pair1/split-rate2.json bench-results/pair1/collocated-rate2.json
