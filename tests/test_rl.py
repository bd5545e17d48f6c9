"""Reinforcement learning's parts (spmdgpt.rl, spmdgpt.model.grpo): the rewards, GRPO's
advantages and clipped loss against their definitions, prompts records, and the rollouts'
batches (prompt tokens carry no loss; a step's rollout is a function of (seed, step))."""

import json
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import wait_until
from rl_envs import NeverDoneEnv, NotTextEnv, RaisingEnv, ResetFailsEnv, TwoActionsEnv

from spmdgpt.config import ConfigError, load_config, validate
from spmdgpt.data import CharTokenizer
from spmdgpt.mesh.sharding import Rules, make_mesh
from spmdgpt.model import forward, init_params
from spmdgpt.model.grpo import grpo_objective, grpo_terms, token_logps
from spmdgpt.rl.rewards import RewardError, digits, exact, final_answer, numeric, regex, reward_function, score
from spmdgpt.rl.rollouts import group_advantages


def test_builtin_rewards():
    rec = {"answer": "432"}
    assert final_answer("so 47+385 is... The answer is 432.") == "432."
    assert final_answer("answer: 3. Answer: 4") == "4"
    assert final_answer("#### 12\nmore") == "12" and final_answer(r"thus \boxed{7} and \boxed{8}") == "8"
    assert [exact("", c, rec) for c in ("432", " 432. ", "Answer: 432", "The answer is 4321", "43 2")] == [
        1.0, 1.0, 1.0, 0.0, 0.0]
    assert exact("", "answer: Paris ", {"answer": "paris"}) == 1.0
    assert [numeric("", c, {"answer": "1234"}) for c in ("it is 1,234", "1234.0 apples", "12 then 1234", "1233",
                                                         "none", "-1234")] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert numeric("", "x = -0.5", {"answer": -0.5}) == 1.0 and numeric("", "7", {"answer": "no number"}) == 0.0
    assert [digits("", c, {"answer": "432"}) for c in ("432", "431", "32", "1432", "-432", "x", "it is 532")] == [
        1.0, 2 / 3, 2 / 3, 3 / 4, 3 / 4, 0.0, 2 / 3]
    assert digits("", "-7", {"answer": "-17"}) == 2 / 3 and digits("", "4.5", {"answer": "4.5"}) == 1.0
    assert digits("", "-17", {"answer": "17"}) == 2 / 3
    assert regex("", " 4[2] ", {"answer": r"4\[\d\]"}) == 1.0 and regex("", "42!", {"answer": r"\d+"}) == 0.0
    assert reward_function("numeric") is numeric and reward_function("math:isfinite") is math.isfinite


def test_reward_errors_name_the_field_or_the_record():
    with pytest.raises(ConfigError, match=r"^rl.reward=close: unknown reward; use one of exact, numeric, digits, "
                                          r"regex"):
        reward_function("close")
    with pytest.raises(ConfigError, match=r"^rl.reward=no_such_module:f: cannot import it \(ModuleNotFoundError"):
        reward_function("no_such_module:f")
    with pytest.raises(ConfigError, match=r"^rl.reward=math:pi: pi is not a function"):
        reward_function("math:pi")
    assert score(lambda p, c, r: True, "p", "c", {}, "f:1") == 1.0 and score(numeric, "", "3", {"answer": 3}, "") == 1.0
    with pytest.raises(RewardError, match=r"^the reward raised KeyError: 'answer' on prompts.jsonl:7; fix"):
        score(lambda p, c, r: r["answer"], "p", "c", {}, "prompts.jsonl:7")
    for bad in ("1", float("nan"), None, 1e308):
        with pytest.raises(RewardError, match=r"on f:2; a reward must be a finite number, at most 1e\+09 in size"):
            score(lambda p, c, r, b=bad: b, "p", "c", {}, "f:2")


def test_group_advantages_are_the_rewards_standing_in_their_group():
    a = group_advantages(np.array([1.0, 0, 0, 1, 1, 1, 1, 1, 3, 0, 0, 0]), 4)
    assert a.dtype == np.float32
    np.testing.assert_allclose(a[:4], np.array([1, -1, -1, 1]) * 0.5 / (0.5 + 1e-4), rtol=1e-6)
    assert (a[4:8] == 0).all()  # (all equal: no signal, not 0/0)
    std = np.sqrt(np.mean((np.array([3, 0, 0, 0]) - 0.75) ** 2))
    np.testing.assert_allclose(a[8:], (np.array([3, 0, 0, 0]) - 0.75) / (std + 1e-4), rtol=1e-6)


def test_the_clipped_surrogate_and_kl_per_token():
    logp = jnp.log(jnp.array([[0.5, 0.5, 0.2, 0.4]]))
    old = jnp.log(jnp.array([[0.5, 0.25, 0.4, 0.5]]))  # ratios 1, 2, 0.5, 0.8
    ref = jnp.log(jnp.array([[0.25, 0.5, 0.2, 0.8]]))
    for adv, want_surrogate, want_clip in ((1.0, [1, 1.2, 0.5, 0.8], [0, 1, 0, 0]),
                                           (-1.0, [-1, -2, -0.8, -0.8], [0, 0, 1, 0])):
        loss, kl, clipped = grpo_terms(logp, old, ref, jnp.array([adv]), 0.2, 0.1)
        d = np.log([0.25 / 0.5, 1.0, 1.0, 0.8 / 0.4])
        np.testing.assert_allclose(kl[0], np.exp(d) - d - 1, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(loss[0], -np.array(want_surrogate) + 0.1 * (np.exp(d) - d - 1), rtol=1e-6)
        assert clipped[0].astype(int).tolist() == want_clip


def _tiny(devices=1, *over):
    cfg = load_config(["+experiment=staircase", "model.num_layers=1", "model.d_model=32", "model.num_heads=2",
                       "model.vocab_size=16", "data.seq_len=24", "model.max_seq_len=32", f"mesh.data={devices}", *over])
    mesh = make_mesh(cfg.mesh, jax.devices()[:devices])
    return cfg, mesh, Rules(mesh, cfg.sharding, cfg.model)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_at_the_sampling_policy_the_gradient_is_the_policy_gradient(temperature):
    """With old_logp = logp (a batch's first update) and no KL, GRPO's gradient is the advantage-
    weighted gradient of the completions' log-likelihood per counted token (the prompt's
    targets, < 0, not counted), the log-likelihood of the tempered distribution the rollouts
    sample from (at 0.7: not the untempered one's gradient)."""
    cfg, mesh, rules = _tiny()
    rng = np.random.default_rng(0)
    inputs = jnp.asarray(rng.integers(0, 12, (4, 24)), jnp.int32)
    targets = np.asarray(rng.integers(0, 12, (4, 24)), np.int32)
    targets[:, :5] = -1  # the prompt
    targets = jnp.asarray(targets)
    adv = jnp.array([1.5, -0.5, 0.0, -1.0])
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        logp = token_logps(cfg.model, rules, params, inputs, targets, temperature)
        loss, m = grpo_objective(cfg.model, rules, 0.2, 0.0, params, inputs, targets, adv, logp, logp,
                                 temperature=temperature)
        g = jax.grad(lambda p: grpo_objective(cfg.model, rules, 0.2, 0.0, p, inputs, targets, adv, logp, logp,
                                              temperature=temperature)[0])(params)
        n = float(jnp.sum(targets >= 0))

        def weighted(t):  # the advantage-weighted log-likelihood of the distribution at temperature t
            return jax.grad(lambda p: -jnp.sum(adv[:, None] * token_logps(cfg.model, rules, p, inputs, targets, t))
                            / n)(params)

        want, untempered = weighted(temperature), weighted(1.0)
        assert float(m["rl/kl"]) == 0.0 and float(m["rl/clip_fraction"]) == 0.0
        # the tempered log-probabilities are log_softmax(logits / t) of the targets, by hand
        logits = forward(cfg.model, rules, params, inputs)[0] / temperature
        by_hand = jnp.take_along_axis(jax.nn.log_softmax(logits, -1), jnp.maximum(targets, 0)[..., None], -1)[..., 0]
        np.testing.assert_allclose(np.asarray(logp), np.where(targets >= 0, np.asarray(by_hand), 0.0), atol=2e-5)
    assert float(loss) == pytest.approx(-float(jnp.sum(adv[:, None] * (targets >= 0))) / n, abs=1e-6)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-7)
    apart = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(untempered),
                                                               strict=True))
    assert (apart > 1e-3) == (temperature != 1.0)


def test_grpo_log_probabilities_are_over_the_tokenizers_vocabulary():
    """The rollouts sample from the tokenizer's ids alone (the engine's vocab_limit: 12 of the
    table's 16 here); GRPO's log-probabilities (the policy's, and the sampling policy's and the
    reference's, which the rollouts take) are over the same ids: the padding rows of the
    unembedding set by hand to large values change none of them, nor the loss and its gradient; over the whole
    table they would. Without padding (vocab_limit = the table) the program is the plain one."""
    cfg, mesh, rules = _tiny()
    rng = np.random.default_rng(0)
    inputs = jnp.asarray(rng.integers(0, 12, (4, 24)), jnp.int32)
    targets = np.asarray(rng.integers(0, 12, (4, 24)), np.int32)
    targets[:, :5] = -1
    targets = jnp.asarray(targets)
    adv = jnp.array([1.5, -0.5, 0.0, -1.0])
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        table = "embed" if params.unembed is None else "unembed"
        w = getattr(params, table)
        big = 5.0 * jax.random.normal(jax.random.key(1), w.shape, w.dtype)  # (padding rows with large logits)
        pad = w.at[12:].set(big[12:]) if table == "embed" else w.at[:, 12:].set(big[:, 12:])
        raised = params._replace(**{table: pad})

        def logps(p, limit):
            return token_logps(cfg.model, rules, p, inputs, targets, 0.7, vocab_limit=limit)

        def loss(p, old):
            return grpo_objective(cfg.model, rules, 0.2, 0.04, p, inputs, targets, adv, old, old, temperature=0.7,
                                  vocab_limit=12)[0]

        old = logps(params, 12)
        np.testing.assert_array_equal(np.asarray(logps(raised, 12)), np.asarray(old))
        assert float(jnp.max(jnp.abs(logps(raised, None) - logps(params, None)))) > 0.1
        np.testing.assert_array_equal(np.asarray(logps(params, 16)), np.asarray(logps(params, None)))
        # by hand: log_softmax over the first 12 logits
        logits = forward(cfg.model, rules, params, inputs)[0][..., :12] / 0.7
        by_hand = jnp.take_along_axis(jax.nn.log_softmax(logits, -1), jnp.maximum(targets, 0)[..., None], -1)[..., 0]
        np.testing.assert_allclose(np.asarray(old), np.where(targets >= 0, np.asarray(by_hand), 0.0), atol=2e-5)
        assert float(loss(raised, old)) == float(loss(params, old))
        g, g_raised = (jax.grad(loss)(p, old) for p in (params, raised))
        for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_raised), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)


