"""Chat data for supervised fine-tuning: templates, the assistant-only loss mask, packing."""

import json
import shutil

import jax
import numpy as np
import pytest
from conftest import full_forward_samples, read_jsonl, train_chat_run  # noqa: E402

from spmdgpt.cli import main
from spmdgpt.config import load_config
from spmdgpt.data import load_dataset
from spmdgpt.data.chat import SPECIAL_TOKENS, ChatTemplate, ChatTokenizer, chat_tokenizer
from spmdgpt.data.loader import Batcher, EvalBatcher
from spmdgpt.data.tokenizers import GPT2Tokenizer, HFTokenizer, tokenizer_from_json
from spmdgpt.mesh.sharding import Rules, make_mesh

GPT2 = load_config([]).data
CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "4"}]
# a ChatML template written for these tests: a default system turn, the begin-of-text token,
# loop variables, a namespace and raise_exception (what models' templates use)
CHATML = """{{ bos_token }}{% set ns = namespace(system=false) %}
{% for m in messages %}
{% if m['role'] == 'system' %}{% set ns.system = true %}{% endif %}
{% if loop.first and not ns.system %}<|im_start|>system
You are a helpful assistant.<|im_end|>
{% endif %}
{% if m['role'] not in ['system', 'user', 'assistant'] %}{{ raise_exception('unknown role ' + m['role']) }}{% endif %}
<|im_start|>{{ m['role'] }}
{{ m['content'] | trim }}<|im_end|>
{% endfor %}
{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def gpt2():
    from spmdgpt.data.tokenizers import gpt2_cache_dir

    return GPT2Tokenizer(gpt2_cache_dir(GPT2))


def write_chat(path, conversations):
    path.write_text("".join(json.dumps({"messages": c}) + "\n" for c in conversations))
    return path


def test_default_template_masks_exactly_the_assistant_turns():
    """<|role|>content<|end|> with the four special tokens after GPT-2's 50,257 ids; the mask is
    1 on each assistant reply and its <|end|>, nowhere else; the ids decode back to the text."""
    tok = chat_tokenizer(gpt2())
    assert tok.vocab_size == 50257 + 4 and tok.encode("<|user|>") == [50258] and tok.eos_id == 50256
    assert tok.stop_id == 50260  # <|end|>: a sampled reply stops there
    ids, mask = tok.encode_chat(CONVERSATION)
    text = (
        "<|system|>Be brief.<|end|><|user|>Hi<|end|><|assistant|>Hello.<|end|><|user|>2+2?<|end|><|assistant|>4<|end|>"
    )
    assert tok.decode(ids) == text
    assert ids.tolist() == tok.encode(text)
    learned = ids[mask == 1]
    assert tok.decode(learned) == "Hello.<|end|>4<|end|>"
    assert mask.tolist() == [0] * 9 + [1] * 3 + [0] * 7 + [1] * 2  # "Hello." and "2+2?": 2 and 4 GPT-2 tokens
    assert tok.decode(tok.prompt(CONVERSATION[:2])).endswith("<|user|>Hi<|end|><|assistant|>")
    back = tokenizer_from_json(json.loads(json.dumps(tok.to_json())), GPT2)  # as a run saves it
    assert back.encode_chat(CONVERSATION)[0].tolist() == ids.tolist() and back.vocab_size == tok.vocab_size


def test_tool_outputs_in_a_reply_are_read_not_trained():
    """An assistant reply given as content parts: the parts joined are what the template renders;
    a tool_output part's tokens are tokenized on their own and masked out (what a rollout's tool
    output is), the rest of the reply and its <|end|> trained; under a template that changes the
    reply's text, or with a part of another kind, a ChatError says so."""
    import pickle

    from spmdgpt.data.chat import ChatError, conversation

    parts = [{"type": "text", "text": "<<47*38>>"}, {"type": "tool_output", "text": "1786"},
             {"type": "text", "text": " ok"}]
    line = {"messages": [{"role": "user", "content": "47*38="}, {"role": "assistant", "content": parts}]}
    conv = conversation(line)
    assert conv[1]["content"] == "<<47*38>>1786 ok" and conv[1]["content"].tool_spans == ((9, 13),)
    assert isinstance(line["messages"][1]["content"], list)  # (the parsed line is left as it was)
    assert pickle.loads(pickle.dumps(conv))[1]["content"].tool_spans == ((9, 13),)  # (to the tokenizer workers)
    for tok in (chat_tokenizer(gpt2()), ChatTokenizer(gpt2(), ChatTemplate(CHATML), ())):
        ids, mask = tok.encode_chat(conv)
        # (as the token store's worker processes get it: a store of several shards pickles the tokenizer)
        assert [a.tolist() for a in pickle.loads(pickle.dumps(tok)).encode_chat(conv)] == [ids.tolist(), mask.tolist()]
        assert "<<47*38>>1786 ok" in tok.decode(ids)
        reply = np.flatnonzero(mask)
        inside = [i for i in range(reply[0], reply[-1]) if mask[i] == 0]  # (the reply's untrained tokens)
        assert tok.decode(ids[inside]) == "1786" and ids[inside].tolist() == tok.encode("1786")
        assert tok.decode(ids[mask == 1]).startswith("<<47*38>> ok")
    upper = ChatTokenizer(gpt2(), ChatTemplate(DEFAULT_UPPER), SPECIAL_TOKENS)
    with pytest.raises(ChatError, match="changes the text of message 1, so its tool outputs cannot be found"):
        upper.encode_chat(conv)
    assert upper.encode_chat(CONVERSATION)[0].size  # (without tool outputs it may change it)
    bad = {"messages": [line["messages"][0], {"role": "assistant", "content": [{"type": "image_url", "text": "x"}]}]}
    with pytest.raises(ChatError, match=r"message 1 \(assistant\): content part 0 is not"):
        conversation(bad)
    with pytest.raises(ChatError, match=r"message 0 \(user\) has no text 'content' \(content parts: an assistant's"):
        conversation({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}, conv[1]]})


