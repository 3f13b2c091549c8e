#!/bin/bash
set -euo pipefail
if [ "${LEGACY:-0}" = 1 ]; then
  export VLLM_USE_V1=1
fi
exec vllm serve Qwen/Qwen2.5-0.5B-Instruct --max-model-len 4096
