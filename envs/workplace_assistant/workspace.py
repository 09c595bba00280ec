"""The in-memory workspace of one episode (contacts, mailbox, calendar), drawn from the episode seed, and the
typed tools the model calls on it.

A workspace is a plain JSON-ready dict, so it lives in the episode state (forks copy it, nothing to pickle).
The tools are module-level functions whose signatures are exactly the model's arguments (their schemas are
what the model reads, here and through TRL's `environment_factory`); they act on the workspace bound by
`bound(...)`, which `WorkplaceEnv.call_tool` sets around every call."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

FIRST = (
    "Ana",
    "Ben",
    "Chloe",
    "Dev",
    "Eli",
    "Fay",
    "Gus",
    "Hana",
    "Ivan",
    "June",
    "Kai",
    "Lena",
    "Milo",
    "Nora",
)
LAST = ("Lopez", "Okafor", "Smith", "Patel", "Novak", "Kim", "Rossi", "Berg", "Silva", "Tanaka", "Moreau")
DOMAIN = "acme.test"
USER = f"me@{DOMAIN}"
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
TIMES = ("09:00", "10:00", "11:00", "13:00", "14:00", "15:00", "16:00")
# Topics name inbox emails, new emails, existing events and new meetings alike; each episode draws them
# without replacement, so no two things in one workspace (or task) share a subject or a title.
TOPICS = (
    "Budget review", "Quarterly plan", "Team lunch", "Server outage", "Hiring update", "Design sync",
    "Travel request", "Launch checklist", "Customer call", "Security audit", "Office move", "Roadmap chat",
    "Sprint demo", "Expense report", "Vendor contract", "Onboarding", "Release notes", "Board prep",
    "Training day", "Holiday schedule", "Product feedback", "Bug triage", "Offsite ideas", "Weekly status",
)  # fmt: skip
BODIES = (
    "Can you take a look before Friday?",
    "Here are my notes from today.",
    "Please confirm you can make it.",
    "Thanks for the quick turnaround.",
    "Let me know if anything is missing.",
    "The draft is attached for review.",
    "I moved this to next week.",
    "Sounds good, see you there.",
)
TIME = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")

_CURRENT: ContextVar[dict | None] = ContextVar("workspace", default=None)


def contact_address(first: str, last: str) -> str:
    """A contact's email address."""
    return f"{first.lower()}.{last.lower()}@{DOMAIN}"


def make_workspace(seed: int) -> dict:
    """The episode's workspace from its seed alone: 6-8 contacts, 4-7 inbox emails, 3-6 calendar events."""
    rng = random.Random(f"workplace:{seed}")
    firsts = rng.sample(FIRST, rng.randint(6, 8))  # unique first names: a name finds exactly one contact
    contacts = [{"name": f"{f} {rng.choice(LAST)}"} for f in firsts]
    for c in contacts:
        c["email"] = contact_address(*c["name"].split())
    topics = rng.sample(TOPICS, 13)
    emails = [
        {"id": i, "folder": "inbox", "sender": rng.choice(contacts)["email"], "to": [USER], "subject": topic}
        | {"body": rng.choice(BODIES)}
        for i, topic in enumerate(topics[: rng.randint(4, 7)], 1)
    ]
    events = [
        {"id": i, "title": title, "day": rng.choice(DAYS), "time": rng.choice(TIMES)}
        | {"attendees": sorted(c["email"] for c in rng.sample(contacts, rng.randint(1, 3)))}
        for i, title in enumerate(topics[7 : 7 + rng.randint(3, 6)], 1)
    ]
    # New emails and events take ids from 100 on: an id never names both an old and a new thing.
    return {"contacts": contacts, "emails": emails, "events": events, "next_id": 100}


@contextmanager
def bound(workspace: dict) -> Iterator[dict]:
    """Make `workspace` the one the tools act on, for the calls inside the block."""
    token = _CURRENT.set(workspace)
    try:
        yield workspace
    finally:
        _CURRENT.reset(token)


def _workspace() -> dict:
    workspace = _CURRENT.get()
    if workspace is None:
        raise RuntimeError("no workspace is bound: call the tools through the environment")
    return workspace


def _text(value: object, what: str) -> str:
    """A string argument, stripped; anything else is refused (the model must not get `None` sent)."""
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{what} must be a non-empty string, got {value!r}")
    return value.strip()


def _address(value: object) -> str:
    address = _text(value, "an email address").lower()
    if address.count("@") != 1 or " " in address:
        raise ValueError(f"{value!r} is not an email address; look names up with find_contact")
    return address


def _new_id(workspace: dict) -> int:
    workspace["next_id"] += 1
    return workspace["next_id"]


def _inbox_email(email_id: object) -> dict:
    if isinstance(email_id, bool) or not isinstance(email_id, int):
        raise TypeError(f"email_id must be a whole number, got {email_id!r}")
    for e in _workspace()["emails"]:
        if e["id"] == email_id and e["folder"] == "inbox":
            return e
    raise KeyError(f"no email {email_id} in the inbox")


