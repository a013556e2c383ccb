"""Issue 20 item 1: models by name — a Hub id read from the local Hugging Face cache, a snapshot
folder, a config.json path and a dict in ``costgraph.load`` and on the command line.

The cache is laid out as huggingface_hub writes it (huggingface/huggingface_hub, docs
"Understand caching": ``models--org--name/{blobs,refs,snapshots}``, ``refs/main`` holding the
commit, ``snapshots/<commit>/config.json`` a relative symlink to ``blobs/<etag>``). No test
touches the network: ``HF_HUB_OFFLINE`` is set and the download function is replaced where a
download is allowed."""

from __future__ import annotations

import json
import os

import pytest

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError

hub = pytest.importorskip("huggingface_hub")
import huggingface_hub.constants  # noqa: E402  (hub.constants below)

# Llama-3.1-8B's config.json (meta-llama/Llama-3.1-8B, the fields costgraph reads)
LLAMA31 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
           "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
           "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
#: Llama-3.1-8B's parameters: 8,030,261,248 (the model card's 8.03B; transformers' num_parameters())
LLAMA31_PARAMS = 8030261248
COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659"
OLD = "1111111111111111111111111111111111111111"


def _write_repo(cache, repo: str, snapshots: dict[str, dict], main_commit: str) -> None:
    """A cached repository as huggingface_hub writes it: blobs named by content hash, one
    snapshot folder per commit with config.json a relative symlink into blobs, refs/main."""
    import hashlib

    root = cache / ("models--" + repo.replace("/", "--"))
    (root / "blobs").mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(main_commit)   # no newline, as the library writes it
    for commit, config in snapshots.items():
        data = json.dumps(config).encode()
        blob = hashlib.sha256(data).hexdigest()
        (root / "blobs" / blob).write_bytes(data)
        snap = root / "snapshots" / commit
        snap.mkdir(parents=True)
        os.symlink(os.path.join("..", "..", "blobs", blob), snap / "config.json")


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """HF_HUB_CACHE at a fresh cache folder holding meta-llama/Llama-3.1-8B at two commits (main and
    an older one with 16 layers), offline; huggingface_hub reads the folder from its constants."""
    c = tmp_path / "hub"
    _write_repo(c, "meta-llama/Llama-3.1-8B", {COMMIT: LLAMA31, OLD: {**LLAMA31, "num_hidden_layers": 16}}, COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(c))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", str(c))
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", True)
    return c


def test_hub_id_from_the_cache(cache):
    m = costgraph.load("meta-llama/Llama-3.1-8B")
    assert m.costs().evaluate("hf")["params"] == LLAMA31_PARAMS
    assert m.hf.source == str(cache / "models--meta-llama--Llama-3.1-8B" / "snapshots" / COMMIT / "config.json")
    assert m.hf.shipped().weights == "bf16" and "torch_dtype bfloat16" in m.hf.shipped().source


def test_hub_id_at_a_revision(cache):
    """@commit reads that snapshot; @main the commit refs/main names; revision= (as from_pretrained and
    hf_hub_download spell it) is the same as @; two different revisions or one for no Hub id are refused."""
    old = costgraph.load(f"meta-llama/Llama-3.1-8B@{OLD}")
    assert old.values("hf")[old.graph.dims["l"].symbol] == 16
    assert costgraph.load("meta-llama/Llama-3.1-8B@main").hf.values["l"] == 32
    assert costgraph.load("meta-llama/Llama-3.1-8B", revision=OLD).hf.values["l"] == 16
    assert costgraph.load(f"meta-llama/Llama-3.1-8B@{OLD}", revision=OLD).hf.values["l"] == 16
    with pytest.raises(CostgraphValueError, match="names revision 'main' and revision= names") as e:
        costgraph.load("meta-llama/Llama-3.1-8B@main", revision=OLD)
    assert "give the revision once" in e.value.hint
    with pytest.raises(CostgraphValueError, match="applies to a Hub id"):
        costgraph.load("gpt", revision="main")


