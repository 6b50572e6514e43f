"""vLLM's KV-cache events (--kv-events): a pyzmq SUB socket receives
tram's batches, msgpack decodes them (vLLM's array layout: [ts, events,
rank]; ["BlockStored", hashes, parent, token_ids, block_size, lora_id,
medium, lora_name], ["BlockRemoved", hashes, medium], ["AllBlocksCleared"]),
and replaying them gives exactly the prefix cache's content: the same
blocks, by their whole token prefix, as the prompts sent imply, and as many
as tram:prefix_cache_blocks says, with evictions once the cache is full.

tram binds the ipc:// endpoint (vLLM's rule) and the test connects; a PUB
socket drops what it sends before a subscriber is there, so the test waits
for its connection before the first request."""
import time

import msgpack
import pytest
import zmq

from tram_server import start

BS = 16          # --block-size
BLOCKS = 24      # --kv-cache-blocks: small, so that phase 2 evicts
TOPIC = b"kv@tram"


class Replay:
    """The cache's content as the events say: hash -> (parent hash, tokens)."""

    def __init__(self, sub):
        self.sub = sub
        self.blocks = {}
        self.seqs = []
        self.removed = 0

    def apply(self, payload):
        batch = msgpack.unpackb(payload)
        assert isinstance(batch, list) and len(batch) == 3, batch
        ts, events, rank = batch
        assert isinstance(ts, float) and abs(ts - time.time()) < 600 and rank == 0
        for ev in events:
            kind = ev[0]
            if kind == "AllBlocksCleared":
                assert ev == ["AllBlocksCleared"]
                self.blocks.clear()
            elif kind == "BlockStored":
                assert len(ev) == 8, ev
                _, hashes, parent, tokens, block_size, lora_id, medium, lora_name = ev
                assert block_size == BS and len(tokens) == BS * len(hashes) and hashes
                assert lora_id is None and medium == "GPU" and lora_name is None
                assert parent is None or parent in self.blocks, "a block stored after a parent tram does not hold"
                for i, h in enumerate(hashes):
                    assert h not in self.blocks, "a hash stored twice"
                    self.blocks[h] = (parent, tuple(tokens[i * BS:(i + 1) * BS]))
                    parent = h
            elif kind == "BlockRemoved":
                assert len(ev) == 3 and ev[2] == "GPU", ev
                for h in ev[1]:
                    assert h in self.blocks, "a hash removed that was never stored"
                    del self.blocks[h]
                    self.removed += 1
            else:
                raise AssertionError(f"unknown event {ev!r}")

    def drain(self, server, timeout=30):
        """Applies batches until tram is quiet and the replay holds as many
        blocks as tram:prefix_cache_blocks."""
        deadline = time.monotonic() + timeout
        while True:
            while self.sub.poll(300):
                topic, seq, payload = self.sub.recv_multipart()
                assert topic == TOPIC and len(seq) == 8
                self.seqs.append(int.from_bytes(seq, "big"))
                self.apply(payload)
            if server.metric("tram:prefix_cache_blocks") == len(self.blocks):
                return
            assert time.monotonic() < deadline, (len(self.blocks), server.metric("tram:prefix_cache_blocks"))

    def prefixes(self):
        """Every block as the whole token prefix it ends (root first)."""
        out = set()
        for h in self.blocks:
            chain = []
            while h is not None:
                parent, tokens = self.blocks[h]
                chain[:0] = tokens
                h = parent
            out.add(tuple(chain))
        return out


def full_block_prefixes(ids):
    return {tuple(ids[:k * BS]) for k in range(1, len(ids) // BS + 1)}


@pytest.fixture
def fleet(tmp_path):
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
    mon = sub.get_monitor_socket(zmq.EVENT_CONNECTED)
    endpoint = f"ipc://{tmp_path}/kv.sock"
    sub.connect(endpoint)  # zmq retries until tram binds it
    srv = start(tmp_path, "--kv-events", endpoint, "--kv-events-topic", TOPIC.decode(), "--block-size", str(BS),
                "--kv-cache-blocks", str(BLOCKS), "--max-model-len", str(BS * BLOCKS))
    try:
        assert mon.poll(30000), "the subscriber never connected"
        time.sleep(0.5)  # the subscription reaches tram's PUB socket
        yield srv, Replay(sub)
    finally:
        rc = srv.stop()
        sub.disable_monitor()
        mon.close(0)
        sub.close(0)
        ctx.term()
    assert rc == 0, srv.log()[-3000:]
    assert "kv_events: publishing" in srv.log()


def complete(srv, ids):
    r = srv.post("/v1/completions", json={"prompt": ids, "max_tokens": 1, "temperature": 0})
    assert r.status_code == 200, r.text


def test_events_replay_to_the_prefix_cache(fleet):
    srv, replay = fleet
    shared = srv.tokenize(prompt="The KV cache of a shared system prompt, " * 6)[:3 * BS]
    # phase 1: prompts sharing a three-block prefix, all held (no eviction);
    # lengths off the block edge so that the one token fed back completes no block
    prompts = [shared + srv.tokenize(prompt=f" question {i}: " + "why? " * (4 + 3 * i)) for i in range(3)]
    prompts = [p[:len(p) - (1 if len(p) % BS == BS - 1 else 0)] for p in prompts]
    for p in prompts:
        complete(srv, p)
    replay.drain(srv)
    want = set().union(*(full_block_prefixes(p) for p in prompts))
    assert replay.prefixes() == want
    assert replay.seqs[0] in (0, 1)  # 0 is the AllBlocksCleared batch, sent when the engine started
    assert replay.seqs == list(range(replay.seqs[0], replay.seqs[0] + len(replay.seqs))), replay.seqs
    assert replay.removed == 0

    # phase 2: more distinct prompts than the cache holds: the oldest are evicted
    more = [srv.tokenize(prompt=f"Unrelated text number {i}. " * 9)[:4 * BS + 3] for i in range(8)]
    everything = set(want)
    for p in more:
        complete(srv, p)
        everything |= full_block_prefixes(p)
        replay.drain(srv)
        assert replay.prefixes() <= everything
        assert full_block_prefixes(p) <= replay.prefixes()  # the newest prompt is held
    assert replay.removed > 0, "no eviction: the cache was not filled"
    assert len(replay.blocks) <= BLOCKS
    assert replay.seqs == list(range(replay.seqs[0], replay.seqs[0] + len(replay.seqs)))
