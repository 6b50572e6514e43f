"""Sanity of the numpy reference model itself (tests/reference/llama_ref.py):
on the default model it must continue a factual prompt correctly, which it
only does with the right RoPE pairing, GQA mapping, norms and tied output."""

def vocab_of(ref):
    f = ref.reader.fields["tokenizer.ggml.tokens"]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def test_reference_continues_capital_of_france(default_ref):
    ref = default_ref
    vocab = vocab_of(ref)
    index = {piece: i for i, piece in enumerate(vocab)}
    # byte-level BPE pieces of "The capital of France is" ("Ġ" marks a space)
    prompt = [index[p] for p in ["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"]]
    logits = ref.forward(prompt)
    assert vocab[int(logits[-1].argmax())] == "ĠParis"
