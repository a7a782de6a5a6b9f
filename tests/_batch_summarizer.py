"""A summarizer for the batch tests: it kills its worker process on a conversation holding the
marker (as an out-of-memory kill would), and summarizes every other one."""

from __future__ import annotations

import os
from typing import Any

MARKER = "这个文件会杀死工作进程"


def die_on_marker(request: Any) -> str:
    if MARKER in request.user_prompt:
        os._exit(9)
    return "<summary>总结：the conversation so far.</summary>"
