"""Listeners, as Kafka names them: where a broker accepts connections and how each is secured.

    listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT
    advertised.listeners=PLAINTEXT://broker1:9092,SASL_SSL://broker1.example.com:9094
    inter.broker.listener.name=INTERNAL

A listener is a name, a security protocol (from the map; the four standard names map to
themselves unless the map says otherwise) and an address. Every worker binds every
listener with SO_REUSEPORT. Metadata answers with the addresses of the listener a request
came in on, so a client on the TLS port is never sent to a plaintext one; brokers reach
each other on ``inter.broker.listener.name`` (empty: the listener named PLAINTEXT when
there is one, else the first: Kafka's default is the PLAINTEXT protocol's listener, and a
Castle broker with one listener of another name should still replicate). An advertised
listener whose host is empty or a wildcard is advertised as 127.0.0.1, Castle's default
bind address (Kafka advertises the canonical host name; on a test machine that resolves
elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
DEFAULT_PROTOCOL_MAP = {name: name for name in SECURITY_PROTOCOLS}
WILDCARD_HOSTS = ("", "0.0.0.0", "::")

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # upper case, as Kafka normalises it
    protocol: str  # one of SECURITY_PROTOCOLS
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}; empty: the four standard names."""
    if not text.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    out: dict[str, str] = {}
    for item in text.split(","):
        name, sep, protocol = item.strip().partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"bad listener.security.protocol.map entry {item.strip()!r} "
                             f"(NAME:PROTOCOL, PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)})")
        if name in out:
            raise ValueError(f"listener {name} is mapped twice")
        out[name] = protocol
    return out


def parse_endpoints(text: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` -> [(NAME, host, port)]; a bare ``host:port`` is PLAINTEXT.
    Names and ports are unique (port 0, the OS's pick, may repeat)."""
    out: list[tuple[str, str, int]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, address = item.rpartition("://")
        name = (name or PLAINTEXT).upper()
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"listener {item!r} has no valid port")
        if any(n == name for n, _h, _p in out):
            raise ValueError(f"listener name {name} appears twice")
        if int(port) and any(p == int(port) for _n, _h, p in out):
            raise ValueError(f"port {port} is used by two listeners")
        out.append((name, host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no listener")
    return out


def parse_listeners(text: str, protocol_map: Mapping[str, str]) -> list[Listener]:
    listeners = []
    for name, host, port in parse_endpoints(text):
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ValueError(f"listener {name} is not in listener.security.protocol.map")
        listeners.append(Listener(name, protocol, host, port))
    return listeners


@dataclass(frozen=True, slots=True)
class ListenerSet:
    """What the broker binds, what it advertises per listener name, and the inter-broker one."""

    bound: tuple[Listener, ...]
    advertised: Mapping[str, Address]  # listener name -> what clients are told
    protocol_map: Mapping[str, str]
    inter_broker: str

    @staticmethod
    def from_settings(listeners: str, protocol_map: str, advertised: str, inter_broker: str) -> "ListenerSet":
        mapping = parse_protocol_map(protocol_map)
        bound = parse_listeners(listeners, mapping)
        names = [listener.name for listener in bound]
        announced: dict[str, Address] = {listener.name: (listener.host, listener.port) for listener in bound}
        if advertised.strip():
            announced = {}
            for name, host, port in parse_endpoints(advertised):
                if name not in names:
                    raise ValueError(f"advertised listener {name} is not among the listeners ({', '.join(names)})")
                announced[name] = (host, port)
        announced = {name: ("127.0.0.1" if host in WILDCARD_HOSTS else host, port) for name, (host, port) in announced.items()}
        chosen = inter_broker.strip().upper() or (PLAINTEXT if PLAINTEXT in names else names[0])
        if chosen not in announced:
            raise ValueError(f"inter.broker.listener.name {chosen} is not an advertised listener ({', '.join(announced)})")
        return ListenerSet(tuple(bound), announced, mapping, chosen)
