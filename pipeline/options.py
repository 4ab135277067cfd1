"""The options of ``format("castle")``: Spark's Kafka source and sink option names, read
and checked on the driver so that a mistake is one clear message before any task runs.

Spark hands a data source its options as a case-insensitive dict of strings; the names
here are matched in lower case. ``kafka.<name>`` options go to the Kafka client
(confluent-kafka, i.e. librdkafka) as ``<name>``, except those Spark's Kafka source also
refuses because the source itself must control them, and the Java client's security
settings, which Spark users write as they would for ``format("kafka")`` and which are
translated to librdkafka's (``translate_security``): ``sasl.jaas.config`` (PLAIN and
SCRAM login modules) becomes ``sasl.username``/``sasl.password``, a PEM
``ssl.truststore.location`` becomes ``ssl.ca.location``, a PEM ``ssl.keystore.location``
becomes ``ssl.certificate.location`` and ``ssl.key.location`` (a PKCS#12 one stays
librdkafka's ``ssl.keystore.location``), and an empty
``ssl.endpoint.identification.algorithm`` becomes ``none``. What librdkafka cannot do
(JKS stores, a PKCS#12 truststore, Kerberos or OAuth login modules) is refused here with
one clear message.
librdkafka's own names (``sasl.username``, ``ssl.ca.location``…) work as before.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, field
from typing import Mapping

from pipeline.offsets import EARLIEST, LATEST, OffsetsError, PartitionOffsets, parse_offsets_json, parse_timestamps_json

# Spark's Kafka source refuses these: the source decides where to read and never commits.
REFUSED_CLIENT_OPTIONS = {
    "group.id": "the source reads with assign(): no group is joined (Spark's groupIdPrefix is not needed)",
    "auto.offset.reset": "use startingOffsets / endingOffsets",
    "enable.auto.commit": "the source never commits offsets: its checkpoint holds them",
    "key.deserializer": "keys are always read as binary; cast them in the query",
    "value.deserializer": "values are always read as binary; cast them in the query",
    "key.serializer": "write a string or binary key column",
    "value.serializer": "write a string or binary value column",
    "interceptor.classes": "JVM interceptors do not apply to a Python client",
}

# Spark's names for the client address; bootstrap.servers alone is accepted too (issue 7).
BOOTSTRAP_KEYS = ("kafka.bootstrap.servers", "bootstrap.servers")


class OptionsError(ValueError):
    """An option that cannot be used; the message names it."""


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items()}


def bootstrap_servers(options: Mapping[str, str]) -> str:
    for key in BOOTSTRAP_KEYS:
        if options.get(key, "").strip():
            return options[key].strip()
    raise OptionsError("option kafka.bootstrap.servers is required (e.g. .option(\"kafka.bootstrap.servers\", "
                       "\"127.0.0.1:9092\"))")


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options as librdkafka settings (confluent-kafka)."""
    config: dict[str, str] = {}
    for key, value in options.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name in REFUSED_CLIENT_OPTIONS:
            raise OptionsError(f"option kafka.{name} is not supported: {REFUSED_CLIENT_OPTIONS[name]}")
        config[name] = value
    translate_security(config)
    config["bootstrap.servers"] = bootstrap_servers(options)
    return config


# ---------------------------------------------------------------------------- security
# The Java client's security settings (what a Spark user writes for format("kafka")),
# translated to librdkafka's. Messages never quote sasl.jaas.config or a password.

SASL_CREDENTIAL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# Login modules whose options are a username and a password; also found shaded under a
# prefix (Databricks' kafkashaded.org.apache.kafka...).
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# What the other well-known modules are, and which librdkafka settings do their job.
OTHER_LOGIN_MODULES = {
    "Krb5LoginModule": "Kerberos (GSSAPI): give librdkafka's kafka.sasl.kerberos.* settings "
                       "(kafka.sasl.kerberos.keytab, kafka.sasl.kerberos.principal…)",
    "OAuthBearerLoginModule": "OAUTHBEARER: give librdkafka's kafka.sasl.oauthbearer.* settings "
                              "(kafka.sasl.oauthbearer.method=oidc, kafka.sasl.oauthbearer.client.id…)",
}
JAAS_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

