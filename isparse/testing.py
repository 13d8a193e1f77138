"""Checks to run on a piece of your own: a method, a value codec, a problem (or the data source that makes one).

Each check runs the piece on both engines, in-process and on Dask, and requires the same iterates to the bit (what
isparse promises for every run), then checks what the piece declares:

- :func:`check_method`: two in-process runs and a Dask run agree (its draws are functions of (seed, worker, round));
- :func:`check_codec`: a round trip within the declared bits, then by Monte Carlo the constant its ``kind``
  promises (unbiased: E Q(v) = v and E||Q(v) - v||^2 <= omega(q) ||v||^2; contractive: E||C(v) - v||^2 <= (1 -
  alpha(q)) ||v||^2; exact: Q(v) = v; a deterministic codec within its ``relative_error``);
- :func:`check_problem`: the stacked shards have the members their capabilities declare
  (:class:`~isparse.problems.stacked.Stacked`) and give each shard's gradients, a worker's bits whatever shares its
  host; the gradients match finite differences of the values; the declared L_i, L_f and mu hold on random pairs.

A check returns None, or raises AssertionError with one paragraph saying what does not hold. The Dask engine runs
on a LocalCluster of two worker processes on 127.0.0.1 that the check starts and stops, unless ``client`` is given:
the pieces' classes must be importable there (a module on PYTHONPATH, not ``__main__``), as for ``isparse-run``.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

#: the run every check builds on, unless its ``spec`` says otherwise (``RunSpec.from_dict``'s keys)
BASE = {"algorithm": "isega", "data": "breast_cancer", "workers.n": 4, "problem.lam": 0.1, "blocks.size": 2,
        "seed": 3}
#: the method each capability of the stacked shards is run with by :func:`check_problem`
RUN_WITH = {"grads_at": "isega", "grads": "ibgd", "example_grads_at": "isaga", "minibatch_grads_at": "isgd"}


def _fail(check: str, text: str):
    raise AssertionError(f"{check}: {text}")


@contextmanager
def _cluster(client):
    """``client``, or a Client of a LocalCluster of 2 worker processes on 127.0.0.1, closed on leaving."""
    if client is not None:
        yield client
        return
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as made:
        yield made


def _iterates(setup, pool, max_iter: int) -> np.ndarray:
    result = setup.run(pool, max_iter=max_iter, tol=0, keep_iterates=True, log_every=max_iter)
    return np.array(result.iterates)


def same_on_both_engines(setup, check: str, *, max_iter: int = 40, client=None) -> None:
    """Run the built ``setup`` (:func:`isparse.build`) ``max_iter`` rounds in-process twice and on Dask once, and
    require the same iterates to the bit, and that they moved; ``check`` names the caller in the message.

    Raises
    ------
    AssertionError
        The runs differ (naming the first round and coordinate), the Dask run fails, or x never moved.
    """
    from .engines import InProcessPool
    from .engines.dask import DaskPool

    aggregate = setup.spec is not None and setup.spec.messages.aggregate == "host"
    with _cluster(client) as dask_client:
        hosts = len(dask_client.scheduler_info()["workers"]) if aggregate else None   # as many machines as Dask's
        local = _iterates(setup, InProcessPool(*setup.pool_args(), hosts=hosts), max_iter)
        again = _iterates(setup, InProcessPool(*setup.pool_args(), hosts=hosts), max_iter)
        _compare(check, local, again, "two in-process runs", "its draws must be functions of (seed, worker, round) "
                 "alone (isparse.compression.sampling.Sampler), never of numpy's global random state or the clock")
        if not np.any(local[-1] != local[0]):
            _fail(check, f"x^{max_iter} equals x^0: the run did not move, so the engines' agreement proves nothing.")
        try:
            pool = DaskPool(dask_client, *setup.pool_args(), aggregate=aggregate)
            try:
                remote = _iterates(setup, pool, max_iter)
            finally:
                pool.close()
        except Exception as exc:  # noqa: BLE001 - the piece failed on Dask: that is the check's finding
            _fail(check, f"the run fails on the Dask engine with {type(exc).__name__}: {' '.join(str(exc).split())} "
                         f"(its classes must pickle and be importable on the Dask workers: defined in a module on "
                         f"PYTHONPATH, not in __main__).")
    _compare(check, local, remote, "the in-process and the Dask engine", "a worker's numbers must not depend on "
             "which engine runs it nor on which workers share its host (isparse.problems.stacked)")


def _compare(check, a, b, what, why):
    if a.shape == b.shape and np.array_equal(a, b):
        return
    if a.shape != b.shape:
        _fail(check, f"{what} give iterates of shapes {a.shape} and {b.shape}; {why}.")
    t, j = (int(v[0]) for v in np.nonzero(a != b))
    _fail(check, f"{what} give different iterates, first at round {t}, coordinate {j}: {float(a[t, j])!r} and "
                 f"{float(b[t, j])!r} (they must be the same to the bit); {why}.")


def _spec(values: dict, spec: dict | None):
    from . import RunSpec

    return RunSpec.from_dict({**BASE, **values, **(spec or {})})


def _build(values: dict, spec: dict | None, **kwargs):
    from . import build

    return build(_spec(values, spec), **kwargs)


# -- a method -----------------------------------------------------------------------------------------------------
def check_method(method, *, spec: dict | None = None, max_iter: int = 40, client=None) -> None:
    """Check a method (its class or ``algorithm=`` name) on both engines: a run of ``max_iter`` rounds on
    :data:`BASE` updated with ``spec`` (4 workers of the breast-cancer set, two per Dask host) gives the same iterates
    in-process, in-process again and on Dask (:func:`same_on_both_engines`).

    Raises
    ------
    AssertionError
        A class that is not registered, or runs that differ.
    """
    from .methods import METHODS

    name = method if isinstance(method, str) else getattr(method, "name", "")
    check = f"check_method({name or method!r})"
    if name not in METHODS or not (isinstance(method, str) or METHODS[name] is method):
        _fail(check, f"no registered method is {method!r}; a Method subclass registers when its class statement sets "
                     f"name (known: {', '.join(METHODS)}).")
    same_on_both_engines(_build({"algorithm": name}, spec), check, max_iter=max_iter, client=client)


# -- a codec ------------------------------------------------------------------------------------------------------
def check_codec(codec, *, q: int = 16, draws: int = 4000, spec: dict | None = None, max_iter: int = 40,
                client=None) -> None:
    """Check a value codec (an instance, its class or its ``messages.codec=`` name) against its declaration, on
    messages of ``q`` values, then on both engines (ISEGA on :data:`BASE` with this codec and its options).

    The messages: one of magnitudes in [0.5, 1.5] with both signs, one of magnitudes from 1e-3 to 1e3 with a zero.
    Each is coded in a batch with an empty message: the payload must hold at most the declared ``bits()`` (rounded up
    to bytes, plus a byte per bit plane) and decode to finite float64 values (an exact or unbiased codec's zero to
    0). Then, over ``draws`` messages drawn from stream CODEC (a random codec), the constant its ``kind`` promises (E Q(v) = v on the first
    message, where every value is drawn often); a mean is allowed 4.5 standard errors per value (plus 1e-6 ``|v_j|``, a
    float32 scale's rounding), the squared error 4, so a correct codec fails with probability below 1e-4.

    Raises
    ------
    AssertionError
        The codec breaks its declaration, or the engines differ.
    """
    from .compression.registry import CODECS
    from .compression.sampling import Sampler

    cls = CODECS.get(codec) if isinstance(codec, str) else codec if isinstance(codec, type) else type(codec)
    check = f"check_codec({getattr(cls, 'name', codec)!r})"
    if cls is None or CODECS.get(getattr(cls, "name", None)) is not cls:
        _fail(check, f"no registered codec is {codec!r}; a Codec subclass registers when its class statement sets "
                     f"name (known: {', '.join(CODECS)}).")
    c = cls() if isinstance(codec, (str, type)) else codec
    rng = np.random.default_rng(0)
    even = rng.choice([-1.0, 1.0], q) * rng.uniform(0.5, 1.5, q)
    mixed = rng.standard_normal(q) * 10.0 ** rng.uniform(-3, 3, q)
    mixed[0] = 0.0
    for v, mean in ((even, True), (mixed, False)):
        _codec_declaration(check, c.scaled(float(np.max(np.abs(v)))), v, draws, Sampler(7), mean)
    options = {f"messages.{k}": value for k, value in c.option_values().items()}
    setup = _build({"messages.codec": cls.name, **options}, spec)
    same_on_both_engines(setup, check, max_iter=max_iter, client=client)


def _codec_declaration(check, c, v, draws, sampler, mean: bool) -> None:
    """The round trip and the constant of ``c``'s kind on the message ``v`` (``mean``: and E Q(v) = v)."""
    q = v.size
    counts = np.array([q, 0], np.int32)
    u = c.draw(sampler, np.arange(2), 0, counts, q)
    payload = np.asarray(c.encode(v, counts, u))
    bits = int(np.sum(c.bits(counts)))
    if payload.nbytes > -(-bits // 8) + c.value_bits:
        _fail(check, f"a message of {q} values (and an empty one) is {payload.nbytes} bytes, more than its declared "
                     f"bits() = {bits} bits (value_bits {c.value_bits}, header_bits {c.header_bits}): uplink_bytes "
                     f"would count less than what travels.")
    out = np.asarray(c.decode(payload, counts))
    if out.dtype != np.float64 or out.shape != (q,) or not np.all(np.isfinite(out)):
        _fail(check, f"decode(encode(v)) of a message of {q} values gives {out.dtype} of shape {out.shape} "
                     f"({np.count_nonzero(~np.isfinite(out))} not finite); it must be {q} finite float64 values.")
    if c.kind in ("exact", "unbiased") and v[0] == 0 and out[0] != 0:   # E Q(0) = 0: only 0 can decode from 0
        _fail(check, f"declares kind {c.kind!r} but a zero value decodes to {out[0]!r}: a zero must decode to 0.")
    vv = float(v @ v)
    if c.exact:
        if not np.array_equal(out, v):
            _fail(check, f"declares kind 'exact' but decode(encode(v)) != v (largest error "
                         f"{np.max(np.abs(out - v)):.3g}).")
        return
    if not c.random:
        delta = c.relative_error()
        err = float(np.sum((out - v) ** 2))
        if c.kind == "contractive" and err > (1.0 - c.alpha(q)) * vv * (1 + 1e-12):
            _fail(check, f"||C(v) - v||^2 / ||v||^2 = {err / vv:.6g} is above 1 - alpha(q) = {1 - c.alpha(q):.6g} "
                         f"for q = {q}.")
        if delta is not None and np.sqrt(err) > delta * np.sqrt(vv) * (1 + 1e-12):
            _fail(check, f"||Q(v) - v|| / ||v|| = {np.sqrt(err / vv):.6g} is above its relative_error() = {delta:.6g}.")
        return
    ids, many = np.arange(draws), np.full(draws, q, np.int32)
    Q = np.asarray(c.decode(c.encode(np.tile(v, draws), many, c.draw(sampler, ids, 1, many, q)), many))
    Q = Q.reshape(draws, q)
    err = np.sum((Q - v) ** 2, axis=1) / vv
    low = err.mean() - 4 * err.std(ddof=1) / np.sqrt(draws)
    if c.kind == "unbiased":
        avg, se = Q.mean(axis=0), Q.std(axis=0, ddof=1) / np.sqrt(draws)
        off = np.abs(avg - v) - (4.5 * se + 1e-6 * np.abs(v))
        if mean and np.any(off > 0):
            j = int(np.argmax(off))
            how = (f"{abs(avg[j] - v[j]) / se[j]:.1f} standard errors off" if se[j] > 0 else
                   "every draw gave that value")
            _fail(check, f"declares kind 'unbiased' but E Q(v) != v: over {draws} draws value {j} averages "
                         f"{avg[j]:.6g} for v_j = {v[j]:.6g} ({how}).")
        if low > c.omega(q):
            _fail(check, f"E||Q(v) - v||^2 / ||v||^2 = {err.mean():.6g} (over {draws} draws) is above its "
                         f"omega(q) = {c.omega(q):.6g} for q = {q}.")
    elif c.kind == "contractive" and low > 1.0 - c.alpha(q):
        _fail(check, f"E||C(v) - v||^2 / ||v||^2 = {err.mean():.6g} (over {draws} draws) is above 1 - alpha(q) = "
                     f"{1 - c.alpha(q):.6g} for q = {q}.")


# -- a problem ----------------------------------------------------------------------------------------------------
def check_problem(problem, *, spec: dict | None = None, algorithms=None, pairs: int = 10, max_iter: int = 40,
                  client=None) -> None:
    """Check a problem (a :class:`~isparse.problems.base.Problem` built for ``spec``'s ``workers.n``, default 4) or
    a data source (an instance, its class or its ``data=`` name, whose problem :func:`isparse.build` makes).

    On ``pairs`` random points x (around x^0, at scales 0.01 to 100) and pairs (x, y): the stacked shards of two
    hosts and of one host have the members their capabilities declare, give each shard's ``grad`` (and
    ``example_grad``, ``minibatch_grad`` where declared) to a relative 1e-9 and a worker the same bits wherever it is
    stacked; ``grad`` and each shard's match central differences of ``f`` and ``value``; ``local_grads`` are the
    shards' and average to ``grad``; ||grad f_i(x) - grad f_i(y)|| <= L_i ||x - y||, the same with L_f for f, L_i <=
    L, and <grad f(x) - grad f(y), x - y> >= mu ||x - y||^2. Then each method of ``algorithms`` (default: one per
    declared capability, :data:`RUN_WITH`) runs on both engines (:func:`same_on_both_engines`).

    Raises
    ------
    AssertionError
        What does not hold, with the worker, the point and the numbers; or a method that cannot be built on it.
    """
    from .data.sources import DataSource
    from .problems.base import Problem
    from .runsetup import make_problem

    if isinstance(problem, Problem):
        check, values = f"check_problem({problem.name!r})", {"workers.n": problem.n}
    else:
        source = problem if isinstance(problem, (str, DataSource)) else getattr(problem, "name", problem)
        data = source.to_dict() if isinstance(source, DataSource) else {"name": source}
        check, values = f"check_problem(data={data['name']})", {"data": data}
        try:
            problem = make_problem(_spec(values, spec))
        except Exception as exc:  # noqa: BLE001 - the source failed to make its problem: the check's finding
            _fail(check, f"making its problem fails with {type(exc).__name__}: {' '.join(str(exc).split())}")
    _problem_declaration(check, problem, pairs)
    names = algorithms or dict.fromkeys(RUN_WITH[c] for c in type(problem.shards[0]).capabilities if c in RUN_WITH)
    for name in names:
        try:
            setup = _build({**values, "algorithm": name}, spec, problem=problem)
        except Exception as exc:  # noqa: BLE001
            _fail(check, f"algorithm={name} cannot be built on it: {type(exc).__name__}: {' '.join(str(exc).split())}")
        same_on_both_engines(setup, f"{check} with algorithm={name}", max_iter=max_iter, client=client)


def _close(a, b, scale) -> bool:
    return bool(np.all(np.abs(np.asarray(a) - np.asarray(b)) <= 1e-9 * (np.abs(b) + scale)))


def _problem_declaration(check, p, pairs) -> None:
    """The static part of :func:`check_problem` on the problem ``p``."""
    from .compression.blocks import BlockPartition
    from .problems.stacked import missing_members

    n, d = p.n, p.d
    if len(p.shards) != n or np.shape(p.L_i) != (n,):
        _fail(check, f"it has n = {n} workers but {len(p.shards)} shards and L_i of shape {np.shape(p.L_i)}.")
    rng = np.random.default_rng(0)
    x0 = np.asarray(p.start(), dtype=float)
    r = max(1.0, float(np.linalg.norm(x0)))
    xs = [x0 + r * s * rng.standard_normal(d) / np.sqrt(d) for s in np.geomspace(1e-2, 1e2, pairs)]
    stack = type(p.shards[0]).stack
    halves = [list(range(n))[: max(1, n // 2)], list(range(n))[max(1, n // 2):]]
    groups = [g for g in halves if g] + [list(range(n))]
    alone = {i: stack([p.shards[i]], [i]) for i in range(n)}
    blocks = BlockPartition(d, max(1, d // 7))
    for ids in groups:
        data = stack([p.shards[i] for i in ids], ids)
        lacks = missing_members(data)
        if lacks:
            _fail(check, f"its stacked shards ({type(data).__name__}) lack {', '.join(lacks)}, which their "
                         f"capabilities {tuple(data.capabilities)} need (isparse.problems.stacked.Stacked).")
        if list(data.ids) != ids or data.k != len(ids) or list(data.l) != [int(p.shards[i].l) for i in ids]:
            _fail(check, f"stacking workers {ids} gives ids {list(data.ids)}, k = {data.k}, l = {list(data.l)}; "
                         f"the shards have l = {[int(p.shards[i].l) for i in ids]}.")
        for x in xs[:: max(1, pairs // 3)]:
            _stacked_grads(check, p, data, alone, ids, x, blocks, rng)
    for x, y in zip(xs, xs[1:] + xs[:1]):
        _gradients(check, p, x, rng)
        _constants(check, p, x, y)


def _stacked_grads(check, p, data, alone, ids, x, blocks, rng) -> None:
    """The stacked gradients of workers ``ids`` against each shard's, and against each worker stacked alone."""
    caps = tuple(data.capabilities)
    want = np.stack([p.shards[i].grad(x) for i in ids])
    scale = float(np.max(np.abs(want))) + 1e-300
    k = len(ids)
    pw = np.repeat(np.arange(k), 3)
    pc = np.concatenate([np.sort(rng.choice(p.d, 3, replace=p.d < 3)) for _ in range(k)])
    tm = max(1, blocks.m // 2)
    U = np.stack([np.sort(rng.choice(blocks.m, tm, replace=False)) for _ in range(k)])
    bc, bw = blocks.coords_batch(U)
    rows = np.array([rng.integers(p.shards[i].l) for i in ids])
    batch = np.stack([rng.integers(p.shards[i].l, size=2) for i in ids])
    got = {}
    if "grads" in caps or "grads_at" in caps:
        got["grads"] = (data.grads(x), want)
    if "grads_at" in caps:
        got["grads_at"] = (data.grads_at(x, pw, pc), want[pw, pc])
        got["grads_on_blocks"] = (data.grads_on_blocks(x, U, blocks), want[bw, bc])
    shard = p.shards[ids[0]]
    if "example_grads_at" in caps:
        ex = (np.stack([p.shards[i].example_grad(x, j)[pc[pw == q]] for q, (i, j) in enumerate(zip(ids, rows))]).ravel()
              if hasattr(shard, "example_grad") else None)
        got["example_grads_at"] = (data.example_grads_at(x, rows, pw, pc), ex)
    if "minibatch_grads_at" in caps:
        mb = (np.stack([p.shards[i].minibatch_grad(x, batch[q])[pc[pw == q]] for q, i in enumerate(ids)]).ravel()
              if hasattr(shard, "minibatch_grad") else None)
        got["minibatch_grads_at"] = (data.minibatch_grads_at(x, batch, pw, pc), mb)
    for name, (value, expected) in got.items():
        if expected is not None and (np.shape(value) != np.shape(expected) or not _close(value, expected, scale)):
            _fail(check, f"its stacked {name} of workers {ids} at a point x differ from the shards' own gradients "
                         f"(largest difference {np.max(np.abs(np.asarray(value) - expected)):.3g}, gradients up to "
                         f"{scale:.3g}).")
    for q, i in enumerate(ids):
        one = alone[i]
        same = [("grads", data.grads(x)[q], one.grads(x)[0])] if "grads" in got else []
        if "grads_at" in caps:
            same.append(("grads_at", data.grads_at(x, pw, pc)[pw == q], one.grads_at(x, pw[pw == q] * 0, pc[pw == q])))
        for name, a, b in same:
            if not np.array_equal(a, b):
                _fail(check, f"worker {i}'s stacked {name} are not the same bits stacked with workers {ids} and "
                             f"alone: a worker's numbers must not depend on which workers share its host, or the "
                             f"engines' iterates differ (sum over its own rows only; isparse.problems.stacked).")


def _gradients(check, p, x, rng) -> None:
    """grad f and each shard's grad against central differences along a random direction; local_grads."""
    u = rng.standard_normal(p.d)
    u /= np.linalg.norm(u)
    h = 1e-5 * max(1.0, float(np.linalg.norm(x)))
    g = p.grad(x)
    local = np.asarray(p.local_grads(x))
    pieces = [("f", p.f, g)] + [(f"f_{i}", s.value, s.grad(x)) for i, s in enumerate(p.shards)]
    for name, value, grad in pieces:
        fd = (value(x + h * u) - value(x - h * u)) / (2 * h)
        slope = float(grad @ u)
        size = abs(value(x)) + float(np.linalg.norm(grad))
        if abs(fd - slope) > 1e-5 * (abs(slope) + size + 1e-12):
            _fail(check, f"the gradient of {name} does not match its values: along a unit direction u, grad . u = "
                         f"{slope:.9g} but ({name}(x + hu) - {name}(x - hu)) / 2h = {fd:.9g} (h = {h:.3g}).")
    scale = float(np.max(np.abs(local))) + 1e-300
    shards = np.stack([s.grad(x) for s in p.shards])
    if local.shape != (p.n, p.d) or not _close(local, shards, scale) or not _close(local.mean(axis=0), g, scale):
        _fail(check, "local_grads(x) are not the shards' gradients, or do not average to grad(x) (f = (1/n) sum_i "
                     "f_i).")


def _constants(check, p, x, y) -> None:
    """L_i, L_f, L and mu on the pair (x, y)."""
    dx = float(np.linalg.norm(x - y))
    L_i = np.asarray(p.L_i, dtype=float)
    for i, s in enumerate(p.shards):
        ratio = float(np.linalg.norm(s.grad(x) - s.grad(y))) / dx
        if ratio > L_i[i] * (1 + 1e-9) + 1e-12:
            _fail(check, f"worker {i}'s declared L_i = {L_i[i]:.6g} is below ||grad f_i(x) - grad f_i(y)|| / ||x - y|| "
                         f"= {ratio:.6g} on a random pair.")
    gx, gy = p.grad(x), p.grad(y)
    ratio = float(np.linalg.norm(gx - gy)) / dx
    if ratio > p.L_f * (1 + 1e-9) + 1e-12 or float(L_i.max()) > p.L * (1 + 1e-12):
        _fail(check, f"the declared L_f = {p.L_f:.6g} (L = {p.L:.6g}, max L_i = {L_i.max():.6g}) is below "
                     f"||grad f(x) - grad f(y)|| / ||x - y|| = {ratio:.6g} on a random pair, or L < max_i L_i.")
    curve = float((gx - gy) @ (x - y)) / dx ** 2
    if p.mu > 0 and curve < p.mu * (1 - 1e-9) - 1e-12:
        _fail(check, f"the declared mu = {p.mu:.6g} is above <grad f(x) - grad f(y), x - y> / ||x - y||^2 = "
                     f"{curve:.6g} on a random pair.")


__all__ = ["BASE", "RUN_WITH", "check_codec", "check_method", "check_problem", "same_on_both_engines"]