def test_cli_revision(cache, capsys):
    """--revision REV as `hf download` spells it: the same model as org/name@REV, and the regenerate
    line names org/name@REV."""
    assert main(["derive", "meta-llama/Llama-3.1-8B", "--revision", OLD, "--format", "json", "--no-breakdown"]) == 0
    assert json.loads(capsys.readouterr().out)["values"]["l"] == 16
    assert main(["derive", "gpt", "--revision", "main"]) == 2
    err = capsys.readouterr().err
    assert "--revision 'main' applies to a Hub id" in err and "Traceback" not in err


def test_evaluate_uses_the_configs_values(cache):
    """A model from a Hub id or a config.json evaluates at that config's values unnamed (as
    evaluate("hf")); keywords change some of them; a model file keeps its behaviour (no values: refused,
    the hint in API terms). Parameters: Llama-3.1-8B's 8,030,261,248 (model card; transformers'
    num_parameters()); Llama-2-7B's 6,738,415,616 (the model card's 6.7B; num_parameters())."""
    hub_model = costgraph.load("meta-llama/Llama-3.1-8B").costs()
    assert hub_model.evaluate()["params"] == LLAMA31_PARAMS
    assert hub_model.evaluate(s=2048) == hub_model.evaluate("hf", s=2048) != hub_model.evaluate()
    import pathlib

    path = pathlib.Path(__file__).parents[2] / "examples" / "hf" / "llama-2-7b.json"
    m = costgraph.load(str(path))
    assert m.costs().evaluate()["params"] == 6738415616
    assert m.values() == m.values("hf")
    assert m.costs().compile(dtype="int64")()["params"] == 6738415616
    with pytest.raises(CostgraphValueError, match="no value for") as e:
        costgraph.load("gpt").costs().evaluate()
    assert "evaluate('gpt2')" in e.value.hint and "--set" not in e.value.hint


def test_snapshot_folder_config_path_and_dict(cache):
    snap = cache / "models--meta-llama--Llama-3.1-8B" / "snapshots" / COMMIT
    for source in (snap, str(snap), str(snap / "config.json")):
        assert costgraph.load(source).costs().evaluate("hf")["params"] == LLAMA31_PARAMS
    m = costgraph.load(LLAMA31)
    assert m.costs().evaluate("hf")["params"] == LLAMA31_PARAMS and m.hf.source == "<dict>"


def test_text_config_and_dtype_and_quantization(tmp_path):
    """A nested text_config (LLaVA) is read by the mapping; transformers 5's ``dtype`` names the weights;
    an unknown quantizer warns and says what was assumed."""
    five = {k: v for k, v in LLAMA31.items() if k != "torch_dtype"}
    assert costgraph.load({**five, "dtype": "float16"}).hf.shipped().weights == "fp16"
    assert costgraph.load({**five, "dtype": "float16", "torch_dtype": None}).hf.shipped().weights == "fp16"
    q = costgraph.load({**LLAMA31, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}})
    s = q.hf.shipped()
    assert s.weights == "bf16" and "bitsandbytes" in s.warnings[0] and "unquantized bf16" in s.warnings[0]
    awq = costgraph.load({**LLAMA31, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}})
    assert awq.hf.shipped().weights == "awq"
    llava = {"model_type": "llava", "text_config": {**LLAMA31, "num_hidden_layers": 2}, "image_token_index": 32000,
             "vision_config": {"model_type": "clip_vision_model", "hidden_size": 64, "intermediate_size": 128,
                               "num_attention_heads": 4, "num_hidden_layers": 2, "image_size": 28, "patch_size": 14,
                               "projection_dim": 32}}
    assert costgraph.load(llava).hf.values["l"] == 2


def test_model_files_and_names_unchanged():
    assert costgraph.load("gpt").costs().evaluate(config="gpt2")["params"] == 124439808


