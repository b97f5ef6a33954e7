"""Both sides of the transforms' differential test: Apache Kafka's classes (TransformHarness.java) and ours, given
the same cases, each record's result in one shape."""

from __future__ import annotations

import base64
import json
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

from connectors.kafka_connect.converters import JsonConverter
from connectors.kafka_connect.registry import avro_data
from connectors.kafka_connect.data import Schema
from connectors.transforms.chain import load_chain
from connectors.transforms.record import ConnectRecord, Header

HARNESS = Path(__file__).with_name("TransformHarness.java")
_WRITER = JsonConverter(schemas_enable=True)


def kafka_results(cases: list[dict], jars: Path) -> list[list[dict]]:
    java = shutil.which("java")
    result = subprocess.run([java, "-cp", f"{jars}/*", str(HARNESS)], input=json.dumps(cases), text=True,
                            capture_output=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"the Java harness failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout)


def _written(schema: Schema | None, value: Any) -> Any:
    data = _WRITER.from_connect(schema, value)
    return None if value is None and schema is None else json.loads(data)


def _avro(value: dict) -> tuple[Schema, Any]:
    """The datum as our registry converter reads its Avro (avro_data: fastavro, then Connect's form)."""
    schema = avro_data.parse(value["schema"])
    return schema.connect, avro_data.decode(schema, memoryview(base64.b64decode(value["data"])))


def our_results(case: dict) -> list[dict]:
    try:
        chain = load_chain(case["config"]).running()
    except ValueError as exc:
        return [{"config_error": str(exc)}]
    results = []
    for raw in case["records"]:
        try:
            key_schema, key = JsonConverter(raw["key_schemas"]).to_connect(_bytes(raw["key"]))
            value_schema, value = (_avro(raw["value_avro"]) if "value_avro" in raw
                                   else JsonConverter(raw["value_schemas"]).to_connect(_bytes(raw["value"])))
            record = ConnectRecord(raw["topic"], raw["partition"], key_schema, key, value_schema, value,
                                   raw["timestamp"], tuple(Header(k, Schema("STRING"), v) for k, v in raw["headers"]),
                                   raw["offset"])
            out = chain.apply(record)
            if out is None:
                results.append({"dropped": True})
                continue
            results.append({"topic": out.topic, "partition": out.partition, "timestamp": out.timestamp,
                            "key": _written(out.key_schema, out.key), "value": _written(out.value_schema, out.value),
                            "headers": [[h.key, _written(h.schema, h.value)] for h in out.headers]})
        except Exception as exc:  # noqa: BLE001 - compared with the Java side's error, whatever it is
            results.append({"error": f"{type(exc).__name__}: {exc}"})
    return results


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


def same(ours: dict, kafka: dict) -> bool:
    """Equal results; two errors are equal whatever their words (the record goes through errors.tolerance)."""
    if "error" in ours or "error" in kafka:
        return "error" in ours and "error" in kafka
    if "config_error" in ours or "config_error" in kafka:
        return "config_error" in ours and "config_error" in kafka
    return _equal(ours, kafka)


def _float32(number: float) -> float:
    return struct.unpack(">f", struct.pack(">f", number))[0]


def _equal(ours: Any, kafka: Any) -> bool:
    """Equal JSON, where two numbers that are one float32 are equal: Java 17 writes a float with more digits than
    it needs (1.70000004E12 for the float 1.7E12 is), as Java 19 and later no longer do."""
    if isinstance(ours, dict) and isinstance(kafka, dict):
        return ours.keys() == kafka.keys() and all(_equal(ours[k], kafka[k]) for k in ours)
    if isinstance(ours, list) and isinstance(kafka, list):
        return len(ours) == len(kafka) and all(_equal(a, b) for a, b in zip(ours, kafka))
    if isinstance(ours, float) and isinstance(kafka, float) and ours != kafka:
        return abs(ours) < 3.4e38 and _float32(ours) == _float32(kafka)
    return type(ours) is type(kafka) and ours == kafka
