"""Training: one run in a run directory (`session`), its loop (`loop`) and step (`step`), losses,
schedules, weight averages, validation, logging, resuming, the metrics report, and ensembles of
models trained side by side (`side_by_side`, `processes`)."""
