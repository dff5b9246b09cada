"""GGUF files: a file written here with the `gguf` package's writer from the tiny model's weights imports to a folder
whose model gives the original's logits and whose tokenizer reads text as the original does; a Q8_0 file gives its
dequantized weights exactly; the import is done once per file content; and every bad file is one line, exit 2, before
any weight is read.

No file here comes from outside: each GGUF is written by `write_gguf` below, from the metadata and tensor names
transformers' loader reads (transformers/modeling_gguf_pytorch_utils.py, integrations/ggml.py and
integrations/gguf/gguf_tokenizer_mapping.py): qwen2's hyperparameters under `qwen2.*`, a byte-level BPE vocabulary under
`tokenizer.ggml.*`, and tensors under llama.cpp's names in the model's own layout (the loader permutes q and k back
for llama, not for qwen2, so none is permuted here).
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from gguf import GGMLQuantizationType, GGUFWriter, TokenType  # noqa: E402

from azr.config import ModelConfig  # noqa: E402
from azr.errors import ConfigError  # noqa: E402
from azr.models import gguf as azr_gguf  # noqa: E402
from azr.models.gguf import IMPORT_MARKER, import_gguf, imported_folder, inspect_gguf  # noqa: E402
from azr.models.source import check_model, local_source, model_cache  # noqa: E402

# A HF parameter's name inside `model.layers.N.` -> llama.cpp's name inside `blk.N.`
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
TOP_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
SAMPLE_TEXT = (
    "<|im_start|>user\nWrite `add(a, b)`.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    "```python\ndef add(a, b):\n    return a + b  # café, 数字, 😀\n```\n\tFinal answer: 3\r\n  x  <|im_end|>"
)


def gguf_name(hf_name: str) -> str:
    if hf_name in TOP_NAMES:
        return TOP_NAMES[hf_name]
    _, _, layer, rest = hf_name.split(".", 3)  # model.layers.N.rest
    return f"blk.{layer}.{LAYER_NAMES[rest]}"


def write_gguf(
    model_dir: Path,
    path: Path,
    *,
    arch: str = "qwen2",
    quantize: GGMLQuantizationType | None = None,
    drop: tuple[str, ...] = (),
    extra: dict[str, tuple[np.ndarray, GGMLQuantizationType | None]] | None = None,
) -> Path:
    """`model_dir` (a Qwen2 folder with a byte-level BPE tokenizer.json) as the GGUF file `path`: F32 tensors, or
    the 2-D ones as `quantize`; tensors whose GGUF name starts with one of `drop` left out; `extra` tensors added."""
    from safetensors.torch import load_file

    config = json.loads((model_dir / "config.json").read_text())
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    tokens: list[str | None] = [None] * config["vocab_size"]
    for token, index in {**tok["model"]["vocab"], **added}.items():
        tokens[index] = token
    assert None not in tokens, "the vocabulary has holes"

    writer = GGUFWriter(path, arch)
    writer.add_name(model_dir.name)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_rope_freq_base(config["rope_parameters"]["rope_theta"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_tokenizer_model("gpt2")  # llama.cpp's name for byte-level BPE
    writer.add_tokenizer_pre("gpt-2")  # GPT-2's split, as the tiny tokenizer's ByteLevel pre-tokenizer does
    writer.add_token_list(tokens)
    writer.add_token_types([TokenType.CONTROL if t in added else TokenType.NORMAL for t in tokens])
    writer.add_token_merges([" ".join(pair) for pair in tok["model"]["merges"]])
    writer.add_bos_token_id(added["<|endoftext|>"])  # as Qwen2's files say, with add_bos_token false
    writer.add_eos_token_id(added["<|im_end|>"])
    writer.add_pad_token_id(added["<|endoftext|>"])
    writer.add_add_bos_token(False)
    writer.add_chat_template((model_dir / "chat_template.jinja").read_text())
    weights = load_file(model_dir / "model.safetensors")
    if not config["tie_word_embeddings"]:
        assert "lm_head.weight" in weights
    for hf_name, tensor in weights.items():
        name = gguf_name(hf_name)
        if name.startswith(drop):
            continue
        array = tensor.float().numpy()
        if quantize is not None and array.ndim == 2:
            writer.add_tensor(name, gguf.quants.quantize(array, quantize), raw_dtype=quantize)
        else:
            writer.add_tensor(name, array)
    for name, (array, raw_dtype) in (extra or {}).items():
        writer.add_tensor(name, array, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _reference(tiny_model_dir: Path, out: Path, *, tied: bool) -> Path:
    """The tiny model with its norms and biases drawn at random (its init leaves them 1 and 0, which would hide a
    swapped norm or a lost bias), tied as built or with its own output head."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    if not tied:
        config = model.config
        config.tie_word_embeddings = False
        untied = type(model)(config)
        untied.load_state_dict(model.state_dict(), strict=False)
        model = untied
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.2 * torch.randn(param.shape, generator=generator))
            elif name.endswith(".bias"):
                param.copy_(0.2 * torch.randn(param.shape, generator=generator))
            elif name == "lm_head.weight" and not tied:
                param.copy_(0.05 * torch.randn(param.shape, generator=generator))
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def files(tiny_model_dir, tmp_path_factory) -> dict[str, Path]:
    """The reference folders and their GGUF files, written once for the module."""
    root = tmp_path_factory.mktemp("gguf")
    tied = _reference(tiny_model_dir, root / "tiny", tied=True)
    untied = _reference(tiny_model_dir, root / "tiny-untied", tied=False)
    return {
        "tied": tied,
        "untied": untied,
        "f32": write_gguf(tied, root / "tiny-f32.gguf"),
        "untied_f32": write_gguf(untied, root / "tiny-untied-f32.gguf"),
        "q8_0": write_gguf(tied, root / "tiny-q8_0.gguf", quantize=GGMLQuantizationType.Q8_0),
    }


