"""Values between the judge and the model's function, as one JSON line each: plain data only, so what comes back
from the sandbox is a value to compare, never an object whose `__eq__` the model wrote.

    encode((1, [2.5, "a"], {3: None}))  # {"tuple": [1, {"list": [2.5, "a"]}, {"dict": [[3, null]]}]}
    decode(json.loads(line))             # the same value, built by the judge's process

None, bools, ints, finite floats and strings are JSON's own; huge ints, lists, tuples, sets, frozensets, dicts, bytes and
infinite or NaN floats are tagged; a subclass of one of these travels as the base type's value; anything else
travels as its `repr` and decodes to an `Opaque` that equals nothing. Both sides use this module: the judge
imports it, the sandbox's harness is given it as a file (it needs the standard library only).
"""

from __future__ import annotations

import math

DEPTH = 64  # nesting kept; deeper values travel as their repr
BIG_INT_BITS = 10_000  # ints this wide or wider travel in hex
REPR_CHARS = 200  # characters of an opaque value's repr kept

CONTAINERS = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


class Opaque:
    """A value that had no plain-data form: its repr, equal to nothing (itself included, as NaN)."""

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return self.text


def encode(value: object, depth: int = 0) -> object:
    """`value` as JSON-ready plain data."""
    if value is None or type(value) in (bool, str):
        return value
    if depth >= DEPTH:
        return {"repr": _repr(value)}
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        number = int.__index__(value)
        # past ~4,300 decimal digits json refuses an int (sys.set_int_max_str_digits); hex has no such limit
        return number if number.bit_length() < BIG_INT_BITS else {"int": hex(number)}
    if isinstance(value, float):
        number = float.__float__(value)
        return number if math.isfinite(number) else {"float": repr(number)}
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, dict):
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)]}
    for tag, kind in CONTAINERS.items():
        if isinstance(value, kind):
            return {tag: [encode(item, depth + 1) for item in kind.__iter__(value)]}
    return {"repr": _repr(value)}


def decode(data: object, depth: int = 0) -> object:
    """The value `encode` made `data` from; a malformed input raises ValueError."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if depth >= DEPTH + 1 or type(data) is not dict or len(data) != 1:
        raise ValueError("not a value this module encodes")
    [(tag, body)] = data.items()
    if tag in CONTAINERS and type(body) is list:
        try:
            return CONTAINERS[tag](decode(item, depth + 1) for item in body)
        except TypeError as error:  # an unhashable member of a set
            raise ValueError(str(error)) from None
    if tag == "dict" and type(body) is list and all(type(p) is list and len(p) == 2 for p in body):
        try:
            return {decode(k, depth + 1): decode(v, depth + 1) for k, v in body}
        except TypeError as error:  # an unhashable key
            raise ValueError(str(error)) from None
    if tag == "float" and body in ("inf", "-inf", "nan"):
        return float(body)
    if tag == "int" and type(body) is str:
        return int(body, 16)
    if tag == "bytes" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "repr" and type(body) is str:
        return Opaque(body[:REPR_CHARS])
    raise ValueError(f"not a value this module encodes: tag {tag!r}")


def _repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception as error:  # a repr that raises is the model's to lose on
        text = f"<unprintable {type(value).__name__}: {type(error).__name__}>"
    return text[:REPR_CHARS] if type(text) is str else "<unprintable>"
