"""Tasks over a workspace and their verification by state.

A task is a list of goals (send, schedule, reply, forward, delete, cancel). Each goal costs the tool calls it
needs: one for the action, one more per lookup (a contact's address, an email's or an event's id). Stratum k
asks for k+1 calls in all. What a task must change is its `expect`: the emails to be sent, the events to be
created, the emails and events to be deleted. `verify` compares the final workspace with the initial one:

- every expected email is three checks (recipients, subject, body), every expected event three (title, day and
  time, attendees), every expected deletion one; each expected item is matched to the new item that passes
  most of its checks (a reply sent to the wrong person still counts as that reply, with one check failed);
- every other change is a side effect: a new email or event that matches nothing asked, a deletion not asked.

The reward is `max(0, passed / checks - 0.5 * side_effects)`: the share of the state the task asked for, minus
0.5 for every unwanted change, floored at 0 (a destructive or spamming assistant is worse than an idle
one)."""

from __future__ import annotations

import random
from collections.abc import Callable

from envs.workplace_assistant.workspace import BODIES, DAYS, TIMES, TOPICS

PENALTY = 0.5  # reward lost per side effect
MAX_STRATA = 8  # the fresh topics of a workspace (11 at least) must outlast the goals of the hardest stratum


def _who(contact: dict, by_name: bool) -> str:
    return contact["name"] if by_name else contact["email"]


def _goal(rng: random.Random, cost: int, workspace: dict, emails: list, events: list, fresh: list) -> dict:
    """One goal of `cost` tool calls; targets are popped from `emails`/`events` so no two goals share one."""
    contacts = workspace["contacts"]
    kinds = ["send", "meeting"] if cost < 3 else ["meeting"]
    if emails:
        kinds += {1: [], 2: ["reply", "delete", "forward"], 3: ["reply", "forward"]}[cost]
    if events and cost == 2:
        kinds.append("cancel")
    kind = rng.choice(kinds)
    if kind == "send":
        contact = rng.choice(contacts)
        return {
            "kind": kind,
            "to": _who(contact, cost == 2),
            "address": contact["email"],
            "subject": fresh.pop(),
            "body": rng.choice(BODIES),
        }
    if kind == "meeting":
        invited = rng.sample(contacts, max(cost - 1, rng.randint(1, 2)))
        return {
            "kind": kind,
            "title": fresh.pop(),
            "day": rng.choice(DAYS),
            "time": rng.choice(TIMES),
            "with": [_who(c, i < cost - 1) for i, c in enumerate(invited)],
            "attendees": sorted(c["email"] for c in invited),
        }
    if kind == "cancel":
        event = events.pop()
        return {"kind": kind, "event": event["id"], "title": event["title"], "day": event["day"]}
    email = emails.pop()
    sender = next(c["name"] for c in contacts if c["email"] == email["sender"])
    goal = {"kind": kind, "email": email["id"], "sender": sender, "subject": email["subject"]}
    if kind == "reply":
        goal.update(body=rng.choice(BODIES), then_delete=cost == 3)
    elif kind == "forward":
        contact = rng.choice([c for c in contacts if c["email"] != email["sender"]])
        goal.update(to=_who(contact, cost == 3), address=contact["email"], body=email["body"])
    return goal


def make_task(workspace: dict, seed: int, stratum: int) -> list[dict]:
    """The goals of a task needing stratum+1 tool calls in the workspace of `seed`."""
    rng = random.Random(f"workplace-task:{seed}:{stratum}")
    used = {e["subject"] for e in workspace["emails"]} | {e["title"] for e in workspace["events"]}
    fresh = [t for t in TOPICS if t not in used]
    emails, events = list(workspace["emails"]), list(workspace["events"])
    for pool in (fresh, emails, events):
        rng.shuffle(pool)
    goals, remaining = [], stratum + 1
    while remaining:
        cost = rng.randint(1, min(3, remaining))
        goals.append(_goal(rng, cost, workspace, emails, events, fresh))
        remaining -= cost
    return goals


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def sentence(goal: dict) -> str:
    """The request of one goal, in the wording the teacher reads back."""
    kind = goal["kind"]
    if kind == "send":
        return f'Send an email to {goal["to"]} with subject "{goal["subject"]}" and body "{goal["body"]}".'
    if kind == "meeting":
        when = f"on {goal['day']} at {goal['time']}"
        return f'Schedule a meeting "{goal["title"]}" {when} with {_listing(goal["with"])}.'
    if kind == "cancel":
        return f'Cancel the meeting "{goal["title"]}" on {goal["day"]}.'
    email = f'the email from {goal["sender"]} about "{goal["subject"]}"'
    if kind == "reply":
        then = " and then delete it" if goal["then_delete"] else ""
        return f'Reply to {email} with "{goal["body"]}"{then}.'
    if kind == "forward":
        return f"Forward {email} to {goal['to']}."
    return f"Delete {email}."


