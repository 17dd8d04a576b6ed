#!/usr/bin/env bash
# Start the support model on one L4 (a bare-metal box).
# kvplan/gpu: NVIDIA-L4
# kvplan/min-concurrency: 4@8k
set -euo pipefail

MODEL=acme/support-7b-instruct
MAX_LEN=${MAX_LEN:-32768}

CUDA_VISIBLE_DEVICES=0 exec vllm serve "$MODEL" \
  --max-model-len "$MAX_LEN" \
  --gpu-memory-utilization 0.9 \
  --port 8000
