"""TransformersPolicy: batched, left-padded, seeded generation with exact token ids."""

from __future__ import annotations

import pytest
import torch

from wander.core.policy import Policy, Reply
from wander.policies.scratch_model import build_model, build_scratch_model, build_tokenizer, load_tokenizer
from wander.policies.scratch_model_config import ScratchModelConfig
from wander.policies.transformers_policy import TransformersPolicy

CONFIG = ScratchModelConfig(vocab_size=400, seed=0)
SYSTEM = {"role": "system", "content": "You play tic-tac-toe. Answer <move>N</move>."}
# Prompts of different lengths, each with the reply the fixture teaches.
TAUGHT = [
    ([{"role": "user", "content": "Board . . . / . . . / . . . Your move."}], "<move>4</move>"),
    ([SYSTEM, {"role": "user", "content": "Board X . . / . O . / . . . Your move."}], "<move>8</move>"),
    (
        [
            SYSTEM,
            {"role": "user", "content": "Board . . . / . . . / . . . Your move."},
            {"role": "assistant", "content": "<move>0</move>"},
            {"role": "user", "content": "Opponent took 4.\nBoard X . . / . O . / . . . Your move, quickly."},
        ],
        "<think>block the diagonal</think>\n<move>8</move>",
    ),
    ([{"role": "user", "content": "hi"}], "<move>2</move>"),
]
CONVERSATIONS = [conversation for conversation, _ in TAUGHT]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run best on one thread; two threads crawl when other processes share the two cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model taught (overfit) to answer the TAUGHT prompts, so it stops on its own."""
    texts = [m["content"] for c, reply in TAUGHT for m in c] + [reply for _, reply in TAUGHT]
    tokenizer = build_tokenizer(texts * 2, CONFIG)
    model = build_model(tokenizer, CONFIG)
    batch = tokenizer.apply_chat_template(
        [c + [{"role": "assistant", "content": reply}] for c, reply in TAUGHT],
        return_dict=True,
        return_assistant_tokens_mask=True,
        padding=True,
        return_tensors="pt",
    )
    labels = batch["input_ids"].masked_fill(batch["assistant_masks"] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for _ in range(200):
            loss = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels
            ).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    assert loss.item() < 0.05
    model.eval()
    path = tmp_path_factory.mktemp("trained") / "model"
    tokenizer.save_pretrained(path)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    texts = [m["content"] for c in CONVERSATIONS for m in c]
    return build_scratch_model(texts * 2, tmp_path_factory.mktemp("untrained") / "model", CONFIG)


def test_policy_satisfies_the_protocol(trained):
    policy = TransformersPolicy.from_pretrained(trained, greedy=True, max_new_tokens=4)
    assert isinstance(policy, Policy)
    assert policy([]) == []
    replies = policy(CONVERSATIONS[:1])
    assert len(replies) == 1 and isinstance(replies[0], Reply)


def test_greedy_reproduces_taught_replies_and_stops_on_end_of_turn(trained):
    policy = TransformersPolicy.from_pretrained(trained, greedy=True, max_new_tokens=40)
    eos = policy.tokenizer.eos_token_id
    replies = policy(CONVERSATIONS)
    for reply, (conversation, taught) in zip(replies, TAUGHT, strict=True):
        assert reply.content == taught
        assert reply.extra["finish_reason"] == "stop"
        assert reply.completion_ids[-1] == eos
        assert eos not in reply.completion_ids[:-1]
        expected = policy.tokenizer.apply_chat_template(conversation, add_generation_prompt=True)["input_ids"]
        assert reply.prompt_ids == expected  # unpadded
        assert policy.tokenizer.pad_token_id not in reply.prompt_ids + reply.completion_ids
        assert reply.logprobs is None
        assert reply.message() == {"role": "assistant", "content": taught}


def test_batched_greedy_equals_one_by_one(trained, untrained):
    for path in (trained, untrained):
        policy = TransformersPolicy.from_pretrained(path, greedy=True, max_new_tokens=24)
        batched = policy(CONVERSATIONS)
        single = [policy([conversation])[0] for conversation in CONVERSATIONS]
        assert len({len(r.prompt_ids) for r in batched}) == len(CONVERSATIONS)  # really left-padded
        assert [r.completion_ids for r in batched] == [r.completion_ids for r in single]
        assert [r.content for r in batched] == [r.content for r in single]
        assert [r.prompt_ids for r in batched] == [r.prompt_ids for r in single]


def test_max_batch_size_chunks_without_changing_greedy_output(trained):
    whole = TransformersPolicy.from_pretrained(trained, greedy=True, max_new_tokens=24)
    chunked = TransformersPolicy.from_pretrained(trained, greedy=True, max_new_tokens=24, max_batch_size=3)
    conversations = CONVERSATIONS * 2
    assert [r.completion_ids for r in chunked(conversations)] == [
        r.completion_ids for r in whole(conversations)
    ]


def test_truncated_reply_reports_length(trained):
    policy = TransformersPolicy.from_pretrained(trained, greedy=True, max_new_tokens=3)
    for reply in policy(CONVERSATIONS):
        assert reply.extra["finish_reason"] == "length"
        assert len(reply.completion_ids) == 3
        assert policy.tokenizer.eos_token_id not in reply.completion_ids


def test_sampling_is_reproducible_from_the_seed(untrained):
    def policy(seed: int) -> TransformersPolicy:
        return TransformersPolicy.from_pretrained(untrained, temperature=1.0, max_new_tokens=12, seed=seed)

    a, b, c = policy(7), policy(7), policy(8)
    first_a, first_b, first_c = a(CONVERSATIONS), b(CONVERSATIONS), c(CONVERSATIONS)
    assert [r.completion_ids for r in first_a] == [r.completion_ids for r in first_b]
    assert [r.completion_ids for r in first_a] != [r.completion_ids for r in first_c]
    # The seed advances per call, deterministically: a second call differs from the first, equally for a and b.
    second_a, second_b = a(CONVERSATIONS), b(CONVERSATIONS)
    assert [r.completion_ids for r in second_a] == [r.completion_ids for r in second_b]
    assert [r.completion_ids for r in second_a] != [r.completion_ids for r in first_a]
    # An explicit seed replays a call.
    assert [r.completion_ids for r in a(CONVERSATIONS, seed=123)] == [
        r.completion_ids for r in b(CONVERSATIONS, seed=123)
    ]


def test_sampling_leaves_global_random_state_alone(untrained):
    policy = TransformersPolicy.from_pretrained(untrained, max_new_tokens=4, seed=1)
    torch.manual_seed(99)
    expected = torch.rand(3)
    torch.manual_seed(99)
    policy(CONVERSATIONS)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("greedy", [True, False])
def test_logprobs_match_a_forward_pass(untrained, greedy):
    temperature = 0.7
    policy = TransformersPolicy.from_pretrained(
        untrained, greedy=greedy, temperature=temperature, max_new_tokens=8, return_logprobs=True, seed=3
    )
    for reply in policy(CONVERSATIONS):
        assert len(reply.logprobs) == len(reply.completion_ids)
        ids = torch.tensor([reply.prompt_ids + reply.completion_ids])
        with torch.no_grad():
            logits = policy.model(ids).logits[0, len(reply.prompt_ids) - 1 : -1]
        if not greedy:
            logits = logits / temperature
        expected = logits.log_softmax(-1).gather(-1, ids[0, len(reply.prompt_ids) :, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(reply.logprobs), expected, atol=1e-4)
        if greedy:  # the chosen token is the most likely one
            assert torch.equal(logits.argmax(-1), ids[0, len(reply.prompt_ids) :])


def test_policy_from_objects_matches_from_pretrained(trained):
    from_disk = TransformersPolicy.from_pretrained(trained, greedy=True, max_new_tokens=24)
    tokenizer = load_tokenizer(trained)
    in_memory = TransformersPolicy(from_disk.model, tokenizer, greedy=True, max_new_tokens=24, device="cpu")
    assert [r.content for r in in_memory(CONVERSATIONS)] == [reply for _, reply in TAUGHT]
    assert in_memory.device.type == "cpu" and in_memory.stop_ids == [tokenizer.eos_token_id]


def test_temperature_zero_means_greedy(trained):
    policy = TransformersPolicy.from_pretrained(trained, temperature=0.0, max_new_tokens=24)
    assert policy.greedy and not policy.generation_config().do_sample
    assert [r.content for r in policy(CONVERSATIONS)] == [reply for _, reply in TAUGHT]


def test_rejects_bad_arguments(trained):
    with pytest.raises(ValueError, match="max_new_tokens"):
        TransformersPolicy.from_pretrained(trained, max_new_tokens=0)
    with pytest.raises(ValueError, match="max_batch_size"):
        TransformersPolicy.from_pretrained(trained, max_batch_size=0)
    with pytest.raises(ValueError, match="temperature"):
        TransformersPolicy.from_pretrained(trained, temperature=-1.0)


def test_a_training_model_is_given_back_in_training_mode(trained):
    policy = TransformersPolicy.from_pretrained(trained, greedy=True, max_new_tokens=24)
    policy.model.train()
    assert [r.content for r in policy(CONVERSATIONS)] == [reply for _, reply in TAUGHT]
    assert policy.model.training


@pytest.mark.parametrize("fast_greedy", [True, False])
def test_bf16_generation_computes_in_bf16_and_keeps_the_weights(trained, fast_greedy, monkeypatch):
    fp32 = TransformersPolicy.from_pretrained(trained, greedy=True, bf16=False, fast_greedy=fast_greedy)
    half = TransformersPolicy(fp32.model, fp32.tokenizer, greedy=True, bf16=True, fast_greedy=fast_greedy)
    assert (fp32.bf16, half.bf16) == (False, True)
    seen, linear = [], torch.nn.functional.linear

    def recorded(*args, **kwargs):  # every projection, through transformers' layers or the fast greedy decode
        out = linear(*args, **kwargs)
        seen.append(out.dtype)
        return out

    monkeypatch.setattr(torch.nn.functional, "linear", recorded)
    plain = [r.content for r in fp32(CONVERSATIONS)]
    assert set(seen) == {torch.float32}
    seen.clear()
    autocast = [r.content for r in half(CONVERSATIONS)]
    assert set(seen) == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in fp32.model.parameters())
    # The taught replies survive bf16 rounding.
    assert autocast == plain == [reply for _, reply in TAUGHT]