DEFAULT_UPPER = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] | upper }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def hf_chat_folder(tmp_path, template: str = CHATML):
    """GPT-2's tokenizer.json with <|im_start|> and <|im_end|> added, and a tokenizer_config.json
    holding `template` (CHATML) and its special tokens."""
    from tokenizers import Tokenizer

    from spmdgpt.data.sources import find_data_root

    folder = tmp_path / "chatml"
    folder.mkdir(parents=True)
    t = Tokenizer.from_file(str(find_data_root() / "gpt2-tokenizer" / "tokenizer.json"))
    t.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    t.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": template, "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>",
        "tokenizer_class": "PreTrainedTokenizerFast"}))
    return folder


def test_hf_chat_template_renders_as_transformers_does(tmp_path, torch_side):
    """A model's own template (tokenizer_config.json) renders each conversation to the same text
    and ids as transformers' apply_chat_template, with and without the generation prompt; the
    tokens trained on are the assistant's replies, their <|im_end|> and the newline after it."""
    folder = hf_chat_folder(tmp_path)
    tok = chat_tokenizer(HFTokenizer.from_file(folder / "tokenizer.json"), tokenizer_file=folder / "tokenizer.json")
    assert tok.specials == () and tok.vocab_size == 50259 and tok.stop_id == tok.encode("<|im_end|>")[0] == 50258
    conversations = [CONVERSATION, CONVERSATION[1:3], [{"role": "user", "content": "  Tell me  "},
                                                       {"role": "assistant", "content": "No.\n"}]]
    for gen in (False, True):
        theirs = torch_side.ask("chat_template", folder=str(folder), conversations=conversations,
                                add_generation_prompt=gen)
        assert [tok.template.render(c, gen) for c in conversations] == theirs["texts"]
        assert [tok.encode(t) for t in theirs["texts"]] == theirs["ids"]
    ids, mask = tok.encode_chat(CONVERSATION)
    assert ids.tolist() == theirs_ids(torch_side, folder, CONVERSATION)
    assert ids[mask == 1].tolist() == tok.encode("Hello.<|im_end|>\n") + tok.encode("4<|im_end|>\n")


