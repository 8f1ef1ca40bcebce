"""A tool's arguments, declared once: the JSON Schema it advertises and the check of each call.

1. A tool declares its arguments either as a msgspec type (a `msgspec.Struct`, usually) or as a
   hand-written JSON Schema. A type is the one declaration: `input_schema(type)` is the schema
   advertised in tools/list, and the check decodes a call's arguments into that type.
2. `input_schema` is msgspec's JSON Schema with every `$ref` inlined, without the titles and
   docstrings msgspec adds for a Struct (a Struct's words are its fields' `Meta(description=...)`),
   and with the keywords of each schema in one fixed order: so a declaration reproduces a
   hand-written schema key for key.
3. A call's arguments are accepted exactly when the advertised schema accepts them. msgspec
   judges first (in C, without importing jsonschema); a refusal is passed to jsonschema, whose
   words (the offending path, then what is wrong) are what a model reads, for either kind of
   declaration. Where the two disagree, JSON Schema wins: an integral float is an integer to it,
   so such a value is converted leniently instead of refused.
4. jsonschema is imported by the first call it has to judge, never at start-up.
5. A tool's result may be declared the same way: `output_schema(type)` is made as in 2, and a
   union of plain types (msgspec's `anyOf` of `{"type": ...}` alone) takes JSON Schema's short
   form, `{"type": ["string", "null"]}`, which accepts exactly the same values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

KEYWORD_ORDER = ("type", "properties", "required", "additionalProperties", "items", "minimum", "description")
"""The order of keywords in an advertised schema (others follow, in msgspec's order)."""

_REFS = "#/$defs/"
_LITERALS = frozenset({"default", "examples", "const", "enum"})  # values, not schemas

MAX_REPORTED = 20
"""Violations listed in one refusal, at most."""


def input_schema(declared: Any) -> dict[str, Any]:
    """The JSON Schema (2020-12) of a msgspec type, self-contained and in the fixed keyword order."""
    (schema,), definitions = msgspec.json.schema_components([declared], ref_template=_REFS + "{name}")
    return _inline(schema, definitions)


def output_schema(declared: Any) -> dict[str, Any]:
    """The JSON Schema a tool's result of type `declared` is advertised with (statement 5)."""
    return _short_unions(input_schema(declared))


def _short_unions(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_short_unions(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    shortened: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _LITERALS:
            shortened[key] = value
        elif key == "properties":  # names, not keywords
            shortened[key] = {name: _short_unions(sub) for name, sub in value.items()}
        else:
            shortened[key] = _short_unions(value)
    options = shortened.get("anyOf")
    if "type" in shortened or not isinstance(options, list) or not options or not all(
            isinstance(option, dict) and option.keys() == {"type"} and isinstance(option["type"], str)
            for option in options):
        return shortened
    rest = {key: value for key, value in shortened.items() if key != "anyOf"}
    return _ordered({"type": [option["type"] for option in options], **rest})


def _inline(schema: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(schema, list):
        return [_inline(item, definitions) for item in schema]
    if not isinstance(schema, dict):
        return schema
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith(_REFS):
        # The definition's own title and docstring are msgspec's; the words at the use site are ours.
        definition = definitions[reference[len(_REFS):]]
        schema = {**{key: value for key, value in definition.items() if key not in ("title", "description")},
                  **{key: value for key, value in schema.items() if key != "$ref"}}
    inlined: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _LITERALS:
            inlined[key] = value
        elif key == "properties":  # names, not keywords: their order is the declaration's
            inlined[key] = {name: _inline(sub, definitions) for name, sub in value.items()}
        else:
            inlined[key] = _inline(value, definitions)
    return _ordered(inlined)


def _ordered(schema: dict[str, Any]) -> dict[str, Any]:
    first = {key: schema[key] for key in KEYWORD_ORDER if key in schema}
    return {**first, **{key: value for key, value in schema.items() if key not in first}}


class ArgumentCheck:
    """Judges one tool's arguments: `parse` gives the value its handler receives, or the reasons why not."""

    def __init__(self, schema: dict[str, Any], declared: Any = None) -> None:
        self.schema = schema
        self.declared = declared  # the msgspec type, or None for a hand-written schema
        self._validator: Any = None

    def parse(self, arguments: dict[str, Any]) -> tuple[Any, list[str]]:
        """(the handler's value, []) for arguments the schema accepts, else (None, the violations)."""
        if self.declared is not None:
            try:
                return msgspec.convert(arguments, self.declared), []
            except msgspec.ValidationError:
                pass  # jsonschema says why, or overrules (an integral float as an integer)
        problems = self.errors(arguments)
        if problems or self.declared is None:
            return (None if problems else arguments), problems
        try:
            return msgspec.convert(arguments, self.declared, strict=False), []
        except msgspec.ValidationError as error:
            return None, [str(error)]

    def errors(self, arguments: Any) -> list[str]:
        """Why `arguments` break the schema, one line per violation, offending path first."""
        if self._validator is None:
            from jsonschema import Draft202012Validator, validators  # slow to import: see 4.

            # A schema without $schema is 2020-12 (MCP's default dialect); a declared one is honoured.
            self._validator = validators.validator_for(self.schema, Draft202012Validator)(self.schema)
        found = sorted(self._validator.iter_errors(arguments), key=lambda e: list(map(str, e.absolute_path)))
        return [f"at {_json_path(error.absolute_path)}: {error.message}" for error in found[:MAX_REPORTED]]


def _json_path(path: Iterable[Any]) -> str:
    parts = list(path)
    return "/" + "/".join(str(part) for part in parts) if parts else "the top level"
