"""Where raw training data comes from: the synthetic staircase, or the documents of named
datasets (files, folders, globs or URLs through fsspec; txt / jsonl(.gz|.zst) / parquet).

A dataset's files are listed once (`list_files`: path, size, modification time; that listing
and the reading settings are what a token store is keyed by) and read as a stream of
documents (`documents`), one file after another in sorted order, holding one document (txt) or
one batch of records (jsonl, parquet) in memory at a time.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from spmdgpt.config import ConfigError, DataConfig, DataFormat, DatasetConfig, Split

SUFFIXES = {".txt": DataFormat.txt, ".text": DataFormat.txt, ".jsonl": DataFormat.jsonl,
            ".json": DataFormat.jsonl, ".ndjson": DataFormat.jsonl, ".parquet": DataFormat.parquet}
COMPRESSIONS = (".gz", ".zst", ".bz2", ".xz")

STAIRCASE_PERIOD = "012345678987654321"  # repeated: 0123456789876543210123456789...


def find_data_root(explicit: Optional[str] = None) -> Optional[Path]:
    """data.path, else $SPMDGPT_DATA, else the nearest `shared/data` above cwd or this package."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("SPMDGPT_DATA")
    if env:
        return Path(env).expanduser()
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    for start in starts:
        for p in [start, *start.parents]:
            if (p / "shared" / "data").is_dir():
                return p / "shared" / "data"
    return None


def staircase_tokens(n: int) -> np.ndarray:
    """The digit sequence 0,1,...,9,8,...,1,0,1,... of length n as token ids 0-9."""
    cycle = np.array([int(c) for c in STAIRCASE_PERIOD], dtype=np.uint16)
    return np.resize(cycle, n)


# ----------------------------------------------------------------------------- datasets


@dataclass(frozen=True)
class SourceFile:
    url: str  # a local path, or an fsspec URL
    size: int  # bytes on storage (compressed size for .gz / .zst)
    mtime: str  # modification time as the filesystem reports it ("" when it reports none)
    format: str  # txt | jsonl | parquet


@dataclass(frozen=True)
class Source:
    """One dataset, resolved: its files and how to read and split them (a store's identity)."""

    name: str
    files: tuple  # of SourceFile
    text_field: str
    encoding: str
    encoding_errors: str
    skip_bad_records: bool
    split: str  # hash | tail | val | none
    val_fraction: float

    def identity(self) -> dict:
        return asdict(self)

    @property
    def chat(self) -> bool:
        """Conversations (format chat or preference): token stores with a loss mask, rows packed
        whole."""
        return bool(self.files) and all(f.format in (DataFormat.chat.value, DataFormat.preference.value)
                                        for f in self.files)

    @property
    def preference(self) -> bool:
        """Pairs (format preference): documents 2i and 2i + 1 are pair i's chosen and rejected."""
        return bool(self.files) and all(f.format == DataFormat.preference.value for f in self.files)

    @property
    def messages_field(self) -> str:
        return "messages" if self.text_field == "text" else self.text_field

    @property
    def nbytes(self) -> int:
        return sum(f.size for f in self.files)


def single_file_dataset(cfg: DataConfig) -> DatasetConfig:
    """data.text_file as a one-dataset corpus with nanoGPT's split (the last val_fraction of
    the text validates): read as what its name says (x.jsonl, x.parquet: their documents' text
    field), any other name as plain text."""
    try:
        fmt = _format_of(cfg.text_file, "data.text_file")
    except ConfigError:
        fmt = DataFormat.txt
    return DatasetConfig(paths=[cfg.text_file], format=fmt, split=Split.tail)


def _data_root(cfg: DataConfig, field: str) -> Path:
    root = find_data_root(cfg.path)
    if root is None:
        raise ConfigError([
            f"{field}: a relative path, but data.path is not set and no shared/data folder was "
            "found above the working directory; set data.path=<folder with the data> or SPMDGPT_DATA"
        ])
    return root


def _format_of(path: str, format_field: str) -> DataFormat:
    name = path.lower()
    for c in COMPRESSIONS:
        if name.endswith(c):
            name = name[: -len(c)]
    fmt = SUFFIXES.get(os.path.splitext(name)[1])
    if fmt is None:
        raise ConfigError([f"cannot tell the format of {path} from its name; set "
                           f"{format_field}=txt|jsonl|parquet"])
    return fmt


def _mtime(info: dict) -> str:
    for key in ("mtime", "LastModified", "updated", "last_modified", "created"):
        if info.get(key) is not None:
            return str(info[key])
    return ""


PACKAGED = "spmdgpt:"  # a path under the installed package (the arithmetic walk's data: spmdgpt:datasets/...)