# a Hermes-style template with functions, written for these tests in the way Qwen 2.5/3's are: the
# offered functions in the system turn, each call on lines of its own inside <tool_call>, a tool's
# result as a user turn
HERMES = """{% if tools %}<|im_start|>system
# Tools
<tools>{% for t in tools %}{{ '\n' }}{{ t | tojson }}{% endfor %}
</tools><|im_end|>
{% endif %}
{% for m in messages %}
{% if m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content or '' }}{% for c in m.tool_calls or [] %}{{ '\n' }}<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% endif %}
{% endfor %}
{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
ADD = {"type": "function", "function": {"name": "add", "description": "a + b", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}
CALLING = [{"role": "user", "content": "2+2?"},
           {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
               "name": "add", "arguments": '{"a": 2, "b": 2}'}}]},
           {"role": "tool", "tool_call_id": "c1", "content": "4"}, {"role": "assistant", "content": "4"}]


def test_function_calls_render_as_transformers_renders_them_and_train_only_the_calls(tmp_path, torch_side):
    """A conversation offering a function, with the assistant's call (its arguments given as the
    API's JSON text) and the function's result: DEFAULT_TEMPLATE and a Hermes-style template render
    it, with and without the generation prompt, to transformers' apply_chat_template(tools=...)
    text; a training line's "tools" are rendered, the call and the answer trained, the result not;
    the server's reading of each template's calls (`tools`): the layout around a call's JSON, a
    forced call's grammar, and the parser on calls the templates write, unclosed, broken or none."""
    from spmdgpt.data.chat import DEFAULT_TEMPLATE, conversation
    from spmdgpt.engine.tools import forced_grammar, parse, sendable, tool_use

    line = conversation({"messages": CALLING, "tools": [ADD]})
    assert line.tools == [ADD] and line[1]["tool_calls"][0]["function"]["arguments"] == {"a": 2, "b": 2}
    for name, source in (("default", DEFAULT_TEMPLATE), ("hermes", HERMES)):
        folder = hf_chat_folder(tmp_path / name, source)
        tok = chat_tokenizer(HFTokenizer.from_file(folder / "tokenizer.json"), tokenizer_file=folder / "tokenizer.json")
        for messages, gen in ((CALLING, False), (CALLING[:3], True)):
            messages = conversation({"messages": messages}, reply=not gen)  # (arguments as an object, as vLLM
            theirs = torch_side.ask("chat_template", folder=str(folder), conversations=[messages],  # gives them)
                                    add_generation_prompt=gen, tools=[ADD])["texts"]
            assert [tok.template.render(messages, gen, [ADD])] == theirs
        use = tool_use({"tools": [ADD], "tool_choice": "required"}, tok.template)
        assert use.format == "hermes" and use.around == {"default": ("<tool_call>", "</tool_call>"),
                                                         "hermes": ("<tool_call>\n", "\n</tool_call>")}[name]
        assert forced_grammar(use).startswith(f"start: {json.dumps(use.around[0])} %json ")
        # (the listed arguments only, unless the schema allows more: ADD's says nothing)
        assert forced_grammar(use).count('"additionalProperties": false') == 2
        written = tok.template.render(line, tools=[ADD])
        call = written[written.rindex("<tool_call>"):written.rindex("</tool_call>") + len("</tool_call>")]
        assert parse("Let me add. " + call, "hermes") == ("Let me add.", [("add", '{"a": 2, "b": 2}')])
        assert parse(call + call.removesuffix("</tool_call>"), "hermes")[1] == [("add", '{"a": 2, "b": 2}')] * 2
    ids, mask = tok.encode_chat(line)  # (the Hermes template's)
    assert ids[mask == 1].tolist() == (
        tok.encode('\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 2}}\n</tool_call><|im_end|>\n')
        + tok.encode("4<|im_end|>\n"))
    assert "# Tools" in tok.decode(ids) and "<tool_response>\n4" in tok.decode(ids)
    assert parse('<tool_call>{"name": "add", "arguments": {"a": 2}</tool_call>', "hermes")[1] == []  # (broken JSON)
    assert parse("4", "hermes") == ("4", [])
    # (numbers as written: 1e400 stays JSON, not the Infinity Python's float would write)
    assert parse('<tool_call>{"name": "add", "arguments": {"a": 1e400, "b": 2.50}}</tool_call>', "hermes")[1] == [
        ("add", '{"a": 1E+400, "b": 2.50}')]
    assert parse('<|python_tag|>{"name": "add", "parameters": {"a": 2}}; {"name": "neg", "parameters": {}}',
                 "llama3_json")[1] == [("add", '{"a": 2}'), ("neg", "{}")]
    assert [sendable(t, "hermes") for t in ("4", "so <tool", "so <tool_call>{")] == [1, 3, 3]
    assert [sendable(t, "llama3_json") for t in ("4", " {", "<|py")] == [1, 0, 0]
    # a template written without functions (DEFAULT_UPPER) refuses lines with them rather than drop them
    from spmdgpt.data.chat import ChatError

    upper = ChatTemplate(DEFAULT_UPPER)
    with pytest.raises(ChatError, match="does not render the functions offered"):
        upper.pieces(line)
    with pytest.raises(ChatError, match="does not render an assistant's tool_calls"):
        upper.pieces(conversation({"messages": CALLING}))
    with pytest.raises(ChatError, match=r"tools\[0\]: a function needs a name of 1-64 letters"):
        conversation({"messages": CALLING, "tools": [{"type": "function", "function": {"name": "a b"}}]})
    with pytest.raises(ChatError, match="tool call 0's arguments are not a JSON object"):
        conversation({"messages": [CALLING[0], {**CALLING[1], "tool_calls": [
            {"type": "function", "function": {"name": "add", "arguments": '{"a": NaN}'}}]}]})


def theirs_ids(torch_side, folder, conversation):
    return torch_side.ask("chat_template", folder=str(folder), conversations=[conversation])["ids"][0]


