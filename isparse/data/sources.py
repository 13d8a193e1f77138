"""Data sources: where a run's problem comes from, as typed options of the ``data`` section.

Each option is a :class:`~isparse.params.Section` named by ``data.name`` and owns everything about its source:
its keys and their constraints, its checks against the rest of the run, how it is read and what problem it
makes. Nothing else tests a data set's name.

- :class:`Bundled`: scikit-learn's breast-cancer set (569 x 30, standardized), no download;
- :class:`NamedLibsvm`: a LIBSVM file of the shared data directory (a1a, a9a, w1a, w8a, mushrooms, phishing,
  german; ``data.dir`` or ``$ISPARSE_DATA_DIR``);
- :class:`LibsvmFile`: any LIBSVM file (``data.path``; ``.gz`` and ``.bz2`` are read too);
- :class:`Quadratic`: the paper's synthetic quadratic with interpolation, problem (17) of arXiv:1901.09437.

A source defined anywhere else is one class: a :class:`DataSource` subclass that sets ``name`` registers itself in
:data:`~isparse.data.registry.SOURCES` when its class statement runs, and ``data.module`` names the module to import
first (as ``algorithm.module`` does for a method).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional

import numpy as np

from .dataset import Dataset
from .named import DATA_DIR_ENV, NAMED_FILES
from .registry import SOURCES, register, source_class
from ..errors import ConfigError, DeclarationError, keys
from ..params import (Interval, ListOf, Nullable, OneOf, Section, Text, check_options_declaration, param,
                      required)
from ..paths import PathValue

EMPTY_ROWS = ("keep", "drop", "error")


@dataclass
class DataSource(Section):
    """The ``data`` section: the base of the data options, of which ``data.name`` picks one (:data:`SOURCES`).

    A subclass is a ``@dataclass`` that names itself, ``name = "<its data= id>"`` (or a ``name`` field made with
    ``param``), which registers it when its class statement runs; it declares its own keys (fields made with
    ``param``) and overrides :meth:`problem` (the problem it makes: any
    :class:`~isparse.problems.base.Problem`) and :meth:`read` (its :class:`~isparse.data.dataset.Dataset`) or
    :meth:`dataset` (None: no data set), and may override :meth:`check_run`, :meth:`file`, :meth:`cache_options`,
    :meth:`describe` and :meth:`loader`.
    """

    name: str = param("breast_cancer", Text(), "the data set (an option of the data group)")
    module: Optional[str] = param(None, Nullable(Text()), "the Python module that defines the data source, imported "
                                                          "first; null: a source of isparse.data.sources")
    lam: float = param(0.1, Interval(float, 0.0, None), "the lambda this data set is run with by default: "
                                                         "problem.lam's value when that is null")
    title: Optional[str] = param(None, Nullable(Text()),
                                 "what run names, MLflow's Dataset column, the figures and isparse-report call the data "
                                 "set (null: the file's stem for data=libsvm, the folder of data.glob's files for "
                                 "libsvm_files and parquet_files, else data.name)")
    load: str = param("client", OneOf("client", "on_worker"),
                      "where a Dask worker gets its shard: client (sent once from the client) or on_worker (read by "
                      "the worker from the same absolute path: the client and the Dask workers must share a "
                      "filesystem; engine=dask and a data file only)")

    #: whether the rows come from a file a Dask worker can read itself (``data.load=on_worker``)
    from_file: ClassVar[bool] = False
    #: the data.name values a class answers to (default: its own ``name``; the named LIBSVM sets share one class)
    names: ClassVar[tuple] = ()
    #: with engine=dask the Dask workers read the rows themselves (:meth:`read_hosted`); the client reads none
    hosted: ClassVar[bool] = False

    def display_name(self) -> str:
        """``data.title``, else :meth:`default_title`: the name runs and reports give the data set."""
        return self.title or self.default_title()

    def default_title(self) -> str:
        """The data set's name when ``data.title`` is null: ``data.name`` (a source read from a user's file
        names it by the file)."""
        return self.name

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("name")
        if isinstance(declared, str):   # name = "huber": the data.name key, with that one value
            annotations = cls.__dict__.get("__annotations__")
            if annotations is None:
                annotations = {}
                cls.__annotations__ = annotations
            annotations["name"] = "str"
            cls.name = param(declared, OneOf(declared), "the data set")
        elif not isinstance(declared, dataclasses.Field):
            return
        register(cls, cls.__dict__.get("names") or (cls.name.default,))

    @classmethod
    def choose(cls, values: Mapping, key: str) -> type:
        """The option class that ``values['name']`` names (:data:`SOURCES`; ``values['module']`` imported first); a
        subclass chooses itself.

        Raises
        ------
        ConfigError
            (``key``, default ``data``) an unknown name, listing the known ones; (``<key>.module``) a module that
            cannot be imported or declares its source wrong.
        """
        if cls is not DataSource:
            return cls
        return source_class(values.get("name", DataSource.name), values.get("module"), key or "data")

    @classmethod
    def label(cls, values, key: str) -> str:
        """How the unknown-key error names the option: ``data=<name>``."""
        return f"{key or 'data'}={values.get('name', cls.name)}"

    @classmethod
    def from_dict(cls, values, key: str = "data"):
        """The data option of ``values``, every value checked: ``values['name']`` picks the option's class; the keys
        not given take that option's defaults (a named set's ``lam``).

        Raises
        ------
        ConfigError
            An unknown name, a key the option does not have, or a value out of its range.
        """
        values = dict(values or {})
        chosen = cls.choose(values, key)
        if chosen is not cls:
            return chosen.from_dict(values, key)
        if "name" in values and values["name"] in SOURCES:   # the option's own defaults (a named set's lam)
            values = {**SOURCES[values["name"]].to_dict(), **values}
        return super().from_dict(values, key)

    # -- the run -----------------------------------------------------------------------------------------
    def check_run(self, spec, key: str = "data") -> None:
        """Checks of this source against the rest of the run ``spec`` (a :class:`~isparse.spec.RunSpec`); none for this
        base.

        Raises
        ------
        ConfigError
            A key of the run this source cannot be used with.
        """

    def dataset(self, cache_dir=None):
        """The :class:`~isparse.data.Dataset` of this source, read or taken from the cache ``cache_dir``
        (``isparse.cache``,
        keyed by the file's path, size and time and the options; None: read the file once per process); None for a
        source
        that makes its problem directly (``quadratic``).

        Raises
        ------
        ConfigError
            A missing directory or file (naming ``data.dir`` or ``data.path``).
        DataError
            A file that cannot be used (naming the file and the physical line).
        """
        import scipy.sparse as sp

        from ..cache import file_key, load_or_make, remembered

        names = ("data", "indices", "indptr", "shape", "b", "name", "source", "labels")

        def read():   # what the cache keeps of a data set: its CSR arrays, labels, name and source
            ds = self.read()
            A = ds.A.tocsr()
            return dict(zip(names, (A.data, A.indices, A.indptr, A.shape, ds.b, ds.name, ds.source, ds.labels)))

        options = self.cache_options()
        key = file_key(self.file(), options) if options is not None else None
        what = f"the data set {self.name}"
        z = remembered(key, lambda: load_or_make(cache_dir, key, read, what, logging.DEBUG, names)[0]
                       if cache_dir is not None and key is not None else read(), what)
        return Dataset(A=sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(int(v) for v in z["shape"])),
                       b=z["b"], name=str(z["name"]), source=str(z["source"]), labels=str(z["labels"]))

    def fingerprint(self) -> dict | None:
        """What a run of this source reads from its file (:meth:`file`): ``{"file": str, "bytes": int, "sha256": str}``,
        or None for a source that reads no file (``breast_cancer``, ``quadratic``).

        A checkpoint records it, and a resume whose file differs is refused (``pipeline.lifecycle``). The file is
        hashed once per process (:func:`isparse.cache.file_digest`).

        Raises
        ------
        ConfigError
            A missing directory or file (naming ``data.dir`` or ``data.path``).
        """
        from ..cache import file_digest

        file = self.file()
        return None if file is None else file_digest(file)

    def read(self):
        """Read the data set now (no cache): a :class:`~isparse.data.dataset.Dataset`."""
        raise NotImplementedError

    def file(self) -> Path | None:
        """The file the rows are read from, if any (the cache key stats it)."""
        return None

    def cache_options(self) -> dict | None:
        """What, besides :meth:`file`, identifies the data set :meth:`read` makes, for the cache's key; None (the
        default): it is not cached, every process reads it again."""
        return None

    def problem(self, spec, dataset, parts):
        """The run's problem: the linear model of ``spec.problem`` on ``dataset``, its rows split as ``parts`` (the rows
        of
        each worker, :func:`~isparse.data.dataset.split_rows`).

        Raises
        ------
        ConfigError
            A regularizer or lambda out of its range (naming the ``problem`` key).
        """
        from ..problems import GLMProblem
        from ..regularizers import make_regularizer

        p = spec.problem
        with keys(name="problem.reg", strength="problem.reg_strength", l2_strength="problem.reg_l2",
                  lower="problem.box"):
            reg = make_regularizer(p.reg, p.reg_strength, *p.box, l2_strength=p.reg_l2)
        with keys(lam=lam_key(spec)):
            return GLMProblem(dataset, parts, spec.lam, reg, p.loss, p.penalty)

    def describe(self, problem) -> str:
        """Where the rows came from (the run's param ``data.source``): the data set's source, or the problem's own
        :meth:`~isparse.problems.base.Problem.describe` when it has no data set."""
        return problem.data.source if problem.data is not None else problem.describe()

    def loader(self) -> dict:
        """This source as plain values with absolute paths: a Dask worker rebuilds it (``data.load=on_worker``)."""
        return self.to_dict()

    def read_hosted(self, client, spec):
        """The rows read by the Dask workers of ``client`` themselves (a source with :attr:`hosted`), as the shards of
        ``spec``'s workers: an object with ``problem`` (the run is built on it), ``plan`` and ``submit`` (the
        :class:`~isparse.engines.dask.DaskPool` ``source`` protocol) and ``close``."""
        raise NotImplementedError


@dataclass
class Bundled(DataSource):
    """scikit-learn's bundled Wisconsin breast-cancer set, 569 x 30, standardized; needs no download."""

    name: str = param("breast_cancer", OneOf("breast_cancer"), "the data set")
    lam: float = param(0.1, Interval(float, 0.0, None), DataSource.__dataclass_fields__["lam"].metadata["doc"])

    def read(self):
        """Via :func:`~isparse.data.libsvm.load_breast_cancer`."""
        from .libsvm import load_breast_cancer

        return load_breast_cancer()

    def cache_options(self) -> dict:
        """What the cache key holds besides the file: the set's name and scikit-learn's version."""
        from importlib.metadata import version

        return {"bundled": self.name, "scikit-learn": version("scikit-learn")}