def test_prompts_records_and_their_errors(tmp_path):
    from spmdgpt.rl.prompts import read_prompts

    lines = [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(40)]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    cfg = load_config([f"data.path={tmp_path}", "+data.datasets.add={paths:[p.jsonl],format:prompts}",
                       "data.val_fraction=0.25", "data.seq_len=16", "data.tokenizer=char"])
    tok = CharTokenizer("0123456789+=")
    train, val = read_prompts(cfg.data, tok, room=5)
    assert len(train) + len(val) == 40 and 3 < len(val) < 20  # (hash split: about a quarter)
    assert train[0].tokens == tuple(tok.encode(train[0].prompt)) and train[0].record["answer"] == str(
        int(train[0].prompt[:-3]) + 1)
    assert train[0].where.endswith("p.jsonl:" + str(lines.index(train[0].record) + 1))
    path.write_text(json.dumps(lines[0]) + "\n" + json.dumps({"prompt": "1+1="}) + "\n")
    with pytest.raises(ConfigError, match=r'p.jsonl:2: a prompts record is \{"prompt": text or messages, "answer"'):
        read_prompts(cfg.data, tok, room=5)
    path.write_text(json.dumps({"prompt": "12+12=", "answer": 24}) + "\n")
    with pytest.raises(ConfigError, match=r"p.jsonl:1: the prompt has 6 tokens, more than the 5 that data.seq_len"):
        read_prompts(cfg.data, tok, room=5)
    # the checks of rl.*, all at once
    bad = load_config([f"data.path={tmp_path}", "+data.datasets.add={paths:[p.jsonl],format:prompts}",
                       "rl.group_size=1", "rl.clip=1.5", "rl.kl_beta=-1", "data.batch_size=6", "mesh.data=1"])
    errs = validate(bad, 8)
    assert "rl.group_size=1 must be >= 2 (advantages compare a prompt's completions)" in errs
    assert "rl.clip=1.5 must be in (0, 1) (PPO's epsilon, e.g. 0.2)" in errs
    assert "rl.kl_beta=-1.0 must be >= 0 (0: no KL penalty)" in errs


def test_loss_variants_against_hand_numbers():
    """DAPO's clip-higher, Dr. GRPO's advantages without the std and its constant normaliser,
    the GRPO paper's per-completion mean, GSPO's sequence-level ratio: each against numbers
    worked by hand."""
    from spmdgpt.model.grpo import Clip, grpo_count, token_weights

    # advantages: the group's mean taken off, over the std (+1e-4) or not
    np.testing.assert_allclose(group_advantages(np.array([1.0, 0, 0, 1]), 4, std=False), [0.5, -0.5, -0.5, 0.5])
    np.testing.assert_allclose(group_advantages(np.array([1.0, 0, 0, 1]), 4), np.array([1, -1, -1, 1]) * 0.5 / 0.5001,
                               rtol=1e-6)
    one = jnp.zeros((1, 1))

    def term(log_ratio, a, clip):
        loss, _, clipped = grpo_terms(one + log_ratio, one, one, jnp.array([a]), clip, 0.0, jnp.ones((1, 1)))
        return float(loss[0, 0]), bool(clipped[0, 0])

    assert term(np.log(1.25), 1.0, Clip(0.2, 0.2))[0] == pytest.approx(-1.2)  # clipped at 1 + 0.2
    assert term(np.log(1.25), 1.0, Clip(0.2, 0.28)) == (pytest.approx(-1.25), False)  # clip-higher lets it through
    assert term(np.log(0.75), -1.0, Clip(0.2, 0.28)) == (pytest.approx(0.8), True)  # the floor 1 - 0.2 still holds
    # GSPO: one ratio per completion, exp of the mean log ratio over its tokens, clipped once
    counted = jnp.array([[1.0, 1.0, 0.0]])
    for r1, r2, want, was_clipped in ((1.1, 1.3, np.sqrt(1.1 * 1.3), False), (1.3, 1.5, 1.2, True)):
        logr = jnp.log(jnp.array([[r1, r2, 7.0]]))  # (the third position is no completion token)
        loss, _, clipped = grpo_terms(logr, jnp.zeros((1, 3)), jnp.zeros((1, 3)), jnp.array([1.0]),
                                      Clip(0.2, 0.2, "sequence"), 0.0, counted)
        np.testing.assert_allclose(np.asarray(loss)[0, :2], [-want, -want], rtol=1e-6)
        assert bool(clipped[0, 0]) == was_clipped
    # the normalisers: completions of 1 and 3 tokens with terms 2 | 1, 1, 7
    targets = jnp.array([[5, -1, -1], [5, 5, 5]])
    terms = jnp.array([[2.0, 0.0, 0.0], [1.0, 1.0, 7.0]])
    c = (targets >= 0).astype(jnp.float32)
    for norm, want in (("token", 11 / 4), ("sequence", (2 / 1 + 9 / 3) / 2), ("constant", 11 / (2 * 5))):
        clip = Clip(0.2, 0.2, "token", norm, max_tokens=5)
        assert float(jnp.sum(terms * token_weights(c, clip)) / grpo_count(targets, clip)) == pytest.approx(want)


def test_dynamic_sampling_fills_the_batch_with_informative_groups_and_overlong_shaping():
    """rl.dynamic_sampling: groups whose rewards are all equal are dropped and further rounds'
    prompts sampled until the batch is full (rl/draws, rl/informative); at the cap, the batch is
    filled with dropped groups. DAPO's overlong penalty: 0, then linear to -penalty over the
    last rl.overlong_buffer tokens, added to the rewards the advantages see (not to rl/reward)."""
    from spmdgpt.rl.prompts import Prompt
    from spmdgpt.rl.rollouts import Rollouts, Sampled, overlong_penalty

    np.testing.assert_allclose(overlong_penalty(np.array([3, 5, 6, 8]), 8, 4, 1.0), [0, -0.25, -0.5, -1.0])
    np.testing.assert_allclose(overlong_penalty(np.array([3, 8]), 8, 0, 1.0), [0, 0])
    cfg, mesh, rules = _tiny(1, "rl.group_size=2", "rl.max_new_tokens=4", "data.batch_size=4",
                             "rl.dynamic_sampling=true", "rl.overlong_buffer=2", "rl.overlong_penalty=0.5")
    tok = CharTokenizer("0123456789", eos=True)
    p = {name: Prompt((1, 2), name, {}, f"f:{i}") for i, name in enumerate(["flat", "spread", "flat2", "spread2"])}
    def complete(params, rows, sp):  # (fixed completions: each group's first of 1 token, its second of 4, the most)
        new = [[3, 4, 5, 6] if i % 2 else [1] for i in range(len(rows))]
        rewards = np.array([float(i % 2) if r.prompt.startswith("spread") else 0.0 for i, r in enumerate(rows)])
        return Sampled(new, ["x"] * len(rows), rewards, [[] for _ in rows])

    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(1), rules)
        ro = Rollouts(cfg, rules, tok, numeric)
        ro.complete = complete
        a = ro.batch(params, None, [p["flat"], p["spread"]], 0, more=lambda draw: [p["spread2"], p["flat2"]])
        assert [r.prompt for r in a.prompts] == ["spread", "spread", "spread2", "spread2"]
        assert (a.draws, a.informative) == (2, 1.0) and a.metrics(2)["rl/draws"] == 2
        b = ro.batch(params, None, [p["flat"], p["spread"]], 0, more=lambda draw: [p["flat2"], p["flat"]])
        assert [r.prompt for r in b.prompts] == ["spread", "spread", "flat", "flat"]  # (3 rounds, then filled)
        assert (b.draws, b.informative) == (3, 0.5)
    # the overlong penalty (4 tokens of 4, buffer 2: -0.5; 1 token: 0) in the advantages only
    np.testing.assert_allclose(a.rewards, [0, 1, 0, 1])
    assert a.shaping == pytest.approx(-0.25) and a.metrics(2)["rl/reward"] == 0.5
    np.testing.assert_allclose(np.asarray(a.batch[2]), group_advantages(np.array([0, 0.5, 0, 0.5]), 2), rtol=1e-6)


def test_the_sequence_ratio_at_the_sampling_policy_is_the_per_completion_policy_gradient():
    """GSPO (rl.ratio=sequence, rl.loss_norm=sequence) at old_logp = logp: the gradient is the
    advantage-weighted mean over completions of each completion's mean token log-likelihood
    gradient (the sequence ratio's derivative at 1)."""
    from spmdgpt.model.grpo import Clip

    cfg, mesh, rules = _tiny()
    rng = np.random.default_rng(1)
    inputs = jnp.asarray(rng.integers(0, 12, (4, 24)), jnp.int32)
    targets = np.asarray(rng.integers(0, 12, (4, 24)), np.int32)
    targets[:, :5] = -1
    targets[1, 15:] = -1  # (completions of different lengths)
    targets = jnp.asarray(targets)
    adv = jnp.array([1.5, -0.5, 0.0, -1.0])
    clip = Clip(0.2, 0.2, "sequence", "sequence")
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(0), rules)
        logp = token_logps(cfg.model, rules, params, inputs, targets)
        g = jax.grad(lambda p: grpo_objective(cfg.model, rules, clip, 0.0, p, inputs, targets, adv, logp, logp)[0])(
            params)
        n = jnp.sum(targets >= 0, axis=1)

        def per_completion(p):
            mean_logp = jnp.sum(token_logps(cfg.model, rules, p, inputs, targets), axis=1) / n
            return -jnp.sum(adv * mean_logp) / 4

        want = jax.grad(per_completion)(params)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-7)


