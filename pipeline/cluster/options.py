"""The ``cluster`` section: one typed option per kind of Dask cluster, each key with its constraint.

``cluster=<kind>`` picks the option (:data:`KINDS`): ``local`` (a LocalCluster started for the run, the default),
``address`` (a running scheduler), ``ssh`` (SSHCluster), ``slurm`` (dask-jobqueue's SLURMCluster),
``kubernetes`` (the Dask operator's KubeCluster), ``emulated`` (H hosts on this machine, each in its own network
namespace behind a shaped link: :mod:`pipeline.cluster.emulated`). Every option has the shared keys of :class:`ClusterOptions`
(timeouts, recovery, TLS). The mappings passed as they are to a cluster class (``options``,
``connect_options``, ``worker_options``, ``scheduler_options``) take new keys with ``+``:
``+cluster.options.queue=normal``.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional

from isparse.errors import ConfigError
from isparse.params import (Boolean, Constraint, FreeMapping, Interval, ListOf, Nullable, OneOf, Section, Text, param,
                            required, section)


@dataclass
class Security(Section):
    """TLS between client, scheduler and workers (``distributed.security.Security``): PEM files; all null: plain
    tcp. With an address it must then be ``tls://HOST:PORT``; a cluster started by the run uses the client
    certificate for the scheduler and workers too."""

    tls_ca_file: Optional[str] = param(None, Nullable(Text()), "the CA that signed the scheduler's and workers' "
                                                               "certificates (PEM)")
    tls_client_cert: Optional[str] = param(None, Nullable(Text()), "this client's certificate (PEM)")
    tls_client_key: Optional[str] = param(None, Nullable(Text()), "this client's key (PEM)")
    require_encryption: Optional[bool] = param(None, Nullable(Boolean()), "refuse unencrypted connections; null: "
                                                                          "true when certificates are given")


TLS_FILES = ("tls_ca_file", "tls_client_cert", "tls_client_key")


def security_from(cluster) -> object | None:
    """The ``distributed.security.Security`` of ``cluster.security`` (a :class:`ClusterOptions`), or None for plain
    tcp.

    Raises
    ------
    ConfigError
        Only some of the three files are given, a file does not exist, a ``tls://`` address has no certificates,
        or certificates are given for a ``tcp://`` address.
    """
    sec = cluster.security
    files = {k: getattr(sec, k) for k in TLS_FILES}
    address = str(cluster.address or "")
    given = [k for k, v in files.items() if v]
    if not given:
        if address.startswith("tls://"):
            raise ConfigError("cluster.security.tls_ca_file",
                              f"The 'cluster.security.tls_ca_file', 'cluster.security.tls_client_cert' and "
                              f"'cluster.security.tls_client_key' parameters must be set (PEM files) to connect to the "
                              f"TLS scheduler cluster.address={address!r}; got none.")
        if sec.require_encryption:
            raise ConfigError("cluster.security.require_encryption",
                              "The 'cluster.security.require_encryption' parameter must be false without TLS "
                              "certificates (cluster.security.tls_*); got true.")
        return None
    for key, path in files.items():
        if not path:
            raise ConfigError(f"cluster.security.{key}", f"The 'cluster.security.{key}' parameter must be set with "
                                                         f"{', '.join('cluster.security.' + g for g in given)} "
                                                         f"(a PEM file); got null.")
        if not Path(str(path)).is_file():
            raise ConfigError(f"cluster.security.{key}", f"The 'cluster.security.{key}' parameter must be an existing "
                                                         f"PEM file; got {str(path)!r} (no such file).")
    if address and not address.startswith("tls://"):
        raise ConfigError("cluster.address", f"The 'cluster.address' parameter must be a tls://HOST:PORT address when "
                                             f"cluster.security.tls_* are set; got {address!r}.")
    from distributed.security import Security as DaskSecurity

    cert, key = str(files["tls_client_cert"]), str(files["tls_client_key"])
    roles = {} if address else {"tls_scheduler_cert": cert, "tls_scheduler_key": key,   # a LocalCluster: the same
                                "tls_worker_cert": cert, "tls_worker_key": key}         # certificate for every role
    return DaskSecurity(tls_ca_file=str(files["tls_ca_file"]), tls_client_cert=cert, tls_client_key=key,
                        require_encryption=sec.require_encryption is not False, **roles)


class SchedulerAddress(Text):
    """A Dask scheduler's address: ``tcp://HOST:PORT``, ``tls://HOST:PORT`` or ``HOST:PORT`` (tcp); HOST a name, an
    IPv4 address or a bracketed IPv6 one, PORT in [1, 65535]."""

    _FORM = re.compile(r"^(?:(?:tcp|tls)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$")

    def __init__(self):
        super().__init__()
        self.text = "tcp://HOST:PORT, tls://HOST:PORT or HOST:PORT"

    def __call__(self, key, value):
        value = super().__call__(key, value)
        form = self._FORM.match(value.strip())
        if form is None or not 1 <= int(form.group(1)) <= 65535:
            raise ConfigError(key, f"The '{key}' parameter must be a scheduler address, {self.text} (PORT in "
                                   f"[1, 65535]); got {value!r}.")
        return value.strip()


@dataclass
class ClusterOptions(Section):
    """The keys every cluster option has. ``cluster=<kind>`` picks the option (:data:`KINDS`)."""

    kind: str = param("local", Text(), "the kind of cluster (cluster=<kind>)")
    address: Optional[str] = param(None, Nullable(SchedulerAddress()), "tcp://HOST:PORT or tls://HOST:PORT of a running "
                                                           "scheduler (null: the run starts the cluster)")
    timeout: float = param(10.0, Interval(float, 0.0, None, low_open=True),
                           "seconds to wait for the scheduler (and, for started clusters, the workers)")
    direct_to_workers: bool = param(True, Boolean(), "actor calls go straight to the workers, not through the "
                                                     "scheduler (the client must reach them)")
    snapshot_every: int = param(50, Interval(int, 0, None),
                                "rounds between copies of the workers' states to the client (fewer for large d: the "
                                "models kept to replay stay under 32 MiB; 0: no recovery, a lost worker fails the "
                                "run); a lost Dask worker's logical workers are recreated elsewhere, restored and "
                                "replayed")
    worker_timeout: float = param(60.0, Interval(float, 0.0, None, low_open=True),
                                  "an actor call or a round that fails or takes longer than this many seconds marks "
                                  "its Dask worker lost")
    measure_every: int = param(50, Interval(int, 1, None), "rounds between measurements of the serialized size of "
                                                           "each Dask worker's reply (uplink_bytes_serialized)")
    rounds: str = param("stream", OneOf("stream", "actor"),
                        "how a round travels: stream (one persistent connection per Dask worker, opened once, TLS "
                        "when the cluster uses TLS) or actor (one Dask actor call per Dask worker per round: a few ms "
                        "more per round, docs/benchmarks.md item 2)")
    security: Security = section(Security)

    #: the class the kind starts, the package it needs and the pip extra (deployed kinds only)
    deployer: ClassVar[tuple | None] = None

    @classmethod
    def choose(cls, values, key):
        if cls is not ClusterOptions:
            return cls
        kind = values.get("kind", "local")
        if kind not in KINDS:
            raise ConfigError(f"{key}.kind", f"The '{key}.kind' parameter must be one of {', '.join(KINDS)}; "
                                             f"got {kind!r}.")
        return KINDS[kind]

    @classmethod
    def label(cls, values, key):
        return f"{key or 'cluster'}={values.get('kind', 'local')}"

    @classmethod
    def from_dict(cls, values, key=""):
        """As :meth:`Section.from_dict`; a ``link.*`` key on a kind without emulated links is refused by its full
        name (not as the unknown ``cluster.link``)."""
        if cls is not ClusterOptions and "link" not in cls.fields():
            for k, v in (values or {}).items():
                if k == "link" or (isinstance(k, str) and k.startswith("link.")):
                    name = k
                    if k == "link" and isinstance(v, dict) and v:
                        name, v = f"link.{next(iter(v))}", next(iter(v.values()))
                    full = f"{key or 'cluster'}.{name}"
                    raise ConfigError(full, f"The '{full}' parameter is for cluster=emulated only (the kind whose "
                                            f"links are emulated): {cls.label(values, key)} has no emulated link and "
                                            f"would ignore it; got {v!r}.")
        return super().from_dict(values, key)

    def check_run(self) -> None:
        """Checks that need no cluster (with engine=dask): the extra of a deployed kind installed, the address
        where the kind needs one (or none), TLS settings that fit (:func:`security_from`).

        Raises
        ------
        ConfigError
            Naming the key (``cluster.kind`` with ``pip install 'isparse[<extra>]'``, ``cluster.address``, ...).
        """
        if self.deployer is not None:
            _, cls, package, extra = self.deployer
            if importlib.util.find_spec(package) is None:
                raise ConfigError("cluster.kind", f"The 'cluster.kind' parameter {self.kind} (cluster={self.kind}, "
                                                  f"{cls}) needs the package {package.replace('_', '-')}, which is not "
                                                  f"installed: pip install 'isparse[{extra}]'.")
            if self.address:
                raise ConfigError("cluster.address", f"The 'cluster.address' parameter must be null for "
                                                     f"cluster={self.kind} (the run starts the cluster); got "
                                                     f"{self.address!r}.")
        security_from(self)

    def expected_workers(self) -> int:
        """How many Dask workers a cluster the run starts will have."""
        return 1

    def tags(self) -> dict:
        """The MLflow tags of a run on this cluster: ``cluster`` (the kind); an emulated one adds
        ``cluster_emulated`` (its hosts and rates)."""
        return {"cluster": self.kind}


@dataclass
class LocalClusterOptions(ClusterOptions):
    """A LocalCluster of worker processes started for the run and closed at the end (the default), bound to
    127.0.0.1; with ``cluster.address`` set, a running scheduler is used instead (nothing is started or closed)."""

    kind: str = param("local", OneOf("local"), "the kind of cluster")
    n_workers: int = param(2, Interval(int, 1, None), "Dask worker processes of the LocalCluster")
    threads_per_worker: int = param(1, Interval(int, 1, None), "threads of each worker process")
    host: str = param("127.0.0.1", Text(), "the address the scheduler and workers bind to")
    dashboard_address: str = param("127.0.0.1:0", Text(), "the dashboard's address (port 0: a free one)")
    malloc_trim_threshold: Optional[int] = param(
        268435456, Nullable(Interval(int, 0, None)),
        "glibc's MALLOC_TRIM_THRESHOLD_ of the worker processes, bytes (Dask's 65536 made a host's worker step "
        "1.3-1.8x slower than in the client: docs/benchmarks.md, item 2); null keeps Dask's")

    def expected_workers(self) -> int:
        return self.n_workers


@dataclass
class AddressClusterOptions(ClusterOptions):
    """An existing Dask scheduler (``dask scheduler`` / ``dask worker``, SLURM, Kubernetes, ...): nothing is
    started or closed. The workers must be able to import isparse."""

    kind: str = param("address", OneOf("address"), "the kind of cluster")

    def check_run(self):
        if not self.address:
            raise required("cluster.address", "tcp://HOST:PORT or tls://HOST:PORT of a running scheduler, for "
                                              "cluster=address")
        super().check_run()


def _slurm_options():
    return {"cores": 1, "processes": 1, "memory": "4GB", "walltime": "01:00:00",
            # the dashboards bind to loopback (the scheduler's on this host, each worker's on its node)
            "scheduler_options": {"dashboard_address": "127.0.0.1:8787"},
            "worker_extra_args": ["--dashboard-address", "127.0.0.1:0"]}


@dataclass
class SlurmClusterOptions(ClusterOptions):
    """Dask workers as SLURM jobs (dask_jobqueue.SLURMCluster), submitted for the run and cancelled at the end;
    needs ``pip install 'isparse[slurm]'``. ``options`` are SLURMCluster's keyword arguments (cores, memory,
    processes, queue, account, walltime, interface, log_directory, job_extra_directives, ...; not in the defaults:
    add them with ``+cluster.options.queue=...``); ``log_directory`` defaults to the run's directory."""

    kind: str = param("slurm", OneOf("slurm"), "the kind of cluster")
    jobs: int = param(2, Interval(int, 1, None), "SLURM jobs to start; each runs options.processes Dask workers")
    timeout: float = param(600.0, Interval(float, 0.0, None, low_open=True),
                           "seconds to wait for the workers (jobs may queue)")
    options: dict = param(constraint=FreeMapping(), factory=_slurm_options, doc="SLURMCluster's keyword arguments")
    deployer: ClassVar[tuple] = ("dask_jobqueue", "SLURMCluster", "dask_jobqueue", "slurm")

    def expected_workers(self) -> int:
        return self.jobs * int(self.options.get("processes", 1) or 1)


