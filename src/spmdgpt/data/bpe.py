"""Train your own tokenizer: a byte-level BPE (GPT-2's pre-tokenization regex and byte alphabet)
on a sample of a corpus's training documents, with Hugging Face `tokenizers`.

The result is a `tokenizer.json` that `data.tokenizer=hf data.tokenizer_file=...` loads; its
end-of-text token is `<|endoftext|>`. Documents are streamed to the trainer (it keeps word
counts, not text), in the corpus's fixed order, so the same corpus and settings give the same
file. Compression is reported as bytes of UTF-8 text per token on held-out documents (the
validation split), beside GPT-2's, as nanochat reports for its tokenizer.
"""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional

from spmdgpt.config import DataConfig
from spmdgpt.data.sources import BadRecords, Source, documents
from spmdgpt.data.store import split_document

EOS = "<|endoftext|>"


def _split_texts(sources: List[Source], split: str, max_chars: int) -> Iterator[str]:
    """Texts of one split of the datasets (the split a store would give them), up to max_chars."""
    seen = 0
    for src in sources:
        for text, _ in documents(src, BadRecords()):
            for s, piece in split_document(text, src):
                if s != split:
                    continue
                if seen >= max_chars:
                    return
                piece = piece[: max_chars - seen]
                seen += len(piece)
                yield piece


def train_bpe(sources: List[Source], vocab_size: int, sample_chars: int, progress: bool = True):
    """A byte-level BPE `tokenizers.Tokenizer` with `vocab_size` entries (EOS included) trained
    on up to sample_chars characters of the training split."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], show_progress=progress,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_split_texts(sources, "train", sample_chars), trainer)
    return tok


def bytes_per_token(encode, texts: List[str]) -> float:
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    ntok = sum(len(encode(t)) for t in texts)
    return nbytes / max(ntok, 1)


def held_out(sources: List[Source], max_chars: int) -> List[str]:
    """Validation-split texts (up to max_chars) to measure compression on."""
    return list(_split_texts(sources, "val", max_chars))


def gpt2_encoder(cfg: DataConfig) -> Optional[Callable[[str], list]]:
    """tiktoken's GPT-2 encode_ordinary, or None when its files are not available offline."""
    from spmdgpt.config import ConfigError
    from spmdgpt.data.tokenizers import GPT2Tokenizer, gpt2_cache_dir

    try:
        return GPT2Tokenizer(gpt2_cache_dir(cfg)).encode
    except (ConfigError, OSError, ValueError):
        return None