def test_a_text_prompt_is_one_user_turn_under_a_chat_template_and_quiet_runs_are_said(tmp_path):
    """With a chat template a text prompt is rendered as one user message (as DPO reads it), the
    same ids as the message list; without one it is a continuation. Rollouts count their empty
    completions and flat groups, and five quiet steps in a row are an event row and a console
    line, once a streak."""
    from spmdgpt.data.chat import chat_tokenizer
    from spmdgpt.rl.loop import RolloutMetrics
    from spmdgpt.rl.prompts import prompt_of
    from spmdgpt.rl.rollouts import Rollout

    base = CharTokenizer("abcdefghijklmnopqrstuvwxyz ")
    chat = chat_tokenizer(base)
    text = prompt_of({"prompt": "reverse gmm", "answer": "mmg"}, chat, "p:1")
    listed = prompt_of({"prompt": [{"role": "user", "content": "reverse gmm"}], "answer": "mmg"}, chat, "p:2")
    assert text.tokens == listed.tokens == tuple(chat.prompt([{"role": "user", "content": "reverse gmm"}]))
    assert len(text.tokens) > len("reverse gmm") and text.prompt == "reverse gmm"
    plain = prompt_of({"prompt": "reverse gmm", "answer": "mmg"}, base, "p:3")
    assert plain.tokens == tuple(base.encode("reverse gmm"))

    def rollout(completions, rewards):
        return Rollout((), np.asarray(rewards, float), np.asarray([max(len(c), 1) for c in completions]),
                       completions, [])

    m = rollout(["", " ", "ab", ""], [0, 0, 1, 0]).metrics(2)
    assert m["rl/empty_fraction"] == 0.75 and m["rl/flat_groups"] == 0.5 and m["rl/solved"] == 0.5

    class Loop:
        events = []

        def event(self, step, name, **fields):
            self.events.append((step, name, fields))

    class Batcher:
        stats = {}

    hook, loop = RolloutMetrics(Batcher), Loop()
    for step in range(1, 13):  # empty completions at steps 1-11, scoring 0.5 alike from step 3 on
        Batcher.stats[step] = rollout(["", ""] if step < 12 else ["a", ""], [0.5, 0.5] if step > 2 else [1, 0]
                                      ).metrics(2)
        row = {}
        hook.reported(loop, step, {}, row)
        assert row["rl/empty_fraction"] == (1.0 if step < 12 else 0.5)
    assert [(s, n) for s, n, _ in loop.events] == [(5, "rl_empty_completions"), (7, "rl_equal_rewards")]
    assert loop.events[0][2]["steps"] == 5 and "chat template" in loop.events[0][2]["advice"]


def test_a_rollout_batch_is_prompt_then_completion_and_repeats_for_its_step():
    """Each prompt sampled group_size times; inputs are prompt + completion, the targets are the
    completion's tokens only (the stop token included), the sampling log-probabilities are the
    policy's over the tokenizer's 11 ids (of the table's 16); the same step gives the same batch
    bitwise, another step other samples."""
    from spmdgpt.rl.prompts import Prompt
    from spmdgpt.rl.rollouts import Rollouts, prompts_of_step

    cfg, mesh, rules = _tiny(2, "rl.group_size=4", "rl.max_new_tokens=6", "data.batch_size=8",
                             "rl.temperature=1.0")
    tok = CharTokenizer("0123456789", eos=True)  # (11 ids: eos = 10)
    prompts = [Prompt(tuple(tok.encode(s)), s, {"answer": "5"}, f"f:{i}") for i, s in enumerate(["0123", "98765"])]
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(1), rules)
        ref = init_params(cfg.model, jax.random.key(2), rules)
        ro = Rollouts(cfg, rules, tok, numeric)
        a, b, c = (ro.batch(params, ref, prompts, step) for step in (3, 3, 4))
        logp = token_logps(cfg.model, rules, params, a.batch[0], a.batch[1], vocab_limit=tok.vocab_size)
    inputs, targets, adv, old, refl = (np.asarray(x) for x in a.batch)
    assert inputs.shape == targets.shape == old.shape == (8, 24) and adv.shape == (8,)
    for r in range(8):
        p, n = prompts[r // 4].tokens, int(a.lengths[r])
        assert 1 <= n <= 6 and inputs[r, :len(p)].tolist() == list(p)
        assert (targets[r, :len(p) - 1] == -1).all() and (targets[r, len(p) - 1 + n:] == -1).all()
        completion = targets[r, len(p) - 1:len(p) - 1 + n].tolist()  # (each target: the next input)
        assert inputs[r, len(p):len(p) + n - 1].tolist() == completion[:-1]
        assert (completion[-1] == tok.eos_id) == (n < 6) and tok.eos_id not in completion[:-1]
        assert a.rewards[r] == numeric("", a.completions[r], {"answer": "5"})
    # (the sampling policy's, as the step computes them: two programs compiled apart, equal to float32
    # rounding; bitwise on AVX-512 boxes, 2.4e-7 apart in one element on an AVX2-only one)
    np.testing.assert_allclose(old, np.asarray(logp), rtol=1e-6, atol=1e-6)
    assert (old[targets < 0] == 0).all() and (old[targets >= 0] < 0).all() and not np.array_equal(old, refl)
    np.testing.assert_array_equal(adv, group_advantages(a.rewards, 4))
    assert all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a.batch, b.batch, strict=True))
    assert not np.array_equal(np.asarray(a.batch[0]), np.asarray(c.batch[0]))
    m = a.metrics(4)
    assert m["rl/reward"] == pytest.approx(a.rewards.mean()) and m["rl/length"] == pytest.approx(a.lengths.mean())
    # the prompts of a step: epoch after epoch, each a shuffle of every prompt drawn from (seed, epoch)
    first = prompts_of_step(5, 3, 0, 0) + prompts_of_step(5, 3, 0, 1)  # (5 prompts, 3 a step)
    assert sorted(first[:5]) == [0, 1, 2, 3, 4] and first == prompts_of_step(5, 6, 0, 0)
    assert prompts_of_step(5, 5, 0, 0) != prompts_of_step(5, 5, 1, 0)  # (another seed, another order)


def test_the_calculator_and_a_tools_errors():
    """The calculator computes arithmetic exactly and nothing else (a parser, never eval), decimals
    with their inner zeros, and refuses values whose digits would grow past its bound; a tool
    that raises, returns no text or runs past its timeout gives the model an error text, counted
    and said on the console (the first few); one's own tool runs in a worker process, which a
    timeout ends (20 timed-out calls leave no process and no thread behind, and the next call is
    answered); the tool's output in a character vocabulary keeps the characters it has."""
    import os
    import threading
    import time
    from pathlib import Path

    from spmdgpt.rl.tools import CalculatorError, Toolbox, ToolProcess, calculator, encodable

    assert [calculator(x) for x in ["12*34", " 432 - 1000 =", "1/3", "-7/2", "(2+3)**3", "7//2", "7%3", "0.1+0.2",
                                    "2**-2"]] == ["408", "-568", "0.333333", "-3.5", "125", "3", "1", "0.3", "0.25"]
    # (the leading zeros of an integer part go, never those after a decimal point or inside a number)
    assert [calculator(x) for x in ["1.05", "0.05*2", "3.007+1", "10.001-10", "007", "-007+1", "00.5", "100*1",
                                    "1e05", "2.500"]] == ["1.05", "0.1", "4.007", "0.001", "7", "-6", "0.5", "100",
                                                          "100000", "2.5"]
    for bad, why in [("__import__('os')", "not arithmetic"), ("1/0", "division by zero"), ("2**0.5", "whole exponents"),
                     ("10**30*10", "too large"), ("", "empty"), ("True+1", "not arithmetic"), ("1+", "not arithmetic"),
                     ("9" * 201, "too long"), ("1e999", "too large"),
                     ("((((1/7)**64)**64)**64)**64", "too many digits"),
                     ("*".join(["(1/7)**64"] * 6), "too many digits")]:
        t = time.perf_counter()
        with pytest.raises(CalculatorError, match=why):
            calculator(bad)
        assert time.perf_counter() - t < 0.1
    tok = CharTokenizer("0123456789:aeimortu ", eos=True)
    box = Toolbox(calculator, tok, timeout=0.2, name="calculator")
    assert box.call("6*7") == "42" and box.call("1/0") == "error: division by zero" and box.errors == 1
    assert box.call("((((1/7)**64)**64)**64)**64") == "error: too many digits"

    def own(name, timeout=0.3):
        return Toolbox(ToolProcess(f"rl_tools:{name}"), tok, timeout=timeout, name=name)

    assert own("raising").call("x") == "error: KeyError: 'x'" and own("not_text").call("x") == "error: no text"
    assert own("slow_then_prints", timeout=5).call("0") == "late"  # (its print went to stderr, not the protocol)
    def children():  # (this process's child processes, zombies included)
        found = set()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:  # (it ended meanwhile)
                continue
            if int(fields[1]) == os.getpid():
                found.add(int(stat.parent.name))
        return found

    threads, before = threading.active_count(), children()
    forever = own("forever", timeout=0.1)
    for _ in range(20):
        t = time.perf_counter()
        assert forever.call("x") == "error: timeout" and time.perf_counter() - t < 0.5
        assert forever.fn.proc is None  # (killed and reaped at the timeout)
    assert forever.errors == 20 and threading.active_count() == threads and children() == before
    # a worker serves call after call; close ends it
    lengths = own("length_of_the_call")
    assert lengths.call("abc") == "3"
    pid = lengths.fn.proc.pid
    assert lengths.call("abcd") == "4" and lengths.fn.proc.pid == pid and pid in children()
    lengths.end_worker()
    assert children() == before
    assert tok.decode(encodable(tok, "error: timeout!")) == "error: timeout"  # (no "!" in the vocabulary)
    # an error the vocabulary cannot spell whole reads "error" (what it holds of it), never the digits of
    # int()'s message ("invalid literal for int() with base 10: '1039<'"), which would look like an answer
    from types import SimpleNamespace

    for chars, reads in (("0123456789<>", ""), ("0123456789<>erot ", "error")):
        vocab = CharTokenizer(chars)
        box = Toolbox(ToolProcess("rl_tools:as_int"), vocab, "<", ">", timeout=5, name="as_int")
        assert vocab.decode(box.inject(SimpleNamespace(ident=1, tokens=vocab.encode("7<1039>")))) == reads
        box.end_worker()
    # a run that calls no tool (neither GRPO's prompts nor rl.eval_prompts) refuses one
    assert validate(load_config(["+experiment=shakespeare_char", "rl.tool=calculator"]), 1) == [
        "rl.tool=calculator: tools are called in GRPO's rollouts (prompts data) and in rl.eval_prompts' answers; this "
        "run has neither: leave it out, or set rl.eval_prompts"]


