"""Kafka wire codec: the hand-written RecordBatch v2 codec and its compressions (kafka.md §3)."""

from .batch import (
    HEADER_SIZE,
    BatchIterator,
    Record,
    RecordBatchHeader,
    TimestampType,
    batch_attributes,
    iter_batches,
    parse_header,
    set_base_offset,
    set_log_append_time,
    set_producer,
    split_batches,
    verify_crc,
)
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress
from .hot import (
    FetchPartition,
    ProducePartition,
    encode_produce_response,
    fetch_response_pieces,
)
from .records import decode_batch, decode_records, encode_batch

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "HEADER_SIZE",
    "BatchIterator",
    "Compression",
    "FetchPartition",
    "ProducePartition",
    "Record",
    "RecordBatchHeader",
    "TimestampType",
    "batch_attributes",
    "compress",
    "decode_batch",
    "decode_records",
    "decompress",
    "encode_batch",
    "encode_produce_response",
    "fetch_response_pieces",
    "iter_batches",
    "parse_header",
    "set_base_offset",
    "set_log_append_time",
    "set_producer",
    "split_batches",
    "verify_crc",
]
