"""Where job records come from besides the inbox's files: experiment trackers (MLflow), scheduler
accounting (Slurm `sacct`) and any export through a mapping file, each turned into contract rows."""
