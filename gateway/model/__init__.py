"""Canonical commands, results, messages, names and errors shared by every protocol and backend."""

from .commands import *  # noqa: F403
from .commands import __all__ as _commands_all
from .errors import *  # noqa: F403
from .errors import __all__ as _errors_all
from .messages import (
    Header,
    HeaderKind,
    Message,
    MessageBatch,
    WireBatch,
    WireDecoder,
    WireFormat,
    decode_wire,
)
from .names import DEFAULT_STREAM, INTERNAL_PREFIX, MAX_NAME_LENGTH, Topic, check_name, is_internal
from .options import Acks, Isolation, OffsetSpec, TopicConfig
from .results import *  # noqa: F403
from .results import __all__ as _results_all

__all__ = [
    "DEFAULT_STREAM",
    "INTERNAL_PREFIX",
    "Acks",
    "Isolation",
    "OffsetSpec",
    "TopicConfig",
    "MAX_NAME_LENGTH",
    "Header",
    "HeaderKind",
    "Message",
    "MessageBatch",
    "Topic",
    "WireBatch",
    "WireDecoder",
    "WireFormat",
    "check_name",
    "decode_wire",
    "is_internal",
    *_commands_all,
    *_errors_all,
    *_results_all,
]