def expectations(goals: list[dict], workspace: dict) -> dict:
    """What the goals ask the workspace to become: emails sent, events created, emails and events deleted."""
    senders = {e["id"]: e["sender"] for e in workspace["emails"]}
    expect: dict[str, list] = {"emails": [], "events": [], "deleted_emails": [], "deleted_events": []}
    for g in goals:
        kind = g["kind"]
        if kind == "send":
            expect["emails"].append({"to": [g["address"]], "subject": g["subject"], "body": g["body"]})
        elif kind == "reply":
            reply = {"to": [senders[g["email"]]], "subject": f"Re: {g['subject']}", "body": g["body"]}
            expect["emails"].append(reply)
        elif kind == "forward":
            forward = {"to": [g["address"]], "subject": f"Fwd: {g['subject']}", "body": g["body"]}
            expect["emails"].append(forward)
        elif kind == "meeting":
            fields = ("title", "day", "time", "attendees")
            expect["events"].append({k: g[k] for k in fields})
        elif kind == "cancel":
            expect["deleted_events"].append(g["event"])
        if kind == "delete" or (kind == "reply" and g["then_delete"]):
            expect["deleted_emails"].append(g["email"])
    return expect


def _norm(value: object) -> str:
    return " ".join(str(value).split()).casefold()


def _email_checks(want: dict, got: dict) -> int:
    recipients = sorted(_norm(a) for a in got["to"]) == sorted(_norm(a) for a in want["to"])
    return (
        recipients
        + (_norm(got["subject"]) == _norm(want["subject"]))
        + (_norm(got["body"]) == _norm(want["body"]))
    )


def _event_checks(want: dict, got: dict) -> int:
    when = (got["day"], got["time"]) == (want["day"], want["time"])
    attendees = sorted(_norm(a) for a in got["attendees"]) == sorted(_norm(a) for a in want["attendees"])
    return (_norm(got["title"]) == _norm(want["title"])) + when + attendees


def _match(wanted: list[dict], new: list[dict], checks: Callable[[dict, dict], int]) -> tuple[int, int]:
    """Checks passed by the best matches (greedy in request order) and the new items left unmatched."""
    passed, left = 0, list(new)
    for want in wanted:
        scored = [(checks(want, got), -i) for i, got in enumerate(left)]
        best = max(scored, default=(0, 0))
        if best[0] > 0:
            passed += best[0]
            left.pop(-best[1])
    return passed, len(left)


def verify(initial: dict, final: dict, expect: dict) -> dict:
    """The task's state checks on the final workspace: share passed, side effects, reward, completed."""
    old_emails = {e["id"] for e in initial["emails"]}
    old_events = {e["id"] for e in initial["events"]}
    new_emails = [e for e in final["emails"] if e["id"] not in old_emails]
    new_events = [e for e in final["events"] if e["id"] not in old_events]
    gone_emails = old_emails - {e["id"] for e in final["emails"]}
    gone_events = old_events - {e["id"] for e in final["events"]}
    sent, extra_emails = _match(expect["emails"], new_emails, _email_checks)
    created, extra_events = _match(expect["events"], new_events, _event_checks)
    deleted = len(gone_emails & set(expect["deleted_emails"])) + len(
        gone_events & set(expect["deleted_events"])
    )
    wrongly_deleted = len(gone_emails - set(expect["deleted_emails"])) + len(
        gone_events - set(expect["deleted_events"])
    )
    total = 3 * len(expect["emails"]) + 3 * len(expect["events"])
    total += len(expect["deleted_emails"]) + len(expect["deleted_events"])
    share = (sent + created + deleted) / total
    side_effects = extra_emails + extra_events + wrongly_deleted
    return {
        "state_checks": share,
        "side_effects": float(side_effects),
        "task_reward": max(0.0, share - PENALTY * side_effects),
        "completed": float(share == 1.0 and side_effects == 0),
    }
