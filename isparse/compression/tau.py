"""tau, the fraction of the m blocks each worker sends: one grammar and one rounding, for a run and the planner.

A run's ``tau`` key and every entry of isparse-plan's ``plan.taus`` are read by :meth:`Tau.parse` and turned into
(tau, tau*m) by :meth:`Tau.resolve`, so a plan's row is the run the same text starts (docs/algorithms.md §1).

Grammar:

- ``auto``: the same as ``1/n``;
- ``"<c>/n"`` (``"0.5/n"``, ``"2/n"``), c a number in (0, n]: tau follows the number of workers n, so a tau sweep
  written this way means the same at every n. c > n (tau above 1) is refused, not clipped to tau = 1;
- ``"<k>/m"`` (``"1/m"``, ``"31/m"``), k an integer in [1, m]: exactly k blocks;
- a number in [1/m, 1] (a string that reads as one too) with tau*m an integer: exactly that fraction.

Rounding, the one rule: only ``"<c>/n"`` (and ``auto``) is rounded, always up to whole blocks,
tau*m = ceil(c m / n), the smallest tau >= c/n with tau*m an integer. A number or ``"<k>/m"`` is exact: a number
whose tau*m is not an integer (within 1e-9 m) is refused, naming the two nearest allowed values. A number is what
the user means literally (it is logged as given), and a plan's row is then always a tau a run accepts as printed
(``"<k>/m"``); ``"<c>/n"`` is the form meant to follow n and m, so it is the one that rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import ConfigError, check_range

#: what the grammar allows, for messages and the docs
GRAMMAR = "auto, '<c>/n' (0 < c <= n), '<k>/m' (k an integer in [1, m]) or a number in [1/m, 1] with tau*m an integer"


@dataclass(frozen=True)
class Tau:
    """A parsed tau: its form and number; :meth:`resolve` gives (tau, tau*m) once m and n are known.

    Attributes
    ----------
    form : {"per_n", "blocks", "fraction"}
        ``"<c>/n"`` (``auto`` is ``1/n``), ``"<k>/m"``, or a number.
    number : float or int
        c, k or the fraction.
    text : str
        The value as given (``"auto"``, ``"0.5/n"``, ``"0.25"``), for messages.
    key : str
        The key errors name: ``tau`` for a run, ``plan.taus`` for a plan.
    """

    form: str
    number: float
    text: str = field(compare=False)
    key: str = field(default="tau", compare=False)

    @classmethod
    def parse(cls, value, key: str = "tau") -> "Tau":
        """The tau of ``value``: ``"auto"``, ``"<c>/n"``, ``"<k>/m"``, or a number (or its text) in (0, 1].

        Raises
        ------
        ConfigError
            (``key``) none of these forms, ``"<c>/n"`` with c not a number > 0, ``"<k>/m"`` with k not an integer
            >= 1, a number outside (0, 1]. The checks that need m and n are :meth:`resolve`'s.
        """
        if isinstance(value, Tau):
            return value if value.key == key else cls(value.form, value.number, value.text, key)
        if isinstance(value, str):
            text = value.replace(" ", "")
            if text == "auto":
                return cls("per_n", 1.0, "auto", key)
            if text.endswith(("/n", "/m")):
                try:
                    number = float(text[:-2])
                except ValueError:
                    number = float("nan")
                if text.endswith("/n"):
                    if not (number > 0 and math.isfinite(number)):
                        raise ConfigError(key, f"The '{key}' parameter written as '<c>/n' needs a number c > 0; "
                                               f"got {value!r}.")
                    return cls("per_n", number, text, key)
                if not (number >= 1 and float(number).is_integer()):
                    raise ConfigError(key, f"The '{key}' parameter written as '<k>/m' needs an integer k >= 1 (k "
                                           f"blocks); got {value!r}.")
                return cls("blocks", int(number), text, key)
            try:
                number = float(text)
            except ValueError:
                raise ConfigError(key, f"The '{key}' parameter must be {GRAMMAR}; got {value!r}.") from None
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(key, f"The '{key}' parameter must be {GRAMMAR}; got {value!r}.")
        else:
            number = value
        check_range(key, number, 0.0, 1.0, low_open=True)
        return cls("fraction", float(number), value if isinstance(value, str) else repr(value), key)

    def resolve(self, m: int, n: int) -> tuple[float, int]:
        """(tau, tau_m), the fraction tau_m / m and the blocks each worker sends, 1 <= tau_m <= m, by the module's
        one rounding rule.

        Raises
        ------
        ConfigError
            (:attr:`key`) ``"<c>/n"`` with c > n, ``"<k>/m"`` with k > m, a number below 1/m, or a number whose
            tau*m is not an integer (the message gives the two nearest allowed values).
        """
        key = self.key
        if self.form == "per_n":
            c = self.number
            if c > n * (1 + 1e-12):
                raise ConfigError(key, f"The '{key}' parameter written as '<c>/n' must have c <= n = {n} (tau = c/n "
                                       f"at most 1; tau=1 sends every block); got {self.text!r}.")
            tau_m = min(m, max(1, math.ceil(c * m / n - 1e-9)))
            return tau_m / m, tau_m
        if self.form == "blocks":
            if self.number > m:
                raise ConfigError(key, f"The '{key}' parameter written as '<k>/m' must have k <= m = {m} (k of the m "
                                       f"blocks); got {self.text!r}.")
            return self.number / m, int(self.number)
        check_range(key, self.number, 1.0 / m, 1.0, low_text="1/m")
        x = self.number * m
        if abs(x - round(x)) > 1e-9 * m:
            lo, hi = max(1, math.floor(x)), min(m, math.ceil(x))
            raise ConfigError(key, f"The '{key}' parameter times m = {m} must be an integer; got tau = {self.text} "
                                   f"(tau*m = {x:.4g}). Nearest allowed: {lo}/{m} = {lo / m:.6g} or {hi}/{m} = "
                                   f"{hi / m:.6g} (written {lo}/m or {hi}/m), or '<c>/n', which is rounded up "
                                   f"(auto = 1/n).")
        tau_m = int(round(x))
        return tau_m / m, tau_m

    def __str__(self) -> str:
        return self.text


def resolve_tau(tau, m: int, n: int, key: str = "tau") -> tuple[float, int]:
    """``Tau.parse(tau, key).resolve(m, n)``: (tau, tau*m) of a value of the module's grammar
    (arXiv:1901.09437, section 2: tau*m blocks per worker; docs/algorithms.md §1).

    Raises
    ------
    ConfigError
        See :meth:`Tau.parse` and :meth:`Tau.resolve`.

    Examples
    --------
    >>> resolve_tau("auto", m=30, n=4)        # 1/n, rounded up to whole blocks: ceil(30/4) = 8
    (0.26666666666666666, 8)
    """
    return Tau.parse(tau, key).resolve(m, n)


class TauSetting:
    """The constraint of the ``tau`` key (``isparse.params``): :meth:`Tau.parse`'s checks, which need neither m nor
    n; the value is kept as given (``auto``, the string, or the number as a float: the logged ``tau_setting``)."""

    text = GRAMMAR

    def __call__(self, key, value):
        tau = Tau.parse(value, key)
        return float(tau.number) if tau.form == "fraction" else value


__all__ = ["GRAMMAR", "Tau", "TauSetting", "resolve_tau"]