@pytest.fixture(scope="module")
def imported(files, tmp_path_factory) -> dict[str, Path]:
    """Each GGUF file imported once for the module."""
    root = tmp_path_factory.mktemp("imported")
    return {key: import_gguf(str(files[key]), root / key) for key in ("f32", "untied_f32", "q8_0")}


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    """Imports of a `.gguf` model source go under tmp_path, never into ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def _logits(folder: Path, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def _batch(reference: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """A few token sequences: the sample text, a chat prompt, random ids; padded on the left, as generation pads."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(reference)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "def f(x):"}], tokenize=False, add_generation_prompt=True
    )
    rows = [tokenizer(SAMPLE_TEXT).input_ids, tokenizer(prompt).input_ids]
    rows.append(torch.randint(5, len(tokenizer), (33,), generator=torch.Generator().manual_seed(0)).tolist())
    width = max(map(len, rows))
    ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


@pytest.mark.parametrize(("source", "reference"), [("f32", "tied"), ("untied_f32", "untied")])
def test_an_imported_f32_file_gives_the_original_logits(files, imported, source, reference):
    ids, mask = _batch(files[reference])
    expected, got = _logits(files[reference], ids, mask), _logits(imported[source], ids, mask)
    assert expected.shape == got.shape
    assert torch.allclose(expected, got, rtol=0, atol=1e-6), (expected - got).abs().max()
    config = json.loads((imported[source] / "config.json").read_text())
    assert config["model_type"] == "qwen2" and config["tie_word_embeddings"] == (reference == "tied")
    assert "quantization_config" not in config  # a plain folder: it saves, merges and serves as any other


def test_the_imported_tokenizer_reads_and_writes_text_as_the_original(files, imported):
    from transformers import AutoTokenizer

    original, got = AutoTokenizer.from_pretrained(files["tied"]), AutoTokenizer.from_pretrained(imported["f32"])
    for text in (SAMPLE_TEXT, " leading space", "x" * 40, "tabs\t\tand\n\n\nnewlines", ""):
        assert got(text).input_ids == original(text).input_ids, text
        assert got.decode(got(text).input_ids) == text
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    render = dict(tokenize=False, add_generation_prompt=True)
    assert got.apply_chat_template(messages, **render) == original.apply_chat_template(messages, **render)
    assert (got.eos_token, got.pad_token) == (original.eos_token, original.pad_token) == ("<|im_end|>", "<|endoftext|>")
    generation = json.loads((imported["f32"] / "generation_config.json").read_text())
    assert generation["eos_token_id"] == original.convert_tokens_to_ids("<|im_end|>")  # sampling stops at a turn's end