# Store files taken for PEM, or PKCS#12, when no ssl.*store.type says (the Java client's
# default type is JKS, which librdkafka cannot read).
PEM_SUFFIXES = (".pem", ".crt")
PKCS12_SUFFIXES = (".p12", ".pfx")


@dataclass(frozen=True)
class JaasEntry:
    """One login module of a JAAS configuration: ``<module> <flag> key=value ... ;``."""

    module: str
    flag: str
    options: dict[str, str]


def _jaas_error(message: str) -> OptionsError:
    return OptionsError(f"option kafka.sasl.jaas.config: {message}")


def _is_word_start(char: str) -> bool:
    return char in string.ascii_letters or char in "_$-" or ord(char) >= 160


def _is_word_char(char: str) -> bool:
    return _is_word_start(char) or char in string.digits or char == "."


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _jaas_tokens(text: str) -> list[tuple[str, str]]:
    """The tokens of Java's StreamTokenizer as Kafka's JaasConfig sets it up: words
    (letters, digits, ``.-_$``), quoted strings ("..." or '...', backslash escapes as in
    Java: ``\\n``, ``\\t``, octal, ``\\x`` for any other x), single characters (``=``,
    ``;``); ``//`` and ``/* */`` comments. Each token is (kind, text), kind one of
    "word", "quoted", "char"."""
    tokens: list[tuple[str, str]] = []
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char.isspace() or ord(char) < 32:
            i += 1
        elif char == "/":
            if text.startswith("/*", i):
                close = text.find("*/", i + 2)
                if close < 0:
                    raise _jaas_error("a /* comment is not closed")
                i = close + 2
            else:  # "//", or a lone "/": Java's comment character, to the end of the line
                newline = text.find("\n", i)
                i = end if newline < 0 else newline + 1
        elif char in "\"'":
            i, value = _jaas_quoted(text, i)
            tokens.append(("quoted", value))
        elif _is_word_start(char):
            start = i
            while i < end and _is_word_char(text[i]):
                i += 1
            tokens.append(("word", text[start:i]))
        elif char in string.digits or char == ".":
            raise _jaas_error(f"unquoted number at character {i}: quote option values, e.g. key=\"value\"")
        else:
            tokens.append(("char", char))
            i += 1
    return tokens


def _jaas_quoted(text: str, start: int) -> tuple[int, str]:
    """The string quoted at ``text[start]``: (index after the closing quote, its value)."""
    quote, out, i = text[start], [], start + 1
    while i < len(text) and text[i] != quote:
        char = text[i]
        if char in "\r\n":
            break
        if char == "\\" and i + 1 < len(text):
            i += 1
            char = text[i]
            if char in "01234567":
                digits = char
                limit = 3 if char <= "3" else 2
                while len(digits) < limit and i + 1 < len(text) and text[i + 1] in "01234567":
                    i += 1
                    digits += text[i]
                char = chr(int(digits, 8))
            else:
                char = _ESCAPES.get(char, char)
        out.append(char)
        i += 1
    if i >= len(text) or text[i] != quote:
        raise _jaas_error(f"a quoted value opened at character {start} is not closed on its line")
    return i + 1, "".join(out)


def parse_jaas(text: str) -> list[JaasEntry]:
    """Kafka's ``sasl.jaas.config`` syntax, ``<LoginModuleClass> <controlFlag> (<key>=<value>)* ;``
    once or more (Kafka's JaasConfig). Messages name keys, never values."""
    tokens = _jaas_tokens(text)
    entries: list[JaasEntry] = []
    i = 0

    def take() -> tuple[str, str] | None:
        nonlocal i
        if i >= len(tokens):
            return None
        i += 1
        return tokens[i - 1]

    while i < len(tokens):
        module = take()
        if module is None or module[0] == "char":
            raise _jaas_error("expected a login module class name, e.g. "
                              f'"{PLAIN_LOGIN_MODULE} required username=\\"...\\" password=\\"...\\";"')
        flag = take()
        if flag is None or flag[0] == "char" or flag[1].lower() not in JAAS_CONTROL_FLAGS:
            raise _jaas_error(f"login module {module[1]} needs a control flag ({', '.join(JAAS_CONTROL_FLAGS)}) "
                              "after its name")
        options: dict[str, str] = {}
        while True:
            token = take()
            if token is None:
                raise _jaas_error(f"the entry of {module[1]} is not terminated by a semicolon")
            if token == ("char", ";"):
                break
            if token[0] == "char":  # not echoed: it may be part of an unquoted password
                raise _jaas_error(f"unexpected character in the options of {module[1]} (quote option values, "
                                  "e.g. key=\"value\")")
            key = token[1]
            if take() != ("char", "="):
                raise _jaas_error(f"option {key!r} of {module[1]} has no value (expected {key}=\"...\")")
            value = take()
            if value is None or value[0] == "char":
                raise _jaas_error(f"option {key!r} of {module[1]} has no value (expected {key}=\"...\")")
            options[key] = value[1]
        entries.append(JaasEntry(module[1], flag[1].lower(), options))
    if not entries:
        raise _jaas_error("names no login module")
    return entries