@dataclass
class _LibsvmSource(DataSource):
    """The keys every LIBSVM source has (scikit-learn's ``load_svmlight_file`` reads it; ``isparse.data.load_libsvm``
    checks it)."""

    lam: float = param(0.001, Interval(float, 0.0, None), DataSource.__dataclass_fields__["lam"].metadata["doc"])
    n_features: Optional[int] = param(None, Nullable(Interval(int, 1, None)),
                                      "the dimension d (null: the published one of a named set, the largest index of "
                                      "another file; larger pads zero columns, below the file's largest index is an "
                                      "error)")
    empty_rows: str = param("keep", OneOf(*EMPTY_ROWS), "rows without features: keep (with a warning), drop or error")
    from_file: ClassVar[bool] = True

    def cache_options(self) -> dict:
        return {"name": self.name, "empty_rows": self.empty_rows, "n_features": self.n_features}


@dataclass
class NamedLibsvm(_LibsvmSource):
    """A LIBSVM data set of the shared directory (``data.dir``, else ``$ISPARSE_DATA_DIR``), by its name."""

    name: str = param("a1a", OneOf(*NAMED_FILES), "the data set")
    names: ClassVar[tuple] = tuple(NAMED_FILES)
    dir: Optional[str] = param(None, Nullable(PathValue(kind="dir", env=DATA_DIR_ENV)),
                               "the directory holding the LIBSVM files; null: $ISPARSE_DATA_DIR (relative paths: the "
                               "command's directory)")

    def directory(self) -> Path:
        """The data directory: ``data.dir``, else ``$ISPARSE_DATA_DIR``.

        Raises
        ------
        ConfigError
            Neither is set, or the directory does not exist.
        """
        chosen = self.dir or os.environ.get(DATA_DIR_ENV)
        if not chosen:
            raise ConfigError("data.dir", f"The 'data.dir' parameter must name the directory holding the LIBSVM "
                                          f"files (or set ${DATA_DIR_ENV}); got nothing.")
        return _declared(type(self), "dir").existing("data.dir", chosen)

    def file(self) -> Path:
        """The set's file in :meth:`directory`.

        Raises
        ------
        ConfigError
            (``data.dir``) no directory is set, it does not exist, or it does not hold the set's file.
        """
        file = self.directory() / NAMED_FILES[self.name]
        if not file.is_file():   # the path as given (a link shown as named, not resolved)
            shown = Path(str(self.dir or os.environ.get(DATA_DIR_ENV))).expanduser() / NAMED_FILES[self.name]
            raise ConfigError("data.dir", f"The data set {self.name!r} was not found: no file {str(shown)!r} (set "
                                          f"'data.dir' or ${DATA_DIR_ENV} to the directory holding "
                                          f"{NAMED_FILES[self.name]!r}).")
        return file

    def read(self):
        """d is ``n_features``, else the published one.

        Raises
        ------
        ConfigError
            A missing directory or file (``data.dir``), an ``n_features`` below the file's largest index.
        DataError
            A file that cannot be used (see :func:`~isparse.data.libsvm.load_libsvm`).
        """
        from .named import NAMED_FEATURES
        from .libsvm import load_libsvm

        d = NAMED_FEATURES[self.name] if self.n_features is None else self.n_features
        with keys(n_features="data.n_features", empty_rows="data.empty_rows"):
            return load_libsvm(self.file(), n_features=d, name=self.name, empty_rows=self.empty_rows)

    def loader(self) -> dict:
        return {**self.to_dict(), "dir": str(self.directory())}