def list_files(ds: DatasetConfig, cfg: DataConfig, field: str, format_field: str) -> List[SourceFile]:
    """Every file of one dataset's `paths` (folders recursively, globs expanded; `spmdgpt:PATH`
    under the installed package), sorted, with size and modification time. ConfigError (naming
    `field`) for a path that matches nothing."""
    import fsspec

    out: List[SourceFile] = []
    for p in ds.paths:
        url = os.path.expanduser(p)
        if url.startswith(PACKAGED):  # (data shipped with spmdgpt: spmdgpt/datasets/)
            from importlib import resources

            url = str(resources.files("spmdgpt").joinpath(*url.removeprefix(PACKAGED).split("/")))
        elif "://" not in url and not os.path.isabs(url):
            url = str(_data_root(cfg, field) / url)
        try:
            fs, path = fsspec.core.url_to_fs(url)
            if any(c in path for c in "*?["):
                found = [f for f in fs.glob(path) if fs.isfile(f)]
            elif fs.isdir(path):
                found = [f for f in fs.find(path) if ds.format != DataFormat.auto
                         or _has_known_suffix(f)]
            elif fs.isfile(path):
                found = [path]
            else:
                found = []
            infos = [(f, fs.info(f)) for f in sorted(found)]
        except (OSError, ValueError, ImportError) as e:
            raise ConfigError([f"{field}: cannot list {p} ({e})"]) from None
        if not infos:
            raise ConfigError([f"{field}={p}: no such file or no file matches (looked for {url}); "
                               "set data.path or the path"])
        local = fs.protocol in ("file", "local") or "file" in (fs.protocol or ())
        for f, info in infos:
            fmt = ds.format if ds.format != DataFormat.auto else _format_of(f, format_field)
            out.append(SourceFile(f if local else fs.unstrip_protocol(f), int(info.get("size") or 0),
                                  _mtime(info), fmt.value))
    return out


def _has_known_suffix(path: str) -> bool:
    try:
        _format_of(path, "format")
        return True
    except ConfigError:
        return False


def resolve_source(name: str, ds: DatasetConfig, cfg: DataConfig) -> Source:
    if cfg.datasets:
        files = list_files(ds, cfg, f"data.datasets.{name}.paths", f"data.datasets.{name}.format")
    else:
        files = list_files(ds, cfg, "data.text_file", "data.datasets.NAME.format")
    vf = cfg.val_fraction if ds.val_fraction is None else ds.val_fraction
    if ds.format in (DataFormat.chat, DataFormat.preference) and ds.split == Split.tail:
        raise ConfigError([f"data.datasets.{name}.split=tail would cut a conversation in two; chat data is "
                           "split by conversation: use split=hash, val or none"])
    return Source(name, tuple(files), ds.text_field, ds.encoding or cfg.encoding,
                  cfg.encoding_errors, cfg.skip_bad_records, ds.split.value, float(vf))


# ----------------------------------------------------------------------------- documents


class BadRecords:
    """Counts the records skipped under data.skip_bad_records=true (and the first one's place)."""

    def __init__(self):
        self.count = 0
        self.first = ""

    def add(self, where: str) -> None:
        self.count += 1
        self.first = self.first or where


def _decode(raw: bytes, src: Source, where: str, offset: int = 0) -> str:
    try:
        return raw.decode(src.encoding, errors=src.encoding_errors)
    except UnicodeDecodeError as e:
        raise ConfigError([
            f"{where}: invalid {src.encoding} at byte {offset + e.start}; set data.encoding "
            "(e.g. latin-1) or data.encoding_errors=replace to go on"
        ]) from None
    except LookupError:
        raise ConfigError([f"data.encoding={src.encoding}: no such text encoding"]) from None


def bad_record(src: Source, bad: BadRecords, where: str, why: str) -> None:
    if not src.skip_bad_records:
        raise ConfigError([f"{where}: {why}; fix the file or set data.skip_bad_records=true to "
                           "count and skip such records"])
    bad.add(where)


class Record(NamedTuple):
    """One document as read, not yet decoded: txt files and jsonl lines stay bytes (decoding
    and JSON parsing happen in `prepare`'s workers), parquet cells arrive as text."""

    where: str  # "file" (txt), "file:LINE" (jsonl), "file row N" (parquet)
    kind: str  # txt | jsonl | text
    raw: Union[bytes, str]
    offset: int  # byte offset of raw in the (uncompressed) file
    nbytes: int  # bytes read


