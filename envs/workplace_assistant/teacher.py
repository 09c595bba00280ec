"""The scripted teacher: reads the request back from the user's message, looks up what it needs with the tools
and acts, one tool call per turn, then says it is done. It slips on a share `slip` of the requests: a wrong
recipient (a check fails: partial credit), an action done twice (a side effect: penalised) or a goal skipped.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Generator

from envs.workplace_assistant.workspace import BODIES, DAYS, FIRST, LAST, TIMES, TOPICS, contact_address
from wander.core.policy import Conversation, Reply, UnplayableRequest

# The sentences of `goals.sentence`; a sentence ends at a period followed by the next one or by the end (email
# addresses have periods too, never followed by a space).
END = r"\.(?= [A-Z]|$)"
PATTERNS = {
    "send": rf'Send an email to (?P<to>[^"]+?) with subject "(?P<subject>[^"]*)" '
    rf'and body "(?P<body>[^"]*)"{END}',
    "meeting": rf'Schedule a meeting "(?P<title>[^"]*)" on (?P<day>\w+) at (?P<time>[\d:]+) '
    rf"with (?P<with>.+?){END}",
    "cancel": rf'Cancel the meeting "(?P<title>[^"]*)" on (?P<day>\w+){END}',
    "reply": rf'Reply to the email from (?P<sender>.+?) about "(?P<subject>[^"]*)" with "(?P<body>[^"]*)"'
    rf"(?P<then_delete> and then delete it)?{END}",
    "forward": rf'Forward the email from (?P<sender>.+?) about "(?P<subject>[^"]*)" to (?P<to>.+?){END}',
    "delete": rf'Delete the email from (?P<sender>.+?) about "(?P<subject>[^"]*)"{END}',
}
PATTERNS = {kind: re.compile(p) for kind, p in PATTERNS.items()}
SLIPS = {"recipient": ("send", "forward", "meeting"), "duplicate": ("send", "reply", "forward", "meeting")}
DONE = "Done: everything you asked is taken care of."

Call = tuple[str, dict]


def read_request(request: str) -> list[dict]:
    """The goals of a request as `goals.sentence` writes them, in order."""
    found = [(m.start(), kind, m.groupdict()) for kind, p in PATTERNS.items() for m in p.finditer(request)]
    goals = [{"kind": kind, **fields} for _, kind, fields in sorted(found, key=lambda f: f[0])]
    for g in goals:
        if g["kind"] == "meeting":
            g["with"] = re.split(r", | and ", g["with"])
    return goals


def tool_call(name: str, arguments: dict) -> str:
    """The text of one tool call, as the env's protocol reads it."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def wrong_address(address: str) -> str:
    """A near miss of an address: the next first name, same last name (a colleague, not the one asked)."""
    local, _, domain = address.partition("@")
    first, dot, last = local.partition(".")
    known = first.capitalize() in FIRST
    other = FIRST[(FIRST.index(first.capitalize()) + 1) % len(FIRST)].lower() if known else f"{first}x"
    return f"{other}{dot}{last}@{domain}"


def _resolve(who: str) -> Generator[Call, object, str]:
    """An address as given, or looked up by name."""
    if "@" in who:
        return who
    found = yield ("find_contact", {"name": who})
    if not isinstance(found, list) or not found or not isinstance(found[0], dict) or "email" not in found[0]:
        raise UnplayableRequest(f"find_contact found no contact named {who!r}")
    return found[0]["email"]


def _find(call: Call, field: str, value: str) -> Generator[Call, object, int]:
    """The id of the listed item whose `field` is `value`."""
    found = yield call
    ids = (
        [x.get("id") for x in found if isinstance(x, dict) and x.get(field) == value]
        if isinstance(found, list)
        else []
    )
    if not ids:
        raise UnplayableRequest(f"{call[0]} found nothing with {field} {value!r}")
    return ids[0]


def plan(goals: list[dict], slip: tuple[str, int] | None) -> Generator[Call, object, None]:
    """The tool calls for the goals, each lookup's result sent in; `slip` is (kind, goal index) or None."""
    for i, g in enumerate(goals):
        kind, slipped = g["kind"], slip[0] if slip and slip[1] == i else None
        if slipped == "skip":
            continue
        if kind in ("send", "forward"):
            to = yield from _resolve(g["to"])
            to = wrong_address(to) if slipped == "recipient" else to
        if kind == "send":
            action = ("send_email", {"to": to, "subject": g["subject"], "body": g["body"]})
        elif kind == "meeting":
            attendees = []
            for who in g["with"]:
                attendees.append((yield from _resolve(who)))
            attendees[0] = wrong_address(attendees[0]) if slipped == "recipient" else attendees[0]
            fields = {"title": g["title"], "day": g["day"], "time": g["time"], "attendees": attendees}
            action = ("create_event", fields)
        elif kind == "cancel":
            event = yield from _find(("list_events", {"day": g["day"]}), "title", g["title"])
            action = ("delete_event", {"event_id": event})
        else:
            email = yield from _find(("search_emails", {"query": g["subject"]}), "subject", g["subject"])
            if kind == "forward":
                action = ("forward_email", {"email_id": email, "to": to})
            elif kind == "reply":
                action = ("reply_email", {"email_id": email, "body": g["body"]})
            else:
                action = ("delete_email", {"email_id": email})
        yield action
        if slipped == "duplicate":
            yield action
        if kind == "reply" and g["then_delete"]:
            yield ("delete_email", {"email_id": email})