def _module_is(name: str, module: str) -> bool:
    return name == module or name.endswith("." + module)


def _require_credential_module(module: str) -> None:
    if _module_is(module, PLAIN_LOGIN_MODULE) or _module_is(module, SCRAM_LOGIN_MODULE):
        return
    short = module.rsplit(".", 1)[-1]
    instead = (f"for {OTHER_LOGIN_MODULES[short]}" if short in OTHER_LOGIN_MODULES else
               "for another mechanism, give its librdkafka settings (kafka.sasl.*)")
    raise _jaas_error(f"login module {module} is not supported: only PlainLoginModule and ScramLoginModule "
                      f"(a username and a password, for SASL {', '.join(SASL_CREDENTIAL_MECHANISMS)}) are translated "
                      f"for the Python Kafka client (librdkafka); {instead} instead of kafka.sasl.jaas.config")


def jaas_credentials(text: str) -> tuple[str, str, str]:
    """(module, username, password) of a PLAIN or SCRAM ``sasl.jaas.config``; anything
    else is an OptionsError."""
    # The module first: a Kerberos or OAuth line is refused for what it is, even where
    # its options would not parse.
    first = re.match(r"\s*([\w.$-]*)", text)
    if first is not None and "." in first.group(1):
        _require_credential_module(first.group(1))
    entries = parse_jaas(text)
    if len(entries) != 1:
        raise _jaas_error(f"holds {len(entries)} login modules; a client's sasl.jaas.config has exactly one")
    entry = entries[0]
    _require_credential_module(entry.module)
    scram = _module_is(entry.module, SCRAM_LOGIN_MODULE)
    missing = [key for key in ("username", "password") if key not in entry.options]
    if missing or not entry.options["username"]:
        raise _jaas_error(f"{entry.module} needs username=\"...\" and password=\"...\""
                          + (f" (no {' and no '.join(missing)})" if missing else " (the username is empty)"))
    if scram:
        extra = sorted(set(entry.options) - {"username", "password", "tokenauth"})
        if entry.options.get("tokenauth", "false").strip().lower() == "true":
            raise _jaas_error("tokenauth=true (a delegation token) is not supported: librdkafka sends no SCRAM extensions")
        if extra:
            # ScramLoginModule sends any other option as a SCRAM extension (KIP-86).
            raise _jaas_error(f"ScramLoginModule options {', '.join(extra)} would be SCRAM extensions, which librdkafka "
                              "does not send; give only username and password")
    # PlainLoginModule ignores options other than username and password, as in Java.
    return entry.module, entry.options["username"], entry.options["password"]


def _put(config: dict[str, str], name: str, value: str, java_name: str) -> None:
    """librdkafka's ``name`` from a Java option; the same setting given directly under
    librdkafka's name with another value is a conflict."""
    given = config.get(name)
    if given is not None and given != value:
        raise OptionsError(f"options kafka.{java_name} and kafka.{name} are both given and disagree; give one of them")
    config[name] = value


def _store_format(location: str, store_type: str) -> str:
    """PEM, PKCS12, JKS…: the type given, else the one the file's name says, else JKS
    (the Java client's default)."""
    if store_type:
        return store_type.upper()
    lower = location.strip().lower()
    if lower.endswith(PEM_SUFFIXES):
        return "PEM"
    if lower.endswith(PKCS12_SUFFIXES):
        return "PKCS12"
    return ""


