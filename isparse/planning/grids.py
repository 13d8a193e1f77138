"""The planner's grids: ``plan.taus`` and ``plan.block_sizes`` resolved against a data set (the codecs' grid is
``isparse.compression.choices``)."""

from __future__ import annotations

from ..compression.tau import GRAMMAR, Tau
from ..errors import ConfigError


def resolve_tau_grid(taus, m: int, n: int, key: str = "plan.taus", full: bool = False) -> list[int]:
    """The grid's tau as numbers of blocks tau*m, sorted and without repeats.

    Parameters
    ----------
    taus : list or None
        Each entry is read as a run's ``tau`` (:class:`isparse.compression.tau.Tau`: the same grammar and the same
        rounding, so every row is a tau ``isparse-run`` accepts): ``auto`` (= ``1/n``), ``"<c>/n"`` (rounded up,
        tau*m = ceil(c m / n), 0 < c <= n), ``"<k>/m"`` (k blocks), or a number in [1/m, 1] with tau*m an integer.
        None: the default grid tau*m in {1, 2, 4, 8, ...} up to m, plus ceil(m/n) (tau = 1/n rounded up) and m
        (tau = 1).
    m : int
        Blocks.
    n : int
        Workers.
    key : str
        The key errors name.
    full : bool
        A full-communication method (GD): its own tau, what ``auto`` and the default grid mean, is 1 (tau*m = m).

    Returns
    -------
    list of int, each in [1, m]

    Raises
    ------
    ConfigError
        (``key``) an empty grid, or an entry :meth:`Tau.parse` or :meth:`Tau.resolve` refuses.
    """
    if full:
        taus = [1] if taus is None else [1 if str(t).strip() == "auto" else t for t in
                                         (taus if isinstance(taus, (list, tuple)) else [taus])]
    if taus is None:
        grid = {1, m, Tau.parse("auto").resolve(m, n)[1]}
        k = 2
        while k < m:
            grid.add(k)
            k *= 2
        return sorted(grid)
    taus = list(taus) if isinstance(taus, (list, tuple)) else [taus]
    if not taus:
        raise ConfigError(key, f"The '{key}' parameter must be a non-empty list of tau values ({GRAMMAR}), or null "
                               f"for the default grid; got [].")
    return sorted({Tau.parse(tau, key).resolve(m, n)[1] for tau in taus})


def resolve_block_sizes(sizes, d: int, default: int, key: str = "plan.block_sizes") -> list[int]:
    """The grid's block sizes: ``sizes`` (integers in [1, d]), or None for the config's own size only.

    Raises
    ------
    ConfigError
        (``key``) an empty list, or a size that is not an integer in [1, d].
    """
    if sizes is None:
        return [int(default)]
    sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]
    if not sizes:
        raise ConfigError(key, f"The '{key}' parameter must be a non-empty list of integers in [1, d] = [1, {d}], "
                               f"or null for blocks.size alone; got [].")
    for b in sizes:
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= d:
            raise ConfigError(key, f"The '{key}' parameter's entries must be integers in [1, d] = [1, {d}]; got {b!r}.")
    return sorted(set(int(b) for b in sizes))