@dataclass
class LibsvmFile(_LibsvmSource):
    """Any LIBSVM file, ``data.path`` (``.gz`` and ``.bz2`` are decompressed as scikit-learn does)."""

    name: str = param("libsvm", OneOf("libsvm"), "the data set")
    path: Optional[str] = param(None, Nullable(PathValue(kind="file")),
                                "the LIBSVM file (relative paths: the command's directory)")

    def check_run(self, spec, key="data"):
        """Require ``data.path``.

        Raises
        ------
        ConfigError
            (``<key>.path``) no file is set.
        """
        if self.path is None:
            raise required(f"{key}.path", "a LIBSVM file for data=libsvm")

    def default_title(self) -> str:
        """The file's stem, compression and LIBSVM suffixes removed (``my-data.svm.bz2`` -> ``my-data``)."""
        if self.path is None:
            return self.name
        name, suffixes = Path(self.path).name, (".gz", ".bz2", ".libsvm", ".svmlight", ".svm", ".txt")
        while any(name.endswith(s) and len(name) > len(s) for s in suffixes):
            name = name[: -len(next(s for s in suffixes if name.endswith(s)))]
        return name

    def file(self) -> Path:
        """``data.path`` resolved (``~`` expanded, links resolved).

        Raises
        ------
        ConfigError
            (``data.path``) no such file.
        """
        return _declared(type(self), "path").existing("data.path", self.path)

    def read(self):
        """Read ``data.path``.

        Raises
        ------
        ConfigError
            No such file (``data.path``), an ``n_features`` below the file's largest index.
        DataError
            A file that cannot be used (see :func:`~isparse.data.libsvm.load_libsvm`).
        """
        from .libsvm import load_libsvm

        with keys(n_features="data.n_features", empty_rows="data.empty_rows"):
            return load_libsvm(self.file(), n_features=self.n_features, empty_rows=self.empty_rows)

    def loader(self) -> dict:
        return {**self.to_dict(), "path": str(self.file())}


