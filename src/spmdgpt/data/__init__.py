"""Data: sources -> tokenizer -> token cache on disk -> per-process loader -> global batch."""

from spmdgpt.data.cache import Dataset, load_dataset
from spmdgpt.data.loader import Batcher
from spmdgpt.data.tokenizers import (
    CharTokenizer,
    Tokenizer,
    load_tokenizer,
    save_tokenizer,
    tokenizer_from_json,
)

__all__ = ["Batcher", "CharTokenizer", "Dataset", "Tokenizer", "load_dataset", "load_tokenizer",
           "save_tokenizer", "tokenizer_from_json"]