@dataclass
class SshClusterOptions(ClusterOptions):
    """A cluster started over SSH (distributed.deploy.ssh.SSHCluster) and closed at the end; needs
    ``pip install 'isparse[ssh]'``. The first host runs the scheduler, the others one Dask worker each; every host
    needs this package installed."""

    kind: str = param("ssh", OneOf("ssh"), "the kind of cluster")
    hosts: list = param(constraint=ListOf(Text()), factory=lambda: ["127.0.0.1"] * 3,
                        doc="the first runs the scheduler, each other one Dask worker")
    connect_options: dict = param(constraint=FreeMapping(), factory=dict,
                                  doc="asyncssh.connect's keyword arguments (username, known_hosts, client_keys, port)")
    worker_options: dict = param(constraint=FreeMapping(), factory=lambda: {"nthreads": 1},
                                 doc="the Nanny's / Worker's keyword arguments")
    scheduler_options: dict = param(constraint=FreeMapping(), factory=lambda: {"dashboard_address": "127.0.0.1:8787"},
                                    doc="the Scheduler's keyword arguments (the dashboard binds to loopback)")
    remote_python: Optional[str] = param(None, Nullable(Text()), "the python to start on the hosts")
    deployer: ClassVar[tuple] = ("distributed.deploy.ssh", "SSHCluster", "asyncssh", "ssh")

    def expected_workers(self) -> int:
        return max(len(self.hosts) - 1, 1)


