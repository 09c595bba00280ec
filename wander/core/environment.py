"""The environment abstraction: one object defines a task and serves every consumer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from wander.core.episode import Episode, EvalResult, aggregate
from wander.core.parser import XMLParser
from wander.core.pipeline_hooks import PipelineHooks
from wander.core.policy import Message, Policy, Reply
from wander.core.rubric import Rubric

T = TypeVar("T")
R = TypeVar("R")
# Threads of one batch step of a blocking env; what really runs at once is the env's own bound (a sandbox's `parallel`).
STEP_THREADS = 32


class Environment(PipelineHooks):
    """A multi-turn environment: dataset of episode specs, rubric, parser, interaction rules.

    Subclasses override the episode protocol: `setup_state`, `initial_messages`,
    `env_response` (the environment's answer to each model turn) and `is_done`. Everything
    else (the game API, batched rollouts, evaluation) is shared, so training and evaluation
    run the exact same episode code. What the pipeline asks of an env (its evaluation suite, spec checks,
    curation defaults, teacher) has defaults in `wander.core.pipeline_hooks.PipelineHooks`. Powers only some envs have
    (exact evaluation, worst case, decision branching, augmentation) are protocols an env opts into by defining
    their members (`wander.core.capabilities`); the base class has none of them.

    What an agent may see: an env declares the keys of its episode spec and state that hold an answer, a reference
    solution or anything else the agent must find for itself (`private_spec_keys`, `private_state_keys`); whatever
    hands an episode to an agent (the env server, the game API's `info`) shows only `public_spec` / `public_state`.
    """

    # `answer` is what `score` hands the rubric as the episode's answer, so it is private in every env by default;
    # an env with other hidden fields names them all (and may override the two methods for finer views).
    private_spec_keys: frozenset[str] = frozenset({"answer"})
    private_state_keys: frozenset[str] = frozenset()
    # A step may block for seconds (code run in a sandbox, a remote judge): `wander env serve` then steps each session
    # on its own thread, so one slow step does not stall the others (`--threaded` forces it for any env), and a
    # batch's steps and scoring run on threads (`map_steps`: rollouts, replays).
    steps_block: bool = False
    # State keys and rubric values measured on the machine (the seconds code ran), not played: a replay of the episode
    # (`wander.core.replay`, curation's gate) does not compare them. Never a weighted rubric value.
    measured_keys: frozenset[str] = frozenset()

    def __init__(
        self,
        *,
        dataset: dict[str, Any] | None = None,
        rubric: Rubric | None = None,
        parser: XMLParser | None = None,
        system_prompt: str = "",
        max_turns: int = 8,
        name: str | None = None,
    ):
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.dataset = dataset or {}
        self.parser = parser or XMLParser()
        self.rubric = rubric or Rubric(parser=self.parser)
        if self.rubric.parser is None:
            self.rubric.parser = self.parser
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.name = name or type(self).__name__
        self.full_history = True  # every turn reads the whole conversation (see `observation`)
        self._episode: Episode | None = None

    # ----- episode protocol (override in subclasses) -----

    def setup_state(self, spec: dict) -> dict:
        """Per-episode state at the start of an episode."""
        return {}

    def initial_messages(self, spec: dict, state: dict) -> list[Message]:
        """System prompt plus the spec's prompt (a string or a list of messages)."""
        prompt = spec["prompt"]
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages

    def env_response(self, messages: list[Message], state: dict) -> list[Message]:
        """The environment's reply to the latest model turn; set state['done'] to end the episode."""
        state["done"] = True
        return []

    def is_done(self, messages: list[Message], state: dict) -> bool:
        """Whether the episode is over (the turn limit is checked separately)."""
        return bool(state.get("done"))

    def public_spec(self, spec: dict) -> dict:
        """What an agent may see of an episode spec: every key but `private_spec_keys`."""
        return {k: v for k, v in spec.items() if k not in self.private_spec_keys}

    def public_state(self, state: dict) -> dict:
        """What an agent may see of an episode's state: every key but `private_state_keys`."""
        return {k: v for k, v in state.items() if k not in self.private_state_keys}

    def observation(self, episode: Episode) -> list[Message]:
        """What the policy reads before its next turn: by default the whole conversation so far."""
        return episode.messages

    def training_conversations(self, messages: list[Message]) -> list[list[Message]]:
        """What SFT trains on for one played episode: the whole conversation up to its last reply (the env's answer
        after it teaches nothing: a coding episode ends on its tests passing), or with per-turn observations
        (`full_history` False) one conversation per model turn: what that turn read, then its reply."""
        if self.full_history:
            replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
            return [messages[: replies[-1] + 1] if replies else messages]
        return [
            self.observation(Episode(spec={}, messages=messages[:i], state={}, prompt_len=0)) + [message]
            for i, message in enumerate(messages)
            if message["role"] == "assistant"
        ]

    def make_spec(self, seed: int) -> dict:
        """The episode spec for a seed; by default a row of the train split chosen by the seed."""
        train = self.get_dataset("train")
        return dict(train[seed % len(train)])

    def corpus(self) -> Iterator[str]:
        """Every string the environment can show a model (used to build tokenizers)."""
        if self.system_prompt:
            yield self.system_prompt
        for split in self.dataset.values():
            for row in split:
                yield from (m["content"] for m in self.initial_messages(row, self.setup_state(row)))

    # ----- data -----

    def get_dataset(self, split: str = "train"):
        """The `datasets.Dataset` of episode specs for a split."""
        if split not in self.dataset:
            raise KeyError(f"{self.name} has no split {split!r}; available: {sorted(self.dataset)}")
        return self.dataset[split]

    @property
    def is_single_turn(self) -> bool:
        """True when an episode is exactly one model turn."""
        return self.max_turns == 1

    # ----- episodes -----

    def start(self, spec: dict) -> Episode:
        """A fresh episode for a spec, ready for the first model turn."""
        state = self.setup_state(spec)
        state.update(turn=0, done=False)
        messages = self.initial_messages(spec, state)
        return Episode(spec=dict(spec), messages=messages, state=state, prompt_len=len(messages))

    def advance(self, episode: Episode, reply: Reply) -> None:
        """Apply one model turn to an episode and append the environment's answer."""
        episode.messages.append(reply.message())
        episode.replies.append(reply)
        episode.state["turn"] += 1
        try:
            episode.messages.extend(self.env_response(episode.messages, episode.state))
        except Exception as exc:  # noqa: BLE001 - a broken episode is reported, not fatal to the batch
            episode.error = f"env_response: {type(exc).__name__}: {exc}"
            episode.state["done"] = True
        episode.done = (
            self.is_done(episode.messages, episode.state) or episode.state["turn"] >= self.max_turns
        )

    def map_steps(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """`[fn(item) for item in items]`, on threads when the env's steps block (a batch's sandbox runs overlap)."""
        if not self.steps_block or len(items) < 2:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(min(len(items), STEP_THREADS)) as pool:
            return list(pool.map(fn, items))

    def advance_all(self, pairs: Sequence[tuple[Episode, Reply]]) -> None:
        """`advance` each episode by its reply, at once where the env's steps block."""
        self.map_steps(lambda pair: self.advance(*pair), pairs)

    def score(self, episodes: Sequence[Episode]) -> None:
        """Fill reward, per-function values and errors of finished episodes."""
        inputs = [ep.scoring_inputs() for ep in episodes]
        if (
            self.steps_block
        ):  # its rubric may block too (coding lints the code): each episode on a step thread
            scores = [s for one in self.map_steps(lambda i: self.rubric.score([i]), inputs) for s in one]
        else:  # one batch: the rubric's async functions (a judge) run concurrently
            scores = self.rubric.score(inputs)
        for ep, s in zip(episodes, scores, strict=True):
            ep.values = s.values
            ep.error = ep.error or s.error
            ep.reward = 0.0 if ep.error else s.reward

    def rollout(
        self, policy: Policy, specs: Sequence[dict], max_batch_size: int | None = None
    ) -> list[Episode]:
        """Play one episode per spec; each turn, all live episodes go to the policy as one batch."""
        episodes = [self.start(spec) for spec in specs]
        while live := [ep for ep in episodes if not ep.done]:
            step = max_batch_size or len(live)
            for i in range(0, len(live), step):
                chunk = live[i : i + step]
                replies = policy([self.observation(ep) for ep in chunk])
                if len(replies) != len(chunk):
                    raise ValueError(
                        f"policy {type(policy).__name__} returned {len(replies)} replies for {len(chunk)} "
                        "conversations; a policy must answer every conversation in order"
                    )
                self.advance_all(
                    [
                        (ep, r if isinstance(r, Reply) else Reply(str(r)))
                        for ep, r in zip(chunk, replies, strict=True)
                    ]
                )
        self.score(episodes)
        return episodes

    def evaluate(
        self,
        policy: Policy,
        n: int | None = None,
        split: str = "eval",
        specs: Sequence[dict] | None = None,
        max_batch_size: int | None = None,
    ) -> EvalResult:
        """Play `n` episodes of a split (or the given specs) and aggregate metrics with 95% CIs."""
        if specs is None:
            data = self.get_dataset(split)
            count = len(data) if n is None else min(n, len(data))
            specs = [data[i] for i in range(count)]
        episodes = self.rollout(policy, specs, max_batch_size=max_batch_size)
        return EvalResult(trajectories=episodes, metrics=aggregate(episodes, self.rubric.names))

    __call__ = evaluate

    def curve_metrics(self, policy: Policy, n: int = 64) -> dict[str, float]:
        """A small frozen suite for learning curves: rubric means over the first `n` eval episodes."""
        result = self.evaluate(policy, n=n, split="eval")
        return {name: stats["mean"] for name, stats in result.metrics.items()}

    def curve_score(self, values: dict[str, float]) -> float:
        """One number ranking learning-curve points (higher is better): here the suite's mean reward."""
        return values["reward"]

    def __rshift__(self, trainer: Any) -> Any:
        """`env >> trainer_spec(GRPOTrainer, model=..., args=...)`: the spec composes itself (`__rrshift__`), so
        the core never imports the training layer; anything else on the right is refused here, saying what works."""
        if callable(getattr(type(trainer), "__rrshift__", None)):
            return NotImplemented
        raise TypeError(
            f"env >> {trainer!r}: the right-hand side of `>>` is trainer_spec(Trainer, model=..., args=...) from "
            "wander.training; compose(env, Trainer, ...) takes a class or functools.partial"
        )

    # ----- Gymnasium-style game API for one episode -----

    def reset(self, seed: int | None = None, spec: dict | None = None) -> str:
        """Start one episode from a seed (or an explicit spec); return the first observation."""
        if spec is None:
            if seed is None:
                raise ValueError("reset needs a seed or a spec: every episode is a function of its seed")
            spec = self.make_spec(seed)
        self._episode = self.start(spec)
        return self._episode.messages[-1]["content"]

    def step(self, action: str) -> tuple[str, float, bool, dict]:
        """Play the model's message; return (observation, reward, done, info)."""
        ep = self._episode
        if ep is None or ep.done:
            raise RuntimeError("step() called without a live episode; call reset(seed) first")
        self.advance(ep, Reply(action))
        last = ep.messages[-1]
        observation = "" if last["role"] == "assistant" else last["content"]
        if ep.done:
            self.score([ep])
        # The caller of the game API is the agent: it gets the public state, never an answer the env keeps.
        info = {"state": self.public_state(ep.state), "values": ep.values, "error": ep.error}
        return observation, (ep.reward if ep.done else 0.0), ep.done, info

    @property
    def episode(self) -> Episode | None:
        """The episode driven by reset/step, for inspection."""
        return self._episode


class SingleTurnEnv(Environment):
    """One model turn per episode: prompt in, answer scored."""

    def __init__(self, **kwargs: Any):
        kwargs["max_turns"] = 1
        super().__init__(**kwargs)
