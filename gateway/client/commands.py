"""The client subcommands' arguments (``topics``, ``produce``, ``consume``) and their dispatch.

Only argparse here: ``streamgate run`` builds this parser too, and should not pay for importing
the backends; ``run_client`` imports them when a client command runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Final

DEFAULT_URL: Final = "embedded:./data"
FORMATS: Final = ("value", "json")
_ALIASES: Final = {"beginning": "earliest", "end": "latest"}  # kcat's words

Start = str | int  # "earliest", "latest", an offset, or a negative count back from the end
_URL_HELP: Final = (
    "endpoint: embedded:./data | kafka://host:9092 | iggy://iggy:iggy@host:8090 | "
    "rabbitmq-stream://guest:guest@host:5552/%%2F (default: env STREAMGATE_URL, else "
    f"{DEFAULT_URL})"
)


def _common(parser: argparse.ArgumentParser) -> None:
    # None: neither --url nor STREAMGATE_URL, so the command may go through the listener of a
    # gateway that owns ./data (see session.py); an endpoint the user named is never swapped.
    parser.add_argument("--url", default=None, help=_URL_HELP)
    parser.add_argument(
        "--stream",
        default="default",
        help="canonical stream (namespace) of the topic (default: default)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for the endpoint to answer (default 10)",
    )
    parser.add_argument(
        "--log-level",
        default="critical",
        choices=("debug", "info", "warning", "error", "critical"),
        help="backend logs on stderr (default: critical, i.e. almost none)",
    )


def _progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a live messages, msg/s and MB/s line on stderr (default: when stderr is a TTY)",
    )


def _topics(sub: Any) -> None:
    topics = sub.add_parser("topics", help="list, create or delete topics on any endpoint")
    verbs = topics.add_subparsers(dest="topics_command", required=True)
    ls = verbs.add_parser("list", help="one line per topic: name, partitions, messages, retention")
    ls.set_defaults(client="topics_list")
    _common(ls)
    create = verbs.add_parser("create", help="create a topic")
    create.set_defaults(client="topics_create")
    create.add_argument("name", help="topic name")
    create.add_argument("--partitions", type=int, default=1, help="partitions (default 1)")
    create.add_argument(
        "--retention-ms",
        type=int,
        default=None,
        metavar="MS",
        help="keep messages this long (-1: forever; default: the backend's)",
    )
    create.add_argument(
        "--retention-bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="keep this much per partition (-1: no limit)",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed when the topic already exists"
    )
    _common(create)
    delete = verbs.add_parser("delete", help="delete a topic and its messages")
    delete.set_defaults(client="topics_delete")
    delete.add_argument("name", help="topic name")
    delete.add_argument(
        "--if-exists", action="store_true", help="succeed when the topic does not exist"
    )
    _common(delete)
    configs = verbs.add_parser("configs", help="show or change a topic's settings")
    how = configs.add_subparsers(dest="configs_command", required=True)
    get = how.add_parser("get", help="name=value per setting; (default): the backend's")
    get.set_defaults(client="topics_configs_get")
    get.add_argument("name", help="topic name")
    _common(get)
    set_ = how.add_parser("set", help="change settings: retention.ms, retention.bytes, ...")
    set_.set_defaults(client="topics_configs_set")
    set_.add_argument("name", help="topic name")
    set_.add_argument("settings", nargs="+", metavar="NAME=VALUE", help="e.g. retention.ms=60000")
    _common(set_)
    records = verbs.add_parser(
        "delete-records", help="drop the messages below an offset (the log start moves there)"
    )
    records.set_defaults(client="topics_delete_records")
    records.add_argument("name", help="topic name")
    records.add_argument(
        "--before", type=int, default=-1, metavar="OFFSET",
        help="first offset to keep (default -1: the end, i.e. drop every message)",
    )  # fmt: skip
    records.add_argument(
        "--partition", type=int, default=None, help="only this partition (default: all)"
    )
    _common(records)


def _produce(sub: Any) -> None:
    p = sub.add_parser(
        "produce",
        help="append messages: one per input line, or --count synthetic ones",
        description="Append messages to one partition: one per line of stdin (or --file), or "
        "--count generated ones of --size bytes. Prints how many the endpoint acknowledged and "
        "their offsets.",
    )
    p.set_defaults(client="produce")
    p.add_argument("topic", help="topic name")
    p.add_argument("--partition", "-p", type=int, default=0, help="partition (default 0)")
    p.add_argument("--key", "-k", default=None, help="key of every message")
    p.add_argument(
        "--key-separator",
        "-K",
        default=None,
        metavar="SEP",
        help="split each line at the first SEP into key and value",
    )
    p.add_argument(
        "--header",
        "-H",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header on every message (repeatable, order kept)",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--file",
        "-f",
        default=None,
        metavar="PATH",
        help="read lines from PATH (- = stdin, the default)",
    )
    source.add_argument(
        "--count",
        "-n",
        type=int,
        default=None,
        metavar="N",
        help="send N generated messages instead of reading input",
    )
    p.add_argument(
        "--size",
        "-s",
        type=int,
        default=None,
        metavar="BYTES",
        help="size of each generated message (with --count; default 100)",
    )
    p.add_argument(
        "--batch", "-b", type=int, default=1000, help="messages per append at most (default 1000)"
    )
    _progress(p)
    _common(p)


def _consume(sub: Any) -> None:
    c = sub.add_parser(
        "consume",
        help="print messages; exits at the end unless --follow",
        description="Print a topic's messages, one per line (the value, or a JSON object with "
        "--format json), from every partition or one. Exits at the end of the topic, after "
        "--count messages, or never with --follow.",
    )
    c.set_defaults(client="consume")
    c.add_argument("topic", help="topic name")
    c.add_argument(
        "--partition", "-p", type=int, default=None, help="only this partition (default: all)"
    )
    c.add_argument(
        "--from",
        "-o",
        dest="start",
        type=start_position,
        default=None,
        metavar="WHERE",
        help="earliest | latest | OFFSET | -N (N before the end); default: the"
        " group's committed offset with --group, else earliest",
    )
    c.add_argument(
        "--count", "-n", type=int, default=None, metavar="N", help="exit after N messages"
    )
    c.add_argument(
        "--group",
        "-g",
        default=None,
        help="commit the position under this consumer group after each batch",
    )
    c.add_argument(
        "--follow",
        "-F",
        action="store_true",
        help="keep waiting for new messages (stop with Ctrl-C)",
    )
    c.add_argument(
        "--format",
        choices=FORMATS,
        default="value",
        help="value: the value per line; json: offset, partition, key, headers... (default value)",
    )
    _progress(c)
    _common(c)


def start_position(text: str) -> Start:
    """``--from``: earliest | latest (also kcat's beginning | end) | OFFSET | -N (N back from the
    end)."""
    word = _ALIASES.get(text.lower(), text.lower())
    if word in ("earliest", "latest"):
        return word
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected earliest, latest, an offset or -N, not {text!r}"
        ) from None


def add_client_commands(sub: Any) -> None:
    """Add ``topics``, ``produce`` and ``consume`` to ``streamgate``'s subcommands."""
    _topics(sub)
    _produce(sub)
    _consume(sub)


# client command -> (module of this package, its handler); imported when that command runs
_HANDLERS: Final = {
    "topics_list": ("topics", "list_topics"),
    "topics_create": ("topics", "create_topic"),
    "topics_delete": ("topics", "delete_topic"),
    "topics_configs_get": ("topics", "get_configs"),
    "topics_configs_set": ("topics", "set_configs"),
    "topics_delete_records": ("topics", "delete_records"),
    "produce": ("produce", "produce"),
    "consume": ("consume", "consume"),
}


def run_client(args: argparse.Namespace) -> int:
    """Run the client command ``args`` names; the process exit code."""
    from gateway.logs import configure_logging

    from .session import run_command

    if args.client == "produce":
        if args.size is not None and args.count is None:
            print("streamgate produce: --size needs --count", file=sys.stderr)
            return 2
        args.size = 100 if args.size is None else args.size
    args.url_given = args.url is not None or "STREAMGATE_URL" in os.environ
    if args.url is None:
        args.url = os.environ.get("STREAMGATE_URL", DEFAULT_URL)
    module, name = _HANDLERS[args.client]
    handler = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    configure_logging(args.log_level, "auto")
    return run_command(handler, args)