def test_bad_inputs(cache, tmp_path):
    with pytest.raises(CostgraphValueError) as e:
        costgraph.load("meta-llama/Llama-3.1-70B")
    assert "no config.json of meta-llama/Llama-3.1-70B in the Hugging Face cache" in e.value.message
    assert "allow_download=True" in e.value.hint
    # huggingface_hub 1.x's CLI is `hf` (the 1.0 release removed `huggingface-cli`; docs "Command Line Interface")
    assert "hf download meta-llama/Llama-3.1-70B config.json" in e.value.hint and "huggingface-cli" not in e.value.hint
    with pytest.raises(CostgraphValueError, match="HF_HUB_OFFLINE is set"):
        costgraph.load("meta-llama/Llama-3.1-70B", allow_download=True)
    with pytest.raises(CostgraphValueError, match="config= names a configuration"):
        costgraph.load(LLAMA31, config="x")
    with pytest.raises(CostgraphValueError, match="a string or a path \\(or a config dict\\), not int"):
        costgraph.load(42)
    with pytest.raises(CostgraphValueError, match="missing key 'max_position_embeddings'"):   # the first size the model file names (s, then h, ...)
        costgraph.load({"model_type": "llama"})
    with pytest.raises(CostgraphValueError, match="argument 'dropout' must be True or False"):
        costgraph.load(LLAMA31, dropout="no")
    assert costgraph.load({**LLAMA31, "attention_dropout": 0.1}).settings.dropout is True   # "auto": the config's
    assert costgraph.load(LLAMA31).settings.dropout is False
    with pytest.raises(CostgraphValueError, match="allow_download"):
        costgraph.load("meta-llama/Llama-3.1-8B", allow_download="yes")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CostgraphValueError):   # a folder without config.json: refused, as before
        costgraph.load(str(tmp_path / "empty"))


def test_download_fetches_config_json_only(cache, monkeypatch):
    """allow_download: hf_hub_download of config.json alone (replaced here: no network)."""
    asked = []

    def fake(repo, filename, revision=None, **kw):
        asked.append((repo, filename, revision))
        _write_repo(cache, repo, {COMMIT: {**LLAMA31, "num_hidden_layers": 80}}, COMMIT)
        return str(cache / ("models--" + repo.replace("/", "--")) / "snapshots" / COMMIT / "config.json")

    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "hf_hub_download", fake)
    assert costgraph.load("org/big", allow_download=True).hf.values["l"] == 80
    assert asked == [("org/big", "config.json", None)]
    assert costgraph.load("org/big").hf.values["l"] == 80   # now cached: no second download
    assert len(asked) == 1


def test_missing_extra_is_named(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_hub(name, *args, **kw):
        if name == "huggingface_hub":
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_hub)
    with pytest.raises(CostgraphValueError) as e:
        costgraph.load("org/name")
    assert "huggingface_hub" in e.value.message and "costgraph[hub]" in e.value.hint


def test_cli_hub_id(cache, capsys):
    assert main(["derive", "meta-llama/Llama-3.1-8B", "--format", "json", "--no-breakdown"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["quantities"]["params"]["value"] == LLAMA31_PARAMS and doc["values"]["l"] == 32
    assert main(["derive", "meta-llama/Llama-3.1-70B"]) == 2
    err = capsys.readouterr().err
    assert "no config.json of meta-llama/Llama-3.1-70B in the Hugging Face cache" in err
    assert "--download" in err and "run: hf download meta-llama/Llama-3.1-70B config.json" in err
    assert "Traceback" not in err
    assert main(["derive", "meta-llama/Llama-3.1-70B", "--download"]) == 2
    assert "HF_HUB_OFFLINE is set" in capsys.readouterr().err


def test_cli_infer_names_the_dtype(cache, capsys):
    snap = cache / "models--meta-llama--Llama-3.1-8B" / "snapshots" / COMMIT
    assert main(["infer", str(snap), "--prompt", "8", "--generate", "8", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["settings"]["weights_source"] == f"{snap / 'config.json'}: torch_dtype bfloat16"


def test_revision_cannot_leave_refs(cache):
    """``org/name@../../x`` made huggingface_hub open ``refs/../../x`` (a file outside the repository's
    refs, read whole as a commit name): a revision with an empty part or one starting with '.' is no
    git ref name and is refused before the cache is read (trial20)."""
    (cache / "y").write_text(COMMIT)
    for rev in ("../../y", "../refs/main", "/etc", "main/", "a//b", ".hidden"):
        with pytest.raises(CostgraphValueError, match="is not a revision name"):
            costgraph.load(f"meta-llama/Llama-3.1-8B@{rev}")
    assert costgraph.load("meta-llama/Llama-3.1-8B@main").hf.values["l"] == 32