def _translate_sasl(config: dict[str, str]) -> None:
    text = config.pop("sasl.jaas.config", None)
    if text is None:
        return
    module, username, password = jaas_credentials(text)
    protocol = config.get("security.protocol", "PLAINTEXT").strip().upper()
    mechanism = (config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "").strip()
    if protocol.startswith("SASL_") and mechanism.upper() not in SASL_CREDENTIAL_MECHANISMS:
        said = f"is {mechanism}" if mechanism else "is not given (the Java client's default is GSSAPI)"
        raise OptionsError(f"option kafka.sasl.jaas.config gives a username and password ({module.rsplit('.', 1)[-1]}), "
                           f"for kafka.sasl.mechanism {', '.join(SASL_CREDENTIAL_MECHANISMS)}, but kafka.sasl.mechanism "
                           f"{said}")
    _put(config, "sasl.username", username, "sasl.jaas.config")
    _put(config, "sasl.password", password, "sasl.jaas.config")


def _translate_truststore(config: dict[str, str]) -> None:
    location = config.pop("ssl.truststore.location", None)
    store_type = config.pop("ssl.truststore.type", "").strip()
    if location is not None:
        kind = _store_format(location, store_type)
        if kind != "PEM":
            said = (f"a {kind} truststore" if kind else
                    "a truststore of the Java client's default type JKS (no kafka.ssl.truststore.type given and the "
                    "file name does not end in .pem or .crt)")
            raise OptionsError(f"option kafka.ssl.truststore.location: {said} cannot be read by the Python Kafka client "
                               "(librdkafka has no JKS or PKCS#12 truststore); use PEM: export the CA certificates "
                               "(keytool -exportcert -rfc -keystore <store> -alias <ca> -file ca.pem, or openssl pkcs12 "
                               "-in <store.p12> -nokeys -out ca.pem) and set kafka.ssl.truststore.type=PEM")
        _put(config, "ssl.ca.location", location, "ssl.truststore.location")
    if "ssl.truststore.password" in config:
        raise OptionsError("option kafka.ssl.truststore.password cannot be used: a PEM truststore has no password "
                           "(the Java client refuses one with PEM too); remove it")


def _translate_keystore(config: dict[str, str]) -> None:
    location = config.pop("ssl.keystore.location", None)
    store_type = config.pop("ssl.keystore.type", "").strip()
    if location is None:
        if "ssl.keystore.password" in config:
            raise OptionsError("option kafka.ssl.keystore.password is given but no kafka.ssl.keystore.location")
        return
    kind = _store_format(location, store_type)
    if kind == "PEM":
        if "ssl.keystore.password" in config:
            raise OptionsError("option kafka.ssl.keystore.password cannot be used with a PEM keystore (as in the Java "
                               "client): an encrypted private key's password is kafka.ssl.key.password")
        # One file, the certificate chain and the private key: librdkafka reads the
        # certificates from it as ssl.certificate.location and the key as ssl.key.location.
        _put(config, "ssl.certificate.location", location, "ssl.keystore.location")
        _put(config, "ssl.key.location", location, "ssl.keystore.location")
    elif kind == "PKCS12":
        # librdkafka's own ssl.keystore.location is a PKCS#12 file (ssl.keystore.password).
        config["ssl.keystore.location"] = location
    else:
        said = (f"a {kind} keystore" if kind else
                "a keystore of the Java client's default type JKS (no kafka.ssl.keystore.type given and the file name "
                "does not end in .pem, .crt, .p12 or .pfx)")
        raise OptionsError(f"option kafka.ssl.keystore.location: {said} cannot be read by the Python Kafka client "
                           "(librdkafka has no JKS); use PEM: convert it (keytool -importkeystore -srckeystore <store.jks> "
                           "-destkeystore client.p12 -deststoretype PKCS12, then openssl pkcs12 -in client.p12 -out "
                           "client.pem) and set kafka.ssl.keystore.type=PEM, with kafka.ssl.key.password if the key "
                           "is encrypted")


