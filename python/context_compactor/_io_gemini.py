"""The Gemini ``generateContent`` request as a file:
``{"contents": [...], "system_instruction": ..., "tools": [...]}``, read and written by
:mod:`context_compactor.io`.

- ``contents`` is the conversation (``Content`` objects: ``role`` ``user``/``model``, ``parts``
  with ``text``, ``function_call``/``function_response``, ``thought`` and ``thought_signature``,
  snake_case or the REST API's camelCase; kept as the file has them).
- ``system_instruction`` (or the REST API's camelCase ``systemInstruction``) is the system prompt
  (``Transcript.system``): a ``Content`` (``{"parts": [{"text": ...}]}``), a string, or a list of
  parts. It is written back snake_case, as the ``google-genai`` SDK takes it.
- ``tools`` is the tool list (``function_declarations`` ...). Other request fields
  (``generation_config``, ``tool_config``, ``safety_settings``, ...) are not part of the
  conversation and are not read.
"""

from __future__ import annotations

from typing import Any

from context_compactor._io_fields import FieldError, check_list, check_object, check_optional_list, kind, request

__all__ = ["TITLE", "is_request", "read", "write"]

#: The format's name in messages (``"a Gemini request ..."``).
TITLE = "Gemini"


def is_request(data: Any) -> bool:
    """A generateContent request: an object with ``contents`` (and no ``messages``/``input``)."""
    return isinstance(data, dict) and "contents" in data and "messages" not in data and "input" not in data


def _system(data: dict[str, Any]) -> Any:
    if "system_instruction" in data and "systemInstruction" in data:
        raise FieldError('both "system_instruction" and "systemInstruction" are given; keep one', "systemInstruction")
    key = "systemInstruction" if "systemInstruction" in data else "system_instruction"
    system = data.get(key)
    if system is None or isinstance(system, str):
        return system
    if isinstance(system, dict):
        if "parts" in system:
            _parts(system["parts"], f"{key}.parts")
        return system
    if isinstance(system, list):
        for i, part in enumerate(system):
            if not isinstance(part, (str, dict)):
                raise FieldError(
                    f"{key}[{i}] must be a part (a JSON object) or a string, not {kind(part)}", f"{key}[{i}]"
                )
        return system
    raise FieldError(f'"{key}" must be a Content, a string or a list of parts, not {kind(system)}', key)


def _parts(parts: Any, field: str) -> None:
    check_list(parts, field, "parts")
    for j, part in enumerate(parts):
        check_object(part, f"{field}[{j}]", "a part")


def read(data: dict[str, Any]) -> tuple[list[dict[str, Any]], Any, list[Any] | None]:
    """``(contents, system_instruction, tools)``; :class:`FieldError` names a malformed field."""
    contents = check_list(data["contents"], "contents", "Content objects")
    for i, content in enumerate(contents):
        check_object(content, f"contents[{i}]", "a Content")
        if "parts" not in content:
            raise FieldError(f'contents[{i}] has no "parts"', f"contents[{i}].parts")
        _parts(content["parts"], f"contents[{i}].parts")
        role = content.get("role")
        if role is not None and not isinstance(role, str):
            raise FieldError(f"contents[{i}].role must be a string, not {kind(role)}", f"contents[{i}].role")
    return contents, _system(data), check_optional_list(data.get("tools"), "tools", "tools")


def write(contents: list[Any], system: Any, tools: list[Any] | None) -> dict[str, Any]:
    """The request object (``system_instruction`` and ``tools`` only when given)."""
    return request("contents", contents, "system_instruction", system, tools)