class _Files:
    """What the sources of a data set in many files share (:mod:`isparse.data.files`): ``data.glob``, the split by
    file, the client's fingerprint of the names, and the rows read by the Dask workers (``hosted``). A subclass
    (also a :class:`DataSource`) says how a file is read (:meth:`reader`)."""

    #: the rows are read by the Dask workers themselves (``read_hosted``), not by the client, with ``engine=dask``
    hosted: ClassVar[bool] = True

    def reader(self):
        """``reader(path)`` -> a part (:func:`isparse.data.files.read_file`'s), picklable."""
        raise NotImplementedError

    def check_run(self, spec, key="data"):
        """Require ``data.glob``; the split is by file, so ``workers.split`` must say so (contiguous, seed 0); the
        rows stay on their workers, so no regularizer R (the hosts' problem has none).

        Raises
        ------
        ConfigError
            (``<key>.glob``) no pattern; (``workers.split``, ``workers.split_seed``, ``problem.reg``) another value.
        """
        if self.glob is None:
            raise required(f"{key}.glob", f"a glob of files for data={self.name}")
        w = spec.workers
        if w.split != "contiguous":
            raise ConfigError("workers.split", f"The 'workers.split' parameter must be contiguous for "
                                               f"data={self.name} (each file's rows stay with the worker that reads "
                                               f"it, split in file order); got {w.split!r}.")
        if w.split_seed != 0:
            raise ConfigError("workers.split_seed", f"The 'workers.split_seed' parameter must be 0 for "
                                                    f"data={self.name} (no rows are shuffled: it would be ignored); "
                                                    f"got {w.split_seed!r}.")
        if spec.problem.reg != "none":
            raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be none for data={self.name} (its "
                                             f"rows stay on their workers, whose problem has no R); got "
                                             f"{spec.problem.reg!r}.")

    def default_title(self) -> str:
        """The name of the folder ``data.glob``'s files are in (``/data/clicks/part-*.svm`` -> ``clicks``)."""
        if self.glob is None:
            return self.name
        folder = Path(self.glob).expanduser().parent
        return folder.name if folder.name and not any(c in folder.name for c in "*?[") else self.name

    def files(self) -> list:
        """The files ``data.glob`` matches, sorted (a ConfigError naming ``data.glob`` when none)."""
        from .files import expand

        return expand(self.glob)

    def fingerprint(self):
        """:func:`isparse.data.files.fingerprint`: the files' names, sizes and times (none is read)."""
        from .files import fingerprint

        return fingerprint(self.files(), self.glob)

    def read(self):
        """The files read here one after the other (:func:`isparse.data.files.read_files`)."""
        from .dataset import label_mapping, to_pm1
        from .files import read_files

        files = self.files()
        A, y, self._sizes = read_files(files, self.reader(), getattr(self, "n_features", None))
        return Dataset(A=A, b=to_pm1(y, self.glob), name=self.name, source=f"{len(files)} files {self.glob}",
                       labels=label_mapping(y))

    def problem(self, spec, dataset, parts):
        """As the base's, the rows split file by file (:func:`isparse.data.files.file_parts`): ``parts`` (a
        contiguous split of all rows) is replaced."""
        from .files import file_parts, read_file

        del parts
        sizes = self.__dict__.get("_sizes") or [read_file(f, self.reader())[0].shape[0] for f in self.files()]
        k = file_parts(sizes, spec.workers.n)
        lo = np.concatenate([[0], np.cumsum(sizes)])
        split = [p for a, b in zip(lo[:-1], lo[1:]) for p in np.array_split(np.arange(a, b), k)]
        return DataSource.problem(self, spec, dataset, split)

    def read_hosted(self, client, spec):
        """The rows read by the Dask workers of ``client``, as the shards of ``spec``'s workers
        (:func:`isparse.data.files.hosted_rows`): a :class:`~isparse.data.dask_collection.DaskRows` whose ``problem``
        the run is built on."""
        from .files import fingerprint, hosted_rows

        files = self.files()
        with keys(lam=lam_key(spec)):
            return hosted_rows(client, files, self.reader(), n=spec.workers.n,
                               n_features=getattr(self, "n_features", None),
                               empty_rows=getattr(self, "empty_rows", "keep"), loss=spec.problem.loss, lam=spec.lam,
                               penalty=spec.problem.penalty, fingerprint=fingerprint(files, self.glob))


