"""The options, checked on the driver: every mistake is an ``OptionError`` naming the option."""

from __future__ import annotations

import pytest

from pipeline.errors import OptionError
from pipeline.options import EARLIEST, LATEST, parse_offsets, read_options, write_options

TOPICS = ("orders", "refunds")


def test_named_and_json_offsets() -> None:
    assert parse_offsets("startingOffsets", " Earliest ", TOPICS) == "earliest"
    assert parse_offsets("endingOffsets", "latest", TOPICS) == "latest"
    got = parse_offsets("startingOffsets", '{"orders": {"0": 23, "1": -2, "2": -1}}', TOPICS)
    assert got == {"orders": {0: 23, 1: EARLIEST, 2: LATEST}}


@pytest.mark.parametrize(
    ("option", "text", "says"),
    [
        ("startingOffsets", "{not json", "want 'earliest', 'latest' or JSON"),
        ("startingOffsets", "[1, 2]", "want a JSON object"),
        ("startingOffsets", '{"other": {"0": 1}}', "names topic 'other', which is not read"),
        ("startingOffsets", '{"orders": 5}', "wants {partition: offset}"),
        ("startingOffsets", '{"orders": {"x": 5}}', "partition 'x' is not a number"),
        ("startingOffsets", '{"orders": {"0": -3}}', "offset -3 is not an offset"),
        ("startingOffsets", '{"orders": {"0": true}}', "offset True is not an offset"),
        ("endingOffsets", "earliest", "cannot be 'earliest'"),
        ("endingOffsets", '{"orders": {"0": -2}}', "an end cannot be -2"),
    ],
)
def test_malformed_offsets_name_the_option(option: str, text: str, says: str) -> None:
    with pytest.raises(OptionError, match=f"^option {option}: ") as info:
        parse_offsets(option, text, TOPICS)
    assert says in str(info.value)


def test_read_options_defaults_and_spelling() -> None:
    # Spark hands the options over lower-cased; topics are trimmed and deduplicated.
    options = read_options(
        {"url": "embedded:./data", "topic": "orders, refunds,orders", "includeheaders": "TRUE"},
        streaming=False,
    )
    assert options.topics == TOPICS
    assert options.starting == "earliest" and options.ending == "latest"
    assert options.include_headers is True
    assert options.connection.stream == "default"
    assert options.connection.timeout_s == 10.0
    streaming = read_options({"url": "embedded:./data", "topic": "orders"}, streaming=True)
    assert streaming.starting == "latest"


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"topic": "t"}, False, "option url: is required"),
        ({"url": "embedded:./d"}, False, "option topic: is required"),
        ({"url": "embedded:./d", "topic": "a,,b"}, False, "option topic: an empty name"),
        ({"url": "u", "topic": "t", "statringoffsets": "x"}, False, "option statringoffsets: "),
        ({"url": "u", "topic": "t", "minpartitions": "two"}, False, "option minPartitions: "),
        ({"url": "u", "topic": "t", "maxoffsetspertrigger": "0"}, False, "at least 1, not 0"),
        ({"url": "u", "topic": "t", "includeheaders": "yes"}, False, "want true or false"),
        ({"url": "u", "topic": "t", "endingoffsets": "latest"}, True, "a streaming read has"),
    ],
)
def test_bad_read_options(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        read_options(options, streaming=streaming)


def test_write_options() -> None:
    options = write_options({"url": "kafka://h:9092", "batchsize": "10"})
    assert options.topic is None and options.batch_size == 10
    with pytest.raises(OptionError, match="option startingOffsets: unknown"):
        write_options({"url": "kafka://h:9092", "startingOffsets": "earliest"})