def test_a_q8_0_file_imports_its_dequantized_weights_and_close_logits(files, imported):
    from safetensors.torch import load_file

    original, got = load_file(files["tied"] / "model.safetensors"), load_file(imported["q8_0"] / "model.safetensors")
    assert set(original) == set(got)
    for name, tensor in original.items():
        array = tensor.numpy()
        if array.ndim == 2:  # exactly what Q8_0 keeps of it
            q8_0 = GGMLQuantizationType.Q8_0
            kept = gguf.quants.dequantize(gguf.quants.quantize(array, q8_0), q8_0)
            assert np.array_equal(got[name].numpy(), kept), name
            assert not np.array_equal(got[name].numpy(), array), name
        else:
            assert torch.equal(got[name], tensor), name
    ids, mask = _batch(files["tied"])
    expected, logits = _logits(files["tied"], ids, mask), _logits(imported["q8_0"], ids, mask)
    assert torch.allclose(expected, logits, rtol=0, atol=0.1), (expected - logits).abs().max()
    assert (expected.argmax(-1) == logits.argmax(-1)).float().mean() > 0.9


def test_the_model_card_names_the_file_and_its_quantization(files, imported):
    from azr.models.gguf import _sha256

    card = (imported["f32"] / "README.md").read_text()
    assert f"`{files['f32'].name}`" in card and _sha256(files["f32"]) in card
    assert "Quantization in the file: F32 (50 tensors)" in card and "unquantized" in card
    card = (imported["q8_0"] / "README.md").read_text()
    assert f"`{files['q8_0'].name}`" in card
    assert "Quantization in the file: Q8_0 (29 tensors), F32 (21 tensors)" in card and "dequantized to float32" in card
    for folder in imported.values():
        assert (folder / IMPORT_MARKER).is_file()
        assert not [p.name for p in folder.parent.iterdir() if p.name.startswith(".")]  # no staging folder left


@pytest.fixture
def imports(monkeypatch) -> list[str]:
    """The sources `imported_folder` imports (each still imported, for real)."""
    calls: list[str] = []
    real = azr_gguf.import_gguf

    def counted(source, out, **kwargs):
        calls.append(source)
        return real(source, out, **kwargs)

    monkeypatch.setattr(azr_gguf, "import_gguf", counted)
    return calls


def test_a_gguf_model_source_is_imported_once_per_content(files, imports, tmp_path):
    cache = tmp_path / "cache"
    first = imported_folder(files["f32"], cache)
    assert (first / IMPORT_MARKER).is_file() and first.parent == cache and len(imports) == 1
    assert imported_folder(files["f32"], cache) == first and len(imports) == 1
    renamed = shutil.copy(files["f32"], tmp_path / "another-name.gguf")  # the same bytes under another name
    assert imported_folder(Path(renamed), cache) == first and len(imports) == 1
    other = imported_folder(files["q8_0"], cache)  # other bytes
    assert other != first and len(imports) == 2
    (other / IMPORT_MARKER).unlink()  # an import that did not finish: done again
    (other / "model.safetensors").write_bytes(b"half")
    assert imported_folder(files["q8_0"], cache) == other and len(imports) == 3
    assert (other / IMPORT_MARKER).is_file() and (other / "model.safetensors").stat().st_size > 4