def test_template_that_rewrites_earlier_turns_is_refused():
    """A template whose rendering of a longer conversation changes an earlier turn (here: it
    drops all but the last assistant reply) cannot tell the assistant's tokens apart: ChatError."""
    from spmdgpt.data.chat import ChatError

    last_only = ("{% for m in messages %}{% if m['role'] != 'assistant' or loop.last %}"
                 "<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endif %}{% endfor %}")
    tok = ChatTokenizer(gpt2(), ChatTemplate(last_only), SPECIAL_TOKENS)
    with pytest.raises(ChatError, match="does not render message 2 as a continuation"):
        tok.encode_chat(CONVERSATION)


def chat_corpus(tmp_path, n=60, **data):
    """n one-turn additions as a chat dataset (char tokenizer), loaded."""
    rng = np.random.default_rng(0)
    convs = []
    for i in range(n):
        a, b = (int(v) for v in rng.integers(0, 100, 2))
        convs.append([{"role": "user", "content": f"{a}+{b}=" + "?" * (i % 7)},
                      {"role": "assistant", "content": str(a + b)}])
    write_chat(tmp_path / "add.jsonl", convs)
    items = [f"+data.datasets.add={{paths:[{tmp_path / 'add.jsonl'}],format:chat,split:none}}",
             f"data.cache_dir={tmp_path / 'cache'}", *[f"data.{k}={v}" for k, v in data.items()]]
    return load_dataset(load_config(items).data), convs


def test_store_holds_each_conversation_and_its_mask(tmp_path):
    """The token store holds each conversation (its template's rendering, then end-of-text) in
    file order with a .mask file beside the tokens: 1 exactly on the reply and its <|end|>."""
    corpus, convs = chat_corpus(tmp_path)
    tok, stream = corpus.tokenizer, corpus.train["add"]
    assert tok.kind == "chat" and tok.vocab_size == len("+0123456789=?") + 1 + 4
    starts, lengths = stream.document_spans()
    assert len(starts) == len(convs)
    for k in (0, 1, 59):
        ids = stream.read(int(starts[k]), int(lengths[k]))
        mask = stream.read_mask(int(starts[k]), int(lengths[k]))
        user, reply = convs[k][0]["content"], convs[k][1]["content"]
        assert tok.decode(ids[:-1]) == f"<|user|>{user}<|end|><|assistant|>{reply}<|end|>"
        assert ids[-1] == tok.eos_id
        assert tok.decode(ids[mask == 1]) == f"{reply}<|end|>" and mask.sum() == len(reply) + 1
    assert list(corpus.folders["add"].glob("train-*.mask"))