def _send(to: list[str], subject: str, body: str) -> str:
    workspace = _workspace()
    email = {"id": _new_id(workspace), "folder": "sent", "sender": USER, "to": to, "subject": subject}
    workspace["emails"].append({**email, "body": body})
    return f"Sent email {email['id']} to {', '.join(to)}."


def find_contact(name: str) -> list:
    """Find contacts by first name, last name or full name.

    Args:
        name: the contact's name or part of it, e.g. "Ana Lopez" or "Lopez"
    """
    # Whole words, not substrings: "Ana Rossi" must not also find "Hana Rossi".
    words = set(_text(name, "name").casefold().split())
    return [dict(c) for c in _workspace()["contacts"] if words <= set(c["name"].casefold().split())]


def search_emails(query: str) -> list:
    """Search the inbox by sender or subject; returns each match's id, sender and subject.

    Args:
        query: text found in the sender's name or address, or in the subject
    """
    text = _text(query, "query").casefold()
    workspace = _workspace()
    names = {c["email"]: c["name"].casefold() for c in workspace["contacts"]}
    return [
        {"id": e["id"], "sender": e["sender"], "subject": e["subject"]}
        for e in workspace["emails"]
        if e["folder"] == "inbox"
        and any(text in field for field in (e["sender"], names.get(e["sender"], ""), e["subject"].casefold()))
    ]


def read_email(email_id: int) -> dict:
    """Read one email of the inbox.

    Args:
        email_id: the email's id, from search_emails
    """
    return dict(_inbox_email(email_id))


def send_email(to: str, subject: str, body: str) -> str:
    """Send a new email.

    Args:
        to: the recipient's email address
        subject: the subject line
        body: the text of the email
    """
    return _send([_address(to)], _text(subject, "subject"), _text(body, "body"))


def reply_email(email_id: int, body: str) -> str:
    """Reply to the sender of an inbox email (the subject becomes "Re: <subject>").

    Args:
        email_id: the id of the email replied to
        body: the text of the reply
    """
    email = _inbox_email(email_id)
    return _send([email["sender"]], f"Re: {email['subject']}", _text(body, "body"))


def forward_email(email_id: int, to: str) -> str:
    """Forward an inbox email, its body unchanged (the subject becomes "Fwd: <subject>").

    Args:
        email_id: the id of the email forwarded
        to: the recipient's email address
    """
    email = _inbox_email(email_id)
    return _send([_address(to)], f"Fwd: {email['subject']}", email["body"])


def delete_email(email_id: int) -> str:
    """Delete an email from the inbox.

    Args:
        email_id: the id of the email deleted
    """
    email = _inbox_email(email_id)
    _workspace()["emails"].remove(email)
    return f"Deleted email {email_id}."


def list_events(day: str) -> list:
    """The calendar events of one weekday.

    Args:
        day: a weekday, Monday to Friday
    """
    wanted = _day(day)
    return [dict(e) for e in _workspace()["events"] if e["day"] == wanted]


def create_event(title: str, day: str, time: str, attendees: list[str]) -> str:
    """Schedule a meeting in the calendar and invite its attendees.

    Args:
        title: the meeting's title
        day: a weekday, Monday to Friday
        time: the start time as HH:MM, e.g. "14:00"
        attendees: the attendees' email addresses
    """
    if not isinstance(attendees, list) or not attendees:
        raise TypeError(f"attendees must be a non-empty list of email addresses, got {attendees!r}")
    match = TIME.match(_text(time, "time"))
    if match is None:
        raise ValueError(f"time must be HH:MM, got {time!r}")
    workspace = _workspace()
    event = {
        "id": _new_id(workspace),
        "title": _text(title, "title"),
        "day": _day(day),
        "time": f"{int(match.group(1)):02d}:{match.group(2)}",
        "attendees": sorted({_address(a) for a in attendees}),
    }
    workspace["events"].append(event)
    return f"Created event {event['id']}."


def delete_event(event_id: int) -> str:
    """Delete (cancel) a calendar event.

    Args:
        event_id: the event's id, from list_events
    """
    if isinstance(event_id, bool) or not isinstance(event_id, int):
        raise TypeError(f"event_id must be a whole number, got {event_id!r}")
    events = _workspace()["events"]
    for e in events:
        if e["id"] == event_id:
            events.remove(e)
            return f"Deleted event {event_id}."
    raise KeyError(f"no event {event_id} in the calendar")


def _day(value: object) -> str:
    day = _text(value, "day").capitalize()
    if day not in DAYS:
        raise ValueError(f"day must be one of {', '.join(DAYS)}, got {value!r}")
    return day


TOOLS = {
    f.__name__: f
    for f in (
        find_contact,
        search_emails,
        read_email,
        send_email,
        reply_email,
        forward_email,
        delete_email,
        list_events,
        create_event,
        delete_event,
    )
}