def test_a_tools_output_is_read_never_trained_on(capsys):
    """rl.tool in a rollout (the calculator, its calls between the digits "1" and "2" here, so that
    an untrained model makes some): each call's output follows its close mark in the row, as the
    calculator gives it for the text between the marks; its targets are -1 and its sampling
    log-probabilities 0, while the tokens around it train; rl/tool_calls counts the calls."""
    from spmdgpt.rl.prompts import Prompt
    from spmdgpt.rl.rollouts import Rollouts
    from spmdgpt.rl.tools import calculator

    cfg, mesh, rules = _tiny(1, "rl.group_size=4", "rl.max_new_tokens=12", "data.batch_size=8", "rl.tool=calculator",
                             "rl.tool_open=1", "rl.tool_close=2", "rl.temperature=1.0")
    tok = CharTokenizer("0123456789", eos=True)
    prompts = [Prompt(tuple(tok.encode(s)), s, {"answer": "5"}, f"f:{i}") for i, s in enumerate(["0123", "98765"])]
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(2), rules)
        ro = Rollouts(cfg, rules, tok, numeric)
        a = ro.batch(params, None, prompts, 3)
    inputs, targets, _, old, _ = (np.asarray(x) for x in a.batch)
    outputs = 0
    for r, injected in enumerate(a.injected):
        p, row, start, written = len(prompts[r // 4].tokens), inputs[r], 0, []
        spans = np.split(np.array(injected, int), np.flatnonzero(np.diff(injected) > 1) + 1) if injected else []
        for span in spans:  # (each span: the output of the call that ends just before it)
            before = tok.decode(row[p + start:p + span[0]])  # (the text sampled since the last output)
            call = before[before.rindex("1", 0, len(before) - 1) + 1:-1]
            assert tok.decode(row[p + span[0]:p + span[-1] + 1]) == calculator(call)
            assert (targets[r, p - 1 + span] == -1).all() and (old[r, p - 1 + span] == 0).all()
            assert targets[r, p - 1 + span[0] - 1] >= 0  # (the close mark itself was sampled: it trains)
            outputs, start = outputs + 1, span[-1] + 1
            written.append(calculator(call))
        assert ro.tool_outputs(row[p:].tolist(), injected) == written  # (what samples.jsonl's tool_outputs lists)
    m = a.metrics(4)  # (the calls that failed, "12" an empty one, gave "error: ...": no digits, nothing appended)
    assert outputs >= 2 and m["rl/tool_errors"] > 0
    assert m["rl/tool_calls"] * 8 == pytest.approx(outputs + m["rl/tool_errors"] * 8)
    said = "rl.tool=calculator on '' raised CalculatorError: empty; the model reads ''"  # (a vocabulary of digits)
    assert said in capsys.readouterr().err


def digits_like_the_answer(prompt, completion, record):
    """A reward with spread for an untrained model: the share of the completion's characters that
    are the answer's last digit (a `module:function` reward)."""
    return sum(c == str(record["answer"])[-1] for c in completion) / 3


def digits_like_the_answer_slowly(prompt, completion, record):
    """The same reward, 20 ms a call (a step of 8 answers: 0.16 s, time to kill a run mid-way)."""
    import time

    time.sleep(0.02)
    return digits_like_the_answer(prompt, completion, record)


def _sums_file(folder):
    import random

    r = random.Random(0)
    lines = []
    for _ in range(120):
        a, b = r.randint(0, 9), r.randint(0, 9)
        lines.append(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}))
    (folder / "add.jsonl").write_text("\n".join(lines) + "\n")
    return [f"data.path={folder}", "data.source=text", "+data.datasets.add={paths:[add.jsonl],format:prompts}",
            "data.seq_len=12", "model.max_seq_len=12", "model.num_layers=1", "model.d_model=32", "model.num_heads=2",
            "model.vocab_size=16", "data.batch_size=8", "rl.group_size=4", "rl.max_new_tokens=3",
            "rl.reward=test_rl:digits_like_the_answer", "optimizer.schedule=constant",
            "rl.temperature=1.5", "rl.kl_beta=0.05", "rl.val_prompts=4", "rl.samples=2", "train.eval_every=2",
            "train.log_every=1", "train.progress=false", "optimizer.lr=1e-2", "optimizer.warmup_steps=0",
            "checkpoint.every=2", "checkpoint.async_save=false"]


def _rows(run_dir):
    from conftest import read_jsonl

    return [r for r in read_jsonl(run_dir / "metrics.jsonl") if "loss" in r or "val/reward" in r]


