# Source: https://github.com/vllm-project/vllm/blob/f948f41e376e63c171fa7cbc4b88134501d5e5d8/docs/serving/parallelism_scaling.md
# ("To enable pipeline parallelism ...": the docs' example, unchanged below this comment)
# Eight GPUs total
vllm serve gpt2 \
     --tensor-parallel-size 4 \
     --pipeline-parallel-size 2
