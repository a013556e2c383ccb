"""costgraph.hints: the shared wording of hints (did you mean, listings, each name once)."""


def test_hints_helpers():
    from costgraph.hints import close, did_you_mean, listing, unique

    assert unique(["b", "a", "b", 1, "1"]) == ["b", "a", "1"]
    assert listing(["q", "k", "q", "v", "k"]) == "q, k, v"
    assert close("h100", ["h100-sxm", "h100-pcie", "h100-sxm", "h200"], prefix=True) == ["h100-sxm", "h100-pcie"]
    assert close("lama", ["llama", "llama", "gemma"], n=3) == ["llama"]
    assert close("", ["a", "b"], prefix=True) == []
    assert did_you_mean("lineer", ["linear", "linear"]) == "did you mean 'linear'?"
    assert did_you_mean("zzz", ["linear"]) is None
