"""gpt-oss's harmony chat format (`data.tokenizer=harmony`, spmdgpt.data.harmony): conversations
rendered by OpenAI's openai-harmony package, the loss mask on the replies, prompts, the reply's
final channel, the offline vocabulary, and a fine-tuned run that chats."""

import hashlib
import json
import sys

import numpy as np
import pytest

from spmdgpt.cli import main

pytest.importorskip("openai_harmony")
CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "4"}, {"role": "user", "content": "3+3?"},
                {"role": "assistant", "content": "6"}]


@pytest.fixture(scope="module")
def harmony(tmp_path_factory):
    import os

    os.environ.setdefault("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    from spmdgpt.data.harmony import HarmonyTokenizer

    return HarmonyTokenizer()


def test_conversations_render_as_openai_harmony_renders_them(harmony):
    """The ids are the package's own rendering of the same messages (harmony's system message,
    the system prompt as the developer's instructions, replies on the final channel); the mask
    is 1 on each reply from its channel header through its end mark (<|end|>, the last one's
    <|return|>) and nowhere else; the prompt ends at <|start|>assistant."""
    import openai_harmony as h

    enc = h.load_harmony_encoding(h.HarmonyEncodingName.HARMONY_GPT_OSS)
    conv = h.Conversation.from_messages([
        h.Message.from_role_and_content(h.Role.SYSTEM, h.SystemContent.new()),
        h.Message.from_role_and_content(h.Role.DEVELOPER, h.DeveloperContent.new().with_instructions("Be brief.")),
        h.Message.from_role_and_content(h.Role.USER, "2+2?"),
        h.Message.from_role_and_content(h.Role.ASSISTANT, "4").with_channel("final"),
        h.Message.from_role_and_content(h.Role.USER, "3+3?"),
        h.Message.from_role_and_content(h.Role.ASSISTANT, "6").with_channel("final")])
    ids, mask = harmony.encode_chat(CONVERSATION)
    assert ids.tolist() == list(enc.render_conversation_for_training(conv)) and len(ids) == 90
    assert harmony.decode(ids[mask == 1]) == ("<|channel|>final<|message|>4<|end|>"
                                              "<|channel|>final<|message|>6<|return|>")
    assert int(mask.sum()) == 10 and mask[-1] == 1 and mask[0] == 0
    prompt = harmony.prompt(CONVERSATION[:2])
    assert harmony.decode(prompt).endswith("<|start|>user<|message|>2+2?<|end|><|start|>assistant")
    assert ids[:len(prompt)].tolist() == prompt  # (the reply continues the prompt, token for token)
    assert (harmony.vocab_size, harmony.eos_id, harmony.stop_id) == (201_088, 199_999, 200_002)
    assert harmony.encode(harmony.decode(prompt)) == prompt  # (a hand-rendered prompt reads as its tokens)


def test_a_reply_reads_as_its_final_channel(harmony):
    """The reasoning (analysis channel) is left out of the reply; text that is no harmony message
    reads as it decodes, and while streaming a header not yet whole reads as nothing."""
    enc = harmony._enc
    ids = enc.encode("<|channel|>analysis<|message|>Two and two.<|end|><|start|>assistant<|channel|>final"
                     "<|message|>Four.<|return|>", allowed_special="all")
    assert harmony.reply_text(ids) == "Four."
    assert harmony.reply_text(harmony.encode("just text")) == "just text"
    assert harmony.reply_text(enc.encode("<|message|>odd<|message|>", allowed_special="all")) == "odd"
    assert harmony.reply_text(enc.encode("<|channel|>fin", allowed_special="all"), final=False) == ""
    assert harmony.reply_text(enc.encode("<|channel|>final<|message|>Fo", allowed_special="all"), final=False) == "Fo"


def test_the_vocabulary_is_the_pinned_file_checked(harmony, tmp_path, monkeypatch):
    """o200k_base.tiktoken comes from the bpe-openai wheel, sha256-checked; a damaged cached copy
    is replaced."""
    from spmdgpt.data import harmony as module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = module.vocabulary_dir()
    data = (folder / "o200k_base.tiktoken").read_bytes()
    assert hashlib.sha256(data).hexdigest() == module.O200K_SHA256 and len(data.splitlines()) == 199_998
    (folder / "o200k_base.tiktoken").write_bytes(data[:1000])
    assert hashlib.sha256((module.vocabulary_dir() / "o200k_base.tiktoken").read_bytes()).hexdigest() == \
        module.O200K_SHA256


def test_without_the_package_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "openai_harmony", None)  # (import fails)
    (tmp_path / "x.txt").write_text("hello")
    code = main(["train", "+experiment=staircase", "data.source=text", "data.tokenizer=harmony",
                 f"data.text_file={tmp_path / 'x.txt'}", f"run.dir={tmp_path / 'run'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not (tmp_path / "run").exists()
    assert err[-1] == ("spmdgpt: error: data.tokenizer=harmony needs the openai-harmony package: pip install "
                       "'spmdgpt[harmony]' (openai-harmony and bpe-openai, pinned)")


def test_fine_tuned_on_harmony_conversations_it_chats(harmony, tmp_path, capsys):
    """SFT on harmony-rendered conversations (2 steps of a one-layer, 32-wide model over the
    201,088 ids), then `spmdgpt chat`: the run's tokenizer is harmony again, the prompt harmony's, and the
    printed reply the reply's text (the final channel's, or its ordinary tokens': never a header)."""
    rows = [[{"role": "user", "content": f"{i} and {i}?"}, {"role": "assistant", "content": f"{2 * i}!"}]
            for i in range(20)]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"messages": c}) + "\n" for c in rows))
    run = tmp_path / "run"
    assert main(["train", "+experiment=staircase", "data.source=text", "data.tokenizer=harmony",
                 "model.vocab_size=201088", "model.num_layers=1", "model.d_model=32", "data.seq_len=32",
                 "data.batch_size=8", "train.steps=2", "train.eval_batches=1", "model.max_seq_len=256",
                 "train.rollout_tokens=0", "train.eval_every=0",
                 f"+data.datasets.c={{paths:[{tmp_path / 'c.jsonl'}],format:chat}}", f"run.dir={run}",
                 f"data.cache_dir={tmp_path / 'cache'}"]) == 0
    saved = json.loads((run / "tokenizer.json").read_text())
    assert (saved["kind"], saved["vocab_size"], len(saved)) == ("harmony", 201088, 3)  # (and its sha256)
    (tmp_path / "p.txt").write_text("3 and 3?\n")
    capsys.readouterr()
    assert main(["chat", f"run.dir={run}", f"prompt_file={tmp_path / 'p.txt'}", "max_new_tokens=6",
                 "temperature=0"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "<|" not in out[0]
    ids, mask = harmony.encode_chat(rows[0])
    assert np.asarray(ids).dtype == np.int64 and int(mask.sum()) == len(harmony.encode("0!")) + 4


def test_the_servers_chat_replies_are_the_final_channel(harmony):
    """`spmdgpt serve`'s text of a choice (`Backend.text`): a chat request's is the reply's final
    channel, streamed as it grows (nothing until the header is whole); a completion's is the
    tokens' text, headers and all."""
    from types import SimpleNamespace

    from spmdgpt.engine.server import Backend

    backend = SimpleNamespace(tok=harmony, stop_ids=(harmony.stop_id,))
    ids = harmony._enc.encode("<|channel|>final<|message|>Four, sir.<|return|>", allowed_special="all")
    assert Backend.text(backend, ids, [], True, chat=True) == ("Four, sir.", False)
    assert Backend.text(backend, ids, [","], True, chat=True) == ("Four", True)
    assert Backend.text(backend, ids[:2], [], False, chat=True) == ("", False)
    assert Backend.text(backend, ids, [], True) == ("<|channel|>final<|message|>Four, sir.", False)
