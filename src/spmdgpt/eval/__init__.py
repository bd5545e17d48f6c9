"""Evaluation of a model (floor 3).

    evaluate   the validation loss in the step's layout, samples through the engine, rewards
    harness    the scoring backend lm-eval's harness calls (log-likelihoods, generations)

May import: floors 0-2 (`training`'s step and objectives, `engine`) and each other."""
