"""What a training step is made of, and what runs around it (floor 2; the loop that drives them is
`spmdgpt.loop`).

    state        TrainState: parameters, optimizer state, step; created, resumed or initialised from
    step         the jitted train step (make_train_step): microbatches, the objective, the update
    objectives   the training objectives (next-token loss, DPO, ...) over the model's hidden states
    checkpoint   orbax checkpoints: exact resume, resume on another layout, init from another run
    hooks        what happens between steps (evaluation, rollouts, events)
    stats        the training statistics program (train.stats_every)
    budget       the time budget: calibrate, plan the steps, re-plan
    runkind      RunKind: what differs between kinds of run (text, GRPO)

May import: floors 0-1 (`config`, `mesh`, `run`, `model`, `data`, `optim`, `hf`) and each other;
not the engine, evaluation, plans or the loop. (Named `training`, not `train`: a submodule
`spmdgpt.train` would replace the `spmdgpt.train` function once imported.)"""
