"""The types the layers share: what each flow returns (`results`), the records steps hand each other (`outcomes`),
the GPU inventory and catalogue, and the one YAML reader of configuration files (`plain_yaml`). Imports nothing else
of gpucast, so flows, tasks, the warehouse and the contract may all use it."""

# The words an unknown-size LLM job's forecast reason begins its part with (tasks/learn/ood.py check 7); the plan
# reads such a job's memory as unknown (warehouse/plan.py PLAN_INPUT) and `capacity_daily` counts it apart from the
# jobs over 24/40/80 GB (warehouse/sql/schema.sql), finding it by these words (review 65b S3-3). Here, not in
# `outcomes`, so the warehouse's schema reads it without loading Polars (`gpucast status`, issue 52 item 4).
UNKNOWN_LLM_SIZE = "an LLM layout of unknown size"
