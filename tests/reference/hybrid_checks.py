"""The checks every hybrid family's tests run (test_qwen35.py,
test_qwen35moe.py) through tram's forward tool, `go(model, seqs,
steps=None, **plan options)` → a [len, vocab] logits array per sequence:
what must hold bit for bit because every kernel of the recurrent form, the
attention and the experts' routing is per row."""
import numpy as np


def greedy_is(go, model, expected):
    """transformers' generate (its cached recurrent decode) against tram's
    forward, one token at a time on the decode path. expected: [(prompt,
    logits, greedy tokens)]."""
    for prompt, _, greedy in expected:
        seq = list(prompt)
        for want in greedy:
            assert int(go(model, [seq])[0][-1].argmax()) == want
            seq.append(want)


def chunks_are_whole(go, model, seqs):
    """Token-by-token decoding, 7-token chunks, and a prefill beside decodes
    and chunks: the very bits of every prompt run whole (needs three
    sequences, the last longer than 21 tokens)."""
    whole = go(model, seqs)
    n = [len(s) for s in seqs]
    one_by_one = [[1 if t < k else 0 for k in n] for t in range(max(n))]  # every step a decode
    chunks = [[min(7, max(0, k - 7 * t)) for k in n] for t in range((max(n) + 6) // 7)]
    mixed = [[n[0], 3, 1], [0, n[1] - 3, 20], [0, 0, n[2] - 21]]  # a prefill beside decodes and chunks
    for steps in (one_by_one, chunks, mixed):
        steps = [s for s in steps if sum(s) > 0]
        for g, w in zip(go(model, seqs, steps=steps, block_size=4), whole):
            assert np.array_equal(g, w)


def mixed_steps_are_solo(go, model, n_seqs, n_solo, seed):
    """n_seqs random prompts in random mixed steps (some prefill chunks, some
    decodes, some idle, rows shuffled): the first n_solo are their solo
    runs and all are the whole batch run at once; bit for bit."""
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(0, 98, int(rng.integers(3, 30))).tolist() for _ in range(n_seqs)]
    solo = [go(model, [s])[0] for s in seqs[:n_solo]]
    steps, done = [], [0] * n_seqs
    while any(d < len(s) for d, s in zip(done, seqs)):
        row = []
        for i, s in enumerate(seqs):
            k = min(int(rng.integers(0, 6)), len(s) - done[i])
            row.append(k)
            done[i] += k
        if sum(row):
            steps.append(row)
    together = go(model, seqs, steps=steps, block_size=4, shuffle_seed=5)
    for g, w in zip(together, solo):
        assert np.array_equal(g, w)
    for g, w in zip(together, go(model, seqs)):
        assert np.array_equal(g, w)


def prefix_hit_is_whole(go, model, seed):
    """b shares a's first 32 tokens: when a has computed them, its blocks are
    published and its state kept; b matches the blocks, restores the state
    and computes only its own 13 tokens (in a chunk and decodes, beside a's
    tail): every row bit-identical to b computed alone. Returns (a, b)."""
    rng = np.random.default_rng(seed)
    shared = rng.integers(0, 98, 32).tolist()
    a, b = shared + rng.integers(0, 98, 9).tolist(), shared + rng.integers(0, 98, 13).tolist()
    alone = go(model, [b], block_size=16)[0]
    steps = [[20, 0], [12, 0], [5, 10], [4, 1], [0, 1], [0, 1]]
    got = go(model, [a, b], steps=steps, block_size=16, prefix=[[1, 0, 32]])
    assert np.array_equal(got[1][32:], alone[32:])
    assert not got[1][:32].any()  # the shared rows were not computed for b
    assert np.array_equal(got[0], go(model, [a], block_size=16)[0])
    return a, b
