"""How a link of ``cluster=emulated`` is shaped: tc rates, and the ``tbf`` on each end of a host's veth pair.

The bucket is kept small (:func:`bucket_bytes`): a larger one lets a message of its size cross at line speed after
every idle period, which flatters small messages (a 64 kB bucket made 80 kB cross a 10 Mbit/s link in about 15 ms
instead of 64 ms). ``netem`` is not available on these machines, so only bandwidth is shaped.
"""

from __future__ import annotations

import re

from isparse.errors import ConfigError

#: a tc rate as this kind accepts it
RATE_FORM = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")
RATE_TEXT = "a tc rate: a positive number followed by kbit, mbit or gbit (e.g. 10mbit, 2.5mbit, 1gbit)"
_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
#: the rates (bits/s) a shaped link takes: tc applies each as given with this kind's bucket and latency. Below 1kbit
#: tc shrinks the 8 kB bucket (its send time overflows tc's 32-bit clock) and below 8 bit/s refuses the rate; above
#: about 167gbit it caps the queue (a 32-bit byte count) and so the latency, and above 5000gbit refuses the bucket
SHAPED_RANGE = (1e3, 100e9)
SHAPED_TEXT = "a tc rate from 1kbit to 100gbit (a number followed by kbit, mbit or gbit: 10mbit, 2.5mbit, 1gbit)"
#: the tbf of every shaped end: its latency, and its bucket as a fraction of a second of traffic (with a floor)
TBF_LATENCY = "200ms"
BUCKET_SECONDS = 1 / 200
BUCKET_MIN = 8 * 1024
#: the largest GSO packet either end of a link makes (bytes): smaller than the bucket, so that tbf never holds a packet
#: larger than its bucket, and a bucket this small lets no message cross at line speed
GSO_MAX = 4096


def rate_bits(key: str, value, shaped: bool = False) -> float:
    """The bits per second of a tc rate string ``value`` (``10mbit`` -> 1e7); ``shaped``: also within
    :data:`SHAPED_RANGE` (a rate a link of this kind is shaped to).

    Raises
    ------
    ConfigError
        ``value`` is not :data:`RATE_TEXT` (naming ``key``), is 0, or (``shaped``) is out of :data:`SHAPED_TEXT`.
    """
    form = RATE_FORM.match(value.strip().lower()) if isinstance(value, str) else None
    if form is None or float(form.group(1)) <= 0:
        raise ConfigError(key, f"The '{key}' parameter must be {RATE_TEXT}; got {value!r}.")
    bits = float(form.group(1)) * _UNITS[form.group(2)]
    if shaped and not SHAPED_RANGE[0] <= bits <= SHAPED_RANGE[1]:
        raise ConfigError(key, f"The '{key}' parameter must be {SHAPED_TEXT}; got {value!r}.")
    return bits


def bucket_bytes(bits: float) -> int:
    """The tbf bucket of a rate of ``bits`` per second: 5 ms of traffic, at least 8 kB (2 GSO packets of at most
    ``GSO_MAX``). A 1 ms bucket lost throughput on a loaded machine (40.8 of 50 Mbit/s in CI)."""
    return max(BUCKET_MIN, int(bits / 8 * BUCKET_SECONDS))


def tbf_command(dev: str, rate: str) -> list[str]:
    """``tc qdisc replace`` of a tbf of ``rate`` (within :data:`SHAPED_RANGE`) on ``dev``: its bucket
    (:func:`bucket_bytes`) and :data:`TBF_LATENCY`."""
    bits = rate_bits("rate", rate, shaped=True)
    return ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", str(rate).strip().lower(),
            "burst", str(bucket_bytes(bits)), "latency", TBF_LATENCY]


def per_host(rates, n: int) -> list:
    """``rates`` (one rate, None, or a list of ``n``) as a list of ``n`` (one per host)."""
    if isinstance(rates, (list, tuple)):
        if len(rates) != n:
            raise ValueError(f"{len(rates)} rates for {n} hosts")
        return list(rates)
    return [rates] * n
