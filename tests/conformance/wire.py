"""The three wire formats of the fake model APIs: what a request is, and how to answer it."""

from __future__ import annotations

import json
import re
import shlex
import uuid
from collections.abc import Iterator
from typing import Any, Protocol


class _Script(Protocol):
    path: str
    content: str
    first_content: str | None
    fixed_content: str | None
    final: str
    root: str
    tokens: tuple[int, int, int]
    review: str
    review_writes: str


def kind(path: str) -> str | None:
    """Which API a request path belongs to: anthropic, openai, gemini, or none faked."""
    if path.split("?")[0].endswith("/messages"):
        return "anthropic"
    if path.split("?")[0].endswith("/responses"):
        return "openai"
    if "generatecontent" in path.lower():
        return "gemini"
    return None


def error(api: str, status: int, message: str) -> tuple[int, str, bytes]:
    if api == "anthropic":
        kind_ = "rate_limit_error" if status == 429 else "authentication_error"
        body: dict[str, Any] = {"type": "error", "error": {"type": kind_, "message": message}}
    elif api == "openai":
        body = {"error": {"message": message, "type": "rate_limit_exceeded", "code": None}}
    else:
        state = "RESOURCE_EXHAUSTED" if status == 429 else "UNAUTHENTICATED"
        body = {"error": {"code": status, "message": message, "status": state}}
    return status, "application/json", json.dumps(body).encode()


def reply(api: str, path: str, body: dict[str, Any], script: _Script) -> tuple[int, str, bytes]:
    if api == "anthropic":
        return _anthropic(body, script)
    if api == "openai":
        return _openai(body, script)
    return _gemini(path, body, script)


def _unique(prefix: str) -> str:
    """An id no other reply has: a resumed session holds the earlier ones."""
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def _abs(script: _Script) -> str:
    return f"{script.root.rstrip('/')}/{script.path}"


# What a retry's prompt says before the previous attempt's failure (prompt.py).
RETRY = "## The previous attempt failed"
# What a fix round's prompt starts with (phase/rounds.py): a resumed session's new turn.
FIX_ROUND = "Fix round: "
# A reviewer's prompt starts so (review/prompt.py); a re-review's, after a fix round, carries the
# last review's findings.
REVIEW = "Review of phase "
REREVIEW = "## What the last review found"
_CRITERIA = re.compile(r"^## Criteria to judge\n((?:\d+\. .*\n?)*)", re.MULTILINE)
# The fake reviewer's blocking finding on an unmet criterion, and what it writes, when told to,
# over a file of the user's.
UNMET = "the greeting is not friendly: it says only hello"
REVIEWER_WROTE = "overwritten by the reviewer\n"