def json_line(rec: Record, src: Source, bad: BadRecords):
    """(the parsed object, the line's text) of a jsonl record; None for an empty line or a bad
    line skipped under data.skip_bad_records (ConfigError naming file:line otherwise)."""
    file, lineno = rec.where.rsplit(":", 1)
    line = _decode(rec.raw, src, f"{file} line {lineno}", rec.offset)
    if not line.strip():
        return None
    try:
        return json.loads(line), line
    except json.JSONDecodeError as e:
        at = e.msg if e.msg.endswith(" at") else f"{e.msg} at"  # (some of json's messages end in "at")
        bad_record(src, bad, rec.where, f"not JSON ({at} column {e.colno})")
        return None


def parse_chat(rec: Record, src: Source, bad: BadRecords) -> Optional[Tuple[list, str]]:
    """([messages], the line's text) of a chat record, checked (data/chat.py's `conversation`),
    or ([chosen messages, rejected messages], the line's text) of a preference record
    (`preference_pair`); None for an empty line or a skipped bad one; ConfigError naming
    file:line otherwise."""
    from spmdgpt.data.chat import ChatError, conversation, preference_pair

    parsed = json_line(rec, src, bad)
    if parsed is None:
        return None
    try:
        if src.preference:
            return list(preference_pair(parsed[0])), parsed[1]
        return [conversation(parsed[0], src.messages_field)], parsed[1]
    except ChatError as e:
        bad_record(src, bad, rec.where, str(e))
        return None


def parse(rec: Record, src: Source, bad: BadRecords) -> Optional[str]:
    """A record's text (None for a bad record skipped under data.skip_bad_records, or an empty
    line); ConfigError naming the file and line for invalid text or a bad record otherwise."""
    if rec.kind == "text":
        return rec.raw
    if rec.kind == "txt":
        return _decode(rec.raw, src, rec.where).replace("\r\n", "\n")
    parsed = json_line(rec, src, bad)
    if parsed is None:
        return None
    obj = parsed[0]
    text = obj.get(src.text_field) if isinstance(obj, dict) else None
    if not isinstance(text, str):
        bad_record(src, bad, rec.where, f"no text field {src.text_field!r} (set the dataset's text_field)")
        return None
    return text


def _jsonl(f: SourceFile, fh) -> Iterator[Record]:
    offset = 0
    for lineno, raw in enumerate(fh, 1):
        yield Record(f"{f.url}:{lineno}", "jsonl", raw, offset, len(raw))
        offset += len(raw)


def _parquet(f: SourceFile, src: Source, fh, bad: BadRecords) -> Iterator[Record]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(fh)
        if src.text_field not in pf.schema_arrow.names:
            raise ConfigError([f"{f.url}: no column {src.text_field!r} (columns: "
                               f"{', '.join(pf.schema_arrow.names)}); set the dataset's text_field"])
        row = 0
        for batch in pf.iter_batches(batch_size=1024, columns=[src.text_field]):
            for text in batch.column(0).to_pylist():
                row += 1
                if not isinstance(text, str):
                    bad_record(src, bad, f"{f.url} row {row}", f"{src.text_field!r} is not text")
                    continue
                yield Record(f"{f.url} row {row}", "text", text, 0, len(text))
    except pa.ArrowException as e:
        raise ConfigError([f"{f.url}: not a readable parquet file ({e})"]) from None


def records(src: Source, bad: BadRecords) -> Iterator[Record]:
    """Every document of a dataset as a Record, file after file, in a fixed order."""
    import fsspec

    for f in src.files:
        try:
            with fsspec.open(f.url, "rb", compression="infer") as fh:
                if f.format == DataFormat.txt.value:
                    raw = fh.read()
                    yield Record(f.url, "txt", raw, 0, len(raw))
                elif f.format in (DataFormat.jsonl.value, DataFormat.chat.value, DataFormat.preference.value,
                                  DataFormat.prompts.value):
                    # (zstandard's reader has no readline)
                    yield from _jsonl(f, io.BufferedReader(fh) if not hasattr(fh, "peek") else fh)
                else:
                    yield from _parquet(f, src, fh, bad)
        except (OSError, EOFError) as e:
            raise ConfigError([f"{f.url}: cannot read it ({e})"]) from None


def documents(src: Source, bad: BadRecords, render=None) -> Iterator[Tuple[str, int]]:
    """(text, bytes read) of each document of a dataset, file after file (txt files get their
    "\r\n" line ends normalised to "\n", as nanoGPT reads Tiny Shakespeare). A conversation's
    text is render(messages), or its messages' contents, one per line."""
    for rec in records(src, bad):
        if src.chat:  # (a preference pair: both conversations)
            chat = parse_chat(rec, src, bad)
            text = None if chat is None else ("" if render else "\n").join(
                render(c) if render else "\n".join(m["content"] for m in c) for c in chat[0])
        else:
            text = parse(rec, src, bad)
        if text is not None:
            yield text, rec.nbytes
