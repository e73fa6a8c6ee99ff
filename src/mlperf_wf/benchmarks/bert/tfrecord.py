"""TFRecord files of ``tf.train.Example`` records, written and read without TensorFlow.

The reference reads its pretraining data with ``tf.data.TFRecordDataset`` and
``tf.parse_single_example`` (run_pretraining.py, ``input_fn_builder``), and writes it with
``tf.python_io.TFRecordWriter`` (cleanup_scripts/create_pretraining_data.py). TensorFlow cannot
be installed in the tiny tier's environment, so this module implements the two published
formats directly:

- a TFRecord file is a sequence of ``uint64 length | uint32 masked_crc32c(length) | data |
  uint32 masked_crc32c(data)`` (little endian), with CRC-32C (Castagnoli) masked as
  ``((crc >> 15 | crc << 17) + 0xa282ead8) mod 2**32``;
- ``data`` is a serialized ``tf.train.Example``: ``Features features = 1``, a map
  ``string -> Feature`` (field 1), each ``Feature`` one of ``BytesList bytes_list = 1``,
  ``FloatList float_list = 2`` or ``Int64List int64_list = 3`` (packed ``value = 1``).

Only int64 and float lists are written (all the reference's features are one of the two).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import google_crc32c
import numpy as np

_MASK_DELTA = 0xA282EAD8


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``, as TFRecord frames use it (google-crc32c's C implementation: a full-scale
    preparation frames hundreds of GB)."""
    return google_crc32c.value(data)


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC (so a CRC stored inside CRC'd data does not look like one)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


# ---- protobuf wire format (only what tf.train.Example needs) ----


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64 are ten-byte two's complement varints
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def packed_varints(values: np.ndarray) -> bytes:
    """int64 ``values`` as a packed run of protobuf varints (negatives as ten-byte two's complement), encoded with numpy:
    a shard holds millions of token ids."""
    unsigned = np.asarray(values).astype(np.int64).ravel().view(np.uint64)
    if len(unsigned) == 0:
        return b""
    lengths = np.ones(len(unsigned), dtype=np.int64)
    rest = unsigned >> np.uint64(7)
    while rest.any():
        lengths += rest != 0
        rest >>= np.uint64(7)
    starts = np.cumsum(lengths) - lengths
    out = np.empty(int(lengths.sum()), dtype=np.uint8)
    for k in range(int(lengths.max())):  # the k-th byte of every value that has one
        has = lengths > k
        low = ((unsigned[has] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        out[starts[has] + k] = low | ((lengths[has] - 1 > k).astype(np.uint8) << 7)
    return out.tobytes()


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """(field number, wire type, payload) of a message; payload is bytes (type 2/5/1) or an int (type 0)."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 2:
            size, pos = _read_varint(data, pos)
            yield number, wire, data[pos : pos + size]
            pos += size
        elif wire == 0:
            value, pos = _read_varint(data, pos)
            yield number, wire, value
        elif wire == 5:
            yield number, wire, data[pos : pos + 4]
            pos += 4
        elif wire == 1:
            yield number, wire, data[pos : pos + 8]
            pos += 8
        else:
            raise ValueError(f"tf.train.Example: unsupported protobuf wire type {wire}")


def _packed_varints(data: bytes) -> np.ndarray:
    """The values of a packed run of varints, decoded with numpy (a record holds hundreds)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if len(raw) == 0:
        return np.zeros(0, dtype=np.uint64)
    last = raw < 0x80  # the final byte of each value
    if not last[-1]:
        raise ValueError("tf.train.Example: truncated packed varint")
    starts = np.concatenate(([0], np.flatnonzero(last)[:-1] + 1))
    position = np.arange(len(raw)) - np.repeat(starts, np.diff(np.concatenate((starts, [len(raw)]))))
    payload = (raw & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.bitwise_or.reduceat(payload, starts)


Feature = np.ndarray
"""One feature's values: an int64 array (Int64List) or a float32 array (FloatList)."""


def encode_example(features: dict[str, np.ndarray]) -> bytes:
    """A serialized ``tf.train.Example``; int arrays become Int64List, float arrays FloatList."""
    entries = b""
    for name, values in features.items():
        array = np.asarray(values)
        if np.issubdtype(array.dtype, np.integer):
            feature = _field(3, _field(1, packed_varints(array)))
        elif np.issubdtype(array.dtype, np.floating):
            feature = _field(2, _field(1, array.astype("<f4").tobytes()))
        else:
            raise ValueError(f"feature {name!r}: dtype {array.dtype} is neither integer nor float")
        entries += _field(1, _field(1, name.encode()) + _field(2, feature))
    return _field(1, entries)


def decode_example(data: bytes) -> dict[str, np.ndarray]:
    """The features of a serialized ``tf.train.Example`` (int64 or float32 arrays)."""
    out: dict[str, np.ndarray] = {}
    for number, _, features in _fields(data):
        if number != 1:
            continue
        for _, _, entry in _fields(features):
            name, feature = "", b""
            for key_number, _, value in _fields(entry):
                if key_number == 1:
                    name = value.decode()
                elif key_number == 2:
                    feature = value
            for kind, _, values in _fields(feature):
                items = [payload for n, _, payload in _fields(values) if n == 1]
                if kind == 3:
                    parts = [np.array([item], dtype=np.uint64) if isinstance(item, int) else _packed_varints(item) for item in items]
                    array = (np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)).view(np.int64)
                elif kind == 2:
                    array = np.frombuffer(b"".join(items), dtype="<f4").astype(np.float32)
                else:
                    raise ValueError(f"feature {name!r}: BytesList is not read here")
                out[name] = array
    return out


# ---- TFRecord framing ----


class TFRecordWriter:
    """Appends framed records to a file (``tf.io.TFRecordWriter`` without compression)."""

    def __init__(self, path: Path) -> None:
        self._handle = Path(path).open("wb")

    def write(self, record: bytes) -> None:
        length = struct.pack("<Q", len(record))
        self._handle.write(length + struct.pack("<I", masked_crc32c(length)) + record + struct.pack("<I", masked_crc32c(record)))

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: Path, check_crc: bool = True) -> Iterator[bytes]:
    """The records of a TFRecord file; a damaged frame is an error naming the file and the offset."""
    data = Path(path).read_bytes()
    pos = 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise ValueError(f"{path}: truncated record header at byte {pos}")
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        record = data[pos + 12 : pos + 12 + length]
        if len(record) != length or pos + 16 + length > len(data):
            raise ValueError(f"{path}: truncated record at byte {pos}")
        (record_crc,) = struct.unpack("<I", data[pos + 12 + length : pos + 16 + length])
        if check_crc and (masked_crc32c(header) != length_crc or masked_crc32c(record) != record_crc):
            raise ValueError(f"{path}: CRC mismatch in the record at byte {pos}: not a TFRecord file, or damaged")
        yield record
        pos += 16 + length


def read_examples(path: Path, check_crc: bool = True) -> Iterator[dict[str, np.ndarray]]:
    """The decoded ``tf.train.Example`` records of a TFRecord file."""
    for record in read_records(path, check_crc):
        yield decode_example(record)
