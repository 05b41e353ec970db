"""From forecasts to GPUs: the capacity plan (jobs packed per day, queue and GPU type)."""
