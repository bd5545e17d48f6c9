"""`spmdgpt lm-eval`: lm-evaluation-harness on spmdgpt's forward pass and sampler, against the
harness's own Hugging Face backend on the exported model."""

import json

import numpy as np
import pytest
from conftest import read_jsonl  # noqa: E402

from spmdgpt.cli import main
from spmdgpt.cli.harness import TASKS_DIR
from spmdgpt.config import load_config


@pytest.fixture(scope="module")
def char_run(tmp_path_factory):
    """A small char-level Tiny Shakespeare run with a 64-token context (so that lm-eval cuts the
    tasks' texts into rolling windows and truncates long contexts from the left)."""
    from spmdgpt.loop import train

    run = tmp_path_factory.mktemp("lm-eval") / "run"
    train(load_config(["+experiment=shakespeare_char", "model.num_layers=2", "model.d_model=64", "model.num_heads=2",
                       "model.max_seq_len=64", "data.seq_len=64", "data.batch_size=8", "train.steps=30",
                       "optimizer.lr=3e-3", "train.time_budget=null", "train.progress=false", "train.eval_every=0",
                       "train.eval_batches=1", "train.rollout_tokens=0", f"run.dir={run}"]), argv=["pytest"])
    return run


TASKS = ["shakespeare", "speaker_long"]


@pytest.fixture(scope="module")
def in_process(char_run, tmp_path_factory):
    """`spmdgpt lm-eval` of char_run on a 2-device mesh, in process, at the run's 64-token
    context: the shipped tasks (tag shakespeare: multiple choice, rolling log-likelihood,
    generation) and a task of one's own (include_path): a local jsonl through lm-eval's json
    loader, whose 24 generated tokens run on past the newline. {out, samples, table (stdout),
    own (the task's folder)}: both comparisons below read this one evaluation."""
    import contextlib
    import io

    tmp_path = tmp_path_factory.mktemp("in-process")
    out = tmp_path / "ours.json"
    own = tmp_path / "tasks"
    own.mkdir()
    (own / "speaker_long.yaml").write_text(
        "task: speaker_long\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {TASKS_DIR / 'shakespeare_speaker.jsonl'}\n"
        "output_type: generate_until\ntest_split: test\ndoc_to_text: '{{context}}'\ndoc_to_target: '{{speaker}}'\n"
        "generation_kwargs:\n  until: ['\\n\\n']\n  max_gen_toks: 24\nmetric_list:\n  - metric: exact_match\n")
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        assert main(["lm-eval", f"run.dir={char_run}", f"tasks={','.join(TASKS)}", f"include_path={own}", "limit=3",
                     "log_samples=true", "bootstrap_iters=0", "batch_size=4", "mesh.data=2", f"out={out}"]) == 0
    return {"out": json.loads(out.read_text()), "samples": read_jsonl(out.with_suffix(".samples.jsonl")),
            "table": table.getvalue(), "own": own}


def test_scores_equal_lm_evals_hugging_face_backend(char_run, in_process, tmp_path, torch_side):
    """The shipped tasks and one's own (`in_process`) on a 2-device mesh, and lm-eval's HFLM on
    the exported model: every answer's log-likelihood within 1e-4, the same greedy flags and
    generations, the same accuracies and perplexities."""
    table, ours, samples, own = (in_process[k] for k in ("table", "out", "samples", "own"))
    tasks = TASKS
    assert "shakespeare_next_line" in table and "acc_norm" in table and "word_perplexity" in table
    assert ours["spmdgpt"]["step"] == 30 and len(samples) == 12  # (4 tasks x limit=3 documents)

    assert main(["export", f"run.dir={char_run}", f"out={tmp_path / 'hf'}"]) == 0
    theirs = torch_side.ask("lm_eval", folder=str(tmp_path / "hf"), tasks=tasks,
                            include_path=[str(TASKS_DIR), str(own)], limit=3)
    for s in samples:
        mine, other = s["resps"], theirs["answers"][s["task"]][str(s["doc_id"])]
        if s["task"] in ("shakespeare_speaker", "speaker_long"):
            assert mine == other  # (the greedy generations, cut at the stop strings)
        elif s["task"] == "shakespeare_ppl":
            np.testing.assert_allclose(mine[0], other[0], atol=1e-4)
        else:  # four choices: (log-likelihood, greedy) each
            assert len(mine) == 4 and [r[0][1] for r in mine] == [r[0][1] for r in other]
            np.testing.assert_allclose([r[0][0] for r in mine], [r[0][0] for r in other], atol=1e-4)
    assert all(len(s["resps"][0][0]) > 10 for s in samples if s["task"] == "speaker_long")
    for task in ("shakespeare_next_line", "shakespeare_ppl", "shakespeare_speaker", "speaker_long"):
        for metric, value in theirs["results"][task].items():
            if metric.endswith(",none") and "stderr" not in metric:
                assert ours["results"][task][metric] == pytest.approx(value, rel=1e-5), (task, metric)
    assert ours["results"]["shakespeare_ppl"]["word_perplexity,none"] > 1