@dataclass
class KubernetesClusterOptions(ClusterOptions):
    """A Dask cluster on Kubernetes through the Dask operator (dask_kubernetes.operator.KubeCluster), created for
    the run and deleted at the end; needs ``pip install 'isparse[kubernetes]'`` and the operator. The image must
    contain this package; ``options`` are KubeCluster's keyword arguments (name, image, namespace, resources, ...)."""

    kind: str = param("kubernetes", OneOf("kubernetes"), "the kind of cluster")
    n_workers: int = param(2, Interval(int, 1, None), "Dask workers")
    timeout: float = param(600.0, Interval(float, 0.0, None, low_open=True), "seconds to wait for the workers")
    options: dict = param(constraint=FreeMapping(),
                          factory=lambda: {"name": "isparse", "image": "ghcr.io/dask/dask:latest"},
                          doc="KubeCluster's keyword arguments (replace the image with one that has isparse)")
    deployer: ClassVar[tuple] = ("dask_kubernetes.operator", "KubeCluster", "dask_kubernetes", "kubernetes")

    def expected_workers(self) -> int:
        return self.n_workers

    def check_run(self):
        super().check_run()
        if security_from(self) is not None:
            raise ConfigError("cluster.security.tls_ca_file", "The 'cluster.security.tls_*' parameters must be null "
                                                              "for cluster=kubernetes (KubeCluster takes no Security; "
                                                              "configure TLS in the operator's cluster spec); got "
                                                              "certificates.")


