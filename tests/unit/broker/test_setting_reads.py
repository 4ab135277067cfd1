"""Every read of a broker setting in broker/ and coordination/ names a declared setting
(broker/config.py SETTINGS) through the accessor of its type, so a misspelt name or a wrong
type fails here, in the unit suite, and not on the first request that happens to read it."""

from __future__ import annotations

import ast
import os

import pytest

from broker.config import BY_NAME, LISTENER_KEYS, SETTINGS, VALUE_TYPES, load_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCANNED = ("broker", "coordination")

# BrokerConfig's typed accessors, by method name. A call of anything so named counts
# (ReplicaFetcher keeps config.get_int as self._get_int for that reason).
ACCESSORS: dict[str, type] = {"get_int": int, "get_float": float, "get_str": str, "get_bool": bool}


def _called_name(call: ast.Call) -> str:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name.lstrip("_")


def _receiver(call: ast.Call) -> str:
    return ast.unparse(call.func.value) if isinstance(call.func, ast.Attribute) else ""


def _is_config(text: str) -> bool:
    return text == "config" or text.endswith(".config") or text.endswith("_values")


def setting_reads(source: str, where: str) -> tuple[list[tuple[str, str, type | None]], list[str]]:
    """The setting reads in ``source``: (place, name, the type the accessor wants, or None
    for any), and the problems found without looking names up (a name that is not a
    literal, a read by subscript)."""
    reads: list[tuple[str, str, type | None]] = []
    problems: list[str] = []
    for node in ast.walk(ast.parse(source, where)):
        place = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            name = _called_name(node)
            wanted: type | None
            if name in ACCESSORS:
                wanted = ACCESSORS[name]
                argument = node.args[0] if node.args else None
            elif name == "value" and _is_config(_receiver(node)):
                wanted, argument = None, node.args[0] if node.args else None
            elif name == "for_listener" and len(node.args) == 2:
                argument = node.args[1]
                if isinstance(argument, ast.Constant) and argument.value not in LISTENER_KEYS:
                    problems.append(f"{place}: {argument.value!r} is not a setting a listener may override")
                continue
            else:
                continue
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                reads.append((place, argument.value, wanted))
            elif wanted is not None:  # value() exists for names held in variables
                problems.append(f"{place}: {ast.unparse(node)} does not name its setting with a literal")
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant)
              and node.slice.value in BY_NAME and _is_config(ast.unparse(node.value))):
            problems.append(f"{place}: {ast.unparse(node)} reads a setting by subscript; use config.get_<type>")
    return reads, problems


def check(reads: list[tuple[str, str, type | None]]) -> list[str]:
    problems = []
    for place, name, wanted in reads:
        setting = BY_NAME.get(name)
        if setting is None:
            problems.append(f"{place}: no setting is named {name!r}")
        elif wanted is not None and setting.value_type is not wanted:
            problems.append(f"{place}: {name} is of type {setting.value_type.__name__}, read as {wanted.__name__}")
    return problems


def _tree_reads() -> tuple[list[tuple[str, str, type | None]], list[str]]:
    reads, problems = [], []
    for package in SCANNED:
        for directory, _dirs, names in os.walk(os.path.join(ROOT, package)):
            for file_name in sorted(names):
                if file_name.endswith(".py"):
                    path = os.path.join(directory, file_name)
                    with open(path, encoding="utf-8") as handle:
                        found, bad = setting_reads(handle.read(), os.path.relpath(path, ROOT))
                    reads += found
                    problems += bad
    return reads, problems


def test_every_setting_read_in_the_tree_names_a_declared_setting_of_its_type():
    reads, problems = _tree_reads()
    problems += check(reads)
    assert not problems, "\n".join(problems)
    # The scan does see the reads, in every form they take.
    seen = {(place.partition(":")[0], name) for place, name, _wanted in reads}
    assert {("broker/partitions/replica_fetcher.py", "replica.fetch.backoff.ms"),  # self._get_int("…")
            ("broker/network/connection.py", "socket.request.max.bytes"),  # node.config.get_int("…")
            ("broker/process/supervisor.py", "worker.restart.max"),  # self.config.get_int("…")
            ("coordination/open_backend.py", "zookeeper.connect"),  # config.get_str("…")
            ("broker/config.py", "node.id")} <= seen  # self.get_int("…")
    assert len(reads) > 60


def test_the_check_finds_a_misspelt_name_a_wrong_type_and_a_raw_read():
    source = ("def f(config, node):\n"
              "    a = config.get_int('log.flush.intervall.ms')\n"
              "    b = node.config.get_str('num.partitions')\n"
              "    c = node.config['num.partitions']\n"
              "    d = config.get_int(key)\n"
              "    e = config.for_listener('PLAIN', 'ssl.keystore.locaton')\n"
              "    f = config.get_bool('delete.topic.enable')\n")
    reads, problems = setting_reads(source, "example.py")
    assert check(reads) == ["example.py:2: no setting is named 'log.flush.intervall.ms'",
                            "example.py:3: num.partitions is of type int, read as str"]
    assert sorted(problems) == [
        "example.py:4: node.config['num.partitions'] reads a setting by subscript; use config.get_<type>",
        "example.py:5: config.get_int(key) does not name its setting with a literal",
        "example.py:6: 'ssl.keystore.locaton' is not a setting a listener may override"]


def test_each_setting_parses_to_its_declared_type():
    """What load_config stores is what the accessor of the setting's type promises."""
    for setting in SETTINGS:
        text = str(setting.default).lower() if isinstance(setting.default, bool) else str(setting.default)
        assert type(setting.parse(text)) is setting.value_type, setting.name
        assert setting.value_type in VALUE_TYPES
    config = load_config(None, {"log.retention.hours": "2", "log.cleaner.min.cleanable.ratio": "1"})
    for name, value in config.as_dict().items():
        assert type(value) is BY_NAME[name].value_type, name
    assert set(LISTENER_KEYS) <= set(BY_NAME)


def test_accessors_return_typed_values_and_refuse_unknown_names_and_wrong_types():
    config = load_config(None, {"num.partitions": "4", "delete.topic.enable": "false", "log.level": "debug",
                                "log.cleaner.min.cleanable.ratio": "0.25"})
    assert config.get_int("num.partitions") == 4
    assert config.get_bool("delete.topic.enable") is False
    assert config.get_str("log.level") == "DEBUG"
    assert config.get_float("log.cleaner.min.cleanable.ratio") == 0.25
    assert config.value("num.partitions") == 4
    with pytest.raises(KeyError, match="no setting is named 'num.partition'"):
        config.get_int("num.partition")
    with pytest.raises(KeyError, match="no setting is named 'num.partition'"):
        config.value("num.partition")
    # bool is a subclass of int; a flag is still not a number.
    with pytest.raises(TypeError, match="setting delete.topic.enable is of type bool, not int"):
        config.get_int("delete.topic.enable")
    with pytest.raises(TypeError, match="setting num.partitions is of type int, not str"):
        config.get_str("num.partitions")


def test_a_reloaded_value_is_what_the_next_read_returns():
    """SIGHUP updates the config in place (broker/process/reload.py); readers that ask each
    time, such as the replica fetcher, see the new value."""
    config = load_config(None, {})
    read = config.get_int
    config.update({"log.retention.ms": 60_000, "log.level": "WARNING"})
    assert read("log.retention.ms") == 60_000
    assert config.get_str("log.level") == "WARNING"