@pytest.mark.parametrize("args,message", [
    (["tasks=no_such_task"], "tasks: no_such_task not found in lm-eval's registry, spmdgpt's tasks"),
    ([], "tasks is required: e.g. tasks=shakespeare"),
    (["tasks=shakespeare", "limit=0"], "limit=0 must be > 0"),
])
def test_bad_lm_eval_arguments_are_one_line_exit_2(char_run, capsys, monkeypatch, args, message):
    import lm_eval.tasks

    class WithoutRegistry(lm_eval.tasks.TaskManager):  # (indexing lm-eval's registry takes ~15 s)
        def __init__(self, include_path=None, include_defaults=True, **kwargs):
            super().__init__(include_path=include_path, include_defaults=False, **kwargs)

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", WithoutRegistry)
    assert main(["lm-eval", f"run.dir={char_run}", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_bos_adding_tokenizer_encodes_as_hflm_does():
    """A Hugging Face tokenizer whose post-processor puts BOS first (Llama 3's way): texts get it,
    a text that already starts with it is not prefixed again, add_special_tokens=False leaves it
    out (HFLM.tok_encode's rules); the empty context's prefix is BOS."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

    from spmdgpt.data.tokenizers import HFTokenizer
    from spmdgpt.eval.harness import SpmdgptLM

    t = Tokenizer(models.WordLevel({"a": 0, "b": 1, "<unk>": 2}, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.add_special_tokens([AddedToken("<s>", special=True), AddedToken("</s>", special=True)])
    t.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 3)])
    lm = SpmdgptLM.__new__(SpmdgptLM)  # (the tokenizer rules only: no model)
    lm.tok, lm.bos_id = HFTokenizer(t.to_str()), 3
    assert lm.tok_encode("a b") == [3, 0, 1] and lm.tok_encode("<s> a b") == [3, 0, 1]
    assert lm.tok_encode("a b", add_special_tokens=False) == [0, 1]
    assert lm.prefix_token_id == 3 and lm.eot_token_id == 4


def test_lm_evals_local_completions_against_the_server_scores_as_in_process(char_run, in_process):
    """lm-eval's own `local-completions` model (tokenizing through the server's /tokenize and
    /tokenizer_info) against a live `spmdgpt serve` gives the scores `spmdgpt lm-eval` gives in
    process (`in_process`): the shipped tasks (multiple choice and rolling log-likelihoods by echo
    + logprobs; greedy generation). lm-eval keeps max_length - 1 tokens for a prompt and asks for
    one token more, and its rolling windows are one token shorter than in process: so the run's
    RoPE model, read with its context of 64 in process, is served with 66 (max_length=66), and
    both score the same windows."""
    import lm_eval
    from lm_eval.tasks import TaskManager
    from test_serve import Served

    ours = in_process["out"]["results"]
    server = Served(char_run, "slots=4", "model.max_seq_len=66")
    try:
        model_args = {"base_url": f"{server.url}/v1/completions", "model": char_run.name, "max_length": 66,
                      "tokenizer_backend": "remote", "tokenized_requests": True, "num_concurrent": 1,
                      "max_retries": 1}
        # (spmdgpt's tasks only: indexing lm-eval's registry too takes 7 s)
        tasks = TaskManager(include_path=str(TASKS_DIR), include_defaults=False)
        theirs = lm_eval.simple_evaluate(model="local-completions", model_args=model_args, tasks=["shakespeare"],
                                         limit=3, bootstrap_iters=0, task_manager=tasks)["results"]
    finally:
        code, err = server.close()
    assert code == 0, err[-2000:]
    compared = 0
    for task in ("shakespeare_next_line", "shakespeare_ppl", "shakespeare_speaker"):
        for metric, value in ours[task].items():
            if metric.endswith(",none") and "stderr" not in metric:
                assert theirs[task][metric] == pytest.approx(value, rel=1e-5), (task, metric)
                compared += 1
    assert compared >= 6 and ours["shakespeare_ppl"]["word_perplexity,none"] > 1
