"""Scaling a model and fitting how its loss scales (floor 5).

    size     a run's size: its length in tokens per parameter, the line that reports it, and μP's
             coordinate check (`model.size`'s shapes are the config load's)
    ladder   `spmdgpt ladder`: a grid of runs, skipped when finished, and its fits
    laws     the scaling-law fits (Hoffmann et al. 2022's forms) and a forecast

May import: floors 0-4 (`plan.flops`, `training.step`) and each other."""
