"""Demand that has not arrived yet: daily series per queue from the job history, their forecast for
the next days, and its backtest."""
