"""The types the layers share: what each flow returns (`results`), the records steps hand each other (`outcomes`),
the GPU inventory and catalogue, and the one YAML reader of configuration files (`plain_yaml`). Imports nothing else
of gpucast, so flows, tasks, the warehouse and the contract may all use it."""