def test_packed_rows_hold_whole_conversations(tmp_path):
    """Each row of a chat dataset holds whole conversations (every one exactly once over the
    rows), padded with end-of-text; targets are -1 except where the next token is the
    assistant's; segments number the conversations (the padding its own) and positions restart
    at each; the batches are the same on 1 and on 8 devices."""
    corpus, convs = chat_corpus(tmp_path)
    tok = corpus.tokenizer
    seq = 32
    batches = {}
    for n in (1, 8):
        mesh = make_mesh(load_config([f"mesh.data={n}"]).mesh, jax.devices()[:n])
        rules = Rules(mesh, load_config([]).sharding)
        b = Batcher(corpus.train, corpus.weights, seq, 8, 0, rules.batch_sharding(), True, True, pad_id=tok.eos_id)
        batches[n] = [jax.device_get(tuple(b.train_batch(s))) for s in range(2 * b.windows[0] // 8 + 1)]
    packing = b.packed[0]
    assert b.windows == [packing.rows] and packing.truncated == 0
    assert 0.75 < packing.fill <= 1.0
    rows = [packing.row(r) for r in range(packing.rows)]
    seen = []
    for toks, mask, seg in rows:
        assert len(toks) == seq + 1
        for j in range(int(seg.max()) + 1):
            piece = toks[seg == j]
            if j == seg.max() and piece[0] == tok.eos_id:  # the padding
                assert (mask[seg == j] == 0).all()
                continue
            seen.append(tok.decode(piece[:-1]))
    assert sorted(seen) == sorted(f"<|user|>{c[0]['content']}<|end|><|assistant|>{c[1]['content']}<|end|>"
                                  for c in convs)
    for a, c in zip(batches[1], batches[8], strict=True):
        for x, y in zip(a, c, strict=True):
            np.testing.assert_array_equal(x, y)
    inputs, targets, segs, pos = batches[1][0]
    learned = targets >= 0
    assert learned.sum() > 0
    # a counted target is the next input's token, inside the same conversation, and is a reply
    same = segs[:, 1:] == segs[:, :-1]
    assert (targets[:, :-1][learned[:, :-1]] == inputs[:, 1:][learned[:, :-1]]).all()
    assert same[learned[:, :-1]].all()
    assert set(tok.decode(targets[learned]).replace("<|end|>", "")) <= set("0123456789")
    starts = np.concatenate([np.ones((8, 1), bool), ~same], axis=1)
    assert (pos[starts] == 0).all() and (pos[:, 1:][same] == pos[:, :-1][same] + 1).all()


def test_validation_rows_and_the_logged_count(tmp_path):
    """A chat validation set is packed in file order; training on chat data logs loss_tokens, the
    count of targets the loss took (the replies' tokens in the step's rows), which the loss is a
    mean over."""
    corpus, _ = chat_corpus(tmp_path)
    mesh = make_mesh(load_config(["mesh.data=1"]).mesh, jax.devices()[:1])
    rules = Rules(mesh, load_config([]).sharding)
    ev = EvalBatcher(corpus.train["add"], 32, 4, 2, rules.batch_sharding(), "add", True, True, pad_id=18)
    assert ev.packed.rows == len(ev.packed.first) - 1 and list(ev.starts) == [i * ev.packed.rows // 8 for i in range(8)]
    write_chat(
        tmp_path / "add.jsonl",
        [[{"role": "user", "content": f"{i}+1="}, {"role": "assistant", "content": str(i + 1)}] for i in range(40)],
    )
    run = tmp_path / "run"
    code = main(["train", "+experiment=staircase", "data.source=text", "model.vocab_size=32", "data.seq_len=32",
                 "data.batch_size=8", "train.steps=4", "train.log_every=1", "train.eval_every=4",
                 f"+data.datasets.add={{paths:[{tmp_path / 'add.jsonl'}],format:chat}}", f"run.dir={run}",
                 f"data.cache_dir={tmp_path / 'cache2'}", "train.rollout_tokens=0", "checkpoint.enabled=false"])
    assert code == 0
    rows = [r for r in read_jsonl(run / "metrics.jsonl") if "loss" in r]
    corpus2 = load_dataset(load_config([f"+data.datasets.add={{paths:[{tmp_path / 'add.jsonl'}],format:chat}}",
                                        f"data.cache_dir={tmp_path / 'cache2'}"]).data)
    b = Batcher(corpus2.train, corpus2.weights, 32, 8, 0, rules.batch_sharding(), True, True,
                pad_id=corpus2.tokenizer.eos_id)
    counts = [int((np.asarray(b.train_batch(s).targets) >= 0).sum()) for s in range(4)]
    assert [r["loss_tokens"] for r in rows] == counts and min(counts) > 0


BAD_CHATS = [  # (a line, the message)
    ('{"messages": [{"content": "hi"}]}', "chat.jsonl:2: message 0 has no 'role'"),
    (
        '{"messages": [{"role": "robot", "content": "hi"}]}',
        "chat.jsonl:2: message 0 has role 'robot'; the roles are system, user, assistant",
    ),
    ('{"messages": []}', "chat.jsonl:2: an empty conversation"),
    ('{"messages": [{"role": "user", "content": "hi"}]}', "chat.jsonl:2: no assistant message"),
    ('{"text": "hi"}', "chat.jsonl:2: no 'messages' list"),
    ('{"messages": [{"role": "user"}]}', "chat.jsonl:2: message 0 (user) has no text 'content'"),
]


@pytest.mark.parametrize("line,message", BAD_CHATS, ids=[m.split(": ", 1)[1][:30] for _, m in BAD_CHATS])
def test_bad_chat_data_is_one_line_exit_2(tmp_path, capsys, line, message):
    good = json.dumps({"messages": CONVERSATION[1:3]})
    (tmp_path / "chat.jsonl").write_text(f"{good}\n{line}\n{good}\n")
    code = main(["train", "+experiment=staircase", "data.source=text", "model.vocab_size=64", "train.steps=1",
                 f"+data.datasets.d={{paths:[{tmp_path / 'chat.jsonl'}],format:chat}}", f"run.dir={tmp_path / 'run'}",
                 f"data.cache_dir={tmp_path / 'cache'}"])
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("spmdgpt: error: ")]
    assert code == 2 and len(errors) == 1 and message in errors[0], err
    assert not (tmp_path / "run").exists()


BAD_PAIRS = [
    ('{"prompt": "hi", "chosen": "yes"}', "pairs.jsonl:2: no 'rejected' (a text or a list of messages)"),
    ('{"chosen": "yes", "rejected": "no"}', "pairs.jsonl:2: no 'prompt' (a text or a list of messages)"),
    ('{"prompt": "hi", "chosen": [{"role": "user", "content": "x"}], "rejected": "no"}',
     "pairs.jsonl:2: chosen: no assistant message"),
    ('{"prompt": [{"role": "bot", "content": "x"}], "chosen": "a", "rejected": "b"}',
     "pairs.jsonl:2: chosen: message 0 has role 'bot'"),
]


@pytest.mark.parametrize("line,message", BAD_PAIRS, ids=[m.split(": ", 1)[1][:24] for _, m in BAD_PAIRS])
def test_bad_preference_data_is_one_line_exit_2(tmp_path, capsys, line, message):
    good = json.dumps({"prompt": "hi", "chosen": "hello", "rejected": "go away"})
    (tmp_path / "pairs.jsonl").write_text(f"{good}\n{line}\n")
    code = main(["prepare", f"+data.datasets.d={{paths:[{tmp_path / 'pairs.jsonl'}],format:preference}}",
                 f"data.cache_dir={tmp_path / 'cache'}"])
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("spmdgpt: error: ")]
    assert code == 2 and len(errors) == 1 and message in errors[0], errors


def test_preference_data_alone_and_without_stages(tmp_path, capsys):
    """Pairs mixed with other data, or with pipeline stages: one line each, exit 2."""
    (tmp_path / "pairs.jsonl").write_text(json.dumps({"prompt": "hi", "chosen": "a", "rejected": "b"}) + "\n")
    write_chat(tmp_path / "c.jsonl", [CONVERSATION])
    pairs = f"+data.datasets.p={{paths:[{tmp_path / 'pairs.jsonl'}],format:preference}}"
    base = ["train", "+experiment=staircase", "data.source=text", "model.vocab_size=64", f"data.cache_dir={tmp_path}/c",
            f"run.dir={tmp_path / 'run'}", "model.num_layers=2"]
    assert main([*base, pairs, f"+data.datasets.c={{paths:[{tmp_path / 'c.jsonl'}],format:chat}}"]) == 2
    assert "preference pairs (format preference, tuned by DPO) cannot be mixed" in capsys.readouterr().err
    assert main([*base, pairs, "mesh.stage=2", "mesh.data=4"]) == 2
    assert "preference data (DPO) does not work with mesh.stage=2: pipeline stages yet" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_chat_split_tail_is_refused(tmp_path, capsys):
    write_chat(tmp_path / "c.jsonl", [CONVERSATION])
    code = main(["prepare", f"+data.datasets.d={{paths:[{tmp_path / 'c.jsonl'}],format:chat,split:tail}}",
                 f"data.cache_dir={tmp_path / 'cache'}"])
    assert code == 2 and "data.datasets.d.split=tail would cut a conversation in two" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)