class Rates(Constraint):
    """A tc rate (``10mbit``: a positive number followed by kbit, mbit or gbit), a list of them (one per host), or
    null (not shaped); ``shaped``: each also a rate tc shapes a link to as given
    (``pipeline.cluster.shaping.SHAPED_RANGE``)."""

    def __init__(self, shaped: bool = False):
        from .shaping import RATE_TEXT, SHAPED_TEXT

        self.shaped = shaped
        self.rate_text = SHAPED_TEXT if shaped else RATE_TEXT
        self.text = f"null, {self.rate_text}, or a list of such rates (one per host)"

    def __call__(self, key, value):
        from .shaping import rate_bits

        if value is None:
            return None
        if isinstance(value, (list, tuple)):
            if not value:
                raise ConfigError(key, f"The '{key}' parameter must be {self.text}; got [].")
            for k, v in enumerate(value):
                try:
                    rate_bits(key, v, self.shaped)
                except ConfigError:
                    raise ConfigError(key, f"The '{key}' parameter must be {self.rate_text}, or a list of such rates "
                                           f"(one per host); got {v!r} at position {k}.") from None
            return [str(v).strip().lower() for v in value]
        rate_bits(key, value, self.shaped)
        return str(value).strip().lower()


class PrivateSubnet(Text):
    """A private IPv4 network with a prefix of at most /23 (cut into /24s, one per host), e.g. 10.77.0.0/16."""

    def __init__(self):
        super().__init__()
        self.text = "a private IPv4 network of prefix /23 or shorter, e.g. 10.77.0.0/16 (host k uses its k-th /24)"

    def __call__(self, key, value):
        import ipaddress

        value = super().__call__(key, value)
        try:
            net = ipaddress.ip_network(value.strip(), strict=True)
        except ValueError:
            net = None
        if net is None or net.version != 4 or not net.is_private or net.prefixlen > 23:
            raise ConfigError(key, f"The '{key}' parameter must be {self.text}; got {value!r}.")
        return str(net)


