"""A quick "valid" for tool arguments that surely conform to a simple input schema.

jsonschema takes tens of milliseconds to import, and clients start a server per chat: its
first tool call would pay for that import before it is answered. Most arguments are valid and
most input schemas use a few plain keywords, so `surely_valid` checks those without it. It says
True only when it is certain; False means "not sure": then jsonschema decides, and explains
what is wrong. So it may be stricter than JSON Schema (an integer written 1.0, a keyword it
does not know), never more lenient.
"""

from __future__ import annotations

from typing import Any, Final

# Keywords that never make an instance invalid.
_ANNOTATIONS: Final = frozenset({"title", "description", "default", "examples", "$comment", "deprecated",
                                 "readOnly", "writeOnly"})
_CHECKED: Final = frozenset({"type", "properties", "required", "additionalProperties", "items", "minItems",
                             "maxItems", "minLength", "maxLength", "minimum", "maximum"})
_KNOWN: Final = _ANNOTATIONS | _CHECKED

# Exact types: a bool is no integer in JSON, and 1.0 (a valid integer there) is left to jsonschema.
_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def surely_valid(schema: Any, instance: Any) -> bool:
    """True when `instance` certainly conforms to `schema` (JSON Schema 2020-12, no $ref)."""
    if schema is True:
        return True
    if not isinstance(schema, dict) or not schema.keys() <= _KNOWN:
        return False
    kind = type(instance)
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not all(name in _TYPES for name in names if isinstance(name, str)) or not any(
                kind in _TYPES[name] for name in names if isinstance(name, str)):
            return False
    if kind is dict:
        return _object_conforms(schema, instance)
    if kind is list:
        return _array_conforms(schema, instance)
    if kind is str:
        return _within(schema, "minLength", "maxLength", len(instance))
    if kind is int or kind is float:
        return _within(schema, "minimum", "maximum", instance)
    return True


def _object_conforms(schema: dict[str, Any], instance: dict[str, Any]) -> bool:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        return False
    if not all(isinstance(name, str) and name in instance for name in required):
        return False
    for name, value in instance.items():
        if name in properties:
            if not surely_valid(properties[name], value):
                return False
        elif not surely_valid(extra, value):
            return False
    return True


def _array_conforms(schema: dict[str, Any], instance: list[Any]) -> bool:
    items = schema.get("items", True)
    return _within(schema, "minItems", "maxItems", len(instance)) and all(
        surely_valid(items, item) for item in instance)


def _within(schema: dict[str, Any], low: str, high: str, value: int | float) -> bool:
    if low in schema and (type(bound := schema[low]) not in (int, float) or value < bound):
        return False
    return not (high in schema and (type(bound := schema[high]) not in (int, float) or value > bound))