def test_grpo_trains_resumes_bitwise_and_equals_one_device(tmp_path, capsys):
    """`spmdgpt train` on prompts: each step's row holds the rollout's metrics beside the loss;
    evaluations log val/reward and write samples with their rewards; a run killed (-9) after step 3
    and run again (it resumes at step 2's checkpoint) equals the 4 steps in one go bitwise (the
    rollouts are a function of (seed, step) and the state);
    8 data-parallel devices sample and score what one device does (rewards equal, losses to
    float32 rounding). All with a tool in the rollouts (one's own, its calls between the digits
    1 and 5, so that this untrained model makes some)."""
    import os
    import subprocess
    import sys

    from spmdgpt.cli import main

    base = _sums_file(tmp_path) + ["rl.max_new_tokens=5", "rl.tool=rl_tools:length_of_the_call", "rl.tool_open=1",
                                   "rl.tool_close=5"]
    assert main(["train", *base, "train.steps=4", "mesh.data=8", f"run.dir={tmp_path / 'a'}"]) == 0
    rows = _rows(tmp_path / "a")
    steps = [r for r in rows if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    for r in steps:
        assert {"rl/reward", "rl/reward_std", "rl/length", "rl/solved", "rl/kl", "rl/clip_fraction",
                "rl/tool_calls", "rl/tool_errors"} <= set(r)
        assert r["rl/sample_seconds"] > 0 and r["rl/score_seconds"] > 0 and r["rl/logp_seconds"] > 0
        assert 0 <= r["rl/reward"] <= 1 and 1 <= r["rl/length"] <= 5 and r["rl/kl"] >= 0
        # the engine's log-probabilities of the sampled tokens against the trainer's (float32: rounding)
        assert 0 < r["rl/logp_mismatch"] < 1e-5 and 0 <= r["rl/logp_kl"] < 1e-10, r
    assert sum(r["rl/tool_calls"] for r in steps) * 8 >= 2 and not any(r["rl/tool_errors"] for r in steps)
    assert steps[0]["rl/kl"] == 0.0 and steps[0]["rl/clip_fraction"] == 0.0  # (the policy is the reference)
    assert [r["step"] for r in rows if "val/reward" in r] == [2, 4]
    samples = [json.loads(x) for x in (tmp_path / "a" / "samples.jsonl").read_text().splitlines()]
    assert [s["step"] for s in samples] == [2, 2, 4, 4]
    assert all(s["reward"] == digits_like_the_answer("", s["completion"], {"answer": s["answer"]}) for s in samples)
    assert all(all(o in s["completion"] for o in s["tool_outputs"]) for s in samples)  # (what the tool wrote)
    assert any(r["rl/reward_std"] > 0 for r in steps) and steps[-1]["rl/kl"] > 0  # (it learns something)
    err = capsys.readouterr().err
    assert "val/reward" in err and "preflight: train_step, rl_rollout, rl_logps compiled in" in err
    timing = lambda k: k in ("tokens_per_sec", "mfu") or k.endswith("_seconds")  # noqa: E731
    strip = lambda rs: [{k: v for k, v in r.items() if not timing(k)} for r in rs]  # noqa: E731
    # rl.updates_per_batch=2: steps 1 and 2 train on one sampled batch (its rewards, its prompts)
    assert main(["train", *base, "train.steps=4", "mesh.data=8", "rl.updates_per_batch=2",
                 f"run.dir={tmp_path / 'u2'}"]) == 0
    u2 = [r for r in _rows(tmp_path / "u2") if "loss" in r]
    assert u2[0]["rl/reward"] == steps[0]["rl/reward"] and u2[0]["loss"] == steps[0]["loss"]
    assert [(r["rl/reward"], r["rl/length"], r["epoch"]) for r in u2[:2]] == [(u2[0]["rl/reward"], u2[0]["rl/length"],
                                                                               u2[0]["epoch"])] * 2
    assert u2[2]["epoch"] == 2 * u2[0]["epoch"] and u2[1]["rl/kl"] > 0  # (step 2: the policy has moved)
    # one device (a process of its own)
    env = {**os.environ, "XLA_FLAGS": "--xla_backend_optimization_level=0",
           "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "spmdgpt", "train", *base, "train.steps=4", "mesh.data=1",
                          f"run.dir={tmp_path / 'c'}"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    one = [r for r in _rows(tmp_path / "c") if "loss" in r]
    assert [r["rl/reward"] for r in one] == [r["rl/reward"] for r in steps]
    np.testing.assert_allclose([r["loss"] for r in one], [r["loss"] for r in steps], rtol=2e-4, atol=1e-6)
    # killed (-9) after step 3, the same command again (on the 8 devices, this process's programs): it
    # resumes at step 2's checkpoint and ends with the uninterrupted run's rows, bitwise
    cmd = [sys.executable, "-m", "spmdgpt", "train", *base, "train.steps=4", "mesh.data=8",
           "rl.reward=test_rl:digits_like_the_answer_slowly", f"run.dir={tmp_path / 'k'}"]
    env = {**env, "XLA_FLAGS": os.environ["XLA_FLAGS"]}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        metrics = tmp_path / "k" / "metrics.jsonl"
        wait_until(lambda: metrics.is_file() and '"step": 3, "loss"' in metrics.read_text(), proc, "step 3",
                   poll=0.01)
        proc.kill()
    finally:
        proc.kill()
        proc.wait()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "resumed from the checkpoint at step 2" in out.stderr, out.stderr
    assert strip(_rows(tmp_path / "k")) == strip(rows)


@pytest.mark.parametrize("extra,message", [
    (["rl.reward=close"], "rl.reward=close: unknown reward; use one of exact, numeric, digits, regex or "
                          "module:function"),
    (["rl.group_size=3"], "data.batch_size=8 must be a multiple of rl.group_size=3"),
    (["rl.temperature=0"], "rl.temperature=0 samples every completion of a group alike (greedy)"),
    (["rl.val_reward=close"], "rl.val_reward=close: unknown reward; use one of exact, numeric, digits, regex"),
    (["mesh.stage=2", "mesh.data=1"], "prompts data (GRPO) does not work with mesh.stage=2: pipeline stages"),
    (["rl.updates_per_batch=3"], "checkpoint.every=2 must be a multiple of rl.updates_per_batch=3"),
    (["BAD_FILE"], 'add.jsonl:2: a prompts record is {"prompt": text or messages, "answer": ...}; this one has '
                   "['prompt']; fix the file or set data.skip_bad_records=true"),
    (["rl.temperature=nan"], "rl.temperature=nan must be a number in [0, 2] (0 = greedy)"),
    (["rl.clip_high=-0.1"], "rl.clip_high=-0.1 must be > 0 (the ratio's ceiling is 1 + clip_high; DAPO: 0.28)"),
    (["rl.loss_norm=mean"], "rl.loss_norm"),
    (["rl.tool=abacus"], "rl.tool=abacus: unknown tool; use calculator or module:function (your own f(text) -> text)"),
    (["rl.tool=calculator", "rl.tool_output=x"], "rl.tool_output='x' must hold {} (where the tool's output goes)"),
    (["rl.env=chain", "rl.env_timeout=inf"], "rl.env_timeout=inf must be a finite number > 0 of seconds"),
    (["rl.max_new_tokens=200"], "rl.max_new_tokens=200 leaves no room for a prompt in a context of 12 tokens "
                                "(data.seq_len=12 + 1, model.max_seq_len=12); lower rl.max_new_tokens or raise"),
])
def test_bad_rl_input_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    from spmdgpt.cli import main

    base = _sums_file(tmp_path)
    if extra == ["BAD_FILE"]:
        (tmp_path / "add.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n{"prompt": "2+2="}\n')
        extra = []
    assert main(["train", *base, *extra, "train.steps=2", f"run.dir={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err
    assert message in err and all(ln.startswith("spmdgpt: error: ") for ln in err.strip().splitlines()), err
    assert not (tmp_path / "r").exists()


def test_without_the_kl_term_no_reference_is_kept_or_run(tmp_path, capsys):
    """rl.kl_beta = 0: the plan holds one parameter copy fewer (GRPO's reference, counted with
    kl_beta > 0), and a rollout without a reference takes the sampling policy's log-probabilities
    as ref_logp (no second forward pass)."""
    from spmdgpt.cli import main
    from spmdgpt.mesh.sharding import shard_bytes
    from spmdgpt.model import abstract_params
    from spmdgpt.rl.prompts import Prompt
    from spmdgpt.rl.rollouts import Rollouts

    base = [*_sums_file(tmp_path), "format=json"]  # (on the 8 test devices)
    plans = {}
    for beta in ("0.0", "0.05"):
        assert main(["plan", *base, f"rl.kl_beta={beta}"]) == 0
        plans[beta] = json.loads(capsys.readouterr().out)
    cfg, mesh, rules = _tiny(1, "rl.group_size=2", "rl.max_new_tokens=6", "data.batch_size=2")
    with jax.set_mesh(mesh):  # (the plan's model: one float32 copy of its parameters)
        one_copy = shard_bytes(abstract_params(load_config(_sums_file(tmp_path)).model, rules))
    assert one_copy > 0 and plans["0.05"]["param_bytes"] - plans["0.0"]["param_bytes"] == one_copy
    assert plans["0.05"]["total_bytes"] - plans["0.0"]["total_bytes"] == one_copy
    tok = CharTokenizer("0123456789", eos=True)
    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(1), rules)
        ro = Rollouts(cfg, rules, tok, numeric)
        a = ro.batch(params, None, [Prompt((1, 2, 3), "123", {"answer": "5"}, "f:1")], 0)
    np.testing.assert_array_equal(np.asarray(a.batch[3]), np.asarray(a.batch[4]))


def test_a_run_with_the_variants_trains(tmp_path, capsys):
    """DAPO's clip-higher, dynamic sampling and overlong penalty, Dr. GRPO's advantages and
    constant normaliser, GSPO's sequence ratio together: a run trains, logs its loss and rollout
    metrics (the sampling rounds each step took)."""
    from spmdgpt.cli.train import run

    assert run([*_sums_file(tmp_path), "train.steps=2", "rl.clip_high=0.28", "rl.advantage=group_mean",
                "rl.loss_norm=constant", "rl.ratio=sequence", "rl.dynamic_sampling=true", "rl.overlong_buffer=1",
                f"run.dir={tmp_path / 'v'}"]) == 0
    rows = [r for r in _rows(tmp_path / "v") if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2] and all(np.isfinite(r["loss"]) and "rl/reward" in r for r in rows)
    assert all(1 <= r["rl/draws"] <= 3 and 0 <= r["rl/informative"] <= 1 for r in rows)


def reward_that_raises(prompt, completion, record):
    return record["missing"]


def reward_that_says_yes(prompt, completion, record):
    return "yes"


def test_a_bad_reward_is_one_line_and_the_fixed_rerun_starts_over(tmp_path, capsys):
    """A reward of one's own that raises, or returns a non-number, stops the run in one line
    naming the record (exit 2); the run.dir it leaves (no checkpoint, no training step) does not
    block the same command with the reward fixed."""
    from spmdgpt.cli.train import run

    base = [*_sums_file(tmp_path), "train.steps=2", f"run.dir={tmp_path / 'r'}"]
    for reward, said in (("reward_that_raises", "the reward raised KeyError: 'missing' on "),
                         ("reward_that_says_yes", "the reward returned 'yes' on ")):
        assert run([*base, f"rl.reward=test_rl:{reward}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith(f"spmdgpt: error: {said}") and "add.jsonl:" in err[-1], err
        assert not any(ln.startswith("Traceback") for ln in err)
    assert run(base) == 0
    assert "restarted from step 0: the run stopped before its first checkpoint" in capsys.readouterr().err
    assert [r["step"] for r in _rows(tmp_path / "r") if "loss" in r] == [1, 2]


def test_rollouts_sampled_ahead_train_on_their_sampling_parameters_and_resume_bitwise(tmp_path, capsys):
    """rl.max_staleness=1: batch k + 1 is sampled from the parameters batch k starts from (in a thread
    while k trains), the pipeline starting afresh at each checkpoint.every checkpoint (every 2 here:
    staleness 0, 1, 0, 1). The first batch is the on-policy run's (its row bitwise); a stale batch's
    old log-probabilities are its sampling parameters' (the sampler's agree with them to rounding,
    where the moved parameters' would be ~1e-2 away); a run resumed from step 2's checkpoint ends with
    the uninterrupted run's rows bitwise; the plan holds a copy of the parameters a batch in flight."""
    from spmdgpt.cli import main

    base = [*_sums_file(tmp_path), "rl.max_new_tokens=5"]
    timing = lambda k: k in ("tokens_per_sec", "mfu") or k.endswith("_seconds")  # noqa: E731
    strip = lambda rs: [{k: v for k, v in r.items() if not timing(k)} for r in rs]  # noqa: E731
    assert main(["train", *base, "train.steps=1", f"run.dir={tmp_path / 'on'}"]) == 0
    assert main(["train", *base, "train.steps=4", "rl.max_staleness=1", f"run.dir={tmp_path / 'k1'}"]) == 0
    rows = [r for r in _rows(tmp_path / "k1") if "loss" in r]
    assert [r["rl/staleness"] for r in rows] == [0, 1, 0, 1] and all(r["rl/wait_seconds"] >= 0 for r in rows)
    on = [r for r in _rows(tmp_path / "on") if "loss" in r]
    assert strip(on)[0] == {k: v for k, v in strip(rows)[0].items() if not k.startswith("rl/staleness")}
    assert all(0 < r["rl/logp_mismatch"] < 1e-5 for r in rows), rows  # (also the stale steps 2 and 4)
    assert rows[1]["rl/kl"] > 0  # (step 2's batch is a step behind: the policy it trains has moved)
    assert main(["train", *base, "train.steps=2", "rl.max_staleness=1", f"run.dir={tmp_path / 'r'}"]) == 0
    assert main(["train", *base, "train.steps=4", "rl.max_staleness=1", f"run.dir={tmp_path / 'r'}"]) == 0
    assert "resumed from the checkpoint at step 2" in capsys.readouterr().err
    assert strip(_rows(tmp_path / "r")) == strip(_rows(tmp_path / "k1"))
    plans = {}
    for k in ("0", "2"):
        assert main(["plan", *base, "format=json", f"rl.max_staleness={k}"]) == 0
        plans[k] = json.loads(capsys.readouterr().out)
    assert plans["2"]["param_bytes"] == 2 * plans["0"]["param_bytes"]  # (K = 2 copies beside params and reference)
    assert main(["train", *base, "rl.max_staleness=-1", f"run.dir={tmp_path / 'bad'}"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "spmdgpt: error: rl.max_staleness=-1 must be >= 0 (batches sampled ahead of the update; 0: on-policy)")


def test_rollouts_on_devices_of_their_own_give_the_shared_devices_rows(tmp_path, capsys, monkeypatch):
    """rl.rollout_devices=4 of the 8 test devices: the engine samples on the last 4 (mesh data=4), the
    update runs on the first 4 (mesh.data=4), the parameters copied across as each batch begins. Its
    rows (losses, rl/ rows, the final val/reward) are bitwise the unsplit run's on 4 devices (this process's
    first 4): both sides run the same programs on meshes of the same shape, and a copy across devices
    is exact. The copy is on the engine's devices, the batch (old log-probabilities included) on the
    trainer's; the plan lists the engine's programs on its devices; bad values are one line."""
    from spmdgpt.cli import main
    from spmdgpt.rl.rollouts import Rollouts

    base = [*_sums_file(tmp_path), "train.steps=2", "mesh.data=4", "train.eval_every=0", "checkpoint.enabled=false"]
    timing = lambda k: k in ("tokens_per_sec", "mfu") or k.endswith("_seconds")  # noqa: E731
    strip = lambda rs: [{k: v for k, v in r.items() if not timing(k)} for r in rs]  # noqa: E731
    every = jax.devices()
    with monkeypatch.context() as m:  # (a process of 4 devices: the unsplit run on the trainer's count)
        m.setattr(jax, "devices", lambda *a: every[:4])
        m.setattr(jax, "device_count", lambda *a: 4)
        assert main(["train", *base, f"run.dir={tmp_path / 'shared'}"]) == 0
    seen = []
    batch, to_engine = Rollouts.batch, Rollouts.to_engine

    def placed(ro, params, *a, **k):  # (where the trainer's parameters, their copy, the batch and the pool are)
        out = batch(ro, params, *a, **k)
        sets = lambda tree: {frozenset(x.sharding.device_set) for x in jax.tree.leaves(tree)}  # noqa: E731
        seen.append((sets(params), sets(to_engine(ro, params)), sets(out.batch), sets(ro.engine.pool)))
        return out

    monkeypatch.setattr(Rollouts, "batch", placed)
    assert main(["train", *base, "rl.rollout_devices=4", f"run.dir={tmp_path / 'split'}"]) == 0
    assert "preflight: train_step, rl_rollout, rl_logps, rl_ref_logps compiled" in capsys.readouterr().err
    rows = _rows(tmp_path / "split")
    assert [r["step"] for r in rows] == [1, 2, 2] and strip(rows) == strip(_rows(tmp_path / "shared"))
    assert any(r.get("rl/reward_std", 0) > 0 for r in rows) and rows[1]["rl/kl"] > 0  # (not all zeros)
    trainer, engine = frozenset(every[:4]), frozenset(every[4:])
    assert seen == [({trainer}, {engine}, {trainer}, {engine})] * 2
    assert main(["plan", *base, "format=json", "rl.rollout_devices=4", "rl.max_staleness=1"]) == 0
    plan = json.loads(capsys.readouterr().out)
    where = {p["name"]: p.get("where") for p in plan["programs"]}
    assert plan["devices"] == 4 and where == {"train_step": None, "rl_rollout": "the engine's 4 device(s)",
                                              "rl_logps": "the engine's 4 device(s)"}
    for extra, message in (
            (["rl.rollout_devices=-1"], "rl.rollout_devices=-1 must be >= 0 (the devices of the rollouts' engine; "
                                        "0: the trainer's own)"),
            (["rl.rollout_devices=8"], "rl.rollout_devices=8 leaves none of the 8 device(s) to the trainer; give the "
                                       "engine fewer (at most 7)"),
            (["rl.rollout_devices=2"], "mesh.data=4 x mesh.stage=1 x mesh.expert=1 x mesh.context=1 x mesh.model=1 "
                                       "does not fit 6 device(s) (of 8: rl.rollout_devices=2 are the engine's); the "
                                       "product of the fixed sizes must divide the device count (use -1 for one "
                                       "axis)"),
            (["rl.rollout_devices=4", "lora.rank=2"], "rl.rollout_devices=4 does not work with LoRA (lora.rank=2) "
                                                      "yet: the engine would need the frozen base beside the "
                                                      "adapters' copy; leave one out")):
        assert main(["train", *base, *extra, f"run.dir={tmp_path / 'bad'}"]) == 2
        said = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("spmdgpt: error:")]
        assert f"spmdgpt: error: {message}" in said and len(said) == 1 + ("lora.rank=2" in extra), said
    # (the engine's data axis takes the batch's rows: 8 rows over 6 engine devices do not split)
    two = [b for b in base if b != "mesh.data=4"] + ["mesh.data=2", "rl.rollout_devices=6"]
    assert main(["train", *two, f"run.dir={tmp_path / 'bad'}"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "spmdgpt: error: data.batch_size=8 does not split over the engine's rl.rollout_devices=6 devices (its data "
        "axis takes the batch's rows); make the batch a multiple of 6 or give the engine a divisor of 8")
    assert not (tmp_path / "bad").exists()


def test_the_shipped_arithmetic_data_is_the_generators(tmp_path):
    """spmdgpt/datasets/arithmetic/ holds exactly what `python -m spmdgpt.rl.arithmetic` writes,
    and the experiments read it through `spmdgpt:` paths."""
    import gzip
    from importlib import resources

    from spmdgpt.rl.arithmetic import files, main, problems
    from spmdgpt.rl.tools import calculator

    assert main([str(tmp_path)]) == 0
    shipped = resources.files("spmdgpt") / "datasets" / "arithmetic"
    for name, data in files().items():
        assert (tmp_path / name).read_bytes() == data == (shipped / name).read_bytes()
    q = problems(1000, 2)
    assert all(int(a) == eval(s.removesuffix("=")) for s, a in q)  # noqa: S307
    # the calculator walk's: products, a quarter of the worked ones through the calculator ("<<a*b>>" then its output)
    calc = [json.loads(x)["messages"] for x in gzip.decompress(files()["calc_sft.jsonl.gz"]).decode().splitlines()]
    tools = [m[1]["content"] for m in calc if isinstance(m[1]["content"], list)]  # (the call's text, then the
    assert len(calc) == 2000 and 0.2 < len(tools) / len(calc) < 0.3  # tool's output as its own part)
    assert all([p["type"] for p in r] == ["text", "tool_output"] and calculator(r[0]["text"][2:-2]) == r[1]["text"]
               for r in tools)
    answers = [m[1]["content"] if isinstance(m[1]["content"], str) else m[1]["content"][1]["text"] for m in calc]
    assert all(int(a) == eval(m[0]["content"][:-1]) for a, m in zip(answers, calc))  # noqa: S307
    assert {len(s.replace("-", "+").split("+")[0]) for s, _ in q} == {2, 3}  # (first operands)
    # the chain walk's: each demonstration's calls, answered by the chain environment, do the whole chain
    from spmdgpt.rl.envs import ChainEnv

    def replay(chain, parts):
        env, total, done = ChainEnv(), 0.0, False
        env.reset(chain, {})
        for call, answer in zip(parts[::2], parts[1::2], strict=True):
            said, reward, done = env.step(call["text"][2:-2])
            assert (call["type"], answer["type"], said) == ("text", "tool_output", answer["text"])
            total += reward
        return total, done, len(parts) // 2

    demos = [json.loads(x)["messages"] for x in gzip.decompress(files()["chain_sft.jsonl.gz"]).decode().splitlines()]
    played = [replay(m[0]["content"], m[1]["content"]) for m in demos]
    assert len(demos) == 2000 and all(t == 1.0 and done for t, done, _ in played)
    assert {n for _, _, n in played} == {1, 2}
    chains = [json.loads(x) for x in gzip.decompress(files()["chain_prompts.jsonl.gz"]).decode().splitlines()]
    assert len(chains) == 4000 and {c["prompt"][0]["content"].count(" ") for c in chains} == {2, 3, 4}
    from spmdgpt.rl.loop import load_prompts

    corpus = load_prompts(load_config(["+experiment=arithmetic_grpo"]))  # (chat prompts: the char tokenizer
    assert len(corpus.train) + len(corpus.val) == 4000 and 150 < len(corpus.val) < 250  # with the template)
    first = corpus.train[0]
    assert first.prompt == [{"role": "user", "content": q[0][0]}] and first.record["answer"] == q[0][1]
    assert corpus.tokenizer.decode(first.tokens) == f"<|user|>{q[0][0]}<|end|><|assistant|>"


def test_the_arithmetic_walk_runs_from_its_two_commands(tmp_path, capsys, monkeypatch):
    """`+experiment=arithmetic_sft` then `+experiment=arithmetic_grpo checkpoint.init_from=` that
    run (a few steps each, on a model of one narrow layer: the walk's model, 4 layers of 128, and the rise
    itself, thousands of steps on the CPU: BENCHMARKS, "Reinforcement learning"): the GRPO run takes
    the SFT run's tokenizer and chat template, samples answers ending at the end-of-turn token and
    logs rewards; so does a LoRA run on it."""
    from conftest import read_jsonl

    from spmdgpt.cli import main

    sft, rl = tmp_path / "sft", tmp_path / "rl"
    tiny = ["model.num_layers=1", "model.d_model=32", "model.num_heads=2"]  # (the same in all three runs)
    assert main(["train", "+experiment=arithmetic_sft", *tiny, "train.steps=4", "train.progress=false",
                 f"run.dir={sft}"]) == 0
    assert main(["train", "+experiment=arithmetic_grpo", *tiny, f"checkpoint.init_from={sft}", "train.steps=2",
                 "train.progress=false", "train.log_every=1", "rl.val_prompts=8", "rl.reward=digits",
                 "rl.val_reward=numeric", f"run.dir={rl}"]) == 0  # (trained on partial credit, evaluated exactly)
    assert (rl / "tokenizer.json").read_text() == (sft / "tokenizer.json").read_text()
    rows = [r for r in read_jsonl(rl / "metrics.jsonl") if "rl/reward" in r]
    assert [r["step"] for r in rows] == [1, 2] and all(1 <= r["rl/length"] <= 6 for r in rows)
    samples = [json.loads(x) for x in (rl / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 4 and all(s["prompt"][0]["role"] == "user" for s in samples)
    assert all(s["reward"] == numeric("", s["completion"], {"answer": s["answer"]}) for s in samples)
    # the SFT run's val/reward (rl.eval_prompts): greedy answers to the GRPO run's own held-out prompts
    sft_rewards = [r for r in read_jsonl(sft / "metrics.jsonl") if "val/reward" in r]
    assert [r["step"] for r in sft_rewards] == [4] and (64 * sft_rewards[0]["val/reward"]) % 1 == 0
    sft_samples = [json.loads(x) for x in (sft / "samples.jsonl").read_text().splitlines() if '"reward"' in x]
    assert [s["prompt"] for s in sft_samples] == [s["prompt"] for s in samples]
    # with LoRA: adapters on the frozen SFT model, which is also the KL's reference
    assert main(["train", "+experiment=arithmetic_grpo", *tiny, f"checkpoint.init_from={sft}", "train.steps=2",
                 "train.progress=false", "train.log_every=1", "rl.val_prompts=8", "lora.rank=4", "rl.reward=digits",
                 f"run.dir={tmp_path / 'lora'}"]) == 0
    lora = [r for r in read_jsonl(tmp_path / "lora" / "metrics.jsonl") if "rl/reward" in r]
    assert lora[0]["rl/kl"] == 0.0 and lora[0]["rl/reward"] == rows[0]["rl/reward"]  # (B = 0: the same policy)
    # lm-eval reads the RL run as any other; a task with characters its char vocabulary lacks is one line
    import lm_eval.tasks

    class WithoutRegistry(lm_eval.tasks.TaskManager):  # (indexing lm-eval's registry takes ~15 s)
        def __init__(self, include_path=None, include_defaults=True, **kwargs):
            super().__init__(include_path=include_path, include_defaults=False, **kwargs)

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", WithoutRegistry)
    capsys.readouterr()
    assert main(["lm-eval", f"run.dir={rl}", "tasks=shakespeare_ppl", "limit=2"]) == 2
    import re

    assert re.fullmatch(r"spmdgpt: error: the task's text cannot be tokenized by the run's chat tokenizer \(character "
                        r"'[A-Za-z]' is not in the vocabulary\); evaluate a model whose tokenizer covers the task "
                        r"\(gpt2 or hf\), or another task", capsys.readouterr().err.strip().splitlines()[-1])


def test_rollout_correction_weighs_each_token_by_the_trainer_over_the_sampler(tmp_path):
    """rl.rollout_correction: the weights of exp(trainer - sampler) per counted token, truncated at
    the cap (tis) or dropped above it (mis); in float32 the engine and the trainer agree, so tis
    weighs every token ~1 and truncates none, while mis at cap 1 drops the tokens whose ratio
    rounds above 1 (some, not all); a cap below 1 is one line."""
    from conftest import read_jsonl

    from spmdgpt.cli import main
    from spmdgpt.rl.rollouts import correction_weights

    trainer = np.log(np.array([[0.5, 0.2, 0.9], [0.1, 0.4, 0.3]]))
    sampler = np.log(np.array([[0.25, 0.4, 0.9], [0.1, 0.1, 0.6]]))
    counted = np.array([[True, True, False], [True, True, True]])
    w, mean, share = correction_weights(trainer, sampler, counted, "tis", 2.0)
    np.testing.assert_allclose(w, [[2.0, 0.5, 0.0], [1.0, 2.0, 0.5]], rtol=1e-6)  # (4.0 truncated at 2)
    assert (mean, share) == (pytest.approx(6.0 / 5), 1 / 5)
    w, mean, share = correction_weights(trainer, sampler, counted, "mis", 2.0)
    np.testing.assert_allclose(w, [[2.0, 0.5, 0.0], [1.0, 0.0, 0.5]], rtol=1e-6)  # (4.0 dropped)
    assert (mean, share) == (pytest.approx(4.0 / 5), 1 / 5)
    base = _sums_file(tmp_path) + ["train.steps=2", "train.eval_every=0"]
    rows = {}
    for mode, cap in (("tis", 2.0), ("mis", 1.0)):
        assert main(["train", *base, f"rl.rollout_correction={mode}", f"rl.rollout_correction_cap={cap}",
                     f"run.dir={tmp_path / mode}"]) == 0
        rows[mode] = [r for r in read_jsonl(tmp_path / mode / "metrics.jsonl") if "loss" in r]
    assert all(abs(r["rl/correction_weight"] - 1) < 1e-5 and r["rl/correction_dropped"] == 0 for r in rows["tis"])
    assert all(0 < r["rl/correction_dropped"] < 1 and np.isfinite(r["loss"]) for r in rows["mis"])
    assert main(["train", *base, "rl.rollout_correction=tis", "rl.rollout_correction_cap=0.5",
                 f"run.dir={tmp_path / 'bad'}"]) == 2 and not (tmp_path / "bad").exists()


def test_distillation_advantages_are_the_teachers_log_probability_less_the_students():
    """rl.objective=distill's rollouts: each completion token's advantage is the teacher's
    log-probability less the student's (both by hand: log_softmax of the full forward passes over
    the tokenizer's 11 ids, a teacher of another shape), 0 off the completion; rl/reverse_kl is the
    mean of student - teacher; rl.reward_weight adds the group advantage; a teacher that is the
    student gives advantages of 0 (float32 rounding)."""
    from functools import partial

    from spmdgpt.rl.prompts import Prompt
    from spmdgpt.rl.rollouts import Rollouts
    from spmdgpt.rl.teacher import Teacher, distill_advantages

    cfg, mesh, rules = _tiny(1, "rl.group_size=2", "rl.max_new_tokens=6", "data.batch_size=4")
    tmodel = load_config(["+experiment=staircase", "model.num_layers=2", "model.d_model=48", "model.num_heads=2",
                          "model.vocab_size=16", "model.max_seq_len=32"]).model
    tok = CharTokenizer("0123456789", eos=True)  # (11 ids)
    prompts = [Prompt(tuple(tok.encode(s)), s, {"answer": "5"}, f"f:{i}") for i, s in enumerate(["0123", "98765"])]

    def teacher_of(model, params, trules):
        return Teacher(model, trules, params, jax.jit(partial(token_logps, model, trules, vocab_limit=11)))

    with jax.set_mesh(mesh):
        params = init_params(cfg.model, jax.random.key(1), rules)
        trules = Rules(mesh, cfg.sharding, tmodel)
        tparams = init_params(tmodel, jax.random.key(7), trules)
        a = Rollouts(cfg, rules, tok, numeric, teacher=teacher_of(tmodel, tparams, trules)).batch(
            params, None, prompts, 0)
        inputs, targets = a.batch[0], np.asarray(a.batch[1])

        def by_hand(model, p, r):
            logp = jax.nn.log_softmax(forward(model, r, p, inputs)[0][..., :11], -1)
            return np.asarray(jnp.take_along_axis(logp, jnp.maximum(jnp.asarray(targets), 0)[..., None], -1)[..., 0])

        student, teacher = by_hand(cfg.model, params, rules), by_hand(tmodel, tparams, trules)
        same = Rollouts(cfg, rules, tok, numeric, teacher=teacher_of(cfg.model, params, rules)).batch(
            params, None, prompts, 0)
    counted = targets >= 0
    adv = np.asarray(a.batch[2])
    assert adv.shape == (4, 24) and counted.sum() > 8 and (adv[~counted] == 0).all()
    np.testing.assert_allclose(adv[counted], (teacher - student)[counted], atol=2e-5)
    kl = float(np.mean((student - teacher)[counted]))
    assert a.metrics(2)["rl/reverse_kl"] == pytest.approx(kl, abs=2e-6) and abs(kl) > 1e-3
    assert np.abs(np.asarray(same.batch[2])).max() < 1e-6 and abs(same.reverse_kl) < 1e-7
    # the reward's advantages, weighed in: (teacher - student) + w x A per counted token
    per_token, rkl = distill_advantages(np.log([[0.5, 0.2, 1.0]]), np.log([[0.25, 0.4, 1.0]]),
                                        np.array([[True, True, False]]), np.array([2.0]), 0.5)
    np.testing.assert_allclose(per_token, [[math.log(2) + 1.0, -math.log(2) + 1.0, 0.0]], rtol=1e-6)
    assert rkl == pytest.approx(0.0, abs=1e-12)  # (log 2 and -log 2: no gap on average)


def test_on_policy_distillation_runs_from_a_teacher_run_and_bad_teachers_are_one_line(tmp_path, capsys):
    """`spmdgpt train rl.objective=distill rl.teacher=RUN` (a 2-layer, 48-wide teacher for a 1-layer,
    32-wide student): each step's loss is its rl/reverse_kl (the batch's first update: the ratio is
    1, so the clipped surrogate of the per-token advantages is their mean), the preflight compiles
    the teacher's log-probabilities; each bad setting is one line, exit 2, nothing written."""
    import shutil

    from conftest import read_jsonl

    from spmdgpt.cli import main

    base = _sums_file(tmp_path) + ["train.eval_every=0"]  # (on the 8 test devices)
    teacher = tmp_path / "teacher"
    assert main(["train", *base, "model.num_layers=2", "model.d_model=48", "train.steps=1",
                 f"run.dir={teacher}"]) == 0
    distill = ["rl.objective=distill", f"rl.teacher={teacher}", "rl.temperature=1.0", "rl.kl_beta=0"]
    capsys.readouterr()
    assert main(["train", *base, *distill, "train.steps=3", f"run.dir={tmp_path / 's'}"]) == 0
    assert "rl_teacher_logps" in capsys.readouterr().err
    rows = [r for r in read_jsonl(tmp_path / "s" / "metrics.jsonl") if "loss" in r]
    assert len(rows) == 3 and len({r["rl/reverse_kl"] for r in rows}) == 3
    for r in rows:
        assert r["loss"] == pytest.approx(r["rl/reverse_kl"], abs=1e-6)
    # the plan holds the teacher's parameters beside the student's (data parallel: a whole copy a device)
    plans = []
    for extra in (["rl.kl_beta=0"], distill):
        assert main(["plan", *base, *extra, "format=json"]) == 0
        plans.append(json.loads(capsys.readouterr().out))
    tmodel = load_config([*base, "model.num_layers=2", "model.d_model=48"]).model
    from spmdgpt.model import is_info, param_info

    params = sum(math.prod(i.shape) for i in jax.tree.leaves(param_info(tmodel), is_leaf=is_info))
    assert plans[1]["param_bytes"] - plans[0]["param_bytes"] == 4 * params > 50_000
    other = tmp_path / "other"  # (a teacher trained on other characters)
    shutil.copytree(teacher, other)
    saved = json.loads((other / "tokenizer.json").read_text())
    (other / "tokenizer.json").write_text(json.dumps({**saved, "chars": saved["chars"][::-1]}))
    for extra, message in (
            (["rl.objective=distill"], "rl.objective=distill needs rl.teacher"),
            ([f"rl.teacher={teacher}"], f"rl.teacher={teacher} is read by on-policy distillation only"),
            ([*distill, "rl.temperature=0.7"], "rl.temperature=0.7: on-policy distillation samples from the "
                                               "student's own distribution"),
            ([*distill, "rl.reward_weight=nan"], "rl.reward_weight=nan must be a number in [0, 1e6]"),
            ([*distill[:1], f"rl.teacher={tmp_path}"], f"rl.teacher={tmp_path}: no config.yaml there"),
            ([*distill[:1], "rl.teacher=hf:/nowhere"], "rl.teacher=hf:/nowhere: no config.json in /nowhere"),
            ([*distill[:1], f"rl.teacher={other}"], f"rl.teacher={other} reads another tokenizer (char) than this "
                                                    "run's (char, 13 ids)"),
            ([*distill, "data.seq_len=20", "model.max_seq_len=24"], "its context of 12 tokens is shorter than the "
                                                                    "rollouts' rows (data.seq_len=20)")):
        assert main(["train", *base, *distill[2:], *extra, "train.steps=1", f"run.dir={tmp_path / 'bad'}"]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
        assert not (tmp_path / "bad").exists()
    assert any("on-policy distillation samples prompts (data of format: prompts); this run's data is not prompts" in e
               for e in validate(load_config(["+experiment=staircase", "rl.objective=distill"]), 8))
    assert any("rl.reward_weight=0.5 is read by on-policy distillation only" in e
               for e in validate(load_config([*base, "rl.reward_weight=0.5"]), 8))


def test_a_teacher_folder_exported_from_a_chat_run_reads_the_students_ids(tmp_path):
    """An exported chat run's tokenizer.json (its characters, the template's tokens as special ones,
    which its decoder skips) is the student's chat tokenizer for the teacher check; a vocabulary
    shifted by one id is not."""
    from spmdgpt.data import HFTokenizer
    from spmdgpt.data.corpus import with_chat_template
    from spmdgpt.hf import tokenizer_files
    from spmdgpt.rl.teacher import _same_ids

    data = load_config(["+experiment=arithmetic_sft"]).data
    student = with_chat_template(data, CharTokenizer("+-0123456789=", eos=True))
    assert student.kind == "chat" and student.vocab_size > 14
    for name, text in tokenizer_files(student, 64).items():
        (tmp_path / name).write_text(text)
    assert _same_ids(HFTokenizer.from_file(tmp_path / "tokenizer.json", eos_required=False), student)
    other = with_chat_template(data, CharTokenizer("+-0123456789=x", eos=True))
    assert not _same_ids(HFTokenizer.from_file(tmp_path / "tokenizer.json", eos_required=False), other)


def test_the_chain_environment_and_bad_environments_end_only_their_episodes(capsys):
    """`chain`: each right call on the previous result is rewarded 1 / (its operations) and answered
    with the result, a wrong one ends the episode; through the engine's hooks (a request fed one
    character at a time) the episode's observations are appended and it stops when the environment
    says done. Environments that raise, return no text or never end end their own episodes,
    counted; the rewards they gave stay."""
    from types import SimpleNamespace

    from spmdgpt.rl.envs import ChainEnv, EnvBox, env_class
    from spmdgpt.rl.prompts import Prompt

    env = ChainEnv()
    assert env.reset("7 +5 *3 -4", {}) == ""
    assert env.step("7+5") == ("12", 1 / 3, False) and env.step("12 * 3") == ("36", 1 / 3, False)
    assert env.step("36-4") == ("32", 1 / 3, True)
    env.reset([{"role": "user", "content": "ignored"}], {"chain": "2 *10"})
    assert env.step("2*11") == ("wrong", 0.0, True)
    with pytest.raises(ValueError, match="not a chain of operations"):
        ChainEnv().reset("7 plus 5", {})
    tok = CharTokenizer("0123456789 +-*<>=wrong", eos=True)

    def episode(cls, text, turns=4):
        """Feed `text` to one episode a character at a time; (what the request holds, the box)."""
        box = EnvBox(cls, tok, turns=turns)
        prompt, = box.start([Prompt(tuple(tok.encode("7 ")), "7 +5 *3 -4", {}, "f:1")], 20)
        req = SimpleNamespace(tokens=[], stream=0)
        for c in text:
            req.tokens += tok.encode(c)
            req.tokens += box.inject(req) or []
            if box.stop(req):
                break
        return tok.decode(prompt.tokens), tok.decode(req.tokens), box

    prompt, got, box = episode(ChainEnv, "<<7+5>><<12*3>><<36-4>>99")
    assert got == "<<7+5>>12<<12*3>>36<<36-4>>32" and box.rewards().tolist() == [pytest.approx(1.0)]
    assert (box.actions, box.errors, box.unfinished()) == (3, 0, 0) and prompt == "7 "
    _, got, box = episode(ChainEnv, "<<7+5>><<13*3>><<1>>")
    assert got == "<<7+5>>12<<13*3>>wrong" and box.rewards().tolist() == [pytest.approx(1 / 3)]
    prompt, got, box = episode(TwoActionsEnv, "1<<2>>3<<4>>5")
    assert (prompt, got, box.rewards().tolist()) == ("7 9", "1<<2>>73<<4>>7", [1.0])
    for cls, text, reward, said in ((RaisingEnv, "<<1>><<2>><<3>>", 0.5, "step raised RuntimeError: broken"),
                                    (NotTextEnv, "<<1>><<2>>", 0.0, "step returned (7, 0.5, False), not (text"),
                                    (ResetFailsEnv, "<<1>>", 0.0, "reset returned NoneType, not text")):
        _, got, box = episode(cls, text)
        assert box.rewards().tolist() == [reward] and box.errors == 1 and box.unfinished() == 0, cls
        assert said in capsys.readouterr().err
    _, got, box = episode(NeverDoneEnv, "<<1>><<2>><<3>>", turns=2)  # (its third call is text like any other)
    assert got == "<<1>>7<<2>>7<<3>>" and box.rewards().tolist() == [0.5] and box.unfinished() == 1
    assert env_class("rl_envs:TwoActionsEnv") is TwoActionsEnv
    for name, message in (("maze", "rl.env=maze: unknown environment; use chain or module:Class"),
                          ("test_rl:digits_like_the_answer", "not an environment class (it needs methods reset"),
                          (":Maze", "rl.env=:Maze: cannot import it (ValueError: Empty module name)")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            env_class(name)


def test_ones_own_environment_runs_in_a_worker_process_that_a_timeout_ends(capsys):
    """rl.env=module:Class runs in a worker process (spmdgpt/rl/envworker.py): the same answers and
    the same failures as in this process; a step past rl.env_timeout ends its episode and the
    process (the round's other episode ends at its next call, counted), and the next round starts
    a fresh one."""
    import time
    from types import SimpleNamespace

    from spmdgpt.rl.envs import WORKER, EnvBox, env_class
    from spmdgpt.rl.prompts import Prompt
    from spmdgpt.rl.rewards import MAX_REWARD
    from spmdgpt.rl.tools import ToolProcess

    tok = CharTokenizer("0123456789<>", eos=True)
    prompts = [Prompt(tuple(tok.encode("0")), "0", {}, f"f:{i}") for i in range(2)]

    boxes = []  # (each box held to the end: a freed box's id() can come back as a later box's, its requests too)

    def box_of(name, timeout=5.0):
        worker = ToolProcess(name, WORKER, (str(MAX_REWARD),), "rl.env")
        boxes.append(EnvBox(env_class(name), tok, name=name, timeout=timeout, worker=worker))
        return boxes[-1]

    requests = {}

    def act(box, stream, text):
        """`text` fed on to episode `stream` a character at a time: what its request holds after."""
        req = requests.setdefault((id(box), stream), SimpleNamespace(tokens=[], stream=stream))
        for c in text:
            req.tokens += tok.encode(c)
            req.tokens += box.inject(req) or []
            if box.stop(req):
                break
        return tok.decode(req.tokens)

    box = box_of("rl_envs:TwoActionsEnv")
    assert [tok.decode(p.tokens) for p in box.start(prompts, 20)] == ["09", "09"]
    assert act(box, 0, "<<1>>2<<3>>4") == "<<1>>72<<3>>7" and act(box, 1, "<<1>>") == "<<1>>7"
    assert box.rewards().tolist() == [1.0, 0.5] and (box.errors, box.unfinished()) == (0, 1)
    for name, text, said in (("rl_envs:RaisingEnv", "<<1>><<2>>", "step raised RuntimeError: broken"),
                             ("rl_envs:NotTextEnv", "<<1>>", "step returned (7, 0.5, False), not (text, a finite"),
                             ("rl_envs:ResetFailsEnv", "<<1>>", "reset returned NoneType, not text")):
        box = box_of(name)
        box.start(prompts[:1], 20)
        act(box, 0, text)
        assert box.errors == 1 and box.unfinished() == 0 and said in capsys.readouterr().err, name
    box = box_of("rl_envs:SleepyEnv", timeout=2.0)
    box.start(prompts, 20)
    assert act(box, 0, "<<1>>") == "<<1>>7"
    began = time.monotonic()
    assert act(box, 0, "<<2>><<3>>") == "<<1>>7<<2>>"  # (no answer: the episode ends there)
    assert time.monotonic() - began < 10  # (the step's minute was not waited for)
    assert act(box, 1, "<<1>>") == "<<1>>"  # (its instance went with the process)
    assert box.rewards().tolist() == [0.5, 0.0] and (box.errors, box.unfinished()) == (2, 0)
    err = capsys.readouterr().err
    assert "rl.env=rl_envs:SleepyEnv on the action '2': step ran past rl.env_timeout=2 s (its process was " \
           "ended); its episode ends there" in err and "its environment is gone" in err
    box.start(prompts[:1], 20)  # (a new round: a fresh process)
    requests.clear()
    assert act(box, 0, "<<1>>") == "<<1>>7" and box.errors == 0
    box = box_of("rl_envs:SleepyResetEnv", timeout=2.0)  # (one timeout a round: the other reset fails at once)
    box.worker.ask({"clear": True}, 60)  # (started: its start-up not timed below)
    began = time.monotonic()
    box.start(prompts, 20)
    assert time.monotonic() - began < 4 and box.errors == 2 and "a reset ran past" in capsys.readouterr().err
    box = box_of("rl_envs:ExitingEnv")
    box.start(prompts[:1], 20)
    act(box, 0, "<<1>>")
    assert box.errors == 1 and "its process exited during step" in capsys.readouterr().err
    box = box_of("rl_envs:NumpyEnv")
    box.start(prompts[:1], 20)
    assert act(box, 0, "<<1>>") == "<<1>>7" and box.rewards().tolist() == [0.5] and box.errors == 0
    import rl_envs  # (a class this process has and the worker's import of the module does not)

    rl_envs.Late = type("Late", (TwoActionsEnv,), {})
    box = box_of("rl_envs:Late")
    box.start(prompts, 20)
    said = "rl.env=rl_envs:Late: its worker process could not import it (AttributeError: module 'rl_envs' has no "
    assert box.errors == 2 and said + "attribute 'Late')" in capsys.readouterr().err
    # a run that dies (kill -9: no cleanup) takes its worker with it, even one inside a step that never returns
    import os
    import subprocess
    import sys
    import textwrap

    dies = textwrap.dedent("""
        import os
        from spmdgpt.rl.envs import WORKER
        from spmdgpt.rl.tools import ToolProcess
        w = ToolProcess("rl_envs:SleepyEnv", WORKER, ("1",), "rl.env")
        w.ask({"reset": 0, "prompt": "", "record": {}}, 9), w.ask({"step": 0, "action": ""}, 9)
        w.proc.stdin.write(b'{"step": 0, "action": ""}\\n')
        w.proc.stdin.flush()
        print(w.proc.pid, flush=True)
        os._exit(0)""")
    out = subprocess.run([sys.executable, "-c", dies], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})

    def alive(pid):  # (a zombie has ended)
        try:
            return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
        except FileNotFoundError:
            return False

    pid, deadline = int(out.stdout), time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), out.stderr


def test_an_environments_episodes_in_rollouts_and_a_run(tmp_path, capsys):
    """rl.env in the rollouts (a random model, actions between the digits 1 and 5): the first
    observation is read after the prompt and the environment's answers inside the completions, all
    with no loss (targets -1); an episode the environment ended stops right after its answer; the
    rewards are the episodes' sums. `spmdgpt train rl.env=...` logs rl/env_actions, errors and
    unfinished per completion; rl.env beside rl.tool is one line."""
    from conftest import read_jsonl

    from spmdgpt.cli import main
    from spmdgpt.rl.prompts import Prompt
    from spmdgpt.rl.rollouts import Rollouts

    over = ["rl.group_size=4", "rl.max_new_tokens=20", "data.batch_size=8", "rl.env=rl_envs:TwoActionsEnv",
            "rl.tool_open=1", "rl.tool_close=5"]
    cfg, mesh, rules = _tiny(1, *over)
    tok = CharTokenizer("0123456789", eos=True)
    prompts = [Prompt(tuple(tok.encode(s)), s, {"answer": "5"}, f"f:{i}") for i, s in enumerate(["01", "98"])]
    with jax.set_mesh(mesh):
        a = Rollouts(cfg, rules, tok, numeric).batch(init_params(cfg.model, jax.random.key(0), rules), None, prompts, 0)
    targets = np.asarray(a.batch[1])
    assert a.rewards.tolist() == [0.5 * min(len(j), 2) for j in a.injected] and max(a.rewards) == 1.0
    for r, (p, done) in enumerate(zip(a.prompts, a.injected, strict=True)):
        assert tok.decode(p.tokens) == p.prompt + "9"  # (the first observation)
        first = len(p.tokens) - 1
        assert all(targets[r, first + j] == -1 for j in done) and targets[r, first] != -1
        if len(done) == 2:  # (ended by the environment: its answer is the completion's last token)
            assert a.lengths[r] == done[-1] + 1
    m = a.metrics(4)
    assert m["rl/env_actions"] == pytest.approx(sum(map(len, a.injected)) / 8) and m["rl/env_errors"] == 0
    base = _sums_file(tmp_path) + ["train.eval_every=0", "rl.max_new_tokens=7", *over[3:]]
    assert main(["train", *base, "train.steps=2", f"run.dir={tmp_path / 'r'}"]) == 0
    rows = [r for r in read_jsonl(tmp_path / "r" / "metrics.jsonl") if "loss" in r]
    # (8 completions a step, each rewarded 0, 0.5 or 1: means in sixteenths)
    assert sum(r["rl/env_actions"] for r in rows) > 0 and all(r["rl/reward"] * 16 == round(r["rl/reward"] * 16)
                                                              and "rl/env_unfinished" in r for r in rows)
    capsys.readouterr()
    assert main(["train", *base, "rl.tool=calculator", "train.steps=1", f"run.dir={tmp_path / 'bad'}"]) == 2
    assert "rl.tool=calculator and rl.env=rl_envs:TwoActionsEnv: a rollout acts on one of them" in \
        capsys.readouterr().err and not (tmp_path / "bad").exists()
    # (the sums' characters have no letters: such marks could never be written)
    assert main(["train", *base, "rl.tool_open=ab", "rl.tool_close=cd", "train.steps=1",
                 f"run.dir={tmp_path / 'bad'}"]) == 2 and not (tmp_path / "bad").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rl.tool_open='ab': this run's tokenizer (char, 13 ids) cannot write it, so no " \
        "completion could act on rl.env=rl_envs:TwoActionsEnv" in err[0]