def _translate_endpoint_identification(config: dict[str, str]) -> None:
    name = "ssl.endpoint.identification.algorithm"
    if name not in config:
        return
    algorithm = config[name].strip().lower()
    if algorithm in ("", "none"):
        config[name] = "none"  # the Java client's "" (no host name check) is librdkafka's "none"
    elif algorithm == "https":
        config[name] = "https"
    else:
        raise OptionsError(f"option kafka.{name} must be https, or empty (no host name check), got {config[name]!r}")


def translate_security(config: dict[str, str]) -> None:
    """Rewrites, in place, the Java client's security settings in ``config`` (the
    ``kafka.*`` options without their prefix) as librdkafka's; see the module docstring.
    ``security.protocol``, ``sasl.mechanism`` and ``ssl.key.password`` mean the same to
    both and stay."""
    _translate_sasl(config)
    _translate_truststore(config)
    _translate_keystore(config)
    _translate_endpoint_identification(config)


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise OptionsError(f"option {name} must be true or false, got {text!r}")


def parse_positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        number = int(text.strip())
    except ValueError:
        raise OptionsError(f"option {name} must be a positive integer, got {text!r}") from None
    if number <= 0:
        raise OptionsError(f"option {name} must be a positive integer, got {text!r}")
    return number


@dataclass(frozen=True)
class Subscription:
    """Which topics a read covers: exactly one of assign, subscribe, subscribePattern."""

    kind: str  # "assign" | "subscribe" | "subscribePattern"
    topics: tuple[str, ...] = ()
    partitions: tuple[tuple[str, int], ...] = ()
    pattern: str = ""


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribepattern") if options.get(name, "").strip()]
    if len(given) != 1:
        what = f"got {len(given)}" + (f" ({', '.join(given)})" if given else "")
        raise OptionsError(f"exactly one of the options assign, subscribe, subscribePattern must be given, {what}")
    kind = given[0]
    text = options[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise OptionsError(f"option subscribe names no topic: {text!r}")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(text)
        except re.error as exc:
            raise OptionsError(f"option subscribePattern is not a valid regular expression ({exc}): {text!r}") from None
        return Subscription("subscribePattern", pattern=text)
    return Subscription("assign", partitions=parse_assign_json(text))


def parse_assign_json(text: str) -> tuple[tuple[str, int], ...]:
    """``{"topicA":[0,1],"topicB":[2]}`` → (("topicA", 0), ("topicA", 1), ("topicB", 2)), sorted."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise OptionsError(f"assign is not valid JSON ({exc}): {text!r}; expected e.g. "
                           '{"topicA":[0,1],"topicB":[2,4]}') from None
    if not isinstance(parsed, dict) or not all(isinstance(p, list) for p in parsed.values()):
        raise OptionsError(f'assign must be a JSON object of topic to partition list, e.g. {{"topicA":[0,1]}}, got {text!r}')
    for topic, partitions in parsed.items():
        for partition in partitions:
            if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                raise OptionsError(f"assign: partition {partition!r} of topic {topic!r} is not a partition number")
    assigned = {(topic, partition) for topic, partitions in parsed.items() for partition in partitions}
    if not assigned:
        raise OptionsError(f"option assign names no partition: {text!r}")
    return tuple(sorted(assigned))


@dataclass(frozen=True)
class StartingPoint:
    """Where a read starts: "earliest", "latest", per-partition offsets, one timestamp for
    every partition, or per-partition timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: PartitionOffsets = field(default_factory=dict)
    timestamp: int = 0
    # What a timestamp with no record at or after it gives: "error" or "latest".
    no_match: str = "error"


def parse_starting(options: Mapping[str, str], streaming: bool) -> StartingPoint:
    """startingTimestamp wins over startingOffsetsByTimestamp over startingOffsets."""
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionsError(f"option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}")
    if options.get("startingtimestamp", "").strip():
        text = options["startingtimestamp"].strip()
        try:
            stamp = int(text)
        except ValueError:
            raise OptionsError(f"option startingTimestamp must be milliseconds since the epoch, got {text!r}") from None
        if stamp < 0:
            raise OptionsError(f"option startingTimestamp must be >= 0, got {text!r}")
        return StartingPoint("timestamp", timestamp=stamp, no_match=strategy)
    if options.get("startingoffsetsbytimestamp", "").strip():
        try:
            stamps = parse_timestamps_json(options["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
        except OffsetsError as exc:
            raise OptionsError(str(exc)) from None
        return StartingPoint("timestamps", offsets=stamps, no_match=strategy)
    text = options.get("startingoffsets", "").strip()
    if not text:
        return StartingPoint("latest" if streaming else "earliest")
    if text.lower() in ("earliest", "latest"):
        if text.lower() == "latest" and not streaming:
            raise OptionsError("startingOffsets=latest is for streaming queries; a batch read starts at earliest "
                               "or at given offsets")
        return StartingPoint(text.lower())
    try:
        offsets = parse_offsets_json(text, "startingOffsets")
    except OffsetsError as exc:
        raise OptionsError(str(exc)) from None
    if not streaming and any(offset == LATEST for offset in offsets.values()):
        raise OptionsError("startingOffsets: -1 (latest) is not allowed in a batch read")
    return StartingPoint("offsets", offsets=offsets)


@dataclass(frozen=True)
class EndingPoint:
    kind: str  # "latest" | "offsets"
    offsets: PartitionOffsets = field(default_factory=dict)


def parse_ending(options: Mapping[str, str], streaming: bool) -> EndingPoint:
    text = options.get("endingoffsets", "").strip()
    for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
        if streaming and options.get(name, "").strip():
            raise OptionsError(f"option {name} is for batch reads; a streaming query has no end")
    if options.get("endingtimestamp", "").strip() or options.get("endingoffsetsbytimestamp", "").strip():
        raise OptionsError("endingTimestamp / endingOffsetsByTimestamp are not supported; use endingOffsets")
    if not text or text.lower() == "latest":
        return EndingPoint("latest")
    if text.lower() == "earliest":
        raise OptionsError("endingOffsets=earliest is not allowed (the read would be empty); use latest or offsets")
    try:
        offsets = parse_offsets_json(text, "endingOffsets")
    except OffsetsError as exc:
        raise OptionsError(str(exc)) from None
    if any(offset == EARLIEST for offset in offsets.values()):
        raise OptionsError("endingOffsets: -2 (earliest) is not allowed")
    return EndingPoint("offsets", offsets=offsets)


@dataclass(frozen=True)
class SourceOptions:
    """Everything a read needs, checked. Picklable: executors get it in each partition."""

    client: dict[str, str]
    subscription: Subscription
    starting: StartingPoint
    ending: EndingPoint
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    # Seconds an executor waits for records it knows exist before failing the task
    # (Spark's kafkaConsumer.pollTimeoutMs, default 120 s = spark.network.timeout).
    poll_timeout: float
    # Seconds the driver waits for metadata and offsets before calling the broker
    # unreachable (Castle's own option, metadataTimeoutMs).
    metadata_timeout: float

    @property
    def bootstrap(self) -> str:
        return self.client["bootstrap.servers"]

    @classmethod
    def parse(cls, raw: Mapping[str, str], streaming: bool) -> "SourceOptions":
        options = lower_keys(raw)
        poll_ms = parse_positive(options, "kafkaConsumer.pollTimeoutMs") or 120_000
        metadata_ms = parse_positive(options, "metadataTimeoutMs") or 30_000
        return cls(
            client=client_config(options),
            subscription=parse_subscription(options),
            starting=parse_starting(options, streaming),
            ending=parse_ending(options, streaming),
            max_offsets_per_trigger=parse_positive(options, "maxOffsetsPerTrigger"),
            min_partitions=parse_positive(options, "minPartitions"),
            fail_on_data_loss=parse_bool(options, "failOnDataLoss", True),
            include_headers=parse_bool(options, "includeHeaders", False),
            poll_timeout=poll_ms / 1000.0,
            metadata_timeout=metadata_ms / 1000.0,
        )


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None
    metadata_timeout: float

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> "SinkOptions":
        options = lower_keys(raw)
        client = client_config(options)
        client.setdefault("acks", "all")  # issue 7: acks=all unless kafka.acks says otherwise
        topic = options.get("topic", "").strip() or None
        metadata_ms = parse_positive(options, "metadataTimeoutMs") or 30_000
        return cls(client=client, topic=topic, metadata_timeout=metadata_ms / 1000.0)
