"""Released config.json files of starcoder2, nemotron, cohere and bert give the
transformers parameter count, through the Hugging Face import and through the
bundled model file's named configuration.

Each expected integer is ``sum(p.numel() for p in model.parameters())`` of the
transformers 5.24.0 model built on the meta device from that full config.json
(``tests/torch_probe.py``; for bert ``build_bert_model``: BertModel with its
pooler, what ``AutoModel`` builds). The files and their provenance are in
``examples/hf/SOURCES.md``. These tests need no torch: the PyTorch tier
(``tests/models/test_torch_agreement.py``) re-measures the same numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import costgraph

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"

#: file → (bundled model, its config named for the release, transformers' parameter count)
RELEASED = {
    # Starcoder2ForCausalLM(bigcode/starcoder2-3b), tied head: 3,030,371,328
    "starcoder2-3b.json": ("starcoder2", "starcoder2-3b", 3_030_371_328),
    # NemotronForCausalLM(nvidia/Nemotron-4-Mini-Hindi-4B-Instruct), untied: 4,190,509,056
    "nemotron-4-mini-hindi-4b-instruct.json": ("nemotron", "nemotron-mini-4b", 4_190_509_056),
    # CohereForCausalLM(CohereForAI/c4ai-command-r-08-2024), tied head: 32,296,476,672
    "command-r-08-2024.json": ("cohere", "command-r-08-2024", 32_296_476_672),
    # BertModel(google-bert/bert-base-uncased) with its pooler (AutoModel's class): 109,482,240
    "bert-base-uncased.json": ("bert", "bert-base-uncased", 109_482_240),
}


@pytest.mark.parametrize("file", list(RELEASED))
def test_released_config_gives_the_transformers_parameter_count(file):
    model, config, expected = RELEASED[file]
    hf = costgraph.load_hf_config(HF / file)
    assert hf.model_type == model
    assert hf.costs().evaluate(**hf.values)["params"] == expected


@pytest.mark.parametrize("file", list(RELEASED))
def test_bundled_named_config_gives_the_same_count(file):
    model, config, expected = RELEASED[file]
    m = costgraph.load(model, config=config)
    assert m.costs().evaluate(config=config)["params"] == expected
    # and the same dimensions as the import of the released file
    hf = costgraph.load_hf_config(HF / file)
    assert {str(k): int(v) for k, v in m.values(config).items()} == hf.values


#: bundled configurations of releases whose config.json is not in examples/hf/, with transformers' count
#: for that config.json (built on meta as above; where each file was read: the model file's comment)
BUNDLED_ONLY = {
    # Starcoder2ForCausalLM(bigcode/starcoder2-15b config.json), tie_word_embeddings false: 15,957,889,024
    ("starcoder2", "starcoder2-15b"): 15_957_889_024,
    # CohereForCausalLM(CohereForAI/c4ai-command-r-v01 config.json, auto_map left out): 34,980,831,232
    ("cohere", "command-r-v01"): 34_980_831_232,
}


@pytest.mark.parametrize("model,config", list(BUNDLED_ONLY))
def test_bundled_config_of_other_releases(model, config):
    m = costgraph.load(model, config=config)
    assert m.costs().evaluate(config=config)["params"] == BUNDLED_ONLY[model, config]


def test_bert_is_an_encoder_with_no_kv_cache():
    # no cache(...) in models/bert.cg: nothing is kept for later tokens; the attention is not causal
    hf = costgraph.load_hf_config(HF / "bert-base-uncased.json")
    q = hf.costs().evaluate(**hf.values)
    assert q["kv_cache_bytes"] == 0 and q["kv_cache_bytes_per_token"] == 0
    graph = hf.model.graph
    assert graph.caches == []
    assert not any(d["attrs"].get("causal") for _, d in graph.ops())
    # the pooler (dense h → h + bias) is what add_pooling_layer adds: h² + h parameters
    without = costgraph.load("bert", options={"pooler": False}).costs().evaluate(config="bert-base-uncased")
    assert q["params"] - without["params"] == 768 * 768 + 768
