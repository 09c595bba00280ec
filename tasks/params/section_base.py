"""What every params.yaml section is: a pydantic model that refuses unknown keys and wrong types (`Section`), and
the same rule for the library's dataclass configs a section holds (`FORBID`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from wander.core.parse_lock import serialize_ast_parse

# use_attribute_docstrings parses each section's source at import, maybe beside a Prefect thread's parse.
serialize_ast_parse()

# The library configs stay plain dataclasses in wander/; validated here with unknown keys refused.
FORBID = ConfigDict(extra="forbid")


class Section(BaseModel):
    """A params.yaml section: unknown keys and wrong types fail; ints widen to floats, nothing else converts."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _merge_nested_defaults(cls, data: Any) -> Any:
        # `scratch: {hidden_size: 64}` changes that key of the default config, not every other key back to the
        # library's own defaults.
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, info in cls.model_fields.items():
            default = info.get_default(call_default_factory=True)
            if isinstance(out.get(name), dict) and dataclasses.is_dataclass(default):
                out[name] = {
                    **{f.name: getattr(default, f.name) for f in dataclasses.fields(default)},
                    **out[name],
                }
        return out