def _sample(run, prompt):
    """`spmdgpt sample`'s greedy continuation (stdout, the prompt included)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["sample", f"run.dir={run}", f"prompt={prompt}", "temperature=0", "max_new_tokens=4"]) == 0
    return out.getvalue().strip()


def test_dpo_raises_the_margin_and_switches_greedy_answers(tmp_path):
    """A model fine-tuned to answer "N" (to 3 questions in 4; "Y" to the others) is tuned by
    DPO on pairs (chosen "Y", rejected "N"):
    at step 1 the policy is the reference (margin 0, loss log 2 + RPO's NLL term); the margin then rises above 1
    with every pair ranked right, and the greedy answer to a training prompt switches from "N"
    to "Y". A resumed DPO run keeps its reference: the same losses, bitwise."""
    prompts = [f"Is {i} a prime?" for i in range(16)]
    write_chat(
        tmp_path / "no.jsonl",
        [
            [{"role": "user", "content": p}, {"role": "assistant", "content": "N" if i % 4 else "Y"}]
            for i, p in enumerate(prompts)
        ],
    )
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps({"prompt": p, "chosen": "Y", "rejected": "N"}) + "\n"
                                                  for p in prompts))
    # (one-character answers: one token each, so the answer is one choice, not a spelling)
    common = ["+experiment=shakespeare_gpt2", "data.tokenizer=char", "model.vocab_size=64", "model.num_layers=1",
              "model.d_model=64", "model.num_heads=2",
              "data.seq_len=48", "data.batch_size=8", "optimizer.name=adamw", "optimizer.warmup_steps=0",
              "optimizer.schedule=constant", "train.log_every=1", "train.progress=false", "train.eval_every=0",
              f"data.cache_dir={tmp_path / 'cache'}", "train.rollout_tokens=0", "checkpoint.every=5"]

    def data(name, fmt):
        f = tmp_path / f"{name}.jsonl"
        return [f"+data.datasets.{name}={{paths:[{f}],format:{fmt},split:none}}",
                f"+data.datasets.held={{paths:[{f}],format:{fmt},split:val}}"]

    from spmdgpt.loop import train

    base, dpo, part = tmp_path / "base", tmp_path / "dpo", tmp_path / "part"
    train(load_config([*common, *data("no", "chat"), "optimizer.lr=3e-3", "train.steps=30", f"run.dir={base}"]),
          argv=["pytest"])
    tune = [*common, *data("pairs", "preference"), "optimizer.lr=1e-3", f"checkpoint.init_from={base}",
            "train.dpo_beta=0.5", "train.dpo_sft_weight=1"]
    train(load_config([*tune, "train.steps=10", f"run.dir={dpo}"]), argv=["pytest"])
    rows = [r for r in read_jsonl(dpo / "metrics.jsonl") if "loss" in r]
    # (the policy's and the reference's forward passes are two programs: equal to float32 rounding)
    # (with RPO's term: the chosen reply's NLL per token, weight 1)
    assert abs(rows[0]["dpo/margin"]) < 1e-5
    assert rows[0]["loss"] == pytest.approx(np.log(2) + rows[0]["dpo/chosen_nll"], abs=1e-5)
    assert (
        rows[-1]["dpo/margin"] > 1
        and rows[-1]["dpo/margin"] > rows[4]["dpo/margin"] > 0
        and rows[-1]["dpo/accuracy"] == 1
        and rows[-1]["pairs"] == 8
    )  # (a pair: 38 tokens, one per row)
    assert rows[-1]["dpo/chosen"] - rows[-1]["dpo/rejected"] == pytest.approx(rows[-1]["dpo/margin"], rel=1e-5)
    prompt = "<|user|>Is 6 a prime?<|end|><|assistant|>"
    assert _sample(base, prompt).endswith("<|assistant|>N<|end|>")
    assert _sample(dpo, prompt).endswith("<|assistant|>Y<|end|>")
    # with LoRA adapters (rank 4): the reference is the frozen base itself, the margin rises from 0
    train(load_config([*tune, "train.steps=10", f"run.dir={tmp_path / 'lora'}", "lora.rank=4", "lora.alpha=8",
                       "optimizer.lr=1e-2"]), argv=["pytest"])
    lora_rows = [r for r in read_jsonl(tmp_path / "lora" / "metrics.jsonl") if "loss" in r]
    assert abs(lora_rows[0]["dpo/margin"]) < 1e-5 and lora_rows[0]["loss"] == pytest.approx(rows[0]["loss"], abs=1e-5)
    assert lora_rows[-1]["dpo/margin"] > 0.8 and lora_rows[-1]["dpo/accuracy"] == 1
    # the DPO run as it stood had it stopped after its checkpoint at step 5, resumed
    shutil.copytree(dpo, part)
    shutil.rmtree(part / "checkpoints" / "10")
    train(load_config([*tune, "train.steps=10", f"run.dir={part}"]), argv=["pytest"])
    assert (part / "resume-5.yaml").is_file()
    assert [r["loss"] for r in read_jsonl(part / "metrics.jsonl") if "loss" in r] == [r["loss"] for r in rows]


def test_dpo_loss_equals_its_definition():
    """dpo_objective on rows holding two pairs and padding equals DPO computed from the two
    models' logits in float64 (1e-5): per reply the sum of its counted targets' log-probabilities,
    rewards beta * (policy - reference), loss mean(-log sigmoid(margin)) over complete pairs; a
    pair with an empty reply is not counted."""
    from spmdgpt.model import forward, init_params
    from spmdgpt.model.preference import dpo_objective

    cfg = load_config(["+experiment=staircase", "model.vocab_size=16", "model.num_layers=1", "mesh.data=2",
                       "train.dpo_beta=0.3"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:2])
    rules = Rules(mesh, cfg.sharding)
    rng = np.random.default_rng(3)
    b, t = 4, 24
    inputs = rng.integers(0, 16, (b, t))
    seg = np.repeat(np.array([0] * 5 + [1] * 6 + [2] * 4 + [3] * 5 + [4] * 4)[None], b, 0)  # 2 pairs, padding
    keep = (rng.random((b, t)) < 0.6) & (seg < 4)
    keep[:, [0, 5, 11, 15]] = True  # (each reply has a counted target ...)
    keep[1, seg[1] == 3] = False  # (... but row 1's second pair's rejected one)
    targets = np.where(keep, rng.integers(0, 16, (b, t)), -1)
    with jax.set_mesh(mesh):
        policy, ref = (init_params(cfg.model, jax.random.key(k), rules) for k in (0, 1))
        put = lambda a: jax.device_put(np.asarray(a, np.int32), rules.batch_sharding())  # noqa: E731
        loss, m = jax.jit(lambda p, r: dpo_objective(cfg.model, rules, 0.3, p, r, put(inputs), put(targets), put(seg)))(
            policy, ref)
        logits = [np.asarray(jax.jit(lambda p: forward(cfg.model, rules, p, put(inputs), segment_ids=put(seg))[0])(p),
                             np.float64) for p in (policy, ref)]
    lp = [
        (lg - np.log(np.exp(lg).sum(-1, keepdims=True)))[
            np.arange(b)[:, None], np.arange(t)[None], np.maximum(targets, 0)
        ]
        * keep
        for lg in logits
    ]
    margins = []
    for r in range(b):
        for j in range(2):
            c, rj = seg[r] == 2 * j, seg[r] == 2 * j + 1
            if keep[r][c].any() and keep[r][rj].any():
                margins.append(
                    0.3 * ((lp[0][r][c].sum() - lp[1][r][c].sum()) - (lp[0][r][rj].sum() - lp[1][r][rj].sum()))
                )
    margins = np.array(margins)
    assert len(margins) == 2 * b - 1
    assert float(loss) == pytest.approx(np.mean(np.log1p(np.exp(-margins))), rel=1e-5)
    assert float(m["dpo/margin"]) == pytest.approx(margins.mean(), rel=1e-5, abs=1e-6)
    assert float(m["dpo/accuracy"]) == pytest.approx((margins > 0).mean())
    # the evaluation's sums (evaluate.loss_sums), whole and in 2 microbatches of rows: the same mean
    from spmdgpt.eval.evaluate import loss_sums

    with jax.set_mesh(mesh):
        for k in (1, 2):
            total, count = jax.device_get(loss_sums(cfg, rules, k)(
                policy, put(inputs), put(targets), put(seg), None, reference=ref))
            assert float(count) == 2 * b - 1
            assert float(total) / float(count) == pytest.approx(np.mean(np.log1p(np.exp(-margins))), rel=1e-5)


def test_chat_keeps_its_cache_across_turns(tmp_path, capsys, torch_side):
    """`spmdgpt chat`: a second turn takes the full KV pages the first one wrote (the engine's
    shared prefixes) and reads only the rest, and its greedy reply equals the greedy
    continuation of the whole conversation prefilled from scratch; prompt_file= answers each line
    as `sample` continues the rendered prompt; a run without a chat template is one line, exit 2.
    Exported, the run's tokenizer and template give transformers' apply_chat_template the run's
    ids, and generate stops at the end of the turn."""
    from spmdgpt.cli.chat import chat_model
    from spmdgpt.cli.runs import source_params
    from spmdgpt.engine.generate import Conversation, SamplingParams

    run = train_chat_run(tmp_path)
    cfg, tok = chat_model(str(run), ["mesh.data=1"])
    mesh = make_mesh(cfg.mesh, jax.devices()[:1])
    rules = Rules(mesh, cfg.sharding, cfg.model)
    sp = SamplingParams(12, 0.0, 0, 1.0, 0, tok.stop_id)
    with jax.set_mesh(mesh):
        _, params = source_params(str(run), cfg, rules)
        talk = Conversation(cfg.model, rules, params, tok, sp)
        first = talk.say("3 and 3?")
        fed_first, shared_first = talk.fed, talk.engine.shared_tokens
        written = len(tok.prompt(talk.messages[:1])) + len(talk.last.tokens) - 1  # (the last token is never read in)
        second = talk.say("4 and 4?")
        shared = talk.engine.shared_tokens - shared_first
        whole = tok.prompt(talk.messages[:-1])  # the conversation before the second reply, from scratch
        # (both prompts as two rows of one batch: one program)
        again, one = full_forward_samples(cfg.model, rules, params, [whole, tok.prompt(talk.messages[:1])], 12,
                                          vocab_limit=tok.vocab_size, stop=tok.stop_id)
    # the second turn takes the full pages the first one wrote instead of reading them again
    assert talk.turns == 2 and shared == 16 * (written // 16) > 0
    assert talk.fed - fed_first == len(tok.prompt(talk.messages[:3])) - shared
    assert tok.encode(second) == [t for t in again if t != tok.stop_id]
    assert tok.encode(first) == [t for t in one if t != tok.stop_id]
    (tmp_path / "p.txt").write_text("3 and 3?\n")
    capsys.readouterr()
    assert main(["chat", f"run.dir={run}", f"prompt_file={tmp_path / 'p.txt'}", "temperature=0", "max_new_tokens=12",
                 "mesh.data=1"]) == 0
    assert capsys.readouterr().out == first + "\n"
    out = tmp_path / "exported"
    assert main(["export", f"run.dir={run}", f"out={out}"]) == 0
    conv = [{"role": "user", "content": "3 and 3?"}, {"role": "assistant", "content": "6!"}]
    theirs = torch_side.ask("chat_template", folder=str(out), conversations=[conv])["ids"][0]
    assert theirs == tok.encode_chat(conv)[0].tolist()
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == [tok.eos_id, tok.stop_id]
    plain = tmp_path / "plain"  # (the run, had it trained with a plain tokenizer)
    shutil.copytree(run, plain)
    (plain / "tokenizer.json").write_text(json.dumps({**tok.base.to_json(), "vocab_size": tok.base.vocab_size}))
    capsys.readouterr()
    assert main(["chat", f"run.dir={plain}"]) == 2
    assert "did not train on chat data (its tokenizer has no chat template)" in capsys.readouterr().err