_GLOB_DOC = ("the files, a glob pattern ('**' recursive; relative: the command's directory), matched on the client; "
             "each must be readable at the same path by the Dask worker it is given to (engine=dask)")


@dataclass
class LibsvmFiles(_Files, _LibsvmSource):
    """A data set in many LIBSVM files, ``data.glob`` (:mod:`isparse.data.files`): with ``engine=dask`` each Dask
    worker reads the files given to it and the client none; in-process they are read one after the other. The rows
    of each file are split into ``workers.n / files`` workers, file after file in sorted order."""

    name: str = param("libsvm_files", OneOf("libsvm_files"), "the data set")
    glob: Optional[str] = param(None, Nullable(Text()), _GLOB_DOC)

    def reader(self):
        """:func:`isparse.data.files.read_libsvm_file` with ``data.n_features`` and ``data.empty_rows``."""
        import functools

        from .files import read_libsvm_file

        return functools.partial(read_libsvm_file, n_features=self.n_features, empty_rows=self.empty_rows)


@dataclass
class ParquetFiles(_Files, DataSource):
    """A data set in many Parquet files, ``data.glob``, as Dask users keep tables (``dask.dataframe.to_parquet``
    writes one file per partition): numeric feature columns and a binary label column. Read as
    ``data=libsvm_files`` reads (:mod:`isparse.data.files`); every file must have the same feature columns."""

    name: str = param("parquet_files", OneOf("parquet_files"), "the data set")
    glob: Optional[str] = param(None, Nullable(Text()), _GLOB_DOC)
    label: str = param("y", Text(), "the label column (two values, mapped to -1, +1: the smaller to -1)")
    features: Optional[list] = param(None, Nullable(ListOf(Text())), "the feature columns, in order (null: every column "
                                                              "but the label, in the first file's order)")
    lam: float = param(0.001, Interval(float, 0.0, None), DataSource.__dataclass_fields__["lam"].metadata["doc"])

    def reader(self):
        """:func:`isparse.data.files.read_parquet_file` with ``data.label`` and ``data.features``."""
        import functools

        from .files import read_parquet_file

        return functools.partial(read_parquet_file, label=self.label,
                                 features=None if self.features is None else list(self.features))