def _result(message: dict) -> object:
    """A tool message's content as JSON when it is (lookups), else the text (actions, errors)."""
    content = message.get("content")
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return content


class WorkplaceTeacher:
    """The tool-calling teacher with slip rate `slip`. Whether and how it slips is drawn from the request alone,
    never from `seed`: the embedded server builds a teacher with a new seed for every turn, and a plan (which
    goal goes wrong) must hold across the turns of an episode, as a tic-tac-toe opponent's reply is a function
    of the board."""

    scripted = True

    def __init__(self, slip: float = 0.0, seed: int = 0):
        self.slip, self.seed = slip, seed

    def __call__(self, conversations: list[Conversation]) -> list[Reply]:
        """The next tool call of each conversation, or the closing message once every goal is done."""
        return [Reply(self.reply(c)) for c in conversations]

    def choose_slip(self, request: str, goals: list[dict]) -> tuple[str, int] | None:
        """Whether this request slips, how, and on which goal."""
        rng = random.Random(f"workplace-teacher:{request}")
        if not rng.random() < self.slip:
            return None
        kind = rng.choice(("recipient", "duplicate", "skip"))
        fits = [i for i, g in enumerate(goals) if kind == "skip" or g["kind"] in SLIPS[kind]]
        return (kind, rng.choice(fits)) if fits else ("skip", rng.randrange(len(goals)))

    def reply(self, conversation: Conversation) -> str:
        """The next message of this teacher in one conversation."""
        last = conversation[-1] if conversation else None
        if not isinstance(last, dict) or last.get("role") not in ("user", "tool"):
            raise UnplayableRequest("the last message is neither the user's nor a tool result")
        request = next((m.get("content") for m in conversation if m.get("role") == "user"), None)
        goals = read_request(request if isinstance(request, str) else "")
        if not goals:
            raise UnplayableRequest("the first user message is not a request of this environment")
        steps = plan(goals, self.choose_slip(request, goals))
        try:
            call = next(steps)
            for message in conversation:
                if message.get("role") == "tool":
                    call = steps.send(_result(message))
        except StopIteration:
            return DONE
        return tool_call(*call)


# The most a workspace holds (`make_workspace`): events, inbox emails, attendees of one event; ids stay below 1000.
MOST_EVENTS, MOST_EMAILS, MOST_ATTENDEES, LONGEST_ID = 6, 7, 3, 999


def _longest(words: tuple[str, ...]) -> str:
    return max(words, key=len)


def longest_reply() -> str:
    """A reply at least as long as any of this teacher's: each of its calls with the vocabulary's longest values."""
    address = max((contact_address(f, last) for f in FIRST for last in LAST), key=len)
    name, topic, body = f"{_longest(FIRST)} {_longest(LAST)}", _longest(TOPICS), _longest(BODIES)
    event = {"title": topic, "day": _longest(DAYS), "time": TIMES[0], "attendees": [address] * MOST_ATTENDEES}
    calls = [
        ("find_contact", {"name": name}),
        ("search_emails", {"query": topic}),
        ("list_events", {"day": _longest(DAYS)}),
        ("send_email", {"to": address, "subject": topic, "body": body}),
        ("create_event", event),
        ("forward_email", {"email_id": LONGEST_ID, "to": address}),
        ("reply_email", {"email_id": LONGEST_ID, "body": body}),
        ("delete_email", {"email_id": LONGEST_ID}),
        ("delete_event", {"event_id": LONGEST_ID}),
    ]
    return max([DONE, *(tool_call(n, a) for n, a in calls)], key=len)


def longest_result() -> str:
    """A tool result at least as long as any the teacher's calls get: a whole calendar on one day, or a whole inbox
    found by one search (the lookups), else an action's confirmation."""
    address = max((contact_address(f, last) for f in FIRST for last in LAST), key=len)
    topic = _longest(TOPICS)
    event = {"id": LONGEST_ID, "title": topic, "day": _longest(DAYS), "time": TIMES[0]}
    events = [{**event, "attendees": [address] * MOST_ATTENDEES}] * MOST_EVENTS
    emails = [{"id": LONGEST_ID, "sender": address, "subject": f"Fwd: {topic}"}] * MOST_EMAILS
    sent = f"Sent email {LONGEST_ID} to {address}."
    return max([json.dumps(events), json.dumps(emails), sent], key=len)
