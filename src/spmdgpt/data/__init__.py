"""Data: sources -> tokenizer -> token store on disk (prepared once) -> per-process loader -> global batch."""

from spmdgpt.data.corpus import Corpus, load_dataset
from spmdgpt.data.loader import Batch, Batcher, EvalBatcher
from spmdgpt.data.store import TokenStream
from spmdgpt.data.tokenizers import (
    CharTokenizer,
    HFTokenizer,
    Tokenizer,
    load_tokenizer,
    save_tokenizer,
    tokenizer_from_json,
)

__all__ = ["Batch", "Batcher", "CharTokenizer", "Corpus", "EvalBatcher", "HFTokenizer", "TokenStream",
           "Tokenizer", "load_dataset", "load_tokenizer", "save_tokenizer", "tokenizer_from_json"]