def _said(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


def _content(body: dict[str, Any], script: _Script) -> str:
    """What the file-writing call writes: ``fixed_content`` in a fix round (when given),
    ``first_content`` until the request is a retry's, else ``content``."""
    said = _said(body)
    if script.fixed_content is not None and FIX_ROUND in said:
        return script.fixed_content
    if script.first_content is None or RETRY in said:
        return script.content
    return script.first_content


def _strings(value: Any) -> Iterator[str]:
    """Every string in a request body, however deep."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def is_review(body: dict[str, Any]) -> bool:
    """The request is a reviewer's: its conversation holds a review's prompt."""
    return any(text.lstrip().startswith(REVIEW) for text in _strings(body))


def verdict(body: dict[str, Any], script: _Script) -> str:
    """The reviewer's answer in the shape review/prompt.py asks for: every criterion of the
    prompt met, or (``script.review``: "unmet"; "unmet-first" before a re-review) the first not
    met, with a blocking finding."""
    prompt = next((t for t in _strings(body) if "## Criteria to judge" in t), "")
    match = _CRITERIA.search(prompt)
    count = len(re.findall(r"^\d+\. ", match.group(1), re.MULTILINE)) if match else 0
    unmet = script.review == "unmet" or (
        script.review == "unmet-first" and REREVIEW not in _said(body)
    )
    criteria = [
        {"id": n, "verdict": "met", "evidence": f"{script.path}:1"} for n in range(1, count + 1)
    ]
    findings = []
    if unmet and criteria:
        criteria[0] = {"id": 1, "verdict": "not met", "evidence": UNMET}
    if unmet:
        findings.append({"severity": "blocking", "where": f"{script.path}:1", "issue": UNMET})
    block = json.dumps({"criteria": criteria, "findings": findings, "summary": "reviewed"})
    return f"I read {script.path} and the change.\n\n```json\n{block}\n```"


def _review_write(script: _Script) -> str:
    """The absolute path of the file a reviewer tries to overwrite."""
    return f"{script.root.rstrip('/')}/{script.review_writes}"


# --- Anthropic Messages ------------------------------------------------------------------------


def _anthropic_step(body: dict[str, Any], script: _Script) -> list[dict[str, Any]]:
    """The content blocks of the answer."""
    tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    messages = body.get("messages") or []
    last = messages[-1].get("content") if messages else None
    answered = isinstance(last, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in last
    )
    if not tools:
        return [{"type": "text", "text": "Hello file"}]
    if is_review(body):
        if answered or not script.review_writes:
            return [{"type": "text", "text": verdict(body, script)}]
        # The CLI's own write tool, called whether it is offered or not.
        target, name = _review_write(script), "Write" if "Read" in tools else "write"
        args = {"file_path" if name == "Write" else "filePath": target, "content": REVIEWER_WROTE}
        return [{"type": "tool_use", "id": _unique("toolu"), "name": name, "input": args}]
    if answered:
        return [{"type": "text", "text": script.final}]
    if "create" in tools and script.fixed_content is not None and FIX_ROUND in _said(body):
        # copilot's create refuses a file that exists: a fix round edits what the attempt wrote
        args = {"path": _abs(script), "old_str": script.content, "new_str": script.fixed_content}
        return [{"type": "tool_use", "id": _unique("toolu"), "name": "edit", "input": args}]
    for name, args in (
        ("Write", {"file_path": _abs(script), "content": _content(body, script)}),
        ("write", {"filePath": _abs(script), "content": _content(body, script)}),
        ("create", {"path": _abs(script), "file_text": _content(body, script)}),
    ):
        if name in tools:
            return [{"type": "tool_use", "id": _unique("toolu"), "name": name, "input": args}]
    return [{"type": "text", "text": f"no write tool among {tools}"}]


def _anthropic(body: dict[str, Any], script: _Script) -> tuple[int, str, bytes]:
    blocks = _anthropic_step(body, script)
    tin, tout, cached = script.tokens
    stop = "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"
    usage = {
        "input_tokens": tin,
        "output_tokens": tout,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    }
    message = {
        "id": _unique("msg"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not body.get("stream"):
        return 200, "application/json", json.dumps(message).encode()
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            empty, delta = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": block["text"]},
            )
        else:
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": empty},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": tout},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return 200, "text/event-stream", _sse(events)


# --- OpenAI Responses --------------------------------------------------------------------------


def _openai_item(body: dict[str, Any], script: _Script) -> dict[str, Any]:
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    # A tool's output after the last user message: what a resumed session asked before is not
    # this turn's.
    users = [n for n, i in enumerate(items) if i.get("role") == "user"]
    answered = any(
        str(i.get("type", "")).endswith("call_output") for i in items[users[-1] if users else 0 :]
    )
    tools = {t.get("name"): t for t in body.get("tools") or [] if isinstance(t, dict)}
    if not tools:
        return _openai_message("ok")
    if is_review(body):
        if answered or not script.review_writes:
            return _openai_message(verdict(body, script))
        # A command that takes a moment: codex 0.169.0 prints no item for one that ends at once.
        return _openai_write(tools, _review_write(script), REVIEWER_WROTE, "sleep 0.2; ")
    if answered:
        return _openai_message(script.final)
    return _openai_write(tools, script.path, _content(body, script))


def _openai_message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": _unique("msg"),
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _openai_write(
    tools: dict[Any, dict[str, Any]], path: str, content: str, before: str = ""
) -> dict[str, Any]:
    """A call writing ``content`` to ``path``: with apply_patch where it is offered, else with
    the shell (``before`` the command first)."""
    call = {"call_id": _unique("call"), "status": "completed"}
    if "apply_patch" in tools:
        lines = "".join(f"+{line}\n" for line in content.splitlines())
        patch = f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n"
        if tools["apply_patch"].get("type") == "custom":
            return {
                "type": "custom_tool_call", "id": _unique("ctc"), "name": "apply_patch",
                "input": patch, **call,
            }  # fmt: skip
        args = json.dumps({"input": patch})
        return {
            "type": "function_call", "id": _unique("fc"), "name": "apply_patch",
            "arguments": args, **call,
        }  # fmt: skip
    lines = " ".join(shlex.quote(line) for line in content.splitlines())
    command = f"{before}printf '%s\\n' {lines} > {shlex.quote(path)}"
    name = "exec_command" if "exec_command" in tools else "shell"
    args = json.dumps({"cmd": command} if name == "exec_command" else {"command": command})
    return {"type": "function_call", "id": _unique("fc"), "name": name, "arguments": args, **call}


def _openai(body: dict[str, Any], script: _Script) -> tuple[int, str, bytes]:
    item = _openai_item(body, script)
    tin, tout, cached = script.tokens
    usage = {
        "input_tokens": tin,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": tout,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tin + tout,
    }
    base = {"id": _unique("resp"), "object": "response", "model": body.get("model", "gpt")}
    events: list[tuple[str | None, dict[str, Any]]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "response": {**base, "status": "in_progress", "output": []},
            },
        ),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
    ]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        events.append(
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": text,
                },
            )
        )
    done = {**base, "status": "completed", "output": [item], "usage": usage}
    events += [
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        ("response.completed", {"type": "response.completed", "response": done}),
    ]
    return 200, "text/event-stream", _sse(events)


# --- Gemini ------------------------------------------------------------------------------------


def _gemini_parts(body: dict[str, Any], script: _Script) -> list[dict[str, Any]]:
    contents = body.get("contents") or []
    parts = contents[-1].get("parts") if contents else []
    answered = any(isinstance(p, dict) and "functionResponse" in p for p in parts or [])
    names = [
        d.get("name")
        for t in body.get("tools") or []
        for d in (t.get("functionDeclarations") or [] if isinstance(t, dict) else [])
    ]
    config = body.get("generationConfig") or {}
    if not names:
        if config.get("responseMimeType") == "application/json":
            return [{"text": json.dumps({"reasoning": "done", "next_speaker": "user"})}]
        return [{"text": "ok"}]
    if is_review(body):
        if answered or not script.review_writes:
            return [{"text": verdict(body, script)}]
        args = {"file_path": _review_write(script), "content": REVIEWER_WROTE}
        return [{"functionCall": {"name": "write_file", "args": args}}]  # offered or not
    if answered:
        return [{"text": script.final}]
    if "write_file" in names:
        args = {"file_path": _abs(script), "content": _content(body, script)}
        return [{"functionCall": {"name": "write_file", "args": args}}]
    return [{"text": f"no write tool among {names}"}]


def _gemini(path: str, body: dict[str, Any], script: _Script) -> tuple[int, str, bytes]:
    tin, tout, cached = script.tokens
    chunk = {
        "candidates": [
            {
                "content": {"role": "model", "parts": _gemini_parts(body, script)},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": tin,
            "candidatesTokenCount": tout,
            "cachedContentTokenCount": cached,
            "totalTokenCount": tin + tout,
        },
        "modelVersion": "gemini-2.5-flash",
    }
    if "streamGenerateContent" in path:
        return 200, "text/event-stream", _sse([(None, chunk)])
    return 200, "application/json", json.dumps(chunk).encode()
