"""Data: sources -> tokenizer -> token store on disk (prepared once) -> per-process loader -> global batch.

Names are imported on first use: `prepare`'s worker processes import spmdgpt.data.store, and
that must not pull in JAX (the loader's import) in each of them.
"""

import importlib

_EXPORTS = {
    "Corpus": "spmdgpt.data.corpus", "load_dataset": "spmdgpt.data.corpus",
    "Batch": "spmdgpt.data.loader", "Batcher": "spmdgpt.data.loader", "EvalBatcher": "spmdgpt.data.loader",
    "TokenStream": "spmdgpt.data.stream",
    "CharTokenizer": "spmdgpt.data.tokenizers", "HFTokenizer": "spmdgpt.data.tokenizers",
    "Tokenizer": "spmdgpt.data.tokenizers", "load_tokenizer": "spmdgpt.data.tokenizers",
    "save_tokenizer": "spmdgpt.data.tokenizers", "tokenizer_from_json": "spmdgpt.data.tokenizers",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'spmdgpt.data' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