@dataclass
class Quadratic(DataSource):
    """The paper's synthetic quadratic with interpolation, problem (17) of arXiv:1901.09437:
    f_i(x) = x^T M_i x / 2 for each of the workers.n workers; x* = 0, grad f_i(x*) = 0 (Assumption 2),
    L = 1, mu = lambda_min(mean M_i) (> 0 needs o * workers.n >= d - 1). x^0 is standard normal."""

    name: str = param("quadratic", OneOf("quadratic"), "the data set")
    d: int = param(50, Interval(int, 2, None), "the dimension d")
    o: int = param(20, Interval(int, 1, None), "columns of each A_i (mu > 0 needs o * workers.n >= d - 1)")
    seed: int = param(0, Interval(int, 0, None), "the seed of v', the A_i and x^0")
    lam: float = param(0.0, Interval(float, 0.0, 0.0), "unused: problem (17) has no penalty (0)")

    def check_run(self, spec, key="data"):
        """Problem (17) has no penalty, loss, rows or regularizer of the linear models: a value other than their
        defaults would be ignored, so it is refused."""
        p, w = spec.problem, spec.workers
        if p.lam not in (None, 0, 0.0):
            raise ConfigError("problem.lam", f"The 'problem.lam' parameter must be 0 or null for data=quadratic "
                                             f"(problem (17) has no penalty: a lambda would be ignored); got {p.lam!r}.")
        why = "problem (17) is given per worker: it would be ignored"
        for k, value, default in (("problem.loss", p.loss, "logistic"), ("problem.penalty", p.penalty, "l2"),
                                  ("workers.split", w.split, "shuffle"), ("problem.reg", p.reg, "none")):
            if value != default:
                raise ConfigError(k, f"The '{k}' parameter must be {default} for data=quadratic ({why}); got {value!r}.")
        if w.split_seed != 0:
            raise ConfigError("workers.split_seed", f"The 'workers.split_seed' parameter must be 0 for data=quadratic "
                                                    f"(no rows are split: it would be ignored); got {w.split_seed!r}.")
        if self.load != "client":
            raise ConfigError("data.load", "The 'data.load' parameter must be client for data=quadratic (no file to "
                                           "read on the workers); got 'on_worker'.")

    def dataset(self, cache_dir=None):
        """None: problem (17) is made directly, without a data set."""
        return None

    def problem(self, spec, dataset, parts):
        """The :class:`~isparse.problems.QuadraticProblem` (arXiv:1901.09437, problem (17)) of ``d``, ``o``,
        ``workers.n``
        and ``seed``."""
        from ..problems import QuadraticProblem

        with keys(d="data.d", o="data.o", n="workers.n", seed="data.seed"):
            return QuadraticProblem(d=self.d, o=self.o, n=spec.workers.n, seed=self.seed)

    def describe(self, problem) -> str:
        """The run's ``data.source``: problem (17) of arXiv:1901.09437 with its d, o and seed."""
        return f"problem (17) of arXiv:1901.09437, d={self.d}, o={self.o}, seed={self.seed}"


