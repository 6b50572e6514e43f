"""32 streaming clients at once (asyncio + openai.AsyncOpenAI) against a
real `tram serve`: each one's greedy output equals what the same request
gives alone, whatever else shares the engine's batches (continuous
batching with batch-invariant kernels), and every stream is well formed
(one id, the role first for chat, finish_reason only on the last chunk)."""
import asyncio
import random

from tram_server import server_fixture

server = server_fixture()

SUBJECTS = ("river", "mountain", "city", "garden", "winter", "engine", "library", "ocean", "market", "bridge",
            "story", "number", "paper", "stone", "music", "forest")
N_TOKENS = 8


def requests():
    rng = random.Random(20261129)
    out = []
    for i in range(32):
        subj = SUBJECTS[i % len(SUBJECTS)]
        if i % 2:
            out.append(("chat", [{"role": "user", "content": f"Write one sentence about a {subj}."}]))
        else:
            words = " ".join(rng.choice(SUBJECTS) for _ in range(rng.randint(1, 12)))
            out.append(("completion", f"The {subj} and the {words} were"))
    return out


async def stream_one(client, kind, prompt):
    if kind == "chat":
        chunks = [c async for c in await client.chat.completions.create(
            model=None, messages=prompt, max_tokens=N_TOKENS, temperature=0, stream=True)]
        assert chunks[0].choices[0].delta.role == "assistant"
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
    else:
        chunks = [c async for c in await client.completions.create(
            model=None, prompt=prompt, max_tokens=N_TOKENS, temperature=0, stream=True)]
        text = "".join(c.choices[0].text for c in chunks)
    assert len({c.id for c in chunks}) == 1
    finishes = [c.choices[0].finish_reason for c in chunks]
    assert finishes[-1] in ("stop", "length") and not any(finishes[:-1])
    return text


def solo(server, kind, prompt):
    c = server.client()
    if kind == "chat":
        return c.chat.completions.create(model=None, messages=prompt, max_tokens=N_TOKENS,
                                         temperature=0).choices[0].message.content
    return c.completions.create(model=None, prompt=prompt, max_tokens=N_TOKENS, temperature=0).choices[0].text


def test_32_concurrent_streams_match_solo(server):
    reqs = requests()

    async def run_all():
        client = server.async_client(timeout=300)
        try:
            return await asyncio.gather(*(stream_one(client, k, p) for k, p in reqs))
        finally:
            await client.close()

    together = asyncio.run(run_all())
    alone = [solo(server, k, p) for k, p in reqs]
    mismatches = [(i, a, b) for i, (a, b) in enumerate(zip(together, alone)) if a != b]
    assert not mismatches, mismatches
    assert all(alone)