@dataclass
class LinkSpec(Section):
    """The emulated link of each host (tc tbf on both ends of its veth pair)."""

    up: Any = param("100mbit", Rates(shaped=True), "each host's uplink (worker -> master: the egress of its "
                                                   "namespace's veth end): a tc rate (10mbit, 1gbit), a list of one "
                                                   "per host, or null (not shaped)")
    down: Any = param("100mbit", Rates(shaped=True), "each host's downlink (master -> worker: the egress of the root "
                                                     "namespace's veth end), as up")


def _rates_fit_hosts(cluster, key) -> None:
    for name in ("up", "down"):
        rates = getattr(cluster.link, name)
        if isinstance(rates, list) and len(rates) != cluster.n_workers:
            full = f"{key or 'cluster'}.link.{name}"
            raise ConfigError(full, f"The '{full}' parameter must be one rate or a list of {key or 'cluster'}.n_workers"
                                    f" = {cluster.n_workers} rates (one per host); got {len(rates)}.")
    import ipaddress

    hosts = len(list(ipaddress.ip_network(cluster.subnet).subnets(new_prefix=24))) - 1
    if cluster.n_workers > hosts:
        full = f"{key or 'cluster'}.n_workers"
        raise ConfigError(full, f"The '{full}' parameter must be in [1, {hosts}] for cluster.subnet={cluster.subnet} "
                                f"(one /24 per host); got {cluster.n_workers}.")


@dataclass
class EmulatedClusterOptions(ClusterOptions):
    """H machines on one box (root only; ``ip`` and ``tc``): each host one Dask worker process (1 thread) in its own
    network namespace behind a veth pair shaped with ``tc tbf`` at ``link.up`` (worker -> master) and ``link.down``
    (master -> worker); the scheduler and the master in the root namespace; addresses from ``subnet``. Started for
    the run and removed at its end, whatever the end (``pipeline.cluster.emulated``)."""

    kind: str = param("emulated", OneOf("emulated"), "the kind of cluster")
    n_workers: int = param(2, Interval(int, 1, None), "H, the emulated hosts: Dask worker processes (1 thread each), "
                                                      "each in its own network namespace")
    link: LinkSpec = section(LinkSpec, "each host's link")
    subnet: str = param("10.77.0.0/16", PrivateSubnet(), "the private network the hosts' links take addresses from "
                                                         "(it stays inside this machine)")
    timeout: float = param(60.0, Interval(float, 0.0, None, low_open=True),
                           "seconds to wait for the scheduler and the workers")
    malloc_trim_threshold: Optional[int] = param(
        268435456, Nullable(Interval(int, 0, None)),
        "glibc's MALLOC_TRIM_THRESHOLD_ of the worker processes, bytes (as cluster=local); null keeps the "
        "environment's")
    rules: ClassVar[tuple] = (_rates_fit_hosts,)

    def expected_workers(self) -> int:
        return self.n_workers

    def check_run(self):
        """Also: root, ``ip`` and ``tc`` (``pipeline.cluster.machine.require_available``), no address, no TLS.

        Raises
        ------
        ConfigError
            Naming ``cluster.kind`` (where it cannot run), ``cluster.address`` or ``cluster.security.tls_ca_file``.
        """
        from .machine import require_available

        if self.address:
            raise ConfigError("cluster.address", f"The 'cluster.address' parameter must be null for cluster=emulated "
                                                 f"(the run starts the cluster); got {self.address!r}.")
        if security_from(self) is not None:
            raise ConfigError("cluster.security.tls_ca_file", "The 'cluster.security.tls_*' parameters must be null "
                                                              "for cluster=emulated (plain tcp inside this machine); "
                                                              "got certificates.")
        require_available()

    def tags(self) -> dict:
        from .emulated import EmulatedCluster

        return {**super().tags(), "cluster_emulated": EmulatedCluster(self.n_workers, self.link.up, self.link.down,
                                                                      self.subnet).describe()}


#: cluster.kind -> its option class (``cluster=<kind>``)
KINDS = {"local": LocalClusterOptions, "address": AddressClusterOptions, "ssh": SshClusterOptions,
         "slurm": SlurmClusterOptions, "kubernetes": KubernetesClusterOptions, "emulated": EmulatedClusterOptions}