def _declared(cls, name: str) -> PathValue:
    """The :class:`~isparse.paths.PathValue` a source class declares for its key ``name``."""
    constraint = cls.fields()[name].metadata["constraint"]
    return constraint.inner if isinstance(constraint, Nullable) else constraint


@dataclass
class InMemory(DataSource):
    """Rows already in memory (a scikit-learn estimator's X and y, :mod:`isparse.estimators`), given to
    ``build(spec, data=...)``; not a ``data=`` option of the command line (it names no registered source), and
    there is nothing to read.

    Made as ``InMemory(name="in_memory")``: the name the run logs as ``data.name``.
    """

    def read(self):
        """Nothing to read: the rows are given to :func:`~isparse.runsetup.build` (``data=``)."""
        raise ConfigError("data", f"The 'data' parameter {self.name!r} holds rows in memory: pass them to "
                                  f"build(spec, data=...); got nothing to read.")


def lam_key(spec) -> str:
    """The key lambda comes from: ``problem.lam``, or ``data.lam`` when that is null (:attr:`RunSpec.lam`)."""
    return "data.lam" if spec.problem.lam is None else "problem.lam"


def _option(cls, name: str) -> DataSource:
    """The option ``data=name`` of the registered ``cls`` with its defaults, its declaration checked.

    Raises
    ------
    DeclarationError
        One line naming the class: not a @dataclass, or a key not made with ``param`` or whose default its own
        constraint refuses.
    """
    where = f"{cls.__module__}.{cls.__qualname__}"
    if "__dataclass_fields__" not in cls.__dict__:
        raise DeclarationError(f"{where} must be decorated with @dataclass (its keys would not be keys, its name not "
                               f"{name!r})")
    check_options_declaration(where, cls, DataSource, "data", label=where)
    return cls(name=name)


SOURCES.check = _option


def source(name: str, **values) -> DataSource:
    """The data option ``name`` (a key of :data:`SOURCES`) with ``values`` for its keys, checked as the command line's
    ``data=<name>``.

    Raises
    ------
    ConfigError
        An unknown name, a key the option does not have, or a value out of its range.

    Examples
    --------
    >>> source("a1a", empty_rows="drop").name
    'a1a'
    """
    return DataSource.from_dict({"name": name, **values}, "data")

def load_dataset(name: str, data_dir: str | None = None, path: str | None = None, empty_rows: str | None = None,
                 n_features: int | None = None) -> Dataset:
    """Read a data set by name, without cache: the data source ``name`` of :mod:`isparse.data.sources` with these
    options, as the command line's ``data=<name>`` with ``data.dir``, ``data.path``, ``data.empty_rows`` and
    ``data.n_features`` (the dimension d of a LIBSVM file; default: the published one of a named set,
    :data:`NAMED_FEATURES`, or the largest index of a ``libsvm`` file). Labels b are in {-1, +1}.

    Raises
    ------
    ConfigError
        Unknown name, an option this source does not take, a missing directory or file (all before reading).
    DataError
        A file that cannot be used (see :func:`load_libsvm`).
    """
    given = {"dir": data_dir, "path": path, "empty_rows": empty_rows, "n_features": n_features}
    return source(name, **{k: v for k, v in given.items() if v is not None}).read()
