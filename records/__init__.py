"""The types the layers share: what each flow returns (`results`), the records steps hand each other (`outcomes`),
the GPU inventory and catalogue, and the one YAML reader of configuration files (`plain_yaml`). Imports nothing else
of gpucast, so flows, tasks, the warehouse and the contract may all use it."""

# The words an unknown-size LLM job's forecast reason begins its part with (tasks/learn/ood.py check 7); the plan
# reads such a job's memory as unknown (warehouse/plan.py PLAN_INPUT) and `capacity_daily` counts it apart from the
# jobs over 24/40/80 GB (warehouse/sql/schema.sql), finding it by these words (review 65b S3-3). Here, not in
# `outcomes`, so the warehouse's schema reads it without loading Polars (`gpucast status`, issue 52 item 4).
UNKNOWN_LLM_SIZE = "an LLM layout of unknown size"

# A running job whose expected run time is unknown (`job_demand.hours_expected` NULL: never forecast and running longer
# than its queue's history supports, likely a record whose end was never logged) holds its GPUs this many hours from its
# start, wherever GPUs held are counted: the plan's running jobs (tasks/plan/starts.py) and the demand history's
# `peak_busy_gpus` (warehouse/sql/schema.sql `demand_daily`; newcomer 26 P3: counted to now, stale records held 157-181
# GPUs a queue in the demo, 4-5x the GPUs owned). One hour: a stale record blocks nothing for long.
UNKNOWN_RUNNING_HOURS = 1.0