def test_a_rank_that_finds_an_import_under_way_waits_and_reuses_it(files, imports, tmp_path):
    cache = tmp_path / "cache"
    digest = azr_gguf._sha256(files["f32"])[:16]
    done = threading.Event()
    with azr_gguf._import_lock(cache, digest):  # another rank is importing

        def other_rank_finishes():
            shutil.copytree(files["tied"], cache / f"tiny-f32-{digest}")
            (cache / f"tiny-f32-{digest}" / IMPORT_MARKER).write_text("tiny-f32.gguf\n")
            done.set()

        result: list[Path] = []
        waiter = threading.Thread(target=lambda: result.append(imported_folder(files["f32"], cache)))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive(), "imported_folder did not wait for the import under way"
        other_rank_finishes()
    waiter.join(30)
    assert done.is_set() and result == [cache / f"tiny-f32-{digest}"] and imports == []


def test_a_gguf_model_name_is_checked_then_imported_into_the_xdg_cache(files, tmp_path):
    check_model(ModelConfig(name_or_path=str(files["f32"])))  # the header only: nothing written
    assert model_cache() == tmp_path / "xdg-cache" / "azr" / "models" and not model_cache().exists()
    cfg = local_source(ModelConfig(name_or_path=str(files["f32"])))
    folder = Path(cfg.name_or_path)
    assert folder.parent == model_cache() and (folder / IMPORT_MARKER).is_file()
    assert local_source(cfg) == cfg  # a folder stays as it is


def test_azr_models_import_writes_the_folder(cli, files, tmp_path):
    code, out, err = cli("models", "import", files["f32"], tmp_path / "out")
    assert code == 0, err
    assert out == f"model written to {tmp_path / 'out'}\n" and (tmp_path / "out" / "config.json").is_file()


# ------------------------------------------------------------------------------------------------------- bad files
def _small(path: Path, arch: str = "qwen2", tensors: dict | None = None) -> Path:
    """A GGUF file of a header and the tensors given (default: one F32 tensor)."""
    writer = GGUFWriter(path, arch)
    writer.add_block_count(1)
    if tensors is None:
        tensors = {"token_embd.weight": (np.ones((4, 32), np.float32), None)}
    for name, (array, raw_dtype) in tensors.items():
        writer.add_tensor(name, array, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _unknown_type_id(good: Path, path: Path) -> Path:
    """`good` with the first tensor's type id in the tensor table set to 250, a type no gguf package knows."""
    data = bytearray(good.read_bytes())
    name = b"token_embd.weight"
    at = data.find(len(name).to_bytes(8, "little") + name)  # a tensor info: name (u64 length, bytes), n_dims (u32),
    assert at > 0  # its dims (u64 each), its type (u32), its offset (u64)
    at += 8 + len(name)
    at += 4 + 8 * int.from_bytes(data[at : at + 4], "little")
    assert int.from_bytes(data[at : at + 4], "little") == GGMLQuantizationType.F32
    data[at : at + 4] = (250).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    return path


def _bad_files(files: dict[str, Path], tmp: Path) -> list[tuple[str, str]]:
    """(source, expected error after `azr: error: SOURCE: `) for files refused from their header."""
    good = files["f32"].read_bytes()

    def raw(name: str, data: bytes) -> str:
        (tmp / name).write_bytes(data)
        return str(tmp / name)

    folder = tmp / "folder.gguf"
    folder.mkdir()
    return [
        (raw("half.gguf", good[: len(good) // 2]), "a damaged or truncated GGUF file"),
        (raw("header.gguf", good[:100]), "a damaged or truncated GGUF file"),
        (raw("last-byte.gguf", good[:-1]), "a damaged or truncated GGUF file"),
        (raw("random.gguf", np.random.default_rng(0).bytes(4096)), "not a GGUF file (it starts with"),
        (raw("model.json", json.dumps({"model_type": "qwen2"}).encode()), "not a GGUF file (it starts with b'{\"mo'"),
        (raw("empty.gguf", b""), "not a GGUF file (it starts with b''"),
        (raw("version.gguf", b"GGUF" + np.random.default_rng(1).bytes(4096)), "a damaged or truncated GGUF file"),
        (str(write_gguf(files["tied"], tmp / "arch.gguf", arch="nosucharch")), "architecture 'nosucharch' is not"),
        (str(_small(tmp / "prefix.gguf", arch="tokenizer")), "architecture 'tokenizer' is not"),
        (
            str(write_gguf(files["tied"], tmp / "i32.gguf", extra={"blk.0.ids": (np.zeros((4, 8), np.int32), None)})),
            "tensor type I32 cannot be dequantized by the gguf package",
        ),
        (
            str(_small(tmp / "q8_1.gguf", tensors={"x": (np.zeros((4, 40), np.uint8), GGMLQuantizationType.Q8_1)})),
            "tensor type Q8_1 cannot be dequantized by the gguf package",
        ),
        (str(_unknown_type_id(files["f32"], tmp / "type.gguf")), "a tensor type the gguf package cannot dequantize"),
        (str(_small(tmp / "none.gguf", tensors={})), "a GGUF file without tensors"),
        (str(tmp / "missing.gguf"), "no such file"),
        (str(folder), "not a file (a GGUF model is one .gguf file)"),
        (str(tmp / "no-such-distribution"), "neither a .gguf file nor an installed distribution"),
    ]


@pytest.fixture
def no_slow_work(monkeypatch):
    """Loading a model or a tokenizer fails the test: a bad file is refused before."""
    import transformers

    def refuse(*args, **kwargs):
        pytest.fail("a bad GGUF file reached transformers' loader")

    for cls in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
        monkeypatch.setattr(cls, "from_pretrained", refuse)


def test_a_bad_gguf_file_is_one_line_exit_2_before_any_slow_work(cli, files, tmp_path, no_slow_work):
    cases = _bad_files(files, tmp_path)
    for source, expected in cases:
        code, _, err = cli("models", "import", source, tmp_path / "out")
        assert code == 2, (source, code, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(f"azr: error: {source}: {expected}"), (source, err)
        assert not (tmp_path / "out").exists()


def test_an_out_folder_that_is_not_empty_is_refused_before_the_load(cli, files, tmp_path, no_slow_work):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    code, _, err = cli("models", "import", files["f32"], tmp_path / "out")
    assert code == 2 and err == f"azr: error: {tmp_path / 'out'}: exists and is not empty; choose a new folder\n"
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]
    (tmp_path / "file").write_text("")
    code, _, err = cli("models", "import", files["f32"], tmp_path / "file")
    assert code == 2 and err.count("\n") == 1 and "exists and is not a folder" in err


@pytest.mark.parametrize(
    ("drop", "expected"),
    [
        (("blk.3.",), "the file lacks 12 of the weights its qwen2 model needs (model.layers.3."),
        (("output_norm.",), "the file lacks 1 of the weights its qwen2 model needs (model.norm.weight)"),
    ],
)
def test_a_file_without_all_its_weights_is_refused_not_filled_with_noise(cli, files, tmp_path, drop, expected):
    """transformers initializes a weight the file lacks at random and only warns: the import refuses instead."""
    source = write_gguf(files["tied"], tmp_path / "short.gguf", drop=drop)
    code, _, err = cli("models", "import", source, tmp_path / "out")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"azr: error: {source}: {expected}"), err
    assert not (tmp_path / "out").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("arch", ["qwen2moe", "gpt-oss", "qwen3", "llama"])
def test_the_architectures_transformers_renames_or_builds_pass_the_header_check(tmp_path, arch):
    """llama.cpp writes `qwen2moe` where transformers' config mapping says `qwen2_moe`: its loader renames it."""
    assert inspect_gguf(_small(tmp_path / "m.gguf", arch=arch)).architecture == arch


def test_config_check_names_model_name_or_path_for_a_bad_gguf_file(cli, files, tmp_path, write):
    half = tmp_path / "half.gguf"
    half.write_bytes(files["f32"].read_bytes()[:1000])
    for source, expected in ((half, "a damaged or truncated GGUF file"), (tmp_path / "none.gguf", "no such file")):
        recipe = write("r.yaml", f"model: {{name_or_path: {source}}}\n")
        code, _, err = cli("config", "check", "--config", recipe)
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"azr: error: model.name_or_path: {source}: {expected}"), err
    with pytest.raises(ConfigError, match=r"^model.name_or_path: .*not a GGUF file"):
        check_model(ModelConfig(name_or_path=str(write("model.gguf", "{}"))))
